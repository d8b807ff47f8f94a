//! Resolution fixtures: every file under `tests/fixtures/graph/<language>/`
//! is indexed, and each line annotated `calls: A B` (after `#` or `//`)
//! must have resolved call edges to exactly the units with those qualified
//! names; `calls: ?` means no call on the line resolves (external or
//! unknown receiver); `calls: either A B` means the line's call may mean
//! either (one site, ambiguous between exactly those, as a Python call on
//! a value of `A | B`). A line annotated `refs: A B` must have resolved references
//! that are no calls, imports or type uses (a name read as a value, a
//! documentation link) to exactly those units. A new case is a new
//! annotated line.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use canopy_core::graph::nav::TargetMatch;
use canopy_core::graph::ops::PathScope;
use canopy_core::index::NoProgress;
use canopy_core::{Engine, EngineOptions};

fn fixture(lang: &str) -> (tempfile::TempDir, PathBuf) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/graph")
        .join(lang);
    let tmp = tempfile::tempdir().expect("tempdir");
    let dst = tmp.path().join(lang);
    copy_dir(&src, &dst);
    (tmp, dst)
}

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

/// (path, line) → expected callee qualified names (empty: none resolves).
fn annotations(root: &Path) -> BTreeMap<(String, u32), BTreeSet<String>> {
    annotated(root, "calls: ")
}

/// (path, line) → the qualified names a line annotated with `tag` names.
fn annotated(root: &Path, tag: &str) -> BTreeMap<(String, u32), BTreeSet<String>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).expect("read") {
            let p = e.expect("entry").path();
            if p.is_dir() {
                if p.file_name().is_some_and(|n| n != ".canopy") {
                    stack.push(p);
                }
                continue;
            }
            let rel = p
                .strip_prefix(root)
                .expect("under root")
                .to_string_lossy()
                .replace('\\', "/");
            let text = std::fs::read_to_string(&p).expect("utf-8 fixture");
            for (i, line) in text.lines().enumerate() {
                let Some((_, ann)) = line.split_once(tag) else {
                    continue;
                };
                let (ann, either) = match ann.trim_start().strip_prefix("either ") {
                    Some(rest) => (rest, EITHER),
                    None => (ann, ""),
                };
                let names: BTreeSet<String> = ann
                    .split_whitespace()
                    .filter(|n| *n != "?")
                    .map(|n| format!("{either}{n}"))
                    .collect();
                out.insert((rel.clone(), i as u32 + 1), names);
            }
        }
    }
    out
}

/// Marks a candidate of an ambiguous call (`calls: either A B`).
const EITHER: &str = "either:";

/// (path, line) → qualified names of resolved callees, and of ambiguous
/// ones after [`EITHER`].
fn resolved_calls(engine: &Engine) -> BTreeMap<(String, u32), BTreeSet<String>> {
    resolved_of_kind(engine, "call")
}

/// (path, line) → qualified names of the edges of `kind` (as
/// [`resolved_calls`]).
fn resolved_of_kind(engine: &Engine, kind: &str) -> BTreeMap<(String, u32), BTreeSet<String>> {
    let edges = engine.graph(|g| g.export_edges()).expect("export");
    let mut out: BTreeMap<(String, u32), BTreeSet<String>> = BTreeMap::new();
    for e in edges {
        let mark = match e.status.as_str() {
            "resolved" => "",
            "ambiguous" => EITHER,
            _ => continue,
        };
        if e.kind == kind {
            out.entry((e.path, e.line))
                .or_default()
                .insert(format!("{mark}{}", e.dst_qualified.unwrap_or_default()));
        }
    }
    out
}

fn check(lang: &str) {
    let (_tmp, root) = fixture(lang);
    let engine = Engine::open(&root, EngineOptions::default()).expect("open");
    engine.index(None, &NoProgress).expect("index");
    let expected = annotations(&root);
    assert!(expected.len() >= 5, "{lang}: too few annotations");
    let got = resolved_calls(&engine);
    let mut failures = Vec::new();
    let refs = (
        annotated(&root, "refs: "),
        resolved_of_kind(&engine, "other"),
    );
    for (expected, got) in [(&expected, &got), (&refs.0, &refs.1)] {
        for (site, want) in expected {
            let have = got.get(site).cloned().unwrap_or_default();
            if &have != want {
                failures.push(format!(
                    "{}:{}: expected {want:?}, resolved {have:?}",
                    site.0, site.1
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{lang}:\n{}", failures.join("\n"));
}

#[test]
fn python_annotations_hold() {
    check("python");
}

#[test]
fn typescript_annotations_hold() {
    check("typescript");
}

#[test]
fn rust_annotations_hold() {
    check("rust");
}

#[test]
fn go_annotations_hold() {
    check("go");
}

/// A Go module whose root folder is a package (`go_module/lib.go`),
/// imported by the module path itself.
#[test]
fn go_module_annotations_hold() {
    check("go_module");
}

#[test]
fn editing_one_file_re_resolves_the_files_that_used_it() {
    let (_tmp, root) = fixture("python");
    let engine = Engine::open(&root, EngineOptions::default()).expect("open");
    engine.index(None, &NoProgress).expect("index");
    let before = resolved_calls(&engine);
    let site = ("app.py".to_string(), 15);
    assert_eq!(
        before.get(&site),
        Some(&BTreeSet::from(["Lexer.parse".to_string()]))
    );
    // A no-change run changes no edge.
    engine.index(None, &NoProgress).expect("index again");
    assert_eq!(resolved_calls(&engine), before);

    // Remove Lexer.parse in models.py: app.py (not re-parsed) must lose its edge.
    let models = root.join("pkg/models.py");
    let text = std::fs::read_to_string(&models).expect("read");
    let edited = text.replace("    def parse(self):\n        return None\n", "");
    assert_ne!(text, edited);
    std::fs::write(&models, edited).expect("write");
    let report = engine.index(None, &NoProgress).expect("reindex");
    assert_eq!(report.files_indexed, 1);
    let after = resolved_calls(&engine);
    assert_eq!(after.get(&site), None, "stale edge to a removed method");
    // The edge lists and the index of their targets agree after the edit.
    assert_eq!(engine.orphan_rows().expect("check"), 0);
    assert_eq!(engine.totals_drift().expect("check"), 0);
    // Edges into unchanged definitions of the edited file still resolve (followed by handle).
    assert_eq!(
        after.get(&("app.py".to_string(), 11)),
        Some(&BTreeSet::from(["Parser.parse".to_string()]))
    );

    // Add it back: the unresolved site resolves again.
    std::fs::write(&models, text).expect("write");
    engine.index(None, &NoProgress).expect("reindex");
    assert_eq!(resolved_calls(&engine).get(&site), before.get(&site));
    // Every edge is back as it was: the re-resolved files (their sites read
    // back from the store, not re-parsed) agree with the first full pass.
    assert_eq!(resolved_calls(&engine), before);
    assert_eq!(engine.orphan_rows().expect("check"), 0);
    assert_eq!(engine.totals_drift().expect("check"), 0);
}

/// (row id, qualified name) of every unit of `path`, by id.
fn unit_rows(root: &Path, path: &str) -> Vec<(i64, Option<String>)> {
    let db = rusqlite::Connection::open(root.join(".canopy/index.db")).expect("db");
    let mut stmt = db
        .prepare(
            "SELECT n.id, n.qualified_name FROM nodes n JOIN files f ON f.id = n.file_id
             WHERE f.path = ?1 ORDER BY n.id",
        )
        .expect("prepare");
    stmt.query_map([path], |r| Ok((r.get(0)?, r.get(1)?)))
        .expect("query")
        .collect::<Result<_, _>>()
        .expect("rows")
}

#[test]
fn an_edit_inside_a_body_keeps_unit_ids_so_edges_into_them_stay() {
    let (_tmp, root) = fixture("python");
    let engine = Engine::open(&root, EngineOptions::default()).expect("open");
    engine.index(None, &NoProgress).expect("index");
    let before = resolved_calls(&engine);
    let units_before = unit_rows(&root, "pkg/models.py");
    assert!(units_before.len() >= 8, "{units_before:?}");

    // Same units, same names, one body longer: the units keep their row ids.
    let models = root.join("pkg/models.py");
    let text = std::fs::read_to_string(&models).expect("read");
    let edited = text.replace(
        "    def step(self):\n        return 1\n",
        "    def step(self):\n        total = 1\n        return total\n",
    );
    assert_ne!(text, edited);
    std::fs::write(&models, &edited).expect("write");
    let report = engine.index(None, &NoProgress).expect("reindex");
    assert_eq!(report.files_indexed, 1);
    assert_eq!(unit_rows(&root, "pkg/models.py"), units_before);
    // The edited file's own sites below the edit moved down a line.
    let shifted = |calls: BTreeMap<(String, u32), BTreeSet<String>>| {
        calls
            .into_iter()
            .map(|((path, line), names)| {
                let moved = path == "pkg/models.py" && line > 6;
                ((path, if moved { line - 1 } else { line }), names)
            })
            .collect::<BTreeMap<_, _>>()
    };
    assert_eq!(shifted(resolved_calls(&engine)), before);

    // A unit added: new ids for the file, and edges into its other units
    // follow them by handle.
    let added = edited.replace(
        "class Lexer:\n",
        "class Lexer:\n    def reset(self):\n        return None\n\n",
    );
    std::fs::write(&models, added).expect("write");
    engine.index(None, &NoProgress).expect("reindex");
    let units_added = unit_rows(&root, "pkg/models.py");
    assert_eq!(units_added.len(), units_before.len() + 1);
    assert!(units_added[0].0 > units_before.last().expect("units").0);
    let outside = |calls: BTreeMap<(String, u32), BTreeSet<String>>| {
        calls
            .into_iter()
            .filter(|((path, _), _)| path != "pkg/models.py")
            .collect::<BTreeMap<_, _>>()
    };
    assert_eq!(outside(resolved_calls(&engine)), outside(before));
    // Other files' edge lists were rewritten to the new ids, and the index
    // of targets with them.
    assert_eq!(engine.orphan_rows().expect("check"), 0);
    assert_eq!(engine.totals_drift().expect("check"), 0);
}

#[test]
fn damaged_edge_rows_are_reported_and_repaired_by_reindexing() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path();
    std::fs::write(
        root.join("a.py"),
        "from b import target\n\n\ndef caller():\n    target()\n",
    )
    .expect("write");
    std::fs::write(root.join("b.py"), "def target():\n    return 1\n").expect("write");
    let engine = Engine::open(root, EngineOptions::default()).expect("open");
    engine.index(None, &NoProgress).expect("index");
    let callers = |engine: &Engine| {
        engine.graph(|g| {
            Ok(g.callers("target", 1, 50)?
                .nodes
                .iter()
                .map(|n| n.handle.file_path.clone())
                .collect::<Vec<_>>())
        })
    };
    assert_eq!(callers(&engine).expect("callers"), ["a.py"]);
    assert_eq!(engine.orphan_rows().expect("check"), 0);
    assert_eq!(engine.totals_drift().expect("check"), 0);

    let db = rusqlite::Connection::open(root.join(".canopy/index.db")).expect("db");
    let a_id: i64 = db
        .query_row("SELECT id FROM files WHERE path = 'a.py'", [], |r| r.get(0))
        .expect("a.py");
    // The index of targets loses a.py's row: the check sees it.
    let gone = db
        .execute("DELETE FROM edge_targets WHERE file_id = ?1", [a_id])
        .expect("delete");
    assert!(gone > 0);
    assert!(engine.orphan_rows().expect("check") > 0);
    // A row no list accounts for: seen too.
    db.execute(
        "INSERT INTO edge_targets(dst, file_id) SELECT id, ?1 + 1000 FROM nodes LIMIT 1",
        [a_id],
    )
    .expect("insert");
    let with_extra = engine.orphan_rows().expect("check");
    db.execute("DELETE FROM edge_targets WHERE file_id = ?1", [a_id + 1000])
        .expect("delete");
    assert!(with_extra > engine.orphan_rows().expect("check"));

    // A damaged list: a clear error naming the cure, never a panic or a
    // wrong answer.
    db.execute(
        "UPDATE edge_lists SET edges = x'01ffffff' WHERE file_id = ?1",
        [a_id],
    )
    .expect("damage");
    db.execute(
        "INSERT INTO edge_targets(dst, file_id) SELECT id, ?1 FROM nodes WHERE name = 'target'",
        [a_id],
    )
    .expect("insert");
    let err = callers(&engine).expect_err("damaged").to_string();
    assert!(
        err.contains("damaged") && err.contains("canopy invalidate"),
        "{err}"
    );
    assert!(engine.orphan_rows().is_err());
    drop(db);

    let report = engine
        .invalidate(Some("a.py"), &NoProgress)
        .expect("invalidate");
    assert_eq!(report.files_indexed, 1);
    assert_eq!(callers(&engine).expect("callers"), ["a.py"]);
    assert_eq!(engine.orphan_rows().expect("check"), 0);
    assert_eq!(engine.totals_drift().expect("check"), 0);
}

#[test]
fn answers_say_which_kind_of_empty_they_are() {
    let (_tmp, root) = fixture("python");
    let engine = Engine::open(&root, EngineOptions::default()).expect("open");
    engine.index(None, &NoProgress).expect("index");
    engine
        .graph(|g| {
            let callers = g.callers("Parser.parse", 2, 50)?;
            assert!(
                callers
                    .nodes
                    .iter()
                    .any(|n| n.qualified_name.as_deref() == Some("main"))
            );
            assert!(callers.empty.is_none());
            let none = g.callers("NoSuchThing.at_all", 1, 50)?;
            assert_eq!(
                none.empty,
                Some(canopy_core::graph::nav::Empty::TargetNotFound)
            );
            // `parse` names methods of two classes: the target is ambiguous.
            let amb = g.callers("parse", 1, 50)?;
            assert!(amb.candidates.len() >= 2 && amb.nodes.is_empty());
            assert_eq!(amb.total, amb.candidates.len());
            // The same when the ambiguous one is a path's end: the answer
            // counts the candidates it lists.
            let to = g.path("main", "parse")?;
            assert_eq!(to.candidates.len(), amb.candidates.len());
            assert_eq!(to.total, to.candidates.len());
            assert!(matches!(
                g.resolve_target("Lexer.tokens")?,
                TargetMatch::One(_)
            ));
            // A file path with its extension, then the qualified name.
            for t in ["pkg/models.py:Lexer.tokens", "pkg/models.Lexer.tokens"] {
                match g.resolve_target(t)? {
                    TargetMatch::One(n) => assert_eq!(n.file_path, "pkg/models.py", "{t}"),
                    other => panic!("{t}: {other:?}"),
                }
            }
            assert!(matches!(
                g.resolve_target("pkg/other.py:Lexer.tokens")?,
                TargetMatch::NotFound
            ));
            let callees = g.callees("main", 1, 50)?;
            assert!(
                callees
                    .nodes
                    .iter()
                    .any(|n| n.qualified_name.as_deref() == Some("make"))
            );
            assert!(callees.unresolved_count >= 1, "json.dumps stays unresolved");
            let unres = g.callers("dumps", 1, 50);
            assert!(unres.is_ok());
            Ok(())
        })
        .expect("graph");
}

#[test]
fn rust_paths_follow_the_crate_and_its_reexports() {
    let (_tmp, root) = fixture("rust");
    let engine = Engine::open(&root, EngineOptions::default()).expect("open");
    engine.index(None, &NoProgress).expect("index");
    let file_of = |m: TargetMatch| match m {
        TargetMatch::One(n) => n.file_path,
        _ => "not exactly one".to_string(),
    };
    engine
        .graph(|g| {
            // `pub use parser::Parser;` in lib.rs: the path a user of the crate writes.
            assert_eq!(
                file_of(g.resolve_target("graph_fixture::Parser")?),
                "src/parser.rs"
            );
            // An item written inside a macro body is a definition like any other.
            assert_eq!(
                file_of(g.resolve_target("graph_fixture::gated::spawn_task")?),
                "src/gated.rs"
            );
            let callers = g.callers("graph_fixture::gated::spawn_task", 1, 50)?;
            assert!(
                callers
                    .nodes
                    .iter()
                    .any(|n| n.qualified_name.as_deref() == Some("start")),
                "{callers:?}"
            );
            assert!(matches!(
                g.resolve_target("graph_fixture::no_such_thing")?,
                TargetMatch::NotFound
            ));
            Ok(())
        })
        .expect("graph");
}

#[test]
fn hierarchy_impact_dependencies_cycles_hotspots_unused() {
    use canopy_core::graph::ops::Level;
    let (_tmp, root) = fixture("python");
    let engine = Engine::open(&root, EngineOptions::default()).expect("open");
    engine.index(None, &NoProgress).expect("index");
    engine
        .graph(|g| {
            let names = |a: &canopy_core::graph::nav::GraphAnswer| -> Vec<String> {
                a.nodes
                    .iter()
                    .filter_map(|n| n.qualified_name.clone())
                    .collect()
            };
            assert_eq!(names(&g.implementations("Base", 10)?), vec!["Parser"]);
            assert_eq!(names(&g.implements("Parser", 10)?), vec!["Base"]);
            let h = g.type_hierarchy("Parser", 3, 10)?;
            assert!(h.nodes.iter().any(|n| n.edge_kind == "supertype"));

            let impact = g.impact("Base.step", 20)?;
            assert_eq!(names(&impact), vec!["Base.run"], "direct users must change");
            let review: Vec<String> = impact
                .review
                .iter()
                .filter_map(|n| n.qualified_name.clone())
                .collect();
            assert!(review.contains(&"Parser.parse".to_string()), "{review:?}");

            let deps = g.dependencies("app.py", Level::File, 10)?;
            let to: Vec<&str> = deps.edges.iter().map(|e| e.to.as_str()).collect();
            assert!(to.contains(&"pkg/models.py"), "{to:?}");
            let dependents = g.dependents("pkg", Level::Package, 10)?;
            assert_eq!(
                dependents
                    .nodes
                    .iter()
                    .map(|n| n.name.as_str())
                    .collect::<Vec<_>>(),
                vec!["."]
            );

            let cycles = g.circular_dependencies(Level::File, 10)?;
            assert_eq!(
                cycles.cycles,
                vec![vec![
                    "pkg/cycle_a.py".to_string(),
                    "pkg/cycle_b.py".to_string()
                ]]
            );
            assert!(
                g.circular_dependencies(Level::Package, 10)?
                    .cycles
                    .is_empty()
            );

            let hot = g.hotspots(3, PathScope::default())?;
            assert_eq!(hot.hotspots.len(), 3);
            assert!(
                hot.hotspots
                    .windows(2)
                    .all(|w| w[0].fan_in + w[0].fan_out >= w[1].fan_in + w[1].fan_out)
            );

            let unused = g.unused_symbols(false, PathScope::default(), 50)?;
            let files: Vec<&str> = unused
                .candidates
                .iter()
                .map(|h| h.file_path.as_str())
                .collect();
            assert!(
                unused
                    .candidates
                    .iter()
                    .any(|h| h.preview.contains("_orphan")),
                "{files:?}"
            );
            assert!(
                !unused
                    .candidates
                    .iter()
                    .any(|h| h.preview.contains("def ping"))
            );
            let graph = g.dependency_graph(Level::File, Some("pkg/"), 50)?;
            assert!(
                graph
                    .edges
                    .iter()
                    .all(|e| e.from.starts_with("pkg/") && e.to.starts_with("pkg/"))
            );
            Ok(())
        })
        .expect("graph");
}

#[test]
fn detail_and_scope_describe_a_unit_and_where_a_line_sits() {
    let (_tmp, root) = fixture("python");
    let engine = Engine::open(&root, EngineOptions::default()).expect("open");
    engine.index(None, &NoProgress).expect("index");
    engine
        .graph(|g| {
            let parse = g.detail("Parser.parse", 50)?;
            let d = parse.detail.as_ref().expect("detail");
            assert_eq!(d.signature, "def parse(self):");
            assert_eq!(d.parameters, ["self"]);
            // app.py calls it twice (p.parse(), q.parse()) from one function:
            // `detail` counts caller units, as `callers` lists them (issue 29:
            // the two agree), and that one caller holds both sites. It calls
            // Lexer.tokens and Base.run.
            let callers = g.callers("Parser.parse", 1, 50)?;
            assert_eq!(d.callers, callers.total, "{parse:?}\n{callers:?}");
            assert_eq!(d.callers, 1, "{parse:?}");
            let sites: usize = callers.nodes.iter().map(|n| n.sites_total).sum();
            assert_eq!(sites, 2, "{callers:?}");
            assert_eq!(d.callees, 2, "{parse:?}");

            let class = g.detail("Parser", 50)?;
            let d = class.detail.as_ref().expect("detail");
            assert_eq!(d.signature, "class Parser(Base):");
            assert!(d.parameters.is_empty(), "bases are not parameters");
            let members: Vec<&str> = class
                .nodes
                .iter()
                .filter_map(|n| n.qualified_name.as_deref())
                .collect();
            assert!(members.contains(&"Parser.parse"), "{members:?}");
            assert!(members.contains(&"Parser.__init__"), "{members:?}");
            assert_eq!(d.members, class.nodes.len());
            assert!(class.nodes.iter().all(|n| n.edge_kind == "member"));

            let scope = g.scope("pkg/models.py", 15)?;
            let chain: Vec<(u32, String)> = scope
                .nodes
                .iter()
                .map(|n| {
                    (
                        n.depth,
                        n.qualified_name
                            .clone()
                            .unwrap_or(n.handle.node_type.clone()),
                    )
                })
                .collect();
            assert_eq!(chain[0].0, 0);
            assert_eq!(scope.nodes[0].handle.node_type, "file");
            assert_eq!(
                chain[1..],
                [(1, "Parser".to_string()), (2, "Parser.parse".to_string())]
            );
            assert_eq!(
                scope.target.as_ref().map(|t| t.line_range),
                Some(scope.nodes[2].handle.line_range)
            );
            let missing = g.scope("nope.py", 1)?;
            assert_eq!(
                missing.empty,
                Some(canopy_core::graph::nav::Empty::TargetNotFound)
            );
            Ok(())
        })
        .expect("graph");
}

#[test]
fn symbols_filter_sort_and_page_definitions() {
    use canopy_core::graph::ops::SymbolFilter;
    let (_tmp, root) = fixture("python");
    let engine = Engine::open(&root, EngineOptions::default()).expect("open");
    engine.index(None, &NoProgress).expect("index");
    engine
        .graph(|g| {
            let names = |a: &canopy_core::graph::ops::SymbolsAnswer| -> Vec<String> {
                a.symbols
                    .iter()
                    .map(|s| s.qualified_name.clone().unwrap_or_default())
                    .collect()
            };
            // Most referenced first: Parser is called and imported more than anything in pkg/.
            let all = g.symbols("symbols", &SymbolFilter::default(), 500)?;
            assert!(all.total >= 10, "{:?}", names(&all));
            let refs: Vec<usize> = all.symbols.iter().map(|s| s.refs).collect();
            assert!(refs.windows(2).all(|w| w[0] >= w[1]), "{refs:?}");

            // Path prefix, kind and name filters.
            let methods = g.symbols(
                "symbols",
                &SymbolFilter {
                    path_prefix: Some("pkg/models".into()),
                    kinds: vec!["method".into()],
                    name: Some("*parse".into()),
                    sort: Some(canopy_core::graph::ops::SymbolSort::Name),
                    ..SymbolFilter::default()
                },
                50,
            )?;
            assert_eq!(names(&methods), ["Lexer.parse", "Parser.parse"]);

            // Visibility and reference counts: the private, unused _orphan.
            let private = g.symbols(
                "symbols",
                &SymbolFilter {
                    visibility: Some(canopy_core::graph::ops::Visibility::Private),
                    max_refs: Some(0),
                    ..SymbolFilter::default()
                },
                50,
            )?;
            assert!(
                names(&private).contains(&"_orphan".to_string()),
                "{:?}",
                names(&private)
            );
            assert!(private.symbols.iter().all(|s| !s.exported && s.refs == 0));

            // Pages: two at a time, no repeats, all of them.
            let mut seen = Vec::new();
            let mut offset = None;
            loop {
                let page = g.symbols(
                    "symbols",
                    &SymbolFilter {
                        sort: Some(canopy_core::graph::ops::SymbolSort::Path),
                        offset,
                        ..SymbolFilter::default()
                    },
                    2,
                )?;
                assert!(page.symbols.len() <= 2);
                seen.extend(names(&page));
                match page.next_offset {
                    Some(next) => offset = Some(next),
                    None => break,
                }
            }
            assert_eq!(seen.len(), all.total);
            Ok(())
        })
        .expect("graph");
    // The same through the request type (`search` = name pattern as target).
    let req = canopy_core::graph::request::GraphRequest::new(
        canopy_core::graph::request::GraphOp::Search,
        "lex*",
    );
    let answer = engine.graph(|g| g.run(&req)).expect("search");
    let json = serde_json::to_value(&answer).expect("json");
    let found: Vec<&str> = json["symbols"]
        .as_array()
        .expect("symbols")
        .iter()
        .filter_map(|s| s["qualified_name"].as_str())
        .collect();
    assert!(found.contains(&"Lexer"), "{json}");
    assert!(
        found.iter().all(|n| n.to_lowercase().contains("lex")),
        "{found:?}"
    );
}

#[test]
fn summaries_describe_a_file_and_a_package() {
    let (_tmp, root) = fixture("python");
    let engine = Engine::open(&root, EngineOptions::default()).expect("open");
    engine.index(None, &NoProgress).expect("index");
    engine
        .graph(|g| {
            let file = g.summary("summary", "pkg/models.py", 50)?;
            assert_eq!(file.files, 1);
            assert_eq!(file.languages.get("python"), Some(&1));
            assert_eq!(file.units_by_kind.get("class"), Some(&3));
            assert_eq!(
                file.top_symbols
                    .first()
                    .and_then(|s| s.qualified_name.as_deref()),
                Some("Parser"),
                "the most referenced definition comes first"
            );
            assert!(
                file.top_symbols
                    .iter()
                    .all(|s| s.handle.file_path == "pkg/models.py")
            );
            let users: Vec<&str> = file.dependents.iter().map(|d| d.name.as_str()).collect();
            assert!(users.contains(&"app.py"), "{users:?}");

            let package = g.summary("package_summary", "pkg/", 50)?;
            assert_eq!(package.target, "pkg");
            assert_eq!(package.files, 5);
            assert!(
                package
                    .top_symbols
                    .iter()
                    .all(|s| s.handle.file_path.starts_with("pkg/"))
            );
            let users: Vec<&str> = package.dependents.iter().map(|d| d.name.as_str()).collect();
            assert_eq!(users, ["."], "the root package (app.py) uses pkg");

            let missing = g.summary("summary", "nope.py", 50)?;
            assert_eq!(
                missing.empty,
                Some(canopy_core::graph::nav::Empty::TargetNotFound)
            );
            Ok(())
        })
        .expect("graph");
}

#[test]
fn unresolved_call_sites_are_counted_and_hotspots_follow_the_index() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path();
    std::fs::write(
        root.join("a.py"),
        "class Store:\n    def save(self):\n        return 1\n\n\ndef helper():\n    return 2\n\n\ndef main(s: Store, x):\n    s.save()\n    x.save()\n    x.save()\n    helper()\n",
    )
    .expect("write");
    std::fs::write(
        root.join("b.py"),
        "class Other:\n    def save(self):\n        return 3\n\n\ndef other(y):\n    y.save()\n    return y\n",
    )
    .expect("write");
    let engine = Engine::open(root, EngineOptions::default()).expect("open");
    engine.index(None, &NoProgress).expect("index");
    engine
        .graph(|g| {
            // One resolved caller; three `save` calls on unknown receivers (two
            // classes define `save`, so no unique-name guess), in two files.
            let callers = g.callers("Store.save", 1, 50)?;
            assert_eq!(callers.nodes.len(), 1, "{:?}", callers.nodes);
            assert_eq!(callers.unresolved_count, 3, "{:?}", callers.unresolved);
            let lines: BTreeSet<(String, u32)> = callers
                .unresolved
                .iter()
                .map(|u| (u.file_path.clone(), u.line))
                .collect();
            assert_eq!(
                lines,
                BTreeSet::from([
                    ("a.py".to_string(), 12),
                    ("a.py".to_string(), 13),
                    ("b.py".to_string(), 7)
                ])
            );
            let hot = g.hotspots(1, PathScope::default())?;
            assert_eq!(hot.hotspots[0].handle.file_path, "a.py");
            Ok(())
        })
        .expect("graph");
    let top = |engine: &Engine| {
        engine
            .graph(|g| {
                Ok(g.hotspots(1, PathScope::default())?.hotspots[0]
                    .handle
                    .clone())
            })
            .expect("hotspots")
    };
    let before = top(&engine);
    // A new file whose function calls `helper` from many places: the warm
    // engine's cached degrees must not survive the re-index.
    let mut calls = String::from("from a import helper\n\n\n");
    for i in 0..6 {
        calls.push_str(&format!("def caller_{i}():\n    return helper()\n\n\n"));
    }
    std::fs::write(root.join("c.py"), calls).expect("write");
    engine.index(None, &NoProgress).expect("reindex");
    let after = top(&engine);
    assert_ne!(
        before.id, after.id,
        "hotspots answered from before the edit"
    );
    assert!(after.preview.contains("def helper"), "{after:?}");
}

/// Hotspots of equal degree are listed by path, not by row id: a file
/// indexed later gets higher ids, so ordering ties by id made a tree indexed
/// in steps answer differently from a cold index of the same tree.
#[test]
fn hotspot_ties_are_ordered_by_path_whatever_the_indexing_history() {
    // `a.py` and `z.py` each hold one function called by two others in
    // their own file: four units of degree 1 and two of degree 2 per file.
    let module = |prefix: &str| {
        format!(
            "def {prefix}_core():\n    return 1\n\n\n\
             def {prefix}_one():\n    return {prefix}_core()\n\n\n\
             def {prefix}_two():\n    return {prefix}_core()\n"
        )
    };
    // Hotspots, then symbols by references (the default sort), as
    // `path:line`.
    let order = |root: &Path| -> (Vec<String>, Vec<String>) {
        let engine = Engine::open(root, EngineOptions::default()).expect("open");
        engine.index(None, &NoProgress).expect("index");
        engine
            .graph(|g| {
                let hot = g.hotspots(10, PathScope::default())?.hotspots;
                let filter = canopy_core::graph::ops::SymbolFilter::default();
                let symbols = g.symbols("symbols", &filter, 50)?.symbols;
                Ok((
                    hot.iter()
                        .map(|h| format!("{}:{}", h.handle.file_path, h.handle.line_range[0]))
                        .collect(),
                    symbols
                        .iter()
                        .map(|s| format!("{}:{}", s.handle.file_path, s.handle.line_range[0]))
                        .collect(),
                ))
            })
            .expect("hotspots")
    };
    let cold = tempfile::tempdir().expect("tempdir");
    std::fs::write(cold.path().join("a.py"), module("a")).expect("write");
    std::fs::write(cold.path().join("z.py"), module("z")).expect("write");
    let cold_order = order(cold.path());

    // The same tree, `z.py` indexed first: its units get the lower ids.
    let steps = tempfile::tempdir().expect("tempdir");
    std::fs::write(steps.path().join("z.py"), module("z")).expect("write");
    order(steps.path());
    std::fs::write(steps.path().join("a.py"), module("a")).expect("write");
    let steps_order = order(steps.path());

    let (hot, symbols) = &cold_order;
    assert_eq!(hot.len(), 6, "{hot:?}");
    assert_eq!(
        hot[..2],
        ["a.py:1".to_string(), "z.py:1".to_string()],
        "{hot:?}"
    );
    assert!(symbols.len() >= 6, "{symbols:?}");
    assert_eq!(
        symbols[..2],
        ["a.py:1".to_string(), "z.py:1".to_string()],
        "{symbols:?}"
    );
    assert_eq!(steps_order, cold_order);
}

/// `Graph::neighbours` (a context pack's graph strategy) lists, for the
/// unit a target resolves to, the units of `callers`, `callees` and
/// `type_usages` at depth 1, in the same order and under the same caps:
/// for every unit at either end of an edge of each fixture, and caps that
/// cut the lists short.
#[test]
fn neighbours_are_the_one_hop_answers_of_the_traversals() {
    use canopy_core::lang::SiteKind;
    for lang in ["python", "typescript", "rust", "go"] {
        let (_tmp, root) = fixture(lang);
        let engine = Engine::open(&root, EngineOptions::default()).expect("open");
        engine.index(None, &NoProgress).expect("index");
        let compared = engine
            .graph(|g| {
                let store = g.store();
                let mut ids: Vec<i64> = store
                    .all_edges()?
                    .iter()
                    .flat_map(|e| [Some(e.src), e.dst])
                    .flatten()
                    .collect();
                ids.sort_unstable();
                ids.dedup();
                let mut compared = 0;
                for unit in store.nodes_by_rowids(&ids)? {
                    let target = format!("{}:{}", unit.file_path, g.name_line(&unit));
                    let TargetMatch::One(t) = g.resolve_target(&target)? else {
                        continue;
                    };
                    for cap in [1, 2, 50] {
                        for (incoming, kind, answer) in [
                            (true, SiteKind::Call, g.callers(&target, 1, cap)?),
                            (false, SiteKind::Call, g.callees(&target, 1, cap)?),
                            (true, SiteKind::Type, g.type_usages(&target, cap)?),
                        ] {
                            let mut want: Vec<String> = answer
                                .nodes
                                .iter()
                                .map(|n| n.handle.id.as_str().to_string())
                                .collect();
                            // A unit reached by edges of two kinds (resolved
                            // and ambiguous) is listed once per kind, side by
                            // side, and counts once against the cap.
                            want.dedup();
                            let units: BTreeSet<&String> = want.iter().collect();
                            assert_eq!(
                                units.len(),
                                want.len(),
                                "{lang}: {target} {kind:?}: a unit listed apart: {want:?}"
                            );
                            let got: Vec<String> = g
                                .neighbours(&t, incoming, &[kind], cap)?
                                .iter()
                                .map(|n| n.handle_id().as_str().to_string())
                                .collect();
                            assert_eq!(
                                got, want,
                                "{lang}: {target} {kind:?} in={incoming} cap={cap}"
                            );
                            compared += usize::from(!want.is_empty());
                        }
                    }
                }
                Ok(compared)
            })
            .expect("graph");
        assert!(
            compared >= 20,
            "{lang}: only {compared} non-empty answers compared"
        );
    }
}
