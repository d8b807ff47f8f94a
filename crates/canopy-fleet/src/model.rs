//! The shared state's types as the service sees them: repositories (their
//! source, watch flag and owner-written indexing state), events, and the
//! views of `GET /fleet`. Plain data with serde; no database code.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Where a repository's files come from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RepoSource {
    /// A git URL and a ref: the owner clones or fetches it into its data
    /// directory.
    Git {
        /// What `git fetch` takes (https, ssh, git, file or a local path).
        url: String,
        /// Branch, tag or commit (`HEAD` when not given).
        #[serde(rename = "ref")]
        git_ref: String,
    },
    /// A path that exists on every node (a shared file system).
    Path {
        /// Absolute path.
        path: String,
    },
}

impl RepoSource {
    /// The unique key of a source: the same URL and ref, or the same path,
    /// is the same repository.
    pub fn key(&self) -> String {
        match self {
            RepoSource::Git { url, git_ref } => format!("git:{url}#{git_ref}"),
            RepoSource::Path { path } => format!("path:{path}"),
        }
    }
}

/// The part of a repository only its owner writes, under its lease
/// ([`crate::Fleet::publish`]); mirrors the single-node registry's record.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RepoState {
    /// Last complete generation (0: none yet).
    pub generation: u64,
    /// Commit the serving generation was indexed at.
    pub commit_sha: Option<String>,
    /// `not_indexed`, `indexing`, `ready` or `failed`.
    pub status: String,
    /// A run started and has not completed since.
    pub dirty: bool,
    /// Failed runs since the last success.
    pub consecutive_failures: u32,
    /// When the last run started (unix seconds).
    pub last_started_at: Option<i64>,
    /// When the last successful run finished (unix seconds).
    pub last_indexed_at: Option<i64>,
    /// The last successful run's report (the core's `IndexReport` as JSON).
    pub last_report: Option<Value>,
    /// The last failure (`{code, message}`).
    pub last_error: Option<Value>,
}

/// One registered repository.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RepoRow {
    /// Opaque id (UUID).
    pub repo_id: String,
    /// Unique name.
    pub name: String,
    /// Where the files come from.
    pub source: RepoSource,
    /// Re-index on file-system events (or, for git sources, on fetches).
    pub watch: bool,
    /// Registration time (unix seconds).
    pub added_at: i64,
    /// Indexing state, written by the owner.
    pub state: RepoState,
    /// Node that published the current state, and under which epoch.
    pub published_by: Option<(String, u64)>,
    /// The highest generation an owner gave to a state of the index that
    /// no publish named (an answer read it in the middle of a run; see
    /// [`crate::Fleet::note_named`]). A new owner publishes above it.
    pub named_up_to: u64,
}

/// A repository to register.
#[derive(Clone, Debug, PartialEq)]
pub struct NewRepo {
    /// The wanted name.
    pub name: String,
    /// Whether the name was given by the caller (taken: an error) or
    /// derived (taken: `name-2`, `name-3`, … is tried).
    pub name_is_explicit: bool,
    /// Where the files come from.
    pub source: RepoSource,
    /// Watch flag.
    pub watch: bool,
}

/// An event to append to the feed.
#[derive(Clone, Debug, PartialEq)]
pub struct NewEvent {
    /// Kind (`generation_bumped`, `reindex_started`, `repo_added`, …).
    pub kind: String,
    /// The repository concerned (ignored by [`crate::Fleet::publish`],
    /// which always names the lease's repository).
    pub repo_id: Option<String>,
    /// Kind-specific details.
    pub data: Value,
}

impl NewEvent {
    /// An event about `repo_id`.
    pub fn repo(kind: &str, repo_id: &str, data: Value) -> NewEvent {
        NewEvent {
            kind: kind.to_string(),
            repo_id: Some(repo_id.to_string()),
            data,
        }
    }
}

/// One event of the feed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EventRow {
    /// Global sequence number: strictly increasing, gap-free in commit order.
    pub seq: u64,
    /// Unix milliseconds (database clock).
    pub ts_ms: i64,
    /// Kind.
    pub kind: String,
    /// The repository concerned, if any.
    pub repo_id: Option<String>,
    /// The node that wrote it.
    pub node_id: Option<String>,
    /// The lease epoch it was written under (owner writes only).
    pub epoch: Option<u64>,
    /// Details.
    pub data: Value,
}

/// One page of the feed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EventPage {
    /// Events after the cursor, oldest first.
    pub items: Vec<EventRow>,
    /// Newest sequence number when the page was read (same snapshot).
    pub latest_seq: u64,
}

/// A node in `GET /fleet`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NodeView {
    /// Node id.
    pub node_id: String,
    /// Where it takes forwarded requests.
    pub advertise_url: String,
    /// `active`, `leaving` or `left`.
    pub state: String,
    /// Canopy version.
    pub version: String,
    /// Heartbeat younger than the lease TTL and `active`.
    pub live: bool,
    /// Milliseconds since its last heartbeat.
    pub heartbeat_age_ms: i64,
    /// Milliseconds since this incarnation joined.
    pub joined_ms: i64,
    /// Unexpired leases it holds.
    pub owned: u64,
}

/// A repository's placement in `GET /fleet`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlacementView {
    /// Repository id.
    pub repo_id: String,
    /// Name.
    pub name: String,
    /// Holder of the unexpired lease, if any.
    pub owner: Option<String>,
    /// Lease epoch.
    pub epoch: u64,
    /// Milliseconds the lease has left (negative: expired that long ago;
    /// absent: never held).
    pub lease_remaining_ms: Option<i64>,
    /// Where rendezvous placement wants it (over live nodes).
    pub preferred: Option<String>,
    /// Published generation.
    pub generation: u64,
    /// Indexing status.
    pub status: String,
}

/// `GET /fleet`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FleetView {
    /// The node that answered.
    pub node_id: String,
    /// Schema version of the fleet database.
    pub schema_version: i32,
    /// The database's fleet id (made once by the migrations).
    pub fleet_id: String,
    /// Newest event sequence number.
    pub latest_seq: u64,
    /// Every node that has not been forgotten.
    pub nodes: Vec<NodeView>,
    /// Every repository with its lease.
    pub repos: Vec<PlacementView>,
}
