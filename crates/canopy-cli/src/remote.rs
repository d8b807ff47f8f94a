//! Service mode: `--service-url` sends queries, packs, expansions and status
//! to a running `canopy serve` instead of opening the local index.
//!
//! The repository is the registered one containing the working directory
//! (or `--root`); `canopy --service-url URL index` registers it if needed and
//! waits for the reindex to finish. Files with uncommitted changes are
//! answered from a local overlay merged over the service's answers (see
//! `overlay`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use canopy_core::model::QueryResult;
use canopy_core::pack::{EvidencePack, PackParams};
use canopy_core::query::QueryParams;
use canopy_service::client::ServiceClient;

use crate::output;
use crate::overlay::Overlay;

/// A client bound to one repository of the service.
pub struct Remote {
    client: ServiceClient,
    repo: String,
    /// The local repository root (for the overlay).
    root: PathBuf,
    /// How the overlay's engine is opened.
    options: canopy_core::EngineOptions,
}

impl Remote {
    /// Connects and finds the repository containing `start`.
    pub fn connect(
        url: &str,
        token: Option<String>,
        start: &Path,
        options: canopy_core::EngineOptions,
    ) -> anyhow::Result<Remote> {
        let client = ServiceClient::new(url)
            .with_context(|| format!("invalid service URL {url}"))?
            .with_token(token)
            .with_session(Some(format!("cli-{}", std::process::id())));
        let repo = client
            .repo_for_path(start)
            .with_context(|| format!("cannot reach the Canopy service at {url}"))?;
        let Some(repo) = repo else {
            bail!(
                "{} is not registered with the service at {url}; run `canopy --service-url {url} index` in it first",
                start.display()
            );
        };
        let root = canopy_core::discover::find_repo_root(start)?;
        Ok(Remote {
            client,
            repo,
            root,
            options,
        })
    }

    fn overlay(&self) -> anyhow::Result<Overlay> {
        Overlay::build(&self.root, &self.options)
    }

    /// Registers the repository containing `root` (if needed), reindexes it and waits.
    pub fn index(url: &str, token: Option<String>, root: &Path, json: bool) -> anyhow::Result<()> {
        let client = ServiceClient::new(url)?.with_token(token);
        let repo = match client.repo_for_path(root)? {
            Some(id) => id,
            None => client.add_repo(root, None)?.repo_id,
        };
        client.reindex(&repo, None)?;
        let view = client.wait_until_idle(&repo, Duration::from_secs(3600))?;
        if json {
            println!("{}", serde_json::to_string(&view)?);
        } else {
            println!(
                "service repo {} ({}): generation {}, status {}",
                view.name, view.repo_id, view.generation, view.status
            );
        }
        Ok(())
    }

    pub fn query(&self, params: &QueryParams, json: bool) -> anyhow::Result<()> {
        let overlay = self.overlay()?;
        let mut value = self.client.query(&self.repo, params)?;
        if overlay.dirty_files() > 0 {
            let local = match overlay.engine() {
                Some(engine) => Some(serde_json::to_value(engine.query(params)?)?),
                None => None,
            };
            overlay.merge(&mut value, local, params.effective_limit());
        }
        if json {
            println!("{}", serde_json::to_string(&value)?);
            return Ok(());
        }
        let result: QueryResult = serde_json::from_value(value)?;
        output::query_result(&result, false)
    }

    pub fn pack(&self, params: &PackParams, json: bool) -> anyhow::Result<()> {
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
        if json {
            println!("{}", serde_json::to_string(&value)?);
            return Ok(());
        }
        let pack: EvidencePack = serde_json::from_value(value)?;
        output::pack(&pack, false)
    }

    pub fn expand(&self, ids: &[String], json: bool) -> anyhow::Result<()> {
        // Local handles (files with uncommitted changes) expand from the
        // overlay; the rest from the service, in one request.
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
                contents.push(canopy_service::api::ExpandedContent {
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
        if json {
            let mut value = match &response {
                Some(r) => serde_json::to_value(r)?,
                None => serde_json::json!({}),
            };
            value["total_tokens"] = contents.iter().map(|c| c.token_count).sum::<u64>().into();
            value["contents"] = serde_json::to_value(&contents)?;
            if overlay.dirty_files() > 0 {
                value["overlay"] = serde_json::json!({"dirty_files": overlay.dirty_files()});
            }
            println!("{}", serde_json::to_string(&value)?);
            return Ok(());
        }
        for (i, c) in contents.iter().enumerate() {
            if contents.len() > 1 {
                if i > 0 {
                    println!();
                }
                println!("// {}", c.handle_id);
            }
            print!("{}", c.content);
            if contents.len() > 1 && !c.content.ends_with('\n') {
                println!();
            }
        }
        Ok(())
    }

    pub fn status(&self) -> anyhow::Result<()> {
        let status = self.client.status(Some(&self.repo))?;
        println!("{}", serde_json::to_string(&status)?);
        Ok(())
    }
}
