#!/usr/bin/env bash
# Where does a full `canopy index` spend its time, and where do the index bytes go?
#
# Usage: bench/profile.sh [--glob G] REPO
#
# 1. Fresh index under `perf record --call-graph dwarf`; prints the inclusive
#    share of all samples (every thread) for the pipeline's main frames, and
#    each thread's busy time. Needs perf (`apt-get install -y linux-perf`)
#    and a kernel that allows it (perf_event_paranoid <= 2 for own processes).
# 2. Fixed start-up cost: a fresh index of a one-file repository (hyperfine
#    when installed, else 10 timed runs).
# 3. Index size by table and index (SQLite's dbstat; needs the sqlite3 CLI,
#    `apt-get install -y sqlite3`), plus free pages.
#
# Environment: CANOPY_BIN as for bench/index.sh (default: build the
# `profiling` profile: release code with symbols and line tables, which
# `perf` needs and the stripped `release` binary lacks).
set -euo pipefail
BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$BENCH_DIR/.." && pwd)
GLOB=""
REPO=""
while [ $# -gt 0 ]; do
  case "$1" in
    --glob) GLOB=$2; shift 2 ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) REPO=$1; shift ;;
  esac
done
[ -d "$REPO" ] || { echo "usage: bench/profile.sh [--glob G] REPO" >&2; exit 2; }
REPO=$(cd "$REPO" && pwd -P)
if [ -z "${CANOPY_BIN:-}" ]; then
  (cd "$ROOT" && cargo build --profile profiling --quiet -p canopy-cli) >&2
  CANOPY_BIN="${CARGO_TARGET_DIR:-$ROOT/target}/profiling/canopy"
fi
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
ARGS=(index "$REPO" --quiet)
[ -n "$GLOB" ] && ARGS+=(--glob "$GLOB")

echo "## CPU profile: fresh index of $REPO${GLOB:+ (glob $GLOB)}"
if command -v perf >/dev/null && perf record -o "$TMP/probe.data" true >/dev/null 2>&1; then
  rm -rf "$REPO/.canopy"
  perf record -q -F 1999 --call-graph dwarf,16384 -o "$TMP/perf.data" "$CANOPY_BIN" "${ARGS[@]}" >/dev/null 2>&1
  perf report -i "$TMP/perf.data" --children --sort sym --stdio -g none 2>/dev/null \
    | grep '%' >"$TMP/children.txt"
  total=$(perf script -i "$TMP/perf.data" -F tid 2>/dev/null | wc -l)
  echo "samples: $total at 1999 Hz (≈ $(awk -v n="$total" 'BEGIN { printf "%.2f", n / 1999 }') CPU-seconds)"
  echo
  echo "| frame (inclusive, share of all samples) | what it is | % |"
  echo "|---|---|---:|"
  while IFS='|' read -r pat label; do
    pct=$( (grep -F -- "$pat" "$TMP/children.txt" || true) | head -1 | awk '{print $1}')
    echo "| \`$pat\` | $label | ${pct:-0%} |"
  done <<'EOF'
canopy_syntax::lang::extract::parse_file|worker: parse + extract one file (all below)
ts_parser_parse_with_options|  tree-sitter parsing
ts_query_cursor_next_match|  tree-sitter query matching (extraction)
canopy_syntax::tokens::count|  BPE token counting (o200k)
canopy_syntax::text::fts_document|  building FTS documents
canopy_store::store::write::<impl canopy_store::store::Store>::write_batch|writer thread: SQLite inserts (all below)
fts5UpdateMethod|  FTS5 inserts
sqlite3BtreeInsert|  B-tree inserts (tables + indexes)
<std::sys::sync::once::futex::Once>::call|one-time init (BPE tables, grammars/queries)
canopy_core::discover::discover|file discovery (git ls-files / walk + stat)
EOF
  echo
  # A second, light run (no call graphs) for a timeline that perf barely slows.
  rm -rf "$REPO/.canopy"
  perf record -q -F 999 -o "$TMP/perf-light.data" "$CANOPY_BIN" "${ARGS[@]}" >/dev/null 2>&1
  echo "Busy time per thread, from a second run without call graphs (samples ÷ 999 Hz;"
  echo "first and last sample in ms from the first sample of the run):"
  perf script -i "$TMP/perf-light.data" -F tid,time 2>/dev/null | awk '
    { t = $2; sub(":", "", t); if (start == "") start = t; n[$1]++; if (!($1 in f)) f[$1] = t; l[$1] = t }
    END { for (k in n) printf "  tid %s: %.0f ms busy, active %.0f..%.0f ms\n", k, 1000 * n[k] / 999, 1000 * (f[k] - start), 1000 * (l[k] - start) }' | sort -t: -k2 -rn
else
  echo "perf unavailable (apt-get install -y linux-perf; or a kernel that forbids it): skipped"
fi

echo
echo "## Fixed start-up cost: fresh index of a one-file repository"
ONE="$TMP/one"
mkdir -p "$ONE" && echo 'fn main() { println!("hi"); }' >"$ONE/main.rs"
if command -v hyperfine >/dev/null; then
  hyperfine --style basic --warmup 2 --runs 20 --prepare "rm -rf $ONE/.canopy" \
    "$CANOPY_BIN index $ONE --quiet" 2>/dev/null | grep -E 'Time|Range'
else
  for i in $(seq 10); do
    rm -rf "$ONE/.canopy"; t0=$(date +%s%N); "$CANOPY_BIN" index "$ONE" --quiet; t1=$(date +%s%N)
    echo $(( (t1 - t0) / 1000000 ))
  done | sort -n | awk '{a[NR]=$1} END {print "  median " a[int((NR+1)/2)] " ms over " NR " runs"}'
fi

echo
echo "## Index size by table / index"
rm -rf "$REPO/.canopy"
"$CANOPY_BIN" "${ARGS[@]}" >/dev/null
DB="$REPO/.canopy/index.db"
if command -v sqlite3 >/dev/null; then
  src=$("$CANOPY_BIN" status --json "$REPO" | grep -oE '"source_bytes"[[:space:]]*:[[:space:]]*[0-9]+' | grep -oE '[0-9]+$')
  echo "database file: $(stat -c %s "$DB") bytes; source: $src bytes"
  echo
  echo "| table or index | bytes | % of file | bytes ÷ source |"
  echo "|---|---:|---:|---:|"
  sqlite3 -separator '|' "$DB" "
    SELECT name, SUM(pgsize) FROM dbstat GROUP BY name
    UNION ALL SELECT '(free pages)', (SELECT freelist_count FROM pragma_freelist_count) * (SELECT page_size FROM pragma_page_size)
    ORDER BY 2 DESC;" | awk -F'|' -v f="$(stat -c %s "$DB")" -v s="$src" \
      '{ printf "| %s | %d | %.1f | %.2f |\n", $1, $2, 100 * $2 / f, $2 / s }'
  echo
  echo "Grouped (table + its indexes), bytes ÷ source:"
  sqlite3 -separator '|' "$DB" "
    SELECT CASE WHEN name LIKE 'fts%' THEN 'fts' WHEN name IN ('file_refs', 'ref_postings') THEN 'refs'
                WHEN name LIKE 'nodes%' THEN 'nodes' ELSE 'other' END AS g, SUM(pgsize)
    FROM dbstat GROUP BY g
    UNION ALL SELECT 'free pages', (SELECT freelist_count FROM pragma_freelist_count) * (SELECT page_size FROM pragma_page_size)
    ORDER BY 2 DESC;" | awk -F'|' -v s="$src" '{ printf "  %-10s %6.2f\n", $1, $2 / s }'
  echo
  sqlite3 "$DB" "SELECT 'rows: files ' || (SELECT count(*) FROM files) || ', nodes ' || (SELECT count(*) FROM nodes) || ', refs ' || (SELECT sum(name_uses) FROM ref_postings);"
else
  echo "sqlite3 CLI not found (apt-get install -y sqlite3): skipped"
fi
