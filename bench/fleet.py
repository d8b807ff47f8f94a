#!/usr/bin/env python3
"""Fleet mode under load: three `canopy serve --fleet` nodes on loopback.

Issue 30. With a binary that has no `serve --fleet` the script does the
set-up, says so and exits 2 (with --setup-only it exits 0).

1. Makes R small repositories (default 50) with bench/gen_repo.py
   (deterministic: seed = index), one commit each, and a bare clone of each
   (the `git_url` the nodes fetch from: file://...).
2. Starts a throwaway PostgreSQL (`cargo run --example throwaway_pg` of
   crates/canopy-fleet, or the built example named by --pg-example: it
   goes away when this script's pipe closes).
3. Starts N nodes (default 3): `canopy serve --fleet URL --bind 127.0.0.1:0
   --data-dir D_i --fleet-node-id node-i --token T --fleet-allow-local-git`
   (default lease timing, or --lease-ttl-ms) and reads each bound address from its
   `listening on http://ADDR` line.
4. POST /repos/add {"git_url": file://..., "ref": "main"} for every
   repository (round robin over the nodes), then waits until GET /fleet
   shows every repository owned and each answers POST /query, and then
   until every owner is the node placement prefers (the first node up
   holds repositories that move once the others have settled: a load
   phase that met those handovers would count their 503s).
5. Load: T client threads (default 16), each with one keep-alive
   connection to a node (round robin), POST /query {repo, pattern} on a
   random repository for D seconds (default 15): req/s, p50/p95, errors
   (by status), and the nodes' CPU seconds (/proc) per answered request.
6. Forward overhead: one client, for each repository the same query sent
   to its owner and to a non-owner, alternating, K times (default 100):
   p50 of (non-owner) minus p50 of (owner).
   Per-repository costs on the owners: checkout bytes (without .git and
   .canopy), index bytes (.canopy), first index time (the owner's report),
   and each node's resident memory (VmRSS) after the load.
7. Incremental reindex after a fetch (`T_inc`): for K repositories
   (default 10), one at a time, a commit that adds one function is pushed
   to the bare clone, then `POST /repos/{id}/fetch` goes to a non-owner
   (forwarded); measured are the fetch call's answer time, the time until
   the new function is found through that non-owner (POST /query
   {symbol}, polled every 20 ms), and the owner's own report of the run
   (`last_index.duration_ms` in GET /repos).
8. Takeover: kill -9 the node owning the most repositories; for each of
   its repositories, the time until a query through a surviving node
   answers 200 again (max and p50), bounded by 60 s.

Only 127.0.0.1 is contacted. Python 3 stdlib only. Every number printed is
measured in the run that prints it.

    python3 bench/fleet.py --bin target/release/canopy
"""

import argparse
import http.client
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from repos import make_git_repos  # noqa: E402
from serve_proc import cpu_seconds, start_serve  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TOKEN = "fleet-bench-shared-token"
PATTERNS = ["invoice", "ledger", "tenant", "retry", "payload", "cursor",
            "snapshot", "session", "token", "cache", "mapping", "quota"]


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)


def make_repos(work, count, files):
    """Small deterministic repositories and their bare clones; returns file:// URLs."""
    urls = []
    for i, src in enumerate(make_git_repos(work, count, files)):
        bare = os.path.join(work, "git", f"repo{i:03d}.git")
        run(["git", "clone", "--quiet", "--bare", src, bare])
        urls.append("file://" + bare)
    return urls


def start_postgres(example=None):
    cmd = [example] if example else ["cargo", "run", "--quiet", "--example", "throwaway_pg"]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline().strip()
    if not line.startswith("url="):
        proc.kill()
        sys.exit(f"throwaway PostgreSQL did not start (got {line!r})")
    return proc, line[len("url="):]


def has_fleet_flag(binary):
    out = subprocess.run([binary, "serve", "--help"], capture_output=True, text=True)
    return "--fleet" in out.stdout


class Node:
    def __init__(self, binary, url, work, i, lease_ttl_ms=None):
        self.name = f"node-{i}"
        self.data = os.path.join(work, "data", self.name)
        os.makedirs(self.data, exist_ok=True)
        self.proc, self.addr = start_serve(
            [binary, "--quiet", "serve", "--fleet", url, "--bind", "127.0.0.1:0",
             "--data-dir", self.data, "--fleet-node-id", self.name, "--allow-root", work,
             "--token", TOKEN, "--fleet-allow-local-git"]
            + (["--fleet-lease-ttl-ms", str(lease_ttl_ms)] if lease_ttl_ms else []),
            what=self.name, timeout=60)

    def conn(self):
        host, port = self.addr.rsplit(":", 1)
        return http.client.HTTPConnection(host, int(port), timeout=30)

    def request(self, method, path, body=None, conn=None):
        c = conn or self.conn()
        data = json.dumps(body) if body is not None else None
        c.request(method, path, body=data, headers={
            "Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"})
        r = c.getresponse()
        payload = r.read()
        if conn is None:
            c.close()
        return r.status, (json.loads(payload) if payload else None)

    def rss_bytes(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        return 0

    def kill(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()


def teardown(nodes, pg, work, keep):
    """Kills the nodes, stops the throwaway PostgreSQL (its pipe closed) and
    removes the work directory unless `keep`."""
    for n in nodes:
        n.kill()
    if pg is not None:
        pg.stdin.close()
        pg.wait(timeout=60)
    if not keep:
        shutil.rmtree(work, ignore_errors=True)


def pctl(values, p):
    if not values:
        return float("nan")
    v = sorted(values)
    return v[min(len(v) - 1, round((len(v) - 1) * p))]


def tree_bytes(path, skip=()):
    total = 0
    for dirpath, dirnames, filenames in os.walk(path):
        dirnames[:] = [d for d in dirnames if d not in skip]
        for f in filenames:
            try:
                total += os.lstat(os.path.join(dirpath, f)).st_size
            except OSError:
                pass
    return total


def costs(nodes, repo_ids, owners):
    """Per-repository source and index bytes in the owners' checkouts, and
    the owners' first-index times (their published reports)."""
    by_name = {n.name: n for n in nodes}
    src, idx, ratio = [], [], []
    for r in repo_ids:
        checkout = os.path.join(by_name[owners[r]].data, "fleet", "checkouts", r)
        s = tree_bytes(checkout, skip=(".git", ".canopy"))
        i = tree_bytes(os.path.join(checkout, ".canopy"))
        src.append(s)
        idx.append(i)
        if s:
            ratio.append(i / s)
    status, repos = nodes[0].request("GET", "/repos")
    index_ms = [v["last_index"]["duration_ms"] for v in repos
                if v.get("last_index") and "duration_ms" in v["last_index"]]
    return src, idx, ratio, index_ms


def wait_owned(nodes, repo_ids, limit, settled=False):
    """Owners by repository once every one has an owner; with `settled`, once
    every owner is also the node placement prefers (no handover pending, so
    a load phase does not measure a rebalancing)."""
    deadline = time.time() + limit
    while time.time() < deadline:
        status, view = nodes[0].request("GET", "/fleet")
        if status == 200:
            rows = {r["repo_id"]: r for r in view["repos"]}
            owners = {r: (rows.get(r) or {}).get("owner") for r in repo_ids}
            if all(owners.values()) and (not settled or all(
                    rows[r].get("preferred") == owners[r] for r in repo_ids)):
                return owners
        time.sleep(0.5)
    sys.exit("not every repository got " + ("its preferred owner" if settled else "an owner"))


def wait_answering(node, repo_ids, limit):
    for r in repo_ids:
        deadline = time.time() + limit
        while node.request("POST", "/query", {"repo": r, "pattern": "cache"})[0] != 200:
            if time.time() > deadline:
                sys.exit(f"{r} never answered")
            time.sleep(0.2)


def last_index_ms(node, repo):
    status, repos = node.request("GET", "/repos")
    for v in repos or []:
        if v.get("repo_id") == repo and v.get("last_index"):
            return v["last_index"].get("duration_ms"), v.get("generation")
    return None, None


def incremental(nodes, repo_ids, owners, work, samples, limit=60.0):
    """T_inc: a one-function commit pushed, fetched through a non-owner,
    then polled until the function is found; returns three lists of
    seconds (fetch answer, found, the owner's run)."""
    by_name = {n.name: n for n in nodes}
    answer_s, found_s, run_ms = [], [], []
    for k, r in enumerate(repo_ids[:samples]):
        i = repo_ids.index(r)
        src = os.path.join(work, "src", f"repo{i:03d}")
        bare = os.path.join(work, "git", f"repo{i:03d}.git")
        name = f"fleet_inc_probe_{k}"
        with open(os.path.join(src, f"{name}.py"), "w") as f:
            f.write(f"def {name}():\n    return {k}\n")
        git = ["git", "-C", src, "-c", "user.name=bench", "-c", "user.email=bench@example.invalid"]
        run(git + ["add", "-A"])
        run(git + ["commit", "--quiet", "-m", f"probe {k}"])
        run(["git", "-C", src, "push", "--quiet", bare, "main"])
        owner = by_name[owners[r]]
        other = next(n for n in nodes if n is not owner)
        _, before = last_index_ms(owner, r)
        t = time.perf_counter()
        status, body = other.request("POST", f"/repos/{r}/fetch")
        answer_s.append(time.perf_counter() - t)
        if status != 200:
            sys.exit(f"POST /repos/{r}/fetch via {other.name}: {status} {body}")
        while time.perf_counter() - t < limit:
            status, body = other.request("POST", "/query", {"repo": r, "symbol": name})
            if status == 200 and any(h.get("name") == name for h in (body or {}).get("handles", [])):
                found_s.append(time.perf_counter() - t)
                break
            time.sleep(0.02)
        else:
            sys.exit(f"{name} not found in {r} within {limit:.0f} s of the fetch")
        # The run's rows are searchable a moment before its report is
        # recorded: wait for the report of the generation it published.
        deadline = time.perf_counter() + limit
        while time.perf_counter() < deadline:
            ms, generation = last_index_ms(owner, r)
            if ms is not None and generation is not None and before is not None and generation > before:
                run_ms.append(ms)
                break
            time.sleep(0.05)
    return answer_s, found_s, run_ms


def load(nodes, repo_ids, threads, duration):
    lat, errors = [], {}
    lock = threading.Lock()
    stop = time.time() + duration

    def worker(k):
        node = nodes[k % len(nodes)]
        conn = node.conn()
        rng = random.Random(k)
        mine = []
        while time.time() < stop:
            body = {"repo": rng.choice(repo_ids), "pattern": rng.choice(PATTERNS)}
            t = time.perf_counter()
            try:
                status, _ = node.request("POST", "/query", body, conn)
            except (OSError, http.client.HTTPException):
                status = 0
                conn = node.conn()
            mine.append((time.perf_counter() - t, status))
        with lock:
            for d, s in mine:
                if s == 200:
                    lat.append(d)
                else:
                    errors[s] = errors.get(s, 0) + 1

    ts = [threading.Thread(target=worker, args=(k,)) for k in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return lat, errors


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(ROOT, "target", "release", "canopy"))
    ap.add_argument("--repos", type=int, default=50)
    ap.add_argument("--files", type=int, default=40, help="files per repository")
    ap.add_argument("--nodes", type=int, default=3)
    ap.add_argument("--threads", type=int, default=16)
    ap.add_argument("--duration", type=float, default=15.0)
    ap.add_argument("--forward-samples", type=int, default=100)
    ap.add_argument("--inc-samples", type=int, default=10,
                    help="repositories given a one-function commit and fetched (T_inc); 0 skips")
    ap.add_argument("--setup-only", action="store_true")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument("--lease-ttl-ms", type=int,
                    help="the nodes' lease time (default: serve's own, 10 s); the takeover waits for it")
    ap.add_argument("--pg-example", help="a built throwaway_pg example binary "
                    "(default: `cargo run -p canopy-fleet --example throwaway_pg`)")
    args = ap.parse_args()

    work = tempfile.mkdtemp(prefix="canopy-fleet-bench-")
    pg = None
    nodes = []
    try:
        t = time.time()
        urls = make_repos(work, args.repos, args.files)
        print(f"{args.repos} repositories of {args.files} files in {time.time() - t:.1f} s under {work}")
        pg, db_url = start_postgres(args.pg_example)
        print(f"PostgreSQL at {db_url}")
        if args.setup_only:
            return 0
        if not has_fleet_flag(args.bin):
            print(f"{args.bin} has no `serve --fleet` yet (phase 2 of issue 30); set-up only")
            return 2
        print(f"nproc {os.cpu_count()}, load average {os.getloadavg()}")
        nodes = [Node(args.bin, db_url, work, i, args.lease_ttl_ms) for i in range(args.nodes)]
        repo_ids = []
        for i, url in enumerate(urls):
            status, body = nodes[i % len(nodes)].request(
                "POST", "/repos/add", {"git_url": url, "ref": "main", "name": f"repo{i:03d}"})
            if status != 200:
                sys.exit(f"POST /repos/add {url}: {status} {body}")
            repo_ids.append(body["repo_id"])
        t = time.time()
        wait_owned(nodes, repo_ids, 300)
        wait_answering(nodes[0], repo_ids, 300)
        print(f"all {len(repo_ids)} repositories owned and answering after {time.time() - t:.1f} s")
        # The first node up may hold repositories that belong elsewhere until
        # the others have been registered for the settle time: wait for
        # those handovers, so the load below does not meet them.
        owners = wait_owned(nodes, repo_ids, 120, settled=True)
        wait_answering(nodes[0], repo_ids, 300)
        print(f"placement settled (every owner the preferred node) after {time.time() - t:.1f} s")
        src, idx, ratio, index_ms = costs(nodes, repo_ids, owners)
        print()
        print("| per repository | n | p50 | p95 |")
        print("|---|---:|---:|---:|")
        print(f"| checkout bytes (no .git, .canopy) | {len(src)} | {pctl(src, .5):.0f} | {pctl(src, .95):.0f} |")
        print(f"| index bytes (.canopy) | {len(idx)} | {pctl(idx, .5):.0f} | {pctl(idx, .95):.0f} |")
        print(f"| index bytes / source byte | {len(ratio)} | {pctl(ratio, .5):.2f} | {pctl(ratio, .95):.2f} |")
        print(f"| first index, ms (owner's report) | {len(index_ms)} | {pctl(index_ms, .5):.0f} | {pctl(index_ms, .95):.0f} |")

        cpu0 = [cpu_seconds(n.proc.pid) for n in nodes]
        lat, errors = load(nodes, repo_ids, args.threads, args.duration)
        cpu1 = [cpu_seconds(n.proc.pid) for n in nodes]
        print()
        print("| phase | requests | req/s | p50 ms | p95 ms | errors |")
        print("|---|---:|---:|---:|---:|---:|")
        print(f"| {args.threads} clients, {args.duration:.0f} s, any node | {len(lat)} | "
              f"{len(lat) / args.duration:.1f} | {pctl(lat, .5) * 1e3:.2f} | {pctl(lat, .95) * 1e3:.2f} | {sum(errors.values())} |")
        if errors:
            print("errors by status (0 = no answer): " + ", ".join(f"{k}: {v}" for k, v in sorted(errors.items())))
        if lat and None not in cpu0 + cpu1:
            used = sum(cpu1) - sum(cpu0)
            print(f"nodes' CPU per answered request (answer + forward, all nodes): "
                  f"{used * 1e3 / len(lat):.2f} ms ({used:.2f} CPU s over {len(lat)} requests)")

        print()
        counts = {}
        for o in owners.values():
            counts[o] = counts.get(o, 0) + 1
        for n in nodes:
            print(f"{n.name}: {counts.get(n.name, 0)} repositories, RSS {n.rss_bytes() / 2**20:.1f} MiB after the load")

        by_name = {n.name: n for n in nodes}
        owners = wait_owned(nodes, repo_ids, 60)
        owner_lat, forward_lat = [], []
        rng = random.Random(7)
        for _ in range(args.forward_samples):
            r = rng.choice(repo_ids)
            owner = by_name[owners[r]]
            other = next(n for n in nodes if n is not owner)
            body = {"repo": r, "pattern": rng.choice(PATTERNS)}
            for node, bucket in ((owner, owner_lat), (other, forward_lat)):
                t = time.perf_counter()
                node.request("POST", "/query", body)
                bucket.append(time.perf_counter() - t)
        print()
        print("| one client | n | p50 ms | p95 ms |")
        print("|---|---:|---:|---:|")
        print(f"| owner | {len(owner_lat)} | {pctl(owner_lat, .5) * 1e3:.2f} | {pctl(owner_lat, .95) * 1e3:.2f} |")
        print(f"| non-owner (forwarded) | {len(forward_lat)} | {pctl(forward_lat, .5) * 1e3:.2f} | {pctl(forward_lat, .95) * 1e3:.2f} |")
        print(f"| forward overhead (p50 difference) | | {(pctl(forward_lat, .5) - pctl(owner_lat, .5)) * 1e3:.2f} | |")

        if args.inc_samples > 0:
            owners = wait_owned(nodes, repo_ids, 60)
            answer_s, found_s, run_ms = incremental(nodes, repo_ids, owners, work, args.inc_samples)
            print()
            print("| incremental reindex after a fetch (T_inc), one commit adding one function | n | p50 ms | p95 ms |")
            print("|---|---:|---:|---:|")
            print(f"| `POST /repos/{{id}}/fetch` through a non-owner, answered | {len(answer_s)} | "
                  f"{pctl(answer_s, .5) * 1e3:.1f} | {pctl(answer_s, .95) * 1e3:.1f} |")
            print(f"| fetch sent → the new function found through that non-owner | {len(found_s)} | "
                  f"{pctl(found_s, .5) * 1e3:.1f} | {pctl(found_s, .95) * 1e3:.1f} |")
            print(f"| the owner's run (`last_index.duration_ms`) | {len(run_ms)} | "
                  f"{pctl(run_ms, .5):.1f} | {pctl(run_ms, .95):.1f} |")

        counts = {}
        for r, o in owners.items():
            counts[o] = counts.get(o, 0) + 1
        victim_name = max(counts, key=counts.get)
        victim = by_name[victim_name]
        survivors = [n for n in nodes if n is not victim]
        theirs = [r for r, o in owners.items() if o == victim_name]
        killed = time.time()
        victim.kill()
        back = {}
        deadline = killed + 60
        while len(back) < len(theirs) and time.time() < deadline:
            for r in theirs:
                if r not in back:
                    try:
                        if survivors[0].request("POST", "/query", {"repo": r, "pattern": "cache"})[0] == 200:
                            back[r] = time.time() - killed
                    except (OSError, http.client.HTTPException):
                        pass
            time.sleep(0.1)
        times = list(back.values())
        print()
        print(f"takeover after kill -9 of {victim_name} ({len(theirs)} repositories): "
              f"{len(times)} back within 60 s, p50 {statistics.median(times) if times else float('nan'):.1f} s, "
              f"max {max(times) if times else float('nan'):.1f} s")
        return 0
    finally:
        teardown(nodes, pg, work, args.keep)


if __name__ == "__main__":
    sys.exit(main())
