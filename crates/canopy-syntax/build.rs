//! Writes the `o200k_base` vocabulary as a lookup table that
//! `src/tokens/vocab.rs` reads straight from the binary.
//!
//! The tokens come from the `bpe-openai` crate (its `o200k_base` tokenizer,
//! whose token ids are the ranks of OpenAI's vocabulary). At run time the
//! token counter only needs to know whether a byte string is a token and
//! its rank, so it uses this table instead of loading `bpe-openai`'s full
//! tokenizer, which takes ~80 ms of CPU and tens of MB in every process.
//!
//! Layout (all integers u32, little-endian):
//! `[TABLE_MAGIC, tokens, slot_bits, blob_bytes]`, then `tokens + 1` offsets
//! into the blob (token `r` is `blob[offsets[r]..offsets[r + 1]]`), then
//! `2^slot_bits` hash slots (`rank + 1`, 0 = empty; open addressing with
//! linear probing from the top `slot_bits` bits of the token's xxh3-64),
//! then the blob of all token bytes.

use std::collections::HashSet;
use std::path::PathBuf;

use xxhash_rust::xxh3::xxh3_64;

/// Must match `TABLE_MAGIC` in src/tokens/vocab.rs.
const TABLE_MAGIC: u32 = 0x3162_7463; // "ctb1"

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    let bpe = &bpe_openai::o200k_base().bpe;
    let tokens = bpe.num_tokens();
    // At most half full, so that a miss ends after a probe or two.
    let slot_bits = (2 * tokens).next_power_of_two().trailing_zeros();
    let mask = (1usize << slot_bits) - 1;

    let mut offsets: Vec<u32> = Vec::with_capacity(tokens + 1);
    let mut blob: Vec<u8> = Vec::new();
    let mut slots = vec![0u32; 1 << slot_bits];
    let mut distinct = HashSet::new();
    for rank in 0..tokens as u32 {
        let bytes = bpe.token_bytes(rank);
        assert!(distinct.insert(bytes), "token {rank} appears twice");
        offsets.push(blob.len() as u32);
        blob.extend_from_slice(bytes);
        let mut slot = (xxh3_64(bytes) >> (64 - slot_bits)) as usize;
        while slots[slot] != 0 {
            slot = (slot + 1) & mask;
        }
        slots[slot] = rank + 1;
    }
    offsets.push(blob.len() as u32);

    let mut out: Vec<u8> = Vec::new();
    for word in [TABLE_MAGIC, tokens as u32, slot_bits, blob.len() as u32]
        .into_iter()
        .chain(offsets)
        .chain(slots)
    {
        out.extend_from_slice(&word.to_le_bytes());
    }
    out.extend_from_slice(&blob);
    let path = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"))
        .join("o200k_base.table");
    std::fs::write(&path, out).expect("OUT_DIR is writable");
}
