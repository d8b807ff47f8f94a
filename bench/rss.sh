#!/usr/bin/env bash
# Peak RSS of a cold `canopy index` as the repository doubles.
#
# Usage: bench/rss.sh [--copies "1 2 4"] [--runs N] REPO...
#
# For each repository and each count k, builds a scratch repository that
# holds k copies of REPO's tracked files side by side (copy-1/ … copy-k/,
# a git repository of its own), then indexes it cold under GNU time (N
# runs, default 1; the highest peak is kept). Prints a markdown table:
# files, source MiB, peak RSS MiB, CPU and wall seconds per size. Issue 28
# asks for peak RSS that stays flat as the repository doubles (≤ 150 MiB).
#
# Environment: CANOPY_BIN uses that binary instead of building one
# (`cargo build --release -p canopy-cli`); SCRATCH is where the copies go
# (default: a temporary directory, removed at the end). Needs GNU time and git.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

copies="1 2 4"
runs=1
repos=()
while [ $# -gt 0 ]; do
    case "$1" in
        --copies) copies=$2; shift 2 ;;
        --runs) runs=$2; shift 2 ;;
        -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
        *) repos+=("$1"); shift ;;
    esac
done
bench_require_repos "bench/rss.sh [--copies \"1 2 4\"] [--runs N] REPO..." "${repos[@]}"
bench_require_gnu_time
bench_canopy_bin
scratch=${SCRATCH:-$(mktemp -d)}
[ -n "${SCRATCH:-}" ] || trap 'rm -rf "$scratch"' EXIT

echo "| repository | copies | files | source MiB | peak RSS MiB | CPU s | wall s |"
echo "|---|---|---|---|---|---|---|"
for repo in "${repos[@]}"; do
    name=$(basename "$repo")
    for k in $copies; do
        dir="$scratch/$name-x$k"
        rm -rf "$dir"
        mkdir -p "$dir"
        for i in $(seq "$k"); do
            mkdir -p "$dir/copy-$i"
            git -C "$repo" ls-files -z | (cd "$repo" && xargs -0 cp --parents -t "$dir/copy-$i" 2>/dev/null || true)
        done
        git -C "$dir" init -q && git -C "$dir" add -A >/dev/null 2>&1
        files=$(git -C "$dir" ls-files | wc -l)
        mib=$(du -sm --exclude=.git "$dir" | cut -f1)
        peak=0 cpu=0 wall=0
        for _ in $(seq "$runs"); do
            rm -rf "$dir/.canopy"
            out=$(mktemp)
            /usr/bin/time -f '%U %S %e %M' -o "$out" "$CANOPY_BIN" index --quiet "$dir" >/dev/null 2>&1
            read -r u s w m < "$out"
            rm -f "$out"
            if [ "$m" -gt "$peak" ]; then peak=$m; cpu=$(awk -v u="$u" -v s="$s" 'BEGIN{print u+s}'); wall=$w; fi
        done
        awk -v n="$name" -v k="$k" -v f="$files" -v mib="$mib" -v p="$peak" -v c="$cpu" -v w="$wall" \
            'BEGIN { printf "| %s | %d | %d | %d | %.0f | %.2f | %.2f |\n", n, k, f, mib, p / 1024, c, w }'
        [ -n "${SCRATCH:-}" ] || rm -rf "$dir"
    done
done
