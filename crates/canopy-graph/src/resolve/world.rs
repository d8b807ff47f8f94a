//! The world a pass resolves in: every file (with its facts, decoded on
//! first use) and every unit, and the tables built over them once per
//! pass — units by name, the unit tree, methods declared away from their
//! type, trait impls, each file's share of bindings and imports
//! ([`World::part`], built when resolution first reaches the file) — plus
//! the per-language rules with their own tables ([`Rules`]).
//!
//! Everything here is structure (which unit contains a byte, a unit's
//! children by name); evaluating expressions is `eval`, looking names up
//! is `lookup`, and binding sites is `sites`.

// The resolver builds and probes large string-keyed tables on every pass;
// SipHash was a tenth of a one-line-edit re-index.
use foldhash::{HashMap, HashMapExt, HashSet};

use super::eval::{Ctx, Val};
use super::ids::{BindingIdx, FileIdx, Idx, ImportIdx, SymId, Table};
use super::lang::{Conventions, Family, LanguageRules, Manifests, Rules};
use crate::facts::compact::WorldFacts;
use crate::facts::model::{DefFactKind, Site};
use crate::lang::{Language, NodeType};
use crate::store::graph_rows::{FileRow, StoredFacts, SymRow};

/// A file as resolution sees it.
#[derive(Debug)]
pub struct WorldFile {
    /// `files.id`.
    pub id: i64,
    /// Repo-relative path.
    pub path: String,
    /// Language.
    pub language: Language,
    /// Whose rules resolve it.
    pub family: Family,
    /// Its facts (empty when the language has no rules); shared with the
    /// rows a long-lived process keeps between passes ([`super::KeptRows`]).
    pub facts: std::sync::Arc<LazyFacts>,
}

impl WorldFile {
    /// The file of a stored row, its facts decoded when first used.
    pub fn new(row: FileRow) -> WorldFile {
        let facts = match row.facts {
            Some(world) => LazyFacts::stored(world),
            None => LazyFacts::default(),
        };
        WorldFile::with_facts(row.id, row.path, row.language, std::sync::Arc::new(facts))
    }

    /// The file `id` at `path` with these facts.
    pub fn with_facts(
        id: i64,
        path: String,
        language: Language,
        facts: std::sync::Arc<LazyFacts>,
    ) -> WorldFile {
        WorldFile {
            id,
            family: Family::of(language),
            path,
            language,
            facts,
        }
    }
}

/// A file's facts but its sites, decoded from their stored form on first
/// use: a pass after a small edit reads the facts of the few files the
/// edited one reaches, and decoding every file's was a third of reading the
/// world. Decoded, they are a [`WorldFacts`] (strings by id in one buffer;
/// the stored blob is dropped then). The sites are not kept here: a pass
/// reads and decodes a file's sites when it resolves the file
/// ([`World::decode_sites`]) and drops them after, so that what a pass
/// holds does not grow with the sites of the whole repository.
#[derive(Debug, Default)]
pub struct LazyFacts {
    /// The stored blob (`graph_facts.facts`), until it is decoded.
    stored: std::sync::Mutex<Option<Vec<u8>>>,
    decoded: std::sync::OnceLock<WorldFacts>,
}

impl LazyFacts {
    /// Facts read from the store, decoded when first used (a damaged blob
    /// or one of another format reads as no facts).
    pub fn stored(facts: Vec<u8>) -> LazyFacts {
        LazyFacts {
            stored: std::sync::Mutex::new(Some(facts)),
            decoded: std::sync::OnceLock::new(),
        }
    }

    /// The decoded facts (no sites).
    pub fn get(&self) -> &WorldFacts {
        self.decoded.get_or_init(|| {
            let stored = self
                .stored
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .take();
            stored
                .as_ref()
                .and_then(|facts| WorldFacts::decode(&StoredFacts::unpack(facts)?))
                .unwrap_or_default()
        })
    }

    /// The sites of the stored `sites` blob of this file (they name strings
    /// of its facts); none when either is damaged or missing.
    fn sites(&self, stored_sites: &[u8]) -> Vec<Site> {
        StoredFacts::unpack(stored_sites)
            .and_then(|sites| self.get().decode_sites(&sites))
            .unwrap_or_default()
    }
}

impl std::ops::Deref for LazyFacts {
    type Target = WorldFacts;
    fn deref(&self) -> &WorldFacts {
        self.get()
    }
}

/// Everything resolution reads: units and facts of every file.
pub struct World {
    pub(super) files: Table<FileIdx, WorldFile>,
    pub(super) syms: Table<SymId, SymRow>,
    pub(super) by_id: HashMap<i64, SymId>,
    /// Per file: its units, sorted by start.
    pub(super) file_syms: Table<FileIdx, Vec<SymId>>,
    /// Children of each unit (file units included), in source order.
    pub(super) children: Table<SymId, Vec<SymId>>,
    /// Symbol units sorted by name (stable: id order within a name), for a
    /// binary search ([`World::units_named`]): no name is copied to build it.
    by_name: Vec<SymId>,
    pub(super) file_by_path: HashMap<String, FileIdx>,
    /// Methods by (method scope, owner type name): declared away from their
    /// type (Go receivers, Rust `impl` blocks anywhere in the package / crate).
    owned: HashMap<(String, String), Vec<SymId>>,
    /// Methods of `impl` blocks by the type the impl's scope sees, where the
    /// language says so ([`Conventions::impl_methods_follow_type`]).
    impl_methods: HashMap<SymId, Vec<SymId>>,
    /// Trait name → (`impl` unit, "method scope\0trait expression") of every trait impl.
    pub(super) impl_traits: HashMap<String, Vec<(SymId, String)>>,
    /// Per file: what its facts add (bases, bindings, imports, …), computed
    /// on first use. A pass after a small edit reads the facts of the few
    /// files the edited one reaches, and computing every file's share in
    /// `new` was most of building the world.
    parts: Table<FileIdx, std::sync::OnceLock<FilePart>>,
    /// Per file: the file unit.
    pub(super) file_unit: Table<FileIdx, Option<SymId>>,
    /// Named children of each unit, sorted by name (stable: source order
    /// within a name), for a binary search; no string is copied to build it.
    child_index: Table<SymId, Vec<SymId>>,
    /// The type each `impl` unit is for (computed once in `new`).
    pub(super) impl_type_cache: Table<SymId, Option<SymId>>,
    /// The base types of each unit, computed on first use: a pass after a
    /// small edit needs the bases of few classes, and computing every
    /// class's in `new` was a third of building the world.
    pub(super) base_cache: Table<SymId, std::sync::OnceLock<Vec<SymId>>>,
    /// What (file, module, name) imports resolve to.
    pub(super) import_cache: std::sync::RwLock<ImportCache>,
    /// Each language family's rules, with the tables they keep.
    pub(super) rules: Rules,
}

impl FilePart {
    /// The same share with every unit index renumbered by `remap` (old
    /// index → new; the file's own units all stay, see
    /// [`World::replace_units`]). A binding outside every unit has scope
    /// `SymId(0)` (`file_part`'s default), which is whatever unit comes
    /// first: a first unit that left is the default again.
    fn renumbered(self, remap: &[Option<SymId>]) -> FilePart {
        let to = |i: SymId| remap.get(i.index()).copied().flatten();
        let FilePart {
            bases,
            returns,
            arity,
            getters,
            fields,
            scopes,
            by_name,
            imports,
            binding_names,
            import_names,
        } = self;
        FilePart {
            bases: renumber_keys(bases, remap),
            returns: renumber_keys(returns, remap),
            arity: renumber_keys(arity, remap),
            getters: renumber_keys(getters, remap),
            fields: renumber_keys(fields, remap),
            scopes: Table::new(
                scopes
                    .into_rows()
                    .into_iter()
                    .map(|i| to(i).unwrap_or_default())
                    .collect(),
            ),
            by_name,
            imports: imports
                .into_iter()
                .filter_map(|(ii, si)| Some((ii, to(si)?)))
                .collect(),
            binding_names,
            import_names,
        }
    }

    /// The file's non-field bindings named `name` (`bindings`: the file's),
    /// in source order.
    pub(super) fn bindings_named(&self, facts: &WorldFacts, name: &str) -> &[BindingIdx] {
        if !self.binding_names.may_hold(name) {
            return &[];
        }
        let list = &self.by_name;
        let named = |b: &BindingIdx| facts.s(facts.bindings[b.index()].name);
        let lo = list.partition_point(|b| named(b) < name);
        &list[lo..lo + equal_run(&list[lo..], |b| named(b) == name)]
    }

    /// The file's imports of local name `name` (`imports`: the file's),
    /// with the unit whose scope each binds in, in source order.
    pub(super) fn imports_named(&self, facts: &WorldFacts, name: &str) -> &[(ImportIdx, SymId)] {
        if !self.import_names.may_hold(name) {
            return &[];
        }
        let list = &self.imports;
        let local = |i: &(ImportIdx, SymId)| facts.s(facts.imports[i.0.index()].local);
        let lo = list.partition_point(|i| local(i) < name);
        &list[lo..lo + equal_run(&list[lo..], |i| local(i) == name)]
    }
}

/// How many elements at the start of `list` are `equal` (the name looked
/// up; `list` is sorted, so they form a prefix). Galloping: probes 1, 3,
/// 7, … elements in, then a binary search of the last step, so a run of `k`
/// costs O(log k) comparisons where a binary search of the whole rest costs
/// O(log n); most lookups (a name in a scope) find no or one element.
fn equal_run<T>(list: &[T], equal: impl Fn(&T) -> bool) -> usize {
    // `list[..known]` is equal; the probe is the last element of the next step.
    let (mut known, mut step) = (0, 1);
    while known + step <= list.len() && equal(&list[known + step - 1]) {
        known += step;
        step *= 2;
    }
    let upper = (known + step - 1).min(list.len());
    known + list[known..upper].partition_point(equal)
}

/// `m` with its unit keys renumbered by `remap` (see [`FilePart::renumbered`]).
fn renumber_keys<V>(m: HashMap<SymId, V>, remap: &[Option<SymId>]) -> HashMap<SymId, V> {
    m.into_iter()
        .filter_map(|(k, v)| Some((remap.get(k.index()).copied().flatten()?, v)))
        .collect()
}

/// (file, module, name) → (depth budget left when computed, values).
type ImportCache = HashMap<(FileIdx, String, Option<String>), (u32, Vec<Val>)>;

/// (units of each file, file unit of each file, children, named children).
type TreeTables = (
    Table<FileIdx, Vec<SymId>>,
    Table<FileIdx, Option<SymId>>,
    Table<SymId, Vec<SymId>>,
    Table<SymId, Vec<SymId>>,
);

/// One file's share of the world's tables (see [`World::part`]). Every
/// unit it is keyed by is one of the file's own units, and every fact it
/// names is one of the file's own facts, by its place (no string of the
/// facts is copied: a cold pass builds every file's part and keeps them all).
#[derive(Default)]
pub(super) struct FilePart {
    /// Base-type facts of its class-like units, in source order (indices
    /// into the file's `defs`).
    bases: HashMap<SymId, Vec<u32>>,
    /// Return-type fact of its functions (the last fact wins).
    returns: HashMap<SymId, u32>,
    /// Argument-count fact of its methods ([`DefFactKind::Arity`]).
    arity: HashMap<SymId, u32>,
    /// Its accessors read as fields ([`DefFactKind::Getter`]), with the fact.
    getters: HashMap<SymId, u32>,
    /// Fields of its class-like units (bindings of the file).
    fields: HashMap<SymId, Vec<BindingIdx>>,
    /// Per binding (index into the file's bindings): the unit of its scope.
    pub(super) scopes: Table<BindingIdx, SymId>,
    /// Non-field bindings sorted by name, source order within a name
    /// ([`FilePart::bindings_named`]).
    by_name: Vec<BindingIdx>,
    /// Imports that bind in a unit's scope, with that unit, sorted by local
    /// name, source order within a name ([`FilePart::imports_named`]).
    imports: Vec<(ImportIdx, SymId)>,
    /// The names of `by_name` and of `imports`, for the lookups of a name
    /// the file does not bind (most of them) to skip the binary search.
    binding_names: NameFilter,
    import_names: NameFilter,
}

/// A set of names that says "certainly not" for most names outside it: one
/// bit per name, at its hash, in about 8 bits per name (so ~12% of the
/// names outside it pass). Lookups by name in one file's bindings and
/// imports (`FilePart::bindings_named`, `imports_named`: ~340,000 on a
/// 231-file Django subset, each a binary search over strings) skip their
/// search when it says no; what they find is unchanged.
#[derive(Default)]
struct NameFilter(Vec<u64>);

impl NameFilter {
    /// The filter of `names`.
    fn of<'n>(names: impl ExactSizeIterator<Item = &'n str>) -> NameFilter {
        let words = (names.len() * 8).div_ceil(64).next_power_of_two();
        let mut bits = vec![0u64; words];
        for name in names {
            let (word, bit) = Self::place(name, words);
            bits[word] |= bit;
        }
        NameFilter(bits)
    }

    /// The word and bit of `name` in a filter of `words` words (a power of two).
    fn place(name: &str, words: usize) -> (usize, u64) {
        use std::hash::BuildHasher;
        let h = foldhash::fast::FixedState::default().hash_one(name);
        ((h >> 6) as usize & (words - 1), 1 << (h & 63))
    }

    /// `false` only when `name` is not in the set.
    fn may_hold(&self, name: &str) -> bool {
        if self.0.is_empty() {
            return false;
        }
        let (word, bit) = Self::place(name, self.0.len());
        self.0[word] & bit != 0
    }
}

/// Whether units of this kind have members (classes, structs, traits, impls, …).
pub(super) fn is_classlike(t: NodeType) -> bool {
    matches!(
        t,
        NodeType::Class
            | NodeType::Struct
            | NodeType::Enum
            | NodeType::Trait
            | NodeType::Interface
            | NodeType::TypeAlias
            | NodeType::Impl
    )
}

/// Whether unit `s` of `file` (whose facts are `facts`) is a definition:
/// not in a file its name leaves out of a default build here (Go
/// `_windows.go`), and, for the languages whose facts every pass reads,
/// outside every range those facts say is compiled out.
fn defines(file: &WorldFile, facts: &LazyFacts, s: &SymRow) -> bool {
    let conventions = file.family.conventions();
    (conventions.path_builds)(&file.path)
        && (!conventions.facts_read_by_every_pass || compiled_in(facts, s))
}

/// Whether a definition fact is one the world is built with: a Rust
/// `#[path]` module, or a `cfg` a build script decides (one naming only
/// features is read when a site is resolved, as its twins are chosen).
fn decided_with_the_world(facts: &WorldFacts, d: &crate::facts::compact::DefRec) -> bool {
    match d.what {
        DefFactKind::ModulePath => true,
        DefFactKind::Cfg => crate::facts::rust::names_a_build_key(facts.s(d.expr)),
        _ => false,
    }
}

/// Whether unit `s` is outside every range its file's facts say is
/// compiled out (Rust `cfg`, a Go file's build constraints).
fn compiled_in(facts: &LazyFacts, s: &SymRow) -> bool {
    facts
        .disabled
        .iter()
        .all(|&(start, end)| s.start < start || s.end > end)
}

/// Whether units of this kind are called.
pub(super) fn is_function(t: NodeType) -> bool {
    matches!(t, NodeType::Function | NodeType::Method)
}

impl World {
    /// Builds the world from every file and unit of the index.
    /// `manifests`: what the repository's build manifests say (the Rust
    /// library crates by name, for `use name::x` in examples, tests and
    /// other crates; the Cargo packages, see `lang::rust::Package`).
    pub fn new(files: Vec<WorldFile>, syms: Vec<SymRow>, manifests: Manifests) -> World {
        let files: Table<FileIdx, WorldFile> = Table::new(files);
        // Units in code compiled out (Rust `cfg`) are not definitions (other
        // files' facts are decoded only when used).
        // Nor are those the build compiles out ([`LanguageRules::built_out`]).
        let rules = Rules::new(&files, manifests);
        let mut syms = syms;
        syms.retain(|s| {
            let file = &files[s.file];
            defines(file, &file.facts, s)
                && !rules.of(file.family).built_out(&file.path, &file.facts, s)
        });
        let syms: Table<SymId, SymRow> = Table::new(syms);
        let mut w = World {
            by_id: syms.iter().map(|(i, s)| (s.id, i)).collect(),
            file_syms: Table::default(),
            children: Table::default(),
            by_name: Vec::new(),
            file_by_path: files.iter().map(|(i, f)| (f.path.clone(), i)).collect(),
            owned: HashMap::new(),
            impl_methods: HashMap::new(),
            impl_traits: HashMap::new(),
            parts: Table::new(
                (0..files.len())
                    .map(|_| std::sync::OnceLock::new())
                    .collect(),
            ),
            file_unit: Table::default(),
            child_index: Table::default(),
            impl_type_cache: Table::default(),
            base_cache: Table::default(),
            import_cache: Default::default(),
            rules,
            files,
            syms,
        };
        // Three independent tables, built side by side (each only reads
        // what the constructor above set).
        let ((by_name, owned), tree) = rayon::join(
            || rayon::join(|| w.names_table(), || w.owned_table()),
            || w.tree_tables(),
        );
        w.by_name = by_name;
        w.owned = owned;
        (w.file_syms, w.file_unit, w.children, w.child_index) = tree;
        w.build_fact_tables();
        w
    }

    /// The tables built from the facts of the files every pass reads and
    /// from lookups (which read any file's facts): trait impls, the type of
    /// each `impl`, the methods of impls by type; and the caches filled by
    /// lookups, emptied. [`World::new`] builds them after the unit tables,
    /// and [`World::patch`] again, the same way, after it changed facts.
    fn build_fact_tables(&mut self) {
        // As in a world just made: nothing memoised, no type relation yet.
        *self
            .import_cache
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = Default::default();
        self.impl_type_cache = Table::default();
        self.impl_methods = HashMap::new();
        self.base_cache = Table::default();
        self.impl_traits = self.impl_traits_table();
        // Memoised type relations: every site's member lookups go through them.
        // In parallel: each looks its type up through its file's scopes and
        // imports, which computes those files' parts.
        self.impl_type_cache = {
            use rayon::prelude::*;
            let w = &*self;
            Table::new(
                (0..w.syms.len())
                    .into_par_iter()
                    .map(|i| {
                        let i = SymId(i as u32);
                        (w.syms[i].node_type == NodeType::Impl).then(|| w.type_of_impl_uncached(i))
                    })
                    .collect(),
            )
        };
        self.impl_methods = self.impl_methods_table();
        self.base_cache = Table::new(
            (0..self.syms.len())
                .map(|_| std::sync::OnceLock::new())
                .collect(),
        );
    }

    /// Updates the world in place for the files whose rows changed, so that
    /// it is what [`World::new`] builds from the same rows. Each change is
    /// (file, its new facts, all its units in id order, as the store reads
    /// them).
    ///
    /// A file that keeps its units (the same id, parent, kind, name and
    /// qualified name, in id order; an edit inside a body or a comment)
    /// gets its rows replaced where they are. A file whose units changed
    /// (a function added, removed or renamed) was given a new block of unit
    /// ids by the store, above every id of the other files: its old units
    /// leave the tables, its new ones join at their end
    /// ([`World::replace_units`]), and the other units' indices close up.
    ///
    /// Returns false, changing nothing, when that does not hold (a new unit
    /// id below a kept one, a parent in another file): then the world must
    /// be built again with [`World::new`]. So does a change to the facts of
    /// a file with a Rust `#[path]` module or a `cfg` a build script
    /// decides, before or after: the rules' module table ([`Rules`]) and
    /// the units [`LanguageRules::built_out`] drops are decided with the
    /// world.
    ///
    /// Why this equals [`World::new`]: the unit tables are kept in the
    /// order `new` builds them (units by id; names by name, then id; units
    /// of a file by start), each changed file's share of the world
    /// ([`World::part`], computed from its own facts and units only) is made
    /// again and the other files' shares are renumbered, and every table
    /// built from facts or lookups is built again
    /// ([`World::build_fact_tables`]).
    pub fn patch(
        &mut self,
        changes: Vec<(FileIdx, std::sync::Arc<LazyFacts>, Vec<SymRow>)>,
    ) -> bool {
        let path_module = |facts: &LazyFacts| {
            let facts = facts.get();
            facts.defs.iter().any(|d| decided_with_the_world(facts, d))
        };
        // A file read again with the same facts (an importer of an edited
        // file) changes neither.
        if changes.iter().any(|(fi, facts, _)| {
            let old = &self.files[*fi].facts;
            (path_module(facts) || path_module(old)) && facts.get() != old.get()
        }) {
            return false;
        }
        let mut same = Vec::with_capacity(changes.len());
        let mut replaced = Vec::new();
        for (fi, facts, syms) in changes {
            match self.same_units(fi, &facts, &syms) {
                Some(ids) => same.push((fi, facts, syms, ids)),
                None => {
                    let file = &self.files[fi];
                    let kept: Vec<SymRow> = syms
                        .into_iter()
                        .filter(|s| self.keeps(file, &facts, s))
                        .collect();
                    replaced.push((fi, facts, kept));
                }
            }
        }
        if !replaced.is_empty() && !self.can_replace_units(&replaced) {
            return false;
        }
        for (fi, facts, syms, ids) in same {
            let file = &self.files[fi];
            let kept: Vec<SymRow> = syms
                .into_iter()
                .filter(|s| self.keeps(file, &facts, s))
                .collect();
            for (&si, row) in ids.iter().zip(kept) {
                self.syms[si] = row;
            }
            self.files[fi].facts = facts;
            // As `tree_tables` orders them: by start, then longest first,
            // ties in id order (a stable sort of the units in id order).
            let mut by_start = ids;
            let syms = &self.syms;
            by_start.sort_by_key(|&i| (syms[i].start, std::cmp::Reverse(syms[i].end)));
            self.file_syms[fi] = by_start;
            self.parts[fi] = std::sync::OnceLock::new();
        }
        if !replaced.is_empty() {
            self.replace_units(replaced);
        }
        self.build_fact_tables();
        true
    }

    /// Whether [`World::replace_units`] can take these files: each new unit
    /// id is above every id the world keeps, and every parent, old and new,
    /// is a unit of the same file (the store writes a file's units, parents
    /// included, as one block).
    fn can_replace_units(
        &self,
        replaced: &[(FileIdx, std::sync::Arc<LazyFacts>, Vec<SymRow>)],
    ) -> bool {
        let leaving: HashSet<FileIdx> = replaced.iter().map(|(fi, _, _)| *fi).collect();
        let kept_max = self
            .syms
            .rows()
            .iter()
            .filter(|s| !leaving.contains(&s.file))
            .map(|s| s.id)
            .max()
            .unwrap_or(i64::MIN);
        for (fi, _, new) in replaced {
            let old_parent_in_file = self.file_syms[*fi].iter().all(|&si| {
                self.syms[si]
                    .parent
                    .and_then(|p| self.by_id.get(&p))
                    .is_none_or(|&p| self.syms[p].file == *fi)
            });
            let ids: HashSet<i64> = new.iter().map(|s| s.id).collect();
            let new_ok = new.iter().all(|s| {
                s.id > kept_max && s.file == *fi && s.parent.is_none_or(|p| ids.contains(&p))
            });
            if !old_parent_in_file || !new_ok {
                return false;
            }
        }
        true
    }

    /// Takes the units of each replaced file out of the unit tables and
    /// puts its new units (every id above the kept ones: see
    /// [`World::can_replace_units`]) at their end, each table in the order
    /// [`World::new`] builds it; the kept units' indices close up over the
    /// gap, in every table and in the file shares already computed.
    fn replace_units(&mut self, replaced: Vec<(FileIdx, std::sync::Arc<LazyFacts>, Vec<SymRow>)>) {
        let leaving: HashSet<FileIdx> = replaced.iter().map(|(fi, _, _)| *fi).collect();
        // Old index → new index of each unit that stays.
        let mut kept_len = 0u32;
        let remap: Vec<Option<SymId>> = self
            .syms
            .rows()
            .iter()
            .map(|s| {
                (!leaving.contains(&s.file)).then(|| {
                    kept_len += 1;
                    SymId(kept_len - 1)
                })
            })
            .collect();
        let kept_len = kept_len as usize;
        let mut new_rows: Vec<SymRow> = Vec::new();
        for (fi, facts, rows) in replaced {
            self.files[fi].facts = facts;
            new_rows.extend(rows);
        }
        new_rows.sort_by_key(|s| s.id);
        let added: Vec<SymId> = (kept_len..kept_len + new_rows.len())
            .map(SymId::at)
            .collect();
        let rows = std::mem::take(&mut self.syms).into_rows();
        let mut rows: Vec<SymRow> = rows
            .into_iter()
            .zip(&remap)
            .filter_map(|(s, r)| r.map(|_| s))
            .collect();
        rows.extend(new_rows);
        self.syms = Table::new(rows);
        let moved = |list: &[SymId]| -> Vec<SymId> {
            list.iter().filter_map(|&i| remap[i.index()]).collect()
        };

        self.by_id.retain(|_, v| match remap[v.index()] {
            Some(n) => {
                *v = n;
                true
            }
            None => false,
        });
        for &i in &added {
            self.by_id.insert(self.syms[i].id, i);
        }
        self.by_name = self.names_with(moved(&self.by_name), &added);

        let mut file_syms: Vec<Vec<SymId>> = std::mem::take(&mut self.file_syms)
            .into_rows()
            .iter()
            .map(|list| moved(list))
            .collect();
        let mut file_unit: Vec<Option<SymId>> = std::mem::take(&mut self.file_unit)
            .into_rows()
            .into_iter()
            .map(|u| u.and_then(|u| remap[u.index()]))
            .collect();
        for &i in &added {
            let s = &self.syms[i];
            file_syms[s.file.index()].push(i);
            if s.node_type == NodeType::File {
                file_unit[s.file.index()] = Some(i);
            }
        }
        let syms = &self.syms;
        for fi in &leaving {
            file_syms[fi.index()].sort_by_key(|&i| (syms[i].start, std::cmp::Reverse(syms[i].end)));
        }
        self.file_syms = Table::new(file_syms);
        self.file_unit = Table::new(file_unit);

        self.replace_children(&remap, &added);

        for methods in self.owned.values_mut() {
            *methods = moved(methods);
        }
        self.owned.retain(|_, methods| !methods.is_empty());
        for &i in &added {
            if let Some(key) = self.owner_key(i) {
                self.owned.entry(key).or_default().push(i);
            }
        }

        self.renumber_parts(&remap, &leaving);
    }

    /// `children` and `child_index` of [`World::replace_units`]: the kept
    /// units' lists renumbered (a kept unit's children are units of its own
    /// file, so they all stay), the new units' made as `tree_tables` does.
    fn replace_children(&mut self, remap: &[Option<SymId>], added: &[SymId]) {
        let moved = |list: &[SymId]| -> Vec<SymId> {
            list.iter().filter_map(|&i| remap[i.index()]).collect()
        };
        let old_children = std::mem::take(&mut self.children).into_rows();
        let old_index = std::mem::take(&mut self.child_index).into_rows();
        let mut children = Vec::with_capacity(self.syms.len());
        let mut child_index = Vec::with_capacity(self.syms.len());
        for ((kids, named), r) in old_children.iter().zip(&old_index).zip(remap) {
            if r.is_some() {
                children.push(moved(kids));
                child_index.push(moved(named));
            }
        }
        children.resize_with(self.syms.len(), Vec::new);
        for &i in added {
            if let Some(&p) = self.syms[i].parent.and_then(|p| self.by_id.get(&p)) {
                children[p.index()].push(i);
            }
        }
        child_index.extend(
            added
                .iter()
                .map(|&i| self.named_in_order(&children[i.index()])),
        );
        self.children = Table::new(children);
        self.child_index = Table::new(child_index);
    }

    /// The file shares of [`World::replace_units`]: a leaving file's is
    /// made again on first use, the others' already made are renumbered.
    fn renumber_parts(&mut self, remap: &[Option<SymId>], leaving: &HashSet<FileIdx>) {
        let parts = std::mem::take(&mut self.parts).into_rows();
        self.parts = Table::new(
            parts
                .into_iter()
                .enumerate()
                .map(|(k, cell)| match cell.into_inner() {
                    Some(part) if !leaving.contains(&FileIdx(k as u32)) => {
                        std::sync::OnceLock::from(part.renumbered(remap))
                    }
                    _ => std::sync::OnceLock::new(),
                })
                .collect(),
        );
    }

    /// `by_name` (symbol units by name, id order within a name) with the
    /// units `added` (all above every unit of `by_name`) merged in.
    fn names_with(&self, by_name: Vec<SymId>, added: &[SymId]) -> Vec<SymId> {
        let syms = &self.syms;
        let mut new: Vec<SymId> = added
            .iter()
            .copied()
            .filter(|&i| !syms[i].name.is_empty() && syms[i].node_type.is_symbol())
            .collect();
        new.sort_by(|&a, &b| syms[a].name.cmp(&syms[b].name));
        let mut out = Vec::with_capacity(by_name.len() + new.len());
        let mut rest = by_name.as_slice();
        for &n in &new {
            // After every kept unit of the same name: they have lower ids.
            let at = rest.partition_point(|&c| syms[c].name <= syms[n].name);
            out.extend_from_slice(&rest[..at]);
            out.push(n);
            rest = &rest[at..];
        }
        out.extend_from_slice(rest);
        out
    }

    /// Whether unit `s` of `file`, whose facts are now `facts`, is a
    /// definition: as [`World::new`] decides ([`defines`], and
    /// [`LanguageRules::built_out`]).
    fn keeps(&self, file: &WorldFile, facts: &LazyFacts, s: &SymRow) -> bool {
        defines(file, facts, s) && !self.rules.of(file.family).built_out(&file.path, facts, s)
    }

    /// The world's units of file `fi` in id order, if `syms` (its units
    /// read again, with `facts`) are the same units but for their spans.
    fn same_units(&self, fi: FileIdx, facts: &LazyFacts, syms: &[SymRow]) -> Option<Vec<SymId>> {
        let file = &self.files[fi];
        let mut ids = self.file_syms.get(fi)?.clone();
        ids.sort_unstable();
        let mut new = syms.iter().filter(|s| self.keeps(file, facts, s));
        for &si in &ids {
            let (old, new) = (&self.syms[si], new.next()?);
            let same = old.id == new.id
                && old.file == new.file
                && old.parent == new.parent
                && old.node_type == new.node_type
                && old.name == new.name
                && old.qualified_name == new.qualified_name;
            if !same {
                return None;
            }
        }
        new.next().is_none().then_some(ids)
    }

    /// The sites of file `fi` from their stored blob (`graph_facts.sites`,
    /// see [`crate::store::Store::graph_sites`]), for [`World::resolve_file`].
    pub fn decode_sites(&self, fi: FileIdx, stored_sites: &[u8]) -> Vec<Site> {
        self.files[fi].facts.sites(stored_sites)
    }

    /// The rules of file `fi`'s language.
    pub(super) fn rules_of(&self, fi: FileIdx) -> &dyn LanguageRules {
        self.rules.of(self.files[fi].family)
    }

    /// The conventions of file `fi`'s language.
    pub(super) fn conventions_of(&self, fi: FileIdx) -> &'static Conventions {
        self.files[fi].family.conventions()
    }

    /// Symbols sorted by name, id order within a name (see [`World::new`]).
    fn names_table(&self) -> Vec<SymId> {
        let mut by_name: Vec<SymId> = self
            .syms
            .iter()
            .filter(|(_, s)| !s.name.is_empty() && s.node_type.is_symbol())
            .map(|(i, _)| i)
            .collect();
        let syms = &self.syms;
        by_name.sort_by(|&a, &b| syms[a].name.cmp(&syms[b].name));
        by_name
    }

    /// Symbol units named `name`, in id order.
    pub(super) fn units_named(&self, name: &str) -> &[SymId] {
        let list = &self.by_name;
        let lo = list.partition_point(|&c| self.syms[c].name.as_str() < name);
        &list[lo..lo + equal_run(&list[lo..], |&c| self.syms[c].name == name)]
    }

    /// Per file its units sorted by start and its file unit; per unit its
    /// children in source order and its named children sorted by name.
    fn tree_tables(&self) -> TreeTables {
        let mut file_syms = vec![Vec::new(); self.files.len()];
        let mut file_unit = vec![None; self.files.len()];
        let mut children = vec![Vec::new(); self.syms.len()];
        for (i, s) in self.syms.iter() {
            file_syms[s.file.index()].push(i);
            if s.node_type == NodeType::File {
                file_unit[s.file.index()] = Some(i);
            }
            if let Some(&p) = s.parent.and_then(|p| self.by_id.get(&p)) {
                children[p.0 as usize].push(i);
            }
        }
        let child_index = children
            .iter()
            .map(|kids| self.named_in_order(kids))
            .collect();
        let syms = &self.syms;
        for v in &mut file_syms {
            v.sort_by_key(|&i| (syms[i].start, std::cmp::Reverse(syms[i].end)));
        }
        (
            Table::new(file_syms),
            Table::new(file_unit),
            Table::new(children),
            Table::new(child_index),
        )
    }

    /// Methods declared away from their type (Go receivers, Rust impl
    /// blocks), by the rules' method scope and owner name.
    fn owned_table(&self) -> HashMap<(String, String), Vec<SymId>> {
        let mut owned: HashMap<(String, String), Vec<SymId>> = HashMap::new();
        for (i, _) in self.syms.iter() {
            if let Some(key) = self.owner_key(i) {
                owned.entry(key).or_default().push(i);
            }
        }
        owned
    }

    /// Where unit `i` is listed in `owned`: (method scope, owner type
    /// name), if it is a method declared away from its type.
    fn owner_key(&self, i: SymId) -> Option<(String, String)> {
        let s = &self.syms[i];
        let parent = s
            .parent
            .and_then(|p| self.by_id.get(&p))
            .map(|&p| &self.syms[p]);
        let owner = self.rules_of(s.file).method_owner(s, parent)?;
        Some((self.method_scope(s.file), owner))
    }

    /// The named ones of `kids` sorted by name (stable: source order within
    /// a name), as `child_index` keeps them.
    fn named_in_order(&self, kids: &[SymId]) -> Vec<SymId> {
        let syms = &self.syms;
        let mut named: Vec<SymId> = kids
            .iter()
            .copied()
            .filter(|&c| !syms[c].name.is_empty())
            .collect();
        named.sort_by(|&a, &b| syms[a].name.cmp(&syms[b].name));
        named
    }

    /// Trait impls are looked up by trait name from anywhere: every file's
    /// are listed now (the rest of a file's facts wait for `part`); only the
    /// files every pass reads have them.
    fn impl_traits_table(&self) -> HashMap<String, Vec<(SymId, String)>> {
        let mut impl_traits: HashMap<String, Vec<(SymId, String)>> = HashMap::new();
        for (fi, file) in self.files.iter() {
            if !file.family.conventions().facts_read_by_every_pass {
                continue;
            }
            let facts = file.facts.get();
            for d in &facts.defs {
                if d.what != DefFactKind::ImplTrait {
                    continue;
                }
                let (name, expr) = (facts.s(d.name), facts.s(d.expr));
                if let Some(si) = self.def_at(fi, d.byte, name) {
                    impl_traits
                        .entry(name.to_string())
                        .or_default()
                        .push((si, format!("{}\u{0}{}", self.method_scope(fi), expr)));
                }
            }
        }
        impl_traits
    }

    /// Methods (and associated types) of `impl T` blocks under the `T` the
    /// impl's scope sees, where the language says so (two private `State`
    /// structs in one Rust crate keep their own methods).
    fn impl_methods_table(&self) -> HashMap<SymId, Vec<SymId>> {
        let mut by_type: HashMap<SymId, Vec<SymId>> = HashMap::new();
        for (i, s) in self.syms.iter() {
            if !(is_function(s.node_type) || s.node_type == NodeType::TypeAlias)
                || !self.conventions_of(s.file).impl_methods_follow_type
            {
                continue;
            }
            let Some(p) = self.parent_of(i) else { continue };
            if self.syms[p].node_type != NodeType::Impl {
                continue;
            }
            let t = self.type_of_impl(p);
            if t != p {
                by_type.entry(t).or_default().push(i);
            }
        }
        by_type
    }

    /// What file `fi`'s facts add to the world, computed on first use.
    pub(super) fn part(&self, fi: FileIdx) -> &FilePart {
        self.parts[fi].get_or_init(|| self.file_part(fi))
    }

    /// Base-type expressions of unit `t`, in source order.
    pub(super) fn bases_of(&self, t: SymId) -> impl Iterator<Item = &str> {
        let fi = self.syms[t].file;
        let facts = self.files[fi].facts.get();
        let bases = self.part(fi).bases.get(&t);
        bases
            .into_iter()
            .flatten()
            .map(move |&d| facts.s(facts.defs[d as usize].expr))
    }

    /// Whether unit `t` has a base-type expression.
    pub(super) fn has_bases(&self, t: SymId) -> bool {
        self.part(self.syms[t].file).bases.contains_key(&t)
    }

    /// Return-type expression of function `f`.
    pub(super) fn returns_of(&self, f: SymId) -> Option<&str> {
        let fi = self.syms[f].file;
        let &d = self.part(fi).returns.get(&f)?;
        let facts = self.files[fi].facts.get();
        Some(facts.s(facts.defs[d as usize].expr))
    }

    /// Whether function `f` is an accessor read as a field (`get x()`).
    pub(super) fn is_getter(&self, f: SymId) -> bool {
        self.part(self.syms[f].file).getters.contains_key(&f)
    }

    /// How many arguments method `f` takes, as its facts wrote it
    /// (`min:max`, [`DefFactKind::Arity`]).
    pub(super) fn arity_of(&self, f: SymId) -> Option<&str> {
        let fi = self.syms[f].file;
        let &d = self.part(fi).arity.get(&f)?;
        let facts = self.files[fi].facts.get();
        Some(facts.s(facts.defs[d as usize].expr))
    }

    /// Fields of class-like unit `o`: (name, expression, is a type).
    pub(super) fn fields_of(&self, o: SymId) -> impl Iterator<Item = (&str, &str, bool)> {
        let fi = self.syms[o].file;
        let facts = self.files[fi].facts.get();
        let fields = self.part(fi).fields.get(&o);
        fields.into_iter().flatten().map(move |&bi| {
            let b = &facts.bindings[bi.index()];
            (facts.s(b.name), facts.s(b.expr), b.is_type)
        })
    }

    /// The part of the world file `fi`'s facts make (see [`World::part`]);
    /// reads only what [`World::new`] built, never another part.
    fn file_part(&self, fi: FileIdx) -> FilePart {
        let facts = self.files[fi].facts.get();
        let mut part = FilePart::default();
        for (di, d) in facts.defs.iter().enumerate() {
            let Some(si) = self.def_at(fi, d.byte, facts.s(d.name)) else {
                continue;
            };
            let di = di as u32;
            match d.what {
                // In `World::impl_traits` and `World::type_of_impl`; Rust's module table.
                DefFactKind::ImplTrait
                | DefFactKind::ImplType
                | DefFactKind::ModulePath
                | DefFactKind::Cfg => {}
                DefFactKind::Base => part.bases.entry(si).or_default().push(di),
                DefFactKind::Arity => {
                    part.arity.insert(si, di);
                }
                DefFactKind::Getter => {
                    part.getters.insert(si, di);
                }
                _ => {
                    part.returns.insert(si, di);
                }
            }
        }
        let mut scopes = Vec::with_capacity(facts.bindings.len());
        for (bi, b) in facts.bindings.iter().enumerate() {
            let scope = self.innermost(fi, b.byte).unwrap_or_default();
            scopes.push(scope);
            let field = || BindingIdx::at(bi);
            if b.field {
                let owner = self.innermost_where(fi, b.byte, |s| {
                    is_classlike(s.node_type) || s.node_type == NodeType::Impl
                });
                if let Some(owner) = owner {
                    part.fields.entry(owner).or_default().push(field());
                }
            } else if self
                .syms
                .get(scope)
                .is_some_and(|s| is_classlike(s.node_type))
            {
                // A class-level annotated or assigned name is a field too.
                part.fields.entry(scope).or_default().push(field());
            }
        }
        part.scopes = Table::new(scopes);
        let bindings = &facts.bindings;
        part.by_name = (0..bindings.len())
            .filter(|&bi| !bindings[bi].field)
            .map(BindingIdx::at)
            .collect();
        part.by_name.sort_by(|a, b| {
            facts
                .s(bindings[a.index()].name)
                .cmp(facts.s(bindings[b.index()].name))
        });
        part.binding_names = NameFilter::of(
            part.by_name
                .iter()
                .map(|b| facts.s(bindings[b.index()].name)),
        );
        for (ii, i) in facts.imports.iter().enumerate() {
            if let Some(scope) = self.innermost(fi, i.byte) {
                part.imports.push((ImportIdx::at(ii), scope));
            }
        }
        let imports = &facts.imports;
        part.imports.sort_by(|a, b| {
            facts
                .s(imports[a.0.index()].local)
                .cmp(facts.s(imports[b.0.index()].local))
        });
        part.import_names = NameFilter::of(
            part.imports
                .iter()
                .map(|i| facts.s(imports[i.0.index()].local)),
        );
        part
    }

    /// Methods declared away from type `t` (Go receivers, Rust impl blocks).
    pub(super) fn owned_methods(&self, t: SymId) -> &[SymId] {
        let ts = &self.syms[t];
        if self.conventions_of(ts.file).impl_methods_follow_type
            && let Some(v) = self.impl_methods.get(&t)
        {
            return v;
        }
        self.owned
            .get(&(self.method_scope(ts.file), ts.name.clone()))
            .map_or(&[], Vec::as_slice)
    }

    /// Children of `parent` named `name`.
    pub(super) fn named_children(&self, parent: SymId, name: &str) -> &[SymId] {
        let Some(named) = self.child_index.get(parent) else {
            return &[];
        };
        let lo = named.partition_point(|&c| self.syms[c].name.as_str() < name);
        let hi = lo + named[lo..].partition_point(|&c| self.syms[c].name == name);
        &named[lo..hi]
    }

    /// The package / crate / file a file's methods declared away from their
    /// type are kept under ([`LanguageRules::method_scope`]).
    pub(super) fn method_scope(&self, fi: FileIdx) -> String {
        self.rules_of(fi).method_scope(self, fi)
    }

    /// The innermost unit of file `fi` containing `byte`.
    pub(super) fn innermost(&self, fi: FileIdx, byte: u32) -> Option<SymId> {
        self.innermost_where(fi, byte, |_| true)
    }

    /// The innermost named unit of file `fi` containing `byte` that `ok`
    /// accepts, else the file unit (if `ok` accepts it).
    pub(super) fn innermost_where(
        &self,
        fi: FileIdx,
        byte: u32,
        ok: impl Fn(&SymRow) -> bool,
    ) -> Option<SymId> {
        let list = &self.file_syms[fi];
        let upto = list.partition_point(|&i| self.syms[i].start <= byte);
        // Units nest, so every unit containing `byte` is the last unit that
        // starts before it or one of its ancestors: climb from there instead
        // of scanning back over every earlier sibling (a module-level name
        // at the end of a long file passed every function before it).
        let mut cur = upto.checked_sub(1).map(|k| list[k]);
        while let Some(i) = cur {
            let s = &self.syms[i];
            if s.end > byte && !s.node_type.is_anonymous() && ok(s) {
                return Some(i);
            }
            cur = match s.parent {
                None => None,
                Some(p) => match self.by_id.get(&p) {
                    Some(&pi) => Some(pi),
                    // A parent resolution does not load (an anonymous unit):
                    // fall back to the scan.
                    None => return self.innermost_scan(fi, byte, upto, ok),
                },
            };
        }
        self.file_unit[fi].filter(|&f| ok(&self.syms[f]))
    }

    /// [`World::innermost_where`] by scanning back from `upto`.
    fn innermost_scan(
        &self,
        fi: FileIdx,
        byte: u32,
        upto: usize,
        ok: impl Fn(&SymRow) -> bool,
    ) -> Option<SymId> {
        self.file_syms[fi][..upto]
            .iter()
            .rev()
            .copied()
            .filter(|&i| {
                let s = &self.syms[i];
                s.end > byte && !s.node_type.is_anonymous()
            })
            .find(|&i| ok(&self.syms[i]))
            .or_else(|| self.file_unit[fi].filter(|&f| ok(&self.syms[f])))
    }

    /// The unit of file `fi` named `name` whose name is at `byte`.
    pub(super) fn def_at(&self, fi: FileIdx, byte: u32, name: &str) -> Option<SymId> {
        self.innermost_where(fi, byte, |s| {
            s.name == name && s.node_type != NodeType::File
        })
    }

    /// The parent unit, if it is in the world.
    pub(super) fn parent_of(&self, si: SymId) -> Option<SymId> {
        self.syms[si]
            .parent
            .and_then(|p| self.by_id.get(&p).copied())
    }

    /// A unit as a value: the class-like unit (or module) itself, or a function.
    pub(super) fn as_val(&self, s: SymId) -> Val {
        let t = self.syms[s].node_type;
        if is_classlike(t) || t == NodeType::Module {
            Val::Class(s)
        } else {
            Val::Func(s)
        }
    }

    /// The innermost class-like unit (not a type alias) around `cx`.
    pub(super) fn enclosing_class(&self, cx: &Ctx) -> Option<SymId> {
        let mut cur = Some(cx.scope);
        while let Some(c) = cur {
            let s = &self.syms[c];
            if is_classlike(s.node_type) && s.node_type != NodeType::TypeAlias {
                return Some(c);
            }
            cur = self.parent_of(c);
        }
        None
    }

    /// The innermost class around `cx` as a value (what `self`, `this` or
    /// `super` stand for), none outside a class.
    pub(super) fn enclosing_class_as(
        &self,
        cx: &Ctx,
        as_val: impl FnOnce(SymId) -> Val,
    ) -> Vec<Val> {
        self.enclosing_class(cx).map(as_val).into_iter().collect()
    }

    /// Where a unit's own expressions are read: its file, its start, its parent's scope.
    pub(super) fn ctx_at_start(&self, t: SymId) -> Ctx {
        let s = &self.syms[t];
        Ctx {
            file: s.file,
            byte: s.start,
            scope: self.parent_of(t).unwrap_or(t),
        }
    }

    /// Where a function's return type is read: the end of its body, inside it.
    pub(super) fn ctx_at_end(&self, f: SymId) -> Ctx {
        let s = &self.syms[f];
        Ctx {
            file: s.file,
            byte: s.end.saturating_sub(1),
            scope: f,
        }
    }
}

#[cfg(test)]
mod equal_run_tests {
    use super::equal_run;

    #[test]
    fn the_run_is_what_a_binary_search_finds() {
        // Every prefix length of every short list, against `partition_point`.
        for len in 0..40usize {
            for run in 0..=len {
                let list: Vec<u8> = (0..len).map(|i| u8::from(i >= run)).collect();
                let expected = list.partition_point(|&x| x == 0);
                assert_eq!(
                    equal_run(&list, |&x| x == 0),
                    expected,
                    "len {len} run {run}"
                );
            }
        }
    }
}

#[cfg(test)]
mod name_filter_tests {
    use super::NameFilter;

    #[test]
    fn a_name_in_the_set_always_passes_and_most_others_do_not() {
        let names: Vec<String> = (0..300).map(|i| format!("name_{i}")).collect();
        let filter = NameFilter::of(names.iter().map(String::as_str));
        assert!(names.iter().all(|n| filter.may_hold(n)));
        let passed = (0..3_000)
            .filter(|i| filter.may_hold(&format!("other_{i}")))
            .count();
        // About 12% expected at 8 bits per name; the point is that most are cut.
        assert!(passed < 3_000 / 4, "{passed} of 3000 outside names passed");
        let empty = NameFilter::of(std::iter::empty());
        assert!(!empty.may_hold("name_1") && !empty.may_hold(""));
    }
}
