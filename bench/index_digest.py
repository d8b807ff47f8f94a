#!/usr/bin/env python3
"""Digest of an index's rows, table by table, times left out.

Usage: bench/index_digest.py REPO_OR_INDEX_DB [...]

Prints, for every table of `.canopy/index.db` (the FTS5 shadow tables
included, the virtual tables over them left out), its row count and a
SHA-256 of its rows in rowid / primary-key order. What differs between two
cold indexes of the same tree by time alone is left out: `files.indexed_at`
and the `meta` rows `last_indexed` and `*_at`; so is `meta.state_stamp`, random
bits drawn by every write (an identity of the index's state). Two builds that must write
the same index (a change that should only make indexing cheaper) print the
same lines: `diff <(bench/index_digest.py A) <(bench/index_digest.py B)`.
Python standard library only.
"""

import hashlib
import os
import sqlite3
import sys

# Columns that hold the time of the run, not what was indexed.
TIME_COLUMNS = {("files", "indexed_at")}


def time_meta_key(key):
    # state_stamp: random per write, like the time of the run.
    return key in ("last_indexed", "state_stamp") or key.endswith("_at")


def digest(db_path):
    con = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    tables = [
        (name, sql or "")
        for name, sql in con.execute(
            "SELECT name, sql FROM sqlite_master WHERE type = 'table' ORDER BY name"
        )
    ]
    out = []
    for name, sql in tables:
        if sql.upper().startswith("CREATE VIRTUAL TABLE") or name.startswith("sqlite_"):
            continue
        cols = [
            r[1]
            for r in con.execute(f'PRAGMA table_info("{name}")')
            if (name, r[1]) not in TIME_COLUMNS
        ]
        without_rowid = "WITHOUT ROWID" in sql.upper()
        order = ", ".join(f'"{c}"' for c in cols) if without_rowid else "rowid"
        select = ", ".join(f'"{c}"' for c in cols)
        h = hashlib.sha256()
        count = 0
        for row in con.execute(f'SELECT {select} FROM "{name}" ORDER BY {order}'):
            if name == "meta" and time_meta_key(row[0]):
                continue
            h.update(repr(row).encode())
            h.update(b"\n")
            count += 1
        out.append(f"{name} {count} {h.hexdigest()}")
    con.close()
    return out


def main():
    if len(sys.argv) < 2:
        print(__doc__.strip(), file=sys.stderr)
        sys.exit(2)
    for arg in sys.argv[1:]:
        path = arg if arg.endswith(".db") else os.path.join(arg, ".canopy", "index.db")
        if len(sys.argv) > 2:
            print(f"# {arg}")
        print("\n".join(digest(path)))


if __name__ == "__main__":
    main()
