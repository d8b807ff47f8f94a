//! The rows a pass's world is built from, kept between passes by a
//! long-lived process (a watcher): after a one-line edit, reading every
//! file's facts and units again was about half of resolving it on Django.
//!
//! Each file's rows are kept with the stamp they were read under
//! ([`FileStamp`]: path, language, content hash, unit id range). Before
//! each pass every file's stamp is read again (one small row per file) and
//! the rows of a file are read again when its stamp changed, when the pass
//! marks it dirty, or when it is new; the rows of a file that is gone are
//! dropped. So the kept rows are, by construction, the rows a cold read
//! would return now, whichever process changed the index since (another
//! process's run, a rebuild swapped in): nothing read under a stale index
//! is ever used.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use super::WorldRows;
use super::ids::FileIdx;
use super::world::{LazyFacts, WorldFile};
use crate::error::Result;
use crate::store::Store;
use crate::store::graph_rows::{FileStamp, SymRow};

/// One file's kept rows.
struct KeptFile {
    /// What they were read under.
    stamp: FileStamp,
    /// Its facts (decoded ones stay decoded).
    facts: Arc<LazyFacts>,
    /// Its units in id order (`file` is set when a pass takes them).
    syms: Vec<SymRow>,
}

/// Every file's resolution rows, kept between passes (see the module docs).
#[derive(Default)]
pub struct KeptRows {
    files: HashMap<i64, KeptFile>,
}

/// What one [`KeptRows::refresh`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RefreshStats {
    /// Files whose rows were read again (or for the first time).
    pub read: usize,
    /// Files whose kept rows were used as they were.
    pub kept: usize,
    /// Files whose rows were dropped (gone from the index).
    pub dropped: usize,
}

impl std::fmt::Debug for KeptRows {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeptRows")
            .field("files", &self.files.len())
            .finish()
    }
}

impl KeptRows {
    /// Brings the kept rows up to date with `store` (reading those of files
    /// that changed or are in `dirty`) and returns what
    /// [`super::read_world_rows`] would: the same files, units and order.
    /// The facts of `dirty` files and those every pass reads are decoded.
    pub fn refresh(
        &mut self,
        store: &Store,
        dirty: &BTreeSet<i64>,
    ) -> Result<(WorldRows, RefreshStats)> {
        use rayon::prelude::*;
        let stamps = store.graph_file_stamps()?;
        let mut stats = RefreshStats::default();
        let mut old = std::mem::take(&mut self.files);
        for (k, stamp) in stamps.iter().enumerate() {
            let fi = FileIdx(k as u32);
            let reuse = old
                .remove(&stamp.id)
                .filter(|f| f.stamp == *stamp && !dirty.contains(&stamp.id));
            let file = match reuse {
                Some(f) => {
                    stats.kept += 1;
                    f
                }
                None => {
                    stats.read += 1;
                    let facts = match store.graph_facts_of(stamp.id)? {
                        Some(blob) => LazyFacts::stored(blob),
                        None => LazyFacts::default(),
                    };
                    KeptFile {
                        stamp: stamp.clone(),
                        facts: Arc::new(facts),
                        syms: store.graph_sym_rows_of(stamp, fi)?,
                    }
                }
            };
            self.files.insert(stamp.id, file);
        }
        stats.dropped = old.len();
        drop(old);
        // The world's order: files by id, units by id (a file's units are
        // one id range, so by the first id of each file's range).
        let mut index = HashMap::with_capacity(stamps.len());
        let mut files = Vec::with_capacity(stamps.len());
        let mut by_first: Vec<(i64, usize)> = Vec::with_capacity(stamps.len());
        for (k, stamp) in stamps.iter().enumerate() {
            index.insert(stamp.id, FileIdx(k as u32));
            by_first.push((stamp.first_node, k));
            let kept = &self.files[&stamp.id];
            files.push(WorldFile::with_facts(
                stamp.id,
                stamp.path.clone(),
                stamp.language,
                kept.facts.clone(),
            ));
        }
        by_first.sort_unstable();
        let mut syms = Vec::with_capacity(self.files.values().map(|f| f.syms.len()).sum());
        for &(_, k) in &by_first {
            let fi = FileIdx(k as u32);
            syms.extend(self.files[&stamps[k].id].syms.iter().map(|s| SymRow {
                file: fi,
                ..s.clone()
            }));
        }
        files
            .par_iter()
            .filter(|f| f.family.conventions().facts_read_by_every_pass || dirty.contains(&f.id))
            .for_each(|f| {
                f.facts.get();
            });
        Ok(((files, syms, index), stats))
    }
}
