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
//!
//! The world built from those rows is kept too ([`KeptRows::world`]): when
//! the next pass has the same files and manifests, the world is updated in
//! place for the files read again ([`World::patch`]) instead of built from
//! every file's rows (on the 5,000-file synthetic corpus building it was
//! about two thirds of a one-line edit's re-index): a file that kept its
//! units (an edit inside a body) has its rows replaced where they are, one
//! whose units changed (a function added, removed or renamed) has its units
//! replaced at the end of the tables. A file added or removed, a changed
//! manifest, or units the patch cannot place build it again.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use super::WorldRows;
use super::ids::FileIdx;
use super::lang::Manifests;
use super::world::{LazyFacts, World, WorldFile};
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
    /// The world of the last pass that finished ([`KeptRows::world`]).
    world: Option<KeptWorld>,
    /// The manifests of the world being built, until it is kept.
    manifests: Option<Manifests>,
    /// Passes whose world was the kept one updated in place.
    patches: u64,
}

/// A pass's world, kept for the next pass to update.
struct KeptWorld {
    world: World,
    /// `files.id` → its file in `world`.
    index: HashMap<i64, FileIdx>,
    /// What the repository's manifests said when `world` was built (the
    /// Rust rules' tables come from them).
    manifests: Manifests,
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
    /// Whether the kept world was updated in place ([`World::patch`])
    /// instead of built again.
    pub patched: bool,
}

impl std::fmt::Debug for KeptRows {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeptRows")
            .field("files", &self.files.len())
            .field("world", &self.world.is_some())
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
        let (stamps, _, stats) = self.refresh_files(store, dirty)?;
        Ok((self.rows(&stamps, dirty), stats))
    }

    /// The world a pass resolves `dirty` in, with the file index of each
    /// `files.id`: the kept world of the last pass updated in place for
    /// the files whose rows changed ([`World::patch`]) when it can be (the
    /// same files and the same manifests; units added, removed or renamed
    /// included), else a world built from the refreshed rows. Give it back
    /// with [`KeptRows::keep_world`] once the pass is done.
    pub fn world(
        &mut self,
        store: &Store,
        root: &std::path::Path,
        dirty: &BTreeSet<i64>,
    ) -> Result<(World, HashMap<i64, FileIdx>, RefreshStats)> {
        let (stamps, reread, mut stats) = self.refresh_files(store, dirty)?;
        let manifests = Manifests::read(root, stamps.iter().map(|s| s.path.as_str()));
        if let Some(mut kept) = self.world.take() {
            let same_files = kept.world.files.len() == stamps.len()
                && kept
                    .world
                    .files
                    .rows()
                    .iter()
                    .zip(&stamps)
                    .all(|(f, s)| f.id == s.id && f.path == s.path && f.language == s.language);
            if same_files && kept.manifests == manifests {
                let changes = reread
                    .iter()
                    .map(|&k| {
                        let file = &self.files[&stamps[k].id];
                        (
                            FileIdx(k as u32),
                            file.facts.clone(),
                            with_file(&file.syms, FileIdx(k as u32)),
                        )
                    })
                    .collect();
                if kept.world.patch(changes) {
                    stats.patched = true;
                    self.patches += 1;
                    self.manifests = Some(kept.manifests);
                    return Ok((kept.world, kept.index, stats));
                }
            }
            // Freeing a world's tables takes a while: nothing waits for it.
            let _ = std::thread::Builder::new()
                .name("canopy-free-world".into())
                .spawn(move || drop(kept));
        }
        let (files, syms, index) = self.rows(&stamps, dirty);
        self.manifests = Some(manifests.clone());
        let world = World::new(files, syms, manifests);
        Ok((world, index, stats))
    }

    /// Whether a world is kept for the next pass to update.
    pub fn has_world(&self) -> bool {
        self.world.is_some()
    }

    /// Builds and keeps the world of the index as `store` has it now, when
    /// none is kept: what the first pass would otherwise build itself. A
    /// watcher's first run on an index that is already complete resolves
    /// nothing (nothing is pending), so no pass keeps a world, and the first
    /// edit after it built one from every file's rows: on the 5,000-file
    /// generated corpus 195 ms of a 237 ms re-index, against 16–33 ms for
    /// the edits after it (issue 28 item 5). The world is the one a pass
    /// with nothing dirty would build; the next pass brings its rows up to
    /// date and updates it in place like any kept world.
    pub fn warm(&mut self, store: &Store, root: &std::path::Path) -> Result<()> {
        if self.world.is_some() {
            return Ok(());
        }
        let (world, index, _) = self.world(store, root, &BTreeSet::new())?;
        self.keep_world(world, index);
        Ok(())
    }

    /// How many passes updated the kept world in place instead of building
    /// one (the tests check that the path they mean to test was taken;
    /// they live in `canopy-core`, which runs the index).
    #[doc(hidden)]
    pub fn patches(&self) -> u64 {
        self.patches
    }

    /// Keeps the world of a pass that finished (see [`KeptRows::world`]).
    pub fn keep_world(&mut self, world: World, index: HashMap<i64, FileIdx>) {
        let manifests = self.manifests.take().unwrap_or_default();
        self.world = Some(KeptWorld {
            world,
            index,
            manifests,
        });
    }

    /// Brings the kept rows up to date with `store` (see [`KeptRows::refresh`]):
    /// every file's stamp, in the world's order, and the positions among
    /// them of the files whose rows were read again.
    fn refresh_files(
        &mut self,
        store: &Store,
        dirty: &BTreeSet<i64>,
    ) -> Result<(Vec<FileStamp>, Vec<usize>, RefreshStats)> {
        let stamps = store.graph_file_stamps()?;
        let mut stats = RefreshStats::default();
        let mut reread = Vec::new();
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
                    reread.push(k);
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
        Ok((stamps, reread, stats))
    }

    /// The rows of a world built from the kept rows (see [`KeptRows::refresh`]).
    fn rows(&self, stamps: &[FileStamp], dirty: &BTreeSet<i64>) -> WorldRows {
        use rayon::prelude::*;
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
            syms.extend(with_file(
                &self.files[&stamps[k].id].syms,
                FileIdx(k as u32),
            ));
        }
        files
            .par_iter()
            .filter(|f| f.family.conventions().facts_read_by_every_pass || dirty.contains(&f.id))
            .for_each(|f| {
                f.facts.get();
            });
        (files, syms, index)
    }
}

/// A file's kept units as units of file `fi` of this pass.
fn with_file(syms: &[SymRow], fi: FileIdx) -> Vec<SymRow> {
    syms.iter()
        .map(|s| SymRow {
            file: fi,
            ..s.clone()
        })
        .collect()
}
