//! [`Service`]: the state behind the HTTP API, with blocking methods (the
//! HTTP layer calls them on tokio's blocking pool).
//!
//! It owns the registered repositories (one [`Engine`] each), the reindex
//! runner (one background thread per running repository), generations,
//! health classification and the per-repository metrics gauges.
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
//! Queries are answered by the engine from the index's committed state.
//! While a run is in progress the engine commits whole files per batch, so a
//! query can see some files already new and others still old (never a
//! half-written file). Every such answer is tagged with the *last completed*
//! generation `G`, read before the query runs. When the run completes and
//! bumps to `G+1`, every handle tagged `G` (including those served from the
//! mixed state) is refused by `/expand` with 409 `stale_generation`, so a
//! client never mixes handles across a change it was not told about. While
//! the run is still going, expanding a `G` handle is allowed: the core checks
//! each file's content hash against the index and reports `stale_index` (409)
//! instead of returning text that does not match what was indexed. A repo
//! without a completed generation answers 503 `not_ready` at once (the
//! engine, which would index on a first query, is never asked).
//!
//! Changes made behind the service's back are accounted for where they can
//! be: the engine's background index completion (started by a query while a
//! run has the index marked incomplete) is joined by the run and counted in
//! its report. An index written by another process (e.g. `canopy index` on
//! the same repository) is not seen until the next service run; `/expand`
//! still never returns text that differs from what was indexed.
//!
//! Lock order: the repository list → a repository's state → the registry.

use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::{Duration, Instant};

use anyhow::Context;
use canopy_client::served::{Served, ServedAt};
use canopy_core::context::ContextPack;
use canopy_core::engine::rfc3339_utc;
use canopy_core::graph::request::GraphResponse;
use canopy_core::index::IndexProgress;
use canopy_core::model::IndexReport;
use canopy_core::model::QueryResult;
use canopy_core::pack::EvidencePack;
use canopy_core::{CanopyError, Engine};
use serde_json::json;
use tokio::sync::watch;

use crate::config::Config;
use crate::error::ApiError;
use crate::metrics::{Metrics, label};
use crate::registry::{NewEvent, Registry, RepoRecord, RepoStatus, now_ms};
use canopy_client::api::{
    AddRepoRequest, AddRepoResponse, ContextRequest, EventsResponse, ExpandRequest, ExpandResponse,
    ExpandedContent, GraphHttpRequest, HealthResponse, PackRequest, QueryRequest, ReindexRequest,
    ReindexResponse, RepoHealth, RepoStatusView, RepoView, RunError, RunProgressView,
    StatusResponse,
};

/// Largest `expand_budget` honoured on `/query` (larger values are clamped).
pub const MAX_EXPAND_BUDGET: u64 = 100_000;
/// Longest accepted session id.
pub const MAX_SESSION_LEN: usize = 128;
/// Consecutive failed runs after which a repository is `unhealthy`.
pub const UNHEALTHY_FAILURES: u32 = 3;
/// How long start-up waits for another process to release the data directory.
pub const DATA_DIR_LOCK_WAIT: Duration = Duration::from_secs(5);
/// A follow-up run queued behind a run older than this counts as backlog.
pub const BACKLOG_AFTER: Duration = Duration::from_secs(60);
/// A watched repository whose oldest unindexed change is older than this
/// is `degraded` (index lag).
pub const INDEX_LAG_DEGRADED: Duration = Duration::from_secs(30);

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

/// A random id in UUID v4 format.
fn new_repo_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut bytes = [0u8; 16];
    for chunk in bytes.chunks_mut(8) {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_i64(now_ms());
        h.write_u32(std::process::id());
        h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
        if let Ok(d) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
            h.write_u32(d.subsec_nanos());
        }
        chunk.copy_from_slice(&h.finish().to_le_bytes());
    }
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// Resolves `.` and `..` without touching the file system.
fn lexical_normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && !name.starts_with('.')
}

fn sanitize_name(raw: &str) -> String {
    let s: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '-'
            }
        })
        .take(56)
        .collect();
    let s = s.trim_start_matches('.').to_string();
    if s.is_empty() { "repo".into() } else { s }
}

fn check_session(session: Option<String>) -> Result<Option<String>, ApiError> {
    match session {
        None => Ok(None),
        Some(s) if s.is_empty() => Ok(None),
        Some(s) if s.len() <= MAX_SESSION_LEN && s.chars().all(|c| c.is_ascii_graphic()) => {
            Ok(Some(s))
        }
        Some(_) => Err(ApiError::Validation(format!(
            "session must be 1..={MAX_SESSION_LEN} printable ASCII characters"
        ))),
    }
}

/// Counts a running pass's files (the engine calls it on its writer thread).
#[derive(Default)]
pub struct RunProgress {
    total: AtomicU64,
    done: AtomicU64,
}

impl RunProgress {
    fn reset(&self) {
        self.total.store(0, Ordering::Relaxed);
        self.done.store(0, Ordering::Relaxed);
    }
}

impl IndexProgress for RunProgress {
    fn start(&self, to_parse: u64) {
        self.total.store(to_parse, Ordering::Relaxed);
    }
    fn advance(&self, _path: &str, _bytes: u64) {
        self.done.fetch_add(1, Ordering::Relaxed);
    }
}

/// The running pass of a repository.
#[derive(Clone, Debug)]
struct RunInfo {
    glob: Option<String>,
    commit_sha: Option<String>,
    started: Instant,
    /// An earlier run left unaccounted changes: bump on completion regardless.
    carry_bump: bool,
    /// Started to recover from a failure or an interrupted run.
    recovering: bool,
}

#[derive(Debug)]
struct RepoState {
    record: RepoRecord,
    run: Option<RunInfo>,
    /// A follow-up run is queued, with this glob (`None`: everything).
    rerun: Option<Option<String>>,
}

/// One registered repository.
pub struct RepoEntry {
    id: String,
    root: PathBuf,
    engine: Mutex<Option<Arc<Engine>>>,
    state: Mutex<RepoState>,
    progress: RunProgress,
    /// When the oldest change a watcher saw and no finished run has
    /// indexed yet happened (index lag; `None`: none known).
    unindexed_since: Mutex<Option<Instant>>,
    /// Raised to stop this repository's watcher, if it has one.
    watcher: Mutex<Option<Arc<AtomicBool>>>,
}

impl RepoEntry {
    /// The engine, opened on first use.
    fn engine(&self, config: &Config) -> Result<Arc<Engine>, ApiError> {
        let mut slot = lock(&self.engine);
        if let Some(e) = slot.as_ref() {
            return Ok(e.clone());
        }
        match Engine::open(&self.root, config.engine_options.clone()) {
            Ok(e) => {
                let e = Arc::new(e);
                *slot = Some(e.clone());
                Ok(e)
            }
            Err(err) => {
                tracing::warn!(repo = %self.id, root = %self.root.display(), "cannot open the index: {err}");
                Err(ApiError::RepoUnavailable(self.id.clone()))
            }
        }
    }

    fn view(&self) -> RepoView {
        let st = lock(&self.state);
        let r = &st.record;
        RepoView {
            repo_id: r.repo_id.clone(),
            name: r.name.clone(),
            repo_root: r.root.display().to_string(),
            status: r.status.as_str().to_string(),
            ready: r.generation > 0,
            indexing: st.run.is_some(),
            generation: r.generation,
            commit_sha: r.commit_sha.clone(),
            added_at: rfc3339_utc(r.added_at),
            last_indexed_at: r.last_indexed_at.map(rfc3339_utc),
            last_index: r.last_report.clone(),
            last_error: r.last_error.clone(),
            consecutive_failures: r.consecutive_failures,
            rerun_queued: st.rerun.is_some(),
            watch: r.watch || lock(&self.watcher).is_some(),
            index_lag_seconds: lock(&self.unindexed_since)
                .map_or(0.0, |t| t.elapsed().as_secs_f64()),
            progress: st.run.as_ref().map(|run| RunProgressView {
                files_total: self.progress.total.load(Ordering::Relaxed),
                files_done: self.progress.done.load(Ordering::Relaxed),
                elapsed_seconds: run.started.elapsed().as_secs_f64(),
            }),
        }
    }
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
    _data_dir_lock: std::fs::File,
}

/// Outcome of a run, as recorded: the report, and whether the index changed
/// in a way the report's counts do not show.
type RunResult = Result<(IndexReport, bool), RunError>;

/// Folds the engine's background index completion into a finished run.
///
/// While a full run writes, the index is marked incomplete, and a query
/// arriving then makes the engine start a background completion run; it
/// waits for ours and then indexes again. Its changes must count towards
/// this run's generation, so the runner joins it before deciding. (After a
/// successful full run the index is complete, so no new one can start.)
fn join_background(engine: &Engine, mut report: IndexReport) -> (IndexReport, bool) {
    match engine.wait_for_background_index() {
        Ok(None) => (report, false),
        Ok(Some(extra)) => {
            report.files_indexed += extra.files_indexed;
            report.files_removed += extra.files_removed;
            report.units_written += extra.units_written;
            report.refs_written += extra.refs_written;
            report.bytes_parsed += extra.bytes_parsed;
            report.duration_ms += extra.duration_ms;
            report.rebuilt = report.rebuilt.or(extra.rebuilt);
            (report, false)
        }
        Err(e) => {
            // It may have written part of its work: count the index as changed.
            tracing::warn!("background index completion failed: {e}");
            (report, true)
        }
    }
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
        let records = registry.repos()?;
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
            entries.push(Arc::new(RepoEntry {
                id: record.repo_id.clone(),
                root: record.root.clone(),
                engine: Mutex::new(None),
                state: Mutex::new(RepoState {
                    record,
                    run: None,
                    rerun: None,
                }),
                progress: RunProgress::default(),
                unindexed_since: Mutex::new(None),
                watcher: Mutex::new(None),
            }));
        }
        let service = Arc::new(Service {
            config,
            registry,
            repos: RwLock::new(entries),
            events: watch::channel(latest).0,
            shutdown: watch::channel(false).0,
            metrics: Metrics::default(),
            started: Instant::now(),
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

    /// Tells long-polls to return (graceful shutdown).
    pub fn begin_shutdown(&self) {
        self.shutdown.send_replace(true);
        for entry in self.entries() {
            if let Some(stop) = lock(&entry.watcher).take() {
                stop.store(true, Ordering::SeqCst);
            }
        }
    }

    /// Turns a repository's watch on or off and records it (kept across
    /// restarts).
    fn set_watch(self: &Arc<Self>, entry: &Arc<RepoEntry>, watch: bool) -> Result<(), ApiError> {
        let record = {
            let mut st = lock(&entry.state);
            st.record.watch = watch;
            st.record.clone()
        };
        self.commit(Some(&record), Vec::new())
            .map_err(ApiError::internal)?;
        if watch {
            self.start_watcher(entry);
        } else if !self.config.watch_all
            && let Some(stop) = lock(&entry.watcher).take()
        {
            stop.store(true, Ordering::SeqCst);
        }
        Ok(())
    }

    /// Starts a thread that re-indexes `entry` whenever its files change
    /// (batched as `canopy watch` batches them), unless one runs already.
    /// Each batch starts a run through the same path as `POST /reindex`
    /// (coalescing, generations, events), so followers see it like any
    /// other run.
    fn start_watcher(self: &Arc<Self>, entry: &Arc<RepoEntry>) {
        let mut slot = lock(&entry.watcher);
        if slot.is_some() {
            return;
        }
        let stop = Arc::new(AtomicBool::new(false));
        *slot = Some(stop.clone());
        drop(slot);
        // Weak: a watcher must not keep a stopped service alive.
        let service = Arc::downgrade(self);
        let watched = entry.clone();
        let spawned = std::thread::Builder::new()
            .name(format!(
                "canopy-watch-{}",
                &entry.id[..8.min(entry.id.len())]
            ))
            .spawn(move || {
                let options = canopy_core::watch::WatchOptions::default();
                let result =
                    canopy_core::watch::follow_changes(&watched.root, &options, &stop, |batch| {
                        let Some(service) = service.upgrade() else {
                            return Ok(false);
                        };
                        {
                            let mut since = lock(&watched.unindexed_since);
                            if since.is_none() {
                                *since = Some(batch.first_event);
                            }
                        }
                        tracing::debug!(
                            repo = %watched.id,
                            paths = batch.paths.len(),
                            full = batch.full.unwrap_or(""),
                            "files changed; reindexing"
                        );
                        if let Err(e) = service.start_reindex(&watched, None, false) {
                            tracing::warn!(repo = %watched.id, "watch cannot start a reindex: {e}");
                        }
                        Ok(true)
                    });
                if let Err(e) = result {
                    tracing::warn!(repo = %watched.id, "watching stopped: {e}");
                }
                *lock(&watched.watcher) = None;
            });
        if let Err(e) = spawned {
            tracing::warn!(repo = %entry.id, "cannot start the watcher thread: {e}");
            *lock(&entry.watcher) = None;
        }
    }

    /// Writes repository state and events atomically, then wakes long-polls.
    fn commit(&self, repo: Option<&RepoRecord>, events: Vec<NewEvent>) -> rusqlite::Result<()> {
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

    /// `POST /repos/add`.
    pub fn add_repo(self: &Arc<Self>, req: AddRepoRequest) -> Result<AddRepoResponse, ApiError> {
        let raw = req.path.trim();
        if raw.is_empty() {
            return Err(ApiError::Validation("`path` is required".into()));
        }
        let path = Path::new(raw);
        if !path.is_absolute() {
            return Err(ApiError::Validation(format!(
                "`path` must be absolute, got {raw:?}"
            )));
        }
        let canonical = match path.canonicalize() {
            Ok(c) => c,
            // Do not reveal whether paths outside the allowed roots exist.
            Err(_) if !self.allowed(&lexical_normalize(path)) => {
                return Err(ApiError::PathNotAllowed(format!(
                    "{raw} is outside the allowed roots"
                )));
            }
            Err(_) => {
                return Err(ApiError::Validation(format!(
                    "{raw} does not exist or is not accessible"
                )));
            }
        };
        // Errors name the path as given, never its resolved form: that would
        // tell the caller where a symlink points.
        if !self.allowed(&canonical) {
            return Err(ApiError::PathNotAllowed(format!(
                "{raw} is outside the allowed roots"
            )));
        }
        if !canonical.is_dir() {
            return Err(ApiError::Validation(format!("{raw} is not a directory")));
        }
        if !canonical.join(".git").exists() {
            return Err(ApiError::NotAGitRepository(format!(
                "{raw} is not a git repository root (no .git)"
            )));
        }
        let Some(root_text) = canonical.to_str().map(str::to_string) else {
            return Err(ApiError::Validation("the path must be valid UTF-8".into()));
        };
        let explicit = req.name.as_deref().map(str::trim).filter(|n| !n.is_empty());
        if let Some(name) = explicit
            && !valid_name(name)
        {
            return Err(ApiError::Validation(format!(
                "invalid name {name:?}: use 1-64 characters from A-Z a-z 0-9 - _ . (not starting with .)"
            )));
        }

        let mut repos = self.repos.write().unwrap_or_else(|e| e.into_inner());
        if let Some(existing) = repos.iter().find(|e| e.root == canonical).cloned() {
            drop(repos);
            if let Some(watch) = req.watch {
                self.set_watch(&existing, watch)?;
            }
            let name = lock(&existing.state).record.name.clone();
            return Ok(AddRepoResponse {
                repo_id: existing.id.clone(),
                name,
                repo_root: root_text,
                created: false,
            });
        }
        let taken = |n: &str| repos.iter().any(|e| lock(&e.state).record.name == n);
        let name = match explicit {
            Some(n) if taken(n) => return Err(ApiError::NameTaken(n.to_string())),
            Some(n) => n.to_string(),
            None => {
                let base = sanitize_name(
                    &canonical
                        .file_name()
                        .map(|s| s.to_string_lossy().into_owned())
                        .unwrap_or_default(),
                );
                let mut candidate = base.clone();
                let mut n = 2;
                while taken(&candidate) {
                    candidate = format!("{base}-{n}");
                    n += 1;
                }
                candidate
            }
        };
        let engine =
            Engine::open(&canonical, self.config.engine_options.clone()).map_err(|e| match e {
                canopy_core::CanopyError::UnsafeRoot { reason, .. } => {
                    ApiError::PathNotAllowed(format!("{raw} is {reason}, which is never served"))
                }
                e => ApiError::internal(format!("opening the index of {raw}: {e}")),
            })?;
        let record = RepoRecord {
            repo_id: new_repo_id(),
            name: name.clone(),
            root: canonical.clone(),
            added_at: now_secs(),
            generation: 0,
            commit_sha: None,
            status: RepoStatus::NotIndexed,
            dirty: false,
            consecutive_failures: 0,
            last_started_at: None,
            last_indexed_at: None,
            last_report: None,
            last_error: None,
            watch: false,
        };
        self.commit(
            Some(&record),
            vec![NewEvent {
                kind: "repo_added",
                repo_id: Some(record.repo_id.clone()),
                data: json!({ "name": name, "repo_root": root_text }),
            }],
        )
        .map_err(ApiError::internal)?;
        let repo_id = record.repo_id.clone();
        repos.push(Arc::new(RepoEntry {
            id: repo_id.clone(),
            root: canonical,
            engine: Mutex::new(Some(Arc::new(engine))),
            state: Mutex::new(RepoState {
                record,
                run: None,
                rerun: None,
            }),
            progress: RunProgress::default(),
            unindexed_since: Mutex::new(None),
            watcher: Mutex::new(None),
        }));
        let entry = repos.last().cloned();
        drop(repos);
        if let Some(entry) = entry
            && req.watch == Some(true)
        {
            self.set_watch(&entry, true)?;
        }
        Ok(AddRepoResponse {
            repo_id,
            name,
            repo_root: root_text,
            created: true,
        })
    }

    /// `POST /reindex`: starts a run, or coalesces into the running one.
    pub fn reindex(self: &Arc<Self>, req: ReindexRequest) -> Result<ReindexResponse, ApiError> {
        let glob = req.glob.filter(|g| !g.trim().is_empty());
        if let Some(g) = &glob {
            canopy_core::discover::PathFilter::new(g)?;
        }
        let entry = self.lookup(&req.repo)?;
        entry.engine(&self.config)?;
        let glob = if req.rebuild {
            Engine::request_rebuild(&entry.root).map_err(ApiError::from)?;
            None
        } else {
            glob
        };
        self.start_reindex(&entry, glob, false)
    }

    /// Starts a run on `entry` unless one is running (then queues one follow-up).
    fn start_reindex(
        self: &Arc<Self>,
        entry: &Arc<RepoEntry>,
        glob: Option<String>,
        recovering: bool,
    ) -> Result<ReindexResponse, ApiError> {
        let head = head_sha(&entry.root);
        let mut st = lock(&entry.state);
        if let Some(running_sha) = st.run.as_ref().map(|r| r.commit_sha.clone()) {
            // One follow-up run covers every request made during this one; a
            // different glob widens it to the whole repository.
            st.rerun = Some(match st.rerun.take() {
                None => glob,
                Some(queued) if queued == glob => queued,
                Some(_) => None,
            });
            self.metrics.coalesced();
            return Ok(ReindexResponse {
                repo_id: entry.id.clone(),
                generation: st.record.generation,
                status: "already_indexing".into(),
                commit_sha: running_sha,
                rerun_queued: true,
            });
        }
        let recovering = recovering || st.record.consecutive_failures > 0;
        let glob = effective_glob(&st.record, glob);
        let (record, event) = started_record(&st.record, glob.clone(), head.clone(), false);
        self.commit(Some(&record), vec![event])
            .map_err(ApiError::internal)?;
        st.run = Some(RunInfo {
            glob,
            commit_sha: head.clone(),
            started: Instant::now(),
            carry_bump: st.record.dirty,
            recovering,
        });
        st.record = record;
        let generation = st.record.generation;
        drop(st);
        entry.progress.reset();
        let service = self.clone();
        let runner = entry.clone();
        let spawned = std::thread::Builder::new()
            .name(format!(
                "canopy-index-{}",
                &entry.id[..8.min(entry.id.len())]
            ))
            .spawn(move || service.run_loop(runner));
        if let Err(e) = spawned {
            let err = RunError {
                code: "Internal".into(),
                message: format!("cannot start the index thread: {e}"),
            };
            self.finish_run(entry, Err(err), Duration::ZERO, None);
            return Err(ApiError::internal(format!(
                "spawning the index thread: {e}"
            )));
        }
        Ok(ReindexResponse {
            repo_id: entry.id.clone(),
            generation,
            status: "indexing".into(),
            commit_sha: head,
            rerun_queued: false,
        })
    }

    /// Runs passes until no follow-up is queued.
    fn run_loop(self: Arc<Self>, entry: Arc<RepoEntry>) {
        loop {
            let glob = lock(&entry.state).run.as_ref().and_then(|r| r.glob.clone());
            let started = Instant::now();
            let result: RunResult = match entry.engine(&self.config) {
                Err(e) => Err(RunError {
                    code: e.code().into(),
                    message: e.to_string(),
                }),
                Ok(engine) => {
                    let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| {
                        engine.index(glob.as_deref(), &entry.progress)
                    }));
                    match outcome {
                        Ok(Ok(report)) => Ok(join_background(&engine, report)),
                        Ok(Err(e)) => Err(run_error(&e)),
                        Err(_) => Err(RunError {
                            code: "panic".into(),
                            message: "the indexer panicked; see the service log".into(),
                        }),
                    }
                }
            };
            if let Err(e) = &result {
                tracing::warn!(repo = %entry.id, "reindex failed: {} ({})", e.message, e.code);
            }
            let next_head = head_sha(&entry.root);
            if !self.finish_run(&entry, result, started.elapsed(), next_head) {
                break;
            }
            entry.progress.reset();
        }
    }

    /// Records a finished pass; starts the queued follow-up, if any (returns whether it did).
    fn finish_run(
        &self,
        entry: &RepoEntry,
        result: RunResult,
        elapsed: Duration,
        next_head: Option<String>,
    ) -> bool {
        let mut st = lock(&entry.state);
        let Some(run) = st.run.take() else {
            return false;
        };
        let mut record = st.record.clone();
        let mut events = Vec::new();
        let repo_id = Some(entry.id.clone());
        match result {
            Ok((report, unaccounted_change)) => {
                let changed = report.files_indexed + report.files_removed > 0
                    || report.rebuilt.is_some()
                    || unaccounted_change;
                let previous = record.generation;
                let bump = previous == 0 || changed || run.carry_bump;
                if bump {
                    record.generation = previous + 1;
                }
                record.commit_sha = run.commit_sha.clone();
                record.status = RepoStatus::Ready;
                record.dirty = false;
                record.consecutive_failures = 0;
                record.last_indexed_at = Some(now_secs());
                record.last_error = None;
                events.push(NewEvent {
                    kind: "reindex_finished",
                    repo_id: repo_id.clone(),
                    data: json!({
                        "generation": record.generation,
                        "previous_generation": previous,
                        "changed": changed,
                        "commit_sha": record.commit_sha,
                        "glob": run.glob,
                        "files_indexed": report.files_indexed,
                        "files_removed": report.files_removed,
                        "files_unchanged": report.files_unchanged,
                        "duration_ms": report.duration_ms,
                    }),
                });
                if bump {
                    let reason = if previous == 0 {
                        "first_complete_index"
                    } else if changed {
                        "index_changed"
                    } else {
                        "recovered_incomplete_run"
                    };
                    events.push(NewEvent {
                        kind: "generation_bumped",
                        repo_id: repo_id.clone(),
                        data: json!({
                            "from": previous,
                            "to": record.generation,
                            "reason": reason,
                            "commit_sha": record.commit_sha,
                            "files_indexed": report.files_indexed,
                            "files_removed": report.files_removed,
                        }),
                    });
                }
                let mut report = report;
                if !report.changed_paths.is_empty() {
                    // Followers (`canopy follow --glob`) wake on the paths
                    // they care about; the list is bounded by the report.
                    events.push(NewEvent {
                        kind: "files_changed",
                        repo_id: repo_id.clone(),
                        data: json!({
                            "generation": record.generation,
                            "paths": std::mem::take(&mut report.changed_paths),
                            "paths_omitted": std::mem::take(&mut report.changed_paths_omitted),
                        }),
                    });
                }
                record.last_report = Some(report);
                {
                    // The run read every file after the oldest change it
                    // could have missed only if it started after it.
                    let mut since = lock(&entry.unindexed_since);
                    if since.is_some_and(|t| run.started >= t) {
                        *since = None;
                    }
                }
                self.metrics.index_run(&entry.id, "success", elapsed);
            }
            Err(err) => {
                record.status = RepoStatus::Failed;
                record.consecutive_failures += 1;
                events.push(NewEvent {
                    kind: "reindex_failed",
                    repo_id: repo_id.clone(),
                    data: json!({
                        "generation": record.generation,
                        "code": err.code,
                        "message": err.message,
                        "consecutive_failures": record.consecutive_failures,
                    }),
                });
                record.last_error = Some(err);
                self.metrics.index_run(&entry.id, "failure", elapsed);
            }
        }
        let follow_up = st.rerun.take().map(|glob| effective_glob(&record, glob));
        if let Some(glob) = &follow_up {
            let (next, event) = started_record(&record, glob.clone(), next_head.clone(), true);
            st.run = Some(RunInfo {
                glob: glob.clone(),
                commit_sha: next_head,
                started: Instant::now(),
                carry_bump: record.dirty,
                recovering: record.consecutive_failures > 0,
            });
            record = next;
            events.push(event);
        }
        if let Err(e) = self.commit(Some(&record), events) {
            // The in-memory state moves on; the persisted one still says a run
            // was in progress, so a restart conservatively bumps the generation.
            tracing::error!(repo = %entry.id, "cannot persist the reindex result: {e}");
        }
        st.record = record;
        follow_up.is_some()
    }

    /// The engine and the state it answers from, or 503 `not_ready`.
    fn serving(&self, entry: &RepoEntry) -> Result<(Arc<Engine>, ServedAt), ApiError> {
        let (generation, commit_sha, indexing) = {
            let st = lock(&entry.state);
            (
                st.record.generation,
                st.record.commit_sha.clone(),
                st.run.is_some(),
            )
        };
        if generation == 0 {
            return Err(ApiError::NotReady {
                repo: entry.id.clone(),
                indexing,
            });
        }
        let at = ServedAt {
            repo_id: entry.id.clone(),
            generation,
            commit_sha,
        };
        Ok((entry.engine(&self.config)?, at))
    }

    /// `POST /query`.
    pub fn query(&self, req: QueryRequest) -> Result<Served<QueryResult>, ApiError> {
        let entry = self.lookup(&req.repo)?;
        let mut params = req.params;
        params.validate()?;
        params.expand_budget = params.expand_budget.map(|b| b.min(MAX_EXPAND_BUDGET));
        let (engine, at) = self.serving(&entry)?;
        let result = engine.query(&params)?;
        self.metrics.returned(&entry.id, result.handles.len(), &[]);
        Ok(Served::new(at, result))
    }

    /// The generation a graph or context request's target came from: the
    /// current one passes, an older one is 409 `stale_generation` (naming
    /// `target`), a newer one is a 400.
    fn check_generation(
        &self,
        repo_id: &str,
        given: Option<u64>,
        current: u64,
        target: &str,
    ) -> Result<(), ApiError> {
        match given {
            Some(given) if given > current => Err(ApiError::Validation(format!(
                "generation {given} is newer than the current generation {current} of {repo_id}; \
                 pass a generation from a response of this service"
            ))),
            Some(given) if given != current => {
                self.metrics.stale_rejection();
                Err(ApiError::StaleGeneration {
                    ids: target.to_string(),
                    given,
                    current,
                })
            }
            _ => Ok(()),
        }
    }

    /// `POST /graph`: one navigation request over the last complete generation.
    pub fn graph(&self, req: GraphHttpRequest) -> Result<Served<GraphResponse>, ApiError> {
        let entry = self.lookup(&req.repo)?;
        req.request.validate()?;
        let (engine, at) = self.serving(&entry)?;
        self.check_generation(
            &entry.id,
            req.generation,
            at.generation,
            &req.request.target,
        )?;
        let answer = engine.graph_request(&req.request)?;
        self.metrics.returned(&entry.id, answer.len(), &[]);
        Ok(Served::new(at, answer))
    }

    /// `POST /context`.
    pub fn context(&self, req: ContextRequest) -> Result<Served<ContextPack>, ApiError> {
        let entry = self.lookup(&req.repo)?;
        let params = canopy_core::context::ContextParams {
            task: req.task,
            focus: req.focus,
            budget_tokens: req.budget_tokens,
            strategy: req.strategy,
        };
        params.validate()?;
        let (engine, at) = self.serving(&entry)?;
        let focus = params.focus.clone().unwrap_or_default();
        self.check_generation(&entry.id, req.generation, at.generation, &focus)?;
        let pack = engine.context(&params)?;
        self.metrics.returned(&entry.id, pack.fragments.len(), &[]);
        Ok(Served::new(at, pack))
    }

    /// `POST /evidence_pack`.
    pub fn evidence_pack(
        &self,
        req: PackRequest,
        header_session: Option<String>,
    ) -> Result<Served<EvidencePack>, ApiError> {
        let entry = self.lookup(&req.repo)?;
        let session = check_session(req.session.or(header_session))?;
        let mut params = req.params;
        params.query.validate()?;
        params.query.expand_budget = None;
        let (engine, at) = self.serving(&entry)?;
        let pack = engine.evidence_pack(&params, session.as_deref())?;
        let suggested: Vec<String> = pack
            .expand_suggestion
            .iter()
            .map(|h| h.as_str().to_string())
            .collect();
        self.metrics
            .returned(&entry.id, pack.handles.len(), &suggested);
        Ok(Served::new(at, pack).with_session(session))
    }

    /// `POST /expand`.
    pub fn expand(
        &self,
        req: ExpandRequest,
        header_session: Option<String>,
    ) -> Result<ExpandResponse, ApiError> {
        let entry = self.lookup(&req.repo)?;
        let session = check_session(req.session.or(header_session))?;
        if req.handles.is_empty() {
            return Err(ApiError::Validation(
                "`handles` must list at least one handle ({\"id\": \"h…\", \"generation\": N})"
                    .into(),
            ));
        }
        if req.handles.len() > self.config.max_expand_handles {
            return Err(ApiError::Validation(format!(
                "at most {} handles per expand request (got {})",
                self.config.max_expand_handles,
                req.handles.len()
            )));
        }
        let (engine, at) = self.serving(&entry)?;
        let generation = at.generation;
        // A generation this service never issued is a client bug, not a
        // stale handle: re-querying would not help, so it is a 400.
        if let Some(future) = req
            .handles
            .iter()
            .find(|h| h.generation().is_some_and(|g| g > generation))
        {
            return Err(ApiError::Validation(format!(
                "handle {} carries generation {}, newer than the current generation {generation}; \
                 pass the generation a response of this service gave",
                future.id(),
                future.generation().unwrap_or_default()
            )));
        }
        let stale: Vec<&canopy_client::api::HandleRef> = req
            .handles
            .iter()
            .filter(|h| h.generation().is_some_and(|g| g != generation))
            .collect();
        if let Some(first) = stale.first() {
            self.metrics.stale_rejection();
            let ids: Vec<&str> = stale.iter().take(5).map(|h| h.id()).collect();
            let more = if stale.len() > 5 {
                format!(" and {} more", stale.len() - 5)
            } else {
                String::new()
            };
            return Err(ApiError::StaleGeneration {
                ids: format!("{}{more}", ids.join(", ")),
                given: first.generation().unwrap_or(0),
                current: generation,
            });
        }
        let ids: Vec<&str> = req.handles.iter().map(|h| h.id()).collect();
        let expansions = engine.expand_in_session(&ids, session.as_deref())?;
        let contents: Vec<ExpandedContent> = expansions
            .into_iter()
            .map(|e| ExpandedContent {
                handle_id: e.handle_id.as_str().to_string(),
                file_path: e.file_path,
                line_range: e.line_range,
                token_count: canopy_core::tokens::count_tokens(&e.content) as u64,
                content: e.content,
            })
            .collect();
        let total_tokens = contents.iter().map(|c| c.token_count).sum();
        let served: Vec<String> = contents.iter().map(|c| c.handle_id.clone()).collect();
        self.metrics.expanded(&entry.id, &served, total_tokens);
        Ok(ExpandResponse {
            repo_id: at.repo_id,
            generation,
            commit_sha: at.commit_sha,
            contents,
            total_tokens,
        })
    }

    /// `GET /repos`.
    pub fn repos(&self) -> Vec<RepoView> {
        self.entries().iter().map(|e| e.view()).collect()
    }

    /// `GET /status` (optionally one repository).
    pub fn status(&self, repo: Option<&str>) -> Result<StatusResponse, ApiError> {
        let entries = match repo.filter(|r| !r.trim().is_empty()) {
            Some(r) => vec![self.lookup(r)?],
            None => self.entries(),
        };
        let repos = entries
            .iter()
            .map(|e| {
                let view = e.view();
                let index = if view.ready {
                    e.engine(&self.config)
                        .ok()
                        .and_then(|eng| eng.status().ok())
                } else {
                    None
                };
                RepoStatusView { repo: view, index }
            })
            .collect();
        Ok(StatusResponse {
            service: "canopy-service".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            uptime_seconds: self.started.elapsed().as_secs(),
            repos,
        })
    }

    /// `GET /events`: one page after the cursor (no waiting; see the HTTP layer).
    pub fn events(
        &self,
        after: u64,
        limit: usize,
        repo: Option<&str>,
    ) -> Result<EventsResponse, ApiError> {
        let repo_id = match repo.filter(|r| !r.trim().is_empty()) {
            Some(r) => Some(self.lookup(r)?.id.clone()),
            None => None,
        };
        let (items, latest) = self
            .registry
            .events_after(after, limit, repo_id.as_deref())
            .map_err(ApiError::internal)?;
        let next_after_seq = match items.last() {
            Some(last) => last.seq,
            // Nothing (matching) up to `latest`: the cursor may skip ahead.
            None if repo_id.is_some() => after.max(latest),
            None => after,
        };
        Ok(EventsResponse {
            items,
            next_after_seq,
            latest_seq: latest,
        })
    }

    /// `GET /health`: classification from index errors, backlog and staleness.
    ///
    /// Per repository, the first matching rule wins:
    /// * `unhealthy`: the directory cannot be opened; or
    ///   [`UNHEALTHY_FAILURES`] runs failed in a row; or the last run failed
    ///   and there is no generation to serve;
    /// * `recovering`: a run is in progress after a failure or an interrupted
    ///   run, or the first run is in progress;
    /// * `degraded`: the last run failed (an older generation is served); no
    ///   run ever completed; a follow-up run has waited behind a run older
    ///   than [`BACKLOG_AFTER`] (backlog); a watched change waits longer
    ///   than [`INDEX_LAG_DEGRADED`] (index lag); or the served commit is behind
    ///   `HEAD` (stale);
    /// * `healthy` otherwise.
    ///
    /// The service's status is the worst of its repositories (order healthy <
    /// degraded < recovering < unhealthy), at least `degraded` when internal
    /// errors occurred in the last five minutes. `detailed` adds per-repo entries.
    pub fn health(&self, detailed: bool) -> HealthResponse {
        let mut repos = Vec::new();
        let mut worst = Health::Healthy;
        let mut reasons = Vec::new();
        for entry in self.entries() {
            let (record, run, rerun) = {
                let st = lock(&entry.state);
                (st.record.clone(), st.run.clone(), st.rerun.is_some())
            };
            let (health, why) = classify(&entry, &record, run.as_ref(), rerun);
            if health != Health::Healthy {
                reasons.push(format!("{}: {}", record.name, why.join("; ")));
            }
            worst = worst.max(health);
            repos.push(RepoHealth {
                repo_id: record.repo_id,
                name: record.name,
                status: health.as_str().into(),
                reasons: why,
            });
        }
        let errors = self.metrics.recent_internal_errors();
        if errors > 0 {
            worst = worst.max(Health::Degraded);
            reasons.push(format!("{errors} internal error(s) in the last 5 minutes"));
        }
        if let Err(e) = self.registry.latest_seq() {
            tracing::error!("registry unreadable: {e}");
            worst = Health::Unhealthy;
            reasons.push("the registry database cannot be read".into());
        }
        HealthResponse {
            status: worst.as_str().into(),
            reasons: if detailed { reasons } else { Vec::new() },
            uptime_seconds: self.started.elapsed().as_secs(),
            repos: detailed.then_some(repos),
        }
    }

    /// The Prometheus text of `GET /metrics`.
    pub fn render_metrics(&self) -> String {
        let mut out = String::new();
        self.metrics.render(&mut out);
        let entries = self.entries();
        let gauge = |out: &mut String, name: &str, help: &str| {
            out.push_str(&format!("# HELP {name} {help}\n# TYPE {name} gauge\n"));
        };
        gauge(
            &mut out,
            "canopy_uptime_seconds",
            "Seconds since the service started.",
        );
        out.push_str(&format!(
            "canopy_uptime_seconds {}\n",
            self.started.elapsed().as_secs()
        ));
        gauge(&mut out, "canopy_repos", "Registered repositories.");
        out.push_str(&format!("canopy_repos {}\n", entries.len()));
        gauge(
            &mut out,
            "canopy_events_latest_seq",
            "Sequence number of the newest event.",
        );
        out.push_str(&format!(
            "canopy_events_latest_seq {}\n",
            *self.events.borrow()
        ));
        let views: Vec<(RepoView, Option<f64>)> = entries
            .iter()
            .map(|e| {
                let last = lock(&e.state)
                    .record
                    .last_report
                    .as_ref()
                    .map(|r| r.duration_ms as f64 / 1000.0);
                (e.view(), last)
            })
            .collect();
        let labels = |v: &RepoView| {
            format!(
                "repo_id=\"{}\",name=\"{}\"",
                label(&v.repo_id),
                label(&v.name)
            )
        };
        let per_repo: [RepoGauge; 7] = [
            ("canopy_repo_generation", "Last complete generation.", |v| {
                v.generation as f64
            }),
            (
                "canopy_repo_ready",
                "1 when a complete generation is served.",
                |v| f64::from(u8::from(v.ready)),
            ),
            ("canopy_repo_indexing", "1 while a reindex runs.", |v| {
                f64::from(u8::from(v.indexing))
            }),
            (
                "canopy_repo_reindex_queued",
                "1 when a follow-up reindex is queued (backlog).",
                |v| f64::from(u8::from(v.rerun_queued)),
            ),
            (
                "canopy_repo_consecutive_failures",
                "Failed reindex runs since the last success.",
                |v| f64::from(v.consecutive_failures),
            ),
            (
                "canopy_repo_watched",
                "1 when the repository is re-indexed on file-system events.",
                |v| f64::from(u8::from(v.watch)),
            ),
            (
                "canopy_repo_index_lag_seconds",
                "Age of the oldest change seen by the watcher and not indexed yet (0: none).",
                |v| v.index_lag_seconds,
            ),
        ];
        for (name, help, get) in per_repo {
            gauge(&mut out, name, help);
            for (v, _) in &views {
                out.push_str(&format!("{name}{{{}}} {}\n", labels(v), get(v)));
            }
        }
        gauge(
            &mut out,
            "canopy_index_last_duration_seconds",
            "Duration of the last successful reindex.",
        );
        for (v, last) in &views {
            if let Some(d) = last {
                out.push_str(&format!(
                    "canopy_index_last_duration_seconds{{{}}} {d}\n",
                    labels(v)
                ));
            }
        }
        gauge(
            &mut out,
            "canopy_index_last_files",
            "Files of the last successful reindex by outcome (indexed, removed, unchanged).",
        );
        for (v, _) in &views {
            if let Some(r) = &v.last_index {
                for (kind, n) in [
                    ("indexed", r.files_indexed),
                    ("removed", r.files_removed),
                    ("unchanged", r.files_unchanged),
                ] {
                    out.push_str(&format!(
                        "canopy_index_last_files{{{},kind=\"{kind}\"}} {n}\n",
                        labels(v)
                    ));
                }
            }
        }
        out
    }
}

/// A per-repository gauge: name, help and how to read it.
type RepoGauge = (&'static str, &'static str, fn(&RepoView) -> f64);

/// The glob a run may use: only an index known to be complete (a generation
/// exists and no run was left unfinished) may be refreshed partially; the
/// first run, and the one after a failure, cover the whole repository.
fn effective_glob(record: &RepoRecord, glob: Option<String>) -> Option<String> {
    if record.generation == 0 || record.dirty {
        None
    } else {
        glob
    }
}

/// The record and event of a run that starts now.
fn started_record(
    current: &RepoRecord,
    glob: Option<String>,
    commit_sha: Option<String>,
    follow_up: bool,
) -> (RepoRecord, NewEvent) {
    let mut record = current.clone();
    record.status = RepoStatus::Indexing;
    record.dirty = true;
    record.last_started_at = Some(now_secs());
    let event = NewEvent {
        kind: "reindex_started",
        repo_id: Some(current.repo_id.clone()),
        data: json!({
            "generation": current.generation,
            "commit_sha": commit_sha,
            "glob": glob,
            "follow_up": follow_up,
        }),
    };
    (record, event)
}

fn run_error(e: &CanopyError) -> RunError {
    RunError {
        code: e.code().to_string(),
        message: e.to_string(),
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Health {
    Healthy,
    Degraded,
    Recovering,
    Unhealthy,
}

impl Health {
    fn as_str(self) -> &'static str {
        match self {
            Health::Healthy => "healthy",
            Health::Degraded => "degraded",
            Health::Recovering => "recovering",
            Health::Unhealthy => "unhealthy",
        }
    }
}

fn classify(
    entry: &RepoEntry,
    record: &RepoRecord,
    run: Option<&RunInfo>,
    rerun: bool,
) -> (Health, Vec<String>) {
    if !entry.root.is_dir() {
        return (
            Health::Unhealthy,
            vec!["the repository directory cannot be opened".into()],
        );
    }
    if let Some(damage) = Engine::damage_at(&entry.root) {
        return (
            Health::Unhealthy,
            vec![format!(
                "the index is damaged ({damage}); POST /reindex rebuilds it"
            )],
        );
    }
    let failures = record.consecutive_failures;
    if failures >= UNHEALTHY_FAILURES {
        return (
            Health::Unhealthy,
            vec![format!("{failures} reindex runs failed in a row")],
        );
    }
    if failures > 0 && record.generation == 0 && run.is_none() {
        return (
            Health::Unhealthy,
            vec!["the last reindex failed and no generation can be served".into()],
        );
    }
    if let Some(run) = run {
        if run.recovering {
            return (
                Health::Recovering,
                vec!["reindexing after a failed or interrupted run".into()],
            );
        }
        if record.generation == 0 {
            return (Health::Recovering, vec!["first index in progress".into()]);
        }
    }
    let mut why = Vec::new();
    if failures > 0 {
        why.push(format!(
            "the last reindex failed; serving generation {}",
            record.generation
        ));
    }
    if record.generation == 0 && run.is_none() && failures == 0 {
        why.push("never indexed: POST /reindex".into());
    }
    if let Some(since) = *lock(&entry.unindexed_since)
        && since.elapsed() > INDEX_LAG_DEGRADED
    {
        why.push(format!(
            "index lag: files changed {} s ago are not indexed yet",
            since.elapsed().as_secs()
        ));
    }
    if let Some(run) = run
        && rerun
        && run.started.elapsed() > BACKLOG_AFTER
    {
        why.push(format!(
            "reindex backlog: a follow-up run waits behind a run started {} s ago",
            run.started.elapsed().as_secs()
        ));
    }
    if run.is_none()
        && record.generation > 0
        && let (Some(served), Some(head)) = (&record.commit_sha, head_sha(&entry.root))
        && *served != head
    {
        why.push(format!(
            "stale: generation {} was indexed at {} but HEAD is {}",
            record.generation,
            &served[..served.len().min(12)],
            &head[..head.len().min(12)]
        ));
    }
    if why.is_empty() {
        (Health::Healthy, why)
    } else {
        (Health::Degraded, why)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry_at(root: &Path) -> (RepoEntry, RepoRecord) {
        let record = RepoRecord {
            repo_id: "r".into(),
            name: "repo".into(),
            root: root.to_path_buf(),
            added_at: 0,
            generation: 1,
            commit_sha: None,
            status: RepoStatus::Ready,
            dirty: false,
            consecutive_failures: 0,
            last_started_at: None,
            last_indexed_at: None,
            last_report: None,
            last_error: None,
            watch: false,
        };
        let entry = RepoEntry {
            id: "r".into(),
            root: root.to_path_buf(),
            engine: Mutex::new(None),
            state: Mutex::new(RepoState {
                record: record.clone(),
                run: None,
                rerun: None,
            }),
            progress: RunProgress::default(),
            unindexed_since: Mutex::new(None),
            watcher: Mutex::new(None),
        };
        (entry, record)
    }

    fn run(recovering: bool, age: Duration) -> RunInfo {
        RunInfo {
            glob: None,
            commit_sha: None,
            started: Instant::now().checked_sub(age).unwrap_or_else(Instant::now),
            carry_bump: false,
            recovering,
        }
    }

    #[test]
    fn health_classification_rules() {
        let dir = tempfile::tempdir().unwrap();
        let (entry, ready) = entry_at(dir.path());
        let health =
            |r: &RepoRecord, run: Option<&RunInfo>, rerun: bool| classify(&entry, r, run, rerun).0;
        assert_eq!(health(&ready, None, false), Health::Healthy);

        let mut failed = ready.clone();
        failed.consecutive_failures = 1;
        assert_eq!(health(&failed, None, false), Health::Degraded);
        assert_eq!(
            health(&failed, Some(&run(true, Duration::ZERO)), false),
            Health::Recovering
        );
        failed.consecutive_failures = UNHEALTHY_FAILURES;
        assert_eq!(health(&failed, None, false), Health::Unhealthy);

        let mut never = ready.clone();
        never.generation = 0;
        assert_eq!(health(&never, None, false), Health::Degraded);
        assert_eq!(
            health(&never, Some(&run(false, Duration::ZERO)), false),
            Health::Recovering
        );
        never.consecutive_failures = 1;
        assert_eq!(health(&never, None, false), Health::Unhealthy);

        // Backlog: a follow-up queued behind a long run.
        let long = run(false, BACKLOG_AFTER + Duration::from_secs(1));
        assert_eq!(health(&ready, Some(&long), true), Health::Degraded);
        assert_eq!(health(&ready, Some(&long), false), Health::Healthy);
        assert_eq!(
            health(&ready, Some(&run(false, Duration::ZERO)), true),
            Health::Healthy
        );

        let (gone, record) = entry_at(&dir.path().join("missing"));
        assert_eq!(classify(&gone, &record, None, false).0, Health::Unhealthy);
        assert!(Health::Unhealthy > Health::Recovering && Health::Recovering > Health::Degraded);
    }

    #[test]
    fn repo_ids_are_uuid_shaped_and_distinct() {
        let a = new_repo_id();
        let b = new_repo_id();
        assert_ne!(a, b);
        assert_eq!(a.len(), 36);
        assert_eq!(&a[14..15], "4");
    }

    #[test]
    fn normalizes_lexically() {
        assert_eq!(
            lexical_normalize(Path::new("/a/b/../c/./d")),
            Path::new("/a/c/d")
        );
        assert_eq!(lexical_normalize(Path::new("/a/../../x")), Path::new("/x"));
    }

    #[test]
    fn names_are_validated_and_sanitized() {
        assert!(valid_name("my-repo_1.x"));
        assert!(!valid_name("../etc"));
        assert!(!valid_name(""));
        assert_eq!(sanitize_name("my repo!"), "my-repo-");
        assert_eq!(sanitize_name(".."), "repo");
    }
}
