#!/usr/bin/env python3
"""HTTP load across a rebuild (issue 32, N2): are answers ever empty or wrong?

1. Copies the repository (default ~/.cache/canopy-bench/django, without its
   .canopy) to a temporary directory.
2. Starts `canopy serve --bind 127.0.0.1:0 --data-dir <tmp>` with the given
   binary, registers the copy and indexes it (POST /repos/add, /reindex).
3. Ground truth: for up to --symbols names defined in the tree, one
   POST /query {symbol} on the complete index; the set of (handle id, file)
   each answer holds is what a complete index answers, before and after a
   rebuild of the same files.
4. T client threads (default 16), each with one keep-alive connection,
   send POST /query {symbol} back to back. After --settle seconds, POST
   /reindex {"rebuild": true}; GET /status is polled until that run has
   finished; the load goes on for --settle seconds more. Repeated --rebuilds
   times.
5. Every answer is classified against the ground truth:
   * empty: 200 with no handles;
   * wrong file: a handle in a file the complete index never gave for that
     symbol;
   * different: other handles than the complete index's (a subset, say);
   * partial: carries `index_coverage` (the answer says it may be partial).
   And generations: `freshness.generation` is the core's (the snapshot the
   answer read), `generation` the service's. A generation names one state
   only if, under it, a symbol always gets the same answer: "ambiguous
   generations" counts (generation, symbol) pairs with two different
   answers. "went back" counts answers, per client, older than one that
   client already had.

Prints one markdown table (answers overall and inside the rebuild window)
and the rebuild times. Only 127.0.0.1 is contacted; Python 3 stdlib only.

Usage:
  bench/rebuild_load.py --repo ~/.cache/canopy-bench/django --bin target/release/canopy
"""

import argparse
import http.client
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from http_load import DEFAULT_BIN, Server, collect_symbols, repo_status, tracked_files, wait_idle  # noqa: E402


def ground_truth(server, repo_id, symbols, limit):
    truth = {}
    for name in symbols:
        code, body = server.call("POST", "/query", {"repo": repo_id, "symbol": name})
        if code != 200 or not body.get("handles"):
            continue
        truth[name] = frozenset((h["id"], h["file_path"]) for h in body["handles"])
        if len(truth) >= limit:
            break
    return truth


class Clients:
    def __init__(self, server, repo_id, truth, threads, seed):
        self.server, self.repo_id, self.truth = server, repo_id, truth
        self.names = sorted(truth)
        self.threads, self.seed = threads, seed
        self.stop = threading.Event()
        self.lock = threading.Lock()
        # (time, client, symbol, status, signature or None, core gen, service gen, partial)
        self.answers = []
        self.errors = []

    def worker(self, idx):
        rng = random.Random(self.seed * 1000 + idx)
        conn = None
        mine = []
        while not self.stop.is_set():
            name = rng.choice(self.names)
            body = json.dumps({"repo": self.repo_id, "symbol": name}).encode()
            if conn is None:
                conn = http.client.HTTPConnection(self.server.host, self.server.port, timeout=60)
            try:
                conn.request("POST", "/query", body=body, headers={"Content-Type": "application/json"})
                resp = conn.getresponse()
                raw = resp.read()
                t = time.monotonic()
                if resp.status != 200:
                    mine.append((t, idx, name, resp.status, None, None, None, False))
                    if len(self.errors) < 5:
                        self.errors.append("%d %s" % (resp.status, raw[:200]))
                else:
                    v = json.loads(raw)
                    sig = frozenset((h["id"], h["file_path"]) for h in v.get("handles", []))
                    core = (v.get("freshness") or {}).get("generation")
                    mine.append((t, idx, name, 200, sig, core, v.get("generation"),
                                 v.get("index_coverage") is not None))
                if resp.will_close:
                    conn.close()
                    conn = None
            except (OSError, http.client.HTTPException, ValueError) as e:
                mine.append((time.monotonic(), idx, name, 0, None, None, None, False))
                if len(self.errors) < 5:
                    self.errors.append("%s: %s" % (type(e).__name__, e))
                if conn is not None:
                    conn.close()
                conn = None
        if conn is not None:
            conn.close()
        with self.lock:
            self.answers.extend(mine)

    def start(self):
        self.ts = [threading.Thread(target=self.worker, args=(k,), daemon=True)
                   for k in range(self.threads)]
        for t in self.ts:
            t.start()

    def finish(self):
        self.stop.set()
        for t in self.ts:
            t.join(120)


def classify(answers, truth):
    c = {"answers": len(answers), "errors": 0, "empty": 0, "wrong_file": 0, "different": 0,
         "partial": 0}
    for (_, _, name, status, sig, _, _, partial) in answers:
        if status != 200:
            c["errors"] += 1
            continue
        expected = truth[name]
        files = {f for (_, f) in expected}
        if partial:
            c["partial"] += 1
        if not sig:
            c["empty"] += 1
        elif any(f not in files for (_, f) in sig):
            c["wrong_file"] += 1
        elif sig != expected:
            c["different"] += 1
    return c


def generation_checks(answers, key):
    """(ambiguous (generation, symbol) pairs, answers older than the client's last)."""
    seen = {}
    for a in answers:
        if a[3] != 200 or a[key] is None:
            continue
        seen.setdefault((a[key], a[2]), set()).add(a[4])
    ambiguous = sum(1 for sigs in seen.values() if len(sigs) > 1)
    back = 0
    last = {}
    for a in sorted(answers, key=lambda a: a[0]):
        if a[3] != 200 or a[key] is None:
            continue
        if a[1] in last and a[key] < last[a[1]]:
            back += 1
        last[a[1]] = max(last.get(a[1], a[key]), a[key])
    return ambiguous, back


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repo", default=os.path.expanduser("~/.cache/canopy-bench/django"))
    ap.add_argument("--bin", default=DEFAULT_BIN)
    ap.add_argument("--threads", type=int, default=16)
    ap.add_argument("--symbols", type=int, default=300, help="names in the ground truth")
    ap.add_argument("--rebuilds", type=int, default=1)
    ap.add_argument("--settle", type=float, default=3.0, help="seconds of load before and after each rebuild")
    ap.add_argument("--ready-timeout", type=float, default=900.0)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = ap.parse_args()

    src = os.path.realpath(os.path.expanduser(args.repo))
    binary = os.path.realpath(args.bin)
    tmp = tempfile.mkdtemp(prefix="canopy-rebuild-bench-")
    copy = os.path.join(tmp, "repo")
    server = None
    try:
        subprocess.run(["cp", "-a", src, copy], check=True)
        shutil.rmtree(os.path.join(copy, ".canopy"), ignore_errors=True)
        files = tracked_files(copy)
        names = collect_symbols(copy, files, seed=args.seed)
        server = Server(binary, os.path.join(tmp, "data"), os.path.join(tmp, "serve.log"), tmp)
        code, added = server.call("POST", "/repos/add", {"path": copy})
        if code != 200:
            sys.exit("POST /repos/add -> %d %s" % (code, added))
        repo_id = added["repo_id"]
        t0 = time.monotonic()
        code, ri = server.call("POST", "/reindex", {"repo": repo_id})
        if code != 200:
            sys.exit("POST /reindex -> %d %s" % (code, ri))
        if wait_idle(server, repo_id, args.ready_timeout) is None:
            sys.exit("repo not ready within %.0fs" % args.ready_timeout)
        print("binary %s; %s: %d files, indexed in %.1f s" % (binary, src, len(files), time.monotonic() - t0))
        truth = ground_truth(server, repo_id, names, args.symbols)
        print("ground truth: %d symbols answered by the complete index" % len(truth))

        clients = Clients(server, repo_id, truth, args.threads, args.seed)
        clients.start()
        windows = []
        for _ in range(args.rebuilds):
            time.sleep(args.settle)
            before = repo_status(server, repo_id).get("generation")
            start = time.monotonic()
            code, ri = server.call("POST", "/reindex", {"repo": repo_id, "rebuild": True})
            if code != 200:
                sys.exit("POST /reindex rebuild -> %d %s" % (code, ri))
            # Finished: not indexing any more, after a generation change.
            deadline = start + args.ready_timeout
            while time.monotonic() < deadline:
                st = repo_status(server, repo_id)
                if not st.get("indexing") and st.get("generation") != before:
                    break
                time.sleep(0.05)
            end = time.monotonic()
            windows.append((start, end))
            print("rebuild: %.1f s (service generation %s -> %s)" % (end - start, before, st.get("generation")))
        time.sleep(args.settle)
        clients.finish()
        answers = clients.answers
        inside = [a for a in answers if any(s <= a[0] <= e for (s, e) in windows)]

        print()
        print("| answers | count | non-200 | empty | wrong file | different | say partial "
              "| ambiguous core generations | core went back | ambiguous service generations | service went back |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for label, part in (("all", answers), ("during the rebuild", inside)):
            c = classify(part, truth)
            amb_core, back_core = generation_checks(part, 5)
            amb_svc, back_svc = generation_checks(part, 6)
            print("| %s | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d |"
                  % (label, c["answers"], c["errors"], c["empty"], c["wrong_file"], c["different"],
                     c["partial"], amb_core, back_core, amb_svc, back_svc))
        gens = sorted({(a[5], a[6]) for a in answers if a[3] == 200})
        print()
        print("(core, service) generation pairs seen: %s" % gens[:12])
        if clients.errors:
            print("errors: %s" % clients.errors)
        bad = any(classify(inside, truth)[k] for k in ("errors", "empty", "wrong_file", "different"))
        return 1 if bad else 0
    finally:
        if server is not None:
            server.stop()
        if args.keep:
            print("kept %s" % tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
