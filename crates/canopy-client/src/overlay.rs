//! The dirty-file overlay of service mode (`--service-url`).
//!
//! A shared service indexes what is on disk when it last ran, usually
//! behind the agent's own uncommitted edits. So before asking the service,
//! the CLI lists the files `git status` reports as changed (modified,
//! added, untracked, deleted), copies those that exist into a private
//! temporary tree and indexes it with the same engine: a small overlay.
//! Answers are then merged: the service's handles in changed files are
//! dropped (their lines predate the edits) and the overlay's handles, marked
//! `source: "local"`, take their place, so an agent never gets line numbers
//! from before its own edits. Expanding a local handle reads the overlay,
//! which holds the file as it was when the command ran.
//!
//! The overlay lives for one command; building it costs one `git status`
//! and an index of the changed files only.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Context;
use canopy_core::discover::RootRule;
use canopy_core::index::NoProgress;
use canopy_core::{Engine, EngineOptions};
use serde_json::{Value, json};

/// Files with uncommitted changes, indexed locally.
pub struct Overlay {
    /// Repo-relative paths `git status` reports (existing or deleted).
    dirty: BTreeSet<String>,
    engine: Option<Engine>,
    dir: PathBuf,
}

impl Drop for Overlay {
    fn drop(&mut self) {
        // The engine's connections close first, then the tree goes.
        self.engine = None;
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Repo-relative paths with uncommitted changes (`git status`), or `None`
/// outside git.
fn dirty_paths(root: &Path) -> anyhow::Result<Option<BTreeSet<String>>> {
    let out = Command::new("git")
        .arg("-C")
        .arg(root)
        .args([
            "status",
            "--porcelain=v1",
            "-z",
            "--untracked-files=all",
            "--no-renames",
        ])
        .output()
        .context("cannot run git status for the local overlay")?;
    if !out.status.success() {
        return Ok(None);
    }
    let mut paths = BTreeSet::new();
    for entry in out.stdout.split(|b| *b == 0) {
        // "XY path": two status letters and a space.
        if entry.len() < 4 {
            continue;
        }
        let path = String::from_utf8_lossy(&entry[3..]).into_owned();
        if path.starts_with(".canopy/") || path.ends_with('/') {
            continue;
        }
        paths.insert(path);
    }
    Ok(Some(paths))
}

impl Overlay {
    /// Builds the overlay of `root`'s uncommitted changes (empty when there
    /// are none or `root` is not in git).
    pub fn build(root: &Path, options: &EngineOptions) -> anyhow::Result<Overlay> {
        let dir = std::env::temp_dir().join(format!(
            "canopy-overlay-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0)
        ));
        let dirty = dirty_paths(root)?.unwrap_or_default();
        let mut overlay = Overlay {
            dirty,
            engine: None,
            dir,
        };
        let present: Vec<&String> = overlay
            .dirty
            .iter()
            .filter(|p| root.join(p).is_file())
            .collect();
        if present.is_empty() {
            return Ok(overlay);
        }
        for rel in present {
            let to = overlay.dir.join(rel);
            if let Some(parent) = to.parent() {
                std::fs::create_dir_all(parent)
                    .with_context(|| format!("cannot create {}", parent.display()))?;
            }
            std::fs::copy(root.join(rel), &to)
                .with_context(|| format!("cannot copy {rel} into the local overlay"))?;
        }
        let engine = Engine::open(
            &overlay.dir,
            EngineOptions {
                root_rule: RootRule::Named,
                ..options.clone()
            },
        )?;
        engine.index(None, &NoProgress)?;
        overlay.engine = Some(engine);
        Ok(overlay)
    }

    /// Number of files with uncommitted changes.
    pub fn dirty_files(&self) -> usize {
        self.dirty.len()
    }

    fn is_dirty(&self, path: &str) -> bool {
        self.dirty.contains(path)
    }

    /// The service's `items` without those in changed files, interleaved
    /// (local first at equal rank) with the overlay's, marked `source:
    /// "local"`; with how many service items went and local ones came.
    fn interleave(&self, service: Vec<Value>, mut local: Vec<Value>) -> (Vec<Value>, usize, usize) {
        let before = service.len();
        let kept: Vec<Value> = service
            .into_iter()
            .filter(|h| !h["file_path"].as_str().is_some_and(|p| self.is_dirty(p)))
            .collect();
        let dropped = before - kept.len();
        for item in &mut local {
            if let Some(item) = item.as_object_mut() {
                item.insert("source".into(), json!("local"));
                item.remove("generation");
            }
        }
        let added = local.len();
        let mut merged = Vec::with_capacity(kept.len() + added);
        let (mut l, mut s) = (local.into_iter(), kept.into_iter());
        loop {
            let (a, b) = (l.next(), s.next());
            if a.is_none() && b.is_none() {
                break;
            }
            merged.extend(a);
            merged.extend(b);
        }
        (merged, dropped, added)
    }

    /// Merges the overlay's answer to the same query into the service's
    /// `answer` (a query result or an evidence pack, as JSON): service
    /// handles in changed files go, local handles come in (interleaved by
    /// rank: local first at equal rank), and `overlay` says what happened.
    pub fn merge(&self, answer: &mut Value, local: Option<Value>, limit: usize) {
        let list = |v: Option<&Value>, key: &str| -> Vec<Value> {
            v.and_then(|v| v.get(key))
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
        };
        let service = list(Some(&*answer), "handles");
        let (mut merged, dropped, added) =
            self.interleave(service, list(local.as_ref(), "handles"));
        let Some(obj) = answer.as_object_mut() else {
            return;
        };
        let truncated = merged.len() > limit;
        merged.truncate(limit);
        if let Some(total) = obj.get("total_matches").and_then(Value::as_u64) {
            let local_total = local
                .as_ref()
                .and_then(|l| l["total_matches"].as_u64())
                .unwrap_or(added as u64);
            obj.insert(
                "total_matches".into(),
                json!(total.saturating_sub(dropped as u64) + local_total),
            );
        }
        if truncated {
            obj.insert("truncated".into(), json!(true));
        }
        obj.insert("handles".into(), Value::Array(merged));
        obj.insert(
            "overlay".into(),
            json!({
                "dirty_files": self.dirty.len(),
                "local_handles": added,
                "service_handles_dropped": dropped,
            }),
        );
    }

    /// [`Overlay::merge`] for a context pack: the service's fragments in
    /// changed files go, the overlay's fragments (marked `source: "local"`)
    /// come in, interleaved by rank, and the last ones are dropped until
    /// the total fits `budget` again.
    pub fn merge_fragments(&self, answer: &mut Value, local: Option<Value>, budget: u64) {
        let Some(obj) = answer.as_object_mut() else {
            return;
        };
        let service: Vec<Value> = obj
            .get("fragments")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let local_fragments: Vec<Value> = local
            .as_ref()
            .and_then(|l| l.get("fragments"))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let (mut merged, dropped, added) = self.interleave(service, local_fragments);
        let tokens = |f: &Value| f["tokens"].as_u64().unwrap_or(0);
        let mut total: u64 = merged.iter().map(tokens).sum();
        while total > budget {
            match merged.pop() {
                Some(f) => total -= tokens(&f),
                None => break,
            }
        }
        obj.insert("fragments".into(), Value::Array(merged));
        obj.insert("total_tokens".into(), json!(total));
        obj.insert(
            "overlay".into(),
            json!({
                "dirty_files": self.dirty.len(),
                "local_fragments": added,
                "service_fragments_dropped": dropped,
            }),
        );
    }

    /// The overlay's engine, when any changed file exists.
    pub fn engine(&self) -> Option<&Engine> {
        self.engine.as_ref()
    }
}
