#!/usr/bin/env python3
"""Closed-loop HTTP load on `canopy serve` (POST /query), idle and during re-indexing.

1. Copies the repository (default ~/.cache/canopy-bench/synth, including its
   .canopy index) to a temporary directory, so the cached repo is never
   modified.
2. Starts `canopy serve --bind 127.0.0.1:0 --data-dir <tmp>` and reads the
   bound address from its `listening on http://ADDR` stderr line.
3. POST /repos/add {path: copy}, POST /reindex {repo: id}, polls GET /status
   until the repo is ready and no run is in progress.
4. Phase "idle": T client threads (default 16), each with one keep-alive
   HTTP/1.1 connection (re-opened on error or `Connection: close`), send
   POST /query back to back for D seconds (default 15), alternating
   {"repo": id, "symbol": NAME} and {"repo": id, "pattern": WORD}.
5. Phase "reindex": the same load while a background thread loops (bounded
   by count and by the window): modify M files of the copy (default 300,
   appends a comment line), POST /reindex, wait until that run finishes.
6. Prints requests/s, p50/p99/max and errors per phase as a markdown table,
   then kills the server and removes the temporary directory.

Only 127.0.0.1 is contacted. Python 3 stdlib only. Example:

    python3 bench/http_load.py --repo ~/.cache/canopy-bench/synth
"""

import argparse
import http.client
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_proc import cpu_seconds, start_serve  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_BIN = os.path.join(os.path.dirname(HERE), "target", "release", "canopy")

SYMBOL_RES = {
    ".py": re.compile(r"^\s*(?:def|class)\s+([A-Za-z_][A-Za-z0-9_]{3,})", re.M),
    ".rs": re.compile(r"^\s*(?:pub(?:\([a-z]+\))?\s+)?(?:fn|struct|enum|trait)\s+([A-Za-z_][A-Za-z0-9_]{3,})", re.M),
    ".go": re.compile(r"^func\s+(?:\([^)]*\)\s*)?([A-Za-z_][A-Za-z0-9_]{3,})", re.M),
    ".ts": re.compile(r"^\s*(?:export\s+)?(?:async\s+)?(?:function|class|interface)\s+([A-Za-z_][A-Za-z0-9_]{3,})", re.M),
}
SYMBOL_RES[".tsx"] = SYMBOL_RES[".ts"]
SYMBOL_RES[".js"] = SYMBOL_RES[".ts"]
COMMENT = {".py": "#", ".rs": "//", ".go": "//", ".ts": "//", ".tsx": "//", ".js": "//"}

PATTERNS = [
    "invoice", "refund", "ledger", "quota", "envelope", "subscription", "tenant",
    "retry", "timeout", "checksum", "payload", "cursor", "snapshot", "deadline",
    "backoff", "migration", "session", "token", "cache", "archive", "mapping",
]


def tracked_files(repo):
    return subprocess.run(["git", "-C", repo, "ls-files"], capture_output=True,
                          text=True, check=True).stdout.split()


def collect_symbols(repo, files, limit_files=3000, seed=1):
    files = list(files)
    random.Random(seed).shuffle(files)
    names = set()
    for rel in files[:limit_files]:
        rx = SYMBOL_RES.get(os.path.splitext(rel)[1])
        if rx is None:
            continue
        try:
            with open(os.path.join(repo, rel), encoding="utf-8", errors="replace") as f:
                names.update(rx.findall(f.read(200_000)))
        except OSError:
            pass
    names.discard("__init__")
    return sorted(names)


def pct(sorted_vals, p):
    """Nearest-rank percentile."""
    if not sorted_vals:
        return float("nan")
    k = max(0, min(len(sorted_vals) - 1, int(-(-p * len(sorted_vals) // 100)) - 1))
    return sorted_vals[k]


class Server:
    def __init__(self, binary, data_dir, log_path, allow_root, start_timeout=30.0):
        self.log = open(log_path, "w")
        self.proc, self.addr = start_serve(
            [binary, "serve", "--bind", "127.0.0.1:0", "--data-dir", data_dir, "--quiet", "--no-auth",
             "--allow-root", allow_root],
            what=f"canopy serve (see {log_path})", timeout=start_timeout, log=self.log)
        host, port = self.addr.rsplit(":", 1)
        if host not in ("127.0.0.1", "[::1]"):
            self.stop()
            raise RuntimeError("server bound %s, expected loopback" % self.addr)
        self.host, self.port = "127.0.0.1", int(port)

    def call(self, method, path, body=None, timeout=60.0):
        conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        try:
            data = None if body is None else json.dumps(body).encode()
            headers = {"Content-Type": "application/json"} if data is not None else {}
            conn.request(method, path, body=data, headers=headers)
            resp = conn.getresponse()
            raw = resp.read()
            try:
                return resp.status, json.loads(raw)
            except ValueError:
                return resp.status, raw.decode(errors="replace")
        finally:
            conn.close()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def repo_status(server, repo_id):
    code, st = server.call("GET", "/status?repo=" + repo_id)
    if code != 200:
        raise RuntimeError("GET /status -> %s %s" % (code, st))
    for r in st.get("repos", []):
        if r.get("repo_id") == repo_id:
            return r
    raise RuntimeError("repo %s not in /status" % repo_id)


def wait_idle(server, repo_id, timeout, stop=None):
    """Polls until the repo is ready and not indexing; returns its status or None on timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r = repo_status(server, repo_id)
        if r.get("status") == "failed":
            raise RuntimeError("indexing failed: %s" % r.get("last_error"))
        if r.get("ready") and not r.get("indexing") and not r.get("rerun_queued"):
            return r
        if stop is not None and stop.is_set():
            return None
        time.sleep(0.2)
    return None


class Load:
    """Closed-loop POST /query from `threads` keep-alive clients."""

    def __init__(self, server, repo_id, symbols, threads, duration, timeout, seed):
        self.server, self.repo_id, self.symbols = server, repo_id, symbols
        self.threads, self.duration, self.timeout, self.seed = threads, duration, timeout, seed
        self.lock = threading.Lock()
        self.lat = {"symbol": [], "pattern": []}
        self.errors = []
        self.n_errors = 0
        self.connects = 0
        self.empty = 0

    def worker(self, idx, deadline):
        rng = random.Random(self.seed * 1000 + idx)
        conn = None
        lat = {"symbol": [], "pattern": []}
        errs, n_err, connects, empty = [], 0, 0, 0
        i = idx
        while time.monotonic() < deadline:
            i += 1
            if i % 2:
                kind, body = "symbol", {"repo": self.repo_id, "symbol": rng.choice(self.symbols)}
            else:
                kind, body = "pattern", {"repo": self.repo_id, "pattern": rng.choice(PATTERNS)}
            data = json.dumps(body).encode()
            if conn is None:
                conn = http.client.HTTPConnection(self.server.host, self.server.port, timeout=self.timeout)
                connects += 1
            t0 = time.perf_counter()
            try:
                conn.request("POST", "/query", body=data,
                             headers={"Content-Type": "application/json"})
                resp = conn.getresponse()
                raw = resp.read()
                dt = time.perf_counter() - t0
                lat[kind].append(dt * 1000)
                if resp.status != 200:
                    n_err += 1
                    if len(errs) < 3:
                        errs.append("%s %d: %s" % (kind, resp.status, raw[:200].decode(errors="replace")))
                else:
                    try:
                        if not json.loads(raw).get("handles"):
                            empty += 1
                    except ValueError:
                        n_err += 1
                        if len(errs) < 3:
                            errs.append("%s: unparsable 200 body %r" % (kind, raw[:100]))
                if resp.getheader("Connection", "").lower() == "close" or resp.will_close:
                    conn.close()
                    conn = None
            except (OSError, http.client.HTTPException) as e:
                dt = time.perf_counter() - t0
                lat[kind].append(dt * 1000)
                n_err += 1
                if len(errs) < 3:
                    errs.append("%s: %s: %s" % (kind, type(e).__name__, e))
                conn.close()
                conn = None
        if conn is not None:
            conn.close()
        with self.lock:
            for k in lat:
                self.lat[k].extend(lat[k])
            self.errors.extend(errs)
            self.n_errors += n_err
            self.connects += connects
            self.empty += empty

    def run(self):
        start = time.monotonic()
        deadline = start + self.duration
        ts = [threading.Thread(target=self.worker, args=(k, deadline), daemon=True)
              for k in range(self.threads)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(self.duration + self.timeout + 30)
        self.elapsed = time.monotonic() - start
        self.hung = sum(t.is_alive() for t in ts)
        return self

    def row(self, label):
        all_lat = sorted(self.lat["symbol"] + self.lat["pattern"])
        sym, pat = sorted(self.lat["symbol"]), sorted(self.lat["pattern"])
        n = len(all_lat)
        return ("| %s | %d | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %d | %d | %d |"
                % (label, n, n / self.elapsed, pct(all_lat, 50), pct(all_lat, 99),
                   all_lat[-1] if all_lat else float("nan"),
                   pct(sym, 50), pct(pat, 50), self.n_errors, self.empty, self.connects))


class Reindexer:
    """Background loop: modify files in the copy, POST /reindex, wait for the run."""

    def __init__(self, server, repo_id, repo, files, n_modify, max_runs, window, seed):
        self.server, self.repo_id, self.repo = server, repo_id, repo
        self.files = [f for f in files if os.path.splitext(f)[1] in COMMENT]
        self.n_modify, self.max_runs, self.window = n_modify, max_runs, window
        self.rng = random.Random(seed)
        self.stop = threading.Event()
        self.runs = []          # (posted status, reindex response status, seconds to idle or None)
        self.problems = []
        self.files_modified = 0

    def modify(self, it):
        for rel in self.rng.sample(self.files, min(self.n_modify, len(self.files))):
            ext = os.path.splitext(rel)[1]
            with open(os.path.join(self.repo, rel), "a", encoding="utf-8") as f:
                f.write("\n%s bench edit %d: reindex_marker_%d\n" % (COMMENT[ext], it, it))
            self.files_modified += 1

    def loop(self):
        deadline = time.monotonic() + self.window
        it = 0
        while not self.stop.is_set() and it < self.max_runs and time.monotonic() < deadline:
            it += 1
            self.modify(it)
            t0 = time.monotonic()
            try:
                code, body = self.server.call("POST", "/reindex", {"repo": self.repo_id}, timeout=30)
            except (OSError, http.client.HTTPException) as e:
                self.problems.append("POST /reindex: %s: %s" % (type(e).__name__, e))
                continue
            if code != 200:
                self.problems.append("POST /reindex -> %d %s" % (code, str(body)[:200]))
                time.sleep(0.5)
                continue
            left = max(0.0, deadline - time.monotonic())
            try:
                st = wait_idle(self.server, self.repo_id, left + 120, self.stop)
            except (RuntimeError, OSError, http.client.HTTPException) as e:
                self.problems.append("waiting for run: %s" % e)
                st = None
            secs = time.monotonic() - t0 if st is not None else None
            self.runs.append((body.get("status"), body.get("generation"),
                              st.get("generation") if st else None, secs))

    def start(self):
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.thread.start()

    def finish(self):
        self.stop.set()
        self.thread.join(180)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repo", default=os.path.expanduser("~/.cache/canopy-bench/synth"))
    ap.add_argument("--bin", default=DEFAULT_BIN)
    ap.add_argument("--threads", type=int, default=16)
    ap.add_argument("--duration", type=float, default=15.0, help="seconds per phase")
    ap.add_argument("--modify", type=int, default=300, help="files modified before each reindex")
    ap.add_argument("--max-reindex", type=int, default=50, help="most reindex runs in the window")
    ap.add_argument("--timeout", type=float, default=30.0, help="per-request client timeout")
    ap.add_argument("--ready-timeout", type=float, default=600.0)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = ap.parse_args()

    src = os.path.realpath(os.path.expanduser(args.repo))
    tmp = tempfile.mkdtemp(prefix="canopy-http-bench-")
    copy = os.path.join(tmp, "repo")
    server = None
    try:
        t0 = time.monotonic()
        subprocess.run(["cp", "-a", src, copy], check=True)
        copy_s = time.monotonic() - t0
        files = tracked_files(copy)
        symbols = collect_symbols(copy, files, seed=args.seed)

        server = Server(args.bin, os.path.join(tmp, "data"), os.path.join(tmp, "serve.log"), tmp)
        print("server: http://%s:%d  (copy of %s in %s, copied in %.1fs; %d files, %d symbols)"
              % (server.host, server.port, src, copy, copy_s, len(files), len(symbols)))
        code, added = server.call("POST", "/repos/add", {"path": copy})
        if code != 200:
            sys.exit("POST /repos/add -> %d %s" % (code, added))
        repo_id = added["repo_id"]
        t0 = time.monotonic()
        code, ri = server.call("POST", "/reindex", {"repo": repo_id})
        if code != 200:
            sys.exit("POST /reindex -> %d %s" % (code, ri))
        st = wait_idle(server, repo_id, args.ready_timeout)
        if st is None:
            sys.exit("repo not ready within %.0fs" % args.ready_timeout)
        li = st.get("last_index") or {}
        print("initial /reindex: ready in %.1fs, generation %s, files_indexed %s"
              % (time.monotonic() - t0, st.get("generation"),
                 (st.get("index") or {}).get("files_indexed")))
        # Keep-alive check.
        conn = http.client.HTTPConnection(server.host, server.port, timeout=10)
        conn.request("GET", "/health")
        r = conn.getresponse()
        r.read()
        print("keep-alive: %s (HTTP/1.%d, Connection: %s)"
              % ("no" if r.will_close else "yes", r.version - 10, r.getheader("Connection")))
        conn.close()

        cpu0 = cpu_seconds(server.proc.pid)
        idle = Load(server, repo_id, symbols, args.threads, args.duration, args.timeout, args.seed).run()
        cpu1 = cpu_seconds(server.proc.pid)

        gen_before = repo_status(server, repo_id).get("generation")
        rx = Reindexer(server, repo_id, copy, files, args.modify, args.max_reindex,
                       args.duration, args.seed)
        rx.start()
        busy = Load(server, repo_id, symbols, args.threads, args.duration, args.timeout,
                    args.seed + 1).run()
        rx.finish()
        st = wait_idle(server, repo_id, 300)
        gen_after = st.get("generation") if st else None
        alive = server.proc.poll() is None

        print()
        print("| phase | requests | req/s | p50 ms | p99 ms | max ms | symbol p50 ms | pattern p50 ms | errors | empty results | connections |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        print(idle.row("idle (%d threads, %gs)" % (args.threads, args.duration)))
        print(busy.row("during reindex (%d threads, %gs)" % (args.threads, args.duration)))
        print()
        answered = len(idle.lat["symbol"]) + len(idle.lat["pattern"]) - idle.n_errors
        if cpu0 is not None and cpu1 is not None and answered:
            print("server CPU per answered request, idle phase: %.2f ms (%.2f CPU s over %d requests)"
                  % ((cpu1 - cpu0) * 1e3 / answered, cpu1 - cpu0, answered))
        done = [r for r in rx.runs if r[3] is not None]
        durs = sorted(r[3] for r in done)
        print("reindex during load: %d POST /reindex (%d files modified in total, %d per run), "
              "%d runs finished, run time p50 %.1fs max %.1fs; generation %s -> %s; statuses %s"
              % (len(rx.runs), rx.files_modified, args.modify, len(done),
                 pct(durs, 50) if durs else float("nan"), durs[-1] if durs else float("nan"),
                 gen_before, gen_after, sorted(set(r[0] for r in rx.runs))))
        print("server alive at end: %s; hung client threads: idle %d, reindex %d"
              % (alive, idle.hung, busy.hung))
        problems = [("idle", e) for e in idle.errors] + [("reindex", e) for e in busy.errors] + \
                   [("reindexer", e) for e in rx.problems]
        if problems:
            print()
            print("problems (first few per thread):")
            for ph, e in problems[:30]:
                print("- %s: %s" % (ph, e))
        return 1 if (idle.n_errors or busy.n_errors or rx.problems or not alive) else 0
    finally:
        if server is not None:
            server.stop()
        if args.keep:
            print("kept %s" % tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
