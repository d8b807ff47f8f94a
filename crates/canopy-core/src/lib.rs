//! # canopy-core
//!
//! The engine behind Canopy: it discovers a repository's files, parses them
//! with tree-sitter into *units* (functions, classes, sections, chunks, …)
//! and *references*, stores them in one SQLite database with an FTS5 index
//! (`<repo>/.canopy/index.db`), and answers queries with *handles*: small
//! pointers (id, path, lines, token count, preview) that an agent expands
//! only when it needs the text.
//!
//! How the parts fit: [`discover`] lists files → [`lang`] parses each into a
//! [`lang::ParsedFile`] (in parallel) → [`index`] feeds them to the single
//! writer in [`store`] → [`query`] reads through the store → [`Engine`] is the
//! one API the front ends (CLI, MCP server, HTTP service) call. This crate
//! knows nothing of JSON-RPC or HTTP.

pub mod cancel;
pub mod discover;
pub mod dsl;
pub mod engine;
pub mod error;
pub mod graph;
pub mod handle;
pub mod index;
pub mod lang;
pub mod lazy;
pub mod model;
pub mod pack;
pub mod query;
pub mod resultset;
pub mod session;
pub mod store;
pub mod text;
pub mod tokens;
pub mod watch;

pub use engine::{Engine, EngineOptions};
pub use error::{CanopyError, Result};
pub use handle::HandleId;
pub use lang::{Language, NodeType, RefType};

/// Helpers shared by unit tests.
#[cfg(test)]
pub(crate) mod testing {
    /// A fixed pseudo-random sequence (xorshift64), so failures reproduce.
    pub(crate) fn xorshift(seed: u64) -> impl FnMut() -> u64 {
        let mut state = seed;
        move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        }
    }
}
