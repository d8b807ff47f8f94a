# Shared set-up of the shell benchmarks in bench/ (floor.sh, threads.sh,
# rss.sh). Source it after `set -euo pipefail`:
#
#     . "$(dirname "$0")/lib.sh"
#
# Each benchmark keeps its own argument loop (their options differ); what
# they had in common — the usage check, GNU time, the binary under test and
# "best of N" — lives here so the three cannot drift apart.

# The repository root (the workspace whose binary is built when none is given).
bench_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# Exits with status 2 and the usage line on stderr when no repository was
# given. Usage: bench_require_repos "USAGE LINE" "${repos[@]}"
bench_require_repos() {
    local usage=$1
    shift
    if [ $# -eq 0 ]; then
        echo "usage: $usage" >&2
        exit 2
    fi
}

# GNU time gives CPU, wall and peak RSS of one run; the shell keyword cannot.
bench_require_gnu_time() {
    if [ ! -x /usr/bin/time ]; then
        echo "GNU time is needed (apt-get install -y time)" >&2
        exit 1
    fi
}

# Sets CANOPY_BIN to the binary under test: the caller's, else a release
# build of this workspace (what a user installs).
bench_canopy_bin() {
    if [ -z "${CANOPY_BIN:-}" ]; then
        cargo build --release --quiet -p canopy-cli --manifest-path "$bench_root/Cargo.toml"
        CANOPY_BIN="$bench_root/target/release/canopy"
    fi
}

# The lowest of the numbers on stdin, one per line: the run least disturbed
# by the rest of the machine.
best() { sort -n | head -1; }
