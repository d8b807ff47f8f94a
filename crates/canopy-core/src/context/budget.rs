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
//!    or skeleton), so the best fragments keep their bodies longest. A
//!    fragment that would fall to an outline (`kind name`, a few tokens
//!    under a provenance line of tens) is left out instead, unless it is the
//!    first; only when every fragment left is an outline is the
//!    lowest-scored one dropped. A class skeleton never pushes a chosen
//!    unit inside it out (the skeleton leaves that unit's text out): before
//!    such a unit loses detail, the skeleton is left out instead, and when
//!    left-out fragments come back, its units come before it. How many
//!    candidates enter is bounded by the
//!    budget (one per 80 tokens, 5 to 60).
//! 3. **Fill what is left.** Degrading one level at a time from the lowest
//!    score can leave room once a large fragment finally shrinks: best
//!    first, degraded fragments get their detail back while it fits. Then a
//!    container shown as a skeleton beside units of its own becomes its
//!    whole text, which holds them (best-scored first, while it fits): the
//!    lines between the methods — class attributes, module constants — are
//!    often what a change touches, and an unused budget shows none of them.
//!    Then a chosen member whose class (struct, impl, …) is not in the pack
//!    brings in the class's whole text in its place when that fits. Around
//!    the best-ranked fragment, the whole class may push lower-ranked
//!    fragments out (lowest first) when it takes at most half the budget:
//!    the best-ranked method and the lines of its class keep their text
//!    before smaller, lower-ranked code does. When its file is clearly
//!    right (it holds the best-ranked fragment and at least three of the
//!    best five), the whole unit that matched comes before more fragments
//!    of other files: up to three quarters of the budget, or any share when
//!    it pushes out at most a quarter of the budget. Last, fragments left out
//!    while the pack was over budget come back, best first, at the most
//!    detail that fits in the room left.

use std::collections::HashMap;

use crate::context::comments::COMMENT;
use crate::context::strategies::Merged;
use crate::context::wire::Counts;
use crate::context::{Detail, Fragment};
use crate::error::{CanopyError, Result};
use crate::graph::ops::signature_of;
use crate::lang::extract::text_view;
use crate::snapshot::Snapshot;
use crate::store::read::NodeRecord;

/// Budget tokens per candidate admitted.
const TOKENS_PER_CANDIDATE: u64 = 80;
/// Fewest candidates admitted.
const MIN_ADMIT: u64 = 5;
/// Held units whose reasons a merged fragment repeats.
const HELD_REASONS: usize = 3;
/// Members listed in a skeleton at most.
const SKELETON_MEMBERS: usize = 40;
/// Lines of a comment block shown at signature detail.
const COMMENT_HEAD_LINES: usize = 3;
/// Docstring lines kept in a signature at most.
const DOC_LINES: usize = 8;

/// The packer's result.
#[derive(Default)]
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
    /// Tokens of its provenance line on the wire ([`crate::context::wire`])
    /// at full detail, and at less (where the line carries the handle).
    overhead: (u32, u32),
}

/// Tokens a fragment's provenance line and block break cost on the wire,
/// at full detail and cut (the path written, as on a file's first block;
/// the exact wire total is checked after packing).
fn overhead_of(m: &Merged, counts: &Counts) -> (u32, u32) {
    let n = &m.node;
    let line = |detail| {
        let line = crate::context::wire::provenance_line(&crate::context::wire::Provenance {
            path: &n.file_path,
            same_file: false,
            lines: [n.start_line, n.end_line],
            node_type: &n.node_type,
            name: n.qualified_name.as_deref().or(n.name.as_deref()),
            detail,
            strategy: m.strategy.as_str(),
            score: m.score,
            handle: &n.handle,
            stale: false,
            reason: &m.reason,
        });
        counts.of(&line) as u32 + 2
    };
    (line(Detail::Full), line(Detail::Signature))
}

impl Slot {
    fn new(m: Merged, cap: Detail, excluded: Vec<(usize, usize)>, counts: &Counts) -> Slot {
        let overhead = overhead_of(&m, counts);
        Slot {
            m,
            overhead,
            cap,
            excluded,
            detail: cap,
            stale: false,
            empty_skeleton: false,
            texts: HashMap::new(),
        }
    }

    /// What it costs on the wire at `d`: its text and its provenance line.
    fn cost(&self, d: Detail) -> u32 {
        let overhead = if d == Detail::Full {
            self.overhead.0
        } else {
            self.overhead.1
        };
        self.texts.get(&d).map_or(0, |t| t.1) + overhead
    }

    /// The next richer level, up to its cap (none for a stale file).
    fn next_higher(&self) -> Option<Detail> {
        if self.stale {
            return None;
        }
        [Detail::Signature, Detail::Full]
            .into_iter()
            .find(|d| *d > self.detail && *d <= self.cap && self.texts.contains_key(d))
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

/// Packs `merged` (best first) under `budget` tokens; `counts` holds the
/// token counts of texts measured before in the same request, and `reads`
/// what it read of the files and the index (each file read and
/// hash-checked, each unit and container's members looked up, once per
/// request, however often it packs).
pub(crate) fn pack(
    snapshot: Snapshot<'_>,
    merged: Vec<Merged>,
    budget: u64,
    counts: &Counts,
    reads: &mut Reads,
) -> Result<Packed> {
    let admit = (budget / TOKENS_PER_CANDIDATE).clamp(MIN_ADMIT, 60) as usize;
    let mut slots = choose(merged, admit, counts);
    render(snapshot, reads, &mut slots, budget, counts)?;
    // A skeleton whose every member is a fragment of its own says nothing more than they do.
    slots.retain(|s| !s.empty_skeleton);

    let (mut pruned, dropped) = degrade(&mut slots, budget);

    // After a drop what is left is less than an outline: nothing to fill
    // (and nothing may regain detail a dropped fragment paid for).
    if dropped == 0 {
        fill(&mut slots, budget, &mut pruned, counts);
        enclose(snapshot, reads, &mut slots, budget, &mut pruned, counts)?;
        readmit(&mut slots, &mut pruned, budget);
    }
    let pruned = pruned.len();

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
                handle: n.handle_id(),
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
        dropped: dropped + pruned,
    })
}

/// Step 2: degrades, then drops, until the total fits. Returns the
/// fragments left out rather than cut to an outline (a `kind name` line
/// says little and pays a whole provenance line, room the best-ranked
/// functions' text needs, issue 31 item 3; unlike dropped ones they do not
/// stop [`fill`]: every fragment left scored above them), and how many were
/// dropped.
fn degrade(slots: &mut Vec<Slot>, budget: u64) -> (Vec<Slot>, usize) {
    let mut dropped = 0;
    let mut pruned: Vec<Slot> = Vec::new();
    let total = |slots: &[Slot]| -> u64 { slots.iter().map(|s| u64::from(s.cost(s.detail))).sum() };
    while total(slots) > budget {
        // The lowest-valued fragment that can still lose detail loses one level.
        let step = slots
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.next_lower().map(|next| (i, next, s.m.score)))
            .min_by(|a, b| a.2.total_cmp(&b.2).then(b.0.cmp(&a.0)));
        // A class skeleton around a matched method never pushes the method
        // out (issue 31 item 3): before the method loses detail, the
        // skeleton goes ([`readmit`] may bring it back after the method).
        let step = step.map(|(i, next, score)| match skeleton_around(slots, i) {
            Some(k) => (k, Detail::Outline, score),
            None => (i, next, score),
        });
        match step {
            Some((i, Detail::Outline, _))
                if (i > 0 || is_skeleton(&slots[i])) && slots.len() > 1 =>
            {
                pruned.push(slots.remove(i));
            }
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
    (pruned, dropped)
}

/// A container shown as a skeleton because chosen units inside it are
/// fragments of their own.
fn is_skeleton(s: &Slot) -> bool {
    is_container(&s.m.node.node_type) && s.cap == Detail::Signature && !s.excluded.is_empty()
}

/// The skeleton in the pack around slot `i`, when `i` is a unit (not a
/// container) at full detail that is about to lose it.
fn skeleton_around(slots: &[Slot], i: usize) -> Option<usize> {
    let s = &slots[i];
    if is_container(&s.m.node.node_type)
        || s.m.node.node_type == COMMENT
        || s.detail != Detail::Full
    {
        return None;
    }
    (0..slots.len())
        .find(|&k| k != i && is_skeleton(&slots[k]) && contains(&slots[k].m.node, &s.m.node))
}

/// Step 3: while room is left, the best-scored container shown as a
/// skeleton whose whole text fits in place of its skeleton and of the
/// fragments inside it becomes that whole text; those fragments go (their
/// text is in it). It takes the place of the first of them, with the best
/// score among them.
fn fill(slots: &mut Vec<Slot>, budget: u64, pruned: &mut Vec<Slot>, counts: &Counts) {
    let mut used: u64 = slots.iter().map(|s| u64::from(s.cost(s.detail))).sum();
    let mut best_first: Vec<usize> = (0..slots.len()).collect();
    best_first.sort_by(|&a, &b| {
        slots[b]
            .m
            .score
            .total_cmp(&slots[a].m.score)
            .then(a.cmp(&b))
    });
    for i in best_first {
        let s = &mut slots[i];
        while let Some(up) = s.next_higher() {
            let grown = used - u64::from(s.cost(s.detail)) + u64::from(s.cost(up));
            if grown > budget {
                break;
            }
            used = grown;
            s.detail = up;
        }
    }
    loop {
        let used: u64 = slots.iter().map(|s| u64::from(s.cost(s.detail))).sum();
        let inside = |i: usize| -> Vec<usize> {
            (0..slots.len())
                .filter(|&j| j != i && contains(&slots[i].m.node, &slots[j].m.node))
                .collect()
        };
        let best = (0..slots.len())
            .filter(|&i| {
                let s = &slots[i];
                s.detail == Detail::Signature
                    && s.cap == Detail::Signature
                    && !s.stale
                    && s.texts.contains_key(&Detail::Full)
            })
            .filter(|&i| {
                let freed: u64 = inside(i)
                    .iter()
                    .map(|&j| u64::from(slots[j].cost(slots[j].detail)))
                    .sum();
                let s = &slots[i];
                let grown = u64::from(s.cost(Detail::Full)) + used;
                grown <= budget + u64::from(s.cost(s.detail)) + freed
            })
            .max_by(|&a, &b| {
                slots[a]
                    .m
                    .score
                    .total_cmp(&slots[b].m.score)
                    .then(b.cmp(&a))
            });
        let Some(i) = best else {
            // None fits: the skeleton around the best-ranked fragment may
            // still become whole by pushing out lower-ranked code.
            let top = top_slot(slots);
            let around_top = (0..slots.len()).find(|&i| {
                let s = &slots[i];
                s.detail == Detail::Signature
                    && s.cap == Detail::Signature
                    && !s.stale
                    && top.is_some_and(|t| t != i && contains(&s.m.node, &slots[t].m.node))
                    && s.texts.contains_key(&Detail::Full)
            });
            let Some(i) = around_top else { return };
            let mut keep = inside(i);
            keep.push(i);
            let freed: u64 = keep
                .iter()
                .map(|&j| u64::from(slots[j].cost(slots[j].detail)))
                .sum();
            let need =
                (used + u64::from(slots[i].cost(Detail::Full))).saturating_sub(budget + freed);
            if !make_room(
                slots,
                &keep,
                need,
                budget,
                u64::from(slots[i].cost(Detail::Full)),
                pruned,
            ) {
                return;
            }
            continue;
        };
        let held = inside(i);
        let score = held
            .iter()
            .map(|&j| slots[j].m.score)
            .fold(slots[i].m.score, f64::max);
        let held_reasons = held_reasons(slots, &held);
        let mut whole = Slot::new(slots[i].m.clone(), Detail::Full, Vec::new(), counts);
        whole.texts = std::mem::take(&mut slots[i].texts);
        whole.m.score = score;
        if !held_reasons.is_empty() {
            // Its own reason goes when a held unit gives the same one.
            let own = format!(": {}", whole.m.reason);
            whole.m.reason = if held_reasons.contains(&own) {
                held_reasons
            } else {
                format!("{}; {held_reasons}", whole.m.reason)
            };
            whole.overhead = overhead_of(&whole.m, counts);
        }
        replace(slots, held.into_iter().chain([i]).collect(), whole);
    }
}

/// The best-scored fragment (the first of equals).
fn top_slot(slots: &[Slot]) -> Option<usize> {
    (0..slots.len()).min_by(|&a, &b| {
        slots[b]
            .m
            .score
            .total_cmp(&slots[a].m.score)
            .then(a.cmp(&b))
    })
}

/// Largest share of the budget a whole container may take by pushing
/// lower-ranked fragments out (issue 31 item 3): a class around the
/// best-ranked method, not a file that would leave room for nothing else.
const WHOLE_SHARE: u64 = 2;

/// In a clearly right file ([`clearly_right_file`]) the whole container
/// around the best-ranked fragment may take up to this share (numerator,
/// denominator) of the budget, or push out lower-ranked code worth up to
/// [`CLEAR_PUSH`] of it: the matched unit whole is worth more than more
/// fragments of other files.
const CLEAR_SHARE: (u64, u64) = (3, 4);
/// Largest share (1 / N) of the budget a whole container in a clearly
/// right file may push out, whatever its own size.
const CLEAR_PUSH: u64 = 4;

/// Of the best-ranked fragments, how many [`clearly_right_file`] looks at,
/// and how many of them must be in one file.
const CLEAR_TOP: usize = 5;
const CLEAR_HELD: usize = 3;

/// A file is clearly right when it holds the best-ranked fragment and at
/// least [`CLEAR_HELD`] of the [`CLEAR_TOP`] best-ranked ones (in the pack
/// or left out of it while it was over budget): the task's terms, names and
/// neighbours point at it again and again, not at one unit that happens to
/// match. Returns that file.
fn clearly_right_file<'a>(slots: &'a [Slot], pruned: &'a [Slot]) -> Option<&'a str> {
    let mut ranked: Vec<&Slot> = slots.iter().chain(pruned.iter()).collect();
    ranked.sort_by(|a, b| b.m.score.total_cmp(&a.m.score));
    let first = ranked.first()?.m.node.file_path.as_str();
    let held = ranked
        .iter()
        .take(CLEAR_TOP)
        .filter(|s| s.m.node.file_path == first)
        .count();
    (held >= CLEAR_HELD).then_some(first)
}

/// Frees `need` tokens for a whole container of `whole` tokens around the
/// best-ranked fragment by taking out lower-ranked fragments, lowest first
/// (into `pruned`: [`readmit`] may bring the small ones back), never one in
/// `keep`. The best-ranked function keeps its full text, and its class its
/// lines between the methods, before smaller lower-ranked code does.
/// Changes nothing and returns false when they cannot free enough or the
/// container would take over `1 / WHOLE_SHARE` of the budget. In a
/// clearly right file the whole unit that matched comes before more
/// fragments of lower-ranked code: it may take up to [`CLEAR_SHARE`] of the
/// budget, or any share when what it pushes out is at most
/// `1 / CLEAR_PUSH` of the budget (issue 31 item 3).
fn make_room(
    slots: &mut Vec<Slot>,
    keep: &[usize],
    need: u64,
    budget: u64,
    whole: u64,
    pruned: &mut Vec<Slot>,
) -> bool {
    let Some(top) = top_slot(slots) else {
        return false;
    };
    let clear = clearly_right_file(slots, pruned) == Some(slots[top].m.node.file_path.as_str());
    let too_large = if clear {
        whole * CLEAR_SHARE.1 > budget * CLEAR_SHARE.0 && need * CLEAR_PUSH > budget
    } else {
        whole * WHOLE_SHARE > budget
    };
    if too_large {
        return false;
    }
    let best = slots[top].m.score;
    push_out(slots, need, pruned, |j, s| {
        !keep.contains(&j) && s.m.score < best
    })
}

/// Takes fragments that `may_go` out, lowest-scored first (into `pruned`,
/// for [`readmit`]), until they free `need` tokens. Changes nothing and
/// returns false when they cannot.
fn push_out(
    slots: &mut Vec<Slot>,
    need: u64,
    pruned: &mut Vec<Slot>,
    may_go: impl Fn(usize, &Slot) -> bool,
) -> bool {
    let mut lowest_first: Vec<usize> = (0..slots.len()).filter(|&j| may_go(j, &slots[j])).collect();
    lowest_first.sort_by(|&a, &b| {
        slots[a]
            .m
            .score
            .total_cmp(&slots[b].m.score)
            .then(b.cmp(&a))
    });
    let mut freed = 0;
    let mut out = Vec::new();
    for j in lowest_first {
        if freed >= need {
            break;
        }
        freed += u64::from(slots[j].cost(slots[j].detail));
        out.push(j);
    }
    if freed < need {
        return false;
    }
    out.sort_unstable();
    for j in out.into_iter().rev() {
        pruned.push(slots.remove(j));
    }
    true
}

/// Step 3, continued: fragments left out while the pack was over budget
/// come back, best-scored first, at the most detail that fits in the room
/// left. They were left out lowest-scored first, before a larger fragment
/// above them lost its body; once it did, the room it freed was left
/// unused (a 2,000-token pack sent 1,400). One whose text is now inside a
/// fragment (a class made whole), or that holds one, stays out.
fn readmit(slots: &mut Vec<Slot>, pruned: &mut Vec<Slot>, budget: u64) {
    let mut used: u64 = slots.iter().map(|s| u64::from(s.cost(s.detail))).sum();
    // Best first; a unit comes back just before a skeleton left out around
    // it (the skeleton left it out of its text: without it, a gap).
    let rank: Vec<f64> = pruned
        .iter()
        .map(|p| {
            pruned
                .iter()
                .filter(|k| {
                    is_skeleton(k)
                        && contains(&k.m.node, &p.m.node)
                        && !is_container(&p.m.node.node_type)
                })
                .map(|k| k.m.score)
                .fold(p.m.score, f64::max)
        })
        .collect();
    let mut order: Vec<usize> = (0..pruned.len()).collect();
    order.sort_by(|&a, &b| {
        rank[b]
            .total_cmp(&rank[a])
            .then(is_skeleton(&pruned[a]).cmp(&is_skeleton(&pruned[b])))
            .then(pruned[b].m.score.total_cmp(&pruned[a].m.score))
    });
    let mut taken: Vec<Option<Slot>> = pruned.drain(..).map(Some).collect();
    let ordered: Vec<Slot> = order.into_iter().filter_map(|i| taken[i].take()).collect();
    let mut left = Vec::new();
    for mut p in ordered {
        let repeats = slots.iter().any(|s| {
            let (sn, pn) = (&s.m.node, &p.m.node);
            // A fragment at full detail that holds it (a class made whole)
            // repeats it; a skeleton around it, or one it is around, does not.
            let whole_around = s.detail == Detail::Full && contains(sn, pn);
            let skeleton_pair = (s.detail == Detail::Signature && contains(sn, pn))
                || (p.cap == Detail::Signature && contains(pn, sn));
            overlaps(sn, pn) && (whole_around || !skeleton_pair)
        });
        let level = [Detail::Full, Detail::Signature].into_iter().find(|d| {
            *d <= p.cap && p.texts.contains_key(d) && used + u64::from(p.cost(*d)) <= budget
        });
        match level {
            Some(d) if !repeats && !p.stale => {
                p.detail = d;
                used += u64::from(p.cost(d));
                // Best first: before the first fragment scored below it.
                let at = slots
                    .iter()
                    .position(|s| s.m.score < p.m.score)
                    .unwrap_or(slots.len());
                slots.insert(at, p);
            }
            _ => left.push(p),
        }
    }
    *pruned = left;
}

/// Puts `whole` where the first of the `held` slots was, and removes them
/// (their text is in it).
fn replace(slots: &mut Vec<Slot>, mut held: Vec<usize>, whole: Slot) {
    held.sort_unstable();
    let first = held.first().copied().unwrap_or(slots.len());
    // From the back, so the indices still to remove stay valid.
    for j in held.into_iter().rev() {
        slots.remove(j);
    }
    slots.insert(first.min(slots.len()), whole);
}

/// Provenance of a fragment that took the place of the `held` slots: each
/// unit's name and reason, best first (three at most; the fragment holds
/// the others' text too). Units with the same reason share it (`holds `a`,
/// `b`: r`): a class whose methods all matched the same terms would
/// otherwise repeat them once per method on the wire.
fn held_reasons(slots: &[Slot], held: &[usize]) -> String {
    let mut best_first: Vec<&Slot> = held.iter().map(|&j| &slots[j]).collect();
    best_first.sort_by(|a, b| b.m.score.total_cmp(&a.m.score));
    // (reason, names), in the order of each reason's best unit.
    let mut groups: Vec<(&str, Vec<&str>)> = Vec::new();
    for s in best_first.iter().take(HELD_REASONS) {
        let n = &s.m.node;
        let name = n.qualified_name.as_deref().or(n.name.as_deref());
        match groups.iter_mut().find(|g| g.0 == s.m.reason) {
            Some(g) => g.1.extend(name),
            None => groups.push((&s.m.reason, name.into_iter().collect())),
        }
    }
    let mut parts: Vec<String> = groups
        .iter()
        .map(|(reason, names)| {
            if names.is_empty() {
                return reason.to_string();
            }
            let names: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
            format!("holds {}: {reason}", names.join(", "))
        })
        .collect();
    if best_first.len() > HELD_REASONS {
        parts.push(format!("and {} more", best_first.len() - HELD_REASONS));
    }
    parts.join("; ")
}

/// The last fill: the container (not a file) just around a chosen unit,
/// when it is not in the pack, becomes a fragment of its whole text in
/// place of the chosen units inside it, best-scored unit first, while it
/// fits. It keeps that unit's strategy and score; its reason lists the
/// units it holds.
fn enclose(
    snapshot: Snapshot<'_>,
    reads: &mut Reads,
    slots: &mut Vec<Slot>,
    budget: u64,
    pruned: &mut Vec<Slot>,
    counts: &Counts,
) -> Result<()> {
    let mut tried: std::collections::HashSet<i64> = std::collections::HashSet::new();
    loop {
        let used: u64 = slots.iter().map(|s| u64::from(s.cost(s.detail))).sum();
        let spare = budget.saturating_sub(used);
        let in_pack: std::collections::HashSet<i64> =
            slots.iter().map(|s| s.m.node.rowid).collect();
        let mut best_first: Vec<usize> = (0..slots.len())
            .filter(|&i| {
                let s = &slots[i];
                !s.stale
                    && s.m.node.node_type != COMMENT
                    && s.m
                        .node
                        .parent_rowid
                        .is_some_and(|p| !in_pack.contains(&p) && !tried.contains(&p))
            })
            .collect();
        best_first.sort_by(|&a, &b| {
            slots[b]
                .m
                .score
                .total_cmp(&slots[a].m.score)
                .then(a.cmp(&b))
        });
        let Some(&i) = best_first.first() else {
            return Ok(());
        };
        let Some(parent) = slots[i].m.node.parent_rowid else {
            return Ok(());
        };
        tried.insert(parent);
        let Some(outer) = reads.unit(snapshot, parent)?.cloned() else {
            continue;
        };
        if !is_container(&outer.node_type)
            || outer.node_type == "file"
            // Partly overlapping a fragment: the text would repeat.
            || slots.iter().any(|s| overlaps(&outer, &s.m.node) && !contains(&outer, &s.m.node))
        {
            continue;
        }
        let held_by = |slots: &[Slot]| -> Vec<usize> {
            (0..slots.len())
                .filter(|&j| contains(&outer, &slots[j].m.node))
                .collect()
        };
        let mut held = held_by(slots);
        let freed: u64 = held
            .iter()
            .map(|&j| u64::from(slots[j].cost(slots[j].detail)))
            .sum();
        let Some(text) = reads
            .texts
            .get(snapshot, &outer.file_path, &outer.content_hash)?
        else {
            continue; // changed on disk since indexed
        };
        let body = text
            .get(outer.start_byte.min(text.len())..outer.end_byte.min(text.len()))
            .unwrap_or_default()
            .to_string();
        let tokens = counts.of(&body) as u32;
        let best = &slots[i].m;
        let mut whole = Slot::new(
            Merged {
                node: outer.clone(),
                strategy: best.strategy,
                reason: held_reasons(slots, &held),
                score: best.score,
            },
            Detail::Full,
            Vec::new(),
            counts,
        );
        whole.texts.insert(Detail::Full, (body, tokens));
        let cost = u64::from(whole.cost(Detail::Full));
        if cost > spare + freed {
            // Around the best-ranked fragment, lower-ranked code makes room.
            let need = cost - spare - freed;
            if top_slot(slots) != Some(i) || !make_room(slots, &held, need, budget, cost, pruned) {
                continue;
            }
            held = held_by(slots);
        }
        replace(slots, held, whole);
    }
}

/// What a request's packings read, each once however often it packs: the
/// files' texts, the units [`enclose`] looks up and the members of the
/// containers [`render`] shows as skeletons (the fused default packs up to
/// six times, and each packing asked the index again, issue 31 item 6).
#[derive(Default)]
pub(crate) struct Reads {
    texts: FileTexts,
    /// Units by row id (`None`: no such unit).
    units: HashMap<i64, Option<NodeRecord>>,
    /// A container's members, in [`crate::store::Store::children_of`]'s order.
    children: HashMap<i64, Vec<NodeRecord>>,
}

impl Reads {
    /// The unit with this row id.
    fn unit(&mut self, snapshot: Snapshot<'_>, rowid: i64) -> Result<Option<&NodeRecord>> {
        use std::collections::hash_map::Entry;
        let unit = match self.units.entry(rowid) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(e) => e.insert(snapshot.store().node_by_rowid(rowid)?),
        };
        Ok(unit.as_ref())
    }

    /// Looks up the members of those of `containers` not looked up before.
    fn read_children(&mut self, snapshot: Snapshot<'_>, containers: &[i64]) -> Result<()> {
        let mut missing: Vec<i64> = containers
            .iter()
            .copied()
            .filter(|c| !self.children.contains_key(c))
            .collect();
        missing.sort_unstable();
        missing.dedup();
        if missing.is_empty() {
            return Ok(());
        }
        for c in snapshot.store().children_of(&missing)? {
            if let Some(p) = c.parent_rowid {
                self.children.entry(p).or_default().push(c);
            }
        }
        for c in missing {
            self.children.entry(c).or_default();
        }
        Ok(())
    }
}

/// The text of each file a request's packings read, read and hash-checked once.
#[derive(Default)]
struct FileTexts(HashMap<String, Option<String>>);

impl FileTexts {
    /// `None` when the file changed on disk since it was indexed.
    fn get(&mut self, snapshot: Snapshot<'_>, path: &str, hash: &str) -> Result<Option<&str>> {
        if !self.0.contains_key(path) {
            let text = match snapshot.read_verified(path, hash) {
                Ok(bytes) => Some(text_view(&bytes)),
                Err(CanopyError::StaleIndex { .. }) => None,
                Err(e) => return Err(e),
            };
            self.0.insert(path.to_string(), text);
        }
        Ok(self.0.get(path).and_then(|t| t.as_deref()))
    }
}

/// The candidates that enter the pack (at most `admit`, best first), each
/// with the most detail it may have: the dedupe step.
fn choose(merged: Vec<Merged>, admit: usize, counts: &Counts) -> Vec<Slot> {
    let mut slots: Vec<Slot> = Vec::new();
    for m in merged {
        if slots.len() >= admit {
            break;
        }
        let c = &m.node;
        // A comment block is only worth a fragment where no chosen text holds
        // it; a unit chosen later that holds it replaces it.
        if c.node_type == COMMENT {
            if slots.iter().any(|s| overlaps(&s.m.node, c)) {
                continue;
            }
            slots.push(Slot::new(m, Detail::Full, Vec::new(), counts));
            continue;
        }
        // Refused: same span as a chosen unit, inside a chosen non-container
        // (its text is there already), or partly overlapping one.
        let refused = slots.iter().any(|s| {
            let p = &s.m.node;
            p.node_type != COMMENT
                && overlaps(p, c)
                && ((p.start_byte == c.start_byte && p.end_byte == c.end_byte)
                    || (contains(p, c) && !is_container(&p.node_type))
                    || (!contains(p, c) && !contains(c, p)))
        });
        if refused {
            continue;
        }
        slots.retain(|s| s.m.node.node_type != COMMENT || !overlaps(&s.m.node, c));
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
        slots.push(Slot::new(m, cap, excluded, counts));
    }
    slots
}

/// Renders every slot's text at each level it may take, and the whole text
/// of a container capped at its skeleton when it could fit (see [`fill`]).
fn render(
    snapshot: Snapshot<'_>,
    reads: &mut Reads,
    slots: &mut [Slot],
    budget: u64,
    counts: &Counts,
) -> Result<()> {
    let containers: Vec<i64> = slots
        .iter()
        .filter(|s| is_container(&s.m.node.node_type))
        .map(|s| s.m.node.rowid)
        .collect();
    reads.read_children(snapshot, &containers)?;
    let Reads {
        texts, children, ..
    } = reads;
    for s in slots.iter_mut() {
        let n = &s.m.node;
        let text = texts.get(snapshot, &n.file_path, &n.content_hash)?;
        let outline = outline_of(n);
        let outline_tokens = counts.of(&outline) as u32;
        s.texts.insert(Detail::Outline, (outline, outline_tokens));
        let Some(text) = text else {
            s.stale = true;
            s.detail = Detail::Outline;
            continue;
        };
        let signature = if n.node_type == COMMENT {
            comment_head(text, n)
        } else if is_container(&n.node_type) {
            let (skeleton, listed) = skeleton_of(
                text,
                n,
                children.get(&n.rowid).map_or(&[][..], |c| &c[..]),
                &s.excluded,
            );
            s.empty_skeleton = listed == 0 && !s.excluded.is_empty();
            skeleton
        } else {
            signature_with_doc(text, n)
        };
        let sig_tokens = counts.of(&signature) as u32;
        s.texts.insert(Detail::Signature, (signature, sig_tokens));
        let may_fill = is_container(&n.node_type) && u64::from(n.token_count) <= budget;
        if s.cap == Detail::Full || may_fill {
            let body = text
                .get(n.start_byte.min(text.len())..n.end_byte.min(text.len()))
                .unwrap_or_default()
                .to_string();
            let body_tokens = counts.of(&body) as u32;
            s.texts.insert(Detail::Full, (body, body_tokens));
        }
    }
    Ok(())
}

/// The first lines of a comment block.
fn comment_head(text: &str, n: &NodeRecord) -> String {
    let block = text
        .get(n.start_byte.min(text.len())..n.end_byte.min(text.len()))
        .unwrap_or_default();
    let mut lines = block.lines();
    let mut out: Vec<&str> = lines.by_ref().take(COMMENT_HEAD_LINES).collect();
    if lines.next().is_some() {
        out.push("…");
    }
    out.join("\n")
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::Strategy;

    fn unit(rowid: i64, node_type: &str, span: (usize, usize)) -> Merged {
        Merged {
            node: NodeRecord {
                rowid,
                handle: format!("h{rowid}"),
                file_path: "a.py".into(),
                content_hash: String::new(),
                node_type: node_type.into(),
                name: Some(format!("u{rowid}")),
                qualified_name: None,
                parent_rowid: None,
                start_byte: span.0,
                end_byte: span.1,
                start_line: 1,
                end_line: 1,
                token_count: 1,
                preview_start: span.0,
                score: 0.0,
            },
            strategy: Strategy::Keyword,
            reason: "r".into(),
            score: 1.0,
        }
    }

    fn chosen(slots: &[Slot]) -> Vec<(i64, Detail)> {
        slots.iter().map(|s| (s.m.node.rowid, s.cap)).collect()
    }

    /// A slot already rendered: `(level, tokens)` for each level it has.
    fn rendered(m: Merged, cap: Detail, detail: Detail, costs: &[(Detail, u32)]) -> Slot {
        let mut s = Slot::new(m, cap, Vec::new(), &Counts::default());
        s.detail = detail;
        // These tests are about the text's cost; the provenance line's is
        // tested on the wire (tests/context.rs, canopy-cli context_wire).
        s.overhead = (0, 0);
        for &(d, t) in costs {
            s.texts.insert(d, (format!("{d:?}"), t));
        }
        s
    }

    fn levels(slots: &[Slot]) -> Vec<(i64, Detail)> {
        slots.iter().map(|s| (s.m.node.rowid, s.detail)).collect()
    }

    #[test]
    fn room_left_gives_detail_back_then_makes_a_skeleton_whole() {
        let all = [
            (Detail::Outline, 2),
            (Detail::Signature, 10),
            (Detail::Full, 60),
        ];
        let make = || {
            let mut method = unit(2, "function", (10, 40));
            method.score = 0.9;
            let mut other = unit(3, "function", (200, 260));
            other.score = 0.5;
            vec![
                // A class capped at its skeleton by the method chosen inside it.
                rendered(
                    unit(1, "class", (0, 100)),
                    Detail::Signature,
                    Detail::Signature,
                    &all,
                ),
                rendered(method, Detail::Full, Detail::Full, &[(Detail::Full, 30)]),
                // Degraded to its outline while the pack was over budget.
                rendered(
                    other,
                    Detail::Full,
                    Detail::Outline,
                    &[
                        (Detail::Outline, 2),
                        (Detail::Signature, 5),
                        (Detail::Full, 20),
                    ],
                ),
            ]
        };
        // 42 used: the outline gets its body back (60); the whole class
        // (60 in place of 10 + 30) would make 80.
        let mut slots = make();
        fill(&mut slots, 70, &mut Vec::new(), &Counts::default());
        assert_eq!(
            levels(&slots),
            [(1, Detail::Signature), (2, Detail::Full), (3, Detail::Full)]
        );
        // With room for it, the class is whole and the method inside goes.
        let mut slots = make();
        fill(&mut slots, 100, &mut Vec::new(), &Counts::default());
        assert_eq!(levels(&slots), [(1, Detail::Full), (3, Detail::Full)]);
        assert!(
            slots[0].m.reason.contains("holds `u2`: r"),
            "{}",
            slots[0].m.reason
        );
        assert_eq!(slots[0].m.score, 1.0);
        // No room at all: nothing changes.
        let mut slots = make();
        fill(&mut slots, 42, &mut Vec::new(), &Counts::default());
        assert_eq!(
            levels(&slots),
            [
                (1, Detail::Signature),
                (2, Detail::Full),
                (3, Detail::Outline)
            ]
        );
    }

    #[test]
    fn fragments_left_out_while_over_budget_come_back_into_the_room_a_larger_one_freed() {
        let all = |full: u32| {
            [
                (Detail::Outline, 2),
                (Detail::Signature, 5),
                (Detail::Full, full),
            ]
        };
        let ranked = [(1, 1.0, 40), (2, 0.9, 80), (3, 0.5, 15), (4, 0.4, 15)];
        let mut slots: Vec<Slot> = ranked
            .iter()
            .map(|&(row, score, full)| {
                let mut m = unit(
                    row,
                    "function",
                    (row as usize * 100, row as usize * 100 + 50),
                );
                m.score = score;
                rendered(m, Detail::Full, Detail::Full, &all(full))
            })
            .collect();
        // 150 over 100: the two lowest go (lowest first), then the second
        // loses its body, which leaves 50 of 100 used.
        let (mut pruned, dropped) = degrade(&mut slots, 100);
        assert_eq!(dropped, 0);
        assert_eq!(levels(&slots), [(1, Detail::Full), (2, Detail::Signature)]);
        // The two come back in full, best first, in rank order.
        readmit(&mut slots, &mut pruned, 100);
        assert_eq!(
            levels(&slots),
            [
                (1, Detail::Full),
                (2, Detail::Signature),
                (3, Detail::Full),
                (4, Detail::Full)
            ]
        );
        assert!(pruned.is_empty());
        // Only what fits comes back: with 10 left, the third's signature.
        let mut slots: Vec<Slot> = slots.drain(..2).collect();
        let mut third = unit(3, "function", (300, 350));
        third.score = 0.5;
        let mut pruned = vec![rendered(third, Detail::Full, Detail::Signature, &all(15))];
        readmit(&mut slots, &mut pruned, 55);
        assert_eq!(
            levels(&slots),
            [
                (1, Detail::Full),
                (2, Detail::Signature),
                (3, Detail::Signature)
            ]
        );
    }

    #[test]
    fn the_class_around_the_best_method_becomes_whole_before_lower_ranked_code_keeps_its_body() {
        // The other function in `other_file`: in b.py, a.py holds two of
        // the three fragments and is not clearly right.
        let make_in = |class_full: u32, other_file: &str| {
            let mut method = unit(2, "function", (10, 40));
            method.score = 1.0;
            let mut other = unit(3, "function", (200, 260));
            other.node.file_path = other_file.into();
            other.score = 0.5;
            let mut class = unit(1, "class", (0, 100));
            class.score = 0.3;
            vec![
                rendered(method, Detail::Full, Detail::Full, &[(Detail::Full, 40)]),
                rendered(
                    other,
                    Detail::Full,
                    Detail::Full,
                    &[(Detail::Signature, 5), (Detail::Full, 150)],
                ),
                // The best method's class, capped at its skeleton.
                rendered(
                    class,
                    Detail::Signature,
                    Detail::Signature,
                    &[(Detail::Signature, 10), (Detail::Full, class_full)],
                ),
            ]
        };
        let make = |class_full: u32| make_in(class_full, "b.py");
        // 200 of 200 used: the whole class (90 for 10 + 40) does not fit
        // beside the lower-ranked function's body, which makes room for it
        // and comes back as its signature in what is left.
        let mut slots = make(90);
        let mut pruned = Vec::new();
        fill(&mut slots, 200, &mut pruned, &Counts::default());
        assert_eq!(levels(&slots), [(1, Detail::Full)]);
        assert_eq!(slots[0].m.score, 1.0);
        readmit(&mut slots, &mut pruned, 200);
        assert_eq!(levels(&slots), [(1, Detail::Full), (3, Detail::Signature)]);
        // A class that would take over half the budget does not push code out.
        let mut slots = make(110);
        let mut pruned = Vec::new();
        fill(&mut slots, 200, &mut pruned, &Counts::default());
        assert_eq!(
            levels(&slots),
            [(2, Detail::Full), (3, Detail::Full), (1, Detail::Signature)]
        );
        assert!(pruned.is_empty());
        // In a clearly right file (all three fragments in a.py) it may take
        // up to three quarters of the budget (issue 31 item 3).
        let mut slots = make_in(110, "a.py");
        let mut pruned = Vec::new();
        fill(&mut slots, 200, &mut pruned, &Counts::default());
        assert_eq!(levels(&slots), [(1, Detail::Full)]);
        assert_eq!(pruned.len(), 1);
        // Over three quarters, and pushing out more than a quarter: no.
        let mut slots = make_in(160, "a.py");
        let mut pruned = Vec::new();
        fill(&mut slots, 200, &mut pruned, &Counts::default());
        assert_eq!(
            levels(&slots),
            [(2, Detail::Full), (3, Detail::Full), (1, Detail::Signature)]
        );
    }

    #[test]
    fn a_fragment_whose_text_a_whole_class_holds_does_not_come_back() {
        let all = [
            (Detail::Outline, 2),
            (Detail::Signature, 5),
            (Detail::Full, 10),
        ];
        let mut class = unit(1, "class", (0, 100));
        class.score = 1.0;
        let mut slots = vec![rendered(class, Detail::Full, Detail::Full, &all)];
        let mut method = unit(2, "function", (10, 40));
        method.score = 0.5;
        let mut pruned = vec![rendered(
            method.clone(),
            Detail::Full,
            Detail::Signature,
            &all,
        )];
        readmit(&mut slots, &mut pruned, 1000);
        assert_eq!(levels(&slots), [(1, Detail::Full)]);
        assert_eq!(pruned.len(), 1);
        // Beside the class's skeleton (which leaves it out) it does.
        slots[0].detail = Detail::Signature;
        readmit(&mut slots, &mut pruned, 1000);
        assert_eq!(levels(&slots), [(1, Detail::Signature), (2, Detail::Full)]);
    }

    #[test]
    fn a_comment_inside_chosen_text_is_left_out_and_a_unit_holding_it_replaces_it() {
        // Comment first, then the function around it: the function replaces it.
        let slots = choose(
            vec![unit(-1, COMMENT, (10, 20)), unit(1, "function", (0, 50))],
            10,
            &Counts::default(),
        );
        assert_eq!(chosen(&slots), [(1, Detail::Full)]);
        // Function first: the comment inside it is refused.
        let slots = choose(
            vec![unit(1, "function", (0, 50)), unit(-1, COMMENT, (10, 20))],
            10,
            &Counts::default(),
        );
        assert_eq!(chosen(&slots), [(1, Detail::Full)]);
        // A comment elsewhere stays; a comment never caps a class to its skeleton.
        let slots = choose(
            vec![
                unit(-1, COMMENT, (10, 20)),
                unit(-2, COMMENT, (60, 70)),
                unit(2, "class", (0, 55)),
            ],
            10,
            &Counts::default(),
        );
        assert_eq!(chosen(&slots), [(-2, Detail::Full), (2, Detail::Full)]);
        // A method chosen inside a class still caps it.
        let slots = choose(
            vec![unit(3, "function", (5, 30)), unit(2, "class", (0, 55))],
            10,
            &Counts::default(),
        );
        assert_eq!(chosen(&slots), [(3, Detail::Full), (2, Detail::Signature)]);
    }
}
