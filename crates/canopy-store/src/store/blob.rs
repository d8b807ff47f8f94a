//! Compression of the per-file blobs (`file_refs.refs`, `graph_facts.facts`
//! and `graph_facts.sites`).
//!
//! Those blobs are varint streams, the facts with a string table per file:
//! deflate at its fastest level takes 20–40% off them (tokio, `SUM(length(…))`
//! at schema 12 and 13: references 495,236 → 296,826 bytes, sites 843,701 →
//! 521,514, facts 334,373 → 257,038), which is most of what kept the index
//! of a Rust workspace above 1.5× its source. They are read a file at a
//! time (a pass after an edit reads the few files it resolves, a reference
//! query the files that use a name), so each read inflates a few KB.
//!
//! Layout: one byte, then the payload: `0` the raw bytes (blobs under
//! [`MIN_DEFLATED`] bytes, and those deflate could not make smaller), `1`
//! raw deflate (RFC 1951).

/// The first byte of a stored blob: the raw bytes follow.
const RAW: u8 = 0;
/// The first byte of a stored blob: deflated bytes follow.
const DEFLATE: u8 = 1;
/// Deflate level: the fastest (every file indexed is compressed; zlib's
/// default level 6 takes only another 1–2% off tokio's blobs).
const LEVEL: u8 = 1;
/// Inflated size at most: a damaged blob must not claim gigabytes (no file
/// Canopy indexes yields blobs near this).
const MAX_INFLATED: usize = 1 << 28;
/// Blobs shorter than this are stored raw: deflate saves them a few bytes
/// at about the fixed cost per call of a large one (Django: 3,325 of its
/// 8,069 blobs, 13 KB more stored; tokio 1.5 KB).
const MIN_DEFLATED: usize = 128;

/// The stored form of `raw`: deflated, or raw when it is short or deflate
/// does not make it smaller.
pub fn pack(raw: &[u8]) -> Vec<u8> {
    let deflated = if raw.len() < MIN_DEFLATED {
        None
    } else {
        Some(miniz_oxide::deflate::compress_to_vec(raw, LEVEL)).filter(|d| d.len() < raw.len())
    };
    let (tag, body) = match &deflated {
        Some(d) => (DEFLATE, d.as_slice()),
        None => (RAW, raw),
    };
    let mut out = Vec::with_capacity(body.len() + 1);
    out.push(tag);
    out.extend_from_slice(body);
    out
}

/// The raw bytes of a blob written by [`pack`]; `None` when it is damaged.
pub fn unpack(stored: &[u8]) -> Option<std::borrow::Cow<'_, [u8]>> {
    let (&tag, body) = stored.split_first()?;
    match tag {
        RAW => Some(std::borrow::Cow::Borrowed(body)),
        DEFLATE => miniz_oxide::inflate::decompress_to_vec_with_limit(body, MAX_INFLATED)
            .ok()
            .map(std::borrow::Cow::Owned),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_blob_comes_back_as_it_went_in() {
        let repetitive: Vec<u8> = (0..4_000u32).flat_map(|i| [(i % 7) as u8, 3, 1]).collect();
        let stored = pack(&repetitive);
        assert_eq!(stored[0], DEFLATE);
        assert!(stored.len() < repetitive.len() / 4, "{}", stored.len());
        assert_eq!(unpack(&stored).as_deref(), Some(repetitive.as_slice()));

        // Short blobs, and those deflate cannot shrink, are kept as they are.
        let tiny = [5u8, 9];
        let stored = pack(&tiny);
        assert_eq!(stored, vec![RAW, 5, 9]);
        assert_eq!(unpack(&stored).as_deref(), Some(&tiny[..]));
        assert_eq!(unpack(&pack(&[])).as_deref(), Some(&[][..]));
        let short = vec![7u8; MIN_DEFLATED - 1];
        assert_eq!(pack(&short)[0], RAW);
        assert_eq!(pack(&[7u8; MIN_DEFLATED])[0], DEFLATE);
        // xorshift64: bytes without repeats or skew for deflate to use.
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let noise: Vec<u8> = (0..4_000)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state >> 24) as u8
            })
            .collect();
        let stored = pack(&noise);
        assert_eq!((stored[0], stored.len()), (RAW, noise.len() + 1));
        assert_eq!(unpack(&stored).as_deref(), Some(noise.as_slice()));
    }

    #[test]
    fn a_damaged_blob_reads_as_none() {
        let raw: Vec<u8> = (0..2_000u32).map(|i| (i % 13) as u8).collect();
        let mut stored = pack(&raw);
        assert_eq!(unpack(&[]), None, "no tag byte");
        stored[0] = 7;
        assert_eq!(unpack(&stored), None, "unknown tag");
        stored[0] = DEFLATE;
        stored.truncate(stored.len() / 2);
        assert_eq!(unpack(&stored), None, "cut short");
    }
}
