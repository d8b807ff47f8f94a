#!/usr/bin/env python3
"""Write the named splits of the dev set: splits/tune.txt and splits/report.txt.

  make_splits.py [--instances instances_dev.jsonl] [--out-dir bench/eval/splits] [--extra 90]

tune    = the ~160 instances earlier ranking choices were made on, rebuilt with the commands the
          README gives for them (make_subset.py is deterministic and unchanged since they ran):
            ctx60v   make_subset.py --n 60 on the dev set (also `sub60`/`--subset 60`)
            cval40b  make_subset.py --n 40 on the dev set minus ctx60v
            fresh60  make_subset.py --n 60 on the dev set minus ctx60v and cval40b
          plus --extra (90) more from the remaining instances, drawn per repo so that what is left
          (the report split) keeps the dev set's repo proportions as far as the pool allows:
          report target per repo = its dev-set share of the report size (largest remainder),
          capped at what the pool has (the shortfall goes to the repos with room, largest
          remainder first); within a repo the report ids are taken evenly spaced in id order
          (as make_subset.py does) and the repo's other pool ids go to tune.
report  = every other dev instance. Never tune on it: numbers in docs are reported on it.

Both files: one instance id a line, `#` lines are comments (a header saying how it was drawn;
tune.txt also marks which group each id came from). Read them with splits.load().
"""
import argparse, json, os, sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from make_subset import stratified  # noqa: E402

DEV = os.path.join(os.environ.get("EVAL_SHARED", "/work/shared/eval"), "instances_dev.jsonl")


def largest_remainder(weights, total, caps):
    """Integer allocation of total proportional to weights, each at most caps[k]."""
    ws = sum(weights.values())
    exact = {k: total * w / ws for k, w in weights.items()}
    alloc = {k: min(caps[k], int(exact[k])) for k in weights}
    order = sorted(weights, key=lambda k: (-(exact[k] - int(exact[k])), k))
    while sum(alloc.values()) < total:
        room = [k for k in order if alloc[k] < caps[k]]
        if not room:
            break
        # first the repos whose share was rounded down, then anyone with room, biggest share first
        under = [k for k in room if alloc[k] < exact[k]]
        k = under[0] if under else max(room, key=lambda k: (exact[k], k))
        alloc[k] += 1
    return alloc


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--instances", default=DEV)
    ap.add_argument("--out-dir", default=os.path.join(HERE, "splits"))
    ap.add_argument("--extra", type=int, default=90)
    a = ap.parse_args()
    dev = [json.loads(l) for l in open(a.instances) if l.strip()]
    ids = lambda rs: [r["instance_id"] for r in rs]
    ctx60v = stratified(dev, 60)
    used = set(ids(ctx60v))
    cval40b = stratified([r for r in dev if r["instance_id"] not in used], 40)
    used |= set(ids(cval40b))
    fresh60 = stratified([r for r in dev if r["instance_id"] not in used], 60)
    used |= set(ids(fresh60))
    pool = [r for r in dev if r["instance_id"] not in used]
    n_report = len(pool) - a.extra
    by = {}
    for r in pool:
        by.setdefault(r["repo"], []).append(r)
    dev_share = {}
    for r in dev:
        dev_share[r["repo"]] = dev_share.get(r["repo"], 0) + 1
    alloc = largest_remainder(dev_share, n_report, {k: len(by.get(k, [])) for k in dev_share})
    report = []
    for k in sorted(by):
        rs = sorted(by[k], key=lambda r: r["instance_id"])
        m = alloc.get(k, 0)
        report += [rs[int(j * len(rs) / m)] for j in range(m)]
    rep_ids = set(ids(report))
    extra = [r for r in pool if r["instance_id"] not in rep_ids]

    cmd = "python3 bench/eval/make_splits.py" + (f" --extra {a.extra}" if a.extra != 90 else "")
    from collections import Counter
    counts = lambda rs: ", ".join(f"{k.split('/')[1]} {v}" for k, v in Counter(r["repo"] for r in rs).most_common())
    os.makedirs(a.out_dir, exist_ok=True)
    tune_n = len(used) + len(extra)
    with open(os.path.join(a.out_dir, "tune.txt"), "w") as f:
        f.write(f"# tune split: {tune_n} SWE-bench dev instance ids (instances_dev.jsonl) that ranking may be tuned on.\n"
                f"# Regenerate: {cmd}  (see its docstring for the rule).\n"
                f"# = the 160 earlier choices were made on (ctx60v, cval40b, fresh60: make_subset.py as in README)\n"
                f"#   + {len(extra)} more drawn per repo so that the report split keeps the dev set's repo shares.\n"
                f"# repos: {counts([r for r in dev if r['instance_id'] in used or r in extra])}\n")
        for name, rs in (("ctx60v", ctx60v), ("cval40b", cval40b), ("fresh60", fresh60), ("extra", extra)):
            f.write(f"# -- {name} ({len(rs)})\n")
            f.writelines(i + "\n" for i in sorted(ids(rs)))
    with open(os.path.join(a.out_dir, "report.txt"), "w") as f:
        f.write(f"# report split: {len(report)} SWE-bench dev instance ids never tuned on; numbers in docs are reported on it.\n"
                f"# Regenerate: {cmd}  (the dev set minus tune.txt).\n"
                f"# repos: {counts(report)}\n")
        f.writelines(i + "\n" for i in sorted(ids(report)))
    print(f"tune {tune_n} ({counts([r for r in dev if r['instance_id'] in used or r in extra])})")
    print(f"report {len(report)} ({counts(report)})")


if __name__ == "__main__":
    main()
