//! The rows of the graph tables as the store reads and writes them. The
//! graph gives them their meaning (`graph::facts`, `graph::resolve`); the
//! store only keeps them, and never calls into the graph.

/// A file's resolution facts as stored in `graph_facts`: the two encoded
/// streams (`world`: what resolving other files needs; `sites`: uses of
/// names), each compressed by the worker that parsed the file
/// ([`StoredFacts::pack`]), not by the single writer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredFacts {
    /// `graph_facts.facts`.
    pub world: Vec<u8>,
    /// `graph_facts.sites`.
    pub sites: Vec<u8>,
}

impl StoredFacts {
    /// The stored form of the two encoded streams.
    pub fn pack(world: &[u8], sites: &[u8]) -> StoredFacts {
        StoredFacts {
            world: super::blob::pack(world),
            sites: super::blob::pack(sites),
        }
    }
}
