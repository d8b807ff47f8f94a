#!/usr/bin/env python3
"""How often a huge handle (a class or file unit of >= MIN tokens) sits in a pack, and whether a gold
function lies inside it: what "show its best-matching member instead" (issue 26, item 3) could win
or lose, read from a finished stop_calibration.py run (no packs are built).

  huge_handles.py RUN_DIR [--split tune] [--min 400]

Prints packs, huge handles, those holding a gold function (inside the handle's line range, score.py's
path rule), their mean share of the pack's handle tokens, and the instance ids. A huge handle that
holds a gold function already counts as a function hit (score.py: overlapping line ranges), so a
member that is not the gold one turns that hit into a miss; a huge handle without one only costs
budget.
"""
import argparse, json, os, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import splits  # noqa: E402

BIG_KINDS = ("class", "struct", "impl", "interface", "module", "file")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run")
    ap.add_argument("--split", default="tune")
    ap.add_argument("--min", type=int, default=400)
    a = ap.parse_args()
    insts = {i["instance_id"]: i for i in splits.instances(a.split)}
    rows = [json.loads(l) for l in open(os.path.join(a.run, "results.jsonl"))]
    packs = big = inside = 0
    share, hits, misses = [], set(), set()
    for r in rows:
        inst = insts.get(r["instance_id"])
        if not inst:
            continue
        spans = [(k.split("::")[0], v[0], v[1]) for k, v in inst["gold_function_spans"].items()]
        for form in ("full", "title", "query"):
            p = r.get(form)
            if not p or "handles" not in p:
                continue
            packs += 1
            total = sum(h.get("tokens") or 0 for h in p["handles"])
            for h in p["handles"]:
                if h["node_type"] not in BIG_KINDS or (h.get("tokens") or 0) < a.min:
                    continue
                big += 1
                share.append((h.get("tokens") or 0) / max(total, 1))
                if any(path == h["path"] and h["start"] <= s and e <= h["end"] for path, s, e in spans):
                    inside += 1
                    hits.add(r["instance_id"])
                else:
                    misses.add(r["instance_id"])
    print(f"{len(rows)} instances, {packs} packs; huge handles (>= {a.min} tokens, {'/'.join(BIG_KINDS)}): {big}; "
          f"holding a gold function: {inside}; mean share of their pack's handle tokens: "
          f"{sum(share) / max(len(share), 1):.2f}")
    print("holding a gold function:", " ".join(sorted(hits)))
    print("holding none:", " ".join(sorted(misses - hits)))


if __name__ == "__main__":
    main()
