//! The axum router: routes, handlers, and the middleware for metrics,
//! authentication and cross-site protection.
//!
//! Handlers are thin: they parse the request (JSON bodies are parsed here,
//! whatever the content type, so every rejection becomes an [`ApiError`]),
//! run the [`Service`] method on the blocking pool under the request time
//! limit, and serialize the answer. [`routes`] is the single route table the
//! router is built from; the OpenAPI test checks it against `openapi.json`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Json;
use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{
    DefaultBodyLimit, Extension, MatchedPath, Path as AxumPath, Query, Request, State,
};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, get, post};
use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::error::ApiError;
use crate::service::Service;
use canopy_client::api::{
    AddRepoRequest, ContextRequest, EventsResponse, ExpandRequest, GraphHttpRequest, PackRequest,
    QueryRequest, ReindexRequest, SESSION_HEADER,
};
use canopy_client::known_fields::{BodyFields, unknown_field};
use serde_json::Value;

/// The OpenAPI 3 document served at `GET /openapi.json`.
pub const OPENAPI_JSON: &str = include_str!("openapi.json");

/// Longest `wait` honoured by `GET /events` (seconds).
pub const MAX_EVENTS_WAIT_SECS: u64 = 60;
/// Default and largest `limit` of `GET /events`.
pub const DEFAULT_EVENTS_LIMIT: usize = 100;
/// Largest `limit` of `GET /events`.
pub const MAX_EVENTS_LIMIT: usize = 1000;

type AppState = Arc<Service>;
type Body = Result<Bytes, BytesRejection>;

fn table() -> Vec<(&'static str, &'static str, MethodRouter<AppState>)> {
    vec![
        ("POST", "/repos/add", post(add_repo)),
        ("GET", "/repos", get(list_repos)),
        ("GET", "/repos/{id}/settings", get(repo_settings)),
        ("POST", "/repos/{id}/settings", post(set_repo_settings)),
        ("POST", "/reindex", post(reindex)),
        ("POST", "/query", post(query)),
        ("POST", "/evidence_pack", post(evidence_pack)),
        ("POST", "/context", post(context)),
        ("POST", "/graph", post(graph)),
        ("POST", "/expand", post(expand)),
        ("GET", "/status", get(status)),
        ("GET", "/events", get(events)),
        ("GET", "/health", get(health)),
        ("GET", "/metrics", get(metrics)),
        ("GET", "/openapi.json", get(openapi)),
    ]
}

/// Every `(method, path)` the router serves.
pub fn routes() -> Vec<(&'static str, &'static str)> {
    table().into_iter().map(|(m, p, _)| (m, p)).collect()
}

/// Builds the router over `service`.
pub fn router(service: Arc<Service>) -> Router {
    // One method router per path (a path may serve several methods).
    let mut paths: Vec<(&str, MethodRouter<AppState>)> = Vec::new();
    for (_, path, handler) in table() {
        match paths.iter_mut().find(|(p, _)| *p == path) {
            Some((_, existing)) => *existing = std::mem::take(existing).merge(handler),
            None => paths.push((path, handler)),
        }
    }
    let mut router = Router::new();
    for (path, handler) in paths {
        router = router.route(path, handler);
    }
    router = router
        .fallback(fallback)
        .method_not_allowed_fallback(method_not_allowed);
    if service.fleet().is_some() {
        // Fleet mode: behind authentication, in front of every handler.
        router = router.layer(middleware::from_fn_with_state(
            service.clone(),
            crate::fleet::layer,
        ));
    }
    router
        .layer(DefaultBodyLimit::max(service.config().max_body_bytes))
        .layer(middleware::from_fn_with_state(service.clone(), guard))
        .layer(middleware::from_fn_with_state(service.clone(), track))
        .with_state(service)
}

/// Records request counts and latency per route template.
async fn track(State(svc): State<AppState>, req: Request, next: Next) -> Response {
    let endpoint = req
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "unmatched".into());
    let method = req.method().as_str().to_string();
    let started = Instant::now();
    let response = next.run(req).await;
    svc.metrics().request(
        &endpoint,
        &method,
        response.status().as_u16(),
        started.elapsed(),
    );
    response
}

/// What a request's credentials allow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Everything: the admin token, or a service started with `--no-auth`.
    Admin,
    /// Everything but admin operations (rebuilds): the `--agent-token`.
    Agent,
}

/// Authentication and cross-site protection, on every route but
/// `/health`; the request's [`Scope`] goes along as an extension.
async fn guard(State(svc): State<AppState>, mut req: Request, next: Next) -> Response {
    if req.uri().path() == "/health" {
        return next.run(req).await;
    }
    match authorize(&svc, req.headers()) {
        Ok(scope) => {
            req.extensions_mut().insert(scope);
            next.run(req).await
        }
        Err(e) => e.into_response(),
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn is_loopback_host(host: &str) -> bool {
    canopy_client::auth::is_loopback_host(host)
}

/// Checks a request's credentials and origin.
///
/// * Every `Origin` header must be one of `--allow-origin` (browsers send
///   one on cross-site requests; command-line and agent clients send none),
///   whatever the credentials: a web page can never drive the service
///   unless it was allowed by name.
/// * With a token (given or generated): `Authorization: Bearer` with the
///   admin token ([`Scope::Admin`]) or the agent token ([`Scope::Agent`]).
/// * With `--no-auth` (loopback only): the `Host` must be a loopback name,
///   so web pages cannot rebind DNS onto the service.
pub fn authorize(svc: &Service, headers: &HeaderMap) -> Result<Scope, ApiError> {
    let config = svc.config();
    for origin in headers.get_all(header::ORIGIN) {
        let text = origin.to_str().unwrap_or("");
        let normal = text.trim().trim_end_matches('/').to_ascii_lowercase();
        if !config.allow_origins.contains(&normal) {
            return Err(ApiError::ForbiddenOrigin(format!(
                "cross-site request from Origin {text:?}, which is not in --allow-origin"
            )));
        }
    }
    if let Some(token) = &config.token {
        let value = headers
            .get(header::AUTHORIZATION)
            .ok_or(ApiError::Unauthorized)?
            .to_str()
            .map_err(|_| ApiError::Unauthorized)?;
        let (scheme, given) = value.trim().split_once(' ').ok_or(ApiError::Unauthorized)?;
        if !scheme.eq_ignore_ascii_case("bearer") {
            return Err(ApiError::Unauthorized);
        }
        let given = given.trim().as_bytes();
        if constant_time_eq(given, token.as_bytes()) {
            return Ok(Scope::Admin);
        }
        if let Some(agent) = &config.agent_token
            && constant_time_eq(given, agent.as_bytes())
        {
            return Ok(Scope::Agent);
        }
        return Err(ApiError::Forbidden);
    }
    // Every Host header counts: a proxy or client may pass the first one on
    // and act on another.
    for host in headers.get_all(header::HOST) {
        let host = host.to_str().unwrap_or("");
        if !is_loopback_host(host) {
            return Err(ApiError::ForbiddenOrigin(format!(
                "Host {host:?} is not a loopback name"
            )));
        }
    }
    if headers.get_all(header::HOST).iter().count() > 1 {
        return Err(ApiError::ForbiddenOrigin(
            "more than one Host header".into(),
        ));
    }
    Ok(Scope::Admin)
}

/// Parses a JSON body whatever its content type; maps every failure to an [`ApiError`].
fn parse_json<T: DeserializeOwned>(svc: &Service, body: Body) -> Result<T, ApiError> {
    let bytes = body.map_err(|rejection| {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::PayloadTooLarge(svc.config().max_body_bytes)
        } else {
            ApiError::InvalidJson(rejection.body_text())
        }
    })?;
    serde_json::from_slice(&bytes).map_err(|e| match e.classify() {
        serde_json::error::Category::Data => ApiError::Validation(format!("invalid request: {e}")),
        _ => ApiError::InvalidJson(e.to_string()),
    })
}

/// [`parse_json`] for a body whose parameters are flattened into it (where
/// serde's `deny_unknown_fields` cannot apply): a field the body type does
/// not read is a validation error naming it, not silently ignored.
fn parse_checked_json<T: DeserializeOwned + BodyFields>(
    svc: &Service,
    body: Body,
) -> Result<T, ApiError> {
    let value: Value = parse_json(svc, body)?;
    if let Some(message) = unknown_field::<T>(&value) {
        return Err(ApiError::Validation(format!("invalid request: {message}")));
    }
    serde_json::from_value(value).map_err(|e| ApiError::Validation(format!("invalid request: {e}")))
}

/// Runs `f` on the blocking pool within the request time limit.
async fn blocking<T, F>(svc: &AppState, f: F) -> Result<T, ApiError>
where
    T: Send + 'static,
    F: FnOnce(AppState) -> Result<T, ApiError> + Send + 'static,
{
    let limit = svc.config().request_timeout;
    let task = tokio::task::spawn_blocking({
        let svc = svc.clone();
        move || f(svc)
    });
    match tokio::time::timeout(limit, task).await {
        Err(_) => Err(ApiError::Timeout(limit.as_secs())),
        Ok(Err(join)) => Err(ApiError::internal(format!("request task failed: {join}"))),
        Ok(Ok(result)) => result,
    }
}

fn session_header(headers: &HeaderMap) -> Option<String> {
    headers
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

async fn add_repo(State(svc): State<AppState>, body: Body) -> Result<Response, ApiError> {
    let req: AddRepoRequest = parse_json(&svc, body)?;
    let out = blocking(&svc, move |s| s.add_repo(req)).await?;
    Ok(Json(out).into_response())
}

async fn list_repos(State(svc): State<AppState>) -> Result<Response, ApiError> {
    let out = blocking(&svc, |s| Ok(s.repos())).await?;
    Ok(Json(out).into_response())
}

async fn repo_settings(
    State(svc): State<AppState>,
    AxumPath(repo): AxumPath<String>,
) -> Result<Response, ApiError> {
    let out = blocking(&svc, move |s| s.repo_settings(&repo)).await?;
    Ok(Json(out).into_response())
}

async fn set_repo_settings(
    State(svc): State<AppState>,
    AxumPath(repo): AxumPath<String>,
    body: Body,
) -> Result<Response, ApiError> {
    let req: Value = parse_json(&svc, body)?;
    let out = blocking(&svc, move |s| s.set_repo_settings(&repo, req)).await?;
    Ok(Json(out).into_response())
}

async fn reindex(
    State(svc): State<AppState>,
    scope: Option<Extension<Scope>>,
    body: Body,
) -> Result<Response, ApiError> {
    let req: ReindexRequest = parse_json(&svc, body)?;
    // A rebuild throws an index away and costs a full build: operators only.
    if req.rebuild && scope.map(|Extension(s)| s) != Some(Scope::Admin) {
        return Err(ApiError::AdminRequired("a rebuild"));
    }
    let out = blocking(&svc, move |s| s.reindex(req)).await?;
    Ok(Json(out).into_response())
}

async fn query(State(svc): State<AppState>, body: Body) -> Result<Response, ApiError> {
    let req: QueryRequest = parse_checked_json(&svc, body)?;
    let out = blocking(&svc, move |s| s.query(req)).await?;
    Ok(Json(out).into_response())
}

async fn graph(State(svc): State<AppState>, body: Body) -> Result<Response, ApiError> {
    let req: GraphHttpRequest = parse_checked_json(&svc, body)?;
    let out = blocking(&svc, move |s| s.graph(req)).await?;
    Ok(Json(out).into_response())
}

async fn evidence_pack(
    State(svc): State<AppState>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let req: PackRequest = parse_checked_json(&svc, body)?;
    let session = session_header(&headers);
    let out = blocking(&svc, move |s| s.evidence_pack(req, session)).await?;
    Ok(Json(out).into_response())
}

/// `POST /context`: the pack as JSON (for programs: every field, code
/// JSON-escaped), or with `Accept: text/plain` its wire form
/// ([`canopy_core::context::wire::text`]: a JSON header line, then each
/// fragment as plain text under a provenance line), the form whose tokens
/// `budget_tokens` bounds.
async fn context(
    State(svc): State<AppState>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let req: ContextRequest = parse_json(&svc, body)?;
    let out = blocking(&svc, move |s| s.context(req)).await?;
    if wants_text(&headers) {
        let text = canopy_core::context::wire::text(&out.answer);
        return Ok(([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], text).into_response());
    }
    Ok(Json(out).into_response())
}

/// The client asked for `text/plain` before (or instead of) JSON.
fn wants_text(headers: &HeaderMap) -> bool {
    headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .and_then(|accept| {
            accept
                .split(',')
                .map(|m| m.split(';').next().unwrap_or("").trim())
                .find(|m| *m == "text/plain" || *m == "application/json")
        })
        == Some("text/plain")
}

async fn expand(
    State(svc): State<AppState>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let req: ExpandRequest = parse_json(&svc, body)?;
    let session = session_header(&headers);
    let out = blocking(&svc, move |s| s.expand(req, session)).await?;
    Ok(Json(out).into_response())
}

/// `GET /status` query string.
#[derive(Debug, Deserialize)]
struct StatusQuery {
    repo: Option<String>,
}

async fn status(
    State(svc): State<AppState>,
    q: Result<Query<StatusQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let q = q.map_err(|e| ApiError::Validation(e.body_text()))?.0;
    let out = blocking(&svc, move |s| s.status(q.repo.as_deref())).await?;
    Ok(Json(out).into_response())
}

/// `GET /events` query string (one node's feed and the fleet's alike).
#[derive(Debug, Deserialize)]
pub(crate) struct EventsQuery {
    pub(crate) after_seq: Option<u64>,
    pub(crate) limit: Option<usize>,
    pub(crate) wait: Option<u64>,
    pub(crate) repo: Option<String>,
}

async fn events(
    State(svc): State<AppState>,
    q: Result<Query<EventsQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let q = q.map_err(|e| ApiError::Validation(e.body_text()))?.0;
    let after = q.after_seq.unwrap_or(0);
    let limit = q
        .limit
        .unwrap_or(DEFAULT_EVENTS_LIMIT)
        .clamp(1, MAX_EVENTS_LIMIT);
    // The schema's maximum is enforced, not silently clamped (issue 32, U15).
    let wait = q.wait.unwrap_or(0);
    if wait > MAX_EVENTS_WAIT_SECS {
        return Err(ApiError::Validation(format!(
            "wait must be between 0 and {MAX_EVENTS_WAIT_SECS} seconds (got {wait})"
        )));
    }
    let wait = Duration::from_secs(wait);
    let deadline = tokio::time::Instant::now() + wait;
    let mut changes = svc.subscribe_events();
    let mut shutdown = svc.subscribe_shutdown();
    loop {
        changes.borrow_and_update();
        let repo = q.repo.clone();
        let page: EventsResponse =
            blocking(&svc, move |s| s.events(after, limit, repo.as_deref())).await?;
        if !page.items.is_empty() || wait.is_zero() || *shutdown.borrow() {
            return Ok(Json(page).into_response());
        }
        tokio::select! {
            changed = tokio::time::timeout_at(deadline, changes.changed()) => {
                if !matches!(changed, Ok(Ok(()))) {
                    return Ok(Json(page).into_response());
                }
            }
            _ = shutdown.changed() => return Ok(Json(page).into_response()),
        }
    }
}

async fn health(State(svc): State<AppState>, headers: HeaderMap) -> Result<Response, ApiError> {
    let detailed = authorize(&svc, &headers).is_ok();
    let out = blocking(&svc, move |s| Ok(s.health(detailed))).await?;
    let code = if out.status == "unhealthy" {
        StatusCode::SERVICE_UNAVAILABLE
    } else {
        StatusCode::OK
    };
    Ok((code, Json(out)).into_response())
}

async fn metrics(State(svc): State<AppState>) -> Result<Response, ApiError> {
    let text = blocking(&svc, |s| Ok(s.render_metrics())).await?;
    Ok((
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
        )],
        text,
    )
        .into_response())
}

async fn openapi() -> Response {
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        OPENAPI_JSON,
    )
        .into_response()
}

async fn fallback(req: Request) -> ApiError {
    ApiError::NotFound {
        what: "route",
        id: format!("{} {}", req.method(), req.uri().path()),
    }
}

async fn method_not_allowed(req: Request) -> ApiError {
    ApiError::MethodNotAllowed(req.method().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts() {
        for h in [
            "localhost",
            "localhost:3000",
            "127.0.0.1:80",
            "[::1]:3000",
            "app.localhost",
        ] {
            assert!(is_loopback_host(h), "{h}");
        }
        for h in [
            "evil.com",
            "evil.com:3000",
            "10.0.0.1:3000",
            "localhost.evil.com",
            "",
        ] {
            assert!(!is_loopback_host(h), "{h}");
        }
    }

    #[test]
    fn openapi_states_the_limits_the_events_route_enforces() {
        let doc: serde_json::Value = serde_json::from_str(OPENAPI_JSON).unwrap();
        let params = doc["paths"]["/events"]["get"]["parameters"]
            .as_array()
            .expect("GET /events has parameters");
        let schema = |name: &str| {
            params
                .iter()
                .find(|p| p["name"] == name)
                .map(|p| p["schema"].clone())
                .unwrap_or_else(|| panic!("parameter {name} is not documented"))
        };
        assert_eq!(schema("wait")["maximum"], MAX_EVENTS_WAIT_SECS);
        assert_eq!(schema("limit")["maximum"], MAX_EVENTS_LIMIT as u64);
        assert_eq!(schema("limit")["default"], DEFAULT_EVENTS_LIMIT as u64);
    }

    #[test]
    fn openapi_is_valid_json_with_every_route() {
        let doc: serde_json::Value = serde_json::from_str(OPENAPI_JSON).unwrap();
        for (method, path) in routes().into_iter().chain(crate::fleet::FLEET_ROUTES) {
            assert!(
                doc["paths"][path][method.to_ascii_lowercase()].is_object(),
                "{method} {path} is missing from openapi.json"
            );
        }
    }

    /// `GET /fleet`'s document names exactly the fields the fleet crate
    /// serializes, and requires the ones always present.
    #[test]
    fn openapi_describes_the_fleet_view_as_served() {
        use canopy_fleet::{FleetView, NodeView, PlacementView};
        let doc: serde_json::Value = serde_json::from_str(OPENAPI_JSON).unwrap();
        let view = FleetView {
            node_id: "n1".into(),
            schema_version: 1,
            fleet_id: "f".into(),
            latest_seq: 3,
            nodes: vec![NodeView {
                node_id: "n1".into(),
                advertise_url: "http://127.0.0.1:1".into(),
                state: "active".into(),
                version: "0".into(),
                live: true,
                heartbeat_age_ms: 1,
                joined_ms: 2,
                owned: 1,
            }],
            repos: vec![PlacementView {
                repo_id: "r".into(),
                name: "r".into(),
                owner: None,
                epoch: 0,
                lease_remaining_ms: None,
                preferred: None,
                generation: 0,
                status: "not_indexed".into(),
            }],
        };
        let served = serde_json::to_value(&view).unwrap();
        let schemas = &doc["components"]["schemas"];
        for (schema, value) in [
            ("FleetView", &served),
            ("FleetNode", &served["nodes"][0]),
            ("FleetPlacement", &served["repos"][0]),
        ] {
            let props = schemas[schema]["properties"].as_object().unwrap();
            let fields = value.as_object().unwrap();
            let mut documented: Vec<&String> = props.keys().collect();
            let mut sent: Vec<&String> = fields.keys().collect();
            documented.sort();
            sent.sort();
            assert_eq!(documented, sent, "{schema}");
            for required in schemas[schema]["required"].as_array().unwrap() {
                let name = required.as_str().unwrap();
                assert!(!fields[name].is_null(), "{schema}.{name} is required");
            }
        }
        assert_eq!(
            doc["paths"]["/fleet"]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
                ["$ref"],
            "#/components/schemas/FleetView"
        );
        let add = &schemas["AddRepoRequest"]["properties"];
        assert!(add["git_url"].is_object() && add["ref"].is_object());
    }
}
