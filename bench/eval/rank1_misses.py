#!/usr/bin/env python3
"""The packs whose first file is not a gold file, with what stands above it (issue 26, item 3).

  rank1_misses.py RUN [--form full]

RUN is a `stop_calibration.py` run dir. For each instance whose pack (in that question form) does
not put a gold file first: the gold files, the first gold file's rank among the pack's files (None:
not in the pack), the gold functions, the issue's title, and every handle (G = in a gold file) with
its relative score, tokens, kind, place and qualified name. Ends with the count.
"""
import argparse, json, os, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import splits  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run")
    ap.add_argument("--form", default="full")
    a = ap.parse_args()
    inst = {}
    for line in open(splits.DEV):
        if line.strip():
            r = json.loads(line)
            inst[r["instance_id"]] = r
    n = miss = 0
    for line in open(os.path.join(a.run, "results.jsonl")):
        if not line.strip():
            continue
        r = json.loads(line)
        if "error" in r:
            continue
        i, p = inst[r["instance_id"]], r[a.form]
        gold = set(i["gold_files"])
        files = []
        for h in p["handles"]:
            if h["path"] not in files:
                files.append(h["path"])
        n += 1
        if files and files[0] in gold:
            continue
        miss += 1
        rank = next((k + 1 for k, f in enumerate(files) if f in gold), None)
        print(f"== {r['instance_id']}  gold={sorted(gold)} rank={rank}  gold functions={i['gold_functions']}")
        print("   title:", i["query"].split("\n")[0][:150])
        for h in p["handles"]:
            g = "G" if h["path"] in gold else " "
            print(f"   {g} {h['score']:.3f} {h['tokens']:5} {h['node_type']:8} "
                  f"{h['path']}:{h['start']}-{h['end']} {h['qualified_name']}")
    print(f"{miss} of {n} packs ({a.form}) do not put a gold file first")


if __name__ == "__main__":
    main()
