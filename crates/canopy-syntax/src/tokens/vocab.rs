//! The `o200k_base` vocabulary as a table in the binary, and the number of
//! tokens byte-pair encoding splits a pre-tokenization piece into.
//!
//! `build.rs` writes the table (layout documented there) from the
//! `bpe-openai` crate's tokenizer. Reading it needs no start-up work: the
//! operating system pages in the parts a lookup touches.
//!
//! Encoding a piece: start from its single bytes and, while some adjacent
//! pair of parts concatenates to a token, merge the pair whose token has
//! the lowest rank (the leftmost such pair when that token occurs at
//! several places). The parts left are the piece's tokens. This is the
//! rule that defines OpenAI's BPE encodings; the tests check the counts
//! against `bpe-openai`'s own (different) algorithm.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use xxhash_rust::xxh3::xxh3_64;

/// Must match `TABLE_MAGIC` in build.rs.
const TABLE_MAGIC: u32 = 0x3162_7463;
const HEADER_WORDS: usize = 4;

static TABLE: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/o200k_base.table"));

/// The `index`-th little-endian u32 of the table.
#[inline]
fn word(index: usize) -> u32 {
    let at = index * 4;
    u32::from_le_bytes([TABLE[at], TABLE[at + 1], TABLE[at + 2], TABLE[at + 3]])
}

/// Where the parts of the table start (read from its header).
struct Layout {
    tokens: usize,
    slot_bits: u32,
    /// Word index of the first offset.
    offsets: usize,
    /// Word index of the first slot.
    slots: usize,
    /// Byte index of the blob.
    blob: usize,
}

/// The layout, from the table's header (four loads from one cache line).
#[inline]
fn read_layout() -> Layout {
    debug_assert_eq!(word(0), TABLE_MAGIC, "the table build.rs wrote");
    let tokens = word(1) as usize;
    let slot_bits = word(2);
    let offsets = HEADER_WORDS;
    let slots = offsets + tokens + 1;
    let blob = (slots + (1usize << slot_bits)) * 4;
    Layout {
        tokens,
        slot_bits,
        offsets,
        slots,
        blob,
    }
}

/// The bytes of the token of rank `rank`.
fn token_bytes(layout: &Layout, rank: u32) -> &'static [u8] {
    debug_assert!((rank as usize) < layout.tokens);
    let start = word(layout.offsets + rank as usize) as usize;
    let end = word(layout.offsets + rank as usize + 1) as usize;
    &TABLE[layout.blob + start..layout.blob + end]
}

/// The rank of `bytes` if it is a token.
#[inline]
pub(super) fn rank(bytes: &[u8]) -> Option<u32> {
    let layout = read_layout();
    let mask = (1usize << layout.slot_bits) - 1;
    let mut slot = (xxh3_64(bytes) >> (64 - layout.slot_bits)) as usize;
    loop {
        let entry = word(layout.slots + slot);
        if entry == 0 {
            return None;
        }
        if token_bytes(&layout, entry - 1) == bytes {
            return Some(entry - 1);
        }
        slot = (slot + 1) & mask;
    }
}

/// Pieces up to this many bytes are encoded by [`short_piece_token_count`].
const SHORT_PIECE: usize = 64;

/// Number of tokens the encoding of one pre-tokenization piece has.
pub(super) fn piece_token_count(piece: &[u8]) -> usize {
    if piece.len() <= 1 || rank(piece).is_some() {
        return piece.len().min(1);
    }
    if piece.len() <= SHORT_PIECE {
        return short_piece_token_count(piece);
    }
    // Parts as a linked list of start offsets: the part starting at `start`
    // ends where the next one starts (`next[start]`; `len` past the last).
    let len = piece.len();
    let mut next: Vec<usize> = (1..=len).collect();
    let mut prev: Vec<usize> = (0..len).map(|i| i.wrapping_sub(1)).collect();
    let mut merged = vec![false; len];
    // Candidate merges (rank, left start, right start, right end), lowest
    // rank first, then leftmost. A merge makes candidates naming the old
    // parts stale; they are recognised and skipped when popped.
    let mut candidates = BinaryHeap::new();
    for start in 0..len - 1 {
        if let Some(rank) = rank(&piece[start..start + 2]) {
            candidates.push(Reverse((rank, start, start + 1, start + 2)));
        }
    }
    let mut parts = len;
    while let Some(Reverse((_, left, right, end))) = candidates.pop() {
        let current = !merged[left] && !merged[right] && next[left] == right && next[right] == end;
        if !current {
            continue;
        }
        merged[right] = true;
        next[left] = end;
        if end < len {
            prev[end] = left;
        }
        parts -= 1;
        if left > 0 {
            let before = prev[left];
            if let Some(rank) = rank(&piece[before..end]) {
                candidates.push(Reverse((rank, before, left, end)));
            }
        }
        if end < len {
            let after = next[end];
            if let Some(rank) = rank(&piece[left..after]) {
                candidates.push(Reverse((rank, left, end, after)));
            }
        }
    }
    parts
}

/// [`piece_token_count`] of a piece of 2..=[`SHORT_PIECE`] bytes, on the
/// stack: the same rule (merge the adjacent pair whose token has the lowest
/// rank, the leftmost on a tie) with each adjacent pair's rank kept in an
/// array and the lowest found by a scan, instead of three vectors and a
/// heap per piece (most pieces an index counts are a few bytes long, and
/// the allocations cost more than the merges).
fn short_piece_token_count(piece: &[u8]) -> usize {
    /// Marks a pair that is no token.
    const NONE: u32 = u32::MAX;
    let len = piece.len();
    debug_assert!((2..=SHORT_PIECE).contains(&len));
    // Part `i` is `piece[starts[i]..starts[i + 1]]`, for `i < parts`.
    let mut starts = [0u8; SHORT_PIECE + 1];
    for (i, s) in starts.iter_mut().enumerate().take(len + 1) {
        *s = i as u8;
    }
    // `ranks[i]`: the rank of parts `i` and `i + 1` together, for `i + 1 < parts`.
    let mut ranks = [NONE; SHORT_PIECE];
    for (i, r) in ranks.iter_mut().enumerate().take(len - 1) {
        *r = rank(&piece[i..i + 2]).unwrap_or(NONE);
    }
    let mut parts = len;
    let span = |starts: &[u8], from: usize, to: usize| starts[from] as usize..starts[to] as usize;
    while parts > 1 {
        let mut at = 0;
        for i in 1..parts - 1 {
            if ranks[i] < ranks[at] {
                at = i;
            }
        }
        if ranks[at] == NONE {
            break;
        }
        // Parts `at` and `at + 1` become one.
        starts.copy_within(at + 2..=parts, at + 1);
        if at + 2 < parts {
            ranks.copy_within(at + 2..parts - 1, at + 1);
        }
        parts -= 1;
        if at + 1 < parts {
            ranks[at] = rank(&piece[span(&starts, at, at + 2)]).unwrap_or(NONE);
        }
        if at > 0 {
            ranks[at - 1] = rank(&piece[span(&starts, at - 1, at + 1)]).unwrap_or(NONE);
        }
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_holds_the_whole_vocabulary() {
        assert_eq!(word(0), TABLE_MAGIC);
        let bpe = &bpe_openai::o200k_base().bpe;
        let layout = read_layout();
        assert_eq!(layout.tokens, bpe.num_tokens());
        for rank in 0..bpe.num_tokens() as u32 {
            let bytes = bpe.token_bytes(rank);
            assert_eq!(token_bytes(&layout, rank), bytes);
            assert_eq!(super::rank(bytes), Some(rank), "{bytes:?}");
        }
        assert_eq!(super::rank(b"definitely not a single token"), None);
        assert_eq!(super::rank(b""), None);
    }

    #[test]
    fn piece_counts_match_bpe_openai() {
        let bpe = &bpe_openai::o200k_base().bpe;
        let pieces: [&[u8]; 12] = [
            b"hello",
            b" world",
            b"parse_expr",
            b" ParseErrorKindUnexpectedToken",
            b"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
            b"=====================================",
            b"                                        ",
            b"\n\n\n\n\n\n\n\n",
            "日本語のテキスト".as_bytes(),
            "🎉🚀👍🏽".as_bytes(),
            b"x",
            b"",
        ];
        for piece in pieces {
            assert_eq!(piece_token_count(piece), bpe.count(piece), "{piece:?}");
        }
    }

    #[test]
    fn short_pieces_count_as_bpe_openai_counts_them() {
        // Every length up to and past the short path's limit, of letters,
        // identifiers, digits, punctuation, whitespace and UTF-8.
        let bpe = &bpe_openai::o200k_base().bpe;
        let mut next = crate::testing::xorshift(0x5eed);
        let alphabet: Vec<&[u8]> = vec![
            b"a",
            b"e",
            b"t",
            b"_",
            b"Z",
            b"x",
            b"1",
            b" ",
            b"=",
            b"(",
            b"\n",
            b"in",
            b"ing",
            b"self",
            b"\xc3\xa9",
            b"\xe6\x97\xa5",
        ];
        for len in 2..=SHORT_PIECE + 8 {
            for _ in 0..40 {
                let mut piece = Vec::new();
                while piece.len() < len {
                    piece.extend_from_slice(alphabet[next() as usize % alphabet.len()]);
                }
                piece.truncate(len);
                if std::str::from_utf8(&piece).is_err() {
                    continue;
                }
                assert_eq!(piece_token_count(&piece), bpe.count(&piece), "{piece:?}");
            }
        }
    }
}
