#!/usr/bin/env python3
"""Prints every stored graph edge of an index, one per line, sorted and by
handle (row ids differ between builds; handles do not):

    src-handle dst-handle line col info

or, with --names, by path and qualified name (for reading a diff):

    src-path line col how=N -> dst-path dst-qualified-name

Used to check that a change to resolution (or to how edges are stored) left
its answers alone: index the same tree with both binaries, dump both, `cmp`
the dumps.

    canopy index --quiet A && python3 bench/graph/edges_dump.py A/.canopy/index.db > a.edges

Reads both layouts: schema 15's packed lists (`edge_lists`, decoded by
`stored_edges`, which bench/graph/perf.py uses too) and the `edges` table of
schema 13 and 14.
"""
import sqlite3
import sys
import zlib


def _varints(data):
    """The LEB128 varints of `data`, in order."""
    v = shift = 0
    for b in data:
        v |= (b & 0x7F) << shift
        if b & 0x80:
            shift += 7
        else:
            yield v
            v = shift = 0


def _unzigzag(v):
    return (v >> 1) ^ -(v & 1)


def _unpack_blob(blob):
    """store/blob.rs: a tag byte, 0 raw, 1 raw deflate."""
    if blob[0] == 0:
        return blob[1:]
    if blob[0] == 1:
        return zlib.decompress(blob[1:], -15)
    raise ValueError("unknown blob tag %d" % blob[0])


def decode_edge_list(blob):
    """(src, dst, line, col, info) of one `edge_lists.edges` blob
    (crates/canopy-store/src/store/packed_edges.rs)."""
    it = _varints(_unpack_blob(blob))
    n = next(it)
    src = line = 0
    out = []
    for _ in range(n):
        src += _unzigzag(next(it))
        line += _unzigzag(next(it))
        col, dst, info = next(it), next(it), next(it)
        out.append((src, dst, line, col, info))
    return out


def stored_edges(conn):
    """Every stored edge of an open index as (src, dst, line, col, info)."""
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if "edge_lists" in tables:
        for (blob,) in conn.execute("SELECT edges FROM edge_lists"):
            yield from decode_edge_list(blob)
    else:
        yield from conn.execute("SELECT src, dst, line, col, info FROM edges")


def main():
    args = sys.argv[1:]
    names = "--names" in args
    args = [a for a in args if a != "--names"]
    if len(args) != 1:
        sys.exit(__doc__)
    c = sqlite3.connect(args[0])
    if names:
        unit = {i: (p, q) for i, p, q in c.execute(
            "SELECT n.id, f.path, n.qualified_name FROM nodes n JOIN files f ON f.id = n.file_id")}
        rows = sorted(
            (unit[s][0], line, col, "how=%d" % ((info >> 4) & 7), "->", unit[d][0], unit[d][1] or "")
            for s, d, line, col, info in stored_edges(c))
    else:
        handle = {i: h.hex() if isinstance(h, bytes) else str(h)
                  for i, h in c.execute("SELECT id, handle FROM nodes")}
        rows = sorted(
            (handle.get(s, str(s)), handle.get(d, str(d)), line, col, info)
            for s, d, line, col, info in stored_edges(c))
    out = sys.stdout
    for r in rows:
        out.write(" ".join(map(str, r)) + "\n")


if __name__ == "__main__":
    main()
