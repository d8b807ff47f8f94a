//! Git for fixtures: every command runs with a fixed identity, no signing
//! and `main` as the first branch, whatever the machine's configuration.

use std::path::Path;
use std::process::Command;

/// Runs `git ARGS` in `dir`; panics with git's stderr when it fails.
pub fn git(dir: &Path, args: &[&str]) {
    git_with_env(dir, args, &[]);
}

/// Runs `git ARGS` in `dir` with `env` added to its environment; panics
/// with git's stderr when it fails.
pub fn git_with_env(dir: &Path, args: &[&str], env: &[(&str, &str)]) {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args([
            "-c",
            "user.name=Canopy Test",
            "-c",
            "user.email=test@example.invalid",
            "-c",
            "commit.gpgsign=false",
            "-c",
            "init.defaultBranch=main",
        ])
        .args(args)
        .envs(env.iter().copied())
        .output()
        .expect("run git");
    assert!(
        out.status.success(),
        "git {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `git add -A` and a commit of everything in `dir`.
pub fn commit_all(dir: &Path, message: &str) {
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "--allow-empty", "-m", message]);
}

/// `git add -A` and a commit of everything in `dir`, authored and committed
/// at `date` (any date git reads, e.g. `2020-01-11T12:00:00Z`): a history
/// whose times do not depend on when the test runs.
pub fn commit_all_at(dir: &Path, message: &str, date: &str) {
    git(dir, &["add", "-A"]);
    git_with_env(
        dir,
        &["commit", "-q", "--allow-empty", "-m", message],
        &[("GIT_AUTHOR_DATE", date), ("GIT_COMMITTER_DATE", date)],
    );
}
