//! # canopy-core
//!
//! The engine behind Canopy: it discovers a repository's files, parses them
//! with tree-sitter into *units* (functions, classes, sections, chunks, …)
//! and *references*, stores them in one SQLite database with an FTS5 index
//! (`<repo>/.canopy/index.db`), and answers queries with *handles*: small
//! pointers (id, path, lines, token count, preview) that an agent expands
//! only when it needs the text.
//!
//! How the parts fit: [`discover`] lists files → [`lang`] (the
//! `canopy-syntax` crate, re-exported) parses each into a
//! [`lang::ParsedFile`] (in parallel) → [`index`] feeds them to the single
//! writer in [`store`] → [`query`] reads through the store → [`Engine`] is the
//! one API the front ends (CLI, MCP server, HTTP service) call. This crate
//! knows nothing of JSON-RPC or HTTP.
//!
//! ## Use as a library
//!
//! Open a repository, index it, ask for handles, expand the one you need,
//! and walk the call graph — the same calls `canopy` makes:
//!
//! ```
//! use canopy_core::index::NoProgress;
//! use canopy_core::query::QueryParams;
//! use canopy_core::{Engine, EngineOptions};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let repo = tempfile::tempdir()?;
//! std::fs::write(
//!     repo.path().join("auth.py"),
//!     "def check(token):\n    return len(token) > 8\n\n\ndef login(token):\n    return check(token)\n",
//! )?;
//! // A folder named explicitly may be a root even outside git.
//! let options = EngineOptions {
//!     root_rule: canopy_core::discover::RootRule::Named,
//!     ..EngineOptions::default()
//! };
//! let engine = Engine::open(repo.path(), options)?;
//! let report = engine.index(None, &NoProgress)?;
//! assert_eq!(report.files_indexed, 1);
//!
//! // Handles: id, path, lines, token count and a preview; never whole files.
//! let found = engine.query(&QueryParams {
//!     symbol: Some("check".into()),
//!     ..QueryParams::default()
//! })?;
//! let handle = &found.handles[0];
//! assert_eq!((handle.file_path.as_str(), handle.line_range), ("auth.py", [1, 2]));
//!
//! // The exact text, verified against the file.
//! let text = engine.expand(&[handle.id.as_str()])?;
//! assert!(text[0].content.starts_with("def check(token):"));
//!
//! // The code graph: who calls `check`?
//! let callers = engine.graph(|g| g.callers("check", 1, 50))?;
//! assert_eq!(callers.nodes[0].qualified_name.as_deref(), Some("login"));
//! # Ok(())
//! # }
//! ```

#![warn(missing_docs)]

pub mod context;
pub mod discover;
pub(crate) mod dsl;
pub mod embed;
pub mod encoder;
pub mod engine;
pub mod index;
mod knobs;
pub mod lazy;
pub mod model;
pub(crate) mod oversize;
pub mod pack;
mod pack_calibration;
pub mod query;
mod rerank;
pub mod resultset;
pub(crate) mod semantic;
pub(crate) mod session;
pub(crate) mod snapshot;
mod temp_files;
pub mod timing;
pub mod watch;

// The syntax layer lives in its own crate; its modules keep their paths here
// (`canopy_core::lang`, `crate::tokens`, …).
pub use canopy_syntax::{handle, lang, text, tokens};
// Likewise the database, its error type and cancellation (`canopy-store`).
pub use canopy_store::{cancel, error, store};
// And the code graph (`canopy-graph`): `canopy_core::graph`, `crate::graph`.
pub use canopy_graph as graph;
pub use canopy_syntax::path_class;

pub use engine::{Engine, EngineOptions, SemanticStats};
// From the semantic index, only what an answer or an option names
// (`SemanticStats`, `EngineOptions::ann_min_units`) and the vector search
// itself, which `examples/ann_bench.rs` measures.
pub use error::{CanopyError, Result};
pub use handle::HandleId;
pub use lang::{Language, NodeType, RefType};
pub use semantic::{ANN_MIN_UNITS, AnnStats, SyncReport, UnitVectors};

#[cfg(test)]
mod graph_tests;

/// Architecture invariant: `Engine` sits on top. The modules below it
/// read through a [`snapshot::Snapshot`] (or a `Store` and a root) that the
/// engine hands them, and never name the engine, so they cannot reach back
/// into it (re-enter its locks, index, keep state). (The graph is below
/// it by Cargo: `canopy-graph` does not depend on this crate.)
#[cfg(test)]
mod layering {
    #[test]
    fn modules_below_the_engine_never_name_it() {
        // Every file of `src/` but the engine, the one module above it
        // (`watch`), the crate root and the test-only `graph_tests/`: a new
        // module is checked too.
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let sources = canopy_syntax::testing::sources_under(&dir);
        let above = ["engine.rs", "watch.rs", "lib.rs"];
        let below: Vec<(&str, &str)> = sources
            .iter()
            .filter(|(name, _)| {
                !above.contains(&name.as_str()) && !name.starts_with("graph_tests/")
            })
            .map(|(name, text)| (name.as_str(), text.as_str()))
            .collect();
        assert!(
            below.len() >= 20,
            "found only {} files below the engine",
            below.len()
        );
        crate::testing::assert_never_named(
            &below,
            &["crate::engine", "Engine"],
            "names the engine",
        );
    }
}

/// Helpers shared by unit tests.
#[cfg(test)]
pub(crate) mod testing {
    pub(crate) use canopy_syntax::testing::assert_never_named;

    /// A one-line unit of one token at row `rowid` (the rest empty), for
    /// tests that read only its identity, path and kind.
    pub(crate) fn unit_record(
        rowid: i64,
        handle: String,
        file_path: &str,
        node_type: &str,
    ) -> crate::store::read::NodeRecord {
        crate::store::read::NodeRecord {
            rowid,
            handle,
            file_path: file_path.into(),
            node_type: node_type.into(),
            end_byte: 1,
            start_line: 1,
            end_line: 1,
            token_count: 1,
            ..Default::default()
        }
    }
}
