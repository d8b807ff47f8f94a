"""Starting `canopy serve` for the bench scripts: the process and the
address it bound, read from its `listening on http://ADDR` stderr line."""

import subprocess
import sys
import threading
import time


def start_serve(cmd, what="canopy serve", timeout=120, log=None):
    """Runs `cmd` (a `canopy … serve --bind 127.0.0.1:0 …` command line) and
    returns (process, "host:port"). Exits with a message when no address is
    printed within `timeout` seconds; stderr is drained afterwards so the
    server never blocks on a full pipe, into `log` (an open text file) when
    given."""
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    addr = None
    deadline = time.time() + timeout
    while time.time() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        if log is not None:
            log.write(line)
            log.flush()
        if "listening on http://" in line:
            addr = line.strip().split("http://", 1)[1]
            break
    if not addr:
        proc.kill()
        sys.exit(f"{what} did not start")

    def drain():
        for line in proc.stderr:
            if log is not None:
                log.write(line)
                log.flush()

    threading.Thread(target=drain, daemon=True).start()
    return proc, addr


def cpu_seconds(pid):
    """CPU seconds (user + system, every thread) the process `pid` has used
    so far, from /proc/PID/stat; None where /proc is not there. Server CPU
    per answered request (the difference over a load phase divided by its
    requests) is the capacity model's per-request cost, and unlike latency
    it barely depends on what else the machine runs."""
    import os
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    # After the command name: state is field 3, utime 14 and stime 15 (1-based).
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
