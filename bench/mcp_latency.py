#!/usr/bin/env python3
"""Per-call latency of the MCP stdio server (`canopy mcp`) on an indexed repo.

Starts `canopy mcp` once, performs the MCP handshake over newline-delimited
JSON-RPC on stdio, runs a few warm-up calls, then times N sequential
`tools/call` requests of each kind:

  * symbol   -- canopy_query {path, symbol}         (names vary per call)
  * pattern  -- canopy_query {path, pattern}        (words vary per call)
  * pack     -- canopy_evidence_pack {path, pattern} (natural-language question)

Latency is wall time from writing the request line to reading its response
line, measured in this process (so it includes pipe I/O and JSON encoding on
both sides). Prints p50/p95/max per kind as a markdown table.

Python 3 stdlib only. Example:

    target/release/canopy index ~/.cache/canopy-bench/synth --quiet
    python3 bench/mcp_latency.py --repo ~/.cache/canopy-bench/synth -n 100
"""

import argparse
import json
import os
import random
import re
import select
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_BIN = os.path.join(os.path.dirname(HERE), "target", "release", "canopy")

# Definitions in the languages of the synthetic repo.
SYMBOL_RES = {
    ".py": re.compile(r"^\s*(?:def|class)\s+([A-Za-z_][A-Za-z0-9_]{3,})", re.M),
    ".rs": re.compile(r"^\s*(?:pub(?:\([a-z]+\))?\s+)?(?:fn|struct|enum|trait)\s+([A-Za-z_][A-Za-z0-9_]{3,})", re.M),
    ".go": re.compile(r"^func\s+(?:\([^)]*\)\s*)?([A-Za-z_][A-Za-z0-9_]{3,})", re.M),
    ".ts": re.compile(r"^\s*(?:export\s+)?(?:async\s+)?(?:function|class|interface)\s+([A-Za-z_][A-Za-z0-9_]{3,})", re.M),
}
SYMBOL_RES[".tsx"] = SYMBOL_RES[".ts"]
SYMBOL_RES[".js"] = SYMBOL_RES[".ts"]

PATTERNS = [
    "invoice", "refund", "ledger", "quota", "envelope", "subscription", "tenant",
    "retry", "timeout", "checksum", "payload", "cursor", "snapshot", "deadline",
    "shared between threads", "wire format", "idempotent", "rate limit",
    "backoff", "migration", "session", "token", "cache", "archive", "mapping",
]

QUESTIONS = [
    "how is an invoice refund processed",
    "where is the rate limit for the payment gateway enforced",
    "what happens when a subscription token expires",
    "how are ledger segments archived",
    "where is the retry backoff for failed jobs configured",
    "how does the cache invalidate stale entries",
    "which module parses the wire format of the import",
    "how are tenant quotas checked before a request",
    "where are envelope quotas computed",
    "how is a deployment route endpoint resolved",
    "what validates the checksum of an uploaded snapshot",
    "how does the monitor report payment status",
]


def collect_symbols(repo, limit_files=3000, seed=1):
    """Definition names found by regex in up to `limit_files` tracked files."""
    files = subprocess.run(["git", "-C", repo, "ls-files"], capture_output=True,
                           text=True, check=True).stdout.split()
    rng = random.Random(seed)
    rng.shuffle(files)
    names = set()
    for rel in files[:limit_files]:
        rx = SYMBOL_RES.get(os.path.splitext(rel)[1])
        if rx is None:
            continue
        try:
            with open(os.path.join(repo, rel), encoding="utf-8", errors="replace") as f:
                names.update(rx.findall(f.read(200_000)))
        except OSError:
            pass
    names.discard("__init__")
    return sorted(names)


class McpClient:
    def __init__(self, argv, timeout):
        self.timeout = timeout
        self.stderr = open(os.devnull, "wb") if not os.environ.get("BENCH_VERBOSE") else None
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.stderr, bufsize=0)
        self.next_id = 0
        self.buf = b""

    def _send(self, msg):
        self.proc.stdin.write(json.dumps(msg, separators=(",", ":")).encode() + b"\n")
        self.proc.stdin.flush()

    def _readline(self, deadline):
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no response within %.1fs" % self.timeout)
            r, _, _ = select.select([fd], [], [], left)
            if not r:
                continue
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                raise EOFError("canopy mcp closed stdout (exit code %s)" % self.proc.poll())
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line

    def request(self, method, params):
        """Sends a request; returns (response, seconds). Skips notifications."""
        self.next_id += 1
        rid = self.next_id
        t0 = time.perf_counter()
        self._send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        deadline = time.monotonic() + self.timeout
        while True:
            line = self._readline(deadline)
            if not line.strip():
                continue
            msg = json.loads(line)
            if msg.get("id") == rid and ("result" in msg or "error" in msg):
                return msg, time.perf_counter() - t0
            # notifications (progress, logging) or stray messages: ignore

    def notify(self, method, params=None):
        msg = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        self._send(msg)

    def close(self):
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def call_tool(client, name, args):
    """Returns (seconds, error-or-None, result-size-bytes, hits)."""
    resp, secs = client.request("tools/call", {"name": name, "arguments": args})
    if "error" in resp:
        return secs, "jsonrpc error: %s" % json.dumps(resp["error"])[:300], 0, 0
    result = resp["result"]
    text = "".join(c.get("text", "") for c in result.get("content", []))
    if result.get("isError"):
        return secs, "tool error: %s" % text[:300], len(text), 0
    try:
        body = json.loads(text)
        hits = len(body.get("handles") or body.get("files") or [])
    except ValueError:
        hits = 0
    return secs, None, len(text), hits


def pct(sorted_vals, p):
    """Nearest-rank percentile."""
    if not sorted_vals:
        return float("nan")
    k = max(0, min(len(sorted_vals) - 1, int(-(-p * len(sorted_vals) // 100)) - 1))
    return sorted_vals[k]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repo", default=os.path.expanduser("~/.cache/canopy-bench/synth"))
    ap.add_argument("--bin", default=DEFAULT_BIN)
    ap.add_argument("-n", type=int, default=100, help="timed calls per kind (default 100)")
    ap.add_argument("--warmup", type=int, default=3, help="warm-up calls per kind (default 3)")
    ap.add_argument("--timeout", type=float, default=120.0, help="per-call timeout, seconds")
    ap.add_argument("--target-ms", type=float, default=50.0)
    ap.add_argument("--seed", type=int, default=42)
    args = ap.parse_args()

    repo = os.path.realpath(os.path.expanduser(args.repo))
    rng = random.Random(args.seed)
    symbols = collect_symbols(repo, seed=args.seed)
    if not symbols:
        sys.exit("no symbols found in %s" % repo)

    kinds = [
        ("canopy_query symbol", "canopy_query",
         lambda i: {"path": repo, "symbol": rng.choice(symbols)}),
        ("canopy_query pattern", "canopy_query",
         lambda i: {"path": repo, "pattern": PATTERNS[i % len(PATTERNS)]}),
        ("canopy_evidence_pack", "canopy_evidence_pack",
         lambda i: {"path": repo, "pattern": QUESTIONS[i % len(QUESTIONS)]}),
    ]

    client = McpClient([args.bin, "mcp"], args.timeout)
    errors = []
    try:
        t0 = time.perf_counter()
        init, _ = client.request("initialize", {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "bench", "version": "0"}})
        if "error" in init:
            sys.exit("initialize failed: %s" % init["error"])
        client.notify("notifications/initialized")
        handshake_ms = (time.perf_counter() - t0) * 1000

        # Warm-up: the first call opens the engine (and would index an unindexed repo).
        warm = []
        for label, tool, mk in kinds:
            for i in range(args.warmup):
                secs, err, _, _ = call_tool(client, tool, mk(i))
                warm.append((label, secs * 1000))
                if err:
                    errors.append((label + " (warm-up)", err))

        rows = []
        for label, tool, mk in kinds:
            times, sizes, nerr, empty = [], [], 0, 0
            for i in range(args.n):
                secs, err, size, hits = call_tool(client, tool, mk(i))
                empty += hits == 0
                times.append(secs * 1000)
                sizes.append(size)
                if err:
                    nerr += 1
                    if len([e for e in errors if e[0] == label]) < 3:
                        errors.append((label, err))
            times.sort()
            rows.append((label, len(times), nerr, pct(times, 50), pct(times, 95), times[-1],
                         sum(sizes) // max(1, len(sizes)), empty))
    finally:
        client.close()

    print("repo: %s (%d candidate symbols)" % (repo, len(symbols)))
    print("handshake (initialize round trip): %.1f ms; first warm-up call: %.1f ms (%s)"
          % (handshake_ms, warm[0][1], warm[0][0]))
    print()
    print("| call | n | errors | empty results | p50 ms | p95 ms | max ms | avg response bytes | p95 <= %g ms |" % args.target_ms)
    print("|---|---:|---:|---:|---:|---:|---:|---:|:---:|")
    for label, n, nerr, p50, p95, mx, avg, empty in rows:
        print("| %s | %d | %d | %d | %.1f | %.1f | %.1f | %d | %s |"
              % (label, n, nerr, empty, p50, p95, mx, avg, "yes" if p95 <= args.target_ms else "NO"))
    if errors:
        print()
        print("errors (first few per kind):")
        for label, err in errors:
            print("- %s: %s" % (label, err))
    return 1 if any(r[2] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
