//! The distinct unit names of an index, kept in memory by a long-lived
//! connection for substring searches and nearest-name suggestions
//! ([`NameCatalog`]).
//!
//! Invariant: a catalog describes exactly the index state of its
//! `data_version`; a connection that sees another version rebuilds it
//! before answering (`Store::refresh_name_catalog`), so an answer never
//! mixes names of two index states.

use memchr::memmem;
use rusqlite::Connection;
use rusqlite::types::ValueRef;

use crate::error::Result;

/// Separates the names in [`NameCatalog::haystack`]. A needle holding it
/// would match across two names, so such needles are tested name by name.
const SEPARATOR: u8 = 0;

/// The distinct unit names of the index (ASCII-lower-cased, the case rule of
/// SQLite's `LIKE` and `NOCASE`) with how many units carry each.
///
/// A substring search (`LIKE '%x%'`) cannot use an index, so SQLite tests
/// every unit name (~15 ms on Django's 69,000 units). A long-lived engine
/// answers many queries, so after its first substring search a connection
/// keeps this list in memory (a few MB at most) and scans that instead; a
/// one-shot CLI process never pays for building it. The list is rebuilt
/// when `PRAGMA data_version` says another connection (the indexer)
/// committed: that rebuild sits on the path of the first answer after
/// every watcher batch (issue 32's edit -> searchable), so it reads the
/// name index in its own order (no sort) and the search is one `memmem`
/// pass over one buffer rather than a `contains` per name.
///
/// It also keeps each distinct spelling, for the nearest names a target
/// that matched nothing is offered (`Store::nearest_names`).
#[derive(Debug, Default)]
pub(super) struct NameCatalog {
    /// The `PRAGMA data_version` this catalog was read at.
    pub(super) data_version: i64,
    /// Every distinct lower-cased name, each followed by [`SEPARATOR`].
    haystack: Vec<u8>,
    /// One entry per distinct lower-cased name, in `haystack` order.
    names: Vec<CatalogName>,
    /// Every distinct name as written (in no particular order).
    spellings: Vec<String>,
}

/// Where one lower-cased name sits in [`NameCatalog::haystack`], and how
/// many units carry it in any case.
#[derive(Clone, Copy, Debug)]
struct CatalogName {
    start: usize,
    len: usize,
    units: u32,
}

impl NameCatalog {
    /// Reads every unit name of the index at `data_version`. The rows come
    /// from the covering index `nodes_name` (`NOCASE` order), so names
    /// equal but for ASCII case arrive together and no sort is needed.
    pub(super) fn read(conn: &Connection, data_version: i64) -> Result<NameCatalog> {
        let mut catalog = NameCatalog {
            data_version,
            ..NameCatalog::default()
        };
        // Spellings of the current lower-cased name start here.
        let mut group_spellings = 0usize;
        let mut stmt = conn.prepare_cached(
            "SELECT name FROM nodes WHERE name IS NOT NULL ORDER BY name COLLATE NOCASE",
        )?;
        let mut rows = stmt.query([])?;
        while let Some(row) = rows.next()? {
            // Names are written from `str`s; the bytes are enough here.
            let ValueRef::Text(name) = row.get_ref(0)? else {
                continue;
            };
            if catalog.same_as_last(name) {
                if let Some(last) = catalog.names.last_mut() {
                    last.units += 1;
                }
                if !catalog.spellings[group_spellings..]
                    .iter()
                    .any(|s| s.as_bytes() == name)
                {
                    catalog.spellings.push(spelling(name));
                }
                continue;
            }
            group_spellings = catalog.spellings.len();
            catalog.spellings.push(spelling(name));
            let start = catalog.haystack.len();
            catalog
                .haystack
                .extend(name.iter().map(|b| b.to_ascii_lowercase()));
            catalog.haystack.push(SEPARATOR);
            catalog.names.push(CatalogName {
                start,
                len: name.len(),
                units: 1,
            });
        }
        Ok(catalog)
    }

    /// Whether `name` equals, but for ASCII case, the last name read.
    fn same_as_last(&self, name: &[u8]) -> bool {
        self.names
            .last()
            .is_some_and(|last| self.text(last).eq_ignore_ascii_case(name))
    }

    fn text(&self, name: &CatalogName) -> &[u8] {
        &self.haystack[name.start..name.start + name.len]
    }

    /// The lower-cased names that contain `needle` (ASCII case ignored) but
    /// do not start with it, with their unit counts, in catalog order.
    pub(super) fn containing_not_at_start(&self, needle: &str) -> Vec<(&str, u32)> {
        let needle = needle.to_ascii_lowercase();
        let needle = needle.as_bytes();
        let wanted = |text: &[u8]| text.len() > needle.len() && !text.starts_with(needle);
        let mut out = Vec::new();
        if needle.is_empty() {
            return out;
        }
        let mut push = |name: &CatalogName| {
            let text = self.text(name);
            if wanted(text) {
                // The haystack holds whole lower-cased `str`s.
                if let Ok(text) = std::str::from_utf8(text) {
                    out.push((text, name.units));
                }
            }
        };
        if needle.contains(&SEPARATOR) {
            for name in &self.names {
                if memmem::find(self.text(name), needle).is_some() {
                    push(name);
                }
            }
            return out;
        }
        let mut last = None;
        for at in memmem::find_iter(&self.haystack, needle) {
            // The name holding the match: the last one starting at or before it.
            let index = self.names.partition_point(|n| n.start <= at) - 1;
            if last != Some(index) {
                last = Some(index);
                push(&self.names[index]);
            }
        }
        out
    }

    /// Every distinct name as written.
    pub(super) fn spellings(&self) -> &[String] {
        &self.spellings
    }
}

fn spelling(name: &[u8]) -> String {
    String::from_utf8_lossy(name).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn catalog(names: &[&str]) -> NameCatalog {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(
            "CREATE TABLE nodes (id INTEGER PRIMARY KEY, name TEXT);
             CREATE INDEX nodes_name ON nodes(name COLLATE NOCASE) WHERE name IS NOT NULL;",
        )
        .unwrap();
        for name in names {
            conn.execute("INSERT INTO nodes (name) VALUES (?1)", [name])
                .unwrap();
        }
        conn.execute("INSERT INTO nodes (name) VALUES (NULL)", [])
            .unwrap();
        NameCatalog::read(&conn, 7).unwrap()
    }

    fn sorted<T: Ord>(mut v: Vec<T>) -> Vec<T> {
        v.sort();
        v
    }

    #[test]
    fn names_equal_but_for_case_are_one_entry_with_every_spelling_kept_once() {
        let c = catalog(&["Parse", "parse", "PARSE", "parse", "render", "Parse"]);
        assert_eq!(c.data_version, 7);
        assert_eq!(c.names.len(), 2);
        let units: Vec<(String, u32)> = c
            .names
            .iter()
            .map(|n| (String::from_utf8(c.text(n).to_vec()).unwrap(), n.units))
            .collect();
        assert_eq!(
            sorted(units),
            vec![("parse".to_string(), 5), ("render".to_string(), 1)]
        );
        assert_eq!(
            sorted(c.spellings().to_vec()),
            vec!["PARSE", "Parse", "parse", "render"]
        );
    }

    #[test]
    fn substring_matches_skip_names_that_start_with_the_needle_or_equal_it() {
        let c = catalog(&[
            "parse",
            "parse_args",
            "reparse",
            "Unparsed",
            "spare",
            "parser_of_parse",
            "xparsex_parse",
        ]);
        let found = sorted(c.containing_not_at_start("PARSE"));
        assert_eq!(
            found,
            vec![("reparse", 1), ("unparsed", 1), ("xparsex_parse", 1)]
        );
        // A needle never matches across two names.
        assert!(c.containing_not_at_start("parseparse").is_empty());
        assert!(c.containing_not_at_start("").is_empty());
        assert!(c.containing_not_at_start("e\0p").is_empty());
    }

    #[test]
    fn the_buffer_search_agrees_with_a_plain_scan() {
        let names = [
            "a", "ab", "ba", "aba", "bab", "abab", "baba", "Ab", "BA", "aB_b", "b_ab", "ä_ab",
        ];
        let c = catalog(&names);
        for needle in ["a", "b", "ab", "ba", "_", "b_", "aba", "bb", "ä", "_ab"] {
            let mut plain: Vec<(String, u32)> = Vec::new();
            for n in &c.names {
                let text = String::from_utf8(c.text(n).to_vec()).unwrap();
                if text.len() > needle.len() && !text.starts_with(needle) && text.contains(needle) {
                    plain.push((text, n.units));
                }
            }
            let fast: Vec<(String, u32)> = c
                .containing_not_at_start(needle)
                .into_iter()
                .map(|(t, u)| (t.to_string(), u))
                .collect();
            assert_eq!(sorted(fast), sorted(plain), "needle {needle:?}");
        }
    }
}
