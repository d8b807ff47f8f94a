#!/usr/bin/env python3
"""`canopy_context` latency through a warm `canopy mcp`, per binary (issue 31 item 6).

  context_warm.py --tree DIR [--model MODEL_DIR] --bin NAME=PATH [--bin NAME=PATH ...]
                  [--rounds 3] [-n 30] [--strategy fused] [--settle 5] [--focus-list FILE]
                  [--repeats 1] [--perf FILE] [--perf-pass repeated|first] [--dump DIR]

DIR must be a git checkout for history to have commits (e.g. a clone of the
Django mirror: 31,881 commits). Indexes DIR once per binary, then for each
round and each binary in turn: starts `canopy --model M mcp`, makes two
warm-up calls, waits --settle seconds (a long-lived server reads the whole
git log once in the background after its first history request; this
measures the requests after that), then times -n calls of the 10 tasks of
bench/context_bench.py in turn at 4,000 tokens. Prints p50/p95 ms per
binary over all rounds, and whether both binaries returned the same packs.

--focus-list FILE (a JSON list of [task, focus] pairs) times those requests
instead of the -n tasks: each pair once (the server's first sight of that
focus: history reads its commits' diffs), then each pair again (repeated:
answered from the per-focus cache), p50/p95 ms of each pass, and per pass
the requests whose header lists history as skipped, and the CPU the server
used per call (its own threads / the git processes it waited for; from
/proc, so less sensitive to a loaded machine than the wall clock). Without --model the
server runs without one (semantic is skipped). --repeats K makes the repeated
pass K passes over the pairs; --perf FILE records the server with
`perf record --call-graph dwarf -F 200` during the repeated passes (one
binary, one round: read it with `perf report -i FILE --children --sort symbol`);
--perf-pass first records the first-sight pass instead. --dump DIR writes the
answers of the --focus-list passes (without what differs between runs, as
compared below) to DIR/NAME-ROUND.json, to compare binaries' packs.
"""
import json
import argparse, os, signal, subprocess, sys, time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from mcp_latency import McpClient, call_tool, pct  # noqa: E402
from context_bench import QUESTIONS  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--tree", required=True)
ap.add_argument("--model")
ap.add_argument("--focus-list")
ap.add_argument("--bin", action="append", required=True)
ap.add_argument("--rounds", type=int, default=3)
ap.add_argument("-n", type=int, default=30)
ap.add_argument("--strategy", default="fused")
ap.add_argument("--settle", type=float, default=5.0)
ap.add_argument("--repeats", type=int, default=1)
ap.add_argument("--perf")
ap.add_argument("--perf-pass", choices=("first", "repeated"), default="repeated")
ap.add_argument("--dump")
a = ap.parse_args()
tree = os.path.realpath(a.tree)
bins = [b.split("=", 1) for b in a.bin]
model_args = ["--model", a.model] if a.model else []
pairs = json.load(open(a.focus_list)) if a.focus_list else None
for _, path in bins:
    subprocess.run([path] + model_args + ["index", tree, "--quiet"], check=True, capture_output=True)


def comparable(blocks):
    """The answer's content blocks without what differs between any two runs
    of one binary: the header's index generation, stale files and
    `index_coverage` (`freshness` in headers before issue 31's compact one)."""
    out = []
    for block in blocks:
        text = block.get("text", "")
        try:
            header = json.loads(text)
        except ValueError:
            out.append(text)
            continue
        if isinstance(header, dict):
            for key in ("freshness", "generation", "stale_files", "stale_paths", "index_coverage"):
                header.pop(key, None)
            text = json.dumps(header, sort_keys=True)
        out.append(text)
    return out


def one_server(path, dump=None):
    client = McpClient([path] + model_args + ["mcp"], 120.0)
    try:
        init, _ = client.request("initialize", {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "bench", "version": "0"}})
        if "error" in init:
            sys.exit(f"initialize failed: {init['error']}")
        client.notify("notifications/initialized")
        for q in QUESTIONS[:2]:
            call_tool(client, "canopy_context", {"path": tree, "task": q, "strategy": a.strategy})
        time.sleep(a.settle)
        if pairs:
            return focus_passes(client, dump), []
        times, texts = [], []
        for i in range(a.n):
            args = {"path": tree, "task": QUESTIONS[i % len(QUESTIONS)],
                    "budget_tokens": 4000, "strategy": a.strategy}
            resp, secs = client.request("tools/call", {"name": "canopy_context", "arguments": args})
            if "error" in resp or resp["result"].get("isError"):
                sys.exit(f"{a.strategy}: {str(resp)[:300]}")
            times.append(secs * 1000)
            texts.append(comparable(resp["result"]["content"]))
        return times, texts
    finally:
        client.close()


def cpu_ms(pid):
    """CPU time of process `pid` so far, ms: its own (all threads) and that of
    the children it waited for (git), from /proc/PID/stat."""
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    tick = 1000.0 / os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) * tick, (int(fields[13]) + int(fields[14])) * tick


def focus_passes(client, dump=None):
    """Each (task, focus) pair twice: first sight, then repeated; ms, history-skipped
    and CPU ms (own, children) per pass; the answers written to `dump` (a path)."""
    out, answers = {}, {}
    for name in ("first", "repeated"):
        times, skipped = [], 0
        cpu_before = cpu_ms(client.proc.pid)
        perf = None
        if name == a.perf_pass and a.perf:
            perf = subprocess.Popen(["perf", "record", "-q", "-o", a.perf, "-p", str(client.proc.pid),
                                     "--call-graph", "dwarf,32768", "-F", "200"], stderr=subprocess.DEVNULL)
            time.sleep(1)
        for task, focus in pairs * (a.repeats if name == "repeated" else 1):
            args = {"path": tree, "task": task, "focus": focus, "budget_tokens": 4000, "strategy": a.strategy}
            resp, secs = client.request("tools/call", {"name": "canopy_context", "arguments": args})
            if "error" in resp or resp["result"].get("isError"):
                sys.exit(f"{focus}: {str(resp)[:300]}")
            header = json.loads(resp["result"]["content"][0]["text"])
            skipped += "history" in header.get("skipped", {})
            times.append(secs * 1000)
            answers.setdefault(name, []).append(comparable(resp["result"]["content"]))
        cpu_after = cpu_ms(client.proc.pid)
        cpu = tuple(b - a for a, b in zip(cpu_before, cpu_after))
        if perf:
            perf.send_signal(signal.SIGINT)
            perf.wait()
        out[name] = (times, skipped, cpu)
    if dump:
        with open(dump, "w") as f:
            json.dump(answers, f, indent=1)
    return out


if pairs:
    got = {n: {"first": [], "repeated": []} for n, _ in bins}
    skips = {n: {"first": 0, "repeated": 0} for n, _ in bins}
    cpus = {n: {"first": [0.0, 0.0], "repeated": [0.0, 0.0]} for n, _ in bins}
    if a.dump:
        os.makedirs(a.dump, exist_ok=True)
    for r in range(a.rounds):
        for n, path in bins:
            dump = os.path.join(a.dump, f"{n}-{r + 1}.json") if a.dump else None
            for name, (t, sk, cpu) in one_server(path, dump)[0].items():
                got[n][name] += t
                skips[n][name] += sk
                cpus[n][name][0] += cpu[0]
                cpus[n][name][1] += cpu[1]
    print(f"| binary | pass | canopy_context {a.strategy} with focus, warm mcp, 4,000 tokens | p50 ms | p95 ms | max ms | calls | history skipped | CPU ms per call: server / git |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|")
    for n, passes in got.items():
        for name, xs in passes.items():
            xs.sort()
            own, kids = (c / len(xs) for c in cpus[n][name])
            print(f"| {n} | {name} | {len(pairs)} (task, focus) pairs | {pct(xs, 50):.1f} | {pct(xs, 95):.1f} | "
                  f"{xs[-1]:.1f} | {len(xs)} | {skips[n][name]} | {own:.1f} / {kids:.1f} |")
    sys.exit(0)
times = {n: [] for n, _ in bins}
answers = {}
for _ in range(a.rounds):
    for n, path in bins:
        t, texts = one_server(path)
        times[n] += t
        answers.setdefault(n, texts)
print(f"| binary | canopy_context {a.strategy}, warm mcp, 4,000 tokens | p50 ms | p95 ms | calls |")
print("|---|---|---:|---:|---:|")
for n, xs in times.items():
    xs.sort()
    print(f"| {n} | {a.strategy} | {pct(xs, 50):.1f} | {pct(xs, 95):.1f} | {len(xs)} |")
first = bins[0][0]
for n, _ in bins[1:]:
    same = sum(x == y for x, y in zip(answers[first], answers[n]))
    print(f"packs identical to {first}'s: {n} {same}/{len(answers[n])}")
