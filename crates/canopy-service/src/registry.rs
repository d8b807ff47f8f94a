//! The service's own small SQLite database (`<data-dir>/registry.db`): the
//! registered repositories with their durable state (name, root, generation,
//! commit, last index result) and the event feed.
//!
//! Repository state and the events describing a change to it are written in
//! one transaction ([`Registry::commit`]), so after a crash the feed never
//! claims a generation the repository table does not have, or vice versa.
//! Event sequence numbers come from an `AUTOINCREMENT` key: they only grow,
//! even after old events are pruned, so client cursors stay valid across
//! restarts.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use canopy_client::api::{EventRecord, RunError};
use canopy_core::model::IndexReport;
use rusqlite::{Connection, OptionalExtension, params};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Schema version of the registry (`PRAGMA user_version`).
pub const REGISTRY_VERSION: u32 = 3;

/// Most events kept; older ones are pruned.
pub const MAX_EVENTS: i64 = 100_000;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS repos(
    repo_id TEXT PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    root TEXT NOT NULL UNIQUE,
    added_at INTEGER NOT NULL,
    generation INTEGER NOT NULL DEFAULT 0,
    commit_sha TEXT,
    status TEXT NOT NULL,
    dirty INTEGER NOT NULL DEFAULT 0,
    consecutive_failures INTEGER NOT NULL DEFAULT 0,
    last_started_at INTEGER,
    last_indexed_at INTEGER,
    last_report TEXT,
    last_error TEXT,
    watch INTEGER NOT NULL DEFAULT 0,
    named_up_to INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS events(
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    ts_ms INTEGER NOT NULL,
    kind TEXT NOT NULL,
    repo_id TEXT,
    data TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS events_by_repo ON events(repo_id, seq);
";

/// Lifecycle state of a repository's indexing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RepoStatus {
    /// Registered; no run has completed yet.
    NotIndexed,
    /// A run is in progress (queries see its committed batches, each state under a generation of its own).
    Indexing,
    /// The last run completed.
    Ready,
    /// The last run failed (the last complete generation, if any, is still served).
    Failed,
}

impl RepoStatus {
    /// The stored (and wire) spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            RepoStatus::NotIndexed => "not_indexed",
            RepoStatus::Indexing => "indexing",
            RepoStatus::Ready => "ready",
            RepoStatus::Failed => "failed",
        }
    }

    fn parse(s: &str) -> RepoStatus {
        match s {
            "indexing" => RepoStatus::Indexing,
            "ready" => RepoStatus::Ready,
            "failed" => RepoStatus::Failed,
            _ => RepoStatus::NotIndexed,
        }
    }
}

/// One registered repository, as stored.
#[derive(Clone, Debug, PartialEq)]
pub struct RepoRecord {
    /// Opaque id (UUID format).
    pub repo_id: String,
    /// Unique human name.
    pub name: String,
    /// Canonical absolute root (contains `.git`).
    pub root: PathBuf,
    /// Registration time (unix seconds).
    pub added_at: i64,
    /// Last complete generation (0: none yet).
    pub generation: u64,
    /// `HEAD` when the serving generation's run started.
    pub commit_sha: Option<String>,
    /// Lifecycle state.
    pub status: RepoStatus,
    /// A run started and has not completed successfully since: the index may
    /// hold changes no generation accounts for, so the next complete run bumps.
    pub dirty: bool,
    /// Failed runs since the last success.
    pub consecutive_failures: u32,
    /// When the last run started (unix seconds).
    pub last_started_at: Option<i64>,
    /// When the last successful run finished (unix seconds).
    pub last_indexed_at: Option<i64>,
    /// The last successful run's report.
    pub last_report: Option<IndexReport>,
    /// The last failure (cleared on success).
    pub last_error: Option<RunError>,
    /// Whether the service re-indexes this repository on file-system
    /// events (`POST /repos/add` with `watch: true`).
    pub watch: bool,
    /// The highest generation given to an index state read during a run
    /// (0: none). Saved before the answer carrying it leaves, so a service
    /// restarted in the middle of a run never gives a number twice: its
    /// next names and its next complete generation go above it.
    pub named_up_to: u64,
}

impl RepoRecord {
    /// A repository just registered: never indexed, not watched.
    pub fn registered(repo_id: String, name: String, root: PathBuf, added_at: i64) -> RepoRecord {
        RepoRecord {
            repo_id,
            name,
            root,
            added_at,
            generation: 0,
            commit_sha: None,
            status: RepoStatus::NotIndexed,
            dirty: false,
            consecutive_failures: 0,
            last_started_at: None,
            last_indexed_at: None,
            last_report: None,
            named_up_to: 0,
            last_error: None,
            watch: false,
        }
    }
}

/// A new event to append.
#[derive(Clone, Debug)]
pub struct NewEvent {
    /// Event kind.
    pub kind: &'static str,
    /// Repository concerned.
    pub repo_id: Option<String>,
    /// Details.
    pub data: Value,
}

/// The registry database.
pub struct Registry {
    conn: Mutex<Connection>,
    path: PathBuf,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Current unix time in milliseconds.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

fn path_text(path: &Path) -> rusqlite::Result<String> {
    path.to_str()
        .map(str::to_string)
        .ok_or_else(|| rusqlite::Error::InvalidPath(path.to_path_buf()))
}

impl Registry {
    /// Opens (creating) `<dir>/registry.db`. Fails on a registry written by a newer Canopy.
    pub fn open(dir: &Path) -> anyhow::Result<Registry> {
        let path = dir.join("registry.db");
        let conn = Connection::open(&path)?;
        conn.busy_timeout(Duration::from_secs(10))?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        let version: u32 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
        if version > REGISTRY_VERSION {
            anyhow::bail!(
                "the registry {} was written by a newer canopy (schema {version}, this build knows {REGISTRY_VERSION}); use another --data-dir or a newer canopy",
                path.display()
            );
        }
        conn.execute_batch(SCHEMA)?;
        if version == 1 {
            // Version 2 added the per-repository watch flag (off).
            conn.execute_batch("ALTER TABLE repos ADD COLUMN watch INTEGER NOT NULL DEFAULT 0")?;
        }
        if (1..3).contains(&version) {
            // Version 3 keeps the highest generation given to a state read
            // during a run (none before it was kept).
            conn.execute_batch(
                "ALTER TABLE repos ADD COLUMN named_up_to INTEGER NOT NULL DEFAULT 0",
            )?;
        }
        conn.pragma_update(None, "user_version", REGISTRY_VERSION)?;
        Ok(Registry {
            conn: Mutex::new(conn),
            path,
        })
    }

    /// Path of the database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Every registered repository, in registration order.
    pub fn repos(&self) -> rusqlite::Result<Vec<RepoRecord>> {
        let conn = lock(&self.conn);
        let mut stmt = conn.prepare(
            "SELECT repo_id, name, root, added_at, generation, commit_sha, status, dirty,
                    consecutive_failures, last_started_at, last_indexed_at, last_report, last_error,
                    watch, named_up_to
             FROM repos ORDER BY added_at, rowid",
        )?;
        let rows = stmt.query_map([], |r| {
            let report: Option<String> = r.get(11)?;
            let error: Option<String> = r.get(12)?;
            Ok(RepoRecord {
                repo_id: r.get(0)?,
                name: r.get(1)?,
                root: PathBuf::from(r.get::<_, String>(2)?),
                added_at: r.get(3)?,
                generation: r.get::<_, i64>(4)?.max(0) as u64,
                commit_sha: r.get(5)?,
                status: RepoStatus::parse(&r.get::<_, String>(6)?),
                dirty: r.get::<_, i64>(7)? != 0,
                consecutive_failures: r.get::<_, i64>(8)?.clamp(0, u32::MAX as i64) as u32,
                last_started_at: r.get(9)?,
                last_indexed_at: r.get(10)?,
                last_report: report.and_then(|s| serde_json::from_str(&s).ok()),
                last_error: error.and_then(|s| serde_json::from_str(&s).ok()),
                watch: r.get::<_, i64>(13)? != 0,
                named_up_to: r.get::<_, i64>(14)?.max(0) as u64,
            })
        })?;
        rows.collect()
    }

    /// Saves that `generation` was given to a state of `repo_id`'s index
    /// read during a run (it only ever rises).
    pub fn note_named(&self, repo_id: &str, generation: u64) -> rusqlite::Result<()> {
        lock(&self.conn).execute(
            "UPDATE repos SET named_up_to = max(named_up_to, ?2) WHERE repo_id = ?1",
            params![repo_id, generation as i64],
        )?;
        Ok(())
    }

    /// Writes `repo` (insert or full update) and appends `events`, in one
    /// transaction. Returns the highest sequence number written (0 if none).
    pub fn commit(&self, repo: Option<&RepoRecord>, events: &[NewEvent]) -> rusqlite::Result<u64> {
        let mut conn = lock(&self.conn);
        let tx = conn.transaction()?;
        if let Some(r) = repo {
            tx.execute(
                "INSERT INTO repos(repo_id, name, root, added_at, generation, commit_sha, status, dirty,
                                   consecutive_failures, last_started_at, last_indexed_at, last_report, last_error,
                                   watch, named_up_to)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)
                 ON CONFLICT(repo_id) DO UPDATE SET
                    name = excluded.name, root = excluded.root, generation = excluded.generation,
                    commit_sha = excluded.commit_sha, status = excluded.status, dirty = excluded.dirty,
                    consecutive_failures = excluded.consecutive_failures,
                    last_started_at = excluded.last_started_at, last_indexed_at = excluded.last_indexed_at,
                    last_report = excluded.last_report, last_error = excluded.last_error,
                    watch = excluded.watch,
                    named_up_to = max(repos.named_up_to, excluded.named_up_to)",
                params![
                    r.repo_id,
                    r.name,
                    path_text(&r.root)?,
                    r.added_at,
                    r.generation as i64,
                    r.commit_sha,
                    r.status.as_str(),
                    r.dirty as i64,
                    r.consecutive_failures as i64,
                    r.last_started_at,
                    r.last_indexed_at,
                    r.last_report
                        .as_ref()
                        .and_then(|x| serde_json::to_string(x).ok()),
                    r.last_error
                        .as_ref()
                        .and_then(|x| serde_json::to_string(x).ok()),
                    r.watch as i64,
                    r.named_up_to as i64,
                ],
            )?;
        }
        let mut last = 0u64;
        for e in events {
            tx.execute(
                "INSERT INTO events(ts_ms, kind, repo_id, data) VALUES (?1, ?2, ?3, ?4)",
                params![now_ms(), e.kind, e.repo_id, e.data.to_string()],
            )?;
            last = tx.last_insert_rowid().max(0) as u64;
        }
        if last > 0 && last.is_multiple_of(1000) {
            tx.execute(
                "DELETE FROM events WHERE seq <= ?1",
                params![last as i64 - MAX_EVENTS],
            )?;
        }
        tx.commit()?;
        Ok(last)
    }

    /// Highest sequence number ever written (0 when the feed is empty).
    pub fn latest_seq(&self) -> rusqlite::Result<u64> {
        let conn = lock(&self.conn);
        // sqlite_sequence remembers the highest AUTOINCREMENT value even after pruning.
        let seq: Option<i64> = conn
            .query_row(
                "SELECT seq FROM sqlite_sequence WHERE name = 'events'",
                [],
                |r| r.get(0),
            )
            .optional()?;
        Ok(seq.unwrap_or(0).max(0) as u64)
    }

    /// Events with `seq > after` (only those of `repo` when given), oldest
    /// first, at most `limit`; also returns the latest sequence number.
    pub fn events_after(
        &self,
        after: u64,
        limit: usize,
        repo: Option<&str>,
    ) -> rusqlite::Result<(Vec<EventRecord>, u64)> {
        let latest = self.latest_seq()?;
        let conn = lock(&self.conn);
        let mut stmt = conn.prepare_cached(
            "SELECT seq, ts_ms, kind, repo_id, data FROM events
             WHERE seq > ?1 AND seq <= ?2 AND (?3 IS NULL OR repo_id = ?3)
             ORDER BY seq LIMIT ?4",
        )?;
        let rows = stmt.query_map(
            params![
                after.min(i64::MAX as u64) as i64,
                latest as i64,
                repo,
                limit as i64
            ],
            |r| {
                let ts_ms: i64 = r.get(1)?;
                let data: String = r.get(4)?;
                Ok(EventRecord {
                    seq: r.get::<_, i64>(0)?.max(0) as u64,
                    ts: canopy_core::engine::rfc3339_utc(ts_ms.div_euclid(1000)),
                    ts_ms,
                    kind: r.get(2)?,
                    repo_id: r.get(3)?,
                    data: serde_json::from_str(&data).unwrap_or(Value::Null),
                })
            },
        )?;
        let items = rows.collect::<rusqlite::Result<Vec<_>>>()?;
        Ok((items, latest))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: &str) -> RepoRecord {
        RepoRecord::registered(
            id.into(),
            format!("name-{id}"),
            PathBuf::from(format!("/tmp/{id}")),
            1,
        )
    }

    #[test]
    fn repos_and_events_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let reg = Registry::open(dir.path()).unwrap();
        let mut r = record("a");
        let ev = NewEvent {
            kind: "repo_added",
            repo_id: Some("a".into()),
            data: serde_json::json!({"name": "x"}),
        };
        assert_eq!(reg.commit(Some(&r), std::slice::from_ref(&ev)).unwrap(), 1);
        r.generation = 3;
        r.status = RepoStatus::Ready;
        r.last_report = Some(IndexReport::default());
        reg.commit(Some(&r), &[ev.clone(), ev]).unwrap();
        drop(reg);
        let reg = Registry::open(dir.path()).unwrap();
        assert_eq!(reg.repos().unwrap(), vec![r]);
        let (items, latest) = reg.events_after(1, 10, None).unwrap();
        assert_eq!(latest, 3);
        assert_eq!(items.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![2, 3]);
        let (items, _) = reg.events_after(0, 10, Some("other")).unwrap();
        assert!(items.is_empty());
    }

    #[test]
    fn a_generation_saved_as_given_only_rises_and_survives_an_upgrade() {
        let dir = tempfile::tempdir().unwrap();
        // A version-2 registry (before `named_up_to`), as an older canopy left it.
        {
            let conn = Connection::open(dir.path().join("registry.db")).unwrap();
            conn.execute_batch(
                &SCHEMA.replace(",\n    named_up_to INTEGER NOT NULL DEFAULT 0", ""),
            )
            .unwrap();
            conn.pragma_update(None, "user_version", 2).unwrap();
        }
        let reg = Registry::open(dir.path()).unwrap();
        let mut r = record("a");
        r.generation = 2;
        reg.commit(Some(&r), &[]).unwrap();
        assert_eq!(reg.repos().unwrap()[0].named_up_to, 0);
        reg.note_named("a", 7).unwrap();
        reg.note_named("a", 5).unwrap();
        assert_eq!(reg.repos().unwrap()[0].named_up_to, 7);
        // A record written from memory never lowers it.
        reg.commit(Some(&r), &[]).unwrap();
        drop(reg);
        let reg = Registry::open(dir.path()).unwrap();
        assert_eq!(reg.repos().unwrap()[0].named_up_to, 7);
    }
}
