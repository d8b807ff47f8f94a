//! The tree walk every language's fact extraction shares: [`walk_tree_pruned`]
//! visits each named node with its ancestors ([`Up`]), and [`Cx`] records
//! what the per-language handlers find (sites, imports, bindings,
//! definition facts) with their lines and columns. [`GrammarLookup`] reads
//! fields and kinds from per-grammar tables instead of tree-sitter's
//! string searches.

use tree_sitter::Node;

use super::model::{Binding, DefFact, DefFactKind, FileFacts, Import, Site, SiteKind};
use crate::lang::Language;

/// Field ids by name of one grammar, and its node kinds by id.
struct GrammarTables {
    fields: foldhash::HashMap<&'static str, std::num::NonZeroU16>,
    kinds: Vec<&'static str>,
}

thread_local! {
    /// The tables of the grammar whose tree this thread is walking.
    static WALKED: std::cell::Cell<Option<&'static GrammarTables>> = const { std::cell::Cell::new(None) };
    /// Field names this thread looked up lately, with their ids ([`field_id`]).
    static FIELD_SLOTS: [std::cell::Cell<FieldSlot>; FIELD_SLOT_COUNT] =
        const { [const { std::cell::Cell::new(FieldSlot::EMPTY) }; FIELD_SLOT_COUNT] };
}

/// Slots of [`FIELD_SLOTS`] (a power of two).
const FIELD_SLOT_COUNT: usize = 64;

/// A field name found in a grammar's tables, and its id there.
#[derive(Clone, Copy)]
struct FieldSlot {
    /// The tables it was found in (compared by address only).
    tables: *const GrammarTables,
    name: &'static str,
    id: std::num::NonZeroU16,
}

impl FieldSlot {
    const EMPTY: FieldSlot = FieldSlot {
        tables: std::ptr::null(),
        name: "",
        id: std::num::NonZeroU16::MIN,
    };
}

/// The id of field `name` in `tables`. The walkers ask a few names
/// hundreds of thousands of times per repository: a slot chosen by the
/// name's length and end bytes keeps the last name found there, so most
/// lookups are a comparison of a few bytes instead of hashing the name and
/// probing the map (about 150 instructions each).
fn field_id(tables: &'static GrammarTables, name: &str) -> Option<std::num::NonZeroU16> {
    let bytes = name.as_bytes();
    let (&first, &last) = (bytes.first()?, bytes.last()?);
    let slot = (bytes.len() * 7 + usize::from(first) * 3 + usize::from(last)) % FIELD_SLOT_COUNT;
    FIELD_SLOTS.with(|slots| {
        let cached = slots[slot].get();
        if std::ptr::eq(cached.tables, tables) && cached.name == name {
            return Some(cached.id);
        }
        let (&key, &id) = tables.fields.get_key_value(name)?;
        slots[slot].set(FieldSlot {
            tables,
            name: key,
            id,
        });
        Some(id)
    })
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
pub(super) struct WalkedGrammar(Option<&'static GrammarTables>);

impl WalkedGrammar {
    pub(super) fn set(language: Language) -> WalkedGrammar {
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
        let child = match WALKED.with(|w| w.get()).and_then(|t| field_id(t, name)) {
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

/// The extraction context the per-language walkers share.
pub(crate) struct Cx<'a> {
    pub text: &'a str,
    pub facts: FileFacts,
    /// The byte where each line of `text` starts, `0` first.
    line_starts: &'a [usize],
    /// The bare `cfg` names the build script of the file's package turns
    /// on (Rust; empty elsewhere): a `#[cfg(name)]` of one holds.
    pub build_flags: &'a [String],
}

impl<'a> Cx<'a> {
    /// An empty context for `text`, whose lines start at `line_starts`.
    pub(super) fn new(text: &'a str, line_starts: &'a [usize]) -> Cx<'a> {
        debug_assert_eq!(line_starts.first(), Some(&0));
        debug_assert_eq!(
            line_starts.len(),
            1 + text.bytes().filter(|&b| b == b'\n').count()
        );
        Cx {
            text,
            facts: FileFacts::default(),
            line_starts,
            build_flags: &[],
        }
    }

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
        // An ECMAScript private name (`this.#dispatch()`) keeps its `#`: the
        // unit is named `#dispatch` too, and no other language's names
        // start with one.
        let bare = name.strip_prefix('#').unwrap_or(&name);
        if bare.is_empty()
            || !bare
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
            args: 0,
        });
    }

    /// Records the argument count of the call whose name is at `byte`, if
    /// its site is the last one recorded ([`Site::args`]).
    pub fn call_args(&mut self, byte: usize, args: Option<usize>) {
        if let (Some(s), Some(n)) = (self.facts.sites.last_mut(), args)
            && s.byte as usize == byte
            && s.kind == SiteKind::Call
        {
            s.args = u8::try_from(n + 1).unwrap_or(u8::MAX);
        }
    }

    /// Records a second use of the name at `node`, which already has a site
    /// (one site per byte is kept, [`crate::facts::extract`]): stored one
    /// byte further on, with the name's line and column.
    pub fn second_site(&mut self, node: Node, recv: Option<String>, kind: SiteKind) {
        let before = self.facts.sites.len();
        self.site(node, recv, kind);
        if self.facts.sites.len() > before
            && let Some(s) = self.facts.sites.last_mut()
        {
            s.byte += 1;
        }
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
            line: at.start_position().row as u32 + 1,
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

/// The ancestors of the node [`walk_tree_pruned`] visits (up to the walk's root):
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

/// Calls `f` on every named descendant of `root` (pre-order) with its
/// ancestors, without recursion limits; `f` also says whether the walk
/// enters the named node it is given (`false`: its descendants are not
/// visited). Each step of tree-sitter's cursor costs hundreds of
/// instructions (over half of a Python file's facts walk), so a walker
/// skips the subtrees it knows it never reads.
pub(crate) fn walk_tree_pruned<'t>(
    root: Node<'t>,
    f: &mut dyn FnMut(Node<'t>, &Up<'_, 't>) -> bool,
) {
    walk_nodes(root, f);
}

/// The walk of [`walk_tree_pruned`].
fn walk_nodes<'t>(root: Node<'t>, mut f: impl FnMut(Node<'t>, &Up<'_, 't>) -> bool) {
    let mut cursor = root.walk();
    let mut stack: Vec<Node<'t>> = Vec::with_capacity(64);
    loop {
        let node = cursor.node();
        let enter = !node.is_named() || f(node, &Up(&stack));
        if enter && cursor.goto_first_child() {
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

/// Test support: the facts `walk` gathers from `source` (a file of
/// `language`) with the grammar's tables set, as [`super::extract`] has
/// them before sorting.
#[cfg(test)]
pub(crate) fn walked_facts(
    language: Language,
    source: &str,
    walk: impl FnOnce(&mut Cx, Node),
) -> FileFacts {
    let mut parser = tree_sitter::Parser::new();
    parser
        .set_language(&language.spec().expect("a grammar").grammar)
        .expect("the grammar loads");
    let tree = parser.parse(source, None).expect("a tree");
    let line_starts: Vec<usize> = std::iter::once(0)
        .chain(source.match_indices('\n').map(|(i, _)| i + 1))
        .collect();
    let _grammar = WalkedGrammar::set(language);
    let mut cx = Cx::new(source, &line_starts);
    walk(&mut cx, tree.root_node());
    cx.facts
}

/// Test support: every fixture file of the repository (`tests/fixtures`)
/// whose extension is one of `extensions`, with its text.
#[cfg(test)]
pub(crate) fn fixture_sources(extensions: &[&str]) -> Vec<(std::path::PathBuf, String)> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures");
    let mut dirs = vec![root];
    let mut found = Vec::new();
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("fixtures are readable") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path
                .extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| extensions.contains(&e))
            {
                let text = std::fs::read_to_string(&path).expect("fixtures are UTF-8");
                found.push((path, text));
            }
        }
    }
    found.sort();
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every field name of every grammar, asked in turns across the
    /// languages (the same names, other ids) and across names that share a
    /// slot, three times over: each gets the id its grammar gives it.
    #[test]
    fn cached_field_ids_are_the_grammars() {
        let mut asked = 0;
        for round in 0..3 {
            for language in Language::ALL {
                let Some(tables) = grammar_tables(language) else {
                    continue;
                };
                let grammar = &language.spec().expect("tables come from a spec").grammar;
                for id in 1..=grammar.field_count() as u16 {
                    let Some(name) = grammar.field_name_for_id(id) else {
                        continue;
                    };
                    // A copy, not the table's own string: names match by content.
                    let copy = name.to_string();
                    assert_eq!(
                        field_id(tables, &copy),
                        grammar.field_id_for_name(name),
                        "{language:?} {name} round {round}"
                    );
                    asked += 1;
                }
                assert_eq!(field_id(tables, "no_such_field"), None);
                assert_eq!(field_id(tables, ""), None);
            }
        }
        assert!(asked > 300, "{asked} lookups");
    }
}
