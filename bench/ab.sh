#!/usr/bin/env bash
# Same-run A/B of canopy binaries: fresh full index of REPO, binaries
# alternating, N rounds; prints wall and CPU (user + sys) min / p25 / median
# per binary. The only comparison this shared VM supports: its speed drifts
# by up to 30% between hours, so figures from different runs don't compare.
#
# Usage: bench/ab.sh REPO N BIN...   (e.g. bench/ab.sh ~/.cache/canopy-bench/tokio 12 /tmp/old/canopy target/release/canopy)
# Needs GNU time (/usr/bin/time) and python3. Peak RSS: see bench/index.sh.
set -euo pipefail
[ $# -ge 3 ] || { sed -n '2,9p' "$0"; exit 2; }
REPO=$1; N=$2; shift 2
OUT=$(mktemp)
trap 'rm -f "$OUT"' EXIT
for _ in $(seq "$N"); do
  for bin in "$@"; do
    rm -rf "$REPO/.canopy"
    /usr/bin/time -a -o "$OUT" -f "$bin %e %U %S" "$bin" index "$REPO" --quiet >/dev/null
  done
done
python3 - "$OUT" <<'PY'
import collections, sys
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    b, e, u, s = line.rsplit(maxsplit=3)
    runs[b].append((float(e), float(u) + float(s)))
def q(a, p): return a[int(p * (len(a) - 1))] * 1000
for b, v in runs.items():
    w = sorted(x[0] for x in v); c = sorted(x[1] for x in v)
    print(f"{b}: wall min {q(w,0):.0f} p25 {q(w,.25):.0f} median {q(w,.5):.0f} ms; "
          f"cpu min {q(c,0):.0f} p25 {q(c,.25):.0f} median {q(c,.5):.0f} ms (n={len(v)})")
PY
