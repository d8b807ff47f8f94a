#!/usr/bin/env bash
# Query latency on one repository: in-process (symbol, pattern, reference, DSL,
# evidence pack, planned pack) and end-to-end through the CLI (process start
# included), next to ripgrep for the same lookups.
#
# usage: bench/query.sh REPO [ITERATIONS]
# env:   CANOPY_BIN (default: builds target/release/canopy)
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"; MAIN="$(cd "$HERE/.." && pwd)"
REPO="${1:?usage: bench/query.sh REPO [ITERATIONS]}"; N="${2:-200}"
cd "$MAIN"
cargo build --release -q -p canopy-cli -p canopy-core --example query_bench
BIN="${CANOPY_BIN:-$MAIN/target/release/canopy}"
"$BIN" index "$REPO" --quiet
# The 20 most-referenced names of this repository (so reference queries have answers).
NAMES=$(python3 - "$REPO/.canopy/index.db" <<'PY'
import sqlite3, sys
db = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
rows = db.execute("SELECT n.text FROM ref_postings p JOIN ref_names n ON n.id = p.name_id WHERE length(n.text) > 3 "
                  "GROUP BY n.text ORDER BY SUM(p.name_uses) DESC LIMIT 20").fetchall()
print(",".join(r[0] for r in rows))
PY
)
echo "names: $NAMES" >&2
"$MAIN/target/release/examples/query_bench" "$REPO" "$N" "$NAMES"

# End to end: one CLI process per query (median of 20), and rg for the same name.
first="${NAMES%%,*}"
median_ms() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
run_ms() { local s e; s=$(date +%s%N); "$@" >/dev/null 2>&1 || true; e=$(date +%s%N); echo $(( (e - s) / 1000000 )); }
cli_sym=$(for i in $(seq 20); do run_ms "$BIN" --root "$REPO" query --symbol "$first" --json; done | median_ms)
cli_pat=$(for i in $(seq 20); do run_ms "$BIN" --root "$REPO" query --pattern "$first" --json; done | median_ms)
if command -v rg >/dev/null; then
  rg_ms=$(for i in $(seq 20); do run_ms rg -n -w "$first" "$REPO"; done | median_ms)
else
  rg_ms="n/a (apt-get install ripgrep)"
fi
echo
echo "| end to end (process start included) | median ms |"
echo "|---|---|"
echo "| canopy query --symbol $first | $cli_sym |"
echo "| canopy query --pattern $first | $cli_pat |"
echo "| rg -n -w $first | $rg_ms |"
