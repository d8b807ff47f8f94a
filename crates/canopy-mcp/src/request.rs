//! A tool call's arguments, validated once into what the backend is asked
//! ([`ToolRequest`]): every check a tool makes of its arguments is here,
//! before any index or service is touched.

use canopy_client::request::{Context, Expand, GraphQuery, IndexRequest, Pack, Query};
use canopy_core::graph::request::GraphOp;
use canopy_core::resultset::RefineParams;

use crate::error::ToolError;
use crate::tools::{Args, ToolName};

/// What a tool call asks.
pub(crate) enum ToolRequest {
    Query(Query),
    Pack(Pack),
    Context(Context),
    Expand(Expand),
    Graph(GraphQuery),
    Status,
    Index(IndexRequest),
    Invalidate(Option<String>),
    Refine(RefineParams),
}

impl ToolRequest {
    /// The request of a `tool` call with `args` (already checked against
    /// the tool's schema by `parse_args`).
    pub(crate) fn parse(tool: ToolName, args: Args) -> Result<ToolRequest, ToolError> {
        Ok(match tool {
            ToolName::Query => ToolRequest::Query(Query::new(args.query_params())?),
            ToolName::EvidencePack => ToolRequest::Pack(Pack::new(args.pack_params())?),
            ToolName::Context => ToolRequest::Context(Context::new(args.context_params())?),
            ToolName::Expand => {
                let ids = args.handle_ids.unwrap_or_default();
                ToolRequest::Expand(Expand::new(ids).ok_or_else(|| {
                    ToolError::InvalidArguments(
                        "handle_ids is empty: pass the ids of handles returned by a query".into(),
                    )
                })?)
            }
            // `canopy_graph` offers the navigation operations only,
            // `canopy_analysis` the analyses only.
            ToolName::Graph => {
                ToolRequest::Graph(GraphQuery::new(args.graph_request(&GraphOp::NAVIGATION)?)?)
            }
            ToolName::Analysis => {
                ToolRequest::Graph(GraphQuery::new(args.graph_request(&GraphOp::ANALYSIS)?)?)
            }
            ToolName::Status => ToolRequest::Status,
            ToolName::Index => ToolRequest::Index(IndexRequest {
                glob: args.search.glob,
                rebuild: args.rebuild == Some(true),
            }),
            ToolName::Invalidate => ToolRequest::Invalidate(args.search.glob),
            ToolName::Refine => {
                let params = args.refine_params();
                if params.result_set.is_empty() {
                    return Err(ToolError::InvalidArguments(
                        "result_set must be the id string returned by canopy_query or canopy_evidence_pack".into(),
                    ));
                }
                ToolRequest::Refine(params)
            }
        })
    }
}
