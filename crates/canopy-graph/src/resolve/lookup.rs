//! Looking names up: a bare name in lexical scope order (local bindings
//! and nested definitions of the enclosing units, the file's top-level
//! definitions, its imports, the package, glob imports, a language's
//! prelude), a module's members, and what an import binds (memoised; the
//! module naming itself is each language's, `lang`).

use super::eval::{Ctx, MAX_DEPTH, Val};
use super::ids::{BindingIdx, FileIdx, Idx, ImportIdx, SymId};
use super::lang::Among;
use super::world::{World, is_classlike};
use crate::facts::model::{CALL_RESULT, PARAM_VALUE, UNBOUND};
use crate::lang::NodeType;
use crate::store::graph_rows::How;

impl World {
    /// A name in lexical scope at `cx`.
    pub(crate) fn lookup(&self, cx: &Ctx, name: &str, depth: u32) -> (Vec<Val>, How) {
        self.lookup_in(cx, name, depth, false)
    }

    /// [`World::lookup`]; `past_locals`: a path's head, which no local
    /// value binding names (type bindings, generic parameters, still do).
    pub(crate) fn lookup_in(
        &self,
        cx: &Ctx,
        name: &str,
        depth: u32,
        past_locals: bool,
    ) -> (Vec<Val>, How) {
        if depth > MAX_DEPTH {
            return (Vec::new(), How::None);
        }
        let fi = cx.file;
        let mut cur = Some(cx.scope);
        let mut first = true;
        while let Some(u) = cur {
            if let Some(found) = self.lookup_in_scope(cx, u, first, name, depth, past_locals) {
                return found;
            }
            first = false;
            cur = self.parent_of(u);
        }
        let rules = self.rules_of(fi);
        // The package (Go: the folder's files).
        let vals = rules.package_members(self, fi, name, depth + 1);
        if !vals.is_empty() {
            return (vals, How::Scope);
        }
        // Glob imports (past those the default build leaves out, as
        // [`World::glob_reexport`]).
        let facts = self.files[fi].facts.get();
        let mut left_out = Vec::new();
        for i in facts.imports.iter().filter(|i| facts.s(i.local) == "*") {
            for m in self.import_target(fi, facts.s(i.module), None, depth + 1) {
                let vals = self.member(&m, name, depth + 1);
                if !vals.is_empty() {
                    if self.all_off_in_default_build(&vals) && !self.off_in_default_build(cx.scope)
                    {
                        if left_out.is_empty() {
                            left_out = vals;
                        }
                        continue;
                    }
                    return (vals, How::Import);
                }
            }
        }
        if !left_out.is_empty() {
            return (left_out, How::Import);
        }
        // What every file sees without an import (Rust: the repository's
        // library crates by name, the extern prelude).
        if let Some(v) = rules.prelude(name) {
            return (vec![v], How::Import);
        }
        let impls = rules.primitive_impls(self, cx, name);
        if !impls.is_empty() {
            return (impls, How::Scope);
        }
        (Vec::new(), How::None)
    }

    /// A name looked up in the scope of unit `u` (`first`: the innermost
    /// scope of the site): `Some` when it decides the lookup.
    fn lookup_in_scope(
        &self,
        cx: &Ctx,
        u: SymId,
        first: bool,
        name: &str,
        depth: u32,
        past_locals: bool,
    ) -> Option<(Vec<Val>, How)> {
        let fi = cx.file;
        let conv = self.conventions_of(fi);
        let us = &self.syms[u];
        // Class bodies are no scope for the functions inside them (Python, TS, Rust impls).
        let class_scope = is_classlike(us.node_type) || us.node_type == NodeType::Impl;
        // `impl<T: Trait>` / `where T: Trait`: type parameters are bindings
        // of the impl that its methods see (its methods are not).
        if us.node_type == NodeType::Impl && !first {
            let vals = self.impl_type_parameter(fi, u, name, depth);
            if !vals.is_empty() {
                return Some((vals, How::Inferred));
            }
        }
        if class_scope && !first {
            return None;
        }
        // Found once: the definition check and the value both read it.
        if let Some(bi) = self.visible_binding(cx, u, name, past_locals) {
            if let Some(d) = self.definition_over_binding(cx, u, name, bi) {
                return Some((vec![self.as_val(d)], How::Scope));
            }
            if let Some(found) = self.binding_value(cx, u, name, bi, depth) {
                return Some(found);
            }
        }
        // Nested definitions (where the language has them in scope: never
        // the items of a Rust `impl` or trait body, which are reached
        // through `Self::` / a value).
        let value_members =
            !first && us.node_type == NodeType::Constant && !conv.functions_in_values_in_scope;
        let defs = if value_members {
            Vec::new()
        } else if conv.items_of_type_bodies_in_scope || !class_scope {
            self.definitions_named(u, name)
        } else {
            Vec::new()
        };
        // `mod value;` beside `use …::value` (a function): two namespaces;
        // both are meant and the use site picks.
        let only_modules = conv.modules_apart_from_values
            && !defs.is_empty()
            && defs
                .iter()
                .all(|&d| self.syms[d].node_type == NodeType::Module);
        if only_modules {
            let mut vals: Vec<Val> = defs.iter().map(|&d| self.as_val(d)).collect();
            vals.extend(self.scope_imports(fi, u, name, false, depth + 1));
            return Some((vals, How::Scope));
        }
        if !defs.is_empty() {
            let defs = if defs.len() > 1 {
                self.rules_of(fi)
                    .choose(self, defs, Among::Scope { before: cx.byte })
            } else {
                defs
            };
            return Some((
                defs.into_iter().map(|d| self.as_val(d)).collect(),
                How::Scope,
            ));
        }
        // Imports in this scope.
        let vals = self.scope_imports(fi, u, name, false, depth + 1);
        (!vals.is_empty()).then_some((vals, How::Import))
    }

    /// The definitions named `name` directly in unit `u` (the units a bare
    /// name there may mean: no `impl` block, and a method only where the
    /// language has methods in scope).
    fn definitions_named(&self, u: SymId, name: &str) -> Vec<SymId> {
        let methods_in_scope = self.conventions_of(self.syms[u].file).methods_in_scope;
        self.named_children(u, name)
            .iter()
            .copied()
            .filter(|&c| {
                let s = &self.syms[c];
                s.name == name
                    && s.node_type.is_symbol()
                    && s.node_type != NodeType::Impl
                    && (methods_in_scope || s.node_type != NodeType::Method)
            })
            .collect()
    }

    /// A type parameter of `impl` unit `u` named `name`, as its bound.
    fn impl_type_parameter(&self, fi: FileIdx, u: SymId, name: &str, depth: u32) -> Vec<Val> {
        let facts = self.files[fi].facts.get();
        let part = self.part(fi);
        for &bi in part.bindings_named(facts, name) {
            let b = &facts.bindings[bi.index()];
            if part.scopes[bi] == u && b.is_type {
                let bcx = Ctx {
                    file: fi,
                    byte: b.byte,
                    scope: u,
                };
                let vals = self.eval_type(&bcx, facts.s(b.expr), depth + 1);
                if !vals.is_empty() {
                    return vals;
                }
            }
        }
        Vec::new()
    }

    /// The local binding of `name` in scope `u` visible at `cx` (the last
    /// one before the site, else, where the language allows it, any),
    /// evaluated; `Some` when it decides the lookup (a local whose value is
    /// unknown still shadows outer names).
    fn local_binding(
        &self,
        cx: &Ctx,
        u: SymId,
        name: &str,
        depth: u32,
        past_locals: bool,
    ) -> Option<(Vec<Val>, How)> {
        let bi = self.visible_binding(cx, u, name, past_locals)?;
        self.binding_value(cx, u, name, bi, depth)
    }

    /// [`World::local_binding`] of the binding `bi` its use at `cx` reads
    /// ([`World::visible_binding`]).
    fn binding_value(
        &self,
        cx: &Ctx,
        u: SymId,
        name: &str,
        bi: BindingIdx,
        depth: u32,
    ) -> Option<(Vec<Val>, How)> {
        let fi = cx.file;
        let facts = self.files[fi].facts.get();
        let b = &facts.bindings[bi.index()];
        if facts.s(b.expr) == UNBOUND {
            // The end of a binding with no earlier one in this unit: none.
            return None;
        }
        // The value is read where the binding starts, before it exists:
        // `let value = value(x)` calls the outer `value`.
        let bcx = Ctx {
            file: fi,
            byte: b.byte.saturating_sub(1),
            scope: u,
        };
        let expr = facts.s(b.expr);
        let vals = if b.is_type {
            self.eval_type(&bcx, expr, depth + 1)
        } else if let Some(p) = expr.strip_prefix(PARAM_VALUE) {
            self.rules_of(fi).parameter_value(self, fi, p, depth + 1)
        } else if expr != name {
            self.eval(&bcx, expr, depth + 1)
        } else {
            Vec::new()
        };
        if !vals.is_empty() {
            return Some((vals, How::Inferred));
        }
        // A local of an enclosing function shadows outer names wherever it
        // is bound in that function: a nested function runs after it is.
        let bound_first = b.byte <= cx.byte || u != cx.scope;
        (bound_first && self.syms[u].node_type != NodeType::File).then_some((Vec::new(), How::None))
    }

    /// The binding of `name` in unit `u` that a use at `cx` reads: the last
    /// one before it, else (where the language lets a later binding stand
    /// in) the first one after it.
    fn visible_binding(
        &self,
        cx: &Ctx,
        u: SymId,
        name: &str,
        past_locals: bool,
    ) -> Option<BindingIdx> {
        let fi = cx.file;
        let facts = self.files[fi].facts.get();
        let part = self.part(fi);
        // A file's top level is no sequence: its bindings (Go's package
        // variables) are seen before them in every language.
        let later_visible = self.conventions_of(fi).locals_visible_before_binding
            || self.syms[u].node_type == NodeType::File;
        let mut best: Option<BindingIdx> = None;
        for &bi in part.bindings_named(facts, name) {
            let b = &facts.bindings[bi.index()];
            if past_locals && !b.is_type {
                continue;
            }
            // Rust locals exist only after their `let`; elsewhere a later
            // binding stands in when none comes before.
            let visible = b.byte <= cx.byte || (best.is_none() && later_visible);
            if part.scopes[bi] == u && visible {
                best = Some(bi);
            }
        }
        best
    }

    /// A definition named `name` directly in unit `u` that stands between
    /// the binding `bi` a use at `cx` reads ([`World::visible_binding`])
    /// and the use (Python: `check =
    /// lambda …` after the parameter `check`'s binding, or a `def` after an
    /// assignment), where definitions rebind names
    /// ([`super::lang::Conventions::definitions_rebind_names`]): the last
    /// such one.
    fn definition_over_binding(
        &self,
        cx: &Ctx,
        u: SymId,
        name: &str,
        bi: BindingIdx,
    ) -> Option<SymId> {
        if !self.conventions_of(cx.file).definitions_rebind_names {
            return None;
        }
        let from = self.files[cx.file].facts.get().bindings[bi.index()].byte;
        self.definitions_named(u, name)
            .into_iter()
            .filter(|&d| (from..=cx.byte).contains(&self.syms[d].start))
            .max_by_key(|&d| self.syms[d].start)
    }

    /// The value constant unit `c` holds (`export const focus = new
    /// Focus()`, `const blur: Blur = …`): the binding its own declaration
    /// makes of its name, evaluated there. An import of the constant, or a
    /// module's member, reaches the unit, not the binding: this is how a
    /// module-level singleton's methods are found from other files.
    pub(crate) fn constant_value(&self, c: SymId, depth: u32) -> Vec<Val> {
        let s = &self.syms[c];
        if s.node_type != NodeType::Constant || depth > MAX_DEPTH {
            return Vec::new();
        }
        let cx = Ctx {
            file: s.file,
            byte: s.end,
            scope: c,
        };
        let Some((expr, is_type, byte)) = self.binding_of(&cx, &s.name) else {
            return Vec::new();
        };
        // Only the declaration's own binding (not an earlier one of the
        // name around it), and never the constant read as itself.
        if byte < s.start || byte >= s.end || expr == s.name || expr.starts_with(PARAM_VALUE) {
            return Vec::new();
        }
        let bcx = Ctx {
            file: s.file,
            byte: byte.saturating_sub(1),
            scope: c,
        };
        let vals = if is_type {
            self.eval_type(&bcx, expr, depth + 1)
        } else {
            self.eval(&bcx, expr, depth + 1)
        };
        vals.into_iter()
            .filter(|v| !matches!(v, Val::Func(f) if *f == c))
            .collect()
    }

    /// The items (`item`: `#elem`, `#k`, …) of the constant named `local`
    /// in scope at `cx` (`STD#elem` of `const STD: &[HeaderName] = …`):
    /// the item bindings its own declaration makes, as types. A constant's
    /// bindings are in its own scope, which no use of it is inside.
    pub(crate) fn constant_items(&self, cx: &Ctx, local: &str, item: &str, depth: u32) -> Vec<Val> {
        if depth > MAX_DEPTH {
            return Vec::new();
        }
        let mut out = Vec::new();
        for v in self.lookup_in(cx, local, depth + 1, false).0 {
            let Val::Func(c) = v else {
                continue;
            };
            let s = &self.syms[c];
            if s.node_type != NodeType::Constant {
                continue;
            }
            let ccx = Ctx {
                file: s.file,
                byte: s.end,
                scope: c,
            };
            let Some((expr, true, byte)) = self.binding_of(&ccx, &format!("{}{item}", s.name))
            else {
                continue;
            };
            if byte < s.start || byte >= s.end {
                continue;
            }
            let bcx = Ctx {
                file: s.file,
                byte: byte.saturating_sub(1),
                scope: c,
            };
            out.extend(self.eval_type(&bcx, expr, depth + 1));
        }
        out
    }

    /// The value of the top-level binding `name` of file `fi` that is no
    /// unit (a Go package-level `var x = …` / `var x T`), evaluated; empty
    /// when the file binds no such name at its top level.
    pub(crate) fn top_level_value(&self, fi: FileIdx, name: &str, depth: u32) -> Vec<Val> {
        let Some(fu) = self.file_unit[fi] else {
            return Vec::new();
        };
        if depth > MAX_DEPTH {
            return Vec::new();
        }
        let cx = Ctx {
            file: fi,
            byte: u32::MAX,
            scope: fu,
        };
        match self.local_binding(&cx, fu, name, depth + 1, false) {
            Some((vals, _)) => vals,
            None => Vec::new(),
        }
    }

    /// The expression of the binding of `name` visible at `cx` (the last
    /// one before the site in the innermost scope that has one), as
    /// written: a type or a value.
    pub(crate) fn binding_expr(&self, cx: &Ctx, name: &str) -> Option<&str> {
        self.binding_of(cx, name).map(|(e, _, _)| e)
    }

    /// [`World::binding_expr`], whether it is a type, and its byte.
    pub(crate) fn binding_of(&self, cx: &Ctx, name: &str) -> Option<(&str, bool, u32)> {
        let facts = self.files[cx.file].facts.get();
        let part = self.part(cx.file);
        let ids = part.bindings_named(facts, name);
        let mut cur = Some(cx.scope);
        while let Some(u) = cur {
            let found = ids
                .iter()
                .copied()
                .filter(|&bi| part.scopes[bi] == u && facts.bindings[bi.index()].byte <= cx.byte)
                .max_by_key(|&bi| facts.bindings[bi.index()].byte);
            if let Some(bi) = found {
                let b = &facts.bindings[bi.index()];
                if facts.s(b.expr) != UNBOUND {
                    return Some((facts.s(b.expr), b.is_type, b.byte));
                }
            }
            cur = self.parent_of(u);
        }
        None
    }

    /// Whether `name` at `cx` is bound by an import (no local binding in
    /// scope) from a module that is no file of the repository (`import
    /// textwrap`, `from xml.etree import ElementTree`, `import fs from
    /// "fs"`). The module is what is looked up, not the name: a name read
    /// from a repository module that is no unit (mobx's `observable`
    /// constant through `../internal`) is still the repository's.
    pub(crate) fn imported_from_outside(&self, cx: &Ctx, name: &str) -> bool {
        let facts = self.files[cx.file].facts.get();
        let named = self.part(cx.file).imports_named(facts, name);
        if named.is_empty() || self.binding_of(cx, name).is_some() {
            return false;
        }
        let mut cur = Some(cx.scope);
        while let Some(u) = cur {
            let mut in_scope = named.iter().filter(|(_, scope)| *scope == u).peekable();
            if in_scope.peek().is_some() {
                return in_scope.all(|(ii, _)| {
                    let module = facts.s(facts.imports[ii.index()].module);
                    self.import_target(cx.file, module, None, 0).is_empty()
                });
            }
            cur = self.parent_of(u);
        }
        false
    }

    /// What the imports of scope `u` in file `fi` bind `name` to
    /// (`exported_only`: only those importers of the file see, see
    /// [`crate::facts::Import::exported`]).
    pub(crate) fn scope_imports(
        &self,
        fi: FileIdx,
        u: SymId,
        name: &str,
        exported_only: bool,
        depth: u32,
    ) -> Vec<Val> {
        let facts = self.files[fi].facts.get();
        let imports = &facts.imports;
        self.part(fi)
            .imports_named(facts, name)
            .iter()
            .filter(|(ii, scope)| *scope == u && (!exported_only || imports[ii.index()].exported))
            .flat_map(|(ii, _)| {
                let i = &imports[ii.index()];
                let imported = i.name.map(|n| facts.s(n));
                self.import_target(fi, facts.s(i.module), imported, depth)
            })
            .collect()
    }

    /// What calling `name` gives at `cx` when `name` is no unit: the
    /// binding `name()` in scope (see [`CALL_RESULT`]), else that of the
    /// value an import of `name` reads, through re-exports.
    pub(crate) fn call_binding(&self, cx: &Ctx, name: &str, depth: u32) -> Vec<Val> {
        if depth > MAX_DEPTH || !self.conventions_of(cx.file).call_bindings {
            return Vec::new();
        }
        let called = format!("{name}{CALL_RESULT}");
        let mut cur = Some(cx.scope);
        while let Some(u) = cur {
            if let Some((vals, _)) = self.local_binding(cx, u, &called, depth, false) {
                return vals;
            }
            cur = self.parent_of(u);
        }
        let facts = self.files[cx.file].facts.get();
        let imports = &facts.imports;
        let found: Vec<ImportIdx> = self
            .part(cx.file)
            .imports_named(facts, name)
            .iter()
            .map(|(ii, _)| *ii)
            .collect();
        for ii in found {
            let i = &imports[ii.index()];
            // A namespace import (`import * as ns`) is no value to call.
            let Some(exported) = i.name.map(|n| facts.s(n)) else {
                continue;
            };
            for m in self.import_target(cx.file, facts.s(i.module), None, depth + 1) {
                if let Val::File(g) = m {
                    let vals = self.exported_call_binding(g, exported, depth + 1);
                    if !vals.is_empty() {
                        return vals;
                    }
                }
            }
        }
        Vec::new()
    }

    /// [`World::call_binding`] of `name` as a member of file `f`: its
    /// top-level binding `name()`, else through what `f` re-exports under
    /// that name (named or `*`).
    fn exported_call_binding(&self, f: FileIdx, name: &str, depth: u32) -> Vec<Val> {
        if depth > MAX_DEPTH {
            return Vec::new();
        }
        let Some(fu) = self.file_unit[f] else {
            return Vec::new();
        };
        let top = Ctx {
            file: f,
            byte: u32::MAX,
            scope: fu,
        };
        if let Some((vals, _)) =
            self.local_binding(&top, fu, &format!("{name}{CALL_RESULT}"), depth, false)
        {
            return vals;
        }
        let facts = self.files[f].facts.get();
        for i in facts.imports.iter().filter(|i| i.exported) {
            let local = facts.s(i.local);
            let wanted = match i.name.map(|n| facts.s(n)) {
                _ if local == "*" => name,
                Some(n) if local == name => n,
                _ => continue,
            };
            for m in self.import_target(f, facts.s(i.module), None, depth + 1) {
                let Val::File(g) = m else { continue };
                if g == f {
                    continue;
                }
                let vals = self.exported_call_binding(g, wanted, depth + 1);
                if !vals.is_empty() {
                    return vals;
                }
            }
        }
        Vec::new()
    }

    /// Top-level definitions of a file named `name`, then what it imports (re-exports) under that name.
    pub(crate) fn module_member(&self, f: FileIdx, name: &str, depth: u32) -> Vec<Val> {
        if depth > MAX_DEPTH {
            return Vec::new();
        }
        let Some(fu) = self.file_unit[f] else {
            return Vec::new();
        };
        let conv = self.conventions_of(f);
        let mut direct = self.definitions_named(fu, name);
        if direct.len() > 1 {
            direct = self.rules_of(f).choose(self, direct, Among::ModuleTop);
        }
        let direct: Vec<Val> = direct.into_iter().map(|d| self.as_val(d)).collect();
        let only_modules = conv.modules_apart_from_values
            && !direct.is_empty()
            && direct.iter().all(|v| self.is_module_value(v));
        if !direct.is_empty() && !only_modules {
            return direct;
        }
        let imported = self.scope_imports(f, fu, name, true, depth + 1);
        if only_modules {
            // `mod value;` and `pub use item::value;`: two namespaces, both meant.
            let mut both = direct;
            both.extend(imported);
            return both;
        }
        if !imported.is_empty() {
            return imported;
        }
        if let Some(sub) = self.rules_of(f).submodule(self, f, name) {
            return vec![sub];
        }
        let variable = self.module_variable(f, fu, name, depth);
        if !variable.is_empty() {
            return variable;
        }
        self.glob_reexport(f, fu, name, depth)
    }

    /// `name` as a member of inline module `m` (Rust's `mod m { … }`,
    /// whose own items [`World::member`] found none of): what the imports
    /// directly inside it bind to `name`, else its globs' members.
    pub(crate) fn module_imports(&self, m: SymId, name: &str, depth: u32) -> Vec<Val> {
        if depth > MAX_DEPTH {
            return Vec::new();
        }
        let f = self.syms[m].file;
        let imported = self.scope_imports(f, m, name, true, depth + 1);
        if !imported.is_empty() {
            return imported;
        }
        self.glob_reexport(f, m, name, depth)
    }

    /// A module's top-level variable read from outside it, where the
    /// language makes it a member ([`super::lang::Conventions::variables_are_module_members`]:
    /// `ib = attrib` in `attr/__init__.py`, read as `attr.ib` or imported
    /// with `from attr import ib`): its value as the module's own code
    /// sees it at its end.
    fn module_variable(&self, f: FileIdx, fu: SymId, name: &str, depth: u32) -> Vec<Val> {
        if !self.conventions_of(f).variables_are_module_members {
            return Vec::new();
        }
        let cx = Ctx {
            file: f,
            byte: u32::MAX,
            scope: fu,
        };
        self.local_binding(&cx, fu, name, depth + 1, false)
            .map(|(vals, _)| vals)
            .unwrap_or_default()
    }

    /// `name` through the glob imports file `f` re-exports: the first
    /// glob's members that have it, past those the default build leaves
    /// out (`pub use styled::*;` under `cfg(feature = "x")` before `pub
    /// use plain::*;`), which are kept only when no other glob has it.
    fn glob_reexport(&self, f: FileIdx, u: SymId, name: &str, depth: u32) -> Vec<Val> {
        let facts = self.files[f].facts.get();
        let part = self.part(f);
        let mut left_out = Vec::new();
        for (ii, _) in part
            .imports_named(facts, "*")
            .iter()
            .filter(|(_, scope)| *scope == u)
        {
            let i = &facts.imports[ii.index()];
            if !i.exported {
                continue;
            }
            for m in self.import_target(f, facts.s(i.module), None, depth + 1) {
                if m == Val::File(f) || m == Val::Class(u) {
                    continue;
                }
                let vals = self.member(&m, name, depth + 1);
                if !vals.is_empty() {
                    if self.all_off_in_default_build(&vals) {
                        if left_out.is_empty() {
                            left_out = vals;
                        }
                        continue;
                    }
                    return vals;
                }
            }
        }
        left_out
    }

    /// Whether every definition among `vals` is left out of the default
    /// build ([`World::off_in_default_build`]).
    fn all_off_in_default_build(&self, vals: &[Val]) -> bool {
        let defs = self.defs_of(vals);
        !defs.is_empty() && defs.iter().all(|&d| self.off_in_default_build(d))
    }

    /// What an import of `module` (and `name` inside it) binds, from file `fi`.
    pub(crate) fn import_target(
        &self,
        fi: FileIdx,
        module: &str,
        name: Option<&str>,
        depth: u32,
    ) -> Vec<Val> {
        if depth > MAX_DEPTH {
            return Vec::new();
        }
        // Memoised: glob imports and re-export chains are walked for many names.
        let key = (fi, module.to_string(), name.map(str::to_string));
        // A result computed with at least this much depth budget left is as complete.
        if let Some((d, v)) = self
            .import_cache
            .read()
            .ok()
            .and_then(|c| c.get(&key).cloned())
            && d <= depth
        {
            return v;
        }
        let v = self
            .rules_of(fi)
            .import_target(self, fi, module, name, depth);
        if let Ok(mut c) = self.import_cache.write() {
            c.insert(key, (depth, v.clone()));
        }
        v
    }
}
