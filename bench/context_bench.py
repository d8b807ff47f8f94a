#!/usr/bin/env python3
"""Costs of context packs and semantic retrieval on one repository (issue 13).

1. Cold index, without and with the embedding model (`--model`), alternating,
   `--runs` each: median seconds and their ratio (the goal: embedding adds
   at most 50%).
2. Index size: index.db bytes, the stored vectors' bytes and the pages their
   table takes, against the bytes of the indexed source files (goals:
   <= 1.5x without vectors, i.e. without the vector table, <= 2x with them).
3. Incremental: one file edited, `canopy index` again; how many files were
   embedded (from the debug log) and the wall time.
4. `canopy_context` latency through a warm `canopy mcp` (model loaded,
   vectors in memory), at 4,000 tokens: each strategy, and the default
   fused pack twice: with history, and without it (the server started with
   GIT_DIR pointing nowhere, so git finds no repository and the history
   strategy is skipped).

Needs a git checkout (for history), e.g. Django from the eval mirror:
    git clone -q --shared /work/.mirror/swe-bench+django__django/repo /tmp/django-git
    python3 bench/context_bench.py --repo /tmp/django-git --model ~/.cache/canopy/models/minilm-l6-v2
"""
import argparse, os, re, sqlite3, statistics, subprocess, sys, time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from mcp_latency import McpClient, call_tool, pct  # noqa: E402

QUESTIONS = [
    "QuerySet.bulk_create crashes when ignore_conflicts is used with a unique constraint",
    "migrations autodetector misses a renamed field on a model with a custom primary key",
    "the admin changelist shows the wrong count when filtering by a related field",
    "template engine raises an error when an include tag uses a variable name",
    "password reset email uses the wrong domain behind a proxy",
    "ORM aggregation over a window function produces invalid SQL on PostgreSQL",
    "file upload handler loses the content type of large files",
    "URL resolver reverse() fails for a path converter with a default argument",
    "session middleware sets the cookie twice when the session is modified in a view",
    "the test client does not follow redirects to a different host",
]


def canopy(bin_, args, env=None):
    t = time.perf_counter()
    p = subprocess.run([bin_] + args, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        sys.exit(f"canopy {' '.join(args)}: {p.stderr[-500:]}")
    return time.perf_counter() - t, p


def cold_index(bin_, repo, model, runs):
    out = {"without": [], "with": []}
    for _ in range(runs):
        for name, extra in (("without", []), ("with", ["--model", model])):
            subprocess.run(["rm", "-rf", os.path.join(repo, ".canopy")], check=True)
            secs, _ = canopy(bin_, extra + ["index", repo, "--quiet"])
            out[name].append(secs)
    return {k: statistics.median(v) for k, v in out.items()}


def sizes(repo):
    """Source bytes, index.db bytes, the vectors' data bytes, and the pages
    the vector table takes (its data plus page overhead: what the index
    would not have without a model; dbstat when SQLite has it, else the
    data bytes)."""
    db = os.path.join(repo, ".canopy", "index.db")
    c = sqlite3.connect(db)
    c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    source = c.execute("SELECT COALESCE(SUM(size), 0) FROM files WHERE content_hash != ''").fetchone()[0]
    vectors = c.execute("SELECT COALESCE(SUM(length(data)), 0), COUNT(*) FROM unit_vectors").fetchone()
    try:
        pages = c.execute(
            "SELECT COALESCE(SUM(pgsize), 0) FROM dbstat WHERE name = 'unit_vectors'"
            " OR name LIKE 'sqlite_autoindex_unit_vectors%'").fetchone()[0]
    except sqlite3.OperationalError:
        pages = vectors[0]
    c.close()
    total = os.path.getsize(db)
    return source, total, vectors[0], pages


def incremental(bin_, repo, model):
    target = None
    for root, _, files in os.walk(repo):
        if ".git" in root or ".canopy" in root:
            continue
        for f in files:
            if f.endswith(".py") and os.path.getsize(os.path.join(root, f)) > 2000:
                target = os.path.join(root, f)
                break
        if target:
            break
    original = open(target, "rb").read()
    try:
        with open(target, "ab") as f:
            f.write(b"\n\ndef canopy_bench_added_function():\n    return 42\n")
        env = dict(os.environ, CANOPY_LOG="canopy_core=debug,canopy_graph=debug")
        secs, p = canopy(bin_, ["--model", model, "index", repo, "--quiet"], env=env)
        m = re.search(r"embedded units files=(\d+) units=(\d+)", p.stderr)
        return secs, (m.group(1), m.group(2)) if m else ("0", "0"), os.path.relpath(target, repo)
    finally:
        open(target, "wb").write(original)
        canopy(bin_, ["--model", model, "index", repo, "--quiet"])


def mcp_latency(bin_, repo, model, n, strategies, hide_git=False):
    argv = [bin_, "--model", model, "mcp"]
    if hide_git:
        # git then finds no repository: the history strategy is skipped.
        argv = ["env", "GIT_DIR=/nonexistent-canopy-bench"] + argv
    client = McpClient(argv, 120.0)
    try:
        init, _ = client.request("initialize", {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "bench", "version": "0"}})
        if "error" in init:
            sys.exit(f"initialize failed: {init['error']}")
        client.notify("notifications/initialized")
        out = {}
        for strategy in strategies:
            for q in QUESTIONS[:2]:  # warm-up: engine, model, vectors, page cache
                call_tool(client, "canopy_context", {"path": repo, "task": q, "strategy": strategy})
            times = []
            for i in range(n):
                secs, err, _, _ = call_tool(client, "canopy_context", {
                    "path": repo, "task": QUESTIONS[i % len(QUESTIONS)],
                    "budget_tokens": 4000, "strategy": strategy})
                if err:
                    sys.exit(f"{strategy}: {err}")
                times.append(secs * 1000)
            times.sort()
            out[strategy] = (pct(times, 50), pct(times, 95))
        return out
    finally:
        client.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repo", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--bin", default=os.path.join(os.path.dirname(HERE), "target", "release", "canopy"))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("-n", type=int, default=30)
    a = ap.parse_args()
    repo = os.path.realpath(a.repo)

    cold = cold_index(a.bin, repo, a.model, a.runs)
    print("| cold index (median of %d) | seconds |" % a.runs)
    print("|---|---:|")
    print(f"| without model | {cold['without']:.2f} |")
    print(f"| with model (units embedded and stored) | {cold['with']:.2f} |")
    print(f"| ratio | {cold['with'] / cold['without']:.2f}x |\n")

    source, total, vectors, pages = sizes(repo)
    print("| index size | bytes | x source |")
    print("|---|---:|---:|")
    print(f"| indexed source files | {source:,} | 1.00 |")
    print(f"| index.db without the vector table | {total - pages:,} | {(total - pages) / source:.2f} |")
    print(f"| vectors (int8 data) | {vectors:,} | {vectors / source:.2f} |")
    print(f"| vector table (data and page overhead) | {pages:,} | {pages / source:.2f} |")
    print(f"| index.db with vectors | {total:,} | {total / source:.2f} |\n")

    secs, (files, units), path = incremental(a.bin, repo, a.model)
    print(f"incremental: one edited file ({path}) -> `canopy index` {secs:.2f} s, "
          f"{files} file(s) / {units} units embedded\n")

    with_git = mcp_latency(a.bin, repo, a.model, a.n,
                           ["fused", "keyword", "semantic", "graph", "history", "decisions"])
    without = mcp_latency(a.bin, repo, a.model, a.n, ["fused"], hide_git=True)
    print("| canopy_context through warm `canopy mcp`, 4,000 tokens | p50 ms | p95 ms |")
    print("|---|---:|---:|")
    p50, p95 = without["fused"]
    print(f"| fused, without history (git hidden) | {p50:.1f} | {p95:.1f} |")
    for label, (p50, p95) in with_git.items():
        print(f"| {label}{' (with history)' if label == 'fused' else ''} | {p50:.1f} | {p95:.1f} |")


if __name__ == "__main__":
    main()
