#!/usr/bin/env python3
"""Results table (markdown) for a run dir written by run.sh: one row per *.score.json.

  summarize.py RUN_DIR [RUN_DIR...]
"""
import glob, json, os, sys

LABEL = {"canopy": "Canopy pack", "bm25_code": "BM25 file, --tok code", "bm25_lucene": "BM25 file, --tok lucene",
         "bm25fn_code": "BM25 function, --tok code"}
print("| run | system | n | file R@1 | R@5 | R@10 | MRR | func Hit@5 | func Hit@10 | mean tokens | median tokens |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for d in sys.argv[1:]:
    for f in sorted(glob.glob(os.path.join(d, "*.score.json"))):
        s = json.load(open(f))
        name = os.path.basename(f)[:-len(".score.json")]
        g = lambda k: f"{s[k]:.3f}" if k in s else "–"
        print(f"| {os.path.basename(os.path.normpath(d))} | {LABEL.get(name, name)} | {s['n_instances']} | {g('file_recall@1')} | "
              f"{g('file_recall@5')} | {g('file_recall@10')} | {g('file_mrr')} | {g('func_hit@5')} | {g('func_hit@10')} | "
              f"{s['tokens']:.0f} | {s['tokens_median']:.0f} |")
