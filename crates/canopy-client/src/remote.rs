//! [`RemoteBackend`]: the [`Backend`] of service mode, shared by `canopy
//! --service-url …` and `canopy mcp --service-url …`: the registered
//! repository of a running `canopy serve` that contains the caller's
//! directory, answered with the caller's uncommitted edits overlaid (see
//! [`crate::overlay`]). Answers are typed ([`crate::served::Served`]);
//! the front ends only render them.
//!
//! Nothing is asked of the service until a request needs it: the
//! repository is looked up (`GET /repos`) by the first one, and `index`
//! registers it when it is not yet.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use canopy_core::context::ContextPack;
use canopy_core::graph::request::GraphResponse;
use canopy_core::index::IndexProgress;
use canopy_core::model::QueryResult;
use canopy_core::pack::EvidencePack;
use canopy_core::resultset::{RefineParams, RefineResult};
use canopy_core::{CanopyError, EngineOptions};
use serde::Serialize;

use crate::api::ExpandedContent;
use crate::backend::{Answer, Backend, BackendError, Expanded, Indexed, Need, StatusReport};
use crate::client::{ClientError, ServiceClient};
use crate::local::LocalBackend;
use crate::overlay::{Overlay, OverlayReport};
use crate::request::{Context, Expand, GraphQuery, IndexRequest, Pack, Query};
use crate::served::{Served, ServedAt, sorted};

/// How long `index` waits for the service's run.
const INDEX_WAIT: Duration = Duration::from_secs(3600);

/// The repository of the service that answers, once found.
#[derive(Clone, Debug)]
struct Bound {
    /// The service's id of it.
    repo: String,
    /// Its root here (for the overlay).
    root: PathBuf,
}

/// A running service, for the repository containing the caller's directory.
pub struct RemoteBackend {
    client: ServiceClient,
    url: String,
    /// The caller's directory.
    start: PathBuf,
    /// How the overlay's engine is opened.
    options: EngineOptions,
    bound: Mutex<Option<Bound>>,
}

impl RemoteBackend {
    /// The service at `url` (`token` for bearer auth, `session` for the
    /// convergence memory of packs and expansions), for the repository
    /// containing `start`. Nothing is sent yet.
    pub fn new(
        url: &str,
        token: Option<String>,
        session: Option<String>,
        start: PathBuf,
        options: EngineOptions,
    ) -> Result<RemoteBackend, BackendError> {
        let client = ServiceClient::new(url)
            .map_err(|source| BackendError::InvalidUrl {
                url: url.to_string(),
                source,
            })?
            .with_token(token)
            .with_session(session);
        Ok(RemoteBackend {
            client,
            url: url.to_string(),
            start,
            options,
            bound: Mutex::new(None),
        })
    }

    /// The registered repository containing the caller's directory.
    fn bound(&self) -> Result<Bound, BackendError> {
        let mut slot = self.bound.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(bound) = slot.as_ref() {
            return Ok(bound.clone());
        }
        let repo = self
            .client
            .repo_for_path(&self.start)
            .map_err(|source| BackendError::Unreachable {
                url: self.url.clone(),
                source,
            })?
            .ok_or_else(|| BackendError::NotRegistered {
                start: self.start.display().to_string(),
                url: self.url.clone(),
            })?;
        let root = canopy_core::discover::find_repo_root(&self.start)?;
        let bound = Bound { repo, root };
        *slot = Some(bound.clone());
        Ok(bound)
    }

    fn overlay(&self, root: &Path) -> Result<Overlay, BackendError> {
        Ok(Overlay::build(root, &self.options)?)
    }

    /// The service's answer (`ask`, given the client and the repository
    /// id) with, when files have uncommitted changes, the overlay's own
    /// answer merged in (`merge`). The overlay is built first: the answer
    /// then cannot predate the edits it saw.
    fn overlaid<T>(
        &self,
        ask: impl FnOnce(&ServiceClient, &str) -> Result<Served<T>, ClientError>,
        merge: impl FnOnce(&Overlay, &mut Served<T>) -> Result<(), CanopyError>,
    ) -> Result<Answer<T>, BackendError> {
        let Bound { repo, root } = self.bound()?;
        let overlay = self.overlay(&root)?;
        let mut served = ask(&self.client, &repo)?;
        if overlay.dirty_files() > 0 {
            merge(&overlay, &mut served)?;
        }
        Ok(Answer::Served(served))
    }
}

impl Backend for RemoteBackend {
    /// The service indexes on its own.
    fn prepare(&self, _need: Need<'_>, _progress: &dyn IndexProgress) -> Result<(), BackendError> {
        Ok(())
    }

    /// `POST /query`, with local handles for changed files.
    fn query(&self, query: &Query) -> Result<Answer<QueryResult>, BackendError> {
        let params = query.params();
        self.overlaid(
            |client, repo| client.query(repo, params),
            |overlay, served| {
                let local = overlay.engine().map(|e| e.query(params)).transpose()?;
                overlay.merge_query(served, local, params.effective_limit());
                Ok(())
            },
        )
    }

    /// `POST /evidence_pack`, with local handles for changed files.
    fn evidence_pack(&self, pack: &Pack) -> Result<Answer<EvidencePack>, BackendError> {
        let params = pack.params();
        self.overlaid(
            |client, repo| client.evidence_pack(repo, params),
            |overlay, served| {
                let local = overlay
                    .engine()
                    .map(|e| e.evidence_pack(params, None))
                    .transpose()?;
                let limit = params
                    .max_handles
                    .unwrap_or(canopy_core::pack::DEFAULT_MAX_HANDLES);
                overlay.merge_pack(served, local, limit);
                Ok(())
            },
        )
    }

    /// `POST /context`. Fragments in files with uncommitted changes are
    /// dropped (their lines predate the edits) and the overlay's own pack's
    /// fragments of those files take their place, marked `source: "local"`.
    fn context(&self, context: &Context) -> Result<Answer<ContextPack>, BackendError> {
        let params = context.params();
        self.overlaid(
            |client, repo| client.context(repo, params),
            |overlay, served| {
                let local = overlay.engine().map(|e| e.context(params)).transpose()?;
                overlay.merge_context(served, local, params.budget());
                Ok(())
            },
        )
    }

    /// `POST /graph`. Answers come from the service's index alone: the
    /// graph of a few changed files cannot be resolved apart from the rest.
    fn graph(&self, request: &GraphQuery) -> Result<Answer<GraphResponse>, BackendError> {
        let repo = self.bound()?.repo;
        Ok(Answer::Served(self.client.graph(&repo, request.request())?))
    }

    /// `POST /expand`: local handles (files with uncommitted changes)
    /// expand from the overlay, the rest from the service in one request.
    fn expand(&self, ids: &Expand) -> Result<Expanded, BackendError> {
        let Bound { repo, root } = self.bound()?;
        let ids = ids.ids();
        let overlay = self.overlay(&root)?;
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
            Some(self.client.expand(&repo, &remote_ids)?)
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
        Ok(Expanded::Served(ExpandAnswer {
            at: response.map(|r| ServedAt {
                repo_id: r.repo_id,
                generation: r.generation,
                commit_sha: r.commit_sha,
            }),
            total_tokens: contents.iter().map(|c| c.token_count).sum(),
            contents,
            overlay: (overlay.dirty_files() > 0).then(|| overlay.files_report()),
        }))
    }

    /// `GET /status` of the repository.
    fn status(&self) -> Result<StatusReport, BackendError> {
        let repo = self.bound()?.repo;
        Ok(StatusReport::Served(self.client.status(Some(&repo))?))
    }

    /// Registers the repository containing the caller's directory (if
    /// needed), reindexes it and waits until the service has indexed it.
    /// The service indexes whole repositories: `request` is not sent.
    fn index(
        &self,
        _request: &IndexRequest,
        _progress: &dyn IndexProgress,
    ) -> Result<Indexed, BackendError> {
        let repo = match self.client.repo_for_path(&self.start)? {
            Some(id) => id,
            None => self.client.add_repo(&self.start, None)?.repo_id,
        };
        self.client.reindex(&repo, None)?;
        Ok(Indexed::Served(Box::new(
            self.client.wait_until_idle(&repo, INDEX_WAIT)?,
        )))
    }

    fn refine(&self, _params: &RefineParams) -> Result<RefineResult, BackendError> {
        Err(BackendError::LocalOnly("refine"))
    }

    fn invalidate(
        &self,
        _glob: Option<&str>,
        _progress: &dyn IndexProgress,
    ) -> Result<Indexed, BackendError> {
        Err(BackendError::LocalOnly("invalidate"))
    }

    fn local(&self) -> Option<&LocalBackend> {
        None
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
