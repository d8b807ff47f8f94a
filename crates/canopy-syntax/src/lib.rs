//! # canopy-syntax
//!
//! What Canopy knows about source text before anything is stored: which
//! [`lang::Language`] a file is in, its tree-sitter grammar and extraction
//! query (`queries/<lang>.scm`, tags-query capture names), the *units* and
//! *references* a parse yields ([`lang::ParsedFile`]), the stable
//! [`handle::HandleId`] of each unit, and the text helpers every layer
//! shares: full-text documents and query terms ([`text`]) and token counts
//! with the agents' tokenizer ([`tokens`]).
//!
//! This crate has no database, no graph and no front end: `canopy-core`
//! stores and queries what it extracts (and re-exports these modules under
//! the same names), so a change here never needs the store, and a change
//! in the store never rebuilds the grammars.
//!
//! ```
//! use canopy_syntax::lang::{self, Language};
//!
//! let source = "def check(token):\n    return len(token) > 8\n";
//! let parsed = lang::parse_file("auth.py", source.as_bytes());
//! assert_eq!(Language::from_path("auth.py"), Language::Python);
//! assert!(parsed.units.iter().any(|u| u.name.as_deref() == Some("check")));
//! assert_eq!(canopy_syntax::tokens::count_tokens("hello world"), 2);
//! ```

#![warn(missing_docs)]

pub mod handle;
pub mod lang;
pub mod path_class;
pub mod text;
pub mod tokens;

pub use handle::HandleId;
pub use lang::{Language, NodeType, RefType};

/// Helpers shared by the workspace's unit tests (`cfg(test)` code of this
/// crate and of `canopy-core`). Not part of the library's interface.
#[doc(hidden)]
pub mod testing {
    /// Architecture-invariant tests: panics at the first line of code
    /// (comments left out) in `files` (name, text) that contains one of
    /// `forbidden`; `what` says what such a line does.
    pub fn assert_never_named(files: &[(&str, &str)], forbidden: &[impl AsRef<str>], what: &str) {
        for (file, text) in files {
            for (n, line) in text.lines().enumerate() {
                let code = line.split("//").next().unwrap_or("");
                if let Some(name) = forbidden.iter().find(|f| code.contains(f.as_ref())) {
                    panic!("{file}:{}: {what} ({}): {line}", n + 1, name.as_ref());
                }
            }
        }
    }

    /// Every `.rs` file under `dir` (subfolders too), as (path relative to
    /// `dir` with `/`, text), sorted: architecture tests read every file of
    /// a folder, so a new one cannot escape them as it could a list.
    pub fn sources_under(dir: &std::path::Path) -> Vec<(String, String)> {
        fn walk(root: &std::path::Path, dir: &std::path::Path, out: &mut Vec<(String, String)>) {
            let entries =
                std::fs::read_dir(dir).unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()));
            for entry in entries {
                let path = entry.expect("directory entry").path();
                if path.is_dir() {
                    walk(root, &path, out);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    let rel = path.strip_prefix(root).expect("under the root");
                    let rel = rel.to_string_lossy().replace('\\', "/");
                    let text = std::fs::read_to_string(&path)
                        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
                    out.push((rel, text));
                }
            }
        }
        let mut out = Vec::new();
        walk(dir, dir, &mut out);
        out.sort();
        out
    }

    /// A fixed pseudo-random sequence (xorshift64), so failures reproduce.
    pub fn xorshift(seed: u64) -> impl FnMut() -> u64 {
        let mut state = seed;
        move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        }
    }
}
