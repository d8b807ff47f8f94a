#!/usr/bin/env bash
# PostgreSQL server binaries for the fleet tests (crates/canopy-fleet): the
# tests start their own throwaway server (initdb into a temporary folder,
# loopback port), so only the binaries are needed, never a running service.
# Installs Debian's `postgresql` package when no server binaries are found,
# then prints the directory holding initdb and postgres on stdout (messages
# go to stderr). CANOPY_PG_BIN, when set to such a directory, wins.
#
# Usage: CANOPY_PG_BIN="$(.ci/postgres.sh)"
set -euo pipefail

find_bin() {
    if [ -n "${CANOPY_PG_BIN:-}" ] && [ -x "$CANOPY_PG_BIN/initdb" ] && [ -x "$CANOPY_PG_BIN/postgres" ]; then
        echo "$CANOPY_PG_BIN"
        return
    fi
    local d found=""
    for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V); do
        if [ -x "$d/initdb" ] && [ -x "$d/postgres" ]; then found=$d; fi
    done
    echo "$found"
}

BIN=$(find_bin)
if [ -z "$BIN" ]; then
    echo "no PostgreSQL server binaries; installing the postgresql package (apt-get)" >&2
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq >&2
    $SUDO apt-get install -y -qq --no-install-recommends postgresql >&2
    BIN=$(find_bin)
fi
if [ -z "$BIN" ]; then
    echo "the postgresql package installed no server binaries under /usr/lib/postgresql/*/bin" >&2
    exit 1
fi
# As root, the tests run initdb and postgres as this unprivileged user.
if [ "$(id -u)" -eq 0 ] && ! id -u "${CANOPY_PG_USER:-postgres}" >/dev/null 2>&1; then
    echo "no user ${CANOPY_PG_USER:-postgres} to run PostgreSQL as (the package creates it)" >&2
    exit 1
fi
echo "$("$BIN/postgres" --version) in $BIN" >&2
echo "$BIN"
