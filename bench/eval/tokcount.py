"""o200k_base token counts of text an agent receives (the tokenizer Canopy's token_count uses).

Needs `tiktoken` (`python3 -m venv V && V/bin/pip install tiktoken`; run the eval scripts with
V/bin/python). tiktoken fetches the o200k_base table over the network on first use; where that is not
possible, the same table is read from a local file: $O200K_BPE (a `.tiktoken` or `.tiktoken.gz`
file), else the copy the `bpe-openai` crate ships in the cargo registry (Canopy's own build
dependency). The file is checked against tiktoken's published sha256 before use.

  count(text) -> int or None    (None: no tokenizer available; callers report bytes only)
"""
import glob, gzip, hashlib, os, sys

O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
_enc = False  # False: not tried yet; None: unavailable


def _local_table():
    cands = [os.environ.get("O200K_BPE", "")]
    home = os.path.expanduser(os.environ.get("CARGO_HOME", "~/.cargo"))
    cands += sorted(glob.glob(os.path.join(home, "registry/src/*/bpe-openai-*/data/o200k_base.tiktoken.gz")))
    for p in cands:
        if p and os.path.exists(p):
            raw = open(p, "rb").read()
            if p.endswith(".gz"):
                raw = gzip.decompress(raw)
            if hashlib.sha256(raw).hexdigest() == O200K_SHA256:
                return raw
    return None


def encoding():
    global _enc
    if _enc is not False:
        return _enc
    _enc = None
    try:
        import tiktoken
        import tiktoken_ext.openai_public as op
    except ImportError:
        print("tokcount: tiktoken not installed; token counts of whole responses are left out", file=sys.stderr)
        return None
    raw = _local_table()
    if raw is not None:
        import base64
        ranks = {}
        for line in raw.splitlines():
            if line:
                tok, rank = line.split()
                ranks[base64.b64decode(tok)] = int(rank)
        orig = op.load_tiktoken_bpe
        op.load_tiktoken_bpe = lambda *a, **k: ranks
        try:
            spec = op.o200k_base()
        finally:
            op.load_tiktoken_bpe = orig
        _enc = tiktoken.Encoding(**{k: spec[k] for k in ("name", "pat_str", "mergeable_ranks", "special_tokens")})
        return _enc
    try:
        _enc = tiktoken.get_encoding("o200k_base")
    except Exception as e:  # no network and no local table
        print(f"tokcount: o200k_base unavailable ({e}); token counts of whole responses are left out", file=sys.stderr)
    return _enc


def count(text):
    enc = encoding()
    if enc is None:
        return None
    return len(enc.encode(text, disallowed_special=()))
