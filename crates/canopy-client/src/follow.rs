//! An agent runtime over the service's event feed: `canopy follow`.
//!
//! [`follow`] reads `GET /events` from a durable cursor, long-polling
//! rather than polling blindly, and calls back for each *relevant* event
//! (by kind, and for `files_changed` by path glob) — e.g. to re-run an
//! agent's checks when a repository's generation is bumped.
//!
//! * **Durable cursor.** The sequence number of the last event handled is
//!   kept in a file, replaced atomically (write, fsync, rename) after each
//!   event's callback returns. A follower killed and restarted resumes
//!   after the last event it finished: nothing is skipped, and nothing it
//!   finished is handled again. (An event whose callback was cut off by
//!   the kill is handled again: at-least-once for work in flight.)
//! * **Backoff.** Connection errors, `429` and `503` are retried after
//!   0.5 s, doubling to at most 30 s; other errors (unknown repository,
//!   bad token) stop the follower with the service's message.
//! * **Health** ([`FollowHealth`]), recomputed after every poll:
//!   `unhealthy` after [`UNHEALTHY_ERRORS`] failed polls in a row or a
//!   blind window over [`UNHEALTHY_BLIND`]; else `degraded` while the last
//!   poll failed; else `recovering` while events the follower has not read
//!   remain (catching up after a restart or an outage); else `healthy`.
//! * **Finite runs**: `max_cycles` polls or `duration`, or until `stop`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::api::EventRecord;
use crate::client::{ClientError, ServiceClient};

/// First retry delay after a failed poll.
pub const BACKOFF_START: Duration = Duration::from_millis(500);
/// Longest retry delay.
pub const BACKOFF_MAX: Duration = Duration::from_secs(30);
/// Failed polls in a row after which the follower is `unhealthy`.
pub const UNHEALTHY_ERRORS: u32 = 5;
/// Time without a successful poll after which the follower is `unhealthy`.
pub const UNHEALTHY_BLIND: Duration = Duration::from_secs(300);
/// Events asked for per poll.
const PAGE: usize = 100;

/// The follower's health class (see the module documentation for the rule).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FollowHealth {
    /// Caught up, last poll succeeded.
    Healthy,
    /// The last poll failed; retrying with backoff.
    Degraded,
    /// Polls succeed, unread events remain (catching up).
    Recovering,
    /// Many failed polls in a row, or blind for too long.
    Unhealthy,
}

/// What woke the follower for its latest cycle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WakeSource {
    /// The first poll.
    Start,
    /// A long-poll returned events.
    Event,
    /// A long-poll ran its full wait with no event.
    Timeout,
    /// A retry after a failed poll.
    Retry,
}

/// The follower's state, reported after each cycle and at the end.
#[derive(Clone, Debug, Serialize)]
pub struct FollowStatus {
    /// Health class.
    pub health: FollowHealth,
    /// What woke the latest cycle.
    pub wake_source: WakeSource,
    /// The cursor: sequence number of the last event handled.
    pub last_event_cursor_seen: u64,
    /// Seconds since the last successful poll (0 right after one): how
    /// long the follower could have missed changes.
    pub blind_window_seconds: f64,
    /// Events on the service not read yet (`latest_seq - cursor`; an upper
    /// bound when following one repository).
    pub backlog: u64,
    /// Polls done (successful or not).
    pub cycles: u64,
    /// Events read.
    pub events_seen: u64,
    /// Relevant events handed to the callback.
    pub events_relevant: u64,
    /// Failed polls in a row.
    pub consecutive_errors: u32,
    /// The latest poll error, until a poll succeeds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

/// Which events matter to the follower.
#[derive(Clone, Debug)]
pub struct Relevance {
    /// Event kinds (empty: `generation_bumped` and `files_changed`).
    pub kinds: Vec<String>,
    /// For `files_changed`: only events naming a path this glob matches
    /// (an event whose list was cut short always matches).
    pub glob: Option<canopy_core::discover::PathFilter>,
}

impl Relevance {
    /// Whether `event` is relevant.
    pub fn matches(&self, event: &EventRecord) -> bool {
        let kind_ok = if self.kinds.is_empty() {
            matches!(event.kind.as_str(), "generation_bumped" | "files_changed")
        } else {
            self.kinds.contains(&event.kind)
        };
        if !kind_ok {
            return false;
        }
        match (&self.glob, event.kind.as_str()) {
            (Some(glob), "files_changed") => {
                let omitted = event.data["paths_omitted"].as_u64().unwrap_or(0) > 0;
                omitted
                    || event.data["paths"].as_array().is_some_and(|paths| {
                        paths
                            .iter()
                            .filter_map(|p| p.as_str())
                            .any(|p| glob.is_match(p))
                    })
            }
            // With a glob, other kinds say nothing about paths: only
            // `files_changed` can match it.
            (Some(_), _) => false,
            (None, _) => true,
        }
    }
}

/// How [`follow`] runs.
#[derive(Clone, Debug)]
pub struct FollowOptions {
    /// Only this repository's events (id or name).
    pub repo: Option<String>,
    /// The durable cursor.
    pub cursor_file: PathBuf,
    /// Long-poll seconds per request (1–60).
    pub wait_seconds: u64,
    /// Stop after this many polls.
    pub max_cycles: Option<u64>,
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// Which events reach the callback.
    pub relevance: Relevance,
}

/// Why a follow ended, with the final status.
#[derive(Clone, Debug, Serialize)]
pub struct FollowEnd {
    /// `stopped`, `max_cycles` or `duration`.
    pub reason: &'static str,
    /// The state at the end.
    pub status: FollowStatus,
}

/// Errors that stop a follower (everything else is retried).
#[derive(Debug, thiserror::Error)]
pub enum FollowError {
    /// The cursor file cannot be read or written.
    #[error("cursor file {path}: {source}")]
    Cursor {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The service refused the request in a way retrying cannot fix.
    #[error("the service refused: {0}")]
    Refused(ClientError),
    /// The callback failed.
    #[error("{0}")]
    Callback(String),
}

/// Reads the cursor (0 when the file does not exist yet).
pub fn read_cursor(path: &Path) -> Result<u64, FollowError> {
    match std::fs::read_to_string(path) {
        Ok(text) => text.trim().parse().map_err(|e| FollowError::Cursor {
            path: path.to_path_buf(),
            source: std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("not a sequence number ({e}): {:?}", text.trim()),
            ),
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(0),
        Err(source) => Err(FollowError::Cursor {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Replaces the cursor atomically (a crash leaves the old or the new value).
pub fn write_cursor(path: &Path, seq: u64) -> Result<(), FollowError> {
    let err = |source| FollowError::Cursor {
        path: path.to_path_buf(),
        source,
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(err)?;
    }
    let tmp = path.with_extension("tmp");
    let mut file = std::fs::File::create(&tmp).map_err(err)?;
    file.write_all(format!("{seq}\n").as_bytes()).map_err(err)?;
    file.sync_all().map_err(err)?;
    std::fs::rename(&tmp, path).map_err(err)
}

/// Whether a poll error is worth retrying (the service is down, busy or
/// restarting) rather than a refusal.
fn retryable(e: &ClientError) -> bool {
    match e {
        ClientError::Io { .. } | ClientError::Connect { .. } | ClientError::InvalidResponse(_) => {
            true
        }
        ClientError::Api { status, .. } => matches!(status, 429 | 502 | 503 | 504),
        _ => false,
    }
}

/// Follows the event feed until `stop`, `max_cycles` or `duration`.
/// `on_event` gets each relevant event in order, and the cursor moves past
/// it only after it returns `Ok`; `on_cycle` gets the status after each poll.
pub fn follow(
    client: &ServiceClient,
    options: &FollowOptions,
    stop: &AtomicBool,
    mut on_event: impl FnMut(&EventRecord) -> Result<(), String>,
    mut on_cycle: impl FnMut(&FollowStatus),
) -> Result<FollowEnd, FollowError> {
    let started = Instant::now();
    let wait = options.wait_seconds.clamp(1, 60);
    // Long polls must not trip the client's own read timeout.
    let client = client.clone().with_timeout(Duration::from_secs(wait + 15));
    let mut cursor = read_cursor(&options.cursor_file)?;
    let mut status = FollowStatus {
        health: FollowHealth::Recovering,
        wake_source: WakeSource::Start,
        last_event_cursor_seen: cursor,
        blind_window_seconds: 0.0,
        backlog: 0,
        cycles: 0,
        events_seen: 0,
        events_relevant: 0,
        consecutive_errors: 0,
        last_error: None,
    };
    let mut last_success = Instant::now();
    let mut backoff = BACKOFF_START;
    let mut next_wake = WakeSource::Start;
    let end = |reason, status: &FollowStatus| {
        Ok(FollowEnd {
            reason,
            status: status.clone(),
        })
    };
    loop {
        if stop.load(Ordering::SeqCst) {
            return end("stopped", &status);
        }
        if options.max_cycles.is_some_and(|m| status.cycles >= m) {
            return end("max_cycles", &status);
        }
        let remaining = options
            .duration
            .map(|d| d.saturating_sub(started.elapsed()));
        if remaining.is_some_and(|r| r.is_zero()) {
            return end("duration", &status);
        }
        // A finite run never waits past its end.
        let poll_wait = remaining.map_or(wait, |r| wait.min(r.as_secs().max(1)));
        status.cycles += 1;
        status.wake_source = next_wake;
        let polled =
            client.events_for(cursor, Some(PAGE), Some(poll_wait), options.repo.as_deref());
        match polled {
            Ok(page) => {
                last_success = Instant::now();
                backoff = BACKOFF_START;
                status.consecutive_errors = 0;
                status.last_error = None;
                next_wake = if page.items.is_empty() {
                    WakeSource::Timeout
                } else {
                    WakeSource::Event
                };
                for event in &page.items {
                    status.events_seen += 1;
                    if options.relevance.matches(event) {
                        status.events_relevant += 1;
                        on_event(event).map_err(FollowError::Callback)?;
                    }
                    cursor = event.seq;
                    write_cursor(&options.cursor_file, cursor)?;
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                }
                // Nothing (matching) up to the service's latest: skip ahead.
                if page.next_after_seq > cursor {
                    cursor = page.next_after_seq;
                    write_cursor(&options.cursor_file, cursor)?;
                }
                status.backlog = page.latest_seq.saturating_sub(cursor);
                if page.items.is_empty() {
                    status.backlog = 0;
                }
            }
            Err(e) if retryable(&e) => {
                status.consecutive_errors += 1;
                status.last_error = Some(e.to_string());
                tracing::warn!(
                    "polling the event feed failed ({e}); retrying in {:.1} s",
                    backoff.as_secs_f64()
                );
                // Sleep in small steps so a stop or the end of the run is prompt.
                let until = Instant::now() + backoff;
                while Instant::now() < until && !stop.load(Ordering::SeqCst) {
                    if options.duration.is_some_and(|d| started.elapsed() >= d) {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
                backoff = (backoff * 2).min(BACKOFF_MAX);
                next_wake = WakeSource::Retry;
            }
            Err(e) => return Err(FollowError::Refused(e)),
        }
        status.last_event_cursor_seen = cursor;
        status.blind_window_seconds = if status.consecutive_errors == 0 {
            0.0
        } else {
            last_success.elapsed().as_secs_f64()
        };
        status.health = classify(&status, last_success.elapsed());
        on_cycle(&status);
    }
}

/// The health rule (module documentation).
fn classify(status: &FollowStatus, blind: Duration) -> FollowHealth {
    if status.consecutive_errors >= UNHEALTHY_ERRORS
        || (status.consecutive_errors > 0 && blind > UNHEALTHY_BLIND)
    {
        FollowHealth::Unhealthy
    } else if status.consecutive_errors > 0 {
        FollowHealth::Degraded
    } else if status.backlog > 0 {
        FollowHealth::Recovering
    } else {
        FollowHealth::Healthy
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn event(kind: &str, data: serde_json::Value) -> EventRecord {
        EventRecord {
            seq: 1,
            ts: String::new(),
            ts_ms: 0,
            kind: kind.into(),
            repo_id: Some("r".into()),
            data,
        }
    }

    #[test]
    fn relevance_by_kind_and_glob() {
        let default = Relevance {
            kinds: Vec::new(),
            glob: None,
        };
        assert!(default.matches(&event("generation_bumped", json!({}))));
        assert!(default.matches(&event("files_changed", json!({"paths": []}))));
        assert!(!default.matches(&event("reindex_started", json!({}))));
        let rs = Relevance {
            kinds: Vec::new(),
            glob: Some(canopy_core::discover::PathFilter::new("src/**/*.rs").unwrap()),
        };
        assert!(rs.matches(&event("files_changed", json!({"paths": ["src/a/b.rs"]}))));
        assert!(!rs.matches(&event("files_changed", json!({"paths": ["docs/x.md"]}))));
        assert!(rs.matches(&event(
            "files_changed",
            json!({"paths": ["docs/x.md"], "paths_omitted": 3})
        )));
        assert!(!rs.matches(&event("generation_bumped", json!({}))));
    }

    #[test]
    fn health_classes_follow_the_documented_rule() {
        let mut s = FollowStatus {
            health: FollowHealth::Healthy,
            wake_source: WakeSource::Start,
            last_event_cursor_seen: 0,
            blind_window_seconds: 0.0,
            backlog: 0,
            cycles: 1,
            events_seen: 0,
            events_relevant: 0,
            consecutive_errors: 0,
            last_error: None,
        };
        let short = Duration::from_secs(1);
        assert_eq!(classify(&s, short), FollowHealth::Healthy);
        s.backlog = 3;
        assert_eq!(classify(&s, short), FollowHealth::Recovering);
        s.consecutive_errors = 1;
        assert_eq!(classify(&s, short), FollowHealth::Degraded);
        assert_eq!(classify(&s, UNHEALTHY_BLIND * 2), FollowHealth::Unhealthy);
        s.consecutive_errors = UNHEALTHY_ERRORS;
        assert_eq!(classify(&s, short), FollowHealth::Unhealthy);
    }

    #[test]
    fn the_cursor_survives_rewrites_and_starts_at_zero() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state/cursor");
        assert_eq!(read_cursor(&path).unwrap(), 0);
        write_cursor(&path, 41).unwrap();
        write_cursor(&path, 42).unwrap();
        assert_eq!(read_cursor(&path).unwrap(), 42);
        std::fs::write(&path, "garbage").unwrap();
        assert!(matches!(
            read_cursor(&path),
            Err(FollowError::Cursor { .. })
        ));
    }
}
