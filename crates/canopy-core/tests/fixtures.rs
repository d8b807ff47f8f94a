//! Extraction checked against annotated fixture repositories.
//!
//! Every file under `tests/fixtures/<language>/` (at the workspace root) is
//! parsed with [`canopy_core::lang::parse_file`], using its path inside its
//! fixture repository, and compared with the expectations written in the
//! file itself ("tests as annotated source"). A new case is a new annotated
//! line, never a new test function. `tests/fixtures/README.md` has the same
//! grammar with examples.
//!
//! # Annotations in source files
//!
//! An annotation is a comment — `//` or `/* … */` in Rust, JavaScript,
//! TypeScript, TSX and Go, `#` in Python — whose text starts with one of the
//! keywords below. Several annotations on one line are separated by `;`.
//! Each one speaks about the line it is written on (line *L*).
//!
//! * `def: <node_type> <qualified_name> [lines: A-B]` — a unit of that node
//!   type and qualified name exists whose **name is on line L**: its span
//!   covers L, L contains its name and its preview starts with line L (or
//!   with the unit's start, when the unit starts later on line L).
//!   `lines: A-B` also pins its exact span (doc comments, attributes and
//!   decorators move `A` before L).
//! * `ref: <ref_type> <target> in <enclosing>` — a reference of that type
//!   (`call`, `import`, `type_ref`) whose name is on line L, innermost
//!   enclosing unit `<enclosing>` (a qualified name, or a node type such as
//!   `chunk` or `file` for units without a name). `<target>` is the name
//!   alone when the reference has no qualifier, `<qualifier><sep><name>` with
//!   `<sep>` one of `.`, `::`, `/` (`authController.authenticate`,
//!   `std::fmt::Display`, `net/http`), or `<name> from <qualifier>`
//!   (`useState from react`).
//! * `noref: [<ref_type>] <target>` — no reference (of that type) on line L
//!   matches `<target>` (its name alone, or written as above).
//! * `in: <what> [lines: A-B]` — the innermost unit (other than the file)
//!   containing the first non-blank character of line L is `<what>` (a
//!   qualified name or a node type), and its own indexed text holds line L.
//!   This is how top-level statements and comments are pinned to `chunk`s.
//!
//! Checks in both directions: every annotation must hold, **and every named
//! unit** the extractor produces (anything but `file`, `chunk`, `paragraph`,
//! `code_block`) must be claimed by a `def:` annotation, so junk units fail.
//!
//! # Sidecar files
//!
//! Markdown and plain text have no comments that stay out of the content,
//! so `<file>.expect` next to such a file lists **every** unit but the file
//! unit, in extraction order, one per line: `<node_type> [<qualified_name>]
//! lines: A-B` (e.g. `section Guide > Install lines: 5-12`,
//! `paragraph lines: 7-8`, `chunk lines: 41-90`). Blank lines and lines
//! starting with `#` are ignored. A sidecar may also accompany any other
//! file; then it is checked in addition to the annotations.
//!
//! # Checks on every file
//!
//! * the file parses without syntax errors (fixtures are valid code);
//! * every line with a letter or digit lies inside some unit other than
//!   the file unit (a lone `);` may be left to the file);
//! * every language Canopy supports has at least one fixture file.
//!
//! Set `CANOPY_FIXTURE_DUMP=<path substring>` (with `--nocapture`) to print
//! what is extracted from matching fixture files.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use canopy_core::lang::{Language, NodeType, ParsedFile, RefType, Reference, Unit, parse_file};
use canopy_core::text::collapse_preview;

const SIDECAR_EXT: &str = "expect";

fn fixtures_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures")
}

/// Every fixture file: (fixture repository, path inside it).
fn fixture_files() -> Vec<(PathBuf, String)> {
    let root = fixtures_root();
    let mut repos: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", root.display()))
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.is_dir())
        // `graph/` holds resolution fixtures (tests/graph.rs), not extraction ones.
        .filter(|p| p.file_name().is_none_or(|n| n != "graph"))
        .collect();
    repos.sort();
    let mut files = Vec::new();
    for repo in repos {
        let mut stack = vec![repo.clone()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).expect("read fixture dir") {
                let path = entry.expect("dir entry").path();
                if path.is_dir() {
                    stack.push(path);
                } else if path.extension().and_then(|e| e.to_str()) != Some(SIDECAR_EXT) {
                    let rel = path
                        .strip_prefix(&repo)
                        .expect("under repo")
                        .to_string_lossy()
                        .replace('\\', "/");
                    files.push((repo.clone(), rel));
                }
            }
        }
    }
    files.sort();
    files
}

#[derive(Debug)]
enum Annotation {
    Def {
        node_type: NodeType,
        qualified_name: String,
        lines: Option<LineRange>,
    },
    Ref {
        ref_type: RefType,
        target: String,
        enclosing: String,
    },
    NoRef {
        ref_type: Option<RefType>,
        target: String,
    },
    In {
        what: String,
        lines: Option<LineRange>,
    },
}

/// Comment openers (and closers) of the languages that carry inline annotations.
fn comment_markers(language: Language) -> &'static [(&'static str, Option<&'static str>)] {
    match language {
        Language::Rust
        | Language::JavaScript
        | Language::TypeScript
        | Language::Tsx
        | Language::Go => &[("//", None), ("/*", Some("*/"))],
        Language::Python => &[("#", None)],
        Language::Markdown | Language::Text => &[],
    }
}

const KEYWORDS: [&str; 4] = ["def:", "ref:", "noref:", "in:"];

/// The annotation text of a line, if it has an annotation comment.
fn annotation_text(line: &str, language: Language) -> Option<&str> {
    let mut best: Option<(usize, &str)> = None;
    for &(open, close) in comment_markers(language) {
        for (pos, _) in line.match_indices(open) {
            let mut rest = &line[pos + open.len()..];
            if let Some(close) = close {
                rest = rest.split(close).next().unwrap_or(rest);
            }
            let rest = rest.trim();
            if KEYWORDS.iter().any(|k| rest.starts_with(k)) && best.is_none_or(|(b, _)| pos < b) {
                best = Some((pos, rest));
            }
        }
    }
    best.map(|(_, rest)| rest)
}

/// An inclusive, 1-based line range.
type LineRange = (u32, u32);

/// Splits a trailing ` lines: A-B`.
fn split_lines_spec(text: &str) -> Result<(&str, Option<LineRange>), String> {
    let Some((head, spec)) = text.split_once(" lines:") else {
        return Ok((text.trim(), None));
    };
    let (a, b) = spec
        .trim()
        .split_once('-')
        .ok_or_else(|| format!("bad `lines:` in {text:?}"))?;
    let parse = |s: &str| {
        s.trim()
            .parse::<u32>()
            .map_err(|_| format!("bad `lines:` in {text:?}"))
    };
    Ok((head.trim(), Some((parse(a)?, parse(b)?))))
}

fn parse_node_type(s: &str) -> Result<NodeType, String> {
    NodeType::from_name(s).ok_or_else(|| format!("unknown node type {s:?}"))
}

fn parse_ref_type(s: &str) -> Result<RefType, String> {
    RefType::from_name(s).ok_or_else(|| format!("unknown ref type {s:?}"))
}

fn parse_annotation(text: &str) -> Result<Annotation, String> {
    let (keyword, rest) = text
        .split_once(':')
        .ok_or_else(|| format!("no keyword in {text:?}"))?;
    let rest = rest.trim();
    match keyword {
        "def" => {
            let (head, lines) = split_lines_spec(rest)?;
            let (node_type, qualified_name) = head
                .split_once(' ')
                .ok_or_else(|| format!("`def:` needs a node type and a name: {text:?}"))?;
            Ok(Annotation::Def {
                node_type: parse_node_type(node_type)?,
                qualified_name: qualified_name.trim().to_string(),
                lines,
            })
        }
        "ref" => {
            let (ref_type, rest) = rest
                .split_once(' ')
                .ok_or_else(|| format!("`ref:` needs a type and a target: {text:?}"))?;
            let (target, enclosing) = rest
                .rsplit_once(" in ")
                .ok_or_else(|| format!("`ref:` needs `in <enclosing>`: {text:?}"))?;
            Ok(Annotation::Ref {
                ref_type: parse_ref_type(ref_type)?,
                target: target.trim().to_string(),
                enclosing: enclosing.trim().to_string(),
            })
        }
        "noref" => {
            let (ref_type, target) = match rest.split_once(' ') {
                Some((t, target)) if RefType::from_name(t).is_some() => {
                    (RefType::from_name(t), target.trim())
                }
                _ => (None, rest),
            };
            if target.is_empty() {
                return Err(format!("`noref:` needs a target: {text:?}"));
            }
            Ok(Annotation::NoRef {
                ref_type,
                target: target.to_string(),
            })
        }
        "in" => {
            let (what, lines) = split_lines_spec(rest)?;
            Ok(Annotation::In {
                what: what.to_string(),
                lines,
            })
        }
        other => Err(format!("unknown annotation keyword {other:?}")),
    }
}

/// Whether a reference is the one written as `target` (see the module docs).
fn ref_matches(r: &Reference, target: &str) -> bool {
    if let Some((name, qualifier)) = target.split_once(" from ") {
        return r.name == name.trim() && r.qualifier.as_deref() == Some(qualifier.trim());
    }
    match &r.qualifier {
        None => r.name == target,
        Some(q) => ["::", ".", "/"]
            .iter()
            .any(|sep| target == format!("{q}{sep}{}", r.name)),
    }
}

fn show_ref(r: &Reference, parsed: &ParsedFile) -> String {
    let target = match &r.qualifier {
        Some(q) => format!("{} from {q}", r.name),
        None => r.name.clone(),
    };
    format!(
        "{} {target} in {}",
        r.ref_type.as_str(),
        unit_label(&parsed.units[r.enclosing])
    )
}

/// A unit's qualified name, or its node type when it has none.
fn unit_label(u: &Unit) -> String {
    u.qualified_name
        .clone()
        .unwrap_or_else(|| u.node_type.as_str().to_string())
}

fn show_unit(u: &Unit) -> String {
    match &u.qualified_name {
        Some(q) => format!(
            "{} {q} lines: {}-{}",
            u.node_type.as_str(),
            u.start_line,
            u.end_line
        ),
        None => format!(
            "{} lines: {}-{}",
            u.node_type.as_str(),
            u.start_line,
            u.end_line
        ),
    }
}

/// Whether line `line` (1-based) is where `u`'s name is: inside its span,
/// containing its name, and where its preview starts (at the line's start,
/// or at the unit's start when the unit starts later on that line).
fn name_is_on_line(u: &Unit, line: u32, source: &Source) -> bool {
    if line < u.start_line || line > u.end_line {
        return false;
    }
    let text = source.lines[line as usize - 1];
    let Some(name) = &u.name else { return false };
    if !text.contains(name.as_str()) {
        return false;
    }
    let from = source.line_starts[line as usize - 1].max(u.start_byte);
    let line_end = source.line_starts[line as usize - 1] + text.len();
    let expected = collapse_preview(&source.text[from..line_end.max(from)], 1 << 20);
    let expected: String = expected.chars().take(24).collect();
    let preview: String = u.preview(source.text).chars().take(24).collect();
    expected.starts_with(&preview) || preview.starts_with(&expected)
}

/// A fixture file's text, split into lines.
struct Source<'a> {
    text: &'a str,
    lines: Vec<&'a str>,
    /// Byte offset of each line's start.
    line_starts: Vec<usize>,
}

impl<'a> Source<'a> {
    fn new(text: &'a str) -> Source<'a> {
        let lines: Vec<&str> = text.split('\n').collect();
        let mut line_starts = Vec::with_capacity(lines.len());
        let mut offset = 0;
        for l in &lines {
            line_starts.push(offset);
            offset += l.len() + 1;
        }
        Source {
            text,
            lines,
            line_starts,
        }
    }
}

fn is_named_unit(t: NodeType) -> bool {
    !matches!(
        t,
        NodeType::File | NodeType::Chunk | NodeType::Paragraph | NodeType::CodeBlock
    )
}

fn dump(rel: &str, parsed: &ParsedFile, text: &str) {
    eprintln!("==== {rel} ({})", parsed.language.as_str());
    for u in &parsed.units {
        eprintln!(
            "  unit {:<40} parent={:?} preview={:?}",
            show_unit(u),
            u.parent.map(|p| unit_label(&parsed.units[p])),
            u.preview(text)
        );
    }
    for r in &parsed.refs {
        eprintln!("  L{:<4} ref {}", r.line, show_ref(r, parsed));
    }
}

/// Checks one fixture file; appends failures as `path:line: message`.
fn check_file(repo: &Path, rel: &str, failures: &mut Vec<String>) -> Language {
    let path = repo.join(rel);
    let bytes = std::fs::read(&path).expect("read fixture");
    let parsed = parse_file(rel, &bytes);
    let repo_name = repo.file_name().unwrap().to_string_lossy();
    let shown = format!("{repo_name}/{rel}");
    let text = canopy_core::lang::extract::text_view(&bytes);
    if std::env::var("CANOPY_FIXTURE_DUMP").is_ok_and(|f| shown.contains(&f)) {
        dump(&shown, &parsed, &text);
    }
    let mut fail = |line: u32, msg: String| failures.push(format!("{shown}:{line}: {msg}"));
    let source = Source::new(&text);
    let source_lines = &source.lines;
    let language = parsed.language;

    if parsed.had_syntax_errors {
        fail(
            0,
            "tree-sitter reports syntax errors in this fixture".into(),
        );
    }

    // Every line with a word character lies inside a unit other than the file.
    for (i, l) in source_lines.iter().enumerate() {
        let line = i as u32 + 1;
        if l.chars().any(char::is_alphanumeric)
            && !parsed.units[1..]
                .iter()
                .any(|u| u.start_line <= line && line <= u.end_line)
        {
            fail(line, format!("line is in no unit but the file: {l:?}"));
        }
    }

    // Inline annotations.
    let mut claimed: BTreeSet<usize> = BTreeSet::new();
    let mut annotated_lines = 0;
    for (i, l) in source_lines.iter().enumerate() {
        let line = i as u32 + 1;
        let Some(ann_text) = annotation_text(l, language) else {
            continue;
        };
        annotated_lines += 1;
        for piece in ann_text.split(';').map(str::trim).filter(|p| !p.is_empty()) {
            let ann = match parse_annotation(piece) {
                Ok(a) => a,
                Err(e) => {
                    fail(line, format!("bad annotation: {e}"));
                    continue;
                }
            };
            check_annotation(&ann, line, &parsed, &source, &mut claimed, &mut fail);
        }
    }

    // Sidecar expectations.
    let sidecar = PathBuf::from(format!("{}.{SIDECAR_EXT}", path.display()));
    if let Ok(expect) = std::fs::read_to_string(&sidecar) {
        let expected: Vec<String> = expect
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .map(str::to_string)
            .collect();
        let actual: Vec<String> = parsed.units[1..].iter().map(show_unit).collect();
        if expected != actual {
            let mut msg = String::from("units differ from the sidecar (- expected, + actual):");
            for e in expected.iter().filter(|e| !actual.contains(e)) {
                let _ = write!(msg, "\n    - {e}");
            }
            for a in actual.iter().filter(|a| !expected.contains(a)) {
                let _ = write!(msg, "\n    + {a}");
            }
            if expected.len() == actual.len() && expected.iter().all(|e| actual.contains(e)) {
                msg.push_str("\n    (same units, different order)");
            }
            fail(0, msg);
        }
        claimed.extend(1..parsed.units.len());
    } else if comment_markers(language).is_empty() {
        fail(
            0,
            format!(
                "{} files need a `.{SIDECAR_EXT}` sidecar",
                language.as_str()
            ),
        );
    } else if annotated_lines == 0 {
        fail(0, "fixture has no annotations".into());
    }

    // Every named unit is claimed by an annotation.
    for (i, u) in parsed.units.iter().enumerate() {
        if is_named_unit(u.node_type) && !claimed.contains(&i) {
            fail(
                u.start_line,
                format!(
                    "unannotated unit: {} (preview {:?})",
                    show_unit(u),
                    u.preview(&text)
                ),
            );
        }
    }
    language
}

fn check_annotation(
    ann: &Annotation,
    line: u32,
    parsed: &ParsedFile,
    source: &Source,
    claimed: &mut BTreeSet<usize>,
    fail: &mut impl FnMut(u32, String),
) {
    let units = &parsed.units;
    let refs_on_line = || -> Vec<String> {
        parsed
            .refs
            .iter()
            .filter(|r| r.line == line)
            .map(|r| show_ref(r, parsed))
            .collect()
    };
    match ann {
        Annotation::Def {
            node_type,
            qualified_name,
            lines,
        } => {
            let found: Vec<usize> = (0..units.len())
                .filter(|&i| {
                    let u = &units[i];
                    u.node_type == *node_type
                        && u.qualified_name.as_deref() == Some(qualified_name.as_str())
                        && name_is_on_line(u, line, source)
                })
                .collect();
            if found.is_empty() {
                let here: Vec<String> = units[1..]
                    .iter()
                    .filter(|u| is_named_unit(u.node_type) && name_is_on_line(u, line, source))
                    .map(show_unit)
                    .collect();
                let same_name: Vec<String> = units[1..]
                    .iter()
                    .filter(|u| u.qualified_name.as_deref() == Some(qualified_name.as_str()))
                    .map(show_unit)
                    .collect();
                fail(
                    line,
                    format!(
                        "missing def {} {qualified_name}; named here: {here:?}; \
                         with that name elsewhere: {same_name:?}",
                        node_type.as_str()
                    ),
                );
                return;
            }
            for &i in &found {
                claimed.insert(i);
                let u = &units[i];
                if let Some((a, b)) = lines
                    && (u.start_line, u.end_line) != (*a, *b)
                {
                    fail(
                        line,
                        format!(
                            "def {} {qualified_name}: expected lines {a}-{b}, got {}-{}",
                            node_type.as_str(),
                            u.start_line,
                            u.end_line
                        ),
                    );
                }
            }
        }
        Annotation::Ref {
            ref_type,
            target,
            enclosing,
        } => {
            let ok = parsed.refs.iter().any(|r| {
                r.line == line
                    && r.ref_type == *ref_type
                    && ref_matches(r, target)
                    && unit_label(&units[r.enclosing]) == *enclosing
            });
            if !ok {
                fail(
                    line,
                    format!(
                        "missing ref {} {target} in {enclosing}; refs on this line: {:?}",
                        ref_type.as_str(),
                        refs_on_line()
                    ),
                );
            }
        }
        Annotation::NoRef { ref_type, target } => {
            let bad: Vec<String> = parsed
                .refs
                .iter()
                .filter(|r| {
                    r.line == line
                        && ref_type.is_none_or(|t| t == r.ref_type)
                        && (r.name == *target || ref_matches(r, target))
                })
                .map(|r| show_ref(r, parsed))
                .collect();
            if !bad.is_empty() {
                fail(line, format!("unexpected ref(s) {target}: {bad:?}"));
            }
        }
        Annotation::In { what, lines } => {
            let l = source.lines[line as usize - 1];
            let offset = source.line_starts[line as usize - 1] + (l.len() - l.trim_start().len());
            let innermost = units[1..]
                .iter()
                .filter(|u| u.start_byte <= offset && offset < u.end_byte)
                .min_by_key(|u| u.end_byte - u.start_byte);
            let Some(u) = innermost else {
                fail(
                    line,
                    format!("expected in {what}, but only the file holds it"),
                );
                return;
            };
            if unit_label(u) != *what {
                fail(
                    line,
                    format!("expected in {what}, innermost unit is {}", show_unit(u)),
                );
            }
            if !u.fts_body.contains(l.trim()) {
                fail(
                    line,
                    format!("{}: own indexed text lacks this line", show_unit(u)),
                );
            }
            if let Some((a, b)) = lines
                && (u.start_line, u.end_line) != (*a, *b)
            {
                fail(
                    line,
                    format!(
                        "{what}: expected lines {a}-{b}, got {}-{}",
                        u.start_line, u.end_line
                    ),
                );
            }
        }
    }
}

#[test]
fn fixtures_match_their_annotations() {
    let files = fixture_files();
    assert!(!files.is_empty(), "no fixture files found");
    let mut failures = Vec::new();
    let mut languages = BTreeSet::new();
    for (repo, rel) in &files {
        languages.insert(check_file(repo, rel, &mut failures));
    }
    for lang in Language::ALL {
        if !languages.contains(&lang) {
            failures.push(format!("no fixture file for {}", lang.as_str()));
        }
    }
    assert!(
        failures.is_empty(),
        "{} fixture expectation(s) failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
