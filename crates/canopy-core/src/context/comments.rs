//! Code comments for the `decisions` strategy.
//!
//! Why code is the way it is is often written next to it, not in a design
//! document: `# Parse line by line: settings files are flat`. This module
//! finds comment blocks that mention the focus names or the task's key
//! terms and proposes each as a fragment of its own (`node_type`
//! `comment`, the lines of the block, the handle of the unit around it).
//!
//! Search: the full-text index over code files finds the units whose text
//! has those words; their whole-line comments (`#`, `//`, `/* … */`) are
//! grouped into blocks of consecutive lines and scored: a focus name
//! mentioned counts most, then the key terms by weight, then words that
//! say *why* (`because`, `instead`, `workaround`, …). Licence headers and
//! commented-out code are left out.

use std::collections::HashMap;

use crate::context::Candidate;
use crate::error::{CanopyError, Result};
use crate::lang::Language;
use crate::lang::extract::text_view;
use crate::path_class::is_test_path;
use crate::snapshot::Snapshot;
use crate::store::read::NodeRecord;
use crate::text::{fts_quote, identifiers, split_identifier};
use crate::tokens::count_tokens;

/// Units the full-text search returns to look for comments in.
const SEARCH_UNITS: usize = 40;
/// Files read at most (the search's best units come from few files).
const MAX_FILES: usize = 24;
/// Key terms of the task that score a comment.
const SEARCH_TERMS: usize = 6;
/// Key terms searched for when there is no focus name.
const TERMS_WITHOUT_FOCUS: usize = 3;
/// Lines of one comment block kept at most.
const MAX_BLOCK_LINES: usize = 30;
/// Comment blocks proposed at most.
pub(crate) const MAX_COMMENTS: usize = 8;
/// Comment blocks proposed from one file at most (the rest say the same
/// about the same code).
const PER_FILE: usize = 2;
/// `node_type` of a comment fragment.
pub(crate) const COMMENT: &str = "comment";
/// Words that say why code is the way it is.
const WHY_WORDS: &[&str] = &[
    "because",
    "instead",
    "workaround",
    "hack",
    "todo",
    "fixme",
    "xxx",
    "note",
    "never",
    "always",
    "avoid",
    "otherwise",
    "reason",
    "deliberately",
    "intentionally",
    "tradeoff",
    "trade",
    "must",
    "why",
    "assume",
    "assumes",
];

/// A run of whole-line comments.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Block {
    /// Byte span in the file (whole lines, without the last newline).
    pub(crate) start_byte: usize,
    pub(crate) end_byte: usize,
    /// 1-based inclusive lines.
    pub(crate) start_line: u32,
    pub(crate) end_line: u32,
    /// The comment's words, markers stripped.
    pub(crate) prose: String,
}

/// How a language writes whole-line comments.
fn markers(language: Language) -> Option<&'static [&'static str]> {
    match language {
        Language::Python => Some(&["#"]),
        Language::Rust
        | Language::Go
        | Language::JavaScript
        | Language::TypeScript
        | Language::Tsx => Some(&["//", "/*", "*/", "*"]),
        Language::Markdown | Language::Text => None,
    }
}

/// The text of a comment line without its marker, or `None` when the line
/// is not a comment (or a comment that is not prose: shebangs, encodings,
/// tool pragmas).
fn comment_text<'t>(line: &'t str, marks: &[&str]) -> Option<&'t str> {
    let t = line.trim_start();
    let mark = marks.iter().find(|m| t.starts_with(**m))?;
    if t.starts_with("#!") || t.starts_with("# -*-") {
        return None;
    }
    let rest = t[mark.len()..].trim_start_matches(['/', '!', '*']).trim();
    let pragma = [
        "type:", "noqa", "pragma", "pylint:", "eslint", "@ts-", "nolint",
    ];
    if pragma.iter().any(|p| rest.starts_with(p)) {
        return None;
    }
    Some(rest.trim_end_matches("*/").trim_end())
}

/// Whether a comment reads as prose rather than commented-out code.
fn is_prose(prose: &str) -> bool {
    let words = prose
        .split_whitespace()
        .filter(|w| {
            w.chars()
                .all(|c| c.is_alphabetic() || ",.:;'()`-".contains(c))
        })
        .count();
    let code = prose.matches(['{', '}', ';', '=']).count();
    words >= 3 && code * 4 <= words
}

/// The comment blocks within `text[start..end]` (whole lines only).
pub(crate) fn comment_blocks(
    text: &str,
    language: Language,
    start: usize,
    end: usize,
) -> Vec<Block> {
    let Some(marks) = markers(language) else {
        return Vec::new();
    };
    let end = end.min(text.len());
    let mut start = start.min(end);
    // Whole lines: back to the start of the first one.
    while start > 0 && !text.is_char_boundary(start) {
        start -= 1;
    }
    let start = text[..start].rfind('\n').map_or(0, |i| i + 1);
    let first_line = text[..start].matches('\n').count() as u32 + 1;
    let mut blocks: Vec<Block> = Vec::new();
    let mut open: Option<(Block, usize)> = None;
    let mut at = start;
    for (line_no, line) in (first_line..).zip(text[start..end].split_inclusive('\n')) {
        let body = line.trim_end_matches(['\n', '\r']);
        match comment_text(body, marks) {
            Some(words) => {
                let (block, lines) = open.get_or_insert_with(|| {
                    (
                        Block {
                            start_byte: at,
                            end_byte: at,
                            start_line: line_no,
                            end_line: line_no,
                            prose: String::new(),
                        },
                        0,
                    )
                });
                if *lines < MAX_BLOCK_LINES {
                    block.end_byte = at + body.len();
                    block.end_line = line_no;
                    if !words.is_empty() {
                        if !block.prose.is_empty() {
                            block.prose.push(' ');
                        }
                        block.prose.push_str(words);
                    }
                    *lines += 1;
                }
            }
            None => {
                if let Some((block, _)) = open.take() {
                    blocks.push(block);
                }
            }
        }
        at += line.len();
    }
    if let Some((block, _)) = open.take() {
        blocks.push(block);
    }
    blocks.retain(|b| {
        let lower = b.prose.to_lowercase();
        let licence = b.start_line <= 3
            && (lower.contains("license")
                || lower.contains("licence")
                || lower.contains("copyright"));
        !licence && is_prose(&b.prose)
    });
    blocks
}

/// What a block says that the task asks about.
struct Mentions {
    names: Vec<String>,
    terms: Vec<String>,
    score: f64,
}

fn mentions(prose: &str, names: &[String], terms: &[(String, f64)]) -> Mentions {
    let mut words: Vec<String> = Vec::new();
    let mut exact: Vec<&str> = Vec::new();
    for ident in identifiers(prose) {
        exact.push(ident);
        words.push(ident.to_lowercase());
        words.extend(split_identifier(ident));
    }
    let found_names: Vec<String> = names
        .iter()
        .filter(|n| exact.contains(&n.as_str()))
        .cloned()
        .collect();
    let found_terms: Vec<String> = terms
        .iter()
        .filter(|(t, _)| words.contains(t))
        .map(|(t, _)| t.clone())
        .collect();
    let term_weight: f64 = terms
        .iter()
        .filter(|(t, _)| found_terms.contains(t))
        .map(|(_, w)| w)
        .sum();
    let why = WHY_WORDS.iter().any(|w| words.iter().any(|x| x == w));
    Mentions {
        score: 3.0 * found_names.len() as f64 + term_weight + if why { 0.5 } else { 0.0 },
        names: found_names,
        terms: found_terms,
    }
}

/// Comment blocks in code, best first, as candidates of their own: those
/// that mention a focus name, and those that share at least two of the
/// task's key terms.
pub(crate) fn comment_candidates(
    snapshot: Snapshot<'_>,
    task: &str,
    focus: &[NodeRecord],
) -> Result<(Vec<Candidate>, Vec<Candidate>)> {
    let store = snapshot.store();
    let mut names: Vec<String> = focus
        .iter()
        .filter_map(|n| n.name.clone())
        .filter(|n| n.chars().count() >= 3)
        .collect();
    names.sort();
    names.dedup();
    let (key, _) = crate::pack::key_terms(store, task)?;
    let max_weight = key.first().map_or(1.0, |t| t.weight.max(f64::EPSILON));
    // Normalised so the heaviest term counts as much as one name mention.
    let terms: Vec<(String, f64)> = key
        .into_iter()
        .take(SEARCH_TERMS)
        .map(|t| (t.text, 3.0 * t.weight / max_weight))
        .collect();
    let clauses = search_clauses(&names, &terms);
    if clauses.is_empty() {
        return Ok(Default::default());
    }
    // No file scope (listing every file costs more than it saves): units of
    // files without comment syntax are skipped below.
    let hits = store.fts_search(&clauses.join(" OR "), SEARCH_UNITS, None)?;
    let found = blocks_in(snapshot, hits)?;
    Ok(best_blocks(found, &names, &terms))
}

/// The full-text clauses: the focus names when there are some (rare
/// words: a cheap search); only without them the task's heaviest terms (an
/// OR of common words ranks tens of thousands of units).
fn search_clauses(names: &[String], terms: &[(String, f64)]) -> Vec<String> {
    let mut clauses: Vec<String> = Vec::new();
    for n in names {
        let words = split_identifier(n);
        if !words.is_empty() {
            let quoted: Vec<String> = words.iter().map(|w| fts_quote(w)).collect();
            clauses.push(quoted.join(" + "));
        }
    }
    if clauses.is_empty() {
        clauses.extend(
            terms
                .iter()
                .take(TERMS_WITHOUT_FOCUS)
                .map(|(t, _)| fts_quote(t)),
        );
    }
    clauses.sort();
    clauses.dedup();
    clauses
}

/// The comment blocks inside the units found, each with the smallest unit
/// around it, keyed by (path, first line); files changed on disk are left out.
fn blocks_in(
    snapshot: Snapshot<'_>,
    hits: Vec<NodeRecord>,
) -> Result<HashMap<(String, u32), (Block, NodeRecord)>> {
    let mut texts: HashMap<String, Option<String>> = HashMap::new();
    let mut found: HashMap<(String, u32), (Block, NodeRecord)> = HashMap::new();
    for unit in hits {
        let language = Language::from_path(&unit.file_path);
        if markers(language).is_none() {
            continue;
        }
        if !texts.contains_key(&unit.file_path) {
            if texts.len() >= MAX_FILES {
                continue;
            }
            let text = match snapshot.read_verified(&unit.file_path, &unit.content_hash) {
                Ok(bytes) => Some(text_view(&bytes)),
                Err(CanopyError::StaleIndex { .. }) => None,
                Err(e) => return Err(e),
            };
            texts.insert(unit.file_path.clone(), text);
        }
        let Some(Some(text)) = texts.get(&unit.file_path) else {
            continue;
        };
        for block in comment_blocks(text, language, unit.start_byte, unit.end_byte) {
            let key = (unit.file_path.clone(), block.start_line);
            match found.get_mut(&key) {
                Some((_, around)) => {
                    if unit.end_byte - unit.start_byte < around.end_byte - around.start_byte {
                        *around = unit.clone();
                    }
                }
                None => {
                    found.insert(key, (block, unit.clone()));
                }
            }
        }
    }
    Ok(found)
}

/// The blocks that mention a focus name or two of the task's terms, best
/// first, at most [`PER_FILE`] a file and [`MAX_COMMENTS`] in all, split
/// into (about the focus, on the task's terms).
fn best_blocks(
    found: HashMap<(String, u32), (Block, NodeRecord)>,
    names: &[String],
    terms: &[(String, f64)],
) -> (Vec<Candidate>, Vec<Candidate>) {
    let mut scored: Vec<(f64, Block, NodeRecord, Mentions)> = found
        .into_values()
        .filter_map(|(block, around)| {
            let m = mentions(&block.prose, names, terms);
            // A test's comment says what the test checks, rarely why the code is so.
            let weight = if is_test_path(&around.file_path) {
                0.5
            } else {
                1.0
            };
            (!m.names.is_empty() || m.terms.len() >= 2).then_some((
                weight * m.score,
                block,
                around,
                m,
            ))
        })
        .collect();
    scored.sort_by(|a, b| {
        b.0.total_cmp(&a.0)
            .then_with(|| a.2.file_path.cmp(&b.2.file_path))
            .then_with(|| a.1.start_line.cmp(&b.1.start_line))
    });
    let mut about_focus = Vec::new();
    let mut on_terms = Vec::new();
    let mut per_file: HashMap<String, usize> = HashMap::new();
    let spread = scored.into_iter().filter(|(_, _, around, _)| {
        let n = per_file.entry(around.file_path.clone()).or_default();
        *n += 1;
        *n <= PER_FILE
    });
    for (_, block, around, m) in spread.take(MAX_COMMENTS) {
        let place = around
            .qualified_name
            .as_deref()
            .or(around.name.as_deref())
            .map_or_else(|| around.file_path.clone(), |n| format!("`{n}`"));
        let reason = match m.names.first() {
            Some(n) => format!("comment in {place} about the focus `{n}`"),
            None => {
                let list: Vec<String> = m.terms.iter().take(3).map(|t| format!("`{t}`")).collect();
                format!("comment in {place} on the task's terms {}", list.join(", "))
            }
        };
        let candidate = Candidate {
            node: comment_node(&around, &block),
            reason,
        };
        if m.names.is_empty() {
            on_terms.push(candidate);
        } else {
            about_focus.push(candidate);
        }
    }
    (about_focus, on_terms)
}

/// A unit record for a comment block inside `around`: its span and lines,
/// the handle of the unit around it (what expanding it shows), and a row
/// id no stored unit has (negative).
fn comment_node(around: &NodeRecord, block: &Block) -> NodeRecord {
    NodeRecord {
        rowid: -around
            .rowid
            .saturating_mul(1 << 20)
            .saturating_add(i64::from(block.start_line & 0xF_FFFF))
            .saturating_add(1),
        handle: around.handle.clone(),
        file_path: around.file_path.clone(),
        content_hash: around.content_hash.clone(),
        node_type: COMMENT.into(),
        name: None,
        qualified_name: None,
        parent_rowid: Some(around.rowid),
        start_byte: block.start_byte,
        end_byte: block.end_byte,
        start_line: block.start_line,
        end_line: block.end_line,
        token_count: count_tokens(&block.prose) as u32,
        preview_start: block.start_byte,
        score: 0.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_blocks_are_runs_of_whole_line_comments() {
        let text = "#!/usr/bin/env python\n# Copyright 2020 the authors, MIT license text here\nimport os\n\n\ndef f():\n    # We split on '=' only once because values may hold '=' too.\n    # Keys are stripped.\n    x = 1  # trailing comments are not blocks\n    # x = compute(y); z = 2\n    return x\n";
        let blocks = comment_blocks(text, Language::Python, 0, text.len());
        assert_eq!(blocks.len(), 1, "{blocks:?}");
        let b = &blocks[0];
        assert_eq!((b.start_line, b.end_line), (7, 8));
        assert!(b.prose.starts_with("We split on"), "{}", b.prose);
        assert!(b.prose.ends_with("Keys are stripped."), "{}", b.prose);
        assert!(text[b.start_byte..b.end_byte].starts_with("    # We split"));
        assert!(text[b.start_byte..b.end_byte].ends_with("stripped."));
    }

    #[test]
    fn c_style_blocks_and_doc_comments() {
        let text = "/// Parses a table.\n///\n/// Line by line, because tables are flat.\nfn parse() {\n    /* The cache is never\n     * shared between threads: it is not Sync. */\n    let a = 1;\n    // b();\n}\n";
        let blocks = comment_blocks(text, Language::Rust, 0, text.len());
        assert_eq!(blocks.len(), 2, "{blocks:?}");
        assert_eq!((blocks[0].start_line, blocks[0].end_line), (1, 3));
        assert_eq!((blocks[1].start_line, blocks[1].end_line), (5, 6));
        assert!(
            blocks[1].prose.contains("never shared"),
            "{}",
            blocks[1].prose
        );
        // Only the range asked for (from the start of its first line).
        let inner = text.find("let a").unwrap();
        assert!(comment_blocks(text, Language::Rust, inner, text.len()).is_empty());
        assert!(comment_blocks("# a b c d\n", Language::Markdown, 0, 10).is_empty());
    }

    #[test]
    fn mentions_score_names_over_terms() {
        let names = vec!["Parser".to_string()];
        let terms = vec![("line".to_string(), 3.0), ("flat".to_string(), 1.0)];
        let named = mentions("The Parser reads one line at a time", &names, &terms);
        assert_eq!(named.names, ["Parser"]);
        assert_eq!(named.terms, ["line"]);
        let why = mentions(
            "flat files, line by line, because it is simpler",
            &names,
            &terms,
        );
        assert!(why.names.is_empty());
        assert_eq!(why.terms.len(), 2);
        assert!(named.score > why.score);
        assert!(why.score > mentions("flat line", &names, &terms).score);
    }
}
