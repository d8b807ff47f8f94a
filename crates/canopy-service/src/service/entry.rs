//! One registered repository's state: [`RepoEntry`] (its engine, opened on
//! first use; its record and running pass under one lock; its watcher and
//! index lag) and what a running pass reports ([`RunProgress`]).

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use canopy_client::api::{RepoView, RunProgressView};
use canopy_core::Engine;
use canopy_core::cancel::CancelFlag;
use canopy_core::engine::rfc3339_utc;
use canopy_core::index::IndexProgress;
use canopy_fleet::Fence;

use super::lock;
use crate::config::Config;
use crate::error::ApiError;
use crate::registry::RepoRecord;

/// Counts a running pass's files (the engine calls it on its writer
/// thread) and, in fleet mode, stops the pass between files once the
/// lease it runs under lapses.
#[derive(Default)]
pub struct RunProgress {
    total: AtomicU64,
    done: AtomicU64,
    /// Fleet mode: the lease the running pass publishes under, and the
    /// pass's cancellation flag, raised after a file once the lease is no
    /// longer valid (a node paused past its lease stops at its next file).
    fence: Mutex<Option<(Fence, CancelFlag)>>,
}

impl RunProgress {
    pub(super) fn reset(&self) {
        self.total.store(0, Ordering::Relaxed);
        self.done.store(0, Ordering::Relaxed);
    }

    /// Raises `flag` after the next file once `fence` is no longer valid
    /// (until [`RunProgress::unwatch`]).
    pub(super) fn watch(&self, fence: Fence, flag: CancelFlag) {
        *lock(&self.fence) = Some((fence, flag));
    }

    /// Ends [`RunProgress::watch`].
    pub(super) fn unwatch(&self) {
        *lock(&self.fence) = None;
    }
}

impl IndexProgress for RunProgress {
    fn start(&self, to_parse: u64) {
        self.total.store(to_parse, Ordering::Relaxed);
    }
    fn advance(&self, _path: &str, _bytes: u64) {
        let done = self.done.fetch_add(1, Ordering::Relaxed) + 1;
        if let Some((fence, flag)) = lock(&self.fence).as_ref()
            && !fence.is_valid()
        {
            flag.cancel();
        }
        if let Some(hold) = RunHold::from_env() {
            hold.wait(done);
        }
    }
}

/// Test-only environment variable: a directory through which a test holds
/// an index run part-way, between files, so it can read the service at
/// that point on purpose instead of hoping a run is still going (issue 32:
/// answers across a rebuild). Never set it in production.
pub const RUN_HOLD_DIR_ENV: &str = "CANOPY_TEST_RUN_HOLD_DIR";

/// The test-only run hold ([`RUN_HOLD_DIR_ENV`]). While the file `hold`
/// exists in the directory and holds a number N, a run that has just
/// counted its N-th file (or a later one) writes `held` (that count),
/// waits until `hold` is removed, removes `held` and goes on. It waits on
/// the engine's writer thread, between files: the batches before it are
/// committed (into the side file, for a rebuild), the next not begun.
struct RunHold {
    armed: PathBuf,
    held: PathBuf,
}

impl RunHold {
    /// The hold, when the variable is set (read once; a warning says so).
    fn from_env() -> Option<&'static RunHold> {
        static HOLD: std::sync::OnceLock<Option<RunHold>> = std::sync::OnceLock::new();
        HOLD.get_or_init(|| {
            let dir = PathBuf::from(std::env::var_os(RUN_HOLD_DIR_ENV)?);
            tracing::warn!(
                dir = %dir.display(),
                "{RUN_HOLD_DIR_ENV} is set: a test may hold index runs part-way"
            );
            Some(RunHold {
                armed: dir.join("hold"),
                held: dir.join("held"),
            })
        })
        .as_ref()
    }

    /// Blocks while the hold is armed for `done` files (on the writer thread).
    fn wait(&self, done: u64) {
        let Ok(at) = std::fs::read_to_string(&self.armed) else {
            return;
        };
        if at.trim().parse::<u64>().is_ok_and(|at| done < at) {
            return;
        }
        if let Err(e) = std::fs::write(&self.held, format!("{done}\n")) {
            tracing::warn!(
                "{RUN_HOLD_DIR_ENV}: cannot write {}: {e}",
                self.held.display()
            );
        }
        while self.armed.exists() {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = std::fs::remove_file(&self.held);
    }
}

/// The running pass of a repository.
#[derive(Clone, Debug)]
pub(super) struct RunInfo {
    pub(super) glob: Option<String>,
    /// Only these repo-relative paths (a watcher's batch), when set.
    pub(super) paths: Option<HashSet<String>>,
    pub(super) commit_sha: Option<String>,
    pub(super) started: Instant,
    /// An earlier run left unaccounted changes: bump on completion regardless.
    pub(super) carry_bump: bool,
    /// Started to recover from a failure or an interrupted run.
    pub(super) recovering: bool,
}

#[derive(Debug)]
pub(super) struct RepoState {
    pub(super) record: RepoRecord,
    pub(super) run: Option<RunInfo>,
    /// A follow-up run is queued, over this scope.
    pub(super) rerun: Option<RunScope>,
    /// The service generations given to index states since the last
    /// complete one (see [`StateNames`]).
    pub(super) names: StateNames,
}

/// [`RepoState::judge`]: each variant carries the current generation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Judged {
    /// It names the state the index is in.
    Current(u64),
    /// It names a state of the running pass, or the one it started from.
    DuringRun(u64),
    /// This service never gave it (a client bug: 400).
    Future(u64),
    /// It names a state the index has left (409 `stale_generation`).
    Stale(u64),
}

/// Which service generation names which index state (issue 32, N2: a
/// generation names exactly what a reader sees).
///
/// The engine's index moves its own generation with every commit that
/// changes what readers see (a run commits batch by batch), while the
/// service's generation counts complete runs. An answer read from the
/// state the last complete run left is named by `record.generation`; an
/// answer read from any other state (a run's committed batches, a failed
/// run's remains, a write the service did not make) is named by a
/// generation of its own, given the first time an answer reads that state:
/// the next one above every generation given so far. The run's completion
/// then publishes a generation above all of them, so no generation ever
/// names two states. Nothing is given while nobody reads a changing index,
/// so generations stay one per complete run when no answer overlaps a run.
///
/// Kept in memory: after a restart (or when a fleet node adopts a
/// repository) the state the record names is not known until an answer
/// reads the index with no run going and no unfinished run recorded; until
/// then every state read gets a generation of its own.
#[derive(Debug, Default)]
pub(super) struct StateNames {
    /// The engine generation of the state `record.generation` names.
    complete: Option<u64>,
    /// Engine generations read since, each with the service generation it
    /// was given (ascending service generations; a handful per run: at
    /// most one per committed batch that an answer read).
    since: Vec<(u64, u64)>,
    /// A generation given since the last save, to be saved before the
    /// answer carrying it leaves (`RepoRecord::named_up_to`).
    unsaved: Option<u64>,
}

impl StateNames {
    /// The highest service generation given since the last complete run.
    pub(super) fn last_given(&self) -> Option<u64> {
        self.since.last().map(|&(_, name)| name)
    }

    /// Whether `generation` names a state given since the last complete run.
    pub(super) fn gave(&self, generation: u64) -> bool {
        self.since.iter().any(|&(_, name)| name == generation)
    }

    /// After a complete run: `engine_generation` (when it could be read) is
    /// the state the record's new generation names.
    pub(super) fn completed(&mut self, engine_generation: Option<u64>) {
        self.complete = engine_generation;
        self.since.clear();
    }

    /// The generation given since the last call, if one was: the caller
    /// saves it (`Registry::note_named`).
    pub(super) fn take_unsaved(&mut self) -> Option<u64> {
        self.unsaved.take()
    }

    /// Forgets which state the record names (a fleet node adopted the
    /// repository: its index may be in any state).
    pub(super) fn forget(&mut self) {
        self.complete = None;
        self.since.clear();
    }
}

impl RepoState {
    /// The service generation naming the index state whose engine
    /// generation is `engine_generation` (see [`StateNames`]).
    pub(super) fn name_state(&mut self, engine_generation: u64) -> u64 {
        let complete = self.record.generation;
        let settled = self.run.is_none() && !self.record.dirty;
        match self.names.complete {
            Some(known) if known == engine_generation => return complete,
            // Read with nothing running and nothing left unfinished: the
            // index is the state the last complete run left.
            None if settled && self.names.since.is_empty() => {
                self.names.complete = Some(engine_generation);
                return complete;
            }
            _ => {}
        }
        if let Some(&(_, name)) = self
            .names
            .since
            .iter()
            .find(|&&(state, _)| state == engine_generation)
        {
            return name;
        }
        // Above every generation given, by this process or (saved in the
        // record) by one that stopped in the middle of a run.
        let name = self.newest_given() + 1;
        self.names.since.push((engine_generation, name));
        self.record.named_up_to = name;
        self.names.unsaved = Some(name);
        name
    }

    /// The service generation naming the index state whose engine
    /// generation is `engine_generation`, if that state already has one:
    /// the complete generation when the index is (or plainly is still) the
    /// state the last complete run left, or the generation an answer gave
    /// it. `None` for a state no answer has read yet. Read-only, unlike
    /// [`Self::name_state`]: a status poll observes and never uses up a
    /// generation number (each one given must be saved, and the next
    /// complete run must go above it).
    pub(super) fn peek_state(&self, engine_generation: u64) -> Option<u64> {
        let settled = self.run.is_none() && !self.record.dirty;
        match self.names.complete {
            Some(known) if known == engine_generation => return Some(self.record.generation),
            None if settled && self.names.since.is_empty() => return Some(self.record.generation),
            _ => {}
        }
        self.names
            .since
            .iter()
            .find(|&&(state, _)| state == engine_generation)
            .map(|&(_, name)| name)
    }

    /// How a generation a client passes back (from an earlier answer)
    /// stands against the index now (`engine_generation`).
    pub(super) fn judge(&mut self, given: u64, engine_generation: u64) -> Judged {
        let current = self.name_state(engine_generation);
        if given == current {
            Judged::Current(current)
        } else if given > self.newest_given() {
            Judged::Future(current)
        } else if self.run.is_some() && (given == self.record.generation || self.names.gave(given))
        {
            // A state of the running pass (or the one it started from): as
            // before, the core checks each handle's file against the index.
            Judged::DuringRun(current)
        } else {
            Judged::Stale(current)
        }
    }

    /// The highest generation this service has given for the repository
    /// (saved ones included: see `RepoRecord::named_up_to`).
    pub(super) fn newest_given(&self) -> u64 {
        self.names
            .last_given()
            .unwrap_or(0)
            .max(self.record.generation)
            .max(self.record.named_up_to)
    }
}

/// What a run reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum RunScope {
    /// The listed files matching the glob (`None`: every file).
    Listed(Option<String>),
    /// Exactly these repo-relative paths (a watcher's batch): a one-file
    /// edit does not list the whole tree (issue 32, edit -> searchable).
    Paths(HashSet<String>),
}

impl RunScope {
    /// One scope covering both: named paths together, the same glob, or
    /// else every file.
    pub(super) fn widen(self, other: RunScope) -> RunScope {
        match (self, other) {
            (RunScope::Paths(mut a), RunScope::Paths(b)) => {
                a.extend(b);
                RunScope::Paths(a)
            }
            (a, b) if a == b => a,
            _ => RunScope::Listed(None),
        }
    }
}

/// One registered repository.
pub struct RepoEntry {
    pub(super) id: String,
    pub(super) root: PathBuf,
    pub(super) engine: Mutex<Option<Arc<Engine>>>,
    pub(super) state: Mutex<RepoState>,
    pub(super) progress: RunProgress,
    /// When the oldest change a watcher saw and no finished run has
    /// indexed yet happened (index lag; `None`: none known).
    pub(super) unindexed_since: Mutex<Option<Instant>>,
    /// Raised to stop this repository's watcher, if it has one.
    pub(super) watcher: Mutex<Option<Arc<AtomicBool>>>,
    /// When the engine was last handed out (idle engines are closed:
    /// [`RepoEntry::close_if_idle`]).
    last_used: Mutex<Instant>,
}

impl RepoEntry {
    /// The repository `record` describes, with its engine if it is open.
    pub(super) fn new(record: RepoRecord, engine: Option<Arc<Engine>>) -> RepoEntry {
        RepoEntry {
            id: record.repo_id.clone(),
            root: record.root.clone(),
            engine: Mutex::new(engine),
            state: Mutex::new(RepoState {
                record,
                run: None,
                rerun: None,
                names: StateNames::default(),
            }),
            progress: RunProgress::default(),
            unindexed_since: Mutex::new(None),
            watcher: Mutex::new(None),
            last_used: Mutex::new(Instant::now()),
        }
    }

    /// Whether the engine is open.
    pub(super) fn engine_open(&self) -> bool {
        lock(&self.engine).is_some()
    }

    /// Whether the engine is open and keeps a resolver world for the next
    /// run to update (never waits for a run that is building one).
    pub(super) fn resolver_world_kept(&self) -> bool {
        lock(&self.engine)
            .as_ref()
            .is_some_and(|e| e.resolver_world_is_kept())
    }

    /// Closes the engine when nothing used it for `idle` and no run is
    /// going (a run holds it throughout); true when it was closed. A
    /// request still holding it keeps it alive until it finishes; the next
    /// one reopens it ([`RepoEntry::engine`]).
    pub(super) fn close_if_idle(&self, idle: Duration) -> bool {
        // Lock order: state, then the engine slot.
        let state = lock(&self.state);
        if state.run.is_some() {
            return false;
        }
        let mut slot = lock(&self.engine);
        if slot.is_none() || lock(&self.last_used).elapsed() < idle {
            return false;
        }
        *slot = None;
        true
    }

    /// The engine, opened on first use.
    pub(super) fn engine(&self, config: &Config) -> Result<Arc<Engine>, ApiError> {
        let mut slot = lock(&self.engine);
        *lock(&self.last_used) = Instant::now();
        if let Some(e) = slot.as_ref() {
            return Ok(e.clone());
        }
        match Engine::open(&self.root, config.engine_options.clone()) {
            Ok(e) => {
                // The service answers many context packs per repository.
                e.keep_history_log();
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

    pub(super) fn view(&self) -> RepoView {
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

#[cfg(test)]
mod tests {
    use super::{Judged, RepoState, RunInfo, RunScope, StateNames};
    use crate::registry::RepoRecord;

    fn state(generation: u64) -> RepoState {
        let mut record = RepoRecord::registered("r".into(), "r".into(), "/r".into(), 0);
        record.generation = generation;
        RepoState {
            record,
            run: None,
            rerun: None,
            names: StateNames::default(),
        }
    }

    fn running(st: &mut RepoState) {
        st.record.dirty = true;
        st.run = Some(RunInfo {
            glob: None,
            paths: None,
            commit_sha: None,
            started: std::time::Instant::now(),
            carry_bump: false,
            recovering: false,
        });
    }

    #[test]
    fn each_state_read_has_a_generation_of_its_own() {
        let mut st = state(4);
        // Settled: the index is the state generation 4 names.
        assert_eq!(st.name_state(40), 4);
        running(&mut st);
        assert_eq!(st.name_state(40), 4, "no batch committed yet");
        assert_eq!(st.name_state(41), 5);
        assert_eq!(st.name_state(43), 6);
        assert_eq!(st.name_state(41), 5, "the same state, the same name");
        assert_eq!(st.name_state(40), 4);
        assert_eq!(st.newest_given(), 6);
        // A state read with generation 5 during the run expands; one this
        // service never gave is refused as a client error.
        assert_eq!(st.judge(5, 43), Judged::DuringRun(6));
        assert_eq!(st.judge(4, 43), Judged::DuringRun(6));
        assert_eq!(st.judge(6, 43), Judged::Current(6));
        assert_eq!(st.judge(9, 43), Judged::Future(6));
        assert_eq!(st.judge(3, 43), Judged::Stale(6));
        // The run completes above every name given (runner.rs), at engine
        // generation 44: only that state is current now.
        st.run = None;
        st.record.dirty = false;
        st.record.generation = st.names.last_given().unwrap() + 1;
        st.names.completed(Some(44));
        assert_eq!(st.name_state(44), 7);
        assert_eq!(st.judge(5, 44), Judged::Stale(7));
        assert_eq!(st.judge(7, 44), Judged::Current(7));
        // A write the service did not make (another process): a new name.
        assert_eq!(st.name_state(45), 8);
        assert_eq!(st.judge(7, 45), Judged::Stale(8));
    }

    #[test]
    fn an_unknown_state_is_never_named_by_the_complete_generation() {
        // After a restart in the middle of a run (the record is dirty),
        // which state generation 2 named is not known: every state read
        // gets a new name until a run completes.
        let mut st = state(2);
        st.record.dirty = true;
        assert_eq!(st.name_state(17), 3);
        assert_eq!(st.name_state(17), 3);
        assert_eq!(st.name_state(18), 4);
        // A fleet node adopting a repository forgets what it knew.
        let mut adopted = state(9);
        assert_eq!(adopted.name_state(5), 9);
        adopted.names.forget();
        adopted.record.dirty = true;
        assert_eq!(adopted.name_state(5), 10);
    }

    #[test]
    fn names_go_above_every_generation_saved_as_given() {
        // A process stopped in the middle of a run had given 3..=5 (saved
        // in the record); the restarted one starts above them.
        let mut st = state(2);
        st.record.dirty = true;
        st.record.named_up_to = 5;
        assert_eq!(st.names.take_unsaved(), None);
        assert_eq!(st.name_state(17), 6);
        assert_eq!(
            st.names.take_unsaved(),
            Some(6),
            "a new name is to be saved"
        );
        assert_eq!(st.name_state(17), 6);
        assert_eq!(
            st.names.take_unsaved(),
            None,
            "an old name is saved already"
        );
        assert_eq!(st.record.named_up_to, 6);
        // A generation the stopped process gave is stale, not unknown.
        assert_eq!(st.judge(4, 17), Judged::Stale(6));
    }

    fn paths(names: &[&str]) -> RunScope {
        RunScope::Paths(names.iter().map(|s| s.to_string()).collect())
    }

    #[test]
    fn a_follow_up_covers_every_request_it_coalesces() {
        // Two watcher batches: one run over both batches' paths.
        assert_eq!(
            paths(&["a.rs"]).widen(paths(&["b.rs"])),
            paths(&["a.rs", "b.rs"])
        );
        let glob = || RunScope::Listed(Some("src/**".into()));
        assert_eq!(glob().widen(glob()), glob());
        // Named paths and a glob, or two globs: every file.
        assert_eq!(paths(&["a.rs"]).widen(glob()), RunScope::Listed(None));
        assert_eq!(glob().widen(paths(&["a.rs"])), RunScope::Listed(None));
        assert_eq!(
            glob().widen(RunScope::Listed(Some("*.py".into()))),
            RunScope::Listed(None)
        );
        assert_eq!(
            RunScope::Listed(None).widen(paths(&["a.rs"])),
            RunScope::Listed(None)
        );
    }
}
