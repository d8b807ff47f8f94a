#!/usr/bin/env python3
"""How often an issue writes the function to change with its owner (issue 26, item 3).

  owner_mentions.py [--split tune|report|IDS] [--show]

Counts the instances whose text writes a gold function as `Owner.member` or `Owner(...).member`
(a member of a call's result), where Owner is the gold function's class (the part of its
qualified name before the member) or, for a top-level function, its module (the file stem, not a
package's `__init__`): the pattern `pack::owner_mentions` reads (tracebacks included here).
--show lists the instances and the pairs. --repl also counts the names called as `.name(` in
reproduction lines (`>>>`, `...`, `In [`) and elsewhere, and how many are a gold function's own name.
"""
import argparse, json, os, re, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import splits  # noqa: E402

PAIR = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)(?:\([^()\n]*\))?\.([A-Za-z_][A-Za-z0-9_]*)\b")


def gold_pairs(inst):
    text = inst["query"].replace("\u200b", "")
    pairs = set((o, m) for o, m in PAIR.findall(text) if len(o) >= 2 and len(m) >= 2)
    hits = set()
    for g in inst["gold_functions"]:
        path, qualified = g.split("::", 1)
        parts = qualified.split(".")
        stem = path.rsplit("/", 1)[-1].split(".", 1)[0]
        owner = parts[-2] if len(parts) > 1 else (stem if stem != "__init__" else None)
        if owner and (owner, parts[-1]) in pairs:
            hits.add((owner, parts[-1]))
    return hits


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--split", default="tune")
    ap.add_argument("--show", action="store_true")
    ap.add_argument("--repl", action="store_true")
    a = ap.parse_args()
    insts = splits.instances(a.split)
    n = 0
    for inst in insts:
        hits = gold_pairs(inst)
        if hits:
            n += 1
            if a.show:
                print(inst["instance_id"], sorted(hits))
    print(f"{a.split}: {n} of {len(insts)} instances write a gold function as Owner.member")
    if a.repl:
        repl_counts(a.split, insts)


CALL = re.compile(r"\.([A-Za-z_][A-Za-z0-9_]*)\(")


def repl_counts(split, insts):
    n_inst = names = gold_names = other = other_gold = 0
    for inst in insts:
        text = inst["query"].replace("\u200b", "")
        gold = {g.split("::", 1)[1].split(".")[-1] for g in inst["gold_functions"]}
        repl, prose = set(), set()
        for line in text.split("\n"):
            s = line.strip()
            (repl if s.startswith((">>>", "...", "In [")) else prose).update(CALL.findall(line))
        if repl:
            n_inst += 1
            names += len(repl)
            gold_names += len(repl & gold)
        other += len(prose)
        other_gold += len(prose & gold)
    print(f"{split}: names called in reproduction lines: {gold_names} of {names} are a gold function's own name "
          f"({n_inst} instances); called elsewhere: {other_gold} of {other}")


if __name__ == "__main__":
    main()
