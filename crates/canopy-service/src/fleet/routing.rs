//! The HTTP side of fleet mode, one middleware in front of the
//! single-node handlers (after authentication):
//!
//! * the registry (`GET /repos`, `POST /repos/add`), the event feed
//!   (`GET /events`) and `GET /fleet` are answered by any node from
//!   PostgreSQL;
//! * a repository request (`/query`, `/evidence_pack`, `/context`,
//!   `/graph`, `/expand`, `/reindex`, `/status?repo=`,
//!   `POST /repos/{id}/fetch`) is answered here when this node holds the
//!   repository's lease and published a complete index under it, else
//!   forwarded to the owner with the caller's `Authorization` and
//!   [`FORWARDED_BY_HEADER`]; a forwarded request is never forwarded again
//!   (421 `misdirected`, after which the forwarding node retries once with
//!   a route read from the database); 503 `not_ready` with `Retry-After`
//!   while nobody can answer; 503 `owner_unreachable` with `Retry-After`
//!   (naming the owner and the failed forward) when the owner holds the
//!   lease but cannot be reached from here;
//! * `/health` and `/metrics` get the node's fleet sections;
//! * `GET`/`POST /repos/{id}/settings` go to their handlers on any node,
//!   which read and write the setting in PostgreSQL
//!   (`Service::repo_settings`); the owner applies a change at its next
//!   heartbeat.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Json;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use canopy_client::api::{
    AddRepoResponse, EventRecord, EventsResponse, ReindexRequest, RepoView, RunError,
    SESSION_HEADER,
};
use canopy_client::client::{ClientError, ServiceClient};
use canopy_core::engine::rfc3339_utc;
use canopy_fleet::{FleetError, ForwardStage, NewRepo, RepoRow, RepoSource, Route};
use serde::Deserialize;
use serde_json::{Value, json};

use super::FleetNode;
use crate::http::{EventsQuery, MAX_EVENTS_WAIT_SECS};
use crate::service::Service;

/// Header a node adds to a request it forwards (value: its node id); a
/// request carrying it is never forwarded again.
pub const FORWARDED_BY_HEADER: &str = "x-canopy-forwarded-by";

type Svc = Arc<Service>;

/// The routes only fleet mode serves (this layer answers them; the
/// single-node router has none of them, so they are 404 without `--fleet`).
pub const FLEET_ROUTES: [(&str, &str); 2] = [("GET", "/fleet"), ("POST", "/repos/{id}/fetch")];

fn error(status: StatusCode, code: &str, message: String, hint: &str) -> Response {
    let body = json!({ "code": code, "message": message, "hint": hint });
    (status, Json(body)).into_response()
}

fn unavailable(reason: &str, retry_after: Duration) -> Response {
    let secs = retry_after.as_secs().max(1);
    let mut r = error(
        StatusCode::SERVICE_UNAVAILABLE,
        "not_ready",
        format!("the repository cannot be answered right now: {reason}"),
        "retry after the Retry-After seconds; GET /fleet shows who owns what",
    );
    if let Ok(v) = HeaderValue::from_str(&secs.to_string()) {
        r.headers_mut().insert(header::RETRY_AFTER, v);
    }
    r
}

fn database_error(e: &FleetError) -> Response {
    let mut r = error(
        StatusCode::SERVICE_UNAVAILABLE,
        "fleet_unavailable",
        format!("the fleet database cannot be used: {e}"),
        "retry shortly; GET /health shows the database state",
    );
    r.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("2"));
    r
}

/// What a repository request does, for routing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// An answer from the index: needs a complete index under this lease.
    Answer,
    /// `/status?repo=`: local state is enough.
    Status,
    /// `/reindex`: a write (refused read-only; a git source is fetched first).
    Reindex,
    /// `POST /repos/{id}/fetch`: fetch the git source, then reindex.
    Fetch,
}

/// The fleet middleware (installed only in fleet mode).
pub async fn layer(State(svc): State<Svc>, req: Request, next: Next) -> Response {
    let Some(node) = svc.fleet().cloned() else {
        return next.run(req).await;
    };
    let path = req.uri().path().to_string();
    let method = req.method().as_str().to_string();
    match (method.as_str(), path.as_str()) {
        ("GET", "/fleet") => match node.fleet().view().await {
            Ok(view) => Json(view).into_response(),
            Err(e) => database_error(&e),
        },
        ("GET", "/repos") => list_repos(&node).await,
        ("POST", "/repos/add") => add_repo(&svc, &node, req).await,
        ("GET", "/events") => events(&node, req).await,
        ("GET", "/health") => health(&svc, &node, req, next).await,
        ("GET", "/metrics") => {
            let response = next.run(req).await;
            let (parts, body) = response.into_parts();
            let mut text = match axum::body::to_bytes(body, usize::MAX).await {
                Ok(b) => String::from_utf8_lossy(&b).into_owned(),
                Err(_) => String::new(),
            };
            node.fleet().render_metrics(&mut text);
            Response::from_parts(parts, Body::from(text))
        }
        ("GET", "/status") => {
            let repo = req.uri().query().and_then(|q| {
                q.split('&')
                    .filter_map(|kv| kv.split_once('='))
                    .find(|(k, _)| *k == "repo")
                    .map(|(_, v)| v.to_string())
            });
            match repo.filter(|r| !r.is_empty()) {
                Some(repo) => repository(&svc, &node, req, None, &repo, Kind::Status, next).await,
                None => status_all(&node, req, next).await,
            }
        }
        ("POST", "/query" | "/evidence_pack" | "/context" | "/graph" | "/expand" | "/reindex") => {
            let kind = if path == "/reindex" {
                Kind::Reindex
            } else {
                Kind::Answer
            };
            let (parts, body) = req.into_parts();
            let limit = svc.config().max_body_bytes;
            let Ok(bytes) = axum::body::to_bytes(body, limit).await else {
                return crate::error::ApiError::PayloadTooLarge(limit).into_response();
            };
            let repo = serde_json::from_slice::<Value>(&bytes)
                .ok()
                .and_then(|v| v.get("repo").and_then(Value::as_str).map(str::to_string));
            let req = Request::from_parts(parts, Body::from(bytes.clone()));
            match repo.filter(|r| !r.trim().is_empty()) {
                // Let the handler report the malformed request.
                None => next.run(req).await,
                Some(repo) => {
                    repository(&svc, &node, req, Some(bytes), repo.trim(), kind, next).await
                }
            }
        }
        ("POST", p) if p.starts_with("/repos/") && p.ends_with("/fetch") => {
            let repo = p["/repos/".len()..p.len() - "/fetch".len()].to_string();
            if repo.is_empty() || repo.contains('/') {
                return next.run(req).await;
            }
            repository(
                &svc,
                &node,
                req,
                Some(Bytes::new()),
                &repo,
                Kind::Fetch,
                next,
            )
            .await
        }
        _ => next.run(req).await,
    }
}

/// The repository id `repo` (an id or a name) names, from this node's
/// entries and names seen before, else from the database.
async fn resolve(svc: &Svc, node: &FleetNode, repo: &str) -> Result<Option<String>, FleetError> {
    if let Some(id) = node.known_id(repo) {
        return Ok(Some(id));
    }
    let (svc2, id) = (svc.clone(), repo.to_string());
    if tokio::task::spawn_blocking(move || svc2.fleet_has(&id))
        .await
        .unwrap_or(false)
    {
        return Ok(Some(repo.to_string()));
    }
    Ok(node.fleet().repo(repo).await?.map(|row| {
        node.remember_name(&row.name, &row.repo_id);
        row.repo_id
    }))
}

/// Answers a repository request here or at its owner: resolves the name,
/// reads the route (fresh from the database when the cached one has no
/// owner), then follows it, retrying once with a fresh route when a
/// forwarded request comes back misdirected.
#[allow(clippy::too_many_arguments)]
async fn repository(
    svc: &Svc,
    node: &Arc<FleetNode>,
    req: Request,
    body: Option<Bytes>,
    repo: &str,
    kind: Kind,
    next: Next,
) -> Response {
    let repo_id = match repository_id(svc, node, repo).await {
        Ok(id) => id,
        Err(response) => return response,
    };
    let forwarded = req.headers().contains_key(FORWARDED_BY_HEADER);
    let outgoing = Outgoing::of(&req, node);
    let mut route = node.fleet().route(&repo_id);
    if matches!(route, Route::Unavailable { .. })
        && let Ok(fresh) = node.fleet().route_fresh(&repo_id).await
    {
        route = fresh;
    }
    let mut retried = false;
    loop {
        match route {
            Route::Local(fence) => {
                return answer_here(svc, node, req, &repo_id, fence.epoch(), kind, next).await;
            }
            Route::LocalReadOnly { .. } => {
                return match kind {
                    Kind::Answer | Kind::Status => next.run(req).await,
                    Kind::Reindex | Kind::Fetch => unavailable(
                        "the fleet database is unreachable: this node answers reads only",
                        Duration::from_secs(2),
                    ),
                };
            }
            Route::Unavailable {
                reason,
                retry_after,
            } => {
                if forwarded {
                    return misdirected(node);
                }
                return unavailable(&reason, retry_after);
            }
            Route::Forward { node_id, url, .. } => {
                if forwarded {
                    return misdirected(node);
                }
                let owner = Owner {
                    node_id: &node_id,
                    url: &url,
                };
                match forward_to_owner(svc, node, &repo_id, owner, &outgoing, body.clone()).await {
                    Forwarded::Answer(response) => return response,
                    Forwarded::Misdirected(response) => {
                        if retried {
                            return response;
                        }
                        retried = true;
                        route = match node.fleet().route_fresh(&repo_id).await {
                            Ok(r) => r,
                            Err(e) => return database_error(&e),
                        };
                    }
                    Forwarded::Unreachable(failed) => {
                        // The cached route may be a heartbeat old: when the
                        // database names another owner now (or this node),
                        // follow it once; the same owner is unreachable.
                        let unreachable = owner_unreachable(node, &repo_id, owner, &failed);
                        if retried || failed.stage != ForwardStage::Connect {
                            return unreachable;
                        }
                        retried = true;
                        route = match node.fleet().route_fresh(&repo_id).await {
                            Ok(Route::Forward { node_id: now, .. }) if now == node_id => {
                                return unreachable;
                            }
                            Ok(r) => r,
                            Err(_) => return unreachable,
                        };
                    }
                }
            }
        }
    }
}

/// The id of the repository a request names, or the response refusing it.
/// While the database is down the name is kept as the id: a repository
/// this node has an entry for may still be answered read-only (the route
/// says).
async fn repository_id(svc: &Svc, node: &Arc<FleetNode>, repo: &str) -> Result<String, Response> {
    match resolve(svc, node, repo).await {
        Ok(Some(id)) => Ok(id),
        Ok(None) => Err(error(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("repository {repo} not found"),
            "GET /repos lists the registered repositories",
        )),
        Err(e) if e.is_retryable() => Ok(repo.to_string()),
        Err(e) => Err(database_error(&e)),
    }
}

/// Answers on this node, which holds the lease at `epoch`: only once the
/// service adopted the repository and, for an answer from the index, a
/// complete index was published under this lease.
#[allow(clippy::too_many_arguments)]
async fn answer_here(
    svc: &Svc,
    node: &Arc<FleetNode>,
    req: Request,
    repo_id: &str,
    epoch: u64,
    kind: Kind,
    next: Next,
) -> Response {
    let ready = node.is_ready(repo_id, epoch);
    let (svc2, id) = (svc.clone(), repo_id.to_string());
    let adopted = tokio::task::spawn_blocking(move || svc2.fleet_has(&id))
        .await
        .unwrap_or(false);
    if !adopted || (kind == Kind::Answer && !ready) {
        return unavailable(
            "this node took the repository over and is indexing it",
            Duration::from_secs(1),
        );
    }
    match kind {
        Kind::Answer | Kind::Status => next.run(req).await,
        Kind::Reindex | Kind::Fetch => reindex_here(svc, node, req, repo_id, kind, next).await,
    }
}

/// The node a route forwards to.
#[derive(Clone, Copy)]
struct Owner<'a> {
    node_id: &'a str,
    url: &'a str,
}

/// What one forwarding attempt came back with.
enum Forwarded {
    /// The response to give the caller.
    Answer(Response),
    /// The owner no longer holds the repository (421): worth one retry
    /// with a fresh route.
    Misdirected(Response),
    /// The owner could not be reached (already counted).
    Unreachable(ForwardError),
}

/// Time allowed to connect to an owner. A loopback or LAN connect takes
/// well under a millisecond; 2 s covers one lost SYN (retransmitted after
/// 1 s) and bounds what a caller waits for an owner nobody can reach.
const FORWARD_CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// A forward that got no answer from the owner.
#[derive(Debug)]
struct ForwardError {
    stage: ForwardStage,
    message: String,
}

/// 503 `owner_unreachable`: the owner holds the repository's lease (it
/// heartbeats in PostgreSQL) but this node cannot reach it over HTTP.
/// Nothing else can answer honestly: only the owner has the index at the
/// published generation, and it keeps the lease while it heartbeats.
fn owner_unreachable(
    node: &FleetNode,
    repo_id: &str,
    owner: Owner<'_>,
    failed: &ForwardError,
) -> Response {
    let heartbeat = node.fleet().config().timing.heartbeat;
    let retry_after = heartbeat.as_secs() + u64::from(heartbeat.subsec_nanos() > 0);
    let here = node.fleet().node_id();
    let body = json!({
        "code": "owner_unreachable",
        "message": format!(
            "the owner {} of {repo_id} at {} cannot be reached from node {here} ({}: {})",
            owner.node_id, owner.url, failed.stage.as_str(), failed.message
        ),
        "hint": "retry after the Retry-After seconds; an owner that is down loses the repository \
                 within the lease TTL and another node takes it over; GET /health on this node \
                 lists the owners it cannot reach",
        "owner": { "node_id": owner.node_id, "url": owner.url },
        "forward": { "from": here, "stage": failed.stage, "error": failed.message },
    });
    let mut r = (StatusCode::SERVICE_UNAVAILABLE, Json(body)).into_response();
    if let Ok(v) = HeaderValue::from_str(&retry_after.max(1).to_string()) {
        r.headers_mut().insert(header::RETRY_AFTER, v);
    }
    r
}

/// Forwards the request to its owner once, recording the outcome in the
/// fleet metrics.
async fn forward_to_owner(
    svc: &Svc,
    node: &Arc<FleetNode>,
    repo_id: &str,
    owner: Owner<'_>,
    outgoing: &Outgoing,
    body: Option<Bytes>,
) -> Forwarded {
    let Owner { node_id, url } = owner;
    let metrics = node.fleet().metrics();
    let started = Instant::now();
    // An owner that stops answering (paused, partitioned) loses its lease:
    // stop waiting for it when the route moves.
    let moved = owner_moved(node, repo_id, node_id);
    let sent = tokio::select! {
        sent = forward(svc, url, outgoing, body) => sent,
        () = moved => {
            metrics.observe_forward("error", started.elapsed());
            return Forwarded::Answer(unavailable(
                &format!("the owner {node_id} stopped answering and lost the repository"),
                Duration::from_secs(1),
            ));
        }
    };
    match sent {
        Ok(response) if response.status() == StatusCode::MISDIRECTED_REQUEST => {
            metrics.observe_forward("misdirected", started.elapsed());
            metrics.forward_reached(node_id, url);
            Forwarded::Misdirected(response)
        }
        Ok(response) => {
            metrics.observe_forward("ok", started.elapsed());
            metrics.forward_reached(node_id, url);
            Forwarded::Answer(response)
        }
        Err(e) => {
            metrics.observe_forward("error", started.elapsed());
            metrics.forward_failed(node_id, url, e.stage, &e.message);
            tracing::warn!(
                owner = node_id,
                url,
                repo = repo_id,
                stage = e.stage.as_str(),
                "forward failed: {}",
                e.message
            );
            Forwarded::Unreachable(e)
        }
    }
}

/// Returns once `repo_id` is no longer routed to `owner` (checked against
/// each new snapshot, a few times a heartbeat).
async fn owner_moved(node: &FleetNode, repo_id: &str, owner: &str) {
    let step = node.fleet().config().timing.heartbeat / 4;
    loop {
        tokio::time::sleep(step).await;
        match node.fleet().route(repo_id) {
            Route::Forward { node_id, .. } if node_id == owner => {}
            _ => return,
        }
    }
}

fn misdirected(node: &FleetNode) -> Response {
    error(
        StatusCode::MISDIRECTED_REQUEST,
        "misdirected",
        format!(
            "node {} does not own this repository (the request was forwarded here)",
            node.fleet().node_id()
        ),
        "the forwarding node retries with a fresh route",
    )
}

/// `/reindex` or `/repos/{id}/fetch` on the owner: a git source is
/// fetched first, so the run indexes its newest commit.
async fn reindex_here(
    svc: &Svc,
    node: &Arc<FleetNode>,
    req: Request,
    repo_id: &str,
    kind: Kind,
    next: Next,
) -> Response {
    let row = match node.fleet().repo(repo_id).await {
        Ok(Some(row)) => row,
        Ok(None) => {
            return error(
                StatusCode::NOT_FOUND,
                "not_found",
                format!("repository {repo_id} not found"),
                "GET /repos lists the registered repositories",
            );
        }
        Err(e) => return database_error(&e),
    };
    if let RepoSource::Git { url, git_ref } = &row.source {
        let dir = node.checkout_dir(repo_id);
        let policy = node.git_policy().clone();
        let (url, git_ref) = (url.clone(), git_ref.clone());
        let synced = tokio::task::spawn_blocking(move || {
            canopy_fleet::git::sync(&url, &git_ref, &dir, &policy)
        })
        .await;
        match synced {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                return error(
                    StatusCode::BAD_GATEWAY,
                    "fetch_failed",
                    format!("fetching {repo_id}: {e}"),
                    "check the repository's git URL and ref",
                );
            }
            Err(e) => {
                return crate::error::ApiError::internal(format!("fetch task: {e}"))
                    .into_response();
            }
        }
    }
    if kind == Kind::Reindex {
        return next.run(req).await;
    }
    let request = ReindexRequest {
        repo: repo_id.to_string(),
        ..ReindexRequest::default()
    };
    let svc2 = svc.clone();
    match tokio::task::spawn_blocking(move || svc2.reindex(request)).await {
        Ok(Ok(out)) => Json(out).into_response(),
        Ok(Err(e)) => e.into_response(),
        Err(e) => crate::error::ApiError::internal(format!("reindex task: {e}")).into_response(),
    }
}

/// What a forward repeats of the caller's request.
struct Outgoing {
    method: String,
    path_and_query: String,
    headers: Vec<(String, String)>,
}

impl Outgoing {
    fn of(req: &Request, node: &FleetNode) -> Outgoing {
        let mut headers: Vec<(String, String)> = Vec::new();
        for name in [
            header::AUTHORIZATION.as_str(),
            SESSION_HEADER,
            header::ACCEPT.as_str(),
            header::CONTENT_TYPE.as_str(),
        ] {
            if let Some(v) = req.headers().get(name).and_then(|v| v.to_str().ok()) {
                headers.push((name.to_string(), v.to_string()));
            }
        }
        headers.push((
            FORWARDED_BY_HEADER.to_string(),
            node.fleet().node_id().to_string(),
        ));
        Outgoing {
            method: req.method().as_str().to_string(),
            path_and_query: req
                .uri()
                .path_and_query()
                .map(|p| p.as_str().to_string())
                .unwrap_or_else(|| "/".into()),
            headers,
        }
    }
}

/// Sends the caller's request (`out`, with `body`) to the owner at `url`
/// and returns its answer.
async fn forward(
    svc: &Svc,
    url: &str,
    out: &Outgoing,
    body: Option<Bytes>,
) -> Result<Response, ForwardError> {
    let (method, path_and_query, headers) = (
        out.method.clone(),
        out.path_and_query.clone(),
        out.headers.clone(),
    );
    let url = url.to_string();
    // The owner has the request's own time limit, and a little more.
    let timeout = svc.config().request_timeout + Duration::from_secs(5);
    let failed = |stage, message: String| ForwardError { stage, message };
    let raw = tokio::task::spawn_blocking(move || {
        let client = ServiceClient::new(&url)
            .map_err(|e| failed(ForwardStage::Connect, e.to_string()))?
            .with_timeout(timeout)
            .with_connect_timeout(FORWARD_CONNECT_TIMEOUT);
        let refs: Vec<(&str, &str)> = headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        client
            .send_raw(&method, &path_and_query, body.as_deref(), &refs)
            .map_err(|e| match e {
                ClientError::Connect { error, .. } => {
                    failed(ForwardStage::Connect, error.to_string())
                }
                e => failed(ForwardStage::Response, e.to_string()),
            })
    })
    .await
    .map_err(|e| failed(ForwardStage::Response, e.to_string()))??;
    let status = StatusCode::from_u16(raw.status)
        .map_err(|e| failed(ForwardStage::Response, e.to_string()))?;
    let kept: Vec<(header::HeaderName, HeaderValue)> = [header::CONTENT_TYPE, header::RETRY_AFTER]
        .into_iter()
        .filter_map(|name| {
            let v = HeaderValue::from_str(raw.header(name.as_str())?).ok()?;
            Some((name, v))
        })
        .collect();
    let mut response = (status, raw.body).into_response();
    for (name, v) in kept {
        response.headers_mut().insert(name, v);
    }
    Ok(response)
}

fn view(row: &RepoRow) -> RepoView {
    let s = &row.state;
    let root = match &row.source {
        RepoSource::Path { path } => path.clone(),
        RepoSource::Git { url, git_ref } => format!("{url}#{git_ref}"),
    };
    RepoView {
        repo_id: row.repo_id.clone(),
        name: row.name.clone(),
        repo_root: root,
        status: s.status.clone(),
        ready: s.generation > 0,
        indexing: s.status == "indexing",
        generation: s.generation,
        commit_sha: s.commit_sha.clone(),
        added_at: rfc3339_utc(row.added_at),
        last_indexed_at: s.last_indexed_at.map(rfc3339_utc),
        last_index: s
            .last_report
            .clone()
            .and_then(|v| serde_json::from_value(v).ok()),
        last_error: s
            .last_error
            .clone()
            .and_then(|v| serde_json::from_value::<RunError>(v).ok()),
        consecutive_failures: s.consecutive_failures,
        rerun_queued: false,
        watch: row.watch,
        index_lag_seconds: 0.0,
        progress: None,
    }
}

/// `GET /status` without `repo` in fleet mode: every repository of the
/// fleet, from PostgreSQL, each with its `owner` and `lease_epoch`. The
/// repositories this node owns are its local state (with the index
/// statistics); the others are their published state (`index` null: only
/// the owner reads its index).
async fn status_all(node: &FleetNode, req: Request, next: Next) -> Response {
    let (rows, placements) = match (node.fleet().repos().await, node.fleet().view().await) {
        (Ok(rows), Ok(view)) => (rows, view.repos),
        (Err(e), _) | (_, Err(e)) => return database_error(&e),
    };
    let response = next.run(req).await;
    if !response.status().is_success() {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
        return Response::from_parts(parts, Body::empty());
    };
    let Ok(mut doc) = serde_json::from_slice::<Value>(&bytes) else {
        return Response::from_parts(parts, Body::from(bytes));
    };
    let local: Vec<Value> = doc["repos"].as_array().cloned().unwrap_or_default();
    let here = node.fleet().node_id().to_string();
    let repos: Vec<Value> = rows
        .iter()
        .map(|row| {
            let placement = placements.iter().find(|p| p.repo_id == row.repo_id);
            let owner = placement.and_then(|p| p.owner.clone());
            let mine = local
                .iter()
                .find(|r| r["repo_id"] == row.repo_id.as_str())
                .filter(|_| owner.as_deref() == Some(here.as_str()));
            let mut item = match mine {
                Some(r) => r.clone(),
                None => {
                    let mut v = serde_json::to_value(view(row)).unwrap_or_else(|_| json!({}));
                    v["index"] = Value::Null;
                    v
                }
            };
            item["owner"] = owner.map(Value::from).unwrap_or(Value::Null);
            item["lease_epoch"] = Value::from(placement.map(|p| p.epoch).unwrap_or(0));
            item
        })
        .collect();
    doc["repos"] = Value::from(repos);
    doc["node_id"] = Value::from(here);
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(doc.to_string()))
}

async fn list_repos(node: &FleetNode) -> Response {
    match node.fleet().repos().await {
        Ok(rows) => Json(rows.iter().map(view).collect::<Vec<_>>()).into_response(),
        Err(e) => database_error(&e),
    }
}

/// `POST /repos/add` in fleet mode: `{path}` (a path every node can read)
/// or `{git_url, ref?}`, with `name?` and `watch?`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FleetAddRepo {
    path: Option<String>,
    git_url: Option<String>,
    #[serde(rename = "ref")]
    git_ref: Option<String>,
    name: Option<String>,
    watch: Option<bool>,
}

async fn add_repo(svc: &Svc, node: &FleetNode, req: Request) -> Response {
    let limit = svc.config().max_body_bytes;
    let Ok(bytes) = axum::body::to_bytes(req.into_body(), limit).await else {
        return crate::error::ApiError::PayloadTooLarge(limit).into_response();
    };
    let add: FleetAddRepo = match serde_json::from_slice(&bytes) {
        Ok(a) => a,
        Err(e) => {
            return crate::error::ApiError::Validation(format!("invalid request: {e}"))
                .into_response();
        }
    };
    let (source, base) = match (&add.path, &add.git_url) {
        (Some(path), None) => {
            let (svc2, path) = (svc.clone(), path.clone());
            match tokio::task::spawn_blocking(move || svc2.fleet_registrable(&path)).await {
                Ok(Ok((root, base))) => (RepoSource::Path { path: root }, base),
                Ok(Err(e)) => return e.into_response(),
                Err(e) => return crate::error::ApiError::internal(e).into_response(),
            }
        }
        (None, Some(url)) => {
            let url = url.trim().to_string();
            let git_ref = add.git_ref.clone().unwrap_or_else(|| "HEAD".into());
            if let Err(e) = canopy_fleet::git::validate_url(&url, node.git_policy())
                .and_then(|()| canopy_fleet::git::validate_ref(&git_ref))
            {
                return crate::error::ApiError::Validation(e.to_string()).into_response();
            }
            let base = url
                .trim_end_matches('/')
                .rsplit(['/', ':'])
                .next()
                .unwrap_or("repo")
                .trim_end_matches(".git")
                .to_string();
            (RepoSource::Git { url, git_ref }, base)
        }
        _ => {
            return crate::error::ApiError::Validation(
                "give either `path` or `git_url` (with an optional `ref`)".into(),
            )
            .into_response();
        }
    };
    let explicit = add.name.as_deref().map(str::trim).filter(|n| !n.is_empty());
    let new = NewRepo {
        name: explicit
            .map(str::to_string)
            .unwrap_or_else(|| crate::service::sanitize_repo_name(&base)),
        name_is_explicit: explicit.is_some(),
        source: source.clone(),
        watch: add.watch.unwrap_or(false),
    };
    match node.fleet().add_repo(&new).await {
        Ok((row, created)) => {
            if !created
                && let Some(w) = add.watch
                && w != row.watch
                && let Err(e) = node.fleet().set_watch(&row.repo_id, w).await
            {
                return database_error(&e);
            }
            node.remember_name(&row.name, &row.repo_id);
            let out = AddRepoResponse {
                repo_id: row.repo_id.clone(),
                name: row.name.clone(),
                repo_root: view(&row).repo_root,
                created,
            };
            Json(out).into_response()
        }
        Err(FleetError::NameTaken(n)) => crate::error::ApiError::NameTaken(n).into_response(),
        Err(e) if e.is_retryable() => database_error(&e),
        Err(e) => crate::error::ApiError::Validation(e.to_string()).into_response(),
    }
}

/// `GET /events` from the fleet's feed: one global sequence, so a cursor
/// means the same on every node.
async fn events(node: &FleetNode, req: Request) -> Response {
    let q: EventsQuery = match serde_urlencoded_query(req.uri().query().unwrap_or("")) {
        Ok(q) => q,
        Err(e) => return crate::error::ApiError::Validation(e).into_response(),
    };
    let after = q.after_seq.unwrap_or(0);
    let limit = q
        .limit
        .unwrap_or(crate::http::DEFAULT_EVENTS_LIMIT)
        .clamp(1, crate::http::MAX_EVENTS_LIMIT);
    let wait = q.wait.unwrap_or(0);
    if wait > MAX_EVENTS_WAIT_SECS {
        return crate::error::ApiError::Validation(format!(
            "wait must be between 0 and {MAX_EVENTS_WAIT_SECS} seconds (got {wait})"
        ))
        .into_response();
    }
    let repo_id = match q.repo.as_deref().map(str::trim).filter(|r| !r.is_empty()) {
        None => None,
        Some(r) => match node.fleet().repo(r).await {
            Ok(Some(row)) => Some(row.repo_id),
            Ok(None) => {
                return error(
                    StatusCode::NOT_FOUND,
                    "not_found",
                    format!("repository {r} not found"),
                    "GET /repos lists the registered repositories",
                );
            }
            Err(e) => return database_error(&e),
        },
    };
    let deadline = Instant::now() + Duration::from_secs(wait);
    loop {
        let page = match node
            .fleet()
            .events_after(after, limit, repo_id.as_deref())
            .await
        {
            Ok(p) => p,
            Err(e) => return database_error(&e),
        };
        let now = Instant::now();
        if !page.items.is_empty() || now >= deadline {
            let next_after_seq = match page.items.last() {
                Some(last) => last.seq,
                None if repo_id.is_some() => after.max(page.latest_seq),
                None => after,
            };
            let items = page
                .items
                .into_iter()
                .map(|e| {
                    let mut data = e.data;
                    // Which node wrote it, under which lease epoch: followers
                    // (and the fencing tests) can tell owners apart.
                    if let (Some(node_id), Some(obj)) = (&e.node_id, data.as_object_mut()) {
                        obj.insert(
                            "written_by".into(),
                            json!({ "node_id": node_id, "epoch": e.epoch }),
                        );
                    }
                    EventRecord {
                        seq: e.seq,
                        ts: rfc3339_utc(e.ts_ms.div_euclid(1000)),
                        ts_ms: e.ts_ms,
                        kind: e.kind,
                        repo_id: e.repo_id,
                        data,
                    }
                })
                .collect();
            return Json(EventsResponse {
                items,
                next_after_seq,
                latest_seq: page.latest_seq,
            })
            .into_response();
        }
        // Wake on anything newer than what this page saw (a filtered page
        // may have seen later events of other repositories).
        let seen = page.latest_seq.max(after);
        if let Err(e) = node.fleet().wait_events(seen, deadline - now).await {
            return database_error(&e);
        }
    }
}

/// Parses `a=1&b=x` into `T` (the events query string).
fn serde_urlencoded_query<T: serde::de::DeserializeOwned>(query: &str) -> Result<T, String> {
    let mut map = serde_json::Map::new();
    for kv in query.split('&').filter(|s| !s.is_empty()) {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        let v = percent_decode(v);
        let value = match v.parse::<u64>() {
            Ok(n) if k != "repo" => Value::from(n),
            _ => Value::String(v),
        };
        map.insert(k.to_string(), value);
    }
    serde_json::from_value(Value::Object(map)).map_err(|e| format!("invalid query: {e}"))
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("");
                match u8::from_str_radix(hex, 16) {
                    Ok(b) => {
                        out.push(b);
                        i += 3;
                    }
                    Err(_) => {
                        out.push(b'%');
                        i += 1;
                    }
                }
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

const HEALTH_ORDER: [&str; 4] = ["healthy", "degraded", "recovering", "unhealthy"];

async fn health(svc: &Svc, node: &FleetNode, req: Request, next: Next) -> Response {
    let detailed = crate::http::authorize(svc, req.headers()).is_ok();
    let response = next.run(req).await;
    let (mut parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
        return Response::from_parts(parts, Body::empty());
    };
    let Ok(mut doc) = serde_json::from_slice::<Value>(&bytes) else {
        return Response::from_parts(parts, Body::from(bytes));
    };
    let fleet = node.fleet().health();
    let rank = |s: &str| HEALTH_ORDER.iter().position(|x| *x == s).unwrap_or(0);
    let local = doc["status"].as_str().unwrap_or("healthy").to_string();
    if rank(fleet.status) > rank(&local) {
        doc["status"] = Value::from(fleet.status);
    }
    if let Some(reasons) = doc["reasons"].as_array_mut() {
        reasons.extend(
            fleet
                .reasons
                .iter()
                .map(|r| Value::from(format!("fleet: {r}"))),
        );
    }
    if detailed {
        doc["fleet"] = serde_json::to_value(&fleet).unwrap_or(Value::Null);
    }
    if doc["status"] == "unhealthy" {
        parts.status = StatusCode::SERVICE_UNAVAILABLE;
    }
    parts.headers.remove(header::CONTENT_LENGTH);
    let _: &HeaderMap = &parts.headers;
    Response::from_parts(parts, Body::from(doc.to_string()))
}
