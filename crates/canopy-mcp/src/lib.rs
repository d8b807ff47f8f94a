//! # canopy-mcp
//!
//! `canopy mcp`: Canopy's Model Context Protocol server over stdio, built on
//! the official Rust SDK (`rmcp`). It owns the MCP surface of the agent
//! contract (seed `004_…`) and nothing else; every behaviour lives in
//! `canopy-core`.
//!
//! * **Tools**: `canopy_evidence_pack`, `canopy_query`, `canopy_expand`,
//!   `canopy_status`, `canopy_index`, `canopy_invalidate`, each taking
//!   `path`, the absolute repository root. Results are compact JSON in
//!   `content[0].text`, and the same value as `structuredContent` (some
//!   clients, Claude Code among them, show the model only the structured
//!   value, so the two never differ); `canopy_expand` returns plain text
//!   `// <id>` blocks. Failures are tool results with `isError: true` and
//!   `{"code", "message", "hint"}`. No output schemas are declared: they
//!   would add ~40% to the `tools/list` cost (see `tools.rs`).
//! * **Many repositories**: one server serves any number of repositories; an
//!   engine is kept open per canonical root (least recently used closed
//!   first, `--max-engines`). A repository's first query indexes it on the
//!   blocking pool, reporting `notifications/progress` when the request
//!   carries a progress token (repositories over the engine's lazy-indexing
//!   threshold are indexed predictively instead, without progress); other
//!   calls proceed meanwhile.
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
mod server;
mod tools;
mod transport;

use std::time::Duration;

use anyhow::Context;
use canopy_core::EngineOptions;
use rmcp::ServiceExt;

/// Default for `--max-engines`.
pub const DEFAULT_MAX_ENGINES: usize = 8;

/// How to register it with an MCP client (shown by `canopy mcp --help`).
const SETUP_HELP: &str = "\
Register with Claude Code:
  claude mcp add canopy -- canopy mcp

Register with any client that reads an mcpServers configuration:
  { \"mcpServers\": { \"canopy\": { \"command\": \"canopy\", \"args\": [\"mcp\"] } } }

Tools: canopy_evidence_pack, canopy_query, canopy_expand, canopy_status,
canopy_index, canopy_invalidate. Each takes `path`, the absolute repository
root; one server serves any number of repositories. Logs go to stderr
(CANOPY_LOG=debug for more).";

/// Serve Canopy's tools over the Model Context Protocol on stdin/stdout.
///
/// Register with Claude Code: `claude mcp add canopy -- canopy mcp`.
/// Any other client: `{"mcpServers": {"canopy": {"command": "canopy", "args": ["mcp"]}}}`.
#[derive(clap::Args, Debug, Clone)]
#[command(after_help = SETUP_HELP)]
pub struct McpArgs {
    /// Most repositories kept open at once (the least recently used is closed first).
    #[arg(long, default_value_t = DEFAULT_MAX_ENGINES)]
    pub max_engines: usize,
    /// Keep every open repository's index fresh from file-system events
    /// (`--watch false` to turn it off: then queries see edits after
    /// `canopy_invalidate` or the next `canopy index`).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub watch: bool,
    /// How every engine is opened (the binary's global flags, e.g. `--max-file-size`).
    #[arg(skip)]
    pub engine_options: EngineOptions,
}

impl Default for McpArgs {
    fn default() -> Self {
        McpArgs {
            max_engines: DEFAULT_MAX_ENGINES,
            watch: true,
            engine_options: EngineOptions::default(),
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
    let server = server::CanopyServer::new(args.max_engines, args.engine_options, args.watch);
    let running = server
        .serve(transport)
        .await
        .context("MCP initialization failed")?;
    tracing::info!("MCP server ready");
    let reason = running.waiting().await.context("MCP server failed")?;
    tracing::info!(?reason, "MCP server stopped");
    Ok(())
}
