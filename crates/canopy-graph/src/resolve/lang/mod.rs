//! Per-language resolution rules behind one trait, [`LanguageRules`], so
//! the evaluator (`eval`, `lookup`, `sites`) never asks which language it
//! is: a language's differences are data ([`Conventions`]) and hooks
//! (what `self` means, how modules are named and imported, which of
//! several definitions a use means, what a package or prelude adds), each
//! with the neutral default most languages share.
//!
//! One file per language family ([`python`], [`ecmascript`] for JavaScript
//! and TypeScript, [`go`], [`rust`]); [`Family::of`] and [`Rules`] are the
//! one place that lists them. A family's rules are built once per pass
//! with the tables they keep (Python's module names, Go's package
//! folders, Rust's module paths and Cargo packages).
//!
//! Adding a language: its facts (`graph::facts::<lang>`), one file here
//! implementing the trait, a line in [`Family`] and [`Rules`], fixtures.

pub(crate) mod ecmascript;
pub(crate) mod go;
pub(crate) mod python;
pub(crate) mod rust;

use super::eval::{Ctx, ModulePath, Val};
use super::ids::{FileIdx, SymId, Table};
use super::world::{World, WorldFile};
use crate::facts::compact::WorldFacts;
use crate::facts::model::SiteKind;
use crate::lang::Language;
use crate::store::graph_rows::{How, SymRow};

/// A language family: the languages that share one set of rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Family {
    /// Python.
    Python,
    /// JavaScript, TypeScript and TSX.
    EcmaScript,
    /// Go.
    Go,
    /// Rust.
    Rust,
    /// Languages without resolution facts (Markdown, plain text).
    Unresolved,
}

impl Family {
    /// The family of a language.
    pub fn of(language: Language) -> Family {
        match language {
            Language::Python => Family::Python,
            Language::JavaScript | Language::TypeScript | Language::Tsx => Family::EcmaScript,
            Language::Go => Family::Go,
            Language::Rust => Family::Rust,
            Language::Markdown | Language::Text => Family::Unresolved,
        }
    }

    /// The family's conventions.
    pub(crate) fn conventions(self) -> &'static Conventions {
        match self {
            Family::Python => &python::CONVENTIONS,
            Family::EcmaScript => &ecmascript::CONVENTIONS,
            Family::Go => &go::CONVENTIONS,
            Family::Rust => &rust::CONVENTIONS,
            Family::Unresolved => &Conventions::NEUTRAL,
        }
    }
}

/// What a language's resolution does differently, as data. Every flag's
/// neutral value is [`Conventions::NEUTRAL`]'s.
#[derive(Debug)]
pub(crate) struct Conventions {
    /// Every pass decodes these files' facts whatever it resolves: they
    /// hold compiled-out ranges (whose units are no definitions) and trait
    /// impls (looked up by trait name from anywhere). Rust; Go (a file its
    /// build constraints leave out).
    pub facts_read_by_every_pass: bool,
    /// An import site's receiver is its module even without
    /// [`crate::facts::model::IMPORT_RECV`] (Python's `from m import a`).
    pub import_sites_name_their_module: bool,
    /// Modules live in a namespace of their own (Rust: `mod value;` and
    /// `fn value` side by side): a call means the function, and a module
    /// with a value of its name keeps both.
    pub modules_apart_from_values: bool,
    /// A module's top-level variables are members other modules read
    /// (Python: `ib = attrib` in `attr/__init__.py` is `attr.ib`;
    /// ECMAScript: `export var observable: IObservableFactory = …`, a `var`
    /// or `let` being no unit as a `const` is); other languages reach
    /// module-level values as units or package members. Read only when no
    /// definition or import of the name is found.
    pub variables_are_module_members: bool,
    /// A definition binds its name where it stands, as an assignment does
    /// (Python's `def`, and `check = lambda …`, a function unit): one
    /// between a local binding of the name and a use wins over the binding.
    pub definitions_rebind_names: bool,
    /// Methods may be declared away from their type, and are found through
    /// the owner's method scope (Go receivers, Rust `impl` blocks).
    pub methods_declared_apart: bool,
    /// An `impl T` block's methods belong to the `T` its scope sees (Rust).
    pub impl_methods_follow_type: bool,
    /// A unit's fields also live on the type of the `impl` it is (Rust:
    /// `self` in an impl block reads the struct's fields).
    pub fields_on_impl_type: bool,
    /// `x.f` is the field `f` even when a method `f()` exists (Rust).
    pub fields_before_methods: bool,
    /// With [`Conventions::fields_before_methods`]: a declared field of the
    /// name is the field even when its type is unknown (`version: u32`
    /// beside `fn version()`), as where fields and methods are two
    /// namespaces (Rust); not where a field may stand for a method (a
    /// Python `@property`).
    pub declared_fields_hide_methods: bool,
    /// A binding later in its scope stands for a name used before it
    /// (not Rust, whose locals exist only after their `let`, nor Go's
    /// function bodies: `var text *ast.Text` late in a function is not the
    /// package `text` of its parameter `block text.BlockReader`). A file's
    /// top-level bindings are seen from anywhere in it either way.
    pub locals_visible_before_binding: bool,
    /// The items of a class-like body are in scope by bare name inside it
    /// (not Rust's `impl` and trait bodies, reached through `Self::`).
    pub items_of_type_bodies_in_scope: bool,
    /// Methods are names of the scope they are declared in (not Go's, which
    /// are reached through their receiver's type).
    pub methods_in_scope: bool,
    /// The functions in a constant's value are names in scope for the code
    /// of other functions in it (not ECMAScript, where they are the methods
    /// of an object literal: `const traps = { get() { has(…) }, has() {} }`
    /// calls an outer `has`).
    pub functions_in_values_in_scope: bool,
    /// A call of a value that is no unit may be typed by a binding of its
    /// own (ECMAScript: a `var` holding a type guard; see
    /// [`crate::facts::model::CALL_RESULT`]).
    pub call_bindings: bool,
    /// A name bound to one of several values (`x` inside `if (isA(x) ||
    /// isB(x))`, stored `isA()∪isB()`) is each of them: TypeScript types
    /// it as their union, and a member of a union is every alternative's
    /// (ECMAScript). Elsewhere it is one of them (Python's conditional
    /// expression: a call through it may mean either).
    pub value_unions_are_each: bool,
    /// Generic types whose value, awaited, is their first type argument
    /// (ECMAScript's `Promise<T>`): the facts read `await f()` as `f()`, so
    /// a value of one is read as its `T` when the repository defines no
    /// type of that name. A call on a promise itself (`then`) finds no
    /// member of `T` and stays unresolved, as on a `Promise`.
    pub awaited_types: &'static [&'static str],
    /// Collection methods that give back an item (Rust's `first`, `get`,
    /// `pop`, …): on a field or local without a type of its own, the item
    /// of the collection (`v#elem`).
    pub item_methods: &'static [&'static str],
    /// Methods of a map's entry that give back its key (Rust's `key`,
    /// `key_mut`): on a field or local without a type of its own, the
    /// entry's key (`entry#k`).
    pub key_methods: &'static [&'static str],
    /// Methods of a map that give back the value stored under a key
    /// (Rust's `get`, `shift_remove`): on a field or local without a type
    /// of its own whose items are no sequence's, the map's value (`m#v`).
    pub value_methods: &'static [&'static str],
    /// Methods of a map's entry (`m.entry(k)`) that give back its value,
    /// inserted if missing (Rust's `or_insert`): the map's value (`m#v`).
    pub entry_value_methods: &'static [&'static str],
    /// A call of a type converts a value to it (Go's `byName(list)`,
    /// `radius(2)`): no call of a function, so the site is a use of the
    /// type. Elsewhere calling a class constructs it (Python), or is no
    /// call site of a type at all (`new X()`, Rust's tuple structs).
    pub calls_of_types_convert: bool,
    /// Whether a default build here compiles a file of this path (Go's
    /// `_windows.go` / `_arm64.go` name suffixes): the units of one it
    /// does not are no definitions.
    pub path_builds: fn(&str) -> bool,
}

/// Every path builds (the neutral [`Conventions::path_builds`]).
fn every_path_builds(_: &str) -> bool {
    true
}

impl Conventions {
    /// What most languages do.
    pub const NEUTRAL: Conventions = Conventions {
        facts_read_by_every_pass: false,
        import_sites_name_their_module: false,
        modules_apart_from_values: false,
        variables_are_module_members: false,
        definitions_rebind_names: false,
        methods_declared_apart: false,
        impl_methods_follow_type: false,
        fields_on_impl_type: false,
        fields_before_methods: false,
        declared_fields_hide_methods: false,
        locals_visible_before_binding: true,
        items_of_type_bodies_in_scope: true,
        methods_in_scope: true,
        functions_in_values_in_scope: true,
        call_bindings: false,
        value_unions_are_each: false,
        awaited_types: &[],
        item_methods: &[],
        key_methods: &[],
        value_methods: &[],
        entry_value_methods: &[],
        calls_of_types_convert: false,
        path_builds: every_path_builds,
    };
}

/// Where several definitions of one name were found, for
/// [`LanguageRules::choose`].
/// What a method gives back of its receiver ([`LanguageRules::receiver_result`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ReceiverResult {
    /// The receiver itself (`return self`, `-> Self`); on an instance only.
    Itself,
    /// The receiver's class (`return cls`; `return type(self)`).
    ItsClass,
    /// A new instance of the receiver's class (`return cls()`,
    /// `return type(self)()`, `return self.__class__(…)`).
    AnInstance,
}

#[derive(Clone, Copy, Debug)]
pub(crate) enum Among {
    /// Members of a class-like unit (its children or methods declared apart).
    Members,
    /// Definitions in a lexical scope, for a use at byte `before`.
    Scope {
        /// The use's byte.
        before: u32,
    },
    /// Top-level definitions of a module, for an importer.
    ModuleTop,
}

/// One language family's resolution rules. The evaluator calls these where
/// languages differ; each default is what a language without the feature
/// does.
pub(crate) trait LanguageRules: Send + Sync {
    /// The package, crate or file that methods declared away from their
    /// type are kept under (Go: the folder; Rust: the crate root).
    fn method_scope(&self, w: &World, fi: FileIdx) -> String {
        w.files[fi].path.clone()
    }

    /// The owner type's name of a method declared away from its type (a Go
    /// method `T.m`, a function in a Rust `impl T`); `parent`: its parent unit.
    fn method_owner(&self, _sym: &SymRow, _parent: Option<&SymRow>) -> Option<String> {
        None
    }

    /// A path head the language gives a meaning of its own (`self`,
    /// `this`, `super`, `cls`, `Self`, `crate`), evaluated at `cx`; `None`
    /// for a name to look up.
    fn head(
        &self,
        _w: &World,
        _cx: &Ctx,
        _head: &str,
        _called: bool,
        _value: bool,
    ) -> Option<Vec<Val>> {
        None
    }

    /// Whether a receiver whose first segment is `first` is the enclosing
    /// instance (its members are found `How::Receiver`).
    fn is_self_receiver(&self, first: &str) -> bool;

    /// A receiver in a form of the language's own (Rust `T~Trait`, `Trait|x`):
    /// the site resolved, or `None` to evaluate it as a value.
    fn qualified_receiver(
        &self,
        _w: &World,
        _cx: &Ctx,
        _name: &str,
        _recv: &str,
        _kind: SiteKind,
    ) -> Option<(Vec<SymId>, How)> {
        None
    }

    /// Narrows several methods found on a receiver (Rust: inside `impl
    /// Trait for X`, the same trait's).
    fn narrow_methods(&self, _w: &World, _cx: &Ctx, _found: &mut Vec<SymId>) {}

    /// The methods named `name` that the repository gives a type of the
    /// language's standard library which receiver `r` holds, when the
    /// receiver's own members have none (Rust: a trait implemented for
    /// `Option`, `Vec` or every `T`). None by default.
    fn std_type_methods(&self, _w: &World, _cx: &Ctx, _name: &str, _r: &str) -> Vec<SymId> {
        Vec::new()
    }

    /// Of several definitions found for one name, drops those that are
    /// copies of another among them (TypeScript: a `.d.ts` declaration of
    /// a `.ts` source's definition). None by default.
    fn drop_copies(&self, _w: &World, found: Vec<SymId>) -> Vec<SymId> {
        found
    }

    /// Whether a call passing `args` arguments (plus one; 0: unknown,
    /// [`crate::facts::Site::args`]) may be guessed to reach method `m` by
    /// its unique name. Any, by default.
    fn guess_fits(&self, _w: &World, _args: u8, _m: SymId) -> bool {
        true
    }

    /// Whether unit `s` of the file at `path` (with `facts`) is compiled
    /// out by what its build says beyond the file (Rust: a `cfg` key its
    /// package's build script sets).
    fn built_out(&self, _path: &str, _facts: &WorldFacts, _s: &SymRow) -> bool {
        false
    }

    /// Whether unit `s`, a definition, is left out of its package's
    /// default build (Rust: under a `cfg(feature = …)` the default
    /// features turn off): of several a name may mean, the others are
    /// ([`World::default_build_twins`]). Never, by default.
    fn off_in_default_build(&self, _w: &World, _s: SymId) -> bool {
        false
    }

    /// Whether a call in file `caller` may be guessed to reach a method of
    /// file `target` by its unique name (Rust: only within Cargo's reach).
    fn may_guess(&self, _w: &World, _caller: FileIdx, _target: FileIdx) -> bool {
        true
    }

    /// Whether a method named `name` is one the language's own builtin
    /// types define (Python's `str.split`, `list.append`, `dict.items`;
    /// ECMAScript's `get` of `Map`, `then` of `Promise`, `slice` of arrays
    /// and strings): then a corpus method of that name is not the only one
    /// an unknown receiver may hold, and a call of it is never guessed by
    /// name. None by default.
    fn builtin_method(&self, _name: &str) -> bool {
        false
    }

    /// Whether a type or value expression (as a binding or receiver
    /// writes it: `str()`, `Map<K, V>`, `strings.Builder`, `String`) names
    /// a type of the language or its standard library; a call on such a
    /// receiver is never guessed by name. None by default.
    fn builtin_type(&self, _w: &World, _fi: FileIdx, _e: &str) -> bool {
        false
    }

    /// Which of several definitions of one name a use means (redefinitions,
    /// overloads, inherent over trait methods); by default all of them.
    fn choose(&self, _w: &World, found: Vec<SymId>, _among: Among) -> Vec<SymId> {
        found
    }

    /// Bases of class-like unit `t` beyond its base-type facts (Rust: the
    /// traits implemented in its crate, `Deref` targets).
    fn more_bases(&self, _w: &World, _t: SymId, _depth: u32, _out: &mut Vec<SymId>) {}

    /// What a method whose stated result is `ret` (a [`DefFactKind::Returns`]
    /// fact's expression) gives of the value it is called on, when that is
    /// what decides its result (Python: `=self`, `=cls`, `=cls()`), so that
    /// a call on a subclass's instance or class gives the subclass's, not
    /// the defining class's.
    ///
    /// [`DefFactKind::Returns`]: crate::facts::model::DefFactKind::Returns
    fn receiver_result(&self, _ret: &str) -> Option<ReceiverResult> {
        None
    }

    /// Whether method `name`, where the value does not define it, hands on
    /// the payload it is called on (Rust's `unwrap`, `expect`, `ok`): the
    /// items of `f().unwrap()` are those of `f()`.
    fn passes_payload(&self, _name: &str) -> bool {
        false
    }

    /// Whether method `name`, where the value does not define it, walks
    /// the items of what it is called on (Rust's `iter`, `into_iter`,
    /// `rev`): the items of `v.into_iter()` are those of `v`. A value known
    /// only by such items is a standard collection, whose methods are
    /// never guessed into the repository by name.
    fn passes_items(&self, _name: &str) -> bool {
        false
    }

    /// Whether a value known only by its items (its own type unknown, its
    /// items known: `docs` of `let docs = load(s)?` with `load` giving
    /// `Result<Vec<Doc>, E>`) is a standard-library collection, whose
    /// methods are never guessed into the repository by name.
    fn items_only_of_std(&self) -> bool {
        false
    }

    /// The result of calling method `name` that none of `vals` defines
    /// (Rust: `x.unwrap()` is `x`, `T::default()` a `T`); `None` when unknown.
    fn unknown_method(&self, _w: &World, _name: &str, _vals: &[Val]) -> Option<Vec<Val>> {
        None
    }

    /// The module a module unit `t` declares in a file of its own (Rust `mod key;`).
    fn declared_module(&self, _w: &World, _t: SymId) -> Option<Val> {
        None
    }

    /// The value of a parameter without annotation (Python: a pytest fixture).
    fn parameter_value(&self, _w: &World, _fi: FileIdx, _name: &str, _depth: u32) -> Vec<Val> {
        Vec::new()
    }

    /// What file `fi`'s package holds under `name` beyond the file (Go: the
    /// folder's other files).
    fn package_members(&self, _w: &World, _fi: FileIdx, _name: &str, _depth: u32) -> Vec<Val> {
        Vec::new()
    }

    /// What every file sees as `name` without an import (Rust: a library
    /// crate of the repository).
    fn prelude(&self, _name: &str) -> Option<Val> {
        None
    }

    /// What a primitive type's name means where nothing in scope defines
    /// it (Rust: `f32` in `f32::limit()`, the repository's `impl … for f32`
    /// blocks). None by default.
    fn primitive_impls(&self, _w: &World, _cx: &Ctx, _name: &str) -> Vec<Val> {
        Vec::new()
    }

    /// A submodule of file `f` named `name` (Python: beside `__init__.py`).
    fn submodule(&self, _w: &World, _f: FileIdx, _name: &str) -> Option<Val> {
        None
    }

    /// The members named `name` of a module value this family made.
    fn module_member(&self, _w: &World, _m: &ModulePath, _name: &str, _depth: u32) -> Vec<Val> {
        Vec::new()
    }

    /// The module an import of `module` from file `fi` names.
    fn import_module(&self, _w: &World, _fi: FileIdx, _module: &str) -> Option<Val> {
        None
    }

    /// What an import of `module` (and `name` inside it) binds, from file
    /// `fi`: by default `name` among the members of [`Self::import_module`],
    /// and for an ES `default` import what [`Self::default_import`] says.
    fn import_target(
        &self,
        w: &World,
        fi: FileIdx,
        module: &str,
        name: Option<&str>,
        depth: u32,
    ) -> Vec<Val> {
        let Some(m) = self.import_module(w, fi, module) else {
            return Vec::new();
        };
        match name {
            None => vec![m],
            Some("default") => self.default_import(w, &m, depth),
            Some(n) => w.member(&m, n, depth + 1),
        }
    }

    /// What `import X from "m"` binds of module `m` (ECMAScript's default
    /// export); nothing known by default.
    fn default_import(&self, _w: &World, _m: &Val, _depth: u32) -> Vec<Val> {
        Vec::new()
    }

    /// Types that class-like unit `t` implements without saying so (Go:
    /// the interfaces its method set satisfies).
    fn satisfied_interfaces(&self, _w: &World, _t: SymId, _out: &mut Vec<SymId>) {}
}

/// The files of one family by the keys each is known by (Python's module
/// names, Go's folder), in file order under each key.
pub(crate) fn files_by_key(
    files: &Table<FileIdx, WorldFile>,
    family: Family,
    keys: impl Fn(&str) -> Vec<String>,
) -> foldhash::HashMap<String, Vec<FileIdx>> {
    let mut by_key: foldhash::HashMap<String, Vec<FileIdx>> = Default::default();
    for (fi, f) in files.iter().filter(|(_, f)| f.family == family) {
        for key in keys(&f.path) {
            by_key.entry(key).or_default().push(fi);
        }
    }
    by_key
}

/// The folder of a repository-relative path (`""` at the root).
pub(crate) fn dir_of(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(d, _)| d)
}

/// What the repository's build manifests say, read when a pass starts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Manifests {
    /// The Cargo side: library crates and packages.
    pub cargo: rust::Cargo,
}

impl Manifests {
    /// The manifests among `paths` (repository-relative) of the repository at `root`.
    pub fn read<'a>(root: &std::path::Path, paths: impl IntoIterator<Item = &'a str>) -> Manifests {
        Manifests {
            cargo: rust::Cargo::read(root, paths),
        }
    }

    /// Every Cargo package's folder (repository-relative, `""` at the
    /// root, else with a trailing `/`) and the bare `cfg` names its build
    /// script turns on in a default build, sorted: what the walker reads
    /// a `#[cfg(name)]` of the package's Rust files with
    /// (`facts::FactExtraction::build_flags`).
    pub fn rust_build_flags(&self) -> Vec<(String, Vec<String>)> {
        self.cargo
            .packages
            .iter()
            .map(|p| (p.dir.clone(), p.build_flags.clone()))
            .collect()
    }
}

/// Every family's rules for one pass, with their tables.
pub(crate) struct Rules {
    python: python::Python,
    ecmascript: ecmascript::EcmaScript,
    go: go::Go,
    pub(crate) rust: rust::Rust,
    unresolved: Unresolved,
}

impl Rules {
    /// The rules, their tables built from the world's files.
    pub(crate) fn new(files: &Table<FileIdx, WorldFile>, manifests: Manifests) -> Rules {
        Rules {
            python: python::Python::new(files),
            ecmascript: ecmascript::EcmaScript,
            go: go::Go::new(files),
            rust: rust::Rust::new(files, manifests.cargo),
            unresolved: Unresolved,
        }
    }

    /// A family's rules.
    pub(crate) fn of(&self, family: Family) -> &dyn LanguageRules {
        match family {
            Family::Python => &self.python,
            Family::EcmaScript => &self.ecmascript,
            Family::Go => &self.go,
            Family::Rust => &self.rust,
            Family::Unresolved => &self.unresolved,
        }
    }
}

/// The rules of languages without facts: no site reaches them.
struct Unresolved;

impl LanguageRules for Unresolved {
    fn is_self_receiver(&self, first: &str) -> bool {
        first == "this" || first == "super"
    }
}

/// An expression without leading `&`, `*` and `mut `, and its head: the
/// text before the first of `seps`.
pub(crate) fn type_head<'e>(e: &'e str, seps: &[char]) -> (&'e str, &'e str) {
    let e = e
        .trim()
        .trim_start_matches(['&', '*'])
        .trim_start_matches("mut ")
        .trim();
    (e, e.split(seps).next().unwrap_or_default())
}
