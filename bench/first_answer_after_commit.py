#!/usr/bin/env python3
"""The first query after a watcher commit, against the next one, through `canopy mcp`.

A long-lived connection keeps per-connection state keyed by the index's
`PRAGMA data_version` (the name catalog of substring searches); the first
answer after every commit pays for refreshing it, and that answer is the one
an agent waiting for its edit gets (issue 32, edit -> searchable). For each
of N edits the script appends a function to one file of the repository,
waits until the watcher has surely committed (--settle, default 0.6 s),
times one `canopy_query symbol=<new name> kind=definition`, then times the
same query again. Prints both medians. The file is restored afterwards.

Usage:
  bench/first_answer_after_commit.py --repo ~/.cache/canopy-bench/django \
      --bin target/release/canopy [--edits 10] [--file django/utils/text.py] [--settle 0.6]
"""

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from freshness import Mcp  # noqa: E402


def first_python_file(repo):
    for top, dirs, files in os.walk(repo):
        dirs[:] = sorted(d for d in dirs if d not in (".git", ".canopy"))
        for f in sorted(files):
            if f.endswith(".py"):
                return os.path.relpath(os.path.join(top, f), repo)
    raise SystemExit(f"no .py file under {repo}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repo", required=True)
    ap.add_argument("--bin", default=os.environ.get("CANOPY_BIN", "target/release/canopy"))
    ap.add_argument("--edits", type=int, default=10)
    ap.add_argument("--file", help="repo-relative Python file to append to (default: the first one found)")
    ap.add_argument("--settle", type=float, default=0.6, help="seconds from the edit to the query")
    args = ap.parse_args()
    repo = os.path.abspath(args.repo)
    mcp = Mcp(args.bin)
    mcp.tool("canopy_status", {"path": repo})  # opens the repository: its watcher starts
    mcp.tool("canopy_query", {"path": repo, "symbol": "main", "limit": 1})
    time.sleep(2)
    target = os.path.join(repo, args.file or first_python_file(repo))
    original = open(target, "rb").read()
    first, next_ = [], []
    try:
        for i in range(args.edits):
            name = f"canopy_after_commit_{i}_{os.getpid()}"
            with open(target, "ab") as f:
                f.write(f"\n\ndef {name}(v):\n    return v\n".encode())
            time.sleep(args.settle)
            for times in (first, next_):
                t = time.perf_counter()
                found = mcp.tool("canopy_query", {"path": repo, "symbol": name,
                                                  "kind": "definition", "limit": 4})
                times.append((time.perf_counter() - t) * 1000)
                if not found.get("handles"):
                    raise RuntimeError(f"{name} not found {args.settle} s after the edit; raise --settle")
    finally:
        open(target, "wb").write(original)
        time.sleep(1.0)  # let the watcher re-index the restored file
        mcp.close()
    print(f"first query after a commit: median {statistics.median(first):.1f} ms; "
          f"the next one: {statistics.median(next_):.1f} ms ({args.edits} edits)")


if __name__ == "__main__":
    main()
