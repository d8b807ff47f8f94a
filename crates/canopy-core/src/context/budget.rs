//! Packing ranked candidates under a token budget.
//!
//! 1. **Dedupe.** In rank order, a candidate inside an already chosen
//!    function (or equal to, or partly overlapping, a chosen unit) is left
//!    out: its text is already there. A container (class, struct, impl,
//!    module, file, …) with a chosen unit inside it is capped at
//!    [`Detail::Signature`], a skeleton that leaves those units out, so the
//!    relevant methods appear in full beside the skeleton of their class.
//! 2. **Degrade before dropping.** Every fragment starts at the most detail
//!    it may have. While the total is over budget, the lowest-scored
//!    fragment that can still lose detail loses one level (full → signature
//!    or skeleton → outline), so the best fragments keep their bodies
//!    longest. Only when every fragment is an outline is the lowest-scored
//!    one dropped. How many
//!    candidates enter is bounded by the budget (one per 120 tokens, 5 to
//!    40), so outlines never crowd out the bodies.

use std::collections::HashMap;

use crate::context::strategies::Merged;
use crate::context::{Detail, Fragment};
use crate::error::{CanopyError, Result};
use crate::graph::ops::signature_of;
use crate::handle::HandleId;
use crate::lang::extract::text_view;
use crate::snapshot::Snapshot;
use crate::store::read::NodeRecord;
use crate::tokens::count_tokens;

/// Budget tokens per candidate admitted.
const TOKENS_PER_CANDIDATE: u64 = 120;
/// Members listed in a skeleton at most.
const SKELETON_MEMBERS: usize = 40;
/// Docstring lines kept in a signature at most.
const DOC_LINES: usize = 8;

/// The packer's result.
pub(crate) struct Packed {
    pub(crate) fragments: Vec<Fragment>,
    /// Fragments below the detail they could have had.
    pub(crate) degraded: usize,
    /// Admitted candidates dropped because even as outlines they did not fit.
    pub(crate) dropped: usize,
}

/// Units shown as a skeleton of their members at signature detail.
fn is_container(node_type: &str) -> bool {
    matches!(
        node_type,
        "file" | "module" | "class" | "struct" | "enum" | "trait" | "interface" | "impl"
    )
}

struct Slot {
    m: Merged,
    /// The most detail allowed (signature for a container with chosen units inside).
    cap: Detail,
    /// Spans of chosen units inside it, left out of its skeleton.
    excluded: Vec<(usize, usize)>,
    detail: Detail,
    stale: bool,
    /// A container capped at its skeleton that lists no member.
    empty_skeleton: bool,
    /// Text and tokens per level, rendered once.
    texts: HashMap<Detail, (String, u32)>,
}

impl Slot {
    fn cost(&self, d: Detail) -> u32 {
        self.texts.get(&d).map_or(0, |t| t.1)
    }

    /// The next cheaper level that actually saves tokens.
    fn next_lower(&self) -> Option<Detail> {
        let cur = self.cost(self.detail);
        let order = [Detail::Full, Detail::Signature, Detail::Outline];
        order
            .into_iter()
            .filter(|d| *d < self.detail && self.texts.contains_key(d))
            .find(|d| self.cost(*d) < cur || *d == Detail::Outline)
    }
}

fn contains(outer: &NodeRecord, inner: &NodeRecord) -> bool {
    outer.file_path == inner.file_path
        && outer.start_byte <= inner.start_byte
        && inner.end_byte <= outer.end_byte
}

fn overlaps(a: &NodeRecord, b: &NodeRecord) -> bool {
    a.file_path == b.file_path && a.start_byte < b.end_byte && b.start_byte < a.end_byte
}

/// Packs `merged` (best first) under `budget` tokens.
pub(crate) fn pack(snapshot: Snapshot<'_>, merged: Vec<Merged>, budget: u64) -> Result<Packed> {
    let admit = (budget / TOKENS_PER_CANDIDATE).clamp(5, 40) as usize;
    let mut slots: Vec<Slot> = Vec::new();
    for m in merged {
        if slots.len() >= admit {
            break;
        }
        let c = &m.node;
        // Refused: same span as a chosen unit, inside a chosen non-container
        // (its text is there already), or partly overlapping one.
        let refused = slots.iter().any(|s| {
            let p = &s.m.node;
            overlaps(p, c)
                && ((p.start_byte == c.start_byte && p.end_byte == c.end_byte)
                    || (contains(p, c) && !is_container(&p.node_type))
                    || (!contains(p, c) && !contains(c, p)))
        });
        if refused {
            continue;
        }
        let mut cap = Detail::Full;
        let mut excluded = Vec::new();
        for s in &mut slots {
            let p = &s.m.node;
            if !overlaps(p, c) {
                continue;
            }
            if contains(p, c) {
                s.cap = s.cap.min(Detail::Signature);
                s.detail = s.cap;
                s.excluded.push((c.start_byte, c.end_byte));
            } else {
                cap = Detail::Signature;
                excluded.push((p.start_byte, p.end_byte));
            }
        }
        slots.push(Slot {
            m,
            cap,
            excluded,
            detail: cap,
            stale: false,
            empty_skeleton: false,
            texts: HashMap::new(),
        });
    }

    render(snapshot, &mut slots)?;
    // A skeleton whose every member is a fragment of its own says nothing more than they do.
    slots.retain(|s| !s.empty_skeleton);

    // Degrade, then drop, until the total fits.
    let mut dropped = 0;
    let total = |slots: &[Slot]| -> u64 { slots.iter().map(|s| u64::from(s.cost(s.detail))).sum() };
    while total(&slots) > budget {
        // The lowest-valued fragment that can still lose detail loses one level.
        let step = slots
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.next_lower().map(|next| (i, next, s.m.score)))
            .min_by(|a, b| a.2.total_cmp(&b.2).then(b.0.cmp(&a.0)));
        match step {
            Some((i, next, _)) => slots[i].detail = next,
            None => {
                let lowest = slots
                    .iter()
                    .enumerate()
                    .min_by(|a, b| a.1.m.score.total_cmp(&b.1.m.score))
                    .map(|(i, _)| i);
                match lowest {
                    Some(i) => {
                        slots.remove(i);
                        dropped += 1;
                    }
                    None => break,
                }
            }
        }
    }

    let degraded = slots
        .iter()
        .filter(|s| !s.stale && s.detail < s.cap)
        .count();
    let fragments = slots
        .into_iter()
        .map(|mut s| {
            let (text, tokens) = s.texts.remove(&s.detail).unwrap_or_default();
            let n = &s.m.node;
            Fragment {
                handle: HandleId::parse(&n.handle)
                    .unwrap_or_else(|| HandleId::derive("", "", &n.handle, 0)),
                file_path: n.file_path.clone(),
                node_type: n.node_type.clone(),
                name: n.qualified_name.clone().or_else(|| n.name.clone()),
                line_range: [n.start_line, n.end_line],
                detail: s.detail,
                strategy: s.m.strategy,
                reason: s.m.reason,
                score: s.m.score,
                tokens,
                text,
                stale: s.stale,
            }
        })
        .collect();
    Ok(Packed {
        fragments,
        degraded,
        dropped,
    })
}

/// Renders every slot's text at each level it may take.
fn render(snapshot: Snapshot<'_>, slots: &mut [Slot]) -> Result<()> {
    let store = snapshot.store();
    let mut files: HashMap<String, Option<String>> = HashMap::new();
    let containers: Vec<i64> = slots
        .iter()
        .filter(|s| is_container(&s.m.node.node_type))
        .map(|s| s.m.node.rowid)
        .collect();
    let mut children: HashMap<i64, Vec<NodeRecord>> = HashMap::new();
    for c in store.children_of(&containers)? {
        if let Some(p) = c.parent_rowid {
            children.entry(p).or_default().push(c);
        }
    }
    for s in slots.iter_mut() {
        let n = &s.m.node;
        let text = match files.get(&n.file_path) {
            Some(t) => t.clone(),
            None => {
                let t = match snapshot.read_verified(&n.file_path, &n.content_hash) {
                    Ok(bytes) => Some(text_view(&bytes)),
                    Err(CanopyError::StaleIndex { .. }) => None,
                    Err(e) => return Err(e),
                };
                files.insert(n.file_path.clone(), t.clone());
                t
            }
        };
        let outline = outline_of(n);
        let outline_tokens = count_tokens(&outline) as u32;
        s.texts.insert(Detail::Outline, (outline, outline_tokens));
        let Some(text) = text else {
            s.stale = true;
            s.detail = Detail::Outline;
            continue;
        };
        let signature = if is_container(&n.node_type) {
            let (skeleton, listed) = skeleton_of(
                &text,
                n,
                children.get(&n.rowid).map_or(&[][..], |c| &c[..]),
                &s.excluded,
            );
            s.empty_skeleton = listed == 0 && !s.excluded.is_empty();
            skeleton
        } else {
            signature_with_doc(&text, n)
        };
        let sig_tokens = count_tokens(&signature) as u32;
        s.texts.insert(Detail::Signature, (signature, sig_tokens));
        if s.cap == Detail::Full {
            let body = text
                .get(n.start_byte.min(text.len())..n.end_byte.min(text.len()))
                .unwrap_or_default()
                .to_string();
            let body_tokens = count_tokens(&body) as u32;
            s.texts.insert(Detail::Full, (body, body_tokens));
        }
    }
    Ok(())
}

/// `kind name`, or the path for a file.
fn outline_of(n: &NodeRecord) -> String {
    match n.qualified_name.as_deref().or(n.name.as_deref()) {
        Some(name) => format!("{} {name}", n.node_type),
        None => format!(
            "{} {}:{}-{}",
            n.node_type, n.file_path, n.start_line, n.end_line
        ),
    }
}

/// The declaration, with the comment lines just above it (Rust, Go, JS
/// doc comments) or the docstring just below it (Python).
fn signature_with_doc(text: &str, n: &NodeRecord) -> String {
    let sig = signature_of(text, n);
    let start = n.start_byte.min(text.len());
    let head = n.preview_start.clamp(start, text.len());
    let mut out = String::new();
    // Comments inside the unit's span before its name (doc comments,
    // decorators are kept out: they are not prose).
    for line in text[start..head].lines() {
        let t = line.trim_start();
        if t.starts_with("///") || t.starts_with("//") || t.starts_with("/*") || t.starts_with('*')
        {
            out.push_str(t);
            out.push('\n');
        }
    }
    out.push_str(&sig);
    // A Python docstring: the first statement of the body is a string.
    let end = n.end_byte.min(text.len());
    let body = &text[head..end];
    if let Some(colon) = body.find(":\n") {
        let after = body[colon + 2..].trim_start();
        for quote in ["\"\"\"", "'''"] {
            if let Some(rest) = after.strip_prefix(quote) {
                let doc = match rest.find(quote) {
                    Some(close) => &rest[..close],
                    None => rest,
                };
                let lines: Vec<&str> = doc
                    .lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty())
                    .take(DOC_LINES)
                    .collect();
                if !lines.is_empty() {
                    out.push_str("\n    \"\"\"");
                    out.push_str(&lines.join("\n    "));
                    out.push_str("\"\"\"");
                }
                break;
            }
        }
    }
    out
}

/// A container's declaration and its members' signatures, leaving out
/// members shown in fragments of their own.
fn skeleton_of(
    text: &str,
    n: &NodeRecord,
    members: &[NodeRecord],
    excluded: &[(usize, usize)],
) -> (String, usize) {
    let mut out = if n.node_type == "file" {
        String::new()
    } else {
        signature_with_doc(text, n)
    };
    let documented = out.contains('\n');
    let mut listed = 0;
    for m in members {
        if m.name.is_none()
            || excluded
                .iter()
                .any(|(s, e)| *s < m.end_byte && m.start_byte < *e)
        {
            continue;
        }
        if listed == SKELETON_MEMBERS {
            out.push_str("\n    …");
            break;
        }
        if !out.is_empty() {
            out.push('\n');
        }
        if n.node_type != "file" {
            out.push_str("    ");
        }
        out.push_str(&signature_of(text, m));
        listed += 1;
    }
    if out.is_empty() {
        out = signature_of(text, n);
    }
    // A documented declaration says something even with every member elsewhere.
    (out, if documented { listed.max(1) } else { listed })
}
