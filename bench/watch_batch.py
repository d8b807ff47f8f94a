#!/usr/bin/env python3
"""Queries during a large watcher batch (issue 32, N5): do they wait?

1. Copies the repository (default ~/.cache/canopy-bench/django, without its
   .canopy) to a temporary directory and commits, on a branch of the copy,
   a new function `batch_probe_<i>_fn` appended to each of --files Python
   files (default 1,300); the copy goes back to its first branch and is
   indexed (`canopy index`).
2. Starts `canopy mcp` (watching) on it, and waits until the watcher is in
   place (a canary file written, then found).
3. One MCP client queries in a closed loop, alternating
   `canopy_query symbol=<--symbol>` (latency) and
   `canopy_query pattern="batch_probe*" limit=1` (its `total_matches` counts
   the new functions that are visible).
4. After --idle seconds, `git checkout` of the batch branch: the watcher
   sees every changed file and indexes them as one batch. The loop goes on
   until the count of visible new functions has not changed for --quiet
   seconds.
5. Prints, for the idle phase and from the checkout until the whole batch
   was visible: queries, p50 / p95 / max latency; and the times from the
   checkout to the first new function visible and to all of them.

Python 3 stdlib only; drives the MCP server over stdio like any client.

Usage:
  bench/watch_batch.py --repo ~/.cache/canopy-bench/django --bin target/release/canopy
  (--gitignore also changes .gitignore in the batch, which makes the
  watcher run over the whole repository)
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from http_load import DEFAULT_BIN, pct, tracked_files  # noqa: E402


class Mcp:
    def __init__(self, binary, cwd, log):
        self.proc = subprocess.Popen([binary, "mcp"], cwd=cwd, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=log, text=True, bufsize=1)
        self.next_id = 0
        self.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "canopy-watch-batch-bench", "version": "1"}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, message):
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()

    def request(self, method, params):
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError("the MCP server closed its output")
            message = json.loads(line)
            if message.get("id") == self.next_id:
                return message

    def query(self, arguments):
        reply = self.request("tools/call", {"name": "canopy_query", "arguments": arguments})
        text = reply["result"]["content"][0]["text"]
        return json.loads(text)

    def stop(self):
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def git(repo, *args):
    subprocess.run(["git", "-C", repo, "-c", "user.name=bench", "-c", "user.email=bench@example.invalid"]
                   + list(args), check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def make_batch_branch(repo, n_files, gitignore):
    """Commits the batch on a branch `canopy-batch`; returns the first branch."""
    first = subprocess.run(["git", "-C", repo, "rev-parse", "--abbrev-ref", "HEAD"],
                           capture_output=True, text=True, check=True).stdout.strip()
    py = sorted(f for f in tracked_files(repo) if f.endswith(".py"))[:n_files]
    git(repo, "checkout", "-q", "-b", "canopy-batch")
    for i, rel in enumerate(py):
        with open(os.path.join(repo, rel), "a", encoding="utf-8") as f:
            f.write("\n\ndef batch_probe_%d_fn():\n    return %d\n" % (i, i))
    if gitignore:
        with open(os.path.join(repo, ".gitignore"), "a", encoding="utf-8") as f:
            f.write("\n# canopy watch batch bench\n")
    git(repo, "commit", "-qam", "batch")
    git(repo, "checkout", "-q", first)
    return first, len(py)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repo", default=os.path.expanduser("~/.cache/canopy-bench/django"))
    ap.add_argument("--bin", default=DEFAULT_BIN)
    ap.add_argument("--files", type=int, default=1300, help="files the batch changes")
    ap.add_argument("--symbol", default="QuerySet", help="what the latency probe asks for")
    ap.add_argument("--idle", type=float, default=5.0, help="seconds of queries before the checkout")
    ap.add_argument("--quiet", type=float, default=10.0,
                    help="seconds without change after which the batch is taken as done")
    ap.add_argument("--timeout", type=float, default=600.0)
    ap.add_argument("--gitignore", action="store_true", help="the batch also changes .gitignore")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()

    src = os.path.realpath(os.path.expanduser(args.repo))
    binary = os.path.realpath(args.bin)
    tmp = tempfile.mkdtemp(prefix="canopy-watch-bench-")
    copy = os.path.join(tmp, "repo")
    mcp = None
    log = open(os.path.join(tmp, "mcp.log"), "w")
    try:
        subprocess.run(["cp", "-a", src, copy], check=True)
        shutil.rmtree(os.path.join(copy, ".canopy"), ignore_errors=True)
        _, n = make_batch_branch(copy, args.files, args.gitignore)
        t0 = time.monotonic()
        subprocess.run([binary, "index", "--quiet"], cwd=copy, check=True)
        print("binary %s; %s: indexed in %.1f s; the batch changes %d files%s"
              % (binary, src, time.monotonic() - t0, n, " and .gitignore" if args.gitignore else ""))

        mcp = Mcp(binary, copy, log)
        path = copy
        # The first call opens the engine, which starts its watcher; then
        # wait until the watcher sees a change (a new canary every 2 s:
        # events before it was in place are not seen).
        mcp.query({"path": path, "symbol": args.symbol})
        deadline = time.monotonic() + 120
        canary = 0
        while True:
            canary += 1
            with open(os.path.join(copy, "canary_watch_bench.py"), "w") as f:
                f.write("def canary_%d_watch_fn():\n    return 1\n" % canary)
            seen_by = time.monotonic() + 2
            found = False
            while time.monotonic() < seen_by and not found:
                found = bool(mcp.query({"path": path, "symbol": "canary_%d_watch_fn" % canary}).get("handles"))
                time.sleep(0.1)
            if found:
                break
            if time.monotonic() > deadline:
                sys.exit("the watcher did not pick up a change within 120 s")

        samples = []  # (time sent, latency s, kind, total_matches or None, generation)
        checkout = {}

        def do_checkout():
            time.sleep(args.idle)
            checkout["start"] = time.monotonic()
            git(copy, "checkout", "-q", "canopy-batch")
            checkout["done"] = time.monotonic()

        threading.Thread(target=do_checkout, daemon=True).start()
        last_change, last_count = None, None
        deadline = time.monotonic() + args.timeout
        i = 0
        while time.monotonic() < deadline:
            i += 1
            if i % 2:
                kind, arguments = "symbol", {"path": path, "symbol": args.symbol}
            else:
                # A prefix: `batch_probe` alone is no indexed term (the index
                # keeps whole identifiers and their parts, not other prefixes).
                kind, arguments = "count", {"path": path, "pattern": "batch_probe*", "limit": 1}
            t = time.monotonic()
            answer = mcp.query(arguments)
            dt = time.monotonic() - t
            count = answer.get("total_matches") if kind == "count" else None
            generation = (answer.get("freshness") or {}).get("generation")
            samples.append((t, dt, kind, count, generation))
            if count is not None and "start" in checkout:
                if count != last_count:
                    last_count, last_change = count, time.monotonic()
                elif count and time.monotonic() - last_change >= args.quiet:
                    break
        start = checkout["start"]
        counts = [(t + dt, c) for (t, dt, k, c, _) in samples if c is not None and t >= start]
        final = counts[-1][1] if counts else 0
        first_seen = next((t for (t, c) in counts if c), None)
        all_seen = next((t for (t, c) in counts if c == final), None)
        idle = sorted(dt * 1000 for (t, dt, _, _, _) in samples if t < start)
        busy = sorted(dt * 1000 for (t, dt, _, _, _) in samples if start <= t <= (all_seen or t))
        gens = sorted({g for (t, _, _, _, g) in samples if start <= t <= (all_seen or t) and g is not None})

        print()
        print("| phase | queries | p50 ms | p95 ms | max ms |")
        print("|---|---:|---:|---:|---:|")
        for label, lat in (("idle", idle), ("checkout until the whole batch is visible", busy)):
            print("| %s | %d | %.1f | %.1f | %.1f |" % (label, len(lat), pct(lat, 50), pct(lat, 95),
                                                      lat[-1] if lat else float("nan")))
        print()
        print("checkout took %.2f s; first new function visible %.1f s after it started, all %d "
              "(total_matches %d) %.1f s after; answers named %d generations meanwhile"
              % (checkout["done"] - start, (first_seen or float("nan")) - start, n, final,
                 (all_seen or float("nan")) - start, len(gens)))
        if final != n:
            # A count that never reaches the batch means the figures above
            # do not describe a whole batch: say so instead of a table alone.
            print("the batch was not fully visible: %d of %d new functions found" % (final, n),
                  file=sys.stderr)
            return 1
        return 0
    finally:
        if mcp is not None:
            mcp.stop()
        log.close()
        if args.keep:
            print("kept %s" % tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
