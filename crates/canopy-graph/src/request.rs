//! One serialisable request type for every graph operation, so the front
//! ends (MCP `canopy_graph` and `canopy_analysis`, HTTP `POST /graph`,
//! scripts) share one parser and one dispatcher instead of each matching
//! on operation names.
//!
//! A request names a [`GraphOp`] and, for the operations about one symbol,
//! a `target` string (the rule is in [`crate::nav`]); `definition`
//! takes its target as `path:line:col` and `scope` as `path:line[:col]`
//! (both read by [`crate::position`]), `path` also needs `to`. Depth and
//! result caps are clamped here, so no front end can ask for unbounded work.

use serde::{Deserialize, Serialize};

use crate::error::{CanopyError, Result};
use crate::nav::{DEFAULT_DEPTH, DEFAULT_MAX_RESULTS, Graph, GraphAnswer, MAX_DEPTH, MAX_RESULTS};
use crate::ops::{CycleAnswer, DepAnswer, HotspotAnswer, Level, PathScope, UnusedAnswer};
use crate::position::Position;

/// The graph operations: navigation (about one symbol or file) and
/// whole-repository analysis.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GraphOp {
    /// Units that call the target (transitive with `depth`).
    Callers,
    /// Units the target calls (transitive with `depth`).
    Callees,
    /// Every resolved use of the target.
    References,
    /// Units that use the target as a type.
    TypeUsages,
    /// The definition the name at `path:line:col` resolves to.
    Definition,
    /// The shortest call path from `target` to `to`.
    Path,
    /// Types that implement or extend the target.
    Implementations,
    /// What the target implements or extends.
    Implements,
    /// What must change and what needs review if the target changes.
    Impact,
    /// Files (or packages, `level`) the target depends on.
    Dependencies,
    /// Files (or packages) that depend on the target.
    Dependents,
    /// Supertypes and subtypes of the target.
    TypeHierarchy,
    /// Definitions nothing resolved uses (candidates).
    UnusedSymbols,
    /// Units with the most callers plus callees.
    Hotspots,
    /// Import cycles among files or packages.
    CircularDependencies,
    /// The file or package dependency graph (under `target` as a path prefix, if given).
    DependencyGraph,
    /// The scope chain at `path:line[:col]`: file, then enclosing units, outermost first.
    Scope,
    /// A unit's signature, parameters, use counts and members.
    Detail,
    /// Definitions filtered (`filter`: path prefix, name, kinds,
    /// visibility, reference counts), sorted and paged; `target` is an
    /// optional path prefix.
    Symbols,
    /// `symbols` whose name matches `target` (`*` wildcards, else substring).
    Search,
    /// A file at a glance: units, tokens, top symbols, dependencies, dependents.
    Summary,
    /// A directory at a glance, with package-level dependencies.
    PackageSummary,
}

impl GraphOp {
    /// Navigation operations (MCP `canopy_graph`).
    pub const NAVIGATION: [GraphOp; 11] = [
        GraphOp::Callers,
        GraphOp::Callees,
        GraphOp::References,
        GraphOp::Definition,
        GraphOp::TypeUsages,
        GraphOp::Implementations,
        GraphOp::Implements,
        GraphOp::Impact,
        GraphOp::Path,
        GraphOp::Dependencies,
        GraphOp::Dependents,
    ];

    /// Whole-repository analysis operations over the graph (MCP `canopy_analysis`).
    pub const ANALYSIS: [GraphOp; 11] = [
        GraphOp::Symbols,
        GraphOp::Search,
        GraphOp::Summary,
        GraphOp::PackageSummary,
        GraphOp::Detail,
        GraphOp::Scope,
        GraphOp::TypeHierarchy,
        GraphOp::UnusedSymbols,
        GraphOp::Hotspots,
        GraphOp::CircularDependencies,
        GraphOp::DependencyGraph,
    ];

    /// The wire name (`snake_case`).
    pub fn as_str(self) -> &'static str {
        match self {
            GraphOp::Callers => "callers",
            GraphOp::Callees => "callees",
            GraphOp::References => "references",
            GraphOp::TypeUsages => "type_usages",
            GraphOp::Definition => "definition",
            GraphOp::Path => "path",
            GraphOp::Implementations => "implementations",
            GraphOp::Implements => "implements",
            GraphOp::Impact => "impact",
            GraphOp::Dependencies => "dependencies",
            GraphOp::Dependents => "dependents",
            GraphOp::TypeHierarchy => "type_hierarchy",
            GraphOp::UnusedSymbols => "unused_symbols",
            GraphOp::Hotspots => "hotspots",
            GraphOp::CircularDependencies => "circular_dependencies",
            GraphOp::DependencyGraph => "dependency_graph",
            GraphOp::Scope => "scope",
            GraphOp::Detail => "detail",
            GraphOp::Symbols => "symbols",
            GraphOp::Search => "search",
            GraphOp::Summary => "summary",
            GraphOp::PackageSummary => "package_summary",
        }
    }

    /// The operation with this wire name.
    pub fn from_name(name: &str) -> Option<GraphOp> {
        GraphOp::NAVIGATION
            .into_iter()
            .chain(GraphOp::ANALYSIS)
            .find(|op| op.as_str() == name)
    }

    /// Whether the operation's answer is paged by `offset`.
    pub fn pages(self) -> bool {
        matches!(
            self,
            GraphOp::Callers
                | GraphOp::Callees
                | GraphOp::References
                | GraphOp::TypeUsages
                | GraphOp::Symbols
                | GraphOp::Search
        )
    }

    /// Whether the operation is about one target (which must then be given).
    pub fn needs_target(self) -> bool {
        !matches!(
            self,
            GraphOp::UnusedSymbols
                | GraphOp::Symbols
                | GraphOp::Hotspots
                | GraphOp::CircularDependencies
                | GraphOp::DependencyGraph
        )
    }
}

/// A graph request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GraphRequest {
    /// The operation.
    pub op: GraphOp,
    /// `Type.method`, `Type::method`, `pkg.Name`, `file.py:Type.method`, a
    /// path prefix, or `path:line:col`; for `dependency_graph` an optional path prefix.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub target: String,
    /// The end of a `path` request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    /// Transitive depth for callers/callees/type_hierarchy (default 1, at most 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub depth: Option<u32>,
    /// Most nodes in the answer (default 50; at most 500 through MCP and
    /// HTTP, 100,000 through the local CLI: [`Graph::run_within`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_results: Option<usize>,
    /// Nodes to skip before the first listed: callers, callees,
    /// references and type_usages page with it (pass the previous
    /// answer's `next_offset`); symbols and search read it when their
    /// `filter` has no `offset` of its own. Other operations reject it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<usize>,
    /// Files or packages (directories) for dependency operations (default file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub level: Option<Level>,
    /// `unused_symbols`: also list public (exported) definitions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_public: Option<bool>,
    /// `symbols` / `search`: filter, sort and page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<super::ops::SymbolFilter>,
    /// dependencies, dependents, dependency_graph, circular_dependencies,
    /// unused_symbols, hotspots: count guessed edges too (`how:
    /// unique_name`); by default they use resolved edges only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_guesses: Option<bool>,
    /// unused_symbols, hotspots: also list units in vendored directories
    /// (`vendor/`, `node_modules/`, `third_party/`, …) and minified or
    /// generated files (`*.min.js`, `*.pb.go`, …); left out by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_vendored: Option<bool>,
    /// unused_symbols, hotspots: also list units in test code; left out by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_tests: Option<bool>,
}

/// What a graph request answers: one of the operation families' answers.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum GraphResponse {
    /// Nodes reached from a target (navigation, impact, type hierarchy).
    Nodes(Box<GraphAnswer>),
    /// Dependencies, dependents or the dependency graph.
    Dependencies(DepAnswer),
    /// Import cycles.
    Cycles(CycleAnswer),
    /// Hotspots.
    Hotspots(HotspotAnswer),
    /// Unused-symbol candidates.
    Unused(UnusedAnswer),
    /// A page of definitions (`symbols`, `search`).
    Symbols(super::ops::SymbolsAnswer),
    /// A file or package summary.
    Summary(Box<super::ops::SummaryAnswer>),
}

impl GraphResponse {
    /// How many items the answer lists (for metrics).
    pub fn len(&self) -> usize {
        match self {
            GraphResponse::Nodes(a) => a.nodes.len() + a.review.len(),
            GraphResponse::Dependencies(a) => a.nodes.len(),
            GraphResponse::Cycles(a) => a.cycles.len(),
            GraphResponse::Hotspots(a) => a.hotspots.len(),
            GraphResponse::Unused(a) => a.candidates.len(),
            GraphResponse::Symbols(a) => a.symbols.len(),
            GraphResponse::Summary(a) => a.files,
        }
    }

    /// Whether the answer lists nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Splits `path:line[:col]` into its parts, the column 0 when absent
/// ([`Position`] is the rule).
pub fn parse_position(target: &str) -> Option<(&str, u32, u32)> {
    Position::parse(target).map(|p| (p.path, p.line, p.col.unwrap_or(0)))
}

impl GraphRequest {
    /// A request for `op` on `target` with default caps.
    pub fn new(op: GraphOp, target: impl Into<String>) -> GraphRequest {
        GraphRequest {
            op,
            target: target.into(),
            to: None,
            depth: None,
            max_results: None,
            offset: None,
            level: None,
            include_public: None,
            filter: None,
            include_guesses: None,
            include_vendored: None,
            include_tests: None,
        }
    }

    /// Checks the request; the error says what to change.
    pub fn validate(&self) -> Result<()> {
        if self.op.needs_target() && self.target.trim().is_empty() {
            return Err(CanopyError::Validation(format!(
                "{} needs a target: Type.method, Type::method, pkg.Name, a path, or path:line:col",
                self.op.as_str()
            )));
        }
        if self.op == GraphOp::Scope && parse_position(&self.target).is_none() {
            return Err(CanopyError::Validation(format!(
                "scope needs target as path:line[:col], got {:?}",
                self.target
            )));
        }
        if self.op == GraphOp::Definition && parse_position(&self.target).is_none() {
            return Err(CanopyError::Validation(format!(
                "definition needs target as path:line[:col] (col 0-based; without it, the line's one site), got {:?}",
                self.target
            )));
        }
        if self.op == GraphOp::Path && self.to.as_deref().is_none_or(|t| t.trim().is_empty()) {
            return Err(CanopyError::Validation(
                "path needs `to`: the symbol the call path should end at".into(),
            ));
        }
        if self.offset.is_some() && !self.op.pages() {
            return Err(CanopyError::Validation(format!(
                "`offset` pages callers, callees, references, type_usages, symbols and search, not {}",
                self.op.as_str()
            )));
        }
        if self.op != GraphOp::Path && self.to.is_some() {
            return Err(CanopyError::Validation(format!(
                "`to` applies only to op=path, not {}",
                self.op.as_str()
            )));
        }
        Ok(())
    }

    /// Depth clamped to 1..=[`MAX_DEPTH`].
    pub fn depth(&self) -> u32 {
        self.depth.unwrap_or(DEFAULT_DEPTH).clamp(1, MAX_DEPTH)
    }

    /// Which code `unused_symbols` and `hotspots` list.
    pub fn path_scope(&self) -> PathScope {
        PathScope {
            include_vendored: self.include_vendored.unwrap_or(false),
            include_tests: self.include_tests.unwrap_or(false),
        }
    }

    /// Result cap clamped to 1..=[`MAX_RESULTS`] (an agent's cap).
    pub fn max_results(&self) -> usize {
        self.max_results_within(MAX_RESULTS)
    }

    /// Result cap clamped to 1..=`cap`.
    pub fn max_results_within(&self, cap: usize) -> usize {
        self.max_results
            .unwrap_or(DEFAULT_MAX_RESULTS)
            .clamp(1, cap.max(1))
    }
}

impl Graph<'_> {
    /// Answers one request (after [`GraphRequest::validate`]) within an
    /// agent's result cap, [`MAX_RESULTS`].
    pub fn run(&self, request: &GraphRequest) -> Result<GraphResponse> {
        self.run_within(request, MAX_RESULTS)
    }

    /// [`Graph::run`] with `cap` as the most results an answer may hold
    /// (the local CLI passes [`crate::nav::SCRIPT_MAX_RESULTS`]). A
    /// `max_results` above it is clamped and the answer says so
    /// (`max_results_clamped`), never silently.
    pub fn run_within(&self, request: &GraphRequest, cap: usize) -> Result<GraphResponse> {
        request.validate()?;
        let cap = cap.max(1);
        self.set_result_cap(cap);
        let target = request.target.trim();
        let (depth, max) = (request.depth(), request.max_results_within(cap));
        let level = request.level.unwrap_or_default();
        self.include_guesses
            .set(request.include_guesses.unwrap_or(false));
        self.set_offset(request.offset.unwrap_or(0));
        let response = self.dispatch(request, target, depth, max, level);
        self.set_offset(0);
        let mut response = response?;
        if let GraphResponse::Nodes(a) = &mut response
            && let Some(asked) = request.max_results.filter(|&m| m > cap)
        {
            a.max_results_clamped = Some(crate::nav::Clamped { asked, used: cap });
        }
        Ok(response)
    }

    fn dispatch(
        &self,
        request: &GraphRequest,
        target: &str,
        depth: u32,
        max: usize,
        level: Level,
    ) -> Result<GraphResponse> {
        use GraphResponse as R;
        Ok(match request.op {
            GraphOp::Callers => R::Nodes(Box::new(self.callers(target, depth, max)?)),
            GraphOp::Callees => R::Nodes(Box::new(self.callees(target, depth, max)?)),
            GraphOp::References => R::Nodes(Box::new(self.references(target, max)?)),
            GraphOp::TypeUsages => R::Nodes(Box::new(self.type_usages(target, max)?)),
            GraphOp::Definition => {
                let p = Position::parse(target).ok_or_else(|| {
                    CanopyError::Validation(format!("not path:line[:col]: {target:?}"))
                })?;
                R::Nodes(Box::new(self.definition(p.path, p.line, p.col)?))
            }
            GraphOp::Path => R::Nodes(Box::new(
                self.path(target, request.to.as_deref().unwrap_or_default().trim())?,
            )),
            GraphOp::Implementations => R::Nodes(Box::new(self.implementations(target, max)?)),
            GraphOp::Implements => R::Nodes(Box::new(self.implements(target, max)?)),
            GraphOp::Impact => R::Nodes(Box::new(self.impact(target, max)?)),
            GraphOp::TypeHierarchy => R::Nodes(Box::new(self.type_hierarchy(target, depth, max)?)),
            GraphOp::Dependencies => R::Dependencies(self.dependencies(target, level, max)?),
            GraphOp::Dependents => R::Dependencies(self.dependents(target, level, max)?),
            GraphOp::DependencyGraph => R::Dependencies(self.dependency_graph(
                level,
                (!target.is_empty()).then_some(target),
                max,
            )?),
            GraphOp::CircularDependencies => R::Cycles(self.circular_dependencies(level, max)?),
            GraphOp::Hotspots => R::Hotspots(self.hotspots(max, request.path_scope())?),
            GraphOp::Scope => {
                let (path, line, _) = parse_position(target).ok_or_else(|| {
                    CanopyError::Validation(format!("not path:line[:col]: {target:?}"))
                })?;
                R::Nodes(Box::new(self.scope(path, line)?))
            }
            GraphOp::Detail => R::Nodes(Box::new(self.detail(target, max)?)),
            GraphOp::Symbols => {
                let mut filter = request.filter.clone().unwrap_or_default();
                filter.offset = filter.offset.or(request.offset);
                if !target.is_empty() {
                    filter.path_prefix = Some(target.to_string());
                }
                R::Symbols(self.symbols("symbols", &filter, max)?)
            }
            GraphOp::Search => {
                let mut filter = request.filter.clone().unwrap_or_default();
                filter.offset = filter.offset.or(request.offset);
                filter.name = Some(target.to_string());
                R::Symbols(self.symbols("search", &filter, max)?)
            }
            GraphOp::Summary => R::Summary(Box::new(self.summary("summary", target, max)?)),
            GraphOp::PackageSummary => {
                R::Summary(Box::new(self.summary("package_summary", target, max)?))
            }
            GraphOp::UnusedSymbols => R::Unused(self.unused_symbols(
                request.include_public.unwrap_or(false),
                request.path_scope(),
                max,
            )?),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_parse_with_and_without_column() {
        assert_eq!(parse_position("src/a.py:12:4"), Some(("src/a.py", 12, 4)));
        assert_eq!(parse_position("src/a.py:12"), Some(("src/a.py", 12, 0)));
        assert_eq!(parse_position("Parser.parse"), None);
        assert_eq!(parse_position(":3:4"), None);
        assert_eq!(parse_position("a.rs:x:1"), None);
    }

    #[test]
    fn op_names_round_trip_and_match_serde() {
        let all: Vec<GraphOp> = GraphOp::NAVIGATION
            .into_iter()
            .chain(GraphOp::ANALYSIS)
            .collect();
        assert_eq!(all.len(), 22);
        for op in all {
            assert_eq!(GraphOp::from_name(op.as_str()), Some(op));
            let json = serde_json::to_value(op).expect("serialises");
            assert_eq!(json, serde_json::Value::String(op.as_str().into()));
        }
    }

    #[test]
    fn invalid_requests_say_what_to_change() {
        let req = |op, target: &str, to: Option<&str>| GraphRequest {
            to: to.map(str::to_string),
            depth: Some(99),
            max_results: Some(0),
            ..GraphRequest::new(op, target)
        };
        let err = req(GraphOp::Definition, "Parser.parse", None)
            .validate()
            .unwrap_err();
        assert!(err.to_string().contains("path:line[:col]"), "{err}");
        let err = req(GraphOp::Path, "a", None).validate().unwrap_err();
        assert!(err.to_string().contains("`to`"), "{err}");
        let err = req(GraphOp::Callers, "a", Some("b"))
            .validate()
            .unwrap_err();
        assert!(err.to_string().contains("only to op=path"), "{err}");
        let err = req(GraphOp::Callers, "  ", None).validate().unwrap_err();
        assert!(err.to_string().contains("needs a target"), "{err}");
        // Whole-repository analyses need none.
        req(GraphOp::Hotspots, "", None)
            .validate()
            .expect("no target needed");
        let ok = req(GraphOp::Callers, "a", None);
        assert_eq!((ok.depth(), ok.max_results()), (MAX_DEPTH, 1));
    }
}
