#!/usr/bin/env python3
"""Quick A/B of evidence-pack (and context-pack) ranking on kept checkouts.

Materialises each instance once under --trees (a `--shared` clone of its
mirror at the base commit), indexes it (`canopy index`, incremental when the
index is already there), then asks `canopy pack` with the issue text — and,
with --context, `canopy context` at the given budgets — once per variant. A
variant is a set of environment variables for the binary (the measuring
knobs of `pack.rs` and `context::strategies`); `base` runs with none. Prints,
per variant, file R@1/5/10 of the pack's files in rank order and its mean
tokens, and the shares of context packs with a fragment in a gold file and
with a gold function's full body (as `context_eval.py` scores them): one
table for all instances, one per instances file.

  pack_eval.py --trees DIR --instances FILE [FILE...] [--bin canopy] [--model DIR]
               [--variant "NAME=VAR=VALUE[;VAR=VALUE...]"]... [--context 4000[,8000]]
               [--context-strategy fused] [--hybrid] [--time N] [--per-instance]

Packs only read the index, so the variants of one run see the same index.
Needs MIRROR_ROOT (see bench/eval/README.md). Trees are kept (~40 MB each).
"""
import argparse, json, os, statistics, subprocess, sys, time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from context_eval import fuse, literal, prepare, ranked_files, recall_at, score_context  # noqa: E402


def run(bin_, args, stdin=None, env=None):
    p = subprocess.run([bin_] + args, input=stdin, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        raise RuntimeError(f"canopy {' '.join(args[:4])}: {p.stderr[-400:]}")
    return p.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--trees", required=True)
    ap.add_argument("--instances", nargs="+", required=True)
    ap.add_argument("--bin", default=os.path.join(HERE, "../../target/release/canopy"))
    ap.add_argument("--model")
    ap.add_argument("--variant", action="append", default=[])
    ap.add_argument("--context", default="")
    ap.add_argument("--context-strategy", default="fused")
    ap.add_argument("--hybrid", action="store_true",
                    help="also score the pack's files fused (reciprocal rank, k=10) with the files of an "
                         "8,000-token `semantic` context pack: a simulated BM25 + embedding ranking")
    ap.add_argument("--time", type=int, default=0, metavar="N",
                    help="run each pack N more times and report the wall time of a `canopy pack` process "
                         "(median of the N per instance; p50/p95 over instances)")
    ap.add_argument("--per-instance", action="store_true", help="print each instance's rank of its gold file")
    a = ap.parse_args()
    variants = [("base", {})]
    for v in a.variant:
        name, spec = v.split("=", 1)
        env = dict(kv.split("=", 1) for kv in spec.split(";") if kv) if spec else {}
        variants.append((name, env))
    budgets = [int(b) for b in a.context.split(",") if b]
    model = ["--model", a.model] if a.model else []
    mirror_root = os.environ.get("MIRROR_ROOT", "/work/.mirror")
    os.makedirs(a.trees, exist_ok=True)
    instances = []
    for f in a.instances:
        for l in open(f):
            if l.strip():
                instances.append(dict(json.loads(l), _group=f))
    scores = {name: [] for name, _ in variants}
    for n, inst in enumerate(instances):
        iid = inst["instance_id"]
        tree = os.path.join(a.trees, iid)
        if not os.path.isdir(os.path.join(tree, ".git")):
            prepare(inst, a.trees, mirror_root)
        run(a.bin, model + ["index", tree, "--quiet"])
        gold = set(literal(inst["gold_files"]))
        line = [iid]
        for name, extra in variants:
            env = dict(os.environ, **extra)
            pack = json.loads(run(a.bin, ["--root", tree, "--quiet", "--json", "pack",
                                          "--pattern=" + inst["query"][:120_000]], env=env))
            files = ranked_files([h["file_path"] for h in pack["handles"]])
            if a.time:
                walls = []
                for _ in range(a.time):
                    t0 = time.perf_counter()
                    run(a.bin, ["--root", tree, "--quiet", "--json", "pack",
                                "--pattern=" + inst["query"][:120_000]], env=env)
                    walls.append((time.perf_counter() - t0) * 1000)
            row = {k: recall_at(files, gold, k) for k in (1, 5, 10)}
            if a.time:
                row["ms"] = statistics.median(walls)
            row["tokens"] = pack["total_tokens"]
            row["group"] = inst["_group"]
            if a.hybrid:
                sem = json.loads(run(a.bin, model + ["--root", tree, "--quiet", "--json", "context", "-",
                                                     "--budget", "8000", "--strategy", "semantic"],
                                     stdin=inst["query"], env=env))
                fused = fuse(files, ranked_files([f["file_path"] for f in sem["fragments"]]))
                for k in (1, 5, 10):
                    row[f"hybrid{k}"] = recall_at(fused, gold, k)
            for b in budgets:
                ctx = json.loads(run(a.bin, model + ["--root", tree, "--quiet", "--json", "context", "-",
                                                     "--budget", str(b), "--strategy", a.context_strategy],
                                  stdin=inst["query"], env=env))
                sc = score_context(ctx, inst)
                row[f"body@{b}"], row[f"file@{b}"] = sc["body"], sc["file"]
            scores[name].append(row)
            rank = next((i + 1 for i, f in enumerate(files) if f in gold), 0)
            line.append(f"{name}:{rank}")
        if a.per_instance:
            print(" ".join(line), flush=True)
        else:
            print(f"[{n + 1}/{len(instances)}] {iid}", file=sys.stderr, flush=True)
    groups = [None] + (a.instances if len(a.instances) > 1 else [])
    for group in groups:
        table(variants, scores, budgets, group, len(instances))


def table(variants, scores, budgets, group, total):
    pick = lambda rows: [r for r in rows if group is None or r["group"] == group]
    print(f"\n{group or 'all'}: {len(pick(scores['base']))} of {total} instances\n")
    head = "| variant | file R@1 | R@5 | R@10 | mean tokens |" + "".join(f" file@{b} | body@{b} |" for b in budgets)
    print(head)
    print("|---" * (5 + 2 * len(budgets)) + "|")
    mean = lambda xs: sum(xs) / max(1, len(xs))
    for name, _ in variants:
        rows = pick(scores[name])
        cells = [f"{mean([r[k] for r in rows]):.3f}" for k in (1, 5, 10)]
        cells.append(f"{mean([r['tokens'] for r in rows]):.0f}")
        for b in budgets:
            cells.append(f"{mean([1.0 if r[f'file@{b}'] else 0.0 for r in rows]):.3f}")
            have = [r[f"body@{b}"] for r in rows if r[f"body@{b}"] is not None]
            cells.append(f"{mean([1.0 if x else 0.0 for x in have]):.3f}")
        print(f"| {name} | " + " | ".join(cells) + " |")
    if any("ms" in r for name, _ in variants for r in scores[name]):
        print("\n| variant | pack process p50 ms | p95 ms |\n|---|---|---|")
        for name, _ in variants:
            ms = sorted(r["ms"] for r in pick(scores[name]))
            print(f"| {name} | {ms[len(ms) // 2]:.1f} | {ms[min(len(ms) - 1, int(len(ms) * 0.95))]:.1f} |")
    if any("hybrid1" in r for name, _ in variants for r in scores[name]):
        print("\n| variant | hybrid file R@1 | R@5 | R@10 |\n|---|---|---|---|")
        for name, _ in variants:
            rows = pick(scores[name])
            print(f"| {name} | " + " | ".join(f"{mean([r[f'hybrid{k}'] for r in rows]):.3f}" for k in (1, 5, 10)) + " |")


if __name__ == "__main__":
    main()
