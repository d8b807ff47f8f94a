#!/usr/bin/env python3
"""How often is the function to change a graph callee of the pack's best handles? (issue 26, item 3)

Issue 26 names a ranking cause: "the public-API definition wins over the internal function the
fix touches" (django__django-11490 asks about `QuerySet.values_list`; the fix is in
`SQLCompiler.get_combinator_sql`). The proposed cure is to bring the callees of the matched API
entry point into the suggested expands. This script measures the room for that cure on a
finished `stop_calibration.py` run, before any engine change, by asking the kept index:

  for each pack (instance x form) and each of its first TOP handles that is a function or method
  outside test code, `canopy callees path:line --depth D` (resolved edges of the code graph), and
  whether a callee overlaps a gold function span (score.py's rule: same path, overlapping lines).

  callee_ceiling.py RUN_DIR --trees ROOT [--bin canopy] [--top 3] [--depth 1] [--forms ...]
                    [--ids]

Prints per form: packs with gold functions, gold function already in the expands (the first 3
handles), not in the expands but a callee of the best handle (top 1), of any of the first TOP
handles; how many callees that took (the candidates a ranking would have to choose from); and
with --ids the instances where a callee holds the fix. Trees must be kept (`--keep`); lean trees
are read as they are (the graph lives in the index).
"""
import argparse, json, os, subprocess, sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import splits  # noqa: E402
import stop_calibration as sc_  # noqa: E402


def is_test(path):
    parts = path.split("/")
    return any(d in ("tests", "test", "testing") for d in parts[:-1]) or parts[-1].startswith("test_")


def callees(bin_, tree, h, depth):
    target = f"{h['path']}:{h['qualified_name'] or h['name']}"
    p = subprocess.run([bin_, "--root", tree, "--json", "callees", target, "--depth", str(depth),
                        "--max-results", "200"], capture_output=True, text=True)
    if p.returncode != 0:
        return []
    out = []
    for n in json.loads(p.stdout).get("nodes", []):
        hh = n["handle"]
        out.append({"path": hh["file_path"], "start": hh["line_range"][0], "end": hh["line_range"][1],
                    "qualified_name": hh.get("qualified_name"), "node_type": hh["node_type"],
                    "depth": n.get("depth")})
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run")
    ap.add_argument("--trees", required=True)
    ap.add_argument("--bin", default=None, help="default: the run's own copy of the binary")
    ap.add_argument("--top", type=int, default=3)
    ap.add_argument("--depth", type=int, default=1)
    ap.add_argument("--forms", default="full,title,query")
    ap.add_argument("--ids", action="store_true")
    a = ap.parse_args()
    bin_ = a.bin or os.path.join(a.run, "canopy")
    sc = sc_.load_score()
    meta = json.load(open(os.path.join(a.run, "meta.json")))
    insts = {i["instance_id"]: i for i in splits.instances(meta["split"])}
    rows = [json.loads(l) for l in open(os.path.join(a.run, "results.jsonl")) if l.strip()]
    for form in a.forms.split(","):
        n = in_exp = c1 = ctop = 0
        ncallees, hits = [], []
        for r in rows:
            inst = insts.get(r["instance_id"])
            p = r.get(form)
            if not inst or not p or "error" in r or not inst.get("gold_function_spans"):
                continue
            n += 1
            pp = sc_.per_pack(p, inst, sc)
            if pp["fn_in_expands"]:
                in_exp += 1
                continue
            tree = os.path.join(a.trees, "git", r["instance_id"])
            found_at, total = None, 0
            fns = [h for h in p["handles"][:a.top]
                   if h["node_type"] in ("function", "method") and not is_test(h["path"])]
            for rank, h in enumerate(fns):
                cs = callees(bin_, tree, h, a.depth)
                total += len(cs)
                if found_at is None and sc_.gold_fn_hit(cs, inst, sc):
                    found_at = (p["handles"].index(h), h["qualified_name"],
                                [c["qualified_name"] for c in cs if sc_.gold_fn_hit([c], inst, sc)], len(cs))
            ncallees.append(total)
            if found_at is not None:
                ctop += 1
                c1 += found_at[0] == 0
                hits.append((r["instance_id"], found_at))
        med = sorted(ncallees)[len(ncallees) // 2] if ncallees else 0
        print(f"{form:5s} packs with gold fn {n}: in expands {in_exp}; not in expands but a depth-{a.depth} "
              f"callee of handle 1: {c1}, of a function among the first {a.top}: {ctop} "
              f"(callees read per pack: median {med}, max {max(ncallees or [0])})")
        if a.ids:
            for iid, (rank, via, gold, k) in hits:
                print(f"   {iid}: handle {rank + 1} {via} -> {gold} (of {k} callees)")


if __name__ == "__main__":
    main()
