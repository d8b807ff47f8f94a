//! The service's side of fleet mode (`crate::fleet`): a repository this
//! node acquired the lease of is adopted (its working copy synced, its
//! entry made from the published state, a run started), and one it lost
//! or hands over stops being indexed here.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use canopy_client::api::RunError;
use canopy_fleet::{RepoRow, RepoSource};
use serde_json::json;

use super::entry::RepoEntry;
use super::{Service, lock};
use crate::error::ApiError;
use crate::fleet::{FleetNode, adopted_record};
use crate::registry::{NewEvent, RepoStatus};

impl Service {
    /// Attaches the fleet node (once, right after start).
    pub fn attach_fleet(&self, node: Arc<FleetNode>) {
        if self.fleet.set(node).is_err() {
            tracing::warn!("a fleet node was already attached");
        }
    }

    /// The fleet node, in fleet mode.
    pub fn fleet(&self) -> Option<&Arc<FleetNode>> {
        self.fleet.get()
    }

    /// Whether this node has an entry for `repo_id` (adopted under a lease).
    pub(crate) fn fleet_has(&self, repo_id: &str) -> bool {
        self.entries().iter().any(|e| e.id == repo_id)
    }

    /// Takes `row` over after acquiring its lease: syncs a git source's
    /// working copy, makes (or refreshes) the entry from the published
    /// state and starts a full run, whose completion publishes the next
    /// generation under the lease.
    pub(crate) fn fleet_adopt(
        self: &Arc<Self>,
        node: &FleetNode,
        row: RepoRow,
    ) -> anyhow::Result<()> {
        let root = match &row.source {
            RepoSource::Path { path } => PathBuf::from(path),
            RepoSource::Git { url, git_ref } => {
                let dir = node.checkout_dir(&row.repo_id);
                if let Err(e) = canopy_fleet::git::sync(url, git_ref, &dir, node.git_policy()) {
                    node.note_run_epoch(&row.repo_id);
                    let mut record = adopted_record(&row, dir);
                    record.status = RepoStatus::Failed;
                    record.dirty = false;
                    record.consecutive_failures += 1;
                    record.last_error = Some(RunError {
                        code: "Git".into(),
                        message: e.to_string(),
                    });
                    let event = NewEvent {
                        kind: "reindex_failed",
                        repo_id: Some(row.repo_id.clone()),
                        data: json!({
                            "generation": record.generation,
                            "code": "Git",
                            "message": e.to_string(),
                            "consecutive_failures": record.consecutive_failures,
                        }),
                    };
                    self.commit(Some(&record), vec![event])?;
                    anyhow::bail!("syncing {}: {e}", row.repo_id);
                }
                dir
            }
        };
        // A run of an earlier lease (this node was paused, or lost the
        // repository and got it back) must end first: its result is refused
        // (`FleetNode::commit`), and this lease starts from the published state.
        self.wait_for_run_end(&row.repo_id);
        let record = adopted_record(&row, root.clone());
        let entry = {
            let mut repos = self.repos.write().unwrap_or_else(|e| e.into_inner());
            match repos.iter().position(|e| e.id == row.repo_id) {
                Some(i) if repos[i].root == root => {
                    let e = repos[i].clone();
                    let mut st = lock(&e.state);
                    st.record = record;
                    st.names.forget();
                    drop(st);
                    e
                }
                Some(i) => {
                    let e = Arc::new(RepoEntry::new(record, None));
                    repos[i] = e.clone();
                    e
                }
                None => {
                    let e = Arc::new(RepoEntry::new(record, None));
                    repos.push(e.clone());
                    e
                }
            }
        };
        self.fleet_sync_watch(node, &row.repo_id);
        self.start_reindex(&entry, None, true)
            .map_err(|e| anyhow::anyhow!("starting the first run of {}: {e}", row.repo_id))?;
        Ok(())
    }

    /// Makes `repo_id`'s entry follow the watch flag the registry holds as
    /// this node last learned it (`FleetNode::watch`): records it, and
    /// starts the watcher while this node owns the repository and the flag
    /// (or `--watch`) says so, else stops it. Under the flag map's lock, so
    /// an adoption and a settings change never interleave.
    pub(crate) fn fleet_sync_watch(self: &Arc<Self>, node: &FleetNode, repo_id: &str) {
        let Some(entry) = self.entries().into_iter().find(|e| e.id == repo_id) else {
            // Not adopted yet: the adoption reads the flag from the map.
            return;
        };
        let wanted = crate::fleet::lock_watch(node);
        let watch = {
            let mut st = lock(&entry.state);
            if let Some(&w) = wanted.get(repo_id) {
                st.record.watch = w;
            }
            st.record.watch
        };
        if (watch || self.config.watch_all) && node.fleet().fence(repo_id).is_some() {
            self.start_watcher(&entry);
        } else if let Some(stop) = lock(&entry.watcher).take() {
            stop.store(true, Ordering::SeqCst);
        }
    }

    fn wait_for_run_end(&self, repo_id: &str) {
        let Some(entry) = self.entries().into_iter().find(|e| e.id == repo_id) else {
            return;
        };
        loop {
            {
                let mut st = lock(&entry.state);
                st.rerun = None;
                if st.run.is_none() {
                    return;
                }
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// Stops indexing `repo_id` here (its lease is lost or being handed
    /// over): the watcher stops, and a removed repository's entry goes.
    /// Returns whether no run is in progress any more.
    pub(crate) fn fleet_stop(&self, repo_id: &str, removed: bool) -> bool {
        let Some(entry) = self.entries().into_iter().find(|e| e.id == repo_id) else {
            return true;
        };
        if let Some(stop) = lock(&entry.watcher).take() {
            stop.store(true, Ordering::SeqCst);
        }
        let idle = {
            let mut st = lock(&entry.state);
            st.rerun = None;
            st.run.is_none()
        };
        if removed {
            self.repos
                .write()
                .unwrap_or_else(|e| e.into_inner())
                .retain(|e| e.id != repo_id);
        }
        idle
    }
}

impl Service {
    /// A path source for `POST /repos/add` in fleet mode, checked as the
    /// single-node service checks it (absolute, under an allowed root, a
    /// git repository root): its canonical text and its directory name.
    pub(crate) fn fleet_registrable(&self, raw: &str) -> Result<(String, String), ApiError> {
        let (canonical, text) = self.registrable_root(raw.trim())?;
        let base = canonical
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        Ok((text, base))
    }
}

/// A repository name made from `raw` (a directory or URL's last part).
pub(crate) fn sanitize_repo_name(raw: &str) -> String {
    super::repos::sanitize_name(raw)
}
