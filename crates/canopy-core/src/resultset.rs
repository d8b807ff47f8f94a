//! Stateful result sets (beyond the seed, following seed `000_…`'s
//! "server-compute-first"): a query or pack can keep its ranked candidates
//! on the server under an id; `refine` filters, intersects and pages them
//! without the client re-sending anything.
//!
//! Bounded: at most [`MAX_SETS`] sets per engine (least recently used
//! dropped), each holding at most [`MAX_ITEMS`] candidates, each expiring
//! [`TTL`] after its last use. An expired or unknown id is
//! [`CanopyError::ResultSetNotFound`].

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::discover::PathFilter;
use crate::error::{CanopyError, Result};
use crate::lang::NodeType;
use crate::model::Handle;
use crate::query::{Evaluator, Previews, QueryKind, QueryParams, fts_expression, to_handle};
use crate::snapshot::Snapshot;
use crate::store::read::NodeRecord;

/// Most result sets kept per engine.
pub const MAX_SETS: usize = 256;
/// Most candidates kept per set.
pub const MAX_ITEMS: usize = 2_000;
/// A set unused this long expires.
pub const TTL: Duration = Duration::from_secs(30 * 60);

/// `refine` parameters.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RefineParams {
    /// The result set to refine.
    pub result_set: String,
    /// Keep candidates whose path matches this glob.
    pub glob: Option<String>,
    /// `definition` keeps definitions only; `reference` keeps candidates
    /// holding a reference site to a name another candidate of the set
    /// defines (the set's uses of itself; a site belongs to the smallest
    /// candidate around it); `any` keeps everything.
    pub kind: Option<QueryKind>,
    /// Keep candidates whose text matches all words of this text.
    pub term: Option<String>,
    /// Keep candidates also returned by this query (intersection).
    pub intersect: Option<QueryParams>,
    /// Skip this many candidates (paging).
    pub offset: Option<usize>,
    /// Return at most this many (default 16, clamped to 1..=200).
    pub limit: Option<usize>,
}

/// The answer to `refine`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RefineResult {
    /// The refined set's id (refine it again to narrow further).
    pub result_set: String,
    /// One page of handles, in the original rank order.
    pub handles: Vec<Handle>,
    /// Candidates in the refined set.
    pub total_matches: usize,
    /// Whether more pages follow.
    pub truncated: bool,
    /// Offset of the next page, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_offset: Option<usize>,
    /// Sum of the page's token counts.
    pub total_tokens: u64,
}

struct ResultSet {
    items: Vec<NodeRecord>,
    last_used: Instant,
}

/// All result sets of one engine.
#[derive(Default)]
pub struct ResultSets {
    sets: HashMap<String, ResultSet>,
    counter: u64,
}

impl ResultSets {
    /// Stores ranked candidates; returns the new set's id.
    pub(crate) fn insert(&mut self, mut items: Vec<NodeRecord>) -> String {
        let now = Instant::now();
        self.sets
            .retain(|_, s| now.duration_since(s.last_used) < TTL);
        while self.sets.len() >= MAX_SETS {
            let Some(oldest) = self
                .sets
                .iter()
                .min_by_key(|(_, s)| s.last_used)
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            self.sets.remove(&oldest);
        }
        items.truncate(MAX_ITEMS);
        self.counter += 1;
        // Unguessable enough to avoid collisions across restarts; not a secret.
        let id = format!(
            "rs{:x}{:06x}",
            xxhash_rust::xxh3::xxh3_64(format!("{:?}{}", now, self.counter).as_bytes())
                & 0xffff_ffff,
            self.counter
        );
        self.sets.insert(
            id.clone(),
            ResultSet {
                items,
                last_used: now,
            },
        );
        id
    }

    fn get(&mut self, id: &str) -> Result<Vec<NodeRecord>> {
        let now = Instant::now();
        match self.sets.get_mut(id) {
            Some(set) if now.duration_since(set.last_used) < TTL => {
                set.last_used = now;
                Ok(set.items.clone())
            }
            _ => {
                self.sets.remove(id);
                Err(CanopyError::ResultSetNotFound { id: id.to_string() })
            }
        }
    }

    /// Number of live sets.
    pub fn len(&self) -> usize {
        self.sets.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.sets.is_empty()
    }
}

/// Runs `refine` against a stored set, reading through `snapshot`.
pub(crate) fn refine(
    sets: &mut ResultSets,
    snapshot: Snapshot<'_>,
    params: &RefineParams,
) -> Result<RefineResult> {
    let store = snapshot.store();
    let mut items = sets.get(&params.result_set)?;
    if let Some(glob) = params.glob.as_deref().filter(|g| !g.trim().is_empty()) {
        let filter = PathFilter::new(glob)?;
        items.retain(|n| filter.is_match(&n.file_path));
    }
    match params.kind {
        Some(QueryKind::Definition) => items.retain(is_symbol),
        Some(QueryKind::Reference) => {
            let uses = store.ref_names_within(&items)?;
            items = using_each_other(items, &uses);
        }
        Some(QueryKind::Any) | None => {}
    }
    if let Some(term) = params.term.as_deref()
        && let Some(expr) = fts_expression(term, true)
    {
        let rowids: Vec<i64> = items.iter().map(|n| n.rowid).collect();
        let mut keep = HashSet::new();
        for chunk in rowids.chunks(500) {
            keep.extend(store.fts_filter(&expr, chunk)?);
        }
        items.retain(|n| keep.contains(&n.rowid));
    }
    if let Some(other) = &params.intersect {
        other.validate()?;
        let hits = Evaluator::new(store).eval(&other.to_expr()?)?;
        let keep: HashSet<i64> = hits.nodes.iter().map(|n| n.rowid).collect();
        let sources: HashSet<&str> = hits.refs.iter().map(|r| r.source_handle.as_str()).collect();
        items.retain(|n| keep.contains(&n.rowid) || sources.contains(n.handle.as_str()));
    }
    let total = items.len();
    let offset = params.offset.unwrap_or(0).min(total);
    let limit = params
        .limit
        .unwrap_or(crate::query::DEFAULT_LIMIT)
        .clamp(1, crate::query::MAX_LIMIT);
    let mut previews = Previews::new(snapshot);
    let page: Vec<Handle> = items
        .iter()
        .skip(offset)
        .take(limit)
        .map(|n| to_handle(n, &mut previews))
        .collect();
    let end = offset + page.len();
    let result_set = sets.insert(items);
    Ok(RefineResult {
        result_set,
        total_tokens: page.iter().map(|h| u64::from(h.token_count)).sum(),
        handles: page,
        total_matches: total,
        truncated: end < total,
        next_offset: (end < total).then_some(end),
    })
}

fn is_symbol(n: &NodeRecord) -> bool {
    NodeType::from_name(&n.node_type).is_some_and(NodeType::is_symbol)
}

/// The candidates holding a reference site (`uses`: names referenced in
/// each candidate's span, by id) to a name a candidate other than itself
/// defines. A recursive call names only itself and does not count.
fn using_each_other(
    items: Vec<NodeRecord>,
    uses: &HashMap<i64, HashSet<String>>,
) -> Vec<NodeRecord> {
    let mut definers: HashMap<&str, usize> = HashMap::new();
    for n in items.iter().filter(|n| is_symbol(n)) {
        if let Some(name) = n.name.as_deref() {
            *definers.entry(name).or_default() += 1;
        }
    }
    let keep: HashSet<i64> = items
        .iter()
        .filter(|n| {
            let own = n.name.as_deref().filter(|_| is_symbol(n));
            uses.get(&n.rowid).is_some_and(|names| {
                names.iter().any(|name| {
                    let others = definers.get(name.as_str()).copied().unwrap_or(0)
                        - usize::from(own == Some(name.as_str()));
                    others > 0
                })
            })
        })
        .map(|n| n.rowid)
        .collect();
    items
        .into_iter()
        .filter(|n| keep.contains(&n.rowid))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(i: i64, name: &str, node_type: &str) -> NodeRecord {
        NodeRecord {
            name: Some(name.into()),
            node_type: node_type.into(),
            ..record(i)
        }
    }

    #[test]
    fn reference_keeps_the_candidates_that_use_another_candidates_name() {
        let items = vec![
            named(1, "parse", "function"),
            named(2, "tokenize", "function"),
            named(3, "recurse", "function"),
            named(4, "Usage", "section"),
            named(5, "render", "function"),
        ];
        let uses: HashMap<i64, HashSet<String>> = [
            // parse calls tokenize: kept.
            (1, ["tokenize", "len"]),
            // tokenize calls only names outside the set: dropped.
            (2, ["split", "strip"]),
            // recurse calls only itself: dropped.
            (3, ["recurse", "print"]),
            // A section naming `render` holds a reference site: kept,
            (4, ["render", "x"]),
            // but a section defines no name, so `Usage` counts for no one.
            (5, ["Usage", "y"]),
        ]
        .into_iter()
        .map(|(id, names)| (id, names.iter().map(|s| s.to_string()).collect()))
        .collect();
        let kept: Vec<i64> = using_each_other(items, &uses)
            .iter()
            .map(|n| n.rowid)
            .collect();
        assert_eq!(kept, vec![1, 4]);
    }

    fn record(i: i64) -> NodeRecord {
        crate::testing::unit_record(i, format!("h{i:024x}"), &format!("f{i}.rs"), "function")
    }

    #[test]
    fn sets_are_bounded_in_number_and_size() {
        let mut sets = ResultSets::default();
        let first = sets.insert((0..(MAX_ITEMS as i64 + 50)).map(record).collect());
        assert_eq!(sets.get(&first).unwrap().len(), MAX_ITEMS);
        for _ in 0..MAX_SETS + 5 {
            sets.insert(vec![record(1)]);
        }
        assert!(sets.len() <= MAX_SETS);
        assert!(matches!(
            sets.get(&first),
            Err(CanopyError::ResultSetNotFound { .. })
        ));
        assert!(matches!(
            sets.get("rs-unknown"),
            Err(CanopyError::ResultSetNotFound { .. })
        ));
    }
}
