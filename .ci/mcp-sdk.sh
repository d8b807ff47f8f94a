#!/usr/bin/env bash
# The official MCP Python SDK (PyPI `mcp`, pinned below) for the test that
# drives `canopy mcp` with it (crates/canopy-cli/tests/mcp_sdk.rs, which
# runs tests/mcp_sdk/check_mcp.py). Installs it on first use into
# target/ci-venv, the venv .ci/schemathesis.sh uses too (the two pins
# install side by side: `pip check` is clean), then prints that venv's
# interpreter on stdout (messages go to stderr).
#
# Usage: CANOPY_MCP_SDK_PYTHON="$(.ci/mcp-sdk.sh)"
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${MCP_SDK_VENV:-$PWD/target/ci-venv}
MCP_SDK_VERSION=2.3.0

installed() {
    "$VENV/bin/python" -c 'from importlib.metadata import version; print(version("mcp"))' 2>/dev/null
}

if [ "$(installed || true)" != "$MCP_SDK_VERSION" ]; then
    echo "installing the MCP Python SDK (mcp $MCP_SDK_VERSION) into $VENV" >&2
    python3 -m venv "$VENV" >&2
    "$VENV/bin/pip" install --quiet --disable-pip-version-check "mcp==$MCP_SDK_VERSION" >&2
fi
if [ "$(installed || true)" != "$MCP_SDK_VERSION" ]; then
    echo "mcp $MCP_SDK_VERSION is not importable from $VENV/bin/python" >&2
    exit 1
fi
echo "$VENV/bin/python"
