#!/usr/bin/env python3
"""Where a cold index's CPU goes, by thread and phase, and what that bounds
(issue 28 item 2: both cores used).

Usage: bench/thread_account.py --bin CANOPY [--threads N] [--runs R] [--interval S] REPO

Runs `canopy index --quiet` on REPO (REPO/.canopy removed first) R times
(default 1) and, every S seconds (default 0.02), reads each of its threads'
CPU time from /proc/PID/task/TID/schedstat (nanoseconds on a CPU, and
waiting for one). Phases are cut at the debug lines of the run
(`CANOPY_LOG=canopy_core=debug,canopy_graph=debug`): before "parsing
started" (discovery and planning; builds before the twenty-second session
print no such line, and the first parser's run cuts it); parse and write
(until "files
written"); indexes and coverage (until "resolution started"); resolution
(until "resolved"); the rest (text merge, finish, exit).

Thread groups: `writer` (the main thread: plans, writes every batch,
builds the deferred indexes, reads sites and writes edges), `parsers`
(`canopy-parse-*`), `pool` (the index pool, `canopy-index-*`), `other`
(every other thread: rayon's global pool, whose threads take the name of
the thread that started them, and the pass's resolver thread).

CPU seconds per thread do not depend on what else the machine runs (up to
cache effects), so the account can be read on a loaded machine; the wall
seconds cannot. Printed per run: a table of CPU per phase and group, then
the Amdahl account for 2 cores: a phase that runs on one thread counts
whole, a phase that runs on several counts max(total / cores, its busiest
thread, and the writer's CPU while every parser was idle plus the rest
spread over the cores); the sum is the shortest wall the run could have on
an idle machine with that many cores, and one-core CPU ÷ that sum the best
speed-up over one core. ("Idle" is read from schedstat's time on a CPU and
waiting for one: a parser that neither ran nor waited was blocked, on the
queue to the writer or on the bytes in flight.)
"""
import argparse
import json
import os
import shutil
import subprocess
import threading
import time

PHASES = [
    ("plan", None),
    ("parse+write", "files written"),
    ("indexes+coverage", "resolution started"),
    ("resolution", "resolved"),
    ("finish", None),
]


def group(tid, pid, comm):
    if tid == pid:
        return "writer"
    if comm.startswith("canopy-parse"):
        return "parsers"
    if comm.startswith("canopy-index"):
        return "pool"
    return "other"


def sample_run(binary, repo, threads, interval):
    shutil.rmtree(os.path.join(repo, ".canopy"), ignore_errors=True)
    cmd = [binary, "index", "--quiet"]
    if threads:
        cmd += ["--threads", str(threads)]
    env = dict(os.environ, CANOPY_LOG="canopy_core=debug,canopy_graph=debug", NO_COLOR="1")
    t0 = time.monotonic()
    p = subprocess.Popen(cmd + [repo], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         text=True, env=env)
    lines = []

    def reader():
        for line in p.stderr:
            lines.append((time.monotonic() - t0, line))

    th = threading.Thread(target=reader)
    th.start()
    samples = []
    pid = str(p.pid)
    while p.poll() is None:
        snap = {}
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            break
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                    fields = f.read().split()
                    run_ns, wait_ns = int(fields[0]), int(fields[1])
                with open(f"/proc/{pid}/task/{tid}/comm") as f:
                    comm = f.read().strip()
            except (OSError, ValueError, IndexError):
                continue
            snap[tid] = (group(tid, pid, comm), run_ns, wait_ns)
        samples.append((time.monotonic() - t0, snap))
        time.sleep(interval)
    wall = time.monotonic() - t0
    th.join()
    if p.returncode != 0:
        raise SystemExit(f"canopy index failed ({p.returncode})")
    return samples, lines, wall


def account(samples, lines):
    """CPU seconds per (phase, group) and per (phase, thread)."""
    marks = {}
    for t, line in lines:
        for _, marker in PHASES:
            if marker and marker in line and marker not in marks:
                # "resolved" must not match "resolution started".
                if marker == "resolved" and "resolved files=" not in line:
                    continue
                marks[marker] = t
        # Builds before s18 print no "resolution started"; a pass that
        # trims memory first prints this line as it starts.
        if "free memory released" in line and "resolution started" not in marks:
            marks["resolution started"] = t
        if "parsing started" in line and "parsing started" not in marks:
            marks["parsing started"] = t
    # Builds before s22 print no "parsing started": the first sample in
    # which a parser thread ran. (With `--threads 1` they start none.)
    first_parse = marks.get("parsing started", next(
        (t for t, snap in samples
         if any(g == "parsers" and ns > 0 for g, ns, _ in snap.values())), 0.0))
    bounds = [(0.0, "plan"), (first_parse, "parse+write")]
    order = ["parse+write", "indexes+coverage", "resolution", "finish"]
    for (name, marker), nxt in zip(PHASES[1:4], order[1:]):
        if marker in marks:
            bounds.append((marks[marker], nxt))
    bounds.sort()
    prev, cpu, per_thread, walls = {}, {}, {}, {}
    # Writer CPU while no parser wanted a CPU (neither ran nor waited for
    # one for a fifth of the interval): the parsers were blocked on it.
    alone = {}
    last_t = 0.0
    for t, snap in samples:
        phase = [n for bt, n in bounds if t >= bt][-1]
        dt = t - last_t
        walls[phase] = walls.get(phase, 0.0) + dt
        last_t = t
        writer, parsers_want, parsers = 0.0, 0.0, 0
        for tid, (g, ns, wait) in snap.items():
            r0, w0 = prev.get(tid, (0, 0))
            d = (ns - r0) / 1e9
            prev[tid] = (ns, wait)
            cpu.setdefault(phase, {}).setdefault(g, 0.0)
            cpu[phase][g] += d
            per_thread.setdefault(phase, {}).setdefault(tid, 0.0)
            per_thread[phase][tid] += d
            if g == "writer":
                writer = d
            elif g == "parsers":
                parsers += 1
                parsers_want += d + (wait - w0) / 1e9
        if parsers and dt > 0 and parsers_want < 0.2 * dt:
            alone[phase] = alone.get(phase, 0.0) + writer
    return [n for _, n in bounds], cpu, per_thread, walls, alone


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--interval", type=float, default=0.02)
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--json", help="also write every run's account here")
    ap.add_argument("repo")
    a = ap.parse_args()
    groups = ["writer", "parsers", "pool", "other"]
    out = []
    for run in range(a.runs):
        samples, lines, wall = sample_run(a.bin, a.repo, a.threads, a.interval)
        phases, cpu, per_thread, walls, alone = account(samples, lines)
        print(f"\nrun {run + 1}: {a.bin} --threads {a.threads or 'default'}, "
              f"wall {wall:.2f} s (load average {os.getloadavg()[0]:.1f})")
        print("| phase | " + " | ".join(groups) + " | CPU s | busiest thread s | 2-core bound s |")
        print("|---|" + "---|" * (len(groups) + 3))
        total = bound = 0.0
        for ph in phases:
            row = cpu.get(ph, {})
            c = sum(row.values())
            busiest = max(per_thread.get(ph, {}).values(), default=0.0)
            serial = alone.get(ph, 0.0)
            b = max(c / a.cores, busiest, serial + (c - serial) / a.cores)
            total += c
            bound += b
            print(f"| {ph} | " + " | ".join(f"{row.get(g, 0):.2f}" for g in groups)
                  + f" | {c:.2f} | {busiest:.2f} | {b:.2f} |")
        print(f"| all | " + " | ".join(f"{sum(cpu.get(p, {}).get(g, 0) for p in phases):.2f}"
                                       for g in groups)
              + f" | {total:.2f} | | {bound:.2f} |")
        w = cpu.get("parse+write", {}).get("writer", 0.0)
        print(f"parse+write: writer CPU with every parser idle {alone.get('parse+write', 0.0):.2f} s "
              f"of {w:.2f} s (counted as serial in the bound)")
        print(f"one-core CPU {total:.2f} s; {a.cores}-core bound {bound:.2f} s; "
              f"best speed-up over one core {total / bound:.2f}x")
        out.append({"wall": wall, "cpu": cpu, "walls": walls, "alone": alone,
                    "bound": bound, "total": total})
    if a.json:
        json.dump(out, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
