//! Whole-graph operations over resolved edges: implementations and
//! implements, type hierarchy, impact, file and package dependencies,
//! circular dependencies (Tarjan SCC), hotspots (fan-in / fan-out), unused
//! symbols and the dependency graph. Like [`super::nav`], they read a store
//! snapshot through [`super::nav::Graph`] and return bounded, serialisable answers.
//!
//! One file per concern: `deps` (dependencies, dependents, the
//! dependency graph, cycles), `usage` (hotspots, unused symbols),
//! `hierarchy` (implementations, implements, type hierarchy, impact),
//! `structure` (scope, detail), `symbols` (symbols, search) and `summary`
//! (file and package summaries).

mod deps;
mod hierarchy;
mod structure;
mod summary;
mod symbols;
#[cfg(test)]
mod tests;
mod usage;

pub use deps::{CycleAnswer, DepAnswer, DepEdge, DepNode, Level, tarjan_scc};
pub use structure::signature_of;
pub use summary::SummaryAnswer;
pub use symbols::{SymbolEntry, SymbolFilter, SymbolSort, SymbolsAnswer, Visibility};
pub(crate) use usage::Degree;
pub use usage::{Hotspot, HotspotAnswer, PathScope, Skipped, UnusedAnswer};

use crate::store::read::NodeRecord;

/// Files as (id, path, first node id, last node id).
type FileRanges = Vec<(i64, String, i64, i64)>;

/// `how` code of a type relation (bases, trait impls, satisfied interfaces).
const HOW_BASE: u8 = 7;

fn dir_of(path: &str) -> &str {
    path.rsplit_once('/').map_or(".", |(d, _)| d)
}

fn is_entry_point(n: &NodeRecord) -> bool {
    let name = n.name.as_deref().unwrap_or_default();
    matches!(
        name,
        "main" | "init" | "new" | "default" | "setup" | "teardown"
    ) || (name.starts_with("__") && name.ends_with("__"))
        || name.starts_with("test")
        || name.starts_with("Test")
        || name.starts_with("Benchmark")
}

fn is_public(n: &NodeRecord) -> bool {
    let name = n.name.as_deref().unwrap_or_default();
    if n.file_path.ends_with(".go") {
        return name.starts_with(|c: char| c.is_uppercase());
    }
    !name.starts_with('_')
}
