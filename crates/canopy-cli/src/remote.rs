//! Service mode: `--service-url` sends queries, packs, context packs,
//! expansions and status to a running `canopy serve` instead of opening
//! the local index.
//!
//! The repository is the registered one containing the working directory
//! (or `--root`); `canopy --service-url URL index` registers it if needed and
//! waits for the reindex to finish. Files with uncommitted changes are
//! answered from a local overlay merged over the service's answers
//! (`canopy_client::overlay`); the work is in `canopy_client::remote`,
//! shared with `canopy mcp --service-url`. This module renders.

use std::path::Path;

use canopy_client::remote::RemoteRepo;
use canopy_core::pack::PackParams;
use canopy_core::query::QueryParams;

use crate::output;

/// A client bound to one repository of the service.
pub struct Remote(RemoteRepo);

impl Remote {
    /// Connects and finds the repository containing `start`.
    pub fn connect(
        url: &str,
        token: Option<String>,
        start: &Path,
        options: canopy_core::EngineOptions,
    ) -> anyhow::Result<Remote> {
        let session = Some(format!("cli-{}", std::process::id()));
        Ok(Remote(RemoteRepo::connect(
            url, token, session, start, options,
        )?))
    }

    /// Registers the repository containing `root` (if needed), reindexes it and waits.
    pub fn index(url: &str, token: Option<String>, root: &Path, json: bool) -> anyhow::Result<()> {
        let view = RemoteRepo::index(url, token, root)?;
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
        let served = self.0.query(params)?;
        if json {
            println!("{}", serde_json::to_string(&served)?);
            return Ok(());
        }
        output::query_result(&served.answer, false)
    }

    pub fn pack(&self, params: &PackParams, json: bool) -> anyhow::Result<()> {
        let served = self.0.pack(params)?;
        if json {
            println!("{}", serde_json::to_string(&served)?);
            return Ok(());
        }
        output::pack(&served.answer, false)
    }

    pub fn context(
        &self,
        params: &canopy_core::context::ContextParams,
        json: bool,
    ) -> anyhow::Result<()> {
        let served = self.0.context(params)?;
        if json {
            println!("{}", serde_json::to_string(&served)?);
            return Ok(());
        }
        output::context(&served.answer, false)
    }

    pub fn expand(&self, ids: &[String], json: bool) -> anyhow::Result<()> {
        let expanded = self.0.expand(ids)?;
        if json {
            println!("{}", serde_json::to_string(&expanded)?);
            return Ok(());
        }
        let contents = &expanded.contents;
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
        // Sorted keys, as the service's answers always reached people.
        println!("{}", serde_json::to_value(self.0.status()?)?);
        Ok(())
    }
}
