//! Type relations and change impact from the resolved edges:
//! implementations and what a type implements (the `base` edges), the
//! type hierarchy, and what a change to a unit reaches.

use std::collections::HashSet;

use super::HOW_BASE;
use crate::error::Result;
use crate::nav::{Empty, Graph, GraphAnswer};
use crate::store::graph::StoredEdge;
use crate::store::read::NodeRecord;

impl Graph<'_> {
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
        let max = max_results.clamp(1, self.result_cap());
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
        let depth = depth.clamp(1, crate::nav::MAX_DEPTH);
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
        if direct.empty.is_some()
            && let (_, Some(t)) = self.with_target("impact", target)?
        {
            direct.hint = Some(self.empty_impact_hint(&t, direct.unresolved_count)?);
        }
        Ok(direct)
    }

    /// Why nothing is reached from `t`, and where to look instead. A
    /// method that overrides or implements a supertype's member is reached
    /// through that member (dynamic dispatch), so the hint names it; a
    /// name called only on receivers of unknown type points at those
    /// unresolved sites; anything else has no static use at all.
    fn empty_impact_hint(&self, t: &NodeRecord, unresolved: u64) -> Result<String> {
        let qn = t
            .qualified_name
            .as_deref()
            .or(t.name.as_deref())
            .unwrap_or_default();
        let name = t.name.as_deref().unwrap_or_default();
        let owner = self.owner_type(t)?;
        let supers: Vec<NodeRecord> = match &owner {
            Some(o) => {
                let mut out = Vec::new();
                for e in self.base_edges_from(o)? {
                    if let Some(n) = e.dst.map(|d| self.node(d)).transpose()?.flatten() {
                        out.push(n);
                    }
                }
                out
            }
            None => Vec::new(),
        };
        let super_ids: Vec<i64> = supers.iter().map(|n| n.rowid).collect();
        let dispatcher = self
            .store
            .children_of(&super_ids)?
            .into_iter()
            .find(|m| m.name.as_deref() == Some(name));
        if let Some(d) = dispatcher {
            let dq = d.qualified_name.as_deref().unwrap_or(name);
            return Ok(format!(
                "nothing reaches {qn} statically: it overrides or implements {dq}, so calls \
                 through {dq} reach it by dynamic dispatch; ask `canopy references {dq}` \
                 (or `impact {dq}`) for them"
            ));
        }
        if let Some(s) = supers.first() {
            let sq = s
                .qualified_name
                .as_deref()
                .or(s.name.as_deref())
                .unwrap_or_default();
            return Ok(format!(
                "nothing reaches {qn} statically; its type implements {sq}, so calls on a \
                 {sq} value may reach it by dynamic dispatch; ask `canopy references {sq}` \
                 for the places that hold one"
            ));
        }
        if unresolved > 0 {
            return Ok(format!(
                "nothing reaches {qn} through a resolved edge, but {unresolved} site(s) call \
                 `{name}` on a receiver of unknown type (dynamic dispatch: an interface, a \
                 trait object or a duck-typed attribute), listed in `unresolved`; check them, \
                 or ask `canopy references {name}` and `canopy query {name}`"
            ));
        }
        Ok(format!(
            "no static use of {qn} anywhere in the index, and no call of `{name}` on an \
             unknown receiver: it is unused, or reached only from outside the repository, \
             by reflection or a name in a string (`canopy query {name}` finds the text)"
        ))
    }

    /// The type whose member `t` is: its parent unit when that is a type
    /// (or an `impl`), else, for a method declared outside its type (Go
    /// receivers), the type its qualified name starts with, in its file.
    fn owner_type(&self, t: &NodeRecord) -> Result<Option<NodeRecord>> {
        if let Some(p) = t.parent_rowid.map(|p| self.node(p)).transpose()?.flatten()
            && p.node_type != "file"
        {
            return Ok(Some(p));
        }
        let Some((type_name, _)) = t
            .qualified_name
            .as_deref()
            .and_then(|q| q.rsplit_once('.').or_else(|| q.rsplit_once("::")))
        else {
            return Ok(None);
        };
        Ok(self
            .store
            .nodes_by_name(type_name, crate::store::read::NameMatch::Equal, 50)?
            .into_iter()
            .find(|n| n.file_path == t.file_path && n.rowid != t.rowid && n.node_type != "file"))
    }
}
