//! Finding the repository root and the files to index.
//!
//! In a git repository the file list is `git ls-files --cached --others
//! --exclude-standard` (tracked plus untracked-but-not-ignored); elsewhere a
//! walk that honours `.gitignore`. `.canopy/` and `.git/` are never listed.
//! Symlinks are followed only when they resolve inside the repository, and
//! files over the size limit are skipped and counted. (Binary files are
//! detected when read, by the indexer.)

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::UNIX_EPOCH;

use globset::{GlobBuilder, GlobMatcher};
use serde::{Deserialize, Serialize};

use crate::error::{CanopyError, Result};

/// Name of the directory holding the index, at the repository root.
pub const CANOPY_DIR: &str = ".canopy";

/// Default size limit for indexed files: 1 MiB.
pub const DEFAULT_MAX_FILE_SIZE: u64 = 1024 * 1024;

/// How the file list was obtained.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DiscoveryMethod {
    /// `git ls-files --cached --others --exclude-standard`.
    GitLsFiles,
    /// Directory walk honouring `.gitignore`.
    Walk,
}

impl DiscoveryMethod {
    /// Stored and displayed name.
    pub fn as_str(self) -> &'static str {
        match self {
            DiscoveryMethod::GitLsFiles => "git_ls_files",
            DiscoveryMethod::Walk => "walk",
        }
    }
}

/// Why a file was not indexed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SkipReason {
    /// Contains a NUL byte in its first 8 KiB.
    Binary,
    /// Larger than the size limit.
    TooLarge,
    /// A symlink that resolves outside the repository (or nowhere).
    SymlinkOutsideRepo,
    /// Could not be read.
    Unreadable,
    /// A well-known secret: keys, credentials, `.env` files, shell history
    /// ([`is_secret`]). Never read, whatever the repository says.
    Secret,
}

impl SkipReason {
    /// Stored and displayed name.
    pub fn as_str(self) -> &'static str {
        match self {
            SkipReason::Binary => "binary",
            SkipReason::TooLarge => "too_large",
            SkipReason::SymlinkOutsideRepo => "symlink_outside_repo",
            SkipReason::Unreadable => "unreadable",
            SkipReason::Secret => "secret",
        }
    }
}

/// A file that may be indexed.
#[derive(Clone, Debug)]
pub struct Candidate {
    /// Repo-relative path with `/` separators.
    pub path: String,
    /// Absolute path to read (the symlink's target for symlinks).
    pub abs_path: PathBuf,
    /// Size in bytes.
    pub size: u64,
    /// Modification time in nanoseconds since the epoch.
    pub mtime_ns: i64,
}

/// The result of discovery.
#[derive(Debug)]
pub struct Discovery {
    /// How the list was obtained.
    pub method: DiscoveryMethod,
    /// Files to consider, sorted by path.
    pub files: Vec<Candidate>,
    /// Files passed over, by reason.
    pub skipped: BTreeMap<SkipReason, u64>,
    /// Listed paths the filter (glob) left out: 0 when it kept every one.
    pub filtered_out: u64,
}

/// How far a directory given to Canopy is trusted to be a repository root.
///
/// Indexing reads every file under the root and writes `.canopy/` into it,
/// so a root is only taken for granted where a person chose it. A directory
/// that arrives implicitly (the working directory, a path an agent sent) must
/// be inside a git repository, or already hold an index someone created.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RootRule {
    /// A person named this directory (`--root`, `canopy index DIR`, a
    /// library caller): outside git it becomes the root itself.
    #[default]
    Named,
    /// The directory arrived implicitly: it must be inside a git repository
    /// or hold `.canopy/index.db` itself; an index in a parent folder outside
    /// git is never inherited.
    Discovered,
}

/// Finds the repository root for `start` as a named directory
/// ([`RootRule::Named`]): see [`locate_root`].
pub fn find_repo_root(start: &Path) -> Result<PathBuf> {
    locate_root(start, RootRule::Named)
}

/// Finds the repository root for `start` (a directory, or a file inside one).
///
/// The root is the nearest ancestor holding `.git`. Outside git, it is
/// `start` itself when `start` already holds an index or `rule` is
/// [`RootRule::Named`]; otherwise the answer is
/// [`CanopyError::NotARepository`]. The filesystem root, the home folder and
/// the folders above it are never a root ([`CanopyError::UnsafeRoot`]),
/// whatever the rule: indexing them would read every secret the user has.
pub fn locate_root(start: &Path, rule: RootRule) -> Result<PathBuf> {
    let start = start
        .canonicalize()
        .map_err(|_| CanopyError::NotADirectory(start.to_path_buf()))?;
    let start = if start.is_file() {
        start
            .parent()
            .map(Path::to_path_buf)
            .ok_or_else(|| CanopyError::NotADirectory(start.clone()))?
    } else {
        start
    };
    if !start.is_dir() {
        return Err(CanopyError::NotADirectory(start));
    }
    let home = home_dir();
    if let Some(git_root) = start.ancestors().find(|dir| dir.join(".git").exists()) {
        let git_root = git_root.to_path_buf();
        check_safe_root(&git_root, home.as_deref())?;
        return Ok(git_root);
    }
    let indexed_here = start.join(CANOPY_DIR).join("index.db").is_file();
    if indexed_here || rule == RootRule::Named {
        check_safe_root(&start, home.as_deref())?;
        return Ok(start);
    }
    let index_above = start
        .ancestors()
        .skip(1)
        .find(|dir| dir.join(CANOPY_DIR).join("index.db").is_file())
        .map(Path::to_path_buf);
    Err(CanopyError::NotARepository {
        path: start,
        index_above,
    })
}

/// The user's home folder, canonical, if it is known.
fn home_dir() -> Option<PathBuf> {
    let home = std::env::var_os("HOME").or_else(|| std::env::var_os("USERPROFILE"))?;
    PathBuf::from(home).canonicalize().ok()
}

/// Refuses the filesystem root, the home folder and every folder above it.
fn check_safe_root(root: &Path, home: Option<&Path>) -> Result<()> {
    let reason = if root.parent().is_none() {
        Some("the filesystem root")
    } else if home == Some(root) {
        Some("the home folder")
    } else if home.is_some_and(|home| home.starts_with(root)) {
        Some("a folder that contains the home folder")
    } else {
        None
    };
    match reason {
        Some(reason) => Err(CanopyError::UnsafeRoot {
            path: root.to_path_buf(),
            reason: reason.to_string(),
        }),
        None => Ok(()),
    }
}

/// A compiled path filter. Patterns without `/` match the file name in any
/// directory (`*.rs`); others match the whole repo-relative path, where `*`
/// stays within one directory and `**` crosses directories.
#[derive(Clone, Debug)]
pub struct PathFilter {
    matcher: GlobMatcher,
    basename_only: bool,
    pattern: String,
}

impl PathFilter {
    /// Compiles a glob; rejects invalid syntax and patterns that leave the repository.
    pub fn new(pattern: &str) -> Result<PathFilter> {
        let trimmed = pattern.trim();
        if trimmed.is_empty() {
            return Err(CanopyError::GlobPattern {
                pattern: pattern.to_string(),
                message: "empty pattern".into(),
            });
        }
        check_relative(trimmed)?;
        let trimmed = trimmed.strip_prefix("./").unwrap_or(trimmed);
        let glob = GlobBuilder::new(trimmed)
            .literal_separator(true)
            .backslash_escape(true)
            .build()
            .map_err(|e| CanopyError::GlobPattern {
                pattern: pattern.to_string(),
                message: e.kind().to_string(),
            })?;
        Ok(PathFilter {
            matcher: glob.compile_matcher(),
            basename_only: !trimmed.contains('/'),
            pattern: trimmed.to_string(),
        })
    }

    /// Whether a repo-relative path matches.
    pub fn is_match(&self, path: &str) -> bool {
        if self.basename_only {
            let name = path.rsplit('/').next().unwrap_or(path);
            self.matcher.is_match(name) || self.matcher.is_match(path)
        } else {
            self.matcher.is_match(path)
        }
    }

    /// The pattern as compiled.
    pub fn pattern(&self) -> &str {
        &self.pattern
    }
}

/// Rejects absolute paths and `..` components: nothing may leave the repository.
pub fn check_relative(path: &str) -> Result<()> {
    let outside = path.starts_with('/')
        || path.starts_with('\\')
        || path.get(1..3) == Some(":\\")
        || path.get(1..3) == Some(":/")
        || path.split(['/', '\\']).any(|c| c == "..");
    if outside {
        Err(CanopyError::PathOutsideRepo(path.to_string()))
    } else {
        Ok(())
    }
}

/// Directories whose whole content is credentials (home-folder layouts
/// that end up inside a repository or an indexed folder).
const SECRET_DIRS: &[&str] = &[".ssh", ".aws", ".gnupg", ".azure", ".kube"];
/// File names that hold credentials.
const SECRET_NAMES: &[&str] = &[
    ".netrc",
    ".pgpass",
    ".git-credentials",
    ".npmrc",
    ".pypirc",
    ".htpasswd",
    ".lesshst",
    ".viminfo",
];
/// Extensions of private keys and key stores.
const SECRET_EXTENSIONS: &[&str] = &["pem", "key", "p12", "pfx", "jks", "keystore", "asc", "gpg"];
/// SSH private key names (`id_rsa`, `id_ed25519`, …; `.pub` halves too).
const SSH_KEY_NAMES: &[&str] = &[
    "id_rsa",
    "id_dsa",
    "id_ecdsa",
    "id_ed25519",
    "id_ecdsa_sk",
    "id_ed25519_sk",
];

/// Whether a repo-relative path is a well-known secret file: under
/// `.ssh/`, `.aws/`, `.gnupg/`, …; `.env` and `.env.*`; private keys
/// (`*.pem`, `*.key`, `id_rsa`, …); credential files (`.netrc`, `.pgpass`,
/// `.git-credentials`, …); shell and REPL history (`.bash_history`, …).
/// Such files are skipped with [`SkipReason::Secret`] even when a
/// repository tracks them: an index is read by agents and services, and a
/// key in it is a key handed out.
pub fn is_secret(path: &str) -> bool {
    let mut parts = path.split('/');
    let name = parts.next_back().unwrap_or(path);
    if parts.any(|dir| SECRET_DIRS.contains(&dir)) {
        return true;
    }
    let lower = name.to_ascii_lowercase();
    if lower == ".env" || lower.starts_with(".env.") || lower == ".envrc" {
        return true;
    }
    if SECRET_NAMES.contains(&lower.as_str()) || lower.ends_with("_history") {
        return true;
    }
    let stem = lower.split('.').next().unwrap_or(&lower);
    if SSH_KEY_NAMES.contains(&stem) {
        return true;
    }
    match lower.rsplit_once('.') {
        Some((base, ext)) if !base.is_empty() => SECRET_EXTENSIONS.contains(&ext),
        _ => false,
    }
}

fn is_internal(path: &str) -> bool {
    path == CANOPY_DIR
        || path.starts_with(".canopy/")
        || path == ".git"
        || path.starts_with(".git/")
}

/// Lists the files of the repository at `root`.
pub fn discover(root: &Path, max_file_size: u64, filter: Option<&PathFilter>) -> Result<Discovery> {
    discover_with(root, max_file_size, filter, &|_| {})
}

/// What discovery makes of one listed path.
enum Listed {
    /// Canopy's or git's own files, files gone from the work tree, and
    /// what is not a regular file: not counted anywhere.
    Ignored,
    /// Left out by the glob filter.
    FilteredOut,
    /// Not indexed, and counted.
    Skipped(SkipReason),
    /// A file to index.
    File(Candidate),
}

/// [`discover`], calling `on_file` with each file as soon as it is listed
/// (from several threads, in no particular order): an index run starts
/// work a changed file will need while the rest of the tree is listed.
pub fn discover_with(
    root: &Path,
    max_file_size: u64,
    filter: Option<&PathFilter>,
    on_file: &(dyn Fn(&Candidate) + Sync),
) -> Result<Discovery> {
    let (method, paths) = match git_ls_files(root, &[]) {
        Some(paths) => (DiscoveryMethod::GitLsFiles, paths),
        None => (DiscoveryMethod::Walk, walk(root)),
    };
    classify(root, method, paths, max_file_size, filter, on_file)
}

/// Most paths [`discover_named`] lists through one `git ls-files` (their
/// command line); a larger set lists the whole tree.
pub const MAX_NAMED_PATHS: usize = 512;

/// [`discover_with`] for the named repo-relative `paths` only: what the
/// whole listing would say of them (ignored, skipped, a file to index),
/// without listing the rest of the tree. On Django the whole listing is
/// 6,900 paths, a `git ls-files --others` walk of every directory (40-60
/// ms) and as many `lstat`s, most of a one-file watcher run (issue 32).
/// `None` when the root is not a git work tree (the walk has no such
/// shortcut) or more than [`MAX_NAMED_PATHS`] paths are named: the caller
/// lists the whole tree.
pub fn discover_named(
    root: &Path,
    max_file_size: u64,
    paths: &std::collections::HashSet<String>,
    on_file: &(dyn Fn(&Candidate) + Sync),
) -> Result<Option<Discovery>> {
    if paths.len() > MAX_NAMED_PATHS || !root.join(".git").exists() {
        return Ok(None);
    }
    let mut named: Vec<&str> = paths.iter().map(String::as_str).collect();
    named.sort_unstable();
    if named.is_empty() {
        // No pathspec would list the whole tree.
        return classify(
            root,
            DiscoveryMethod::GitLsFiles,
            Vec::new(),
            max_file_size,
            None,
            on_file,
        )
        .map(Some);
    }
    let Some(listed) = git_ls_files(root, &named) else {
        return Ok(None);
    };
    // A literal pathspec naming a directory lists the files under it too:
    // only the named paths are this run's.
    let listed = listed.into_iter().filter(|p| paths.contains(p)).collect();
    classify(
        root,
        DiscoveryMethod::GitLsFiles,
        listed,
        max_file_size,
        None,
        on_file,
    )
    .map(Some)
}

/// Classifies listed `paths` (see [`discover_with`]).
fn classify(
    root: &Path,
    method: DiscoveryMethod,
    paths: Vec<String>,
    max_file_size: u64,
    filter: Option<&PathFilter>,
    on_file: &(dyn Fn(&Candidate) + Sync),
) -> Result<Discovery> {
    use rayon::prelude::*;
    let root_canonical = root.canonicalize().map_err(|e| CanopyError::io(root, e))?;
    // One `lstat` per file (and more for a symlink): in parallel, since on a
    // 5,000-file tree they are most of a no-change re-index.
    let listed: Vec<Listed> = paths
        .into_par_iter()
        .map(|path| {
            let listed = list_one(root, &root_canonical, path, max_file_size, filter);
            if let Listed::File(c) = &listed {
                on_file(c);
            }
            listed
        })
        .collect();
    let mut files = Vec::with_capacity(listed.len());
    let mut skipped = BTreeMap::new();
    let mut filtered_out = 0;
    for l in listed {
        match l {
            Listed::File(c) => files.push(c),
            Listed::Skipped(reason) => *skipped.entry(reason).or_insert(0) += 1,
            Listed::FilteredOut => filtered_out += 1,
            Listed::Ignored => {}
        }
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    files.dedup_by(|a, b| a.path == b.path);
    Ok(Discovery {
        method,
        files,
        skipped,
        filtered_out,
    })
}

/// Classifies one listed path (see [`discover_with`]).
fn list_one(
    root: &Path,
    root_canonical: &Path,
    path: String,
    max_file_size: u64,
    filter: Option<&PathFilter>,
) -> Listed {
    if is_internal(&path) {
        return Listed::Ignored;
    }
    if filter.is_some_and(|f| !f.is_match(&path)) {
        return Listed::FilteredOut;
    }
    if is_secret(&path) {
        return Listed::Skipped(SkipReason::Secret);
    }
    let abs = root.join(&path);
    let Ok(link_meta) = std::fs::symlink_metadata(&abs) else {
        return Listed::Ignored; // deleted from the work tree but still in git's index
    };
    let (abs_path, meta) = if link_meta.file_type().is_symlink() {
        match abs.canonicalize() {
            Ok(target) if target.starts_with(root_canonical) => match target.metadata() {
                Ok(meta) => (target, meta),
                Err(_) => return Listed::Skipped(SkipReason::Unreadable),
            },
            _ => return Listed::Skipped(SkipReason::SymlinkOutsideRepo),
        }
    } else {
        (abs, link_meta)
    };
    if !meta.is_file() {
        return Listed::Ignored; // submodules (gitlinks) and other non-files
    }
    if meta.len() > max_file_size {
        return Listed::Skipped(SkipReason::TooLarge);
    }
    let mtime_ns = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0);
    Listed::File(Candidate {
        path,
        abs_path,
        size: meta.len(),
        mtime_ns,
    })
}

/// The work tree's files (tracked, and untracked but not ignored), or
/// only those among `named` when it is not empty (taken literally: no
/// glob characters). `None` when `root` is not the top of a git work tree
/// or git is unavailable.
fn git_ls_files(root: &Path, named: &[&str]) -> Option<Vec<String>> {
    if !root.join(".git").exists() {
        return None;
    }
    let mut command = Command::new("git");
    command
        .arg("--literal-pathspecs")
        .arg("-C")
        .arg(root)
        .args([
            "ls-files",
            "-z",
            "--cached",
            "--others",
            "--exclude-standard",
        ]);
    if !named.is_empty() {
        command.arg("--").args(named);
    }
    let output = command.output();
    match output {
        Ok(out) if out.status.success() => Some(
            out.stdout
                .split(|&b| b == 0)
                .filter(|p| !p.is_empty())
                .filter_map(|p| std::str::from_utf8(p).ok().map(str::to_string))
                .collect(),
        ),
        Ok(out) => {
            tracing::warn!(
                "git ls-files failed ({}); walking the directory instead",
                String::from_utf8_lossy(&out.stderr).trim()
            );
            None
        }
        Err(e) => {
            tracing::warn!("could not run git ({e}); walking the directory instead");
            None
        }
    }
}

/// One walking thread's paths, added to the shared list when dropped.
struct Collected<'a> {
    into: &'a std::sync::Mutex<Vec<String>>,
    paths: Vec<String>,
}

impl Drop for Collected<'_> {
    fn drop(&mut self) {
        self.into
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .append(&mut self.paths);
    }
}

fn walk(root: &Path) -> Vec<String> {
    // Two threads read directories: on a 5,500-file tree without git the
    // walk was most of a no-change re-index.
    let walker = ignore::WalkBuilder::new(root)
        .hidden(false)
        .follow_links(false)
        .require_git(false)
        .threads(2)
        .filter_entry(|e| {
            let name = e.file_name();
            !(e.depth() == 1 && (name == ".git" || name == CANOPY_DIR))
        })
        .build_parallel();
    let found = std::sync::Mutex::new(Vec::new());
    walker.run(|| {
        // Each thread collects its own paths; they join the list when the
        // thread's visitor is dropped, at the end of the walk.
        let mut mine = Collected {
            into: &found,
            paths: Vec::new(),
        };
        Box::new(move |entry| {
            if let Ok(e) = entry
                && e.depth() > 0
                && !e.file_type().is_some_and(|t| t.is_dir())
                && let Ok(rel) = e.path().strip_prefix(root)
                && let Some(parts) = rel
                    .components()
                    .map(|c| c.as_os_str().to_str())
                    .collect::<Option<Vec<&str>>>()
            {
                mine.paths.push(parts.join("/"));
            }
            ignore::WalkState::Continue
        })
    });
    found.into_inner().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn well_known_secrets_are_recognised_and_ordinary_code_is_not() {
        for secret in [
            ".ssh/id_rsa",
            "home/.ssh/config",
            ".aws/credentials",
            ".gnupg/pubring.kbx",
            ".env",
            ".env.production",
            "app/.ENV.local",
            ".envrc",
            "certs/server.pem",
            "tls/private.key",
            "id_ed25519",
            "keys/id_rsa.pub",
            ".bash_history",
            ".zsh_history",
            ".python_history",
            ".netrc",
            ".pgpass",
            ".git-credentials",
            "store.p12",
        ] {
            assert!(is_secret(secret), "{secret} should be a secret");
        }
        for code in [
            "src/id_utils.py",
            "src/keys.rs",
            "src/environment.ts",
            "docs/env.md",
            "src/history.py",
            "pem.go",
            "src/monkey.py",
            "Cargo.lock",
            ".gitignore",
        ] {
            assert!(!is_secret(code), "{code} is not a secret");
        }
    }

    #[test]
    fn filters_match_basenames_or_paths() {
        let f = PathFilter::new("*.rs").unwrap();
        assert!(f.is_match("src/main.rs"));
        assert!(!f.is_match("src/main.py"));
        let f = PathFilter::new("src/*.rs").unwrap();
        assert!(f.is_match("src/main.rs"));
        assert!(!f.is_match("src/a/main.rs"));
        let f = PathFilter::new("src/**/*.rs").unwrap();
        assert!(f.is_match("src/a/b/main.rs"));
    }

    #[test]
    fn filters_reject_bad_and_escaping_patterns() {
        assert!(matches!(
            PathFilter::new("src/[").unwrap_err(),
            CanopyError::GlobPattern { .. }
        ));
        assert!(matches!(
            PathFilter::new("../**/*.rs").unwrap_err(),
            CanopyError::PathOutsideRepo(_)
        ));
        assert!(matches!(
            PathFilter::new("/etc/*").unwrap_err(),
            CanopyError::PathOutsideRepo(_)
        ));
    }
}
