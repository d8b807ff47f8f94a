//! `canopy follow`: the agent runtime over a service's event feed (see
//! `canopy_client::follow` for the cursor, backoff and health rules).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::Context;
use canopy_client::api::EventRecord;
use canopy_client::client::ServiceClient;
use canopy_client::follow::{FollowOptions, FollowStatus, Relevance, follow};
use clap::Args;

/// Arguments of `canopy follow`.
#[derive(Args, Debug)]
pub struct FollowArgs {
    /// Only this repository's events (id or name).
    #[arg(long)]
    repo: Option<String>,
    /// Where the cursor (last event handled) is kept; a restarted follower
    /// resumes after it. Default: under $XDG_STATE_HOME/canopy (else
    /// ~/.local/state/canopy), one file per service URL and repository.
    #[arg(long)]
    cursor_file: Option<PathBuf>,
    /// Relevant event kinds (repeatable; default generation_bumped and files_changed).
    #[arg(long = "kind", value_name = "KIND")]
    kinds: Vec<String>,
    /// Only files_changed events naming a path that matches this glob.
    #[arg(long)]
    glob: Option<String>,
    /// Run this shell command for each relevant event (with CANOPY_EVENT_JSON,
    /// CANOPY_EVENT_KIND, CANOPY_EVENT_SEQ and CANOPY_REPO_ID set); the cursor
    /// moves past the event once the command has finished.
    #[arg(long)]
    exec: Option<String>,
    /// Long-poll seconds per request (1-60).
    #[arg(long, default_value_t = 30)]
    wait_seconds: u64,
    /// Stop after this many polls.
    #[arg(long)]
    max_cycles: Option<u64>,
    /// Stop after this many seconds.
    #[arg(long)]
    duration_seconds: Option<u64>,
    /// Write the follower's status (health, wake_source, cursor, blind
    /// window, backlog) as JSON to this file after every poll.
    #[arg(long)]
    status_file: Option<PathBuf>,
}

fn default_cursor_file(url: &str, repo: Option<&str>) -> anyhow::Result<PathBuf> {
    let base = match std::env::var_os("XDG_STATE_HOME").filter(|v| !v.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => {
            PathBuf::from(std::env::var_os("HOME").context("HOME is not set: pass --cursor-file")?)
                .join(".local/state")
        }
    };
    let key: String = format!("{url}-{}", repo.unwrap_or("all"))
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    Ok(base.join("canopy/follow").join(format!("{key}.cursor")))
}

fn write_status(path: &Path, status: &FollowStatus) {
    let tmp = path.with_extension("tmp");
    let written = serde_json::to_vec_pretty(status)
        .map_err(std::io::Error::other)
        .and_then(|bytes| std::fs::write(&tmp, bytes))
        .and_then(|()| std::fs::rename(&tmp, path));
    if let Err(e) = written {
        tracing::warn!("cannot write the status file {}: {e}", path.display());
    }
}

fn run_exec(command: &str, event: &EventRecord) -> Result<(), String> {
    let json = serde_json::to_string(event).map_err(|e| e.to_string())?;
    let status = Command::new("sh")
        .arg("-c")
        .arg(command)
        .env("CANOPY_EVENT_JSON", &json)
        .env("CANOPY_EVENT_KIND", &event.kind)
        .env("CANOPY_EVENT_SEQ", event.seq.to_string())
        .env("CANOPY_REPO_ID", event.repo_id.as_deref().unwrap_or(""))
        .status()
        .map_err(|e| format!("cannot run --exec {command:?}: {e}"))?;
    if !status.success() {
        // A failing command is reported, not retried: the event was
        // delivered; retrying forever would wedge the follower.
        tracing::warn!(
            seq = event.seq,
            "--exec exited with {status} for event {}",
            event.kind
        );
    }
    Ok(())
}

/// Runs `canopy follow` against the service at `url`.
pub fn run(
    args: FollowArgs,
    url: &str,
    token: Option<String>,
    json: bool,
    quiet: bool,
) -> anyhow::Result<()> {
    let client = ServiceClient::new(url)?.with_token(token);
    let glob = args
        .glob
        .as_deref()
        .map(canopy_core::discover::PathFilter::new)
        .transpose()?;
    let cursor_file = match args.cursor_file {
        Some(p) => p,
        None => default_cursor_file(url, args.repo.as_deref())?,
    };
    let options = FollowOptions {
        repo: args.repo,
        cursor_file: cursor_file.clone(),
        wait_seconds: args.wait_seconds,
        max_cycles: args.max_cycles,
        duration: args.duration_seconds.map(Duration::from_secs),
        relevance: Relevance {
            kinds: args.kinds,
            glob,
        },
    };
    if !quiet {
        eprintln!(
            "following {url}{} from cursor {} ({})",
            options
                .repo
                .as_deref()
                .map(|r| format!(" (repository {r})"))
                .unwrap_or_default(),
            canopy_client::follow::read_cursor(&cursor_file)?,
            cursor_file.display()
        );
    }
    let stop = AtomicBool::new(false);
    let exec = args.exec;
    let print_events = json || exec.is_none();
    let status_file = args.status_file;
    let end = follow(
        &client,
        &options,
        &stop,
        |event| {
            if print_events {
                let line = serde_json::to_string(event).map_err(|e| e.to_string())?;
                let mut out = std::io::stdout().lock();
                writeln!(out, "{line}")
                    .and_then(|()| out.flush())
                    .map_err(|e| format!("cannot write to stdout: {e}"))?;
            }
            if let Some(command) = &exec {
                run_exec(command, event)?;
            }
            Ok(())
        },
        |status| {
            if let Some(path) = &status_file {
                write_status(path, status);
            }
        },
    )?;
    if json {
        println!(
            "{}",
            serde_json::json!({"follow_end": {"reason": end.reason, "status": end.status}})
        );
    } else if !quiet {
        let s = &end.status;
        eprintln!(
            "stopped ({}): {} polls, {} events seen, {} relevant, cursor {}, health {:?}",
            end.reason,
            s.cycles,
            s.events_seen,
            s.events_relevant,
            s.last_event_cursor_seen,
            s.health
        );
    }
    Ok(())
}
