//! Rust traits in resolution: which trait an `impl` block implements
//! (from the `ImplTrait` facts every pass reads, `World::impl_traits`),
//! the methods a value gets from its impls of one trait, and the bases a
//! type gets from the traits it implements and from `Deref`.

use crate::lang::NodeType;
use crate::resolve::eval::{Ctx, Val};
use crate::resolve::ids::SymId;
use crate::resolve::world::World;

/// The methods `name` of the value `e`'s type that come from its impls of
/// the trait whose last path segment is `tr`.
pub(super) fn trait_methods(w: &World, cx: &Ctx, e: &str, name: &str, tr: &str) -> Vec<SymId> {
    let mut out = Vec::new();
    for v in w.eval(cx, e, 0) {
        if let Val::Class(c) | Val::Inst(c) = v {
            out.extend(
                w.owned_methods(w.type_of_impl(c))
                    .iter()
                    .copied()
                    .filter(|&m| {
                        w.syms[m].name == name
                            && w.parent_of(m).is_some_and(|i| impl_trait_is(w, i, tr))
                    }),
            );
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// The last path segment of the trait the innermost `impl` around `cx` implements.
pub(super) fn enclosing_impl_trait<'w>(w: &'w World, cx: &Ctx) -> Option<&'w str> {
    let mut cur = Some(cx.scope);
    while let Some(c) = cur {
        if w.syms[c].node_type == NodeType::Impl {
            return impl_trait_name(w, c);
        }
        cur = w.parent_of(c);
    }
    None
}

/// The last path segment of the trait `impl_sym` implements (`Deref` for
/// `impl std::ops::Deref for T`), if it implements one.
pub(super) fn impl_trait_name(w: &World, impl_sym: SymId) -> Option<&str> {
    let (_, tr) = w
        .impl_traits
        .get(&w.syms[impl_sym].name)?
        .iter()
        .find(|(s, _)| *s == impl_sym)?;
    let tr = tr.split_once('\u{0}').map_or(tr.as_str(), |(_, t)| t);
    tr.rsplit('.').next()
}

/// Whether `impl_sym` implements a trait whose last path segment is `name`.
pub(super) fn impl_trait_is(w: &World, impl_sym: SymId, name: &str) -> bool {
    impl_trait_name(w, impl_sym) == Some(name)
}

/// Whether `impl_sym` implements a trait (else it is an inherent impl).
pub(super) fn impl_has_trait(w: &World, impl_sym: SymId) -> bool {
    w.impl_traits
        .get(&w.syms[impl_sym].name)
        .is_some_and(|v| v.iter().any(|(s, _)| *s == impl_sym))
}

/// The bases type `t` gets from its impls in its crate: the traits, and
/// (auto-deref: `impl Deref for T { type Target = U; }`) the types whose
/// methods `T` gets.
pub(super) fn implemented(w: &World, t: SymId, depth: u32, out: &mut Vec<SymId>) {
    let ts = &w.syms[t];
    let key = w.method_scope(ts.file);
    for (impl_sym, tr) in w.impl_traits.get(&ts.name).into_iter().flatten() {
        let Some((k, tr)) = tr.split_once('\u{0}') else {
            continue;
        };
        if k != key {
            continue;
        }
        let icx = w.ctx_at_start(*impl_sym);
        w.type_units(&icx, tr, depth + 1, out);
        if impl_trait_is(w, *impl_sym, "Deref") {
            for &target in w.named_children(*impl_sym, "Target") {
                for b in w.bases_of(target) {
                    w.type_units(&icx, b, depth + 1, out);
                }
            }
        }
    }
}
