//! The S-expression query language (seed `004_…`, "S-Expression DSL").
//!
//! ```text
//! expr  := '(' op arg* ')'
//! arg   := string | integer | expr
//! op    := grep | code | definition | references | section | file | children
//!        | children-named | in-file | union | intersect | limit
//! ```
//!
//! Strings are double-quoted with `\"` and `\\` escapes; bare words are
//! accepted where a string is expected. Parse errors name the byte position
//! and what was expected there. Nesting depth and size are bounded.

use crate::error::{CanopyError, Result};

/// Deepest nesting accepted.
pub const MAX_DEPTH: usize = 32;
/// Longest query accepted, in bytes.
pub const MAX_QUERY_BYTES: usize = 16 * 1024;

/// A parsed query expression.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Expr {
    /// Full-text search.
    Grep(String),
    /// Symbol search (exact, then case-insensitive, then prefix/substring).
    Code(String),
    /// Exact symbol definition.
    Definition(String),
    /// References to a symbol.
    References(String),
    /// Markdown section by heading.
    Section(String),
    /// A whole file as one handle.
    File(String),
    /// All children of a parent symbol.
    Children(String),
    /// A named child of a parent symbol.
    ChildrenNamed(String, String),
    /// Restrict a query to files matching a glob.
    InFile(String, Box<Expr>),
    /// Results of any sub-query.
    Union(Vec<Expr>),
    /// Results common to all sub-queries.
    Intersect(Vec<Expr>),
    /// At most N results.
    Limit(usize, Box<Expr>),
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Open,
    Close,
    Str(String),
    Word(String),
}

struct Parser<'a> {
    text: &'a str,
    pos: usize,
}

fn err(position: usize, message: impl Into<String>) -> CanopyError {
    CanopyError::QueryParse {
        position,
        message: message.into(),
    }
}

impl<'a> Parser<'a> {
    fn skip_ws(&mut self) {
        while let Some(c) = self.text[self.pos..].chars().next() {
            if c.is_whitespace() {
                self.pos += c.len_utf8();
            } else if c == ';' {
                // comment to end of line
                let rest = &self.text[self.pos..];
                self.pos += rest.find('\n').unwrap_or(rest.len());
            } else {
                break;
            }
        }
    }

    /// Returns the next token and its starting position.
    fn next(&mut self) -> Result<Option<(usize, Token)>> {
        self.skip_ws();
        let start = self.pos;
        let Some(c) = self.text[self.pos..].chars().next() else {
            return Ok(None);
        };
        match c {
            '(' => {
                self.pos += 1;
                Ok(Some((start, Token::Open)))
            }
            ')' => {
                self.pos += 1;
                Ok(Some((start, Token::Close)))
            }
            '"' => {
                self.pos += 1;
                let mut out = String::new();
                loop {
                    let Some(c) = self.text[self.pos..].chars().next() else {
                        return Err(err(start, "unterminated string: expected a closing '\"'"));
                    };
                    self.pos += c.len_utf8();
                    match c {
                        '"' => break,
                        '\\' => {
                            let Some(e) = self.text[self.pos..].chars().next() else {
                                return Err(err(
                                    start,
                                    "unterminated string: expected a closing '\"'",
                                ));
                            };
                            self.pos += e.len_utf8();
                            out.push(match e {
                                'n' => '\n',
                                't' => '\t',
                                other => other,
                            });
                        }
                        other => out.push(other),
                    }
                }
                Ok(Some((start, Token::Str(out))))
            }
            _ => {
                let rest = &self.text[self.pos..];
                let len = rest
                    .find(|c: char| c.is_whitespace() || c == '(' || c == ')' || c == '"')
                    .unwrap_or(rest.len());
                self.pos += len;
                Ok(Some((start, Token::Word(rest[..len].to_string()))))
            }
        }
    }

    fn expect_open(&mut self) -> Result<()> {
        match self.next()? {
            Some((_, Token::Open)) => Ok(()),
            Some((p, t)) => Err(err(
                p,
                format!(
                    "expected '(' to start an expression, found {}",
                    describe(&t)
                ),
            )),
            None => Err(err(
                self.pos,
                "expected '(' to start an expression, found end of query",
            )),
        }
    }

    fn string_arg(&mut self, op: &str, what: &str) -> Result<String> {
        match self.next()? {
            Some((_, Token::Str(s))) | Some((_, Token::Word(s))) => Ok(s),
            Some((p, t)) => Err(err(
                p,
                format!("({op} …) expects {what} (a string), found {}", describe(&t)),
            )),
            None => Err(err(
                self.pos,
                format!("({op} …) expects {what} (a string), found end of query"),
            )),
        }
    }

    fn close(&mut self, op: &str) -> Result<()> {
        match self.next()? {
            Some((_, Token::Close)) => Ok(()),
            Some((p, t)) => Err(err(
                p,
                format!("expected ')' to close ({op} …), found {}", describe(&t)),
            )),
            None => Err(err(
                self.pos,
                format!("expected ')' to close ({op} …), found end of query"),
            )),
        }
    }

    fn sub_exprs(&mut self, op: &str, depth: usize) -> Result<Vec<Expr>> {
        let mut items = Vec::new();
        loop {
            self.skip_ws();
            match self.text[self.pos..].chars().next() {
                Some(')') => {
                    self.pos += 1;
                    break;
                }
                Some('(') => items.push(self.expr(depth + 1)?),
                Some(_) => {
                    let (p, t) = self
                        .next()?
                        .ok_or_else(|| err(self.pos, "unexpected end"))?;
                    return Err(err(
                        p,
                        format!(
                            "({op} …) expects sub-expressions like (grep \"x\"), found {}",
                            describe(&t)
                        ),
                    ));
                }
                None => {
                    return Err(err(
                        self.pos,
                        format!("expected ')' to close ({op} …), found end of query"),
                    ));
                }
            }
        }
        if items.is_empty() {
            return Err(err(
                self.pos.saturating_sub(1),
                format!("({op} …) needs at least one sub-expression"),
            ));
        }
        Ok(items)
    }

    fn expr(&mut self, depth: usize) -> Result<Expr> {
        if depth > MAX_DEPTH {
            return Err(err(
                self.pos,
                format!("expressions nest deeper than {MAX_DEPTH} levels"),
            ));
        }
        self.expect_open()?;
        let (op_pos, op) = match self.next()? {
            Some((p, Token::Word(w))) => (p, w),
            Some((p, t)) => {
                return Err(err(
                    p,
                    format!(
                        "expected an operator name after '(', found {}",
                        describe(&t)
                    ),
                ));
            }
            None => {
                return Err(err(
                    self.pos,
                    "expected an operator name after '(', found end of query",
                ));
            }
        };
        let expr = match op.as_str() {
            "grep" => Expr::Grep(self.string_arg(&op, "a search text")?),
            "code" => Expr::Code(self.string_arg(&op, "a symbol name")?),
            "definition" => Expr::Definition(self.string_arg(&op, "a symbol name")?),
            "references" => Expr::References(self.string_arg(&op, "a symbol name")?),
            "section" => Expr::Section(self.string_arg(&op, "a heading")?),
            "file" => Expr::File(self.string_arg(&op, "a repo-relative path")?),
            "children" => Expr::Children(self.string_arg(&op, "a parent symbol name")?),
            "children-named" => {
                let parent = self.string_arg(&op, "a parent symbol name")?;
                let child = self.string_arg(&op, "a child name")?;
                Expr::ChildrenNamed(parent, child)
            }
            "in-file" => {
                let glob = self.string_arg(&op, "a glob")?;
                let inner = self.expr(depth + 1)?;
                Expr::InFile(glob, Box::new(inner))
            }
            "union" | "intersect" => {
                let items = self.sub_exprs(&op, depth)?;
                return Ok(if op == "union" {
                    Expr::Union(items)
                } else {
                    Expr::Intersect(items)
                });
            }
            "limit" => {
                let n = match self.next()? {
                    Some((p, Token::Word(w))) | Some((p, Token::Str(w))) => {
                        w.parse::<usize>().map_err(|_| {
                            err(
                                p,
                                format!("(limit N …) expects a whole number, found {w:?}"),
                            )
                        })?
                    }
                    Some((p, t)) => {
                        return Err(err(
                            p,
                            format!("(limit N …) expects a whole number, found {}", describe(&t)),
                        ));
                    }
                    None => {
                        return Err(err(
                            self.pos,
                            "(limit N …) expects a whole number, found end of query",
                        ));
                    }
                };
                let inner = self.expr(depth + 1)?;
                Expr::Limit(n, Box::new(inner))
            }
            other => {
                return Err(err(
                    op_pos,
                    format!(
                        "unknown operator {other:?}; expected one of grep, code, definition, references, section, file, children, children-named, in-file, union, intersect, limit"
                    ),
                ));
            }
        };
        self.close(&op)?;
        Ok(expr)
    }
}

fn describe(t: &Token) -> String {
    match t {
        Token::Open => "'('".into(),
        Token::Close => "')'".into(),
        Token::Str(s) => format!("string {:?}", truncate(s)),
        Token::Word(w) => format!("{:?}", truncate(w)),
    }
}

fn truncate(s: &str) -> String {
    s.chars().take(40).collect()
}

/// Parses one expression; trailing input is an error.
pub fn parse(text: &str) -> Result<Expr> {
    if text.len() > MAX_QUERY_BYTES {
        return Err(err(
            MAX_QUERY_BYTES,
            format!("query longer than {MAX_QUERY_BYTES} bytes"),
        ));
    }
    let mut parser = Parser { text, pos: 0 };
    let expr = parser.expr(0)?;
    match parser.next()? {
        None => Ok(expr),
        Some((p, t)) => Err(err(
            p,
            format!(
                "expected end of query after a complete expression, found {}",
                describe(&t)
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_form() {
        let e = parse(r#"(in-file "src/**/*.rs" (intersect (grep "auth") (code "validate")))"#)
            .unwrap();
        assert_eq!(
            e,
            Expr::InFile(
                "src/**/*.rs".into(),
                Box::new(Expr::Intersect(vec![
                    Expr::Grep("auth".into()),
                    Expr::Code("validate".into())
                ]))
            )
        );
        assert_eq!(
            parse(r#"(limit 3 (union (definition "a") (references b) (section "Install") (file "x.md")))"#).unwrap(),
            Expr::Limit(
                3,
                Box::new(Expr::Union(vec![
                    Expr::Definition("a".into()),
                    Expr::References("b".into()),
                    Expr::Section("Install".into()),
                    Expr::File("x.md".into())
                ]))
            )
        );
        assert_eq!(
            parse(r#"(children-named "Auth" "login")"#).unwrap(),
            Expr::ChildrenNamed("Auth".into(), "login".into())
        );
        assert_eq!(
            parse(r#"(children "Auth")"#).unwrap(),
            Expr::Children("Auth".into())
        );
        assert_eq!(
            parse(r#"(grep "say \"hi\"")"#).unwrap(),
            Expr::Grep("say \"hi\"".into())
        );
    }

    #[test]
    fn errors_name_position_and_expectation() {
        let CanopyError::QueryParse { position, message } = parse("(grep \"x\"").unwrap_err()
        else {
            panic!()
        };
        assert_eq!(position, 9);
        assert!(message.contains("expected ')'"), "{message}");
        let CanopyError::QueryParse { position, message } = parse("(frob \"x\")").unwrap_err()
        else {
            panic!()
        };
        assert_eq!(position, 1);
        assert!(message.contains("unknown operator"), "{message}");
        let CanopyError::QueryParse { message, .. } = parse("(limit x (grep a))").unwrap_err()
        else {
            panic!()
        };
        assert!(message.contains("whole number"), "{message}");
        let CanopyError::QueryParse { message, .. } = parse("(union)").unwrap_err() else {
            panic!()
        };
        assert!(message.contains("at least one"), "{message}");
        let CanopyError::QueryParse { message, .. } = parse("(grep a) extra").unwrap_err() else {
            panic!()
        };
        assert!(message.contains("end of query"), "{message}");
        assert!(parse("").is_err());
        assert!(parse("\"unterminated").is_err());
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 2000, ..Default::default() })]

        #[test]
        fn dsl_parser_never_panics(text in "\\PC*") {
            let _ = parse(&text);
        }

        #[test]
        fn dsl_parser_never_panics_on_dsl_shaped_text(
            text in r#"[() "\\a-z0-9*-]{0,80}"#
        ) {
            let _ = parse(&text);
        }
    }

    #[test]
    fn deep_nesting_is_rejected_not_overflowed() {
        let deep = "(limit 1 ".repeat(10_000) + "(grep a)" + &")".repeat(10_000);
        assert!(matches!(parse(&deep), Err(CanopyError::QueryParse { .. })));
    }
}
