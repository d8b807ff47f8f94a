//! The form a context pack travels in to an agent, and what it costs.
//!
//! `budget_tokens` bounds what the agent receives, not only the code: a
//! pack serialized as JSON carries every fragment's text escaped (`\n`,
//! `\"`, `\t` each cost a token or more), which took a 2,000-token pack to
//! 3,781-4,081 tokens on the wire. The wire form sends code as plain text:
//!
//! - a **header**: one line of compact JSON with the budget, the strategy
//!   reports, the focus, the counts and the freshness (no code);
//! - one **block per fragment**: a provenance line (`--- path:a-b type name
//!   [detail · strategy score · handle] reason`) and then the fragment's text
//!   as it is in the file.
//!
//! `canopy mcp` sends the header and each block as content blocks of their
//! own; `POST /context` with `Accept: text/plain` and the CLI's human output
//! send [`text`], the same blocks joined by newlines. The packer reserves
//! the header and the provenance lines inside the budget, and
//! [`crate::context::build`] measures the rendered form with the shared
//! tokenizer: [`tokens`] (the larger of the blocks counted one by one and
//! the joined text) is never above the budget.

use serde_json::{Map, Value, json};

use crate::context::{ContextPack, Detail, Fragment};
use crate::tokens::count_tokens;

/// The rendered pack: the header, then one block per fragment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Wire {
    /// One line of compact JSON: everything but the code.
    pub header: String,
    /// One block per fragment, best first: provenance line, newline, text.
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
        let separate: usize =
            count_tokens(&self.header) + self.blocks.iter().map(|b| count_tokens(b)).sum::<usize>();
        separate.max(count_tokens(&self.joined())) as u64
    }
}

/// The wire form of `pack`.
/// A budget under four times the full header gets the minimal one (the
/// smallest budgets would otherwise be all header).
pub fn render(pack: &ContextPack) -> Wire {
    let full = header(pack, false);
    let header = if count_tokens(&full) as u64 * 4 > pack.budget_tokens {
        header(pack, true)
    } else {
        full
    };
    Wire {
        header,
        blocks: pack.fragments.iter().map(block).collect(),
    }
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

/// The header; `minimal` keeps only what was asked, what came back and
/// how the focus resolved.
fn header(pack: &ContextPack, minimal: bool) -> String {
    let mut h = Map::new();
    h.insert("budget_tokens".into(), json!(pack.budget_tokens));
    h.insert("strategy".into(), json!(pack.strategy.as_str()));
    h.insert("fragments".into(), json!(pack.fragments.len()));
    h.insert("code_tokens".into(), json!(pack.total_tokens));
    h.insert("focus".into(), json!(pack.focus.status));
    if !minimal {
        let resolved: Vec<String> = pack
            .focus
            .resolved
            .iter()
            .map(|r| format!("{}:{}", r.file_path, r.line_range[0]))
            .collect();
        if !resolved.is_empty() {
            h.insert("focus_at".into(), json!(resolved));
        }
        let reports: Vec<Value> = pack
            .strategies
            .iter()
            .map(|r| {
                let mut v = json!([r.strategy.as_str(), r.status, r.fragments, r.candidates]);
                if let (Some(note), Some(a)) = (&r.note, v.as_array_mut()) {
                    a.push(json!(note));
                }
                v
            })
            .collect();
        h.insert("strategies".into(), Value::Array(reports));
        h.insert("candidates".into(), json!(pack.candidates));
        h.insert("degraded".into(), json!(pack.degraded));
        h.insert("dropped".into(), json!(pack.dropped));
        h.insert("left_out".into(), json!(pack.left_out));
        if let Some(c) = pack.index_coverage {
            h.insert("index_coverage".into(), json!(c));
        }
        if let Some(f) = &pack.freshness {
            let mut fr = json!({"generation": f.generation, "stale_files": f.stale_files});
            if !f.stale_paths.is_empty() {
                fr["stale_paths"] = json!(f.stale_paths);
            }
            h.insert("freshness".into(), fr);
        }
    }
    Value::Object(h).to_string()
}

/// One fragment's block: its provenance line, then its text.
fn block(f: &Fragment) -> String {
    let mut out = provenance(f);
    out.push('\n');
    out.push_str(f.text.trim_end());
    out
}

/// `--- path:a-b type name [detail · strategy score · handle] reason`.
pub(crate) fn provenance(f: &Fragment) -> String {
    provenance_line(
        &f.file_path,
        f.line_range,
        &f.node_type,
        f.name.as_deref(),
        f.detail,
        f.strategy.as_str(),
        f.score,
        f.handle.as_str(),
        f.stale,
        &f.reason,
    )
}

/// [`provenance`] from its parts (the packer measures it before the
/// fragment exists).
#[allow(clippy::too_many_arguments)]
pub(crate) fn provenance_line(
    path: &str,
    lines: [u32; 2],
    node_type: &str,
    name: Option<&str>,
    detail: Detail,
    strategy: &str,
    score: f64,
    handle: &str,
    stale: bool,
    reason: &str,
) -> String {
    let detail = match detail {
        Detail::Full => "full",
        Detail::Signature => "signature",
        Detail::Outline => "outline",
    };
    let name = name.map(|n| format!(" {n}")).unwrap_or_default();
    let stale = if stale { " · stale" } else { "" };
    format!(
        "--- {path}:{}-{} {node_type}{name} [{detail} · {strategy} {score:.2} · {handle}{stale}] {reason}",
        lines[0], lines[1]
    )
}
