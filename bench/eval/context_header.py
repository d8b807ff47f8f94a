"""What a `canopy_context` answer costs through `canopy mcp`, header apart (issue 31 item 1).

  context_header.py IDS.txt TREES_ROOT NAME=BIN [NAME=BIN ...] [--budgets 2000,4000] [--strategy fused]
      [--out OUT.jsonl]

TREES_ROOT holds kept git trees (`TREES_ROOT/git/<instance_id>`, as context_ab.py keeps them with
--keep-full); ids without a tree are skipped. Each binary indexes each tree once (`canopy index`,
outside the measurement), then one `canopy mcp` per binary answers `canopy_context` with the
instance's issue text as the task, no model (semantic is skipped and says so). Counted with the
shared tokenizer (o200k_base, tokcount.py) on the content blocks as the client receives them:
the header (the first block: the JSON line) and the whole answer (the blocks counted one by one,
as `wire_tokens` does). Prints mean and max header tokens, mean wire tokens and the largest
wire / budget per binary and budget.
"""
import json, os, subprocess, sys
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
import splits, tokcount  # noqa: E402
from mcp_latency import McpClient  # noqa: E402

args = sys.argv[1:]
opts = {"--budgets": "2000,4000", "--strategy": "fused", "--out": None}
for k in list(opts):
    if k in args:
        i = args.index(k)
        opts[k] = args[i + 1]
        del args[i:i + 2]
budgets = [int(b) for b in opts["--budgets"].split(",")]
ids_file, root = args[0], args[1]
bins = [a.split("=", 1) for a in args[2:]]
insts = {i["instance_id"]: i for i in splits.instances("tune") + splits.instances("report")}
ids = [l.strip() for l in open(ids_file) if l.strip() and not l.startswith("#")]
trees = {i: os.path.join(root, "git", i) for i in ids if os.path.isdir(os.path.join(root, "git", i))}
count = tokcount.count
rows = []
for name, b in bins:
    for tree in trees.values():
        subprocess.run([b, "index", tree, "--quiet"], check=True, capture_output=True)
    client = McpClient([b, "mcp"], 300.0)
    client.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                  "clientInfo": {"name": "context_header", "version": "0"}})
    client.notify("notifications/initialized")
    for iid, tree in trees.items():
        for bud in budgets:
            a = {"path": tree, "task": insts[iid]["query"], "budget_tokens": bud, "strategy": opts["--strategy"]}
            resp, _ = client.request("tools/call", {"name": "canopy_context", "arguments": a})
            if "error" in resp or resp["result"].get("isError"):
                raise SystemExit(f"{name} {iid}: {str(resp)[:300]}")
            texts = [c.get("text", "") for c in resp["result"]["content"]]
            header = count(texts[0])
            wire = sum(count(t) for t in texts)
            rows.append({"bin": name, "instance_id": iid, "budget": bud, "header": header, "wire": wire,
                         "blocks": len(texts), "header_text": texts[0]})
    client.close()
if opts["--out"]:
    with open(opts["--out"], "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
print(f"{len(trees)} instances: {' '.join(trees)}")
print("| binary | budget | packs | header tokens mean | max | wire tokens mean | max wire / budget |")
print("|---|---:|---:|---:|---:|---:|---:|")
for name, _ in bins:
    for bud in budgets:
        rs = [r for r in rows if r["bin"] == name and r["budget"] == bud]
        print(f"| {name} | {bud} | {len(rs)} | {sum(r['header'] for r in rs) / len(rs):.1f} | "
              f"{max(r['header'] for r in rs)} | {sum(r['wire'] for r in rs) / len(rs):.1f} | "
              f"{max(r['wire'] / bud for r in rs):.3f} |")
