#!/usr/bin/env python3
"""Prints every stored graph edge of an index, one per line, sorted and by
handle (row ids differ between builds; handles do not):

    src-handle dst-handle-or-unresolved-name-id line col info

Used to check that a change to resolution's speed left its answers alone:
index the same tree with both binaries, dump both, `cmp` the dumps.

    canopy index --quiet A && python3 bench/graph/edges_dump.py A/.canopy/index.db > a.edges
"""
import sqlite3
import sys


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    c = sqlite3.connect(sys.argv[1])
    handle = {i: h.hex() if isinstance(h, bytes) else str(h)
              for i, h in c.execute("SELECT id, handle FROM nodes")}
    rows = sorted(
        (handle.get(s, str(s)), handle.get(d, str(d)), line, col, info)
        for s, d, line, col, info in c.execute("SELECT src, dst, line, col, info FROM edges"))
    out = sys.stdout
    for r in rows:
        out.write(" ".join(map(str, r)) + "\n")


if __name__ == "__main__":
    main()
