//! The MCP server: tool dispatch onto [`canopy_core::Engine`], one session
//! per connection, progress notifications while indexing.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use canopy_core::discover::discover;
use canopy_core::index::IndexProgress;
use canopy_core::lazy::LAZY_THRESHOLD;
use canopy_core::model::IndexReport;
use canopy_core::query::QueryParams;
use canopy_core::{Engine, EngineOptions};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ProgressNotificationParam, ProgressToken,
    ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, Peer, RoleServer, ServerHandler};
use serde::Serialize;
use tokio::sync::mpsc;

use crate::engines::{EngineCache, Repo, blocking};
use crate::error::ToolError;
use crate::tools::{Args, ToolName, parse_args};
use canopy_core::graph::request::GraphOp;

/// Shown to the client at initialization (many clients give it to the model).
const INSTRUCTIONS: &str = "Canopy indexes code for token-efficient retrieval. Workflow: \
canopy_evidence_pack (or canopy_query) -> read handles -> canopy_expand only the ones you need. \
Pass the absolute repo root as path. Errors carry a code and a hint saying what to do next.";

/// Distinguishes the sessions of connections served by one process.
static NEXT_SESSION: AtomicU64 = AtomicU64::new(1);

/// One connection's server: shares the engine cache, owns a session id.
#[derive(Clone)]
pub(crate) struct CanopyServer {
    engines: Arc<EngineCache>,
    tools: Arc<Vec<Tool>>,
    session: Arc<str>,
    /// Whether results carry `structuredContent` besides the text (see
    /// `McpArgs::structured_content`).
    structured_content: bool,
    /// Service mode: answer from a running `canopy serve` (see `crate::ServiceMode`).
    service: Option<Arc<crate::ServiceMode>>,
}

impl CanopyServer {
    /// A server for one connection, keeping at most `max_engines` repositories open.
    pub(crate) fn new(
        max_engines: usize,
        engine_options: EngineOptions,
        watch: bool,
        structured_content: bool,
    ) -> CanopyServer {
        let session = format!(
            "mcp-{}-{}",
            std::process::id(),
            NEXT_SESSION.fetch_add(1, Ordering::Relaxed)
        );
        CanopyServer {
            engines: Arc::new(EngineCache::new(max_engines, engine_options).watching(watch)),
            tools: Arc::new(ToolName::ALL.iter().map(|t| t.definition()).collect()),
            structured_content,
            session: session.into(),
            service: None,
        }
    }

    /// Answers from the service at `service` instead of local indexes.
    pub(crate) fn with_service(mut self, service: Option<crate::ServiceMode>) -> CanopyServer {
        self.service = service.map(Arc::new);
        self
    }

    /// Service mode: the tool's service counterpart, with the overlay.
    async fn dispatch_remote(
        &self,
        service: Arc<crate::ServiceMode>,
        tool: ToolName,
        args: Args,
    ) -> Result<CallToolResult, ToolError> {
        use canopy_client::remote::RemoteRepo;
        let path = args.path.clone().unwrap_or_default();
        let start = std::path::PathBuf::from(&path);
        if !start.is_absolute() || !start.is_dir() {
            return Err(ToolError::InvalidPath(format!(
                "path must be the absolute path of a repository directory, not {path:?}"
            )));
        }
        if matches!(tool, ToolName::Refine | ToolName::Invalidate) {
            return Err(ToolError::NotInServiceMode(format!(
                "{} works on a local index; this server answers from the service at {}",
                tool.as_str(),
                service.url
            )));
        }
        let options = self.engines.options().clone();
        let session = Some(self.session.to_string());
        // Graph requests are parsed (and refused) here, before any network call.
        let graph = match tool {
            ToolName::Graph | ToolName::Analysis => Some(graph_request(tool, &args)?),
            _ => None,
        };
        let outcome = tokio::task::spawn_blocking(move || -> Result<Remote, ToolError> {
            let remote = |e: anyhow::Error| ToolError::Service(e);
            if tool == ToolName::Index {
                let view = RemoteRepo::index(&service.url, service.token.clone(), &start)
                    .map_err(remote)?;
                return Ok(Remote::Json(
                    serde_json::to_value(view).map_err(|e| ToolError::Internal(e.to_string()))?,
                ));
            }
            let repo = RemoteRepo::connect(
                &service.url,
                service.token.clone(),
                session,
                &start,
                options,
            )
            .map_err(remote)?;
            Ok(match tool {
                ToolName::Query => {
                    let params = args.query_params();
                    params.validate()?;
                    params.to_expr()?;
                    Remote::Json(value(repo.query(&params).map_err(remote)?)?)
                }
                ToolName::EvidencePack => {
                    let params = args.pack_params();
                    params.query.validate()?;
                    params.query.to_expr()?;
                    Remote::Json(value(repo.pack(&params).map_err(remote)?)?)
                }
                ToolName::Context => {
                    let params = args.context_params();
                    params.validate()?;
                    Remote::Json(value(repo.context(&params).map_err(remote)?)?)
                }
                ToolName::Expand => {
                    let ids = args.handle_ids.clone().unwrap_or_default();
                    if ids.is_empty() {
                        return Err(ToolError::InvalidArguments(
                            "handle_ids is empty: pass the ids of handles returned by a query"
                                .into(),
                        ));
                    }
                    let expanded = repo.expand(&ids).map_err(remote)?;
                    let text = expansion_text(
                        expanded
                            .contents
                            .iter()
                            .map(|c| (c.handle_id.as_str(), c.content.as_str())),
                    );
                    let freshness = serde_json::json!({"freshness": {
                        "generation": expanded.at.as_ref().map(|at| at.generation),
                        "commit_sha": expanded.at.as_ref().and_then(|at| at.commit_sha.as_ref()),
                        "overlay": expanded.overlay,
                    }});
                    Remote::Text(text, freshness.to_string())
                }
                ToolName::Status => Remote::Json(value(repo.status().map_err(remote)?)?),
                ToolName::Graph | ToolName::Analysis => {
                    let request = graph
                        .as_ref()
                        .ok_or_else(|| ToolError::Internal("no graph request".into()))?;
                    Remote::Json(value(repo.graph(request).map_err(remote)?)?)
                }
                ToolName::Index | ToolName::Refine | ToolName::Invalidate => {
                    return Err(ToolError::Internal("handled above".into()));
                }
            })
        })
        .await
        .map_err(|e| ToolError::Internal(e.to_string()))??;
        match outcome {
            Remote::Json(value) => Ok(CallToolResult::structured(value)),
            Remote::Text(text, freshness) => Ok(CallToolResult::success(vec![
                ContentBlock::text(text),
                ContentBlock::text(freshness),
            ])),
        }
    }

    async fn dispatch(
        &self,
        tool: ToolName,
        args: Args,
        progress: Progress,
    ) -> Result<CallToolResult, ToolError> {
        if let Some(service) = &self.service {
            return self.dispatch_remote(service.clone(), tool, args).await;
        }
        let path = args.path.clone().unwrap_or_default();
        if tool == ToolName::Status {
            // Read-only: a repository nobody indexed gets `indexed: false`,
            // not an empty `.canopy/`.
            return match self.engines.get_existing(&path).await? {
                Ok(repo) => run(&repo, Engine::status).await.and_then(json),
                Err(root) => {
                    let options = self.engines.options().clone();
                    let status =
                        tokio::task::spawn_blocking(move || Engine::peek_status(&root, options))
                            .await
                            .map_err(|e| ToolError::Internal(e.to_string()))??;
                    json(status)
                }
            };
        }
        let repo = self.engines.get(&path).await?;
        match tool {
            ToolName::Query => {
                let params = args.query_params();
                params.validate()?;
                params.to_expr()?;
                ensure_indexed(&repo, &params, &progress).await?;
                run(&repo, move |e| e.query(&params)).await.and_then(json)
            }
            ToolName::EvidencePack => {
                let params = args.pack_params();
                params.query.validate()?;
                params.query.to_expr()?;
                ensure_indexed(&repo, &params.query, &progress).await?;
                let session = self.session.clone();
                run(&repo, move |e| e.evidence_pack(&params, Some(&session)))
                    .await
                    .and_then(json)
            }
            ToolName::Context => {
                let params = args.context_params();
                params.validate()?;
                let probe = canopy_core::query::QueryParams {
                    pattern: Some(params.task.clone()),
                    ..Default::default()
                };
                ensure_indexed(&repo, &probe, &progress).await?;
                run(&repo, move |e| e.context(&params)).await.and_then(json)
            }
            ToolName::Expand => {
                let ids = args.handle_ids.unwrap_or_default();
                if ids.is_empty() {
                    return Err(ToolError::InvalidArguments(
                        "handle_ids is empty: pass the ids of handles returned by a query".into(),
                    ));
                }
                let session = self.session.clone();
                let out = run(&repo, move |e| e.expand_in_session(&ids, Some(&session))).await?;
                // The contract's text first; freshness in a second block, so
                // a client that reads content[0] sees exactly the contract.
                let freshness = out.first().map(|e| {
                    serde_json::json!({"freshness": {
                        "generation": e.generation,
                        "indexed_at": e.indexed_at,
                        "stale_files": 0,
                        "checked_files": out.iter().map(|e| &e.file_path).collect::<std::collections::HashSet<_>>().len(),
                    }})
                    .to_string()
                });
                let mut content = vec![ContentBlock::text(expansion_text(
                    out.iter()
                        .map(|e| (e.handle_id.as_str(), e.content.as_str())),
                ))];
                content.extend(freshness.map(ContentBlock::text));
                Ok(CallToolResult::success(content))
            }
            ToolName::Status => run(&repo, Engine::status).await.and_then(json),
            ToolName::Refine => {
                let params = args.refine_params();
                if params.result_set.is_empty() {
                    return Err(ToolError::InvalidArguments(
                        "result_set must be the id string returned by canopy_query or canopy_evidence_pack".into(),
                    ));
                }
                run(&repo, move |e| e.refine(&params)).await.and_then(json)
            }
            ToolName::Graph | ToolName::Analysis => {
                let request = graph_request(tool, &args)?;
                ensure_complete(&repo, &progress).await?;
                run(&repo, move |e| e.graph_request(&request))
                    .await
                    .and_then(json)
            }
            ToolName::Index => {
                let glob = args.glob;
                let rebuild = args.rebuild == Some(true);
                index_with_progress(&repo, progress, move |e, p| {
                    if rebuild {
                        e.rebuild(p)
                    } else {
                        e.index(glob.as_deref(), p)
                    }
                })
                .await
                .and_then(json)
            }
            ToolName::Invalidate => {
                let glob = args.glob;
                index_with_progress(&repo, progress, move |e, p| {
                    e.invalidate(glob.as_deref(), p)
                })
                .await
                .and_then(json)
            }
        }
    }
}

impl ServerHandler for CanopyServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("canopy", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools.as_ref().clone()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.tools.iter().find(|t| t.name == name).cloned()
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let Some(tool) = ToolName::from_name(&request.name) else {
            return Err(ErrorData::invalid_params(
                format!("unknown tool {:?}", request.name),
                None,
            ));
        };
        let progress = Progress {
            peer: context.peer.clone(),
            token: context.meta.get_progress_token(),
        };
        // The client may cancel the call (`notifications/cancelled`, or by
        // going away): rmcp then cancels `context.ct`, which raises the flag
        // the engine work checks (see `canopy_core::cancel`), so the work
        // stops instead of running on for a caller that left.
        let cancel = canopy_core::cancel::CancelFlag::new();
        let on_cancel = {
            let cancel = cancel.clone();
            let ct = context.ct.clone();
            tokio::spawn(async move {
                ct.cancelled().await;
                tracing::debug!(tool = tool.as_str(), "tool call cancelled by the client");
                cancel.cancel();
            })
        };
        let result = match parse_args(tool, request.arguments) {
            Ok(args) => {
                crate::engines::REQUEST_CANCEL
                    .scope(cancel, self.dispatch(tool, args, progress))
                    .await
            }
            Err(e) => Err(e),
        };
        on_cancel.abort();
        let mut result = result.unwrap_or_else(|e| {
            tracing::debug!(tool = tool.as_str(), code = e.code(), "tool error: {e}");
            e.into_result()
        });
        if !self.structured_content {
            // The same JSON is in the text block (see `McpArgs::structured_content`).
            result.structured_content = None;
        }
        Ok(result.into())
    }
}

/// A successful result: compact JSON in `content[0].text` and as
/// `structuredContent` (dropped in `call_tool` unless asked for).
fn json<T: Serialize>(value: T) -> Result<CallToolResult, ToolError> {
    serde_json::to_value(value)
        .map(CallToolResult::structured)
        .map_err(|e| ToolError::Internal(format!("cannot serialize the result: {e}")))
}

/// The validated graph request of a `canopy_graph` (navigation operations
/// only) or `canopy_analysis` (analysis operations only) call.
fn graph_request(
    tool: ToolName,
    args: &Args,
) -> Result<canopy_core::graph::request::GraphRequest, ToolError> {
    let offered: &[GraphOp] = if tool == ToolName::Graph {
        &GraphOp::NAVIGATION
    } else {
        &GraphOp::ANALYSIS
    };
    let request = args.graph_request(offered)?;
    request.validate()?;
    Ok(request)
}

/// A service answer as JSON (its keys sorted, as the wire has them).
fn value<T: Serialize>(answer: T) -> Result<serde_json::Value, ToolError> {
    serde_json::to_value(answer).map_err(|e| ToolError::Internal(e.to_string()))
}

/// A service-mode answer: JSON, or `canopy_expand`'s text and its freshness block.
enum Remote {
    Json(serde_json::Value),
    Text(String, String),
}

/// `canopy_expand`'s text: one `// <id>` block per handle.
fn expansion_text<'a>(expansions: impl IntoIterator<Item = (&'a str, &'a str)>) -> String {
    let mut out = String::new();
    for (i, (id, content)) in expansions.into_iter().enumerate() {
        if i > 0 {
            out.push_str(if out.ends_with('\n') { "\n" } else { "\n\n" });
        }
        out.push_str("// ");
        out.push_str(id);
        out.push('\n');
        out.push_str(content);
    }
    out
}

/// Runs an engine operation on the blocking pool.
async fn run<T, F>(repo: &Arc<Repo>, op: F) -> Result<T, ToolError>
where
    F: FnOnce(&Engine) -> canopy_core::Result<T> + Send + 'static,
    T: Send + 'static,
{
    let repo = repo.clone();
    Ok(blocking(move || op(&repo.engine)).await??)
}

/// Indexes the repository if it never was, once even under concurrent calls.
///
/// A repository up to [`LAZY_THRESHOLD`] files gets a full index run that
/// reports progress. A larger one is left to the engine's predictive lazy
/// indexing ([`Engine::prepare_for`]: the files the query points at first,
/// the rest in the background), which takes no progress sink yet, so it
/// reports none.
async fn ensure_indexed(
    repo: &Arc<Repo>,
    params: &QueryParams,
    progress: &Progress,
) -> Result<(), ToolError> {
    if run(repo, Engine::is_indexed).await? {
        return Ok(());
    }
    let _first = repo.first_index.lock().await;
    if run(repo, Engine::is_indexed).await? {
        return Ok(());
    }
    let params = params.clone();
    index_with_progress(repo, progress.clone(), move |e, p| {
        let candidates = discover(e.root(), e.options().max_file_size, None)?
            .files
            .len();
        if candidates <= LAZY_THRESHOLD {
            e.index(None, p)
        } else {
            e.prepare_for(&params).map(|_| IndexReport::default())
        }
    })
    .await?;
    Ok(())
}

/// Indexes the whole repository unless its index is complete: graph answers
/// read from a partial (lazily started) index would silently miss callers.
async fn ensure_complete(repo: &Arc<Repo>, progress: &Progress) -> Result<(), ToolError> {
    if run(repo, |e| Ok(e.is_indexed()? && e.is_complete()?)).await? {
        return Ok(());
    }
    let _first = repo.first_index.lock().await;
    if run(repo, |e| Ok(e.is_indexed()? && e.is_complete()?)).await? {
        return Ok(());
    }
    index_with_progress(repo, progress.clone(), move |e, p| e.index(None, p)).await?;
    Ok(())
}

/// Where progress notifications go: the caller's progress token, if it sent one.
#[derive(Clone)]
struct Progress {
    peer: Peer<RoleServer>,
    token: Option<ProgressToken>,
}

/// Runs an index operation on the blocking pool, forwarding its progress as
/// `notifications/progress` (strictly increasing, at most about one per percent).
async fn index_with_progress<F>(
    repo: &Arc<Repo>,
    progress: Progress,
    op: F,
) -> Result<IndexReport, ToolError>
where
    F: FnOnce(&Engine, &dyn IndexProgress) -> canopy_core::Result<IndexReport> + Send + 'static,
{
    let (tx, mut rx) = mpsc::unbounded_channel();
    let sink = ChannelProgress::new(tx);
    let repo = repo.clone();
    let cancel = crate::engines::request_cancel_flag();
    let job = tokio::task::spawn_blocking(move || {
        canopy_core::cancel::within(&cancel, || op(&repo.engine, &sink))
    });
    let mut last: Option<u64> = None;
    // The channel closes when the job drops its sink, i.e. when it is done.
    while let Some((done, total)) = rx.recv().await {
        let Some(token) = &progress.token else {
            continue;
        };
        if last.is_some_and(|l| done <= l) {
            continue;
        }
        last = Some(done);
        let note = ProgressNotificationParam::new(token.clone(), done as f64)
            .with_total(total as f64)
            .with_message(format!("indexing: {done}/{total} files"));
        if let Err(e) = progress.peer.notify_progress(note).await {
            tracing::debug!("cannot send a progress notification: {e}");
        }
    }
    Ok(job
        .await
        .map_err(|e| ToolError::Internal(format!("index task failed: {e}")))??)
}

/// [`IndexProgress`] that sends `(done, total)` at start, on each new
/// percent, and at the end. Called on the indexing thread.
struct ChannelProgress {
    tx: mpsc::UnboundedSender<(u64, u64)>,
    total: AtomicU64,
    done: AtomicU64,
    percent: AtomicU64,
}

impl ChannelProgress {
    fn new(tx: mpsc::UnboundedSender<(u64, u64)>) -> ChannelProgress {
        ChannelProgress {
            tx,
            total: AtomicU64::new(0),
            done: AtomicU64::new(0),
            percent: AtomicU64::new(0),
        }
    }
}

impl IndexProgress for ChannelProgress {
    fn start(&self, to_parse: u64) {
        self.total.store(to_parse, Ordering::Relaxed);
        let _ = self.tx.send((0, to_parse));
    }

    fn advance(&self, _path: &str, _bytes: u64) {
        let done = self.done.fetch_add(1, Ordering::Relaxed) + 1;
        let total = self.total.load(Ordering::Relaxed).max(done);
        let percent = done * 100 / total.max(1);
        if percent > self.percent.swap(percent, Ordering::Relaxed) {
            let _ = self.tx.send((done, total));
        }
    }

    fn finish(&self, _report: &IndexReport) {
        let done = self.done.load(Ordering::Relaxed);
        let total = self.total.load(Ordering::Relaxed).max(done);
        let _ = self.tx.send((total, total));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_is_throttled_to_percents() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let p = ChannelProgress::new(tx);
        p.start(1000);
        for _ in 0..1000 {
            p.advance("a.rs", 10);
        }
        p.finish(&IndexReport::default());
        drop(p);
        let mut seen = Vec::new();
        while let Ok(x) = rx.try_recv() {
            seen.push(x);
        }
        assert_eq!(seen.first(), Some(&(0, 1000)));
        assert_eq!(seen.last(), Some(&(1000, 1000)));
        assert!(seen.len() <= 102, "{}", seen.len());
    }
}
