//! [`Engine`]: the one API every front end uses.
//!
//! An engine is bound to one repository. It owns a read connection for
//! queries and opens a writer connection for each index run; index runs are
//! serialised per engine, and SQLite's WAL lets other processes read (and
//! serialises their writes) meanwhile.
//!
//! Invariant: **readers never wait for a writer.** A read takes the read
//! connection and a snapshot, nothing an index run holds; a query that
//! would index the files it points at does so only when no other run holds
//! the index (it waits behind the engine's own background completion,
//! whose chunks are bounded, and behind nothing else), and otherwise
//! answers from what is indexed, saying how much that is.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};
use std::thread::JoinHandle;

use crate::discover::{
    CANOPY_DIR, DEFAULT_MAX_FILE_SIZE, PathFilter, RootRule, discover, locate_root,
};
use crate::error::{CanopyError, Result};
use crate::index::{IndexOptions, IndexProgress, NoProgress, run_index};
use crate::lazy;
pub use crate::model::rfc3339_utc;
use crate::model::{Expansion, IndexReport, QueryResult, Status};
use crate::pack::{EvidencePack, PackParams};
use crate::query::{QueryParams, execute};
use crate::resultset::{RefineParams, RefineResult, ResultSets};
use crate::session::SessionStore;
use crate::snapshot::Snapshot;
use crate::store::swap::SideIndex;
use crate::store::{ForWriting, Rebuild, SCHEMA_VERSION, Store, meta_keys};

/// Default [`EngineOptions::time_budget`].
pub const DEFAULT_TIME_BUDGET: std::time::Duration = std::time::Duration::from_secs(30);

/// Files the background completion of a partial index writes per run; a
/// query that needs its own files indexed waits at most for one chunk.
const BACKGROUND_CHUNK: usize = 500;

/// Settings that apply to every operation of an engine.
#[derive(Clone, Debug)]
pub struct EngineOptions {
    /// Files larger than this are skipped (default 1 MiB).
    pub max_file_size: u64,
    /// Queries index an unindexed repository and complete a partial index
    /// (default `true`). Front ends that own indexing themselves (the HTTP
    /// service) turn this off.
    pub auto_index: bool,
    /// Longest a query, pack, refine or graph request may run before it is
    /// stopped with [`CanopyError::TimeBudget`] (default 30 s; the service
    /// uses its request timeout, so no work outlives the answer).
    pub time_budget: std::time::Duration,
    /// How the path given to [`Engine::open`] becomes a root (default
    /// [`RootRule::Named`]: the caller chose it). Front ends use
    /// [`RootRule::Discovered`] for paths they did not get from a person.
    pub root_rule: RootRule,
    /// A static embedding model directory (format: [`crate::embed`]); with
    /// one, context packs use semantic retrieval (default: none).
    pub embedding_model: Option<PathBuf>,
    /// Units of a repository from which semantic search uses an approximate
    /// nearest-neighbour index instead of an exact scan (see
    /// [`crate::UnitVectors`]). `None` (the default) reads
    /// `CANOPY_ANN_MIN_UNITS`, else [`crate::ANN_MIN_UNITS`];
    /// `Some(0)` always uses the index (tests of small repositories do).
    pub ann_min_units: Option<usize>,
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions {
            max_file_size: DEFAULT_MAX_FILE_SIZE,
            auto_index: true,
            time_budget: DEFAULT_TIME_BUDGET,
            root_rule: RootRule::Named,
            embedding_model: None,
            ann_min_units: None,
        }
    }
}

/// See [`Engine::semantic_stats`].
#[derive(Clone, Debug)]
pub struct SemanticStats {
    /// The model's fingerprint.
    pub model: String,
    /// Units with a vector in memory.
    pub units: usize,
    /// Bytes those vectors take.
    pub bytes: usize,
    /// What the last sync did.
    pub last_sync: crate::SyncReport,
    /// Units from which search uses the approximate index.
    pub ann_min_units: usize,
    /// The approximate index, once a search past that size built it.
    pub ann: Option<crate::AnnStats>,
}

/// A repository's Canopy index and the operations on it.
///
/// Cheap to share: clone it (it is an `Arc` inside) or put it behind a
/// reference; every method takes `&self` and is safe to call from many
/// threads.
#[derive(Clone)]
pub struct Engine {
    inner: Arc<Inner>,
}

struct Inner {
    root: PathBuf,
    db_path: PathBuf,
    options: EngineOptions,
    reader: Mutex<Store>,
    /// Held by the index run in progress (runs are serialised).
    index_lock: Mutex<()>,
    /// Which kind of run holds `index_lock` (a [`RunKind`] as `u8`; 0 for
    /// none): a query waits to index its own files only behind the
    /// background completion.
    run_holder: AtomicU8,
    pending_rebuild_note: Mutex<Option<String>>,
    sessions: Mutex<SessionStore>,
    result_sets: Mutex<ResultSets>,
    /// The thread completing a partial (lazily started) index, if any.
    background: Mutex<Option<JoinHandle<Result<IndexReport>>>>,
    /// Queries waiting to index the files they point at: the background
    /// completion yields to them between chunks.
    queries_waiting: std::sync::atomic::AtomicUsize,
    /// How far the background completion is, for runs that wait behind it.
    completion: CompletionProgress,
    /// Unit vectors for semantic retrieval, loaded on first use (or why the
    /// model could not be loaded).
    semantic: Mutex<Option<std::result::Result<crate::semantic::SemanticIndex, String>>>,
    /// What the last sync of the semantic index did (without its blobs).
    last_sync: Mutex<crate::semantic::SyncReport>,
    /// The resolver world's rows, kept between index runs once
    /// [`Engine::keep_resolver_world`] asked for it (a watcher does).
    kept_world: Mutex<Option<crate::graph::resolve::KeptRows>>,
    /// Whether `kept_world` holds a world, as its holder last left it: read
    /// without the lock, which a run or a warm-up holds for as long as it
    /// builds ([`Engine::resolver_world_is_kept`]).
    world_kept: AtomicBool,
    /// Whole-graph results that stay valid for one index state (hotspots).
    graph_cache: crate::graph::GraphCache,
    /// The git history context packs read (kept in memory once
    /// [`Engine::keep_history_log`] asked for it).
    history: crate::context::history::HistoryLog,
}

/// How far the background completion of a partial index is: files to
/// index (0 when none runs) and files done. The completion's chunks count
/// into it as their progress sink.
#[derive(Default)]
struct CompletionProgress {
    total: std::sync::atomic::AtomicU64,
    done: std::sync::atomic::AtomicU64,
}

impl CompletionProgress {
    /// A completion of `total` files starts; it ends (nothing to report)
    /// when the returned guard drops, however the completion leaves.
    fn begin(&self, total: u64) -> CompletionPublished<'_> {
        self.done.store(0, Ordering::SeqCst);
        self.total.store(total, Ordering::SeqCst);
        CompletionPublished(self)
    }

    /// `(done, total)` of the running completion, if one runs.
    fn now(&self) -> Option<(u64, u64)> {
        let total = self.total.load(Ordering::SeqCst);
        (total > 0).then(|| (self.done.load(Ordering::SeqCst).min(total), total))
    }
}

impl IndexProgress for CompletionProgress {
    fn advance(&self, _path: &str, _bytes: u64) {
        self.done.fetch_add(1, Ordering::SeqCst);
    }
}

/// Ends a completion's progress on drop (see [`CompletionProgress::begin`]).
struct CompletionPublished<'a>(&'a CompletionProgress);

impl Drop for CompletionPublished<'_> {
    fn drop(&mut self) {
        self.0.total.store(0, Ordering::SeqCst);
    }
}

/// What a waiting run has passed on of the completion's progress (see
/// [`Inner::lock_index_reporting`]).
#[derive(Default)]
struct ProgressRelay {
    started: bool,
    done: u64,
}

impl ProgressRelay {
    /// Passes the completion's progress since the last call to `progress`:
    /// its total once, then one `advance` per file it indexed.
    fn pass_on(&mut self, completion: &CompletionProgress, progress: &dyn IndexProgress) {
        let Some((done, total)) = completion.now() else {
            return;
        };
        if !self.started {
            self.started = true;
            progress.start(total);
        }
        while self.done < done {
            self.done += 1;
            progress.advance("", 0);
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock cannot leave SQLite state half-written
    // (transactions roll back), so a poisoned lock is safe to reuse.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Who holds an engine's index lock (see `Inner::run_holder`).
#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum RunKind {
    /// A chunk of the background completion of a partial index (at most
    /// [`BACKGROUND_CHUNK`] files): a query may wait for it to index its
    /// own files next.
    Background = 1,
    /// Anything else (a full run, a watcher's batch, a rebuild): queries
    /// do not wait for it.
    Other = 2,
}

/// The index lock, held for one run; says which kind of run holds it.
struct RunGuard<'a> {
    holder: &'a AtomicU8,
    _lock: MutexGuard<'a, ()>,
}

impl Drop for RunGuard<'_> {
    fn drop(&mut self) {
        // Before the lock is released (fields drop after this body).
        self.holder.store(0, Ordering::SeqCst);
    }
}

impl Engine {
    /// Opens the engine for the repository containing `path` (any directory
    /// inside it), creating `.canopy/index.db` if needed. An index with another
    /// schema version is rebuilt (the next [`IndexReport::rebuilt`] says so).
    pub fn open(path: impl AsRef<Path>, options: EngineOptions) -> Result<Engine> {
        let root = locate_root(path.as_ref(), options.root_rule)?;
        let dir = root.join(CANOPY_DIR);
        std::fs::create_dir_all(&dir).map_err(|e| CanopyError::io(&dir, e))?;
        // Keep the index out of `git status` and out of our own discovery.
        let ignore = dir.join(".gitignore");
        if !ignore.exists() {
            std::fs::write(&ignore, "*\n").map_err(|e| CanopyError::io(&ignore, e))?;
        }
        let db_path = dir.join("index.db");
        let (store, rebuilt) = Store::open(&db_path)?;
        Ok(Engine {
            inner: Arc::new(Inner {
                root,
                db_path,
                options,
                reader: Mutex::new(store),
                index_lock: Mutex::new(()),
                run_holder: AtomicU8::new(0),
                pending_rebuild_note: Mutex::new(rebuilt),
                sessions: Mutex::new(SessionStore::default()),
                result_sets: Mutex::new(ResultSets::default()),
                background: Mutex::new(None),
                queries_waiting: std::sync::atomic::AtomicUsize::new(0),
                completion: CompletionProgress::default(),
                semantic: Mutex::new(None),
                last_sync: Mutex::new(Default::default()),
                kept_world: Mutex::new(None),
                world_kept: AtomicBool::new(false),
                graph_cache: Default::default(),
                history: crate::context::history::HistoryLog::with_file(
                    dir.join(crate::context::history_file::FILE_NAME),
                ),
            }),
        })
    }

    /// Keeps the resolver world's rows in memory between this engine's
    /// index runs, so that a run after a small edit reads only the rows of
    /// the files that changed instead of every file's (long-lived processes:
    /// a watcher calls it). The rows are checked against the index before
    /// each run ([`crate::graph::resolve::KeptRows`]), and dropped when this
    /// engine rebuilds the index. The edges are the same either way.
    pub fn keep_resolver_world(&self) {
        lock(&self.inner.kept_world).get_or_insert_with(Default::default);
    }

    /// Builds the kept resolver world in a thread of its own, when
    /// [`Engine::keep_resolver_world`] asked for one and none is kept yet
    /// ([`crate::graph::resolve::KeptRows::warm`]): the first edit after a
    /// watcher starts then updates a world in place instead of building one
    /// from every file's rows (issue 28 item 5). The thread holds the kept
    /// rows' lock while it builds, so an index run that starts meanwhile
    /// waits for it at most as long as it would have spent building the
    /// world itself, and never sees half of one. The cost is the world's
    /// memory from the start instead of from the first edit (`M_repo` in
    /// docs/fleet.md): the watchers of `canopy watch` and `canopy mcp` ask
    /// for it ([`crate::watch::watch`]), and the service for the
    /// repositories it watches (it serves many repositories, most of them
    /// never edited, which do not pay for one). Returns the thread,
    /// or `None` when none could start (the first edit builds the world,
    /// as before).
    pub fn warm_resolver_world(&self) -> Option<JoinHandle<()>> {
        let inner = self.inner.clone();
        let started = std::thread::Builder::new()
            .name("canopy-warm-world".into())
            .spawn(move || {
                let mut kept = lock(&inner.kept_world);
                let Some(kept) = kept.as_mut() else {
                    return;
                };
                if kept.has_world() {
                    return;
                }
                let t0 = std::time::Instant::now();
                let warmed = Store::open(&inner.db_path)
                    .and_then(|(store, _)| kept.warm(&store, &inner.root));
                inner.world_kept.store(kept.has_world(), Ordering::Relaxed);
                match warmed {
                    Ok(()) => tracing::debug!(
                        ms = t0.elapsed().as_millis() as u64,
                        "resolver world built ahead of the first edit"
                    ),
                    // The first pass builds it then, as without the warm-up.
                    Err(e) => tracing::debug!("resolver world not built ahead: {e}"),
                }
            });
        match started {
            Ok(handle) => Some(handle),
            Err(e) => {
                tracing::debug!("no thread to build the resolver world ahead: {e}");
                None
            }
        }
    }

    /// One step of the text index's merging while nothing else runs: the
    /// work a run of a few files leaves (it merges at most
    /// `index::MERGE_PAGES_PER_FILE` pages a file, so no edit pays for a
    /// merge of large segments at once) done by an idle watcher instead of by the
    /// next edits' runs (issue 28 item 5: those steps were the p95 of a
    /// one-line edit). A step writes at most 256 pages, so an edit that
    /// arrives meanwhile waits for one step at most. Returns whether merging
    /// may be left: `false` once a step found nothing to merge, and also,
    /// without doing anything, while a run holds the index (it merges its
    /// own steps; the quiet after the next batch looks again). What readers
    /// see does not change (the same rows, fewer segments), so the
    /// generation does not move.
    pub fn merge_text_while_idle(&self) -> Result<bool> {
        let Some(_guard) = self.inner.try_lock_index(RunKind::Other) else {
            return Ok(false);
        };
        let mut store = match Store::open_for_writing(&self.inner.db_path)? {
            ForWriting::Ready(store) => store,
            // A rebuild is due: its run writes the text index anew.
            ForWriting::Rebuild(_) => return Ok(false),
        };
        let started = std::time::Instant::now();
        let steps = store.merge_text_segments(crate::store::TEXT_MERGE_STEP_PAGES)?;
        if steps > 0 {
            store.release_free_pages()?;
            tracing::debug!(
                ms = started.elapsed().as_millis() as u64,
                "text index merged one step while idle"
            );
        }
        Ok(steps > 0)
    }

    /// Whether a resolver world is kept for the next index run to update,
    /// as the last run or warm-up left it. It never waits for one that is
    /// going (the service's `/metrics` reads it; the tests check that a
    /// watcher's warm-up built one).
    pub fn resolver_world_is_kept(&self) -> bool {
        self.inner.world_kept.load(Ordering::Relaxed)
    }

    /// Keeps the repository's whole git log of one `HEAD` in memory and
    /// answers the `history` strategy of context packs from it (long-lived
    /// processes: the MCP server and the service call it): loaded from
    /// `.canopy/history.bin` when that holds the whole log at `HEAD`, else
    /// read in a thread of its own while requests ask git. The commits are
    /// the same either way.
    pub fn keep_history_log(&self) {
        self.inner.history.keep();
    }

    /// The repository root (absolute).
    pub fn root(&self) -> &Path {
        &self.inner.root
    }

    /// The settings this engine was opened with.
    pub fn options(&self) -> &EngineOptions {
        &self.inner.options
    }

    /// Runs graph queries ([`crate::graph::nav::Graph`]) over one read
    /// snapshot of the index (callers, callees, references, definition, …).
    pub fn graph<R>(
        &self,
        f: impl FnOnce(&crate::graph::nav::Graph<'_>) -> Result<R>,
    ) -> Result<R> {
        self.graph_at(f).map(|(answer, _)| answer)
    }

    /// [`Engine::graph`], also returning the generation of the snapshot
    /// `f` read (what [`crate::model::Freshness::generation`] is for the
    /// other answers), so a front end can name the state it answered from.
    pub fn graph_at<R>(
        &self,
        f: impl FnOnce(&crate::graph::nav::Graph<'_>) -> Result<R>,
    ) -> Result<(R, u64)> {
        let budget = self.inner.options.time_budget;
        // `f` runs once: probe the connection first, so a stale one is
        // reopened before it.
        self.guarded(|| {
            self.inner
                .reader()
                .meta(meta_keys::LAST_INDEXED)
                .map(|_| ())
        })?;
        let store = self.inner.reader();
        let snapshot = store.read_snapshot_within(budget)?;
        let generation = snapshot.generation().map_err(|e| self.diagnose(e))?;
        let graph =
            crate::graph::nav::Graph::with_cache(&snapshot, self.root(), &self.inner.graph_cache);
        f(&graph)
            .map(|answer| (answer, generation))
            .map_err(|e| e.or_budget(budget))
            .map_err(|e| self.diagnose(e))
    }

    /// Answers one graph navigation request ([`crate::graph::request`]) over
    /// one read snapshot. The graph needs the whole repository: callers read
    /// from a partial index would be silently incomplete, so front ends call
    /// [`Engine::index`] first when [`Engine::is_complete`] is false.
    pub fn graph_request(
        &self,
        request: &crate::graph::request::GraphRequest,
    ) -> Result<crate::graph::request::GraphResponse> {
        self.graph_request_at(request).map(|(answer, _)| answer)
    }

    /// [`Engine::graph_request`] with `cap` as the most results an answer
    /// may hold instead of an agent's 500 (the local CLI's `--max-results`:
    /// [`crate::graph::nav::SCRIPT_MAX_RESULTS`]).
    pub fn graph_request_within(
        &self,
        request: &crate::graph::request::GraphRequest,
        cap: usize,
    ) -> Result<crate::graph::request::GraphResponse> {
        request.validate()?;
        self.graph_at(|g| g.run_within(request, cap))
            .map(|(answer, _)| answer)
    }

    /// [`Engine::graph_request`], also returning the generation of the
    /// snapshot it read ([`Engine::graph_at`]).
    pub fn graph_request_at(
        &self,
        request: &crate::graph::request::GraphRequest,
    ) -> Result<(crate::graph::request::GraphResponse, u64)> {
        request.validate()?;
        self.graph_at(|g| g.run(request))
    }

    /// Path of the index database.
    pub fn db_path(&self) -> &Path {
        &self.inner.db_path
    }

    /// Indexes the repository (or the files matching `glob`), incrementally.
    pub fn index(&self, glob: Option<&str>, progress: &dyn IndexProgress) -> Result<IndexReport> {
        self.index_with(
            IndexOptions {
                glob: glob.map(str::to_string),
                max_file_size: self.inner.options.max_file_size,
                only_paths: None,
            },
            progress,
        )
    }

    /// Indexes exactly these repo-relative paths as they are now: new and
    /// changed files are (re)parsed, paths that are gone or no longer listed
    /// leave the index (what [`crate::watch`] does with a batch of events).
    pub fn index_paths(
        &self,
        paths: std::collections::HashSet<String>,
        progress: &dyn IndexProgress,
    ) -> Result<IndexReport> {
        self.index_with(
            IndexOptions {
                glob: None,
                max_file_size: self.inner.options.max_file_size,
                only_paths: Some(paths),
            },
            progress,
        )
    }

    /// Repo-relative paths the index holds (indexed or recorded as skipped).
    pub fn indexed_paths(&self) -> Result<std::collections::HashSet<String>> {
        self.guarded(|| self.inner.reader().indexed_paths())
    }

    fn index_with(
        &self,
        options: IndexOptions,
        progress: &dyn IndexProgress,
    ) -> Result<IndexReport> {
        let first = match self.inner.run(RunKind::Other, options.clone(), progress) {
            Err(CanopyError::Database(e)) => e,
            other => return other,
        };
        // A WAL deleted or replaced under the open read connection leaves
        // the shared-memory index stale until every connection lets go of it:
        // reopen the reader, then try once more.
        tracing::warn!("index run failed ({first}); reopening the index and retrying");
        if let Err(e) = self.reopen_reader() {
            tracing::warn!("cannot reopen the index: {e}");
        }
        match self.inner.run(RunKind::Other, options.clone(), progress) {
            // Damage met while indexing: marked, so the next run rebuilds.
            Err(e @ CanopyError::Database(_)) => match self.diagnose(e) {
                CanopyError::IndexDamaged { .. } => self.inner.run(
                    RunKind::Other,
                    IndexOptions {
                        glob: None,
                        only_paths: None,
                        ..options
                    },
                    progress,
                ),
                e => Err(e),
            },
            other => other,
        }
    }

    /// Builds the index again from the files (`canopy index --rebuild`,
    /// `canopy_index` with `rebuild`, `POST /reindex` with `rebuild`): the
    /// one repair for an index that is damaged in a way the automatic
    /// checks did not see. The new index is built beside the live one,
    /// which every reader keeps answering from until the new one is copied
    /// in, atomically ([`crate::store::swap`]); by whichever process runs
    /// the next index run if this one stops first.
    pub fn rebuild(&self, progress: &dyn IndexProgress) -> Result<IndexReport> {
        Engine::request_rebuild(&self.inner.root)?;
        self.index(None, progress)
    }

    /// Marks the index of the repository at `root` so that its next index
    /// run, by whichever front end, rebuilds it from scratch.
    pub fn request_rebuild(root: &Path) -> Result<()> {
        let db = root.join(CANOPY_DIR).join("index.db");
        crate::store::ask_rebuild(&db)
    }

    /// What is wrong with the index of the repository at `root`, if an
    /// operation found it damaged and no index run has rebuilt it yet.
    pub fn damage_at(root: &Path) -> Option<String> {
        let db = root.join(CANOPY_DIR).join("index.db");
        std::fs::read_to_string(crate::store::damage_marker(&db))
            .ok()
            .map(|d| d.trim().to_string())
    }

    /// What is wrong with the index file, when an earlier operation found it
    /// damaged and the next index run has not rebuilt it yet.
    pub fn damage(&self) -> Option<String> {
        Engine::damage_at(&self.inner.root)
    }

    /// Runs a read operation. On a database error the long-lived read
    /// connection is reopened (a deleted WAL or a file replaced under it
    /// leaves it failing until then) and the operation retried once; an
    /// error that persists is diagnosed ([`Engine::diagnose`]).
    fn guarded<T>(&self, op: impl Fn() -> Result<T>) -> Result<T> {
        match op() {
            Err(CanopyError::Database(first)) => {
                tracing::warn!("index read failed ({first}); reopening the index and retrying");
                if let Err(e) = self.reopen_reader() {
                    return Err(self.diagnose(e));
                }
                op().map_err(|e| self.diagnose(e))
            }
            other => other,
        }
    }

    /// Turns a persistent database error into [`CanopyError::IndexDamaged`]
    /// when `PRAGMA quick_check` finds the file damaged (marking it, so the
    /// next index run rebuilds it); any other error is returned as it is.
    fn diagnose(&self, err: CanopyError) -> CanopyError {
        let CanopyError::Database(_) = &err else {
            return err;
        };
        match crate::store::check_and_mark_damaged(&self.inner.db_path) {
            Ok(Some(detail)) => {
                tracing::error!("the index is damaged: {detail}");
                CanopyError::IndexDamaged { detail }
            }
            Ok(None) => err,
            Err(check) => {
                tracing::warn!("cannot check the index's integrity: {check}");
                err
            }
        }
    }

    /// Replaces the read connection with a new one on the same file.
    ///
    /// The old connection is closed first: when it was the last one on the
    /// file, closing it checkpoints whatever WAL it still holds and resets
    /// the shared-memory index, which is what a deleted WAL needs.
    fn reopen_reader(&self) -> Result<()> {
        let mut reader = lock(&self.inner.reader);
        let old = std::mem::replace(&mut *reader, Store::detached()?);
        if old.is_current() {
            drop(old);
        } else {
            // Another file is at the path now: closing must not touch its log.
            old.close_orphaned();
        }
        *reader = Store::reopen(&self.inner.db_path)?;
        Ok(())
    }

    /// Forces the files matching `glob` (all when `None`) to be re-parsed, then re-indexes them.
    pub fn invalidate(
        &self,
        glob: Option<&str>,
        progress: &dyn IndexProgress,
    ) -> Result<IndexReport> {
        let filter = glob.map(PathFilter::new).transpose()?;
        {
            let _guard = self.inner.lock_index(RunKind::Other);
            // An index waiting to be rebuilt needs no marks: the rebuild
            // parses every file again.
            if let ForWriting::Ready(mut store) = Store::open_for_writing(&self.inner.db_path)? {
                store.invalidate(&|path| filter.as_ref().is_none_or(|f| f.is_match(path)))?;
            }
        }
        self.index(glob, progress)
    }

    /// Index statistics for the repository containing `path`, without
    /// creating anything: a repository with no index yet reports
    /// `indexed: false` (and zeros) instead of getting an empty `.canopy/`.
    /// Read-only front-end commands (`canopy status`, `canopy_status`) use
    /// this.
    pub fn peek_status(path: impl AsRef<Path>, options: EngineOptions) -> Result<Status> {
        let root = locate_root(path.as_ref(), options.root_rule)?;
        if Engine::index_exists(&root) {
            return Engine::open(&root, options)?.status();
        }
        Ok(Status {
            indexed: false,
            schema_version: SCHEMA_VERSION,
            repo_root: root.display().to_string(),
            ..Status::default()
        })
    }

    /// Whether `root` (a repository root) holds an index.
    pub fn index_exists(root: &Path) -> bool {
        root.join(CANOPY_DIR).join("index.db").is_file()
    }

    /// Index statistics.
    pub fn status(&self) -> Result<Status> {
        let mut status = match self.guarded(|| self.status_once()) {
            // Status is how one finds out: it reports the damage, not fails.
            Err(CanopyError::IndexDamaged { .. }) => Status {
                indexed: true,
                schema_version: SCHEMA_VERSION,
                repo_root: self.inner.root.display().to_string(),
                ..Status::default()
            },
            other => other?,
        };
        status.damaged = self.damage();
        Ok(status)
    }

    fn status_once(&self) -> Result<Status> {
        let reader = self.inner.reader();
        // One snapshot: the counts and the coverage agree.
        let store = reader.read_snapshot()?;
        let counts = store.counts()?;
        let last_indexed = store.indexed_at()?;
        let index_coverage = store.coverage()?;
        Ok(Status {
            indexed: true,
            files_indexed: counts.files,
            total_tokens: counts.tokens,
            index_size_bytes: store.size_on_disk(),
            last_indexed,
            schema_version: SCHEMA_VERSION,
            repo_root: self.inner.root.display().to_string(),
            file_discovery: store.meta(meta_keys::FILE_DISCOVERY)?,
            languages: counts.languages,
            skipped: store.skipped_counts()?,
            units: counts.units,
            references: counts.refs,
            source_bytes: counts.bytes,
            index_coverage,
            damaged: None,
        })
    }

    /// Rows that point at nothing (nodes without a file, references without a
    /// unit, full-text rows without a unit, reference names without a
    /// reference). Zero in a consistent index after a finished run; used
    /// by tests.
    pub fn orphan_rows(&self) -> Result<u64> {
        self.inner.reader().orphan_rows()
    }

    /// How many of the totals `status` reads (kept by the schema's
    /// triggers) disagree with a scan of the rows they count. Zero in a
    /// consistent index, whatever happened to the runs; used by tests.
    pub fn totals_drift(&self) -> Result<u64> {
        self.inner.reader().totals_drift()
    }

    /// Pages inside the database file that no table uses. Zero after every
    /// finished run, which hands them back to the file system; used by tests.
    pub fn free_pages(&self) -> Result<u64> {
        self.inner.reader().free_pages()
    }

    /// Whether any index run has finished for this repository (perhaps a partial one).
    pub fn is_indexed(&self) -> Result<bool> {
        Ok(self.inner.reader().meta(meta_keys::LAST_INDEXED)?.is_some())
    }

    /// Whether the index covers every candidate file of the repository.
    pub fn is_complete(&self) -> Result<bool> {
        self.inner.reader().is_complete()
    }

    /// The generation of the index as readers see it now (0 before
    /// anything was indexed). Every answer carries the generation of the
    /// snapshot it read (`freshness.generation`); this is for callers that
    /// want to know whether the index moved.
    pub fn generation(&self) -> Result<u64> {
        self.guarded(|| self.inner.reader().generation())
    }

    /// Makes sure a query can be answered: an unindexed repository is indexed
    /// (predictively, when it has more than [`lazy::LAZY_THRESHOLD`] files:
    /// first the files the query points at); a partial index is completed
    /// on a background thread. Returns the coverage when the index is partial.
    pub fn prepare_for(&self, params: &QueryParams) -> Result<Option<f64>> {
        self.prepare_for_with_progress(params, &NoProgress)
    }

    /// [`Engine::prepare_for`], reporting the synchronous part of indexing to `progress`.
    pub fn prepare_for_with_progress(
        &self,
        params: &QueryParams,
        progress: &dyn IndexProgress,
    ) -> Result<Option<f64>> {
        self.prepare(params, progress)?;
        self.inner.reader().partial_coverage()
    }

    /// The indexing part of [`Engine::prepare_for`]; answers read their
    /// coverage from their own snapshot afterwards.
    fn prepare(&self, params: &QueryParams, progress: &dyn IndexProgress) -> Result<()> {
        if !self.inner.options.auto_index {
            return Ok(());
        }
        if !self.inner.reader().build_started()? {
            // Nothing to answer from: the first build is this query's to
            // run (lazily on a large repository).
            let discovery = discover(&self.inner.root, self.inner.options.max_file_size, None)?;
            if discovery.files.len() <= lazy::LAZY_THRESHOLD {
                self.index(None, progress)?;
            } else {
                let targets = lazy::targets(&discovery.files, params);
                tracing::info!(
                    "large repository ({} files): indexing {} files the query points at first",
                    discovery.files.len(),
                    targets.len()
                );
                self.inner.run(
                    RunKind::Other,
                    IndexOptions {
                        glob: None,
                        max_file_size: self.inner.options.max_file_size,
                        only_paths: Some(targets),
                    },
                    progress,
                )?;
            }
        }
        if self.is_complete()? {
            return Ok(());
        }
        // Partial: what this query points at (its glob, the files its words
        // name) is indexed before it is answered, ahead of the background.
        self.index_targets_first(params, progress)?;
        self.complete_in_background();
        Ok(())
    }

    /// Indexes the not-yet-indexed files `params` points at, now, unless
    /// another run holds the index (then the answer says what it covers).
    fn index_targets_first(
        &self,
        params: &QueryParams,
        progress: &dyn IndexProgress,
    ) -> Result<()> {
        if self.inner.run_holder.load(Ordering::SeqCst) == RunKind::Other as u8 {
            // Not even the listing: the run will not let this query go first.
            return Ok(());
        }
        let discovery = discover(&self.inner.root, self.inner.options.max_file_size, None)?;
        let indexed = self.inner.reader().indexed_paths()?;
        let pending: Vec<_> = discovery
            .files
            .into_iter()
            .filter(|c| !indexed.contains(&c.path))
            .collect();
        let targets = lazy::targets(&pending, params);
        if targets.is_empty() {
            return Ok(());
        }
        let waiting = &self.inner.queries_waiting;
        waiting.fetch_add(1, Ordering::SeqCst);
        let guard = self.inner.lock_index_for_query();
        waiting.fetch_sub(1, Ordering::SeqCst);
        let Some(guard) = guard else {
            tracing::debug!(
                "an index run is under way: answering from what is indexed ({} files the query points at are not yet)",
                targets.len()
            );
            return Ok(());
        };
        tracing::info!(
            "partial index: indexing {} files the query points at first",
            targets.len()
        );
        self.inner
            .run_locked(
                &guard,
                IndexOptions {
                    glob: None,
                    max_file_size: self.inner.options.max_file_size,
                    only_paths: Some(targets),
                },
                progress,
            )
            .map(|_| ())
    }

    /// Starts completing a partial index on a background thread (once at a time).
    pub fn complete_in_background(&self) {
        let mut background = lock(&self.inner.background);
        if background.as_ref().is_some_and(|h| !h.is_finished()) {
            return;
        }
        let inner = Arc::clone(&self.inner);
        *background = Some(std::thread::spawn(move || {
            let result = inner.complete();
            if let Err(e) = &result {
                tracing::warn!("completing the index in the background failed: {e}");
            }
            result
        }));
    }

    /// Waits for background index completion, if any is running.
    pub fn wait_for_background_index(&self) -> Result<Option<IndexReport>> {
        let handle = lock(&self.inner.background).take();
        match handle {
            Some(h) => h
                .join()
                .map_err(|_| CanopyError::Internal("background indexing panicked".into()))?
                .map(Some),
            None => Ok(None),
        }
    }

    /// Runs a query (see [`QueryParams`]). An unindexed repository is indexed first
    /// (see [`Engine::prepare_for`]); `index_coverage` is set while the index is partial.
    pub fn query(&self, params: &QueryParams) -> Result<QueryResult> {
        params.validate()?;
        params.check_text_limits()?;
        self.guarded(|| {
            self.prepare(params, &NoProgress)?;
            let budget = self.inner.options.time_budget;
            let store = self.inner.reader();
            let snapshot = store.read_snapshot_within(budget)?;
            // From the snapshot the answer reads: coverage, generation and
            // handles describe one state of the index.
            let coverage = snapshot.partial_coverage()?;
            let executed =
                execute(self.snapshot_of(&snapshot), params).map_err(|e| e.or_budget(budget))?;
            let mut result = executed.result;
            if let Some(nodes) = executed.keep {
                result.result_set = Some(self.keep_result_set(nodes));
            }
            result.index_coverage = coverage;
            Ok(result)
        })
    }

    /// Builds an evidence pack. `session` names the caller's convergence
    /// memory (handles returned and expanded earlier); `None` means no memory.
    pub fn evidence_pack(
        &self,
        params: &PackParams,
        session: Option<&str>,
    ) -> Result<EvidencePack> {
        params.query.validate()?;
        let memory = session
            .map(|s| lock(&self.inner.sessions).snapshot(s))
            .unwrap_or_default();
        let (mut pack, coverage) = self.guarded(|| {
            self.prepare(&params.query, &NoProgress)?;
            let budget = self.inner.options.time_budget;
            let store = self.inner.reader();
            let snapshot = store.read_snapshot_within(budget)?;
            let coverage = snapshot.partial_coverage()?;
            let mut pack = crate::pack::build(self.snapshot_of(&snapshot), params, &memory)
                .map_err(|e| e.or_budget(budget))?;
            // Freshness: the pack's files, checked against their indexed hash.
            let hashes: HashMap<&str, &str> = pack
                .ranked
                .iter()
                .map(|n| (n.handle.as_str(), n.content_hash.as_str()))
                .collect();
            let mut previews = crate::query::Previews::new(self.snapshot_of(&snapshot));
            let nodes: HashMap<&str, &crate::store::read::NodeRecord> =
                pack.ranked.iter().map(|n| (n.handle.as_str(), n)).collect();
            let mut read = Vec::new();
            for h in &pack.handles {
                read.push(
                    match (hashes.get(h.id.as_str()), nodes.get(h.id.as_str())) {
                        (Some(hash), Some(node)) => (
                            !previews.is_fresh(&h.file_path, hash),
                            previews.signature(node),
                        ),
                        _ => (false, String::new()),
                    },
                );
            }
            for (h, (stale, signature)) in pack.handles.iter_mut().zip(read) {
                h.stale = stale;
                h.preview = signature;
            }
            pack.freshness = Some(crate::query::freshness(&snapshot, &previews)?);
            // Evidence from files changed since indexing is no reason to stop.
            pack.mark_stale();
            Ok((pack, coverage))
        })?;
        if let Some(coverage) = coverage {
            pack.mark_partial(coverage);
        }
        let ranked = std::mem::take(&mut pack.ranked);
        if params.query.result_set == Some(true) {
            pack.result_set = Some(self.keep_result_set(ranked));
        }
        if let Some(s) = session {
            let mut sessions = lock(&self.inner.sessions);
            sessions.record_returned(s, pack.handles.iter().map(|h| h.id.clone()));
            sessions.get_mut(s).packs += 1;
        }
        Ok(pack)
    }

    /// Builds a context pack: the code a task needs, cut to a token budget
    /// (see [`crate::context`]). Indexes an unindexed repository first, like
    /// [`Engine::query`]; semantic candidates come from the engine's
    /// embedding model when one is configured.
    pub fn context(
        &self,
        params: &crate::context::ContextParams,
    ) -> Result<crate::context::ContextPack> {
        params.validate()?;
        let probe = QueryParams {
            pattern: Some(params.task.clone()),
            ..QueryParams::default()
        };
        let (pack, new_vectors) = self.guarded(|| {
            let t = crate::timing::mark();
            self.prepare(&probe, &NoProgress)?;
            let t = crate::timing::phase("context.prepare", t);
            let budget = self.inner.options.time_budget;
            let store = self.inner.reader();
            let snapshot = store.read_snapshot_within(budget)?;
            let coverage = snapshot.partial_coverage()?;
            let t = crate::timing::phase("context.snapshot", t);
            // Freshness: every fragment's file was read and hash-checked by the packer.
            let finish = |pack: &mut crate::context::ContextPack| -> Result<()> {
                let mut checked: Vec<&str> = pack
                    .fragments
                    .iter()
                    .map(|f| f.file_path.as_str())
                    .collect();
                checked.sort();
                checked.dedup();
                let mut stale: Vec<String> = pack
                    .fragments
                    .iter()
                    .filter(|f| f.stale)
                    .map(|f| f.file_path.clone())
                    .collect();
                stale.sort();
                stale.dedup();
                pack.freshness = Some(crate::query::freshness_of(&snapshot, stale, checked.len())?);
                pack.index_coverage = coverage;
                Ok(())
            };
            std::thread::scope(|scope| {
                let mut beside = self.search_beside(scope, &snapshot, params)?;
                let mut new_vectors = Vec::new();
                // Called by the semantic strategy once the rankings that need
                // no vectors are done (`strategies::gather`).
                let mut semantic = || -> Result<crate::context::SemanticInput> {
                    let t = crate::timing::mark();
                    // A panic there, or a vector file that could not answer:
                    // the search below answers, as it would have.
                    if let Some(Ok(Some(hits))) = beside.take().map(|thread| thread.join()) {
                        crate::timing::phase("context.semantic_wait", t);
                        return Ok(crate::context::SemanticInput {
                            hits,
                            skipped: None,
                        });
                    }
                    let (input, rows) = self.semantic_input(&snapshot, params)?;
                    crate::timing::phase("context.semantic", t);
                    new_vectors = rows;
                    Ok(input)
                };
                let pack = crate::context::build(
                    self.snapshot_of(&snapshot),
                    params,
                    &mut semantic,
                    &self.inner.history,
                    &finish,
                )
                .map_err(|e| e.or_budget(budget))?;
                crate::timing::phase("context.build", t);
                Ok((pack, new_vectors))
            })
        })?;
        self.store_vectors(new_vectors);
        Ok(pack)
    }

    /// A one-off fused request's semantic search in a thread of its own
    /// while the other strategies rank (issue 31 item 6): from the vector
    /// file of the snapshot's index state (`SemanticIndex::search_file_once`),
    /// which reads no index, so the model's load, the task's embedding and
    /// the scan (about a fifth of a one-off fused call's CPU on Django) need
    /// not wait for the rankings, nor they for it, on two cores. The thread
    /// answers `None` when that file cannot answer; the request's own
    /// search then runs as before. No thread (`None`) for a strategy that
    /// ranks nothing else meanwhile, for a process that keeps what it
    /// reads (a server: its first sync keeps the vectors), without a
    /// configured model, before the index has a state stamp, or when no
    /// thread can start.
    #[allow(clippy::type_complexity)]
    fn search_beside<'scope>(
        &'scope self,
        scope: &'scope std::thread::Scope<'scope, '_>,
        store: &Store,
        params: &crate::context::ContextParams,
    ) -> Result<Option<std::thread::ScopedJoinHandle<'scope, Option<Vec<(i64, f32)>>>>> {
        if params.strategy.unwrap_or_default() != crate::context::Strategy::Fused
            || self.inner.history.is_kept()
            || self.inner.options.embedding_model.is_none()
        {
            return Ok(None);
        }
        let Some(stamp) = store.state_stamp()? else {
            return Ok(None);
        };
        let (generation, db_path) = (store.generation()?, store.path().to_path_buf());
        let text = crate::context::semantic_query(&params.task, params.focus.as_deref());
        let search = move || {
            let t = crate::timing::mark();
            let mut state = self.inner.semantic_index()?;
            crate::timing::phase("semantic.model_load", t);
            let index = state.as_mut()?.as_mut().ok()?;
            index.search_file_once(&db_path, &stamp, generation, &text, 40)
        };
        Ok(std::thread::Builder::new()
            .name("canopy-semantic".into())
            .spawn_scoped(scope, search)
            .ok())
    }

    /// Semantic candidates for a context pack (empty, with the reason, when
    /// no model is configured).
    fn semantic_input(
        &self,
        store: &Store,
        params: &crate::context::ContextParams,
    ) -> Result<(
        crate::context::SemanticInput,
        Vec<crate::store::write::UnitVectorRow>,
    )> {
        use crate::context::{SemanticInput, Strategy};
        let skipped = |why: String| SemanticInput {
            hits: Vec::new(),
            skipped: Some(why),
        };
        if !matches!(
            params.strategy.unwrap_or_default(),
            Strategy::Semantic | Strategy::Fused
        ) {
            return Ok((SemanticInput::default(), Vec::new()));
        }
        let t = crate::timing::mark();
        let Some(mut state) = self.inner.semantic_index() else {
            return Ok((skipped("no embedding model configured".into()), Vec::new()));
        };
        crate::timing::phase("semantic.model_load", t);
        let index = match state.as_mut() {
            Some(Ok(index)) => index,
            Some(Err(why)) => return Ok((skipped(why.clone()), Vec::new())),
            None => return Ok((skipped("the model is not loaded".into()), Vec::new())),
        };
        let text = crate::context::semantic_query(&params.task, params.focus.as_deref());
        // A process that does not keep the history log is not long-lived:
        // its first search scores the stored vectors without keeping them.
        if !self.inner.history.is_kept()
            && let Some(hits) = index.search_once(self.snapshot_of(store), &text, 40)?
        {
            return Ok((
                SemanticInput {
                    hits,
                    skipped: None,
                },
                Vec::new(),
            ));
        }
        let mut report = index.sync(self.snapshot_of(store))?;
        let new_rows = std::mem::take(&mut report.new_rows);
        *lock(&self.inner.last_sync) = report;
        Ok((
            SemanticInput {
                hits: index.search(&text, 40),
                skipped: None,
            },
            new_rows,
        ))
    }

    /// Semantic retrieval's state: the model, the units with a vector, and
    /// what the last sync did (embedded, loaded from the index, removed).
    /// `None` without a configured model; the load error when it failed.
    pub fn semantic_stats(&self) -> Option<std::result::Result<SemanticStats, String>> {
        let state = self.inner.semantic_index()?;
        Some(match state.as_ref()? {
            Ok(index) => Ok(SemanticStats {
                model: index.fingerprint().to_string(),
                units: index.len(),
                bytes: index.bytes(),
                last_sync: lock(&self.inner.last_sync).clone(),
                ann_min_units: index.vectors().ann_min_units(),
                ann: index.vectors().ann_stats(),
            }),
            Err(e) => Err(e.clone()),
        })
    }

    /// Stores vectors computed while answering (files indexed before a
    /// model was configured), so the next process loads them.
    fn store_vectors(&self, rows: Vec<crate::store::write::UnitVectorRow>) {
        if rows.is_empty() {
            return;
        }
        let fingerprint = match self.inner.semantic_index().as_deref() {
            Some(Some(Ok(index))) => index.fingerprint().to_string(),
            _ => return,
        };
        // A reader never waits for a writer: while a run holds the index,
        // these vectors stay in memory only (the next run that re-parses a
        // file stores its vectors; a new process computes the rest again).
        let Some(_guard) = self.inner.try_lock_index(RunKind::Other) else {
            return;
        };
        let written = match Store::open_for_writing(&self.inner.db_path) {
            Ok(ForWriting::Ready(mut store)) => store.write_unit_vectors(&fingerprint, &rows),
            Ok(ForWriting::Rebuild(_)) => Ok(()),
            Err(e) => Err(e),
        };
        if let Err(e) = written {
            tracing::warn!("could not store unit vectors: {e}");
        }
    }

    /// Keeps ranked candidates as a result set; returns its id.
    pub(crate) fn keep_result_set(&self, items: Vec<crate::store::read::NodeRecord>) -> String {
        lock(&self.inner.result_sets).insert(items)
    }

    /// Refines a result set server-side: filter by glob, kind or term,
    /// intersect with another query, page. Returns a new result set id.
    pub fn refine(&self, params: &RefineParams) -> Result<RefineResult> {
        self.guarded(|| {
            let budget = self.inner.options.time_budget;
            let store = self.inner.reader();
            let snapshot = store.read_snapshot_within(budget)?;
            let mut sets = lock(&self.inner.result_sets);
            crate::resultset::refine(&mut sets, self.snapshot_of(&snapshot), params)
                .map_err(|e| e.or_budget(budget))
        })
    }

    /// [`Engine::expand`], remembering the expansion in the session's convergence memory.
    pub fn expand_in_session<S: AsRef<str>>(
        &self,
        ids: &[S],
        session: Option<&str>,
    ) -> Result<Vec<Expansion>> {
        let out = self.expand(ids)?;
        if let Some(s) = session {
            lock(&self.inner.sessions).record_expanded(s, out.iter().map(|e| e.handle_id.clone()));
        }
        Ok(out)
    }

    /// Expands handles to their exact text, in request order, without duplicates.
    ///
    /// Fails with [`CanopyError::HandleNotFound`] for an unknown id and
    /// [`CanopyError::StaleIndex`] when the file changed since it was indexed.
    pub fn expand<S: AsRef<str>>(&self, ids: &[S]) -> Result<Vec<Expansion>> {
        self.guarded(|| {
            let store = self.inner.reader();
            let snapshot = store.read_snapshot()?;
            self.snapshot_of(&snapshot).expand(ids)
        })
    }

    /// The snapshot operations read through (see [`crate::snapshot`]).
    fn snapshot_of<'a>(&'a self, store: &'a Store) -> Snapshot<'a> {
        Snapshot::new(store, &self.inner.root)
    }
}

impl Inner {
    /// The semantic index, loading the model on first use; `None` without
    /// a configured model, `Err` (the reason) when it cannot be loaded.
    fn semantic_index(
        &self,
    ) -> Option<MutexGuard<'_, Option<std::result::Result<crate::semantic::SemanticIndex, String>>>>
    {
        let model_dir = self.options.embedding_model.as_ref()?;
        let mut state = lock(&self.semantic);
        if state.is_none() {
            let ann_min_units = self
                .options
                .ann_min_units
                .unwrap_or_else(ann_min_units_from_env);
            *state = Some(
                crate::embed::StaticModel::load(model_dir)
                    .map(|model| {
                        let mut index = crate::semantic::SemanticIndex::new(model);
                        index.set_ann_min_units(ann_min_units);
                        // A request never waits for the graph: it scans
                        // until the graph is ready.
                        index.set_build_in_background(true);
                        index
                    })
                    .map_err(|e| e.to_string()),
            );
        }
        Some(state)
    }

    /// Embeds the units the last index run wrote and stores their vectors.
    fn embed_indexed(&self, store: &mut Store) -> Result<()> {
        let Some(mut state) = self.semantic_index() else {
            return Ok(());
        };
        let Some(Ok(index)) = state.as_mut() else {
            return Ok(());
        };
        let started = std::time::Instant::now();
        let mut report = index.sync(Snapshot::new(store, &self.root))?;
        if !report.new_rows.is_empty() {
            store.write_unit_vectors(index.fingerprint(), &report.new_rows)?;
            report.new_rows.clear();
            tracing::debug!(
                files = report.files_embedded,
                units = report.units_embedded,
                ms = started.elapsed().as_millis() as u64,
                "embedded units"
            );
        }
        *lock(&self.last_sync) = report;
        Ok(())
    }

    /// The read connection, reopened first when it no longer reads the
    /// index at its path: a placeholder for an index that was waiting to be
    /// rebuilt, or a file replaced under it (issue N9: deleted and created
    /// again by an older Canopy or by hand; the connection would read the
    /// deleted file for as long as it lives). One `stat` per call.
    fn reader(&self) -> MutexGuard<'_, Store> {
        let mut store = lock(&self.reader);
        if !store.is_current() {
            match Store::open(&self.db_path) {
                Ok((fresh, _)) => {
                    let old = std::mem::replace(&mut *store, fresh);
                    old.close_orphaned();
                }
                Err(e) => tracing::warn!("cannot reopen the index: {e}"),
            }
        }
        store
    }

    /// Takes the index lock for a run of `kind`, waiting for the run in
    /// progress.
    fn lock_index(&self, kind: RunKind) -> RunGuard<'_> {
        let guard = lock(&self.index_lock);
        self.run_holder.store(kind as u8, Ordering::SeqCst);
        RunGuard {
            holder: &self.run_holder,
            _lock: guard,
        }
    }

    /// The index lock if no run holds it.
    fn try_lock_index(&self, kind: RunKind) -> Option<RunGuard<'_>> {
        let guard = match self.index_lock.try_lock() {
            Ok(guard) => guard,
            Err(TryLockError::Poisoned(e)) => e.into_inner(),
            Err(TryLockError::WouldBlock) => return None,
        };
        self.run_holder.store(kind as u8, Ordering::SeqCst);
        Some(RunGuard {
            holder: &self.run_holder,
            _lock: guard,
        })
    }

    /// The index lock for a query that wants its own files indexed: it
    /// waits while the background completion holds it (a chunk at most;
    /// the completion lets waiting queries go next), and gives up (`None`)
    /// when any other run does: readers never wait for those.
    fn lock_index_for_query(&self) -> Option<RunGuard<'_>> {
        loop {
            if let Some(guard) = self.try_lock_index(RunKind::Other) {
                return Some(guard);
            }
            // 0: the lock was just taken and its holder not yet named.
            let holder = self.run_holder.load(Ordering::SeqCst);
            if holder == RunKind::Other as u8 {
                return None;
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    }

    /// Completes a partial index in chunks of [`BACKGROUND_CHUNK`] files,
    /// letting queries that wait to index their own files go first between
    /// chunks, then with one full run (which finds every file unchanged and
    /// records the index as complete).
    fn complete(&self) -> Result<IndexReport> {
        let discovery = discover(&self.root, self.options.max_file_size, None)?;
        let indexed = self.reader().indexed_paths()?;
        let pending: Vec<String> = discovery
            .files
            .into_iter()
            .map(|c| c.path)
            .filter(|p| !indexed.contains(p))
            .collect();
        let _published = self.completion.begin(pending.len() as u64);
        for chunk in pending.chunks(BACKGROUND_CHUNK) {
            while self.queries_waiting.load(Ordering::SeqCst) > 0 {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            if self.reader().is_complete()? {
                // Another run (a full one, another process) finished it.
                break;
            }
            self.run(
                RunKind::Background,
                IndexOptions {
                    glob: None,
                    max_file_size: self.options.max_file_size,
                    only_paths: Some(chunk.iter().cloned().collect()),
                },
                &self.completion,
            )?;
        }
        self.run(
            RunKind::Other,
            IndexOptions {
                glob: None,
                max_file_size: self.options.max_file_size,
                only_paths: None,
            },
            &NoProgress,
        )
    }

    /// One index run with a fresh writer connection; runs are serialised.
    fn run(
        &self,
        kind: RunKind,
        options: IndexOptions,
        progress: &dyn IndexProgress,
    ) -> Result<IndexReport> {
        let guard = self.lock_index_reporting(kind, progress);
        self.run_locked(&guard, options, progress)
    }

    /// The index lock for a run, waiting as long as it takes. While the
    /// background completion holds it, the completion's progress goes to
    /// `progress` as if it were this run's: a run that waits behind it (a
    /// graph call needs the whole index) would otherwise wait silently for
    /// up to the whole completion, on a large repository many seconds with
    /// no `notifications/progress`. Polled, not queued on the lock: the
    /// completion takes the lock again between its chunks, so a queued
    /// waiter would wait as long, and could say nothing meanwhile.
    fn lock_index_reporting(&self, kind: RunKind, progress: &dyn IndexProgress) -> RunGuard<'_> {
        let mut relay = ProgressRelay::default();
        loop {
            if let Some(guard) = self.try_lock_index(kind) {
                return guard;
            }
            relay.pass_on(&self.completion, progress);
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    /// [`Inner::run`] once the caller holds the index lock: an incremental
    /// run on the live index, or a rebuild beside it when it must be rebuilt.
    fn run_locked(
        &self,
        _held: &RunGuard<'_>,
        options: IndexOptions,
        progress: &dyn IndexProgress,
    ) -> Result<IndexReport> {
        match Store::open_for_writing(&self.db_path)? {
            ForWriting::Ready(mut store) => self.run_in_place(&mut store, &options, progress),
            ForWriting::Rebuild(_) => self.rebuild_beside(options, progress),
        }
    }

    /// An ordinary run into the live index: incremental, with the kept
    /// resolver world, then the rebuild note (if a rebuild preceded it) and
    /// the embeddings of what it wrote.
    fn run_in_place(
        &self,
        store: &mut Store,
        options: &IndexOptions,
        progress: &dyn IndexProgress,
    ) -> Result<IndexReport> {
        let mut kept = lock(&self.kept_world);
        let run = run_index(&self.root, store, options, progress, kept.as_mut());
        self.world_kept.store(
            kept.as_ref().is_some_and(|k| k.has_world()),
            Ordering::Relaxed,
        );
        drop(kept);
        let mut report = run?;
        report.rebuilt = lock(&self.pending_rebuild_note).take();
        self.embed_after_run(store, &report);
        Ok(report)
    }

    /// Rebuilds the index in a side file while readers keep the live one,
    /// then swaps it in atomically ([`crate::store::swap`]).
    fn rebuild_beside(
        &self,
        options: IndexOptions,
        progress: &dyn IndexProgress,
    ) -> Result<IndexReport> {
        let mut side = SideIndex::create(&self.db_path)?;
        // Another process may have rebuilt it while this one waited for the
        // rebuild lock: then this is an ordinary run.
        let rebuild: Rebuild = match Store::open_for_writing(&self.db_path)? {
            ForWriting::Rebuild(now) => now,
            ForWriting::Ready(mut store) => {
                drop(side);
                return self.run_in_place(&mut store, &options, progress);
            }
        };
        tracing::warn!("{}", rebuild.reason);
        // A working index is replaced only by a complete one. One nobody can
        // read (another schema, a garbage file) is a first build: what this
        // run asked for (a lazy start) is better than nothing.
        let options = if rebuild.live_usable {
            IndexOptions {
                glob: None,
                only_paths: None,
                ..options
            }
        } else {
            options
        };
        // Rows read from the index being replaced are not kept (they would
        // be checked against the new one and read again anyway).
        if let Some(kept) = lock(&self.kept_world).as_mut() {
            *kept = Default::default();
            self.world_kept.store(false, Ordering::Relaxed);
        }
        let mut report = run_index(&self.root, side.store_mut()?, &options, progress, None)?;
        let generation = side.swap_into_live()?;
        rebuild.clear_markers()?;
        tracing::info!("the rebuilt index is live (generation {generation})");
        *lock(&self.pending_rebuild_note) = None;
        report.rebuilt = Some(rebuild.reason);
        if let Ok(ForWriting::Ready(mut store)) = Store::open_for_writing(&self.db_path) {
            self.embed_after_run(&mut store, &report);
        }
        Ok(report)
    }

    /// Embedding is part of indexing when a model is configured; a failure
    /// there costs semantic retrieval, never the index run.
    ///
    /// A run that changed no file does not load the model for it: a one-off
    /// `canopy context` with a keyword-only strategy would otherwise pay the
    /// model's load on every call (issue 31 item 6). Vectors still missing
    /// (a model configured after the files were indexed) are embedded by the
    /// first semantic request, which loads the model anyway.
    fn embed_after_run(&self, store: &mut Store, report: &IndexReport) {
        let unchanged =
            report.files_indexed == 0 && report.files_removed == 0 && report.rebuilt.is_none();
        if unchanged && lock(&self.semantic).is_none() {
            return;
        }
        if let Err(e) = self.embed_indexed(store) {
            tracing::warn!("embedding the indexed units failed: {e}");
        }
    }
}

/// `CANOPY_ANN_MIN_UNITS` when set to a number, else
/// [`crate::semantic::ANN_MIN_UNITS`] (a value that is not a number is
/// reported and ignored: a typo must not turn the index on or off).
fn ann_min_units_from_env() -> usize {
    match std::env::var("CANOPY_ANN_MIN_UNITS") {
        Ok(v) => v.trim().parse().unwrap_or_else(|_| {
            tracing::warn!("CANOPY_ANN_MIN_UNITS={v:?} is not a number of units; ignored");
            crate::semantic::ANN_MIN_UNITS
        }),
        Err(_) => crate::semantic::ANN_MIN_UNITS,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records what an index run reports.
    #[derive(Default)]
    struct Recorded(Mutex<Vec<String>>);

    impl IndexProgress for Recorded {
        fn start(&self, to_parse: u64) {
            lock(&self.0).push(format!("start {to_parse}"));
        }
        fn advance(&self, path: &str, _bytes: u64) {
            lock(&self.0).push(format!("advance {path}"));
        }
    }

    impl Recorded {
        fn events(&self) -> Vec<String> {
            lock(&self.0).clone()
        }
    }

    #[test]
    fn a_run_waiting_behind_the_background_completion_reports_its_progress() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("a.py"), "def a():\n    return 1\n").expect("write");
        let engine = Engine::open(dir.path(), EngineOptions::default()).expect("open");
        let inner = &engine.inner;
        let seen = Recorded::default();
        std::thread::scope(|scope| {
            // The completion holds the lock, 3 files to go.
            let held = inner.lock_index(RunKind::Background);
            let published = inner.completion.begin(3);
            let waiting = scope.spawn(|| engine.index(None, &seen));
            inner.completion.advance("x.py", 1);
            inner.completion.advance("y.py", 1);
            // Until the waiting run has passed both on (a deadline for a
            // hang, not a timing claim).
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
            while seen.events().len() < 3 {
                assert!(std::time::Instant::now() < deadline, "{:?}", seen.events());
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            assert_eq!(seen.events(), ["start 3", "advance ", "advance "]);
            assert!(!waiting.is_finished(), "the run went on without the lock");
            inner.completion.advance("z.py", 1);
            drop(published);
            drop(held);
            let report = waiting.join().expect("join").expect("index");
            assert_eq!(report.files_indexed, 1);
        });
        // Then its own run: the one file.
        let events = seen.events();
        assert_eq!(events[..3], ["start 3", "advance ", "advance "]);
        assert!(
            events[3..].iter().any(|e| e == "advance a.py"),
            "{events:?}"
        );
    }

    #[test]
    fn formats_rfc3339() {
        assert_eq!(rfc3339_utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339_utc(1_795_261_445), "2026-11-21T11:44:05Z");
        assert_eq!(rfc3339_utc(951_782_400), "2000-02-29T00:00:00Z");
    }
}
