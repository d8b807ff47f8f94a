#!/usr/bin/env python3
"""One-off `canopy context` answers, written for a byte comparison between binaries (issue 31 item 6).

  context_dump.py --tree DIR [--model MODEL_DIR] --bin PATH --out DIR2
                  [--focus-list bench/context_focus32.json] [--strategy fused ...] [--budget 4000]

The one-off counterpart of `context_warm.py --dump`: for each (task, focus) pair of --focus-list,
and each task of bench/context_bench.py's first three without a focus, runs one process
`canopy [--model M] --root DIR --quiet context TASK [--focus F] --budget B --strategy S`, once with
`--json` and once plain (the wire text an agent reads), and writes every answer to DIR2/NNN-S-json
and DIR2/NNN-S-plain with what differs between two runs over the same index masked (`generation`
and `indexed_at`, in the JSON and in the plain header line). The index must exist (run
`canopy index DIR` first); nothing is indexed here. Compare two binaries' folders with
`diff -r OUT_A OUT_B`. Python standard library only.
"""
import argparse
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from context_bench import QUESTIONS  # noqa: E402

MASKED = ("generation", "indexed_at")


def mask(value):
    """The JSON value with the masked keys' values replaced, at any depth."""
    if isinstance(value, dict):
        return {k: ("*" if k in MASKED else mask(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [mask(v) for v in value]
    return value


def mask_plain(text):
    """The plain answer with the masked keys' values replaced wherever they appear as JSON."""
    for key in MASKED:
        text = re.sub(r'("%s":\s*)("[^"]*"|-?\d+)' % key, r'\1"*"', text)
    return text


ap = argparse.ArgumentParser()
ap.add_argument("--tree", required=True)
ap.add_argument("--model")
ap.add_argument("--bin", required=True)
ap.add_argument("--out", required=True)
ap.add_argument("--focus-list", default=os.path.join(HERE, "context_focus32.json"))
ap.add_argument("--strategy", action="append")
ap.add_argument("--budget", default="4000")
a = ap.parse_args()
model = ["--model", a.model] if a.model else []
requests = [(t, f) for t, f in json.load(open(a.focus_list))] + [(t, None) for t in QUESTIONS[:3]]
os.makedirs(a.out, exist_ok=True)
for s in a.strategy or ["fused"]:
    for i, (task, focus) in enumerate(requests):
        args = [a.bin] + model + ["--root", a.tree, "--quiet", "context", task, "--budget", a.budget,
                                  "--strategy", s] + (["--focus", focus] if focus else [])
        for form in ("json", "plain"):
            run = subprocess.run(args + (["--json"] if form == "json" else []), capture_output=True, text=True)
            out = run.stdout
            if form == "json" and run.returncode == 0:
                out = json.dumps(mask(json.loads(out)), indent=1, sort_keys=True)
            elif form == "plain":
                out = mask_plain(out)
            with open(os.path.join(a.out, f"{i:03d}-{s}-{form}"), "w") as f:
                f.write(f"rc={run.returncode}\n{out}")
print(f"{len(requests) * 2 * len(a.strategy or ['fused'])} answers in {a.out}")
