#!/usr/bin/env python3
"""Fits the evidence pack's `confidence` to P(a gold file is in the pack) and writes the table.

The pack computes a raw score from its signals (pack.rs `raw_confidence`: coverage, margin,
definition share, agreement, identifier hit). The same raw score means different things for a
short question (a few words are easy to cover) and a long one (an issue text rarely covers its
terms), so the map is fitted per question length: `short` = at most SHORT_WORDS words (maximal
runs of letters, digits and `_`), `long` = more. Each map is the isotonic (monotone
non-decreasing) regression of "a gold file is in the pack" on the raw score (pool adjacent
violators), over every pack of a stop_calibration.py run of the baseline binary (whose
`confidence` is the raw score). Fit on `tune` only:

  fit_confidence.py /work/eval-data/runs/stop-tune-29025bb > crates/canopy-core/src/pack_calibration.rs

The output is Rust source: two step tables (raw upper bound, calibrated value); a raw score takes
the value of the first step whose bound is >= it. Needs the shared score.py (EVAL_SHARED).

Checking a map before committing one (issue 26, item 1: ECE <= 0.05 in each question form):

  fit_confidence.py RUN [RUN ...] --cv     leave-one-instance-out on the runs' packs (fit on all
        instances but one, predict its three packs): the committed table as run, this script's
        isotonic refit, per-length-class logistic maps (three classes: <= QUERY_WORDS words, <=
        SHORT_WORDS, longer) of raw score, distinct files and lead, and a recalibration of the
        committed table per class shrunk toward it. Per form: ECE, log loss, mean confidence, hit
        rate. Only for `tune` runs: choosing on `report` is what the splits forbid.
  fit_confidence.py TUNE_RUN RUN [RUN ...] --apply   fit the tables on TUNE_RUN and read them on the
        other runs (report): ECE per form as run and as refit, packs whose band moves, and stops
        the refit would lose (a pack in the `low` band never stops).
  fit_confidence.py RUN [RUN ...] --floor  the packs' confidence as run, per form: ECE and its
        sampling floor, the mean ECE of a perfectly calibrated map with the same confidences
        (outcomes drawn as Bernoulli(confidence), 2,000 draws, seeded): what no map can be
        shown to beat on that many packs.
"""
import argparse, json, math, os, random, re, sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import splits, stop_calibration as S  # noqa: E402

SHORT_WORDS = 20
WORD = re.compile(r"[A-Za-z0-9_]+")
MIN_BLOCK = 15  # a step holds at least this many packs (merged into its neighbour otherwise)


def pav(points):
    """Isotonic regression of (x, y) points: list of [upper_x, mean_y, n] blocks."""
    blocks = []
    for x, y in sorted(points):
        blocks.append([x, y, 1])
        while len(blocks) > 1 and (blocks[-2][1] >= blocks[-1][1] or blocks[-2][2] < MIN_BLOCK):
            x2, y2, n2 = blocks.pop()
            x1, y1, n1 = blocks.pop()
            blocks.append([x2, (y1 * n1 + y2 * n2) / (n1 + n2), n1 + n2])
    while len(blocks) > 1 and blocks[-1][2] < MIN_BLOCK:
        x2, y2, n2 = blocks.pop()
        x1, y1, n1 = blocks.pop()
        blocks.append([x2, (y1 * n1 + y2 * n2) / (n1 + n2), n1 + n2])
    return blocks


# ---------------------------------------------------------------- checks (--cv, --floor)

QUERY_WORDS = 6
CLASSES = ("query", "title", "issue")


def length_class(words):
    return "query" if words <= QUERY_WORDS else "title" if words <= SHORT_WORDS else "issue"


def raw_confidence(s):
    """pack.rs `raw_confidence`, exactly (rounded to 3 decimals)."""
    raw = 0.5 * s["coverage"] + 0.2 * s["margin"] + 0.15 * s["definition_hits"] + 0.15 * s["agreement"]
    if s["identifier_hit"]:
        raw += 0.1
    return round(min(1.0, max(0.0, raw)) * 1000.0) / 1000.0


def packs_of(runs):
    """Every non-empty pack of the runs: (instance id, form, features, hit, confidence as run).
    Features are what the pack knows when it answers: raw score, words (and so the length class),
    distinct files among the handles, lead (1 - runner-up score / best)."""
    dev = {json.loads(l)["instance_id"]: json.loads(l) for l in open(splits.DEV) if l.strip()}
    out, seen = [], set()
    for run in runs:
        for line in open(os.path.join(run, "results.jsonl")):
            r = json.loads(line)
            if "error" in r or r["instance_id"] in seen:
                continue
            seen.add(r["instance_id"])
            inst = dev[r["instance_id"]]
            for f in S.FORMS:
                p = r.get(f)
                if not p or "error" in p or not p.get("handles"):
                    continue
                hs = p["handles"]
                words = len(WORD.findall(S.question(inst, f)))
                sc = [h.get("score") or 0.0 for h in hs]
                feat = {"raw": raw_confidence(p["signals"]), "words": words, "class": length_class(words),
                        "files": len({h["path"] for h in hs}) / 8.0,
                        "lead": 1.0 if len(sc) < 2 or sc[0] <= 0 else min(1.0, max(0.0, 1 - sc[1] / sc[0]))}
                hit = float(any(h["path"] in set(inst["gold_files"]) for h in hs))
                out.append((r["instance_id"], f, feat, hit, p["confidence"]))
    return out


def sigmoid(z):
    return 1.0 / (1.0 + math.exp(-max(-40.0, min(40.0, z))))


def logit(p):
    p = min(0.999, max(0.001, p))
    return math.log(p / (1 - p))


def newton(rows, ys, penalty, offsets=None):
    """Logistic regression weights by Newton steps; penalty[i] = L2 weight on w[i] (toward 0)."""
    d = len(rows[0])
    w = [0.0] * d
    offsets = offsets or [0.0] * len(rows)
    for _ in range(60):
        g = [penalty[i] * w[i] for i in range(d)]
        h = [[penalty[i] if i == j else 0.0 for j in range(d)] for i in range(d)]
        for x, y, o in zip(rows, ys, offsets):
            p = sigmoid(o + sum(a * b for a, b in zip(w, x)))
            for i in range(d):
                g[i] += (p - y) * x[i]
                for j in range(d):
                    h[i][j] += p * (1 - p) * x[i] * x[j]
        m = [h[i][:] + [g[i]] for i in range(d)]  # solve h * step = g (Gauss-Jordan)
        for c in range(d):
            piv = max(range(c, d), key=lambda r: abs(m[r][c]))
            m[c], m[piv] = m[piv], m[c]
            for r in range(d):
                if r != c and abs(m[c][c]) > 1e-12:
                    f = m[r][c] / m[c][c]
                    m[r] = [a - f * b for a, b in zip(m[r], m[c])]
        step = [m[i][d] / m[i][i] if abs(m[i][i]) > 1e-12 else 0.0 for i in range(d)]
        w = [a - b for a, b in zip(w, step)]
        if max(abs(x) for x in step) < 1e-9:
            break
    return w


def ece(pairs, bins=10):
    """stop_calibration.py's ECE: 10 equal-width bins, sum n_bin/N * |hit rate - mean confidence|."""
    total, n = 0.0, len(pairs)
    for b in range(bins):
        lo, hi = b / bins, (b + 1) / bins
        sel = [(c, y) for c, y in pairs if lo <= c < hi or (b == bins - 1 and c >= 1.0)]
        if sel:
            total += len(sel) / n * abs(sum(y for _, y in sel) / len(sel) - sum(c for c, _ in sel) / len(sel))
    return total


def ece_floor(confs, draws=2000):
    rng = random.Random(26)
    return sum(ece([(c, float(rng.random() < c)) for c in confs]) for _ in range(draws)) / draws


def show(label, preds, floor=False):
    cells = []
    for f in S.FORMS + ("all",):
        sel = [(c, y) for form, c, y in preds if f in (form, "all")]
        if not sel:
            continue
        ll = -sum(math.log(max(1e-6, c if y else 1 - c)) for c, y in sel) / len(sel)
        cells.append(f"{f} n={len(sel)} ECE {ece(sel):.3f}" + (f" (floor {ece_floor([c for c, _ in sel]):.3f})" if floor else "")
                     + f" logloss {ll:.3f} conf {sum(c for c, _ in sel) / len(sel):.3f} hit {sum(y for _, y in sel) / len(sel):.3f}")
    print(f"{label:24s}" + "\n                        ".join(cells))


def table_of(points):
    blocks = pav(points)
    blocks[-1][0] = 1.0
    return blocks


def lookup(blocks, x):
    return next((y for up, y, _ in blocks if x <= up), blocks[-1][1])


LOGISTIC = {"logistic raw": ("raw",), "logistic raw+files": ("raw", "files"),
            "logistic raw+files+lead": ("raw", "files", "lead")}


def predictor(name, train):
    """A map fitted on `train` packs: feature dict and as-run confidence -> probability."""
    if name == "isotonic refit":
        tabs = {k: table_of([(p[2]["raw"], p[3]) for p in train if (p[2]["words"] <= SHORT_WORDS) == (k == "short")])
                for k in ("short", "long")}
        return lambda feat, conf: lookup(tabs["short" if feat["words"] <= SHORT_WORDS else "long"], feat["raw"])
    if name in LOGISTIC:  # per class, L2 1.0 on the slopes, one pseudo hit and miss at the class mean
        names, ws = LOGISTIC[name], {}
        for c in CLASSES:
            sel = [p for p in train if p[2]["class"] == c]
            mean = [sum(p[2][k] for p in sel) / max(1, len(sel)) for k in names]
            rows = [[1.0] + [p[2][k] for k in names] for p in sel] + [[1.0] + mean] * 2
            ws[c] = newton(rows, [p[3] for p in sel] + [1.0, 0.0], [0.0] + [1.0] * len(names))
        return lambda feat, conf: sigmoid(sum(a * b for a, b in zip(ws[feat["class"]], [1.0] + [feat[k] for k in names])))
    l2 = float(name.split("=")[1])  # "recalibrate l2=X": sigmoid(a + b * logit(conf)) per class, toward a=0, b=1
    ab = {}
    for c in CLASSES:
        sel = [p for p in train if p[2]["class"] == c]
        if not sel:
            ab[c] = (0.0, 1.0)
            continue
        w = newton([[1.0, logit(p[4])] for p in sel], [p[3] for p in sel], [l2, l2], [logit(p[4]) for p in sel])
        ab[c] = (w[0], 1.0 + w[1])
    return lambda feat, conf: sigmoid(ab[feat["class"]][0] + ab[feat["class"]][1] * logit(conf))


def checks(a):
    packs = packs_of(a.runs)
    as_run = [(p[1], p[4], p[3]) for p in packs]
    if a.floor:
        show("as run", as_run, floor=True)
        # The floor at other sample sizes: the same forms' confidences resampled to n packs.
        rng = random.Random(26)
        for f in S.FORMS:
            confs = [c for form, c, _ in as_run if form == f]
            if confs:
                print(f"floor ({f}) at n = " + ", ".join(
                    f"{n}: {sum(ece([(c, float(rng.random() < c)) for c in rng.choices(confs, k=n)]) for _ in range(500)) / 500:.3f}"
                    for n in (67, 157, 250, 500, 1000)))
        return
    show("as run", as_run)
    ids = sorted({p[0] for p in packs})
    for name in ["isotonic refit", *LOGISTIC, "recalibrate l2=1", "recalibrate l2=5", "recalibrate l2=20"]:
        preds = []
        for iid in ids:  # leave one instance (its three packs) out
            f = predictor(name, [p for p in packs if p[0] != iid])
            preds += [(p[1], round(f(p[2], p[4]), 3), p[3]) for p in packs if p[0] == iid]
        show(name, preds)


def band(conf):
    """pack.rs `guide`'s bands."""
    return "high" if conf >= 0.85 else "medium" if conf >= 0.6 else "low"


def apply(a):
    """Fit the isotonic tables on the first run (tune) and read them on the others (report):
    per form, ECE of the confidence as run and as the refit would give it, and how the bands move.
    A stop needs a band other than `low` (pack.rs `stop_earned`), so a stop pack whose refit
    confidence falls below 0.6 would not stop: counted as `stops lost`."""
    train = packs_of([a.runs[0]])
    f = predictor("isotonic refit", train)
    for x in ("short", "long"):
        pts = [(p[2]["raw"], p[3]) for p in train if (p[2]["words"] <= SHORT_WORDS) == (x == "short")]
        print(f"{x} table ({len(pts)} packs): " + ", ".join(f"<= {u:.3f}: {y:.3f} ({n})" for u, y, n in table_of(pts)))
    test = packs_of(a.runs[1:])
    stops = {}
    for run in a.runs[1:]:
        for line in open(os.path.join(run, "results.jsonl")):
            r = json.loads(line)
            for form in S.FORMS:
                if isinstance(r.get(form), dict) and r[form].get("stop"):
                    stops[(r["instance_id"], form)] = True
    show("as run", [(p[1], p[4], p[3]) for p in test])
    refit = [(p[1], round(f(p[2], p[4]), 3), p[3]) for p in test]
    show("refit on " + os.path.basename(a.runs[0].rstrip("/")), refit)
    for form in S.FORMS:
        moved = sum(1 for p in test if p[1] == form and band(p[4]) != band(round(f(p[2], p[4]), 3)))
        lost = sum(1 for p in test if p[1] == form and stops.get((p[0], form)) and band(round(f(p[2], p[4]), 3)) == "low")
        print(f"{form}: {moved} packs change band, stops lost {lost} of {sum(1 for p in test if p[1] == form and stops.get((p[0], form)))}")


def main():
    if "--apply" in sys.argv:
        ap = argparse.ArgumentParser()
        ap.add_argument("runs", nargs="+", help="the tune run to fit on, then the runs to read the fit on")
        ap.add_argument("--apply", action="store_true")
        return apply(ap.parse_args())
    if "--cv" in sys.argv or "--floor" in sys.argv:
        ap = argparse.ArgumentParser()
        ap.add_argument("runs", nargs="+")
        ap.add_argument("--cv", action="store_true")
        ap.add_argument("--floor", action="store_true")
        return checks(ap.parse_args())
    run = sys.argv[1]
    dev = {json.loads(l)["instance_id"]: json.loads(l) for l in open(splits.DEV) if l.strip()}
    pts = {"short": [], "long": []}
    for line in open(os.path.join(run, "results.jsonl")):
        r = json.loads(line)
        if "error" in r:
            continue
        inst = dev[r["instance_id"]]
        gold = set(inst["gold_files"])
        for f in S.FORMS:
            p = r.get(f)
            if not p or "error" in p or not p.get("handles"):
                continue
            words = len(WORD.findall(S.question(inst, f)))
            hit = any(h["path"] in gold for h in p["handles"])
            # The raw score is recomputed from the signals, so a run of any binary can be fitted
            # (the pack's own `confidence` is already mapped by the table the binary was built with).
            pts["short" if words <= SHORT_WORDS else "long"].append((raw_confidence(p["signals"]), float(hit)))
    out = ["//! Generated by `bench/eval/fit_confidence.py " + os.path.basename(run.rstrip("/")) + "` (do not edit):",
           "//! isotonic maps from the pack's raw score to P(a gold file is in the pack), fitted on the",
           "//! `tune` split, one for short questions and one for long ones.", "",
           f"/// Questions of at most this many words use [`SHORT`].",
           f"pub(crate) const SHORT_WORDS: usize = {SHORT_WORDS};"]
    for name in ("short", "long"):
        blocks = pav(pts[name])
        blocks[-1][0] = 1.0
        out += ["", f"/// {name.capitalize()} questions ({len(pts[name])} packs): (raw score upper bound, calibrated value).",
                f"pub(crate) const {name.upper()}: &[(f64, f64)] = &["]
        out += [f"    ({x:.3f}, {y:.3f}), // {n} packs" for x, y, n in blocks]
        out.append("];")
    print("\n".join(out))


if __name__ == "__main__":
    main()
