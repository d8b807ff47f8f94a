//! Client-side service mode, shared by `canopy --service-url …` and
//! `canopy mcp --service-url …`: one repository of a running `canopy serve`,
//! answered with the caller's uncommitted edits overlaid (see
//! [`crate::overlay`]). Answers are the service's JSON, merged; the front
//! ends only render them.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use canopy_core::pack::PackParams;
use canopy_core::query::QueryParams;
use serde_json::{Value, json};

use crate::api::ExpandedContent;
use crate::client::ServiceClient;
use crate::overlay::Overlay;

/// A client bound to one repository of the service.
pub struct RemoteRepo {
    client: ServiceClient,
    repo: String,
    /// The local repository root (for the overlay).
    root: PathBuf,
    /// How the overlay's engine is opened.
    options: canopy_core::EngineOptions,
}

/// Expanded handles, local ones (from the overlay) and the service's, in request order.
pub struct Expanded {
    /// The contents, in request order, without duplicates or unknown ids.
    pub contents: Vec<ExpandedContent>,
    /// The service's response as JSON (generation, commit), with `contents`,
    /// `total_tokens` and `overlay` set for the merged list.
    pub value: Value,
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
    pub fn query(&self, params: &QueryParams) -> anyhow::Result<Value> {
        let overlay = self.overlay()?;
        let mut value = self.client.query(&self.repo, params)?;
        if overlay.dirty_files() > 0 {
            let local = match overlay.engine() {
                Some(engine) => Some(serde_json::to_value(engine.query(params)?)?),
                None => None,
            };
            overlay.merge(&mut value, local, params.effective_limit());
        }
        Ok(value)
    }

    /// `POST /evidence_pack`, with local handles for changed files.
    pub fn pack(&self, params: &PackParams) -> anyhow::Result<Value> {
        let overlay = self.overlay()?;
        let mut value = self.client.evidence_pack(&self.repo, params)?;
        if overlay.dirty_files() > 0 {
            let local = match overlay.engine() {
                Some(engine) => Some(serde_json::to_value(engine.evidence_pack(params, None)?)?),
                None => None,
            };
            let limit = params
                .max_handles
                .unwrap_or(canopy_core::pack::DEFAULT_MAX_HANDLES);
            overlay.merge(&mut value, local, limit);
        }
        Ok(value)
    }

    /// `POST /expand`: local handles (files with uncommitted changes)
    /// expand from the overlay, the rest from the service in one request.
    pub fn expand(&self, ids: &[String]) -> anyhow::Result<Expanded> {
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
        let mut value = match &response {
            Some(r) => serde_json::to_value(r)?,
            None => json!({}),
        };
        value["total_tokens"] = contents.iter().map(|c| c.token_count).sum::<u64>().into();
        value["contents"] = serde_json::to_value(&contents)?;
        if overlay.dirty_files() > 0 {
            value["overlay"] = json!({"dirty_files": overlay.dirty_files()});
        }
        Ok(Expanded { contents, value })
    }

    /// `GET /status` of the repository.
    pub fn status(&self) -> anyhow::Result<Value> {
        Ok(serde_json::to_value(self.client.status(Some(&self.repo))?)?)
    }

    /// `POST /context`. Fragments in files with uncommitted changes are
    /// dropped (their lines predate the edits) and the overlay's own pack's
    /// fragments of those files take their place, marked `source: "local"`.
    pub fn context(&self, params: &canopy_core::context::ContextParams) -> anyhow::Result<Value> {
        let overlay = self.overlay()?;
        let mut body = serde_json::to_value(params)?;
        body["repo"] = json!(self.repo);
        let mut value: Value = self.client.post_json("/context", &body)?;
        if overlay.dirty_files() > 0 {
            let local = match overlay.engine() {
                Some(engine) => Some(serde_json::to_value(engine.context(params)?)?),
                None => None,
            };
            overlay.merge_fragments(&mut value, local, params.budget());
        }
        Ok(value)
    }

    /// `POST /graph` (a `canopy_core::graph::request::GraphRequest` as JSON).
    /// Answers come from the service's index alone: the graph of a few
    /// changed files cannot be resolved apart from the rest.
    pub fn graph(&self, request: &Value) -> anyhow::Result<Value> {
        let mut body = request.clone();
        body["repo"] = json!(self.repo);
        Ok(self.client.post_json("/graph", &body)?)
    }
}
