//! `canopy mcp` driven by the official MCP Python SDK (PyPI `mcp`, pinned
//! in .ci/mcp-sdk.sh), as an agent built on it meets it: every tool
//! parameter described, `canopy_index.glob` optional, `canopy_refine.kind`
//! taking `reference`, and errors that say what to fix (a validation error
//! names the parameter and its allowed values; a malformed handle id is
//! called malformed; a missing target suggests the nearest names; the
//! context budget error's hint is about the budget). The checks are
//! tests/mcp_sdk/check_mcp.py; this test runs it with the interpreter named
//! by `CANOPY_MCP_SDK_PYTHON` (one with the SDK installed), is skipped
//! without it, and fails instead when `CANOPY_REQUIRE_MCP_SDK=1` (CI).

use std::path::Path;
use std::process::Command;

use canopy_test_support::canopy_bin;

/// The interpreter with the SDK installed.
const PYTHON_ENV: &str = "CANOPY_MCP_SDK_PYTHON";
/// Set to 1, a missing interpreter fails the test rather than skipping it.
const REQUIRE_ENV: &str = "CANOPY_REQUIRE_MCP_SDK";

#[test]
fn the_python_sdk_sees_described_schemas_and_errors_that_say_what_to_fix() {
    let Some(python) = std::env::var_os(PYTHON_ENV).filter(|p| !p.is_empty()) else {
        if std::env::var_os(REQUIRE_ENV).is_some_and(|v| v == "1") {
            panic!("{REQUIRE_ENV}=1 but {PYTHON_ENV} is not set (run .ci/mcp-sdk.sh)");
        }
        eprintln!(
            "skipping: {PYTHON_ENV} is not set (point it at a Python with the MCP SDK: .ci/mcp-sdk.sh prints one)"
        );
        return;
    };
    let repo = canopy_test_support::repo::workspace_fixture("graph/python");
    canopy_test_support::git::git(repo.path(), &["init", "-q"]);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/mcp_sdk/check_mcp.py");
    let out = Command::new(&python)
        .arg(&script)
        .arg(canopy_bin!())
        .arg(repo.path())
        .current_dir(repo.path())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {python:?} (from {PYTHON_ENV}): {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    assert!(
        out.status.success(),
        "check_mcp.py failed ({}):\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
    // It ran its checks, not just an import.
    assert!(stdout.contains(" passed, 0 failed"), "{stdout}");
}
