#!/usr/bin/env python3
"""A first build with an agent polling `canopy status` beside it (issue N10).

Writes a folder of N small Python files (the shape of the killed-indexer
test), then times a cold `canopy index` alone and the same cold index while
`canopy status --json` runs every 20 ms, alternating the two R times. Prints
each run, the median ratio (polled / alone; the goal is <= 1.2) and the
status calls' p50/p95/max latency. A status call must answer in its normal
time while the build runs; before the fix each poll took the write lock and
the build turned into table scans (60 s and counting).

Usage: bench/poll_during_index.py [--bin target/release/canopy] [--files 3000] [--runs 3]
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def write_tree(root, files):
    for i in range(files):
        body = "".join(
            f"    total += helper_{i}_{j}(value, {j}) * {j};\n" for j in range(30)
        )
        d = os.path.join(root, f"pkg{i % 40}")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, f"module_{i}.py"), "w") as f:
            f.write(
                f'"""Module {i}."""\n\nclass Widget{i}:\n    def compute_{i}(self, value):\n'
                f"        total = 0\n{body}        return total\n\n\n"
                f"def unique_symbol_{i}():\n    return Widget{i}()\n"
            )


def cold_index(binary, root, poll, timeout):
    shutil.rmtree(os.path.join(root, ".canopy"), ignore_errors=True)
    start = time.monotonic()
    proc = subprocess.Popen(
        [binary, "index", "--quiet"],
        cwd=root,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    polls = []
    while proc.poll() is None:
        if time.monotonic() - start > timeout:
            proc.kill()
            proc.wait()
            return None, polls
        if poll:
            t = time.monotonic()
            try:
                subprocess.run(
                    [binary, "status", "--json"],
                    cwd=root,
                    capture_output=True,
                    timeout=timeout,
                )
            except subprocess.TimeoutExpired:
                pass
            polls.append(time.monotonic() - t)
        time.sleep(0.02)
    return time.monotonic() - start, polls


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default="target/release/canopy")
    ap.add_argument("--files", type=int, default=3000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=60.0)
    args = ap.parse_args()
    binary = os.path.abspath(args.bin)
    with tempfile.TemporaryDirectory() as tmp:
        root = os.path.join(tmp, "repo")
        write_tree(root, args.files)
        alone, polled, all_polls = [], [], []
        for run in range(args.runs):
            a, _ = cold_index(binary, root, False, args.timeout)
            p, polls = cold_index(binary, root, True, args.timeout)
            all_polls += polls
            print(
                f"run {run + 1}: alone {a:.2f} s, polled {'timeout' if p is None else f'{p:.2f} s'}"
                f" ({len(polls)} status calls)"
            )
            alone.append(a)
            polled.append(p if p is not None else float("inf"))
        ratio = statistics.median(p / a for p, a in zip(polled, alone))
        print(f"median polled / alone: {ratio:.2f} (goal <= 1.2)")
        if all_polls:
            s = sorted(all_polls)
            p95 = s[min(len(s) - 1, int(0.95 * len(s)))]
            print(
                f"status during the build: p50 {statistics.median(s) * 1000:.0f} ms,"
                f" p95 {p95 * 1000:.0f} ms, max {s[-1] * 1000:.0f} ms ({len(s)} calls)"
            )
    return 0 if ratio <= 1.2 else 1


if __name__ == "__main__":
    sys.exit(main())
