//! # canopy-test-support
//!
//! What Canopy's end-to-end tests share, so each test file says what it
//! checks and nothing else: fixture repositories ([`repo`]), git
//! ([`git`]), child processes that never outlive a failing test
//! ([`process`]), a `canopy serve` on a free port with its HTTP helpers
//! ([`serve`]), a `canopy follow` whose events a test reads ([`follow`]), the start-or-skip rule of the PostgreSQL tests
//! ([`postgres`]) and, with the `mcp` feature, an MCP client connected to a
//! `canopy mcp` child (`mcp`).
//!
//! The binary under test is the one Cargo builds for the test's own crate:
//! tests pass [`canopy_bin!`] (which reads `CARGO_BIN_EXE_canopy` where the
//! test is compiled), so no test runs a binary another crate built.
//!
//! Never a dependency of anything but tests (`publish = false`).

pub mod follow;
pub mod git;
#[cfg(feature = "mcp")]
pub mod mcp;
pub mod postgres;
pub mod process;
pub mod repo;
pub mod serve;

use std::time::{Duration, Instant};

/// Bound on every wait in the tests (never a timing assertion: it only
/// stops a hung test).
pub const WAIT: Duration = Duration::from_secs(60);

/// The `canopy` binary Cargo built for the integration test that expands
/// this (only tests of the crate that builds the binary can).
#[macro_export]
macro_rules! canopy_bin {
    () => {
        ::std::path::Path::new(env!("CARGO_BIN_EXE_canopy"))
    };
}

/// Polls `check` until it holds; panics naming `what` after [`WAIT`].
pub fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while Instant::now() < deadline {
        if check() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("not within {WAIT:?}: {what}");
}

/// Checks that handles (a JSON array of query or pack handles) say what
/// they hold (issue 26): every handle has a one-line `preview` from its
/// first line and a `node_type` (its kind); named units carry `name` and
/// `qualified_name`, the name being the qualified name's last part. At
/// least one handle must be the named unit `qualified`, so a response
/// without names fails.
pub fn assert_handles_name_what_they_hold(handles: &serde_json::Value, qualified: &str) {
    let handles = handles.as_array().expect("handles array");
    assert!(!handles.is_empty(), "no handles");
    for h in handles {
        assert!(
            h["node_type"].as_str().is_some_and(|k| !k.is_empty()),
            "kind: {h}"
        );
        let preview = h["preview"].as_str().unwrap_or_default();
        assert!(
            !preview.trim().is_empty() && !preview.contains('\n'),
            "one-line preview: {h}"
        );
        if let Some(q) = h["qualified_name"].as_str() {
            let name = h["name"].as_str().expect("a qualified unit has a name");
            assert!(q.ends_with(name), "{h}");
        }
    }
    let named = handles.iter().find(|h| h["qualified_name"] == qualified);
    let named = named.unwrap_or_else(|| panic!("no handle of {qualified}: {handles:?}"));
    assert_eq!(
        named["name"],
        qualified.rsplit(['.', ':']).next().unwrap_or(qualified),
        "{named}"
    );
}
