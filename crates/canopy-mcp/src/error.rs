//! Tool errors and how they reach the agent: a tool result with
//! `isError: true` whose text is `{"code", "message", "hint"}` (the same
//! shape as the HTTP service's errors), never a protocol error.

use canopy_core::CanopyError;
use rmcp::model::CallToolResult;
use serde_json::json;

/// Everything a tool call can fail with.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ToolError {
    /// The engine refused or failed the operation.
    #[error(transparent)]
    Core(#[from] CanopyError),
    /// The arguments do not match the tool's input schema.
    #[error("{0}")]
    InvalidArguments(String),
    /// `path` is relative, missing or not a directory.
    #[error("{0}")]
    InvalidPath(String),
    /// A bug: a panicked or lost worker task.
    #[error("internal error: {0}")]
    Internal(String),
    /// Service mode: the service failed or refused the call (its code is in the message).
    #[error("{0:#}")]
    Service(anyhow::Error),
    /// Service mode: the tool has no service counterpart.
    #[error("{0}")]
    NotInServiceMode(String),
}

impl ToolError {
    /// Stable machine-readable code (the core's codes, plus `InvalidPath`).
    pub(crate) fn code(&self) -> &'static str {
        match self {
            ToolError::Core(e) => e.code(),
            ToolError::InvalidArguments(_) => "Validation",
            ToolError::InvalidPath(_) => "InvalidPath",
            ToolError::Internal(_) => "Internal",
            ToolError::Service(_) => "ServiceError",
            ToolError::NotInServiceMode(_) => "NotInServiceMode",
        }
    }

    /// What the agent should do next, phrased in terms of the MCP tools.
    pub(crate) fn hint(&self) -> &'static str {
        match self {
            ToolError::Core(CanopyError::IndexDamaged { .. } | CanopyError::Database(_)) => {
                "call canopy_index with rebuild=true to rebuild the index, then re-query"
            }
            ToolError::Core(CanopyError::NotARepository { .. }) => {
                "pass the root of a git repository; to use Canopy on a folder outside git, the user runs `canopy index <folder>` once by hand"
            }
            ToolError::Core(CanopyError::HandleNotFound { .. }) => {
                "re-run canopy_query or canopy_evidence_pack to get fresh handle ids"
            }
            ToolError::Core(CanopyError::StaleIndex { .. }) => {
                "call canopy_invalidate (glob may name the changed file), then re-query for fresh handles"
            }
            ToolError::Core(CanopyError::GlobPattern { .. }) => {
                "use **/*.ext style globs relative to the repo root, e.g. src/**/*.rs"
            }
            ToolError::Core(e) => e.hint(),
            ToolError::InvalidArguments(_) => {
                "fix the arguments to match the tool's input schema; path (absolute repo root) is always required"
            }
            ToolError::InvalidPath(_) => {
                "pass the absolute path of an existing repository root, e.g. /home/me/project"
            }
            ToolError::Internal(_) => "retry once; if it persists, report a canopy bug",
            ToolError::Service(_) => {
                "the Canopy service (--service-url) answered with an error: the message has its code; \
                 register the repository (canopy_index) if it is not, or retry once the service is up"
            }
            ToolError::NotInServiceMode(_) => {
                "this server answers from a shared service: use canopy_query, canopy_evidence_pack, \
                 canopy_context, canopy_expand, canopy_graph, canopy_analysis, canopy_status or canopy_index"
            }
        }
    }

    /// The error as a tool result (`isError: true`).
    pub(crate) fn into_result(self) -> CallToolResult {
        CallToolResult::structured_error(json!({
            "code": self.code(),
            "message": self.to_string(),
            "hint": self.hint(),
        }))
    }
}
