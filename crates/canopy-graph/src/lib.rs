//! # canopy-graph
//!
//! The code graph: references resolved to definitions, and the navigation
//! operations over them (callers, callees, references, definition, paths,
//! impact, dependencies, cycles, hotspots, …).
//!
//! How it fits, by phase:
//! * index time — while a file is parsed, [`facts`] records what
//!   resolution needs (uses of names with their receivers, imports,
//!   bindings, bases, return types): a shared walk and one handler file per
//!   language; it depends only on `lang` and tree-sitter. The store keeps
//!   the encoded facts per file.
//! * resolution — after an index run that changed something,
//!   [`resolve_pending`] binds the sites of the files that need it
//!   ([`resolve`]: a language-neutral evaluator, and one
//!   `resolve::lang::LanguageRules` implementation per language) and the
//!   store writes the edges (rows of `store::graph_rows`).
//! * answers — [`nav`] (targets, callers, callees, references, definition,
//!   paths) and [`ops`] (dependencies, hierarchy, impact, hotspots, symbols,
//!   summaries) read the edges through a read snapshot ([`nav::Graph`]);
//!   they never reach back into `Engine`. [`request`] is the one request
//!   type of every front end; [`position`] the one parser of
//!   `path:line[:col]`.
//!
//! Every front end asks through one [`request::GraphRequest`], checked
//! before it reaches an index, and [`nav::Graph::run`] answers it from a
//! read snapshot:
//!
//! ```
//! use canopy_graph::nav::{Empty, Graph};
//! use canopy_graph::request::{GraphOp, GraphRequest, GraphResponse};
//! use canopy_store::store::Store;
//!
//! let mut callers = GraphRequest::new(GraphOp::Callers, "Engine.query");
//! callers.depth = Some(20);
//! callers.validate()?;
//! assert_eq!(callers.depth(), 10, "depth is clamped, not refused");
//!
//! // A malformed request is refused with what to change.
//! let definition = GraphRequest::new(GraphOp::Definition, "Engine.query");
//! let refused = definition.validate().unwrap_err();
//! assert!(refused.to_string().contains("path:line[:col]"));
//!
//! // Against an index (here an empty one): an answer with no nodes says
//! // why it is empty, so "no callers" and "no such target" differ.
//! let dir = tempfile::tempdir()?;
//! let (store, _) = Store::open(&dir.path().join("index.db"))?;
//! let graph = Graph::new(&store, dir.path());
//! let GraphResponse::Nodes(answer) = graph.run(&callers)? else {
//!     unreachable!("callers answers with nodes")
//! };
//! assert!(answer.nodes.is_empty());
//! assert_eq!(answer.empty, Some(Empty::TargetNotFound));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Invariants:
//! * every edge starts at a unit of the file whose site it is, and points
//!   at a unit that exists (or is an unresolved name);
//! * a no-change index run does no resolution work (nothing is dirty);
//! * a changed file re-resolves itself, files with edges into definitions
//!   it removed, and files whose references name a definition it added;
//!   edges into its unchanged definitions follow them by handle.

#![warn(missing_docs)]

// Below this crate: the syntax layer (languages, handles, path classes)
// and the store (schema, graph rows, errors). Imported under the names
// `canopy-core` re-exports them by, so a path reads the same in every crate.
use canopy_store::{error, store};
use canopy_syntax::{handle, lang, path_class};

pub mod facts;
pub mod nav;
pub mod ops;
pub mod position;
pub mod request;
pub mod resolve;

use crate::error::Result;
use crate::store::Store;
use crate::store::graph_rows::EdgeRow;

/// What one resolution pass did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ResolveStats {
    /// Files whose sites were resolved.
    pub files: u64,
    /// Edge rows written.
    pub edges: u64,
}

/// Files resolved per chunk (and per edge-writing transaction).
const RESOLVE_CHUNK_FILES: usize = 256;

/// Resolves the files the last writes left dirty (and those they affect).
/// Does nothing, and reads nothing but two empty tables, when no file changed.
///
/// `root` is the repository on disk: Rust's `Cargo.toml` files name the
/// library crates that examples, tests and binaries import by name.
pub fn resolve_pending(store: &mut Store, root: &std::path::Path) -> Result<ResolveStats> {
    resolve_pending_in_chunks(store, root, RESOLVE_CHUNK_FILES, None, None)
}

/// [`resolve_pending`] (with the kept rows of a long-lived process when
/// given) whose parallel work runs on `pool`: an index run's own threads,
/// as many as its `--threads`, not rayon's global pool that readers share.
/// The store's reads and the edges' writes stay on the calling thread,
/// which should not be one of `pool`'s: a pool worker blocked on the
/// resolver's channel would leave the pool a thread short (with one thread,
/// none at all).
pub fn resolve_pending_on(
    store: &mut Store,
    root: &std::path::Path,
    kept: Option<&mut resolve::KeptRows>,
    pool: &rayon::ThreadPool,
) -> Result<ResolveStats> {
    resolve_pending_in_chunks(store, root, RESOLVE_CHUNK_FILES, kept, Some(pool))
}

/// Runs `work` on `pool` when there is one, else here (rayon work inside
/// then goes to the global pool).
fn on_pool<R: Send>(pool: Option<&rayon::ThreadPool>, work: impl FnOnce() -> R + Send) -> R {
    match pool {
        Some(pool) => pool.install(work),
        None => work(),
    }
}

/// [`resolve_pending`] with the rows of the world kept between passes
/// (a long-lived process): only the rows of files that changed are read
/// ([`resolve::KeptRows`]). The edges written are the same.
pub fn resolve_pending_kept(
    store: &mut Store,
    root: &std::path::Path,
    kept: &mut resolve::KeptRows,
) -> Result<ResolveStats> {
    resolve_pending_in_chunks(store, root, RESOLVE_CHUNK_FILES, Some(kept), None)
}

/// [`resolve_pending`], `chunk_files` files per chunk (the tests check that
/// the chunk size changes no stored byte), its parallel work on `pool`
/// when given (see [`resolve_pending_on`]). Public for those tests, which
/// live in `canopy-core` because they need an index run.
#[doc(hidden)]
pub fn resolve_pending_in_chunks(
    store: &mut Store,
    root: &std::path::Path,
    chunk_files: usize,
    kept: Option<&mut resolve::KeptRows>,
    pool: Option<&rayon::ThreadPool>,
) -> Result<ResolveStats> {
    if !store.graph_has_pending()? {
        return Ok(ResolveStats::default());
    }
    let t0 = std::time::Instant::now();
    let dirty = store.graph_prepare()?;
    let prepare_ms = t0.elapsed().as_millis() as u64;
    if dirty.is_empty() {
        store.graph_finish()?;
        return Ok(ResolveStats::default());
    }
    let mut kept = kept;
    let (world, index, rows_ms, world_ms) =
        pass_world_on(pool, store, root, &dirty, kept.as_deref_mut())?;
    let targets: Vec<(i64, resolve::FileIdx)> = dirty
        .iter()
        .filter_map(|id| index.get(id).map(|&fi| (*id, fi)))
        .collect();
    // Resolved a chunk of files at a time on the pool while this thread
    // writes the chunk before (in a cold index of Django writing the edges
    // took two thirds as long as resolving them) and reads the sites of the
    // chunk after. Only a chunk's sites and edges are held at once, so what
    // a pass holds beyond the world does not grow with the repository.
    // Chunks are written in order, so the stored rows are the same as one
    // after the other.
    let mut stats = ResolveStats::default();
    let mut write_ms = 0u64;
    let mut trim_ms = 0u64;
    let chunks: Vec<&[(i64, resolve::FileIdx)]> = targets.chunks(chunk_files.max(1)).collect();
    let trim = releases_memory_between_chunks(targets.len());
    let read_sites = |store: &Store, chunk: &[(i64, resolve::FileIdx)]| {
        let ids: Vec<i64> = chunk.iter().map(|&(id, _)| id).collect();
        store.graph_sites(&ids)
    };
    std::thread::scope(|scope| -> Result<()> {
        // Two channels of one chunk each: this thread sends chunk k + 1's
        // sites before it waits for chunk k's edges, and the resolver takes
        // chunk k + 1 only after it sent chunk k's edges, so neither waits
        // for the other forever.
        let (work_sender, work_receiver) =
            std::sync::mpsc::sync_channel::<(usize, Vec<Option<Vec<u8>>>)>(1);
        let (sender, receiver) = std::sync::mpsc::sync_channel(1);
        let (world, chunks) = (&world, &chunks);
        scope.spawn(move || {
            use rayon::prelude::*;
            for (k, sites) in work_receiver {
                // Not a pool worker: else rayon's global pool resolves.
                let part: Vec<(i64, Vec<EdgeRow>)> = on_pool(pool, || {
                    chunks[k]
                        .par_iter()
                        .zip(sites.par_iter())
                        .map(|(&(id, fi), stored)| {
                            let sites = stored
                                .as_deref()
                                .map(|s| world.decode_sites(fi, s))
                                .unwrap_or_default();
                            (id, world.resolve_file(fi, &sites))
                        })
                        .collect()
                });
                if sender.send(part).is_err() {
                    return; // the writer failed: its error ends the pass
                }
            }
        });
        if let Some(first) = chunks.first()
            && work_sender.send((0, read_sites(store, first)?)).is_err()
        {
            return Ok(());
        }
        for k in 0..chunks.len() {
            if let Some(next) = chunks.get(k + 1) {
                let sites = read_sites(store, next)?;
                if work_sender.send((k + 1, sites)).is_err() {
                    break;
                }
            }
            let Ok(part) = receiver.recv() else { break };
            let t_write = std::time::Instant::now();
            stats.files += part.len() as u64;
            stats.edges += store.graph_write_edges(&part)?;
            write_ms += t_write.elapsed().as_millis() as u64;
            drop(part);
            trim_ms += if trim { timed_release_free_memory() } else { 0 };
        }
        Ok(())
    })?;
    store.graph_finish()?;
    match kept {
        // The next pass updates it (see `resolve::KeptRows::world`).
        Some(kept) => kept.keep_world(world, index),
        // Freeing the world's tables took a sixth of a one-line-edit
        // re-index on Django; nothing waits for it (a CLI run exits before
        // it is done). If no thread can be started, the closure, world
        // included, is dropped here.
        None => {
            let _ = std::thread::Builder::new()
                .name("canopy-free-world".into())
                .spawn(move || drop(world));
        }
    }
    tracing::debug!(
        files = stats.files,
        edges = stats.edges,
        ms = t0.elapsed().as_millis() as u64,
        prepare_ms,
        rows_ms,
        world_ms,
        write_ms,
        trim_ms,
        "resolved"
    );
    Ok(stats)
}

/// Files a pass resolves from which it returns the allocator's free memory
/// ([`release_free_memory`]) after writing each chunk (see
/// [`releases_memory_between_chunks`]).
const RELEASE_MEMORY_PASS_FILES: usize = 4 * RESOLVE_CHUNK_FILES;

/// Whether a pass that resolves `files` files returns the allocator's free
/// memory after each chunk it writes. A chunk's sites, edges and memos are
/// allocated on the pool's threads and freed on this one or theirs; glibc
/// keeps the freed pages in those threads' arenas, and the next chunk's
/// land beside the world's growing tables, so without a trim the pass
/// held every chunk's high-water mark to its end. A watcher's pass after
/// a small edit (a few chunks at most) never pays the arena walk.
fn releases_memory_between_chunks(files: usize) -> bool {
    files >= RELEASE_MEMORY_PASS_FILES
}

/// [`release_free_memory`], and the milliseconds it took.
fn timed_release_free_memory() -> u64 {
    let started = std::time::Instant::now();
    release_free_memory();
    started.elapsed().as_millis() as u64
}

/// Returns the memory the allocator holds free to the system. glibc keeps
/// what a thread frees in that thread's arena; a cold index frees most of
/// its parse phase (trees, batches) on the parser and writer threads and
/// then resolves on a pool of its own, whose threads allocate anew: without
/// this, peak RSS was the parse phase's high-water mark plus the pass's
/// (Django: heap at most 47 MB, RSS 106 MiB). Elsewhere, nothing.
///
/// It walks every arena under its lock, so the caller calls it only after a
/// large parse phase (`canopy-core` before resolving a run that parsed a few
/// MiB or more) and between the chunks of a large pass
/// ([`releases_memory_between_chunks`]), never for a watcher's pass after a
/// small edit.
pub fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `malloc_trim` only walks the allocator's own free lists
    // (under its locks) and advises the kernel that free pages are unused.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// What [`pass_world`] gives: the world, the world index of each file id,
/// and the milliseconds spent reading rows and building the world.
type PassWorld = (
    resolve::World,
    std::collections::HashMap<i64, resolve::FileIdx>,
    u64,
    u64,
);

/// [`pass_world`] on `pool` (see [`on_pool`]).
fn pass_world_on(
    pool: Option<&rayon::ThreadPool>,
    store: &mut Store,
    root: &std::path::Path,
    dirty: &std::collections::BTreeSet<i64>,
    kept: Option<&mut resolve::KeptRows>,
) -> Result<PassWorld> {
    // `store` moves in as `&mut` (`Send`; a `&Store` is not).
    on_pool(pool, move || pass_world(store, root, dirty, kept))
}

/// The world a pass resolves in and the world index of each file id: the
/// kept world updated (or built) when there is one, else built from the
/// rows of the store. Also the milliseconds spent reading rows and building
/// the world (with a kept world the two are one step, counted as world).
fn pass_world(
    store: &Store,
    root: &std::path::Path,
    dirty: &std::collections::BTreeSet<i64>,
    kept: Option<&mut resolve::KeptRows>,
) -> Result<PassWorld> {
    let t_rows = std::time::Instant::now();
    let (world, index, rows_ms) = match kept {
        Some(kept) => {
            let (world, index, refreshed) = kept.world(store, root, dirty)?;
            tracing::debug!(
                read = refreshed.read,
                kept = refreshed.kept,
                dropped = refreshed.dropped,
                patched = refreshed.patched,
                "world rows refreshed"
            );
            (world, index, 0)
        }
        None => {
            let (files, syms, index) = resolve::read_world_rows(store, dirty)?;
            let rows_ms = t_rows.elapsed().as_millis() as u64;
            let manifests = resolve::Manifests::read(root, files.iter().map(|f| f.path.as_str()));
            (resolve::World::new(files, syms, manifests), index, rows_ms)
        }
    };
    let world_ms = t_rows.elapsed().as_millis() as u64 - rows_ms;
    Ok((world, index, rows_ms, world_ms))
}

/// Whole-graph results that hold for one index state, kept by the engine
/// across requests: the fan-in / fan-out of every unit (hotspots) costs a
/// pass over every edge (~60 ms on Django), which a warm process need not
/// pay again until the index changes. Keyed by the snapshot's generation and
/// last-indexed stamp, so a rebuilt or re-indexed database is never answered
/// from an older one.
#[derive(Default)]
pub struct GraphCache {
    degrees: std::sync::Mutex<Option<(String, std::sync::Arc<Vec<ops::Degree>>)>>,
}

impl GraphCache {
    /// The cached degrees for `key`, or computes and keeps them.
    pub(crate) fn degrees(
        &self,
        key: String,
        compute: impl FnOnce() -> Result<Vec<ops::Degree>>,
    ) -> Result<std::sync::Arc<Vec<ops::Degree>>> {
        let mut slot = self.degrees.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((k, v)) = slot.as_ref()
            && *k == key
        {
            return Ok(v.clone());
        }
        let v = std::sync::Arc::new(compute()?);
        *slot = Some((key, v.clone()));
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_passes_of_several_chunks_release_memory_between_them() {
        // A watcher's pass after an edit: the file and its dependents.
        assert!(!releases_memory_between_chunks(0));
        assert!(!releases_memory_between_chunks(1));
        assert!(!releases_memory_between_chunks(RESOLVE_CHUNK_FILES));
        assert!(!releases_memory_between_chunks(4 * RESOLVE_CHUNK_FILES - 1));
        // A cold index of a mid-size repository (Django resolves 2,930 files).
        assert!(releases_memory_between_chunks(4 * RESOLVE_CHUNK_FILES));
        assert!(releases_memory_between_chunks(2_930));
    }
}
