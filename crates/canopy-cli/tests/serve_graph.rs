//! End-to-end tests of `POST /graph`: the real `canopy serve` binary over
//! loopback, a git repository where two types share a method name.
//!
//! They test the HTTP service (`canopy-service`) through the `canopy`
//! binary, so they live in canopy-cli, where Cargo builds it for them.

use canopy_test_support::repo::Repo;
use canopy_test_support::serve::{Opts, Server, add_and_index, assert_error, post};
use canopy_test_support::{WAIT, canopy_bin};
use serde_json::{Value, json};

fn repo() -> Repo {
    Repo::new(&[
        (
            "src/lib.rs",
            "pub mod shapes;\n\nuse crate::shapes::{Circle, Square};\n\npub fn area_of_square(s: &Square) -> f64 {\n    s.area()\n}\n\npub fn area_of_circle(c: &Circle) -> f64 {\n    c.area()\n}\n",
        ),
        (
            "src/shapes.rs",
            "pub struct Square {\n    pub side: f64,\n}\n\npub struct Circle {\n    pub r: f64,\n}\n\nimpl Square {\n    pub fn area(&self) -> f64 {\n        self.side * self.side\n    }\n}\n\nimpl Circle {\n    pub fn area(&self) -> f64 {\n        3.14 * self.r * self.r\n    }\n}\n",
        ),
    ])
}

fn qualified(answer: &Value) -> Vec<String> {
    let mut names: Vec<String> = answer["nodes"]
        .as_array()
        .unwrap_or_else(|| panic!("nodes: {answer}"))
        .iter()
        .map(|n| n["qualified_name"].as_str().unwrap_or_default().to_string())
        .collect();
    names.sort();
    names
}

#[test]
fn graph_answers_with_generations_and_409_when_stale() {
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(canopy_bin!(), data.path(), &Opts::default());
    let client = server.client();
    let repo = repo();
    let id = add_and_index(&client, &repo);

    let resp = post(
        &client,
        "/graph",
        &json!({"repo": id, "op": "callers", "target": "Square::area"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let answer: Value = resp.json().unwrap();
    let names = qualified(&answer);
    assert_eq!(names.len(), 1, "{answer}");
    assert!(names[0].ends_with("area_of_square"), "{answer}");
    assert_eq!(answer["generation"], 1);
    assert_eq!(answer["target"]["generation"], 1, "{answer}");
    assert_eq!(answer["nodes"][0]["handle"]["source"], "service");
    assert_eq!(answer["nodes"][0]["handle"]["file_path"], "src/lib.rs");

    // Ambiguous: both `area` methods are candidates; nothing is guessed.
    let resp = post(
        &client,
        "/graph",
        &json!({"repo": id, "op": "callers", "target": "area"}),
    );
    let answer: Value = resp.json().unwrap();
    assert_eq!(
        answer["candidates"].as_array().map(Vec::len),
        Some(2),
        "{answer}"
    );
    assert_eq!(
        answer["nodes"].as_array().map(Vec::len),
        Some(0),
        "{answer}"
    );

    // The current generation passes; an older one is 409; a newer one is 400.
    let current = post(
        &client,
        "/graph",
        &json!({"repo": id, "op": "callees", "target": "area_of_circle", "generation": 1}),
    );
    assert_eq!(current.status, 200, "{}", current.text());
    let callees: Value = current.json().unwrap();
    let names = qualified(&callees);
    assert_eq!(names.len(), 1, "{callees}");
    assert!(names[0].contains("Circle"), "{callees}");
    repo.write("src/extra.rs", "pub fn extra() {}\n");
    repo.commit("extra");
    client.reindex(&id, None).unwrap();
    assert_eq!(client.wait_until_idle(&id, WAIT).unwrap().generation, 2);
    let stale = post(
        &client,
        "/graph",
        &json!({"repo": id, "op": "callers", "target": "Square::area", "generation": 1}),
    );
    assert_error(&stale, 409, "stale_generation");
    let future = post(
        &client,
        "/graph",
        &json!({"repo": id, "op": "callers", "target": "Square::area", "generation": 9}),
    );
    assert_error(&future, 400, "validation_error");

    // Analysis operations share the endpoint.
    let resp = post(&client, "/graph", &json!({"repo": id, "op": "hotspots"}));
    assert_eq!(resp.status, 200, "{}", resp.text());
    let hot: Value = resp.json().unwrap();
    assert!(
        hot["hotspots"]
            .as_array()
            .is_some_and(|h| h.iter().all(|n| n["handle"]["generation"] == 2)),
        "{hot}"
    );
    let resp = post(
        &client,
        "/graph",
        &json!({"repo": id, "op": "dependents", "target": "src/shapes.rs"}),
    );
    let deps: Value = resp.json().unwrap();
    assert!(
        deps["edges"]
            .as_array()
            .is_some_and(|e| e.iter().any(|e| e["from"] == "src/lib.rs")),
        "{deps}"
    );

    // Bad requests are 400 with a hint, never 500.
    for body in [
        json!({"repo": id, "op": "nope", "target": "x"}),
        json!({"repo": id, "op": "path", "target": "area_of_square"}),
        json!({"repo": id, "op": "definition", "target": "Square::area"}),
        json!({"repo": id, "op": "callers", "target": ""}),
    ] {
        let resp = post(&client, "/graph", &body);
        assert_eq!(resp.status, 400, "{body} -> {}", resp.text());
    }
    let unknown = post(
        &client,
        "/graph",
        &json!({"repo": "no-such-repo", "op": "callers", "target": "x"}),
    );
    assert_error(&unknown, 404, "not_found");
}

/// The analysis operations added for seed 001 over HTTP: every handle they
/// return carries the generation, like the navigation answers.
#[test]
fn symbols_search_summaries_detail_and_scope_over_http() {
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(canopy_bin!(), data.path(), &Opts::default());
    let client = server.client();
    let repo = repo();
    let id = add_and_index(&client, &repo);
    let ask = |body: Value| -> Value {
        let resp = post(&client, "/graph", &body);
        assert_eq!(resp.status, 200, "{body}: {}", resp.text());
        resp.json().unwrap()
    };

    let symbols = ask(json!({"repo": id, "op": "symbols",
        "filter": {"kinds": ["method"], "sort": "name"}}));
    let names: Vec<&str> = symbols["symbols"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["qualified_name"].as_str())
        .collect();
    assert_eq!(names.len(), 2, "{symbols}");
    assert!(names.iter().all(|n| n.ends_with("area")), "{names:?}");
    assert_eq!(
        symbols["symbols"][0]["handle"]["generation"], 1,
        "{symbols}"
    );

    let search = ask(json!({"repo": id, "op": "search", "target": "area_of_*"}));
    assert_eq!(search["total"], 2, "{search}");

    let summary = ask(json!({"repo": id, "op": "summary", "target": "src/shapes.rs"}));
    assert_eq!(summary["files"], 1, "{summary}");
    assert_eq!(summary["dependents"][0]["name"], "src/lib.rs", "{summary}");
    assert_eq!(summary["top_symbols"][0]["handle"]["source"], "service");
    let package = ask(json!({"repo": id, "op": "package_summary", "target": "src"}));
    assert_eq!(package["files"], 2, "{package}");

    let detail = ask(json!({"repo": id, "op": "detail", "target": "Square::area"}));
    assert_eq!(
        detail["detail"]["signature"], "pub fn area(&self) -> f64",
        "{detail}"
    );
    assert_eq!(detail["detail"]["callers"], 1, "{detail}");

    let scope = ask(json!({"repo": id, "op": "scope", "target": "src/shapes.rs:11"}));
    let chain: Vec<&str> = scope["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["handle"]["node_type"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(chain.first(), Some(&"file"), "{scope}");
    assert!(chain.len() >= 3, "file, impl, method: {scope}");

    // A filter value the service does not know is refused, not ignored.
    let resp = post(
        &client,
        "/graph",
        &json!({"repo": id, "op": "symbols", "filter": {"sort": "size"}}),
    );
    assert_eq!(resp.status, 400, "{}", resp.text());
    assert!(
        resp.text().contains("sort") || resp.text().contains("size"),
        "{}",
        resp.text()
    );

    // A scope target that is not a position is a 400 that says what to send.
    let resp = post(
        &client,
        "/graph",
        &json!({"repo": id, "op": "scope", "target": "Square"}),
    );
    assert_error(&resp, 400, "validation_error");
}

/// The remaining operations over HTTP, so every one of the 22 is exercised
/// through the service.
#[test]
fn every_other_operation_answers_over_http() {
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(canopy_bin!(), data.path(), &Opts::default());
    let client = server.client();
    let repo = repo();
    let id = add_and_index(&client, &repo);
    let ask = |body: Value| -> Value {
        let resp = post(&client, "/graph", &body);
        assert_eq!(resp.status, 200, "{body}: {}", resp.text());
        resp.json().unwrap()
    };
    let only_area_of_square = |answer: &Value| {
        let names = qualified(answer);
        assert_eq!(names.len(), 1, "{answer}");
        assert!(names[0].ends_with("area_of_square"), "{answer}");
    };

    only_area_of_square(&ask(
        json!({"repo": id, "op": "references", "target": "Square::area"}),
    ));
    // `s: &Square` in area_of_square, and `impl Square` (a file-level use).
    let types = ask(json!({"repo": id, "op": "type_usages", "target": "Square"}));
    let sites: Vec<&str> = types["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|n| n["sites"].as_array().into_iter().flatten())
        .filter_map(Value::as_str)
        .collect();
    assert!(sites.contains(&"src/lib.rs:5:26"), "{types}");
    assert!(sites.contains(&"src/shapes.rs:9:5"), "{types}");
    assert!(
        types["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .all(|n| n["edge_kind"] == "type"),
        "{types}"
    );
    only_area_of_square(&ask(
        json!({"repo": id, "op": "impact", "target": "Square::area"}),
    ));
    for op in ["implementations", "implements", "type_hierarchy"] {
        let a = ask(json!({"repo": id, "op": op, "target": "Square"}));
        assert_eq!(a["target"]["file_path"], "src/shapes.rs", "{op}: {a}");
        assert_eq!(a["target"]["generation"], 1, "{op}: {a}");
    }
    let deps = ask(json!({"repo": id, "op": "dependencies", "target": "src/lib.rs"}));
    assert_eq!(deps["nodes"][0]["name"], "src/shapes.rs", "{deps}");
    let graph = ask(json!({"repo": id, "op": "dependency_graph"}));
    assert!(
        graph["edges"].as_array().is_some_and(|e| e
            .iter()
            .any(|e| e["from"] == "src/lib.rs" && e["to"] == "src/shapes.rs")),
        "{graph}"
    );
    let cycles = ask(json!({"repo": id, "op": "circular_dependencies"}));
    assert_eq!(cycles["cycles"], json!([]), "{cycles}");
    let unused = ask(json!({"repo": id, "op": "unused_symbols", "include_public": true}));
    assert!(unused["candidates"].is_array(), "{unused}");
}

/// `POST /context` over loopback: fragments within the budget, tagged with
/// the repo and generation; 409 for an old generation, 400 for a bad budget.
#[test]
fn context_packs_over_http() {
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(canopy_bin!(), data.path(), &Opts::default());
    let client = server.client();
    let repo = repo();
    let id = add_and_index(&client, &repo);

    let resp = post(
        &client,
        "/context",
        &json!({"repo": id, "task": "square area is wrong", "focus": "Square::area", "budget_tokens": 400, "strategy": "graph"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let pack: Value = resp.json().unwrap();
    assert!(
        pack["total_tokens"].as_u64().is_some_and(|t| t <= 400),
        "{pack}"
    );
    assert_eq!(pack["generation"], 1);
    assert_eq!(pack["focus"]["status"], "one", "{pack}");
    let names: Vec<&str> = pack["fragments"]
        .as_array()
        .unwrap_or_else(|| panic!("{pack}"))
        .iter()
        .filter_map(|f| f["name"].as_str())
        .collect();
    assert!(
        names.iter().any(|n| n.ends_with("area_of_square")),
        "{pack}"
    );
    assert!(
        !names.iter().any(|n| n.ends_with("area_of_circle")),
        "the other area's caller: {pack}"
    );

    let stale = post(
        &client,
        "/context",
        &json!({"repo": id, "task": "x", "focus": "Square::area", "generation": 0}),
    );
    assert_error(&stale, 409, "stale_generation");
    let bad = post(
        &client,
        "/context",
        &json!({"repo": id, "task": "x", "budget_tokens": 1}),
    );
    assert_error(&bad, 400, "validation_error");
    let unknown = post(
        &client,
        "/context",
        &json!({"repo": id, "task": "x", "colour": "red"}),
    );
    assert_eq!(unknown.status, 400, "{}", unknown.text());
}
