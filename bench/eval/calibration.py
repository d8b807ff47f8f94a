#!/usr/bin/env python3
"""Calibration of evidence-pack guidance against gold fix locations.

  calibration.py SIDE.jsonl [--instances instances.jsonl] [--preds canopy.preds.jsonl] [--json]

SIDE.jsonl is written by pack_adapter.py (one line per pack: guidance, signals, handles).
For each pack:
  file_hit  = some handle of the pack is in a gold file (any of the returned handles)
  file_hit5 = a gold file is among the first 5 distinct files of the pack
  func_hit  = some handle overlaps a gold function's span (same file, overlapping lines)
Reported per confidence_band (high/medium/low), for stop_querying=true/false, per confidence
bucket, and the mean of each signal over hits vs misses (which signals separate them).
A well-calibrated band has a clearly higher hit rate than the band below it; stop_querying=true
should be right (file_hit) most of the time.
"""
import argparse, json
from collections import defaultdict

BUCKETS = [0.0, 0.3, 0.45, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.9, 1.01]


def overlaps(a0, a1, b0, b1):
    return a0 <= b1 and b0 <= a1


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("side")
    ap.add_argument("--instances", default="/work/shared/eval/instances_dev.jsonl")
    ap.add_argument("--preds", help="run_engine output; adds per-instance seconds (index+pack)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    gold = {}
    for l in open(a.instances):
        if l.strip():
            r = json.loads(l); gold[r["instance_id"]] = r
    secs = {}
    if a.preds:
        for l in open(a.preds):
            if l.strip():
                d = json.loads(l); secs[d["instance_id"]] = d.get("seconds")
    rows = []
    for l in open(a.side):
        if not l.strip():
            continue
        s = json.loads(l)
        r = gold.get(s["instance_id"])
        if r is None or "guidance" not in s:
            continue
        gf = set(r["gold_files"])
        hs = s.get("handles", [])
        files = []
        for h in hs:
            if h["path"] not in files:
                files.append(h["path"])
        spans = r.get("gold_function_spans", {})
        func_hit = any(h["path"] == g.split("::", 1)[0] and sp and overlaps(h["start"], h["end"], sp[0], sp[1])
                       for h in hs for g, sp in spans.items())
        g = s["guidance"]
        rows.append({
            "id": s["instance_id"], "band": g["confidence_band"], "stop": bool(g["stop_querying"]),
            "conf": g["confidence"], "signals": s.get("signals") or {},
            "file_hit": any(h["path"] in gf for h in hs), "file_hit5": bool(gf & set(files[:5])),
            "func_hit": func_hit, "has_func": bool(spans), "tokens": sum(h.get("token_count") or 0 for h in hs),
            "index_s": s.get("index_seconds"), "pack_s": s.get("pack_seconds"), "secs": secs.get(s["instance_id"]),
        })

    def agg(sel):
        n = len(sel)
        if not n:
            return {"n": 0}
        nf = sum(1 for x in sel if x["has_func"])
        return {"n": n,
                "file_hit": sum(x["file_hit"] for x in sel) / n,
                "file_hit@5files": sum(x["file_hit5"] for x in sel) / n,
                "func_hit": (sum(x["func_hit"] for x in sel if x["has_func"]) / nf) if nf else float("nan"),
                "mean_conf": sum(x["conf"] for x in sel) / n}

    res = {"overall": agg(rows), "band": {}, "stop": {}, "buckets": []}
    for b in ("high", "medium", "low"):
        res["band"][b] = agg([x for x in rows if x["band"] == b])
    for st in (True, False):
        res["stop"][str(st).lower()] = agg([x for x in rows if x["stop"] == st])
    for lo, hi in zip(BUCKETS, BUCKETS[1:]):
        sel = [x for x in rows if lo <= x["conf"] < hi]
        if sel:
            res["buckets"].append({"range": f"[{lo:.2f},{min(hi, 1.0):.2f})", **agg(sel)})
    sig_names = sorted({k for x in rows for k in x["signals"]})
    sig = {}
    for k in sig_names:
        hit = [float(x["signals"][k]) for x in rows if x["file_hit"] and k in x["signals"]]
        miss = [float(x["signals"][k]) for x in rows if not x["file_hit"] and k in x["signals"]]
        sig[k] = {"hit_mean": sum(hit) / len(hit) if hit else float("nan"),
                  "miss_mean": sum(miss) / len(miss) if miss else float("nan")}
    res["signals"] = sig
    t = [x for x in rows if x["secs"] is not None]
    if t:
        ts = sorted(x["secs"] for x in t)
        res["timing"] = {"n": len(t), "mean_s": sum(ts) / len(ts), "median_s": ts[len(ts) // 2], "max_s": ts[-1],
                         "mean_index_s": sum(x["index_s"] or 0 for x in t) / len(t),
                         "mean_pack_s": sum(x["pack_s"] or 0 for x in t) / len(t)}
    if a.json:
        print(json.dumps(res, indent=1)); return

    def line(label, d):
        if not d["n"]:
            return f"| {label} | 0 | – | – | – | – |"
        return (f"| {label} | {d['n']} | {d['file_hit']:.3f} | {d['file_hit@5files']:.3f} | "
                f"{d['func_hit']:.3f} | {d['mean_conf']:.3f} |")
    hdr = "| group | packs | gold file in pack | gold file in first 5 files | gold function overlapped | mean confidence |\n|---|---|---|---|---|---|"
    print(f"calibration over {len(rows)} packs\n")
    print(hdr)
    print(line("all", res["overall"]))
    for b in ("high", "medium", "low"):
        print(line(f"band={b}", res["band"][b]))
    for st in ("true", "false"):
        print(line(f"stop_querying={st}", res["stop"][st]))
    print("\nby confidence bucket\n")
    print(hdr)
    for d in res["buckets"]:
        print(line(d["range"], d))
    print("\nsignals: mean over packs with a gold file (hit) vs without (miss)\n")
    print("| signal | hit | miss |\n|---|---|---|")
    for k, v in sig.items():
        print(f"| {k} | {v['hit_mean']:.3f} | {v['miss_mean']:.3f} |")
    if "timing" in res:
        tm = res["timing"]
        print(f"\ntiming per instance (index+pack, excl. materialising): mean {tm['mean_s']:.2f}s  median {tm['median_s']:.2f}s  "
              f"max {tm['max_s']:.2f}s  (index {tm['mean_index_s']:.2f}s + pack {tm['mean_pack_s']:.2f}s on average)")


if __name__ == "__main__":
    main()
