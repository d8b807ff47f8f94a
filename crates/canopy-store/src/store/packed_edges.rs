//! A file's outgoing graph edges, packed into one blob (`edge_lists.edges`).
//!
//! One SQLite row per edge, keyed by site and target without a rowid, plus
//! the index by target, cost about 35 bytes an edge (tokio: 29,427 edges in
//! 1.02 MB, 0.20× of the source, at schema 14). Queries never need one edge
//! without its file's others: "callers of X" opens the files that
//! `edge_targets` lists for X, "callees of a unit" and whole-graph passes
//! read files whole. So a file's edges are stored together, varint-encoded
//! and deflated ([`super::blob`]), the way `file_refs` stores references.
//!
//! Layout (of the inflated blob): `varint(count)`, then per edge, in
//! `(src, line, col, dst)` order:
//!
//! | field | encoding |
//! |---|---|
//! | source unit (`nodes.id`) | zigzag varint, delta from the previous edge's |
//! | line | zigzag varint, delta from the previous edge's |
//! | column | varint |
//! | target unit (`nodes.id`) | varint (a callee called twice repeats its bytes, which deflate finds) |
//! | info (kind, status, how, confidence: `store::graph::pack_info`) | varint |
//!
//! Invariant: at most one edge per `(src, line, col, dst)`; [`encode`] keeps
//! the first one given.

use super::packed_refs::{decode_list, put_varint, unzigzag, zigzag};
use crate::error::Result;

/// One stored edge, packed fields as in `store::graph`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PackedEdge {
    /// Source unit (`nodes.id`).
    pub src: i64,
    /// 1-based line of the site.
    pub line: u32,
    /// 0-based column of the site.
    pub col: u32,
    /// Target unit (`nodes.id`).
    pub dst: i64,
    /// `store::graph::pack_info`.
    pub info: i64,
}

impl PackedEdge {
    /// What makes an edge one: where its site is and what it reaches.
    pub fn key(&self) -> (i64, u32, u32, i64) {
        (self.src, self.line, self.col, self.dst)
    }
}

/// Sorts `edges` into stored order, drops later duplicates of a key (the
/// first one given wins) and encodes them.
pub fn encode(edges: &mut Vec<PackedEdge>) -> Vec<u8> {
    // Stable: among duplicates, the first one given stays first.
    edges.sort_by_key(PackedEdge::key);
    edges.dedup_by_key(|e| e.key());
    let mut out = Vec::with_capacity(2 + edges.len() * 8);
    put_varint(&mut out, edges.len() as u64);
    let (mut src, mut line) = (0i64, 0i64);
    for e in edges.iter() {
        put_varint(&mut out, zigzag(e.src - src));
        put_varint(&mut out, zigzag(i64::from(e.line) - line));
        put_varint(&mut out, u64::from(e.col));
        put_varint(&mut out, e.dst as u64);
        put_varint(&mut out, e.info as u64);
        src = e.src;
        line = i64::from(e.line);
    }
    super::blob::pack(&out)
}

/// Decodes a blob written by [`encode`]. `file_id` only names the file in
/// the error a damaged blob gives.
pub fn decode(blob: &[u8], file_id: i64) -> Result<Vec<PackedEdge>> {
    let (mut src, mut line) = (0i64, 0i64);
    decode_list(blob, "graph edges", file_id, |reader| {
        src = src.checked_add(unzigzag(reader.varint()?))?;
        line = line.checked_add(unzigzag(reader.varint()?))?;
        Some(PackedEdge {
            src,
            line: u32::try_from(line).ok()?,
            col: u32::try_from(reader.varint()?).ok()?,
            dst: i64::try_from(reader.varint()?).ok()?,
            info: i64::try_from(reader.varint()?).ok()?,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(src: i64, line: u32, col: u32, dst: i64, info: i64) -> PackedEdge {
        PackedEdge {
            src,
            line,
            col,
            dst,
            info,
        }
    }

    #[test]
    fn round_trips_in_stored_order() {
        // A nested unit (higher id) starts on a line before its parent's
        // last site; ids and info reach past one varint byte.
        let mut edges = vec![
            e(70_001, 9, 4, 12, 12_800),
            e(70_000, 30, 8, 300_000, 5),
            e(70_000, 30, 8, 299_999, 5),
            e(70_000, 31, 0, 1, 0),
            e(1, 1, 1_000_000, 7, 1),
        ];
        let blob = encode(&mut edges);
        let decoded = decode(&blob, 1).unwrap();
        assert_eq!(decoded, edges);
        let keys: Vec<_> = decoded.iter().map(PackedEdge::key).collect();
        assert_eq!(
            keys,
            [
                (1, 1, 1_000_000, 7),
                (70_000, 30, 8, 299_999),
                (70_000, 30, 8, 300_000),
                (70_000, 31, 0, 1),
                (70_001, 9, 4, 12),
            ]
        );
    }

    #[test]
    fn duplicates_of_a_key_keep_the_first() {
        let mut edges = vec![e(3, 1, 1, 7, 100), e(3, 1, 1, 7, 200), e(3, 1, 1, 8, 300)];
        let decoded = decode(&encode(&mut edges), 1).unwrap();
        assert_eq!(decoded, [e(3, 1, 1, 7, 100), e(3, 1, 1, 8, 300)]);
    }

    #[test]
    fn empty_list_round_trips() {
        assert_eq!(decode(&encode(&mut vec![]), 1).unwrap(), []);
    }

    #[test]
    fn damaged_blobs_give_an_error_not_a_panic() {
        let mut edges = vec![e(10, 3, 0, 1, 7), e(20, 3, 2, 2, 1)];
        crate::testing::assert_damage_is_refused(&encode(&mut edges), decode);
        assert!(decode(&[0, 0xff, 0xff, 0xff, 0x0f], 1).is_err());
    }

    #[test]
    fn random_edge_lists_round_trip() {
        let mut next = crate::testing::xorshift(0x0ed9_e5ba_d5ee_d001);
        for round in 0..500u32 {
            let len = (next() % 300) as usize;
            // Small ranges make duplicate keys common; large values reach
            // every varint length.
            let wide = round.is_multiple_of(2);
            let mut edges: Vec<PackedEdge> = (0..len)
                .map(|_| {
                    let pick = |n: u64, v: u64| if wide { v % n.max(1) } else { v % 20 };
                    PackedEdge {
                        src: pick(i64::MAX as u64 / 4, next()) as i64,
                        line: pick(u64::from(u32::MAX), next()) as u32,
                        col: pick(u64::from(u32::MAX), next()) as u32,
                        dst: pick(i64::MAX as u64, next()) as i64,
                        info: pick(1 << 14, next()) as i64,
                    }
                })
                .collect();
            let mut expected = edges.clone();
            let blob = encode(&mut edges);
            expected.sort_by_key(PackedEdge::key);
            expected.dedup_by_key(|e| e.key());
            assert_eq!(edges, expected, "round {round}");
            assert_eq!(decode(&blob, 1).unwrap(), expected, "round {round}");
        }
    }
}
