//! End-to-end: the graph subcommands of the real `canopy` binary on a copy of
//! the Python resolution fixture (`tests/fixtures/graph/python`), from the
//! local index and, with `--service-url`, from a real `canopy serve`.

use std::path::Path;
use std::process::{Command, Output};

use canopy_test_support::canopy_bin;
use canopy_test_support::serve::{Opts, Server, post};

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
    assert!(
        text.starts_with("callers of Parser.parse\npkg/models.py:14  def parse(self):"),
        "{text}"
    );
    assert!(text.contains("\n└─ app.py:10  main  [call "), "{text}");

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
    assert_eq!(package["files"], 5, "{package}");

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
    // The wire form: a JSON header line, then each fragment under `--- `.
    assert!(human.contains("\n--- "), "{human}");
    assert!(human.starts_with("{\"budget_tokens\":500,"), "{human}");
    assert!(canopy_core::tokens::count_tokens(&human) <= 500, "{human}");
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

/// `--service-url`: the graph commands are answered by the service (`POST
/// /graph`), as MCP's graph tools are in service mode: the same text as
/// the local index gives, and with `--json` the service's answer, every
/// handle tagged with its generation.
#[test]
fn graph_commands_in_service_mode_answer_from_the_service() {
    let repo = fixture();
    let dir = repo.path();
    canopy_test_support::git::git(dir, &["init", "-q"]);
    canopy_test_support::git::commit_all(dir, "fixture");
    let data = tempfile::tempdir().expect("data dir");
    let server = Server::start(canopy_bin!(), data.path(), &Opts::default());
    let token = server.admin_token().expect("a generated token");
    let remote = |args: &[&str]| {
        let mut all = vec![
            "--service-url",
            server.url.as_str(),
            "--service-token",
            &token,
        ];
        all.extend_from_slice(args);
        canopy(dir, &all)
    };
    let view: serde_json::Value =
        serde_json::from_str(&stdout(&remote(&["--json", "index"]))).expect("json");
    let generation = view["generation"].as_u64().expect("a generation");
    assert!(generation >= 1, "{view}");

    // People get the text the local index gives.
    let served = stdout(&remote(&["callers", "Parser.parse", "--depth", "2"]));
    assert!(served.contains("callers of Parser.parse"), "{served}");
    assert!(served.contains("└─ app.py:10  main  [call "), "{served}");
    let local = stdout(&canopy(dir, &["callers", "Parser.parse", "--depth", "2"]));
    assert_eq!(served, local);

    // `--json` prints the service's answer: what POST /graph answers.
    let json: serde_json::Value =
        serde_json::from_str(&stdout(&remote(&["--json", "callees", "main"]))).expect("json");
    assert_eq!(json["generation"], generation, "{json}");
    let nodes = json["nodes"].as_array().expect("nodes");
    assert!(!nodes.is_empty(), "{json}");
    for n in nodes {
        assert_eq!(n["handle"]["source"], "service", "{json}");
        assert_eq!(n["handle"]["generation"], generation, "{json}");
    }
    let repo_id = view["repo_id"].as_str().expect("repo id");
    let http = post(
        &server.client(),
        "/graph",
        &serde_json::json!({"repo": repo_id, "op": "callees", "target": "main", "depth": 1, "max_results": 50}),
    );
    assert_eq!(http.status, 200, "{}", http.text());
    assert_eq!(json, http.json().expect("json"));

    // The analyses too, in every output format.
    let hot: serde_json::Value =
        serde_json::from_str(&stdout(&remote(&["--json", "hotspots", "--top", "2"])))
            .expect("json");
    assert_eq!(hot["hotspots"].as_array().map(Vec::len), Some(2), "{hot}");
    assert_eq!(hot["hotspots"][0]["handle"]["source"], "service", "{hot}");
    let summary = stdout(&remote(&["summary", "pkg/models.py"]));
    assert!(summary.contains("used by: app.py"), "{summary}");
    let graph = stdout(&remote(&["dependency-graph", "--format", "mermaid"]));
    assert!(
        graph.starts_with("flowchart") && graph.contains("-->"),
        "{graph}"
    );
    let cycles = stdout(&remote(&["cycles"]));
    assert!(
        cycles.contains("pkg/cycle_a.py -> pkg/cycle_b.py"),
        "{cycles}"
    );
    // A malformed position is refused before anything is asked.
    assert!(!remote(&["definition", "app.py:x"]).status.success());

    // A repository the service does not know is refused with what to do.
    let unregistered = tempfile::tempdir().expect("tempdir");
    canopy_test_support::git::git(unregistered.path(), &["init", "-q"]);
    let out = canopy(
        unregistered.path(),
        &[
            "--service-url",
            server.url.as_str(),
            "--service-token",
            &token,
            "callers",
            "main",
        ],
    );
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("is not registered with the service"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Lines of `text` without their handle ids (`h` + 24 hex), which the
/// layout assertions need not spell.
fn without_ids(text: &str) -> Vec<String> {
    text.lines()
        .map(|line| {
            line.split("  ")
                .filter(|part| {
                    !(part.len() == 25
                        && part.starts_with('h')
                        && part[1..].bytes().all(|b| b.is_ascii_hexdigit()))
                })
                .collect::<Vec<_>>()
                .join("  ")
        })
        .collect()
}

/// People read a graph answer as a tree: the target, then each unit under
/// the one it was reached from, its sites under it, every entry leading
/// with `path:line`. Off a terminal there is no escape sequence; with
/// `--color always` each `path:line` is an OSC 8 hyperlink to the file at
/// that line; `--json` is the same bytes whatever `--color` says.
#[test]
fn graph_answers_read_as_a_tree_of_path_line_entries_linked_only_when_asked() {
    let repo = fixture();
    let dir = repo.path();
    stdout(&canopy(dir, &["index", "--quiet"]));

    let callers = stdout(&canopy(dir, &["callers", "Parser.parse", "--depth", "2"]));
    assert!(!callers.contains('\x1b'), "{callers:?}");
    let lines = without_ids(&callers);
    assert_eq!(lines[0], "callers of Parser.parse", "{callers}");
    assert!(
        lines[1].starts_with("pkg/models.py:14  def parse(self):"),
        "{callers}"
    );
    assert_eq!(
        lines[2..5],
        [
            "└─ app.py:10  main  [call inferred 90%]",
            "   ├─ app.py:11:6  call site",
            "   └─ app.py:13:6  call site",
        ],
        "{callers}"
    );

    // impact: the direct user, then what needs review as a tree that
    // continues from it (main under Parser.parse, which is reached via Base.run).
    let impact = stdout(&canopy(dir, &["impact", "Base.step"]));
    assert_eq!(
        without_ids(&impact)[..10],
        [
            "impact of Base.step",
            "pkg/models.py:5  def step(self): return 1",
            "└─ pkg/models.py:2  Base.run  [call receiver 100%]",
            "   └─ pkg/models.py:3:20  call site",
            "needs review:",
            "└─ pkg/models.py:14  Parser.parse  [call inherited 90%]  via Base.run",
            "   ├─ pkg/models.py:16:20  call site",
            "   └─ app.py:10  main  [call inferred 90%]",
            "      ├─ app.py:11:6  call site",
            "      └─ app.py:13:6  call site",
        ],
        "{impact}"
    );

    // A path is a chain, one level deeper per hop; a definition has no target line.
    let path = without_ids(&stdout(&canopy(dir, &["path", "main", "Base.step"])));
    assert_eq!(
        path[2..],
        [
            "└─ pkg/models.py:14  Parser.parse  [call inferred 90%]",
            "   └─ pkg/models.py:2  Base.run  [call inherited 90%]",
            "      └─ pkg/models.py:5  Base.step  [call receiver 100%]",
        ],
        "{path:?}"
    );
    let definition = without_ids(&stdout(&canopy(dir, &["definition", "app.py:11:6"])));
    assert_eq!(
        definition,
        [
            "└─ pkg/models.py:14  Parser.parse  [call inferred 90%]",
            "   └─ app.py:11:6  call site",
        ],
        "{definition:?}"
    );
    let detail = stdout(&canopy(dir, &["detail", "Parser.parse"]));
    assert!(
        detail.starts_with("detail of Parser.parse\npkg/models.py:14  def parse(self):"),
        "{detail}"
    );

    // `--color never` gives the same text (here stdout is a pipe, so the
    // default, auto, gave no escapes either).
    let never = stdout(&canopy(
        dir,
        &[
            "--color",
            "never",
            "callers",
            "Parser.parse",
            "--depth",
            "2",
        ],
    ));
    assert_eq!(never, callers);

    let root = dir.canonicalize().expect("canonical root");
    let link = |path: &str, line: u32, text: &str| {
        format!(
            "\x1b]8;;file://{}/{path}#{line}\x1b\\{text}\x1b]8;;\x1b\\",
            root.display()
        )
    };
    let linked = stdout(&canopy(
        dir,
        &[
            "--color",
            "always",
            "callers",
            "Parser.parse",
            "--depth",
            "2",
        ],
    ));
    assert!(
        linked.contains(&format!(
            "\n└─ {}  main  [call ",
            link("app.py", 10, "app.py:10")
        )),
        "{linked:?}"
    );
    assert!(
        linked.contains(&format!(
            "   ├─ {}  call site",
            link("app.py", 11, "app.py:11:6")
        )),
        "{linked:?}"
    );
    assert!(
        linked.starts_with(&format!(
            "callers of Parser.parse\n{}  def parse",
            link("pkg/models.py", 14, "pkg/models.py:14")
        )),
        "{linked:?}"
    );
    // Without the escapes, the same text.
    let mut stripped = linked.clone();
    while let Some(start) = stripped.find("\x1b]8;;") {
        let end = stripped[start..].find("\x1b\\").expect("terminated") + start + 2;
        stripped.replace_range(start..end, "");
    }
    assert_eq!(stripped, callers);

    // --json: the same bytes, whatever --color says.
    for op in [
        &["callers", "Parser.parse", "--depth", "2"][..],
        &["impact", "Base.step"],
    ] {
        let mut plain = vec!["--json"];
        plain.extend_from_slice(op);
        let mut forced = vec!["--json", "--color", "always"];
        forced.extend_from_slice(op);
        let plain = canopy(dir, &plain);
        let forced = canopy(dir, &forced);
        assert!(!plain.stdout.contains(&0x1b), "{op:?}");
        assert_eq!(plain.stdout, forced.stdout, "{op:?}");
    }
}

/// The list answers (hotspots, unused, symbols, summary) lead each line with
/// the unit's `path:line` too, hyperlinked only when asked (issue 29).
#[test]
fn list_answers_lead_with_path_line_linked_only_when_asked() {
    let repo = fixture();
    let dir = repo.path();
    stdout(&canopy(dir, &["index", "--quiet"]));
    let leads_with_a_location = |line: &str| {
        let first = line.split("  ").next().unwrap_or_default();
        let (path, number) = first.rsplit_once(':').unwrap_or_default();
        number.parse::<u32>().is_ok_and(|n| n > 0) && dir.join(path).is_file()
    };
    for args in [
        &["hotspots", "--top", "3"][..],
        &["symbols", "--max-results", "3"],
    ] {
        let text = stdout(&canopy(dir, args));
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines.len() > 1, "{args:?}: {text}");
        // The last line is the page's count (symbols) or the hint (hotspots).
        let entries = &lines[..lines.len() - 1];
        assert!(
            entries.iter().all(|l| leads_with_a_location(l)),
            "{args:?}: {text}"
        );
        assert!(!text.contains('\x1b'), "{args:?}: {text:?}");
        let mut linked = vec!["--color", "always"];
        linked.extend_from_slice(args);
        let linked = stdout(&canopy(dir, &linked));
        assert!(
            linked.starts_with("\x1b]8;;file://"),
            "{args:?}: {linked:?}"
        );
    }
    let unused = stdout(&canopy(dir, &["unused"]));
    let orphan = unused
        .lines()
        .find(|l| l.contains("_orphan"))
        .expect("the orphan is listed");
    assert!(leads_with_a_location(orphan), "{unused}");
}

/// The first graph command on an unindexed repository indexes all of it
/// first, and says so on stderr (one line off a terminal; nothing with
/// `--quiet`, nothing once the index exists), with stdout still the answer.
#[test]
fn a_first_graph_command_says_it_indexes_first() {
    let tmp = fixture();
    let dir = tmp.path();
    canopy_test_support::git::git(dir, &["init", "-q"]);
    let first = canopy(dir, &["--json", "callers", "Parser.parse"]);
    let answer: serde_json::Value = serde_json::from_str(&stdout(&first)).expect("json");
    assert!(answer.is_object(), "{answer}");
    let stderr = String::from_utf8_lossy(&first.stderr);
    assert!(
        stderr.contains("files first (the graph needs the whole repository)"),
        "stderr: {stderr}"
    );
    let again = canopy(dir, &["--json", "callers", "Parser.parse"]);
    assert_eq!(stdout(&again), stdout(&first));
    assert!(
        !String::from_utf8_lossy(&again.stderr).contains("files first"),
        "an indexed repository is not indexed again"
    );

    let quiet = fixture();
    canopy_test_support::git::git(quiet.path(), &["init", "-q"]);
    let out = canopy(quiet.path(), &["--quiet", "callers", "Parser.parse"]);
    stdout(&out);
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("files first"),
        "--quiet prints no progress"
    );
}
