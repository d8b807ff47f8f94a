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

    /// Checks that a packed-list decoder refuses damage with an error, not
    /// a panic: every truncation of `blob` (naming file #42 and saying to
    /// invalidate), a trailing byte, and a run of `0xff` bytes.
    pub(crate) fn assert_damage_is_refused<T: std::fmt::Debug>(
        blob: &[u8],
        decode: impl Fn(&[u8], i64) -> crate::Result<T>,
    ) {
        for cut in 0..blob.len() {
            let err = decode(&blob[..cut], 42).unwrap_err().to_string();
            assert!(err.contains("#42") && err.contains("invalidate"), "{err}");
        }
        let mut trailing = blob.to_vec();
        trailing.push(0);
        assert!(decode(&trailing, 1).is_err());
        assert!(decode(&[0xff; 12], 1).is_err());
    }
}
