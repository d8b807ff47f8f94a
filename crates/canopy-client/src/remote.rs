//! Client-side service mode, shared by `canopy --service-url …` and
//! `canopy mcp --service-url …`: one repository of a running `canopy serve`,
//! answered with the caller's uncommitted edits overlaid (see
//! [`crate::overlay`]). Answers are typed ([`Served`]), merged; the front
//! ends only render them.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use canopy_core::context::{ContextPack, ContextParams};
use canopy_core::graph::request::{GraphRequest, GraphResponse};
use canopy_core::model::QueryResult;
use canopy_core::pack::{EvidencePack, PackParams};
use canopy_core::query::QueryParams;
use serde::Serialize;

use crate::api::{ExpandedContent, StatusResponse};
use crate::client::ServiceClient;
use crate::overlay::{Overlay, OverlayReport};
use crate::served::{Served, ServedAt, sorted};

/// A client bound to one repository of the service.
pub struct RemoteRepo {
    client: ServiceClient,
    repo: String,
    /// The local repository root (for the overlay).
    root: PathBuf,
    /// How the overlay's engine is opened.
    options: canopy_core::EngineOptions,
}

impl RemoteRepo {
    /// Connects and finds the registered repository containing `start`.
    pub fn connect(
        url: &str,
        token: Option<String>,
        session: Option<String>,
        start: &Path,
        options: canopy_core::EngineOptions,
    ) -> anyhow::Result<RemoteRepo> {
        let client = ServiceClient::new(url)
            .with_context(|| format!("invalid service URL {url}"))?
            .with_token(token)
            .with_session(session);
        let repo = client
            .repo_for_path(start)
            .with_context(|| format!("cannot reach the Canopy service at {url}"))?;
        let Some(repo) = repo else {
            bail!(
                "{} is not registered with the service at {url}; register it first \
                 (`canopy --service-url {url} index` in it, or POST /repos/add)",
                start.display()
            );
        };
        let root = canopy_core::discover::find_repo_root(start)?;
        Ok(RemoteRepo {
            client,
            repo,
            root,
            options,
        })
    }

    /// Registers the repository containing `root` (if needed), reindexes it
    /// and waits until the service has indexed it.
    pub fn index(
        url: &str,
        token: Option<String>,
        root: &Path,
    ) -> anyhow::Result<crate::api::RepoView> {
        let client = ServiceClient::new(url)?.with_token(token);
        let repo = match client.repo_for_path(root)? {
            Some(id) => id,
            None => client.add_repo(root, None)?.repo_id,
        };
        client.reindex(&repo, None)?;
        Ok(client.wait_until_idle(&repo, Duration::from_secs(3600))?)
    }

    fn overlay(&self) -> anyhow::Result<Overlay> {
        Overlay::build(&self.root, &self.options)
    }

    /// The service's repository id.
    pub fn repo_id(&self) -> &str {
        &self.repo
    }

    /// `POST /query`, with local handles for changed files.
    pub fn query(&self, params: &QueryParams) -> anyhow::Result<Served<QueryResult>> {
        let overlay = self.overlay()?;
        let mut served = self.client.query(&self.repo, params)?;
        if overlay.dirty_files() > 0 {
            let local = overlay.engine().map(|e| e.query(params)).transpose()?;
            overlay.merge_query(&mut served, local, params.effective_limit());
        }
        Ok(served)
    }

    /// `POST /evidence_pack`, with local handles for changed files.
    pub fn pack(&self, params: &PackParams) -> anyhow::Result<Served<EvidencePack>> {
        let overlay = self.overlay()?;
        let mut served = self.client.evidence_pack(&self.repo, params)?;
        if overlay.dirty_files() > 0 {
            let local = overlay
                .engine()
                .map(|e| e.evidence_pack(params, None))
                .transpose()?;
            let limit = params
                .max_handles
                .unwrap_or(canopy_core::pack::DEFAULT_MAX_HANDLES);
            overlay.merge_pack(&mut served, local, limit);
        }
        Ok(served)
    }

    /// `POST /expand`: local handles (files with uncommitted changes)
    /// expand from the overlay, the rest from the service in one request.
    pub fn expand(&self, ids: &[String]) -> anyhow::Result<ExpandAnswer> {
        let overlay = self.overlay()?;
        let mut local = std::collections::HashMap::new();
        if let Some(engine) = overlay.engine() {
            for id in ids {
                if let Ok(mut found) = engine.expand(&[id.as_str()])
                    && let Some(e) = found.pop()
                {
                    local.insert(id.clone(), e);
                }
            }
        }
        let remote_ids: Vec<(&str, Option<u64>)> = ids
            .iter()
            .filter(|id| !local.contains_key(*id))
            .map(|id| (id.as_str(), None))
            .collect();
        let mut response = if remote_ids.is_empty() {
            None
        } else {
            Some(self.client.expand(&self.repo, &remote_ids)?)
        };
        let mut contents = Vec::new();
        for id in ids {
            if let Some(e) = local.remove(id) {
                contents.push(ExpandedContent {
                    handle_id: e.handle_id.as_str().to_string(),
                    file_path: e.file_path,
                    line_range: e.line_range,
                    token_count: u64::from(e.token_count),
                    content: e.content,
                });
            } else if let Some(r) = response.as_mut()
                && let Some(at) = r.contents.iter().position(|c| c.handle_id == *id)
            {
                contents.push(r.contents.remove(at));
            }
        }
        Ok(ExpandAnswer {
            at: response.map(|r| ServedAt {
                repo_id: r.repo_id,
                generation: r.generation,
                commit_sha: r.commit_sha,
            }),
            total_tokens: contents.iter().map(|c| c.token_count).sum(),
            contents,
            overlay: (overlay.dirty_files() > 0).then(|| overlay.files_report()),
        })
    }

    /// `GET /status` of the repository.
    pub fn status(&self) -> anyhow::Result<StatusResponse> {
        Ok(self.client.status(Some(&self.repo))?)
    }

    /// `POST /context`. Fragments in files with uncommitted changes are
    /// dropped (their lines predate the edits) and the overlay's own pack's
    /// fragments of those files take their place, marked `source: "local"`.
    pub fn context(&self, params: &ContextParams) -> anyhow::Result<Served<ContextPack>> {
        let overlay = self.overlay()?;
        let mut served = self.client.context(&self.repo, params)?;
        if overlay.dirty_files() > 0 {
            let local = overlay.engine().map(|e| e.context(params)).transpose()?;
            overlay.merge_context(&mut served, local, params.budget());
        }
        Ok(served)
    }

    /// `POST /graph`. Answers come from the service's index alone: the
    /// graph of a few changed files cannot be resolved apart from the rest.
    pub fn graph(&self, request: &GraphRequest) -> anyhow::Result<Served<GraphResponse>> {
        Ok(self.client.graph(&self.repo, request)?)
    }
}

/// Expanded handles of a served repository, local ones (from the overlay)
/// and the service's, in request order.
#[derive(Clone, Debug, PartialEq)]
pub struct ExpandAnswer {
    /// The service's state, when it expanded any of them.
    pub at: Option<ServedAt>,
    /// The contents, in request order, without duplicates or unknown ids.
    pub contents: Vec<ExpandedContent>,
    /// Sum of the contents' tokens.
    pub total_tokens: u64,
    /// What the overlay holds, when any file has uncommitted changes.
    pub overlay: Option<OverlayReport>,
}

/// The wire shape of an [`ExpandAnswer`]: the service's `/expand` answer
/// with the merged contents.
#[derive(Serialize)]
struct ExpandWire<'a> {
    #[serde(flatten)]
    at: Option<&'a ServedAt>,
    contents: &'a [ExpandedContent],
    total_tokens: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    overlay: Option<&'a OverlayReport>,
}

impl Serialize for ExpandAnswer {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let wire = ExpandWire {
            at: self.at.as_ref(),
            contents: &self.contents,
            total_tokens: self.total_tokens,
            overlay: self.overlay.as_ref(),
        };
        sorted(&wire, serializer)
    }
}
