#!/usr/bin/env bash
# A cold `canopy index --threads 1` against the default (one thread per
# core), in one run.
#
# Usage: bench/threads.sh [--runs N] [--one-core] REPO...
#
# For each repository, alternating (1 D 1 D …, N times each, default 3),
# REPO/.canopy deleted before each run (a cold index, default settings).
# Prints a markdown table: the best (lowest) wall and CPU seconds of each
# and the speed-up (wall with one thread ÷ wall by default; issue 28 asks
# for ≥ 1.8 with two cores on an idle machine). `--threads 1` is one
# thread of file work (the writer parses too, since the twenty-second
# session; before, one parser ran beside the writer). `--one-core` adds a
# third run each round, the default pinned to one CPU (`taskset -c 0`),
# and its speed-up (wall on one core ÷ wall by default).
#
# Environment: CANOPY_BIN uses that binary instead of building one
# (`cargo build --release -p canopy-cli`). Needs GNU time (/usr/bin/time).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

runs=3
one_core=0
repos=()
while [ $# -gt 0 ]; do
    case "$1" in
        --runs) runs=$2; shift 2 ;;
        --one-core) one_core=1; shift ;;
        -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
        *) repos+=("$1"); shift ;;
    esac
done
bench_require_repos "bench/threads.sh [--runs N] REPO..." "${repos[@]}"
bench_require_gnu_time
bench_canopy_bin

# Runs a cold index under GNU time; prints "cpu wall". PIN: a command
# prefix (taskset) or empty.
PIN=()
timed() {
    local repo=$1 out
    shift
    out=$(mktemp)
    rm -rf "$repo/.canopy"
    /usr/bin/time -f '%U %S %e' -o "$out" "${PIN[@]}" "$CANOPY_BIN" index --quiet "$@" "$repo" >/dev/null 2>&1
    awk '{printf "%.3f %.3f\n", $1 + $2, $3}' "$out"
    rm -f "$out"
}


if [ "$one_core" = 1 ]; then
    command -v taskset >/dev/null || { echo "--one-core needs taskset (util-linux)" >&2; exit 1; }
    echo "| repository | cores | 1 thread wall s | default wall s | speed-up | 1 thread CPU s | default CPU s | one core wall s | speed-up over one core |"
    echo "|---|---|---|---|---|---|---|---|---|"
else
    echo "| repository | cores | 1 thread wall s | default wall s | speed-up | 1 thread CPU s | default CPU s |"
    echo "|---|---|---|---|---|---|---|"
fi
for repo in "${repos[@]}"; do
    one_cpu=(); one_wall=(); all_cpu=(); all_wall=(); pin_wall=()
    for _ in $(seq "$runs"); do
        read -r c w < <(timed "$repo" --threads 1)
        one_cpu+=("$c"); one_wall+=("$w")
        read -r c w < <(timed "$repo")
        all_cpu+=("$c"); all_wall+=("$w")
        if [ "$one_core" = 1 ]; then
            PIN=(taskset -c 0)
            read -r c w < <(timed "$repo")
            PIN=()
            pin_wall+=("$w")
        fi
    done
    oc=$(printf '%s\n' "${one_cpu[@]}" | best)
    ow=$(printf '%s\n' "${one_wall[@]}" | best)
    ac=$(printf '%s\n' "${all_cpu[@]}" | best)
    aw=$(printf '%s\n' "${all_wall[@]}" | best)
    pw=
    [ "$one_core" = 1 ] && pw=$(printf '%s\n' "${pin_wall[@]}" | best)
    awk -v n="$(basename "$repo")" -v cores="$(nproc)" -v oc="$oc" -v ow="$ow" -v ac="$ac" -v aw="$aw" -v pw="$pw" \
        'function ratio(a, b) { return b > 0 ? sprintf("%.2f", a / b) : "n/a" }
         BEGIN {
             printf "| %s | %d | %.2f | %.2f | %s | %.2f | %.2f |", n, cores, ow, aw, ratio(ow, aw), oc, ac
             if (pw != "") printf " %.2f | %s |", pw, ratio(pw, aw)
             printf "\n"
         }'
done
