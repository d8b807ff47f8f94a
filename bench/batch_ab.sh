#!/usr/bin/env bash
# Same-run A/B of the query path in seconds: one `canopy mcp --watch false`
# process per run answering bench/mcp_batch.py's fixed batch (53 calls:
# symbol and text queries, evidence packs, callers, references, context
# packs), binaries alternating A B A B, N runs each; prints min and median
# wall milliseconds per binary (process start-up included, the same on both
# sides) and the median ratio B/A. bench/moves.sh counts the same batch in
# instructions; this is its check in time, for an idle machine.
#
# Each binary indexes its own copy of REPO (so an index format change
# between A and B is no obstacle); the batch is made once from A's index
# and given to both, so both answer the same questions.
#
# Usage: bench/batch_ab.sh A_BIN B_BIN REPO [N]    (N default 6)
# Needs python3. Copies REPO twice under $TMPDIR (or /tmp).
set -euo pipefail
[ $# -ge 3 ] || { sed -n '2,15p' "$0"; exit 2; }
A=$1; B=$2; REPO=$3; N=${4:-6}
HERE="$(cd "$(dirname "$0")" && pwd)"
WORK=$(mktemp -d); trap 'rm -rf "$WORK"' EXIT
for side in a b; do
  mkdir "$WORK/$side"; cp -r "$REPO/." "$WORK/$side/"; rm -rf "$WORK/$side/.canopy"
done
"$A" index "$WORK/a" --quiet; "$B" index "$WORK/b" --quiet
python3 "$HERE/mcp_batch.py" calls "$WORK/a/.canopy/index.db" "$WORK/a" > "$WORK/calls-a.json"
python3 - "$WORK" <<'PY'
import sys
w = sys.argv[1]
text = open(f"{w}/calls-a.json").read()
open(f"{w}/calls-b.json", "w").write(text.replace(f"{w}/a", f"{w}/b"))
PY
for _ in $(seq "$N"); do
  for side in a b; do
    if [ $side = a ]; then bin=$A; else bin=$B; fi
    s=$(date +%s%N)
    python3 "$HERE/mcp_batch.py" run --calls "$WORK/calls-$side.json" --answers "$WORK/answers-$side.txt" \
      -- "$bin" mcp --watch false >/dev/null
    e=$(date +%s%N); echo "$side $(( (e - s) / 1000000 ))"
  done
done | python3 -c '
import sys, collections
runs = collections.defaultdict(list)
for line in sys.stdin:
    side, ms = line.split(); runs[side].append(int(ms))
med = {}
for side, name in (("a", sys.argv[1]), ("b", sys.argv[2])):
    v = sorted(runs[side]); med[side] = v[len(v) // 2]
    print(f"{name}: batch wall min {v[0]} median {med[side]} ms (n={len(v)})")
ratio = med["b"] / med["a"]
print(f"median ratio B/A {ratio:.3f}")
' "$A" "$B"
