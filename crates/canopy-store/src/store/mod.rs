//! The SQLite index: schema, versioning, and every SQL statement Canopy runs.
//!
//! **Architecture invariant: the store is the only module that writes SQL.**
//! Other modules call typed methods here ([`write`] for the indexer, [`read`]
//! for queries, [`graph`] for resolution passes and graph answers, with
//! the rows of [`graph_rows`]). Indexing and querying meet only at this
//! boundary.
//!
//! **Architecture invariant: the store never names the graph.** The rows a
//! resolution pass reads and writes are the store's ([`graph_rows`]); the
//! graph uses them from here, so the dependency points down. Cargo enforces
//! it: this crate (`canopy-store`) does not depend on `canopy-core`, where
//! the graph lives.
//!
//! The database runs in WAL mode, so readers in other processes see the last
//! committed state while one writer indexes. The indexer writes in
//! transactions of whole files: a file's old rows are deleted and its new
//! rows inserted in the same transaction, so a killed indexer leaves every
//! file either fully old or fully new. Every transaction that changes what a
//! reader can see moves the generation in the same commit
//! ([`advance_generation`]), so a generation names exactly one state.
//!
//! An index that must be rebuilt (asked for, damaged, another schema
//! version) is never rebuilt in place: [`swap`] builds the new one beside
//! it and copies it in with one write transaction. Readers never rebuild
//! and never write to an existing index.

pub mod blob;
pub mod graph;
pub mod graph_rows;
mod name_catalog;
pub mod packed_edges;
pub mod packed_refs;
pub mod read;
pub mod swap;
mod text_totals;
pub mod write;

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, OptionalExtension};

use crate::error::{CanopyError, Result};

/// Version of the schema in `schema.sql`; stored in `PRAGMA user_version`.
/// Bumped also when what is extracted into it changes meaning, so older
/// indexes are rebuilt (8: names in Python annotations are `type` sites;
/// 10: Rust pattern and closure bindings, path heads and impls for `&T`,
/// ES imports marked exported or not, TypeScript call signatures repaired;
/// 11: graph facts stored as two blobs, sites apart; 12: Rust code compiled
/// out by `cfg` recorded; 13: per-file blobs compressed, edges keyed by
/// site and target without a rowid; 14: Rust items inside item-level
/// macro bodies extracted; 15: edges stored as one packed list per file,
/// `edge_lists` and `edge_targets`; 16: Rust tuple returns and tuple
/// `let` patterns, `_` counted in positional patterns; 17: Rust path heads
/// a local of the same name could hide, marked; 18: TypeScript overload
/// signatures are declarations, not uses of the name; function-typed
/// interface properties are methods; 19: imports carry their line, and
/// an import of a module file is an edge to that file's unit; 20: Python
/// properties are fields, loop variables items of typed iterables; 21:
/// `graph_added`, the files added since the last resolution, and
/// `graph_stale.name`); 22: TypeScript item types of typed collections,
/// `for … of` and array-callback parameters as items, casts as typed
/// locals, index by a name as a segment, type guards narrowing in `if`;
/// 23: Rust functions a file's `macro_rules!` make where invoked as items;
/// TypeScript `x instanceof C` narrowing in `if`; 24: what a call of a
/// TypeScript `var` type guard gives, guards joined by `||` narrowing to
/// either type; 25: Rust map entries' key and value items
/// (`OccupiedEntry<'a, K, V>`), `for` patterns over a `map` to a tuple,
/// `(i, (k, v))` of a map's `enumerate()`, the path of `impl … for
/// crate::X`; 26: Rust pairs of a map taken apart (`Some((k, v))` of a
/// map iterator's `next()` or an `Option<(K, V)>`, `|(k, v)|` of
/// `shift_remove_entry`, `Entry::Occupied(e)` of `m.entry(k)`), TypeScript
/// guards made by a generic maker (`#guard-of`, `#guard-call(`); 27: Rust
/// primitive types as type expressions, closure parameters bound (to
/// themselves when unknown, the shadowed name again after the closure),
/// tuple scrutinees' elements, `s.parse::<T>()`, `x.map(Cow::Borrowed)`,
/// `(**self)` of a forwarding impl as its `T`, a literal first argument
/// (`#lit:`), pairs of a type's own tuple-returning method (`¦`); 28: Rust
/// items of what a function returns (`#ret#elem` bindings, `f()#elem`),
/// pairs in sequences and `Iterator<Item = X>` as items, items one level
/// down, loops over a call's items, `let x = x` binding nothing; 29:
/// `files.ref_count`, so `status` sums `files` alone; 30: a Rust item a
/// `cfg` compiles out is compiled out from its first doc comment or
/// attribute (the unit's start), not from the `cfg`; 31: a Go file its
/// build constraints (`//go:build`, `// +build`) leave out of a default
/// build on linux/amd64 is compiled out as a whole (no sites); 32:
/// ECMAScript private names (`this.#dispatch()`) as sites, Go results as
/// tuples named one by one by `a, err := f()`, Go items of typed slices,
/// maps and variadic parameters, `range` values as items; 33: a Rust path
/// call with no first argument the walker can write keeps its path marker
/// (`thread|`: never a guess), Rust `static` / `const` items bind their
/// declared type, `lazy_static!`'s `static ref` items are parsed as
/// `static` items; Go elements by index (`blocks[i]`: `blocks#elem`) and
/// the items of what a function returns (`#ret#elem`); Rust slice types
/// (`&[u8]`: `[u8]`) and `Box<[u8]>` as a `Box`, literal slices, `vec![…]`
/// and `to_vec()` as literal types, a `let` bound to a literal; TypeScript
/// JSDoc `{@link}` names and object-literal properties (a typed object's
/// members, a shorthand's local) as sites, a unit's typed parameters by
/// position (`#arg:0`), Python loops over a literal list and parameters a
/// function calls as every value they hold; 34: Rust macro arguments
/// that parse as expressions (`assert!(a().b())`, `vec![…]`, `matches!`'s
/// first argument) give the facts of code, receivers of chains included;
/// 35: call sites carry their argument count and TypeScript / JavaScript
/// methods how many arguments they take (the unique-name guess checks it);
/// a Rust `v[i]` is an item of `v` (`v#elem`), a `const` of a
/// collection type binds its items, and `&[b'/', 0xFF][..]` is a `[u8]`
/// literal; 36: a Python field assigned from a typed parameter
/// (`self.parser = parser`, `parser: BlockParser`) binds the parameter's
/// annotation; 37: TypeScript / JavaScript accessors (`get x()`) are
/// marked (`o.x` is what the getter returns); 38: a TypeScript /
/// JavaScript function without a declared return type records what its
/// `return`s give (`=a∪b`, a value when they agree); 39: a Rust `&x`
/// pattern binds `x` as `x` alone would (`while let Some(&op) =
/// ops.get(i)`); 40: a Rust `o.and_then(|i| v.get(i))` is the closure's
/// value (`v.get()`); 41: a Python field assigned from a call on an
/// annotated parameter (`self.stream = environment.tokenize()`) reads the
/// call through the annotation; 42: every name of a Python chained
/// assignment (`ib = attr = attrib`) is bound to its last value; 43: a
/// Python definition between a local binding and a use (`check = lambda
/// …` after the parameter `check`) is what the use reads, a parameter's
/// passed functions are bound where the parameters end, no guess for a
/// Python builtin type's method name, and a TypeScript type alias has the
/// types it names as bases (`type AnyRouter = RouterCore<any>`); 44: Rust
/// globs inside use-lists, trait associated types with a bound as units,
/// `#[path]` modules, `cfg`s a build script decides; 45: a method of a
/// TypeScript object literal typed by its context (`{ next(v) { … } }`
/// passed as an `Observer`, `satisfies T`) is a use of that type's member,
/// a TypeScript / JavaScript callback's parameters without a type bind
/// their context (`new Promise((resolve) => …)`), and `Partial<T>`
/// (`Readonly`, `Required`, `NonNullable`) is stored as `T`; 46: no
/// unique-name guess for a method of Rust's standard library types and
/// traits (`s.is_empty()`, edges only); 47: a TypeScript function's
/// parameter of function type binds its own parameters' types (`cb: (c:
/// Ctx) => R`: `#arg:0#arg:0`), and `const xs = a.findAll().filter(…)`
/// binds `xs`'s items as `a.findAll()`'s; 48: a Rust trait implemented on
/// a primitive (`impl Float for f32`) is an impl unit named after it, its
/// methods `f32.limit`; 49: TypeScript: a callback's parameter over an
/// array literal (and a `for … of` variable) is every item (`#each:`), a
/// function held by a `const` stores its return, `export { h as jsx }` of
/// a local is an import of the file itself (`#own`), `f!()` is a call, a
/// type parameter's constraint stands for it in field and parameter types.
/// 50: a Python `with X() as x` / `async with` binds
/// `x` (`X().__enter__()`, else the item of a `-> Iterator[T]` factory),
/// a method annotated `-> Self` or `(self: T) -> T` returns `self`, and a
/// function's `-> Iterator[T]` (`Generator`, `ContextManager`, …) binds
/// `#ret#elem`, a `dict[K, V]` / `Mapping[K, V]` annotation binds `m#k` /
/// `m#v` and `for v in m.values()` (`keys()`, `items()`) binds them.
/// 51: the text index keeps up to
/// [`TEXT_PENDING_BYTES`] of pending terms (FTS5 `hashsize`), so a batch is
/// written as one segment. 52: a Go assignment `x = v` binds nothing (a
/// variable keeps its declared type), `s := m[k]` binds a map's value,
/// and a Rust `use` inside an inline `mod m { … }` names its `self` /
/// `super` paths from the file's module.
/// 53: Python: a union annotation (`A | B`,
/// `Union[A, B]`) is each alternative (`A∪B`), a conditional expression's
/// value each branch's, `for x in f()` / `list(f())` an item of what `f`
/// returns (`-> list[T]` binds `#ret#elem` too); TypeScript: a map type
/// binds its keys (`m#k`), `new Map<K, V>()` binds keys and values, and
/// `for … of` over `m.keys()` / `values()` / `entries()` / `[k, v]`,
/// `forEach((v, k) => …)`, `Array.from(s)` and `[...s]` read them.
/// 54: a Rust type parameter stands for each of its bounds (`T: A + B` is
/// `A∪B`), not the first one only.
/// 55: a Python name assigned in a function is bound whatever its value
/// (to itself when unknown, each name of a tuple target too), so it
/// shadows an import or global in the function and its nested functions.
/// 56: Python: a name a function declares `global`/`nonlocal` is no local of
/// it; a name annotated `type[X]` holds the class `X`; `type(self)` in a
/// method is its class. Rust: a binding, field or return typed `Option<…>` /
/// `Result<…>` also binds the wrapper (`x#std`, `#ret#std`), so a repository
/// trait implemented for `Option` / `Result` is found on it. TypeScript: a
/// union type alias stores its members, so a value it types is each.
/// 57: Python subscripts (`x[k]` as `x.__getitem__()`) and the items of
/// literal lists, sets and dicts; Rust calls through std locks, guards and
/// wrappers, `impl Trait` arguments in parentheses, literal receivers and
/// struct-variant pattern fields; TypeScript generics written with their
/// arguments and homomorphic mapped types (`#keeps:`); ECMAScript default
/// exports and imports (`default` members and import sites) and JavaScript
/// `extends` bases.
/// 58: TypeScript type parameters of generic classes (`#<>`) and
/// function-typed results (`#ret#call`), `instanceof` narrowing of member
/// paths; Rust `cfg(feature)` facts, items of macro bodies whose `fn`s draw
/// inputs with `in`, items written by a file's own `macro_rules!`, and the
/// items of `Option`/`Result` payloads; Go named collection types' items,
/// typed constants and type-switch bindings; Python tuple returns, pair
/// loops, collection views and results made of the receiver's own class.
/// 59: Go `var a, b = …` pairs and call results; Rust references at the
/// invocation tokens a `macro_rules!` expansion calls through (`uri.$m()`),
/// and the facts of one-rule function-writing macros; Python type aliases
/// (`X = Union[…]`, `X: TypeAlias`, `type X = …`), `type[X]` annotations
/// and loops over `super().m(…)`.
pub const SCHEMA_VERSION: u32 = 59;

/// Bytes of pending terms FTS5 holds before it writes them out as a segment
/// (its `hashsize`, set in `schema.sql`; FTS5's default is 1 MiB). A commit
/// writes them out too, so an index batch (at most 256 files or 4 MiB of
/// source, plus one file: 2-3 MiB of pending terms) is one segment, not
/// several that merges then rewrite: a first index of `dj` did 4 flushes
/// and merged them at its end, 2.2% of its instructions (bench/README.md,
/// "Twenty-second session"). Bounds the memory those terms take when a
/// file larger than the default size limit is indexed.
pub const TEXT_PENDING_BYTES: i64 = 8 * 1024 * 1024;

/// Leaf pages one step of [`Store::merge_text_segments`] writes at most
/// (about 13 ms on the 5,000-file generated corpus): what another writer,
/// or an edit arriving at an idle watcher, waits for at most.
pub const TEXT_MERGE_STEP_PAGES: u64 = 256;

/// FTS5's `automerge` during a build into an empty index: a level's
/// segments are merged once it holds this many (see
/// [`Store::merge_text_during_build`]).
const BUILD_AUTOMERGE: i64 = 8;

const SCHEMA: &str = include_str!("schema.sql");

/// Secondary indexes a build into an empty index creates at its end
/// instead of keeping them up while it writes (see [`Store::defer_indexes`]).
pub const BULK_BUILT_INDEXES: [&str; 3] = ["nodes_handle", "nodes_name", "ref_names_nocase"];

/// `CREATE INDEX IF NOT EXISTS …` for an index of `schema.sql`, from its
/// definition there (one statement, up to its `;`).
fn index_definition(name: &str) -> Option<String> {
    let head = format!("CREATE INDEX {name} ON ");
    let start = SCHEMA.find(&head)?;
    let end = start + SCHEMA[start..].find(';')?;
    Some(format!(
        "CREATE INDEX IF NOT EXISTS {};",
        &SCHEMA[start + "CREATE INDEX ".len()..end]
    ))
}

/// Stored `refs.ref_type` codes: the index is the code, the text is the name
/// shown in responses (`crate::lang::RefType::as_str`).
pub const REF_TYPES: [&str; 3] = ["call", "import", "type_ref"];

/// The `refs.ref_type` code of a reference type name.
pub fn ref_type_code(name: &str) -> i64 {
    REF_TYPES.iter().position(|t| *t == name).unwrap_or(0) as i64
}

/// A stored `ref_type` code as its name.
pub fn ref_type_name(code: i64) -> &'static str {
    REF_TYPES.get(code as usize).copied().unwrap_or("call")
}

/// Moves the generation by one inside the caller's write transaction.
///
/// Called by every write transaction that changes what a reader can see
/// (a batch of files, a chunk of edges), so the new state commits with a
/// generation of its own: two readers that see the same generation see the
/// same index. Runs that change nothing leave it alone (handles stay valid).
pub fn advance_generation(conn: &Connection) -> Result<()> {
    conn.prepare_cached(
        "INSERT INTO meta(key, value) VALUES ('generation', '1')
         ON CONFLICT(key) DO UPDATE SET value = CAST(value AS INTEGER) + 1",
    )?
    .execute([])?;
    new_state_stamp(conn)
}

/// Gives the index a new [`meta_keys::STATE_STAMP`] inside the caller's
/// write transaction: called wherever `files` or `unit_vectors` change
/// (with the generation, and where the generation stays: stored vectors,
/// files marked for re-parsing).
pub fn new_state_stamp(conn: &Connection) -> Result<()> {
    conn.prepare_cached(
        "INSERT INTO meta(key, value) VALUES (?1, ?2)
         ON CONFLICT(key) DO UPDATE SET value = excluded.value",
    )?
    .execute([meta_keys::STATE_STAMP, &random_stamp()])?;
    Ok(())
}

/// 128 random bits as hex. The standard library's hasher keys are drawn
/// from the system's randomness once per thread (and moved on by one per
/// `RandomState`); the clock and the process id make two processes'
/// stamps differ as well.
fn random_stamp() -> String {
    use std::hash::{BuildHasher, Hasher};
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    (0..2u8)
        .map(|half| {
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_u128(nanos);
            h.write_u32(std::process::id());
            h.write_u8(half);
            format!("{:016x}", h.finish())
        })
        .collect()
}

/// One connection to a repository's index.
pub struct Store {
    /// The SQLite connection. Only this crate runs statements on it (the
    /// store is the only module that writes SQL); it is public for the
    /// tests of the layers above, which read rows to compare indexes.
    #[doc(hidden)]
    pub conn: Connection,
    path: PathBuf,
    /// Distinct unit names, for substring symbol search (see [`read::NameCatalog`]).
    names: read::NameCatalogCache,
    /// Decoded reference blobs (see [`read::DecodedCache`]).
    decoded_refs: read::DecodedCache<packed_refs::PackedRef, { read::DECODED_REFS_MAX }>,
    /// Decoded edge lists (see [`read::DecodedCache`]).
    decoded_edges: read::DecodedCache<packed_edges::PackedEdge, { read::DECODED_EDGES_MAX }>,
    /// Reference-name ids known to this (writer) connection (see [`write::NameIds`]).
    ref_name_ids: write::NameIds,
    /// The file this connection opened (see [`Store::is_current`]).
    identity: Option<FileIdentity>,
    /// An empty stand-in for an index that must be rebuilt first (see
    /// [`Store::open`]): it is replaced as soon as the file is usable.
    placeholder: bool,
}

/// Which file a path named when a connection opened it: device and inode.
/// A file replaced under an open connection (deleted and created again by
/// an older Canopy, or by hand) has another identity; the connection keeps
/// reading the deleted one until it is reopened (issue N9).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileIdentity {
    dev: u64,
    ino: u64,
}

impl FileIdentity {
    /// The identity of the file at `path`, if it exists (and the platform
    /// has inodes; elsewhere `None`, and no replacement is detected).
    pub fn of(path: &Path) -> Option<FileIdentity> {
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            let m = std::fs::metadata(path).ok()?;
            Some(FileIdentity {
                dev: m.dev(),
                ino: m.ino(),
            })
        }
        #[cfg(not(unix))]
        {
            let _ = path;
            None
        }
    }
}

/// What [`Store::open_for_writing`] found.
pub enum ForWriting {
    /// The index, ready for an incremental run.
    Ready(Box<Store>),
    /// The index must be rebuilt before anything is written to it: build
    /// it beside the live one and swap ([`swap::SideIndex`]).
    Rebuild(Rebuild),
}

/// Why an index must be rebuilt.
#[derive(Clone, Debug)]
pub struct Rebuild {
    /// Said to the user (the next `canopy_core::model::IndexReport::rebuilt`).
    pub reason: String,
    /// The markers that asked for it (path and text): each is removed
    /// after the swap only if nobody rewrote it meanwhile.
    markers: Vec<(PathBuf, String)>,
    /// The live index the rebuild replaces.
    db_path: PathBuf,
    /// Whether the live index can be read (same schema, sound header): a
    /// rebuild then replaces a working index and must be complete; else
    /// nothing usable is lost and it may start as a partial build.
    pub live_usable: bool,
}

impl Rebuild {
    /// Removes the markers that asked for this rebuild (after the swap),
    /// unless they were written again since.
    ///
    /// A damage marker written during the rebuild most often describes the
    /// file being replaced: the live index answered (and was checked) until
    /// the swap, and a status poll or a query that failed on it marks it
    /// again. So a damage marker still present after the swap is checked
    /// against the file now live, and removed when that file is sound; one
    /// that describes the new file stays.
    pub fn clear_markers(&self) -> Result<()> {
        let remove = |marker: &Path| match std::fs::remove_file(marker) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(CanopyError::io(marker, e)),
        };
        for (marker, seen) in &self.markers {
            match std::fs::read_to_string(marker) {
                Ok(now) if &now == seen => remove(marker)?,
                _ => {}
            }
        }
        let damage = damage_marker(&self.db_path);
        if damage.exists() && check_integrity(&self.db_path)?.is_none() {
            tracing::info!("the rebuilt index is sound: its damage marker described the old file");
            remove(&damage)?;
        }
        Ok(())
    }
}

/// Well-known keys of the `meta` table.
pub mod meta_keys {
    /// When the last index run finished (unix seconds).
    pub const LAST_INDEXED: &str = "last_indexed";
    /// How the files were listed (`git_ls_files` or `walk`).
    pub const FILE_DISCOVERY: &str = "file_discovery";
    /// The last run's skipped files by reason (JSON).
    pub const SKIPPED: &str = "skipped";
    /// How many files the repository offers for indexing.
    pub const CANDIDATE_FILES: &str = "candidate_files";
    /// Whether every candidate file is indexed (`1`), as opposed to a
    /// partial, lazily started index.
    pub const INDEX_COMPLETE: &str = "index_complete";
    /// Bumped by every index run that changed the index.
    pub const GENERATION: &str = "generation";
    /// The bare `cfg` names each Cargo package's build script turns on,
    /// as the indexed Rust files' facts were read with them: one line per
    /// package that has any, its folder, a tab, the names space-separated.
    pub const RUST_BUILD_FLAGS: &str = "rust_build_flags";
    /// 128 random bits (hex) drawn anew by every write that changes the
    /// indexed files or the stored unit vectors ([`super::new_state_stamp`]),
    /// generation or not (storing vectors and marking files for re-parsing
    /// leave the generation), and by a writer that finds none. A cache kept
    /// outside the database (the flat vector file of a one-off semantic
    /// search) records the stamp it was built at and is used only while
    /// the index has the same one: a deleted and recreated index, whose
    /// generations start again, has another.
    pub const STATE_STAMP: &str = "state_stamp";
}

fn configure(conn: &Connection) -> Result<()> {
    conn.busy_timeout(Duration::from_secs(30))?;
    // Free pages (FTS5 segment merges, re-indexed files) go back to the file
    // system after each run instead of staying in the file (15% of a fresh
    // tokio index before this). SQLite accepts the setting only while the
    // file is still empty, so it must come before the switch to WAL, which
    // writes the first page.
    //
    // Only on an empty file: on an existing database `PRAGMA auto_vacuum =
    // INCREMENTAL` is not read-only, it runs a *write* transaction that
    // stores the mode in the header again. Every reader opening the index
    // (a `canopy status` poll) then queued for the write lock behind the
    // indexer and, once it had it, moved the indexer's `data_version`, which
    // made a first build drop its complete name map and look names up in a
    // table whose index it had deferred: full scans, a build that never
    // finished (issue N10). Readers must never write.
    let pages: i64 = conn.query_row("PRAGMA page_count", [], |r| r.get(0))?;
    if pages == 0 {
        conn.pragma_update(None, "auto_vacuum", "INCREMENTAL")?;
    }
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    conn.pragma_update(None, "temp_store", "MEMORY")?;
    conn.pragma_update(None, "cache_size", -READ_CACHE_KIB)?;
    // Reads straight from the OS page cache instead of a `pread` and a copy
    // per page (30% of a reference lookup's samples in `perf` before this,
    // when references were rows scattered over many pages). Address space only;
    // the pages are the kernel's, shared with every other reader of the file.
    conn.pragma_update(None, "mmap_size", READ_MMAP_BYTES)?;
    Ok(())
}

/// How much of the index file a connection maps for reading (see `configure`).
const READ_MMAP_BYTES: i64 = 1 << 30;

/// SQLite's page cache of a reading connection, KiB (see `configure`).
const READ_CACHE_KIB: i64 = 16_000;

/// SQLite's page cache of the connection while it runs an index, KiB (see
/// [`Store::map_for_reading`]). A cold index writes each table's pages
/// once, in key order, and reads each file's facts once: a larger cache
/// holds pages nobody reads again. With the reader's 16 MB the cache was
/// most of what a cold index of sympy kept between its parse-and-write
/// phase and resolution; 2 MB lowers that peak without more CPU (issue 28
/// item 4, `bench/README.md`).
const INDEX_RUN_CACHE_KIB: i64 = 2_000;

/// The page cache, KiB, a connection keeps: small while it runs an index,
/// the reader's otherwise.
fn cache_kib(index_run: bool) -> i64 {
    if index_run {
        INDEX_RUN_CACHE_KIB
    } else {
        READ_CACHE_KIB
    }
}

impl Store {
    /// Whether this connection reads the index through a memory map (the
    /// default) or, while it runs an index, through its bounded page cache:
    /// every page a run reads through the map (the B-trees it writes into,
    /// every file's facts and units for resolution) stays resident in the
    /// process until it exits, so peak RSS grew with the index (tokio
    /// 71 MiB, Django 201, two Djangos 360). While it runs an index the
    /// connection also keeps a smaller page cache ([`INDEX_RUN_CACHE_KIB`]).
    pub fn map_for_reading(&self, on: bool) -> Result<()> {
        let bytes = if on { READ_MMAP_BYTES } else { 0 };
        self.conn.pragma_update(None, "mmap_size", bytes)?;
        self.conn
            .pragma_update(None, "cache_size", -cache_kib(!on))?;
        Ok(())
    }
}

impl Store {
    /// Opens the index at `db_path` for reading, creating an empty one when
    /// there is none.
    ///
    /// Never rebuilds and never writes to an existing index: one that must
    /// be rebuilt (another schema version, an unreadable file) opens as an
    /// empty placeholder (nothing indexed) and the message says why; the
    /// next index run rebuilds it beside the live file and swaps it in
    /// ([`swap`]), after which [`Store::is_current`] says to reopen.
    pub fn open(db_path: &Path) -> Result<(Store, Option<String>)> {
        match Self::try_open(db_path) {
            Ok(Some(store)) => Ok((store, None)),
            Ok(None) => Ok((
                Self::placeholder(db_path)?,
                Some(format!(
                    "index at {} has another schema version; rebuilding it (schema v{SCHEMA_VERSION})",
                    db_path.display()
                )),
            )),
            Err(CanopyError::Database(e)) if is_damaged(&e) => Ok((
                Self::placeholder(db_path)?,
                Some(format!(
                    "index at {} is unreadable ({e}); rebuilding it",
                    db_path.display()
                )),
            )),
            Err(e) => Err(e),
        }
    }

    /// Opens the index for an index run: the index itself, or why it must
    /// be rebuilt first (marked for rebuilding, another schema version, an
    /// unreadable file). Only writers rebuild, and never in place.
    pub fn open_for_writing(db_path: &Path) -> Result<ForWriting> {
        // Damage first: its detail is the better reason.
        let markers: Vec<(PathBuf, String)> = [damage_marker(db_path), rebuild_marker(db_path)]
            .into_iter()
            .filter_map(|m| std::fs::read_to_string(&m).ok().map(|text| (m, text)))
            .collect();
        let opened = match Self::try_open(db_path) {
            Ok(Some(store)) => Ok(store),
            Ok(None) => Err(format!(
                "index at {} has another schema version; rebuilding it (schema v{SCHEMA_VERSION})",
                db_path.display()
            )),
            Err(CanopyError::Database(e)) if is_damaged(&e) => Err(format!(
                "index at {} is unreadable ({e}); rebuilding it",
                db_path.display()
            )),
            Err(e) => return Err(e),
        };
        match (opened, markers.first()) {
            (Ok(store), None) => {
                // An index written before stamps existed gets one here, so
                // a cache keyed by it can be used from now on.
                // Not a reason to fail the run: any write it makes draws one.
                if store.meta(meta_keys::STATE_STAMP)?.is_none()
                    && let Err(e) = new_state_stamp(&store.conn)
                {
                    tracing::debug!("no state stamp given to the index yet: {e}");
                }
                Ok(ForWriting::Ready(Box::new(store)))
            }
            (Ok(_), Some((_, detail))) => Ok(ForWriting::Rebuild(Rebuild {
                reason: format!(
                    "index at {} was marked for rebuilding ({}); rebuilding it",
                    db_path.display(),
                    detail.trim()
                ),
                markers,
                db_path: db_path.to_path_buf(),
                live_usable: true,
            })),
            (Err(reason), _) => Ok(ForWriting::Rebuild(Rebuild {
                reason,
                markers,
                db_path: db_path.to_path_buf(),
                live_usable: false,
            })),
        }
    }

    /// An in-memory index with the schema and nothing in it: what a reader
    /// answers from while the file at `db_path` waits to be rebuilt.
    fn placeholder(db_path: &Path) -> Result<Store> {
        let conn = Connection::open_in_memory()?;
        conn.execute_batch(SCHEMA)?;
        Ok(Store {
            placeholder: true,
            ..Self::with_connection(conn, db_path.to_path_buf(), None)
        })
    }

    fn with_connection(conn: Connection, path: PathBuf, identity: Option<FileIdentity>) -> Store {
        Store {
            conn,
            path,
            names: Default::default(),
            decoded_refs: Default::default(),
            decoded_edges: Default::default(),
            ref_name_ids: Default::default(),
            identity,
            placeholder: false,
        }
    }

    /// A store on a private in-memory database: a placeholder that holds no
    /// file open (see `Engine::reopen_reader`).
    pub fn detached() -> Result<Store> {
        let conn = Connection::open_in_memory()?;
        Ok(Self::with_connection(conn, PathBuf::from(":memory:"), None))
    }

    /// Opens the existing index again (a new connection), without the
    /// rebuilding [`Store::open`] may do.
    pub fn reopen(db_path: &Path) -> Result<Store> {
        Self::try_open(db_path)?.ok_or_else(|| {
            CanopyError::Validation(format!(
                "the index at {} changed schema while open; run `canopy index`",
                db_path.display()
            ))
        })
    }

    /// Whether this connection still reads the index at its path: false for
    /// a placeholder (the file may have been rebuilt since) and for a file
    /// replaced under it (deleted and created again: it would keep reading
    /// the deleted one, issue N9). A file that is gone keeps its reader:
    /// there is nothing newer to read.
    pub fn is_current(&self) -> bool {
        if self.placeholder {
            return false;
        }
        match (self.identity, FileIdentity::of(&self.path)) {
            (Some(mine), Some(now)) => mine == now,
            _ => true,
        }
    }

    /// Closes a connection whose file was replaced under it (see
    /// [`Store::is_current`]) without touching the new file: the last
    /// connection to close a WAL database checkpoints and deletes the
    /// `-wal` and `-shm` files *by name*, which now belong to the new index
    /// and may hold its committed transactions.
    pub fn close_orphaned(self) {
        if let Err(e) = self.conn.set_db_config(
            rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE,
            true,
        ) {
            tracing::warn!("cannot close the replaced index cleanly: {e}");
            // Leaking the connection is safer than deleting another file's log.
            std::mem::forget(self);
        }
    }

    /// `Ok(None)` when the file holds an index of another schema version.
    fn try_open(db_path: &Path) -> Result<Option<Store>> {
        let conn = Connection::open_with_flags(
            db_path,
            OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_CREATE
                | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        // Taken once the file is open: if it was replaced in between, the
        // next `is_current` sees a mismatch and reopens (harmless).
        let identity = FileIdentity::of(db_path);
        configure(&conn)?;
        let version: u32 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
        let has_tables: bool = conn
            .query_row("SELECT 1 FROM sqlite_master LIMIT 1", [], |_| Ok(()))
            .optional()?
            .is_some();
        if version == SCHEMA_VERSION {
            return Ok(Some(Self::with_connection(
                conn,
                db_path.to_path_buf(),
                identity,
            )));
        }
        if has_tables {
            return Ok(None);
        }
        // Create under an immediate transaction so two processes creating at once
        // wait for each other instead of failing on a lock upgrade.
        let tx =
            rusqlite::Transaction::new_unchecked(&conn, rusqlite::TransactionBehavior::Immediate)?;
        let version: u32 = tx.pragma_query_value(None, "user_version", |r| r.get(0))?;
        if version == 0 {
            tx.execute_batch(SCHEMA)?;
            tx.pragma_update(None, "user_version", SCHEMA_VERSION)?;
        }
        tx.commit()?;
        Ok(Some(Self::with_connection(
            conn,
            db_path.to_path_buf(),
            identity,
        )))
    }

    /// Path of the database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes on disk: the database plus its write-ahead log.
    pub fn size_on_disk(&self) -> u64 {
        ["", "-wal"]
            .iter()
            .filter_map(|suffix| {
                let mut p = self.path.as_os_str().to_owned();
                p.push(suffix);
                std::fs::metadata(PathBuf::from(p)).ok().map(|m| m.len())
            })
            .sum()
    }

    /// Reads a `meta` value.
    pub fn meta(&self, key: &str) -> Result<Option<String>> {
        Ok(self
            .conn
            .prepare_cached("SELECT value FROM meta WHERE key = ?1")?
            .query_row([key], |r| r.get(0))
            .optional()?)
    }

    /// Whether an index run ever started on this index (a first build
    /// records the repository's candidate files before it writes any file).
    pub fn build_started(&self) -> Result<bool> {
        Ok(self.meta(meta_keys::LAST_INDEXED)?.is_some()
            || self.meta(meta_keys::CANDIDATE_FILES)?.is_some())
    }

    /// Whether the index covers every candidate file of the repository.
    pub fn is_complete(&self) -> Result<bool> {
        Ok(self.meta(meta_keys::INDEX_COMPLETE)?.as_deref() == Some("1"))
    }

    /// The share of the repository's candidate files the index covers: 1
    /// when it is complete, else the files it holds, indexed or recorded as
    /// skipped (binary, unreadable), over the candidates the last run
    /// listed. A skipped file is covered: the index knows what it is, and a
    /// query would find nothing more in it (issue N7: Django showed 0.797
    /// with every text file indexed, its binaries counted as missing).
    pub fn coverage(&self) -> Result<f64> {
        if self.is_complete()? {
            return Ok(1.0);
        }
        let candidates = self
            .meta(meta_keys::CANDIDATE_FILES)?
            .and_then(|s| s.parse::<u64>().ok())
            .unwrap_or(0);
        if candidates == 0 {
            return Ok(0.0);
        }
        let covered: i64 = self.conn.query_row(
            "SELECT (SELECT COUNT(*) FROM files) + (SELECT COUNT(*) FROM skipped_files)",
            [],
            |r| r.get(0),
        )?;
        Ok((covered as f64 / candidates as f64).min(1.0))
    }

    /// [`Store::coverage`] while the index is partial; `None` once complete
    /// (what answers carry as `index_coverage`).
    pub fn partial_coverage(&self) -> Result<Option<f64>> {
        Ok(if self.is_complete()? {
            None
        } else {
            Some(self.coverage()?)
        })
    }

    /// Writes a `meta` value.
    pub fn set_meta(&self, key: &str, value: &str) -> Result<()> {
        // A single autocommit statement: SQLite takes the write lock up front.
        self.conn
            .prepare_cached("INSERT INTO meta(key, value) VALUES (?1, ?2) ON CONFLICT(key) DO UPDATE SET value = excluded.value")?
            .execute([key, value])?;
        Ok(())
    }

    /// Starts a read transaction: every read until the returned guard drops
    /// sees the same committed state, even while another connection writes.
    pub fn read_snapshot(&self) -> Result<ReadSnapshot<'_>> {
        self.conn.execute_batch("BEGIN DEFERRED")?;
        Ok(ReadSnapshot { store: self })
    }

    /// [`Store::read_snapshot`] whose statements SQLite interrupts once
    /// `budget` has passed (every statement then fails with
    /// `SQLITE_INTERRUPT`, which `Engine` reports as a time-budget error),
    /// so a request that would run for minutes stops instead of holding
    /// memory and the read lock after its caller gave up.
    pub fn read_snapshot_within(&self, budget: Duration) -> Result<ReadSnapshot<'_>> {
        let deadline = std::time::Instant::now() + budget;
        // A caller that gives up stops the work the same way.
        let cancel = crate::cancel::current();
        // Checked every few thousand VM steps: microseconds apart.
        self.conn.progress_handler(
            4_000,
            Some(move || {
                std::time::Instant::now() >= deadline
                    || cancel.as_ref().is_some_and(|c| c.is_cancelled())
            }),
        );
        match self.read_snapshot() {
            Ok(snapshot) => Ok(snapshot),
            Err(e) => {
                self.conn.progress_handler(0, None::<fn() -> bool>);
                Err(e)
            }
        }
    }

    /// Drops reference names and qualifiers no reference uses any more
    /// (no posting): one index probe per name, needed after rows were
    /// deleted (see `index::run_index` for when it runs).
    pub fn drop_unused_ref_names(&mut self) -> Result<()> {
        // This connection's name ids may name rows about to go.
        self.ref_name_ids = Default::default();
        self.conn.execute_batch(
            "DELETE FROM ref_names
             WHERE NOT EXISTS (SELECT 1 FROM ref_postings WHERE name_id = ref_names.id)",
        )?;
        Ok(())
    }

    /// Before a build into an empty index: drops the secondary indexes
    /// of [`BULK_BUILT_INDEXES`], which [`Store::ensure_indexes`] creates at
    /// the end of the build. Kept up row by row, an index whose keys
    /// arrive in random order (handles, names, edge targets) ends up with
    /// pages about two-thirds full; created from the finished table, it is
    /// sorted once and its pages are full (tokio: 120 KB less, 1.5% of its
    /// index). Until then lookups by those keys scan their table: queries
    /// during a first build are slower, never wrong. The build's writer
    /// looks nothing up by them (reference names: see [`write::NameIds`]);
    /// its resolution does, so the run creates them before it resolves.
    pub fn defer_indexes(&mut self) -> Result<()> {
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let empty: bool = tx.query_row("SELECT NOT EXISTS (SELECT 1 FROM ref_names)", [], |r| {
            r.get(0)
        })?;
        for name in BULK_BUILT_INDEXES {
            tx.execute_batch(&format!("DROP INDEX IF EXISTS {name};"))?;
        }
        let version: i64 = tx.query_row("PRAGMA data_version", [], |r| r.get(0))?;
        tx.commit()?;
        if empty {
            self.ref_name_ids = write::NameIds::complete(version);
        }
        Ok(())
    }

    /// Creates whichever index of [`BULK_BUILT_INDEXES`] is missing: at the
    /// end of a build into an empty index, and at the start of every run
    /// (a build that was killed or failed left them missing). Returns how
    /// many it created.
    pub fn ensure_indexes(&mut self) -> Result<usize> {
        let missing: Vec<&str> = {
            let mut stmt = self
                .conn
                .prepare_cached("SELECT 1 FROM sqlite_schema WHERE type = 'index' AND name = ?1")?;
            let mut missing = Vec::new();
            for name in BULK_BUILT_INDEXES {
                if !stmt.exists([name])? {
                    missing.push(name);
                }
            }
            missing
        };
        if missing.is_empty() {
            return Ok(0);
        }
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        for name in &missing {
            let sql = index_definition(name).ok_or_else(|| {
                CanopyError::Internal(format!("index {name} is not in the schema"))
            })?;
            tx.execute_batch(&sql)?;
        }
        tx.commit()?;
        Ok(missing.len())
    }

    /// After a run that changed something: returns free pages to the file
    /// system (cheap; the database uses incremental auto-vacuum, see
    /// `configure`).
    pub fn release_free_pages(&mut self) -> Result<()> {
        // The pragma frees one page per step (it yields a row each time), so
        // it must be stepped to the end; `execute_batch` would step it once.
        let mut vacuum = self.conn.prepare("PRAGMA incremental_vacuum")?;
        let mut steps = vacuum.query([])?;
        while steps.next()?.is_some() {}
        Ok(())
    }

    /// Before a run's writes: turns off the text index's automatic merging
    /// (a setting stored in the index; [`Store::merge_text_segments`] does
    /// the merging once, after the run's writes are visible). Each batch's
    /// commit otherwise merges segments full of the tombstones that
    /// `contentless_delete` leaves for replaced rows, and that merge work is
    /// most of a large incremental batch (issue 32 item 2). A run killed
    /// before its merge leaves it off; the next run's merge catches up, and
    /// FTS5's crisis merge bounds the segments in between.
    pub fn defer_text_merges(&mut self) -> Result<()> {
        // FTS5's default, 4, when the measuring knob asks for the old way.
        self.set_text_automerge(if merges_per_batch() { 4 } else { 0 })
    }

    /// Before a build into an empty index: the text index merges its
    /// segments at each batch's commit (FTS5's automatic merging, level by
    /// level as [`Store::merge_text_segments`] would), so the merging runs
    /// on the writer thread while the parsers work instead of alone after
    /// resolution (Django: 0.4–0.8 s of a cold index's wall time, about the
    /// same CPU either way). A build's segments hold no tombstones, which is
    /// what made per-batch merging costly for re-indexed files (see
    /// [`Store::defer_text_merges`], which the run calls once its writes are
    /// done, so the stored setting ends as after any run).
    ///
    /// Eight segments to a level, not FTS5's four: with a batch written as
    /// one segment ([`TEXT_PENDING_BYTES`]) a build of Django (5,350 files)
    /// writes ~22 segments; merged by fours they were rewritten twice (level
    /// 0 to 1, then 1 to 2), by eights about once (the last few stay on
    /// level 0, or the run's [`Store::merge_text_segments`] merges them
    /// once they are four).
    pub fn merge_text_during_build(&mut self) -> Result<()> {
        self.set_text_automerge(BUILD_AUTOMERGE)
    }

    /// Stores FTS5's `automerge` setting when it differs.
    fn set_text_automerge(&mut self, wanted: i64) -> Result<()> {
        let automerge: Option<i64> = self
            .conn
            .query_row("SELECT v FROM fts_config WHERE k = 'automerge'", [], |r| {
                r.get(0)
            })
            .optional()?;
        if automerge != Some(wanted) {
            self.conn.execute(
                "INSERT INTO fts(fts, rank) VALUES('automerge', ?1)",
                [wanted],
            )?;
        }
        Ok(())
    }

    /// After a run's writes: merges the text index's segments as its
    /// automatic merging would have (levels holding `usermerge`, default 4,
    /// segments), in steps of at most [`TEXT_MERGE_STEP_PAGES`] leaf pages,
    /// one transaction each so that another writer waits at most one step,
    /// until a step finds nothing left to merge or the steps have asked for
    /// `max_pages` pages. Returns the steps that merged something.
    ///
    /// Why a bound: one-file runs each leave a small segment, and every so
    /// often their levels fill up to one that holds large segments of the
    /// initial build; merging those is tens of steps (the 16th one-line
    /// edit of the 5,000-file generated corpus: 26 steps, 344 ms, against
    /// 0–1 step and 0 ms for the others; issue 28 item 5). FTS5 keeps a
    /// merge's progress in the index, so the next runs go on with it where
    /// this one stopped, and the segments in between stay bounded by FTS5's
    /// crisis merge. A step asked for fewer pages writes about that many
    /// (FTS5 ends a step at the first term boundary after them).
    pub fn merge_text_segments(&mut self, max_pages: u64) -> Result<u32> {
        let mut steps = 0;
        if merges_per_batch() {
            return Ok(steps);
        }
        let mut left = max_pages;
        while left > 0 {
            let pages = left.min(TEXT_MERGE_STEP_PAGES);
            let before = self.conn.total_changes();
            self.conn
                .execute("INSERT INTO fts(fts, rank) VALUES('merge', ?1)", [pages])?;
            // FTS5 documents the test: fewer than 2 changes, nothing merged.
            if self.conn.total_changes() - before < 2 {
                return Ok(steps);
            }
            steps += 1;
            left -= pages;
        }
        Ok(steps)
    }

    /// Pages on the free list: space inside the file that no table uses.
    /// Zero after every run (see [`Store::release_free_pages`]).
    pub fn free_pages(&self) -> Result<u64> {
        Ok(self
            .conn
            .pragma_query_value(None, "freelist_count", |r| r.get::<_, i64>(0))? as u64)
    }

    /// Folds the write-ahead log back into the database file (after a large run).
    pub fn checkpoint(&self) -> Result<()> {
        self.conn
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
        Ok(())
    }
}

/// The measuring knob `CANOPY_TEXT_MERGE=per-batch`: FTS5's automatic
/// merging at every batch's commit, as before the merging was deferred to
/// the end of a run, so `bench/text_merge.sh` can compare the two on one
/// build. Not an interface.
fn merges_per_batch() -> bool {
    std::env::var("CANOPY_TEXT_MERGE").as_deref() == Ok("per-batch")
}

/// An open read transaction (see [`Store::read_snapshot`]); ends when dropped.
pub struct ReadSnapshot<'a> {
    store: &'a Store,
}

impl std::ops::Deref for ReadSnapshot<'_> {
    type Target = Store;
    fn deref(&self) -> &Store {
        self.store
    }
}

impl Drop for ReadSnapshot<'_> {
    fn drop(&mut self) {
        // A time budget (if any) ends with the snapshot, before the COMMIT it
        // could otherwise interrupt.
        self.store.conn.progress_handler(0, None::<fn() -> bool>);
        // A read transaction has nothing to roll back; ending it cannot lose data.
        let _ = self.store.conn.execute_batch("COMMIT");
    }
}

/// The file that marks an index for rebuilding: `index.db.damaged`, holding
/// what was found. Written by [`mark_damaged`], read by [`Store::open`].
pub fn damage_marker(db_path: &Path) -> PathBuf {
    let mut p = db_path.as_os_str().to_owned();
    p.push(".damaged");
    PathBuf::from(p)
}

/// The file that asks the next writer to rebuild an index nothing is
/// known to be wrong with (`canopy index --rebuild`, `POST /reindex` with
/// `rebuild`): `index.db.rebuild-asked`. Apart from the damage marker so
/// that the index is not reported damaged while it is rebuilt (the live
/// one answers meanwhile).
pub fn rebuild_marker(db_path: &Path) -> PathBuf {
    let mut p = db_path.as_os_str().to_owned();
    p.push(".rebuild-asked");
    PathBuf::from(p)
}

/// Asks the next writer to rebuild the index (see [`rebuild_marker`]).
pub fn ask_rebuild(db_path: &Path) -> Result<()> {
    let marker = rebuild_marker(db_path);
    std::fs::write(&marker, "a rebuild was asked for").map_err(|e| CanopyError::io(marker, e))
}

/// Marks the index for rebuilding by the next writer (see [`Store::open`]).
pub fn mark_damaged(db_path: &Path, detail: &str) -> Result<()> {
    let marker = damage_marker(db_path);
    std::fs::write(&marker, detail).map_err(|e| CanopyError::io(marker, e))
}

/// Checks the file at `db_path` ([`check_integrity`]) and, when it is
/// damaged, marks it for rebuilding ([`mark_damaged`]); returns what was
/// found in the file that was checked. Errors only when the check itself
/// cannot run.
///
/// A rebuild may swap a sound index in while the damaged one is checked
/// ([`swap`] copies into the live file, so the path and inode stay): when
/// its [`Store::clear_markers`] ran before this marker was written, the
/// marker would report the new index damaged until the next run. So the
/// live generation is read before the check and again after the marker is
/// written: moved, the file now live is checked and, sound, its marker
/// taken back; unmoved, any later swap comes after the marker, and its own
/// `clear_markers` checks the new file and clears it.
pub fn check_and_mark_damaged(db_path: &Path) -> Result<Option<String>> {
    check_and_mark_damaged_then(db_path, || {})
}

/// [`check_and_mark_damaged`], running `after_mark` between writing the
/// marker and reading the generation again (where a test swaps).
fn check_and_mark_damaged_then(
    db_path: &Path,
    after_mark: impl FnOnce(),
) -> Result<Option<String>> {
    let checked = swap::generation_of(db_path);
    let Some(detail) = check_integrity(db_path)? else {
        return Ok(None);
    };
    // A marker that cannot be written (a full disk) must not hide what was
    // found: the caller reports the damage either way.
    if let Err(e) = mark_damaged(db_path, &detail) {
        tracing::error!("cannot mark the index for rebuilding: {e}");
        return Ok(Some(detail));
    }
    after_mark();
    if swap::generation_of(db_path) != checked && matches!(check_integrity(db_path), Ok(None)) {
        let marker = damage_marker(db_path);
        if std::fs::read_to_string(&marker).is_ok_and(|now| now == detail) {
            tracing::info!(
                "a sound index replaced the damaged one while it was checked; its marker is taken back"
            );
            match std::fs::remove_file(&marker) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => tracing::warn!("cannot remove {}: {e}", marker.display()),
            }
        }
    }
    Ok(Some(detail))
}

/// Checks the index file's integrity on a connection of its own
/// (`PRAGMA quick_check`: every page and index entry, not the header only).
/// `Ok(None)` when it is sound, `Ok(Some(problem))` when it is damaged.
pub fn check_integrity(db_path: &Path) -> Result<Option<String>> {
    let conn = match Connection::open_with_flags(
        db_path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    ) {
        Ok(conn) => conn,
        Err(e) if is_damaged(&e) => return Ok(Some(e.to_string())),
        Err(e) => return Err(e.into()),
    };
    let mut stmt = match conn.prepare("PRAGMA quick_check(5)") {
        Ok(stmt) => stmt,
        Err(e) if is_damaged(&e) => return Ok(Some(e.to_string())),
        Err(e) => return Err(e.into()),
    };
    let rows: rusqlite::Result<Vec<String>> = stmt
        .query_map([], |r| r.get::<_, String>(0))
        .and_then(|r| r.collect());
    match rows {
        Ok(lines) if lines.len() == 1 && lines[0] == "ok" => Ok(None),
        Ok(lines) => {
            // One line, short: it travels in error messages and health.
            let mut detail = lines
                .iter()
                .flat_map(|l| l.lines())
                .filter(|l| !l.starts_with("***"))
                .collect::<Vec<_>>()
                .join("; ");
            if detail.len() > 300 {
                let cut = (0..=300)
                    .rev()
                    .find(|&i| detail.is_char_boundary(i))
                    .unwrap_or(0);
                detail.truncate(cut);
                detail.push('…');
            }
            Ok(Some(detail))
        }
        Err(e) if is_damaged(&e) => Ok(Some(e.to_string())),
        Err(e) => Err(e.into()),
    }
}

/// Whether SQLite says the file is not (or no longer) a sound database.
pub fn is_damaged(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::NotADatabase) | Some(rusqlite::ErrorCode::DatabaseCorrupt)
    )
}

/// Formats unix seconds as RFC 3339 UTC (`2026-11-21T10:00:00Z`).
pub fn rfc3339_utc(secs: i64) -> String {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Civil-from-days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user_version(db: &Path) -> u32 {
        Connection::open(db)
            .unwrap()
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .unwrap()
    }

    fn cache_size(store: &Store) -> i64 {
        store
            .conn
            .pragma_query_value(None, "cache_size", |r| r.get(0))
            .unwrap()
    }

    /// A store whose text index holds `n` segments (one per committed
    /// insert, automatic merging off as during a run).
    fn store_with_text_segments(dir: &Path, n: u32) -> Store {
        let (mut store, _) = Store::open(&dir.join("index.db")).unwrap();
        store.defer_text_merges().unwrap();
        for i in 0..n {
            insert_text_row(&store.conn, i64::from(i));
        }
        store
    }

    /// Inserts text row `i + 1` with 20,000 distinct words: enough that
    /// merging a few such rows takes more than one step of 256 pages, and
    /// that one row's pending terms (~1 MB) fill FTS5's default hash.
    fn insert_text_row(conn: &rusqlite::Connection, i: i64) {
        conn.execute(
            "INSERT INTO fts(rowid, name, path, body) VALUES (?1, ?2, ?3, ?4)",
            rusqlite::params![
                i + 1,
                format!("name_{i}"),
                format!("src/m{i}.py"),
                (0..20_000)
                    .map(|j| format!("w{i}x{j}"))
                    .collect::<Vec<_>>()
                    .join(" "),
            ],
        )
        .unwrap();
    }

    fn text_pages(store: &Store) -> Vec<(i64, Vec<u8>)> {
        let mut stmt = store
            .conn
            .prepare("SELECT id, block FROM fts_data ORDER BY id")
            .unwrap();
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap()
    }

    /// Segments of the text index (FTS5's `fts_idx` has rows for every
    /// segment's leaves).
    fn text_segments(store: &Store) -> i64 {
        store
            .conn
            .query_row("SELECT COUNT(DISTINCT segid) FROM fts_idx", [], |r| {
                r.get(0)
            })
            .unwrap()
    }

    /// A new index keeps [`TEXT_PENDING_BYTES`] of pending terms, so a
    /// batch's text (here ~3 MB of pending terms, three times FTS5's
    /// default) is written as one segment at its commit, and nothing is
    /// left for a merge to rewrite.
    #[test]
    fn a_batch_of_text_is_one_segment() {
        let dir = tempfile::tempdir().unwrap();
        let (mut store, _) = Store::open(&dir.path().join("index.db")).unwrap();
        let stored: i64 = store
            .conn
            .query_row("SELECT v FROM fts_config WHERE k = 'hashsize'", [], |r| {
                r.get(0)
            })
            .unwrap();
        assert_eq!(stored, TEXT_PENDING_BYTES);
        let tx = store.conn.transaction().unwrap();
        for i in 0..3 {
            insert_text_row(&tx, i);
        }
        tx.commit().unwrap();
        assert_eq!(text_segments(&store), 1);
        assert_eq!(store.merge_text_segments(u64::MAX).unwrap(), 0);
    }

    /// A build into an empty index merges its text segments eight to a
    /// level, and leaves FTS5's automatic merging off for the runs after it.
    #[test]
    fn a_build_merges_its_text_segments_by_eights() {
        let dir = tempfile::tempdir().unwrap();
        let (mut store, _) = Store::open(&dir.path().join("index.db")).unwrap();
        let automerge = |store: &Store| -> i64 {
            store
                .conn
                .query_row("SELECT v FROM fts_config WHERE k = 'automerge'", [], |r| {
                    r.get(0)
                })
                .unwrap()
        };
        store.merge_text_during_build().unwrap();
        assert_eq!(automerge(&store), 8);
        store.defer_text_merges().unwrap();
        assert_eq!(automerge(&store), 0);
    }

    /// A run merges at most the steps it is given; later calls go on where
    /// it stopped, and the text index ends as one unbounded merge leaves it.
    #[test]
    fn text_merging_stops_at_its_bound_and_the_next_call_goes_on() {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let (mut whole, mut bounded) = (
            store_with_text_segments(a.path(), 40),
            store_with_text_segments(b.path(), 40),
        );
        let all = whole.merge_text_segments(u64::MAX).unwrap();
        assert!(all > 1, "40 segments take more than one step ({all})");
        assert_eq!(
            bounded.merge_text_segments(TEXT_MERGE_STEP_PAGES).unwrap(),
            1
        );
        let mut steps = 1;
        loop {
            match bounded.merge_text_segments(TEXT_MERGE_STEP_PAGES).unwrap() {
                0 => break,
                n => steps += n,
            }
            assert!(steps <= all, "more steps than one unbounded merge");
        }
        assert_eq!(steps, all);
        assert_eq!(text_pages(&bounded), text_pages(&whole));
        bounded
            .conn
            .execute("INSERT INTO fts(fts) VALUES('integrity-check')", [])
            .expect("the text index is consistent after bounded merges");
    }

    #[test]
    fn an_index_run_keeps_a_small_page_cache_and_readers_their_own() {
        assert!(cache_kib(true) < cache_kib(false));
        let dir = tempfile::tempdir().unwrap();
        let (store, _) = Store::open(&dir.path().join("index.db")).unwrap();
        assert_eq!(cache_size(&store), -READ_CACHE_KIB);
        store.map_for_reading(false).unwrap();
        assert_eq!(cache_size(&store), -INDEX_RUN_CACHE_KIB);
        store.map_for_reading(true).unwrap();
        assert_eq!(cache_size(&store), -READ_CACHE_KIB);
    }

    #[test]
    fn another_schema_version_is_rebuilt_by_a_writer_never_by_a_reader() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("index.db");
        {
            let conn = Connection::open(&db).unwrap();
            conn.execute_batch("CREATE TABLE old_layout(x); PRAGMA user_version = 999;")
                .unwrap();
        }
        // A reader answers from an empty placeholder and leaves the file
        // to whoever still reads it (another Canopy version).
        let (store, why) = Store::open(&db).unwrap();
        assert!(why.unwrap().contains("schema version"));
        assert!(!store.build_started().unwrap());
        assert!(!store.is_current(), "a placeholder is reopened when used");
        assert_eq!(user_version(&db), 999);
        // A writer is told to rebuild, beside the file.
        let Ok(ForWriting::Rebuild(rebuild)) = Store::open_for_writing(&db) else {
            panic!("a writer must rebuild an index of another schema");
        };
        assert!(!rebuild.live_usable);
        let mut side = swap::SideIndex::create(&db).unwrap();
        side.store_mut().unwrap().set_meta("probe", "new").unwrap();
        assert_eq!(user_version(&db), 999, "the live file waits for the swap");
        side.swap_into_live().unwrap();
        assert_eq!(user_version(&db), SCHEMA_VERSION);
        let (store, why) = Store::open(&db).unwrap();
        assert!(why.is_none());
        assert_eq!(store.meta("probe").unwrap().as_deref(), Some("new"));
        assert_eq!(store.generation().unwrap(), 1);
    }

    /// Every write that changes the indexed files or the stored vectors
    /// draws a new state stamp, the generation moved or not; an index
    /// without one gets one from its next writer.
    #[test]
    fn the_state_stamp_changes_with_files_and_vectors() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("index.db");
        let Ok(ForWriting::Ready(mut store)) = Store::open_for_writing(&db) else {
            panic!("a new index is ready for writing");
        };
        let stamp = |s: &Store| s.state_stamp().unwrap();
        let first = stamp(&store).expect("a writer gives a new index a stamp");
        store
            .conn
            .execute(
                "INSERT INTO files(id, path, language, size, mtime_ns, content_hash, line_count,
                 token_count, indexed_at, first_node_id, last_node_id, ref_count)
                 VALUES (1, 'a.py', 'python', 1, 1, 'h1', 1, 1, 1, 1, 1, 0)",
                [],
            )
            .unwrap();
        let generation = store.generation().unwrap();
        store
            .write_unit_vectors(
                "m",
                &[write::UnitVectorRow {
                    file_id: 1,
                    content_hash: "h1".into(),
                    first_node: 1,
                    data: vec![1, 2, 3],
                }],
            )
            .unwrap();
        let after_vectors = stamp(&store).unwrap();
        assert_ne!(after_vectors, first, "stored vectors");
        assert_eq!(store.generation().unwrap(), generation);
        assert_eq!(store.invalidate(&|p| p == "a.py").unwrap(), 1);
        let after_invalidate = stamp(&store).unwrap();
        assert_ne!(
            after_invalidate, after_vectors,
            "a file marked for re-parsing"
        );
        assert_eq!(store.invalidate(&|_| false).unwrap(), 0);
        assert_eq!(stamp(&store).unwrap(), after_invalidate, "nothing marked");
        store
            .write_batch(
                &[write::FileWrite::Remove {
                    path: "a.py".into(),
                }],
                1,
            )
            .unwrap();
        assert_ne!(stamp(&store).unwrap(), after_invalidate, "a file removed");
        // An index from before stamps: its next writer gives it one.
        store
            .conn
            .execute("DELETE FROM meta WHERE key = ?1", [meta_keys::STATE_STAMP])
            .unwrap();
        drop(store);
        let Ok(ForWriting::Ready(store)) = Store::open_for_writing(&db) else {
            panic!("the index is ready for writing");
        };
        assert!(stamp(&store).is_some());
    }

    #[test]
    fn opening_an_existing_index_writes_nothing() {
        // A reader that wrote on open (N10: `PRAGMA auto_vacuum` on an
        // existing file is a write transaction) queued behind the indexer
        // for the write lock and moved its `data_version`.
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("index.db");
        let Ok(ForWriting::Ready(writer)) = Store::open_for_writing(&db) else {
            panic!("a new index is ready for writing");
        };
        let version = |s: &Store| -> i64 {
            s.conn
                .query_row("PRAGMA data_version", [], |r| r.get(0))
                .unwrap()
        };
        let before = version(&writer);
        // Another connection holds the write lock: an open that needs it
        // would wait (and then fail, with no busy timeout).
        let holder = Connection::open(&db).unwrap();
        holder.execute_batch("BEGIN IMMEDIATE").unwrap();
        for _ in 0..3 {
            let (reader, rebuilt) = Store::open(&db).unwrap();
            assert!(rebuilt.is_none());
            reader.conn.busy_timeout(Duration::ZERO).unwrap();
            reader.counts().unwrap();
        }
        holder.execute_batch("ROLLBACK").unwrap();
        assert_eq!(
            version(&writer),
            before,
            "a reader's open committed a write"
        );
    }

    /// Swaps a new index of some size into the live file at `db`,
    /// checkpoints it, and overwrites its second half with garbage.
    fn swap_in_a_damaged_index(db: &Path) {
        let mut side = swap::SideIndex::create(db).unwrap();
        for i in 0..2000 {
            side.store_mut()
                .unwrap()
                .set_meta(&format!("filler{i}"), &"x".repeat(200))
                .unwrap();
        }
        side.swap_into_live().unwrap();
        {
            let (reader, _) = Store::open(db).unwrap();
            reader
                .conn
                .execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
                .unwrap();
        }
        let mut bytes = std::fs::read(db).unwrap();
        let half = bytes.len() / 2;
        for (i, b) in bytes.iter_mut().enumerate().skip(half) {
            *b = (i * 31 % 251) as u8;
        }
        std::fs::write(db, bytes).unwrap();
    }

    /// A rebuild asked for by a damage marker: while it runs, the damaged
    /// live file is found damaged again (a status poll, a failed query) and
    /// marked with other words. After the swap the file at the path is the
    /// sound new one, so that marker is gone; a marker describing the new
    /// file would stay.
    #[test]
    fn damage_marked_again_during_a_rebuild_is_cleared_by_a_sound_swap() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("index.db");
        {
            let (live, _) = Store::open(&db).unwrap();
            live.set_meta("probe", "old").unwrap();
        }
        mark_damaged(&db, "Tree 18 page 39: first words").unwrap();
        let Ok(ForWriting::Rebuild(rebuild)) = Store::open_for_writing(&db) else {
            panic!("a marked index is rebuilt");
        };
        let mut side = swap::SideIndex::create(&db).unwrap();
        side.store_mut().unwrap().set_meta("probe", "new").unwrap();
        mark_damaged(&db, "database disk image is malformed").unwrap();
        side.swap_into_live().unwrap();
        rebuild.clear_markers().unwrap();
        assert!(
            !damage_marker(&db).exists(),
            "a marker of the replaced file survived a sound swap"
        );

        // The same after a swap onto a file that is itself damaged: the
        // marker stays.
        mark_damaged(&db, "first").unwrap();
        let Ok(ForWriting::Rebuild(rebuild)) = Store::open_for_writing(&db) else {
            panic!("a marked index is rebuilt");
        };
        swap_in_a_damaged_index(&db);
        mark_damaged(&db, "second").unwrap();
        rebuild.clear_markers().unwrap();
        assert_eq!(
            std::fs::read_to_string(damage_marker(&db)).unwrap(),
            "second",
            "a marker of the live file must stay"
        );
    }

    /// The window `clear_markers` leaves: a check of the damaged live file
    /// that writes its marker after a rebuild swapped a sound index in and
    /// cleared the markers. The marker is taken back; without a swap it
    /// stays.
    #[test]
    fn a_marker_written_after_a_swap_does_not_describe_the_new_index() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("index.db");
        swap_in_a_damaged_index(&db);
        let found = check_and_mark_damaged_then(&db, || {
            let mut side = swap::SideIndex::create(&db).unwrap();
            side.store_mut().unwrap().set_meta("probe", "new").unwrap();
            side.swap_into_live().unwrap();
        })
        .unwrap();
        assert!(found.is_some(), "the checked file was damaged");
        assert!(
            !damage_marker(&db).exists(),
            "a marker of the replaced file describes the sound new index"
        );
        assert_eq!(check_integrity(&db).unwrap(), None);

        swap_in_a_damaged_index(&db);
        let found = check_and_mark_damaged(&db).unwrap();
        assert_eq!(
            std::fs::read_to_string(damage_marker(&db)).ok(),
            found,
            "the damaged live file stays marked"
        );
        assert!(found.is_some());
    }

    #[test]
    fn a_garbage_file_is_rebuilt_in_place_by_a_writer() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("index.db");
        std::fs::write(&db, vec![0x42u8; 8192]).unwrap();
        let (_, why) = Store::open(&db).unwrap();
        assert!(why.unwrap().contains("unreadable"));
        let identity = FileIdentity::of(&db);
        let Ok(ForWriting::Rebuild(rebuild)) = Store::open_for_writing(&db) else {
            panic!("a writer must rebuild a garbage file");
        };
        assert!(rebuild.reason.contains("unreadable"));
        let mut side = swap::SideIndex::create(&db).unwrap();
        side.store_mut().unwrap().set_meta("probe", "new").unwrap();
        side.swap_into_live().unwrap();
        let (store, why) = Store::open(&db).unwrap();
        assert!(why.is_none());
        assert_eq!(store.meta("probe").unwrap().as_deref(), Some("new"));
        // Same file: connections that had it open follow.
        assert_eq!(FileIdentity::of(&db), identity);
    }

    #[test]
    fn a_swap_gives_a_generation_past_the_live_one_and_readers_keep_their_connection() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("index.db");
        let (live, _) = Store::open(&db).unwrap();
        live.set_meta(meta_keys::GENERATION, "41").unwrap();
        live.set_meta("probe", "old").unwrap();
        let (reader, _) = Store::open(&db).unwrap();
        let mut side = swap::SideIndex::create(&db).unwrap();
        side.store_mut().unwrap().set_meta("probe", "new").unwrap();
        {
            // A reader inside a snapshot keeps the old index through the swap.
            let snapshot = reader.read_snapshot().unwrap();
            assert_eq!(snapshot.meta("probe").unwrap().as_deref(), Some("old"));
            // (The swap waits for no reader; it runs on this thread here,
            // so the snapshot is read again after it.)
            let generation =
                std::thread::scope(|s| s.spawn(|| side.swap_into_live().unwrap()).join().unwrap());
            assert_eq!(generation, 42);
            assert_eq!(snapshot.meta("probe").unwrap().as_deref(), Some("old"));
            assert_eq!(snapshot.generation().unwrap(), 41);
        }
        // The same connection, in its next snapshot, reads the new index.
        assert!(reader.is_current());
        assert_eq!(reader.meta("probe").unwrap().as_deref(), Some("new"));
        assert_eq!(reader.generation().unwrap(), 42);
        assert!(!db.with_file_name("index.db.rebuild").exists());
    }
}
