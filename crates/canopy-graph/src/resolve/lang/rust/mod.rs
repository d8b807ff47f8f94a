//! Rust's resolution rules: modules named by their paths inside a crate
//! (`crate`, `self`, `super`, `mod key;` files, `use` paths, the extern
//! prelude of the repository's library crates from Cargo), two namespaces
//! (a call means the function, not the module of its name), methods of
//! `impl` blocks anywhere in the crate, traits (qualified and fully
//! qualified calls, inherent methods before trait methods, `Deref`),
//! locals visible only after their `let`, and guesses by unique name only
//! within Cargo's reach.

mod build_script;
pub(crate) mod cargo;
mod features;
mod std_impls;
mod traits;

use foldhash::{HashMap, HashMapExt};

pub use cargo::{Cargo, Package};

use super::{Among, Conventions, Family, LanguageRules};
use crate::facts::compact::WorldFacts;
use crate::facts::model::{DefFactKind, LITERAL, PATH_HEAD, SiteKind, TRAIT_HINT, UFCS_SEP};
use crate::facts::rust::{ADAPTERS, CfgEnv, PASSTHROUGH, holds_in};
use crate::lang::NodeType;
use crate::resolve::eval::{Ctx, ModulePath, Val};
use crate::resolve::ids::{BindingIdx, FileIdx, Idx, SymId, Table};
use crate::resolve::world::{World, WorldFile, is_function};
use crate::store::graph_rows::{How, SymRow};

/// Rust's primitive types, which a repository can give trait methods
/// (`impl Float for f32`) but never define.
const PRIMITIVES: &[&str] = &[
    "bool", "char", "str", "f32", "f64", "i8", "i16", "i32", "i64", "i128", "isize", "u8", "u16",
    "u32", "u64", "u128", "usize",
];

/// The one of several functions (`from` of several `From` impls) whose
/// first parameter's type is the type of `arg` (evaluated at `cx`), if
/// exactly one is.
///
/// A literal (`#lit:str`, see [`LITERAL`]; `vec![…]` and `x.to_vec()`
/// are `Vec`, `&b"…"[..]` is `[u8]`), a local bound to one, or a local
/// whose type is written as a builtin's (`s: String`), is matched with the
/// parameter's type as written (`&'b str` is `str`; `int` any integer
/// type); `v.clone()` is `v`.
fn by_first_argument(w: &World, cx: &Ctx, found: &[SymId], arg: &str) -> Option<SymId> {
    // Nothing to choose from: no need to evaluate the argument (most
    // path calls into std have no impl of their type in the repository).
    if arg.is_empty() || found.is_empty() {
        return None;
    }
    let one = |matching: Vec<SymId>| match matching.as_slice() {
        &[one] => Some(one),
        _ => None,
    };
    // `v.clone()` is a `v` of the same type.
    let arg = arg.strip_suffix(".clone()").unwrap_or(arg);
    let written = match arg.strip_prefix(LITERAL) {
        Some(lit) => Some(lit),
        None if arg.chars().all(|c| c.is_alphanumeric() || c == '_') => {
            w.binding_expr(cx, arg)
                .and_then(|e| match e.strip_prefix(LITERAL) {
                    // `let v = vec![…]`: a local bound to a literal.
                    Some(lit) => Some(lit),
                    None => w.rules_of(cx.file).builtin_type(w, cx.file, e).then_some(e),
                })
        }
        None => None,
    };
    if let Some(written) = written {
        return one(found
            .iter()
            .copied()
            .filter(|&f| first_parameter(w, f).is_some_and(|(_, t)| same_written_type(written, t)))
            .collect());
    }
    let arg_types: Vec<SymId> = w
        .eval(cx, arg, 0)
        .into_iter()
        .filter_map(|v| match v {
            Val::Inst(t) => Some(t),
            _ => None,
        })
        .collect();
    if arg_types.is_empty() {
        return None;
    }
    one(found
        .iter()
        .copied()
        .filter(|&f| {
            first_parameter_types(w, f)
                .iter()
                .any(|t| arg_types.contains(t))
        })
        .collect())
}

/// `Trait::name(x, …)` through the trait's path: the method `name` of the
/// trait's impl for `x`'s type when exactly one defines it, as Rust calls
/// it (`impl DiffableStr for str` for `DiffableStr::tokenize_lines("a")`:
/// a `str`, `char` or `bool` literal picks the impl named after its
/// primitive; another value, its type's impls of the trait). `None` when
/// none or several do, or a number literal (its type is not known).
fn impl_for_first_argument(
    w: &World,
    cx: &Ctx,
    path: &str,
    name: &str,
    first_arg: &str,
) -> Option<SymId> {
    if first_arg.is_empty() {
        return None;
    }
    let tr = path.rsplit('.').next().unwrap_or(path);
    let tr = tr.trim_end_matches(PATH_HEAD);
    let mut found: Vec<SymId> = match first_arg.strip_prefix(LITERAL) {
        Some(lit @ ("str" | "char" | "bool")) => w
            .impl_traits
            .get(lit)
            .into_iter()
            .flatten()
            .filter(|(i, _)| traits::impl_trait_is(w, *i, tr))
            .flat_map(|(i, _)| w.named_children(*i, name).iter().copied())
            .filter(|&m| is_function(w.syms[m].node_type))
            .collect(),
        Some(_) => return None,
        None => traits::trait_methods(w, cx, first_arg, name, tr),
    };
    found.sort_unstable();
    found.dedup();
    match found.as_slice() {
        &[one] => Some(one),
        _ => None,
    }
}

/// Whether an argument of type `arg` (as written, or a literal's kind:
/// `int`, `float`) fits a parameter of type `param` as written.
fn same_written_type(arg: &str, param: &str) -> bool {
    const INTS: &[&str] = &[
        "i8", "i16", "i32", "i64", "i128", "isize", "u8", "u16", "u32", "u64", "u128", "usize",
    ];
    match arg {
        "int" => INTS.contains(&param),
        "float" => matches!(param, "f32" | "f64"),
        _ => arg == param,
    }
}

/// Function `f`'s first typed parameter (not `self`): its first type
/// binding, by position, whose name is no type parameter's; with the
/// place it is read at and its type as written.
fn first_parameter(w: &World, f: SymId) -> Option<(Ctx, &str)> {
    let fs = &w.syms[f];
    if !is_function(fs.node_type) {
        return None;
    }
    let facts = w.files[fs.file].facts.get();
    let part = w.part(fs.file);
    let (_, b) = facts
        .bindings
        .iter()
        .enumerate()
        .filter(|&(bi, b)| {
            part.scopes[BindingIdx::at(bi)] == f
                && b.is_type
                && !b.field
                && facts
                    .s(b.name)
                    .starts_with(|c: char| c.is_lowercase() || c == '_')
                // Not the items of a collection parameter (`v#elem` of `v: Vec<u8>`).
                && !facts.s(b.name).contains('#')
        })
        .min_by_key(|(_, b)| b.byte)?;
    let at = Ctx {
        file: fs.file,
        byte: b.byte,
        scope: f,
    };
    Some((at, facts.s(b.expr)))
}

/// The types function `f`'s first typed parameter has ([`first_parameter`]).
fn first_parameter_types(w: &World, f: SymId) -> Vec<SymId> {
    let Some((at, e)) = first_parameter(w, f) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    w.type_units(&at, e, 1, &mut out);
    out
}

/// Methods of the standard library's everyday types (`str`, `String`,
/// slices and `Vec`, `Option` and `Result`, the numbers) and of the traits
/// every type meets (`Clone`, `ToOwned`, `AsRef`, `Hash`, `Iterator`),
/// sorted for a binary search: a call of one on a receiver of unknown type
/// is as likely the standard library's, so it is never guessed to be the
/// repository's one method of that name ([`LanguageRules::builtin_method`];
/// `s.is_empty()`, `p.starts_with("/")`, `x.to_owned()`, `v.as_ref()`).
#[rustfmt::skip] // a word list, kept compact
const STD_METHODS: &[&str] = &[
    "abs", "all", "and_then", "any", "as_bytes", "as_deref", "as_mut", "as_mut_str", "as_ptr",
    "as_ref", "as_str", "binary_search", "borrow", "borrow_mut", "bytes", "capacity", "chain",
    "char_indices", "chars", "checked_add", "checked_mul", "checked_sub", "chunks", "clear",
    "clone", "cloned", "cmp", "collect", "concat", "contains", "copied", "copy_from_slice",
    "count", "count_ones", "dedup", "drain", "ends_with", "enumerate", "eq",
    "eq_ignore_ascii_case", "expect", "extend", "extend_from_slice", "filter", "filter_map",
    "find", "finish", "first", "first_mut", "flat_map", "fmt", "fold", "for_each", "get",
    "get_mut", "get_or_insert_with", "hash", "insert", "insert_str", "into", "into_bytes",
    "into_owned", "is_char_boundary", "is_empty", "is_err", "is_none", "is_ok", "is_some", "iter",
    "iter_mut", "join", "last", "last_mut", "leading_zeros", "len", "lines", "map", "map_err",
    "matches", "max", "min", "ne", "next", "nth", "ok", "ok_or", "ok_or_else", "or_else", "parse",
    "partial_cmp", "peekable", "pop", "position", "pow", "push", "push_str", "remove", "repeat",
    "replace", "reserve", "retain", "rev", "reverse", "rfind", "rsplit", "saturating_sub", "skip",
    "skip_while", "sort", "sort_by", "sort_by_key", "sort_unstable", "split", "split_at",
    "split_first", "split_last", "split_once", "split_whitespace", "splitn", "starts_with",
    "step_by", "strip_prefix", "strip_suffix", "sum", "swap", "take", "take_while",
    "to_ascii_lowercase", "to_ascii_uppercase", "to_be_bytes", "to_bits", "to_le_bytes",
    "to_lowercase", "to_owned", "to_string", "to_uppercase", "to_vec", "trailing_zeros", "trim",
    "trim_end", "trim_matches", "trim_start", "truncate", "try_into", "unwrap", "unwrap_err",
    "unwrap_or", "unwrap_or_default", "unwrap_or_else", "windows", "wrapping_add", "zip",
];

/// Rust's differences as data.
pub(crate) const CONVENTIONS: Conventions = Conventions {
    facts_read_by_every_pass: true,
    import_sites_name_their_module: false,
    modules_apart_from_values: true,
    variables_are_module_members: false,
    definitions_rebind_names: false,
    methods_declared_apart: true,
    impl_methods_follow_type: true,
    fields_on_impl_type: true,
    fields_before_methods: true,
    declared_fields_hide_methods: true,
    locals_visible_before_binding: false,
    items_of_type_bodies_in_scope: false,
    methods_in_scope: true,
    functions_in_values_in_scope: true,
    call_bindings: false,
    value_unions_are_each: false,
    awaited_types: &[],
    item_methods: ITEM_METHODS,
    key_methods: &["key", "key_mut", "into_key"],
    value_methods: &[
        "get",
        "get_mut",
        "remove",
        "swap_remove",
        "shift_remove",
        "insert",
    ],
    entry_value_methods: &[
        "or_insert",
        "or_insert_with",
        "or_insert_with_key",
        "or_default",
    ],
    // `Meter(3)` builds a tuple struct: the edge to the type stays a call.
    calls_of_types_convert: false,
    path_builds: Conventions::NEUTRAL.path_builds,
};

/// Collection methods that give back (a reference to, an `Option` of) an
/// item; of a map's entry, its value.
pub(crate) const ITEM_METHODS: &[&str] = &[
    "first",
    "last",
    "get",
    "get_mut",
    "first_mut",
    "last_mut",
    "remove",
    "swap_remove",
    "pop",
    "pop_front",
    "pop_back",
    "front",
    "back",
    "front_mut",
    "back_mut",
    // A map entry's value (`OccupiedEntry`, `VacantEntry`).
    "into_mut",
    "insert",
    "shift_remove",
    // An iterator's next item (`out.next()` of `let mut out =
    // docs.into_iter()`): what the walked collection holds.
    "next",
    "next_back",
    "nth",
    "peek",
];

/// The inline `mod m { … }` units around scope `u` (itself included),
/// innermost first, up to the file's unit.
fn inline_modules(w: &World, u: SymId) -> Vec<SymId> {
    let mut out = Vec::new();
    let mut cur = Some(u);
    while let Some(c) = cur {
        let s = &w.syms[c];
        if s.node_type == NodeType::File {
            break;
        }
        if s.node_type == NodeType::Module {
            out.push(c);
        }
        cur = w.parent_of(c);
    }
    out
}

/// The module path of a file (`src/lib.rs` → `crate`, `src/a/b.rs` and
/// `src/a/b/mod.rs` → `crate.a.b`), relative to its crate's `src/`.
/// Integration tests, examples and benches are crates of one file each
/// (`tests/a.rs` → `crate`), whose `mod util;` is `tests/util/mod.rs` or
/// `tests/util.rs` (`crate.util`, shared by the files that declare it).
pub(crate) fn module_path(path: &str) -> (String, String) {
    let segment_at = |name: &str| {
        path.rfind(name)
            .filter(|&i| i == 0 || path.as_bytes()[i - 1] == b'/')
    };
    if let Some(i) = segment_at("src/") {
        let (root, rel) = (&path[..i + 4], &path[i + 4..]);
        return (root.to_string(), module_of(rel, &["lib", "main"]));
    }
    if let Some(i) = ["tests/", "examples/", "benches/"]
        .iter()
        .filter_map(|d| segment_at(d).map(|i| i + d.len()))
        .max()
    {
        let (root, rel) = (&path[..i], &path[i..]);
        let module = if rel.contains('/') {
            module_of(rel, &[])
        } else {
            "crate".to_string()
        };
        return (root.to_string(), module);
    }
    let (root, rel) = match path.rfind('/') {
        Some(i) => (&path[..i + 1], &path[i + 1..]),
        None => ("", path),
    };
    (root.to_string(), module_of(rel, &["lib", "main"]))
}

/// `a/b.rs`, `a/b/mod.rs` → `crate.a.b`; a `roots` stem → `crate`.
fn module_of(rel: &str, roots: &[&str]) -> String {
    let stem = rel.strip_suffix(".rs").unwrap_or(rel);
    let stem = stem.strip_suffix("/mod").unwrap_or(stem);
    if roots.contains(&stem) {
        "crate".to_string()
    } else {
        format!("crate.{}", stem.replace('/', "."))
    }
}

/// `#[path = "P"] mod name;` in file `F` (module `m` of crate root `r`):
/// `m::name` is the file at `P`, relative to `F`'s folder. A file of the
/// same crate root is that module only (serde_json's `tests/lexical.rs`
/// has `#[path = "lexical/math.rs"] mod math;`: `tests/lexical/math.rs` is
/// `crate::math` of that test, not `crate::lexical::math`); a file of
/// another crate keeps its own module and is also reached as `m::name`
/// (`#[path = "../src/lexical/mod.rs"] mod lexical;`: the library's
/// module, whose own `mod x;` files are the library's).
fn path_modules(
    files: &Table<FileIdx, WorldFile>,
    file_modules: &mut Table<FileIdx, (String, String)>,
    modules: &mut HashMap<(String, String), FileIdx>,
) {
    let mut by_path: Option<HashMap<&str, FileIdx>> = None;
    for (fi, f) in files.iter() {
        if f.family != Family::Rust {
            continue;
        }
        let facts = f.facts.get();
        for d in facts
            .defs
            .iter()
            .filter(|d| d.what == DefFactKind::ModulePath)
        {
            let dir = f.path.rfind('/').map_or("", |i| &f.path[..i]);
            let Some(target) = joined_path(dir, facts.s(d.expr)) else {
                continue;
            };
            let by_path = by_path.get_or_insert_with(|| {
                files
                    .iter()
                    .filter(|(_, f)| f.family == Family::Rust)
                    .map(|(i, f)| (f.path.as_str(), i))
                    .collect()
            });
            let Some(&g) = by_path.get(target.as_str()) else {
                continue;
            };
            let (root, m) = file_modules[fi].clone();
            let key = (root.clone(), format!("{m}.{}", facts.s(d.name)));
            if file_modules[g].0 == root {
                let old = std::mem::replace(&mut file_modules[g], key.clone());
                if modules.get(&old) == Some(&g) {
                    modules.remove(&old);
                }
            }
            modules.insert(key, g);
        }
    }
}

/// `dir/rel` with `.` and `..` segments applied; `None` when `rel`
/// climbs above the repository.
fn joined_path(dir: &str, rel: &str) -> Option<String> {
    let mut segs: Vec<&str> = dir.split('/').filter(|s| !s.is_empty()).collect();
    for seg in rel.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                segs.pop()?;
            }
            s => segs.push(s),
        }
    }
    Some(segs.join("/"))
}

/// Rust's rules and the modules and crates of a pass.
pub(crate) struct Rust {
    /// Per file: (crate root, module path) ([`module_path`]; empty for
    /// files of other languages).
    file_modules: Table<FileIdx, (String, String)>,
    /// (crate root, module path) → the file that is that module (the last
    /// of several).
    modules: HashMap<(String, String), FileIdx>,
    /// Crate roots that share a folder's `crate` module, best first: a
    /// package's `src/lib.rs` before its `src/main.rs`, and the one-file
    /// crates of `tests/`, `examples/` and `benches/` (a module below them,
    /// `tests/suite/mod.rs`, belongs to whichever declares `mod suite;`,
    /// which the path alone cannot tell). Only keys with several files.
    shared_roots: HashMap<String, Vec<FileIdx>>,
    /// The library crates by name → their `src/` folder ([`Cargo::crates`]).
    crates: HashMap<String, String>,
    /// The Cargo packages ([`Cargo::packages`]).
    packages: Vec<Package>,
}

impl Rust {
    /// The rules, with the module paths of the world's Rust files and the
    /// repository's Cargo side.
    pub(crate) fn new(files: &Table<FileIdx, WorldFile>, cargo: Cargo) -> Rust {
        let mut file_modules: Table<FileIdx, (String, String)> = Table::new(
            files
                .rows()
                .iter()
                .map(|f| {
                    if f.family == Family::Rust {
                        module_path(&f.path)
                    } else {
                        Default::default()
                    }
                })
                .collect(),
        );
        let mut modules = HashMap::new();
        let mut roots: HashMap<String, Vec<FileIdx>> = HashMap::new();
        for (fi, f) in files.iter() {
            if f.family == Family::Rust {
                let key = file_modules[fi].clone();
                if key.1 == "crate" {
                    roots.entry(key.0.clone()).or_default().push(fi);
                }
                modules.insert(key, fi);
            }
        }
        path_modules(files, &mut file_modules, &mut modules);
        roots.retain(|_, fs| fs.len() > 1);
        for fs in roots.values_mut() {
            // A library root first: `crate::x` in `src/a.rs` and
            // `my_crate::x` elsewhere mean the library, not the binary.
            fs.sort_by_key(|&fi| {
                (
                    !files[fi].path.ends_with("/lib.rs") && files[fi].path != "lib.rs",
                    fi,
                )
            });
        }
        Rust {
            file_modules,
            modules,
            shared_roots: roots,
            crates: cargo.crates.into_iter().collect(),
            packages: cargo.packages,
        }
    }

    /// A module path of crate `root` as a value.
    fn module(root: &str, path: &str) -> Val {
        Val::Module(ModulePath {
            family: Family::Rust,
            root: root.to_string(),
            path: path.to_string(),
        })
    }

    /// Whether crate `root` has module `path` in a file of its own.
    fn has_module(&self, root: &str, path: &str) -> bool {
        self.modules
            .contains_key(&(root.to_string(), path.to_string()))
    }

    /// The Cargo package a file belongs to: the one whose folder is the
    /// longest prefix of its path.
    fn package(&self, w: &World, fi: FileIdx) -> Option<&Package> {
        let path = &w.files[fi].path;
        self.packages
            .iter()
            .filter(|p| path.starts_with(&p.dir))
            .max_by_key(|p| p.dir.len())
    }

    /// The units a Rust path names as a user of its crate would write it
    /// (`tokio::spawn`: the library crate the repository's `Cargo.toml`
    /// names `tokio`, then its members, following `pub use` re-exports the
    /// way `use tokio::spawn` does). Empty when the first segment is no
    /// library crate of the repository.
    pub(crate) fn path_units(&self, w: &World, segments: &[&str]) -> Vec<i64> {
        let Some((first, rest)) = segments.split_first() else {
            return Vec::new();
        };
        let Some(src) = self.crates.get(*first) else {
            return Vec::new();
        };
        let mut vals = vec![Rust::module(src, "crate")];
        for seg in rest {
            vals = vals.iter().flat_map(|v| w.member(v, seg, 1)).collect();
        }
        let mut ids: Vec<i64> = vals
            .iter()
            .filter_map(|v| match v {
                Val::Class(i) | Val::Func(i) => Some(w.syms[*i].id),
                _ => None,
            })
            .collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    /// `use a::b` for a path that starts with no `crate` / `self` /
    /// `super`: a module of this crate (2018 paths: beside the current
    /// module, or from the root inside the crate root), else a name in
    /// scope (an enum, a type, an inline module) and its members.
    fn use_path(&self, w: &World, cx: &Ctx, fi: FileIdx, module: &str, depth: u32) -> Vec<Val> {
        let (root, cur) = &self.file_modules[fi];
        let local = format!("{cur}.{module}");
        let from_root = format!("crate.{module}");
        if self.has_module(root, &local) {
            return vec![Rust::module(root, &local)];
        }
        if self.has_module(root, &from_root) && cur == "crate" {
            return vec![Rust::module(root, &from_root)];
        }
        let head = module.split('.').next().unwrap_or_default();
        if w.syms.is_empty() || head.is_empty() {
            return Vec::new();
        }
        let (mut vals, _) = w.lookup(cx, head, depth + 1);
        // A `use` path's head is in the type namespace (a crate, module,
        // type or trait): `fn indexmap()` in a test does not hide the
        // crate of `use indexmap::IndexMap`.
        vals.retain(|v| matches!(v, Val::Class(_) | Val::File(_) | Val::Module(_)));
        if vals.is_empty() {
            vals.extend(self.prelude(head));
        }
        for seg in module.split('.').skip(1) {
            let mut next = Vec::new();
            for v in &vals {
                next.extend(w.member(v, seg, depth + 1));
            }
            vals = next;
        }
        vals
    }

    /// `name` in the `crate` module of a folder several crate roots share
    /// ([`Rust::shared_roots`]): under `src/`, the library's member if it
    /// has one, else the binary's; under `tests/` (and examples, benches),
    /// the member of every root that has it (a name two test crates both
    /// define stays ambiguous rather than guessed).
    fn shared_root_member(
        &self,
        w: &World,
        root: &str,
        roots: &[FileIdx],
        name: &str,
        depth: u32,
    ) -> Vec<Val> {
        let has_sub = self.has_module(root, &format!("crate.{name}"));
        let mut out = Vec::new();
        for &f in roots {
            let found: Vec<Val> = w
                .module_member(f, name, depth)
                .into_iter()
                .filter(|v| !(has_sub && w.is_module_value(v)))
                .collect();
            if found.is_empty() {
                continue;
            }
            out.extend(found);
            if root.ends_with("src/") || root.is_empty() {
                break;
            }
        }
        out
    }
}

impl LanguageRules for Rust {
    fn builtin_method(&self, name: &str) -> bool {
        STD_METHODS.binary_search(&name).is_ok()
    }

    fn builtin_type(&self, w: &World, fi: FileIdx, e: &str) -> bool {
        std_impls::builtin_type(w, fi, e)
    }

    fn method_scope(&self, _w: &World, fi: FileIdx) -> String {
        self.file_modules[fi].0.clone()
    }

    /// A function or associated type of an `impl T` block belongs to `T`.
    fn method_owner(&self, sym: &SymRow, parent: Option<&SymRow>) -> Option<String> {
        if !(is_function(sym.node_type) || sym.node_type == NodeType::TypeAlias) {
            return None;
        }
        parent
            .filter(|p| p.node_type == NodeType::Impl)
            .map(|p| p.name.clone())
    }

    fn head(
        &self,
        w: &World,
        cx: &Ctx,
        head: &str,
        _called: bool,
        value: bool,
    ) -> Option<Vec<Val>> {
        let (root, module) = &self.file_modules[cx.file];
        Some(match head {
            "self" if value => w.enclosing_class_as(cx, |c| Val::Inst(w.type_of_impl(c))),
            "Self" => w.enclosing_class_as(cx, |c| Val::Class(w.type_of_impl(c))),
            "crate" => {
                if module == "crate" && !root.ends_with("src/") && !root.is_empty() {
                    // A one-file crate (an integration test, an example):
                    // its siblings are other crates.
                    vec![Val::File(cx.file)]
                } else {
                    vec![Rust::module(root, "crate")]
                }
            }
            // Inside an inline `mod m { … }`, `self::` is `m` and `super::`
            // the module around it.
            "self_mod" | "self" => match inline_modules(w, cx.scope).first() {
                Some(&m) => vec![Val::Class(m)],
                None => vec![Rust::module(root, module)],
            },
            "super" => match inline_modules(w, cx.scope)[..] {
                [] => match module.rsplit_once('.') {
                    Some((parent, _)) => vec![Rust::module(root, parent)],
                    None => Vec::new(),
                },
                [_] => vec![Rust::module(root, module)],
                [_, outer, ..] => vec![Val::Class(outer)],
            },
            _ => return None,
        })
    }

    fn is_self_receiver(&self, first: &str) -> bool {
        first == "self" || first == "Self"
    }

    /// `T~Trait` (`<T as Trait>::name`): the trait's method on `T`, else
    /// `T`'s. `Trait|x` (`Trait::name(x, …)`): the path's `name`, else,
    /// when the path is not in the repository, `x`'s impls of the trait.
    fn qualified_receiver(
        &self,
        w: &World,
        cx: &Ctx,
        name: &str,
        r: &str,
        kind: SiteKind,
    ) -> Option<(Vec<SymId>, How)> {
        if r.contains(TRAIT_HINT) {
            let (t, tr) = r.split_once(TRAIT_HINT).unwrap_or((r, ""));
            let of_trait = traits::trait_methods(w, cx, t, name, tr);
            return Some(if of_trait.is_empty() {
                w.resolve_site(cx, name, Some(t), kind)
            } else {
                (of_trait, How::Inferred)
            });
        }
        if !r.contains(UFCS_SEP) {
            return None;
        }
        let (path, first_arg) = r.split_once(UFCS_SEP).unwrap_or((r, ""));
        let mut found = w.resolve_site(cx, name, Some(path), kind);
        if !found.0.is_empty()
            && found.0.iter().all(|&f| {
                w.parent_of(f)
                    .is_some_and(|p| w.syms[p].node_type == NodeType::Trait)
            })
            && let Some(one) = impl_for_first_argument(w, cx, path, name, first_arg)
        {
            // `DiffableStr::tokenize_lines("a\nb")`: the trait's method as
            // the impl for the first argument's type defines it.
            return Some((vec![one], How::Inferred));
        }
        if found.1 == How::UniqueName {
            // A path names a module or a type, never a value of unknown
            // type: `mem::replace(slot, v)` through a path the repository
            // does not define is std's, not the repository's one method
            // named `replace`. What is left to try is `first_arg`'s impls
            // of a trait the path names (below).
            found = (Vec::new(), How::None);
        }
        if found.0.len() > 1
            && let Some(one) = by_first_argument(w, cx, &found.0, first_arg)
        {
            // `Deserializer::from(doc)` among `impl From<Document>` and
            // `impl From<DocumentMut>`: the one taking `doc`'s type.
            found.0 = vec![one];
        }
        if !found.0.is_empty() || first_arg.is_empty() || !w.eval(cx, path, 0).is_empty() {
            return Some(found);
        }
        // Only methods of `x`'s impls of the trait the path names
        // (`toml::Span::new(a)` is no method of `a`).
        let tr = path.rsplit('.').next().unwrap_or(path);
        let tr = tr.trim_end_matches(PATH_HEAD);
        // `Vec::from(b)`: a type the repository does not define (std's),
        // with impls of its own there (`impl From<Bytes> for Vec<u8>`):
        // the one whose first parameter takes `b`'s type, if one does.
        let of_impls: Vec<SymId> = w
            .impl_traits
            .get(tr)
            .into_iter()
            .flatten()
            .flat_map(|(i, _)| w.named_children(*i, name).iter().copied())
            .filter(|&m| is_function(w.syms[m].node_type))
            .collect();
        if let Some(one) = by_first_argument(w, cx, &of_impls, first_arg) {
            return Some((vec![one], How::Inferred));
        }
        Some((
            traits::trait_methods(w, cx, first_arg, name, tr),
            How::Inferred,
        ))
    }

    /// Methods of several traits: inside `impl Trait for X`, the same
    /// trait's (`s.end()` in `SerializeStruct::end`).
    fn narrow_methods(&self, w: &World, cx: &Ctx, found: &mut Vec<SymId>) {
        found.sort_unstable();
        found.dedup();
        if let Some(tr) = traits::enclosing_impl_trait(w, cx) {
            let same: Vec<SymId> = found
                .iter()
                .copied()
                .filter(|&m| {
                    w.parent_of(m)
                        .is_some_and(|i| traits::impl_trait_is(w, i, tr))
                })
                .collect();
            if same.len() == 1 {
                *found = same;
            }
        }
    }

    /// A unit whose `cfg` names a key its package's build script sets to
    /// another value (serde_json's `#[cfg(fast_arithmetic = "32")]` twin,
    /// its `build.rs` printing `fast_arithmetic="64"` first): only one twin
    /// of a key the script sets is kept, never both dropped.
    fn built_out(&self, path: &str, facts: &WorldFacts, s: &SymRow) -> bool {
        let mut cfgs = facts
            .defs
            .iter()
            .filter(|d| d.what == DefFactKind::Cfg)
            .peekable();
        if cfgs.peek().is_none() {
            return false;
        }
        let Some(pkg) = self
            .packages
            .iter()
            .filter(|p| path.starts_with(&p.dir))
            .max_by_key(|p| p.dir.len())
        else {
            return false;
        };
        let env = CfgEnv {
            set: &pkg.build_cfgs,
            on: &pkg.build_flags,
            ..CfgEnv::default()
        };
        !pkg.build_cfgs.is_empty()
            && cfgs.any(|d| {
                facts.s(d.name) == s.name
                    && s.start <= d.byte
                    && d.byte <= s.end
                    && holds_in(facts.s(d.expr), &env) == Some(Some(false))
            })
    }

    /// Under a `cfg(feature = …)` its package's default build turns off
    /// ([`features`]).
    fn off_in_default_build(&self, w: &World, s: SymId) -> bool {
        Rust::off_in_default_build(self, w, s)
    }

    /// A method of an `impl` of a trait is no second method beside the
    /// trait's own declaration of it: when every method of a name is the
    /// one trait's or its impls' (slotmap's `Key::data` and the `data` of
    /// each key type `new_key_type!` writes), the trait's stands for them,
    /// as it does for a call on a value bounded by the trait.
    fn drop_copies(&self, w: &World, found: Vec<SymId>) -> Vec<SymId> {
        let in_trait = |m: SymId| {
            w.parent_of(m)
                .filter(|&p| w.syms[p].node_type == NodeType::Trait)
                .map(|p| w.syms[p].name.as_str())
        };
        let decls: Vec<(SymId, &str)> = found
            .iter()
            .filter_map(|&m| Some((m, in_trait(m)?)))
            .collect();
        let &[(decl, tr)] = decls.as_slice() else {
            return found;
        };
        let implements = |m: SymId| {
            w.parent_of(m).is_some_and(|i| {
                w.syms[i].node_type == NodeType::Impl && traits::impl_trait_is(w, i, tr)
            })
        };
        if found.len() > 1 && found.iter().all(|&m| m == decl || implements(m)) {
            vec![decl]
        } else {
            found
        }
    }

    /// Only a method of a package the caller's Cargo package reaches.
    fn may_guess(&self, w: &World, caller: FileIdx, target: FileIdx) -> bool {
        match (self.package(w, caller), self.package(w, target)) {
            (Some(from), Some(to)) => from.reaches(&w.files[caller].path, to),
            _ => true,
        }
    }

    /// An inherent method shadows trait methods of the same name. A name
    /// that is both a function and a `macro_rules!` macro
    /// (`test_parse_err::<bool>(…)` beside `test_parse_err!(…)` in
    /// serde_json's tests): a site looked up by name is never a macro's
    /// invocation (the walker reads a macro's name as no use), so the
    /// function is meant.
    fn choose(&self, w: &World, mut found: Vec<SymId>, among: Among) -> Vec<SymId> {
        if found.len() > 1
            && found
                .iter()
                .any(|&f| w.syms[f].node_type == NodeType::Macro)
            && found
                .iter()
                .any(|&f| w.syms[f].node_type != NodeType::Macro)
        {
            found.retain(|&f| w.syms[f].node_type != NodeType::Macro);
        }
        if !matches!(among, Among::Members) {
            return found;
        }
        let inherent: Vec<SymId> = found
            .iter()
            .copied()
            .filter(|&m| {
                w.parent_of(m)
                    .is_some_and(|p| !traits::impl_has_trait(w, p))
            })
            .collect();
        if inherent.len() == 1 { inherent } else { found }
    }

    /// A repository trait's method on a standard-library type the
    /// receiver holds ([`std_impls`]).
    fn std_type_methods(&self, w: &World, cx: &Ctx, name: &str, r: &str) -> Vec<SymId> {
        std_impls::std_type_methods(w, cx, name, r)
    }

    /// The traits `t` implements in its crate, and through `impl Deref for
    /// T { type Target = U; }` the methods of `U`.
    fn more_bases(&self, w: &World, t: SymId, depth: u32, out: &mut Vec<SymId>) {
        traits::implemented(w, t, depth, out);
    }

    /// `x.unwrap()`, `x.as_ref()`, `x.clone()`: the value itself;
    /// `T::default()` of a derived `Default`: a `T`; `E::Variant(x)` of a
    /// tuple variant (a field `Variant#0` of the enum): an `E`.
    fn passes_payload(&self, name: &str) -> bool {
        PASSTHROUGH.contains(&name)
    }

    fn passes_items(&self, name: &str) -> bool {
        ADAPTERS.contains(&name)
    }

    /// A value whose type the repository defines evaluates to it; one
    /// known only by its items is a `Vec`, a slice, a map or an `Option` of
    /// one.
    fn items_only_of_std(&self) -> bool {
        true
    }

    fn unknown_method(&self, w: &World, name: &str, vals: &[Val]) -> Option<Vec<Val>> {
        if PASSTHROUGH.contains(&name) {
            return Some(vals.to_vec());
        }
        let payload = format!("{name}#0");
        let made: Vec<Val> = vals
            .iter()
            .filter_map(|v| match v {
                Val::Class(c) => Some(w.type_of_impl(*c)),
                _ => None,
            })
            .filter(|&e| {
                w.syms[e].node_type == NodeType::Enum
                    && w.fields_of(e).any(|(n, _, _)| n == payload)
            })
            .map(Val::Inst)
            .collect();
        if !made.is_empty() {
            return Some(made);
        }
        (name == "default").then(|| {
            vals.iter()
                .filter_map(|v| match v {
                    Val::Class(c) => Some(Val::Inst(w.type_of_impl(*c))),
                    _ => None,
                })
                .collect()
        })
    }

    /// `mod key;` (a module unit without a body): the module in its own
    /// file (`key.rs` / `key/mod.rs` beside the declaring module).
    fn declared_module(&self, w: &World, t: SymId) -> Option<Val> {
        let s = &w.syms[t];
        let (root, m) = &self.file_modules[s.file];
        let path = format!("{m}.{}", s.name);
        self.has_module(root, &path)
            .then(|| Rust::module(root, &path))
    }

    fn prelude(&self, name: &str) -> Option<Val> {
        self.crates.get(name).map(|src| Rust::module(src, "crate"))
    }

    /// `f32` (`f32::limit()`): the repository's `impl Trait for f32`
    /// blocks, where the trait methods it gives the primitive are. The
    /// impl the site is in is left out: there `f32::to_bits(self)` is the
    /// inherent method the trait's `to_bits` delegates to (inherent methods
    /// come first), not a call of itself; `Self::` still reaches it.
    fn primitive_impls(&self, w: &World, cx: &Ctx, name: &str) -> Vec<Val> {
        if !PRIMITIVES.contains(&name) {
            return Vec::new();
        }
        let mut own = Some(cx.scope);
        while let Some(u) = own
            && w.syms[u].node_type != NodeType::Impl
        {
            own = w.parent_of(u);
        }
        w.units_named(name)
            .iter()
            .filter(|&&i| w.syms[i].node_type == NodeType::Impl && Some(i) != own)
            .map(|&i| Val::Class(i))
            .collect()
    }

    /// A submodule in its own file (`mod key;`) before the declaration
    /// unit; also what the module names so in the value namespace
    /// (`crate::value` is both `mod value` and a re-exported `fn value`).
    fn module_member(&self, w: &World, m: &ModulePath, name: &str, depth: u32) -> Vec<Val> {
        let sub = format!("{}.{name}", m.path);
        let mut out = Vec::new();
        let has_sub = self.has_module(&m.root, &sub);
        if has_sub {
            out.push(Rust::module(&m.root, &sub));
        }
        let shared = (m.path == "crate")
            .then(|| self.shared_roots.get(&m.root))
            .flatten();
        if let Some(roots) = shared {
            out.extend(self.shared_root_member(w, &m.root, roots, name, depth));
        } else if let Some(&f) = self.modules.get(&(m.root.clone(), m.path.clone())) {
            out.extend(
                w.module_member(f, name, depth)
                    .into_iter()
                    .filter(|v| !(has_sub && w.is_module_value(v))),
            );
        }
        out
    }

    /// `use a::b::C`: the path evaluated as a module path from this file.
    fn import_target(
        &self,
        w: &World,
        fi: FileIdx,
        module: &str,
        name: Option<&str>,
        depth: u32,
    ) -> Vec<Val> {
        let cx = Ctx {
            file: fi,
            byte: 0,
            scope: w.file_unit[fi].unwrap_or_default(),
        };
        let first = module.split('.').next().unwrap_or_default();
        let vals = if module.is_empty() {
            Vec::new()
        } else if matches!(first, "crate" | "self" | "super" | "self_mod") {
            w.eval_path(&cx, module, depth + 1, false)
        } else {
            self.use_path(w, &cx, fi, module, depth)
        };
        match name {
            None => vals,
            Some(n) => {
                let mut out = Vec::new();
                for v in &vals {
                    out.extend(w.member(v, n, depth + 1));
                }
                out
            }
        }
    }
}

impl World {
    /// The units a Rust path names from its crate's name (`tokio::spawn`),
    /// following modules and `pub use` re-exports as `use` would:
    /// `graph::nav`'s last resort for a target.
    pub fn rust_path_units(&self, segments: &[&str]) -> Vec<i64> {
        self.rules.rust.path_units(self, segments)
    }
}

#[cfg(test)]
mod tests {
    use super::STD_METHODS;

    #[test]
    fn std_methods_are_sorted_for_the_binary_search() {
        assert!(STD_METHODS.windows(2).all(|w| w[0] < w[1]));
    }
}
