//! Which backend answers a command: the repository's own index
//! ([`LocalBackend`]), or with `--service-url` the service
//! ([`RemoteBackend`], with the caller's uncommitted edits overlaid).
//! Either way the command is one call on the [`Backend`] trait.
//!
//! The rules of the local engine: a directory the user named (a PATH
//! argument, `--root`, `CANOPY_ROOT`, or any `canopy index`) may be a plain
//! folder; the working directory must be inside a git repository or
//! already indexed, so that running canopy in a random folder never
//! indexes it.

use std::path::PathBuf;

use anyhow::Context;
use canopy_client::backend::Backend;
use canopy_client::local::LocalBackend;
use canopy_client::remote::RemoteBackend;
use canopy_core::EngineOptions;
use canopy_core::discover::RootRule;

use crate::GlobalArgs;

/// Where a command applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// `canopy index`: the repository is written, so a person asked; in
    /// service mode, the repository root is what gets registered.
    Index,
    /// Any other command.
    Read,
}

/// One CLI process is one convergence session.
pub fn session() -> String {
    format!("cli-{}", std::process::id())
}

/// The backend for a command on `path` (its PATH argument), else
/// `--root`, else the working directory.
pub fn open(
    global: &GlobalArgs,
    path: Option<PathBuf>,
    scope: Scope,
) -> anyhow::Result<Box<dyn Backend>> {
    let named = path.is_some() || scope == Scope::Index;
    let start = start_dir(global, path)?;
    let session = Some(session());
    let Some(url) = &global.service_url else {
        let local = LocalBackend::new(start, options_for(global, named));
        return Ok(Box::new(local.with_session(session)));
    };
    // The service registers repository roots.
    let start = match scope {
        Scope::Index => canopy_core::discover::find_repo_root(&start)?,
        Scope::Read => start,
    };
    Ok(Box::new(RemoteBackend::new(
        url,
        global.token_for(url),
        session,
        start,
        engine_options(global),
    )?))
}

/// [`engine_options`] with the root rule for a command (see the module docs).
fn options_for(global: &GlobalArgs, named: bool) -> EngineOptions {
    EngineOptions {
        root_rule: if named || global.root.is_some() {
            RootRule::Named
        } else {
            RootRule::Discovered
        },
        ..engine_options(global)
    }
}

/// Engine settings from the global flags: the same for the CLI's own
/// commands, `canopy mcp` and `canopy serve`.
pub fn engine_options(global: &GlobalArgs) -> EngineOptions {
    EngineOptions {
        max_file_size: global.max_file_size,
        embedding_model: global.model.clone(),
        ..EngineOptions::default()
    }
}

/// The directory a command applies to: its PATH argument, --root, or the working directory.
pub(crate) fn start_dir(global: &GlobalArgs, path: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    match path.or_else(|| global.root.clone()) {
        Some(p) => Ok(p),
        None => std::env::current_dir().context("cannot read the current directory"),
    }
}
