#!/usr/bin/env python3
"""Bytes of the first-sight history read per focus file (issue 31 item 4).

  history_diff_sizes.py --tree DIR FILE [FILE ...]

For each FILE: its 50 latest non-merge commits (as the history strategy
lists them), then `git show -U0` of those commits as canopy reads them (a
commit of more than 30 files only for FILE), and how many of the newest
commits fit together in 64/128/256/512 KiB of output. Git's time is wall
clock (noisy on a shared machine).
"""
import argparse, subprocess, time

ap = argparse.ArgumentParser()
ap.add_argument("--tree", required=True)
ap.add_argument("files", nargs="+")
a = ap.parse_args()
SHOW = ["git", "-C", a.tree, "-c", "core.quotePath=false", "show", "-U0", "--no-renames",
        "--no-color", "--no-ext-diff", "--format=%x1e%H"]


def show(ids, paths):
    if not ids:
        return []
    out = subprocess.run(SHOW + ids + ["--"] + paths, capture_output=True, check=True).stdout
    return [len(r) + 1 for r in out.split(b"\x1e")[1:]]


for f in a.files:
    log = subprocess.run(["git", "-C", a.tree, "log", "--no-merges", "--no-renames", "--full-history",
                          "--full-diff", "--format=%x1e%H", "--name-only", "-n50", "--", f],
                         capture_output=True, text=True, check=True).stdout
    commits = []
    for rec in log.split("\x1e")[1:]:
        lines = [l for l in rec.splitlines() if l.strip()]
        commits.append((lines[0], len(lines) - 1))
    small = [c for c, n in commits if n <= 30]
    large = [c for c, n in commits if n > 30]
    t = time.time()
    sizes = dict(zip(small, show(small, [])))
    sizes.update(zip(large, show(large, [f])))
    ms = (time.time() - t) * 1000
    each = [sizes.get(c, 0) for c, _ in commits]
    fits = []
    for kib in (64, 128, 256, 512):
        total = k = 0
        for s in each:
            if total + s > kib * 1024:
                break
            total += s
            k += 1
        fits.append(k)
    print(f"{f} commits={len(commits)} KiB={sum(each) // 1024} largest={max(each, default=0) // 1024} "
          f"git_ms={ms:.0f} fit64/128/256/512={'/'.join(map(str, fits))}")
