#!/usr/bin/env python3
"""The text index's segments through one-off runs after a cold index (issue 28 item 5).

Usage: bench/text_merge_runs.py --bin CANOPY --repo COPY [--edits 20] [--treat SQL;...]

Builds a cold index of COPY (its `.canopy` deleted first), prints the FTS5
structure record (`fts_data` row 10: each level's segments and their leaf
pages; `*N` marks a level whose first N segments are being merged), then
makes `bench/edit_reindex.py`'s one-line edits (the same files for the same
`--seed`), each followed by a `canopy --json index` run and a restore with
its own run, and prints per run its CPU milliseconds (git's included), the
text merge steps and milliseconds it logged, and the structure after it.

`--treat` runs FTS5 commands on the index between the build and the edits,
e.g. `optimize` or `usermerge=8` (`INSERT INTO fts(fts[, rank]) VALUES…`),
with their CPU time: it needs the `apsw` module (SQLite 3.43 or later, for
`contentless_delete`; Python's own SQLite may be older). Reading the
structure needs only the standard library. The repository is edited in
place and restored: use a private copy.
"""

import argparse
import os
import random
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import edit_reindex as er  # noqa: E402


def varint(b, i):
    """SQLite's varint (FTS5 uses the same)."""
    v = 0
    for k in range(8):
        c = b[i + k]
        v = (v << 7) | (c & 0x7F)
        if c < 0x80:
            return v, i + k + 1
    return (v << 8) | b[i + 8], i + 9


def structure(db):
    """Levels of the structure record: (segments merging, [leaf pages])."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    blob = con.execute("SELECT block FROM fts_data WHERE id = 10").fetchone()[0]
    con.close()
    i, v2 = 4, blob[4:8] == b"\xff\x00\x00\x01"
    if v2:
        i = 8
    nlevel, i = varint(blob, i)
    _, i = varint(blob, i)  # segments
    _, i = varint(blob, i)  # write counter
    levels = []
    for _ in range(nlevel):
        merging, i = varint(blob, i)
        count, i = varint(blob, i)
        pages = []
        for _ in range(count):
            _, i = varint(blob, i)  # segment id
            first, i = varint(blob, i)
            last, i = varint(blob, i)
            if v2:
                for _ in range(5):  # origins, tombstone pages and entries, entries
                    _, i = varint(blob, i)
            pages.append(last - first + 1)
        levels.append((merging, pages))
    return " ".join(f"L{n}{'*' + str(m) if m else ''}:{','.join(map(str, p))}"
                    for n, (m, p) in enumerate(levels) if p)


def cpu_children():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run(binary, repo, env):
    c0 = cpu_children()
    p = subprocess.run([binary, "--json", "index", str(repo)], capture_output=True, text=True, env=env, check=True)
    merged = {}
    for line in p.stderr.splitlines():
        if "text index merged" in line:
            merged = er.kv(line)
    return (cpu_children() - c0) * 1000, merged.get("steps", 0), merged.get("ms", 0)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--repo", required=True, type=Path)
    ap.add_argument("--edits", type=int, default=20)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--treat", default="", help="FTS5 commands after the build, ';'-separated")
    a = ap.parse_args()
    repo = a.repo.resolve()
    db = repo / ".canopy" / "index.db"
    env = dict(os.environ, CANOPY_LOG="canopy_core=debug", NO_COLOR="1")
    shutil.rmtree(repo / ".canopy", ignore_errors=True)
    c0, t0 = cpu_children(), time.perf_counter()
    subprocess.run([a.bin, "--quiet", "index", str(repo)], check=True, stdout=subprocess.DEVNULL)
    print(f"cold index wall {time.perf_counter() - t0:.2f} s cpu {cpu_children() - c0:.2f} s  "
          f"load {os.getloadavg()[0]:.2f}")
    print("after the build:", structure(db))
    for t in filter(None, a.treat.split(";")):
        import apsw
        con = apsw.Connection(str(db))
        if "=" in t:
            k, v = t.split("=", 1)
            sql, args = "INSERT INTO fts(fts, rank) VALUES(?, ?)", (k, int(v))
        else:
            sql, args = "INSERT INTO fts(fts) VALUES(?)", (t,)
        c = time.process_time()
        con.execute(sql, args)
        con.close()
        print(f"{t}: cpu {(time.process_time() - c) * 1000:.0f} ms -> {structure(db)}")
    files = er.tracked_files(repo, ".py")
    random.Random(a.seed).shuffle(files)
    runs = []
    for k, rel in enumerate(files[: a.edits]):
        path = repo / rel
        original = path.read_bytes()
        try:
            er.write_edit(path, original, "line", f"merge-{k}", ".py")
            runs.append(("edit", run(a.bin, repo, env), structure(db)))
        finally:
            path.write_bytes(original)
        runs.append(("restore", run(a.bin, repo, env), structure(db)))
    for n, (what, (cpu, steps, ms), st) in enumerate(runs, 1):
        print(f"{n:3d} {what:7s} cpu {cpu:4.0f} ms  merge steps {steps} ms {ms}  {st}")
    print(f"cpu p50 {statistics.median(r[1][0] for r in runs):.0f} ms; runs that merged "
          f"{sum(1 for r in runs if r[1][1])}; load {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
