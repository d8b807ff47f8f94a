//! End-to-end: the graph subcommands of the real `canopy` binary on a copy of
//! the Python resolution fixture (`tests/fixtures/graph/python`).

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

fn fixture() -> tempfile::TempDir {
    canopy_test_support::repo::workspace_fixture("graph/python")
}

#[test]
fn callers_and_callees_in_text_json_dot_and_mermaid() {
    let repo = fixture();
    let dir = repo.path();
    stdout(&canopy(dir, &["index", "--quiet"]));

    let text = stdout(&canopy(dir, &["callers", "Parser.parse", "--depth", "2"]));
    assert!(text.contains("callers of pkg/models.py"), "{text}");
    assert!(text.contains("main  app.py"), "{text}");

    let json: serde_json::Value =
        serde_json::from_str(&stdout(&canopy(dir, &["--json", "callees", "main"]))).expect("json");
    let names: Vec<&str> = json["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .filter_map(|n| n["qualified_name"].as_str())
        .collect();
    assert!(
        names.contains(&"make") && names.contains(&"Parser.parse"),
        "{names:?}"
    );
    assert!(json["unresolved_count"].as_u64().unwrap_or(0) >= 1);

    let dot = stdout(&canopy(
        dir,
        &["callers", "Parser.parse", "--format", "dot"],
    ));
    assert!(dot.starts_with("digraph") && dot.contains("->"), "{dot}");
    let mermaid = stdout(&canopy(
        dir,
        &["callers", "Parser.parse", "--format", "mermaid"],
    ));
    assert!(
        mermaid.starts_with("flowchart") && mermaid.contains("-->"),
        "{mermaid}"
    );
}

#[test]
fn definition_path_references_and_kinds_of_empty() {
    let repo = fixture();
    let dir = repo.path();
    stdout(&canopy(dir, &["index", "--quiet"]));

    // `p.parse()` on line 11 of app.py: `parse` starts at column 6.
    let def: serde_json::Value = serde_json::from_str(&stdout(&canopy(
        dir,
        &["--json", "definition", "app.py:11:6"],
    )))
    .expect("json");
    assert_eq!(def["nodes"][0]["qualified_name"], "Parser.parse", "{def}");

    let path = stdout(&canopy(dir, &["path", "main", "Base.step"]));
    assert!(
        path.contains("Parser.parse") && path.contains("Base.run"),
        "{path}"
    );

    let refs = stdout(&canopy(dir, &["references", "Lexer"]));
    assert!(
        refs.contains("app.py") && refs.contains("pkg/models.py"),
        "{refs}"
    );

    let missing = stdout(&canopy(dir, &["callers", "Nope.nothing"]));
    assert!(missing.contains("target not found"), "{missing}");
    let ambiguous = stdout(&canopy(dir, &["callers", "parse"]));
    assert!(ambiguous.contains("ambiguous target"), "{ambiguous}");
    let bad = canopy(dir, &["definition", "app.py:x"]);
    assert!(!bad.status.success());
}

#[test]
fn whole_graph_commands() {
    let repo = fixture();
    let dir = repo.path();
    stdout(&canopy(dir, &["index", "--quiet"]));

    let impls = stdout(&canopy(dir, &["implementations", "Base"]));
    assert!(impls.contains("Parser"), "{impls}");
    let implements = stdout(&canopy(dir, &["implements", "Parser"]));
    assert!(implements.contains("Base"), "{implements}");
    let hier = stdout(&canopy(dir, &["type-hierarchy", "Base", "--depth", "2"]));
    assert!(hier.contains("Parser"), "{hier}");
    let impact = stdout(&canopy(dir, &["impact", "Base.step"]));
    assert!(
        impact.contains("Base.run") && impact.contains("needs review"),
        "{impact}"
    );
    let deps = stdout(&canopy(dir, &["dependencies", "app.py"]));
    assert!(deps.contains("app.py -> pkg/models.py"), "{deps}");
    let dependents = stdout(&canopy(dir, &["dependents", "pkg", "--package"]));
    assert!(dependents.contains(". -> pkg"), "{dependents}");
    let hot: serde_json::Value =
        serde_json::from_str(&stdout(&canopy(dir, &["--json", "hotspots", "--top", "2"])))
            .expect("json");
    assert_eq!(hot["hotspots"].as_array().map(Vec::len), Some(2));
    let cycles = stdout(&canopy(dir, &["cycles"]));
    assert!(
        cycles.contains("pkg/cycle_a.py -> pkg/cycle_b.py"),
        "{cycles}"
    );
    let unused = stdout(&canopy(dir, &["unused"]));
    assert!(unused.contains("_orphan"), "{unused}");
    let graph = stdout(&canopy(dir, &["dependency-graph", "--format", "mermaid"]));
    assert!(
        graph.starts_with("flowchart") && graph.contains("-->"),
        "{graph}"
    );
    let dot = stdout(&canopy(
        dir,
        &["dependency-graph", "--package", "--format", "dot"],
    ));
    assert!(
        dot.starts_with("digraph") && dot.contains("\".\" -> \"pkg\""),
        "{dot}"
    );
}

#[test]
fn symbols_search_summaries_detail_and_scope_from_the_command_line() {
    let repo = fixture();
    let dir = repo.path();
    stdout(&canopy(dir, &["index", "--quiet"]));
    let json = |args: &[&str]| -> serde_json::Value {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        serde_json::from_str(&stdout(&canopy(dir, &all))).expect("json")
    };
    let page = json(&["symbols", "--max-results", "3"]);
    assert_eq!(page["symbols"].as_array().map(Vec::len), Some(3), "{page}");
    assert_eq!(page["next_offset"], 3, "{page}");
    let next = json(&["symbols", "--max-results", "3", "--offset", "3"]);
    assert_ne!(next["symbols"][0], page["symbols"][0]);
    let methods = json(&[
        "symbols", "pkg/", "--kind", "method", "--name", "*parse", "--sort", "name",
    ]);
    let names: Vec<&str> = methods["symbols"]
        .as_array()
        .expect("symbols")
        .iter()
        .filter_map(|s| s["qualified_name"].as_str())
        .collect();
    assert_eq!(names, ["Lexer.parse", "Parser.parse"], "{methods}");
    let found = json(&["search", "pon*"]);
    assert_eq!(found["symbols"][0]["qualified_name"], "pong", "{found}");

    let detail = json(&["detail", "Parser.parse"]);
    assert_eq!(detail["detail"]["parameters"], serde_json::json!(["self"]));
    let scope = json(&["scope", "pkg/models.py:15"]);
    assert_eq!(scope["nodes"].as_array().map(Vec::len), Some(3), "{scope}");
    let summary = json(&["summary", "pkg/models.py"]);
    assert_eq!(summary["files"], 1, "{summary}");
    let package = json(&["package-summary", "pkg"]);
    assert_eq!(package["files"], 4, "{package}");

    // People get text.
    let text = stdout(&canopy(dir, &["detail", "Parser.parse"]));
    assert!(text.contains("signature: def parse(self):"), "{text}");
    let text = stdout(&canopy(dir, &["summary", "pkg/models.py"]));
    assert!(text.contains("used by: app.py"), "{text}");
}

#[test]
fn type_usages_finds_annotations() {
    let repo = fixture();
    let dir = repo.path();
    stdout(&canopy(dir, &["index", "--quiet"]));
    let json: serde_json::Value =
        serde_json::from_str(&stdout(&canopy(dir, &["--json", "type-usages", "Parser"])))
            .expect("json");
    let mut names: Vec<&str> = json["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .filter_map(|n| n["qualified_name"].as_str())
        .collect();
    names.sort();
    // `def make() -> Parser` and `def main(p: Parser)` in app.py.
    assert_eq!(names, ["main", "make"], "{json}");
}

/// `canopy context`: human output (a header per fragment, then its text,
/// then the totals) and `--json` with the budget kept.
#[test]
fn context_prints_fragments_within_the_budget() {
    let dir = fixture();
    let o = canopy(dir.path(), &["index"]);
    stdout(&o);
    let human = stdout(&canopy(
        dir.path(),
        &[
            "context",
            "how does the parser run its steps",
            "--budget",
            "500",
        ],
    ));
    assert!(human.contains("── "), "{human}");
    assert!(human.contains(" of 500 tokens"), "{human}");
    let json = stdout(&canopy(
        dir.path(),
        &[
            "--json",
            "context",
            "how does the parser run its steps",
            "--budget",
            "500",
            "--strategy",
            "keyword",
        ],
    ));
    let pack: serde_json::Value = serde_json::from_str(&json).expect("JSON");
    assert!(
        pack["total_tokens"]
            .as_u64()
            .is_some_and(|t| t <= 500 && t > 0),
        "{pack}"
    );
    assert_eq!(pack["strategy"], "keyword");
    let bad = canopy(dir.path(), &["context", "x", "--budget", "3"]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("budget_tokens"));
}
