//! Property tests: arbitrary text never panics the text search path or
//! identifier splitting (the DSL parser's are unit tests in `dsl.rs`).

use canopy_core::query::fts_expression;
use canopy_core::text::{fts_document, split_identifier};
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn text_helpers_never_panic(text in "\\PC*") {
        let _ = fts_expression(&text, true);
        let _ = fts_expression(&text, false);
        let _ = fts_document(&text);
        let _ = split_identifier(&text);
    }
}

/// The text search path end to end: random patterns against a real index.
#[test]
fn random_patterns_never_fail_a_real_index() {
    use canopy_core::query::QueryParams;
    use canopy_core::{Engine, EngineOptions};
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("a.py"),
        "def alpha(beta):\n    return beta\n",
    )
    .unwrap();
    let engine = Engine::open(dir.path(), EngineOptions::default()).unwrap();
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 500,
        ..ProptestConfig::default()
    });
    runner
        .run(&"\\PC{0,64}", |text| {
            let r = engine.query(&QueryParams {
                pattern: Some(text.clone()),
                ..Default::default()
            });
            prop_assert!(
                r.is_ok() || matches!(r, Err(canopy_core::CanopyError::Validation(_))),
                "{text:?}: {r:?}"
            );
            let r = engine.query(&QueryParams {
                query: Some(text.clone()),
                ..Default::default()
            });
            prop_assert!(
                !matches!(
                    r,
                    Err(canopy_core::CanopyError::Database(_))
                        | Err(canopy_core::CanopyError::Internal(_))
                ),
                "{text:?}: {r:?}"
            );
            Ok(())
        })
        .unwrap();
}
