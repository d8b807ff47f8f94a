//! Connections to the fleet database: a small pool of clients, each
//! reconnected on demand, the session settings every connection gets, a
//! client-side timeout on every round trip, and the database's health as
//! seen by this node ([`DbHealth`]), with exponential backoff between
//! reconnection attempts so an outage is not a connection storm.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde::Serialize;
use tokio_postgres::Client;

use crate::config::{Target, Timing};
use crate::error::{FleetError, Severity, classify};

/// Settings of every session: a server-side bound on statements and lock
/// waits (a stuck query never holds a lease row for long), and on open
/// transactions (a paused client cannot block a takeover by holding a
/// row lock inside a transaction).
const SESSION_SETUP: &str = "SET statement_timeout = '5s';
SET lock_timeout = '3s';
SET idle_in_transaction_session_timeout = '5s';
SET TIME ZONE 'UTC'";

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Exponential backoff with jitter: `start`, doubling up to `max`; each
/// delay is shortened by up to a quarter at random so nodes that lost the
/// database together do not come back in lockstep.
#[derive(Clone, Debug)]
pub struct Backoff {
    start: Duration,
    max: Duration,
    next: Duration,
}

impl Backoff {
    /// A backoff that starts at `start`.
    pub fn new(start: Duration, max: Duration) -> Backoff {
        Backoff {
            start,
            max: max.max(start),
            next: start,
        }
    }

    /// The delay before the next attempt; doubles the one after.
    pub fn next_delay(&mut self) -> Duration {
        let base = self.next;
        self.next = (self.next * 2).min(self.max);
        let quarter = base / 4;
        let jitter = if quarter.is_zero() {
            Duration::ZERO
        } else {
            Duration::from_nanos(random_u64() % quarter.as_nanos().max(1) as u64)
        };
        base - jitter
    }

    /// Back to the first delay (after a success).
    pub fn reset(&mut self) {
        self.next = self.start;
    }
}

/// 64 random bits from the standard library's per-process hasher keys.
pub(crate) fn random_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_usize(COUNTER.fetch_add(1, Ordering::Relaxed));
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    h.finish()
}

/// The database as this node sees it (for `/health` and `/metrics`).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct DatabaseHealth {
    /// The last round trip or connection attempt succeeded.
    pub connected: bool,
    /// Seconds in the current state (connected or not).
    pub for_seconds: f64,
    /// Failed round trips or connection attempts in a row.
    pub consecutive_failures: u32,
    /// The last failure while disconnected.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// Times the node got the database back after losing it.
    pub reconnects: u64,
    /// Failed round trips and connection attempts since start.
    pub errors_total: u64,
}

struct HealthInner {
    connected: bool,
    since: Instant,
    consecutive_failures: u32,
    last_error: Option<String>,
    reconnects: u64,
    errors_total: u64,
    /// No new connection is attempted before this (backoff).
    retry_at: Option<Instant>,
    backoff: Backoff,
}

/// Shared health state, updated by every round trip.
pub(crate) struct DbHealth {
    inner: Mutex<HealthInner>,
}

impl DbHealth {
    fn new(timing: &Timing) -> DbHealth {
        DbHealth {
            inner: Mutex::new(HealthInner {
                connected: false,
                since: Instant::now(),
                consecutive_failures: 0,
                last_error: None,
                reconnects: 0,
                errors_total: 0,
                retry_at: None,
                backoff: Backoff::new(timing.backoff_start, timing.backoff_max),
            }),
        }
    }

    pub(crate) fn ok(&self) {
        let mut h = lock(&self.inner);
        if !h.connected {
            if h.consecutive_failures > 0 {
                h.reconnects += 1;
                tracing::info!("the fleet database is reachable again");
            }
            h.connected = true;
            h.since = Instant::now();
        }
        h.consecutive_failures = 0;
        h.last_error = None;
        h.retry_at = None;
        h.backoff.reset();
    }

    pub(crate) fn failed(&self, error: &FleetError) {
        let mut h = lock(&self.inner);
        if h.connected {
            tracing::warn!("lost the fleet database: {error}");
            h.connected = false;
            h.since = Instant::now();
        }
        h.consecutive_failures = h.consecutive_failures.saturating_add(1);
        h.errors_total += 1;
        h.last_error = Some(error.to_string());
        let delay = h.backoff.next_delay();
        h.retry_at = Some(Instant::now() + delay);
    }

    /// Whether a new connection may be attempted now (not inside a backoff delay).
    fn may_connect(&self) -> Result<(), FleetError> {
        let h = lock(&self.inner);
        match h.retry_at {
            Some(at) if Instant::now() < at => Err(FleetError::Unavailable(format!(
                "reconnecting in {} ms (last error: {})",
                at.saturating_duration_since(Instant::now()).as_millis(),
                h.last_error.as_deref().unwrap_or("unknown")
            ))),
            _ => Ok(()),
        }
    }

    pub(crate) fn view(&self) -> DatabaseHealth {
        let h = lock(&self.inner);
        DatabaseHealth {
            connected: h.connected,
            for_seconds: h.since.elapsed().as_secs_f64(),
            consecutive_failures: h.consecutive_failures,
            last_error: h.last_error.clone(),
            reconnects: h.reconnects,
            errors_total: h.errors_total,
        }
    }
}

/// Opens one session with the fleet's settings and, when `fleet_id` is
/// given, checks that the database is that fleet's (else the session is
/// dropped and the attempt counts as an outage). The driver's connection
/// task runs on the current runtime and ends when the client is dropped or
/// the socket breaks (the client then reports [`Client::is_closed`]).
pub(crate) async fn connect(
    pg: &Target,
    timing: &Timing,
    fleet_id: Option<&str>,
) -> Result<Client, FleetError> {
    let (client, connection) = tokio::time::timeout(timing.connect_timeout, pg.connect())
        .await
        .map_err(|_| {
            FleetError::Unavailable(format!(
                "connecting took longer than {} ms",
                timing.connect_timeout.as_millis()
            ))
        })??;
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::debug!("fleet database connection ended: {e}");
        }
    });
    tokio::time::timeout(timing.op_timeout, client.batch_execute(SESSION_SETUP))
        .await
        .map_err(|_| FleetError::Unavailable("session setup timed out".into()))?
        .map_err(|e| classify(&e).0)?;
    if let Some(expected) = fleet_id {
        check_identity(&client, expected, timing).await?;
    }
    Ok(client)
}

/// Refuses a session whose database is not the fleet `expected`.
pub(crate) async fn check_identity(
    client: &Client,
    expected: &str,
    timing: &Timing,
) -> Result<(), FleetError> {
    let found = tokio::time::timeout(timing.op_timeout, crate::schema::fleet_id(client))
        .await
        .map_err(|_| FleetError::Unavailable("reading the fleet id timed out".into()))?;
    match found {
        Ok(id) if id == expected => Ok(()),
        Ok(id) => Err(FleetError::Unavailable(format!(
            "the fleet URL now reaches another fleet's database (fleet id {id}, expected {expected})"
        ))),
        Err(e) => Err(FleetError::Unavailable(format!(
            "the fleet URL now reaches a database without this fleet ({e})"
        ))),
    }
}

/// Runs `$body` (an expression of type `Result<T, tokio_postgres::Error>`
/// that may `.await` and uses `$c: &mut Client`) on a pooled session under
/// the operation timeout; evaluates to `Result<T, FleetError>` with the
/// error classified, the health updated and a broken session dropped.
/// `with_client!(db, keeper_conn, |c| …)` uses the heartbeat's own session.
/// (A macro rather than a closure-taking function: the body borrows the
/// session, which a plain `FnOnce(&mut Client) -> Fut` cannot express.)
macro_rules! with_client {
    ($db:expr, |$c:ident| $body:expr) => {
        $crate::db::with_client!($db, conn, |$c| $body)
    };
    ($db:expr, $pick:ident, |$c:ident| $body:expr) => {{
        let db: &$crate::db::Db = $db;
        match db.$pick().await {
            Err(e) => Err(e),
            Ok(mut conn) => match conn.client_mut() {
                None => Err($crate::error::FleetError::Unavailable("no session".into())),
                Some($c) => {
                    let outcome =
                        tokio::time::timeout(db.timing().op_timeout, async { $body }).await;
                    conn.finish(outcome)
                }
            },
        }
    }};
}
pub(crate) use with_client;

/// A pool of sessions for requests (each used by one caller at a time, so
/// transactions are possible), one more reserved for the heartbeat (so a
/// burst of slow requests never delays a lease renewal), and the shared
/// health.
pub(crate) struct Db {
    pg: Target,
    fleet_id: String,
    timing: Timing,
    slots: Vec<tokio::sync::Mutex<Option<Client>>>,
    next: AtomicUsize,
    pub(crate) health: DbHealth,
}

/// One pooled session, held until dropped.
pub(crate) struct Conn<'a> {
    slot: tokio::sync::MutexGuard<'a, Option<Client>>,
    db: &'a Db,
}

impl Db {
    pub(crate) fn new(pg: Target, fleet_id: String, timing: Timing, size: usize) -> Db {
        Db {
            health: DbHealth::new(&timing),
            pg,
            fleet_id,
            timing,
            slots: (0..size.max(1) + 1)
                .map(|_| tokio::sync::Mutex::new(None))
                .collect(),
            next: AtomicUsize::new(0),
        }
    }

    pub(crate) fn fleet_id(&self) -> &str {
        &self.fleet_id
    }

    pub(crate) fn timing(&self) -> &Timing {
        &self.timing
    }

    /// A request session: a free one if any, else waits for the next in
    /// turn; (re)connects when its client is gone. Fails at once with
    /// [`FleetError::Unavailable`] during a backoff delay.
    pub(crate) async fn conn(&self) -> Result<Conn<'_>, FleetError> {
        let n = self.slots.len() - 1;
        let first = self.next.fetch_add(1, Ordering::Relaxed) % n;
        let mut guard = None;
        for i in 0..n {
            if let Ok(g) = self.slots[1 + (first + i) % n].try_lock() {
                guard = Some(g);
                break;
            }
        }
        let slot = match guard {
            Some(g) => g,
            None => self.slots[1 + first].lock().await,
        };
        self.ready(slot).await
    }

    /// The heartbeat's own session.
    pub(crate) async fn keeper_conn(&self) -> Result<Conn<'_>, FleetError> {
        let slot = self.slots[0].lock().await;
        self.ready(slot).await
    }

    async fn ready<'a>(
        &'a self,
        mut slot: tokio::sync::MutexGuard<'a, Option<Client>>,
    ) -> Result<Conn<'a>, FleetError> {
        if slot.as_ref().is_none_or(Client::is_closed) {
            *slot = None;
            self.health.may_connect()?;
            match connect(&self.pg, &self.timing, Some(&self.fleet_id)).await {
                Ok(client) => {
                    self.health.ok();
                    *slot = Some(client);
                }
                Err(e) => {
                    self.health.failed(&e);
                    return Err(e);
                }
            }
        }
        Ok(Conn { slot, db: self })
    }
}

impl Conn<'_> {
    /// The session's client (present: [`Db::conn`] connected it).
    pub(crate) fn client_mut(&mut self) -> Option<&mut Client> {
        self.slot.as_mut()
    }

    /// Classifies the outcome of a round trip on this session; drops the
    /// session when it is broken or timed out (its state is unknown).
    pub(crate) fn finish<T>(
        &mut self,
        outcome: Result<Result<T, tokio_postgres::Error>, tokio::time::error::Elapsed>,
    ) -> Result<T, FleetError> {
        match outcome {
            Ok(Ok(value)) => {
                self.db.health.ok();
                Ok(value)
            }
            Ok(Err(e)) => {
                let (err, severity) = classify(&e);
                match severity {
                    Severity::Broken => {
                        *self.slot = None;
                        self.db.health.failed(&err);
                    }
                    // The server answered — a refusal, or busy (a lock or
                    // statement timeout): it is reachable and the session
                    // usable, so no outage and no backoff for other callers.
                    Severity::Answered => self.db.health.ok(),
                }
                Err(err)
            }
            Err(_) => {
                *self.slot = None;
                let err = FleetError::Unavailable(format!(
                    "no answer within {} ms",
                    self.db.timing.op_timeout.as_millis()
                ));
                self.db.health.failed(&err);
                Err(err)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_its_cap_with_bounded_jitter() {
        let mut b = Backoff::new(Duration::from_millis(100), Duration::from_secs(1));
        let delays: Vec<Duration> = (0..6).map(|_| b.next_delay()).collect();
        let bases = [100u64, 200, 400, 800, 1000, 1000];
        for (d, base) in delays.iter().zip(bases) {
            let base = Duration::from_millis(base);
            assert!(*d <= base && *d >= base - base / 4, "{d:?} vs {base:?}");
        }
        b.reset();
        assert!(b.next_delay() <= Duration::from_millis(100));
    }

    #[test]
    fn health_tracks_outages_and_backs_off() {
        let timing = Timing::default();
        let h = DbHealth::new(&timing);
        assert!(!h.view().connected);
        h.ok();
        assert!(h.view().connected);
        assert_eq!(h.view().reconnects, 0);
        h.failed(&FleetError::Unavailable("down".into()));
        let v = h.view();
        assert!(!v.connected);
        assert_eq!(v.consecutive_failures, 1);
        assert_eq!(
            v.last_error.as_deref(),
            Some("the fleet database is unavailable: down")
        );
        // Inside the backoff delay, no new connection is attempted.
        assert!(h.may_connect().is_err());
        h.ok();
        assert_eq!(h.view().reconnects, 1);
        assert!(h.may_connect().is_ok());
    }
}
