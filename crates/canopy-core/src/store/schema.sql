-- Canopy index schema. The version lives in PRAGMA user_version (see store/mod.rs);
-- any change here must bump SCHEMA_VERSION so old indexes are rebuilt, never misread.
--
-- Relationships (not declared as foreign keys: the store deletes a file's rows
-- itself, in one transaction, which is faster than cascades):
--   nodes.file_id -> files.id, nodes.parent_id -> nodes.id (NULL for file units)
--   refs.file_id -> files.id, refs.source_node_id -> nodes.id (enclosing unit, inside its span)
--   refs.name_id, refs.qualifier_id -> ref_names.id
--   refs.target_node_id -> nodes.id (resolved definition; filled by resolution, may be NULL)
--   fts.rowid = nodes.id

-- The database uses incremental auto-vacuum (set in store/mod.rs `configure`,
-- before the file's first page is written): free pages are handed back to
-- the file system after each run.

CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
) WITHOUT ROWID;

CREATE TABLE files (
    id            INTEGER PRIMARY KEY,
    path          TEXT NOT NULL UNIQUE,   -- repo-relative, '/' separators
    language      TEXT NOT NULL,
    size          INTEGER NOT NULL,
    mtime_ns      INTEGER NOT NULL,       -- -1 forces a re-parse (invalidate)
    content_hash  TEXT NOT NULL,          -- xxh3-64 of the bytes, hex; '' forces a re-parse
    line_count    INTEGER NOT NULL,
    token_count   INTEGER NOT NULL,
    syntax_errors INTEGER NOT NULL DEFAULT 0,
    indexed_at    INTEGER NOT NULL        -- unix seconds
);

CREATE TABLE nodes (
    id             INTEGER PRIMARY KEY,
    handle         BLOB NOT NULL,          -- the 12 bytes of 'h' + 24 hex (crate::handle); SQL
                                           -- shows it as 'h' || lower(hex(handle))
    file_id        INTEGER NOT NULL,
    parent_id      INTEGER,
    node_type      TEXT NOT NULL,
    name           TEXT,
    qualified_name TEXT,
    start_byte     INTEGER NOT NULL,
    end_byte       INTEGER NOT NULL,
    start_line     INTEGER NOT NULL,
    end_line       INTEGER NOT NULL,
    token_count    INTEGER NOT NULL,
    preview_offset INTEGER NOT NULL        -- preview starts at start_byte + this (the name's line);
                                           -- the text is rebuilt from the file at query time
);
CREATE INDEX nodes_handle ON nodes(handle);
CREATE INDEX nodes_file ON nodes(file_id);
CREATE INDEX nodes_parent ON nodes(parent_id) WHERE parent_id IS NOT NULL;
CREATE INDEX nodes_name ON nodes(name COLLATE NOCASE) WHERE name IS NOT NULL;

-- One row per reference, clustered by file and position (no rowid): a file's
-- references are deleted by key prefix, and a unit's own references are the
-- rows of its file inside its span. The extractor keeps one reference per
-- (end_byte, ref_type) in a file, which makes the key unique.
CREATE TABLE refs (
    file_id        INTEGER NOT NULL,
    end_byte       INTEGER NOT NULL,
    ref_type       INTEGER NOT NULL,       -- 0 call | 1 import | 2 type_ref (store::REF_TYPES)
    length         INTEGER NOT NULL,       -- start_byte = end_byte - length
    line           INTEGER NOT NULL,
    source_node_id INTEGER NOT NULL,
    name_id        INTEGER NOT NULL,       -- ref_names.id: the referenced name
    qualifier_id   INTEGER,                -- ref_names.id: receiver or module path as written
    target_node_id INTEGER,
    confidence     REAL,
    PRIMARY KEY (file_id, end_byte, ref_type)
) WITHOUT ROWID;
-- Covers a name lookup's filtering and ordering (the key columns ride along).
CREATE INDEX refs_name ON refs(name_id);

-- Referenced names and qualifiers, each stored once: a few thousand distinct
-- strings serve tens of thousands of references. Strings no reference uses
-- any more are dropped after each run that changed something
-- (Store::release_free_pages). One index serves both lookups: by name in
-- any case (queries) and by exact text (the writer, `text = ? COLLATE NOCASE
-- AND text = ?`); the writer alone inserts, inside its write transaction, so
-- each exact text appears once.
CREATE TABLE ref_names (
    id   INTEGER PRIMARY KEY,
    text TEXT NOT NULL
);
CREATE INDEX ref_names_nocase ON ref_names(text COLLATE NOCASE);

-- Files skipped on the last run (binary, too large, unreadable), so a run
-- with nothing changed does not read them again.
CREATE TABLE skipped_files (
    path     TEXT PRIMARY KEY,
    size     INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    reason   TEXT NOT NULL
) WITHOUT ROWID;

-- Contentless: the text lives in the files on disk; expansion re-reads and
-- verifies it. Columns: name (qualified name + identifier parts), path, body
-- (the unit's own text + identifier parts).
CREATE VIRTUAL TABLE fts USING fts5(
    name, path, body,
    content = '',
    contentless_delete = 1,
    tokenize = "unicode61 remove_diacritics 2 tokenchars '_'"
);

-- Per-term document counts (for IDF-weighted term selection in evidence packs).
CREATE VIRTUAL TABLE fts_vocab USING fts5vocab(fts, 'row');
