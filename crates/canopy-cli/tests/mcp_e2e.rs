//! End-to-end tests: the real `canopy mcp` binary as a child process, driven
//! by the real rmcp client over stdio, on fixture repositories.
//!
//! They test the MCP server (`canopy-mcp`) through the `canopy`
//! binary, so they live in canopy-cli, where Cargo builds it for them.

use std::collections::BTreeSet;

use canopy_test_support::canopy_bin;
use canopy_test_support::mcp::*;
use canopy_test_support::repo::{FIXTURE, Repo};
use rmcp::model::ProtocolVersion;
use serde_json::{Value, json};

const TOOLS: [&str; 10] = [
    "canopy_analysis",
    "canopy_context",
    "canopy_evidence_pack",
    "canopy_expand",
    "canopy_graph",
    "canopy_index",
    "canopy_invalidate",
    "canopy_query",
    "canopy_refine",
    "canopy_status",
];

/// The token budget of the whole `tools/list` response (issue 5: ≤ 3,000;
/// we aim at ≤ 2,000 to leave room for the graph/analysis/context tools).
const TOOLS_LIST_TOKEN_LIMIT: usize = 3_000;

fn first_handle<'a>(result: &'a Value, file: &str) -> &'a Value {
    result["handles"]
        .as_array()
        .and_then(|hs| hs.iter().find(|h| h["file_path"] == file))
        .unwrap_or_else(|| panic!("no handle in {file}: {result}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn initializes_and_lists_every_tool() {
    let client = connect(canopy_bin!()).await;
    let info = client.peer_info().expect("server info");
    assert_eq!(
        info.server_info.as_ref().map(|s| s.name.as_str()),
        Some("canopy")
    );
    assert!(info.capabilities.tools.is_some());
    assert!(ProtocolVersion::KNOWN_VERSIONS.contains(&info.protocol_version));
    assert!(
        info.instructions
            .as_deref()
            .is_some_and(|i| i.contains("canopy_expand"))
    );

    let tools = client.peer().list_all_tools().await.expect("tools/list");
    let names: BTreeSet<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(names, BTreeSet::from(TOOLS));
    for tool in &tools {
        let schema = Value::Object(tool.input_schema.as_ref().clone());
        assert_eq!(schema["type"], "object");
        assert!(schema["properties"]["path"].is_object(), "{}", tool.name);
        assert!(
            schema["required"]
                .as_array()
                .is_some_and(|r| r.contains(&json!("path"))),
            "{}",
            tool.name
        );
        assert!(tool.description.as_ref().is_some_and(|d| d.len() > 40));
    }
    let by_name = |n: &str| {
        let tool = tools.iter().find(|t| t.name == n).expect("tool");
        Value::Object(tool.input_schema.as_ref().clone())
    };
    let query = by_name("canopy_query");
    assert_eq!(query["properties"]["limit"]["default"], 16);
    assert_eq!(query["properties"]["expand_budget"]["default"], 0);
    assert_eq!(query["properties"]["kind"]["default"], "any");
    assert_eq!(query["properties"]["match"]["default"], "any");
    for key in [
        "pattern", "patterns", "symbol", "section", "parent", "kind", "glob", "match", "query",
    ] {
        assert!(query["properties"][key].is_object(), "canopy_query.{key}");
    }
    let pack = by_name("canopy_evidence_pack");
    assert_eq!(pack["properties"]["max_handles"]["default"], 8);
    assert_eq!(pack["properties"]["max_per_file"]["default"], 2);
    assert_eq!(pack["properties"]["plan"]["type"], "boolean");
    assert_eq!(
        by_name("canopy_expand")["required"],
        json!(["path", "handle_ids"])
    );
    // The glob is optional: without one the whole repository is indexed
    // (and a rebuild takes none).
    assert_eq!(by_name("canopy_index")["required"], json!(["path"]));
    assert_eq!(by_name("canopy_invalidate")["required"], json!(["path"]));
    client.cancel().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn tools_list_fits_the_token_budget() {
    let client = connect(canopy_bin!()).await;
    let listed = client.peer().list_tools(None).await.expect("tools/list");
    let serialized = serde_json::to_string(&listed).expect("serialize");
    let tokens = canopy_core::tokens::count_tokens(&serialized);
    println!("tools/list: {tokens} tokens, {} bytes", serialized.len());
    assert!(
        tokens <= TOOLS_LIST_TOKEN_LIMIT,
        "tools/list costs {tokens} tokens (limit {TOOLS_LIST_TOKEN_LIMIT})"
    );
    client.cancel().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn mcp_help_lists_every_tool_the_server_serves() {
    let client = connect(canopy_bin!()).await;
    let tools = client.peer().list_all_tools().await.expect("tools/list");
    client.cancel().await.expect("close");
    let out = std::process::Command::new(canopy_bin!())
        .args(["mcp", "--help"])
        .output()
        .expect("run canopy mcp --help");
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for tool in &tools {
        assert!(
            help.lines()
                .any(|l| l.trim_start().starts_with(tool.name.as_ref())),
            "`canopy mcp --help` does not list {}:\n{help}",
            tool.name
        );
    }
    // Command options first, the binary's global flags under their own heading.
    let own = help.find("--max-engines").expect("--max-engines");
    let heading = help
        .find("Global options:")
        .expect("a Global options heading");
    let root = help.find("--root").expect("--root");
    assert!(own < heading && heading < root, "{help}");
}

#[tokio::test(flavor = "multi_thread")]
async fn negotiates_an_older_protocol_version() {
    let client = connect_with(
        canopy_bin!(),
        TestClient {
            version: Some(ProtocolVersion::V_2025_06_18),
            ..TestClient::default()
        },
    )
    .await;
    let info = client.peer_info().expect("server info");
    assert_eq!(info.protocol_version, ProtocolVersion::V_2025_06_18);
    let repo = Repo::fixture();
    let status = ok_json(&call(&client, "canopy_status", json!({"path": repo.path()})).await);
    assert_eq!(status["files_indexed"], 0);
    client.cancel().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn query_finds_symbols_with_exact_locations() {
    let repo = Repo::fixture();
    let client = connect(canopy_bin!()).await;
    let path = repo.path();

    let rust = ok_json(
        &call(
            &client,
            "canopy_query",
            json!({"path": path, "symbol": "authenticate", "kind": "definition"}),
        )
        .await,
    );
    let h = first_handle(&rust, "src/lib.rs");
    assert_eq!(h["line_range"], json!([8, 10]), "{h}");
    assert_eq!(h["node_type"], "method");
    assert!(
        h["id"]
            .as_str()
            .is_some_and(|id| id.len() == 25 && id.starts_with('h'))
    );
    assert!(
        h["preview"]
            .as_str()
            .is_some_and(|p| p.contains("fn authenticate"))
    );
    assert!(h["content"].is_null(), "no content without expand_budget");
    assert_eq!(rust["truncated"], false);

    let py = ok_json(
        &call(
            &client,
            "canopy_query",
            json!({"path": path, "symbol": "find_user"}),
        )
        .await,
    );
    let h = first_handle(&py, "app/service.py");
    assert_eq!(h["line_range"], json!([2, 3]), "{h}");

    let refs = ok_json(
        &call(
            &client,
            "canopy_query",
            json!({"path": path, "symbol": "authenticate", "kind": "reference"}),
        )
        .await,
    );
    let r = refs["ref_handles"]
        .as_array()
        .and_then(|rs| rs.iter().find(|r| r["file_path"] == "src/routes.rs"))
        .unwrap_or_else(|| panic!("no reference in src/routes.rs: {refs}"));
    assert_eq!(r["line_range"], json!([4, 4]));
    assert_eq!(r["ref_type"], "call");

    let members = ok_json(
        &call(
            &client,
            "canopy_query",
            json!({"path": path, "parent": "UserService"}),
        )
        .await,
    );
    let lines: BTreeSet<String> = members["handles"]
        .as_array()
        .expect("handles")
        .iter()
        .map(|h| h["preview"].as_str().unwrap_or_default().to_string())
        .collect();
    assert!(lines.iter().any(|p| p.contains("find_user")), "{members}");
    assert!(lines.iter().any(|p| p.contains("delete_user")), "{members}");

    let section = ok_json(
        &call(
            &client,
            "canopy_query",
            json!({"path": path, "section": "Installation"}),
        )
        .await,
    );
    first_handle(&section, "README.md");

    let dsl = ok_json(
        &call(
            &client,
            "canopy_query",
            json!({"path": path, "query": "(in-file \"**/*.py\" (code \"load_settings\"))"}),
        )
        .await,
    );
    assert_eq!(
        first_handle(&dsl, "app/service.py")["line_range"],
        json!([9, 10])
    );

    let globbed = ok_json(
        &call(
            &client,
            "canopy_query",
            json!({"path": path, "pattern": "token", "glob": "src/routes.rs"}),
        )
        .await,
    );
    assert!(
        globbed["handles"].as_array().is_some_and(
            |hs| !hs.is_empty() && hs.iter().all(|h| h["file_path"] == "src/routes.rs")
        ),
        "{globbed}"
    );

    let limited = ok_json(
        &call(
            &client,
            "canopy_query",
            json!({"path": path, "patterns": ["token", "user_id"], "match": "any", "limit": 1}),
        )
        .await,
    );
    assert_eq!(limited["handles"].as_array().map(Vec::len), Some(1));
    assert_eq!(limited["truncated"], true);
    client.cancel().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn expand_returns_exact_text_blocks() {
    let repo = Repo::fixture();
    let client = connect(canopy_bin!()).await;
    let path = repo.path();
    let found = ok_json(
        &call(
            &client,
            "canopy_query",
            json!({"path": path, "symbol": "validate_token", "kind": "definition"}),
        )
        .await,
    );
    let a = first_handle(&found, "src/lib.rs").clone();
    let found = ok_json(
        &call(
            &client,
            "canopy_query",
            json!({"path": path, "symbol": "login"}),
        )
        .await,
    );
    let b = first_handle(&found, "src/routes.rs").clone();

    let slice = |h: &Value, file: &str| {
        let bytes = repo.read(file);
        let (s, e) = (
            h["span"]["start"].as_u64().expect("start") as usize,
            h["span"]["end"].as_u64().expect("end") as usize,
        );
        String::from_utf8(bytes[s..e].to_vec()).expect("utf-8")
    };
    let (a_text, b_text) = (slice(&a, "src/lib.rs"), slice(&b, "src/routes.rs"));
    assert!(a_text.starts_with("pub fn validate_token"), "{a_text}");

    let one = call(
        &client,
        "canopy_expand",
        json!({"path": path, "handle_ids": [a["id"]]}),
    )
    .await;
    assert_ne!(one.is_error, Some(true));
    assert_eq!(
        text(&one),
        format!("// {}\n{}", a["id"].as_str().unwrap_or_default(), a_text)
    );

    let two = call(
        &client,
        "canopy_expand",
        json!({"path": path, "handle_ids": [a["id"], b["id"], a["id"]]}),
    )
    .await;
    let expected = format!(
        "// {}\n{}\n\n// {}\n{}",
        a["id"].as_str().unwrap_or_default(),
        a_text,
        b["id"].as_str().unwrap_or_default(),
        b_text
    );
    assert_eq!(text(&two), expected);
    // Freshness in a second block: the generation the handles came from,
    // and no stale file (expansion refuses text of a changed file).
    let fresh: Value = serde_json::from_str(
        two.content
            .get(1)
            .and_then(|c| c.as_text())
            .map(|t| t.text.as_str())
            .expect("a freshness block"),
    )
    .expect("JSON");
    assert!(
        fresh["freshness"]["generation"]
            .as_u64()
            .is_some_and(|g| g >= 1),
        "{fresh}"
    );
    assert_eq!(fresh["freshness"]["stale_files"], 0);
    assert_eq!(fresh["freshness"]["checked_files"], 2);
    assert!(fresh["freshness"]["indexed_at"].is_string(), "{fresh}");
    client.cancel().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn status_index_and_invalidate() {
    let repo = Repo::fixture();
    let client = connect(canopy_bin!()).await;
    let path = repo.path();

    let fresh = ok_json(&call(&client, "canopy_status", json!({"path": path})).await);
    assert_eq!(fresh["files_indexed"], 0);
    assert_eq!(fresh["indexed"], false);
    assert!(fresh["last_indexed"].is_null());
    assert!(
        !repo.root().join(".canopy").exists(),
        "canopy_status created .canopy"
    );

    let report = ok_json(
        &call(
            &client,
            "canopy_index",
            json!({"path": path, "glob": "**/*.py"}),
        )
        .await,
    );
    assert_eq!(report["files_discovered"], 1, "{report}");
    assert_eq!(report["files_indexed"], 1, "{report}");

    let status = ok_json(&call(&client, "canopy_status", json!({"path": path})).await);
    assert_eq!(status["files_indexed"], 1, "{status}");
    assert_eq!(status["repo_root"], repo.root().display().to_string());
    assert!(status["schema_version"].as_u64().is_some_and(|v| v > 0));
    for key in [
        "total_tokens",
        "index_size_bytes",
        "units",
        "languages",
        "index_coverage",
    ] {
        assert!(!status[key].is_null(), "status.{key}: {status}");
    }

    let all = ok_json(
        &call(
            &client,
            "canopy_index",
            json!({"path": path, "glob": "**/*"}),
        )
        .await,
    );
    assert_eq!(all["files_discovered"], FIXTURE.len(), "{all}");
    assert_eq!(all["files_unchanged"], 1, "{all}");
    let status = ok_json(&call(&client, "canopy_status", json!({"path": path})).await);
    assert_eq!(status["files_indexed"], FIXTURE.len());
    assert!(status["last_indexed"].is_string());
    assert_eq!(status["file_discovery"], "git_ls_files");

    let redone = ok_json(&call(&client, "canopy_invalidate", json!({"path": path})).await);
    assert_eq!(redone["files_indexed"], FIXTURE.len(), "{redone}");
    let one = ok_json(
        &call(
            &client,
            "canopy_invalidate",
            json!({"path": path, "glob": "src/lib.rs"}),
        )
        .await,
    );
    assert_eq!(one["files_indexed"], 1, "{one}");
    client.cancel().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn evidence_pack_has_guidance_and_per_connection_sessions() {
    let repo = Repo::fixture();
    let args = json!({"path": repo.path(), "pattern": "authenticate token", "max_handles": 4});
    let client = connect(canopy_bin!()).await;

    let first = ok_json(&call(&client, "canopy_evidence_pack", args.clone()).await);
    let handles = first["handles"].as_array().expect("handles");
    assert!(!handles.is_empty() && handles.len() <= 4, "{first}");
    for h in handles {
        for key in ["id", "file_path", "line_range", "token_count", "score"] {
            assert!(!h[key].is_null(), "handle.{key}: {h}");
        }
        assert!(h["content"].is_null(), "no snippets: {h}");
        // One line: the signature, not a snippet.
        assert!(h["preview"].as_str().is_some_and(|p| p.len() <= 80), "{h}");
    }
    canopy_test_support::assert_handles_name_what_they_hold(
        &first["handles"],
        "AuthController.authenticate",
    );
    assert!(first["files"].as_array().is_some_and(|f| !f.is_empty()));
    assert!(
        first["expand_suggestion"]
            .as_array()
            .is_some_and(|s| !s.is_empty())
    );
    let g = &first["guidance"];
    assert!(g["stop_querying"].is_boolean(), "{g}");
    assert!(
        ["refine_query", "expand_then_answer"]
            .contains(&g["recommended_action"].as_str().unwrap_or("")),
        "{g}"
    );
    for key in [
        "suggested_expand_count",
        "max_additional_queries",
        "confidence",
    ] {
        assert!(g[key].is_number(), "guidance.{key}: {g}");
    }
    assert!(["high", "medium", "low"].contains(&g["confidence_band"].as_str().unwrap_or("")));
    assert!(g["next_step"].as_str().is_some_and(|s| !s.is_empty()));
    assert_eq!(first["novelty"], 1.0);

    // Same connection: the session remembers what it was shown.
    let again = ok_json(&call(&client, "canopy_evidence_pack", args.clone()).await);
    assert!(
        again["novelty"].as_f64().is_some_and(|n| n < 1.0),
        "{again}"
    );
    client.cancel().await.expect("close");

    // A new connection is a new session.
    let other = connect(canopy_bin!()).await;
    let fresh = ok_json(&call(&other, "canopy_evidence_pack", args).await);
    assert_eq!(fresh["novelty"], 1.0, "{fresh}");
    other.cancel().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn errors_are_tool_results_with_recovery_hints() {
    let repo = Repo::fixture();
    let client = connect(canopy_bin!()).await;
    let path = repo.path();

    let e = err_json(
        &call(
            &client,
            "canopy_expand",
            json!({"path": path, "handle_ids": ["h0123456789abcdef01234567"]}),
        )
        .await,
        "HandleNotFound",
    );
    assert!(
        e["hint"]
            .as_str()
            .is_some_and(|h| h.contains("canopy_query")),
        "{e}"
    );
    err_json(
        &call(
            &client,
            "canopy_expand",
            json!({"path": path, "handle_ids": ["not-a-handle"]}),
        )
        .await,
        "MalformedHandle",
    );
    err_json(
        &call(
            &client,
            "canopy_expand",
            json!({"path": path, "handle_ids": []}),
        )
        .await,
        "Validation",
    );
    let e = err_json(
        &call(
            &client,
            "canopy_query",
            json!({"path": path, "query": "(grep \"auth\""}),
        )
        .await,
        "QueryParse",
    );
    assert!(
        e["message"].as_str().is_some_and(|m| m.contains("byte")),
        "{e}"
    );
    let e = err_json(
        &call(
            &client,
            "canopy_query",
            json!({"path": path, "pattern": "x", "glob": "src/[a"}),
        )
        .await,
        "GlobPattern",
    );
    assert!(
        e["hint"].as_str().is_some_and(|h| h.contains("**/*")),
        "{e}"
    );
    err_json(
        &call(
            &client,
            "canopy_index",
            json!({"path": path, "glob": "src/[a"}),
        )
        .await,
        "GlobPattern",
    );
    let e = err_json(
        &call(&client, "canopy_query", json!({"path": path, "limit": 3})).await,
        "Validation",
    );
    assert!(
        e["hint"].as_str().is_some_and(|h| h.contains("pattern")),
        "{e}"
    );
    err_json(
        &call(&client, "canopy_evidence_pack", json!({"path": path})).await,
        "Validation",
    );
    let e = err_json(
        &call(
            &client,
            "canopy_query",
            json!({"path": "relative/repo", "pattern": "x"}),
        )
        .await,
        "InvalidPath",
    );
    assert!(
        e["message"]
            .as_str()
            .is_some_and(|m| m.contains("absolute")),
        "{e}"
    );
    let missing = repo.root().join("does/not/exist").display().to_string();
    let e = err_json(
        &call(&client, "canopy_status", json!({"path": missing})).await,
        "InvalidPath",
    );
    assert!(
        e["message"]
            .as_str()
            .is_some_and(|m| m.contains("does not exist")),
        "{e}"
    );
    err_json(
        &call(&client, "canopy_status", json!({})).await,
        "Validation",
    );
    let e = err_json(
        &call(
            &client,
            "canopy_status",
            json!({"path": path, "verbose": true}),
        )
        .await,
        "Validation",
    );
    assert!(
        e["message"].as_str().is_some_and(|m| m.contains("verbose")),
        "{e}"
    );
    err_json(
        &call(
            &client,
            "canopy_query",
            json!({"path": path, "pattern": "x", "limit": "many"}),
        )
        .await,
        "Validation",
    );
    err_json(
        &call(
            &client,
            "canopy_query",
            json!({"path": path, "pattern": "x", "kind": "callers"}),
        )
        .await,
        "Validation",
    );
    // No glob is not an error: the whole repository (issue 29), also for a rebuild.
    let all = ok_json(&call(&client, "canopy_index", json!({"path": path})).await);
    assert!(
        all["files_discovered"].as_u64().is_some_and(|n| n > 0),
        "{all}"
    );
    let rebuilt = ok_json(
        &call(
            &client,
            "canopy_index",
            json!({"path": path, "rebuild": true}),
        )
        .await,
    );
    assert_eq!(
        rebuilt["files_discovered"], all["files_discovered"],
        "{rebuilt}"
    );
    assert!(
        try_call(&client, "canopy_nonexistent", json!({"path": path}))
            .await
            .is_err(),
        "an unknown tool is a protocol error"
    );

    // A folder outside git that nobody indexed is refused, for reading
    // tools and writing tools alike, and nothing is created in it; the
    // filesystem root is never a repository.
    let plain = tempfile::tempdir().expect("tempdir");
    std::fs::write(plain.path().join("secrets.txt"), "password = hunter2\n").expect("write");
    let plain_path = plain
        .path()
        .canonicalize()
        .expect("canonical")
        .display()
        .to_string();
    for (tool, args) in [
        ("canopy_status", json!({"path": plain_path})),
        ("canopy_index", json!({"path": plain_path, "glob": "**"})),
    ] {
        let e = err_json(&call(&client, tool, args).await, "NotARepository");
        assert!(
            e["hint"]
                .as_str()
                .is_some_and(|h| h.contains("canopy index")),
            "{e}"
        );
    }
    let e = call(
        &client,
        "canopy_query",
        json!({"path": plain_path, "pattern": "hunter2"}),
    )
    .await;
    err_json(&e, "NotARepository");
    assert!(!plain.path().join(".canopy").exists());
    let root_existed = std::path::Path::new("/.canopy").exists();
    let e = call(&client, "canopy_status", json!({"path": "/"})).await;
    assert!(e.is_error == Some(true), "status of / succeeded: {e:?}");
    assert_eq!(std::path::Path::new("/.canopy").exists(), root_existed);

    // The server is still serving.
    ok_json(&call(&client, "canopy_status", json!({"path": path})).await);
    client.cancel().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn stale_file_then_invalidate_then_requery() {
    let repo = Repo::fixture();
    // Without the watcher, so the edit stays unindexed until invalidate.
    let client =
        connect_with_args(canopy_bin!(), TestClient::default(), &["--watch", "false"]).await;
    let path = repo.path();
    let found = ok_json(
        &call(
            &client,
            "canopy_query",
            json!({"path": path, "symbol": "authenticate", "kind": "definition"}),
        )
        .await,
    );
    let id = first_handle(&found, "src/lib.rs")["id"].clone();

    let edited = FIXTURE[0]
        .1
        .replace("token == secret", "token.trim() == secret.trim()");
    repo.write("src/lib.rs", &edited);
    let e = err_json(
        &call(
            &client,
            "canopy_expand",
            json!({"path": path, "handle_ids": [id]}),
        )
        .await,
        "StaleIndex",
    );
    assert!(
        e["message"]
            .as_str()
            .is_some_and(|m| m.contains("src/lib.rs")),
        "{e}"
    );
    assert!(
        e["hint"]
            .as_str()
            .is_some_and(|h| h.contains("canopy_invalidate")),
        "{e}"
    );

    ok_json(&call(&client, "canopy_invalidate", json!({"path": path})).await);
    let found = ok_json(
        &call(
            &client,
            "canopy_query",
            json!({"path": path, "symbol": "validate_token", "kind": "definition"}),
        )
        .await,
    );
    let id = first_handle(&found, "src/lib.rs")["id"].clone();
    let expanded = call(
        &client,
        "canopy_expand",
        json!({"path": path, "handle_ids": [id]}),
    )
    .await;
    assert!(
        text(&expanded).contains("token.trim() == secret.trim()"),
        "{}",
        text(&expanded)
    );
    client.cancel().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn one_session_serves_two_repositories() {
    let rust = Repo::fixture();
    let go = Repo::with_files(&[(
        "cmd/main.go",
        "package main\n\nfunc ServeHTTP() int {\n\treturn 1\n}\n",
    )]);
    let client = connect(canopy_bin!()).await;

    let a = ok_json(
        &call(
            &client,
            "canopy_query",
            json!({"path": rust.path(), "symbol": "AuthController"}),
        )
        .await,
    );
    first_handle(&a, "src/lib.rs");
    let b = ok_json(
        &call(
            &client,
            "canopy_query",
            json!({"path": go.path(), "symbol": "ServeHTTP"}),
        )
        .await,
    );
    assert_eq!(first_handle(&b, "cmd/main.go")["line_range"], json!([3, 5]));
    let none = ok_json(
        &call(
            &client,
            "canopy_query",
            json!({"path": go.path(), "symbol": "AuthController"}),
        )
        .await,
    );
    assert!(
        none["handles"]
            .as_array()
            .is_some_and(|hs| hs.iter().all(|h| h["file_path"] != "src/lib.rs")),
        "{none}"
    );

    // A directory inside a repository resolves to that repository.
    let inside = rust.root().join("src").display().to_string();
    let s1 = ok_json(&call(&client, "canopy_status", json!({"path": inside})).await);
    let s2 = ok_json(&call(&client, "canopy_status", json!({"path": go.path()})).await);
    assert_eq!(s1["repo_root"], rust.root().display().to_string());
    assert_eq!(s2["repo_root"], go.root().display().to_string());
    assert_eq!(s2["files_indexed"], 1);
    client.cancel().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn first_query_reports_indexing_progress() {
    let repo = Repo::generated(40, |i| {
        (
            format!("src/m{i}.rs"),
            format!("pub fn f{i}() -> u32 {{ {i} }}\n"),
        )
    });
    let client = TestClient::default();
    let progress = client.progress.clone();
    let client = connect_with(canopy_bin!(), client).await;

    let found = ok_json(
        &call(
            &client,
            "canopy_query",
            json!({"path": repo.path(), "symbol": "f7"}),
        )
        .await,
    );
    first_handle(&found, "src/m7.rs");
    // Notifications are handled on their own tasks, perhaps out of order:
    // wait (bounded) for the first and the last.
    let has = |done: f64| {
        progress
            .lock()
            .expect("lock")
            .iter()
            .any(|p| p.total == Some(40.0) && p.progress == done)
    };
    wait_until(|| has(0.0) && has(40.0)).await;
    let seen = progress.lock().expect("lock").clone();
    let token = seen[0].progress_token.clone();
    assert!(seen.iter().all(|p| p.progress_token == token), "{seen:?}");
    assert!(seen.iter().all(|p| p.progress <= 40.0), "{seen:?}");
    let mut values: Vec<f64> = seen.iter().map(|p| p.progress).collect();
    values.sort_by(f64::total_cmp);
    values.dedup();
    assert_eq!(
        values.len(),
        seen.len(),
        "progress values are distinct: {seen:?}"
    );

    // Already indexed: later calls (each with its own progress token) report none.
    ok_json(
        &call(
            &client,
            "canopy_query",
            json!({"path": repo.path(), "symbol": "f8"}),
        )
        .await,
    );
    ok_json(&call(&client, "canopy_status", json!({"path": repo.path()})).await);
    let seen = progress.lock().expect("lock").clone();
    assert!(seen.iter().all(|p| p.progress_token == token), "{seen:?}");
    client.cancel().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_burst_of_fifty_concurrent_calls_all_succeed() {
    let a = Repo::fixture();
    let b = Repo::with_files(&[("lib/util.py", "def helper():\n    return 1\n")]);
    let client = connect(canopy_bin!()).await;
    let mut calls = tokio::task::JoinSet::new();
    for i in 0..50 {
        let peer = client.peer().clone();
        let (path, other) = if i % 2 == 0 {
            (a.path(), b.path())
        } else {
            (b.path(), a.path())
        };
        let (tool, args) = match i % 5 {
            0 => (
                "canopy_query",
                json!({"path": path, "pattern": "token user helper"}),
            ),
            1 => ("canopy_status", json!({"path": other})),
            2 => (
                "canopy_evidence_pack",
                json!({"path": path, "pattern": "helper authenticate"}),
            ),
            3 => ("canopy_query", json!({"path": other, "symbol": "helper"})),
            _ => (
                "canopy_query",
                json!({"path": path, "query": "(grep \"return\")"}),
            ),
        };
        calls.spawn(async move {
            let Value::Object(args) = args else {
                unreachable!()
            };
            let result = peer
                .call_tool(rmcp::model::CallToolRequestParams::new(tool).with_arguments(args))
                .await
                .unwrap_or_else(|e| panic!("call {i} ({tool}): {e}"));
            (i, tool, result)
        });
    }
    let mut done = 0;
    while let Some(joined) = calls.join_next().await {
        let (i, tool, result) = joined.expect("task");
        assert_ne!(
            result.is_error,
            Some(true),
            "call {i} ({tool}): {}",
            text(&result)
        );
        ok_json(&result);
        done += 1;
    }
    assert_eq!(done, 50);
    client.cancel().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn large_repository_first_query_uses_lazy_indexing() {
    let mut files: Vec<(String, String)> = (0..1_100)
        .map(|i| {
            (
                format!("pkg{}/mod{i}.py", i % 50),
                format!("def func_{i}():\n    return {i}\n"),
            )
        })
        .collect();
    files.push((
        "payments/processor.py".into(),
        "class PaymentProcessor:\n    def charge(self, amount):\n        return amount\n".into(),
    ));
    let files: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, c)| (p.as_str(), c.as_str()))
        .collect();
    let repo = Repo::with_files(&files);
    let client = connect(canopy_bin!()).await;
    let args = json!({"path": repo.path(), "symbol": "PaymentProcessor"});
    // The first answer may come from a partial index (the files the query
    // points at); the rest is indexed in the background.
    let first = ok_json(&call(&client, "canopy_query", args.clone()).await);
    // Issue 15 item 5: a query indexes the files it points at first, so
    // even a partial index answers it; and a partial answer says so.
    first_handle(&first, "payments/processor.py");
    if let Some(coverage) = first["index_coverage"].as_f64() {
        assert!(
            coverage > 0.0 && coverage < 1.0,
            "a partial answer with files indexed reports coverage {coverage}"
        );
        let pack = ok_json(
            &call(
                &client,
                "canopy_evidence_pack",
                json!({"path": repo.path(), "pattern": "payment processor charge"}),
            )
            .await,
        );
        if pack["index_coverage"].as_f64().is_some_and(|c| c < 1.0) {
            assert_eq!(pack["guidance"]["stop_querying"], false, "{pack}");
            assert_ne!(pack["guidance"]["confidence_band"], "high", "{pack}");
        }
    }
    let mut complete = false;
    for _ in 0..600 {
        let status = ok_json(&call(&client, "canopy_status", json!({"path": repo.path()})).await);
        if status["index_coverage"] == 1.0 {
            complete = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(
        complete,
        "the background index run did not complete within 30 s"
    );
    let found = ok_json(&call(&client, "canopy_query", args).await);
    assert_eq!(
        first_handle(&found, "payments/processor.py")["line_range"],
        json!([1, 3])
    );
    client.cancel().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn result_sets_are_refined_server_side() {
    let repo = Repo::fixture();
    let client = connect(canopy_bin!()).await;
    let path = repo.path();
    let first = ok_json(
        &call(
            &client,
            "canopy_query",
            json!({"path": path, "pattern": "token", "limit": 1, "result_set": true}),
        )
        .await,
    );
    let id = first["result_set"]
        .as_str()
        .expect("result_set id")
        .to_string();
    assert!(first["total_matches"].as_u64().unwrap_or(0) > 1, "{first}");
    let refined = ok_json(
        &call(
            &client,
            "canopy_refine",
            json!({"path": path, "result_set": id, "glob": "src/routes.rs", "kind": "definition"}),
        )
        .await,
    );
    let handles = refined["handles"].as_array().expect("handles");
    assert!(!handles.is_empty(), "{refined}");
    assert!(
        handles.iter().all(|h| h["file_path"] == "src/routes.rs"),
        "{refined}"
    );
    assert!(refined["result_set"].as_str().is_some());
    let gone = call(
        &client,
        "canopy_refine",
        json!({"path": path, "result_set": "rs-expired"}),
    )
    .await;
    let err = err_json(&gone, "ResultSetNotFound");
    assert!(
        err["hint"].as_str().unwrap_or_default().contains("re-run"),
        "{err}"
    );
}

/// `kind: reference` keeps the members of the set that use a name another
/// member defines; `any` keeps them all.
#[tokio::test(flavor = "multi_thread")]
async fn refine_by_reference_keeps_the_members_using_each_other() {
    let repo = Repo::new(&[(
        "lib.py",
        "def tokenize(text):\n    return text.split()\n\n\ndef parse(text):\n    return [w.upper() for w in tokenize(text)]\n\n\ndef render(items):\n    return \", \".join(items)\n",
    )]);
    let client = connect(canopy_bin!()).await;
    let path = repo.path();
    let set = ok_json(
        &call(
            &client,
            "canopy_query",
            json!({"path": path, "pattern": "return", "result_set": true}),
        )
        .await,
    );
    let id = set["result_set"].as_str().expect("result_set id");
    let names = |answer: &Value| -> Vec<String> {
        let mut names: Vec<String> = answer["handles"]
            .as_array()
            .expect("handles")
            .iter()
            .filter_map(|h| h["name"].as_str().map(str::to_string))
            .collect();
        names.sort();
        names
    };
    let refine = |kind: &str| {
        call(
            &client,
            "canopy_refine",
            json!({"path": path, "result_set": id, "kind": kind}),
        )
    };
    let all = ok_json(&refine("any").await);
    assert_eq!(names(&all), vec!["parse", "render", "tokenize"], "{all}");
    let using = ok_json(&refine("reference").await);
    assert_eq!(names(&using), vec!["parse"], "{using}");
    assert_eq!(using["total_matches"], 1, "{using}");
    client.cancel().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn max_file_size_flag_reaches_the_server() {
    const LIMIT: usize = 200;
    let too_large = FIXTURE
        .iter()
        .filter(|(_, text)| text.len() > LIMIT)
        .count();
    assert!(
        too_large > 0 && too_large < FIXTURE.len(),
        "the fixture needs files on both sides of {LIMIT} bytes"
    );
    let repo = Repo::fixture();
    let client = connect_with_args(
        canopy_bin!(),
        TestClient::default(),
        &["--max-file-size", &LIMIT.to_string()],
    )
    .await;
    let report = ok_json(
        &call(
            &client,
            "canopy_index",
            json!({"path": repo.path(), "glob": "**/*"}),
        )
        .await,
    );
    assert_eq!(report["skipped"]["too_large"], too_large, "{report}");
    assert_eq!(
        report["files_indexed"],
        FIXTURE.len() - too_large,
        "{report}"
    );
    let status = ok_json(&call(&client, "canopy_status", json!({"path": repo.path()})).await);
    assert_eq!(status["skipped"]["too_large"], too_large, "{status}");
    client.cancel().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_server_watches_open_repositories_and_answers_with_fresh_code() {
    let repo = Repo::fixture();
    let client = connect(canopy_bin!()).await;
    let path = repo.path();
    ok_json(
        &call(
            &client,
            "canopy_query",
            json!({"path": path, "symbol": "validate_token"}),
        )
        .await,
    );
    // An edit after the first query: no index call, no invalidate.
    repo.write(
        "src/session.rs",
        "pub fn renew_session(token: &str) -> String {\n    token.to_string()\n}\n",
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let found = ok_json(
            &call(
                &client,
                "canopy_query",
                json!({"path": path, "symbol": "renew_session", "kind": "definition"}),
            )
            .await,
        );
        if found["handles"]
            .as_array()
            .is_some_and(|h| h.iter().any(|h| h["file_path"] == "src/session.rs"))
        {
            assert_eq!(found["freshness"]["stale_files"], 0, "{found}");
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the watcher never indexed the new file: {found}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    client.cancel().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cancelled_call_stops_the_work_it_started() {
    use rmcp::model::{CallToolRequestParams, ClientRequest, Request};
    use rmcp::service::PeerRequestOptions;

    const FILES: usize = 6_000;
    let repo = Repo::generated(FILES, |i| {
        (
            format!("src/d{}/m{i}.py", i % 50),
            format!("def cancel_probe_{i}(x):\n    return x * {i}\n"),
        )
    });
    let client = TestClient::default();
    let progress = client.progress.clone();
    let client = connect_with_args(canopy_bin!(), client, &["--watch", "false"]).await;

    let arguments = json!({"path": repo.path(), "glob": "**/*"})
        .as_object()
        .cloned();
    let request = ClientRequest::CallToolRequest(Request::new(
        CallToolRequestParams::new("canopy_index").with_arguments(arguments.unwrap_or_default()),
    ));
    let handle = client
        .peer()
        .send_cancellable_request(request, PeerRequestOptions::no_options())
        .await
        .expect("send canopy_index");
    // Cancel once the run is visibly under way.
    wait_until(|| {
        progress
            .lock()
            .expect("lock")
            .iter()
            .any(|p| p.progress > 0.0)
    })
    .await;
    handle
        .cancel(Some("the test changed its mind".into()))
        .await
        .expect("cancel");

    // The run stops: the number of indexed files settles below the total
    // and the index says it is partial.
    let status =
        || async { ok_json(&call(&client, "canopy_status", json!({"path": repo.path()})).await) };
    let mut last = u64::MAX;
    let mut settled = None;
    for _ in 0..100 {
        let now = status().await["files_indexed"]
            .as_u64()
            .expect("files_indexed");
        if now == last {
            settled = Some(now);
            break;
        }
        last = now;
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    let settled = settled.expect("indexing never settled after the cancellation");
    assert!(
        settled < FILES as u64,
        "the cancelled run went on to index all {FILES} files"
    );
    let coverage = status().await["index_coverage"].as_f64().expect("coverage");
    assert!(coverage < 1.0, "a cancelled run left coverage {coverage}");

    // Nothing was lost: the next run finishes the index.
    let report = ok_json(
        &call(
            &client,
            "canopy_index",
            json!({"path": repo.path(), "glob": "**/*"}),
        )
        .await,
    );
    assert_eq!(
        report["files_indexed"].as_u64().expect("files_indexed") + settled,
        FILES as u64,
        "{report}"
    );
    assert_eq!(status().await["files_indexed"], FILES as u64);
    client.cancel().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn results_carry_their_json_once_unless_structured_content_is_asked_for() {
    let repo = Repo::fixture();
    let args = json!({"path": repo.path(), "pattern": "token", "max_handles": 8});
    let single = connect(canopy_bin!()).await;
    let one = call(&single, "canopy_evidence_pack", args.clone()).await;
    assert!(
        one.structured_content.is_none(),
        "structuredContent sent by default"
    );
    let pack = ok_json(&one);
    assert!(
        pack["handles"].as_array().is_some_and(|h| !h.is_empty()),
        "{pack}"
    );
    let error = call(&single, "canopy_query", json!({"path": repo.path()})).await;
    assert!(error.structured_content.is_none());
    err_json(&error, "Validation");
    single.cancel().await.expect("close");

    let double = connect_with_args(
        canopy_bin!(),
        TestClient::default(),
        &["--structured-content", "true"],
    )
    .await;
    let both = call(&double, "canopy_evidence_pack", args).await;
    assert_eq!(both.structured_content.as_ref(), Some(&ok_json(&both)));
    double.cancel().await.expect("close");

    // What the second copy costs on the wire, for the record (issue 15).
    let cost = |r: &rmcp::model::CallToolResult| {
        let wire = serde_json::to_string(r).expect("serialize");
        (wire.len(), canopy_core::tokens::count_tokens(&wire))
    };
    let (one_bytes, one_tokens) = cost(&one);
    let (both_bytes, both_tokens) = cost(&both);
    println!(
        "evidence pack result: text only {one_bytes} B / {one_tokens} tokens; \
         text + structuredContent {both_bytes} B / {both_tokens} tokens"
    );
    assert!(
        both_tokens > one_tokens * 3 / 2,
        "{both_tokens} vs {one_tokens}"
    );
}

/// Issue 29: every parameter of every tool says what it is; an index needs
/// no glob; errors name the field and give a hint for that error, and a
/// malformed handle id is called malformed.
#[tokio::test(flavor = "multi_thread")]
async fn every_parameter_is_described_and_errors_teach() {
    let repo = Repo::fixture();
    let client = connect(canopy_bin!()).await;
    let path = repo.path();
    let tools = client.peer().list_all_tools().await.expect("tools/list");
    for tool in &tools {
        let schema = Value::Object(tool.input_schema.as_ref().clone());
        for (name, property) in schema["properties"].as_object().expect("properties") {
            assert!(
                property["description"]
                    .as_str()
                    .is_some_and(|d| d.len() >= 8),
                "{}.{name} has no description: {property}",
                tool.name
            );
        }
    }

    let e = err_json(
        &call(
            &client,
            "canopy_context",
            json!({"path": path, "task": "x", "budget_tokens": 5}),
        )
        .await,
        "Validation",
    );
    assert!(
        e["message"]
            .as_str()
            .is_some_and(|m| m.contains("budget_tokens")),
        "{e}"
    );
    let hint = e["hint"].as_str().unwrap_or_default();
    assert!(
        hint.contains("budget_tokens") && !hint.contains("pattern"),
        "{e}"
    );

    let long: Vec<String> = (0..80).map(|i| format!("word{i}")).collect();
    let e = err_json(
        &call(
            &client,
            "canopy_query",
            json!({"path": path, "pattern": long.join(" ")}),
        )
        .await,
        "Validation",
    );
    assert!(
        e["message"].as_str().is_some_and(|m| m.contains("pattern")),
        "{e}"
    );
    let hint = e["hint"].as_str().unwrap_or_default();
    assert!(!hint.contains("provide at least one of"), "{e}");

    let e = err_json(
        &call(
            &client,
            "canopy_expand",
            json!({"path": path, "handle_ids": ["h0123"]}),
        )
        .await,
        "MalformedHandle",
    );
    assert!(
        e["message"]
            .as_str()
            .is_some_and(|m| m.contains("malformed")),
        "{e}"
    );
    client.cancel().await.expect("close");
}
