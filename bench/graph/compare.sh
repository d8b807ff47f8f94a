#!/usr/bin/env bash
# The graph two ways on the same corpora, side by side, so they never drift:
#   engine  every edge the index holds (graph_eval, as bench/graph/run.sh scores it)
#   cli     what an agent sees: one `canopy callers|callees|references|definition
#           PATH:LINE:COL --json` per question ($EVAL/canopy_graph_cli.py)
# and prints P and R per corpus × task for both, with the difference (cli − engine).
#
#   bash bench/graph/compare.sh [DATA]      (DATA defaults to /work/graph-data)
#
# Builds the release `canopy` and `graph_eval` of this tree unless CANOPY_BIN /
# GRAPH_EVAL_BIN name binaries to use instead (e.g. another revision's, for a
# before/after). GOLD, TARGETS, CORPORA and OUT as in run.sh.
set -euo pipefail
DATA=${1:-/work/graph-data}
EVAL=${EVAL:-/work/shared/eval/graph}
GOLD=${GOLD:-$EVAL/gold}
TARGETS=${TARGETS:-$EVAL/targets.jsonl}
CORPORA=${CORPORA:-click mobx toml_edit gods}
OUT=${OUT:-$DATA/canopy-compare}
mkdir -p "$OUT"
cd "$(dirname "$0")/../.."
if [ -z "${CANOPY_BIN:-}" ] || [ -z "${GRAPH_EVAL_BIN:-}" ]; then
  cargo build --release -q -p canopy-cli -p canopy-core --example graph_eval --bin canopy
fi
CANOPY_BIN=$(realpath "${CANOPY_BIN:-target/release/canopy}")
GRAPH_EVAL_BIN=$(realpath "${GRAPH_EVAL_BIN:-target/release/examples/graph_eval}")

# The engine's edges (run.sh's loop).
: > "$OUT/engine-pred.jsonl"
for c in $CORPORA; do
  rm -rf "$DATA/corpora/$c/.canopy"
  "$GRAPH_EVAL_BIN" "$DATA/corpora/$c" "$c" | python3 bench/graph/filter.py "$GOLD" >> "$OUT/engine-pred.jsonl"
  rm -rf "$DATA/corpora/$c/.canopy"
done
ONLY=$(echo $CORPORA | tr ' ' ',')
python3 "$EVAL/score_graph.py" score --gold "$GOLD" --targets "$TARGETS" --corpora "$ONLY" \
  --pred "$OUT/engine-pred.jsonl" --json "$OUT/engine-score.json" > "$OUT/engine-score.txt"

# The same questions through the CLI (copies of the corpora under $OUT/work).
rm -rf "$OUT/work"
python3 "$EVAL/canopy_graph_cli.py" --canopy "$CANOPY_BIN" --corpora "$DATA/corpora" \
  --gold "$GOLD" --targets "$TARGETS" --work "$OUT/work" --out "$OUT/cli-pred.jsonl" \
  --corpus "$ONLY" --timing "$OUT/cli-timing.json" >&2
python3 "$EVAL/score_graph.py" score --gold "$GOLD" --targets "$TARGETS" --corpora "$ONLY" \
  --pred "$OUT/cli-pred.jsonl" --json "$OUT/cli-score.json" > "$OUT/cli-score.txt"
rm -rf "$OUT/work"

python3 - "$OUT/engine-score.json" "$OUT/cli-score.json" <<'EOF'
import json, sys
engine, cli = (json.load(open(p))["corpora"] for p in sys.argv[1:3])
tasks = ("callers", "callsites", "callees", "references", "definition")
print(f"{'corpus':10} {'task':10} {'engine P':>8} {'cli P':>6} {'dP':>6}   {'engine R':>8} {'cli R':>6} {'dR':>6}")
for c in engine:
    for t in tasks:
        e, k = engine[c].get(t), cli.get(c, {}).get(t)
        if not e or not k:
            continue
        print(f"{c:10} {t:10} {e['P']:8.3f} {k['P']:6.3f} {k['P'] - e['P']:+6.3f}   "
              f"{e['R']:8.3f} {k['R']:6.3f} {k['R'] - e['R']:+6.3f}")
EOF
