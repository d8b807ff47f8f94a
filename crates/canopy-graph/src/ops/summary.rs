//! A file or a package (directory) at a glance: files, languages, units
//! by kind, tokens, top symbols, dependencies and dependents.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{DepNode, Level, SymbolEntry, SymbolFilter};
use crate::error::Result;
use crate::nav::{Empty, Graph};

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
        let max = max_results.clamp(1, self.result_cap());
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
