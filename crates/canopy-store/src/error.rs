//! The one error type of the core library.
//!
//! Every variant carries what a user needs to recover; front ends map the
//! variants onto their own surfaces (CLI exit codes, MCP `isError` results,
//! HTTP status codes) through [`CanopyError::code`] and [`CanopyError::hint`].

use std::path::PathBuf;

/// Result alias used throughout `canopy-core`.
pub type Result<T, E = CanopyError> = std::result::Result<T, E>;

/// Everything that can go wrong in the core.
#[derive(Debug, thiserror::Error)]
pub enum CanopyError {
    /// A handle id that is not (or no longer) in the index.
    #[error("handle not found: {id}")]
    HandleNotFound {
        /// The id that was asked for.
        id: String,
    },
    /// A handle id that is not shaped as one (`h` and 24 hex digits): a
    /// typo or a truncated copy, not a unit that went away.
    #[error("malformed handle id {id:?}: a handle id is `h` followed by 24 hex digits")]
    MalformedHandle {
        /// The text that was given as an id.
        id: String,
    },
    /// A result set id that expired or never existed.
    #[error("result set not found (expired or unknown): {id}")]
    ResultSetNotFound {
        /// The id that was asked for.
        id: String,
    },
    /// The file behind a handle changed (or is gone) since it was indexed.
    #[error("stale index: {path} {} since it was indexed", if *deleted { "was deleted" } else { "changed" })]
    StaleIndex {
        /// Repo-relative path of the changed (or deleted) file.
        path: String,
        /// The file no longer exists (rather than having other content).
        deleted: bool,
    },
    /// The S-expression DSL (or another structured query) did not parse.
    #[error("query parse error at byte {position}: {message}")]
    QueryParse {
        /// Byte offset in the query text where parsing failed.
        position: usize,
        /// What was expected there.
        message: String,
    },
    /// An invalid glob pattern.
    #[error("invalid glob pattern {pattern:?}: {message}")]
    GlobPattern {
        /// The glob as given.
        pattern: String,
        /// Why it is invalid.
        message: String,
    },
    /// Parameters that are individually well formed but do not make a valid request.
    #[error("invalid request: {0}")]
    Validation(String),
    /// A path that would leave the repository (`..`, absolute, or a symlink out).
    #[error("path outside the repository: {0}")]
    PathOutsideRepo(String),
    /// The repository root does not exist or is not a directory.
    #[error("not a directory: {}", .0.display())]
    NotADirectory(PathBuf),
    /// A directory that arrived implicitly (working directory, an agent's
    /// path) is neither inside a git repository nor already indexed.
    #[error("{} is not inside a git repository and has no Canopy index{}", path.display(), index_above.as_ref().map(|p| format!(" (an index exists above it, at {})", p.display())).unwrap_or_default())]
    NotARepository {
        /// The directory.
        path: PathBuf,
        /// The nearest parent folder holding an index, which is not
        /// inherited outside git.
        index_above: Option<PathBuf>,
    },
    /// A root Canopy never indexes: the filesystem root, the home folder or
    /// a folder above it.
    #[error("refusing to index {}: it is {reason}", path.display())]
    UnsafeRoot {
        /// The directory.
        path: PathBuf,
        /// What it is.
        reason: String,
    },
    /// The index file is damaged. It has been marked, and the next index run
    /// (`canopy index`, `canopy_index`, `POST /reindex`) rebuilds it.
    #[error("the index is damaged ({detail}); it will be rebuilt by the next index run")]
    IndexDamaged {
        /// What the integrity check found.
        detail: String,
    },
    /// SQLite failed.
    #[error("index database error: {0}")]
    Database(#[source] rusqlite::Error),
    /// The disk (or the quota) is full: nothing was lost (the write was
    /// rolled back), and nothing but free space helps, a rebuild least of
    /// all (it needs room for a second copy of the index).
    #[error("no space left to write the index: {detail}")]
    StorageFull {
        /// What was being written when the space ran out.
        detail: String,
    },
    /// A file system operation failed.
    #[error("I/O error on {}: {source}", path.display())]
    Io {
        /// The path involved.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// `git` could not be run or failed.
    #[error("git failed: {0}")]
    Git(String),
    /// A request ran past its time budget and was stopped.
    #[error("the request ran past its time budget of {millis} ms and was stopped")]
    TimeBudget {
        /// The budget, in milliseconds.
        millis: u64,
    },
    /// The caller cancelled the request (see [`crate::cancel`]); the work
    /// stopped and nothing half-done was kept.
    #[error("the request was cancelled")]
    Cancelled,
    /// A bug or an invariant violation; reported, never panicked on.
    #[error("internal error: {0}")]
    Internal(String),
}

/// The hint for a validation error, by what it is about: the message
/// names the field and its allowed values; the hint says what to do.
fn validation_hint(message: &str) -> &'static str {
    if message.starts_with("no search parameter") {
        "provide at least one of pattern, patterns, symbol, section, parent or query"
    } else if message.contains("distinct words") || message.contains("distinct entries") {
        "search for the few words or identifiers that name the code; for a question, use an evidence pack"
    } else if message.contains("budget_tokens") {
        "pass budget_tokens inside the range the message gives, or leave it out for the default"
    } else if message.contains("`task`") {
        "describe the task in a few sentences (its first line weighs most), or give a focus"
    } else if message.contains("embedding model") {
        "point --model / CANOPY_MODEL at a model folder, or leave it unset to skip semantic retrieval"
    } else if message.contains("give the column of the one you mean") {
        "ask again with one of the positions the message lists"
    } else if message.contains("path:line") {
        "write the target as path:line or path:line:col (line 1-based, col 0-based), or name the symbol"
    } else {
        "fix the field the message names; it says which values are allowed"
    }
}

impl CanopyError {
    /// Stable machine-readable error code (the seed's error names where it has one).
    pub fn code(&self) -> &'static str {
        match self {
            CanopyError::HandleNotFound { .. } => "HandleNotFound",
            CanopyError::MalformedHandle { .. } => "MalformedHandle",
            CanopyError::ResultSetNotFound { .. } => "ResultSetNotFound",
            CanopyError::StaleIndex { .. } => "StaleIndex",
            CanopyError::QueryParse { .. } => "QueryParse",
            CanopyError::GlobPattern { .. } => "GlobPattern",
            CanopyError::Validation(_) => "Validation",
            CanopyError::PathOutsideRepo(_) => "PathOutsideRepo",
            CanopyError::NotADirectory(_) => "NotADirectory",
            CanopyError::NotARepository { .. } => "NotARepository",
            CanopyError::UnsafeRoot { .. } => "UnsafeRoot",
            CanopyError::IndexDamaged { .. } => "IndexDamaged",
            CanopyError::Database(_) => "Database",
            CanopyError::StorageFull { .. } => "StorageFull",
            CanopyError::Io { .. } => "Io",
            CanopyError::Git(_) => "Git",
            CanopyError::TimeBudget { .. } => "TimeBudgetExceeded",
            CanopyError::Cancelled => "Cancelled",
            CanopyError::Internal(_) => "Internal",
        }
    }

    /// What the caller should do next.
    pub fn hint(&self) -> &'static str {
        match self {
            CanopyError::HandleNotFound { .. } => {
                "re-run the query to get fresh handles; ids change when the unit itself changes"
            }
            CanopyError::MalformedHandle { .. } => {
                "copy the id whole from a query, pack or context result (e.g. h0123456789abcdef01234567)"
            }
            CanopyError::ResultSetNotFound { .. } => {
                "result sets expire after 30 minutes unused: re-run the query with result_set=true"
            }
            CanopyError::StaleIndex { .. } => {
                "run `canopy invalidate` (or canopy_invalidate) and re-query to refresh the index"
            }
            CanopyError::QueryParse { .. } => {
                "fix the expression, e.g. (in-file \"src/**/*.rs\" (grep \"auth\")), or use the plain parameters"
            }
            CanopyError::GlobPattern { .. } => {
                "use **/*.ext style patterns relative to the repo root"
            }
            CanopyError::Validation(message) => validation_hint(message),
            CanopyError::PathOutsideRepo(_) => "use a repo-relative path without `..`",
            CanopyError::NotADirectory(_) => "pass an existing directory inside the repository",
            CanopyError::NotARepository { .. } => {
                "Canopy indexes git repositories; to index this folder anyway, run `canopy index <folder>` by hand (or pass --root <folder>)"
            }
            CanopyError::UnsafeRoot { .. } => {
                "point Canopy at a project folder (a git repository) instead"
            }
            CanopyError::IndexDamaged { .. } => {
                "rebuild it: `canopy index --rebuild` (MCP: canopy_index with rebuild=true; HTTP: POST /reindex with \"rebuild\": true)"
            }
            CanopyError::Database(e) if is_refused_write(e) => {
                "the file system refused a write to the index (a full disk or quota, a file-size limit such as `ulimit -f`, or a failing disk); nothing was lost: fix that, then run the index again (rebuilding cannot help: it writes more)"
            }
            CanopyError::Database(_) => {
                "retry; if it persists, rebuild the index: `canopy index --rebuild` (MCP: canopy_index with rebuild=true; HTTP: POST /reindex with \"rebuild\": true)"
            }
            CanopyError::StorageFull { .. } => {
                "free disk space on the volume that holds the repository (the index lives in its .canopy folder), then run the index again; rebuilding cannot help"
            }
            CanopyError::Io { .. } => "check that the path exists and is readable",
            CanopyError::Git(_) => "check that git is installed and the repository is valid",
            CanopyError::TimeBudget { .. } => {
                "narrow the request: a symbol instead of text, a glob, fewer or rarer words"
            }
            CanopyError::Cancelled => "nothing to do: the request was cancelled as asked",
            CanopyError::Internal(_) => "this is a bug in canopy; please report it",
        }
    }

    /// `self`, or [`CanopyError::TimeBudget`] when it is SQLite's interrupt
    /// (what a budget set by `Store::read_snapshot_within` raises), or
    /// [`CanopyError::Cancelled`] when the interrupt came from this thread's
    /// cancellation flag.
    pub fn or_budget(self, budget: std::time::Duration) -> Self {
        match &self {
            CanopyError::Database(e)
                if e.sqlite_error_code() == Some(rusqlite::ErrorCode::OperationInterrupted)
                    && crate::cancel::requested() =>
            {
                CanopyError::Cancelled
            }
            CanopyError::Database(e)
                if e.sqlite_error_code() == Some(rusqlite::ErrorCode::OperationInterrupted) =>
            {
                CanopyError::TimeBudget {
                    millis: budget.as_millis() as u64,
                }
            }
            _ => self,
        }
    }

    /// The error for an I/O failure on `path`: a full disk becomes
    /// [`CanopyError::StorageFull`], anything else [`CanopyError::Io`].
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        let path = path.into();
        if source.kind() == std::io::ErrorKind::StorageFull {
            return CanopyError::StorageFull {
                detail: format!("{}: {source}", path.display()),
            };
        }
        CanopyError::Io { path, source }
    }
}

/// SQLite's I/O errors on writing (`SQLITE_IOERR_WRITE`, `_FSYNC`,
/// `_TRUNCATE`): the operating system refused the write — EFBIG past a
/// file-size limit, EDQUOT, EIO — which SQLite does not report as
/// `SQLITE_FULL`. The transaction was rolled back, so the index is intact.
fn is_refused_write(e: &rusqlite::Error) -> bool {
    use rusqlite::ffi;
    matches!(
        e.sqlite_error().map(|f| f.extended_code),
        Some(ffi::SQLITE_IOERR_WRITE | ffi::SQLITE_IOERR_FSYNC | ffi::SQLITE_IOERR_TRUNCATE)
    )
}

impl From<rusqlite::Error> for CanopyError {
    fn from(e: rusqlite::Error) -> Self {
        // SQLITE_FULL: the disk, the quota, or a size limit is reached.
        if e.sqlite_error_code() == Some(rusqlite::ErrorCode::DiskFull) {
            return CanopyError::StorageFull {
                detail: e.to_string(),
            };
        }
        CanopyError::Database(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_disk_says_free_space_not_rebuild() {
        // A real SQLITE_FULL: the database may not grow past its pages.
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        conn.execute_batch("CREATE TABLE t(x); PRAGMA max_page_count = 2;")
            .unwrap();
        let err: CanopyError = conn
            .execute("INSERT INTO t VALUES (zeroblob(100000))", [])
            .unwrap_err()
            .into();
        assert_eq!(err.code(), "StorageFull", "{err}");
        assert!(err.hint().contains("free disk space"), "{}", err.hint());
        assert!(!err.hint().contains("--rebuild"));
        // The same from the file system (ENOSPC).
        let err = CanopyError::io(
            "/repo/.canopy/index.db.rebuild",
            std::io::Error::from(std::io::ErrorKind::StorageFull),
        );
        assert_eq!(err.code(), "StorageFull");
        assert!(err.to_string().contains("index.db.rebuild"), "{err}");
        // A write the operating system refused (EFBIG, EIO): fix that, not rebuild.
        let refused = CanopyError::Database(rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_IOERR_WRITE),
            Some("disk I/O error".into()),
        ));
        assert!(
            refused.hint().contains("refused a write"),
            "{}",
            refused.hint()
        );
        assert!(!refused.hint().contains("--rebuild"), "{}", refused.hint());
        // Other database errors keep their advice.
        let other: CanopyError = conn
            .execute("SELECT * FROM missing", [])
            .unwrap_err()
            .into();
        assert_eq!(other.code(), "Database");
    }
}
