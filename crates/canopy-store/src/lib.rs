//! # canopy-store
//!
//! Canopy's index database (`<repo>/.canopy/index.db`): the SQLite schema
//! and its versioning, the packed per-file formats of references and edges,
//! the writes an index run makes, the reads every answer makes, the rows a
//! graph resolution pass reads and writes, and rebuilding beside the live
//! index ([`store`]); with them the one error type every layer above
//! reports ([`error::CanopyError`]) and the cancellation a caller raises
//! ([`cancel`]).
//!
//! It stores what `canopy-syntax` extracts and knows nothing of what is
//! built from it: `canopy-core` (the graph, queries, packs, the engine)
//! calls it and re-exports these modules under the same names
//! (`canopy_core::store`, `canopy_core::error`, `canopy_core::cancel`). The
//! store therefore cannot name the graph or the engine: Cargo refuses it.

#![warn(missing_docs)]

pub mod cancel;
pub mod error;
pub mod store;

pub use error::{CanopyError, Result};

// The store's files name the syntax layer by the paths they had inside
// canopy-core (`crate::lang`, `crate::text`, …).
pub(crate) use canopy_syntax::{handle, lang, text};

/// Helpers of this crate's unit tests.
#[cfg(test)]
pub(crate) mod testing {
    pub(crate) use canopy_syntax::testing::xorshift;
}
