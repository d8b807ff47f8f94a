//! [`ApiError`]: every failure the HTTP API reports, and its one wire shape
//! `{"code": …, "message": …, "hint": …}` with the matching status code.
//!
//! Core errors ([`CanopyError`]) are mapped here and nowhere else. Internal
//! failures (database, I/O, panics) are logged in full with a reference
//! number; the client only sees `internal_error` and that number, never
//! paths or SQL.

use std::sync::atomic::{AtomicU64, Ordering};

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use canopy_client::api::ErrorBody;
use canopy_core::CanopyError;

/// Seconds a client should wait before retrying a `503 not_ready`.
pub const NOT_READY_RETRY_SECS: u64 = 2;

/// Everything an endpoint can fail with.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The body is not JSON (syntax error, truncated).
    #[error("invalid JSON body: {0}")]
    InvalidJson(String),
    /// Well-formed JSON that does not make a valid request (missing or mistyped fields, bad values).
    #[error("{0}")]
    Validation(String),
    /// A query the core rejected (DSL syntax, glob, path outside the repo).
    #[error("{message}")]
    BadQuery {
        /// `query_parse_error`, `invalid_glob`, `malformed_handle` or `path_outside_repo`.
        code: &'static str,
        /// The core's message.
        message: String,
        /// The core's hint.
        hint: &'static str,
    },
    /// The registered path is not the root of a git repository.
    #[error("{0}")]
    NotAGitRepository(String),
    /// No (or a malformed) `Authorization: Bearer` header.
    #[error("missing bearer token")]
    Unauthorized,
    /// A bearer token that does not match.
    #[error("invalid bearer token")]
    Forbidden,
    /// A browser-style cross-site request: an `Origin` not allowed with
    /// `--allow-origin`, or (with `--no-auth`) a foreign `Host`.
    #[error("{0}")]
    ForbiddenOrigin(String),
    /// An admin operation (a rebuild) asked for with the agent token.
    #[error("{0} needs the admin token")]
    AdminRequired(&'static str),
    /// The path is outside every `--allow-root`.
    #[error("{0}")]
    PathNotAllowed(String),
    /// An unknown repository, handle or route.
    #[error("{what} not found: {id}")]
    NotFound {
        /// `repository`, `handle` or `route`.
        what: &'static str,
        /// What was asked for.
        id: String,
    },
    /// The route exists but not with this method.
    #[error("method {0} not allowed on this route")]
    MethodNotAllowed(String),
    /// Another repository already has this name.
    #[error("the name {0:?} is already used by another repository")]
    NameTaken(String),
    /// A handle's generation is not the repository's current generation.
    #[error(
        "stale generation: handle(s) {ids} were issued at generation {given}, the repository is at generation {current}"
    )]
    StaleGeneration {
        /// Comma-separated stale ids.
        ids: String,
        /// A generation the client passed.
        given: u64,
        /// The current generation.
        current: u64,
    },
    /// The file behind a handle changed on disk (or was deleted) since it
    /// was indexed: the path and what happened to it.
    #[error("stale index: {0} since it was indexed")]
    StaleIndex(String),
    /// The request body exceeds `--max-body-bytes`.
    #[error("request body is larger than the limit of {0} bytes")]
    PayloadTooLarge(usize),
    /// The repository has no complete index generation yet.
    #[error("repository {repo} has no complete index yet{}", if *.indexing { " (indexing is in progress)" } else { "" })]
    NotReady {
        /// Repository id.
        repo: String,
        /// Whether a run is in progress.
        indexing: bool,
    },
    /// The repository directory cannot be opened (moved or deleted since it was registered).
    #[error("repository {0} is unavailable: its directory cannot be opened")]
    RepoUnavailable(String),
    /// The repository's index file is damaged; the next reindex rebuilds it.
    #[error("the index is damaged ({0}); the next reindex rebuilds it")]
    IndexDamaged(String),
    /// Fleet mode: the fleet database (PostgreSQL, the shared truth) cannot
    /// be used, so nothing was read or changed.
    #[error("the fleet database cannot be used: {0}")]
    FleetUnavailable(String),
    /// The request took longer than `--request-timeout-secs`.
    #[error("the request did not finish within {0} s")]
    Timeout(u64),
    /// A failure inside the service; details are in the log under `reference`.
    #[error("internal error (reference {reference}); details are in the service log")]
    Internal {
        /// Log reference number.
        reference: u64,
    },
}

static NEXT_REFERENCE: AtomicU64 = AtomicU64::new(1);

impl ApiError {
    /// Logs `detail` with a fresh reference number and returns the opaque error.
    pub fn internal(detail: impl std::fmt::Display) -> ApiError {
        let reference = NEXT_REFERENCE.fetch_add(1, Ordering::Relaxed);
        tracing::error!(reference, "internal error: {detail}");
        ApiError::Internal { reference }
    }

    /// HTTP status of this error.
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::InvalidJson(_)
            | ApiError::Validation(_)
            | ApiError::BadQuery { .. }
            | ApiError::NotAGitRepository(_) => StatusCode::BAD_REQUEST,
            ApiError::Unauthorized => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden
            | ApiError::ForbiddenOrigin(_)
            | ApiError::AdminRequired(_)
            | ApiError::PathNotAllowed(_) => StatusCode::FORBIDDEN,
            ApiError::NotFound { .. } => StatusCode::NOT_FOUND,
            ApiError::MethodNotAllowed(_) => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::NameTaken(_) | ApiError::StaleGeneration { .. } | ApiError::StaleIndex(_) => {
                StatusCode::CONFLICT
            }
            ApiError::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::NotReady { .. }
            | ApiError::RepoUnavailable(_)
            | ApiError::Timeout(_)
            | ApiError::FleetUnavailable(_)
            | ApiError::IndexDamaged(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Internal { .. } => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// Stable machine-readable code.
    pub fn code(&self) -> &'static str {
        match self {
            ApiError::InvalidJson(_) => "invalid_json",
            ApiError::Validation(_) => "validation_error",
            ApiError::BadQuery { code, .. } => code,
            ApiError::NotAGitRepository(_) => "not_a_git_repository",
            ApiError::Unauthorized => "unauthorized",
            ApiError::Forbidden => "forbidden",
            ApiError::ForbiddenOrigin(_) => "forbidden_origin",
            ApiError::AdminRequired(_) => "admin_required",
            ApiError::PathNotAllowed(_) => "path_not_allowed",
            ApiError::NotFound { .. } => "not_found",
            ApiError::MethodNotAllowed(_) => "method_not_allowed",
            ApiError::NameTaken(_) => "name_taken",
            ApiError::StaleGeneration { .. } => "stale_generation",
            ApiError::StaleIndex(_) => "stale_index",
            ApiError::PayloadTooLarge(_) => "payload_too_large",
            ApiError::NotReady { .. } => "not_ready",
            ApiError::RepoUnavailable(_) => "repo_unavailable",
            ApiError::IndexDamaged(_) => "index_damaged",
            ApiError::Timeout(_) => "timeout",
            ApiError::FleetUnavailable(_) => "fleet_unavailable",
            ApiError::Internal { .. } => "internal_error",
        }
    }

    /// What the client should do next.
    pub fn hint(&self) -> String {
        match self {
            ApiError::InvalidJson(_) => {
                "send a JSON object body, e.g. {\"repo\": \"<repo_id>\", \"pattern\": \"auth\"}".into()
            }
            ApiError::Validation(_) => {
                "fix the request fields; GET /openapi.json describes every endpoint".into()
            }
            ApiError::BadQuery { hint, .. } => (*hint).into(),
            ApiError::NotAGitRepository(_) => {
                "pass the absolute path of a repository root (the directory that contains .git)".into()
            }
            ApiError::Unauthorized => {
                "send the header `Authorization: Bearer <token>`: the service's --token, or the token it generated in <data-dir>/token (local canopy clients read that file themselves)".into()
            }
            ApiError::Forbidden => "check the bearer token; it must equal the service's --token (or <data-dir>/token) or its --agent-token".into(),
            ApiError::ForbiddenOrigin(_) => {
                "call the service from a non-browser client (no Origin header; with --no-auth also Host 127.0.0.1/localhost), or start it with --allow-origin <origin>".into()
            }
            ApiError::AdminRequired(_) => {
                "send the admin token (the service's --token or <data-dir>/token); the --agent-token cannot rebuild".into()
            }
            ApiError::PathNotAllowed(_) => {
                "register a repository under one of the service's --allow-root directories".into()
            }
            ApiError::NotFound { what: "repository", .. } => {
                "check the repo id (or name) with GET /repos, or register it with POST /repos/add".into()
            }
            ApiError::NotFound { what: "handle", .. } => {
                "re-run the query to get fresh handles; ids change when the unit itself changes".into()
            }
            ApiError::NotFound { .. } => "GET /openapi.json lists the endpoints".into(),
            ApiError::MethodNotAllowed(_) => "GET /openapi.json lists each endpoint's method".into(),
            ApiError::NameTaken(_) => "choose another name, or omit it to derive one from the directory".into(),
            ApiError::StaleGeneration { .. } => {
                "the index changed since these handles were issued: re-run the query (POST /query or /evidence_pack) and expand the fresh handles".into()
            }
            ApiError::StaleIndex(_) => {
                "POST /reindex for this repo, wait for GET /status to show it ready, then re-query".into()
            }
            ApiError::PayloadTooLarge(_) => {
                "send a smaller request (fewer handles or patterns); the limit is the service's --max-body-bytes".into()
            }
            ApiError::NotReady { indexing: true, .. } => format!(
                "indexing is in progress: retry in {NOT_READY_RETRY_SECS} s, or poll GET /status (or GET /events?wait=30) until the repo is ready"
            ),
            ApiError::NotReady { indexing: false, .. } => format!(
                "POST /reindex {{\"repo\": …}} first, then retry in {NOT_READY_RETRY_SECS} s or poll GET /status until the repo is ready"
            ),
            ApiError::IndexDamaged(_) => {
                "POST /reindex {\"repo\": …, \"rebuild\": true} rebuilds the index (any reindex does); poll GET /status until the repo is ready, then re-query".into()
            }
            ApiError::RepoUnavailable(_) => {
                "check that the repository directory still exists and is readable by the service".into()
            }
            ApiError::Timeout(_) => "narrow the request (glob, limit) or retry later".into(),
            ApiError::FleetUnavailable(_) => {
                "retry shortly; GET /health shows the database state".into()
            }
            ApiError::Internal { .. } => {
                "retry; if it persists, report it with the reference from the message".into()
            }
        }
    }

    /// The wire body.
    pub fn body(&self) -> ErrorBody {
        ErrorBody {
            code: self.code().to_string(),
            message: self.to_string(),
            hint: self.hint(),
        }
    }
}

impl From<CanopyError> for ApiError {
    fn from(e: CanopyError) -> Self {
        match e {
            CanopyError::HandleNotFound { id } => ApiError::NotFound { what: "handle", id },
            CanopyError::StaleIndex { path, deleted } => ApiError::StaleIndex(if deleted {
                format!("{path} was deleted")
            } else {
                format!("{path} changed on disk")
            }),
            CanopyError::QueryParse { .. } => ApiError::BadQuery {
                code: "query_parse_error",
                message: e.to_string(),
                hint: e.hint(),
            },
            CanopyError::GlobPattern { .. } => ApiError::BadQuery {
                code: "invalid_glob",
                message: e.to_string(),
                hint: e.hint(),
            },
            CanopyError::MalformedHandle { .. } => ApiError::BadQuery {
                code: "malformed_handle",
                message: e.to_string(),
                hint: e.hint(),
            },
            CanopyError::PathOutsideRepo(_) => ApiError::BadQuery {
                code: "path_outside_repo",
                message: e.to_string(),
                hint: e.hint(),
            },
            CanopyError::Validation(message) => ApiError::Validation(message),
            CanopyError::TimeBudget { millis } => ApiError::Timeout(millis.div_ceil(1000)),
            CanopyError::IndexDamaged { detail } => ApiError::IndexDamaged(detail),
            other => ApiError::internal(format!("{} ({})", other, other.code())),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        let retry = match self {
            ApiError::NotReady { .. } => Some(NOT_READY_RETRY_SECS),
            // As the fleet layer's own `fleet_unavailable` answers.
            ApiError::FleetUnavailable(_) => Some(2),
            _ => None,
        };
        let mut response = (status, axum::Json(self.body())).into_response();
        if let Some(secs) = retry {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        if matches!(self, ApiError::Unauthorized) {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"canopy\""),
            );
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_errors_map_to_the_documented_codes() {
        let e: ApiError = CanopyError::HandleNotFound { id: "hx".into() }.into();
        assert_eq!((e.status(), e.code()), (StatusCode::NOT_FOUND, "not_found"));
        let e: ApiError = CanopyError::Validation("no search parameter".into()).into();
        assert_eq!(e.status(), StatusCode::BAD_REQUEST);
        let e: ApiError = CanopyError::Internal("secret /etc/path".into()).into();
        assert_eq!(e.code(), "internal_error");
        assert!(!e.to_string().contains("/etc/path"));
    }
}
