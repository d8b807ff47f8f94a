#!/usr/bin/env python3
"""Write a deterministic stratified subset of instances_dev.jsonl.

  make_subset.py OUT.jsonl [--n 60] [--repo R]... [--limit N] [--instances FILE]

--n N      about N instances, spread over repos: every repo gets at least 1 (if it has any)
           and the rest in proportion to its share, capped so small repos are not drowned;
           within a repo, instances are taken evenly spaced in instance-id order.
--n 0      all selected instances (after --repo / --limit), in file order.
--first N  all selected instances, reordered: the --n N stratified subset first, then the rest
           interleaved by repo in proportion (so a partial run is still balanced). Scoring the
           first N predictions gives the subset numbers early.
"""
import argparse, json, os


def stratified(inst, n):
    """About n instances of inst spread over repos (the --n rule above), in repo-size order."""
    by = {}
    for r in inst:
        by.setdefault(r["repo"], []).append(r)
    total = len(inst)
    # square-root-ish allocation: min 1, then proportional to sqrt(size) so big repos (django) do not dominate
    w = {k: len(v) ** 0.6 for k, v in by.items()}
    ws = sum(w.values())
    alloc = {k: max(1, min(len(by[k]), round(n * w[k] / ws))) for k in by}
    # fix the sum to n (or as close as sizes allow)
    keys = sorted(by, key=lambda k: -len(by[k]))
    while sum(alloc.values()) > n:
        k = max(keys, key=lambda k: alloc[k]); alloc[k] -= 1
    i = 0
    while sum(alloc.values()) < min(n, total):
        k = keys[i % len(keys)]; i += 1
        if alloc[k] < len(by[k]): alloc[k] += 1
    out = []
    for k in keys:
        rs = sorted(by[k], key=lambda r: r["instance_id"])
        m = alloc[k]
        out += [rs[int(j * len(rs) / m)] for j in range(m)]
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--n", type=int, default=0)
    ap.add_argument("--repo", action="append", default=[])
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--first", type=int, default=0)
    ap.add_argument("--instances", default="/work/shared/eval/instances_dev.jsonl")
    a = ap.parse_args()
    inst = [json.loads(l) for l in open(a.instances) if l.strip()]
    if a.repo:
        inst = [r for r in inst if r["repo"] in a.repo]
    if a.first:
        a.n = a.first
    everything = list(inst)
    if a.n:
        inst = stratified(inst, a.n)
    if a.first:
        ids = {r["instance_id"] for r in inst}
        by = {}
        for r in everything:
            if r["instance_id"] not in ids:
                by.setdefault(r["repo"], []).append(r)
        keys = sorted(by, key=lambda k: -len(by[k]))
        prog = {k: 0 for k in keys}
        rest_n = sum(len(v) for v in by.values())
        for _ in range(rest_n):
            k = min((k for k in keys if prog[k] < len(by[k])), key=lambda k: (prog[k] + 1) / len(by[k]))
            inst.append(by[k][prog[k]]); prog[k] += 1
    if a.limit:
        inst = inst[:a.limit]
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w") as f:
        for r in inst:
            f.write(json.dumps(r) + "\n")
    from collections import Counter
    print(f"{len(inst)} instances -> {a.out}: " + ", ".join(f"{k.split('/')[1]}={v}" for k, v in Counter(r['repo'] for r in inst).most_common()))


if __name__ == "__main__":
    main()
