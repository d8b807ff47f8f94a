#!/usr/bin/env python3
"""Replays the evidence pack's function-level stop rule (issue 26) on a finished run's packs.

`canopy pack` says `stop_querying` when its best handle is a function or method that the
question names and that leads the runner-up (crates/canopy-core/src/pack.rs, `stop_earned`):

  qualified  the question spells the best handle's qualified name (`Class.method`, or the last
             two parts of a longer one) as a whole, and the runner-up's score is at most
             1 - LEAD_QUALIFIED of the best one's, and the calibrated confidence is not `low`;
  named      or, in a question of more than SHORT_WORDS words, its own name written as code
             (a whole identifier that is distinctive by shape, `in_bulk`/`getFoo`, or written
             `.name`, `` `name `` or `name(`), with a lead of LEAD_NAMED and a raw score
             (before calibration) of at least RAW_NAMED.

This script applies that rule, or a variant of its thresholds, to the stored packs of a
`stop_calibration.py` run (handles, scores and signals are in results.jsonl; the question is
rebuilt from the instance), so thresholds can be chosen on `tune` without re-running packs:

  stop_rule_replay.py RUN_DIR [--forms full,title,query] [--lead-qualified X] [--lead-named X]
                      [--raw-named X] [--short-named] [--plain-names] [--ids]

Prints per form: packs, stop rate, P(a gold function is in the first 3 handles | stop) (the
handles a stop pack suggests expanding; score.py's overlap rule), the same share over every pack
whose instance has gold functions (what any stop rule starts from), and with --ids the stop
instances marked hit/miss. A run of a binary with this rule can be scored directly with
`stop_calibration.py --out RUN --summary`; the replay is for choosing the thresholds.
"""
import argparse, json, os, re, sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import stop_calibration as sc_  # noqa: E402

LEAD_QUALIFIED, LEAD_NAMED, RAW_NAMED, STOP_EXPANDS = 0.10, 0.15, 0.70, 3
CALIBRATION = os.path.join(HERE, "..", "..", "crates", "canopy-core", "src", "pack_calibration.rs")


def tables():
    text = open(CALIBRATION).read()
    short_words = int(re.search(r"SHORT_WORDS: usize = (\d+)", text).group(1))
    out = {}
    for name in ("SHORT", "LONG"):
        body = re.search(name + r": &\[\(f64, f64\)\] = &\[(.*?)\];", text, re.S).group(1)
        out[name] = [(float(a), float(b)) for a, b in re.findall(r"\(([\d.]+), ([\d.]+)\)", body)]
    return short_words, out


def raw_confidence(sig):
    raw = 0.5 * sig.get("coverage", 0) + 0.2 * sig.get("margin", 0) + 0.15 * sig.get(
        "definition_hits", 0) + 0.15 * sig.get("agreement", 0)
    if sig.get("identifier_hit"):
        raw += 0.1
    return round(min(1.0, max(0.0, raw)) * 1000) / 1000


def is_ident(c):
    return c.isalnum() or c == "_"


def whole(q, needle):
    """(before, after) characters of each whole-identifier occurrence of needle in q."""
    for m in re.finditer(re.escape(needle), q):
        b = q[m.start() - 1] if m.start() > 0 else ""
        a = q[m.end()] if m.end() < len(q) else ""
        if not (b and is_ident(b)) and not (a and is_ident(a)):
            yield b, a


def names_qualified(q, qualified):
    parts = qualified.split(".")
    if len(parts) < 2 or any(not p for p in parts):
        return False
    return any(any(True for _ in whole(q, n)) for n in (qualified, ".".join(parts[-2:])))


def names_in_code(q, name):
    if not name:
        return False
    distinctive = len(name) >= 4 and ("_" in name.strip("_") or re.search(r"[a-z][A-Z]", name))
    return any(distinctive or b in (".", "`") or a == "(" for b, a in whole(q, name))


def stop_earned(q, words, pack, short_words, tabs, a):
    hs = pack.get("handles") or []
    if not hs or hs[0].get("node_type") not in ("function", "method"):
        return False
    top = hs[0]
    qualified = top.get("qualified_name") or top.get("name") or ""
    name = top.get("name") if top.get("qualified_name") else qualified.split(".")[-1]
    lead = 1.0 if len(hs) < 2 or not top.get("score") else max(0.0, 1 - hs[1]["score"] / top["score"])
    raw = raw_confidence(pack.get("signals") or {})
    table = tabs["SHORT"] if words <= short_words else tabs["LONG"]
    conf = next((p for up, p in table if raw <= up), table[-1][1])
    if conf < 0.6:
        return False
    if names_qualified(q, qualified) and lead >= a.lead_qualified:
        return True
    long_enough = a.short_named or words > short_words
    in_code = names_in_code(q, name) if not a.plain_names else any(True for _ in whole(q, name or "\0"))
    return long_enough and in_code and lead >= a.lead_named and raw >= a.raw_named


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("run")
    ap.add_argument("--forms", default="full,title,query")
    ap.add_argument("--lead-qualified", type=float, default=LEAD_QUALIFIED)
    ap.add_argument("--lead-named", type=float, default=LEAD_NAMED)
    ap.add_argument("--raw-named", type=float, default=RAW_NAMED)
    ap.add_argument("--short-named", action="store_true",
                    help="variant: the own-name path applies to questions of any length")
    ap.add_argument("--plain-names", action="store_true",
                    help="variant: the own name counts as any whole identifier, not only as code")
    ap.add_argument("--ids", action="store_true")
    a = ap.parse_args()
    sc = sc_.load_score()
    insts = {}
    with open(os.path.join(sc_.SHARED, "instances_dev.jsonl")) as f:
        for line in f:
            d = json.loads(line)
            insts[d["instance_id"]] = d
    short_words, tabs = tables()
    rows = [json.loads(l) for l in open(os.path.join(a.run, "results.jsonl"))]
    for form in a.forms.split(","):
        n = stops = hits = with_fn = all_fn = all_hits = 0
        ids = []
        for r in rows:
            pack, inst = r.get(form), insts[r["instance_id"]]
            if not pack or "error" in pack:
                continue
            n += 1
            if inst.get("gold_functions") and inst.get("gold_function_spans"):
                all_fn += 1
                all_hits += sc_.gold_fn_hit((pack.get("handles") or [])[:STOP_EXPANDS], inst, sc)
            asked = sc_.question(inst, form)
            # names are looked up in the question as the pack reads it: template comments
            # dropped (pack.rs clean_question); words are counted as asked
            q = re.sub(r"<!--.*?(-->|$)", "", asked, flags=re.S).replace("\r", "")
            words = len([w for w in re.split(r"[^A-Za-z0-9_]", asked) if w])
            if not stop_earned(q, words, pack, short_words, tabs, a):
                continue
            stops += 1
            has_fn = bool(inst.get("gold_functions")) and bool(inst.get("gold_function_spans"))
            hit = has_fn and sc_.gold_fn_hit((pack.get("handles") or [])[:STOP_EXPANDS], inst, sc)
            with_fn += has_fn
            hits += hit
            ids.append(f"{r['instance_id']}:{'hit' if hit else ('miss' if has_fn else 'no-gold-fn')}")
        p = f"{hits / with_fn:.3f}" if with_fn else "-"
        print(f"{form:5s} packs {n:4d}  stop {stops:3d} ({stops / max(1, n):.3f})  "
              f"P(gold fn in first {STOP_EXPANDS} | stop) {p} ({hits}/{with_fn})  "
              f"in every pack {all_hits / max(1, all_fn):.3f}")
        if a.ids:
            print("   ", " ".join(ids))


if __name__ == "__main__":
    main()
