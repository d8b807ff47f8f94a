//! What a person reads of a graph answer: an indented tree whose every
//! entry leads with `path:line` (editors and terminals open that form on a
//! click), and, on a terminal that has not opted out of escapes, an OSC 8
//! hyperlink (`file://` URL of the absolute path, the line as the
//! fragment) around that `path:line`.

use std::fmt::Write as _;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use clap::ValueEnum;

/// `--color`: whether stdout may carry escape sequences (hyperlinks).
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ColorChoice {
    /// On a terminal, unless `NO_COLOR` is set (https://no-color.org) or `TERM=dumb`.
    Auto,
    /// Always, even into a pipe or a file.
    Always,
    /// Never.
    Never,
}

impl ColorChoice {
    /// Whether stdout gets escapes under this choice, given what stdout is
    /// and the environment (`NO_COLOR` counts only when not empty, as the
    /// convention says; a flag on the command line overrides it).
    pub fn escapes(self, stdout_is_terminal: bool, no_color: bool, dumb_terminal: bool) -> bool {
        match self {
            ColorChoice::Always => true,
            ColorChoice::Never => false,
            ColorChoice::Auto => stdout_is_terminal && !no_color && !dumb_terminal,
        }
    }

    /// [`ColorChoice::escapes`] for this process's stdout and environment.
    pub fn escapes_on_stdout(self) -> bool {
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        let dumb = std::env::var_os("TERM").is_some_and(|t| t == "dumb");
        self.escapes(std::io::stdout().is_terminal(), no_color, dumb)
    }
}

/// How `path:line` is written: plain, or as an OSC 8 hyperlink to the file
/// under `root` (repository paths in answers are relative to it).
#[derive(Clone, Debug, Default)]
pub struct Links {
    root: Option<PathBuf>,
}

impl Links {
    /// Plain `path:line`, no escapes.
    pub fn plain() -> Links {
        Links { root: None }
    }

    /// Hyperlinks to files under the absolute directory `root`.
    pub fn to_files_under(root: PathBuf) -> Links {
        Links { root: Some(root) }
    }

    /// `path:line` (or the site `path:line:col` as given), hyperlinked when
    /// links are on.
    pub fn location(&self, path: &str, line: u32) -> String {
        self.wrap(path, line, &format!("{path}:{line}"))
    }

    /// A site as answers write it (`path:line:col`), hyperlinked to its
    /// line when links are on; a string of another shape is left as is.
    pub fn site(&self, site: &str) -> String {
        match split_site(site) {
            Some((path, line)) => self.wrap(path, line, site),
            None => site.to_string(),
        }
    }

    fn wrap(&self, path: &str, line: u32, text: &str) -> String {
        match &self.root {
            None => text.to_string(),
            Some(root) => format!(
                "\x1b]8;;{}\x1b\\{text}\x1b]8;;\x1b\\",
                file_url(&root.join(path), line)
            ),
        }
    }
}

/// `path:line:col` → (`path`, `line`).
fn split_site(site: &str) -> Option<(&str, u32)> {
    let (rest, col) = site.rsplit_once(':')?;
    col.parse::<u32>().ok()?;
    let (path, line) = rest.rsplit_once(':')?;
    Some((path, line.parse().ok()?))
}

/// `file://` URL of an absolute path with the line as its fragment (the
/// form terminals such as kitty and WezTerm open at the line; others open
/// the file). Bytes outside the unreserved set and `/` are percent-encoded.
fn file_url(path: &Path, line: u32) -> String {
    let mut url = String::from("file://");
    for byte in path.to_string_lossy().bytes() {
        if byte.is_ascii_alphanumeric() || b"/-._~".contains(&byte) {
            url.push(char::from(byte));
        } else {
            let _ = write!(url, "%{byte:02X}");
        }
    }
    let _ = write!(url, "#{line}");
    url
}

/// One entry of a tree: its line, then its children (drawn under it).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Entry {
    /// The entry's text (one line).
    pub line: String,
    /// Entries drawn under it, in order.
    pub children: Vec<Entry>,
}

impl Entry {
    /// A leaf.
    pub fn leaf(line: String) -> Entry {
        Entry {
            line,
            children: Vec::new(),
        }
    }
}

/// Draws `entries` as a tree (`├─ `, `└─ `, `│  ` guides), one line each,
/// every line ending in a newline.
pub fn draw(entries: &[Entry]) -> String {
    let mut out = String::new();
    draw_level(entries, "", &mut out);
    out
}

fn draw_level(entries: &[Entry], indent: &str, out: &mut String) {
    for (i, entry) in entries.iter().enumerate() {
        let last = i + 1 == entries.len();
        let (branch, guide) = if last {
            ("└─ ", "   ")
        } else {
            ("├─ ", "│  ")
        };
        let _ = writeln!(out, "{indent}{branch}{}", entry.line);
        draw_level(&entry.children, &format!("{indent}{guide}"), out);
    }
}

/// Builds a forest from items in answer order. `parent_of(i)` names item
/// `i`'s parent: `Some(j)` for an earlier item `j` (an index at or after
/// `i` is ignored, so no cycle can form), `None` for a root. `entry(i)`
/// gives item `i`'s own entry (its line and any leaves, such as sites);
/// the items under it follow those leaves.
pub fn forest(
    count: usize,
    parent_of: impl Fn(usize) -> Option<usize>,
    entry: impl Fn(usize) -> Entry,
) -> Vec<Entry> {
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); count];
    let mut roots = Vec::new();
    for i in 0..count {
        match parent_of(i).filter(|&p| p < i) {
            Some(p) => children[p].push(i),
            None => roots.push(i),
        }
    }
    fn build(i: usize, children: &[Vec<usize>], entry: &dyn Fn(usize) -> Entry) -> Entry {
        let mut e = entry(i);
        for &c in &children[i] {
            e.children.push(build(c, children, entry));
        }
        e
    }
    roots
        .into_iter()
        .map(|i| build(i, &children, &entry))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_escapes_only_on_a_terminal_that_has_not_opted_out() {
        assert!(ColorChoice::Auto.escapes(true, false, false));
        assert!(!ColorChoice::Auto.escapes(false, false, false));
        assert!(!ColorChoice::Auto.escapes(true, true, false));
        assert!(!ColorChoice::Auto.escapes(true, false, true));
        // The flag overrides the environment, both ways.
        assert!(ColorChoice::Always.escapes(false, true, true));
        assert!(!ColorChoice::Never.escapes(true, false, false));
    }

    #[test]
    fn plain_links_are_the_bare_location() {
        let links = Links::plain();
        assert_eq!(links.location("src/a b.rs", 7), "src/a b.rs:7");
        assert_eq!(links.site("src/a.rs:7:4"), "src/a.rs:7:4");
    }

    #[test]
    fn hyperlinks_wrap_the_location_in_osc_8_with_an_encoded_file_url() {
        let links = Links::to_files_under(PathBuf::from("/repo dir"));
        assert_eq!(
            links.location("src/ä.rs", 7),
            "\x1b]8;;file:///repo%20dir/src/%C3%A4.rs#7\x1b\\src/ä.rs:7\x1b]8;;\x1b\\"
        );
        assert_eq!(
            links.site("src/a.rs:12:4"),
            "\x1b]8;;file:///repo%20dir/src/a.rs#12\x1b\\src/a.rs:12:4\x1b]8;;\x1b\\"
        );
        // Not a site: left alone rather than linked to a wrong place.
        assert_eq!(links.site("src/a.rs"), "src/a.rs");
        assert_eq!(links.site("src/a.rs:x:4"), "src/a.rs:x:4");
    }

    #[test]
    fn a_forest_draws_with_guides_under_each_parent() {
        // 0 ── 1 ── 3
        //   └─ 2
        // 4
        let parents = [None, Some(0), Some(0), Some(1), None];
        let trees = forest(
            5,
            |i| parents[i],
            |i| Entry {
                line: format!("n{i}"),
                children: if i == 1 {
                    vec![Entry::leaf("site of n1".into())]
                } else {
                    Vec::new()
                },
            },
        );
        assert_eq!(
            draw(&trees),
            "├─ n0\n│  ├─ n1\n│  │  ├─ site of n1\n│  │  └─ n3\n│  └─ n2\n└─ n4\n"
        );
    }

    #[test]
    fn a_parent_at_or_after_the_item_makes_it_a_root() {
        let parents = [Some(1), Some(1)];
        let trees = forest(2, |i| parents[i], |i| Entry::leaf(format!("n{i}")));
        assert_eq!(draw(&trees), "├─ n0\n└─ n1\n");
    }
}
