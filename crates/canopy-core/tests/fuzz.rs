//! Bounded fuzzing of everything a caller types: the DSL, text patterns,
//! globs and their combinations, against a real index. Run in CI with the
//! rest of the tests (a few hundred cases each, seconds in total); raise
//! `PROPTEST_CASES` locally for a longer run.
//!
//! The properties are stronger than "does not panic": a rendered DSL
//! expression parses back to itself, a bad glob or expression fails with
//! the error a caller can act on (never `Database` or `Internal`), and an
//! answer respects the filters and limits it was asked for.

use canopy_test_support::repo::write;

use canopy_core::discover::PathFilter;
use canopy_core::index::NoProgress;
use canopy_core::query::{Expr, MatchMode, QueryKind, QueryParams};
use canopy_core::{CanopyError, Engine, EngineOptions};
use proptest::prelude::*;

fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(default)
}

/// Renders an expression in the DSL's surface syntax (strings always quoted).
fn render(expr: &Expr) -> String {
    fn quote(s: &str) -> String {
        let mut out = String::from("\"");
        for c in s.chars() {
            if c == '"' || c == '\\' {
                out.push('\\');
            }
            out.push(c);
        }
        out.push('"');
        out
    }
    match expr {
        Expr::Grep(s) => format!("(grep {})", quote(s)),
        Expr::Code(s) => format!("(code {})", quote(s)),
        Expr::Definition(s) => format!("(definition {})", quote(s)),
        Expr::References(s) => format!("(references {})", quote(s)),
        Expr::Section(s) => format!("(section {})", quote(s)),
        Expr::File(s) => format!("(file {})", quote(s)),
        Expr::Children(s) => format!("(children {})", quote(s)),
        Expr::ChildrenNamed(p, c) => format!("(children-named {} {})", quote(p), quote(c)),
        Expr::InFile(g, e) => format!("(in-file {} {})", quote(g), render(e)),
        Expr::Union(es) | Expr::Intersect(es) => {
            let op = if matches!(expr, Expr::Union(_)) {
                "union"
            } else {
                "intersect"
            };
            let args: Vec<String> = es.iter().map(render).collect();
            format!("({op} {})", args.join(" "))
        }
        Expr::Limit(n, e) => format!("(limit {n} {})", render(e)),
    }
}

/// Words the fixture repository contains, plus a few it does not.
const WORDS: [&str; 12] = [
    "alpha", "beta", "gamma", "delta", "parse", "token", "render", "widget", "missing", "zzz", "a",
    "_",
];

fn word() -> impl Strategy<Value = String> {
    prop_oneof![
        proptest::sample::select(WORDS.to_vec()).prop_map(String::from),
        "[a-zA-Z_*\"()\\\\ .:-]{0,12}",
    ]
}

fn glob() -> impl Strategy<Value = String> {
    prop_oneof![
        proptest::sample::select(vec![
            "**/*.py",
            "src/**",
            "*.rs",
            "lib/*.ts",
            "**/m1*.py",
            "docs/**/*.md",
            "**",
            "[",
            "{a,b",
            "a/**b",
            "***",
            "src/[!a].py",
            "\\",
            "",
        ])
        .prop_map(String::from),
        "[a-z*?/.\\[\\]{},!-]{0,16}",
    ]
}

fn leaf() -> impl Strategy<Value = Expr> {
    prop_oneof![
        word().prop_map(Expr::Grep),
        word().prop_map(Expr::Code),
        word().prop_map(Expr::Definition),
        word().prop_map(Expr::References),
        word().prop_map(Expr::Section),
        word().prop_map(Expr::File),
        word().prop_map(Expr::Children),
        (word(), word()).prop_map(|(p, c)| Expr::ChildrenNamed(p, c)),
    ]
}

fn expr() -> impl Strategy<Value = Expr> {
    leaf().prop_recursive(4, 24, 4, |inner| {
        prop_oneof![
            (glob(), inner.clone()).prop_map(|(g, e)| Expr::InFile(g, Box::new(e))),
            proptest::collection::vec(inner.clone(), 1..4).prop_map(Expr::Union),
            proptest::collection::vec(inner.clone(), 1..4).prop_map(Expr::Intersect),
            (0usize..50, inner).prop_map(|(n, e)| Expr::Limit(n, Box::new(e))),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(1000),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// What the parser reads is what was written: quoting, escapes,
    /// nesting and every operator survive a round trip.
    #[test]
    fn rendered_expressions_parse_back_to_themselves(e in expr()) {
        let text = render(&e);
        // The `query` parameter alone is its expression, as parsed.
        let params = QueryParams { query: Some(text.clone()), ..QueryParams::default() };
        match params.to_expr() {
            Ok(parsed) => prop_assert_eq!(parsed, e, "{}", text),
            // A generated empty string or an out-of-range limit may be
            // refused, but only as a parse error naming what is wrong.
            Err(CanopyError::QueryParse { .. }) => {}
            Err(other) => prop_assert!(false, "{text}: {other}"),
        }
    }

    /// Any glob text either compiles or fails as `GlobPattern`; a compiled
    /// glob answers for any path without panicking.
    #[test]
    fn globs_compile_or_fail_as_glob_errors(pattern in "\\PC{0,24}", path in "[a-z/._-]{0,30}") {
        match PathFilter::new(&pattern) {
            Ok(filter) => { let _ = filter.is_match(&path); }
            // `/etc/**`, `../x`: a glob that leaves the repository.
            Err(CanopyError::GlobPattern { .. } | CanopyError::PathOutsideRepo(_)) => {}
            Err(other) => prop_assert!(false, "{pattern:?}: {other}"),
        }
    }
}

/// A small repository in three languages and Markdown whose text uses `WORDS`.
fn fixture() -> (tempfile::TempDir, Engine) {
    let dir = tempfile::tempdir().expect("tempdir");
    for i in 0..12 {
        write(
            dir.path(),
            &format!("src/m{i}.py"),
            format!(
                "class Widget{i}:\n    def parse(self, token):\n        return alpha_{i}(token) + beta\n\n\
                 def alpha_{i}(x):\n    # gamma delta render\n    return x\n"
            ),
        );
    }
    write(
        dir.path(),
        "lib/widget.ts",
        "export function render(token: string) { return parse(token); }\nfunction parse(t: string) { return t; }\n",
    );
    write(
        dir.path(),
        "src/lib.rs",
        "pub struct Token;\nimpl Token { pub fn parse(&self) -> u8 { gamma() } }\nfn gamma() -> u8 { 1 }\n",
    );
    write(
        dir.path(),
        "docs/guide.md",
        "# Alpha\n\nparse the token\n\n## Beta widget\n\nrender delta\n",
    );
    let engine = Engine::open(dir.path(), EngineOptions::default()).expect("open");
    engine.index(None, &NoProgress).expect("index");
    (dir, engine)
}

/// The errors a caller can act on; anything else is a defect.
fn is_callers_error(e: &CanopyError) -> bool {
    matches!(
        e,
        CanopyError::Validation(_)
            | CanopyError::QueryParse { .. }
            | CanopyError::GlobPattern { .. }
            | CanopyError::PathOutsideRepo(_)
    )
}

#[derive(Debug, Clone)]
struct Ask {
    pattern: Option<String>,
    patterns: Option<Vec<String>>,
    symbol: Option<String>,
    glob: Option<String>,
    kind: Option<QueryKind>,
    all: bool,
    limit: Option<usize>,
    query: Option<Expr>,
}

fn ask() -> impl Strategy<Value = Ask> {
    (
        proptest::option::of(word()),
        proptest::option::of(proptest::collection::vec(word(), 0..5)),
        proptest::option::of(word()),
        proptest::option::of(glob()),
        proptest::option::of(prop_oneof![
            Just(QueryKind::Definition),
            Just(QueryKind::Reference),
            Just(QueryKind::Any)
        ]),
        any::<bool>(),
        proptest::option::of(0usize..300),
        proptest::option::weighted(0.3, expr()),
    )
        .prop_map(
            |(pattern, patterns, symbol, glob, kind, all, limit, query)| Ask {
                pattern,
                patterns,
                symbol,
                glob,
                kind,
                all,
                limit,
                query,
            },
        )
}

/// Random combinations of every query parameter against a real index:
/// answers respect their glob and limit; failures are the caller's kind.
#[test]
fn random_queries_are_answered_within_their_filters_or_refused_clearly() {
    let (_dir, engine) = fixture();
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: cases(400),
        failure_persistence: None,
        ..ProptestConfig::default()
    });
    runner
        .run(&ask(), |ask| {
            let params = QueryParams {
                pattern: ask.pattern.clone(),
                patterns: ask.patterns.clone(),
                symbol: ask.symbol.clone(),
                glob: ask.glob.clone(),
                kind: ask.kind,
                match_mode: Some(if ask.all {
                    MatchMode::All
                } else {
                    MatchMode::Any
                }),
                limit: ask.limit,
                query: ask.query.as_ref().map(render),
                ..Default::default()
            };
            match engine.query(&params) {
                Ok(result) => {
                    if let Some(limit) = ask.limit.filter(|l| *l > 0) {
                        prop_assert!(result.handles.len() <= limit, "{ask:?}");
                    }
                    if let Some(filter) = ask.glob.as_deref().and_then(|g| PathFilter::new(g).ok())
                    {
                        for h in &result.handles {
                            prop_assert!(
                                filter.is_match(&h.file_path),
                                "{} is outside the glob of {ask:?}",
                                h.file_path
                            );
                        }
                    }
                    prop_assert!(result.total_matches >= result.handles.len() || result.truncated);
                }
                Err(e) => prop_assert!(is_callers_error(&e), "{ask:?}: {e:?}"),
            }
            Ok(())
        })
        .expect("property");
}

/// Evidence packs take the same inputs; the same rules hold.
#[test]
fn random_evidence_packs_fail_only_with_callers_errors() {
    use canopy_core::pack::PackParams;
    let (_dir, engine) = fixture();
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: cases(200),
        failure_persistence: None,
        ..ProptestConfig::default()
    });
    runner
        .run(
            &(ask(), 0usize..20, 0u64..3000),
            |(ask, max_handles, max_tokens)| {
                let params = PackParams {
                    query: QueryParams {
                        pattern: ask.pattern.clone(),
                        patterns: ask.patterns.clone(),
                        symbol: ask.symbol.clone(),
                        glob: ask.glob.clone(),
                        kind: ask.kind,
                        query: ask.query.as_ref().map(render),
                        ..Default::default()
                    },
                    max_handles: Some(max_handles),
                    max_tokens: Some(max_tokens),
                    ..Default::default()
                };
                match engine.evidence_pack(&params, Some("fuzz")) {
                    Ok(pack) => {
                        if max_handles > 0 {
                            prop_assert!(pack.handles.len() <= max_handles, "{ask:?}");
                        }
                    }
                    Err(e) => prop_assert!(is_callers_error(&e), "{ask:?}: {e:?}"),
                }
                Ok(())
            },
        )
        .expect("property");
}
