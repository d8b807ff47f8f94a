#!/usr/bin/env python3
"""Context-pack quality on the SWE-bench dev set (issue 13).

For each instance: a git checkout of the repository at its base commit (a
`--shared` clone of the mirror, so the `history` strategy sees the real
history up to the base commit; the mirror is only read), `canopy index`
(with the embedding model, so the index-time embedding is part of it), then
`canopy context` with the issue text as the task at each budget and strategy,
and `canopy pack` with the issue text (the evidence pack, for file R@k).

Scores per (strategy, budget), each the share of instances whose pack has
  file   a fragment in a gold file (any detail),
  body   a `full` fragment whose lines cover a gold function's whole span
         (gold_function_spans at the base commit),
  line   a `full` fragment overlapping an edited line range (gold_line_ranges),
and the mean tokens used. Evidence pack: file R@1/5/10 of the pack's files in
rank order, and the same after fusing them (reciprocal rank, k=10) with the
files of the `semantic` context strategy's ranking: a simulation of a hybrid
BM25 + embedding ranking, to decide whether to build it into `pack.rs`.

Also, per pack (issue 31): the tokens the agent actually receives, i.e. the whole JSON printed
on stdout counted with o200k_base (tokcount.py; bytes without a tokenizer), beside the pack's own
`total_tokens` and its `budget_tokens`; the o200k tokens of the fragments' text alone; and, for a
`fused` pack, what each strategy contributed (fragments, tokens, and the instances whose gold body
came from it, or from it only: a fragment's `strategy` field names the strategy that chose it).
With strategies run alone as well (--strategies), "only it" is also reported across the solo packs.

  context_eval.py --out DIR [--split tune|report|IDS.txt | --instances FILE [--n 60]] [--bin canopy]
                  [--model DIR] [--budgets 2000,4000,8000] [--strategies fused,keyword,semantic,graph]
                  [--variant NAME=SPEC]...   (fused with other fusion settings, same index)
                  [--trees DIR] [--git-trees | --plain-trees] [--keep] [--no-pack]
  context_eval.py --out DIR --summary      (tables of a finished or partial run)

Trees (trees.py): git checkouts with history by default here (`--git-trees`, what the `history`
strategy needs), or plain `git archive` trees with --plain-trees; kept under --trees (default
$EVAL_WORK/kept) with --keep, and shared with stop_calibration.py runs of the same kind (the
index step is skipped when the same binary and model indexed the tree). Without --split, the
instances are make_subset.py --n N of --instances (the older runs below; those always used git
trees). Instances already in DIR/results.jsonl are skipped, so a stopped run resumes.
Needs MIRROR_ROOT (see bench/eval/README.md).
"""
import argparse, ast, json, os, shutil, subprocess, sys, tempfile, time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import splits, tokcount, trees  # noqa: E402

SHARED = os.environ.get("EVAL_SHARED", "/work/shared/eval")


def literal(v):
    return ast.literal_eval(v) if isinstance(v, str) else v


def prepare(inst, trees_dir, mirror_root):
    repos = json.load(open(os.path.join(SHARED, "repos.json")))
    mirror = os.path.join(mirror_root, repos[inst["repo"]]["subdir"], "repo")
    tree = os.path.join(trees_dir, inst["instance_id"])
    shutil.rmtree(tree, ignore_errors=True)
    subprocess.run(["git", "clone", "-q", "--shared", "--no-checkout", mirror, tree], check=True)
    subprocess.run(["git", "-C", tree, "checkout", "-q", "--detach", inst["base_commit"]], check=True)
    return tree


def canopy(bin_, args, stdin=None, env=None):
    p = subprocess.run([bin_] + args, input=stdin, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        raise RuntimeError(f"canopy {' '.join(args[:4])}: {p.stderr[-400:]}")
    return p.stdout


def score_context(pack, inst):
    gold_files = set(literal(inst["gold_files"]))
    spans = literal(inst.get("gold_function_spans") or "{}")
    lines = literal(inst.get("gold_line_ranges") or "{}")
    frags = pack["fragments"]
    full = [f for f in frags if f["detail"] == "full"]
    file_hit = any(f["file_path"] in gold_files for f in frags)
    body = any(
        f["file_path"] == key.split("::")[0] and f["line_range"][0] <= s and e <= f["line_range"][1]
        for key, (s, e) in spans.items()
        for f in full
    ) if spans else None
    line = any(
        f["file_path"] == path and f["line_range"][0] <= b and a <= f["line_range"][1]
        for path, ranges in lines.items()
        for (a, b) in ranges
        for f in full
    )
    return {"file": file_hit, "body": body, "line": line, "tokens": pack["total_tokens"]}


def body_strategies(pack, inst):
    """Strategies whose `full` fragments cover a gold function's whole span."""
    spans = literal(inst.get("gold_function_spans") or "{}")
    return sorted({f.get("strategy") or "?" for f in pack["fragments"] if f["detail"] == "full"
                   for key, (s, e) in spans.items()
                   if f["file_path"] == key.split("::")[0] and f["line_range"][0] <= s and e <= f["line_range"][1]})


def wire_facts(raw, pack, inst):
    """What the agent receives (the wire form when the binary has one, else the whole printed
    JSON, which is what `canopy mcp` sent before it), and per strategy what it contributed."""
    wt = tokcount.count(raw)
    per = {}
    for f in pack["fragments"]:
        d = per.setdefault(f.get("strategy") or "?", {"fragments": 0, "tokens": 0})
        d["fragments"] += 1
        d["tokens"] += int(f.get("tokens") or 0)
    texts = [tokcount.count(f.get("text") or "") for f in pack["fragments"]]
    # the response by part: fragments' text as JSON strings (escaped), the rest of the fragments
    # (paths, names, reasons, scores), and each other top-level key
    parts = {}
    for k, v in pack.items():
        n = tokcount.count(json.dumps({k: v}, separators=(",", ":"), ensure_ascii=False)[1:-1])
        parts[k] = n
    if parts.get("fragments") is not None:
        tj = sum(tokcount.count(json.dumps(f.get("text") or "", ensure_ascii=False)) for f in pack["fragments"])
        parts["fragment_text_json"] = tj
        parts["fragments"] -= tj
    return {"wire_tokens": wt, "wire_bytes": len(raw.encode()), "budget_tokens": pack.get("budget_tokens"),
            "parts": parts if None not in parts.values() else None,
            "text_tokens": None if any(t is None for t in texts) else sum(texts),
            "per_strategy": per, "body_by": body_strategies(pack, inst),
            "strategies_meta": {m["strategy"]: m.get("status") for m in pack.get("strategies") or []}}


def ranked_files(paths):
    out = []
    for p in paths:
        if p not in out:
            out.append(p)
    return out


def recall_at(files, gold, k):
    return len(set(files[:k]) & gold) / len(gold)


def fuse(a, b, k=10):
    score = {}
    for lst in (a, b):
        for i, f in enumerate(lst):
            score[f] = score.get(f, 0) + 1 / (k + i + 1)
    return sorted(score, key=lambda f: -score[f])


def run(a):
    os.makedirs(a.out, exist_ok=True)
    results = os.path.join(a.out, "results.jsonl")
    done = set()
    if os.path.exists(results):
        done = {json.loads(l)["instance_id"] for l in open(results) if l.strip()}
    inst_file = os.path.join(a.out, "instances.jsonl")
    if not os.path.exists(inst_file):
        if a.split:
            with open(inst_file, "w") as f:
                f.writelines(json.dumps(r) + "\n" for r in splits.interleave(splits.instances(a.split)))
        else:
            subprocess.run([sys.executable, os.path.join(HERE, "make_subset.py"), inst_file,
                            "--instances", a.instances, "--n", str(a.n)], check=True)
    instances = [json.loads(l) for l in open(inst_file) if l.strip()]
    if a.limit:
        instances = instances[:a.limit]
    bin_ = os.path.join(a.out, "canopy")
    if not os.path.exists(bin_):
        shutil.copy(a.bin, bin_)
    sha = trees.binary_id(bin_)
    model = ["--model", a.model] if a.model else []
    budgets = [int(b) for b in a.budgets.split(",")]
    strategies = a.strategies.split(",")
    git = not a.plain_trees
    with open(os.path.join(a.out, "meta.json"), "w") as f:
        json.dump({"binary": a.bin, "binary_sha1_12": sha, "model": a.model, "git_trees": git,
                   "split": a.split or a.instances, "budgets": budgets, "strategies": strategies,
                   "tokenizer": "o200k_base" if tokcount.encoding() else "bytes"}, f, indent=1)
    for n, inst in enumerate(instances):
        iid = inst["instance_id"]
        if iid in done:
            continue
        row = {"instance_id": iid, "repo": inst["repo"]}
        existed = os.path.exists(trees.tree_path(a.trees, inst, git))
        if a.skip_unindexed and not trees.indexed_by(sha, trees.tree_path(a.trees, inst, git), a.model):
            continue
        try:
            tree, row["checkout_s"] = trees.materialise(inst, a.trees, git)
            row["index_s"] = round(trees.ensure_index(bin_, tree, a.model, sha), 2)
            task = inst["query"]
            for s in strategies:
                for b in budgets:
                    t = time.time()
                    out = canopy(bin_, model + ["--root", tree, "--quiet", "--json", "context", "-",
                                                "--budget", str(b), "--strategy", s], stdin=task)
                    pack = json.loads(out)
                    sc = score_context(pack, inst)
                    sc["seconds"] = round(time.time() - t, 3)
                    wire = out
                    if "wire_tokens" in pack:
                        # the wire form (issue 31): what `canopy mcp` sends as content blocks
                        # and the CLI prints, a JSON header and each fragment as plain text
                        wire = canopy(bin_, model + ["--root", tree, "--quiet", "context", "-",
                                                     "--budget", str(b), "--strategy", s], stdin=task)
                    sc.update(wire_facts(wire, pack, inst))
                    sc["json_tokens"] = tokcount.count(out)
                    if s == "semantic" and b == budgets[-1]:
                        row["semantic_files"] = ranked_files([f["file_path"] for f in pack["fragments"]])
                    row[f"{s}@{b}"] = sc
            for v in a.variant:
                name, spec = v.split("=", 1)
                env = dict(os.environ, CANOPY_CONTEXT_FUSION=spec)
                for b in budgets:
                    t = time.time()
                    out = canopy(bin_, model + ["--root", tree, "--quiet", "--json", "context", "-",
                                                "--budget", str(b), "--strategy", "fused"], stdin=task, env=env)
                    sc = score_context(json.loads(out), inst)
                    sc["seconds"] = round(time.time() - t, 3)
                    row[f"fused[{name}]@{b}"] = sc
            if not a.no_pack:
                out = canopy(bin_, ["--root", tree, "--quiet", "--json", "pack", "--pattern=" + task[:120_000]])
                pack = json.loads(out)
                row["pack_files"] = ranked_files([h["file_path"] for h in pack["handles"]])
                row["pack_tokens"] = pack["total_tokens"]
        except Exception as e:  # a failed instance is recorded, not fatal
            row["error"] = str(e)[-500:]
        finally:
            trees.release(a.trees, inst, git, "full" if a.keep_full else a.keep, existed)
        with open(results, "a") as f:
            f.write(json.dumps(row) + "\n")
        print(f"[{n + 1}/{len(instances)}] {iid} {row.get('error', 'ok')}", flush=True)
    summary(a)


def summary(a):
    rows = [json.loads(l) for l in open(os.path.join(a.out, "results.jsonl")) if l.strip()]
    inst = {json.loads(l)["instance_id"]: json.loads(l) for l in open(os.path.join(a.out, "instances.jsonl"))}
    ok = [r for r in rows if "error" not in r]
    meta_f = os.path.join(a.out, "meta.json")
    meta = json.load(open(meta_f)) if os.path.exists(meta_f) else {}
    out, res = [], {"meta": meta, "instances": len(ok), "failed": [r["instance_id"] for r in rows if "error" in r],
                    "packs": {}, "fused_strategies": {}, "solo_only": {}}
    P = out.append
    P(f"{len(ok)} instances scored ({len(rows) - len(ok)} failed)\n")
    keys = sorted({k for r in ok for k in r if "@" in k},
                  key=lambda k: (k.split("@")[0], int(k.split("@")[1])))
    mean = lambda xs: sum(xs) / len(xs) if xs else float("nan")
    share = lambda xs, f: sum(1 for x in xs if x[f]) / max(1, len(xs))
    wire = any("wire_tokens" in r[k] for r in ok for k in keys if k in r)
    P("| strategy | budget | gold file | full gold function | edited line | mean tokens | mean s |"
      + (" wire tokens | wire / budget | wire > budget | fragment text tokens |" if wire else ""))
    P("|---|---:|---:|---:|---:|---:|---:|" + ("---:|---:|---:|---:|" if wire else ""))
    for k in keys:
        s, b = k.split("@")
        have = [r[k] for r in ok if k in r]
        with_body = [x for x in have if x["body"] is not None]
        d = {"n": len(have), "file": share(have, "file"), "body": share(with_body, "body"), "body_n": len(with_body),
             "line": share(have, "line"), "tokens": mean([x["tokens"] for x in have]),
             "seconds": mean([x["seconds"] for x in have])}
        line = (f"| {s} | {b} | {d['file']:.3f} | {d['body']:.3f} | {d['line']:.3f} | {d['tokens']:.0f} | "
                f"{d['seconds']:.2f} |")
        wt = [x for x in have if x.get("wire_tokens") is not None]
        if wire:
            unit = "wire_tokens" if wt else "wire_bytes"
            wt = wt or [x for x in have if "wire_bytes" in x]
            d["wire"] = mean([x[unit] for x in wt])
            d["wire_unit"] = "o200k tokens" if unit == "wire_tokens" else "bytes"
            d["wire_over_budget"] = mean([x[unit] / x["budget_tokens"] for x in wt if x.get("budget_tokens")])
            d["share_wire_gt_budget"] = mean([1.0 if x[unit] > x["budget_tokens"] else 0.0 for x in wt
                                              if x.get("budget_tokens")])
            tt = [x["text_tokens"] for x in wt if x.get("text_tokens") is not None]
            d["text_tokens"] = mean(tt) if tt else None
            line += (f" {d['wire']:.0f} | {d['wire_over_budget']:.2f} | {d['share_wire_gt_budget']:.2f} | "
                     + (f"{d['text_tokens']:.0f} |" if tt else "– |"))
        res["packs"][k] = d
        P(line)
    # what each strategy contributed to the fused packs
    fk = [k for k in keys if k.startswith("fused") and any("per_strategy" in r.get(k, {}) for r in ok)]
    if fk:
        P("\nStrategies inside the fused pack (a fragment's `strategy`): fragments and tokens per pack; "
          "packs whose gold body came from it (of packs with gold functions), and from it alone; "
          "its status in `strategies`\n")
        P("| pack | strategy | fragments/pack | tokens/pack | gold body from it | only from it | used / skipped |")
        P("|---|---|---:|---:|---:|---:|---|")
        for k in fk:
            have = [r[k] for r in ok if k in r and "per_strategy" in r[k]]
            withb = [x for x in have if x["body"] is not None]
            names = sorted({n for x in have for n in x["per_strategy"]} | {n for x in have for n in x["strategies_meta"]})
            res["fused_strategies"][k] = {}
            for n in names:
                frag = mean([x["per_strategy"].get(n, {}).get("fragments", 0) for x in have])
                tok = mean([x["per_strategy"].get(n, {}).get("tokens", 0) for x in have])
                by = sum(1 for x in withb if n in x["body_by"]) / max(1, len(withb))
                only = sum(1 for x in withb if x["body_by"] == [n]) / max(1, len(withb))
                used = sum(1 for x in have if x["strategies_meta"].get(n) == "used")
                skipped = sum(1 for x in have if x["strategies_meta"].get(n) == "skipped")
                res["fused_strategies"][k][n] = {"fragments": frag, "tokens": tok, "body_from": by, "body_only": only,
                                                 "used": used, "skipped": skipped}
                P(f"| {k} | {n} | {frag:.2f} | {tok:.0f} | {by:.3f} | {only:.3f} | {used} / {skipped} |")
    # where the wire tokens go, fused packs
    pk = [k for k in keys if k.startswith("fused") and any(r.get(k, {}).get("parts") for r in ok)]
    if pk:
        main = ["fragment_text_json", "fragments", "focus", "strategies"]
        group = lambda n: n if n in main else "other"
        names = main + ["other"]
        P("\nShare of the response's o200k tokens per part (`fragment_text_json`: the fragments' text as the "
          "JSON strings sent, escapes included; `fragments`: the rest of the fragment records)\n")
        P("| pack | " + " | ".join(names) + " | text tokens unescaped / as JSON |")
        P("|---|" + "---:|" * (len(names) + 1))
        res["wire_parts"] = {}
        for k in pk:
            have = [r[k] for r in ok if r.get(k, {}).get("parts")]
            tot = sum(sum(x["parts"].values()) for x in have)
            sh = {n: sum(v for x in have for m, v in x["parts"].items() if group(m) == n) / max(1, tot) for n in names}
            raw_t = sum(x["text_tokens"] or 0 for x in have)
            js_t = sum(x["parts"].get("fragment_text_json", 0) for x in have)
            res["wire_parts"][k] = dict(sh, text_escape_ratio=js_t / max(1, raw_t))
            P(f"| {k} | " + " | ".join(f"{sh[n]:.3f}" for n in names) + f" | {raw_t / max(1, js_t):.2f} |")
    # strategies run alone: gold bodies only one of them found
    solo = sorted({k.split("@")[0] for k in keys} - {"fused"} - {k.split("@")[0] for k in keys if "[" in k})
    if len(solo) > 1:
        P("\nStrategies run alone: share of instances (with gold functions) whose gold body that strategy's own "
          "pack holds, and holds while no other solo pack does\n")
        P("| budget | " + " | ".join(f"{n} (only)" for n in solo) + " |")
        P("|---|" + "---:|" * len(solo))
        for b in sorted({int(k.split("@")[1]) for k in keys}):
            rs = [r for r in ok if all(f"{n}@{b}" in r for n in solo) and r[f"{solo[0]}@{b}"]["body"] is not None]
            cells = []
            res["solo_only"][b] = {}
            for n in solo:
                got = sum(1 for r in rs if r[f"{n}@{b}"]["body"])
                only = sum(1 for r in rs if r[f"{n}@{b}"]["body"] and not any(r[f"{m}@{b}"]["body"] for m in solo if m != n))
                res["solo_only"][b][n] = {"n": len(rs), "body": got / max(1, len(rs)), "only": only / max(1, len(rs))}
                cells.append(f"{got / max(1, len(rs)):.3f} ({only / max(1, len(rs)):.3f})")
            P(f"| {b} | " + " | ".join(cells) + " |")
    if any("pack_files" in r for r in ok):
        P("")
        P("| evidence pack | file R@1 | R@5 | R@10 | mean tokens |")
        P("|---|---:|---:|---:|---:|")
        variants = [("pack (BM25 ranking)", lambda r: r["pack_files"])]
        if any(r.get("semantic_files") for r in ok):
            variants.append(("pack ⊕ semantic files (simulated hybrid)",
                             lambda r: fuse(r["pack_files"], r.get("semantic_files", []))))
        for name, files in variants:
            rs = {k: [] for k in (1, 5, 10)}
            for r in ok:
                gold = set(literal(inst[r["instance_id"]]["gold_files"]))
                for k in rs:
                    rs[k].append(recall_at(files(r), gold, k))
            P(f"| {name} | {mean(rs[1]):.3f} | {mean(rs[5]):.3f} | {mean(rs[10]):.3f} | "
              f"{mean([r['pack_tokens'] for r in ok]):.0f} |")
    idx = [r["index_s"] for r in ok if r.get("index_s")]
    if idx:
        P(f"\nindex (with embedding) mean {sum(idx) / len(idx):.1f} s per instance indexed")
    text = "\n".join(out) + "\n"
    print(text)
    open(os.path.join(a.out, "summary.md"), "w").write(text)
    json.dump(res, open(os.path.join(a.out, "summary.json"), "w"), indent=1)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--instances", default=os.path.join(SHARED, "instances_dev.jsonl"))
    ap.add_argument("--n", type=int, default=60)
    ap.add_argument("--bin", default=os.path.join(HERE, "../../target/release/canopy"))
    ap.add_argument("--model", default=os.environ.get("CANOPY_MODEL"))
    ap.add_argument("--budgets", default="2000,4000,8000")
    ap.add_argument("--strategies", default="fused,keyword,semantic")
    ap.add_argument("--variant", action="append", default=[],
                    help="NAME=SPEC: also run the fused pack with CANOPY_CONTEXT_FUSION=SPEC "
                         "(weights per strategy, lift=0|1), e.g. kw=keyword=1,semantic=0.3,lift=0")
    ap.add_argument("--split", help="tune | report | an id file: these instances instead of --instances/--n")
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--trees", default=trees.DEFAULT_ROOT)
    ap.add_argument("--git-trees", action="store_true",
                    help="git checkouts with history (the default here; kept for symmetry with stop_calibration.py)")
    ap.add_argument("--plain-trees", action="store_true", help="plain `git archive` trees, no history")
    ap.add_argument("--no-pack", action="store_true", help="skip the evidence pack at the end")
    ap.add_argument("--skip-unindexed", action="store_true",
                    help="only instances whose kept tree this binary and model already indexed (to trail a "
                         "running stop_calibration.py without a second indexing job; run again to pick up more)")
    ap.add_argument("--keep", action="store_true", help="keep trees and indexes (git trees lean: see trees.py)")
    ap.add_argument("--keep-full", action="store_true", help="keep git trees with their files")
    ap.add_argument("--summary", action="store_true")
    a = ap.parse_args()
    summary(a) if a.summary else run(a)
