//! End-to-end: `canopy mcp --service-url` answering from a real `canopy
//! serve` over loopback, driven by the real rmcp client, with the agent's
//! uncommitted edit overlaid on the service's answers.
//!
//! They test the MCP server (`canopy-mcp`) in service mode through the
//! `canopy` binary, so they live in canopy-cli, where Cargo builds it for them.

use canopy_test_support::canopy_bin;
use canopy_test_support::git::git;
use canopy_test_support::mcp::*;
use canopy_test_support::repo::Repo;
use canopy_test_support::serve::{Opts, Server};
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread")]
async fn the_server_answers_from_the_service_with_local_edits_overlaid() {
    let repo = Repo::with_files(&[
        (
            "src/billing.py",
            "def compute_invoice_total(lines):\n    return sum(l.amount for l in lines)\n",
        ),
        (
            "src/shipping.py",
            "def track_parcel(code):\n    return carrier_lookup(code)\n",
        ),
    ]);
    git(&repo.root(), &["add", "."]);
    git(&repo.root(), &["commit", "-q", "-m", "init"]);
    let data = tempfile::tempdir().expect("data dir");
    let service = Server::start(
        canopy_bin!(),
        data.path(),
        &Opts {
            allow_roots: vec![repo.root()],
            ..Opts::default()
        },
    );
    let client = connect_with_args(
        canopy_bin!(),
        TestClient::default(),
        &[
            "--service-url",
            service.url.as_str(),
            "--service-token",
            &service.admin_token().expect("a generated token"),
        ],
    )
    .await;
    let path = repo.path();

    // canopy_index registers the repository with the service and waits for it.
    let view = ok_json(&call(&client, "canopy_index", json!({"path": path, "glob": "**"})).await);
    assert!(
        view["generation"].as_u64().is_some_and(|g| g >= 1),
        "{view}"
    );

    // An answer from the service: handles carry its generation.
    let q = ok_json(
        &call(
            &client,
            "canopy_query",
            json!({"path": path, "symbol": "track_parcel"}),
        )
        .await,
    );
    let h = &q["handles"][0];
    assert_eq!(h["source"], "service", "{q}");
    assert!(h["generation"].is_u64(), "{q}");

    // An uncommitted edit moves compute_invoice_total down two lines: the
    // answer comes from the local overlay, with the new lines, never the
    // service's old ones.
    repo.write(
        "src/billing.py",
        "# Totals.\n\ndef compute_invoice_total(lines):\n    return sum(l.amount * l.qty for l in lines)\n",
    );
    let q = ok_json(
        &call(
            &client,
            "canopy_query",
            json!({"path": path, "symbol": "compute_invoice_total"}),
        )
        .await,
    );
    let h = &q["handles"][0];
    assert_eq!(h["source"], "local", "{q}");
    assert_eq!(h["line_range"], json!([3, 4]), "{q}");
    assert_eq!(q["overlay"]["dirty_files"], 1, "{q}");
    let id = h["id"].as_str().expect("id").to_string();
    let expanded = call(
        &client,
        "canopy_expand",
        json!({"path": path, "handle_ids": [id]}),
    )
    .await;
    assert!(
        text(&expanded).contains("l.amount * l.qty"),
        "{}",
        text(&expanded)
    );

    // Context packs and the graph are answered too; a local-only tool says why not.
    // The wire form: a JSON header, then one plain-text block per fragment.
    let ctx = call(
        &client,
        "canopy_context",
        json!({"path": path, "task": "fix how an invoice total is computed", "budget_tokens": 500}),
    )
    .await;
    assert_ne!(ctx.is_error, Some(true), "{}", text(&ctx));
    let blocks: Vec<&str> = ctx
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.as_str()))
        .collect();
    let header: Value = serde_json::from_str(blocks[0]).expect("JSON header");
    assert_eq!(header["budget_tokens"], 500, "{header}");
    let local = blocks
        .iter()
        .find(|b| b.starts_with("--- src/billing.py:"))
        .unwrap_or_else(|| panic!("the edited file's fragment: {blocks:?}"));
    assert!(local.contains("l.qty"), "{local}");
    let graph = ok_json(
        &call(
            &client,
            "canopy_analysis",
            json!({"path": path, "op": "summary", "target": "src/shipping.py"}),
        )
        .await,
    );
    assert!(graph.get("generation").is_some(), "{graph}");
    let refused = call(&client, "canopy_invalidate", json!({"path": path})).await;
    let err: Value = err_json(&refused, "NotInServiceMode");
    assert!(
        err["hint"]
            .as_str()
            .is_some_and(|h| h.contains("canopy_query")),
        "{err}"
    );
    client.cancel().await.expect("close");
}
