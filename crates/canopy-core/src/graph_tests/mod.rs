//! Tests of the code graph that need an index run: resolution streamed in
//! chunks stores what one pass stores, and a kept world ([`kept_world`])
//! stores what a cold index stores. They live here, above both, because
//! `canopy-graph` sits below the indexer that runs them.

#![cfg(test)]

mod kept_world;

use std::path::Path;

use crate::index::{IndexOptions, NoProgress, run_index};
use crate::store::Store;

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for e in std::fs::read_dir(from).expect("read fixture") {
        let p = e.expect("entry").path();
        let target = to.join(p.file_name().expect("name"));
        if p.is_dir() {
            copy_dir(&p, &target);
        } else {
            std::fs::copy(&p, &target).expect("copy");
        }
    }
}

/// Every stored byte of the graph: each file's packed edge list and
/// the `edge_targets` rows.
pub(crate) type GraphRows = (Vec<(i64, Vec<u8>)>, Vec<(i64, i64)>);

/// The [`GraphRows`] of `store` (`kept_world` compares them too).
pub(crate) fn graph_rows(store: &Store) -> GraphRows {
    let lists = store
        .conn
        .prepare("SELECT file_id, edges FROM edge_lists ORDER BY file_id")
        .expect("prepare")
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .expect("query")
        .collect::<rusqlite::Result<Vec<_>>>()
        .expect("rows");
    let targets = store
        .conn
        .prepare("SELECT dst, file_id FROM edge_targets ORDER BY dst, file_id")
        .expect("prepare")
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .expect("query")
        .collect::<rusqlite::Result<Vec<_>>>()
        .expect("rows");
    (lists, targets)
}

/// Indexes `root` (resolution streamed in chunks of the default size),
/// then resolves every file again with every site of the repository in
/// one chunk (what a pass held before it streamed) and in chunks of one
/// and of three files: every stored byte of the graph is the same.
fn streamed_resolution_stores_what_one_pass_stores(root: &Path) {
    let db = tempfile::tempdir().expect("tempdir");
    let (mut store, why) = Store::open(&db.path().join("index.db")).expect("store");
    assert!(why.is_none(), "{why:?}");
    let options = IndexOptions {
        glob: None,
        max_file_size: crate::discover::DEFAULT_MAX_FILE_SIZE,
        only_paths: None,
    };
    run_index(root, &mut store, &options, &NoProgress, None).expect("index");
    let streamed = graph_rows(&store);
    assert!(
        streamed.0.len() >= 2 && !streamed.1.is_empty(),
        "the repository has edges in more than one file: {streamed:?}"
    );
    for chunk in [usize::MAX, 1, 3] {
        store
            .conn
            .execute("INSERT OR IGNORE INTO graph_dirty SELECT id FROM files", [])
            .expect("mark every file");
        let stats = crate::graph::resolve_pending_in_chunks(&mut store, root, chunk, None)
            .expect("resolve");
        assert!(stats.files >= 2, "{stats:?}");
        assert_eq!(graph_rows(&store), streamed, "chunks of {chunk} files");
    }
}

#[test]
fn streamed_resolution_changes_no_edge_of_the_fixtures() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/graph");
    for lang in ["python", "typescript", "rust", "go"] {
        let dir = tempfile::tempdir().expect("tempdir");
        copy_dir(&fixtures.join(lang), dir.path());
        streamed_resolution_stores_what_one_pass_stores(dir.path());
    }
}

#[test]
fn streamed_resolution_changes_no_edge_of_a_generated_repository() {
    // Modules that import and call each other, classes with bases in
    // other modules, methods on instances: more files than a chunk.
    let dir = tempfile::tempdir().expect("tempdir");
    let n = 300;
    for i in 0..n {
        let (a, b) = ((i * 7 + 3) % n, (i * 13 + 5) % n);
        let text = format!(
            "from pkg.m{a} import C{a}, f{a}\nimport pkg.m{b} as other\n\n\
             class C{i}(C{a}):\n    def run(self, x):\n        return self.step(x) + f{a}(x)\n\n\
                 def step(self, x):\n        return other.f{b}(x)\n\n\
             def f{i}(x):\n    c = C{b}() if x else other.C{b}()\n    return c.run(x) + C{a}().step(x)\n"
        );
        let path = dir.path().join(format!("pkg/m{i}.py"));
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    }
    std::fs::write(dir.path().join("pkg/__init__.py"), "").expect("write");
    streamed_resolution_stores_what_one_pass_stores(dir.path());
}
