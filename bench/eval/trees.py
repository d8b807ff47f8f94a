"""Kept instance trees and their Canopy indexes, shared by stop_calibration.py and context_eval.py.

Layout: ROOT/plain/<instance_id>  a plain tree at the base commit (`git archive`, as the shared
                                   prepare.sh makes it; no history)
        ROOT/git/<instance_id>    a `git clone --shared --no-checkout` of the mirror, checked out
                                   (detached) at the base commit: real history up to it, for the
                                   context pack's `history` strategy (selected by --git-trees)
        ROOT/<kind>/<instance_id>.stamp   which binary (sha1) and model last indexed the tree
        ROOT/git/<instance_id>.lean    the tree is kept lean: only `.git/` and `.canopy/` stay, the
                                   checked-out files are deleted and restored (`git checkout -f`)
                                   when the tree is next used; Canopy's index does not change by it
                                   (a file is judged by its content, so the restored files are fresh)
A git tree kept with --keep is kept lean (a django tree: 34 MB instead of 94); --keep-full keeps
the files too. Plain trees are kept whole.
The mirrors are only read. The index lives in the tree (`.canopy/`), so a tree kept with --keep is
re-indexed only when another binary or model comes along: `canopy index` is incremental and a
binary with a new index schema rebuilds the index itself; with the same binary and model the
explicit index step is skipped.
"""
import hashlib, json, os, shutil, subprocess, time

SHARED = os.environ.get("EVAL_SHARED", "/work/shared/eval")
DEFAULT_ROOT = os.path.join(os.environ.get("EVAL_WORK", "/work/eval-data/trees"), "kept")


def mirror(inst, mirror_root=None):
    mirror_root = mirror_root or os.environ.get("MIRROR_ROOT")
    if not mirror_root:
        raise SystemExit("set MIRROR_ROOT to the folder holding <subdir>/repo mirrors (see bench/eval/README.md)")
    repos = json.load(open(os.path.join(SHARED, "repos.json")))
    return os.path.join(mirror_root, repos[inst["repo"]]["subdir"], "repo")


def tree_path(root, inst, git):
    return os.path.join(root, "git" if git else "plain", inst["instance_id"])


def materialise(inst, root, git):
    """The instance's tree (made if missing); returns (path, seconds spent making it)."""
    tree = tree_path(root, inst, git)
    ok = os.path.join(tree, ".git") if git else os.path.join(tree, ".prepared")
    if os.path.exists(ok):
        if git and os.path.exists(tree + ".lean"):
            t0 = time.time()
            restore(tree)
            return tree, time.time() - t0
        return tree, 0.0
    t0 = time.time()
    shutil.rmtree(tree, ignore_errors=True)
    os.makedirs(os.path.dirname(tree), exist_ok=True)
    if git:
        subprocess.run(["git", "clone", "-q", "--shared", "--no-checkout", mirror(inst), tree], check=True)
        subprocess.run(["git", "-C", tree, "checkout", "-q", "--detach", inst["base_commit"]], check=True)
    else:
        # the shared prepare.sh, unchanged: git archive of the base commit (blobs a mirror lacks left out)
        mirror(inst)  # checks MIRROR_ROOT
        subprocess.run(["bash", os.path.join(SHARED, "prepare.sh"), os.path.dirname(tree), "--instances",
                        os.path.join(SHARED, "instances_dev.jsonl"), inst["instance_id"]],
                       check=True, stdout=subprocess.DEVNULL)
    return tree, time.time() - t0


def binary_id(bin_):
    h = hashlib.sha1()
    with open(bin_, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()[:12]


def ensure_index(bin_, tree, model=None, bin_sha=None):
    """Index the tree unless this binary+model already did; returns seconds spent (0 when skipped)."""
    stamp = tree + ".stamp"
    want = f"{bin_sha or binary_id(bin_)} {model or '-'}"
    if os.path.exists(stamp) and open(stamp).read().strip() == want \
            and os.path.exists(os.path.join(tree, ".canopy")):
        return 0.0
    t0 = time.time()
    args = [bin_] + (["--model", model] if model else []) + ["index", tree, "--quiet"]
    p = subprocess.run(args, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"canopy index {tree}: {p.stderr[-400:]}")
    with open(stamp, "w") as f:
        f.write(want + "\n")
    return time.time() - t0


def indexed_by(bin_sha, tree, model=None):
    """True when this binary and model last indexed the tree (so a run can skip the index step)."""
    stamp = tree + ".stamp"
    return os.path.exists(stamp) and open(stamp).read().strip() == f"{bin_sha} {model or '-'}"


def lean(tree):
    """Delete a git tree's checked-out files, keeping .git/ and .canopy/ (restore() brings them back)."""
    if not os.path.isdir(os.path.join(tree, ".git")) or os.path.exists(tree + ".lean"):
        return
    open(tree + ".lean", "w").close()
    for name in os.listdir(tree):
        if name in (".git", ".canopy"):
            continue
        p = os.path.join(tree, name)
        if os.path.isdir(p) and not os.path.islink(p):
            shutil.rmtree(p)
        else:
            os.remove(p)


def restore(tree):
    # files a mirror lacks (a few large data blobs) stay missing, as at the first checkout
    subprocess.run(["git", "-C", tree, "checkout", "-q", "-f", "HEAD"], stderr=subprocess.DEVNULL)
    os.remove(tree + ".lean")


def release(root, inst, git, keep, existed):
    """After an instance: keep the tree (lean for git trees unless keep == "full"), or drop it."""
    if keep == "full":
        return
    if keep:
        if git:
            lean(tree_path(root, inst, git))
        return
    if not existed:
        drop(root, inst, git)


def drop(root, inst, git):
    tree = tree_path(root, inst, git)
    shutil.rmtree(tree, ignore_errors=True)
    for extra in (tree + ".stamp", tree + ".lean"):
        if os.path.exists(extra):
            os.remove(extra)


if __name__ == "__main__":
    # trees.py lean ROOT RESULTS.jsonl...: make lean the git trees of instances present in every results file
    import sys
    if len(sys.argv) < 4 or sys.argv[1] != "lean":
        raise SystemExit("usage: trees.py lean ROOT RESULTS.jsonl...")
    done = None
    for f in sys.argv[3:]:
        ids = {json.loads(l)["instance_id"] for l in open(f) if l.strip()}
        done = ids if done is None else done & ids
    n = 0
    for iid in sorted(done or ()):
        t = os.path.join(sys.argv[2], "git", iid)
        if os.path.isdir(os.path.join(t, ".git")) and not os.path.exists(t + ".lean"):
            lean(t); n += 1
    print(f"{n} trees made lean")
