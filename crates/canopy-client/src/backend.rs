//! [`Backend`]: what answers a front end's requests — the local engine
//! ([`crate::local::LocalBackend`]) or a running `canopy serve` with the
//! caller's own edits overlaid ([`crate::remote::RemoteBackend`]). The CLI
//! and the MCP server each have one dispatcher over this trait: what they
//! ask is the same whichever backend answers; only how they print differs.
//!
//! Answers say which backend gave them ([`Answer`], [`Expanded`],
//! [`StatusReport`], [`Indexed`]): a local answer is the core's value, a
//! service answer carries its provenance ([`Served`]) and goes out with its
//! keys sorted, as the service's answers always did.

use std::path::PathBuf;

use canopy_core::CanopyError;
use canopy_core::context::ContextPack;
use canopy_core::graph::request::GraphResponse;
use canopy_core::index::IndexProgress;
use canopy_core::model::{Expansion, IndexReport, QueryResult, Status};
use canopy_core::pack::EvidencePack;
use canopy_core::resultset::{RefineParams, RefineResult};
use serde::{Serialize, Serializer};

use crate::api::{RepoView, StatusResponse};
use crate::client::ClientError;
use crate::local::LocalBackend;
use crate::overlay::OverlayError;
use crate::remote::ExpandAnswer;
use crate::request::{Context, Expand, GraphQuery, IndexRequest, Pack, Query};
use crate::served::{Served, ServedAnswer, sorted};

/// Answers a front end's requests. Every method blocks (front ends on an
/// async runtime call it on a blocking pool).
pub trait Backend: Send + Sync {
    /// Makes sure the backend can answer what `need` asks: the local engine
    /// indexes a repository that never was (reporting to `progress`), and
    /// completes a partial index before a graph request; the service indexes
    /// on its own, so a remote backend does nothing.
    fn prepare(&self, need: Need<'_>, progress: &dyn IndexProgress) -> Result<(), BackendError>;

    /// Handles that match a query.
    fn query(&self, query: &Query) -> Result<Answer<QueryResult>, BackendError>;

    /// An evidence pack (in the backend's convergence session).
    fn evidence_pack(&self, pack: &Pack) -> Result<Answer<EvidencePack>, BackendError>;

    /// A context pack.
    fn context(&self, context: &Context) -> Result<Answer<ContextPack>, BackendError>;

    /// One graph request (`Graph::run`, here or in the service).
    fn graph(&self, request: &GraphQuery) -> Result<Answer<GraphResponse>, BackendError>;

    /// The exact text of handles, in request order.
    fn expand(&self, ids: &Expand) -> Result<Expanded, BackendError>;

    /// The index's (or the service repository's) state.
    fn status(&self) -> Result<StatusReport, BackendError>;

    /// An index run (the service registers the repository first if needed,
    /// and runs its own over the whole repository).
    fn index(
        &self,
        request: &IndexRequest,
        progress: &dyn IndexProgress,
    ) -> Result<Indexed, BackendError>;

    /// Narrows a server-side result set of an earlier query or pack (a
    /// local index's; the service keeps none).
    fn refine(&self, params: &RefineParams) -> Result<RefineResult, BackendError>;

    /// Forces files (all, or those matching `glob`) to be re-parsed, then
    /// indexes them (a local index's; the service reindexes on its own).
    fn invalidate(
        &self,
        glob: Option<&str>,
        progress: &dyn IndexProgress,
    ) -> Result<Indexed, BackendError>;

    /// The local backend, for what only a local index does; `None` in
    /// service mode (front ends word their own refusal).
    fn local(&self) -> Option<&LocalBackend>;
}

/// What a request needs of the index before it is answered.
#[derive(Clone, Copy, Debug)]
pub enum Need<'a> {
    /// A query or an evidence pack: an index, at least of the files the
    /// query points at.
    Query(&'a canopy_core::query::QueryParams),
    /// A context pack (its task stands for the query).
    Context(&'a canopy_core::context::ContextParams),
    /// A graph request: the whole repository (callers read from a partial
    /// index would be silently missing).
    Graph,
}

/// An answer, local or served.
#[derive(Clone, Debug, PartialEq)]
pub enum Answer<T> {
    /// From the local engine.
    Local(T),
    /// From the service, with where it came from.
    Served(Served<T>),
}

impl<T> Answer<T> {
    /// The core's answer.
    pub fn get(&self) -> &T {
        match self {
            Answer::Local(answer) => answer,
            Answer::Served(served) => &served.answer,
        }
    }
}

impl<T: ServedAnswer> Serialize for Answer<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Answer::Local(answer) => answer.serialize(serializer),
            Answer::Served(served) => served.serialize(serializer),
        }
    }
}

/// Expanded handles, local or served.
#[derive(Clone, Debug, PartialEq)]
pub enum Expanded {
    /// From the local index (the exact bytes included).
    Local(Vec<Expansion>),
    /// From the service and the overlay.
    Served(ExpandAnswer),
}

impl Serialize for Expanded {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Expanded::Local(items) => items.serialize(serializer),
            Expanded::Served(answer) => answer.serialize(serializer),
        }
    }
}

/// The index's state, or the service repository's.
#[derive(Clone, Debug)]
pub enum StatusReport {
    /// The local index's statistics.
    Local(Status),
    /// The service's status of the repository (`GET /status?repo=`).
    Served(StatusResponse),
}

impl Serialize for StatusReport {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            StatusReport::Local(status) => status.serialize(serializer),
            StatusReport::Served(status) => sorted(status, serializer),
        }
    }
}

/// What an index run did.
#[derive(Clone, Debug)]
pub enum Indexed {
    /// A local run's report, and where the index is.
    Local {
        /// The run's report.
        report: IndexReport,
        /// The index database.
        db_path: PathBuf,
    },
    /// The service's repository once its run finished.
    Served(Box<RepoView>),
}

impl Serialize for Indexed {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Indexed::Local { report, .. } => report.serialize(serializer),
            Indexed::Served(view) => view.serialize(serializer),
        }
    }
}

/// Why a backend could not answer.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    /// An engine refused or failed the request: the local one, or the
    /// overlay's in service mode.
    #[error(transparent)]
    Core(#[from] CanopyError),
    /// The service refused the request, or talking to it failed.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// `--service-url` is not a URL the client can use.
    #[error("invalid service URL {url}")]
    InvalidUrl {
        /// The URL as given.
        url: String,
        /// Why not.
        #[source]
        source: ClientError,
    },
    /// The service cannot be reached (finding the repository is the first call).
    #[error("cannot reach the Canopy service at {url}")]
    Unreachable {
        /// The service.
        url: String,
        /// What failed.
        #[source]
        source: ClientError,
    },
    /// No registered repository contains the caller's directory.
    #[error(
        "{start} is not registered with the service at {url}; register it first \
         (`canopy --service-url {url} index` in it, or POST /repos/add)"
    )]
    NotRegistered {
        /// The caller's directory.
        start: String,
        /// The service.
        url: String,
    },
    /// The overlay of uncommitted changes could not be built.
    #[error(transparent)]
    Overlay(OverlayError),
    /// Only a local index does this (`refine`, `invalidate`).
    #[error("{0} works on a local index only, not in service mode")]
    LocalOnly(&'static str),
}

impl BackendError {
    /// Stable machine-readable code: the engine's own for [`BackendError::Core`],
    /// the service's (snake_case, as in its HTTP error body) when it refused
    /// the request, else one named here. Scripts that read `--json` errors
    /// branch on it (issue 32: an unreachable service said only "Error").
    pub fn code(&self) -> &str {
        match self {
            BackendError::Core(core) => core.code(),
            BackendError::Client(ClientError::Api { code, .. }) => code,
            BackendError::Client(ClientError::Connect { .. } | ClientError::Io { .. })
            | BackendError::Unreachable { .. } => "ServiceUnreachable",
            BackendError::Client(ClientError::InvalidResponse(_)) => "ServiceInvalidResponse",
            BackendError::Client(ClientError::InvalidUrl { .. })
            | BackendError::InvalidUrl { .. } => "InvalidServiceUrl",
            BackendError::NotRegistered { .. } => "NotRegistered",
            BackendError::Overlay(_) => "Overlay",
            BackendError::LocalOnly(_) => "LocalOnly",
        }
    }

    /// What the caller should do next (the service's hint when it gave one).
    pub fn hint(&self) -> &str {
        match self {
            BackendError::Core(core) => core.hint(),
            BackendError::Client(ClientError::Api { hint, .. }) => hint,
            BackendError::Client(ClientError::Connect { .. } | ClientError::Io { .. })
            | BackendError::Unreachable { .. } => {
                "start the service (`canopy serve`) or fix --service-url / CANOPY_SERVICE_URL; \
                 without them the CLI answers from the local index"
            }
            BackendError::Client(ClientError::InvalidResponse(_)) => {
                "check that --service-url points at a Canopy service of this version \
                 (GET /health answers with its version)"
            }
            BackendError::Client(ClientError::InvalidUrl { .. })
            | BackendError::InvalidUrl { .. } => {
                "give the service as http://host:port, optionally with a path prefix"
            }
            BackendError::NotRegistered { .. } => {
                "register the repository: run `canopy --service-url URL index` in it (or POST /repos/add)"
            }
            BackendError::Overlay(_) => {
                "the local overlay of uncommitted changes needs git and a writable temporary folder; \
                 commit or stash the changes, or check the message's path"
            }
            BackendError::LocalOnly(_) => {
                "run it without --service-url, in a checkout with a local index"
            }
        }
    }
}

impl From<OverlayError> for BackendError {
    fn from(e: OverlayError) -> Self {
        match e {
            // The overlay's engine is an engine like any other.
            OverlayError::Core(core) => BackendError::Core(core),
            other => BackendError::Overlay(other),
        }
    }
}
