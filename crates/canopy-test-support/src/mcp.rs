//! An MCP client for `canopy mcp` under test: the real rmcp client over the
//! child's stdio ([`connect`] and friends, the child killed when the client
//! goes), and readers for tool results ([`ok_json`], [`err_json`], [`text`]).

use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientConfig, ProgressNotificationParam, ProtocolVersion,
};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::Value;

/// An MCP client that records progress notifications.
#[derive(Clone, Default)]
pub struct TestClient {
    /// Progress notifications received, in order.
    pub progress: Arc<Mutex<Vec<ProgressNotificationParam>>>,
    /// Protocol version to request at initialization (default: the SDK's).
    pub version: Option<ProtocolVersion>,
}

impl ClientHandler for TestClient {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.progress.lock().expect("lock").push(params);
    }

    fn get_info(&self) -> ClientConfig {
        let mut info = ClientConfig::default();
        if let Some(version) = &self.version {
            info.protocol_version = version.clone();
        }
        info
    }
}

/// A connected client.
pub type Client = RunningService<RoleClient, TestClient>;

/// Starts `bin mcp` and connects to it.
pub async fn connect(bin: &Path) -> Client {
    connect_with(bin, TestClient::default()).await
}

/// Starts `bin mcp` and connects `client` to it.
pub async fn connect_with(bin: &Path, client: TestClient) -> Client {
    connect_with_args(bin, client, &[]).await
}

/// Starts `bin mcp ARGS…` and connects `client` to it.
pub async fn connect_with_args(bin: &Path, client: TestClient, args: &[&str]) -> Client {
    let mut cmd = tokio::process::Command::new(bin);
    // The server goes with the client, even when a failing test unwinds.
    cmd.arg("mcp").args(args).kill_on_drop(true);
    let stderr = if std::env::var_os("CANOPY_TEST_STDERR").is_some() {
        Stdio::inherit()
    } else {
        Stdio::null()
    };
    let (transport, _) = TokioChildProcess::builder(cmd)
        .stderr(stderr)
        .spawn()
        .expect("spawn canopy mcp");
    client.serve(transport).await.expect("MCP initialization")
}

/// Calls a tool; panics on a protocol error (tool errors are results).
pub async fn call(client: &Client, tool: &str, args: Value) -> CallToolResult {
    try_call(client, tool, args)
        .await
        .unwrap_or_else(|e| panic!("{tool}: protocol error {e}"))
}

/// Calls a tool.
pub async fn try_call(
    client: &Client,
    tool: &str,
    args: Value,
) -> Result<CallToolResult, rmcp::ServiceError> {
    let Value::Object(args) = args else {
        panic!("arguments must be an object")
    };
    client
        .peer()
        .call_tool(CallToolRequestParams::new(tool.to_string()).with_arguments(args))
        .await
}

/// `content[0].text`.
pub fn text(result: &CallToolResult) -> &str {
    result
        .content
        .first()
        .and_then(|c| c.as_text())
        .map(|t| t.text.as_str())
        .expect("text content")
}

/// A successful result's JSON (checks `structuredContent`, when sent,
/// agrees with the text).
pub fn ok_json(result: &CallToolResult) -> Value {
    assert_ne!(result.is_error, Some(true), "tool error: {}", text(result));
    let value: Value = serde_json::from_str(text(result)).expect("JSON text");
    if let Some(structured) = &result.structured_content {
        assert_eq!(structured, &value);
    }
    value
}

/// An error result's JSON, checked to carry `code`, a message and a hint.
pub fn err_json(result: &CallToolResult, code: &str) -> Value {
    assert_eq!(
        result.is_error,
        Some(true),
        "expected {code}: {}",
        text(result)
    );
    let value: Value = serde_json::from_str(text(result)).expect("JSON error");
    assert_eq!(value["code"], code, "{value}");
    assert!(
        value["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{value}"
    );
    assert!(
        value["hint"].as_str().is_some_and(|h| !h.is_empty()),
        "{value}"
    );
    value
}

/// Waits (bounded) until `done` holds.
pub async fn wait_until(mut done: impl FnMut() -> bool) {
    for _ in 0..1500 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("condition not reached within 30 s");
}
