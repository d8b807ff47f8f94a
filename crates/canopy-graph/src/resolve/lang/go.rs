//! Go's resolution rules: a package is a folder (its files share their
//! top-level names), methods are declared away from their type (found
//! through the receiver type's name in the folder) and never named bare,
//! every receiver is the method's own value, and a struct satisfies the
//! interfaces whose methods its method set has.

use std::collections::HashSet;

use foldhash::HashMap;

use super::{Conventions, Family, LanguageRules, dir_of, files_by_key};
use crate::lang::NodeType;
use crate::resolve::eval::{ModulePath, Val};
use crate::resolve::ids::{FileIdx, SymId, Table};
use crate::resolve::world::{World, WorldFile};
use crate::store::graph_rows::SymRow;

/// Go's differences as data.
pub(crate) const CONVENTIONS: Conventions = Conventions {
    // A file its build constraints leave out of a default build here is
    // compiled out as a whole (`facts::go_build`).
    facts_read_by_every_pass: true,
    methods_declared_apart: true,
    methods_in_scope: false,
    locals_visible_before_binding: false,
    calls_of_types_convert: true,
    path_builds: crate::facts::go_build::file_name_builds,
    ..Conventions::NEUTRAL
};

/// Go's rules and the package folders of a pass.
pub(crate) struct Go {
    /// Folder → its Go files, in file order.
    dirs: HashMap<String, Vec<FileIdx>>,
}

impl Go {
    /// The rules, with the folders of the world's Go files.
    pub(crate) fn new(files: &Table<FileIdx, WorldFile>) -> Go {
        Go {
            dirs: files_by_key(files, Family::Go, |path| vec![dir_of(path).to_string()]),
        }
    }

    /// The top-level names `name` of the package in folder `dir` (types
    /// and functions; methods hang under their types).
    fn dir_member(&self, w: &World, dir: &str, name: &str) -> Vec<Val> {
        let mut out = Vec::new();
        for &f in self.dirs.get(dir).into_iter().flatten() {
            let Some(fu) = w.file_unit[f] else {
                continue;
            };
            for &c in w.named_children(fu, name) {
                let s = &w.syms[c];
                if s.node_type.is_symbol() && s.node_type != NodeType::Method {
                    out.push(w.as_val(c));
                }
            }
        }
        out
    }
}

impl Go {
    /// Whether import path `module` (not the standard library's: its first
    /// element has a dot) names the package of the repository's root
    /// folder: its last element is the package name the root's files
    /// declare.
    fn is_root_package(&self, w: &World, module: &str) -> bool {
        let (first, last) = (
            module.split('/').next().unwrap_or_default(),
            module.rsplit('/').next().unwrap_or_default(),
        );
        if !first.contains('.') || !module.contains('/') {
            return false;
        }
        self.dirs.get("").into_iter().flatten().any(|&f| {
            let facts = w.files[f].facts.get();
            facts.package.is_some_and(|p| facts.s(p) == last)
        })
    }

    /// The value of a package-level variable `name` of the package in
    /// folder `dir` (`var Unit = NewSquare(1)`, `var Default Options`):
    /// variables are no units, so a use from another file of the package,
    /// or through an import (`sh.Unit`), reads the declaring file's
    /// top-level binding.
    fn dir_variable(&self, w: &World, dir: &str, name: &str, depth: u32) -> Vec<Val> {
        for &f in self.dirs.get(dir).into_iter().flatten() {
            let vals = w.top_level_value(f, name, depth + 1);
            if !vals.is_empty() {
                return vals;
            }
        }
        Vec::new()
    }
}

impl LanguageRules for Go {
    /// Go's predeclared types, slices, maps and channels, and `pkg.Type`
    /// where `pkg` imports a standard-library package (an import path
    /// whose first element has no dot: `strings`, `net/http`).
    fn builtin_type(&self, w: &World, fi: FileIdx, e: &str) -> bool {
        let (e, head) = super::type_head(e, &['(', '[', '{']);
        if e.starts_with('[') || e.starts_with("map[") || e.starts_with("chan ") {
            return true;
        }
        if matches!(
            head,
            "string"
                | "error"
                | "byte"
                | "rune"
                | "bool"
                | "int"
                | "int8"
                | "int16"
                | "int32"
                | "int64"
                | "uint"
                | "uint8"
                | "uint16"
                | "uint32"
                | "uint64"
                | "uintptr"
                | "float32"
                | "float64"
                | "complex64"
                | "complex128"
        ) {
            return true;
        }
        let Some((pkg, _)) = head.split_once('.') else {
            return false;
        };
        let facts = w.files[fi].facts.get();
        facts.imports.iter().any(|i| {
            let (module, local) = (facts.s(i.module), facts.s(i.local));
            let last = module.rsplit('/').next().unwrap_or_default();
            (local == pkg || (local.is_empty() && last == pkg))
                && !module.split('/').next().unwrap_or_default().contains('.')
        })
    }

    fn method_scope(&self, w: &World, fi: FileIdx) -> String {
        dir_of(&w.files[fi].path).to_string()
    }

    /// A method `T.m` (not an interface's) belongs to `T`.
    fn method_owner(&self, sym: &SymRow, parent: Option<&SymRow>) -> Option<String> {
        if sym.node_type != NodeType::Method {
            return None;
        }
        match sym.qualified_name.split_once('.') {
            Some((o, _)) if parent.is_none_or(|p| p.node_type != NodeType::Interface) => {
                Some(o.to_string())
            }
            _ => None,
        }
    }

    fn is_self_receiver(&self, _first: &str) -> bool {
        true
    }

    fn package_members(&self, w: &World, fi: FileIdx, name: &str, depth: u32) -> Vec<Val> {
        let dir = dir_of(&w.files[fi].path);
        let units = self.dir_member(w, dir, name);
        if !units.is_empty() {
            return units;
        }
        self.dir_variable(w, dir, name, depth)
    }

    fn module_member(&self, w: &World, m: &ModulePath, name: &str, depth: u32) -> Vec<Val> {
        let units = self.dir_member(w, &m.path, name);
        if !units.is_empty() {
            return units;
        }
        self.dir_variable(w, &m.path, name, depth)
    }

    /// An import path names the longest package folder it ends with; a
    /// path that ends with no folder names the repository's root package
    /// when its last element is that package's name
    /// (`github.com/yuin/goldmark` → the root's `package goldmark`).
    fn import_module(&self, w: &World, _fi: FileIdx, module: &str) -> Option<Val> {
        let mut best: Option<&String> = None;
        for d in self.dirs.keys() {
            let matches = module == d
                || (module.ends_with(d.as_str())
                    && module.as_bytes().get(module.len() - d.len() - 1) == Some(&b'/'))
                || (d.is_empty() && !module.contains('.'));
            if matches && !d.is_empty() && best.is_none_or(|b| d.len() > b.len()) {
                best = Some(d);
            }
        }
        let dir = match best {
            Some(d) => d.clone(),
            None if self.is_root_package(w, module) => String::new(),
            None => return None,
        };
        Some(Val::Module(ModulePath {
            family: Family::Go,
            root: String::new(),
            path: dir,
        }))
    }

    /// The interfaces (of Go files) whose every method struct `t` has.
    fn satisfied_interfaces(&self, w: &World, t: SymId, out: &mut Vec<SymId>) {
        let ts = &w.syms[t];
        if ts.node_type != NodeType::Struct {
            return;
        }
        let methods: HashSet<&str> = w
            .owned_methods(t)
            .iter()
            .map(|&m| w.syms[m].name.as_str())
            .collect();
        if methods.is_empty() {
            return;
        }
        let language = w.files[ts.file].language;
        for (i, s) in w.syms.iter() {
            if s.node_type != NodeType::Interface || w.files[s.file].language != language {
                continue;
            }
            let wanted: Vec<&str> = w.children[i]
                .iter()
                .map(|&m| w.syms[m].name.as_str())
                .collect();
            if !wanted.is_empty() && wanted.iter().all(|m| methods.contains(m)) {
                out.push(i);
            }
        }
    }
}
