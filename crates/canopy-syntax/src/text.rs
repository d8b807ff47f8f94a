//! Text helpers shared by indexing and querying: identifier splitting,
//! full-text documents, safe FTS5 query construction and previews.
//!
//! The FTS5 table uses the `unicode61` tokenizer with `_` as a token
//! character, so `parse_expr` is indexed whole. [`fts_document`] appends the
//! lower-cased parts of every compound identifier (`parse_expr` → `parse
//! expr`, `ParseError` → `parse error`), so a search for `parse` finds both.
//! `::` and `.` are separators for `unicode61`, so `foo::bar` and `self.path`
//! are indexed as their parts already.

use std::borrow::Cow;
use std::collections::BTreeSet;

/// Splits an identifier into lower-cased words at `_`, case changes and
/// letter/digit boundaries: `parseHTTPRequest2` → `parse http request 2`.
pub fn split_identifier(ident: &str) -> Vec<String> {
    let mut words = Vec::new();
    for_each_word(ident, |word| words.push(word.to_lowercase()));
    words
}

/// Calls `f` with each word of `ident` as written (not lower-cased), in
/// order; the words of [`split_identifier`].
fn for_each_word<'a>(ident: &'a str, mut f: impl FnMut(&'a str)) {
    // The current word starts at `start`; `prev` is its last character.
    let mut start = 0;
    let mut prev: Option<char> = None;
    let mut chars = ident.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if !c.is_alphanumeric() {
            if prev.is_some() {
                f(&ident[start..i]);
            }
            prev = None;
            continue;
        }
        match prev {
            None => start = i,
            Some(prev) => {
                let next = chars.peek().map(|&(_, n)| n);
                let boundary = (prev.is_lowercase() && c.is_uppercase())
                    || (prev.is_alphabetic() && c.is_ascii_digit())
                    || (prev.is_ascii_digit() && c.is_alphabetic())
                    // "HTTPRequest": the 'R' starts a new word because 'e' follows.
                    || (prev.is_uppercase()
                        && c.is_uppercase()
                        && next.is_some_and(|n| n.is_lowercase()));
                if boundary {
                    f(&ident[start..i]);
                    start = i;
                }
            }
        }
        prev = Some(c);
    }
    if prev.is_some() {
        f(&ident[start..]);
    }
}

/// Whether `c` is invisible: Unicode's `Default_Ignorable_Code_Point`
/// (DerivedCoreProperties.txt): zero-width space, joiners and non-joiner,
/// soft hyphen, word joiner, byte-order mark, direction marks and
/// embeddings, variation selectors, fillers, tags. Text copied from a web
/// page carries them (Trac writes a zero-width space before a linked file
/// name, renderers put break opportunities into long identifiers), and
/// nothing a reader sees is there.
pub fn is_invisible(c: char) -> bool {
    matches!(
        c,
        '\u{00AD}'
            | '\u{034F}'
            | '\u{061C}'
            | '\u{115F}'..='\u{1160}'
            | '\u{17B4}'..='\u{17B5}'
            | '\u{180B}'..='\u{180F}'
            | '\u{200B}'..='\u{200F}'
            | '\u{202A}'..='\u{202E}'
            | '\u{2060}'..='\u{206F}'
            | '\u{3164}'
            | '\u{FE00}'..='\u{FE0F}'
            | '\u{FEFF}'
            | '\u{FFA0}'
            | '\u{FFF0}'..='\u{FFF8}'
            | '\u{1BCA0}'..='\u{1BCA3}'
            | '\u{1D173}'..='\u{1D17A}'
            | '\u{E0000}'..='\u{E0FFF}'
    )
}

/// `text` without its invisible characters ([`is_invisible`]): the text as
/// a reader sees it, so `compute\u{AD}_total` is the identifier
/// `compute_total` and `\u{200B}src/app.py` the path `src/app.py`.
pub fn visible(text: &str) -> Cow<'_, str> {
    if text.chars().any(is_invisible) {
        Cow::Owned(text.chars().filter(|&c| !is_invisible(c)).collect())
    } else {
        Cow::Borrowed(text)
    }
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
/// the distinct split parts of its compound identifiers (sorted, each
/// followed by a space).
pub fn fts_document(text: &str) -> String {
    let mut out = String::new();
    append_identifier_parts(text, &mut out);
    if out.is_empty() {
        return text.to_string();
    }
    let mut doc = String::with_capacity(text.len() + out.len());
    doc.push_str(text);
    doc.push_str(&out);
    doc
}

/// [`fts_document`] of an owned text, reusing its buffer.
pub fn fts_document_owned(mut text: String) -> String {
    let mut out = String::new();
    append_identifier_parts(&text, &mut out);
    text.push_str(&out);
    text
}

/// Appends what [`fts_document`] adds to `text` (nothing, or `\n` and the
/// sorted distinct parts, each followed by a space) to `out`.
fn append_identifier_parts(text: &str, out: &mut String) {
    let mut compounds: Vec<&str> = Vec::new();
    // No identifier spans a line end, so lines of ASCII take the byte path
    // even in a text with some non-ASCII lines (a translation file, an
    // accented name in a docstring): the parts are the same either way.
    for_each_line_run(text, |run, ascii| {
        if ascii {
            ascii_compound_identifiers(run, &mut compounds);
        } else {
            compounds
                .extend(identifiers(run).filter(|ident| ident.len() <= 64 && is_compound(ident)));
        }
    });
    if compounds.is_empty() {
        return;
    }
    // A unit names the same identifiers again and again (`self.model_name`:
    // cut at each `def` and `class` line, the files of bench/README.md's
    // Django subset `dj` repeat 43% of their compound identifiers): each
    // distinct one is split once. The parts are sorted and made distinct
    // below anyway, so the document is the same.
    compounds.sort_unstable();
    compounds.dedup();
    let mut parts: Vec<Cow<'_, str>> = Vec::with_capacity(compounds.len() * 2);
    for ident in compounds {
        push_words(ident, &mut parts);
    }
    if parts.is_empty() {
        return; // compounds of `_` alone
    }
    parts.sort_unstable();
    parts.dedup();
    out.reserve(1 + parts.iter().map(|p| p.len() + 1).sum::<usize>());
    out.push('\n');
    for part in parts {
        out.push_str(&part);
        out.push(' ');
    }
}

/// Classes of ASCII bytes for [`ascii_compound_identifiers`]: `0` for a byte
/// that is no part of an identifier.
const LOWER: u8 = 1;
const UPPER: u8 = 2;
const DIGIT: u8 = 4;
const UNDERSCORE: u8 = 8;
static ASCII_CLASS: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut b = 0;
    while b < 256 {
        table[b] = match b as u8 {
            b'a'..=b'z' => LOWER,
            b'A'..=b'Z' => UPPER,
            b'0'..=b'9' => DIGIT,
            b'_' => UNDERSCORE,
            _ => 0,
        };
        b += 1;
    }
    table
};

/// The compound identifiers of an ASCII `text` (at most 64 bytes each):
/// the same identifiers and tests as [`identifiers`] and [`is_compound`],
/// on bytes (for ASCII, `char::is_alphanumeric` is
/// `u8::is_ascii_alphanumeric` and so on). One pass: an identifier's bytes
/// are classed by a table as they are read, and whether it is compound (an
/// `_`, a lower-case letter before an upper-case one, a letter before a
/// digit) is known at its end, instead of being found by a second and
/// third scan of it; every unit's text passes here.
fn ascii_compound_identifiers<'a>(text: &'a str, compounds: &mut Vec<&'a str>) {
    debug_assert!(text.is_ascii());
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let mut prev = ASCII_CLASS[usize::from(bytes[i])];
        if prev == 0 {
            i += 1;
            continue;
        }
        let start = i;
        let mut compound = prev == UNDERSCORE;
        i += 1;
        while i < bytes.len() {
            let class = ASCII_CLASS[usize::from(bytes[i])];
            if class == 0 {
                break;
            }
            compound |= class == UNDERSCORE
                || (prev == LOWER && class == UPPER)
                || (prev & (LOWER | UPPER) != 0 && class == DIGIT);
            prev = class;
            i += 1;
        }
        if i - start <= 64 && compound {
            compounds.push(&text[start..i]);
        }
    }
}

/// Calls `f` with `text` cut after line ends into runs of whole lines,
/// each all ASCII (`true`) or holding a non-ASCII character (`false`);
/// neighbouring runs differ in that.
fn for_each_line_run<'a>(text: &'a str, mut f: impl FnMut(&'a str, bool)) {
    if text.is_ascii() {
        f(text, true);
        return;
    }
    let mut run_start = 0;
    let mut run_ascii = true;
    let mut line_start = 0;
    for line in text.split_inclusive('\n') {
        let ascii = line.is_ascii();
        if line_start > run_start && ascii != run_ascii {
            f(&text[run_start..line_start], run_ascii);
            run_start = line_start;
        }
        run_ascii = ascii;
        line_start += line.len();
    }
    if line_start > run_start {
        f(&text[run_start..], run_ascii);
    }
}

/// Pushes the lower-cased words of `ident` (borrowed when already lower case).
fn push_words<'a>(ident: &'a str, parts: &mut Vec<Cow<'a, str>>) {
    for_each_word(ident, |word| {
        parts.push(
            if word
                .bytes()
                .all(|b| b.is_ascii() && !b.is_ascii_uppercase())
            {
                Cow::Borrowed(word)
            } else {
                Cow::Owned(word.to_lowercase())
            },
        )
    });
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

/// The edit distance (insertions, deletions, substitutions of characters,
/// ASCII case ignored) between `a` and `b` when it is at most `max`; `None`
/// when it is more (the rows stop as soon as every cell exceeds `max`).
pub fn edit_distance_within(a: &str, b: &str, max: usize) -> Option<usize> {
    let a: Vec<char> = a.chars().map(|c| c.to_ascii_lowercase()).collect();
    let b: Vec<char> = b.chars().map(|c| c.to_ascii_lowercase()).collect();
    if a.len().abs_diff(b.len()) > max {
        return None;
    }
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut row = vec![0; b.len() + 1];
    for (i, ca) in a.iter().enumerate() {
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitute = prev[j] + usize::from(ca != cb);
            row[j + 1] = substitute.min(prev[j + 1] + 1).min(row[j] + 1);
        }
        if row.iter().all(|&d| d > max) {
            return None;
        }
        std::mem::swap(&mut prev, &mut row);
    }
    Some(prev[b.len()]).filter(|&d| d <= max)
}

#[cfg(test)]
mod tests {
    #[test]
    fn invisible_characters_are_dropped() {
        let text =
            "\u{FEFF}see \u{200B}src/app.py: compute\u{AD}_to\u{200D}tal\u{2060}() \u{202E}x";
        assert_eq!(visible(text), "see src/app.py: compute_total() x");
        assert!(matches!(visible("plain text, caf\u{E9}"), Cow::Borrowed(_)));
        // Visible format characters and spaces are not invisible.
        for c in [' ', '\u{00A0}', '\u{0600}', '\u{06DD}', 'a', '_'] {
            assert!(!is_invisible(c), "{c:?}");
        }
    }

    #[test]
    fn edit_distance_is_bounded_and_ignores_case() {
        assert_eq!(edit_distance_within("validate", "valdiate", 2), Some(2));
        assert_eq!(edit_distance_within("Parser", "parser", 0), Some(0));
        assert_eq!(edit_distance_within("parse", "parser", 1), Some(1));
        assert_eq!(edit_distance_within("parse", "render", 2), None);
        assert_eq!(edit_distance_within("", "ab", 1), None);
        assert_eq!(edit_distance_within("kitten", "sitting", 3), Some(3));
    }

    use super::*;

    /// The first implementation of [`split_identifier`], kept to check the current one.
    fn split_identifier_reference(ident: &str) -> Vec<String> {
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

    /// The first implementation of [`fts_document`], kept to check the current one.
    fn fts_document_reference(text: &str) -> String {
        let mut extra: BTreeSet<String> = BTreeSet::new();
        for ident in identifiers(text) {
            if ident.len() > 64 || !is_compound(ident) {
                continue;
            }
            for part in split_identifier_reference(ident) {
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

    fn check_same_as_reference(text: &str) {
        assert_eq!(fts_document(text), fts_document_reference(text), "{text:?}");
        assert_eq!(
            fts_document_owned(text.to_string()),
            fts_document_reference(text),
            "{text:?}"
        );
        for ident in identifiers(text) {
            assert_eq!(
                split_identifier(ident),
                split_identifier_reference(ident),
                "{ident:?}"
            );
        }
        assert_eq!(
            split_identifier(text),
            split_identifier_reference(text),
            "{text:?}"
        );
    }

    #[test]
    fn documents_and_words_match_the_reference() {
        for text in [
            "",
            "_",
            "__",
            "__init__",
            "a_",
            "_a",
            "x",
            "parse_expr ParseError parseHTTPRequest2 HTTPServer IOError getX ABc aB1c2D",
            "fn parse_expr(input: &str) -> Result<Expr, ParseError> { todo!() }",
            "self.inner_state.lock_owner = other.inner_state.lock_owner; x2y3 X2Y3 a1_b2",
            "ÉcoleNormale straßeName ǅungla ǄUNGLA İstanbulCity ΣίσυφοςΣ ÀÉÎõü_ÇÑ camelÅngström",
            "日本語_テキスト 変数名X 中文Name число_Два 三_四 ⅫRoman ½half x²y",
            "emoji🎉_name a\u{0301}_b e\u{0300}Cc \u{1e9e}ẞ_x KELVIN\u{212a}_SIGN",
            "UPPER_CASE_NAME MixedCase_and_snake mixedCASEWord ABCDef ABC123def 123abc",
            "aVeryLongIdentifierThatIsLongerThanSixtyFourBytesInTotalLengthSoItIsSkippedEntirely_x",
            "a__b___c d_1_e2F3",
            // Identifiers repeated (split once each), as in most units.
            "self.model_name = model_name; self.model_name.lower() model_name getX getX get_x GetX",
            "getX_é getX_é café_au_lait café_au_lait\nget_x get_x getX",
        ] {
            check_same_as_reference(text);
        }
        // Identifiers of 63, 64 and 65 bytes (longer ones are not split).
        for len in 63..=65 {
            check_same_as_reference(&format!("x {}_b y", "a".repeat(len - 2)));
            check_same_as_reference(&format!("x {}_é y", "a".repeat(len - 3)));
        }
        check_same_as_reference(include_str!("lang/extract.rs"));
        check_same_as_reference(include_str!("tokens.rs"));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 3000, ..Default::default() })]

        #[test]
        fn documents_match_the_reference_on_any_text(text in "\\PC*") {
            check_same_as_reference(&text);
        }

        #[test]
        fn documents_match_the_reference_on_ascii_soup(
            text in "[a-zA-Z0-9_ .:\n(){}\u{7f}\u{1}-]{0,80}"
        ) {
            check_same_as_reference(&text);
        }

        #[test]
        fn documents_match_the_reference_on_ascii_and_other_lines(
            text in "([a-zA-Z0-9_ .:]{0,16}|[a-zA-Z_ éÉßǅ日½\u{0301}]{0,16})(\r?\n([a-zA-Z0-9_ .:]{0,16}|[a-zA-Z_ éÉßǅ日½\u{0301}]{0,16})){0,8}\n?"
        ) {
            check_same_as_reference(&text);
        }

        #[test]
        fn documents_match_the_reference_on_identifier_soup(
            text in "[a-zA-Z0-9_ .:éÉßİǅΣ日½²\u{0301}]{0,60}"
        ) {
            check_same_as_reference(&text);
        }
    }

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
