//! A file's references, packed into one blob (`file_refs.refs`).
//!
//! One SQLite row per reference cost about 45 bytes with its name index
//! (0.58× of the source on tokio, the largest part of the index after
//! FTS). Queries never need a single reference out of a file without its
//! neighbours: they ask for "every reference to NAME" (the `ref_postings`
//! table says which files to open) or "every reference inside this unit"
//! (one file). So a file's references are stored together, delta- and
//! varint-encoded, at 7–8 bytes each (tokio 7.5, synth 7.1), and the blob
//! is deflated ([`super::blob`]; tokio's 495,236 bytes of references are
//! 296,826 stored: `SUM(length(refs)) FROM file_refs` at schema 12 and 13).
//!
//! Layout (of the inflated blob): `varint(count)`, then per reference, in
//! `(end_byte, ref_type)` order:
//!
//! | field | encoding |
//! |---|---|
//! | end byte | varint, delta from the previous reference's end |
//! | length and type | varint `length << 2 \| ref_type` |
//! | line | zigzag varint, delta from the previous reference's line |
//! | enclosing unit (`nodes.id`) | zigzag varint, delta from the previous one |
//! | name (`ref_names.id`) | varint |
//! | qualifier (`ref_names.id`) | varint, id + 1; 0 for none |
//!
//! Invariant: at most one reference per `(end_byte, ref_type)` in a file
//! (the extractor guarantees it; [`encode`] drops later duplicates).

use crate::error::{CanopyError, Result};

/// One stored reference, with ids instead of text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PackedRef {
    /// Byte offset where the reference ends (exclusive).
    pub end_byte: u64,
    /// Its length in bytes.
    pub length: u64,
    /// `store::REF_TYPES` code.
    pub ref_type: u8,
    /// 1-based line of its start.
    pub line: u32,
    /// `nodes.id` of the enclosing unit.
    pub source_node_id: i64,
    /// `ref_names.id` of the referenced name.
    pub name_id: i64,
    /// `ref_names.id` of the receiver or module path, if any.
    pub qualifier_id: Option<i64>,
}

impl PackedRef {
    /// Byte offset where the reference starts.
    pub fn start_byte(&self) -> u64 {
        self.end_byte.saturating_sub(self.length)
    }
}

/// Sorts `refs` into stored order, drops duplicates of `(end_byte, ref_type)`
/// (the first one given wins) and encodes them.
pub fn encode(refs: &mut Vec<PackedRef>) -> Vec<u8> {
    // Stable: among duplicates, the first one given stays first.
    refs.sort_by_key(|r| (r.end_byte, r.ref_type));
    refs.dedup_by_key(|r| (r.end_byte, r.ref_type));
    let mut out = Vec::with_capacity(2 + refs.len() * 9);
    put_varint(&mut out, refs.len() as u64);
    let (mut end, mut line, mut source) = (0u64, 0i64, 0i64);
    for r in refs.iter() {
        put_varint(&mut out, r.end_byte - end);
        put_varint(&mut out, (r.length << 2) | u64::from(r.ref_type & 3));
        put_varint(&mut out, zigzag(i64::from(r.line) - line));
        put_varint(&mut out, zigzag(r.source_node_id - source));
        put_varint(&mut out, r.name_id as u64);
        put_varint(&mut out, r.qualifier_id.map_or(0, |q| q as u64 + 1));
        end = r.end_byte;
        line = i64::from(r.line);
        source = r.source_node_id;
    }
    super::blob::pack(&out)
}

/// Decodes a blob written by [`encode`]. `file_id` only names the file in
/// the error a damaged blob gives.
pub fn decode(blob: &[u8], file_id: i64) -> Result<Vec<PackedRef>> {
    let (mut end, mut line, mut source) = (0u64, 0i64, 0i64);
    // Each reference takes at least 6 bytes.
    decode_list(blob, "references", file_id, |reader| {
        end = end.checked_add(reader.varint()?)?;
        let length_and_type = reader.varint()?;
        line = line.checked_add(unzigzag(reader.varint()?))?;
        source = source.checked_add(unzigzag(reader.varint()?))?;
        let name_id = i64::try_from(reader.varint()?).ok()?;
        let qualifier = reader.varint()?;
        Some(PackedRef {
            end_byte: end,
            length: length_and_type >> 2,
            ref_type: (length_and_type & 3) as u8,
            line: u32::try_from(line).ok()?,
            source_node_id: source,
            name_id,
            qualifier_id: match qualifier {
                0 => None,
                q => Some(i64::try_from(q - 1).ok()?),
            },
        })
    })
}

/// The frame both per-file lists share ([`decode`], and
/// [`super::packed_edges::decode`]): a [`super::blob`] holding
/// `varint(count)` then `count` items, each read by `item` (`None`: damaged),
/// and nothing after them. `what` and `file_id` name the list in the error
/// a damaged blob gives.
pub(super) fn decode_list<T>(
    blob: &[u8],
    what: &str,
    file_id: i64,
    mut item: impl FnMut(&mut Reader) -> Option<T>,
) -> Result<Vec<T>> {
    let corrupt = || {
        CanopyError::Internal(format!(
            "the stored {what} of file #{file_id} are damaged; \
             run `canopy invalidate` and `canopy index` to rebuild them"
        ))
    };
    let blob = super::blob::unpack(blob).ok_or_else(corrupt)?;
    let blob = &*blob;
    let mut reader = Reader { blob, pos: 0 };
    let count = reader.varint().ok_or_else(corrupt)?;
    // Every item takes at least one byte: a count beyond the bytes present
    // is damage, not a reason to reserve memory.
    if count > blob.len() as u64 {
        return Err(corrupt());
    }
    let mut out = Vec::with_capacity(count as usize);
    for _ in 0..count {
        out.push(item(&mut reader).ok_or_else(corrupt)?);
    }
    if reader.pos != blob.len() {
        return Err(corrupt());
    }
    Ok(out)
}

/// Appends `v` as a LEB128 varint (also [`super::packed_edges`]'s encoding).
pub(super) fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Signed to unsigned, small magnitudes small.
pub(super) fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// The inverse of [`zigzag`].
pub(super) fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// Reads varints from a blob, front to back.
pub(super) struct Reader<'a> {
    blob: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    /// The next LEB128 varint; `None` past the end or beyond 64 bits.
    pub(super) fn varint(&mut self) -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = *self.blob.get(self.pos)?;
            self.pos += 1;
            v |= u64::from(byte & 0x7f).checked_shl(shift)?;
            if byte & 0x80 == 0 {
                return Some(v);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(end: u64, len: u64, ty: u8, line: u32, src: i64, name: i64, q: Option<i64>) -> PackedRef {
        PackedRef {
            end_byte: end,
            length: len,
            ref_type: ty,
            line,
            source_node_id: src,
            name_id: name,
            qualifier_id: q,
        }
    }

    #[test]
    fn round_trips_in_stored_order() {
        // Nested calls end in the reverse order of their lines; unit ids go
        // up and down; ids reach past one varint byte.
        let mut refs = vec![
            r(900, 40, 0, 30, 70_000, 5, None),
            r(120, 7, 2, 9, 70_001, 300_000, Some(0)),
            r(120, 7, 0, 9, 70_001, 12, Some(9_999_999)),
            r(880, 3, 0, 31, 69_990, 5, Some(4)),
            r(5, 5, 1, 1, 1, 1, None),
        ];
        let blob = encode(&mut refs);
        let decoded = decode(&blob, 1).unwrap();
        assert_eq!(decoded, refs);
        let order: Vec<(u64, u8)> = decoded.iter().map(|r| (r.end_byte, r.ref_type)).collect();
        assert_eq!(order, [(5, 1), (120, 0), (120, 2), (880, 0), (900, 0)]);
        assert_eq!(decoded[3].start_byte(), 877);
    }

    #[test]
    fn duplicates_of_end_and_type_keep_the_first() {
        let mut refs = vec![r(10, 3, 0, 1, 1, 7, None), r(10, 5, 0, 1, 1, 8, None)];
        let decoded = decode(&encode(&mut refs), 1).unwrap();
        assert_eq!(decoded, [r(10, 3, 0, 1, 1, 7, None)]);
    }

    #[test]
    fn empty_list_round_trips() {
        assert_eq!(decode(&encode(&mut vec![]), 1).unwrap(), []);
    }

    #[test]
    fn damaged_blobs_give_an_error_not_a_panic() {
        let mut refs = vec![r(10, 3, 0, 1, 1, 7, Some(2)), r(20, 3, 2, 2, 1, 8, None)];
        crate::testing::assert_damage_is_refused(&encode(&mut refs), decode);
        // A count far beyond the bytes present.
        assert!(decode(&[0xff, 0xff, 0xff, 0x0f], 1).is_err());
    }

    #[test]
    fn random_reference_lists_round_trip() {
        let mut next = crate::testing::xorshift(0x005e_ed0f_c0ff_ee11);
        for round in 0..500u32 {
            let len = (next() % 200) as usize;
            // Small ranges make duplicate (end, type) keys common; large
            // values reach every varint length.
            let wide = round.is_multiple_of(2);
            let mut refs: Vec<PackedRef> = (0..len)
                .map(|_| {
                    let big = |n: u64, v: u64| if wide { v % n.max(1) } else { v % 50 };
                    PackedRef {
                        end_byte: big(u64::MAX >> 8, next()),
                        length: big(u64::MAX >> 10, next()),
                        ref_type: (next() % 3) as u8,
                        line: big(u64::from(u32::MAX), next()) as u32,
                        source_node_id: big(i64::MAX as u64, next()) as i64,
                        name_id: big(i64::MAX as u64, next()) as i64,
                        qualifier_id: next()
                            .is_multiple_of(2)
                            .then(|| big(i64::MAX as u64 - 1, next()) as i64),
                    }
                })
                .collect();
            let mut expected = refs.clone();
            let blob = encode(&mut refs);
            expected.sort_by_key(|r| (r.end_byte, r.ref_type));
            expected.dedup_by_key(|r| (r.end_byte, r.ref_type));
            assert_eq!(refs, expected, "round {round}");
            assert_eq!(decode(&blob, 1).unwrap(), expected, "round {round}");
        }
    }

    #[test]
    fn typical_references_take_under_ten_bytes() {
        let mut refs: Vec<PackedRef> = (0..1000)
            .map(|i| {
                r(
                    100 + i * 37,
                    12,
                    (i % 3) as u8,
                    3 + i as u32,
                    500 + (i as i64) / 10,
                    4000 + (i as i64 * 7919) % 5000,
                    (i % 2 == 0).then_some(900),
                )
            })
            .collect();
        let blob = encode(&mut refs);
        assert!(blob.len() < 10 * refs.len(), "{} bytes", blob.len());
    }
}
