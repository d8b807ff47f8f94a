#!/usr/bin/env python3
"""Issue 26, item 1: could any combination of what a pack knows earn a stop on 25% of packs at
P(gold function in the first 3 handles | stop) >= 0.90?

stop_rule_replay.py --at-rate asks that of one score at a time (lead, raw score, confidence). This
script asks it of all of them together: a logistic model over 24 features of each stored pack and
its question (the five signals, raw score and confidence, the lead and the 2nd/3rd handles' score
ratios, whether the best handle is a function, how many of the first 3 are, its size, how many
files the first 3 span, whether the question writes the best handle's qualified name, its name as
code, its name at all, the question's length, whether the question names the best handle's file
or folder, whether that file is a test, the form, the candidate count). The model is fitted on
one run (choose: `tune`), scored by 10-fold cross-validation there (an instance's three forms stay
in one fold), then read once on another run (report: never fitted on). Packs are ordered by the
model's probability and precision is printed at stop rates of 5% to 30%, per form on the report
run. A stop rule the pack could compute from these features can do no better than this ordering
does on the report run (up to the model's form).

  stop_features.py TUNE_RUN REPORT_RUN [--l2 1.0] [--ids RATE]

TUNE_RUN and REPORT_RUN are `stop_calibration.py --out` folders. Pure Python (no numpy): runs in
the eval venv. --ids RATE lists the report packs the model would stop on at that rate, hit/miss.
"""
import argparse, json, math, os, re, sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import stop_calibration as sc_  # noqa: E402
import stop_rule_replay as rr  # noqa: E402

FORMS = ("full", "title", "query")
RATES = (0.05, 0.10, 0.15, 0.20, 0.25, 0.30)
TEST_PATH = re.compile(r"(^|/)(tests?|testing)/|(^|/)test_")


def features(pack, q, words, form):
    """The pack's own numbers and what the question says about its best handle."""
    hs = pack.get("handles") or []
    sig = pack.get("signals") or {}
    top = hs[0] if hs else {}
    scores = [h.get("score") or 0.0 for h in hs] + [0.0, 0.0, 0.0]
    is_fn = lambda h: h.get("node_type") in ("function", "method")  # noqa: E731
    qualified = top.get("qualified_name") or top.get("name") or ""
    name = top.get("name") or qualified.split(".")[-1]
    path = top.get("path") or ""
    folder = path.rsplit("/", 1)[0].split("/")[-1] if "/" in path else ""
    return [
        sig.get("coverage", 0.0), sig.get("margin", 0.0), sig.get("definition_hits", 0.0),
        sig.get("agreement", 0.0), 1.0 if sig.get("identifier_hit") else 0.0,
        rr.raw_confidence(sig), pack.get("confidence") or 0.0,
        rr.lead_of(pack), scores[1] / (scores[0] or 1.0), scores[2] / (scores[0] or 1.0),
        1.0 if top and is_fn(top) else 0.0, float(sum(1 for h in hs[:3] if is_fn(h))),
        math.log1p(top.get("tokens") or 0), float(len({h["path"] for h in hs[:3]})),
        float(sum(1 for h in hs if h["path"] == path)),
        1.0 if rr.names_qualified(q, qualified) else 0.0, 1.0 if rr.names_in_code(q, name) else 0.0,
        1.0 if name and any(True for _ in rr.whole(q, name)) else 0.0,
        math.log1p(words), 1.0 if path and os.path.basename(path) in q else 0.0,
        1.0 if folder and folder in q else 0.0, 1.0 if TEST_PATH.search(path) else 0.0,
        float(FORMS.index(form)), math.log1p(pack.get("total_candidates") or 0),
    ]


def load(run, insts, sc):
    """(features, hit, (instance id, form)) of every pack whose instance has gold functions."""
    rows = []
    for line in open(os.path.join(run, "results.jsonl")):
        r = json.loads(line)
        inst = insts[r["instance_id"]]
        if not (inst.get("gold_functions") and inst.get("gold_function_spans")):
            continue
        for form in FORMS:
            pack = r.get(form)
            if not pack or "error" in pack:
                continue
            asked = rr.visible(sc_.question(inst, form))
            q = re.sub(r"<!--.*?(-->|$)", "", asked, flags=re.S).replace("\r", "")
            q = rr.without_frames(q)
            words = len([w for w in re.split(r"[^A-Za-z0-9_]", asked) if w])
            hit = bool(sc_.gold_fn_hit((pack.get("handles") or [])[:rr.STOP_EXPANDS], inst, sc))
            rows.append((features(pack, q, words, form), hit, (r["instance_id"], form)))
    return rows


def standardise(train):
    n, d = len(train), len(train[0])
    mean = [sum(x[j] for x in train) / n for j in range(d)]
    sd = [math.sqrt(sum((x[j] - mean[j]) ** 2 for x in train) / n) or 1.0 for j in range(d)]
    return lambda x: [(x[j] - mean[j]) / sd[j] for j in range(d)]


def fit(xs, ys, l2, steps=400, rate=0.5):
    """L2-regularised logistic regression by full-batch gradient descent on standardised inputs."""
    scale = standardise(xs)
    zs = [scale(x) for x in xs]
    d, n = len(zs[0]), len(zs)
    w, b = [0.0] * d, 0.0
    for _ in range(steps):
        gw, gb = [l2 * wj / n for wj in w], 0.0
        for z, y in zip(zs, ys):
            p = 1.0 / (1.0 + math.exp(-max(-30.0, min(30.0, b + sum(wj * zj for wj, zj in zip(w, z))))))
            e = (p - (1.0 if y else 0.0)) / n
            gb += e
            for j in range(d):
                gw[j] += e * z[j]
        w = [wj - rate * g for wj, g in zip(w, gw)]
        b -= rate * gb
    return lambda x: b + sum(wj * zj for wj, zj in zip(w, scale(x)))


def precision_at(scored, rate):
    """scored: [(score, hit, id)]; precision over the first ceil(rate * n), ties by id."""
    order = sorted(scored, key=lambda t: (-t[0], t[2]))
    k = max(1, math.ceil(rate * len(order) - 1e-9))
    return sum(h for _, h, _ in order[:k]) / k, order[:k]


def line(label, scored):
    cells = " ".join(f"{r:.2f}:{precision_at(scored, r)[0]:.3f}" for r in RATES)
    base = sum(h for _, h, _ in scored) / max(1, len(scored))
    return f"{label:22s} n={len(scored):4d} base {base:.3f}  {cells}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("tune_run")
    ap.add_argument("report_run")
    ap.add_argument("--l2", type=float, default=1.0)
    ap.add_argument("--ids", type=float, default=None)
    a = ap.parse_args()
    sc = sc_.load_score()
    insts = sc_.load_instances()
    tune, report = load(a.tune_run, insts, sc), load(a.report_run, insts, sc)
    print("precision P(gold fn in first 3) at each stop rate (rate:precision), packs ordered by the model")
    # 10 folds by instance (sorted ids, round robin), so a fold never sees another form of its instance
    ids = sorted({i for _, _, (i, _) in tune})
    fold = {i: k % 10 for k, i in enumerate(ids)}
    cv = []
    for g in range(10):
        train = [(x, y) for x, y, (i, _) in tune if fold[i] != g]
        model = fit([x for x, _ in train], [y for _, y in train], a.l2)
        cv += [(model(x), y, f"{i}:{f}") for x, y, (i, f) in tune if fold[i] == g]
    print(line("tune, 10-fold CV", cv))
    model = fit([x for x, _, _ in tune], [y for _, y, _ in tune], a.l2)
    scored = [(model(x), y, f"{i}:{f}") for x, y, (i, f) in report]
    print(line("report (fit on tune)", scored))
    for form in FORMS:
        print(line(f"  report, {form}", [s for s in scored if s[2].endswith(":" + form)]))
    if a.ids is not None:
        _, chosen = precision_at(scored, a.ids)
        print(" ".join(f"{i}:{'hit' if h else 'miss'}" for _, h, i in chosen))


if __name__ == "__main__":
    main()
