//! `path:line[:col]`, the one parser of positions: `graph::request` reads
//! `definition` and `scope` targets with it, and `graph::nav` tries it on
//! every target string before reading it as a symbol.
//!
//! Rule: the line and the column are decimal numbers (1-based line,
//! 0-based column in characters); the path is everything before them and
//! is never empty. A path may itself hold `:` (`C:src/a.py:3`) when what
//! follows its last `:` names a file with an extension, so that
//! `a.rs:x:1` (a line that is no number) is no position.

/// A position in a file, as a target string writes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Position<'a> {
    /// Repo-relative path.
    pub path: &'a str,
    /// 1-based line.
    pub line: u32,
    /// 0-based column, when given.
    pub col: Option<u32>,
}

impl Position<'_> {
    /// Reads `path:line[:col]` (see the module docs); `None` for anything else.
    pub fn parse(target: &str) -> Option<Position<'_>> {
        let (rest, last) = target.rsplit_once(':')?;
        let last: u32 = last.parse().ok()?;
        if let Some((path, line)) = rest.rsplit_once(':')
            && let Ok(line) = line.parse::<u32>()
        {
            return (!path.is_empty()).then_some(Position {
                path,
                line,
                col: Some(last),
            });
        }
        if rest.is_empty() {
            return None;
        }
        if let Some((_, file)) = rest.rsplit_once(':')
            && !file.contains('.')
        {
            return None;
        }
        Some(Position {
            path: rest,
            line: last,
            col: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::Position;

    fn parsed(target: &str) -> Option<(&str, u32, Option<u32>)> {
        Position::parse(target).map(|p| (p.path, p.line, p.col))
    }

    #[test]
    fn positions_have_a_path_a_line_and_maybe_a_column() {
        assert_eq!(parsed("src/a.py:12:4"), Some(("src/a.py", 12, Some(4))));
        assert_eq!(parsed("src/a.py:12"), Some(("src/a.py", 12, None)));
        assert_eq!(parsed("Makefile:3"), Some(("Makefile", 3, None)));
        // A path with `:` in it, before a file name with an extension.
        assert_eq!(parsed("C:src/a.py:7"), Some(("C:src/a.py", 7, None)));
        assert_eq!(parsed("C:src/a.py:7:2"), Some(("C:src/a.py", 7, Some(2))));
    }

    #[test]
    fn symbols_and_broken_positions_are_no_positions() {
        for target in [
            "Parser.parse",
            "Type::method",
            "file.py:Type.method",
            "a.rs:x:1",
            ":3:4",
            ":3",
            "a.py:",
            "a.py:-1",
            "a.py:1:x",
            "",
        ] {
            assert_eq!(parsed(target), None, "{target:?}");
        }
    }
}
