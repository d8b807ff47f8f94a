#!/usr/bin/env python3
"""Is the function to change a callee of the entry point the pack leads with? (issue 26, items 1 and 3)

The wrong stops of bench/eval/README.md (django__django-11490, pydata__xarray-2905,
pydata__xarray-3305) share one shape: the question names an entry point (`QuerySet.values_list`,
`Variable.__setitem__`, `DataArray.quantile`), the pack leads with it, and the fix lies in a function
it reaches later. This script measures, on a finished `stop_calibration.py` run and its kept
indexes, how often a graph callee would have held the fix, and what a rule reading the callees would
see, before any engine change:

  for each pack (instance x form) whose FIRST handle is a function or method outside test code:
    named      the question names it as the stop rule reads a name (pack.rs: `names_qualified`, or
               `names_in_code` in a question of more than SHORT_WORDS words; traceback frame lines
               dropped first)
    in_exp     a gold function is among the pack's expands (`expand_suggestion` within the handles)
    d1, d2     its resolved callees (`canopy callees path:name --depth D`; edges with status
               resolved and not a guess; functions and methods outside test code, not the entry
               itself), depth 1 and within depth 2, and whether one overlaps a gold function span (score.py's rule)
    rank       the gold callee's rank among the depth-1 callees ordered by the share of their own
               name's words the question holds (`name_share`: words of 3+ letters, not stop words;
               the question's words: the summary line's when it has one, else all), ties by name;
               none when the gold callee shares no word (a ranking by the question cannot pick it)
    pointed    some depth-1 callee's name shares at least one word with the question (share > 0)
    beyond     some depth-1 callee of another own name shares a word with the question that the
               entry's own name does not hold (a super call of the same name, or the entry's own
               word, points at nothing new)

  entry_callees.py RUN_DIR --trees ROOT [--bin canopy] [--forms full,title,query] [--ids]

Prints per form the counts, then over all forms P(gold fn in expands) for named-entry packs split by
`pointed`, and with --ids every pack that counts.
"""
import argparse, json, os, re, subprocess, sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import splits  # noqa: E402
import stop_calibration as sc_  # noqa: E402

SHORT_WORDS = 12  # pack_calibration::SHORT_WORDS
STOP_WORDS = set("""
a about above after again all also am an and any are as at be because been before being below between
both but by can could did do does doing done down during each few for from further get gets got had has
have having he her here hers him his how i if in into is it its itself just let like may me might more
most must my no nor not now of off on once only or other our ours out over own same she should so some
such than that the their theirs them then there these they this those through to too under until up us
use used using very was we were what when where which while who whom why will with would you your yours
yourself want need please thanks thank hi hello seems seem think know way make makes made one two thing
things e g eg ie etc s t d ll re ve m don doesn isn didn wasn aren won shouldn wouldn couldn haven hasn www
http https com github org html x y
""".split())
INVISIBLE = re.compile("[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e"
                       "\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0]")


def is_test(path):
    parts = path.split("/")
    return any(d in ("tests", "test", "testing") for d in parts[:-1]) or parts[-1].startswith("test_")


def clean(q):
    q = INVISIBLE.sub("", q)
    q = re.sub(r"<!--.*?(-->|$)", "", q, flags=re.S)
    return q.replace("\r", "")


def without_frames(q):
    return "\n".join(l for l in q.splitlines() if not (l.lstrip().startswith("File ") and ", in " in l))


def split_identifier(ident):
    words = []
    for part in re.split(r"[^0-9A-Za-z]+", ident):
        words += [w.lower() for w in re.findall(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+", part)]
    return words


def summary_line(q):
    lines = [l.strip() for l in q.splitlines() if l.strip()]
    return lines[0] if len(lines) >= 2 and len(lines[0]) <= 200 else None


def question_words(q):
    s = summary_line(q) or q
    out = set()
    for w in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", s)[:200]:
        for p in split_identifier(w) + [w.lower()]:
            out.add(p)
            out.add(p[:-1] if p.endswith("s") else p)
    return out


def name_share(name, words):
    own = name.rsplit(".", 1)[-1]
    parts = [p for p in split_identifier(own) if len(p) >= 3 and p not in STOP_WORDS]
    if not parts:
        return 0.0
    held = sum(1 for p in parts if p in words or (p[:-1] if p.endswith("s") else p) in words)
    return held / len(parts)


def beyond(callee, entry, words):
    own = lambda n: n.rsplit(".", 1)[-1]
    if own(callee).strip("_") == own(entry).strip("_"):
        return False
    stem = lambda p: p[:-1] if p.endswith("s") else p
    entry_parts = {stem(p) for p in split_identifier(own(entry))}
    rest = words - {w for w in words if stem(w) in entry_parts}
    return name_share(callee, rest) > 0 and any(
        stem(p) not in entry_parts for p in split_identifier(own(callee))
        if len(p) >= 3 and p not in STOP_WORDS and (p in rest or stem(p) in rest))


def is_ident(c):
    return c.isalnum() or c == "_"


def whole_at(q, needle):
    for m in re.finditer(re.escape(needle), q):
        b = q[m.start() - 1] if m.start() else ""
        a = q[m.end()] if m.end() < len(q) else ""
        yield b, a


def names_qualified(q, qualified):
    parts = qualified.split(".")
    if len(parts) < 2 or any(not p for p in parts):
        return False
    tail = ".".join(parts[-2:])
    return any(not (b and is_ident(b)) and not (a and is_ident(a))
               for needle in (qualified, tail) for b, a in whole_at(q, needle))


def names_in_code(q, name):
    if not name:
        return False
    t = name.strip("_")
    distinctive = len(name) >= 4 and ("_" in t or re.search(r"[a-z][A-Z]", name) is not None)
    for b, a in whole_at(q, name):
        if (b and is_ident(b)) or (a and is_ident(a)):
            continue
        if distinctive or b in (".", "`") or a == "(":
            return True
    return False


def words_of(q):
    return len(re.findall(r"[A-Za-z0-9_]+", q))


def callees(bin_, tree, h, depth):
    target = f"{h['path']}:{h['qualified_name'] or h['name']}"
    p = subprocess.run([bin_, "--root", tree, "--quiet", "--json", "callees", target, "--depth", str(depth),
                        "--max-results", "500"], capture_output=True, text=True)
    if p.returncode != 0:
        return None
    out = []
    for n in json.loads(p.stdout).get("nodes", []):
        hh = n["handle"]
        if n.get("status", "resolved") != "resolved" or n.get("guess"):
            continue
        if hh["node_type"] not in ("function", "method") or is_test(hh["file_path"]):
            continue
        out.append({"path": hh["file_path"], "start": hh["line_range"][0], "end": hh["line_range"][1],
                    "name": hh.get("name") or "", "qualified_name": n.get("qualified_name") or hh.get("qualified_name"),
                    "depth": n.get("depth")})
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run")
    ap.add_argument("--trees", required=True)
    ap.add_argument("--bin", default=None, help="default: the run's own copy of the binary")
    ap.add_argument("--forms", default="full,title,query")
    ap.add_argument("--ids", action="store_true")
    a = ap.parse_args()
    bin_ = a.bin or os.path.join(a.run, "canopy")
    sc = sc_.load_score()
    meta = json.load(open(os.path.join(a.run, "meta.json")))
    insts = {i["instance_id"]: i for i in splits.instances(meta["split"])}
    rows = [json.loads(l) for l in open(os.path.join(a.run, "results.jsonl")) if l.strip()]
    pooled = []
    for form in a.forms.split(","):
        recs = []
        for r in rows:
            inst = insts.get(r["instance_id"])
            p = r.get(form)
            if not inst or not p or "error" in p or not inst.get("gold_function_spans") or not p.get("handles"):
                continue
            top = p["handles"][0]
            if top["node_type"] not in ("function", "method") or is_test(top["path"]):
                continue
            q = clean(sc_.question(inst, form))
            naming = without_frames(q)
            named = names_qualified(naming, top.get("qualified_name") or "") or (
                words_of(q) > SHORT_WORDS and names_in_code(naming, top.get("name") or ""))
            pp = sc_.per_pack(p, inst, sc)
            tree = os.path.join(a.trees, "git", r["instance_id"])
            c2 = callees(bin_, tree, top, 2)
            if c2 is None:
                print(f"   callees failed: {r['instance_id']} {top.get('qualified_name')}", file=sys.stderr)
                continue
            c2 = [c for c in c2 if (c["path"], c["start"]) != (top["path"], top["start"])]
            c1 = [c for c in c2 if c["depth"] == 1]
            words = question_words(q)
            order = sorted(c1, key=lambda c: (-name_share(c["name"], words), c["name"]))
            gold_rank = next((i + 1 for i, c in enumerate(order)
                              if name_share(c["name"], words) > 0 and sc_.gold_fn_hit([c], inst, sc)), None)
            rec = {"id": r["instance_id"], "form": form, "top": top.get("qualified_name") or top.get("name"),
                   "named": named, "stop": pp["stop"], "in_exp": pp["fn_in_expands"], "n1": len(c1), "n2": len(c2),
                   "d1": sc_.gold_fn_hit(c1, inst, sc), "d2": sc_.gold_fn_hit(c2, inst, sc), "rank": gold_rank,
                   "pointed": any(name_share(c["name"], words) > 0 for c in c1),
                   "beyond": any(beyond(c["name"], top.get("name") or "", words) for c in c1),
                   "best": [(c["qualified_name"], round(name_share(c["name"], words), 2)) for c in order[:3]]}
            recs.append(rec)
        pooled += recs
        med = lambda xs: sorted(xs)[len(xs) // 2] if xs else 0
        for label, sel in (("top fn", recs), ("top fn named", [x for x in recs if x["named"]])):
            miss = [x for x in sel if not x["in_exp"]]
            print(f"{form:5s} {label:13s} packs {len(sel):3d}; gold fn in expands {sum(x['in_exp'] for x in sel):3d}; "
                  f"not in expands {len(miss):3d}: gold is a depth-1 callee {sum(x['d1'] for x in miss)}, within depth 2 "
                  f"{sum(x['d2'] for x in miss)}; rank 1 by question words {sum(x['rank'] == 1 for x in miss)}; "
                  f"callees d1 median {med([x['n1'] for x in sel])} max {max([x['n1'] for x in sel] or [0])}, "
                  f"d2 median {med([x['n2'] for x in sel])} max {max([x['n2'] for x in sel] or [0])}")
    print("\nall forms, named entry packs: P(gold fn in expands) by pointed / beyond (see above)")
    for key in ("pointed", "beyond"):
        for val in (True, False):
            sel = [x for x in pooled if x["named"] and x[key] == val]
            stops = [x for x in sel if x["stop"]]
            print(f"  {key}={val!s:5s}: {sum(x['in_exp'] for x in sel)}/{len(sel)}; stops {len(stops)}, "
                  f"right {sum(x['in_exp'] for x in stops)}")
    if a.ids:
        print("\nid form | top | named stop in_exp pointed beyond | callees d1/d2 | gold d1 d2 rank | best callees by question words")
        for x in pooled:
            print(f"  {x['id']} {x['form']} | {x['top']} | {int(x['named'])} {int(x['stop'])} {int(x['in_exp'])} "
                  f"{int(x['pointed'])} {int(x['beyond'])} | "
                  f"{x['n1']}/{x['n2']} | {int(x['d1'])} {int(x['d2'])} {x['rank']} | {x['best']}")


if __name__ == "__main__":
    main()
