//! The global event feed: appending (registry events), fenced publishing
//! (an owner's new state and its events in one statement), cursor reads,
//! and the LISTEN/NOTIFY listener that wakes long-polls on every node.
//!
//! One sequence for the whole fleet, gap-free in commit order (see
//! [`crate::schema`]), so a follower's cursor means the same on every node
//! and moving between nodes neither skips nor repeats an event.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::watch;
use tokio_postgres::AsyncMessage;

use crate::config::Timing;
use crate::db::{Backoff, Db, with_client};
use crate::error::FleetError;
use crate::lease::Fence;
use crate::model::{EventPage, EventRow, NewEvent, RepoState};
use crate::schema::EVENTS_CHANNEL;

/// Largest page of events.
pub const MAX_PAGE: usize = 1000;

fn i64_of(v: u64) -> i64 {
    v.min(i64::MAX as u64) as i64
}

/// Appends events not tied to a lease (registry and node events).
pub(crate) async fn append(db: &Db, node_id: &str, events: &[NewEvent]) -> Result<u64, FleetError> {
    if events.is_empty() {
        return Ok(0);
    }
    let repos: Vec<Option<String>> = events.iter().map(|e| e.repo_id.clone()).collect();
    let kinds: Vec<&str> = events.iter().map(|e| e.kind.as_str()).collect();
    let data: Vec<&Value> = events.iter().map(|e| &e.data).collect();
    let seq: i64 = with_client!(db, |c| c
        .query_one(
            "SELECT fleet_append_events($1, NULL, $2, $3, $4)",
            &[&node_id, &repos, &kinds, &data],
        )
        .await?
        .try_get(0))?;
    Ok(seq.max(0) as u64)
}

/// Publishes an owner's state and events under `fence` (see
/// `fleet_publish` in [`crate::schema`]). Returns the last sequence number
/// written (0 without events).
pub(crate) async fn publish(
    db: &Db,
    fence: &Fence,
    expect_generation: u64,
    state: &RepoState,
    events: &[NewEvent],
) -> Result<u64, FleetError> {
    let kinds: Vec<&str> = events.iter().map(|e| e.kind.as_str()).collect();
    let data: Vec<&Value> = events.iter().map(|e| &e.data).collect();
    let failures = state.consecutive_failures.min(i32::MAX as u32) as i32;
    let seq: i64 = with_client!(db, |c| {
        c
        .query_one(
            "SELECT fleet_publish($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)",
            &[
                &fence.repo_id(),
                &fence.node_id(),
                &i64_of(fence.epoch()),
                &i64_of(expect_generation),
                &i64_of(state.generation),
                &state.commit_sha,
                &state.status,
                &state.dirty,
                &failures,
                &state.last_started_at,
                &state.last_indexed_at,
                &state.last_report,
                &state.last_error,
                &kinds,
                &data,
            ],
        )
        .await?
        .try_get(0)
    })?;
    Ok(seq.max(0) as u64)
}

/// The newest sequence number (0: empty feed).
pub(crate) async fn latest(db: &Db) -> Result<u64, FleetError> {
    let seq: i64 = with_client!(db, |c| c
        .query_one("SELECT last_seq FROM fleet_feed WHERE id = 1", &[])
        .await?
        .try_get(0))?;
    Ok(seq.max(0) as u64)
}

/// Events with `seq > after` (of `repo_id` only, when given), oldest first,
/// at most `limit`, and the newest sequence number, from one snapshot.
pub(crate) async fn page(
    db: &Db,
    after: u64,
    limit: usize,
    repo_id: Option<&str>,
) -> Result<EventPage, FleetError> {
    let limit = limit.clamp(1, MAX_PAGE) as i64;
    let after = i64_of(after);
    // One statement, one snapshot: the page and latest_seq agree.
    let rows = with_client!(db, |c| c
        .query(
            "SELECT f.last_seq, e.seq, e.ts_ms, e.kind, e.repo_id, e.node_id, e.epoch, e.data
             FROM fleet_feed f
             LEFT JOIN LATERAL (
                 SELECT * FROM fleet_events
                 WHERE seq > $1 AND seq <= f.last_seq AND ($2::text IS NULL OR repo_id = $2)
                 ORDER BY seq LIMIT $3
             ) e ON true
             WHERE f.id = 1",
            &[&after, &repo_id, &limit],
        )
        .await)?;
    let mut latest = 0u64;
    let mut items = Vec::new();
    for r in &rows {
        let parsed = (|| -> Result<Option<EventRow>, tokio_postgres::Error> {
            latest = r.try_get::<_, i64>(0)?.max(0) as u64;
            let Some(seq) = r.try_get::<_, Option<i64>>(1)? else {
                return Ok(None);
            };
            Ok(Some(EventRow {
                seq: seq.max(0) as u64,
                ts_ms: r.try_get(2)?,
                kind: r.try_get(3)?,
                repo_id: r.try_get(4)?,
                node_id: r.try_get(5)?,
                epoch: r.try_get::<_, Option<i64>>(6)?.map(|e| e.max(0) as u64),
                data: r.try_get(7)?,
            }))
        })()
        .map_err(|e| FleetError::Database(e.to_string()))?;
        items.extend(parsed);
    }
    Ok(EventPage {
        items,
        latest_seq: latest,
    })
}

/// Raises `latest` to `seq` if that is newer (never lowers it).
pub(crate) fn note_seq(latest: &watch::Sender<u64>, seq: u64) {
    latest.send_if_modified(|cur| {
        if seq > *cur {
            *cur = seq;
            true
        } else {
            false
        }
    });
}

/// Keeps a session that LISTENs on the events channel and raises `latest`
/// on each notification (their payload is the newest sequence number);
/// reconnects with backoff. `listening` says whether notifications can be
/// trusted right now; while it is false, long-polls poll the database.
pub(crate) async fn listen(
    pg: crate::config::Target,
    fleet_id: String,
    timing: Timing,
    latest: Arc<watch::Sender<u64>>,
    listening: Arc<AtomicBool>,
    mut stop: watch::Receiver<bool>,
) {
    let mut backoff = Backoff::new(timing.backoff_start, timing.backoff_max);
    while !*stop.borrow() {
        let session = tokio::select! {
            s = listen_once(&pg, &fleet_id, &timing, &latest, &listening) => s,
            _ = stop.changed() => break,
        };
        listening.store(false, Ordering::SeqCst);
        match session {
            Ok(()) => backoff.reset(),
            Err(e) => tracing::debug!("fleet event listener: {e}"),
        }
        let delay = backoff.next_delay();
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = stop.changed() => break,
        }
    }
    listening.store(false, Ordering::SeqCst);
}

async fn listen_once(
    pg: &crate::config::Target,
    fleet_id: &str,
    timing: &Timing,
    latest: &watch::Sender<u64>,
    listening: &AtomicBool,
) -> Result<(), FleetError> {
    let connecting = tokio::time::timeout(timing.connect_timeout, pg.connect());
    let (client, mut connection) = connecting
        .await
        .map_err(|_| FleetError::Unavailable("connecting the listener timed out".into()))??;
    // The connection must be polled for the LISTEN below to complete, and
    // afterwards for notifications: one task forwards what it yields.
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let driver = tokio::spawn(async move {
        loop {
            match std::future::poll_fn(|cx| connection.poll_message(cx)).await {
                Some(Ok(AsyncMessage::Notification(n))) => {
                    if tx.send(n.payload().to_string()).is_err() {
                        break;
                    }
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => {
                    tracing::debug!("fleet event listener connection: {e}");
                    break;
                }
                None => break,
            }
        }
    });
    if let Err(e) = crate::db::check_identity(&client, fleet_id, timing).await {
        driver.abort();
        return Err(e);
    }
    let setup = async {
        client
            .batch_execute(&format!("LISTEN {EVENTS_CHANNEL}"))
            .await?;
        client
            .query_one("SELECT last_seq FROM fleet_feed WHERE id = 1", &[])
            .await?
            .try_get::<_, i64>(0)
    };
    let seq = match tokio::time::timeout(timing.op_timeout, setup).await {
        Ok(Ok(seq)) => seq,
        Ok(Err(e)) => {
            driver.abort();
            return Err(FleetError::Unavailable(e.to_string()));
        }
        Err(_) => {
            driver.abort();
            return Err(FleetError::Unavailable("LISTEN timed out".into()));
        }
    };
    // Anything appended before LISTEN took effect is covered by this read.
    note_seq(latest, seq.max(0) as u64);
    listening.store(true, Ordering::SeqCst);
    while let Some(payload) = rx.recv().await {
        if let Ok(seq) = payload.parse::<u64>() {
            note_seq(latest, seq);
        }
    }
    drop(client);
    driver.abort();
    Err(FleetError::Unavailable(
        "the listener connection closed".into(),
    ))
}

/// How often a long-poll re-reads the feed while notifications are down.
pub const POLL_FALLBACK: Duration = Duration::from_millis(500);
