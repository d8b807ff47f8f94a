#!/usr/bin/env bash
# Scores a held-out graph set (or any oracle corpora) twice: the engine's own
# edges (bench/graph/run.sh with a prebuilt graph_eval) and the public CLI
# (canopy_graph_cli.py: one `canopy` process per question, --max-results
# 100000), then counts guesses and caller placement for each corpus.
#
# usage: [REPO=.] [DATA=…] [GOLD=…] [TARGETS=…] [CORPORA="a b"] [OUT=…] \
#          bash bench/graph/score_all.sh CANOPY GRAPH_EVAL LABEL
#   CANOPY      a `canopy` binary (e.g. target/debug/canopy)
#   GRAPH_EVAL  the `graph_eval` example (target/debug/examples/graph_eval)
#   LABEL       names the output folder: $OUT (default $DATA/score/LABEL)
#   DATA        the folder build_oracle.sh filled (corpora/, gold/); default /work/graph-data
#   GOLD        default $DATA/gold;  TARGETS default $DATA/targets.jsonl
#   CORPORA     the corpora to score (default: every corpus named in TARGETS)
#   REPO        the Canopy checkout whose bench/graph scripts are used (default: this one)
#   EVAL        the eval folder (default /work/shared/eval/graph)
#
# Writes under $OUT:
#   engine/pred.jsonl, engine/score.json, engine.txt   run.sh's predictions and score
#   cli/pred.jsonl, cli/score.json, cli.txt            canopy_graph_cli.py's predictions and score
#   cli/timing.json, cli/work/<corpus>/                the CLI's timing and indexed copies
#   <corpus>.edges                                     edges_dump.py --names of the CLI's index
#   <corpus>.guesses                                   how=5 count, then guesses.py's verdicts
#   <corpus>.callers_mismatch                          caller_mismatch.py on the engine's predictions
# Prints the engine and CLI score tables. Nothing here changes with the
# binaries except the answers, so two labels can be diffed file by file.
set -euo pipefail
[ $# -eq 3 ] || { sed -n '2,26p' "$0" >&2; exit 2; }
CANOPY=$(realpath "$1")
GRAPH_EVAL=$(realpath "$2")
LABEL=$3
REPO=$(realpath "${REPO:-$(dirname "$0")/../..}")
EVAL=${EVAL:-/work/shared/eval/graph}
DATA=$(realpath "${DATA:-/work/graph-data}")
GOLD=$(realpath "${GOLD:-$DATA/gold}")
TARGETS=$(realpath "${TARGETS:-$DATA/targets.jsonl}")
if [ -z "${CORPORA:-}" ]; then
  CORPORA=$(python3 -c 'import json, sys
seen = []
for l in open(sys.argv[1]):
    c = json.loads(l)["corpus"]
    if c not in seen:
        seen.append(c)
print(" ".join(seen))' "$TARGETS")
fi
OUT=${OUT:-$DATA/score/$LABEL}
mkdir -p "$OUT/engine" "$OUT/cli"
echo "score_all: $LABEL corpora: $CORPORA -> $OUT" >&2

# 1. The engine (graph_eval), as run.sh does it.
BIN="$GRAPH_EVAL" GOLD="$GOLD" TARGETS="$TARGETS" CORPORA="$CORPORA" OUT="$OUT/engine" EVAL="$EVAL" \
  bash "$REPO/bench/graph/run.sh" "$DATA" > /dev/null
COMMA=$(echo $CORPORA | tr ' ' ',')
# run.sh scores every corpus of TARGETS; score again over CORPORA only.
python3 "$EVAL/score_graph.py" score --gold "$GOLD" --targets "$TARGETS" --pred "$OUT/engine/pred.jsonl" \
  --corpora "$COMMA" --json "$OUT/engine/score.json" > "$OUT/engine.txt"

# 2. The public CLI, one process per question.
python3 "$EVAL/canopy_graph_cli.py" --canopy "$CANOPY" --corpora "$DATA/corpora" --gold "$GOLD" \
  --targets "$TARGETS" --work "$OUT/cli/work" --out "$OUT/cli/pred.jsonl" --corpus "$COMMA" \
  --timing "$OUT/cli/timing.json" > "$OUT/cli/run.log" 2>&1
python3 "$EVAL/score_graph.py" score --gold "$GOLD" --targets "$TARGETS" --pred "$OUT/cli/pred.jsonl" \
  --corpora "$COMMA" --json "$OUT/cli/score.json" > "$OUT/cli.txt"

# 3. Per corpus: the stored edges of the CLI's index, its guesses, and caller placement.
for c in $CORPORA; do
  python3 "$REPO/bench/graph/edges_dump.py" --names "$OUT/cli/work/$c/.canopy/index.db" > "$OUT/$c.edges"
  { echo "how=5: $(grep -c 'how=5' "$OUT/$c.edges" || true) of $(wc -l < "$OUT/$c.edges") stored edges"
    python3 "$REPO/bench/graph/guesses.py" "$GOLD/$c" "$OUT/$c.edges"; } > "$OUT/$c.guesses"
  EVAL="$EVAL" python3 "$REPO/bench/graph/caller_mismatch.py" "$GOLD" "$TARGETS" "$OUT/engine/pred.jsonl" "$c" \
    > "$OUT/$c.callers_mismatch"
done

echo "== engine ($GRAPH_EVAL)"; cat "$OUT/engine.txt"
echo "== CLI ($CANOPY)"; cat "$OUT/cli.txt"
