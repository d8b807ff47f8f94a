#!/usr/bin/env python3
"""Ranking settings side by side, on the instances every run holds.

  compare_variants.py OUT [NAME ...] [--forms full,title,query]

OUT is a `stop_calibration.py --variants` run: the base run in OUT and each setting in OUT-NAME. A
run stopped early, or a setting added on resume, covers fewer instances; only the instances that all
the given runs hold are scored, and their ids are printed. Per form and setting: file R@1, R@5 and
function Hit@5 (the shared score.py), P(gold fn in expands) over every pack whose instance has gold
functions (the handles a pack tells the agent to expand first), handle tokens per pack, stop rate,
P(gold fn in expands | stop), the ECE of `confidence` (as in stop_calibration.py's summary), and
against the base run the packs whose stop_querying differs.
"""
import argparse, json, os, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import splits  # noqa: E402
import stop_calibration as stopcal  # noqa: E402


def rows(path):
    out = {}
    if os.path.exists(path):
        for l in open(path):
            if l.strip():
                r = json.loads(l)
                if "error" not in r:
                    out[r["instance_id"]] = r
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("names", nargs="*")
    ap.add_argument("--forms", default="full,title,query")
    a = ap.parse_args()
    runs = [("base", a.out)] + [(n, f"{a.out}-{n}") for n in a.names]
    res = {n: rows(os.path.join(d, "results.jsonl")) for n, d in runs}
    ids = sorted(set.intersection(*[set(v) for v in res.values()]))
    dev = {json.loads(l)["instance_id"]: json.loads(l) for l in open(splits.DEV) if l.strip()}
    sc = stopcal.load_score()
    inst_list = [dev[i] for i in ids]
    print(f"{len(ids)} instances: {' '.join(ids)}\n")
    print("| form | setting | file R@1 | R@5 | fn Hit@5 | P(gold fn in expands) | handle tokens/pack | stop rate "
          "| P(gold fn in expands \\| stop) | ECE | stop differs from base |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for f in a.forms.split(","):
        for n, _ in runs:
            packs, preds = [], {}
            for i in ids:
                rec = res[n][i].get(f, {"error": "missing"})
                p = stopcal.per_pack(rec, dev[i], sc)
                packs.append(p)
                hs = rec.get("handles") or []
                preds[i] = {"ranked_files": [h["path"] for h in hs], "tokens_returned": p["handle_tokens"],
                            "ranked_handles": [{"path": h["path"], "start": h["start"], "end": h["end"]} for h in hs]}
            g = stopcal.aggregate(packs, preds, inst_list, sc)
            fmt = stopcal.fmt
            with_fn = [p for p in packs if p["has_fn"]]
            in_exp = sum(p["fn_in_expands"] for p in with_fn) / max(1, len(with_fn))
            differs = sum(bool(res[n][i].get(f, {}).get("stop")) != bool(res["base"][i].get(f, {}).get("stop"))
                          for i in ids)
            print(f"| {f} | {n} | {fmt(g['file_r1'])} | {fmt(g['file_r5'])} | {fmt(g['fn_hit5'])} | "
                  f"{fmt(in_exp)} (n={len(with_fn)}) | {fmt(g['handle_tokens_per_pack'], 0)} | {fmt(g['stop_rate'])} | "
                  f"{fmt(g['p_fn_in_expands_given_stop'])} (n={g['stop_with_fn_n']}) | {fmt(g['ece'])} | {differs} |")


if __name__ == "__main__":
    main()
