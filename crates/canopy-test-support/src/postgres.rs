//! The start-or-skip rule of the tests that need a throwaway PostgreSQL
//! (fleet mode, issue 30): a test runs when PostgreSQL's binaries are
//! found (`CANOPY_PG_BIN` or the Debian package), is skipped when they
//! are not, and fails instead when `CANOPY_REQUIRE_POSTGRES=1` (CI), so a
//! missing package never turns the fleet tests green by skipping them.
//!
//! Generic over the server type so this crate does not depend on
//! `canopy-fleet` (whose `testing::PgServer` starts the server).

use std::fmt::Display;

/// Environment variable that turns a skip into a failure.
pub const REQUIRE_POSTGRES_ENV: &str = "CANOPY_REQUIRE_POSTGRES";

/// `Some(server)` when `started` started one; `None` (the test returns,
/// skipped) when no PostgreSQL binaries were found. Panics when they were
/// not found but `CANOPY_REQUIRE_POSTGRES=1`, or when starting failed.
pub fn started_or_skip<S, E: Display>(started: Result<Option<S>, E>) -> Option<S> {
    match started {
        Ok(Some(server)) => Some(server),
        Ok(None) => {
            if std::env::var_os(REQUIRE_POSTGRES_ENV).is_some_and(|v| v == "1") {
                panic!(
                    "no PostgreSQL binaries found and {REQUIRE_POSTGRES_ENV}=1 (run .ci/postgres.sh)"
                );
            }
            eprintln!("skipping: no PostgreSQL binaries (set CANOPY_PG_BIN or install postgresql)");
            None
        }
        Err(e) => panic!("cannot start a throwaway PostgreSQL: {e}"),
    }
}
