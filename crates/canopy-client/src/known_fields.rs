//! The field names a request body may carry, so that a misspelt or
//! unsupported field is an error rather than silently ignored.
//!
//! Bodies such as `POST /query` are the repository plus every `canopy_query`
//! parameter on one level (`#[serde(flatten)]`), and serde's
//! `deny_unknown_fields` does not work together with `flatten`. Instead the
//! accepted names are read from the parameter structs' own `Deserialize`
//! impls ([`struct_fields`]), so a parameter added to `QueryParams` is
//! accepted on the wire without a second list to keep in step, and the body
//! is checked against them before it is read ([`unknown_field`]).

use std::fmt;

use canopy_core::graph::request::GraphRequest;
use canopy_core::query::QueryParams;
use serde::de::{self, Deserialize, Visitor};
use serde_json::Value;

use crate::api::{GraphHttpRequest, PackRequest, QueryRequest};

/// The wire names of the fields a derived `Deserialize` struct reads (after
/// `rename`), as serde's derive passes them to `deserialize_struct`.
///
/// Structs with a `#[serde(flatten)]` field are read as maps and name no
/// fields: for them this returns an empty slice (list their own fields by
/// hand and add the flattened struct's, as [`BodyFields`] does).
pub fn struct_fields<'de, T: Deserialize<'de>>() -> &'static [&'static str] {
    let mut fields: &'static [&'static str] = &[];
    // The probe always fails on purpose once it has seen the field list.
    let _ = T::deserialize(FieldProbe {
        fields: &mut fields,
    });
    fields
}

/// A request body type whose top-level field names are known.
pub trait BodyFields {
    /// Every field name the body may carry.
    fn fields() -> Vec<&'static str>;
}

impl BodyFields for QueryRequest {
    fn fields() -> Vec<&'static str> {
        let mut names = vec!["repo"];
        names.extend_from_slice(struct_fields::<QueryParams>());
        names
    }
}

/// The options `PackParams` adds to the query parameters it flattens
/// (checked against the struct by a test below).
const PACK_OPTIONS: &[&str] = &["max_handles", "max_per_file", "plan", "max_tokens"];

impl BodyFields for PackRequest {
    fn fields() -> Vec<&'static str> {
        let mut names = vec!["repo", "session"];
        names.extend_from_slice(PACK_OPTIONS);
        names.extend_from_slice(struct_fields::<QueryParams>());
        names
    }
}

impl BodyFields for GraphHttpRequest {
    fn fields() -> Vec<&'static str> {
        let mut names = vec!["repo", "generation"];
        names.extend_from_slice(struct_fields::<GraphRequest>());
        names
    }
}

/// The first top-level field of `body` that `T` does not read, with the
/// message a caller should see; `None` when every field is known (or the
/// body is not an object, which the typed read then reports).
pub fn unknown_field<T: BodyFields>(body: &Value) -> Option<String> {
    let object = body.as_object()?;
    let known = T::fields();
    let unknown = object.keys().find(|k| !known.contains(&k.as_str()))?;
    let mut expected = known.clone();
    expected.sort_unstable();
    Some(format!(
        "unknown field `{unknown}`, expected one of: {}",
        expected.join(", ")
    ))
}

/// A deserializer that records the field list of the struct asked of it.
struct FieldProbe<'a> {
    fields: &'a mut &'static [&'static str],
}

/// The probe's error (never shown: the probe's result is discarded).
#[derive(Debug)]
struct ProbeDone;

impl fmt::Display for ProbeDone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("field list read")
    }
}

impl std::error::Error for ProbeDone {}

impl de::Error for ProbeDone {
    fn custom<M: fmt::Display>(_msg: M) -> Self {
        ProbeDone
    }
}

impl<'de> de::Deserializer<'de> for FieldProbe<'_> {
    type Error = ProbeDone;

    fn deserialize_any<V: Visitor<'de>>(self, _visitor: V) -> Result<V::Value, ProbeDone> {
        Err(ProbeDone)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        _visitor: V,
    ) -> Result<V::Value, ProbeDone> {
        *self.fields = fields;
        Err(ProbeDone)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map enum identifier ignored_any
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use canopy_core::graph::request::GraphOp;
    use canopy_core::pack::PackParams;
    use canopy_core::query::{MatchMode, QueryKind};
    use serde_json::json;

    /// Every field set, so that serializing names them all; a field added
    /// to the struct breaks this literal and so this test is revisited.
    fn full_query() -> QueryParams {
        QueryParams {
            pattern: Some("p".into()),
            patterns: Some(vec!["a".into()]),
            symbol: Some("s".into()),
            section: Some("h".into()),
            parent: Some("C".into()),
            kind: Some(QueryKind::Definition),
            glob: Some("*.rs".into()),
            match_mode: Some(MatchMode::All),
            limit: Some(3),
            expand_budget: Some(10),
            query: Some("(text x)".into()),
            result_set: Some(true),
        }
    }

    fn keys(v: &Value) -> Vec<String> {
        v.as_object().unwrap().keys().cloned().collect()
    }

    #[test]
    fn the_probe_reads_renamed_fields() {
        let fields = struct_fields::<QueryParams>();
        assert!(fields.contains(&"match"), "{fields:?}");
        assert!(!fields.contains(&"match_mode"), "{fields:?}");
    }

    #[test]
    fn every_field_a_full_request_sends_is_known() {
        let query = QueryRequest {
            repo: "r".into(),
            params: full_query(),
        };
        let body = serde_json::to_value(&query).unwrap();
        for k in keys(&body) {
            assert!(QueryRequest::fields().contains(&k.as_str()), "query: {k}");
        }
        assert_eq!(unknown_field::<QueryRequest>(&body), None);

        let pack = PackRequest {
            repo: "r".into(),
            session: Some("s".into()),
            params: PackParams {
                query: full_query(),
                max_handles: Some(4),
                max_per_file: Some(1),
                plan: Some(true),
                max_tokens: Some(900),
            },
        };
        let body = serde_json::to_value(&pack).unwrap();
        for k in keys(&body) {
            assert!(PackRequest::fields().contains(&k.as_str()), "pack: {k}");
        }

        let graph: GraphHttpRequest = serde_json::from_value(json!({
            "repo": "r", "generation": 2, "op": "callers", "target": "f",
            "to": "g", "depth": 2, "max_results": 5, "level": "file",
            "include_public": true, "include_guesses": true,
        }))
        .unwrap();
        let body = serde_json::to_value(&graph).unwrap();
        for k in keys(&body) {
            assert!(
                GraphHttpRequest::fields().contains(&k.as_str()),
                "graph: {k}"
            );
        }
        assert!(matches!(graph.request.op, GraphOp::Callers));
    }

    #[test]
    fn a_misspelt_field_is_named_with_what_was_expected() {
        let body = json!({"repo": "r", "pattern": "x", "limt": 3});
        let message = unknown_field::<QueryRequest>(&body).unwrap();
        assert!(message.starts_with("unknown field `limt`"), "{message}");
        assert!(message.contains("limit"), "{message}");
        let body = json!({"repo": "r", "op": "callers", "target": "f", "dpth": 1});
        assert!(unknown_field::<GraphHttpRequest>(&body).is_some());
        let body = json!({"repo": "r", "pattern": "x", "max_handle": 3});
        assert!(unknown_field::<PackRequest>(&body).is_some());
        assert_eq!(
            unknown_field::<PackRequest>(&json!(["not", "an object"])),
            None
        );
    }
}
