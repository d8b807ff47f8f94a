//! One serialisable request type for every graph navigation operation, so
//! the front ends (MCP `canopy_graph`, HTTP `POST /graph`, scripts) share
//! one parser and one dispatcher instead of each matching on operation
//! names.
//!
//! A request names an [`GraphOp`] and a `target` string (the rule is in
//! [`crate::graph::nav`]); `definition` takes its target as
//! `path:line:col`, `path` also needs `to`. Depth and result caps are
//! clamped here, so no front end can ask for unbounded work.

use serde::{Deserialize, Serialize};

use crate::error::{CanopyError, Result};
use crate::graph::nav::{
    DEFAULT_DEPTH, DEFAULT_MAX_RESULTS, Graph, GraphAnswer, MAX_DEPTH, MAX_RESULTS,
};

/// The navigation operations.
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
}

impl GraphOp {
    /// Every operation, in the order tool descriptions list them.
    pub const ALL: [GraphOp; 6] = [
        GraphOp::Callers,
        GraphOp::Callees,
        GraphOp::References,
        GraphOp::TypeUsages,
        GraphOp::Definition,
        GraphOp::Path,
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
        }
    }

    /// The operation with this wire name.
    pub fn from_name(name: &str) -> Option<GraphOp> {
        GraphOp::ALL.into_iter().find(|op| op.as_str() == name)
    }
}

/// A graph navigation request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GraphRequest {
    /// The operation.
    pub op: GraphOp,
    /// `Type.method`, `Type::method`, `pkg.Name`, a path prefix, or `path:line:col`.
    pub target: String,
    /// The end of a `path` request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    /// Transitive depth for callers/callees (default 1, at most 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub depth: Option<u32>,
    /// Most nodes in the answer (default 50, at most 500).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_results: Option<usize>,
}

/// Splits `path:line:col` (col optional, 0-based) into its parts.
pub fn parse_position(target: &str) -> Option<(&str, u32, u32)> {
    let mut parts = target.rsplitn(3, ':');
    let last = parts.next()?;
    let middle = parts.next()?;
    match parts.next() {
        Some("") => None,
        Some(path) => Some((path, middle.parse().ok()?, last.parse().ok()?)),
        None if !middle.is_empty() => Some((middle, last.parse().ok()?, 0)),
        None => None,
    }
}

impl GraphRequest {
    /// Checks the request and clamps its caps; the error says what to change.
    pub fn validate(&self) -> Result<()> {
        if self.target.trim().is_empty() {
            return Err(CanopyError::Validation(
                "target is empty: give Type.method, Type::method, pkg.Name, a path, or path:line:col"
                    .into(),
            ));
        }
        if self.op == GraphOp::Definition && parse_position(&self.target).is_none() {
            return Err(CanopyError::Validation(format!(
                "definition needs target as path:line:col (col 0-based), got {:?}",
                self.target
            )));
        }
        if self.op == GraphOp::Path && self.to.as_deref().is_none_or(|t| t.trim().is_empty()) {
            return Err(CanopyError::Validation(
                "path needs `to`: the symbol the call path should end at".into(),
            ));
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

    /// Result cap clamped to 1..=[`MAX_RESULTS`].
    pub fn max_results(&self) -> usize {
        self.max_results
            .unwrap_or(DEFAULT_MAX_RESULTS)
            .clamp(1, MAX_RESULTS)
    }
}

impl Graph<'_> {
    /// Answers one request (after [`GraphRequest::validate`]).
    pub fn run(&self, request: &GraphRequest) -> Result<GraphAnswer> {
        request.validate()?;
        let target = request.target.trim();
        let (depth, max) = (request.depth(), request.max_results());
        match request.op {
            GraphOp::Callers => self.callers(target, depth, max),
            GraphOp::Callees => self.callees(target, depth, max),
            GraphOp::References => self.references(target, max),
            GraphOp::TypeUsages => self.type_usages(target, max),
            GraphOp::Definition => {
                let (path, line, col) = parse_position(target).ok_or_else(|| {
                    CanopyError::Validation(format!("not path:line:col: {target:?}"))
                })?;
                self.definition(path, line, col)
            }
            GraphOp::Path => self.path(target, request.to.as_deref().unwrap_or_default().trim()),
        }
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
        for op in GraphOp::ALL {
            assert_eq!(GraphOp::from_name(op.as_str()), Some(op));
            let json = serde_json::to_value(op).expect("serialises");
            assert_eq!(json, serde_json::Value::String(op.as_str().into()));
        }
    }

    #[test]
    fn invalid_requests_say_what_to_change() {
        let req = |op, target: &str, to: Option<&str>| GraphRequest {
            op,
            target: target.into(),
            to: to.map(str::to_string),
            depth: Some(99),
            max_results: Some(0),
        };
        let err = req(GraphOp::Definition, "Parser.parse", None)
            .validate()
            .unwrap_err();
        assert!(err.to_string().contains("path:line:col"), "{err}");
        let err = req(GraphOp::Path, "a", None).validate().unwrap_err();
        assert!(err.to_string().contains("`to`"), "{err}");
        let err = req(GraphOp::Callers, "a", Some("b"))
            .validate()
            .unwrap_err();
        assert!(err.to_string().contains("only to op=path"), "{err}");
        let err = req(GraphOp::Callers, "  ", None).validate().unwrap_err();
        assert!(err.to_string().contains("target is empty"), "{err}");
        let ok = req(GraphOp::Callers, "a", None);
        assert_eq!((ok.depth(), ok.max_results()), (MAX_DEPTH, 1));
    }
}
