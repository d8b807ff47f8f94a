-- Canopy index schema. The version lives in PRAGMA user_version (see store/mod.rs);
-- any change here must bump SCHEMA_VERSION so old indexes are rebuilt, never misread.
--
-- Relationships (not declared as foreign keys: the store deletes a file's rows
-- itself, in one transaction, which is faster than cascades):
--   nodes.file_id -> files.id (and nodes.id in that file's node range),
--   nodes.parent_id -> nodes.id of the same file (NULL for file units)
--   file_refs.file_id -> files.id; inside its blob: enclosing unit -> nodes.id
--     (inside the unit's span), name and qualifier -> ref_names.id
--   ref_postings.name_id -> ref_names.id, ref_postings.file_id -> files.id
--     (exactly the (name or qualifier, file) pairs of the blobs)
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
    indexed_at    INTEGER NOT NULL,       -- unix seconds
    -- The file's units are exactly the nodes with ids first_node_id..=last_node_id
    -- (the writer gives a file's units consecutive ids; first > last when none).
    -- This range replaces an index on nodes.file_id (and one on parent_id:
    -- a unit's children are in its file).
    first_node_id INTEGER NOT NULL,
    last_node_id  INTEGER NOT NULL,
    -- References in the file's `file_refs` blob (= its `ref_postings` uses):
    -- with the node range, `status` sums one small table instead of
    -- scanning `nodes` and `ref_postings` (a poll stays cheap; issue 32).
    ref_count     INTEGER NOT NULL DEFAULT 0
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
CREATE INDEX nodes_name ON nodes(name COLLATE NOCASE) WHERE name IS NOT NULL;

-- A file's references, all in one blob (store/packed_refs.rs): one row per
-- reference cost ~45 bytes with its name index, the packed form ~8. Every
-- reference records its span, line, type, enclosing unit (nodes.id), name
-- and qualifier (ref_names ids). Resolved targets (the call graph) belong in
-- their own table, written by resolution, not in these raw occurrences.
CREATE TABLE file_refs (
    file_id INTEGER PRIMARY KEY,           -- files.id; no row when a file has no references
    refs    BLOB NOT NULL
);

-- Which files use a name (as a referenced name or as a qualifier), and how
-- many of their references have it as their name: a lookup by name opens
-- only those files' blobs, and a count needs no blob at all.
CREATE TABLE ref_postings (
    name_id   INTEGER NOT NULL,            -- ref_names.id
    file_id   INTEGER NOT NULL,            -- files.id
    name_uses INTEGER NOT NULL,            -- 0 when the file uses it only as a qualifier
    PRIMARY KEY (name_id, file_id)
) WITHOUT ROWID;

-- Referenced names and qualifiers, each stored once: a few thousand distinct
-- strings serve tens of thousands of references. Strings no reference uses
-- any more (no posting) are dropped after each run that changed something
-- (Store::drop_unused_ref_names). One index serves both lookups: by name in
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
-- FTS5 writes its pending terms out as a new segment at each commit and
-- whenever they pass `hashsize` bytes (default 1 MiB). An index batch
-- (index.rs: at most 256 files or 4 MiB of source, plus one file) holds
-- about 2-3 MiB of them, so with the default it became several segments,
-- which the merges then read and wrote again. With 8 MiB a batch is one
-- segment, and a first index of fewer than four batches (`usermerge`)
-- merges nothing (store/mod.rs `TEXT_PENDING_BYTES`; bench/README.md).
INSERT INTO fts(fts, rank) VALUES('hashsize', 8388608);

-- Per-term document counts (for IDF-weighted term selection in evidence packs).
CREATE VIRTUAL TABLE fts_vocab USING fts5vocab(fts, 'row');

-- ---- the code graph (crate::graph) ----------------------------------------
-- Resolution facts of a file (store::graph_rows::StoredFacts, compact varint
-- blobs): imports, bindings, bases and return types in `facts`, the uses of
-- names in `sites`. Kept so that resolution can run again when another file
-- changes, without re-parsing. `sites` is last: a pass reads every file's
-- `facts` but only the resolved files' `sites`, and SQLite does not load a
-- trailing column a query does not ask for.
CREATE TABLE graph_facts (
    file_id INTEGER PRIMARY KEY,           -- files.id
    facts   BLOB NOT NULL,
    sites   BLOB NOT NULL
);

-- Resolved references: one edge per (site, target), stored a file at a
-- time. An edge's src is the innermost named unit containing the site
-- (nodes.id, in the file's node range); dst is the target's nodes.id; line
-- and col place the site. Sites that resolve to nothing are not stored:
-- file_refs has every call site by name. An ambiguous site has one edge per
-- candidate. info packs: kind (bits 0-1: call, import, type, other), status
-- (bits 2-3: resolved, ambiguous, unresolved), how (bits 4-6,
-- store::graph_rows::How), confidence (bits 7-13, 0..=100).
-- edge_lists holds a file's edges as one packed blob (store::packed_edges:
-- (src, line, col, dst) order, one edge per key); `count` is the number of
-- edges in it. edge_targets says which files' lists hold an edge into a
-- unit ("callers" opens only those). Invariant: (dst, file_id) is a row of
-- edge_targets exactly when file_id's list has an edge to dst.
CREATE TABLE edge_lists (
    file_id INTEGER PRIMARY KEY,           -- files.id: edges whose src is one of its units
    count   INTEGER NOT NULL,
    edges   BLOB NOT NULL
);
CREATE TABLE edge_targets (
    dst     INTEGER NOT NULL,              -- nodes.id
    file_id INTEGER NOT NULL,              -- edge_lists.file_id
    PRIMARY KEY (dst, file_id)
) WITHOUT ROWID;

-- Work left for resolution by the writer (so a killed run resumes it):
-- files whose sites need resolving, and the handles of units deleted since
-- the last resolution (edges pointing at them are moved to the unit with the
-- same handle, or their files are resolved again; when no unit has the
-- handle, the files whose references use its name are resolved again).
CREATE TABLE graph_dirty (
    file_id INTEGER PRIMARY KEY
);
CREATE TABLE graph_stale (
    old_id INTEGER PRIMARY KEY,
    handle BLOB NOT NULL,
    name   TEXT NOT NULL
);
-- Files added since the last resolution (first indexed, or back after a
-- delete): the files whose references may now resolve to them (by a name
-- they define or by their module's name) are resolved again.
CREATE TABLE graph_added (
    file_id INTEGER PRIMARY KEY
);

-- Unit vectors for semantic retrieval (semantic.rs): one row per file,
-- written by the index run that (re)parsed it when an embedding model is
-- configured. data is the file's units as int8 vectors (embed::Quantized
-- blob); model, content_hash and first_node say which model embedded which
-- version of the file, so a stale row is never used.
CREATE TABLE unit_vectors (
    file_id      INTEGER PRIMARY KEY,      -- files.id
    model        TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    first_node   INTEGER NOT NULL,
    data         BLOB NOT NULL
);
