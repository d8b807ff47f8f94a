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

Names are looked up in the question as the pack reads it: invisible characters, template
comments and traceback frame lines (`File "a.py", line 3, in f`) dropped; a frame names a function
the error passed through, seldom the one to change (traceback_frames.py).

This script applies that rule, or a variant of its thresholds, to the stored packs of a
`stop_calibration.py` run (handles, scores and signals are in results.jsonl; the question is
rebuilt from the instance), so thresholds can be chosen on `tune` without re-running packs:

  stop_rule_replay.py RUN_DIR [--forms full,title,query] [--lead-qualified X] [--lead-named X]
                      [--raw-named X] [--short-named] [--plain-names] [--frames] [--ids]
                      [--at-rate R]

Prints per form: packs, stop rate, P(a gold function is in the first 3 handles | stop) (the
handles a stop pack suggests expanding; score.py's overlap rule), the same share over every pack
whose instance has gold functions (what any stop rule starts from), and with --ids the stop
instances marked hit/miss. --at-rate R asks what a stop on a share R of the packs would cost: for
each score a rule could threshold (the lead of the best handle over the runner-up, the raw score,
the calibrated confidence; each over every pack and over packs whose best handle is a function),
the packs with gold functions ordered by it (ties by instance id), and P(gold fn in first 3) over
the first ceil(R * n) of them; "best possible" is what a rule that knew the answer would get.
A run of a binary with this rule can be scored directly with
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


# Unicode's Default_Ignorable_Code_Point (canopy-syntax text.rs, is_invisible)
INVISIBLE = re.compile("[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f"
                       "\u202a-\u202e\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufff8"
                       "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e0fff]")


def visible(text):
    return INVISIBLE.sub("", text)


def without_frames(text):
    """pack.rs without_frames: lines that start (after indentation) with `File ` and hold `, in `."""
    return "\n".join(l for l in text.split("\n")
                     if not (l.lstrip().startswith("File ") and ", in " in l))


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


def lead_of(pack):
    hs = pack.get("handles") or []
    if not hs or not hs[0].get("score"):
        return 0.0
    return 1.0 if len(hs) < 2 else max(0.0, 1 - hs[1]["score"] / hs[0]["score"])


def at_rate(packs, rate):
    """packs: [(instance id, pack, hit)] of instances with gold functions. Lines of precision at rate."""
    k = max(1, -(-int(round(rate * 1000)) * len(packs) // 1000))
    fn = lambda p: (p.get("handles") or [{}])[0].get("node_type") in ("function", "method")  # noqa: E731
    scores = {
        "lead": lambda p: lead_of(p),
        "raw score": lambda p: raw_confidence(p.get("signals") or {}),
        "confidence": lambda p: p.get("confidence") or 0.0,
        "lead, function first": lambda p: lead_of(p) if fn(p) else -1.0,
        "raw score, function first": lambda p: raw_confidence(p.get("signals") or {}) if fn(p) else -1.0,
        "confidence, function first": lambda p: (p.get("confidence") or 0.0) if fn(p) else -1.0,
    }
    out = []
    for name, score in scores.items():
        order = sorted(packs, key=lambda t: (-score(t[1]), t[0]))[:k]
        hits = sum(h for _, _, h in order)
        out.append(f"    {name:27s} P(gold fn in first {STOP_EXPANDS} | stop) {hits / k:.3f} ({hits}/{k})")
    best = min(k, sum(h for _, _, h in packs))
    out.append(f"    {'best possible':27s} P(gold fn in first {STOP_EXPANDS} | stop) {best / k:.3f} ({best}/{k})")
    return out


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
    ap.add_argument("--frames", action="store_true",
                    help="variant (the rule before s11): names written in traceback frame lines count")
    ap.add_argument("--ids", action="store_true")
    ap.add_argument("--at-rate", type=float, default=None,
                    help="also: precision of a stop on this share of the packs, by each score")
    a = ap.parse_args()
    sc = sc_.load_score()
    insts = sc_.load_instances()
    short_words, tabs = tables()
    rows = [json.loads(l) for l in open(os.path.join(a.run, "results.jsonl"))]
    for form in a.forms.split(","):
        n = stops = hits = with_fn = all_fn = all_hits = 0
        ids, fn_packs = [], []
        for r in rows:
            pack, inst = r.get(form), insts[r["instance_id"]]
            if not pack or "error" in pack:
                continue
            n += 1
            if inst.get("gold_functions") and inst.get("gold_function_spans"):
                all_fn += 1
                hit3 = bool(sc_.gold_fn_hit((pack.get("handles") or [])[:STOP_EXPANDS], inst, sc))
                all_hits += hit3
                fn_packs.append((r["instance_id"], pack, hit3))
            asked = visible(sc_.question(inst, form))
            # names are looked up in the question as the pack reads it: invisible characters and
            # template comments dropped (pack.rs clean_question), traceback frame lines too
            # (without_frames); words are counted as asked, invisible characters dropped
            q = re.sub(r"<!--.*?(-->|$)", "", asked, flags=re.S).replace("\r", "")
            if not a.frames:
                q = without_frames(q)
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
        if a.at_rate is not None:
            print(f"  a stop on {a.at_rate:.0%} of the {len(fn_packs)} packs with gold functions, ordered by")
            print("\n".join(at_rate(fn_packs, a.at_rate)))


if __name__ == "__main__":
    main()
