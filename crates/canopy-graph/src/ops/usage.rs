//! Whole-graph counts over resolved call edges: hotspots (distinct
//! callers plus callees of every unit, kept per index state by the
//! engine's cache) and unused-symbol candidates. Both leave out
//! vendored, generated and test code unless asked ([`PathScope`]), and
//! count what they left out ([`Skipped`]).

use std::collections::{BTreeSet, HashMap, HashSet};

use serde::{Deserialize, Serialize};

use super::{is_entry_point, is_public};
use crate::error::Result;
use crate::handle::Handle;
use crate::lang::SiteKind;
use crate::nav::Graph;
use crate::path_class::{PathClass, classify, is_test_path};
use crate::store::graph::STATUS_RESOLVED;

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
    /// Units with any call edge, those skipped left out.
    pub total: usize,
    /// Units with call edges left out because of where they live.
    #[serde(default)]
    pub skipped: Skipped,
    /// How to list what was skipped, when anything was.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub hint: Option<String>,
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
    /// Candidates left out because of where they live.
    #[serde(default)]
    pub skipped: Skipped,
    /// How to list what was skipped, when anything was.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub hint: Option<String>,
}

/// Which code the whole-repository lists (`unused_symbols`, `hotspots`)
/// look at. By default they leave out other projects' code (vendored
/// directories, minified or generated files) and tests: a person asking
/// "what is unused here" or "what is central here" means the repository's
/// own source.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PathScope {
    /// Also list units in vendored directories and minified or generated files.
    pub include_vendored: bool,
    /// Also list units in test code.
    pub include_tests: bool,
}

impl PathScope {
    /// Why a unit in `path` is left out, or `None` when it is listed.
    pub fn excludes(self, path: &str) -> Option<PathClass> {
        match classify(path)? {
            c @ (PathClass::Vendored | PathClass::Generated) if !self.include_vendored => Some(c),
            PathClass::Vendored | PathClass::Generated => {
                (!self.include_tests && is_test_path(path)).then_some(PathClass::Test)
            }
            PathClass::Test => (!self.include_tests).then_some(PathClass::Test),
        }
    }
}

/// Units a list left out, per reason ([`PathScope`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Skipped {
    /// In vendored directories (`vendor/`, `node_modules/`, `third_party/`, …).
    pub vendored: usize,
    /// In minified or generated files (`*.min.js`, `*.bundle.js`, `*.pb.go`, …).
    pub generated: usize,
    /// In test code (`tests/`, `test_*.py`, `*_test.go`, `*.spec.ts`, …).
    pub tests: usize,
}

impl Skipped {
    fn add(&mut self, class: PathClass) {
        match class {
            PathClass::Vendored => self.vendored += 1,
            PathClass::Generated => self.generated += 1,
            PathClass::Test => self.tests += 1,
        }
    }

    /// What was left out and the parameter that lists it; `None` when nothing was.
    pub fn hint(&self) -> Option<String> {
        let mut parts = Vec::new();
        let other = self.vendored + self.generated;
        if other > 0 {
            parts.push(format!(
                "{other} in vendored or generated files (include_vendored: true; CLI --include-vendored)"
            ));
        }
        if self.tests > 0 {
            parts.push(format!(
                "{} in test code (include_tests: true; CLI --include-tests)",
                self.tests
            ));
        }
        (!parts.is_empty()).then(|| format!("skipped {}", parts.join(" and ")))
    }
}

/// A unit's call degrees: (unit id, distinct callers, distinct callees).
pub(crate) type Degree = (i64, usize, usize);

impl Graph<'_> {
    /// Every unit with resolved call edges as (unit, distinct callers,
    /// distinct callees), the busiest first (ties by id; [`Graph::hotspots`]
    /// orders ties by path).
    pub(crate) fn degrees(&self) -> Result<Vec<Degree>> {
        let mut callers: HashMap<i64, HashSet<i64>> = HashMap::new();
        let mut callees: HashMap<i64, HashSet<i64>> = HashMap::new();
        for e in self.analysis_edges()? {
            if e.kind != SiteKind::Call || e.status != STATUS_RESOLVED {
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

    /// Units with the most distinct callers plus callees (resolved call
    /// edges), those `scope` leaves out counted in `skipped`. Callers in
    /// skipped code still count towards a listed unit's fan-in.
    pub fn hotspots(&self, top: usize, scope: PathScope) -> Result<HotspotAnswer> {
        let degrees = match self.cache {
            Some(cache) => {
                let key = format!(
                    "{}\u{0}{}\u{0}{}",
                    self.include_guesses.get(),
                    self.store.generation()?,
                    self.store
                        .meta(crate::store::meta_keys::LAST_INDEXED)?
                        .unwrap_or_default()
                );
                cache.degrees(key, || self.degrees())?
            }
            None => std::sync::Arc::new(self.degrees()?),
        };
        let (ranges, file_of) = self.node_files()?;
        let excluded: Vec<Option<PathClass>> =
            ranges.iter().map(|r| scope.excludes(&r.1)).collect();
        let mut skipped = Skipped::default();
        let mut listed: Vec<(Degree, Option<usize>)> = degrees
            .iter()
            .map(|d| (*d, file_of(d.0)))
            .filter(|(_, file)| match file.and_then(|i| excluded[i]) {
                Some(class) => {
                    skipped.add(class);
                    false
                }
                None => true,
            })
            .collect();
        // Ties by path, then by id (a file's units are numbered in the
        // order they appear in it): ids alone depend on the order files were
        // indexed in, so a tree indexed in steps listed ties differently from
        // a cold index of the same tree.
        let path_of = |file: Option<usize>| file.map(|i| ranges[i].1.as_str());
        listed.sort_by(|(a, fa), (b, fb)| {
            (b.1 + b.2)
                .cmp(&(a.1 + a.2))
                .then_with(|| path_of(*fa).cmp(&path_of(*fb)))
                .then(a.0.cmp(&b.0))
        });
        let listed: Vec<Degree> = listed.into_iter().map(|(d, _)| d).collect();
        let total = listed.len();
        let all: Vec<Degree> = listed
            .into_iter()
            .take(top.clamp(1, self.result_cap()))
            .collect();
        let ids: Vec<i64> = all.iter().map(|a| a.0).collect();
        let nodes = self.store.nodes_by_rowid(&ids)?;
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
        Ok(HotspotAnswer {
            hotspots,
            total,
            hint: skipped.hint(),
            skipped,
        })
    }

    /// Definitions with no resolved use, except entry points, (unless
    /// `include_public`) public ones and those `scope` leaves out (counted in
    /// `skipped`); those whose name an unresolved call site has are counted
    /// in `maybe_used`, not listed.
    pub fn unused_symbols(
        &self,
        include_public: bool,
        scope: PathScope,
        max_results: usize,
    ) -> Result<UnusedAnswer> {
        let used: HashSet<i64> = self
            .analysis_edges()?
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
        let mut skipped = Skipped::default();
        let mut out = Vec::new();
        for n in nodes {
            if is_entry_point(&n) || (!include_public && is_public(&n)) {
                continue;
            }
            if let Some(class) = scope.excludes(&n.file_path) {
                skipped.add(class);
                continue;
            }
            if n.name.as_deref().is_some_and(|x| unresolved.contains(x)) {
                maybe_used += 1;
                continue;
            }
            out.push(n);
        }
        let total = out.len();
        let max = max_results.clamp(1, self.result_cap());
        Ok(UnusedAnswer {
            candidates: out.iter().take(max).map(|n| self.handle(n)).collect(),
            total,
            maybe_used,
            truncated: total > max,
            hint: skipped.hint(),
            skipped,
        })
    }
}
