#!/usr/bin/env python3
"""Code-graph performance goals of issue 12, measured on real corpora.

Usage: the exact command of the published numbers is

    bash bench/graph/perf.sh --runs 5 --edits 6 --rounds 30 --perf --out /tmp/graph_perf_report.md

which builds the binaries from HEAD under /tmp/canopy-graph-bench, fetches
the corpora and then runs

    python3 bench/graph/perf.py --bin /tmp/canopy-graph-bench/bin/canopy \\
        --graph-perf /tmp/canopy-graph-bench/bin/graph_perf \\
        --baseline-bin /tmp/canopy-graph-bench/bin/canopy-nofacts \\
        --work /tmp/canopy-graph-bench/corpora --runs 5 --edits 6 --rounds 30 --perf

(--goals 1,2,3,4 and --corpora django,tokio,synth select parts.)

Goals (issue 12) and how each is measured:

 1. "Resolution adds at most 30% to a cold index of the Django sdist and
    tokio": `canopy index --json` on a copy of the corpus with `.canopy`
    deleted, --runs times; the report's graph_resolve_ms over
    (duration_ms - graph_resolve_ms), medians. With --baseline-bin (the same
    commit built with graph facts extraction turned off, see perf.sh) the
    runs alternate with that binary, so the whole graph cost (facts
    extraction in the parse workers + storing facts + resolution) is
    (median cold index) / (median cold index without facts) - 1, and facts
    alone is the rest once resolution is subtracted.
 2. "Re-indexing after a one-line edit stays under 150 ms on a 5,000-file
    repo": on synth and django, in each of the files most other files have
    graph edges into, one line (a call: `len(())` in Python) is inserted at
    the top of the body of its most used function, and `canopy index --json`
    is timed; the file is restored and the index run
    again (that run is a one-line edit too, reported apart). --edits edits,
    each in another file where possible. Then --runs no-change re-indexes
    (graph_files_resolved must be 0).
 3. "callers at depth 3 and the 20 hotspots answer in under 20 ms p50 on
    Django": the graph_perf example (crates/canopy-core/examples/graph_perf.rs)
    opens one Engine and times hotspots(20) and callers(target, 3) over ~30
    targets, --rounds rounds; p50/p95. Also run on tokio and synth.
 4. "Index size stays <= 1.5x source": .canopy/index.db (+ -wal when one is
    left after the process ends) over the bytes of the indexed files
    (SUM(files.size)), after a cold index; graph tables' share from dbstat.

References in the same run: ripgrep `rg -c .` over the same tree (median),
as the project reports speeds as ratios. Corpora are copied to --work
(default /tmp/canopy-graph-bench) so the shared cache is never edited; every
edited file is restored (try/finally). Before each timed step the script
waits (up to --idle-wait s) for the CPUs to be idle, like bench/index.sh,
and counts the waits that timed out. No assertion is made on any timing.

Python 3 stdlib only.
"""

import argparse
import json
import os
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from edges_dump import stored_edges  # noqa: E402  (the packed edge lists, decoded)

DJANGO_TARGETS = [
    "QuerySet.filter", "QuerySet.get", "QuerySet.create", "QuerySet.exclude",
    "QuerySet.update", "QuerySet.order_by", "QuerySet.values", "QuerySet.annotate",
    "QuerySet.all", "QuerySet.first", "Model.save", "Model.delete", "Model.full_clean",
    "Field.clean", "BaseForm.is_valid", "Query.add_q", "SQLCompiler.execute_sql",
    "Options.get_field", "Signal.send", "get_object_or_404",
]

STATE = {"idle_timeouts": 0, "idle_waited_s": 0.0}


def log(*a):
    print("graph-perf:", *a, file=sys.stderr, flush=True)


def median(v):
    return statistics.median(v) if v else float("nan")


def pct(v, p):
    if not v:
        return float("nan")
    s = sorted(v)
    return s[min(len(s) - 1, round(p / 100 * (len(s) - 1)))]


def cpu_times():
    with open("/proc/stat") as f:
        parts = f.readline().split()[1:]
    vals = [int(x) for x in parts]
    idle = vals[3] + vals[4]
    return sum(vals) - idle, idle


def cpu_busy(seconds=1.0):
    b0, i0 = cpu_times()
    time.sleep(seconds)
    b1, i1 = cpu_times()
    t = (b1 - b0) + (i1 - i0)
    return 100.0 * (b1 - b0) / t if t else 0.0


def wait_idle(limit):
    """Waits up to `limit` s until other processes use < 10% of the CPUs."""
    if limit <= 0:
        return
    start = time.monotonic()
    while True:
        busy = cpu_busy(1.0)
        if busy < 10:
            break
        if time.monotonic() - start >= limit:
            log("WARNING: CPUs still %.0f%% busy after %ds; measuring anyway" % (busy, limit))
            STATE["idle_timeouts"] += 1
            break
        time.sleep(2)
    STATE["idle_waited_s"] += time.monotonic() - start


def run_timed(argv, cwd=None):
    """Runs argv; returns (stdout, wall ms)."""
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd)
    out, err = p.communicate()
    wall = (time.perf_counter() - t0) * 1000
    if p.returncode != 0:
        raise RuntimeError("%s failed (%d): %s" % (" ".join(argv), p.returncode, err.decode()[-2000:]))
    return out, wall


class ChildCpu:
    """CPU time (user + sys, ms) of the children reaped between start() and stop()."""

    def __init__(self):
        self.t = None

    def start(self):
        r = os.times()
        self.t = r.children_user + r.children_system

    def stop(self):
        r = os.times()
        return (r.children_user + r.children_system - self.t) * 1000


def canopy_index(binary, repo, idle_wait):
    wait_idle(idle_wait)
    cpu = ChildCpu()
    cpu.start()
    busy0, _ = cpu_times()
    out, wall = run_timed([binary, "index", repo, "--json", "--quiet"])
    busy1, _ = cpu_times()
    rep = json.loads(out)
    rep["wall_ms"] = wall
    rep["cpu_ms"] = cpu.stop()
    # CPU time other processes used during the run, as a share of both cores.
    others = (busy1 - busy0) * 1000 / os.sysconf("SC_CLK_TCK") - rep["cpu_ms"]
    rep["others_pct"] = max(0.0, 100 * others / (wall * (os.cpu_count() or 1)))
    rep["loadavg1"] = os.getloadavg()[0]
    return rep


def db_paths(repo):
    d = os.path.join(repo, ".canopy")
    return [os.path.join(d, "index.db" + s) for s in ("", "-wal", "-shm")]


def index_bytes(repo):
    db, wal, shm = db_paths(repo)
    size = lambda p: os.path.getsize(p) if os.path.exists(p) else 0
    return size(db), size(wal), size(shm)


def ro(repo):
    db = db_paths(repo)[0]
    return sqlite3.connect("file:%s?mode=ro" % db, uri=True)


def source_bytes(repo):
    with ro(repo) as c:
        n, b = c.execute("SELECT count(*), COALESCE(SUM(size), 0) FROM files").fetchone()
    return n, b


def graph_table_bytes(repo):
    """Bytes per table (its indexes included) from dbstat, via the sqlite3 CLI or the module."""
    db = db_paths(repo)[0]
    q = ("SELECT COALESCE(m.tbl_name, d.name), SUM(d.pgsize) FROM dbstat d "
         "LEFT JOIN sqlite_master m ON m.name = d.name GROUP BY 1 ORDER BY 2 DESC")
    rows = None
    try:
        with ro(repo) as c:
            rows = c.execute(q).fetchall()
    except sqlite3.Error:
        if shutil.which("sqlite3"):
            out = subprocess.run(["sqlite3", "-readonly", "-separator", "\t", db, q],
                                 capture_output=True, text=True)
            if out.returncode == 0:
                rows = [(a, int(b)) for a, b in (l.split("\t") for l in out.stdout.split("\n") if l)]
    return dict(rows) if rows else None


GRAPH_TABLES = ("graph_facts", "edges", "graph_names", "graph_dirty", "graph_stale")


def rg_ms(repo, runs):
    if not shutil.which("rg"):
        return None
    times = []
    for _ in range(runs + 1):
        t0 = time.perf_counter()
        subprocess.run(["rg", "-c", "--no-messages", ".", repo], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        times.append((time.perf_counter() - t0) * 1000)
    return median(times[1:])  # first run warms the page cache


# ---------------------------------------------------------------- corpora

def corpora(names):
    out = subprocess.run(["bash", os.path.join(ROOT, "bench", "corpora.sh")] + names,
                         capture_output=True, text=True, check=True).stdout
    return dict(l.split("\t", 1) for l in out.strip().split("\n") if "\t" in l)


def working_copy(src, work, name):
    dest = os.path.join(work, name)
    if not os.path.isdir(dest):
        log("copying %s -> %s" % (src, dest))
        subprocess.run(["cp", "-a", src, dest], check=True)
    shutil.rmtree(os.path.join(dest, ".canopy"), ignore_errors=True)
    dirty = subprocess.run(["git", "-C", dest, "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True, check=True).stdout.strip()
    if dirty:  # a previous run was killed mid-edit: our own copy, put it back
        log("restoring edited files in %s: %s" % (dest, dirty.replace("\n", "; ")))
        subprocess.run(["git", "-C", dest, "checkout", "-q", "--", "."], check=True)
    return dest


# ---------------------------------------------------------------- goal 1 + 4

def cold_runs(args, name, repo, binaries):
    """Alternates the binaries; ends with the measured binary, so its index is left."""
    res = {k: [] for k in binaries}
    sizes = {}
    order = list(binaries)
    for i in range(args.runs):
        seq = order if i % 2 else list(reversed(order))
        if i == args.runs - 1:
            seq = [k for k in order if k != "canopy"] + ["canopy"]
        for k in seq:
            shutil.rmtree(os.path.join(repo, ".canopy"), ignore_errors=True)
            rep = canopy_index(binaries[k], repo, args.idle_wait)
            res[k].append(rep)
            sizes[k] = index_bytes(repo)
            if k != "canopy":
                sizes[k + "_tables"] = graph_table_bytes(repo)
            log("%s cold %s: %d ms (resolve %d ms, %d files resolved), wall %.0f ms"
                % (name, k, rep["duration_ms"], rep["graph_resolve_ms"],
                   rep["graph_files_resolved"], rep["wall_ms"]))
    return res, sizes


def goal1_row(name, res, rg):
    c = res["canopy"]
    dur = [r["duration_ms"] for r in c]
    rsv = [r["graph_resolve_ms"] for r in c]
    rest = [r["duration_ms"] - r["graph_resolve_ms"] for r in c]
    ratio = [r["graph_resolve_ms"] / max(1, r["duration_ms"] - r["graph_resolve_ms"]) for r in c]
    row = {
        "corpus": name, "files": c[-1]["files_indexed"], "runs": len(c),
        "duration_ms": median(dur), "duration_min": min(dur), "duration_max": max(dur),
        "resolve_ms": median(rsv), "rest_ms": median(rest), "resolve_ratio": median(ratio),
        "graph_files_resolved": c[-1]["graph_files_resolved"],
        "cpu_ms": median([r["cpu_ms"] for r in c]), "wall_ms": median([r["wall_ms"] for r in c]),
        "rg_ms": rg,
        "others_pct": median([r["others_pct"] for rs in res.values() for r in rs]),
        "others_max": max(r["others_pct"] for rs in res.values() for r in rs),
    }
    if "nofacts" in res:
        b = res["nofacts"]
        bd = [r["duration_ms"] for r in b]
        row.update({
            "nofacts_ms": median(bd), "nofacts_min": min(bd), "nofacts_max": max(bd),
            "nofacts_resolve_ms": median([r["graph_resolve_ms"] for r in b]),
            "nofacts_cpu_ms": median([r["cpu_ms"] for r in b]),
            "graph_ratio": median(dur) / median(bd) - 1,
            # facts extraction + storing them = index time without resolution - baseline
            "facts_ms": median(rest) - median(bd),
            "facts_ratio": (median(rest) - median(bd)) / median(bd),
            "graph_cpu_ratio": median([r["cpu_ms"] for r in c]) / median([r["cpu_ms"] for r in b]) - 1,
        })
    return row


# ---------------------------------------------------------------- goal 2

BRACE_STMT = {".rs": "drop(0_u8); // canopy-bench edit", ".go": '_ = len("") // canopy-bench edit',
              ".ts": "void String(0); // canopy-bench edit", ".tsx": "void String(0); // canopy-bench edit",
              ".js": "void String(0); // canopy-bench edit"}
PY_STMT = "len(())  # canopy-bench edit"


def indent_of(line):
    return line[: len(line) - len(line.lstrip())]


def edit_position(text, ext, start, end):
    """(line index to insert at, line to insert) at the top of a function body, or None."""
    lines = text.split("\n")
    lo, hi = start - 1, min(end, len(lines))
    if ext == ".py":
        d = next((i for i in range(lo, hi) if re.match(r"\s*(async\s+)?def\s", lines[i])), None)
        if d is None:
            return None
        h = next((i for i in range(d, hi) if re.sub(r"#.*$", "", lines[i]).rstrip().endswith(":")), None)
        if h is None:
            return None
        k = next((i for i in range(h + 1, hi) if lines[i].strip()), None)
        if k is None or len(indent_of(lines[k])) <= len(indent_of(lines[d])):
            return None
        return k, indent_of(lines[k]) + PY_STMT
    if ext in BRACE_STMT:
        h = next((i for i in range(lo, hi) if lines[i].rstrip().endswith("{")), None)
        if h is None or h + 1 >= hi:
            return None
        return h + 1, indent_of(lines[h]) + "    " + BRACE_STMT[ext]
    return None


def edge_uses(repo):
    """nodes.id -> number of edges pointing at it."""
    uses = {}
    with ro(repo) as c:
        for _, dst, _, _, _ in stored_edges(c):
            if dst > 0:
                uses[dst] = uses.get(dst, 0) + 1
    return uses


def file_functions(repo, path, uses):
    """A file's functions and methods, most used (`uses`: edges pointing at
    them) first."""
    q = ("SELECT n.id, n.start_line, n.end_line, n.qualified_name "
         "FROM files f JOIN nodes n ON n.id BETWEEN f.first_node_id AND f.last_node_id "
         "WHERE f.path = ? AND n.node_type IN ('function', 'method')")
    with ro(repo) as c:
        rows = [(start, end, q, uses.get(i, 0)) for i, start, end, q in c.execute(q, (path,))]
    return sorted(rows, key=lambda r: (-r[3], r[0]))


def dependent_files(repo):
    """path -> number of other files with an edge (call, import, type, other) into it."""
    import bisect
    with ro(repo) as c:
        files = c.execute("SELECT first_node_id, last_node_id, path FROM files "
                          "WHERE first_node_id <= last_node_id ORDER BY first_node_id").fetchall()
        firsts = [f[0] for f in files]

        def file_of(node):
            i = bisect.bisect_right(firsts, node) - 1
            return i if i >= 0 and node <= files[i][1] else None

        deps = {}
        for src, dst, _, _, _ in stored_edges(c):
            if dst <= 0:
                continue
            a, b = file_of(src), file_of(dst)
            if a is not None and b is not None and a != b:
                deps.setdefault(b, set()).add(a)
    return {files[b][2]: len(v) for b, v in deps.items()}


def edit_candidates(repo, want):
    """The files most others depend on, each with an edit at the top of the
    body of its most used function (or method)."""
    out = []
    ranked = sorted(dependent_files(repo).items(), key=lambda kv: (-kv[1], kv[0]))
    use_counts = edge_uses(repo)
    # Then (a corpus whose files have no edges between them, like synth) the
    # files of the most used functions.
    best = {}
    with ro(repo) as c:
        for i, path in c.execute(
                "SELECT n.id, f.path FROM nodes n JOIN files f ON f.id = n.file_id "
                "WHERE n.node_type IN ('function', 'method')"):
            if use_counts.get(i):
                best[path] = max(best.get(path, 0), use_counts[i])
    most_used = sorted(best.items(), key=lambda kv: (-kv[1], kv[0]))[:200]
    listed = {p for p, _ in ranked}
    for path, _ in most_used:
        if path not in listed:
            listed.add(path)
            ranked.append((path, 0))
    for path, dependents in ranked:
        ext = os.path.splitext(path)[1]
        if len(out) >= 4 * want:
            break
        if ext != ".py" and ext not in BRACE_STMT:
            continue
        with open(os.path.join(repo, path), encoding="utf-8", errors="surrogateescape", newline="") as f:
            text = f.read()
        for start, end, qualified, uses in file_functions(repo, path, use_counts):
            pos = edit_position(text, ext, start, end)
            if pos is not None:
                out.append({"path": path, "unit": qualified, "uses": uses, "line": pos[0] + 1,
                            "insert": pos[1], "dependents": dependents})
                break
    # Every language of the corpus in turn (synth), most depended on first.
    by_ext = {}
    for c in out:
        by_ext.setdefault(os.path.splitext(c["path"])[1], []).append(c)
    mixed = []
    while len(mixed) < min(want, len(out)):
        for group in by_ext.values():
            if group and len(mixed) < want:
                mixed.append(group.pop(0))
    return mixed


def syntax_errors(repo, path):
    with ro(repo) as c:
        r = c.execute("SELECT syntax_errors FROM files WHERE path = ?", (path,)).fetchone()
    return r[0] if r else None


def incremental(args, name, repo, binary):
    cands = edit_candidates(repo, args.edits)
    if not cands:
        raise RuntimeError("%s: no function to edit in a file others depend on" % name)
    edits, restores, nochange = [], [], []
    for i in range(max(args.edits, 1)):
        c = cands[i % len(cands)]
        full = os.path.join(repo, c["path"])
        with open(full, "rb") as f:
            original = f.read()
        before_err = syntax_errors(repo, c["path"])
        try:
            lines = original.split(b"\n")
            lines.insert(c["line"] - 1, c["insert"].encode())
            with open(full, "wb") as f:
                f.write(b"\n".join(lines))
            rep = canopy_index(binary, repo, args.idle_wait)
            rep["path"], rep["syntax_errors_before"] = c["path"], before_err
            rep["syntax_errors_after"] = syntax_errors(repo, c["path"])
            edits.append(rep)
        finally:
            with open(full, "wb") as f:
                f.write(original)
        rep = canopy_index(binary, repo, args.idle_wait)
        rep["path"] = c["path"]
        restores.append(rep)
        log("%s edit %s:%d -> %d ms (resolve %d ms, %d files resolved, wall %.0f ms); restore %d ms"
            % (name, c["path"], c["line"], edits[-1]["duration_ms"], edits[-1]["graph_resolve_ms"],
               edits[-1]["graph_files_resolved"], edits[-1]["wall_ms"], rep["duration_ms"]))
    for _ in range(args.runs):
        nochange.append(canopy_index(binary, repo, args.idle_wait))
    profile = None
    if args.perf:  # one more edit of the first file, under perf
        c = cands[0]
        full = os.path.join(repo, c["path"])
        with open(full, "rb") as f:
            original = f.read()
        try:
            lines = original.split(b"\n")
            lines.insert(c["line"] - 1, c["insert"].encode())
            with open(full, "wb") as f:
                f.write(b"\n".join(lines))
            profile = perf_shares([binary, "index", repo, "--quiet"], args.perf_dir, name + "-edit")
        finally:
            with open(full, "wb") as f:
                f.write(original)
        canopy_index(binary, repo, 0)
    return {"candidates": cands, "edits": edits, "restores": restores, "nochange": nochange,
            "perf": profile}


def inc_summary(runs):
    return {
        "n": len(runs),
        "duration_ms": median([r["duration_ms"] for r in runs]),
        "duration_max": max(r["duration_ms"] for r in runs),
        "resolve_ms": median([r["graph_resolve_ms"] for r in runs]),
        "files_resolved": median([r["graph_files_resolved"] for r in runs]),
        "files_resolved_max": max(r["graph_files_resolved"] for r in runs),
        "files_indexed": median([r["files_indexed"] for r in runs]),
        "wall_ms": median([r["wall_ms"] for r in runs]),
        "others_pct": median([r["others_pct"] for r in runs]),
    }


# ---------------------------------------------------------------- perf

PERF_FRAMES = [
    ("lang::extract::parse_file", "parse workers: everything per file (below: facts)"),
    ("graph::facts::extract", "  graph facts extraction (in the workers)"),
    ("FileFacts::encode", "  facts encoding"),
    ("Store>::write_batch", "writer: SQLite batch writes (facts blobs included)"),
    ("store::graph::write_facts", "  storing the facts blob"),
    ("graph::resolve_pending", "resolution: everything (below: its parts)"),
    ("Store>::graph_prepare", "  which files are dirty (+ the files they affect)"),
    ("Store>::graph_world_rows", "  loading every file's facts and definitions"),
    ("FileFacts::decode", "    decoding the facts blobs"),
    ("resolve::World::new", "  building the world (symbol tables)"),
    ("drop_in_place<canopy_graph::resolve::World>", "  freeing the world"),
    ("World::resolve_file", "  resolving the dirty files' sites"),
    ("Store>::graph_write_edges", "  writing edges"),
    ("discover::discover", "file discovery"),
]


QUERY_FRAMES = [
    ("graph::nav::Graph::traverse", "callers (all depths)"),
    ("Graph::unresolved_calls_named", "  counting unresolved sites named like the target"),
    ("Store>::edges_from_range", "    reading those files' edges"),
    ("Store>::raw_calls_in_file", "    reading those files' raw calls"),
    ("graph::nav::Graph::resolve_target", "  resolving the target string"),
    ("ops::<impl canopy_graph::nav::Graph>::hotspots", "hotspots"),
    ("Store>::all_edges", "  loading every edge"),
]


def perf_shares(argv, out_dir, tag, frames=None, env=None):
    """Inclusive share of all samples for `frames` under `perf record` (None without perf)."""
    frames = frames or PERF_FRAMES
    if not shutil.which("perf"):
        return None
    data = os.path.join(out_dir, "perf-%s.data" % tag)
    r = subprocess.run(["perf", "record", "-q", "-F", "999", "--call-graph", "dwarf,16384",
                        "-o", data] + argv, capture_output=True, env=env)
    if r.returncode != 0:
        log("perf record failed: %s" % r.stderr.decode()[-500:])
        return None
    rep = subprocess.run(["perf", "report", "-i", data, "--children", "--sort", "sym", "--stdio",
                          "-g", "none"], capture_output=True, text=True).stdout
    samples = re.search(r"# Samples:\s*(\S+) +of event", rep)
    shares = {}
    for line in rep.split("\n"):
        m = re.match(r"\s*([\d.]+)%\s+([\d.]+)%\s+\[.\]\s+(.*\S)", line)
        if not m:
            continue
        sym = m.group(3)
        for pat, _ in frames:
            if pat not in shares and sym.endswith(pat):
                shares[pat] = float(m.group(1))
    os.remove(data)
    return {"samples": samples.group(1) if samples else "?", "shares": shares}


# ---------------------------------------------------------------- goal 3

def graph_latency(args, repo, names):
    wait_idle(args.idle_wait)
    cpu = ChildCpu()
    cpu.start()
    busy0, _ = cpu_times()
    t0 = time.perf_counter()
    out = subprocess.run([args.graph_perf, repo, str(args.rounds)] + names,
                         capture_output=True, text=True)
    wall = (time.perf_counter() - t0) * 1000
    busy1, _ = cpu_times()
    if out.returncode != 0:
        raise RuntimeError("graph_perf failed: " + out.stderr[-2000:])
    log(out.stderr.strip())
    res = json.loads(out.stdout)
    others = (busy1 - busy0) * 1000 / os.sysconf("SC_CLK_TCK") - cpu.stop()
    res["others_pct"] = max(0.0, 100 * others / (wall * (os.cpu_count() or 1)))
    if args.perf and names:  # where a query's time goes: the first named target alone
        env = dict(os.environ, GRAPH_PERF_TARGETS="1")
        res["perf"] = perf_shares([args.graph_perf, repo, "10", names[0]], args.perf_dir,
                                  "query", QUERY_FRAMES, env)
        if res["perf"]:
            res["perf"]["target"] = names[0]
    return res


# ---------------------------------------------------------------- report

def fmt(x, d=0):
    if x is None or (isinstance(x, float) and x != x):
        return "–"
    return ("{:,.%df}" % d).format(x)


def verdict(ok):
    return "**met**" if ok else "**missed**"


def machine_notes():
    notes = ["nproc %d" % os.cpu_count()]
    try:
        with open("/proc/cpuinfo") as f:
            m = re.search(r"model name\s*:\s*(.*)", f.read())
            if m:
                notes.append(m.group(1).strip())
        with open("/proc/meminfo") as f:
            notes.append(f.readline().split(":")[1].strip() + " RAM")
    except OSError:
        pass
    notes.append("kernel " + os.uname().release)
    return ", ".join(notes)


def report(args, res):
    L = []
    w = L.append
    w("## Code graph performance (issue 12)\n")
    w("Measured %s–%s UTC; %s. Binaries: `%s`%s; graph_perf `%s`."
      % (res["started"], time.strftime("%H:%M", time.gmtime()), machine_notes(), args.bin,
         " and, for the comparison without graph facts, `%s`" % args.baseline_bin if args.baseline_bin else "",
         args.graph_perf))
    w("Idle waits before timed steps (limit %d s, < 10%% busy): %d timed out; %.0f s spent waiting. "
      "Load average (1 min) at the end: %.2f.\n"
      % (args.idle_wait, STATE["idle_timeouts"], STATE["idle_waited_s"], os.getloadavg()[0]))
    w("```bash\n%s\n```\n" % res["command"])

    if res.get("goal1"):
        w("### 1. Resolution's share of a cold index (goal: ≤ 30%)\n")
        w("Medians of %d cold runs each (`.canopy` deleted; the runs alternate between the binaries)." % args.runs)
        w("`resolve` = the report's `graph_resolve_ms`; `rest` = `duration_ms` − resolve.\n")
        w("Only Django and tokio are named by the goal; synth is shown for its mix of languages. "
          "`others` = CPU that other processes used during the runs (median, max), as a share of both cores.\n")
        w("| corpus | files | cold index ms (min–max) | resolve ms | rest ms | resolve ÷ rest | files resolved | verdict | rg -c . ms | cold ÷ rg | others |")
        w("|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|")
        for r in res["goal1"]:
            w("| %s | %s | %s (%s–%s) | %s | %s | %.1f%% | %s | %s | %s | %s | %.0f%% (%.0f%%) |"
              % (r["corpus"], fmt(r["files"]), fmt(r["duration_ms"]), fmt(r["duration_min"]),
                 fmt(r["duration_max"]), fmt(r["resolve_ms"]), fmt(r["rest_ms"]),
                 100 * r["resolve_ratio"], fmt(r["graph_files_resolved"]),
                 verdict(r["resolve_ratio"] <= 0.30) if r["corpus"] in ("django", "tokio") else "(not a goal corpus)",
                 fmt(r["rg_ms"]), fmt(r["duration_ms"] / r["rg_ms"], 0) + "×" if r["rg_ms"] else "–",
                 r["others_pct"], r["others_max"]))
        if any("nofacts_ms" in r for r in res["goal1"]):
            w("\nWhole graph cost against the same commit built without graph facts extraction "
              "(`facts = None` in `lang::extract`, so nothing is stored or resolved): ")
            w("\n| corpus | cold index ms | without graph ms (min–max) | graph adds (wall) | of which facts (extract + store) | of which resolution | graph adds (CPU, user+sys) | verdict (whole graph ≤ 30%) |")
            w("|---|---:|---:|---:|---:|---:|---:|---|")
            for r in res["goal1"]:
                if "nofacts_ms" not in r:
                    continue
                w("| %s | %s | %s (%s–%s) | %+.1f%% | %s ms (%+.1f%%) | %s ms (%+.1f%%) | %+.1f%% | %s |"
                  % (r["corpus"], fmt(r["duration_ms"]), fmt(r["nofacts_ms"]), fmt(r["nofacts_min"]),
                     fmt(r["nofacts_max"]), 100 * r["graph_ratio"], fmt(r["facts_ms"]),
                     100 * r["facts_ratio"], fmt(r["resolve_ms"]),
                     100 * r["resolve_ms"] / r["nofacts_ms"], 100 * r["graph_cpu_ratio"],
                     verdict(r["graph_ratio"] <= 0.30) if r["corpus"] in ("django", "tokio") else "–"))
        w("")

    if res.get("goal2"):
        w("### 2. Re-index after a one-line edit (goal: < 150 ms on a 5,000-file repository)\n")
        w("One line (a call) inserted at the top of the body of the most used function of one of the files most other files depend on (`canopy index --json`, a new "
          "process each time, so process start-up and file discovery are included); the file is then "
          "restored and indexed again (also a one-line change: the `restore` rows). Medians.\n")
        w("| corpus | files | run | n | duration_ms (max) | graph_resolve_ms | files resolved (max) | wall ms (process) | others | verdict |")
        w("|---|---:|---|---:|---:|---:|---:|---:|---:|---|")
        for g in res["goal2"]:
            for kind in ("edits", "restores", "nochange"):
                s = g[kind + "_summary"]
                ok = (s["files_resolved_max"] == 0) if kind == "nochange" else s["duration_ms"] < 150
                label = {"edits": "one-line edit", "restores": "restore (line removed)",
                         "nochange": "no change"}[kind]
                w("| %s | %s | %s | %d | %s (%s) | %s | %s (%s) | %s | %.0f%% | %s |"
                  % (g["corpus"], fmt(g["files"]), label, s["n"], fmt(s["duration_ms"]),
                     fmt(s["duration_max"]), fmt(s["resolve_ms"]), fmt(s["files_resolved"]),
                     fmt(s["files_resolved_max"]), fmt(s["wall_ms"]), s["others_pct"],
                     verdict(ok) + (" (no resolution work)" if kind == "nochange" and ok else "")))
        w("\nEdited files (function, edges into it, inserted line, other files with edges into the file):\n")
        for g in res["goal2"]:
            for c in g["candidates"]:
                errs = [e for e in g["edits"] if e["path"] == c["path"]]
                se = ("syntax errors %s → %s" % (errs[0]["syntax_errors_before"], errs[0]["syntax_errors_after"])
                      if errs else "")
                w("- %s: `%s:%d` in `%s` (%d edges point at it), `%s`; %d dependent files; %s"
                  % (g["corpus"], c["path"], c["line"], c["unit"], c["uses"], c["insert"].strip(),
                     c["dependents"], se))
        w("")

    if res.get("goal3"):
        w("### 3. Graph query latency through a warm engine (goal: < 20 ms p50 on Django)\n")
        w("`graph_perf` (one `Engine`, one read snapshot per request, as `canopy mcp` answers; "
          "no process start-up), %d rounds after one warm-up round; max_results %s as the CLI.\n"
          % (args.rounds, res["goal3"][0]["data"]["max_results"]))
        w("| corpus | query | targets | n | p50 ms | p95 ms | max ms | verdict |")
        w("|---|---|---:|---:|---:|---:|---:|---|")
        for g in res["goal3"]:
            d = g["data"]
            for key, label in (("callers_depth3", "callers, depth 3"), ("hotspots", "hotspots(20)"),
                               ("callers_depth1", "callers, depth 1 (for comparison)")):
                s = d[key]
                ok = s["p50"] < 20
                w("| %s | %s | %s | %d | %.2f | %.2f | %.2f | %s |"
                  % (g["corpus"], label, len(d["targets"]) if key != "hotspots" else "–", s["n"],
                     s["p50"], s["p95"], s["max"],
                     (verdict(ok) if g["corpus"] == "django" and key != "callers_depth1" else "")))
        w("\nOther processes used %s of both cores during these runs."
          % ", ".join("%.0f%% (%s)" % (g["data"].get("others_pct", 0), g["corpus"]) for g in res["goal3"]))
        for g in res["goal3"]:
            p = g["data"].get("perf")
            if p:
                w("\nperf of %s, 10 rounds of `hotspots(20)` and callers of `%s` only (%s samples), inclusive shares: "
                  % (g["corpus"], p["target"], p["samples"]) + "; ".join(
                      "%s `%s` %.1f%%" % (label.strip(), pat, p["shares"][pat])
                      for pat, label in QUERY_FRAMES if pat in p["shares"]))
        for g in res["goal3"]:
            d = g["data"]
            w("\n%s: first hotspots(20) on a fresh connection %.1f ms (engine open %.1f ms); %s units have call edges. "
              "Targets (callers depth 3: nodes returned / total, p50 ms):"
              % (g["corpus"], d["first_hotspots_ms"], d["open_ms"], fmt(d["units_with_call_edges"])))
            w("; ".join("`%s` %d/%d %.2f" % (t["target"], t["nodes"], t["total"], t["p50"]) for t in d["targets"]))
            if d["skipped_targets"]:
                w("\nSkipped names: " + "; ".join("`%s` (%s)" % (s["target"], s["why"]) for s in d["skipped_targets"]))
        w("")

    if res.get("goal4"):
        w("### 4. Index size (goal: ≤ 1.5× the indexed source)\n")
        w("| corpus | files | source bytes | index.db | -wal | index ÷ source | graph tables (facts, edges, …) | ÷ source | without graph facts build: index ÷ source | verdict |")
        w("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
        for r in res["goal4"]:
            w("| %s | %s | %s | %s | %s | **%.2f** | %s | %s | %s | %s |"
              % (r["corpus"], fmt(r["files"]), fmt(r["source"]), fmt(r["db"]), fmt(r["wal"]), r["ratio"],
                 fmt(r.get("graph_bytes")), "%.2f" % (r["graph_bytes"] / r["source"]) if r.get("graph_bytes") else "–",
                 "%.2f" % r["nofacts_ratio"] if r.get("nofacts_ratio") else "–", verdict(r["ratio"] <= 1.5)))
        w("\nBytes by table (indexes included), canopy build:\n")
        for r in res["goal4"]:
            if r.get("tables"):
                top = sorted(r["tables"].items(), key=lambda kv: -kv[1])[:10]
                w("- %s: " % r["corpus"] + ", ".join("%s %.2f×" % (k, v / r["source"]) for k, v in top))
        w("")
    if res.get("perf"):
        w("### Where the time goes (perf, inclusive share of all samples)\n")
        w("`perf record -F 999 --call-graph dwarf` of one run each (perf slows the run, the shares "
          "hold); a share is of CPU samples over every thread, not of wall time.\n")
        w("| frame | what it is | " + " | ".join(p["run"] for p in res["perf"]) + " |")
        w("|---|---|" + "---:|" * len(res["perf"]))
        for pat, label in PERF_FRAMES:
            w("| `%s` | %s | " % (pat, label.strip()) + " | ".join(
                ("%.1f%%" % p["shares"][pat]) if pat in p["shares"] else "–" for p in res["perf"]) + " |")
        w("\nSamples: " + ", ".join("%s %s" % (p["run"], p["samples"]) for p in res["perf"]) + "\n")
    return "\n".join(L)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(ROOT, "target", "release", "canopy"))
    ap.add_argument("--graph-perf", default=os.path.join(ROOT, "target", "release", "examples", "graph_perf"))
    ap.add_argument("--baseline-bin", help="same commit built without graph facts (perf.sh builds it)")
    ap.add_argument("--work", default="/tmp/canopy-graph-bench/corpora")
    ap.add_argument("--corpora", default="django,tokio,synth")
    ap.add_argument("--goals", default="1,2,3,4")
    ap.add_argument("--runs", type=int, default=5, help="cold and no-change runs per corpus")
    ap.add_argument("--edits", type=int, default=6, help="one-line edits per corpus (goal 2)")
    ap.add_argument("--rounds", type=int, default=30, help="rounds over the targets (goal 3)")
    ap.add_argument("--idle-wait", type=int, default=180)
    ap.add_argument("--perf", action="store_true",
                    help="also profile one cold index (django, tokio) and one edit run under perf")
    ap.add_argument("--out", default="/tmp/graph_perf_report.md")
    ap.add_argument("--json-out", default=None, help="raw results (default: WORK/../results.json)")
    args = ap.parse_args()
    args.bin = os.path.abspath(args.bin)
    args.graph_perf = os.path.abspath(args.graph_perf)
    goals = set(args.goals.split(","))
    names = [n for n in args.corpora.split(",") if n]
    os.makedirs(args.work, exist_ok=True)
    args.perf_dir = os.path.dirname(args.work.rstrip("/"))
    json_out = args.json_out or os.path.join(os.path.dirname(args.work.rstrip("/")), "results.json")

    res = {"started": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
           "command": "python3 bench/graph/perf.py " + " ".join(sys.argv[1:]),
           "goal1": [], "goal2": [], "goal3": [], "goal4": [], "perf": [], "raw": {}}
    paths = corpora(names)
    binaries = {"canopy": args.bin}
    if args.baseline_bin:
        binaries["nofacts"] = os.path.abspath(args.baseline_bin)
    for name in names:
        repo = working_copy(paths[name], args.work, name)
        raw = res["raw"].setdefault(name, {})
        # Cold runs: needed by goal 1 and 4, and they leave the index goals 2 and 3 use.
        cold_bins = binaries if "1" in goals or "4" in goals else {"canopy": args.bin}
        runs = args.runs if ("1" in goals or "4" in goals) else 1
        saved, args.runs = args.runs, runs
        cold, sizes = cold_runs(args, name, repo, cold_bins)
        args.runs = saved
        raw["cold"] = cold
        if "1" in goals:
            res["goal1"].append(goal1_row(name, cold, rg_ms(repo, args.runs)))
            if args.perf:
                shutil.rmtree(os.path.join(repo, ".canopy"), ignore_errors=True)
                prof = perf_shares([args.bin, "index", repo, "--quiet"], args.perf_dir, name + "-cold")
                if prof:
                    res["perf"].append({"run": "%s, cold index" % name, **prof})
        if "4" in goals:
            n, src = source_bytes(repo)
            db, wal, shm = sizes["canopy"]
            tables = graph_table_bytes(repo)
            row = {"corpus": name, "files": n, "source": src, "db": db, "wal": wal, "shm": shm,
                   "ratio": (db + wal) / src, "tables": tables}
            if tables:
                row["graph_bytes"] = sum(v for k, v in tables.items() if k in GRAPH_TABLES)
            if "nofacts" in sizes:
                row["nofacts_ratio"] = (sizes["nofacts"][0] + sizes["nofacts"][1]) / src
            res["goal4"].append(row)
        if "3" in goals:
            gp = graph_latency(args, repo, DJANGO_TARGETS if name == "django" else [])
            raw["graph_perf"] = gp
            res["goal3"].append({"corpus": name, "data": {k: v for k, v in gp.items() if k != "samples"}})
        if "2" in goals and name in ("django", "synth"):
            inc = incremental(args, name, repo, args.bin)
            raw["incremental"] = inc
            g = {"corpus": name, "files": cold["canopy"][-1]["files_indexed"], "candidates": inc["candidates"],
                 "edits": inc["edits"]}
            for kind in ("edits", "restores", "nochange"):
                g[kind + "_summary"] = inc_summary(inc[kind])
            res["goal2"].append(g)
            if inc["perf"]:
                res["perf"].append({"run": "%s, one-line edit (`%s`)" % (name, inc["candidates"][0]["path"]),
                                    **inc["perf"]})
        with open(json_out, "w") as f:
            json.dump(res, f, indent=1, default=str)
    text = report(args, res)
    with open(args.out, "w") as f:
        f.write(text + "\n")
    print(text)
    log("report: %s; raw results: %s" % (args.out, json_out))


if __name__ == "__main__":
    main()
