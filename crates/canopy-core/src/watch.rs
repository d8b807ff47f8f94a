//! Keeping an index fresh: file-system events in, incremental index runs
//! out.
//!
//! [`watch`] subscribes to the repository's file-system events (`notify`:
//! inotify, FSEvents, ReadDirectoryChangesW), gathers them into batches and
//! re-indexes only the paths a batch names. Batching is what makes a `git
//! checkout` of hundreds of files, an editor's save-by-rename or a burst of
//! generated files one run instead of hundreds: a batch closes when no event
//! arrived for [`WatchOptions::debounce`] or when it is [`MAX_BATCH_AGE`]
//! old. Three things turn a batch into a full (still incremental) run: an
//! event the OS could not deliver (queue overflow: the kernel says to
//! rescan), a changed `.gitignore` (what is listed changes), and a batch of
//! more than [`MAX_BATCH_PATHS`] paths.
//!
//! Invariant: after a cycle, every file the batch named is indexed as it is
//! on disk at the time the run read it; anything written later is in the
//! next batch, because events are collected while a run is under way.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use notify::event::{AccessKind, AccessMode};
use notify::{EventKind, RecursiveMode, Watcher};
use serde::Serialize;

use crate::discover::CANOPY_DIR;
use crate::engine::Engine;
use crate::error::{CanopyError, Result};
use crate::index::{IndexProgress, NoProgress};
use crate::model::IndexReport;

/// Longest a batch keeps collecting events before it is indexed, however
/// busy the file system is.
pub const MAX_BATCH_AGE: Duration = Duration::from_secs(1);
/// Quiet time that closes a batch of one file whose writer has closed it
/// (an editor's save, an agent's edit): nothing more is coming for that
/// file, so waiting the whole debounce only delays the answer (issue 32:
/// edit -> searchable). A batch of several files, or a file still open for
/// writing, waits the whole debounce, which keeps a `git checkout` one run.
pub const SETTLED_QUIET: Duration = Duration::from_millis(10);
/// Batches naming more paths than this run over the whole repository (an
/// incremental run: unchanged files cost a `stat`).
pub const MAX_BATCH_PATHS: usize = 5_000;

/// How [`watch`] runs.
#[derive(Clone, Debug)]
pub struct WatchOptions {
    /// Quiet time that closes a batch (default 50 ms).
    pub debounce: Duration,
    /// Stop after this many index cycles (the initial run included).
    pub max_cycles: Option<u64>,
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// Start with a run over the whole repository (default `true`), once
    /// the watcher is in place, so nothing changed before it is missed.
    /// Off where something else builds the index (the MCP server's lazy
    /// first index): the watch then only follows changes.
    pub initial_run: bool,
}

impl Default for WatchOptions {
    fn default() -> Self {
        WatchOptions {
            debounce: Duration::from_millis(50),
            max_cycles: None,
            duration: None,
            initial_run: true,
        }
    }
}

/// One index run of a watch.
#[derive(Clone, Debug, Serialize)]
pub struct WatchCycle {
    /// 1 for the initial run, then one per batch.
    pub cycle: u64,
    /// Why the run was over the whole repository, if it was (`initial`,
    /// `rescan`, `gitignore`, `large_batch`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub full_run: Option<&'static str>,
    /// Paths the batch named (0 for full runs).
    pub paths: usize,
    /// From the first event of the batch to the end of its run.
    pub latency_ms: u64,
    /// What the run did.
    pub report: IndexReport,
}

/// Why a watch ended.
#[derive(Clone, Debug, Serialize)]
pub struct WatchSummary {
    /// Index runs done.
    pub cycles: u64,
    /// `stopped`, `max_cycles` or `duration`.
    pub reason: &'static str,
}

/// Watches `engine`'s repository until `stop` is set, `max_cycles` runs
/// are done or `duration` has passed, calling `on_cycle` after each run.
/// Starts with one incremental run over the whole repository, so the index
/// is fresh before the first event.
pub fn watch(
    engine: &Engine,
    options: &WatchOptions,
    stop: &AtomicBool,
    mut on_cycle: impl FnMut(&WatchCycle),
) -> Result<WatchSummary> {
    // A watcher runs many small index runs: keep the resolver's rows between them.
    engine.keep_resolver_world();
    // And build their world before the first edit needs it: after the
    // initial run when there is one (it may change the index), else now.
    if !options.initial_run {
        engine.warm_resolver_world();
    }
    let mut cycles = 0u64;
    let mut run = |full: Option<&'static str>, paths: HashSet<String>, first_event: Instant| {
        cycles += 1;
        let n = paths.len();
        let report = match full {
            Some(_) => engine.index(None, &NoProgress)?,
            None => engine.index_paths(paths, &NoProgress as &dyn IndexProgress)?,
        };
        if cycles == 1 && options.initial_run {
            engine.warm_resolver_world();
        }
        on_cycle(&WatchCycle {
            cycle: cycles,
            full_run: full,
            paths: n,
            latency_ms: first_event.elapsed().as_millis() as u64,
            report,
        });
        Ok::<_, CanopyError>(cycles)
    };
    let done = |cycles: u64| options.max_cycles.is_some_and(|m| cycles >= m);
    // The initial run (if asked for) is the first batch `follow_changes`
    // hands over, once the watcher is in place.
    let mut cycles_done = 0;
    let on_batch = |batch: ChangeBatch| {
        let paths = if batch.full.is_some() {
            HashSet::new()
        } else {
            batch_files(engine, batch.paths)?
        };
        cycles_done = run(batch.full, paths, batch.first_event)?;
        Ok(!done(cycles_done))
    };
    // While no edit comes: the text merging the runs left (they merge at
    // most a few steps each, so no edit pays for a large merge).
    let on_idle = || match engine.merge_text_while_idle() {
        Ok(more) => more,
        Err(e) => {
            tracing::debug!("no text merging while idle: {e}");
            false
        }
    };
    let reason = follow_changes_idle(engine.root(), options, stop, on_batch, on_idle)?;
    Ok(WatchSummary {
        cycles: cycles_done,
        reason,
    })
}

/// A batch of file-system changes under a repository (see [`follow_changes`]).
#[derive(Clone, Debug)]
pub struct ChangeBatch {
    /// Set when the batch calls for a run over the whole repository:
    /// `rescan` (events were lost), `gitignore` or `large_batch`.
    pub full: Option<&'static str>,
    /// Repo-relative paths the events named (files or directories, some
    /// perhaps gone); empty when `full` is set.
    pub paths: HashSet<String>,
    /// When the batch's first event arrived.
    pub first_event: Instant,
}

/// Subscribes to `root`'s file-system events and calls `on_batch` with
/// each batch of changes (closed by `options.debounce` of quiet or
/// [`MAX_BATCH_AGE`]), until `stop` is set, `options.duration` has passed or
/// `on_batch` returns `false`. Returns why it stopped (`stopped`,
/// `duration`, `max_cycles`). Events inside `.git/` and `.canopy/` are not
/// changes. Used by [`watch`] and by front ends that index through their
/// own pipeline (the service's per-repository watch).
pub fn follow_changes(
    root: &Path,
    options: &WatchOptions,
    stop: &AtomicBool,
    on_batch: impl FnMut(ChangeBatch) -> Result<bool>,
) -> Result<&'static str> {
    follow_changes_idle(root, options, stop, on_batch, || false)
}

/// Quiet after a batch before [`follow_changes_idle`] starts its idle work:
/// an editor saving several files, or a checkout, is usually one batch or a
/// few close together, and their runs would only wait for that work.
pub const IDLE_WORK_AFTER: Duration = Duration::from_millis(500);

/// [`follow_changes`], and `on_idle` once no event arrived for
/// [`IDLE_WORK_AFTER`] after a batch: it does one bounded piece of work and
/// says whether more is left, and is called again (between checks for
/// events, so a new batch waits for one piece at most) until it says no or
/// an event arrives. The watcher of [`watch`] merges the text index there
/// ([`Engine::merge_text_while_idle`]).
pub fn follow_changes_idle(
    root: &Path,
    options: &WatchOptions,
    stop: &AtomicBool,
    mut on_batch: impl FnMut(ChangeBatch) -> Result<bool>,
    mut on_idle: impl FnMut() -> bool,
) -> Result<&'static str> {
    let started = Instant::now();
    let deadline = options.duration.map(|d| started + d);
    let root = root.to_path_buf();
    let (sender, events) = channel::<notify::Result<notify::Event>>();
    let mut watcher = notify::recommended_watcher(move |event| {
        // The receiver is gone only when the watch is over.
        let _ = sender.send(event);
    })
    .map_err(|e| watch_error(&root, e))?;
    watcher
        .watch(&root, RecursiveMode::Recursive)
        .map_err(|e| watch_error(&root, e))?;
    // Only now are changes seen: a run over the whole repository catches
    // whatever changed before (while nothing watched, or while the watcher
    // was being set up), so no edit falls between the two.
    if options.initial_run
        && !on_batch(ChangeBatch {
            full: Some("initial"),
            paths: HashSet::new(),
            first_event: Instant::now(),
        })?
    {
        return Ok("max_cycles");
    }
    // Idle work is looked for after every batch (the initial run's too).
    let mut last_batch = Instant::now();
    let mut idle_work = true;
    loop {
        // Wait for the first event of a batch.
        let mut batch = Batch::default();
        let first_event = loop {
            if stop.load(Ordering::SeqCst) {
                return Ok("stopped");
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Ok("duration");
            }
            let quiet = last_batch.elapsed();
            let wait = if !idle_work {
                Duration::from_millis(100)
            } else if quiet >= IDLE_WORK_AFTER {
                if !on_idle() {
                    idle_work = false;
                }
                // Only look for an event that came during the piece.
                Duration::ZERO
            } else {
                (IDLE_WORK_AFTER - quiet).min(Duration::from_millis(100))
            };
            match events.recv_timeout(wait) {
                Ok(event) => {
                    if batch.add(&root, event) {
                        break Instant::now();
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(CanopyError::Internal("the file watcher stopped".into()));
                }
            }
        };
        // Gather the rest of the batch.
        while first_event.elapsed() < MAX_BATCH_AGE {
            match events.recv_timeout(batch.quiet(options.debounce)) {
                Ok(event) => {
                    batch.add(&root, event);
                }
                Err(_) => break,
            }
        }
        let full = batch
            .full
            .or_else(|| (batch.paths.len() > MAX_BATCH_PATHS).then_some("large_batch"));
        let paths = if full.is_some() {
            HashSet::new()
        } else {
            batch.paths
        };
        if !on_batch(ChangeBatch {
            full,
            paths,
            first_event,
        })? {
            return Ok("max_cycles");
        }
        last_batch = Instant::now();
        idle_work = true;
    }
}

fn watch_error(root: &Path, e: notify::Error) -> CanopyError {
    CanopyError::Io {
        path: root.to_path_buf(),
        source: std::io::Error::other(format!("cannot watch the repository: {e}")),
    }
}

/// Paths changed since the last run.
#[derive(Default)]
struct Batch {
    /// Repo-relative paths named by events.
    paths: HashSet<String>,
    /// Set when the batch needs a run over the whole repository.
    full: Option<&'static str>,
    /// Paths of `paths` whose writer closed them after their last change.
    closed: HashSet<String>,
}

impl Batch {
    /// Adds an event; returns whether it concerns the index at all (events
    /// inside `.git/` and `.canopy/` do not).
    fn add(&mut self, root: &Path, event: notify::Result<notify::Event>) -> bool {
        let event = match event {
            Ok(event) => event,
            Err(e) => {
                tracing::warn!("file watcher error ({e}); rescanning");
                self.full = Some("rescan");
                return true;
            }
        };
        if event.need_rescan() {
            self.full = Some("rescan");
            return true;
        }
        if let EventKind::Access(access) = event.kind {
            if access == AccessKind::Close(AccessMode::Write) {
                for rel in event.paths.iter().filter_map(|p| relative(root, p)) {
                    if self.paths.contains(&rel) {
                        self.closed.insert(rel);
                    }
                }
            }
            return false;
        }
        let mut relevant = false;
        for path in &event.paths {
            let Some(rel) = relative(root, path) else {
                continue;
            };
            // Changed again: open for writing until it is closed again.
            self.closed.remove(&rel);
            if rel.is_empty()
                || rel == ".git"
                || rel.starts_with(".git/")
                || rel == CANOPY_DIR
                || rel.starts_with(&format!("{CANOPY_DIR}/"))
            {
                continue;
            }
            relevant = true;
            if rel == ".gitignore" || rel.ends_with("/.gitignore") {
                self.full = Some("gitignore");
            }
            self.paths.insert(rel);
        }
        relevant
    }
}

impl Batch {
    /// How long a quiet spell closes this batch: [`SETTLED_QUIET`] (at
    /// most `debounce`) for one file its writer closed, `debounce`
    /// otherwise.
    fn quiet(&self, debounce: Duration) -> Duration {
        if self.full.is_none()
            && self.paths.len() == 1
            && self.closed.len() == 1
            && !whole_debounce_always()
        {
            SETTLED_QUIET.min(debounce)
        } else {
            debounce
        }
    }
}

/// The measuring knob `CANOPY_WATCH_QUIET=debounce`: every batch waits the
/// whole debounce, as before [`SETTLED_QUIET`], so `bench/freshness.py` can
/// compare the two on one build. Not an interface.
fn whole_debounce_always() -> bool {
    std::env::var("CANOPY_WATCH_QUIET").as_deref() == Ok("debounce")
}

/// A batch's paths plus, for each path that no longer exists, the indexed
/// files under it (a deleted or renamed directory reports only itself), with
/// directories that appeared replaced by the files in them: what
/// [`Engine::index_paths`] is given for a batch of [`follow_changes`].
pub fn batch_files(engine: &Engine, batch_paths: HashSet<String>) -> Result<HashSet<String>> {
    let root = engine.root();
    let gone: Vec<String> = batch_paths
        .iter()
        .filter(|p| !root.join(p).exists())
        .map(|p| format!("{p}/"))
        .collect();
    let mut paths = batch_paths;
    if !gone.is_empty() {
        for indexed in engine.indexed_paths()? {
            if gone.iter().any(|dir| indexed.starts_with(dir.as_str())) {
                paths.insert(indexed);
            }
        }
    }
    // A directory that appeared (moved in, checked out) holds files
    // no event named one by one.
    let dirs: Vec<String> = paths
        .iter()
        .filter(|p| root.join(p).is_dir())
        .cloned()
        .collect();
    for dir in dirs {
        paths.remove(&dir);
        collect_files(root, &root.join(&dir), &mut paths);
    }
    Ok(paths)
}

/// Adds every file under `dir` (repo-relative) to `out`.
fn collect_files(root: &Path, dir: &Path, out: &mut HashSet<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        match entry.file_type() {
            Ok(t) if t.is_dir() => collect_files(root, &path, out),
            Ok(_) => {
                if let Some(rel) = relative(root, &path) {
                    out.insert(rel);
                }
            }
            Err(_) => {}
        }
    }
}

/// `path` relative to `root` with `/` separators, if it is inside.
fn relative(root: &Path, path: &Path) -> Option<String> {
    let rel: PathBuf = path.strip_prefix(root).ok()?.to_path_buf();
    let parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    Some(parts.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A watcher that starts on an index another process completed: its
    /// initial run resolves nothing, and the resolver world is built in the
    /// background after it, before any edit asks for it (issue 28 item 5).
    #[test]
    fn a_watcher_builds_the_resolver_world_before_the_first_edit() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(
            dir.path().join("app.py"),
            "from lib import helper\n\n\ndef main():\n    return helper()\n",
        )
        .expect("write");
        std::fs::write(dir.path().join("lib.py"), "def helper():\n    return 1\n").expect("write");
        let options = crate::EngineOptions::default();
        Engine::open(dir.path(), options.clone())
            .expect("open")
            .index(None, &NoProgress)
            .expect("index");
        let engine = Engine::open(dir.path(), options).expect("open");
        let stop = AtomicBool::new(false);
        let watching = WatchOptions {
            max_cycles: Some(1),
            ..WatchOptions::default()
        };
        let summary = watch(&engine, &watching, &stop, |_| {}).expect("watch");
        assert_eq!(summary.cycles, 1, "the initial run, and no other");
        let deadline = Instant::now() + Duration::from_secs(30);
        while !engine.resolver_world_is_kept() {
            assert!(
                Instant::now() < deadline,
                "no resolver world kept 30 s after the watcher's initial run"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Text merge steps left in the index at `db`, counted on a copy (so
    /// the index itself keeps them).
    fn merge_steps_left(db: &Path) -> u32 {
        let copy_dir = tempfile::tempdir().expect("tempdir");
        let copy = copy_dir.path().join("copy.db");
        let (store, _) = crate::store::Store::open(db).expect("open");
        store
            .conn
            .execute("VACUUM INTO ?1", [copy.to_string_lossy()])
            .expect("copy");
        let (mut copied, _) = crate::store::Store::open(&copy).expect("open the copy");
        copied.merge_text_segments(u64::MAX).expect("merge")
    }

    // One-file runs merge at most a few pages each (`MERGE_PAGES_PER_FILE`),
    // so a run whose merge reaches large segments leaves work; a watcher
    // with no edit to index does it (issue 28 item 5: those steps were the
    // p95 of a one-line edit).
    #[test]
    fn an_idle_watcher_merges_the_text_index_its_runs_left() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("app.py"), "def main():\n    return 1\n").expect("write");
        let engine = Engine::open(dir.path(), crate::EngineOptions::default()).expect("open");
        engine.index(None, &NoProgress).expect("index");
        // One-file runs of many distinct words until one fills a level
        // whose merge takes more than the run's steps (each run writes one
        // segment: store::TEXT_PENDING_BYTES).
        let db = dir.path().join(".canopy").join("index.db");
        let mut left = 0;
        for i in 0..8 {
            let words: Vec<String> = (0..60_000).map(|j| format!("w{i}x{j}")).collect();
            let name = format!("notes_{i}.txt");
            std::fs::write(dir.path().join(&name), words.join("\n")).expect("write");
            engine
                .index_paths(HashSet::from([name]), &NoProgress)
                .expect("index");
            left = merge_steps_left(&db);
            if left > 0 {
                break;
            }
        }
        assert!(left > 0, "the runs left text merging to do");
        let stop = AtomicBool::new(false);
        let watching = WatchOptions {
            initial_run: false,
            duration: Some(IDLE_WORK_AFTER + Duration::from_secs(3)),
            ..WatchOptions::default()
        };
        let summary = watch(&engine, &watching, &stop, |_| {}).expect("watch");
        assert_eq!(summary.cycles, 0, "no edit came");
        assert_eq!(
            merge_steps_left(&db),
            0,
            "the idle watcher merged the {left} steps the runs left"
        );
    }

    fn event(kind: EventKind, paths: &[&str]) -> notify::Result<notify::Event> {
        let mut e = notify::Event::new(kind);
        for p in paths {
            e = e.add_path(PathBuf::from(p));
        }
        Ok(e)
    }

    #[test]
    fn batches_skip_git_and_canopy_and_widen_on_gitignore_and_rescan() {
        let root = Path::new("/r");
        let mut b = Batch::default();
        let modify = EventKind::Modify(notify::event::ModifyKind::Any);
        assert!(!b.add(root, event(modify, &["/r/.git/index"])));
        assert!(!b.add(root, event(modify, &["/r/.canopy/index.db-wal"])));
        assert!(b.add(root, event(modify, &["/r/src/a.rs"])));
        assert_eq!(b.paths.len(), 1);
        assert!(b.full.is_none());
        b.add(root, event(modify, &["/r/sub/.gitignore"]));
        assert_eq!(b.full, Some("gitignore"));
        let mut b = Batch::default();
        b.add(
            root,
            Ok(notify::Event::new(EventKind::Other).set_flag(notify::event::Flag::Rescan)),
        );
        assert_eq!(b.full, Some("rescan"));
    }

    #[test]
    fn one_file_closed_by_its_writer_closes_the_batch_sooner() {
        let root = Path::new("/r");
        let debounce = Duration::from_millis(50);
        let modify = EventKind::Modify(notify::event::ModifyKind::Any);
        let close_write = EventKind::Access(AccessKind::Close(AccessMode::Write));
        let close_read = EventKind::Access(AccessKind::Close(AccessMode::Read));
        let mut b = Batch::default();
        // A file still open for writing: the whole debounce.
        b.add(root, event(modify, &["/r/src/a.rs"]));
        assert_eq!(b.quiet(debounce), debounce);
        // Closed after reading, or another file closed: still open for writing.
        b.add(root, event(close_read, &["/r/src/a.rs"]));
        b.add(root, event(close_write, &["/r/src/other.rs"]));
        assert_eq!(b.quiet(debounce), debounce);
        // Its writer closed it: nothing more is coming for it.
        b.add(root, event(close_write, &["/r/src/a.rs"]));
        assert_eq!(b.quiet(debounce), SETTLED_QUIET);
        // Never longer than the debounce asked for.
        assert_eq!(b.quiet(Duration::from_millis(5)), Duration::from_millis(5));
        // Written again: open for writing again.
        b.add(root, event(modify, &["/r/src/a.rs"]));
        assert_eq!(b.quiet(debounce), debounce);
        b.add(root, event(close_write, &["/r/src/a.rs"]));
        // A second file (a checkout, a save through a temporary file): the
        // whole debounce, so a burst stays one batch.
        b.add(root, event(modify, &["/r/src/b.rs"]));
        b.add(root, event(close_write, &["/r/src/b.rs"]));
        assert_eq!(b.quiet(debounce), debounce);
        // A batch that goes over the whole repository waits too.
        let mut b = Batch::default();
        b.add(root, event(modify, &["/r/.gitignore"]));
        b.add(root, event(close_write, &["/r/.gitignore"]));
        assert_eq!(b.quiet(debounce), debounce);
    }
}
