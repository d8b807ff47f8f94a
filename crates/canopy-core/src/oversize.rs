//! Files too large to parse, indexed as bounded text windows.
//!
//! `--max-file-size` decides which files are indexed; this module keeps the
//! cost of one file bounded whatever that limit is (issue N6: one 46.6 MB
//! single-line file took 120 s and 3.59 GB). A syntax tree and its
//! extraction cost about a hundred bytes of memory per byte of source
//! (measured: 457 MB for a 4.6 MB minified JavaScript file) and some of it
//! grows with the length of a line, and a text chunk was one unit per 50
//! lines however long they were: a single-line file became one unit whose
//! token count ran byte-pair encoding over one 46 MB piece (~40 bytes of
//! working memory per byte).
//!
//! So a file above [`PARSE_MAX_BYTES`] (the default size limit: every file
//! the defaults admit is parsed as before) is not parsed: it becomes a file
//! unit and `chunk` units of at most [`CHUNK_LINES`] lines and at most
//! [`MAX_UNIT_BYTES`] bytes each, cut at a line end, else after whitespace,
//! else at a character boundary. Every byte stays searchable; it has no
//! symbols or references. Work and memory per unit are bounded, and per
//! file linear in its size (the file, its text and the units' full-text
//! documents, about three times its size at the peak).

use std::borrow::Cow;
use std::collections::HashMap;

use crate::handle::{HandleId, content_identity};
use crate::lang::extract::{CHUNK_LINES, text_view};
use crate::lang::{Language, NodeType, ParsedFile, Unit};
use crate::text::fts_document;
use crate::tokens::count_tokens;

/// Files larger than this are indexed as text windows instead of parsed:
/// the default `--max-file-size` (1 MiB), so the defaults change nothing.
pub const PARSE_MAX_BYTES: u64 = crate::discover::DEFAULT_MAX_FILE_SIZE;

/// The most bytes a unit of a window-indexed file spans (its token count
/// and full-text document are bounded with it).
pub const MAX_UNIT_BYTES: usize = 64 * 1024;

/// The file unit and bounded `chunk` units of `source` (see the module
/// docs). Never fails, like [`crate::lang::parse_file`].
pub fn parse_windows(path: &str, source: &[u8]) -> ParsedFile {
    // Borrowed when it is UTF-8 (nearly always): no second copy of the file.
    let text: Cow<'_, str> = match std::str::from_utf8(source) {
        Ok(s) => Cow::Borrowed(s),
        Err(_) => Cow::Owned(text_view(source)),
    };
    let text: &str = &text;
    let end_line =
        1 + text.bytes().filter(|&b| b == b'\n').count() as u32 - u32::from(text.ends_with('\n'));
    let mut units = vec![Unit {
        id: HandleId::derive(path, NodeType::File.as_str(), "", 0),
        node_type: NodeType::File,
        name: Some(path.rsplit('/').next().unwrap_or(path).to_string()),
        qualified_name: None,
        parent: None,
        start_byte: 0,
        end_byte: text.len(),
        start_line: 1,
        end_line: end_line.max(1),
        preview_start: 0,
        token_count: 0,
        fts_name: fts_document(path),
        // Its own text is what no chunk holds: whitespace only.
        fts_body: String::new(),
    }];
    let mut ordinals: HashMap<String, u32> = HashMap::new();
    let mut tokens = 0u64;
    let mut start = 0;
    // 1-based line of byte `start`.
    let mut line = 1u32;
    while start < text.len() {
        let end = window_end(text, start);
        let window = &text[start..end];
        let lead = window.len() - window.trim_start().len();
        let trail = window.len() - window.trim_end().len();
        if lead < window.len() {
            let (s, e) = (start + lead, end - trail);
            let own = &text[s..e];
            let newlines = |from: usize, to: usize| {
                text.as_bytes()[from..to]
                    .iter()
                    .filter(|&&b| b == b'\n')
                    .count() as u32
            };
            let identity = format!("#{}", content_identity(own));
            let ordinal = ordinals.entry(identity.clone()).or_insert(0);
            let count = count_tokens(own) as u32;
            tokens += u64::from(count);
            units.push(Unit {
                id: HandleId::derive(path, NodeType::Chunk.as_str(), &identity, *ordinal),
                node_type: NodeType::Chunk,
                name: None,
                qualified_name: None,
                parent: Some(0),
                start_byte: s,
                end_byte: e,
                start_line: line + newlines(start, s),
                end_line: line + newlines(start, e.saturating_sub(1).max(s)),
                preview_start: s,
                token_count: count,
                fts_name: String::new(),
                fts_body: fts_document(own),
            });
            *ordinal += 1;
        }
        line += window.bytes().filter(|&b| b == b'\n').count() as u32;
        start = end;
    }
    units[0].token_count = u32::try_from(tokens).unwrap_or(u32::MAX);
    ParsedFile {
        language: Language::from_path(path),
        units,
        refs: Vec::new(),
        had_syntax_errors: false,
    }
}

/// Where the window starting at `start` ends: after [`CHUNK_LINES`] lines,
/// and within [`MAX_UNIT_BYTES`]: at the last line end in reach, else after
/// the last whitespace of its second half, else at a character boundary.
fn window_end(text: &str, start: usize) -> usize {
    let bytes = text.as_bytes();
    let limit = (start + MAX_UNIT_BYTES).min(text.len());
    // The end of line CHUNK_LINES, if it is within reach.
    let mut newlines = 0;
    for (i, &b) in bytes[start..limit].iter().enumerate() {
        if b == b'\n' {
            newlines += 1;
            if newlines == CHUNK_LINES {
                return start + i + 1;
            }
        }
    }
    if limit == text.len() {
        return limit;
    }
    let reach = &bytes[start..limit];
    if let Some(i) = reach.iter().rposition(|&b| b == b'\n') {
        return start + i + 1;
    }
    let half = MAX_UNIT_BYTES / 2;
    if let Some(i) = reach[half..].iter().rposition(|b| b.is_ascii_whitespace()) {
        return start + half + i + 1;
    }
    // A character boundary at or before the limit (one exists within 3 bytes).
    (start + 1..=limit)
        .rev()
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(limit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_cover_every_byte_within_the_bounds() {
        // One long line of words, a long run without whitespace, multibyte
        // text, and ordinary lines.
        let mut text = String::new();
        for i in 0..40_000 {
            text.push_str(&format!("word{i} "));
        }
        text.push_str(&"x".repeat(200_000));
        text.push_str(&"é".repeat(70_000));
        for i in 0..500 {
            text.push_str(&format!("\nline {i}"));
        }
        let parsed = parse_windows("big.txt", text.as_bytes());
        let chunks = &parsed.units[1..];
        assert!(parsed.units[0].node_type == NodeType::File);
        let mut covered = 0;
        for u in chunks {
            assert!(u.end_byte - u.start_byte <= MAX_UNIT_BYTES, "{u:?}");
            assert!(u.start_byte >= covered, "units overlap");
            assert!(
                text[covered..u.start_byte].trim().is_empty(),
                "bytes between units are whitespace"
            );
            assert!(u.end_line - u.start_line < CHUNK_LINES as u32);
            covered = u.end_byte;
        }
        assert!(text[covered..].trim().is_empty());
        let total: u64 = chunks.iter().map(|u| u64::from(u.token_count)).sum();
        assert_eq!(u64::from(parsed.units[0].token_count), total);
        let last = chunks.last().unwrap();
        assert_eq!(last.end_line, 501);
        assert!(text[last.start_byte..last.end_byte].ends_with("line 499"));
        let ids: std::collections::HashSet<_> = parsed.units.iter().map(|u| &u.id).collect();
        assert_eq!(ids.len(), parsed.units.len(), "ids are distinct");
    }
}
