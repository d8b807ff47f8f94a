//! Registration: `POST /repos/add` (a git repository root under an
//! allowed root, named uniquely, its engine opened at once) and `GET
//! /repos`; and the ids and names repositories get.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use canopy_client::api::{AddRepoRequest, AddRepoResponse, RepoView};
use canopy_core::Engine;
use serde_json::{Value, json};

use canopy_fleet::RepoRow;

use super::entry::RepoEntry;
use super::{Service, lock, now_secs};
use crate::error::ApiError;
use crate::fleet::FleetNode;
use crate::registry::{NewEvent, RepoRecord, now_ms};

/// A random id in UUID v4 format.
fn new_repo_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut bytes = [0u8; 16];
    for chunk in bytes.chunks_mut(8) {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_i64(now_ms());
        h.write_u32(std::process::id());
        h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
        if let Ok(d) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
            h.write_u32(d.subsec_nanos());
        }
        chunk.copy_from_slice(&h.finish().to_le_bytes());
    }
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// Resolves `.` and `..` without touching the file system.
fn lexical_normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && !name.starts_with('.')
}

/// A name for the repository at `root` that `taken` says is free: its
/// directory's name, sanitized, then `-2`, `-3`, … after it.
fn free_name(root: &Path, taken: impl Fn(&str) -> bool) -> String {
    let base = sanitize_name(
        &root
            .file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default(),
    );
    let mut candidate = base.clone();
    let mut n = 2;
    while taken(&candidate) {
        candidate = format!("{base}-{n}");
        n += 1;
    }
    candidate
}

pub(super) fn sanitize_name(raw: &str) -> String {
    let s: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '-'
            }
        })
        .take(56)
        .collect();
    let s = s.trim_start_matches('.').to_string();
    if s.is_empty() { "repo".into() } else { s }
}

impl Service {
    /// `POST /repos/add`.
    pub fn add_repo(self: &Arc<Self>, req: AddRepoRequest) -> Result<AddRepoResponse, ApiError> {
        let raw = req.path.trim();
        let (canonical, root_text) = self.registrable_root(raw)?;
        let explicit = req.name.as_deref().map(str::trim).filter(|n| !n.is_empty());
        if let Some(name) = explicit
            && !valid_name(name)
        {
            return Err(ApiError::Validation(format!(
                "invalid name {name:?}: use 1-64 characters from A-Z a-z 0-9 - _ . (not starting with .)"
            )));
        }

        let mut repos = self.repos.write().unwrap_or_else(|e| e.into_inner());
        if let Some(existing) = repos.iter().find(|e| e.root == canonical).cloned() {
            drop(repos);
            if let Some(watch) = req.watch {
                self.set_watch(&existing, watch)?;
            }
            let name = lock(&existing.state).record.name.clone();
            return Ok(AddRepoResponse {
                repo_id: existing.id.clone(),
                name,
                repo_root: root_text,
                created: false,
            });
        }
        let taken = |n: &str| repos.iter().any(|e| lock(&e.state).record.name == n);
        let name = match explicit {
            Some(n) if taken(n) => return Err(ApiError::NameTaken(n.to_string())),
            Some(n) => n.to_string(),
            None => free_name(&canonical, taken),
        };
        let engine =
            Engine::open(&canonical, self.config.engine_options.clone()).map_err(|e| match e {
                canopy_core::CanopyError::UnsafeRoot { reason, .. } => {
                    ApiError::PathNotAllowed(format!("{raw} is {reason}, which is never served"))
                }
                e => ApiError::internal(format!("opening the index of {raw}: {e}")),
            })?;
        let record = RepoRecord::registered(new_repo_id(), name.clone(), canonical, now_secs());
        self.commit(
            Some(&record),
            vec![NewEvent {
                kind: "repo_added",
                repo_id: Some(record.repo_id.clone()),
                data: json!({ "name": name, "repo_root": root_text }),
            }],
        )
        .map_err(ApiError::internal)?;
        let entry = Arc::new(RepoEntry::new(record, Some(Arc::new(engine))));
        repos.push(entry.clone());
        drop(repos);
        if req.watch == Some(true) {
            self.set_watch(&entry, true)?;
        } else if self.config.watch_all {
            // `canopy serve --watch` watches every repository, those
            // registered after start-up included.
            self.start_watcher(&entry);
        }
        Ok(AddRepoResponse {
            repo_id: entry.id.clone(),
            name,
            repo_root: root_text,
            created: true,
        })
    }

    /// The canonical root `raw` names, and its text, if it may be
    /// registered: an absolute path to the root of a git repository under
    /// an allowed root. Errors name the path as given, never its resolved
    /// form (that would tell the caller where a symlink points), and never
    /// say whether a path outside the allowed roots exists.
    pub(super) fn registrable_root(&self, raw: &str) -> Result<(PathBuf, String), ApiError> {
        if raw.is_empty() {
            return Err(ApiError::Validation("`path` is required".into()));
        }
        let path = Path::new(raw);
        if !path.is_absolute() {
            return Err(ApiError::Validation(format!(
                "`path` must be absolute, got {raw:?}"
            )));
        }
        let outside = || ApiError::PathNotAllowed(format!("{raw} is outside the allowed roots"));
        let canonical = match path.canonicalize() {
            Ok(c) => c,
            Err(_) if !self.allowed(&lexical_normalize(path)) => return Err(outside()),
            Err(_) => {
                return Err(ApiError::Validation(format!(
                    "{raw} does not exist or is not accessible"
                )));
            }
        };
        if !self.allowed(&canonical) {
            return Err(outside());
        }
        if !canonical.is_dir() {
            return Err(ApiError::Validation(format!("{raw} is not a directory")));
        }
        if !canonical.join(".git").exists() {
            return Err(ApiError::NotAGitRepository(format!(
                "{raw} is not a git repository root (no .git)"
            )));
        }
        let Some(root_text) = canonical.to_str().map(str::to_string) else {
            return Err(ApiError::Validation("the path must be valid UTF-8".into()));
        };
        Ok((canonical, root_text))
    }

    /// `GET /repos`.
    pub fn repos(&self) -> Vec<RepoView> {
        self.entries().iter().map(|e| e.view()).collect()
    }

    /// `GET /repos/{id}/settings`: what the registry stores as the
    /// repository's settings (today only its watch flag); in fleet mode,
    /// what PostgreSQL stores, on any node.
    pub fn repo_settings(&self, repo: &str) -> Result<Value, ApiError> {
        if let Some(node) = self.fleet() {
            let row = self.fleet_settings_row(node, repo)?;
            return Ok(fleet_settings_view(&row, self.config.watch_all));
        }
        let entry = self.lookup(repo)?;
        Ok(settings_view(&entry, self.config.watch_all))
    }

    /// `POST /repos/{id}/settings`: changes the settings the body names
    /// (keys: [`SETTINGS_KEYS`]); an unknown key or a mistyped value is a
    /// validation error and changes nothing. Kept across restarts.
    pub fn set_repo_settings(self: &Arc<Self>, repo: &str, body: Value) -> Result<Value, ApiError> {
        if let Some(node) = self.fleet().cloned() {
            return self.fleet_set_repo_settings(&node, repo, body);
        }
        let entry = self.lookup(repo)?;
        if let Some(watch) = settings_change(body)? {
            self.set_watch(&entry, watch)?;
        }
        Ok(settings_view(&entry, self.config.watch_all))
    }

    /// Fleet mode: `repo` (an id or a name) as PostgreSQL registers it.
    fn fleet_settings_row(&self, node: &FleetNode, repo: &str) -> Result<RepoRow, ApiError> {
        let repo = repo.trim();
        if repo.is_empty() {
            return Err(ApiError::Validation(
                "`repo` is required: a repo_id from POST /repos/add (or the repo's name)".into(),
            ));
        }
        node.block_on(node.fleet().repo(repo))
            .map_err(|e| ApiError::FleetUnavailable(e.to_string()))?
            .ok_or_else(|| ApiError::NotFound {
                what: "repository",
                id: repo.to_string(),
            })
    }

    /// Fleet mode's `POST /repos/{id}/settings`: validated as on one
    /// machine, then written to PostgreSQL (`fleet_repos.watch`), the
    /// fleet's one copy; nothing changes when the database cannot be used.
    /// This node applies it at once when it owns the repository; another
    /// owner at its next heartbeat (`LeaseChange::Settings`), and a node
    /// taking the lease later with the row it adopts.
    fn fleet_set_repo_settings(
        self: &Arc<Self>,
        node: &Arc<FleetNode>,
        repo: &str,
        body: Value,
    ) -> Result<Value, ApiError> {
        let mut row = self.fleet_settings_row(node, repo)?;
        if let Some(watch) = settings_change(body)? {
            let exists = node
                .block_on(node.fleet().set_watch(&row.repo_id, watch))
                .map_err(|e| ApiError::FleetUnavailable(e.to_string()))?;
            if !exists {
                return Err(ApiError::NotFound {
                    what: "repository",
                    id: repo.trim().to_string(),
                });
            }
            row.watch = watch;
            if node.fleet().fence(&row.repo_id).is_some() {
                node.learn_watch(&row.repo_id, watch);
                self.fleet_sync_watch(node, &row.repo_id);
            }
        }
        Ok(fleet_settings_view(&row, self.config.watch_all))
    }
}

/// The change a `POST /repos/{id}/settings` body asks for: the new watch
/// flag, if it names one. Refuses a body that is not an object, an
/// unknown key and a mistyped value (the same in fleet mode).
fn settings_change(body: Value) -> Result<Option<bool>, ApiError> {
    let Value::Object(fields) = body else {
        return Err(ApiError::Validation(
            "the body must be a JSON object of settings, e.g. {\"watch\": true}".into(),
        ));
    };
    if let Some(key) = fields.keys().find(|k| !SETTINGS_KEYS.contains(&k.as_str())) {
        return Err(ApiError::Validation(format!(
            "unknown setting `{key}`; the settings are: {}",
            SETTINGS_KEYS.join(", ")
        )));
    }
    match fields.get("watch") {
        None => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(other) => Err(ApiError::Validation(format!(
            "`watch` must be true or false, got {other}"
        ))),
    }
}

/// The settings `POST /repos/{id}/settings` accepts.
pub const SETTINGS_KEYS: [&str; 1] = ["watch"];

/// Fleet mode: a repository's settings as PostgreSQL stores them.
/// `watched` is what its owner does if it runs with this node's flags
/// (the nodes of a fleet are started alike).
fn fleet_settings_view(row: &RepoRow, watch_all: bool) -> Value {
    json!({
        "repo_id": row.repo_id,
        "name": row.name,
        "watch": row.watch,
        "watched": row.watch || watch_all,
    })
}

/// A repository's settings as the settings routes answer them.
fn settings_view(entry: &RepoEntry, watch_all: bool) -> Value {
    let st = lock(&entry.state);
    json!({
        "repo_id": entry.id,
        "name": st.record.name,
        "watch": st.record.watch,
        // `canopy serve --watch` watches every repository whatever its flag.
        "watched": st.record.watch || watch_all,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repo_ids_are_uuid_shaped_and_distinct() {
        let a = new_repo_id();
        let b = new_repo_id();
        assert_ne!(a, b);
        assert_eq!(a.len(), 36);
        assert_eq!(&a[14..15], "4");
    }

    #[test]
    fn normalizes_lexically() {
        assert_eq!(
            lexical_normalize(Path::new("/a/b/../c/./d")),
            Path::new("/a/c/d")
        );
        assert_eq!(lexical_normalize(Path::new("/a/../../x")), Path::new("/x"));
    }

    #[test]
    fn names_are_validated_and_sanitized() {
        assert!(valid_name("my-repo_1.x"));
        assert!(!valid_name("../etc"));
        assert!(!valid_name(""));
        assert_eq!(sanitize_name("my repo!"), "my-repo-");
        assert_eq!(sanitize_name(".."), "repo");
    }
}
