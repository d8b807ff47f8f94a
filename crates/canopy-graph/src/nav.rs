//! Navigation over resolved edges: targets as strings, definition,
//! references, callers and callees with depth, shortest call path, and a
//! whole-graph export.
//!
//! [`Graph`] reads through a store snapshot (`&Store`, one read
//! transaction held by the caller) and the repository root (for previews);
//! it never sees `Engine`. Every answer is bounded and says which kind of
//! empty it is ([`Empty`]).
//!
//! Target rule ([`Graph::resolve_target`]): `file:line[:col]` (read by
//! [`crate::position`]) is the definition whose name or signature
//! line holds the position, else the definition the site at the column
//! resolves to, else the innermost unit there (see `at_position`); otherwise the string is
//! split on `.` / `::` / `/` into a name and its qualifiers, and candidates
//! are units with that name whose qualified name or path ends with the
//! qualifiers; the path may keep its extension (`src/parser.rs:Parser.parse`
//! and `src/parser.Parser.parse` are the same target). Exact qualified
//! matches beat suffix matches, definitions beat other units (modules, constants), exported (non-`_`, capitalised in
//! Go) beat private. Several left after that: the answer is `ambiguous`
//! and lists them. A Rust path that matches nothing that way
//! (`tokio::spawn`) is followed from the library crate it names through
//! modules and `pub use` re-exports, as a `use` of it would be.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::error::{CanopyError, Result};
use crate::handle::Handle;
use crate::handle::HandleId;
use crate::lang::SiteKind;
use crate::lang::extract::{preview_text, text_view};
use crate::position::Position;
use crate::resolve;
use crate::store::Store;
use crate::store::graph::{STATUS_AMBIGUOUS, STATUS_UNRESOLVED, StoredEdge};
use crate::store::graph_rows::How;
use crate::store::read::NodeRecord;

/// Default traversal depth, and the most a caller may ask for.
pub const DEFAULT_DEPTH: u32 = 1;
/// Hard cap on depth.
pub const MAX_DEPTH: u32 = 10;
/// Default and hard cap on nodes in one answer.
pub const DEFAULT_MAX_RESULTS: usize = 50;
/// Hard cap on `max_results` for agents (MCP, HTTP): an answer an agent
/// reads whole must stay a size it can read.
pub const MAX_RESULTS: usize = 500;
/// Hard cap on `max_results` for a caller that asked for every result
/// (the local CLI, whose `--json` feeds scripts and evaluations: a test
/// helper with 757 callers must be listed whole when `--max-results`
/// says so). See [`Graph::run_within`].
pub const SCRIPT_MAX_RESULTS: usize = 100_000;
/// Most sites listed in one answer, over all its nodes.
pub const MAX_SITES: usize = 20_000;

/// Which kind of empty an answer is (absent when it is not empty).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Empty {
    /// The target string matched no unit.
    TargetNotFound,
    /// Resolution found no edges of this kind.
    Resolved,
    /// Nothing resolved, but `count` sites with the target's name could not be resolved.
    Unresolved {
        /// How many.
        count: u64,
        /// The name.
        name: String,
    },
}

/// One node of an answer: a handle plus how it was reached. A unit
/// reached from one parent by edges of different kinds (resolved and
/// ambiguous, guessed and not) is one node per kind, each with its own
/// sites, so that no site is shown with another edge's status.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GraphNode {
    /// The unit.
    pub handle: Handle,
    /// Its qualified name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub qualified_name: Option<String>,
    /// Hops from the target (1 = direct).
    pub depth: u32,
    /// `call`, `import`, `type` or `other`.
    pub edge_kind: String,
    /// 0..=100 (the weakest edge on the way).
    pub confidence: u8,
    /// `resolved` or `ambiguous`.
    pub status: String,
    /// How the edge was resolved (`scope`, `import`, `receiver`, `inferred`,
    /// `inherited`, `base`; `unique_name` is a guess, see `guess`).
    pub how: String,
    /// The edge is a guess: the receiver's type was unknown and the only
    /// definition of the name in the repository was taken (`how:
    /// unique_name`, confidence 50). Absent when false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub guess: bool,
    /// Sites (`path:line:col`) of the edges into this node: all of them,
    /// unless the answer's site budget ([`MAX_SITES`]) ran out (then the
    /// answer is `truncated`).
    pub sites: Vec<String>,
    /// How many sites there are, listed or not.
    #[serde(default)]
    pub sites_total: usize,
    /// The node it was reached from (the target for depth 1), for drawing the graph.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent: Option<HandleId>,
}

/// An unresolved site: where, and the name it calls.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnresolvedSite {
    /// The name called.
    pub name: String,
    /// Repo-relative path.
    pub file_path: String,
    /// 1-based line.
    pub line: u32,
    /// Handle of the unit containing the site.
    pub source_handle: HandleId,
}

/// The answer of a navigation operation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GraphAnswer {
    /// The operation.
    pub op: String,
    /// The resolved target, when there was exactly one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<Handle>,
    /// When the target string matched several units: all of them, and no answer.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub candidates: Vec<Handle>,
    /// The nodes found.
    pub nodes: Vec<GraphNode>,
    /// `impact` only: nodes that need review (transitive, ambiguous or guessed).
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub review: Vec<GraphNode>,
    /// Sites that could not be resolved (for callers: sites calling the target's name; for callees: the target's unresolved calls).
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub unresolved: Vec<UnresolvedSite>,
    /// Total unresolved sites (before the cap).
    pub unresolved_count: u64,
    /// Nodes before the cap; in traversals, units (a unit listed once per
    /// kind of edge counts once, as in `offset` and `max_results`).
    pub total: usize,
    /// Whether `max_results` or the depth cut the answer.
    pub truncated: bool,
    /// Nodes skipped before the first listed (the request's `offset`);
    /// absent when 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub offset: usize,
    /// The `offset` that lists the next page, when `max_results` left
    /// nodes out (callers, callees, references, type_usages).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_offset: Option<usize>,
    /// Which kind of empty, when `nodes` is empty.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub empty: Option<Empty>,
    /// What to ask instead, when the target was not found or is no unit.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub hint: Option<String>,
    /// When the `max_results` asked for was above the front end's cap
    /// ([`MAX_RESULTS`], or [`SCRIPT_MAX_RESULTS`] for the local CLI): what
    /// was asked and what was used.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub max_results_clamped: Option<Clamped>,
    /// `detail` only: the target's signature, parameters and use counts.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub detail: Option<UnitDetail>,
}

/// A result cap asked for and the one used.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Clamped {
    /// The value asked for.
    pub asked: usize,
    /// The value used (the hard cap).
    pub used: usize,
}

/// What `detail` says about a unit beyond its handle.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct UnitDetail {
    /// The declaration up to its body (at most 5 lines, whitespace collapsed).
    pub signature: String,
    /// The parameters as written in the signature (empty for non-callables).
    pub parameters: Vec<String>,
    /// Named members (methods, fields, nested types); listed in `nodes`.
    pub members: usize,
    /// Units that call it: how many `callers` lists at depth 1.
    pub callers: usize,
    /// Units it calls: how many `callees` lists at depth 1.
    pub callees: usize,
    /// Units that use it in any way (calls, imports, types, other): how
    /// many `references` lists.
    pub references: usize,
    /// How many of the units counted in `callees` and `references` (which
    /// holds the callers) were reached by a guess (see [`GraphNode::guess`]).
    #[serde(default)]
    pub guesses: usize,
}

/// A resolved target string.
#[derive(Clone, Debug, PartialEq)]
pub enum TargetMatch {
    /// Exactly one unit.
    One(NodeRecord),
    /// Several equally good units.
    Ambiguous(Vec<NodeRecord>),
    /// None.
    NotFound,
    /// A position on a name that is no unit (a field or property declared
    /// in a type's body): what to ask instead.
    NoUnit(String),
}

/// One edge of the whole-graph export.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExportEdge {
    /// Path of the site.
    pub path: String,
    /// 1-based line of the site.
    pub line: u32,
    /// 0-based column of the site.
    pub col: u32,
    /// `call`, `import`, `type`, `other`.
    pub kind: String,
    /// `resolved`, `ambiguous`.
    pub status: String,
    /// Source unit's qualified name.
    pub src_qualified: Option<String>,
    /// Target unit's path.
    pub dst_path: String,
    /// Line of the target's name (where its signature starts).
    pub dst_line: u32,
    /// Target unit's qualified name.
    pub dst_qualified: Option<String>,
    /// Target's node type.
    pub dst_type: String,
    /// Confidence, 0..=100.
    pub confidence: u8,
    /// How it was resolved (`base` marks a type relation, not a site; its line is 0).
    pub how: String,
}

/// A unit a traversal reached: its id, depth, the edge it came by and its
/// sites (`line:col`).
type Reached = (i64, u32, StoredEdge, Vec<String>);

/// Graph queries over one read snapshot.
pub struct Graph<'s> {
    pub(crate) store: &'s Store,
    root: PathBuf,
    texts: std::cell::RefCell<HashMap<String, Option<String>>>,
    /// The engine's cache of whole-graph results, when there is one.
    pub(crate) cache: Option<&'s super::GraphCache>,
    /// Whether the whole-graph analyses (dependencies, cycles, unused,
    /// hotspots) count guessed edges; set per request by [`Graph::run`].
    pub(crate) include_guesses: std::cell::Cell<bool>,
    /// The most results one answer may hold ([`MAX_RESULTS`] unless
    /// [`Graph::run_within`] set another cap for its request).
    result_cap: std::cell::Cell<usize>,
    /// Nodes a traversal skips before it lists any (paging; set per
    /// request by [`Graph::run_within`], 0 otherwise).
    offset: std::cell::Cell<usize>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// Whether an edge is a guess (see [`GraphNode::guess`]).
pub fn is_guess(e: &StoredEdge) -> bool {
    e.how == How::UniqueName as u8
}

/// What a traversal lists a unit's edges apart by: their status and
/// whether they are guesses ([`is_guess`]).
type EdgeClass = (u8, bool);

fn edge_class(e: &StoredEdge) -> EdgeClass {
    (e.status, is_guess(e))
}

fn status_name(s: u8) -> &'static str {
    match s {
        STATUS_AMBIGUOUS => "ambiguous",
        STATUS_UNRESOLVED => "unresolved",
        _ => "resolved",
    }
}

pub(crate) fn is_exported(n: &NodeRecord) -> bool {
    let name = n.name.as_deref().unwrap_or_default();
    let go_private = n.file_path.ends_with(".go") && name.starts_with(|c: char| c.is_lowercase());
    !(name.starts_with('_') || go_private)
}

/// Units whose body declares members that may have no unit of their own
/// (fields, properties, struct fields).
fn is_container(t: &str) -> bool {
    matches!(
        t,
        "class" | "struct" | "enum" | "trait" | "interface" | "type" | "impl" | "object"
    )
}

/// The identifier at character column `col` of `line`: its columns
/// `[start, end)` and its text. An ECMAScript private name keeps its `#`
/// (`this.#dispatch()`: the site and the unit are named `#dispatch`).
fn word_at(line: &str, col: u32) -> Option<(u32, u32, String)> {
    let chars: Vec<char> = line.chars().collect();
    let is_word = |c: char| c.is_alphanumeric() || c == '_' || c == '$';
    let mut col = col as usize;
    if chars.get(col) == Some(&'#') && chars.get(col + 1).copied().is_some_and(is_word) {
        col += 1;
    }
    if !chars.get(col).copied().is_some_and(is_word) {
        return None;
    }
    let mut start = (0..col)
        .rev()
        .take_while(|&i| is_word(chars[i]))
        .last()
        .unwrap_or(col);
    if start > 0 && chars[start - 1] == '#' {
        start -= 1;
    }
    let end = (col..chars.len())
        .take_while(|&i| is_word(chars[i]))
        .last()
        .map_or(col, |i| i + 1);
    Some((start as u32, end as u32, chars[start..end].iter().collect()))
}

/// The character columns of each whole-word occurrence of `name` in `line`
/// (a private name `#x` with its `#`).
fn word_columns(line: &str, name: &str) -> Vec<u32> {
    let is_word = |c: char| c.is_alphanumeric() || c == '_' || c == '$';
    let mut out = Vec::new();
    let (mut col, mut start, mut word) = (0u32, 0u32, String::new());
    let mut prev = ' ';
    for c in line.chars().chain([' ']) {
        if is_word(c) {
            if word.is_empty() {
                start = col;
                if prev == '#' {
                    word.push('#');
                    start -= 1;
                }
            }
            word.push(c);
        } else if !word.is_empty() {
            if word == name {
                out.push(start);
            }
            word.clear();
        }
        prev = c;
        col += 1;
    }
    out
}

fn is_definition(t: &str) -> bool {
    matches!(
        t,
        "function" | "method" | "class" | "struct" | "enum" | "trait" | "interface" | "type"
    )
}

impl<'s> Graph<'s> {
    /// The store this graph reads (context packs read the focus's file
    /// nodes through it).
    pub fn store(&self) -> &'s Store {
        self.store
    }

    /// The most results one answer may hold: `max_results` is clamped to
    /// it (see [`MAX_RESULTS`] and [`SCRIPT_MAX_RESULTS`]).
    pub fn result_cap(&self) -> usize {
        self.result_cap.get()
    }

    /// Sets [`Graph::result_cap`] (at least 1).
    pub(crate) fn set_result_cap(&self, cap: usize) {
        self.result_cap.set(cap.max(1));
    }

    /// Sets how many nodes the next traversals skip before listing any
    /// (a page of callers, callees, references or type usages).
    pub(crate) fn set_offset(&self, offset: usize) {
        self.offset.set(offset);
    }

    /// A graph over `store`, for the repository at `root`.
    pub fn new(store: &'s Store, root: impl Into<PathBuf>) -> Graph<'s> {
        Graph {
            store,
            root: root.into(),
            texts: Default::default(),
            cache: None,
            include_guesses: std::cell::Cell::new(false),
            result_cap: std::cell::Cell::new(MAX_RESULTS),
            offset: std::cell::Cell::new(0),
        }
    }

    /// A graph whose whole-graph results (hotspots) are kept in `cache`
    /// between requests, for as long as the index does not change.
    pub fn with_cache(
        store: &'s Store,
        root: impl Into<PathBuf>,
        cache: &'s super::GraphCache,
    ) -> Graph<'s> {
        Graph {
            cache: Some(cache),
            ..Graph::new(store, root)
        }
    }

    pub(crate) fn file_text(&self, path: &str, content_hash: &str) -> Option<String> {
        let mut texts = self.texts.borrow_mut();
        if let Some(t) = texts.get(path) {
            return t.clone();
        }
        let text = std::fs::read(self.root.join(path)).ok().and_then(|bytes| {
            let hash = format!("{:016x}", xxhash_rust::xxh3::xxh3_64(&bytes));
            (hash == content_hash).then(|| text_view(&bytes))
        });
        texts.insert(path.to_string(), text.clone());
        text
    }

    /// The 1-based line where a unit's name (signature) starts.
    pub fn name_line(&self, n: &NodeRecord) -> u32 {
        match self.file_text(&n.file_path, &n.content_hash) {
            Some(t) => {
                let upto = n.preview_start.min(t.len());
                n.start_line.max(1) + t[n.start_byte.min(upto)..upto].matches('\n').count() as u32
            }
            None => n.start_line,
        }
    }

    /// A unit as a handle (preview from the file when it is unchanged, else the qualified name).
    pub fn handle(&self, n: &NodeRecord) -> Handle {
        let text = self.file_text(&n.file_path, &n.content_hash);
        let stale = text.is_none();
        let preview = text
            .map(|t| preview_text(&t, n.preview_start, n.end_byte))
            .unwrap_or_else(|| n.qualified_name.clone().unwrap_or_default());
        n.to_handle(preview, stale)
    }

    /// Every resolved or ambiguous edge the whole-graph analyses read:
    /// guesses only when the request asked for them (`include_guesses`).
    pub(crate) fn analysis_edges(&self) -> Result<Vec<StoredEdge>> {
        let mut edges = self.store.all_edges()?;
        if !self.include_guesses.get() {
            edges.retain(|e| !is_guess(e));
        }
        Ok(edges)
    }

    pub(crate) fn node(&self, id: i64) -> Result<Option<NodeRecord>> {
        self.store.node_by_rowid(id)
    }

    /// For a target that matched nothing: the nearest unit names to its
    /// last part (`Parser.parze` → `parse`), as the hint of the empty answer.
    fn nearest_names_hint(&self, target: &str) -> Result<Option<String>> {
        let Some(name) = target
            .trim()
            .rsplit(['.', ':', '/', '#'])
            .find(|p| !p.is_empty())
        else {
            return Ok(None);
        };
        let near = self.store.nearest_names(name, 5)?;
        Ok((!near.is_empty()).then(|| {
            format!(
                "no unit is named `{name}`; nearest names: {}",
                near.join(", ")
            )
        }))
    }

    /// Resolves a target string (see the module docs for the rule).
    pub fn resolve_target(&self, target: &str) -> Result<TargetMatch> {
        let target = target.trim();
        if let Some(found) = self.position_target(target)? {
            return Ok(found);
        }
        let parts: Vec<&str> = target
            .split(['.', ':', '/', '#'])
            .filter(|p| !p.is_empty())
            .collect();
        let Some(name) = parts.last() else {
            return Ok(TargetMatch::NotFound);
        };
        let quals = &parts[..parts.len() - 1];
        let cands = self
            .store
            .nodes_by_name(name, crate::store::read::NameMatch::Equal, 2000)?;
        let cands: Vec<NodeRecord> = cands
            .into_iter()
            .filter(|n| n.name.as_deref() == Some(*name))
            .collect();
        let matches_quals = |n: &NodeRecord| {
            if quals.is_empty() {
                return true;
            }
            let q = n.qualified_name.clone().unwrap_or_default();
            let mut hay: Vec<String> = q.split('.').map(str::to_string).collect();
            hay.pop();
            let (path, ext) = match n.file_path.rsplit_once('.') {
                Some((p, e)) if !e.contains('/') => (p, Some(e)),
                _ => (n.file_path.as_str(), None),
            };
            // The path's folders and stem, then (with the extension written
            // as in `parser.rs:Parser.parse`, or without it) the qualifiers.
            let ends_with = |full: &[&str]| {
                quals.len() <= full.len()
                    && quals
                        .iter()
                        .rev()
                        .zip(full.iter().rev())
                        .all(|(a, b)| a == b)
            };
            let mut full: Vec<&str> = path.split('/').collect();
            let plain_len = full.len();
            full.extend(ext);
            let with_ext: Vec<&str> = full
                .iter()
                .copied()
                .chain(hay.iter().map(String::as_str))
                .collect();
            let plain: Vec<&str> = full[..plain_len]
                .iter()
                .copied()
                .chain(hay.iter().map(String::as_str))
                .collect();
            quals
                .iter()
                .rev()
                .zip(hay.iter().rev())
                .all(|(a, b)| a == b)
                && hay.len() >= quals.len()
                || ends_with(&plain)
                || ends_with(&with_ext)
        };
        let mut best: Vec<NodeRecord> = cands.into_iter().filter(matches_quals).collect();
        if best.len() > 1 {
            let defs: Vec<NodeRecord> = best
                .iter()
                .filter(|n| is_definition(&n.node_type))
                .cloned()
                .collect();
            if !defs.is_empty() {
                best = defs;
            }
        }
        if best.len() > 1 && !quals.is_empty() {
            let exact: Vec<NodeRecord> = best
                .iter()
                .filter(|n| {
                    n.qualified_name.as_deref()
                        == Some(
                            &quals
                                .iter()
                                .chain([name])
                                .copied()
                                .collect::<Vec<_>>()
                                .join("."),
                        )
                })
                .cloned()
                .collect();
            if !exact.is_empty() {
                best = exact;
            }
        }
        if best.len() > 1 {
            let exported: Vec<NodeRecord> =
                best.iter().filter(|n| is_exported(n)).cloned().collect();
            if !exported.is_empty() {
                best = exported;
            }
        }
        if best.is_empty() && target.contains("::") {
            best = self.rust_path_target(&parts)?;
        }
        Ok(match best.len() {
            0 => TargetMatch::NotFound,
            1 => TargetMatch::One(best.remove(0)),
            _ => TargetMatch::Ambiguous(best),
        })
    }

    /// `crate_name::path::Name` through the crate's module tree and its
    /// re-exports (`tokio::spawn` is `tokio/src/task/spawn.rs`'s `spawn`,
    /// re-exported by `pub use task::spawn`): a last resort, since it builds
    /// the resolver's world of the whole index.
    fn rust_path_target(&self, parts: &[&str]) -> Result<Vec<NodeRecord>> {
        // Crate names first (paths and `Cargo.toml`s only): a path that names
        // no crate of the repository never loads the world.
        let paths = self.store.file_ranges()?;
        let manifests =
            resolve::Manifests::read(&self.root, paths.iter().map(|(_, p, ..)| p.as_str()));
        if parts
            .first()
            .is_none_or(|c| !manifests.cargo.crates.contains_key(*c))
        {
            return Ok(Vec::new());
        }
        let (files, syms, _) =
            resolve::read_world_rows(self.store, &std::collections::BTreeSet::new())?;
        let world = resolve::World::new(files, syms, manifests);
        let ids = world.rust_path_units(parts);
        self.store.nodes_by_rowids(&ids)
    }

    /// `path:line[:col]` ([`Position`]): the definition a site there
    /// resolves to, else the innermost unit there.
    fn position_target(&self, target: &str) -> Result<Option<TargetMatch>> {
        match Position::parse(target) {
            Some(p) => self.at_position(p.path, p.line, p.col),
            None => Ok(None),
        }
    }

    /// What `path:line[:col]` names. With a column: the definition whose
    /// name holds the column, else the definition whose signature (name)
    /// line it is, else the definition the site at the column (its whole
    /// name, not a neighbour's) resolves to; on a member declared in a
    /// type's body that has no unit of its own (a field, an interface
    /// property), no unit and a hint. Without a column, or when nothing of
    /// that holds: the innermost named unit spanning the line (the file
    /// when none).
    pub(crate) fn at_position(
        &self,
        path: &str,
        line: u32,
        col: Option<u32>,
    ) -> Result<Option<TargetMatch>> {
        let Some(file) = self.store.file_node(path)? else {
            return Ok(Some(TargetMatch::NotFound));
        };
        let (lo, hi) = self.file_range(&file)?;
        // Named units spanning the line, outermost first.
        let mut units = self.store.nodes_by_rowids(&(lo..=hi).collect::<Vec<_>>())?;
        units.retain(|n| n.start_line <= line && line <= n.end_line && n.name.is_some());
        units.sort_by_key(|n| (n.start_byte, std::cmp::Reverse(n.end_byte)));
        if let Some(col) = col {
            let text = self.line_text(&file, line);
            let word = text.as_deref().and_then(|t| word_at(t, col));
            let on_signature: Vec<&NodeRecord> =
                units.iter().filter(|n| self.name_line(n) == line).collect();
            if let (Some((start, _, w)), Some(text)) = (&word, &text)
                && let Some(n) = on_signature.iter().rev().find(|n| {
                    n.name.as_deref() == Some(w.as_str()) && word_columns(text, w).contains(start)
                })
            {
                return Ok(Some(TargetMatch::One((*n).clone())));
            }
            if let Some(n) = on_signature
                .iter()
                .rev()
                .find(|n| is_definition(&n.node_type))
            {
                return Ok(Some(TargetMatch::One((*n).clone())));
            }
            if let Some((start, end, w)) = word {
                let edges = self.store.edges_from_range(lo, hi)?;
                if let Some(d) = edges
                    .iter()
                    .filter(|e| e.line == line && start <= e.col && e.col < end)
                    .find_map(|e| e.dst)
                    && let Some(n) = self.node(d)?
                {
                    return Ok(Some(TargetMatch::One(n)));
                }
                if let Some(owner) = units.last().filter(|n| is_container(&n.node_type)) {
                    let owner_name = owner.qualified_name.as_deref().unwrap_or_default();
                    return Ok(Some(TargetMatch::NoUnit(format!(
                        "`{w}` at {path}:{line}:{col} is declared in {owner_name} \
                         ({path}:{}) but is no unit of its own (fields and properties \
                         without a body are not); ask about {owner_name}, or use \
                         `canopy query {w}` for the places that name it",
                        owner.start_line
                    ))));
                }
            }
        }
        // The innermost named unit spanning the line.
        Ok(Some(match units.pop() {
            Some(n) => TargetMatch::One(n),
            None => TargetMatch::One(file),
        }))
    }

    /// Line `line` (1-based) of a unit's file, when the file is unchanged since indexing.
    fn line_text(&self, unit: &NodeRecord, line: u32) -> Option<String> {
        let text = self.file_text(&unit.file_path, &unit.content_hash)?;
        text.split('\n')
            .nth(line.checked_sub(1)? as usize)
            .map(|l| l.trim_end_matches('\r').to_string())
    }

    fn file_range(&self, file_unit: &NodeRecord) -> Result<(i64, i64)> {
        self.store.file_node_range(&file_unit.file_path)
    }

    pub(crate) fn answer(&self, op: &str) -> GraphAnswer {
        GraphAnswer {
            op: op.to_string(),
            target: None,
            candidates: Vec::new(),
            nodes: Vec::new(),
            review: Vec::new(),
            unresolved: Vec::new(),
            unresolved_count: 0,
            total: 0,
            truncated: false,
            offset: 0,
            next_offset: None,
            empty: None,
            hint: None,
            max_results_clamped: None,
            detail: None,
        }
    }

    pub(crate) fn with_target(
        &self,
        op: &str,
        target: &str,
    ) -> Result<(GraphAnswer, Option<NodeRecord>)> {
        let mut a = self.answer(op);
        match self.resolve_target(target)? {
            TargetMatch::One(n) => {
                a.target = Some(self.handle(&n));
                Ok((a, Some(n)))
            }
            TargetMatch::Ambiguous(c) => {
                a.candidates = c
                    .iter()
                    .take(DEFAULT_MAX_RESULTS)
                    .map(|n| self.handle(n))
                    .collect();
                a.total = c.len();
                Ok((a, None))
            }
            TargetMatch::NotFound => {
                a.empty = Some(Empty::TargetNotFound);
                a.hint = self.nearest_names_hint(target)?;
                Ok((a, None))
            }
            TargetMatch::NoUnit(hint) => {
                a.empty = Some(Empty::TargetNotFound);
                a.hint = Some(hint);
                Ok((a, None))
            }
        }
    }

    /// Units that call the target, transitively up to `depth` (1..=10).
    pub fn callers(&self, target: &str, depth: u32, max_results: usize) -> Result<GraphAnswer> {
        self.traverse(
            "callers",
            target,
            depth,
            max_results,
            true,
            &[SiteKind::Call],
        )
    }

    /// Units the target calls, transitively up to `depth`.
    pub fn callees(&self, target: &str, depth: u32, max_results: usize) -> Result<GraphAnswer> {
        self.traverse(
            "callees",
            target,
            depth,
            max_results,
            false,
            &[SiteKind::Call],
        )
    }

    /// Every resolved use of the target (calls, imports, types, other uses), as the units containing them.
    pub fn references(&self, target: &str, max_results: usize) -> Result<GraphAnswer> {
        self.traverse(
            "references",
            target,
            1,
            max_results,
            true,
            &[
                SiteKind::Call,
                SiteKind::Import,
                SiteKind::Type,
                SiteKind::Other,
            ],
        )
    }

    /// Units that mention the target as a type (annotations, bases).
    pub fn type_usages(&self, target: &str, max_results: usize) -> Result<GraphAnswer> {
        self.traverse(
            "type_usages",
            target,
            1,
            max_results,
            true,
            &[SiteKind::Type],
        )
    }

    /// The units one hop from the unit `t` over edges of `kinds` (`incoming`:
    /// into it): the nodes of [`Graph::callers`], [`Graph::callees`] or
    /// [`Graph::type_usages`] at depth 1 for a target that resolved to `t`,
    /// the same units in the same order (a recursive unit among its own
    /// callers), without the rest of their answers (each node's handle and
    /// preview, its sites, the calls that resolved to nothing): what a
    /// context pack's graph strategy reads of them, for a fraction of the
    /// queries.
    pub fn neighbours(
        &self,
        t: &NodeRecord,
        incoming: bool,
        kinds: &[SiteKind],
        max_results: usize,
    ) -> Result<Vec<NodeRecord>> {
        let max_results = max_results.clamp(1, self.result_cap());
        let edges = if incoming {
            self.store.edges_to(t.rowid)?
        } else {
            let mut es = self.out_edges(t)?;
            es.retain(|e| e.dst.is_some());
            es
        };
        // `traverse`'s first hop: each unit once, in the order its first
        // edge comes; the target itself only by an edge to itself.
        let mut seen: HashSet<i64> = HashSet::new();
        let mut found: Vec<i64> = Vec::new();
        for e in edges.iter().filter(|e| kinds.contains(&e.kind)) {
            let other = if incoming { e.src } else { e.dst.unwrap_or(0) };
            if other > 0 && seen.insert(other) {
                found.push(other);
            }
        }
        found.truncate(max_results);
        let mut nodes = self.store.nodes_by_rowid(&found)?;
        Ok(found.iter().filter_map(|id| nodes.remove(id)).collect())
    }

    /// The definition the site at `path:line:col` resolves to: the site
    /// whose name holds the column. A name there that did not resolve is
    /// answered `unresolved` with that name, never with another site of
    /// the line. Without a column, the line's one site is taken; a line
    /// with several sites is a validation error that lists each with the
    /// position to ask instead, and a line with none says so.
    pub fn definition(&self, path: &str, line: u32, col: Option<u32>) -> Result<GraphAnswer> {
        let mut a = self.answer("definition");
        let Some(file) = self.store.file_node(path)? else {
            a.empty = Some(Empty::TargetNotFound);
            return Ok(a);
        };
        let (lo, hi) = self.file_range(&file)?;
        let text = self.line_text(&file, line);
        let col = match col {
            Some(col) => col,
            None => {
                let edges = self.store.edges_from_range(lo, hi)?;
                let mut cols: Vec<u32> = edges
                    .iter()
                    .filter(|e| e.line == line)
                    .map(|e| e.col)
                    .collect();
                // Calls that resolved to nothing have no edge; their
                // names are found in the line's text.
                if let (Some(text), Some(file_id)) =
                    (text.as_deref(), self.store.file_of_unit(file.rowid)?)
                {
                    for c in self.store.raw_calls_in_file(file_id)? {
                        if c.line == line {
                            cols.extend(word_columns(text, &c.name));
                        }
                    }
                }
                cols.sort_unstable();
                cols.dedup();
                match cols.as_slice() {
                    [only] => *only,
                    [] => {
                        a.empty = Some(Empty::Resolved);
                        a.hint = Some(format!(
                            "no call, reference or import site on {path}:{line}; \
                             `canopy detail {path}:{line}` names the unit there"
                        ));
                        return Ok(a);
                    }
                    several => {
                        let listed: Vec<String> = several
                            .iter()
                            .map(|&c| {
                                let name = text
                                    .as_deref()
                                    .and_then(|t| word_at(t, c))
                                    .map_or_else(|| "?".to_string(), |(_, _, w)| w);
                                format!("`{name}` at {path}:{line}:{c}")
                            })
                            .collect();
                        return Err(CanopyError::Validation(format!(
                            "definition: {path}:{line} has {} sites; give the column of \
                             the one you mean (path:line:col, 0-based): {}",
                            several.len(),
                            listed.join(", ")
                        )));
                    }
                }
            }
        };
        let word = text.and_then(|t| word_at(&t, col));
        let Some((start, end, name)) = word else {
            a.empty = Some(Empty::Resolved);
            a.hint = Some(format!(
                "no name at {path}:{line}:{col} (the column is 0-based; give the column of the name)"
            ));
            return Ok(a);
        };
        let edges = self.store.edges_from_range(lo, hi)?;
        let mut seen = HashSet::new();
        for e in edges
            .iter()
            .filter(|e| e.line == line && start <= e.col && e.col < end)
        {
            if let Some(d) = e.dst
                && seen.insert(d)
                && let Some(n) = self.node(d)?
            {
                let mut g = self.graph_node(&n, 1, e);
                g.sites = vec![format!("{path}:{}:{}", e.line, e.col)];
                g.sites_total = 1;
                a.nodes.push(g);
            }
        }
        a.total = a.nodes.len();
        if a.nodes.is_empty() {
            a.unresolved_count = 1;
            a.unresolved.push(UnresolvedSite {
                name: name.clone(),
                file_path: path.to_string(),
                line,
                source_handle: self.handle(&file).id,
            });
            a.empty = Some(Empty::Unresolved { count: 1, name });
        }
        Ok(a)
    }

    pub(crate) fn graph_node(&self, n: &NodeRecord, depth: u32, e: &StoredEdge) -> GraphNode {
        GraphNode {
            handle: self.handle(n),
            qualified_name: n.qualified_name.clone(),
            depth,
            edge_kind: e.kind.as_str().to_string(),
            confidence: e.confidence,
            status: status_name(e.status).to_string(),
            how: How::name(e.how).to_string(),
            guess: is_guess(e),
            sites: Vec::new(),
            sites_total: 0,
            parent: None,
        }
    }

    pub(crate) fn out_edges(&self, node: &NodeRecord) -> Result<Vec<StoredEdge>> {
        // A unit's own edges, and those of anonymous units inside it (src is
        // always a named unit or a file, so the unit itself is enough).
        if node.node_type == "file" {
            let (lo, hi) = self.store.file_node_range(&node.file_path)?;
            return Ok(self
                .store
                .edges_from_range(lo, hi)?
                .into_iter()
                .filter(|e| e.src == lo)
                .collect());
        }
        let srcs = self.rolled_up_units(node)?;
        let last = srcs.iter().copied().max().unwrap_or(node.rowid);
        Ok(self
            .store
            .edges_from_range(node.rowid, last)?
            .into_iter()
            .filter(|e| srcs.contains(&e.src))
            .collect())
    }

    /// A unit and, for a function or method, the functions (closures,
    /// lambdas, arrow functions, nested definitions) inside it, at any
    /// depth: the units whose calls are the unit's callees. A class nested
    /// in it, and that class's methods, are not.
    fn rolled_up_units(&self, node: &NodeRecord) -> Result<HashSet<i64>> {
        let mut srcs = HashSet::from([node.rowid]);
        if !matches!(node.node_type.as_str(), "function" | "method") {
            return Ok(srcs);
        }
        let mut frontier = vec![node.rowid];
        while !frontier.is_empty() {
            frontier = self
                .store
                .children_of(&frontier)?
                .into_iter()
                .filter(|n| n.node_type == "function" && srcs.insert(n.rowid))
                .map(|n| n.rowid)
                .collect();
        }
        Ok(srcs)
    }

    /// Breadth-first over the edges of `kinds` out of the target
    /// (`incoming`: into it), up to `depth` hops: callers, callees,
    /// references and type usages.
    fn traverse(
        &self,
        op: &str,
        target: &str,
        depth: u32,
        max_results: usize,
        incoming: bool,
        kinds: &[SiteKind],
    ) -> Result<GraphAnswer> {
        let (mut a, t) = self.with_target(op, target)?;
        let Some(t) = t else { return Ok(a) };
        let depth = depth.clamp(1, MAX_DEPTH);
        let max_results = max_results.clamp(1, self.result_cap());
        let mut seen: HashSet<i64> = HashSet::from([t.rowid]);
        let mut found: Vec<Reached> = Vec::new();
        let mut parents: HashMap<i64, i64> = HashMap::new();
        // A unit's entry per kind of edge (status, guess or not): the sites
        // of its resolved edges are never shown under an ambiguous entry, nor
        // the reverse; `first` holds the unit's first entry.
        let mut index: HashMap<(i64, EdgeClass), usize> = HashMap::new();
        let mut first: HashMap<i64, usize> = HashMap::new();
        let mut queue = VecDeque::from([(t.rowid, 0u32)]);
        while let Some((cur, d)) = queue.pop_front() {
            if d >= depth {
                continue;
            }
            let edges = if incoming {
                self.store.edges_to(cur)?
            } else {
                let Some(n) = self.node(cur)? else {
                    continue;
                };
                self.traverse_out_edges(&mut a, &n, d == 0, kinds, max_results)?
            };
            for e in edges.into_iter().filter(|e| kinds.contains(&e.kind)) {
                let other = if incoming { e.src } else { e.dst.unwrap_or(0) };
                if other <= 0 {
                    continue;
                }
                let site = format!("{}:{}", e.line, e.col);
                let class = edge_class(&e);
                if let Some(&i) = index.get(&(other, class)) {
                    found[i].3.push(site);
                    continue;
                }
                if let Some(&i) = first.get(&other) {
                    if parents.get(&other) == Some(&cur) {
                        // The same unit by another kind of edge from the
                        // same parent: an entry of its own, not walked again.
                        index.insert((other, class), found.len());
                        found.push((other, d + 1, e, vec![site]));
                    } else {
                        found[i].3.push(site);
                    }
                    continue;
                }
                // The target itself is reached only by its own recursive
                // calls (an edge between it and itself), and never expanded again.
                let recursive = other == t.rowid && cur == t.rowid;
                if !recursive && !seen.insert(other) {
                    continue;
                }
                index.insert((other, class), found.len());
                first.insert(other, found.len());
                parents.insert(other, cur);
                found.push((other, d + 1, e, vec![site]));
                if !recursive {
                    queue.push_back((other, d + 1));
                }
            }
            // Bounds the walk's work: twenty times what the answer (and
            // the pages before it) can hold, and never less than an
            // agent's cap allows.
            let reach = self.offset.get().saturating_add(max_results);
            if found.len() > reach.max(MAX_RESULTS).saturating_mul(20) {
                a.truncated = true;
                break;
            }
        }
        // A unit's entries side by side, where its first one was found, so
        // that pages and caps count units.
        found.sort_by_key(|f| first.get(&f.0).copied().unwrap_or(usize::MAX));
        self.traverse_nodes(&mut a, &t, found, &parents, incoming, max_results)?;
        if incoming
            && kinds.contains(&SiteKind::Call)
            && let Some(name) = t.name.as_deref()
        {
            let (un, count) = self.unresolved_calls_named(name, max_results)?;
            a.unresolved_count += count;
            a.unresolved.extend(un);
        }
        if a.nodes.is_empty() && a.total == 0 {
            a.empty = Some(if a.unresolved_count > 0 {
                Empty::Unresolved {
                    count: a.unresolved_count,
                    name: if incoming {
                        t.name.clone().unwrap_or_default()
                    } else {
                        "(calls in target)".into()
                    },
                }
            } else {
                Empty::Resolved
            });
        }
        Ok(a)
    }

    /// The resolved edges out of `n` for [`Graph::traverse`]; at the target
    /// (`first`) of a call traversal, its call sites that resolved to
    /// nothing (from the raw references) go to `a.unresolved`.
    fn traverse_out_edges(
        &self,
        a: &mut GraphAnswer,
        n: &NodeRecord,
        first: bool,
        kinds: &[SiteKind],
        max_results: usize,
    ) -> Result<Vec<StoredEdge>> {
        let mut es = self.out_edges(n)?;
        if first && kinds.contains(&SiteKind::Call) {
            let resolved_lines: HashSet<u32> = es
                .iter()
                .filter(|e| e.kind == SiteKind::Call && e.dst.is_some())
                .map(|e| e.line)
                .collect();
            let srcs = self.rolled_up_units(n)?;
            if let Some(file_id) = self.store.file_of_unit(n.rowid)? {
                for c in self.store.raw_calls_in_file(file_id)? {
                    if !srcs.contains(&c.src) || resolved_lines.contains(&c.line) {
                        continue;
                    }
                    a.unresolved_count += 1;
                    if a.unresolved.len() < max_results {
                        a.unresolved.push(UnresolvedSite {
                            name: c.name,
                            file_path: n.file_path.clone(),
                            line: c.line,
                            source_handle: self.handle(n).id,
                        });
                    }
                }
            }
        }
        es.retain(|e| e.dst.is_some());
        Ok(es)
    }

    /// The first `max_results` units [`Graph::traverse`] reached, as the
    /// answer's nodes (with their sites and the node each was reached from).
    fn traverse_nodes(
        &self,
        a: &mut GraphAnswer,
        t: &NodeRecord,
        found: Vec<Reached>,
        parents: &HashMap<i64, i64>,
        incoming: bool,
        max_results: usize,
    ) -> Result<()> {
        // Pages and caps count units: a unit listed once per kind of edge
        // (see [`GraphNode`]) has its entries side by side in `found`.
        let mut unit_of_entry = Vec::with_capacity(found.len());
        let mut units = 0usize;
        for (i, f) in found.iter().enumerate() {
            if i == 0 || found[i - 1].0 != f.0 {
                units += 1;
            }
            unit_of_entry.push(units - 1);
        }
        a.total = units;
        let offset = self.offset.get().min(units);
        a.offset = offset;
        if units - offset > max_results {
            a.truncated = true;
            a.next_offset = Some(offset + max_results);
        } else if offset > 0 && offset == units {
            a.hint = Some(format!(
                "offset {} is past the last of {} nodes",
                self.offset.get(),
                units
            ));
        }
        let on_page = |i: usize| (offset..offset + max_results).contains(&unit_of_entry[i]);
        let page = || {
            found
                .iter()
                .enumerate()
                .filter(|(i, _)| on_page(*i))
                .map(|(_, f)| f)
        };
        let ids: Vec<i64> = page().map(|f| f.0).collect();
        let mut all_ids = ids.clone();
        all_ids.extend(parents.values().copied());
        all_ids.sort_unstable();
        all_ids.dedup();
        let nodes = self.store.nodes_by_rowid(&all_ids)?;
        let parent_handles: HashMap<i64, HandleId> = nodes
            .iter()
            .filter_map(|(id, n)| Some((*id, HandleId::parse(&n.handle)?)))
            .collect();
        let mut site_budget = MAX_SITES;
        let page: Vec<Reached> = found
            .into_iter()
            .enumerate()
            .filter(|(i, _)| on_page(*i))
            .map(|(_, f)| f)
            .collect();
        for (id, d, e, sites) in page {
            let Some(n) = nodes.get(&id) else { continue };
            let mut g = self.graph_node(n, d, &e);
            // Sites are in the source unit's file for incoming edges, the target unit's for outgoing.
            let site_file = if incoming { &n.file_path } else { &t.file_path };
            g.sites_total = sites.len();
            let listed = sites.len().min(site_budget);
            site_budget -= listed;
            if listed < sites.len() {
                a.truncated = true;
            }
            g.sites = sites[..listed]
                .iter()
                .map(|s| format!("{site_file}:{s}"))
                .collect();
            g.parent = parents.get(&id).and_then(|p| {
                if *p == t.rowid {
                    a.target.as_ref().map(|h| h.id.clone())
                } else {
                    parent_handles.get(p).cloned()
                }
            });
            a.nodes.push(g);
        }
        Ok(())
    }

    /// Call sites named `name` (from the raw references) with no resolved
    /// call edge on their line to a unit of that name: up to `cap` of them, and how many in all.
    pub fn unresolved_calls_named(
        &self,
        name: &str,
        cap: usize,
    ) -> Result<(Vec<UnresolvedSite>, u64)> {
        // Resolved call edges into any unit of that name, as (src, line),
        // sorted so that a file's are one range (a file's units are a node id range).
        let mut resolved: Vec<(i64, u32)> = Vec::new();
        for n in self
            .store
            .nodes_by_name(name, crate::store::read::NameMatch::Equal, 1_000_000)?
            .into_iter()
            .filter(|n| n.name.as_deref() == Some(name))
        {
            resolved.extend(
                self.store
                    .edges_to(n.rowid)?
                    .into_iter()
                    .filter(|e| e.kind == SiteKind::Call)
                    .map(|e| (e.src, e.line)),
            );
        }
        resolved.sort_unstable();
        let mut count = 0u64;
        let mut listed: Vec<(i64, u32)> = Vec::new();
        let Some(name_id) = self.store.ref_name_id(name)? else {
            return Ok((Vec::new(), 0));
        };
        for file_id in self.store.files_using_name(name)? {
            let calls = self.store.raw_calls_named(file_id, name_id)?;
            if calls.is_empty() {
                continue;
            }
            let (lo, hi) = self.store.file_node_range_by_id(file_id)?;
            let from = resolved.partition_point(|&(src, _)| src < lo);
            let to = resolved.partition_point(|&(src, _)| src <= hi);
            let lines: HashSet<u32> = resolved[from..to.max(from)].iter().map(|r| r.1).collect();
            for c in calls {
                if lines.contains(&c.1) {
                    continue;
                }
                count += 1;
                if listed.len() < cap {
                    listed.push(c);
                }
            }
        }
        let srcs: Vec<i64> = listed.iter().map(|c| c.0).collect();
        let units = self.store.nodes_by_rowid(&srcs)?;
        let out = listed
            .into_iter()
            .filter_map(|(src, line)| {
                let u = units.get(&src)?;
                Some(UnresolvedSite {
                    name: name.to_string(),
                    file_path: u.file_path.clone(),
                    line,
                    source_handle: self.handle(u).id,
                })
            })
            .collect();
        Ok((out, count))
    }

    /// The shortest call path from `from` to `to` (breadth-first over call edges, at most `MAX_DEPTH` hops).
    pub fn path(&self, from: &str, to: &str) -> Result<GraphAnswer> {
        let (mut a, f) = self.with_target("path", from)?;
        let Some(f) = f else { return Ok(a) };
        let (b, t) = self.with_target("path", to)?;
        let Some(t) = t else {
            a.candidates = b.candidates;
            a.total = b.total;
            a.empty = b.empty;
            return Ok(a);
        };
        let mut prev: HashMap<i64, (i64, StoredEdge)> = HashMap::new();
        let mut queue = VecDeque::from([(f.rowid, 0u32)]);
        let mut seen = HashSet::from([f.rowid]);
        let mut reached = false;
        while let Some((cur, d)) = queue.pop_front() {
            if cur == t.rowid {
                reached = true;
                break;
            }
            if d >= MAX_DEPTH {
                continue;
            }
            for e in self.store.edges_from_range(cur, cur)? {
                let Some(dst) = e.dst.filter(|_| e.kind == SiteKind::Call) else {
                    continue;
                };
                if seen.insert(dst) {
                    prev.insert(dst, (cur, e));
                    queue.push_back((dst, d + 1));
                }
            }
        }
        if !reached {
            a.empty = Some(Empty::Resolved);
            return Ok(a);
        }
        let mut chain = Vec::new();
        let mut cur = t.rowid;
        while let Some((p, e)) = prev.get(&cur) {
            chain.push((cur, e.clone()));
            cur = *p;
        }
        chain.reverse();
        for (i, (id, e)) in chain.iter().enumerate() {
            if let Some(n) = self.node(*id)? {
                a.nodes.push(self.graph_node(&n, i as u32 + 1, e));
            }
        }
        a.total = a.nodes.len();
        Ok(a)
    }

    /// Every resolved and ambiguous edge, for export and evaluation.
    pub fn export_edges(&self) -> Result<Vec<ExportEdge>> {
        let edges = self.store.all_edges()?;
        let mut ids: Vec<i64> = edges
            .iter()
            .flat_map(|e| [e.src, e.dst.unwrap_or(0)])
            .collect();
        ids.sort_unstable();
        ids.dedup();
        let nodes: HashMap<i64, NodeRecord> = self
            .store
            .nodes_by_rowids(&ids)?
            .into_iter()
            .map(|n| (n.rowid, n))
            .collect();
        let mut name_lines: BTreeMap<i64, u32> = BTreeMap::new();
        let mut out = Vec::with_capacity(edges.len());
        for e in edges {
            let (Some(s), Some(d)) = (nodes.get(&e.src), e.dst.and_then(|d| nodes.get(&d))) else {
                continue;
            };
            let dst_line = *name_lines
                .entry(d.rowid)
                .or_insert_with(|| self.name_line(d));
            out.push(ExportEdge {
                path: s.file_path.clone(),
                line: e.line,
                col: e.col,
                kind: e.kind.as_str().to_string(),
                status: status_name(e.status).to_string(),
                src_qualified: s.qualified_name.clone(),
                dst_path: d.file_path.clone(),
                dst_line,
                dst_qualified: d.qualified_name.clone(),
                dst_type: d.node_type.clone(),
                confidence: e.confidence,
                how: How::name(e.how).to_string(),
            });
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::{word_at, word_columns};

    #[test]
    fn a_private_name_keeps_its_hash() {
        let line = "  this.#dispatch(1); dispatch()";
        let want = Some((7, 16, "#dispatch".to_string()));
        assert_eq!(word_at(line, 7), want);
        assert_eq!(word_at(line, 10), want);
        assert_eq!(word_at(line, 22), Some((21, 29, "dispatch".to_string())));
        assert_eq!(word_columns(line, "#dispatch"), vec![7]);
        assert_eq!(word_columns(line, "dispatch"), vec![21]);
    }
}
