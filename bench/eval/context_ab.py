"""A/B of canopy binaries' fused context packs on kept git trees: gold file and body@2k/4k/8k per
binary, as context_eval.py scores them.

  context_ab.py IDS.txt TREES_ROOT OUT.jsonl NAME=BIN [NAME=BIN ...]   (MIRROR_ROOT as for context_eval.py)
      [--budgets 2000,4000,8000] [--keep-full] [--fragments]

Each binary runs `canopy index TREE` on a tree once before its packs are measured. The first call on
a tree refreshes its index (a lean tree's restored files have new mtimes; a binary with another index
schema rebuilds it), and a pack built by that call could differ from every later one, so two runs of
one binary did not always agree (issue 31, s10-w31). The index step is incremental: on a tree this
binary already indexed it reads the file list and changes nothing.
--keep-full keeps git trees whole instead of lean (no restore, so no refresh on the next run);
--fragments also stores each pack's fragments (detail, tokens, score, node type, path, name, lines)
for diagnosis.
Per pack it also stores the fragments per strategy (`by`) and the strategies whose `full` fragments
cover a gold function's whole span (`body_by`); the summary prints history's fragments per pack and
the packs whose gold body only history's fragments cover (issue 31 item 4).
"""
import json, os, sys, subprocess
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import trees, splits
from context_eval import score_context, body_strategies

args = [a for a in sys.argv[1:]]
budgets = [2000, 4000, 8000]
keep = True
with_fragments = False
if "--budgets" in args:
    k = args.index("--budgets")
    budgets = [int(b) for b in args[k + 1].split(",")]
    del args[k:k + 2]
if "--keep-full" in args:
    args.remove("--keep-full")
    keep = "full"
if "--fragments" in args:
    args.remove("--fragments")
    with_fragments = True
ids_file, root, out = args[0], args[1], args[2]
bins = dict(a.split("=", 1) for a in args[3:])
insts = {i["instance_id"]: i for i in splits.instances("tune") + splits.instances("report")}
ids = [l.strip() for l in open(ids_file) if l.strip() and not l.startswith("#")]
done = {json.loads(l)["instance_id"] for l in open(out)} if os.path.exists(out) else set()


def warm(b, tree):
    """The binary's first call on the tree, outside the measurement (see the module doc)."""
    p = subprocess.run([b, "index", tree, "--quiet"], capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"canopy index {tree}: {p.stderr[-300:]}")


for iid in ids:
    if iid in done: continue
    inst = insts[iid]
    existed = os.path.exists(trees.tree_path(root, inst, True))
    tree, _ = trees.materialise(inst, root, True)
    row = {"instance_id": iid}
    try:
        for name, b in bins.items():
            warm(b, tree)
            for bud in budgets:
                p = subprocess.run([b, "--root", tree, "--quiet", "--json", "context", "-", "--budget", str(bud), "--strategy", "fused"],
                                   input=inst["query"], capture_output=True, text=True)
                pack = json.loads(p.stdout)
                sc = score_context(pack, inst)
                sc["wire"] = pack.get("wire_tokens")
                sc["by"] = {}
                for f in pack["fragments"]:
                    sc["by"][f.get("strategy") or "?"] = sc["by"].get(f.get("strategy") or "?", 0) + 1
                sc["body_by"] = body_strategies(pack, inst)
                if with_fragments:
                    sc["fragments"] = [[f["detail"], f["tokens"], round(f["score"], 3), f["node_type"], f["file_path"],
                                        f.get("name"), f["line_range"]] for f in pack["fragments"]]
                row[f"{name}@{bud}"] = sc
    except Exception as e:
        row["error"] = str(e)[-300:]
    finally:
        trees.release(root, inst, True, keep, existed)
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
        by = [x for x in have if "by" in x]
        if by:
            hist = sum(x["by"].get("history", 0) for x in by)
            only = [r["instance_id"] for r in rows if k in r and r[k].get("body_by") == ["history"]]
            print(f"  history fragments per pack {hist / len(by):.2f} (packs with any: {sum(1 for x in by if x['by'].get('history'))}); "
                  f"gold body only by history: {len(only)} {only}")
