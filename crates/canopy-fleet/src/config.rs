//! [`FleetConfig`] and [`Timing`]: what a node needs to join a fleet (the
//! database URL, its own id and the address other nodes forward to) and the
//! clock of leases and heartbeats, validated before anything connects.

use std::str::FromStr;
use std::time::Duration;

use crate::error::FleetError;
use crate::tls::{MakeTls, SslMode, TlsSettings, TlsStream, split_settings};

/// Environment variable holding the fleet database URL (`canopy serve
/// --fleet URL` takes precedence).
pub const FLEET_URL_ENV: &str = "CANOPY_FLEET_URL";

/// Longest node id.
pub const MAX_NODE_ID_LEN: usize = 128;

/// Lease and heartbeat timing. Every duration is measured twice: by
/// PostgreSQL (`clock_timestamp()`, the only clock that decides who holds a
/// lease) and by the node's monotonic clock (when it must stop acting as an
/// owner); node clocks never need to agree with each other.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Timing {
    /// A lease lasts this long after its last renewal; a node whose last
    /// heartbeat is older is not live.
    pub lease_ttl: Duration,
    /// How often a node heartbeats, renews its leases and looks for work.
    pub heartbeat: Duration,
    /// A node stops using a lease this long before PostgreSQL would let
    /// another node take it (covers the renewal's own travel time).
    pub safety_margin: Duration,
    /// The node ranked k-th for a free repository (rendezvous order over
    /// live nodes) takes its lease once it has been free k × this long, so
    /// the preferred node wins and a stuck one is replaced. Two heartbeats
    /// by default: the preferred node gets a heartbeat and a slow turn
    /// before the next one may step in.
    pub takeover_step: Duration,
    /// A node must have been live this long before others hand repositories
    /// over to it (a node that flaps does not move work back and forth).
    pub settle: Duration,
    /// How long a node handing a repository over waits for the service to
    /// say its work stopped ([`crate::Fleet::release`]) before releasing anyway.
    pub drain_timeout: Duration,
    /// Client-side limit of one database round trip.
    pub op_timeout: Duration,
    /// Limit of one connection attempt.
    pub connect_timeout: Duration,
    /// First reconnection delay after the database went away (doubles).
    pub backoff_start: Duration,
    /// Longest reconnection delay.
    pub backoff_max: Duration,
}

impl Default for Timing {
    fn default() -> Self {
        Timing {
            lease_ttl: Duration::from_secs(10),
            heartbeat: Duration::from_secs(2),
            safety_margin: Duration::from_secs(1),
            takeover_step: Duration::from_secs(4),
            settle: Duration::from_secs(4),
            drain_timeout: Duration::from_secs(5),
            op_timeout: Duration::from_secs(3),
            connect_timeout: Duration::from_secs(3),
            backoff_start: Duration::from_millis(100),
            backoff_max: Duration::from_secs(5),
        }
    }
}

impl Timing {
    /// Refuses timings under which a node could act on a lease PostgreSQL
    /// already considers expired, or could not renew in time.
    pub fn validate(&self) -> Result<(), FleetError> {
        let bad = |m: &str| Err(FleetError::Config(m.to_string()));
        if self.lease_ttl < Duration::from_millis(500) {
            return bad("the lease TTL must be at least 500 ms");
        }
        if self.heartbeat.is_zero() || self.heartbeat * 2 > self.lease_ttl {
            return bad("the heartbeat must be positive and at most half the lease TTL");
        }
        if self.safety_margin * 2 > self.lease_ttl {
            return bad("the safety margin must be at most half the lease TTL");
        }
        if self.op_timeout.is_zero() || self.op_timeout * 2 > self.lease_ttl {
            return bad("the operation timeout must be positive and at most half the lease TTL");
        }
        if self.connect_timeout.is_zero() || self.backoff_start.is_zero() {
            return bad("the connect timeout and the first backoff must be positive");
        }
        if self.backoff_max < self.backoff_start {
            return bad("the longest backoff must not be shorter than the first");
        }
        Ok(())
    }

    /// A timing scaled down for tests: `lease_ttl` as given, the rest in
    /// proportion to the defaults (heartbeat a fifth of it, and so on).
    pub fn scaled(lease_ttl: Duration) -> Timing {
        let part = |n: u32, d: u32| lease_ttl * n / d;
        Timing {
            lease_ttl,
            heartbeat: part(1, 5),
            safety_margin: part(1, 10),
            takeover_step: part(2, 5),
            settle: part(2, 5),
            drain_timeout: part(1, 2),
            op_timeout: part(3, 10),
            connect_timeout: part(3, 10),
            backoff_start: Duration::from_millis(50),
            backoff_max: part(1, 2),
        }
    }
}

/// Everything a node needs to join a fleet.
#[derive(Clone)]
pub struct FleetConfig {
    /// `postgres://user:password@host:port/db` (libpq URL or key=value form).
    pub url: String,
    /// This node's id: stable across restarts (e.g. the host name), unique
    /// among live nodes.
    pub node_id: String,
    /// Where other nodes send requests for repositories this node owns
    /// (`http://host:port`).
    pub advertise_url: String,
    /// The canopy version, shown in `GET /fleet`.
    pub version: String,
    /// Lease and heartbeat timing.
    pub timing: Timing,
    /// Database connections for requests (the heartbeat and the event
    /// listener have one each besides).
    pub pool_size: usize,
}

impl std::fmt::Debug for FleetConfig {
    // The URL may carry a password: only its redacted form is ever printed.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FleetConfig")
            .field("url", &redact_url(&self.url))
            .field("node_id", &self.node_id)
            .field("advertise_url", &self.advertise_url)
            .field("version", &self.version)
            .field("timing", &self.timing)
            .field("pool_size", &self.pool_size)
            .finish()
    }
}

impl FleetConfig {
    /// A configuration with default timing and pool size.
    pub fn new(
        url: impl Into<String>,
        node_id: impl Into<String>,
        advertise_url: impl Into<String>,
    ) -> FleetConfig {
        FleetConfig {
            url: url.into(),
            node_id: node_id.into(),
            advertise_url: advertise_url.into(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            timing: Timing::default(),
            pool_size: 4,
        }
    }

    /// Checks every field; returns the database to connect to (the
    /// driver's configuration and the TLS connector for `sslmode`).
    pub(crate) fn validate(&self) -> Result<Target, FleetError> {
        self.timing.validate()?;
        validate_node_id(&self.node_id)?;
        let adv = self.advertise_url.trim();
        if !(adv.starts_with("http://") || adv.starts_with("https://")) || adv.len() > 2048 {
            return Err(FleetError::Config(format!(
                "the advertised URL must be http(s)://host:port, got {adv:?}"
            )));
        }
        if self.pool_size == 0 || self.pool_size > 64 {
            return Err(FleetError::Config("the pool size must be 1..=64".into()));
        }
        // libpq's default root certificate file.
        let default_root = std::env::var_os("HOME")
            .map(|h| std::path::PathBuf::from(h).join(".postgresql/root.crt"));
        let (driver_url, tls) = split_settings(&self.url, default_root.as_deref())?;
        let mut pg = tokio_postgres::Config::from_str(&driver_url).map_err(|e| {
            FleetError::Config(format!(
                "cannot read the fleet URL {}: {e}",
                redact_url(&self.url)
            ))
        })?;
        if pg.get_hosts().is_empty() {
            return Err(FleetError::Config(format!(
                "the fleet URL {} names no host",
                redact_url(&self.url)
            )));
        }
        if pg.get_connect_timeout().is_none() {
            pg.connect_timeout(self.timing.connect_timeout);
        }
        // A server that vanished without closing the socket (a crashed
        // host, a cut network) is noticed by TCP rather than never.
        pg.keepalives(true)
            .keepalives_idle(Duration::from_secs(5))
            .tcp_user_timeout(self.timing.lease_ttl);
        pg.application_name(format!("canopy-fleet {}", self.node_id));
        let unix_only = pg
            .get_hosts()
            .iter()
            .all(|h| !matches!(h, tokio_postgres::config::Host::Tcp(_)));
        // The driver asks the server for TLS (`prefer`) or insists
        // (`require`); the connector decides what is checked. Unix sockets
        // never use TLS, as in libpq.
        pg.ssl_mode(match tls.mode {
            _ if unix_only => tokio_postgres::config::SslMode::Disable,
            SslMode::Disable => tokio_postgres::config::SslMode::Disable,
            SslMode::Prefer => tokio_postgres::config::SslMode::Prefer,
            _ => tokio_postgres::config::SslMode::Require,
        });
        Ok(Target {
            connector: tls.connector()?,
            tls,
            pg,
        })
    }
}

/// The database a node connects to: the driver's configuration, the TLS
/// settings and their connector.
#[derive(Clone)]
pub(crate) struct Target {
    pg: tokio_postgres::Config,
    tls: TlsSettings,
    connector: MakeTls,
}

impl Target {
    /// Opens one session; the connection future must be driven (spawned)
    /// by the caller. A failure caused by TLS is a configuration error
    /// that names the `sslmode` / `sslrootcert` settings; any other is
    /// classified as usual ([`crate::error::classify`]).
    pub(crate) async fn connect(
        &self,
    ) -> Result<
        (
            tokio_postgres::Client,
            tokio_postgres::Connection<tokio_postgres::Socket, TlsStream>,
        ),
        FleetError,
    > {
        self.pg.connect(self.connector.clone()).await.map_err(|e| {
            let host = match self.pg.get_hosts().first() {
                Some(tokio_postgres::config::Host::Tcp(h)) => h.clone(),
                Some(tokio_postgres::config::Host::Unix(p)) => p.display().to_string(),
                None => String::new(),
            };
            match self.tls.explain(&host, &e) {
                Some(message) => FleetError::Config(message),
                None => crate::error::classify(&e).0,
            }
        })
    }
}

/// Node ids are 1..=128 characters of `A-Z a-z 0-9 . _ : -`: they appear
/// in metrics labels, logs and URLs.
pub fn validate_node_id(id: &str) -> Result<(), FleetError> {
    let ok = !id.is_empty()
        && id.len() <= MAX_NODE_ID_LEN
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-'));
    if ok {
        Ok(())
    } else {
        Err(FleetError::Config(format!(
            "invalid node id {id:?}: use 1-{MAX_NODE_ID_LEN} characters from A-Z a-z 0-9 . _ : -"
        )))
    }
}

/// A node id for a node that was given none: the host name and the port,
/// stable across restarts of the same service on the same host.
pub fn default_node_id(port: u16) -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "node".to_string());
    let host: String = host
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '-'
            }
        })
        .take(MAX_NODE_ID_LEN - 6)
        .collect();
    format!("{host}-{port}")
}

/// The URL with its password replaced by `***` (for logs and errors).
pub fn redact_url(url: &str) -> String {
    // URL form: scheme://user:password@host...
    if let Some(scheme_end) = url.find("://") {
        let rest = &url[scheme_end + 3..];
        let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
        if let Some(at) = rest[..authority_end].rfind('@') {
            let userinfo = &rest[..at];
            if let Some(colon) = userinfo.find(':') {
                return format!(
                    "{}{}:***{}",
                    &url[..scheme_end + 3],
                    &userinfo[..colon],
                    &rest[at..]
                );
            }
        }
        return url.to_string();
    }
    // key=value form: hide the value of `password=`.
    url.split_whitespace()
        .map(|kv| {
            if kv.to_ascii_lowercase().starts_with("password=") {
                "password=***".to_string()
            } else {
                kv.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_never_print() {
        assert_eq!(
            redact_url("postgres://canopy:s3cret@db.example:5432/canopy"),
            "postgres://canopy:***@db.example:5432/canopy"
        );
        assert_eq!(
            redact_url("postgres://canopy@db/x"),
            "postgres://canopy@db/x"
        );
        assert_eq!(
            redact_url("host=db user=u password=p dbname=x"),
            "host=db user=u password=*** dbname=x"
        );
        let config = FleetConfig::new("postgres://u:hunter2@h/db", "n1", "http://h:1");
        assert!(!format!("{config:?}").contains("hunter2"));
    }

    #[test]
    fn configuration_is_validated() {
        let good = FleetConfig::new(
            "postgres://u@127.0.0.1:5432/db",
            "node-1",
            "http://127.0.0.1:3000",
        );
        assert!(good.validate().is_ok());
        let mut bad = good.clone();
        bad.node_id = "a b".into();
        assert!(bad.validate().is_err());
        let mut bad = good.clone();
        bad.advertise_url = "127.0.0.1:3000".into();
        assert!(bad.validate().is_err());
        let mut bad = good.clone();
        bad.url = "postgres://".into();
        assert!(bad.validate().is_err());
        let mut bad = good.clone();
        bad.timing.heartbeat = bad.timing.lease_ttl;
        assert!(bad.validate().is_err());
        assert!(Timing::scaled(Duration::from_secs(2)).validate().is_ok());
        assert!(default_node_id(3000).ends_with("-3000"));
        assert!(validate_node_id(&default_node_id(3000)).is_ok());
    }
}
