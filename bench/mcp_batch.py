#!/usr/bin/env python3
"""A fixed batch of MCP tool calls answered by one `canopy mcp` process.

Used by bench/moves.sh to count the instructions of the query path without
process start-up dominating: the server is started once (under whatever
command prefix is given, e.g. valgrind), sent the MCP handshake and then
each call of the batch in turn (the next one only after the previous one's
answer), and stopped by closing its stdin.

Two modes:

  mcp_batch.py calls DB REPO > calls.json
      writes the batch for REPO from its index DB (REPO/.canopy/index.db):
      the ten most-used reference names the repository defines (bench/query.sh's
      pick, kept to defined names), and
      for each a symbol query, a text query, an evidence pack, callers and
      references, plus three context packs. Make it once and give the same
      file to both sides of a comparison, so both answer the same questions.

  mcp_batch.py run --calls calls.json --answers OUT -- CMD...
      starts CMD (ending in `canopy mcp --watch false`), runs the batch
      (`--calls FILE`, or an empty batch, `--empty`: the handshake only, the
      start-up to subtract), writes every answer's text, one per line, to
      OUT so two sides can be compared byte for byte, and prints
      "answered N calls".

Python 3 stdlib only.
"""

import argparse
import json
import sqlite3
import subprocess
import sys

QUESTIONS = "how is {a} used together with {b}"


def top_names(db_path, n=10):
    """The n most-used reference names of at least four characters that the
    repository defines (so callers and references have answers)."""
    db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    rows = db.execute(
        "SELECT n.text FROM ref_postings p JOIN ref_names n ON n.id = p.name_id "
        "WHERE length(n.text) > 3 AND n.text IN (SELECT name FROM nodes WHERE node_type IN "
        "('function', 'method', 'class', 'struct', 'trait', 'enum', 'type', 'interface')) "
        "GROUP BY n.text "
        "ORDER BY SUM(p.name_uses) DESC, n.text LIMIT ?",
        (n,),
    ).fetchall()
    return [r[0] for r in rows]


def make_calls(db_path, repo):
    names = top_names(db_path)
    calls = []
    for name in names:
        calls.append(["canopy_query", {"path": repo, "symbol": name}])
        calls.append(["canopy_query", {"path": repo, "pattern": name}])
        calls.append(["canopy_evidence_pack", {"path": repo, "pattern": name}])
        calls.append(["canopy_graph", {"path": repo, "op": "callers", "target": name}])
        calls.append(["canopy_graph", {"path": repo, "op": "references", "target": name}])
    for a, b in zip(names[0:3], names[3:6]):
        calls.append(["canopy_context", {"path": repo, "task": QUESTIONS.format(a=a, b=b)}])
    return calls


class Server:
    """Newline-delimited JSON-RPC over the child's stdin/stdout."""

    def __init__(self, cmd):
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.next_id = 1

    def send(self, msg):
        self.proc.stdin.write(json.dumps(msg) + "\n")
        self.proc.stdin.flush()

    def request(self, method, params):
        rid = self.next_id
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        while True:
            line = self.proc.stdout.readline()
            if not line:
                sys.exit(f"mcp_batch: the server closed stdout before answering {method}")
            msg = json.loads(line)
            if msg.get("id") == rid:  # skip notifications (progress, logging)
                return msg

    def close(self):
        self.proc.stdin.close()
        self.proc.stdout.read()
        return self.proc.wait()


def answer_text(msg):
    """The text an MCP client reads from one answer (or the error)."""
    if "error" in msg:
        return json.dumps(msg["error"], sort_keys=True)
    blocks = msg["result"].get("content", [])
    return "".join(b.get("text", "") for b in blocks)


def run(args):
    calls = [] if args.empty else json.load(open(args.calls))
    server = Server(args.cmd)
    server.request(
        "initialize",
        {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "mcp_batch", "version": "1"}},
    )
    server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    server.request("tools/list", {})
    answers = []
    for name, arguments in calls:
        msg = server.request("tools/call", {"name": name, "arguments": arguments})
        answers.append(answer_text(msg).replace("\n", "\\n"))
    status = server.close()
    if args.answers:
        with open(args.answers, "w") as f:
            f.write("\n".join(answers) + ("\n" if answers else ""))
    if status != 0:
        sys.exit(f"mcp_batch: the server exited with {status}")
    print(f"answered {len(answers)} calls")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="mode", required=True)
    c = sub.add_parser("calls")
    c.add_argument("db")
    c.add_argument("repo")
    r = sub.add_parser("run")
    r.add_argument("--calls")
    r.add_argument("--empty", action="store_true")
    r.add_argument("--answers")
    r.add_argument("cmd", nargs="+")
    args = ap.parse_args()
    if args.mode == "calls":
        json.dump(make_calls(args.db, args.repo), sys.stdout, indent=0)
        print()
    else:
        if not args.empty and not args.calls:
            ap.error("run needs --calls FILE or --empty")
        run(args)


if __name__ == "__main__":
    main()
