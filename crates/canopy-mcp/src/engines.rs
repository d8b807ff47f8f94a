//! A bounded cache of open engines, one per canonical repository root, so
//! one server can serve any number of repositories.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use canopy_client::local::LocalBackend;
use canopy_core::discover::{RootRule, locate_root};
use canopy_core::{Engine, EngineOptions};

use crate::error::ToolError;

/// An open repository.
pub(crate) struct Repo {
    /// The repository's engine (blocking; call it on the blocking pool).
    engine: Engine,
    /// Held while the repository's first index run is under way, so that
    /// concurrent first queries wait for one run instead of starting several.
    first_index: Arc<std::sync::Mutex<()>>,
    /// Set to stop the repository's watcher thread, if it has one.
    stop_watching: Arc<AtomicBool>,
}

impl Repo {
    /// The backend that answers over this repository's engine.
    pub(crate) fn backend(&self) -> LocalBackend {
        LocalBackend::with_engine(self.engine.clone(), self.first_index.clone())
    }
}

impl Drop for Repo {
    fn drop(&mut self) {
        // Closed (evicted, or the server stopped): its watcher stops too.
        self.stop_watching.store(true, Ordering::SeqCst);
    }
}

struct Entry {
    repo: Arc<Repo>,
    last_used: u64,
}

#[derive(Default)]
struct Inner {
    clock: u64,
    entries: HashMap<PathBuf, Entry>,
}

/// Engines by canonical repository root, least recently used evicted first.
///
/// Eviction only drops the cache's reference: calls still using an evicted
/// engine finish normally, and the next call for that repository opens it
/// again.
pub(crate) struct EngineCache {
    capacity: usize,
    /// How each engine is opened.
    options: EngineOptions,
    /// Whether each open repository is watched for changes.
    watch: bool,
    inner: Mutex<Inner>,
    /// Serialises opening engines: two engines on one fresh index would race
    /// to create it (SQLite answers "database is locked"), and one engine per
    /// repository keeps its first index run single.
    opening: tokio::sync::Mutex<()>,
}

impl EngineCache {
    /// A cache holding at most `capacity` engines (at least one), each
    /// opened with `options`.
    pub(crate) fn new(capacity: usize, options: EngineOptions) -> EngineCache {
        EngineCache {
            capacity: capacity.max(1),
            options,
            watch: false,
            inner: Mutex::new(Inner::default()),
            opening: tokio::sync::Mutex::new(()),
        }
    }

    /// Watches every repository it opens (see [`canopy_core::watch`]).
    pub(crate) fn watching(mut self, watch: bool) -> EngineCache {
        self.watch = watch;
        self
    }

    /// How engines are opened.
    pub(crate) fn options(&self) -> &EngineOptions {
        &self.options
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // The map stays consistent across a panic (no multi-step updates).
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The engine for the repository containing `path` (absolute, existing),
    /// opened on the blocking pool if it is not cached.
    pub(crate) async fn get(&self, path: &str) -> Result<Arc<Repo>, ToolError> {
        let root = self.root_of(path).await?;
        self.open(root).await
    }

    /// The engine for the repository containing `path` if that repository
    /// has an index already; `Err(root)` (its root) when it has none. Never
    /// creates anything, for read-only tools.
    pub(crate) async fn get_existing(
        &self,
        path: &str,
    ) -> Result<Result<Arc<Repo>, PathBuf>, ToolError> {
        let root = self.root_of(path).await?;
        if let Some(repo) = self.lookup(&root) {
            return Ok(Ok(repo));
        }
        if !Engine::index_exists(&root) {
            return Ok(Err(root));
        }
        self.open(root).await.map(Ok)
    }

    /// The canonical repository root for a path an agent sent.
    async fn root_of(&self, path: &str) -> Result<PathBuf, ToolError> {
        let requested = PathBuf::from(path);
        if path.is_empty() || !requested.is_absolute() {
            return Err(ToolError::InvalidPath(format!(
                "path must be an absolute repository root, got {path:?}"
            )));
        }
        let rule = self.options.root_rule;
        blocking(move || resolve_root(&requested, rule)).await?
    }

    async fn open(&self, root: PathBuf) -> Result<Arc<Repo>, ToolError> {
        if let Some(repo) = self.lookup(&root) {
            return Ok(repo);
        }
        let _opening = self.opening.lock().await;
        if let Some(repo) = self.lookup(&root) {
            return Ok(repo);
        }
        let open_root = root.clone();
        let options = self.options.clone();
        let engine = blocking(move || Engine::open(&open_root, options)).await??;
        // This process outlives many index runs (the watcher's, `canopy_index`).
        engine.keep_resolver_world();
        engine.keep_history_log();
        Ok(self.insert(root, engine))
    }

    fn lookup(&self, root: &Path) -> Option<Arc<Repo>> {
        let mut inner = self.lock();
        inner.clock += 1;
        let now = inner.clock;
        inner.entries.get_mut(root).map(|entry| {
            entry.last_used = now;
            entry.repo.clone()
        })
    }

    fn insert(&self, root: PathBuf, engine: Engine) -> Arc<Repo> {
        let mut inner = self.lock();
        inner.clock += 1;
        let now = inner.clock;
        while inner.entries.len() >= self.capacity {
            let Some(oldest) = inner
                .entries
                .iter()
                .min_by_key(|(_, e)| e.last_used)
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            tracing::debug!(root = %oldest.display(), "closing least recently used engine");
            inner.entries.remove(&oldest);
        }
        let stop_watching = Arc::new(AtomicBool::new(false));
        if self.watch {
            start_watcher(engine.clone(), stop_watching.clone());
        }
        let repo = Arc::new(Repo {
            engine,
            first_index: Arc::new(std::sync::Mutex::new(())),
            stop_watching,
        });
        inner.entries.insert(
            root,
            Entry {
                repo: repo.clone(),
                last_used: now,
            },
        );
        repo
    }
}

/// Follows the repository's file-system events on a thread of its own until
/// `stop` is set. No initial run: the first query builds the index (lazily on
/// large repositories); the watch only keeps it current.
fn start_watcher(engine: Engine, stop: Arc<AtomicBool>) {
    let root = engine.root().display().to_string();
    let spawned = std::thread::Builder::new()
        .name("canopy-watch".into())
        .spawn(move || {
            let options = canopy_core::watch::WatchOptions {
                initial_run: false,
                ..Default::default()
            };
            let result = canopy_core::watch::watch(&engine, &options, &stop, |cycle| {
                tracing::debug!(
                    root = %engine.root().display(),
                    paths = cycle.paths,
                    latency_ms = cycle.latency_ms,
                    "re-indexed changed files"
                );
            });
            if let Err(e) = result {
                tracing::warn!("watching {} stopped: {e}", engine.root().display());
            }
        });
    if let Err(e) = spawned {
        tracing::warn!("cannot watch {root}: {e}");
    }
}

/// Checks that `path` exists and finds its repository root (canonical).
fn resolve_root(path: &Path, rule: RootRule) -> Result<PathBuf, ToolError> {
    match std::fs::metadata(path) {
        Ok(meta) if meta.is_dir() => Ok(locate_root(path, rule)?),
        Ok(_) => Err(ToolError::InvalidPath(format!(
            "path is not a directory: {}",
            path.display()
        ))),
        Err(e) => Err(ToolError::InvalidPath(format!(
            "path does not exist or is unreadable: {} ({e})",
            path.display()
        ))),
    }
}

tokio::task_local! {
    /// The cancellation flag of the tool call this task serves: raised when
    /// the client sends `notifications/cancelled` for it (or disconnects).
    pub(crate) static REQUEST_CANCEL: canopy_core::cancel::CancelFlag;
}

/// The current tool call's cancellation flag (a fresh, never-raised one
/// outside a tool call).
pub(crate) fn request_cancel_flag() -> canopy_core::cancel::CancelFlag {
    REQUEST_CANCEL.try_with(Clone::clone).unwrap_or_default()
}
/// Runs blocking work on tokio's blocking pool; a panic becomes an internal error.
pub(crate) async fn blocking<T, F>(f: F) -> Result<T, ToolError>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let cancel = request_cancel_flag();
    tokio::task::spawn_blocking(move || canopy_core::cancel::within(&cancel, f))
        .await
        .map_err(|e| ToolError::Internal(format!("worker task failed: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo_dir() -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(dir.path().join(".git")).expect("mark the root");
        dir
    }

    #[tokio::test]
    async fn caches_by_root_and_evicts_the_least_recently_used() {
        let cache = EngineCache::new(2, EngineOptions::default());
        let (a, b, c) = (repo_dir(), repo_dir(), repo_dir());
        let path = |d: &tempfile::TempDir| d.path().display().to_string();
        let first = cache.get(&path(&a)).await.expect("open a");
        let inside = a.path().join("sub");
        std::fs::create_dir(&inside).expect("mkdir");
        let again = cache
            .get(&inside.display().to_string())
            .await
            .expect("a again");
        assert!(
            Arc::ptr_eq(&first, &again),
            "a directory inside resolves to the root"
        );
        cache.get(&path(&b)).await.expect("open b");
        cache.get(&path(&a)).await.expect("touch a");
        cache.get(&path(&c)).await.expect("open c");
        let root = |d: &tempfile::TempDir| d.path().canonicalize().expect("canonical");
        assert!(cache.lookup(&root(&a)).is_some());
        assert!(
            cache.lookup(&root(&b)).is_none(),
            "b was least recently used"
        );
        assert!(cache.lookup(&root(&c)).is_some());
    }

    #[tokio::test]
    async fn rejects_relative_and_missing_paths() {
        let cache = EngineCache::new(1, EngineOptions::default());
        for bad in ["", "relative/dir", "/definitely/not/here"] {
            let err = cache.get(bad).await.err().expect("an error");
            assert_eq!(err.code(), "InvalidPath", "{bad}: {err}");
        }
    }
}
