//! Predictive lazy indexing: on a large repository with no index, index the
//! files a query points at first, answer, and complete the rest afterwards.
//!
//! A file is *targeted* when a directory name or its file name shares a word
//! with the query (identifier parts included: `PaymentProcessor` targets
//! `services/payment/processor.py`), when it matches the query's glob, or
//! when it is a likely entry point (README, `main.*`, `lib.rs`, `index.*`,
//! `__init__.py`, … near the root).

use std::collections::HashSet;

use crate::discover::{Candidate, PathFilter};
use crate::query::QueryParams;
use crate::text::split_identifier;

/// Repositories with more candidate files than this are indexed lazily.
pub const LAZY_THRESHOLD: usize = 1000;
/// Most files indexed before the first answer.
pub const MAX_TARGETS: usize = 2000;

const ENTRY_STEMS: &[&str] = &[
    "readme", "main", "lib", "mod", "index", "__init__", "app", "setup", "cli", "server",
];
const ENTRY_NAMES: &[&str] = &["cargo.toml", "package.json", "go.mod", "pyproject.toml"];

/// Words of a query that can name directories or files.
pub fn query_keywords(params: &QueryParams) -> Vec<String> {
    let mut text = String::new();
    for s in [
        &params.pattern,
        &params.symbol,
        &params.section,
        &params.parent,
        &params.query,
    ]
    .into_iter()
    .flatten()
    {
        text.push_str(s);
        text.push(' ');
    }
    for p in params.patterns.iter().flatten() {
        text.push_str(p);
        text.push(' ');
    }
    let mut out: Vec<String> = Vec::new();
    // Split identifiers in their original case (`PaymentProcessor` → payment, processor).
    for term in crate::text::identifiers(&text).take(64) {
        let mut words = split_identifier(term);
        words.push(term.to_lowercase().replace('_', ""));
        for w in words {
            if w.len() >= 3 && !out.contains(&w) && !DSL_WORDS.contains(&w.as_str()) {
                out.push(w);
            }
        }
    }
    out
}

const DSL_WORDS: &[&str] = &[
    "grep",
    "code",
    "definition",
    "references",
    "section",
    "file",
    "children",
    "named",
    "in",
    "union",
    "intersect",
    "limit",
    "the",
    "and",
    "for",
    "with",
];

fn path_words(path: &str) -> Vec<String> {
    let mut words = Vec::new();
    for component in path.split('/') {
        let stem = component.rsplit_once('.').map_or(component, |(s, _)| s);
        let lower = stem.to_lowercase();
        words.extend(split_identifier(stem));
        words.push(lower.replace(['_', '-'], ""));
    }
    words
}

fn matches(word: &str, keyword: &str) -> bool {
    word == keyword
        || (keyword.len() >= 4
            && word.len() >= 4
            && (word.starts_with(keyword) || keyword.starts_with(word)))
}

fn is_entry_point(path: &str) -> bool {
    if path.matches('/').count() > 2 {
        return false;
    }
    let name = path.rsplit('/').next().unwrap_or(path).to_lowercase();
    let stem = name.rsplit_once('.').map_or(name.as_str(), |(s, _)| s);
    ENTRY_STEMS.contains(&stem) || ENTRY_NAMES.contains(&name.as_str())
}

/// The files to index before answering `params`.
pub fn targets(files: &[Candidate], params: &QueryParams) -> HashSet<String> {
    let keywords = query_keywords(params);
    let glob = params.glob.as_deref().and_then(|g| PathFilter::new(g).ok());
    let mut scored: Vec<(usize, &str)> = files
        .iter()
        .filter_map(|c| {
            let words = path_words(&c.path);
            let mut score = keywords
                .iter()
                .filter(|k| words.iter().any(|w| matches(w, k)))
                .count();
            if glob.as_ref().is_some_and(|g| g.is_match(&c.path)) {
                score += 1;
            }
            (score > 0).then_some((score, c.path.as_str()))
        })
        .collect();
    scored.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(b.1)));
    let mut out: HashSet<String> = scored
        .into_iter()
        .take(MAX_TARGETS)
        .map(|(_, p)| p.to_string())
        .collect();
    out.extend(
        files
            .iter()
            .filter(|c| is_entry_point(&c.path))
            .map(|c| c.path.clone()),
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cand(path: &str) -> Candidate {
        Candidate {
            path: path.into(),
            abs_path: path.into(),
            size: 1,
            mtime_ns: 0,
        }
    }

    #[test]
    fn targets_follow_identifier_parts_and_entry_points() {
        let files = [
            cand("services/payments/processor.py"),
            cand("services/shipping/tracker.py"),
            cand("README.md"),
            cand("deep/a/b/c/main.py"),
        ];
        let params = QueryParams {
            symbol: Some("PaymentProcessor".into()),
            ..Default::default()
        };
        let t = targets(&files, &params);
        assert!(t.contains("services/payments/processor.py"));
        assert!(t.contains("README.md"));
        assert!(!t.contains("services/shipping/tracker.py"));
        assert!(!t.contains("deep/a/b/c/main.py"));
    }
}
