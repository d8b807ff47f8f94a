//! Answers do not depend on how many threads indexed the repository
//! (issue 25): the same generated tree indexed with `--threads 1` and with
//! `--threads 4` gives byte-identical JSON for callers (with its sample of
//! unresolved sites), hotspots (with ties), references and a pack.

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
