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
//! Search is exact: a scan of every vector. On Django (59,808 units, 256
//! int8 dimensions with the default model) the whole semantic strategy
//! answers in 12.6 ms p50 through `canopy mcp` (`bench/context_bench.py`).
//! Past [`EXACT_SEARCH_LIMIT`] units an approximate index would pay off;
//! none is built yet.

use std::collections::HashMap;

use rayon::prelude::*;

use crate::embed::{Quantized, StaticModel, WordCache};
use crate::error::Result;
use crate::lang::extract::text_view;
use crate::snapshot::Snapshot;
use crate::store::read::NodeRecord;
use crate::store::write::UnitVectorRow;

/// Bytes of a unit's text embedded (its name and the start of its body).
const UNIT_BYTES: usize = 1_500;
/// Units up to which the exact scan is the documented search. An estimate,
/// not a measurement: about 8× Django's units, so a scan of roughly
/// 100 ms if it grows linearly from Django's (nothing that large was run).
pub const EXACT_SEARCH_LIMIT: usize = 500_000;

struct FileVectors {
    hash: String,
    first_row: i64,
    rows: Quantized,
}

/// The vectors of one repository's units under one model.
pub struct SemanticIndex {
    model: StaticModel,
    fingerprint: String,
    generation: Option<u64>,
    files: HashMap<String, FileVectors>,
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
        SemanticIndex {
            fingerprint: model.fingerprint(),
            model,
            generation: None,
            files: HashMap::new(),
        }
    }

    /// The model.
    pub fn model(&self) -> &StaticModel {
        &self.model
    }

    /// The model's fingerprint, the key of its stored vectors.
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    /// Units with a vector.
    pub fn len(&self) -> usize {
        self.files.values().map(|f| f.rows.len()).sum()
    }

    /// Whether no unit has a vector.
    pub fn is_empty(&self) -> bool {
        self.files.values().all(|f| f.rows.is_empty())
    }

    /// Bytes the vectors take in memory.
    pub fn bytes(&self) -> usize {
        self.files.values().map(|f| f.rows.bytes()).sum()
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
        let before = self.files.len();
        self.files.retain(|path, _| hashes.contains_key(path));
        report.files_removed = before - self.files.len();

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
                        self.files.insert(
                            path,
                            FileVectors {
                                hash,
                                first_row: first,
                                rows,
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
                self.files.insert(
                    path,
                    FileVectors {
                        hash: row.content_hash.clone(),
                        first_row: row.first_node,
                        rows,
                    },
                );
                report.new_rows.push(row);
            }
        }
        self.generation = Some(generation);
        Ok(report)
    }

    /// The `k` units closest in meaning to `text`, best first (row id, cosine).
    pub fn search(&self, text: &str, k: usize) -> Vec<(i64, f32)> {
        let Some(q) = self.model.embed(text) else {
            return Vec::new();
        };
        let mut scored = Vec::with_capacity(self.len());
        for f in self.files.values() {
            f.rows.score_into(&q, &mut scored);
        }
        crate::embed::top_k(scored, k)
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
