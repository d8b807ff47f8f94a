//! Macro arguments read as code. Tree-sitter keeps the arguments of a
//! macro invocation as a token tree, so `assert!(status_code(400).
//! is_client_error())` is a list of tokens: read token by token, a call
//! after `)` has no receiver the walker can write, and every link of a
//! chain after the first was lost (issue 27: a third of http's missed call
//! sites, all in tests). An argument list in `(…)` or `[…]` is parsed
//! again on its own, with only its bytes included (node positions stay the
//! file's), as a parenthesized, tuple or array expression; when it parses
//! without error the walker reads it as it reads code outside macros
//! (calls, chains, paths, closures and their bindings). One that does not
//! parse (a pattern, a DSL, `$`-fragments) is left to the token reader.
//! `matches!`-like macros have a pattern after their first argument: only
//! the first is parsed, the rest stays tokens.

use std::cell::RefCell;

use tree_sitter::{Node, Parser, Range, Tree};

use super::super::walker::{Cx, GrammarLookup};
use crate::lang::Language;

/// Macros whose first argument is an expression and whose second is a
/// pattern (`matches!(v, Some(n) if n > 3)`).
const PATTERN_AFTER_FIRST: &[&str] = &["matches", "assert_matches", "debug_assert_matches"];

thread_local! {
    /// A parser for argument lists, one per indexing thread, set to Rust
    /// once (`lang`'s own parser is private to the file parse).
    static ARGS_PARSER: RefCell<Option<Parser>> = const { RefCell::new(None) };
}

/// A macro's argument list (or its first argument) parsed as an expression.
pub(super) struct ParsedArgs {
    tree: Tree,
    start: usize,
    end: usize,
    /// The first byte of the token tree left to the token reader (its end
    /// when the whole list parsed).
    pub rest: usize,
}

impl ParsedArgs {
    /// The expression that spans the parsed bytes.
    pub fn node(&self) -> Option<Node<'_>> {
        self.tree
            .root_node()
            .named_descendant_for_byte_range(self.start, self.end)
            .filter(|n| n.start_byte() == self.start && n.end_byte() == self.end)
    }
}

/// The argument list `tt` (the token tree of the macro invocation
/// `invocation`) parsed as an expression, or `None`: not in `(…)` / `[…]`,
/// no name in it (`println!("done")`: nothing to read), or it does not
/// parse as expressions without error.
pub(super) fn parse_args(cx: &Cx, invocation: Node, tt: Node) -> Option<ParsedArgs> {
    if !matches!(cx.t(tt).as_bytes().first(), Some(b'(' | b'[')) {
        return None;
    }
    let mut c = tt.walk();
    let kids: Vec<Node> = tt.children(&mut c).collect();
    let names = kids.iter().any(|k| {
        matches!(
            k.kind_name(),
            "identifier" | "self" | "crate" | "super" | "token_tree"
        )
    });
    if !names || kids.len() < 2 {
        return None;
    }
    // Without a `.` or `:` the tokens say as much (`f(` calls, no
    // receivers to follow): the parse is left out, as it costs instructions.
    if !cx.t(tt).bytes().any(|b| b == b'.' || b == b':') {
        return None;
    }
    let macro_name = invocation
        .field("macro")
        .map(|m| cx.t(m).rsplit("::").next().unwrap_or_default())
        .unwrap_or_default();
    let first_comma = PATTERN_AFTER_FIRST
        .contains(&macro_name)
        .then(|| kids.iter().find(|k| cx.t(**k) == ","))
        .flatten();
    let close = kids.last()?;
    let (ranges, rest) = match first_comma {
        // `(first` and `)`: the first argument alone, parenthesized.
        Some(comma) => (
            vec![
                Range {
                    start_byte: tt.start_byte(),
                    end_byte: comma.start_byte(),
                    start_point: tt.start_position(),
                    end_point: comma.start_position(),
                },
                close.range(),
            ],
            comma.start_byte(),
        ),
        None => (vec![tt.range()], tt.end_byte()),
    };
    let mut ranges = ranges;
    ranges.extend(semicolon_after(cx.text, tt));
    let tree = parse_ranges(cx.text, &ranges)?;
    let parsed = ParsedArgs {
        tree,
        start: tt.start_byte(),
        end: tt.end_byte(),
        rest,
    };
    let node = parsed.node()?;
    let expression = matches!(
        node.kind_name(),
        "parenthesized_expression" | "tuple_expression" | "array_expression"
    );
    (expression && !node.has_error()).then_some(())?;
    Some(parsed)
}

/// The first `;` byte after `tt` (any: in a comment or a string it is
/// still one byte the lexer reads as `;`), as a range: with it the list
/// parses as an expression statement. Without it the parser recovers from a
/// missing `;` at the end of every list, which cost more instructions than
/// the parse (tokio: 2 of the 3 billion a first version added).
fn semicolon_after(text: &str, tt: Node) -> Option<Range> {
    let end = tt.end_byte();
    let offset = text.get(end..)?.find(';')?;
    let before = &text[end..end + offset];
    let newlines = before.matches('\n').count();
    let mut point = tt.end_position();
    if newlines == 0 {
        point.column += offset;
    } else {
        point.row += newlines;
        point.column = before.len() - before.rfind('\n').map_or(0, |i| i + 1);
    }
    let start_byte = end + offset;
    Some(Range {
        start_byte,
        end_byte: start_byte + 1,
        start_point: point,
        end_point: tree_sitter::Point {
            row: point.row,
            column: point.column + 1,
        },
    })
}

/// `text` parsed with only `ranges` included (sorted, not overlapping).
fn parse_ranges(text: &str, ranges: &[Range]) -> Option<Tree> {
    ARGS_PARSER.with(|parser| {
        let mut parser = parser.borrow_mut();
        if parser.is_none() {
            let mut p = Parser::new();
            p.set_language(&Language::Rust.spec()?.grammar).ok()?;
            *parser = Some(p);
        }
        let parser = parser.as_mut()?;
        parser.set_included_ranges(ranges).ok()?;
        parser.parse(text, None)
    })
}
