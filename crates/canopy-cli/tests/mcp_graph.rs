//! End-to-end tests of `canopy_graph`: the real `canopy mcp` binary driven
//! by the real rmcp client over stdio, on a repository where two classes
//! both have a `parse` method, so name matching would merge their callers.
//!
//! They test the MCP server (`canopy-mcp`) through the `canopy`
//! binary, so they live in canopy-cli, where Cargo builds it for them.

use canopy_test_support::canopy_bin;
use canopy_test_support::mcp::*;
use canopy_test_support::repo::Repo;
use serde_json::{Value, json};

const MODELS: &str = "class Parser:
    def parse(self):
        return helper()


class Lexer:
    def parse(self):
        return None


def helper():
    return 1
";

const APP: &str = "from models import Parser, Lexer


def use_parser(p: Parser):
    return p.parse()


def use_lexer():
    lx = Lexer()
    return lx.parse()


def unrelated(x):
    return x.parse()
";

fn repo() -> Repo {
    Repo::with_files(&[("models.py", MODELS), ("app.py", APP)])
}

fn names(answer: &Value) -> Vec<String> {
    let mut out: Vec<String> = answer["nodes"]
        .as_array()
        .unwrap_or_else(|| panic!("nodes: {answer}"))
        .iter()
        .map(|n| {
            n["qualified_name"]
                .as_str()
                .unwrap_or_else(|| panic!("qualified_name: {n}"))
                .to_string()
        })
        .collect();
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn callers_follow_resolved_edges_not_names() {
    let repo = repo();
    let client = connect(canopy_bin!()).await;
    let path = repo.path();
    let graph = |args: Value| {
        let mut args = args;
        args["path"] = json!(path);
        call(&client, "canopy_graph", args)
    };

    // Parser.parse is called from use_parser only; Lexer.parse from use_lexer.
    let parser = ok_json(&graph(json!({"op": "callers", "target": "Parser.parse"})).await);
    assert_eq!(names(&parser), ["use_parser"], "{parser}");
    let node = &parser["nodes"][0];
    assert_eq!(node["handle"]["file_path"], "app.py", "{node}");
    assert_eq!(node["depth"], 1);
    assert_eq!(node["edge_kind"], "call");
    assert!(
        node["handle"]["id"]
            .as_str()
            .is_some_and(|id| id.starts_with('h'))
    );
    // The call on an untyped parameter is reported, not guessed.
    assert_eq!(parser["unresolved_count"], 1, "{parser}");
    assert_eq!(parser["unresolved"][0]["line"], 14, "{parser}");
    let lexer = ok_json(&graph(json!({"op": "callers", "target": "Lexer.parse"})).await);
    assert_eq!(names(&lexer), ["use_lexer"], "{lexer}");

    // A bare name shared by two methods is ambiguous: candidates, no guess.
    let ambiguous = ok_json(&graph(json!({"op": "callers", "target": "parse"})).await);
    assert!(
        ambiguous["nodes"].as_array().is_some_and(Vec::is_empty),
        "{ambiguous}"
    );
    assert!(
        ambiguous["candidates"]
            .as_array()
            .is_some_and(|c| c.len() == 2),
        "{ambiguous}"
    );

    // Transitive callees: use_parser -> Parser.parse -> helper.
    let callees =
        ok_json(&graph(json!({"op": "callees", "target": "use_parser", "depth": 2})).await);
    assert_eq!(names(&callees), ["Parser.parse", "helper"], "{callees}");

    // Shortest call path.
    let chain =
        ok_json(&graph(json!({"op": "path", "target": "use_parser", "to": "helper"})).await);
    assert_eq!(names(&chain), ["Parser.parse", "helper"], "{chain}");

    // Definition at a position: `p.parse()` on line 5, col 13 of app.py.
    let def = ok_json(&graph(json!({"op": "definition", "target": "app.py:5:13"})).await);
    assert_eq!(names(&def), ["Parser.parse"], "{def}");
    // Without a column: the line's one site; a line of two sites is an
    // error that lists both with the column to give (issue 29).
    let def = ok_json(&graph(json!({"op": "definition", "target": "app.py:5"})).await);
    assert_eq!(names(&def), ["Parser.parse"], "{def}");
    let two = err_json(
        &graph(json!({"op": "definition", "target": "app.py:1"})).await,
        "Validation",
    );
    let message = two.to_string();
    assert!(
        message.contains("`Parser` at app.py:1:19") && message.contains("`Lexer` at app.py:1:27"),
        "{message}"
    );

    // Kinds of empty: nothing calls use_parser; an unknown target.
    let none = ok_json(&graph(json!({"op": "callers", "target": "use_parser"})).await);
    assert_eq!(none["empty"]["kind"], "resolved", "{none}");
    let missing = ok_json(&graph(json!({"op": "callers", "target": "NoSuchThing"})).await);
    assert_eq!(missing["empty"]["kind"], "target_not_found", "{missing}");

    client.cancel().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn analysis_ops_and_dependencies_answer_over_the_graph() {
    let repo = repo();
    let client = connect(canopy_bin!()).await;
    let path = repo.path();

    // app.py imports models.py: a file-level dependency, and no cycle.
    let deps = ok_json(
        &call(
            &client,
            "canopy_graph",
            json!({"path": path, "op": "dependencies", "target": "app.py"}),
        )
        .await,
    );
    let edges = deps["edges"].as_array().unwrap_or_else(|| panic!("{deps}"));
    assert!(
        edges
            .iter()
            .any(|e| e["from"] == "app.py" && e["to"] == "models.py"),
        "{deps}"
    );
    let cycles = ok_json(
        &call(
            &client,
            "canopy_analysis",
            json!({"path": path, "op": "circular_dependencies"}),
        )
        .await,
    );
    assert_eq!(cycles["cycles"], json!([]), "{cycles}");

    // helper is called by Parser.parse; unrelated is called by nobody.
    let hot = ok_json(
        &call(
            &client,
            "canopy_analysis",
            json!({"path": path, "op": "hotspots"}),
        )
        .await,
    );
    assert!(
        hot["hotspots"]
            .as_array()
            .is_some_and(|h| h.iter().any(|n| n["qualified_name"] == "Parser.parse")),
        "{hot}"
    );
    let unused = ok_json(
        &call(
            &client,
            "canopy_analysis",
            json!({"path": path, "op": "unused_symbols", "include_public": true}),
        )
        .await,
    );
    let previews: Vec<&str> = unused["candidates"]
        .as_array()
        .unwrap_or_else(|| panic!("{unused}"))
        .iter()
        .filter_map(|h| h["preview"].as_str())
        .collect();
    assert!(
        previews.iter().any(|p| p.starts_with("def unrelated")),
        "{unused}"
    );
    assert!(
        !previews.iter().any(|p| p.starts_with("def helper")),
        "{unused}"
    );

    // The discovery operations: symbols by filter, search, summary, detail, scope.
    let ask = |args: Value| {
        let client = &client;
        async move { ok_json(&call(client, "canopy_analysis", args).await) }
    };
    let methods = ask(json!({"path": path, "op": "symbols",
        "filter": {"kinds": ["method"], "name": "*parse", "sort": "name"}}))
    .await;
    let names: Vec<&str> = methods["symbols"]
        .as_array()
        .unwrap_or_else(|| panic!("{methods}"))
        .iter()
        .filter_map(|s| s["qualified_name"].as_str())
        .collect();
    assert_eq!(names, ["Lexer.parse", "Parser.parse"], "{methods}");
    let found = ask(json!({"path": path, "op": "search", "target": "use_*"})).await;
    assert_eq!(found["total"], 2, "{found}");
    let summary = ask(json!({"path": path, "op": "summary", "target": "models.py"})).await;
    assert_eq!(summary["units_by_kind"]["class"], 2, "{summary}");
    let detail = ask(json!({"path": path, "op": "detail", "target": "Parser.parse"})).await;
    assert_eq!(
        detail["detail"]["signature"], "def parse(self):",
        "{detail}"
    );
    assert_eq!(detail["detail"]["callers"], 1, "{detail}");
    let scope = ask(json!({"path": path, "op": "scope", "target": "models.py:3"})).await;
    let chain: Vec<&str> = scope["nodes"]
        .as_array()
        .unwrap_or_else(|| panic!("{scope}"))
        .iter()
        .filter_map(|n| n["qualified_name"].as_str())
        .collect();
    assert_eq!(chain, ["Parser", "Parser.parse"], "{scope}");

    // Each tool offers only its own operations.
    let wrong = call(
        &client,
        "canopy_analysis",
        json!({"path": path, "op": "callers", "target": "helper"}),
    )
    .await;
    err_json(&wrong, "Validation");
    client.cancel().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_graph_requests_are_validation_errors_with_hints() {
    let repo = repo();
    let client = connect(canopy_bin!()).await;
    let path = repo.path();
    let bad_op = call(
        &client,
        "canopy_graph",
        json!({"path": path, "op": "whatever", "target": "x"}),
    )
    .await;
    let err = err_json(&bad_op, "Validation");
    assert!(
        err["message"]
            .as_str()
            .is_some_and(|m| m.contains("callers")),
        "{err}"
    );
    let no_to = call(
        &client,
        "canopy_graph",
        json!({"path": path, "op": "path", "target": "use_parser"}),
    )
    .await;
    err_json(&no_to, "Validation");
    let bad_pos = call(
        &client,
        "canopy_graph",
        json!({"path": path, "op": "definition", "target": "Parser.parse"}),
    )
    .await;
    err_json(&bad_pos, "Validation");
    client.cancel().await.expect("close");
}

/// The operations the other tests do not reach, each through the real
/// client: references, type_usages, impact, implementations, implements,
/// dependents, type_hierarchy, dependency_graph and package_summary.
#[tokio::test(flavor = "multi_thread")]
async fn every_other_operation_answers_through_the_client() {
    let repo = repo();
    let client = connect(canopy_bin!()).await;
    let path = repo.path();
    let graph = |args: Value| {
        let client = &client;
        async move { ok_json(&call(client, "canopy_graph", args).await) }
    };
    let analysis = |args: Value| {
        let client = &client;
        async move { ok_json(&call(client, "canopy_analysis", args).await) }
    };

    let refs = graph(json!({"path": path, "op": "references", "target": "helper"})).await;
    assert_eq!(names(&refs), ["Parser.parse"], "{refs}");
    // `def use_parser(p: Parser)`: the annotation is a type use.
    let types = graph(json!({"path": path, "op": "type_usages", "target": "Parser"})).await;
    assert_eq!(names(&types), ["use_parser"], "{types}");
    let impact = graph(json!({"path": path, "op": "impact", "target": "helper"})).await;
    assert_eq!(names(&impact), ["Parser.parse"], "{impact}");
    // Nothing extends anything here: resolved and empty, said so.
    for op in ["implementations", "implements"] {
        let a = graph(json!({"path": path, "op": op, "target": "Parser"})).await;
        assert_eq!(a["nodes"], json!([]), "{op}: {a}");
        assert_eq!(a["empty"]["kind"], "resolved", "{op}: {a}");
    }
    let users = graph(json!({"path": path, "op": "dependents", "target": "models.py"})).await;
    assert!(
        users["nodes"]
            .as_array()
            .is_some_and(|n| n.iter().any(|d| d["name"] == "app.py")),
        "{users}"
    );

    let hierarchy =
        analysis(json!({"path": path, "op": "type_hierarchy", "target": "Lexer"})).await;
    assert_eq!(hierarchy["target"]["file_path"], "models.py", "{hierarchy}");
    assert_eq!(hierarchy["nodes"], json!([]), "{hierarchy}");
    let deps = analysis(json!({"path": path, "op": "dependency_graph"})).await;
    assert!(
        deps["edges"].as_array().is_some_and(|e| e
            .iter()
            .any(|e| e["from"] == "app.py" && e["to"] == "models.py")),
        "{deps}"
    );
    let package = analysis(json!({"path": path, "op": "package_summary", "target": "."})).await;
    assert_eq!(package["files"], 2, "{package}");
    assert_eq!(package["languages"]["python"], 2, "{package}");
    client.cancel().await.expect("close");
}

/// An agent's answer holds at most 500 nodes however many it asks for, and
/// says so (the CLI's cap is higher: `graph_surface.rs`).
#[tokio::test(flavor = "multi_thread")]
async fn an_agents_answer_is_capped_at_500_and_says_so() {
    let mut source = String::from("def target():\n    return 1\n");
    for i in 0..600 {
        source.push_str(&format!("\n\ndef caller_{i}():\n    return target()\n"));
    }
    let repo = Repo::with_files(&[("m.py", &source)]);
    let client = connect(canopy_bin!()).await;
    let args =
        json!({"path": repo.path(), "op": "callers", "target": "target", "max_results": 1000});
    let a = ok_json(&call(&client, "canopy_graph", args).await);
    assert_eq!(
        a["nodes"].as_array().map(Vec::len),
        Some(500),
        "{}",
        a["total"]
    );
    assert_eq!(a["total"], 600, "{}", a["total"]);
    assert_eq!(a["truncated"], true);
    assert_eq!(
        a["max_results_clamped"],
        json!({"asked": 1000, "used": 500})
    );
    // The rest is one more page away: `next_offset` passed back as `offset`.
    assert_eq!(a["next_offset"], 500, "{}", a["next_offset"]);
    let args = json!({"path": repo.path(), "op": "callers", "target": "target", "max_results": 500, "offset": 500});
    let rest = ok_json(&call(&client, "canopy_graph", args).await);
    assert_eq!(rest["nodes"].as_array().map(Vec::len), Some(100));
    assert_eq!(rest["truncated"], false);
    assert!(rest.get("next_offset").is_none(), "{rest}");
    let ids = |a: &serde_json::Value| -> Vec<String> {
        a["nodes"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|n| n["handle"]["id"].as_str().unwrap_or_default().to_string())
            .collect()
    };
    let mut all = ids(&a);
    all.extend(ids(&rest));
    all.sort();
    all.dedup();
    assert_eq!(all.len(), 600, "two pages hold every caller once");
    client.cancel().await.expect("close");
}

/// `canopy_context` through the real server: fragments with text that fit
/// the budget, the focus's caller from the graph, semantic reported as
/// skipped (no model), and a bad budget refused as a validation error.
#[tokio::test(flavor = "multi_thread")]
async fn context_packs_fit_their_budget_and_say_why() {
    let repo = repo();
    let client = connect_with_args(
        canopy_bin!(),
        TestClient::default(),
        &["--structured-content", "true"],
    )
    .await;
    let path = repo.path();
    let pack = context_pack(
        &call(
            &client,
            "canopy_context",
            json!({"path": path, "task": "change what Parser.parse returns", "focus": "Parser.parse", "budget_tokens": 300, "strategy": "graph"}),
        )
        .await,
    );
    let total = pack["total_tokens"].as_u64().expect("total_tokens");
    assert!(total <= 300, "{pack}");
    let fragments = pack["fragments"].as_array().expect("fragments");
    let sum: u64 = fragments
        .iter()
        .map(|f| f["tokens"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(sum, total, "{pack}");
    let caller = fragments
        .iter()
        .find(|f| f["name"] == "use_parser")
        .unwrap_or_else(|| panic!("the focus's caller: {pack}"));
    assert!(
        caller["text"]
            .as_str()
            .is_some_and(|t| t.contains("p.parse()")),
        "{caller}"
    );
    assert!(
        caller["reason"]
            .as_str()
            .is_some_and(|r| r.contains("calls the focus")),
        "{caller}"
    );
    for f in fragments {
        for key in [
            "handle",
            "file_path",
            "line_range",
            "detail",
            "strategy",
            "reason",
            "score",
        ] {
            assert!(!f[key].is_null(), "{key} missing: {f}");
        }
    }
    assert!(fragments.iter().all(|f| f["strategy"] == "graph"), "{pack}");
    // The default, fused: every strategy reports; semantic is skipped without a model.
    let fused = context_pack(
        &call(
            &client,
            "canopy_context",
            json!({"path": path, "task": "change what Parser.parse returns"}),
        )
        .await,
    );
    let semantic = fused["strategies"]
        .as_array()
        .and_then(|s| s.iter().find(|r| r["strategy"] == "semantic"))
        .unwrap_or_else(|| panic!("semantic report: {fused}"));
    assert_eq!(semantic["status"], "skipped", "{semantic}");
    assert!(
        fused["total_tokens"]
            .as_u64()
            .is_some_and(|t| t > 0 && t <= 4_000),
        "{fused}"
    );

    let bad = call(
        &client,
        "canopy_context",
        json!({"path": path, "task": "x", "budget_tokens": 5}),
    )
    .await;
    err_json(&bad, "Validation");
}

/// A `canopy_context` result's pack (the structured copy: the text blocks
/// are the wire form, a JSON header and one plain-text block per fragment).
fn context_pack(result: &rmcp::model::CallToolResult) -> Value {
    assert_ne!(result.is_error, Some(true), "tool error: {}", text(result));
    let header: Value = serde_json::from_str(text(result)).expect("JSON header");
    let pack = result
        .structured_content
        .clone()
        .unwrap_or_else(|| panic!("structured pack: {header}"));
    assert_eq!(
        header["fragments"],
        pack["fragments"].as_array().map_or(0, Vec::len)
    );
    assert_eq!(
        result.content.len(),
        1 + header["fragments"].as_u64().unwrap_or(0) as usize
    );
    pack
}
