//! Whole-graph operations over resolved edges: implementations and
//! implements, type hierarchy, impact, file and package dependencies,
//! circular dependencies (Tarjan SCC), hotspots (fan-in / fan-out), unused
//! symbols and the dependency graph. Like [`super::nav`], they read a store
//! snapshot through [`Graph`] and return bounded, serialisable answers.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use serde::{Deserialize, Serialize};

use super::nav::{Empty, Graph, GraphAnswer, MAX_RESULTS};
use crate::error::Result;
use crate::handle::HandleId;
use crate::model::Handle;
use crate::store::graph::{STATUS_RESOLVED, StoredEdge};
use crate::store::graph_rows::EdgeKind;
use crate::store::read::NodeRecord;

/// Files as (id, path, first node id, last node id).
type FileRanges = Vec<(i64, String, i64, i64)>;

/// `how` code of a type relation (bases, trait impls, satisfied interfaces).
const HOW_BASE: u8 = 7;

/// Whether dependencies are counted between files or packages (directories).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    /// Files.
    #[default]
    File,
    /// Directories.
    Package,
}

/// A file or package with its dependency counts.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DepNode {
    /// Path of the file or directory (`.` for the root).
    pub name: String,
    /// Distinct nodes depending on it.
    pub fan_in: usize,
    /// Distinct nodes it depends on.
    pub fan_out: usize,
}

/// One dependency: `from` uses something defined in `to`, `weight` times.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DepEdge {
    /// The user.
    pub from: String,
    /// The provider.
    pub to: String,
    /// Resolved uses (calls, imports, types, other).
    pub weight: u64,
}

/// Dependencies of one file or package, or the whole dependency graph.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DepAnswer {
    /// `dependencies`, `dependents` or `dependency_graph`.
    pub op: String,
    /// File or package level.
    pub level: Level,
    /// Nodes (at most `max_results`).
    pub nodes: Vec<DepNode>,
    /// Edges between the returned nodes.
    pub edges: Vec<DepEdge>,
    /// Nodes before the cap.
    pub total: usize,
    /// Whether the cap cut the answer.
    pub truncated: bool,
    /// Which kind of empty, when `nodes` is empty.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub empty: Option<Empty>,
}

/// Cycles among files or packages.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CycleAnswer {
    /// File or package level.
    pub level: Level,
    /// Each strongly connected component of more than one node, largest first.
    pub cycles: Vec<Vec<String>>,
    /// Components before the cap.
    pub total: usize,
    /// Whether the cap cut the answer.
    pub truncated: bool,
}

/// A unit with many callers or callees.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Hotspot {
    /// The unit.
    pub handle: Handle,
    /// Its qualified name.
    pub qualified_name: Option<String>,
    /// Distinct units calling it.
    pub fan_in: usize,
    /// Distinct units it calls.
    pub fan_out: usize,
}

/// Hotspots, highest fan-in + fan-out first.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HotspotAnswer {
    /// The units.
    pub hotspots: Vec<Hotspot>,
    /// Units with any call edge.
    pub total: usize,
}

/// Definitions nothing resolved points at.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct UnusedAnswer {
    /// Candidates (not proof: dynamic uses are invisible).
    pub candidates: Vec<Handle>,
    /// Candidates before the cap.
    pub total: usize,
    /// Definitions left out because an unresolved call site has their name.
    pub maybe_used: usize,
    /// Whether the cap cut the answer.
    pub truncated: bool,
}

fn dir_of(path: &str) -> &str {
    path.rsplit_once('/').map_or(".", |(d, _)| d)
}

fn is_test_path(path: &str) -> bool {
    let file = path.rsplit('/').next().unwrap_or(path);
    path.split('/')
        .any(|p| p == "tests" || p == "test" || p == "testdata" || p == "__tests__")
        || file.starts_with("test_")
        || file.ends_with("_test.go")
        || file.ends_with("_test.py")
        || file.contains(".test.")
        || file.contains(".spec.")
        || file == "conftest.py"
}

fn is_entry_point(n: &NodeRecord) -> bool {
    let name = n.name.as_deref().unwrap_or_default();
    matches!(
        name,
        "main" | "init" | "new" | "default" | "setup" | "teardown"
    ) || (name.starts_with("__") && name.ends_with("__"))
        || name.starts_with("test")
        || name.starts_with("Test")
        || name.starts_with("Benchmark")
}

fn is_public(n: &NodeRecord) -> bool {
    let name = n.name.as_deref().unwrap_or_default();
    if n.file_path.ends_with(".go") {
        return name.starts_with(|c: char| c.is_uppercase());
    }
    !name.starts_with('_')
}

/// Tarjan's strongly connected components (iterative), over nodes `0..n`.
pub fn tarjan_scc(n: usize, adj: &[Vec<usize>]) -> Vec<Vec<usize>> {
    let mut index = vec![usize::MAX; n];
    let mut low = vec![0; n];
    let mut on_stack = vec![false; n];
    let mut stack = Vec::new();
    let mut out = Vec::new();
    let mut next = 0;
    for root in 0..n {
        if index[root] != usize::MAX {
            continue;
        }
        let mut work: Vec<(usize, usize)> = vec![(root, 0)];
        while let Some(&mut (v, ref mut i)) = work.last_mut() {
            if *i == 0 && index[v] == usize::MAX {
                index[v] = next;
                low[v] = next;
                next += 1;
                stack.push(v);
                on_stack[v] = true;
            }
            if let Some(&w) = adj[v].get(*i) {
                *i += 1;
                if index[w] == usize::MAX {
                    work.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
                continue;
            }
            work.pop();
            if let Some(&(u, _)) = work.last() {
                low[u] = low[u].min(low[v]);
            }
            if low[v] == index[v] {
                let mut comp = Vec::new();
                while let Some(w) = stack.pop() {
                    on_stack[w] = false;
                    comp.push(w);
                    if w == v {
                        break;
                    }
                }
                out.push(comp);
            }
        }
    }
    out
}

/// A unit's call degrees: (unit id, distinct callers, distinct callees).
pub(crate) type Degree = (i64, usize, usize);

impl Graph<'_> {
    /// Every file's (id, path, node range), and a lookup from a node id to its index there.
    fn node_files(&self) -> Result<(FileRanges, impl Fn(i64) -> Option<usize> + '_)> {
        let ranges = self.store.file_ranges()?;
        let mut by_lo: Vec<(i64, i64, usize)> = ranges
            .iter()
            .enumerate()
            .map(|(i, r)| (r.2, r.3, i))
            .collect();
        by_lo.sort_unstable();
        let find = move |id: i64| {
            let pos = by_lo.partition_point(|r| r.0 <= id);
            let r = by_lo.get(pos.checked_sub(1)?)?;
            (id <= r.1).then_some(r.2)
        };
        Ok((ranges, find))
    }

    /// Weighted dependency edges at `level` (uses in `from` of definitions in `to`, `from != to`).
    fn dep_edges(&self, level: Level) -> Result<BTreeMap<(String, String), u64>> {
        let (ranges, file_of) = self.node_files()?;
        let key = |i: usize| -> String {
            let p = &ranges[i].1;
            match level {
                Level::File => p.clone(),
                Level::Package => dir_of(p).to_string(),
            }
        };
        let mut out: BTreeMap<(String, String), u64> = BTreeMap::new();
        for e in self.store.all_edges()? {
            if e.status != STATUS_RESOLVED {
                continue;
            }
            let (Some(a), Some(b)) = (file_of(e.src), e.dst.and_then(&file_of)) else {
                continue;
            };
            let (ka, kb) = (key(a), key(b));
            if ka != kb {
                *out.entry((ka, kb)).or_insert(0) += 1;
            }
        }
        Ok(out)
    }

    fn dep_key(&self, target: &str, level: Level) -> Result<Option<String>> {
        let ranges = self.store.file_ranges()?;
        let t = target.trim_end_matches('/');
        Ok(match level {
            Level::File => ranges
                .iter()
                .map(|r| r.1.clone())
                .find(|p| p == t)
                .or_else(|| {
                    ranges
                        .iter()
                        .map(|r| r.1.clone())
                        .find(|p| p.ends_with(&format!("/{t}")))
                }),
            Level::Package => {
                let dirs: BTreeSet<String> =
                    ranges.iter().map(|r| dir_of(&r.1).to_string()).collect();
                dirs.iter()
                    .find(|d| *d == t)
                    .or_else(|| dirs.iter().find(|d| d.ends_with(&format!("/{t}"))))
                    .cloned()
            }
        })
    }

    fn dep_answer(
        &self,
        op: &str,
        level: Level,
        target: &str,
        outgoing: bool,
        max: usize,
        edges: &BTreeMap<(String, String), u64>,
    ) -> Result<DepAnswer> {
        let mut a = DepAnswer {
            op: op.to_string(),
            level,
            nodes: Vec::new(),
            edges: Vec::new(),
            total: 0,
            truncated: false,
            empty: None,
        };
        let Some(key) = self.dep_key(target, level)? else {
            a.empty = Some(Empty::TargetNotFound);
            return Ok(a);
        };
        let mut mine: Vec<DepEdge> = edges
            .iter()
            .filter(|((f, t), _)| if outgoing { *f == key } else { *t == key })
            .map(|((f, t), w)| DepEdge {
                from: f.clone(),
                to: t.clone(),
                weight: *w,
            })
            .collect();
        mine.sort_by(|x, y| {
            y.weight
                .cmp(&x.weight)
                .then(x.from.cmp(&y.from))
                .then(x.to.cmp(&y.to))
        });
        a.total = mine.len();
        let max = max.clamp(1, MAX_RESULTS);
        a.truncated = mine.len() > max;
        mine.truncate(max);
        let (fan_in, fan_out) = fans(edges);
        for e in &mine {
            let other = if outgoing { &e.to } else { &e.from };
            a.nodes.push(DepNode {
                name: other.clone(),
                fan_in: fan_in.get(other).copied().unwrap_or(0),
                fan_out: fan_out.get(other).copied().unwrap_or(0),
            });
        }
        a.edges = mine;
        if a.nodes.is_empty() {
            a.empty = Some(Empty::Resolved);
        }
        Ok(a)
    }

    /// Files (or packages) `target` depends on.
    pub fn dependencies(
        &self,
        target: &str,
        level: Level,
        max_results: usize,
    ) -> Result<DepAnswer> {
        let edges = self.dep_edges(level)?;
        self.dep_answer("dependencies", level, target, true, max_results, &edges)
    }

    /// Files (or packages) that depend on `target`.
    pub fn dependents(&self, target: &str, level: Level, max_results: usize) -> Result<DepAnswer> {
        let edges = self.dep_edges(level)?;
        self.dep_answer("dependents", level, target, false, max_results, &edges)
    }

    /// The dependency graph at `level`, restricted to paths under `prefix`, heaviest edges first.
    pub fn dependency_graph(
        &self,
        level: Level,
        prefix: Option<&str>,
        max_results: usize,
    ) -> Result<DepAnswer> {
        let edges = self.dep_edges(level)?;
        let (fan_in, fan_out) = fans(&edges);
        let inside = |p: &str| prefix.is_none_or(|x| p.starts_with(x.trim_start_matches("./")));
        let mut list: Vec<DepEdge> = edges
            .iter()
            .filter(|((f, t), _)| inside(f) && inside(t))
            .map(|((f, t), w)| DepEdge {
                from: f.clone(),
                to: t.clone(),
                weight: *w,
            })
            .collect();
        list.sort_by(|x, y| {
            y.weight
                .cmp(&x.weight)
                .then(x.from.cmp(&y.from))
                .then(x.to.cmp(&y.to))
        });
        let max = max_results.clamp(1, MAX_RESULTS);
        let total = list.len();
        list.truncate(max);
        let names: BTreeSet<&String> = list.iter().flat_map(|e| [&e.from, &e.to]).collect();
        let nodes = names
            .into_iter()
            .map(|n| DepNode {
                name: n.clone(),
                fan_in: fan_in.get(n).copied().unwrap_or(0),
                fan_out: fan_out.get(n).copied().unwrap_or(0),
            })
            .collect::<Vec<_>>();
        Ok(DepAnswer {
            op: "dependency_graph".into(),
            level,
            empty: nodes.is_empty().then_some(Empty::Resolved),
            nodes,
            edges: list,
            total,
            truncated: total > max,
        })
    }

    /// Cycles (strongly connected components) among files or packages.
    pub fn circular_dependencies(&self, level: Level, max_results: usize) -> Result<CycleAnswer> {
        let edges = self.dep_edges(level)?;
        let mut ids: BTreeMap<&String, usize> = BTreeMap::new();
        for (f, t) in edges.keys() {
            let n = ids.len();
            ids.entry(f).or_insert(n);
            let n = ids.len();
            ids.entry(t).or_insert(n);
        }
        let names: Vec<String> = {
            let mut v = vec![String::new(); ids.len()];
            for (k, &i) in &ids {
                v[i] = (*k).clone();
            }
            v
        };
        let mut adj = vec![Vec::new(); ids.len()];
        for (f, t) in edges.keys() {
            adj[ids[f]].push(ids[t]);
        }
        let mut cycles: Vec<Vec<String>> = tarjan_scc(ids.len(), &adj)
            .into_iter()
            .filter(|c| c.len() > 1)
            .map(|c| {
                let mut v: Vec<String> = c.into_iter().map(|i| names[i].clone()).collect();
                v.sort();
                v
            })
            .collect();
        cycles.sort_by(|a, b| b.len().cmp(&a.len()).then(a.cmp(b)));
        let total = cycles.len();
        let max = max_results.clamp(1, MAX_RESULTS);
        cycles.truncate(max);
        Ok(CycleAnswer {
            level,
            cycles,
            total,
            truncated: total > max,
        })
    }

    /// Every unit with resolved call edges as (unit, distinct callers,
    /// distinct callees), the busiest first (ties by id).
    pub(crate) fn degrees(&self) -> Result<Vec<Degree>> {
        let mut callers: HashMap<i64, HashSet<i64>> = HashMap::new();
        let mut callees: HashMap<i64, HashSet<i64>> = HashMap::new();
        for e in self.store.all_edges()? {
            if e.kind != EdgeKind::Call || e.status != STATUS_RESOLVED {
                continue;
            }
            let Some(d) = e.dst else { continue };
            callers.entry(d).or_default().insert(e.src);
            callees.entry(e.src).or_default().insert(d);
        }
        let mut all: Vec<Degree> = callers
            .keys()
            .chain(callees.keys())
            .copied()
            .collect::<BTreeSet<_>>()
            .into_iter()
            .map(|id| {
                (
                    id,
                    callers.get(&id).map_or(0, HashSet::len),
                    callees.get(&id).map_or(0, HashSet::len),
                )
            })
            .collect();
        all.sort_by(|a, b| (b.1 + b.2).cmp(&(a.1 + a.2)).then(a.0.cmp(&b.0)));
        Ok(all)
    }

    /// Units with the most distinct callers plus callees (resolved call edges).
    pub fn hotspots(&self, top: usize) -> Result<HotspotAnswer> {
        let degrees = match self.cache {
            Some(cache) => {
                let key = format!(
                    "{}\u{0}{}",
                    self.store.generation()?,
                    self.store
                        .meta(crate::store::meta_keys::LAST_INDEXED)?
                        .unwrap_or_default()
                );
                cache.degrees(key, || self.degrees())?
            }
            None => std::sync::Arc::new(self.degrees()?),
        };
        let total = degrees.len();
        let all: Vec<Degree> = degrees
            .iter()
            .take(top.clamp(1, MAX_RESULTS))
            .copied()
            .collect();
        let ids: Vec<i64> = all.iter().map(|a| a.0).collect();
        let nodes: HashMap<i64, NodeRecord> = self
            .store
            .nodes_by_rowids(&ids)?
            .into_iter()
            .map(|n| (n.rowid, n))
            .collect();
        let hotspots = all
            .into_iter()
            .filter_map(|(id, fi, fo)| {
                let n = nodes.get(&id)?;
                Some(Hotspot {
                    handle: self.handle(n),
                    qualified_name: n.qualified_name.clone(),
                    fan_in: fi,
                    fan_out: fo,
                })
            })
            .collect();
        Ok(HotspotAnswer { hotspots, total })
    }

    /// Definitions with no resolved use, except tests, entry points and
    /// (unless `include_public`) public ones; those whose name an unresolved
    /// call site has are counted in `maybe_used`, not listed.
    pub fn unused_symbols(&self, include_public: bool, max_results: usize) -> Result<UnusedAnswer> {
        let used: HashSet<i64> = self
            .store
            .all_edges()?
            .into_iter()
            .filter_map(|e| e.dst)
            .collect();
        // Names some raw reference uses: a definition with such a name may be
        // used through a site resolution could not bind.
        let unresolved = self.store.used_ref_names()?;
        let ids: Vec<i64> = self
            .store
            .definition_ids()?
            .into_iter()
            .filter(|id| !used.contains(id))
            .collect();
        let mut nodes = self.store.nodes_by_rowids(&ids)?;
        nodes.sort_by(|a, b| {
            a.file_path
                .cmp(&b.file_path)
                .then(a.start_byte.cmp(&b.start_byte))
        });
        let mut maybe_used = 0;
        let mut out = Vec::new();
        for n in nodes {
            if is_test_path(&n.file_path)
                || is_entry_point(&n)
                || (!include_public && is_public(&n))
            {
                continue;
            }
            if n.name.as_deref().is_some_and(|x| unresolved.contains(x)) {
                maybe_used += 1;
                continue;
            }
            out.push(n);
        }
        let total = out.len();
        let max = max_results.clamp(1, MAX_RESULTS);
        Ok(UnusedAnswer {
            candidates: out.iter().take(max).map(|n| self.handle(n)).collect(),
            total,
            maybe_used,
            truncated: total > max,
        })
    }

    fn base_edges_to(&self, id: i64) -> Result<Vec<StoredEdge>> {
        Ok(self
            .store
            .edges_to(id)?
            .into_iter()
            .filter(|e| e.how == HOW_BASE)
            .collect())
    }

    fn base_edges_from(&self, n: &NodeRecord) -> Result<Vec<StoredEdge>> {
        let mut out: Vec<StoredEdge> = self
            .store
            .edges_from_range(n.rowid, n.rowid)?
            .into_iter()
            .filter(|e| e.how == HOW_BASE)
            .collect();
        // Rust: a struct's trait impls are `impl` units of the same name.
        if let Some(name) = n.name.as_deref() {
            for imp in self
                .store
                .nodes_by_name(name, crate::store::read::NameMatch::Equal, 200)?
            {
                if imp.node_type == "impl"
                    && imp.name.as_deref() == Some(name)
                    && imp.rowid != n.rowid
                {
                    out.extend(
                        self.store
                            .edges_from_range(imp.rowid, imp.rowid)?
                            .into_iter()
                            .filter(|e| e.how == HOW_BASE),
                    );
                }
            }
        }
        Ok(out)
    }

    fn relation(
        &self,
        op: &str,
        target: &str,
        max_results: usize,
        down: bool,
        depth: u32,
    ) -> Result<GraphAnswer> {
        let (mut a, t) = self.with_target(op, target)?;
        let Some(t) = t else { return Ok(a) };
        let max = max_results.clamp(1, MAX_RESULTS);
        let mut seen = HashSet::from([t.rowid]);
        let mut frontier = vec![t];
        for d in 1..=depth.max(1) {
            let mut next = Vec::new();
            for n in &frontier {
                let edges = if down {
                    self.base_edges_to(n.rowid)?
                } else {
                    self.base_edges_from(n)?
                };
                for e in edges {
                    let other = if down { e.src } else { e.dst.unwrap_or(0) };
                    if other <= 0 || !seen.insert(other) {
                        continue;
                    }
                    if let Some(o) = self.node(other)? {
                        a.total += 1;
                        if a.nodes.len() < max {
                            let mut g = self.graph_node(&o, d, &e);
                            g.edge_kind = if down {
                                "subtype".into()
                            } else {
                                "supertype".into()
                            };
                            a.nodes.push(g);
                        } else {
                            a.truncated = true;
                        }
                        next.push(o);
                    }
                }
            }
            frontier = next;
        }
        if a.nodes.is_empty() {
            a.empty = Some(Empty::Resolved);
        }
        Ok(a)
    }

    /// Types that extend or implement `target` (bases, trait impls, Go method sets).
    pub fn implementations(&self, target: &str, max_results: usize) -> Result<GraphAnswer> {
        self.relation("implementations", target, max_results, true, 1)
    }

    /// Types `target` extends or implements.
    pub fn implements(&self, target: &str, max_results: usize) -> Result<GraphAnswer> {
        self.relation("implements", target, max_results, false, 1)
    }

    /// Supertypes (edge kind `supertype`) and subtypes (`subtype`) of `target`, up to `depth`.
    pub fn type_hierarchy(
        &self,
        target: &str,
        depth: u32,
        max_results: usize,
    ) -> Result<GraphAnswer> {
        let depth = depth.clamp(1, super::nav::MAX_DEPTH);
        let mut up = self.relation("type_hierarchy", target, max_results, false, depth)?;
        if up.target.is_none() {
            return Ok(up);
        }
        let down = self.relation("type_hierarchy", target, max_results, true, depth)?;
        up.total += down.total;
        up.truncated |= down.truncated;
        up.nodes.extend(down.nodes);
        up.empty = up.nodes.is_empty().then_some(Empty::Resolved);
        Ok(up)
    }

    /// What changes if `target` changes: `nodes` must change (direct,
    /// resolved, confident uses); `review` needs a look (transitive callers
    /// up to depth 3, ambiguous or guessed edges); unresolved sites with the
    /// target's name are listed too.
    pub fn impact(&self, target: &str, max_results: usize) -> Result<GraphAnswer> {
        let mut direct = self.references(target, max_results)?;
        direct.op = "impact".into();
        if direct.target.is_none() {
            return Ok(direct);
        }
        let (must, weak): (Vec<_>, Vec<_>) = direct
            .nodes
            .into_iter()
            .partition(|n| n.status == "resolved" && n.confidence >= 90);
        let must_ids: HashSet<String> = must.iter().map(|n| n.handle.id.to_string()).collect();
        let transitive = self.callers(target, 3, max_results)?;
        let mut review: Vec<_> = weak;
        for n in transitive.nodes {
            if n.depth > 1 && !must_ids.contains(&n.handle.id.to_string()) {
                review.push(n);
            }
        }
        direct.nodes = must;
        direct.review = review;
        direct.total = direct.nodes.len() + direct.review.len();
        direct.empty = (direct.nodes.is_empty() && direct.review.is_empty()).then(|| {
            if direct.unresolved_count > 0 {
                Empty::Unresolved {
                    count: direct.unresolved_count,
                    name: direct
                        .target
                        .as_ref()
                        .map(|t| t.preview.clone())
                        .unwrap_or_default(),
                }
            } else {
                Empty::Resolved
            }
        });
        Ok(direct)
    }
}

fn fans(
    edges: &BTreeMap<(String, String), u64>,
) -> (HashMap<String, usize>, HashMap<String, usize>) {
    let mut fan_in: HashMap<String, usize> = HashMap::new();
    let mut fan_out: HashMap<String, usize> = HashMap::new();
    for (f, t) in edges.keys() {
        *fan_out.entry(f.clone()).or_insert(0) += 1;
        *fan_in.entry(t.clone()).or_insert(0) += 1;
    }
    (fan_in, fan_out)
}

#[cfg(test)]
mod tests {
    use super::tarjan_scc;

    #[test]
    fn tarjan_finds_cycles_and_leaves_dags_alone() {
        // 0 -> 1 -> 2 -> 0, 2 -> 3, 3 -> 4 -> 3, 5 alone
        let adj = vec![vec![1], vec![2], vec![0, 3], vec![4], vec![3], vec![]];
        let mut comps: Vec<Vec<usize>> = tarjan_scc(6, &adj)
            .into_iter()
            .map(|mut c| {
                c.sort();
                c
            })
            .collect();
        comps.sort();
        assert_eq!(comps, vec![vec![0, 1, 2], vec![3, 4], vec![5]]);
        assert_eq!(tarjan_scc(3, &[vec![1], vec![2], vec![]]).len(), 3);
    }
}

/// The declaration of a unit up to its body: from the line its name is on,
/// until a line that opens the body (`{`, `:`, `=>`, `=`) or 5 lines.
pub(crate) fn signature_of(text: &str, n: &NodeRecord) -> String {
    let start = n.preview_start.min(text.len());
    let end = n.end_byte.min(text.len()).max(start);
    let mut out = Vec::new();
    for line in text[start..end].lines().take(5) {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        out.push(line.to_string());
        if line.ends_with('{') || line.ends_with(':') || line.ends_with("=>") || line.ends_with('=')
        {
            break;
        }
    }
    let joined = out.join(" ");
    let collapsed: Vec<&str> = joined.split_whitespace().collect();
    let mut sig = collapsed.join(" ");
    for body in [" {", "{"] {
        if let Some(stripped) = sig.strip_suffix(body) {
            sig = stripped.to_string();
            break;
        }
    }
    sig
}

/// The comma-separated items inside the signature's first parentheses
/// (nested brackets kept together).
fn parameters_of(signature: &str) -> Vec<String> {
    let Some(open) = signature.find('(') else {
        return Vec::new();
    };
    let mut depth = 0i32;
    let mut current = String::new();
    let mut out = Vec::new();
    let mut prev = ' ';
    for c in signature[open + 1..].chars() {
        // `->` and `=>` are arrows, not closing angle brackets.
        let arrow = c == '>' && matches!(prev, '-' | '=');
        prev = c;
        match c {
            '(' | '[' | '{' | '<' => depth += 1,
            ')' if depth == 0 => break,
            '>' if arrow => {}
            ')' | ']' | '}' | '>' => depth -= 1,
            ',' if depth == 0 => {
                out.push(std::mem::take(&mut current));
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    out.push(current);
    out.into_iter()
        .map(|p| p.trim().to_string())
        .filter(|p| !p.is_empty())
        .collect()
}

impl Graph<'_> {
    /// A node related to the answer's target by structure (enclosing scope,
    /// member), not by a resolved edge: certain, with `edge_kind` = `how` = `kind`.
    fn structural_node(
        &self,
        n: &NodeRecord,
        depth: u32,
        kind: &str,
        parent: Option<HandleId>,
    ) -> super::nav::GraphNode {
        super::nav::GraphNode {
            handle: self.handle(n),
            qualified_name: n.qualified_name.clone(),
            depth,
            edge_kind: kind.into(),
            confidence: 100,
            status: "resolved".into(),
            how: kind.into(),
            sites: Vec::new(),
            parent,
        }
    }

    /// The scope chain at `path:line[:col]`: the file, then every unit
    /// enclosing the line, outermost first (`depth` is the nesting level);
    /// `target` is the innermost.
    pub fn scope(&self, path: &str, line: u32) -> Result<GraphAnswer> {
        let mut a = self.answer("scope");
        let Some(file) = self.store.file_node(path)? else {
            a.empty = Some(Empty::TargetNotFound);
            return Ok(a);
        };
        let (lo, hi) = self.store.file_node_range(path)?;
        let mut chain = self.store.nodes_by_rowids(&(lo..=hi).collect::<Vec<_>>())?;
        chain.retain(|n| {
            n.rowid != file.rowid && n.name.is_some() && n.start_line <= line && line <= n.end_line
        });
        chain.sort_by_key(|n| (n.start_byte, std::cmp::Reverse(n.end_byte)));
        let innermost = chain.last().cloned().unwrap_or_else(|| file.clone());
        a.target = Some(self.handle(&innermost));
        a.nodes.push(self.structural_node(&file, 0, "scope", None));
        for (i, n) in chain.iter().enumerate() {
            a.nodes
                .push(self.structural_node(n, i as u32 + 1, "scope", None));
        }
        a.total = a.nodes.len();
        Ok(a)
    }

    /// A unit in detail: signature, parameters, use counts, and its named
    /// members as `nodes` (`edge_kind: "member"`).
    pub fn detail(&self, target: &str, max_results: usize) -> Result<GraphAnswer> {
        let (mut a, node) = self.with_target("detail", target)?;
        let Some(node) = node else {
            return Ok(a);
        };
        let signature = self
            .file_text(&node.file_path, &node.content_hash)
            .map(|t| signature_of(&t, &node))
            .unwrap_or_else(|| node.qualified_name.clone().unwrap_or_default());
        // Only callables have parameters (a class's parentheses hold bases).
        let callable = matches!(
            node.node_type.as_str(),
            "function" | "method" | "arrow_function" | "constructor"
        );
        let parameters = if callable {
            parameters_of(&signature)
        } else {
            Vec::new()
        };
        let mut members = self.store.children_of(&[node.rowid])?;
        members.retain(|m| m.name.is_some());
        // Resolved edges only, as `symbols` counts them: an ambiguous site
        // is a candidate, not a use.
        let mut uses = self.store.edges_to(node.rowid)?;
        uses.retain(|e| e.status == STATUS_RESOLVED);
        let callers = uses.iter().filter(|e| e.kind == EdgeKind::Call).count();
        let callees = self
            .out_edges(&node)?
            .iter()
            .filter(|e| e.kind == EdgeKind::Call && e.status == STATUS_RESOLVED && e.dst.is_some())
            .count();
        a.total = members.len();
        a.truncated = members.len() > max_results;
        for m in members.iter().take(max_results) {
            let parent = HandleId::parse(&node.handle);
            a.nodes.push(self.structural_node(m, 1, "member", parent));
        }
        a.detail = Some(super::nav::UnitDetail {
            signature,
            parameters,
            members: members.len(),
            callers,
            callees,
            references: uses.len(),
        });
        Ok(a)
    }
}

#[cfg(test)]
mod detail_tests {
    use super::*;

    #[test]
    fn parameters_split_at_top_level_commas() {
        assert_eq!(
            parameters_of("def parse(self, text: str, opts: dict[str, int] = {}) -> Ast:"),
            ["self", "text: str", "opts: dict[str, int] = {}"]
        );
        assert_eq!(
            parameters_of("pub fn new(map: HashMap<K, V>, f: impl Fn(u8) -> u8) -> Self"),
            ["map: HashMap<K, V>", "f: impl Fn(u8) -> u8"]
        );
        assert!(parameters_of("class Parser:").is_empty());
        assert!(parameters_of("fn f()").is_empty());
    }
}

/// Which definitions `symbols` keeps by visibility.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Visibility {
    /// Both.
    #[default]
    Any,
    /// Public API only (not `_private`, not a lower-case Go name).
    Exported,
    /// Everything else.
    Private,
}

/// How `symbols` orders its entries.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SymbolSort {
    /// Most resolved references first.
    #[default]
    Refs,
    /// By qualified name.
    Name,
    /// By path, then position.
    Path,
}

/// How `symbols` and `search` filter, sort and page definitions.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SymbolFilter {
    /// Only definitions under this path prefix.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path_prefix: Option<String>,
    /// Name pattern: `*` matches any run of characters; without `*`, a
    /// case-insensitive substring of the name or qualified name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Node types to keep (`function`, `method`, `class`, `struct`, …; empty: all).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kinds: Vec<String>,
    /// Exported, private or any (default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub visibility: Option<Visibility>,
    /// Least resolved references (inclusive).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_refs: Option<usize>,
    /// Most resolved references (inclusive).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_refs: Option<usize>,
    /// Order of the entries (default: most referenced first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sort: Option<SymbolSort>,
    /// Entries to skip (pagination; pass `next_offset` back).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<usize>,
}

/// One definition in a `symbols` or `search` answer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SymbolEntry {
    /// The definition.
    pub handle: Handle,
    /// `Type.method`, `pkg.Name`, …
    pub qualified_name: Option<String>,
    /// Resolved references to it (any kind).
    pub refs: usize,
    /// Whether it is public API (not `_private`, not a lower-case Go name).
    pub exported: bool,
}

/// A page of definitions.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SymbolsAnswer {
    /// `symbols` or `search`.
    pub op: String,
    /// This page.
    pub symbols: Vec<SymbolEntry>,
    /// Matching definitions in all.
    pub total: usize,
    /// Whether more pages follow.
    pub truncated: bool,
    /// The `offset` of the next page, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_offset: Option<usize>,
}

/// Whether `text` matches `pattern` (`*` wildcards, ASCII case-insensitive).
fn wildcard_match(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (
        pattern.to_lowercase().chars().collect(),
        text.to_lowercase().chars().collect(),
    );
    // Iterative matcher with one backtrack point per star.
    let (mut pi, mut ti, mut star, mut mark) = (0usize, 0usize, None, 0usize);
    while ti < t.len() {
        if pi < p.len() && p[pi] != '*' && p[pi] == t[ti] {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ti;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

impl Graph<'_> {
    /// Definitions matching `filter`, sorted and paged (`max_results` per page).
    pub fn symbols(
        &self,
        op: &str,
        filter: &SymbolFilter,
        max_results: usize,
    ) -> Result<SymbolsAnswer> {
        let mut refs: HashMap<i64, usize> = HashMap::new();
        for e in self.store.all_edges()? {
            if e.status == STATUS_RESOLVED
                && let Some(d) = e.dst
            {
                *refs.entry(d).or_default() += 1;
            }
        }
        let ids = self.store.definition_ids()?;
        let mut nodes = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(5_000) {
            nodes.extend(self.store.nodes_by_rowids(chunk)?);
        }
        let name = filter
            .name
            .as_deref()
            .map(str::trim)
            .filter(|n| !n.is_empty());
        let prefix = filter
            .path_prefix
            .as_deref()
            .map(|p| p.trim().trim_start_matches("./"))
            .filter(|p| !p.is_empty() && *p != ".");
        let visibility = filter.visibility.unwrap_or_default();
        let mut kept: Vec<(NodeRecord, usize, bool)> = nodes
            .into_iter()
            .filter(|n| prefix.is_none_or(|p| n.file_path.starts_with(p)))
            .filter(|n| filter.kinds.is_empty() || filter.kinds.contains(&n.node_type))
            .filter(|n| {
                name.is_none_or(|pat| {
                    let simple = n.name.as_deref().unwrap_or_default();
                    let qualified = n.qualified_name.as_deref().unwrap_or(simple);
                    if pat.contains('*') {
                        wildcard_match(pat, simple) || wildcard_match(pat, qualified)
                    } else {
                        let pat = pat.to_lowercase();
                        qualified.to_lowercase().contains(&pat)
                    }
                })
            })
            .map(|n| {
                let r = refs.get(&n.rowid).copied().unwrap_or(0);
                let exported = super::nav::is_exported(&n);
                (n, r, exported)
            })
            .filter(|(_, r, _)| filter.min_refs.is_none_or(|m| *r >= m))
            .filter(|(_, r, _)| filter.max_refs.is_none_or(|m| *r <= m))
            .filter(|(_, _, exported)| match visibility {
                Visibility::Exported => *exported,
                Visibility::Private => !*exported,
                Visibility::Any => true,
            })
            .collect();
        match filter.sort.unwrap_or_default() {
            SymbolSort::Name => kept.sort_by(|a, b| {
                a.0.qualified_name
                    .cmp(&b.0.qualified_name)
                    .then(a.0.rowid.cmp(&b.0.rowid))
            }),
            SymbolSort::Path => kept.sort_by(|a, b| {
                (a.0.file_path.as_str(), a.0.start_byte)
                    .cmp(&(b.0.file_path.as_str(), b.0.start_byte))
            }),
            SymbolSort::Refs => kept.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.rowid.cmp(&b.0.rowid))),
        }
        let total = kept.len();
        let offset = filter.offset.unwrap_or(0).min(total);
        let page: Vec<SymbolEntry> = kept
            .iter()
            .skip(offset)
            .take(max_results)
            .map(|(n, r, exported)| SymbolEntry {
                handle: self.handle(n),
                qualified_name: n.qualified_name.clone(),
                refs: *r,
                exported: *exported,
            })
            .collect();
        let end = offset + page.len();
        Ok(SymbolsAnswer {
            op: op.to_string(),
            symbols: page,
            total,
            truncated: end < total,
            next_offset: (end < total).then_some(end),
        })
    }
}

#[cfg(test)]
mod symbol_tests {
    use super::wildcard_match;

    #[test]
    fn wildcards_match_like_a_shell() {
        assert!(wildcard_match("parse*", "parse_expr"));
        assert!(wildcard_match("*Parser*", "pkg.BigParser.run"));
        assert!(wildcard_match("P*r", "parser"));
        assert!(!wildcard_match("parse*", "reparse"));
        assert!(wildcard_match("*", ""));
        assert!(!wildcard_match("a*b*c", "acb"));
    }
}

/// A file or a package (directory) at a glance.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SummaryAnswer {
    /// `summary` (a file) or `package_summary` (a directory).
    pub op: String,
    /// The file or directory summarised.
    pub target: String,
    /// Indexed files under it.
    pub files: usize,
    /// Files per language.
    pub languages: BTreeMap<String, usize>,
    /// Units per node type (definitions, chunks, sections, …).
    pub units_by_kind: BTreeMap<String, usize>,
    /// Tokens of its text.
    pub tokens: u64,
    /// Its most referenced definitions.
    pub top_symbols: Vec<SymbolEntry>,
    /// Files (or packages) it depends on, heaviest first.
    pub dependencies: Vec<DepNode>,
    /// Files (or packages) that depend on it, heaviest first.
    pub dependents: Vec<DepNode>,
    /// `target_not_found` when nothing is indexed under the target.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub empty: Option<Empty>,
}

impl Graph<'_> {
    /// Summarises a file (`summary`) or a directory (`package_summary`):
    /// files, languages, units by kind, tokens, its most referenced
    /// definitions and its dependencies and dependents (at the package
    /// level for a directory).
    pub fn summary(&self, op: &str, target: &str, max_results: usize) -> Result<SummaryAnswer> {
        let target = target.trim().trim_end_matches('/');
        let package = op == "package_summary";
        let max = max_results.clamp(1, MAX_RESULTS);
        let mut a = SummaryAnswer {
            op: op.to_string(),
            target: if target.is_empty() {
                ".".into()
            } else {
                target.to_string()
            },
            files: 0,
            languages: BTreeMap::new(),
            units_by_kind: BTreeMap::new(),
            tokens: 0,
            top_symbols: Vec::new(),
            dependencies: Vec::new(),
            dependents: Vec::new(),
            empty: None,
        };
        let under = |path: &str| {
            if package {
                target.is_empty() || target == "." || path.starts_with(&format!("{target}/"))
            } else {
                path == target
            }
        };
        let files: Vec<(i64, String, i64, i64)> = self
            .store
            .file_ranges()?
            .into_iter()
            .filter(|(_, p, _, _)| under(p))
            .collect();
        if files.is_empty() {
            a.empty = Some(Empty::TargetNotFound);
            return Ok(a);
        }
        a.files = files.len();
        for (_, path, lo, hi) in &files {
            *a.languages
                .entry(crate::lang::Language::from_path(path).as_str().to_string())
                .or_default() += 1;
            for n in self
                .store
                .nodes_by_rowids(&(*lo..=*hi).collect::<Vec<_>>())?
            {
                if n.node_type == "file" {
                    a.tokens += u64::from(n.token_count);
                } else {
                    *a.units_by_kind.entry(n.node_type).or_default() += 1;
                }
            }
        }
        let prefix = if package {
            (!target.is_empty() && target != ".").then(|| format!("{target}/"))
        } else {
            Some(target.to_string())
        };
        let filter = SymbolFilter {
            path_prefix: prefix,
            ..SymbolFilter::default()
        };
        let mut top = self.symbols(op, &filter, max.min(10))?.symbols;
        if !package {
            top.retain(|s| s.handle.file_path == target);
        }
        a.top_symbols = top;
        let level = if package { Level::Package } else { Level::File };
        let key = if target.is_empty() { "." } else { target };
        // One pass over the edges serves both directions.
        let edges = self.dep_edges(level)?;
        a.dependencies = self
            .dep_answer("dependencies", level, key, true, max.min(20), &edges)?
            .nodes;
        a.dependents = self
            .dep_answer("dependents", level, key, false, max.min(20), &edges)?
            .nodes;
        Ok(a)
    }
}
