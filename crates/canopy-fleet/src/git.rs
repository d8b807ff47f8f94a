//! Repositories registered by git URL (`POST /repos/add {"git_url", "ref"}`):
//! the owner node's working copy in its data directory, created by the
//! first [`sync`] and brought to the ref's current commit by every later
//! one (on `/reindex` or `POST /repos/{id}/fetch`).
//!
//! It drives the `git` program (as the single-node service already does):
//! `init` once, then `fetch <url> +<ref>:refs/canopy/fetched`, a forced
//! detached checkout and a clean of untracked files, keeping `.canopy/`
//! (the index). Inputs are validated before they reach a command line
//! (no option injection, no `ext::`/`fd::` transports, local sources only
//! when allowed), git never prompts for credentials, and every command has
//! a time limit.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The ref a checkout is fetched into.
pub const FETCHED_REF: &str = "refs/canopy/fetched";

/// Why a sync failed.
#[derive(Debug, thiserror::Error)]
pub enum GitError {
    /// The URL is not acceptable.
    #[error("invalid git URL {url:?}: {why}")]
    InvalidUrl {
        /// The URL as given.
        url: String,
        /// Why.
        why: &'static str,
    },
    /// The ref is not acceptable.
    #[error("invalid git ref {git_ref:?}: {why}")]
    InvalidRef {
        /// The ref as given.
        git_ref: String,
        /// Why.
        why: &'static str,
    },
    /// A git command failed.
    #[error("git {step} failed: {stderr}")]
    Failed {
        /// Which command.
        step: &'static str,
        /// Its error output (trimmed).
        stderr: String,
    },
    /// A git command ran out of time and was killed.
    #[error("git {step} took longer than {limit:?} and was stopped")]
    Timeout {
        /// Which command.
        step: &'static str,
        /// The limit.
        limit: Duration,
    },
    /// The working copy could not be created or read.
    #[error("git working copy: {0}")]
    Io(#[from] std::io::Error),
}

/// What sources a node accepts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GitPolicy {
    /// Local paths and `file://` URLs (other repositories on the node's
    /// disk; off unless the operator allows it).
    pub allow_local: bool,
    /// Limit of one git command (a fetch of a large repository included).
    pub timeout: Duration,
}

impl Default for GitPolicy {
    fn default() -> Self {
        GitPolicy {
            allow_local: false,
            timeout: Duration::from_secs(600),
        }
    }
}

fn is_local(url: &str) -> bool {
    url.starts_with("file://")
        || url.starts_with('/')
        || url.starts_with("./")
        || url.starts_with("../")
}

/// Accepts `https://`, `http://`, `ssh://`, `git://`, scp-like
/// `user@host:path`, and (when allowed) `file://` and absolute paths.
pub fn validate_url(url: &str, policy: &GitPolicy) -> Result<(), GitError> {
    let bad = |why| {
        Err(GitError::InvalidUrl {
            url: url.to_string(),
            why,
        })
    };
    if url.is_empty() || url.len() > 2048 {
        return bad("empty or longer than 2048 bytes");
    }
    if url.starts_with('-') {
        return bad("starts with '-'");
    }
    if url.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return bad("contains whitespace or control characters");
    }
    if is_local(url) {
        return if policy.allow_local {
            Ok(())
        } else {
            bad("local sources are not allowed on this service")
        };
    }
    // `transport::address` runs a remote helper (ext:: runs any command).
    if let Some(i) = url.find("::")
        && !url[..i].contains('/')
    {
        return bad("remote-helper URLs (transport::address) are not allowed");
    }
    let schemes = ["https://", "http://", "ssh://", "git://"];
    if schemes.iter().any(|s| url.starts_with(s)) {
        return Ok(());
    }
    // scp-like: [user@]host:path, host without '/'.
    if let Some(colon) = url.find(':')
        && colon > 0
        && !url[..colon].contains('/')
        && !url.contains("://")
    {
        return Ok(());
    }
    bad("use https://, http://, ssh://, git:// or user@host:path")
}

/// Accepts a branch, tag or commit name that cannot be taken for an
/// option or change the refspec.
pub fn validate_ref(git_ref: &str) -> Result<(), GitError> {
    let bad = |why| {
        Err(GitError::InvalidRef {
            git_ref: git_ref.to_string(),
            why,
        })
    };
    if git_ref.is_empty() || git_ref.len() > 255 {
        return bad("empty or longer than 255 bytes");
    }
    if git_ref.starts_with('-') || git_ref.starts_with('/') || git_ref.ends_with('/') {
        return bad("starts with '-' or '/', or ends with '/'");
    }
    if git_ref.contains("..") || git_ref.contains("@{") || git_ref.ends_with(".lock") {
        return bad("contains '..' or '@{', or ends with '.lock'");
    }
    if git_ref.chars().any(|c| {
        c.is_control() || c.is_whitespace() || matches!(c, ':' | '^' | '~' | '?' | '*' | '[' | '\\')
    }) {
        return bad("contains whitespace, a control character or one of : ^ ~ ? * [ \\");
    }
    Ok(())
}

/// Where the owner keeps the working copy of `repo_id`.
pub fn checkout_dir(data_dir: &Path, repo_id: &str) -> PathBuf {
    data_dir.join("fleet").join("checkouts").join(repo_id)
}

/// Runs git with the safety settings; returns its standard output.
fn git(
    dir: Option<&Path>,
    args: &[&str],
    step: &'static str,
    policy: &GitPolicy,
) -> Result<String, GitError> {
    let mut cmd = Command::new("git");
    if let Some(d) = dir {
        cmd.arg("-C").arg(d);
    }
    cmd.args([
        "-c",
        "protocol.ext.allow=never",
        "-c",
        "protocol.fd.allow=never",
    ]);
    if !policy.allow_local {
        cmd.args(["-c", "protocol.file.allow=never"]);
    }
    cmd.args(args)
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_ASKPASS", "true")
        .env("SSH_ASKPASS", "true")
        .env("GIT_SSH_COMMAND", "ssh -o BatchMode=yes")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn()?;
    // Drain both pipes on threads so a chatty git never blocks on a full pipe.
    let mut out = child.stdout.take();
    let mut err = child.stderr.take();
    let out_reader = std::thread::spawn(move || {
        let mut s = String::new();
        if let Some(o) = out.as_mut() {
            let _ = o.read_to_string(&mut s);
        }
        s
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        if let Some(e) = err.as_mut() {
            let _ = e.read_to_string(&mut s);
        }
        s
    });
    let deadline = Instant::now() + policy.timeout;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(GitError::Timeout {
                step,
                limit: policy.timeout,
            });
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let stdout = out_reader.join().unwrap_or_default();
    let stderr = err_reader.join().unwrap_or_default();
    if status.success() {
        Ok(stdout)
    } else {
        let stderr: String = stderr.trim().chars().take(2000).collect();
        Err(GitError::Failed { step, stderr })
    }
}

/// Brings the working copy in `dir` to the current commit of `git_ref` at
/// `url` (creating it on first use) and returns that commit. Untracked
/// files are removed, ignored ones (the index in `.canopy/`) kept.
pub fn sync(url: &str, git_ref: &str, dir: &Path, policy: &GitPolicy) -> Result<String, GitError> {
    validate_url(url, policy)?;
    validate_ref(git_ref)?;
    std::fs::create_dir_all(dir)?;
    if !dir.join(".git").exists() {
        git(Some(dir), &["init", "--quiet"], "init", policy)?;
    }
    let refspec = format!("+{git_ref}:{FETCHED_REF}");
    git(
        Some(dir),
        &[
            "fetch",
            "--quiet",
            "--no-tags",
            "--force",
            "--",
            url,
            &refspec,
        ],
        "fetch",
        policy,
    )?;
    git(
        Some(dir),
        &["checkout", "--quiet", "--force", "--detach", FETCHED_REF],
        "checkout",
        policy,
    )?;
    git(
        Some(dir),
        &["clean", "-ffdq", "-e", "/.canopy"],
        "clean",
        policy,
    )?;
    let sha = git(
        Some(dir),
        &["rev-parse", "--verify", "HEAD"],
        "rev-parse",
        policy,
    )?;
    Ok(sha.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(dir: &Path, args: &[&str]) -> String {
        let out = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args([
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@example.invalid",
                "-c",
                "init.defaultBranch=main",
            ])
            .args(args)
            .output()
            .expect("git runs");
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    fn local() -> GitPolicy {
        GitPolicy {
            allow_local: true,
            timeout: Duration::from_secs(60),
        }
    }

    #[test]
    fn urls_and_refs_are_validated() {
        let p = GitPolicy::default();
        for ok in [
            "https://example.invalid/a.git",
            "ssh://git@h/x",
            "git@host:org/repo.git",
            "git://h/x",
        ] {
            assert!(validate_url(ok, &p).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "-uhttps://x",
            "ext::sh -c touch%20x",
            "fd::3",
            "https://a b",
            "/srv/x.git",
            "file:///srv/x.git",
            "ftp://h/x",
        ] {
            assert!(validate_url(bad, &p).is_err(), "{bad}");
        }
        assert!(validate_url("/srv/x.git", &local()).is_ok());
        assert!(validate_url("file:///srv/x.git", &local()).is_ok());
        for ok in [
            "main",
            "v1.2.3",
            "release/2024",
            "HEAD",
            "0123456789abcdef0123456789abcdef01234567",
        ] {
            assert!(validate_ref(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "-x",
            "a..b",
            "a:b",
            "a b",
            "x^",
            "refs/heads/x.lock",
            "/x",
            "x/",
        ] {
            assert!(validate_ref(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn sync_follows_branches_tags_and_commits_and_keeps_the_index() {
        let tmp = tempfile::tempdir().unwrap();
        let src = tmp.path().join("src");
        std::fs::create_dir_all(&src).unwrap();
        run(&src, &["init", "--quiet"]);
        std::fs::write(src.join("a.txt"), "one\n").unwrap();
        run(&src, &["add", "."]);
        run(&src, &["commit", "--quiet", "-m", "one"]);
        run(&src, &["tag", "v1"]);
        let first = run(&src, &["rev-parse", "HEAD"]);
        let bare = tmp.path().join("bare.git");
        run(
            tmp.path(),
            &[
                "clone",
                "--quiet",
                "--bare",
                src.to_str().unwrap(),
                bare.to_str().unwrap(),
            ],
        );
        let url = format!("file://{}", bare.display());

        let work = checkout_dir(&tmp.path().join("data"), "r1");
        assert_eq!(sync(&url, "main", &work, &local()).unwrap(), first);
        assert_eq!(
            std::fs::read_to_string(work.join("a.txt")).unwrap(),
            "one\n"
        );
        // The index and untracked files: the index stays, strays go.
        std::fs::create_dir_all(work.join(".canopy")).unwrap();
        std::fs::write(work.join(".canopy/.gitignore"), "*\n").unwrap();
        std::fs::write(work.join(".canopy/index.db"), "x").unwrap();
        std::fs::write(work.join("stray.txt"), "x").unwrap();

        std::fs::write(src.join("a.txt"), "two\n").unwrap();
        run(&src, &["commit", "--quiet", "-am", "two"]);
        let second = run(&src, &["rev-parse", "HEAD"]);
        run(&src, &["push", "--quiet", bare.to_str().unwrap(), "main"]);
        assert_eq!(sync(&url, "main", &work, &local()).unwrap(), second);
        assert_eq!(
            std::fs::read_to_string(work.join("a.txt")).unwrap(),
            "two\n"
        );
        assert!(work.join(".canopy/index.db").exists());
        assert!(!work.join("stray.txt").exists());

        // A tag and a commit id go back in time.
        assert_eq!(sync(&url, "v1", &work, &local()).unwrap(), first);
        assert_eq!(
            std::fs::read_to_string(work.join("a.txt")).unwrap(),
            "one\n"
        );
        assert_eq!(
            sync(&bare.display().to_string(), &second, &work, &local()).unwrap(),
            second
        );

        // A missing ref fails with git's message; a local source is refused
        // when not allowed, before git runs.
        assert!(matches!(
            sync(&url, "nope", &work, &local()),
            Err(GitError::Failed { step: "fetch", .. })
        ));
        assert!(matches!(
            sync(&url, "main", &work, &GitPolicy::default()),
            Err(GitError::InvalidUrl { .. })
        ));
    }
}
