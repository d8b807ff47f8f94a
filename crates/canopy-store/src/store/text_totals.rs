//! The text index's totals, kept equal to its rows.
//!
//! FTS5 keeps, in its averages record (`fts_data` row 1), the number of
//! rows and each column's token total; `bm25()` reads them as the
//! collection size and the mean column lengths. Our text table is
//! contentless-delete (`content = ''`, `contentless_delete = 1`), and
//! FTS5 does not lower those totals when such a row is deleted (checked by
//! `fts5_keeps_the_totals_of_deleted_rows` below, which fails the day
//! SQLite starts doing it, since this module would then subtract twice).
//! So every re-indexed file raised them, and an index kept up to date by
//! edits ranked differently from a fresh index of the same files (an
//! evidence pack's order changed after six edits of one file).
//!
//! The writer reads the sizes of the rows it is about to delete from
//! `fts_docsize` ([`TextTotals::add_rows`]) and, once the batch has
//! committed, lowers the record by them ([`subtract`]) in a transaction of
//! its own: FTS5 writes its cached totals back when the transaction that
//! changed them commits, so a correction made inside it would be
//! overwritten. A process killed between the two commits leaves the totals
//! as high as they were before this module existed: answers stay
//! consistent, only that drift remains until the next rebuild.

use rusqlite::types::ValueRef;
use rusqlite::{Connection, OptionalExtension, Transaction, TransactionBehavior};

use crate::error::Result;

/// The text table's columns (`name, path, body` in schema.sql).
const TEXT_COLUMNS: usize = 3;

/// A number of text rows and their tokens per column.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct TextTotals {
    /// Rows.
    pub rows: u64,
    /// Tokens per column, in the table's column order.
    pub tokens: [u64; TEXT_COLUMNS],
}

impl TextTotals {
    /// Adds the sizes of the text rows of units `first..=last` (one file's
    /// units: consecutive ids), read before they are deleted.
    pub(super) fn add_rows(&mut self, tx: &Transaction, first: i64, last: i64) -> Result<()> {
        let mut sizes = tx.prepare_cached(
            "SELECT sz FROM fts_docsize WHERE id IN (SELECT id FROM nodes WHERE id BETWEEN ?1 AND ?2)",
        )?;
        let mut rows = sizes.query([first, last])?;
        while let Some(row) = rows.next()? {
            let sz = match row.get_ref(0)? {
                ValueRef::Blob(sz) => sz,
                _ => &[],
            };
            self.rows += 1;
            let mut at = 0;
            for total in &mut self.tokens {
                let Some((n, next)) = read_varint(sz, at) else {
                    break;
                };
                *total += n;
                at = next;
            }
        }
        Ok(())
    }
}

/// Lowers FTS5's averages record by `deleted`, in a transaction of its own
/// (after the one that deleted the rows has committed).
pub(super) fn subtract(conn: &mut Connection, deleted: &TextTotals) -> Result<()> {
    if deleted.rows == 0 {
        return Ok(());
    }
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let Some(record) = read_record(&tx)? else {
        return Ok(());
    };
    let Some(mut totals) = decode(&record) else {
        tracing::warn!("the text index's averages record has an unknown layout; left as it is");
        return Ok(());
    };
    totals.rows = totals.rows.saturating_sub(deleted.rows);
    for (total, gone) in totals.tokens.iter_mut().zip(deleted.tokens) {
        *total = total.saturating_sub(gone);
    }
    tx.execute(
        "UPDATE fts_data SET block = ?1 WHERE id = 1",
        [encode(&totals)],
    )?;
    tx.commit()?;
    Ok(())
}

/// The averages record's bytes, if FTS5 has written one.
fn read_record(conn: &Connection) -> Result<Option<Vec<u8>>> {
    Ok(conn
        .query_row("SELECT block FROM fts_data WHERE id = 1", [], |r| r.get(0))
        .optional()?)
}

/// The record's totals: varints of the row count, then of each column's
/// tokens. `None` for any other layout (an empty record, other columns).
fn decode(record: &[u8]) -> Option<TextTotals> {
    let (rows, mut at) = read_varint(record, 0)?;
    let mut tokens = [0; TEXT_COLUMNS];
    for total in &mut tokens {
        let (n, next) = read_varint(record, at)?;
        *total = n;
        at = next;
    }
    (at == record.len()).then_some(TextTotals { rows, tokens })
}

/// The record for `totals`, in [`decode`]'s layout.
fn encode(totals: &TextTotals) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 * (TEXT_COLUMNS + 1));
    write_varint(totals.rows, &mut out);
    for &n in &totals.tokens {
        write_varint(n, &mut out);
    }
    out
}

/// Reads one of SQLite's varints at `at`: big-endian groups of 7 bits, the
/// high bit set on every byte but the last, and a ninth byte, if reached,
/// giving 8 bits. Returns the value and the offset after it.
fn read_varint(bytes: &[u8], at: usize) -> Option<(u64, usize)> {
    let mut value: u64 = 0;
    for i in 0..9 {
        let byte = *bytes.get(at + i)?;
        if i == 8 {
            return Some(((value << 8) | u64::from(byte), at + 9));
        }
        value = (value << 7) | u64::from(byte & 0x7f);
        if byte & 0x80 == 0 {
            return Some((value, at + i + 1));
        }
    }
    None
}

/// Appends `value` as one of SQLite's varints ([`read_varint`]).
fn write_varint(value: u64, out: &mut Vec<u8>) {
    if value >> 56 != 0 {
        // Nine bytes: the high 56 bits in eight 7-bit groups, then 8 bits.
        let high = value >> 8;
        for i in (0..8).rev() {
            out.push((((high >> (7 * i)) & 0x7f) as u8) | 0x80);
        }
        out.push(value as u8);
        return;
    }
    let groups = (64 - value.leading_zeros()).div_ceil(7).max(1);
    for i in (0..groups).rev() {
        let group = ((value >> (7 * i)) & 0x7f) as u8;
        out.push(if i == 0 { group } else { group | 0x80 });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A text table declared as schema.sql declares ours.
    fn text_table() -> Connection {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(
            "CREATE VIRTUAL TABLE fts USING fts5(
                 name, path, body, content = '', contentless_delete = 1,
                 tokenize = \"unicode61 remove_diacritics 2 tokenchars '_'\");",
        )
        .unwrap();
        conn
    }

    fn insert(conn: &mut Connection, rowids: &[i64]) {
        let tx = conn.transaction().unwrap();
        for &rowid in rowids {
            tx.execute(
                "INSERT INTO fts(rowid, name, path, body) VALUES (?1, 'a b', 'src/a.py', 'x y z')",
                [rowid],
            )
            .unwrap();
        }
        tx.commit().unwrap();
    }

    fn totals(conn: &Connection) -> TextTotals {
        decode(&read_record(conn).unwrap().unwrap()).unwrap()
    }

    #[test]
    fn varints_round_trip_as_sqlite_writes_them() {
        for value in [
            0,
            1,
            127,
            128,
            300,
            16_383,
            16_384,
            5_287_089,
            1 << 56,
            u64::MAX,
        ] {
            let mut bytes = Vec::new();
            write_varint(value, &mut bytes);
            assert_eq!(
                read_varint(&bytes, 0),
                Some((value, bytes.len())),
                "{value}"
            );
        }
        // SQLite's own bytes for 300 and for 5,287,089 (a Django body total).
        assert_eq!(read_varint(&[0x82, 0x2c], 0), Some((300, 2)));
        let mut bytes = Vec::new();
        write_varint(5_287_089, &mut bytes);
        assert_eq!(bytes, [0x82, 0xc2, 0xd9, 0x31]);
    }

    #[test]
    fn fts5_keeps_the_totals_of_deleted_rows() {
        // If this fails, SQLite now lowers the totals itself and
        // `subtract` would count every deletion twice: remove it.
        let mut conn = text_table();
        insert(&mut conn, &[1, 2, 3, 4]);
        conn.execute("DELETE FROM fts WHERE rowid IN (1, 2)", [])
            .unwrap();
        assert_eq!(totals(&conn).rows, 4);
    }

    #[test]
    fn subtracting_the_deleted_rows_gives_a_fresh_table_s_totals() {
        let mut conn = text_table();
        insert(&mut conn, &[1, 2, 3, 4]);
        // The writer's order: sizes read, rows deleted, commit, subtract.
        let mut deleted = TextTotals::default();
        {
            let tx = conn.transaction().unwrap();
            tx.execute_batch(
                "CREATE TABLE nodes(id INTEGER PRIMARY KEY);
                 INSERT INTO nodes VALUES (1), (2), (3), (4);",
            )
            .unwrap();
            deleted.add_rows(&tx, 1, 2).unwrap();
            tx.execute("DELETE FROM fts WHERE rowid IN (1, 2)", [])
                .unwrap();
            tx.commit().unwrap();
        }
        assert_eq!(deleted.rows, 2);
        subtract(&mut conn, &deleted).unwrap();
        // The same connection reads the corrected totals in its next write.
        insert(&mut conn, &[9]);

        let mut fresh = text_table();
        insert(&mut fresh, &[3, 4, 9]);
        assert_eq!(totals(&conn), totals(&fresh));
        let scores = |c: &Connection| -> Vec<(i64, f64)> {
            c.prepare("SELECT rowid, bm25(fts) FROM fts WHERE fts MATCH 'x' ORDER BY rowid")
                .unwrap()
                .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
                .unwrap()
                .collect::<rusqlite::Result<_>>()
                .unwrap()
        };
        assert_eq!(scores(&conn), scores(&fresh));
    }
}
