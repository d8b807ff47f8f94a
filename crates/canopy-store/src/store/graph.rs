//! The code graph's tables: resolution facts, edges, and the work left for
//! resolution (`graph_dirty`, `graph_stale`). See `schema.sql` for the
//! layout and [`super::graph_rows`] for the rows a pass reads and writes.

use std::collections::{BTreeSet, HashMap};

use rusqlite::{OptionalExtension, Transaction, TransactionBehavior, params};

use super::Store;
use super::graph_rows::{EdgeRow, FileIdx, FileRow, FileStamp, How, StoredFacts, SymRow, Target};
use super::packed_edges::{self, PackedEdge};
use crate::error::Result;
use crate::lang::{Language, NodeType, SiteKind};

/// Edge status codes (bits 2-3 of `edges.info`).
pub const STATUS_RESOLVED: u8 = 0;
/// Several candidates; one row each.
pub const STATUS_AMBIGUOUS: u8 = 1;
/// No definition in the repository.
pub const STATUS_UNRESOLVED: u8 = 2;

/// Packs an edge's kind, status, how and confidence into `edges.info`.
pub fn pack_info(kind: SiteKind, status: u8, how: How, confidence: u8) -> i64 {
    (kind as i64)
        | (i64::from(status) << 2)
        | ((how as i64) << 4)
        | (i64::from(confidence.min(100)) << 7)
}

/// One stored edge, unpacked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredEdge {
    /// Source unit (`nodes.id`).
    pub src: i64,
    /// Target unit (`nodes.id`), or `None` for an unresolved site.
    pub dst: Option<i64>,
    /// Name of an unresolved site.
    pub unresolved_name: Option<String>,
    /// 1-based line of the site.
    pub line: u32,
    /// 0-based column of the site.
    pub col: u32,
    /// Call, import, type, other.
    pub kind: SiteKind,
    /// Resolved, ambiguous or unresolved (the `STATUS_*` codes).
    pub status: u8,
    /// How code ([`How::name`]).
    pub how: u8,
    /// 0..=100.
    pub confidence: u8,
}

fn unpack(e: &PackedEdge) -> StoredEdge {
    let info = e.info;
    let kind = SiteKind::from_code(info as u64);
    StoredEdge {
        src: e.src,
        dst: (e.dst > 0).then_some(e.dst),
        unresolved_name: None,
        line: e.line,
        col: e.col,
        kind,
        status: ((info >> 2) & 3) as u8,
        how: ((info >> 4) & 7) as u8,
        confidence: ((info >> 7) & 127) as u8,
    }
}

/// Replaces file `file_id`'s edge list, and its `edge_targets` rows, with
/// `edges` (stored sorted, one per key: the first given wins). Returns how
/// many edges were stored.
fn put_edge_list(tx: &Transaction, file_id: i64, mut edges: Vec<PackedEdge>) -> Result<u64> {
    drop_edge_list(tx, file_id)?;
    if edges.is_empty() {
        return Ok(0);
    }
    let blob = packed_edges::encode(&mut edges);
    tx.prepare_cached("INSERT INTO edge_lists(file_id, count, edges) VALUES (?1, ?2, ?3)")?
        .execute(params![file_id, edges.len() as i64, blob])?;
    let mut insert =
        tx.prepare_cached("INSERT OR IGNORE INTO edge_targets(dst, file_id) VALUES (?1, ?2)")?;
    for dst in targets_of(&edges) {
        insert.execute([dst, file_id])?;
    }
    Ok(edges.len() as u64)
}

/// The distinct targets of a list's edges: its `edge_targets` rows.
fn targets_of(edges: &[PackedEdge]) -> BTreeSet<i64> {
    edges.iter().map(|e| e.dst).collect()
}

/// Deletes file `file_id`'s edge list and its `edge_targets` rows; returns
/// the edges it held. A damaged list holds nothing readable: its
/// `edge_targets` rows are found by a scan, and the file's next resolution
/// writes its edges again.
fn drop_edge_list(tx: &Transaction, file_id: i64) -> Result<Vec<PackedEdge>> {
    let blob: Option<Vec<u8>> = tx
        .prepare_cached("SELECT edges FROM edge_lists WHERE file_id = ?1")?
        .query_row([file_id], |r| r.get(0))
        .optional()?;
    let Some(blob) = blob else {
        return Ok(Vec::new());
    };
    tx.prepare_cached("DELETE FROM edge_lists WHERE file_id = ?1")?
        .execute([file_id])?;
    match packed_edges::decode(&blob, file_id) {
        Ok(edges) => {
            let mut delete =
                tx.prepare_cached("DELETE FROM edge_targets WHERE dst = ?1 AND file_id = ?2")?;
            for dst in targets_of(&edges) {
                delete.execute([dst, file_id])?;
            }
            Ok(edges)
        }
        Err(e) => {
            tracing::warn!(file_id, "dropping a damaged edge list: {e}");
            tx.prepare_cached("DELETE FROM edge_targets WHERE file_id = ?1")?
                .execute([file_id])?;
            Ok(Vec::new())
        }
    }
}

/// Stores a parsed file's facts and marks it for resolution (writer side);
/// `added`: the file was not indexed before (see `graph_added`).
pub fn write_facts(
    tx: &Transaction,
    file_id: i64,
    facts: Option<&StoredFacts>,
    added: bool,
) -> Result<()> {
    if let Some(stored) = facts {
        tx.prepare_cached(
            "INSERT OR REPLACE INTO graph_facts(file_id, facts, sites) VALUES (?1, ?2, ?3)",
        )?
        .execute(params![file_id, stored.world, stored.sites])?;
        tx.prepare_cached("INSERT OR IGNORE INTO graph_dirty(file_id) VALUES (?1)")?
            .execute([file_id])?;
        if added {
            tx.prepare_cached("INSERT OR IGNORE INTO graph_added(file_id) VALUES (?1)")?
                .execute([file_id])?;
        }
    }
    Ok(())
}

/// Drops a file's facts and outgoing edges, and (with `remember_handles`)
/// the handles of its units so edges into them can follow them to their new
/// ids (writer side, before the nodes go). Without it the units come back
/// with the same ids and handles, and edges into them need nothing.
pub fn forget_file(
    tx: &Transaction,
    file_id: i64,
    first: i64,
    last: i64,
    remember_handles: bool,
) -> Result<()> {
    tx.prepare_cached("DELETE FROM graph_facts WHERE file_id = ?1")?
        .execute([file_id])?;
    drop_edge_list(tx, file_id)?;
    if !remember_handles {
        return Ok(());
    }
    mark_go_type_relations_of_old_units(tx, file_id, first, last)?;
    // Handles of every old unit (also those no edge points at yet): a unit
    // whose handle is new after the re-parse is an added definition.
    tx.prepare_cached(
        "INSERT OR IGNORE INTO graph_stale(old_id, handle, name) SELECT id, handle, name FROM nodes WHERE id BETWEEN ?1 AND ?2 AND name IS NOT NULL",
    )?
    .execute([first, last])?;
    Ok(())
}

/// A Go type's `implements` edges (held by the file declaring the type)
/// depend on its method set, which methods in other files of its package
/// make up, and on every interface's methods. Before a Go file's old units
/// go (it is deleted, or re-parsed with other units), the files holding
/// edges that may now be wrong are marked: those declaring the receiver
/// types of its old methods (a method gone shrinks the set), and those
/// holding edges into its old interfaces (one that changed may no longer
/// be satisfied). Their new units are looked at by [`Store::graph_prepare`].
fn mark_go_type_relations_of_old_units(
    tx: &Transaction,
    file_id: i64,
    first: i64,
    last: i64,
) -> Result<()> {
    let path: Option<String> = tx
        .prepare_cached("SELECT path FROM files WHERE id = ?1 AND language = 'go'")?
        .query_row([file_id], |r| r.get(0))
        .optional()?;
    let Some(path) = path else { return Ok(()) };
    let units: Vec<(i64, String, String)> = tx
        .prepare_cached(
            "SELECT id, node_type, COALESCE(qualified_name, '') FROM nodes
             WHERE id BETWEEN ?1 AND ?2 AND node_type IN ('method', 'interface')",
        )?
        .query_map([first, last], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
        .collect::<rusqlite::Result<_>>()?;
    let mut marked = BTreeSet::new();
    for (id, node_type, qualified_name) in units {
        if node_type == "interface" {
            let mut stmt = tx.prepare_cached("SELECT file_id FROM edge_targets WHERE dst = ?1")?;
            for f in stmt.query_map([id], |r| r.get::<_, i64>(0))? {
                marked.insert(f?);
            }
        } else if let Some((receiver, _)) = qualified_name.split_once('.') {
            go_struct_files(tx, parent_dir(&path), receiver, &mut marked)?;
        }
    }
    marked.remove(&file_id);
    let mut mark = tx.prepare_cached("INSERT OR IGNORE INTO graph_dirty(file_id) VALUES (?1)")?;
    for f in marked {
        mark.execute([f])?;
    }
    Ok(())
}

/// The directory part of a repository-relative path ("" at the root).
fn parent_dir(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(dir, _)| dir)
}

/// Adds the Go files directly in `dir` (one package) that declare a struct
/// named `name`: the files whose `implements` edges a method of `name`
/// declared in that package takes part in.
fn go_struct_files(tx: &Transaction, dir: &str, name: &str, out: &mut BTreeSet<i64>) -> Result<()> {
    let mut stmt = tx.prepare_cached(
        "SELECT f.id, f.path FROM nodes n JOIN files f ON f.id = n.file_id
         WHERE n.name = ?1 COLLATE NOCASE AND n.name = ?1 AND n.node_type = 'struct'
           AND f.language = 'go'",
    )?;
    for row in stmt.query_map([name], |r| {
        Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?))
    })? {
        let (f, path) = row?;
        if parent_dir(&path) == dir {
            out.insert(f);
        }
    }
    Ok(())
}

/// The module path of a new file at `path`, as imports name it: its
/// directories and stem (`pkg/registry.py`: `pkg`, `registry`); without
/// the stem for a file that stands for its directory (`__init__.py`,
/// `index.ts`, `mod.rs`, any Go file: a Go import names the package's
/// directory).
fn module_path(path: &str, language: Language) -> Vec<String> {
    let (dir, file) = path.rsplit_once('/').unwrap_or(("", path));
    let stem = file.split('.').next().unwrap_or(file);
    let mut segments: Vec<String> = dir
        .split('/')
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect();
    if !matches!(stem, "__init__" | "index" | "mod") && language != Language::Go {
        segments.push(stem.to_string());
    }
    segments
}

/// The module path a reference's name or qualifier spells
/// (`pkg.registry`, `./registry.js`, `crate::parser`,
/// `example.com/demo/shapes`): its segments but for those no file path
/// holds (relative steps, `crate`, `self`, `super`, aliases like `@`).
fn spelled_module_path(text: &str) -> Vec<&str> {
    let segments: Vec<&str> = if text.contains('/') {
        let mut parts: Vec<&str> = text.split('/').collect();
        if let Some(last) = parts.last_mut() {
            // `./registry.js` names `registry.ts` too.
            *last = last.split('.').next().unwrap_or(last);
        }
        parts
    } else {
        text.split(['.', ':']).collect()
    };
    segments
        .into_iter()
        .filter(|s| {
            !s.is_empty()
                && !matches!(*s, "." | ".." | "crate" | "self" | "super")
                && !s.starts_with(['@', '~'])
        })
        .collect()
}

/// Whether a reference spelling `spelled` may name the module at `path`:
/// the shorter of the two ends the longer (`registry` and `pkg.registry`
/// name `pkg/registry.py`; `example.com/demo/shapes` names `shapes/`).
fn may_name_module(spelled: &[&str], path: &[String]) -> bool {
    let n = spelled.len().min(path.len());
    n > 0
        && spelled[spelled.len() - n..]
            .iter()
            .zip(&path[path.len() - n..])
            .all(|(a, b)| a == b)
}

/// Adds the files whose references use `name` (as a name or a qualifier).
fn mark_users_of_name(tx: &Transaction, name: &str, dirty: &mut BTreeSet<i64>) -> Result<()> {
    let mut stmt = tx.prepare_cached(
        "SELECT p.file_id FROM ref_postings p JOIN ref_names n ON n.id = p.name_id
         WHERE n.text = ?1 COLLATE NOCASE AND n.text = ?1",
    )?;
    for f in stmt.query_map([name], |r| r.get::<_, i64>(0))? {
        dirty.insert(f?);
    }
    Ok(())
}

/// Tests force either way of finding the users of names
/// ([`mark_dependents`]), to check that both mark the same files; 0 lets
/// the number of names choose. Public for the graph's tests in
/// `canopy-core`; nothing else sets it.
#[doc(hidden)]
pub static MARKING_FORCED: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);
/// [`MARKING_FORCED`]: one lookup per name.
#[doc(hidden)]
pub const FORCE_BY_NAME: u8 = 1;
/// [`MARKING_FORCED`]: one pass over the postings.
#[doc(hidden)]
pub const FORCE_ONE_PASS: u8 = 2;

/// What [`mark_users_of_name`] for each of `names` and
/// [`mark_importers_of_modules`] for `module_paths` add to `dirty`, found
/// from the other side: one pass over `ref_postings` keeps the names used
/// by files not yet in `dirty` (a file already there gains nothing from
/// being marked), and only those names' texts are compared. On a first
/// build, where every file with references is dirty, that is one scan and
/// nothing else.
fn mark_users_among_clean_files(
    tx: &Transaction,
    names: &BTreeSet<&str>,
    module_paths: &[Vec<String>],
    dirty: &mut BTreeSet<i64>,
) -> Result<()> {
    let mut clean_users: HashMap<i64, Vec<i64>> = HashMap::new();
    let mut stmt = tx.prepare_cached("SELECT name_id, file_id FROM ref_postings")?;
    for row in stmt.query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?)))? {
        let (name_id, file_id) = row?;
        if !dirty.contains(&file_id) {
            clean_users.entry(name_id).or_default().push(file_id);
        }
    }
    let mut text_of = tx.prepare_cached("SELECT text FROM ref_names WHERE id = ?1")?;
    let mut users = Vec::new();
    for (name_id, files) in clean_users {
        let text: Option<String> = text_of.query_row([name_id], |r| r.get(0)).optional()?;
        let Some(text) = text else { continue };
        let names_it = names.contains(text.as_str())
            || !module_paths.is_empty() && {
                let spelled = spelled_module_path(&text);
                module_paths
                    .iter()
                    .any(|path| may_name_module(&spelled, path))
            };
        if names_it {
            users.extend(files);
        }
    }
    dirty.extend(users);
    Ok(())
}

/// One unit of a file whose units were written since the last resolution.
struct WrittenUnit {
    id: i64,
    parent: Option<i64>,
    node_type: String,
    name: String,
    qualified_name: String,
}

/// Adds to `dirty` the files whose edges a file written since the last
/// resolution may change, though they did not change themselves (what a
/// cold index would resolve otherwise). The written files looked at are
/// those `added` and those of `marked` re-parsed with other units (its file
/// unit's handle is among `old_handles`: [`forget_file`] remembered it); a
/// file re-parsed with the same units, or only marked, defines nothing new.
///
/// - A definition that is new: files whose references use its name (an
///   unqualified name may now resolve to it).
/// - A file that is new (also one that comes back after a delete): files
///   whose references name its module (`import json` with a new `json.py`;
///   the importers of `registry.ts` back again); their imports may now
///   resolve to it. A name or qualifier names the module when its path
///   ends the module's or the module's ends its ([`may_name_module`]):
///   a new `humanize/utils.py` does not mark every user of `django.utils`.
/// - A Go method: the files of its package declaring its receiver type
///   (their `implements` edges depend on the type's method set); a Go
///   interface: the files declaring the types that have its first method
///   (they may satisfy it now). The old units' side is marked as they go
///   ([`mark_go_type_relations_of_old_units`]).
///
/// A definition that is gone (`gone_names`): files whose references use
/// its name but hold no edge into it (a call guessed only to a method
/// defined once; a name another definition shadowed) may now resolve
/// elsewhere.
///
/// Finding the users of names costs an index lookup per name; with at
/// least one name per indexed file (a first build, a large batch) one
/// pass over every posting is cheaper, and it looks only at the files
/// not yet in `dirty` ([`mark_users_among_clean_files`]).
fn mark_dependents(
    tx: &Transaction,
    files: i64,
    (marked, added): (&BTreeSet<i64>, &BTreeSet<i64>),
    old_handles: &std::collections::HashSet<Vec<u8>>,
    gone_names: &BTreeSet<&str>,
    dirty: &mut BTreeSet<i64>,
) -> Result<()> {
    let written = written_definitions(tx, marked, added, old_handles)?;
    let names: BTreeSet<&str> = written
        .new_names
        .iter()
        .map(String::as_str)
        .chain(gone_names.iter().copied())
        .collect();
    let in_one_pass = match MARKING_FORCED.load(std::sync::atomic::Ordering::Relaxed) {
        FORCE_BY_NAME => false,
        FORCE_ONE_PASS => true,
        _ => names.len() as i64 >= files,
    };
    if in_one_pass {
        mark_users_among_clean_files(tx, &names, &written.module_paths_of_added, dirty)?;
    } else {
        for n in &names {
            mark_users_of_name(tx, n, dirty)?;
        }
        mark_importers_of_modules(tx, &written.module_paths_of_added, dirty)?;
    }
    for (path, units) in &written.go_files {
        mark_go_relations_of_new_units(tx, path, units, dirty)?;
    }
    Ok(())
}

/// What the files written with other units (or added) define, for
/// [`mark_dependents`].
struct WrittenDefinitions {
    /// Names of the units that are new.
    new_names: BTreeSet<String>,
    /// Module paths of the files that are new (none empty).
    module_paths_of_added: Vec<Vec<String>>,
    /// Go files: path, and each named unit with whether it is new.
    go_files: Vec<(String, Vec<(bool, WrittenUnit)>)>,
}

/// Reads the named units of `marked` ∪ `added` and keeps those of files
/// added or written with other units (see [`mark_dependents`]).
fn written_definitions(
    tx: &Transaction,
    marked: &BTreeSet<i64>,
    added: &BTreeSet<i64>,
    old_handles: &std::collections::HashSet<Vec<u8>>,
) -> Result<WrittenDefinitions> {
    let mut written = WrittenDefinitions {
        new_names: BTreeSet::new(),
        module_paths_of_added: Vec::new(),
        go_files: Vec::new(),
    };
    for &f in marked.union(added) {
        let row: Option<(i64, i64, String, String)> = tx
            .prepare_cached(
                "SELECT first_node_id, last_node_id, path, language FROM files WHERE id = ?1",
            )?
            .query_row([f], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
            .optional()?;
        let Some((lo, hi, path, language)) = row else {
            continue;
        };
        let units = named_units(tx, lo, hi)?;
        let is_added = added.contains(&f);
        let units_replaced = units
            .iter()
            .any(|(h, u)| u.parent.is_none() && old_handles.contains(h));
        if !is_added && !units_replaced {
            continue;
        }
        let language = Language::from_name(&language).unwrap_or(Language::Text);
        if is_added {
            let module = module_path(&path, language);
            if !module.is_empty() {
                written.module_paths_of_added.push(module);
            }
        }
        let mut go_units = Vec::new();
        for (h, u) in units {
            let is_new = !old_handles.contains(&h);
            if is_new {
                written.new_names.insert(u.name.clone());
            }
            if language == Language::Go {
                go_units.push((is_new, u));
            }
        }
        if language == Language::Go {
            written.go_files.push((path, go_units));
        }
    }
    Ok(written)
}

/// The named units of the node range `lo..=hi`, with their handles.
fn named_units(tx: &Transaction, lo: i64, hi: i64) -> Result<Vec<(Vec<u8>, WrittenUnit)>> {
    let mut stmt = tx.prepare_cached(
        "SELECT handle, id, parent_id, node_type, name, COALESCE(qualified_name, '')
         FROM nodes WHERE id BETWEEN ?1 AND ?2 AND name IS NOT NULL",
    )?;
    let rows = stmt.query_map([lo, hi], |r| {
        Ok((
            r.get::<_, Vec<u8>>(0)?,
            WrittenUnit {
                id: r.get(1)?,
                parent: r.get(2)?,
                node_type: r.get(3)?,
                name: r.get(4)?,
                qualified_name: r.get(5)?,
            },
        ))
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// Marks the files whose references name one of `module_paths` (see
/// [`mark_dependents`]).
fn mark_importers_of_modules(
    tx: &Transaction,
    module_paths: &[Vec<String>],
    dirty: &mut BTreeSet<i64>,
) -> Result<()> {
    if module_paths.is_empty() {
        return Ok(());
    }
    // One pass over the distinct names and qualifiers (tens of
    // thousands on Django), whatever the number of new files.
    let mut naming = Vec::new();
    let mut stmt = tx.prepare_cached("SELECT id, text FROM ref_names")?;
    for row in stmt.query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)))? {
        let (id, text) = row?;
        let spelled = spelled_module_path(&text);
        if module_paths
            .iter()
            .any(|path| may_name_module(&spelled, path))
        {
            naming.push((id, text));
        }
    }
    let mut stmt = tx.prepare_cached(
        "SELECT p.file_id, f.path, f.language FROM ref_postings p JOIN files f ON f.id = p.file_id
         WHERE p.name_id = ?1",
    )?;
    for (id, text) in naming {
        let rows = stmt.query_map([id], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
            ))
        })?;
        for row in rows {
            let (file, path, language) = row?;
            if Language::from_name(&language) == Some(Language::Python)
                && let Some(package) = python_relative_module(&path, &text)
            {
                // `.utils` in `a/b/c.py` is `a/b/utils` and nothing else
                // (see `resolve_relative`): a new `utils.py` of another
                // package leaves it as it was (Django: 143 files were
                // re-resolved for one new `utils.py`, issue 32).
                if !module_paths
                    .iter()
                    .any(|path| names_python_module(&package, path))
                {
                    continue;
                }
            }
            dirty.insert(file);
        }
    }
    Ok(())
}

/// The module a Python relative import spelled `text` names from the file
/// at `path`, as path segments (`..utils` in `a/b/c.py`: `a`, `utils`);
/// `None` for an absolute name, or one that climbs above the root.
fn python_relative_module(path: &str, text: &str) -> Option<Vec<String>> {
    // As the resolver reads it (`graph::resolve::lang::python::resolve_relative`,
    // a layer above the store): the first dot is the file's package, each
    // further dot its parent.
    let dots = text.chars().take_while(|&c| c == '.').count();
    if dots == 0 || text.contains('/') {
        return None;
    }
    let mut module: Vec<String> = path.split('/').map(String::from).collect();
    module.pop();
    for _ in 1..dots {
        module.pop()?;
    }
    module.extend(
        text[dots..]
            .split('.')
            .filter(|s| !s.is_empty())
            .map(String::from),
    );
    Some(module)
}

/// Whether an import of `module` (path segments, from the root) may
/// resolve to the new module at `path`: the same module, or a module
/// inside it (a package directory without `__init__.py` that now holds a
/// file).
fn names_python_module(module: &[String], path: &[String]) -> bool {
    !module.is_empty() && path.starts_with(module)
}

/// Marks, for the Go file at `path` written with `units`, the files
/// declaring the receiver types of its new methods and the types that
/// have the first method of each of its interfaces (see
/// [`mark_dependents`]).
fn mark_go_relations_of_new_units(
    tx: &Transaction,
    path: &str,
    units: &[(bool, WrittenUnit)],
    dirty: &mut BTreeSet<i64>,
) -> Result<()> {
    let dir = parent_dir(path);
    for (_, u) in units.iter().filter(|(is_new, _)| *is_new) {
        if u.node_type == "method"
            && let Some((receiver, _)) = u.qualified_name.split_once('.')
        {
            go_struct_files(tx, dir, receiver, dirty)?;
        }
    }
    // An interface of a file written with other units may be new or
    // have other methods (also one that kept its handle): the types
    // with its first method (every implementer has it) are resolved
    // again.
    for (_, interface) in units.iter().filter(|(_, u)| u.node_type == "interface") {
        let first_method = units
            .iter()
            .find(|(_, m)| m.node_type == "method" && m.parent == Some(interface.id));
        let Some((_, method)) = first_method else {
            continue;
        };
        let receivers: Vec<(String, String)> = tx
            .prepare_cached(
                "SELECT n.qualified_name, f.path FROM nodes n JOIN files f ON f.id = n.file_id
                 WHERE n.name = ?1 COLLATE NOCASE AND n.name = ?1 AND n.node_type = 'method'
                   AND f.language = 'go' AND n.qualified_name IS NOT NULL",
            )?
            .query_map([&method.name], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<rusqlite::Result<_>>()?;
        for (qualified_name, path) in receivers {
            if let Some((receiver, _)) = qualified_name.split_once('.') {
                go_struct_files(tx, parent_dir(&path), receiver, dirty)?;
            }
        }
    }
    Ok(())
}

impl Store {
    /// Whether resolution has work: files to resolve or units deleted since.
    pub fn graph_has_pending(&self) -> Result<bool> {
        let n: i64 = self.conn.query_row(
            "SELECT EXISTS(SELECT 1 FROM graph_dirty) OR EXISTS(SELECT 1 FROM graph_stale)",
            [],
            |r| r.get(0),
        )?;
        Ok(n != 0)
    }

    /// Moves edges that point at deleted units to the unit with the same
    /// handle; returns the files that must be resolved again: those marked
    /// dirty, those with edges to units that are gone, those whose
    /// references use the name of a definition that is gone, and those
    /// whose resolution a new definition or file may change
    /// ([`mark_dependents`]).
    pub fn graph_prepare(&mut self) -> Result<BTreeSet<i64>> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let marked: BTreeSet<i64> = {
            let mut stmt = tx.prepare("SELECT file_id FROM graph_dirty")?;
            let rows = stmt.query_map([], |r| r.get(0))?;
            rows.collect::<rusqlite::Result<_>>()?
        };
        let added: BTreeSet<i64> = {
            let mut stmt = tx.prepare("SELECT file_id FROM graph_added")?;
            let rows = stmt.query_map([], |r| r.get(0))?;
            rows.collect::<rusqlite::Result<_>>()?
        };
        let stale: Vec<(i64, Vec<u8>, String)> = {
            let mut stmt = tx.prepare("SELECT old_id, handle, name FROM graph_stale")?;
            let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
            rows.collect::<rusqlite::Result<_>>()?
        };
        let mut dirty = marked.clone();
        let mut old_handles = std::collections::HashSet::new();
        let mut gone_names = BTreeSet::new();
        if !stale.is_empty() {
            // Each deleted unit's new id (the unit with its handle), or
            // `None` when the definition is gone.
            let mut moved: HashMap<i64, Option<i64>> = HashMap::new();
            for (old_id, handle, name) in &stale {
                old_handles.insert(handle.clone());
                let new_id: Option<i64> = tx
                    .prepare_cached("SELECT id FROM nodes WHERE handle = ?1 LIMIT 1")?
                    .query_row([handle], |r| r.get(0))
                    .optional()?;
                if new_id.is_none() {
                    gone_names.insert(name.as_str());
                }
                moved.insert(*old_id, new_id);
            }
            // The files whose lists hold an edge into a deleted unit; those
            // whose target is gone resolve again.
            let mut holders = BTreeSet::new();
            for (&old_id, new_id) in &moved {
                let mut stmt =
                    tx.prepare_cached("SELECT file_id FROM edge_targets WHERE dst = ?1")?;
                for f in stmt.query_map([old_id], |r| r.get::<_, i64>(0))? {
                    let f = f?;
                    holders.insert(f);
                    if new_id.is_none() {
                        dirty.insert(f);
                    }
                }
            }
            // Each list rewritten once, every move applied together.
            for f in holders {
                let mut edges: Vec<(bool, PackedEdge)> = drop_edge_list(&tx, f)?
                    .into_iter()
                    .filter_map(|e| match moved.get(&e.dst) {
                        None => Some((false, e)),
                        Some(Some(n)) => Some((true, PackedEdge { dst: *n, ..e })),
                        Some(None) => None,
                    })
                    .collect();
                // A site that already reaches the new unit (an ambiguous
                // one, with both among its candidates) keeps that edge: the
                // unmoved one sorts first, and the list keeps the first.
                edges.sort_by_key(|&(was_moved, e)| (e.key(), was_moved));
                put_edge_list(&tx, f, edges.into_iter().map(|(_, e)| e).collect())?;
            }
        }
        let files: i64 = tx.query_row("SELECT COUNT(*) FROM files", [], |r| r.get(0))?;
        // A pass that resolves every file (a first build) has no one else to mark.
        if (dirty.len() as i64) < files {
            mark_dependents(
                &tx,
                files,
                (&marked, &added),
                &old_handles,
                &gone_names,
                &mut dirty,
            )?;
        }
        tx.execute("DELETE FROM graph_added", [])?;
        if !stale.is_empty() {
            tx.execute("DELETE FROM graph_stale", [])?;
            // Edges moved: readers see them under a generation of their own.
            super::advance_generation(&tx)?;
        }
        tx.commit()?;
        Ok(dirty)
    }

    /// Every file with its stored facts (the world part, not the sites: see
    /// [`Store::graph_sites`]), for a resolution pass. With the file index
    /// of each `files.id`.
    pub fn graph_file_rows(&self) -> Result<(Vec<FileRow>, HashMap<i64, FileIdx>)> {
        let mut files = Vec::new();
        let mut index = HashMap::new();
        let mut stmt = self.conn.prepare(
            "SELECT f.id, f.path, f.language, g.facts FROM files f LEFT JOIN graph_facts g ON g.file_id = f.id ORDER BY f.id",
        )?;
        let rows = stmt.query_map([], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, String>(1)?,
                Language::from_name(r.get_ref(2)?.as_str()?).unwrap_or(Language::Text),
                r.get::<_, Option<Vec<u8>>>(3)?,
            ))
        })?;
        for row in rows {
            let (id, path, language, facts) = row?;
            index.insert(id, FileIdx(files.len() as u32));
            files.push(FileRow {
                id,
                path,
                language,
                facts,
            });
        }
        Ok((files, index))
    }

    /// The stored sites (`graph_facts.sites`) of each of `file_ids`, in
    /// that order (`None` for a file without facts). A pass reads them a
    /// chunk of files at a time, as it resolves them, so that no more than
    /// a chunk's sites are held at once whatever the repository's size.
    pub fn graph_sites(&self, file_ids: &[i64]) -> Result<Vec<Option<Vec<u8>>>> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT sites FROM graph_facts WHERE file_id = ?1")?;
        file_ids
            .iter()
            .map(|id| {
                Ok(stmt
                    .query_row([id], |r| r.get::<_, Vec<u8>>(0))
                    .optional()?)
            })
            .collect()
    }

    /// Every named unit and every file unit, as a resolution pass reads
    /// them (`index`: the file index of each `files.id`, from
    /// [`Store::graph_file_rows`]).
    pub fn graph_sym_rows(&self, index: &HashMap<i64, FileIdx>) -> Result<Vec<SymRow>> {
        let mut stmt = self.conn.prepare(&format!(
            "SELECT {SYM_COLUMNS}, file_id FROM nodes WHERE name IS NOT NULL OR parent_id IS NULL"
        ))?;
        let rows = stmt.query_map([], |r| match index.get(&r.get::<_, i64>(7)?) {
            Some(&file) => sym_row(r, file),
            None => Ok(None),
        })?;
        let mut syms = Vec::new();
        for row in rows {
            syms.extend(row?);
        }
        Ok(syms)
    }

    /// Replaces the edges of the given files (by their node ranges) and clears
    /// their dirty marks, in one transaction.
    pub fn graph_write_edges(&mut self, per_file: &[(i64, Vec<EdgeRow>)]) -> Result<u64> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let mut written = 0u64;
        for (file_id, edges) in per_file {
            let exists = tx
                .prepare_cached("SELECT 1 FROM files WHERE id = ?1")?
                .exists([file_id])?;
            tx.prepare_cached("DELETE FROM graph_dirty WHERE file_id = ?1")?
                .execute([file_id])?;
            if !exists {
                continue;
            }
            let mut list = Vec::with_capacity(edges.len());
            for e in edges {
                let mut add = |dst: i64, status: u8| {
                    list.push(PackedEdge {
                        src: e.src,
                        line: e.line,
                        col: e.col,
                        dst,
                        info: pack_info(e.kind, status, e.how, e.confidence),
                    })
                };
                match &e.target {
                    Target::Resolved(d) => add(*d, STATUS_RESOLVED),
                    Target::Ambiguous(ds) => ds.iter().for_each(|d| add(*d, STATUS_AMBIGUOUS)),
                    // Unresolved sites are not stored: the raw references
                    // (`file_refs`) already hold every call site by name, and
                    // answers derive "N sites named X could not be resolved"
                    // from them ([`Store::raw_calls_in_file`]).
                    Target::Unresolved => {}
                }
            }
            written += put_edge_list(&tx, *file_id, list)?;
        }
        // Readers see these edges under a generation of their own.
        super::advance_generation(&tx)?;
        tx.commit()?;
        Ok(written)
    }

    /// What identifies each file's resolution rows, by `files.id`: path,
    /// language, content hash and unit id range. Rows of a file whose stamp
    /// is the same as when they were read are the same rows (a re-written
    /// file takes new unit ids unless its units are the same; its facts
    /// follow its content), which is what lets a long-lived process keep
    /// them between passes (`canopy_core::graph::resolve::KeptRows`).
    pub fn graph_file_stamps(&self) -> Result<Vec<FileStamp>> {
        let mut stmt = self.conn.prepare(
            "SELECT id, path, language, content_hash, first_node_id, last_node_id FROM files ORDER BY id",
        )?;
        let rows = stmt.query_map([], |r| {
            Ok(FileStamp {
                id: r.get(0)?,
                path: r.get(1)?,
                language: Language::from_name(r.get_ref(2)?.as_str()?).unwrap_or(Language::Text),
                content_hash: r.get(3)?,
                first_node: r.get(4)?,
                last_node: r.get(5)?,
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// One file's stored facts (`graph_facts.facts`), as
    /// [`Store::graph_file_rows`] reads them.
    pub fn graph_facts_of(&self, file_id: i64) -> Result<Option<Vec<u8>>> {
        Ok(self
            .conn
            .prepare_cached("SELECT facts FROM graph_facts WHERE file_id = ?1")?
            .query_row([file_id], |r| r.get::<_, Option<Vec<u8>>>(0))
            .optional()?
            .flatten())
    }

    /// One file's units as [`Store::graph_sym_rows`] reads them (in id
    /// order), each with `file` set to `file`.
    pub fn graph_sym_rows_of(&self, stamp: &FileStamp, file: FileIdx) -> Result<Vec<SymRow>> {
        let mut stmt = self.conn.prepare_cached(&format!(
            "SELECT {SYM_COLUMNS} FROM nodes WHERE id BETWEEN ?1 AND ?2 AND file_id = ?3
             AND (name IS NOT NULL OR parent_id IS NULL) ORDER BY id"
        ))?;
        let rows = stmt.query_map(params![stamp.first_node, stamp.last_node, stamp.id], |r| {
            sym_row(r, file)
        })?;
        let mut syms = Vec::new();
        for row in rows {
            syms.extend(row?);
        }
        Ok(syms)
    }

    /// Drops leftovers after resolution: dirty marks of files without facts,
    /// names no unresolved edge uses.
    pub fn graph_finish(&mut self) -> Result<()> {
        self.conn.execute_batch("DELETE FROM graph_dirty;")?;
        Ok(())
    }

    /// The edges file `file_id`'s units start (stored order: src, line,
    /// col, dst); none when it has no list.
    fn edge_list(&self, file_id: i64) -> Result<Vec<PackedEdge>> {
        let blob: Option<Vec<u8>> = self
            .conn
            .prepare_cached("SELECT edges FROM edge_lists WHERE file_id = ?1")?
            .query_row([file_id], |r| r.get(0))
            .optional()?;
        match blob {
            Some(blob) => self
                .decoded_edges
                .get_or_decode(file_id, &blob, |b| packed_edges::decode(b, file_id)),
            None => Ok(Vec::new()),
        }
    }

    /// Edges into a unit (`nodes.id`), resolved and ambiguous, by source
    /// unit, line and column.
    pub fn edges_to(&self, dst: i64) -> Result<Vec<StoredEdge>> {
        let files: Vec<i64> = {
            let mut stmt = self
                .conn
                .prepare_cached("SELECT file_id FROM edge_targets WHERE dst = ?1")?;
            let rows = stmt.query_map([dst], |r| r.get(0))?;
            rows.collect::<rusqlite::Result<_>>()?
        };
        let mut out = Vec::new();
        for f in files {
            out.extend(
                self.edge_list(f)?
                    .iter()
                    .filter(|e| e.dst == dst)
                    .map(unpack),
            );
        }
        out.sort_by_key(|e| (e.src, e.line, e.col));
        Ok(out)
    }

    /// Edges out of units `lo..=hi` (one unit, or a file's range), by
    /// source unit, line, column and target.
    pub fn edges_from_range(&self, lo: i64, hi: i64) -> Result<Vec<StoredEdge>> {
        let mut out: Vec<StoredEdge> = Vec::new();
        let files = self.files_holding_units(lo, hi)?;
        for &f in &files {
            out.extend(
                self.edge_list(f)?
                    .iter()
                    .filter(|e| (lo..=hi).contains(&e.src))
                    .map(unpack),
            );
        }
        if files.len() > 1 {
            out.sort_by_key(|e| (e.src, e.line, e.col, e.dst));
        }
        Ok(out)
    }

    /// The files whose node ranges meet `lo..=hi`: usually the one file of
    /// `lo` (a unit, or a file's own range), else found by a scan.
    fn files_holding_units(&self, lo: i64, hi: i64) -> Result<Vec<i64>> {
        if lo > hi {
            return Ok(Vec::new());
        }
        let of_lo: Option<(i64, i64, i64)> = self
            .conn
            .prepare_cached(
                "SELECT f.id, f.first_node_id, f.last_node_id FROM nodes n JOIN files f ON f.id = n.file_id WHERE n.id = ?1",
            )?
            .query_row([lo], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .optional()?;
        if let Some((f, first, last)) = of_lo
            && first <= lo
            && hi <= last
        {
            return Ok(vec![f]);
        }
        let mut stmt = self.conn.prepare_cached(
            "SELECT id FROM files WHERE first_node_id <= ?2 AND last_node_id >= ?1 ORDER BY first_node_id",
        )?;
        let rows = stmt.query_map([lo, hi], |r| r.get(0))?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// Every edge (for whole-graph operations: hotspots, cycles, exports),
    /// by source unit, line, column and target.
    pub fn all_edges(&self) -> Result<Vec<StoredEdge>> {
        // Files' node ranges do not overlap: in range order, the lists
        // concatenate in source order.
        let mut stmt = self.conn.prepare(
            "SELECT l.file_id, l.edges FROM edge_lists l LEFT JOIN files f ON f.id = l.file_id
             ORDER BY f.first_node_id",
        )?;
        let mut rows = stmt.query([])?;
        let mut out = Vec::new();
        while let Some(row) = rows.next()? {
            let file_id: i64 = row.get(0)?;
            let blob = row.get_ref(1)?.as_blob().map_err(rusqlite::Error::from)?;
            out.extend(
                packed_edges::decode(blob, file_id)?
                    .iter()
                    .filter(|e| e.dst > 0)
                    .map(unpack),
            );
        }
        Ok(out)
    }

    /// The graph part of [`Store::orphan_rows`]: edge lists without a
    /// file, edges whose source unit is not one of their file's, and
    /// `edge_targets` rows that differ from what the lists hold (missing or
    /// extra). A damaged list is an error, as a damaged reference blob is.
    pub fn orphan_edges(&self) -> Result<u64> {
        let mut targets: BTreeSet<(i64, i64)> = {
            let mut stmt = self.conn.prepare("SELECT dst, file_id FROM edge_targets")?;
            let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
            rows.collect::<rusqlite::Result<_>>()?
        };
        let mut orphans = 0u64;
        let mut stmt = self.conn.prepare(
            "SELECT l.file_id, l.edges, f.first_node_id, f.last_node_id
             FROM edge_lists l LEFT JOIN files f ON f.id = l.file_id",
        )?;
        let mut rows = stmt.query([])?;
        while let Some(row) = rows.next()? {
            let file_id: i64 = row.get(0)?;
            let blob = row.get_ref(1)?.as_blob().map_err(rusqlite::Error::from)?;
            let range: Option<(i64, i64)> = match (row.get(2)?, row.get(3)?) {
                (Some(a), Some(b)) => Some((a, b)),
                _ => None,
            };
            let Some((first, last)) = range else {
                orphans += 1;
                continue;
            };
            let edges = packed_edges::decode(blob, file_id)?;
            orphans += edges
                .iter()
                .filter(|e| !(first..=last).contains(&e.src))
                .count() as u64;
            let dsts: BTreeSet<i64> = edges.iter().map(|e| e.dst).collect();
            for dst in dsts {
                if !targets.remove(&(dst, file_id)) {
                    orphans += 1;
                }
            }
        }
        // Rows no list accounts for.
        Ok(orphans + targets.len() as u64)
    }

    /// Number of stored edges.
    pub fn edge_count(&self) -> Result<u64> {
        Ok(self
            .conn
            .query_row("SELECT COALESCE(SUM(count), 0) FROM edge_lists", [], |r| {
                r.get::<_, i64>(0)
            })? as u64)
    }
}

impl Store {
    /// The node id range of a file's units (`files.first_node_id..=last_node_id`).
    pub fn file_node_range(&self, path: &str) -> Result<(i64, i64)> {
        Ok(self
            .conn
            .prepare_cached("SELECT first_node_id, last_node_id FROM files WHERE path = ?1")?
            .query_row([path], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?
            .unwrap_or((1, 0)))
    }
}

impl Store {
    /// Every file's id, path and node id range, by path.
    pub fn file_ranges(&self) -> Result<Vec<(i64, String, i64, i64)>> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT id, path, first_node_id, last_node_id FROM files ORDER BY path",
        )?;
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// Ids of the definitions graph analyses look at (functions, methods, types).
    pub fn definition_ids(&self) -> Result<Vec<i64>> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT id FROM nodes WHERE node_type IN ('function','method','class','struct','enum','trait','interface','type')",
        )?;
        let rows = stmt.query_map([], |r| r.get(0))?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }
}

/// A call site as the raw references record it: enclosing unit, line, name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawCall {
    /// Enclosing unit (`nodes.id`).
    pub src: i64,
    /// 1-based line.
    pub line: u32,
    /// The called name.
    pub name: String,
}

impl Store {
    /// The call sites of a file's raw references (`file_refs`).
    pub fn raw_calls_in_file(&self, file_id: i64) -> Result<Vec<RawCall>> {
        let call = super::ref_type_code("call") as u8;
        let mut names: HashMap<i64, String> = HashMap::new();
        let mut out = Vec::new();
        for r in self.file_refs(file_id)? {
            if r.ref_type != call {
                continue;
            }
            let name = match names.get(&r.name_id) {
                Some(n) => n.clone(),
                None => {
                    let n: String = self
                        .conn
                        .prepare_cached("SELECT text FROM ref_names WHERE id = ?1")?
                        .query_row([r.name_id], |row| row.get(0))?;
                    names.insert(r.name_id, n.clone());
                    n
                }
            };
            out.push(RawCall {
                src: r.source_node_id,
                line: r.line,
                name,
            });
        }
        Ok(out)
    }

    /// The id of a raw-reference name (`ref_names`), if any reference uses it.
    pub fn ref_name_id(&self, name: &str) -> Result<Option<i64>> {
        Ok(self
            .conn
            .prepare_cached(
                "SELECT id FROM ref_names WHERE text = ?1 COLLATE NOCASE AND text = ?1",
            )?
            .query_row([name], |r| r.get::<_, i64>(0))
            .optional()?)
    }

    /// The call sites named by `name_id` (see [`Store::ref_name_id`]) among a
    /// file's raw references, as (enclosing unit, line); names are never read back.
    pub fn raw_calls_named(&self, file_id: i64, name_id: i64) -> Result<Vec<(i64, u32)>> {
        let call = super::ref_type_code("call") as u8;
        Ok(self
            .file_refs(file_id)?
            .into_iter()
            .filter(|r| r.ref_type == call && r.name_id == name_id)
            .map(|r| (r.source_node_id, r.line))
            .collect())
    }

    /// The node id range of the file with id `file_id` (`(1, 0)`, empty, when unknown).
    pub fn file_node_range_by_id(&self, file_id: i64) -> Result<(i64, i64)> {
        Ok(self
            .conn
            .prepare_cached("SELECT first_node_id, last_node_id FROM files WHERE id = ?1")?
            .query_row([file_id], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?
            .unwrap_or((1, 0)))
    }

    /// Files whose raw references use `name` (as a name, not only a
    /// qualifier), by path: a capped sample of their sites is the same
    /// whatever order the files were written in (issue 25).
    pub fn files_using_name(&self, name: &str) -> Result<Vec<i64>> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT p.file_id FROM ref_postings p JOIN ref_names n ON n.id = p.name_id
             JOIN files f ON f.id = p.file_id
             WHERE n.text = ?1 COLLATE NOCASE AND n.text = ?1 AND p.name_uses > 0 ORDER BY f.path",
        )?;
        let rows = stmt.query_map([name], |r| r.get(0))?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// Every name some raw reference uses.
    pub fn used_ref_names(&self) -> Result<std::collections::HashSet<String>> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT n.text FROM ref_names n WHERE EXISTS (SELECT 1 FROM ref_postings p WHERE p.name_id = n.id AND p.name_uses > 0)",
        )?;
        let rows = stmt.query_map([], |r| r.get(0))?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// The file a unit belongs to.
    pub fn file_of_unit(&self, node: i64) -> Result<Option<i64>> {
        Ok(self
            .conn
            .prepare_cached("SELECT file_id FROM nodes WHERE id = ?1")?
            .query_row([node], |r| r.get(0))
            .optional()?)
    }
}

/// The `nodes` columns a [`SymRow`] is read from, in [`sym_row`]'s order.
const SYM_COLUMNS: &str = "id, parent_id, node_type, COALESCE(name, ''), \
     COALESCE(qualified_name, ''), start_byte, end_byte";

/// A unit of file `file` as resolution reads it, from a row that starts
/// with [`SYM_COLUMNS`]; `None` for a kind this build does not know.
fn sym_row(r: &rusqlite::Row<'_>, file: FileIdx) -> rusqlite::Result<Option<SymRow>> {
    // The kind is parsed here: no String per row for it.
    let Some(node_type) = NodeType::from_name(r.get_ref(2)?.as_str()?) else {
        return Ok(None);
    };
    Ok(Some(SymRow {
        id: r.get(0)?,
        file,
        parent: r.get(1)?,
        node_type,
        name: r.get(3)?,
        qualified_name: r.get(4)?,
        start: r.get::<_, i64>(5)? as u32,
        end: r.get::<_, i64>(6)? as u32,
    }))
}
