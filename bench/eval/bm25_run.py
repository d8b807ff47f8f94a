#!/usr/bin/env python3
"""Run /work/shared/eval/bm25_baseline.py unchanged, with one runtime fix.

The shared common.py looks for repos.json one folder above itself (EVAL_DIR = dirname(HERE)),
i.e. /work/shared/repos.json, which does not exist; repos.json sits next to the scripts.
This wrapper points common.EVAL_DIR at the scripts' folder and then runs the baseline as
__main__ with the same arguments:

  bm25_run.py OUT.jsonl --instances FILE --tok code|lucene [--unit file|function] ...
"""
import os, runpy, sys

EVAL = os.environ.get("EVAL_SHARED", "/work/shared/eval")
sys.path.insert(0, EVAL)
import common  # noqa: E402

if not os.path.exists(os.path.join(common.EVAL_DIR, "repos.json")):
    common.EVAL_DIR = EVAL
sys.argv = [os.path.join(EVAL, "bm25_baseline.py")] + sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
