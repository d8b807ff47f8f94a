#!/usr/bin/env bash
# Benchmarks `canopy index` on one repository and prints a markdown table row.
#
# Usage: bench/index.sh [options] REPO
#
# Measures, in one run:
#   - full index (REPO/.canopy deleted first), best (minimum) of --full-runs
#     runs: wall time, files/s, MB/s, MB/s per core (÷ nproc), CPU use
#     ((user+sys)/wall of that run); peak RSS is the maximum over the runs
#   - index size ÷ source size (canopy status --json: index_size_bytes / source_bytes)
#   - no-change re-index (nothing modified), median of --runs runs (after one warm-up)
#   - ripgrep over the same repository for reference (`rg -c --no-messages WORD`,
#     which honours .gitignore and skips hidden and binary files as canopy does),
#     median of --runs runs, and the ratio canopy full index ÷ rg
# Page cache is warm for every measurement (rg runs first and reads every file).
#
# Options:
#   --glob G          index only files matching G (passed to `canopy index --glob`,
#                     and as `-g G` to rg)
#   --name NAME       label of the table row (default: basename of REPO)
#   --runs N          runs for the no-change re-index and rg medians (default 5)
#   --full-runs N     full index runs (default 5; best and median time, max RSS)
#   --rg-pattern P    pattern for the rg reference scan (default: a word that
#                     rarely matches, so rg reads every file in full)
#   --header          print the markdown table header before the row
#   --details         also print every raw measurement (key: value) on stderr
#   --json FILE       also append one JSON object per run to FILE
#   --idle-wait S     before each timed step, wait up to S seconds (default 300)
#                     until the machine is idle (other processes use < 10% of
#                     the CPUs over 1 s); 0 disables. Shared machines are noisy.
#
# Environment:
#   CANOPY_BIN   use this canopy binary instead of building one; otherwise
#                `cargo build --release -p canopy-cli` is run in this checkout
#   BENCH_NO_HYPERFINE=1, BENCH_NO_GNU_TIME=1, BENCH_NO_RG=1   behave as if that
#                tool were missing (to check the fallbacks)
#
# Tools: GNU time (/usr/bin/time, `apt-get install -y time`) for peak RSS
# (falls back to polling VmHWM in /proc); ripgrep (`apt-get install -y ripgrep`)
# for the reference column (shown as n/a without it); hyperfine
# (`apt-get install -y hyperfine`) for the repeated timings when present,
# otherwise a `date +%s%N` loop.
set -euo pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$BENCH_DIR/.." && pwd)

GLOB=""
NAME=""
RUNS=5
FULL_RUNS=5
RG_PATTERN="canopy_bench_needle_zq"
HEADER=0
DETAILS=0
JSON_OUT=""
IDLE_WAIT=300
REPO=""
while [ $# -gt 0 ]; do
  case "$1" in
    --glob) GLOB=$2; shift 2 ;;
    --name) NAME=$2; shift 2 ;;
    --runs) RUNS=$2; shift 2 ;;
    --full-runs) FULL_RUNS=$2; shift 2 ;;
    --rg-pattern) RG_PATTERN=$2; shift 2 ;;
    --header) HEADER=1; shift ;;
    --details) DETAILS=1; shift ;;
    --json) JSON_OUT=$2; shift 2 ;;
    --idle-wait) IDLE_WAIT=$2; shift 2 ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    -*) echo "index.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) [ -z "$REPO" ] || { echo "index.sh: one REPO only" >&2; exit 2; }; REPO=$1; shift ;;
  esac
done
[ -n "$REPO" ] || { echo "usage: bench/index.sh [options] REPO (see --help)" >&2; exit 2; }
[ -d "$REPO" ] || { echo "index.sh: $REPO is not a directory" >&2; exit 2; }
REPO=$(cd "$REPO" && pwd -P)
NAME=${NAME:-$(basename "$REPO")}

log() { echo "index.sh: $*" >&2; }

# ---------------------------------------------------------------- the binary
if [ -n "${CANOPY_BIN:-}" ]; then
  BIN=$CANOPY_BIN
else
  command -v cargo >/dev/null || { log "cargo not found; install Rust or set CANOPY_BIN"; exit 1; }
  log "building release binary (cargo build --release -p canopy-cli)"
  (cd "$ROOT" && cargo build --release --quiet -p canopy-cli) >&2
  BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/canopy"
fi
[ -x "$BIN" ] || { log "no executable canopy at $BIN"; exit 1; }
# Absolute: timed commands run from inside the repository.
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")

CORES=$(nproc)
HAVE_TIME=0; [ -z "${BENCH_NO_GNU_TIME:-}" ] && [ -x /usr/bin/time ] && /usr/bin/time -v true 2>/dev/null && HAVE_TIME=1
HAVE_RG=0; [ -z "${BENCH_NO_RG:-}" ] && command -v rg >/dev/null && HAVE_RG=1
HAVE_HF=0; [ -z "${BENCH_NO_HYPERFINE:-}" ] && command -v hyperfine >/dev/null && HAVE_HF=1
[ $HAVE_TIME = 1 ] || log "GNU time not found (apt-get install -y time): peak RSS is sampled from /proc/PID/status VmHWM"
[ $HAVE_RG = 1 ] || log "ripgrep not found (apt-get install -y ripgrep): the rg columns will read n/a"

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# Numeric value of a top-level key in a flat-ish JSON document.
jnum() { grep -oE "\"$1\"[[:space:]]*:[[:space:]]*-?[0-9.eE+-]+" "$2" | head -1 | sed -E 's/.*:[[:space:]]*//'; }
jstr() { grep -oE "\"$1\"[[:space:]]*:[[:space:]]*\"[^\"]*\"" "$2" | head -1 | sed -E 's/.*:[[:space:]]*"//; s/"$//'; }
now_ns() { date +%s%N; }
median() { sort -n | awk '{a[NR]=$1} END {if (NR==0) {print "nan"} else if (NR%2) {print a[(NR+1)/2]} else {print (a[NR/2]+a[NR/2+1])/2}}'; }
fmt() { awk -v x="$1" -v p="${2:-1}" -v u="${3:-}" 'BEGIN { if (x == "" || x == "nan") print "n/a"; else printf "%.*f%s", p, x, u }'; }

# Busy share (percent) of all CPUs over $1 seconds, from /proc/stat.
cpu_busy() {
  local a b
  a=$(awk '/^cpu / {print $2+$3+$4+$7+$8, $5+$6}' /proc/stat)
  sleep "$1"
  b=$(awk '/^cpu / {print $2+$3+$4+$7+$8, $5+$6}' /proc/stat)
  echo "$a $b" | awk '{busy = $3 - $1; idle = $4 - $2; t = busy + idle; print (t > 0) ? int(100 * busy / t) : 0}'
}
# Waits (up to IDLE_WAIT s) until other processes leave the CPUs idle.
WAITED_OUT=0
wait_idle() {
  [ "$IDLE_WAIT" -gt 0 ] 2>/dev/null || return 0
  local start=$SECONDS busy
  while :; do
    busy=$(cpu_busy 1)
    [ "$busy" -lt 10 ] && return 0
    if [ $((SECONDS - start)) -ge "$IDLE_WAIT" ]; then
      log "WARNING: machine still ${busy}% busy after ${IDLE_WAIT}s; measuring anyway"
      WAITED_OUT=$((WAITED_OUT + 1)); return 0
    fi
    sleep 2
  done
}

INDEX_ARGS=(index "$REPO" --json --quiet)
[ -n "$GLOB" ] && INDEX_ARGS+=(--glob "$GLOB")
RG_ARGS=(-c --no-messages "$RG_PATTERN")
[ -n "$GLOB" ] && RG_ARGS=(-g "$GLOB" "${RG_ARGS[@]}")

# Runs "$@" $1-times (after --warmup) and prints the median wall time in ms.
# Usage: time_median RUNS WARMUP DIR cmd...
time_median() {
  local runs=$1 warmup=$2 dir=$3; shift 3
  if [ $HAVE_HF = 1 ]; then
    (cd "$dir" && hyperfine --style none --warmup "$warmup" --runs "$runs" -S none -i \
      --export-json "$TMP/hf.json" -- "$(printf '%q ' "$@")") >/dev/null 2>&1 || {
      log "hyperfine failed for: $*"; echo nan; return; }
    awk -v s="$(jnum median "$TMP/hf.json")" 'BEGIN { printf "%.2f\n", s * 1000 }'
  else
    local i t0 t1
    for ((i = 0; i < warmup; i++)); do (cd "$dir" && "$@") >/dev/null 2>&1 || true; done
    for ((i = 0; i < runs; i++)); do
      t0=$(now_ns); (cd "$dir" && "$@") >/dev/null 2>&1 || true; t1=$(now_ns)
      echo $(( (t1 - t0) / 1000 ))
    done | median | awk '{ printf "%.2f\n", $1 / 1000 }'
  fi
}

# ------------------------------------------------------------ rg (warms cache)
RG_MS=nan
if [ $HAVE_RG = 1 ]; then
  log "rg reference scan ($RUNS runs)"
  wait_idle
  RG_MS=$(time_median "$RUNS" 2 "$REPO" rg "${RG_ARGS[@]}")
fi

# ----------------------------------------------------------------- full index
# One run: prints "wall_ms rss_kb cpu_pct", leaves the report in $TMP/report.json.
full_run() {
  rm -rf "$REPO/.canopy"
  local t0 t1 rss cpu
  if [ $HAVE_TIME = 1 ]; then
    t0=$(now_ns)
    /usr/bin/time -v -o "$TMP/time.txt" "$BIN" "${INDEX_ARGS[@]}" >"$TMP/report.json" 2>"$TMP/stderr.txt" || {
      log "canopy index failed:"; cat "$TMP/stderr.txt" >&2; exit 1; }
    t1=$(now_ns)
    rss=$(sed -nE 's/.*Maximum resident set size \(kbytes\): ([0-9]+).*/\1/p' "$TMP/time.txt")
    cpu=$(awk -F': ' '/User time|System time/ {s += $2} END {printf "%.2f", s}' "$TMP/time.txt")
  else
    t0=$(now_ns)
    "$BIN" "${INDEX_ARGS[@]}" >"$TMP/report.json" 2>"$TMP/stderr.txt" &
    local pid=$! hwm=0 v
    while kill -0 "$pid" 2>/dev/null; do
      v=$(sed -nE 's/^VmHWM:[[:space:]]+([0-9]+).*/\1/p' "/proc/$pid/status" 2>/dev/null || true)
      [ -n "$v" ] && [ "$v" -gt "$hwm" ] && hwm=$v
      sleep 0.005
    done
    wait "$pid" || { log "canopy index failed:"; cat "$TMP/stderr.txt" >&2; exit 1; }
    t1=$(now_ns)
    rss=$hwm; cpu=nan
  fi
  echo "$(( (t1 - t0) / 1000 )) $rss $cpu"
}
# Median and minimum of column $1 of a file.
col_median() { awk -v c="$1" '{print $c}' "$2" | grep -v nan | median; }
col_min() { awk -v c="$1" '$c != "nan" {if (m == "" || $c + 0 < m + 0) m = $c} END {print (m == "") ? "nan" : m}' "$2"; }

log "full index of $REPO ($FULL_RUNS runs)"
: >"$TMP/full.txt"
for ((i = 0; i < FULL_RUNS; i++)); do wait_idle; full_run >>"$TMP/full.txt"; done
FULL_MS=$(col_min 1 "$TMP/full.txt" | awk '{ printf "%.1f", $1 / 1000 }')
FULL_MEDIAN_MS=$(col_median 1 "$TMP/full.txt" | awk '{ printf "%.1f", $1 / 1000 }')
RSS_KB=$(awk 'BEGIN{m=0} {if ($2 > m) m = $2} END {print m}' "$TMP/full.txt")
# CPU seconds (user+sys) of the fastest run, and the share of the cores it used.
CPU_S=$(sort -n "$TMP/full.txt" | head -1 | awk '{print $3}')
CPU_PCT=$(awk -v c="$CPU_S" -v ms="$FULL_MS" 'BEGIN { print (c == "nan") ? "nan" : 100 * c / (ms / 1000) }')

FILES=$(jnum files_indexed "$TMP/report.json")
BYTES_PARSED=$(jnum bytes_parsed "$TMP/report.json")
UNITS=$(jnum units_written "$TMP/report.json")
REFS=$(jnum refs_written "$TMP/report.json")
DISCOVERY=$(jstr file_discovery "$TMP/report.json")
REPORT_MS=$(jnum duration_ms "$TMP/report.json")

"$BIN" status --json "$REPO" >"$TMP/status.json"
SOURCE_BYTES=$(jnum source_bytes "$TMP/status.json")
INDEX_BYTES=$(jnum index_size_bytes "$TMP/status.json")
STATUS_ROOT=$(jstr repo_root "$TMP/status.json")
if [ -n "$STATUS_ROOT" ] && [ "$STATUS_ROOT" != "$REPO" ]; then
  log "WARNING: canopy resolved the repository root to $STATUS_ROOT, not $REPO"
fi

# ------------------------------------------------------- no-change re-index
log "no-change re-index ($RUNS runs)"
wait_idle
REINDEX_MS=$(time_median "$RUNS" 1 "$REPO" "$BIN" "${INDEX_ARGS[@]}")
"$BIN" "${INDEX_ARGS[@]}" >"$TMP/reindex.json"
REINDEX_PARSED=$(jnum files_indexed "$TMP/reindex.json")
[ "${REINDEX_PARSED:-0}" = 0 ] || log "WARNING: the no-change re-index parsed $REINDEX_PARSED files"

# ------------------------------------------------------------------- derived
read -r MB FILES_S MB_S MB_S_CORE RATIO RG_RATIO RSS_MB < <(awk \
  -v b="$SOURCE_BYTES" -v f="$FILES" -v ms="$FULL_MS" -v c="$CORES" \
  -v ib="$INDEX_BYTES" -v rg="$RG_MS" -v rss="$RSS_KB" 'BEGIN {
    mb = b / 1e6; s = ms / 1000
    rgr = (rg == "nan" || rg + 0 == 0) ? "nan" : ms / rg
    printf "%f %f %f %f %f %s %f\n", mb, f / s, mb / s, mb / s / c, ib / b, rgr, rss / 1024 }')

ROW="| $NAME | $FILES | $(fmt "$MB" 1) | $(fmt "$FULL_MS" 0) ($(fmt "$FULL_MEDIAN_MS" 0)) | $(fmt "$FILES_S" 0) | $(fmt "$MB_S" 2) | $(fmt "$MB_S_CORE" 2) | $(fmt "$CPU_PCT" 0 %) | $(fmt "$RSS_MB" 0) | $(fmt "$RATIO" 2) | $(fmt "$REINDEX_MS" 0) | $(fmt "$RG_MS" 0) | $(fmt "$RG_RATIO" 0 ×) |"
if [ $HEADER = 1 ]; then
  echo "| corpus | files | source MB | full index ms, best (median) of $FULL_RUNS | files/s | MB/s | MB/s/core ($CORES cores) | CPU | peak RSS MiB | index ÷ source | no-change re-index ms | rg ms | full ÷ rg |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
fi
echo "$ROW"

if [ $DETAILS = 1 ]; then
  {
    echo "corpus: $NAME ($REPO${GLOB:+, glob $GLOB})"
    echo "binary: $BIN"
    echo "file_discovery: $DISCOVERY"
    echo "files_indexed: $FILES   bytes_parsed: $BYTES_PARSED   source_bytes: $SOURCE_BYTES"
    echo "units_written: $UNITS   refs_written: $REFS"
    echo "full index runs (wall_us rss_kb cpu_s):"; sed 's/^/  /' "$TMP/full.txt"
    echo "full index ms: best $FULL_MS, median $FULL_MEDIAN_MS; cpu_s of best run: $CPU_S"
    echo "source MB per CPU-second (best run): $(awk -v b="$SOURCE_BYTES" -v c="$CPU_S" 'BEGIN { print (c == "nan" || c == 0) ? "n/a" : b / 1e6 / c }')"
    echo "report duration_ms (last run): $REPORT_MS"
    echo "index_size_bytes: $INDEX_BYTES"
    echo "no-change re-index median ms: $REINDEX_MS"
    echo "rg median ms: $RG_MS (rg ${RG_ARGS[*]})"
    echo "timing: $([ $HAVE_HF = 1 ] && echo hyperfine || echo 'date +%s%N loop'); idle waits that timed out: $WAITED_OUT"
    echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
  } >&2
fi

if [ -n "$JSON_OUT" ]; then
  printf '{"corpus":"%s","repo":"%s","glob":"%s","cores":%s,"files":%s,"source_bytes":%s,"bytes_parsed":%s,"units":%s,"refs":%s,"full_index_ms":%s,"full_index_median_ms":%s,"full_runs":%s,"cpu_s":"%s","peak_rss_kb":%s,"cpu_pct":"%s","index_size_bytes":%s,"reindex_ms":"%s","rg_ms":"%s","file_discovery":"%s"}\n' \
    "$NAME" "$REPO" "$GLOB" "$CORES" "$FILES" "$SOURCE_BYTES" "$BYTES_PARSED" "$UNITS" "$REFS" \
    "$FULL_MS" "$FULL_MEDIAN_MS" "$FULL_RUNS" "$CPU_S" "$RSS_KB" "$CPU_PCT" "$INDEX_BYTES" "$REINDEX_MS" "$RG_MS" "$DISCOVERY" >>"$JSON_OUT"
fi
