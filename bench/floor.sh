#!/usr/bin/env bash
# A cold `canopy index` against its parse-and-extract floor, in one run.
#
# Usage: bench/floor.sh [--runs N] [--instructions] [--threads N] REPO...
#
# For each repository, alternating floor and index (F I F I …, N times each,
# default 3): the floor is `examples/index_floor.rs` (the same file list,
# grammars, extraction queries and thread count as the index, and nothing
# else); the index is `canopy index` with REPO/.canopy deleted first (a cold
# index, default settings: graph resolution on, no embedding model). Both run
# under GNU time. Prints a markdown table: the best (lowest) CPU seconds
# (user+sys) and wall seconds of each, their ratios (index ÷ floor; issue 28
# asks for a CPU ratio ≤ 1.5), and each one's peak RSS.
#
# --instructions: count instructions instead (valgrind's cachegrind, no
# cache simulation; every thread's instructions added up), once each: the
# count does not depend on the machine's load, so the ratio is comparable
# on a busy machine. Slow (~50x). --threads N runs both with N parse
# threads (`index --threads N`, `index_floor --threads N`; default: the
# programs' own default, one per core).
#
# Environment: CANOPY_BIN and FLOOR_BIN use those binaries instead of
# building them (`cargo build --release -p canopy-cli` and
# `cargo build --release -p canopy-core --example index_floor`).
# Needs GNU time (/usr/bin/time). Run it on an idle machine.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

runs=3
instructions=0
threads=()
repos=()
while [ $# -gt 0 ]; do
    case "$1" in
        --runs) runs=$2; shift 2 ;;
        --instructions) instructions=1; shift ;;
        --threads) threads=(--threads "$2"); shift 2 ;;
        -h|--help) sed -n '2,27p' "$0"; exit 0 ;;
        *) repos+=("$1"); shift ;;
    esac
done
bench_require_repos "bench/floor.sh [--runs N] [--instructions] [--threads N] REPO..." "${repos[@]}"
if [ "$instructions" = 1 ]; then
    command -v valgrind >/dev/null || { echo "valgrind is needed (apt-get install -y valgrind)" >&2; exit 1; }
else
    bench_require_gnu_time
fi
bench_canopy_bin
if [ -z "${FLOOR_BIN:-}" ]; then
    cargo build --release --quiet -p canopy-core --example index_floor --manifest-path "$bench_root/Cargo.toml"
    FLOOR_BIN="$bench_root/target/release/examples/index_floor"
fi

# Runs a command under GNU time; prints "cpu wall rss_mib".
timed() {
    local out
    out=$(mktemp)
    /usr/bin/time -f '%U %S %e %M' -o "$out" "$@" >/dev/null 2>&1
    awk '{printf "%.3f %.3f %.1f\n", $1 + $2, $3, $4 / 1024}' "$out"
    rm -f "$out"
}

# Runs a command under cachegrind; prints its instruction count (all threads).
counted() {
    local out
    out=$(mktemp)
    valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null "$@" >/dev/null 2>"$out"
    awk '/I *refs:/ { gsub(",", "", $NF); print $NF }' "$out"
    rm -f "$out"
}

if [ "$instructions" = 1 ]; then
    echo "| repository | floor instructions | index instructions | ratio |"
    echo "|---|---|---|---|"
    for repo in "${repos[@]}"; do
        fi=$(counted "$FLOOR_BIN" "${threads[@]}" "$repo")
        rm -rf "$repo/.canopy"
        ii=$(counted "$CANOPY_BIN" index --quiet "${threads[@]}" "$repo")
        awk -v n="$(basename "$repo")" -v f="$fi" -v i="$ii" \
            'BEGIN { printf "| %s | %.3e | %.3e | %.2f |\n", n, f, i, i / f }'
    done
    exit 0
fi

echo "| repository | floor CPU s | index CPU s | CPU ratio | floor wall s | index wall s | wall ratio | floor RSS MiB | index RSS MiB |"
echo "|---|---|---|---|---|---|---|---|---|"
for repo in "${repos[@]}"; do
    floor_cpu=(); floor_wall=(); floor_rss=()
    index_cpu=(); index_wall=(); index_rss=()
    for _ in $(seq "$runs"); do
        read -r c w r < <(timed "$FLOOR_BIN" "${threads[@]}" "$repo")
        floor_cpu+=("$c"); floor_wall+=("$w"); floor_rss+=("$r")
        rm -rf "$repo/.canopy"
        read -r c w r < <(timed "$CANOPY_BIN" index --quiet "${threads[@]}" "$repo")
        index_cpu+=("$c"); index_wall+=("$w"); index_rss+=("$r")
    done
    fc=$(printf '%s\n' "${floor_cpu[@]}" | best)
    ic=$(printf '%s\n' "${index_cpu[@]}" | best)
    fw=$(printf '%s\n' "${floor_wall[@]}" | best)
    iw=$(printf '%s\n' "${index_wall[@]}" | best)
    fr=$(printf '%s\n' "${floor_rss[@]}" | sort -n | tail -1)
    ir=$(printf '%s\n' "${index_rss[@]}" | sort -n | tail -1)
    awk -v n="$(basename "$repo")" -v fc="$fc" -v ic="$ic" -v fw="$fw" -v iw="$iw" -v fr="$fr" -v ir="$ir" \
        'function ratio(a, b) { return b > 0 ? sprintf("%.2f", a / b) : "n/a" }
         BEGIN { printf "| %s | %.2f | %.2f | %s | %.2f | %.2f | %s | %.0f | %.0f |\n", n, fc, ic, ratio(ic, fc), fw, iw, ratio(iw, fw), fr, ir }'
done
