"""Lists a prediction file's misses and false positives against the graph oracle, for reading by hand.

usage: misses.py GOLD_ROOT TARGETS.jsonl PRED.jsonl CORPORA_ROOT CORPUS [--refs | --defs]

Without --refs, over the sampled `callers` targets: gold call sites the predictions lack (MISS) and
predicted call sites the gold lacks (FP); over the sampled `callees` targets: predicted callee edges the
gold lacks (CFP) and gold callee edges the predictions lack (CMISS, at each gold call site of the edge). Each line carries the source line. A false positive is tagged when the oracle left a
call of that name unresolved on the line while another call there resolved (the scorer judges call
sites per line, so such a prediction is scored although the oracle never decided it).
With --refs: missed references of the sampled `references` targets, counted by the gold's reference
kind (call / import / type / other), with each missed line.
With --defs: the sampled `definition` call sites whose gold definition the predictions lack (DMISS;
`[unresolved]` when the prediction file marks the question unresolved) or whose predicted definition
the gold lacks (DFP).
Predictions are filtered as score_graph.py filters them (unjudgeable lines, edges outside the corpus,
unscored callee kinds).
"""
import collections, os, sys

sys.path.insert(0, os.environ.get("EVAL", "/work/shared/eval/graph"))
from score_graph import Gold, jl, ptype  # noqa: E402


def source_line(root, corpus, cache, path, n):
    if path not in cache:
        try:
            with open(os.path.join(root, corpus, path), errors="replace") as fh:
                cache[path] = fh.read().split("\n")
        except OSError:
            cache[path] = []
    lines = cache[path]
    return lines[n - 1].strip()[:150] if 0 < n <= len(lines) else "?"


def call_misses(g, ts, pred, line):
    callers_t = {t["target"] for t in ts if t["task"] == "callers"}
    callees_t = {t["target"] for t in ts if t["task"] == "callees"}
    unres = collections.defaultdict(set)
    for cs in g.sites:
        if cs["status"] in ("unresolved", "error", "ambiguous"):
            unres[(cs["path"], cs["line"])].add(cs.get("callee_name"))

    def tag(q, s):
        last = q.split(":")[-1].split(".")[-1].split("::")[-1]
        return "  [oracle: this call unresolved, another on the line resolved]" if last in unres.get(s, ()) else ""

    psites, pcallee = collections.defaultdict(set), collections.defaultdict(set)
    for r in pred:
        if ptype(r) != "call_edge" or (r.get("caller_path"), r.get("call_line")) in g.unjudgeable:
            continue
        callee = g.sym(r.get("callee_qualified"), r.get("callee_path"), r.get("callee_line"))
        if callee is None:
            if r.get("callee_path") not in g.files:
                continue
            callee = "<no gold def>:%s:%s" % (r.get("callee_path"), r.get("callee_line"))
        if callee in g.kind_of and not (g.kind_of[callee] & g.ok_callee):
            continue
        site = (r["caller_path"], r["call_line"])
        psites[callee].add(site)
        pcallee[g.enclosing(*site)].add((callee, site))
    for q in sorted(callers_t):
        for s in sorted(g.callsites.get(q, set()) - psites.get(q, set())):
            print("MISS", q, "%s:%d" % s, "|", line(*s))
    for q in sorted(callers_t):
        for s in sorted(psites.get(q, set()) - g.callsites.get(q, set())):
            print("FP", q, "%s:%d" % s, "|", line(*s) + tag(q, s))
    for c in sorted(callees_t):
        for callee, s in sorted(pcallee.get(c, set())):
            if callee not in g.callees.get(c, set()):
                print("CFP", c, "->", callee, "%s:%d" % s, "|", line(*s) + tag(callee, s))
    got = collections.defaultdict(set)
    for callee, s in (x for c in callees_t for x in pcallee.get(c, ())):
        got[g.enclosing(*s)].add(callee)
    for e in g.edges:
        caller = g.by_id.get(e["caller_def_id"], {"qualified_name": e["caller_qualified"]})["qualified_name"]
        if caller in callees_t and e["callee_qualified"] not in got.get(caller, ()):
            s = (e["caller_path"], e["call_line"])
            print("CMISS", caller, "->", e["callee_qualified"], "%s:%d" % s, "|", line(*s))


def ref_misses(g, gold_dir, ts, pred, line):
    wanted = {t["target"] for t in ts if t["task"] == "references"}
    kind = collections.defaultdict(set)
    for r in jl(os.path.join(gold_dir, "references.jsonl")):
        kind[(r["def_qualified_name"], r["path"], r["line"])].add(r["kind"])
    got = collections.defaultdict(set)
    for r in pred:
        if ptype(r) == "reference":
            d = g.sym(r.get("def_qualified_name"), r.get("def_path"), r.get("def_line"))
            if d:
                got[d].add((r["path"], r["line"]))
    counts = collections.Counter()
    for q in sorted(wanted):
        for s in sorted(g.refs.get(q, set()) - got.get(q, set())):
            k = ",".join(sorted(kind.get((q,) + s, {"?"})))
            counts[k] += 1
            print("RMISS", k, q, "%s:%d" % s, "|", line(*s))
    print("missed references by kind:", dict(counts))


def def_misses(g, ts, pred, line):
    got, unres = collections.defaultdict(set), set()
    for r in pred:
        if ptype(r) == "unresolved" and r.get("task") == "definition":
            unres.add(r["target"])
        elif ptype(r) == "definition":
            d = g.sym(r.get("def_qualified_name"), r.get("def_path"), r.get("def_line"))
            for key in ((r["path"], r["line"], r.get("col")), (r["path"], r["line"], r.get("name"))):
                got[key].add(d or "<outside corpus>")
    for t in ts:
        if t["task"] != "definition":
            continue
        gs = g.site_defs.get((t["path"], t["line"], t["col"]), set())
        ps = got.get((t["path"], t["line"], t["col"])) or got.get((t["path"], t["line"], t["name"])) or set()
        site = "%s:%d:%d" % (t["path"], t["line"], t["col"])
        mark = " [unresolved]" if t["target"] in unres or "%s:%d" % (t["path"], t["line"]) in unres else ""
        for d in sorted(gs - ps):
            print("DMISS", d, site, "|", line(t["path"], t["line"]) + mark)
        for d in sorted(ps - gs):
            print("DFP", d, site, "|", line(t["path"], t["line"]))


def main():
    args = [a for a in sys.argv[1:] if a not in ("--refs", "--defs")]
    if len(args) != 5:
        sys.exit(__doc__)
    gold_root, targets, pred_f, corpora, corpus = args
    gold_dir = os.path.join(gold_root, corpus)
    g = Gold(gold_dir)
    ts = [t for t in jl(targets) if t["corpus"] == corpus]
    pred = [r for r in jl(pred_f) if r.get("corpus") == corpus]
    cache = {}

    def line(path, n):
        return source_line(corpora, corpus, cache, path, n)

    if "--refs" in sys.argv[1:]:
        ref_misses(g, gold_dir, ts, pred, line)
    elif "--defs" in sys.argv[1:]:
        def_misses(g, ts, pred, line)
    else:
        call_misses(g, ts, pred, line)


if __name__ == "__main__":
    main()
