//! [`ServiceClient`]: a small blocking client for a running `canopy serve`,
//! for the CLI's `--service-url` mode and for tests. It speaks plain HTTP/1.1
//! over `std::net::TcpStream` (one connection per request, no TLS, no extra
//! dependencies).
//!
//! ```no_run
//! use canopy_core::query::QueryParams;
//! use canopy_client::client::ServiceClient;
//!
//! # fn main() -> Result<(), canopy_client::client::ClientError> {
//! let client = ServiceClient::new("http://127.0.0.1:3000")?
//!     .with_token(std::env::var("CANOPY_TOKEN").ok());
//! let repo = client.add_repo(std::path::Path::new("/src/my-repo"), None)?.repo_id;
//! client.reindex(&repo, None)?;
//! client.wait_until_idle(&repo, std::time::Duration::from_secs(300))?;
//! let params = QueryParams { symbol: Some("main".into()), ..QueryParams::default() };
//! let result = client.query(&repo, &params)?; // the QueryResult, served at a generation
//! if let Some(first) = result.answer.handles.first() {
//!     let text = client.expand(&repo, &[(first.id.as_str(), Some(result.at.generation))])?;
//!     println!("{}", text.contents[0].content);
//! }
//! # Ok(()) }
//! ```
//!
//! Errors from the service arrive as [`ClientError::Api`] with its
//! `{code, message, hint}`; a `409 stale_generation` means "re-query".

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::Path;
use std::time::{Duration, Instant};

use canopy_core::context::{ContextPack, ContextParams};
use canopy_core::graph::request::{GraphRequest, GraphResponse};
use canopy_core::model::QueryResult;
use canopy_core::pack::{EvidencePack, PackParams};
use canopy_core::query::QueryParams;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::api::{
    AddRepoRequest, AddRepoResponse, ContextRequest, ErrorBody, EventsResponse, ExpandRequest,
    ExpandResponse, GraphHttpRequest, HandleRef, HealthResponse, PackRequest, QueryRequest,
    ReindexRequest, ReindexResponse, RepoView, SESSION_HEADER, StatusResponse,
};
use crate::served::{Served, graph_response};

/// Default time to connect.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Default time to wait for a response (long enough for a 60 s long-poll).
pub const RESPONSE_TIMEOUT: Duration = Duration::from_secs(120);

/// What a client call can fail with.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The base URL is not `http://host[:port][/prefix]`.
    #[error("invalid service URL {url:?}: {reason}")]
    InvalidUrl {
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The service could not be reached, or the connection failed.
    // The I/O error is part of the message and deliberately not the error's
    // `source`: callers print both message and chain, which said
    // "Connection refused" twice (issue 32, U6).
    #[error("cannot talk to the service at {url}: {error}")]
    Io {
        /// Base URL.
        url: String,
        /// The I/O error.
        error: std::io::Error,
    },
    /// No connection could be made (refused, unreachable, or not within
    /// the connect timeout): nothing of the request was sent.
    #[error("cannot connect to the service at {url}: {error}")]
    Connect {
        /// Base URL.
        url: String,
        /// The I/O error of the last address tried.
        error: std::io::Error,
    },
    /// The service answered something that is not HTTP/JSON as expected.
    #[error("invalid response from the service: {0}")]
    InvalidResponse(String),
    /// The service answered with an error status and `{code, message, hint}`.
    #[error("{message} [{status} {code}] hint: {hint}")]
    Api {
        /// HTTP status.
        status: u16,
        /// Error code (`not_found`, `stale_generation`, `not_ready`, …).
        code: String,
        /// Message.
        message: String,
        /// What to do next.
        hint: String,
    },
}

impl ClientError {
    /// The service's error code, for [`ClientError::Api`].
    pub fn code(&self) -> Option<&str> {
        match self {
            ClientError::Api { code, .. } => Some(code),
            _ => None,
        }
    }
}

/// A raw HTTP response.
#[derive(Clone, Debug)]
pub struct RawResponse {
    /// Status code.
    pub status: u16,
    /// Headers (names lower-cased), in order.
    pub headers: Vec<(String, String)>,
    /// Body (de-chunked).
    pub body: Vec<u8>,
}

impl RawResponse {
    /// The first header with this (case-insensitive) name.
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The body as JSON.
    pub fn json(&self) -> Result<Value, ClientError> {
        serde_json::from_slice(&self.body).map_err(|e| {
            ClientError::InvalidResponse(format!("body is not JSON ({e}): {}", self.text()))
        })
    }

    /// The body as (lossy) text, truncated to 2000 bytes.
    pub fn text(&self) -> String {
        let end = self.body.len().min(2000);
        String::from_utf8_lossy(&self.body[..end]).into_owned()
    }

    fn into_result(self) -> Result<RawResponse, ClientError> {
        if self.status < 400 {
            return Ok(self);
        }
        match serde_json::from_slice::<ErrorBody>(&self.body) {
            Ok(e) => Err(ClientError::Api {
                status: self.status,
                code: e.code,
                message: e.message,
                hint: e.hint,
            }),
            Err(_) => Err(ClientError::Api {
                status: self.status,
                code: "http_error".into(),
                message: self.text(),
                hint: "check the service URL and the service log".into(),
            }),
        }
    }
}

/// A blocking client for one service.
#[derive(Clone, Debug)]
pub struct ServiceClient {
    base_url: String,
    authority: String,
    prefix: String,
    token: Option<String>,
    session: Option<String>,
    timeout: Duration,
    connect_timeout: Duration,
}

/// Percent-encodes a query-string value.
fn encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn dechunk(mut body: &[u8]) -> Result<Vec<u8>, ClientError> {
    let bad = || ClientError::InvalidResponse("malformed chunked body".into());
    let mut out = Vec::new();
    loop {
        let line_end = find(body, b"\r\n").ok_or_else(bad)?;
        let size_text = std::str::from_utf8(&body[..line_end]).map_err(|_| bad())?;
        let size_text = size_text.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_text, 16).map_err(|_| bad())?;
        body = &body[line_end + 2..];
        if size == 0 {
            return Ok(out);
        }
        if body.len() < size {
            return Err(bad());
        }
        out.extend_from_slice(&body[..size]);
        body = body.get(size + 2..).ok_or_else(bad)?;
    }
}

fn parse_response(raw: &[u8]) -> Result<RawResponse, ClientError> {
    let head_end = find(raw, b"\r\n\r\n").ok_or_else(|| {
        ClientError::InvalidResponse("connection closed before the response headers".into())
    })?;
    let head = String::from_utf8_lossy(&raw[..head_end]);
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or("");
    let status = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse::<u16>().ok())
        .ok_or_else(|| ClientError::InvalidResponse(format!("bad status line {status_line:?}")))?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let rest = &raw[head_end + 4..];
    let get = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    let body = if get("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        dechunk(rest)?
    } else if let Some(len) = get("content-length").and_then(|v| v.parse::<usize>().ok()) {
        if rest.len() < len {
            return Err(ClientError::InvalidResponse(format!(
                "body truncated: {} of {len} bytes",
                rest.len()
            )));
        }
        rest[..len].to_vec()
    } else {
        rest.to_vec()
    };
    Ok(RawResponse {
        status,
        headers,
        body,
    })
}

impl ServiceClient {
    /// A client for `base_url` (`http://host[:port][/prefix]`; port 80 by default).
    pub fn new(base_url: &str) -> Result<ServiceClient, ClientError> {
        let invalid = |reason: &str| ClientError::InvalidUrl {
            url: base_url.to_string(),
            reason: reason.to_string(),
        };
        let trimmed = base_url.trim();
        if trimmed.starts_with("https://") {
            return Err(invalid(
                "https is not supported by the built-in client; reach the service over http (loopback or a tunnel)",
            ));
        }
        let rest = trimmed
            .strip_prefix("http://")
            .ok_or_else(|| invalid("must start with http://"))?;
        let (authority, prefix) = match rest.find('/') {
            Some(i) => (&rest[..i], rest[i..].trim_end_matches('/')),
            None => (rest, ""),
        };
        if authority.is_empty() || authority.contains('@') {
            return Err(invalid("expected http://host:port"));
        }
        let has_port = if authority.starts_with('[') {
            authority.contains("]:")
        } else {
            authority.contains(':')
        };
        let authority = if has_port {
            authority.to_string()
        } else {
            format!("{authority}:80")
        };
        Ok(ServiceClient {
            base_url: format!("http://{authority}{prefix}"),
            authority,
            prefix: prefix.to_string(),
            token: None,
            session: None,
            timeout: RESPONSE_TIMEOUT,
            connect_timeout: CONNECT_TIMEOUT,
        })
    }

    /// Sends `Authorization: Bearer <token>` (an empty token means none).
    pub fn with_token(mut self, token: Option<String>) -> ServiceClient {
        self.token = token.filter(|t| !t.is_empty());
        self
    }

    /// Sends `X-Canopy-Session: <session>` (convergence memory for packs and expands).
    pub fn with_session(mut self, session: Option<String>) -> ServiceClient {
        self.session = session.filter(|s| !s.is_empty());
        self
    }

    /// Sets the response timeout.
    pub fn with_timeout(mut self, timeout: Duration) -> ServiceClient {
        self.timeout = timeout;
        self
    }

    /// Sets the time allowed to connect (per address the host resolves to).
    pub fn with_connect_timeout(mut self, timeout: Duration) -> ServiceClient {
        self.connect_timeout = timeout;
        self
    }

    /// The normalized base URL.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    fn io(&self, error: std::io::Error) -> ClientError {
        ClientError::Io {
            url: self.base_url.clone(),
            error,
        }
    }

    /// Sends one request and returns the response whatever its status.
    /// `extra_headers` are sent verbatim (e.g. to override `Authorization`).
    pub fn send_raw(
        &self,
        method: &str,
        path_and_query: &str,
        body: Option<&[u8]>,
        extra_headers: &[(&str, &str)],
    ) -> Result<RawResponse, ClientError> {
        let addrs: Vec<_> = self
            .authority
            .to_socket_addrs()
            .map_err(|e| self.io(e))?
            .collect();
        let mut last_err = None;
        let mut stream = None;
        for addr in addrs {
            match TcpStream::connect_timeout(&addr, self.connect_timeout) {
                Ok(s) => {
                    stream = Some(s);
                    break;
                }
                Err(e) => last_err = Some(e),
            }
        }
        let mut stream = stream.ok_or_else(|| ClientError::Connect {
            url: self.base_url.clone(),
            error: last_err
                .unwrap_or_else(|| std::io::Error::new(std::io::ErrorKind::NotFound, "no address")),
        })?;
        stream
            .set_read_timeout(Some(self.timeout))
            .map_err(|e| self.io(e))?;
        stream
            .set_write_timeout(Some(self.timeout))
            .map_err(|e| self.io(e))?;
        let overridden = |name: &str| {
            extra_headers
                .iter()
                .any(|(k, _)| k.eq_ignore_ascii_case(name))
        };
        let mut head = format!(
            "{method} {}{path_and_query} HTTP/1.1\r\nConnection: close\r\nUser-Agent: canopy-client/{}\r\n",
            self.prefix,
            env!("CARGO_PKG_VERSION")
        );
        if !overridden("accept") {
            head.push_str("Accept: application/json\r\n");
        }
        if !overridden("host") {
            head.push_str(&format!("Host: {}\r\n", self.authority));
        }
        if let Some(token) = &self.token
            && !overridden("authorization")
        {
            head.push_str(&format!("Authorization: Bearer {token}\r\n"));
        }
        if let Some(session) = &self.session
            && !overridden(SESSION_HEADER)
        {
            head.push_str(&format!("{SESSION_HEADER}: {session}\r\n"));
        }
        for (k, v) in extra_headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        if let Some(body) = body {
            if !overridden("content-type") {
                head.push_str("Content-Type: application/json\r\n");
            }
            head.push_str(&format!("Content-Length: {}\r\n", body.len()));
        } else if method != "GET" {
            head.push_str("Content-Length: 0\r\n");
        }
        head.push_str("\r\n");
        let mut request = head.into_bytes();
        request.extend_from_slice(body.unwrap_or_default());
        // The service may answer (e.g. 413) before reading the whole body;
        // a failed write is only an error if no response follows.
        let write_error = stream.write_all(&request).err();
        let _ = stream.flush();
        let mut raw = Vec::new();
        let mut buf = [0u8; 16 * 1024];
        loop {
            match stream.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => raw.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) if !raw.is_empty() && e.kind() == std::io::ErrorKind::ConnectionReset => {
                    break;
                }
                Err(e) => return Err(self.io(write_error.unwrap_or(e))),
            }
        }
        if raw.is_empty()
            && let Some(e) = write_error
        {
            return Err(self.io(e));
        }
        parse_response(&raw)
    }

    fn call<B: Serialize, T: DeserializeOwned>(
        &self,
        method: &str,
        path: &str,
        body: Option<&B>,
    ) -> Result<T, ClientError> {
        let bytes = body
            .map(serde_json::to_vec)
            .transpose()
            .map_err(|e| ClientError::InvalidResponse(format!("cannot encode the request: {e}")))?;
        let response = self
            .send_raw(method, path, bytes.as_deref(), &[])?
            .into_result()?;
        serde_json::from_slice(&response.body).map_err(|e| {
            ClientError::InvalidResponse(format!("unexpected body ({e}): {}", response.text()))
        })
    }

    /// `POST /repos/add`.
    pub fn add_repo(
        &self,
        path: &Path,
        name: Option<&str>,
    ) -> Result<AddRepoResponse, ClientError> {
        self.add_repo_with(&AddRepoRequest {
            path: path.display().to_string(),
            name: name.map(str::to_string),
            watch: None,
        })
    }

    /// `POST /repos/add` with every field (e.g. `watch`).
    pub fn add_repo_with(&self, req: &AddRepoRequest) -> Result<AddRepoResponse, ClientError> {
        self.call("POST", "/repos/add", Some(req))
    }

    /// `GET /repos`.
    pub fn repos(&self) -> Result<Vec<RepoView>, ClientError> {
        self.call::<(), _>("GET", "/repos", None)
    }

    /// The id of the registered repository containing `path` (the deepest root that is an ancestor of it).
    pub fn repo_for_path(&self, path: &Path) -> Result<Option<String>, ClientError> {
        let path = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
        Ok(self
            .repos()?
            .into_iter()
            .filter(|r| path.starts_with(&r.repo_root))
            .max_by_key(|r| r.repo_root.len())
            .map(|r| r.repo_id))
    }

    /// `POST /reindex` (returns at once; see [`ServiceClient::wait_until_idle`]).
    pub fn reindex(&self, repo: &str, glob: Option<&str>) -> Result<ReindexResponse, ClientError> {
        let req = ReindexRequest {
            repo: repo.to_string(),
            glob: glob.map(str::to_string),
            rebuild: false,
        };
        self.call("POST", "/reindex", Some(&req))
    }

    /// `POST /query`: the core's query result, served.
    pub fn query(
        &self,
        repo: &str,
        params: &QueryParams,
    ) -> Result<Served<QueryResult>, ClientError> {
        let body = QueryRequest {
            repo: repo.to_string(),
            params: params.clone(),
        };
        self.call("POST", "/query", Some(&body))
    }

    /// `POST /evidence_pack` (session from [`ServiceClient::with_session`]).
    pub fn evidence_pack(
        &self,
        repo: &str,
        params: &PackParams,
    ) -> Result<Served<EvidencePack>, ClientError> {
        let body = PackRequest {
            repo: repo.to_string(),
            session: None,
            params: params.clone(),
        };
        self.call("POST", "/evidence_pack", Some(&body))
    }

    /// `POST /context`: a context pack, served.
    pub fn context(
        &self,
        repo: &str,
        params: &ContextParams,
    ) -> Result<Served<ContextPack>, ClientError> {
        let body = ContextRequest {
            repo: repo.to_string(),
            generation: None,
            task: params.task.clone(),
            focus: params.focus.clone(),
            budget_tokens: params.budget_tokens,
            strategy: params.strategy,
        };
        self.call("POST", "/context", Some(&body))
    }

    /// `POST /graph`: one graph request, served.
    pub fn graph(
        &self,
        repo: &str,
        request: &GraphRequest,
    ) -> Result<Served<GraphResponse>, ClientError> {
        let body = GraphHttpRequest {
            repo: repo.to_string(),
            generation: None,
            request: request.clone(),
        };
        let served: Served<Value> = self.call("POST", "/graph", Some(&body))?;
        served
            .try_map(|answer| graph_response(request.op, answer))
            .map_err(|e| ClientError::InvalidResponse(format!("unexpected graph answer ({e})")))
    }

    /// `POST /expand`: `(id, generation)` pairs; a stale generation gives `Api { code: "stale_generation", .. }`.
    pub fn expand(
        &self,
        repo: &str,
        handles: &[(&str, Option<u64>)],
    ) -> Result<ExpandResponse, ClientError> {
        let req = ExpandRequest {
            repo: repo.to_string(),
            handles: handles
                .iter()
                .map(|(id, generation)| HandleRef::Tagged {
                    id: (*id).to_string(),
                    generation: *generation,
                })
                .collect(),
            session: None,
        };
        self.call("POST", "/expand", Some(&req))
    }

    /// `GET /status` (all repositories, or one).
    pub fn status(&self, repo: Option<&str>) -> Result<StatusResponse, ClientError> {
        let path = match repo {
            Some(r) => format!("/status?repo={}", encode(r)),
            None => "/status".into(),
        };
        self.call::<(), _>("GET", &path, None)
    }

    /// `GET /health` (works without a token; details need one).
    pub fn health(&self) -> Result<HealthResponse, ClientError> {
        let raw = self.send_raw("GET", "/health", None, &[])?;
        if raw.status != 200 && raw.status != 503 {
            raw.into_result()?;
            return Err(ClientError::InvalidResponse("unexpected status".into()));
        }
        serde_json::from_slice(&raw.body)
            .map_err(|e| ClientError::InvalidResponse(format!("unexpected body ({e})")))
    }

    /// `GET /events?after_seq=…&limit=…&wait=…` (`wait` seconds of long-poll, at most 60).
    pub fn events(
        &self,
        after_seq: u64,
        limit: Option<usize>,
        wait_seconds: Option<u64>,
    ) -> Result<EventsResponse, ClientError> {
        self.events_for(after_seq, limit, wait_seconds, None)
    }

    /// `GET /events`, optionally for one repository (id or name).
    pub fn events_for(
        &self,
        after_seq: u64,
        limit: Option<usize>,
        wait_seconds: Option<u64>,
        repo: Option<&str>,
    ) -> Result<EventsResponse, ClientError> {
        let mut path = format!("/events?after_seq={after_seq}");
        if let Some(r) = repo {
            path.push_str(&format!("&repo={}", encode(r)));
        }
        if let Some(l) = limit {
            path.push_str(&format!("&limit={l}"));
        }
        if let Some(w) = wait_seconds {
            path.push_str(&format!("&wait={w}"));
        }
        self.call::<(), _>("GET", &path, None)
    }

    /// `GET /metrics` (Prometheus text).
    pub fn metrics(&self) -> Result<String, ClientError> {
        let raw = self.send_raw("GET", "/metrics", None, &[])?.into_result()?;
        Ok(String::from_utf8_lossy(&raw.body).into_owned())
    }

    /// Polls `GET /status?repo=…` until no run is in progress (or `timeout`
    /// passes); returns the repository's state (check `ready` and `status`).
    pub fn wait_until_idle(&self, repo: &str, timeout: Duration) -> Result<RepoView, ClientError> {
        let deadline = Instant::now() + timeout;
        loop {
            let status = self.status(Some(repo))?;
            let view = status
                .repos
                .into_iter()
                .next()
                .map(|r| r.repo)
                .ok_or_else(|| ClientError::InvalidResponse("status without the repo".into()))?;
            if !view.indexing || Instant::now() >= deadline {
                return Ok(view);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_base_urls() {
        let c = ServiceClient::new("http://127.0.0.1:3000/").unwrap();
        assert_eq!(c.base_url(), "http://127.0.0.1:3000");
        let c = ServiceClient::new("http://localhost/canopy").unwrap();
        assert_eq!(c.base_url(), "http://localhost:80/canopy");
        let c = ServiceClient::new("http://[::1]:9").unwrap();
        assert_eq!(c.base_url(), "http://[::1]:9");
        assert!(ServiceClient::new("https://x").is_err());
        assert!(ServiceClient::new("127.0.0.1:3000").is_err());
    }

    #[test]
    fn parses_chunked_and_sized_responses() {
        let r = parse_response(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n",
        )
        .unwrap();
        assert_eq!(r.body, b"abcde");
        let r = parse_response(b"HTTP/1.1 404 Not Found\r\nContent-Length: 2\r\n\r\n{}").unwrap();
        assert_eq!((r.status, r.body.as_slice()), (404, &b"{}"[..]));
        assert_eq!(encode("a b/é"), "a%20b%2F%C3%A9");
    }
}
