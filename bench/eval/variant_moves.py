#!/usr/bin/env python3
"""Which packs a ranking setting moved, by instance id, against the base run.

  variant_moves.py OUT NAME [NAME ...] [--forms full,title,query]

OUT is a `stop_calibration.py --variants` run (base in OUT, each setting in OUT-NAME); only the
instances every given run holds are read. Per setting and form: how many packs differ from the base
in their handles (ids in order), and the ids whose function hits moved — gained or lost a gold
function in the first 5 handles (score.py's function Hit@5: same file, overlapping lines), in the
pack at all, or in the handles the pack tells the agent to expand — and those whose number of gold
functions in the first 5 changed while Hit@5 did not. compare_variants.py gives the aggregate table.
"""
import argparse, json, os, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import splits  # noqa: E402
import stop_calibration as stopcal  # noqa: E402
from compare_variants import rows  # noqa: E402


def gold_hits(handles, inst, sc):
    """The gold functions (ids) that some handle of `handles` overlaps."""
    spans = inst.get("gold_function_spans") or {}
    got = set()
    for h in handles:
        hp = sc.norm_path(h["path"])
        for g in inst.get("gold_functions") or []:
            sp = spans.get(g)
            if g.split("::", 1)[0] == hp and sp and sc.overlaps(h["start"], h["end"], sp[0], sp[1]):
                got.add(g)
    return got


def facts(rec, inst, sc):
    hs = rec.get("handles") or []
    by_id = {h["id"]: h for h in hs}
    exp = [by_id[i] for i in rec.get("expand") or [] if i in by_id]
    return {"top5": gold_hits(hs[:5], inst, sc), "pack": gold_hits(hs, inst, sc), "expand": gold_hits(exp, inst, sc),
            "ids": [h["id"] for h in hs], "stop": bool(rec.get("stop"))}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("names", nargs="+")
    ap.add_argument("--forms", default="full,title,query")
    a = ap.parse_args()
    res = {"base": rows(os.path.join(a.out, "results.jsonl"))}
    for n in a.names:
        res[n] = rows(os.path.join(f"{a.out}-{n}", "results.jsonl"))
    ids = sorted(set.intersection(*[set(v) for v in res.values()]))
    dev = {json.loads(l)["instance_id"]: json.loads(l) for l in open(splits.DEV) if l.strip()}
    sc = stopcal.load_score()
    print(f"{len(ids)} instances")
    for n in a.names:
        print(f"\n## {n}")
        for f in a.forms.split(","):
            changed, moves = [], []
            for i in ids:
                b = facts(res["base"][i].get(f, {}), dev[i], sc)
                v = facts(res[n][i].get(f, {}), dev[i], sc)
                if b["ids"] != v["ids"]:
                    changed.append(i)
                if b["stop"] != v["stop"]:
                    moves.append(f"{i} stop {b['stop']}->{v['stop']}")
                for part, label in (("top5", "Hit@5"), ("pack", "in pack"), ("expand", "in expands")):
                    if bool(b[part]) != bool(v[part]):
                        moves.append(f"{i} {label} {'gained' if v[part] else 'LOST'}: "
                                     f"{sorted(v[part] or b[part])}")
                if bool(b["top5"]) == bool(v["top5"]) and len(b["top5"]) != len(v["top5"]):
                    moves.append(f"{i} gold fns in first 5: {len(b['top5'])} -> {len(v['top5'])}")
            print(f"{f}: {len(changed)} of {len(ids)} packs differ: {' '.join(changed)}")
            for m in moves:
                print(f"  {f}: {m}")


if __name__ == "__main__":
    main()
