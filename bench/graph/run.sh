#!/usr/bin/env bash
# Runs Canopy's graph on the four oracle corpora and scores it against the gold.
#   bash bench/graph/run.sh [DATA]   (DATA defaults to /work/graph-data)
# Needs the corpora: CORPORA_ONLY=1 bash /work/shared/eval/graph/build_oracle.sh "$DATA"
set -euo pipefail
DATA=${1:-/work/graph-data}
EVAL=${EVAL:-/work/shared/eval/graph}
OUT=${OUT:-$DATA/canopy}
mkdir -p "$OUT"
cd "$(dirname "$0")/../.."
cargo build --release -q -p canopy-core --example graph_eval
BIN=target/release/examples/graph_eval
: > "$OUT/pred.jsonl"
for c in click mobx toml_edit gods; do
  rm -rf "$DATA/corpora/$c/.canopy"
  "$BIN" "$DATA/corpora/$c" "$c" | python3 bench/graph/filter.py "$EVAL/gold" >> "$OUT/pred.jsonl"
done
python3 "$EVAL/score_graph.py" score --gold "$EVAL/gold" --targets "$EVAL/targets.jsonl" \
  --pred "$OUT/pred.jsonl" --json "$OUT/score.json"
