//! Fixture repositories in temporary directories: [`Repo`] (git, with or
//! without a first commit), the standard small fixtures the tests share,
//! and copies of the workspace's `tests/fixtures` trees.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use crate::git::{commit_all, git};

/// Files of the standard MCP fixture repository: (path, content).
pub const FIXTURE: &[(&str, &str)] = &[
    (
        "src/lib.rs",
        "//! Demo library.

pub struct AuthController {
    secret: String,
}

impl AuthController {
    pub fn authenticate(&self, token: &str) -> bool {
        validate_token(token, &self.secret)
    }
}

pub fn validate_token(token: &str, secret: &str) -> bool {
    token == secret
}
",
    ),
    (
        "src/routes.rs",
        "use crate::AuthController;

pub fn login(controller: &AuthController, token: &str) -> bool {
    controller.authenticate(token)
}
",
    ),
    (
        "app/service.py",
        "class UserService:
    def find_user(self, user_id):
        return {\"id\": user_id}

    def delete_user(self, user_id):
        return None


def load_settings(path):
    return open(path).read()
",
    ),
    (
        "README.md",
        "# Demo

## Installation

Run `cargo build` to build the demo.
",
    ),
];

/// A repository in a temporary directory (removed when dropped).
pub struct Repo {
    /// The directory.
    pub dir: tempfile::TempDir,
}

impl Repo {
    /// `git init`, the files and one commit (`init`).
    pub fn new(files: &[(&str, &str)]) -> Repo {
        let dir = tempfile::tempdir().expect("tempdir");
        git(dir.path(), &["init", "-q"]);
        let repo = Repo { dir };
        for (path, content) in files {
            repo.write(path, content);
        }
        repo.commit("init");
        repo
    }

    /// The files in a repository without commits: a git repository when
    /// git is available, and a `.git` directory (which marks the root) in
    /// any case.
    pub fn with_files(files: &[(&str, &str)]) -> Repo {
        let dir = tempfile::tempdir().expect("tempdir");
        let _ = std::process::Command::new("git")
            .args(["init", "-q"])
            .current_dir(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        std::fs::create_dir_all(dir.path().join(".git")).expect("mark the repo root");
        let repo = Repo { dir };
        for (path, content) in files {
            repo.write(path, content);
        }
        repo
    }

    /// The standard MCP fixture ([`FIXTURE`]), uncommitted.
    pub fn fixture() -> Repo {
        Repo::with_files(FIXTURE)
    }

    /// A repository of `n` generated files, uncommitted: `file(i)` gives
    /// path and content.
    pub fn generated(n: usize, file: impl Fn(usize) -> (String, String)) -> Repo {
        let files: Vec<(String, String)> = (0..n).map(file).collect();
        let refs: Vec<(&str, &str)> = files
            .iter()
            .map(|(p, c)| (p.as_str(), c.as_str()))
            .collect();
        Repo::with_files(&refs)
    }

    /// A committed repository with a few small source files.
    pub fn small() -> Repo {
        Repo::new(&[
            (
                "src/auth.rs",
                "/// Checks a token.\npub fn authenticate(token: &str) -> bool {\n    !token.is_empty()\n}\n\npub struct AuthController {\n    pub secret: String,\n}\n\nimpl AuthController {\n    pub fn validate(&self, token: &str) -> bool {\n        authenticate(token) && token == self.secret\n    }\n}\n",
            ),
            (
                "src/main.rs",
                "mod auth;\n\nfn main() {\n    let ok = auth::authenticate(\"t\");\n    println!(\"{ok}\");\n}\n",
            ),
            (
                "README.md",
                "# Demo\n\n## Installation\n\nRun the binary.\n",
            ),
        ])
    }

    /// A committed repository with `n` generated Rust files (slow enough to
    /// index that requests reliably overlap a run).
    pub fn large(n: usize) -> Repo {
        let files: Vec<(String, String)> = (0..n)
            .map(|i| (format!("src/m{}/file_{i}.rs", i % 20), large_file(i, 0)))
            .collect();
        let refs: Vec<(&str, &str)> = files
            .iter()
            .map(|(p, c)| (p.as_str(), c.as_str()))
            .collect();
        Repo::new(&refs)
    }

    /// Rewrites every file of [`Repo::large`] with new content (version `v`).
    pub fn rewrite_large(&self, n: usize, v: usize) {
        for i in 0..n {
            self.write(&format!("src/m{}/file_{i}.rs", i % 20), &large_file(i, v));
        }
    }

    /// Absolute, canonical root.
    pub fn root(&self) -> PathBuf {
        self.dir.path().canonicalize().expect("canonical root")
    }

    /// [`Repo::root`] as a string (the MCP tools' `path` argument).
    pub fn path(&self) -> String {
        self.root().display().to_string()
    }

    /// Writes a file (creating directories).
    pub fn write(&self, rel: &str, content: &str) {
        write(self.dir.path(), rel, content);
    }

    /// Reads a file's bytes.
    pub fn read(&self, rel: &str) -> Vec<u8> {
        std::fs::read(self.dir.path().join(rel)).expect("read")
    }

    /// Commits everything.
    pub fn commit(&self, message: &str) {
        commit_all(self.dir.path(), message);
    }
}

fn large_file(i: usize, v: usize) -> String {
    let mut s = String::new();
    for k in 0..4 {
        s.push_str(&format!(
            "/// Handler {i}.{k}, version {v}.\npub fn handler_{i}_{k}(x: u32) -> u32 {{\n    let shared_marker = x + {i} + {v};\n    helper_{k}(shared_marker) * 2\n}}\n\n"
        ));
    }
    s
}

/// Writes `root/rel` (creating directories).
pub fn write(root: &Path, rel: &str, content: impl AsRef<[u8]>) {
    let path = root.join(rel);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).expect("mkdir");
    }
    std::fs::write(path, content).expect("write");
}

/// A copy of the workspace's `tests/fixtures/<name>` in a temporary directory.
pub fn workspace_fixture(name: &str) -> tempfile::TempDir {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures")
        .join(name);
    let tmp = tempfile::tempdir().expect("tempdir");
    copy_dir(&src, tmp.path());
    tmp
}

/// Copies the tree at `from` into `to`.
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read") {
        let path = entry.expect("entry").path();
        let target = to.join(path.file_name().expect("name"));
        if path.is_dir() {
            copy_dir(&path, &target);
        } else {
            std::fs::copy(&path, &target).expect("copy");
        }
    }
}
