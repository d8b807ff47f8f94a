#!/usr/bin/env bash
# A cold index by Canopy against the nearest public peer, vu1n/canopy
# (a Rust project of the same purpose), in one run.
#
# Usage: bench/peer.sh [--runs N] REPO...
#
# For each repository, alternating peer and Canopy (P C P C …, N times each,
# default 3), REPO/.canopy deleted before every run (both keep their index
# there): the peer's `canopy --root REPO index` with its default settings,
# Canopy's `canopy index --quiet REPO` with its own. Both run under GNU time.
# Prints a markdown table: the best (lowest) CPU and wall seconds of each,
# the peer ÷ Canopy ratios (issue 28 asks for ≥ 3 on CPU and wall), peak
# RSS, and each index's size as a multiple of the source it covers (the
# bytes of the files `git ls-files` lists).
#
# Environment: CANOPY_BIN uses that binary instead of building one
# (`cargo build --release -p canopy-cli`). PEER_BIN uses that peer binary;
# otherwise the peer is built from source: PEER_SRC (a checkout; default: a
# clone of PEER_URL, https://github.com/vu1n/canopy, in
# ~/.cache/canopy-bench/peer-src, at PEER_REV, default v0.4.0) with
# `cargo build --release --locked -p canopy-cli` in its own target directory.
# Needs GNU time and git. Run it on an idle machine.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

runs=3
repos=()
while [ $# -gt 0 ]; do
    case "$1" in
        --runs) runs=$2; shift 2 ;;
        -h|--help) sed -n '2,23p' "$0"; exit 0 ;;
        *) repos+=("$1"); shift ;;
    esac
done
bench_require_repos "bench/peer.sh [--runs N] REPO..." "${repos[@]}"
bench_require_gnu_time
bench_canopy_bin
if [ -z "${PEER_BIN:-}" ]; then
    cache=${XDG_CACHE_HOME:-$HOME/.cache}/canopy-bench
    src=${PEER_SRC:-$cache/peer-src}
    if [ ! -d "$src/.git" ]; then
        git clone --quiet "${PEER_URL:-https://github.com/vu1n/canopy}" "$src"
    fi
    if [ -z "${PEER_SRC:-}" ]; then
        git -C "$src" checkout --quiet "${PEER_REV:-v0.4.0}"
    fi
    # Its own target directory: the peer's dependency versions differ from ours.
    CARGO_TARGET_DIR="$cache/peer-target" \
        cargo build --release --locked --quiet -p canopy-cli --manifest-path "$src/Cargo.toml"
    PEER_BIN="$cache/peer-target/release/canopy"
fi

# Runs a command under GNU time; prints "cpu wall rss_mib".
timed() {
    local out
    out=$(mktemp)
    /usr/bin/time -f '%U %S %e %M' -o "$out" "$@" >/dev/null 2>&1
    awk '{printf "%.3f %.3f %.1f\n", $1 + $2, $3, $4 / 1024}' "$out"
    rm -f "$out"
}

# Bytes of the index a run left, as a multiple of the tracked source.
index_ratio() {
    local repo=$1 index source
    index=$(du -sb "$repo/.canopy" | cut -f1)
    # A tracked file missing from the work tree is not source: stat skips it.
    source=$( (cd "$repo" && git ls-files -z | xargs -0 stat -c %s 2>/dev/null || true) |
        awk '{s += $1} END {print s + 0}')
    awk -v i="$index" -v s="$source" 'BEGIN { printf "%.2f\n", (s > 0 ? i / s : 0) }'
}

echo "| repository | peer CPU s | Canopy CPU s | CPU ratio | peer wall s | Canopy wall s | wall ratio | peer RSS MiB | Canopy RSS MiB | peer index ÷ source | Canopy index ÷ source |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for repo in "${repos[@]}"; do
    peer_cpu=(); peer_wall=(); peer_rss=()
    ours_cpu=(); ours_wall=(); ours_rss=()
    for _ in $(seq "$runs"); do
        rm -rf "$repo/.canopy"
        read -r c w r < <(timed "$PEER_BIN" --root "$repo" index)
        peer_cpu+=("$c"); peer_wall+=("$w"); peer_rss+=("$r")
        peer_size=$(index_ratio "$repo")
        rm -rf "$repo/.canopy"
        read -r c w r < <(timed "$CANOPY_BIN" index --quiet "$repo")
        ours_cpu+=("$c"); ours_wall+=("$w"); ours_rss+=("$r")
        ours_size=$(index_ratio "$repo")
    done
    rm -rf "$repo/.canopy"
    pc=$(printf '%s\n' "${peer_cpu[@]}" | best)
    oc=$(printf '%s\n' "${ours_cpu[@]}" | best)
    pw=$(printf '%s\n' "${peer_wall[@]}" | best)
    ow=$(printf '%s\n' "${ours_wall[@]}" | best)
    pr=$(printf '%s\n' "${peer_rss[@]}" | sort -n | tail -1)
    orss=$(printf '%s\n' "${ours_rss[@]}" | sort -n | tail -1)
    awk -v n="$(basename "$repo")" -v pc="$pc" -v oc="$oc" -v pw="$pw" -v ow="$ow" -v pr="$pr" -v orss="$orss" \
        -v ps="$peer_size" -v os="$ours_size" \
        'function ratio(a, b) { return b > 0 ? sprintf("%.2f", a / b) : "n/a" }
         BEGIN { printf "| %s | %.2f | %.2f | %s | %.2f | %.2f | %s | %.0f | %.0f | %s | %s |\n", n, pc, oc, ratio(pc, oc), pw, ow, ratio(pw, ow), pr, orss, ps, os }'
done
