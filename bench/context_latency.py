#!/usr/bin/env python3
"""One-off `canopy context` latency, keyword vs fused, per binary (issue 31 item 6).

  context_latency.py --tree DIR --model MODEL_DIR --bin NAME=PATH [--bin NAME=PATH ...] [--runs 10]

Indexes DIR once per binary (with the model), then alternates the binaries and the strategies
run by run (so a busy machine weighs on all alike) and prints p50/p95 wall seconds of
`canopy --model M --root DIR --quiet context TASK --budget 4000 --strategy S`.
"""
import argparse, statistics, subprocess, time

ap = argparse.ArgumentParser()
ap.add_argument("--tree", required=True)
ap.add_argument("--model", required=True)
ap.add_argument("--bin", action="append", required=True)
ap.add_argument("--runs", type=int, default=10)
ap.add_argument("--task", default="where are context fragments cut to the token budget")
a = ap.parse_args()
bins = [b.split("=", 1) for b in a.bin]
for _, path in bins:
    subprocess.run([path, "--model", a.model, "index", a.tree, "--quiet"], check=True, capture_output=True)
times = {(n, s): [] for n, _ in bins for s in ("keyword", "fused")}
for _ in range(a.runs):
    for n, path in bins:
        for s in ("keyword", "fused"):
            t = time.perf_counter()
            subprocess.run([path, "--model", a.model, "--root", a.tree, "--quiet", "context", a.task,
                            "--budget", "4000", "--strategy", s], check=True, capture_output=True)
            times[(n, s)].append(time.perf_counter() - t)
print("| binary | strategy | p50 s | p95 s | runs |\n|---|---|---:|---:|---:|")
for (n, s), xs in times.items():
    xs = sorted(xs)
    print(f"| {n} | {s} | {statistics.median(xs):.3f} | {xs[min(len(xs) - 1, int(0.95 * len(xs)))]:.3f} | {len(xs)} |")
