#!/usr/bin/env bash
# A large incremental batch with the text index's merging deferred to the
# end of the run (the default) against FTS5's automatic merging at every
# batch's commit (`CANOPY_TEXT_MERGE=per-batch`), on one build (issue 32
# item 2: the 1,300-file checkout).
#
# 1. Copies REPO (a git repository, without its .canopy) to a temporary
#    directory and commits, on a branch of the copy, a new function appended
#    to each of FILES Python files (default 1,300); indexes the first branch.
# 2. ROUNDS times (default 3), for each way in turn (deferred, per-batch):
#    `git checkout` of the batch branch, `canopy index`, checkout back,
#    `canopy index`: wall and CPU seconds of each run.
# 3. Prints each run, the best of each way and the ratio, and the text
#    index's live segments after the last run of each way (fewer segments,
#    fewer lists a query merges).
#
# usage: bench/text_merge.sh REPO [FILES] [ROUNDS]
# env:   CANOPY_BIN (default: builds target/release/canopy)
set -euo pipefail
. "$(dirname "$0")/lib.sh"
REPO=${1:-}
bench_require_repos "bench/text_merge.sh REPO [FILES] [ROUNDS]" ${REPO:+"$REPO"}
FILES=${2:-1300}
ROUNDS=${3:-3}
bench_require_gnu_time
bench_canopy_bin

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cp -r "$REPO" "$WORK/repo"
cd "$WORK/repo"
rm -rf .canopy
base=$(git rev-parse --abbrev-ref HEAD)
git checkout -q -b text-merge-batch
n=0
while IFS= read -r -d '' file; do
    n=$((n + 1))
    printf '\n\ndef text_merge_probe_%d():\n    return %d\n' "$n" "$n" >>"$file"
    [ "$n" -ge "$FILES" ] && break
done < <(git ls-files -z '*.py')
git -c user.name=bench -c user.email=bench@example.com commit -qam "text merge batch"
git checkout -q "$base"
"$CANOPY_BIN" index --quiet
echo "repo: $REPO, batch: $n files changed, $ROUNDS rounds" >&2

segments() {
    python3 - .canopy/index.db <<'PY'
import sqlite3, sys
db = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
# FTS5 numbers a segment's pages `segid << 37 | page`; tombstones from 2^16.
print(db.execute("SELECT count(DISTINCT id >> 37) FROM fts_data "
                 "WHERE (id >> 37) BETWEEN 1 AND 65535").fetchone()[0])
PY
}

# One run after a checkout: "wall cpu" seconds.
timed_index() {
    git checkout -q "$1"
    /usr/bin/time -f "%e %U %S" -o "$WORK/time" "$CANOPY_BIN" index --quiet
    awk '{printf "%s %.2f\n", $1, $2 + $3}' "$WORK/time"
}

declare -A walls cpus segs
echo "| round | merging | to batch: wall s | cpu s | back: wall s | cpu s |"
echo "|---|---|---:|---:|---:|---:|"
for round in $(seq "$ROUNDS"); do
    for way in deferred per-batch; do
        if [ "$way" = per-batch ]; then export CANOPY_TEXT_MERGE=per-batch; else unset CANOPY_TEXT_MERGE; fi
        read -r w1 c1 < <(timed_index text-merge-batch)
        read -r w2 c2 < <(timed_index "$base")
        echo "| $round | $way | $w1 | $c1 | $w2 | $c2 |"
        walls[$way]+="$w1"$'\n'"$w2"$'\n'
        cpus[$way]+="$c1"$'\n'"$c2"$'\n'
        segs[$way]=$(segments)
    done
done
unset CANOPY_TEXT_MERGE
echo
echo "| merging | best wall s | best cpu s | text segments after |"
echo "|---|---:|---:|---:|"
for way in deferred per-batch; do
    echo "| $way | $(printf '%s' "${walls[$way]}" | best) | $(printf '%s' "${cpus[$way]}" | best) | ${segs[$way]} |"
done
dw=$(printf '%s' "${walls[deferred]}" | best); pw=$(printf '%s' "${walls[per-batch]}" | best)
dc=$(printf '%s' "${cpus[deferred]}" | best); pc=$(printf '%s' "${cpus[per-batch]}" | best)
awk -v dw="$dw" -v pw="$pw" -v dc="$dc" -v pc="$pc" \
    'BEGIN { printf "\nper-batch ÷ deferred: wall %.2f×, cpu %.2f×\n", pw / dw, pc / dc }'
