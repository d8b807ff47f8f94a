//! [`Served<T>`]: an answer of `canopy serve`, typed: the core's answer (a
//! query result, an evidence pack, a context pack, a graph answer) and
//! where it came from ([`ServedAt`]: the repository, the generation it was
//! answered at, that generation's commit). The server builds one per
//! answer, the client reads it back, and the overlay
//! ([`crate::overlay`]) merges the caller's own edits into it.
//!
//! On the wire the provenance is spread out as the agent contract has it:
//! `repo_id`, `generation` and `commit_sha` beside the answer's own
//! fields, and on every handle `source`, `commit_sha` and `generation`
//! (which handles, [`ServedAnswer`] says by type; the tagging is `tag`'s).
//! A client that merged an overlay adds `overlay`, and its local handles
//! say `source: "local"` instead.
//!
//! Keys on the wire come sorted: these answers always went out through
//! `serde_json::Value`, whose maps are ordered, and [`sorted`] keeps the
//! bytes as they were.

mod tag;

use std::collections::BTreeSet;

use canopy_core::context::ContextPack;
use canopy_core::graph::request::{GraphOp, GraphResponse};
use canopy_core::model::{Freshness, QueryResult};
use canopy_core::pack::EvidencePack;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::overlay::OverlayReport;
use tag::{Tagged, Tagging};

/// Serializes `value` with its map keys sorted (through
/// `serde_json::Value`): the byte order service answers always had.
pub fn sorted<T: Serialize + ?Sized, S: Serializer>(
    value: &T,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serde_json::to_value(value)
        .map_err(serde::ser::Error::custom)?
        .serialize(serializer)
}

/// Which repository state an answer came from.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServedAt {
    /// The service's id of the repository.
    pub repo_id: String,
    /// The generation naming the index state the answer read: the last
    /// complete run's, or one of its own for a state a running pass (or a
    /// failed one) left, given the first time an answer reads it.
    pub generation: u64,
    /// `HEAD` when that generation's run started (none without commits).
    pub commit_sha: Option<String>,
}

/// An answer the service's handles are tagged in: which of its types are
/// handles, by serde name (a handle type that appears anywhere in the
/// answer is tagged there).
pub trait ServedAnswer: Serialize {
    /// The handle types.
    const HANDLES: &'static [&'static str];
    /// Those of [`ServedAnswer::HANDLES`] an overlay merges in (in files
    /// with uncommitted changes they are the overlay's).
    const OVERLAID: &'static [&'static str] = &[];
    /// Whether the service's own handles carry their provenance (context
    /// fragments do not: only an overlay's say `source: "local"`).
    const SERVICE_TAGGED: bool = true;

    /// The answer's freshness block, if it has one. Its `generation` is the
    /// index file's own counter; a served answer says the service's
    /// generation there too ([`Served::new`]), so one response never
    /// carries two generations.
    fn freshness_mut(&mut self) -> Option<&mut Freshness> {
        None
    }
}

impl ServedAnswer for QueryResult {
    const HANDLES: &'static [&'static str] = &["Handle", "RefHandle"];
    const OVERLAID: &'static [&'static str] = &["Handle"];
    fn freshness_mut(&mut self) -> Option<&mut Freshness> {
        self.freshness.as_mut()
    }
}

impl ServedAnswer for EvidencePack {
    const HANDLES: &'static [&'static str] = &["PackHandle"];
    const OVERLAID: &'static [&'static str] = &["PackHandle"];
    fn freshness_mut(&mut self) -> Option<&mut Freshness> {
        self.freshness.as_mut()
    }
}

impl ServedAnswer for ContextPack {
    const HANDLES: &'static [&'static str] = &["Fragment"];
    const OVERLAID: &'static [&'static str] = &["Fragment"];
    const SERVICE_TAGGED: bool = false;
    fn freshness_mut(&mut self) -> Option<&mut Freshness> {
        self.freshness.as_mut()
    }
}

impl ServedAnswer for GraphResponse {
    const HANDLES: &'static [&'static str] = &["Handle"];
}

/// What merging the caller's overlay changed in a served answer (client side).
#[derive(Clone, Debug, PartialEq)]
pub struct OverlayMerge {
    /// `overlay` on the wire: how many files, and what came and went.
    pub report: OverlayReport,
    /// The files with uncommitted changes: handles in them are the overlay's.
    pub local_files: BTreeSet<String>,
    /// The merged handles were cut to the answer's limit, and the answer
    /// has no `truncated` of its own to say so (evidence packs): the wire
    /// then says `truncated: true` beside it.
    pub cut: bool,
}

/// An answer of the service and where it came from.
#[derive(Clone, Debug, PartialEq)]
pub struct Served<T> {
    /// The repository state that answered.
    pub at: ServedAt,
    /// The convergence session the answer counted in (evidence packs).
    pub session: Option<String>,
    /// The core's answer.
    pub answer: T,
    /// The caller's overlay, once merged in (client side).
    pub merged: Option<OverlayMerge>,
}

impl<T: ServedAnswer> Served<T> {
    /// `answer`, served from `at`: its freshness names `at`'s generation
    /// (the one its handles are tagged with and `/expand` checks), not the
    /// index file's own counter.
    pub fn new(at: ServedAt, mut answer: T) -> Served<T> {
        if let Some(freshness) = answer.freshness_mut() {
            freshness.generation = at.generation;
        }
        Served {
            at,
            session: None,
            answer,
            merged: None,
        }
    }
}

impl<T> Served<T> {
    /// The answer counted in `session`.
    pub fn with_session(mut self, session: Option<String>) -> Served<T> {
        self.session = session;
        self
    }

    /// The same provenance with the answer converted by `f`.
    pub fn try_map<U, E>(self, f: impl FnOnce(T) -> Result<U, E>) -> Result<Served<U>, E> {
        Ok(Served {
            at: self.at,
            session: self.session,
            answer: f(self.answer)?,
            merged: self.merged,
        })
    }
}

/// The wire shape of a [`Served`] answer.
#[derive(Serialize)]
struct WireOut<'a, T> {
    #[serde(flatten)]
    answer: Tagged<'a, T>,
    #[serde(flatten)]
    at: &'a ServedAt,
    #[serde(skip_serializing_if = "Option::is_none")]
    session: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    overlay: Option<&'a OverlayReport>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    truncated: bool,
}

impl<T: ServedAnswer> Serialize for Served<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let no_files = BTreeSet::new();
        let tagging = Tagging {
            handles: T::HANDLES,
            overlaid: T::OVERLAID,
            service: T::SERVICE_TAGGED.then_some((&self.at.commit_sha, self.at.generation)),
            local_files: self.merged.as_ref().map_or(&no_files, |m| &m.local_files),
        };
        let wire = WireOut {
            answer: Tagged {
                value: &self.answer,
                tagging: &tagging,
            },
            at: &self.at,
            session: self.session.as_deref(),
            overlay: self.merged.as_ref().map(|m| &m.report),
            truncated: self.merged.as_ref().is_some_and(|m| m.cut),
        };
        sorted(&wire, serializer)
    }
}

/// What a client reads of a served answer (the handles' tags are read
/// back from [`ServedAt`] when it is written again).
#[derive(Deserialize)]
struct WireIn<T> {
    #[serde(flatten)]
    at: ServedAt,
    #[serde(default)]
    session: Option<String>,
    #[serde(flatten)]
    answer: T,
}

impl<'de, T: DeserializeOwned> Deserialize<'de> for Served<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let wire = WireIn::<T>::deserialize(deserializer)?;
        Ok(Served {
            at: wire.at,
            session: wire.session,
            answer: wire.answer,
            merged: None,
        })
    }
}

/// Reads a graph answer of operation `op`. The core's [`GraphResponse`]
/// is an untagged union that only serializes; the request's operation says
/// which answer came back (the families of `Graph::run`).
pub fn graph_response(op: GraphOp, value: Value) -> Result<GraphResponse, serde_json::Error> {
    use GraphOp as Op;
    use serde_json::from_value;
    Ok(match op {
        Op::Callers
        | Op::Callees
        | Op::References
        | Op::TypeUsages
        | Op::Definition
        | Op::Path
        | Op::Implementations
        | Op::Implements
        | Op::Impact
        | Op::TypeHierarchy
        | Op::Scope
        | Op::Detail => GraphResponse::Nodes(Box::new(from_value(value)?)),
        Op::Dependencies | Op::Dependents | Op::DependencyGraph => {
            GraphResponse::Dependencies(from_value(value)?)
        }
        Op::CircularDependencies => GraphResponse::Cycles(from_value(value)?),
        Op::Hotspots => GraphResponse::Hotspots(from_value(value)?),
        Op::UnusedSymbols => GraphResponse::Unused(from_value(value)?),
        Op::Symbols | Op::Search => GraphResponse::Symbols(from_value(value)?),
        Op::Summary | Op::PackageSummary => GraphResponse::Summary(Box::new(from_value(value)?)),
    })
}

#[cfg(test)]
mod tests;
