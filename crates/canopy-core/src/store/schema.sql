-- Canopy index schema. The version lives in PRAGMA user_version (see store/mod.rs);
-- any change here must bump SCHEMA_VERSION so old indexes are rebuilt, never misread.
--
-- Relationships (not declared as foreign keys: the store deletes a file's rows
-- itself, in one transaction, which is faster than cascades):
--   nodes.file_id -> files.id, nodes.parent_id -> nodes.id (NULL for file units)
--   refs.file_id -> files.id, refs.source_node_id -> nodes.id (enclosing unit)
--   refs.target_node_id -> nodes.id (resolved definition; filled by resolution, may be NULL)
--   fts.rowid = nodes.id

-- Set before any table exists: free pages (from FTS segment merges and
-- re-indexed files) are handed back to the file system after each run.
PRAGMA auto_vacuum = INCREMENTAL;

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
    handle         TEXT NOT NULL,          -- 'h' + 24 hex (crate::handle)
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
    preview        TEXT NOT NULL
);
CREATE INDEX nodes_handle ON nodes(handle);
CREATE INDEX nodes_file ON nodes(file_id);
CREATE INDEX nodes_parent ON nodes(parent_id) WHERE parent_id IS NOT NULL;
CREATE INDEX nodes_name ON nodes(name COLLATE NOCASE) WHERE name IS NOT NULL;

CREATE TABLE refs (
    id             INTEGER PRIMARY KEY,
    file_id        INTEGER NOT NULL,
    source_node_id INTEGER NOT NULL,
    name           TEXT NOT NULL,
    qualifier      TEXT,
    ref_type       TEXT NOT NULL,          -- call | import | type_ref
    start_byte     INTEGER NOT NULL,
    end_byte       INTEGER NOT NULL,
    line           INTEGER NOT NULL,
    target_node_id INTEGER,
    confidence     REAL
);
CREATE INDEX refs_name ON refs(name COLLATE NOCASE);
CREATE INDEX refs_source ON refs(source_node_id);

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
