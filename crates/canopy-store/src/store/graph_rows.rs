//! The rows of the graph tables as the store reads and writes them: what a
//! resolution pass reads (files with their stored facts, named units) and
//! what it writes (edges). The graph gives them their meaning
//! (`graph::facts`, `graph::resolve`); the store only keeps them.
//!
//! Architecture Invariant: the store never names the graph (`canopy_core::graph`); the graph
//! uses these types from here (the dependency points down).

use crate::lang::{Language, NodeType, SiteKind};

/// A file's place in the list [`crate::store::Store::graph_file_rows`]
/// returns: the index of the resolver's file table.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FileIdx(pub u32);

impl FileIdx {
    /// The position, for indexing.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// A file as a resolution pass reads it.
#[derive(Debug)]
pub struct FileRow {
    /// `files.id`.
    pub id: i64,
    /// Repo-relative path.
    pub path: String,
    /// Language.
    pub language: Language,
    /// `graph_facts.facts`, as stored (none when the language has no rules).
    pub facts: Option<Vec<u8>>,
}

/// What identifies a file's resolution rows ([`crate::store::Store::graph_file_stamps`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileStamp {
    /// `files.id`.
    pub id: i64,
    /// Repo-relative path.
    pub path: String,
    /// Language.
    pub language: Language,
    /// `files.content_hash`.
    pub content_hash: String,
    /// `files.first_node_id`.
    pub first_node: i64,
    /// `files.last_node_id`.
    pub last_node: i64,
}

/// A unit as a resolution pass reads it: every named unit and every file unit.
#[derive(Clone, Debug)]
pub struct SymRow {
    /// `nodes.id`.
    pub id: i64,
    /// Its file.
    pub file: FileIdx,
    /// `nodes.id` of the parent.
    pub parent: Option<i64>,
    /// Kind.
    pub node_type: NodeType,
    /// Name (empty for anonymous units).
    pub name: String,
    /// Qualified name.
    pub qualified_name: String,
    /// Byte span.
    pub start: u32,
    /// Byte span end.
    pub end: u32,
}

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

    /// The encoded stream of a stored one (`graph_facts.facts` or
    /// `.sites`); `None` when it is damaged.
    pub fn unpack(stored: &[u8]) -> Option<std::borrow::Cow<'_, [u8]>> {
        super::blob::unpack(stored)
    }
}

/// Where a resolved site points.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// Exactly one definition (`nodes.id`).
    Resolved(i64),
    /// Several candidate definitions.
    Ambiguous(Vec<i64>),
    /// No definition in the repository.
    Unresolved,
}

/// How a site was resolved (stored as a small code).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum How {
    /// Lexical scope, same file or package.
    Scope = 0,
    /// Through an import (aliases and re-exports followed).
    Import = 1,
    /// A member of `self` / `this` / the receiver.
    Receiver = 2,
    /// A member of a value whose type was inferred (annotation, constructor, return type).
    Inferred = 3,
    /// Found on a base class, embedded type or implemented trait.
    Inherited = 4,
    /// The receiver's type is unknown, and one definition in the repository has the name.
    UniqueName = 5,
    /// Nothing matched.
    None = 6,
    /// Not a site: the source type extends or implements the target (bases,
    /// `impl Trait for Type`, Go method sets that satisfy an interface).
    Base = 7,
}

impl How {
    /// The stored code's name.
    pub fn name(code: u8) -> &'static str {
        match code {
            0 => "scope",
            1 => "import",
            2 => "receiver",
            3 => "inferred",
            4 => "inherited",
            5 => "unique_name",
            7 => "base",
            _ => "none",
        }
    }
}

/// One resolved (or not) site, as a pass hands it to the store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EdgeRow {
    /// The innermost unit containing the site (`nodes.id`).
    pub src: i64,
    /// Where it points.
    pub target: Target,
    /// Call, import, type or other.
    pub kind: SiteKind,
    /// How it was resolved.
    pub how: How,
    /// Confidence, 0..=100.
    pub confidence: u8,
    /// 1-based line.
    pub line: u32,
    /// 0-based column (characters).
    pub col: u32,
    /// The site's name (kept for unresolved sites).
    pub name: String,
}
