#!/usr/bin/env python3
"""Trust benchmark for evidence packs: is `stop_querying` right, is `confidence` calibrated?

Per instance, one tree and one index (kept across forms; see trees.py), then
`canopy --root TREE --quiet --json pack --pattern=<question>` for three forms of the question:

  full   the whole issue text (as pack_adapter.py passes it: NULs dropped, cut at 120 KB)
  title  its first non-empty line (an issue's first line is its title)
  query  3-6 words an agent would type, made from the title by this fixed rule (agent_query();
         never tuned per instance):
           1. words = maximal runs of letters, digits and `_`, joined through `.`, `::` or `-`
              inside a word (`QuerySet.filter`, `collect-only` stay one word); everything else
              (punctuation, backticks, quotes, brackets) separates words;
           2. drop numbers (`#4944`), single lower-case letters, and words whose lower-case form
              is in STOP (English function words and bug-report filler such as "bug", "issue",
              "error", "fails", "wrong", "support");
           3. keep the rest in title order, case as written, first occurrence only, first 6;
           4. fewer than 3 left: add back dropped words (not numbers) in title order until 3.

Scores (per form, and over all forms pooled), from the pack's JSON:
  stop rate              share of packs with guidance.stop_querying = true
  P(fn in expands|stop)  of stop packs whose instance has gold functions: a handle listed in
                         `expand_suggestion` (the ids the pack tells the agent to expand; their
                         number is guidance.suggested_expand_count) overlaps a gold function span
                         of its gold file (score.py's rule: same path, overlapping line range)
  ECE                    guidance.confidence read as P(a gold file is in the pack: any handle in a
                         gold file); expected calibration error over 10 equal-width bins
                         (sum over bins of n_bin/N * |hit rate - mean confidence|), and the table
  file R@1, R@5, fn Hit@5  the shared score.py on the handles in rank order
  handle tokens/pack     sum of the handles' token_count (what expanding them all costs)
  tokens/handle          mean token_count of a handle
  wire tokens            o200k_base tokens of the whole JSON response as printed (tokcount.py;
                         bytes if no tokenizer), and the share of them in each top-level part:
                         handles, files, guidance (guidance + expand_suggestion + novelty),
                         signals, other (totals, freshness)

  stop_calibration.py --split tune|report|IDS.txt | --instances FILE.jsonl
                      [--bin canopy] [--forms full,title,query] [--out DIR] [--trees DIR]
                      [--git-trees] [--keep] [--model DIR] [--limit N] [--examples N]
  stop_calibration.py --out DIR --summary      (tables of a finished or partial run)

Instances run with repos interleaved (splits.interleave), so a partial run stays balanced.

Writes DIR/results.jsonl (one line per instance: every form's pack fields, timings),
DIR/summary.json and DIR/summary.md. Instances already in DIR/results.jsonl are skipped, so a
stopped run resumes. The binary is copied into DIR first. With --keep, trees and indexes stay
under --trees (default $EVAL_WORK/kept) and a later run of any binary reuses them: the index step
is skipped when the same binary and model indexed the tree, otherwise `canopy index` updates it
(a binary with a new index schema rebuilds it). Needs MIRROR_ROOT (see README.md).
Run with a Python that has tiktoken for token counts of whole responses (see tokcount.py).
"""
import argparse, importlib.util, json, os, re, shutil, subprocess, sys, time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import splits, tokcount, trees  # noqa: E402

SHARED = os.environ.get("EVAL_SHARED", "/work/shared/eval")
EVAL_OUT = os.environ.get("EVAL_OUT", "/work/eval-data/runs")
FORMS = ("full", "title", "query")
MAX_ARG = 120_000

STOP = set("""
a an the and or but nor of to in on at by for from with without into onto over under about as is are
was were be been being am do does did done doing have has had having it its this that these those there
here then than so such not no can cannot could should would will may might must shall i we you he she
they me my our your their them us if when while where which who whom whose what why how all any some
each every both either neither other another more most less least very too also just only even still yet
again already via per vs etc eg ie doesn don isn aren wasn weren didn hasn haven shouldn won wouldn
couldn cant dont doesnt isnt wont
bug bugs issue issues problem problems error errors fix fixes fixed wrong incorrect incorrectly unexpected
unexpectedly properly correctly work works working worked fail fails failing failed broken use uses using
used make makes get gets add adds support supports allow allows
""".split())

WORD = re.compile(r"[A-Za-z0-9_]+(?:(?:\.|::|-)[A-Za-z0-9_]+)*")


def title_of(text):
    return next((l.strip() for l in text.splitlines() if l.strip()), "")


def agent_query(title):
    """The 3-6-word query an agent would type, from an issue title (rule in the module docstring)."""
    words = WORD.findall(title)
    keep, seen = [], set()
    for i, w in enumerate(words):
        low = w.lower()
        if w.isdigit() or (len(w) == 1 and not w.isupper()) or low in STOP or low in seen:
            continue
        seen.add(low)
        keep.append(i)
    keep = keep[:6]
    if len(keep) < 3:
        for i, w in enumerate(words):
            if len(keep) >= 3:
                break
            if i not in keep and not w.isdigit() and w.lower() not in seen:
                seen.add(w.lower())
                keep.append(i)
        keep.sort()
    return " ".join(words[i] for i in keep)


def question(inst, form):
    text = inst["query"].replace("\x00", " ")
    if form == "full":
        if len(text.encode()) > MAX_ARG:
            text = text.encode()[:MAX_ARG].decode("utf-8", errors="ignore")
        return text
    if form == "title":
        return title_of(text)
    if form == "query":
        return agent_query(title_of(text))
    raise ValueError(form)


def load_instances():
    """The development instances by id (instances_dev.jsonl of the shared eval folder)."""
    insts = {}
    with open(os.path.join(SHARED, "instances_dev.jsonl")) as f:
        for line in f:
            d = json.loads(line)
            insts[d["instance_id"]] = d
    return insts


def load_score():
    spec = importlib.util.spec_from_file_location("shared_score", os.path.join(SHARED, "score.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


PARTS = {"handles": "handles", "files": "files", "guidance": "guidance", "expand_suggestion": "guidance",
         "novelty": "guidance", "signals": "signals"}


def part_tokens(pack):
    """Tokens (or bytes) of each top-level part of the response, grouped as in PARTS (rest: other)."""
    out = {}
    for k, v in pack.items():
        s = json.dumps({k: v}, separators=(",", ":"), ensure_ascii=False)[1:-1]
        n = tokcount.count(s)
        out[PARTS.get(k, "other")] = out.get(PARTS.get(k, "other"), 0) + (n if n is not None else len(s.encode()))
    return out


def pack_once(bin_, tree, q, model):
    args = [bin_] + (["--model", model] if model else []) + ["--root", tree, "--quiet", "--json", "pack",
                                                             "--pattern=" + q]
    t0 = time.perf_counter()
    p = subprocess.run(args, capture_output=True, text=True)
    ms = (time.perf_counter() - t0) * 1000
    if p.returncode != 0:
        return {"error": f"exit {p.returncode}: {p.stderr[-400:]}", "pack_ms": round(ms, 1)}
    raw = p.stdout
    pack = json.loads(raw)
    g = pack.get("guidance") or {}
    wt = tokcount.count(raw)
    return {
        "pack_ms": round(ms, 1),
        "stop": bool(g.get("stop_querying")),
        "confidence": g.get("confidence"),
        "band": g.get("confidence_band"),
        "action": g.get("recommended_action"),
        "suggested_expand_count": g.get("suggested_expand_count"),
        "expand": pack.get("expand_suggestion") or [],
        "signals": pack.get("signals"),
        "handles": [{"id": h.get("id"), "path": h["file_path"], "start": h["line_range"][0],
                     "end": h["line_range"][1], "name": h.get("name"), "qualified_name": h.get("qualified_name"),
                     "preview": h.get("preview"), "node_type": h.get("node_type"),
                     "tokens": h.get("token_count"), "score": h.get("score")} for h in pack.get("handles", [])],
        "total_tokens": pack.get("total_tokens"),
        "total_candidates": pack.get("total_candidates"),
        "wire_bytes": len(raw.encode()),
        "wire_tokens": wt,
        "parts": part_tokens(pack),
        "keys": sorted(pack),
    }


def run(a):
    os.makedirs(a.out, exist_ok=True)
    insts = splits.interleave(splits.instances(a.instances) if a.instances else splits.instances(a.split))
    if a.limit:
        insts = insts[:a.limit]
    bin_ = os.path.join(a.out, "canopy")
    meta_f = os.path.join(a.out, "meta.json")
    if not os.path.exists(bin_):
        shutil.copy(a.bin, bin_)
    sha = trees.binary_id(bin_)
    ver = subprocess.run([bin_, "--version"], capture_output=True, text=True).stdout.strip()
    meta = {"binary": a.bin, "binary_sha1_12": sha, "version": ver, "forms": a.forms,
            "split": a.instances or a.split, "instances": len(insts), "git_trees": a.git_trees,
            "model": a.model, "tokenizer": "o200k_base" if tokcount.encoding() else "bytes"}
    if os.path.exists(meta_f):
        old = json.load(open(meta_f))
        if old.get("binary_sha1_12") != sha:
            raise SystemExit(f"{a.out} holds a run of another binary ({old.get('binary_sha1_12')}); use another --out")
    json.dump(meta, open(meta_f, "w"), indent=1)
    results = os.path.join(a.out, "results.jsonl")
    done = set()
    if os.path.exists(results):
        done = {json.loads(l)["instance_id"] for l in open(results) if l.strip()}
    forms = a.forms.split(",")
    # --variants: the same packs again under other ranking settings (CANOPY_PACK_TUNING, a
    # measuring knob), on the same index, each into its own run dir OUT-<name>.
    variants = [v.split("=", 1) for v in (a.variants or "").split(";") if v.strip()]
    for name, _ in variants:
        os.makedirs(f"{a.out}-{name}", exist_ok=True)
        if not os.path.exists(f"{a.out}-{name}/canopy"):
            shutil.copy(bin_, f"{a.out}-{name}/canopy")
        json.dump(dict(meta, tuning=dict(variants)[name]), open(f"{a.out}-{name}/meta.json", "w"), indent=1)
    for n, inst in enumerate(insts):
        iid = inst["instance_id"]
        if iid in done:
            continue
        row = {"instance_id": iid, "repo": inst["repo"]}
        existed = os.path.exists(trees.tree_path(a.trees, inst, a.git_trees))
        try:
            tree, row["materialise_s"] = trees.materialise(inst, a.trees, a.git_trees)
            row["index_s"] = round(trees.ensure_index(bin_, tree, a.model, sha), 2)
            for f in forms:
                q = question(inst, f)
                r = pack_once(bin_, tree, q, None)
                if f != "full":
                    r["question"] = q
                row[f] = r
            for name, spec in variants:
                vrow = {k: row[k] for k in ("instance_id", "repo", "materialise_s", "index_s")}
                os.environ["CANOPY_PACK_TUNING"] = spec
                try:
                    for f in forms:
                        q = question(inst, f)
                        vrow[f] = pack_once(bin_, tree, q, None)
                        if f != "full":
                            vrow[f]["question"] = q
                finally:
                    os.environ.pop("CANOPY_PACK_TUNING", None)
                with open(os.path.join(f"{a.out}-{name}", "results.jsonl"), "a") as fh:
                    fh.write(json.dumps(vrow) + "\n")
        except Exception as e:  # a failed instance is recorded, not fatal
            row["error"] = str(e)[-500:]
        finally:
            trees.release(a.trees, inst, a.git_trees, "full" if a.keep_full else a.keep, existed)
        with open(results, "a") as fh:
            fh.write(json.dumps(row) + "\n")
        print(f"[{n + 1}/{len(insts)}] {iid} index {row.get('index_s', '-')} s "
              f"{row.get('error', '') or ' '.join(f + (':stop' if row[f].get('stop') else '') for f in forms)}",
              file=sys.stderr, flush=True)
    summary(a)


# ---------------------------------------------------------------- scoring

def gold_fn_hit(handles, inst, sc):
    spans = inst.get("gold_function_spans") or {}
    for h in handles:
        hp = sc.norm_path(h["path"])
        for g in inst.get("gold_functions") or []:
            sp = spans.get(g)
            if g.split("::", 1)[0] == hp and sp and sc.overlaps(h["start"], h["end"], sp[0], sp[1]):
                return True
    return False


def per_pack(r, inst, sc):
    """Derived facts of one pack (r = a form's record)."""
    gold = set(inst["gold_files"])
    hs = r.get("handles") or []
    by_id = {h["id"]: h for h in hs}
    exp = [by_id[i] for i in r.get("expand") or [] if i in by_id]
    has_fn = bool(inst.get("gold_functions")) and bool(inst.get("gold_function_spans"))
    return {
        "ok": "error" not in r,
        "stop": bool(r.get("stop")),
        "conf": r.get("confidence") if r.get("confidence") is not None else 0.0,
        "band": r.get("band"),
        "file_in_pack": any(h["path"] in gold for h in hs),
        "file_in_expands": any(h["path"] in gold for h in exp),
        "has_fn": has_fn,
        "fn_in_expands": has_fn and gold_fn_hit(exp, inst, sc),
        "fn_in_pack": has_fn and gold_fn_hit(hs, inst, sc),
        "n_expand": len(exp),
        "n_expand_listed": len(r.get("expand") or []),
        "suggested_expand_count": r.get("suggested_expand_count"),
        "handle_tokens": sum(int(h.get("tokens") or 0) for h in hs),
        "n_handles": len(hs),
        "tiny_handles": sum(1 for h in hs if int(h.get("tokens") or 0) <= 5),
        "wire_tokens": r.get("wire_tokens"),
        "wire_bytes": r.get("wire_bytes", 0),
        "parts": r.get("parts") or {},
        "pack_ms": r.get("pack_ms"),
        "action": r.get("action"),
        "signals": r.get("signals") or {},
    }


def ece_table(packs, bins=10):
    rows, ece, n = [], 0.0, len(packs)
    for b in range(bins):
        lo, hi = b / bins, (b + 1) / bins
        sel = [p for p in packs if lo <= p["conf"] < hi or (b == bins - 1 and p["conf"] >= 1.0)]
        if not sel:
            rows.append({"bin": f"[{lo:.1f},{hi:.1f})", "n": 0})
            continue
        conf = sum(p["conf"] for p in sel) / len(sel)
        acc = sum(p["file_in_pack"] for p in sel) / len(sel)
        ece += len(sel) / max(1, n) * abs(acc - conf)
        rows.append({"bin": f"[{lo:.1f},{hi:.1f})", "n": len(sel), "mean_conf": conf, "hit_rate": acc})
    return ece, rows


def aggregate(packs, preds, inst_list, sc):
    mean = lambda xs: sum(xs) / len(xs) if xs else None
    stop = [p for p in packs if p["stop"]]
    nostop = [p for p in packs if not p["stop"]]
    stop_fn = [p for p in stop if p["has_fn"]]
    nostop_fn = [p for p in nostop if p["has_fn"]]
    ece, rel = ece_table(packs)
    m, _ = sc.score(inst_list, preds)
    parts = {}
    for p in packs:
        for k, v in p["parts"].items():
            parts[k] = parts.get(k, 0) + v
    ptotal = sum(parts.values())
    handles_n = sum(p["n_handles"] for p in packs)
    wt = [p["wire_tokens"] for p in packs if p["wire_tokens"] is not None]
    return {
        "packs": len(packs),
        "errors": sum(1 for p in packs if not p["ok"]),
        "stop_rate": mean([p["stop"] for p in packs]),
        "stop_n": len(stop),
        "p_fn_in_expands_given_stop": mean([p["fn_in_expands"] for p in stop_fn]),
        "stop_with_fn_n": len(stop_fn),
        "p_file_in_expands_given_stop": mean([p["file_in_expands"] for p in stop]),
        "p_file_in_pack_given_stop": mean([p["file_in_pack"] for p in stop]),
        "p_fn_in_expands_given_nostop": mean([p["fn_in_expands"] for p in nostop_fn]),
        "p_file_in_pack_given_nostop": mean([p["file_in_pack"] for p in nostop]),
        "p_fn_in_expands": mean([p["fn_in_expands"] for p in packs if p["has_fn"]]),
        "mean_confidence": mean([p["conf"] for p in packs]),
        "p_file_in_pack": mean([p["file_in_pack"] for p in packs]),
        "ece": ece,
        "reliability": rel,
        "bands": {b: {"n": len(s), "p_file_in_pack": mean([p["file_in_pack"] for p in s]),
                      "mean_conf": mean([p["conf"] for p in s])}
                  for b in ("high", "medium", "low") for s in [[p for p in packs if p["band"] == b]]},
        "file_r1": mean(m.get("file_recall@1", [])),
        "file_r5": mean(m.get("file_recall@5", [])),
        "fn_hit5": mean(m.get("func_hit@5", [])),
        "fn_hit5_n": len(m.get("func_hit@5", [])),
        "handle_tokens_per_pack": mean([p["handle_tokens"] for p in packs]),
        "tokens_per_handle": (sum(p["handle_tokens"] for p in packs) / handles_n) if handles_n else None,
        "handles_per_pack": handles_n / max(1, len(packs)),
        "expands_per_pack": mean([p["n_expand"] for p in packs]),
        "expand_count_mismatch": sum(1 for p in packs if p["ok"] and p["suggested_expand_count"] is not None
                                     and p["suggested_expand_count"] != p["n_expand_listed"]),
        "expands_not_in_handles": sum(p["n_expand_listed"] - p["n_expand"] for p in packs),
        "wire_tokens_per_pack": mean(wt),
        # What one handle costs on the wire (its JSON record), and the metadata's share.
        "wire_tokens_per_handle": (parts.get("handles", 0) / handles_n) if handles_n else None,
        "meta_share": (sum(parts.get(k, 0) for k in ("files", "signals", "guidance")) / ptotal) if ptotal else None,
        "tiny_handles": sum(p["tiny_handles"] for p in packs),
        "wire_bytes_per_pack": mean([p["wire_bytes"] for p in packs]),
        "wire_unit": "o200k tokens" if wt else "bytes",
        "part_share": {k: v / ptotal for k, v in sorted(parts.items())} if ptotal else {},
        "stop_equals_band_high": sum(1 for p in packs if p["ok"] and p["stop"] == (p["band"] == "high")),
        "min_conf_stop": min((p["conf"] for p in stop), default=None),
        "max_conf_nostop": max((p["conf"] for p in nostop if p["ok"]), default=None),
        "actions": {k: sum(1 for p in packs if p.get("action") == k) for k in sorted({p.get("action") for p in packs if p.get("action")})},
        "signals_hit_vs_miss": {k: {"hit": mean([float(p["signals"][k]) for p in packs if p["file_in_pack"] and k in p["signals"]]),
                                    "miss": mean([float(p["signals"][k]) for p in packs if not p["file_in_pack"] and k in p["signals"]])}
                                for k in sorted({k for p in packs for k in p["signals"]})},
        "coverage_is_1": mean([float(p["signals"].get("coverage", 0)) >= 0.999 for p in packs if p["ok"]]),
        "expand_count_by_band": {b: {str(c): sum(1 for p in packs if p["band"] == b and p["suggested_expand_count"] == c)
                                     for c in sorted({p["suggested_expand_count"] for p in packs if p["band"] == b})}
                                 for b in ("high", "medium", "low")},
        "pack_ms_p50": sorted(p["pack_ms"] for p in packs if p["pack_ms"])[len(packs) // 2] if packs else None,
    }


def summary(a):
    sc = load_score()
    results = os.path.join(a.out, "results.jsonl")
    rows = [json.loads(l) for l in open(results) if l.strip()]
    meta = json.load(open(os.path.join(a.out, "meta.json"))) if os.path.exists(os.path.join(a.out, "meta.json")) else {}
    dev = {json.loads(l)["instance_id"]: json.loads(l) for l in open(splits.DEV) if l.strip()}
    ok = [r for r in rows if "error" not in r]
    forms = [f for f in FORMS if any(f in r for r in ok)]
    inst_list = [dev[r["instance_id"]] for r in ok]
    res = {"meta": meta, "instances": len(ok), "failed": [r["instance_id"] for r in rows if "error" in r],
           "forms": {}, "examples": {}}
    allpacks, allpreds_inst, allpreds = [], [], {}
    for f in forms:
        packs, preds = [], {}
        for r in ok:
            inst = dev[r["instance_id"]]
            rec = r.get(f, {"error": "missing"})
            p = per_pack(rec, inst, sc)
            p["instance_id"] = r["instance_id"]
            packs.append(p)
            hs = rec.get("handles") or []
            files = []
            for h in hs:
                if h["path"] not in files:
                    files.append(h["path"])
            preds[r["instance_id"]] = {"ranked_files": files, "tokens_returned": p["handle_tokens"],
                                       "ranked_handles": [{"path": h["path"], "start": h["start"], "end": h["end"]}
                                                          for h in hs]}
            allpreds[f"{f}:{r['instance_id']}"] = preds[r["instance_id"]]
            allpreds_inst.append(dict(inst, instance_id=f"{f}:{r['instance_id']}"))
        res["forms"][f] = aggregate(packs, preds, inst_list, sc)
        allpacks += packs
        wrong = [p for p in packs if p["stop"] and not p["file_in_pack"]]
        nofn = [p for p in packs if p["stop"] and p["has_fn"] and p["file_in_pack"] and not p["fn_in_expands"]]
        res["examples"][f] = {"stop_without_gold_file": [p["instance_id"] for p in wrong],
                              "stop_gold_file_but_no_gold_fn_in_expands": [p["instance_id"] for p in nofn]}
    if len(forms) > 1:
        res["forms"]["all"] = aggregate(allpacks, allpreds, allpreds_inst, sc)
    t = {}
    for r in ok:
        if r.get("index_s"):
            t.setdefault(r["repo"], []).append(r["index_s"])
    res["index_s_by_repo"] = {k: {"n": len(v), "median": sorted(v)[len(v) // 2], "max": max(v)} for k, v in sorted(t.items())}
    json.dump(res, open(os.path.join(a.out, "summary.json"), "w"), indent=1)
    md = markdown(res)
    open(os.path.join(a.out, "summary.md"), "w").write(md)
    print(md)


def fmt(x, d=3):
    return "–" if x is None else (f"{x:.{d}f}" if isinstance(x, float) else str(x))


def markdown(res):
    m = res["meta"]
    out = [f"{res['instances']} instances ({len(res['failed'])} failed); binary {m.get('version', '?')} "
           f"sha1 {m.get('binary_sha1_12', '?')}; split {m.get('split')}; "
           f"{'git' if m.get('git_trees') else 'plain'} trees; wire counted in {m.get('tokenizer')}\n"]
    out.append("| form | packs | stop rate | P(gold fn in expands \\| stop) | P(gold file in pack \\| stop) | "
               "P(gold fn in expands \\| no stop) | mean conf | P(gold file in pack) | ECE | file R@1 | R@5 | "
               "fn Hit@5 | handle tokens/pack | tokens/handle | wire tokens/pack |")
    out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for f, s in res["forms"].items():
        out.append(f"| {f} | {s['packs']} | {fmt(s['stop_rate'])} | {fmt(s['p_fn_in_expands_given_stop'])} "
                   f"(n={s['stop_with_fn_n']}) | {fmt(s['p_file_in_pack_given_stop'])} | "
                   f"{fmt(s['p_fn_in_expands_given_nostop'])} | {fmt(s['mean_confidence'])} | "
                   f"{fmt(s['p_file_in_pack'])} | {fmt(s['ece'])} | {fmt(s['file_r1'])} | {fmt(s['file_r5'])} | "
                   f"{fmt(s['fn_hit5'])} | {fmt(s['handle_tokens_per_pack'], 0)} | {fmt(s['tokens_per_handle'], 0)} | "
                   f"{fmt(s['wire_tokens_per_pack'], 0)} |")
    parts = sorted({k for s in res["forms"].values() for k in s["part_share"]})
    out.append("\nShare of the response's tokens (whole JSON as printed) per top-level part:\n")
    out.append("| form | " + " | ".join(parts) + " | expands/pack | handles/pack | pack p50 ms |")
    out.append("|---|" + "---:|" * (len(parts) + 3))
    for f, s in res["forms"].items():
        out.append(f"| {f} | " + " | ".join(fmt(s["part_share"].get(k)) for k in parts) +
                   f" | {fmt(s['expands_per_pack'], 2)} | {fmt(s['handles_per_pack'], 2)} | {fmt(s['pack_ms_p50'], 0)} |")
    out.append("\nWire tokens per handle record (handles part / handles), files + signals + guidance share "
               "of the response, handles of <= 5 tokens (token_count): "
               + "; ".join(f"{f} {fmt(s.get('wire_tokens_per_handle'), 1)} / {fmt(s.get('meta_share'))} / "
                           f"{s.get('tiny_handles')}" for f, s in res["forms"].items()) + "\n")
    out.append("\nPacks whose guidance.suggested_expand_count differs from len(expand_suggestion): "
               + ", ".join(f"{f} {s['expand_count_mismatch']}" for f, s in res["forms"].items())
               + "; expand ids not among the handles: "
               + ", ".join(f"{f} {s['expands_not_in_handles']}" for f, s in res["forms"].items()) + "\n")
    for f, s in res["forms"].items():
        out.append(f"{f}: stop_querying == (confidence_band == high) in {s['stop_equals_band_high']} of "
                   f"{s['packs'] - s['errors']} packs; lowest confidence with stop {fmt(s['min_conf_stop'])}, highest "
                   f"without {fmt(s['max_conf_nostop'])}; recommended_action: "
                   + ", ".join(f"{k} {v}" for k, v in s["actions"].items()))
    out.append("\nSignals, mean over packs with a gold file (hit) vs without (miss); share of packs with coverage 1.0; "
               "suggested_expand_count per band:\n")
    for f, s in res["forms"].items():
        out.append(f"{f}: " + ", ".join(f"{k} {fmt(v['hit'])} vs {fmt(v['miss'])}" for k, v in s["signals_hit_vs_miss"].items())
                   + f"; coverage 1.0 in {fmt(s['coverage_is_1'])}; expands per band "
                   + "; ".join(f"{b} {d}" for b, d in s["expand_count_by_band"].items()))
    if res.get("index_s_by_repo"):
        out.append("\nIndex seconds per tree indexed in this run (median / max): " + ", ".join(
            f"{k.split('/')[1]} {v['median']:.1f} / {v['max']:.1f} (n={v['n']})" for k, v in res["index_s_by_repo"].items()))
    out.append("\nReliability (confidence as P(gold file in pack)), bins of width 0.1: n / mean confidence / hit rate\n")
    out.append("| bin | " + " | ".join(res["forms"]) + " |")
    out.append("|---|" + "---|" * len(res["forms"]))
    first = next(iter(res["forms"].values()))
    for i, b in enumerate(first["reliability"]):
        cells = []
        for s in res["forms"].values():
            r = s["reliability"][i]
            cells.append("–" if not r["n"] else f"{r['n']} / {r['mean_conf']:.2f} / {r['hit_rate']:.2f}")
        out.append(f"| {b['bin']} | " + " | ".join(cells) + " |")
    out.append("\nBands: n / P(gold file in pack) / mean confidence\n")
    out.append("| band | " + " | ".join(res["forms"]) + " |")
    out.append("|---|" + "---|" * len(res["forms"]))
    for b in ("high", "medium", "low"):
        cells = []
        for s in res["forms"].values():
            d = s["bands"][b]
            cells.append("–" if not d["n"] else f"{d['n']} / {d['p_file_in_pack']:.2f} / {d['mean_conf']:.2f}")
        out.append(f"| {b} | " + " | ".join(cells) + " |")
    for f, ex in res["examples"].items():
        w, nf = ex["stop_without_gold_file"], ex["stop_gold_file_but_no_gold_fn_in_expands"]
        out.append(f"\n{f}: stop given with no gold file in the pack: {len(w)}"
                   + (f" ({', '.join(w[:8])}{', …' if len(w) > 8 else ''})" if w else "")
                   + f"; with a gold file but no gold function in the expands: {len(nf)}"
                   + (f" ({', '.join(nf[:8])}{', …' if len(nf) > 8 else ''})" if nf else ""))
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--split", default="tune", help="tune | report | an id file (one id a line)")
    ap.add_argument("--instances", help="an instances .jsonl file instead of --split")
    ap.add_argument("--bin", default=os.path.join(HERE, "../../target/release/canopy"))
    ap.add_argument("--forms", default=",".join(FORMS))
    ap.add_argument("--out", help=f"run dir (default {EVAL_OUT}/stop-<split>-<binary sha1>)")
    ap.add_argument("--trees", default=trees.DEFAULT_ROOT)
    ap.add_argument("--git-trees", action="store_true", help="trees are git checkouts with history (trees.py)")
    ap.add_argument("--keep", action="store_true", help="keep trees and indexes under --trees for later runs "
                                                        "(git trees lean: see trees.py)")
    ap.add_argument("--keep-full", action="store_true", help="keep git trees with their files")
    ap.add_argument("--model", default=None, help="index with this embedding model (shares the index with "
                                                  "context_eval.py runs that use it)")
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--variants", help="name=key=v,key=v;name=…: also pack under these CANOPY_PACK_TUNING "
                                       "settings (same index), each into OUT-<name>")
    ap.add_argument("--summary", action="store_true")
    a = ap.parse_args()
    for f in a.forms.split(","):
        if f not in FORMS:
            ap.error(f"unknown form {f}")
    if not a.out:
        if a.summary:
            ap.error("--summary needs --out")
        name = os.path.basename(a.instances or a.split).split(".")[0]
        a.out = os.path.join(EVAL_OUT, f"stop-{name}-{trees.binary_id(a.bin)}")
    summary(a) if a.summary else run(a)


if __name__ == "__main__":
    main()
