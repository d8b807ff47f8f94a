//! Service mode: `--service-url` sends queries, packs, expansions and status
//! to a running `canopy serve` instead of opening the local index.
//!
//! The repository is the registered one containing the working directory
//! (or `--root`); `canopy --service-url URL index` registers it if needed and
//! waits for the reindex to finish.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, bail};
use canopy_core::model::QueryResult;
use canopy_core::pack::{EvidencePack, PackParams};
use canopy_core::query::QueryParams;
use canopy_service::client::ServiceClient;

use crate::output;

/// A client bound to one repository of the service.
pub struct Remote {
    client: ServiceClient,
    repo: String,
}

impl Remote {
    /// Connects and finds the repository containing `start`.
    pub fn connect(url: &str, token: Option<String>, start: &Path) -> anyhow::Result<Remote> {
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
        Ok(Remote { client, repo })
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
        let value = self.client.query(&self.repo, params)?;
        if json {
            println!("{}", serde_json::to_string(&value)?);
            return Ok(());
        }
        let result: QueryResult = serde_json::from_value(value)?;
        output::query_result(&result, false)
    }

    pub fn pack(&self, params: &PackParams, json: bool) -> anyhow::Result<()> {
        let value = self.client.evidence_pack(&self.repo, params)?;
        if json {
            println!("{}", serde_json::to_string(&value)?);
            return Ok(());
        }
        let pack: EvidencePack = serde_json::from_value(value)?;
        output::pack(&pack, false)
    }

    pub fn expand(&self, ids: &[String], json: bool) -> anyhow::Result<()> {
        let handles: Vec<(&str, Option<u64>)> = ids.iter().map(|id| (id.as_str(), None)).collect();
        let response = self.client.expand(&self.repo, &handles)?;
        if json {
            println!("{}", serde_json::to_string(&response)?);
            return Ok(());
        }
        for (i, c) in response.contents.iter().enumerate() {
            if response.contents.len() > 1 {
                if i > 0 {
                    println!();
                }
                println!("// {}", c.handle_id);
            }
            print!("{}", c.content);
            if response.contents.len() > 1 && !c.content.ends_with('\n') {
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
