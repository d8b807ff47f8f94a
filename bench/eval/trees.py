"""Kept instance trees and their Canopy indexes, shared by stop_calibration.py and context_eval.py.

Layout: ROOT/plain/<instance_id>  a plain tree at the base commit (`git archive`, as the shared
                                   prepare.sh makes it; no history)
        ROOT/git/<instance_id>    a `git clone --shared --no-checkout` of the mirror, checked out
                                   (detached) at the base commit: real history up to it, for the
                                   context pack's `history` strategy (selected by --git-trees)
        ROOT/<kind>/<instance_id>.stamp   which binary (sha1) and model last indexed the tree
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


def drop(root, inst, git):
    tree = tree_path(root, inst, git)
    shutil.rmtree(tree, ignore_errors=True)
    for extra in (tree + ".stamp",):
        if os.path.exists(extra):
            os.remove(extra)
