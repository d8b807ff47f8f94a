//! Unit vectors for semantic retrieval, kept in step with the index.
//!
//! The engine owns one [`SemanticIndex`] per repository. After every index
//! run it calls [`SemanticIndex::sync`] with the writer connection and
//! stores what was computed (`unit_vectors` in the index, one int8 blob per
//! file): embedding happens at index time, and only for files the run
//! (re)parsed. Before a semantic search it syncs again with the read
//! snapshot: a new process loads the stored blobs instead of re-embedding,
//! and files indexed before a model was configured are embedded then (and
//! stored by the engine). A sync at an unchanged generation does nothing.
//!
//! Search ([`UnitVectors`]) is an exact scan of every vector up to
//! [`ANN_MIN_UNITS`] units, and an approximate nearest-neighbour index
//! (HNSW from the `instant-distance` crate) past it, whose candidates are
//! rescored with the scan's own int8 cosine. On Django (59,804 units, 256
//! int8 dimensions with the default model) the scan takes 9.5 ms p50 and
//! grows linearly (22.7 ms at 125,000 units, 45.6 ms at 250,000); the index
//! answers in 0.7–1.4 ms at those sizes with recall@10 0.97–0.99 against
//! the scan (`examples/ann_bench.rs`, bench/README.md).
//!
//! Why `instant-distance`: pure Rust, a small dependency tree (15 crates
//! new to this one's, itself included, rayon shared; 11 s to compile on 2
//! cores, against 48 crates and 81 s for `hnsw_rs`, whose tree brings a
//! logger, mmap and regex), run in production by its authors, and its
//! `Point` trait lets the graph compare the stored int8 rows in place (a
//! point is a file's rows and an offset), so the index adds its links, not
//! a second copy of the vectors. It builds once over a fixed set of points;
//! the changes since are handled here (see [`UnitVectors`]).

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;

use instant_distance::{Builder, HnswMap, Search};
use rayon::prelude::*;

use crate::embed::{Quantized, StaticModel, WordCache};
use crate::error::Result;
use crate::lang::extract::text_view;
use crate::snapshot::Snapshot;
use crate::store::read::NodeRecord;
use crate::store::write::UnitVectorRow;

mod vector_file;

/// Bytes of a unit's text embedded (its name and the start of its body).
const UNIT_BYTES: usize = 1_500;

/// Units from which [`UnitVectors::search`] answers from the approximate
/// index instead of scanning every vector (the default of
/// [`UnitVectors::set_ann_min_units`]; the engine's knob is
/// `EngineOptions::ann_min_units` or `CANOPY_ANN_MIN_UNITS`).
///
/// Measured (`examples/ann_bench.rs`, bench/README.md: Django's vectors
/// under the default 256-dimension model, replicated with noise): the scan
/// costs about 0.18 ms per 1,000 units, 9.5 ms p50 at 60,000 and 22.7 ms at
/// 125,000, so from about 100,000 units it passes 20 ms, two fifths of the
/// 50 ms a whole context pack may take at p50. There the index answers in
/// about 1.2 ms (recall@10 0.98), after a build of one to two minutes in
/// the background. Below it the scan is exact and needs no build.
pub const ANN_MIN_UNITS: usize = 100_000;

/// Candidates the approximate index keeps per search (the paper's `ef`),
/// fixed when it is built. At least [`ANN_OVERSAMPLE`] times the 40 hits a
/// context pack asks for; a search for more than `ANN_EF_SEARCH /
/// ANN_OVERSAMPLE` hits scans exactly instead of returning fewer good ones.
const ANN_EF_SEARCH: usize = 200;
/// Candidates asked of the approximate index per hit wanted: they are
/// rescored with the exact cosine, so more of them buy recall, not accuracy.
const ANN_OVERSAMPLE: usize = 4;
/// Candidates kept per insertion while building (the paper's `efConstruction`).
const ANN_EF_CONSTRUCTION: usize = 100;
/// The approximate index is rebuilt when the units searched beside it
/// (changed files) plus the units dead in it (changed or removed files) pass
/// this percentage of the units it holds: the exact scan of the changes and
/// the dead candidates stay a small part of a search.
const ANN_REBUILD_PERCENT: usize = 15;
/// A fixed seed: the same vectors build the same graph, so results repeat.
const ANN_SEED: u64 = 0x6361_6e6f_7079;

/// What the engine keeps per file besides its vectors: the key its stored
/// blob must match.
struct FileMeta {
    hash: String,
    first_row: i64,
}

/// The vectors of one repository's units under one model.
pub struct SemanticIndex {
    model: StaticModel,
    fingerprint: String,
    generation: Option<u64>,
    files: HashMap<String, FileMeta>,
    vectors: UnitVectors,
    /// Whether [`SemanticIndex::search_once`] answered already.
    searched_once: bool,
}

/// What a sync did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SyncReport {
    /// Files whose units were embedded now.
    pub files_embedded: usize,
    /// Units embedded now.
    pub units_embedded: usize,
    /// Files whose stored vectors were loaded.
    pub files_loaded: usize,
    /// Files forgotten (no longer indexed).
    pub files_removed: usize,
    /// The blobs computed now, for the caller to store.
    pub new_rows: Vec<UnitVectorRow>,
}

impl SemanticIndex {
    /// An empty index over `model`.
    pub fn new(model: StaticModel) -> SemanticIndex {
        let dim = model.dim();
        SemanticIndex {
            fingerprint: model.fingerprint(),
            model,
            generation: None,
            files: HashMap::new(),
            vectors: UnitVectors::new(dim),
            searched_once: false,
        }
    }

    /// [`SemanticIndex::search`] for a process that searches once (a
    /// one-off `canopy context`): the stored vectors are scored as they are
    /// read from the index and none is kept, which spares the copies a
    /// [`SemanticIndex::sync`] makes to keep them (on Django two thirds of a
    /// one-off's semantic time went to reading and keeping 24 MB of
    /// vectors). The same hits: every unit's stored vector, scored by the
    /// same exact scan. `None`, and nothing done, when it cannot answer so:
    /// after a first search or sync (then the kept vectors answer), when a
    /// file has no usable stored vectors (a sync embeds it), or when the
    /// units reach the approximate index's threshold.
    pub fn search_once(
        &mut self,
        snapshot: Snapshot<'_>,
        text: &str,
        k: usize,
    ) -> Result<Option<Vec<(i64, f32)>>> {
        if self.searched_once || self.generation.is_some() || !self.files.is_empty() {
            return Ok(None);
        }
        self.searched_once = true;
        let t = crate::timing::mark();
        let store = snapshot.store();
        let (stamp, generation) = (store.state_stamp()?, store.generation()?);
        let key = stamp.as_deref().map(|stamp| vector_file::Key {
            stamp,
            generation,
            fingerprint: &self.fingerprint,
            dim: self.model.dim(),
        });
        let file_path = vector_file::path_beside(store.path());
        // The rows a search of this very state found usable, kept flat.
        if let Some(answer) = key
            .as_ref()
            .and_then(|key| self.search_vector_file(&file_path, key, text, k))
        {
            return Ok(answer);
        }
        // What a first sync would load: the same files and checks.
        let hashes: HashMap<String, String> = store
            .file_states()?
            .into_iter()
            .map(|(path, state)| (path, state.content_hash))
            .collect();
        let mut wanted = Vec::new();
        for (file_id, path, first, last) in store.file_ranges()? {
            let Some(hash) = hashes.get(&path).filter(|h| !h.is_empty()) else {
                continue;
            };
            if last >= first {
                wanted.push((file_id, hash, first));
            }
        }
        let t = crate::timing::phase("semantic.files", t);
        let Some(query) = self.model.embed(text) else {
            return Ok(Some(Vec::new()));
        };
        let t = crate::timing::phase("semantic.embed_query", t);
        // Each blob is scored as SQLite reads it, borrowed: no copy of the
        // vectors is made or kept (but for the vector file, when the index
        // has a stamp to key it by). The hits do not depend on the order the
        // rows come in (`top_k` orders by score, then id).
        let wanted: HashMap<i64, (&str, i64)> = wanted
            .into_iter()
            .map(|(file_id, hash, first)| (file_id, (hash.as_str(), first)))
            .collect();
        let (dim, mut scored, mut usable, mut seen) = (self.model.dim(), Vec::new(), true, 0);
        let mut rows: Option<Vec<u8>> = key.as_ref().map(|_| Vec::new());
        store.each_unit_vector(&self.fingerprint, |row| {
            let Some(&(hash, first)) = wanted.get(&row.file_id) else {
                return true; // a file a sync would not load either
            };
            usable = row.content_hash == hash.as_bytes()
                && row.first_node == first
                && Quantized::score_blob(row.data, dim, &query, &mut scored);
            if let (true, Some(rows)) = (usable, rows.as_mut()) {
                rows.extend_from_slice(&row.data[4..]);
            }
            seen += 1;
            usable
        })?;
        let t = crate::timing::phase("semantic.scan", t);
        if !usable || seen != wanted.len() {
            return Ok(None);
        }
        if scored.len() >= self.vectors.ann_min_units() {
            return Ok(None);
        }
        if let (Some(key), Some(rows)) = (key, rows) {
            if let Err(e) = vector_file::write(&file_path, &key, &rows) {
                tracing::debug!(path = %file_path.display(), error = %e, "vector file not written");
            }
            crate::timing::phase("semantic.write_vector_file", t);
        }
        Ok(self.within_scan(scored, k))
    }

    /// [`SemanticIndex::search_once`]'s answer when the vector file of the
    /// index state `stamp` at `generation` answers it (beside the index at
    /// `db_path`), read without the index: a one-off request can search so
    /// in a thread of its own while it ranks by the index (issue 31 item 6).
    /// `None`, and nothing done, when that file cannot answer (absent, of
    /// another state, not whole), when there are as many units as the
    /// approximate index serves, or when `search_once` would not search
    /// once (a first search or sync happened): then `search_once` or a
    /// sync, as before, answers.
    pub fn search_file_once(
        &mut self,
        db_path: &Path,
        stamp: &str,
        generation: u64,
        text: &str,
        k: usize,
    ) -> Option<Vec<(i64, f32)>> {
        if self.searched_once || self.generation.is_some() || !self.files.is_empty() {
            return None;
        }
        let key = vector_file::Key {
            stamp,
            generation,
            fingerprint: &self.fingerprint,
            dim: self.model.dim(),
        };
        let hits = self.search_vector_file(&vector_file::path_beside(db_path), &key, text, k)??;
        self.searched_once = true;
        Some(hits)
    }

    /// The search of the vector file at `path` when it was written for
    /// `key` and is whole: `Some` of what [`SemanticIndex::search_once`]
    /// answers, `None` when the file cannot answer (the index is read).
    fn search_vector_file(
        &self,
        path: &Path,
        key: &vector_file::Key<'_>,
        text: &str,
        k: usize,
    ) -> Option<Option<Vec<(i64, f32)>>> {
        let t = crate::timing::mark();
        let file = vector_file::VectorFile::open(path, key)?;
        let t = crate::timing::phase("semantic.vector_file", t);
        let Some(query) = self.model.embed(text) else {
            return Some(Some(Vec::new()));
        };
        let t = crate::timing::phase("semantic.embed_query", t);
        let mut scored = Vec::new();
        if !Quantized::score_blob(file.blob(), self.model.dim(), &query, &mut scored) {
            return None;
        }
        crate::timing::phase("semantic.scan_file", t);
        Some(self.within_scan(scored, k))
    }

    /// The `k` best of every unit scored, or `None` when there are as many
    /// as the approximate index serves (a sync then builds it).
    fn within_scan(&self, scored: Vec<(i64, f32)>, k: usize) -> Option<Vec<(i64, f32)>> {
        (scored.len() < self.vectors.ann_min_units()).then(|| crate::embed::top_k(scored, k))
    }

    /// The model's fingerprint, the key of its stored vectors.
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    /// Units with a vector.
    pub fn len(&self) -> usize {
        self.vectors.len()
    }

    /// Bytes the vectors take in memory (not counting the approximate
    /// index's graph: [`AnnStats::bytes`]).
    pub fn bytes(&self) -> usize {
        self.vectors.bytes()
    }

    /// The vectors and how they are searched.
    pub fn vectors(&self) -> &UnitVectors {
        &self.vectors
    }

    /// Units from which search uses the approximate index (see
    /// [`UnitVectors::set_ann_min_units`]).
    pub fn set_ann_min_units(&mut self, units: usize) {
        self.vectors.set_ann_min_units(units);
    }

    /// Whether the approximate index is built in a thread of its own (see
    /// [`UnitVectors::set_build_in_background`]; the engine's choice).
    pub fn set_build_in_background(&mut self, yes: bool) {
        self.vectors.set_build_in_background(yes);
    }

    /// Brings the vectors in step with the snapshot: loads stored vectors
    /// of files it does not hold, embeds files with none (in parallel), and
    /// returns the new blobs in the report.
    pub fn sync(&mut self, snapshot: Snapshot<'_>) -> Result<SyncReport> {
        let store = snapshot.store();
        let generation = store.generation()?;
        let mut report = SyncReport::default();
        if self.generation == Some(generation) {
            return Ok(report);
        }
        // One pass over `files`: content hash (by path) and unit range (by id).
        let hashes: HashMap<String, String> = store
            .file_states()?
            .into_iter()
            .map(|(path, state)| (path, state.content_hash))
            .collect();
        let gone: Vec<String> = self
            .files
            .keys()
            .filter(|path| !hashes.contains_key(*path))
            .cloned()
            .collect();
        for path in &gone {
            self.files.remove(path);
            self.vectors.remove_file(path);
        }
        report.files_removed = gone.len();

        // (path, file id, hash, first node) of files whose vectors are missing or stale.
        let mut missing = Vec::new();
        for (file_id, path, first, last) in store.file_ranges()? {
            let Some(hash) = hashes.get(&path).filter(|h| !h.is_empty()) else {
                continue; // invalidated: re-indexed soon
            };
            if last < first {
                continue; // no units
            }
            let held = self
                .files
                .get(&path)
                .is_some_and(|f| &f.hash == hash && f.first_row == first);
            if !held {
                missing.push((path, file_id, hash.clone(), first));
            }
        }
        if !missing.is_empty() {
            // Only the missing files' stored rows: after an index run those
            // are the files it re-parsed, whose rows it deleted.
            let ids: Vec<i64> = missing.iter().map(|m| m.1).collect();
            let mut stored = store.unit_vectors(&self.fingerprint, &ids)?;
            let dim = self.model.dim();
            let mut to_embed = Vec::new();
            for (path, file_id, hash, first) in missing {
                let loaded = stored
                    .remove(&file_id)
                    .filter(|r| r.content_hash == hash && r.first_node == first)
                    .and_then(|r| Quantized::from_blob(&r.data, dim));
                match loaded {
                    Some(rows) => {
                        report.files_loaded += 1;
                        self.vectors.insert_file(&path, rows);
                        self.files.insert(
                            path,
                            FileMeta {
                                hash,
                                first_row: first,
                            },
                        );
                    }
                    None => to_embed.push((path, file_id, hash, first)),
                }
            }
            // Read units and texts here (SQLite is single-threaded), embed in parallel.
            let mut work = Vec::with_capacity(to_embed.len());
            for (path, file_id, hash, first) in to_embed {
                let Ok(bytes) = snapshot.read_verified(&path, &hash) else {
                    continue; // changed on disk since indexed: embedded when re-indexed
                };
                let (lo, hi) = store.file_node_range(&path)?;
                let nodes = store.nodes_by_rowids(&(lo..=hi).collect::<Vec<_>>())?;
                work.push((path, file_id, hash, first, text_view(&bytes), nodes));
            }
            let model = &self.model;
            let embedded: Vec<(String, UnitVectorRow, Quantized)> = work
                .into_par_iter()
                .map_init(
                    WordCache::default,
                    |cache, (path, file_id, hash, first, text, nodes)| {
                        let rows = embed_units(model, &text, &nodes, cache);
                        let row = UnitVectorRow {
                            file_id,
                            content_hash: hash,
                            first_node: first,
                            data: rows.to_blob(),
                        };
                        (path, row, rows)
                    },
                )
                .collect();
            for (path, row, rows) in embedded {
                report.files_embedded += 1;
                report.units_embedded += rows.len();
                self.vectors.insert_file(&path, rows);
                self.files.insert(
                    path,
                    FileMeta {
                        hash: row.content_hash.clone(),
                        first_row: row.first_node,
                    },
                );
                report.new_rows.push(row);
            }
        }
        self.generation = Some(generation);
        Ok(report)
    }

    /// The `k` units closest in meaning to `text`, best first (row id,
    /// cosine): an exact scan below the threshold, the approximate index
    /// past it (once built). See [`UnitVectors::search`].
    pub fn search(&mut self, text: &str, k: usize) -> Vec<(i64, f32)> {
        match self.model.embed(text) {
            Some(q) => self.vectors.search(&q, k),
            None => Vec::new(),
        }
    }
}

/// Every unit of a file but the file itself: its qualified name, then the
/// start of its text.
fn embed_units(
    model: &StaticModel,
    text: &str,
    nodes: &[NodeRecord],
    cache: &mut WordCache,
) -> Quantized {
    let mut rows = Quantized::new(model.dim());
    let mut doc = String::new();
    for n in nodes.iter().filter(|n| n.node_type != "file") {
        let start = n.start_byte.min(text.len());
        let mut end = n.end_byte.min(text.len()).min(start + UNIT_BYTES);
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        let start = if text.is_char_boundary(start) {
            start
        } else {
            end
        };
        doc.clear();
        doc.push_str(n.qualified_name.as_deref().unwrap_or_default());
        doc.push('\n');
        doc.push_str(&text[start..end]);
        if let Some(v) = model.embed_cached(&doc, cache) {
            rows.push(n.rowid, &v);
        }
    }
    rows
}

/// Unit vectors by file, searched exactly below a size and through an
/// approximate nearest-neighbour index (HNSW, `instant-distance`) past it.
///
/// Vectors change a file at a time ([`UnitVectors::insert_file`],
/// [`UnitVectors::remove_file`]). The approximate index is built over the
/// files held at the first search past the threshold and never edited:
/// files inserted afterwards form a *delta* scanned exactly beside it, and
/// rows of files replaced or removed since are *dead* (their hits are
/// dropped). When delta and dead units pass 15% of the
/// indexed units, the next search rebuilds it over the files held then.
/// Candidates from the index are rescored with the same int8 cosine as the
/// exact scan, so both paths give scores of one kind.
///
/// Building takes seconds (12 s for Django's 60,000 units on 2 cores,
/// bench/README.md) and the graph is not stored, so a new process builds
/// it again. With [`UnitVectors::set_build_in_background`] (the engine's
/// setting) a thread builds it while searches go on scanning exactly (or
/// through the previous index), and the first search after it is done
/// starts using it: a one-shot command never waits for a graph it would
/// use once.
pub struct UnitVectors {
    dim: usize,
    /// Rows by file; the index shares them (a point is a file's rows and an offset).
    files: HashMap<String, Arc<Quantized>>,
    units: usize,
    ann_min_units: usize,
    ann: Option<Ann>,
    /// Files held whose current rows are not in `ann` (searched exactly).
    delta: HashSet<String>,
    delta_units: usize,
    builds: usize,
    in_background: bool,
    /// A build under way in its own thread.
    pending: Option<std::thread::JoinHandle<Ann>>,
}

/// The approximate index over the files held when it was built.
struct Ann {
    map: HnswMap<AnnPoint, u32>,
    /// Per file of the build (the point's value is its slot): its rows then,
    /// and whether they are still the file's rows.
    slots: Vec<(Arc<Quantized>, bool)>,
    slot_of: HashMap<String, u32>,
    units: usize,
    dead_units: usize,
    /// Reused between searches: it holds a visited mark per point.
    search: Search,
}

/// A point of the approximate index: row `row` of a file's vectors.
#[derive(Clone)]
struct AnnPoint {
    rows: Arc<Quantized>,
    row: u32,
}

impl instant_distance::Point for AnnPoint {
    fn distance(&self, other: &Self) -> f32 {
        // The vectors were normalised before quantisation: 1 - cosine orders
        // neighbours as the exact scan does.
        1.0 - self
            .rows
            .cosine_rows(self.row as usize, &other.rows, other.row as usize)
    }
}

/// The approximate index's state (see [`UnitVectors::ann_stats`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AnnStats {
    /// Units in the index (as built, the dead ones included).
    pub units: usize,
    /// Units of files changed or added since it was built, searched exactly.
    pub delta_units: usize,
    /// Units in the index whose files were changed or removed since.
    pub dead_units: usize,
    /// Times the index was built since the vectors were loaded.
    pub builds: usize,
    /// Bytes the graph and its points take besides the vectors, estimated
    /// (64 links a point on the crate's zero layer; upper layers left out).
    pub bytes: usize,
}

impl UnitVectors {
    /// No vectors of `dim` dimensions, with the default threshold [`ANN_MIN_UNITS`].
    pub fn new(dim: usize) -> UnitVectors {
        UnitVectors {
            dim,
            files: HashMap::new(),
            units: 0,
            ann_min_units: ANN_MIN_UNITS,
            ann: None,
            delta: HashSet::new(),
            delta_units: 0,
            builds: 0,
            in_background: false,
            pending: None,
        }
    }

    /// Whether searches build the approximate index in a thread of its own
    /// and scan exactly until it is ready (default `false`: the search that
    /// needs it builds it and waits).
    pub fn set_build_in_background(&mut self, yes: bool) {
        self.in_background = yes;
    }

    /// Whether a build is under way in the background.
    pub fn building(&self) -> bool {
        self.pending.is_some()
    }

    /// Units held.
    pub fn len(&self) -> usize {
        self.units
    }

    /// Whether no unit is held.
    pub fn is_empty(&self) -> bool {
        self.units == 0
    }

    /// Bytes the vectors take.
    pub fn bytes(&self) -> usize {
        self.files.values().map(|f| f.bytes()).sum()
    }

    /// Units from which [`UnitVectors::search`] uses the approximate index
    /// (default [`ANN_MIN_UNITS`]; 0 uses it always, `usize::MAX` never).
    pub fn set_ann_min_units(&mut self, units: usize) {
        self.ann_min_units = units;
    }

    /// See [`UnitVectors::set_ann_min_units`].
    pub fn ann_min_units(&self) -> usize {
        self.ann_min_units
    }

    /// The approximate index's state; `None` while none is built.
    pub fn ann_stats(&self) -> Option<AnnStats> {
        let ann = self.ann.as_ref()?;
        // Per point: its Arc and offset, its value, and the graph's links
        // (64 on the zero layer, fewer above).
        let per_point = std::mem::size_of::<AnnPoint>() + 4 + 64 * 4;
        Some(AnnStats {
            units: ann.units,
            delta_units: self.delta_units,
            dead_units: ann.dead_units,
            builds: self.builds,
            bytes: ann.units * per_point,
        })
    }

    /// Sets `path`'s vectors (replacing any it had).
    pub fn insert_file(&mut self, path: &str, rows: Quantized) {
        let units = rows.len();
        self.remove_file(path);
        self.files.insert(path.to_string(), Arc::new(rows));
        self.units += units;
        if self.ann.is_some() {
            self.delta.insert(path.to_string());
            self.delta_units += units;
        }
    }

    /// Forgets `path`'s vectors.
    pub fn remove_file(&mut self, path: &str) {
        let Some(old) = self.files.remove(path) else {
            return;
        };
        self.units -= old.len();
        if self.delta.remove(path) {
            self.delta_units -= old.len();
        } else if let Some(ann) = &mut self.ann
            && let Some(&slot) = ann.slot_of.get(path)
            && let Some((rows, live)) = ann.slots.get_mut(slot as usize)
            && *live
        {
            *live = false;
            ann.dead_units += rows.len();
        }
    }

    /// The `k` rows closest to `query` (a normalised vector of the model),
    /// best first (row id, cosine). Below [`UnitVectors::ann_min_units`]
    /// units an exact scan; past it the approximate index's candidates,
    /// rescored exactly, merged with an exact scan of the files changed since
    /// it was built. Builds the index at the first search past the threshold
    /// and rebuilds it when the changes pass 15% of it:
    /// here, or in the background (then this search, and those before the
    /// build is done, scan exactly or use the previous index).
    pub fn search(&mut self, query: &[f32], k: usize) -> Vec<(i64, f32)> {
        if self.units < self.ann_min_units {
            // Shrunk below the threshold (or raised): the scan answers, and
            // the graph's memory goes.
            self.drop_ann();
            return self.search_exact(query, k);
        }
        if k == 0 || k * ANN_OVERSAMPLE > ANN_EF_SEARCH || query.len() != self.dim {
            return self.search_exact(query, k);
        }
        self.refresh_ann();
        let Some(ann) = self.ann.as_mut() else {
            return self.search_exact(query, k); // the first build is under way
        };
        // The query joins the graph's metric as a point of its own.
        let mut q = Quantized::new(self.dim);
        q.push(0, query);
        let probe = AnnPoint {
            rows: Arc::new(q),
            row: 0,
        };
        let mut scored = Vec::with_capacity(k * ANN_OVERSAMPLE);
        for item in ann
            .map
            .search(&probe, &mut ann.search)
            .take(k * ANN_OVERSAMPLE)
        {
            let live = ann.slots.get(*item.value as usize).is_some_and(|s| s.1);
            if !live {
                continue; // the file changed or went since the build
            }
            let (rows, row) = (&item.point.rows, item.point.row as usize);
            if let (Some(id), Some(score)) = (rows.ids().get(row), rows.score(row, query)) {
                scored.push((*id, score));
            }
        }
        for path in &self.delta {
            if let Some(rows) = self.files.get(path) {
                rows.score_into(query, &mut scored);
            }
        }
        crate::embed::top_k(scored, k)
    }

    /// The `k` rows closest to `query` by a scan of every vector, best first.
    pub fn search_exact(&self, query: &[f32], k: usize) -> Vec<(i64, f32)> {
        let mut scored = Vec::with_capacity(self.units);
        for rows in self.files.values() {
            rows.score_into(query, &mut scored);
        }
        crate::embed::top_k(scored, k)
    }

    /// Builds the approximate index now, in this thread, if a search past
    /// the threshold would build one (none yet, or too many changes since);
    /// benchmarks call it to time the build apart from searches.
    pub fn prepare(&mut self) {
        if self.units >= self.ann_min_units && self.rebuild_due() {
            self.pending = None;
            let ann = build_ann(self.snapshot());
            self.install(ann);
        }
    }

    /// Installs a finished background build; starts a build when one is due.
    fn refresh_ann(&mut self) {
        if self.pending.as_ref().is_some_and(|h| h.is_finished())
            && let Some(handle) = self.pending.take()
        {
            match handle.join() {
                Ok(ann) => self.install(ann),
                // A panic in the crate's build: keep answering as before;
                // the next search tries again.
                Err(_) => tracing::warn!("building the approximate index failed"),
            }
        }
        if self.pending.is_some() || !self.rebuild_due() {
            return;
        }
        let files = self.snapshot();
        if self.in_background {
            // The build needs its own thread; without one (a resource
            // limit), the next search past the threshold tries again.
            match std::thread::Builder::new()
                .name("canopy-ann-build".into())
                .spawn(move || build_ann(files))
            {
                Ok(handle) => self.pending = Some(handle),
                Err(e) => tracing::warn!("no thread to build the approximate index: {e}"),
            }
        } else {
            let ann = build_ann(files);
            self.install(ann);
        }
    }

    /// Whether there is no index, or the changes since it was built pass
    /// [`ANN_REBUILD_PERCENT`] of it.
    fn rebuild_due(&self) -> bool {
        match &self.ann {
            None => true,
            Some(ann) => {
                (self.delta_units + ann.dead_units) * 100 > ann.units * ANN_REBUILD_PERCENT
            }
        }
    }

    /// The files held now, in path order (the same vectors give the same graph).
    fn snapshot(&self) -> Vec<(String, Arc<Quantized>)> {
        let mut files: Vec<(String, Arc<Quantized>)> = self
            .files
            .iter()
            .map(|(path, rows)| (path.clone(), Arc::clone(rows)))
            .collect();
        files.sort_by(|a, b| a.0.cmp(&b.0));
        files
    }

    /// Makes `ann` the index, with delta and dead rows for the files that
    /// changed while it was built.
    fn install(&mut self, mut ann: Ann) {
        self.delta.clear();
        self.delta_units = 0;
        ann.dead_units = 0;
        for (path, &slot) in &ann.slot_of {
            if let Some((rows, live)) = ann.slots.get_mut(slot as usize) {
                *live = self.files.get(path).is_some_and(|f| Arc::ptr_eq(f, rows));
                if !*live {
                    ann.dead_units += rows.len();
                }
            }
        }
        for (path, rows) in &self.files {
            let indexed = ann
                .slot_of
                .get(path)
                .and_then(|&slot| ann.slots.get(slot as usize))
                .is_some_and(|(built, _)| Arc::ptr_eq(built, rows));
            if !indexed {
                self.delta.insert(path.clone());
                self.delta_units += rows.len();
            }
        }
        self.ann = Some(ann);
        self.builds += 1;
    }

    fn drop_ann(&mut self) {
        self.ann = None;
        // A build under way finishes in its thread and is dropped.
        self.pending = None;
        self.delta.clear();
        self.delta_units = 0;
    }
}

/// The approximate index over `files` (in the order given).
fn build_ann(files: Vec<(String, Arc<Quantized>)>) -> Ann {
    let started = std::time::Instant::now();
    let units = files.iter().map(|f| f.1.len()).sum();
    let mut points = Vec::with_capacity(units);
    let mut values = Vec::with_capacity(units);
    let mut slots = Vec::with_capacity(files.len());
    let mut slot_of = HashMap::with_capacity(files.len());
    for (slot, (path, rows)) in files.into_iter().enumerate() {
        // Slots and rows fit in u32: the crate itself holds fewer than
        // u32::MAX points.
        let slot = slot as u32;
        for row in 0..rows.len() {
            points.push(AnnPoint {
                rows: Arc::clone(&rows),
                row: row as u32,
            });
            values.push(slot);
        }
        slots.push((rows, true));
        slot_of.insert(path, slot);
    }
    let map = Builder::default()
        // The nearest neighbours as links, not the crate's default
        // diversity heuristic: on Django's vectors (ann_bench) it built
        // 5.7× faster at the same recall@10 (0.994).
        .select_heuristic(None)
        .ef_construction(ANN_EF_CONSTRUCTION)
        .ef_search(ANN_EF_SEARCH)
        .seed(ANN_SEED)
        .build(points, values);
    tracing::debug!(
        units,
        ms = started.elapsed().as_millis() as u64,
        "built the approximate index"
    );
    Ann {
        map,
        slots,
        slot_of,
        units,
        dead_units: 0,
        search: Search::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deterministic stream of numbers in [-1, 1) (splitmix64).
    struct Gen(u64);

    impl Gen {
        fn next(&mut self) -> f32 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^= z >> 31;
            (z >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        }

        /// A unit vector near `centre` (clustered, like embeddings of code).
        fn near(&mut self, centre: &[f32], spread: f32) -> Vec<f32> {
            let v: Vec<f32> = centre.iter().map(|c| c + spread * self.next()).collect();
            normalised(v)
        }
    }

    fn normalised(v: Vec<f32>) -> Vec<f32> {
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
        v.into_iter().map(|x| x / norm).collect()
    }

    const DIM: usize = 64;

    /// `files` files of `rows` vectors each around 40 shared centres; ids from `first_id`.
    fn corpus(
        g: &mut Gen,
        centres: &[Vec<f32>],
        files: usize,
        rows: usize,
        first_id: i64,
    ) -> Vec<(String, Quantized)> {
        let mut id = first_id;
        (0..files)
            .map(|f| {
                let mut q = Quantized::new(DIM);
                for r in 0..rows {
                    q.push(id, &g.near(&centres[(f * 7 + r) % centres.len()], 0.6));
                    id += 1;
                }
                (format!("src/f{f}.py"), q)
            })
            .collect()
    }

    fn centres(g: &mut Gen) -> Vec<Vec<f32>> {
        (0..40)
            .map(|_| normalised((0..DIM).map(|_| g.next()).collect()))
            .collect()
    }

    #[test]
    fn the_approximate_index_recalls_the_exact_top_10() {
        let mut g = Gen(7);
        let centres = centres(&mut g);
        let mut v = UnitVectors::new(DIM);
        for (path, rows) in corpus(&mut g, &centres, 100, 200, 1) {
            v.insert_file(&path, rows);
        }
        assert_eq!(v.len(), 20_000);
        v.set_ann_min_units(10_000);
        let (mut found, mut wanted, mut same_top) = (0, 0, 0);
        let queries = 200;
        for i in 0..queries {
            let q = g.near(&centres[i % centres.len()], 0.6);
            let exact = v.search_exact(&q, 10);
            let approx = v.search(&q, 10);
            assert!(
                v.ann_stats().is_some(),
                "past the threshold the index answers"
            );
            // Rescored exactly: a row found by both paths has one score.
            for (id, score) in &approx {
                if let Some((_, s)) = exact.iter().find(|(e, _)| e == id) {
                    assert_eq!(s, score);
                }
            }
            wanted += exact.len();
            found += approx.iter().filter(|a| exact.contains(a)).count();
            same_top += usize::from(approx.first() == exact.first());
        }
        let recall = found as f64 / wanted as f64;
        assert!(recall >= 0.9, "recall@10 {recall}");
        assert!(
            same_top * 100 >= queries * 95,
            "same top hit {same_top}/{queries}"
        );
        assert_eq!(v.ann_stats().map(|s| s.builds), Some(1));
    }

    #[test]
    fn below_the_threshold_the_scan_answers_and_no_index_is_built() {
        let mut g = Gen(11);
        let centres = centres(&mut g);
        let mut v = UnitVectors::new(DIM);
        for (path, rows) in corpus(&mut g, &centres, 10, 50, 1) {
            v.insert_file(&path, rows);
        }
        let q = g.near(&centres[0], 0.6);
        assert_eq!(v.search(&q, 10), v.search_exact(&q, 10));
        assert_eq!(v.ann_stats(), None);
        v.set_ann_min_units(500);
        v.search(&q, 10);
        assert_eq!(v.ann_stats().map(|s| s.units), Some(500));
        // Raised past the size again: the index is dropped.
        v.set_ann_min_units(501);
        assert_eq!(v.search(&q, 10), v.search_exact(&q, 10));
        assert_eq!(v.ann_stats(), None);
    }

    #[test]
    fn changed_and_removed_files_never_come_back_and_new_rows_are_found() {
        let mut g = Gen(3);
        let centres = centres(&mut g);
        let mut v = UnitVectors::new(DIM);
        let files = corpus(&mut g, &centres, 50, 100, 1);
        let old_f0: Vec<(i64, Vec<f32>)> = (0..files[0].1.len())
            .filter_map(|i| Some((files[0].1.ids()[i], files[0].1.vector(i)?)))
            .collect();
        let old_f1: Vec<(i64, Vec<f32>)> = (0..files[1].1.len())
            .filter_map(|i| Some((files[1].1.ids()[i], files[1].1.vector(i)?)))
            .collect();
        for (path, rows) in files {
            v.insert_file(&path, rows);
        }
        v.set_ann_min_units(0);
        v.prepare();
        assert_eq!(v.ann_stats().map(|s| (s.units, s.builds)), Some((5_000, 1)));

        // f0 re-indexed (new rows, new ids), f1 deleted.
        let mut new_f0 = Quantized::new(DIM);
        let mut new_vectors = Vec::new();
        for r in 0..100 {
            let x = g.near(&centres[r % centres.len()], 0.6);
            new_f0.push(100_000 + r as i64, &x);
            new_vectors.push((100_000 + r as i64, x));
        }
        v.insert_file("src/f0.py", new_f0);
        v.remove_file("src/f1.py");
        let stats = v.ann_stats().unwrap();
        assert_eq!(
            (stats.delta_units, stats.dead_units, stats.builds),
            (100, 200, 1)
        );

        let old: HashSet<i64> = old_f0.iter().chain(&old_f1).map(|(id, _)| *id).collect();
        for (id, x) in &new_vectors {
            let hits = v.search(x, 10);
            assert_eq!(hits[0].0, *id, "a new row is its own best hit");
            assert!(hits.iter().all(|(h, _)| !old.contains(h)), "{hits:?}");
        }
        for (_, x) in old_f0.iter().chain(&old_f1) {
            let hits = v.search(x, 10);
            assert!(hits.iter().all(|(h, _)| !old.contains(h)), "{hits:?}");
        }
        assert_eq!(
            v.ann_stats().map(|s| s.builds),
            Some(1),
            "300 of 5,000: no rebuild"
        );

        // Past 15% of the index in changes, the next search rebuilds it without the dead rows.
        for f in 2..10 {
            v.remove_file(&format!("src/f{f}.py"));
        }
        let hits = v.search(&new_vectors[0].1, 10);
        assert_eq!(hits[0].0, new_vectors[0].0);
        let stats = v.ann_stats().unwrap();
        assert_eq!(
            (
                stats.units,
                stats.delta_units,
                stats.dead_units,
                stats.builds
            ),
            (4_100, 0, 0, 2)
        );
        assert_eq!(v.len(), 4_100);
    }

    #[test]
    fn a_background_build_scans_until_ready_then_catches_up_with_changes() {
        let mut g = Gen(5);
        let centres = centres(&mut g);
        let mut v = UnitVectors::new(DIM);
        let files = corpus(&mut g, &centres, 20, 100, 1);
        let old: HashSet<i64> = files[..2].iter().flat_map(|f| f.1.ids().to_vec()).collect();
        for (path, rows) in files {
            v.insert_file(&path, rows);
        }
        v.set_ann_min_units(0);
        v.set_build_in_background(true);
        let q = g.near(&centres[0], 0.6);
        // Nothing is built yet: this search starts the build and scans.
        assert_eq!(v.search(&q, 10), v.search_exact(&q, 10));
        assert!(v.building() || v.ann_stats().is_some());

        // Changed while the build (from the files before) runs.
        let mut new_f0 = Quantized::new(DIM);
        let x = g.near(&centres[3], 0.6);
        new_f0.push(50_000, &x);
        for r in 1..100 {
            new_f0.push(50_000 + r, &g.near(&centres[r as usize % 40], 0.6));
        }
        v.insert_file("src/f0.py", new_f0);
        v.remove_file("src/f1.py");

        let started = std::time::Instant::now();
        while v.ann_stats().is_none() {
            assert!(
                started.elapsed().as_secs() < 120,
                "the build never finished"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
            v.search(&q, 10);
        }
        let stats = v.ann_stats().unwrap();
        assert_eq!(
            (stats.units, stats.delta_units, stats.dead_units),
            (2_000, 100, 200)
        );
        assert!(!v.building());
        let hits = v.search(&x, 10);
        assert_eq!(hits[0].0, 50_000);
        assert!(hits.iter().all(|(id, _)| !old.contains(id)), "{hits:?}");
        assert_eq!(v.search(&q, 10), v.search_exact(&q, 10));
    }
}
