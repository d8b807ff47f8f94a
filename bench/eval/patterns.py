#!/usr/bin/env python3
"""Pattern counts over the packs of a side file (pack_adapter.py output), for ranking diagnosis.

  patterns.py SIDE.jsonl [--instances FILE] [--repeat OTHER_SIDE.jsonl ...]

Per pack: identifier flood (>= 3 handles tied at the top score), same-name flood (>= 3 handles
sharing one short name), vendored/minified files (*.min.js, jquery, /vendor/, /extern/, /externals/),
issue/PR templates (.github/, ISSUE_TEMPLATE), test-path handles (path word test/tests/testing),
top handle in a test path, non-Python handles, handles over 1500 tokens and their share of all
tokens, packs over 1500 tokens. With --repeat (the same instances packed again by the same binary),
the share of instances whose first 5 files differ between samples (nondeterminism).
Each pattern also reports the file hit rate (gold file among the first 5 files) with and without it.
"""
import argparse, json, re
from collections import Counter


def is_test(path):
    return bool(set(re.split(r" |_|/|\.", path.lower())) & {"test", "tests", "testing"})


VENDOR = re.compile(r"(\.min\.js$|jquery|/vendor/|(^|/)extern/|/externals/|underscore[-.].*js$|select2|xregexp)")
TEMPLATE = re.compile(r"(^\.github/|ISSUE_TEMPLATE|PULL_REQUEST_TEMPLATE)")


def files_of(hs):
    out = []
    for h in hs:
        if h["path"] not in out:
            out.append(h["path"])
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("side")
    ap.add_argument("--instances", default="/work/shared/eval/instances_dev.jsonl")
    ap.add_argument("--repeat", nargs="*", default=[])
    a = ap.parse_args()
    gold = {json.loads(l)["instance_id"]: set(json.loads(l)["gold_files"]) for l in open(a.instances) if l.strip()}
    packs = [json.loads(l) for l in open(a.side) if l.strip()]
    packs = [p for p in packs if p["instance_id"] in gold and "handles" in p]
    pat = {}
    tok_all = tok_big = 0
    for p in packs:
        hs = p["handles"]
        hit = bool(gold[p["instance_id"]] & set(files_of(hs)[:5]))
        names = Counter((h.get("name") or "").split(".")[-1] for h in hs if h.get("name"))
        tops = [h for h in hs if h.get("score", 0) >= 0.999]
        tk = sum(h.get("token_count") or 0 for h in hs)
        tok_all += tk; tok_big += sum(h.get("token_count") or 0 for h in hs if (h.get("token_count") or 0) > 1500)
        flags = {
            ">=3 handles tied at top score": len(tops) >= 3,
            ">=3 handles with the same short name": bool(names) and names.most_common(1)[0][1] >= 3,
            "vendored/minified file in pack": any(VENDOR.search(h["path"]) for h in hs),
            "issue/PR template in pack": any(TEMPLATE.search(h["path"]) for h in hs),
            "test-path handle in pack": any(is_test(h["path"]) for h in hs),
            "top handle is a test": bool(hs) and is_test(hs[0]["path"]),
            "non-Python handle in pack": any(not h["path"].endswith(".py") for h in hs),
            "handle > 1500 tokens in pack": any((h.get("token_count") or 0) > 1500 for h in hs),
            "pack > 1500 tokens": tk > 1500,
        }
        for k, v in flags.items():
            d = pat.setdefault(k, [0, 0, 0, 0])  # with, with&hit, without, without&hit
            if v:
                d[0] += 1; d[1] += hit
            else:
                d[2] += 1; d[3] += hit
    n = len(packs)
    print(f"{n} packs; tokens in handles > 1500 tokens: {tok_big / max(tok_all, 1):.0%} of all returned tokens\n")
    print("| pattern | packs | share | hit@5 with | hit@5 without |\n|---|---|---|---|---|")
    for k, (w, wh, wo, woh) in pat.items():
        print(f"| {k} | {w} | {w / max(n, 1):.0%} | {wh / w if w else float('nan'):.2f} | {woh / wo if wo else float('nan'):.2f} |")
    if a.repeat:
        base = {p["instance_id"]: files_of(p["handles"])[:5] for p in packs}
        for r in a.repeat:
            other = {json.loads(l)["instance_id"]: files_of(json.loads(l).get("handles", []))[:5] for l in open(r) if l.strip()}
            common = [i for i in base if i in other]
            diff = sum(1 for i in common if base[i] != other[i])
            hitd = sum(1 for i in common if bool(gold[i] & set(base[i])) != bool(gold[i] & set(other[i])))
            print(f"\nrepeat {r}: first-5 files differ on {diff}/{len(common)} instances ({diff / max(len(common), 1):.0%}); "
                  f"gold-in-top-5 outcome flips on {hitd}")


if __name__ == "__main__":
    main()
