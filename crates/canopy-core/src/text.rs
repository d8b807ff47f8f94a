//! Text helpers shared by indexing and querying: identifier splitting,
//! full-text documents, safe FTS5 query construction and previews.
//!
//! The FTS5 table uses the `unicode61` tokenizer with `_` as a token
//! character, so `parse_expr` is indexed whole. [`fts_document`] appends the
//! lower-cased parts of every compound identifier (`parse_expr` → `parse
//! expr`, `ParseError` → `parse error`), so a search for `parse` finds both.
//! `::` and `.` are separators for `unicode61`, so `foo::bar` and `self.path`
//! are indexed as their parts already.

use std::collections::BTreeSet;

/// Splits an identifier into lower-cased words at `_`, case changes and
/// letter/digit boundaries: `parseHTTPRequest2` → `parse http request 2`.
pub fn split_identifier(ident: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut current = String::new();
    let chars: Vec<char> = ident.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        if !c.is_alphanumeric() {
            if !current.is_empty() {
                words.push(std::mem::take(&mut current));
            }
            continue;
        }
        if let Some(&prev) = current.chars().last().as_ref() {
            let next = chars.get(i + 1).copied();
            let boundary = (prev.is_lowercase() && c.is_uppercase())
                || (prev.is_alphabetic() && c.is_ascii_digit())
                || (prev.is_ascii_digit() && c.is_alphabetic())
                // "HTTPRequest": the 'R' starts a new word because 'e' follows.
                || (prev.is_uppercase()
                    && c.is_uppercase()
                    && next.is_some_and(|n| n.is_lowercase()));
            if boundary {
                words.push(std::mem::take(&mut current));
            }
        }
        current.push(c);
    }
    if !current.is_empty() {
        words.push(current);
    }
    words.into_iter().map(|w| w.to_lowercase()).collect()
}

/// Iterates over identifier-like runs (`[A-Za-z0-9_]+` plus other alphanumerics).
pub fn identifiers(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|s| !s.is_empty())
}

/// Whether `ident` splits into more than one word.
fn is_compound(ident: &str) -> bool {
    let mut prev: Option<char> = None;
    for c in ident.chars() {
        if c == '_' {
            return true;
        }
        if let Some(p) = prev
            && ((p.is_lowercase() && c.is_uppercase()) || (p.is_alphabetic() && c.is_ascii_digit()))
        {
            return true;
        }
        prev = Some(c);
    }
    false
}

/// Builds the text stored in an FTS column: the original text followed by
/// the distinct split parts of its compound identifiers.
pub fn fts_document(text: &str) -> String {
    let mut extra: BTreeSet<String> = BTreeSet::new();
    for ident in identifiers(text) {
        if ident.len() > 64 || !is_compound(ident) {
            continue;
        }
        for part in split_identifier(ident) {
            extra.insert(part);
        }
    }
    if extra.is_empty() {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len() + extra.len() * 8);
    out.push_str(text);
    out.push('\n');
    for part in extra {
        out.push_str(&part);
        out.push(' ');
    }
    out
}

/// Words of a path used for matching: directory names and the file stem,
/// with the identifier parts of each (`src/authController.ts` → `src
/// authController auth controller ts`).
pub fn path_document(path: &str) -> String {
    fts_document(&path.replace(['/', '.', '-'], " "))
}

/// The terms a user's free text contributes to a full-text search: every
/// identifier-like run, lower-cased, longest first kept unique, capped.
///
/// Anything else (quotes, operators, parentheses, emoji) is dropped, so no
/// user text can produce an FTS5 syntax error.
pub fn query_terms(text: &str) -> Vec<String> {
    let mut seen = BTreeSet::new();
    let mut terms = Vec::new();
    for ident in identifiers(text) {
        let lower = ident.to_lowercase();
        if lower.chars().count() > 64 {
            continue;
        }
        if seen.insert(lower.clone()) {
            terms.push(lower);
        }
        if terms.len() >= 64 {
            break;
        }
    }
    terms
}

/// Quotes one term as an FTS5 string literal (the only FTS syntax we emit
/// around user text). Terms come from [`query_terms`], but quoting keeps the
/// function safe for any input.
pub fn fts_quote(term: &str) -> String {
    format!("\"{}\"", term.replace('"', "\"\""))
}

/// Collapses runs of whitespace to one space and cuts the result to at most
/// `max_bytes` bytes on a character boundary, adding `…` when cut.
pub fn collapse_preview(text: &str, max_bytes: usize) -> String {
    let mut out = String::with_capacity(max_bytes + 4);
    let mut pending_space = false;
    for c in text.chars() {
        if c.is_whitespace() {
            pending_space = !out.is_empty();
            continue;
        }
        if pending_space {
            if out.len() + 1 > max_bytes {
                break;
            }
            out.push(' ');
            pending_space = false;
        }
        if out.len() + c.len_utf8() > max_bytes {
            out.push('…');
            return out;
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_identifiers() {
        assert_eq!(split_identifier("parse_expr"), ["parse", "expr"]);
        assert_eq!(split_identifier("ParseError"), ["parse", "error"]);
        assert_eq!(
            split_identifier("parseHTTPRequest2"),
            ["parse", "http", "request", "2"]
        );
        assert_eq!(split_identifier("__init__"), ["init"]);
        assert_eq!(split_identifier("x"), ["x"]);
    }

    #[test]
    fn documents_keep_whole_identifiers_and_add_parts() {
        let doc = fts_document("fn parse_expr() -> ParseError");
        assert!(doc.starts_with("fn parse_expr() -> ParseError"));
        assert!(doc.contains("parse "));
        assert!(doc.contains("expr "));
        assert!(doc.contains("error "));
        assert_eq!(fts_document("plain words"), "plain words");
    }

    #[test]
    fn query_terms_drop_syntax() {
        assert_eq!(query_terms("self.path"), ["self", "path"]);
        assert_eq!(query_terms("foo::bar"), ["foo", "bar"]);
        assert_eq!(
            query_terms("\"quoted\" AND ( * NEAR"),
            ["quoted", "and", "near"]
        );
        assert!(query_terms("🎉 () * \"").is_empty());
    }

    #[test]
    fn previews_collapse_and_cut_on_char_boundaries() {
        assert_eq!(collapse_preview("  fn  a(\n   b)  ", 100), "fn a( b)");
        let cut = collapse_preview(&"é".repeat(80), 11);
        assert!(cut.len() <= 11 + '…'.len_utf8());
        assert!(cut.ends_with('…'));
    }
}
