#!/usr/bin/env python3
"""Merge run dirs that covered disjoint parts of one instance list into one run dir.

  merge_runs.py OUT_DIR PART_DIR [PART_DIR...]

Concatenates instances.jsonl and every canopy*.preds.jsonl / canopy*.side.jsonl present in all parts
(first part's order first), and writes meta.txt listing the parts. Used when a long run was split
(e.g. stopped and continued on the remaining instances with the same binary).
"""
import glob, json, os, sys

out, parts = sys.argv[1], sys.argv[2:]
os.makedirs(out, exist_ok=True)
names = None
for p in parts:
    n = {os.path.basename(f) for f in glob.glob(os.path.join(p, "canopy*.jsonl"))}
    names = n if names is None else names & n
seen = set()
with open(os.path.join(out, "instances.jsonl"), "w") as fo:
    for p in parts:
        for l in open(os.path.join(p, "instances.jsonl")):
            iid = json.loads(l)["instance_id"]
            if iid not in seen:
                seen.add(iid); fo.write(l)
for name in sorted(names or []):
    with open(os.path.join(out, name), "w") as fo:
        for p in parts:
            fo.writelines(open(os.path.join(p, name)))
with open(os.path.join(out, "meta.txt"), "w") as fo:
    fo.write(f"merged from: {' '.join(parts)}\n")
    for p in parts:
        m = os.path.join(p, "meta.txt")
        if os.path.exists(m):
            fo.write(f"--- {p}\n" + open(m).read())
print(f"{len(seen)} instances, {len(names or [])} files -> {out}")
