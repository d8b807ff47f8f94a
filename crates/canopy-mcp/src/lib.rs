//! # canopy-mcp
//!
//! `canopy mcp`: Canopy's Model Context Protocol server over stdio, built on
//! the official Rust SDK (`rmcp`). It owns the MCP surface of the agent
//! contract (seed `004_…`) and nothing else: each tool call's arguments are
//! validated into one request (`request`) and answered by a
//! `canopy_client::backend::Backend` — the repository's own engine, or with
//! `--service-url` a running `canopy serve` — in one dispatcher (`server`);
//! every behaviour lives in `canopy-core`.
//!
//! * **Tools**: `canopy_evidence_pack`, `canopy_query`, `canopy_expand`,
//!   `canopy_status`, `canopy_index`, `canopy_invalidate`, each taking
//!   `path`, the absolute repository root. Results are compact JSON in
//!   `content[0].text`, once: a client shows the model either the text or
//!   `structuredContent`, never needs both, and every client reads the
//!   text, so the structured copy (which doubled every result's bytes) is
//!   sent only with `--structured-content true`, for programs that read
//!   it; then the two never differ. `canopy_expand` returns plain text
//!   `// <id>` blocks. Failures are tool results with `isError: true` and
//!   `{"code", "message", "hint"}`. No output schemas are declared: they
//!   would add ~40% to the `tools/list` cost (see `tools.rs`).
//! * **Many repositories**: one server serves any number of repositories; an
//!   engine is kept open per canonical root (least recently used closed
//!   first, `--max-engines`). A repository's first query indexes it on the
//!   blocking pool, reporting `notifications/progress` when the request
//!   carries a progress token (repositories over the engine's lazy-indexing
//!   threshold are indexed predictively instead, without progress, and
//!   completed in the background); other calls proceed meanwhile. A graph
//!   call needs the whole index: it waits for the background completion
//!   and reports the completion's progress as its own.
//! * **Sessions**: each connection is one session for the convergence
//!   memory of evidence packs and expansions.
//! * **Robust stdio**: stdout carries only protocol messages (logs go to
//!   stderr); malformed input gets a JSON-RPC error and the server keeps
//!   serving.
//!
//! ## Registering with an MCP client
//!
//! Claude Code:
//!
//! ```text
//! claude mcp add canopy -- canopy mcp
//! ```
//!
//! Any client that reads an `mcpServers` configuration:
//!
//! ```json
//! { "mcpServers": { "canopy": { "command": "canopy", "args": ["mcp"] } } }
//! ```
//!
//! Set `CANOPY_LOG=debug` in the server's environment for logs on stderr.

#![warn(missing_docs)]

mod engines;
mod error;
mod request;
mod server;
mod tools;
mod transport;

use std::time::Duration;

use anyhow::Context;
use canopy_core::EngineOptions;
use rmcp::ServiceExt;
use tools::ToolName;

/// Default for `--max-engines`.
pub const DEFAULT_MAX_ENGINES: usize = 8;

/// How to register it with an MCP client (shown by `canopy mcp --help`).
const SETUP_HELP: &str = "\
Register with Claude Code:
  claude mcp add canopy -- canopy mcp

Register with any client that reads an mcpServers configuration:
  { \"mcpServers\": { \"canopy\": { \"command\": \"canopy\", \"args\": [\"mcp\"] } } }
";

/// The text `canopy mcp --help` ends with: how to register the server and
/// every tool it serves, built from the same list `tools/list` answers
/// with so the two cannot drift apart.
pub fn help_text() -> String {
    let mut text = String::from(SETUP_HELP);
    text.push_str("\nTools (each takes `path`, the absolute repository root; one server serves any number of repositories):\n");
    let width = ToolName::ALL
        .iter()
        .map(|t| t.as_str().len())
        .max()
        .unwrap_or(0);
    for tool in ToolName::ALL {
        text.push_str(&format!("  {:width$}  {}\n", tool.as_str(), tool.summary()));
    }
    text.push_str(
        "\nLogs go to stderr (CANOPY_LOG=debug for more); stdout carries only the protocol.",
    );
    text
}

/// Serve Canopy's tools over the Model Context Protocol on stdin/stdout.
///
/// Register with Claude Code: `claude mcp add canopy -- canopy mcp`.
/// Any other client: `{"mcpServers": {"canopy": {"command": "canopy", "args": ["mcp"]}}}`.
#[derive(clap::Args, Debug, Clone)]
pub struct McpArgs {
    /// Most repositories kept open at once (the least recently used is closed first).
    #[arg(long, default_value_t = DEFAULT_MAX_ENGINES)]
    pub max_engines: usize,
    /// Keep every open repository's index fresh from file-system events
    /// (`--watch false` to turn it off: then queries see edits after
    /// `canopy_invalidate` or the next `canopy index`).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub watch: bool,
    /// Also send each JSON result as `structuredContent` (MCP 2025-06-18),
    /// for programs that read it. Off by default: the JSON already is in
    /// the text block every client reads, and a second copy doubles the
    /// bytes of every result (clients show the model one or the other).
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set)]
    pub structured_content: bool,
    /// How every engine is opened (the binary's global flags, e.g. `--max-file-size`).
    #[arg(skip)]
    pub engine_options: EngineOptions,
    /// Answer from a running `canopy serve` (the binary's global
    /// `--service-url`), with the agent's uncommitted edits overlaid.
    #[arg(skip)]
    pub service: Option<ServiceMode>,
}

/// Service mode of the MCP server: every repository named in a call is the
/// service's registered repository containing it; files `git status`
/// reports as changed are indexed locally and merged over the answers
/// (handles `source: "local"`), so line numbers never predate the agent's
/// own edits.
#[derive(Clone, Debug)]
pub struct ServiceMode {
    /// Base URL of the service.
    pub url: String,
    /// Bearer token, if the service wants one.
    pub token: Option<String>,
}

impl Default for McpArgs {
    fn default() -> Self {
        McpArgs {
            max_engines: DEFAULT_MAX_ENGINES,
            watch: true,
            structured_content: false,
            engine_options: EngineOptions::default(),
            service: None,
        }
    }
}

/// Serves MCP on stdin/stdout until the client disconnects (closes stdin).
///
/// Builds its own tokio runtime; engine calls run on its blocking pool.
pub fn run_stdio(args: McpArgs) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("canopy-mcp")
        .build()
        .context("cannot start the async runtime")?;
    let result = runtime.block_on(serve_stdio(args));
    // Index runs still in flight are abandoned (each batch is a transaction).
    runtime.shutdown_timeout(Duration::from_secs(2));
    result
}

async fn serve_stdio(args: McpArgs) -> anyhow::Result<()> {
    let (stdin, stdout) = rmcp::transport::stdio_pipes();
    let transport = transport::LineTransport::new(stdin, stdout);
    let server = server::CanopyServer::new(
        args.max_engines,
        args.engine_options,
        // In service mode the service keeps the index fresh; nothing local to watch.
        args.watch && args.service.is_none(),
        args.structured_content,
    )
    .with_service(args.service);
    let running = server
        .serve(transport)
        .await
        .context("MCP initialization failed")?;
    tracing::info!("MCP server ready");
    let reason = running.waiting().await.context("MCP server failed")?;
    tracing::info!(?reason, "MCP server stopped");
    Ok(())
}
