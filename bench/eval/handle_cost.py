#!/usr/bin/env python3
"""What an evidence pack's handles cost on the wire, through the CLI and through MCP (issue 26, item 2).

Per instance (kept trees as stop_calibration.py keeps them; see trees.py), one pack per question form
(stop_calibration.question: full, title, query), sent twice:

  cli  `canopy --root TREE --quiet --json pack --pattern=<question>`: stdout as printed
  mcp  a `canopy mcp` server over stdio, `tools/call canopy_evidence_pack {path, pattern}`:
       the text of every content block (what an agent's context receives)

and prints, per channel, over all packs:

  tokens/handle    mean o200k_base tokens of one handle record as sent (the record's compact JSON,
                   i.e. the handles array's tokens / handles; the array brackets are ignored)
  handles/pack     mean handle-record tokens per pack (the handles part of the response)
  meta share       (files + signals + guidance + expand_suggestion + novelty) tokens / response tokens
  tiny handles     handles whose token_count <= 5 that are not the pack's first
  named            share of handles with name, qualified_name and a preview (named units only
                   have names; chunks and sections are counted apart)
  per field        (cli) mean tokens of each `"key":value` of a handle record, and of the value alone

and a third row, `text*`: NOT something Canopy sends today, an estimate for a decision. The CLI's
JSON packs re-rendered (text_form below) as a plain-text pack that keeps every field the agent
contract lists (ids as they are, h + 24 hex): a header line with guidance, expand_suggestion as
1-based ranks into the handles, signals, then per file a `path` line and per handle one line
`id kind qualified_name a-b Nt score | preview` (`name` is the last segment of qualified_name).

  handle_cost.py --split tune|FILE --bin BIN [--trees DIR] [--git-trees] [--limit N] [--repos a,b]
                 [--forms full,title,query]

Needs MIRROR_ROOT and a Python with tiktoken (tokcount.py).
"""
import argparse, json, os, subprocess, sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import splits, tokcount, trees  # noqa: E402
import stop_calibration as sc  # noqa: E402

META = ("files", "signals", "guidance", "expand_suggestion", "novelty")


class Mcp:
    """A `canopy mcp` server spoken to over stdio, line-delimited JSON-RPC (no SDK needed)."""

    def __init__(self, bin_):
        self.p = subprocess.Popen([bin_, "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, text=True)
        self.n = 0
        self.call("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                 "clientInfo": {"name": "handle_cost", "version": "0"}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, msg):
        self.p.stdin.write(json.dumps(msg) + "\n")
        self.p.stdin.flush()

    def call(self, method, params):
        self.n += 1
        self.send({"jsonrpc": "2.0", "id": self.n, "method": method, "params": params})
        while True:
            line = self.p.stdout.readline()
            if not line:
                raise SystemExit("canopy mcp closed its stdout")
            msg = json.loads(line)
            if msg.get("id") == self.n:
                if "error" in msg:
                    raise SystemExit(f"mcp error: {msg['error']}")
                return msg["result"]

    def pack(self, tree, q):
        res = self.call("tools/call", {"name": "canopy_evidence_pack", "arguments": {"path": tree, "pattern": q}})
        return "\n".join(b.get("text", "") for b in res.get("content", []) if b.get("type") == "text")

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=30)


def count(s):
    n = tokcount.count(s)
    return n if n is not None else len(s.encode())


def measure(raw):
    """Handle and metadata token counts of one response as sent (raw text)."""
    pack = json.loads(raw)
    # The answer may wrap the pack (a `pack` field next to service metadata); find the object with handles.
    body = pack if "handles" in pack else next((v for v in pack.values() if isinstance(v, dict) and "handles" in v), pack)
    hs = body.get("handles", [])
    total = count(raw)
    h_tokens = [count(json.dumps(h, separators=(",", ":"), ensure_ascii=False)) for h in hs]
    meta = sum(count(json.dumps({k: body[k]}, separators=(",", ":"), ensure_ascii=False)[1:-1])
               for k in META if k in body)
    tiny = sum(1 for i, h in enumerate(hs) if i > 0 and int(h.get("token_count") or 0) <= 5)
    named = [h for h in hs if h.get("node_type") not in ("chunk", "paragraph", "code_block")]
    full = sum(1 for h in named if h.get("name") and h.get("qualified_name") and h.get("preview"))
    fields = {}
    for h in hs:
        for k, v in h.items():
            kv = count(json.dumps({k: v}, separators=(",", ":"), ensure_ascii=False)[1:-1])
            f = fields.setdefault(k, [0, 0])
            f[0] += kv
            f[1] += count(json.dumps(v, ensure_ascii=False).strip('"'))
    return {"total": total, "handles": len(hs), "handle_tokens": sum(h_tokens), "meta": meta, "tiny": tiny,
            "named": len(named), "named_full": full, "fields": fields}


def text_form(pack):
    """The plain-text rendering sketched in the docstring (an estimate only; Canopy does not send it)."""
    g = pack.get("guidance") or {}
    hs = pack.get("handles", [])
    rank = {h["id"]: i + 1 for i, h in enumerate(hs)}
    sig = pack.get("signals") or {}
    out = [f"stop_querying={str(g.get('stop_querying')).lower()} recommended_action={g.get('recommended_action')} "
           f"suggested_expand_count={g.get('suggested_expand_count')} max_additional_queries={g.get('max_additional_queries')} "
           f"confidence={g.get('confidence', 0):.2f} {g.get('confidence_band')}",
           f"next_step: {g.get('next_step')}",
           "expand_suggestion: handles " + ",".join(str(rank.get(i, i)) for i in pack.get("expand_suggestion", [])),
           f"novelty={pack.get('novelty', 0):.2f} total_tokens={pack.get('total_tokens')} "
           f"total_candidates={pack.get('total_candidates')} "
           + " ".join(f"{k}={str(v).lower() if isinstance(v, bool) else f'{v:.2f}'}" for k, v in sig.items())]
    meta = count("\n".join(out))
    body, cur = [], None
    for h in sorted(hs, key=lambda h: [x["file_path"] for x in hs].index(h["file_path"])):
        if h["file_path"] != cur:
            cur = h["file_path"]
            body.append(("file", cur))
        lr = h["line_range"]
        line = (f"{rank[h['id']]}. {h['id']} {h['node_type']} {h.get('qualified_name') or h.get('name') or ''} "
                f"{lr[0]}-{lr[1]} {h['token_count']}t {h['score']:.2f}")
        if h.get("preview"):
            line += " | " + h["preview"]
        body.append(("handle", line))
    files = sum(count(t) for k, t in body if k == "file")
    handles = [count(t) for k, t in body if k == "handle"]
    text = "\n".join(out + [t for _, t in body])
    return {"total": count(text), "handles": len(hs), "handle_tokens": sum(handles), "meta": meta + files,
            "tiny": 0, "named": 0, "named_full": 0}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--split", required=True)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--trees", default=trees.DEFAULT_ROOT)
    ap.add_argument("--git-trees", action="store_true")
    ap.add_argument("--limit", type=int, default=10)
    ap.add_argument("--repos", default="", help="only these repos (e.g. psf/requests,pytest-dev/pytest)")
    ap.add_argument("--forms", default="full,title,query")
    ap.add_argument("--ids", action="store_true", help="print the instance ids used")
    a = ap.parse_args()
    bin_ = os.path.abspath(a.bin)
    insts = splits.interleave(splits.instances(a.split))
    if a.repos:
        keep = set(a.repos.split(","))
        insts = [i for i in insts if i["repo"] in keep]
    insts = insts[: a.limit]
    sha = trees.binary_id(bin_)
    rows = {"cli": [], "mcp": [], "text*": []}
    for inst in insts:
        existed = os.path.exists(trees.tree_path(a.trees, inst, a.git_trees))
        tree, _ = trees.materialise(inst, a.trees, a.git_trees)
        # One server per tree, closed before the tree is made lean: a server left running would
        # see the files go and re-index the tree as empty.
        mcp = None
        try:
            trees.ensure_index(bin_, tree, None, sha)
            mcp = Mcp(bin_)
            for form in a.forms.split(","):
                q = sc.question(inst, form)
                p = subprocess.run([bin_, "--root", tree, "--quiet", "--json", "pack", "--pattern=" + q],
                                   capture_output=True, text=True)
                if p.returncode != 0:
                    print(f"{inst['instance_id']} {form}: cli exit {p.returncode}", file=sys.stderr)
                    continue
                rows["cli"].append(measure(p.stdout))
                rows["text*"].append(text_form(json.loads(p.stdout)))
                rows["mcp"].append(measure(mcp.pack(tree, q)))
        finally:
            if mcp:
                mcp.close()
            trees.release(a.trees, inst, a.git_trees, True, existed)
    if a.ids:
        print("ids:", " ".join(i["instance_id"] for i in insts))
    unit = "o200k tokens" if tokcount.encoding() else "bytes"
    print(f"{len(insts)} instances x {len(a.forms.split(','))} forms; counts in {unit}")
    print("channel | packs | tokens/handle | handle tokens/pack | response tokens/pack | meta share | tiny handles | named with name+qname+preview")
    for ch, rs in rows.items():
        n = len(rs)
        hn = sum(r["handles"] for r in rs)
        if not n or not hn:
            print(f"{ch} | {n} | - | - | - | - | - | -")
            continue
        tot = sum(r["total"] for r in rs)
        print(f"{ch} | {n} | {sum(r['handle_tokens'] for r in rs) / hn:.1f} | "
              f"{sum(r['handle_tokens'] for r in rs) / n:.0f} | {tot / n:.0f} | "
              f"{sum(r['meta'] for r in rs) / tot:.3f} | {sum(r['tiny'] for r in rs)} | "
              f"{sum(r['named_full'] for r in rs)}/{sum(r['named'] for r in rs)}")


    hn = sum(r["handles"] for r in rows["cli"])
    if hn:
        agg = {}
        for r in rows["cli"]:
            for k, (kv, v) in r["fields"].items():
                a_ = agg.setdefault(k, [0, 0])
                a_[0] += kv
                a_[1] += v
        print("per field (cli), mean tokens per handle record, key+value / value alone: "
              + "; ".join(f"{k} {kv / hn:.1f}/{v / hn:.1f}" for k, (kv, v) in agg.items()))


if __name__ == "__main__":
    main()
