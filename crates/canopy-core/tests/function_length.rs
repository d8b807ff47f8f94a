//! No function in any crate's `src/` runs over [`MAX_LINES`] lines.
//!
//! A long function hides its phases; splitting it into named steps is how
//! the code says what it does (ARCHITECTURE.md, "named phases"). The test
//! reads every `.rs` file under `crates/*/src` of the workspace — tests,
//! examples and benches are exempt: a test states one scenario top to
//! bottom. A function is counted from its `fn` line to the closing brace at
//! the same indentation (rustfmt's layout, which `cargo fmt --check` keeps).

use std::path::{Path, PathBuf};

/// The longest a function may be, signature and closing brace included.
const MAX_LINES: usize = 120;

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The name of the function a line declares, if it declares one.
fn declared_fn(line: &str) -> Option<&str> {
    let mut rest = line.trim_start();
    if let Some(after) = rest.strip_prefix("pub") {
        rest = after.trim_start();
        if rest.starts_with('(') {
            rest = &rest[rest.find(')')? + 1..];
        }
        rest = rest.trim_start();
    }
    for qualifier in ["const ", "async ", "unsafe ", "extern \"C\" "] {
        if let Some(after) = rest.strip_prefix(qualifier) {
            rest = after.trim_start();
        }
    }
    let rest = rest.strip_prefix("fn ")?;
    let end = rest
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(rest.len());
    (end > 0).then(|| &rest[..end])
}

/// `(name, first line (1-based), length)` of every function with a body.
fn functions(text: &str) -> Vec<(String, usize, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(name) = declared_fn(line) else {
            continue;
        };
        let indent = &line[..line.len() - line.trim_start().len()];
        // The signature ends at the first line ending in `{` (a body) or
        // `;` (a declaration in a trait or an extern block).
        let Some(sig_end) = (i..lines.len()).find(|&j| {
            let t = lines[j].trim_end();
            t.ends_with('{') || t.ends_with(';') || (j == i && t.ends_with('}'))
        }) else {
            continue;
        };
        let sig = lines[sig_end].trim_end();
        if sig.ends_with(';') || sig.ends_with('}') {
            continue;
        }
        let closing = format!("{indent}}}");
        if let Some(end) = (sig_end + 1..lines.len()).find(|&j| lines[j] == closing) {
            out.push((name.to_string(), i + 1, end - i + 1));
        }
    }
    out
}

#[test]
fn no_function_in_src_is_longer_than_the_limit() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    for krate in std::fs::read_dir(&crates)
        .expect("crates/ is readable")
        .flatten()
    {
        rust_files(&krate.path().join("src"), &mut files);
    }
    files.sort();
    assert!(files.len() > 50, "found only {} source files", files.len());
    let mut long = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).expect("source is UTF-8");
        for (name, line, length) in functions(&text) {
            if length > MAX_LINES {
                let shown = file.strip_prefix(&crates).unwrap_or(file);
                long.push(format!("{}:{line} {name}: {length} lines", shown.display()));
            }
        }
    }
    assert!(
        long.is_empty(),
        "functions over {MAX_LINES} lines (split them into named steps):\n{}",
        long.join("\n")
    );
}

#[test]
fn the_counter_measures_bodies_and_skips_declarations() {
    let text = "\
pub(crate) fn short() {
    one();
}

trait T {
    fn declared(&self) -> u32;
    fn defaulted(&self) {
        body();
        more();
    }
}

async fn spread<T>(
    a: T,
) -> T
where
    T: Copy,
{
    a
}

fn one_line() { x() }
";
    let found = functions(text);
    assert_eq!(
        found,
        vec![
            ("short".to_string(), 1, 3),
            ("defaulted".to_string(), 7, 4),
            ("spread".to_string(), 13, 8),
        ]
    );
}
