#!/usr/bin/env python3
"""How long a settings change takes to reach the owner in fleet mode (issue 30).

`POST /repos/{id}/settings {"watch": true}` on a node that does not own the
repository is written to PostgreSQL and answered; the owner learns of it
from the snapshot its lease keeper reads every heartbeat (docs/fleet.md,
"Repository settings"). This script measures that delay the way a user
sees it: from the moment the non-owner answered to the moment an edit made
after it is searchable through the owner, and, beside it, the same edit →
searchable time with the watch already on (the part of the first figure
that is not the settings' journey).

1. Makes R small path repositories (bench/gen_repo.py, one commit each) and
   starts a throwaway PostgreSQL and N nodes (default 2) as bench/fleet.py
   does; registers each repository by path (watch off) and waits until it
   is owned and answers.
2. For each of K rounds over the repositories: watch off through the
   non-owner (and a settle of --settle seconds, so the owner applied it);
   then watch on through the non-owner; right after its answer, writes
   `settings_probe_<k>` into a new file of the repository and rewrites it
   every 100 ms (an edit the owner's new watcher sees whenever it starts);
   polls `POST /query {symbol}` on the owner until the function is found.
   That is "settings → applied". Then, watch still on, one more function in
   another new file: "edit → searchable with the watch already on".
3. Prints p50 / p95 / max of both and of their difference.

Python 3 stdlib only; the nodes and PostgreSQL as in bench/fleet.py.

    python3 bench/fleet_settings.py --bin target/release/canopy [--repos 4] [--rounds 5]
"""

import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fleet import Node, has_fleet_flag, pctl, start_postgres, teardown, wait_answering, wait_owned  # noqa: E402
from repos import make_git_repos  # noqa: E402

POLL_S = 0.02
REWRITE_S = 0.1


def found(node, repo, name):
    status, body = node.request("POST", "/query", {"repo": repo, "symbol": name})
    return status == 200 and any(h.get("name") == name for h in (body or {}).get("handles", []))


def settings(node, repo, watch):
    status, body = node.request("POST", f"/repos/{repo}/settings", {"watch": watch})
    if status != 200:
        sys.exit(f"POST /repos/{repo}/settings watch={watch} via {node.name}: {status} {body}")


def probe_file(root, name, i):
    path = os.path.join(root, f"{name}.py")
    with open(path, "w") as f:
        f.write(f"# rewrite {i}\ndef {name}():\n    return {i}\n")
    return path


def time_until_found(owner, repo, root, name, limit, rewrite):
    """Seconds from now until `name` is found through `owner`; the file that
    defines it is written now (and rewritten every REWRITE_S when `rewrite`)."""
    start = time.monotonic()
    probe_file(root, name, 0)
    writes, last_write = 1, start
    while time.monotonic() - start < limit:
        if found(owner, repo, name):
            return time.monotonic() - start
        if rewrite and time.monotonic() - last_write >= REWRITE_S:
            probe_file(root, name, writes)
            writes, last_write = writes + 1, time.monotonic()
        time.sleep(POLL_S)
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))), "target", "release", "canopy"))
    ap.add_argument("--repos", type=int, default=4)
    ap.add_argument("--files", type=int, default=40, help="files per repository")
    ap.add_argument("--nodes", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--settle", type=float, default=5.0,
                    help="seconds after watch off before the next watch on (> one heartbeat)")
    ap.add_argument("--limit", type=float, default=30.0, help="give up on one probe after this")
    ap.add_argument("--pg-example", help="a built throwaway_pg example binary")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    args = ap.parse_args()
    if not has_fleet_flag(args.bin):
        sys.exit(f"{args.bin} has no `serve --fleet`")

    work = tempfile.mkdtemp(prefix="canopy-fleet-settings-")
    pg, nodes = None, []
    try:
        roots = make_git_repos(work, args.repos, args.files)
        pg, db_url = start_postgres(args.pg_example)
        print(f"nproc {os.cpu_count()}, load average {os.getloadavg()}")
        nodes = [Node(args.bin, db_url, work, i) for i in range(args.nodes)]
        repo_ids, root_of = [], {}
        for root in roots:
            status, body = nodes[0].request("POST", "/repos/add", {"path": root})
            if status != 200:
                sys.exit(f"POST /repos/add {root}: {status} {body}")
            repo_ids.append(body["repo_id"])
            root_of[body["repo_id"]] = root
        wait_owned(nodes, repo_ids, 120, settled=True)
        by_name = {n.name: n for n in nodes}
        wait_answering(nodes[0], repo_ids, 120)

        applied, steady, lost = [], [], 0
        for k in range(args.rounds):
            owners = wait_owned(nodes, repo_ids, 60, settled=True)
            for j, r in enumerate(repo_ids):
                owner = by_name[owners[r]]
                other = next(n for n in nodes if n is not owner)
                settings(other, r, False)
                time.sleep(args.settle)
                settings(other, r, True)
                t = time_until_found(owner, r, root_of[r], f"settings_probe_{k}_{j}", args.limit, True)
                if t is None:
                    lost += 1
                    continue
                applied.append(t)
                s = time_until_found(owner, r, root_of[r], f"steady_probe_{k}_{j}", args.limit, False)
                if s is not None:
                    steady.append(s)
            print(f"round {k + 1}: {len(applied)} settings probes, {len(steady)} steady probes", flush=True)

        print()
        print(f"{args.nodes} nodes, {args.repos} path repositories of {args.files} files, "
              f"{args.rounds} rounds, load average at the end {os.getloadavg()}")
        print()
        print("| from | n | p50 ms | p95 ms | max ms |")
        print("|---|---:|---:|---:|---:|")
        for label, v in (("watch on through a non-owner → an edit after it searchable on the owner", applied),
                         ("an edit → searchable, watch already on", steady)):
            print(f"| {label} | {len(v)} | {pctl(v, .5) * 1e3:.0f} | {pctl(v, .95) * 1e3:.0f} | "
                  f"{(max(v) if v else float('nan')) * 1e3:.0f} |")
        if applied and steady:
            print(f"| difference of the p50s (the settings' journey) | | "
                  f"{(pctl(applied, .5) - pctl(steady, .5)) * 1e3:.0f} | | |")
        if lost:
            print(f"\n{lost} settings probes not found within {args.limit:.0f} s")
            return 1
        return 0
    finally:
        teardown(nodes, pg, work, args.keep)


if __name__ == "__main__":
    sys.exit(main())
