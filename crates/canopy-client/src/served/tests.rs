//! The typed provenance against the JSON patching it replaced: for real
//! answers of every kind, a served answer's wire bytes equal what the old
//! server-side `annotate` / `annotate_graph` made of them (kept here as the
//! oracle), and a client reading them back writes the same bytes again.

use canopy_core::context::ContextParams;
use canopy_core::graph::request::GraphRequest;
use canopy_core::index::NoProgress;
use canopy_core::pack::PackParams;
use canopy_core::query::{QueryKind, QueryParams};
use canopy_core::{Engine, EngineOptions};
use serde_json::json;

use super::*;

const MODELS: &str = "class Parser:
    def parse(self):
        return helper()


class Lexer:
    def parse(self):
        return None


def helper():
    return 1


def _orphan():
    return 2
";

const APP: &str = "from models import Parser, Lexer


def use_parser(p: Parser):
    return p.parse()


def main():
    return use_parser(Parser())
";

fn engine() -> (tempfile::TempDir, Engine) {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(dir.path().join(".git")).expect("mark the root");
    std::fs::write(dir.path().join("models.py"), MODELS).expect("write");
    std::fs::write(dir.path().join("app.py"), APP).expect("write");
    let engine = Engine::open(dir.path(), EngineOptions::default()).expect("open");
    engine.index(None, &NoProgress).expect("index");
    (dir, engine)
}

/// The server's patching before answers were typed: every handle of
/// `handles` and `ref_handles` tagged, the provenance at the top.
fn annotate(value: &mut Value, repo_id: &str, generation: u64, commit_sha: &Option<String>) {
    let Some(obj) = value.as_object_mut() else {
        return;
    };
    for key in ["handles", "ref_handles"] {
        if let Some(list) = obj.get_mut(key).and_then(Value::as_array_mut) {
            for handle in list {
                if let Some(h) = handle.as_object_mut() {
                    h.insert("source".into(), json!("service"));
                    h.insert("commit_sha".into(), json!(commit_sha));
                    h.insert("generation".into(), json!(generation));
                }
            }
        }
    }
    obj.insert("repo_id".into(), json!(repo_id));
    obj.insert("generation".into(), json!(generation));
    obj.insert("commit_sha".into(), json!(commit_sha));
}

/// The graph answers' patching, by its six key names.
fn annotate_graph(value: &mut Value, repo_id: &str, generation: u64, commit_sha: &Option<String>) {
    let tag = |h: &mut Value| {
        if let Some(h) = h.as_object_mut() {
            h.insert("source".into(), json!("service"));
            h.insert("commit_sha".into(), json!(commit_sha));
            h.insert("generation".into(), json!(generation));
        }
    };
    if let Some(obj) = value.as_object_mut() {
        if let Some(t) = obj.get_mut("target") {
            tag(t);
        }
        for key in [
            "candidates",
            "nodes",
            "review",
            "hotspots",
            "symbols",
            "top_symbols",
        ] {
            for item in obj
                .get_mut(key)
                .and_then(Value::as_array_mut)
                .into_iter()
                .flatten()
            {
                if key != "candidates" {
                    if let Some(h) = item.get_mut("handle") {
                        tag(h);
                    }
                } else {
                    tag(item);
                }
            }
        }
    }
    annotate(value, repo_id, generation, commit_sha);
}

fn at(commit_sha: Option<&str>) -> ServedAt {
    ServedAt {
        repo_id: "r-1".into(),
        generation: 3,
        commit_sha: commit_sha.map(str::to_string),
    }
}

/// Serves `answer` and checks its bytes against the oracle's; returns them.
fn served_as_before<T: ServedAnswer>(answer: T, graph: bool, commit_sha: Option<&str>) -> String {
    let at = at(commit_sha);
    let mut oracle = serde_json::to_value(&answer).expect("to value");
    // A served answer's freshness names the served generation (one
    // generation per response, issue 32 N8).
    if let Some(freshness) = oracle.get_mut("freshness").filter(|f| f.is_object()) {
        freshness["generation"] = json!(at.generation);
    }
    if graph {
        annotate_graph(&mut oracle, &at.repo_id, at.generation, &at.commit_sha);
    } else {
        annotate(&mut oracle, &at.repo_id, at.generation, &at.commit_sha);
    }
    let wire = serde_json::to_string(&Served::new(at, answer)).expect("serialize");
    assert_eq!(wire, oracle.to_string());
    wire
}

#[test]
fn query_results_are_tagged_as_before_and_read_back() {
    let (_dir, engine) = engine();
    let answer = engine
        .query(&QueryParams {
            symbol: Some("parse".into()),
            ..QueryParams::default()
        })
        .expect("query");
    assert!(answer.handles.len() >= 2);
    for commit in [Some("abc123"), None] {
        let wire = served_as_before(answer.clone(), false, commit);
        let back: Served<QueryResult> = serde_json::from_str(&wire).expect("read back");
        let mut served = answer.clone();
        if let Some(f) = served.freshness.as_mut() {
            f.generation = at(None).generation;
        }
        assert_eq!(back.answer, served);
        assert_eq!(serde_json::to_string(&back).expect("again"), wire);
    }
    let refs = engine
        .query(&QueryParams {
            symbol: Some("parse".into()),
            kind: Some(QueryKind::Reference),
            ..QueryParams::default()
        })
        .expect("references");
    assert!(refs.ref_handles.as_ref().is_some_and(|r| !r.is_empty()));
    let wire = served_as_before(refs, false, Some("abc123"));
    assert!(wire.contains("\"ref_handles\":[{"), "{wire}");
}

#[test]
fn packs_and_context_packs_are_tagged_as_before() {
    let (_dir, engine) = engine();
    let pack = engine
        .evidence_pack(
            &PackParams {
                query: QueryParams {
                    pattern: Some("parse helper".into()),
                    ..QueryParams::default()
                },
                ..PackParams::default()
            },
            None,
        )
        .expect("pack");
    assert!(!pack.handles.is_empty());
    let wire = served_as_before(pack.clone(), false, Some("abc"));
    let back: Served<EvidencePack> = serde_json::from_str(&wire).expect("read back");
    assert_eq!(serde_json::to_string(&back).expect("again"), wire);
    // With a session, the wire names it, as the server's insert did.
    let mut oracle: Value = serde_json::from_str(&wire).expect("json");
    oracle["session"] = json!("agent-1");
    let with_session = Served::new(at(Some("abc")), pack).with_session(Some("agent-1".into()));
    assert_eq!(
        serde_json::to_string(&with_session).expect("serialize"),
        oracle.to_string()
    );

    // Fragments and the focus's handles carry nothing: only the top does.
    let context = engine
        .context(&ContextParams {
            task: "make Parser.parse faster".into(),
            focus: Some("Parser.parse".into()),
            budget_tokens: Some(500),
            strategy: None,
        })
        .expect("context");
    assert!(!context.focus.resolved.is_empty());
    assert!(!context.fragments.is_empty());
    let wire = served_as_before(context, false, Some("abc"));
    let back: Served<ContextPack> = serde_json::from_str(&wire).expect("read back");
    assert_eq!(serde_json::to_string(&back).expect("again"), wire);
}

#[test]
fn every_graph_answer_is_tagged_as_the_six_key_names_did() {
    let (_dir, engine) = engine();
    let requests = [
        GraphRequest::new(GraphOp::Callers, "Parser.parse"),
        GraphRequest::new(GraphOp::Callers, "parse"),
        GraphRequest::new(GraphOp::Impact, "helper"),
        GraphRequest::new(GraphOp::Definition, "app.py:5:13"),
        GraphRequest::new(GraphOp::Scope, "models.py:3"),
        GraphRequest::new(GraphOp::Detail, "Parser.parse"),
        GraphRequest::new(GraphOp::Hotspots, ""),
        GraphRequest::new(GraphOp::Symbols, ""),
        GraphRequest::new(GraphOp::Search, "pars*"),
        GraphRequest::new(GraphOp::Summary, "models.py"),
        GraphRequest::new(GraphOp::PackageSummary, "."),
        GraphRequest::new(GraphOp::UnusedSymbols, ""),
        GraphRequest::new(GraphOp::Dependencies, "app.py"),
        GraphRequest::new(GraphOp::CircularDependencies, ""),
        GraphRequest::new(GraphOp::DependencyGraph, ""),
    ];
    let mut tagged_kinds = BTreeSet::new();
    for request in requests {
        let answer = engine.graph_request(&request).expect("graph");
        let wire = served_as_before(answer, true, Some("abc"));
        for key in ["\"target\":{", "\"candidates\":[{", "\"top_symbols\":[{"] {
            if wire.contains(key) {
                tagged_kinds.insert(key);
            }
        }
        let back: Served<Value> = serde_json::from_str(&wire).expect("read back");
        let back = back
            .try_map(|v| graph_response(request.op, v))
            .unwrap_or_else(|e| panic!("{}: {e}", request.op.as_str()));
        assert_eq!(
            serde_json::to_string(&back).expect("again"),
            wire,
            "{}",
            request.op.as_str()
        );
    }
    // The handles the old code found by key name were there to find.
    assert_eq!(tagged_kinds.len(), 3, "{tagged_kinds:?}");
}
