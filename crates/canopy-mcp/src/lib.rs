//! `canopy mcp`: the MCP stdio server. (Being implemented.)

/// Arguments of `canopy mcp`.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct McpArgs {}

/// Serves MCP on stdin/stdout until the client disconnects.
pub fn run_stdio(_args: McpArgs) -> anyhow::Result<()> {
    anyhow::bail!("the MCP server is not implemented yet")
}
