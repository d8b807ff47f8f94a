//! Resolution facts (index time): what one file says about names, beyond
//! its units — uses of names with their receivers, imports, bindings, base
//! and return types, compiled-out ranges.
//!
//! [`extract`] walks the tree-sitter tree the extractor already built,
//! once, on the indexing thread that parsed the file: `walker` is the
//! walk every language shares, and one file per language
//! (`python`, `ecmascript`, `go`, `rust`) holds that language's
//! handlers, one per node kind. [`model`] holds the fact types, the
//! expression syntax inside them and their encoded form.
//!
//! Architecture Invariant: facts depend only on `lang`, tree-sitter and
//! each other (model ← walker ← languages ← this module). They never name
//! the store or the resolver: the index parses each file with
//! [`FactExtraction`] as the parser's second pass over the same trees,
//! hands the encoded facts to the store, and `graph::resolve` reads them
//! back.

pub mod compact;
pub(crate) mod ecmascript;
pub(crate) mod go;
pub mod go_build;
pub mod model;
pub(crate) mod python;
pub(crate) mod rust;
pub(crate) mod walker;

use tree_sitter::Node;

pub use compact::{BindingRec, DefRec, ImportRec, StrId, WorldFacts};
pub use model::{Binding, DefFact, DefFactKind, EncodedFacts, FileFacts, Import, Site, SiteKind};

use crate::lang::{Language, ParsedFile, TreeExtraction};
use walker::{Cx, WalkedGrammar};

/// Fact extraction as the parser's second pass over its trees
/// ([`crate::lang::parse_file_with`]): the index parses each file once and
/// gets its units, references and facts.
#[derive(Clone, Copy, Debug, Default)]
pub struct FactExtraction<'a> {
    /// The bare `cfg` names the build script of the file's Cargo package
    /// turns on in a default build (`wrap_proc_macro`; see
    /// `resolve::Manifests::rust_build_flags`): a Rust `#[cfg(name)]` of
    /// one holds. Empty for other files.
    pub build_flags: &'a [String],
}

impl TreeExtraction for FactExtraction<'_> {
    type Output = FileFacts;
    fn extract(
        &self,
        language: Language,
        root: Node<'_>,
        text: &str,
        line_starts: &[usize],
    ) -> Option<FileFacts> {
        extract_with(language, root, text, line_starts, self.build_flags)
    }
    fn merge_body(&self, file: &mut FileFacts, body: FileFacts, parts: &[(usize, usize)]) {
        file.merge_body(body, parts);
    }
    fn merge_expansion(
        &self,
        file: &mut FileFacts,
        expansion: FileFacts,
        place: &dyn Fn(usize) -> usize,
        token: &dyn Fn(usize) -> Option<(usize, u32, u32)>,
    ) {
        file.merge_expansion(expansion, place, token);
    }
}

/// Parses one file with its facts ([`FactExtraction`]), as a file of a
/// package whose build script turns no bare `cfg` name on.
pub fn parse_with_facts(path: &str, source: &[u8]) -> (ParsedFile, Option<FileFacts>) {
    parse_with_facts_in(path, source, &[])
}

/// [`parse_with_facts`] for a file of a package whose build script turns
/// on the bare `cfg` names `build_flags` ([`FactExtraction::build_flags`]).
pub fn parse_with_facts_in(
    path: &str,
    source: &[u8],
    build_flags: &[String],
) -> (ParsedFile, Option<FileFacts>) {
    crate::lang::parse_file_with(path, source, &FactExtraction { build_flags })
}

/// Extracts the facts of one parsed file; `None` for languages without rules.
/// `line_starts`: the byte where each line of `text` starts, `0` first (the
/// parser's, so the file is not scanned for line ends twice).
pub fn extract(
    language: Language,
    root: Node,
    text: &str,
    line_starts: &[usize],
) -> Option<FileFacts> {
    extract_with(language, root, text, line_starts, &[])
}

/// [`extract`] with the bare `cfg` names the file's package's build script
/// turns on ([`FactExtraction::build_flags`]).
pub fn extract_with(
    language: Language,
    root: Node,
    text: &str,
    line_starts: &[usize],
    build_flags: &[String],
) -> Option<FileFacts> {
    let _grammar = WalkedGrammar::set(language);
    let mut cx = Cx::new(text, line_starts);
    cx.build_flags = build_flags;
    match language {
        Language::Python => python::walk(&mut cx, root),
        Language::JavaScript | Language::TypeScript | Language::Tsx => {
            ecmascript::walk(&mut cx, root)
        }
        Language::Rust => rust::walk(&mut cx, root),
        Language::Go => go::walk(&mut cx, root),
        Language::Markdown | Language::Text => return None,
    }
    let mut facts = cx.facts;
    facts.sites.sort_by_key(|s| (s.byte, s.kind as u8));
    facts.sites.dedup_by_key(|s| s.byte);
    Some(facts)
}

/// Architecture Invariant (above): no file of this module names the store,
/// the resolver or the graph's readers.
#[cfg(test)]
mod layering {
    #[test]
    fn facts_depend_on_nothing_above_them() {
        // Every file of `facts/`, not a list: a new walker is checked too.
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/facts");
        let sources = canopy_syntax::testing::sources_under(&dir);
        let files: Vec<(&str, &str)> = sources
            .iter()
            .map(|(name, text)| (name.as_str(), text.as_str()))
            .collect();
        assert!(
            files.len() >= 9,
            "found only {} files in facts/",
            files.len()
        );
        let above = [
            "store", "resolve", "nav", "ops", "request", "index", "engine",
        ];
        let mut forbidden: Vec<String> = above
            .iter()
            .flat_map(|m| [format!("crate::{m}"), format!("graph::{m}")])
            .collect();
        forbidden.push(["super", "super", "super"].join("::"));
        canopy_syntax::testing::assert_never_named(&files, &forbidden, "reaches above the facts");
    }
}
