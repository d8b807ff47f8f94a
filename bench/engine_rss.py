#!/usr/bin/env python3
"""Memory an idle engine gives back: RSS of `canopy serve` with R
repositories open, then after `--engine-idle-secs` closed them.

Issue 30 (capacity model, `M_repo`). Every service closes an engine nobody
used for `--engine-idle-secs` (fleet or not); this measures what that saves.

1. Makes R repositories (default 40) of F files each (default 200) with
   bench/gen_repo.py (deterministic: seed = index), one commit each.
2. Indexes them through a first `canopy serve` (POST /repos/add, POST
   /reindex, waits until each is ready), then stops it: the memory that
   indexing leaves in the allocator is not counted below.
3. Starts a second `canopy serve` on the same data directory with
   `--engine-idle-secs S` (default 5) and reads its VmRSS ("started").
4. Sends one POST /query to every repository, so every engine is open
   (`canopy_engines_open` = R), and reads VmRSS ("R engines open").
5. Sends nothing until `canopy_engines_open` is 0 (the idle closer closed
   every engine), and reads VmRSS ("after idle close").
6. Queries every repository again (every engine reopened) and reads VmRSS
   ("reopened"), then waits for the idle close once more ("closed again").

Prints each reading, and (open − closed) / R: the resident memory one
closed engine gives back to the operating system. Only 127.0.0.1 is
contacted. Python 3 stdlib only. Every number printed is measured in the
run that prints it.

    python3 bench/engine_rss.py --bin target/debug/canopy [--repos 40] [--files 200]
"""

import argparse
import http.client
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from repos import make_git_repos  # noqa: E402
from serve_proc import start_serve  # noqa: E402

TOKEN = "engine-rss-bench-token"


class Serve:
    def __init__(self, binary, work, data, idle_secs):
        cmd = [binary, "--quiet", "serve", "--bind", "127.0.0.1:0", "--data-dir", data,
               "--allow-root", work, "--token", TOKEN]
        if idle_secs is not None:
            cmd += ["--engine-idle-secs", str(idle_secs)]
        self.proc, self.addr = start_serve(cmd)

    def request(self, method, path, body=None):
        host, port = self.addr.rsplit(":", 1)
        c = http.client.HTTPConnection(host, int(port), timeout=300)
        c.request(method, path, body=json.dumps(body) if body is not None else None,
                  headers={"Content-Type": "application/json",
                           "Authorization": f"Bearer {TOKEN}"})
        r = c.getresponse()
        payload = r.read()
        c.close()
        return r.status, payload

    def json(self, method, path, body=None):
        status, payload = self.request(method, path, body)
        if status != 200:
            sys.exit(f"{method} {path}: {status} {payload[:300]!r}")
        return json.loads(payload)

    def metric(self, name):
        _, text = self.request("GET", "/metrics")
        for line in text.decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
        sys.exit(f"no {name} in /metrics")

    def rss_mib(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        return 0.0

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=60)


def query_all(serve, ids):
    for repo_id in ids:
        out = serve.json("POST", "/query", {"repo": repo_id, "pattern": "invoice"})
        if not out.get("handles"):
            sys.exit(f"no answer from {repo_id}: {str(out)[:300]}")


def wait_closed(serve, timeout):
    deadline = time.time() + timeout
    while serve.metric("canopy_engines_open") > 0:
        if time.time() > deadline:
            sys.exit("engines were not closed in time")
        time.sleep(0.5)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default="target/release/canopy")
    ap.add_argument("--repos", type=int, default=40)
    ap.add_argument("--files", type=int, default=200)
    ap.add_argument("--idle-secs", type=int, default=5)
    ap.add_argument("--keep", action="store_true", help="keep the scratch directory")
    args = ap.parse_args()
    binary = os.path.abspath(args.bin)
    work = tempfile.mkdtemp(prefix="canopy-engine-rss-")
    data = os.path.join(work, "data")
    try:
        roots = make_git_repos(work, args.repos, args.files)
        first = Serve(binary, work, data, None)
        ids = []
        for root in roots:
            ids.append(first.json("POST", "/repos/add", {"path": root})["repo_id"])
        for repo_id in ids:
            first.json("POST", "/reindex", {"repo": repo_id})
            deadline = time.time() + 600
            while True:
                view = first.json("GET", f"/status?repo={repo_id}")["repos"][0]
                if view.get("ready") and not view.get("indexing"):
                    break
                if time.time() > deadline:
                    sys.exit(f"{repo_id} was not indexed in time")
                time.sleep(0.2)
        first.stop()

        serve = Serve(binary, work, data, args.idle_secs)
        rows = [("started", serve.rss_mib(), serve.metric("canopy_engines_open"))]
        query_all(serve, ids)
        rows.append((f"{args.repos} engines open", serve.rss_mib(),
                     serve.metric("canopy_engines_open")))
        opened = rows[-1][1]
        wait_closed(serve, args.idle_secs * 4 + 60)
        rows.append(("after idle close", serve.rss_mib(), serve.metric("canopy_engines_open")))
        closed = rows[-1][1]
        query_all(serve, ids)
        rows.append(("reopened", serve.rss_mib(), serve.metric("canopy_engines_open")))
        reopened = rows[-1][1]
        wait_closed(serve, args.idle_secs * 4 + 60)
        rows.append(("closed again", serve.rss_mib(), serve.metric("canopy_engines_open")))
        closed_again = rows[-1][1]
        serve.stop()

        print(f"{args.repos} repositories of {args.files} generated files, "
              f"--engine-idle-secs {args.idle_secs}, {binary}")
        print("| state | RSS MiB | canopy_engines_open |")
        print("|---|---:|---:|")
        for name, rss, open_ in rows:
            print(f"| {name} | {rss:.1f} | {open_:.0f} |")
        print(f"given back per closed engine: {(opened - closed) / args.repos:.2f} MiB "
              f"(first close), {(reopened - closed_again) / args.repos:.2f} MiB (second)")
    finally:
        if args.keep:
            print(f"kept {work}", file=sys.stderr)
        else:
            subprocess.run(["rm", "-rf", work])


if __name__ == "__main__":
    main()
