//! [`Snapshot`]: what the operations below [`crate::Engine`] read through.
//!
//! `Engine` sits on top: it owns the connections, sessions, result sets
//! and background work, opens one read transaction per request and hands
//! the operation a `Snapshot` of it — the committed index as of the
//! transaction's start, plus the repository's files, read only through
//! checks that they still have the indexed content. Queries, result-set
//! refinement and previews take a `Snapshot`, never the `Engine`, so
//! nothing below the engine can reach back into it (to index, to take its
//! locks again, to keep state).

use std::collections::HashMap;
use std::path::Path;

use xxhash_rust::xxh3::xxh3_64;

use crate::discover::check_relative;
use crate::error::{CanopyError, Result};
use crate::handle::HandleId;
use crate::model::Expansion;
use crate::store::Store;

/// One read transaction of a repository's index and its files.
#[derive(Clone, Copy)]
pub struct Snapshot<'a> {
    store: &'a Store,
    root: &'a Path,
}

impl<'a> Snapshot<'a> {
    /// A snapshot over `store` (inside a read transaction the caller holds)
    /// of the repository at `root` (canonical).
    pub(crate) fn new(store: &'a Store, root: &'a Path) -> Snapshot<'a> {
        Snapshot { store, root }
    }

    /// The index, as of the transaction's start.
    pub fn store(&self) -> &'a Store {
        self.store
    }

    /// The repository root (canonical).
    pub fn root(&self) -> &'a Path {
        self.root
    }

    /// Expands handles to their exact text, in request order, without
    /// duplicates: [`CanopyError::MalformedHandle`] for text that is not an
    /// id, [`CanopyError::HandleNotFound`] for an unknown id,
    /// [`CanopyError::StaleIndex`] when the file changed since indexing.
    pub fn expand<S: AsRef<str>>(&self, ids: &[S]) -> Result<Vec<Expansion>> {
        let mut seen = std::collections::HashSet::new();
        let mut files: HashMap<String, std::sync::Arc<Vec<u8>>> = HashMap::new();
        let generation = self.store.generation()?;
        let indexed_at = self.store.indexed_at()?;
        let mut out = Vec::new();
        for raw in ids {
            let raw = raw.as_ref();
            let id = HandleId::parse(raw).ok_or_else(|| CanopyError::MalformedHandle {
                id: raw.to_string(),
            })?;
            if !seen.insert(id.clone()) {
                continue;
            }
            let node = self.store.node_by_handle(id.as_str())?.ok_or_else(|| {
                CanopyError::HandleNotFound {
                    id: raw.to_string(),
                }
            })?;
            let bytes = match files.get(&node.file_path) {
                Some(b) => b.clone(),
                None => {
                    let b = std::sync::Arc::new(
                        self.read_verified(&node.file_path, &node.content_hash)?,
                    );
                    files.insert(node.file_path.clone(), b.clone());
                    b
                }
            };
            let slice = bytes.get(node.start_byte..node.end_byte).ok_or_else(|| {
                CanopyError::StaleIndex {
                    path: node.file_path.clone(),
                    deleted: false,
                }
            })?;
            out.push(Expansion {
                token_count: node.token_count,
                handle_id: id,
                file_path: node.file_path.clone(),
                line_range: [node.start_line, node.end_line],
                content: String::from_utf8_lossy(slice).into_owned(),
                generation,
                indexed_at: indexed_at.clone(),
                bytes: slice.to_vec(),
            });
        }
        Ok(out)
    }

    /// Reads a repo-relative file and checks it still has the indexed content.
    pub fn read_verified(&self, rel_path: &str, content_hash: &str) -> Result<Vec<u8>> {
        let bytes = self.read_repo_file(rel_path)?;
        if content_hash.is_empty() || format!("{:016x}", xxh3_64(&bytes)) != content_hash {
            return Err(CanopyError::StaleIndex {
                path: rel_path.to_string(),
                deleted: false,
            });
        }
        Ok(bytes)
    }

    /// Reads a file by repo-relative path, refusing anything outside the
    /// repository. A missing file is reported as a stale index (the index
    /// still lists it).
    pub fn read_repo_file(&self, rel_path: &str) -> Result<Vec<u8>> {
        check_relative(rel_path)?;
        let abs = self.root.join(rel_path);
        let gone = |e: std::io::Error| CanopyError::StaleIndex {
            path: rel_path.to_string(),
            deleted: e.kind() == std::io::ErrorKind::NotFound,
        };
        let canonical = abs.canonicalize().map_err(gone)?;
        if !canonical.starts_with(self.root) {
            return Err(CanopyError::PathOutsideRepo(rel_path.to_string()));
        }
        std::fs::read(&canonical).map_err(gone)
    }
}
