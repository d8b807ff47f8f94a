//! Definitions as a filtered, sorted, paged list (`symbols`) and name
//! search with `*` wildcards (`search`).

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::handle::Handle;
use crate::nav::Graph;
use crate::store::graph::STATUS_RESOLVED;
use crate::store::read::NodeRecord;

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
pub(super) fn wildcard_match(pattern: &str, text: &str) -> bool {
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
                let exported = crate::nav::is_exported(&n);
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
        // Ties by where a unit is (path, then start), never by row id: ids
        // depend on the order files were indexed in.
        fn place(n: &NodeRecord) -> (&str, usize) {
            (n.file_path.as_str(), n.start_byte)
        }
        match filter.sort.unwrap_or_default() {
            SymbolSort::Name => kept.sort_by(|a, b| {
                a.0.qualified_name
                    .cmp(&b.0.qualified_name)
                    .then_with(|| place(&a.0).cmp(&place(&b.0)))
            }),
            SymbolSort::Path => kept.sort_by(|a, b| place(&a.0).cmp(&place(&b.0))),
            SymbolSort::Refs => {
                kept.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| place(&a.0).cmp(&place(&b.0))))
            }
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
