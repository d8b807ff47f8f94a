#!/usr/bin/env python3
"""Smoke run of the bench scripts that start canopy, at tiny sizes.

A bench script that no test runs breaks silently: `bench/rebuild_load.py`
stayed broken for a whole session after a signature change in
`bench/http_load.py`. This runs each script once on a tiny generated
repository (bench/gen_repo.py --files 40, one commit) with the given binary
and fails when one does not finish, exits with an error, or does not print
its result line. It checks that the scripts work, not their figures: at
these sizes, on a shared machine, the figures mean nothing (the one goal a
script checks by time, poll_during_index.py's 1.2x, may be missed).

Every script gets its own copy of the repository (several edit it in place).
Scripts run --jobs at a time (most of their time is waiting on canopy).
Those that need the embedding model (context_*) take it from --model or
CANOPY_TEST_MODEL, and fleet.py and fleet_settings.py need PostgreSQL (CANOPY_PG_BIN; it starts
it with the built `throwaway_pg` example, else with `cargo run`); without
them they are skipped, or fail when CANOPY_REQUIRE_MODEL /
CANOPY_REQUIRE_POSTGRES is set, like the tests.

Not covered: bench/eval/*.py and bench/graph/perf.py (they need the
evaluation data or the graph corpora), and the shell scripts other than
batch_ab.sh (run with bash; the rest build release binaries, need valgrind
or a second tool).

Usage (.ci/run runs it after the tests, with the debug binary they built):
  python3 bench/smoke.py --bin target/debug/canopy [--jobs 3] [--only NAME,...]
"""

import argparse
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def cases(b, repo, model, pg_example):
    """(name, script and arguments, needs, result line the script prints, exit codes accepted)."""
    mcp_ctx = ["--model", model or "", "--bin", "a=" + b]
    return [
        ("freshness (mcp)", ["freshness.py", "--repo", repo, "--bin", b, "--edits", "2", "--gap", "0.05",
                             "--timeout", "30"], None, r"\| mcp \| 0 \| \d+ \| 2 \|", {0}),
        ("freshness (serve, --load 1)", ["freshness.py", "--repo", repo, "--bin", b, "--edits", "2",
                                         "--gap", "0.05", "--timeout", "30", "--via", "serve", "--load", "1"],
         None, r"\| serve \| 1 \| \d+ \| 2 \|", {0}),
        ("first_answer_after_commit", ["first_answer_after_commit.py", "--repo", repo, "--bin", b, "--edits", "1",
                                       "--settle", "1.0"], None, r"first query after a commit: median \d", {0}),
        ("watch_batch", ["watch_batch.py", "--repo", repo, "--bin", b, "--files", "5", "--symbol", "Service",
                         "--idle", "0.3", "--quiet", "1", "--timeout", "60"], None, r"all \d+ \(total_matches \d+\)",
         {0}),
        ("rebuild_load", ["rebuild_load.py", "--repo", repo, "--bin", b, "--threads", "2", "--symbols", "10",
                          "--settle", "0.3", "--ready-timeout", "60"], None,
         r"\| during the rebuild \| \d+ \| 0 \| 0 \| 0 \| 0 \|", {0}),
        ("http_load", ["http_load.py", "--repo", repo, "--bin", b, "--threads", "2", "--duration", "0.5",
                       "--modify", "2", "--max-reindex", "1", "--ready-timeout", "60"], None,
         r"server alive at end: True", {0}),
        # The handshake only: the batch needs an index's names (bench/moves.sh makes it).
        ("mcp_batch", ["mcp_batch.py", "run", "--empty", "--", b, "mcp", "--watch", "false"], None,
         r"answered 0 calls", {0}),
        # The same binary on both sides: the script's plumbing, not a comparison.
        ("batch_ab", ["batch_ab.sh", b, b, repo, "1"], None, r"median ratio B/A \d", {0}),
        ("mcp_latency", ["mcp_latency.py", "--repo", repo, "--bin", b, "-n", "2", "--warmup", "1",
                         "--timeout", "60"], None, r"\| canopy_evidence_pack \| 2 \| 0 \|", {0}),
        # Exit 1 is its 1.2x goal missed (a timing, meaningless at this size).
        ("poll_during_index", ["poll_during_index.py", "--bin", b, "--files", "30", "--runs", "1",
                               "--timeout", "60"], None, r"median polled / alone: \d", {0, 1}),
        ("edit_reindex", ["edit_reindex.py", "--repo", repo, "--bin", "a=" + b, "--edits", "1", "--rounds", "1"],
         None, r"\| a \| 2 \|", {0}),
        ("edit_reindex_serve", ["edit_reindex.py", "--repo", repo, "--bin", "a=" + b, "--edits", "1",
                                "--rounds", "1", "--serve"], None, r"\| a \| 2 \|", {0}),
        ("edit_reindex_paired", ["edit_reindex.py", "--repo", repo, "--bin", "a=" + b, "--bin", "b=" + b,
                                 "--edits", "1", "--rounds", "1", "--oneoff", "--paired"], None,
         r"paired cpu_ms b - a: median", {0}),
        ("text_merge_runs", ["text_merge_runs.py", "--bin", b, "--repo", repo, "--edits", "1"], None,
         r"cpu p50 \d+ ms; runs that merged", {0}),
        ("answers_digest", ["answers_digest.py", "--bin", b, "--index", repo], None,
         r"# \d+ answers, digest [0-9a-f]{16}", {0}),
        ("engine_rss", ["engine_rss.py", "--bin", b, "--repos", "2", "--files", "8", "--idle-secs", "1"], None,
         r"given back per closed engine", {0}),
        ("context_bench", ["context_bench.py", "--repo", repo, "--model", model or "", "--bin", b, "--runs", "1",
                           "-n", "1"], "model", r"\| graph \|", {0}),
        ("context_latency", ["context_latency.py", "--tree", repo, "--runs", "1"] + mcp_ctx, "model",
         r"\| a \| fused \|", {0}),
        ("context_warm", ["context_warm.py", "--tree", repo, "--rounds", "1", "-n", "1", "--settle", "0.1"]
         + mcp_ctx, "model", r"\| a \| fused \|", {0}),
        ("fleet", ["fleet.py", "--bin", b, "--repos", "2", "--files", "8", "--nodes", "2", "--threads", "2",
                   "--duration", "0.5", "--forward-samples", "2", "--inc-samples", "1", "--lease-ttl-ms", "2000",
                   ] + (["--pg-example", pg_example] if pg_example else []), "postgres",
         r"takeover after kill -9", {0}),
        ("fleet_settings", ["fleet_settings.py", "--bin", b, "--repos", "1", "--files", "8", "--rounds", "1",
                            "--settle", "0.5"] + (["--pg-example", pg_example] if pg_example else []),
         "postgres", r"\| an edit → searchable, watch already on \| 1 \|", {0}),
    ]


def make_repo(path):
    subprocess.run([sys.executable, os.path.join(HERE, "gen_repo.py"), path, "--files", "40", "--seed", "1"],
                   check=True, stdout=subprocess.DEVNULL)
    git = ["git", "-c", "user.name=smoke", "-c", "user.email=smoke@example.invalid"]
    subprocess.run(["git", "init", "-q"], cwd=path, check=True)
    subprocess.run(git + ["add", "-A"], cwd=path, check=True)
    subprocess.run(git + ["commit", "-qm", "tiny"], cwd=path, check=True)


def run_case(case, tmp, repo, timeout):
    name, argv, _, expect, ok = case
    own = os.path.join(tmp, re.sub(r"\W+", "_", name))
    shutil.copytree(repo, own, symlinks=True)
    argv = [own if a == repo else a for a in argv]
    t = time.monotonic()
    try:
        interpreter = "bash" if argv[0].endswith(".sh") else sys.executable
        p = subprocess.run([interpreter, os.path.join(HERE, argv[0])] + argv[1:], cwd=ROOT,
                           capture_output=True, text=True, timeout=timeout,
                           env=dict(os.environ, CANOPY_LOG="warn"))
        rc, out, err = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        rc, out, err = "timeout", e.stdout or "", e.stderr or ""
        out = out if isinstance(out, str) else out.decode(errors="replace")
        err = err if isinstance(err, str) else err.decode(errors="replace")
    wall = time.monotonic() - t
    problem = None
    if rc not in ok:
        problem = f"exit {rc}"
    elif not re.search(expect, out):
        problem = f"no line matching {expect!r}"
    elif "Traceback" in err:
        problem = "a Python traceback on stderr"
    return name, wall, problem, out, err


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(ROOT, "target", "debug", "canopy"))
    ap.add_argument("--model", default=os.environ.get("CANOPY_TEST_MODEL"))
    ap.add_argument("--pg-example", default=os.path.join(ROOT, "target", "debug", "examples", "throwaway_pg"))
    ap.add_argument("--jobs", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=240.0, help="seconds per script")
    ap.add_argument("--only", help="comma-separated names (or prefixes) of the scripts to run")
    args = ap.parse_args()
    binary = os.path.abspath(args.bin)
    if not os.access(binary, os.X_OK):
        sys.exit(f"no canopy binary at {binary}")
    have = {
        "model": bool(args.model) and os.path.isdir(args.model),
        "postgres": bool(os.environ.get("CANOPY_PG_BIN")),
    }
    # Without the built example, fleet.py starts PostgreSQL with `cargo run`.
    pg_example = args.pg_example if os.access(args.pg_example, os.X_OK) else None
    required = {"model": os.environ.get("CANOPY_REQUIRE_MODEL") == "1",
                "postgres": os.environ.get("CANOPY_REQUIRE_POSTGRES") == "1"}
    start = time.monotonic()
    tmp = tempfile.mkdtemp(prefix="canopy-bench-smoke-")
    failed = []
    try:
        repo = os.path.join(tmp, "tiny")
        make_repo(repo)
        todo = []
        for case in cases(binary, repo, args.model and os.path.abspath(args.model), pg_example):
            name, _, needs, _, _ = case
            if args.only and not any(name.startswith(n) for n in args.only.split(",")):
                continue
            if needs and not have[needs]:
                if required[needs]:
                    failed.append(name)
                    print(f"FAIL {name}: needs {needs}, which is missing (CANOPY_REQUIRE_* is set)")
                else:
                    print(f"skip {name}: needs {needs}")
                continue
            todo.append(case)
        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            for name, wall, problem, out, err in pool.map(lambda c: run_case(c, tmp, repo, args.timeout), todo):
                if problem:
                    failed.append(name)
                    print(f"FAIL {name} ({wall:.1f} s): {problem}\n--- stdout (end)\n{out[-1500:]}"
                          f"\n--- stderr (end)\n{err[-2500:]}")
                else:
                    print(f"ok   {name} ({wall:.1f} s)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(f"bench smoke: {len(todo) - len([f for f in failed if any(f == c[0] for c in todo)])} of {len(todo)} "
          f"scripts ok in {time.monotonic() - start:.1f} s wall, {used.ru_utime + used.ru_stime:.1f} s CPU "
          f"(load average {os.getloadavg()[0]:.1f})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
