#!/usr/bin/env python3
"""Adapter between /work/shared/eval/run_engine.py and `canopy pack`.

run_engine.py calls this once per instance (see run.sh):

  pack_adapter.py --bin CANOPY --repo TREE --query-file Q --instance-id ID --side SIDE.jsonl
                  [--max-handles N] [--max-per-file N] [--no-index] [--plan]

1. `canopy index TREE --quiet` (full index first, so the pack never answers from a
   partial lazy index; skipped with --no-index, then `pack` auto-indexes),
2. `canopy --root TREE pack --pattern=<issue text> --json`  (the issue text is read here
   in Python and passed as one argv element; Linux limits one argument to 128 KiB and the
   dev set's longest issue is ~10 KB; longer texts are truncated at 120 KB and NULs dropped),
3. prints the harness format on stdout:
     {"handles": [{"path", "start", "end"}...], "tokens": <sum of token_count of the handles>}
4. appends one JSON line to SIDE: instance id, guidance, signals, the handles with names and
   node types, total_tokens, total_candidates, and the index/pack wall times.

Variants (repeatable, cheap: the index is built once): --variant NAME=OPTS with OPTS a comma list of
  mh=N (max handles), mpf=N (max per file), plan, glob=PATTERN, notests, budget=TOKENS,
  qx=clean|noident|clean+noident (+title: only the first line; +titlex3: the first line repeated
  three times in front of the text).
  budget asks for 32 handles and keeps them in rank order while their token_count sum stays within
  TOKENS (a handle that does not fit is skipped, smaller later ones may still fit), up to mh.
  qx rewrites the issue text before packing: clean drops HTML comments (issue templates) and \r;
  noident lowercases and turns backticks, '.', '_', '(' and ')' into spaces, so pack's
  identifier path (exact-name definitions boosted above every text hit) finds nothing: it estimates
  what the ranking does without the identifier boost.
  notests asks for 32 handles and drops handles in test paths (a path word in {test, tests, testing}
  split on ' _/.', the BM25 baseline's rule), then keeps the first mh (default 8): it estimates what
  demoting tests inside pack ranking would give. Each variant appends score.py predictions to
  DIR(SIDE)/canopy_NAME.preds.jsonl and its own side line to DIR(SIDE)/canopy_NAME.side.jsonl.
"""
import argparse, json, os, re, subprocess, sys, time

MAX_ARG = 120_000


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--repo", required=True)
    ap.add_argument("--query-file", required=True)
    ap.add_argument("--instance-id", required=True)
    ap.add_argument("--side", required=True)
    ap.add_argument("--max-handles", type=int)
    ap.add_argument("--max-per-file", type=int)
    ap.add_argument("--no-index", action="store_true")
    ap.add_argument("--plan", action="store_true")
    ap.add_argument("--variant", action="append", default=[])
    a = ap.parse_args()

    query = open(a.query_file, encoding="utf-8", errors="replace").read().replace("\x00", " ")
    if len(query.encode()) > MAX_ARG:
        query = query.encode()[:MAX_ARG].decode("utf-8", errors="ignore")

    side = {"instance_id": a.instance_id}
    t0 = time.time()
    if not a.no_index:
        p = subprocess.run([a.bin, "index", a.repo, "--quiet"], capture_output=True, text=True)
        if p.returncode != 0:
            side["index_error"] = p.stderr[-500:]
    t1 = time.time()
    cmd = [a.bin, "--root", a.repo, "--quiet", "pack", "--pattern=" + query, "--json"]
    if a.max_handles:
        cmd.append(f"--max-handles={a.max_handles}")
    if a.max_per_file:
        cmd.append(f"--max-per-file={a.max_per_file}")
    if a.plan:
        cmd.append("--plan")
    p = subprocess.run(cmd, capture_output=True, text=True)
    t2 = time.time()
    side["index_seconds"] = round(t1 - t0, 3)
    side["pack_seconds"] = round(t2 - t1, 3)
    try:
        pack = json.loads(p.stdout)
    except json.JSONDecodeError:
        side["error"] = f"pack exit {p.returncode}: {p.stderr[-500:]}"
        with open(a.side, "a") as f:
            f.write(json.dumps(side) + "\n")
        print(json.dumps({"handles": [], "tokens": 0}))
        return
    handles = pack.get("handles", [])
    side.update({
        "guidance": pack.get("guidance"),
        "signals": pack.get("signals"),
        "total_tokens": pack.get("total_tokens"),
        "total_candidates": pack.get("total_candidates"),
        "handles": [{"path": h["file_path"], "start": h["line_range"][0], "end": h["line_range"][1],
                     "node_type": h.get("node_type"), "name": h.get("name"),
                     "token_count": h.get("token_count"), "score": h.get("score")} for h in handles],
    })
    with open(a.side, "a") as f:
        f.write(json.dumps(side) + "\n")
    out = {"handles": [{"path": h["file_path"], "start": h["line_range"][0], "end": h["line_range"][1]}
                       for h in handles],
           "tokens": sum(int(h.get("token_count") or 0) for h in handles)}
    print(json.dumps(out))
    for v in a.variant:
        run_variant(a, query, v)


def is_test(path):
    words = set(re.split(r" |_|/|\.", path.lower()))
    return bool(words & {"test", "tests", "testing"})


def rewrite(query, how):
    first = next((l for l in query.splitlines() if l.strip()), "")
    if "titlex3" in how:
        query = (first + "\n") * 3 + query
    elif "title" in how:
        query = first
    if "clean" in how:
        query = re.sub(r"<!--.*?-->", " ", query, flags=re.S).replace("\r", "")
    if "noident" in how:
        query = re.sub(r"[`._()]", " ", query).lower()
    return query


def run_variant(a, query, spec):
    name, _, opts = spec.partition("=")
    o = {}
    for part in filter(None, opts.split(",")):
        k, _, v = part.partition("=")
        o[k] = v if v else True
    if "qx" in o:
        query = rewrite(query, o["qx"])
    mh = int(o.get("mh", 8))
    cmd = [a.bin, "--root", a.repo, "--quiet", "pack", "--pattern=" + query, "--json",
           f"--max-handles={32 if ('notests' in o or 'budget' in o) else mh}"]
    if "mpf" in o:
        cmd.append(f"--max-per-file={o['mpf']}")
    if "plan" in o:
        cmd.append("--plan")
    if "glob" in o:
        cmd.append(f"--glob={o['glob']}")
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True)
    dt = time.time() - t0
    try:
        pack = json.loads(p.stdout)
        hs = pack.get("handles", [])
    except json.JSONDecodeError:
        pack, hs = {}, []
    if "notests" in o:
        hs = [h for h in hs if not is_test(h["file_path"])]
    if "budget" in o:
        kept, used = [], 0
        for h in hs:
            t = int(h.get("token_count") or 0)
            if used + t <= int(o["budget"]):
                kept.append(h); used += t
        hs = kept
    hs = hs[:mh]
    files = []
    for h in hs:
        if h["file_path"] not in files:
            files.append(h["file_path"])
    d = os.path.dirname(os.path.abspath(a.side))
    rec = {"instance_id": a.instance_id, "ranked_files": files,
           "ranked_handles": [{"path": h["file_path"], "start": h["line_range"][0], "end": h["line_range"][1]} for h in hs],
           "tokens_returned": sum(int(h.get("token_count") or 0) for h in hs), "seconds": round(dt, 3)}
    with open(os.path.join(d, f"canopy_{name}.preds.jsonl"), "a") as f:
        f.write(json.dumps(rec) + "\n")
    side = {"instance_id": a.instance_id, "guidance": pack.get("guidance"), "signals": pack.get("signals"),
            "handles": [{"path": h["file_path"], "start": h["line_range"][0], "end": h["line_range"][1],
                         "node_type": h.get("node_type"), "name": h.get("name"),
                         "token_count": h.get("token_count"), "score": h.get("score")} for h in hs]}
    with open(os.path.join(d, f"canopy_{name}.side.jsonl"), "a") as f:
        f.write(json.dumps(side) + "\n")


if __name__ == "__main__":
    sys.exit(main())
