//! The tool catalogue: names, model-facing descriptions, input schemas, and
//! the parsing of call arguments.
//!
//! The input schemas are written by hand so that `tools/list` stays small
//! (every token here is paid by every agent on every session). The schema is
//! also the single source of truth for which arguments a tool accepts:
//! [`parse_args`] rejects keys the tool's schema does not list and requires
//! the keys it marks `required`, then deserializes into [`Args`].
//!
//! Budget: the whole `tools/list` response must stay under 3,000 tokens
//! (`o200k_base`), leaving room for the graph, analysis and context tools to
//! come; it is ~1,200 today (`crates/canopy-cli/tests/mcp_e2e.rs` measures it). Output schemas are
//! deliberately not declared: even type-only top-level schemas for the five
//! JSON tools cost ~490 tokens.

use std::sync::Arc;

use canopy_client::request::SearchArgs;
use canopy_core::graph::ops::Level;
use canopy_core::graph::request::{GraphOp, GraphRequest};
use canopy_core::pack::PackParams;
use canopy_core::query::QueryParams;
use canopy_core::resultset::RefineParams;
use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::error::ToolError;

/// The tools: the agent contract's (seed `004_…`) and those Canopy adds
/// beyond it (status, invalidate, refine, the graph, analyses, context).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ToolName {
    /// `canopy_query`: handles with previews.
    Query,
    /// `canopy_evidence_pack`: ranked handles plus guidance.
    EvidencePack,
    /// `canopy_expand`: the exact text of handles.
    Expand,
    /// `canopy_index`: index files matching a glob.
    Index,
    /// `canopy_status`: index statistics.
    Status,
    /// `canopy_invalidate`: force files to be re-indexed.
    Invalidate,
    /// `canopy_refine`: filter, intersect and page a server-side result set.
    Refine,
    /// `canopy_graph`: callers, callees, references, definition, … over resolved edges.
    Graph,
    /// `canopy_analysis`: whole-repository analyses over the graph.
    Analysis,
    /// `canopy_context`: the code a task needs, cut to a token budget.
    Context,
}

impl ToolName {
    /// Every tool, in the order `tools/list` shows them.
    pub(crate) const ALL: [ToolName; 10] = [
        ToolName::EvidencePack,
        ToolName::Context,
        ToolName::Query,
        ToolName::Expand,
        ToolName::Refine,
        ToolName::Graph,
        ToolName::Analysis,
        ToolName::Status,
        ToolName::Index,
        ToolName::Invalidate,
    ];

    /// The wire name.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ToolName::Query => "canopy_query",
            ToolName::EvidencePack => "canopy_evidence_pack",
            ToolName::Expand => "canopy_expand",
            ToolName::Index => "canopy_index",
            ToolName::Status => "canopy_status",
            ToolName::Invalidate => "canopy_invalidate",
            ToolName::Refine => "canopy_refine",
            ToolName::Graph => "canopy_graph",
            ToolName::Analysis => "canopy_analysis",
            ToolName::Context => "canopy_context",
        }
    }

    /// The tool with this wire name.
    pub(crate) fn from_name(name: &str) -> Option<ToolName> {
        ToolName::ALL.into_iter().find(|t| t.as_str() == name)
    }

    /// One line for `canopy mcp --help`: what the tool is for.
    pub(crate) fn summary(self) -> &'static str {
        match self {
            ToolName::EvidencePack => {
                "start here: the few handles that answer a question, and when to stop"
            }
            ToolName::Query => {
                "search by text, symbol, section, parent or DSL; handles, no file text"
            }
            ToolName::Expand => "the exact text of handles",
            ToolName::Refine => "filter, intersect and page a server-side result set",
            ToolName::Graph => {
                "callers, callees, references, definition, impact, path, dependencies"
            }
            ToolName::Analysis => {
                "hotspots, unused symbols, cycles, dependency graph, type hierarchy"
            }
            ToolName::Context => "the code a task needs, as text cut to a token budget",
            ToolName::Status => "index statistics and coverage (never creates an index)",
            ToolName::Index => "index files (incremental), or rebuild a damaged index",
            ToolName::Invalidate => "force files to be re-indexed",
        }
    }

    fn description(self) -> &'static str {
        match self {
            ToolName::EvidencePack => {
                "Start here to find code for a question or task: ranked handles (id, file, lines, \
                 tokens, score; no text) grouped by file, expand_suggestion and guidance. Follow \
                 guidance: expand_then_answer -> canopy_expand the suggested handles, then answer; \
                 refine_query -> one narrower query (symbol, glob, terms). Stop querying when \
                 stop_querying=true or novelty is low. Use instead of grep/find. A long \
                 pattern: one-line summary first (it weighs most)."
            }
            ToolName::Query => {
                "Search the index: handles (id, file_path, line_range, token_count, preview), no \
                 full text. Give at least one of pattern, patterns, symbol, section, parent, query. \
                 Definition: symbol+kind=definition. Callers/usages: kind=reference (ref_handles). \
                 Methods of a class: parent. truncated=true: narrow with glob or lower limit. Then \
                 canopy_expand only the handles you need. Indexes automatically on first use. \
                 Errors: QueryParse -> fix the DSL or use plain params; GlobPattern -> use **/*.ext \
                 style; Validation -> add a search param."
            }
            ToolName::Expand => {
                "Full text of handles, as `// <id>` blocks. Expand selectively; skip ids already in \
                 expanded_handle_ids. HandleNotFound -> re-query for fresh ids. StaleIndex (file \
                 changed) -> canopy_invalidate, then re-query."
            }
            ToolName::Status => {
                "Index statistics: files_indexed, total_tokens, last_indexed, languages, units, \
                 index_coverage. Cheap; use to orient in a new repo."
            }
            ToolName::Index => {
                "Index files matching glob (incremental). Rarely needed: queries index \
                 automatically. rebuild=true rebuilds the whole index (after IndexDamaged)."
            }
            ToolName::Invalidate => {
                "Re-index changed files (all, or those matching glob), e.g. after StaleIndex; then \
                 re-query."
            }
            ToolName::Refine => {
                "Narrow a result set server-side instead of re-querying: pass result_set (from \
                 canopy_query or canopy_evidence_pack with result_set=true) plus filters (glob, \
                 kind, term, query) and offset/limit to page. Returns handles and a new result_set. \
                 ResultSetNotFound -> re-run the query."
            }
            ToolName::Graph => {
                "Code graph: references resolved to definitions, not name matches. \
                 op: callers/callees (with depth), references, definition (target=path:line[:col], \
                 col 0-based; no col: the line's one site), type_usages, implementations, implements, impact (must change vs \
                 review), path (call chain target -> to), dependencies/dependents (level \
                 file|package). target may also be pkg.Name or file.py:Type.method. Nodes are handles with depth, edge_kind, confidence, how, sites \
                 (all, sites_total). guess=true (how=unique_name, confidence 50): receiver type \
                 unknown, bound to the repo's only method of that name; verify it. dependencies/dependents count resolved edges only unless \
                 include_guesses. ambiguous \
                 -> retry with a candidate's path:line. empty.kind: resolved (truly none), \
                 unresolved (unresolvable same-named sites, listed), target_not_found."
            }
            ToolName::Context => {
                "The code to read before starting a task, within budget_tokens as received: a \
                 JSON header, then one block per fragment: a `--- path:a-b type name · strategy \
                 score · reason` line and its text; best first, focus first, grouped by file \
                 (`--- :a-b`: the file above). A cut fragment says `[signature · expand \
                 <handle>]`: expand that handle for the whole unit. Give task (a one-line summary first, it weighs most; \
                 then the issue or plan) and optionally focus \
                 (Type.method, a path, path:line). strategy: fused (default) | keyword | \
                 semantic | graph (callers, callees) | history (git co-changes) | decisions \
                 (docs, code comments)."
            }
            ToolName::Analysis => {
                "Repository analysis over the code graph. op: symbols (definitions by filter, \
                 most referenced first, paged), search (target = name pattern), summary (target = file) and \
                 package_summary (target = directory), detail (signature, parameters, use \
                 counts, members of target), scope (enclosing units at target=path:line), \
                 hotspots (most callers+callees), \
                 unused_symbols (candidates; include_public), circular_dependencies and \
                 dependency_graph (level file|package; target = optional path prefix), \
                 type_hierarchy (target required, depth). Dependencies, cycles, unused and \
                 hotspots: resolved edges unless include_guesses. Handles, never file text."
            }
        }
    }

    fn input_schema(self) -> Value {
        let path = json!({"type": "string", "description": "Absolute repo root"});
        let text = json!({"type": "string"});
        let int = |default: u64, description: &str| json!({"type": "integer", "minimum": 1, "default": default, "description": description});
        let level = json!({"type": "string", "enum": ["file", "package"], "default": "file", "description": "Dependencies between files or between packages"});
        let depth = json!({"type": "integer", "minimum": 1, "maximum": 10, "default": 1, "description": "How many hops to follow"});
        let max_results = json!({"type": "integer", "minimum": 1, "maximum": 500, "default": 50, "description": "Most results returned"});
        let guesses = json!({"type": "boolean", "default": false, "description": "Also count guessed edges (how=unique_name)"});
        let keep = json!({"type": "boolean", "description": "Keep all results server-side; returns result_set for canopy_refine"});
        let search = |dsl: &str| {
            json!({
                "path": path,
                "pattern": {"type": "string", "description": "Full-text search"},
                "patterns": {"type": "array", "items": text, "description": "Text patterns, combined by match"},
                "symbol": {"type": "string", "description": "Symbol name (Type.method works)"},
                "section": {"type": "string", "description": "Markdown section heading"},
                "parent": {"type": "string", "description": "Parent symbol, e.g. a class (its members)"},
                "kind": {"type": "string", "enum": ["definition", "reference", "any"], "default": "any", "description": "definition: where symbols are defined; reference: where they are used (ref_handles); any: both"},
                "glob": {"type": "string", "description": "Path filter, e.g. src/**/*.ts"},
                "match": {"type": "string", "enum": ["any", "all"], "default": "any", "description": "patterns: OR / AND"},
                "query": {"type": "string", "description": dsl},
            })
        };
        let (properties, required) = match self {
            ToolName::Query => {
                let mut p = search(
                    "S-expression DSL for compositions: (grep \"t\") (code \"sym\") (definition \"sym\") \
                     (references \"sym\") (section \"h\") (file \"path\") (children \"parent\") \
                     (children-named \"parent\" \"child\") (in-file \"glob\" Q) (union Q..) \
                     (intersect Q..) (limit N Q)",
                );
                p["limit"] = json!({"type": "integer", "minimum": 1, "maximum": 200, "default": 16, "description": "Most handles returned"});
                p["expand_budget"] = json!({"type": "integer", "minimum": 0, "default": 0, "description": "Deprecated: auto-expand while tokens fit"});
                p["result_set"] = keep.clone();
                (p, vec!["path"])
            }
            ToolName::EvidencePack => {
                let mut p = search("S-expression DSL, as canopy_query");
                p["max_handles"] = int(8, "Most handles in the pack");
                p["max_per_file"] = int(2, "Most handles from one file");
                p["max_tokens"] = int(1500, "Most tokens the pack's handles may add up to");
                p["plan"] = json!({"type": "boolean", "description": "Force or skip server-side planning (default: when confidence is low)"});
                p["result_set"] = keep.clone();
                (p, vec!["path"])
            }
            ToolName::Expand => (
                json!({
                    "path": path,
                    "handle_ids": {"type": "array", "items": text, "description": "Handle ids (h + 24 hex), as returned by canopy_query"},
                }),
                vec!["path", "handle_ids"],
            ),
            ToolName::Status => (json!({"path": path}), vec!["path"]),
            ToolName::Index => (
                json!({"path": path,
                       "glob": {"type": "string", "description": "Only files matching this glob, e.g. **/*.rs (default: all files)"},
                       "rebuild": {"type": "boolean", "default": false, "description": "Throw the index away and build it again (after IndexDamaged); takes no glob"}}),
                vec!["path"],
            ),
            ToolName::Invalidate => (
                json!({"path": path, "glob": {"type": "string", "description": "Default: all files"}}),
                vec!["path"],
            ),
            ToolName::Refine => (
                json!({
                    "path": path,
                    "result_set": {"type": "string", "description": "Id from a previous call"},
                    "glob": {"type": "string", "description": "Keep units in files matching this glob"},
                    "kind": {"type": "string", "enum": ["definition", "reference", "any"], "default": "any", "description": "definition: definitions only; reference: units using a name another unit of the set defines; any: all"},
                    "term": {"type": "string", "description": "Keep units containing all these words"},
                    "query": {"type": "string", "description": "Keep units this DSL query also returns"},
                    "offset": {"type": "integer", "minimum": 0, "default": 0, "description": "Skip this many (next_offset of the previous page)"},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 200, "default": 16, "description": "Most handles in the page"},
                }),
                vec!["path", "result_set"],
            ),
            ToolName::Graph => (
                json!({
                    "path": path,
                    "op": {"type": "string", "enum": GraphOp::NAVIGATION.map(GraphOp::as_str), "description": "The navigation to run"},
                    "target": {"type": "string", "minLength": 1, "description": "A symbol (Type.method, Type::method), a path, or path:line[:col]"},
                    "to": {"type": "string", "description": "op=path: end symbol"},
                    "depth": depth.clone(),
                    "level": level.clone(),
                    "max_results": max_results.clone(),
                    "offset": {"type": "integer", "minimum": 0, "description": "Skip N nodes (next_offset)"},
                    "include_guesses": guesses.clone(),
                }),
                vec!["path", "op", "target"],
            ),
            ToolName::Context => (
                json!({
                    "path": path,
                    "task": {"type": "string", "description": "What you are about to do (an issue text is fine; its first line weighs most)"},
                    "focus": {"type": "string", "description": "Code to centre on: Type.method, Type::method, a path, or path:line[:col]"},
                    "budget_tokens": {"type": "integer", "minimum": canopy_core::context::MIN_BUDGET, "maximum": canopy_core::context::MAX_BUDGET, "default": canopy_core::context::DEFAULT_BUDGET, "description": "Most tokens the fragments' text may add up to"},
                    "strategy": {"type": "string", "enum": ["fused", "keyword", "semantic", "graph", "history", "decisions"], "default": "fused", "description": "Which strategy chooses candidates (fused: all of them, ranked together)"},
                }),
                vec!["path", "task"],
            ),
            ToolName::Analysis => (
                json!({
                    "path": path,
                    "op": {"type": "string", "enum": GraphOp::ANALYSIS.map(GraphOp::as_str), "description": "The analysis to run"},
                    "target": {"type": "string", "description": "A symbol, a path or path:line (optional for some ops, see the description)"},
                    "depth": depth,
                    "level": level,
                    "include_public": {"type": "boolean", "default": false, "description": "unused_symbols: also list public symbols"},
                    "include_guesses": guesses,
                    "include_vendored": {"type": "boolean", "default": false, "description": "unused_symbols, hotspots: also list vendored and generated code (vendor/, *.min.js)"},
                    "include_tests": {"type": "boolean", "default": false, "description": "unused_symbols, hotspots: also list test code"},
                    "filter": {"type": "object", "description": "symbols/search: path_prefix, name (* wildcards), kinds [], visibility exported|private, min_refs, max_refs, sort refs|name|path, offset"},
                    "max_results": max_results,
                }),
                vec!["path", "op"],
            ),
        };
        json!({"type": "object", "properties": properties, "required": required})
    }

    /// The tool's `tools/list` entry.
    pub(crate) fn definition(self) -> Tool {
        let schema = match self.input_schema() {
            Value::Object(map) => map,
            _ => JsonObject::new(),
        };
        let annotations = match self {
            ToolName::Index | ToolName::Invalidate => {
                ToolAnnotations::new().read_only(false).destructive(false)
            }
            _ => ToolAnnotations::new().read_only(true),
        };
        Tool::new(self.as_str(), self.description(), Arc::new(schema)).with_annotations(annotations)
    }
}

/// Every argument any tool accepts. Which ones a given tool accepts is
/// decided by its input schema (see [`parse_args`], which also refuses
/// unknown keys before these are read).
#[derive(Debug, Default, Deserialize)]
pub(crate) struct Args {
    pub path: Option<String>,
    /// The search parameters (shared with the command line's `query`).
    #[serde(flatten)]
    pub search: SearchArgs,
    pub limit: Option<usize>,
    pub expand_budget: Option<u64>,
    pub max_handles: Option<usize>,
    pub max_per_file: Option<usize>,
    pub plan: Option<bool>,
    pub max_tokens: Option<u64>,
    pub handle_ids: Option<Vec<String>>,
    /// `true` on query/pack (keep a result set); the set's id on refine.
    pub result_set: Option<Value>,
    pub term: Option<String>,
    pub offset: Option<usize>,
    pub op: Option<String>,
    pub target: Option<String>,
    pub to: Option<String>,
    pub depth: Option<u32>,
    pub max_results: Option<usize>,
    pub level: Option<Level>,
    pub include_public: Option<bool>,
    pub include_guesses: Option<bool>,
    pub include_vendored: Option<bool>,
    pub include_tests: Option<bool>,
    pub filter: Option<canopy_core::graph::ops::SymbolFilter>,
    pub rebuild: Option<bool>,
    pub task: Option<String>,
    pub focus: Option<String>,
    pub budget_tokens: Option<u64>,
    pub strategy: Option<canopy_core::context::Strategy>,
}

impl Args {
    /// The `canopy_context` parameters.
    pub(crate) fn context_params(&self) -> canopy_core::context::ContextParams {
        canopy_core::context::ContextParams {
            task: self.task.clone().unwrap_or_default(),
            focus: self.focus.clone(),
            budget_tokens: self.budget_tokens,
            strategy: self.strategy,
        }
    }

    /// The `canopy_query` parameters.
    pub(crate) fn query_params(&self) -> QueryParams {
        self.search.clone().params(
            self.limit,
            self.expand_budget,
            self.result_set.as_ref().and_then(Value::as_bool),
        )
    }

    /// The `canopy_refine` parameters.
    pub(crate) fn refine_params(&self) -> RefineParams {
        RefineParams {
            result_set: self
                .result_set
                .as_ref()
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            glob: self.search.glob.clone(),
            kind: self.search.kind,
            term: self.term.clone(),
            intersect: self.search.query.clone().map(|q| QueryParams {
                query: Some(q),
                ..QueryParams::default()
            }),
            offset: self.offset,
            limit: self.limit,
        }
    }

    /// The `canopy_graph` / `canopy_analysis` request; an `op` the tool does
    /// not offer is a validation error naming the ones it does.
    pub(crate) fn graph_request(&self, offered: &[GraphOp]) -> Result<GraphRequest, ToolError> {
        let name = self.op.as_deref().unwrap_or_default();
        let op = GraphOp::from_name(name)
            .filter(|op| offered.contains(op))
            .ok_or_else(|| {
                ToolError::InvalidArguments(format!(
                    "unknown op {name:?}; one of: {}",
                    offered
                        .iter()
                        .map(|op| op.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            })?;
        Ok(GraphRequest {
            op,
            target: self.target.clone().unwrap_or_default(),
            to: self.to.clone(),
            depth: self.depth,
            max_results: self.max_results,
            // Pages callers, callees, references and type_usages, and a
            // symbols/search answer whose filter has no offset.
            offset: self.offset,
            level: self.level,
            include_public: self.include_public,
            include_guesses: self.include_guesses,
            include_vendored: self.include_vendored,
            include_tests: self.include_tests,
            filter: self.filter.clone(),
        })
    }

    /// The `canopy_evidence_pack` parameters.
    pub(crate) fn pack_params(&self) -> PackParams {
        PackParams {
            query: self.query_params(),
            max_handles: self.max_handles,
            max_per_file: self.max_per_file,
            plan: self.plan,
            max_tokens: self.max_tokens,
        }
    }
}

/// Checks `arguments` against `tool`'s schema (known keys, required keys)
/// and deserializes them. Every failure is a `Validation` error that says
/// what to change.
pub(crate) fn parse_args(tool: ToolName, arguments: Option<JsonObject>) -> Result<Args, ToolError> {
    let arguments = arguments.unwrap_or_default();
    let schema = tool.input_schema();
    let known: Vec<&str> = schema["properties"]
        .as_object()
        .map(|p| p.keys().map(String::as_str).collect())
        .unwrap_or_default();
    if let Some(unknown) = arguments.keys().find(|k| !known.contains(&k.as_str())) {
        return Err(ToolError::InvalidArguments(format!(
            "unknown parameter {unknown:?} for {}; accepted: {}",
            tool.as_str(),
            known.join(", ")
        )));
    }
    let required = schema["required"].as_array().cloned().unwrap_or_default();
    for key in required.iter().filter_map(Value::as_str) {
        if arguments.get(key).is_none_or(Value::is_null) {
            return Err(ToolError::InvalidArguments(format!(
                "missing required parameter {key:?} for {}",
                tool.as_str()
            )));
        }
    }
    serde_json::from_value(Value::Object(arguments.clone()))
        .map_err(|e| ToolError::InvalidArguments(bad_argument(&schema, &arguments, &e)))
}

/// What is wrong with `arguments`, which did not deserialize: the first
/// parameter that fails on its own, named, with serde's reason and the
/// values the schema allows for it (so a client can fix it in one go);
/// serde's message alone when no single parameter fails.
fn bad_argument(schema: &Value, arguments: &JsonObject, error: &serde_json::Error) -> String {
    let culprit = arguments.iter().find_map(|(key, value)| {
        let alone = serde_json::Map::from_iter([(key.clone(), value.clone())]);
        serde_json::from_value::<Args>(Value::Object(alone))
            .err()
            .map(|e| (key, e))
    });
    let Some((key, reason)) = culprit else {
        return format!("invalid arguments: {error}");
    };
    let property = &schema["properties"][key.as_str()];
    let allowed = match property["enum"].as_array() {
        Some(values) => {
            let values: Vec<String> = values
                .iter()
                .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string))
                .collect();
            format!("; allowed values: {}", values.join(", "))
        }
        None => match property["type"].as_str() {
            Some(kind) => format!("; expected a JSON {kind}"),
            None => String::new(),
        },
    };
    format!("invalid `{key}`: {reason}{allowed}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(schema: &Value) -> Value {
        if let Some(first) = schema["enum"].get(0) {
            return first.clone();
        }
        match schema.get("type").and_then(Value::as_str) {
            Some("string") => json!("x"),
            Some("integer") => json!(3),
            Some("boolean") => json!(true),
            Some("array") => json!(["x"]),
            Some("object") => json!({}),
            other => panic!("no sample for type {other:?}"),
        }
    }

    #[test]
    fn every_schema_property_parses() {
        for tool in ToolName::ALL {
            let schema = tool.input_schema();
            let props = schema["properties"].as_object().expect("properties");
            let args: JsonObject = props.iter().map(|(k, v)| (k.clone(), sample(v))).collect();
            parse_args(tool, Some(args)).unwrap_or_else(|e| panic!("{}: {e}", tool.as_str()));
        }
    }

    #[test]
    fn unknown_and_missing_keys_are_validation_errors() {
        let mut args = JsonObject::new();
        args.insert("path".into(), json!("/tmp"));
        args.insert("limit".into(), json!(3));
        let err = parse_args(ToolName::Status, Some(args)).expect_err("limit is not a status arg");
        assert!(err.to_string().contains("\"limit\""), "{err}");
        let err = parse_args(ToolName::Expand, None).expect_err("path is required");
        assert!(err.to_string().contains("\"path\""), "{err}");
    }

    /// A value of the wrong shape is named, with what its parameter takes.
    #[test]
    fn a_bad_value_names_its_parameter_and_what_it_takes() {
        let args = |v: Value| v.as_object().cloned();
        let err = parse_args(
            ToolName::Query,
            args(json!({"path": "/r", "pattern": "x", "kind": "nope"})),
        )
        .expect_err("kind is an enum");
        let message = err.to_string();
        assert!(message.contains("invalid `kind`"), "{message}");
        assert!(
            message.contains("allowed values: definition, reference, any"),
            "{message}"
        );
        let err = parse_args(ToolName::Query, args(json!({"path": "/r", "limit": "ten"})))
            .expect_err("limit is an integer");
        let message = err.to_string();
        assert!(
            message.contains("invalid `limit`") && message.contains("expected a JSON integer"),
            "{message}"
        );
    }

    /// The hand-written schemas (worded for the token budget) list exactly
    /// the shared search parameters, plus each tool's own.
    #[test]
    fn search_schemas_are_the_shared_search_parameters() {
        let every = SearchArgs {
            pattern: Some("p".into()),
            patterns: Some(Vec::new()),
            symbol: Some("s".into()),
            section: Some("h".into()),
            parent: Some("c".into()),
            kind: Some(canopy_core::query::QueryKind::Any),
            glob: Some("g".into()),
            match_mode: Some(canopy_core::query::MatchMode::Any),
            query: Some("q".into()),
        };
        let shared: Vec<String> = serde_json::to_value(&every)
            .expect("serializes")
            .as_object()
            .map(|o| o.keys().cloned().collect())
            .unwrap_or_default();
        for (tool, own) in [
            (
                ToolName::Query,
                &["path", "limit", "expand_budget", "result_set"][..],
            ),
            (
                ToolName::EvidencePack,
                &[
                    "path",
                    "max_handles",
                    "max_per_file",
                    "max_tokens",
                    "plan",
                    "result_set",
                ][..],
            ),
        ] {
            let schema = tool.input_schema();
            let mut listed: Vec<&str> = schema["properties"]
                .as_object()
                .map(|p| p.keys().map(String::as_str).collect())
                .unwrap_or_default();
            let mut expected: Vec<&str> = shared.iter().map(String::as_str).collect();
            expected.extend_from_slice(own);
            listed.sort_unstable();
            expected.sort_unstable();
            assert_eq!(listed, expected, "{}", tool.as_str());
        }
    }

    #[test]
    fn names_round_trip() {
        for tool in ToolName::ALL {
            assert_eq!(ToolName::from_name(tool.as_str()), Some(tool));
        }
        assert_eq!(ToolName::from_name("canopy_nope"), None);
    }
}
