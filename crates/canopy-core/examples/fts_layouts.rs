//! How many bytes the full-text index would take under other layouts.
//!
//! Usage: `cargo run --release -p canopy-core --example fts_layouts -- REPO`
//!
//! Parses every file `git ls-files` lists in REPO (as the indexer does, but
//! without skipping rules: run it on a source tree), builds the FTS5 table
//! of schema.sql and some alternatives from the same documents, each in its
//! own database, and prints each one's bytes (SQLite's `dbstat`) divided by
//! the source bytes. Nothing here changes the index; it tells which layout
//! change is worth an evaluation run (`bench/eval/run.sh`), since all of
//! them change what a search matches or how it ranks.

use std::path::Path;
use std::process::Command;

use canopy_core::lang::parse_file;
use canopy_core::text::path_document;
use rusqlite::{Connection, params};

/// One layout: its table options and what goes into each row.
struct Layout {
    name: &'static str,
    options: &'static str,
    /// The path words in every unit's row (false: in one extra row per file).
    path_per_unit: bool,
    /// Split identifier parts appended to name and body.
    identifier_parts: bool,
}

const LAYOUTS: [Layout; 4] = [
    Layout {
        name: "schema.sql today (detail=full, path words per unit)",
        options: "",
        path_per_unit: true,
        identifier_parts: true,
    },
    Layout {
        name: "path words once per file",
        options: "",
        path_per_unit: false,
        identifier_parts: true,
    },
    Layout {
        name: "detail=column (no positions: no phrase queries)",
        options: ", detail = column",
        path_per_unit: true,
        identifier_parts: true,
    },
    Layout {
        name: "no identifier parts (`parse` would not find `parse_expr`)",
        options: "",
        path_per_unit: true,
        identifier_parts: false,
    },
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let repo = std::env::args()
        .nth(1)
        .ok_or("usage: fts_layouts REPO (a git repository)")?;
    let listed = Command::new("git")
        .args(["-C", &repo, "ls-files", "-z"])
        .output()?;
    if !listed.status.success() {
        return Err(format!("git ls-files failed in {repo}").into());
    }
    let mut files = Vec::new();
    let mut source_bytes = 0usize;
    for path in listed.stdout.split(|b| *b == 0).filter(|p| !p.is_empty()) {
        let path = String::from_utf8_lossy(path).into_owned();
        let Ok(bytes) = std::fs::read(Path::new(&repo).join(&path)) else {
            continue;
        };
        if bytes.len() > 1 << 20 || bytes[..bytes.len().min(8192)].contains(&0) {
            continue; // the indexer's default skips: too large, binary
        }
        source_bytes += bytes.len();
        let parsed = parse_file(&path, &bytes);
        files.push((path, parsed));
    }
    let units: usize = files.iter().map(|(_, p)| p.units.len()).sum();
    println!(
        "{} files, {units} units, {:.1} MB of source",
        files.len(),
        source_bytes as f64 / 1e6
    );
    // A name to search for, to see whether `bm25()` still ranks.
    let probe = files
        .iter()
        .flat_map(|(_, parsed)| parsed.units.iter())
        .find_map(|u| {
            u.name
                .clone()
                .filter(|n| n.chars().all(|c| c.is_ascii_alphanumeric()))
        })
        .unwrap_or_else(|| "fn".to_string())
        .to_lowercase();
    println!("| layout | FTS bytes | ÷ source | rows matching `{probe}` with bm25() ≠ 0 |");
    println!("|---|---:|---:|---:|");
    let dir = tempfile::tempdir()?;
    for (i, layout) in LAYOUTS.iter().enumerate() {
        let conn = Connection::open(dir.path().join(format!("layout{i}.db")))?;
        conn.execute_batch(&format!(
            "CREATE VIRTUAL TABLE fts USING fts5(name, path, body, content = '',
             contentless_delete = 1,
             tokenize = \"unicode61 remove_diacritics 2 tokenchars '_'\"{});",
            layout.options
        ))?;
        let tx = conn.unchecked_transaction()?;
        {
            let mut insert =
                tx.prepare("INSERT INTO fts(rowid, name, path, body) VALUES (?1, ?2, ?3, ?4)")?;
            let mut rowid = 0i64;
            for (path, parsed) in &files {
                let path_doc = path_document(path);
                if !layout.path_per_unit {
                    rowid += 1;
                    insert.execute(params![rowid, "", path_doc, ""])?;
                }
                for unit in &parsed.units {
                    rowid += 1;
                    let (name, body) = if layout.identifier_parts {
                        (unit.fts_name.as_str(), unit.fts_body.as_str())
                    } else {
                        (without_parts(&unit.fts_name), without_parts(&unit.fts_body))
                    };
                    let path = if layout.path_per_unit {
                        path_doc.as_str()
                    } else {
                        ""
                    };
                    insert.execute(params![rowid, name, path, body])?;
                }
            }
        }
        tx.commit()?;
        conn.execute_batch("INSERT INTO fts(fts) VALUES ('optimize');")?;
        let bytes: i64 = conn.query_row(
            "SELECT SUM(pgsize) FROM dbstat WHERE name LIKE 'fts%'",
            [],
            |r| r.get(0),
        )?;
        let (mut matching, mut ranked) = (0, 0);
        let mut scores = conn.prepare("SELECT bm25(fts) FROM fts WHERE fts MATCH ?1")?;
        let mut rows = scores.query([format!("\"{probe}\"")])?;
        while let Some(row) = rows.next()? {
            matching += 1;
            ranked += usize::from(row.get::<_, f64>(0)? != 0.0);
        }
        println!(
            "| {} | {bytes} | {:.2} | {ranked} of {matching} |",
            layout.name,
            bytes as f64 / source_bytes as f64
        );
    }
    Ok(())
}

/// A document without the identifier parts `fts_document` appended: they
/// follow the text's last newline, which the original text never ends with
/// in a way that matters here (a trailing part line is all lower-case words).
fn without_parts(doc: &str) -> &str {
    match doc.rfind('\n') {
        Some(i) if doc[i + 1..].ends_with(' ') => &doc[..i],
        _ => doc,
    }
}
