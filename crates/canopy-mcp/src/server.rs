//! The MCP server: one dispatcher from tool calls onto a
//! [`canopy_client::backend::Backend`] — a repository's engine from the
//! cache, or the service in service mode — one session per connection, and
//! progress notifications while indexing.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use canopy_client::backend::{Answer, Backend, BackendError, Expanded, Need};
use canopy_client::local::LocalBackend;
use canopy_client::remote::RemoteBackend;
use canopy_core::EngineOptions;
use canopy_core::index::IndexProgress;
use canopy_core::model::IndexReport;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ProgressNotificationParam, ProgressToken,
    ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, Peer, RoleServer, ServerHandler};
use serde::Serialize;
use serde_json::json;
use tokio::sync::mpsc;

use crate::engines::EngineCache;
use crate::error::ToolError;
use crate::request::ToolRequest;
use crate::tools::{Args, ToolName, parse_args};

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

    /// The backend for a call on `path`: the service (service mode), or
    /// the repository's engine from the cache (for `canopy_status`, only an
    /// index that exists: a read-only tool never creates one).
    async fn backend(&self, tool: ToolName, path: &str) -> Result<Arc<dyn Backend>, ToolError> {
        let session = Some(self.session.to_string());
        if let Some(service) = &self.service {
            let start = PathBuf::from(path);
            if !start.is_absolute() || !start.is_dir() {
                return Err(ToolError::InvalidPath(format!(
                    "path must be the absolute path of a repository directory, not {path:?}"
                )));
            }
            let remote = RemoteBackend::new(
                &service.url,
                service.token.clone(),
                session,
                start,
                self.engines.options().clone(),
            )
            .map_err(|e| ToolError::Service(e.into()))?;
            return Ok(Arc::new(remote));
        }
        let local = if tool == ToolName::Status {
            match self.engines.get_existing(path).await? {
                Ok(repo) => repo.backend(),
                Err(root) => LocalBackend::new(root, self.engines.options().clone()),
            }
        } else {
            self.engines.get(path).await?.backend()
        };
        Ok(Arc::new(local.with_session(session)))
    }

    /// One tool call: the backend, the request (validated), the answer.
    async fn dispatch(
        &self,
        tool: ToolName,
        args: Args,
        progress: Progress,
    ) -> Result<CallToolResult, ToolError> {
        let path = args.path.clone().unwrap_or_default();
        let backend = self.backend(tool, &path).await?;
        if let Some(service) = &self.service
            && matches!(tool, ToolName::Refine | ToolName::Invalidate)
        {
            return Err(ToolError::NotInServiceMode(format!(
                "{} works on a local index; this server answers from the service at {}",
                tool.as_str(),
                service.url
            )));
        }
        let request = ToolRequest::parse(tool, args)?;
        let (b, p) = (&backend, &progress);
        match request {
            ToolRequest::Query(query) => json(
                self.run(b, p, move |b, p| {
                    b.prepare(Need::Query(query.params()), p)?;
                    b.query(&query)
                })
                .await?,
            ),
            ToolRequest::Pack(pack) => json(
                self.run(b, p, move |b, p| {
                    b.prepare(Need::Query(&pack.params().query), p)?;
                    b.evidence_pack(&pack)
                })
                .await?,
            ),
            ToolRequest::Context(context) => context_result(
                self.run(b, p, move |b, p| {
                    b.prepare(Need::Context(context.params()), p)?;
                    b.context(&context)
                })
                .await?,
            ),
            ToolRequest::Graph(request) => json(
                self.run(b, p, move |b, p| {
                    b.prepare(Need::Graph, p)?;
                    b.graph(&request)
                })
                .await?,
            ),
            ToolRequest::Expand(ids) => Ok(expansion_result(
                self.run(b, p, move |b, _| b.expand(&ids)).await?,
            )),
            ToolRequest::Status => json(self.run(b, p, |b, _| b.status()).await?),
            ToolRequest::Index(request) => {
                json(self.run(b, p, move |b, p| b.index(&request, p)).await?)
            }
            ToolRequest::Invalidate(glob) => json(
                self.run(b, p, move |b, p| b.invalidate(glob.as_deref(), p))
                    .await?,
            ),
            ToolRequest::Refine(params) => {
                json(self.run(b, p, move |b, _| b.refine(&params)).await?)
            }
        }
    }

    /// Runs `op` against `backend` on the blocking pool, forwarding the
    /// progress of any index run as `notifications/progress` (strictly
    /// increasing, at most about one per percent), under the call's
    /// cancellation flag.
    async fn run<T, F>(
        &self,
        backend: &Arc<dyn Backend>,
        progress: &Progress,
        op: F,
    ) -> Result<T, ToolError>
    where
        F: FnOnce(&dyn Backend, &dyn IndexProgress) -> Result<T, BackendError> + Send + 'static,
        T: Send + 'static,
    {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let sink = ChannelProgress::new(tx);
        let backend = backend.clone();
        let cancel = crate::engines::request_cancel_flag();
        let job = tokio::task::spawn_blocking(move || {
            canopy_core::cancel::within(&cancel, || op(backend.as_ref(), &sink))
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
        job.await
            .map_err(|e| ToolError::Internal(format!("worker task failed: {e}")))?
            .map_err(|e| self.tool_error(e))
    }

    /// A backend's error as the agent sees it: in service mode every
    /// failure is the service's (`ServiceError`, with the whole chain).
    fn tool_error(&self, e: BackendError) -> ToolError {
        match e {
            BackendError::Core(core) if self.service.is_none() => ToolError::Core(core),
            other => ToolError::Service(other.into()),
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

/// `canopy_context`'s result in its wire form
/// ([`canopy_core::context::wire`]): a JSON header block, then each fragment
/// as a plain-text block of its own under a provenance line, so code is not
/// JSON-escaped and the blocks together stay within `budget_tokens`. The
/// whole pack as JSON is the `structuredContent` (sent only when asked for).
fn context_result(
    answer: Answer<canopy_core::context::ContextPack>,
) -> Result<CallToolResult, ToolError> {
    let wire = canopy_core::context::wire::render(answer.get());
    let structured = serde_json::to_value(&answer)
        .map_err(|e| ToolError::Internal(format!("cannot serialize the result: {e}")))?;
    let mut content = vec![ContentBlock::text(wire.header)];
    content.extend(wire.blocks.into_iter().map(ContentBlock::text));
    let mut result = CallToolResult::success(content);
    result.structured_content = Some(structured);
    Ok(result)
}

/// `canopy_expand`'s result: the contract's text first (`// <id>` blocks);
/// freshness in a second block, so a client that reads `content[0]` sees
/// exactly the contract.
fn expansion_result(expanded: Expanded) -> CallToolResult {
    match expanded {
        Expanded::Local(out) => {
            let freshness = out.first().map(|e| {
                let files: HashSet<&str> = out.iter().map(|e| e.file_path.as_str()).collect();
                json!({"freshness": {
                    "generation": e.generation,
                    "indexed_at": e.indexed_at,
                    "stale_files": 0,
                    "checked_files": files.len(),
                }})
                .to_string()
            });
            let text = expansion_text(
                out.iter()
                    .map(|e| (e.handle_id.as_str(), e.content.as_str())),
            );
            let mut content = vec![ContentBlock::text(text)];
            content.extend(freshness.map(ContentBlock::text));
            CallToolResult::success(content)
        }
        Expanded::Served(answer) => {
            let text = expansion_text(
                answer
                    .contents
                    .iter()
                    .map(|c| (c.handle_id.as_str(), c.content.as_str())),
            );
            let freshness = json!({"freshness": {
                "generation": answer.at.as_ref().map(|at| at.generation),
                "commit_sha": answer.at.as_ref().and_then(|at| at.commit_sha.as_ref()),
                "overlay": answer.overlay,
            }});
            CallToolResult::success(vec![
                ContentBlock::text(text),
                ContentBlock::text(freshness.to_string()),
            ])
        }
    }
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

/// Where progress notifications go: the caller's progress token, if it sent one.
#[derive(Clone)]
struct Progress {
    peer: Peer<RoleServer>,
    token: Option<ProgressToken>,
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
