"""Counts a prediction file's `callers` false positives that come from where the gold puts a call's caller.

usage: caller_mismatch.py GOLD_ROOT TARGETS.jsonl PRED.jsonl CORPUS

score_graph.py names a predicted call's caller by the innermost gold definition around (path, line);
the gold's own call edges name the caller the oracle chose. The two differ where the oracle's
enclosing range is not the definition's lines: rust-analyzer gives every function a macro invocation
makes (`quickcheck_limit! { fn a() {…} fn b() {…} }`, indexmap's tests/quick.rs) the invocation's
range, and the oracle then gives every call in the block to the block's last function. A right call
site in such a block is a callers false positive (and the gold's caller a false negative), while the
callsites task (path, line) counts it right. Prints the callers false-positive (target, caller)
pairs, how many of them have every call site at a line whose gold caller is another definition,
and those by the gold's caller.
"""
import collections
import os
import sys

sys.path.insert(0, os.environ.get("EVAL", "/work/shared/eval/graph"))
from score_graph import Gold, jl, ptype  # noqa: E402


def main():
    gold, targets, pred, corpus = sys.argv[1:5]
    g = Gold(os.path.join(gold, corpus))
    asked = {t["target"] for t in jl(targets) if t["corpus"] == corpus and t["task"] == "callers"}
    # callee -> scorer's caller -> the (path, line)s of the predicted calls
    calls = collections.defaultdict(lambda: collections.defaultdict(set))
    for r in jl(pred):
        if r.get("corpus") != corpus or ptype(r) != "call_edge":
            continue
        site = (r.get("caller_path"), r.get("call_line"))
        if site in g.unjudgeable:
            continue
        callee = g.sym(r.get("callee_qualified"), r.get("callee_path"), r.get("callee_line"))
        if callee is None:
            continue
        calls[callee][g.enclosing(*site)].add(site)
    gold_caller = collections.defaultdict(set)
    for e in jl(os.path.join(gold, corpus, "call_edges.jsonl")):
        gold_caller[(e["caller_path"], e["call_line"])].add(e["caller_qualified"])
    fp = moved = 0
    by = collections.Counter()
    for q in asked:
        want = g.callers.get(q, set())
        for caller, sites in calls[q].items():
            if caller in want:
                continue
            fp += 1
            if all(gold_caller.get(s) and caller not in gold_caller[s] for s in sites):
                moved += 1
                by[", ".join(sorted({c for s in sites for c in gold_caller[s]}))] += 1
    print(f"{corpus}: callers false-positive pairs {fp}; "
          f"at call sites the gold gives to another caller: {moved}")
    for k, v in by.most_common(10):
        print(f"  {v:4d}  gold caller {k}")


if __name__ == "__main__":
    main()
