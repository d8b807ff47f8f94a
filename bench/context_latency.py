#!/usr/bin/env python3
"""One-off `canopy context` latency, keyword vs fused, per binary (issue 31 item 6).

  context_latency.py --tree DIR --model MODEL_DIR --bin NAME=PATH [--bin NAME=PATH ...] [--runs 10]
                     [--tree-for NAME=DIR ...]

Indexes DIR once per binary (with the model), then alternates the binaries and the strategies
run by run (so a busy machine weighs on all alike) and prints p50/p95 wall seconds of
`canopy --model M --root DIR --quiet context TASK --budget 4000 --strategy S`.

--tree-for NAME=DIR gives binary NAME a tree of its own (a copy of DIR): binaries whose index
schemas differ would otherwise rebuild each other's index on every call. After indexing, each
tree's history file (`.canopy/history.bin`) is removed, so run 1 is a one-off process's first
call (it writes the file) and runs 2..N read it: the table shows run 1 apart ("first s") and
p50/p95 over runs 2..N. "CPU ms" is the mean user + system time per call over runs 2..N (the
process and every child it waited for, e.g. git), which a busy machine moves much less than the
wall clock.

--strategy S (repeatable) times other strategies beside keyword and fused (e.g. semantic).
"""
import os
import argparse, resource, statistics, subprocess, time

ap = argparse.ArgumentParser()
ap.add_argument("--tree", required=True)
ap.add_argument("--model", required=True)
ap.add_argument("--bin", action="append", required=True)
ap.add_argument("--runs", type=int, default=10)
ap.add_argument("--task", default="where are context fragments cut to the token budget")
ap.add_argument("--tree-for", action="append", default=[])
ap.add_argument("--strategy", action="append", default=[])
a = ap.parse_args()
strategies = ["keyword", "fused"] + [s for s in a.strategy if s not in ("keyword", "fused")]
bins = [b.split("=", 1) for b in a.bin]
trees = {n: a.tree for n, _ in bins}
trees.update(t.split("=", 1) for t in a.tree_for)
for n, path in bins:
    subprocess.run([path, "--model", a.model, "index", trees[n], "--quiet"], check=True, capture_output=True)
    cached = os.path.join(trees[n], ".canopy", "history.bin")
    if os.path.exists(cached):
        os.remove(cached)
times = {(n, s): [] for n, _ in bins for s in strategies}
cpu = {(n, s): [] for n, _ in bins for s in strategies}


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


for _ in range(a.runs):
    for n, path in bins:
        for s in strategies:
            c, t = children_cpu(), time.perf_counter()
            subprocess.run([path, "--model", a.model, "--root", trees[n], "--quiet", "context", a.task,
                            "--budget", "4000", "--strategy", s], check=True, capture_output=True)
            times[(n, s)].append(time.perf_counter() - t)
            cpu[(n, s)].append(children_cpu() - c)
print("| binary | strategy | first s | p50 s (runs 2..N) | p95 s (runs 2..N) | CPU ms per call (runs 2..N) "
      "| runs |\n|---|---|---:|---:|---:|---:|---:|")
for (n, s), xs in times.items():
    first, rest = xs[0], sorted(xs[1:] or xs)
    spent = cpu[(n, s)][1:] or cpu[(n, s)]
    print(f"| {n} | {s} | {first:.3f} | {statistics.median(rest):.3f} | "
          f"{rest[min(len(rest) - 1, int(0.95 * len(rest)))]:.3f} | {1e3 * statistics.mean(spent):.1f} | {len(xs)} |")
