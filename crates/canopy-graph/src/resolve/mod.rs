//! Resolution (after an index run): binds each site of a file's facts to
//! the definitions it means.
//!
//! The [`World`] holds every unit (from the store) and every file's facts
//! (`world`). A site is resolved (`sites`) by evaluating its receiver
//! expression to a value (`eval`) — an instance or the type itself of a
//! class-like unit, a function, or a module — then looking its name up as
//! a member of that value (through base classes, embedded fields, `impl`
//! blocks and implemented traits). A bare name is looked up in lexical
//! scope order (`lookup`): local bindings and nested definitions of the
//! enclosing units, the file's top-level definitions, its imports, the
//! package, glob imports, the prelude.
//!
//! Architecture Invariant: the evaluator (`world`, `eval`, `lookup`,
//! `sites`) never asks which language it is. Language differences are
//! data and hooks behind one trait, `lang::LanguageRules`, one file per
//! language family under `lang/` (self names, module naming, Rust's
//! namespaces and Cargo packages, pytest fixtures, Go packages).
//!
//! A site that matches one definition is `resolved`; several, `ambiguous`
//! (all candidates kept); none inside the repository, `unresolved`.

mod eval;
mod generics;
pub(crate) mod ids;
mod kept;
pub(crate) mod lang;
mod lookup;
mod sites;
mod world;

use std::collections::{BTreeSet, HashMap};

pub use ids::{FileIdx, SymId};
pub use kept::{KeptRows, RefreshStats};
pub use lang::Manifests;
pub use world::{LazyFacts, World, WorldFile};

use crate::error::Result;
use crate::store::Store;
use crate::store::graph_rows::SymRow;

/// A pass's files (the world's file table), every unit, and the file
/// index of each `files.id`.
pub type WorldRows = (Vec<WorldFile>, Vec<SymRow>, HashMap<i64, FileIdx>);

/// Reads what a pass needs from the store: every file with its facts
/// (not its sites: a pass reads those per chunk of the files it resolves,
/// [`crate::store::Store::graph_sites`]) and every unit. The facts every
/// pass reads (Rust's, for `cfg` ranges and trait impls) and those of
/// `decode_now` (the files about to be resolved) are decoded on other
/// threads while this one reads the units (SQLite is single-threaded per
/// connection); the rest wait for first use.
pub fn read_world_rows(store: &Store, decode_now: &BTreeSet<i64>) -> Result<WorldRows> {
    use rayon::prelude::*;
    let (rows, index) = store.graph_file_rows()?;
    let files: Vec<WorldFile> = rows.into_iter().map(WorldFile::new).collect();
    let syms = rayon::in_place_scope(|scope| {
        let files = &files;
        scope.spawn(|_| {
            files
                .par_iter()
                .filter(|f| {
                    f.family.conventions().facts_read_by_every_pass || decode_now.contains(&f.id)
                })
                .for_each(|f| {
                    f.facts.get();
                });
        });
        store.graph_sym_rows(&index)
    })?;
    Ok((files, syms, index))
}

/// Architecture Invariant (above): the evaluator names no language.
#[cfg(test)]
mod layering {
    #[test]
    fn the_evaluator_never_branches_on_the_language() {
        // Every file of `resolve/` but the language rules (`lang/`), not a
        // list: a new part of the evaluator is checked too.
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/resolve");
        let sources = canopy_syntax::testing::sources_under(&dir);
        let evaluator: Vec<(&str, &str)> = sources
            .iter()
            .filter(|(name, _)| !name.starts_with("lang/"))
            .map(|(name, text)| (name.as_str(), text.as_str()))
            .collect();
        assert!(
            evaluator.len() >= 7,
            "found only {} evaluator files",
            evaluator.len()
        );
        let mut forbidden = vec![["Language", "::"].concat()];
        forbidden.extend(
            ["Python", "EcmaScript", "Go", "Rust", "Unresolved"].map(|f| ["Family::", f].concat()),
        );
        canopy_syntax::testing::assert_never_named(&evaluator, &forbidden, "names a language");
    }
}
