//! What front ends ask a [`crate::backend::Backend`], validated once, where
//! the request is parsed: [`Query`], [`Pack`], [`Context`], [`GraphQuery`]
//! and [`Expand`] can only be built from parameters that passed every check
//! a front end can make, so backends take them as they are. (The engine and
//! the service still check their own inputs: they are boundaries too.)
//!
//! [`SearchArgs`] is the query parameter set as front ends parse it: the
//! CLI flattens it into `query` and `pack` (clap), the MCP server into its
//! tool arguments (serde), and both turn it into the core's `QueryParams`,
//! which the HTTP body flattens.

use canopy_core::CanopyError;
use canopy_core::context::ContextParams;
use canopy_core::graph::nav::{MAX_RESULTS, SCRIPT_MAX_RESULTS};
use canopy_core::graph::request::GraphRequest;
use canopy_core::pack::PackParams;
use canopy_core::query::{MatchMode, QueryKind, QueryParams};
use clap::builder::{PossibleValuesParser, TypedValueParser};
use serde::{Deserialize, Serialize};

/// The search parameters of a query or an evidence pack (`limit`,
/// `expand_budget` and a pack's own knobs are the front ends' to add).
/// Doc comments are the CLI's help; the MCP schema words them for models.
#[derive(Clone, Debug, Default, PartialEq, clap::Args, Serialize, Deserialize)]
#[serde(default)]
pub struct SearchArgs {
    /// Full-text search (words are ANDed; "quoted phrases"; word* for prefixes).
    // Code often starts with a dash (`-> None`, `--flag`): a pattern is
    // taken as given (issue 32, U5).
    #[arg(long, short, allow_hyphen_values = true)]
    pub pattern: Option<String>,
    /// Several text patterns, combined by --match (repeatable).
    #[arg(long = "patterns", num_args = 1..)]
    pub patterns: Option<Vec<String>>,
    /// Code symbol (function, class, struct, method; Type.method works).
    #[arg(long, short)]
    pub symbol: Option<String>,
    /// Markdown section heading.
    #[arg(long)]
    pub section: Option<String>,
    /// Parent symbol (class, struct, impl) whose members to search.
    #[arg(long)]
    pub parent: Option<String>,
    /// definition, reference or any.
    #[arg(long, value_parser = kind_parser())]
    pub kind: Option<QueryKind>,
    /// Restrict to paths matching this glob.
    #[arg(long)]
    pub glob: Option<String>,
    /// How --patterns combine: any (OR) or all (AND).
    #[arg(long = "match", value_parser = match_parser())]
    #[serde(rename = "match")]
    pub match_mode: Option<MatchMode>,
    /// S-expression query, e.g. '(in-file "src/**" (grep "auth"))'.
    // Listed after a command's --limit and --expand-budget (8 and 9), as
    // `canopy query --help` always showed it.
    #[arg(long, display_order = 10)]
    pub query: Option<String>,
}

/// `--kind`: the values `QueryKind` reads.
fn kind_parser() -> impl TypedValueParser<Value = QueryKind> {
    PossibleValuesParser::new(["definition", "reference", "any"]).map(|kind| match kind.as_str() {
        "definition" => QueryKind::Definition,
        "reference" => QueryKind::Reference,
        _ => QueryKind::Any,
    })
}

/// `--match`: the values `MatchMode` reads.
fn match_parser() -> impl TypedValueParser<Value = MatchMode> {
    PossibleValuesParser::new(["any", "all"]).map(|mode| match mode.as_str() {
        "all" => MatchMode::All,
        _ => MatchMode::Any,
    })
}

impl SearchArgs {
    /// The core's parameters, with a front end's `limit`, `expand_budget`
    /// and `result_set`.
    pub fn params(
        self,
        limit: Option<usize>,
        expand_budget: Option<u64>,
        result_set: Option<bool>,
    ) -> QueryParams {
        QueryParams {
            pattern: self.pattern,
            patterns: self.patterns,
            symbol: self.symbol,
            section: self.section,
            parent: self.parent,
            kind: self.kind,
            glob: self.glob,
            match_mode: self.match_mode,
            limit,
            expand_budget,
            query: self.query,
            result_set,
        }
    }
}

/// A query with at least one search parameter, a valid glob and a DSL
/// that parses.
#[derive(Clone, Debug, PartialEq)]
pub struct Query(QueryParams);

impl Query {
    /// Checks `params` (the core's rules, and the DSL's syntax).
    pub fn new(params: QueryParams) -> Result<Query, CanopyError> {
        params.validate()?;
        params.to_expr()?;
        Ok(Query(params))
    }

    /// The parameters.
    pub fn params(&self) -> &QueryParams {
        &self.0
    }
}

/// An evidence pack request whose query is a valid [`Query`].
#[derive(Clone, Debug, PartialEq)]
pub struct Pack(PackParams);

impl Pack {
    /// Checks the pack's query as [`Query::new`] does.
    pub fn new(params: PackParams) -> Result<Pack, CanopyError> {
        params.query.validate()?;
        params.query.to_expr()?;
        Ok(Pack(params))
    }

    /// The parameters.
    pub fn params(&self) -> &PackParams {
        &self.0
    }
}

/// A context pack request with a task or a focus and a budget in range.
#[derive(Clone, Debug, PartialEq)]
pub struct Context(ContextParams);

impl Context {
    /// Checks `params` (the core's rules).
    pub fn new(params: ContextParams) -> Result<Context, CanopyError> {
        params.validate()?;
        Ok(Context(params))
    }

    /// The parameters.
    pub fn params(&self) -> &ContextParams {
        &self.0
    }
}

/// A graph request the core's rules accept (a target where one is needed,
/// positions where positions are).
#[derive(Clone, Debug, PartialEq)]
pub struct GraphQuery {
    request: GraphRequest,
    /// The most results an answer may hold when answered in this process
    /// (a service applies its own, [`MAX_RESULTS`]).
    result_cap: usize,
}

impl GraphQuery {
    /// Checks `request`; answers hold at most an agent's [`MAX_RESULTS`].
    pub fn new(request: GraphRequest) -> Result<GraphQuery, CanopyError> {
        request.validate()?;
        Ok(GraphQuery {
            request,
            result_cap: MAX_RESULTS,
        })
    }

    /// The same query for a caller that reads every result it asks for
    /// (the CLI: scripts and evaluations): `max_results` up to
    /// [`SCRIPT_MAX_RESULTS`] is honoured when answered locally.
    pub fn for_scripts(self) -> GraphQuery {
        GraphQuery {
            result_cap: SCRIPT_MAX_RESULTS,
            ..self
        }
    }

    /// The request.
    pub fn request(&self) -> &GraphRequest {
        &self.request
    }

    /// The most results a local answer may hold.
    pub fn result_cap(&self) -> usize {
        self.result_cap
    }
}

/// Handle ids to expand: at least one.
#[derive(Clone, Debug, PartialEq)]
pub struct Expand(Vec<String>);

impl Expand {
    /// `None` when `ids` is empty.
    pub fn new(ids: Vec<String>) -> Option<Expand> {
        (!ids.is_empty()).then_some(Expand(ids))
    }

    /// The ids, in request order.
    pub fn ids(&self) -> &[String] {
        &self.0
    }
}

/// An index run: incremental (optionally only files matching `glob`) or a
/// rebuild from scratch (the repair for a damaged index).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct IndexRequest {
    /// Only files matching this glob.
    pub glob: Option<String>,
    /// Throw the index away and build it again.
    pub rebuild: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        search: SearchArgs,
    }

    #[test]
    fn the_cli_and_json_read_the_same_parameters() {
        let cli = Cli::try_parse_from([
            "t",
            "--pattern",
            "token",
            "--patterns",
            "a",
            "b",
            "--kind",
            "reference",
            "--match",
            "all",
            "--glob",
            "src/**",
        ])
        .expect("parses");
        let json: SearchArgs = serde_json::from_value(serde_json::json!({
            "pattern": "token", "patterns": ["a", "b"], "kind": "reference",
            "match": "all", "glob": "src/**",
        }))
        .expect("parses");
        assert_eq!(cli.search, json);
        assert_eq!(json.kind, Some(QueryKind::Reference));
        assert_eq!(json.match_mode, Some(MatchMode::All));
        assert!(Cli::try_parse_from(["t", "--kind", "callers"]).is_err());
    }

    #[test]
    fn requests_are_checked_when_built() {
        let empty = QueryParams::default();
        assert!(Query::new(empty.clone()).is_err());
        let bad_dsl = QueryParams {
            query: Some("(grep \"x\"".into()),
            ..QueryParams::default()
        };
        assert_eq!(
            Query::new(bad_dsl).err().map(|e| e.code()),
            Some("QueryParse")
        );
        assert!(
            Pack::new(PackParams {
                query: empty,
                ..PackParams::default()
            })
            .is_err()
        );
        assert!(Context::new(ContextParams::default()).is_err());
        let no_target = GraphRequest::new(canopy_core::graph::request::GraphOp::Callers, " ");
        assert!(GraphQuery::new(no_target).is_err());
        assert!(Expand::new(Vec::new()).is_none());
    }
}
