//! The candidate strategies of a context pack, and their fusion.
//!
//! Each strategy returns its own ranked list of units with a reason per
//! unit; [`fuse`] merges the lists by weighted reciprocal rank (robust to score
//! scales that differ per strategy), keeping
//! for each unit the reason of the strategy that ranked it highest.

use std::collections::{HashMap, HashSet};

use crate::context::history::{GitRead, HistoryLog};
use crate::context::{
    Candidate, ContextParams, FocusReport, SemanticInput, Strategy, StrategyReport,
};
use crate::error::Result;
use crate::graph::nav::{Graph, TargetMatch};
use crate::lang::SiteKind;
use crate::pack::{PackParams, code_identifiers, rank_order};
use crate::path_class::is_test_path;
use crate::query::QueryParams;
use crate::snapshot::Snapshot;
use crate::store::read::NodeRecord;
use crate::text::{query_terms, split_identifier};

/// Candidates one strategy proposes at most.
const PER_STRATEGY: usize = 40;
/// Focus units inferred from the keyword ranking when no focus is given.
const INFERRED_FOCUS: usize = 3;
/// Reciprocal-rank constant. Smaller than the usual 60: lists here are
/// short (≤ 40), and with 60 the strategy weights alone decided the order,
/// so a second strategy's runner-up fell below the first's twentieth.
const RRF_K: f64 = 10.0;
/// Commits of history read per focus file.
const HISTORY_COMMITS: usize = 50;
/// Globs of documentation files (the `decisions` strategy).
const DOC_GLOB: &str = "**/*.{md,markdown,rst,txt,adoc}";

/// A unit after fusion.
#[derive(Clone, Debug)]
pub(crate) struct Merged {
    pub(crate) node: NodeRecord,
    pub(crate) strategy: Strategy,
    pub(crate) reason: String,
    /// 0..1, relative to the best.
    pub(crate) score: f64,
}

/// Every strategy's list, with reports and the focus.
pub(crate) struct Gathered {
    pub(crate) lists: Vec<(Strategy, Vec<Candidate>)>,
    pub(crate) reports: Vec<StrategyReport>,
    pub(crate) focus: FocusReport,
    /// An explicit focus's definitions, then its nearest neighbours in the
    /// graph: first in the pack whatever the strategy ([`pin`]).
    pub(crate) pinned: Vec<Candidate>,
}

fn report(strategy: Strategy, candidates: usize, note: Option<String>) -> StrategyReport {
    let status = match (&note, candidates) {
        (_, n) if n > 0 => "used",
        (Some(_), 0) => "skipped",
        _ => "empty",
    };
    StrategyReport {
        strategy,
        status: status.into(),
        candidates,
        fragments: 0,
        note,
    }
}

/// Whether a unit is a definition worth centring on.
fn is_definition(n: &NodeRecord) -> bool {
    n.name.is_some()
        && !matches!(
            n.node_type.as_str(),
            "file" | "chunk" | "section" | "paragraph" | "code_block"
        )
}

/// Runs the strategies `strategy` asks for. History's questions to git
/// (processes: the diffs of a focus seen the first time are most of its
/// cost) run in a thread of their own beside the rankings, as soon as the
/// focus is known; each strategy's list is the same either way. Semantic
/// candidates are asked of `semantic` last (the caller may be searching
/// the vectors meanwhile), and keep their place among the lists.
pub(crate) fn gather(
    snapshot: Snapshot<'_>,
    params: &ContextParams,
    strategy: Strategy,
    semantic: &mut dyn FnMut() -> Result<SemanticInput>,
    history: &HistoryLog,
) -> Result<Gathered> {
    let t = crate::timing::mark();
    let store = snapshot.store();
    let wants = |s: Strategy| strategy == Strategy::Fused || strategy == s;
    let task = crate::pack::clean_question(&params.task);
    let mut lists = Vec::new();
    let mut reports = Vec::new();

    // The keyword ranking runs whenever a strategy needs a focus inferred
    // from it, and then before the focus is resolved.
    let needs_keyword = wants(Strategy::Keyword)
        || (params.focus.is_none()
            && (wants(Strategy::Graph) || wants(Strategy::History) || wants(Strategy::Decisions)));
    let rank_task = || -> Result<Vec<Candidate>> {
        if needs_keyword && !task.trim().is_empty() {
            keyword_candidates(snapshot, &task)
        } else {
            Ok(Vec::new())
        }
    };
    let named = params
        .focus
        .as_deref()
        .is_some_and(|f| !f.trim().is_empty());
    let early = if named { None } else { Some(rank_task()?) };
    let t = crate::timing::phase("gather.keyword_early", t);

    let graph = Graph::new(store, snapshot.root());
    // A named focus resolves without the ranking.
    let (focus_nodes, focus) = resolve_focus(
        &graph,
        params.focus.as_deref(),
        early.as_deref().unwrap_or(&[]),
    )?;
    let generation = store.generation()?;
    let t = crate::timing::phase("gather.focus", t);
    std::thread::scope(|scope| {
        let git = (wants(Strategy::History) && !focus_nodes.is_empty()).then(|| {
            let (root, nodes) = (snapshot.root(), &focus_nodes);
            let read = move || history.read_git(root, nodes, generation, HISTORY_COMMITS);
            match std::thread::Builder::new()
                .name("canopy-history".into())
                .spawn_scoped(scope, read)
            {
                Ok(thread) => GitReading::Thread(thread),
                Err(_) => GitReading::Here,
            }
        });
        let keyword = match early {
            Some(k) => k,
            None => rank_task()?,
        };
        let t = crate::timing::phase("gather.keyword", t);
        if wants(Strategy::Keyword) {
            let note = task
                .trim()
                .is_empty()
                .then(|| "no task text to rank by".to_string());
            reports.push(report(Strategy::Keyword, keyword.len(), note));
            lists.push((Strategy::Keyword, keyword));
        }
        // Semantic's place among the lists: its candidates are asked for
        // last (the caller may be computing them beside these rankings).
        let semantic_at = wants(Strategy::Semantic).then_some(lists.len());
        let explicit = params.focus.is_some() && !focus_nodes.is_empty();
        let mut pinned = Vec::new();
        if wants(Strategy::Graph) || explicit {
            let (list, note) = graph_candidates(&graph, &focus_nodes)?;
            if explicit {
                pinned = list
                    .iter()
                    .take(focus_nodes.len() + PINNED_NEIGHBOURS)
                    .cloned()
                    .collect();
            }
            if wants(Strategy::Graph) {
                reports.push(report(Strategy::Graph, list.len(), note));
                lists.push((Strategy::Graph, list));
            }
        }
        let t = crate::timing::phase("gather.graph", t);
        let decisions = if wants(Strategy::Decisions) {
            Some(decision_candidates(snapshot, &task, &focus_nodes)?)
        } else {
            None
        };
        let t = crate::timing::phase("gather.decisions", t);
        if wants(Strategy::History) {
            let read = git.map(|g| g.finish(history, snapshot.root(), &focus_nodes, generation));
            let t = crate::timing::phase("gather.history_wait", t);
            let (list, note) = history_candidates(snapshot, &focus_nodes, history, read)?;
            crate::timing::phase("gather.history", t);
            reports.push(report(Strategy::History, list.len(), note));
            lists.push((Strategy::History, list));
        }
        if let Some(list) = decisions {
            reports.push(report(Strategy::Decisions, list.len(), None));
            lists.push((Strategy::Decisions, list));
        }
        if let Some(at) = semantic_at {
            let semantic = semantic()?;
            let list = semantic_candidates(snapshot, &semantic)?;
            reports.insert(at, report(Strategy::Semantic, list.len(), semantic.skipped));
            lists.insert(at, (Strategy::Semantic, list));
        }
        Ok(Gathered {
            lists,
            reports,
            focus,
            pinned,
        })
    })
}

/// Where history's questions to git are being asked.
enum GitReading<'scope> {
    /// In a thread of their own, beside the rankings.
    Thread(std::thread::ScopedJoinHandle<'scope, GitRead>),
    /// No thread could start: asked when history's turn comes.
    Here,
}

impl GitReading<'_> {
    /// What git answered: the thread's reading, or, where no thread could
    /// start, the same questions asked now.
    fn finish(
        self,
        history: &HistoryLog,
        root: &std::path::Path,
        focus_nodes: &[NodeRecord],
        generation: u64,
    ) -> GitRead {
        match self {
            GitReading::Thread(thread) => thread.join().unwrap_or_else(|_| GitRead {
                commits: Err("history could not be read".into()),
                diffs: None,
                head_time: None,
            }),
            GitReading::Here => history.read_git(root, focus_nodes, generation, HISTORY_COMMITS),
        }
    }
}

/// The semantic hits the caller computed, as candidates.
fn semantic_candidates(snapshot: Snapshot<'_>, semantic: &SemanticInput) -> Result<Vec<Candidate>> {
    let by_row = snapshot
        .store()
        .nodes_by_rowid(&semantic.hits.iter().map(|h| h.0).collect::<Vec<_>>())?;
    Ok(semantic
        .hits
        .iter()
        .filter_map(|(row, sim)| {
            by_row.get(row).map(|n| Candidate {
                node: n.clone(),
                reason: format!("close in meaning to the task (cosine {sim:.2})"),
            })
        })
        .take(PER_STRATEGY)
        .collect())
}

/// The evidence pack's ranking of the task, with a reason per unit.
fn keyword_candidates(snapshot: Snapshot<'_>, task: &str) -> Result<Vec<Candidate>> {
    let params = PackParams {
        query: QueryParams {
            pattern: Some(task.to_string()),
            ..QueryParams::default()
        },
        max_handles: Some(8),
        ..PackParams::default()
    };
    let ranked = crate::pack::ranking(snapshot, &params)?;
    let identifiers: HashSet<String> = code_identifiers(task)
        .into_iter()
        .map(|s| s.to_lowercase())
        .collect();
    let terms: HashSet<String> = query_terms(task).into_iter().collect();
    Ok(ranked
        .into_iter()
        .take(PER_STRATEGY)
        .enumerate()
        .map(|(i, node)| {
            let reason = keyword_reason(&node, &identifiers, &terms, i);
            Candidate { node, reason }
        })
        .collect())
}

fn keyword_reason(
    node: &NodeRecord,
    identifiers: &HashSet<String>,
    terms: &HashSet<String>,
    rank: usize,
) -> String {
    if let Some(name) = &node.name
        && identifiers.contains(&name.to_lowercase())
    {
        // The provenance line names the unit already.
        return "named in the task".to_string();
    }
    let mut words: Vec<String> = node
        .qualified_name
        .iter()
        .flat_map(|q| split_identifier(q))
        .chain(
            node.file_path
                .split(['/', '.', '_', '-'])
                .map(str::to_lowercase),
        )
        .collect();
    words.sort();
    words.dedup();
    let matched: Vec<&String> = words
        .iter()
        .filter(|w| terms.contains(*w))
        .take(3)
        .collect();
    if matched.is_empty() {
        format!("text matches the task (rank {})", rank + 1)
    } else {
        let list: Vec<&str> = matched.iter().map(|w| w.as_str()).collect();
        format!("name or path has task terms {}", list.join(", "))
    }
}

/// Resolves the focus string, or infers a focus from the keyword ranking.
fn resolve_focus(
    graph: &Graph<'_>,
    focus: Option<&str>,
    keyword: &[Candidate],
) -> Result<(Vec<NodeRecord>, FocusReport)> {
    let focus = focus.map(str::trim).filter(|f| !f.is_empty());
    // A file path names the file (the graph's rule reads `a/b.py` as names).
    if let Some(target) = focus
        && let Some(file) = graph.store().file_node(target.trim_start_matches("./"))?
    {
        let report = FocusReport {
            resolved: vec![graph.handle(&file)],
            status: "one".into(),
        };
        return Ok((vec![file], report));
    }
    match focus {
        Some(target) => Ok(match graph.resolve_target(target)? {
            TargetMatch::One(n) => {
                let report = FocusReport {
                    resolved: vec![graph.handle(&n)],
                    status: "one".into(),
                };
                (vec![n], report)
            }
            TargetMatch::Ambiguous(c) => {
                let c: Vec<NodeRecord> = c.into_iter().take(5).collect();
                let report = FocusReport {
                    resolved: c.iter().map(|n| graph.handle(n)).collect(),
                    status: "ambiguous".into(),
                };
                (c, report)
            }
            TargetMatch::NotFound | TargetMatch::NoUnit(_) => (
                Vec::new(),
                FocusReport {
                    resolved: Vec::new(),
                    status: "not_found".into(),
                },
            ),
        }),
        None => {
            let nodes: Vec<NodeRecord> = keyword
                .iter()
                .map(|c| &c.node)
                .filter(|n| is_definition(n) && !is_test_path(&n.file_path))
                .take(INFERRED_FOCUS)
                .cloned()
                .collect();
            let report = FocusReport {
                resolved: nodes.iter().map(|n| graph.handle(n)).collect(),
                status: "inferred".into(),
            };
            Ok((nodes, report))
        }
    }
}

fn display_name(n: &NodeRecord) -> String {
    n.qualified_name
        .clone()
        .or_else(|| n.name.clone())
        .unwrap_or_else(|| n.file_path.clone())
}

/// The focus units and their neighbourhood: callers, callees and type uses, one hop.
fn graph_candidates(
    graph: &Graph<'_>,
    focus: &[NodeRecord],
) -> Result<(Vec<Candidate>, Option<String>)> {
    if focus.is_empty() {
        return Ok((
            Vec::new(),
            Some("no focus: name one, or give a task that names code".into()),
        ));
    }
    let mut out: Vec<Candidate> = Vec::new();
    let mut seen = HashSet::new();
    let mut push = |node: NodeRecord, reason: String, out: &mut Vec<Candidate>| {
        if seen.insert(node.rowid) {
            out.push(Candidate { node, reason });
        }
    };
    for f in focus {
        push(
            f.clone(),
            format!("the focus `{}`", display_name(f)),
            &mut out,
        );
    }
    for f in focus {
        if !is_definition(f) {
            continue;
        }
        // The unit the graph's target rule finds at the focus's name line
        // (the focus itself but in rare layouts), resolved once for the
        // three questions below.
        let target = format!("{}:{}", f.file_path, graph.name_line(f));
        let TargetMatch::One(unit) = graph.resolve_target(&target)? else {
            continue;
        };
        let name = display_name(f);
        let per_focus = (PER_STRATEGY / focus.len()).max(4);
        for (incoming, kind, max, reason) in [
            (
                true,
                SiteKind::Call,
                per_focus,
                format!("calls the focus `{name}`"),
            ),
            (
                false,
                SiteKind::Call,
                per_focus,
                format!("called by the focus `{name}`"),
            ),
            (
                true,
                SiteKind::Type,
                per_focus / 2,
                format!("uses the focus type `{name}`"),
            ),
        ] {
            for n in graph.neighbours(&unit, incoming, &[kind], max)? {
                push(n, reason.clone(), &mut out);
            }
        }
    }
    out.truncate(PER_STRATEGY);
    Ok((out, None))
}

/// Units (functions, classes; the file for code outside them) changed in
/// the same commits as the focus code, most often and most recently first
/// ([`crate::context::cochange`]).
fn history_candidates(
    snapshot: Snapshot<'_>,
    focus: &[NodeRecord],
    history: &HistoryLog,
    read: Option<GitRead>,
) -> Result<(Vec<Candidate>, Option<String>)> {
    let Some(read) = read.filter(|_| !focus.is_empty()) else {
        return Ok((Vec::new(), Some("no focus code to follow".into())));
    };
    let commits = match read.commits {
        Ok(c) => c,
        Err(note) => return Ok((Vec::new(), Some(note))),
    };
    if commits.is_empty() {
        return Ok((Vec::new(), Some("no commit touches the focus files".into())));
    }
    let store = snapshot.store();
    // `partial`: the bound on the diffs read left older commits out.
    let (found, partial) =
        match history.co_changed(store, snapshot.root(), focus, &commits, read.diffs)? {
            Ok(found) => found,
            Err(note) => return Ok((Vec::new(), Some(note))),
        };
    // Counted from the checked-out commit, not the clock (the newest commit
    // read stands in if HEAD's time cannot be read).
    let now = read
        .head_time
        .unwrap_or_else(|| commits.iter().map(|c| c.time).max().unwrap_or(0));
    let top: Vec<_> = found.iter().take(PER_STRATEGY / 2).collect();
    let nodes = store.nodes_by_rowid(&top.iter().map(|c| c.rowid).collect::<Vec<_>>())?;
    let mut out = Vec::new();
    for c in top {
        let Some(node) = nodes.get(&c.rowid) else {
            continue;
        };
        let days = ((now - c.time).max(0) / 86_400) as u64;
        let when = match days {
            0 => "today".to_string(),
            1 => "1 day ago".to_string(),
            d => format!("{d} days ago"),
        };
        let with = if c.with_unit { "code" } else { "file" };
        let subject: String = c.subject.chars().take(60).collect();
        out.push(Candidate {
            node: node.clone(),
            reason: format!(
                "changed with the focus {with} {}× (last {when}: \"{subject}\")",
                c.times
            ),
        });
    }
    Ok((out, partial))
}

/// Documentation sections and code comments that mention the focus names
/// or the task's terms.
fn decision_candidates(
    snapshot: Snapshot<'_>,
    task: &str,
    focus: &[NodeRecord],
) -> Result<Vec<Candidate>> {
    let names: Vec<String> = focus.iter().filter_map(|n| n.name.clone()).collect();
    let mut question = task.to_string();
    for n in &names {
        question.push_str(&format!(" `{n}`"));
    }
    if question.trim().is_empty() {
        return Ok(Vec::new());
    }
    let params = PackParams {
        query: QueryParams {
            pattern: Some(question),
            glob: Some(DOC_GLOB.into()),
            ..QueryParams::default()
        },
        max_handles: Some(8),
        ..PackParams::default()
    };
    let ranked = crate::pack::ranking(snapshot, &params)?;
    let names_lower: Vec<String> = names.iter().map(|n| n.to_lowercase()).collect();
    let mut out = Vec::new();
    for node in ranked.into_iter().take(PER_STRATEGY / 4) {
        // The file unit of a document is too coarse; its sections say more.
        if node.node_type == "file" && node.end_line > 40 {
            continue;
        }
        let path = node.file_path.to_lowercase();
        let kind = if path.contains("adr") || path.contains("decision") {
            "design decision"
        } else if path.contains("architecture") || path.contains("design") {
            "design note"
        } else {
            "docs section"
        };
        let heading = node.name.clone().unwrap_or_default().to_lowercase();
        let reason = match names_lower.iter().find(|n| heading.contains(n.as_str())) {
            Some(n) => format!("{kind} about `{n}`"),
            None => format!("{kind} matching the task's terms"),
        };
        out.push(Candidate { node, reason });
    }
    // Comments in code next: a comment about the focus first, then the
    // documents, then comments that only share the task's terms.
    let (about_focus, on_terms) =
        crate::context::comments::comment_candidates(snapshot, task, focus)?;
    Ok(about_focus.into_iter().chain(out).chain(on_terms).collect())
}

/// Merges the strategies' lists. A single strategy keeps its own order;
/// `fused` sums weighted reciprocal ranks, so every mode's candidates
/// compete for the budget by rank and weight (lifting each mode's best near
/// the top is kept behind the measuring knob: it changed nothing measured).
/// Graph neighbours of an explicit focus pinned right after it.
const PINNED_NEIGHBOURS: usize = 4;

/// Puts `pinned` (an explicit focus, then its callers, callees and types
/// used, in the graph's order) first, whatever ranked them: a focus the
/// agent named is what it is about to read, even when its name shares no
/// word with the task. They get the top scores (so the packer degrades
/// them last), the rest keep their order just below.
pub(crate) fn pin(merged: &mut Vec<Merged>, pinned: Vec<Candidate>) {
    if pinned.is_empty() {
        return;
    }
    let rows: HashSet<i64> = pinned.iter().map(|c| c.node.rowid).collect();
    let ranked: HashMap<i64, f64> = merged.iter().map(|m| (m.node.rowid, m.score)).collect();
    let mut rest: Vec<Merged> = merged
        .drain(..)
        .filter(|m| !rows.contains(&m.node.rowid))
        .collect();
    for m in &mut rest {
        m.score = (m.score * 0.99 * 1000.0).round() / 1000.0;
    }
    for (i, c) in pinned.into_iter().enumerate() {
        // A container (a class, a file) comes first too, but keeps the value
        // it ranked at: its skeleton must never keep detail its matched
        // methods lose.
        let score = if is_container(&c.node.node_type) {
            ranked.get(&c.node.rowid).map_or(0.5, |s| s * 0.99)
        } else {
            1.0 - 0.001 * i as f64
        };
        merged.push(Merged {
            node: c.node,
            strategy: Strategy::Graph,
            reason: c.reason,
            score,
        });
    }
    merged.append(&mut rest);
}

/// Units shown as a skeleton of their members at signature detail.
fn is_container(node_type: &str) -> bool {
    matches!(
        node_type,
        "file" | "module" | "class" | "struct" | "enum" | "trait" | "interface" | "impl"
    )
}

pub(crate) fn fuse(lists: &mut [(Strategy, Vec<Candidate>)], strategy: Strategy) -> Vec<Merged> {
    let tuning = tuning();
    let mut by_row: HashMap<i64, (f64, Strategy, f64, Candidate)> = HashMap::new();
    for (s, list) in lists.iter_mut() {
        let weight = if strategy == Strategy::Fused {
            tuning.weight(*s)
        } else {
            1.0
        };
        for (rank, c) in list.drain(..).enumerate() {
            let contribution = weight / (RRF_K + rank as f64 + 1.0);
            let e = by_row
                .entry(c.node.rowid)
                .or_insert((0.0, *s, 0.0, c.clone()));
            e.0 += contribution;
            if contribution > e.2 {
                e.1 = *s;
                e.2 = contribution;
                e.3 = c;
            }
        }
    }
    let mut merged: Vec<Merged> = by_row
        .into_values()
        .map(|(score, strategy, _, c)| Merged {
            node: c.node,
            strategy,
            reason: c.reason,
            score,
        })
        .collect();
    merged.sort_by(|a, b| rank_order((a.score, &a.node), (b.score, &b.node)));
    if strategy == Strategy::Fused && tuning.lift_firsts {
        // Each strategy's best candidate moves up to within the first few.
        let mut firsts: Vec<usize> = Vec::new();
        let mut seen_strategies = HashSet::new();
        for (i, m) in merged.iter().enumerate() {
            if seen_strategies.insert(m.strategy) {
                firsts.push(i);
            }
        }
        for (slot, i) in firsts.into_iter().enumerate() {
            let target = slot * 2;
            if i > target {
                let m = merged.remove(i);
                merged.insert(target, m);
            }
        }
    }
    let top = merged
        .iter()
        .map(|m| m.score)
        .fold(0.0, f64::max)
        .max(1e-12);
    for m in &mut merged {
        m.score = (m.score / top * 1000.0).round() / 1000.0;
    }
    merged
}

/// Fusion settings: the weights of [`Strategy::fusion_weight`] and whether
/// each strategy's best candidate is lifted near the top. The evaluation
/// (`bench/eval/context_eval.py --variant`) overrides them with the
/// environment variable `CANOPY_CONTEXT_FUSION` (`keyword=1,semantic=0.5,…,lift=0`)
/// to compare settings on one index; it is a measuring knob, not an interface.
#[derive(Clone, Debug)]
struct Tuning {
    weights: HashMap<Strategy, f64>,
    lift_firsts: bool,
}

impl Tuning {
    fn weight(&self, s: Strategy) -> f64 {
        self.weights
            .get(&s)
            .copied()
            .unwrap_or_else(|| s.fusion_weight())
    }
}

fn tuning() -> Tuning {
    let mut t = Tuning {
        weights: HashMap::new(),
        // Off: lifting each strategy's best near the top changed no
        // measured share (dev eval, `kwdom` vs `kwdomlift`).
        lift_firsts: false,
    };
    for (k, v) in crate::knobs::measuring_knobs("CANOPY_CONTEXT_FUSION") {
        match (k.as_str(), Strategy::from_name(&k)) {
            ("lift", _) => t.lift_firsts = v != 0.0,
            (_, Some(s)) => {
                t.weights.insert(s, v);
            }
            _ => {}
        }
    }
    t
}
