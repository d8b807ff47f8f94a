#!/usr/bin/env python3
"""Score every system of one or more run dirs on exactly the same instances (markdown table).

  compare.py RUN_DIR [MORE_DIRS...] [--ids-from RUN_DIR/canopy.preds.jsonl] [--out-instances FILE]

The instance set is the instances of the first RUN_DIR that have a prediction in --ids-from (default:
the first dir's canopy.preds.jsonl), so a run that is still going (or was stopped) is compared with
the baselines on the instances it finished. Every *.preds.jsonl of every dir is scored with the
shared score.py on that set. Rows: file R@1/5/10, MRR, function Hit@5/10, mean/median tokens, and
seconds per instance when the predictions carry them.
"""
import argparse, json, os, glob, subprocess, tempfile

SCORE = os.path.join(os.environ.get("EVAL_SHARED", "/work/shared/eval"), "score.py")
LABEL = {"canopy": "Canopy pack (defaults: 8 handles, 2 per file)", "bm25_code": "BM25 file, --tok code (identifier splitting)",
         "bm25_lucene": "BM25 file, --tok lucene", "bm25fn_code": "BM25 function units, --tok code"}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dirs", nargs="+")
    ap.add_argument("--ids-from")
    ap.add_argument("--out-instances")
    a = ap.parse_args()
    idsf = a.ids_from or os.path.join(a.dirs[0], "canopy.preds.jsonl")
    done = {json.loads(l)["instance_id"] for l in open(idsf) if l.strip()}
    inst = [l for l in open(os.path.join(a.dirs[0], "instances.jsonl")) if l.strip() and json.loads(l)["instance_id"] in done]
    path = a.out_instances or tempfile.mktemp(suffix=".jsonl")
    open(path, "w").writelines(inst)
    print(f"instances: {len(inst)} (those of {a.dirs[0]} with a prediction in {idsf})\n")
    print("| system | file R@1 | R@5 | R@10 | MRR | func Hit@5 | func Hit@10 | mean tokens | median tokens | s/inst |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for d in a.dirs:
        for p in sorted(glob.glob(os.path.join(d, "*.preds.jsonl")), key=lambda p: (not os.path.basename(p).startswith("canopy."), p)):
            name = os.path.basename(p)[:-len(".preds.jsonl")]
            preds = {}
            for l in open(p):
                if l.strip():
                    x = json.loads(l); preds[x["instance_id"]] = x
            missing = sum(1 for l in inst if json.loads(l)["instance_id"] not in preds)
            s = json.loads(subprocess.run(["python3", SCORE, p, "--instances", path, "--json"], capture_output=True,
                                          text=True, check=True).stdout)
            secs = [preds[json.loads(l)["instance_id"]].get("seconds") for l in inst if json.loads(l)["instance_id"] in preds]
            secs = [x for x in secs if x is not None]
            g = lambda k: f"{s[k]:.3f}" if k in s else "–"
            label = LABEL.get(name, name.replace("canopy_", "Canopy variant "))
            if missing:
                label += f" ({missing} missing)"
            print(f"| {label} | {g('file_recall@1')} | {g('file_recall@5')} | {g('file_recall@10')} | {g('file_mrr')} | "
                  f"{g('func_hit@5')} | {g('func_hit@10')} | {s['tokens']:.0f} | {s['tokens_median']:.0f} | "
                  f"{(sum(secs) / len(secs)) if secs else float('nan'):.2f} |")
    if not a.out_instances:
        os.remove(path)


if __name__ == "__main__":
    main()
