//! Records the git commit the binary was built from (`canopy --version`),
//! or `unknown` outside a git checkout (a crates.io tarball, a copy).

use std::process::Command;

fn main() {
    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|out| out.status.success())
            .and_then(|out| String::from_utf8(out.stdout).ok())
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
    };
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=CANOPY_GIT_COMMIT={commit}");
    // Rebuild the string when HEAD moves (a commit, a checkout); in a
    // worktree `--git-dir` is the worktree's own folder.
    if let Some(dir) = git(&["rev-parse", "--absolute-git-dir"]) {
        println!("cargo:rerun-if-changed={dir}/HEAD");
        if let Some(reference) = git(&["symbolic-ref", "-q", "HEAD"]) {
            let common = git(&["rev-parse", "--path-format=absolute", "--git-common-dir"])
                .unwrap_or(dir.clone());
            println!("cargo:rerun-if-changed={common}/{reference}");
        }
    }
}
