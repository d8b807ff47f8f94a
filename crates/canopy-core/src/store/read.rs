//! Reads: lookups and searches for queries, expansion and status.
//!
//! Searches return rows in a stable order (score, then path and position)
//! so the same index always gives the same answer.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap};

use rusqlite::{OptionalExtension, Row, params_from_iter};

use super::{Store, meta_keys};
use crate::error::Result;

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

/// A unit as stored, joined with its file.
#[derive(Clone, Debug, PartialEq)]
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

const REF_COLUMNS: &str = "f.path, f.content_hash, rn.text,
    (SELECT text FROM ref_names WHERE id = r.qualifier_id), r.ref_type,
    r.end_byte - r.length, r.end_byte, r.line, 'h' || lower(hex(sn.handle)), sn.qualified_name";

fn ref_from_row(r: &Row) -> rusqlite::Result<RefRecord> {
    Ok(RefRecord {
        file_path: r.get(0)?,
        content_hash: r.get(1)?,
        name: r.get(2)?,
        qualifier: r.get(3)?,
        ref_type: super::ref_type_name(r.get(4)?).to_string(),
        start_byte: r.get::<_, i64>(5)? as usize,
        end_byte: r.get::<_, i64>(6)? as usize,
        line: r.get(7)?,
        source_handle: r.get(8)?,
        source_qualified_name: r.get(9)?,
    })
}

/// The distinct unit names of the index (ASCII-lower-cased, the case rule of
/// SQLite's `LIKE` and `NOCASE`) with how many units carry each.
///
/// A substring search (`LIKE '%x%'`) cannot use an index, so SQLite tests
/// every unit name (~7 ms on 95,000 units). A long-lived engine answers
/// many queries, so after its first substring search a connection keeps
/// this list in memory (a few MB at most) and scans that instead; a one-shot
/// CLI process never pays for building it. The list is rebuilt when
/// `PRAGMA data_version` says another connection (the indexer) committed.
#[derive(Debug, Default)]
struct NameCatalog {
    data_version: i64,
    /// (lower-cased name, units), sorted by name.
    names: Vec<(String, u32)>,
}

/// Per-connection state for [`NameCatalog`]: the catalog once built, and
/// whether a substring search already ran without it.
#[derive(Debug, Default)]
pub(crate) struct NameCatalogCache {
    catalog: RefCell<Option<NameCatalog>>,
    searched_without: Cell<bool>,
}

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

    /// Looks a unit up by handle id.
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

    /// The file unit of a path.
    pub fn file_node(&self, path: &str) -> Result<Option<NodeRecord>> {
        let sql = format!(
            "SELECT {NODE_COLUMNS} FROM nodes n JOIN files f ON f.id = n.file_id
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
            let mut names: Vec<(String, u32)> = Vec::new();
            let mut stmt = self.conn.prepare_cached(
                "SELECT name, COUNT(*) FROM nodes WHERE name IS NOT NULL GROUP BY name COLLATE NOCASE",
            )?;
            let rows = stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))?;
            for row in rows {
                let (name, count) = row?;
                names.push((name.to_ascii_lowercase(), count as u32));
            }
            *cache.catalog.borrow_mut() = Some(NameCatalog {
                data_version: version,
                names,
            });
        }
        let catalog = cache.catalog.borrow();
        let Some(catalog) = catalog.as_ref() else {
            return Ok(None);
        };
        let needle = needle.to_ascii_lowercase();
        let mut found: Vec<&(String, u32)> = catalog
            .names
            .iter()
            .filter(|(n, _)| {
                n.len() > needle.len() && !n.starts_with(&needle) && n.contains(&needle)
            })
            .collect();
        found.sort_by(|a, b| a.0.len().cmp(&b.0.len()).then_with(|| a.0.cmp(&b.0)));
        let mut units = 0usize;
        let mut out = Vec::new();
        for (name, count) in found {
            if units >= cap {
                break;
            }
            units += *count as usize;
            out.push(name.clone());
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
        let mut out = Vec::new();
        for chunk in parent_rowids.chunks(500) {
            let placeholders = vec!["?"; chunk.len()].join(",");
            let sql = format!(
                "SELECT {NODE_COLUMNS} FROM nodes n JOIN files f ON f.id = n.file_id
                 WHERE n.parent_id IN ({placeholders}) ORDER BY f.path, n.start_byte"
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
    /// units, best first, with their BM25 score (lower is better).
    /// Column weights: name 10, path 4, body 1.
    pub fn fts_search(&self, match_expr: &str, cap: usize) -> Result<Vec<NodeRecord>> {
        let sql = format!(
            "SELECT {NODE_COLUMNS}, s.score FROM
               (SELECT rowid, bm25(fts, 10.0, 4.0, 1.0) AS score FROM fts WHERE fts MATCH ?1
                ORDER BY score LIMIT ?2) AS s
             JOIN nodes n ON n.id = s.rowid JOIN files f ON f.id = n.file_id"
        );
        let mut stmt = self.conn.prepare_cached(&sql)?;
        let rows = stmt.query_map(rusqlite::params![match_expr, cap as i64], |r| {
            let score: f64 = r.get(14)?;
            node_from_row(r, score)
        })?;
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

    /// Number of units matching the FTS expression (no ranking: cheap).
    pub fn fts_count(&self, match_expr: &str) -> Result<u64> {
        Ok(self
            .conn
            .prepare_cached("SELECT COUNT(*) FROM fts WHERE fts MATCH ?1")?
            .query_row([match_expr], |r| r.get::<_, i64>(0))? as u64)
    }

    /// References to `name` (case-insensitive), up to `cap`, ordered by path and position.
    pub fn refs_by_name(&self, name: &str, cap: usize) -> Result<Vec<RefRecord>> {
        let sql = format!(
            "SELECT {REF_COLUMNS}
             FROM refs r JOIN ref_names rn ON rn.id = r.name_id
               JOIN files f ON f.id = r.file_id JOIN nodes sn ON sn.id = r.source_node_id
             WHERE r.name_id IN (SELECT id FROM ref_names WHERE text = ?1 COLLATE NOCASE)
             ORDER BY f.path, r.end_byte LIMIT {cap}"
        );
        let mut stmt = self.conn.prepare_cached(&sql)?;
        let rows = stmt.query_map([name], ref_from_row)?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    /// The first `top` references to `name` (case-insensitive) — those
    /// spelled exactly `name` first, then by path and position — and how
    /// many there are in all. Only the returned page is joined with its
    /// units: ordering needs nothing beyond the `refs_name` index and `files`.
    pub fn refs_top(&self, name: &str, top: usize) -> Result<(Vec<RefRecord>, u64)> {
        let total = self
            .conn
            .prepare_cached(
                "SELECT COUNT(*) FROM refs
                 WHERE name_id IN (SELECT id FROM ref_names WHERE text = ?1 COLLATE NOCASE)",
            )?
            .query_row([name], |r| r.get::<_, i64>(0))? as u64;
        if total == 0 {
            return Ok((vec![], 0));
        }
        let sql = format!(
            "SELECT {REF_COLUMNS}
             FROM (SELECT r.file_id AS fid, r.end_byte AS eb, r.ref_type AS rt,
                          n.text <> ?2 AS other_case, f.path AS path
                   FROM ref_names n JOIN refs r ON r.name_id = n.id JOIN files f ON f.id = r.file_id
                   WHERE n.text = ?1 COLLATE NOCASE
                   ORDER BY other_case, path, eb LIMIT ?3) AS page
             JOIN refs r ON r.file_id = page.fid AND r.end_byte = page.eb AND r.ref_type = page.rt
             JOIN ref_names rn ON rn.id = r.name_id
             JOIN files f ON f.id = page.fid JOIN nodes sn ON sn.id = r.source_node_id
             ORDER BY page.other_case, page.path, page.eb"
        );
        let mut stmt = self.conn.prepare_cached(&sql)?;
        let rows = stmt.query_map(rusqlite::params![name, name, top as i64], ref_from_row)?;
        Ok((rows.collect::<rusqlite::Result<Vec<_>>>()?, total))
    }

    /// Totals for `status`.
    pub fn counts(&self) -> Result<IndexCounts> {
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
        let refs: i64 = self
            .conn
            .query_row("SELECT COUNT(*) FROM refs", [], |r| r.get(0))?;
        let mut languages = BTreeMap::new();
        let mut stmt = self
            .conn
            .prepare("SELECT language, COUNT(*) FROM files GROUP BY language")?;
        for row in stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))? {
            let (lang, n) = row?;
            languages.insert(lang, n as u64);
        }
        Ok(IndexCounts {
            files: files as u64,
            tokens: tokens as u64,
            bytes: bytes as u64,
            units: units as u64,
            refs: refs as u64,
            languages,
        })
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
            "SELECT COUNT(*) FROM nodes WHERE file_id NOT IN (SELECT id FROM files)",
            [],
            |r| r.get(0),
        )?;
        let refs: i64 = self.conn.query_row(
            "SELECT COUNT(*) FROM refs WHERE file_id NOT IN (SELECT id FROM files)
               OR source_node_id NOT IN (SELECT id FROM nodes)
               OR name_id NOT IN (SELECT id FROM ref_names)
               OR qualifier_id NOT IN (SELECT id FROM ref_names)",
            [],
            |r| r.get(0),
        )?;
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
            "SELECT COUNT(*) FROM ref_names WHERE id NOT IN (SELECT name_id FROM refs)
               AND id NOT IN (SELECT qualifier_id FROM refs WHERE qualifier_id IS NOT NULL)",
            [],
            |r| r.get(0),
        )?;
        Ok((nodes + refs + fts + fts_missing + names) as u64)
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

    /// Names called or typed inside a unit (its own references), in order.
    pub fn refs_in_unit(&self, rowid: i64, cap: usize) -> Result<Vec<(String, String)>> {
        // A unit's references are rows of its file inside its span (the refs key).
        let mut stmt = self.conn.prepare_cached(
            "SELECT rn.text, r.ref_type FROM nodes n JOIN refs r
               ON r.file_id = n.file_id AND r.end_byte > n.start_byte AND r.end_byte <= n.end_byte
               JOIN ref_names rn ON rn.id = r.name_id
             WHERE n.id = ?1 AND r.source_node_id = ?1 ORDER BY r.end_byte - r.length LIMIT ?2",
        )?;
        let rows = stmt.query_map(rusqlite::params![rowid, cap as i64], |r| {
            Ok((r.get(0)?, super::ref_type_name(r.get(1)?).to_string()))
        })?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
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
