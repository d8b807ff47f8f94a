//! The reindex runner: `POST /reindex` and the watchers start runs (one
//! background thread per running repository; a request during a run queues
//! one follow-up), and each finished run is recorded with its events and
//! its generation (see the module documentation of `service` for when a
//! generation moves).

use std::collections::HashSet;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use canopy_client::api::{ReindexRequest, ReindexResponse, RunError};
use canopy_core::cancel::CancelFlag;
use canopy_core::model::IndexReport;
use canopy_core::{CanopyError, Engine};
use serde_json::json;

use super::entry::{RepoEntry, RunInfo, RunScope};
use super::{Service, head_sha, lock, now_secs};
use crate::error::ApiError;
use crate::registry::{NewEvent, RepoRecord, RepoStatus};

/// Outcome of a run, as recorded: the report, whether the index changed
/// in a way the report's counts do not show, and the engine generation of
/// the state it left (`None` if it could not be read).
type RunResult = Result<(IndexReport, bool, Option<u64>), RunError>;

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
    /// Turns a repository's watch on or off and records it (kept across
    /// restarts).
    pub(super) fn set_watch(
        self: &Arc<Self>,
        entry: &Arc<RepoEntry>,
        watch: bool,
    ) -> Result<(), ApiError> {
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
    pub(super) fn start_watcher(self: &Arc<Self>, entry: &Arc<RepoEntry>) {
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
                if let Some(service) = service.upgrade() {
                    service.warm_watched(&watched);
                }
                let options = canopy_core::watch::WatchOptions::default();
                // While no edit comes, the text merging the runs left (as
                // `canopy watch` does; a run that still holds the index
                // merges its own steps and ends the idle work). Not in
                // fleet mode: there only a run under the owner's lease
                // writes an index.
                let on_idle = || {
                    let Some(service) = service.upgrade() else {
                        return false;
                    };
                    if service.fleet().is_some() {
                        return false;
                    }
                    let Ok(engine) = watched.engine(&service.config) else {
                        return false;
                    };
                    engine.merge_text_while_idle().unwrap_or_else(|e| {
                        tracing::debug!(repo = %watched.id, "no text merging while idle: {e}");
                        false
                    })
                };
                let result = canopy_core::watch::follow_changes_idle(
                    &watched.root,
                    &options,
                    &stop,
                    |batch| {
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
                        let scope = match batch.full {
                            Some(_) => RunScope::Listed(None),
                            None => match watched.engine(&service.config) {
                                Ok(engine) => {
                                    match canopy_core::watch::batch_files(&engine, batch.paths) {
                                        Ok(paths) => RunScope::Paths(paths),
                                        Err(_) => RunScope::Listed(None),
                                    }
                                }
                                Err(_) => RunScope::Listed(None),
                            },
                        };
                        if let Err(e) = service.start_reindex_scope(&watched, scope, false) {
                            tracing::warn!(repo = %watched.id, "watch cannot start a reindex: {e}");
                        }
                        Ok(true)
                    },
                    on_idle,
                );
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

    /// Builds a watched repository's resolver world ahead of its first edit,
    /// in a thread of its own, one repository at a time (issue 28 item 5):
    /// a run keeps the world it resolved in, but one that resolves nothing
    /// (an index that is already complete) keeps none, and the first edit
    /// after the watch started built it from every file's rows (on the
    /// 5,000-file generated corpus 195 ms of a 237 ms re-index). Only watched
    /// repositories pay the world's memory from the start: they are the
    /// ones expected to be edited. An engine closed for being idle drops it
    /// (the next edit's run builds it again).
    fn warm_watched(self: &Arc<Self>, entry: &Arc<RepoEntry>) {
        let Ok(engine) = entry.engine(&self.config) else {
            return;
        };
        engine.keep_resolver_world();
        let warming = self.warming.clone();
        let id = entry.id.clone();
        let spawned = std::thread::Builder::new()
            .name("canopy-warm-queue".into())
            .spawn(move || {
                let _one_at_a_time = lock(&warming);
                if let Some(build) = engine.warm_resolver_world()
                    && build.join().is_err()
                {
                    tracing::warn!(repo = %id, "building the resolver world ahead of the first edit panicked");
                }
            });
        if let Err(e) = spawned {
            tracing::debug!(repo = %entry.id, "no thread to build the resolver world ahead: {e}");
        }
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
    pub(super) fn start_reindex(
        self: &Arc<Self>,
        entry: &Arc<RepoEntry>,
        glob: Option<String>,
        recovering: bool,
    ) -> Result<ReindexResponse, ApiError> {
        self.start_reindex_scope(entry, RunScope::Listed(glob), recovering)
    }

    /// [`Service::start_reindex`] over a scope: listed files (with a glob)
    /// or named paths.
    pub(super) fn start_reindex_scope(
        self: &Arc<Self>,
        entry: &Arc<RepoEntry>,
        scope: RunScope,
        recovering: bool,
    ) -> Result<ReindexResponse, ApiError> {
        let head = head_sha(&entry.root);
        let mut st = lock(&entry.state);
        if let Some(running_sha) = st.run.as_ref().map(|r| r.commit_sha.clone()) {
            // One follow-up run covers every request made during this one:
            // named paths together; a different glob widens it to the
            // whole repository.
            st.rerun = Some(match st.rerun.take() {
                None => scope,
                Some(queued) => queued.widen(scope),
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
        let (glob, paths) = effective_scope(&st.record, scope);
        let (record, event) = started_record(&st.record, glob.clone(), head.clone(), false);
        self.commit(Some(&record), vec![event])
            .map_err(ApiError::internal)?;
        st.run = Some(RunInfo {
            glob,
            paths,
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
            let (glob, paths) = lock(&entry.state)
                .run
                .as_ref()
                .map(|r| (r.glob.clone(), r.paths.clone()))
                .unwrap_or_default();
            let started = Instant::now();
            let result: RunResult = match entry.engine(&self.config) {
                Err(e) => Err(RunError {
                    code: e.code().into(),
                    message: e.to_string(),
                }),
                Ok(engine) => {
                    // The service outlives many index runs of each repository.
                    engine.keep_resolver_world();
                    // Fleet mode: the run stops between files once its
                    // lease lapses (its publish would be refused anyway,
                    // and a path source's shared index must not be written
                    // by a node that no longer owns it).
                    let flag = CancelFlag::new();
                    if let Some(node) = self.fleet() {
                        match node.run_fence(&entry.id) {
                            Some(fence) => entry.progress.watch(fence, flag.clone()),
                            None => flag.cancel(),
                        }
                    }
                    let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| {
                        canopy_core::cancel::within(&flag, || match paths {
                            Some(paths) => engine.index_paths(paths, &entry.progress),
                            None => engine.index(glob.as_deref(), &entry.progress),
                        })
                    }));
                    entry.progress.unwatch();
                    if flag.is_cancelled() {
                        tracing::warn!(
                            repo = %entry.id,
                            "index run stopped between files: this node no longer holds the lease it started under"
                        );
                    }
                    match outcome {
                        Ok(Ok(report)) => {
                            let (report, unaccounted) = join_background(&engine, report);
                            Ok((report, unaccounted, engine.generation().ok()))
                        }
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
        match result {
            Ok((report, unaccounted_change, left)) => {
                // States read during the run were given generations of
                // their own: the index changed, and the next generation
                // goes above them all.
                let named = st.names.last_given();
                let done = self.record_success(
                    entry,
                    &run,
                    &mut record,
                    report,
                    (unaccounted_change || named.is_some(), named.unwrap_or(0)),
                );
                st.names.completed(left);
                events.extend(done);
                self.metrics.index_run(&entry.id, "success", elapsed);
            }
            Err(err) => {
                record.status = RepoStatus::Failed;
                record.consecutive_failures += 1;
                events.push(NewEvent {
                    kind: "reindex_failed",
                    repo_id: Some(entry.id.clone()),
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
        let follow_up = st.rerun.take().map(|scope| effective_scope(&record, scope));
        let following = follow_up.is_some();
        if let Some((glob, paths)) = follow_up {
            let (next, event) = started_record(&record, glob.clone(), next_head.clone(), true);
            st.run = Some(RunInfo {
                glob,
                paths,
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
        following
    }
}

impl Service {
    /// Records a successful pass in `record`: the generation moves when
    /// the index changed (or the run must account for an earlier one), to
    /// one above `named_up_to`, the highest generation given to a state
    /// read during the run (or saved as given by a process that stopped
    /// in the middle of one: `RepoRecord::named_up_to`), when that is higher;
    /// returns its events (`reindex_finished`, then `generation_bumped` and
    /// `files_changed` when they apply).
    fn record_success(
        &self,
        entry: &RepoEntry,
        run: &RunInfo,
        record: &mut RepoRecord,
        mut report: IndexReport,
        (unaccounted_change, named_up_to): (bool, u64),
    ) -> Vec<NewEvent> {
        let repo_id = Some(entry.id.clone());
        let changed = report.files_indexed + report.files_removed > 0
            || report.rebuilt.is_some()
            || unaccounted_change;
        let previous = record.generation;
        let bump = previous == 0 || changed || run.carry_bump;
        if bump {
            record.generation = previous.max(named_up_to).max(record.named_up_to) + 1;
        }
        record.commit_sha = run.commit_sha.clone();
        record.status = RepoStatus::Ready;
        record.dirty = false;
        record.consecutive_failures = 0;
        record.last_indexed_at = Some(now_secs());
        record.last_error = None;
        let mut events = vec![NewEvent {
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
        }];
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
        if !report.changed_paths.is_empty() {
            // Followers (`canopy follow --glob`) wake on the paths they care
            // about; the list is bounded by the report.
            events.push(NewEvent {
                kind: "files_changed",
                repo_id,
                data: json!({
                    "generation": record.generation,
                    "paths": std::mem::take(&mut report.changed_paths),
                    "paths_omitted": std::mem::take(&mut report.changed_paths_omitted),
                }),
            });
        }
        record.last_report = Some(report);
        // The run read every file after the oldest change it could have
        // missed only if it started after it.
        let mut since = lock(&entry.unindexed_since);
        if since.is_some_and(|t| run.started >= t) {
            *since = None;
        }
        events
    }
}

/// The glob or named paths a run may use: only an index known to be
/// complete (a generation exists and no run was left unfinished) may be
/// refreshed partially; the first run, and the one after a failure, cover
/// the whole repository.
fn effective_scope(
    record: &RepoRecord,
    scope: RunScope,
) -> (Option<String>, Option<HashSet<String>>) {
    if record.generation == 0 || record.dirty {
        return (None, None);
    }
    match scope {
        RunScope::Listed(glob) => (glob, None),
        RunScope::Paths(paths) => (None, Some(paths)),
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
