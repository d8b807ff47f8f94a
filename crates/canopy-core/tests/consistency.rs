//! Answers while the index changes (issue 32): never a wrong or blocked
//! answer.
//!
//! * A rebuild serves the old complete index, to every reader, until the
//!   new one is complete, then the new one under a later generation (N2).
//! * A long-lived reader follows an index file replaced under it (N9).
//! * A reader is never blocked by a large index run, and sees it arrive
//!   batch by batch, each state under a generation of its own (N5).
//! * Coverage counts skipped files as covered (N7).
//!
//! The writer is paused at a chosen file by its progress sink (a
//! rendezvous, not a timing): while it waits there, the test reads.

use canopy_test_support::repo::write;
use std::collections::HashSet;
use std::fs;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, mpsc};
use std::time::Duration;

use canopy_core::index::{IndexProgress, NoProgress};
use canopy_core::query::QueryParams;
use canopy_core::{Engine, EngineOptions};

/// How long a paused writer waits for the test's reads before it decides
/// they are blocked behind it. Not a speed limit: an unblocked read takes
/// milliseconds; this only turns a deadlock into a failure instead of a
/// hang.
const DEADLOCK_GUARD: Duration = Duration::from_secs(120);

/// A progress sink that stops the run at its `at`-th file until the test
/// says to go on.
struct PauseAt {
    at: u64,
    seen: AtomicU64,
    paused: Mutex<mpsc::Sender<()>>,
    resume: Mutex<mpsc::Receiver<()>>,
    /// The test's reads did not come back while the writer waited.
    blocked: AtomicBool,
}

/// The test's side of a [`PauseAt`].
struct Rendezvous {
    paused: mpsc::Receiver<()>,
    resume: mpsc::Sender<()>,
}

impl PauseAt {
    fn new(at: u64) -> (PauseAt, Rendezvous) {
        let (paused_tx, paused_rx) = mpsc::channel();
        let (resume_tx, resume_rx) = mpsc::channel();
        (
            PauseAt {
                at,
                seen: AtomicU64::new(0),
                paused: Mutex::new(paused_tx),
                resume: Mutex::new(resume_rx),
                blocked: AtomicBool::new(false),
            },
            Rendezvous {
                paused: paused_rx,
                resume: resume_tx,
            },
        )
    }
}

impl IndexProgress for PauseAt {
    fn advance(&self, _path: &str, _bytes: u64) {
        if self.seen.fetch_add(1, Ordering::SeqCst) + 1 != self.at {
            return;
        }
        let _ = self.paused.lock().unwrap().send(());
        let resumed = self.resume.lock().unwrap().recv_timeout(DEADLOCK_GUARD);
        if resumed.is_err() {
            self.blocked.store(true, Ordering::SeqCst);
        }
    }
}

fn symbol(e: &Engine, name: &str) -> canopy_core::model::QueryResult {
    e.query(&QueryParams {
        symbol: Some(name.into()),
        ..Default::default()
    })
    .unwrap()
}

/// The generation the engine's next answer carries.
fn generation(e: &Engine, probe: &str) -> u64 {
    symbol(e, probe).freshness.expect("freshness").generation
}

const FILES: usize = 600;

fn probe_repo(root: &Path) {
    for i in 0..FILES {
        write(
            root,
            &format!("pkg{}/mod_{i}.py", i % 10),
            format!("def probe_{i}_fn(x):\n    return x + {i}\n"),
        );
    }
}

fn probe_path(i: usize) -> String {
    format!("pkg{}/mod_{i}.py", i % 10)
}

/// Every probe it asks for is answered completely: one handle, in the
/// right file, under `generation`, from a complete index.
fn assert_complete_answers(e: &Engine, generation: u64, who: &str) {
    for i in (0..FILES).step_by(37) {
        let r = symbol(e, &format!("probe_{i}_fn"));
        let paths: Vec<&str> = r.handles.iter().map(|h| h.file_path.as_str()).collect();
        assert_eq!(paths, [probe_path(i)], "{who}: probe_{i}_fn");
        assert_eq!(
            r.freshness.as_ref().map(|f| f.generation),
            Some(generation),
            "{who}"
        );
        assert!(r.index_coverage.is_none(), "{who}: {:?}", r.index_coverage);
    }
    let status = e.status().unwrap();
    assert_eq!(status.files_indexed, FILES as u64, "{who}");
    assert_eq!(status.index_coverage, 1.0, "{who}");
    // A rebuild that was asked for is no damage.
    assert!(status.damaged.is_none(), "{who}: {:?}", status.damaged);
}

#[test]
fn a_rebuild_serves_the_old_complete_index_until_the_new_one_is_live() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    probe_repo(root);
    let options = EngineOptions {
        auto_index: false,
        ..EngineOptions::default()
    };
    let writer = Engine::open(root, options.clone()).unwrap();
    writer.index(None, &NoProgress).unwrap();
    let long_lived = Engine::open(root, options.clone()).unwrap();
    let before = generation(&writer, "probe_0_fn");
    assert_complete_answers(&long_lived, before, "before");

    // Past the first batch (256 files) of the new index.
    let (pause, rendezvous) = PauseAt::new(300);
    let done = AtomicBool::new(false);
    // Answers of readers that query throughout: (generation, right answer).
    let answers: Mutex<Vec<(u64, bool)>> = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        let rebuild = s.spawn(|| {
            let report = writer.rebuild(&pause);
            done.store(true, Ordering::SeqCst);
            report
        });
        for t in 0..3 {
            let (done, answers, options) = (&done, &answers, options.clone());
            s.spawn(move || {
                let e = Engine::open(root, options).unwrap();
                let mut i = t * 101;
                while !done.load(Ordering::SeqCst) {
                    i = (i + 53) % FILES;
                    let r = symbol(&e, &format!("probe_{i}_fn"));
                    let right = r.handles.len() == 1
                        && r.handles[0].file_path == probe_path(i)
                        && r.index_coverage.is_none();
                    let g = r.freshness.map_or(0, |f| f.generation);
                    answers.lock().unwrap().push((g, right));
                }
            });
        }
        rendezvous.paused.recv().unwrap();
        // Mid-rebuild: the rebuilding engine itself, a reader opened
        // before, and one opened now all read the old complete index.
        let fresh = Engine::open(root, options.clone()).unwrap();
        assert_complete_answers(&writer, before, "the rebuilding engine");
        assert_complete_answers(&long_lived, before, "a reader opened before");
        assert_complete_answers(&fresh, before, "a reader opened mid-rebuild");
        rendezvous.resume.send(()).unwrap();
        let report = rebuild.join().unwrap().unwrap();
        assert!(report.rebuilt.is_some(), "{report:?}");
    });
    assert!(!pause.blocked.load(Ordering::SeqCst));

    let after = generation(&writer, "probe_0_fn");
    assert!(after > before, "generation {before} -> {after}");
    let fresh = Engine::open(root, options).unwrap();
    assert_complete_answers(&writer, after, "the rebuilding engine, after");
    assert_complete_answers(&long_lived, after, "a reader opened before, after");
    assert_complete_answers(&fresh, after, "a reader opened after");
    let answers = answers.into_inner().unwrap();
    let wrong = answers.iter().filter(|(_, right)| !right).count();
    assert_eq!(
        wrong,
        0,
        "{wrong} of {} answers were empty or wrong",
        answers.len()
    );
    let generations: HashSet<u64> = answers.iter().map(|(g, _)| *g).collect();
    assert!(
        generations.is_subset(&HashSet::from([before, after])),
        "answers named generations {generations:?}, not only {before} and {after}"
    );
    assert_eq!(writer.orphan_rows().unwrap(), 0);
    assert_eq!(writer.totals_drift().unwrap(), 0);
}

#[test]
fn a_long_lived_reader_follows_an_index_file_replaced_under_it() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "a.py", "def present_from_the_start():\n    pass\n");
    let options = EngineOptions {
        auto_index: false,
        ..EngineOptions::default()
    };
    let reader = Engine::open(root, options.clone()).unwrap();
    reader.index(None, &NoProgress).unwrap();
    assert_eq!(symbol(&reader, "present_from_the_start").handles.len(), 1);

    // What an older Canopy's rebuild (or `rm -rf .canopy`) does: the files
    // go, and another process creates a new index at the same path.
    for suffix in ["", "-wal", "-shm"] {
        let _ = fs::remove_file(root.join(format!(".canopy/index.db{suffix}")));
    }
    write(root, "b.py", "def added_with_the_new_file():\n    pass\n");
    let other = Engine::open(root, options.clone()).unwrap();
    other.index(None, &NoProgress).unwrap();
    // The other process keeps its connection and its log open, so what it
    // committed may still be in the log only.
    assert_eq!(symbol(&other, "added_with_the_new_file").handles.len(), 1);

    // The long-lived reader sees the new file (it would read the deleted
    // one for as long as it lives) ...
    assert_eq!(
        symbol(&reader, "added_with_the_new_file").handles.len(),
        1,
        "a reader kept reading the deleted index"
    );
    // ... and letting go of the deleted one took nothing from the new one.
    let third = Engine::open(root, options).unwrap();
    assert_eq!(symbol(&third, "added_with_the_new_file").handles.len(), 1);
    assert_eq!(symbol(&third, "present_from_the_start").handles.len(), 1);
    assert_eq!(third.orphan_rows().unwrap(), 0);
    assert_eq!(third.totals_drift().unwrap(), 0);
    assert_eq!(other.orphan_rows().unwrap(), 0);
    assert_eq!(other.totals_drift().unwrap(), 0);
}

#[test]
fn a_reader_is_never_blocked_by_a_large_run_and_sees_it_arrive_batch_by_batch() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    probe_repo(root);
    let writer = Engine::open(root, EngineOptions::default()).unwrap();
    writer.index(None, &NoProgress).unwrap();
    // A checkout that changes every file and adds as many: the run over
    // the whole repository adds files, so the index is partial until it
    // ends.
    for i in 0..FILES {
        write(
            root,
            &probe_path(i),
            format!("def probe_{i}_fn(x):\n    return x - {i}\n"),
        );
        write(
            root,
            &format!("new/added_{i}.py"),
            format!("def added_{i}_fn():\n    return {i}\n"),
        );
    }
    // The engine that runs the batch also answers (a watcher thread and
    // an agent's queries share one engine in `canopy mcp`). On a partial
    // index a query indexes the files it points at first, which takes the
    // run lock the batch holds.
    let reader = &writer;
    let before = generation(reader, "probe_0_fn");
    let (pause, rendezvous) = PauseAt::new(400);
    let mid_generation = std::thread::scope(|s| {
        let run = s.spawn(|| writer.index(None, &pause));
        rendezvous.paused.recv().unwrap();
        // Mid-run, a query that points at files not indexed yet (it would
        // index them first, waiting for the run) answers from what is
        // indexed (the writer waits for it), from a state between the old
        // and the new index, under a generation of its own, and says how
        // partial it is.
        let mid = reader
            .query(&QueryParams {
                pattern: Some("added".into()),
                glob: Some("new/**".into()),
                ..Default::default()
            })
            .unwrap();
        let status = reader.status().unwrap();
        assert!(
            status.index_coverage < 1.0,
            "coverage {}",
            status.index_coverage
        );
        assert_eq!(
            mid.index_coverage,
            Some(status.index_coverage),
            "the answer's coverage is its snapshot's"
        );
        let mid_generation = mid.freshness.as_ref().unwrap().generation;
        // Another repository of the same process (one `canopy mcp` serves
        // many) builds and answers meanwhile: the paused run's parsers
        // hold no threads anyone else needs.
        let elsewhere = tempfile::tempdir().unwrap();
        write(elsewhere.path(), "x.py", "def elsewhere_fn():\n    pass\n");
        let other = Engine::open(elsewhere.path(), EngineOptions::default()).unwrap();
        assert_eq!(symbol(&other, "elsewhere_fn").handles.len(), 1);
        rendezvous.resume.send(()).unwrap();
        run.join().unwrap().unwrap();
        mid_generation
    });
    assert!(
        !pause.blocked.load(Ordering::SeqCst),
        "the reader was blocked behind the index run"
    );
    let after = generation(reader, "probe_0_fn");
    assert!(
        before < mid_generation && mid_generation < after,
        "generations before, mid-run and after: {before}, {mid_generation}, {after}"
    );
    let r = symbol(reader, &format!("added_{}_fn", FILES - 1));
    assert_eq!(r.handles.len(), 1);
    assert!(r.index_coverage.is_none());
    reader.wait_for_background_index().unwrap();
}

#[test]
fn coverage_counts_skipped_files_as_covered() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    for i in 0..20 {
        write(
            root,
            &format!("src/m{i}.py"),
            format!("def m{i}():\n    pass\n"),
        );
    }
    for i in 0..5 {
        write(root, &format!("assets/b{i}.bin"), [0u8, 1, 2, 3, 0, 42]);
    }
    let options = EngineOptions {
        auto_index: false,
        ..EngineOptions::default()
    };
    let e = Engine::open(root, options).unwrap();
    e.index(None, &NoProgress).unwrap();
    assert_eq!(e.status().unwrap().index_coverage, 1.0);
    // Twenty files more, and a run cancelled after its first file: the
    // index is partial; the binaries are known (skipped), not missing.
    for i in 20..40 {
        write(
            root,
            &format!("src/m{i}.py"),
            format!("def m{i}():\n    pass\n"),
        );
    }
    struct CancelAfterFirst(canopy_core::cancel::CancelFlag);
    impl IndexProgress for CancelAfterFirst {
        fn advance(&self, _path: &str, _bytes: u64) {
            self.0.cancel();
        }
    }
    let flag = canopy_core::cancel::CancelFlag::new();
    let sink = CancelAfterFirst(flag.clone());
    let cancelled = canopy_core::cancel::within(&flag, || e.index(None, &sink));
    assert!(cancelled.is_err());
    let status = e.status().unwrap();
    assert!(status.files_indexed < 40, "{}", status.files_indexed);
    let expected = (status.files_indexed + 5) as f64 / 45.0;
    assert!(
        (status.index_coverage - expected).abs() < 1e-9,
        "coverage {} with {} of 40 text files indexed and 5 binaries skipped (expected {expected})",
        status.index_coverage,
        status.files_indexed
    );
}
