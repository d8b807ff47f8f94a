"""Drops predictions in files the oracle did not analyse (README: "Drop predictions in other files")."""
import json, os, sys

gold = sys.argv[1]
analysed = {}
for line in sys.stdin:
    r = json.loads(line)
    c = r["corpus"]
    if c not in analysed:
        with open(os.path.join(gold, c, "definitions.jsonl")) as fh:
            analysed[c] = {d["path"] for d in map(json.loads, fh) if d["kind"] == "module"}
    path = r.get("caller_path") or r.get("path")
    if path in analysed[c]:
        sys.stdout.write(line)
