//! Rebuilding an index beside the live one and swapping it in atomically.
//!
//! A rebuild (asked for, after damage, or for a new schema version) never
//! empties the live index: readers in every process would answer from a
//! half-built one (issue N2: empty answers for 0.7 s, then 10 s of partial
//! ones, all under the old generation). Instead [`SideIndex`] builds a
//! complete new index in a side file (`index.db.rebuild`) and
//! [`SideIndex::swap_into_live`] copies it into the live database with
//! SQLite's online backup in **one write transaction**.
//!
//! Why a copy and not a rename: the live file is in WAL mode. Renaming a new
//! file over it leaves its `-wal` and `-shm` beside the new one (SQLite
//! would replay the old log onto the new file), and every connection that
//! has the old file open keeps reading the deleted inode for as long as it
//! lives (issue N9). A pointer file (`CURRENT` naming `index-<n>.db`, or a
//! symlink) avoids the log hazard but makes every process resolve the
//! pointer before each read and clean up files that others may still hold.
//! The backup needs neither: the live file keeps its inode, path and
//! connections; WAL readers see the old pages until the copy commits, then
//! the new ones (their `PRAGMA data_version` moves and the schema cookie
//! changes, so caches and prepared statements follow). The cost is writing
//! the index twice (side file, then the live log) and the disk for both.
//!
//! Invariant: **a reader sees the old complete index or the new complete
//! one, never a mix, and the new one has a generation no earlier state of
//! the live file had**: the copy takes the live write lock first, reads the
//! live generation while no one else can commit, and gives the new index
//! that generation plus one.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::backup::{Backup, StepResult};
use rusqlite::{Connection, OpenFlags, OptionalExtension};

use super::{Store, configure, meta_keys};
use crate::error::{CanopyError, Result};

/// How often a copy step that found the live file locked is retried (after
/// SQLite's own busy timeout of 30 s each time) before the rebuild fails.
const LOCKED_RETRIES: u32 = 3;

/// `<index.db><suffix>`: the side file and its lock live beside the index.
fn beside(db_path: &Path, suffix: &str) -> PathBuf {
    let mut p = db_path.as_os_str().to_owned();
    p.push(suffix);
    PathBuf::from(p)
}

/// Removes a database file and its `-wal` and `-shm`, if they exist.
fn remove_database(path: &Path) -> Result<()> {
    for suffix in ["", "-wal", "-shm"] {
        let p = beside(path, suffix);
        match std::fs::remove_file(&p) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(CanopyError::io(p, e)),
        }
    }
    Ok(())
}

/// A new index being built beside the live one. Holds an exclusive lock
/// (`index.db.rebuild.lock`), so one process at a time rebuilds a given
/// index; dropped without a swap, it removes its files.
pub struct SideIndex {
    store: Option<Store>,
    path: PathBuf,
    live: PathBuf,
    /// Held for the side file's whole life; released when dropped.
    _lock: File,
}

impl SideIndex {
    /// Takes the rebuild lock of the index at `live` (waiting for another
    /// process's rebuild to finish) and starts an empty side index (a
    /// leftover of a killed rebuild is removed first).
    ///
    /// The caller should check again, once this returns, whether a rebuild
    /// is still needed: the process it waited for may have done it.
    pub fn create(live: &Path) -> Result<SideIndex> {
        let lock_path = beside(live, ".rebuild.lock");
        let lock = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|e| CanopyError::io(&lock_path, e))?;
        lock.lock().map_err(|e| CanopyError::io(&lock_path, e))?;
        let path = beside(live, ".rebuild");
        remove_database(&path)?;
        let store = Store::try_open(&path)?.ok_or_else(|| {
            CanopyError::Internal("a new side index reports another schema version".into())
        })?;
        Ok(SideIndex {
            store: Some(store),
            path,
            live: live.to_path_buf(),
            _lock: lock,
        })
    }

    /// The side index, to build into.
    pub fn store_mut(&mut self) -> Result<&mut Store> {
        self.store
            .as_mut()
            .ok_or_else(|| CanopyError::Internal("the side index was already swapped".into()))
    }

    /// Copies the finished side index into the live one in one write
    /// transaction (see the module docs) and removes the side file. Returns
    /// the generation the live index now has.
    pub fn swap_into_live(mut self) -> Result<u64> {
        let side = self
            .store
            .take()
            .ok_or_else(|| CanopyError::Internal("the side index was already swapped".into()))?;
        // Folded into the side file: the copy then reads pages from one place.
        side.checkpoint()?;
        let generation = match copy_into_live(&side.conn, &self.live) {
            Err(CanopyError::Database(e)) if super::is_damaged(&e) => {
                // A live file that is not a database at all (its header is
                // garbage) cannot take part in a transaction. Nobody can
                // read it either: empty it in place (same inode, so open
                // connections follow) and copy into that.
                tracing::warn!(
                    "the index at {} is not a database ({e}); replacing its content",
                    self.live.display()
                );
                empty_in_place(&self.live)?;
                copy_into_live(&side.conn, &self.live)?
            }
            other => other?,
        };
        drop(side);
        remove_database(&self.path)?;
        Ok(generation)
    }
}

impl Drop for SideIndex {
    fn drop(&mut self) {
        if let Some(store) = self.store.take() {
            // Not swapped (the build failed or was cancelled): nothing of
            // it is kept.
            drop(store);
            if let Err(e) = remove_database(&self.path) {
                tracing::warn!("cannot remove the unfinished rebuild: {e}");
            }
        }
    }
}

/// Truncates a file that is not a database to an empty one and removes its
/// log and shared-memory files (no valid log can belong to a file whose
/// header is garbage).
fn empty_in_place(live: &Path) -> Result<()> {
    let file = File::options()
        .write(true)
        .open(live)
        .map_err(|e| CanopyError::io(live, e))?;
    file.set_len(0).map_err(|e| CanopyError::io(live, e))?;
    for suffix in ["-wal", "-shm"] {
        let p = beside(live, suffix);
        match std::fs::remove_file(&p) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(CanopyError::io(p, e)),
        }
    }
    Ok(())
}

/// The copy itself: one write transaction on the live file.
fn copy_into_live(side: &Connection, live_path: &Path) -> Result<u64> {
    let mut live = Connection::open_with_flags(
        live_path,
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    // WAL (an empty or emptied file is switched to it here), so readers
    // keep their snapshot while the copy writes.
    configure(&live)?;
    let backup = Backup::new(side, &mut live)?;
    // Step 0 copies nothing but takes the live write lock and keeps it
    // until the copy commits: from here on no other connection can commit.
    step(&backup, 0)?;
    // Read while no one can commit, so no state of the live file that
    // anyone saw can have the generation given below.
    let live_generation = generation_of(live_path);
    let side_generation = generation_in(side)?;
    let generation = side_generation.max(live_generation + 1);
    // Written through the source connection of the backup: SQLite keeps
    // the copy in step with it.
    side.execute(
        "INSERT INTO meta(key, value) VALUES (?1, ?2)
         ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        rusqlite::params![meta_keys::GENERATION, generation.to_string()],
    )?;
    while step(&backup, -1)? != StepResult::Done {}
    drop(backup);
    // The live log now holds the whole index: fold back what no reader
    // still needs, without waiting for readers on the old pages (the next
    // large run, or the next writer once they are gone, does the rest).
    live.busy_timeout(Duration::ZERO)?;
    if let Err(e) = live.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(())) {
        tracing::debug!("checkpoint after the swap left work for later: {e}");
    }
    Ok(generation)
}

/// One backup step, retried while the live file is locked.
fn step(backup: &Backup<'_, '_>, pages: i32) -> Result<StepResult> {
    for _ in 0..LOCKED_RETRIES {
        match backup.step(pages)? {
            StepResult::Busy | StepResult::Locked => {
                std::thread::sleep(Duration::from_millis(50));
            }
            done => return Ok(done),
        }
    }
    Err(CanopyError::Database(rusqlite::Error::SqliteFailure(
        rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_BUSY),
        Some("the live index stayed locked by another writer".into()),
    )))
}

/// The generation stored in a connection's index (0 without one).
fn generation_in(conn: &Connection) -> Result<u64> {
    let value: Option<String> = conn
        .query_row(
            "SELECT value FROM meta WHERE key = ?1",
            [meta_keys::GENERATION],
            |r| r.get(0),
        )
        .optional()?;
    Ok(value.and_then(|v| v.parse().ok()).unwrap_or(0))
}

/// The live index's generation, read on a connection of its own; 0 when it
/// has none or cannot be read (another schema, a file being emptied).
pub(super) fn generation_of(live_path: &Path) -> u64 {
    let conn = match Connection::open_with_flags(
        live_path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    ) {
        Ok(conn) => conn,
        Err(_) => return 0,
    };
    generation_in(&conn).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_first_step_of_nothing_holds_the_live_write_lock_until_the_copy_ends() {
        // What the generation read in `copy_into_live` relies on: after
        // step 0 no other connection can commit to the live file.
        let dir = tempfile::tempdir().unwrap();
        let (live_path, side_path) = (dir.path().join("live.db"), dir.path().join("side.db"));
        let side = Connection::open(&side_path).unwrap();
        side.execute_batch("CREATE TABLE t(x); INSERT INTO t VALUES (1);")
            .unwrap();
        let mut live = Connection::open(&live_path).unwrap();
        live.execute_batch("PRAGMA journal_mode = WAL; CREATE TABLE t(x);")
            .unwrap();
        let other = Connection::open(&live_path).unwrap();
        other.busy_timeout(Duration::ZERO).unwrap();
        {
            let backup = Backup::new(&side, &mut live).unwrap();
            assert_eq!(step(&backup, 0).unwrap(), StepResult::More);
            let write = other.execute("INSERT INTO t VALUES (2)", []);
            assert_eq!(
                write.unwrap_err().sqlite_error_code(),
                Some(rusqlite::ErrorCode::DatabaseBusy)
            );
            // Readers are not held up.
            let n: i64 = other
                .query_row("SELECT COUNT(*) FROM t", [], |r| r.get(0))
                .unwrap();
            assert_eq!(n, 0);
            assert_eq!(step(&backup, -1).unwrap(), StepResult::Done);
        }
        let n: i64 = other
            .query_row("SELECT COUNT(*) FROM t", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 1);
        other.execute("INSERT INTO t VALUES (2)", []).unwrap();
    }
}
