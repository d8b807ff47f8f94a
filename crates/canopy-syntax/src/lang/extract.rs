//! Turns one file's bytes into units (handles) and references.
//!
//! **Architecture invariant: parsing never fails.** A file that does not
//! parse, a language without a grammar, or invalid UTF-8 still yields a file
//! unit and chunks, so every byte of text lands in some unit and is
//! reachable by text search.
//!
//! The per-language rules are tree-sitter queries (`queries/*.scm`) using
//! tags-query capture names:
//!
//! | capture | meaning |
//! |---|---|
//! | `@definition.<node_type>` | a unit: `function`, `method`, `class`, `struct`, `enum`, `trait`, `interface`, `impl`, `type`, `constant`, `module`, `macro`, `section`, `paragraph`, `code_block` |
//! | `@reference.call` / `@reference.import` / `@reference.type` | a reference (`ref_type` `call`, `import`, `type_ref`) |
//! | `@name` | the unit's or reference's name |
//! | `@qualifier` | a reference's receiver or module path (`authController` in `authController.authenticate()`); several are joined (see below) |
//! | `@receiver` | the type a method belongs to when it is not nested in it (Go) |
//! | `@trait` | the trait an `impl` block implements (Rust) |
//! | `@local.definition` + `@local.scope` | a name that only means something inside the scope node (a generic type parameter): type references to it there are dropped |
//!
//! Rules applied in code, the same for every language:
//! * a `function` whose parent unit is a class, struct, enum, trait,
//!   interface or impl becomes a `method`;
//! * a unit's span grows over wrapper nodes (`export_statement`,
//!   `decorated_definition`, …), directly preceding doc comments,
//!   attributes and decorators, and a comment that follows it on its last
//!   line; its preview starts at the line of its name;
//! * several `@qualifier` captures of one match (nested `use` lists, call
//!   chains inside macro arguments) form one qualifier: neighbours keep the
//!   `.` or `::` between them, others are joined with the language's member
//!   separator;
//! * an import's name is the last segment of its path (`std::fmt::Display`,
//!   `os.path`, `net/http`): the rest joins the qualifier;
//! * text outside every top-level unit (module docs, imports, top-level
//!   statements, comments) becomes `chunk` units of at most 50 lines;
//! * a unit's *own text* is its span minus its child units; it is what the
//!   full-text index stores for the unit, so nothing is indexed twice.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};
use streaming_iterator::StreamingIterator;
use tree_sitter::{Node, Parser, QueryCursor};

use super::{Language, LanguageSpec};
use crate::handle::{HandleId, content_identity};
use crate::text::{collapse_preview, fts_document, fts_document_owned};
use crate::tokens::count_tokens;

/// Lines per chunk for text files and for code outside any unit.
pub const CHUNK_LINES: usize = 50;
/// Lines shared by consecutive chunks of a text file.
pub const CHUNK_OVERLAP: usize = 10;
/// Preview length in bytes (before the ellipsis).
pub const PREVIEW_BYTES: usize = 100;

/// The kind of a unit. Stored as its [`NodeType::as_str`] name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NodeType {
    /// A whole file.
    File,
    /// A module or namespace (`mod foo { … }`, `namespace X`).
    Module,
    /// A free function, arrow function or function expression with a name.
    Function,
    /// A function inside a class, struct, impl, trait or interface (or with a Go receiver).
    Method,
    /// A class.
    Class,
    /// A struct.
    Struct,
    /// An enum.
    Enum,
    /// A Rust trait.
    Trait,
    /// An interface.
    Interface,
    /// A Rust `impl` block.
    Impl,
    /// A type alias or other type declaration.
    #[serde(rename = "type")]
    TypeAlias,
    /// A constant or static.
    Constant,
    /// A macro definition.
    Macro,
    /// A Markdown section (heading and everything up to the next heading of the same or higher level).
    Section,
    /// A Markdown code block.
    CodeBlock,
    /// A Markdown paragraph.
    Paragraph,
    /// A run of lines: text files, and code outside every unit.
    Chunk,
}

impl NodeType {
    /// Every node type, in a stable order.
    pub const ALL: [NodeType; 17] = [
        NodeType::File,
        NodeType::Module,
        NodeType::Function,
        NodeType::Method,
        NodeType::Class,
        NodeType::Struct,
        NodeType::Enum,
        NodeType::Trait,
        NodeType::Interface,
        NodeType::Impl,
        NodeType::TypeAlias,
        NodeType::Constant,
        NodeType::Macro,
        NodeType::Section,
        NodeType::CodeBlock,
        NodeType::Paragraph,
        NodeType::Chunk,
    ];

    /// The stored and displayed name.
    pub fn as_str(self) -> &'static str {
        match self {
            NodeType::File => "file",
            NodeType::Module => "module",
            NodeType::Function => "function",
            NodeType::Method => "method",
            NodeType::Class => "class",
            NodeType::Struct => "struct",
            NodeType::Enum => "enum",
            NodeType::Trait => "trait",
            NodeType::Interface => "interface",
            NodeType::Impl => "impl",
            NodeType::TypeAlias => "type",
            NodeType::Constant => "constant",
            NodeType::Macro => "macro",
            NodeType::Section => "section",
            NodeType::CodeBlock => "code_block",
            NodeType::Paragraph => "paragraph",
            NodeType::Chunk => "chunk",
        }
    }

    /// Parses a stored or captured name.
    pub fn from_name(name: &str) -> Option<NodeType> {
        NodeType::ALL.into_iter().find(|t| t.as_str() == name)
    }

    /// Units without a name of their own; their identity is their text.
    pub fn is_anonymous(self) -> bool {
        matches!(
            self,
            NodeType::CodeBlock | NodeType::Paragraph | NodeType::Chunk
        )
    }

    /// Code symbols (what `symbol` searches): everything named except files and sections.
    pub fn is_symbol(self) -> bool {
        !self.is_anonymous() && !matches!(self, NodeType::File | NodeType::Section)
    }

    /// Types whose nested functions are methods.
    fn holds_methods(self) -> bool {
        matches!(
            self,
            NodeType::Class
                | NodeType::Struct
                | NodeType::Enum
                | NodeType::Trait
                | NodeType::Interface
                | NodeType::Impl
        )
    }
}

/// What a reference does with the name it mentions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RefType {
    /// A call (function, method, macro, constructor).
    Call,
    /// An import / use / require.
    Import,
    /// A mention of a type.
    TypeRef,
}

impl RefType {
    /// Stored and displayed name.
    pub fn as_str(self) -> &'static str {
        match self {
            RefType::Call => "call",
            RefType::Import => "import",
            RefType::TypeRef => "type_ref",
        }
    }

    /// Parses a stored name.
    pub fn from_name(name: &str) -> Option<RefType> {
        [RefType::Call, RefType::Import, RefType::TypeRef]
            .into_iter()
            .find(|t| t.as_str() == name)
    }
}

/// One indexed unit of a file.
#[derive(Clone, Debug)]
pub struct Unit {
    /// Stable id (see [`crate::handle`]).
    pub id: HandleId,
    /// Kind of unit.
    pub node_type: NodeType,
    /// Name as written (`authenticate`), for named units.
    pub name: Option<String>,
    /// Name with its parents (`AuthController.authenticate`; sections: `Guide > Install`).
    pub qualified_name: Option<String>,
    /// Index of the parent unit in [`ParsedFile::units`] (`None` only for the file unit).
    pub parent: Option<usize>,
    /// Byte offset of the first byte.
    pub start_byte: usize,
    /// Byte offset one past the last byte.
    pub end_byte: usize,
    /// First line, 1-based.
    pub start_line: u32,
    /// Last line, 1-based, inclusive.
    pub end_line: u32,
    /// Byte where the preview starts: the line of the name, so the preview
    /// starts at the signature. Only this offset is kept; [`Unit::preview`]
    /// (and the query side, from the file on disk) derive the text.
    pub preview_start: usize,
    /// BPE tokens of the whole span.
    pub token_count: u32,
    /// Text for the FTS `name` column.
    pub fts_name: String,
    /// Text for the FTS `body` column (the unit's own text plus identifier parts).
    pub fts_body: String,
}

/// One reference found in a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reference {
    /// The name referred to (`authenticate`).
    pub name: String,
    /// Receiver or module path (`authController`), if any.
    pub qualifier: Option<String>,
    /// Call, import or type reference.
    pub ref_type: RefType,
    /// Byte offset of the reference (qualifier included).
    pub start_byte: usize,
    /// Byte offset one past its end.
    pub end_byte: usize,
    /// 1-based line of the name.
    pub line: u32,
    /// Index of the innermost enclosing unit in [`ParsedFile::units`].
    pub enclosing: usize,
}

/// The result of parsing one file.
#[derive(Clone, Debug)]
pub struct ParsedFile {
    /// Detected language.
    pub language: Language,
    /// Units sorted by start (parents before children); `units[0]` is the file.
    pub units: Vec<Unit>,
    /// References sorted by position.
    pub refs: Vec<Reference>,
    /// Whether tree-sitter reported syntax errors (extraction still ran).
    pub had_syntax_errors: bool,
}

/// A second extraction over the syntax trees [`parse_file_with`] builds,
/// so a file is parsed once. The index passes the code graph's facts
/// (`graph::facts::FactExtraction`) here: `lang` runs it without knowing
/// what it extracts, and so depends on nothing above it.
pub trait TreeExtraction {
    /// What is extracted from one file.
    type Output;
    /// Extracts from one tree of `text`: the whole file, or one Rust item
    /// macro body parsed on its own. `None`: nothing for this language.
    /// `line_starts`: the byte where each line of `text` starts (`0`
    /// first), which the parser has computed already.
    fn extract(
        &self,
        language: Language,
        root: Node<'_>,
        text: &str,
        line_starts: &[usize],
    ) -> Option<Self::Output>;
    /// Puts what a macro body holds in place of what the walk of the whole
    /// file saw there (tokens): `parts`, the byte ranges of the file parsed
    /// as the body (sorted; one, `start..end`, unless parts of the body
    /// were left out of its parse, whose tokens stay the file's).
    fn merge_body(&self, file: &mut Self::Output, body: Self::Output, parts: &[(usize, usize)]);
    /// Adds what a `macro_rules!` expansion (its own text, extracted on
    /// its own) declares to the file's; `place` gives the file byte each
    /// byte of the expansion stands at (inside the invocation), and `token`
    /// the file position (byte, 1-based line, 0-based column in
    /// characters) of an expansion byte where a token of the invocation
    /// was substituted (`$method` of `uri.$method()`), if it is one.
    fn merge_expansion(
        &self,
        file: &mut Self::Output,
        expansion: Self::Output,
        place: &dyn Fn(usize) -> usize,
        token: &dyn Fn(usize) -> Option<(usize, u32, u32)>,
    );
}

/// No second extraction: [`parse_file`].
struct UnitsOnly;

impl TreeExtraction for UnitsOnly {
    type Output = ();
    fn extract(&self, _: Language, _: Node<'_>, _: &str, _: &[usize]) -> Option<()> {
        None
    }
    fn merge_body(&self, _: &mut (), _: (), _: &[(usize, usize)]) {}
    fn merge_expansion(
        &self,
        _: &mut (),
        _: (),
        _: &dyn Fn(usize) -> usize,
        _: &dyn Fn(usize) -> Option<(usize, u32, u32)>,
    ) {
    }
}

/// A definition found by the query, before units are assembled.
struct RawDef {
    node_type: NodeType,
    name: Option<String>,
    name_start: Option<usize>,
    receiver: Option<String>,
    trait_name: Option<String>,
    start: usize,
    end: usize,
    pattern: usize,
}

/// A unit's preview: up to [`PREVIEW_BYTES`], whitespace-collapsed, from
/// `preview_start` (inside the unit, before `end`) of the file's text view.
pub fn preview_text(text: &str, preview_start: usize, end: usize) -> String {
    let end = end.min(text.len());
    let Some(start) = (preview_start.min(end)..=end).find(|&s| text.is_char_boundary(s)) else {
        return String::new();
    };
    let preview_end = end.min(start + PREVIEW_BYTES * 4);
    let preview_end = (preview_end..=end)
        .find(|&e| text.is_char_boundary(e))
        .unwrap_or(end);
    collapse_preview(&text[start..preview_end], PREVIEW_BYTES)
}

impl Unit {
    /// The unit's preview (~100 bytes, one line, whitespace-collapsed, from
    /// the signature), given the [`text_view`] of its file.
    pub fn preview(&self, text: &str) -> String {
        preview_text(text, self.preview_start, self.end_byte)
    }
}

/// Byte-length-preserving text view of a file: invalid UTF-8 bytes become `?`
/// so that every byte offset refers to the same byte of the file on disk.
pub fn text_view(source: &[u8]) -> String {
    match std::str::from_utf8(source) {
        Ok(s) => s.to_string(),
        Err(_) => {
            let mut out = String::with_capacity(source.len());
            for chunk in source.utf8_chunks() {
                out.push_str(chunk.valid());
                out.extend(std::iter::repeat_n('?', chunk.invalid().len()));
            }
            out
        }
    }
}

struct Lines {
    starts: Vec<usize>,
}

impl Lines {
    fn new(text: &str) -> Lines {
        let mut starts = vec![0];
        starts.extend(
            text.bytes()
                .enumerate()
                .filter(|&(_, b)| b == b'\n')
                .map(|(i, _)| i + 1),
        );
        Lines { starts }
    }
    /// 1-based line of a byte offset.
    fn line_of(&self, byte: usize) -> u32 {
        (self.starts.partition_point(|&s| s <= byte)) as u32
    }
    fn line_start(&self, byte: usize) -> usize {
        self.starts[self.line_of(byte) as usize - 1]
    }
    /// Byte offset of the start of 1-based `line` (clamped to the end).
    fn start_of_line(&self, line: usize, len: usize) -> usize {
        self.starts.get(line - 1).copied().unwrap_or(len)
    }
}

thread_local! {
    static PARSER: RefCell<Parser> = RefCell::new(Parser::new());
}

/// Parses one file. Never fails; see the module docs.
pub fn parse_file(path: &str, source: &[u8]) -> ParsedFile {
    parse_file_with(path, source, &UnitsOnly).0
}

/// Parses one file and runs `extraction` on the same trees: the units and
/// references of [`parse_file`], and what `extraction` found (`None` when
/// the language has no grammar or `extraction` nothing for it).
pub fn parse_file_with<E: TreeExtraction>(
    path: &str,
    source: &[u8],
    extraction: &E,
) -> (ParsedFile, Option<E::Output>) {
    let language = Language::from_path(path);
    let text = text_view(source);
    let lines = Lines::new(&text);
    let mut had_syntax_errors = false;
    let mut defs = Vec::new();
    let mut refs = Vec::new();
    let mut extracted: Option<E::Output> = None;
    if let Some(spec) = language.spec() {
        let tree = PARSER.with(|parser| {
            let mut parser = parser.borrow_mut();
            parser.set_language(&spec.grammar).ok()?;
            let tree = parser.parse(&text, None)?;
            if tree.root_node().has_error()
                && matches!(language, Language::TypeScript | Language::Tsx)
                && let Some(repaired) = ts_member_separators(&text)
                && let Some(second) = parser.parse(&repaired, None)
                && error_count(second.root_node()) < error_count(tree.root_node())
            {
                // Same bytes but for `;` in place of a space: every node range
                // (and so every name, line and preview read from `text`) holds.
                return Some(second);
            }
            Some(tree)
        });
        if let Some(tree) = tree {
            had_syntax_errors = tree.root_node().has_error();
            let separator = language.member_separator();
            let root = tree.root_node();
            run_query(spec, separator, root, &text, &lines, &mut defs, &mut refs);
            extracted = extraction.extract(language, root, &text, &lines.starts);
            if language == Language::Rust {
                macro_rules_functions(spec, root, &text, &lines, &mut defs);
                let expanded =
                    macro_rules_items(spec, root, &text, &mut defs, extraction, extracted.as_mut());
                for body in item_macro_bodies(spec, root, &text, 0) {
                    let in_body = |b: usize| body.range.start_byte <= b && b < body.range.end_byte;
                    if expanded
                        .iter()
                        .any(|r| in_body(r.start) || r.contains(&body.range.start_byte))
                    {
                        // The macro's own expansion says what its body writes.
                        continue;
                    }
                    let parts: Vec<(usize, usize)> = ranges_without(body.range, &body.holes)
                        .iter()
                        .map(|r| (r.start_byte, r.end_byte))
                        .collect();
                    let inside = |b: usize| parts.iter().any(|&(s, e)| s <= b && b < e);
                    let root = body.tree.root_node();
                    let mut body_refs = Vec::new();
                    run_query(
                        spec,
                        separator,
                        root,
                        &text,
                        &lines,
                        &mut defs,
                        &mut body_refs,
                    );
                    // The token-tree patterns found calls in the body by name only;
                    // the parsed items give them with qualifiers, and types and imports too.
                    refs.retain(|r| !inside(r.start_byte));
                    refs.extend(body_refs);
                    if let (Some(all), Some(more)) = (
                        extracted.as_mut(),
                        extraction.extract(language, root, &text, &lines.starts),
                    ) {
                        extraction.merge_body(all, more, &parts);
                    }
                }
            }
        }
    }
    let parsed = assemble(path, language, &text, &lines, defs, refs, had_syntax_errors);
    (parsed, extracted)
}

/// The items of one Rust macro body, parsed on their own.
struct MacroBody {
    range: tree_sitter::Range,
    tree: tree_sitter::Tree,
    /// Parts of `range` left out of the parse whose tokens stay the
    /// file's ([`binding_lists`]), sorted.
    holes: Vec<tree_sitter::Range>,
}

/// Deepest macro-in-macro nesting whose items are parsed (`cfg_rt! {
/// cfg_unstable! { … } }`).
const MAX_MACRO_DEPTH: usize = 3;

/// Rust macro invocations that stand where items go and wrap items in
/// braces (`cfg_rt! { pub fn spawn… }`, tokio's and many crates' way to put
/// items under a feature): tree-sitter keeps a macro's body as a token tree,
/// so without this `spawn` would be no unit and no definition. Each body is
/// parsed again with only its bytes included (node positions stay those of
/// the file) and kept when it parses as items without error; a body that is
/// not Rust items (a DSL, `$`-patterns) is left as tokens. Bodies inside
/// kept bodies follow, up to [`MAX_MACRO_DEPTH`].
fn item_macro_bodies(spec: &LanguageSpec, root: Node, text: &str, depth: usize) -> Vec<MacroBody> {
    if depth >= MAX_MACRO_DEPTH {
        return Vec::new();
    }
    let mut ranges = Vec::new();
    // Item lists: the file, and the bodies of `mod`, `impl`, `trait` (and
    // of `extern` blocks), at any depth.
    for_each_item(root, |child| match child.kind() {
        "mod_item" | "impl_item" | "trait_item" | "foreign_mod_item" => {
            child.child_by_field_name("body")
        }
        "macro_invocation" => {
            ranges.extend(brace_body(child).map(|r| (r, static_refs(child, text), child)));
            None
        }
        _ => None,
    });
    let mut bodies = Vec::new();
    for (range, refs, invocation) in ranges {
        let mut tree = parse_ranges(spec, text, &[range]);
        let mut holes = Vec::new();
        if tree.as_ref().is_some_and(|t| t.root_node().has_error()) && !refs.is_empty() {
            // `lazy_static! { static ref NAME: T = …; }`: without its `ref`
            // tokens the body is `static` items (positions stay the file's).
            tree = parse_ranges(spec, text, &ranges_without(range, &refs));
        }
        if tree.as_ref().is_some_and(|t| t.root_node().has_error()) {
            let lists = binding_lists(invocation, text);
            if !lists.is_empty() {
                let again = parse_ranges(spec, text, &ranges_without(range, &lists));
                if again.as_ref().is_some_and(|t| !t.root_node().has_error()) {
                    (tree, holes) = (again, lists);
                }
            }
        }
        let Some(tree) = tree else { continue };
        let body_root = tree.root_node();
        if body_root.has_error() || body_root.named_child_count() == 0 {
            continue;
        }
        let inner = item_macro_bodies(spec, body_root, text, depth + 1);
        bodies.push(MacroBody { range, tree, holes });
        bodies.extend(inner);
    }
    bodies
}

/// The parameter lists of the `fn`s at the top level of a macro body that
/// bind with `in` (`fn f(x in 0..10) { … }`, `fn g()(x in any()) -> T {
/// … }`: how property-test macros draw a test's inputs from strategies),
/// which no Rust parameter list does: the first list's contents, or the
/// whole of a list after the first. Left out of the body's parse, the
/// rest reads as Rust items; their tokens stay the file's (calls by name).
fn binding_lists(invocation: Node, text: &str) -> Vec<tree_sitter::Range> {
    let tokens = top_tokens(invocation);
    let is_list =
        |n: &Node| n.kind() == "token_tree" && n.child(0).is_some_and(|open| open.kind() == "(");
    let mut out = Vec::new();
    let mut i = 0;
    while i + 2 < tokens.len() {
        if &text[tokens[i].byte_range()] != "fn" || tokens[i + 1].kind() != "identifier" {
            i += 1;
            continue;
        }
        let mut j = i + 2;
        while j < tokens.len() && is_list(&tokens[j]) {
            let list = tokens[j];
            let mut c = list.walk();
            let binds = list
                .children(&mut c)
                .any(|t| t.kind() != "token_tree" && &text[t.byte_range()] == "in");
            if binds {
                out.extend(if j == i + 2 {
                    brace_like_inside(list)
                } else {
                    Some(list.range())
                });
            }
            j += 1;
        }
        i = j;
    }
    out
}

/// The bytes between a token tree's opening and closing delimiters.
fn brace_like_inside(tokens: Node) -> Option<tree_sitter::Range> {
    let open = tokens.child(0)?;
    let close = tokens.child(tokens.child_count().checked_sub(1)?)?;
    (close.start_byte() > open.end_byte()).then(|| tree_sitter::Range {
        start_byte: open.end_byte(),
        end_byte: close.start_byte(),
        start_point: open.end_position(),
        end_point: close.start_position(),
    })
}

/// `text` parsed with only `ranges` included (sorted, not overlapping).
fn parse_ranges(
    spec: &LanguageSpec,
    text: &str,
    ranges: &[tree_sitter::Range],
) -> Option<tree_sitter::Tree> {
    PARSER.with(|parser| {
        let mut parser = parser.borrow_mut();
        parser.set_language(&spec.grammar).ok()?;
        parser.set_included_ranges(ranges).ok()?;
        let tree = parser.parse(text, None);
        // The parser is shared by every file of this thread.
        parser.set_included_ranges(&[]).ok()?;
        tree
    })
}

/// The tokens at the top level of a macro invocation's token tree (none
/// when it has no token tree).
fn top_tokens(invocation: Node) -> Vec<Node> {
    let mut cursor = invocation.walk();
    let Some(tokens) = invocation
        .children(&mut cursor)
        .find(|c| c.kind() == "token_tree")
    else {
        return Vec::new();
    };
    let mut cursor = tokens.walk();
    tokens.children(&mut cursor).collect()
}

/// The `ref` tokens right after a `static` token at the top level of a
/// macro invocation's token tree (`lazy_static!`'s `static ref NAME`).
fn static_refs(invocation: Node, text: &str) -> Vec<tree_sitter::Range> {
    let tokens = top_tokens(invocation);
    tokens
        .windows(2)
        .filter(|p| &text[p[0].byte_range()] == "static" && &text[p[1].byte_range()] == "ref")
        .map(|p| p[1].range())
        .collect()
}

/// `range` less the sub-ranges `holes` (sorted, inside it).
fn ranges_without(
    range: tree_sitter::Range,
    holes: &[tree_sitter::Range],
) -> Vec<tree_sitter::Range> {
    let mut out = Vec::new();
    let (mut start_byte, mut start_point) = (range.start_byte, range.start_point);
    for h in holes {
        out.push(tree_sitter::Range {
            start_byte,
            end_byte: h.start_byte,
            start_point,
            end_point: h.start_point,
        });
        (start_byte, start_point) = (h.end_byte, h.end_point);
    }
    out.push(tree_sitter::Range {
        start_byte,
        end_byte: range.end_byte,
        start_point,
        end_point: range.end_point,
    });
    out
}

/// Calls `visit` on each named child of `root` and, breadth first, of every
/// item list `visit` returns for a child (a `mod` or `impl` body): the one
/// walk both macro passes make over a Rust file's items.
fn for_each_item<'t>(root: Node<'t>, mut visit: impl FnMut(Node<'t>) -> Option<Node<'t>>) {
    let mut item_lists = vec![root];
    let mut cursor = root.walk();
    let mut i = 0;
    while i < item_lists.len() {
        let list = item_lists[i];
        i += 1;
        for child in list.named_children(&mut cursor) {
            item_lists.extend(visit(child));
        }
    }
}

/// The token that opens every `macro_rules!` definition: a file without
/// it defines no macro, and its items need no walk for definitions.
const MACRO_RULES: &str = "macro_rules!";

/// Functions a file's own `macro_rules!` make where it is invoked as an
/// item: with `macro_rules! empty { ($name:ident, $t:ty) => { fn $name(…) {…} }; }`,
/// `empty!(visit_bool, bool);` defines `fn visit_bool`, a unit at the
/// invocation named by the argument's token (where rust-analyzer puts it
/// too). Only the simple expansion: a macro of one rule whose pattern is a
/// comma-separated list of `$x:frag` and whose body has `fn $x` at its top
/// level, invoked in the file or a `mod` body (where items go).
fn macro_rules_functions(
    spec: &LanguageSpec,
    root: Node,
    text: &str,
    lines: &Lines,
    defs: &mut Vec<RawDef>,
) {
    if !text.contains(MACRO_RULES) {
        return;
    }
    let mut makers: Vec<(&str, Vec<usize>)> = Vec::new();
    let mut invocations = Vec::new();
    for_each_item(root, |child| {
        match child.kind() {
            "mod_item" => return child.child_by_field_name("body"),
            "macro_definition" => makers.extend(function_maker(child, text)),
            "macro_invocation" => invocations.push(child),
            "expression_statement" => invocations.extend(
                child
                    .named_child(0)
                    .filter(|c| c.kind() == "macro_invocation"),
            ),
            _ => {}
        }
        None
    });
    if makers.is_empty() {
        return;
    }
    for invocation in invocations {
        let Some(macro_name) = invocation.child_by_field_name("macro") else {
            continue;
        };
        let macro_name = node_text(macro_name, text);
        let Some((_, name_args)) = makers.iter().find(|(m, _)| *m == macro_name) else {
            continue;
        };
        let Some(args) = invocation
            .named_children(&mut invocation.walk())
            .find(|c| c.kind() == "token_tree")
        else {
            continue;
        };
        let groups = comma_groups(args);
        let (start, end) = extend_span(spec, invocation, text, lines);
        for &k in name_args {
            // The argument must be one identifier: anything else is no name.
            let Some([name]) = groups.get(k).map(Vec::as_slice) else {
                continue;
            };
            if name.kind() != "identifier" {
                continue;
            }
            defs.push(RawDef {
                node_type: NodeType::Function,
                name: Some(node_text(*name, text)),
                name_start: Some(name.start_byte()),
                receiver: None,
                trait_name: None,
                start,
                end,
                // After every query pattern: a span a pattern captured keeps its unit.
                pattern: spec.query.pattern_count(),
            });
        }
    }
}

/// Items a file's own `macro_rules!` write where invoked as an item, in
/// the file, a `mod` body or an `impl` body (methods there; see
/// [`super::expand`]), for every macro that [`function_maker`] does not
/// read: each expansion is parsed on its own and its units are placed
/// inside the invocation's span, in their order and nesting, a unit named
/// by an identifier of the invocation at that identifier (where
/// rust-analyzer puts it too); `extraction`'s facts of the expansion join
/// `extracted`'s the same way. Of a macro [`function_maker`] reads, only
/// the facts join (a use named by a token of the invocation, as http's
/// `test_parse! { …, path = "/", }` calling `uri.$method()`). Returns the
/// invocations expanded.
fn macro_rules_items<E: TreeExtraction>(
    spec: &LanguageSpec,
    root: Node,
    text: &str,
    defs: &mut Vec<RawDef>,
    extraction: &E,
    mut extracted: Option<&mut E::Output>,
) -> Vec<std::ops::Range<usize>> {
    if !text.contains(MACRO_RULES) {
        return Vec::new();
    }
    let (definitions, invocations) = macro_items(root);
    let makers = super::expand::makers(&definitions, text);
    // The one-rule function writers keep their reading where
    // `macro_rules_functions` reads them (items of the file and of `mod`
    // bodies); in an `impl` body (yaml-rust2's `impl Yaml {
    // define_as!(as_bool, bool, Boolean); }`) they write methods here.
    let function_makers: Vec<&str> = definitions
        .iter()
        .filter_map(|d| function_maker(*d, text))
        .map(|(name, _)| name)
        .collect();
    let mut expanded = Vec::new();
    if makers.is_empty() {
        return expanded;
    }
    let file_lines = Lines::new(text);
    for (invocation, in_impl) in invocations {
        let Some(maker) = super::expand::maker_of(&makers, invocation, text) else {
            continue;
        };
        // Read as functions by `macro_rules_functions`: only the facts of
        // the expansion join the file's (a use named by a token of the
        // invocation, and the bindings it reads), not its units.
        let functions_read = !in_impl && function_makers.contains(&maker.name());
        if functions_read && extracted.is_none() {
            continue;
        }
        let Some(expansion) = super::expand::expand(&makers, maker, invocation, text, text, 0)
        else {
            continue;
        };
        let Some(w) = Written::parse(spec, expansion, in_impl) else {
            continue;
        };
        let Some(place) = Placement::new(&w.defs, &w.marks, text, invocation.byte_range()) else {
            continue;
        };
        if let Some(all) = extracted.as_deref_mut()
            && let Some(more) =
                extraction.extract(Language::Rust, w.tree.root_node(), &w.text, &w.lines.starts)
        {
            let token = |b: usize| invocation_token(&w.marks, &file_lines, text, b);
            extraction.merge_expansion(all, more, &|b| place.at(b), &token);
        }
        if functions_read {
            continue;
        }
        for d in w.defs {
            defs.push(RawDef {
                name_start: d.name_start.map(|b| place.at(b)),
                start: place.at(d.start),
                end: place.at(d.end),
                // After every query pattern: a span a pattern captured keeps its unit.
                pattern: spec.query.pattern_count(),
                ..d
            });
        }
        expanded.push(invocation.byte_range());
    }
    expanded
}

/// The `macro_rules!` definitions of a Rust file (at its top level and in
/// `mod` bodies) and the macro invocations that stand where items go, each
/// with whether it is in an `impl` body.
fn macro_items(root: Node) -> (Vec<Node>, Vec<(Node, bool)>) {
    let mut definitions = Vec::new();
    let mut invocations = Vec::new();
    // Item lists with whether each is an `impl` body, known from the item
    // that holds it: `Node::parent` walks down from the root each time,
    // which per item of every Rust file cost tokio's index ~1.6% of its CPU.
    let mut item_lists = vec![(root, false)];
    let mut cursor = root.walk();
    let mut i = 0;
    while i < item_lists.len() {
        let (list, in_impl) = item_lists[i];
        i += 1;
        for child in list.named_children(&mut cursor) {
            match child.kind() {
                kind @ ("mod_item" | "impl_item") => {
                    item_lists.extend(child.child_by_field_name("body").map(|body| {
                        (
                            body,
                            kind == "impl_item" && body.kind() == "declaration_list",
                        )
                    }))
                }
                "macro_definition" if !in_impl => definitions.push(child),
                "macro_invocation" => invocations.push((child, in_impl)),
                "expression_statement" => invocations.extend(
                    child
                        .named_child(0)
                        .filter(|c| c.kind() == "macro_invocation")
                        .map(|c| (c, in_impl)),
                ),
                _ => {}
            }
        }
    }
    (definitions, invocations)
}

/// An expansion parsed: its text, tree, lines, the definitions it writes
/// and where the invocation's identifiers landed in it.
struct Written {
    text: String,
    tree: tree_sitter::Tree,
    lines: Lines,
    defs: Vec<RawDef>,
    marks: Vec<(usize, usize)>,
}

/// What an `impl` body's expansion is parsed inside: its items are
/// methods and associated items, which stand alone as no Rust file.
const IMPL_WRAPPER: &str = "impl Expansion {\n";

impl Written {
    /// `None` when the expansion is no Rust items without error, or writes
    /// no definition.
    fn parse(
        spec: &LanguageSpec,
        (text, marks): super::expand::Expansion,
        in_impl: bool,
    ) -> Option<Written> {
        let (text, marks) = if in_impl {
            let shift = IMPL_WRAPPER.len();
            (
                format!("{IMPL_WRAPPER}{text}\n}}"),
                marks.into_iter().map(|(m, f)| (m + shift, f)).collect(),
            )
        } else {
            (text, marks)
        };
        let tree = parse_rust(&text)?;
        if tree.root_node().has_error() {
            return None;
        }
        let lines = Lines::new(&text);
        let mut defs = Vec::new();
        run_query(
            spec,
            "::",
            tree.root_node(),
            &text,
            &lines,
            &mut defs,
            &mut Vec::new(),
        );
        if in_impl {
            // The wrapper is no unit; the file's own `impl` holds the methods.
            defs.retain(|d| !(d.start == 0 && d.node_type == NodeType::Impl));
        }
        (!defs.is_empty()).then_some(Written {
            text,
            tree,
            lines,
            defs,
            marks,
        })
    }
}

/// Where the bytes of an expansion stand in the file. The definitions'
/// starts, ends and names (the anchors) go, in order, on distinct bytes of
/// the invocation's span: a name the invocation passed (`marks`) at that
/// identifier when the order allows, the others spread between, the last
/// item's end at the invocation's end; any other byte at the place of the
/// last anchor at or before it. So each unit of
/// the expansion gets a span of its own, nested as in the expansion, and a
/// fact inside a unit stays inside it.
struct Placement {
    anchors: Vec<usize>,
    places: Vec<usize>,
}

impl Placement {
    /// `None` when the span has fewer bytes than the expansion has anchors.
    fn new(
        written: &[RawDef],
        marks: &[(usize, usize)],
        text: &str,
        span: std::ops::Range<usize>,
    ) -> Option<Placement> {
        let mut anchors: Vec<usize> = written
            .iter()
            .flat_map(|d| [Some(d.start), Some(d.end), d.name_start])
            .flatten()
            .collect();
        anchors.sort_unstable();
        anchors.dedup();
        let span_end = span.end;
        let bytes: Vec<usize> = span.filter(|&b| text.is_char_boundary(b)).collect();
        let (k, n) = (anchors.len(), bytes.len());
        if k == 0 || k > n {
            return None;
        }
        // Fixed points (anchor index, byte index), greedily in order, each
        // leaving room for the anchors between and after it.
        let names: Vec<usize> = written.iter().filter_map(|d| d.name_start).collect();
        let mut fixed: Vec<(usize, usize)> = Vec::new();
        for (a, &anchor) in anchors.iter().enumerate() {
            let Some(&(_, file)) = marks.iter().find(|(m, _)| *m == anchor) else {
                continue;
            };
            let Ok(b) = bytes.binary_search(&file) else {
                continue;
            };
            if !names.contains(&anchor) {
                continue;
            }
            let (la, lb) = fixed
                .last()
                .map_or((-1, -1), |&(a, b)| (a as i64, b as i64));
            let room_before = (a as i64 - la - 1) <= (b as i64 - lb - 1);
            let room_after = k - a <= n - b;
            if b as i64 > lb && room_before && room_after {
                fixed.push((a, b));
            }
        }
        let mut places = vec![0; k];
        let mut prev: (i64, i64) = (-1, -1);
        for &(fa, fb) in fixed.iter().chain([(k, n)].iter()) {
            let (pa, pb) = prev;
            let count = fa as i64 - pa - 1;
            let room = fb as i64 - pb - 1;
            for t in 0..count {
                let byte = pb + 1 + t * room / count;
                places[(pa + 1 + t) as usize] = bytes[byte as usize];
            }
            if fa < k {
                places[fa] = bytes[fb];
            }
            prev = (fa as i64, fb as i64);
        }
        // The expansion's last item ends where the invocation does, not
        // at a byte spread before its end: what the invocation passes
        // after the item's other anchors (`port = Port::from_str(…)`, the
        // last argument a written test body reads) stays inside the item.
        if let Some(last) = places.last_mut()
            && written.iter().any(|d| d.end == anchors[k - 1])
        {
            *last = (*last).max(span_end);
        }
        Some(Placement { anchors, places })
    }

    /// The file byte that expansion byte `b` stands at.
    fn at(&self, b: usize) -> usize {
        let k = self.anchors.partition_point(|&a| a <= b);
        self.places[k.saturating_sub(1)]
    }
}

/// Where expansion byte `b` stands in the file when a token of the
/// invocation was substituted there (`marks`, see [`Written`]): its file
/// byte, 1-based line and 0-based column in characters.
fn invocation_token(
    marks: &[(usize, usize)],
    lines: &Lines,
    text: &str,
    b: usize,
) -> Option<(usize, u32, u32)> {
    let &(_, file) = marks.iter().find(|&&(m, _)| m == b)?;
    let start = lines.line_start(file);
    let col = text.get(start..file)?.chars().count() as u32;
    Some((file, lines.line_of(file), col))
}

/// `text` parsed as Rust on its own (a macro's expansion).
pub(super) fn parse_rust(text: &str) -> Option<tree_sitter::Tree> {
    let spec = Language::Rust.spec()?;
    PARSER.with(|parser| {
        let mut parser = parser.borrow_mut();
        parser.set_language(&spec.grammar).ok()?;
        parser.parse(text, None)
    })
}

/// `macro_rules! name { (pattern) => { … fn $x … }; }` with one rule: the
/// macro's name and the positions (in the pattern's comma-separated list)
/// of the metavariables that name a function of the body.
fn function_maker<'t>(definition: Node, text: &'t str) -> Option<(&'t str, Vec<usize>)> {
    let name = definition.child_by_field_name("name")?;
    let mut cursor = definition.walk();
    let rules: Vec<Node> = definition
        .named_children(&mut cursor)
        .filter(|c| c.kind() == "macro_rule")
        .collect();
    let [rule] = rules.as_slice() else {
        return None;
    };
    let (pattern, body) = (
        rule.child_by_field_name("left")?,
        rule.child_by_field_name("right")?,
    );
    // Each comma-separated group of the pattern is one `$x:frag`.
    let mut params = Vec::new();
    for group in comma_groups(pattern) {
        let [binding] = group.as_slice() else {
            return None;
        };
        if binding.kind() != "token_binding_pattern" {
            return None;
        }
        params.push(node_text(binding.child_by_field_name("name")?, text));
    }
    let mut names = Vec::new();
    let mut cursor = body.walk();
    let tokens: Vec<Node> = body.children(&mut cursor).collect();
    for pair in tokens.windows(2) {
        if pair[0].kind() == "fn" && pair[1].kind() == "metavariable" {
            let var = node_text(pair[1], text);
            names.extend(params.iter().position(|p| *p == var));
        }
    }
    (!names.is_empty()).then(|| (&text[name.byte_range()], names))
}

/// The tokens between the delimiters of a token tree, split at its
/// top-level commas (a trailing comma makes no empty group).
fn comma_groups(tree: Node) -> Vec<Vec<Node>> {
    let mut groups = vec![Vec::new()];
    let mut cursor = tree.walk();
    let count = tree.child_count();
    for (i, token) in tree.children(&mut cursor).enumerate() {
        if i == 0 || i + 1 == count {
            continue; // the delimiters
        }
        if token.kind() == "," {
            groups.push(Vec::new());
        } else if let Some(last) = groups.last_mut() {
            last.push(token);
        }
    }
    if groups.last().is_some_and(Vec::is_empty) {
        groups.pop();
    }
    groups
}

/// The bytes between the braces of `name! { … }`.
fn brace_body(invocation: Node) -> Option<tree_sitter::Range> {
    let mut cursor = invocation.walk();
    let tokens = invocation
        .children(&mut cursor)
        .find(|c| c.kind() == "token_tree")?;
    let open = tokens.child(0)?;
    let close = tokens.child(tokens.child_count().checked_sub(1)?)?;
    if open.kind() != "{" || close.kind() != "}" {
        return None;
    }
    brace_like_inside(tokens)
}

/// ERROR and MISSING nodes in a tree.
fn error_count(root: Node) -> usize {
    let mut count = 0;
    let mut cursor = root.walk();
    loop {
        let node = cursor.node();
        if node.is_error() || node.is_missing() {
            count += 1;
        }
        if node.has_error() && cursor.goto_first_child() {
            continue;
        }
        loop {
            if cursor.goto_next_sibling() {
                break;
            }
            if !cursor.goto_parent() {
                return count;
            }
        }
    }
}

/// TypeScript lets interface and type-literal members be separated by line
/// breaks alone; the grammar's automatic semicolons do not cover a member
/// that starts with `(` or `<` (call and construct signatures), and one
/// such member turns the rest of the file into an error. This puts a `;`
/// in the first indentation byte of each such line after a line that can
/// end a member; the caller keeps the result only if it parses with fewer
/// errors. `None` when no line qualifies.
fn ts_member_separators(text: &str) -> Option<String> {
    let mut out = text.as_bytes().to_vec();
    let mut changed = false;
    let mut prev_can_end = false;
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let body = line.trim_end();
        let trimmed = body.trim_start();
        let code = trimmed.split("//").next().unwrap_or_default().trim_end();
        // Comment lines (`//`, `/** … */`, ` * …`) neither end a member nor start one.
        let comment = trimmed.starts_with("//")
            || trimmed.starts_with("/*")
            || trimmed.starts_with('*')
            || trimmed.ends_with("*/");
        if !trimmed.is_empty() && !comment {
            let indented = body.starts_with([' ', '\t']);
            if prev_can_end && indented && trimmed.starts_with(['(', '<']) {
                out[offset] = b';';
                changed = true;
            }
            prev_can_end = code.ends_with(|c: char| {
                c.is_alphanumeric() || matches!(c, '_' | '$' | '>' | ')' | ']' | '}')
            }) && !code.ends_with("=>");
        }
        offset += line.len();
    }
    if !changed {
        return None;
    }
    String::from_utf8(out).ok()
}

fn node_text(node: Node, text: &str) -> String {
    text[node.byte_range()].trim().to_string()
}

/// The text of a reference's `@qualifier` captures (see the module docs).
fn qualifier_text(qualifiers: &mut [Node], text: &str, separator: &str) -> Option<String> {
    qualifiers.sort_by_key(|q| q.start_byte());
    let mut out = String::new();
    let mut prev_end: Option<usize> = None;
    for q in qualifiers.iter() {
        let part = node_text(*q, text);
        if part.is_empty() {
            continue;
        }
        if let Some(prev_end) = prev_end {
            let between = text.get(prev_end..q.start_byte()).unwrap_or_default();
            out.push_str(if matches!(between, "." | "::") {
                between
            } else {
                separator
            });
        }
        out.push_str(&part);
        prev_end = Some(q.end_byte());
    }
    let out = collapse_preview(&out, PREVIEW_BYTES);
    (!out.is_empty()).then_some(out)
}

/// What one capture of an extraction query stands for (see the module
/// docs' table). Read once per compiled query from its capture names
/// ([`capture_roles`]), so that a match's captures are sorted by index, not
/// by comparing their names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CaptureRole {
    Name,
    Qualifier,
    LocalDefinition,
    LocalScope,
    Receiver,
    Trait,
    /// `@definition.<kind>`; `None` for a kind that is not a [`NodeType`]
    /// (the match is then dropped, as its unit would be junk).
    Definition(Option<NodeType>),
    /// `@reference.<kind>`; `None` for a kind other than `call`, `import`
    /// and `type` (the match is then dropped).
    Reference(Option<RefType>),
    /// Any other capture (helpers of predicates): ignored.
    Other,
}

/// The role of each capture of `query`, by capture index.
pub(crate) fn capture_roles(query: &tree_sitter::Query) -> Vec<CaptureRole> {
    query
        .capture_names()
        .iter()
        .map(|name| capture_role(name))
        .collect()
}

fn capture_role(name: &str) -> CaptureRole {
    match name {
        "name" => CaptureRole::Name,
        "qualifier" => CaptureRole::Qualifier,
        "local.definition" => CaptureRole::LocalDefinition,
        "local.scope" => CaptureRole::LocalScope,
        "receiver" => CaptureRole::Receiver,
        "trait" => CaptureRole::Trait,
        _ => {
            if let Some(kind) = name.strip_prefix("definition.") {
                CaptureRole::Definition(NodeType::from_name(kind))
            } else if let Some(kind) = name.strip_prefix("reference.") {
                CaptureRole::Reference(match kind {
                    "call" => Some(RefType::Call),
                    "import" => Some(RefType::Import),
                    "type" => Some(RefType::TypeRef),
                    _ => None,
                })
            } else {
                CaptureRole::Other
            }
        }
    }
}

fn run_query(
    spec: &LanguageSpec,
    separator: &str,
    root: Node,
    text: &str,
    lines: &Lines,
    defs: &mut Vec<RawDef>,
    refs: &mut Vec<Reference>,
) {
    let roles = &spec.capture_roles;
    let mut cursor = QueryCursor::new();
    let mut matches = cursor.matches(&spec.query, root, text.as_bytes());
    // Generic parameters: (name, scope start, scope end).
    let mut locals: Vec<(String, usize, usize)> = Vec::new();
    while let Some(m) = matches.next() {
        // The last `@definition.*` or `@reference.*` capture of the match.
        let mut kind: Option<(CaptureRole, Node)> = None;
        let (mut name, mut receiver, mut trait_name) = (None, None, None);
        let mut qualifiers: Vec<Node> = Vec::new();
        let (mut local, mut scope) = (None, None);
        for cap in m.captures {
            match roles[cap.index as usize] {
                CaptureRole::Name => name = name.or(Some(cap.node)),
                CaptureRole::Qualifier => qualifiers.push(cap.node),
                CaptureRole::LocalDefinition => local = local.or(Some(cap.node)),
                CaptureRole::LocalScope => scope = scope.or(Some(cap.node)),
                CaptureRole::Receiver => receiver = receiver.or(Some(cap.node)),
                CaptureRole::Trait => trait_name = trait_name.or(Some(cap.node)),
                role @ (CaptureRole::Definition(_) | CaptureRole::Reference(_)) => {
                    kind = Some((role, cap.node))
                }
                CaptureRole::Other => {}
            }
        }
        if let (Some(local), Some(scope)) = (local, scope) {
            locals.push((node_text(local, text), scope.start_byte(), scope.end_byte()));
        }
        let Some((kind, node)) = kind else { continue };
        if let CaptureRole::Definition(node_type) = kind {
            let Some(node_type) = node_type else {
                continue;
            };
            let name_text = name.map(|n| node_text(n, text)).filter(|s| !s.is_empty());
            if !node_type.is_anonymous() && name_text.is_none() {
                continue; // a named kind without a name is junk (e.g. a bare keyword)
            }
            let (start, mut end) = extend_span(spec, node, text, lines);
            if node.kind() == "setext_heading" {
                end = setext_section_end(node, text).max(end);
            }
            defs.push(RawDef {
                node_type,
                name: name_text,
                name_start: name.map(|n| n.start_byte()),
                receiver: receiver.map(|n| type_name(&node_text(n, text))),
                trait_name: trait_name.map(|n| node_text(n, text)),
                start,
                end,
                pattern: m.pattern_index,
            });
        } else if let CaptureRole::Reference(ref_type) = kind {
            let Some(ref_type) = ref_type else { continue };
            let Some(name_node) = name else { continue };
            let mut name_text = node_text(name_node, text)
                .trim_matches(|c| c == '"' || c == '\'' || c == '`')
                .to_string();
            let mut qualifier_text = qualifier_text(&mut qualifiers, text, separator);
            if ref_type == RefType::Import {
                // `a::b::c`, `os.path`, `net/http`: the last segment is the name.
                if let Some((q, n)) = split_last_segment(&name_text) {
                    qualifier_text = Some(match qualifier_text {
                        Some(outer) => format!("{outer}{separator}{q}"),
                        None => q.to_string(),
                    });
                    name_text = n.to_string();
                }
            }
            if name_text.is_empty() {
                continue;
            }
            let start = qualifiers
                .iter()
                .map(|q| q.start_byte())
                .fold(name_node.start_byte(), usize::min);
            refs.push(Reference {
                name: name_text,
                qualifier: qualifier_text.filter(|q| !q.is_empty()),
                ref_type,
                start_byte: start,
                end_byte: name_node.end_byte().max(start),
                line: lines.line_of(name_node.start_byte()),
                enclosing: 0,
            });
        }
    }
    refs.retain(|r| {
        r.ref_type != RefType::TypeRef
            || r.qualifier.is_some()
            || !locals
                .iter()
                .any(|(n, s, e)| *n == r.name && *s <= r.start_byte && r.end_byte <= *e)
    });
}

/// `*Server`, `Server[T]`, `&'a mut Foo<T>` → the bare type name.
fn type_name(text: &str) -> String {
    let trimmed = text.trim_start_matches(['*', '&', ' ']);
    let end = trimmed
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(trimmed.len());
    trimmed[..end].to_string()
}

/// Splits a path at its last separator: `/` when it has one (module
/// paths such as `./lib/util.js` or `net/http`), else `::` or `.`.
fn split_last_segment(path: &str) -> Option<(&str, &str)> {
    let separators: &[&str] = if path.contains('/') {
        &["/"]
    } else {
        &["::", "."]
    };
    let idx = separators
        .iter()
        .filter_map(|sep| path.rfind(sep).map(|i| (i, sep.len())))
        .max_by_key(|&(i, _)| i)?;
    let (q, n) = (&path[..idx.0], &path[idx.0 + idx.1..]);
    (!q.is_empty() && !n.is_empty()).then_some((q, n))
}

/// tree-sitter-md nests only ATX (`#`) headings into `section` nodes: a
/// setext heading (`Title` over `=====`) is a sibling of its content. Its
/// section runs to the next setext heading of the same or a higher level,
/// or to the next ATX section, whichever comes first.
fn setext_section_end(heading: Node, text: &str) -> usize {
    let level = |n: Node| {
        let mut cursor = n.walk();
        let h1 = n
            .children(&mut cursor)
            .any(|c| c.kind() == "setext_h1_underline");
        if h1 { 1 } else { 2 }
    };
    let own_level = level(heading);
    let mut end = heading.end_byte();
    let mut next = heading.next_sibling();
    while let Some(n) = next {
        if n.kind() == "section" || (n.kind() == "setext_heading" && level(n) <= own_level) {
            break;
        }
        end = n.end_byte();
        next = n.next_sibling();
    }
    let start = heading.start_byte();
    start + text[start..end].trim_end().len()
}

/// Grows a definition's span over single-definition wrappers, adjacent
/// leading doc comments / attributes / decorators, and a trailing comment
/// on its last line.
fn extend_span(spec: &LanguageSpec, node: Node, text: &str, lines: &Lines) -> (usize, usize) {
    let mut outer = node;
    // (`parent()` walks down from the root: not called when no kind could match.)
    while !spec.wrappers.is_empty()
        && let Some(parent) = outer.parent()
    {
        if !spec.wrappers.contains(&parent.kind()) {
            break;
        }
        let mut cursor = parent.walk();
        let only_leading_siblings = parent
            .named_children(&mut cursor)
            .all(|c| c.id() == outer.id() || spec.leading.contains(&c.kind()));
        if !only_leading_siblings {
            break;
        }
        outer = parent;
    }
    let mut first = outer;
    while let Some(prev) = first.prev_named_sibling() {
        if !spec.leading.contains(&prev.kind()) {
            break;
        }
        let prev_end_line = lines.line_of(prev.end_byte().saturating_sub(1).max(prev.start_byte()));
        let first_line = lines.line_of(first.start_byte());
        let own_line = text[lines.line_start(prev.start_byte())..prev.start_byte()]
            .trim()
            .is_empty();
        if prev_end_line + 1 < first_line {
            break;
        }
        if !own_line {
            // `@logged // note`: a comment trailing a decorator or attribute goes with it.
            match prev.prev_named_sibling() {
                Some(before)
                    if prev.kind().contains("comment")
                        && !before.kind().contains("comment")
                        && spec.leading.contains(&before.kind())
                        && lines.line_of(before.end_byte().saturating_sub(1))
                            == lines.line_of(prev.start_byte()) =>
                {
                    first = before;
                    continue;
                }
                _ => break,
            }
        }
        first = prev;
    }
    let mut end = outer.end_byte();
    let mut next = outer.next_sibling();
    if let Some(n) = next
        && !n.is_named()
        && matches!(n.kind(), ";" | ",")
    {
        next = n.next_sibling();
    }
    if let Some(next) = next
        && next.kind().contains("comment")
        && spec.leading.contains(&next.kind())
        && lines.line_of(next.start_byte()) == lines.line_of(end.saturating_sub(1))
    {
        let comment = text[next.byte_range()].trim_end();
        if !comment.contains('\n') {
            end = next.start_byte() + comment.len();
        }
    }
    // Some grammars (Markdown) end blocks after the blank lines that follow them.
    let start = first.start_byte();
    let trimmed = text[start..end].trim_end().len();
    if trimmed > 0 {
        end = start + trimmed;
    }
    (start, end)
}

/// For spans sorted by (start asc, end desc): the index of the innermost
/// earlier span containing each span.
fn containment_parents(spans: &[(usize, usize)]) -> Vec<Option<usize>> {
    let mut parents = Vec::with_capacity(spans.len());
    let mut stack: Vec<usize> = Vec::new();
    for (i, &(start, end)) in spans.iter().enumerate() {
        while let Some(&top) = stack.last() {
            let (ts, te) = spans[top];
            if ts <= start && end <= te {
                break;
            }
            stack.pop();
        }
        parents.push(stack.last().copied());
        stack.push(i);
    }
    parents
}

/// Line-aligned pieces of `[start, end)` of at most `CHUNK_LINES` lines,
/// trimmed of surrounding whitespace; pieces without a letter or digit
/// (`);` left over around a unit nested in a statement) are dropped.
fn gap_chunks(text: &str, lines: &Lines, start: usize, end: usize, out: &mut Vec<(usize, usize)>) {
    let mut piece_start = start;
    while piece_start < end {
        let first_line = lines.line_of(piece_start) as usize;
        let piece_end = lines
            .start_of_line(first_line + CHUNK_LINES, text.len())
            .min(end)
            .max(piece_start + 1);
        let slice = &text[piece_start..piece_end];
        let lead = slice.len() - slice.trim_start().len();
        let trail = slice.len() - slice.trim_end().len();
        if slice.chars().any(char::is_alphanumeric) {
            out.push((piece_start + lead, piece_end - trail));
        }
        piece_start = piece_end;
    }
}

/// Overlapping line windows for files without a grammar.
fn text_chunks(text: &str, lines: &Lines, out: &mut Vec<(usize, usize)>) {
    let line_count = lines.starts.len();
    let mut first = 1;
    loop {
        let start = lines.start_of_line(first, text.len());
        let end = lines.start_of_line(first + CHUNK_LINES, text.len());
        let slice = &text[start..end];
        if !slice.trim().is_empty() {
            let trail = slice.len() - slice.trim_end().len();
            out.push((start, end - trail));
        }
        if first + CHUNK_LINES > line_count {
            break;
        }
        first += CHUNK_LINES - CHUNK_OVERLAP;
    }
}

struct Draft {
    node_type: NodeType,
    name: Option<String>,
    name_start: Option<usize>,
    receiver: Option<String>,
    trait_name: Option<String>,
    start: usize,
    end: usize,
}

/// Turns one file's captured definitions and references into its units
/// (file, definitions, gap chunks) and cleaned references, in four named
/// phases: drafts, structure (parents, kinds, qualified names), own text and
/// token counts, then units with their ids.
fn assemble(
    path: &str,
    language: Language,
    text: &str,
    lines: &Lines,
    defs: Vec<RawDef>,
    mut refs: Vec<Reference>,
    had_syntax_errors: bool,
) -> ParsedFile {
    let drafts = draft_units(path, language, text, lines, defs);
    let structure = structure_of(&drafts);
    let (mut own_texts, tokens) = own_texts_and_tokens(text, &structure);
    let units = build_units(path, lines, &drafts, &structure, &mut own_texts, &tokens);
    clean_references(&drafts, &units, &mut refs);
    ParsedFile {
        language,
        units,
        refs,
        had_syntax_errors,
    }
}

/// The file's candidate units in document order: the file itself, one per
/// distinct definition span and one per chunk of the text between top-level
/// definitions (or of the whole text for languages without a grammar).
fn draft_units(
    path: &str,
    language: Language,
    text: &str,
    lines: &Lines,
    mut defs: Vec<RawDef>,
) -> Vec<Draft> {
    // One unit per span: when two patterns capture the same span, the earlier pattern wins.
    defs.sort_by_key(|d| (d.start, std::cmp::Reverse(d.end), d.pattern));
    defs.dedup_by_key(|d| (d.start, d.end));

    let mut drafts: Vec<Draft> = Vec::with_capacity(defs.len() + 8);
    drafts.push(Draft {
        node_type: NodeType::File,
        name: Some(path.rsplit('/').next().unwrap_or(path).to_string()),
        name_start: None,
        receiver: None,
        trait_name: None,
        start: 0,
        end: text.len(),
    });
    // Top-level definitions (not inside another) delimit the gaps that become chunks.
    let def_spans: Vec<(usize, usize)> = defs.iter().map(|d| (d.start, d.end)).collect();
    let def_parents = containment_parents(&def_spans);
    let mut chunk_spans = Vec::new();
    if language.spec().is_some() {
        let mut cursor = 0;
        for (d, parent) in defs.iter().zip(&def_parents) {
            if parent.is_none() {
                if d.start > cursor {
                    gap_chunks(text, lines, cursor, d.start, &mut chunk_spans);
                }
                cursor = cursor.max(d.end);
            }
        }
        if cursor < text.len() {
            gap_chunks(text, lines, cursor, text.len(), &mut chunk_spans);
        }
    } else {
        text_chunks(text, lines, &mut chunk_spans);
    }
    for d in defs {
        drafts.push(Draft {
            node_type: d.node_type,
            name: if d.node_type.is_anonymous() {
                None
            } else {
                d.name
            },
            name_start: d.name_start,
            receiver: d.receiver,
            trait_name: d.trait_name,
            start: d.start,
            end: d.end,
        });
    }
    for (start, end) in chunk_spans {
        drafts.push(Draft {
            node_type: NodeType::Chunk,
            name: None,
            name_start: None,
            receiver: None,
            trait_name: None,
            start,
            end,
        });
    }
    // The file unit sorts first: it starts at 0 and is the longest (ties broken by kind).
    drafts.sort_by_key(|d| {
        (
            d.start,
            std::cmp::Reverse(d.end),
            d.node_type != NodeType::File,
        )
    });
    drafts
}

/// How the drafts nest: each one's span, parent, final kind and qualified name.
struct Structure {
    spans: Vec<(usize, usize)>,
    parents: Vec<Option<usize>>,
    node_types: Vec<NodeType>,
    qualified: Vec<Option<String>>,
}

/// Parents by containment, kinds (functions inside types are methods) and
/// qualified names, parents first; Go methods declared outside their type
/// hang under the type when it is in this file.
fn structure_of(drafts: &[Draft]) -> Structure {
    let spans: Vec<(usize, usize)> = drafts.iter().map(|d| (d.start, d.end)).collect();
    let mut parents = containment_parents(&spans);
    for p in parents.iter_mut().skip(1) {
        p.get_or_insert(0);
    }

    // Node types and qualified names, parents first.
    let mut node_types: Vec<NodeType> = drafts.iter().map(|d| d.node_type).collect();
    let mut qualified: Vec<Option<String>> = vec![None; drafts.len()];
    for i in 1..drafts.len() {
        let parent = parents[i].unwrap_or(0);
        if node_types[i] == NodeType::Function && node_types[parent].holds_methods() {
            node_types[i] = NodeType::Method;
        }
        let Some(name) = &drafts[i].name else {
            continue;
        };
        qualified[i] = Some(match (&drafts[i].receiver, &qualified[parent]) {
            (Some(receiver), _) if !receiver.is_empty() => format!("{receiver}.{name}"),
            (_, Some(pq)) if parent != 0 => {
                let sep = if node_types[i] == NodeType::Section {
                    " > "
                } else {
                    "."
                };
                format!("{pq}{sep}{name}")
            }
            _ => name.clone(),
        });
    }
    // Methods declared outside their type (Go receivers) hang under the type when it is in this file.
    let type_index: HashMap<&str, usize> = drafts
        .iter()
        .enumerate()
        .filter(|(i, d)| {
            d.name.is_some() && node_types[*i].holds_methods()
                || node_types[*i] == NodeType::TypeAlias
        })
        .filter_map(|(i, d)| Some((d.name.as_deref()?, i)))
        .collect();
    for i in 1..drafts.len() {
        if let Some(receiver) = &drafts[i].receiver {
            node_types[i] = NodeType::Method;
            if let Some(&t) = type_index.get(receiver.as_str()) {
                parents[i] = Some(t);
            }
        }
    }
    Structure {
        spans,
        parents,
        node_types,
        qualified,
    }
}

/// Each unit's own text (its span minus its direct children's spans) and its
/// token count (own text plus children's), children before parents.
fn own_texts_and_tokens(text: &str, structure: &Structure) -> (Vec<String>, Vec<u32>) {
    let Structure { spans, parents, .. } = structure;
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); spans.len()];
    for (i, p) in parents.iter().enumerate() {
        if let Some(p) = p
            && spans[*p].0 <= spans[i].0
            && spans[i].1 <= spans[*p].1
        {
            children[*p].push(i);
        }
    }
    let mut own_texts: Vec<String> = vec![String::new(); spans.len()];
    let mut tokens: Vec<u32> = vec![0; spans.len()];
    for i in (0..spans.len()).rev() {
        let (start, end) = spans[i];
        let mut own = String::new();
        let mut cursor = start;
        let mut child_tokens = 0u32;
        for &c in &children[i] {
            let (cs, ce) = spans[c];
            if cs > cursor {
                own.push_str(&text[cursor..cs]);
                own.push('\n');
            }
            cursor = cursor.max(ce);
            child_tokens += tokens[c];
        }
        if end > cursor {
            own.push_str(&text[cursor..end]);
        }
        tokens[i] = count_tokens(&own) as u32 + child_tokens;
        own_texts[i] = own;
    }
    (own_texts, tokens)
}

/// The units with their ids: identity, not position (see crate::handle).
/// Own texts are moved into the units' full-text bodies.
fn build_units(
    path: &str,
    lines: &Lines,
    drafts: &[Draft],
    structure: &Structure,
    own_texts: &mut [String],
    tokens: &[u32],
) -> Vec<Unit> {
    let Structure {
        spans,
        parents,
        node_types,
        qualified,
    } = structure;
    let mut ordinals: HashMap<(NodeType, String), u32> = HashMap::new();
    let mut units = Vec::with_capacity(drafts.len());
    for (i, draft) in drafts.iter().enumerate() {
        let node_type = node_types[i];
        let identity = if node_type == NodeType::File {
            String::new()
        } else if node_type.is_anonymous() {
            let parent_q = parents[i]
                .and_then(|p| qualified[p].clone())
                .unwrap_or_default();
            format!("{parent_q}#{}", content_identity(&own_texts[i]))
        } else {
            let q = qualified[i].clone().unwrap_or_default();
            match &draft.trait_name {
                Some(t) => format!("{q}#{t}"),
                None => q,
            }
        };
        let ordinal = ordinals.entry((node_type, identity.clone())).or_insert(0);
        let id = HandleId::derive(path, node_type.as_str(), &identity, *ordinal);
        *ordinal += 1;

        let (start, end) = spans[i];
        let preview_start = draft
            .name_start
            .filter(|&n| n >= start && n < end)
            .map(|n| lines.line_start(n).max(start))
            .unwrap_or(start);
        let fts_name = match node_type {
            NodeType::File => fts_document(path),
            _ => fts_document(qualified[i].as_deref().unwrap_or_default()),
        };
        units.push(Unit {
            id,
            node_type,
            name: draft.name.clone(),
            qualified_name: qualified[i].clone(),
            parent: if i == 0 { None } else { parents[i] },
            start_byte: start,
            end_byte: end,
            start_line: lines.line_of(start),
            end_line: lines.line_of(end.saturating_sub(1).max(start)),
            preview_start,
            token_count: tokens[i],
            fts_name,
            fts_body: fts_document_owned(std::mem::take(&mut own_texts[i])),
        });
    }
    units
}

/// Drops type mentions that are definition names, dedupes references seen
/// by two patterns and sets each one's enclosing unit.
fn clean_references(drafts: &[Draft], units: &[Unit], refs: &mut Vec<Reference>) {
    let def_names: HashSet<usize> = drafts.iter().filter_map(|d| d.name_start).collect();
    refs.retain(|r| !(r.ref_type == RefType::TypeRef && def_names.contains(&r.start_byte)));
    // Two patterns can see one reference (`pkg.Type` and `Type`): keep the longer one.
    refs.sort_by_key(|r| (r.end_byte, r.ref_type, r.start_byte));
    refs.dedup_by_key(|r| (r.end_byte, r.ref_type));
    refs.sort_by_key(|r| (r.start_byte, r.end_byte));
    assign_enclosing(units, refs);
}

/// Sets each reference's innermost enclosing unit with one sweep over both sorted lists.
fn assign_enclosing(units: &[Unit], refs: &mut [Reference]) {
    let mut stack: Vec<usize> = Vec::new();
    let mut next = 0;
    for r in refs.iter_mut() {
        while next < units.len() && units[next].start_byte <= r.start_byte {
            while let Some(&top) = stack.last() {
                if units[top].end_byte > units[next].start_byte {
                    break;
                }
                stack.pop();
            }
            stack.push(next);
            next += 1;
        }
        while let Some(&top) = stack.last() {
            if units[top].end_byte > r.start_byte || top == 0 {
                break;
            }
            stack.pop();
        }
        r.enclosing = stack.last().copied().unwrap_or(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn call_signatures_get_separators_of_the_same_length() {
        let text = "interface F {\n    <T>(fn: T): T\n    // named\n    (name: string): F\n    kind: string\n}\nconst a = f(\n    (x) => x\n)\n";
        let repaired = ts_member_separators(text).expect("two signature lines qualify");
        assert_eq!(repaired.len(), text.len());
        assert_eq!(repaired.lines().count(), text.lines().count());
        // After `{` and after `=>`/`(` nothing is inserted; after `T` and `F`… only before `(`/`<` lines.
        assert!(
            repaired.contains("\n    <T>(fn: T): T\n"),
            "after `{{`: {repaired}"
        );
        assert!(repaired.contains("\n;   (name: string): F\n"), "{repaired}");
        assert!(
            repaired.contains("\n    (x) => x\n"),
            "after `f(`: {repaired}"
        );
        assert_eq!(ts_member_separators("const a = 1\nfoo()\n"), None);
        // A doc comment between two members does not hide the line before it.
        let doc = "interface P {\n\t(a: A): B\n\n\t/** curried */\n\t<R>(r: R): R\n}\n";
        let repaired = ts_member_separators(doc).expect("the second signature qualifies");
        assert!(repaired.contains("\n;<R>(r: R): R\n"), "{repaired}");
    }

    #[test]
    fn macro_rules_make_functions_named_by_their_arguments() {
        let text = "macro_rules! empty {\n    ($name: ident, $t: ty) => {\n        pub fn $name(_x: $t) {}\n    };\n}\n\
                    macro_rules! fixed {\n    ($t: ty) => {\n        fn fixed_fn(_x: $t) {}\n    };\n}\n\
                    macro_rules! two_rules {\n    ($n: ident) => { fn $n() {} };\n    ($n: ident, $m: ident) => { fn $n() {} };\n}\n\
                    empty!(visit_bool, bool);\nfixed!(u8);\ntwo_rules!(skipped);\nmod inner {\n    empty!(visit_int, i64);\n}\n\
                    fn body() {\n    empty!(local_fn, u8);\n}\n";
        let parsed = parse_file("a.rs", text.as_bytes());
        let functions: Vec<(&str, u32)> = parsed
            .units
            .iter()
            .filter(|u| u.node_type == NodeType::Function)
            .filter_map(|u| Some((u.name.as_deref()?, u.start_line)))
            .collect();
        // At its invocation line, also from a macro whose function's name
        // is fixed and from the rule of two that the invocation's shape
        // matches; not from an invocation inside a function body.
        assert_eq!(
            functions,
            vec![
                ("visit_bool", 15),
                ("fixed_fn", 16),
                ("skipped", 17),
                ("visit_int", 19),
                ("body", 21)
            ],
            "{:?}",
            parsed.units
        );
    }

    #[test]
    fn macro_rules_write_types_impls_and_methods_at_the_invocation() {
        let text = "macro_rules! keys {\n    ( $(#[$m:meta])* $vis:vis struct $name:ident; $($rest:tt)* ) => {\n\
                    $(#[$m])* $vis struct $name(u32);\n\
                    impl $crate::Key for $name { fn data(&self) -> u32 { self.0 } }\n\
                    impl $name { pub fn fresh() -> Self { $name(0) } }\n\
                    $crate::keys!($($rest)*);\n    };\n    () => {};\n}\n\
                    keys! {\n    /// One.\n    pub struct A;\n}\n\
                    keys! { struct B; pub(crate) struct C; }\n\
                    macro_rules! unread {\n    ($s:stmt) => {};\n    ($n:ident) => { struct $n; };\n}\n\
                    unread!(D);\n";
        let parsed = parse_file("src/lib.rs", text.as_bytes());
        let units: Vec<(&str, NodeType, u32)> = parsed
            .units
            .iter()
            .filter(|u| u.start_byte >= text.find("keys! {").unwrap())
            .filter_map(|u| Some((u.qualified_name.as_deref()?, u.node_type, u.start_line)))
            .collect();
        assert_eq!(
            units,
            vec![
                ("A", NodeType::Struct, 10),
                ("A", NodeType::Impl, 11),
                ("A.data", NodeType::Method, 11),
                ("A", NodeType::Impl, 12),
                ("A.fresh", NodeType::Method, 12),
                ("B", NodeType::Struct, 14),
                ("B", NodeType::Impl, 14),
                ("B.data", NodeType::Method, 14),
                ("B", NodeType::Impl, 14),
                ("B.fresh", NodeType::Method, 14),
                ("C", NodeType::Struct, 14),
                ("C", NodeType::Impl, 14),
                ("C.data", NodeType::Method, 14),
                ("C", NodeType::Impl, 14),
                ("C.fresh", NodeType::Method, 14),
                ("unread", NodeType::Macro, 15),
            ],
            "{:?}",
            parsed.units
        );
        // Each written unit lies inside its invocation, nested as written.
        let b = text.find("keys! { struct B").unwrap();
        let line_end = b + text[b..].find('\n').unwrap();
        for u in parsed.units.iter().filter(|u| u.start_line == 14) {
            assert!(b <= u.start_byte && u.end_byte <= line_end, "{u:?}");
        }
    }

    #[test]
    fn macro_rules_write_methods_in_impl_bodies_at_their_names() {
        let text = "macro_rules! getters {\n    ($($name:ident => $t:ty,)*) => ($(\n        /// Reads it.\n        pub fn $name(&self) -> $t { Default::default() }\n    )*)\n}\n\
                    pub struct P;\nimpl P {\n    fn own(&self) {}\n    getters! {\n        width => u32,\n        height => Option<u8>,\n    }\n}\n";
        let parsed = parse_file("src/lib.rs", text.as_bytes());
        let line_of = |b: usize| text[..b].matches('\n').count() + 1;
        let methods: Vec<(&str, usize)> = parsed
            .units
            .iter()
            .filter(|u| u.node_type == NodeType::Method)
            .filter_map(|u| Some((u.qualified_name.as_deref()?, line_of(u.preview_start))))
            .collect();
        // Methods of the `impl`, each on the line that names it.
        assert_eq!(
            methods,
            vec![("P.own", 9), ("P.width", 11), ("P.height", 12)],
            "{:?}",
            parsed.units
        );
    }

    #[test]
    fn a_function_a_macro_writes_spans_its_whole_invocation() {
        // A test-writing macro whose body reads each `name = value`
        // argument: the last arguments (`port = from_str(…)`) are the
        // function's, so its unit must reach the invocation's end.
        let text = "macro_rules! check {\n    ($name:ident, $s:expr, $($m:ident = $v:expr,)*) => (\n        #[test]\n        fn $name() {\n            let u = parse($s);\n            $( assert_eq!(u.$m(), $v); )+\n            const ALT: &[&str] = &[];\n            u.done();\n        }\n    );\n}\n\
                    check! {\n    first,\n    \"a\",\n    scheme = part(\"http\"),\n    host = Some(\"h\"),\n    port = from_str(\"80\").ok(),\n}\n";
        let parsed = parse_file("src/tests.rs", text.as_bytes());
        let invocation = text.find("check! {").unwrap();
        let end = invocation + text[invocation..].find("\n}").unwrap() + 2;
        let first = parsed
            .units
            .iter()
            .find(|u| u.name.as_deref() == Some("first"))
            .unwrap_or_else(|| panic!("a unit `first`: {:?}", parsed.units));
        assert_eq!(
            (first.start_byte, first.end_byte),
            (invocation, end),
            "{:?}",
            parsed.units
        );
    }

    #[test]
    fn units_after_an_interface_with_call_signatures_are_found() {
        let text = "export interface F extends B {\n    // nameless\n    <T extends Function | undefined>(fn: T): T\n    <T>(name: string, fn: T): T\n\n    (customName: string): F\n}\n\nexport function isAction(x: any) {\n    return 1\n}\n";
        let parsed = parse_file("a.ts", text.as_bytes());
        let names: Vec<&str> = parsed
            .units
            .iter()
            .filter_map(|u| u.name.as_deref())
            .collect();
        assert!(names.contains(&"isAction"), "{names:?}");
    }

    #[test]
    fn text_files_chunk_with_overlap() {
        let text: String = (1..=120).map(|i| format!("line {i}\n")).collect();
        let parsed = parse_file("notes.txt", text.as_bytes());
        let chunks: Vec<_> = parsed
            .units
            .iter()
            .filter(|u| u.node_type == NodeType::Chunk)
            .map(|u| (u.start_line, u.end_line))
            .collect();
        assert_eq!(chunks, [(1, 50), (41, 90), (81, 120)]);
    }

    #[test]
    fn items_inside_item_macros_are_units_and_other_macro_bodies_stay_tokens() {
        let text = "cfg_rt! {\n    /// Runs it.\n    pub fn spawn(x: u8) -> u8 { helper(x) }\n}\n\
                    impl Pool {\n    cfg_stats! {\n        fn count(&self) -> usize { 0 }\n    }\n}\n\
                    html! { <div>{ render(x) }</div> }\n\
                    macro_rules! gen { ($n:ident) => { fn $n() {} }; }\n";
        let parsed = parse_file("src/lib.rs", text.as_bytes());
        let names: Vec<(Option<&str>, NodeType)> = parsed
            .units
            .iter()
            .map(|u| (u.qualified_name.as_deref(), u.node_type))
            .collect();
        assert!(
            names.contains(&(Some("spawn"), NodeType::Function)),
            "{names:?}"
        );
        assert!(
            names.contains(&(Some("Pool.count"), NodeType::Method)),
            "{names:?}"
        );
        let spawn = parsed
            .units
            .iter()
            .find(|u| u.name.as_deref() == Some("spawn"))
            .unwrap();
        assert_eq!(
            &text[spawn.start_byte..spawn.start_byte + 12],
            "/// Runs it."
        );
        // A body that is not items is left alone; its calls are still seen by name.
        assert!(
            !names.iter().any(|(n, _)| *n == Some("render")),
            "{names:?}"
        );
        let calls: Vec<&str> = parsed.refs.iter().map(|r| r.name.as_str()).collect();
        assert!(
            calls.contains(&"helper") && calls.contains(&"render"),
            "{calls:?}"
        );
        assert_eq!(
            calls.iter().filter(|c| **c == "helper").count(),
            1,
            "{calls:?}"
        );
        // The thread's parser is back to whole files.
        let after = parse_file("src/b.rs", b"fn after() {}\n");
        assert_eq!(
            after
                .units
                .iter()
                .filter(|u| u.name.as_deref() == Some("after"))
                .count(),
            1
        );
    }

    #[test]
    fn invalid_utf8_keeps_byte_offsets() {
        let mut bytes = b"fn ok() {}\n".to_vec();
        bytes.extend_from_slice(&[0xff, 0xfe, b'\n']);
        bytes.extend_from_slice(b"fn after() {}\n");
        let parsed = parse_file("bad.rs", &bytes);
        let after = parsed
            .units
            .iter()
            .find(|u| u.name.as_deref() == Some("after"))
            .expect("function after the invalid bytes is extracted");
        assert_eq!(&bytes[after.start_byte..after.end_byte], b"fn after() {}");
    }

    #[test]
    fn containment_finds_innermost_parent() {
        let spans = [(0, 100), (0, 50), (10, 20), (60, 70)];
        assert_eq!(
            containment_parents(&spans),
            [None, Some(0), Some(1), Some(0)]
        );
    }

    #[test]
    fn capture_names_read_as_their_roles() {
        assert_eq!(capture_role("name"), CaptureRole::Name);
        assert_eq!(capture_role("qualifier"), CaptureRole::Qualifier);
        assert_eq!(
            capture_role("local.definition"),
            CaptureRole::LocalDefinition
        );
        assert_eq!(capture_role("local.scope"), CaptureRole::LocalScope);
        assert_eq!(capture_role("receiver"), CaptureRole::Receiver);
        assert_eq!(capture_role("trait"), CaptureRole::Trait);
        assert_eq!(
            capture_role("definition.type"),
            CaptureRole::Definition(Some(NodeType::TypeAlias))
        );
        assert_eq!(
            capture_role("definition.code_block"),
            CaptureRole::Definition(Some(NodeType::CodeBlock))
        );
        assert_eq!(
            capture_role("definition.nonesuch"),
            CaptureRole::Definition(None)
        );
        assert_eq!(
            capture_role("reference.call"),
            CaptureRole::Reference(Some(RefType::Call))
        );
        assert_eq!(
            capture_role("reference.import"),
            CaptureRole::Reference(Some(RefType::Import))
        );
        assert_eq!(
            capture_role("reference.type"),
            CaptureRole::Reference(Some(RefType::TypeRef))
        );
        // `type_ref` is the stored name, not a capture name.
        assert_eq!(
            capture_role("reference.type_ref"),
            CaptureRole::Reference(None)
        );
        assert_eq!(capture_role("doc"), CaptureRole::Other);
        // Every bundled query's roles, by capture index.
        for language in Language::ALL {
            let Some(spec) = language.spec() else {
                continue;
            };
            let names = spec.query.capture_names();
            assert_eq!(spec.capture_roles.len(), names.len(), "{language:?}");
            for (name, role) in names.iter().zip(&spec.capture_roles) {
                assert_eq!(*role, capture_role(name), "{language:?} @{name}");
                if name.starts_with("definition.") || name.starts_with("reference.") {
                    assert!(
                        !matches!(
                            role,
                            CaptureRole::Definition(None) | CaptureRole::Reference(None)
                        ),
                        "{language:?} @{name} names no kind"
                    );
                }
            }
        }
    }
}
