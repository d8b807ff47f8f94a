//! Shared helpers for the end-to-end tests: locate (build) the `canopy`
//! binary, create fixture repositories, connect an rmcp client to a real
//! `canopy mcp` child process, and read tool results.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientConfig, ProgressNotificationParam, ProtocolVersion,
};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::Value;

/// The `canopy` binary: `$CANOPY_BIN`, else built once with
/// `cargo build -p canopy-cli` (its path read from cargo's JSON messages),
/// else `<workspace>/target/debug/canopy`.
pub fn canopy_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Some(bin) = std::env::var_os("CANOPY_BIN") {
            return PathBuf::from(bin);
        }
        let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
            .ancestors()
            .nth(2)
            .expect("the crate lives in <workspace>/crates/<name>")
            .to_path_buf();
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let built = std::process::Command::new(cargo)
            .current_dir(&workspace)
            .args([
                "build",
                "-p",
                "canopy-cli",
                "--bin",
                "canopy",
                "--message-format=json-render-diagnostics",
            ])
            .stderr(Stdio::inherit())
            .output();
        if let Ok(out) = built
            && out.status.success()
            && let Some(bin) = String::from_utf8_lossy(&out.stdout)
                .lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .filter(|m| m["reason"] == "compiler-artifact" && m["target"]["name"] == "canopy")
                .find_map(|m| m["executable"].as_str().map(PathBuf::from))
        {
            return bin;
        }
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| workspace.join("target"));
        let fallback = target.join("debug").join("canopy");
        assert!(
            fallback.exists(),
            "cannot build or find the canopy binary; set CANOPY_BIN"
        );
        fallback
    })
    .clone()
}

/// Files of the standard fixture repository: (path, content).
pub const FIXTURE: &[(&str, &str)] = &[
    (
        "src/lib.rs",
        "//! Demo library.

pub struct AuthController {
    secret: String,
}

impl AuthController {
    pub fn authenticate(&self, token: &str) -> bool {
        validate_token(token, &self.secret)
    }
}

pub fn validate_token(token: &str, secret: &str) -> bool {
    token == secret
}
",
    ),
    (
        "src/routes.rs",
        "use crate::AuthController;

pub fn login(controller: &AuthController, token: &str) -> bool {
    controller.authenticate(token)
}
",
    ),
    (
        "app/service.py",
        "class UserService:
    def find_user(self, user_id):
        return {\"id\": user_id}

    def delete_user(self, user_id):
        return None


def load_settings(path):
    return open(path).read()
",
    ),
    (
        "README.md",
        "# Demo

## Installation

Run `cargo build` to build the demo.
",
    ),
];

/// A fixture repository in a temporary directory (a git repository when git is available).
pub struct Repo {
    dir: tempfile::TempDir,
}

impl Repo {
    /// The standard fixture.
    pub fn fixture() -> Repo {
        Repo::with_files(FIXTURE)
    }

    /// A repository holding `files`.
    pub fn with_files(files: &[(&str, &str)]) -> Repo {
        let dir = tempfile::tempdir().expect("tempdir");
        let _ = std::process::Command::new("git")
            .args(["init", "-q"])
            .current_dir(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        std::fs::create_dir_all(dir.path().join(".git")).expect("mark the repo root");
        let repo = Repo { dir };
        for (path, content) in files {
            repo.write(path, content);
        }
        repo
    }

    /// Absolute, canonical root as a string (the `path` argument).
    /// A repository of `n` generated files: `file(i)` gives path and content.
    pub fn generated(n: usize, file: impl Fn(usize) -> (String, String)) -> Repo {
        let files: Vec<(String, String)> = (0..n).map(file).collect();
        let refs: Vec<(&str, &str)> = files
            .iter()
            .map(|(p, c)| (p.as_str(), c.as_str()))
            .collect();
        Repo::with_files(&refs)
    }

    pub fn path(&self) -> String {
        self.root().display().to_string()
    }

    /// Absolute, canonical root.
    pub fn root(&self) -> PathBuf {
        self.dir.path().canonicalize().expect("canonical root")
    }

    /// Writes a file (creating directories).
    pub fn write(&self, rel: &str, content: &str) {
        let abs = self.dir.path().join(rel);
        if let Some(parent) = abs.parent() {
            std::fs::create_dir_all(parent).expect("mkdir");
        }
        std::fs::write(abs, content).expect("write");
    }

    /// Reads a file's bytes.
    pub fn read(&self, rel: &str) -> Vec<u8> {
        std::fs::read(self.dir.path().join(rel)).expect("read")
    }
}

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

/// Starts `canopy mcp` and connects to it.
pub async fn connect() -> Client {
    connect_with(TestClient::default()).await
}

/// Starts `canopy mcp` and connects `client` to it.
pub async fn connect_with(client: TestClient) -> Client {
    connect_with_args(client, &[]).await
}

/// Starts `canopy mcp ARGS…` and connects `client` to it.
pub async fn connect_with_args(client: TestClient, args: &[&str]) -> Client {
    let mut cmd = tokio::process::Command::new(canopy_bin());
    cmd.arg("mcp").args(args);
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
