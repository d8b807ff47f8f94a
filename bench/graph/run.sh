#!/usr/bin/env bash
# Runs Canopy's graph on the four oracle corpora and scores it against the gold.
#   bash bench/graph/run.sh [DATA]   (DATA defaults to /work/graph-data)
#   BIN=target/debug/examples/graph_eval bash bench/graph/run.sh   (skip the release build)
# Needs the corpora: CORPORA_ONLY=1 bash /work/shared/eval/graph/build_oracle.sh "$DATA"
#
# Held-out corpora (not the ones the rules were written against; the oracle
# and its gold are built here, as the eval folder's README describes):
#   SKIP_GO=1 bash /work/shared/eval/graph/build_oracle.sh /tmp/heldout bench/graph/heldout.json
#   GOLD=/tmp/heldout/gold TARGETS=/tmp/heldout/targets.jsonl CORPORA="itsdangerous tomli immer semver" bash bench/graph/run.sh /tmp/heldout
set -euo pipefail
DATA=${1:-/work/graph-data}
EVAL=${EVAL:-/work/shared/eval/graph}
GOLD=${GOLD:-$EVAL/gold}
TARGETS=${TARGETS:-$EVAL/targets.jsonl}
CORPORA=${CORPORA:-click mobx toml_edit gods}
OUT=${OUT:-$DATA/canopy}
mkdir -p "$OUT"
cd "$(dirname "$0")/../.."
# BIN=target/debug/examples/graph_eval uses a prebuilt binary (the dev profile
# is optimised) instead of a release build on a loaded machine.
if [ -z "${BIN:-}" ]; then
  cargo build --release -q -p canopy-core --example graph_eval
  BIN=target/release/examples/graph_eval
fi
: > "$OUT/pred.jsonl"
for c in $CORPORA; do
  rm -rf "$DATA/corpora/$c/.canopy"
  "$BIN" "$DATA/corpora/$c" "$c" | python3 bench/graph/filter.py "$GOLD" >> "$OUT/pred.jsonl"
done
python3 "$EVAL/score_graph.py" score --gold "$GOLD" --targets "$TARGETS" \
  --pred "$OUT/pred.jsonl" --json "$OUT/score.json"
