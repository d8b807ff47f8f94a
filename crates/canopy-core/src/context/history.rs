//! The git history the `history` strategy reads: the latest commits that
//! touched the focus files, each with its time, subject and files.
//!
//! Asking git for them (`git log -n50 -- FILES`) walks the history until it
//! has found enough commits: on Django's 31,881 commits, 0.13 s on an idle
//! machine for a rarely changed file, most of a one-off context pack's
//! time. A one-off command reads them from the log kept on disk instead
//! (`.canopy/history.bin`, [`crate::context::history_file`]: written at the
//! first request, extended as `HEAD` moves forward), and asks git only
//! where that file cannot be kept. A long-lived engine (`canopy mcp`, `canopy serve`:
//! [`HistoryLog::keep`]) instead keeps the whole non-merge log of one `HEAD`
//! in memory: the history file when it holds the whole log at `HEAD`
//! (loaded at the first request), else read in a thread of its own (the
//! file extended or rebuilt; git's whole log when the history is longer
//! than the file keeps) while requests go on asking git. Both list the
//! same commits in the same order: the
//! log flags are shared, and `--full-history` keeps git from simplifying
//! the per-file walk (without it, a commit on a side branch whose merge
//! kept the other side's version of the file was left out, which a log of
//! the whole history cannot tell per file).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;

use crate::context::cochange::{self, CoChanged, FileChange};
use crate::context::history_file;
use crate::store::Store;
use crate::store::read::NodeRecord;

/// One commit as the history strategy reads it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Commit {
    /// The commit id.
    pub(crate) id: String,
    /// Committer time, Unix seconds.
    pub(crate) time: i64,
    pub(crate) subject: String,
    /// Every file the commit changed (not only the asked-for ones), as git
    /// names them: relative to the top of the repository.
    pub(crate) files: Vec<String>,
}

/// The flags of both logs: non-merge commits, renames as delete and add,
/// every commit that touched a path (see the module docs), one record per
/// commit (`\x1e`, then id `\x1f` time `\x1f` subject, then its files one a line).
pub(crate) const LOG_FLAGS: [&str; 5] = [
    "--no-merges",
    "--no-renames",
    "--full-history",
    "--format=%x1e%H%x1f%ct%x1f%s",
    "--name-only",
];

/// The git history of one repository for context packs.
#[derive(Default)]
pub struct HistoryLog {
    /// Whether the whole log is read and kept ([`HistoryLog::keep`]).
    kept: AtomicBool,
    state: Mutex<LogState>,
    /// Each commit's `-U0` diff, by commit id (a commit never changes).
    diffs: Mutex<HashMap<String, KeptDiff>>,
    /// The co-change counts of a focus ([`HistoryLog::co_changed`]) and the
    /// note when its diffs were cut, by the commits read, the focus and the
    /// index generation.
    co: Mutex<HashMap<String, CoChangedWith>>,
    /// The bound on one request's diffs in bytes, when not
    /// [`HISTORY_DIFF_BYTES`] (tests lower it).
    diff_bytes: Option<usize>,
    /// What git last said of `HEAD`, kept while the files it is read from
    /// stay the same ([`HeadStamp`]): a repeated request starts no git.
    head: Mutex<Option<KnownHead>>,
    /// The history file ([`crate::context::history_file`]): a process that
    /// does not keep the log reads, extends or writes it in place of
    /// walking the history per request; one that keeps it starts from it.
    disk: Option<PathBuf>,
}

/// Git's answers about `HEAD` at one root, valid while its stamp holds.
struct KnownHead {
    root: PathBuf,
    stamp: HeadStamp,
    /// [`top_level_head`]'s answer, once asked.
    top: Option<Option<String>>,
    /// [`head_time`]'s answer, once asked.
    time: Option<Option<i64>>,
}

/// Kept diffs beyond which the cache starts again (about 100 MB of Django's).
const KEPT_DIFFS: usize = 20_000;

/// The most bytes of `git show -U0` output one focus's history reads: the
/// newest commits whose diffs fit together are counted, older ones are
/// left out and the pack says so. On Django the 50 latest commits of a
/// busy file print 130–400 KiB (0.2–0.5 s of git on a loaded machine), and
/// one commit (a sweep that rewrote a module) can print megabytes.
pub const HISTORY_DIFF_BYTES: usize = 128 * 1024;

/// One commit's diff as kept: its changes and the bytes git printed for it
/// (which the bound counts, whether read now or earlier).
#[derive(Clone)]
struct KeptDiff {
    changes: Arc<Vec<FileChange>>,
    bytes: usize,
}

/// A focus's co-changed units, and the note when not every commit's diff
/// was read.
type CoChangedWith = (Arc<Vec<CoChanged>>, Option<String>);

#[derive(Default)]
enum LogState {
    #[default]
    Unread,
    /// Being read for this `HEAD`.
    Reading {
        head: String,
        thread: JoinHandle<Result<WholeLog, String>>,
    },
    Read(Arc<WholeLog>),
    /// Reading it for this `HEAD` failed: asked of git per request.
    Failed {
        head: String,
    },
}

impl HistoryLog {
    /// A history that, until [`HistoryLog::keep`] is asked, reads and keeps
    /// the log in the history file at `path` (in the index directory).
    pub(crate) fn with_file(path: PathBuf) -> HistoryLog {
        HistoryLog {
            disk: Some(path),
            ..HistoryLog::default()
        }
    }

    /// Reads the whole log once per `HEAD` and answers from it (a process
    /// that serves many requests; a one-off command would read it for one).
    pub(crate) fn keep(&self) {
        self.kept.store(true, Ordering::Relaxed);
    }

    /// Whether [`HistoryLog::keep`] was asked (a long-lived process).
    pub(crate) fn is_kept(&self) -> bool {
        self.kept.load(Ordering::Relaxed)
    }

    /// The latest `limit` non-merge commits that touched any of `files`
    /// (paths relative to `root`), newest first; `Err` with a note for the
    /// pack when there is no history to read.
    #[cfg(test)]
    pub(crate) fn commits_touching(
        &self,
        root: &Path,
        files: &[&str],
        limit: usize,
    ) -> Result<Vec<Commit>, String> {
        self.commits_and_time(root, files, limit).0
    }

    /// [`HistoryLog::commits_touching`], with `HEAD`'s time when the
    /// history file gave it (then git need not be asked for it).
    fn commits_and_time(
        &self,
        root: &Path,
        files: &[&str],
        limit: usize,
    ) -> (Result<Vec<Commit>, String>, Option<i64>) {
        let kept = self.kept.load(Ordering::Relaxed);
        if (kept || self.disk.is_some())
            && let Some(head) = self.known(root, |k| &mut k.top, || top_level_head(root))
        {
            if kept {
                if let Some(log) = self.whole(root, &head)
                    && let Some(commits) = log.touching(files, limit)
                {
                    return (Ok(commits), None);
                }
            } else if let Some(path) = &self.disk
                && let Some((commits, time)) = history_file::answer(path, root, &head, files, limit)
            {
                return (Ok(commits), Some(time));
            }
        }
        (git_log(root, files, limit), None)
    }

    /// The whole log at `head` when it has been read; otherwise starts
    /// reading it (unless that is under way, or failed for this `head`).
    fn whole(&self, root: &Path, head: &str) -> Option<Arc<WholeLog>> {
        let mut state = lock(&self.state);
        if matches!(&*state, LogState::Reading { thread, .. } if thread.is_finished())
            && let LogState::Reading { head: read, thread } = std::mem::take(&mut *state)
        {
            *state = match thread.join() {
                Ok(Ok(log)) => LogState::Read(Arc::new(log)),
                Ok(Err(why)) => {
                    tracing::debug!(%why, "cannot read the whole git log; asking git per request");
                    LogState::Failed { head: read }
                }
                Err(_) => LogState::Failed { head: read },
            };
        }
        match &*state {
            LogState::Read(log) if log.head == head => return Some(Arc::clone(log)),
            LogState::Reading { .. } => return None,
            LogState::Failed { head: failed } if failed == head => return None,
            _ => {}
        }
        // The history file one-off processes keep, when it holds the whole
        // log at this `HEAD`, is that log: loaded here (a few ms), so even
        // the first request answers from it. Otherwise the thread below
        // extends or rebuilds it and answers from it.
        let disk = self
            .disk
            .as_ref()
            .filter(|_| history_file::cacheable(root))
            .cloned();
        let old = disk.as_deref().and_then(history_file::HistoryFile::load);
        let old = match old {
            Some(file) if file.head() == head && file.is_complete() => {
                tracing::debug!("the whole git log read from the history file");
                let log = Arc::new(WholeLog {
                    head: head.to_string(),
                    table: LogTable::File(file),
                });
                *state = LogState::Read(Arc::clone(&log));
                return Some(log);
            }
            old => old,
        };
        let (root, head) = (root.to_path_buf(), head.to_string());
        let spawned = std::thread::Builder::new()
            .name("canopy-git-log".into())
            .spawn({
                let head = head.clone();
                move || WholeLog::read_kept(&root, &head, disk.as_deref(), old)
            });
        match spawned {
            Ok(thread) => *state = LogState::Reading { head, thread },
            Err(e) => tracing::warn!("no thread to read the git log: {e}"),
        }
        None
    }

    /// Where a one-off process keeps commits' diffs: beside the history
    /// file, where that is kept ([`history_file::cacheable`]: in a shallow
    /// clone a boundary commit's diff changes when the clone is deepened).
    fn diffs_dir(&self, root: &Path) -> Option<PathBuf> {
        let file = self.disk.as_ref()?;
        if self.kept.load(Ordering::Relaxed) || !history_file::cacheable(root) {
            return None;
        }
        Some(file.with_file_name(history_file::DIFFS_DIR))
    }

    /// `HEAD`'s committer time (Unix seconds): what "N days ago" counts
    /// from, so a pack of a checked-out tree does not change as days pass.
    pub(crate) fn head_time(&self, root: &Path) -> Option<i64> {
        self.known(root, |k| &mut k.time, || head_time(root))
    }

    /// One of git's answers about `HEAD` (`field` of [`KnownHead`]): kept
    /// from an earlier request while `HEAD`'s files are unchanged, else
    /// asked (`ask`) and kept. The stamp is read before git is asked, so
    /// a `HEAD` that moves in between is asked again next time.
    fn known<T: Clone>(
        &self,
        root: &Path,
        field: fn(&mut KnownHead) -> &mut Option<T>,
        ask: impl FnOnce() -> T,
    ) -> T {
        let Some(stamp) = HeadStamp::read(root) else {
            return ask();
        };
        {
            let mut known = lock(&self.head);
            if let Some(k) = known
                .as_mut()
                .filter(|k| k.root == root && k.stamp == stamp)
                && let Some(answer) = field(k)
            {
                return answer.clone();
            }
        }
        let answer = ask();
        let mut known = lock(&self.head);
        if !matches!(&*known, Some(k) if k.root == root && k.stamp == stamp) {
            *known = Some(KnownHead {
                root: root.to_path_buf(),
                stamp,
                top: None,
                time: None,
            });
        }
        if let Some(k) = known.as_mut() {
            *field(k) = Some(answer.clone());
        }
        answer
    }
}

/// What `HEAD` is read from, as plain file reads (no process): `HEAD`
/// itself, the ref it names when it names one, and `packed-refs` (and a
/// reftable's table list). A commit, checkout, reset or fetch into the
/// branch rewrites one of them (git replaces ref files by renaming a new
/// one in, so a rewritten `packed-refs` is a new inode).
#[derive(Clone, Debug, PartialEq, Eq)]
struct HeadStamp {
    head: Vec<u8>,
    /// The named ref's own file, in the work tree's git dir and in the
    /// common one (a linked work tree's branches are in the common one).
    refs: Vec<Option<Vec<u8>>>,
    packed: Option<FileStamp>,
    reftable: Option<Vec<u8>>,
}

/// A file's identity and last change, for a file too long to read whole.
#[derive(Clone, Debug, PartialEq, Eq)]
struct FileStamp {
    len: u64,
    modified: Option<std::time::SystemTime>,
    inode: u64,
}

impl HeadStamp {
    /// `None` when `root` has no `.git` of its own, when git is pointed
    /// elsewhere by the environment, or when `HEAD` names a symbolic ref
    /// this does not follow: then git is asked on every request.
    fn read(root: &Path) -> Option<HeadStamp> {
        if ["GIT_DIR", "GIT_COMMON_DIR", "GIT_WORK_TREE"]
            .iter()
            .any(|v| std::env::var_os(v).is_some())
        {
            return None;
        }
        let (git_dir, common) = history_file::git_dirs(root)?;
        let head = std::fs::read(git_dir.join("HEAD")).ok()?;
        let mut refs = Vec::new();
        if let Some(name) = head.strip_prefix(b"ref:") {
            let name = std::str::from_utf8(name).ok()?.trim();
            if name.is_empty() || name.contains("..") {
                return None;
            }
            for dir in [&git_dir, &common] {
                let text = std::fs::read(dir.join(name)).ok();
                if text.as_deref().is_some_and(|t| t.starts_with(b"ref:")) {
                    return None;
                }
                refs.push(text);
            }
        }
        Some(HeadStamp {
            head,
            refs,
            packed: file_stamp(&common.join("packed-refs")),
            reftable: std::fs::read(common.join("reftable").join("tables.list")).ok(),
        })
    }
}

fn file_stamp(path: &Path) -> Option<FileStamp> {
    let meta = std::fs::metadata(path).ok()?;
    #[cfg(unix)]
    let inode = std::os::unix::fs::MetadataExt::ino(&meta);
    #[cfg(not(unix))]
    let inode = 0;
    Some(FileStamp {
        len: meta.len(),
        modified: meta.modified().ok(),
        inode,
    })
}

/// What the history strategy asks git for one focus: the commits that
/// touched its files, their diffs unless the focus's co-change counts are
/// kept, and `HEAD`'s time. It needs no store, so it can run in a thread of
/// its own while the request ranks the task ([`HistoryLog::read_git`]).
pub(crate) struct GitRead {
    /// The latest commits touching the focus files, or the note why none.
    pub(crate) commits: Result<Vec<Commit>, String>,
    /// The commits' diffs, read when the counts were not kept.
    pub(crate) diffs: Option<Result<DiffsRead, String>>,
    /// `HEAD`'s committer time ([`HistoryLog::head_time`]).
    pub(crate) head_time: Option<i64>,
}

/// The key of a focus's kept co-change counts: index generation, the
/// commits read (how many, the newest) and the focus units.
fn co_key(generation: u64, commits: &[Commit], focus: &[NodeRecord]) -> String {
    let mut key = format!(
        "{generation}|{}|{}",
        commits.len(),
        commits.first().map_or("", |c| c.id.as_str())
    );
    for f in focus {
        key.push_str(&format!("|{}", f.rowid));
    }
    key
}

impl HistoryLog {
    /// Everything git says for `focus` (non-empty) at index `generation`:
    /// the latest `limit` commits of its files, their diffs when
    /// [`HistoryLog::co_changed`] will need them, and `HEAD`'s time. The
    /// same questions the strategy would ask one after another, so its
    /// answer does not depend on whether this ran first.
    pub(crate) fn read_git(
        &self,
        root: &Path,
        focus: &[NodeRecord],
        generation: u64,
        limit: usize,
    ) -> GitRead {
        let mut files: Vec<&str> = focus.iter().map(|n| n.file_path.as_str()).collect();
        files.sort_unstable();
        files.dedup();
        let (commits, file_time) = self.commits_and_time(root, &files, limit);
        let diffs = match &commits {
            Ok(c)
                if !c.is_empty() && !lock(&self.co).contains_key(&co_key(generation, c, focus)) =>
            {
                Some(self.diffs_of(root, focus, c))
            }
            _ => None,
        };
        let head_time = match &commits {
            Ok(c) if !c.is_empty() => file_time.or_else(|| self.head_time(root)),
            _ => None,
        };
        GitRead {
            commits,
            diffs,
            head_time,
        }
    }

    /// The units changed together with `focus` in `commits` (newest first):
    /// counted once per focus, index generation and history read, and kept.
    /// `read` holds the commits' diffs when [`HistoryLog::read_git`] read
    /// them already; otherwise they are read here.
    pub(crate) fn co_changed(
        &self,
        store: &Store,
        root: &Path,
        focus: &[NodeRecord],
        commits: &[Commit],
        read: Option<Result<DiffsRead, String>>,
    ) -> crate::error::Result<Result<CoChangedWith, String>> {
        let key = co_key(store.generation()?, commits, focus);
        if let Some(hit) = lock(&self.co).get(&key) {
            return Ok(Ok(hit.clone()));
        }
        let (diffs, note) = match read.unwrap_or_else(|| self.diffs_of(root, focus, commits)) {
            Ok(d) => d,
            Err(why) => return Ok(Err(why)),
        };
        let found = Arc::new(cochange::co_changed(store, focus, commits, &diffs)?);
        let mut co = lock(&self.co);
        if co.len() >= KEPT_DIFFS {
            co.clear();
        }
        co.insert(key, (Arc::clone(&found), note.clone()));
        Ok(Ok((found, note)))
    }

    /// The diffs of `commits`: all of a small commit, only the focus files
    /// of a large one (kept under `id|files`); each read from git once.
    /// Only the newest commits whose diffs fit in the bound together are
    /// given (counting kept diffs too, so the answer does not depend on what
    /// earlier requests read), with a note for the pack when that is not all.
    fn diffs_of(
        &self,
        root: &Path,
        focus: &[NodeRecord],
        commits: &[Commit],
    ) -> Result<DiffsRead, String> {
        let mut files: Vec<&str> = focus.iter().map(|n| n.file_path.as_str()).collect();
        files.sort_unstable();
        files.dedup();
        let large_key = |id: &str| format!("{id}|{}", files.join("|"));
        let is_small = |c: &Commit| c.files.len() <= cochange::MAX_FILES;
        let key = |c: &Commit| {
            if is_small(c) {
                c.id.clone()
            } else {
                large_key(&c.id)
            }
        };
        let (mut sized, mut small, mut large) = (HashMap::new(), Vec::new(), Vec::new());
        {
            let kept = lock(&self.diffs);
            for c in commits {
                match kept.get(&key(c)) {
                    Some(d) => {
                        sized.insert(c.id.clone(), d.clone());
                    }
                    None if is_small(c) => small.push(c.id.as_str()),
                    None => large.push(c.id.as_str()),
                }
            }
        }
        // A one-off process reads the diffs earlier ones wrote (a commit's
        // diff never changes), as a server keeps them in memory.
        let on_disk = self.diffs_dir(root);
        if let Some(dir) = &on_disk {
            for (list, large) in [(&mut small, false), (&mut large, true)] {
                list.retain(|id| {
                    let name = history_file::diff_name(id, large.then_some(&files[..]));
                    match history_file::load_diff(&dir.join(name)) {
                        Some((changes, bytes)) => {
                            let d = KeptDiff {
                                changes: Arc::new(changes),
                                bytes,
                            };
                            sized.insert(id.to_string(), d);
                            false
                        }
                        None => true,
                    }
                });
            }
        }
        let bound = self.diff_bytes.unwrap_or(HISTORY_DIFF_BYTES);
        let read_small = cochange::git_diffs(root, &small, &[], bound)?;
        let read_large = cochange::git_diffs(root, &large, &files, bound)?;
        let mut kept = lock(&self.diffs);
        if kept.len() + read_small.diffs.len() + read_large.diffs.len() > KEPT_DIFFS {
            kept.clear();
        }
        for (read, large) in [(read_small.diffs, false), (read_large.diffs, true)] {
            for (id, (changes, bytes)) in read {
                if let Some(dir) = &on_disk {
                    let name = history_file::diff_name(&id, large.then_some(&files[..]));
                    history_file::store_diff(&dir.join(name), &changes, bytes);
                }
                let d = KeptDiff {
                    changes: Arc::new(changes),
                    bytes,
                };
                kept.insert(if large { large_key(&id) } else { id.clone() }, d.clone());
                sized.insert(id, d);
            }
        }
        drop(kept);
        let (mut out, mut total) = (HashMap::new(), 0usize);
        for (i, c) in commits.iter().enumerate() {
            let stopped = if is_small(c) {
                read_small.stopped
            } else {
                read_large.stopped
            };
            match sized.get(&c.id) {
                Some(d) if total + d.bytes <= bound => {
                    total += d.bytes;
                    out.insert(c.id.clone(), Arc::clone(&d.changes));
                }
                // Past the bound (not read, or read but too much with the newer ones).
                Some(_) => return Ok((out, Some(partial(i, commits.len(), bound)))),
                None if stopped => return Ok((out, Some(partial(i, commits.len(), bound)))),
                None => {} // git could not show it
            }
        }
        Ok((out, None))
    }
}

/// The diffs of the commits read, by commit id, and the note when the
/// bound left older ones out.
pub(crate) type DiffsRead = (HashMap<String, Arc<Vec<FileChange>>>, Option<String>);

/// The note of a history cut at the bound, under the header's 60 characters.
fn partial(read: usize, of: usize, bound: usize) -> String {
    format!(
        "partial: newest {read} of {of} commits read ({} KiB of diffs)",
        bound / 1024
    )
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// `HEAD`'s commit id when `root` is the top of a git work tree (whose
/// log names files as the index does); `None` otherwise.
fn top_level_head(root: &Path) -> Option<String> {
    let output = Command::new("git")
        .arg("-C")
        .arg(root)
        .args(["rev-parse", "HEAD", "--show-prefix"])
        .output()
        .ok()?;
    if !output.status.success() {
        return None;
    }
    let text = String::from_utf8(output.stdout).ok()?;
    let mut lines = text.lines();
    let head = lines.next()?.trim();
    let prefix = lines.next().unwrap_or("").trim();
    (prefix.is_empty() && !head.is_empty()).then(|| head.to_string())
}

/// `HEAD`'s committer time (Unix seconds), asked of git.
pub(crate) fn head_time(root: &Path) -> Option<i64> {
    let output = Command::new("git")
        .arg("-C")
        .arg(root)
        .args(["log", "-1", "--format=%ct", "HEAD"])
        .output()
        .ok()?;
    if !output.status.success() {
        return None;
    }
    String::from_utf8(output.stdout).ok()?.trim().parse().ok()
}

/// Every non-merge commit reachable from one `HEAD`, indexed by file.
struct WholeLog {
    head: String,
    table: LogTable,
}

/// Where a whole log's commits are: read from git into memory, or the
/// history file of one-off processes when it holds the whole log (the same
/// commits in the same order: [`history_file`]'s tests hold it to git's).
enum LogTable {
    Parsed(ParsedLog),
    File(history_file::HistoryFile),
}

/// A whole log read from git.
struct ParsedLog {
    /// In git's order, newest first.
    commits: Vec<LoggedCommit>,
    paths: Vec<String>,
    /// Per path (by its index in `paths`), the commits that touched it,
    /// ascending (newest first).
    touched_by: Vec<Vec<u32>>,
    path_ids: HashMap<String, u32>,
}

struct LoggedCommit {
    id: String,
    time: i64,
    subject: String,
    files: Vec<u32>,
}

impl WholeLog {
    /// The whole log at `head` for a long-lived process: from the history
    /// file at `disk` (`old` is what was read from it), extended or
    /// rebuilt and written as a one-off process does, when it then holds
    /// the whole log; otherwise (no file kept here, git failed, a history
    /// longer than the file keeps) read from git.
    fn read_kept(
        root: &Path,
        head: &str,
        disk: Option<&Path>,
        old: Option<history_file::HistoryFile>,
    ) -> Result<WholeLog, String> {
        if let Some(path) = disk
            && let Some(file) = history_file::refreshed(path, root, head, old)
            && file.is_complete()
        {
            tracing::debug!("the whole git log read into the history file");
            return Ok(WholeLog {
                head: head.to_string(),
                table: LogTable::File(file),
            });
        }
        WholeLog::read(root, head)
    }

    fn read(root: &Path, head: &str) -> Result<WholeLog, String> {
        let started = std::time::Instant::now();
        let output = Command::new("git")
            .arg("-C")
            .arg(root)
            .arg("log")
            .args(LOG_FLAGS)
            .arg(head)
            .arg("--")
            .output()
            .map_err(|e| format!("git could not run: {e}"))?;
        if !output.status.success() {
            return Err(String::from_utf8_lossy(&output.stderr).trim().to_string());
        }
        let mut log = ParsedLog {
            commits: Vec::new(),
            paths: Vec::new(),
            touched_by: Vec::new(),
            path_ids: HashMap::new(),
        };
        for commit in parse_log(&String::from_utf8_lossy(&output.stdout)) {
            let at = log.commits.len() as u32;
            let mut files = Vec::with_capacity(commit.files.len());
            for path in commit.files {
                let id = match log.path_ids.get(&path) {
                    Some(&id) => id,
                    None => {
                        let id = log.paths.len() as u32;
                        log.path_ids.insert(path.clone(), id);
                        log.paths.push(path);
                        log.touched_by.push(Vec::new());
                        id
                    }
                };
                if let Some(list) = log.touched_by.get_mut(id as usize)
                    && list.last() != Some(&at)
                {
                    list.push(at);
                }
                files.push(id);
            }
            log.commits.push(LoggedCommit {
                id: commit.id,
                time: commit.time,
                subject: commit.subject,
                files,
            });
        }
        tracing::debug!(
            commits = log.commits.len(),
            files = log.paths.len(),
            ms = started.elapsed().as_millis() as u64,
            "read the whole git log"
        );
        Ok(WholeLog {
            head: head.to_string(),
            table: LogTable::Parsed(log),
        })
    }

    /// What `git log -n LIMIT -- FILES` with [`LOG_FLAGS`] lists; `None`
    /// only when a history file cannot be read as written (git is asked).
    fn touching(&self, files: &[&str], limit: usize) -> Option<Vec<Commit>> {
        match &self.table {
            LogTable::Parsed(log) => Some(log.touching(files, limit)),
            LogTable::File(file) => file.touching(files, limit),
        }
    }
}

impl ParsedLog {
    /// What `git log -n LIMIT -- FILES` with [`LOG_FLAGS`] lists.
    fn touching(&self, files: &[&str], limit: usize) -> Vec<Commit> {
        let mut at: Vec<u32> = files
            .iter()
            .filter_map(|f| self.path_ids.get(*f))
            .filter_map(|&id| self.touched_by.get(id as usize))
            .flat_map(|list| list.iter().take(limit).copied())
            .collect();
        at.sort_unstable();
        at.dedup();
        at.truncate(limit);
        at.into_iter()
            .filter_map(|i| self.commits.get(i as usize))
            .map(|c| Commit {
                id: c.id.clone(),
                time: c.time,
                subject: c.subject.clone(),
                files: c
                    .files
                    .iter()
                    .filter_map(|&id| self.paths.get(id as usize).cloned())
                    .collect(),
            })
            .collect()
    }
}

/// `git log` of the given files: each commit's time, subject and files.
pub(crate) fn git_log(root: &Path, files: &[&str], limit: usize) -> Result<Vec<Commit>, String> {
    let output = Command::new("git")
        .arg("-C")
        .arg(root)
        .arg("log")
        .args(LOG_FLAGS)
        .args(["--full-diff", &format!("-n{limit}"), "--"])
        .args(files)
        .output()
        .map_err(|e| format!("git could not run: {e}"))?;
    if !output.status.success() {
        return Err(why_no_log(&String::from_utf8_lossy(&output.stderr)));
    }
    Ok(parse_log(&String::from_utf8_lossy(&output.stdout)))
}

/// The pack's note for a `git log` that failed, in a few words: git's
/// error names the directories it searched, which the agent does not need.
fn why_no_log(stderr: &str) -> String {
    let Some(first) = stderr.lines().map(str::trim).find(|l| !l.is_empty()) else {
        return "git log failed".to_string();
    };
    if first.contains("not a git repository") {
        return "not a git repository".to_string();
    }
    let first = first.strip_prefix("fatal: ").unwrap_or(first);
    format!("git log failed: {first}")
}

/// The records of a log printed with [`LOG_FLAGS`].
pub(crate) fn parse_log(text: &str) -> Vec<Commit> {
    let mut commits = Vec::new();
    for record in text.split('\u{1e}').filter(|r| !r.trim().is_empty()) {
        let mut lines = record.lines();
        let Some(head) = lines.next() else { continue };
        let mut parts = head.splitn(3, '\u{1f}');
        let id = parts.next().unwrap_or("").trim().to_string();
        let time = parts.next().unwrap_or("");
        let subject = parts.next().unwrap_or("");
        commits.push(Commit {
            id,
            time: time.trim().parse().unwrap_or(0),
            subject: subject.to_string(),
            files: lines
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .map(String::from)
                .collect(),
        });
    }
    commits
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn git(dir: &Path, args: &[&str]) {
        let out = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args([
                "-c",
                "user.name=T",
                "-c",
                "user.email=t@example.com",
                "-c",
                "commit.gpgsign=false",
            ])
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    pub(crate) fn commit(dir: &Path, files: &[(&str, &str)], message: &str) {
        for (path, text) in files {
            let path = dir.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        git(dir, &["add", "-A"]);
        git(dir, &["commit", "-q", "-m", message]);
    }

    /// A history with a side branch whose change to `core.py` the main line
    /// also made: git's default per-file walk would leave the branch's
    /// commit out (the merge kept main's identical file).
    /// File sets to ask the fixture's log about: each file alone, two
    /// together, a doc beside code, a deleted file.
    pub(crate) const ASKS: [&[&str]; 6] = [
        &["core.py"],
        &["util.py"],
        &["side.py"],
        &["core.py", "util.py"],
        &["docs/notes.md", "side.py"],
        &["gone.py"],
    ];

    pub(crate) fn repo() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let r = dir.path();
        git(r, &["init", "-q", "-b", "main"]);
        commit(r, &[("core.py", "a\n"), ("util.py", "u\n")], "start");
        git(r, &["checkout", "-q", "-b", "side"]);
        commit(r, &[("core.py", "b\n"), ("side.py", "s\n")], "side: core b");
        git(r, &["checkout", "-q", "main"]);
        commit(
            r,
            &[("core.py", "b\n"), ("util.py", "u2\n")],
            "main: core b",
        );
        git(r, &["merge", "-q", "--no-edit", "side"]);
        for i in 0..5 {
            let text = format!("{i}\n");
            commit(
                r,
                &[("core.py", &text), ("docs/notes.md", &text)],
                &format!("core {i}"),
            );
        }
        commit(r, &[("util.py", "u3\n")], "util alone");
        dir
    }

    pub(crate) fn head(root: &Path) -> String {
        top_level_head(root).expect("a work tree's top")
    }

    #[test]
    fn the_whole_log_lists_what_git_lists_per_file() {
        let dir = repo();
        let root = dir.path();
        let log = WholeLog::read(root, &head(root)).unwrap();
        for files in ASKS {
            for limit in [1, 3, 50] {
                assert_eq!(
                    log.touching(files, limit).unwrap(),
                    git_log(root, files, limit).unwrap(),
                    "{files:?} -n{limit}"
                );
            }
        }
        // The side branch's commit is there, with every file it changed.
        let core = log.touching(&["core.py"], 50).unwrap();
        let side = core.iter().find(|c| c.subject == "side: core b").unwrap();
        assert_eq!(side.files, ["core.py", "side.py"]);
        assert_eq!(core.len(), 8, "start, both core b, five more");
        assert_eq!(core[0].subject, "core 4");
    }

    #[test]
    fn a_kept_log_is_read_once_per_head_and_answers_as_git_does() {
        let dir = repo();
        let root = dir.path();
        let history = HistoryLog::default();
        history.keep();
        let per_request = git_log(root, &["core.py"], 50).unwrap();
        // The first request asks git while the log is read beside it.
        assert_eq!(
            history.commits_touching(root, &["core.py"], 50).unwrap(),
            per_request
        );
        let first = history.wait_for_log(root).expect("read");
        assert_eq!(
            history.commits_touching(root, &["core.py"], 50).unwrap(),
            per_request
        );
        // A new commit moves HEAD: that log is read again, with it.
        commit(root, &[("core.py", "new\n")], "after");
        let second = history.wait_for_log(root).expect("read again");
        assert_ne!(first.head, second.head);
        let now = history.commits_touching(root, &["core.py"], 50).unwrap();
        assert_eq!(now, git_log(root, &["core.py"], 50).unwrap());
        assert_eq!(now[0].subject, "after");
    }

    /// A long-lived history starts from the history file when it holds
    /// the whole log at `HEAD`: loaded at the first request (no thread, no
    /// `git log`), answering as git does; when `HEAD` moves forward its
    /// thread extends the file, and the log it keeps is the file's.
    #[test]
    fn a_kept_log_starts_from_the_history_file() {
        let (dir, out) = (repo(), tempfile::tempdir().unwrap());
        let (root, file) = (dir.path(), out.path().join(history_file::FILE_NAME));
        let asks: [&[&str]; 4] = [
            &["core.py"],
            &["side.py"],
            &["core.py", "util.py"],
            &["gone.py"],
        ];
        // A one-off process wrote the file.
        HistoryLog::with_file(file.clone())
            .commits_touching(root, &["core.py"], 50)
            .unwrap();
        let written = std::fs::read(&file).expect("written by the one-off process");
        let server = HistoryLog::with_file(file.clone());
        server.keep();
        for files in asks {
            assert_eq!(
                server.commits_touching(root, files, 50).unwrap(),
                git_log(root, files, 50).unwrap(),
                "{files:?}"
            );
        }
        match &*lock(&server.state) {
            LogState::Read(log) => {
                assert!(matches!(log.table, LogTable::File(_)));
                assert_eq!(log.head, head(root));
            }
            _ => panic!("the first request answered from the file"),
        }
        assert_eq!(
            std::fs::read(&file).unwrap(),
            written,
            "read, not rewritten"
        );
        // HEAD moves forward: the server's thread extends the file.
        commit_file_at(root, "core.py", "later", 1_900_000_000);
        let log = server.wait_for_log(root).expect("read again");
        assert!(matches!(log.table, LogTable::File(_)));
        let on_disk = history_file::HistoryFile::load(&file).expect("extended");
        assert_eq!(on_disk.head(), head(root));
        for files in asks {
            assert_eq!(
                server.commits_touching(root, files, 50).unwrap(),
                git_log(root, files, 50).unwrap(),
                "{files:?} after the new commit"
            );
        }
        // A server without a file writes one, for the next process.
        std::fs::remove_file(&file).unwrap();
        let fresh = HistoryLog::with_file(file.clone());
        fresh.keep();
        let log = fresh.wait_for_log(root).expect("read");
        assert!(matches!(log.table, LogTable::File(_)));
        assert_eq!(
            history_file::HistoryFile::load(&file).unwrap().head(),
            head(root)
        );
    }

    /// A commit of `core.py` at a fixed time (2031-01-01, Unix 1,924,992,000).
    pub(crate) fn commit_in_2031(dir: &Path, message: &str) {
        commit_file_at(dir, "core.py", message, 1_924_992_000);
    }

    /// A commit of `path` (its content: `message`) at Unix time `at`.
    pub(crate) fn commit_file_at(dir: &Path, path: &str, message: &str, at: i64) {
        std::fs::write(dir.join(path), message).unwrap();
        git(dir, &["add", "-A"]);
        let out = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(["-c", "user.name=T", "-c", "user.email=t@example.com"])
            .args(["-c", "commit.gpgsign=false", "commit", "-q", "-m", message])
            .env("GIT_COMMITTER_DATE", format!("@{at} +0000"))
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    }

    /// HEAD's id and time are kept between requests, and a commit or a
    /// checkout is seen by the very next request (the kept log of the old
    /// HEAD is not used for it).
    #[test]
    fn a_kept_head_is_asked_again_once_head_moves() {
        let dir = repo();
        let root = dir.path();
        let history = HistoryLog::default();
        history.keep();
        history.commits_touching(root, &["core.py"], 50).unwrap();
        history.wait_for_log(root).expect("read");
        let then = history.head_time(root).expect("a time");
        assert_eq!(
            history.commits_touching(root, &["core.py"], 50).unwrap()[0].subject,
            "core 4"
        );
        {
            let known = lock(&history.head);
            let k = known.as_ref().expect("kept");
            assert_eq!(k.top, Some(Some(head(root))));
            assert_eq!(k.time, Some(Some(then)));
            assert_eq!(Some(&k.stamp), HeadStamp::read(root).as_ref());
        }
        commit_in_2031(root, "after");
        let now = history.commits_touching(root, &["core.py"], 50).unwrap();
        assert_eq!(now[0].subject, "after", "the new HEAD, not the kept log");
        assert_eq!(history.head_time(root), Some(1_924_992_000));
        // A detached checkout of the commit before (HEAD's own file only).
        git(root, &["checkout", "-q", "--detach", "HEAD~1"]);
        assert_eq!(history.head_time(root), Some(then));
        let back = history.commits_touching(root, &["core.py"], 50).unwrap();
        assert_eq!(back[0].subject, "core 4");
        // Back on the branch, after it was packed (its loose ref is gone).
        git(root, &["checkout", "-q", "main"]);
        git(root, &["pack-refs", "--all"]);
        assert!(!root.join(".git/refs/heads/main").exists());
        assert_eq!(history.head_time(root), Some(1_924_992_000));
    }

    /// A linked work tree (`.git` is a file; its branches are in the
    /// common git dir) is followed as well.
    #[test]
    fn a_linked_work_tree_sees_its_own_commits() {
        let dir = repo();
        let linked = dir.path().join("linked");
        git(
            dir.path(),
            &["worktree", "add", "-q", "-b", "other", "linked"],
        );
        let history = HistoryLog::default();
        let then = history.head_time(&linked).expect("a time");
        assert!(HeadStamp::read(&linked).is_some());
        commit_in_2031(&linked, "in the linked tree");
        assert_eq!(history.head_time(&linked), Some(1_924_992_000));
        assert_ne!(history.head_time(dir.path()), Some(1_924_992_000));
        assert!(then < 1_924_992_000);
    }

    #[test]
    fn outside_git_both_paths_give_the_note() {
        let dir = tempfile::tempdir().unwrap();
        let history = HistoryLog::default();
        history.keep();
        let err = history
            .commits_touching(dir.path(), &["a.py"], 50)
            .unwrap_err();
        assert_eq!(err, "not a git repository");
    }

    #[test]
    fn a_failed_log_says_why_in_a_few_words() {
        assert_eq!(
            why_no_log("fatal: not a git repository (or any of the parent directories): .git\n"),
            "not a git repository"
        );
        assert_eq!(
            why_no_log("fatal: detected dubious ownership in repository at '/x'\nmore\n"),
            "git log failed: detected dubious ownership in repository at '/x'"
        );
        assert_eq!(why_no_log(""), "git log failed");
    }

    /// Diffs by commit id, sorted by it.
    type SortedDiffs = Vec<(String, Vec<FileChange>)>;

    impl HistoryLog {
        /// The commits touching `files` and `HEAD`'s time when the history
        /// file gave it.
        pub(crate) fn read_git_files(
            &self,
            root: &Path,
            files: &[&str],
            limit: usize,
        ) -> (Result<Vec<Commit>, String>, Option<i64>) {
            self.commits_and_time(root, files, limit)
        }

        /// The diffs of the commits touching `focus`'s files, sorted by
        /// commit id, and the note when the bound cut them.
        pub(crate) fn read_diffs(
            &self,
            root: &Path,
            focus: &[NodeRecord],
        ) -> Result<(SortedDiffs, Option<String>), String> {
            let mut files: Vec<&str> = focus.iter().map(|n| n.file_path.as_str()).collect();
            files.dedup();
            let commits = git_log(root, &files, 50)?;
            let (diffs, note) = self.diffs_of(root, focus, &commits)?;
            let mut diffs: Vec<_> = diffs
                .into_iter()
                .map(|(id, d)| (id, d.as_ref().clone()))
                .collect();
            diffs.sort_by(|a, b| a.0.cmp(&b.0));
            Ok((diffs, note))
        }

        /// Starts reading the log at `root`'s HEAD if needed and waits for it.
        fn wait_for_log(&self, root: &Path) -> Option<Arc<WholeLog>> {
            let head = head(root);
            if let Some(log) = self.whole(root, &head) {
                return Some(log);
            }
            let thread = match std::mem::take(&mut *lock(&self.state)) {
                LogState::Reading { thread, .. } => thread,
                _ => return None,
            };
            let log = Arc::new(thread.join().ok()?.ok()?);
            *lock(&self.state) = LogState::Read(Arc::clone(&log));
            Some(log)
        }
    }
}
