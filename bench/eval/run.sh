#!/usr/bin/env bash
# Evidence-pack quality harness: Canopy vs BM25 on SWE-bench dev instances.
#
# usage: bench/eval/run.sh [options]
#   --name NAME           run name (default: canopy-<date>); outputs go to $EVAL_OUT/NAME/
#   --subset N            deterministic stratified subset of about N instances (make_subset.py)
#   --first N             all instances, the --subset-style stratified N first (partial runs stay balanced)
#   --repo OWNER/NAME     only this repo (repeatable)
#   --limit N             only the first N selected instances
#   --instances FILE      start from this instances file (default: $EVAL_SHARED/instances_dev.jsonl)
#   --max-handles N       canopy pack --max-handles (default: canopy's, 8)
#   --max-per-file N      canopy pack --max-per-file (default: canopy's, 2)
#   --plan                canopy pack --plan
#   --variant NAME=OPTS   extra pack configurations on the same index (repeatable), scored as canopy_NAME;
#                         OPTS: comma list of mh=N, mpf=N, plan, glob=PATTERN, notests (see pack_adapter.py)
#   --variants-file FILE  one NAME=OPTS per line (e.g. bench/eval/variants.txt), same as repeating --variant
#   --no-index            skip the explicit `canopy index` (pack auto-indexes, possibly partially)
#   --bin PATH            canopy binary (default: /work/main/target/release/canopy, copied into the run dir
#                         first so a concurrent rebuild cannot change it mid-run)
#   --keep                keep materialised trees and their .canopy indexes in $EVAL_WORK/keep-<binary sha1>/:
#                         a later --keep run with the same binary skips materialising and re-indexes
#                         incrementally, so pack-only experiments take ~1 s per instance (~40 MB per tree)
#   --baselines           also run BM25 (--tok code and --tok lucene, file level) on the same instances
#   --bm25-function       also run BM25 function-level (--unit function --tok code)
#   --no-canopy           skip the canopy run (e.g. baselines only)
#   --score-only          only (re)score existing outputs in the run dir
# env:
#   MIRROR_ROOT   (required) folder with <subdir>/repo bare git mirrors (see repos.json)
#   EVAL_SHARED   the shared eval scripts (default /work/shared/eval)
#   EVAL_OUT      where run dirs go (default /work/eval-data/runs)
#   EVAL_WORK     scratch for materialised trees (default /work/eval-data/trees); each tree is deleted
#                 right after its instance (run_engine.py without --keep)
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
MAIN="$(cd "$HERE/../.." && pwd)"
EVAL_SHARED="${EVAL_SHARED:-/work/shared/eval}"
EVAL_OUT="${EVAL_OUT:-/work/eval-data/runs}"
EVAL_WORK="${EVAL_WORK:-/work/eval-data/trees}"
: "${MIRROR_ROOT:?set MIRROR_ROOT to the folder holding <subdir>/repo mirrors (see repos.json)}"
export MIRROR_ROOT

NAME="canopy-$(date +%Y%m%d-%H%M%S)"; SUBSET=0; FIRST=0; LIMIT=0; INSTANCES="$EVAL_SHARED/instances_dev.jsonl"
REPOS=(); PACK_OPTS=(); BIN="$MAIN/target/release/canopy"; BASELINES=0; BM25F=0; CANOPY=1; SCORE_ONLY=0; KEEP=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --name) NAME="$2"; shift 2;;
    --subset) SUBSET="$2"; shift 2;;
    --first) FIRST="$2"; shift 2;;
    --repo) REPOS+=(--repo "$2"); shift 2;;
    --limit) LIMIT="$2"; shift 2;;
    --instances) INSTANCES="$2"; shift 2;;
    --max-handles) PACK_OPTS+=(--max-handles "$2"); shift 2;;
    --max-per-file) PACK_OPTS+=(--max-per-file "$2"); shift 2;;
    --plan) PACK_OPTS+=(--plan); shift;;
    --no-index) PACK_OPTS+=(--no-index); shift;;
    --variant) PACK_OPTS+=(--variant "$2"); shift 2;;
    --variants-file) while IFS= read -r v; do [[ -n "$v" && "$v" != \#* ]] && PACK_OPTS+=(--variant "$v"); done < "$2"; shift 2;;
    --bin) BIN="$2"; shift 2;;
    --keep) KEEP=1; shift;;
    --baselines) BASELINES=1; shift;;
    --bm25-function) BM25F=1; shift;;
    --no-canopy) CANOPY=0; shift;;
    --score-only) SCORE_ONLY=1; CANOPY=0; shift;;
    -h|--help) sed -n 2,35p "$0"; exit 0;;
    *) echo "unknown option: $1" >&2; exit 2;;
  esac
done

OUT="$EVAL_OUT/$NAME"; mkdir -p "$OUT" "$EVAL_WORK"
INST="$OUT/instances.jsonl"
if [[ $SCORE_ONLY -eq 0 ]]; then
  python3 "$HERE/make_subset.py" "$INST" --instances "$INSTANCES" --n "$SUBSET" --first "$FIRST" --limit "$LIMIT" "${REPOS[@]}"
fi
N=$(wc -l < "$INST")

if [[ $CANOPY -eq 1 ]]; then
  [[ -x "$BIN" ]] || { echo "no canopy binary at $BIN (cargo build --release -p canopy-cli)" >&2; exit 1; }
  cp "$BIN" "$OUT/canopy"
  {
    echo "binary: $BIN ($("$OUT/canopy" --version))"
    [[ "$BIN" != "$MAIN/target/release/canopy" ]] && echo "source: binary given with --bin (see its run's meta.txt)" || echo "source: $(git -C "$MAIN" rev-parse --short HEAD 2>/dev/null || echo '?')$( [[ -n "$(git -C "$MAIN" status --porcelain -- crates 2>/dev/null)" ]] && echo ' + uncommitted changes in crates/')"
    echo "pack options: ${PACK_OPTS[*]:-(defaults)}"
    echo "started: $(date -u +%FT%TZ)  instances: $N"
  } > "$OUT/meta.txt"
  rm -f "$OUT/canopy.side.jsonl" "$OUT"/canopy_*.preds.jsonl "$OUT"/canopy_*.side.jsonl
  # run_engine substitutes {repo} {query_file} {instance_id}; trees go to EVAL_WORK and are removed after use.
  CMD="python3 $(printf %q "$HERE/pack_adapter.py") --bin $(printf %q "$OUT/canopy") --repo {repo} --query-file {query_file} --instance-id {instance_id} --side $(printf %q "$OUT/canopy.side.jsonl")"
  for o in "${PACK_OPTS[@]}"; do CMD+=" $(printf %q "$o")"; done
  T0=$(date +%s)
  # kept trees are per binary: two binaries (index formats) sharing one tree would re-index it under each other
  if [[ $KEEP -eq 1 ]]; then WORK=(--work "$EVAL_WORK/keep-$(sha1sum "$OUT/canopy" | cut -c1-12)" --keep); else WORK=(--work "$EVAL_WORK/$NAME"); fi
  python3 "$EVAL_SHARED/run_engine.py" "$OUT/canopy.preds.jsonl" --instances "$INST" "${WORK[@]}" \
      --cmd "$CMD" 2> "$OUT/canopy.log"
  T1=$(date +%s)
  rmdir "$EVAL_WORK/$NAME" 2>/dev/null || true
  echo "finished: $(date -u +%FT%TZ)  wall: $((T1 - T0)) s for $N instances (incl. materialising trees)" >> "$OUT/meta.txt"
fi

if [[ $BASELINES -eq 1 ]]; then
  for tok in code lucene; do
    python3 "$HERE/bm25_run.py" "$OUT/bm25_$tok.preds.jsonl" --instances "$INST" --tok "$tok" 2> "$OUT/bm25_$tok.log"
  done
fi
if [[ $BM25F -eq 1 ]]; then
  python3 "$HERE/bm25_run.py" "$OUT/bm25fn_code.preds.jsonl" --instances "$INST" --unit function --tok code 2> "$OUT/bm25fn_code.log"
fi

# score everything present in the run dir, on exactly the instances of this run
for p in "$OUT"/*.preds.jsonl; do
  [[ -e "$p" ]] || continue
  s="${p%.preds.jsonl}"
  python3 "$EVAL_SHARED/score.py" "$p" --instances "$INST" --per-repo > "$s.score.txt"
  python3 "$EVAL_SHARED/score.py" "$p" --instances "$INST" --json > "$s.score.json"
done
if [[ -e "$OUT/canopy.side.jsonl" ]]; then
  python3 "$HERE/calibration.py" "$OUT/canopy.side.jsonl" --instances "$INST" --preds "$OUT/canopy.preds.jsonl" > "$OUT/calibration.txt"
fi
python3 "$HERE/summarize.py" "$OUT" | tee "$OUT/summary.md"
