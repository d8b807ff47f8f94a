//! Languages: detection by file name, and the tree-sitter grammar and
//! extraction query of each.
//!
//! Extraction rules live in `queries/<language>.scm`, written in the
//! vocabulary of tree-sitter tags queries (see [`extract`] for the capture
//! names). Adding a language is a grammar dependency, a query file and one
//! entry in [`Language::spec`].

mod expand;
pub mod extract;

use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

pub use extract::{
    NodeType, ParsedFile, RefType, Reference, TreeExtraction, Unit, parse_file, parse_file_with,
};

/// What a use of a name does: the kind of a resolution site
/// (`graph::facts`) and of the edge it becomes (`store::graph_rows`). The
/// facts depend on nothing above `lang` and the store on nothing of the
/// graph, so their one shared kind lives here, below both.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SiteKind {
    /// A call (`f()`, `a.f()`, `new F()`, `F::new()`).
    Call = 0,
    /// An import or `use`.
    Import = 1,
    /// A type annotation, base class or other type relation.
    Type = 2,
    /// Any other use of a name that may be a definition (a function passed
    /// as a value, `a.f` without a call).
    Other = 3,
}

impl SiteKind {
    /// The kind of a stored code (its low 2 bits).
    pub fn from_code(code: u64) -> SiteKind {
        match code & 3 {
            0 => SiteKind::Call,
            1 => SiteKind::Import,
            2 => SiteKind::Type,
            _ => SiteKind::Other,
        }
    }

    /// The name answers use.
    pub fn as_str(self) -> &'static str {
        match self {
            SiteKind::Call => "call",
            SiteKind::Import => "import",
            SiteKind::Type => "type",
            SiteKind::Other => "other",
        }
    }
}

/// A language Canopy knows how to split into units.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Language {
    /// Rust (`.rs`).
    Rust,
    /// Python (`.py`, `.pyi`).
    Python,
    /// JavaScript (`.js`, `.mjs`, `.cjs`, `.jsx`).
    JavaScript,
    /// TypeScript (`.ts`, `.mts`, `.cts`).
    TypeScript,
    /// TypeScript with JSX (`.tsx`).
    Tsx,
    /// Go (`.go`).
    Go,
    /// Markdown (`.md`, `.markdown`, `.mdx`).
    Markdown,
    /// Any other text file: line chunks.
    Text,
}

/// Everything the extractor needs to know about a tree-sitter language.
/// Public so that other extractions over the same trees (the code graph's
/// facts) use the same grammar.
pub struct LanguageSpec {
    /// The tree-sitter grammar.
    pub grammar: tree_sitter::Language,
    /// The compiled extraction query (`queries/<lang>.scm`).
    pub query: tree_sitter::Query,
    /// Parent node kinds that wrap a single definition (`export_statement`,
    /// `decorated_definition`, …): a definition's span grows to cover them.
    pub wrappers: &'static [&'static str],
    /// Sibling kinds that belong to the definition that follows them
    /// (doc comments, attributes, decorators) when directly adjacent.
    pub leading: &'static [&'static str],
    /// What each of the query's captures stands for, by capture index.
    pub(crate) capture_roles: Vec<extract::CaptureRole>,
}

impl Language {
    /// All languages, in a stable order.
    pub const ALL: [Language; 8] = [
        Language::Rust,
        Language::Python,
        Language::JavaScript,
        Language::TypeScript,
        Language::Tsx,
        Language::Go,
        Language::Markdown,
        Language::Text,
    ];

    /// Detects the language from a path's extension; `Text` when unknown.
    pub fn from_path(path: &str) -> Language {
        let ext = path
            .rsplit('/')
            .next()
            .and_then(|name| name.rsplit_once('.'))
            .map(|(_, ext)| ext.to_ascii_lowercase());
        match ext.as_deref() {
            Some("rs") => Language::Rust,
            Some("py" | "pyi") => Language::Python,
            Some("js" | "mjs" | "cjs" | "jsx") => Language::JavaScript,
            Some("ts" | "mts" | "cts") => Language::TypeScript,
            Some("tsx") => Language::Tsx,
            Some("go") => Language::Go,
            Some("md" | "markdown" | "mdx") => Language::Markdown,
            _ => Language::Text,
        }
    }

    /// Lower-case name used in the index and in output.
    pub fn as_str(self) -> &'static str {
        match self {
            Language::Rust => "rust",
            Language::Python => "python",
            Language::JavaScript => "javascript",
            Language::TypeScript => "typescript",
            Language::Tsx => "tsx",
            Language::Go => "go",
            Language::Markdown => "markdown",
            Language::Text => "text",
        }
    }

    /// Parses the name stored in the index.
    pub fn from_name(name: &str) -> Option<Language> {
        Language::ALL.into_iter().find(|l| l.as_str() == name)
    }

    /// The separator people write between a type and its member.
    pub fn member_separator(self) -> &'static str {
        match self {
            Language::Rust => "::",
            _ => ".",
        }
    }

    /// Compiles this language's extraction query on a background thread,
    /// at most once per process. Compiling takes longer than parsing a
    /// typical file: an index run starts it
    /// as soon as discovery lists a changed file, so it is ready, or nearly,
    /// when that file is parsed.
    pub fn warm_up_in_background(self) {
        static STARTED: [std::sync::Once; Language::ALL.len()] =
            [const { std::sync::Once::new() }; Language::ALL.len()];
        if self == Language::Text {
            return; // nothing to compile
        }
        STARTED[self as usize].call_once(|| {
            // If no thread can be started, the first parse compiles it.
            let _ = std::thread::Builder::new()
                .name("canopy-query-init".into())
                .spawn(move || {
                    let _ = self.spec();
                });
        });
    }

    /// The grammar and compiled extraction query; `None` for plain text.
    pub fn spec(self) -> Option<&'static LanguageSpec> {
        macro_rules! spec {
            ($grammar:expr, $query:expr, $wrappers:expr, $leading:expr) => {{
                static SPEC: OnceLock<LanguageSpec> = OnceLock::new();
                Some(SPEC.get_or_init(|| {
                    let grammar: tree_sitter::Language = $grammar.into();
                    let query = tree_sitter::Query::new(&grammar, &$query)
                        .unwrap_or_else(|e| panic!("bundled query for {self:?} is invalid: {e}"));
                    LanguageSpec {
                        grammar,
                        capture_roles: extract::capture_roles(&query),
                        query,
                        wrappers: $wrappers,
                        leading: $leading,
                    }
                }))
            }};
        }
        const JS_WRAPPERS: &[&str] = &[
            "export_statement",
            "lexical_declaration",
            "variable_declaration",
            "expression_statement",
            "ambient_declaration",
        ];
        const JS_LEADING: &[&str] = &["comment", "decorator"];
        match self {
            Language::Rust => spec!(
                tree_sitter_rust::LANGUAGE,
                include_str!("../../queries/rust.scm"),
                &[],
                &["line_comment", "block_comment", "attribute_item"]
            ),
            Language::Python => spec!(
                tree_sitter_python::LANGUAGE,
                include_str!("../../queries/python.scm"),
                &["decorated_definition"],
                &["comment", "decorator"]
            ),
            Language::JavaScript => spec!(
                tree_sitter_javascript::LANGUAGE,
                javascript_query(),
                JS_WRAPPERS,
                JS_LEADING
            ),
            Language::TypeScript => spec!(
                tree_sitter_typescript::LANGUAGE_TYPESCRIPT,
                typescript_query(),
                JS_WRAPPERS,
                JS_LEADING
            ),
            Language::Tsx => spec!(
                tree_sitter_typescript::LANGUAGE_TSX,
                tsx_query(),
                JS_WRAPPERS,
                JS_LEADING
            ),
            Language::Go => spec!(
                tree_sitter_go::LANGUAGE,
                include_str!("../../queries/go.scm"),
                &["type_declaration", "const_declaration"],
                &["comment"]
            ),
            Language::Markdown => spec!(
                tree_sitter_md::LANGUAGE,
                include_str!("../../queries/markdown.scm"),
                &[],
                &[]
            ),
            Language::Text => None,
        }
    }
}

/// JavaScript and TypeScript share most node types: each query is the
/// shared `ecmascript.scm` followed by the language's own patterns, and
/// `jsx.scm` for the grammars that parse JSX (JavaScript's and TSX's).
fn javascript_query() -> String {
    format!(
        "{}\n{}\n{}",
        include_str!("../../queries/ecmascript.scm"),
        include_str!("../../queries/javascript.scm"),
        include_str!("../../queries/jsx.scm")
    )
}

/// See [`javascript_query`].
fn typescript_query() -> String {
    format!(
        "{}\n{}",
        include_str!("../../queries/ecmascript.scm"),
        include_str!("../../queries/typescript.scm")
    )
}

/// See [`javascript_query`].
fn tsx_query() -> String {
    format!(
        "{}\n{}",
        typescript_query(),
        include_str!("../../queries/jsx.scm")
    )
}

/// The parse-and-extract floor, for benchmarks only: parses `source` with
/// the grammar [`extract::parse_file`] uses for `path` and runs the same
/// compiled extraction query over the tree, counting captures, and does
/// nothing else (no units, tokens, facts or storage). `None` for plain text.
/// `examples/index_floor.rs` runs it over a repository so that `bench/floor.sh`
/// can set a cold index against it in the same run (issue 28).
#[doc(hidden)]
pub fn parse_and_match(path: &str, source: &[u8]) -> Option<usize> {
    use streaming_iterator::StreamingIterator;
    thread_local! {
        static FLOOR_PARSER: std::cell::RefCell<tree_sitter::Parser> =
            std::cell::RefCell::new(tree_sitter::Parser::new());
    }
    let spec = Language::from_path(path).spec()?;
    let text = extract::text_view(source);
    let tree = FLOOR_PARSER.with(|parser| {
        let mut parser = parser.borrow_mut();
        parser.set_language(&spec.grammar).ok()?;
        parser.parse(&text, None)
    })?;
    let mut cursor = tree_sitter::QueryCursor::new();
    let mut matches = cursor.matches(&spec.query, tree.root_node(), text.as_bytes());
    let mut captures = 0;
    while let Some(m) = matches.next() {
        captures += m.captures.len();
    }
    Some(captures)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_languages_by_extension() {
        assert_eq!(Language::from_path("src/main.rs"), Language::Rust);
        assert_eq!(Language::from_path("a/b.PY"), Language::Python);
        assert_eq!(Language::from_path("x.tsx"), Language::Tsx);
        assert_eq!(Language::from_path("Makefile"), Language::Text);
        assert_eq!(Language::from_path(".hidden/readme.md"), Language::Markdown);
    }

    #[test]
    fn every_bundled_query_compiles() {
        for lang in Language::ALL {
            // Panics (failing the test) if a query does not compile.
            let _ = lang.spec();
        }
    }
}
