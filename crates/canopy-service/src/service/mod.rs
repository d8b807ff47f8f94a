//! [`Service`]: the state behind the HTTP API, with blocking methods (the
//! HTTP layer calls them on tokio's blocking pool).
//!
//! It owns the registered repositories (one [`canopy_core::Engine`] each),
//! the reindex runner (one background thread per running repository),
//! generations, health classification and the per-repository metrics
//! gauges, one concern per file:
//!
//! * this file: the service itself — start-up (the data directory's lock,
//!   the registry, resuming interrupted runs), lookups, and the one path
//!   by which state and events are written together (`Service::commit`);
//! * `entry`: one registered repository's state ([`RepoEntry`]);
//! * `repos`: registration (`POST /repos/add`, `GET /repos`);
//! * `runner`: index runs and watchers (`POST /reindex`, generations);
//! * `answers`: the answers (`/query`, `/evidence_pack`, `/context`,
//!   `/graph`, `/expand`, `/status`, `/events`), each
//!   [`canopy_client::served::Served`] under the generation naming the state it read;
//! * `health`: `GET /health` and the gauges of `GET /metrics`.
//!
//! # Generations and consistency
//!
//! A repository's *generation* counts the completed index runs that changed
//! its index. A run bumps it when it parsed or removed at least one file,
//! rebuilt the index, was the first to complete, or when an earlier run left
//! the index in an unaccounted state (it failed, or the service died during
//! it: the persisted `dirty` flag). A no-op run keeps the generation, so
//! handles issued before it stay valid.
//!
//! A generation names exactly what a reader sees (issue 32, N2). Queries
//! are answered by the engine from the index's committed state, and while a
//! run is in progress the engine commits whole files per batch, so a query
//! can see some files already new and others still old (never a
//! half-written file). An answer read from the state the last complete run
//! left carries that run's generation `G`; an answer read from any other
//! state (a running pass's committed batches, a failed run's remains) carries
//! a generation of its own, given the first time an answer reads that state
//! (`G+1`, `G+2`, …; `entry::StateNames`), and the run's completion
//! publishes one above them all. So two answers with one generation read one
//! state, and a run nobody reads during still moves `G` to `G+1`. `/expand`
//! (and a graph or context request's `generation`) accepts the generation
//! naming the index's state now; while a run is going it also accepts `G`
//! and the run's own states, and the core checks each file's content hash
//! against the index, reporting `stale_index` (409) instead of returning text
//! that does not match what was indexed. Anything older is refused with 409
//! `stale_generation`, so a client never mixes handles across a change it
//! was not told about. A repo without a completed generation answers 503
//! `not_ready` at once (the engine, which would index on a first query, is
//! never asked).
//!
//! Changes made behind the service's back are accounted for where they can
//! be: the engine's background index completion (started by a query while a
//! run has the index marked incomplete) is joined by the run and counted in
//! its report. An index written by another process (e.g. `canopy index` on
//! the same repository) is answered under generations of its own, like a
//! run's states, and the next service run publishes one above them; `/expand`
//! still never returns text that differs from what was indexed. Which state
//! `G` names is kept in memory: after a restart it is learnt from the first
//! answer read with no run going and none left unfinished. The highest
//! generation given is saved in the registry before the answer carrying it
//! leaves (`RepoRecord::named_up_to`), so a service restarted in the middle
//! of a run gives every later state, and its resumed run's completion, a
//! number above all the stopped process gave, and that process's handles
//! are stale there. (Fleet mode does not save it yet: a node adopting a
//! repository starts from its published generation.)
//!
//! Lock order: the repository list → a repository's state → the registry.

mod answers;
mod entry;
mod fleet;
mod health;
mod repos;
mod runner;

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, RwLock};
use std::time::{Duration, Instant};

use anyhow::Context;
use serde_json::json;
use tokio::sync::watch;

use crate::config::Config;
use crate::error::ApiError;
use crate::metrics::Metrics;
use crate::registry::{NewEvent, Registry, RepoRecord, RepoStatus, now_ms};

pub use answers::{MAX_EXPAND_BUDGET, MAX_SESSION_LEN};
pub use entry::{RepoEntry, RunProgress};
pub(crate) use fleet::sanitize_repo_name;
pub use health::{BACKLOG_AFTER, INDEX_LAG_DEGRADED, UNHEALTHY_FAILURES};

/// How long start-up waits for another process to release the data directory.
pub const DATA_DIR_LOCK_WAIT: Duration = Duration::from_secs(5);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn now_secs() -> i64 {
    now_ms().div_euclid(1000)
}

/// `HEAD` of the repository at `root` (`None` without commits or without git).
pub fn head_sha(root: &Path) -> Option<String> {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(root)
        .args(["rev-parse", "--verify", "--quiet", "HEAD"])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let sha = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!sha.is_empty()).then_some(sha)
}

/// The service: registry, repositories, runner, metrics and the event signal.
pub struct Service {
    config: Config,
    registry: Registry,
    repos: RwLock<Vec<Arc<RepoEntry>>>,
    events: watch::Sender<u64>,
    shutdown: watch::Sender<bool>,
    metrics: Metrics,
    started: Instant,
    /// Fleet mode: the node, attached once after start ([`Service::attach_fleet`]).
    fleet: OnceLock<Arc<crate::fleet::FleetNode>>,
    /// Engines closed for being idle (`--engine-idle-secs`), for `/metrics`.
    engines_closed: AtomicU64,
    /// Held by the thread building a watched repository's resolver world
    /// ([`Service::warm_watched`]): one at a time, so a `--watch` service
    /// starting with many repositories does not build every world at once.
    warming: Arc<Mutex<()>>,
    _data_dir_lock: std::fs::File,
}

impl Service {
    /// Opens the registry in `config.data_dir` (taking an exclusive lock on
    /// it), loads the registered repositories and resumes runs that a
    /// previous process left unfinished.
    pub fn start(config: Config) -> anyhow::Result<Arc<Service>> {
        let lock_path = config.data_dir.join("service.lock");
        let lock_file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .with_context(|| format!("cannot open {}", lock_path.display()))?;
        // A predecessor that was just killed may hold the lock for a moment
        // longer (e.g. through a child process that has not yet exec'd).
        let deadline = Instant::now() + DATA_DIR_LOCK_WAIT;
        while lock_file.try_lock().is_err() {
            if Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
            anyhow::bail!(
                "another canopy serve is using the data directory {}; stop it or pass another --data-dir",
                config.data_dir.display()
            );
        }
        let registry = Registry::open(&config.data_dir)?;
        // In fleet mode the registry is PostgreSQL's: repositories come
        // from leases, never from the local registry.
        let records = if config.fleet.is_some() {
            Vec::new()
        } else {
            registry.repos()?
        };
        let latest = registry.latest_seq()?;
        let mut entries = Vec::new();
        let mut interrupted = Vec::new();
        for record in records {
            if !config.allow_roots.is_empty()
                && !config
                    .allow_roots
                    .iter()
                    .any(|a| record.root.starts_with(a))
            {
                tracing::warn!(
                    repo = %record.repo_id,
                    "not serving {} (outside every --allow-root)",
                    record.root.display()
                );
                continue;
            }
            if record.status == RepoStatus::Indexing {
                interrupted.push(record.repo_id.clone());
            }
            entries.push(Arc::new(RepoEntry::new(record, None)));
        }
        let service = Arc::new(Service {
            config,
            registry,
            repos: RwLock::new(entries),
            events: watch::channel(latest).0,
            shutdown: watch::channel(false).0,
            metrics: Metrics::default(),
            started: Instant::now(),
            fleet: OnceLock::new(),
            engines_closed: AtomicU64::new(0),
            warming: Arc::default(),
            _data_dir_lock: lock_file,
        });
        service.commit(
            None,
            vec![NewEvent {
                kind: "service_started",
                repo_id: None,
                data: json!({ "version": env!("CARGO_PKG_VERSION") }),
            }],
        )?;
        for entry in service.entries() {
            let watch = service.config.watch_all || lock(&entry.state).record.watch;
            if watch {
                service.start_watcher(&entry);
            }
        }
        for id in interrupted {
            let entry = service.lookup(&id).map_err(|e| anyhow::anyhow!("{e}"))?;
            let generation = lock(&entry.state).record.generation;
            service.commit(
                None,
                vec![NewEvent {
                    kind: "reindex_interrupted",
                    repo_id: Some(id.clone()),
                    data: json!({ "generation": generation, "resuming": true }),
                }],
            )?;
            if let Err(e) = service.start_reindex(&entry, None, true) {
                tracing::warn!(repo = %id, "cannot resume the interrupted reindex: {e}");
            }
        }
        Ok(service)
    }

    /// The validated configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The metrics registry.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// A receiver that changes whenever an event is appended (value: latest seq).
    pub fn subscribe_events(&self) -> watch::Receiver<u64> {
        self.events.subscribe()
    }

    /// A receiver that turns `true` when the service shuts down.
    pub fn subscribe_shutdown(&self) -> watch::Receiver<bool> {
        self.shutdown.subscribe()
    }

    /// Closes the engine of every repository idle for `idle`
    /// (`--engine-idle-secs`); how many were closed.
    pub fn close_idle_engines(&self, idle: Duration) -> usize {
        let mut closed = 0;
        for entry in self.entries() {
            if entry.close_if_idle(idle) {
                tracing::debug!(repo = %entry.id, "closed an idle engine");
                closed += 1;
            }
        }
        self.engines_closed
            .fetch_add(closed as u64, Ordering::Relaxed);
        closed
    }

    /// Tells long-polls to return (graceful shutdown).
    pub fn begin_shutdown(&self) {
        self.shutdown.send_replace(true);
        for entry in self.entries() {
            if let Some(stop) = lock(&entry.watcher).take() {
                stop.store(true, Ordering::SeqCst);
            }
        }
    }

    /// Writes repository state and events atomically, then wakes long-polls.
    /// In fleet mode they are published to PostgreSQL under the
    /// repository's lease instead (refused when this node does not hold it).
    fn commit(&self, repo: Option<&RepoRecord>, events: Vec<NewEvent>) -> anyhow::Result<()> {
        if let Some(node) = self.fleet.get() {
            return node.commit(repo, events);
        }
        let seq = self.registry.commit(repo, &events)?;
        if seq > 0 {
            self.events.send_replace(seq);
        }
        Ok(())
    }

    fn entries(&self) -> Vec<Arc<RepoEntry>> {
        self.repos.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Finds a repository by id, else by name.
    pub fn lookup(&self, repo: &str) -> Result<Arc<RepoEntry>, ApiError> {
        let repo = repo.trim();
        if repo.is_empty() {
            return Err(ApiError::Validation(
                "`repo` is required: a repo_id from POST /repos/add (or the repo's name)".into(),
            ));
        }
        let entries = self.entries();
        entries
            .iter()
            .find(|e| e.id == repo)
            .or_else(|| entries.iter().find(|e| lock(&e.state).record.name == repo))
            .cloned()
            .ok_or_else(|| ApiError::NotFound {
                what: "repository",
                id: repo.to_string(),
            })
    }

    fn allowed(&self, path: &Path) -> bool {
        self.config.allow_roots.is_empty()
            || self.config.allow_roots.iter().any(|a| path.starts_with(a))
    }
}
