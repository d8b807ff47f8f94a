//! The form a context pack travels in to an agent, and what it costs.
//!
//! `budget_tokens` bounds what the agent receives, not only the code: a
//! pack serialized as JSON carries every fragment's text escaped (`\n`,
//! `\"`, `\t` each cost a token or more), which took a 2,000-token pack to
//! 3,781-4,081 tokens on the wire. The wire form sends code as plain text:
//!
//! - a **header**: one line of compact JSON with the budget, the focus,
//!   which strategies ran (fragments each) and which were skipped and why,
//!   and the index's generation (no code);
//! - one **block per fragment**: a provenance line (`--- path:a-b type name
//!   · strategy score · reason`; see [`provenance_line`]) and then the
//!   fragment's text as it is in the file. The blocks are grouped by file
//!   (each file where its best fragment ranks, the first block the best
//!   fragment) and a file's path is written on its first block only.
//!
//! `canopy mcp` sends the header and each block as content blocks of their
//! own; `POST /context` with `Accept: text/plain` and the CLI's human output
//! send [`text`], the same blocks joined by newlines. The packer reserves
//! the header and the provenance lines inside the budget, and
//! [`crate::context::build`] measures the rendered form with the shared
//! tokenizer: [`tokens`] (the larger of the blocks counted one by one and
//! the joined text) is never above the budget.
//!
//! One request renders and measures the pack up to `MAX_PACKS` times, over
//! the same candidates; [`Counts`] keeps the counts of every text it
//! measured, so each distinct text is counted once per request, and the
//! joined text is counted block by block (see [`Wire::tokens_with`]).

use std::cell::RefCell;
use std::collections::HashMap;

use serde_json::{Map, Value, json};

use crate::context::{ContextPack, Detail, Fragment};
use crate::tokens::count_tokens;

/// The rendered pack: the header, then one block per fragment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Wire {
    /// One line of compact JSON: everything but the code.
    pub header: String,
    /// One block per fragment: provenance line, newline, text. Grouped by
    /// file: files in the order of their best fragment, and within a file
    /// best first, so the first block is the best fragment.
    pub blocks: Vec<String>,
}

impl Wire {
    /// The blocks joined: the header line, then each block on lines of its own.
    pub fn joined(&self) -> String {
        let mut out = String::with_capacity(
            self.header.len() + self.blocks.iter().map(|b| b.len() + 1).sum::<usize>() + 1,
        );
        out.push_str(&self.header);
        out.push('\n');
        for b in &self.blocks {
            out.push_str(b);
            out.push('\n');
        }
        out
    }

    /// Tokens an agent pays for it: the larger of the blocks counted one by
    /// one (MCP content blocks) and the joined text (an HTTP body, stdout).
    pub fn tokens(&self) -> u64 {
        self.tokens_with(&Counts::default())
    }

    /// [`Wire::tokens`], with the counts of texts measured before.
    ///
    /// The joined text is counted as its lines' groups, the header line and
    /// each block with its newline: every block starts with `--- ` right
    /// after a newline, a place no pre-tokenization piece spans (the
    /// tokenizer's `LineRuns` cuts texts at the same places), so the joined
    /// text's count is the sum of theirs, and a block that is the same in
    /// the next packing is not counted again. `wire_counts_by_block_equal_the_whole_text`
    /// checks it against the whole text.
    pub(crate) fn tokens_with(&self, counts: &Counts) -> u64 {
        let separate: usize =
            counts.of(&self.header) + self.blocks.iter().map(|b| counts.of(b)).sum::<usize>();
        separate.max(self.joined_tokens(counts)) as u64
    }

    /// Tokens of [`Wire::joined`], counted line group by line group (see
    /// [`Wire::tokens_with`]).
    fn joined_tokens(&self, counts: &Counts) -> usize {
        let line = |text: &str| {
            let mut line = String::with_capacity(text.len() + 1);
            line.push_str(text);
            line.push('\n');
            counts.of(&line)
        };
        line(&self.header) + self.blocks.iter().map(|b| line(b)).sum::<usize>()
    }
}

/// Token counts of the texts one request measured, so that no text is
/// counted twice while the pack is packed again (see the module doc).
/// Held for one request only: its texts are that request's candidates.
#[derive(Default)]
pub(crate) struct Counts(RefCell<HashMap<String, usize>>);

impl Counts {
    /// Tokens of `text` (the shared tokenizer's count).
    pub(crate) fn of(&self, text: &str) -> usize {
        if let Some(&n) = self.0.borrow().get(text) {
            return n;
        }
        let n = count_tokens(text);
        self.0.borrow_mut().insert(text.to_string(), n);
        n
    }
}

/// The wire form of `pack`.
/// A budget under four times the full header gets the minimal one (the
/// smallest budgets would otherwise be all header).
pub fn render(pack: &ContextPack) -> Wire {
    render_with(pack, &Counts::default())
}

/// [`render`], with the counts of texts measured before.
fn render_with(pack: &ContextPack, counts: &Counts) -> Wire {
    let full = header(pack, false);
    let header = if counts.of(&full) as u64 * 4 > pack.budget_tokens {
        header(pack, true)
    } else {
        full
    };
    let mut blocks = Vec::with_capacity(pack.fragments.len());
    let mut previous: Option<&str> = None;
    for f in in_file_groups(&pack.fragments) {
        blocks.push(block(f, previous));
        previous = Some(&f.file_path);
    }
    Wire { header, blocks }
}

/// `fragments` (best first) grouped by file: each file at the place of its
/// best fragment, its other fragments right after it, best first. The
/// path is then written once per file (see [`provenance_line`]).
fn in_file_groups(fragments: &[Fragment]) -> Vec<&Fragment> {
    let mut files: Vec<&str> = Vec::new();
    for f in fragments {
        if !files.contains(&f.file_path.as_str()) {
            files.push(&f.file_path);
        }
    }
    files
        .into_iter()
        .flat_map(|path| fragments.iter().filter(move |f| f.file_path == path))
        .collect()
}

/// [`render`], joined: what `POST /context` (`Accept: text/plain`) and the
/// CLI print.
pub fn text(pack: &ContextPack) -> String {
    render(pack).joined()
}

/// Tokens of the wire form of `pack` (see [`Wire::tokens`]).
pub fn tokens(pack: &ContextPack) -> u64 {
    render(pack).tokens()
}

/// [`tokens`], with the counts of texts measured before.
pub(crate) fn tokens_with(pack: &ContextPack, counts: &Counts) -> u64 {
    render_with(pack, counts).tokens_with(counts)
}

/// The header; `minimal` keeps only what was asked, what came back and
/// how the focus resolved.
///
/// The full header says what an agent acts on and nothing it can read off
/// the blocks (the cut fragments say so on their own lines): the budget and
/// the code it holds, the focus, which strategies ran and how many
/// fragments each gave (`ran`), which could not run and why in a few words
/// (`skipped`), which ran on part of their input and why (`partial`: history
/// when the bound on the diffs it reads left older commits out), how many candidates did not fit (`left_out`, only when
/// some did not), and the index's generation, coverage and stale files
/// (only when partial or stale). On 28 tune packs through `canopy mcp` this
/// took the header from 159 o200k tokens to 101 on average
/// (`bench/eval/context_header.py`; an inferred focus's `focus_at` is most
/// of what is left).
fn header(pack: &ContextPack, minimal: bool) -> String {
    let mut h = Map::new();
    h.insert("budget_tokens".into(), json!(pack.budget_tokens));
    h.insert("strategy".into(), json!(pack.strategy.as_str()));
    h.insert("fragments".into(), json!(pack.fragments.len()));
    h.insert("code_tokens".into(), json!(pack.total_tokens));
    h.insert("focus".into(), json!(pack.focus.status));
    if minimal {
        return Value::Object(h).to_string();
    }
    let resolved: Vec<String> = pack
        .focus
        .resolved
        .iter()
        .map(|r| format!("{}:{}", r.file_path, r.line_range[0]))
        .collect();
    if !resolved.is_empty() {
        h.insert("focus_at".into(), json!(resolved));
    }
    let (mut ran, mut skipped, mut partial) = (Map::new(), Map::new(), Map::new());
    for r in &pack.strategies {
        match (&r.note, r.status.as_str()) {
            (Some(note), "skipped") => {
                skipped.insert(r.strategy.as_str().into(), json!(few_words(note)));
            }
            (note, _) => {
                ran.insert(r.strategy.as_str().into(), json!(r.fragments));
                if let Some(note) = note {
                    partial.insert(r.strategy.as_str().into(), json!(few_words(note)));
                }
            }
        }
    }
    h.insert("ran".into(), Value::Object(ran));
    if !skipped.is_empty() {
        h.insert("skipped".into(), Value::Object(skipped));
    }
    if !partial.is_empty() {
        h.insert("partial".into(), Value::Object(partial));
    }
    let left_out = pack.left_out + pack.dropped;
    if left_out > 0 {
        h.insert("left_out".into(), json!(left_out));
    }
    if let Some(c) = pack.index_coverage {
        h.insert("index_coverage".into(), json!(c));
    }
    if let Some(f) = &pack.freshness {
        h.insert("generation".into(), json!(f.generation));
        if f.stale_files > 0 {
            h.insert("stale_files".into(), json!(f.stale_files));
        }
        if !f.stale_paths.is_empty() {
            h.insert("stale_paths".into(), json!(f.stale_paths));
        }
    }
    Value::Object(h).to_string()
}

/// Longest note the header carries (a model's load error can be long; the
/// JSON form keeps the whole note).
const NOTE_CHARS: usize = 60;

/// `note` cut to [`NOTE_CHARS`] characters.
fn few_words(note: &str) -> String {
    if note.chars().count() <= NOTE_CHARS {
        return note.to_string();
    }
    let mut cut: String = note.chars().take(NOTE_CHARS - 1).collect();
    cut.push('…');
    cut
}

/// One fragment's block: its provenance line, then its text. `previous`
/// is the file of the block before it.
fn block(f: &Fragment, previous: Option<&str>) -> String {
    let mut out = provenance(f, previous);
    out.push('\n');
    out.push_str(f.text.trim_end());
    out
}

/// The fragment's provenance line (see [`provenance_line`]).
pub(crate) fn provenance(f: &Fragment, previous: Option<&str>) -> String {
    provenance_line(&Provenance {
        path: &f.file_path,
        same_file: previous == Some(f.file_path.as_str()),
        lines: f.line_range,
        node_type: &f.node_type,
        name: f.name.as_deref(),
        detail: f.detail,
        strategy: f.strategy.as_str(),
        score: f.score,
        handle: f.handle.as_str(),
        stale: f.stale,
        reason: &f.reason,
    })
}

/// What a provenance line says (the packer measures one before the
/// fragment exists).
pub(crate) struct Provenance<'a> {
    /// Repo-relative path.
    pub(crate) path: &'a str,
    /// The block before is in the same file: the path is left out.
    pub(crate) same_file: bool,
    /// 1-based inclusive lines.
    pub(crate) lines: [u32; 2],
    /// `function`, `class`, … or `comment`.
    pub(crate) node_type: &'a str,
    /// Qualified name, for named units.
    pub(crate) name: Option<&'a str>,
    /// How much of the unit the text shows.
    pub(crate) detail: Detail,
    /// The strategy that ranked it highest.
    pub(crate) strategy: &'a str,
    /// Relevance, 0..1.
    pub(crate) score: f64,
    /// Handle id (written only when the text is cut: see below).
    pub(crate) handle: &'a str,
    /// The file changed on disk since it was indexed.
    pub(crate) stale: bool,
    /// Why it was chosen.
    pub(crate) reason: &'a str,
}

/// `--- path:a-b type name · strategy score · reason`, with
/// `[signature · expand <handle>]` (or `outline`, and `stale`) after the
/// name when the text is cut.
///
/// What each part costs decided the form (o200k tokens, measured on tune
/// packs: 65 a line before, most of it a handle, a long reason and the
/// path again for every fragment of a file):
/// - a `full` fragment's text is all that expanding its handle gives, so
///   only a cut one (signature, outline) carries its handle, the one thing
///   that gets its whole text;
/// - the path is written once per file: a line `--- :a-b …` is in the file
///   of the block before it (the blocks are grouped by file);
/// - the score is written without its leading zero (`.92`, `1`).
pub(crate) fn provenance_line(p: &Provenance<'_>) -> String {
    let path = if p.same_file { "" } else { p.path };
    let name = p.name.map(|n| format!(" {n}")).unwrap_or_default();
    let cut = match (p.detail, p.stale) {
        (Detail::Full, false) => String::new(),
        (Detail::Full, true) => " [stale]".to_string(),
        (d, stale) => {
            let d = if d == Detail::Signature {
                "signature"
            } else {
                "outline"
            };
            let stale = if stale { " · stale" } else { "" };
            format!(" [{d} · expand {}{stale}]", p.handle)
        }
    };
    let score = format!("{:.2}", p.score);
    let score = score.trim_end_matches('0').trim_end_matches('.');
    let score = score.strip_prefix('0').unwrap_or(score);
    let score = if score.is_empty() { "0" } else { score };
    format!(
        "--- {path}:{}-{} {}{name}{cut} · {} {score} · {}",
        p.lines[0], p.lines[1], p.node_type, p.strategy, p.reason
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use canopy_syntax::testing::xorshift;

    /// The joined text counted block by block is the joined text counted
    /// whole, for many generated packs: code and prose of every shape
    /// (non-ASCII, lines starting with `/`, blanks, `---`, empty texts),
    /// provenance lines of every kind, with counts kept across packs as
    /// one request keeps them.
    #[test]
    fn wire_counts_by_block_equal_the_whole_text() {
        let lines = [
            "def parse(self, text):",
            "    \"\"\"Parses every line — naïve café.\"\"\"",
            "/// doc comment",
            "// comment",
            "/* block */",
            "    return {'a': 1}",
            "",
            "   ",
            "\t}",
            "}",
            "--- not a header",
            "日本語のテキスト",
            "msgstr \"Grüß dich\"",
            "x = 1  ",
            "\r",
            "🎉 done",
            "@decorator",
            "#[derive(Debug)]",
        ];
        let names = [None, Some("Parser.parse"), Some("naïve"), Some("f")];
        let reasons = [
            "text matches the task (rank 2)",
            "holds `a`, `b`: name or path has task terms",
            "calls `Ünïcode`",
        ];
        let headers = [
            "{\"budget_tokens\":150,\"focus\":\"none\"}",
            "{\"focus_at\":[\"a/é.py:4\"],\"ran\":{\"keyword\":2}}",
        ];
        let mut next = xorshift(0x2545_f491_4f6c_dd1d);
        let counts = Counts::default();
        let mut packs = 0;
        for _ in 0..3_000 {
            let mut blocks = Vec::new();
            let mut previous: Option<String> = None;
            for _ in 0..(next() % 6) {
                let path = ["a.py", "b/ü.rs", "c.go"][(next() % 3) as usize].to_string();
                let text: Vec<&str> = (0..(next() % 8))
                    .map(|_| lines[(next() % lines.len() as u64) as usize])
                    .collect();
                let text = text.join(if next().is_multiple_of(4) {
                    "\r\n"
                } else {
                    "\n"
                });
                let detail =
                    [Detail::Full, Detail::Signature, Detail::Outline][(next() % 3) as usize];
                let mut b = provenance_line(&Provenance {
                    path: &path,
                    same_file: previous.as_deref() == Some(path.as_str()),
                    lines: [1 + (next() % 900) as u32, 1000],
                    node_type: "function",
                    name: names[(next() % names.len() as u64) as usize],
                    detail,
                    strategy: "keyword",
                    score: (next() % 1000) as f64 / 999.0,
                    handle: "h00c521bec9665a38ec2327fe",
                    stale: next().is_multiple_of(5),
                    reason: reasons[(next() % reasons.len() as u64) as usize],
                });
                b.push('\n');
                b.push_str(text.trim_end());
                blocks.push(b);
                previous = Some(path);
            }
            let wire = Wire {
                header: headers[(next() % 2) as usize].to_string(),
                blocks,
            };
            let whole = count_tokens(&wire.joined());
            assert_eq!(wire.joined_tokens(&counts), whole, "{:?}", wire.joined());
            assert_eq!(wire.joined_tokens(&Counts::default()), whole);
            let separate = count_tokens(&wire.header)
                + wire.blocks.iter().map(|b| count_tokens(b)).sum::<usize>();
            assert_eq!(wire.tokens_with(&counts), separate.max(whole) as u64);
            packs += 1;
        }
        assert_eq!(packs, 3_000);
    }
}
