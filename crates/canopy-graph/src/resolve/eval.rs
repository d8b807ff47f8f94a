//! Evaluating expressions to values: a fact's expression (`a.b().c`,
//! `T`, see `graph::facts::model`) read at a place in a file ([`Ctx`])
//! becomes instances, classes, functions or modules ([`Val`]), through
//! lookups of its head, members of each segment, calls' results (return
//! types, constructors), fields and bases.
//!
//! Every language evaluates the same way; where one differs (what `self`
//! means, a path's head like `crate`, a call that returns its receiver),
//! the evaluator asks the file's rules (`lang`) or reads its
//! [`Conventions`](super::lang::Conventions).

use std::collections::{HashMap, HashSet};

use super::ids::{FileIdx, Idx, SymId};
use super::lang::{Among, Family, ReceiverResult};
use super::world::{World, is_classlike};
use crate::facts::model::{
    ARG, AT, CALLED, DefFactKind, EACH, ELEM, FIRST_KNOWN, GUARD_CALL, GUARD_OF, KEEPS, KEY,
    PATH_HEAD, RETURNED, TRAIT_HINT, TUPLE, UNION, VALUE, split_top, type_arguments,
};
use crate::lang::NodeType;

/// Recursion bound for evaluating expressions through bindings and bases.
pub(crate) const MAX_DEPTH: u32 = 12;

/// What an expression evaluates to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Val {
    /// An instance of a class-like unit.
    Inst(SymId),
    /// The class-like unit itself (or a module unit).
    Class(SymId),
    /// A function.
    Func(SymId),
    /// A file as a module.
    File(FileIdx),
    /// A module that is no one file (see [`ModulePath`]).
    Module(ModulePath),
    /// `super` in a Python / TS class: members of the bases of this class.
    Super(SymId),
}

/// What [`World::field`] was asked, and its answer.
type FieldAnswers = HashMap<(SymId, String, u32), Vec<Val>>;

thread_local! {
    /// This thread's [`FieldMemo`]: `None` outside [`World::resolve_file`].
    static FIELD_MEMO: std::cell::RefCell<Option<FieldAnswers>> =
        const { std::cell::RefCell::new(None) };
}

/// The memo of [`World::field`] while one file's sites are resolved on this
/// thread. It lives exactly as long as the guard [`FieldMemo::scope`]
/// returns, so it never outlives the world (or the file) it was filled for.
pub(super) struct FieldMemo(());

impl FieldMemo {
    /// Starts an empty memo on this thread, dropped with the guard.
    pub(super) fn scope() -> FieldMemo {
        FIELD_MEMO.with(|m| *m.borrow_mut() = Some(HashMap::new()));
        FieldMemo(())
    }

    fn get(key: &(SymId, String, u32)) -> Option<Vec<Val>> {
        FIELD_MEMO.with(|m| m.borrow().as_ref().and_then(|m| m.get(key).cloned()))
    }

    fn put(key: (SymId, String, u32), vals: &[Val]) {
        FIELD_MEMO.with(|m| {
            if let Some(m) = m.borrow_mut().as_mut() {
                m.insert(key, vals.to_vec());
            }
        });
    }
}

impl Drop for FieldMemo {
    fn drop(&mut self) {
        FIELD_MEMO.with(|m| *m.borrow_mut() = None);
    }
}

/// A module that is no single file, made and read by one language's rules
/// only: a Python package folder without `__init__.py` or a dotted
/// submodule path, a Go package (a folder), a Rust module path inside a
/// crate (`root`: the crate's source folder, `path`: `crate.a.b`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ModulePath {
    /// Whose rules read it.
    pub family: Family,
    /// The crate root (Rust), else empty.
    pub root: String,
    /// The module's key in its rules' tables.
    pub path: String,
}

/// Where an expression is evaluated: a file, a byte in it, the innermost unit there.
pub(crate) struct Ctx {
    pub file: FileIdx,
    pub byte: u32,
    pub scope: SymId,
}

impl World {
    /// Evaluates a value expression (`a.b().c`).
    pub(crate) fn eval(&self, cx: &Ctx, e: &str, depth: u32) -> Vec<Val> {
        self.eval_path(cx, e, depth, true)
    }

    /// What a receiver `createRetryer#arg:0` ([`ARG`]) is: the declared
    /// type of the parameter the argument is passed to (the function's
    /// `#arg:0` binding); `None` for any other receiver. (A binding's value
    /// written so, a callback's parameter, is read by
    /// `World::contextual_parameter`.)
    pub(crate) fn argument_type(&self, cx: &Ctx, r: &str) -> Option<Vec<Val>> {
        let (callee, at) = r.rsplit_once(ARG)?;
        let mut vals = Vec::new();
        for v in self.eval_path(cx, callee, 1, true) {
            if let Val::Func(f) = v {
                let fcx = self.ctx_at_end(f);
                vals.extend(self.lookup(&fcx, &format!("{ARG}{at}"), 1).0);
            }
        }
        vals.dedup();
        Some(vals)
    }

    /// A callback's parameter typed by its context (ECMAScript: a binding's
    /// value `Observable.subscribe#arg:0`, `C.constructor#arg:0.start#arg:1`,
    /// see [`ARG`]): the declared type of parameter `k` of each function the
    /// path before `#arg:k` evaluates to, then the members the path after it
    /// names. `None` for any expression without [`ARG`].
    fn contextual_parameter(&self, cx: &Ctx, e: &str, depth: u32) -> Option<Vec<Val>> {
        let (callee, rest) = e.rsplit_once(ARG)?;
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        let (k, tail) = rest.split_at(digits);
        if k.is_empty() || !(tail.is_empty() || tail.starts_with('.')) {
            return Some(Vec::new());
        }
        let mut vals = Vec::new();
        let key = format!("{ARG}{k}");
        for v in self.eval_path(cx, callee, depth + 1, true) {
            match v {
                Val::Func(f) => {
                    let fcx = self.ctx_at_end(f);
                    vals.extend(self.lookup(&fcx, &key, depth + 1).0);
                }
                // `h: Handler`, `type Handler = (e: Ev) => void`: the
                // alias binds its function type's parameters.
                Val::Inst(a) | Val::Class(a) if self.syms[a].node_type == NodeType::TypeAlias => {
                    let acx = self.ctx_at_end(a);
                    vals.extend(self.lookup(&acx, &key, depth + 1).0);
                }
                _ => {}
            }
        }
        if vals.is_empty()
            && let Some((owner, member)) = callee.rsplit_once('.')
            && !member.contains(['(', '#'])
        {
            // `Sink.onEvent#arg:0`: a literal's function for a member of
            // function type (`onEvent?: (e: Ev) => void`), whose
            // parameters the type binds as fields `onEvent#arg:k`.
            let field = format!("{member}{ARG}{k}");
            for v in self.eval_path(cx, owner, depth + 1, true) {
                // `Hooks.onEvent#arg:0` of `const h: Hooks = { … }` names
                // the type itself.
                if let Val::Inst(c) | Val::Class(c) = v {
                    vals.extend(self.field(c, &field, depth + 1));
                }
            }
        }
        if vals.is_empty()
            && let Some((outer, m)) = callee.rsplit_once(ARG)
            && !m.is_empty()
            && m.bytes().all(|b| b.is_ascii_digit())
        {
            // `register#arg:0#arg:0`: parameter 0 of a callback passed as
            // `register`'s parameter 0 of function type (`cb: (c: Ctx) =>
            // R`), whose own parameters the function binds as `#arg:0#arg:k`.
            for v in self.eval_path(cx, outer, depth + 1, true) {
                if let Val::Func(f) = v {
                    let fcx = self.ctx_at_end(f);
                    let key = format!("{ARG}{m}{ARG}{k}");
                    // `T` of `class Chain<T>` on a `Chain<Bead>`: a `Bead`.
                    let generic = self.generic_parameter(cx, outer, f, &key, depth + 1);
                    if !generic.is_empty() {
                        vals.extend(generic);
                        continue;
                    }
                    vals.extend(self.lookup(&fcx, &key, depth + 1).0);
                }
            }
        }
        for seg in tail.split('.').skip(1) {
            vals = vals
                .iter()
                .flat_map(|v| self.member(v, seg, depth + 1))
                .collect();
        }
        vals.dedup();
        Some(vals)
    }

    /// Evaluates a type expression to instances of class-like units.
    pub(crate) fn eval_type(&self, cx: &Ctx, e: &str, depth: u32) -> Vec<Val> {
        if depth > MAX_DEPTH {
            return Vec::new();
        }
        let mut vals = Vec::new();
        for v in self.eval_path(cx, e, depth, false) {
            match v {
                Val::Class(c) | Val::Inst(c) if self.union_alias(c).is_some() => {
                    // `type DateValue = A | B`: a value of it is each of them.
                    if let Some((holder, u)) = self.union_alias(c) {
                        let acx = self.ctx_at_start(holder);
                        vals.extend(self.eval_type(&acx, u, depth + 1));
                    }
                }
                Val::Class(c) => vals.push(Val::Inst(self.type_of_impl(c))),
                Val::Inst(c) => vals.push(Val::Inst(c)),
                _ => {}
            }
        }
        vals
    }

    /// The alternatives of a type alias that is a union of several types
    /// (`type DateValue = A | B`, one base fact [`EACH`]`A∪B`), with the
    /// alias that writes them, if `t` is one; also an alias of such an
    /// alias (`type Maybe = DateValue | null`), a few deep.
    pub(crate) fn union_alias(&self, t: SymId) -> Option<(SymId, &str)> {
        self.union_alias_at(t, 0)
    }

    fn union_alias_at(&self, t: SymId, hops: u32) -> Option<(SymId, &str)> {
        if self.syms[t].node_type != NodeType::TypeAlias || !self.has_bases(t) {
            return None;
        }
        let mut bases = self.bases_of(t);
        let first = bases.next()?;
        if first.starts_with(EACH) {
            return Some((t, first));
        }
        if hops >= 3 || bases.next().is_some() {
            return None;
        }
        let cx = self.ctx_at_start(t);
        self.eval_path(&cx, first, MAX_DEPTH / 2, false)
            .into_iter()
            .find_map(|v| match v {
                Val::Class(a) | Val::Inst(a) if a != t => self.union_alias_at(a, hops + 1),
                _ => None,
            })
    }

    /// The instances a type expression evaluates to, as units.
    pub(crate) fn type_units(&self, cx: &Ctx, e: &str, depth: u32, out: &mut Vec<SymId>) {
        for v in self.eval_type(cx, e, depth) {
            if let Val::Inst(c) = v {
                out.push(c);
            }
        }
    }

    /// Evaluates a path: a value (`value`) or a type expression.
    pub(crate) fn eval_path(&self, cx: &Ctx, e: &str, depth: u32, value: bool) -> Vec<Val> {
        if depth > MAX_DEPTH {
            return Vec::new();
        }
        if let Some((byte, inner)) = e.strip_prefix(AT).and_then(|r| r.split_once(':'))
            && let Ok(byte) = byte.parse::<u32>()
        {
            // `#at812:match`: read where the argument was written.
            let Some(scope) = self.innermost(cx.file, byte) else {
                return Vec::new();
            };
            let at = Ctx {
                file: cx.file,
                byte,
                scope,
            };
            return self.eval_path(&at, inner, depth + 1, value);
        }
        if let Some((head, args, rest)) = type_arguments(e) {
            return self.eval_applied(cx, e, (head, &args, rest), depth, value);
        }
        if let Some(alts) = e.strip_prefix(EACH) {
            // `#each:a∪b`: every alternative's value; an unknown one is
            // skipped (an item of a list that is a lambda or a builtin).
            let mut vals = Vec::new();
            for alt in split_top(alts, UNION) {
                vals.extend(self.eval_path(cx, alt, depth + 1, value));
            }
            vals.dedup();
            return vals;
        }
        if e.contains(UNION) {
            // `isA()∪isB()`: one of several values, each alternative's; when
            // one is unknown (`isES6Map(a) || isObservableMap(a)`: a
            // builtin), so is the value. A union type (`A∪B` of Python's
            // `A | B`) is each alternative the corpus defines: one it does
            // not (`str`) holds none of its methods.
            let mut vals = Vec::new();
            for alt in split_top(e, UNION) {
                let found = self.eval_path(cx, alt, depth + 1, value);
                if found.is_empty() && value {
                    return Vec::new();
                }
                vals.extend(found);
            }
            vals.dedup();
            return vals;
        }
        if e.contains(FIRST_KNOWN) {
            // `m#k¦m.remove_entry.#0`: the first alternative known.
            return e
                .split(FIRST_KNOWN)
                .map(|alt| self.eval_path(cx, alt, depth + 1, value))
                .find(|vals| !vals.is_empty())
                .unwrap_or_default();
        }
        if let Some((t, _)) = e.split_once(TRAIT_HINT) {
            // `<T as Trait>` as a value is `T` (the hint only steers method choice).
            return self.eval_path(cx, t, depth, value);
        }
        if let Some(vals) = self.contextual_parameter(cx, e, depth) {
            return vals;
        }
        let first = e.split('.').next().unwrap_or_default();
        let vals = self.eval_head(cx, first, depth, value);
        self.eval_segments(cx, e, vals, first.len(), depth, value)
    }

    /// The segments of path `e` after byte `start` (`.b.c()`; where
    /// `e[..start]` gave `vals`), applied one after the other.
    fn eval_segments(
        &self,
        cx: &Ctx,
        e: &str,
        mut vals: Vec<Val>,
        start: usize,
        depth: u32,
        value: bool,
    ) -> Vec<Val> {
        // `e[..end]`: the path before the current segment.
        let mut end = start;
        for seg in e[start..].split('.').skip(1) {
            let before = &e[..end];
            end += 1 + seg.len();
            match self.eval_segment(cx, vals, before, seg, depth, value) {
                Some(next) => vals = next,
                None => return Vec::new(),
            }
        }
        vals.dedup();
        vals
    }

    /// A generic type with its arguments at the head of `e`
    /// (`Mutable⟨AnyCalendarDate⟩.calendar`, see
    /// [`crate::facts::model::APPLIED`]): a type alias
    /// that keeps an argument's members ([`World::kept_argument`]) is that
    /// argument; any other generic is itself, as if written without
    /// arguments. Then the members the rest of the path names.
    fn eval_applied(
        &self,
        cx: &Ctx,
        e: &str,
        (head, args, rest): (&str, &[&str], &str),
        depth: u32,
        value: bool,
    ) -> Vec<Val> {
        let generic = self.eval_path(cx, head, depth + 1, value);
        let kept = generic.iter().find_map(|g| match g {
            Val::Class(a) | Val::Inst(a) => self.kept_argument(*a, args),
            _ => None,
        });
        let Some(arg) = kept.or_else(|| self.awaited_argument(cx, &generic, head, args)) else {
            return self.eval_path(cx, &format!("{head}{rest}"), depth, value);
        };
        let vals = self.eval_type(cx, arg, depth + 1);
        self.eval_segments(cx, e, vals, e.len() - rest.len(), depth, value)
    }

    /// `T` of `Promise⟨T⟩` where the language reads an awaited value so
    /// ([`super::lang::Conventions::awaited_types`]) and the repository
    /// defines no type of that name (`generic`, what `head` gave, is empty).
    pub(crate) fn awaited_argument<'e>(
        &self,
        cx: &Ctx,
        generic: &[Val],
        head: &str,
        args: &[&'e str],
    ) -> Option<&'e str> {
        if !generic.is_empty() || !self.conventions_of(cx.file).awaited_types.contains(&head) {
            return None;
        }
        args.first().copied().filter(|arg| !arg.is_empty())
    }

    /// The argument among `args` whose members type alias `a` has (its
    /// [`KEEPS`] base fact: `type Mutable<T> = {-readonly [P in keyof T]:
    /// T[P]}`), if `a` is such an alias and the argument was read.
    pub(crate) fn kept_argument<'e>(&self, a: SymId, args: &[&'e str]) -> Option<&'e str> {
        if self.syms[a].node_type != NodeType::TypeAlias || !self.has_bases(a) {
            return None;
        }
        let k = self
            .bases_of(a)
            .find_map(|b| b.strip_prefix(KEEPS)?.parse::<usize>().ok())?;
        args.get(k).copied().filter(|arg| !arg.is_empty())
    }

    /// The first segment of a path (`a`, `a()`, `self`, `crate`).
    fn eval_head(&self, cx: &Ctx, first: &str, depth: u32, value: bool) -> Vec<Val> {
        if let Some((callee, item)) = first.split_once("()#") {
            // `parse(s)#elem`: an item of what the call returns.
            let funcs = self.eval_head(cx, callee, depth + 1, value);
            return self.returned_items(&funcs, &format!("#{item}"), depth);
        }
        let (head, called) = match first.strip_suffix("()") {
            Some(h) => (h, true),
            None => (first, false),
        };
        // A path's head that a local of its name could be taken for
        // (`PATH_HEAD`): looked up past the locals.
        let (head, path_head) = match head.strip_suffix(PATH_HEAD) {
            Some(h) => (h, true),
            None => (head, false),
        };
        let mut vals = match self.rules_of(cx.file).head(self, cx, head, called, value) {
            Some(vals) => vals,
            None => self.lookup_in(cx, head, depth, path_head).0,
        };
        if vals.is_empty()
            && let Some(at) = head.find('#').filter(|&at| at > 0)
        {
            // `items#k` of a local whose type names no collection itself
            // (`items: Pairs`, an alias): the item its type has as a field.
            let (local, item) = head.split_at(at);
            for v in self.eval_path(cx, local, depth + 1, value) {
                if let Val::Inst(a) = v {
                    vals.extend(self.field(a, item, depth + 1));
                }
            }
            if vals.is_empty()
                && let Some((e, byte)) = self.item_of_binding(cx, local, item)
            {
                // `children#k` of `let children = t.paths()`: `t.paths()#k`,
                // read where the binding's value is.
                let bcx = Ctx {
                    file: cx.file,
                    byte: byte.saturating_sub(1),
                    scope: cx.scope,
                };
                vals = self.eval_path(&bcx, &e, depth + 1, value);
                if vals.is_empty()
                    && let Some(walked) = self.without_adapters(cx, &e)
                {
                    vals = self.eval_path(&bcx, &walked, depth + 1, value);
                }
            }
            if vals.is_empty() {
                // `STD#elem` of `const STD: &[HeaderName]`.
                vals = self.constant_items(cx, local, item, depth + 1);
            }
        }
        if called
            && self.conventions_of(cx.file).modules_apart_from_values
            && vals.iter().any(|v| !self.is_module_value(v))
        {
            // `value(x)`: the function, not the module of that name.
            vals.retain(|v| !self.is_module_value(v));
        }
        if called && vals.is_empty() {
            // A call of a value that is no unit (a `var` holding a type
            // guard): what its call binding says it gives; else, of a local
            // holding a function a call returned (`next()` after `const
            // next = this.iterator()`), what its declared type gives. Only
            // languages with call bindings write a function type's result
            // (`#ret#call`), so elsewhere the second lookup (a full one
            // for every call of something outside the repository) finds
            // nothing and is skipped.
            let vals = self.call_binding(cx, head, depth);
            if vals.is_empty() && !head.contains('#') && self.conventions_of(cx.file).call_bindings
            {
                return self.eval_path(cx, &format!("{head}{CALLED}"), depth + 1, value);
            }
            return vals;
        }
        if called && !matches!(vals.first(), Some(Val::Super(_))) {
            vals = self.call_result(&vals, depth);
        }
        vals
    }

    /// One segment after the head (`.b`, `.b()`) applied to `vals`, the
    /// values of the path `before` it; `None` when nothing is left.
    fn eval_segment(
        &self,
        cx: &Ctx,
        vals: Vec<Val>,
        before: &str,
        seg: &str,
        depth: u32,
        value: bool,
    ) -> Option<Vec<Val>> {
        if let Some((name, item)) = seg.split_once("()#") {
            let items = self.method_items(cx, &vals, before, (name, item), depth, value);
            return (!items.is_empty()).then_some(items);
        }
        let (name, called) = match seg.strip_suffix("()") {
            Some(h) => (h, true),
            None => (seg, false),
        };
        let conv = self.conventions_of(cx.file);
        if called
            && vals.iter().all(|v| !matches!(v, Val::Inst(_)))
            && let Some(items) = self.collection_item(cx, before, name, depth, value)
        {
            return Some(items);
        }
        if name.starts_with('[') && !called {
            // `h[$admin]` / `xs[i]` (an ECMAScript index by a name): the
            // field that key names (`[$admin]: Admin`), else an item of
            // the collection.
            let mut fields: Vec<Val> = vals
                .iter()
                .flat_map(|v| self.member(v, name, depth + 1))
                .collect();
            if fields.is_empty() && !before.ends_with(')') {
                fields = self.eval_path(cx, &format!("{before}{ELEM}"), depth + 1, value);
            }
            return (!fields.is_empty()).then_some(fields);
        }
        if vals.is_empty() {
            // `m.entry(k)` of a map of no type here: nothing yet, but what
            // the entry's methods give follows (`collection_item`); so for
            // a walk (`all.into_iter()`, then `.next()`).
            let entry = called && name == "entry" && !conv.entry_value_methods.is_empty();
            let walk = called && self.rules_of(cx.file).passes_items(name);
            return (entry || walk).then(Vec::new);
        }
        let mut next = Vec::new();
        // Instances a called method gives back as they are (see below).
        let mut receivers = Vec::new();
        for v in &vals {
            // `x.decor` is the field even when a method `decor()` exists.
            if conv.fields_before_methods
                && !called
                && let Val::Inst(t) | Val::Class(t) = v
            {
                let mut fields = self.field(*t, name, depth + 1);
                if fields.is_empty() && (before == "self" || conv.fields_on_impl_type) {
                    // `self.value`; where a type's parameters are bounded
                    // on its impl blocks (Rust), also through another
                    // value (`self.ser.formatter`, `ser.formatter` of
                    // `ser: &mut Serializer<W, F>`).
                    fields = self.parameter_field(cx, v, name, depth + 1);
                }
                if !fields.is_empty() {
                    next.extend(fields);
                    continue;
                }
                if conv.declared_fields_hide_methods && self.has_field(*t, name) {
                    // A field of no repository type (`version: u32`) is
                    // still the field, not a method `version()`.
                    continue;
                }
            }
            for m in self.member(v, name, depth + 1) {
                // A method that returns its receiver or makes one of its
                // class (Python `return self`, `(self: T) -> T`, `return
                // cls()`), called on a subclass's instance or class: the
                // subclass's, not the defining class's.
                match called.then(|| self.result_of_receiver(v, &m)).flatten() {
                    Some(given) => receivers.push(given),
                    None => next.push(m),
                }
            }
        }
        if !receivers.is_empty() {
            let mut out = self.call_result(&next, depth);
            out.extend(receivers);
            out.dedup();
            return Some(out);
        }
        if next.is_empty()
            && called
            && vals.iter().any(|v| matches!(v, Val::Inst(_)))
            && let Some(items) = self.collection_item(cx, before, name, depth, value)
        {
            // `self.items.shift_remove(k)` (`items: Pairs`, an alias of a
            // map, which defines no method).
            return Some(items);
        }
        if next.is_empty()
            && called
            && let Some(same) = self.rules_of(cx.file).unknown_method(self, name, &vals)
        {
            return Some(same);
        }
        Some(if called {
            self.call_result(&next, depth)
        } else {
            self.read_getters(next, depth)
        })
    }

    /// `sheet.rows()#elem`: item `item` of what method `name` of `vals`
    /// (the values of path `before`) returns, else of what `before` gives
    /// when the method hands its payload on ([`World::payload_items`]).
    fn method_items(
        &self,
        cx: &Ctx,
        vals: &[Val],
        before: &str,
        (name, item): (&str, &str),
        depth: u32,
        value: bool,
    ) -> Vec<Val> {
        let funcs: Vec<Val> = vals
            .iter()
            .flat_map(|v| self.member(v, name, depth + 1))
            .collect();
        let items = self.returned_items(&funcs, &format!("#{item}"), depth);
        if !items.is_empty() {
            return items;
        }
        self.payload_items(cx, before, name, item, depth, value)
    }

    /// `load(s).unwrap()#elem`: an item of what a call gives, through a
    /// method that hands its payload on (Rust's `unwrap`, `expect`, `ok`
    /// on the `Result<Vec<T>, E>` a function returns, see
    /// [`crate::resolve::lang::LanguageRules::passes_payload`]) and that
    /// the value does not define: the call's own item (`load()#elem`).
    /// Also through an iterator adapter (`docs.into_iter()#elem`, see
    /// [`crate::resolve::lang::LanguageRules::passes_items`]): `docs#elem`.
    fn payload_items(
        &self,
        cx: &Ctx,
        before: &str,
        name: &str,
        item: &str,
        depth: u32,
        value: bool,
    ) -> Vec<Val> {
        let rules = self.rules_of(cx.file);
        // An iterator adapter (`docs.into_iter()#elem`) walks the items of
        // any value, a path as well as a call's result.
        let through =
            rules.passes_items(name) || (before.ends_with(')') && rules.passes_payload(name));
        if !through {
            return Vec::new();
        }
        self.eval_path(cx, &format!("{before}#{item}"), depth + 1, value)
    }

    /// A member read without a call (`pos.parent`): an accessor among the
    /// values (`get parent()`) stands for what it returns; every other
    /// value stays.
    fn read_getters(&self, vals: Vec<Val>, depth: u32) -> Vec<Val> {
        if !vals
            .iter()
            .any(|v| matches!(v, Val::Func(f) if self.is_getter(*f)))
        {
            return vals;
        }
        let mut out = Vec::new();
        for v in vals {
            match v {
                Val::Func(f) if self.is_getter(f) => {
                    out.extend(self.call_result(&[v], depth + 1));
                }
                other => out.push(other),
            }
        }
        out.dedup();
        out
    }

    /// What method `name` of a collection at path `before` gives back, for
    /// a collection of no type of its own here (its items are known only as
    /// pseudo-fields, see [`ELEM`]): `self.values.remove(i)` (`values:
    /// Vec<Item>`) an item; `self.entry.key()` (`entry: OccupiedEntry<'a,
    /// K, V>`) the entry's key; `m.get(k)` / `m.shift_remove(k)` of a map
    /// its value (`m#v`); `m.entry(k).or_insert(v)` the map's value too.
    /// `None` when the method is none of these or gives nothing known.
    fn collection_item(
        &self,
        cx: &Ctx,
        before: &str,
        name: &str,
        depth: u32,
        value: bool,
    ) -> Option<Vec<Val>> {
        let conv = self.conventions_of(cx.file);
        let mut paths = Vec::new();
        if !before.ends_with(')') {
            if conv.item_methods.contains(&name) {
                paths.push(format!("{before}{ELEM}"));
            } else if conv.key_methods.contains(&name) {
                paths.push(format!("{before}{KEY}"));
            }
            if conv.value_methods.contains(&name) {
                paths.push(format!("{before}{VALUE}"));
            }
        } else if conv.entry_value_methods.contains(&name)
            && let Some(map) = before.strip_suffix(".entry()")
            && !map.contains("()")
        {
            paths.push(format!("{map}{VALUE}"));
        } else if conv.item_methods.contains(&name)
            && let Some(walked) = self.walked(cx, before)
        {
            // `all.into_iter().next()`: an item of what is walked.
            paths.push(format!("{walked}{ELEM}"));
        }
        paths.into_iter().find_map(|p| {
            let items = self.eval_path(cx, &p, depth + 1, value);
            (!items.is_empty()).then_some(items)
        })
    }

    /// Item `item` (`#elem`, `#k#elem`) of what calling each of `funcs`
    /// returns: the item its return type states (the function's
    /// [`RETURNED`] binding), else that item of the type it returns (an
    /// alias of a collection or an iterator, as a field of the alias).
    fn returned_items(&self, funcs: &[Val], item: &str, depth: u32) -> Vec<Val> {
        let mut out = Vec::new();
        for v in funcs {
            let Val::Func(f) = v else {
                continue;
            };
            let stated = self.returned_item_type(*f, item, depth);
            if !stated.is_empty() {
                out.extend(stated);
                continue;
            }
            for r in self.call_result(std::slice::from_ref(v), depth + 1) {
                if let Val::Inst(a) = r {
                    out.extend(self.field(a, item, depth + 1));
                }
            }
        }
        out.dedup();
        out
    }

    /// The type function `f`'s return type states for its item `item`
    /// (the binding `#ret{item}` in `f`'s scope), evaluated.
    fn returned_item_type(&self, f: SymId, item: &str, depth: u32) -> Vec<Val> {
        let fi = self.syms[f].file;
        let part = self.part(fi);
        let name = format!("{RETURNED}{item}");
        let facts = self.files[fi].facts.get();
        for &bi in part.bindings_named(facts, &name) {
            let b = &facts.bindings[bi.index()];
            if part.scopes[bi] == f && b.is_type {
                let bcx = Ctx {
                    file: fi,
                    byte: b.byte,
                    scope: f,
                };
                return self.eval_type(&bcx, facts.s(b.expr), depth + 1);
            }
        }
        Vec::new()
    }

    /// `local{item}` read through the value `local` is bound to at `cx`,
    /// when that is an expression whose items can be named
    /// (`children#k#elem` for `path#elem` after `for (path, _) in
    /// children`; `t.paths()#k` for `children#k` after `let children =
    /// t.paths()`); each alternative of a [`FIRST_KNOWN`] value gets the
    /// item; with the binding's byte. `None` for a type, an unknown or a
    /// one-of-several value.
    fn item_of_binding(&self, cx: &Ctx, local: &str, item: &str) -> Option<(String, u32)> {
        let (e, is_type, byte) = self.binding_of(cx, local)?;
        let own = e == local || e.strip_prefix(local).is_some_and(|r| r.starts_with('#'));
        if is_type || own || e.contains(UNION) || e.is_empty() {
            return None;
        }
        let e = e
            .split(FIRST_KNOWN)
            .map(|alt| format!("{alt}{item}"))
            .collect::<Vec<_>>()
            .join(&FIRST_KNOWN.to_string());
        Some((e, byte))
    }

    /// `load(s).unwrap().into_iter()#elem` as `load(s).unwrap()#elem`: an
    /// item of a walk is one of what is walked, past the iterator adapters
    /// at the path's end ([`crate::resolve::lang::LanguageRules::passes_items`])
    /// that a value of no known type (a std `Vec`) cannot evaluate. `None`
    /// when there is no adapter to take off.
    fn without_adapters(&self, cx: &Ctx, e: &str) -> Option<String> {
        if e.contains(FIRST_KNOWN) {
            return None;
        }
        let at = e.rfind("()#")? + 2;
        let (path, item) = e.split_at(at);
        Some(format!("{}{item}", self.walked(cx, path)?))
    }

    /// `path` without the iterator adapters at its end (`all` of
    /// `all.into_iter()`); `None` when it ends with none.
    fn walked<'p>(&self, cx: &Ctx, mut path: &'p str) -> Option<&'p str> {
        let rules = self.rules_of(cx.file);
        let mut taken = false;
        while let Some(rest) = path.strip_suffix("()")
            && let Some((base, m)) = rest.rsplit_once('.')
            && rules.passes_items(m)
        {
            path = base;
            taken = true;
        }
        taken.then_some(path)
    }

    /// `self.value` where the field's type is a bare name its own type
    /// knows nothing of (`value: T` of `struct Formatted<T>`): that name
    /// read where the site is, inside the `impl<T> Formatted<T> where T:
    /// Trait` block that bounds it. Also a field of another value
    /// (`self.ser.formatter`, `formatter: F` of `Serializer<W, F>`, read in
    /// `impl<'a, W, F: Formatter> … for MapKeySerializer<'a, W, F>`): type
    /// parameters handed on keep their names in practice.
    fn parameter_field(&self, cx: &Ctx, v: &Val, name: &str, depth: u32) -> Vec<Val> {
        let Val::Inst(t) = v else {
            return Vec::new();
        };
        let mut owners = vec![*t];
        if self.conventions_of(self.syms[*t].file).fields_on_impl_type {
            owners.push(self.type_of_impl(*t));
        }
        for o in owners {
            for (n, e, is_type) in self.fields_of(o) {
                let bare = e.chars().all(|c| c.is_alphanumeric() || c == '_');
                if n == name && is_type && bare {
                    return self.eval_type(cx, e, depth + 1);
                }
            }
        }
        Vec::new()
    }

    /// What calling each value gives: an instance of a class, a function's return type.
    pub(crate) fn call_result(&self, vals: &[Val], depth: u32) -> Vec<Val> {
        let mut out = Vec::new();
        for v in vals {
            match v {
                Val::Class(c) => out.push(Val::Inst(self.type_of_impl(*c))),
                Val::Func(f) => {
                    let Some(ret) = self.result_type(*f) else {
                        continue;
                    };
                    let cx = self.ctx_at_end(*f);
                    if let Some(call) = ret.strip_prefix(GUARD_CALL) {
                        out.extend(self.made_guard_result(&cx, call, depth + 1));
                        continue;
                    }
                    if ret.starts_with(GUARD_OF) {
                        continue;
                    }
                    match ret.strip_prefix('=') {
                        // Several `return`s (`a∪b`, ECMAScript's inferred
                        // result): a value only when they all agree.
                        Some(value) if value.contains(UNION) => {
                            let vals = self.eval(&cx, value, depth + 1);
                            if vals.iter().all(|v| Some(v) == vals.first()) {
                                out.extend(vals);
                            }
                        }
                        Some(value) => out.extend(self.eval(&cx, value, depth + 1)),
                        None => out.extend(self.eval_type(&cx, ret, depth + 1)),
                    }
                }
                _ => {}
            }
        }
        out
    }

    /// What function `f` is declared to return: its own return fact, else
    /// an overload's (overloads share a qualified name: any of them may
    /// carry the annotation).
    pub(crate) fn result_type(&self, f: SymId) -> Option<&str> {
        let s = &self.syms[f];
        self.returns_of(f).or_else(|| {
            self.file_syms[s.file].iter().find_map(|&o| {
                let os = &self.syms[o];
                (o != f && os.qualified_name == s.qualified_name)
                    .then(|| self.returns_of(o))
                    .flatten()
            })
        })
    }

    /// What a call of a guard made by `f(a0;a1…)` gives (`call`, a
    /// [`GUARD_CALL`] after its prefix): when `f` makes guards of its
    /// argument `i` ([`GUARD_OF`]), an instance of the class `ai` names.
    fn made_guard_result(&self, cx: &Ctx, call: &str, depth: u32) -> Vec<Val> {
        let mut parts = call.strip_suffix(')').unwrap_or(call).split(';');
        let Some(callee) = parts.next() else {
            return Vec::new();
        };
        let args: Vec<&str> = parts.collect();
        let mut out = Vec::new();
        for g in self.eval(cx, callee, depth) {
            let Val::Func(g) = g else {
                continue;
            };
            let Some(i) = self
                .returns_of(g)
                .and_then(|r| r.strip_prefix(GUARD_OF))
                .and_then(|i| i.parse::<usize>().ok())
            else {
                continue;
            };
            let Some(arg) = args.get(i).filter(|a| !a.is_empty()) else {
                continue;
            };
            for v in self.eval(cx, arg, depth + 1) {
                if let Val::Class(c) = v {
                    out.push(Val::Inst(self.type_of_impl(c)));
                }
            }
        }
        out
    }

    /// The members named `name` of a value, as values.
    pub(crate) fn member(&self, v: &Val, name: &str, depth: u32) -> Vec<Val> {
        if depth > MAX_DEPTH {
            return Vec::new();
        }
        if let Val::Class(t) = v
            && let Some(m) = self.declared_module(*t)
        {
            return self.member(&m, name, depth + 1);
        }
        match v {
            Val::Inst(t) | Val::Class(t) | Val::Super(t) => {
                let (found, _) = self.member_defs(v, name, depth);
                if !found.is_empty() {
                    return found.into_iter().map(|s| self.as_val(s)).collect();
                }
                if matches!(v, Val::Class(_)) && self.syms[*t].node_type == NodeType::Module {
                    // An inline module (`mod m { pub use … }`): what its
                    // own imports bring in, as a file module's (values
                    // too: a re-exported module or constant).
                    return self.module_imports(*t, name, depth + 1);
                }
                let field = self.field(*t, name, depth);
                if field.is_empty() && matches!(v, Val::Inst(_)) {
                    return self.attribute_fallback(v, name, depth);
                }
                field
            }
            Val::File(f) => self.module_member(*f, name, depth),
            Val::Module(m) => self.rules.of(m.family).module_member(self, m, name, depth),
            Val::Func(f) => {
                let elem = self.tuple_element(*f, name, depth);
                if !elem.is_empty() {
                    return elem;
                }
                // A member of what a constant holds (a module's singleton).
                self.constant_value(*f, depth + 1)
                    .iter()
                    .flat_map(|c| self.member(c, name, depth + 1))
                    .collect()
            }
        }
    }

    /// An attribute an instance's class neither defines nor inherits, read
    /// through the class's `__getattr__` (Python calls it for exactly
    /// those): what it returns (`Query().followers` is the `Query` that
    /// `Query.__getattr__` makes). Dunder names are looked up on the type,
    /// never through `__getattr__`.
    fn attribute_fallback(&self, v: &Val, name: &str, depth: u32) -> Vec<Val> {
        const GETATTR: &str = "__getattr__";
        if name.starts_with("__") || depth > MAX_DEPTH {
            return Vec::new();
        }
        let (getattr, _) = self.member_defs(v, GETATTR, depth + 1);
        let mut funcs = Vec::new();
        let mut out = Vec::new();
        for f in getattr
            .into_iter()
            .filter(|&f| self.syms[f].name == GETATTR)
        {
            // `return type(self)()`: the subclass's instance.
            match self.result_of_receiver(v, &Val::Func(f)) {
                Some(given) => out.push(given),
                None => funcs.push(Val::Func(f)),
            }
        }
        out.extend(self.call_result(&funcs, depth + 1));
        out.dedup();
        out
    }

    /// What calling method `m` on `v` gives when the method's result is
    /// decided by its receiver ([`ReceiverResult`]): `v` itself, its class,
    /// or a new instance of its class; `None` when the result is the
    /// method's own.
    fn result_of_receiver(&self, v: &Val, m: &Val) -> Option<Val> {
        let Val::Func(f) = *m else {
            return None;
        };
        let ret = self.returns_of(f)?;
        let given = self.rules_of(self.syms[f].file).receiver_result(ret)?;
        match (given, v) {
            (ReceiverResult::Itself, Val::Inst(_)) => Some(v.clone()),
            (ReceiverResult::ItsClass, Val::Inst(t) | Val::Class(t)) => Some(Val::Class(*t)),
            (ReceiverResult::AnInstance, Val::Inst(t)) => Some(Val::Inst(*t)),
            (ReceiverResult::AnInstance, Val::Class(c)) => Some(Val::Inst(self.type_of_impl(*c))),
            _ => None,
        }
    }

    /// A module unit that stands for a module elsewhere (Rust `mod key;`),
    /// as that module.
    pub(crate) fn declared_module(&self, t: SymId) -> Option<Val> {
        let s = &self.syms[t];
        if s.node_type != NodeType::Module {
            return None;
        }
        self.rules_of(s.file).declared_module(self, t)
    }

    /// A module value of a language whose modules live apart from its
    /// values (Rust: `mod value;` beside `fn value`): a module path or a
    /// `mod` unit.
    pub(crate) fn is_module_value(&self, v: &Val) -> bool {
        match v {
            Val::Module(m) => m.family.conventions().modules_apart_from_values,
            Val::Class(c) => {
                let s = &self.syms[*c];
                s.node_type == NodeType::Module
                    && self.conventions_of(s.file).modules_apart_from_values
            }
            _ => false,
        }
    }

    /// Definitions a list of values stands for.
    pub(crate) fn defs_of(&self, vals: &[Val]) -> Vec<SymId> {
        vals.iter()
            .filter_map(|v| match v {
                Val::Func(i) | Val::Class(i) => Some(*i),
                _ => None,
            })
            .collect()
    }

    /// Members named `name` of a value, and whether they came from a base.
    pub(crate) fn member_defs(&self, v: &Val, name: &str, depth: u32) -> (Vec<SymId>, bool) {
        if let Val::Class(t) = v
            && let Some(m) = self.declared_module(*t)
        {
            return (self.defs_of(&self.member(&m, name, depth + 1)), false);
        }
        match v {
            Val::Inst(t) | Val::Class(t) => {
                let mut seen = HashSet::new();
                let found = self.find_member(*t, name, depth, &mut seen);
                if found.0.is_empty()
                    && matches!(v, Val::Class(_))
                    && self.syms[*t].node_type == NodeType::Module
                {
                    // An inline module's `pub use` items (see [`World::member`]).
                    return (
                        self.defs_of(&self.module_imports(*t, name, depth + 1)),
                        false,
                    );
                }
                found
            }
            Val::Super(c) => (self.super_member(*c, name, depth), true),
            _ => (self.defs_of(&self.member(v, name, depth)), false),
        }
    }

    /// `super.name` in class `c`: the member of the first base that has
    /// one, never an interface's (an interface only declares what the
    /// class it is implemented by defines; it has no body `super` could
    /// call): with the base class unknown and an interface implemented,
    /// `super.m()` binds nothing rather than the interface's `m`.
    fn super_member(&self, c: SymId, name: &str, depth: u32) -> Vec<SymId> {
        let mut seen = HashSet::new();
        seen.insert(c);
        let bodied = |m: &SymId| {
            self.parent_of(*m)
                .is_none_or(|p| self.syms[p].node_type != NodeType::Interface)
        };
        for b in self.base_types(c, depth) {
            if self.syms[b].node_type == NodeType::Interface {
                continue;
            }
            let found: Vec<SymId> = self
                .find_member(b, name, depth + 1, &mut seen)
                .0
                .into_iter()
                .filter(bodied)
                .collect();
            if !found.is_empty() {
                return found;
            }
        }
        Vec::new()
    }

    /// Methods (and nested types) named `name` of class-like `t`, through its bases.
    fn find_member(
        &self,
        t: SymId,
        name: &str,
        depth: u32,
        seen: &mut HashSet<SymId>,
    ) -> (Vec<SymId>, bool) {
        if depth > MAX_DEPTH || !seen.insert(t) {
            return (Vec::new(), false);
        }
        let ts = &self.syms[t];
        let mut out: Vec<SymId> = self
            .named_children(t, name)
            .iter()
            .copied()
            .filter(|&c| self.syms[c].node_type != NodeType::Impl)
            .collect();
        if out.is_empty() && self.conventions_of(ts.file).methods_declared_apart {
            let owner = if ts.node_type == NodeType::Impl {
                self.type_of_impl(t)
            } else {
                t
            };
            // Where impls follow their type, a trait does not get the impls
            // of another type of its name: serde_json's `trait Number`
            // (lexical) has no `from` or `deserialize` of the `Number` struct.
            let trait_only = ts.node_type == NodeType::Trait
                && self.conventions_of(ts.file).impl_methods_follow_type;
            out.extend(
                self.owned_methods(owner)
                    .iter()
                    .copied()
                    .filter(|&m| self.syms[m].name == name)
                    .filter(|&m| {
                        !trait_only
                            || self.parent_of(m).is_none_or(|p| {
                                let o = self.type_of_impl(p);
                                o == owner || o == p
                            })
                    }),
            );
        }
        if out.len() > 1 {
            out = self.rules_of(ts.file).choose(self, out, Among::Members);
        }
        if !out.is_empty() {
            return (out, false);
        }
        for b in self.base_types(t, depth) {
            let (found, _) = self.find_member(b, name, depth + 1, seen);
            if !found.is_empty() {
                return (found, true);
            }
        }
        (Vec::new(), false)
    }

    /// `f.#i`: element `i` of the tuple function `f` returns ([`TUPLE`]),
    /// as a value; nothing for any other member of a function.
    fn tuple_element(&self, f: SymId, name: &str, depth: u32) -> Vec<Val> {
        let Some(i) = name.strip_prefix('#').and_then(|i| i.parse::<usize>().ok()) else {
            return Vec::new();
        };
        let Some(elems) = self
            .returns_of(f)
            .and_then(|r| r.strip_prefix(TUPLE))
            .and_then(|r| r.strip_suffix(')'))
        else {
            return Vec::new();
        };
        let Some(t) = elems.split(';').nth(i).filter(|t| !t.is_empty()) else {
            return Vec::new();
        };
        self.eval_type(&self.ctx_at_end(f), t, depth + 1)
    }

    /// The field `name` of class-like `t` (and its bases), evaluated.
    ///
    /// Inside [`World::resolve_file`] the answer is remembered per
    /// `(t, name, depth)` for the rest of the file: a chain of attributes
    /// (`self.a.b.c`, each field assigned from another) evaluates the same
    /// fields again at every level, which made resolution exponential in
    /// the chain's length (sympy: 9.7 of 13.5 s of a cold index). The depth
    /// is part of the key, so a remembered answer is the one the same call
    /// computes.
    pub(crate) fn field(&self, t: SymId, name: &str, depth: u32) -> Vec<Val> {
        let key = (t, name.to_string(), depth);
        if let Some(vals) = FieldMemo::get(&key) {
            return vals;
        }
        let vals = self.field_uncached(t, name, depth);
        FieldMemo::put(key, &vals);
        vals
    }

    /// Whether class-like `t` (or, where fields live on the type, the type
    /// of impl `t`) declares a field named `name`, whatever its type.
    fn has_field(&self, t: SymId, name: &str) -> bool {
        let mut owners = vec![t];
        if self.conventions_of(self.syms[t].file).fields_on_impl_type {
            owners.push(self.type_of_impl(t));
        }
        owners
            .into_iter()
            .any(|o| self.fields_of(o).any(|(n, _, _)| n == name))
    }

    /// [`World::field`] without the memo.
    fn field_uncached(&self, t: SymId, name: &str, depth: u32) -> Vec<Val> {
        let mut seen = HashSet::new();
        let mut stack = vec![t];
        while let Some(c) = stack.pop() {
            if !seen.insert(c) || seen.len() > 32 {
                continue;
            }
            let mut owners = vec![c];
            if self.conventions_of(self.syms[c].file).fields_on_impl_type {
                // Fields live on the struct; `self` may be the impl.
                owners.push(self.type_of_impl(c));
            }
            for o in owners {
                for (n, e, is_type) in self.fields_of(o) {
                    if n != name {
                        continue;
                    }
                    let os = &self.syms[o];
                    let cx = Ctx {
                        file: os.file,
                        byte: os.start,
                        scope: o,
                    };
                    let vals = if is_type {
                        self.eval_type(&cx, e, depth + 1)
                    } else {
                        self.eval(&cx, e, depth + 1)
                    };
                    if !vals.is_empty() {
                        return vals;
                    }
                }
            }
            stack.extend(self.base_types(c, depth + 1));
        }
        if name == ELEM && self.conventions_of(self.syms[t].file).fields_on_impl_type {
            // An item of a type of the corpus that is an iterator (`for c
            // in diff.iter_changes()`, `-> AllChangesIter`, `impl Iterator
            // for AllChangesIter { type Item = Change; }`): its associated
            // `Item`, an alias whose members are those of what it names.
            let (items, _) = self.member_defs(&Val::Inst(t), "Item", depth + 1);
            let items: Vec<Val> = items
                .into_iter()
                .filter(|&a| self.syms[a].node_type == NodeType::TypeAlias && self.has_bases(a))
                .filter(|&a| self.in_iterator_impl(a))
                .map(Val::Inst)
                .collect();
            if !items.is_empty() {
                return items;
            }
            let outputs = self.index_outputs(t, depth);
            if !outputs.is_empty() {
                return outputs;
            }
        }
        // `items#k` of a field whose own type names no collection
        // (`items: Pairs`, `type Pairs = IndexMap<Key, Item>`): the item
        // the field's type has as a field of its own (`#k`).
        // (A leading `#` is part of an ECMAScript private name: `#items#elem`.)
        if let Some(at) = name
            .char_indices()
            .skip(1)
            .find(|&(_, c)| c == '#')
            .map(|(at, _)| at)
        {
            let (f, item) = name.split_at(at);
            return self
                .field(t, f, depth + 1)
                .into_iter()
                .filter_map(|v| match v {
                    Val::Inst(a) => Some(self.field(a, item, depth + 1)),
                    _ => None,
                })
                .flatten()
                .collect();
        }
        Vec::new()
    }

    /// Whether unit `a` sits in an `impl Iterator for …` block (the trait's
    /// last path segment), not in an `IntoIterator` one or another trait's.
    fn in_iterator_impl(&self, a: SymId) -> bool {
        self.in_impl_of(a, "Iterator")
    }

    /// Whether unit `a` sits in an `impl` block of the trait whose last
    /// path segment is `name` (`Index` of `impl<'a> Index<&'a str> for T`).
    fn in_impl_of(&self, a: SymId, name: &str) -> bool {
        let Some(i) = self.parent_of(a) else {
            return false;
        };
        self.syms[i].node_type == NodeType::Impl
            && self.impl_traits.get(&self.syms[i].name).is_some_and(|v| {
                v.iter()
                    .any(|(s, tr)| *s == i && tr.rsplit(['.', '\u{0}']).next() == Some(name))
            })
    }

    /// An item `t[k]` of a type of the corpus that is no iterator
    /// (yaml-rust2's `doc["b"]`, `impl Index<&str> for Yaml { type Output
    /// = Yaml; }`): the `Output` of its `Index` impls, an alias whose
    /// members are those of what it names. Every impl's (one per key type);
    /// they usually agree.
    fn index_outputs(&self, t: SymId, depth: u32) -> Vec<Val> {
        let (outputs, _) = self.member_defs(&Val::Inst(t), "Output", depth + 1);
        let mut out: Vec<Val> = outputs
            .into_iter()
            .filter(|&a| self.syms[a].node_type == NodeType::TypeAlias && self.has_bases(a))
            .filter(|&a| self.in_impl_of(a, "Index"))
            .map(Val::Inst)
            .collect();
        out.dedup();
        out
    }

    /// `impl Foo` → the `Foo` type when it can be found, else the impl itself.
    pub(crate) fn type_of_impl(&self, c: SymId) -> SymId {
        if let Some(Some(t)) = self.impl_type_cache.get(c) {
            return *t;
        }
        self.type_of_impl_uncached(c)
    }

    /// [`World::type_of_impl`] without the cache (which it fills).
    pub(super) fn type_of_impl_uncached(&self, c: SymId) -> SymId {
        let s = &self.syms[c];
        if s.node_type != NodeType::Impl {
            return c;
        }
        let cx = self.ctx_at_start(c);
        // Half the depth budget: enough for `use crate::{X}` and a re-export
        // or two (an impl in another file than its type), and a bound on the
        // recursion while the impl-type cache is being filled.
        let type_of = |vals: Vec<Val>| {
            vals.into_iter().find_map(|v| match v {
                Val::Class(t) if self.syms[t].node_type != NodeType::Impl => Some(t),
                _ => None,
            })
        };
        if let Some(t) = type_of(self.lookup(&cx, &s.name.clone(), MAX_DEPTH / 2).0) {
            return t;
        }
        // `impl … for crate::X` where `X` alone names nothing here: the path.
        let facts = self.files[s.file].facts.get();
        let path = facts.defs.iter().find(|d| {
            d.what == DefFactKind::ImplType
                && self.def_at(s.file, d.byte, facts.s(d.name)) == Some(c)
        });
        path.and_then(|d| type_of(self.eval_path(&cx, facts.s(d.expr), MAX_DEPTH / 2, false)))
            .unwrap_or(c)
    }

    /// The class-like units `t` inherits from: bases, embedded types, implemented traits.
    pub(crate) fn base_types(&self, t: SymId, depth: u32) -> Vec<SymId> {
        thread_local! {
            /// Units whose bases this thread is computing for the cache: a
            /// cycle (`A(B)`, `B(A)`) evaluates uncached below them, bounded
            /// by the depth, instead of waiting on its own cell.
            static COMPUTING: std::cell::RefCell<Vec<SymId>> = const { std::cell::RefCell::new(Vec::new()) };
        }
        let Some(cell) = self
            .base_cache
            .get(t)
            .filter(|_| is_classlike(self.syms[t].node_type))
        else {
            return self.base_types_uncached(t, depth);
        };
        if let Some(v) = cell.get() {
            return v.clone();
        }
        if COMPUTING.with(|c| c.borrow().contains(&t)) {
            return self.base_types_uncached(t, depth);
        }
        COMPUTING.with(|c| c.borrow_mut().push(t));
        let v = self.base_types_uncached(t, 0);
        COMPUTING.with(|c| {
            c.borrow_mut().pop();
        });
        cell.get_or_init(|| v).clone()
    }

    /// [`World::base_types`] without the cache: the unit's base-type facts,
    /// then what its language adds ([`super::lang::LanguageRules::more_bases`]).
    fn base_types_uncached(&self, t: SymId, depth: u32) -> Vec<SymId> {
        let mut out = Vec::new();
        let cx = self.ctx_at_start(t);
        // A union alias's alternatives are no bases it inherits from, nor
        // is the argument a mapped type keeps the members of.
        for b in self
            .bases_of(t)
            .filter(|b| !b.starts_with(EACH) && !b.starts_with(KEEPS))
        {
            self.type_units(&cx, b, depth + 1, &mut out);
        }
        self.rules_of(self.syms[t].file)
            .more_bases(self, t, depth, &mut out);
        out
    }
}
