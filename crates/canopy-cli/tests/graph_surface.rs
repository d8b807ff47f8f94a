//! End-to-end: what an agent sees through `canopy callers|callees|
//! references|definition PATH:LINE:COL --json` (issue 27): positions name
//! the definition they are on, every site is listed, recursion shows,
//! unresolved columns say so, members without a unit say so, closures'
//! calls are callees, overload signatures are no references, guesses say
//! they are guesses, and a closed stdout ends the command quietly.

use std::path::Path;
use std::process::{Command, Output, Stdio};

use canopy_test_support::repo::Repo;
use serde_json::Value;

fn canopy(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_canopy"))
        .args(args)
        .current_dir(dir)
        .env_remove("CANOPY_ROOT")
        .env_remove("CANOPY_SERVICE_URL")
        .output()
        .expect("run canopy")
}

fn json(dir: &Path, args: &[&str]) -> Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let o = canopy(dir, &all);
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).expect("json answer")
}

fn indexed(files: &[(&str, &str)]) -> Repo {
    let repo = Repo::with_files(files);
    let o = canopy(repo.dir.path(), &["index", "--quiet"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    repo
}

/// `(qualified_name, sites)` of an answer's nodes.
fn nodes(a: &Value) -> Vec<(String, Vec<String>)> {
    a["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .map(|n| {
            (
                n["qualified_name"].as_str().unwrap_or("").to_string(),
                sites_of(n),
            )
        })
        .collect()
}

/// A node's `sites`.
fn sites_of(n: &Value) -> Vec<String> {
    n["sites"]
        .as_array()
        .expect("sites")
        .iter()
        .map(|s| s.as_str().expect("site").to_string())
        .collect()
}

fn names(a: &Value) -> Vec<String> {
    nodes(a).into_iter().map(|n| n.0).collect()
}

const GO: &str = "package main

type linkParser struct{ n int }

func (p *linkParser) parseLabel(s string) int {
\tif len(s) == 0 {
\t\treturn 0
\t}
\treturn p.parseLabel(s[1:]) + helper(s) + missing(s)
}

func helper(s string) int {
\tp := &linkParser{}
\tf := func() int { return p.parseLabel(s) }
\treturn f()
}
";

#[test]
fn a_position_on_a_go_method_signature_answers_for_the_method() {
    let repo = indexed(&[("a.go", GO)]);
    let dir = repo.dir.path();
    // Line 5: `func (p *linkParser) parseLabel(s string) int {`; every
    // column of it (keyword, receiver, its type, the name, a parameter).
    for col in [0, 6, 9, 12, 21, 26, 30, 32, 40] {
        let target = format!("a.go:5:{col}");
        for op in ["callers", "callees", "references"] {
            let a = json(dir, &[op, &target]);
            assert_eq!(
                a["target"]["line_range"][0], 5,
                "{op} {target} answered for {}",
                a["target"]["preview"]
            );
        }
        let callers = json(dir, &["callers", &target]);
        assert!(
            names(&callers).contains(&"helper".to_string()),
            "{target}: {callers}"
        );
    }
}

#[test]
fn recursion_shows_in_callers_and_callees() {
    let repo = indexed(&[("a.go", GO)]);
    let dir = repo.dir.path();
    let callers = json(dir, &["callers", "a.go:5:21"]);
    let me = nodes(&callers)
        .into_iter()
        .find(|n| n.0 == "linkParser.parseLabel");
    assert_eq!(
        me.map(|n| n.1),
        Some(vec!["a.go:9:10".to_string()]),
        "{callers}"
    );
    let callees = json(dir, &["callees", "linkParser.parseLabel"]);
    assert!(
        names(&callees).contains(&"linkParser.parseLabel".to_string()),
        "{callees}"
    );
}

/// One caller, two calls of `Path.join`: one whose receiver may be either
/// of two classes (ambiguous), one on a `Path` (resolved).
const EITHER_AND_ONE: &str = "\
class Address:
    def join(self, other):
        return Address()


class Path:
    def join(self, other):
        return Path()


class Outgoing:
    def __init__(self, fallback=None):
        self.target = Address() if fallback else Path()


def follow(request: Outgoing):
    request.target.join(\"x\")
    local = Path()
    local.join(\"y\")
";

#[test]
fn a_callers_sites_each_keep_their_own_edges_status() {
    let repo = indexed(&[("a.py", EITHER_AND_ONE)]);
    let dir = repo.dir.path();
    let callers = json(dir, &["callers", "Path.join"]);
    let mut by_status: Vec<(String, Vec<String>)> = callers["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .filter(|n| n["qualified_name"] == "follow")
        .map(|n| {
            (
                n["status"].as_str().expect("status").to_string(),
                sites_of(n),
            )
        })
        .collect();
    by_status.sort();
    assert_eq!(
        by_status,
        [
            ("ambiguous".to_string(), vec!["a.py:17:19".to_string()]),
            ("resolved".to_string(), vec!["a.py:19:10".to_string()]),
        ],
        "{callers}"
    );
    // One unit, listed once per kind of edge, counts once.
    assert_eq!(callers["total"], 1, "{callers}");
}

#[test]
fn definition_at_an_unresolved_call_names_it_and_no_neighbour() {
    let repo = indexed(&[("a.go", GO)]);
    let dir = repo.dir.path();
    // Line 9: `\treturn p.parseLabel(s[1:]) + helper(s) + missing(s)`:
    // `helper` (columns 30-35) resolves, `missing` (42-48) does not.
    let helper = json(dir, &["definition", "a.go:9:33"]);
    assert_eq!(names(&helper), vec!["helper".to_string()], "{helper}");
    let missing = json(dir, &["definition", "a.go:9:45"]);
    assert!(names(&missing).is_empty(), "{missing}");
    assert_eq!(missing["empty"]["kind"], "unresolved", "{missing}");
    assert_eq!(missing["empty"]["name"], "missing", "{missing}");
}

#[test]
fn definition_without_a_column_takes_the_lines_one_site_or_lists_them() {
    let repo = indexed(&[("a.go", GO)]);
    let dir = repo.dir.path();
    // Line 14: `\tf := func() int { return p.parseLabel(s) }`, one site.
    let one = json(dir, &["definition", "a.go:14"]);
    assert_eq!(
        names(&one),
        vec!["linkParser.parseLabel".to_string()],
        "{one}"
    );
    assert_eq!(one, json(dir, &["definition", "a.go:14:29"]));
    // Line 9 has three sites: an error naming each with its column.
    let several = canopy(dir, &["definition", "a.go:9"]);
    assert!(!several.status.success());
    let err = String::from_utf8_lossy(&several.stderr);
    for site in [
        "`parseLabel` at a.go:9:10",
        "`helper` at a.go:9:30",
        "`missing` at a.go:9:42",
    ] {
        assert!(err.contains(site), "{site}: {err}");
    }
    // A line with no site says so and names the command for the unit there.
    let blank = json(dir, &["definition", "a.go:2"]);
    assert!(names(&blank).is_empty(), "{blank}");
    assert!(
        blank["hint"]
            .as_str()
            .is_some_and(|h| h.contains("canopy detail a.go:2")),
        "{blank}"
    );
}

#[test]
fn every_site_is_listed_and_a_clamped_cap_is_reported() {
    let calls: String = (0..9).map(|i| format!("    target({i})\n")).collect();
    let source = format!("def target(x):\n    return x\n\n\ndef caller():\n{calls}");
    let repo = indexed(&[("m.py", &source)]);
    let dir = repo.dir.path();
    let a = json(dir, &["callers", "m.py:1:4", "--max-results", "100000"]);
    let node = &a["nodes"][0];
    assert_eq!(node["qualified_name"], "caller", "{a}");
    assert_eq!(node["sites"].as_array().map(Vec::len), Some(9), "{a}");
    assert_eq!(node["sites_total"], 9, "{a}");
    assert_eq!(a["truncated"], false, "{a}");
    // 100,000 is the CLI's cap: asked for, nothing clamped.
    assert!(a.get("max_results_clamped").is_none(), "{a}");
    let over = json(dir, &["callers", "m.py:1:4", "--max-results", "1000000"]);
    assert_eq!(over["max_results_clamped"]["asked"], 1000000, "{over}");
    assert_eq!(over["max_results_clamped"]["used"], 100000, "{over}");
    let text = canopy(dir, &["callers", "target", "--max-results", "1000000"]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("--max-results 1000000 is above the cap; 100000 used"),
        "{text}"
    );
}

/// `def target()` and `callers` functions that each call it once.
fn many_callers(callers: usize) -> String {
    let mut source = String::from("def target():\n    return 1\n");
    for i in 0..callers {
        source.push_str(&format!("\n\ndef caller_{i}():\n    return target()\n"));
    }
    source
}

/// The CLI feeds scripts (and the graph evaluation, which asks for
/// `--max-results 100000`): a unit with more callers than an agent's cap
/// of 500 is listed whole when asked, and cut honestly when not.
#[test]
fn the_cli_lists_more_than_an_agents_cap_when_asked() {
    let repo = indexed(&[("m.py", &many_callers(600))]);
    let dir = repo.dir.path();
    let all = json(dir, &["callers", "m.py:1:4", "--max-results", "100000"]);
    assert_eq!(
        all["nodes"].as_array().map(Vec::len),
        Some(600),
        "{}",
        all["total"]
    );
    assert_eq!(all["total"], 600);
    assert_eq!(all["truncated"], false);
    assert!(all.get("max_results_clamped").is_none());
    let some = json(dir, &["callers", "m.py:1:4", "--max-results", "550"]);
    assert_eq!(
        some["nodes"].as_array().map(Vec::len),
        Some(550),
        "{}",
        some["total"]
    );
    assert_eq!(some["total"], 600);
    assert_eq!(some["truncated"], true);
    // `references` and the whole-graph lists take the same cap.
    let refs = json(dir, &["references", "m.py:1:4", "--max-results", "100000"]);
    assert_eq!(
        refs["nodes"].as_array().map(Vec::len),
        Some(600),
        "{}",
        refs["total"]
    );
}

/// Handle ids of an answer's nodes, in order.
fn node_ids(a: &Value) -> Vec<String> {
    a["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .map(|n| n["handle"]["id"].as_str().expect("id").to_string())
        .collect()
}

/// `callers` of the 600-caller target, 250 nodes from `offset`.
fn page_of_250(offset: &str) -> [&str; 6] {
    [
        "callers",
        "m.py:1:4",
        "--max-results",
        "250",
        "--offset",
        offset,
    ]
}

/// An answer longer than `max_results` is paged: each page says where the
/// next starts (`next_offset`), the pages together are the whole answer
/// in its order with nothing twice, an offset past the end says so (and
/// never claims "no callers"), and an operation that does not page says
/// that too.
#[test]
fn a_long_answer_is_paged_with_offset() {
    let repo = indexed(&[("m.py", &many_callers(600))]);
    let dir = repo.dir.path();
    let all = node_ids(&json(
        dir,
        &["callers", "m.py:1:4", "--max-results", "100000"],
    ));
    assert_eq!(all.len(), 600);
    let mut paged = Vec::new();
    let mut offset = 0usize;
    let mut pages = 0;
    loop {
        let page = json(dir, &page_of_250(&offset.to_string()));
        pages += 1;
        assert_eq!(page["total"], 600);
        assert_eq!(page["offset"].as_u64().unwrap_or(0), offset as u64);
        paged.extend(node_ids(&page));
        match page["next_offset"].as_u64() {
            Some(next) => {
                assert_eq!(page["truncated"], true);
                assert_eq!(next as usize, offset + 250);
                offset = next as usize;
            }
            None => {
                assert_eq!(page["truncated"], false, "{page}");
                break;
            }
        }
        assert!(pages < 10, "paging does not end");
    }
    assert_eq!(pages, 3);
    assert_eq!(paged, all, "the pages are the whole answer in order");

    let text = canopy(dir, &page_of_250("250"));
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("(nodes 251-500 of 600)"), "{text}");
    assert!(text.contains("next page: --offset 500"), "{text}");

    let past = json(dir, &["callers", "m.py:1:4", "--offset", "600"]);
    assert_eq!(past["nodes"].as_array().map(Vec::len), Some(0));
    assert!(past.get("empty").is_none(), "{past}");
    assert!(
        past["hint"]
            .as_str()
            .unwrap_or("")
            .contains("past the last of 600"),
        "{past}"
    );

    let refs = json(
        dir,
        &[
            "references",
            "m.py:1:4",
            "--max-results",
            "400",
            "--offset",
            "400",
        ],
    );
    assert_eq!(refs["nodes"].as_array().map(Vec::len), Some(200));

    let o = canopy(dir, &["impact", "m.py:1:4", "--offset", "5"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("`offset` pages callers"), "{err}");
}

const TS: &str = "export interface Handlers {
    onEvent?: (e: Event) => void;
    name: string;
}

export function parse(a: string): number;
export function parse(a: number): number;
export function parse(a: any): number {
    return 1;
}

class Worker {
    run(x: number): number { return x; }
}

export function start(worker: Worker) {
    const handle: any = {};
    handle.start = () => {
        worker.run(parse(1));
    };
    return handle;
}
";

#[test]
fn an_interface_property_is_a_method_or_no_unit_and_says_what_to_ask() {
    let repo = indexed(&[("a.ts", TS)]);
    let dir = repo.dir.path();
    // `onEvent?: (e: Event) => void` is called like a method: a unit.
    let a = json(dir, &["callers", "a.ts:2:6"]);
    assert_eq!(a["target"]["line_range"], serde_json::json!([2, 2]), "{a}");
    // `name: string` is no unit: not the whole interface, a hint.
    let a = json(dir, &["callers", "a.ts:3:5"]);
    assert_eq!(a["empty"]["kind"], "target_not_found", "{a}");
    assert!(a.get("target").is_none(), "{a}");
    let hint = a["hint"].as_str().unwrap_or_default();
    assert!(hint.contains("`name`") && hint.contains("Handlers"), "{a}");
}

#[test]
fn callees_include_calls_in_closures_inside_the_definition() {
    let repo = indexed(&[("a.ts", TS)]);
    let dir = repo.dir.path();
    let a = json(dir, &["callees", "a.ts:16:17"]);
    assert_eq!(a["target"]["line_range"][0], 16, "{a}");
    let found = nodes(&a);
    assert!(
        found
            .iter()
            .any(|(n, s)| n == "Worker.run" && s == &vec!["a.ts:19:15".to_string()]),
        "{a}"
    );
    assert!(found.iter().any(|(n, _)| n == "parse"), "{a}");
}

#[test]
fn overload_signatures_are_no_references() {
    let repo = indexed(&[("a.ts", TS)]);
    let dir = repo.dir.path();
    let a = json(dir, &["references", "a.ts:8:16"]);
    let sites: Vec<String> = nodes(&a).into_iter().flat_map(|n| n.1).collect();
    assert_eq!(sites, vec!["a.ts:19:19".to_string()], "{a}");
}

#[test]
fn a_closed_stdout_ends_the_command_quietly() {
    let repo = indexed(&[("a.go", GO)]);
    let (reader, writer) = std::io::pipe().expect("pipe");
    // Nobody reads: the first write fails with a broken pipe.
    drop(reader);
    let out = Command::new(env!("CARGO_BIN_EXE_canopy"))
        .args(["callers", "a.go:5:21", "--json"])
        .current_dir(repo.dir.path())
        .env_remove("CANOPY_ROOT")
        .env_remove("CANOPY_SERVICE_URL")
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .expect("run canopy");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(out.status.success(), "{:?} {stderr}", out.status);
}

const GUESSED: &[(&str, &str)] = &[
    (
        "lib.py",
        "class Store:\n    def replace_all(self, a, b):\n        return a\n",
    ),
    (
        "app.py",
        "def rewrite(s):\n    return s.replace_all(\"a\", \"b\")\n",
    ),
];

#[test]
fn guesses_say_so_and_whole_graph_answers_leave_them_out_unless_asked() {
    let repo = indexed(GUESSED);
    let dir = repo.dir.path();
    // `s` has no known type: the call is bound to the only `replace_all`.
    let callers = json(dir, &["callers", "Store.replace_all"]);
    let node = &callers["nodes"][0];
    assert_eq!(node["qualified_name"], "rewrite", "{callers}");
    assert_eq!(node["guess"], true, "{callers}");
    assert_eq!(node["how"], "unique_name", "{callers}");
    let text = canopy(dir, &["callers", "Store.replace_all"]);
    assert!(
        String::from_utf8_lossy(&text.stdout).contains("unique_name 50% guess"),
        "{}",
        String::from_utf8_lossy(&text.stdout)
    );
    let dot = canopy(dir, &["callers", "Store.replace_all", "--format", "dot"]);
    assert!(
        String::from_utf8_lossy(&dot.stdout).contains("style=dashed, label=\"guess\""),
        "{}",
        String::from_utf8_lossy(&dot.stdout)
    );
    let mermaid = canopy(
        dir,
        &["callers", "Store.replace_all", "--format", "mermaid"],
    );
    assert!(
        String::from_utf8_lossy(&mermaid.stdout).contains("-. guess .->"),
        "{}",
        String::from_utf8_lossy(&mermaid.stdout)
    );
    let detail = json(dir, &["detail", "Store.replace_all"]);
    assert_eq!(detail["detail"]["callers"], 1, "{detail}");
    assert_eq!(detail["detail"]["guesses"], 1, "{detail}");

    let dep_names = |a: &Value| -> Vec<String> {
        a["nodes"]
            .as_array()
            .expect("nodes")
            .iter()
            .filter_map(|n| n["name"].as_str().map(str::to_string))
            .collect()
    };
    let deps = json(dir, &["dependencies", "app.py"]);
    assert!(!dep_names(&deps).contains(&"lib.py".to_string()), "{deps}");
    let deps = json(dir, &["dependencies", "app.py", "--include-guesses"]);
    assert!(dep_names(&deps).contains(&"lib.py".to_string()), "{deps}");
    let dependents = json(dir, &["dependents", "lib.py"]);
    assert!(
        !dep_names(&dependents).contains(&"app.py".to_string()),
        "{dependents}"
    );
    let hot = json(dir, &["hotspots"]);
    assert_eq!(hot["hotspots"].as_array().map(Vec::len), Some(0), "{hot}");
    let hot = json(dir, &["hotspots", "--include-guesses"]);
    assert_eq!(hot["hotspots"].as_array().map(Vec::len), Some(2), "{hot}");
}

/// The same over MCP (`canopy_graph`, `canopy_analysis`) and HTTP (`POST /graph`).
#[tokio::test(flavor = "multi_thread")]
async fn guesses_say_so_over_mcp_and_http() {
    use canopy_test_support::canopy_bin;
    use canopy_test_support::mcp::{call, connect, ok_json};
    use canopy_test_support::serve::{Opts, Server, add_and_index, post};
    use serde_json::json;

    let repo = Repo::new(GUESSED);
    let path = repo.dir.path();
    let client = connect(canopy_bin!()).await;
    let callers = ok_json(
        &call(
            &client,
            "canopy_graph",
            json!({"path": path, "op": "callers", "target": "Store.replace_all"}),
        )
        .await,
    );
    assert_eq!(callers["nodes"][0]["guess"], true, "{callers}");
    let deps = |include: bool| json!({"path": path, "op": "dependencies", "target": "app.py", "include_guesses": include});
    let without = ok_json(&call(&client, "canopy_graph", deps(false)).await);
    assert_eq!(
        without["edges"].as_array().map(Vec::len),
        Some(0),
        "{without}"
    );
    let with = ok_json(&call(&client, "canopy_graph", deps(true)).await);
    assert_eq!(with["edges"][0]["to"], "lib.py", "{with}");
    let hot = ok_json(
        &call(
            &client,
            "canopy_analysis",
            json!({"path": path, "op": "hotspots", "include_guesses": true}),
        )
        .await,
    );
    assert_eq!(hot["hotspots"].as_array().map(Vec::len), Some(2), "{hot}");
    client.cancel().await.expect("close");

    let data = tempfile::tempdir().expect("tempdir");
    let server = Server::start(canopy_bin!(), data.path(), &Opts::default());
    let http = server.client();
    let id = add_and_index(&http, &repo);
    let ask = |body: Value| -> Value {
        let resp = post(&http, "/graph", &body);
        assert_eq!(resp.status, 200, "{}", resp.text());
        resp.json().expect("json")
    };
    let callers = ask(json!({"repo": id, "op": "callers", "target": "Store.replace_all"}));
    assert_eq!(callers["nodes"][0]["guess"], true, "{callers}");
    let cycles_or_deps = ask(json!({"repo": id, "op": "dependencies", "target": "app.py"}));
    assert_eq!(
        cycles_or_deps["edges"].as_array().map(Vec::len),
        Some(0),
        "{cycles_or_deps}"
    );
    let with =
        ask(json!({"repo": id, "op": "dependencies", "target": "app.py", "include_guesses": true}));
    assert_eq!(with["edges"][0]["to"], "lib.py", "{with}");
}

#[test]
fn receivers_of_builtin_types_are_never_guessed() {
    let repo = indexed(&[
        (
            "lib.py",
            "class Registry:\n    def add(self, x):\n        return x\n\n    def copy(self):\n        return self\n\n    def enroll(self, x):\n        return x\n",
        ),
        (
            "app.py",
            "def collect(d: dict):\n    seen = set()\n    seen.add(1)\n    words = {1, 2}\n    words.add(3)\n    return d.copy()\n\n\ndef untyped(x):\n    x.enroll(3)\n    return x.add(3)\n",
        ),
        (
            "b.go",
            "package main\n\nimport \"strings\"\n\ntype Doc struct{}\n\nfunc (d *Doc) String() string { return \"\" }\n\nfunc render() string {\n\tvar b strings.Builder\n\treturn b.String()\n}\n\nfunc guess(x interface{ String() string }) string {\n\ty := x\n\treturn y.String()\n}\n",
        ),
        (
            "m.ts",
            "export class Table {\n    set(k: string, v: number): void {}\n}\n\nexport function fill(keys: string[]) {\n    const m = new Map<string, number>();\n    m.set(keys[0], 1);\n}\n",
        ),
    ]);
    let dir = repo.dir.path();
    // An unknown receiver is still guessed by a unique method name, but
    // not by one a Python builtin type also has (`set.add`).
    let enroll = json(dir, &["callers", "Registry.enroll"]);
    assert_eq!(names(&enroll), vec!["untyped".to_string()], "{enroll}");
    let add = json(dir, &["callers", "Registry.add"]);
    assert!(names(&add).is_empty(), "{add}");
    let copy = json(dir, &["callers", "Registry.copy"]);
    assert!(names(&copy).is_empty(), "{copy}");
    let string = json(dir, &["callers", "Doc.String"]);
    assert!(!names(&string).contains(&"render".to_string()), "{string}");
    let set = json(dir, &["callers", "Table.set"]);
    assert!(names(&set).is_empty(), "{set}");
}

/// A receiver rooted in an import from outside the repository (the
/// standard library, a dependency) is no unknown: its methods are never
/// guessed to be the repository's one method of that name. Held-out set 5
/// (bench/README) found Markdown's `textwrap.dedent`, `el.set` of
/// `el = etree.SubElement(…)` and `pattern.search` of `re.compile` bound so.
#[test]
fn receivers_from_outside_the_repository_are_never_guessed() {
    let repo = indexed(&[
        (
            "lib.py",
            "class Cleaner:\n    def dedent(self, t):\n        return t\n\n    def set(self, k, v):\n        return k\n\n    def search(self, q):\n        return q\n",
        ),
        (
            "app.py",
            "import re\nimport textwrap\nfrom xml.etree import ElementTree as etree\n\n\ndef render(parent, text):\n    el = etree.SubElement(parent, \"p\")\n    el.set(\"class\", \"x\")\n    pattern = re.compile(\"a\")\n    found = pattern.search(text)\n    return textwrap.dedent(text), found\n\n\ndef untyped(x):\n    return x.search(\"q\")\n",
        ),
        (
            "store.ts",
            "export class Store {\n    readFileSync(p: string): string { return p; }\n}\n",
        ),
        (
            "load.ts",
            "import * as fs from \"fs\";\n\nexport function load(p: string) {\n    return fs.readFileSync(p);\n}\n",
        ),
    ]);
    let dir = repo.dir.path();
    for unit in ["Cleaner.dedent", "Cleaner.set", "Store.readFileSync"] {
        let a = json(dir, &["callers", unit]);
        assert!(names(&a).is_empty(), "{unit}: {a}");
    }
    // An unknown receiver is still guessed, and says so.
    let search = json(dir, &["callers", "Cleaner.search"]);
    assert_eq!(names(&search), vec!["untyped".to_string()], "{search}");
    assert_eq!(search["nodes"][0]["guess"], true, "{search}");
}

/// `(file, expected dependencies)` of each language's import fixture
/// (`tests/fixtures/graph/imports/<lang>`): imports of modules whose names
/// are no units (constants, a default export, a namespace used whole, an
/// import inside a function) are dependencies too, and so is a default
/// import of a class that the file only re-exports.
const IMPORT_FIXTURES: &[(&str, &str, &[&str])] = &[
    (
        "py",
        "app.py",
        &["pkg/__init__.py", "pkg/registry.py", "pkg/settings.py"],
    ),
    (
        "ts",
        "src/app.ts",
        &[
            "src/config.ts",
            "src/engine.ts",
            "src/limits.ts",
            "src/plugins.ts",
            "src/registry.ts",
        ],
    ),
    ("rs", "src/app.rs", &["src/limits.rs"]),
    ("go", "main.go", &["util/limits.go"]),
];

fn dep_names(a: &Value, side: &str) -> Vec<String> {
    let mut v: Vec<String> = a["edges"]
        .as_array()
        .expect("edges")
        .iter()
        .map(|e| e[side].as_str().expect("name").to_string())
        .collect();
    v.sort();
    v
}

#[test]
fn file_dependencies_come_from_imports_in_every_language() {
    for (lang, file, want) in IMPORT_FIXTURES {
        let tmp = canopy_test_support::repo::workspace_fixture(&format!("graph/imports/{lang}"));
        let dir = tmp.path();
        let o = canopy(dir, &["index", "--quiet"]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let deps = json(dir, &["dependencies", file]);
        assert_eq!(dep_names(&deps, "to"), *want, "{lang}: {deps}");
        for target in *want {
            let back = json(dir, &["dependents", target]);
            assert_eq!(
                dep_names(&back, "from"),
                vec![file.to_string()],
                "{lang}: {back}"
            );
        }
    }
}

/// The same over MCP (`canopy_graph`) and HTTP (`POST /graph`).
#[tokio::test(flavor = "multi_thread")]
async fn file_dependencies_from_imports_over_mcp_and_http() {
    use canopy_test_support::canopy_bin;
    use canopy_test_support::mcp::{call, connect, ok_json};
    use canopy_test_support::serve::{Opts, Server, add_and_index, post};
    use serde_json::json;

    let repo = Repo::new(&[
        ("pkg/__init__.py", ""),
        ("pkg/registry.py", "handlers = {}\n"),
        (
            "app.py",
            "def count():\n    from pkg.registry import handlers\n\n    return len(handlers)\n",
        ),
    ]);
    let path = repo.dir.path();
    let want = vec!["pkg/registry.py".to_string()];
    let client = connect(canopy_bin!()).await;
    let deps = ok_json(
        &call(
            &client,
            "canopy_graph",
            json!({"path": path, "op": "dependencies", "target": "app.py"}),
        )
        .await,
    );
    assert_eq!(dep_names(&deps, "to"), want, "{deps}");
    client.cancel().await.expect("close");

    let data = tempfile::tempdir().expect("tempdir");
    let server = Server::start(canopy_bin!(), data.path(), &Opts::default());
    let http = server.client();
    let id = add_and_index(&http, &repo);
    let resp = post(
        &http,
        "/graph",
        &json!({"repo": id, "op": "dependents", "target": "pkg/registry.py"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let back: Value = resp.json().expect("json");
    assert_eq!(
        dep_names(&back, "from"),
        vec!["app.py".to_string()],
        "{back}"
    );
}

/// Issue 29: a target that matches no unit suggests the nearest names
/// (typos, other case), in JSON and in the text a person reads.
#[test]
fn a_target_that_matches_nothing_suggests_the_nearest_names() {
    let repo = indexed(&[(
        "shop.py",
        "class Basket:\n    def add_item(self, item):\n        return item\n\n    def total(self):\n        return 0\n\n\ndef checkout(basket):\n    return basket.total()\n",
    )]);
    let dir = repo.dir.path();
    let a = json(dir, &["callers", "Basket.add_itme"]);
    assert_eq!(a["empty"]["kind"], "target_not_found", "{a}");
    let hint = a["hint"].as_str().unwrap_or_default();
    assert!(hint.contains("nearest names: add_item"), "{a}");
    let a = json(dir, &["callers", "chekout"]);
    assert!(
        a["hint"].as_str().unwrap_or_default().contains("checkout"),
        "{a}"
    );
    // Nothing near: no invented suggestion.
    let a = json(dir, &["callers", "zzzzzzzz"]);
    assert_eq!(a["empty"]["kind"], "target_not_found", "{a}");
    assert!(a.get("hint").is_none_or(Value::is_null), "{a}");
    let text = canopy(dir, &["callers", "Basket.add_itme"]);
    assert!(
        String::from_utf8_lossy(&text.stdout).contains("add_item")
            || String::from_utf8_lossy(&text.stderr).contains("add_item"),
        "{}{}",
        String::from_utf8_lossy(&text.stdout),
        String::from_utf8_lossy(&text.stderr)
    );
}

const DISPATCH: &str = "class Base:
    def run(self):
        return self.step()

    def step(self):
        return 0


class Fast(Base):
    def step(self):
        return 1


class Duck:
    def quack(self):
        return 1


class Robot:
    def quack(self):
        return 2


def poke(thing):
    return thing.quack()


def orphan():
    return 3
";

#[test]
fn an_empty_impact_says_whether_dynamic_dispatch_is_why() {
    let repo = indexed(&[("d.py", DISPATCH)]);
    let dir = repo.dir.path();
    let hint = |target: &str| {
        let a = json(dir, &["impact", target]);
        assert!(names(&a).is_empty(), "{a}");
        assert!(a["review"].as_array().is_none_or(Vec::is_empty), "{a}");
        a["hint"].as_str().unwrap_or_default().to_string()
    };
    // Reached only through the base's `self.step()`: names the dispatcher.
    let fast = hint("Fast.step");
    assert!(
        fast.contains("dynamic dispatch") && fast.contains("canopy references Base.step"),
        "{fast}"
    );
    // Called only on an untyped receiver (two classes have `quack`).
    let duck = hint("Duck.quack");
    assert!(
        duck.contains("receiver of unknown type")
            && duck.contains("`unresolved`")
            && duck.contains("canopy references quack"),
        "{duck}"
    );
    // Never used: says so, and nothing about dispatch.
    let orphan = hint("orphan");
    assert!(
        orphan.contains("no static use of orphan") && !orphan.contains("dispatch"),
        "{orphan}"
    );
}

#[test]
fn detail_counts_the_callers_that_callers_lists() {
    // `twice` calls `helper` from two sites, `once` from one: two callers.
    let source = "def helper():\n    return 1\n\n\ndef twice():\n    helper()\n    return helper()\n\n\ndef once():\n    return helper()\n";
    let repo = indexed(&[("h.py", source)]);
    let dir = repo.dir.path();
    let callers = json(dir, &["callers", "helper"]);
    let mut listed = names(&callers);
    listed.sort();
    assert_eq!(listed, ["once", "twice"], "{callers}");
    let detail = json(dir, &["detail", "helper"]);
    assert_eq!(detail["detail"]["callers"], 2, "{detail}");
    assert_eq!(detail["detail"]["callers"], callers["total"], "{detail}");
    let references = json(dir, &["references", "helper"]);
    assert_eq!(
        detail["detail"]["references"], references["total"],
        "{detail}"
    );
    let callees = json(dir, &["callees", "twice"]);
    assert_eq!(
        json(dir, &["detail", "twice"])["detail"]["callees"],
        callees["total"]
    );
}

/// A repository with its own code and, beside it, a vendored copy, a
/// minified bundle and a test helper: in each file `*_caller` calls
/// `*_callee`, so the callers are unused and all are hotspots.
const MIXED: &[(&str, &str)] = &[
    (
        "src/core.py",
        "def _core_callee():\n    return 1\n\n\ndef _core_caller():\n    return _core_callee()\n",
    ),
    (
        "vendor/lib/util.py",
        "def _vendor_callee():\n    return 2\n\n\ndef _vendor_caller():\n    return _vendor_callee()\n",
    ),
    (
        "static/app.min.js",
        "function _min_callee(){return 3}function _min_caller(){return _min_callee()}\n",
    ),
    (
        "tests/helpers.py",
        "def _helper_callee():\n    return 4\n\n\ndef _helper_caller():\n    return _helper_callee()\n",
    ),
];

/// Names of an `unused` answer's candidates, sorted.
fn unused_names(a: &Value) -> Vec<String> {
    let mut names: Vec<String> = a["candidates"]
        .as_array()
        .expect("candidates")
        .iter()
        .map(|h| h["name"].as_str().unwrap_or("").to_string())
        .collect();
    names.sort();
    names
}

/// Qualified names of a `hotspots` answer, sorted.
fn hotspot_names(a: &Value) -> Vec<String> {
    let mut names: Vec<String> = a["hotspots"]
        .as_array()
        .expect("hotspots")
        .iter()
        .map(|h| h["qualified_name"].as_str().unwrap_or("").to_string())
        .collect();
    names.sort();
    names
}

fn strings(names: &[&str]) -> Vec<String> {
    names.iter().map(|s| s.to_string()).collect()
}

/// Issue 29: `unused` and `hotspots` list the repository's own code; what
/// they skipped is counted per reason with a hint naming the flags, which
/// bring it back.
#[test]
fn unused_and_hotspots_skip_vendored_generated_and_test_code_unless_asked() {
    let repo = indexed(MIXED);
    let dir = repo.dir.path();

    let unused = json(dir, &["unused"]);
    assert_eq!(
        unused_names(&unused),
        strings(&["_core_caller"]),
        "{unused}"
    );
    assert_eq!(
        unused["skipped"],
        serde_json::json!({"vendored": 1, "generated": 1, "tests": 1}),
        "{unused}"
    );
    let hint = unused["hint"].as_str().expect("hint");
    assert!(hint.contains("--include-vendored"), "{hint}");
    assert!(hint.contains("--include-tests"), "{hint}");

    let unused = json(dir, &["unused", "--include-vendored"]);
    assert_eq!(
        unused_names(&unused),
        strings(&["_core_caller", "_min_caller", "_vendor_caller"]),
        "{unused}"
    );
    assert_eq!(
        unused["skipped"],
        serde_json::json!({"vendored": 0, "generated": 0, "tests": 1}),
        "{unused}"
    );
    let unused = json(dir, &["unused", "--include-vendored", "--include-tests"]);
    assert_eq!(
        unused_names(&unused),
        strings(&[
            "_core_caller",
            "_helper_caller",
            "_min_caller",
            "_vendor_caller"
        ]),
        "{unused}"
    );
    assert_eq!(unused["hint"], Value::Null, "{unused}");

    let hot = json(dir, &["hotspots"]);
    assert_eq!(
        hotspot_names(&hot),
        strings(&["_core_callee", "_core_caller"]),
        "{hot}"
    );
    assert_eq!(hot["total"], 2, "{hot}");
    assert_eq!(
        hot["skipped"],
        serde_json::json!({"vendored": 2, "generated": 2, "tests": 2}),
        "{hot}"
    );
    let hot = json(dir, &["hotspots", "--include-tests"]);
    assert_eq!(
        hotspot_names(&hot),
        strings(&[
            "_core_callee",
            "_core_caller",
            "_helper_callee",
            "_helper_caller"
        ]),
        "{hot}"
    );

    // A person reads the same hint under the list.
    let text = canopy(dir, &["unused"]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("src/core.py:5"), "{text}");
    assert!(!text.contains("vendor/lib/util.py"), "{text}");
    assert!(
        text.lines()
            .last()
            .is_some_and(|l| l.starts_with("skipped ")
                && l.contains("--include-vendored")
                && l.contains("--include-tests")),
        "{text}"
    );
}

/// The same parameters over MCP (`canopy_analysis`) and HTTP (`POST /graph`).
#[tokio::test(flavor = "multi_thread")]
async fn unused_and_hotspots_take_include_vendored_and_include_tests_over_mcp_and_http() {
    use canopy_test_support::canopy_bin;
    use canopy_test_support::mcp::{call, connect, ok_json};
    use canopy_test_support::serve::{Opts, Server, add_and_index, post};
    use serde_json::json;

    let repo = Repo::new(MIXED);
    let path = repo.dir.path();
    let client = connect(canopy_bin!()).await;
    let unused = ok_json(
        &call(
            &client,
            "canopy_analysis",
            json!({"path": path, "op": "unused_symbols"}),
        )
        .await,
    );
    assert_eq!(
        unused_names(&unused),
        strings(&["_core_caller"]),
        "{unused}"
    );
    assert_eq!(unused["skipped"]["tests"], 1, "{unused}");
    let unused = ok_json(
        &call(
            &client,
            "canopy_analysis",
            json!({"path": path, "op": "unused_symbols", "include_tests": true}),
        )
        .await,
    );
    assert_eq!(
        unused_names(&unused),
        strings(&["_core_caller", "_helper_caller"]),
        "{unused}"
    );
    let hot = ok_json(
        &call(
            &client,
            "canopy_analysis",
            json!({"path": path, "op": "hotspots", "include_vendored": true}),
        )
        .await,
    );
    assert_eq!(
        hotspot_names(&hot),
        strings(&[
            "_core_callee",
            "_core_caller",
            "_min_callee",
            "_min_caller",
            "_vendor_callee",
            "_vendor_caller"
        ]),
        "{hot}"
    );
    assert_eq!(hot["skipped"]["tests"], 2, "{hot}");
    client.cancel().await.expect("close");

    let data = tempfile::tempdir().expect("tempdir");
    let server = Server::start(canopy_bin!(), data.path(), &Opts::default());
    let http = server.client();
    let id = add_and_index(&http, &repo);
    let ask = |body: Value| -> Value {
        let resp = post(&http, "/graph", &body);
        assert_eq!(resp.status, 200, "{}", resp.text());
        resp.json().expect("json")
    };
    let unused = ask(json!({"repo": id, "op": "unused_symbols"}));
    assert_eq!(
        unused_names(&unused),
        strings(&["_core_caller"]),
        "{unused}"
    );
    assert_eq!(
        unused["skipped"],
        json!({"vendored": 1, "generated": 1, "tests": 1}),
        "{unused}"
    );
    let unused = ask(
        json!({"repo": id, "op": "unused_symbols", "include_vendored": true, "include_tests": true}),
    );
    assert_eq!(
        unused_names(&unused),
        strings(&[
            "_core_caller",
            "_helper_caller",
            "_min_caller",
            "_vendor_caller"
        ]),
        "{unused}"
    );
    let hot = ask(json!({"repo": id, "op": "hotspots", "include_tests": true}));
    assert_eq!(
        hotspot_names(&hot),
        strings(&[
            "_core_callee",
            "_core_caller",
            "_helper_callee",
            "_helper_caller"
        ]),
        "{hot}"
    );
}
