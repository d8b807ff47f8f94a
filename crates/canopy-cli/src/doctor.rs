//! `canopy doctor`: what this installation sees, each check with what to
//! do about it — the binary, the repository's index, the embedding model,
//! the agents Canopy is registered with (and whether their `canopy mcp`
//! watches files), and the service when one is configured.

use std::path::{Path, PathBuf};

use canopy_core::{Engine, EngineOptions};
use serde::Serialize;

use crate::GlobalArgs;

/// How a check came out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
enum Level {
    /// Nothing to do.
    Ok,
    /// Works, with something missing or worth knowing.
    Warn,
    /// Broken: Canopy will not work as configured.
    Error,
}

/// One check.
#[derive(Debug, Serialize)]
struct Check {
    name: &'static str,
    level: Level,
    /// What was found.
    detail: String,
    /// What to do about it (absent when nothing).
    #[serde(skip_serializing_if = "Option::is_none")]
    fix: Option<String>,
}

impl Check {
    fn ok(name: &'static str, detail: impl Into<String>) -> Check {
        Check {
            name,
            level: Level::Ok,
            detail: detail.into(),
            fix: None,
        }
    }

    fn warn(name: &'static str, detail: impl Into<String>, fix: impl Into<String>) -> Check {
        Check {
            name,
            level: Level::Warn,
            detail: detail.into(),
            fix: Some(fix.into()),
        }
    }

    fn error(name: &'static str, detail: impl Into<String>, fix: impl Into<String>) -> Check {
        Check {
            name,
            level: Level::Error,
            detail: detail.into(),
            fix: Some(fix.into()),
        }
    }
}

/// `canopy doctor --json`.
#[derive(Debug, Serialize)]
struct Report {
    version: &'static str,
    commit: &'static str,
    schema_version: u32,
    checks: Vec<Check>,
    /// The worst level of the checks.
    status: Level,
}

/// Runs every check and prints them; `false` when one is an error (the
/// command then exits 1, its report being the output).
pub fn run(global: &GlobalArgs, options: EngineOptions) -> anyhow::Result<bool> {
    let start = match &global.root {
        Some(root) => root.clone(),
        None => std::env::current_dir()?,
    };
    let mut checks = vec![binary()];
    checks.push(index(&start, options));
    checks.push(model(global.model.as_deref()));
    checks.extend(agents(&start));
    if let Some(url) = &global.service_url {
        checks.push(service(url, global.service_token.as_deref()));
    }
    let status = checks
        .iter()
        .map(|c| c.level)
        .max_by_key(|l| *l as u8)
        .unwrap_or(Level::Ok);
    let report = Report {
        version: env!("CARGO_PKG_VERSION"),
        commit: env!("CANOPY_GIT_COMMIT"),
        schema_version: canopy_core::store::SCHEMA_VERSION,
        checks,
        status,
    };
    if global.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        for check in &report.checks {
            let mark = match check.level {
                Level::Ok => "ok  ",
                Level::Warn => "warn",
                Level::Error => "FAIL",
            };
            println!("{mark} {:<8} {}", check.name, check.detail);
            if let Some(fix) = &check.fix {
                println!("              → {fix}");
            }
        }
    }
    Ok(status != Level::Error)
}

fn binary() -> Check {
    let path = std::env::current_exe()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| "?".into());
    Check::ok(
        "binary",
        format!(
            "canopy {} (commit {}, index schema {}) at {path}",
            env!("CARGO_PKG_VERSION"),
            env!("CANOPY_GIT_COMMIT"),
            canopy_core::store::SCHEMA_VERSION
        ),
    )
}

fn index(start: &Path, options: EngineOptions) -> Check {
    let status = match Engine::peek_status(start, options) {
        Ok(status) => status,
        Err(e) => {
            return Check::warn(
                "index",
                format!("no repository here ({e})"),
                "run doctor inside a git repository, or pass --root DIR",
            );
        }
    };
    let root = &status.repo_root;
    if !status.indexed {
        return Check::warn(
            "index",
            format!("{root} has no index yet"),
            "run `canopy index` (or just ask: the first query indexes what it needs)",
        );
    }
    if let Some(why) = &status.damaged {
        return Check::error(
            "index",
            format!("{root}: the index is damaged ({why})"),
            "run `canopy index --rebuild`",
        );
    }
    let coverage = status.index_coverage;
    let detail = format!(
        "{root}: {} files, {} units, coverage {:.0}%, last complete run {}",
        status.files_indexed,
        status.units,
        coverage * 100.0,
        status.last_indexed.as_deref().unwrap_or("never"),
    );
    if coverage < 1.0 {
        Check::warn(
            "index",
            detail,
            "run `canopy index` to finish it (queries answer from what is indexed meanwhile)",
        )
    } else {
        Check::ok("index", detail)
    }
}

fn model(dir: Option<&Path>) -> Check {
    let Some(dir) = dir else {
        return Check::warn(
            "model",
            "no embedding model configured: context packs skip semantic retrieval",
            "pass --model DIR or set CANOPY_MODEL (README \"Semantic retrieval\"; scripts/get-model.sh fetches one)",
        );
    };
    match canopy_core::embed::StaticModel::load(dir) {
        Ok(_) => Check::ok(
            "model",
            format!("embedding model loaded from {}", dir.display()),
        ),
        Err(e) => Check::error(
            "model",
            format!("the model at {} does not load: {e}", dir.display()),
            "point --model/CANOPY_MODEL at a folder with tokenizer.json (or vocab.txt) and model.safetensors",
        ),
    }
}

/// The configuration files `canopy setup` writes, and whether each
/// registers Canopy; a registered `canopy mcp` watches files unless its
/// arguments say `--watch false`.
fn agents(start: &Path) -> Vec<Check> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let root = start.canonicalize().ok().and_then(|s| {
        s.ancestors()
            .find(|d| d.join(".git").exists())
            .map(Path::to_path_buf)
    });
    let mut files: Vec<(&str, PathBuf, &str)> = Vec::new();
    if let Some(root) = &root {
        files.push(("claude-code", root.join(".mcp.json"), "mcpServers"));
        files.push(("cursor", root.join(".cursor/mcp.json"), "mcpServers"));
        files.push(("vscode", root.join(".vscode/mcp.json"), "servers"));
        files.push(("codex", root.join(".codex/config.toml"), "mcp_servers"));
    }
    if let Some(home) = &home {
        files.push(("claude-code", home.join(".claude.json"), "mcpServers"));
        files.push(("cursor", home.join(".cursor/mcp.json"), "mcpServers"));
        files.push(("codex", home.join(".codex/config.toml"), "mcp_servers"));
    }
    let mut registered = Vec::new();
    let mut unwatched = Vec::new();
    for (client, path, key) in &files {
        let Ok(text) = std::fs::read_to_string(path) else {
            continue;
        };
        let args = if path.extension().is_some_and(|e| e == "toml") {
            text.parse::<toml_edit::DocumentMut>().ok().and_then(|doc| {
                let args = doc.get(key)?.get("canopy")?.get("args")?.as_array()?;
                Some(
                    args.iter()
                        .filter_map(|v| v.as_str().map(String::from))
                        .collect::<Vec<_>>(),
                )
            })
        } else {
            serde_json::from_str::<serde_json::Value>(&text)
                .ok()
                .and_then(|v| {
                    let args = v.get(key)?.get("canopy")?.get("args")?.as_array()?.clone();
                    Some(
                        args.iter()
                            .filter_map(|v| v.as_str().map(String::from))
                            .collect(),
                    )
                })
        };
        let Some(args) = args else { continue };
        registered.push(format!("{client} ({})", path.display()));
        if args
            .windows(2)
            .any(|w| w[0] == "--watch" && w[1] == "false")
            || args.iter().any(|a| a == "--watch=false")
        {
            unwatched.push(client.to_string());
        }
    }
    if registered.is_empty() {
        return vec![Check::warn(
            "agents",
            "Canopy is not registered with any agent here",
            "run `canopy setup claude-code` (or cursor, codex, vscode)",
        )];
    }
    let agents = Check::ok(
        "agents",
        format!("registered with {}", registered.join(", ")),
    );
    let watcher = if unwatched.is_empty() {
        Check::ok(
            "watcher",
            "on: `canopy mcp` re-indexes files as they change",
        )
    } else {
        Check::warn(
            "watcher",
            format!("off for {} (--watch false)", unwatched.join(", ")),
            "queries see edits only after `canopy index`; drop `--watch false` to keep the index fresh",
        )
    };
    vec![agents, watcher]
}

fn service(url: &str, token: Option<&str>) -> Check {
    let client = match canopy_client::client::ServiceClient::new(url) {
        Ok(client) => client.with_token(token.map(String::from)),
        Err(e) => {
            return Check::error(
                "service",
                e.to_string(),
                "fix --service-url / CANOPY_SERVICE_URL",
            );
        }
    };
    let health = match client.health() {
        Ok(health) => health,
        Err(e) => {
            return Check::error(
                "service",
                format!("{url} is not reachable: {e}"),
                "start it with `canopy serve`, or check the URL",
            );
        }
    };
    match client.status(None) {
        Ok(status) => {
            let detail = format!(
                "{url}: {}, {} repositories registered",
                health.status,
                status.repos.len()
            );
            if health.status == "healthy" {
                Check::ok("service", detail)
            } else {
                Check::warn(
                    "service",
                    format!("{detail} ({})", health.reasons.join("; ")),
                    "see `GET /health` on the service",
                )
            }
        }
        Err(e) => Check::error(
            "service",
            format!("{url} answers, but not to this token: {e}"),
            "set --service-token / CANOPY_SERVICE_TOKEN to the service's token",
        ),
    }
}
