#!/usr/bin/env python3
"""Digest of the answers an index gives: one line per question.

Usage: bench/answers_digest.py [--bin CANOPY] [--index] [--corpus NAME] [--show DIR] REPO

Runs a fixed list of CLI questions (`bench/answers_questions.txt`: the
`[*]` section on every repository, the `[NAME]` section on the one named
NAME, by default REPO's folder name) against REPO's index (`--index`:
a cold one built first, REPO/.canopy deleted), then
questions derived from the answers themselves: for the most referenced
definitions (`canopy symbols`), `callers`, `callees`, `references`,
`type-usages`, `detail` and `summary` of their file; and `expand` of the
handles the searches, packs and context packs returned. Each answer is the
command's JSON (`--json`) with what differs between two runs over the same
tree masked: `generation`, `indexed_at`, `last_indexed`, every field ending
in `_ms`, and the index's own size (`index_size_bytes`). Prints the
question, its exit status and a SHA-256 of the masked answer, then one
digest of all the lines. Two builds that must answer the same (a change
that only makes indexing cheaper or the index smaller) print the same lines:
`diff <(bench/answers_digest.py --bin A --index REPO) <(bench/answers_digest.py
--bin B --index REPO)`. `--show DIR` also writes each masked answer to DIR
(one file per question) for a diff. Python standard library only.
"""

import argparse
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
QUESTIONS = os.path.join(HERE, "answers_questions.txt")

# Fields whose value is the time or count of runs, not what the index holds.
MASKED_KEYS = {"generation", "indexed_at", "last_indexed", "index_size_bytes"}
# How many of the most referenced definitions get graph questions.
TOP_SYMBOLS = 12
# Handles expanded per answer that returned handles.
EXPAND_PER_ANSWER = 4


def masked(value):
    if isinstance(value, dict):
        return {
            k: ("<masked>" if k in MASKED_KEYS or k.endswith("_ms") else masked(v))
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [masked(v) for v in value]
    return value


def read_questions(path, corpus):
    """The `[*]` questions and those of section `[corpus]`, in file order."""
    out, section = [], None
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            if line.startswith("[") and line.endswith("]"):
                section = line[1:-1]
                continue
            if section in ("*", corpus):
                out.append(shlex.split(line))
    return out


class Asker:
    def __init__(self, canopy, repo, show):
        self.canopy, self.repo, self.show = canopy, repo, show
        self.lines, self.answers = [], {}

    def ask(self, args):
        """Runs one question; returns its parsed answer (None when not JSON)."""
        key = " ".join(shlex.quote(a) for a in args)
        if key in self.answers:
            return self.answers[key]
        proc = subprocess.run(
            [self.canopy, "--json", "--quiet", "--root", self.repo, *args],
            capture_output=True,
            text=True,
            check=False,
        )
        try:
            answer = masked(json.loads(proc.stdout))
            text = json.dumps(answer, sort_keys=True, ensure_ascii=False)
        except json.JSONDecodeError:
            answer, text = None, proc.stdout
        digest = hashlib.sha256(text.encode()).hexdigest()[:16]
        self.lines.append(f"{key}\t{proc.returncode}\t{digest}")
        self.answers[key] = answer
        if self.show:
            name = hashlib.sha256(key.encode()).hexdigest()[:12]
            with open(os.path.join(self.show, name + ".json"), "w", encoding="utf-8") as f:
                f.write(key + "\n" + text + "\n")
        return answer


def handle_ids(answer):
    """Handle ids in an answer, in the order they appear."""
    found = []

    def walk(v):
        if isinstance(v, dict):
            for k, x in v.items():
                if k in ("id", "handle") and isinstance(x, str) and len(x) == 25 and x[0] == "h":
                    found.append(x)
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)

    walk(answer)
    seen = set()
    return [h for h in found if not (h in seen or seen.add(h))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("repo")
    ap.add_argument("--bin", default=os.environ.get("CANOPY_BIN", "canopy"))
    ap.add_argument("--corpus")
    ap.add_argument("--questions", default=QUESTIONS)
    ap.add_argument("--show")
    ap.add_argument("--index", action="store_true", help="build a cold index of REPO first")
    a = ap.parse_args()
    repo = os.path.abspath(a.repo)
    if a.index:
        shutil.rmtree(os.path.join(repo, ".canopy"), ignore_errors=True)
        subprocess.run([a.bin, "index", "--quiet", "--root", repo], check=True)
    corpus = a.corpus or os.path.basename(repo.rstrip("/"))
    if a.show:
        os.makedirs(a.show, exist_ok=True)
    asker = Asker(a.bin, repo, a.show)
    to_expand = []
    for args in read_questions(a.questions, corpus):
        answer = asker.ask(args)
        if args[0] in ("query", "pack", "context", "search"):
            to_expand.extend(handle_ids(answer)[:EXPAND_PER_ANSWER])
    symbols = asker.ask(["symbols"]) or {}
    files = []
    for entry in (symbols.get("symbols") or [])[:TOP_SYMBOLS]:
        h = entry.get("handle") or {}
        target = entry.get("qualified_name") or h.get("name")
        if not target:
            continue
        for op in ("callers", "callees", "references", "type-usages", "detail"):
            asker.ask([op, target])
        to_expand.append(h.get("id"))
        if h.get("file_path") and h["file_path"] not in files:
            files.append(h["file_path"])
    for path in files:
        asker.ask(["summary", path])
    seen = set()
    for h in to_expand:
        if h and h not in seen:
            seen.add(h)
            asker.ask(["expand", h])
    total = hashlib.sha256("\n".join(asker.lines).encode()).hexdigest()[:16]
    print("\n".join(asker.lines))
    print(f"# {len(asker.lines)} answers, digest {total}")


if __name__ == "__main__":
    sys.exit(main())
