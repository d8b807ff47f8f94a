//! Fleet mode (`canopy serve --fleet postgres://…`): this service as one
//! node of several sharing a PostgreSQL database through `canopy-fleet`
//! (design: `docs/fleet.md`).
//!
//! Nothing here runs without `--fleet`: [`FleetSettings::from_args`]
//! returns `None`, no [`FleetNode`] is made, the router gets no fleet
//! layer, and [`crate::service::Service`] commits to its SQLite registry as
//! before.
//!
//! * this file: the flags ([`FleetArgs`]), the node ([`FleetNode`]): joining,
//!   consuming lease changes, and publishing the runner's state under the
//!   repository's lease (the fence);
//! * `routing`: the HTTP layer: registry, events and `GET /fleet` from
//!   PostgreSQL, repository requests answered here or forwarded to the
//!   owner, the fleet sections of `/health` and `/metrics`.

mod routing;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use anyhow::{Context, bail};
use canopy_fleet::git::GitPolicy;
use canopy_fleet::{Fleet, FleetConfig, LeaseChange, LossReason, RepoState, Timing};
use serde_json::Value;

use crate::registry::{NewEvent, RepoRecord, RepoStatus};
use crate::service::Service;

pub use routing::{FLEET_ROUTES, FORWARDED_BY_HEADER, layer};

/// `canopy serve`'s fleet flags.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct FleetArgs {
    /// Join a fleet: the registry, generations, event feed and repository
    /// ownership live in this PostgreSQL database (`postgres://user:pass@host:port/db`),
    /// shared with the other nodes. Every node needs the same --token (or
    /// --no-auth on loopback). Without it, nothing of fleet mode runs.
    #[arg(
        long = "fleet",
        env = "CANOPY_FLEET_URL",
        hide_env_values = true,
        value_name = "URL"
    )]
    pub url: Option<String>,
    /// This node's id in the fleet [default: host name and port].
    #[arg(long = "fleet-node-id", requires = "url", value_name = "ID")]
    pub node_id: Option<String>,
    /// The URL other nodes forward requests to [default: http://<bound address>].
    #[arg(long = "fleet-advertise", requires = "url", value_name = "URL")]
    pub advertise: Option<String>,
    /// Lease time-to-live in milliseconds (heartbeat and the other timings
    /// scale with it) [default: 10000].
    #[arg(long = "fleet-lease-ttl-ms", requires = "url", value_name = "MS")]
    pub lease_ttl_ms: Option<u64>,
    /// Accept `git_url`s that are local paths or `file://` URLs (off: only
    /// network URLs, so callers cannot make a node read its own disk).
    #[arg(long = "fleet-allow-local-git", requires = "url")]
    pub allow_local_git: bool,
}

/// Validated fleet settings (the parts known before the socket is bound).
#[derive(Clone)]
pub struct FleetSettings {
    url: String,
    node_id: Option<String>,
    advertise: Option<String>,
    timing: Timing,
    git: GitPolicy,
}

impl std::fmt::Debug for FleetSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FleetSettings")
            .field("url", &canopy_fleet::config::redact_url(&self.url))
            .field("node_id", &self.node_id)
            .field("advertise", &self.advertise)
            .finish_non_exhaustive()
    }
}

impl FleetSettings {
    /// `None` without `--fleet`. Fleet nodes forward the caller's
    /// credentials to each other, so they need one shared `--token` (a
    /// generated per-node token would not be accepted by the others) or
    /// `--no-auth`.
    pub fn from_args(args: &FleetArgs, shared_auth: bool) -> anyhow::Result<Option<FleetSettings>> {
        let Some(url) = args.url.as_deref().map(str::trim).filter(|u| !u.is_empty()) else {
            return Ok(None);
        };
        if !shared_auth {
            bail!(
                "--fleet needs the same --token (or CANOPY_TOKEN) on every node, or --no-auth on loopback: \
                 a token generated per node would not be accepted by the nodes it forwards to"
            );
        }
        let timing = match args.lease_ttl_ms {
            None => Timing::default(),
            Some(ms) => Timing::scaled(Duration::from_millis(ms)),
        };
        timing.validate().context("--fleet-lease-ttl-ms")?;
        if let Some(id) = &args.node_id {
            canopy_fleet::config::validate_node_id(id)?;
        }
        Ok(Some(FleetSettings {
            url: url.to_string(),
            node_id: args.node_id.clone(),
            advertise: args.advertise.clone(),
            timing,
            git: GitPolicy {
                allow_local: args.allow_local_git,
                ..GitPolicy::default()
            },
        }))
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// `node`'s watch flags, locked ([`Service::fleet_sync_watch`]).
pub(crate) fn lock_watch(node: &FleetNode) -> MutexGuard<'_, HashMap<String, bool>> {
    lock(&node.watch)
}

/// This service as a fleet node.
pub struct FleetNode {
    fleet: Fleet,
    runtime: tokio::runtime::Handle,
    git: GitPolicy,
    data_dir: PathBuf,
    /// Repository → the generation stored in PostgreSQL as this node last
    /// knows it (the `expect_generation` of its next publish).
    published: Mutex<HashMap<String, u64>>,
    /// Repository → the lease epoch under which this node published a
    /// complete index: answers are served locally only then.
    ready: Mutex<HashMap<String, u64>>,
    /// Name → repository id (ids never change for a registered name).
    names: Mutex<HashMap<String, String>>,
    /// Repository → the lease epoch its current run started under: a run
    /// is published only under the lease it started with, so a run that
    /// outlived its lease (a paused node) is refused even after this node
    /// acquired the repository again.
    run_epoch: Mutex<HashMap<String, u64>>,
    /// Repository → the watch flag the registry holds as this node last
    /// learned it (with its lease, from a settings change it made, or at a
    /// heartbeat): what its entry's watcher follows
    /// ([`Service::fleet_sync_watch`]).
    watch: Mutex<HashMap<String, bool>>,
    /// Test-only: [`HOLD_DIR_ENV`]'s directory (see [`PublishHold`]).
    hold: Option<PublishHold>,
}

/// Test-only environment variable: a directory through which a test holds
/// this node just before it publishes a new generation, so it can pause
/// the node (SIGSTOP) at that point on purpose instead of hoping a run is
/// still going when the signal lands. Never set it in production.
pub const HOLD_DIR_ENV: &str = "CANOPY_TEST_FLEET_HOLD_DIR";

/// The test-only publish hold ([`HOLD_DIR_ENV`]). While the file
/// `hold-<node id>` exists in the directory, this node, about to publish
/// a new generation (a commit with a `generation_bumped` event), writes
/// `held-<node id>` (the repository id and the generation), waits until
/// `hold-<node id>` is removed, removes `held-<node id>` and goes on with
/// the publish, which checks the lease only then.
struct PublishHold {
    armed: PathBuf,
    held: PathBuf,
}

impl PublishHold {
    fn from_env(node_id: &str) -> Option<PublishHold> {
        let dir = PathBuf::from(std::env::var_os(HOLD_DIR_ENV)?);
        tracing::warn!(
            dir = %dir.display(),
            "{HOLD_DIR_ENV} is set: a test may hold this node before it publishes"
        );
        Some(PublishHold {
            armed: dir.join(format!("hold-{node_id}")),
            held: dir.join(format!("held-{node_id}")),
        })
    }

    /// Blocks while the hold is armed (called on a blocking thread).
    fn wait(&self, repo_id: &str, generation: u64) {
        if !self.armed.exists() {
            return;
        }
        if let Err(e) = std::fs::write(&self.held, format!("{repo_id} {generation}\n")) {
            tracing::warn!("{HOLD_DIR_ENV}: cannot write {}: {e}", self.held.display());
        }
        while self.armed.exists() {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = std::fs::remove_file(&self.held);
    }
}

impl FleetNode {
    /// Joins the fleet as the node serving at `bound`, attaches itself to
    /// `service` and starts consuming lease changes.
    pub async fn start(
        service: &Arc<Service>,
        settings: &FleetSettings,
        bound: std::net::SocketAddr,
    ) -> anyhow::Result<Arc<FleetNode>> {
        let node_id = settings
            .node_id
            .clone()
            .unwrap_or_else(|| canopy_fleet::config::default_node_id(bound.port()));
        let advertise = settings
            .advertise
            .clone()
            .unwrap_or_else(|| format!("http://{bound}"));
        let hold = PublishHold::from_env(&node_id);
        let mut config = FleetConfig::new(settings.url.clone(), node_id, advertise);
        config.timing = settings.timing.clone();
        let (fleet, changes) = Fleet::start(config)
            .await
            .context("cannot join the fleet")?;
        let node = Arc::new(FleetNode {
            fleet,
            runtime: tokio::runtime::Handle::current(),
            git: settings.git.clone(),
            data_dir: service.config().data_dir.clone(),
            published: Mutex::new(HashMap::new()),
            ready: Mutex::new(HashMap::new()),
            names: Mutex::new(HashMap::new()),
            run_epoch: Mutex::new(HashMap::new()),
            watch: Mutex::new(HashMap::new()),
            hold,
        });
        service.attach_fleet(node.clone());
        tokio::spawn(consume(Arc::downgrade(service), node.clone(), changes));
        eprintln!(
            "fleet node {} (advertised as {})",
            node.fleet.node_id(),
            node.fleet.config().advertise_url
        );
        Ok(node)
    }

    /// The fleet handle.
    pub fn fleet(&self) -> &Fleet {
        &self.fleet
    }

    /// Runs a fleet call to completion from a blocking thread (the
    /// service's handlers run on the blocking pool).
    pub(crate) fn block_on<F: std::future::Future>(&self, f: F) -> F::Output {
        self.runtime.block_on(f)
    }

    /// Records the watch flag the registry holds for `repo_id`.
    pub(crate) fn learn_watch(&self, repo_id: &str, watch: bool) {
        lock(&self.watch).insert(repo_id.to_string(), watch);
    }

    /// What `git_url` sources this node accepts.
    pub fn git_policy(&self) -> &GitPolicy {
        &self.git
    }

    /// Where this node keeps the working copy of a git-sourced repository.
    pub fn checkout_dir(&self, repo_id: &str) -> PathBuf {
        canopy_fleet::git::checkout_dir(&self.data_dir, repo_id)
    }

    /// Whether this node published a complete index of `repo_id` under
    /// the lease epoch `epoch`.
    pub fn is_ready(&self, repo_id: &str, epoch: u64) -> bool {
        lock(&self.ready).get(repo_id) == Some(&epoch)
    }

    pub(crate) fn remember_name(&self, name: &str, repo_id: &str) {
        lock(&self.names).insert(name.to_string(), repo_id.to_string());
    }

    pub(crate) fn known_id(&self, id_or_name: &str) -> Option<String> {
        lock(&self.names).get(id_or_name).cloned()
    }

    pub(crate) fn forget(&self, repo_id: &str) {
        lock(&self.ready).remove(repo_id);
    }

    /// Records that work on `repo_id` now happens under its current lease
    /// (adoption's own failure report).
    pub(crate) fn note_run_epoch(&self, repo_id: &str) {
        if let Some(fence) = self.fleet.fence(repo_id) {
            lock(&self.run_epoch).insert(repo_id.to_string(), fence.epoch());
        }
    }

    /// The valid lease a run of `repo_id` starting now publishes under:
    /// the current fence, if it is the epoch the run was started under
    /// (`None`: the run's publish would be refused; it should not run).
    pub(crate) fn run_fence(&self, repo_id: &str) -> Option<canopy_fleet::Fence> {
        let epoch = lock(&self.run_epoch).get(repo_id).copied()?;
        self.fleet.fence(repo_id).filter(|f| f.epoch() == epoch)
    }

    /// Sets the generation the database holds for `repo_id` (on acquisition).
    pub(crate) fn set_published(&self, repo_id: &str, generation: u64) {
        lock(&self.published).insert(repo_id.to_string(), generation);
    }

    /// Raises `repo_id`'s shared `named_up_to` to `generation` (blocking;
    /// never called on an async worker): see `Fleet::note_named`.
    pub(crate) fn note_named(&self, repo_id: &str, generation: u64) -> anyhow::Result<()> {
        self.runtime
            .block_on(self.fleet.note_named(repo_id, generation))
            .with_context(|| format!("saving generation {generation} of {repo_id} as given"))?;
        Ok(())
    }

    /// Leaves the fleet: every lease released, the node marked `left`.
    pub async fn shutdown(&self) {
        if let Err(e) = self.fleet.shutdown().await {
            tracing::warn!("leaving the fleet: {e}");
        }
    }

    /// The service's commit in fleet mode (blocking; never called on an
    /// async worker): a repository's record and its events are published
    /// under the repository's lease, atomically, or refused; events of no
    /// repository are appended.
    pub(crate) fn commit(
        &self,
        repo: Option<&RepoRecord>,
        events: Vec<NewEvent>,
    ) -> anyhow::Result<()> {
        let events: Vec<canopy_fleet::NewEvent> = events
            .into_iter()
            .map(|e| canopy_fleet::NewEvent {
                kind: e.kind.to_string(),
                repo_id: e.repo_id,
                data: e.data,
            })
            .collect();
        let Some(record) = repo else {
            if !events.is_empty() {
                self.runtime.block_on(self.fleet.append_events(&events))?;
            }
            return Ok(());
        };
        if let Some(hold) = &self.hold
            && events.iter().any(|e| e.kind == "generation_bumped")
        {
            hold.wait(&record.repo_id, record.generation);
        }
        let Some(fence) = self.fleet.fence(&record.repo_id) else {
            bail!(
                "publish refused: this node does not hold the lease of {}",
                record.repo_id
            );
        };
        let finishes = events
            .iter()
            .any(|e| e.kind == "reindex_finished" || e.kind == "reindex_failed");
        let started_under = lock(&self.run_epoch).get(&record.repo_id).copied();
        if finishes && started_under != Some(fence.epoch()) {
            bail!(
                "publish refused: the run of {} started under lease epoch {:?}, the lease is now epoch {}",
                record.repo_id,
                started_under,
                fence.epoch()
            );
        }
        let expect = lock(&self.published)
            .get(&record.repo_id)
            .copied()
            .unwrap_or(0);
        let state = RepoState {
            generation: record.generation,
            commit_sha: record.commit_sha.clone(),
            status: record.status.as_str().to_string(),
            dirty: record.dirty,
            consecutive_failures: record.consecutive_failures,
            last_started_at: record.last_started_at,
            last_indexed_at: record.last_indexed_at,
            last_report: record
                .last_report
                .as_ref()
                .and_then(|r| serde_json::to_value(r).ok()),
            last_error: record
                .last_error
                .as_ref()
                .and_then(|r| serde_json::to_value(r).ok()),
        };
        self.runtime
            .block_on(self.fleet.publish(&fence, expect, &state, &events))
            .with_context(|| format!("publishing the state of {}", record.repo_id))?;
        lock(&self.published).insert(record.repo_id.clone(), record.generation);
        if record.status == RepoStatus::Indexing {
            lock(&self.run_epoch).insert(record.repo_id.clone(), fence.epoch());
        }
        if record.status == RepoStatus::Ready && !record.dirty && record.generation > 0 {
            lock(&self.ready).insert(record.repo_id.clone(), fence.epoch());
        }
        Ok(())
    }
}

/// The record a node starts from when it acquires `row`'s lease: the
/// published state, marked dirty so its first complete run publishes a
/// new generation (handles issued by the previous owner become stale).
pub(crate) fn adopted_record(row: &canopy_fleet::RepoRow, root: PathBuf) -> RepoRecord {
    let s = &row.state;
    let mut record =
        RepoRecord::registered(row.repo_id.clone(), row.name.clone(), root, row.added_at);
    record.generation = s.generation;
    record.commit_sha = s.commit_sha.clone();
    record.status = match s.status.as_str() {
        "ready" => RepoStatus::Ready,
        "failed" => RepoStatus::Failed,
        "indexing" => RepoStatus::Indexing,
        _ => RepoStatus::NotIndexed,
    };
    record.dirty = true;
    record.consecutive_failures = s.consecutive_failures;
    record.last_started_at = s.last_started_at;
    record.last_indexed_at = s.last_indexed_at;
    record.last_report = s
        .last_report
        .clone()
        .and_then(|v: Value| serde_json::from_value(v).ok());
    record.last_error = s
        .last_error
        .clone()
        .and_then(|v: Value| serde_json::from_value(v).ok());
    record.watch = row.watch;
    // Generations the previous owner gave to states of a run it did not
    // finish: this node's first complete run publishes above them.
    record.named_up_to = row.named_up_to;
    record
}

/// Consumes the keeper's lease changes for as long as the service lives.
async fn consume(
    service: std::sync::Weak<Service>,
    node: Arc<FleetNode>,
    mut changes: tokio::sync::mpsc::UnboundedReceiver<LeaseChange>,
) {
    while let Some(change) = changes.recv().await {
        let Some(svc) = service.upgrade() else { return };
        match change {
            LeaseChange::Acquired {
                repo,
                fence,
                previous_holder,
            } => {
                tracing::info!(
                    repo = %repo.repo_id,
                    epoch = fence.epoch(),
                    previous = previous_holder.as_deref().unwrap_or("-"),
                    "lease acquired"
                );
                node.forget(&repo.repo_id);
                node.remember_name(&repo.name, &repo.repo_id);
                node.set_published(&repo.repo_id, repo.state.generation);
                node.learn_watch(&repo.repo_id, repo.watch);
                let adopting = node.clone();
                // Not awaited: adoption may wait for a run of an earlier
                // lease to end, and other changes must not wait for it.
                tokio::task::spawn_blocking(move || {
                    if let Err(e) = svc.fleet_adopt(&adopting, *repo) {
                        tracing::warn!("cannot take the repository over: {e:#}");
                    }
                });
            }
            LeaseChange::Handover { repo_id, epoch } => {
                tracing::info!(repo = %repo_id, epoch, "handing over");
                node.forget(&repo_id);
                let node = node.clone();
                let drain = node.fleet.config().timing.drain_timeout;
                tokio::spawn(async move {
                    let deadline = tokio::time::Instant::now() + drain;
                    loop {
                        let svc2 = svc.clone();
                        let id = repo_id.clone();
                        let idle = tokio::task::spawn_blocking(move || svc2.fleet_stop(&id, false))
                            .await
                            .unwrap_or(true);
                        if idle || tokio::time::Instant::now() >= deadline {
                            break;
                        }
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                    if let Err(e) = node.fleet.release(&repo_id).await {
                        tracing::warn!(repo = %repo_id, "releasing the lease: {e}");
                    }
                });
            }
            LeaseChange::Settings { repo_id, watch } => {
                tracing::info!(repo = %repo_id, watch, "watch flag changed in the registry");
                node.learn_watch(&repo_id, watch);
                let node = node.clone();
                let _ = tokio::task::spawn_blocking(move || svc.fleet_sync_watch(&node, &repo_id))
                    .await;
            }
            LeaseChange::Lost {
                repo_id,
                epoch,
                reason,
            } => {
                tracing::info!(repo = %repo_id, epoch, reason = reason.as_str(), "lease lost");
                node.forget(&repo_id);
                let removed = reason == LossReason::Removed;
                let _ =
                    tokio::task::spawn_blocking(move || svc.fleet_stop(&repo_id, removed)).await;
            }
        }
    }
}
