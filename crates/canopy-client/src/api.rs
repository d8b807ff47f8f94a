//! The wire types of the HTTP API: request bodies, the typed responses,
//! the error body and the event feed's records. The server (`canopy-service`)
//! answers with them, the blocking client ([`crate::client`]) reads them,
//! and the service's `openapi.json` describes them.
//!
//! `/query`, `/evidence_pack`, `/context` and `/graph` answer with the
//! core's answers, served ([`crate::served::Served`]), so they have no
//! response type here.

use canopy_core::model::IndexReport;
use canopy_core::model::Status;
use canopy_core::pack::PackParams;
use canopy_core::query::QueryParams;
use serde::{Deserialize, Serialize};

use serde_json::Value;

/// Header naming the caller's convergence session (alternative to the `session` body field).
pub const SESSION_HEADER: &str = "x-canopy-session";

/// `POST /repos/add` body.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AddRepoRequest {
    /// Absolute path of the repository root (must contain `.git`).
    pub path: String,
    /// Unique name (default: the directory name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Re-index the repository on file-system events (`true`), or stop
    /// doing so (`false`); kept across restarts. Absent: unchanged (off
    /// for a new repository).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watch: Option<bool>,
}

/// `POST /repos/add` response.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct AddRepoResponse {
    /// Id to pass as `repo` in every other call.
    pub repo_id: String,
    /// The repository's name (also accepted as `repo`).
    pub name: String,
    /// Canonical root.
    pub repo_root: String,
    /// `false` when the path was already registered (the existing id is returned).
    pub created: bool,
}

/// `POST /reindex` body.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReindexRequest {
    /// Repo id or name.
    pub repo: String,
    /// Only re-index files matching this glob (ignored, i.e. everything is
    /// indexed, while the repository has no complete generation or its last
    /// run did not finish).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub glob: Option<String>,
    /// Throw the index away and build it again (the repair for an index
    /// reported damaged; `glob` is then ignored).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub rebuild: bool,
}

/// `POST /reindex` response.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ReindexResponse {
    /// Repo id.
    pub repo_id: String,
    /// The last complete generation (0 before the first run completes). It
    /// bumps when this run finishes *and* changed the index, to one above
    /// every generation answers read from the run's own states carried.
    pub generation: u64,
    /// `indexing` (a run started) or `already_indexing` (coalesced into the
    /// running one; a single follow-up run is queued so later edits are seen).
    pub status: String,
    /// `HEAD` of the repository being indexed (null without commits).
    pub commit_sha: Option<String>,
    /// Whether a follow-up run is queued behind the running one.
    pub rerun_queued: bool,
}

/// `POST /query` body: the repo plus every `canopy_query` parameter.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct QueryRequest {
    /// Repo id or name.
    pub repo: String,
    /// Query parameters (pattern, patterns, symbol, section, parent, kind, glob, match, limit, expand_budget, query).
    #[serde(flatten)]
    pub params: QueryParams,
}

/// `POST /graph` body: the repo, a graph navigation request, and optionally
/// the generation the caller's target came from (409 when it is no longer
/// current, 400 when it is newer than any the service has served).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct GraphHttpRequest {
    /// Repo id or name.
    pub repo: String,
    /// Generation of the handle or position the target was taken from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<u64>,
    /// op, target, to, depth, max_results.
    #[serde(flatten)]
    pub request: canopy_core::graph::request::GraphRequest,
}

/// `POST /context` body: the repo and the context-pack parameters; a
/// `generation` (of the handle or position the focus came from) gets the
/// same 409 semantics as `/graph`.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContextRequest {
    /// Repo id or name.
    pub repo: String,
    /// Generation the focus was taken from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<u64>,
    /// What the agent is about to do.
    #[serde(default)]
    pub task: String,
    /// Code to centre on (the graph's target rule).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub focus: Option<String>,
    /// Most tokens the fragments may add up to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_tokens: Option<u64>,
    /// Which strategy chooses candidates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<canopy_core::context::Strategy>,
}

/// `POST /evidence_pack` body: the repo, an optional session and the pack parameters.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct PackRequest {
    /// Repo id or name.
    pub repo: String,
    /// Convergence session (else the `X-Canopy-Session` header; none: no memory).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// Query parameters plus max_handles, max_per_file, plan.
    #[serde(flatten)]
    pub params: PackParams,
}

/// One handle to expand: a bare id or `{id, generation}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum HandleRef {
    /// `"h…"`: no staleness check.
    Id(String),
    /// `{"id": "h…", "generation": 3}`: 409 if 3 is not the current generation.
    Tagged {
        /// Handle id.
        id: String,
        /// Generation the handle was issued at.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        generation: Option<u64>,
    },
}

impl HandleRef {
    /// The handle id.
    pub fn id(&self) -> &str {
        match self {
            HandleRef::Id(id) | HandleRef::Tagged { id, .. } => id,
        }
    }

    /// The generation it was issued at, if given.
    pub fn generation(&self) -> Option<u64> {
        match self {
            HandleRef::Id(_) => None,
            HandleRef::Tagged { generation, .. } => *generation,
        }
    }
}

/// `POST /expand` body.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpandRequest {
    /// Repo id or name.
    pub repo: String,
    /// Handles to expand (at most `--max-expand-handles`).
    pub handles: Vec<HandleRef>,
    /// Convergence session (else the `X-Canopy-Session` header).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
}

/// One expanded handle.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExpandedContent {
    /// Handle id.
    pub handle_id: String,
    /// Repo-relative path.
    pub file_path: String,
    /// 1-based inclusive lines.
    pub line_range: [u32; 2],
    /// BPE tokens of `content`.
    pub token_count: u64,
    /// The exact text.
    pub content: String,
}

/// `POST /expand` response.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ExpandResponse {
    /// Repo id.
    pub repo_id: String,
    /// Generation the content was served at.
    pub generation: u64,
    /// Commit of that generation.
    pub commit_sha: Option<String>,
    /// Expanded handles, in request order, without duplicates.
    pub contents: Vec<ExpandedContent>,
    /// Sum of the contents' tokens.
    pub total_tokens: u64,
}

/// Progress of a running index pass.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunProgressView {
    /// Files to read and parse in this pass (known after discovery).
    pub files_total: u64,
    /// Files processed so far.
    pub files_done: u64,
    /// Seconds since the pass started.
    pub elapsed_seconds: f64,
}

/// A registered repository (`GET /repos`, `GET /status`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RepoView {
    /// Id.
    pub repo_id: String,
    /// Name.
    pub name: String,
    /// Canonical root.
    pub repo_root: String,
    /// `not_indexed`, `indexing`, `ready` or `failed`.
    pub status: String,
    /// Whether queries can be answered (a complete generation exists).
    pub ready: bool,
    /// Whether a run is in progress.
    pub indexing: bool,
    /// Last complete generation (0: none).
    pub generation: u64,
    /// Commit of that generation.
    pub commit_sha: Option<String>,
    /// Registration time (RFC 3339).
    pub added_at: String,
    /// When the last successful run finished.
    pub last_indexed_at: Option<String>,
    /// The last successful run's report.
    pub last_index: Option<IndexReport>,
    /// Why the last run failed (cleared on success).
    pub last_error: Option<RunError>,
    /// Failed runs since the last success.
    pub consecutive_failures: u32,
    /// Whether a follow-up run is queued.
    pub rerun_queued: bool,
    /// Re-indexed on file-system events.
    pub watch: bool,
    /// Seconds since the oldest change a watcher saw that no finished run
    /// has indexed yet (0 when none is known).
    pub index_lag_seconds: f64,
    /// Progress of the running pass.
    pub progress: Option<RunProgressView>,
}

/// A repository in `GET /status`: its state plus the core's index statistics.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RepoStatusView {
    /// Registration and indexing state.
    #[serde(flatten)]
    pub repo: RepoView,
    /// Index statistics (null when the index cannot be read).
    pub index: Option<Status>,
    /// The generation an answer read now carries, when the index's present
    /// state already has one: `generation` (the last complete one) while
    /// the index is in the state that run left, or the generation an
    /// earlier answer gave a running pass's committed batches (issue 32: a
    /// generation names exactly what a reader sees). Absent before the
    /// repository can be queried, and for a state no answer has read yet:
    /// the next answer names it, above every generation given so far.
    /// Reading it never gives a generation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serving_generation: Option<u64>,
}

/// `GET /status` response.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StatusResponse {
    /// Always `canopy-service`.
    pub service: String,
    /// Crate version.
    pub version: String,
    /// Seconds since start.
    pub uptime_seconds: u64,
    /// Registered repositories.
    pub repos: Vec<RepoStatusView>,
}

/// `GET /events` response.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct EventsResponse {
    /// Events after the cursor, oldest first.
    pub items: Vec<EventRecord>,
    /// Pass as `after_seq` next time.
    pub next_after_seq: u64,
    /// Highest sequence number in the feed.
    pub latest_seq: u64,
}

/// Health of one repository.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RepoHealth {
    /// Id.
    pub repo_id: String,
    /// Name.
    pub name: String,
    /// `healthy`, `degraded`, `recovering` or `unhealthy`.
    pub status: String,
    /// Why it is not healthy.
    pub reasons: Vec<String>,
}

/// `GET /health` response.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct HealthResponse {
    /// `healthy`, `degraded`, `recovering` or `unhealthy` (the worst of the checks).
    pub status: String,
    /// Why it is not healthy (empty when healthy; omitted details without credentials).
    #[serde(default)]
    pub reasons: Vec<String>,
    /// Seconds since start.
    #[serde(default)]
    pub uptime_seconds: u64,
    /// Per-repository health (only for authorized callers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repos: Option<Vec<RepoHealth>>,
}

/// The JSON body of every error response.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// Stable machine-readable code (`not_found`, `stale_generation`, …).
    pub code: String,
    /// What went wrong, for people and models.
    pub message: String,
    /// What to do next.
    pub hint: String,
}

/// Why the last run failed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunError {
    /// The core's error code (`Git`, `Io`, `Database`, …) or `panic`.
    pub code: String,
    /// The error message.
    pub message: String,
}

/// One entry of the event feed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EventRecord {
    /// Sequence number (strictly increasing).
    pub seq: u64,
    /// RFC 3339 UTC time.
    pub ts: String,
    /// Unix milliseconds.
    pub ts_ms: i64,
    /// `repo_added`, `reindex_started`, `reindex_finished`, `reindex_failed`,
    /// `reindex_interrupted`, `generation_bumped` or `service_started`.
    pub kind: String,
    /// The repository concerned, if any.
    pub repo_id: Option<String>,
    /// Kind-specific details.
    pub data: Value,
}
