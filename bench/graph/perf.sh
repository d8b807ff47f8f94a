#!/usr/bin/env bash
# Code-graph performance goals of issue 12 (resolution's share of a cold
# index, one-line-edit re-index, callers/hotspots latency, index size).
#
# Usage (the exact command of the published numbers):
#   bash bench/graph/perf.sh --runs 5 --edits 6 --rounds 30 --perf --out /tmp/graph_perf_report.md
# Any option after the script's name goes to bench/graph/perf.py (--help there).
#
# What it does:
#  1. Builds, from `git archive $REV` (default HEAD: committed code only, so
#     edits in progress in the work tree are never measured) under $WORK
#     (default /tmp/canopy-graph-bench), with its own target directory
#     ($WORK/target, seeded from ./target/profiling when absent so the
#     dependencies are not compiled again):
#       $WORK/bin/canopy          `canopy`, profile `profiling` (release code
#                                 with symbols, so `--perf` can name frames)
#       $WORK/bin/graph_perf      the graph_perf example (copied from the work
#                                 tree when $REV does not have it yet)
#       $WORK/bin/canopy-nofacts  the same commit with graph facts extraction
#                                 turned off (one line of lang/extract.rs), the
#                                 "index without the graph" comparison binary
#  2. Fetches the corpora: bench/corpora.sh django tokio synth.
#  3. Runs bench/graph/perf.py on copies of them under $WORK/corpora; the
#     markdown report goes to --out (default /tmp/graph_perf_report.md), the
#     raw numbers to $WORK/results.json.
# Environment: WORK, REV, BUILD_ONLY=1 (stop after step 1).
# Needs: cargo, git, python3; rg (reference timings) and perf (--perf) are optional.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
WORK=${WORK:-/tmp/canopy-graph-bench}
REV=${REV:-HEAD}
export CARGO_TARGET_DIR=$WORK/target
log() { echo "graph-perf.sh: $*" >&2; }

mkdir -p "$WORK/bin" "$WORK/src"
if [ ! -d "$CARGO_TARGET_DIR/profiling" ] && [ -d "$ROOT/target/profiling" ]; then
  log "seeding $CARGO_TARGET_DIR from $ROOT/target/profiling"
  mkdir -p "$CARGO_TARGET_DIR" && cp -a "$ROOT/target/profiling" "$CARGO_TARGET_DIR/"
fi

# Extracts $REV into $1; touches every file so cargo, whose freshness check
# compares modification times, rebuilds it even if another tree was built in
# the same target directory.
extract() {
  rm -rf "$1" && mkdir -p "$1"
  git -C "$ROOT" archive "$REV" | tar -x -C "$1"
  local ex=crates/canopy-core/examples/graph_perf.rs
  [ -f "$1/$ex" ] || cp "$ROOT/$ex" "$1/$ex"
  find "$1" -type f -exec touch {} +
  STAMP="$1/Cargo.toml"
}

# Fails unless $1 was written after the sources were extracted.
fresh() {
  [ "$1" -nt "$STAMP" ] || { log "$1 was not rebuilt from $REV"; exit 1; }
}

log "building $(git -C "$ROOT" rev-parse --short "$REV") (profile profiling)"
extract "$WORK/src/head"
# Two commands: `--example` would apply to canopy-cli too and build no binary there.
(cd "$WORK/src/head" && nice -n 10 cargo build --profile profiling --quiet -p canopy-cli)
fresh "$CARGO_TARGET_DIR/profiling/canopy"
cp "$CARGO_TARGET_DIR/profiling/canopy" "$WORK/bin/canopy"
(cd "$WORK/src/head" && nice -n 10 cargo build --profile profiling --quiet -p canopy-core --example graph_perf)
fresh "$CARGO_TARGET_DIR/profiling/examples/graph_perf"
cp "$CARGO_TARGET_DIR/profiling/examples/graph_perf" "$WORK/bin/graph_perf"

log "building the comparison binary without graph facts"
extract "$WORK/src/nofacts"
# `index` parses each file with `graph::facts::parse_with_facts`; the
# comparison parses with `lang::parse_file` alone (no facts, nothing to resolve).
INDEX_RS="$WORK/src/nofacts/crates/canopy-core/src/index.rs"
LINE='crate::graph::facts::parse_with_facts(&candidate.path, &bytes)'
grep -qF "$LINE" "$INDEX_RS" || { log "cannot find '$LINE' in index.rs: update the patch"; exit 1; }
sed -i "s|$LINE|(crate::lang::parse_file(\&candidate.path, \&bytes), None) /* graph-perf: no graph facts */|" "$INDEX_RS"
(cd "$WORK/src/nofacts" && nice -n 10 cargo build --profile profiling --quiet -p canopy-cli)
fresh "$CARGO_TARGET_DIR/profiling/canopy"
cp "$CARGO_TARGET_DIR/profiling/canopy" "$WORK/bin/canopy-nofacts"
cmp -s "$WORK/bin/canopy" "$WORK/bin/canopy-nofacts" && { log "comparison binary is identical: not rebuilt"; exit 1; }
[ "${BUILD_ONLY:-0}" = 1 ] && exit 0

bash "$ROOT/bench/corpora.sh" django tokio synth >/dev/null
exec python3 "$ROOT/bench/graph/perf.py" --bin "$WORK/bin/canopy" --graph-perf "$WORK/bin/graph_perf" \
  --baseline-bin "$WORK/bin/canopy-nofacts" --work "$WORK/corpora" "$@"
