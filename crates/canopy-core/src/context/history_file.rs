//! The git log kept on disk (`.canopy/history.bin`), so that a one-off
//! `canopy context` answers the history strategy without walking the
//! repository's history again, and a server starts from it.
//!
//! A one-off process asks `git log -n50 -- FILES`, which walks the whole
//! history when a file changed rarely: 0.13 s of Django's 31,881 commits on
//! every call. A server keeps the whole log in memory
//! ([`super::history::HistoryLog::keep`]: this file when it holds the whole
//! log at `HEAD`); a one-off process reads the same log from this file,
//! written the first time and kept up to date:
//!
//! - **Keyed by `HEAD`.** The file holds the newest [`KEPT_COMMITS`]
//!   non-merge commits of the log from the `HEAD` it was built at (each
//!   commit's id, time, subject and files, listed in git's order, and per
//!   path the commits that touched it), whether that is the whole history,
//!   and `HEAD`'s committer time. A request at another `HEAD` never reads
//!   another `HEAD`'s answers.
//! - **Extended, not rebuilt, when `HEAD` moves forward.** Only `old..new`
//!   is read from git, and the new commits go in front of the old ones when
//!   that is exactly the order `git log new` prints ([`extension`]): every
//!   new commit's parents are new commits or the old `HEAD`, and every new
//!   commit is newer than the old `HEAD` (git's walk takes the newest commit
//!   first, so all new ones come out before the old `HEAD`, whose walk then
//!   goes on as it did alone). Otherwise (a rewritten history, a reset to an
//!   older commit, another branch, a merge of older work) it is rebuilt.
//! - **Only where `HEAD` alone decides the log**: not in a shallow clone (a
//!   fetch can deepen it without moving `HEAD`), nor with grafts or replace
//!   refs, nor when the environment points git elsewhere; there, and outside
//!   git, nothing is written and git is asked per request.
//! - **Never a wrong answer from a bad file.** It is written to a temporary
//!   file and renamed into place, so a killed process or two processes at
//!   once leave the old file or a whole new one; a checksum over everything
//!   after the header, a magic string and a version make a torn, foreign or
//!   corrupt file read as absent (rebuilt), never as an error.
//!
//! The answer is what `git log` with the strategy's flags lists: the same
//! commits in the same order ([`HistoryFile::touching`]); when the file
//! holds only the newest commits and fewer than the asked-for number touch
//! the files, it does not answer and git is asked.
//!
//! Beside it, `.canopy/history-diffs/` holds the `-U0` diffs (hunks and
//! the bytes git printed) of the commits one-off processes read, one file
//! per commit ([`store_diff`], [`load_diff`]: checksummed, temp + rename):
//! a commit's diff never changes, so the next process reads it instead of
//! starting `git show` (what a server keeps in memory). Where the history
//! file is not kept, neither are diffs.

use std::path::{Path, PathBuf};
use std::process::Command;

use xxhash_rust::xxh3::xxh3_64;

use crate::context::cochange::{FileChange, Hunk};
use crate::context::history::{Commit, LOG_FLAGS, parse_log};
use crate::temp_files::{STALE_TEMP, sweep};

/// The newest commits kept: Django's 31,881 fit; a longer history keeps
/// its newest ones (the first read costs about 70 µs of git per commit).
pub(crate) const KEPT_COMMITS: usize = 50_000;

const MAGIC: &[u8; 8] = b"CNPYHLOG";
const VERSION: u32 = 1;
/// Flag: the log ended before [`KEPT_COMMITS`] (the whole history is here).
const COMPLETE: u32 = 1;
const HEADER: usize = 56;
const COMMIT_RECORD: usize = 32;
const PATH_RECORD: usize = 16;

/// The file's name in the index directory.
pub(crate) const FILE_NAME: &str = "history.bin";

/// A history file read into memory and checked; its tables are read in
/// place, only for the paths a request asks about.
pub(crate) struct HistoryFile {
    bytes: Vec<u8>,
    complete: bool,
    head_time: i64,
    n_commits: usize,
    n_paths: usize,
    /// Where each table starts.
    commits_at: usize,
    refs_at: usize,
    paths_at: usize,
    touch_at: usize,
    blob_at: usize,
    head_len: usize,
}

fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}

fn i64_at(bytes: &[u8], at: usize) -> Option<i64> {
    Some(i64::from_le_bytes(bytes.get(at..at + 8)?.try_into().ok()?))
}

impl HistoryFile {
    /// Checks the header, the sizes and the checksum; `None` for anything
    /// else than a whole file of this version.
    pub(crate) fn parse(bytes: Vec<u8>) -> Option<HistoryFile> {
        if bytes.len() < HEADER || &bytes[..8] != MAGIC || u32_at(&bytes, 8)? != VERSION {
            return None;
        }
        let stored = u64::from_le_bytes(bytes.get(16..24)?.try_into().ok()?);
        if xxh3_64(&bytes[24..]) != stored {
            return None;
        }
        let count = |at| u32_at(&bytes, at).map(|n| n as usize);
        let (n_commits, n_paths, n_refs) = (count(32)?, count(36)?, count(40)?);
        let (n_touch, blob_len, head_len) = (count(44)?, count(48)?, count(52)?);
        let commits_at = HEADER;
        let refs_at = commits_at.checked_add(n_commits.checked_mul(COMMIT_RECORD)?)?;
        let paths_at = refs_at.checked_add(n_refs.checked_mul(4)?)?;
        let touch_at = paths_at.checked_add(n_paths.checked_mul(PATH_RECORD)?)?;
        let blob_at = touch_at.checked_add(n_touch.checked_mul(4)?)?;
        if blob_at.checked_add(blob_len)? != bytes.len() || head_len > blob_len {
            return None;
        }
        let file = HistoryFile {
            complete: u32_at(&bytes, 12)? & COMPLETE != 0,
            head_time: i64_at(&bytes, 24)?,
            bytes,
            n_commits,
            n_paths,
            commits_at,
            refs_at,
            paths_at,
            touch_at,
            blob_at,
            head_len,
        };
        std::str::from_utf8(file.blob(0, head_len)?).ok()?;
        Some(file)
    }

    /// Reads `path`; `None` when it is absent or not a good file.
    pub(crate) fn load(path: &Path) -> Option<HistoryFile> {
        HistoryFile::parse(std::fs::read(path).ok()?)
    }

    fn blob(&self, off: usize, len: usize) -> Option<&[u8]> {
        let at = self.blob_at.checked_add(off)?;
        self.bytes.get(at..at.checked_add(len)?)
    }

    fn text(&self, off: u32, len: u32) -> Option<String> {
        Some(String::from_utf8_lossy(self.blob(off as usize, len as usize)?).into_owned())
    }

    /// The `HEAD` the file was built at.
    pub(crate) fn head(&self) -> &str {
        self.blob(0, self.head_len)
            .and_then(|b| std::str::from_utf8(b).ok())
            .unwrap_or("")
    }

    /// `HEAD`'s committer time (Unix seconds).
    pub(crate) fn head_time(&self) -> i64 {
        self.head_time
    }

    /// Whether the file holds the whole history at its `HEAD` (not only
    /// the newest [`KEPT_COMMITS`]): then [`HistoryFile::touching`] always
    /// answers, as a log read whole does.
    pub(crate) fn is_complete(&self) -> bool {
        self.complete
    }

    /// The `at`-th commit of the log.
    fn commit(&self, at: usize) -> Option<Commit> {
        if at >= self.n_commits {
            return None;
        }
        let r = self.commits_at + at * COMMIT_RECORD;
        let field = |i: usize| u32_at(&self.bytes, r + 8 + 4 * i);
        let (refs_start, refs_len) = (field(4)? as usize, field(5)? as usize);
        let mut files = Vec::with_capacity(refs_len);
        for k in refs_start..refs_start.checked_add(refs_len)? {
            if self.refs_at + 4 * k >= self.paths_at {
                return None;
            }
            let path = u32_at(&self.bytes, self.refs_at + 4 * k)? as usize;
            if path >= self.n_paths {
                return None;
            }
            let p = self.paths_at + path * PATH_RECORD;
            files.push(self.text(u32_at(&self.bytes, p)?, u32_at(&self.bytes, p + 4)?)?);
        }
        Some(Commit {
            id: self.text(field(0)?, field(1)?)?,
            time: i64_at(&self.bytes, r)?,
            subject: self.text(field(2)?, field(3)?)?,
            files,
        })
    }

    /// Every commit, newest first (to extend the file).
    fn commits(&self) -> Option<Vec<Commit>> {
        (0..self.n_commits).map(|i| self.commit(i)).collect()
    }

    /// The commits that touched `path`, newest first (indices into the log).
    fn touched_by(&self, path: &str) -> Option<Vec<u32>> {
        let (mut lo, mut hi) = (0usize, self.n_paths);
        while lo < hi {
            let mid = (lo + hi) / 2;
            let p = self.paths_at + mid * PATH_RECORD;
            let name = self.blob(
                u32_at(&self.bytes, p)? as usize,
                u32_at(&self.bytes, p + 4)? as usize,
            )?;
            match name.cmp(path.as_bytes()) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => {
                    let start = u32_at(&self.bytes, p + 8)? as usize;
                    let len = u32_at(&self.bytes, p + 12)? as usize;
                    let from = self.touch_at.checked_add(start.checked_mul(4)?)?;
                    let to = from.checked_add(len.checked_mul(4)?)?;
                    if to > self.blob_at {
                        return None;
                    }
                    return (from..to)
                        .step_by(4)
                        .map(|at| u32_at(&self.bytes, at))
                        .collect();
                }
            }
        }
        Some(Vec::new())
    }

    /// What `git log -n LIMIT -- FILES` with the strategy's flags lists at
    /// this file's `HEAD`; `None` when the file cannot tell (it holds only
    /// the newest commits and fewer than `limit` of them touch `files`).
    pub(crate) fn touching(&self, files: &[&str], limit: usize) -> Option<Vec<Commit>> {
        let mut at = Vec::new();
        for f in files {
            at.extend(self.touched_by(f)?.into_iter().take(limit));
        }
        at.sort_unstable();
        at.dedup();
        if at.len() < limit && !self.complete {
            return None;
        }
        at.truncate(limit);
        at.into_iter().map(|i| self.commit(i as usize)).collect()
    }
}

/// The bytes of a history file of `commits` (newest first, as git lists
/// them) at `head`; `None` when a table would not fit its 32-bit offsets.
pub(crate) fn encode(
    head: &str,
    head_time: i64,
    commits: &[Commit],
    complete: bool,
) -> Option<Vec<u8>> {
    let mut blob: Vec<u8> = head.as_bytes().to_vec();
    let put = |blob: &mut Vec<u8>, s: &str| -> Option<(u32, u32)> {
        let off = u32::try_from(blob.len()).ok()?;
        blob.extend_from_slice(s.as_bytes());
        Some((off, u32::try_from(s.len()).ok()?))
    };
    // Paths in byte order (looked up by binary search), each with the
    // commits that touched it.
    let mut paths: Vec<&str> = commits
        .iter()
        .flat_map(|c| c.files.iter().map(String::as_str))
        .collect();
    paths.sort_unstable();
    paths.dedup();
    let index = |p: &str| paths.binary_search(&p).ok().map(|i| i as u32);
    let mut touched: Vec<Vec<u32>> = vec![Vec::new(); paths.len()];
    let (mut commit_table, mut refs) = (Vec::new(), Vec::new());
    for (at, c) in commits.iter().enumerate() {
        let at = u32::try_from(at).ok()?;
        let (id_off, id_len) = put(&mut blob, &c.id)?;
        let (subject_off, subject_len) = put(&mut blob, &c.subject)?;
        let refs_start = u32::try_from(refs.len()).ok()?;
        for f in &c.files {
            let p = index(f)?;
            refs.push(p);
            let list = &mut touched[p as usize];
            if list.last() != Some(&at) {
                list.push(at);
            }
        }
        commit_table.extend_from_slice(&c.time.to_le_bytes());
        for v in [id_off, id_len, subject_off, subject_len, refs_start] {
            commit_table.extend_from_slice(&v.to_le_bytes());
        }
        commit_table.extend_from_slice(&u32::try_from(c.files.len()).ok()?.to_le_bytes());
    }
    let (mut path_table, mut touch) = (Vec::new(), Vec::new());
    for (p, list) in paths.iter().zip(&touched) {
        let (off, len) = put(&mut blob, p)?;
        let start = u32::try_from(touch.len()).ok()?;
        touch.extend_from_slice(list);
        for v in [off, len, start, u32::try_from(list.len()).ok()?] {
            path_table.extend_from_slice(&v.to_le_bytes());
        }
    }
    let mut out = Vec::with_capacity(
        HEADER
            + commit_table.len()
            + 4 * (refs.len() + touch.len())
            + path_table.len()
            + blob.len(),
    );
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&(if complete { COMPLETE } else { 0 }).to_le_bytes());
    out.extend_from_slice(&0u64.to_le_bytes()); // the checksum, below
    out.extend_from_slice(&head_time.to_le_bytes());
    for n in [
        commits.len(),
        paths.len(),
        refs.len(),
        touch.len(),
        blob.len(),
        head.len(),
    ] {
        out.extend_from_slice(&u32::try_from(n).ok()?.to_le_bytes());
    }
    out.extend_from_slice(&commit_table);
    refs.iter()
        .for_each(|r| out.extend_from_slice(&r.to_le_bytes()));
    out.extend_from_slice(&path_table);
    touch
        .iter()
        .for_each(|t| out.extend_from_slice(&t.to_le_bytes()));
    out.extend_from_slice(&blob);
    let sum = xxh3_64(&out[24..]);
    out[16..24].copy_from_slice(&sum.to_le_bytes());
    Some(out)
}

/// The commits `git log -n50 -- files` lists at `head` (the top of the work
/// tree at `root`), and `HEAD`'s time, from the file at `path`: read, or
/// extended or rebuilt and written first. `None` when the file cannot
/// answer (not cacheable here, git failed, the file could not be written,
/// or the newest commits it holds are not enough): then git is asked.
pub(crate) fn answer(
    path: &Path,
    root: &Path,
    head: &str,
    files: &[&str],
    limit: usize,
) -> Option<(Vec<Commit>, i64)> {
    if !cacheable(root) {
        return None;
    }
    let file = refreshed(path, root, head, HistoryFile::load(path))?;
    let commits = file.touching(files, limit)?;
    Some((commits, file.head_time()))
}

/// The history file at `head`: `old` (what was read from `path`) when it
/// is at `head`, else `old` extended or the log read again, written to
/// `path` first. `None` when git failed or the file could not be written.
/// The caller has checked [`cacheable`].
pub(crate) fn refreshed(
    path: &Path,
    root: &Path,
    head: &str,
    old: Option<HistoryFile>,
) -> Option<HistoryFile> {
    match old {
        Some(f) if f.head() == head => Some(f),
        old => {
            // The temporary file first: where it cannot be written, the log
            // is not read for nothing.
            let tmp = TempFile::create(path)?;
            let bytes = match old.and_then(|f| extended(root, &f, head)) {
                Some(bytes) => bytes,
                None => rebuilt(root, head)?,
            };
            tmp.persist(&bytes);
            if let Some(dir) = path.parent() {
                sweep(dir, &temp_prefix(path), STALE_TEMP);
            }
            HistoryFile::parse(bytes)
        }
    }
}

/// The whole log at `head` (its newest [`KEPT_COMMITS`]), encoded.
fn rebuilt(root: &Path, head: &str) -> Option<Vec<u8>> {
    let started = std::time::Instant::now();
    let output = git(root)
        .arg("log")
        .args(LOG_FLAGS)
        .arg(format!("-n{KEPT_COMMITS}"))
        .arg(head)
        .arg("--")
        .output()
        .ok()?;
    if !output.status.success() {
        return None;
    }
    let commits = parse_log(&String::from_utf8_lossy(&output.stdout));
    let time = commit_time(root, head)?;
    let complete = commits.len() < KEPT_COMMITS;
    tracing::debug!(
        commits = commits.len(),
        ms = started.elapsed().as_millis() as u64,
        "wrote the git log to the history file"
    );
    encode(head, time, &commits, complete)
}

/// The file's log moved forward to `head` with `old..head` read from git,
/// when that is the log git prints at `head` ([`extension`]).
fn extended(root: &Path, old: &HistoryFile, head: &str) -> Option<Vec<u8>> {
    let (new, time) = extension(root, old.head(), old.head_time(), head)?;
    let mut commits = new;
    let kept = old.commits()?;
    commits.extend(kept);
    let complete = old.complete && commits.len() <= KEPT_COMMITS;
    commits.truncate(KEPT_COMMITS);
    tracing::debug!(commits = commits.len(), "extended the history file");
    encode(head, time, &commits, complete)
}

/// The non-merge commits of `old..head` in git's order, and `head`'s time,
/// when `git log head` lists exactly them and then `git log old`: every
/// commit of `old..head` (merges too) has only such commits or `old` as
/// parents, and is newer than `old` (`old_time`). Git's walk takes the
/// newest commit it has reached first, so it lists every new commit before
/// `old`, and after them it has reached nothing but `old`.
pub(crate) fn extension(
    root: &Path,
    old: &str,
    old_time: i64,
    head: &str,
) -> Option<(Vec<Commit>, i64)> {
    let output = git(root)
        .args([
            "log",
            "--no-renames",
            "--full-history",
            "--format=%x1e%H%x1f%ct%x1f%P%x1f%s",
            "--name-only",
        ])
        .arg(format!("{old}..{head}"))
        .arg("--")
        .output()
        .ok()?;
    if !output.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&output.stdout);
    // Each record as the strategy's log parses it, with the parents cut out
    // of its first line.
    let mut all: Vec<(Commit, Vec<String>)> = Vec::new();
    for record in text.split('\u{1e}').filter(|r| !r.trim().is_empty()) {
        let (first, rest) = record.split_once('\n').unwrap_or((record, ""));
        let mut parts = first.splitn(4, '\u{1f}');
        let (id, time) = (parts.next()?, parts.next()?);
        let parents: Vec<String> = parts.next()?.split_whitespace().map(String::from).collect();
        let subject = parts.next().unwrap_or("");
        let line = format!("\u{1e}{id}\u{1f}{time}\u{1f}{subject}\n{rest}");
        let commit = parse_log(&line).pop()?;
        all.push((commit, parents));
    }
    let ids: std::collections::HashSet<&str> = all.iter().map(|(c, _)| c.id.as_str()).collect();
    let forward = !all.is_empty()
        && all.iter().all(|(c, parents)| {
            c.time > old_time && parents.iter().all(|p| p == old || ids.contains(p.as_str()))
        });
    if !forward {
        return None;
    }
    let time = all.iter().find(|(c, _)| c.id == head)?.0.time;
    let commits = all
        .into_iter()
        .filter(|(_, parents)| parents.len() <= 1)
        .map(|(c, _)| c)
        .collect();
    Some((commits, time))
}

fn git(root: &Path) -> Command {
    let mut cmd = Command::new("git");
    cmd.arg("-C").arg(root).stdin(std::process::Stdio::null());
    cmd
}

/// A commit's committer time.
fn commit_time(root: &Path, id: &str) -> Option<i64> {
    let output = git(root)
        .args(["log", "-1", "--format=%ct", id, "--"])
        .output()
        .ok()?;
    if !output.status.success() {
        return None;
    }
    String::from_utf8(output.stdout).ok()?.trim().parse().ok()
}

/// Whether `HEAD` alone decides the log at `root` (see the module docs).
pub(crate) fn cacheable(root: &Path) -> bool {
    if [
        "GIT_DIR",
        "GIT_COMMON_DIR",
        "GIT_WORK_TREE",
        "GIT_REPLACE_REF_BASE",
        "GIT_GRAFT_FILE",
        "GIT_OBJECT_DIRECTORY",
        "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    ]
    .iter()
    .any(|v| std::env::var_os(v).is_some())
    {
        return false;
    }
    let Some((_, common)) = git_dirs(root) else {
        return false;
    };
    let replace_refs = std::fs::read_dir(common.join("refs").join("replace"))
        .map(|mut d| d.next().is_some())
        .unwrap_or(false)
        || std::fs::read(common.join("packed-refs"))
            .map(|b| b.windows(13).any(|w| w == b"refs/replace/"))
            .unwrap_or(false);
    !replace_refs
        && !common.join("shallow").exists()
        && !common.join("info").join("grafts").exists()
}

/// The git directory of the work tree at `root` (its own `.git`
/// directory, or the one a linked work tree's `.git` file names) and its
/// common directory (the git directory itself, or a linked work tree's
/// `commondir`): where `HEAD` lives and where refs and objects live.
pub(crate) fn git_dirs(root: &Path) -> Option<(PathBuf, PathBuf)> {
    let dot_git = root.join(".git");
    let git_dir = if dot_git.is_dir() {
        dot_git
    } else {
        let text = std::fs::read_to_string(&dot_git).ok()?;
        root.join(text.strip_prefix("gitdir:")?.trim())
    };
    let common = match std::fs::read_to_string(git_dir.join("commondir")) {
        Ok(text) => git_dir.join(text.trim()),
        Err(_) => git_dir.clone(),
    };
    Some((git_dir, common))
}

/// The directory of commits' diffs beside the history file: one file per
/// commit (per commit and focus files for a commit too large to read
/// whole), written once (temp + rename) and read by later processes.
pub(crate) const DIFFS_DIR: &str = "history-diffs";

const DIFF_MAGIC: &[u8; 8] = b"CNPYDIF1";

/// The file name of a commit's diff: its id, or for a large commit read
/// for some files only, its id and a hash of those files.
pub(crate) fn diff_name(id: &str, files: Option<&[&str]>) -> String {
    // Ids come from git (hex); anything else must not make a path.
    let id: String = id.chars().filter(char::is_ascii_alphanumeric).collect();
    match files {
        None => id,
        Some(files) => format!("{id}-{:016x}", xxh3_64(files.join("\n").as_bytes())),
    }
}

/// A diff written by [`store_diff`]: its changes and the bytes git printed
/// for it; `None` for anything else.
pub(crate) fn load_diff(path: &Path) -> Option<(Vec<FileChange>, usize)> {
    let bytes = std::fs::read(path).ok()?;
    if bytes.get(..8)? != DIFF_MAGIC {
        return None;
    }
    let stored = u64::from_le_bytes(bytes.get(8..16)?.try_into().ok()?);
    if xxh3_64(&bytes[16..]) != stored {
        return None;
    }
    let mut at: usize = 16;
    let mut next = |n: usize| -> Option<&[u8]> {
        let out = bytes.get(at..at.checked_add(n)?)?;
        at += n;
        Some(out)
    };
    let size = u64::from_le_bytes(next(8)?.try_into().ok()?) as usize;
    let n_files = u32::from_le_bytes(next(4)?.try_into().ok()?) as usize;
    let mut changes = Vec::new();
    for _ in 0..n_files {
        let len = u32::from_le_bytes(next(4)?.try_into().ok()?) as usize;
        let path = String::from_utf8(next(len)?.to_vec()).ok()?;
        let n_hunks = u32::from_le_bytes(next(4)?.try_into().ok()?) as usize;
        let mut hunks = Vec::new();
        for _ in 0..n_hunks {
            let mut v = [0u32; 4];
            for x in &mut v {
                *x = u32::from_le_bytes(next(4)?.try_into().ok()?);
            }
            hunks.push(Hunk {
                old_start: v[0],
                old_len: v[1],
                new_start: v[2],
                new_len: v[3],
            });
        }
        changes.push(FileChange { path, hunks });
    }
    (at == bytes.len()).then_some((changes, size))
}

/// Writes a commit's diff for [`load_diff`] (creating the directory);
/// failures leave no file (the diff is read from git again next time).
pub(crate) fn store_diff(path: &Path, changes: &[FileChange], size: usize) {
    let mut out = DIFF_MAGIC.to_vec();
    out.extend_from_slice(&0u64.to_le_bytes());
    out.extend_from_slice(&(size as u64).to_le_bytes());
    let Ok(n_files) = u32::try_from(changes.len()) else {
        return;
    };
    out.extend_from_slice(&n_files.to_le_bytes());
    for fc in changes {
        let (Ok(len), Ok(n_hunks)) = (u32::try_from(fc.path.len()), u32::try_from(fc.hunks.len()))
        else {
            return;
        };
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(fc.path.as_bytes());
        out.extend_from_slice(&n_hunks.to_le_bytes());
        for h in &fc.hunks {
            for v in [h.old_start, h.old_len, h.new_start, h.new_len] {
                out.extend_from_slice(&v.to_le_bytes());
            }
        }
    }
    let sum = xxh3_64(&out[16..]);
    out[8..16].copy_from_slice(&sum.to_le_bytes());
    if let Some(dir) = path.parent()
        && std::fs::create_dir_all(dir).is_ok()
        && let Some(tmp) = TempFile::create(path)
    {
        tmp.persist(&out);
        prune_diffs(dir, MAX_DIFF_FILES, STALE_TEMP);
    }
}

/// The most diff files [`DIFFS_DIR`] keeps. Each is a few hundred bytes to a
/// few KB (the changed lines' ranges, not the text), so the folder stays
/// within tens of MB however many commits packs read over time.
const MAX_DIFF_FILES: usize = 8192;

/// Keeps `dir` (the diff folder) a bounded cache: when it holds more than
/// `max` diff files, the least recently written go until `max * 3 / 4` are
/// left (so the next writes do not prune again at once), and temporary files
/// older than `stale` are removed. A reader that loses a file to the prune
/// reads the diff from git again ([`load_diff`] gives `None`), so pruning
/// never changes an answer.
fn prune_diffs(dir: &Path, max: usize, stale: std::time::Duration) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let now = std::time::SystemTime::now();
    let mut diffs = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let modified = entry.metadata().and_then(|m| m.modified()).ok();
        if name.to_string_lossy().ends_with(".tmp") {
            let age = modified.and_then(|m| now.duration_since(m).ok());
            if age.is_some_and(|age| age > stale) {
                let _ = std::fs::remove_file(entry.path());
            }
        } else if let Some(modified) = modified {
            diffs.push((modified, entry.path()));
        }
    }
    if diffs.len() <= max {
        return;
    }
    diffs.sort();
    let excess = diffs.len() - max * 3 / 4;
    for (_, path) in diffs.into_iter().take(excess) {
        let _ = std::fs::remove_file(path);
    }
}

/// The start of the names of `target`'s temporary files ([`TempFile`]):
/// `.history.bin.` for the history file.
fn temp_prefix(target: &Path) -> String {
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    format!(".{name}.")
}

/// A temporary file beside the history file, renamed over it when whole
/// and removed otherwise.
struct TempFile {
    path: PathBuf,
    target: PathBuf,
    file: Option<std::fs::File>,
}

impl TempFile {
    fn create(target: &Path) -> Option<TempFile> {
        use std::sync::atomic::{AtomicU64, Ordering};
        static NEXT: AtomicU64 = AtomicU64::new(0);
        target.file_name()?;
        let name = format!(
            "{}{}.{}.tmp",
            temp_prefix(target),
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let path = target.with_file_name(name);
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .ok()?;
        Some(TempFile {
            path,
            target: target.to_path_buf(),
            file: Some(file),
        })
    }

    /// Writes `bytes` and renames the file into place; on failure the old
    /// file stays (a later request tries again).
    fn persist(mut self, bytes: &[u8]) {
        use std::io::Write;
        let Some(mut file) = self.file.take() else {
            return;
        };
        let written = file.write_all(bytes).and_then(|()| file.flush());
        drop(file);
        let renamed = written.and_then(|()| std::fs::rename(&self.path, &self.target));
        if let Err(e) = renamed {
            tracing::debug!("could not write the history file: {e}");
        }
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        // Gone once renamed; otherwise not left behind.
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::history::tests::{ASKS, commit_file_at, git, head, repo};
    use crate::context::history::{HistoryLog, git_log, head_time};

    #[test]
    fn the_diff_folder_is_a_bounded_cache_and_loses_no_answer() {
        let dir = tempfile::tempdir().unwrap();
        let change = |n: u32| {
            vec![FileChange {
                path: format!("f{n}.py"),
                hunks: vec![Hunk {
                    old_start: n,
                    old_len: 1,
                    new_start: n,
                    new_len: 2,
                }],
            }]
        };
        let path = |n: u32| dir.path().join(diff_name(&format!("{n:040x}"), None));
        // A temporary file left by a killed writer, old enough to be stale.
        let left = dir.path().join(".dead.1.0.tmp");
        std::fs::write(&left, b"partial").unwrap();
        let old = std::time::SystemTime::now() - std::time::Duration::from_secs(7200);
        std::fs::File::options()
            .write(true)
            .open(&left)
            .unwrap()
            .set_modified(old)
            .unwrap();
        let fresh = dir.path().join(".alive.2.0.tmp");
        std::fs::write(&fresh, b"being written").unwrap();
        for n in 0..40 {
            store_diff(&path(n), &change(n), 10);
            // Distinct write times, oldest first.
            let at =
                std::time::SystemTime::now() - std::time::Duration::from_secs(1000 - u64::from(n));
            std::fs::File::options()
                .write(true)
                .open(path(n))
                .unwrap()
                .set_modified(at)
                .unwrap();
            prune_diffs(dir.path(), 16, STALE_TEMP);
        }
        let kept: Vec<u32> = (0..40).filter(|&n| path(n).exists()).collect();
        assert!(kept.len() <= 16 && kept.len() >= 12, "{kept:?}");
        // The newest always stay, and what stays reads back whole.
        assert!(kept.contains(&39) && kept.contains(&38), "{kept:?}");
        for n in kept {
            assert_eq!(load_diff(&path(n)).map(|(c, _)| c), Some(change(n)));
        }
        assert!(!left.exists(), "a stale temporary file is swept");
        assert!(
            fresh.exists(),
            "a temporary file being written is left alone"
        );
    }

    /// A commit of `core.py` at Unix time `at` (later than the fixture's).
    fn commit_at(dir: &Path, message: &str, at: i64) {
        commit_file_at(dir, "core.py", message, at);
    }

    /// Every ask at every limit answers as `git log` and `HEAD`'s time do
    /// at `root`, through a history that keeps its file at `file`; from the
    /// file (which gives `HEAD`'s time too) or, where it is not kept, git.
    fn answers_as_git(root: &Path, file: &Path) {
        answers(root, file, true);
    }

    fn answers(root: &Path, file: &Path, from_file: bool) {
        let history = HistoryLog::with_file(file.to_path_buf());
        for files in ASKS {
            for limit in [1, 3, 50] {
                let read = history.read_git_files(root, files, limit);
                assert_eq!(read.0, git_log(root, files, limit), "{files:?} -n{limit}");
                assert_eq!(read.1.is_some(), from_file, "answered from the file");
                if let Some(time) = read.1 {
                    assert_eq!(Some(time), head_time(root), "HEAD's time");
                }
            }
        }
    }

    fn file_in(dir: &tempfile::TempDir) -> PathBuf {
        dir.path().join(FILE_NAME)
    }

    #[test]
    fn the_file_answers_as_git_does_and_is_written_once() {
        let (dir, out) = (repo(), tempfile::tempdir().unwrap());
        let (root, file) = (dir.path(), file_in(&out));
        answers_as_git(root, &file);
        let written = HistoryFile::load(&file).expect("written");
        assert_eq!(written.head(), head(root));
        assert!(written.complete);
        assert_eq!(Some(written.head_time()), head_time(root));
        // Read again, not rewritten: the same inode and bytes.
        let before = std::fs::read(&file).unwrap();
        let inode = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&file).unwrap());
        answers_as_git(root, &file);
        assert_eq!(std::fs::read(&file).unwrap(), before);
        let again = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&file).unwrap());
        assert_eq!(inode, again);
    }

    /// Sets `path`'s last change `secs` seconds back.
    fn age(path: &Path, secs: u64) {
        let at = std::time::SystemTime::now() - std::time::Duration::from_secs(secs);
        std::fs::File::options()
            .write(true)
            .open(path)
            .unwrap()
            .set_modified(at)
            .unwrap();
    }

    /// A temporary history file a killed writer left (older than an hour)
    /// is removed when the file is next written; a younger one (another
    /// process's write under way) and other files are left alone.
    #[test]
    fn a_killed_writers_temporary_file_is_swept() {
        let (dir, out) = (repo(), tempfile::tempdir().unwrap());
        let (root, file) = (dir.path(), file_in(&out));
        let put = |name: &str, secs: u64| {
            let path = out.path().join(name);
            std::fs::write(&path, b"partial").unwrap();
            age(&path, secs);
            path
        };
        let stale = put(".history.bin.999999.0.tmp", 7200);
        let fresh = put(".history.bin.999999.1.tmp", 60);
        let other = put(".index.db.1.0.tmp", 7200);
        answers_as_git(root, &file);
        assert!(HistoryFile::load(&file).is_some(), "written");
        assert!(!stale.exists(), "a stale temporary file is swept");
        assert!(fresh.exists(), "one being written is left alone");
        assert!(
            other.exists(),
            "another file's is not the history's to sweep"
        );
    }

    /// Commits on top of the file's `HEAD` extend it (only `old..new` read):
    /// the bytes are those a rebuild at the new `HEAD` writes.
    #[test]
    fn new_commits_extend_the_file() {
        let (dir, out) = (repo(), tempfile::tempdir().unwrap());
        let (root, file) = (dir.path(), file_in(&out));
        answers_as_git(root, &file);
        let old = HistoryFile::load(&file).unwrap();
        commit_at(root, "later", 1_900_000_000);
        commit_at(root, "later still", 1_900_000_100);
        let new_head = head(root);
        let extended_bytes = extended(root, &old, &new_head).expect("extended");
        assert_eq!(extended_bytes, rebuilt(root, &new_head).unwrap());
        answers_as_git(root, &file);
        assert_eq!(HistoryFile::load(&file).unwrap().head(), new_head);
        // A merge (newer than the file's HEAD) of a branch that forked from
        // an older commit is not an extension: git's walk reaches that older
        // commit before the file's HEAD. Rebuilt.
        let old = HistoryFile::load(&file).unwrap();
        git(root, &["checkout", "-q", "-b", "older", "HEAD~4"]);
        commit_file_at(root, "older.py", "on the older branch", 1_900_000_200);
        git(root, &["checkout", "-q", "main"]);
        let merged = Command::new("git")
            .arg("-C")
            .arg(root)
            .args(["-c", "user.name=T", "-c", "user.email=t@example.com"])
            .args(["merge", "-q", "--no-edit", "older"])
            .env("GIT_COMMITTER_DATE", "@1900000300 +0000")
            .output()
            .unwrap();
        assert!(merged.status.success(), "{merged:?}");
        assert_eq!(extended(root, &old, &head(root)), None);
        answers_as_git(root, &file);
    }

    /// An amended commit and a reset to an older one (the file's `HEAD` is
    /// no ancestor of the new one) give git's answers, and so does a
    /// commit no newer than the file's `HEAD`.
    #[test]
    fn a_rewritten_history_gives_gits_answers() {
        let (dir, out) = (repo(), tempfile::tempdir().unwrap());
        let (root, file) = (dir.path(), file_in(&out));
        commit_at(root, "to amend", 1_900_000_000);
        answers_as_git(root, &file);
        let old = HistoryFile::load(&file).unwrap();
        std::fs::write(root.join("side.py"), "amended\n").unwrap();
        git(root, &["add", "-A"]);
        git(root, &["commit", "-q", "--amend", "-m", "amended"]);
        assert_eq!(extended(root, &old, &head(root)), None);
        answers_as_git(root, &file);
        git(root, &["reset", "-q", "--hard", "HEAD~3"]);
        answers_as_git(root, &file);
        assert_eq!(HistoryFile::load(&file).unwrap().head(), head(root));
        // A commit dated before its parent (a skewed clock).
        let old = HistoryFile::load(&file).unwrap();
        commit_at(root, "skewed", 1_000_000_000);
        assert_eq!(extended(root, &old, &head(root)), None);
        answers_as_git(root, &file);
    }

    /// Garbage, a cut-short file, one flipped byte and another version are
    /// read as no file: the answers are git's and a good file replaces it.
    #[test]
    fn a_bad_file_is_ignored_and_rewritten() {
        let (dir, out) = (repo(), tempfile::tempdir().unwrap());
        let (root, file) = (dir.path(), file_in(&out));
        answers_as_git(root, &file);
        let good = std::fs::read(&file).unwrap();
        let mut flipped = good.clone();
        let middle = flipped.len() / 2;
        flipped[middle] ^= 0x20;
        let mut version = good.clone();
        version[8] = 99;
        let bad: [Vec<u8>; 5] = [
            b"not a history file at all".to_vec(),
            Vec::new(),
            good[..good.len() - 7].to_vec(),
            flipped,
            version,
        ];
        for bytes in bad {
            assert!(HistoryFile::parse(bytes.clone()).is_none());
            std::fs::write(&file, &bytes).unwrap();
            answers_as_git(root, &file);
            assert_eq!(std::fs::read(&file).unwrap(), good);
        }
    }

    /// Outside git, and in a shallow clone, nothing is written.
    #[test]
    fn no_file_outside_git_or_in_a_shallow_clone() {
        let (plain, out) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let file = file_in(&out);
        let history = HistoryLog::with_file(file.clone());
        let read = history.read_git_files(plain.path(), &["a.py"], 50);
        assert_eq!(read.0, Err("not a git repository".to_string()));
        assert!(!file.exists());

        let dir = repo();
        let shallow = tempfile::tempdir().unwrap();
        let url = format!("file://{}", dir.path().display());
        let clone = shallow.path().join("c");
        let status = Command::new("git")
            .args(["clone", "-q", "--depth", "2", &url])
            .arg(&clone)
            .status()
            .unwrap();
        assert!(status.success());
        answers(&clone, &file, false);
        assert!(!file.exists());
        // Nor in the temporary files' place.
        assert_eq!(std::fs::read_dir(out.path()).unwrap().count(), 0);
    }

    fn focus_on(path: &str) -> crate::store::read::NodeRecord {
        crate::testing::unit_record(1, "h1".into(), path, "file")
    }

    /// Diffs a one-off process read are written once and read back by the
    /// next, the same as git gives them (and as a process without the
    /// files reads them); a bad diff file is read from git again.
    #[test]
    fn diffs_on_disk_are_what_git_gives() {
        let (dir, out) = (repo(), tempfile::tempdir().unwrap());
        let (root, file) = (dir.path(), file_in(&out));
        let focus = [focus_on("core.py")];
        let plain = HistoryLog::default().read_diffs(root, &focus).unwrap();
        let first = HistoryLog::with_file(file.clone())
            .read_diffs(root, &focus)
            .unwrap();
        assert_eq!(first, plain);
        let diffs = out.path().join(DIFFS_DIR);
        let mut names: Vec<_> = std::fs::read_dir(&diffs)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        names.sort();
        assert_eq!(names.len(), plain.0.len(), "one file per commit read");
        let stamps: Vec<_> = names
            .iter()
            .map(|p| std::fs::metadata(p).unwrap().modified().unwrap())
            .collect();
        // Read back, not rewritten; a garbage file is replaced.
        std::fs::write(&names[0], b"garbage").unwrap();
        let again = HistoryLog::with_file(file.clone())
            .read_diffs(root, &focus)
            .unwrap();
        assert_eq!(again, plain);
        assert!(load_diff(&names[0]).is_some());
        for (p, stamp) in names.iter().zip(&stamps).skip(1) {
            assert_eq!(std::fs::metadata(p).unwrap().modified().unwrap(), *stamp);
        }
        let (changes, bytes) = load_diff(&names[1]).unwrap();
        let mut flipped = std::fs::read(&names[1]).unwrap();
        let last = flipped.len() - 1;
        flipped[last] ^= 1;
        std::fs::write(&names[1], &flipped).unwrap();
        assert_eq!(load_diff(&names[1]), None);
        store_diff(&names[1], &changes, bytes);
        assert_eq!(load_diff(&names[1]), Some((changes, bytes)));
    }

    #[test]
    fn a_file_of_the_newest_commits_answers_only_what_it_holds() {
        let commit = |id: &str, files: &[&str]| Commit {
            id: id.into(),
            time: 1,
            subject: format!("s {id}"),
            files: files.iter().map(|f| f.to_string()).collect(),
        };
        let commits = [
            commit("c", &["a.py", "b.py"]),
            commit("b", &["b.py"]),
            commit("a", &["a.py"]),
        ];
        let file = HistoryFile::parse(encode("h", 9, &commits, false).unwrap()).unwrap();
        assert_eq!(
            file.touching(&["a.py"], 2).unwrap(),
            [commits[0].clone(), commits[2].clone()]
        );
        assert_eq!(file.touching(&["b.py", "a.py"], 3).unwrap(), commits);
        // Fewer than asked, and older commits are not in the file.
        assert_eq!(file.touching(&["b.py"], 3), None);
        assert_eq!(file.touching(&["x.py"], 1), None);
        let whole = HistoryFile::parse(encode("h", 9, &commits, true).unwrap()).unwrap();
        assert_eq!(whole.touching(&["x.py"], 1).unwrap(), []);
        assert_eq!(whole.commits().unwrap(), commits);
    }
}
