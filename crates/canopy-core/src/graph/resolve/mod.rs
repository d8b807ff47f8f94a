//! Resolution: binds each site of [`FileFacts`] to the definitions it means.
//!
//! The [`World`] holds every unit (from the store) and every file's facts.
//! A site is resolved by evaluating its receiver expression to a value —
//! an instance or the type itself of a class-like unit, a function, or a
//! module / package — then looking its name up as a member of that value
//! (through base classes, embedded fields, `impl` blocks and implemented
//! traits). A bare name is looked up in lexical scope order: local
//! bindings and nested definitions of the enclosing units, the file's
//! top-level definitions, its imports, the package (Go: the directory),
//! glob imports. Language differences are data (self names, which scopes
//! see class members, how modules are named), kept in the per-language
//! files next to this one.
//!
//! A site that matches one definition is `resolved`; several, `ambiguous`
//! (all candidates kept); none inside the repository, `unresolved`.

pub(crate) mod ecmascript;
pub(crate) mod python;
pub(crate) mod rust;

use std::collections::HashSet;

// The resolver builds and probes large string-keyed tables on every pass;
// SipHash was a tenth of a one-line-edit re-index.
use foldhash::{HashMap, HashMapExt};

use super::facts::model::{
    DefFactKind, ELEM, FileFacts, IMPORT_RECV, PARAM_VALUE, PATH_HEAD, SiteKind, TRAIT_HINT, TUPLE,
    UFCS_SEP,
};
use super::facts::python::{CLS_NAMES, SELF_NAMES};
use super::facts::rust::PASSTHROUGH;
use crate::lang::{Language, NodeType};

/// A unit as resolution sees it.
#[derive(Clone, Debug)]
pub struct SymRow {
    /// `nodes.id`.
    pub id: i64,
    /// Index of its file in the world's file list.
    pub file: usize,
    /// `nodes.id` of the parent.
    pub parent: Option<i64>,
    /// Kind.
    pub node_type: NodeType,
    /// Name (empty for anonymous units).
    pub name: String,
    /// Qualified name.
    pub qualified_name: String,
    /// Byte span.
    pub start: u32,
    /// Byte span end.
    pub end: u32,
}

/// A file as resolution sees it.
#[derive(Debug)]
pub struct FileRow {
    /// `files.id`.
    pub id: i64,
    /// Repo-relative path.
    pub path: String,
    /// Language.
    pub language: Language,
    /// Its facts (empty when the language has no rules).
    pub facts: LazyFacts,
}

/// A file's facts, decoded from their stored form on first use: a pass
/// after a small edit reads the facts of the few files the edited one
/// reaches, and decoding every file's was a third of reading the world.
#[derive(Debug, Default)]
pub struct LazyFacts {
    /// The stored blobs (`graph_facts.facts`, and `sites` when wanted).
    stored: Option<(Vec<u8>, Option<Vec<u8>>)>,
    decoded: std::sync::OnceLock<FileFacts>,
}

impl LazyFacts {
    /// Facts read from the store, decoded when first used (a damaged blob
    /// or one of another format reads as no facts).
    pub fn stored(facts: Vec<u8>, sites: Option<Vec<u8>>) -> LazyFacts {
        LazyFacts {
            stored: Some((facts, sites)),
            decoded: std::sync::OnceLock::new(),
        }
    }

    /// The decoded facts.
    pub fn get(&self) -> &FileFacts {
        self.decoded.get_or_init(|| {
            self.stored
                .as_ref()
                .and_then(|(facts, sites)| {
                    let world = crate::store::blob::unpack(facts)?;
                    let sites = match sites {
                        Some(s) => Some(crate::store::blob::unpack(s)?),
                        None => None,
                    };
                    FileFacts::decode(&world, sites.as_deref())
                })
                .unwrap_or_default()
        })
    }
}

/// Whether every pass reads this language's facts, whatever it resolves:
/// Rust's `cfg` ranges drop units from the world and its trait impls are
/// looked up by name from anywhere (no other language has either).
pub(crate) fn facts_read_by_every_pass(language: Language) -> bool {
    language == Language::Rust
}

impl std::ops::Deref for LazyFacts {
    type Target = FileFacts;
    fn deref(&self) -> &FileFacts {
        self.get()
    }
}

/// Where a resolved site points.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// Exactly one definition (`nodes.id`).
    Resolved(i64),
    /// Several candidate definitions.
    Ambiguous(Vec<i64>),
    /// No definition in the repository.
    Unresolved,
}

/// How a site was resolved (stored as a small code).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum How {
    /// Lexical scope, same file or package.
    Scope = 0,
    /// Through an import (aliases and re-exports followed).
    Import = 1,
    /// A member of `self` / `this` / the receiver.
    Receiver = 2,
    /// A member of a value whose type was inferred (annotation, constructor, return type).
    Inferred = 3,
    /// Found on a base class, embedded type or implemented trait.
    Inherited = 4,
    /// The receiver's type is unknown, and one definition in the repository has the name.
    UniqueName = 5,
    /// Nothing matched.
    None = 6,
    /// Not a site: the source type extends or implements the target (bases,
    /// `impl Trait for Type`, Go method sets that satisfy an interface).
    Base = 7,
}

impl How {
    /// The stored code's name.
    pub fn name(code: u8) -> &'static str {
        match code {
            0 => "scope",
            1 => "import",
            2 => "receiver",
            3 => "inferred",
            4 => "inherited",
            5 => "unique_name",
            7 => "base",
            _ => "none",
        }
    }

    fn confidence(self) -> u8 {
        match self {
            How::Scope | How::Import | How::Receiver => 100,
            How::Inferred | How::Inherited => 90,
            How::UniqueName => 50,
            How::None => 0,
            How::Base => 100,
        }
    }
}

/// One resolved (or not) site.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EdgeRow {
    /// The innermost unit containing the site (`nodes.id`).
    pub src: i64,
    /// Where it points.
    pub target: Target,
    /// Call, import, type or other.
    pub kind: SiteKind,
    /// How it was resolved.
    pub how: How,
    /// Confidence, 0..=100.
    pub confidence: u8,
    /// 1-based line.
    pub line: u32,
    /// 0-based column (characters).
    pub col: u32,
    /// The site's name (kept for unresolved sites).
    pub name: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Val {
    /// An instance of a class-like unit (index into syms).
    Inst(usize),
    /// The class-like unit itself.
    Class(usize),
    /// A function.
    Func(usize),
    /// A file as a module.
    File(usize),
    /// A Python package without `__init__.py`, or a submodule path (dotted key).
    PyMod(String),
    /// A Go package: a directory.
    Dir(String),
    /// A Rust module path inside a crate root (`crate.a.b`).
    RMod(String, String),
    /// `super` in a Python / TS class: members of the bases of this class.
    Super(usize),
}

/// Everything resolution reads: units and facts of every file.
pub struct World {
    files: Vec<FileRow>,
    syms: Vec<SymRow>,
    by_id: HashMap<i64, usize>,
    /// Per file: indices of its syms, sorted by start.
    file_syms: Vec<Vec<usize>>,
    /// Children of each sym (file units included), in source order.
    children: Vec<Vec<usize>>,
    by_name: HashMap<String, Vec<usize>>,
    file_by_path: HashMap<String, usize>,
    py_modules: HashMap<String, Vec<usize>>,
    go_dirs: HashMap<String, Vec<usize>>,
    rust_modules: HashMap<(String, String), usize>,
    /// Methods by (scope key, owner type name): Go receivers and Rust `impl` blocks anywhere in the package / crate.
    owned: HashMap<(String, String), Vec<usize>>,
    /// Trait name → (`impl` unit, scope key and type) of every trait impl.
    impl_traits: HashMap<String, Vec<(usize, String)>>,
    /// Per file: what its facts add (bases, bindings, imports, …), computed
    /// on first use. A pass after a small edit reads the facts of the few
    /// files the edited one reaches, and computing every file's share in
    /// `new` was most of building the world.
    parts: Vec<std::sync::OnceLock<FilePart>>,
    /// Per file: the sym index of the file unit.
    file_unit: Vec<Option<usize>>,
    /// Named children of each sym, sorted by name (stable: source order
    /// within a name), for a binary search; no string is copied to build it.
    child_index: Vec<Vec<usize>>,
    /// The type each `impl` unit is for (computed once in `new`).
    impl_type_cache: Vec<Option<usize>>,
    /// The base types of each unit, computed on first use: a pass after a
    /// small edit needs the bases of few classes, and computing every
    /// class's in `new` was a third of building the world.
    base_cache: Vec<std::sync::OnceLock<Vec<usize>>>,
    /// Per file: Rust crate root and module path.
    rust_mod: Vec<(String, String)>,
    /// What (file, module, name) imports resolve to.
    import_cache: std::sync::RwLock<ImportCache>,
    /// Rust library crate name → its `src/` folder.
    rust_crates: HashMap<String, String>,
    /// Cargo packages (see [`World::with_rust_packages`]).
    rust_packages: Vec<rust::Package>,
}

type ImportCache = HashMap<(usize, String, Option<String>), (u32, Vec<Val>)>;

/// (units of each file, file unit of each file, children, named children).
type TreeTables = (
    Vec<Vec<usize>>,
    Vec<Option<usize>>,
    Vec<Vec<usize>>,
    Vec<Vec<usize>>,
);

/// (Python modules, Go package folders, Rust module paths).
type ModuleTables = (
    HashMap<String, Vec<usize>>,
    HashMap<String, Vec<usize>>,
    HashMap<(String, String), usize>,
);

/// One file's share of the world's tables (see [`World::part`]). Every
/// unit it is keyed by is one of the file's own units.
#[derive(Default)]
struct FilePart {
    /// Base-type expressions of its class-like units, in source order.
    bases: HashMap<usize, Vec<String>>,
    /// Return-type expression of its functions (the last fact wins).
    returns: HashMap<usize, String>,
    /// Fields of its class-like units: (name, expression, is a type).
    fields: HashMap<usize, Vec<(String, String, bool)>>,
    /// Per binding: the sym index of its scope.
    scopes: Vec<usize>,
    /// Non-field bindings by name.
    by_name: HashMap<String, Vec<usize>>,
    /// Imports by local name, with the unit whose scope they bind in.
    imports: HashMap<String, Vec<(usize, usize)>>,
}

fn is_classlike(t: NodeType) -> bool {
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

fn is_function(t: NodeType) -> bool {
    matches!(t, NodeType::Function | NodeType::Method)
}

/// Recursion bound for evaluating expressions through bindings and bases.
const MAX_DEPTH: u32 = 12;

impl World {
    /// The Cargo packages of the repository ([`rust::packages`]): a Rust
    /// method call on a receiver of unknown type is guessed to reach the
    /// one method of its name only when that method's package is in reach
    /// of the caller's (a proc-macro crate and a sibling that is no
    /// dependency are not; see [`World::unique_method`]). Without them,
    /// every package reaches every other.
    pub fn with_rust_packages(mut self, packages: Vec<rust::Package>) -> World {
        self.rust_packages = packages;
        self
    }

    /// Builds the world from every file and unit of the index.
    /// `rust_crates`: library crates by name (see [`rust::cargo`]),
    /// for `use name::x` in examples, tests and other crates of the repository.
    pub fn new(
        files: Vec<FileRow>,
        syms: Vec<SymRow>,
        rust_crates: std::collections::HashMap<String, String>,
    ) -> World {
        // Units in code compiled out by a `cfg` are not definitions (Rust;
        // other files' facts are decoded only when used).
        let mut syms = syms;
        syms.retain(|s| {
            let file = &files[s.file];
            !facts_read_by_every_pass(file.language)
                || file
                    .facts
                    .disabled
                    .iter()
                    .all(|&(start, end)| s.start < start || s.end > end)
        });
        let mut w = World {
            by_id: syms.iter().enumerate().map(|(i, s)| (s.id, i)).collect(),
            file_syms: vec![Vec::new(); files.len()],
            children: vec![Vec::new(); syms.len()],
            by_name: HashMap::new(),
            file_by_path: files
                .iter()
                .enumerate()
                .map(|(i, f)| (f.path.clone(), i))
                .collect(),
            py_modules: HashMap::new(),
            go_dirs: HashMap::new(),
            rust_modules: HashMap::new(),
            owned: HashMap::new(),
            impl_traits: HashMap::new(),
            parts: (0..files.len())
                .map(|_| std::sync::OnceLock::new())
                .collect(),
            file_unit: vec![None; files.len()],
            child_index: Vec::new(),
            impl_type_cache: Vec::new(),
            base_cache: Vec::new(),
            rust_mod: files
                .iter()
                .map(|f| {
                    if f.language == Language::Rust {
                        rust::module_path(&f.path)
                    } else {
                        Default::default()
                    }
                })
                .collect(),
            import_cache: Default::default(),
            rust_crates: rust_crates.into_iter().collect(),
            rust_packages: Vec::new(),
            files,
            syms,
        };
        // Four independent tables, built two at a time (each only reads
        // what the constructor above set).
        let ((by_name, owned), (tree, modules)) = rayon::join(
            || rayon::join(|| w.names_table(), || w.owned_table()),
            || rayon::join(|| w.tree_tables(), || w.module_tables()),
        );
        w.by_name = by_name;
        w.owned = owned;
        (w.file_syms, w.file_unit, w.children, w.child_index) = tree;
        (w.py_modules, w.go_dirs, w.rust_modules) = modules;
        // Trait impls are looked up by trait name from anywhere: every
        // file's are listed now (the rest of a file's facts wait for `part`).
        let mut impl_traits: HashMap<String, Vec<(usize, String)>> = HashMap::new();
        for fi in 0..w.files.len() {
            if !facts_read_by_every_pass(w.files[fi].language) {
                continue; // trait impls are Rust's
            }
            for d in &w.files[fi].facts.defs {
                if d.what != DefFactKind::ImplTrait {
                    continue;
                }
                if let Some(si) = w.def_at(fi, d.byte, &d.name) {
                    impl_traits
                        .entry(d.name.clone())
                        .or_default()
                        .push((si, format!("{}\u{0}{}", w.scope_key(fi), d.expr)));
                }
            }
        }
        w.impl_traits = impl_traits;
        // Memoised type relations: every site's member lookups go through them.
        // In parallel: each looks its type up through its file's scopes and
        // imports, which computes those files' parts.
        w.impl_type_cache = {
            use rayon::prelude::*;
            let w = &w;
            (0..w.syms.len())
                .into_par_iter()
                .map(|i| {
                    (w.syms[i].node_type == NodeType::Impl).then(|| w.type_of_impl_uncached(i))
                })
                .collect()
        };
        // Rust: methods of `impl T` belong to the `T` the impl's scope sees
        // (two private `State` structs in one crate keep their own methods).
        let mut by_type: HashMap<(String, String), Vec<usize>> = HashMap::new();
        for (i, s) in w.syms.iter().enumerate() {
            if !(is_function(s.node_type) || s.node_type == NodeType::TypeAlias)
                || w.files[s.file].language != Language::Rust
            {
                continue;
            }
            let Some(p) = w.parent_of(i) else { continue };
            if w.syms[p].node_type != NodeType::Impl {
                continue;
            }
            let t = w.type_of_impl(p);
            if t != p {
                by_type
                    .entry(("#".into(), t.to_string()))
                    .or_default()
                    .push(i);
            }
        }
        w.owned.extend(by_type);
        w.base_cache = (0..w.syms.len())
            .map(|_| std::sync::OnceLock::new())
            .collect();
        w
    }

    /// Symbols by name (see [`World::new`]).
    fn names_table(&self) -> HashMap<String, Vec<usize>> {
        let mut by_name: HashMap<String, Vec<usize>> = HashMap::new();
        for (i, s) in self.syms.iter().enumerate() {
            if !s.name.is_empty() && s.node_type.is_symbol() {
                by_name.entry(s.name.clone()).or_default().push(i);
            }
        }
        by_name
    }

    /// Per file its units sorted by start and its file unit; per unit its
    /// children in source order and its named children sorted by name.
    fn tree_tables(&self) -> TreeTables {
        let mut file_syms = vec![Vec::new(); self.files.len()];
        let mut file_unit = vec![None; self.files.len()];
        let mut children = vec![Vec::new(); self.syms.len()];
        for (i, s) in self.syms.iter().enumerate() {
            file_syms[s.file].push(i);
            if s.node_type == NodeType::File {
                file_unit[s.file] = Some(i);
            }
            if let Some(&p) = s.parent.and_then(|p| self.by_id.get(&p)) {
                children[p].push(i);
            }
        }
        let syms = &self.syms;
        let child_index = children
            .iter()
            .map(|kids: &Vec<usize>| {
                let mut named: Vec<usize> = kids
                    .iter()
                    .copied()
                    .filter(|&c| !syms[c].name.is_empty())
                    .collect();
                named.sort_by(|&a, &b| syms[a].name.cmp(&syms[b].name));
                named
            })
            .collect();
        for v in &mut file_syms {
            v.sort_by_key(|&i| (syms[i].start, std::cmp::Reverse(syms[i].end)));
        }
        (file_syms, file_unit, children, child_index)
    }

    /// Python modules, Go package folders and Rust module paths to files.
    fn module_tables(&self) -> ModuleTables {
        let mut py_modules: HashMap<String, Vec<usize>> = HashMap::new();
        let mut go_dirs: HashMap<String, Vec<usize>> = HashMap::new();
        let mut rust_modules = HashMap::new();
        for (fi, f) in self.files.iter().enumerate() {
            match f.language {
                Language::Python => {
                    for m in python::module_names(&f.path) {
                        py_modules.entry(m).or_default().push(fi);
                    }
                }
                Language::Go => {
                    go_dirs
                        .entry(dir_of(&f.path).to_string())
                        .or_default()
                        .push(fi);
                }
                Language::Rust => {
                    rust_modules.insert(self.rust_mod[fi].clone(), fi);
                }
                _ => {}
            }
        }
        (py_modules, go_dirs, rust_modules)
    }

    /// Methods declared away from their type: Go receivers, Rust impl blocks.
    fn owned_table(&self) -> HashMap<(String, String), Vec<usize>> {
        let mut owned: HashMap<(String, String), Vec<usize>> = HashMap::new();
        for (i, s) in self.syms.iter().enumerate() {
            let assoc_type =
                s.node_type == NodeType::TypeAlias && self.files[s.file].language == Language::Rust;
            if !is_function(s.node_type) && !assoc_type {
                continue;
            }
            let f = &self.files[s.file];
            let parent = s
                .parent
                .and_then(|p| self.by_id.get(&p))
                .map(|&p| &self.syms[p]);
            let owner = match (f.language, parent) {
                (Language::Rust, Some(p)) if p.node_type == NodeType::Impl => p.name.clone(),
                (Language::Go, _) if s.node_type == NodeType::Method => {
                    match s.qualified_name.split_once('.') {
                        Some((o, _))
                            if parent.is_none_or(|p| p.node_type != NodeType::Interface) =>
                        {
                            o.to_string()
                        }
                        _ => continue,
                    }
                }
                _ => continue,
            };
            owned
                .entry((self.scope_key(s.file), owner))
                .or_default()
                .push(i);
        }
        owned
    }

    /// What file `fi`'s facts add to the world, computed on first use.
    fn part(&self, fi: usize) -> &FilePart {
        self.parts[fi].get_or_init(|| self.file_part(fi))
    }

    /// Base-type expressions of unit `t`, if it has any.
    fn bases_of(&self, t: usize) -> Option<&Vec<String>> {
        self.part(self.syms[t].file).bases.get(&t)
    }

    /// Return-type expression of function `f`.
    fn returns_of(&self, f: usize) -> Option<&String> {
        self.part(self.syms[f].file).returns.get(&f)
    }

    /// Fields of class-like unit `o`: (name, expression, is a type).
    fn fields_of(&self, o: usize) -> Option<&Vec<(String, String, bool)>> {
        self.part(self.syms[o].file).fields.get(&o)
    }

    /// The part of the world file `fi`'s facts make (see [`World::part`]);
    /// reads only what [`World::new`] built, never another part.
    fn file_part(&self, fi: usize) -> FilePart {
        let facts = &self.files[fi].facts;
        let mut part = FilePart::default();
        for d in &facts.defs {
            let Some(si) = self.def_at(fi, d.byte, &d.name) else {
                continue;
            };
            match d.what {
                DefFactKind::ImplTrait => {} // in `World::impl_traits`
                DefFactKind::Base => part.bases.entry(si).or_default().push(d.expr.clone()),
                _ => {
                    part.returns.insert(si, d.expr.clone());
                }
            }
        }
        part.scopes = Vec::with_capacity(facts.bindings.len());
        for b in &facts.bindings {
            let scope = self.innermost(fi, b.byte).unwrap_or(0);
            part.scopes.push(scope);
            let field = || (b.name.clone(), b.expr.clone(), b.is_type);
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
        for (bi, b) in facts.bindings.iter().enumerate() {
            if !b.field {
                part.by_name.entry(b.name.clone()).or_default().push(bi);
            }
        }
        for (ii, i) in facts.imports.iter().enumerate() {
            if let Some(scope) = self.innermost(fi, i.byte) {
                part.imports
                    .entry(i.local.clone())
                    .or_default()
                    .push((ii, scope));
            }
        }
        part
    }

    /// Methods declared away from type `t` (Go receivers, Rust impl blocks).
    fn owned_methods(&self, t: usize) -> &[usize] {
        let ts = &self.syms[t];
        if self.files[ts.file].language == Language::Rust
            && let Some(v) = self.owned.get(&("#".to_string(), t.to_string()))
        {
            return v;
        }
        self.owned
            .get(&(self.scope_key(ts.file), ts.name.clone()))
            .map_or(&[], Vec::as_slice)
    }

    /// Children of `parent` named `name`.
    fn named_children(&self, parent: usize, name: &str) -> &[usize] {
        let Some(named) = self.child_index.get(parent) else {
            return &[];
        };
        let lo = named.partition_point(|&c| self.syms[c].name.as_str() < name);
        let hi = lo + named[lo..].partition_point(|&c| self.syms[c].name == name);
        &named[lo..hi]
    }

    /// The package / crate a file belongs to, for methods declared away from their type.
    fn scope_key(&self, fi: usize) -> String {
        let f = &self.files[fi];
        match f.language {
            Language::Go => dir_of(&f.path).to_string(),
            Language::Rust => self.rust_mod[fi].0.clone(),
            _ => f.path.clone(),
        }
    }

    /// The innermost unit of file `fi` containing `byte`.
    fn innermost(&self, fi: usize, byte: u32) -> Option<usize> {
        self.innermost_where(fi, byte, |_| true)
    }

    fn innermost_where(&self, fi: usize, byte: u32, ok: impl Fn(&SymRow) -> bool) -> Option<usize> {
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
        fi: usize,
        byte: u32,
        upto: usize,
        ok: impl Fn(&SymRow) -> bool,
    ) -> Option<usize> {
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

    fn def_at(&self, fi: usize, byte: u32, name: &str) -> Option<usize> {
        self.innermost_where(fi, byte, |s| {
            s.name == name && s.node_type != NodeType::File
        })
    }

    fn parent_of(&self, si: usize) -> Option<usize> {
        self.syms[si]
            .parent
            .and_then(|p| self.by_id.get(&p).copied())
    }

    /// Resolves every site of file `fi`.
    pub fn resolve_file(&self, fi: usize) -> Vec<EdgeRow> {
        let facts = &self.files[fi].facts;
        let mut out = Vec::with_capacity(facts.sites.len() / 2);
        for site in &facts.sites {
            let Some(scope) = self.innermost(fi, site.byte) else {
                continue;
            };
            let cx = Ctx {
                file: fi,
                byte: site.byte,
                scope,
            };
            let (cands, how) = self.resolve_site(&cx, &site.name, site.recv.as_deref(), site.kind);
            let mut cands = cands;
            cands.sort_unstable();
            cands.dedup();
            let src = self.syms[self.caller_unit(fi, site.byte).unwrap_or(scope)].id;
            let target = match cands.len() {
                0 => {
                    // Only calls are worth recording unresolved ("N call sites named X").
                    if site.kind != SiteKind::Call {
                        continue;
                    }
                    Target::Unresolved
                }
                1 => Target::Resolved(self.syms[cands[0]].id),
                _ => Target::Ambiguous(cands.iter().map(|&c| self.syms[c].id).collect()),
            };
            let how = if target == Target::Unresolved {
                How::None
            } else {
                how
            };
            let confidence = match &target {
                Target::Ambiguous(c) => (how.confidence() / c.len() as u8).max(1),
                _ => how.confidence(),
            };
            out.push(EdgeRow {
                src,
                target,
                kind: site.kind,
                how,
                confidence,
                line: site.line,
                col: site.col,
                name: site.name.clone(),
            });
        }
        self.base_edges(fi, &mut out);
        out
    }

    /// Type relations of the class-like units of file `fi`: bases, traits an
    /// `impl` implements, and (Go) the interfaces a type's method set satisfies.
    fn base_edges(&self, fi: usize, out: &mut Vec<EdgeRow>) {
        let lang = self.files[fi].language;
        for &t in &self.file_syms[fi] {
            let ts = &self.syms[t];
            if !is_classlike(ts.node_type) {
                continue;
            }
            let mut targets: Vec<usize> = Vec::new();
            if ts.node_type == NodeType::Impl {
                if let Some(list) = self.impl_traits.get(&ts.name) {
                    for (impl_sym, tr) in list.iter().filter(|(i, _)| *i == t) {
                        let Some((_, tr)) = tr.split_once('\u{0}') else {
                            continue;
                        };
                        let cx = Ctx {
                            file: fi,
                            byte: self.syms[*impl_sym].start,
                            scope: self.parent_of(t).unwrap_or(t),
                        };
                        for v in self.eval_type(&cx, tr, 0) {
                            if let Val::Inst(c) = v {
                                targets.push(c);
                            }
                        }
                    }
                }
            } else if self.bases_of(t).is_some() {
                targets.extend(self.base_types(t, 0).into_iter().filter(|&b| b != t));
            }
            if lang == Language::Go && ts.node_type == NodeType::Struct {
                let methods: HashSet<&str> = self
                    .owned_methods(t)
                    .iter()
                    .map(|&m| self.syms[m].name.as_str())
                    .collect();
                if !methods.is_empty() {
                    for (i, s) in self.syms.iter().enumerate() {
                        if s.node_type != NodeType::Interface || self.files[s.file].language != lang
                        {
                            continue;
                        }
                        let wanted: Vec<&str> = self.children[i]
                            .iter()
                            .map(|&m| self.syms[m].name.as_str())
                            .collect();
                        if !wanted.is_empty() && wanted.iter().all(|m| methods.contains(m)) {
                            targets.push(i);
                        }
                    }
                }
            }
            targets.sort_unstable();
            targets.dedup();
            for b in targets {
                out.push(EdgeRow {
                    src: ts.id,
                    target: Target::Resolved(self.syms[b].id),
                    kind: SiteKind::Type,
                    how: How::Base,
                    confidence: How::Base.confidence(),
                    line: 0,
                    col: 0,
                    name: self.syms[b].name.clone(),
                });
            }
        }
    }

    /// The unit a site's edge starts from: the innermost named definition
    /// (functions, classes, …) containing it, else the file.
    fn caller_unit(&self, fi: usize, byte: u32) -> Option<usize> {
        self.innermost_where(fi, byte, |s| {
            s.node_type == NodeType::File
                || (s.node_type.is_symbol() && s.node_type != NodeType::Impl)
        })
    }

    fn resolve_site(
        &self,
        cx: &Ctx,
        name: &str,
        recv: Option<&str>,
        kind: SiteKind,
    ) -> (Vec<usize>, How) {
        let lang = self.files[cx.file].language;
        match recv {
            Some(r)
                if r.starts_with(IMPORT_RECV)
                    || (kind == SiteKind::Import && lang == Language::Python) =>
            {
                let module = r.strip_prefix(IMPORT_RECV).unwrap_or(r);
                let vals = self.import_target(cx.file, module, Some(name), 0);
                (self.defs_of(&vals), How::Import)
            }
            Some("?") => (Vec::new(), How::None),
            Some(r) if lang == Language::Rust && r.contains(TRAIT_HINT) => {
                let (t, tr) = r.split_once(TRAIT_HINT).unwrap_or((r, ""));
                let of_trait = self.trait_methods(cx, t, name, tr);
                if of_trait.is_empty() {
                    self.resolve_site(cx, name, Some(t), kind)
                } else {
                    (of_trait, How::Inferred)
                }
            }
            Some(r) if lang == Language::Rust && r.contains(UFCS_SEP) => {
                let (path, first_arg) = r.split_once(UFCS_SEP).unwrap_or((r, ""));
                let found = self.resolve_site(cx, name, Some(path), kind);
                if !found.0.is_empty() || !self.eval(cx, path, 0).is_empty() {
                    return found;
                }
                // Only methods of `x`'s impls of the trait the path names
                // (`toml::Span::new(a)` is no method of `a`).
                let tr = path.rsplit('.').next().unwrap_or(path);
                let tr = tr.trim_end_matches(PATH_HEAD);
                (self.trait_methods(cx, first_arg, name, tr), How::Inferred)
            }
            Some(r) => {
                let vals = self.eval(cx, r, 0);
                let mut out = Vec::new();
                let mut how = How::Inferred;
                for v in &vals {
                    if let Val::Inst(_) | Val::Super(_) = v
                        && self.is_self_expr(lang, r)
                    {
                        how = How::Receiver;
                    }
                    if matches!(
                        v,
                        Val::File(_) | Val::Dir(_) | Val::PyMod(_) | Val::RMod(..)
                    ) {
                        how = How::Import;
                    }
                    let (found, inherited) = self.member_defs(v, name, 0);
                    if inherited {
                        how = How::Inherited;
                    }
                    out.extend(found);
                }
                // Unknown receiver: guess only when even its root is unknown (a
                // pattern or closure binding). A known root whose member has an
                // external type (`self.text.len()`, text: String) is external.
                let root_unknown = || {
                    let root = r.split('.').next().unwrap_or_default();
                    root == r || self.eval(cx, root, 0).is_empty()
                };
                if out.len() > 1 && lang == Language::Rust {
                    // Methods of several traits: inside `impl Trait for X`,
                    // the same trait's (`s.end()` in `SerializeStruct::end`).
                    out.sort_unstable();
                    out.dedup();
                    if let Some(tr) = self.enclosing_impl_trait(cx) {
                        let same: Vec<usize> = out
                            .iter()
                            .copied()
                            .filter(|&m| {
                                self.parent_of(m).is_some_and(|i| self.impl_trait_is(i, tr))
                            })
                            .collect();
                        if same.len() == 1 {
                            out = same;
                        }
                    }
                }
                if out.is_empty() && vals.is_empty() && kind == SiteKind::Call && root_unknown() {
                    // Unknown receiver: a method name defined once in the repository.
                    if let Some(only) = self.unique_method(cx.file, name) {
                        return (vec![only], How::UniqueName);
                    }
                }
                (out, how)
            }
            None => {
                let (mut vals, how) = self.lookup(cx, name, 0);
                if lang == Language::Rust
                    && kind == SiteKind::Call
                    && vals.iter().any(|v| !self.is_rust_module(v))
                {
                    // `value(x)` calls the function, not the module of that name.
                    vals.retain(|v| !self.is_rust_module(v));
                }
                (self.defs_of(&vals), how)
            }
        }
    }

    fn is_self_expr(&self, lang: Language, r: &str) -> bool {
        let first = r.split('.').next().unwrap_or_default();
        match lang {
            Language::Python => {
                SELF_NAMES.contains(&first) || CLS_NAMES.contains(&first) || first == "super()"
            }
            Language::Rust => first == "self" || first == "Self",
            Language::Go => true,
            _ => first == "this" || first == "super",
        }
    }

    /// The method named `name` that a call in file `fi` on a receiver of
    /// unknown type is guessed to reach: the only method of that name in
    /// the repository (same language family), and in Rust only when the
    /// file's package reaches its package. Uniqueness is over the whole
    /// repository, not over what the caller reaches: a name defined once is
    /// what makes the guess likely (`waker()` has one definition in tokio's
    /// own package and is mostly called on `std`'s `Context`).
    fn unique_method(&self, fi: usize, name: &str) -> Option<usize> {
        let lang = self.files[fi].language;
        let c: Vec<usize> = self
            .by_name
            .get(name)?
            .iter()
            .copied()
            .filter(|&i| {
                let s = &self.syms[i];
                s.node_type == NodeType::Method && same_family(self.files[s.file].language, lang)
            })
            .collect();
        let &[only] = c.as_slice() else {
            return None;
        };
        if lang == Language::Rust
            && let (Some(caller), Some(target)) = (
                self.rust_package(fi),
                self.rust_package(self.syms[only].file),
            )
            && !caller.reaches(&self.files[fi].path, target)
        {
            return None;
        }
        Some(only)
    }

    /// The Cargo package a file belongs to: the one whose folder is the
    /// longest prefix of its path.
    fn rust_package(&self, fi: usize) -> Option<&rust::Package> {
        let path = &self.files[fi].path;
        self.rust_packages
            .iter()
            .filter(|p| path.starts_with(&p.dir))
            .max_by_key(|p| p.dir.len())
    }

    /// Definitions a list of values stands for.
    fn defs_of(&self, vals: &[Val]) -> Vec<usize> {
        vals.iter()
            .filter_map(|v| match v {
                Val::Func(i) | Val::Class(i) => Some(*i),
                _ => None,
            })
            .collect()
    }

    /// Members named `name` of a value, and whether they came from a base.
    fn member_defs(&self, v: &Val, name: &str, depth: u32) -> (Vec<usize>, bool) {
        if let Val::Class(t) = v
            && let Some(m) = self.rust_file_module(*t)
        {
            return (self.defs_of(&self.member(&m, name, depth + 1)), false);
        }
        match v {
            Val::Inst(t) | Val::Class(t) => {
                let mut seen = HashSet::new();
                self.find_member(*t, name, depth, &mut seen)
            }
            Val::Super(c) => {
                let mut out = Vec::new();
                let mut seen = HashSet::new();
                seen.insert(*c);
                for b in self.base_types(*c, depth) {
                    out.extend(self.find_member(b, name, depth + 1, &mut seen).0);
                    if !out.is_empty() {
                        break;
                    }
                }
                (out, true)
            }
            _ => (self.defs_of(&self.member(v, name, depth)), false),
        }
    }

    /// Methods (and nested types) named `name` of class-like `t`, through its bases.
    fn find_member(
        &self,
        t: usize,
        name: &str,
        depth: u32,
        seen: &mut HashSet<usize>,
    ) -> (Vec<usize>, bool) {
        if depth > MAX_DEPTH || !seen.insert(t) {
            return (Vec::new(), false);
        }
        let ts = &self.syms[t];
        let mut out: Vec<usize> = self
            .named_children(t, name)
            .iter()
            .copied()
            .filter(|&c| self.syms[c].node_type != NodeType::Impl)
            .collect();
        let lang = self.files[ts.file].language;
        if out.is_empty() && matches!(lang, Language::Go | Language::Rust) {
            let owner = if ts.node_type == NodeType::Impl {
                self.type_of_impl(t)
            } else {
                t
            };
            out.extend(
                self.owned_methods(owner)
                    .iter()
                    .copied()
                    .filter(|&m| self.syms[m].name == name),
            );
        }
        if out.len() > 1 && lang == Language::Rust {
            // An inherent method shadows trait methods of the same name.
            let inherent: Vec<usize> = out
                .iter()
                .copied()
                .filter(|&m| self.parent_of(m).is_some_and(|p| !self.impl_has_trait(p)))
                .collect();
            if inherent.len() == 1 {
                out = inherent;
            }
        }
        if out.len() > 1 && is_ecmascript(lang) {
            out = overload_implementation(&self.syms, out);
        }
        if out.len() > 1 && lang == Language::Python {
            // Several definitions in one class body (`@overload`, property setters): the last wins.
            out.sort_by_key(|&m| self.syms[m].start);
            out = vec![*out.last().unwrap_or(&out[0])];
        }
        if !out.is_empty() {
            return (out, false);
        }
        for b in self.base_types(t, depth) {
            let (found, _) = self.find_member(b, name, depth + 1, seen);
            if !found.is_empty() {
                return (found, true);
            }
        }
        (Vec::new(), false)
    }

    /// Rust: the methods `name` of the value `e`'s type that come from its
    /// impls of the trait whose last path segment is `tr`.
    fn trait_methods(&self, cx: &Ctx, e: &str, name: &str, tr: &str) -> Vec<usize> {
        let mut out = Vec::new();
        for v in self.eval(cx, e, 0) {
            if let Val::Class(c) | Val::Inst(c) = v {
                out.extend(
                    self.owned_methods(self.type_of_impl(c))
                        .iter()
                        .copied()
                        .filter(|&m| {
                            self.syms[m].name == name
                                && self.parent_of(m).is_some_and(|i| self.impl_trait_is(i, tr))
                        }),
                );
            }
        }
        out.sort_unstable();
        out.dedup();
        out
    }

    /// The last path segment of the trait the innermost Rust `impl` around `cx` implements.
    fn enclosing_impl_trait(&self, cx: &Ctx) -> Option<&str> {
        let mut cur = Some(cx.scope);
        while let Some(c) = cur {
            if self.syms[c].node_type == NodeType::Impl {
                return self.impl_trait_name(c);
            }
            cur = self.parent_of(c);
        }
        None
    }

    /// The last path segment of the trait Rust `impl_sym` implements
    /// (`Deref` for `impl std::ops::Deref for T`), if it implements one.
    fn impl_trait_name(&self, impl_sym: usize) -> Option<&str> {
        let (_, tr) = self
            .impl_traits
            .get(&self.syms[impl_sym].name)?
            .iter()
            .find(|(s, _)| *s == impl_sym)?;
        let tr = tr.split_once('\u{0}').map_or(tr.as_str(), |(_, t)| t);
        tr.rsplit('.').next()
    }

    /// Whether Rust `impl_sym` implements a trait whose last path segment is `name`.
    fn impl_trait_is(&self, impl_sym: usize, name: &str) -> bool {
        self.impl_trait_name(impl_sym) == Some(name)
    }

    fn impl_has_trait(&self, impl_sym: usize) -> bool {
        self.impl_traits
            .get(&self.syms[impl_sym].name)
            .is_some_and(|v| v.iter().any(|(s, _)| *s == impl_sym))
    }

    /// The class-like units `t` inherits from: bases, embedded types, implemented traits.
    fn base_types(&self, t: usize, depth: u32) -> Vec<usize> {
        thread_local! {
            /// Units whose bases this thread is computing for the cache: a
            /// cycle (`A(B)`, `B(A)`) evaluates uncached below them, bounded
            /// by the depth, instead of waiting on its own cell.
            static COMPUTING: std::cell::RefCell<Vec<usize>> = const { std::cell::RefCell::new(Vec::new()) };
        }
        let Some(cell) = self
            .base_cache
            .get(t)
            .filter(|_| is_classlike(self.syms[t].node_type))
        else {
            return self.base_types_uncached(t, depth);
        };
        if let Some(v) = cell.get() {
            return v.clone();
        }
        if COMPUTING.with(|c| c.borrow().contains(&t)) {
            return self.base_types_uncached(t, depth);
        }
        COMPUTING.with(|c| c.borrow_mut().push(t));
        let v = self.base_types_uncached(t, 0);
        COMPUTING.with(|c| {
            c.borrow_mut().pop();
        });
        cell.get_or_init(|| v).clone()
    }

    fn base_types_uncached(&self, t: usize, depth: u32) -> Vec<usize> {
        let ts = &self.syms[t];
        let mut out = Vec::new();
        let cx = Ctx {
            file: ts.file,
            byte: ts.start,
            scope: self.parent_of(t).unwrap_or(t),
        };
        for b in self.bases_of(t).into_iter().flatten() {
            for v in self.eval_type(&cx, b, depth + 1) {
                if let Val::Inst(c) = v {
                    out.push(c);
                }
            }
        }
        if self.files[ts.file].language == Language::Rust {
            let key = self.scope_key(ts.file);
            for (impl_sym, tr) in self.impl_traits.get(&ts.name).into_iter().flatten() {
                let Some((k, tr)) = tr.split_once('\u{0}') else {
                    continue;
                };
                if k != key {
                    continue;
                }
                let is = &self.syms[*impl_sym];
                let icx = Ctx {
                    file: is.file,
                    byte: is.start,
                    scope: self.parent_of(*impl_sym).unwrap_or(*impl_sym),
                };
                for v in self.eval_type(&icx, tr, depth + 1) {
                    if let Val::Inst(c) = v {
                        out.push(c);
                    }
                }
                // Auto-deref: `impl Deref for T { type Target = U; }` gives `T` the methods of `U`.
                if self.impl_trait_is(*impl_sym, "Deref") {
                    for &target in self.named_children(*impl_sym, "Target") {
                        for b in self.bases_of(target).into_iter().flatten() {
                            for v in self.eval_type(&icx, b, depth + 1) {
                                if let Val::Inst(c) = v {
                                    out.push(c);
                                }
                            }
                        }
                    }
                }
            }
        }
        out
    }

    /// Evaluates a type expression to instances of class-like units.
    fn eval_type(&self, cx: &Ctx, e: &str, depth: u32) -> Vec<Val> {
        if depth > MAX_DEPTH {
            return Vec::new();
        }
        let mut vals = Vec::new();
        for v in self.eval_path(cx, e, depth, false) {
            match v {
                Val::Class(c) => vals.push(Val::Inst(self.type_of_impl(c))),
                Val::Inst(c) => vals.push(Val::Inst(c)),
                _ => {}
            }
        }
        vals
    }

    /// `impl Foo` → the `Foo` type when it can be found, else the impl itself.
    fn type_of_impl(&self, c: usize) -> usize {
        if let Some(Some(t)) = self.impl_type_cache.get(c) {
            return *t;
        }
        self.type_of_impl_uncached(c)
    }

    fn type_of_impl_uncached(&self, c: usize) -> usize {
        let s = &self.syms[c];
        if s.node_type != NodeType::Impl {
            return c;
        }
        let cx = Ctx {
            file: s.file,
            byte: s.start,
            scope: self.parent_of(c).unwrap_or(c),
        };
        // Half the depth budget: enough for `use crate::{X}` and a re-export
        // or two (an impl in another file than its type), and a bound on the
        // recursion while the impl-type cache is being filled.
        self.lookup(&cx, &s.name.clone(), MAX_DEPTH / 2)
            .0
            .into_iter()
            .find_map(|v| match v {
                Val::Class(t) if self.syms[t].node_type != NodeType::Impl => Some(t),
                _ => None,
            })
            .unwrap_or(c)
    }

    /// Evaluates a value expression (`a.b().c`).
    fn eval(&self, cx: &Ctx, e: &str, depth: u32) -> Vec<Val> {
        self.eval_path(cx, e, depth, true)
    }

    fn eval_path(&self, cx: &Ctx, e: &str, depth: u32, value: bool) -> Vec<Val> {
        if depth > MAX_DEPTH {
            return Vec::new();
        }
        if let Some((t, _)) = e.split_once(TRAIT_HINT) {
            // `<T as Trait>` as a value is `T` (the hint only steers method choice).
            return self.eval_path(cx, t, depth, value);
        }
        let lang = self.files[cx.file].language;
        let mut segs = e.split('.');
        let Some(first) = segs.next() else {
            return Vec::new();
        };
        let (head, called) = match first.strip_suffix("()") {
            Some(h) => (h, true),
            None => (first, false),
        };
        // A path's head that a local of its name could be taken for
        // (`PATH_HEAD`): looked up past the locals.
        let (head, path_head) = match head.strip_suffix(PATH_HEAD) {
            Some(h) => (h, true),
            None => (head, false),
        };
        let mut vals: Vec<Val> = match (lang, head) {
            (Language::Python, "super") if called => self
                .enclosing_class(cx)
                .map(Val::Super)
                .into_iter()
                .collect(),
            (Language::Python, h) if value && SELF_NAMES.contains(&h) && !called => self
                .enclosing_class(cx)
                .map(Val::Inst)
                .into_iter()
                .collect(),
            (Language::Python, h) if value && CLS_NAMES.contains(&h) && !called => self
                .enclosing_class(cx)
                .map(Val::Class)
                .into_iter()
                .collect(),
            (Language::JavaScript | Language::TypeScript | Language::Tsx, "this") => self
                .enclosing_class(cx)
                .map(Val::Inst)
                .into_iter()
                .collect(),
            (Language::JavaScript | Language::TypeScript | Language::Tsx, "super") => self
                .enclosing_class(cx)
                .map(Val::Super)
                .into_iter()
                .collect(),
            (Language::Rust, "self") if value => self
                .enclosing_class(cx)
                .map(|c| Val::Inst(self.type_of_impl(c)))
                .into_iter()
                .collect(),
            (Language::Rust, "Self") => self
                .enclosing_class(cx)
                .map(|c| Val::Class(self.type_of_impl(c)))
                .into_iter()
                .collect(),
            (Language::Rust, "crate") => {
                let (root, module) = &self.rust_mod[cx.file];
                if module == "crate" && !root.ends_with("src/") && !root.is_empty() {
                    // A one-file crate (an integration test, an example):
                    // its siblings are other crates.
                    vec![Val::File(cx.file)]
                } else {
                    vec![Val::RMod(root.clone(), "crate".into())]
                }
            }
            (Language::Rust, "self_mod" | "self") => {
                let (root, m) = self.rust_mod[cx.file].clone();
                vec![Val::RMod(root, m)]
            }
            (Language::Rust, "super") => {
                let (root, m) = self.rust_mod[cx.file].clone();
                match m.rsplit_once('.') {
                    Some((parent, _)) => vec![Val::RMod(root, parent.to_string())],
                    None => Vec::new(),
                }
            }
            _ => self.lookup_in(cx, head, depth, path_head).0,
        };
        if called && lang == Language::Rust && vals.iter().any(|v| !self.is_rust_module(v)) {
            // `value(x)`: the function, not the module of that name.
            vals.retain(|v| !self.is_rust_module(v));
        }
        if called && !matches!(vals.first(), Some(Val::Super(_))) {
            vals = self.call_result(&vals, depth);
        }
        // `e[..end]`: the path before the current segment.
        let mut end = first.len();
        for seg in segs {
            let (name, called) = match seg.strip_suffix("()") {
                Some(h) => (h, true),
                None => (seg, false),
            };
            let before = &e[..end];
            end += 1 + seg.len();
            if called
                && lang == Language::Rust
                && rust::ITEM_METHODS.contains(&name)
                && !before.ends_with(')')
                && vals.iter().all(|v| !matches!(v, Val::Inst(_)))
            {
                // `self.values.remove(i)` (`values: Vec<Item>`, no type of its
                // own here): an item of the collection.
                let items = self.eval_path(cx, &format!("{before}{}", ELEM), depth + 1, value);
                if !items.is_empty() {
                    vals = items;
                    continue;
                }
            }
            if vals.is_empty() {
                return vals;
            }
            let mut next = Vec::new();
            for v in &vals {
                // Rust: `x.decor` is the field even when a method `decor()` exists.
                if lang == Language::Rust
                    && !called
                    && let Val::Inst(t) | Val::Class(t) = v
                {
                    let fields = self.field(*t, name, depth + 1);
                    if !fields.is_empty() {
                        next.extend(fields);
                        continue;
                    }
                }
                next.extend(self.member(v, name, depth + 1));
            }
            if next.is_empty() && called && lang == Language::Rust {
                if PASSTHROUGH.contains(&name) {
                    // `x.unwrap()`, `x.as_ref()`, `x.clone()`: the value itself.
                    continue;
                }
                if name == "default" {
                    // `T::default()` of a derived `Default`: a `T`.
                    vals = vals
                        .iter()
                        .filter_map(|v| match v {
                            Val::Class(c) => Some(Val::Inst(self.type_of_impl(*c))),
                            _ => None,
                        })
                        .collect();
                    continue;
                }
            }
            vals = next;
            if called {
                vals = self.call_result(&vals, depth);
            }
        }
        vals.dedup();
        vals
    }

    /// What calling each value gives: an instance of a class, a function's return type.
    fn call_result(&self, vals: &[Val], depth: u32) -> Vec<Val> {
        let mut out = Vec::new();
        for v in vals {
            match v {
                Val::Class(c) => out.push(Val::Inst(self.type_of_impl(*c))),
                Val::Func(f) => {
                    let s = &self.syms[*f];
                    // Overloads share a qualified name: any of them may carry the annotation.
                    let ret = self.returns_of(*f).or_else(|| {
                        self.file_syms[s.file].iter().find_map(|&o| {
                            let os = &self.syms[o];
                            (o != *f && os.qualified_name == s.qualified_name)
                                .then(|| self.returns_of(o))
                                .flatten()
                        })
                    });
                    let Some(ret) = ret else {
                        continue;
                    };
                    let cx = Ctx {
                        file: s.file,
                        byte: s.end.saturating_sub(1),
                        scope: *f,
                    };
                    match ret.strip_prefix('=') {
                        Some(value) => out.extend(self.eval(&cx, value, depth + 1)),
                        None => out.extend(self.eval_type(&cx, ret, depth + 1)),
                    }
                }
                _ => {}
            }
        }
        out
    }

    /// The members named `name` of a value, as values.
    /// The units a Rust path names as a user of its crate would write it
    /// (`tokio::spawn`: the library crate the repository's `Cargo.toml`
    /// names `tokio`, then its members, following `pub use` re-exports the
    /// way `use tokio::spawn` does). Empty when the first segment is no
    /// library crate of the repository.
    pub fn rust_path_units(&self, segments: &[&str]) -> Vec<i64> {
        let Some((first, rest)) = segments.split_first() else {
            return Vec::new();
        };
        let Some(src) = self.rust_crates.get(*first) else {
            return Vec::new();
        };
        let mut vals = vec![Val::RMod(src.clone(), "crate".into())];
        for seg in rest {
            vals = vals.iter().flat_map(|v| self.member(v, seg, 1)).collect();
        }
        let mut ids: Vec<i64> = vals
            .iter()
            .filter_map(|v| match v {
                Val::Class(i) | Val::Func(i) => Some(self.syms[*i].id),
                _ => None,
            })
            .collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    fn member(&self, v: &Val, name: &str, depth: u32) -> Vec<Val> {
        if depth > MAX_DEPTH {
            return Vec::new();
        }
        if let Val::Class(t) = v
            && let Some(m) = self.rust_file_module(*t)
        {
            return self.member(&m, name, depth + 1);
        }
        match v {
            Val::Inst(t) | Val::Class(t) | Val::Super(t) => {
                let (found, _) = self.member_defs(v, name, depth);
                if !found.is_empty() {
                    return found.into_iter().map(|s| self.as_val(s)).collect();
                }
                let _ = t;
                self.field(*t, name, depth)
            }
            Val::File(f) => self.module_member(*f, name, depth),
            Val::PyMod(key) => {
                let sub = format!("{key}.{name}");
                self.py_module(&sub).into_iter().collect()
            }
            Val::Dir(d) => self.dir_member(d, name),
            Val::RMod(root, path) => {
                // A submodule in its own file (`mod key;`) before the declaration
                // unit; also what the module names so in the value namespace
                // (`crate::value` is both `mod value` and a re-exported `fn value`).
                let sub = format!("{path}.{name}");
                let mut out = Vec::new();
                let has_sub = self.rust_modules.contains_key(&(root.clone(), sub.clone()));
                if has_sub {
                    out.push(Val::RMod(root.clone(), sub));
                }
                if let Some(&f) = self.rust_modules.get(&(root.clone(), path.clone())) {
                    out.extend(
                        self.module_member(f, name, depth)
                            .into_iter()
                            .filter(|v| !(has_sub && self.is_rust_module(v))),
                    );
                }
                out
            }
            Val::Func(f) => self.tuple_element(*f, name, depth),
        }
    }

    /// `f.#i`: element `i` of the tuple function `f` returns
    /// ([`TUPLE`]), as a value; nothing for any other member of a
    /// function.
    fn tuple_element(&self, f: usize, name: &str, depth: u32) -> Vec<Val> {
        let Some(i) = name.strip_prefix('#').and_then(|i| i.parse::<usize>().ok()) else {
            return Vec::new();
        };
        let Some(elems) = self
            .returns_of(f)
            .and_then(|r| r.strip_prefix(TUPLE))
            .and_then(|r| r.strip_suffix(')'))
        else {
            return Vec::new();
        };
        let Some(t) = elems.split(';').nth(i).filter(|t| !t.is_empty()) else {
            return Vec::new();
        };
        let s = &self.syms[f];
        let cx = Ctx {
            file: s.file,
            byte: s.end.saturating_sub(1),
            scope: f,
        };
        self.eval_type(&cx, t, depth + 1)
    }

    /// The field `name` of class-like `t` (and its bases), evaluated.
    fn field(&self, t: usize, name: &str, depth: u32) -> Vec<Val> {
        let mut seen = HashSet::new();
        let mut stack = vec![t];
        while let Some(c) = stack.pop() {
            if !seen.insert(c) || seen.len() > 32 {
                continue;
            }
            let cs = &self.syms[c];
            let mut owners = vec![c];
            if matches!(self.files[cs.file].language, Language::Rust) {
                // Fields live on the struct; `self` may be the impl.
                owners.push(self.type_of_impl(c));
            }
            for o in owners {
                for (n, e, is_type) in self.fields_of(o).into_iter().flatten() {
                    if n != name {
                        continue;
                    }
                    let os = &self.syms[o];
                    let cx = Ctx {
                        file: os.file,
                        byte: os.start,
                        scope: o,
                    };
                    let vals = if *is_type {
                        self.eval_type(&cx, e, depth + 1)
                    } else {
                        self.eval(&cx, e, depth + 1)
                    };
                    if !vals.is_empty() {
                        return vals;
                    }
                }
            }
            stack.extend(self.base_types(c, depth + 1));
        }
        Vec::new()
    }

    /// Rust `mod key;` (a module unit without a body): the module in its own
    /// file (`key.rs` / `key/mod.rs` beside the declaring module).
    fn rust_file_module(&self, t: usize) -> Option<Val> {
        let s = &self.syms[t];
        if s.node_type != NodeType::Module || self.files[s.file].language != Language::Rust {
            return None;
        }
        let (root, m) = &self.rust_mod[s.file];
        let key = (root.clone(), format!("{m}.{}", s.name));
        self.rust_modules
            .contains_key(&key)
            .then_some(Val::RMod(key.0, key.1))
    }

    /// What the imports of scope `u` in file `fi` bind `name` to
    /// (`exported_only`: only those importers of the file see, see
    /// [`super::facts::Import::exported`]).
    fn scope_imports(
        &self,
        fi: usize,
        u: usize,
        name: &str,
        exported_only: bool,
        depth: u32,
    ) -> Vec<Val> {
        let imports = &self.files[fi].facts.imports;
        self.part(fi)
            .imports
            .get(name)
            .into_iter()
            .flatten()
            .filter(|(ii, scope)| *scope == u && (!exported_only || imports[*ii].exported))
            .flat_map(|(ii, _)| {
                let i = &imports[*ii];
                self.import_target(fi, &i.module, i.name.as_deref(), depth)
            })
            .collect()
    }

    /// A Rust module value (a module path or a `mod` unit).
    fn is_rust_module(&self, v: &Val) -> bool {
        match v {
            Val::RMod(..) => true,
            Val::Class(c) => {
                self.syms[*c].node_type == NodeType::Module
                    && self.files[self.syms[*c].file].language == Language::Rust
            }
            _ => false,
        }
    }

    fn as_val(&self, s: usize) -> Val {
        let t = self.syms[s].node_type;
        if is_classlike(t) || t == NodeType::Module {
            Val::Class(s)
        } else {
            Val::Func(s)
        }
    }

    fn enclosing_class(&self, cx: &Ctx) -> Option<usize> {
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

    /// A name in lexical scope at `cx`.
    fn lookup(&self, cx: &Ctx, name: &str, depth: u32) -> (Vec<Val>, How) {
        self.lookup_in(cx, name, depth, false)
    }

    /// [`World::lookup`]; `past_locals`: a Rust path's head, which no local
    /// value binding names (type bindings, generic parameters, still do).
    fn lookup_in(&self, cx: &Ctx, name: &str, depth: u32, past_locals: bool) -> (Vec<Val>, How) {
        if depth > MAX_DEPTH {
            return (Vec::new(), How::None);
        }
        let fi = cx.file;
        let lang = self.files[fi].language;
        let facts = &self.files[fi].facts;
        let part = self.part(fi);
        let mut cur = Some(cx.scope);
        let mut first = true;
        while let Some(u) = cur {
            let us = &self.syms[u];
            // Class bodies are no scope for the functions inside them (Python, TS, Rust impls).
            let class_scope = is_classlike(us.node_type) || us.node_type == NodeType::Impl;
            // Rust `impl<T: Trait>` / `where T: Trait`: type parameters are
            // bindings of the impl that its methods see (its methods are not).
            let impl_params = lang == Language::Rust && us.node_type == NodeType::Impl;
            if impl_params && !first {
                for &bi in part.by_name.get(name).into_iter().flatten() {
                    let b = &facts.bindings[bi];
                    if part.scopes[bi] == u && b.is_type {
                        let bcx = Ctx {
                            file: fi,
                            byte: b.byte,
                            scope: u,
                        };
                        let vals = self.eval_type(&bcx, &b.expr, depth + 1);
                        if !vals.is_empty() {
                            return (vals, How::Inferred);
                        }
                    }
                }
            }
            if !class_scope || first {
                // Local bindings of this scope: the last one before the site, else any.
                let mut best: Option<usize> = None;
                for &bi in part.by_name.get(name).into_iter().flatten() {
                    let b = &facts.bindings[bi];
                    if past_locals && !b.is_type {
                        continue;
                    }
                    // Rust locals exist only after their `let`; elsewhere a
                    // later binding stands in when none comes before.
                    let visible = b.byte <= cx.byte || (best.is_none() && lang != Language::Rust);
                    if part.scopes[bi] == u && visible {
                        best = Some(bi);
                    }
                }
                if let Some(bi) = best {
                    let b = &facts.bindings[bi];
                    // The value is read where the binding starts, before it
                    // exists: `let value = value(x)` calls the outer `value`.
                    let bcx = Ctx {
                        file: fi,
                        byte: b.byte.saturating_sub(1),
                        scope: u,
                    };
                    let vals = if b.is_type {
                        self.eval_type(&bcx, &b.expr, depth + 1)
                    } else if let Some(p) = b.expr.strip_prefix(PARAM_VALUE) {
                        self.fixture(fi, p, depth + 1)
                    } else if b.expr != name {
                        self.eval(&bcx, &b.expr, depth + 1)
                    } else {
                        Vec::new()
                    };
                    if !vals.is_empty() {
                        return (vals, How::Inferred);
                    }
                    // A local whose value is unknown shadows outer names.
                    if b.byte <= cx.byte && us.node_type != NodeType::File {
                        return (Vec::new(), How::None);
                    }
                }
                // Nested definitions (Rust: never the items of an `impl` or
                // trait body, which are reached through `Self::` / a value).
                let rust_body = lang == Language::Rust && class_scope;
                let defs: Vec<usize> = self
                    .named_children(u, name)
                    .iter()
                    .copied()
                    .filter(|_| !rust_body)
                    .filter(|&c| {
                        let s = &self.syms[c];
                        s.name == name
                            && s.node_type.is_symbol()
                            && s.node_type != NodeType::Impl
                            && !(lang == Language::Go && s.node_type == NodeType::Method)
                    })
                    .collect();
                // Rust: `mod value;` beside `use …::value` (a function): two
                // namespaces; both are meant and the use site picks.
                let only_modules = lang == Language::Rust
                    && !defs.is_empty()
                    && defs
                        .iter()
                        .all(|&d| self.syms[d].node_type == NodeType::Module);
                if only_modules {
                    let mut vals: Vec<Val> = defs.iter().map(|&d| self.as_val(d)).collect();
                    vals.extend(self.scope_imports(fi, u, name, false, depth + 1));
                    return (vals, How::Scope);
                }
                if !defs.is_empty() {
                    let defs = if is_ecmascript(lang) && defs.len() > 1 {
                        overload_implementation(&self.syms, defs)
                    } else if lang == Language::Python && defs.len() > 1 {
                        // Redefinitions (`@overload`, conditional defs): the last one before the site.
                        let before: Vec<usize> = defs
                            .iter()
                            .copied()
                            .filter(|&d| self.syms[d].start <= cx.byte)
                            .collect();
                        vec![*before.last().or(defs.last()).unwrap_or(&defs[0])]
                    } else {
                        defs
                    };
                    return (
                        defs.into_iter().map(|d| self.as_val(d)).collect(),
                        How::Scope,
                    );
                }
                // Imports in this scope.
                let vals = self.scope_imports(fi, u, name, false, depth + 1);
                if !vals.is_empty() {
                    return (vals, How::Import);
                }
            }
            first = false;
            cur = self.parent_of(u);
        }
        // The package: Go directories.
        if lang == Language::Go {
            let vals = self.dir_member(dir_of(&self.files[fi].path), name);
            if !vals.is_empty() {
                return (vals, How::Scope);
            }
        }
        // Glob imports.
        for i in facts.imports.iter().filter(|i| i.local == "*") {
            for m in self.import_target(fi, &i.module, None, depth + 1) {
                let vals = self.member(&m, name, depth + 1);
                if !vals.is_empty() {
                    return (vals, How::Import);
                }
            }
        }
        // A library crate of the repository by its name (extern prelude).
        if lang == Language::Rust
            && let Some(src) = self.rust_crates.get(name)
        {
            return (vec![Val::RMod(src.clone(), "crate".into())], How::Import);
        }
        (Vec::new(), How::None)
    }

    /// A pytest fixture a test parameter names: a top-level function of that
    /// name in the test's file or a `conftest.py` above it; its value is what it returns.
    fn fixture(&self, fi: usize, name: &str, depth: u32) -> Vec<Val> {
        let path = &self.files[fi].path;
        if self.files[fi].language != Language::Python {
            return Vec::new();
        }
        let file_name = path.rsplit('/').next().unwrap_or_default();
        let is_test = file_name.starts_with("test_")
            || file_name.ends_with("_test.py")
            || file_name == "conftest.py";
        if !is_test {
            return Vec::new();
        }
        let mut places = vec![fi];
        let mut dir = dir_of(path);
        loop {
            let conftest = if dir.is_empty() {
                "conftest.py".to_string()
            } else {
                format!("{dir}/conftest.py")
            };
            if let Some(&f) = self.file_by_path.get(&conftest) {
                places.push(f);
            }
            if dir.is_empty() {
                break;
            }
            dir = dir_of(dir);
        }
        for f in places {
            let Some(fu) = self.file_unit[f] else {
                continue;
            };
            let found = self.children[fu].iter().copied().find(|&c| {
                let s = &self.syms[c];
                s.name == name && s.node_type == NodeType::Function
            });
            if let Some(fx) = found {
                return self.call_result(&[Val::Func(fx)], depth);
            }
        }
        Vec::new()
    }

    /// Top-level definitions of a file named `name`, then what it imports (re-exports) under that name.
    fn module_member(&self, f: usize, name: &str, depth: u32) -> Vec<Val> {
        if depth > MAX_DEPTH {
            return Vec::new();
        }
        let Some(fu) = self.file_unit[f] else {
            return Vec::new();
        };
        let cx = Ctx {
            file: f,
            byte: self.syms[fu].end.saturating_sub(1),
            scope: fu,
        };
        let file = &self.files[f];
        let mut direct: Vec<usize> = self
            .named_children(fu, name)
            .iter()
            .copied()
            .filter(|&c| {
                let s = &self.syms[c];
                s.name == name
                    && s.node_type.is_symbol()
                    && s.node_type != NodeType::Impl
                    && !(file.language == Language::Go && s.node_type == NodeType::Method)
            })
            .collect();
        if direct.len() > 1 {
            if file.language == Language::Python {
                // Redefinitions: the last one.
                direct = direct.split_off(direct.len() - 1);
            } else if is_ecmascript(file.language) {
                direct = overload_implementation(&self.syms, direct);
            }
        }
        let direct: Vec<Val> = direct.into_iter().map(|d| self.as_val(d)).collect();
        let only_modules = file.language == Language::Rust
            && !direct.is_empty()
            && direct.iter().all(|v| self.is_rust_module(v));
        if !direct.is_empty() && !only_modules {
            return direct;
        }
        let imported = self.scope_imports(f, fu, name, true, depth + 1);
        if only_modules {
            // `mod value;` and `pub use item::value;`: two namespaces, both meant.
            let mut both = direct;
            both.extend(imported);
            return both;
        }
        if !imported.is_empty() {
            return imported;
        }
        if file.language == Language::Python {
            // `pkg/__init__.py`: a submodule.
            if file.path.ends_with("__init__.py") {
                let dir = dir_of(&file.path);
                let sub = format!("{dir}/{name}.py");
                let sub_pkg = format!("{dir}/{name}/__init__.py");
                for p in [sub, sub_pkg] {
                    if let Some(&sf) = self.file_by_path.get(&p) {
                        return vec![Val::File(sf)];
                    }
                }
            }
        }
        let _ = cx;
        for i in file
            .facts
            .imports
            .iter()
            .filter(|i| i.local == "*" && i.exported)
        {
            for m in self.import_target(f, &i.module, None, depth + 1) {
                if m == Val::File(f) {
                    continue;
                }
                let vals = self.member(&m, name, depth + 1);
                if !vals.is_empty() {
                    return vals;
                }
            }
        }
        Vec::new()
    }

    fn dir_member(&self, dir: &str, name: &str) -> Vec<Val> {
        let mut out = Vec::new();
        for &f in self.go_dirs.get(dir).into_iter().flatten() {
            let Some(fu) = self.file_unit[f] else {
                continue;
            };
            for &c in self.named_children(fu, name) {
                let s = &self.syms[c];
                if s.node_type.is_symbol() && s.node_type != NodeType::Method {
                    out.push(self.as_val(c));
                }
            }
            // Types whose methods hang under them are children too; types themselves are top level.
        }
        out
    }

    fn py_module(&self, key: &str) -> Option<Val> {
        match self.py_modules.get(key) {
            Some(files) => {
                // The shortest path: `click/core.py` over `tests/click/core.py` is not decidable; prefer
                // the one whose full dotted path equals the key, else the first.
                let best = files
                    .iter()
                    .copied()
                    .min_by_key(|&f| self.files[f].path.len())?;
                Some(Val::File(best))
            }
            None => None,
        }
    }

    /// What an import of `module` (and `name` inside it) binds, from file `fi`.
    fn import_target(&self, fi: usize, module: &str, name: Option<&str>, depth: u32) -> Vec<Val> {
        if depth > MAX_DEPTH {
            return Vec::new();
        }
        // Memoised: glob imports and re-export chains are walked for many names.
        let key = (fi, module.to_string(), name.map(str::to_string));
        // A result computed with at least this much depth budget left is as complete.
        if let Some((d, v)) = self
            .import_cache
            .read()
            .ok()
            .and_then(|c| c.get(&key).cloned())
            && d <= depth
        {
            return v;
        }
        let v = self.import_target_uncached(fi, module, name, depth);
        if let Ok(mut c) = self.import_cache.write() {
            c.insert(key, (depth, v.clone()));
        }
        v
    }

    fn import_target_uncached(
        &self,
        fi: usize,
        module: &str,
        name: Option<&str>,
        depth: u32,
    ) -> Vec<Val> {
        let file = &self.files[fi];
        let m: Option<Val> = match file.language {
            Language::Python => {
                let key = python::resolve_relative(&file.path, module)
                    .unwrap_or_else(|| module.to_string());
                self.py_module(&key).or_else(|| {
                    // A package directory without `__init__.py` still holds submodules.
                    let prefix = format!("{key}.");
                    self.py_modules
                        .keys()
                        .any(|k| k.starts_with(&prefix))
                        .then_some(Val::PyMod(key))
                })
            }
            Language::JavaScript | Language::TypeScript | Language::Tsx => {
                ecmascript::resolve_module(&file.path, module, &|p| {
                    self.file_by_path.contains_key(p)
                })
                .and_then(|p| self.file_by_path.get(&p).map(|&f| Val::File(f)))
            }
            Language::Go => {
                let mut best: Option<&String> = None;
                for d in self.go_dirs.keys() {
                    let matches = module == d
                        || (module.ends_with(d.as_str())
                            && module.as_bytes().get(module.len() - d.len() - 1) == Some(&b'/'))
                        || (d.is_empty() && !module.contains('.'));
                    if matches && !d.is_empty() && best.is_none_or(|b| d.len() > b.len()) {
                        best = Some(d);
                    }
                }
                best.map(|d| Val::Dir(d.clone()))
            }
            Language::Rust => {
                // `use a::b::C`: evaluate the path as a module path from this file.
                let cx = Ctx {
                    file: fi,
                    byte: 0,
                    scope: self.file_unit[fi].unwrap_or(0),
                };
                let first = module.split('.').next().unwrap_or_default();
                let vals = if module.is_empty() {
                    Vec::new()
                } else if matches!(first, "crate" | "self" | "super" | "self_mod") {
                    self.eval_path(&cx, module, depth + 1, false)
                } else {
                    // 2018 paths: a crate-local module (`use parser::x` inside the crate root), else external.
                    let (root, cur) = self.rust_mod[fi].clone();
                    let local = format!("{cur}.{module}");
                    let from_root = format!("crate.{module}");
                    if self
                        .rust_modules
                        .contains_key(&(root.clone(), local.clone()))
                    {
                        vec![Val::RMod(root, local)]
                    } else if self
                        .rust_modules
                        .contains_key(&(root.clone(), from_root.clone()))
                        && cur == "crate"
                    {
                        vec![Val::RMod(root, from_root)]
                    } else {
                        // A name in scope (an enum, a type, an inline module).
                        let head = module.split('.').next().unwrap_or_default();
                        if self.syms.is_empty() || head.is_empty() {
                            Vec::new()
                        } else {
                            let (hv, _) = self.lookup(&cx, head, depth + 1);
                            let mut vals = hv;
                            for seg in module.split('.').skip(1) {
                                let mut next = Vec::new();
                                for v in &vals {
                                    next.extend(self.member(v, seg, depth + 1));
                                }
                                vals = next;
                            }
                            vals
                        }
                    }
                };
                match name {
                    None => return vals,
                    Some(n) => {
                        let mut out = Vec::new();
                        for v in &vals {
                            out.extend(self.member(v, n, depth + 1));
                        }
                        return out;
                    }
                }
            }
            _ => None,
        };
        let Some(m) = m else {
            return Vec::new();
        };
        match name {
            None => vec![m],
            Some("default") => Vec::new(),
            Some(n) => self.member(&m, n, depth + 1),
        }
    }
}

fn is_ecmascript(l: Language) -> bool {
    matches!(
        l,
        Language::JavaScript | Language::TypeScript | Language::Tsx
    )
}

/// TypeScript overloads: signatures, then the implementation, all functions
/// of one kind and name in one file; a use means the implementation (the
/// last). Anything else (a class and a namespace of one name…) stays as it is.
fn overload_implementation(syms: &[SymRow], defs: Vec<usize>) -> Vec<usize> {
    let first = &syms[defs[0]];
    let overloads = defs.iter().all(|&d| {
        let s = &syms[d];
        s.node_type == first.node_type && is_function(s.node_type) && s.file == first.file
    });
    if !overloads {
        return defs;
    }
    defs.into_iter()
        .max_by_key(|&d| syms[d].start)
        .into_iter()
        .collect()
}

fn same_family(a: Language, b: Language) -> bool {
    let fam = |l: Language| match l {
        Language::JavaScript | Language::TypeScript | Language::Tsx => 1,
        other => other as u8 + 10,
    };
    fam(a) == fam(b)
}

fn dir_of(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(d, _)| d)
}

/// Where an expression is evaluated: a file, a byte in it, the innermost unit there.
struct Ctx {
    file: usize,
    byte: u32,
    scope: usize,
}
