#!/usr/bin/env python3
"""One-line edit -> re-indexed, inside a long-lived `canopy watch` (issue 28 item 5).

A watcher keeps the resolver's world between its index runs, so this is the
figure issue 28 item 5 names ("a one-line edit re-indexes in <= 60 ms p50,
<= 100 ms p95"), measured where the kept world lives. For each binary, a
`canopy watch --json` runs on the repository (indexed once beforehand by that
binary, outside the figures); the script then edits N source files one at a
time, each with a one-line change inside the file (a comment appended to an
existing line), waits for the watcher's run to report it, restores the file
and waits for that run too. Each run's `report.duration_ms` is the re-index
time; with `CANOPY_LOG=canopy_core=debug,canopy_graph=debug` the watcher's stderr also gives
where it went (`index run timeline`: written_ms / resolved_ms / merge_ms (the
run's text merging; binaries before the twenty-third session do not log it) / finished_ms,
and the `resolved` line: prepare_ms, rows_ms, world_ms, write_ms).

With several `--bin NAME=PATH` the binaries alternate round by round on the
same edits (each its own watcher and index, started in turn), so load on a
shared machine falls on all of them alike. Prints p50 / p95 / max per binary
and per phase, and the load average at the start and the end.

The repository is edited in place and restored: use a private copy.

Usage:
  bench/edit_reindex.py --repo /tmp/copy-of-django --bin base=/tmp/old --bin new=target/release/canopy
                        [--edits 20] [--rounds 2] [--suffix .py] [--seed 7] [--kind line|function]

`--kind function` appends a one-line function instead (a unit added, and
removed again by the restore).

`--serve` measures the same edits inside `canopy serve` instead: a service
on loopback (its own data directory, no auth) registers the repository with
`watch: true` and the edits' runs are read from its event feed
(`reindex_finished`: `duration_ms`, `files_indexed`); the phases from its
debug log as above. The service builds a watched repository's resolver world
when the watch starts, as a watcher does after its initial run.

`--gap S` is the pause after each run before the next write, the edit's
restore included (default: 0.1 s after a restore only). A watcher merges
the text index its runs left once no event came for half a second
(`watch::IDLE_WORK_AFTER`), so with a gap of a second or more, as between
an agent's edits, the runs find no merging left to do.

`--oneoff` measures the same edits re-indexed by a new process each time,
as an agent without a watcher runs it: after each write (edit or restore)
`canopy --json index REPO` runs to its end; `wall_ms` is the process's wall
time as the script sees it (start to exit: loading the binary, opening the
index and listing the tree included) and `cpu_ms` its user + system CPU
(git's included: a child's children count once they are waited for),
which a loaded machine moves less than wall time; the phases come from its debug log
as above, plus `planned_ms` (listing the tree and comparing it with the
index). Such a process keeps no resolver world: it reads every file's rows.

`--oneoff --paired` gives each binary a copy of the repository of its own
(`REPO.NAME` beside it, made once and left there) and interleaves their
runs write by write: each edit (and each restore) is written to every
copy, then each binary indexes its copy, the order alternating from one
write to the next. Load that comes and goes within a round then falls on
every binary alike; the table adds the median and mean of each run's CPU
time minus the first binary's on the same write.

`--settle S` waits S seconds after the watcher's initial run before the
first edit (default 0: edit at once). A watcher builds the resolver's world
in the background after its initial run (issue 28 item 5); an edit that
comes sooner waits for it, one that comes later finds it built. The table's
`first` column is each round's first edit (its own p50 over the rounds).
"""

import argparse
import json
import os
import random
import re
import resource
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

PHASES = ["planned_ms", "written_ms", "resolve_ms", "prepare_ms", "rows_ms", "world_ms", "write_ms", "merge_ms",
          "finished_ms"]


def percentile(values, p):
    if not values:
        return float("nan")
    s = sorted(values)
    k = min(len(s) - 1, max(0, int(round(p / 100.0 * (len(s) - 1)))))
    return s[k]


def tracked_files(repo, suffix):
    out = subprocess.run(["git", "-C", str(repo), "ls-files", "-z"], capture_output=True, check=True)
    return [p for p in out.stdout.decode().split("\0") if p.endswith(suffix)]


def kv(line):
    """key=value pairs of a tracing line (values are integers here)."""
    return {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)\b", line)}


class Watcher:
    """A `canopy watch --json` on the repository with its debug log parsed."""

    def __init__(self, binary, repo):
        env = dict(os.environ, CANOPY_LOG="canopy_core=debug,canopy_graph=debug", NO_COLOR="1")
        self.proc = subprocess.Popen(
            [binary, "--json", "watch", str(repo)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, bufsize=1)
        self.cycles = []
        self.pending = {}
        self.lock = threading.Condition()
        threading.Thread(target=self._read_stderr, daemon=True).start()
        threading.Thread(target=self._read_stdout, daemon=True).start()

    def _read_stderr(self):
        for line in self.proc.stderr:
            if "index run timeline" in line:
                with self.lock:
                    self.pending.update(kv(line))
            elif re.search(r"\bresolved\b", line) and "prepare_ms" in line:
                d = kv(line)
                with self.lock:
                    self.pending.update({k: d[k] for k in ("prepare_ms", "rows_ms", "world_ms", "write_ms") if k in d})
                    self.pending["resolve_ms"] = d.get("ms", 0)

    def _read_stdout(self):
        for line in self.proc.stdout:
            try:
                cycle = json.loads(line)
            except ValueError:
                continue
            time.sleep(0.02)  # the debug lines of the run come first on stderr; let them land
            with self.lock:
                cycle["phases"] = self.pending
                self.pending = {}
                self.cycles.append(cycle)
                self.lock.notify_all()

    def wait_cycles(self, n, timeout=60.0):
        end = time.time() + timeout
        with self.lock:
            while len(self.cycles) < n:
                left = end - time.time()
                if left <= 0:
                    raise RuntimeError(f"watcher did not report run {n}")
                self.lock.wait(left)
            return self.cycles[n - 1]

    def close(self):
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


class OneOff:
    """Each run a new `canopy --json index` process (no watcher, no kept world)."""

    def __init__(self, binary, repo):
        self.binary, self.repo = binary, repo

    def run(self):
        env = dict(os.environ, CANOPY_LOG="canopy_core=debug,canopy_graph=debug", NO_COLOR="1")
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        proc = subprocess.run([self.binary, "--json", "index", str(self.repo)],
                              capture_output=True, text=True, env=env, check=True)
        wall_ms = (time.perf_counter() - started) * 1000.0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu_ms = ((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)) * 1000.0
        phases = timeline_phases(proc.stderr)
        return {"report": json.loads(proc.stdout), "phases": phases, "wall_ms": wall_ms, "cpu_ms": cpu_ms}


def timeline_phases(log_text):
    """The phases of index runs from their debug lines (the run's timeline,
    then the resolution's parts)."""
    phases = {}
    for line in log_text.splitlines():
        if "index run timeline" in line:
            phases.update(kv(line))
        elif re.search(r"\bresolved\b", line) and "prepare_ms" in line:
            d = kv(line)
            phases.update({k: d[k] for k in ("prepare_ms", "rows_ms", "world_ms", "write_ms") if k in d})
            phases["resolve_ms"] = d.get("ms", 0)
    return phases


def write_edit(path, original, kind, tag, suffix):
    """Writes `path` as `original` with one edit: a new one-line function
    (`kind` "function") or one changed line, marked with `tag`."""
    text = original.decode("utf-8", "replace")
    if kind == "function":
        path.write_text(one_line_function(text, tag, suffix))
    else:
        path.write_text(one_line_edit(text, tag))


def run_oneoff_round(binary, repo, files, salt, kind="line", suffix=".py"):
    """[`run_round`] with a new index process per write (`--oneoff`)."""
    o = OneOff(binary, repo)
    out = []
    for k, rel in enumerate(files):
        path = repo / rel
        original = path.read_bytes()
        try:
            write_edit(path, original, kind, f"{salt}-{k}", suffix)
            out.append(("edit", rel, o.run()))
        finally:
            path.write_bytes(original)
        out.append(("restore", rel, o.run()))
    return out


def run_oneoff_paired(bins, copies, files, salt, kind="line", suffix=".py"):
    """[`run_oneoff_round`] for every binary at once, each on its own copy
    (`--oneoff --paired`): returns each binary's runs in the same order."""
    out = {name: [] for name, _ in bins}
    order = list(bins)
    for k, rel in enumerate(files):
        originals = {name: (copies[name] / rel).read_bytes() for name, _ in bins}
        for what in ("edit", "restore"):
            for name, _ in bins:
                path = copies[name] / rel
                if what == "edit":
                    write_edit(path, originals[name], kind, f"{salt}-{k}", suffix)
                else:
                    path.write_bytes(originals[name])
            for name, binary in order:
                out[name].append((what, rel, OneOff(binary, copies[name]).run()))
            order.reverse()
    return out


class ServeWatcher(Watcher):
    """The repository watched by a `canopy serve` on loopback: the same
    interface as [`Watcher`], each run read from the service's event feed.
    Cycle 1 is the run the registration starts (the index is complete: it
    finds every file unchanged)."""

    def __init__(self, binary, repo):
        import http.client
        import tempfile
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from serve_proc import start_serve  # noqa: E402
        self.http = http.client
        self.data = tempfile.mkdtemp(prefix="canopy-edit-serve-")
        env = dict(os.environ, CANOPY_LOG="canopy_core=debug,canopy_graph=debug", NO_COLOR="1")
        self.cycles = []
        self.pending = {}
        self.lock = threading.Condition()
        cmd = [binary, "serve", "--no-auth", "--bind", "127.0.0.1:0", "--data-dir", self.data,
               "--allow-root", str(repo.parent)]
        log = open(os.path.join(self.data, "serve.log"), "w")
        old_env = os.environ.copy()
        os.environ.update(env)
        try:
            self.proc, self.addr = start_serve(cmd, log=log)
        finally:
            os.environ.clear()
            os.environ.update(old_env)
        self.log_path = os.path.join(self.data, "serve.log")
        status, feed = self.request("GET", "/events?limit=1")
        self.seq = feed.get("latest_seq", 0)
        status, body = self.request("POST", "/repos/add", {"path": str(repo), "watch": True})
        if status not in (200, 201):
            sys.exit(f"POST /repos/add: {status} {body}")
        self.repo_id = body["repo_id"]
        self.log_at = 0
        threading.Thread(target=self._follow, daemon=True).start()

    def request(self, method, path, body=None):
        host, port = self.addr.rsplit(":", 1)
        conn = self.http.HTTPConnection(host, int(port), timeout=120)
        headers = {"Host": f"127.0.0.1:{port}"}
        data = None
        if body is not None:
            data = json.dumps(body)
            headers["Content-Type"] = "application/json"
        conn.request(method, path, body=data, headers=headers)
        resp = conn.getresponse()
        raw = resp.read()
        conn.close()
        try:
            return resp.status, json.loads(raw or b"null")
        except ValueError:
            return resp.status, raw.decode("utf-8", "replace")

    def _phases(self):
        """The phases of the last run, from the debug lines the log gained."""
        with open(self.log_path) as f:
            f.seek(self.log_at)
            text = f.read()
            self.log_at = f.tell()
        return timeline_phases(text)

    def _follow(self):
        while self.proc.poll() is None:
            try:
                status, feed = self.request("GET", f"/events?after_seq={self.seq}&wait=5&limit=100")
            except OSError:
                return
            if status != 200:
                time.sleep(0.1)
                continue
            for e in feed.get("items", []):
                self.seq = max(self.seq, e.get("seq", self.seq))
                if e.get("kind") == "reindex_finished" and e.get("repo_id") == self.repo_id:
                    time.sleep(0.02)  # let the run's debug lines land in the log
                    cycle = {"report": {"duration_ms": e["data"]["duration_ms"],
                                        "files_indexed": e["data"]["files_indexed"]},
                             "phases": self._phases()}
                    with self.lock:
                        self.cycles.append(cycle)
                        self.lock.notify_all()

    def close(self):
        super().close()
        shutil.rmtree(self.data, ignore_errors=True)


def one_line_edit(text, salt):
    """The text with one existing line changed: a comment appended to the
    first line in the middle third that ends a statement."""
    lines = text.split("\n")
    n = len(lines)
    for k in list(range(n // 3, n)) + list(range(0, n // 3)):
        line = lines[k]
        if line.strip() and not line.rstrip().endswith(("\\", ",", "(", "[", "{", ":")) and '"""' not in line and "'''" not in line:
            lines[k] = line + f"  # edit {salt}"
            return "\n".join(lines)
    return text + f"\n# edit {salt}\n"


def one_line_function(text, salt, suffix):
    """The text with one line appended that defines a new function, so the
    edit adds a unit (which the kept world cannot take in place)."""
    name = "canopy_edit_probe_" + re.sub(r"\W", "_", salt)
    line = {
        ".py": f"def {name}(): return 0",
        ".rs": f"fn {name}() {{}}",
        ".go": f"func {name}() {{}}",
        ".ts": f"export function {name}() {{}}",
        ".js": f"function {name}() {{}}",
    }.get(suffix)
    if line is None:
        sys.exit(f"--kind function: no one-line function for {suffix} files")
    return text.rstrip("\n") + "\n\n" + line + "\n"


def run_round(binary, repo, files, salt, kind="line", suffix=".py", settle=0.0, serve=False, gap=None):
    w = ServeWatcher(binary, repo) if serve else Watcher(binary, repo)
    out = []
    try:
        w.wait_cycles(1, timeout=600)  # the initial run: brings the index up to date
        time.sleep(settle)
        n = 1
        for k, rel in enumerate(files):
            path = repo / rel
            original = path.read_bytes()
            try:
                write_edit(path, original, kind, f"{salt}-{k}", suffix)
                n += 1
                c = w.wait_cycles(n)
                out.append(("edit", rel, c))
                if gap is not None:
                    time.sleep(gap)
            finally:
                path.write_bytes(original)
            n += 1
            c = w.wait_cycles(n)
            out.append(("restore", rel, c))
            time.sleep(0.1 if gap is None else gap)
    finally:
        w.close()
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repo", required=True, type=Path)
    ap.add_argument("--bin", action="append", required=True, help="NAME=PATH (repeatable)")
    ap.add_argument("--edits", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--suffix", default=".py")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--kind", choices=["line", "function"], default="line",
                    help="line: a comment appended to an existing line (units kept); "
                         "function: a one-line function appended (a unit added, then removed by the restore)")
    ap.add_argument("--settle", type=float, default=0.0,
                    help="seconds between the watcher's initial run and the first edit (default 0)")
    ap.add_argument("--gap", type=float, default=None,
                    help="seconds after each run before the next write (default: 0.1 s after a restore, none "
                         "after an edit); an agent's edits come seconds apart, and a watcher does its idle "
                         "work (text merging) in between")
    ap.add_argument("--oneoff", action="store_true",
                    help="a new `canopy index` process per write instead of a watcher (wall time of each)")
    ap.add_argument("--paired", action="store_true",
                    help="with --oneoff: each binary on its own copy of REPO, runs interleaved write by write")
    ap.add_argument("--serve", action="store_true",
                    help="measure inside `canopy serve` (a watched repository) instead of `canopy watch`")
    args = ap.parse_args()
    repo = args.repo.resolve()
    bins = [b.split("=", 1) for b in args.bin]
    files = tracked_files(repo, args.suffix)
    random.Random(args.seed).shuffle(files)
    files = files[: args.edits]
    load0 = os.getloadavg()
    front = ("canopy index (one-off, paired copies)" if args.paired else "canopy index (one-off)") if args.oneoff else "canopy serve" if args.serve else "canopy watch"
    print(f"repo {repo}  {front}  kind {args.kind}  edits {len(files)} x 2 (edit, restore)  rounds {args.rounds}  settle {args.settle} s  gap {args.gap if args.gap is not None else 'default'}  load at start {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}")
    results = {name: [] for name, _ in bins}
    firsts = {name: [] for name, _ in bins}
    copies = {}
    if args.paired:
        if not args.oneoff:
            sys.exit("--paired goes with --oneoff")
        for name, _ in bins:
            copies[name] = repo.parent / f"{repo.name}.{name}"
            if not copies[name].exists():
                shutil.copytree(repo, copies[name], symlinks=True, ignore=shutil.ignore_patterns(".canopy"))
    for r in range(args.rounds):
        if args.paired:
            for name, path in bins:
                shutil.rmtree(copies[name] / ".canopy", ignore_errors=True)
                subprocess.run([path, "--quiet", "index", str(copies[name])], check=True, stdout=subprocess.DEVNULL)
            got = run_oneoff_paired(bins, copies, files, f"r{r}", args.kind, args.suffix)
            for name, _ in bins:
                if any(c["report"]["files_indexed"] != 1 for _, _, c in got[name]):
                    print(f"warning: {name}: a run did not index exactly one file", file=sys.stderr)
                results[name].extend(got[name])
                firsts[name].append(got[name][0][2]["report"]["duration_ms"])
            continue
        for name, path in (bins if r % 2 == 0 else list(reversed(bins))):
            # Each binary its own index (the schema may differ): build it first, outside the figures.
            shutil.rmtree(repo / ".canopy", ignore_errors=True)
            subprocess.run([path, "--quiet", "index", str(repo)], check=True, stdout=subprocess.DEVNULL)
            if args.oneoff:
                got = run_oneoff_round(path, repo, files, f"{name}{r}", args.kind, args.suffix)
            else:
                got = run_round(path, repo, files, f"{name}{r}", args.kind, args.suffix, args.settle, args.serve,
                                args.gap)
            bad = [c for _, _, c in got if c["report"]["files_indexed"] != 1]
            if bad:
                print(f"warning: {name}: {len(bad)} run(s) did not index exactly one file", file=sys.stderr)
            results[name].extend(got)
            firsts[name].append(got[0][2]["report"]["duration_ms"])
    load1 = os.getloadavg()
    print(f"load at end {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f}")
    print("| binary | runs | duration_ms p50 | p95 | max | first | wall_ms p50 | p95 | cpu_ms p50 | p95 | "
          + " | ".join(f"{p} p50" for p in PHASES) + " |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|" + "---:|" * len(PHASES))
    for name, _ in bins:
        got = results[name]
        d = [c["report"]["duration_ms"] for _, _, c in got]
        phases = []
        for p in PHASES:
            vals = [c["phases"][p] for _, _, c in got if p in c["phases"]]
            phases.append(f"{statistics.median(vals):.0f}" if vals else "-")
        first = statistics.median(firsts[name])
        walls = []
        for key in ("wall_ms", "cpu_ms"):
            vals = [c[key] for _, _, c in got if key in c]
            walls.append(f"{statistics.median(vals):.0f} | {percentile(vals, 95):.0f}" if vals else "- | -")
        walls = " | ".join(walls)
        print(f"| {name} | {len(d)} | {statistics.median(d):.0f} | {percentile(d, 95):.0f} | {max(d)} | {first:.0f} | "
              + walls + " | " + " | ".join(phases) + " |")
    if args.paired:
        ref = bins[0][0]
        for name, _ in bins[1:]:
            diffs = [c["cpu_ms"] - c0["cpu_ms"] for (_, _, c0), (_, _, c) in zip(results[ref], results[name])]
            print(f"paired cpu_ms {name} - {ref}: median {statistics.median(diffs):.1f} ms, "
                  f"mean {statistics.mean(diffs):.1f} ms over {len(diffs)} writes")


if __name__ == "__main__":
    main()
