"""A/B of canopy binaries' fused context packs on kept git trees that are already indexed (no re-index):
gold file and body@2k/4k/8k per binary, as context_eval.py scores them.

  context_ab.py IDS.txt TREES_ROOT OUT.jsonl NAME=BIN [NAME=BIN ...]   (MIRROR_ROOT as for context_eval.py)
"""
import json, os, sys, subprocess
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import trees, splits
from context_eval import score_context
ids_file, root, out = sys.argv[1], sys.argv[2], sys.argv[3]
bins = dict(a.split("=", 1) for a in sys.argv[4:])
budgets = [2000, 4000, 8000]
insts = {i["instance_id"]: i for i in splits.instances("tune") + splits.instances("report")}
ids = [l.strip() for l in open(ids_file) if l.strip() and not l.startswith("#")]
done = {json.loads(l)["instance_id"] for l in open(out)} if os.path.exists(out) else set()
for iid in ids:
    if iid in done: continue
    inst = insts[iid]
    existed = os.path.exists(trees.tree_path(root, inst, True))
    tree, _ = trees.materialise(inst, root, True)
    row = {"instance_id": iid}
    try:
        for name, b in bins.items():
            for bud in budgets:
                p = subprocess.run([b, "--root", tree, "--quiet", "--json", "context", "-", "--budget", str(bud), "--strategy", "fused"],
                                   input=inst["query"], capture_output=True, text=True)
                pack = json.loads(p.stdout)
                sc = score_context(pack, inst)
                sc["wire"] = pack.get("wire_tokens")
                row[f"{name}@{bud}"] = sc
    except Exception as e:
        row["error"] = str(e)[-300:]
    finally:
        trees.release(root, inst, True, True, existed)
    with open(out, "a") as f: f.write(json.dumps(row) + "\n")
    print(iid, " ".join(f"{k}:{'F' if v['file'] else '-'}{'B' if v['body'] else ('.' if v['body'] is None else '-')}" for k, v in row.items() if "@" in k), flush=True)
rows = [json.loads(l) for l in open(out)]
rows = [r for r in rows if "error" not in r]
for name in bins:
    for bud in budgets:
        k = f"{name}@{bud}"
        have = [r[k] for r in rows if k in r]
        wb = [x for x in have if x["body"] is not None]
        print(f"{k}: n={len(have)} file={sum(x['file'] for x in have)/len(have):.3f} body={sum(x['body'] for x in wb)/max(1,len(wb)):.3f} (of {len(wb)}) maxwire/budget={max((x['wire'] or 0)/bud for x in have):.3f}")
