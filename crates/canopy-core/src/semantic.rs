//! Unit vectors for semantic retrieval, kept in step with the index.
//!
//! The engine owns one [`SemanticIndex`] per repository (behind a lock) and
//! calls [`SemanticIndex::sync`] before a semantic search: only files whose
//! content hash or unit rows changed since the last sync are re-embedded,
//! files gone from the index are forgotten, and a sync at an unchanged
//! index generation does nothing. Vectors live in memory as int8 (see
//! [`crate::embed::Quantized`]); search is exact (a scan: ~60,000 units ×
//! 384 dims is ~23 MB and a few milliseconds). The first semantic request
//! after the engine opens embeds every unit once.

use std::collections::HashMap;

use crate::embed::{Quantized, StaticModel};
use crate::error::Result;
use crate::lang::extract::text_view;
use crate::snapshot::Snapshot;

/// Bytes of a unit's text embedded (its name and the start of its body).
const UNIT_BYTES: usize = 1_500;

struct FileVectors {
    hash: String,
    first_row: i64,
    /// Its units' vectors, int8.
    rows: Quantized,
}

/// The vectors of one repository's units under one model.
pub struct SemanticIndex {
    model: StaticModel,
    generation: Option<u64>,
    files: HashMap<String, FileVectors>,
}

/// What a sync did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SyncReport {
    /// Files whose units were (re-)embedded.
    pub files_embedded: usize,
    /// Units embedded.
    pub units_embedded: usize,
    /// Files forgotten (no longer indexed).
    pub files_removed: usize,
}

impl SemanticIndex {
    /// An empty index over `model`.
    pub fn new(model: StaticModel) -> SemanticIndex {
        SemanticIndex {
            model,
            generation: None,
            files: HashMap::new(),
        }
    }

    /// The model.
    pub fn model(&self) -> &StaticModel {
        &self.model
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

    /// Brings the vectors in step with the snapshot (incremental by file).
    pub fn sync(&mut self, snapshot: Snapshot<'_>) -> Result<SyncReport> {
        let store = snapshot.store();
        let generation = store.generation()?;
        let mut report = SyncReport::default();
        if self.generation == Some(generation) {
            return Ok(report);
        }
        let states = store.file_states()?;
        let before = self.files.len();
        self.files.retain(|path, _| states.contains_key(path));
        report.files_removed = before - self.files.len();
        for (path, state) in &states {
            let Some(file) = store.file_node(path)? else {
                continue;
            };
            if self
                .files
                .get(path)
                .is_some_and(|f| f.hash == state.content_hash && f.first_row == file.rowid)
            {
                continue;
            }
            let (lo, hi) = store.file_node_range(path)?;
            let nodes = store.nodes_by_rowids(&(lo..=hi).collect::<Vec<_>>())?;
            let text = match snapshot.read_verified(path, &state.content_hash) {
                Ok(bytes) => text_view(&bytes),
                // Changed on disk since indexed: embed it when it is re-indexed.
                Err(_) => {
                    self.files.remove(path);
                    continue;
                }
            };
            let mut rows = Quantized::new(self.model.dim());
            for n in nodes.iter().filter(|n| n.node_type != "file") {
                let start = n.start_byte.min(text.len());
                let mut end = n.end_byte.min(text.len()).min(start + UNIT_BYTES);
                while !text.is_char_boundary(end) {
                    end -= 1;
                }
                let mut doc = n.qualified_name.clone().unwrap_or_default();
                doc.push('\n');
                doc.push_str(&text[start..end]);
                if let Some(v) = self.model.embed(&doc) {
                    rows.push(n.rowid, &v);
                }
            }
            report.files_embedded += 1;
            report.units_embedded += rows.len();
            self.files.insert(
                path.clone(),
                FileVectors {
                    hash: state.content_hash.clone(),
                    first_row: file.rowid,
                    rows,
                },
            );
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
