//! [`FleetError`]: every way a fleet operation can fail, and how a caller
//! tells a refusal (fenced, conflict, name taken) from an outage (the
//! database cannot be reached: retry later).

use std::time::Duration;

/// SQLSTATE raised by `fleet_publish` when the writer's lease is not the
/// current, unexpired one (schema v1).
pub(crate) const SQLSTATE_FENCED: &str = "CF001";
/// SQLSTATE raised when the repository is not registered (any more).
pub(crate) const SQLSTATE_NO_REPO: &str = "CF002";
/// SQLSTATE raised when the expected generation is not the stored one.
pub(crate) const SQLSTATE_GENERATION: &str = "CF003";

/// A fleet operation's failure.
#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    /// The fleet URL or another setting is unusable.
    #[error("invalid fleet configuration: {0}")]
    Config(String),
    /// PostgreSQL cannot be reached, or the connection broke mid-operation;
    /// retrying after a while can succeed.
    #[error("the fleet database is unavailable: {0}")]
    Unavailable(String),
    /// The write carried a lease epoch that is not the repository's current,
    /// unexpired lease held by this node: another node owns the repository
    /// now, or this node's lease lapsed (e.g. the process was paused).
    #[error("write refused: {0}")]
    Fenced(String),
    /// The stored generation is not the one the writer expected.
    #[error("generation conflict: {0}")]
    GenerationConflict(String),
    /// No such repository.
    #[error("repository {0} is not registered")]
    NoSuchRepo(String),
    /// A repository with that name (and another source) exists.
    #[error("the name {0:?} is taken by another repository")]
    NameTaken(String),
    /// Another live process uses this node id.
    #[error(
        "node id {node_id:?} is in use by a live node (heartbeat {age:?} ago); pick another --fleet-node-id or stop that node"
    )]
    NodeIdInUse {
        /// The contested id.
        node_id: String,
        /// Age of the other process's last heartbeat.
        age: Duration,
    },
    /// The database holds a fleet schema newer than this build knows.
    #[error(
        "the fleet database has schema version {found}; this build knows up to {known}: upgrade canopy on this node"
    )]
    SchemaTooNew {
        /// Version in the database.
        found: i32,
        /// Newest version this build can apply.
        known: i32,
    },
    /// Any other error the database reported (a bug or a constraint).
    #[error("fleet database error: {0}")]
    Database(String),
    /// The fleet was shut down.
    #[error("the fleet node is shutting down")]
    Stopped,
}

impl FleetError {
    /// Whether the same call may succeed later without any change (the
    /// database was unreachable or busy).
    pub fn is_retryable(&self) -> bool {
        matches!(self, FleetError::Unavailable(_))
    }
}

/// What a PostgreSQL error means for the connection it came on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Severity {
    /// The server answered: the connection is fine.
    Answered,
    /// The connection is broken or the server is going away: drop the
    /// connection and count an outage.
    Broken,
}

/// Maps a driver error to a [`FleetError`] and says whether the
/// connection must be dropped.
pub(crate) fn classify(e: &tokio_postgres::Error) -> (FleetError, Severity) {
    let Some(db) = e.as_db_error() else {
        // I/O, protocol or closed connection: nothing the server decided.
        return (FleetError::Unavailable(e.to_string()), Severity::Broken);
    };
    let code = db.code().code();
    let message = db.message().to_string();
    match code {
        SQLSTATE_FENCED => (FleetError::Fenced(message), Severity::Answered),
        SQLSTATE_GENERATION => (FleetError::GenerationConflict(message), Severity::Answered),
        SQLSTATE_NO_REPO => (FleetError::NoSuchRepo(message), Severity::Answered),
        // Serialization failure, deadlock, lock or statement timeout, too
        // many connections: the server is busy, the connection still works.
        "40001" | "40P01" | "55P03" | "57014" | "53300" => {
            (FleetError::Unavailable(message), Severity::Answered)
        }
        // Admin shutdown, crash shutdown, cannot connect now, and any
        // connection exception class (08): the session is gone.
        c if c.starts_with("57P") || c.starts_with("08") => {
            (FleetError::Unavailable(message), Severity::Broken)
        }
        _ => (
            FleetError::Database(format!("{message} ({code})")),
            Severity::Answered,
        ),
    }
}
