//! Writes: the indexer's batches, removals and invalidation.

use std::collections::{BTreeMap, HashMap};

use rusqlite::{Transaction, TransactionBehavior, params};

use super::Store;
use super::packed_refs::{self, PackedRef};
use super::text_totals::{self, TextTotals};
use crate::error::Result;
use crate::lang::ParsedFile;
use crate::text::path_document;

/// A file parsed and ready to write.
pub struct ParsedWrite {
    /// Repo-relative path.
    pub path: String,
    /// Size in bytes.
    pub size: u64,
    /// Modification time (ns).
    pub mtime_ns: i64,
    /// xxh3-64 of the bytes, hex.
    pub content_hash: String,
    /// Number of lines.
    pub line_count: u32,
    /// The parse result (its `facts` are in `facts`, encoded).
    pub parsed: ParsedFile,
    /// The parse's graph facts in their stored form: encoded and compressed
    /// by the worker that parsed the file, not by the single writer.
    pub facts: Option<super::graph_rows::StoredFacts>,
}

/// One change to the index, applied inside a batch transaction.
pub enum FileWrite {
    /// Replace the file's rows with a new parse.
    Parsed(Box<ParsedWrite>),
    /// Content unchanged: only record the new size and mtime.
    Touch {
        /// Repo-relative path.
        path: String,
        /// Size in bytes.
        size: u64,
        /// Modification time (ns).
        mtime_ns: i64,
    },
    /// Remove the file and everything derived from it.
    Remove {
        /// Repo-relative path.
        path: String,
    },
    /// Remember that a file was skipped (and drop it from the index if it was there).
    Skipped {
        /// Repo-relative path.
        path: String,
        /// Size in bytes.
        size: u64,
        /// Modification time (ns).
        mtime_ns: i64,
        /// Why (`binary`, `too_large`, `unreadable`).
        reason: &'static str,
    },
}

/// One file's unit vectors, as stored.
#[derive(Clone, Debug, PartialEq)]
pub struct UnitVectorRow {
    /// `files.id`.
    pub file_id: i64,
    /// The file's content hash the vectors were computed from.
    pub content_hash: String,
    /// The file's first node id then (ids change when a file is re-parsed).
    pub first_node: i64,
    /// `canopy_core::embed::Quantized::to_blob`.
    pub data: Vec<u8>,
}

/// Counts of what a batch wrote.
#[derive(Default, Debug, Clone, Copy)]
pub struct BatchStats {
    /// Units inserted.
    pub units: u64,
    /// References inserted.
    pub refs: u64,
    /// Files removed.
    pub removed: u64,
    /// Files whose earlier rows were deleted (re-parsed or removed): only
    /// then can a reference name or qualifier have lost its last user.
    pub rows_replaced: u64,
}

/// Deletes an indexed file's units and everything keyed by them (text
/// index, references, graph facts and outgoing edges, vectors).
/// `keeps_ids`: the file's new units will get the same ids (see
/// [`same_units_first_id`]), so edges into them stay valid as they are.
/// `deleted` gains the sizes of the text rows deleted ([`text_totals`]).
fn delete_file_rows(
    tx: &Transaction,
    file_id: i64,
    keeps_ids: bool,
    deleted: &mut TextTotals,
) -> Result<()> {
    use rusqlite::OptionalExtension;
    let (first, last): (i64, i64) = tx
        .prepare_cached("SELECT first_node_id, last_node_id FROM files WHERE id = ?1")?
        .query_row([file_id], |r| Ok((r.get(0)?, r.get(1)?)))?;
    deleted.add_rows(tx, first, last)?;
    tx.prepare_cached(
        "DELETE FROM fts WHERE rowid IN (SELECT id FROM nodes WHERE id BETWEEN ?1 AND ?2)",
    )?
    .execute([first, last])?;
    // The postings are keyed by name: the file's old blob says which to drop.
    let old_refs: Option<Vec<u8>> = tx
        .prepare_cached("SELECT refs FROM file_refs WHERE file_id = ?1")?
        .query_row([file_id], |r| r.get(0))
        .optional()?;
    if let Some(blob) = old_refs {
        match packed_refs::decode(&blob, file_id) {
            Ok(refs) => {
                let mut delete_posting = tx.prepare_cached(
                    "DELETE FROM ref_postings WHERE name_id = ?1 AND file_id = ?2",
                )?;
                for (name_id, _) in postings(&refs) {
                    delete_posting.execute([name_id, file_id])?;
                }
            }
            // A damaged blob cannot say which postings are the file's:
            // find them the slow way, so re-indexing the file repairs it.
            Err(_) => {
                tx.prepare_cached("DELETE FROM ref_postings WHERE file_id = ?1")?
                    .execute([file_id])?;
            }
        }
        tx.prepare_cached("DELETE FROM file_refs WHERE file_id = ?1")?
            .execute([file_id])?;
    }
    super::graph::forget_file(tx, file_id, first, last, !keeps_ids)?;
    tx.prepare_cached("DELETE FROM unit_vectors WHERE file_id = ?1")?
        .execute([file_id])?;
    tx.prepare_cached("DELETE FROM nodes WHERE id BETWEEN ?1 AND ?2")?
        .execute([first, last])?;
    Ok(())
}

/// The `ref_postings` rows of one file's references: every name or
/// qualifier id with the number of references that have it as their name.
pub fn postings(refs: &[PackedRef]) -> BTreeMap<i64, u64> {
    let mut out = BTreeMap::new();
    for r in refs {
        *out.entry(r.name_id).or_insert(0) += 1;
        if let Some(q) = r.qualifier_id {
            out.entry(q).or_insert(0);
        }
    }
    out
}

fn file_id(tx: &Transaction, path: &str) -> Result<Option<i64>> {
    use rusqlite::OptionalExtension;
    Ok(tx
        .prepare_cached("SELECT id FROM files WHERE path = ?1")?
        .query_row([path], |r| r.get(0))
        .optional()?)
}

impl Store {
    /// Applies a batch of file writes in one transaction.
    /// Stores unit-vector blobs (see `unit_vectors` in schema.sql), one per
    /// file, replacing the file's earlier row. A file that left the index
    /// since its vectors were computed is skipped.
    pub fn write_unit_vectors(&mut self, model: &str, rows: &[UnitVectorRow]) -> Result<()> {
        let tx = self.conn.transaction()?;
        {
            let mut put = tx.prepare_cached(
                "INSERT OR REPLACE INTO unit_vectors(file_id, model, content_hash, first_node, data)
                 SELECT id, ?2, ?3, ?4, ?5 FROM files WHERE id = ?1 AND content_hash = ?3",
            )?;
            for r in rows {
                put.execute(rusqlite::params![
                    r.file_id,
                    model,
                    r.content_hash,
                    r.first_node,
                    r.data
                ])?;
            }
        }
        // The generation stays (readers see the same units), but what a
        // search scores changed.
        super::new_state_stamp(&tx)?;
        tx.commit()?;
        Ok(())
    }

    /// Writes a batch of files (new content, skips, removals) in one
    /// immediate transaction: whole files or nothing, each file's units with
    /// consecutive ids.
    pub fn write_batch(&mut self, writes: &[FileWrite], now_unix: i64) -> Result<BatchStats> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let mut stats = BatchStats::default();
        // Each file's units get the next consecutive ids (see `files.first_node_id`).
        let mut next_node_id: i64 =
            tx.query_row("SELECT COALESCE(MAX(id), 0) + 1 FROM nodes", [], |r| {
                r.get(0)
            })?;
        let name_ids = &mut self.ref_name_ids;
        name_ids.revalidate(&tx)?;
        let mut deleted = TextTotals::default();
        for write in writes {
            match write {
                FileWrite::Parsed(w) => {
                    let written =
                        write_parsed(&tx, w, now_unix, name_ids, &mut next_node_id, &mut deleted)?;
                    stats.units += written.units;
                    stats.refs += written.refs;
                    stats.rows_replaced += u64::from(written.replaced);
                }
                FileWrite::Touch {
                    path,
                    size,
                    mtime_ns,
                } => {
                    tx.prepare_cached("UPDATE files SET size = ?2, mtime_ns = ?3 WHERE path = ?1")?
                        .execute(params![path, *size as i64, mtime_ns])?;
                }
                FileWrite::Remove { path } => {
                    let removed = remove_file(&tx, path, &mut deleted)?;
                    stats.removed += removed;
                    stats.rows_replaced += removed;
                    tx.prepare_cached("DELETE FROM skipped_files WHERE path = ?1")?
                        .execute([path])?;
                }
                FileWrite::Skipped {
                    path,
                    size,
                    mtime_ns,
                    reason,
                } => {
                    let removed = remove_file(&tx, path, &mut deleted)?;
                    stats.removed += removed;
                    stats.rows_replaced += removed;
                    tx.prepare_cached(
                        "INSERT OR REPLACE INTO skipped_files(path, size, mtime_ns, reason) VALUES (?1, ?2, ?3, ?4)",
                    )?
                    .execute(params![path, *size as i64, mtime_ns, reason])?;
                }
            }
        }
        if writes.iter().any(|w| !matches!(w, FileWrite::Touch { .. })) {
            // Readers see this batch under a generation of its own.
            super::advance_generation(&tx)?;
        }
        tx.commit()?;
        // FTS5 wrote its totals back at the commit: lower them now.
        text_totals::subtract(&mut self.conn, &deleted)?;
        Ok(stats)
    }

    /// Marks files as changed so the next index run re-parses them.
    /// `matches` selects paths; returns how many were marked.
    pub fn invalidate(&mut self, matches: &dyn Fn(&str) -> bool) -> Result<u64> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let paths: Vec<String> = {
            let mut stmt = tx.prepare("SELECT path FROM files")?;
            let rows = stmt.query_map([], |r| r.get::<_, String>(0))?;
            rows.collect::<rusqlite::Result<Vec<_>>>()?
        };
        let mut marked = 0;
        {
            let mut stmt =
                tx.prepare("UPDATE files SET mtime_ns = -1, content_hash = '' WHERE path = ?1")?;
            for path in paths.iter().filter(|p| matches(p)) {
                marked += stmt.execute([path])? as u64;
            }
        }
        if marked > 0 {
            super::new_state_stamp(&tx)?;
        }
        tx.commit()?;
        Ok(marked)
    }
}

/// Removes an indexed file and its rows; 1 if it was indexed.
fn remove_file(tx: &Transaction, path: &str, deleted: &mut TextTotals) -> Result<u64> {
    match file_id(tx, path)? {
        Some(id) => {
            delete_file_rows(tx, id, false, deleted)?;
            tx.prepare_cached("DELETE FROM files WHERE id = ?1")?
                .execute([id])?;
            tx.prepare_cached("DELETE FROM graph_dirty WHERE file_id = ?1")?
                .execute([id])?;
            tx.prepare_cached("DELETE FROM graph_added WHERE file_id = ?1")?
                .execute([id])?;
            Ok(1)
        }
        None => Ok(0),
    }
}

/// The first row id of file `file_id`'s units when `units` are the same
/// units in the same order (same handles), so the re-parsed file can take
/// the same ids; `None` when any unit was added, removed, renamed or moved.
fn same_units_first_id(
    tx: &Transaction,
    file_id: i64,
    units: &[crate::lang::Unit],
) -> Result<Option<i64>> {
    let (first, last): (i64, i64) = tx
        .prepare_cached("SELECT first_node_id, last_node_id FROM files WHERE id = ?1")?
        .query_row([file_id], |r| Ok((r.get(0)?, r.get(1)?)))?;
    if units.is_empty() || last - first + 1 != units.len() as i64 {
        return Ok(None);
    }
    let mut stmt = tx.prepare_cached(
        "SELECT id, lower(hex(handle)) FROM nodes WHERE id BETWEEN ?1 AND ?2 ORDER BY id",
    )?;
    let mut rows = stmt.query([first, last])?;
    let mut expected = units.iter().zip(first..);
    while let Some(row) = rows.next()? {
        let Some((unit, id)) = expected.next() else {
            return Ok(None);
        };
        let stored_id: i64 = row.get(0)?;
        let stored_handle: String = row.get(1)?;
        if stored_id != id || unit.id.as_str().get(1..) != Some(stored_handle.as_str()) {
            return Ok(None);
        }
    }
    Ok(expected.next().is_none().then_some(first))
}

/// `ref_names` ids (names and qualifiers) this connection looked up or created, kept across the
/// batches of a run (a run meets the same few thousand names again and again).
///
/// Valid only while no other connection commits: another indexer's run
/// could drop a name this map still holds. So the map remembers the
/// `PRAGMA data_version` it was filled under and is emptied when that moves
/// (checked inside each batch's write transaction, where no one else can
/// commit).
///
/// When the table was empty as the map started (a build into an empty
/// index, [`Store::defer_indexes`]), the map is `complete`: a name it does
/// not hold is new, and no lookup by text is needed (none could use an
/// index then: the build creates `ref_names_nocase` at its end).
#[derive(Debug, Default)]
pub struct NameIds {
    data_version: i64,
    ids: HashMap<String, i64>,
    complete: bool,
}

impl NameIds {
    /// An empty map of an empty `ref_names` table, as of `data_version`.
    pub fn complete(data_version: i64) -> NameIds {
        NameIds {
            data_version,
            ids: HashMap::new(),
            complete: true,
        }
    }

    fn revalidate(&mut self, tx: &Transaction) -> Result<()> {
        let version: i64 = tx.query_row("PRAGMA data_version", [], |r| r.get(0))?;
        if version != self.data_version {
            if self.complete {
                // Another connection committed during a build into an empty
                // index: names are looked up by text from now on, so the
                // index the build deferred must exist first, or every
                // lookup is a scan of `ref_names`.
                let sql = super::index_definition("ref_names_nocase").ok_or_else(|| {
                    crate::CanopyError::Internal(
                        "index ref_names_nocase is not in the schema".into(),
                    )
                })?;
                tx.execute_batch(&sql)?;
            }
            self.ids.clear();
            self.complete = false;
            self.data_version = version;
        }
        Ok(())
    }

    fn id(&mut self, tx: &Transaction, name: &str) -> Result<i64> {
        use rusqlite::OptionalExtension;
        if let Some(&id) = self.ids.get(name) {
            return Ok(id);
        }
        if self.complete {
            tx.prepare_cached("INSERT INTO ref_names(text) VALUES (?1)")?
                .execute([name])?;
            let id = tx.last_insert_rowid();
            self.ids.insert(name.to_string(), id);
            return Ok(id);
        }
        let existing: Option<i64> = tx
            .prepare_cached(
                "SELECT id FROM ref_names WHERE text = ?1 COLLATE NOCASE AND text = ?1",
            )?
            .query_row([name], |r| r.get(0))
            .optional()?;
        let id = match existing {
            Some(id) => id,
            None => {
                tx.prepare_cached("INSERT INTO ref_names(text) VALUES (?1)")?
                    .execute([name])?;
                tx.last_insert_rowid()
            }
        };
        self.ids.insert(name.to_string(), id);
        Ok(id)
    }
}

/// What [`write_parsed`] wrote.
struct ParsedWritten {
    units: u64,
    refs: u64,
    /// The file was indexed before and its old rows were deleted.
    replaced: bool,
}

/// Writes one parsed file: its file row, units, full-text rows, references
/// and graph facts, replacing what the file had before.
fn write_parsed(
    tx: &Transaction,
    w: &ParsedWrite,
    now_unix: i64,
    name_ids: &mut NameIds,
    next_node_id: &mut i64,
    deleted: &mut TextTotals,
) -> Result<ParsedWritten> {
    tx.prepare_cached("DELETE FROM skipped_files WHERE path = ?1")?
        .execute([&w.path])?;
    let previous_id = file_id(tx, &w.path)?;
    // Most re-parses (an edit inside a body) keep every unit: the units
    // keep their row ids too, so the edges other files hold into them stay
    // as they are instead of being re-pointed one by one (thousands for a
    // popular test helper).
    let kept_first_id = match previous_id {
        Some(id) => same_units_first_id(tx, id, &w.parsed.units)?,
        None => None,
    };
    let first_node_id = kept_first_id.unwrap_or(*next_node_id);
    let last_node_id = first_node_id + w.parsed.units.len() as i64 - 1;
    if kept_first_id.is_none() {
        *next_node_id = last_node_id + 1;
    }
    if let Some(previous) = previous_id {
        delete_file_rows(tx, previous, kept_first_id.is_some(), deleted)?;
    }
    let id = upsert_file_row(tx, w, previous_id, now_unix, first_node_id, last_node_id)?;
    let node_ids = insert_units(tx, w, id, first_node_id)?;
    let refs = insert_references(tx, w, id, &node_ids, name_ids)?;
    if refs != w.parsed.refs.len() as u64 {
        // The row was written with the extractor's count; the blob
        // dropped a duplicate (see `insert_references`).
        tx.prepare_cached("UPDATE files SET ref_count = ?2 WHERE id = ?1")?
            .execute(params![id, refs as i64])?;
    }
    super::graph::write_facts(tx, id, w.facts.as_ref(), previous_id.is_none())?;
    Ok(ParsedWritten {
        units: w.parsed.units.len() as u64,
        refs,
        replaced: previous_id.is_some(),
    })
}

/// Updates the file's row (its old rows already deleted) or inserts a new
/// one; returns its `files.id`.
fn upsert_file_row(
    tx: &Transaction,
    w: &ParsedWrite,
    previous_id: Option<i64>,
    now_unix: i64,
    first_node_id: i64,
    last_node_id: i64,
) -> Result<i64> {
    let file_token_count = w.parsed.units.first().map_or(0, |u| u.token_count);
    // The file's columns after its key (`id` to update, `path` to insert),
    // bound as ?2..?12 in both statements.
    let language = w.parsed.language.as_str();
    let (size, ref_count) = (w.size as i64, w.parsed.refs.len() as i64);
    let columns: [&dyn rusqlite::ToSql; 11] = [
        &language,
        &size,
        &w.mtime_ns,
        &w.content_hash,
        &w.line_count,
        &file_token_count,
        &w.parsed.had_syntax_errors,
        &now_unix,
        &first_node_id,
        &last_node_id,
        &ref_count,
    ];
    let id = match previous_id {
        Some(id) => {
            tx.prepare_cached(
                "UPDATE files SET language = ?2, size = ?3, mtime_ns = ?4, content_hash = ?5,
                 line_count = ?6, token_count = ?7, syntax_errors = ?8, indexed_at = ?9,
                 first_node_id = ?10, last_node_id = ?11, ref_count = ?12 WHERE id = ?1",
            )?
            .execute(rusqlite::params_from_iter(
                std::iter::once(&id as &dyn rusqlite::ToSql).chain(columns),
            ))?;
            id
        }
        None => {
            tx.prepare_cached(
                "INSERT INTO files(path, language, size, mtime_ns, content_hash, line_count,
                 token_count, syntax_errors, indexed_at, first_node_id, last_node_id, ref_count)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
            )?
            .execute(rusqlite::params_from_iter(
                std::iter::once(&w.path as &dyn rusqlite::ToSql).chain(columns),
            ))?;
            tx.last_insert_rowid()
        }
    };

    Ok(id)
}

/// Inserts the file's units (ids `first_node_id..`) and their full-text
/// rows; returns the node id of each unit, in order.
fn insert_units(
    tx: &Transaction,
    w: &ParsedWrite,
    id: i64,
    first_node_id: i64,
) -> Result<Vec<i64>> {
    let path_doc = path_document(&w.path);
    let mut node_ids: Vec<i64> = Vec::with_capacity(w.parsed.units.len());
    let mut insert_node = tx.prepare_cached(
        "INSERT INTO nodes(id, handle, file_id, parent_id, node_type, name, qualified_name,
         start_byte, end_byte, start_line, end_line, token_count, preview_offset)
         VALUES (?13, unhex(substr(?1, 2)), ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
    )?;
    let mut insert_fts =
        tx.prepare_cached("INSERT INTO fts(rowid, name, path, body) VALUES (?1, ?2, ?3, ?4)")?;
    // Units are sorted parents first, except Go-style receivers whose type may come later:
    // those parents are patched after all ids are known.
    let mut late_parents: HashMap<usize, usize> = HashMap::new();
    for (i, unit) in w.parsed.units.iter().enumerate() {
        let parent_id = match unit.parent {
            Some(p) if p < i => Some(node_ids[p]),
            Some(p) => {
                late_parents.insert(i, p);
                None
            }
            None => None,
        };
        insert_node.execute(params![
            unit.id.as_str(),
            id,
            parent_id,
            unit.node_type.as_str(),
            unit.name,
            unit.qualified_name,
            unit.start_byte as i64,
            unit.end_byte as i64,
            unit.start_line,
            unit.end_line,
            unit.token_count,
            unit.preview_start.saturating_sub(unit.start_byte) as i64,
            first_node_id + i as i64,
        ])?;
        let node_id = first_node_id + i as i64;
        node_ids.push(node_id);
        insert_fts.execute(params![node_id, unit.fts_name, path_doc, unit.fts_body])?;
    }
    if !late_parents.is_empty() {
        let mut patch = tx.prepare_cached("UPDATE nodes SET parent_id = ?2 WHERE id = ?1")?;
        for (child, parent) in late_parents {
            patch.execute(params![node_ids[child], node_ids[parent]])?;
        }
    }
    Ok(node_ids)
}

/// Inserts the file's references as one packed blob and their postings;
/// returns how many were written.
fn insert_references(
    tx: &Transaction,
    w: &ParsedWrite,
    id: i64,
    node_ids: &[i64],
    name_ids: &mut NameIds,
) -> Result<u64> {
    let mut packed = Vec::with_capacity(w.parsed.refs.len());
    for r in &w.parsed.refs {
        let name_id = name_ids.id(tx, &r.name)?;
        let qualifier_id = match &r.qualifier {
            Some(q) => Some(name_ids.id(tx, q)?),
            None => None,
        };
        packed.push(PackedRef {
            end_byte: r.end_byte as u64,
            length: r.end_byte.saturating_sub(r.start_byte) as u64,
            ref_type: super::ref_type_code(r.ref_type.as_str()) as u8,
            line: r.line,
            source_node_id: node_ids[r.enclosing],
            name_id,
            qualifier_id,
        });
    }
    // `encode` drops a second reference with the same (end, type); the
    // extractor never makes one, and dropping it beats failing the batch.
    let blob = packed_refs::encode(&mut packed);
    if !packed.is_empty() {
        tx.prepare_cached("INSERT INTO file_refs(file_id, refs) VALUES (?1, ?2)")?
            .execute(params![id, blob])?;
        let mut insert_posting = tx.prepare_cached(
            "INSERT INTO ref_postings(name_id, file_id, name_uses) VALUES (?1, ?2, ?3)",
        )?;
        for (name_id, uses) in postings(&packed) {
            insert_posting.execute(params![name_id, id, uses as i64])?;
        }
    }
    Ok(packed.len() as u64)
}
