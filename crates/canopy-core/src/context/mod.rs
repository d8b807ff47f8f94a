//! Context packs: one call that returns the code a task needs, already cut
//! to a token budget, each piece saying where it came from and why
//! (SPEC §4, seed `002_…`).
//!
//! Pipeline: task (+ optional focus) → candidate lists from each strategy
//! ([`strategies`]: keyword, semantic, graph, history, decisions) → fused by
//! reciprocal rank when the strategy is `fused` → packed under the budget
//! ([`budget`]): nested and overlapping units deduplicated, low-value
//! fragments degraded (full body → signature or skeleton) before any is
//! dropped (one that would fall to an outline is left out instead).
//!
//! Invariants, each tested:
//! - the fragments' token counts (same tokenizer as every other count) add
//!   up to `total_tokens`, and `total_tokens <= budget_tokens`;
//! - no fragment's text is inside another fragment's text (a class whose
//!   methods are fragments of their own is shown as a skeleton without them);
//! - every fragment names its handle, path, lines, strategy, reason and score.
//!
//! Like every module below the engine, this one reads through a `Store` and
//! a root the engine hands it and never names the engine.

pub mod budget;
pub(crate) mod cochange;
mod comments;
pub(crate) mod history;
pub(crate) mod history_file;
pub mod strategies;
pub mod wire;

pub use history::HISTORY_DIFF_BYTES;

use serde::{Deserialize, Serialize};

use crate::error::{CanopyError, Result};
use crate::handle::HandleId;
use crate::model::Handle;
use crate::snapshot::Snapshot;
use crate::store::read::NodeRecord;

/// One unit a strategy proposes, with why (the strategies, and the code
/// comment blocks of `decisions`, produce these; fusion merges them).
#[derive(Clone, Debug)]
pub(crate) struct Candidate {
    pub(crate) node: NodeRecord,
    pub(crate) reason: String,
}

/// Default `budget_tokens`.
pub const DEFAULT_BUDGET: u64 = 4_000;
/// Smallest accepted budget: below it not even one outline fits on the
/// wire beside the header and its provenance line.
pub const MIN_BUDGET: u64 = 150;
/// Largest accepted budget.
pub const MAX_BUDGET: u64 = 64_000;
/// Room left on the wire (tokens) below which a pack is not repacked with
/// a larger code budget.
const GROW_MIN_ROOM: u64 = 24;
/// Most packings of one request (see [`build`]'s search for the code
/// budget whose wire form fills the budget).
const MAX_PACKS: usize = 6;
/// Longest accepted task text, in bytes.
pub const MAX_TASK_BYTES: usize = 32_768;

/// How candidates are chosen.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Strategy {
    /// The evidence pack's ranking (BM25 over names, paths and text, definitions first).
    Keyword,
    /// Embedding similarity between the task and each unit (needs a model).
    Semantic,
    /// The focus symbols' neighbourhood in the code graph: callers, callees, types used.
    Graph,
    /// Git history of the focus code: files changed together with it.
    History,
    /// Design notes, ADRs, docs sections and code comments that mention the
    /// focus or the task's terms.
    Decisions,
    /// Every strategy, merged by weighted reciprocal rank and deduplicated (default).
    #[default]
    Fused,
}

impl Strategy {
    /// The strategies that produce candidates (all but `fused`).
    pub const SOURCES: [Strategy; 5] = [
        Strategy::Keyword,
        Strategy::Semantic,
        Strategy::Graph,
        Strategy::History,
        Strategy::Decisions,
    ];

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Strategy::Keyword => "keyword",
            Strategy::Semantic => "semantic",
            Strategy::Graph => "graph",
            Strategy::History => "history",
            Strategy::Decisions => "decisions",
            Strategy::Fused => "fused",
        }
    }

    /// The strategy with this wire name.
    pub fn from_name(name: &str) -> Option<Strategy> {
        Strategy::SOURCES
            .into_iter()
            .chain([Strategy::Fused])
            .find(|s| s.as_str() == name)
    }

    /// Weight in the fused ranking. The keyword ranking is the best single
    /// signal on the dev eval (`bench/eval/README.md`, "Context packs"):
    /// with the others weighted 0.4-0.8 the fused pack held a gold function
    /// body for 0.44 of instances at 2,000 tokens against 0.61 for keyword
    /// alone. At these weights (the best of five settings measured) the
    /// graph neighbourhood adds what keyword misses (0.68 vs 0.66 at 4,000
    /// tokens, 0.75 vs 0.73 at 8,000) without displacing its top.
    pub(crate) fn fusion_weight(self) -> f64 {
        match self {
            Strategy::Keyword => 1.0,
            Strategy::Graph => 0.5,
            Strategy::Semantic => 0.2,
            Strategy::History => 0.1,
            Strategy::Decisions => 0.1,
            Strategy::Fused => 0.0,
        }
    }
}

/// How much of a unit a fragment shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Detail {
    /// Name, kind and location only.
    Outline,
    /// The declaration and its docstring; for a class, module or file, a
    /// skeleton: its own declaration and its members' signatures.
    Signature,
    /// The whole text.
    Full,
}

/// `canopy_context` parameters.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ContextParams {
    /// What the agent is about to do, in its own words (an issue text is fine).
    pub task: String,
    /// Code to centre on: `Type.method`, `Type::method`, `pkg.Name`, a path,
    /// or `path:line[:col]` (the graph's target rule).
    pub focus: Option<String>,
    /// Most tokens the fragments' text may add up to (default 4,000).
    pub budget_tokens: Option<u64>,
    /// Which strategy chooses candidates (default `fused`).
    pub strategy: Option<Strategy>,
}

impl ContextParams {
    /// The effective budget.
    pub fn budget(&self) -> u64 {
        self.budget_tokens.unwrap_or(DEFAULT_BUDGET)
    }

    /// Rejects what cannot be answered, with the reason.
    pub fn validate(&self) -> Result<()> {
        if self.task.trim().is_empty() && self.focus.as_deref().is_none_or(|f| f.trim().is_empty())
        {
            return Err(CanopyError::Validation(
                "give a `task` (what you are about to do) or a `focus` (what to centre on)".into(),
            ));
        }
        if self.task.len() > MAX_TASK_BYTES {
            return Err(CanopyError::Validation(format!(
                "`task` is {} bytes; the most is {MAX_TASK_BYTES}",
                self.task.len()
            )));
        }
        let budget = self.budget();
        if !(MIN_BUDGET..=MAX_BUDGET).contains(&budget) {
            return Err(CanopyError::Validation(format!(
                "`budget_tokens` must be between {MIN_BUDGET} and {MAX_BUDGET}, not {budget}"
            )));
        }
        Ok(())
    }
}

/// One piece of a context pack.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Fragment {
    /// Handle of the unit (expand it for the exact span).
    pub handle: HandleId,
    /// Repo-relative path.
    pub file_path: String,
    /// `function`, `class`, `section`, … or `comment`: a comment block in
    /// code (the `decisions` strategy); its handle is the unit around it.
    pub node_type: String,
    /// Qualified name, for named units.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// 1-based inclusive lines of the unit (of the block, for a `comment`).
    pub line_range: [u32; 2],
    /// How much of the unit `text` shows.
    pub detail: Detail,
    /// The strategy that ranked it highest.
    pub strategy: Strategy,
    /// Why it is here, in a few words.
    pub reason: String,
    /// Relevance, 0..1 relative to the best candidate.
    pub score: f64,
    /// Tokens of `text`.
    pub tokens: u32,
    /// The text at `detail`.
    pub text: String,
    /// The file changed on disk since it was indexed: only the outline is
    /// given (the indexed text is gone); re-index before expanding.
    #[serde(skip_serializing_if = "std::ops::Not::not", default)]
    pub stale: bool,
}

/// What one strategy contributed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StrategyReport {
    /// The strategy.
    pub strategy: Strategy,
    /// `used`, `empty` (ran, found nothing) or `skipped` (could not run; see `note`).
    pub status: String,
    /// Candidates it proposed.
    pub candidates: usize,
    /// Fragments in the pack it chose.
    pub fragments: usize,
    /// Why it was skipped or empty, when it was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// How the `focus` string resolved.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FocusReport {
    /// The units it resolved to (several when it was ambiguous).
    pub resolved: Vec<Handle>,
    /// `one`, `ambiguous`, `not_found` or `inferred` (no focus given: the
    /// task's best-ranked definitions stand in for it).
    pub status: String,
}

/// A context pack.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ContextPack {
    /// The budget asked for.
    pub budget_tokens: u64,
    /// Sum of the fragments' `tokens` (never above the budget).
    pub total_tokens: u64,
    /// Tokens of the pack as an agent receives it ([`wire`]: a JSON header
    /// and each fragment as plain text under a provenance line); never
    /// above the budget.
    #[serde(default)]
    pub wire_tokens: u64,
    /// The fragments, best first.
    pub fragments: Vec<Fragment>,
    /// The strategy asked for.
    pub strategy: Strategy,
    /// What each strategy contributed.
    pub strategies: Vec<StrategyReport>,
    /// How the focus resolved.
    pub focus: FocusReport,
    /// Candidates considered after merging.
    pub candidates: usize,
    /// Fragments shown at less than full detail to fit the budget.
    pub degraded: usize,
    /// Fragments dropped for the budget (instead of falling to an outline).
    pub dropped: usize,
    /// Candidates not packed: past the number the budget admits (one per
    /// 120 tokens), or their text is already inside another fragment.
    pub left_out: usize,
    /// Share of the repository's files indexed; present only while the index is partial.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub index_coverage: Option<f64>,
    /// Index generation, time, and the pack's files changed on disk.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub freshness: Option<crate::model::Freshness>,
}

/// Semantic candidates computed by the caller (the engine owns the model).
#[derive(Clone, Debug, Default)]
pub struct SemanticInput {
    /// Units by similarity to the task, best first: (row id, cosine).
    pub hits: Vec<(i64, f32)>,
    /// Why semantic retrieval did not run, when it did not.
    pub skipped: Option<String>,
}

/// Builds a context pack over one read snapshot.
/// The text the semantic strategy embeds: the task's summary line when it
/// has one ([`crate::pack::summary_line`]: an issue's title above its
/// report), else the whole task; then the focus. A static model averages
/// its tokens, so a long report full of code and logs blurs toward the
/// average of the language while its title keeps its meaning: on 160 dev
/// instances the semantic strategy alone put a gold file in 0.675 of
/// 4,000-token packs from the title against 0.306 from the whole text
/// (`bench/eval/README.md`). The environment variable
/// `CANOPY_SEMANTIC_QUERY=task` embeds the whole task, to measure the
/// difference; it is a measuring knob, not an interface.
pub(crate) fn semantic_query(task: &str, focus: Option<&str>) -> String {
    let whole = std::env::var("CANOPY_SEMANTIC_QUERY").as_deref() == Ok("task");
    let task = crate::pack::clean_question(task);
    let mut text = match crate::pack::summary_line(&task) {
        Some(summary) if !whole => summary.to_string(),
        _ => task,
    };
    if let Some(f) = focus {
        text.push(' ');
        text.push_str(f);
    }
    text
}

/// Builds a context pack over one read snapshot; `finish` adds what the
/// caller knows (freshness, coverage) before the pack is measured, so the
/// budget bounds the wire form ([`wire`]) of the pack as it is returned.
/// `semantic` gives the semantic candidates, called at most once, after
/// the strategies that need no vectors (the caller may be computing them
/// in a thread of its own meanwhile).
pub fn build(
    snapshot: Snapshot<'_>,
    params: &ContextParams,
    semantic: &mut dyn FnMut() -> Result<SemanticInput>,
    history: &history::HistoryLog,
    finish: &dyn Fn(&mut ContextPack) -> Result<()>,
) -> Result<ContextPack> {
    params.validate()?;
    let strategy = params.strategy.unwrap_or_default();
    let budget = params.budget();
    let t = crate::timing::mark();
    let mut gathered = strategies::gather(snapshot, params, strategy, semantic, history)?;
    let mut merged = strategies::fuse(&mut gathered.lists, strategy);
    strategies::pin(&mut merged, std::mem::take(&mut gathered.pinned));
    let t = crate::timing::phase("build.gather_fuse", t);
    let candidates = merged.len();
    // Every packing below measures the same candidates: each text is
    // counted once, each file read and hash-checked once, each unit looked up once.
    let counts = wire::Counts::default();
    let mut reads = budget::Reads::default();
    let assemble = |packed: budget::Packed| -> Result<ContextPack> {
        let mut reports = gathered.reports.clone();
        for r in &mut reports {
            r.fragments = packed
                .fragments
                .iter()
                .filter(|f| f.strategy == r.strategy)
                .count();
        }
        let mut pack = ContextPack {
            budget_tokens: budget,
            total_tokens: packed.fragments.iter().map(|f| u64::from(f.tokens)).sum(),
            wire_tokens: 0,
            degraded: packed.degraded,
            dropped: packed.dropped,
            left_out: candidates.saturating_sub(packed.fragments.len() + packed.dropped),
            fragments: packed.fragments,
            strategy,
            strategies: reports,
            focus: gathered.focus.clone(),
            candidates,
            index_coverage: None,
            freshness: None,
        };
        finish(&mut pack)?;
        Ok(pack)
    };
    // The header's cost, measured on the pack with no fragments; each
    // fragment's provenance line is reserved by the packer.
    let empty = assemble(budget::Packed::default())?;
    let mut code_budget = budget.saturating_sub(wire::tokens_with(&empty, &counts));
    let mut pack = empty;
    // The exact wire total differs from the reserve: a few tokens more
    // (merged reasons, freshness over more files), or less, as the packer
    // reserves each file's path on every fragment and the wire writes it
    // once per file. Repack with the code budget moved by the difference,
    // then halve the interval between the largest code budget that fit and
    // the smallest that did not; keep the fitting pack with the most code.
    let mut fits: Option<(u64, ContextPack)> = None;
    let mut over: Option<u64> = None;
    for _ in 0..MAX_PACKS {
        let next = assemble(budget::pack(
            snapshot,
            merged.clone(),
            code_budget,
            &counts,
            &mut reads,
        )?)?;
        let wire_tokens = wire::tokens_with(&next, &counts);
        let tried = code_budget;
        if wire_tokens > budget {
            over = Some(over.map_or(tried, |o| o.min(tried)));
            pack = next;
        } else {
            let better = fits
                .as_ref()
                .is_none_or(|(_, f)| next.total_tokens > f.total_tokens);
            if budget - wire_tokens < GROW_MIN_ROOM && better {
                fits = Some((tried, next));
                break;
            }
            if !better {
                // More room changed nothing: the candidates ran out.
                break;
            }
            fits = Some((tried, next));
        }
        let low = fits.as_ref().map(|(b, _)| *b);
        code_budget = match (low, over) {
            (None, Some(_)) => tried.saturating_sub(wire_tokens - budget + 8),
            (Some(l), None) => l + (budget - wire_tokens),
            (Some(l), Some(o)) if o > l + GROW_MIN_ROOM => l + (o - l) / 2,
            _ => break,
        };
    }
    if let Some((_, p)) = fits {
        pack = p;
    }
    // Last resort: the lowest-ranked fragments go until it fits.
    while wire::tokens_with(&pack, &counts) > budget && pack.fragments.pop().is_some() {
        pack.dropped += 1;
        pack.total_tokens = pack.fragments.iter().map(|f| u64::from(f.tokens)).sum();
        for r in &mut pack.strategies {
            r.fragments = pack
                .fragments
                .iter()
                .filter(|f| f.strategy == r.strategy)
                .count();
        }
    }
    pack.wire_tokens = wire::tokens_with(&pack, &counts);
    crate::timing::phase("build.pack", t);
    Ok(pack)
}
