"""Checks a corpus's unique-name guesses against the graph oracle's call sites.

usage: guesses.py GOLD_DIR EDGES [--list]

EDGES is `bench/graph/edges_dump.py --names INDEX.db` output; GOLD_DIR one corpus's gold folder (with
call_sites.jsonl). Each guessed edge (`how=5`) is looked up at the gold call site of the same path, line and
callee name: `right` when the oracle resolved that call to the guessed definition (same path, same qualified
name after the module), else `wrong:<the oracle's status>` (`external`: a call of something outside the
corpus, such as a `Map`'s `get`; `corpus_nondef`, `unresolved`, or `resolved` to another definition), or
`nosite` when the oracle has no call of that name there. Prints the counts, then the counts per method name;
--list also prints each edge's verdict.
"""
import collections, json, signal, sys

# `| head` ends the output quietly.
signal.signal(signal.SIGPIPE, signal.SIG_DFL)


def same_name(gold_qualified, name):
    """Whether the oracle's qualified name (`mod::Class.m` in TypeScript, `krate::m::Type::m` in Rust,
    `pkg.mod.Class.m` in Python) ends with Canopy's `Class.m`, segment by segment."""
    q = gold_qualified.replace("::", ".")
    return q == name or q.endswith("." + name)


def main():
    gold, edges = sys.argv[1], sys.argv[2]
    sites = collections.defaultdict(list)
    for line in open(gold + "/call_sites.jsonl"):
        s = json.loads(line)
        sites[(s["path"], s["line"], s["callee_name"])].append(s)
    count = collections.Counter()
    by_name = collections.defaultdict(collections.Counter)
    for line in open(edges):
        if "how=5" not in line:
            continue
        left, right = line.rstrip("\n").split(" -> ")
        path, lineno, _col, _how = left.split(" ")
        dpath, dname = right.split(" ", 1)
        name = dname.split(".")[-1]
        found = sites.get((path, int(lineno), name), [])
        if not found:
            verdict = "nosite"
        else:
            s = found[0]
            ok = any(r["path"] == dpath and same_name(r["qualified_name"], dname) for r in s["resolved"])
            verdict = "right" if ok else "wrong:" + s["status"]
        count[verdict] += 1
        by_name[name][verdict] += 1
        if "--list" in sys.argv:
            print(verdict, path, lineno, dname)
    print(dict(count))
    for n, c in sorted(by_name.items(), key=lambda x: -sum(x[1].values())):
        print(" ", n, dict(c))


if __name__ == "__main__":
    main()
