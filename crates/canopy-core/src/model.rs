//! The public response types: what front ends serialize.
//!
//! Field names follow the agent contract (seed `004_…`) exactly.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::handle::HandleId;

pub use canopy_syntax::handle::{Handle, Span};

/// How fresh an answer is: which index state it came from and whether the
/// files it touches changed on disk since.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Freshness {
    /// The index's generation: bumped by every index run that changed it.
    pub generation: u64,
    /// When the last index run finished (RFC 3339, UTC).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub indexed_at: Option<String>,
    /// Files this answer touches that changed (or vanished) on disk since
    /// they were indexed; their handles say `stale: true`.
    pub stale_files: usize,
    /// Up to 20 of those files.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub stale_paths: Vec<String>,
    /// Files checked against the disk: only the ones the answer touches,
    /// never the whole tree (so a change elsewhere is not counted here).
    pub checked_files: usize,
}

/// A reference at call-site granularity.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RefHandle {
    /// Repo-relative path.
    pub file_path: String,
    /// Span of the reference itself (qualifier included).
    pub span: Span,
    /// Line of the reference, twice (`[line, line]`).
    pub line_range: [u32; 2],
    /// The referenced name.
    pub name: String,
    /// Receiver or module path, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub qualifier: Option<String>,
    /// `call`, `import` or `type_ref`.
    pub ref_type: String,
    /// Handle of the innermost unit containing the reference.
    pub source_handle: HandleId,
    /// The line of the reference, whitespace-collapsed.
    pub preview: String,
}

/// The answer to a query.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct QueryResult {
    /// Ranked handles.
    pub handles: Vec<Handle>,
    /// References, for `kind = "reference"`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ref_handles: Option<Vec<RefHandle>>,
    /// Sum of the returned handles' token counts.
    pub total_tokens: u64,
    /// Matches before the limit was applied.
    pub total_matches: usize,
    /// Whether the limit cut the results.
    pub truncated: bool,
    /// Some search behind this answer stopped at its candidate cap (2,000
    /// per search): `total_matches` is then a lower bound. Narrow the query
    /// (a glob, a symbol, rarer words) to get an exact answer. Text searches
    /// (`pattern`, `patterns`, under a glob or not) are always exact.
    #[serde(skip_serializing_if = "std::ops::Not::not", default)]
    pub candidates_capped: bool,
    /// Whether every returned handle carries its content.
    #[serde(skip_serializing_if = "std::ops::Not::not", default)]
    pub auto_expanded: bool,
    /// Set when the expand budget could not cover the results.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expand_note: Option<String>,
    /// Set when no unit held the searched words whole and the answer
    /// matched them as prefixes (`batch_probe` finding `batch_probe_1_fn`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub match_note: Option<String>,
    /// Ids of the handles that carry `content`.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub expanded_handle_ids: Vec<HandleId>,
    /// Share of the repository's candidate files indexed when the query ran (absent when complete).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub index_coverage: Option<f64>,
    /// Id of the server-side result set, when asked for (`result_set: true`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result_set: Option<String>,
    /// Index generation, time, and the answer's files changed on disk.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub freshness: Option<Freshness>,
}

/// One expanded handle.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Expansion {
    /// The handle's id.
    pub handle_id: HandleId,
    /// Repo-relative path.
    pub file_path: String,
    /// 1-based inclusive line range.
    pub line_range: [u32; 2],
    /// BPE tokens of the span.
    pub token_count: u32,
    /// The span's text (lossy UTF-8 where the file is not valid UTF-8).
    pub content: String,
    /// Index generation the handle was resolved at (the text itself was
    /// just read and checked against the indexed hash: expansion never
    /// returns text of a file changed since indexing).
    #[serde(default)]
    pub generation: u64,
    /// When the last index run finished (RFC 3339, UTC).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub indexed_at: Option<String>,
    /// The exact bytes of the span.
    #[serde(skip)]
    pub bytes: Vec<u8>,
}

/// Index statistics (`canopy status`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Status {
    /// Whether an index exists. `false` only from [`crate::Engine::peek_status`]
    /// on a repository nobody has indexed yet (every count is then 0).
    #[serde(default = "always_true")]
    pub indexed: bool,
    /// Files in the index.
    pub files_indexed: u64,
    /// Sum of the indexed files' token counts.
    pub total_tokens: u64,
    /// Size of the database (with its WAL) in bytes.
    pub index_size_bytes: u64,
    /// When the last complete index run finished (RFC 3339, UTC), if ever.
    pub last_indexed: Option<String>,
    /// Schema version of the index.
    pub schema_version: u32,
    /// Absolute repository root.
    pub repo_root: String,
    /// How files were discovered on the last run (`git_ls_files` or `walk`).
    pub file_discovery: Option<String>,
    /// Indexed files per language.
    pub languages: BTreeMap<String, u64>,
    /// Files skipped on the last run, by reason.
    pub skipped: BTreeMap<String, u64>,
    /// Units (handles) in the index.
    pub units: u64,
    /// References in the index.
    pub references: u64,
    /// Bytes of source indexed.
    pub source_bytes: u64,
    /// Share of candidate files indexed (1.0 when the last run completed).
    pub index_coverage: f64,
    /// What is wrong with the index file, when an operation found it
    /// damaged; the next index run rebuilds it.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub damaged: Option<String>,
}

/// What an index run did.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct IndexReport {
    /// Files discovered (after the glob filter, before skips).
    pub files_discovered: u64,
    /// Files parsed and written.
    pub files_indexed: u64,
    /// Files whose content was unchanged.
    pub files_unchanged: u64,
    /// Files removed from the index (deleted, no longer listed, now skipped).
    pub files_removed: u64,
    /// Files skipped, by reason.
    pub skipped: BTreeMap<String, u64>,
    /// Bytes parsed.
    pub bytes_parsed: u64,
    /// Units written.
    pub units_written: u64,
    /// References written.
    pub refs_written: u64,
    /// `git_ls_files` or `walk`.
    pub file_discovery: String,
    /// Wall time in milliseconds.
    pub duration_ms: u64,
    /// Set when the index was rebuilt (schema change or damage), saying why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rebuilt: Option<String>,
    /// Files whose references the code graph resolved in this run (0 when nothing changed).
    #[serde(default)]
    pub graph_files_resolved: u64,
    /// Milliseconds spent resolving (included in `duration_ms`).
    #[serde(default)]
    pub graph_resolve_ms: u64,
    /// Repo-relative paths whose indexed content this run changed (parsed
    /// anew or removed), at most [`IndexReport::MAX_CHANGED_PATHS`]; what a
    /// watcher or an event feed tells its followers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changed_paths: Vec<String>,
    /// Changed paths left out of `changed_paths` past its bound.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub changed_paths_omitted: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl IndexReport {
    /// Most paths [`IndexReport::changed_paths`] lists.
    pub const MAX_CHANGED_PATHS: usize = 200;

    /// Records a path whose indexed content changed (bounded).
    pub fn note_changed(&mut self, path: &str) {
        if self.changed_paths.len() < Self::MAX_CHANGED_PATHS {
            self.changed_paths.push(path.to_string());
        } else {
            self.changed_paths_omitted += 1;
        }
    }
}

fn always_true() -> bool {
    true
}

/// Formats unix seconds as RFC 3339 UTC (`2026-11-21T10:00:00Z`); lives
/// in the store, which writes index times in this form.
pub use canopy_store::store::rfc3339_utc;
