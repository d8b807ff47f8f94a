//! Type arguments of a generic class read through its methods' signatures
//! (ECMAScript's facts state them; every language's evaluator reads them
//! the same way): a method of `class Chain<T>` whose signature says `T`
//! means the receiver's type argument when the receiver is declared
//! `Chain<Bead>` (a field, of its class or a base, a parameter or a local
//! with that type annotation).
//!
//! A value ([`Val`]) carries no type arguments, so they are read again from
//! the receiver's declaration, as written, where it is needed.

use std::collections::HashSet;

use super::eval::{Ctx, Val};
use super::ids::SymId;
use super::world::World;
use crate::facts::model::{EACH, TYPE_PARAMS, UNION, split_top, type_arguments};

impl World {
    /// The declared type of parameter `key` (`#arg:0#arg:1`, see
    /// [`crate::facts::model::ARG`]) of method `f`, called as `outer`
    /// (`this.children.forEach`), when that type is a type parameter of the
    /// method's class (`(cur: T) => void` in `class Chain<T>`) and the
    /// receiver is declared with type arguments (`children: Chain<Bead>`):
    /// that argument, read where the receiver's type is written. Each
    /// alternative of a union is read so; one that is no type parameter is
    /// read as the method's signature writes it. Empty when the type names
    /// no type parameter, or the receiver's arguments are unknown (the
    /// caller then reads the signature as it is).
    pub(super) fn generic_parameter(
        &self,
        cx: &Ctx,
        outer: &str,
        f: SymId,
        key: &str,
        depth: u32,
    ) -> Vec<Val> {
        let Some((recv, _)) = outer.rsplit_once('.') else {
            return Vec::new();
        };
        let fcx = self.ctx_at_end(f);
        let Some((raw, true, _)) = self.binding_of(&fcx, key) else {
            return Vec::new();
        };
        let Some(params) = self.binding_expr(&fcx, TYPE_PARAMS) else {
            return Vec::new();
        };
        let params: Vec<&str> = params.split(',').collect();
        let alts = split_top(raw.strip_prefix(EACH).unwrap_or(raw), UNION);
        if !alts.iter().any(|a| params.contains(a)) {
            return Vec::new();
        }
        let Some(owner) = self.parent_of(f) else {
            return Vec::new();
        };
        let Some((args, dcx)) = self.declared_type_arguments(cx, recv, owner, depth) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for alt in alts {
            match params.iter().position(|p| *p == alt) {
                Some(i) => {
                    if let Some(a) = args.get(i).filter(|a| !a.is_empty()) {
                        out.extend(self.eval_type(&dcx, a, depth + 1));
                    }
                }
                None => out.extend(self.eval_type(&fcx, alt, depth + 1)),
            }
        }
        out.dedup();
        out
    }

    /// The type arguments of the declared type of `recv` at `cx` when that
    /// type is generic class-like `owner` written with arguments
    /// (`Chain⟨Bead⟩`), with where they are read. `recv` is a name (a
    /// parameter or local annotated so) or a path whose last segment is a
    /// field so declared on the class of the path before it or a base.
    fn declared_type_arguments(
        &self,
        cx: &Ctx,
        recv: &str,
        owner: SymId,
        depth: u32,
    ) -> Option<(Vec<String>, Ctx)> {
        let plain = |s: &str| {
            !s.is_empty()
                && s.chars()
                    .all(|c| c.is_alphanumeric() || matches!(c, '_' | '$' | '#'))
        };
        let declared: Vec<(String, Ctx)> = match recv.rsplit_once('.') {
            None if plain(recv) => match self.binding_of(cx, recv) {
                Some((e, true, byte)) => vec![(
                    e.to_string(),
                    Ctx {
                        file: cx.file,
                        byte,
                        scope: cx.scope,
                    },
                )],
                _ => Vec::new(),
            },
            Some((before, last)) if plain(last) => self
                .eval_path(cx, before, depth + 1, true)
                .into_iter()
                .filter_map(|v| match v {
                    Val::Inst(t) => self.declared_field(t, last, depth + 1),
                    _ => None,
                })
                .collect(),
            _ => Vec::new(),
        };
        declared.into_iter().find_map(|(e, dcx)| {
            let (head, args, "") = type_arguments(&e)? else {
                return None;
            };
            let names_owner = self
                .eval_path(&dcx, head, depth + 1, false)
                .into_iter()
                .any(|v| matches!(v, Val::Class(c) | Val::Inst(c) if c == owner));
            names_owner.then(|| (args.into_iter().map(str::to_string).collect(), dcx))
        })
    }

    /// The type field `name` of class-like `t` (or of a base) is declared
    /// with, as written, and where it is read.
    pub(super) fn declared_field(&self, t: SymId, name: &str, depth: u32) -> Option<(String, Ctx)> {
        let mut seen = HashSet::new();
        let mut stack = vec![t];
        while let Some(c) = stack.pop() {
            if !seen.insert(c) || seen.len() > 32 {
                continue;
            }
            if let Some((_, e, _)) = self
                .fields_of(c)
                .find(|&(n, _, is_type)| n == name && is_type)
            {
                let s = &self.syms[c];
                let at = Ctx {
                    file: s.file,
                    byte: s.start,
                    scope: c,
                };
                return Some((e.to_string(), at));
            }
            stack.extend(self.base_types(c, depth + 1));
        }
        None
    }
}
