#!/usr/bin/env bash
# Two builds of canopy side by side in instructions: a cold index and a fixed
# batch of queries, with a check that both sides index and answer the same.
#
# Usage: bench/moves.sh [--threads N] [--runs R] [--out DIR] A B REPO...
#
# A and B are canopy binaries, or git commits of this repository (each built
# with `cargo build --release -p canopy-cli` in a detached worktree under
# DIR, sharing one target directory, $MOVES_TARGET_DIR, default
# target/moves, so dependencies build once). Written for issue 25's "index
# time and query latency within 3%": a move (B) against its parent (A).
#
# For each repository and each side, under valgrind's cachegrind (no cache
# simulation, every thread's instructions added up, as bench/floor.sh
# --instructions): a cold `canopy index --quiet --threads N REPO` (default
# N = 1, so the work does not depend on the number of cores; REPO/.canopy is
# deleted first), then one `canopy mcp --watch false` process answering the
# batch bench/mcp_batch.py makes from A's index (symbol and text queries,
# evidence packs, callers, references for the ten most-used defined names,
# three context packs), minus the same process answering nothing (the
# handshake only: its start-up); the median of R such runs (default 5: the
# batch's count moves by up to ~1.2% between runs of one binary: which of
# tokio's blocking threads answers a call depends on timing, and the token
# counter's piece cache is per thread and the regex pool has a fast path for
# its first thread; the table shows each side's spread, (max - min) / min.
# The cold index's count moves by ~0.01%, so it is counted once). An instruction count does not depend on the
# machine's load; it is not time (confirm a change it shows with bench/ab.sh
# or CPU seconds on an idle machine).
#
# Prints a markdown table: index instructions A, B, B/A, whether the index
# rows are identical (every ordinary table's rows hashed; meta's
# last_indexed and files' indexed_at left out; FTS5 shadow tables included;
# only meaningful with one parse thread: with more, the order files are
# written in, hence every id, depends on scheduling, and one binary run twice
# differs), query instructions
# A, B, B/A, their spreads and whether the answers are byte-identical (indexed_at left out).
# DIR (default: a new temporary directory) keeps the cachegrind.out files
# (`cg_annotate DIR/index-B-REPO.cg` says where B's instructions go; commits
# are built with symbols, CARGO_PROFILE_RELEASE_STRIP=none, for the names),
# the answers, the row hashes and the batch.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

threads=1
runs=5
out=""
args=()
while [ $# -gt 0 ]; do
    case "$1" in
        --threads) threads=$2; shift 2 ;;
        --runs) runs=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        -h|--help) sed -n '2,40p' "$0"; exit 0 ;;
        *) args+=("$1"); shift ;;
    esac
done
if [ ${#args[@]} -lt 3 ]; then
    echo "usage: bench/moves.sh [--threads N] [--runs R] [--out DIR] A B REPO..." >&2
    exit 2
fi
command -v valgrind >/dev/null || { echo "valgrind is needed (apt-get install -y valgrind)" >&2; exit 1; }
out=${out:-$(mktemp -d)}
mkdir -p "$out"
out=$(cd "$out" && pwd)

# A binary as given, or a release build of a commit (printed path).
binary_of() {
    local spec=$1 hash wt
    if [ -x "$spec" ] && [ -f "$spec" ]; then
        (cd "$(dirname "$spec")" && echo "$(pwd)/$(basename "$spec")")
        return
    fi
    hash=$(git -C "$bench_root" rev-parse --short=7 "$spec^{commit}")
    if [ ! -x "$out/canopy-$hash" ]; then
        wt="$out/src-$hash"
        git -C "$bench_root" worktree add --detach "$wt" "$hash" >/dev/null 2>&1
        # Symbols kept (the code is the same as stripped) so cg_annotate names functions.
        CARGO_TARGET_DIR=${MOVES_TARGET_DIR:-$bench_root/target/moves} CARGO_PROFILE_RELEASE_STRIP=none \
            cargo build --release --locked --quiet -p canopy-cli --manifest-path "$wt/Cargo.toml" >&2
        cp "${MOVES_TARGET_DIR:-$bench_root/target/moves}/release/canopy" "$out/canopy-$hash"
        git -C "$bench_root" worktree remove --force "$wt"
    fi
    echo "$out/canopy-$hash"
}

# Whether a binary has `index --threads` (added 2026-11-26).
# (grep -c reads all of the help: -q could stop early and, under pipefail,
# fail the writer with SIGPIPE.)
has_threads() { "$1" index --help | grep -c -- '--threads' >/dev/null; }

# Runs a command under cachegrind (out file $1); prints its instruction count.
counted() {
    local cg=$1 log
    shift
    log=$(mktemp)
    valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file="$cg" --log-file="$log" "$@" >/dev/null
    awk '/I *refs:/ { gsub(",", "", $NF); print $NF }' "$log"
    rm -f "$log"
}

# The batch's instructions minus start-up's, answers written to $4.
queries() {
    local bin=$1 name=$2 side=$3 answers=$4 log0 log1 empty full
    log0=$(mktemp); log1=$(mktemp)
    python3 "$bench_root/bench/mcp_batch.py" run --empty -- \
        valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null --log-file="$log0" \
        "$bin" mcp --watch false >/dev/null 2>&1
    python3 "$bench_root/bench/mcp_batch.py" run --calls "$out/calls-$name.json" --answers "$answers" -- \
        valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file="$out/query-$side-$name.cg" --log-file="$log1" \
        "$bin" mcp --watch false >/dev/null 2>&1
    empty=$(awk '/I *refs:/ { gsub(",", "", $NF); print $NF }' "$log0")
    full=$(awk '/I *refs:/ { gsub(",", "", $NF); print $NF }' "$log1")
    rm -f "$log0" "$log1"
    echo $((full - empty))
}

# (max - min) / min of the runs' counts in file $1, as a percentage.
spread() {
    sort -n "$1" | awk 'NR == 1 { lo = $1 } { hi = $1 } END { printf "%.1f%%", 100 * (hi - lo) / lo }'
}

# One line per ordinary table: name, row count, hash of its sorted rows.
row_hashes() {
    python3 - "$1" <<'PY'
import hashlib, sqlite3, sys
db = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").fetchall():
    try:
        # Times of the run are not part of what was indexed.
        cols = [c[1] for c in db.execute(f'PRAGMA table_info("{name}")') if c[1] != "indexed_at"]
        rows = db.execute(f'SELECT {", ".join(cols) or "*"} FROM "{name}"').fetchall()
    except sqlite3.Error:
        continue  # FTS5 virtual tables (their shadow tables are hashed)
    if name == "meta":
        rows = [r for r in rows if r[0] != "last_indexed"]
    digest = hashlib.sha256("\n".join(sorted(map(repr, rows))).encode()).hexdigest()[:16]
    print(name, len(rows), digest)
PY
}

bin_a=$(binary_of "${args[0]}")
bin_b=$(binary_of "${args[1]}")
echo "A: $bin_a ($("$bin_a" --version))" >&2
echo "B: $bin_b ($("$bin_b" --version))" >&2

# Both sides parse with N threads, or, when either is older than the
# option, both with their default (one thread per core).
threads_arg=()
if has_threads "$bin_a" && has_threads "$bin_b"; then
    threads_arg=(--threads "$threads")
else
    echo "one side has no index --threads: both index with one thread per core" >&2
fi

echo "| repository | index A | index B | B/A | rows | queries A | queries B | B/A | spread A, B | answers |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for repo in "${args[@]:2}"; do
    repo=$(cd "$repo" && pwd)
    name=$(basename "$repo")
    for side in A B; do
        if [ "$side" = A ]; then bin=$bin_a; else bin=$bin_b; fi
        rm -rf "$repo/.canopy"
        counted "$out/index-$side-$name.cg" "$bin" index --quiet "${threads_arg[@]}" "$repo" > "$out/index-$side-$name.count"
        row_hashes "$repo/.canopy/index.db" > "$out/rows-$side-$name.txt"
        if [ "$side" = A ]; then
            python3 "$bench_root/bench/mcp_batch.py" calls "$repo/.canopy/index.db" "$repo" > "$out/calls-$name.json"
        fi
        for _ in $(seq "$runs"); do
            queries "$bin" "$name" "$side" "$out/answers-$side-$name.raw"
        done | sort -n > "$out/query-$side-$name.runs"
        awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }' "$out/query-$side-$name.runs" > "$out/query-$side-$name.count"
        sed -E 's/"indexed_at":"[^"]*"//g' "$out/answers-$side-$name.raw" > "$out/answers-$side-$name.txt"
    done
    rm -rf "$repo/.canopy"
    rows=$(cmp -s "$out/rows-A-$name.txt" "$out/rows-B-$name.txt" && echo same || echo DIFFER)
    answers=$(cmp -s "$out/answers-A-$name.txt" "$out/answers-B-$name.txt" && echo same || echo DIFFER)
    awk -v n="$name" -v ia="$(cat "$out/index-A-$name.count")" -v ib="$(cat "$out/index-B-$name.count")" \
        -v qa="$(cat "$out/query-A-$name.count")" -v qb="$(cat "$out/query-B-$name.count")" \
        -v rows="$rows" -v answers="$answers" -v sa="$(spread "$out/query-A-$name.runs")" -v sb="$(spread "$out/query-B-$name.runs")" \
        'BEGIN { printf "| %s | %.4e | %.4e | %.4f | %s | %.4e | %.4e | %.4f | %s, %s | %s |\n", n, ia, ib, ib / ia, rows, qa, qb, qb / qa, sa, sb, answers }'
done
echo "cachegrind files, answers, rows and the batch: $out" >&2
