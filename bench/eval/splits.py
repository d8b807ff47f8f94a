"""Named splits of the dev set (bench/eval/splits/*.txt, written by make_splits.py).

  load(name_or_path) -> [instance ids]      name: tune | report, or a path to an id file
  instances(spec, dev=DEV) -> [instance dicts]
      spec: a split name, an id file (.txt), or an instances .jsonl file
"""
import json, os

HERE = os.path.dirname(os.path.abspath(__file__))
DEV = os.path.join(os.environ.get("EVAL_SHARED", "/work/shared/eval"), "instances_dev.jsonl")


def load(name):
    path = name if os.path.exists(name) else os.path.join(HERE, "splits", f"{name}.txt")
    return [l.strip() for l in open(path) if l.strip() and not l.startswith("#")]


def interleave(insts):
    """The same instances, repos interleaved in proportion (as make_subset.py --first orders the rest),
    so that a run stopped early is still balanced by repo."""
    by = {}
    for r in insts:
        by.setdefault(r["repo"], []).append(r)
    keys = sorted(by, key=lambda k: (-len(by[k]), k))
    prog = {k: 0 for k in keys}
    out = []
    for _ in range(len(insts)):
        k = min((k for k in keys if prog[k] < len(by[k])), key=lambda k: ((prog[k] + 1) / len(by[k]), keys.index(k)))
        out.append(by[k][prog[k]]); prog[k] += 1
    return out


def instances(spec, dev=DEV):
    if spec.endswith(".jsonl"):
        return [json.loads(l) for l in open(spec) if l.strip()]
    want = load(spec)
    by = {}
    for l in open(dev):
        if l.strip():
            r = json.loads(l)
            by[r["instance_id"]] = r
    missing = [i for i in want if i not in by]
    if missing:
        raise SystemExit(f"{len(missing)} ids of {spec} are not in {dev}: {missing[:3]}")
    return [by[i] for i in want]
