//! Python's resolution rules: `self` / `cls` / `super()`, modules named
//! by their dotted paths (relative imports, namespace packages, a
//! package's submodules), redefinitions (the last one wins), pytest
//! fixtures as parameter values.

use foldhash::{HashMap, HashSet};

use super::{Among, Conventions, Family, LanguageRules, ReceiverResult, dir_of, files_by_key};
use crate::facts::python::{CLS_NAMES, SELF_NAMES};
use crate::lang::NodeType;
use crate::resolve::eval::{Ctx, ModulePath, Val};
use crate::resolve::ids::{FileIdx, SymId, Table};
use crate::resolve::world::{World, WorldFile};

/// Python's differences as data.
pub(crate) const CONVENTIONS: Conventions = Conventions {
    import_sites_name_their_module: true,
    variables_are_module_members: true,
    // `def f` after `f = …` (or a parameter `f`) is what a later `f()` calls.
    definitions_rebind_names: true,
    // An attribute set on an instance shadows a method of its class, and
    // a property is a field whose value is its getter's result.
    fields_before_methods: true,
    // `x[k]` is written `x.__getitem__()` by the facts: on a list or a
    // map of no repository class, an item or the value stored.
    item_methods: &["__getitem__"],
    value_methods: &["__getitem__"],
    ..Conventions::NEUTRAL
};

/// The public methods of Python's builtin types `str`, `bytes`, `list`,
/// `dict`, `set` and `tuple` (sorted, for a binary search): a call of one
/// on a receiver of unknown type is not guessed
/// ([`LanguageRules::builtin_method`]).
const BUILTIN_METHODS: &[&str] = &[
    "add",
    "append",
    "capitalize",
    "casefold",
    "center",
    "clear",
    "copy",
    "count",
    "decode",
    "difference",
    "difference_update",
    "discard",
    "encode",
    "endswith",
    "expandtabs",
    "extend",
    "find",
    "format",
    "format_map",
    "fromkeys",
    "get",
    "hex",
    "index",
    "insert",
    "intersection",
    "intersection_update",
    "isalnum",
    "isalpha",
    "isascii",
    "isdecimal",
    "isdigit",
    "isdisjoint",
    "isidentifier",
    "islower",
    "isnumeric",
    "isprintable",
    "isspace",
    "issubset",
    "issuperset",
    "istitle",
    "isupper",
    "items",
    "join",
    "keys",
    "ljust",
    "lower",
    "lstrip",
    "partition",
    "pop",
    "popitem",
    "remove",
    "removeprefix",
    "removesuffix",
    "replace",
    "reverse",
    "rfind",
    "rindex",
    "rjust",
    "rpartition",
    "rsplit",
    "rstrip",
    "setdefault",
    "sort",
    "split",
    "splitlines",
    "startswith",
    "strip",
    "swapcase",
    "symmetric_difference",
    "symmetric_difference_update",
    "title",
    "translate",
    "union",
    "update",
    "upper",
    "values",
    "zfill",
];

/// Python's rules and the module names of a pass.
pub(crate) struct Python {
    /// Dotted module name → the files importable under it, in file order.
    modules: HashMap<String, Vec<FileIdx>>,
    /// Every dotted name some module name continues (`a` and `a.b` for
    /// `a.b.c`): a package directory, with or without `__init__.py`. Asked
    /// for each import that names no module, which a scan of `modules` made
    /// cost a pass over every module name.
    parents: HashSet<String>,
}

impl Python {
    /// The rules, with the module names of the world's Python files.
    pub(crate) fn new(files: &Table<FileIdx, WorldFile>) -> Python {
        let packages: std::collections::HashSet<&str> = files
            .iter()
            .filter(|(_, f)| f.family == Family::Python)
            .filter_map(|(_, f)| f.path.strip_suffix("/__init__.py"))
            .collect();
        let modules = files_by_key(files, Family::Python, |path| {
            importable_names(path, &packages)
        });
        let parents = module_parents(modules.keys());
        Python { modules, parents }
    }

    /// The file a dotted module name means: the shortest path among those
    /// importable under it (`click/core.py` over `tests/click/core.py`).
    fn module(&self, w: &World, key: &str) -> Option<Val> {
        let files = self.modules.get(key)?;
        let best = files
            .iter()
            .copied()
            .min_by_key(|&f| w.files[f].path.len())?;
        Some(Val::File(best))
    }
}

impl LanguageRules for Python {
    fn builtin_type(&self, _w: &World, _fi: FileIdx, e: &str) -> bool {
        let (e, _) = super::type_head(e, &[]);
        let e = e.strip_prefix("typing.").unwrap_or(e);
        let head = e.split(['(', '[', '.']).next().unwrap_or_default();
        matches!(
            head,
            "str"
                | "bytes"
                | "bytearray"
                | "list"
                | "dict"
                | "set"
                | "frozenset"
                | "tuple"
                | "int"
                | "float"
                | "complex"
                | "bool"
                | "range"
                | "memoryview"
                | "List"
                | "Dict"
                | "Set"
                | "FrozenSet"
                | "Tuple"
                | "Sequence"
                | "MutableSequence"
                | "Mapping"
                | "MutableMapping"
                | "AbstractSet"
                | "MutableSet"
                | "Text"
                | "AnyStr"
                | "DefaultDict"
                | "OrderedDict"
                | "Counter"
                | "Deque"
                | "defaultdict"
                | "deque"
        )
    }

    fn builtin_method(&self, name: &str) -> bool {
        BUILTIN_METHODS.binary_search(&name).is_ok()
    }

    fn head(&self, w: &World, cx: &Ctx, head: &str, called: bool, value: bool) -> Option<Vec<Val>> {
        if head == "super" && called {
            Some(w.enclosing_class_as(cx, Val::Super))
        } else if value && SELF_NAMES.contains(&head) && !called {
            Some(w.enclosing_class_as(cx, Val::Inst))
        } else if value && CLS_NAMES.contains(&head) {
            // `cls` is the class; `cls(...)` (a classmethod's constructor
            // call) is then an instance of it, through the call's result.
            Some(w.enclosing_class_as(cx, Val::Class))
        } else {
            None
        }
    }

    /// `x.__enter__()` (`__aenter__`, what `with X() as x` binds, see
    /// `facts::python::with_target`) on an instance whose class defines
    /// none in the repository: the instance itself, as the standard
    /// library's context managers (`AbstractContextManager`, files, locks'
    /// owners, executors) return `self`; an `__enter__` that is defined
    /// but returns nothing known gives nothing.
    fn unknown_method(&self, _w: &World, name: &str, vals: &[Val]) -> Option<Vec<Val>> {
        if !matches!(name, "__enter__" | "__aenter__") {
            return None;
        }
        let instances: Vec<Val> = vals
            .iter()
            .filter(|v| matches!(v, Val::Inst(_)))
            .cloned()
            .collect();
        (!instances.is_empty()).then_some(instances)
    }

    /// `return self` (the first returned value) and `-> Self` / `(self: T)
    /// -> T` (stored as the same value by `facts::python`); `return cls`;
    /// `return cls(…)`, `return type(self)(…)` and `return
    /// self.__class__(…)` (the last two stored as `=cls()` by
    /// `facts::python`).
    fn receiver_result(&self, ret: &str) -> Option<ReceiverResult> {
        let value = ret.strip_prefix('=')?;
        if SELF_NAMES.contains(&value) {
            return Some(ReceiverResult::Itself);
        }
        let (head, made) = match value.strip_suffix("()") {
            Some(head) => (head, true),
            None => (value, false),
        };
        if !CLS_NAMES.contains(&head) {
            return None;
        }
        Some(if made {
            ReceiverResult::AnInstance
        } else {
            ReceiverResult::ItsClass
        })
    }

    fn is_self_receiver(&self, first: &str) -> bool {
        SELF_NAMES.contains(&first) || CLS_NAMES.contains(&first) || first == "super()"
    }

    /// Several definitions of a name in one body (`@overload`, property
    /// setters, conditional definitions): the last one (in a scope, the
    /// last before the use).
    fn choose(&self, w: &World, found: Vec<SymId>, among: Among) -> Vec<SymId> {
        match among {
            Among::Members => {
                let mut found = found;
                found.sort_by_key(|&m| w.syms[m].start);
                found.last().copied().into_iter().collect()
            }
            Among::Scope { before } => {
                let earlier = found.iter().copied().filter(|&d| w.syms[d].start <= before);
                earlier
                    .last()
                    .or(found.last().copied())
                    .into_iter()
                    .collect()
            }
            Among::ModuleTop => found.last().copied().into_iter().collect(),
        }
    }

    /// A pytest fixture a test parameter names: a top-level function of that
    /// name in the test's file or a `conftest.py` above it; its value is what it returns.
    fn parameter_value(&self, w: &World, fi: FileIdx, name: &str, depth: u32) -> Vec<Val> {
        let path = &w.files[fi].path;
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
            if let Some(&f) = w.file_by_path.get(&conftest) {
                places.push(f);
            }
            if dir.is_empty() {
                break;
            }
            dir = dir_of(dir);
        }
        for f in places {
            let Some(fu) = w.file_unit[f] else {
                continue;
            };
            let found = w.children[fu].iter().copied().find(|&c| {
                let s = &w.syms[c];
                s.name == name && s.node_type == NodeType::Function
            });
            if let Some(fx) = found {
                return w.call_result(&[Val::Func(fx)], depth);
            }
        }
        Vec::new()
    }

    /// `pkg/__init__.py`: its submodule `pkg/name.py` or package `pkg/name/`.
    fn submodule(&self, w: &World, f: FileIdx, name: &str) -> Option<Val> {
        let path = &w.files[f].path;
        if !path.ends_with("__init__.py") {
            return None;
        }
        let dir = dir_of(path);
        let sub = format!("{dir}/{name}.py");
        let sub_pkg = format!("{dir}/{name}/__init__.py");
        [sub, sub_pkg]
            .into_iter()
            .find_map(|p| w.file_by_path.get(&p).map(|&sf| Val::File(sf)))
    }

    /// A package without a file of its own: its submodule `name`.
    fn module_member(&self, w: &World, m: &ModulePath, name: &str, _depth: u32) -> Vec<Val> {
        let sub = format!("{}.{name}", m.path);
        self.module(w, &sub).into_iter().collect()
    }

    fn import_module(&self, w: &World, fi: FileIdx, module: &str) -> Option<Val> {
        let key = resolve_relative(&w.files[fi].path, module).unwrap_or_else(|| module.to_string());
        self.module(w, &key).or_else(|| {
            // A package directory without `__init__.py` still holds submodules.
            self.parents
                .contains(&key)
                .then_some(Val::Module(ModulePath {
                    family: Family::Python,
                    root: String::new(),
                    path: key,
                }))
        })
    }
}

/// The dotted names that some of `names` continue: each name's part
/// before any of its dots (`a` and `a.b` for `a.b.c`), so that a name is in
/// the set exactly when some module name starts with it and a dot.
fn module_parents<'a>(names: impl Iterator<Item = &'a String>) -> HashSet<String> {
    let mut parents = HashSet::default();
    for name in names {
        for (dot, _) in name.match_indices('.') {
            parents.insert(name[..dot].to_string());
        }
    }
    parents
}

/// The dotted module names a file can be imported as (`src/click/core.py` →
/// `click.core`, `core`, `src.click.core`; `pkg/__init__.py` → `pkg`).
pub(crate) fn module_names(path: &str) -> Vec<String> {
    let parts = module_parts(path);
    (0..parts.len()).map(|i| parts[i..].join(".")).collect()
}

/// A module file's path as folder and module names, without its `.py` /
/// `.pyi` and without a trailing `__init__` (`pkg/__init__.py` → `pkg`).
fn module_parts(path: &str) -> Vec<&str> {
    let stem = path
        .strip_suffix(".py")
        .or_else(|| path.strip_suffix(".pyi"))
        .unwrap_or(path);
    let stem = stem.strip_suffix("/__init__").unwrap_or(stem);
    stem.split('/').collect()
}

/// The dotted names a file can be imported as from some import root
/// ([`module_names`], but not a name that starts inside a package: a
/// folder with `__init__.py` is no import root, so
/// `django/contrib/gis/geos/collections.py` is not the stdlib's
/// `collections`, while `src/click/core.py` is `click.core`).
fn importable_names(path: &str, packages: &std::collections::HashSet<&str>) -> Vec<String> {
    let names = module_names(path);
    let depth = names.len();
    let parts = module_parts(path);
    names
        .into_iter()
        .enumerate()
        .filter(|(i, _)| {
            // names[i] starts at parts[i]; its root is the folder parts[..i].
            *i == 0 || *i >= depth || !packages.contains(parts[..*i].join("/").as_str())
        })
        .map(|(_, n)| n)
        .collect()
}

/// The package a file's relative imports start from (`a/b/c.py` → `a/b`).
pub(crate) fn resolve_relative(path: &str, module: &str) -> Option<String> {
    let dots = module.chars().take_while(|&c| c == '.').count();
    if dots == 0 {
        return None;
    }
    let mut dir: Vec<&str> = path.split('/').collect();
    dir.pop();
    for _ in 1..dots {
        dir.pop()?;
    }
    let rest = &module[dots..];
    let mut out = dir.join(".");
    if !rest.is_empty() {
        if !out.is_empty() {
            out.push('.');
        }
        out.push_str(rest);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn module_parents_are_the_names_some_module_name_continues() {
        let names: Vec<String> = ["a.b.c", "a.d", "x", "pkg.sub", "pkg", "p.q.r.s"]
            .into_iter()
            .map(String::from)
            .collect();
        let parents = module_parents(names.iter());
        // The scan the set replaces: some name starts with the key and a dot.
        let scan = |key: &str| names.iter().any(|k| k.starts_with(&format!("{key}.")));
        for key in [
            "a", "a.b", "a.b.c", "a.d", "x", "pkg", "pkg.sub", "p", "p.q", "p.q.r", "p.q.r.s", "b",
            "a.", "", "q", "ab", "a.bc",
        ] {
            assert_eq!(parents.contains(key), scan(key), "{key:?}");
        }
        assert_eq!(parents.len(), 6, "{parents:?}");
    }

    #[test]
    fn builtin_methods_are_sorted_for_the_binary_search() {
        assert!(BUILTIN_METHODS.windows(2).all(|w| w[0] < w[1]));
        let rules = Python {
            modules: HashMap::default(),
            parents: HashSet::default(),
        };
        assert!(rules.builtin_method("split") && rules.builtin_method("zfill"));
        assert!(!rules.builtin_method("split_tokens"));
    }
}
