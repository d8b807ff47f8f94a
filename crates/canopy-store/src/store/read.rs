//! Reads: lookups and searches for queries, expansion and status.
//!
//! Searches return rows in a stable order (score, then path and position)
//! so the same index always gives the same answer.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap, HashSet};

use rusqlite::{OptionalExtension, Row, params_from_iter};

use super::name_catalog::NameCatalog;
use super::packed_refs::{self, PackedRef};
use super::{Store, meta_keys};
use crate::error::Result;
use crate::handle::{Handle, HandleId, Span};

/// `ref_names` texts by id, looked up once per call.
#[derive(Default)]
struct NameTexts(HashMap<i64, String>);

impl NameTexts {
    fn text(&mut self, store: &Store, id: i64) -> Result<String> {
        if let Some(text) = self.0.get(&id) {
            return Ok(text.clone());
        }
        let text: String = store
            .conn
            .prepare_cached("SELECT text FROM ref_names WHERE id = ?1")?
            .query_row([id], |r| r.get(0))?;
        self.0.insert(id, text.clone());
        Ok(text)
    }
}

/// What the store remembers of an indexed file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredFile {
    /// Row id.
    pub id: i64,
    /// Size when indexed.
    pub size: u64,
    /// Modification time when indexed (ns; -1 after invalidation).
    pub mtime_ns: i64,
    /// xxh3-64 of the content, hex ('' after invalidation).
    pub content_hash: String,
}

/// A unit as stored, joined with its file. `Default` is an empty record
/// (row 0, no handle or path), for tests that fill in what they read.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeRecord {
    /// Row id (also the FTS rowid).
    pub rowid: i64,
    /// Handle id.
    pub handle: String,
    /// Repo-relative path of its file.
    pub file_path: String,
    /// Content hash of its file when indexed.
    pub content_hash: String,
    /// Node type name.
    pub node_type: String,
    /// Name, for named units.
    pub name: Option<String>,
    /// Qualified name, for named units.
    pub qualified_name: Option<String>,
    /// Parent row id.
    pub parent_rowid: Option<i64>,
    /// Byte span.
    pub start_byte: usize,
    /// Byte span end.
    pub end_byte: usize,
    /// First line (1-based).
    pub start_line: u32,
    /// Last line (inclusive).
    pub end_line: u32,
    /// BPE tokens.
    pub token_count: u32,
    /// Byte where the preview starts (`query::Previews` rebuilds the text from the file).
    pub preview_start: usize,
    /// Search score (lower is better for BM25; 0 when not scored).
    pub score: f64,
}

impl NodeRecord {
    /// Its handle id: the stored one (12 bytes, read as `h` + 24 hex). A
    /// stored handle that does not read as one (a damaged row: the writer
    /// always writes 12 bytes) gets an id derived from the row's path, node
    /// type and stored text: the same for the row in every process, and a
    /// different one for each damaged unit, so answers do not merge them
    /// (deduplicated by handle) and a session does not take one for another.
    pub fn handle_id(&self) -> HandleId {
        HandleId::parse(&self.handle)
            .unwrap_or_else(|| HandleId::derive(&self.file_path, &self.node_type, &self.handle, 0))
    }

    /// The unit as a [`Handle`] with the preview its reader rebuilt from the
    /// file and whether the file changed on disk since it was indexed.
    pub fn to_handle(&self, preview: String, stale: bool) -> Handle {
        Handle {
            stale,
            id: self.handle_id(),
            file_path: self.file_path.clone(),
            node_type: self.node_type.clone(),
            name: self.name.clone(),
            qualified_name: self.qualified_name.clone(),
            span: Span {
                start: self.start_byte,
                end: self.end_byte,
            },
            line_range: [self.start_line, self.end_line],
            token_count: self.token_count,
            preview,
            content: None,
        }
    }
}

/// A reference as stored, joined with its file and enclosing unit.
#[derive(Clone, Debug, PartialEq)]
pub struct RefRecord {
    /// Repo-relative path.
    pub file_path: String,
    /// Content hash of the file when indexed.
    pub content_hash: String,
    /// Referenced name.
    pub name: String,
    /// Receiver or module path.
    pub qualifier: Option<String>,
    /// `call`, `import`, `type_ref`.
    pub ref_type: String,
    /// Byte span.
    pub start_byte: usize,
    /// Byte span end.
    pub end_byte: usize,
    /// 1-based line.
    pub line: u32,
    /// Handle of the enclosing unit.
    pub source_handle: String,
    /// Name of the enclosing unit (for `parent` filtering).
    pub source_qualified_name: Option<String>,
}

/// Aggregates for `status`.
#[derive(Clone, Debug, Default)]
pub struct IndexCounts {
    /// Files.
    pub files: u64,
    /// Sum of file token counts.
    pub tokens: u64,
    /// Sum of file sizes.
    pub bytes: u64,
    /// Units.
    pub units: u64,
    /// References.
    pub refs: u64,
    /// Files per language.
    pub languages: BTreeMap<String, u64>,
}

/// How a name is matched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NameMatch {
    /// Equal ignoring ASCII case (callers rank exact case first).
    Equal,
    /// Starts with the text, ignoring case.
    Prefix,
    /// Contains the text, ignoring case.
    Substring,
}

/// Which units a thread looked up one by one ([`Store::node_by_rowid`])
/// and whose members it listed ([`Store::children_of`]), for tests of
/// callers that must do each once per request (feature `lookup-log`;
/// callers' test builds turn it on).
#[cfg(feature = "lookup-log")]
pub mod lookup_log {
    use std::cell::RefCell;

    thread_local! {
        static LOG: RefCell<Option<Vec<(&'static str, i64)>>> = const { RefCell::new(None) };
    }

    /// Runs `f` and returns what it returned and every lookup this thread
    /// made meanwhile, in order: (`"unit"` or `"members"`, row id).
    pub fn record<R>(f: impl FnOnce() -> R) -> (R, Vec<(&'static str, i64)>) {
        LOG.with(|log| *log.borrow_mut() = Some(Vec::new()));
        let out = f();
        let lookups = LOG.with(|log| log.borrow_mut().take()).unwrap_or_default();
        (out, lookups)
    }

    pub(super) fn note(kind: &'static str, rowid: i64) {
        LOG.with(|log| {
            if let Ok(mut log) = log.try_borrow_mut()
                && let Some(log) = log.as_mut()
            {
                log.push((kind, rowid));
            }
        });
    }
}

/// Restricts an FTS query (`?3`: a [`FileScope`] as JSON) to the units of
/// the scope's files, found by each file's range of node ids (a file's
/// units are exactly those ids): a search of the docs of Django read every
/// one of its 65,158 units' rows to pick 4,767 (5 ms in the sqlite3 shell, against
/// 0.5 ms by the ranges).
const SCOPE_CLAUSE: &str = "AND +rowid IN (SELECT n.id FROM files f JOIN nodes n \
     ON n.id BETWEEN f.first_node_id AND f.last_node_id \
     WHERE f.id IN (SELECT value FROM json_each(?3)))";

/// A set of files (by row id) that a search is restricted to: what a glob
/// matched, computed once per request.
#[derive(Clone, Debug, Default)]
pub struct FileScope {
    ids: Vec<i64>,
}

impl FileScope {
    /// Whether the file is in the scope.
    pub fn contains(&self, file_id: i64) -> bool {
        self.ids.binary_search(&file_id).is_ok()
    }

    /// Files in the scope.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether no file is in the scope.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Both scopes' files.
    pub fn intersect(&self, other: &FileScope) -> FileScope {
        FileScope {
            ids: self
                .ids
                .iter()
                .copied()
                .filter(|id| other.contains(*id))
                .collect(),
        }
    }

    fn json(&self) -> String {
        let ids: Vec<String> = self.ids.iter().map(i64::to_string).collect();
        format!("[{}]", ids.join(","))
    }
}

const NODE_COLUMNS: &str =
    "n.id, 'h' || lower(hex(n.handle)), f.path, f.content_hash, n.node_type, n.name, n.qualified_name,
    n.parent_id, n.start_byte, n.end_byte, n.start_line, n.end_line, n.token_count,
    n.start_byte + n.preview_offset";

fn node_from_row(row: &Row, score: f64) -> rusqlite::Result<NodeRecord> {
    Ok(NodeRecord {
        rowid: row.get(0)?,
        handle: row.get(1)?,
        file_path: row.get(2)?,
        content_hash: row.get(3)?,
        node_type: row.get(4)?,
        name: row.get(5)?,
        qualified_name: row.get(6)?,
        parent_rowid: row.get(7)?,
        start_byte: row.get::<_, i64>(8)? as usize,
        end_byte: row.get::<_, i64>(9)? as usize,
        start_line: row.get(10)?,
        end_line: row.get(11)?,
        token_count: row.get(12)?,
        preview_start: row.get::<_, i64>(13)? as usize,
        score,
    })
}

/// Per-connection state for [`NameCatalog`]: the catalog once built, and
/// whether a substring search already ran without it.
#[derive(Debug, Default)]
pub struct NameCatalogCache {
    catalog: RefCell<Option<NameCatalog>>,
    searched_without: Cell<bool>,
}

/// A connection's decoded per-file blobs (references of `file_refs`, edge
/// lists of `edge_lists`), by file id, with a hash of the stored blob they
/// came from: a blob is read from SQLite every time (cheap), inflated and
/// decoded only when it changed since. Callers and references queries read
/// the blobs of every file that uses a name; inflating and decoding them
/// was half of a Django `callers` answer, and a `callers` walk at depth 3
/// opens the same edge lists again at each level. Checked by content, so it
/// never needs invalidating. Holds at most `MAX` items: past it, it starts
/// again empty.
#[derive(Debug)]
pub struct DecodedCache<T, const MAX: usize> {
    files: RefCell<HashMap<i64, (u64, Vec<T>)>>,
    items: Cell<usize>,
}

impl<T, const MAX: usize> Default for DecodedCache<T, MAX> {
    fn default() -> Self {
        DecodedCache {
            files: RefCell::default(),
            items: Cell::new(0),
        }
    }
}

impl<T: Clone, const MAX: usize> DecodedCache<T, MAX> {
    /// The items of file `file_id`'s `blob`: kept ones when the blob is the
    /// one they were decoded from, else `decode(blob)`'s, then kept.
    pub fn get_or_decode(
        &self,
        file_id: i64,
        blob: &[u8],
        decode: impl FnOnce(&[u8]) -> Result<Vec<T>>,
    ) -> Result<Vec<T>> {
        let hash = xxhash_rust::xxh3::xxh3_64(blob);
        if let Some((stored, items)) = self.files.borrow().get(&file_id)
            && *stored == hash
        {
            return Ok(items.clone());
        }
        let items = decode(blob)?;
        let mut files = self.files.borrow_mut();
        if let Some((_, old)) = files.remove(&file_id) {
            self.items.set(self.items.get() - old.len());
        }
        if self.items.get() + items.len() > MAX {
            files.clear();
            self.items.set(0);
        }
        self.items.set(self.items.get() + items.len());
        files.insert(file_id, (hash, items.clone()));
        Ok(items)
    }
}

/// References a connection keeps decoded at most (a little over 10 MB; the
/// Django sdist has 214,590).
pub const DECODED_REFS_MAX: usize = 262_144;
/// Edges a connection keeps decoded at most (8 MB; the Django sdist has
/// 153,206).
pub const DECODED_EDGES_MAX: usize = 262_144;

/// Escapes `%`, `_` and `\` for a `LIKE … ESCAPE '\'` pattern.
fn like_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '%' | '_' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

impl Store {
    /// Every indexed file with its change-detection fields.
    pub fn file_states(&self) -> Result<HashMap<String, StoredFile>> {
        let mut stmt = self
            .conn
            .prepare("SELECT path, id, size, mtime_ns, content_hash FROM files")?;
        let rows = stmt.query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                StoredFile {
                    id: r.get(1)?,
                    size: r.get::<_, i64>(2)? as u64,
                    mtime_ns: r.get(3)?,
                    content_hash: r.get(4)?,
                },
            ))
        })?;
        Ok(rows.collect::<rusqlite::Result<HashMap<_, _>>>()?)
    }

    /// When the last index run finished (RFC 3339, UTC), if one did.
    pub fn indexed_at(&self) -> Result<Option<String>> {
        Ok(self
            .meta(meta_keys::LAST_INDEXED)?
            .and_then(|s| s.parse::<i64>().ok())
            .map(super::rfc3339_utc))
    }

    /// The index's generation (0 before the first run that wrote anything).
    pub fn generation(&self) -> Result<u64> {
        Ok(self
            .meta(super::meta_keys::GENERATION)?
            .and_then(|g| g.parse().ok())
            .unwrap_or(0))
    }

    /// The index's state stamp ([`super::meta_keys::STATE_STAMP`]), if a
    /// writer gave it one.
    pub fn state_stamp(&self) -> Result<Option<String>> {
        self.meta(super::meta_keys::STATE_STAMP)
    }

    /// Paths an index run has dealt with: indexed files and files recorded
    /// as skipped.
    pub fn indexed_paths(&self) -> Result<std::collections::HashSet<String>> {
        let mut stmt = self
            .conn
            .prepare("SELECT path FROM files UNION ALL SELECT path FROM skipped_files")?;
        let rows = stmt.query_map([], |r| r.get::<_, String>(0))?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// Looks a unit up by handle id.
    /// Stored unit vectors of these files computed with `model`, by file id.
    pub fn unit_vectors(
        &self,
        model: &str,
        file_ids: &[i64],
    ) -> Result<HashMap<i64, crate::store::write::UnitVectorRow>> {
        let mut out = HashMap::new();
        for chunk in file_ids.chunks(500) {
            let placeholders = vec!["?"; chunk.len()].join(",");
            let sql = format!(
                "SELECT file_id, content_hash, first_node, data FROM unit_vectors
                 WHERE model = ? AND file_id IN ({placeholders})"
            );
            let mut stmt = self.conn.prepare(&sql)?;
            let params = std::iter::once(rusqlite::types::Value::from(model.to_string()))
                .chain(chunk.iter().map(|id| rusqlite::types::Value::from(*id)));
            let rows = stmt.query_map(params_from_iter(params), |r| {
                Ok(crate::store::write::UnitVectorRow {
                    file_id: r.get(0)?,
                    content_hash: r.get(1)?,
                    first_node: r.get(2)?,
                    data: r.get(3)?,
                })
            })?;
            for row in rows {
                let row = row?;
                out.insert(row.file_id, row);
            }
        }
        Ok(out)
    }

    /// Every stored unit-vector row computed with `model`, in file id
    /// order, given to `each` with its text and blob borrowed from SQLite
    /// (no copy: a search that scores the blobs once need not keep them)
    /// until `each` says `false`.
    pub fn each_unit_vector(
        &self,
        model: &str,
        mut each: impl FnMut(UnitVectorRef<'_>) -> bool,
    ) -> Result<()> {
        let mut stmt = self.conn.prepare(
            "SELECT file_id, content_hash, first_node, data FROM unit_vectors
             WHERE model = ?1 ORDER BY file_id",
        )?;
        let mut rows = stmt.query([model])?;
        while let Some(r) = rows.next()? {
            let borrowed = |i: usize| {
                r.get_ref(i).and_then(|v| match v {
                    rusqlite::types::ValueRef::Blob(b) | rusqlite::types::ValueRef::Text(b) => {
                        Ok(b)
                    }
                    other => Err(rusqlite::Error::InvalidColumnType(
                        i,
                        "content_hash or data".to_string(),
                        other.data_type(),
                    )),
                })
            };
            let row = UnitVectorRef {
                file_id: r.get(0)?,
                content_hash: borrowed(1)?,
                first_node: r.get(2)?,
                data: borrowed(3)?,
            };
            if !each(row) {
                break;
            }
        }
        Ok(())
    }

    /// The unit with handle id `handle` (`h` + 24 hex), if the index has it.
    pub fn node_by_handle(&self, handle: &str) -> Result<Option<NodeRecord>> {
        let sql = format!(
            "SELECT {NODE_COLUMNS} FROM nodes n JOIN files f ON f.id = n.file_id WHERE n.handle = unhex(substr(?1, 2)) LIMIT 1"
        );
        Ok(self
            .conn
            .prepare_cached(&sql)?
            .query_row([handle], |r| node_from_row(r, 0.0))
            .optional()?)
    }

    /// Looks units up by row id (order not preserved).
    pub fn nodes_by_rowids(&self, rowids: &[i64]) -> Result<Vec<NodeRecord>> {
        let mut out = Vec::with_capacity(rowids.len());
        for chunk in rowids.chunks(500) {
            let placeholders = vec!["?"; chunk.len()].join(",");
            let sql = format!(
                "SELECT {NODE_COLUMNS} FROM nodes n JOIN files f ON f.id = n.file_id WHERE n.id IN ({placeholders})"
            );
            let mut stmt = self.conn.prepare(&sql)?;
            let rows = stmt.query_map(params_from_iter(chunk.iter()), |r| node_from_row(r, 0.0))?;
            for row in rows {
                out.push(row?);
            }
        }
        Ok(out)
    }

    /// Looks units up by row id, keyed by row id: what every caller that
    /// joins rows back to their units needs (ids not found are absent).
    pub fn nodes_by_rowid(&self, rowids: &[i64]) -> Result<HashMap<i64, NodeRecord>> {
        Ok(self
            .nodes_by_rowids(rowids)?
            .into_iter()
            .map(|n| (n.rowid, n))
            .collect())
    }

    /// One unit by row id.
    pub fn node_by_rowid(&self, rowid: i64) -> Result<Option<NodeRecord>> {
        #[cfg(feature = "lookup-log")]
        lookup_log::note("unit", rowid);
        Ok(self.nodes_by_rowids(&[rowid])?.into_iter().next())
    }

    /// Every unit of the file at `path` (none when it is not indexed), in
    /// row id order: one cached statement over the file's node id range,
    /// where [`Store::nodes_by_rowids`] of that range prepares a statement
    /// with a placeholder per unit (the history strategy reads tens of
    /// files per request, issue 31 item 6).
    pub fn nodes_of_file(&self, path: &str) -> Result<Vec<NodeRecord>> {
        let sql = format!(
            "SELECT {NODE_COLUMNS} FROM files f JOIN nodes n
               ON n.id BETWEEN f.first_node_id AND f.last_node_id
             WHERE f.path = ?1 ORDER BY n.id"
        );
        let mut stmt = self.conn.prepare_cached(&sql)?;
        let rows = stmt.query_map([path], |r| node_from_row(r, 0.0))?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    /// The file unit of a path.
    pub fn file_node(&self, path: &str) -> Result<Option<NodeRecord>> {
        let sql = format!(
            "SELECT {NODE_COLUMNS} FROM files f JOIN nodes n ON n.id = f.first_node_id
             WHERE f.path = ?1 AND n.parent_id IS NULL AND n.node_type = 'file' LIMIT 1"
        );
        Ok(self
            .conn
            .prepare_cached(&sql)?
            .query_row([path], |r| node_from_row(r, 0.0))
            .optional()?)
    }

    /// Units whose name matches `name`, up to `cap` rows, ordered by path and
    /// position; substring matches shortest name first (the closer matches),
    /// then by name, path and position, whether SQLite or the name catalog answers.
    pub fn nodes_by_name(&self, name: &str, how: NameMatch, cap: usize) -> Result<Vec<NodeRecord>> {
        if how == NameMatch::Substring
            && let Some(names) = self.substring_names_from_catalog(name, cap)?
        {
            return self.nodes_by_lower_names(&names, cap);
        }
        let (condition, arg) = match how {
            NameMatch::Equal => ("n.name = ?1 COLLATE NOCASE", name.to_string()),
            NameMatch::Prefix => (
                "n.name LIKE ?1 ESCAPE '\\' AND n.name <> ?2 COLLATE NOCASE",
                format!("{}%", like_escape(name)),
            ),
            NameMatch::Substring => (
                "n.name LIKE ?1 ESCAPE '\\' AND n.name NOT LIKE ?3 ESCAPE '\\'",
                format!("%{}%", like_escape(name)),
            ),
        };
        // Substring matches: shortest name first, the order the catalog gives.
        // (`lower` folds ASCII only, like `to_ascii_lowercase`; the BLOB length is in bytes.)
        let order = if how == NameMatch::Substring {
            "length(CAST(n.name AS BLOB)), lower(n.name), f.path, n.start_byte"
        } else {
            "f.path, n.start_byte"
        };
        let sql = format!(
            "SELECT {NODE_COLUMNS} FROM nodes n JOIN files f ON f.id = n.file_id
             WHERE n.name IS NOT NULL AND {condition}
             ORDER BY {order} LIMIT {cap}"
        );
        let mut stmt = self.conn.prepare_cached(&sql)?;
        let prefix = format!("{}%", like_escape(name));
        let args: Vec<&str> = match how {
            NameMatch::Equal => vec![&arg],
            NameMatch::Prefix => vec![&arg, name],
            NameMatch::Substring => vec![&arg, name, &prefix],
        };
        let rows = stmt.query_map(params_from_iter(args), |r| node_from_row(r, 0.0))?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    /// `PRAGMA data_version`: changes whenever another connection commits.
    pub fn data_version(&self) -> Result<i64> {
        Ok(self
            .conn
            .query_row("PRAGMA data_version", [], |r| r.get(0))?)
    }

    /// Up to `k` distinct unit names nearest to `name` by edit distance
    /// (ASCII case ignored), nearest first, then by name: the suggestions of
    /// a graph target that matched nothing. Only names within a third of
    /// the name's length (at least 1, at most 3 edits) are offered, and the
    /// name itself (in any case) is not.
    pub fn nearest_names(&self, name: &str, k: usize) -> Result<Vec<String>> {
        let max = (name.chars().count() / 3).clamp(1, 3);
        self.refresh_name_catalog()?;
        let catalog = self.names.catalog.borrow();
        let mut near: Vec<(usize, &String)> = Vec::new();
        for candidate in catalog.iter().flat_map(|c| c.spellings()) {
            if candidate.eq_ignore_ascii_case(name) {
                continue;
            }
            if let Some(d) = crate::text::edit_distance_within(name, candidate, max) {
                near.push((d, candidate));
            }
        }
        near.sort();
        Ok(near.into_iter().take(k).map(|(_, n)| n.clone()).collect())
    }

    /// Builds this connection's [`NameCatalog`], or rebuilds it when
    /// another connection committed since.
    fn refresh_name_catalog(&self) -> Result<()> {
        let version = self.data_version()?;
        let fresh = self
            .names
            .catalog
            .borrow()
            .as_ref()
            .is_some_and(|c| c.data_version == version);
        if fresh {
            return Ok(());
        }
        *self.names.catalog.borrow_mut() = Some(NameCatalog::read(&self.conn, version)?);
        Ok(())
    }

    /// Names (lower-cased) that contain `needle` but do not start with it,
    /// shortest first, enough of them to cover `cap` units. `None` when the
    /// catalog is not worth building yet (a connection's first substring search).
    fn substring_names_from_catalog(
        &self,
        needle: &str,
        cap: usize,
    ) -> Result<Option<Vec<String>>> {
        let cache = &self.names;
        let version = self.data_version()?;
        let fresh = cache
            .catalog
            .borrow()
            .as_ref()
            .is_some_and(|c| c.data_version == version);
        if !fresh {
            if !cache.searched_without.replace(true) {
                return Ok(None);
            }
            self.refresh_name_catalog()?;
        }
        let catalog = cache.catalog.borrow();
        let Some(catalog) = catalog.as_ref() else {
            return Ok(None);
        };
        let mut found = catalog.containing_not_at_start(needle);
        found.sort_by(|a, b| a.0.len().cmp(&b.0.len()).then_with(|| a.0.cmp(b.0)));
        let mut units = 0usize;
        let mut out = Vec::new();
        for (name, count) in found {
            if units >= cap {
                break;
            }
            units += count as usize;
            out.push(name.to_string());
        }
        Ok(Some(out))
    }

    /// Units named (in any ASCII case) one of `lower_names`: in the order of
    /// the names, then by path and position; at most `cap`.
    fn nodes_by_lower_names(&self, lower_names: &[String], cap: usize) -> Result<Vec<NodeRecord>> {
        let mut out = Vec::new();
        for chunk in lower_names.chunks(500) {
            let placeholders = vec!["?"; chunk.len()].join(",");
            let sql = format!(
                "SELECT {NODE_COLUMNS} FROM nodes n JOIN files f ON f.id = n.file_id
                 WHERE n.name COLLATE NOCASE IN ({placeholders})"
            );
            let mut stmt = self.conn.prepare(&sql)?;
            let rows = stmt.query_map(params_from_iter(chunk.iter()), |r| node_from_row(r, 0.0))?;
            for row in rows {
                out.push(row?);
            }
        }
        let rank: HashMap<&str, usize> = lower_names
            .iter()
            .enumerate()
            .map(|(i, n)| (n.as_str(), i))
            .collect();
        out.sort_by_cached_key(|n| {
            let name_rank = n
                .name
                .as_deref()
                .and_then(|s| rank.get(s.to_ascii_lowercase().as_str()).copied())
                .unwrap_or(usize::MAX);
            (name_rank, n.file_path.clone(), n.start_byte)
        });
        out.truncate(cap);
        Ok(out)
    }

    /// Children of the given units, ordered by path and position.
    pub fn children_of(&self, parent_rowids: &[i64]) -> Result<Vec<NodeRecord>> {
        #[cfg(feature = "lookup-log")]
        for p in parent_rowids {
            lookup_log::note("members", *p);
        }
        let mut out = Vec::new();
        for chunk in parent_rowids.chunks(500) {
            let placeholders = vec!["?"; chunk.len()].join(",");
            let sql = format!(
                "SELECT {NODE_COLUMNS} FROM nodes p JOIN files f ON f.id = p.file_id
                   JOIN nodes n ON n.id BETWEEN f.first_node_id AND f.last_node_id
                 WHERE p.id IN ({placeholders}) AND n.parent_id = p.id
                 ORDER BY f.path, n.start_byte"
            );
            let mut stmt = self.conn.prepare(&sql)?;
            let rows = stmt.query_map(params_from_iter(chunk.iter()), |r| node_from_row(r, 0.0))?;
            for row in rows {
                out.push(row?);
            }
        }
        Ok(out)
    }

    /// Full-text search. `match_expr` must be a well-formed FTS5 expression
    /// (built by the query module from quoted terms). Returns up to `cap`
    /// units, best first, with their BM25 score (lower is better), only
    /// from the files in `scope` when one is given (the filter runs inside
    /// the search, so a glob never loses matches to the cap).
    /// Column weights: name 10, path 4, body 1.
    pub fn fts_search(
        &self,
        match_expr: &str,
        cap: usize,
        scope: Option<&FileScope>,
    ) -> Result<Vec<NodeRecord>> {
        let within = if scope.is_some() { SCOPE_CLAUSE } else { "" };
        let sql = format!(
            "SELECT {NODE_COLUMNS}, s.score FROM
               (SELECT rowid, bm25(fts, 10.0, 4.0, 1.0) AS score FROM fts WHERE fts MATCH ?1 {within}
                ORDER BY score LIMIT ?2) AS s
             JOIN nodes n ON n.id = s.rowid JOIN files f ON f.id = n.file_id"
        );
        let mut stmt = self.conn.prepare_cached(&sql)?;
        let map = |r: &rusqlite::Row<'_>| {
            let score: f64 = r.get(14)?;
            node_from_row(r, score)
        };
        let rows = match scope {
            Some(scope) => {
                stmt.query_map(rusqlite::params![match_expr, cap as i64, scope.json()], map)?
            }
            None => stmt.query_map(rusqlite::params![match_expr, cap as i64], map)?,
        };
        let mut out = rows.collect::<rusqlite::Result<Vec<_>>>()?;
        // Sorted here rather than by SQLite: a second temporary B-tree for
        // 2,000 rows cost more than the join itself.
        out.sort_by(|a, b| {
            a.score
                .total_cmp(&b.score)
                .then_with(|| a.file_path.cmp(&b.file_path))
                .then_with(|| a.start_byte.cmp(&b.start_byte))
        });
        Ok(out)
    }

    /// Number of units matching the FTS expression, within `scope` if given
    /// (no ranking: cheap).
    pub fn fts_count(&self, match_expr: &str, scope: Option<&FileScope>) -> Result<u64> {
        let n: i64 = match scope {
            Some(scope) => self
                .conn
                .prepare_cached(&format!(
                    "SELECT COUNT(*) FROM fts WHERE fts MATCH ?1 {}",
                    SCOPE_CLAUSE.replace("?3", "?2")
                ))?
                .query_row(rusqlite::params![match_expr, scope.json()], |r| r.get(0))?,
            None => self
                .conn
                .prepare_cached("SELECT COUNT(*) FROM fts WHERE fts MATCH ?1")?
                .query_row([match_expr], |r| r.get(0))?,
        };
        Ok(n as u64)
    }

    /// The files whose repo-relative path `keep` accepts, as a scope for
    /// the searches.
    pub fn file_scope(&self, keep: impl Fn(&str) -> bool) -> Result<FileScope> {
        let mut stmt = self.conn.prepare_cached("SELECT id, path FROM files")?;
        let rows = stmt.query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)))?;
        let mut ids = Vec::new();
        for row in rows {
            let (id, path) = row?;
            if keep(&path) {
                ids.push(id);
            }
        }
        ids.sort_unstable();
        Ok(FileScope { ids })
    }

    /// References to `name` (case-insensitive), up to `cap`, ordered by
    /// path and position, only in the files of `scope` when one is given.
    pub fn refs_by_name(
        &self,
        name: &str,
        cap: usize,
        scope: Option<&FileScope>,
    ) -> Result<Vec<RefRecord>> {
        let ids: Vec<i64> = self
            .ref_name_ids(name)?
            .into_iter()
            .map(|(id, _)| id)
            .collect();
        self.refs_named(&[ids], cap, scope)
    }

    /// The first `top` references to `name` (case-insensitive) — those
    /// spelled exactly `name` first, then by path and position — and how
    /// many there are in all. The total comes from the postings alone; only
    /// the files that make up the page are opened.
    pub fn refs_top(&self, name: &str, top: usize) -> Result<(Vec<RefRecord>, u64)> {
        let ids = self.ref_name_ids(name)?;
        let mut total = 0u64;
        let mut uses = self.conn.prepare_cached(
            "SELECT COALESCE(SUM(name_uses), 0) FROM ref_postings WHERE name_id = ?1",
        )?;
        for (id, _) in &ids {
            total += uses.query_row([id], |r| r.get::<_, i64>(0))? as u64;
        }
        if total == 0 {
            return Ok((vec![], 0));
        }
        let (exact, other_case): (Vec<_>, Vec<_>) =
            ids.into_iter().partition(|(_, text)| text == name);
        let groups =
            [exact, other_case].map(|g| g.into_iter().map(|(id, _)| id).collect::<Vec<_>>());
        Ok((self.refs_named(&groups, top, None)?, total))
    }

    /// `ref_names` ids and texts equal to `name` in any case.
    fn ref_name_ids(&self, name: &str) -> Result<Vec<(i64, String)>> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT id, text FROM ref_names WHERE text = ?1 COLLATE NOCASE")?;
        let rows = stmt.query_map([name], |r| Ok((r.get(0)?, r.get(1)?)))?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    /// Up to `cap` references whose name is in one of `groups` (sets of
    /// `ref_names` ids): the first group's references first, each group
    /// ordered by path and position. Opens only the blobs of files the
    /// postings list, in path order, and stops once `cap` are found.
    fn refs_named(
        &self,
        groups: &[Vec<i64>],
        cap: usize,
        scope: Option<&FileScope>,
    ) -> Result<Vec<RefRecord>> {
        let mut found: Vec<(usize, PackedRef)> = vec![];
        let mut files: Vec<(String, String)> = vec![];
        let mut postings = self.conn.prepare_cached(
            "SELECT f.id, f.path, f.content_hash FROM ref_postings p JOIN files f ON f.id = p.file_id
             WHERE p.name_id = ?1 AND p.name_uses > 0",
        )?;
        'groups: for group in groups {
            let mut group_files: BTreeMap<String, (i64, String)> = BTreeMap::new();
            for id in group {
                let rows = postings.query_map([id], |r| {
                    Ok((
                        r.get::<_, String>(1)?,
                        (r.get::<_, i64>(0)?, r.get::<_, String>(2)?),
                    ))
                })?;
                for row in rows {
                    let (path, file) = row?;
                    group_files.insert(path, file);
                }
            }
            for (path, (file_id, content_hash)) in group_files {
                if found.len() >= cap {
                    break 'groups;
                }
                if scope.is_some_and(|s| !s.contains(file_id)) {
                    continue;
                }
                let file_index = files.len();
                files.push((path, content_hash));
                for r in self.file_refs(file_id)? {
                    if found.len() < cap && group.contains(&r.name_id) {
                        found.push((file_index, r));
                    }
                }
            }
        }
        let mut names = NameTexts::default();
        let mut source = self.conn.prepare_cached(
            "SELECT 'h' || lower(hex(handle)), qualified_name FROM nodes WHERE id = ?1",
        )?;
        let mut out = Vec::with_capacity(found.len());
        for (file_index, r) in found {
            let (source_handle, source_qualified_name) =
                source.query_row([r.source_node_id], |row| Ok((row.get(0)?, row.get(1)?)))?;
            let (file_path, content_hash) = files[file_index].clone();
            out.push(RefRecord {
                file_path,
                content_hash,
                name: names.text(self, r.name_id)?,
                qualifier: r.qualifier_id.map(|q| names.text(self, q)).transpose()?,
                ref_type: super::ref_type_name(i64::from(r.ref_type)).to_string(),
                start_byte: r.start_byte() as usize,
                end_byte: r.end_byte as usize,
                line: r.line,
                source_handle,
                source_qualified_name,
            });
        }
        Ok(out)
    }

    /// A file's references in stored order (by end, then type); none when it has no row.
    pub fn file_refs(&self, file_id: i64) -> Result<Vec<PackedRef>> {
        let blob: Option<Vec<u8>> = self
            .conn
            .prepare_cached("SELECT refs FROM file_refs WHERE file_id = ?1")?
            .query_row([file_id], |r| r.get(0))
            .optional()?;
        let Some(blob) = blob else {
            return Ok(vec![]);
        };
        self.decoded_refs
            .get_or_decode(file_id, &blob, |b| packed_refs::decode(b, file_id))
    }

    /// Totals for `status`, summed over `files` alone (one small row per
    /// file: its node range and `ref_count` stand for its units and
    /// references), so a poll does not scan `nodes` or `ref_postings`.
    pub fn counts(&self) -> Result<IndexCounts> {
        let mut totals = IndexCounts::default();
        let mut stmt = self.conn.prepare_cached(
            "SELECT language, COUNT(*), SUM(token_count), SUM(size), SUM(ref_count),
                    SUM(max(last_node_id - first_node_id + 1, 0))
             FROM files GROUP BY language",
        )?;
        let mut rows = stmt.query([])?;
        while let Some(r) = rows.next()? {
            let files = r.get::<_, i64>(1)?.max(0) as u64;
            totals.files += files;
            totals.tokens += r.get::<_, i64>(2)?.max(0) as u64;
            totals.bytes += r.get::<_, i64>(3)?.max(0) as u64;
            totals.refs += r.get::<_, i64>(4)?.max(0) as u64;
            totals.units += r.get::<_, i64>(5)?.max(0) as u64;
            totals.languages.insert(r.get::<_, String>(0)?, files);
        }
        Ok(totals)
    }

    /// The totals of [`Store::counts`] recomputed from the rows they stand
    /// for (`nodes`, `ref_postings`; slow on a large index).
    pub fn counts_by_scan(&self) -> Result<IndexCounts> {
        let (files, tokens, bytes) = self.conn.query_row(
            "SELECT COUNT(*), COALESCE(SUM(token_count), 0), COALESCE(SUM(size), 0) FROM files",
            [],
            |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, i64>(1)?,
                    r.get::<_, i64>(2)?,
                ))
            },
        )?;
        let units: i64 = self
            .conn
            .query_row("SELECT COUNT(*) FROM nodes", [], |r| r.get(0))?;
        let refs: i64 = self.conn.query_row(
            "SELECT COALESCE(SUM(name_uses), 0) FROM ref_postings",
            [],
            |r| r.get(0),
        )?;
        let languages =
            self.language_counts("SELECT language, COUNT(*) FROM files GROUP BY language")?;
        Ok(IndexCounts {
            files: files as u64,
            tokens: tokens as u64,
            bytes: bytes as u64,
            units: units as u64,
            refs: refs as u64,
            languages,
        })
    }

    /// How many of [`Store::counts`]' totals disagree with a scan of the
    /// rows they stand for (0 in a consistent index: `files.ref_count`
    /// against the postings, the node ranges against `nodes`). Used by tests.
    pub fn totals_drift(&self) -> Result<u64> {
        let kept = self.counts()?;
        let scanned = self.counts_by_scan()?;
        let fields = [
            kept.files != scanned.files,
            kept.tokens != scanned.tokens,
            kept.bytes != scanned.bytes,
            kept.units != scanned.units,
            kept.refs != scanned.refs,
            kept.languages != scanned.languages,
        ];
        Ok(fields.iter().filter(|&&differs| differs).count() as u64)
    }

    fn language_counts(&self, sql: &str) -> Result<BTreeMap<String, u64>> {
        let mut languages = BTreeMap::new();
        let mut stmt = self.conn.prepare(sql)?;
        for row in stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))? {
            let (lang, n) = row?;
            languages.insert(lang, n.max(0) as u64);
        }
        Ok(languages)
    }

    /// Skip counts recorded by the last run.
    pub fn skipped_counts(&self) -> Result<BTreeMap<String, u64>> {
        Ok(self
            .meta(meta_keys::SKIPPED)?
            .and_then(|s| serde_json::from_str(&s).ok())
            .unwrap_or_default())
    }

    /// Rows left behind by a bug: nodes without a file, refs without a node
    /// or name, FTS rows without a node, names without a reference. Always zero in a consistent index.
    pub fn orphan_rows(&self) -> Result<u64> {
        let nodes: i64 = self.conn.query_row(
            // A unit outside its file's id range, or a file whose range has gaps.
            "SELECT (SELECT COUNT(*) FROM nodes n LEFT JOIN files f ON f.id = n.file_id
                     WHERE f.id IS NULL OR n.id NOT BETWEEN f.first_node_id AND f.last_node_id)
                  + (SELECT COUNT(*) FROM files f WHERE f.last_node_id - f.first_node_id + 1
                       <> (SELECT COUNT(*) FROM nodes WHERE id BETWEEN f.first_node_id AND f.last_node_id))",
            [],
            |r| r.get(0),
        )?;
        let refs = self.orphan_refs()?;
        // A contentless table cannot list its rows, but its doc-size table can.
        let fts: i64 = self.conn.query_row(
            "SELECT COUNT(*) FROM fts_docsize WHERE id NOT IN (SELECT id FROM nodes)",
            [],
            |r| r.get(0),
        )?;
        let fts_missing: i64 = self.conn.query_row(
            "SELECT COUNT(*) FROM nodes WHERE id NOT IN (SELECT id FROM fts_docsize)",
            [],
            |r| r.get(0),
        )?;
        // Names no reference uses: dropped at the end of every run that changed
        // something, so only a killed run can leave some (until the next run).
        let names: i64 = self.conn.query_row(
            "SELECT COUNT(*) FROM ref_names
             WHERE NOT EXISTS (SELECT 1 FROM ref_postings WHERE name_id = ref_names.id)",
            [],
            |r| r.get(0),
        )?;
        let edges = self.orphan_edges()?;
        Ok((nodes + refs + fts + fts_missing + names) as u64 + edges)
    }

    /// The reference part of [`Store::orphan_rows`]: blobs and postings
    /// without a file, postings without a name, references whose unit is
    /// not one of their file's or whose name is gone, and files whose
    /// postings differ from their blob's.
    fn orphan_refs(&self) -> Result<i64> {
        let mut orphans: i64 = self.conn.query_row(
            "SELECT (SELECT COUNT(*) FROM file_refs WHERE file_id NOT IN (SELECT id FROM files))
                  + (SELECT COUNT(*) FROM ref_postings WHERE file_id NOT IN (SELECT id FROM files)
                       OR name_id NOT IN (SELECT id FROM ref_names))",
            [],
            |r| r.get(0),
        )?;
        let mut stored: HashMap<i64, BTreeMap<i64, u64>> = HashMap::new();
        {
            let mut stmt = self
                .conn
                .prepare("SELECT file_id, name_id, name_uses FROM ref_postings")?;
            let rows = stmt.query_map([], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, i64>(1)?,
                    r.get::<_, i64>(2)?,
                ))
            })?;
            for row in rows {
                let (file, name, uses) = row?;
                stored.entry(file).or_default().insert(name, uses as u64);
            }
        }
        let mut names = std::collections::HashSet::new();
        {
            let mut stmt = self.conn.prepare("SELECT id FROM ref_names")?;
            for id in stmt.query_map([], |r| r.get::<_, i64>(0))? {
                names.insert(id?);
            }
        }
        let mut blobs = self.conn.prepare("SELECT file_id, refs FROM file_refs")?;
        let mut rows = blobs.query([])?;
        while let Some(row) = rows.next()? {
            let file_id: i64 = row.get(0)?;
            let blob: Vec<u8> = row.get(1)?;
            let refs = packed_refs::decode(&blob, file_id)?;
            for r in &refs {
                let unit_file = self.unit_file(r.source_node_id)?;
                let names_known =
                    names.contains(&r.name_id) && r.qualifier_id.is_none_or(|q| names.contains(&q));
                if unit_file != Some(file_id) || !names_known {
                    orphans += 1;
                }
            }
            if stored.remove(&file_id).unwrap_or_default() != super::write::postings(&refs) {
                orphans += 1;
            }
        }
        // Postings of files that have no blob.
        orphans += stored.len() as i64;
        Ok(orphans)
    }

    /// Number of units whose FTS row contains `term` (an exact, lower-case token).
    pub fn term_doc_count(&self, term: &str) -> Result<u64> {
        Ok(self
            .conn
            .prepare_cached("SELECT doc FROM fts_vocab WHERE term = ?1")?
            .query_row([term], |r| r.get::<_, i64>(0))
            .optional()?
            .unwrap_or(0) as u64)
    }

    /// Number of units in the index.
    pub fn unit_count(&self) -> Result<u64> {
        Ok(self
            .conn
            .query_row("SELECT COUNT(*) FROM nodes", [], |r| r.get::<_, i64>(0))? as u64)
    }

    /// Which of `rowids` match the FTS expression.
    pub fn fts_filter(&self, match_expr: &str, rowids: &[i64]) -> Result<Vec<i64>> {
        if rowids.is_empty() {
            return Ok(vec![]);
        }
        let placeholders = vec!["?"; rowids.len()].join(",");
        let sql = format!("SELECT rowid FROM fts WHERE fts MATCH ? AND rowid IN ({placeholders})");
        let mut stmt = self.conn.prepare(&sql)?;
        let mut args: Vec<rusqlite::types::Value> = vec![match_expr.to_string().into()];
        args.extend(rowids.iter().map(|r| rusqlite::types::Value::from(*r)));
        let rows = stmt.query_map(params_from_iter(args), |r| r.get::<_, i64>(0))?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    /// The file (`files.id`) of a unit; `None` for an unknown unit.
    fn unit_file(&self, rowid: i64) -> Result<Option<i64>> {
        Ok(self
            .conn
            .prepare_cached("SELECT file_id FROM nodes WHERE id = ?1")?
            .query_row([rowid], |r| r.get(0))
            .optional()?)
    }

    /// Names called or typed inside a unit (its own references), in order.
    pub fn refs_in_unit(&self, rowid: i64, cap: usize) -> Result<Vec<(String, String)>> {
        let Some(file_id) = self.unit_file(rowid)? else {
            return Ok(vec![]);
        };
        let mut own: Vec<PackedRef> = self
            .file_refs(file_id)?
            .into_iter()
            .filter(|r| r.source_node_id == rowid)
            .collect();
        own.sort_by_key(|r| (r.start_byte(), r.end_byte, r.ref_type));
        own.truncate(cap);
        let mut names = NameTexts::default();
        own.into_iter()
            .map(|r| {
                Ok((
                    names.text(self, r.name_id)?,
                    super::ref_type_name(i64::from(r.ref_type)).to_string(),
                ))
            })
            .collect()
    }

    /// The names each of `units` references, by unit id: a reference site
    /// counts for the smallest of `units` whose byte span holds it, so a
    /// class and its method in `units` do not both claim the method's
    /// calls. A unit whose file is unknown references nothing.
    pub fn ref_names_within(&self, units: &[NodeRecord]) -> Result<HashMap<i64, HashSet<String>>> {
        let mut by_file: HashMap<i64, Vec<&NodeRecord>> = HashMap::new();
        for n in units {
            if let Some(file_id) = self.unit_file(n.rowid)? {
                by_file.entry(file_id).or_default().push(n);
            }
        }
        let mut names = NameTexts::default();
        let mut out: HashMap<i64, HashSet<String>> = HashMap::new();
        for (file_id, units) in by_file {
            // Stored by end byte: each unit's sites are one run of them.
            let refs = self.file_refs(file_id)?;
            // For each site, the smallest unit holding it: (span length, unit id).
            let mut owner: Vec<Option<(usize, i64)>> = vec![None; refs.len()];
            for n in units {
                let (start, end) = (n.start_byte as u64, n.end_byte as u64);
                let len = n.end_byte.saturating_sub(n.start_byte);
                let first = refs.partition_point(|r| r.end_byte <= start);
                for (i, r) in refs.iter().enumerate().skip(first) {
                    if r.end_byte > end {
                        break;
                    }
                    if r.start_byte() >= start && owner[i].is_none_or(|(l, _)| len < l) {
                        owner[i] = Some((len, n.rowid));
                    }
                }
            }
            for (r, o) in refs.iter().zip(owner) {
                if let Some((_, unit)) = o {
                    out.entry(unit)
                        .or_default()
                        .insert(names.text(self, r.name_id)?);
                }
            }
        }
        Ok(out)
    }

    /// Files skipped on earlier runs: path → (size, mtime, reason).
    pub fn skipped_files(&self) -> Result<HashMap<String, (u64, i64, String)>> {
        let mut stmt = self
            .conn
            .prepare("SELECT path, size, mtime_ns, reason FROM skipped_files")?;
        let rows = stmt.query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                (
                    r.get::<_, i64>(1)? as u64,
                    r.get::<_, i64>(2)?,
                    r.get::<_, String>(3)?,
                ),
            ))
        })?;
        Ok(rows.collect::<rusqlite::Result<HashMap<_, _>>>()?)
    }
}

/// One stored unit-vector row as [`Store::each_unit_vector`] gives it:
/// its text and blob borrowed from SQLite.
#[derive(Clone, Copy, Debug)]
pub struct UnitVectorRef<'a> {
    /// `files.id`.
    pub file_id: i64,
    /// The content hash the vectors were computed from, as stored.
    pub content_hash: &'a [u8],
    /// The file's first node id then.
    pub first_node: i64,
    /// `canopy_core::embed::Quantized::to_blob`.
    pub data: &'a [u8],
}

#[cfg(test)]
mod tests {
    use super::NodeRecord;
    use crate::handle::HandleId;

    fn record(path: &str, handle: &str) -> NodeRecord {
        NodeRecord {
            rowid: 1,
            handle: handle.to_string(),
            file_path: path.to_string(),
            content_hash: "0".repeat(16),
            node_type: "function".to_string(),
            name: Some("f".to_string()),
            qualified_name: Some("f".to_string()),
            parent_rowid: None,
            start_byte: 10,
            end_byte: 20,
            start_line: 2,
            end_line: 3,
            token_count: 4,
            preview_start: 10,
            score: 0.0,
        }
    }

    /// The borrowed rows are the rows [`super::Store::unit_vectors`]
    /// copies, of the one model only, in file id order; `false` stops.
    #[test]
    fn borrowed_unit_vector_rows_are_the_stored_rows_of_one_model() {
        use crate::store::write::UnitVectorRow;
        let dir = tempfile::tempdir().unwrap();
        let (mut store, _) = crate::store::Store::open(&dir.path().join("index.db")).unwrap();
        for (id, path) in [(3, "c.py"), (1, "a.py"), (2, "b.py")] {
            store
                .conn
                .execute(
                    "INSERT INTO files(id, path, language, size, mtime_ns, content_hash, line_count,
                     token_count, indexed_at, first_node_id, last_node_id, ref_count)
                     VALUES (?1, ?2, 'python', 1, 1, ?3, 1, 1, 1, ?1, ?1, 0)",
                    rusqlite::params![id, path, format!("hash{id}")],
                )
                .unwrap();
        }
        let row = |file_id: i64, data: &[u8]| UnitVectorRow {
            file_id,
            content_hash: format!("hash{file_id}"),
            first_node: file_id,
            data: data.to_vec(),
        };
        let big = vec![7u8; 100_000]; // past a page: read from overflow pages
        let ours = [row(3, b"three"), row(1, &big)];
        store.write_unit_vectors("m1", &ours).unwrap();
        store
            .write_unit_vectors("m2", &[row(2, b"other model")])
            .unwrap();
        let mut seen = Vec::new();
        store
            .each_unit_vector("m1", |r| {
                seen.push(UnitVectorRow {
                    file_id: r.file_id,
                    content_hash: String::from_utf8(r.content_hash.to_vec()).unwrap(),
                    first_node: r.first_node,
                    data: r.data.to_vec(),
                });
                true
            })
            .unwrap();
        let copied = store.unit_vectors("m1", &[1, 2, 3]).unwrap();
        let mut expected: Vec<UnitVectorRow> = copied.into_values().collect();
        expected.sort_by_key(|r| r.file_id);
        // Compared whole, shown short (the big blob's bytes are not printed).
        let short = |rows: &[UnitVectorRow]| -> Vec<(i64, String, usize)> {
            rows.iter()
                .map(|r| (r.file_id, r.content_hash.clone(), r.data.len()))
                .collect()
        };
        assert!(
            seen == expected,
            "{:?} != {:?}",
            short(&seen),
            short(&expected)
        );
        let want = [ours[1].clone(), ours[0].clone()];
        assert!(seen == want, "{:?} != {:?}", short(&seen), short(&want));
        let mut calls = 0;
        store
            .each_unit_vector("m1", |_| {
                calls += 1;
                false
            })
            .unwrap();
        assert_eq!(calls, 1, "stops when told");
    }

    #[test]
    fn a_stored_handle_is_the_id_and_a_damaged_one_gets_an_id_of_its_own() {
        let stored = HandleId::derive("a.py", "function", "f", 0);
        let n = record("a.py", stored.as_str());
        assert_eq!(n.handle_id(), stored);
        let h = n.to_handle("def f():".to_string(), true);
        assert_eq!((h.id, h.span.start, h.span.end), (stored, 10, 20));
        assert_eq!((h.line_range, h.token_count, h.stale), ([2, 3], 4, true));
        assert_eq!((h.preview.as_str(), h.content), ("def f():", None));

        // Two damaged rows (a blob of the wrong length reads as too few
        // digits): stable ids, one per unit, never the same one.
        let (a, b) = (record("a.py", "h0a1b"), record("b.py", "h0a1b"));
        assert_eq!(a.handle_id(), record("a.py", "h0a1b").handle_id());
        assert_ne!(a.handle_id(), b.handle_id());
        assert_ne!(a.handle_id(), record("a.py", "h").handle_id());
        assert_eq!(
            a.handle_id(),
            HandleId::derive("a.py", "function", "h0a1b", 0)
        );
    }
}
