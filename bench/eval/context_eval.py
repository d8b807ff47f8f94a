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

  context_eval.py --out DIR [--instances FILE] [--n 60] [--bin canopy] [--model DIR]
                  [--budgets 2000,4000,8000] [--strategies fused,keyword,semantic,graph]
                  [--variant NAME=SPEC]...   (fused with other fusion settings, same index)
  context_eval.py --out DIR --summary      (tables of a finished or partial run)

Instances already in DIR/results.jsonl are skipped, so a stopped run resumes.
Needs MIRROR_ROOT (see bench/eval/README.md).
"""
import argparse, ast, json, os, shutil, subprocess, sys, tempfile, time

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = "/work/shared/eval"


def literal(v):
    return ast.literal_eval(v) if isinstance(v, str) else v


def prepare(inst, trees, mirror_root):
    repos = json.load(open(os.path.join(SHARED, "repos.json")))
    mirror = os.path.join(mirror_root, repos[inst["repo"]]["subdir"], "repo")
    tree = os.path.join(trees, inst["instance_id"])
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
        subprocess.run([sys.executable, os.path.join(HERE, "make_subset.py"), inst_file,
                        "--instances", a.instances, "--n", str(a.n)], check=True)
    instances = [json.loads(l) for l in open(inst_file) if l.strip()]
    bin_ = os.path.join(a.out, "canopy")
    if not os.path.exists(bin_):
        shutil.copy(a.bin, bin_)
    model = ["--model", a.model] if a.model else []
    budgets = [int(b) for b in a.budgets.split(",")]
    strategies = a.strategies.split(",")
    trees = a.trees or tempfile.mkdtemp(prefix="ctx-trees-")
    mirror_root = os.environ.get("MIRROR_ROOT", "/work/.mirror")
    for n, inst in enumerate(instances):
        iid = inst["instance_id"]
        if iid in done:
            continue
        row = {"instance_id": iid, "repo": inst["repo"]}
        try:
            t0 = time.time()
            tree = prepare(inst, trees, mirror_root)
            t1 = time.time()
            canopy(bin_, model + ["index", tree, "--quiet"])
            t2 = time.time()
            row["checkout_s"], row["index_s"] = round(t1 - t0, 2), round(t2 - t1, 2)
            task = inst["query"]
            for s in strategies:
                for b in budgets:
                    t = time.time()
                    out = canopy(bin_, model + ["--root", tree, "--quiet", "--json", "context", "-",
                                                "--budget", str(b), "--strategy", s], stdin=task)
                    pack = json.loads(out)
                    sc = score_context(pack, inst)
                    sc["seconds"] = round(time.time() - t, 3)
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
            out = canopy(bin_, ["--root", tree, "--quiet", "--json", "pack", "--pattern=" + task[:120_000]])
            pack = json.loads(out)
            row["pack_files"] = ranked_files([h["file_path"] for h in pack["handles"]])
            row["pack_tokens"] = pack["total_tokens"]
        except Exception as e:  # a failed instance is recorded, not fatal
            row["error"] = str(e)[-500:]
        finally:
            if not a.keep:
                shutil.rmtree(os.path.join(trees, iid), ignore_errors=True)
        with open(results, "a") as f:
            f.write(json.dumps(row) + "\n")
        print(f"[{n + 1}/{len(instances)}] {iid} {row.get('error', 'ok')}", flush=True)


def summary(a):
    rows = [json.loads(l) for l in open(os.path.join(a.out, "results.jsonl")) if l.strip()]
    inst = {json.loads(l)["instance_id"]: json.loads(l) for l in open(os.path.join(a.out, "instances.jsonl"))}
    ok = [r for r in rows if "error" not in r]
    print(f"{len(ok)} instances scored ({len(rows) - len(ok)} failed)\n")
    keys = sorted({k for r in ok for k in r if "@" in k},
                  key=lambda k: (k.split("@")[0], int(k.split("@")[1])))
    print("| strategy | budget | gold file | full gold function | edited line | mean tokens | mean s |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for k in keys:
        s, b = k.split("@")
        have = [r[k] for r in ok if k in r]
        with_body = [x for x in have if x["body"] is not None]
        share = lambda xs, f: sum(1 for x in xs if x[f]) / max(1, len(xs))
        print(f"| {s} | {b} | {share(have, 'file'):.3f} | {share(with_body, 'body'):.3f} | "
              f"{share(have, 'line'):.3f} | {sum(x['tokens'] for x in have) / max(1, len(have)):.0f} | "
              f"{sum(x['seconds'] for x in have) / max(1, len(have)):.2f} |")
    print()
    print("| evidence pack | file R@1 | R@5 | R@10 | mean tokens |")
    print("|---|---:|---:|---:|---:|")
    for name, files in (("pack (BM25 ranking)", lambda r: r["pack_files"]),
                        ("pack ⊕ semantic files (simulated hybrid)",
                         lambda r: fuse(r["pack_files"], r.get("semantic_files", [])))):
        rs = {k: [] for k in (1, 5, 10)}
        for r in ok:
            gold = set(literal(inst[r["instance_id"]]["gold_files"]))
            for k in rs:
                rs[k].append(recall_at(files(r), gold, k))
        mean = lambda xs: sum(xs) / max(1, len(xs))
        print(f"| {name} | {mean(rs[1]):.3f} | {mean(rs[5]):.3f} | {mean(rs[10]):.3f} | "
              f"{mean([r['pack_tokens'] for r in ok]):.0f} |")
    idx = [r["index_s"] for r in ok]
    if idx:
        print(f"\nindex (with embedding) mean {sum(idx) / len(idx):.1f} s per instance")


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
    ap.add_argument("--trees")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--summary", action="store_true")
    a = ap.parse_args()
    summary(a) if a.summary else run(a)
