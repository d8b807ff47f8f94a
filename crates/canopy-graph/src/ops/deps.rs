//! File and package dependencies from the resolved edges: dependencies
//! and dependents of one file or package, the dependency graph, and
//! import cycles (Tarjan's strongly connected components).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::{Deserialize, Serialize};

use super::{FileRanges, dir_of};
use crate::error::Result;
use crate::nav::{Empty, Graph};
use crate::store::graph::STATUS_RESOLVED;

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

impl Graph<'_> {
    /// Every file's (id, path, node range), and a lookup from a node id to its index there.
    pub(super) fn node_files(&self) -> Result<(FileRanges, impl Fn(i64) -> Option<usize> + '_)> {
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
    pub(super) fn dep_edges(&self, level: Level) -> Result<BTreeMap<(String, String), u64>> {
        let (ranges, file_of) = self.node_files()?;
        let key = |i: usize| -> String {
            let p = &ranges[i].1;
            match level {
                Level::File => p.clone(),
                Level::Package => dir_of(p).to_string(),
            }
        };
        let mut out: BTreeMap<(String, String), u64> = BTreeMap::new();
        for e in self.analysis_edges()? {
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

    pub(super) fn dep_answer(
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
        let max = max.clamp(1, self.result_cap());
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
        let max = max_results.clamp(1, self.result_cap());
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
        let max = max_results.clamp(1, self.result_cap());
        cycles.truncate(max);
        Ok(CycleAnswer {
            level,
            cycles,
            total,
            truncated: total > max,
        })
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
