//! Integration tests of the query contract (seed `004_…`): every parameter,
//! every DSL form, hostile text, references, errors and lazy indexing.

use canopy_test_support::repo::write;

use canopy_core::index::NoProgress;
use canopy_core::model::QueryResult;
use canopy_core::query::{MatchMode, QueryKind, QueryParams};
use canopy_core::{CanopyError, Engine, EngineOptions};

const CONTROLLER: &str = r#"import { Token } from '../models/token';

export class AuthController {
  authenticate(req: Request): boolean {
    return validateToken(req.headers.token);
  }

  validate(user: User): boolean {
    return user.active;
  }
}

export function validateToken(token: string): boolean {
  return token.length > 0;
}
"#;

const LOGIN: &str = r#"import { AuthController } from '../auth/controller';

const authController = new AuthController();

export const login = (req: Request) => {
  const first = authController.authenticate(req);
  const second = authController.authenticate(req);
  return first && second;
};
"#;

const ADMIN: &str = r#"import { AuthController } from '../auth/controller';

export function adminLogin(req: Request, authController: AuthController) {
  return authController.authenticate(req);
}
"#;

const MODELS: &str = r#"/// Colours users can pick.
pub enum Color {
    Red,
    Green,
}

pub const MAX_USERS: usize = 100;

pub type UserId = u64;

pub struct User {
    pub id: UserId,
}

impl User {
    pub fn new(id: UserId) -> User {
        User { id }
    }

    pub fn validate(&self) -> bool {
        self.id < MAX_USERS as u64
    }
}
"#;

const STRINGS: &str = r#""""String helpers."""


class ParseError(Exception):
    pass


def parse_expr(text):
    if not text:
        raise ParseError("empty")
    return text.strip()


def helper():
    return parse_expr("  x ")
"#;

const GUIDE: &str = "# Guide\n\nWelcome to the guide.\n\n## Installation\n\nRun the installer script.\n\n### Linux\n\nUse the package manager.\n\n## Usage\n\nCall the tool.\n";

fn fixture() -> (tempfile::TempDir, Engine) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "src/auth/controller.ts", CONTROLLER);
    write(root, "src/routes/login.ts", LOGIN);
    write(root, "src/routes/admin.ts", ADMIN);
    write(root, "src/models.rs", MODELS);
    write(root, "src/util/strings.py", STRINGS);
    write(root, "docs/guide.md", GUIDE);
    let engine = Engine::open(root, EngineOptions::default()).unwrap();
    engine.index(None, &NoProgress).unwrap();
    (dir, engine)
}

fn q(engine: &Engine, params: QueryParams) -> QueryResult {
    engine.query(&params).unwrap()
}

fn paths(r: &QueryResult) -> Vec<String> {
    r.handles.iter().map(|h| h.file_path.clone()).collect()
}

fn sym(s: &str) -> QueryParams {
    QueryParams {
        symbol: Some(s.into()),
        ..Default::default()
    }
}

fn pat(s: &str) -> QueryParams {
    QueryParams {
        pattern: Some(s.into()),
        ..Default::default()
    }
}

#[test]
fn symbol_ranking_exact_then_case_then_prefix_then_substring() {
    let (_d, e) = fixture();
    let r = q(&e, sym("validate"));
    let names: Vec<&str> = r.handles.iter().map(|h| h.preview.as_str()).collect();
    // Exact-name definitions first (TS method and Rust method), then the prefix match.
    assert!(
        names[0].starts_with("validate(") || names[0].starts_with("pub fn validate"),
        "{names:?}"
    );
    assert!(
        names[1].starts_with("validate(") || names[1].starts_with("pub fn validate"),
        "{names:?}"
    );
    assert!(
        names[2].starts_with("export function validateToken"),
        "{names:?}"
    );
    let r = q(&e, sym("AUTHCONTROLLER"));
    assert_eq!(r.handles[0].node_type, "class");
    let r = q(&e, sym("Token"));
    assert!(
        r.handles
            .iter()
            .any(|h| h.preview.contains("validateToken")),
        "substring match"
    );
}

#[test]
fn every_symbol_kind_is_findable() {
    let (_d, e) = fixture();
    for (name, node_type) in [
        ("Color", "enum"),
        ("MAX_USERS", "constant"),
        ("UserId", "type"),
        ("User", "struct"),
        ("ParseError", "class"),
        ("parse_expr", "function"),
        ("login", "function"),
    ] {
        let r = q(&e, sym(name));
        assert_eq!(
            r.handles.first().map(|h| h.node_type.as_str()),
            Some(node_type),
            "{name}: {r:?}"
        );
    }
}

#[test]
fn qualified_symbols_narrow_by_parent_or_module() {
    let (_d, e) = fixture();
    for form in ["AuthController.validate", "AuthController::validate"] {
        let r = q(&e, sym(form));
        assert_eq!(paths(&r), ["src/auth/controller.ts"], "{form}");
    }
    let r = q(&e, sym("User::validate"));
    assert_eq!(paths(&r), ["src/models.rs"]);
    let r = q(&e, sym("strings.parse_expr"));
    assert_eq!(paths(&r), ["src/util/strings.py"]);
    let r = q(&e, sym("util.strings.helper"));
    assert_eq!(paths(&r), ["src/util/strings.py"]);
}

#[test]
fn text_search_splits_identifiers_and_ranks_names_first() {
    let (_d, e) = fixture();
    let r = q(&e, pat("parse"));
    let first = &r.handles[0];
    assert!(
        first.preview.starts_with("class ParseError")
            || first.preview.starts_with("def parse_expr"),
        "{r:?}"
    );
    assert!(
        r.handles
            .iter()
            .any(|h| h.preview.starts_with("def parse_expr"))
    );
    assert!(
        r.handles
            .iter()
            .any(|h| h.preview.starts_with("class ParseError"))
    );
    // Deterministic.
    assert_eq!(q(&e, pat("parse")), r);
    // Phrases and prefixes.
    let r = q(&e, pat("\"installer script\""));
    assert_eq!(r.handles[0].file_path, "docs/guide.md");
    let r = q(&e, pat("authentic*"));
    assert!(!r.handles.is_empty());
}

/// A word that is the start of an identifier but not a whole word of it
/// (identifiers are indexed whole and by their parts) matches as a prefix,
/// but only when no unit holds any word whole: whole words keep their
/// answers.
#[test]
fn a_partial_identifier_matches_as_a_prefix_only_when_nothing_matches_whole() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(
        root,
        "probes.py",
        "def batch_probe_1_fn():\n    return 1\n\n\ndef probes_total():\n    return 2\n\n\ndef parseHeaderLine(x):\n    return x\n",
    );
    let e = Engine::open(root, EngineOptions::default()).unwrap();
    e.index(None, &NoProgress).unwrap();
    let names = |r: &QueryResult| -> Vec<String> {
        r.handles.iter().filter_map(|h| h.name.clone()).collect()
    };
    // snake_case and camelCase prefixes of one identifier.
    let r = q(&e, pat("batch_probe"));
    assert_eq!(names(&r), ["batch_probe_1_fn"], "{r:?}");
    assert_eq!(r.total_matches, 1);
    // The answer says how it matched.
    assert!(
        r.match_note
            .as_deref()
            .is_some_and(|n| n.contains("start with")),
        "{r:?}"
    );
    assert_eq!(names(&q(&e, pat("parseHeader"))), ["parseHeaderLine"]);
    // Several words: no unit starts with both, so units with either.
    let r = q(&e, pat("probes_tot parseHead"));
    assert_eq!(r.total_matches, 2, "{r:?}");
    // `probe` is a whole word (a part of `batch_probe_1_fn`): `probes_total`,
    // which it only starts, is not added.
    let r = q(&e, pat("probe"));
    assert_eq!(names(&r), ["batch_probe_1_fn"]);
    assert!(r.match_note.is_none(), "{r:?}");
    // The same through the general evaluator (a glob and a DSL union).
    let r = q(
        &e,
        QueryParams {
            query: Some("(union (grep \"batch_probe\") (grep \"nothing_like_it\"))".into()),
            ..Default::default()
        },
    );
    assert_eq!(names(&r), ["batch_probe_1_fn"], "{r:?}");
    assert!(r.match_note.is_some(), "{r:?}");
    // Quoted text stays a phrase; words under 3 characters stay whole.
    assert!(q(&e, pat("\"batch_probe\"")).handles.is_empty());
    assert!(q(&e, pat("pa")).handles.is_empty());
}

#[test]
fn hostile_text_is_literal_and_never_an_error() {
    let (_d, e) = fixture();
    let long = "token ".repeat(2000);
    let hostile = [
        "self.path",
        "foo::bar",
        "a,b",
        "\"quoted\"",
        "*",
        "NEAR",
        "AND",
        "OR NOT",
        "(",
        "unbalanced (",
        "\"unterminated",
        "🎉 emoji 🎉",
        "col:value",
        "^start",
        "-minus +plus",
        "{braces}",
        "'single'",
        "\\",
        "NEAR(a b, 3)",
        long.as_str(),
    ];
    for text in hostile {
        let r = e.query(&pat(text));
        assert!(r.is_ok(), "{text:?}: {r:?}");
        let r = e.query(&QueryParams {
            patterns: Some(vec![text.into(), "x".into()]),
            match_mode: Some(MatchMode::All),
            ..Default::default()
        });
        assert!(r.is_ok(), "{text:?}: {r:?}");
        assert!(e.query(&sym(text)).is_ok(), "{text:?}");
    }
    let r = q(&e, pat("req.headers.token"));
    assert_eq!(r.handles[0].file_path, "src/auth/controller.ts");
}

#[test]
fn patterns_any_and_all() {
    let (_d, e) = fixture();
    let any = q(
        &e,
        QueryParams {
            patterns: Some(vec!["installer".into(), "strip".into()]),
            match_mode: Some(MatchMode::Any),
            ..Default::default()
        },
    );
    let p = paths(&any);
    assert!(
        p.contains(&"docs/guide.md".to_string()) && p.contains(&"src/util/strings.py".to_string())
    );
    let all = q(
        &e,
        QueryParams {
            patterns: Some(vec!["token".into(), "length".into()]),
            match_mode: Some(MatchMode::All),
            glob: Some("src/**/*.ts".into()),
            ..Default::default()
        },
    );
    assert_eq!(all.handles.len(), 1);
    assert!(
        all.handles[0]
            .preview
            .starts_with("export function validateToken")
    );
}

#[test]
fn parent_section_glob_kind_and_limit() {
    let (_d, e) = fixture();
    let members = q(
        &e,
        QueryParams {
            parent: Some("AuthController".into()),
            ..Default::default()
        },
    );
    let names: Vec<&str> = members
        .handles
        .iter()
        .map(|h| h.preview.split('(').next().unwrap())
        .collect();
    assert_eq!(names, ["authenticate", "validate"]);
    let one = q(
        &e,
        QueryParams {
            parent: Some("User".into()),
            symbol: Some("validate".into()),
            ..Default::default()
        },
    );
    assert_eq!(paths(&one), ["src/models.rs"]);

    let sec = q(
        &e,
        QueryParams {
            section: Some("Installation".into()),
            ..Default::default()
        },
    );
    assert_eq!(sec.handles[0].node_type, "section");
    assert_eq!(sec.handles[0].line_range, [5, 11]);
    let nested = q(
        &e,
        QueryParams {
            section: Some("Installation > Linux".into()),
            ..Default::default()
        },
    );
    assert_eq!(nested.handles[0].line_range, [9, 11]);

    let globbed = q(
        &e,
        QueryParams {
            symbol: Some("validate".into()),
            glob: Some("**/*.rs".into()),
            ..Default::default()
        },
    );
    assert_eq!(paths(&globbed), ["src/models.rs"]);

    let defs = q(
        &e,
        QueryParams {
            pattern: Some("authenticate".into()),
            kind: Some(QueryKind::Definition),
            ..Default::default()
        },
    );
    assert!(
        defs.handles
            .iter()
            .all(|h| h.node_type != "chunk" && h.node_type != "file")
    );

    let limited = q(
        &e,
        QueryParams {
            pattern: Some("return".into()),
            limit: Some(2),
            ..Default::default()
        },
    );
    assert_eq!(limited.handles.len(), 2);
    assert!(limited.total_matches > 2);
    assert!(limited.truncated);
    let clamped = q(
        &e,
        QueryParams {
            pattern: Some("return".into()),
            limit: Some(0),
            ..Default::default()
        },
    );
    assert_eq!(clamped.handles.len(), 1);
    let sum: u64 = limited
        .handles
        .iter()
        .map(|h| u64::from(h.token_count))
        .sum();
    assert_eq!(limited.total_tokens, sum);
}

#[test]
fn references_are_call_sites_with_limit_glob_and_parent() {
    let (_d, e) = fixture();
    let refs = |params: QueryParams| {
        q(
            &e,
            QueryParams {
                kind: Some(QueryKind::Reference),
                ..params
            },
        )
    };
    let all = refs(sym("authenticate"));
    let sites = all.ref_handles.clone().unwrap();
    assert_eq!(sites.len(), 3);
    assert_eq!(all.total_matches, 3);
    let first = &sites[0];
    assert_eq!(first.file_path, "src/routes/admin.ts");
    assert_eq!(first.line_range, [4, 4]);
    assert_eq!(first.qualifier.as_deref(), Some("authController"));
    assert_eq!(first.ref_type, "call");
    assert_eq!(first.preview, "return authController.authenticate(req);");
    assert_eq!(
        &ADMIN[first.span.start..first.span.end],
        "authController.authenticate"
    );
    // The enclosing unit is a real handle, returned among `handles` too.
    assert!(all.handles.iter().any(
        |h| h.id == first.source_handle && h.preview.starts_with("export function adminLogin")
    ));

    let limited = refs(QueryParams {
        limit: Some(1),
        ..sym("authenticate")
    });
    assert_eq!(limited.ref_handles.unwrap().len(), 1);
    assert_eq!(limited.total_matches, 3);
    assert!(limited.truncated);

    let login_only = refs(QueryParams {
        glob: Some("src/routes/login.ts".into()),
        ..sym("authenticate")
    });
    let lines: Vec<u32> = login_only
        .ref_handles
        .unwrap()
        .iter()
        .map(|r| r.line_range[0])
        .collect();
    assert_eq!(lines, [6, 7]);

    let in_admin = refs(QueryParams {
        parent: Some("adminLogin".into()),
        ..sym("authenticate")
    });
    assert_eq!(in_admin.ref_handles.unwrap().len(), 1);

    let imports = refs(sym("AuthController"));
    let kinds: Vec<String> = imports
        .ref_handles
        .unwrap()
        .iter()
        .map(|r| r.ref_type.clone())
        .collect();
    assert!(
        kinds.contains(&"import".to_string())
            && kinds.contains(&"call".to_string())
            && kinds.contains(&"type_ref".to_string()),
        "{kinds:?}"
    );

    // A bare lookup takes the indexed page-and-count path; a glob that keeps
    // everything takes the general one. Same page, same order, same count
    // (exact-case spellings first: `authController` the variable is not
    // `AuthController` the class).
    for (name, limit) in [
        ("AuthController", 16),
        ("authcontroller", 2),
        ("authenticate", 2),
    ] {
        let plain = refs(QueryParams {
            limit: Some(limit),
            ..sym(name)
        });
        let general = refs(QueryParams {
            limit: Some(limit),
            glob: Some("**".into()),
            ..sym(name)
        });
        assert_eq!(plain, general, "{name}");
    }
}

#[test]
fn dsl_forms_compose() {
    let (_d, e) = fixture();
    let dsl = |text: &str| {
        q(
            &e,
            QueryParams {
                query: Some(text.into()),
                ..Default::default()
            },
        )
    };
    assert!(dsl(r#"(grep "installer")"#).handles[0].file_path == "docs/guide.md");
    assert!(
        dsl(r#"(code "parse_exp")"#).handles[0]
            .preview
            .starts_with("def parse_expr(text):")
    );
    assert!(dsl(r#"(definition "parse_exp")"#).handles.is_empty());
    assert_eq!(dsl(r#"(definition "parse_expr")"#).handles.len(), 1);
    assert_eq!(dsl(r#"(references "parse_expr")"#).handles.len(), 1);
    assert_eq!(dsl(r#"(section "Usage")"#).handles[0].line_range, [13, 15]);
    let file = dsl(r#"(file "src/models.rs")"#);
    assert_eq!(file.handles[0].node_type, "file");
    let text = e.expand(&[file.handles[0].id.as_str()]).unwrap();
    assert_eq!(text[0].content, MODELS);
    assert_eq!(dsl(r#"(children "AuthController")"#).handles.len(), 2);
    assert_eq!(dsl(r#"(children-named "User" "new")"#).handles.len(), 1);
    let r = dsl(r#"(in-file "src/**/*.ts" (intersect (grep "token") (code "validateToken")))"#);
    assert_eq!(r.handles.len(), 1);
    let r = dsl(r#"(union (code "Color") (code "MAX_USERS"))"#);
    assert_eq!(r.handles.len(), 2);
    let r = dsl(r#"(limit 1 (grep "return"))"#);
    assert_eq!(r.handles.len(), 1);
    let r = dsl(
        r#"(limit 2 (union (in-file "**/*.py" (grep "return")) (in-file "**/*.rs" (code "new"))))"#,
    );
    assert_eq!(r.handles.len(), 2);
}

#[test]
fn errors_are_typed() {
    let (dir, e) = fixture();
    assert!(matches!(
        e.query(&QueryParams::default()),
        Err(CanopyError::Validation(_))
    ));
    let parse = e
        .query(&QueryParams {
            query: Some("(grep \"x\" (code".into()),
            ..Default::default()
        })
        .unwrap_err();
    assert!(
        matches!(parse, CanopyError::QueryParse { position: 10, ref message } if message.contains("expected ')' to close (grep")),
        "{parse:?}"
    );
    let glob = e
        .query(&QueryParams {
            pattern: Some("x".into()),
            glob: Some("src/{a".into()),
            ..Default::default()
        })
        .unwrap_err();
    assert!(matches!(glob, CanopyError::GlobPattern { .. }));
    for outside in ["../**/*.rs", "/etc/**"] {
        let err = e
            .query(&QueryParams {
                pattern: Some("x".into()),
                glob: Some(outside.into()),
                ..Default::default()
            })
            .unwrap_err();
        assert!(
            matches!(err, CanopyError::PathOutsideRepo(_)),
            "{outside}: {err:?}"
        );
    }
    let err = e
        .query(&QueryParams {
            query: Some("(file \"../secret.txt\")".into()),
            ..Default::default()
        })
        .unwrap_err();
    assert!(matches!(err, CanopyError::PathOutsideRepo(_)));
    assert!(matches!(
        e.expand(&["h00000000000000000000dead"]).unwrap_err(),
        CanopyError::HandleNotFound { .. }
    ));
    let h = q(&e, sym("helper")).handles.remove(0);
    write(dir.path(), "src/util/strings.py", "# gone\n");
    let stale = e.expand(&[h.id.as_str()]).unwrap_err();
    assert!(
        matches!(stale, CanopyError::StaleIndex { .. }),
        "stale is never 'not found': {stale:?}"
    );
}

#[test]
fn expansion_keeps_request_order_and_dedupes() {
    let (_d, e) = fixture();
    let a = q(&e, sym("Color")).handles.remove(0).id;
    let b = q(&e, sym("helper")).handles.remove(0).id;
    let out = e.expand(&[b.as_str(), a.as_str(), b.as_str()]).unwrap();
    let ids: Vec<_> = out.iter().map(|x| x.handle_id.clone()).collect();
    assert_eq!(ids, [b, a]);
}

#[test]
fn expand_budget_expands_in_rank_order_while_it_fits() {
    let (_d, e) = fixture();
    let params = |budget: u64| QueryParams {
        symbol: Some("validate".into()),
        expand_budget: Some(budget),
        ..Default::default()
    };
    let plain = q(
        &e,
        QueryParams {
            expand_budget: None,
            ..params(0)
        },
    );
    let first = u64::from(plain.handles[0].token_count);
    let everything: u64 = plain.total_tokens;

    let all = q(&e, params(everything));
    assert!(all.auto_expanded);
    assert_eq!(all.expanded_handle_ids.len(), all.handles.len());
    assert!(all.expand_note.is_none());
    assert!(all.handles.iter().all(|h| h.content.is_some()));

    let some = q(&e, params(first));
    assert!(!some.auto_expanded);
    assert_eq!(some.expanded_handle_ids[0], some.handles[0].id);
    assert!(some.handles[0].content.is_some());
    assert!(
        some.expand_note
            .as_deref()
            .unwrap()
            .contains("expand_budget")
    );

    let none = q(&e, params(0));
    assert!(
        none.expanded_handle_ids.is_empty() && none.handles.iter().all(|h| h.content.is_none())
    );
}

#[test]
fn lazy_indexing_answers_targeted_queries_first_then_completes() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let areas = [
        "billing", "shipping", "catalog", "search", "accounts", "reviews",
    ];
    for i in 0..3000 {
        let area = areas[i % areas.len()];
        write(
            root,
            &format!("services/{area}/handlers/h{i}.py"),
            format!("def handle_{i}(event):\n    return event.get('{area}_{i}')\n"),
        );
    }
    write(
        root,
        "services/payments/processor.py",
        "class PaymentProcessor:\n    def charge(self, amount):\n        return amount\n",
    );
    let e = Engine::open(root, EngineOptions::default()).unwrap();
    let first = q(&e, sym("PaymentProcessor"));
    assert_eq!(first.handles[0].file_path, "services/payments/processor.py");
    let coverage = first
        .index_coverage
        .expect("coverage reported while partial");
    assert!(
        coverage < 0.5,
        "only targeted files are indexed first: {coverage}"
    );
    let status = e.status().unwrap();
    assert!(status.index_coverage < 1.0);

    e.wait_for_background_index().unwrap();
    let later = q(&e, sym("handle_2999"));
    assert_eq!(
        later.handles[0].file_path,
        "services/reviews/handlers/h2999.py"
    );
    assert!(later.index_coverage.is_none());
    let status = e.status().unwrap();
    assert_eq!(status.files_indexed, 3001);
    assert_eq!(status.index_coverage, 1.0);
}

#[test]
fn substring_symbols_agree_between_sqlite_and_the_name_catalog() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(
        root,
        "src/fetch.py",
        "def fetch(): pass\n\ndef prefetch(): pass\n\ndef refetch_all(): pass\n\nclass AutoFetcher:\n    def run(self): pass\n\ndef unrelated(): pass\n",
    );
    let engine = Engine::open(root, EngineOptions::default()).unwrap();
    engine.index(None, &NoProgress).unwrap();
    let names = |r: &QueryResult| -> Vec<String> {
        r.handles
            .iter()
            .map(|h| h.preview.split(['(', ':']).next().unwrap().to_string())
            .collect()
    };
    // The first substring search of a connection scans in SQLite; later ones
    // use the in-memory name catalog. Both must give the same answer, shortest
    // (closest) names first after the exact match.
    let first = q(&engine, sym("fetch"));
    let second = q(&engine, sym("fetch"));
    assert_eq!(first, second);
    assert_eq!(
        names(&first),
        [
            "def fetch",
            "def prefetch",
            "class AutoFetcher",
            "def refetch_all"
        ]
    );
    // A re-index by another connection is seen: the catalog is rebuilt.
    write(root, "src/more.py", "def do_fetch_now(): pass\n");
    engine.index(None, &NoProgress).unwrap();
    let third = q(&engine, sym("fetch"));
    assert!(
        names(&third).contains(&"def do_fetch_now".to_string()),
        "{:?}",
        names(&third)
    );
    assert_eq!(q(&engine, sym("fetch")), third);
}

#[test]
fn plain_text_search_counts_every_match_and_pages_like_the_general_path() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let mut text = String::new();
    for i in 0..2_100 {
        text.push_str(&format!("def widget_{i}():\n    return {i}\n\n"));
    }
    write(root, "src/widgets.py", &text);
    let engine = Engine::open(root, EngineOptions::default()).unwrap();
    engine.index(None, &NoProgress).unwrap();
    let r = q(&engine, pat("widget"));
    // True count, beyond the 2,000 candidates a filtered search considers.
    assert_eq!(r.total_matches, 2_100);
    assert!(r.truncated);
    assert_eq!(r.handles.len(), 16);
    // The same page as the general evaluator (taken when a result set is kept).
    let general = q(
        &engine,
        QueryParams {
            pattern: Some("widget".into()),
            result_set: Some(true),
            ..Default::default()
        },
    );
    assert!(general.result_set.is_some());
    assert_eq!(general.handles, r.handles);
    assert_eq!(general.total_matches, 2_000);
    // No match at all.
    let none = q(&engine, pat("zzzqqq"));
    assert_eq!((none.total_matches, none.truncated), (0, false));
    assert!(none.handles.is_empty());
}

/// Issue 15 item 7: in `x.strip().split()` both calls start at the byte of
/// `x`; a union of their references must keep both, and so must an
/// intersection with a set that holds both.
#[test]
fn references_starting_at_the_same_byte_are_all_kept() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "clean.py",
        "def clean(x):\n    return x.strip().split()\n",
    );
    let e = Engine::open(dir.path(), EngineOptions::default()).unwrap();
    e.index(None, &NoProgress).unwrap();
    let dsl = |text: &str| {
        q(
            &e,
            QueryParams {
                query: Some(text.into()),
                ..Default::default()
            },
        )
    };
    let names = |r: &QueryResult| {
        let mut n: Vec<String> = r
            .ref_handles
            .iter()
            .flatten()
            .map(|h| h.name.clone())
            .collect();
        n.sort();
        n
    };
    let both = dsl(r#"(union (references "strip") (references "split"))"#);
    assert_eq!(names(&both), ["split", "strip"], "{both:?}");
    let again = dsl(
        r#"(intersect (union (references "strip") (references "split")) (union (references "split") (references "strip")))"#,
    );
    assert_eq!(names(&again), ["split", "strip"], "{again:?}");
}

/// Issue 15 item 3: repeated patterns are searched once, too many distinct
/// ones or too many words are refused with a clear error, and a request
/// that runs past the time budget is stopped.
#[test]
fn repeated_and_numerous_terms_are_bounded() {
    let (_d, e) = fixture();
    let one = q(&e, pat("token"));
    let many = q(
        &e,
        QueryParams {
            patterns: Some(vec!["token".to_string(); 1000]),
            ..Default::default()
        },
    );
    assert_eq!(paths(&one), paths(&many));
    assert_eq!(one.total_matches, many.total_matches);
    // Case and surrounding spaces do not make a pattern distinct.
    let mixed: Vec<String> = (0..500)
        .map(|i| {
            if i % 2 == 0 {
                " Token ".into()
            } else {
                "token".into()
            }
        })
        .collect();
    let same = q(
        &e,
        QueryParams {
            patterns: Some(mixed),
            ..Default::default()
        },
    );
    assert_eq!(paths(&one), paths(&same));

    let distinct: Vec<String> = (0..=canopy_core::query::MAX_PATTERNS)
        .map(|i| format!("word{i}"))
        .collect();
    let err = e
        .query(&QueryParams {
            patterns: Some(distinct),
            ..Default::default()
        })
        .unwrap_err();
    assert!(
        matches!(err, CanopyError::Validation(ref m) if m.contains("at most 32")),
        "{err}"
    );

    let long: String = (0..=canopy_core::query::MAX_PATTERN_TERMS)
        .map(|i| format!("w{i} "))
        .collect();
    let err = e.query(&pat(&long)).unwrap_err();
    assert!(
        matches!(err, CanopyError::Validation(ref m) if m.contains("distinct words")),
        "{err}"
    );
    // The same long text is fine as an evidence-pack question.
    let pack = e
        .evidence_pack(
            &canopy_core::pack::PackParams {
                query: pat(&format!("{long} token")),
                ..Default::default()
            },
            None,
        )
        .unwrap();
    assert!(pack.handles.len() <= 8);
}

#[test]
fn a_request_past_its_time_budget_is_stopped_with_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..200 {
        let body: String = (0..10)
            .map(|k| format!("def marker_{i}_{k}(x):\n    return x + {k}  # marker\n\n"))
            .collect();
        write(dir.path(), &format!("pkg/m{i}.py"), &body);
    }
    let options = EngineOptions {
        time_budget: std::time::Duration::ZERO,
        ..EngineOptions::default()
    };
    let stopped = Engine::open(dir.path(), options).unwrap();
    stopped.index(None, &NoProgress).unwrap();
    let err = stopped.query(&pat("marker")).unwrap_err();
    assert!(matches!(err, CanopyError::TimeBudget { .. }), "{err}");
    assert_eq!(err.code(), "TimeBudgetExceeded");
    // The connection is usable again afterwards: the same query on an
    // engine with the default budget over the same index answers.
    let normal = Engine::open(dir.path(), EngineOptions::default()).unwrap();
    let r = normal.query(&pat("marker")).unwrap();
    assert_eq!(r.total_matches, 2000);
    let err = stopped.query(&sym("marker_1_1")).map(|_| ()).err();
    // Tiny lookups may finish inside the first progress interval; either
    // way nothing is left half-open: a later full query still fails cleanly.
    if let Some(err) = err {
        assert!(matches!(err, CanopyError::TimeBudget { .. }), "{err}");
    }
    assert!(matches!(
        stopped.query(&pat("marker")).unwrap_err(),
        CanopyError::TimeBudget { .. }
    ));
}

/// A repository with more matching units than one search's candidate cap
/// (2,000): 3,000 short functions mention `model` (every other one `field`
/// too); `narrow/fields.py` has 5 long functions that mention `model` once,
/// so they rank below all the short ones.
fn crowded() -> (tempfile::TempDir, Engine) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    for file in 0..30 {
        let mut text = String::new();
        for f in 0..100 {
            let extra = if (file * 100 + f) % 2 == 0 {
                " + field"
            } else {
                ""
            };
            text.push_str(&format!(
                "def crowd_{file}_{f}(model, field):\n    return build_model(model){extra}\n\n"
            ));
        }
        write(root, &format!("crowd/m{file:02}.py"), &text);
    }
    let mut narrow = String::new();
    for f in 0..5 {
        narrow.push_str(&format!("def narrow_{f}(value):\n"));
        for line in 0..40 {
            narrow.push_str(&format!("    value = value + {line}  # arithmetic step\n"));
        }
        narrow.push_str("    return value  # the model field is unused\n\n");
    }
    write(root, "narrow/fields.py", &narrow);
    let engine = Engine::open(root, EngineOptions::default()).unwrap();
    engine.index(None, &NoProgress).unwrap();
    (dir, engine)
}

#[test]
fn filtered_text_queries_are_exact_past_the_candidate_cap() {
    let (_dir, engine) = crowded();
    // A glob is applied inside the search: the narrow file's matches are
    // found although 3,000 better-ranked units elsewhere match too.
    let r = q(
        &engine,
        QueryParams {
            pattern: Some("model".into()),
            glob: Some("narrow/**".into()),
            limit: Some(50),
            ..Default::default()
        },
    );
    assert_eq!(r.total_matches, 5, "{:?}", paths(&r));
    assert_eq!(r.handles.len(), 5);
    assert!(!r.truncated);
    assert!(paths(&r).iter().all(|p| p == "narrow/fields.py"));

    // match=all counts every unit with both words, not the overlap of two
    // capped candidate lists: 1,500 crowd functions + the 5 narrow ones.
    let r = q(
        &engine,
        QueryParams {
            patterns: Some(vec!["model".into(), "field".into()]),
            match_mode: Some(MatchMode::All),
            ..Default::default()
        },
    );
    assert_eq!(
        r.total_matches,
        3_000 + 5,
        "every crowd function names both parameters"
    );
    let r = q(
        &engine,
        QueryParams {
            patterns: Some(vec!["model".into(), "unused".into()]),
            match_mode: Some(MatchMode::All),
            ..Default::default()
        },
    );
    assert_eq!(r.total_matches, 5);
    assert!(paths(&r).iter().all(|p| p == "narrow/fields.py"));

    // The same through the DSL, with a glob around an intersection.
    let r = q(
        &engine,
        QueryParams {
            query: Some(
                r#"(in-file "narrow/*.py" (intersect (grep "model") (grep "field")))"#.into(),
            ),
            ..Default::default()
        },
    );
    assert_eq!(r.total_matches, 5);

    // References under a glob are searched in the glob's files only.
    let r = q(
        &engine,
        QueryParams {
            query: Some(r#"(in-file "crowd/m29.py" (references "build_model"))"#.into()),
            limit: Some(200),
            ..Default::default()
        },
    );
    let refs = r.ref_handles.expect("references");
    assert!(
        !refs.is_empty(),
        "references in the last file were lost to the cap"
    );
    assert!(refs.iter().all(|h| h.file_path == "crowd/m29.py"));

    // Where a cap remains (a name prefix shared by 3,000 symbols), the
    // answer says so instead of presenting a lower bound as the total.
    let r = q(
        &engine,
        QueryParams {
            query: Some(r#"(code "crowd_")"#.into()),
            ..Default::default()
        },
    );
    assert!(r.truncated);
    assert!(r.candidates_capped, "a capped search must be flagged");
}

/// 3,000 handler files and one payments file, indexed only under
/// `services/billing/**` (a partial index).
fn partially_indexed(options: EngineOptions) -> (tempfile::TempDir, Engine) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let areas = [
        "billing", "shipping", "catalog", "search", "accounts", "reviews",
    ];
    for i in 0..3000 {
        let area = areas[i % areas.len()];
        write(
            root,
            &format!("services/{area}/handlers/h{i}.py"),
            format!("def handle_{i}(event):\n    return event.get('{area}_{i}')\n"),
        );
    }
    write(
        root,
        "services/payments/processor.py",
        "class PaymentProcessor:\n    def charge(self, amount):\n        return amount\n",
    );
    let e = Engine::open(root, options).unwrap();
    e.index(Some("services/billing/**"), &NoProgress).unwrap();
    (dir, e)
}

#[test]
fn a_partial_index_says_so_and_indexes_what_a_query_points_at_first() {
    // Coverage is the share of the repository's files, not 0.
    let (_dir, e) = partially_indexed(EngineOptions {
        auto_index: false,
        ..EngineOptions::default()
    });
    let status = e.status().unwrap();
    assert_eq!(status.files_indexed, 500);
    let expected = 500.0 / 3001.0;
    assert!(
        (status.index_coverage - expected).abs() < 0.01,
        "coverage {} with 500 of 3,001 files indexed",
        status.index_coverage
    );
    // An evidence pack from a partial index says so and never says stop,
    // however sure it is of what it found.
    let pack = e
        .evidence_pack(
            &canopy_core::pack::PackParams {
                query: QueryParams {
                    pattern: Some("handle_6 event billing_6".into()),
                    ..Default::default()
                },
                ..Default::default()
            },
            None,
        )
        .unwrap();
    assert!(pack.index_coverage.is_some_and(|c| c < 1.0), "{pack:?}");
    assert!(!pack.guidance.stop_querying, "{:?}", pack.guidance);
    assert_ne!(pack.guidance.confidence_band, "high");
    assert!(pack.guidance.next_step.contains("still being built"));
    let r = q(&e, sym("handle_6"));
    assert!(r.index_coverage.is_some_and(|c| c < 1.0));

    // With indexing on, a query whose glob points at files not indexed yet
    // indexes them before answering, whatever the background is doing.
    let (_dir, e) = partially_indexed(EngineOptions::default());
    let r = q(
        &e,
        QueryParams {
            pattern: Some("event".into()),
            glob: Some("services/reviews/handlers/h2999.py".into()),
            ..Default::default()
        },
    );
    assert_eq!(paths(&r), ["services/reviews/handlers/h2999.py"]);
    let r = q(&e, sym("PaymentProcessor"));
    assert_eq!(r.handles[0].file_path, "services/payments/processor.py");
    e.wait_for_background_index().unwrap();
    let status = e.status().unwrap();
    assert_eq!(status.files_indexed, 3001);
    assert_eq!(status.index_coverage, 1.0);
    assert_eq!(e.orphan_rows().unwrap(), 0);
    assert_eq!(e.totals_drift().unwrap(), 0);
}
