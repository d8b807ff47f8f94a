//! Resolution facts: what one file says about names, beyond its units.
//!
//! Extraction ([`extract`]) walks the tree-sitter tree the extractor already
//! built, once, on the indexing thread that parsed the file; the facts are
//! stored per file ([`FileFacts::encode`], a compact varint blob in the
//! `graph_facts` table) so resolution can run again later (after another
//! file changed) without re-reading or re-parsing this one.
//!
//! Expressions are kept in one small normalised syntax, the same for every
//! language: `a.b().c` — identifiers joined by `.` (Rust `::` and Go
//! selectors included), `()` after a segment that is called. `&`, `*`, `?`,
//! `await`, casts and parentheses are dropped. Anything else (literals,
//! indexing, lambdas) makes the expression unknown, and a call through it
//! is not guessed at.

use tree_sitter::Node;

use crate::lang::Language;

/// What a site does with its name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SiteKind {
    /// A call (`f()`, `a.f()`, `new F()`, `F::new()`).
    Call = 0,
    /// An import or `use`.
    Import = 1,
    /// A type annotation or base class.
    Type = 2,
    /// Any other use of a name that may be a definition (a function passed as a value, `a.f` without a call).
    Other = 3,
}

impl SiteKind {
    fn from_code(c: u64) -> SiteKind {
        match c {
            0 => SiteKind::Call,
            1 => SiteKind::Import,
            2 => SiteKind::Type,
            _ => SiteKind::Other,
        }
    }
}

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
}

/// One name an import statement binds in its scope.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Import {
    /// Byte offset of the statement (its scope is the innermost unit containing it).
    pub byte: u32,
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

/// Extracts the facts of one parsed file; `None` for languages without rules.
pub fn extract(language: Language, root: Node, text: &str) -> Option<FileFacts> {
    let _grammar = WalkedGrammar::set(language);
    let mut cx = Cx {
        text,
        facts: FileFacts::default(),
        line_starts: line_starts(text),
    };
    match language {
        Language::Python => super::resolve::python::walk(&mut cx, root),
        Language::JavaScript | Language::TypeScript | Language::Tsx => {
            super::resolve::ecmascript::walk(&mut cx, root)
        }
        Language::Rust => super::resolve::rust::walk(&mut cx, root),
        Language::Go => super::resolve::go::walk(&mut cx, root),
        Language::Markdown | Language::Text => return None,
    }
    let mut facts = cx.facts;
    facts.sites.sort_by_key(|s| (s.byte, s.kind as u8));
    facts.sites.dedup_by_key(|s| s.byte);
    Some(facts)
}

/// Field ids by name of one grammar, and its node kinds by id.
struct GrammarTables {
    fields: foldhash::HashMap<&'static str, std::num::NonZeroU16>,
    kinds: Vec<&'static str>,
}

thread_local! {
    /// The tables of the grammar whose tree this thread is walking.
    static WALKED: std::cell::Cell<Option<&'static GrammarTables>> = const { std::cell::Cell::new(None) };
}

/// The tables of `language`'s grammar, built once.
fn grammar_tables(language: Language) -> Option<&'static GrammarTables> {
    static TABLES: [std::sync::OnceLock<GrammarTables>; Language::ALL.len()] =
        [const { std::sync::OnceLock::new() }; Language::ALL.len()];
    let grammar = &language.spec()?.grammar;
    Some(TABLES[language as usize].get_or_init(|| {
        GrammarTables {
            fields: (1..=grammar.field_count() as u16)
                .filter_map(|id| {
                    let name = grammar.field_name_for_id(id)?;
                    Some((name, std::num::NonZeroU16::new(id)?))
                })
                .collect(),
            kinds: (0..grammar.node_kind_count() as u16)
                .map(|id| grammar.node_kind_for_id(id).unwrap_or_default())
                .collect(),
        }
    }))
}

/// Makes [`GrammarLookup`] use `language`'s tables on this thread until
/// dropped (then the tables before come back).
struct WalkedGrammar(Option<&'static GrammarTables>);

impl WalkedGrammar {
    fn set(language: Language) -> WalkedGrammar {
        WalkedGrammar(WALKED.with(|w| w.replace(grammar_tables(language))))
    }
}

impl Drop for WalkedGrammar {
    fn drop(&mut self) {
        WALKED.with(|w| w.set(self.0));
    }
}

/// A node's child by field name, and its kind, from the walked grammar's
/// tables. `Node::child_by_field_name` finds the field's id by comparing the
/// name with every field name of the grammar (`strncmp`, a hundred for
/// Rust), and `Node::kind` measures and checks the kind's C string, on
/// every call; the walkers ask several times per node.
pub(crate) trait GrammarLookup<'t> {
    /// The child in field `name` (`child_by_field_name`).
    fn field(&self, name: &str) -> Option<Node<'t>>;
    /// The node's kind (`kind`).
    fn kind_name(&self) -> &'static str;
}

impl<'t> GrammarLookup<'t> for Node<'t> {
    fn field(&self, name: &str) -> Option<Node<'t>> {
        let child = match WALKED.with(|w| w.get()).and_then(|t| t.fields.get(name)) {
            Some(id) => self.child_by_field_id(id.get()),
            None => self.child_by_field_name(name),
        };
        // The tables must be those of the grammar that made the tree.
        debug_assert_eq!(child, self.child_by_field_name(name));
        child
    }

    fn kind_name(&self) -> &'static str {
        let kind = WALKED
            .with(|w| w.get())
            .and_then(|t| t.kinds.get(usize::from(self.kind_id())).copied())
            .filter(|k| !k.is_empty())
            .unwrap_or_else(|| self.kind());
        debug_assert_eq!(kind, self.kind());
        kind
    }
}

fn line_starts(text: &str) -> Vec<usize> {
    let mut v = vec![0];
    v.extend(
        text.bytes()
            .enumerate()
            .filter(|&(_, b)| b == b'\n')
            .map(|(i, _)| i + 1),
    );
    v
}

/// The extraction context the per-language walkers share.
pub(crate) struct Cx<'a> {
    pub text: &'a str,
    pub facts: FileFacts,
    line_starts: Vec<usize>,
}

impl Cx<'_> {
    /// The text of a node.
    pub fn t(&self, n: Node) -> &str {
        self.text.get(n.byte_range()).unwrap_or("")
    }

    /// Records a site at `name_node`.
    pub fn site(&mut self, name_node: Node, recv: Option<String>, kind: SiteKind) {
        let name = self.t(name_node).to_string();
        self.site_named(name_node.start_byte(), name, recv, kind);
    }

    /// Records a site with an explicit name at `byte`.
    pub fn site_named(&mut self, byte: usize, name: String, recv: Option<String>, kind: SiteKind) {
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_alphanumeric() || c == '_' || c == '$')
        {
            return;
        }
        let line = self.line_starts.partition_point(|&s| s <= byte);
        let ls = self.line_starts[line - 1];
        let col = self
            .text
            .get(ls..byte)
            .map(|s| s.chars().count())
            .unwrap_or(0);
        self.facts.sites.push(Site {
            byte: byte as u32,
            line: line as u32,
            col: col as u32,
            name,
            recv,
            kind,
        });
    }

    /// Records an import binding that importers of this file also see.
    pub fn import(&mut self, at: Node, local: &str, module: &str, name: Option<&str>) {
        self.import_as(at, local, module, name, true);
    }

    /// Records an import binding; `exported`: see [`Import::exported`].
    pub fn import_as(
        &mut self,
        at: Node,
        local: &str,
        module: &str,
        name: Option<&str>,
        exported: bool,
    ) {
        if local.is_empty() {
            return;
        }
        self.facts.imports.push(Import {
            byte: at.start_byte() as u32,
            local: local.to_string(),
            module: module.to_string(),
            name: name.map(str::to_string),
            exported,
        });
    }

    /// Records a binding.
    pub fn bind(
        &mut self,
        at: usize,
        name: &str,
        expr: Option<String>,
        is_type: bool,
        field: bool,
    ) {
        let Some(expr) = expr.filter(|e| !e.is_empty()) else {
            return;
        };
        if name.is_empty() {
            return;
        }
        self.facts.bindings.push(Binding {
            byte: at as u32,
            name: name.to_string(),
            expr,
            is_type,
            field,
        });
    }

    /// Records a fact about the definition named by `name_node`.
    pub fn def_fact(&mut self, name_node: Node, expr: Option<String>, what: DefFactKind) {
        let Some(expr) = expr.filter(|e| !e.is_empty()) else {
            return;
        };
        let name = self.t(name_node).to_string();
        self.facts.defs.push(DefFact {
            byte: name_node.start_byte() as u32,
            name,
            expr,
            what,
        });
    }
}

/// The ancestors of the node [`walk_tree`] visits (up to the walk's root):
/// its parent in O(1), where tree-sitter's `Node::parent` descends from the
/// root of the tree on every call (15% of a Django index's CPU once).
pub(crate) struct Up<'a, 't>(&'a [Node<'t>]);

impl<'t> Up<'_, 't> {
    /// The parent.
    pub fn parent(&self) -> Option<Node<'t>> {
        self.0.last().copied()
    }

    /// The `k`-th ancestor above the parent (`nth(0)` is the parent).
    pub fn nth(&self, k: usize) -> Option<Node<'t>> {
        self.0.len().checked_sub(k + 1).map(|i| self.0[i])
    }

    /// The ancestors of the parent (this list without the parent).
    pub fn above(&self) -> Up<'_, 't> {
        Up(&self.0[..self.0.len().saturating_sub(1)])
    }

    /// Ancestors, nearest first.
    pub fn iter(&self) -> impl Iterator<Item = Node<'t>> + '_ {
        self.0.iter().rev().copied()
    }
}

/// Calls `f` on every named descendant of `n` (pre-order) with its
/// ancestors, without recursion limits.
pub(crate) fn walk_tree<'t>(root: Node<'t>, f: &mut dyn FnMut(Node<'t>, &Up<'_, 't>)) {
    let mut cursor = root.walk();
    let mut stack: Vec<Node<'t>> = Vec::with_capacity(64);
    loop {
        let node = cursor.node();
        if node.is_named() {
            f(node, &Up(&stack));
        }
        if cursor.goto_first_child() {
            stack.push(node);
            continue;
        }
        loop {
            if cursor.goto_next_sibling() {
                break;
            }
            if !cursor.goto_parent() {
                return;
            }
            stack.pop();
        }
    }
}

// ---- the stored form -----------------------------------------------------

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

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn get(&mut self) -> Option<u64> {
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

/// 2: imports carry `exported`. 3: sites in a blob of their own.
/// 4: compiled-out ranges. (Both blobs are stored compressed,
/// [`crate::store::blob`]; the format is that of what they inflate to.)
const FORMAT: u64 = 4;

/// A file's facts as stored: what resolving other files needs of it
/// (`world`: imports, bindings, definition facts, package) apart from its
/// sites (`sites`), so that a pass which resolves a few files after an edit
/// reads every file's `world` but only those files' `sites`. One string
/// table spans both: `world` holds the strings its facts use, `sites` only
/// the strings no world fact uses (its ids continue after `world`'s).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredFacts {
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

/// String `id` of a table, copied; `None` past its end (a damaged blob).
fn string_at(list: &[&str], id: u64) -> Option<String> {
    list.get(id as usize).map(|s| s.to_string())
}

/// An optional string (0 = none, else id + 1); `None` past the table's end.
fn opt_string_at(list: &[&str], id: u64) -> Option<Option<String>> {
    match id {
        0 => Some(None),
        id => string_at(list, id - 1).map(Some),
    }
}

/// Reads a string table (borrowed from `buf`).
fn get_strings<'b>(r: &mut Reader<'b>) -> Option<Vec<&'b str>> {
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
    /// Takes the facts of a macro body parsed on its own (bytes
    /// `start..end` of the file, see `lang::extract`) in place of what the
    /// walk of the whole file saw there, which was tokens.
    pub(crate) fn merge_body(&mut self, body: FileFacts, start: usize, end: usize) {
        let outside = |b: u32| (b as usize) < start || (b as usize) >= end;
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
        self.sites.extend(body.sites);
        self.sites.sort_by_key(|s| (s.byte, s.kind as u8));
        self.sites.dedup_by_key(|s| s.byte);
        self.disabled.extend(body.disabled);
        self.disabled.sort_unstable();
    }

    /// The compact stored form: string tables, then each list as varints
    /// (site positions delta-coded in source order).
    pub fn encode(&self) -> StoredFacts {
        let mut strings = Strings {
            ids: Default::default(),
            list: Vec::new(),
        };
        let mut body = Vec::new();
        put(&mut body, self.imports.len() as u64);
        for i in &self.imports {
            put(&mut body, u64::from(i.byte));
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
            put(&mut body, strings.id(&d.expr) << 2 | d.what as u64);
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
        }

        let mut world = Vec::with_capacity(body.len() + 64);
        put(&mut world, FORMAT);
        put_strings(&mut world, &strings.list[..world_strings]);
        world.extend_from_slice(&body);
        let mut sites = Vec::with_capacity(site_body.len() + 64);
        put(&mut sites, FORMAT);
        put_strings(&mut sites, &strings.list[world_strings..]);
        sites.extend_from_slice(&site_body);
        StoredFacts {
            world: crate::store::blob::pack(&world),
            sites: crate::store::blob::pack(&sites),
        }
    }

    /// Reads the stored form: always the `world` part, the sites only when
    /// `sites` is given (resolving other files needs no site of this one).
    /// `None` when a blob is damaged or of another format.
    pub fn decode(world: &[u8], sites: Option<&[u8]>) -> Option<FileFacts> {
        let world = crate::store::blob::unpack(world)?;
        let world = &*world;
        let mut r = Reader { buf: world, pos: 0 };
        if r.get()? != FORMAT {
            return None;
        }
        // Borrowed: a string is copied only when a decoded fact uses it.
        let mut list = get_strings(&mut r)?;
        let mut facts = FileFacts::default();
        {
            let s = |id: u64| string_at(&list, id);
            let opt = |id: u64| opt_string_at(&list, id);
            let n = r.get()? as usize;
            for _ in 0..n.min(world.len()) {
                let byte = r.get()? as u32;
                let local = r.get()?;
                facts.imports.push(Import {
                    byte,
                    local: s(local >> 1)?,
                    exported: local & 1 == 1,
                    module: s(r.get()?)?,
                    name: opt(r.get()?)?,
                });
            }
            let n = r.get()? as usize;
            for _ in 0..n.min(world.len()) {
                let byte = r.get()? as u32;
                let name = s(r.get()?)?;
                let e = r.get()?;
                facts.bindings.push(Binding {
                    byte,
                    name,
                    expr: s(e >> 2)?,
                    is_type: e & 1 == 1,
                    field: e & 2 == 2,
                });
            }
            let n = r.get()? as usize;
            for _ in 0..n.min(world.len()) {
                let byte = r.get()? as u32;
                let name = s(r.get()?)?;
                let e = r.get()?;
                facts.defs.push(DefFact {
                    byte,
                    name,
                    expr: s(e >> 2)?,
                    what: match e & 3 {
                        0 => DefFactKind::Base,
                        1 => DefFactKind::Returns,
                        _ => DefFactKind::ImplTrait,
                    },
                });
            }
            facts.package = opt(r.get()?)?;
            let n = r.get()? as usize;
            for _ in 0..n.min(world.len()) {
                let start = r.get()? as u32;
                let len = r.get()? as u32;
                facts.disabled.push((start, start.saturating_add(len)));
            }
        }
        let Some(sites) = sites else {
            return Some(facts);
        };
        let sites = crate::store::blob::unpack(sites)?;
        let sites = &*sites;
        let mut r = Reader { buf: sites, pos: 0 };
        if r.get()? != FORMAT {
            return None;
        }
        list.extend(get_strings(&mut r)?);
        let s = |id: u64| string_at(&list, id);
        let opt = |id: u64| opt_string_at(&list, id);
        let n = r.get()? as usize;
        let (mut byte, mut line) = (0u64, 0u64);
        for _ in 0..n.min(sites.len()) {
            byte = (byte + r.get()?) & 0xffff_ffff;
            line = (line + r.get()?) & 0xffff_ffff;
            let col = r.get()? as u32;
            let nk = r.get()?;
            let recv = opt(r.get()?)?;
            facts.sites.push(Site {
                byte: byte as u32,
                line: line as u32,
                col,
                name: s(nk >> 2)?,
                recv,
                kind: SiteKind::from_code(nk & 3),
            });
        }
        Some(facts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn facts_round_trip_through_the_stored_form() {
        let source = b"import os\nfrom a.b import c as d\n\nclass P(Base):\n    def __init__(self):\n        self.x = Q()\n\n    def run(self, y: Z) -> R:\n        p = P()\n        p.run(d(1))\n        os.path.join('a')\n";
        let parsed = crate::lang::parse_file("m.py", source);
        let mut facts = parsed.facts.expect("python has fact rules");
        facts.disabled = vec![(3, 9), (40, 41)];
        assert!(facts.sites.len() >= 4, "{facts:?}");
        assert!(!facts.imports.is_empty() && !facts.bindings.is_empty());
        let stored = facts.encode();
        let decoded = FileFacts::decode(&stored.world, Some(&stored.sites)).expect("decodes");
        assert_eq!(decoded, facts);
        assert!(FileFacts::decode(&[9, 9, 9], None).is_none());
        let mut damaged = stored.clone();
        damaged.sites.truncate(damaged.sites.len() / 2);
        assert!(FileFacts::decode(&damaged.world, Some(&damaged.sites)).is_none());
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
            let blob = crate::store::blob::unpack(blob).expect("a stored blob");
            let mut entry = vec![s.len() as u8];
            entry.extend_from_slice(s.as_bytes());
            blob.windows(entry.len()).any(|w| w == entry.as_slice())
        };
        assert!(has(&stored.world, "run") && !has(&stored.sites, "run"));
        assert!(has(&stored.sites, "join") && !has(&stored.world, "join"));
    }
}
