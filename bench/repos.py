"""Generated git repositories for the bench scripts: `gen_repo.py` trees,
each committed once on `main`, so that every script measures the same
deterministic repositories (repository i is generated with seed i)."""

import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def _run(cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True)


def make_git_repos(work, count, files):
    """Generates `count` repositories of `files` source files each under
    `work/src/repoNNN`, each a git repository with one commit; returns their
    paths."""
    roots = []
    for i in range(count):
        src = os.path.join(work, "src", f"repo{i:03d}")
        _run([sys.executable, os.path.join(HERE, "gen_repo.py"), "--files", str(files),
              "--seed", str(i), src])
        git = ["git", "-C", src, "-c", "user.name=bench", "-c", "user.email=bench@example.invalid"]
        _run(["git", "-C", src, "init", "--quiet", "-b", "main"])
        _run(git + ["add", "-A"])
        _run(git + ["commit", "--quiet", "-m", "initial"])
        roots.append(src)
    return roots
