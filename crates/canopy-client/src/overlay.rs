//! The dirty-file overlay of service mode (`--service-url`).
//!
//! A shared service indexes what is on disk when it last ran, usually
//! behind the agent's own uncommitted edits. So before asking the service,
//! the CLI lists the files `git status` reports as changed (modified,
//! added, untracked, deleted), copies those that exist into a private
//! temporary tree and indexes it with the same engine: a small overlay.
//! Answers are then merged, typed ([`Served`]): the service's handles in
//! changed files are dropped (their lines predate the edits) and the
//! overlay's handles, which the wire marks `source: "local"`, take their
//! place, so an agent never gets line numbers from before its own edits. Expanding a local handle reads the overlay,
//! which holds the file as it was when the command ran.
//!
//! The overlay lives for one command; building it costs one `git status`
//! and an index of the changed files only.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use canopy_core::CanopyError;
use canopy_core::context::ContextPack;
use canopy_core::discover::RootRule;
use canopy_core::handle::HandleId;
use canopy_core::index::NoProgress;
use canopy_core::model::{Freshness, QueryResult};
use canopy_core::pack::{EvidencePack, Guidance, PackFile};
use canopy_core::{Engine, EngineOptions};
use serde::Serialize;

use crate::served::{OverlayMerge, Served};

/// Why the overlay could not be built.
#[derive(Debug, thiserror::Error)]
pub enum OverlayError {
    /// `git status` did not run.
    #[error("cannot run git status for the local overlay")]
    GitStatus(#[source] std::io::Error),
    /// A directory of the overlay's tree could not be made.
    #[error("cannot create {path}")]
    CreateDir {
        /// The directory.
        path: String,
        /// Why not.
        #[source]
        source: std::io::Error,
    },
    /// A changed file could not be copied into the overlay.
    #[error("cannot copy {path} into the local overlay")]
    Copy {
        /// The repo-relative path.
        path: String,
        /// Why not.
        #[source]
        source: std::io::Error,
    },
    /// The overlay's engine failed (opening or indexing the changed files).
    #[error(transparent)]
    Core(#[from] CanopyError),
}

/// What an overlay changed in an answer: `overlay` on the wire.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum OverlayReport {
    /// A query result or an evidence pack.
    Handles {
        /// Files with uncommitted changes.
        dirty_files: usize,
        /// Handles the overlay added.
        local_handles: usize,
        /// The service's handles dropped (they were in changed files).
        service_handles_dropped: usize,
    },
    /// A context pack.
    Fragments {
        /// Files with uncommitted changes.
        dirty_files: usize,
        /// Fragments the overlay added.
        local_fragments: usize,
        /// The service's fragments dropped (they were in changed files).
        service_fragments_dropped: usize,
    },
    /// An expansion: local handles expand from the overlay.
    Files {
        /// Files with uncommitted changes.
        dirty_files: usize,
    },
}

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
fn dirty_paths(root: &Path) -> Result<Option<BTreeSet<String>>, OverlayError> {
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
        .map_err(OverlayError::GitStatus)?;
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
    pub fn build(root: &Path, options: &EngineOptions) -> Result<Overlay, OverlayError> {
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
                std::fs::create_dir_all(parent).map_err(|source| OverlayError::CreateDir {
                    path: parent.display().to_string(),
                    source,
                })?;
            }
            std::fs::copy(root.join(rel), &to).map_err(|source| OverlayError::Copy {
                path: rel.clone(),
                source,
            })?;
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
    /// (local first at equal rank) with the overlay's; with how many
    /// service items went and local ones came.
    fn interleave<T>(
        &self,
        service: Vec<T>,
        local: Vec<T>,
        file_path: impl Fn(&T) -> &str,
    ) -> (Vec<T>, usize, usize) {
        let before = service.len();
        let kept: Vec<T> = service
            .into_iter()
            .filter(|item| !self.is_dirty(file_path(item)))
            .collect();
        let dropped = before - kept.len();
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

    /// Records the merge in `served`: the report, and which files' handles
    /// are now the overlay's.
    /// The service's freshness without the files the overlay answers now:
    /// their handles are the working tree's, so they are not stale.
    fn freshen(&self, freshness: &mut Option<Freshness>) {
        if let Some(f) = freshness {
            let before = f.stale_paths.len();
            f.stale_paths.retain(|p| !self.is_dirty(p));
            f.stale_files = f.stale_files.saturating_sub(before - f.stale_paths.len());
        }
    }

    fn mark<T>(&self, served: &mut Served<T>, report: OverlayReport, cut: bool) {
        served.merged = Some(OverlayMerge {
            report,
            local_files: self.dirty.clone(),
            cut,
        });
    }

    /// Merges the overlay's answer to the same query into the service's:
    /// service handles in changed files go, local handles come in
    /// (interleaved by rank, local first), at most `limit` of them, and
    /// `total_matches` counts the local matches instead of the dropped ones.
    pub fn merge_query(
        &self,
        served: &mut Served<QueryResult>,
        local: Option<QueryResult>,
        limit: usize,
    ) {
        let answer = &mut served.answer;
        let (local_handles, local_total) = match local {
            Some(l) => (l.handles, Some(l.total_matches)),
            None => (Vec::new(), None),
        };
        let service = std::mem::take(&mut answer.handles);
        let (mut merged, dropped, added) =
            self.interleave(service, local_handles, |h| h.file_path.as_str());
        let truncated = merged.len() > limit;
        merged.truncate(limit);
        answer.total_matches =
            answer.total_matches.saturating_sub(dropped) + local_total.unwrap_or(added);
        if truncated {
            answer.truncated = true;
        }
        answer.handles = merged;
        self.freshen(&mut answer.freshness);
        let report = self.handles_report(added, dropped);
        self.mark(served, report, false);
    }

    /// [`Overlay::merge_query`] for an evidence pack (at most `limit` handles).
    pub fn merge_pack(
        &self,
        served: &mut Served<EvidencePack>,
        local: Option<EvidencePack>,
        limit: usize,
    ) {
        let service = std::mem::take(&mut served.answer.handles);
        let service_suggested = served.answer.expand_suggestion.clone();
        let (local, local_suggested, local_guidance) = match local {
            Some(l) => (l.handles, l.expand_suggestion, Some(l.guidance)),
            None => (Vec::new(), Vec::new(), None),
        };
        let (mut merged, dropped, added) =
            self.interleave(service, local, |h| h.file_path.as_str());
        let cut = merged.len() > limit;
        merged.truncate(limit);
        let pack = &mut served.answer;
        pack.handles = merged;
        // What the pack says about its handles follows the merged list: the
        // tokens they add up to, the files they are in, and which to expand
        // (the suggestions of both answers that are still in it, in its
        // order, as many as the service suggested).
        pack.total_tokens = pack.handles.iter().map(|h| u64::from(h.token_count)).sum();
        let mut files: Vec<PackFile> = Vec::new();
        for h in &pack.handles {
            match files.iter_mut().find(|f| f.file_path == h.file_path) {
                Some(f) => f.handles += 1,
                None => files.push(PackFile {
                    file_path: h.file_path.clone(),
                    handles: 1,
                }),
            }
        }
        pack.files = files;
        let want = pack.expand_suggestion.len();
        let suggested: Vec<HandleId> = pack
            .handles
            .iter()
            .map(|h| h.id.clone())
            .filter(|id| pack.expand_suggestion.contains(id) || local_suggested.contains(id))
            .take(want)
            .collect();
        pack.expand_suggestion = suggested;
        if dropped + added > 0 {
            let suggestion_dropped = service_suggested
                .iter()
                .any(|id| !pack.expand_suggestion.contains(id));
            pack.guidance = merged_guidance(
                &pack.guidance,
                local_guidance.as_ref(),
                MergedPack {
                    suggestion_dropped,
                    handles: pack.handles.len(),
                    suggested: pack.expand_suggestion.len(),
                    local_handles: added,
                    dirty_files: self.dirty.len(),
                },
            );
        }
        self.freshen(&mut pack.freshness);
        let report = self.handles_report(added, dropped);
        self.mark(served, report, cut);
    }

    fn handles_report(&self, added: usize, dropped: usize) -> OverlayReport {
        OverlayReport::Handles {
            dirty_files: self.dirty.len(),
            local_handles: added,
            service_handles_dropped: dropped,
        }
    }

    /// [`Overlay::merge_query`] for a context pack: the service's fragments
    /// in changed files go, the overlay's come in, interleaved by rank, and
    /// the last ones are dropped until the total fits `budget` again.
    pub fn merge_context(
        &self,
        served: &mut Served<ContextPack>,
        local: Option<ContextPack>,
        budget: u64,
    ) {
        let service = std::mem::take(&mut served.answer.fragments);
        let local = local.map(|l| l.fragments).unwrap_or_default();
        let (merged, dropped, added) = self.interleave(service, local, |f| f.file_path.as_str());
        served.answer.fragments = merged;
        // The budget bounds the wire form (the header and each fragment's
        // provenance line included): the last fragments go until it fits.
        let pack = &mut served.answer;
        self.freshen(&mut pack.freshness);
        while canopy_core::context::wire::tokens(pack) > budget && pack.fragments.pop().is_some() {}
        pack.total_tokens = pack.fragments.iter().map(|f| u64::from(f.tokens)).sum();
        pack.wire_tokens = canopy_core::context::wire::tokens(pack);
        let report = OverlayReport::Fragments {
            dirty_files: self.dirty.len(),
            local_fragments: added,
            service_fragments_dropped: dropped,
        };
        self.mark(served, report, false);
    }

    /// What an expansion reports of the overlay: how many files it holds.
    pub fn files_report(&self) -> OverlayReport {
        OverlayReport::Files {
            dirty_files: self.dirty.len(),
        }
    }

    /// The overlay's engine, when any changed file exists.
    pub fn engine(&self) -> Option<&Engine> {
        self.engine.as_ref()
    }
}

/// What an overlay merge did to an evidence pack, for its guidance.
struct MergedPack {
    /// A handle the service suggested expanding is no longer in the pack
    /// (its file changed, or it was cut).
    suggestion_dropped: bool,
    /// Handles in the merged pack.
    handles: usize,
    /// Handles it suggests expanding.
    suggested: usize,
    /// Handles the overlay added.
    local_handles: usize,
    /// Files with uncommitted changes.
    dirty_files: usize,
}

/// The guidance of a merged pack: the service judged its own handles, the
/// overlay its own, and neither judged the merge. So the merged pack is as
/// confident as the less confident of the two, says stop only when both
/// did and none of the handles the service's "stop" rested on went, and
/// its next step says which handles are the working tree's.
fn merged_guidance(service: &Guidance, local: Option<&Guidance>, merge: MergedPack) -> Guidance {
    fn rank(band: &str) -> u8 {
        match band {
            "high" => 2,
            "medium" => 1,
            _ => 0,
        }
    }
    let mut g = match local {
        Some(local) if rank(&local.confidence_band) < rank(&service.confidence_band) => {
            local.clone()
        }
        _ => service.clone(),
    };
    g.confidence = local.map_or(service.confidence, |l| l.confidence.min(service.confidence));
    g.stop_querying =
        service.stop_querying && local.is_none_or(|l| l.stop_querying) && !merge.suggestion_dropped;
    if merge.suggestion_dropped && g.confidence_band == "high" {
        // What the service was sure of changed under it.
        g.confidence_band = "medium".into();
        g.confidence = g.confidence.min(0.69);
    }
    let more = local.map_or(0, |l| l.max_additional_queries);
    g.max_additional_queries = service.max_additional_queries.max(more);
    if !g.stop_querying {
        g.max_additional_queries = g.max_additional_queries.max(1);
    }
    g.suggested_expand_count = g.suggested_expand_count.min(merge.suggested);
    if merge.handles == 0 {
        g.recommended_action = "refine_query".into();
        g.suggested_expand_count = 0;
    }
    let next = if g.stop_querying {
        g.next_step.clone()
    } else {
        g.next_step
            .replace("Stop searching: expand", "Expand")
            .replace(
                " and answer.",
                ", and query again if they do not answer it.",
            )
    };
    g.next_step = format!(
        "{} of these handles come from your uncommitted changes ({} changed file(s), read as they are now); \
         the service's handles in those files were dropped. {next}",
        merge.local_handles, merge.dirty_files
    );
    g
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guidance(band: &str, confidence: f64, stop: bool) -> Guidance {
        Guidance {
            stop_querying: stop,
            recommended_action: "expand_then_answer".into(),
            suggested_expand_count: 3,
            max_additional_queries: if stop { 0 } else { 1 },
            confidence,
            confidence_band: band.into(),
            next_step: if stop {
                "Stop searching: expand the top 3 suggested handle(s) and answer.".into()
            } else {
                "Expand the top 3 suggested handle(s); run at most 1 narrower query if they do not answer it.".into()
            },
        }
    }

    fn merge(suggestion_dropped: bool) -> MergedPack {
        MergedPack {
            suggestion_dropped,
            handles: 5,
            suggested: 2,
            local_handles: 2,
            dirty_files: 1,
        }
    }

    #[test]
    fn a_stop_the_merge_took_handles_from_is_no_longer_a_stop() {
        let service = guidance("high", 0.9, true);
        let local = guidance("high", 0.95, true);
        let g = merged_guidance(&service, Some(&local), merge(true));
        assert!(!g.stop_querying);
        assert_eq!(g.confidence_band, "medium");
        assert!(g.confidence <= 0.69);
        assert!(g.max_additional_queries >= 1);
        assert_eq!(g.suggested_expand_count, 2, "at most the suggestions left");
        assert!(
            g.next_step.starts_with(
                "2 of these handles come from your uncommitted changes (1 changed file(s)"
            ),
            "{}",
            g.next_step
        );
        assert!(!g.next_step.contains("Stop searching"), "{}", g.next_step);
    }

    #[test]
    fn the_merged_pack_is_as_sure_as_the_less_sure_answer() {
        let service = guidance("high", 0.9, true);
        let local = guidance("low", 0.3, false);
        let g = merged_guidance(&service, Some(&local), merge(false));
        assert!(!g.stop_querying, "the overlay did not say stop");
        assert_eq!(g.confidence_band, "low");
        assert!((g.confidence - 0.3).abs() < 1e-9);
        // Both sure, no suggestion lost: the stop stands.
        let g = merged_guidance(&service, Some(&guidance("high", 0.88, true)), merge(false));
        assert!(g.stop_querying);
        assert_eq!(g.confidence_band, "high");
        assert!((g.confidence - 0.88).abs() < 1e-9);
        assert!(g.next_step.contains("Stop searching"), "{}", g.next_step);
    }

    #[test]
    fn an_empty_merged_pack_says_refine() {
        let service = guidance("medium", 0.7, false);
        let mut m = merge(true);
        m.handles = 0;
        m.suggested = 0;
        let g = merged_guidance(&service, None, m);
        assert_eq!(g.recommended_action, "refine_query");
        assert_eq!(g.suggested_expand_count, 0);
    }
}
