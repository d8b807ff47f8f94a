//! End-to-end tests: the real `canopy serve` binary over loopback.
//!
//! They test the HTTP service (`canopy-service`) through the `canopy`
//! binary, so they live in canopy-cli, where Cargo builds it for them.

use std::collections::{BTreeSet, HashSet};
use std::path::Path;

use canopy_client::api::{PackRequest, QueryRequest};
use canopy_client::client::{ClientError, ServiceClient};
use canopy_core::pack::PackParams;
use canopy_core::query::QueryParams;
use canopy_test_support::repo::Repo;
use canopy_test_support::serve::{
    Opts, Server, add_and_index, assert_error, assert_settings_refusals, get, post, serve_exits,
    serve_exits_in,
};
use canopy_test_support::{WAIT, canopy_bin, eventually};
use serde_json::{Value, json};

fn symbol(name: &str) -> QueryParams {
    QueryParams {
        symbol: Some(name.into()),
        ..QueryParams::default()
    }
}

/// `POST /query` with the body [`ServiceClient::query`] sends: the answer
/// as the server wrote it (its handles tagged by the server, not written
/// again by a client).
fn query_json(client: &ServiceClient, repo: &str, params: &QueryParams) -> Result<Value, String> {
    let body = QueryRequest {
        repo: repo.to_string(),
        params: params.clone(),
    };
    post_json(
        client,
        "/query",
        &serde_json::to_value(body).map_err(|e| e.to_string())?,
    )
}

/// [`query_json`] for `POST /evidence_pack` ([`ServiceClient::evidence_pack`]'s body).
fn pack_json(client: &ServiceClient, repo: &str, params: &PackParams) -> Value {
    let body = PackRequest {
        repo: repo.to_string(),
        session: None,
        params: params.clone(),
    };
    post_json(
        client,
        "/evidence_pack",
        &serde_json::to_value(body).expect("body"),
    )
    .expect("evidence pack")
}

fn post_json(client: &ServiceClient, path: &str, body: &Value) -> Result<Value, String> {
    let resp = client
        .send_raw("POST", path, Some(body.to_string().as_bytes()), &[])
        .map_err(|e| e.to_string())?;
    if resp.status != 200 {
        return Err(format!("{path}: {} {}", resp.status, resp.text()));
    }
    resp.json().map_err(|e| e.to_string())
}

fn api_code(err: ClientError) -> String {
    err.code().unwrap_or("none").to_string()
}

#[test]
fn full_workflow_add_reindex_query_expand() {
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(canopy_bin!(), data.path(), &Opts::default());
    let client = server.client();
    let repo = Repo::small();

    let added = client.add_repo(&repo.root(), Some("demo")).unwrap();
    assert!(added.created);
    assert_eq!(added.name, "demo");
    // Registering the same path again returns the same id.
    let again = client.add_repo(&repo.root(), None).unwrap();
    assert_eq!(
        (again.repo_id.as_str(), again.created),
        (added.repo_id.as_str(), false)
    );
    let id = added.repo_id;

    let started = client.reindex(&id, None).unwrap();
    assert_eq!(started.status, "indexing");
    assert_eq!(started.generation, 0);
    assert_eq!(started.commit_sha.as_deref().map(str::len), Some(40));
    let view = client.wait_until_idle(&id, WAIT).unwrap();
    assert!(view.ready);
    assert_eq!(view.status, "ready");
    assert_eq!(view.generation, 1);
    assert_eq!(view.commit_sha, started.commit_sha);
    assert!(view.last_index.as_ref().unwrap().files_indexed >= 3);

    // The name works wherever an id does.
    let result = query_json(&client, "demo", &symbol("authenticate")).unwrap();
    let handles = result["handles"].as_array().unwrap();
    assert!(!handles.is_empty(), "{result}");
    for h in handles {
        assert_eq!(h["source"], "service");
        assert_eq!(h["generation"], 1);
        assert_eq!(h["commit_sha"].as_str(), started.commit_sha.as_deref());
    }
    assert_eq!(result["generation"], 1);
    // The typed client reads the same answer and writes it back to the byte.
    let typed = client.query("demo", &symbol("authenticate")).unwrap();
    assert_eq!(typed.at.generation, 1);
    assert_eq!(serde_json::to_value(&typed).unwrap(), result);
    let handle = &handles[0];
    assert_eq!(handle["file_path"], "src/auth.rs");

    let expanded = client
        .expand(&id, &[(handle["id"].as_str().unwrap(), Some(1))])
        .unwrap();
    assert_eq!(expanded.generation, 1);
    assert_eq!(expanded.contents.len(), 1);
    assert!(expanded.contents[0].content.contains("fn authenticate"));
    assert!(expanded.total_tokens > 0);

    // References carry the service fields too.
    let refs = query_json(
        &client,
        &id,
        &QueryParams {
            symbol: Some("authenticate".into()),
            kind: Some(canopy_core::query::QueryKind::Reference),
            ..QueryParams::default()
        },
    )
    .unwrap();
    let ref_handles = refs["ref_handles"].as_array().unwrap();
    assert!(!ref_handles.is_empty(), "{refs}");
    assert_eq!(ref_handles[0]["generation"], 1);

    // Evidence pack with a session header; the session's memory lowers novelty.
    let session_client = server.client().with_session(Some("agent-1".into()));
    let params = PackParams {
        query: QueryParams {
            pattern: Some("authenticate token".into()),
            ..QueryParams::default()
        },
        ..PackParams::default()
    };
    let pack = pack_json(&session_client, &id, &params);
    assert_eq!(pack["session"], "agent-1");
    assert!(pack["guidance"]["recommended_action"].is_string());
    let pack_handles = pack["handles"].as_array().unwrap();
    assert!(!pack_handles.is_empty());
    assert_eq!(pack_handles[0]["source"], "service");
    assert_eq!(pack_handles[0]["generation"], 1);
    // A method of the fixture (Repo::small has AuthController.validate and
    // a free `authenticate`; there is no AuthController.authenticate).
    canopy_test_support::assert_handles_name_what_they_hold(
        &pack["handles"],
        "AuthController.validate",
    );
    assert_eq!(pack["novelty"], 1.0);
    let again = pack_json(&session_client, &id, &params);
    assert!(again["novelty"].as_f64().unwrap() < 1.0, "{again}");
    // The session may also be given in the body.
    let body = json!({"repo": id, "session": "agent-2", "pattern": "authenticate"});
    let resp = post(&client, "/evidence_pack", &body);
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(resp.json().unwrap()["session"], "agent-2");

    // Bare ids are accepted by /expand (no staleness check).
    let resp = post(
        &client,
        "/expand",
        &json!({"repo": id, "handles": [handle["id"]]}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());

    let repos = client.repos().unwrap();
    assert_eq!(repos.len(), 1);
    assert_eq!(repos[0].repo_id, id);
    let status = client.status(None).unwrap();
    assert_eq!(status.service, "canopy-service");
    let index = status.repos[0].index.as_ref().unwrap();
    assert!(index.files_indexed >= 3);
}

#[test]
fn generation_bumps_only_when_the_index_changes() {
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(canopy_bin!(), data.path(), &Opts::default());
    let client = server.client();
    let repo = Repo::small();
    let id = add_and_index(&client, &repo);

    let result = query_json(&client, &id, &symbol("validate")).unwrap();
    let old_id = result["handles"][0]["id"].as_str().unwrap().to_string();
    assert_eq!(result["handles"][0]["generation"], 1);

    // A no-op reindex keeps the generation: handles stay valid.
    let r = client.reindex(&id, None).unwrap();
    assert_eq!(r.status, "indexing");
    let view = client.wait_until_idle(&id, WAIT).unwrap();
    assert_eq!(view.generation, 1);
    assert_eq!(view.last_index.as_ref().unwrap().files_indexed, 0);
    client.expand(&id, &[(&old_id, Some(1))]).unwrap();

    // A content change bumps it: the old generation is refused with 409.
    repo.write(
        "src/extra.rs",
        "pub fn brand_new_function() -> u32 {\n    42\n}\n",
    );
    repo.commit("extra");
    client.reindex(&id, None).unwrap();
    let view = client.wait_until_idle(&id, WAIT).unwrap();
    assert_eq!(view.generation, 2);
    let err = client.expand(&id, &[(&old_id, Some(1))]).unwrap_err();
    assert_eq!(api_code(err), "stale_generation");
    let resp = post(
        &client,
        "/expand",
        &json!({"repo": id, "handles": [{"id": old_id, "generation": 1}]}),
    );
    assert_error(&resp, 409, "stale_generation");
    // A generation from the future was never issued: 400, not 409.
    let resp = post(
        &client,
        "/expand",
        &json!({"repo": id, "handles": [{"id": old_id, "generation": 7}]}),
    );
    assert_error(&resp, 400, "validation_error");
    // Re-querying gives generation-2 handles that expand fine.
    let result = query_json(&client, &id, &symbol("brand_new_function")).unwrap();
    let h = &result["handles"][0];
    assert_eq!(h["generation"], 2);
    assert_ne!(h["commit_sha"], Value::Null);
    assert_eq!(h["commit_sha"].as_str(), view.commit_sha.as_deref());
    client
        .expand(&id, &[(h["id"].as_str().unwrap(), Some(2))])
        .unwrap();

    // Removing a file also changes the index.
    std::fs::remove_file(repo.dir.path().join("src/extra.rs")).unwrap();
    repo.commit("remove");
    client.reindex(&id, None).unwrap();
    let view = client.wait_until_idle(&id, WAIT).unwrap();
    assert_eq!(view.generation, 3);
    assert_eq!(view.last_index.as_ref().unwrap().files_removed, 1);

    // A glob reindex only looks at matching files.
    repo.write("README.md", "# Demo\n\n## Usage\n\nNew text.\n");
    repo.write("src/main.rs", "fn main() {}\n");
    client.reindex(&id, Some("*.md")).unwrap();
    let view = client.wait_until_idle(&id, WAIT).unwrap();
    assert_eq!(view.generation, 4);
    assert_eq!(view.last_index.as_ref().unwrap().files_indexed, 1);
}

#[test]
fn not_ready_and_coalesced_reindex() {
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(canopy_bin!(), data.path(), &Opts::default());
    let client = server.client();
    let repo = Repo::large(1500);
    let id = client.add_repo(&repo.root(), None).unwrap().repo_id;

    // No generation yet: 503 not_ready at once, with a retry hint.
    let resp = post(
        &client,
        "/query",
        &json!({"repo": id, "pattern": "handler"}),
    );
    assert_error(&resp, 503, "not_ready");
    assert_eq!(resp.header("retry-after"), Some("2"));
    let resp = post(
        &client,
        "/expand",
        &json!({"repo": id, "handles": ["h000000000000000000000000"]}),
    );
    assert_error(&resp, 503, "not_ready");

    let first = client.reindex(&id, None).unwrap();
    assert_eq!(first.status, "indexing");
    // A request during the run is coalesced (the run takes far longer than a
    // round trip; should it already be over, the next run is the one to join).
    let mut coalesced = None;
    for _ in 0..20 {
        let r = client.reindex(&id, None).unwrap();
        if r.status == "already_indexing" {
            coalesced = Some(r);
            break;
        }
    }
    let coalesced = coalesced.expect("a reindex request was coalesced");
    assert!(coalesced.rerun_queued);
    // While the first run is going, queries still answer at once.
    let resp = post(
        &client,
        "/query",
        &json!({"repo": id, "pattern": "handler"}),
    );
    assert!(resp.status == 503 || resp.status == 200, "{}", resp.text());

    let view = client.wait_until_idle(&id, WAIT).unwrap();
    assert!(view.ready);
    // First completed run → 1; the queued follow-up found nothing new → still 1.
    assert_eq!(view.generation, 1, "{view:?}");
    assert!(!view.rerun_queued);

    let events = client.events(0, Some(1000), None).unwrap();
    let kinds: Vec<&str> = events
        .items
        .iter()
        .filter(|e| e.repo_id.as_deref() == Some(id.as_str()))
        .map(|e| e.kind.as_str())
        .collect();
    let count = |k: &str| kinds.iter().filter(|x| **x == k).count();
    assert!(count("reindex_started") >= 2, "{kinds:?}");
    assert_eq!(
        count("reindex_started"),
        count("reindex_finished"),
        "{kinds:?}"
    );
    assert_eq!(count("generation_bumped"), 1, "{kinds:?}");
    let metrics = client.metrics().unwrap();
    assert!(
        !metrics.contains("canopy_reindex_coalesced_total 0\n"),
        "{metrics}"
    );
}

#[test]
fn one_hundred_concurrent_queries_during_a_reindex() {
    const FILES: usize = 1500;
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(canopy_bin!(), data.path(), &Opts::default());
    let client = server.client();
    let repo = Repo::large(FILES);
    let id = add_and_index(&client, &repo);

    repo.rewrite_large(FILES, 1);
    let r = client.reindex(&id, None).unwrap();
    assert_eq!(r.status, "indexing");
    let threads: Vec<_> = (0..100)
        .map(|i| {
            let client = server.client();
            let id = id.clone();
            std::thread::spawn(move || -> Result<(u64, bool), String> {
                let params = QueryParams {
                    pattern: Some("shared_marker".into()),
                    glob: (i % 2 == 0).then(|| format!("src/m{}/**", i % 20)),
                    limit: Some(10),
                    ..QueryParams::default()
                };
                let result = query_json(&client, &id, &params)?;
                let handles = result["handles"].as_array().ok_or("no handles array")?;
                if handles.is_empty() || result["total_matches"].as_u64().unwrap_or(0) == 0 {
                    return Err(format!("empty result: {result}"));
                }
                let generation = result["generation"].as_u64().ok_or("no generation")?;
                for h in handles {
                    let complete = h["source"] == "service"
                        && h["generation"].as_u64() == Some(generation)
                        && h["commit_sha"].is_string()
                        && h["id"].as_str().is_some_and(|s| s.len() == 25)
                        && h["file_path"].is_string()
                        && h["token_count"].is_u64();
                    if !complete {
                        return Err(format!("partial handle: {h}"));
                    }
                }
                let indexing = client
                    .status(Some(&id))
                    .map(|s| s.repos[0].repo.indexing)
                    .unwrap_or(false);
                Ok((generation, indexing))
            })
        })
        .collect();
    let mut failures = Vec::new();
    let mut generations = HashSet::new();
    let mut overlapped = 0;
    for t in threads {
        match t.join().expect("thread") {
            Ok((generation, indexing)) => {
                generations.insert(generation);
                overlapped += usize::from(indexing);
            }
            Err(e) => failures.push(e),
        }
    }
    assert!(
        failures.is_empty(),
        "{} failed: {:?}",
        failures.len(),
        &failures[..failures.len().min(3)]
    );
    // Informational (no timing assertion): how many answers overlapped the run.
    eprintln!("{overlapped} of 100 queries finished while the reindex was running");
    let view = client.wait_until_idle(&id, WAIT).unwrap();
    // A generation names one state (issue 32, N2): 1 before the run; each
    // state of the run a query read gets one of its own, given densely
    // (2, 3, …) and only to answers; the completed run is one above them.
    let last = view.generation;
    assert!(last >= 2, "{view:?}");
    assert!(
        generations.iter().all(|g| (1..=last).contains(g)),
        "{generations:?} (last {last})"
    );
    let during: BTreeSet<u64> = generations
        .iter()
        .copied()
        .filter(|g| *g != 1 && *g != last)
        .collect();
    assert_eq!(
        during,
        (2..last).collect::<BTreeSet<u64>>(),
        "every generation given during the run names a state an answer read (last {last})"
    );
    assert_eq!(
        view.last_index.as_ref().unwrap().files_indexed,
        FILES as u64
    );
}

#[test]
fn state_survives_a_restart() {
    let data = tempfile::tempdir().unwrap();
    let repo = Repo::small();
    let server = Server::start(canopy_bin!(), data.path(), &Opts::default());
    let client = server.client();
    let id = add_and_index(&client, &repo);
    let before = client.repos().unwrap().remove(0);
    let handle = query_json(&client, &id, &symbol("authenticate")).unwrap()["handles"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let events_before = client.events(0, Some(1000), None).unwrap();
    // The data directory belongs to one service at a time.
    let (ok, stderr) = serve_exits(canopy_bin!(), data.path(), &["--bind", "127.0.0.1:0"]);
    assert!(!ok);
    assert!(stderr.contains("another canopy serve"), "{stderr}");
    server.kill();

    let server = Server::start(canopy_bin!(), data.path(), &Opts::default());
    let client = server.client();
    let after = client.repos().unwrap().remove(0);
    assert_eq!(after.repo_id, before.repo_id);
    assert_eq!(after.name, before.name);
    assert_eq!(after.repo_root, before.repo_root);
    assert_eq!(after.generation, 1);
    assert_eq!(after.commit_sha, before.commit_sha);
    assert_eq!(after.status, "ready");
    assert_eq!(
        after.last_index.as_ref().map(|r| r.files_indexed),
        before.last_index.as_ref().map(|r| r.files_indexed)
    );
    // Served at once, and handles from before the restart are still current.
    let expanded = client.expand(&id, &[(&handle, Some(1))]).unwrap();
    assert!(expanded.contents[0].content.contains("authenticate"));
    // The event feed is durable: same items, same sequence numbers, then new ones.
    let events_after = client.events(0, Some(1000), None).unwrap();
    assert_eq!(
        &events_after.items[..events_before.items.len()],
        &events_before.items[..]
    );
    let tail = client
        .events(events_before.next_after_seq, None, None)
        .unwrap();
    assert_eq!(tail.items[0].kind, "service_started");
    assert!(tail.items[0].seq > events_before.next_after_seq);
    drop(server);

    // A run killed half-way is resumed on restart and bumps the generation.
    let big = Repo::large(1500);
    let server = Server::start(canopy_bin!(), data.path(), &Opts::default());
    let client = server.client();
    let big_id = add_and_index(&client, &big);
    big.rewrite_large(1500, 1);
    client.reindex(&big_id, None).unwrap();
    let was_indexing = client.status(Some(&big_id)).unwrap().repos[0].repo.indexing;
    server.kill();
    let server = Server::start(canopy_bin!(), data.path(), &Opts::default());
    let client = server.client();
    let view = client.wait_until_idle(&big_id, WAIT).unwrap();
    let events = client.events(0, Some(1000), Some(0)).unwrap();
    let interrupted = events
        .items
        .iter()
        .any(|e| e.kind == "reindex_interrupted" && e.repo_id.as_deref() == Some(big_id.as_str()));
    if was_indexing && interrupted {
        assert_eq!(view.generation, 2, "{view:?}");
        assert_eq!(view.status, "ready");
    }
    // The small repo is untouched by all this.
    let small = client.status(Some(&id)).unwrap().repos.remove(0).repo;
    assert_eq!(small.generation, 1);
}

#[test]
fn every_error_has_code_message_and_hint() {
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(canopy_bin!(), data.path(), &Opts::default());
    let client = server.client();
    let repo = Repo::small();
    let id = add_and_index(&client, &repo);

    // 400
    let resp = client
        .send_raw("POST", "/query", Some(b"{not json"), &[])
        .unwrap();
    assert_error(&resp, 400, "invalid_json");
    assert_error(
        &post(&client, "/query", &json!({"pattern": "x"})),
        400,
        "validation_error",
    );
    assert_error(
        &post(&client, "/query", &json!({"repo": id})),
        400,
        "validation_error",
    );
    assert_error(
        &post(
            &client,
            "/query",
            &json!({"repo": id, "pattern": "x", "limit": "many"}),
        ),
        400,
        "validation_error",
    );
    assert_error(
        &post(
            &client,
            "/query",
            &json!({"repo": id, "query": "(grep \"x\""}),
        ),
        400,
        "query_parse_error",
    );
    assert_error(
        &post(
            &client,
            "/query",
            &json!({"repo": id, "pattern": "x", "glob": "../**"}),
        ),
        400,
        "path_outside_repo",
    );
    assert_error(
        &post(
            &client,
            "/query",
            &json!({"repo": id, "pattern": "x", "glob": "src/[.rs"}),
        ),
        400,
        "invalid_glob",
    );
    assert_error(
        &post(&client, "/expand", &json!({"repo": id, "handles": []})),
        400,
        "validation_error",
    );
    let many: Vec<String> = (0..101).map(|i| format!("h{i:024x}")).collect();
    assert_error(
        &post(&client, "/expand", &json!({"repo": id, "handles": many})),
        400,
        "validation_error",
    );
    assert_error(
        &post(
            &client,
            "/evidence_pack",
            &json!({"repo": id, "pattern": "x", "session": "bad session"}),
        ),
        400,
        "validation_error",
    );
    assert_error(
        &get(&client, "/events?after_seq=abc"),
        400,
        "validation_error",
    );
    // Above the schema's maximum wait: refused, not silently clamped.
    assert_error(
        &get(&client, "/events?after_seq=0&wait=61"),
        400,
        "validation_error",
    );
    let plain = tempfile::tempdir().unwrap();
    assert_error(
        &post(&client, "/repos/add", &json!({"path": plain.path()})),
        400,
        "not_a_git_repository",
    );
    assert_error(
        &post(&client, "/repos/add", &json!({"path": "relative/path"})),
        400,
        "validation_error",
    );
    assert_error(
        &post(
            &client,
            "/repos/add",
            &json!({"path": std::env::temp_dir().join("definitely/not/here")}),
        ),
        400,
        "validation_error",
    );
    // Outside the served directory, a missing path is not even looked up.
    assert_error(
        &post(
            &client,
            "/repos/add",
            &json!({"path": "/definitely/not/here"}),
        ),
        403,
        "path_not_allowed",
    );
    let other = Repo::small();
    assert_error(
        &post(
            &client,
            "/repos/add",
            &json!({"path": other.root(), "name": "../x"}),
        ),
        400,
        "validation_error",
    );
    assert_error(
        &post(&client, "/reindex", &json!({"repo": id, "glob": "/etc/**"})),
        400,
        "path_outside_repo",
    );

    // 403: browser-style cross-site requests, whatever the credentials. A
    // local origin is no exception unless --allow-origin names it.
    for origin in ["http://evil.example", "http://localhost:5173"] {
        let resp = client
            .send_raw("GET", "/repos", None, &[("Origin", origin)])
            .unwrap();
        assert_error(&resp, 403, "forbidden_origin");
    }

    // 404
    assert_error(
        &post(&client, "/query", &json!({"repo": "nope", "pattern": "x"})),
        404,
        "not_found",
    );
    assert_error(&get(&client, "/no/such/route"), 404, "not_found");
    assert_error(&get(&client, "/status?repo=nope"), 404, "not_found");
    assert_error(
        &post(
            &client,
            "/expand",
            &json!({"repo": id, "handles": [{"id": "h000000000000000000000000", "generation": 1}]}),
        ),
        404,
        "not_found",
    );
    // 405
    assert_error(&get(&client, "/query"), 405, "method_not_allowed");
    // 409
    let added = post(
        &client,
        "/repos/add",
        &json!({"path": other.root(), "name": "taken"}),
    );
    assert_eq!(added.status, 200);
    let third = Repo::small();
    assert_error(
        &post(
            &client,
            "/repos/add",
            &json!({"path": third.root(), "name": "taken"}),
        ),
        409,
        "name_taken",
    );
    let h = query_json(&client, &id, &symbol("authenticate")).unwrap()["handles"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    // Generation 7 was never issued (the current one is 1): a client bug,
    // 400 (issue 15 item 8); an older generation is the 409 case.
    assert_error(
        &post(
            &client,
            "/expand",
            &json!({"repo": id, "handles": [{"id": h, "generation": 7}]}),
        ),
        400,
        "validation_error",
    );
    assert_error(
        &post(
            &client,
            "/expand",
            &json!({"repo": id, "handles": [{"id": h, "generation": 0}]}),
        ),
        409,
        "stale_generation",
    );
    // The file changed on disk but was not reindexed: the core refuses to serve mismatching text.
    repo.write("src/auth.rs", "pub fn authenticate() {}\n");
    assert_error(
        &post(
            &client,
            "/expand",
            &json!({"repo": id, "handles": [{"id": h, "generation": 1}]}),
        ),
        409,
        "stale_index",
    );
    // 503
    let fresh = Repo::small();
    let fresh_id = client.add_repo(&fresh.root(), None).unwrap().repo_id;
    assert_error(
        &post(
            &client,
            "/evidence_pack",
            &json!({"repo": fresh_id, "pattern": "x"}),
        ),
        503,
        "not_ready",
    );
}

/// A misspelt or unsupported field is a 400 naming it, on every body —
/// including those whose parameters are flattened into them (`/query`,
/// `/evidence_pack`, `/graph`), where serde alone would ignore it.
#[test]
fn unknown_fields_are_rejected_by_name() {
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(canopy_bin!(), data.path(), &Opts::default());
    let client = server.client();
    let repo = Repo::small();
    let id = add_and_index(&client, &repo);
    let cases = [
        (
            "/query",
            json!({"repo": id, "pattern": "authenticate", "limt": 3}),
            "limt",
        ),
        (
            "/evidence_pack",
            json!({"repo": id, "pattern": "authenticate", "max_handle": 2}),
            "max_handle",
        ),
        (
            "/graph",
            json!({"repo": id, "op": "callers", "target": "authenticate", "dpth": 2}),
            "dpth",
        ),
        (
            "/context",
            json!({"repo": id, "task": "validate tokens", "budget": 500}),
            "budget",
        ),
        (
            "/expand",
            json!({"repo": id, "handles": [], "sesion": "s"}),
            "sesion",
        ),
        (
            "/reindex",
            json!({"repo": id, "rebuild_all": true}),
            "rebuild_all",
        ),
        (
            "/repos/add",
            json!({"path": repo.root(), "watched": true}),
            "watched",
        ),
    ];
    for (path, body, field) in cases {
        let resp = post(&client, path, &body);
        assert_error(&resp, 400, "validation_error");
        let message = resp.json().unwrap()["message"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(message.contains(field), "{path}: {message}");
    }
    // The same bodies without the stray field are answered.
    let ok = post(
        &client,
        "/query",
        &json!({"repo": id, "pattern": "authenticate", "limit": 3}),
    );
    assert_eq!(ok.status, 200, "{}", ok.text());
    let ok = post(
        &client,
        "/graph",
        &json!({"repo": id, "op": "callers", "target": "authenticate", "depth": 2}),
    );
    assert_eq!(ok.status, 200, "{}", ok.text());
    let ok = post(
        &client,
        "/evidence_pack",
        &json!({"repo": id, "pattern": "authenticate", "max_handles": 2, "match": "any"}),
    );
    assert_eq!(ok.status, 200, "{}", ok.text());
}

/// Graph answers longer than `max_results` are paged over HTTP as
/// through MCP and the CLI: `next_offset` passed back as `offset` lists
/// the rest, and an operation that does not page says so (400).
#[test]
fn graph_answers_are_paged_with_offset_over_http() {
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(canopy_bin!(), data.path(), &Opts::default());
    let client = server.client();
    let mut source = String::from("def target():\n    return 1\n");
    for i in 0..5 {
        source.push_str(&format!("\n\ndef caller_{i}():\n    return target()\n"));
    }
    let repo = Repo::with_files(&[("m.py", &source)]);
    let id = add_and_index(&client, &repo);
    let mut names = Vec::new();
    let mut offset = 0u64;
    for expected_next in [Some(2u64), Some(4), None] {
        let body = json!({"repo": id, "op": "callers", "target": "target", "max_results": 2, "offset": offset});
        let page = post_json(&client, "/graph", &body).expect("page");
        assert_eq!(page["total"], 5, "{page}");
        assert_eq!(page["next_offset"].as_u64(), expected_next, "{page}");
        assert_eq!(page["truncated"], expected_next.is_some(), "{page}");
        for n in page["nodes"].as_array().expect("nodes") {
            names.push(n["qualified_name"].as_str().unwrap_or_default().to_string());
        }
        offset = expected_next.unwrap_or(offset);
    }
    names.sort();
    assert_eq!(
        names,
        (0..5).map(|i| format!("caller_{i}")).collect::<Vec<_>>()
    );
    let resp = post(
        &client,
        "/graph",
        &json!({"repo": id, "op": "impact", "target": "target", "offset": 1}),
    );
    assert_error(&resp, 400, "validation_error");
    let message = resp.json().unwrap()["message"].to_string();
    assert!(message.contains("`offset` pages callers"), "{message}");
}

/// Issue 32 N8: a served answer names one generation — its freshness block
/// says the service's generation, the one its handles carry and `/expand`
/// checks, not the index file's own counter.
#[test]
fn a_served_answer_names_one_generation() {
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(canopy_bin!(), data.path(), &Opts::default());
    let client = server.client();
    let repo = Repo::small();
    let id = add_and_index(&client, &repo);
    for (path, body) in [
        ("/query", json!({"repo": id, "pattern": "authenticate"})),
        (
            "/evidence_pack",
            json!({"repo": id, "pattern": "authenticate token"}),
        ),
        (
            "/context",
            json!({"repo": id, "task": "validate tokens", "budget_tokens": 800}),
        ),
    ] {
        let resp = post(&client, path, &body);
        assert_eq!(resp.status, 200, "{path}: {}", resp.text());
        let answer = resp.json().unwrap();
        assert!(
            answer["generation"].as_u64().is_some_and(|g| g > 0),
            "{path}: {answer}"
        );
        assert_eq!(
            answer["freshness"]["generation"], answer["generation"],
            "{path}: {answer}"
        );
    }
}

#[test]
fn oversized_bodies_get_413() {
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(
        canopy_bin!(),
        data.path(),
        &Opts {
            max_body_bytes: Some(1024),
            ..Opts::default()
        },
    );
    let client = server.client();
    let big = json!({"repo": "x", "pattern": "a".repeat(4096)});
    assert_error(&post(&client, "/query", &big), 413, "payload_too_large");
    // Under the limit the same endpoint answers normally.
    assert_error(
        &post(&client, "/query", &json!({"repo": "x", "pattern": "a"})),
        404,
        "not_found",
    );
}

#[test]
fn authentication_with_and_without_a_token() {
    let data = tempfile::tempdir().unwrap();
    let token = "s3cret-token-for-tests";
    let server = Server::start(
        canopy_bin!(),
        data.path(),
        &Opts {
            token: Some(token.into()),
            ..Opts::default()
        },
    );
    let anon = server.anonymous();
    let client = server.client();

    // /health is open, but without credentials it gives no details.
    let health = anon.health().unwrap();
    assert_eq!(health.status, "healthy");
    assert!(health.repos.is_none());
    assert!(client.health().unwrap().repos.is_some());

    for (method, path) in canopy_service::routes() {
        if path == "/health" {
            continue;
        }
        let body = (method == "POST").then_some(&b"{}"[..]);
        let resp = anon.send_raw(method, path, body, &[]).unwrap();
        assert_error(&resp, 401, "unauthorized");
        assert!(resp.header("www-authenticate").is_some());
        let resp = anon
            .send_raw(
                method,
                path,
                body,
                &[("Authorization", "Bearer wrong-token-value")],
            )
            .unwrap();
        assert_error(&resp, 403, "forbidden");
    }
    let resp = anon
        .send_raw("GET", "/repos", None, &[("Authorization", "Basic abc")])
        .unwrap();
    assert_error(&resp, 401, "unauthorized");
    assert!(client.repos().unwrap().is_empty());
    let repo = Repo::small();
    let id = add_and_index(&client, &repo);
    assert!(client.query(&id, &symbol("authenticate")).is_ok());
    // With a token the Host does not matter, but a browser Origin still does.
    let resp = client
        .send_raw("GET", "/repos", None, &[("Host", "canopy.example:3000")])
        .unwrap();
    assert_eq!(resp.status, 200, "{}", resp.text());
    let resp = client
        .send_raw(
            "GET",
            "/repos",
            None,
            &[("Origin", "http://elsewhere.example")],
        )
        .unwrap();
    assert_error(&resp, 403, "forbidden_origin");
    drop(server);

    // Without --token a token is generated: stored owner-only in the data
    // directory, printed once, reused on the next start.
    let server = Server::start(canopy_bin!(), data.path(), &Opts::default());
    let generated = server.admin_token().expect("a token was generated");
    assert!(
        server.log().contains(&generated),
        "the new token is shown once:\n{}",
        server.log()
    );
    assert_error(
        &server
            .anonymous()
            .send_raw("GET", "/repos", None, &[])
            .unwrap(),
        401,
        "unauthorized",
    );
    assert_eq!(server.client().repos().unwrap().len(), 1);
    drop(server);
    let server = Server::start(canopy_bin!(), data.path(), &Opts::default());
    assert_eq!(server.admin_token().as_deref(), Some(generated.as_str()));
    assert!(
        !server.log().contains(&generated),
        "a stored token is not printed again:\n{}",
        server.log()
    );
    assert_eq!(server.client().repos().unwrap().len(), 1);
    drop(server);

    // --no-auth opts out: every endpoint is open to local clients, which
    // must then name a loopback Host (no DNS rebinding).
    let no_auth = Opts {
        extra: vec!["--no-auth".into()],
        ..Opts::default()
    };
    let server = Server::start(canopy_bin!(), data.path(), &no_auth);
    let anon = server.anonymous();
    assert_eq!(anon.repos().unwrap().len(), 1);
    let resp = anon
        .send_raw("GET", "/repos", None, &[("Host", "evil.example:3000")])
        .unwrap();
    assert_error(&resp, 403, "forbidden_origin");
    // Every Host header is checked, not only the first.
    let resp = anon
        .send_raw(
            "GET",
            "/repos",
            None,
            &[("Host", "127.0.0.1"), ("Host", "attacker.example")],
        )
        .unwrap();
    assert_error(&resp, 403, "forbidden_origin");
    let resp = anon
        .send_raw(
            "GET",
            "/repos",
            None,
            &[("Origin", "http://localhost:5173")],
        )
        .unwrap();
    assert_error(&resp, 403, "forbidden_origin");
    drop(server);

    // A non-loopback bind without authentication refuses to start.
    let (ok, stderr) = serve_exits(
        canopy_bin!(),
        data.path(),
        &["--no-auth", "--bind", "0.0.0.0:0"],
    );
    assert!(!ok);
    assert!(stderr.contains("refusing to listen"), "{stderr}");
    assert!(stderr.contains("--token"), "{stderr}");
}

/// Rebuilds are admin operations: the agent token queries and re-indexes
/// but cannot rebuild; an origin is allowed only by name.
#[test]
fn the_agent_token_cannot_rebuild_and_origins_are_allowed_by_name() {
    let data = tempfile::tempdir().unwrap();
    let agent_token = "agent-token-for-tests";
    let server = Server::start(
        canopy_bin!(),
        data.path(),
        &Opts {
            extra: vec![
                "--agent-token".into(),
                agent_token.into(),
                "--allow-origin".into(),
                "http://localhost:5173".into(),
            ],
            ..Opts::default()
        },
    );
    let admin = server.client();
    let repo = Repo::small();
    let id = add_and_index(&admin, &repo);
    let agent = server.client_with(agent_token);
    assert!(agent.query(&id, &symbol("authenticate")).is_ok());
    let resp = post(&agent, "/reindex", &json!({"repo": id}));
    assert_eq!(resp.status, 200, "{}", resp.text());
    admin.wait_until_idle(&id, WAIT).unwrap();
    assert_error(
        &post(&agent, "/reindex", &json!({"repo": id, "rebuild": true})),
        403,
        "admin_required",
    );
    let resp = post(&admin, "/reindex", &json!({"repo": id, "rebuild": true}));
    assert_eq!(resp.status, 200, "{}", resp.text());
    admin.wait_until_idle(&id, WAIT).unwrap();
    // An allowed origin passes (with credentials); another is refused.
    let resp = agent
        .send_raw(
            "GET",
            "/repos",
            None,
            &[("Origin", "http://localhost:5173/")],
        )
        .unwrap();
    assert_eq!(resp.status, 200, "{}", resp.text());
    let resp = agent
        .send_raw(
            "GET",
            "/repos",
            None,
            &[("Origin", "http://localhost:5174")],
        )
        .unwrap();
    assert_error(&resp, 403, "forbidden_origin");
    // Without credentials an allowed origin is still not enough.
    let resp = server
        .anonymous()
        .send_raw(
            "GET",
            "/repos",
            None,
            &[("Origin", "http://localhost:5173")],
        )
        .unwrap();
    assert_error(&resp, 401, "unauthorized");
}

/// `canopy serve --watch` watches repositories registered after start-up
/// too (issue 32, N1).
#[test]
fn serve_watch_watches_repositories_added_later() {
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(
        canopy_bin!(),
        data.path(),
        &Opts {
            extra: vec!["--watch".into()],
            ..Opts::default()
        },
    );
    let client = server.client();
    let repo = Repo::small();
    let id = add_and_index(&client, &repo);
    assert!(
        client
            .repos()
            .unwrap()
            .iter()
            .any(|v| v.repo_id == id && v.watch),
        "a repository added to a --watch service is watched"
    );
    repo.write("src/later.rs", "pub fn added_after_start() -> u8 { 3 }\n");
    eventually("the edit is indexed without POST /reindex", || {
        finds(&client, &id, "added_after_start", "src/later.rs")
    });
}

/// `GET`/`POST /repos/{id}/settings`: read, change (by id or name), refuse
/// unknown keys and bad values with nothing changed, take effect at once
/// (a watched repository re-indexes on an edit) and survive a restart.
#[test]
fn repository_settings_are_read_changed_validated_and_kept() {
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(canopy_bin!(), data.path(), &Opts::default());
    let client = server.client();
    let repo = Repo::small();
    let id = add_and_index(&client, &repo);
    let path = format!("/repos/{id}/settings");

    let resp = get(&client, &path);
    assert_eq!(resp.status, 200, "{}", resp.text());
    let settings = resp.json().unwrap();
    assert_eq!(settings["repo_id"], id.as_str());
    assert_eq!(
        (&settings["watch"], &settings["watched"]),
        (&json!(false), &json!(false))
    );

    // Refused, and nothing changes: unknown key, wrong type, not an object,
    // not JSON, an unknown repository.
    assert_settings_refusals(&client, &path);
    assert!(!client.repos().unwrap()[0].watch);

    // Changed by name; `GET /repos` and the settings agree.
    let name = client.repos().unwrap()[0].name.clone();
    let resp = post(
        &client,
        &format!("/repos/{name}/settings"),
        &json!({"watch": true}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(resp.json().unwrap()["watch"], true);
    assert_eq!(get(&client, &path).json().unwrap()["watched"], true);
    assert!(client.repos().unwrap()[0].watch);
    repo.write("src/later.rs", "pub fn set_over_http() -> u8 { 3 }\n");
    eventually("the edit is indexed without POST /reindex", || {
        finds(&client, &id, "set_over_http", "src/later.rs")
    });
    // An empty change changes nothing.
    let resp = post(&client, &path, &json!({}));
    assert_eq!(resp.json().unwrap()["watch"], true, "{}", resp.text());
    server.kill();

    let server = Server::start(canopy_bin!(), data.path(), &Opts::default());
    let client = server.client();
    assert_eq!(get(&client, &path).json().unwrap()["watch"], true);
    let resp = post(&client, &path, &json!({"watch": false}));
    assert_eq!(resp.json().unwrap()["watched"], false, "{}", resp.text());
    assert!(!client.repos().unwrap()[0].watch);
}

#[test]
fn allow_root_restricts_registration() {
    let allowed = tempfile::tempdir().unwrap();
    let outside = Repo::small();
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(
        canopy_bin!(),
        data.path(),
        &Opts {
            allow_roots: vec![allowed.path().to_path_buf()],
            ..Opts::default()
        },
    );
    let client = server.client();

    // A repository inside the allowed root.
    let inside = allowed.path().join("inside");
    std::fs::create_dir_all(&inside).unwrap();
    let status = std::process::Command::new("git")
        .args(["init", "-q"])
        .arg(&inside)
        .status()
        .unwrap();
    assert!(status.success());
    std::fs::write(inside.join("lib.py"), "def hello():\n    return 1\n").unwrap();
    let added = client.add_repo(&inside, None).unwrap();
    client.reindex(&added.repo_id, None).unwrap();
    let view = client.wait_until_idle(&added.repo_id, WAIT).unwrap();
    assert!(view.ready);
    assert_eq!(view.commit_sha, None, "no commits yet");

    // Outside: refused, also through a symlink inside the allowed root and through `..`.
    assert_error(
        &post(&client, "/repos/add", &json!({"path": outside.root()})),
        403,
        "path_not_allowed",
    );
    #[cfg(unix)]
    {
        let link = allowed.path().join("link");
        std::os::unix::fs::symlink(outside.root(), &link).unwrap();
        assert_error(
            &post(&client, "/repos/add", &json!({"path": link})),
            403,
            "path_not_allowed",
        );
    }
    let dotdot = format!("{}/../{}", allowed.path().display(), "x");
    assert_error(
        &post(&client, "/repos/add", &json!({"path": dotdot})),
        403,
        "path_not_allowed",
    );
    // Non-existent paths outside do not reveal whether they exist.
    assert_error(
        &post(
            &client,
            "/repos/add",
            &json!({"path": "/nonexistent/secret"}),
        ),
        403,
        "path_not_allowed",
    );
    assert_eq!(client.repos().unwrap().len(), 1);
}

#[test]
fn by_default_only_repositories_under_the_start_directory_are_served() {
    let home = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(
        canopy_bin!(),
        data.path(),
        &Opts {
            cwd: Some(home.path().to_path_buf()),
            ..Opts::default()
        },
    );
    // Start-up says what is exposed to whom.
    let log = server.log();
    let home_canonical = home.path().canonicalize().unwrap();
    assert!(
        log.contains(&format!(
            "serving git repositories under {}",
            home_canonical.display()
        )),
        "{log}"
    );
    // … and to whom: by default, clients with the generated token.
    assert!(
        log.contains(&format!(
            "clients that send the bearer token stored in {}",
            data.path().join("token").display()
        )),
        "{log}"
    );
    let client = server.client();

    // A repository elsewhere (another temporary directory) is refused …
    let elsewhere = Repo::small();
    assert_error(
        &post(&client, "/repos/add", &json!({"path": elsewhere.root()})),
        403,
        "path_not_allowed",
    );
    // … and a symlink to it under the served directory is refused without
    // saying where the link points.
    #[cfg(unix)]
    {
        let link = home.path().join("link");
        std::os::unix::fs::symlink(elsewhere.root(), &link).unwrap();
        let resp = post(&client, "/repos/add", &json!({"path": link}));
        assert_error(&resp, 403, "path_not_allowed");
        let target = elsewhere.root().canonicalize().unwrap();
        let body = String::from_utf8_lossy(&resp.body).to_string();
        assert!(
            !body.contains(target.to_str().unwrap()),
            "the error reveals the symlink target: {body}"
        );
    }
    // A repository under it is served.
    let inside = home.path().join("project");
    std::fs::create_dir_all(&inside).unwrap();
    let status = std::process::Command::new("git")
        .args(["init", "-q"])
        .arg(&inside)
        .status()
        .unwrap();
    assert!(status.success());
    std::fs::write(inside.join("lib.py"), "def hello():\n    return 1\n").unwrap();
    client.add_repo(&inside, None).unwrap();

    drop(server);

    // Started in the filesystem root without --allow-root, it refuses to start.
    let (ok, stderr) = serve_exits_in(
        canopy_bin!(),
        data.path(),
        Path::new("/"),
        &["--bind", "127.0.0.1:0"],
    );
    assert!(!ok, "serve started in / without --allow-root");
    assert!(stderr.contains("--allow-root"), "{stderr}");
}

#[test]
fn events_cursor_and_long_poll() {
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(canopy_bin!(), data.path(), &Opts::default());
    let client = server.client();
    let repo = Repo::small();

    let first = client.events(0, None, None).unwrap();
    assert_eq!(first.items[0].kind, "service_started");
    let cursor = first.next_after_seq;
    assert_eq!(cursor, first.items.last().unwrap().seq);

    // Nothing new: empty page, the cursor stays; a short wait returns empty too.
    let page = client.events(cursor, None, None).unwrap();
    assert!(page.items.is_empty());
    assert_eq!(page.next_after_seq, cursor);
    let page = client.events(cursor, None, Some(1)).unwrap();
    assert!(page.items.is_empty());

    // A long-poll wakes when something happens.
    let waiter = {
        let client = server.client();
        std::thread::spawn(move || client.events(cursor, None, Some(30)).unwrap())
    };
    let id = client.add_repo(&repo.root(), None).unwrap().repo_id;
    let woke = waiter.join().unwrap();
    assert!(!woke.items.is_empty());
    assert_eq!(woke.items[0].kind, "repo_added");
    assert_eq!(woke.items[0].repo_id.as_deref(), Some(id.as_str()));
    assert_eq!(
        woke.items[0].data["repo_root"],
        repo.root().to_str().unwrap()
    );

    // Follow the feed with the cursor through a reindex.
    client.reindex(&id, None).unwrap();
    let mut cursor = woke.next_after_seq;
    let mut kinds = Vec::new();
    let deadline = std::time::Instant::now() + WAIT;
    while !kinds.contains(&"reindex_finished".to_string()) && std::time::Instant::now() < deadline {
        let page = client.events(cursor, None, Some(10)).unwrap();
        for e in &page.items {
            assert!(e.seq > cursor);
            kinds.push(e.kind.clone());
        }
        cursor = page.next_after_seq;
    }
    // The first run changed files: followers also learn which.
    assert_eq!(
        kinds,
        [
            "reindex_started",
            "reindex_finished",
            "generation_bumped",
            "files_changed"
        ]
    );

    // limit is clamped (0 → 1) and the repo filter applies.
    let page = get(&client, "/events?after_seq=0&limit=0").json().unwrap();
    assert_eq!(page["items"].as_array().unwrap().len(), 1);
    let only = get(&client, &format!("/events?after_seq=0&repo={id}"))
        .json()
        .unwrap();
    let items = only["items"].as_array().unwrap();
    // repo_added, reindex_started, reindex_finished, generation_bumped, files_changed.
    assert_eq!(items.len(), 5);
    assert!(items.iter().all(|e| e["repo_id"] == id.as_str()));
    let finished = items
        .iter()
        .find(|e| e["kind"] == "reindex_finished")
        .unwrap();
    assert_eq!(finished["data"]["generation"], 1);
    assert_eq!(finished["data"]["changed"], true);
}

#[test]
fn metrics_and_health_reflect_the_service() {
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(canopy_bin!(), data.path(), &Opts::default());
    let client = server.client();
    assert_eq!(client.health().unwrap().status, "healthy");

    let repo = Repo::small();
    let id = client.add_repo(&repo.root(), None).unwrap().repo_id;
    let health = client.health().unwrap();
    assert_eq!(health.status, "degraded");
    assert!(health.reasons[0].contains("never indexed"), "{health:?}");
    // Without the token no repository is named, but the status says why.
    let anonymous = server.anonymous().health().unwrap();
    assert_eq!(anonymous.status, "degraded");
    assert!(anonymous.repos.is_none(), "{anonymous:?}");
    assert_eq!(
        anonymous.reasons,
        vec!["1 repository is not healthy (send the token for details)".to_string()]
    );
    client.reindex(&id, None).unwrap();
    client.wait_until_idle(&id, WAIT).unwrap();
    let health = client.health().unwrap();
    assert_eq!(health.status, "healthy", "{health:?}");
    assert_eq!(health.repos.as_ref().unwrap()[0].status, "healthy");

    // Pack, then expand its first suggestion: the acceptance ratio moves.
    let pack = pack_json(
        &client,
        &id,
        &PackParams {
            query: QueryParams {
                pattern: Some("authenticate".into()),
                ..QueryParams::default()
            },
            ..PackParams::default()
        },
    );
    let suggested = pack["expand_suggestion"][0].as_str().unwrap().to_string();
    client.expand(&id, &[(&suggested, Some(1))]).unwrap();
    client.query(&id, &symbol("authenticate")).unwrap();

    let text = client.metrics().unwrap();
    for needle in [
        "canopy_http_requests_total{endpoint=\"/query\",method=\"POST\",status=\"200\"} 1",
        "canopy_http_request_duration_seconds_bucket{endpoint=\"/query\",le=\"+Inf\"} 1",
        "canopy_http_request_duration_seconds_count{endpoint=\"/expand\"} 1",
        "# TYPE canopy_http_request_duration_seconds histogram",
        "canopy_index_duration_seconds_count 1",
        "canopy_expand_requests_total 1",
        "canopy_expand_handles_total 1",
        "canopy_expand_tokens_count 1",
        "canopy_pack_suggestions_expanded_total 1",
        "canopy_repos 1",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in\n{text}");
    }
    let gen_line = format!("canopy_repo_generation{{repo_id=\"{id}\",");
    assert!(
        text.lines()
            .any(|l| l.starts_with(&gen_line) && l.ends_with(" 1")),
        "{text}"
    );
    assert!(text.contains(&format!(
        "canopy_index_runs_total{{repo_id=\"{id}\",outcome=\"success\"}} 1"
    )));
    assert!(text.contains("kind=\"indexed\"} 3"), "{text}");
    let ratio: f64 = text
        .lines()
        .find_map(|l| l.strip_prefix("canopy_expand_acceptance_ratio "))
        .unwrap()
        .parse()
        .unwrap();
    assert!(ratio > 0.0 && ratio <= 1.0);

    // HEAD moved past the served commit: stale → degraded.
    repo.commit("empty");
    let health = client.health().unwrap();
    assert_eq!(health.status, "degraded");
    assert!(health.reasons[0].contains("stale"), "{health:?}");
    // A reindex catches up (no content change: same generation, new commit).
    client.reindex(&id, None).unwrap();
    let view = client.wait_until_idle(&id, WAIT).unwrap();
    assert_eq!(view.generation, 1);
    assert_eq!(client.health().unwrap().status, "healthy");

    // The repository disappears: the reindex fails and the repo is unhealthy (503).
    let path = repo.root();
    drop(repo);
    assert!(!path.exists());
    client.reindex(&id, None).unwrap();
    let view = client.wait_until_idle(&id, WAIT).unwrap();
    assert_eq!(view.status, "failed");
    assert_eq!(
        view.generation, 1,
        "the last good generation is still served"
    );
    assert!(view.last_error.is_some());
    let raw = get(&client, "/health");
    assert_eq!(raw.status, 503);
    let health = raw.json().unwrap();
    assert_eq!(health["status"], "unhealthy");
    let events = client.events(0, Some(1000), None).unwrap();
    assert!(events.items.iter().any(|e| e.kind == "reindex_failed"));
    let text = client.metrics().unwrap();
    assert!(text.contains(&format!(
        "canopy_index_runs_total{{repo_id=\"{id}\",outcome=\"failure\"}} 1"
    )));
    assert!(text.contains(&format!(
        "canopy_repo_consecutive_failures{{repo_id=\"{id}\","
    )));
}

#[test]
fn openapi_documents_every_route() {
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(canopy_bin!(), data.path(), &Opts::default());
    let client = server.client();
    let doc: Value = get(&client, "/openapi.json").json().unwrap();
    assert!(doc["openapi"].as_str().unwrap().starts_with("3."));
    let routes = canopy_service::routes();
    // A path naming a repository is tried with a registered one.
    let repo = Repo::small();
    let id = client.add_repo(&repo.root(), None).unwrap().repo_id;
    for (method, path) in &routes {
        let op = &doc["paths"][path][method.to_ascii_lowercase()];
        assert!(op.is_object(), "{method} {path} is not in openapi.json");
        assert!(
            op["responses"].is_object(),
            "{method} {path} has no responses"
        );
        // The route really answers that method (an empty body gives a 400, not 404/405).
        let body = (*method == "POST").then_some(&b"{}"[..]);
        let served = path.replace("{id}", &id);
        let resp = client.send_raw(method, &served, body, &[]).unwrap();
        assert!(
            resp.status != 404 && resp.status != 405,
            "{method} {path} → {}",
            resp.status
        );
    }
    // Nothing documented that the router does not serve (the fleet-only
    // routes are served by `canopy serve --fleet`: fleet_e2e).
    for (path, item) in doc["paths"].as_object().unwrap() {
        for method in item.as_object().unwrap().keys() {
            assert!(
                routes
                    .iter()
                    .chain(canopy_service::fleet::FLEET_ROUTES.iter())
                    .any(|(m, p)| p == path && m.eq_ignore_ascii_case(method)),
                "{method} {path} is documented but not routed"
            );
        }
    }
}

#[test]
fn max_file_size_flag_reaches_the_indexer() {
    let data = tempfile::tempdir().unwrap();
    let repo = Repo::small();
    let limit = 200;
    let sizes: Vec<u64> = ["src/auth.rs", "src/main.rs", "README.md"]
        .iter()
        .map(|p| std::fs::metadata(repo.root().join(p)).unwrap().len())
        .collect();
    assert!(
        sizes[0] > limit && sizes[1] <= limit && sizes[2] <= limit,
        "{sizes:?}"
    );
    let server = Server::start(
        canopy_bin!(),
        data.path(),
        &Opts {
            extra: vec!["--max-file-size".into(), limit.to_string()],
            ..Opts::default()
        },
    );
    let client = server.client();
    let id = add_and_index(&client, &repo);
    let view = client.wait_until_idle(&id, WAIT).unwrap();
    let report = view.last_index.expect("a finished run");
    assert_eq!(report.files_indexed, 2, "{report:?}");
    assert_eq!(report.skipped.get("too_large"), Some(&1), "{report:?}");
    let result = query_json(&client, &id, &symbol("authenticate")).unwrap();
    assert!(
        result["handles"]
            .as_array()
            .unwrap()
            .iter()
            .all(|h| h["file_path"] != "src/auth.rs"),
        "{result}"
    );
}

/// Overwrites the second half of a closed index file (its schema pages stay
/// readable, so it opens and fails on the first real read).
fn damage_index_interior(db: &Path) {
    let wal = db.with_extension("db-wal");
    assert!(
        std::fs::metadata(&wal).map_or(true, |m| m.len() == 0),
        "the index still has a WAL: close it first"
    );
    let mut bytes = std::fs::read(db).expect("read index");
    assert!(bytes.len() > 16 * 4096, "index too small: {}", bytes.len());
    let half = bytes.len() / 2;
    for (i, b) in bytes.iter_mut().enumerate().skip(half) {
        *b = (i * 31 % 251) as u8;
    }
    std::fs::write(db, bytes).expect("write index");
}

#[test]
fn damage_is_survived_reported_by_health_and_repaired_by_reindex_rebuild() {
    let data = tempfile::tempdir().unwrap();
    let repo = Repo::large(120);
    let db = repo.root().join(".canopy/index.db");
    let mut server = Server::start(canopy_bin!(), data.path(), &Opts::default());
    let client = server.client();
    let id = add_and_index(&client, &repo);
    let ask = json!({"repo": id, "pattern": "shared_marker"});
    assert_eq!(post(&client, "/query", &ask).status, 200);

    // A WAL deleted under the running service: queries go on answering.
    let wal = db.with_extension("db-wal");
    if wal.exists() {
        std::fs::remove_file(&wal).unwrap();
    }
    let resp = post(&client, "/query", &ask);
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(get(&client, "/health").status, 200);

    // Damage inside the file while the service is down.
    assert!(
        server.terminate(WAIT),
        "canopy serve did not stop on SIGTERM"
    );
    drop(server);
    damage_index_interior(&db);
    let server = Server::start(canopy_bin!(), data.path(), &Opts::default());
    let client = server.client();
    let resp = post(&client, "/query", &ask);
    assert_error(&resp, 503, "index_damaged");
    let health = get(&client, "/health");
    assert_eq!(health.status, 503, "{}", health.text());
    let body = health.json().unwrap();
    assert_eq!(body["status"], "unhealthy", "{body}");
    assert!(
        body["reasons"].as_array().is_some_and(|r| r
            .iter()
            .any(|r| r.as_str().is_some_and(|r| r.contains("damaged")))),
        "{body}"
    );

    // The documented repair: POST /reindex with rebuild.
    let resp = post(&client, "/reindex", &json!({"repo": id, "rebuild": true}));
    assert_eq!(resp.status, 200, "{}", resp.text());
    let view = client.wait_until_idle(&id, WAIT).expect("status");
    assert!(view.ready, "{view:?}");
    let resp = post(&client, "/query", &ask);
    assert_eq!(resp.status, 200, "{}", resp.text());
    let found = resp.json().unwrap();
    assert!(
        found["total_matches"].as_u64().is_some_and(|n| n > 0),
        "{found}"
    );
    let health = get(&client, "/health");
    assert_eq!(health.status, 200, "{}", health.text());
}

/// Whether a symbol query on `repo` finds `name` in `file`.
fn finds(
    client: &canopy_client::client::ServiceClient,
    repo: &str,
    name: &str,
    file: &str,
) -> bool {
    query_json(client, repo, &symbol(name)).is_ok_and(|r| {
        r["handles"]
            .as_array()
            .is_some_and(|hs| hs.iter().any(|h| h["file_path"] == file))
    })
}

#[test]
fn watched_repositories_are_reindexed_on_change_and_others_only_on_request() {
    use canopy_client::api::AddRepoRequest;
    let data = tempfile::tempdir().unwrap();
    let watched = Repo::small();
    let manual = Repo::small();
    let server = Server::start(canopy_bin!(), data.path(), &Opts::default());
    let client = server.client();
    let id = add_and_index(&client, &watched);
    let manual_id = add_and_index(&client, &manual);
    let on = client
        .add_repo_with(&AddRepoRequest {
            path: watched.root().display().to_string(),
            name: None,
            watch: Some(true),
        })
        .unwrap();
    assert_eq!(on.repo_id, id);
    let views = client.repos().unwrap();
    let view = |rid: &str| views.iter().find(|v| v.repo_id == rid).unwrap().clone();
    assert!(view(&id).watch);
    assert!(!view(&manual_id).watch, "watching is off unless asked for");
    let seq = client.events(0, Some(1000), None).unwrap().latest_seq;

    // An edit in the watched repository is served without POST /reindex.
    watched.write(
        "src/fresh.rs",
        "pub fn watched_fresh_symbol() -> u8 { 7 }\n",
    );
    eventually("the new symbol is served", || {
        finds(&client, &id, "watched_fresh_symbol", "src/fresh.rs")
    });
    // … and announced to followers with its path. The run's rows commit
    // before its event is published, so a reader can see the symbol an
    // instant before the event exists: wait for the event too.
    let changed_event = || {
        client
            .events(seq, Some(1000), None)
            .unwrap()
            .items
            .into_iter()
            .find(|e| e.kind == "files_changed" && e.repo_id.as_deref() == Some(id.as_str()))
    };
    eventually("the change is announced", || changed_event().is_some());
    let changed = changed_event().expect("announced above");
    assert!(
        changed.data["paths"]
            .as_array()
            .is_some_and(|p| p.iter().any(|p| p == "src/fresh.rs")),
        "{:?}",
        changed.data
    );
    // A batch's run reads the paths the batch named, without listing the
    // rest of the tree (issue 32, edit -> searchable): it finds no
    // unchanged file.
    let seq = client.events(0, Some(1000), None).unwrap().latest_seq;
    watched.write("src/fresh.rs", "pub fn watched_fresh_again() -> u8 { 8 }\n");
    let edit_run = || {
        client
            .events(seq, Some(1000), None)
            .unwrap()
            .items
            .into_iter()
            .find(|e| {
                e.kind == "reindex_finished"
                    && e.repo_id.as_deref() == Some(id.as_str())
                    && e.data["files_indexed"] == 1
            })
    };
    eventually("the second edit is indexed", || edit_run().is_some());
    let run = edit_run().expect("found above");
    assert_eq!(run.data["files_unchanged"], 0, "{:?}", run.data);
    assert!(finds(&client, &id, "watched_fresh_again", "src/fresh.rs"));
    let metrics = String::from_utf8_lossy(&get(&client, "/metrics").body).into_owned();
    assert!(metrics.contains("canopy_repo_watched{"), "{metrics}");
    assert!(
        metrics.contains("canopy_repo_index_lag_seconds{"),
        "{metrics}"
    );

    // The same edit in the unwatched one waits for a reindex.
    manual.write("src/fresh.rs", "pub fn manual_fresh_symbol() -> u8 { 7 }\n");
    std::thread::sleep(std::time::Duration::from_millis(1500));
    assert!(!finds(
        &client,
        &manual_id,
        "manual_fresh_symbol",
        "src/fresh.rs"
    ));
    client.reindex(&manual_id, None).unwrap();
    client.wait_until_idle(&manual_id, WAIT).unwrap();
    assert!(finds(
        &client,
        &manual_id,
        "manual_fresh_symbol",
        "src/fresh.rs"
    ));

    // Watching is kept across a restart.
    drop(server);
    let server = Server::start(canopy_bin!(), data.path(), &Opts::default());
    let client = server.client();
    eventually("the restarted service serves", || {
        client.repos().is_ok_and(|r| r.iter().all(|v| v.ready))
    });
    watched.write(
        "src/later.rs",
        "pub fn watched_after_restart() -> u8 { 8 }\n",
    );
    eventually("the watch resumed after the restart", || {
        finds(&client, &id, "watched_after_restart", "src/later.rs")
    });
    // Turned off on request.
    client
        .add_repo_with(&AddRepoRequest {
            path: watched.root().display().to_string(),
            name: None,
            watch: Some(false),
        })
        .unwrap();
    assert!(
        !client
            .repos()
            .unwrap()
            .iter()
            .find(|v| v.repo_id == id)
            .unwrap()
            .watch
    );
}

/// The service's test-only run hold (`CANOPY_TEST_RUN_HOLD_DIR`): while
/// `hold` exists and names N, an index run that has counted its N-th file
/// waits there, between files, and says so with `held`. A rendezvous, not
/// a timing: the test reads while the run is part-way, whatever the speed.
struct RunHold(tempfile::TempDir);

impl RunHold {
    fn new() -> RunHold {
        RunHold(tempfile::tempdir().unwrap())
    }

    /// `canopy serve` over `data`, its runs under this hold.
    fn serve(&self, data: &std::path::Path) -> Server {
        let env = (
            "CANOPY_TEST_RUN_HOLD_DIR".into(),
            self.0.path().display().to_string(),
        );
        Server::start(
            canopy_bin!(),
            data,
            &Opts {
                env: vec![env],
                ..Opts::default()
            },
        )
    }

    fn arm(&self, at_file: usize) {
        std::fs::write(self.0.path().join("hold"), at_file.to_string()).unwrap();
    }

    fn is_held(&self) -> bool {
        self.0.path().join("held").exists()
    }

    fn release(&self) {
        let _ = std::fs::remove_file(self.0.path().join("hold"));
    }
}

impl Drop for RunHold {
    fn drop(&mut self) {
        self.release();
    }
}

const PROBES: usize = 400;

fn probe_path(i: usize) -> String {
    format!("pkg{}/mod_{i:03}.py", i % 8)
}

fn probe_repo() -> Repo {
    Repo::generated(PROBES, |i| {
        (
            probe_path(i),
            format!("def probe_{i}_fn(x):\n    return x + {i}\n"),
        )
    })
}

/// Adds `second_<i>_fn` to every probe file of [`probe_repo`].
fn give_every_probe_a_second_function(repo: &Repo) {
    for i in 0..PROBES {
        repo.write(
            &probe_path(i),
            &format!(
                "def probe_{i}_fn(x):\n    return x + {i}\n\n\ndef second_{i}_fn(x):\n    return x\n"
            ),
        );
    }
}

/// Issue 32 item 1, N2 where it was seen (`POST /reindex {"rebuild": true}`):
/// 16 clients reading while the rebuild is held half-way get the old
/// complete index, every answer whole and right, under the old generation;
/// once it is live, the new one under a later generation.
#[test]
fn sixteen_clients_read_the_old_complete_index_throughout_a_rebuild_over_http() {
    let hold = RunHold::new();
    let data = tempfile::tempdir().unwrap();
    let server = hold.serve(data.path());
    let client = server.client();
    let repo = probe_repo();
    let id = add_and_index(&client, &repo);
    let before = client.status(Some(&id)).unwrap().repos[0].repo.generation;
    assert!(before > 0);
    repo.write(
        "late/added.py",
        "def added_by_the_rebuild_fn(x):\n    return x\n",
    );

    // Held after 300 of 401 files: the first batch (256) is in the side file.
    hold.arm(300);
    let resp = post(&client, "/reindex", &json!({"repo": id, "rebuild": true}));
    assert_eq!(resp.status, 200, "{}", resp.text());
    eventually("the rebuild is held part-way", || hold.is_held());
    assert!(client.status(Some(&id)).unwrap().repos[0].repo.indexing);

    let wrong: Vec<String> = std::thread::scope(|s| {
        let clients: Vec<_> = (0..16)
            .map(|c| {
                let client = server.client();
                let id = id.as_str();
                s.spawn(move || {
                    let mut wrong = Vec::new();
                    for i in (c..PROBES).step_by(16) {
                        let name = format!("probe_{i}_fn");
                        let r = match query_json(&client, id, &symbol(&name)) {
                            Ok(r) => r,
                            Err(e) => {
                                wrong.push(e);
                                continue;
                            }
                        };
                        let handles = r["handles"].as_array().map_or(&[][..], Vec::as_slice);
                        let right = handles.len() == 1
                            && handles[0]["file_path"] == probe_path(i).as_str()
                            && r["generation"] == before
                            && r["freshness"]["generation"] == before
                            && r.get("index_coverage").is_none();
                        if !right {
                            wrong.push(format!("{name}: {r}"));
                        }
                    }
                    wrong
                })
            })
            .collect();
        clients
            .into_iter()
            .flat_map(|c| c.join().unwrap())
            .collect()
    });
    assert!(
        wrong.is_empty(),
        "{} of {PROBES} answers during the rebuild were not the old complete index: {:?}",
        wrong.len(),
        &wrong[..wrong.len().min(3)]
    );
    let added = query_json(&client, &id, &symbol("added_by_the_rebuild_fn")).unwrap();
    assert_eq!(added["handles"], json!([]), "{added}");
    assert_eq!(added["generation"], before, "{added}");
    assert!(
        hold.is_held(),
        "the rebuild moved on while the clients read"
    );

    hold.release();
    let view = client.wait_until_idle(&id, WAIT).unwrap();
    assert!(view.generation > before, "{view:?}");
    let added = query_json(&client, &id, &symbol("added_by_the_rebuild_fn")).unwrap();
    assert_eq!(added["handles"][0]["file_path"], "late/added.py", "{added}");
    assert_eq!(added["generation"], view.generation, "{added}");
    for i in (0..PROBES).step_by(37) {
        assert!(finds(
            &client,
            &id,
            &format!("probe_{i}_fn"),
            &probe_path(i)
        ));
    }
}

/// Issue 32, N2's second half: during a plain `POST /reindex`, what a
/// reader sees and the generation its answer names go together: an answer
/// that holds code the run has written so far does not carry the
/// generation of the state before the run.
///
/// Fails today (open, issue 32): the service stamps every answer with its
/// last complete generation (`Service::serving`, `Served::new`) while the
/// engine reads the live index, which a plain run changes batch by batch.
#[test]
fn a_generation_names_what_a_reader_sees_during_a_plain_reindex_over_http() {
    let hold = RunHold::new();
    let data = tempfile::tempdir().unwrap();
    let server = hold.serve(data.path());
    let client = server.client();
    let repo = probe_repo();
    let id = add_and_index(&client, &repo);
    let settled = client.status(Some(&id)).unwrap().repos.remove(0);
    let before = settled.repo.generation;
    assert_eq!(settled.serving_generation, Some(before), "{settled:?}");
    let first = query_json(&client, &id, &symbol("second_0_fn")).unwrap();
    assert_eq!(first["handles"], json!([]), "{first}");
    assert_eq!(first["generation"], before, "{first}");
    // Every file gains a function; the run is held after its first batch.
    give_every_probe_a_second_function(&repo);
    hold.arm(300);
    let resp = post(&client, "/reindex", &json!({"repo": id}));
    assert_eq!(resp.status, 200, "{}", resp.text());
    eventually("the reindex is held part-way", || hold.is_held());
    // `/status` observes: the run's committed state has no name until an
    // answer reads it, and polling never gives it one (a poll that named
    // states would use up generation numbers; see `state_survives_a_restart`).
    for _ in 0..3 {
        let polled = client.status(Some(&id)).unwrap().repos.remove(0);
        assert_eq!(polled.serving_generation, None, "{polled:?}");
        assert_eq!(polled.repo.generation, before, "{polled:?}");
    }

    let mid = query_json(&client, &id, &symbol("second_0_fn")).unwrap();
    let sees_new_code = mid["handles"].as_array().is_some_and(|h| !h.is_empty());
    assert!(
        !(sees_new_code && mid["generation"] == before),
        "generation {before} named the state before the run and also this answer, \
         which holds code the run wrote: {mid}"
    );
    // The held run has committed its first batch (300 of 401 files): the
    // new code is visible, under a generation of its own.
    assert!(sees_new_code, "{mid}");
    let during = mid["generation"].as_u64().unwrap();
    assert!(during > before, "{mid}");
    // The same state read again: the same generation.
    let again = query_json(&client, &id, &symbol("second_0_fn")).unwrap();
    assert_eq!(again["generation"], during, "{again}");
    assert_eq!(again["handles"], mid["handles"], "{again}");
    // Once an answer named it, `/status` gives that name beside the last
    // complete generation; and the polls above used up nothing.
    assert_eq!(during, before + 1, "{mid}");
    let status = client.status(Some(&id)).unwrap().repos.remove(0);
    assert_eq!(status.serving_generation, Some(during), "{status:?}");
    assert_eq!(status.repo.generation, before, "{status:?}");
    // While the run goes on, its handles expand.
    let handle = mid["handles"][0]["id"].as_str().unwrap().to_string();
    let expand = json!({"repo": id, "handles": [{"id": handle, "generation": during}]});
    let resp = post(&client, "/expand", &expand);
    assert_eq!(resp.status, 200, "{}", resp.text());
    hold.release();
    let view = client.wait_until_idle(&id, WAIT).unwrap();
    // The completed run is above every state read during it, and those
    // states' handles are now stale.
    assert!(view.generation > during, "{view:?}");
    let resp = post(&client, "/expand", &expand);
    assert_eq!(resp.status, 409, "{}", resp.text());
    let after = query_json(&client, &id, &symbol("second_0_fn")).unwrap();
    assert_eq!(after["generation"], view.generation, "{after}");
    let status = client.status(Some(&id)).unwrap().repos.remove(0);
    assert_eq!(
        status.serving_generation,
        Some(view.generation),
        "{status:?}"
    );
}

/// Issue 32, N2: a service killed in the middle of a run and started again
/// never gives a generation twice. The generation it gave to a state read
/// during the run is saved before the answer leaves; the restarted service
/// resumes the run, completes above it, and a handle of that state is
/// stale there (before, the resumed run completed at the very number the
/// killed process had given to another state, and the handle passed).
#[test]
fn a_restart_in_the_middle_of_a_run_never_gives_a_generation_twice() {
    let hold = RunHold::new();
    let data = tempfile::tempdir().unwrap();
    let server = hold.serve(data.path());
    let client = server.client();
    let repo = probe_repo();
    let id = add_and_index(&client, &repo);
    let before = client.status(Some(&id)).unwrap().repos[0].repo.generation;
    give_every_probe_a_second_function(&repo);
    hold.arm(300);
    let resp = post(&client, "/reindex", &json!({"repo": id}));
    assert_eq!(resp.status, 200, "{}", resp.text());
    eventually("the reindex is held part-way", || hold.is_held());
    let mid = query_json(&client, &id, &symbol("second_0_fn")).unwrap();
    let during = mid["generation"].as_u64().unwrap();
    assert!(during > before, "{mid}");
    let handle = mid["handles"][0]["id"].as_str().unwrap().to_string();
    server.kill();

    let server = Server::start(canopy_bin!(), data.path(), &Opts::default());
    let client = server.client();
    let view = client.wait_until_idle(&id, WAIT).unwrap();
    assert!(
        view.generation > during,
        "the killed process gave {during} to a state of its run; the resumed run completed at {}",
        view.generation
    );
    let expand = json!({"repo": id, "handles": [{"id": handle, "generation": during}]});
    assert_error(&post(&client, "/expand", &expand), 409, "stale_generation");
}

/// `canopy_resolver_worlds_kept` in `/metrics`.
fn worlds_kept(client: &ServiceClient) -> usize {
    let metrics = String::from_utf8_lossy(&get(client, "/metrics").body).into_owned();
    metrics
        .lines()
        .find_map(|l| l.strip_prefix("canopy_resolver_worlds_kept "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no canopy_resolver_worlds_kept in {metrics}"))
}

/// A repository whose index is complete when the service opens it keeps no
/// resolver world (its runs resolve nothing), so its first edit would build
/// one from every file's rows. Watching it builds the world at once (issue
/// 28 item 5), and the edit's run then has one to update.
#[test]
fn a_watched_repository_builds_its_resolver_world_before_the_first_edit() {
    let data = tempfile::tempdir().unwrap();
    let repo = Repo::small();
    let id = {
        let server = Server::start(canopy_bin!(), data.path(), &Opts::default());
        add_and_index(&server.client(), &repo)
    };
    // Restarted: the index is complete and no engine holds a world.
    let server = Server::start(canopy_bin!(), data.path(), &Opts::default());
    let client = server.client();
    eventually("the restarted service serves", || {
        client.repos().is_ok_and(|r| r.iter().all(|v| v.ready))
    });
    assert!(finds(&client, &id, "authenticate", "src/auth.rs"));
    assert_eq!(
        worlds_kept(&client),
        0,
        "an unwatched repository that was only queried keeps no world"
    );
    let resp = post(
        &client,
        &format!("/repos/{id}/settings"),
        &json!({"watch": true}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    eventually("watching builds the resolver world", || {
        worlds_kept(&client) == 1
    });
    repo.write(
        "src/auth.rs",
        "pub fn authenticate(token: &str) -> bool {\n    token.len() > 1\n}\n\npub fn edited_after_warm_up() -> u8 { 1 }\n",
    );
    eventually("the edit is indexed", || {
        finds(&client, &id, "edited_after_warm_up", "src/auth.rs")
    });
    assert_eq!(worlds_kept(&client), 1, "the edit's run keeps the world");
}
