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
        let stats = crate::graph::resolve_pending_in_chunks(&mut store, root, chunk, None, None)
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

/// A pass given a pool resolves on it and nowhere else: with every thread
/// of rayon's global pool held, a pass on a pool of one thread of its own
/// still finishes, and stores what the index run stored. (Before s18 the
/// pass's resolver thread sent each chunk to the global pool: this pass
/// waited for the held threads, which the test sees as a hold that ran
/// out instead of being released.)
#[test]
fn a_pass_resolves_on_the_pool_it_is_given_not_the_global_one() {
    use std::sync::{Arc, Condvar, Mutex};
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/graph");
    let dir = tempfile::tempdir().expect("tempdir");
    copy_dir(&fixtures.join("python"), dir.path());
    let db = tempfile::tempdir().expect("tempdir");
    let (mut store, _) = Store::open(&db.path().join("index.db")).expect("store");
    let options = IndexOptions {
        glob: None,
        max_file_size: crate::discover::DEFAULT_MAX_FILE_SIZE,
        only_paths: None,
    };
    run_index(dir.path(), &mut store, &options, &NoProgress, None).expect("index");
    let indexed = graph_rows(&store);
    store
        .conn
        .execute("INSERT OR IGNORE INTO graph_dirty SELECT id FROM files", [])
        .expect("mark every file");
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .expect("pool");

    // (held, released, ran out): every global worker holds until released,
    // or until a minute passes (the pass waited for them).
    let hold = Arc::new((Mutex::new((0usize, false, 0usize)), Condvar::new()));
    let global = rayon::current_num_threads();
    for _ in 0..global {
        let hold = Arc::clone(&hold);
        rayon::spawn(move || {
            let (state, changed) = &*hold;
            let mut s = state.lock().expect("lock");
            s.0 += 1;
            changed.notify_all();
            let (mut s, waited) = changed
                .wait_timeout_while(s, std::time::Duration::from_secs(60), |s| !s.1)
                .expect("wait");
            if waited.timed_out() {
                s.2 += 1;
            }
            s.0 -= 1;
            changed.notify_all();
        });
    }
    let (state, changed) = &*hold;
    drop(
        changed
            .wait_while(state.lock().expect("lock"), |s| s.0 < global)
            .expect("wait"),
    );
    // One chunk of every file: rayon does not split a chunk of one file,
    // and resolves it on the calling thread whichever the pool.
    let stats = crate::graph::resolve_pending_in_chunks(
        &mut store,
        dir.path(),
        usize::MAX,
        None,
        Some(&pool),
    )
    .expect("resolve");
    let mut s = state.lock().expect("lock");
    s.1 = true;
    changed.notify_all();
    let s = changed.wait_while(s, |s| s.0 > 0).expect("wait");
    assert_eq!(s.2, 0, "the pass waited for rayon's global pool");
    assert!(stats.files >= 2, "{stats:?}");
    assert_eq!(graph_rows(&store), indexed);
}
