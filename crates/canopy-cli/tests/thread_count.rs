//! Answers do not depend on how many threads indexed the repository
//! (issue 25): the same generated tree indexed with `--threads 1` and with
//! `--threads 4` gives byte-identical JSON for callers (with its sample of
//! unresolved sites), hotspots (with ties), references and a pack. Nor does
//! the index itself (issue 28 item 2): every table's rows, ids included,
//! are the same with one thread and with two, for every fixture repository
//! and a generated tree of more files than a write batch holds.

use std::path::Path;
use std::process::{Command, Output};

fn canopy(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_canopy"))
        .args(args)
        .current_dir(dir)
        .env_remove("CANOPY_ROOT")
        .env_remove("CANOPY_SERVICE_URL")
        .output()
        .expect("run canopy")
}

fn stdout(o: &Output) -> String {
    assert!(
        o.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// More files than one write batch holds, of very different sizes (so that
/// parsers finish out of order), each with a call of the builtin `filter`, which
/// resolves to nothing (more than the unresolved sample holds), and a helper
/// with exactly one caller (ties in hotspots).
fn generate(root: &Path) {
    std::fs::create_dir_all(root.join("core")).expect("mkdir");
    std::fs::create_dir_all(root.join("app")).expect("mkdir");
    std::fs::write(root.join("core/__init__.py"), "").expect("write");
    std::fs::write(
        root.join("core/query.py"),
        "class QuerySet:\n    def filter(self, *args):\n        return self\n\n    \
         def all(self):\n        return self.filter()\n",
    )
    .expect("write");
    for i in 0..600 {
        let mut text = format!(
            "from core.query import QuerySet\n\n\ndef helper_{i}(x):\n    return x.filter({i})\n\n\n\
             def use_{i}():\n    qs = QuerySet()\n    qs.filter({i})\n    kept = list(filter(None, [{i}]))\n    \
             return helper_{i}(qs), kept\n"
        );
        if i % 9 == 0 {
            for k in 0..300 {
                text.push_str(&format!("\ndef pad_{i}_{k}(v):\n    return v + {k}\n"));
            }
        }
        std::fs::write(root.join(format!("app/m{i:03}.py")), text).expect("write");
    }
}

/// The answers compared, with what differs between any two runs (when the
/// index was written) taken out.
fn answers(root: &Path) -> Vec<(String, String)> {
    let queries: [&[&str]; 4] = [
        &["--json", "callers", "QuerySet.filter"],
        &["--json", "hotspots"],
        &["--json", "references", "QuerySet"],
        &["--json", "pack", "--pattern", "helper filter"],
    ];
    queries
        .iter()
        .map(|args| {
            let mut json: serde_json::Value =
                serde_json::from_str(&stdout(&canopy(root, args))).expect("json");
            strip_times(&mut json);
            (args.join(" "), json.to_string())
        })
        .collect()
}

fn strip_times(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(map) => {
            map.remove("indexed_at");
            map.values_mut().for_each(strip_times);
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(strip_times),
        _ => {}
    }
}

#[test]
fn answers_are_the_same_on_one_thread_and_on_four() {
    let one = tempfile::tempdir().expect("tempdir");
    let four = tempfile::tempdir().expect("tempdir");
    generate(one.path());
    generate(four.path());
    stdout(&canopy(one.path(), &["index", "--threads", "1", "--quiet"]));
    stdout(&canopy(
        four.path(),
        &["index", "--threads", "4", "--quiet"],
    ));
    let (a, b) = (answers(one.path()), answers(four.path()));
    // The answers are not trivially equal: the sample is capped, and
    // hotspots has ties.
    let callers: serde_json::Value = serde_json::from_str(&a[0].1).expect("json");
    assert!(
        callers["unresolved_count"].as_u64().unwrap_or(0) > 50,
        "{callers}"
    );
    for ((query, x), (_, y)) in a.iter().zip(&b) {
        assert_eq!(x, y, "`canopy {query}` differs between 1 and 4 threads");
    }
}

/// Every row of every table of the index under `root`, as text, sorted,
/// table by table; what says when the index was written is left out
/// (`indexed_at` columns, `meta.last_indexed`), and so is the state stamp
/// (`meta.state_stamp`: random bits drawn by every write, an identity of the
/// index's state, not part of what was indexed).
fn index_rows(root: &Path) -> Vec<String> {
    let db = rusqlite::Connection::open_with_flags(
        root.join(".canopy/index.db"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .expect("open the index");
    let tables: Vec<String> = db
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        .expect("tables")
        .query_map([], |r| r.get(0))
        .expect("tables")
        .collect::<rusqlite::Result<_>>()
        .expect("tables");
    let mut out = Vec::new();
    for table in tables {
        let columns: Vec<String> = db
            .prepare(&format!("PRAGMA table_info(\"{table}\")"))
            .expect("columns")
            .query_map([], |r| r.get::<_, String>(1))
            .expect("columns")
            .collect::<rusqlite::Result<Vec<_>>>()
            .expect("columns")
            .into_iter()
            .filter(|c| c != "indexed_at")
            .collect();
        let select = format!(
            "SELECT {} FROM \"{table}\"",
            columns
                .iter()
                .map(|c| format!("\"{c}\""))
                .collect::<Vec<_>>()
                .join(", ")
        );
        // The FTS5 table itself reads as its shadow tables, which are here.
        let Ok(mut stmt) = db.prepare(&select) else {
            continue;
        };
        let mut rows: Vec<String> = stmt
            .query_map([], |r| {
                (0..columns.len())
                    .map(|i| {
                        r.get::<_, rusqlite::types::Value>(i)
                            .map(|v| format!("{v:?}"))
                    })
                    .collect::<rusqlite::Result<Vec<_>>>()
                    .map(|vals| format!("{table}: {}", vals.join(" | ")))
            })
            .expect("rows")
            .collect::<rusqlite::Result<_>>()
            .expect("rows");
        if table == "meta" {
            rows.retain(|r| {
                !r.starts_with("meta: Text(\"last_indexed\")")
                    && !r.starts_with("meta: Text(\"state_stamp\")")
            });
        }
        rows.sort();
        out.extend(rows);
    }
    out
}

/// `root` indexed cold with `--threads N`, its rows.
fn rows_with_threads(root: &Path, threads: &str) -> Vec<String> {
    let _ = std::fs::remove_dir_all(root.join(".canopy"));
    stdout(&canopy(root, &["index", "--threads", threads, "--quiet"]));
    index_rows(root)
}

#[test]
fn the_index_is_the_same_on_one_thread_and_on_two() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures");
    let mut repos: Vec<(String, tempfile::TempDir)> = Vec::new();
    for lang in [
        "go",
        "javascript",
        "markdown",
        "python",
        "rust",
        "text",
        "tsx",
        "typescript",
    ] {
        repos.push((lang.into(), copy_of(&fixtures.join(lang))));
    }
    for lang in ["go", "go_module", "imports", "python", "rust", "typescript"] {
        repos.push((
            format!("graph/{lang}"),
            copy_of(&fixtures.join("graph").join(lang)),
        ));
    }
    let generated = tempfile::tempdir().expect("tempdir");
    generate(generated.path());
    repos.push(("generated".into(), generated));
    for (name, dir) in &repos {
        // One tree indexed twice: the files (and their times) are the same.
        let one = rows_with_threads(dir.path(), "1");
        let two = rows_with_threads(dir.path(), "2");
        assert!(
            one.iter().any(|r| r.starts_with("nodes: ")),
            "{name}: the index holds units"
        );
        let only_one: Vec<&String> = one
            .iter()
            .filter(|r| two.binary_search(r).is_err())
            .take(5)
            .collect();
        let only_two: Vec<&String> = two
            .iter()
            .filter(|r| one.binary_search(r).is_err())
            .take(5)
            .collect();
        assert!(
            one == two,
            "{name}: the index differs between 1 and 2 threads; only with 1: {only_one:#?}; only with 2: {only_two:#?}"
        );
    }
}

/// A copy of a fixture repository in a temporary directory.
fn copy_of(from: &Path) -> tempfile::TempDir {
    fn copy(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).expect("mkdir");
        for entry in std::fs::read_dir(from).expect("read_dir") {
            let entry = entry.expect("entry");
            let target = to.join(entry.file_name());
            if entry.file_type().expect("type").is_dir() {
                copy(&entry.path(), &target);
            } else {
                std::fs::copy(entry.path(), &target).expect("copy");
            }
        }
    }
    let dir = tempfile::tempdir().expect("tempdir");
    copy(from, dir.path());
    dir
}
