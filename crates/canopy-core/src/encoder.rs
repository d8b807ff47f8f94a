//! A BERT-family sentence encoder run on the CPU: the whole transformer,
//! not a table (compare [`crate::embed`], the static model).
//!
//! What it computes is what `sentence-transformers` computes for a BERT
//! model with mean pooling (all-MiniLM-L6-v2, bge-small, …): token, position
//! and token-type embeddings, layer norm, then per layer multi-head
//! self-attention, residual + layer norm, an exact-GELU (erf) feed-forward,
//! residual + layer norm; the output tokens are mean-pooled (`[CLS]` and
//! `[SEP]` included) and L2-normalised. `scripts/distill.py` holds the same
//! forward pass in numpy; the tests compare the two.
//!
//! # Cost
//!
//! Dense: about `2 × layers × (4h² + 2hf)` floating-point operations per
//! token (21 MFLOP for MiniLM-L6), so it is a re-ranker of a few dozen
//! short texts, never an indexer of a repository. The matrix products go to
//! `matrixmultiply` (pure Rust, runtime AVX2/FMA detection, optimised with
//! the other dependencies even in the dev profile); the rest (attention
//! softmax, GELU, layer norm) is plain code.
//!
//! # Batches
//!
//! Texts of a batch are not padded: their tokens are stacked into one
//! matrix for the dense layers (rows are independent there), and each
//! text's attention runs over its own rows only, which is exactly what an
//! attention mask over a padded batch gives.
//!
//! # Tokenisation
//!
//! BERT's: lower-cased when the tokenizer's normalizer says so; words are
//! runs of letters and digits, every other visible character is a token of
//! its own; greedy longest-match WordPiece; `[UNK]` for a word it cannot
//! split. Not done: accent stripping (an accented letter is matched as is,
//! and usually falls to `[UNK]`) and CJK character splitting.

use std::path::Path;

use crate::error::{CanopyError, Result};

/// Longest word (in chars) WordPiece splits; longer ones are `[UNK]`.
const MAX_WORD_CHARS: usize = 100;

/// One transformer layer's weights (`[out, in]` row-major, as stored).
struct Layer {
    qkv_w: Vec<f32>,
    qkv_b: Vec<f32>,
    attn_out_w: Vec<f32>,
    attn_out_b: Vec<f32>,
    ln1: (Vec<f32>, Vec<f32>),
    inter_w: Vec<f32>,
    inter_b: Vec<f32>,
    out_w: Vec<f32>,
    out_b: Vec<f32>,
    ln2: (Vec<f32>, Vec<f32>),
}

/// A loaded BERT-family encoder (see the module docs).
pub struct Encoder {
    vocab: crate::embed::Vocab,
    lowercase: bool,
    cls: u32,
    sep: u32,
    unk: u32,
    hidden: usize,
    heads: usize,
    ffn: usize,
    eps: f32,
    max_positions: usize,
    word: Vec<f32>,
    position: Vec<f32>,
    token_type: Vec<f32>,
    emb_ln: (Vec<f32>, Vec<f32>),
    layers: Vec<Layer>,
}

impl std::fmt::Debug for Encoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Encoder")
            .field("hidden", &self.hidden)
            .field("layers", &self.layers.len())
            .field("heads", &self.heads)
            .finish()
    }
}

fn encoder_error(path: &Path, why: impl std::fmt::Display) -> CanopyError {
    CanopyError::Validation(format!(
        "cannot load the encoder at {}: {why} (expected a directory with config.json, \
         tokenizer.json and model.safetensors of a BERT model)",
        path.display()
    ))
}

/// The tensors of a safetensors file, decoded to f32 on request.
struct Tensors {
    header: serde_json::Value,
    data: Vec<u8>,
}

impl Tensors {
    fn read(path: &Path) -> std::result::Result<Tensors, String> {
        let bytes = std::fs::read(path).map_err(|e| format!("model.safetensors: {e}"))?;
        let head_len = bytes
            .get(..8)
            .map(|b| u64::from_le_bytes(b.try_into().unwrap_or_default()) as usize)
            .ok_or("model.safetensors is truncated")?;
        let header = bytes
            .get(8..8usize.saturating_add(head_len))
            .ok_or("model.safetensors header is truncated")?;
        let header: serde_json::Value =
            serde_json::from_slice(header).map_err(|e| format!("model.safetensors header: {e}"))?;
        let data = bytes[8 + head_len..].to_vec();
        Ok(Tensors { header, data })
    }

    /// Tensor `name` (optionally prefixed `bert.`), checked to hold `len` values.
    fn get(&self, name: &str, len: usize) -> std::result::Result<Vec<f32>, String> {
        let prefixed = format!("bert.{name}");
        let info = self
            .header
            .get(name)
            .or_else(|| self.header.get(&prefixed))
            .ok_or_else(|| format!("model.safetensors has no tensor `{name}`"))?;
        let offsets: Vec<usize> = info["data_offsets"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_u64())
                    .map(|v| v as usize)
                    .collect()
            })
            .unwrap_or_default();
        let [start, end] = offsets[..] else {
            return Err(format!("`{name}` has no data offsets"));
        };
        let raw = self
            .data
            .get(start..end)
            .ok_or_else(|| format!("`{name}` lies outside the file"))?;
        let values: Vec<f32> = match info["dtype"].as_str() {
            Some("F32") => raw
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect(),
            Some("F16") => raw
                .chunks_exact(2)
                .map(|c| crate::embed::f16_to_f32(u16::from_le_bytes([c[0], c[1]])))
                .collect(),
            other => return Err(format!("`{name}` has dtype {other:?}; F32 or F16 expected")),
        };
        if values.len() != len {
            return Err(format!("`{name}` holds {} values, not {len}", values.len()));
        }
        Ok(values)
    }

    fn norm(&self, name: &str, h: usize) -> std::result::Result<(Vec<f32>, Vec<f32>), String> {
        Ok((
            self.get(&format!("{name}.weight"), h)?,
            self.get(&format!("{name}.bias"), h)?,
        ))
    }
}

impl Encoder {
    /// Loads a model directory: `config.json` (a BERT config with
    /// `hidden_act: gelu`), `tokenizer.json` (WordPiece) and `model.safetensors`.
    pub fn load(dir: impl AsRef<Path>) -> Result<Encoder> {
        let dir = dir.as_ref();
        let config: serde_json::Value = std::fs::read(dir.join("config.json"))
            .map_err(|e| e.to_string())
            .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
            .map_err(|e| encoder_error(dir, format!("config.json: {e}")))?;
        let size = |k: &str| config[k].as_u64().map(|v| v as usize).filter(|v| *v > 0);
        let (Some(hidden), Some(heads), Some(ffn), Some(layers), Some(max_positions)) = (
            size("hidden_size"),
            size("num_attention_heads"),
            size("intermediate_size"),
            size("num_hidden_layers"),
            size("max_position_embeddings"),
        ) else {
            return Err(encoder_error(dir, "config.json lacks a BERT size"));
        };
        if config["hidden_act"].as_str().unwrap_or("gelu") != "gelu" || hidden % heads != 0 {
            return Err(encoder_error(
                dir,
                "only exact-GELU BERT models are supported",
            ));
        }
        let eps = config["layer_norm_eps"].as_f64().unwrap_or(1e-12) as f32;
        let (vocab, lowercase) = crate::embed::load_vocab(dir)?;
        let special = |t: &str| {
            vocab
                .get(t)
                .ok_or_else(|| encoder_error(dir, format!("the vocabulary has no {t}")))
        };
        let (cls, sep, unk) = (special("[CLS]")?, special("[SEP]")?, special("[UNK]")?);
        let tensors =
            Tensors::read(&dir.join("model.safetensors")).map_err(|e| encoder_error(dir, e))?;
        let rows = vocab.max_id().map_or(0, |m| m as usize + 1);
        let load = || -> std::result::Result<Encoder, String> {
            let word_rows = tensors.header["embeddings.word_embeddings.weight"]["shape"][0]
                .as_u64()
                .or_else(|| {
                    tensors.header["bert.embeddings.word_embeddings.weight"]["shape"][0].as_u64()
                })
                .unwrap_or(0) as usize;
            if word_rows < rows {
                return Err(format!(
                    "{word_rows} token rows for {rows} vocabulary tokens"
                ));
            }
            let t = &tensors;
            Ok(Encoder {
                word: t.get("embeddings.word_embeddings.weight", word_rows * hidden)?,
                position: t.get(
                    "embeddings.position_embeddings.weight",
                    max_positions * hidden,
                )?,
                token_type: t
                    .get("embeddings.token_type_embeddings.weight", 2 * hidden)
                    .or_else(|_| t.get("embeddings.token_type_embeddings.weight", hidden))?
                    [..hidden]
                    .to_vec(),
                emb_ln: t.norm("embeddings.LayerNorm", hidden)?,
                layers: (0..layers)
                    .map(|i| load_layer(t, i, hidden, ffn))
                    .collect::<std::result::Result<_, _>>()?,
                vocab: crate::embed::Vocab::default(),
                lowercase,
                cls,
                sep,
                unk,
                hidden,
                heads,
                ffn,
                eps,
                max_positions,
            })
        };
        let mut encoder = load().map_err(|e| encoder_error(dir, e))?;
        encoder.vocab = vocab;
        Ok(encoder)
    }

    /// Output dimensions.
    pub fn dim(&self) -> usize {
        self.hidden
    }

    /// Token ids of a text, `[CLS] … [SEP]`, at most `max_len` of them
    /// (the text's end is cut; `max_len` is capped by the model's positions).
    pub fn tokenize(&self, text: &str, max_len: usize) -> Vec<u32> {
        let max_len = max_len.clamp(2, self.max_positions);
        let mut ids = vec![self.cls];
        let mut word = String::new();
        let flush = |word: &mut String, ids: &mut Vec<u32>| {
            if !word.is_empty() {
                self.wordpiece(word, ids);
                word.clear();
            }
        };
        for c in text.chars() {
            if ids.len() >= max_len {
                break;
            }
            if c.is_alphanumeric() {
                if self.lowercase {
                    word.extend(c.to_lowercase());
                } else {
                    word.push(c);
                }
                continue;
            }
            flush(&mut word, &mut ids);
            if !c.is_whitespace() && !c.is_control() {
                self.wordpiece(&c.to_string(), &mut ids);
            }
        }
        flush(&mut word, &mut ids);
        ids.truncate(max_len - 1);
        ids.push(self.sep);
        ids
    }

    /// Greedy longest-match-first WordPiece; `[UNK]` for a word with an
    /// unmatchable part.
    fn wordpiece(&self, word: &str, out: &mut Vec<u32>) {
        if word.chars().count() > MAX_WORD_CHARS {
            out.push(self.unk);
            return;
        }
        match crate::embed::wordpiece_pieces(&self.vocab, word) {
            Some(pieces) => out.extend(pieces),
            None => out.push(self.unk),
        }
    }

    /// The L2-normalised, mean-pooled embeddings of texts, each cut to
    /// `max_len` tokens (`[CLS]` and `[SEP]` included).
    pub fn encode(&self, texts: &[&str], max_len: usize) -> Vec<Vec<f32>> {
        let seqs: Vec<Vec<u32>> = texts.iter().map(|t| self.tokenize(t, max_len)).collect();
        let states = self.token_states(&seqs);
        let h = self.hidden;
        let mut row = 0;
        seqs.iter()
            .map(|s| {
                let mut v = vec![0f32; h];
                for r in row..row + s.len() {
                    for (a, x) in v.iter_mut().zip(&states[r * h..(r + 1) * h]) {
                        *a += x;
                    }
                }
                row += s.len();
                let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
                v.iter_mut().for_each(|x| *x /= norm);
                v
            })
            .collect()
    }

    /// The last layer's output for every token of every sequence, stacked:
    /// `[Σ len, hidden]` row-major.
    pub fn token_states(&self, seqs: &[Vec<u32>]) -> Vec<f32> {
        let h = self.hidden;
        let n: usize = seqs.iter().map(Vec::len).sum();
        let mut x = Vec::with_capacity(n * h);
        for s in seqs {
            for (p, &id) in s.iter().enumerate() {
                let w = &self.word[id as usize * h..(id as usize + 1) * h];
                let pos = &self.position[p * h..(p + 1) * h];
                x.extend(
                    w.iter()
                        .zip(pos)
                        .zip(&self.token_type)
                        .map(|((a, b), c)| a + b + c),
                );
            }
        }
        layer_norm(&mut x, &self.emb_ln, h, self.eps);
        let spans = spans_of(seqs);
        for layer in &self.layers {
            self.layer_forward(layer, &mut x, n, &spans);
        }
        x
    }

    fn layer_forward(&self, l: &Layer, x: &mut [f32], n: usize, spans: &[(usize, usize)]) {
        let h = self.hidden;
        let qkv = linear(x, n, h, &l.qkv_w, &l.qkv_b, 3 * h);
        let ctx = self.attention(&qkv, n, spans);
        let mut y = linear(&ctx, n, h, &l.attn_out_w, &l.attn_out_b, h);
        y.iter_mut().zip(x.iter()).for_each(|(a, b)| *a += b);
        layer_norm(&mut y, &l.ln1, h, self.eps);
        let mut inter = linear(&y, n, h, &l.inter_w, &l.inter_b, self.ffn);
        inter.iter_mut().for_each(|v| *v = gelu(*v));
        let mut out = linear(&inter, n, self.ffn, &l.out_w, &l.out_b, h);
        out.iter_mut().zip(&y).for_each(|(a, b)| *a += b);
        layer_norm(&mut out, &l.ln2, h, self.eps);
        x.copy_from_slice(&out);
    }

    /// Multi-head self-attention of each span over itself; `qkv` is
    /// `[n, 3h]` (queries, keys, values side by side).
    fn attention(&self, qkv: &[f32], n: usize, spans: &[(usize, usize)]) -> Vec<f32> {
        let h = self.hidden;
        let hd = h / self.heads;
        let scale = 1.0 / (hd as f32).sqrt();
        let mut ctx = vec![0f32; n * h];
        for &(start, len) in spans {
            let mut scores = vec![0f32; len * len];
            for head in 0..self.heads {
                let q = &qkv[start * 3 * h + head * hd..];
                let k = &qkv[start * 3 * h + h + head * hd..];
                let v = &qkv[start * 3 * h + 2 * h + head * hd..];
                // scores = scale · Q Kᵀ  ([len, hd] × [hd, len])
                gemm(
                    len,
                    hd,
                    len,
                    scale,
                    q,
                    3 * h,
                    1,
                    k,
                    1,
                    3 * h,
                    0.0,
                    &mut scores,
                    len,
                );
                for row in scores.chunks_exact_mut(len) {
                    softmax(row);
                }
                let out = &mut ctx[start * h + head * hd..];
                gemm(len, len, hd, 1.0, &scores, len, 1, v, 3 * h, 1, 0.0, out, h);
            }
        }
        ctx
    }
}

/// `(first row, rows)` of each sequence in the stacked matrix.
fn spans_of(seqs: &[Vec<u32>]) -> Vec<(usize, usize)> {
    let mut start = 0;
    seqs.iter()
        .map(|s| {
            let span = (start, s.len());
            start += s.len();
            span
        })
        .collect()
}

fn load_layer(t: &Tensors, i: usize, h: usize, ffn: usize) -> std::result::Result<Layer, String> {
    let p = |n: &str| format!("encoder.layer.{i}.{n}");
    let mut qkv_w = Vec::with_capacity(3 * h * h);
    let mut qkv_b = Vec::with_capacity(3 * h);
    for part in ["query", "key", "value"] {
        qkv_w.extend(t.get(&p(&format!("attention.self.{part}.weight")), h * h)?);
        qkv_b.extend(t.get(&p(&format!("attention.self.{part}.bias")), h)?);
    }
    Ok(Layer {
        qkv_w,
        qkv_b,
        attn_out_w: t.get(&p("attention.output.dense.weight"), h * h)?,
        attn_out_b: t.get(&p("attention.output.dense.bias"), h)?,
        ln1: t.norm(&p("attention.output.LayerNorm"), h)?,
        inter_w: t.get(&p("intermediate.dense.weight"), ffn * h)?,
        inter_b: t.get(&p("intermediate.dense.bias"), ffn)?,
        out_w: t.get(&p("output.dense.weight"), h * ffn)?,
        out_b: t.get(&p("output.dense.bias"), h)?,
        ln2: t.norm(&p("output.LayerNorm"), h)?,
    })
}

/// `c = alpha · a b + beta · c` with explicit strides (`a` is `[m, k]`,
/// `b` is `[k, n]`, `c` is `[m, n]` with row stride `ldc`).
#[allow(clippy::too_many_arguments)]
fn gemm(
    m: usize,
    k: usize,
    n: usize,
    alpha: f32,
    a: &[f32],
    rsa: usize,
    csa: usize,
    b: &[f32],
    rsb: usize,
    csb: usize,
    beta: f32,
    c: &mut [f32],
    ldc: usize,
) {
    if m == 0 || n == 0 {
        return;
    }
    // Bounds: the last element each operand's strides reach.
    let last = |rows: usize, cols: usize, rs: usize, cs: usize| (rows - 1) * rs + (cols - 1) * cs;
    assert!(k > 0 && last(m, k, rsa, csa) < a.len() && last(k, n, rsb, csb) < b.len());
    assert!(last(m, n, ldc, 1) < c.len());
    // SAFETY: the asserts above keep every element the strides address
    // inside the slices; `c` is borrowed mutably, so it aliases neither input.
    unsafe {
        matrixmultiply::sgemm(
            m,
            k,
            n,
            alpha,
            a.as_ptr(),
            rsa as isize,
            csa as isize,
            b.as_ptr(),
            rsb as isize,
            csb as isize,
            beta,
            c.as_mut_ptr(),
            ldc as isize,
            1,
        );
    }
}

/// `x w^T + b` for `x` `[n, in]` and `w` `[out, in]` (the stored layout).
fn linear(x: &[f32], n: usize, inp: usize, w: &[f32], b: &[f32], out: usize) -> Vec<f32> {
    let mut y: Vec<f32> = Vec::with_capacity(n * out);
    for _ in 0..n {
        y.extend_from_slice(b);
    }
    gemm(n, inp, out, 1.0, x, inp, 1, w, 1, inp, 1.0, &mut y, out);
    y
}

fn layer_norm(x: &mut [f32], (w, b): &(Vec<f32>, Vec<f32>), h: usize, eps: f32) {
    for row in x.chunks_exact_mut(h) {
        let mean = row.iter().map(|v| f64::from(*v)).sum::<f64>() / h as f64;
        let var = row
            .iter()
            .map(|v| (f64::from(*v) - mean).powi(2))
            .sum::<f64>()
            / h as f64;
        let inv = 1.0 / (var + f64::from(eps)).sqrt();
        for ((v, w), b) in row.iter_mut().zip(w).zip(b) {
            *v = ((f64::from(*v) - mean) * inv) as f32 * w + b;
        }
    }
}

fn softmax(row: &mut [f32]) {
    let max = row.iter().fold(f32::NEG_INFINITY, |m, v| m.max(*v));
    let mut sum = 0.0;
    for v in row.iter_mut() {
        *v = (*v - max).exp();
        sum += *v;
    }
    row.iter_mut().for_each(|v| *v /= sum);
}

/// The exact GELU, `x Φ(x)`, with erf by Abramowitz & Stegun 7.1.26
/// (|error| ≤ 1.5e-7, below f32 resolution of the result).
fn gelu(x: f32) -> f32 {
    let z = x * std::f32::consts::FRAC_1_SQRT_2;
    let a = z.abs();
    let t = 1.0 / (1.0 + 0.327_591_1 * a);
    let poly = t
        * (0.254_829_6
            + t * (-0.284_496_74 + t * (1.421_413_7 + t * (-1.453_152 + t * 1.061_405_4))));
    let erf = (1.0 - poly * (-a * a).exp()).copysign(z);
    0.5 * x * (1.0 + erf)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The full all-MiniLM-L6-v2 (`CANOPY_TEST_MODEL`, made by
    /// `scripts/get-model.sh --raw`); `None` skips, unless `CANOPY_REQUIRE_MODEL=1`.
    fn model() -> Option<Encoder> {
        let Some(dir) = std::env::var_os("CANOPY_TEST_MODEL") else {
            assert!(
                std::env::var("CANOPY_REQUIRE_MODEL").as_deref() != Ok("1"),
                "CANOPY_REQUIRE_MODEL=1 but CANOPY_TEST_MODEL is not set"
            );
            eprintln!("skipped: CANOPY_TEST_MODEL is not set");
            return None;
        };
        Some(Encoder::load(dir).expect("CANOPY_TEST_MODEL is not a BERT model directory"))
    }

    fn cosine(a: &[f32], b: &[f32]) -> f32 {
        a.iter().zip(b).map(|(x, y)| x * y).sum()
    }

    #[test]
    fn sentence_pairs_score_as_the_numpy_reference() {
        let Some(m) = model() else { return };
        // `scripts/distill.py --check` (numpy, f32) on the same pairs.
        let pairs = [
            (
                "A man is eating food.",
                "A man is eating a piece of bread.",
                0.755_337,
            ),
            (
                "check the password when a user logs in",
                "verify the credentials of an account",
                0.600_631,
            ),
        ];
        for (a, b, want) in pairs {
            let v = m.encode(&[a, b], 128);
            let got = cosine(&v[0], &v[1]);
            assert!((got - want).abs() < 1e-3, "{a:?} ~ {b:?}: {got} vs {want}");
        }
        assert_eq!(
            m.tokenize("A man is eating a piece of bread.", 128),
            [
                101, 1037, 2158, 2003, 5983, 1037, 3538, 1997, 7852, 1012, 102
            ]
        );
    }

    #[test]
    fn token_states_match_the_numpy_reference_alone_and_in_a_batch() {
        let Some(m) = model() else { return };
        let text = "Parse the config_file, then retry!";
        let ids = m.tokenize(text, 64);
        assert_eq!(
            ids,
            [
                101, 11968, 3366, 1996, 9530, 8873, 2290, 1035, 5371, 1010, 2059, 2128, 11129, 999,
                102
            ]
        );
        // The first six output values of tokens 0, 4, 8 and 14, from the
        // numpy forward pass of `scripts/distill.py`.
        let want: [(usize, [f32; 6]); 4] = [
            (0, [0.1042, -0.1415, -0.1318, 0.0032, 0.1555, -0.1700]),
            (4, [0.4918, -0.2439, -0.9098, -0.1394, 0.3528, -0.1059]),
            (8, [0.2903, 0.3585, -0.4000, -1.0003, 0.4961, 0.1071]),
            (14, [0.3501, -0.1984, -0.6085, -0.3557, 0.4473, -0.7243]),
        ];
        let h = m.dim();
        // Alone, then after a longer text in one batch: each text attends
        // to its own tokens only, so the states are the same.
        let longer = m.tokenize(
            "A man is eating a piece of bread, and a monkey plays drums.",
            64,
        );
        let alone = m.token_states(std::slice::from_ref(&ids));
        let batch = m.token_states(&[longer.clone(), ids.clone()]);
        let batched = &batch[longer.len() * h..];
        for states in [&alone[..], batched] {
            for (tok, values) in &want {
                for (i, w) in values.iter().enumerate() {
                    let got = states[tok * h + i];
                    assert!(
                        (got - w).abs() < 1e-3,
                        "token {tok} value {i}: {got} vs {w}"
                    );
                }
            }
        }
        let pooled = m.encode(&[text], 64);
        let norm: f32 = pooled[0].iter().map(|v| v * v).sum();
        assert!((norm - 1.0).abs() < 1e-5);
    }

    #[test]
    fn unknown_words_and_long_texts_tokenize_as_bert() {
        let Some(m) = model() else { return };
        let ids = m.tokenize("zzzqqq\u{2603} ok", 128);
        assert_eq!(ids.first(), Some(&m.cls));
        assert_eq!(ids.last(), Some(&m.sep));
        assert!(ids.contains(&m.unk));
        let long = "word ".repeat(1000);
        assert_eq!(m.tokenize(&long, 32).len(), 32);
        assert_eq!(m.tokenize(&long, 10_000).len(), 512);
    }
}
