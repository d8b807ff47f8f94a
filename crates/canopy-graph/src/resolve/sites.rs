//! Binding a file's sites: each use of a name ([`crate::facts::Site`])
//! becomes an edge from the unit around it to the definitions it means —
//! through an import, a receiver's value, or the scope — and each
//! class-like unit gets edges to the types it extends or implements.
//! How sure an edge is follows from how it was found ([`confidence`]).

use std::collections::HashSet;

use super::eval::{Ctx, Val};
use super::ids::{FileIdx, SymId};
use super::world::{World, is_classlike};
use crate::facts::model::{
    EACH, ELEM, IMPORT_RECV, STD_WRAPPER, SUBSCRIPT_CALL, Site, SiteKind, UNION, split_top,
    type_arguments,
};
use crate::lang::NodeType;
use crate::store::graph_rows::{EdgeRow, How, Target};

/// How sure an edge found this way is, 0..=100.
pub(crate) fn confidence(how: How) -> u8 {
    match how {
        How::Scope | How::Import | How::Receiver => 100,
        How::Inferred | How::Inherited => 90,
        How::UniqueName => 50,
        How::None => 0,
        How::Base => 100,
    }
}

impl World {
    /// Resolves `sites`, the sites of file `fi` ([`World::decode_sites`]).
    pub fn resolve_file(&self, fi: FileIdx, sites: &[Site]) -> Vec<EdgeRow> {
        let _memo = super::eval::FieldMemo::scope();
        let mut out = Vec::with_capacity(sites.len() / 2);
        for site in sites {
            let Some(scope) = self.innermost(fi, site.byte) else {
                continue;
            };
            let cx = Ctx {
                file: fi,
                byte: site.byte,
                scope,
            };
            let (mut cands, mut how) =
                self.resolve_site(&cx, &site.name, site.recv.as_deref(), site.kind);
            if how == How::UniqueName
                && !cands
                    .iter()
                    .all(|&c| self.rules_of(fi).guess_fits(self, site.args, c))
            {
                // A guess the call's arguments rule out: unresolved, as
                // when there is nothing to guess.
                (cands, how) = (Vec::new(), How::Inferred);
            }
            cands.sort_unstable();
            cands.dedup();
            self.default_build_twins(scope, &mut cands);
            // `byName(list)` in Go converts: a use of the type, no call.
            let kind = if site.kind == SiteKind::Call
                && !cands.is_empty()
                && self.conventions_of(fi).calls_of_types_convert
                && cands.iter().all(|&c| is_classlike(self.syms[c].node_type))
            {
                SiteKind::Type
            } else {
                site.kind
            };
            let src = self.syms[self.caller_unit(fi, site.byte).unwrap_or(scope)].id;
            let each = match (&site.recv, how) {
                (None, How::Inferred) => !cands.is_empty() && self.through_each(&cx, site),
                (Some(_), _) => cands.len() > 1 && self.through_each(&cx, site),
                (None, _) => false,
            };
            if each && site.recv.is_none() && site.kind != SiteKind::Call {
                // `f` in `for f in [a, b]: register(f)` is the loop
                // variable, not a use of what it holds.
                continue;
            }
            if each && cands.len() > 1 {
                // `func(x)` in `for func in [a, b]:` calls each of them.
                for &c in &cands {
                    out.push(EdgeRow {
                        src,
                        target: Target::Resolved(self.syms[c].id),
                        kind,
                        how,
                        confidence: confidence(how),
                        line: site.line,
                        col: site.col,
                        name: site.name.clone(),
                    });
                }
                continue;
            }
            let target = match cands.len() {
                0 => {
                    // Only calls are worth recording unresolved ("N call sites named X").
                    if kind != SiteKind::Call {
                        continue;
                    }
                    Target::Unresolved
                }
                1 => Target::Resolved(self.syms[cands[0]].id),
                _ => Target::Ambiguous(cands.iter().map(|&c| self.syms[c].id).collect()),
            };
            let how = if target == Target::Unresolved {
                How::None
            } else {
                how
            };
            let confidence = match &target {
                Target::Ambiguous(c) => (confidence(how) / c.len() as u8).max(1),
                _ => confidence(how),
            };
            out.push(EdgeRow {
                src,
                target,
                kind,
                how,
                confidence,
                line: site.line,
                col: site.col,
                name: site.name.clone(),
            });
        }
        self.base_edges(fi, &mut out);
        self.module_import_edges(fi, &mut out);
        out
    }

    /// Of several definitions a site in unit `scope` may mean, drops those
    /// its language says the default build leaves out when others remain
    /// ([`super::lang::LanguageRules::off_in_default_build`]: Rust twins
    /// under `cfg(feature = "x")` and `cfg(not(feature = "x"))`). Not for
    /// a site the default build leaves out itself: code under a feature
    /// may mean its own twin.
    pub(crate) fn default_build_twins(&self, scope: SymId, cands: &mut Vec<SymId>) {
        if cands.len() < 2 || self.off_in_default_build(scope) {
            return;
        }
        let on: Vec<SymId> = cands
            .iter()
            .copied()
            .filter(|&c| !self.off_in_default_build(c))
            .collect();
        if !on.is_empty() && on.len() < cands.len() {
            *cands = on;
        }
    }

    /// Whether definition `c` is left out of its package's default build.
    pub(crate) fn off_in_default_build(&self, c: SymId) -> bool {
        self.rules_of(self.syms[c].file)
            .off_in_default_build(self, c)
    }

    /// Whether a site's name (or its receiver's root) is bound to every
    /// one of several values ([`EACH`]), so that its candidates are all
    /// meant, not one of them.
    fn through_each(&self, cx: &Ctx, site: &Site) -> bool {
        let head = match &site.recv {
            Some(r) => r.split('.').next().unwrap_or_default(),
            None => site.name.as_str(),
        };
        self.each_bound(cx, head, 0)
            || site.recv.as_deref().is_some_and(|r| {
                self.returns_each(cx, r)
                    || self.value_union_is_each(cx, head)
                    || self.field_is_each(cx, r)
            })
    }

    /// Whether receiver `r` is a field (`this.item` of
    /// `this.item?.reset()`) declared on its holder's class, or a base,
    /// with a union type (`item: Gauge | Dial | null`): each alternative,
    /// as a parameter or local so declared is.
    fn field_is_each(&self, cx: &Ctx, r: &str) -> bool {
        let Some((before, last)) = r.rsplit_once('.') else {
            return false;
        };
        if last.is_empty()
            || !last
                .chars()
                .all(|c| c.is_alphanumeric() || matches!(c, '_' | '$' | '#'))
        {
            return false;
        }
        self.eval_path(cx, before, 0, true).iter().any(|v| match v {
            Val::Inst(t) => self
                .declared_field(*t, last, 0)
                .is_some_and(|(e, dcx)| self.type_is_each(&dcx, &e, 1)),
            _ => false,
        })
    }

    /// Whether receiver `r` is a call (`startOfWeek(d)` of
    /// `startOfWeek(d).add(…)`) of a function declared to return a union
    /// of several types ([`World::type_is_each`]): the call's result is
    /// each of them, as a value of that type is.
    fn returns_each(&self, cx: &Ctx, r: &str) -> bool {
        let Some(callee) = r.strip_suffix("()") else {
            return false;
        };
        self.eval(cx, callee, 0).iter().any(|v| match v {
            Val::Func(f) => self
                .result_type(*f)
                .is_some_and(|t| self.type_is_each(&self.ctx_at_end(*f), t, 0)),
            _ => false,
        })
    }

    /// Whether value `e` (a local's) is a call of a function declared to
    /// return a union ([`World::returns_each`]), one with no overloads: an
    /// overloaded function's implementation declares every overload's
    /// result, of which the call gives one (`setTime(…)`: a `Time` or a
    /// `CalendarDateTime`, as its argument is).
    fn bound_call_returns_each(&self, cx: &Ctx, e: &str) -> bool {
        let Some(callee) = e.strip_suffix("()") else {
            return false;
        };
        let overloaded = |f: SymId| {
            let s = &self.syms[f];
            self.file_syms[s.file]
                .iter()
                .any(|&o| o != f && self.syms[o].qualified_name == s.qualified_name)
        };
        let vals = self.eval(cx, callee, 0);
        !vals
            .iter()
            .any(|v| matches!(v, Val::Func(f) if overloaded(*f)))
            && self.returns_each(cx, e)
    }

    /// Whether type `e` read at `cx` is every one of several types: a
    /// union ([`EACH`]), a union alias (`DateValue`), a type parameter
    /// bounded by one, or a mapped type that keeps the members of one
    /// (`Mutable<A | B>`, see [`World::kept_argument`]).
    fn type_is_each(&self, cx: &Ctx, e: &str, hops: u32) -> bool {
        if e.starts_with(EACH) {
            return true;
        }
        if hops >= 3 {
            return false;
        }
        if let Some((head, args, "")) = type_arguments(e) {
            // The argument a mapped type keeps, or an awaited `Promise`'s;
            // any other generic is itself.
            let generic = self.eval_path(cx, head, 0, false);
            let kept = generic
                .iter()
                .find_map(|g| match g {
                    Val::Class(a) | Val::Inst(a) => self.kept_argument(*a, &args),
                    _ => None,
                })
                .or_else(|| self.awaited_argument(cx, &generic, head, &args));
            return self.type_is_each(cx, kept.unwrap_or(head), hops + 1);
        }
        let root = e.split(['.', '(', '#']).next().unwrap_or_default();
        root == e
            && (self.each_bound(cx, e, hops + 1)
                || self.eval_path(cx, e, 0, false).iter().any(
                    |v| matches!(v, Val::Class(t) | Val::Inst(t) if self.union_alias(*t).is_some()),
                ))
    }

    /// Whether `name` at `cx` is bound to every one of several values
    /// ([`EACH`]), or to a value read through such a name (`const ext =
    /// C.create()` where `C` is each of `[Extension, Node, Mark]`: `ext` is
    /// each one's instance, so `ext.configure()` calls each `configure`),
    /// a few bindings deep.
    fn each_bound(&self, cx: &Ctx, name: &str, hops: u32) -> bool {
        let Some((e, is_type, byte)) = self.binding_of(cx, name) else {
            return false;
        };
        if e.starts_with(EACH) {
            return true;
        }
        if is_type && e != name {
            // A type named: a union alias (`date: DateValue`), a type
            // parameter bounded by one (`a: A`, `A extends DateValue`), a
            // mapped type of one (`m: Mutable<DateValue>`).
            return self.type_is_each(cx, e, hops);
        }
        let root = e.split(['.', '(', '#']).next().unwrap_or_default();
        if is_type || hops >= 3 || root.is_empty() || root == name {
            return false;
        }
        // The value as it was read where the binding is.
        let at = Ctx {
            file: cx.file,
            byte: byte.saturating_sub(1),
            scope: cx.scope,
        };
        // `const node = await this.lookup(h)` of a function declared to
        // return a union (`Promise<TrieNode>`): each alternative.
        self.bound_call_returns_each(&at, e) || self.each_bound(&at, root, hops + 1)
    }

    /// Whether `name` at `cx` is bound to several alternatives
    /// (`isA()∪isB()`) of which it holds each, as the file's language
    /// says ([`super::lang::Conventions::value_unions_are_each`]). The site
    /// has several candidates only when every alternative was known. Each
    /// alternative must be an instance of a class none of the others
    /// derives from: TypeScript drops from a narrowed union an alternative
    /// that is a subtype of another (`IObservableValue | ComputedValue` is
    /// the interface alone when the class has its members), and a subtype
    /// by structure is not read here.
    fn value_union_is_each(&self, cx: &Ctx, name: &str) -> bool {
        if !self.conventions_of(cx.file).value_unions_are_each {
            return false;
        }
        let Some((e, false, _)) = self.binding_of(cx, name) else {
            return false;
        };
        let alts = split_top(e, UNION);
        if alts.len() < 2 {
            return false;
        }
        let mut classes = Vec::new();
        for alt in alts {
            for v in self.eval(cx, alt, 0) {
                match v {
                    Val::Inst(c) if self.syms[c].node_type == NodeType::Class => classes.push(c),
                    _ => return false,
                }
            }
        }
        !classes
            .iter()
            .any(|&c| classes.iter().any(|&o| o != c && self.derives_from(c, o)))
    }

    /// Whether class `c` has `base` among its bases, a few levels up.
    fn derives_from(&self, c: SymId, base: SymId) -> bool {
        let mut seen = HashSet::new();
        let mut stack = self.base_types(c, 0);
        while let Some(b) = stack.pop() {
            if b == base {
                return true;
            }
            if seen.insert(b) && seen.len() < 32 {
                stack.extend(self.base_types(b, 0));
            }
        }
        false
    }

    /// Imports of modules that are files of the repository: an edge from
    /// the unit around the import statement to the imported file's unit,
    /// once per (unit, file). An import site whose name is a definition
    /// already has its edge (above); these make the file dependency that
    /// no definition carries — `from pkg import submodule`, `import pkg`,
    /// `from m import CONSTANT` (a name that is no unit), `import './x'`.
    fn module_import_edges(&self, fi: FileIdx, out: &mut Vec<EdgeRow>) {
        let mut seen: HashSet<(i64, FileIdx)> = HashSet::new();
        let facts = self.files[fi].facts.get();
        for i in &facts.imports {
            let module = facts.s(i.module);
            let mut vals = self.import_target(fi, module, i.name.map(|n| facts.s(n)), 0);
            if vals
                .iter()
                .any(|v| matches!(v, Val::Func(_) | Val::Class(_)))
            {
                // A definition: its import site's edge says the same.
                continue;
            }
            if i.name.is_some() && !vals.iter().any(|v| matches!(v, Val::File(_))) {
                // A name that is no unit (a constant, an instance): the module it is in.
                vals = self.import_target(fi, module, None, 0);
            }
            let Some(src) = self.caller_unit(fi, i.byte) else {
                continue;
            };
            let src = self.syms[src].id;
            for v in vals {
                let Val::File(target) = v else { continue };
                let Some(dst) = self.file_unit[target] else {
                    continue;
                };
                if target == fi || !seen.insert((src, target)) {
                    continue;
                }
                out.push(EdgeRow {
                    src,
                    target: Target::Resolved(self.syms[dst].id),
                    kind: SiteKind::Import,
                    how: How::Import,
                    confidence: confidence(How::Import),
                    line: i.line,
                    col: 0,
                    name: module.to_string(),
                });
            }
        }
    }

    /// Type relations of the class-like units of file `fi`: bases, traits an
    /// `impl` implements, and what the language adds (Go: the interfaces a
    /// type's method set satisfies).
    fn base_edges(&self, fi: FileIdx, out: &mut Vec<EdgeRow>) {
        for &t in &self.file_syms[fi] {
            let ts = &self.syms[t];
            if !is_classlike(ts.node_type) {
                continue;
            }
            let mut targets: Vec<SymId> = Vec::new();
            if ts.node_type == NodeType::Impl {
                for (_, tr) in self
                    .impl_traits
                    .get(&ts.name)
                    .into_iter()
                    .flatten()
                    .filter(|(i, _)| *i == t)
                {
                    let Some((_, tr)) = tr.split_once('\u{0}') else {
                        continue;
                    };
                    self.type_units(&self.ctx_at_start(t), tr, 0, &mut targets);
                }
            } else if self.has_bases(t) {
                targets.extend(self.base_types(t, 0).into_iter().filter(|&b| b != t));
            }
            self.rules_of(fi)
                .satisfied_interfaces(self, t, &mut targets);
            targets.sort_unstable();
            targets.dedup();
            for b in targets {
                out.push(EdgeRow {
                    src: ts.id,
                    target: Target::Resolved(self.syms[b].id),
                    kind: SiteKind::Type,
                    how: How::Base,
                    confidence: confidence(How::Base),
                    line: 0,
                    col: 0,
                    name: self.syms[b].name.clone(),
                });
            }
        }
    }

    /// The unit a site's edge starts from: the innermost named definition
    /// (functions, classes, …) containing it, else the file.
    fn caller_unit(&self, fi: FileIdx, byte: u32) -> Option<SymId> {
        self.innermost_where(fi, byte, |s| {
            s.node_type == NodeType::File
                || (s.node_type.is_symbol() && s.node_type != NodeType::Impl)
        })
    }

    /// The definitions a site means, and how they were found.
    pub(crate) fn resolve_site(
        &self,
        cx: &Ctx,
        name: &str,
        recv: Option<&str>,
        kind: SiteKind,
    ) -> (Vec<SymId>, How) {
        let conv = self.conventions_of(cx.file);
        match recv {
            Some(r)
                if r.starts_with(IMPORT_RECV)
                    || (kind == SiteKind::Import && conv.import_sites_name_their_module) =>
            {
                let module = r.strip_prefix(IMPORT_RECV).unwrap_or(r);
                let vals = self.import_target(cx.file, module, Some(name), 0);
                (self.defs_of(&vals), How::Import)
            }
            Some("?") => (Vec::new(), How::None),
            Some(r) => {
                match self
                    .rules_of(cx.file)
                    .qualified_receiver(self, cx, name, r, kind)
                {
                    Some(found) => found,
                    None => self.receiver_site(cx, name, r, kind),
                }
            }
            None => {
                let (mut vals, how) = self.lookup(cx, name, 0);
                if conv.modules_apart_from_values
                    && kind == SiteKind::Call
                    && vals.iter().any(|v| !self.is_module_value(v))
                {
                    // `value(x)` calls the function, not the module of that name.
                    vals.retain(|v| !self.is_module_value(v));
                }
                (self.defs_of(&vals), how)
            }
        }
    }

    /// A site on receiver `r`: the members named `name` of what `r`
    /// evaluates to; when nothing is known of `r`'s root, a call may be
    /// guessed ([`World::unique_method`]).
    fn receiver_site(&self, cx: &Ctx, name: &str, r: &str, kind: SiteKind) -> (Vec<SymId>, How) {
        let rules = self.rules_of(cx.file);
        let vals = match self.argument_type(cx, r) {
            Some(vals) => vals,
            None => self.eval(cx, r, 0),
        };
        let mut out = Vec::new();
        let mut how = How::Inferred;
        let first = r.split('.').next().unwrap_or_default();
        for v in &vals {
            if let Val::Inst(_) | Val::Super(_) = v
                && rules.is_self_receiver(first)
            {
                how = How::Receiver;
            }
            if matches!(v, Val::File(_) | Val::Module(_)) {
                how = How::Import;
            }
            let (found, inherited) = self.member_defs(v, name, 0);
            if inherited {
                how = How::Inherited;
            }
            out.extend(found);
        }
        // Unknown receiver: guess only when even its root is unknown (a
        // pattern or closure binding). A known root whose member has an
        // external type (`self.text.len()`, text: String) is external, and
        // so is an item of a local whose items are unknown (Go's
        // `ptrs[p].IsNil()` of `ptrs := make(map[…]…)`), and so is an item
        // of an unknown value (Python's `streams[0].getvalue()`).
        let root_unknown = || {
            if r.split('.').any(|seg| seg == SUBSCRIPT_CALL) {
                return false;
            }
            let root = r.split('.').next().unwrap_or_default();
            if let Some((local, _)) = root.split_once('#')
                && !local.is_empty()
                && self.binding_expr(cx, local).is_some()
            {
                return false;
            }
            root == r || self.eval(cx, root, 0).is_empty()
        };
        if out.len() > 1 {
            rules.narrow_methods(self, cx, &mut out);
        }
        if out.is_empty() && kind == SiteKind::Call {
            // A repository trait's method on a standard-library type
            // (`self.get(k).unwrap_unchecked_()` on `Option<&V>`).
            let on_std = rules.std_type_methods(self, cx, name, r);
            if !on_std.is_empty() {
                return (on_std, How::Inferred);
            }
        }
        if out.is_empty()
            && vals.is_empty()
            && kind == SiteKind::Call
            && root_unknown()
            && !rules.builtin_method(name)
            && !self.builtin_receiver(cx, r)
            && !self.external_receiver(cx, r)
            && !self.std_collection_receiver(cx, r)
        {
            // Unknown receiver: a method name defined once in the repository.
            if let Some(only) = self.unique_method(cx.file, name) {
                return (vec![only], How::UniqueName);
            }
        }
        (out, how)
    }

    /// Whether receiver `r` is known to be a value of a builtin or
    /// standard-library type ([`super::lang::LanguageRules::builtin_type`]): written as one
    /// (`set().add`), or its root bound to one in scope (`s: str`,
    /// `x = []`, `var b strings.Builder`). Such a call is never guessed:
    /// `str.replace` is not the repository's one `replace`.
    fn builtin_receiver(&self, cx: &Ctx, r: &str) -> bool {
        let rules = self.rules_of(cx.file);
        let root = r.split('.').next().unwrap_or_default();
        let builtin = |e: &str| rules.builtin_type(self, cx.file, e);
        // A union (`str∪bytes`, ECMAScript's `#each:A∪B`) is builtin when
        // every alternative is.
        let all_builtin = |e: &str| {
            split_top(e.strip_prefix(EACH).unwrap_or(e), UNION)
                .into_iter()
                .all(builtin)
        };
        // `o.f()` on `o: Option<U>` / `Mutex<U>` (a wrapper the binding
        // reads through, [`STD_WRAPPER`]): the wrapper's method.
        let wrapper = || {
            r == root
                && self
                    .binding_expr(cx, &format!("{root}{STD_WRAPPER}"))
                    .is_some()
        };
        builtin(root) || self.binding_expr(cx, root).is_some_and(all_builtin) || wrapper()
    }

    /// Whether receiver `r`, a path whose value is unknown here, is known
    /// by its items only, where that makes it a standard collection
    /// ([`super::lang::LanguageRules::items_only_of_std`]): `docs.into_iter()`
    /// of `let docs = load(s).unwrap()` (`load` giving `Result<Vec<Doc>,
    /// E>`) is std's `into_iter`, not the repository's one `into_iter`.
    /// Evaluated only where a call would otherwise be guessed.
    fn std_collection_receiver(&self, cx: &Ctx, r: &str) -> bool {
        self.rules_of(cx.file).items_only_of_std()
            && !r.contains('(')
            && !self.eval(cx, &format!("{r}{ELEM}"), 0).is_empty()
    }

    /// Whether receiver `r` comes from outside the repository: its root is
    /// a name an import binds to nothing in the repository (`textwrap` of
    /// `import textwrap`, so `textwrap.dedent(…)`), or a local bound to a
    /// value read through such a name (`el = etree.SubElement(…)`, so
    /// `el.set(…)`), or to a type parameter bounded only by traits from
    /// elsewhere ([`World::bounded_outside`]). Such a call is never
    /// guessed: the standard library's `dedent` is not the repository's one
    /// `dedent` (issue 27, "guesses").
    fn external_receiver(&self, cx: &Ctx, r: &str) -> bool {
        let root = r.split(['.', '#']).next().unwrap_or_default();
        if root.is_empty() {
            return false;
        }
        let Some(expr) = self.binding_expr(cx, root) else {
            return self.imported_from_outside(cx, root);
        };
        let head = expr
            .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '$'))
            .next()
            .unwrap_or_default();
        // `x = x.strip()` style rebinding reads the name itself: no import.
        // Only a value of the type parameter itself (`value: &T`), not an
        // item or a member of one (`for s in streams`, `streams: I`, `I:
        // IntoIterator<Item = S>`: an `S`).
        !head.is_empty()
            && head != root
            && (self.imported_from_outside(cx, head)
                || (head == expr && self.bounded_outside(cx, head)))
    }

    /// Whether `name` at `cx` is a type parameter (a type binding, `T` of
    /// `<T: A + B>` or `where T: A + B`, as `A∪B`) whose every bound is a
    /// trait the repository does not define (`serde::Serialize`,
    /// `fmt::Debug`, `Iterator`): a value of it has only those traits'
    /// methods, so a method name the repository defines once (csv's own
    /// `Writer::serialize` for `value.serialize(…)` on `T: Serialize`) is
    /// no guess for it. A parameter with a bound the repository defines
    /// is not one: its calls find that trait's methods, or are guessed as
    /// before.
    pub(crate) fn bounded_outside(&self, cx: &Ctx, name: &str) -> bool {
        let Some((bounds, true, _)) = self.binding_of(cx, name) else {
            return false;
        };
        !bounds.is_empty()
            && bounds
                .split(UNION)
                .all(|b| !b.is_empty() && self.eval_type(cx, b, 0).is_empty())
    }

    /// The method named `name` that a call in file `fi` on a receiver of
    /// unknown type is guessed to reach: the only method of that name in
    /// the repository (same language family), where the file's rules allow
    /// the guess ([`super::lang::LanguageRules::may_guess`]: Rust's Cargo
    /// packages). Uniqueness is over the whole repository, not over what
    /// the caller reaches: a name defined once is what makes the guess
    /// likely (`waker()` has one definition in tokio's own package and is
    /// mostly called on `std`'s `Context`).
    fn unique_method(&self, fi: FileIdx, name: &str) -> Option<SymId> {
        let family = self.files[fi].family;
        let c: Vec<SymId> = self
            .units_named(name)
            .iter()
            .copied()
            .filter(|&i| {
                let s = &self.syms[i];
                s.node_type == NodeType::Method && self.files[s.file].family == family
            })
            .collect();
        // A `.d.ts` copy of a source method is no second method.
        let c = self.rules_of(fi).drop_copies(self, c);
        let &[only] = c.as_slice() else {
            return None;
        };
        self.rules_of(fi)
            .may_guess(self, fi, self.syms[only].file)
            .then_some(only)
    }
}
