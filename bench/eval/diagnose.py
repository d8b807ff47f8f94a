#!/usr/bin/env python3
"""Failure listing and pattern counts for a run dir written by run.sh.

  diagnose.py RUN_DIR [--system canopy] [--k 5] [--show 20] [--instances FILE] [--deep canopy_mh32_mpf1] [--bm25 PREDS]

A failure is an instance with no gold file among the first k files of the system's pack.
For each failure it prints the issue title, gold files/functions, the pack's handles (path, node
type, name, tokens, score; T = test path, G = gold file), the rank of the first gold file in the
deep variant (mh=32, one handle per file: how far down the gold file is), and BM25 (code)'s rank.
Then it counts patterns over all failures:
  test_above   a test-path handle ranks above the first non-test handle / fills >= half the pack
  non_py       handles in non-Python files (docs, rst, txt) in the pack
  gold_deep    gold file present in the deep ranking at rank 6..32
  gold_absent  gold file not even in the deep ranking (top 32 files)
  bm25_hit     BM25 (code, file level) has a gold file in its top k
  class_big    a class/file handle of > 1500 tokens in the pack
  ident_named  the issue names (in backticks / code style) a symbol defined in a gold file
"""
import argparse, json, os, re
from collections import Counter


def is_test(path):
    words = set(re.split(r" |_|/|\.", path.lower()))
    return bool(words & {"test", "tests", "testing"})


def load(path):
    out = {}
    if os.path.exists(path):
        for l in open(path):
            if l.strip():
                d = json.loads(l); out[d["instance_id"]] = d
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run")
    ap.add_argument("--system", default="canopy")
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--show", type=int, default=20)
    ap.add_argument("--instances")
    ap.add_argument("--deep", default="canopy_mh32_mpf1")
    ap.add_argument("--only", nargs="*", help="only these instance ids")
    ap.add_argument("--bm25", help="BM25 predictions (default RUN_DIR/bm25_code.preds.jsonl)")
    a = ap.parse_args()
    inst = [json.loads(l) for l in open(a.instances or os.path.join(a.run, "instances.jsonl")) if l.strip()]
    side = load(os.path.join(a.run, f"{a.system}.side.jsonl"))
    deep = load(os.path.join(a.run, f"{a.deep}.preds.jsonl"))
    bm = load(a.bm25 or os.path.join(a.run, "bm25_code.preds.jsonl"))
    fails, pats, n = [], Counter(), 0
    for r in inst:
        s = side.get(r["instance_id"])
        if not s or "handles" not in s:
            continue
        n += 1
        gold = set(r["gold_files"])
        files = []
        for h in s["handles"]:
            if h["path"] not in files:
                files.append(h["path"])
        if gold & set(files[:a.k]):
            continue
        fails.append((r, s))
        hs = s["handles"]
        first_non_test = next((i for i, h in enumerate(hs) if not is_test(h["path"])), len(hs))
        p = set()
        if hs and (first_non_test > 0 or sum(is_test(h["path"]) for h in hs) * 2 >= len(hs)):
            p.add("test_above")
        if any(not h["path"].endswith(".py") for h in hs):
            p.add("non_py")
        if any((h.get("token_count") or 0) > 1500 and h.get("node_type") in ("class", "file", "module") for h in hs):
            p.add("class_big")
        d = deep.get(r["instance_id"], {}).get("ranked_files", [])
        rk = next((i + 1 for i, f in enumerate(d) if f in gold), None)
        if rk is None:
            p.add("gold_absent")
        elif rk > a.k:
            p.add("gold_deep")
        b = bm.get(r["instance_id"], {}).get("ranked_files", [])
        if gold & set(b[:a.k]):
            p.add("bm25_hit")
        names = {g.split("::", 1)[1].split(".")[-1] for g in r.get("gold_functions", []) if "::" in g}
        names |= {g.split("::", 1)[1].split(".")[0] for g in r.get("gold_functions", []) if "::" in g}
        q = r["query"]
        if any(re.search(r"\b" + re.escape(nm) + r"\b", q) for nm in names if len(nm) > 3):
            p.add("ident_named")
        for x in p:
            pats[x] += 1
        r["_deep_rank"], r["_bm_rank"] = rk, next((i + 1 for i, f in enumerate(b) if f in gold), None)
        r["_pats"] = sorted(p)
    if a.only:
        fails = [(r, s) for r, s in fails if r["instance_id"] in a.only]
    print(f"{a.system}: {len(fails)} failures (no gold file in the first {a.k} files) of {n} packs\n")
    print("pattern counts over failures: " + ", ".join(f"{k}={v}" for k, v in pats.most_common()) + "\n")
    for r, s in fails[:a.show]:
        title = r["query"].strip().splitlines()[0][:120]
        print(f"== {r['instance_id']}  [{r['repo']}]  {title}")
        print(f"   gold files: {r['gold_files']}   gold functions: {r.get('gold_functions', [])[:4]}")
        print(f"   gold rank in deep ranking: {r['_deep_rank']}   BM25-code rank: {r['_bm_rank']}   patterns: {r['_pats']}")
        g = s.get("guidance") or {}
        print(f"   guidance: band={g.get('confidence_band')} conf={g.get('confidence')} stop={g.get('stop_querying')}  signals={s.get('signals')}")
        for h in s["handles"]:
            flag = ("G" if h["path"] in r["gold_files"] else " ") + ("T" if is_test(h["path"]) else " ")
            print(f"   {flag} {h['score']:.3f} {h['path']}:{h['start']}-{h['end']} {h.get('node_type')} {h.get('name')} ({h.get('token_count')} tok)")
        print()


if __name__ == "__main__":
    main()
