//! The layers of `canopy-core`, checked on every source file.
//!
//! Each top-level module belongs to one layer; code in a module may name
//! (`crate::x`, `use crate::{x, …}`) only modules of lower layers. The test
//! reads every `.rs` file under `src/` — not a list — so a new file or module
//! cannot escape it: a module missing from [`LAYERS`] fails the test until it
//! is placed. Unit tests (`#[cfg(test)]` and below) may reach anywhere.
//!
//! ARCHITECTURE.md describes the same layers, lowest first.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The layers, lowest first: what a module may build on.
const LAYERS: &[(&str, &[&str])] = &[
    // Below all of these, three crates this one re-exports under the same
    // names: `canopy-syntax` (`crate::{lang, handle, text, tokens,
    // path_class}`: languages and extraction, handle ids, text, token
    // counting, path classes), above it `canopy-store` (`crate::{store,
    // error, cancel}`: the database, the error type, cancellation), and above
    // both `canopy-graph` (`crate::graph`: facts, resolution, navigation).
    // Cargo keeps them below: none depends on this crate.
    (
        "foundations: knobs, fitted tables, temporary files, phase timings",
        &["knobs", "pack_calibration", "temp_files", "timing"],
    ),
    (
        "vocabulary: the data model, sessions",
        &["model", "session"],
    ),
    (
        "inputs: discovery, the DSL, embeddings",
        &["discover", "dsl", "embed"],
    ),
    (
        "the transformer encoder, on the static model's tokenizer",
        &["encoder"],
    ),
    (
        "derived from the store: oversize files, read snapshots",
        &["oversize", "snapshot"],
    ),
    (
        "indexing and retrieval",
        &["index", "query", "semantic", "rerank"],
    ),
    ("answers built on retrieval", &["lazy", "pack", "resultset"]),
    ("context packs", &["context"]),
    ("the one API front ends call", &["engine"]),
    ("freshness over the engine", &["watch"]),
    // Test-only (`#![cfg(test)]`): the graph's tests that need an index run.
    ("tests across the layers", &["graph_tests"]),
];

/// Known upward arrows, each with the reason it is still there. Removing
/// one is progress; adding one needs a reason here. (None left: the last,
/// `lang` → `graph` for fact extraction, became a parameter of
/// `lang::parse_file_with` that the index passes.)
const KNOWN_EXCEPTIONS: &[(&str, &str, &str)] = &[];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS
        .iter()
        .position(|(_, modules)| modules.contains(&module))
}

fn source_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            source_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The code of a file: comments dropped, and nothing from the first
/// top-level `#[cfg(test)]` module on (unit tests); none of a file that is
/// itself a unit test module (`#![cfg(test)]`).
fn code_of(text: &str) -> String {
    let mut code = String::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        if line.starts_with("#![cfg(test)]") {
            break;
        }
        if line.starts_with("#[cfg(test)]")
            && lines
                .peek()
                .is_some_and(|next| next.starts_with("mod ") || next.starts_with("pub(crate) mod "))
        {
            break;
        }
        code.push_str(line.split("//").next().unwrap_or(""));
        code.push('\n');
    }
    code
}

fn ident_at(code: &[u8], mut i: usize) -> (String, usize) {
    let start = i;
    while i < code.len() && (code[i].is_ascii_alphanumeric() || code[i] == b'_') {
        i += 1;
    }
    (String::from_utf8_lossy(&code[start..i]).into_owned(), i)
}

/// The top-level modules a file's code names through `crate::`.
fn named_modules(code: &str) -> BTreeSet<String> {
    let bytes = code.as_bytes();
    let mut named = BTreeSet::new();
    let mut from = 0;
    while let Some(at) = code[from..].find("crate::") {
        let mut i = from + at + "crate::".len();
        from = i;
        if bytes.get(i) == Some(&b'{') {
            // `crate::{a, b::{c, d}, e}`: the first name of each item.
            let mut depth = 0;
            let mut item_start = true;
            i += 1;
            while i < bytes.len() {
                match bytes[i] {
                    b'{' => depth += 1,
                    b'}' if depth == 0 => break,
                    b'}' => depth -= 1,
                    b',' if depth == 0 => item_start = true,
                    c if depth == 0 && item_start && (c.is_ascii_alphabetic() || c == b'_') => {
                        let (name, end) = ident_at(bytes, i);
                        named.insert(name);
                        item_start = false;
                        i = end;
                        continue;
                    }
                    _ => {}
                }
                i += 1;
            }
        } else {
            let (name, _) = ident_at(bytes, i);
            named.insert(name);
        }
    }
    named
}

#[test]
fn every_module_names_only_lower_layers() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    source_files(&src, &mut files);
    assert!(files.len() > 20, "found only {} files", files.len());
    let modules: BTreeSet<String> = files
        .iter()
        .filter_map(|f| {
            let rel = f.strip_prefix(&src).ok()?;
            let first = rel.components().next()?.as_os_str().to_str()?;
            Some(first.trim_end_matches(".rs").to_string())
        })
        .filter(|m| m != "lib")
        .collect();
    let mut problems = Vec::new();
    for (_, listed) in LAYERS {
        for module in *listed {
            if !modules.contains(*module) {
                problems.push(format!(
                    "LAYERS lists `{module}`, which is not a module of src/: remove it"
                ));
            }
        }
    }
    for module in &modules {
        if layer_of(module).is_none() {
            problems.push(format!(
                "module `{module}` is in no layer: add it to LAYERS (and to ARCHITECTURE.md)"
            ));
        }
    }
    for file in &files {
        let rel = file.strip_prefix(&src).expect("under src");
        let module = rel
            .components()
            .next()
            .and_then(|c| c.as_os_str().to_str())
            .map(|s| s.trim_end_matches(".rs").to_string())
            .expect("a first component");
        if module == "lib" {
            continue;
        }
        let Some(own) = layer_of(&module) else {
            continue;
        };
        let text = std::fs::read_to_string(file).expect("source is UTF-8");
        for named in named_modules(&code_of(&text)) {
            if named == module || !modules.contains(&named) {
                continue;
            }
            let Some(theirs) = layer_of(&named) else {
                continue;
            };
            let excused = KNOWN_EXCEPTIONS
                .iter()
                .any(|(from, to, _)| *from == module && *to == named);
            if theirs >= own && !excused {
                problems.push(format!(
                    "{}: `{module}` ({}) names `{named}` ({}), which is not below it",
                    rel.display(),
                    LAYERS[own].0,
                    LAYERS[theirs].0
                ));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "upward imports in canopy-core:\n{}",
        problems.join("\n")
    );
}

#[test]
fn known_exceptions_are_still_needed() {
    // An exception nobody needs any more must go, so the list stays true.
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    for (from, to, why) in KNOWN_EXCEPTIONS {
        let mut files = Vec::new();
        let dir = src.join(from);
        if dir.is_dir() {
            source_files(&dir, &mut files);
        }
        let file = src.join(format!("{from}.rs"));
        if file.is_file() {
            files.push(file);
        }
        let used = files.iter().any(|f| {
            let text = std::fs::read_to_string(f).expect("source is UTF-8");
            named_modules(&code_of(&text)).contains(*to)
        });
        assert!(
            used,
            "`{from}` no longer names `{to}`: remove the exception ({why})"
        );
    }
}

#[test]
fn the_scanner_sees_grouped_and_nested_imports() {
    let code = code_of(
        "use crate::{error::Result, graph::{facts, nav}, model};\n\
         // use crate::engine;\n\
         fn f() { crate::store::open(); }\n\
         #[cfg(test)]\nmod tests { use crate::watch; }\n",
    );
    let named: Vec<String> = named_modules(&code).into_iter().collect();
    assert_eq!(named, ["error", "graph", "model", "store"]);
}
