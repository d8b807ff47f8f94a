#!/usr/bin/env python3
"""How often a function named by a traceback frame in an issue is the function the fix touches.

For each instance of a split whose issue text holds a Python traceback (frame lines
`File "a/b.py", line 3, in f` or IPython's `File a/b.py:3, in f(x)`; a traceback ends at
`Traceback (most recent call last)` or an exception line such as `IndexError: ...`), the frames
whose file is in the repository at the base commit (the frame's path ends with a tracked path
that has a directory; `git ls-tree` of the mirror) are split into the innermost such frame of
each traceback and the outer ones, and each (file, function) counted once per traceback. A frame
is gold when a gold function of the instance has that file and that last name part. The pack's
stop rule reads no names from frame lines (crates/canopy-core/src/pack.rs, `without_frames`):
this is the measurement behind it.

  traceback_frames.py [--split tune|report|IDS.txt] [--ids]      (needs MIRROR_ROOT)
"""
import argparse, json, os, re, subprocess, sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import splits  # noqa: E402

SHARED = os.environ.get("EVAL_SHARED", "/work/shared/eval")
FRAME = re.compile(r'^\s*File\s+"?([^",:]+?)"?(?:, line \d+|:\d+), in ([\w.<>]+)')
EXC = re.compile(r"^\s*[A-Za-z_][\w.]*(Error|Exception|Warning|Exit|Interrupt|StopIteration)\b")


def tracebacks(text):
    """Each traceback's frames, outermost first, as (path, function)."""
    tbs, cur = [], []
    for line in text.replace("\r", "").split("\n"):
        m = FRAME.match(line)
        if m:
            cur.append((m.group(1).replace("\\", "/"), m.group(2)))
            continue
        if "Traceback (most recent call last)" in line or EXC.match(line):
            if cur:
                tbs.append(cur)
            cur = []
    if cur:
        tbs.append(cur)
    return tbs


def last_name(n):
    return n.split(".")[-1].split("(")[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--split", default="tune")
    ap.add_argument("--ids", action="store_true")
    a = ap.parse_args()
    mirror_root = os.environ.get("MIRROR_ROOT")
    if not mirror_root:
        raise SystemExit("set MIRROR_ROOT (see README.md)")
    repos = json.load(open(os.path.join(SHARED, "repos.json")))
    counts = {"innermost": [0, 0], "outer": [0, 0]}
    with_tb = 0
    insts = splits.instances(a.split)
    for inst in insts:
        tbs = tracebacks(inst["query"])
        if not tbs:
            continue
        with_tb += 1
        mirror = os.path.join(mirror_root, repos[inst["repo"]]["subdir"], "repo")
        tracked = set(subprocess.run(["git", "-C", mirror, "ls-tree", "-r", "--name-only", inst["base_commit"]],
                                     capture_output=True, text=True, check=True).stdout.split("\n"))

        def in_repo(path):
            parts = path.split("/")
            for i in range(len(parts) - 1):
                tail = "/".join(parts[i:])
                if tail in tracked:
                    return tail
            return None

        gold = {(g.split("::")[0], last_name(g.split("::")[-1])) for g in inst.get("gold_functions") or []}
        for tb in tbs:
            frames = [(in_repo(p), last_name(f)) for p, f in tb]
            frames = [f for f in frames if f[0]]
            seen = set()
            for i, f in enumerate(frames):
                if f in seen:
                    continue
                seen.add(f)
                kind = "innermost" if i == len(frames) - 1 else "outer"
                counts[kind][0] += 1
                counts[kind][1] += f in gold
                if a.ids and f in gold:
                    print(f"  gold {kind}: {inst['instance_id']} {f[0]}::{f[1]}")
    print(f"{len(insts)} instances, {with_tb} with a traceback")
    for kind, (n, g) in counts.items():
        print(f"{kind:9s} frames in the repository {n:4d}, the fixed function {g:3d} ({g / max(1, n):.3f})")


if __name__ == "__main__":
    main()
