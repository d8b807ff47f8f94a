//! The facts a file states about names, beyond its units: the types
//! ([`FileFacts`] and its parts), the small expression syntax inside them,
//! and their encoded form.
//!
//! Expressions are kept in one small normalised syntax, the same for every
//! language: `a.b().c` — identifiers joined by `.` (Rust `::` and Go
//! selectors included), `()` after a segment that is called. `&`, `*`, `?`,
//! `await`, casts and parentheses are dropped. Anything else (literals,
//! indexing, lambdas) makes the expression unknown, and a call through it
//! is not guessed at. The markers below extend that syntax; the walkers
//! write them and the resolver reads them, so they live here, below both.
//!
//! The encoded form ([`FileFacts::encode`]) is two varint streams with one
//! string table across them; the store compresses and keeps them
//! (`graph_facts`), so resolution can run again later (after another file
//! changed) without re-reading or re-parsing this one.

pub use crate::lang::SiteKind;

use super::compact::WorldFacts;

/// One use of a name that resolution tries to bind to a definition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Site {
    /// Byte offset of the name.
    pub byte: u32,
    /// 1-based line of the name.
    pub line: u32,
    /// 0-based column of the name, in characters.
    pub col: u32,
    /// The name (`parse`).
    pub name: String,
    /// The receiver or path in front of it, normalised (`self.parser`, `Parser`, `a.b()`), if any.
    pub recv: Option<String>,
    /// Call, import, type or other.
    pub kind: SiteKind,
    /// A call's argument count plus one; 0 when unknown (a spread
    /// argument, a language that does not record it, or no call).
    pub args: u8,
}

/// One name an import statement binds in its scope.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Import {
    /// Byte offset of the statement (its scope is the innermost unit containing it).
    pub byte: u32,
    /// 1-based line of the statement (where a file's dependency on the
    /// imported module is shown).
    pub line: u32,
    /// The local name (`c` in `from a import b as c`; `*` for a glob import).
    pub local: String,
    /// The module as written (`a`, `..pkg.mod`, `./x`, `crate::a::b`, `net/http`).
    pub module: String,
    /// The imported name inside the module; `None` when the module itself is bound.
    pub name: Option<String>,
    /// Whether importers of this file see the name too: Python module
    /// attributes, Rust `use` items, ES `export … from` / `export { x }`;
    /// not a plain ES `import`.
    pub exported: bool,
}

/// A name bound to a type or a value expression inside a scope.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Binding {
    /// Byte offset of the binding (its scope is the innermost unit containing it;
    /// for a field, the innermost type-like unit).
    pub byte: u32,
    /// The bound name (`p`, or the field name for a field).
    pub name: String,
    /// The type (annotation) or value (assignment) expression.
    pub expr: String,
    /// Whether `expr` is a type (annotation) rather than a value.
    pub is_type: bool,
    /// Whether this is a field of the enclosing type (`self.x = …`, `x: T` in a struct).
    pub field: bool,
}

/// A fact about a definition: its base types, return type or implemented trait.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DefFact {
    /// Byte offset of the definition's name (the unit is the innermost one containing it with that name).
    pub byte: u32,
    /// The definition's name.
    pub name: String,
    /// Base, return or trait type expression.
    pub expr: String,
    /// Which fact.
    pub what: DefFactKind,
}

/// The kind of a [`DefFact`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DefFactKind {
    /// A base class, extended/implemented type, embedded field or supertrait.
    Base = 0,
    /// The type a function returns.
    Returns = 1,
    /// The trait an `impl` block implements (Rust).
    ImplTrait = 2,
    /// The path of the type an `impl` block is for, when it is a path
    /// (Rust `impl Trait for crate::X`: `X` alone may be no name in scope).
    ImplType = 3,
    /// How many arguments a method takes, `min:max` (`max` is `*` with a
    /// rest parameter): TypeScript / JavaScript, for the unique-name guess.
    Arity = 4,
    /// The function is an accessor read as a field (a TypeScript /
    /// JavaScript `get x()`): `o.x` without a call is what it returns.
    Getter = 5,
    /// Where a Rust `mod name;` with `#[path = "…"]` is, as written
    /// (relative to the declaring file's folder).
    ModulePath = 6,
    /// A Rust item under a `cfg` the walker cannot decide, because it
    /// names a key a build script may set (`fast_arithmetic = "64"`, which
    /// serde_json's `build.rs` prints as `cargo:rustc-cfg=…`): the
    /// predicate, which the resolver evaluates with the package's script.
    Cfg = 7,
}

/// Everything resolution needs to know about one file, besides its units.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FileFacts {
    /// Uses of names, in source order.
    pub sites: Vec<Site>,
    /// Import bindings.
    pub imports: Vec<Import>,
    /// Local, parameter and field bindings.
    pub bindings: Vec<Binding>,
    /// Bases, return types, implemented traits.
    pub defs: Vec<DefFact>,
    /// The file's package (Go `package x`), if the language declares one.
    pub package: Option<String>,
    /// Byte ranges of code compiled out (Rust items under a `cfg` that is
    /// false in a default build): no facts come from them, and resolution
    /// ignores the units inside them.
    pub disabled: Vec<(u32, u32)>,
}

// ---- markers inside expressions -----------------------------------------
// Written by the walkers (Rust's, Python's, ECMAScript's), read by the
// resolver; every language's expressions share them.

/// Marks the trait of a qualified path's type (`Error~Error` for
/// `<Error as serde::de::Error>`): the resolver prefers that trait's impl
/// over an inherent method of the same name, and ignores it otherwise.
pub const TRAIT_HINT: char = '~';

/// Separates a path receiver from the call's first argument in a site's
/// receiver (`serde::ser::SerializeSeq|self`): the resolver tries the
/// path, then the argument's type, for fully qualified trait calls.
pub const UFCS_SEP: char = '|';

/// Marks the first segment of a path that a local of the same name could be
/// mistaken for (`scheduler^.Handle`): the resolver looks it up past the
/// locals (the Rust walker writes it only when such a local exists).
pub const PATH_HEAD: char = '^';

/// The stored return type of a function returning a tuple (`-> (A, B)`,
/// also inside `Result` / `Option`): this prefix, then the element types
/// separated by `;` (empty where unknown), then `)`. A call of such a
/// function is no value itself; `f.#0` is its first element (the binding
/// of `let (a, b) = f(x)?`).
pub const TUPLE: &str = "#tuple(";

/// Pseudo-fields that name what a collection holds: `values#elem` is an
/// item of the `values: Vec<Item>` field (or local), `m#k` / `m#v` a key /
/// value of a map. Bindings of `for` patterns and iterator closures point
/// at them, so `for v in &self.values { v.f() }` finds `Item::f`.
pub const ELEM: &str = "#elem";

/// The key pseudo-field of a map (`m#k`) or of a map's entry (`entry#k`,
/// what `entry.key()` gives; see [`ELEM`]).
pub const KEY: &str = "#k";

/// The value pseudo-field of a map (`m#v`) or of an iterator over its
/// pairs (see [`ELEM`]).
pub const VALUE: &str = "#v";

/// The name prefix of the item bindings of what a function returns
/// (`#ret#elem` for `-> Vec<T>`, `#ret#k#elem` for `-> Vec<(Vec<&A>, B)>`,
/// the names [`ELEM`] gives a field or local, after this prefix), bound at
/// the function's name, so their scope is the function. A call's items
/// are written `f()#elem` (`sheet.rows()#elem`, `parse()#k`): an item of
/// what that call returns, that binding of the function, else the item
/// the returned type has as a field (an alias of a collection).
pub const RETURNED: &str = "#ret";

/// The pseudo-field that names the standard-library wrapper a Rust type
/// is written in when the facts read through it (`x#std` is `Option` for
/// `x: Option<Key>`, whose binding is `Key`; `#ret#std` is `Result` for a
/// function `-> Result<K, E>`): a method of a repository trait implemented
/// for that wrapper (`impl<T> Ext<T> for Option<T>`) is called on it.
pub const STD_WRAPPER: &str = "#std";

/// What `T#std` ([`STD_WRAPPER`]) is in a blanket `impl<T> Tr for T`
/// (bound at the impl's type, so its scope is the impl): every type.
pub const BLANKET: &str = "*";

/// A site's receiver that names the module an import reads from
/// (`import:./x`, `import:crate.a`): the name is looked up in that module.
pub const IMPORT_RECV: &str = "import:";

/// The module of an import that names the importing file itself: an
/// ECMAScript `export { h as jsx }` of a local `h` makes `jsx` a member of
/// the module that is `h` (an import of `h` from this module, exported).
pub const OWN_MODULE: &str = "#own";

/// The name of the local an ECMAScript cast stands for: `(x as T)` at byte
/// 120 is the expression `#as120`, and a type binding of that name (`T`)
/// sits at the cast's byte, so a call on the cast reads `T`'s members.
pub const CAST: &str = "#as";

/// Ends the name of a type binding that says what calling a value gives,
/// for a value that is no unit: `isMap()` bound to `Map` for `var isMap =
/// make() as (x: any) => x is Map` (an ECMAScript type guard held by a
/// `var`). A call `isMap(x)` still resolves to nothing; only what the call
/// narrows reads it.
pub const CALL_RESULT: &str = "()";

/// Separates the alternatives of a binding's value that is one of several
/// (`x` after `isA(x) || isB(x)` is `isA()∪isB()`): the value is each
/// alternative's.
pub const UNION: char = '∪';

/// Starts a binding's value that is every one of several, separated by
/// [`UNION`] (`#each:a∪b∪c` for `func` in `for func in [a, b, c]:`): a
/// call through it calls each alternative, so each one known is an edge
/// of its own (resolved, not ambiguous), and one unknown is skipped.
pub const EACH: &str = "#each:";

/// Opens the type arguments of a generic type as ECMAScript's facts write
/// it (`Mutable⟨AnyCalendarDate⟩` for `Mutable<AnyCalendarDate>`,
/// arguments separated by `,`, one [`type_arguments`] can split; an
/// argument no type is read of is empty), closed by [`APPLIED_END`]: the
/// resolver reads it as the generic itself, unless the generic is a type
/// alias that keeps an argument's members ([`KEEPS`]).
pub const APPLIED: char = '⟨';

/// Closes the type arguments [`APPLIED`] opens.
pub const APPLIED_END: char = '⟩';

/// The base fact of a type alias that has the members of one of its type
/// arguments (`#keeps:0`): a homomorphic mapped type (`type Mutable<T> =
/// {-readonly [P in keyof T]: T[P]}`) changes its argument's modifiers,
/// not its members' types, so a value of `Mutable<X>` has `X`'s members.
pub const KEEPS: &str = "#keeps:";

/// The pseudo-item of a function-typed value: what calling it gives
/// (`#ret#call`, bound in a function declared `iterator(): () => T`, is
/// `T`; see [`RETURNED`]), so `next()` after `const next =
/// this.iterator()` is a `T`.
pub const CALLED: &str = "#call";

/// The name of the binding in which an ECMAScript generic class or
/// interface lists its type parameters, in order (`T,M` for `class
/// Chain<T, M>`; no identifier can be this name): a callback passed to a
/// method of a value typed `Chain<Bead>` whose parameter the method's
/// signature types `T` gets a `Bead` (`World::generic_parameter`).
pub const TYPE_PARAMS: &str = "#<>";

/// `s` split at each `sep` outside [`APPLIED`] … [`APPLIED_END`]: the
/// alternatives of a union (`A∪Mutable⟨#each:B∪C⟩` is `A` and
/// `Mutable⟨#each:B∪C⟩`), or the arguments of a generic type.
pub fn split_top(s: &str, sep: char) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (i, c) in s.char_indices() {
        if c == APPLIED {
            depth += 1;
        } else if c == APPLIED_END {
            depth = depth.saturating_sub(1);
        } else if c == sep && depth == 0 {
            out.push(&s[start..i]);
            start = i + c.len_utf8();
        }
    }
    out.push(&s[start..]);
    out
}

/// A generic type written with its arguments ([`APPLIED`]) at the head of
/// `e`: the generic's name, its arguments, and what follows the closing
/// [`APPLIED_END`] (`.member`, or nothing). `None` when `e` starts with no
/// such type (a union, a marker, a plain path).
pub fn type_arguments(e: &str) -> Option<(&str, Vec<&str>, &str)> {
    let open = e.find(APPLIED)?;
    let head = &e[..open];
    if head.is_empty()
        || !head
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '_' | '$' | '.'))
    {
        return None;
    }
    let mut depth = 0usize;
    for (i, c) in e[open..].char_indices() {
        if c == APPLIED {
            depth += 1;
        } else if c == APPLIED_END {
            depth -= 1;
            if depth == 0 {
                let inner = &e[open + APPLIED.len_utf8()..open + i];
                let rest = &e[open + i + APPLIED_END.len_utf8()..];
                return Some((head, split_top(inner, ','), rest));
            }
        }
    }
    None
}

/// The call a subscript is written as (`x[k]` is `x.__getitem__()`,
/// Python's facts): its result on a repository class that defines the
/// method, else an item of the collection
/// ([`crate::resolve::lang::Conventions::item_methods`]). A receiver read
/// through one is never guessed: an item of an unknown collection is as
/// unknown as before the subscript was read.
pub const SUBSCRIPT_CALL: &str = "__getitem__()";

/// Starts an expression read at another place of the same file
/// (`#at812:match`: `match` as the scope around byte 812 sees it): an
/// argument of a call, as the parameter it is passed to.
pub const AT: &str = "#at";

/// Names an argument's position: a function's binding `#arg:0` is the
/// declared type of its first parameter, and the receiver
/// `createRetryer#arg:0` is what the first argument of a call of
/// `createRetryer` is written for (an object literal's properties are
/// members of that type).
pub const ARG: &str = "#arg:";

/// A literal as a call's first argument, by its type (`#lit:str` for
/// `T::from("x")`; `int`, `float`, `bool`, `char`): the resolver matches
/// it with the first parameter's type as written, to choose among `From`
/// impls.
pub const LITERAL: &str = "#lit:";

/// Separates the alternatives of a binding's value of which the first
/// one known is meant (`m#k¦m.remove_entry.#0` for `a` in `Some((a, b)) =
/// m.remove_entry(k)`: a key of the map `m`, else the first element of the
/// tuple `m`'s own `remove_entry` returns).
pub const FIRST_KNOWN: char = '¦';

/// The stored return type of a function that makes type guards from a
/// class (`function make<T>(c: new () => T): (x: any) => x is T`): this
/// prefix, then the index of the parameter the guarded type comes from
/// (`#guard-of1`). What a call of the guard it returns gives is an
/// instance of that argument; see [`GUARD_CALL`].
pub const GUARD_OF: &str = "#guard-of";

/// The stored return type of a constant that holds what a call returns
/// (`const isT = make("T", T)`), when that call may make a guard
/// ([`GUARD_OF`]): this prefix, the callee, then each argument's
/// expression (empty where it is none), separated by `;`, then `)`.
pub const GUARD_CALL: &str = "#guard-call(";

/// A binding's value that is the parameter of its name (`@param:db`, a
/// Python parameter without annotation): a pytest fixture, if one is found.
pub const PARAM_VALUE: &str = "@param:";

/// A binding's value that ends an earlier binding of its name in the same
/// unit without a value of its own: the name is looked up as if neither
/// were there (ECMAScript: after a callback `(resolve) => …` that is no
/// unit, `resolve` is the outer name again).
pub const UNBOUND: &str = "#unbound";

// ---- the encoded form -----------------------------------------------------

fn put(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

struct Strings<'a> {
    ids: foldhash::HashMap<&'a str, u64>,
    list: Vec<&'a str>,
}

impl<'a> Strings<'a> {
    fn id(&mut self, s: &'a str) -> u64 {
        let next = self.list.len() as u64;
        *self.ids.entry(s).or_insert_with(|| {
            self.list.push(s);
            next
        })
    }
    fn opt(&mut self, s: Option<&'a str>) -> u64 {
        s.map_or(0, |s| self.id(s) + 1)
    }
}

pub(super) struct Reader<'a> {
    pub(super) buf: &'a [u8],
    pub(super) pos: usize,
}

impl Reader<'_> {
    pub(super) fn get(&mut self) -> Option<u64> {
        let mut v = 0u64;
        let mut shift = 0;
        loop {
            let b = *self.buf.get(self.pos)?;
            self.pos += 1;
            v |= u64::from(b & 0x7f) << shift;
            if b < 0x80 {
                return Some(v);
            }
            shift += 7;
            if shift > 63 {
                return None;
            }
        }
    }
}

/// 2: imports carry `exported`. 3: sites in a stream of their own.
/// 4: compiled-out ranges. 5: imports carry their line. 6: sites carry
/// their argument count, definition facts a third kind bit. 7: getters
/// ([`DefFactKind::Getter`]). (The store keeps both streams compressed; the
/// format is that of what they inflate to.)
pub(super) const FORMAT: u64 = 7;

/// A file's facts encoded: what resolving other files needs of it
/// (`world`: imports, bindings, definition facts, package) apart from its
/// sites (`sites`), so that a pass which resolves a few files after an edit
/// reads every file's `world` but only those files' `sites`. One string
/// table spans both: `world` holds the strings its facts use, `sites` only
/// the strings no world fact uses (its ids continue after `world`'s).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EncodedFacts {
    /// Imports, bindings, definition facts and package.
    pub world: Vec<u8>,
    /// Uses of names.
    pub sites: Vec<u8>,
}

fn put_strings(out: &mut Vec<u8>, list: &[&str]) {
    put(out, list.len() as u64);
    for s in list {
        put(out, s.len() as u64);
        out.extend_from_slice(s.as_bytes());
    }
}

/// Reads a string table (borrowed from `buf`).
pub(super) fn get_strings<'b>(r: &mut Reader<'b>) -> Option<Vec<&'b str>> {
    let n = r.get()? as usize;
    let mut list = Vec::with_capacity(n.min(r.buf.len()));
    for _ in 0..n {
        let len = r.get()? as usize;
        let bytes = r.buf.get(r.pos..r.pos.checked_add(len)?)?;
        list.push(std::str::from_utf8(bytes).ok()?);
        r.pos += len;
    }
    Some(list)
}

impl FileFacts {
    /// Takes the facts of a macro body parsed on its own (the byte ranges
    /// `parts` of the file, sorted, see `lang::extract`) in place of what
    /// the walk of the whole file saw there, which was tokens. Between
    /// parts (what the body's parse left out) the file's facts stay.
    pub(crate) fn merge_body(&mut self, body: FileFacts, parts: &[(usize, usize)]) {
        let Some(&(start, _)) = parts.first() else {
            return;
        };
        let outside = |b: u32| {
            !parts
                .iter()
                .any(|&(s, e)| s <= b as usize && (b as usize) < e)
        };
        // Each list keeps its order: the body's facts go where its bytes are.
        fn splice<T>(list: &mut Vec<T>, body: Vec<T>, start: usize, byte: impl Fn(&T) -> u32) {
            let at = list.partition_point(|x| (byte(x) as usize) < start);
            list.splice(at..at, body);
        }
        self.sites.retain(|x| outside(x.byte));
        self.imports.retain(|x| outside(x.byte));
        self.bindings.retain(|x| outside(x.byte));
        self.defs.retain(|x| outside(x.byte));
        splice(&mut self.imports, body.imports, start, |x| x.byte);
        splice(&mut self.bindings, body.bindings, start, |x| x.byte);
        splice(&mut self.defs, body.defs, start, |x| x.byte);
        if parts.len() > 1 {
            // What stayed between the parts was after `start`.
            self.imports.sort_by_key(|x| x.byte);
            self.bindings.sort_by_key(|x| x.byte);
            self.defs.sort_by_key(|x| x.byte);
        }
        self.sites.extend(body.sites);
        self.sites.sort_by_key(|s| (s.byte, s.kind as u8));
        self.sites.dedup_by_key(|s| s.byte);
        self.disabled.extend(body.disabled);
        self.disabled.sort_unstable();
    }

    /// Adds what a `macro_rules!` expansion declares (its bindings, its
    /// definitions' facts and compiled-out ranges), each byte at the file
    /// byte `place` gives. Its uses (sites, imports) are left out: they
    /// would all sit on the invocation's lines, where neither a reader nor
    /// rust-analyzer puts the macro body's own tokens, and the body's calls
    /// are found by name in the macro's definition already. Only a use
    /// named by a token of the invocation is kept, at that token
    /// ([`FileFacts::merge_token_sites`]).
    pub(crate) fn merge_expansion(
        &mut self,
        expansion: FileFacts,
        place: &dyn Fn(usize) -> usize,
        token: &dyn Fn(usize) -> Option<(usize, u32, u32)>,
    ) {
        self.merge_token_sites(&expansion.sites, place, token);
        let at = |b: u32| place(b as usize) as u32;
        // Each list keeps its order (as `merge_body`'s): the expansion's
        // facts go where the invocation is.
        let start = at(0);
        let bindings = expansion.bindings.into_iter().map(|b| Binding {
            byte: at(b.byte),
            ..b
        });
        let k = self.bindings.partition_point(|b| b.byte < start);
        self.bindings.splice(k..k, bindings);
        let defs = expansion.defs.into_iter().map(|d| DefFact {
            byte: at(d.byte),
            ..d
        });
        let k = self.defs.partition_point(|d| d.byte < start);
        self.defs.splice(k..k, defs);
        self.disabled.extend(
            expansion
                .disabled
                .into_iter()
                .map(|(start, end)| (at(start), at(end))),
        );
        self.disabled.sort_unstable();
    }

    /// The uses of an expansion whose name is a token of the invocation
    /// (`uri.$method()` with `path` passed for `$method`), reported at that
    /// token (`token` gives its file position), where rust-analyzer puts
    /// them too. Their byte is the one `place` gives, as the expansion's
    /// bindings', so the scope and the locals they read are the expanded
    /// unit's. The token is no call where it is written (`path = "/",`),
    /// so the use is a reference ([`SiteKind::Other`]), not a call site;
    /// the file's own reading of the token, if any, gives way to it.
    fn merge_token_sites(
        &mut self,
        sites: &[Site],
        place: &dyn Fn(usize) -> usize,
        token: &dyn Fn(usize) -> Option<(usize, u32, u32)>,
    ) {
        for s in sites {
            let Some((_, line, col)) = token(s.byte as usize) else {
                continue;
            };
            self.sites
                .retain(|f| !(f.line == line && f.col == col && f.name == s.name));
            let byte = place(s.byte as usize) as u32;
            let k = self.sites.partition_point(|f| f.byte <= byte);
            let kind = if s.kind == SiteKind::Call {
                SiteKind::Other
            } else {
                s.kind
            };
            let site = Site {
                byte,
                line,
                col,
                kind,
                args: 0,
                ..s.clone()
            };
            self.sites.insert(k, site);
        }
    }

    /// The compact encoded form: string tables, then each list as varints
    /// (site positions delta-coded in source order).
    pub fn encode(&self) -> EncodedFacts {
        let mut strings = Strings {
            ids: Default::default(),
            list: Vec::new(),
        };
        let mut body = Vec::new();
        put(&mut body, self.imports.len() as u64);
        for i in &self.imports {
            put(&mut body, u64::from(i.byte));
            put(&mut body, u64::from(i.line));
            put(&mut body, strings.id(&i.local) << 1 | u64::from(i.exported));
            put(&mut body, strings.id(&i.module));
            put(&mut body, strings.opt(i.name.as_deref()));
        }
        put(&mut body, self.bindings.len() as u64);
        for b in &self.bindings {
            put(&mut body, u64::from(b.byte));
            put(&mut body, strings.id(&b.name));
            put(
                &mut body,
                strings.id(&b.expr) << 2 | u64::from(b.is_type) | u64::from(b.field) << 1,
            );
        }
        put(&mut body, self.defs.len() as u64);
        for d in &self.defs {
            put(&mut body, u64::from(d.byte));
            put(&mut body, strings.id(&d.name));
            put(&mut body, strings.id(&d.expr) << 3 | d.what as u64);
        }
        put(&mut body, strings.opt(self.package.as_deref()));
        put(&mut body, self.disabled.len() as u64);
        for &(start, end) in &self.disabled {
            put(&mut body, u64::from(start));
            put(&mut body, u64::from(end.saturating_sub(start)));
        }
        let world_strings = strings.list.len();

        let mut site_body = Vec::new();
        put(&mut site_body, self.sites.len() as u64);
        let (mut last_byte, mut last_line) = (0u64, 0u64);
        for s in &self.sites {
            let byte = u64::from(s.byte);
            put(&mut site_body, byte.wrapping_sub(last_byte) & 0xffff_ffff);
            put(
                &mut site_body,
                u64::from(s.line).wrapping_sub(last_line) & 0xffff_ffff,
            );
            put(&mut site_body, u64::from(s.col));
            last_byte = byte;
            last_line = u64::from(s.line);
            let name = strings.id(&s.name);
            put(&mut site_body, name << 2 | s.kind as u64);
            put(&mut site_body, strings.opt(s.recv.as_deref()));
            put(&mut site_body, u64::from(s.args));
        }

        let mut world = Vec::with_capacity(body.len() + 64);
        put(&mut world, FORMAT);
        put_strings(&mut world, &strings.list[..world_strings]);
        world.extend_from_slice(&body);
        let mut sites = Vec::with_capacity(site_body.len() + 64);
        put(&mut sites, FORMAT);
        put_strings(&mut sites, &strings.list[world_strings..]);
        sites.extend_from_slice(&site_body);
        EncodedFacts { world, sites }
    }

    /// Reads the encoded form: always the `world` part, the sites only when
    /// `sites` is given (resolving other files needs no site of this one).
    /// `None` when a stream is damaged or of another format. (A resolution
    /// pass reads the `world` part as [`WorldFacts`], strings by id; this
    /// is that, with its strings copied.)
    pub fn decode(world: &[u8], sites: Option<&[u8]>) -> Option<FileFacts> {
        let compact = WorldFacts::decode(world)?;
        let mut facts = compact.to_file_facts();
        if let Some(sites) = sites {
            facts.sites = compact.decode_sites(sites)?;
        }
        Some(facts)
    }

    /// Only the sites of a file's two encoded streams (the `sites` stream
    /// names strings of the `world` stream's table, so both are needed);
    /// the same sites as [`FileFacts::decode`] gives.
    pub fn decode_sites(world: &[u8], sites: &[u8]) -> Option<Vec<Site>> {
        WorldFacts::decode(world)?.decode_sites(sites)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generic_arguments_split_outside_their_brackets() {
        // A union alternative that is a generic of a union stays whole.
        assert_eq!(
            split_top("A∪Mutable⟨#each:B∪C⟩∪D", UNION),
            ["A", "Mutable⟨#each:B∪C⟩", "D"]
        );
        assert_eq!(
            type_arguments("ns.Pair⟨Left⟨X,Y⟩,,Z⟩.member"),
            Some(("ns.Pair", vec!["Left⟨X,Y⟩", "", "Z"], ".member"))
        );
        // No generic at the head: a union, a marker, an unclosed list.
        assert_eq!(type_arguments("#each:Mutable⟨A⟩∪B"), None);
        assert_eq!(type_arguments("Plain.member"), None);
        assert_eq!(type_arguments("Open⟨A"), None);
    }

    #[test]
    fn facts_round_trip_through_the_encoded_form() {
        let source = b"import os\nfrom a.b import c as d\n\nclass P(Base):\n    def __init__(self):\n        self.x = Q()\n\n    def run(self, y: Z) -> R:\n        p = P()\n        p.run(d(1))\n        os.path.join('a')\n";
        let (_, facts) = crate::facts::parse_with_facts("m.py", source);
        let mut facts = facts.expect("python has fact rules");
        facts.disabled = vec![(3, 9), (40, 41)];
        assert!(facts.sites.len() >= 4, "{facts:?}");
        assert!(!facts.imports.is_empty() && !facts.bindings.is_empty());
        let stored = facts.encode();
        let decoded = FileFacts::decode(&stored.world, Some(&stored.sites)).expect("decodes");
        assert_eq!(decoded, facts);
        // The sites alone, as a resolution pass decodes them: the same.
        assert_eq!(
            FileFacts::decode_sites(&stored.world, &stored.sites).as_ref(),
            Some(&facts.sites)
        );
        assert!(FileFacts::decode(&[9, 9, 9], None).is_none());
        let mut damaged = stored.clone();
        damaged.sites.truncate(damaged.sites.len() / 2);
        assert!(FileFacts::decode(&damaged.world, Some(&damaged.sites)).is_none());
        assert!(FileFacts::decode_sites(&damaged.world, &damaged.sites).is_none());
        damaged.world.truncate(damaged.world.len() / 2);
        assert!(FileFacts::decode(&damaged.world, None).is_none());
        // Without sites: everything else, the same; and the site blob holds
        // no string the world part already has.
        let rest = FileFacts::decode(&stored.world, None).expect("decodes");
        assert_eq!(
            rest,
            FileFacts {
                sites: Vec::new(),
                ..facts.clone()
            }
        );
        // `run` (a return-type fact and the site `p.run`) is stored once, in
        // the world part; `join` (a site only) only in the sites part.
        let has = |blob: &[u8], s: &str| {
            let mut entry = vec![s.len() as u8];
            entry.extend_from_slice(s.as_bytes());
            blob.windows(entry.len()).any(|w| w == entry.as_slice())
        };
        assert!(has(&stored.world, "run") && !has(&stored.sites, "run"));
        assert!(has(&stored.sites, "join") && !has(&stored.world, "join"));
    }
}
