//! A long-lived process keeps the resolver world's rows between index runs
//! ([`crate::graph::resolve::KeptRows`]): after every edit of a sequence (add a
//! function and a caller, rename a method, move a method, delete a file;
//! add a file that shadows an import) the graph it stores has the same
//! edges as a run that reads every row again, and as a cold index of the
//! tree ([`INCREMENTAL_GAPS`]: the edits the incremental path once missed).
//! Edges are compared by what their ids name: ids depend on the order the
//! parallel workers finish in.

#![cfg(test)]

use std::path::{Path, PathBuf};

use super::{copy_dir, graph_rows};
use crate::graph::resolve::KeptRows;
use crate::index::{IndexOptions, NoProgress, run_index};
use crate::store::Store;

/// One change to the tree.
enum Edit {
    /// Appends text to a file.
    Append(&'static str, &'static str),
    /// Replaces the one occurrence of a text in a file.
    Replace(&'static str, &'static str, &'static str),
    /// Writes a new file.
    Write(&'static str, &'static str),
    /// Deletes a file.
    Delete(&'static str),
}

fn apply(root: &Path, edit: &Edit) {
    match *edit {
        Edit::Append(path, text) => {
            let p = root.join(path);
            let mut s = std::fs::read_to_string(&p).expect("read");
            s.push_str(text);
            std::fs::write(&p, s).expect("write");
        }
        Edit::Replace(path, from, to) => {
            let p = root.join(path);
            let s = std::fs::read_to_string(&p).expect("read");
            assert_eq!(s.matches(from).count(), 1, "{path}: {from:?}");
            std::fs::write(&p, s.replacen(from, to, 1)).expect("write");
        }
        Edit::Write(path, text) => {
            let p = root.join(path);
            std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
            std::fs::write(&p, text).expect("write");
        }
        Edit::Delete(path) => std::fs::remove_file(root.join(path)).expect("delete"),
    }
}

fn options() -> IndexOptions {
    IndexOptions {
        glob: None,
        max_file_size: crate::discover::DEFAULT_MAX_FILE_SIZE,
        only_paths: None,
    }
}

fn open(dir: &Path) -> Store {
    let (store, why) = Store::open(&dir.join("index.db")).expect("store");
    assert!(why.is_none(), "{why:?}");
    store
}

/// The edges with every unit named by what it is (file, kind, qualified
/// name, span) instead of its row id, sorted: what a cold index of the same
/// tree must store, whatever ids its units got.
fn edge_dump(store: &Store) -> Vec<String> {
    let unit = |id: i64| -> String {
        store
            .conn
            .query_row(
                "SELECT f.path, n.node_type, COALESCE(n.qualified_name, ''), n.start_byte, n.end_byte
                 FROM nodes n JOIN files f ON f.id = n.file_id WHERE n.id = ?1",
                [id],
                |r| {
                    Ok(format!(
                        "{}:{}:{}@{}..{}",
                        r.get::<_, String>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, String>(2)?,
                        r.get::<_, i64>(3)?,
                        r.get::<_, i64>(4)?
                    ))
                },
            )
            .unwrap_or_else(|_| format!("<missing unit {id}>"))
    };
    let file = |id: i64| -> String {
        store
            .conn
            .query_row("SELECT path FROM files WHERE id = ?1", [id], |r| r.get(0))
            .unwrap_or_else(|_| format!("<missing file {id}>"))
    };
    let (lists, targets) = graph_rows(store);
    let mut dump = Vec::new();
    for (file_id, blob) in lists {
        let edges = crate::store::packed_edges::decode(&blob, file_id).expect("decode");
        for e in edges {
            dump.push(format!(
                "{} {} {}:{} -> {} [{}]",
                file(file_id),
                unit(e.src),
                e.line,
                e.col,
                unit(e.dst),
                e.info
            ));
        }
    }
    for (dst, file_id) in targets {
        dump.push(format!("target {} <- {}", unit(dst), file(file_id)));
    }
    dump.sort();
    dump
}

/// A copy of the graph fixture `fixture` to edit: the temporary directory
/// (keep it alive) and the repository's root in it.
fn fixture_copy(fixture: &str) -> (tempfile::TempDir, PathBuf) {
    let source = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/graph")
        .join(fixture);
    let tree = tempfile::tempdir().expect("tempdir");
    let root = tree.path().join("repo");
    copy_dir(&source, &root);
    (tree, root)
}

/// Applies `steps` to a copy of `fixture`, indexing after each with the
/// kept rows and without; checks both against each other and a cold index.
/// Returns the kept rows (with their world).
fn kept_world_matches_cold_index(fixture: &str, against: Against, steps: &[&[Edit]]) -> KeptRows {
    let (_tree, root) = fixture_copy(fixture);
    let (kept_db, plain_db) = (
        tempfile::tempdir().expect("db"),
        tempfile::tempdir().expect("db"),
    );
    let (mut kept_store, mut plain_store) = (open(kept_db.path()), open(plain_db.path()));
    let mut kept = KeptRows::default();
    for (step, edits) in std::iter::once(&[][..])
        .chain(steps.iter().copied())
        .enumerate()
    {
        for edit in edits {
            apply(&root, edit);
        }
        run_index(
            &root,
            &mut kept_store,
            &options(),
            &NoProgress,
            Some(&mut kept),
        )
        .expect("index");
        run_index(&root, &mut plain_store, &options(), &NoProgress, None).expect("index");
        let kept_edges = edge_dump(&kept_store);
        assert!(
            step > 0 || !kept_edges.is_empty(),
            "{fixture}: the fixture has edges"
        );
        // File and unit ids depend on the order parallel workers finish
        // in, so two stores are compared by what the ids name.
        assert_eq!(
            kept_edges,
            edge_dump(&plain_store),
            "{fixture} step {step}: kept rows resolve otherwise than rows read again"
        );
        if against == Against::ReadAgainAndCold {
            let cold_db = tempfile::tempdir().expect("db");
            let mut cold = open(cold_db.path());
            run_index(&root, &mut cold, &options(), &NoProgress, None).expect("cold index");
            let cold_edges = edge_dump(&cold);
            assert!(
                kept_edges == cold_edges,
                "{fixture} step {step}: not the cold index's edges; only incremental: {:#?}; only cold: {:#?}",
                only_in(&kept_edges, &cold_edges),
                only_in(&cold_edges, &kept_edges),
            );
        }
    }
    kept
}

/// The lines of `a` that `b` lacks (both sorted): a failure names only the
/// edges that differ.
fn only_in<'a>(a: &'a [String], b: &[String]) -> Vec<&'a String> {
    a.iter().filter(|l| b.binary_search(l).is_err()).collect()
}

/// Asserts that `store` holds the edges a cold index of `root` stores.
fn assert_cold_index_edges(root: &Path, store: &Store, what: &str) {
    let cold_db = tempfile::tempdir().expect("db");
    let mut cold = open(cold_db.path());
    run_index(root, &mut cold, &options(), &NoProgress, None).expect("cold index");
    let (edges, cold_edges) = (edge_dump(store), edge_dump(&cold));
    assert!(
        edges == cold_edges,
        "{what}: not the cold index's edges; only here: {:#?}; only cold: {:#?}",
        only_in(&edges, &cold_edges),
        only_in(&cold_edges, &edges),
    );
}

/// What a kept world's graph is compared with after each step.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Against {
    /// A run that reads every row again, on the same sequence of runs.
    ReadAgain,
    /// That, and a cold index of the tree.
    ReadAgainAndCold,
}

// Each language: add a function (and a caller), rename a method, move a
// method, delete a file (after the steps, with the edges into it).

/// Adds a function and a caller, then renames a method (Python's first steps).
const PYTHON_UNIT_EDITS: &[&[Edit]] = &[
    &[
        Edit::Append("pkg/models.py", "\n\ndef added():\n    return Lexer()\n"),
        Edit::Append(
            "app.py",
            "\n\ndef uses_added():\n    from pkg.models import added\n    return added().tokens()\n",
        ),
    ],
    &[Edit::Replace(
        "pkg/models.py",
        "def tokens(self):",
        "def tokens2(self):",
    )],
];

#[test]
fn python_edits_through_a_kept_world() {
    let move_method: &[Edit] = &[
        Edit::Replace(
            "pkg/models.py",
            "    def step(self):\n        return 1\n",
            "",
        ),
        Edit::Replace(
            "pkg/models.py",
            "class Lexer:\n",
            "class Lexer:\n    def step(self):\n        return 1\n\n",
        ),
    ];
    kept_world_matches_cold_index(
        "python",
        Against::ReadAgainAndCold,
        &[
            PYTHON_UNIT_EDITS,
            &[move_method, &[Edit::Delete("pkg/models.py")]],
        ]
        .concat(),
    );
}

/// Adds a function and a caller, then renames a method (Go's first steps).
const GO_UNIT_EDITS: &[&[Edit]] = &[
    &[
        Edit::Append(
            "shapes/shapes.go",
            "\nfunc Added() *Square { return NewSquare(1) }\n",
        ),
        Edit::Replace(
            "main.go",
            "fmt.Println(total(q))",
            "fmt.Println(total(q), sh.Added().Area())",
        ),
    ],
    &[Edit::Replace(
        "shapes/shapes.go",
        "func (q *Square) double() int",
        "func (q *Square) twice() int",
    )],
];

/// Circle's only method moves to a file of its own.
const GO_AREA_TO_ITS_OWN_FILE: &[Edit] = &[
    Edit::Replace(
        "shapes/shapes.go",
        "func (c Circle) Area() int { return c.r }\n",
        "",
    ),
    Edit::Write(
        "shapes/circle.go",
        "package shapes\n\nfunc (c Circle) Area() int { return c.r }\n",
    ),
];

#[test]
fn go_edits_through_a_kept_world() {
    kept_world_matches_cold_index(
        "go",
        Against::ReadAgainAndCold,
        &[GO_UNIT_EDITS, &[GO_AREA_TO_ITS_OWN_FILE]].concat(),
    );
}

/// Adds a function and a caller, renames a method, moves a method: every
/// step adds, removes or renames units of files that stay.
const TYPESCRIPT_UNIT_EDITS: &[&[Edit]] = &[
    &[
        Edit::Append(
            "src/parser.ts",
            "\nexport function added(): Lexer {\n  return new Lexer();\n}\n",
        ),
        Edit::Replace(
            "src/index.ts",
            "import { Parser as P, Lexer } from \"./parser\";",
            "import { Parser as P, Lexer, added } from \"./parser\";",
        ),
        Edit::Append(
            "src/index.ts",
            "\nexport function usesAdded() {\n  return added().tokens();\n}\n",
        ),
    ],
    &[Edit::Replace(
        "src/parser.ts",
        "  tokens(): string[] {",
        "  tokens2(): string[] {",
    )],
    &[
        Edit::Replace(
            "src/parser.ts",
            "  step(): number {\n    return 1;\n  }\n",
            "",
        ),
        Edit::Replace(
            "src/parser.ts",
            "export class Lexer {\n",
            "export class Lexer {\n  step(): number {\n    return 1;\n  }\n",
        ),
    ],
];

#[test]
fn typescript_edits_through_a_kept_world() {
    kept_world_matches_cold_index(
        "typescript",
        Against::ReadAgainAndCold,
        &[TYPESCRIPT_UNIT_EDITS, &[&[Edit::Delete("src/parser.ts")]]].concat(),
    );
}

/// Adds a function and a caller, renames a method, moves a method: every
/// step adds, removes or renames units of files that stay.
const RUST_UNIT_EDITS: &[&[Edit]] = &[
    &[
        Edit::Append(
            "src/parser.rs",
            "\npub fn added() -> Parser {\n    Parser::new()\n}\n",
        ),
        Edit::Append(
            "src/lib.rs",
            "\npub fn uses_added() -> usize {\n    parser::added().parse()\n}\n",
        ),
    ],
    &[Edit::Replace(
        "src/parser.rs",
        "pub fn len(&self)",
        "pub fn length(&self)",
    )],
    &[
        Edit::Replace(
            "src/parser.rs",
            "    pub fn new() -> Self {\n        Parser { text: String::new() }\n    }\n",
            "",
        ),
        Edit::Append(
            "src/elsewhere.rs",
            "\nimpl crate::parser::Parser {\n    pub fn new() -> Self {\n        crate::parser::Parser::default()\n    }\n}\n",
        ),
    ],
];

#[test]
fn rust_edits_through_a_kept_world() {
    kept_world_matches_cold_index(
        "rust",
        Against::ReadAgainAndCold,
        &[RUST_UNIT_EDITS, &[&[Edit::Delete("src/parser.rs")]]].concat(),
    );
}

/// Edits that change what the Rust rules decide with the world: a
/// `#[path]` module's path goes (the module table), and a twin under a
/// `cfg` the build script decides gets the other predicate (the units
/// `built_out` drops).
#[test]
fn rust_module_paths_and_build_cfgs_through_a_kept_world() {
    kept_world_matches_cold_index(
        "rust",
        Against::ReadAgainAndCold,
        &[
            &[Edit::Replace(
                "tests/pathed_mods.rs",
                "#[path = \"pathed/check.rs\"]\nmod check;",
                "mod check;",
            )],
            &[Edit::Replace(
                "src/limbs.rs",
                "#[cfg(limb = \"32\")]\npub type Limb = Narrow;",
                "#[cfg(limb = \"64\")]\npub type Limb = Narrow;",
            )],
        ],
    );
}

/// An edit of the build script alone changes what the package's other
/// files compile: `wrapped` stops being printed on every path (so
/// `src/wrapped.rs` binds `imp` to `fallback`), then is again. The files
/// of the package are unchanged on disk, so their facts must be read again
/// because the flags they were read with changed.
#[test]
fn rust_build_script_flags_through_a_kept_world() {
    let off = Edit::Replace("build.rs", "if probed || !exempt {", "if probed {");
    let on = Edit::Replace(
        "build.rs",
        "if probed {\n        println!(\"cargo:rustc-cfg=wrapped\");",
        "if probed || !exempt {\n        println!(\"cargo:rustc-cfg=wrapped\");",
    );
    kept_world_matches_cold_index("rust", Against::ReadAgainAndCold, &[&[off], &[on]]);
}

/// A run that names only the edited build script (as a watcher's runs
/// name the changed paths) reads the package's other Rust files again
/// too: the run does not list them, so they are read from the disk.
#[test]
fn a_run_naming_only_the_build_script_reads_its_package_again() {
    let (_tree, root) = fixture_copy("rust");
    let db = tempfile::tempdir().expect("db");
    let mut store = open(db.path());
    run_index(&root, &mut store, &options(), &NoProgress, None).expect("index");
    apply(
        &root,
        &Edit::Replace("build.rs", "if probed || !exempt {", "if probed {"),
    );
    let named = IndexOptions {
        only_paths: Some(std::collections::HashSet::from(["build.rs".to_string()])),
        ..options()
    };
    run_index(&root, &mut store, &named, &NoProgress, None).expect("named run");
    assert_cold_index_edges(&root, &store, "a run naming build.rs");
}

/// The import fixtures of every language: a file others import goes.
#[test]
fn import_fixtures_through_a_kept_world() {
    let cold = Against::ReadAgainAndCold;
    kept_world_matches_cold_index("imports/py", cold, &[&[Edit::Delete("pkg/registry.py")]]);
    kept_world_matches_cold_index("imports/ts", cold, &[&[Edit::Delete("src/registry.ts")]]);
    kept_world_matches_cold_index("imports/go", cold, &[&[Edit::Delete("util/limits.go")]]);
    kept_world_matches_cold_index("imports/rs", cold, &[&[Edit::Delete("src/limits.rs")]]);
}

/// Edits after which the incremental path (with or without a kept world)
/// left other edges than a cold index: a file added that an existing
/// import now names instead (and then removed), in each language; a file
/// that comes back after its importers lost their edges into it; a Go
/// method deleted so that its type no longer implements an interface, in
/// the type's file or in another; an interface in a file of its own that
/// comes, changes its methods and goes.
const INCREMENTAL_GAPS: [(&str, &[&[Edit]]); 10] = [
    // `import json` in app.py names it.
    (
        "python",
        &[
            &[Edit::Write("json.py", "def dumps(x):\n    return x\n")],
            &[Edit::Delete("json.py")],
        ],
    ),
    (
        "go",
        &[
            &[Edit::Write(
                "fmt.go",
                "package main\n\nfunc Println(a ...any) {}\n",
            )],
            &[Edit::Delete("fmt.go")],
        ],
    ),
    (
        "typescript",
        &[
            &[Edit::Write(
                "src/parser/index.ts",
                "export class Parser {\n  parse(): number {\n    return 2;\n  }\n}\n",
            )],
            &[Edit::Delete("src/parser/index.ts")],
        ],
    ),
    (
        "rust",
        &[
            &[Edit::Write(
                "src/parser/mod.rs",
                "pub struct Parser;\n\nimpl Parser {\n    pub fn new() -> Self {\n        Parser\n    }\n}\n",
            )],
            &[Edit::Delete("src/parser/mod.rs")],
        ],
    ),
    (
        "imports/py",
        &[
            &[Edit::Delete("pkg/registry.py")],
            &[Edit::Write("pkg/registry.py", "handlers = {}\n")],
        ],
    ),
    (
        "imports/ts",
        &[
            &[Edit::Delete("src/registry.ts")],
            &[Edit::Write(
                "src/registry.ts",
                "export const handlers: number[] = [];\n",
            )],
        ],
    ),
    (
        "go",
        &[
            &[Edit::Write(
                "shapes/circle.go",
                "package shapes\n\nfunc (c Circle) Perimeter() int { return c.r }\n",
            )],
            &[Edit::Delete("shapes/circle.go")],
            &[Edit::Replace(
                "shapes/shapes.go",
                "func (c Circle) Area() int { return c.r }\n",
                "",
            )],
        ],
    ),
    // A call on an unknown receiver is guessed only to a method defined
    // once: Lexer.parse goes (Parser.parse is left alone, extra.py holds no
    // edge into what went) and comes back.
    (
        "python",
        &[
            &[Edit::Write(
                "extra.py",
                "def use(thing):\n    return thing.parse()\n",
            )],
            &[Edit::Replace(
                "pkg/models.py",
                "\n    def parse(self):\n        return None\n",
                "",
            )],
            &[Edit::Append(
                "pkg/models.py",
                "\n    def parse(self):\n        return None\n",
            )],
        ],
    ),
    // Circle's only method in a file of its own, which goes and comes
    // back: shapes.go, which declares Circle, holds its `implements` edge.
    (
        "go",
        &[
            GO_AREA_TO_ITS_OWN_FILE,
            &[Edit::Delete("shapes/circle.go")],
            &[Edit::Write(
                "shapes/circle.go",
                "package shapes\n\nfunc (c Circle) Area() int { return c.r }\n",
            )],
        ],
    ),
    // An interface in a file of its own, which gains a method Circle
    // lacks, loses it, and goes: Square and Circle satisfy it or not.
    (
        "go",
        &[
            &[Edit::Write(
                "shapes/sized.go",
                "package shapes\n\ntype Sized interface {\n\tArea() int\n}\n",
            )],
            &[Edit::Replace(
                "shapes/sized.go",
                "\tArea() int\n",
                "\tArea() int\n\tdouble() int\n",
            )],
            &[Edit::Replace("shapes/sized.go", "\tdouble() int\n", "")],
            &[Edit::Delete("shapes/sized.go")],
        ],
    ),
];

/// A kept world resolves these edits as rows read again do.
#[test]
fn incremental_gaps_through_a_kept_world() {
    for (fixture, steps) in INCREMENTAL_GAPS {
        kept_world_matches_cold_index(fixture, Against::ReadAgain, steps);
    }
}

/// The same against a cold index: the incremental path (with or without a
/// kept world) re-resolves the files whose imports a new file shadows
/// (`import json` in app.py gets its edge to a new `json.py`), the
/// importers of a file that comes back, and the Go files whose types'
/// method sets or whose interfaces changed in another file (their
/// `implements` edges). Each case failed before `graph_prepare` marked
/// them.
#[test]
fn incremental_gaps_match_a_cold_index() {
    for (fixture, steps) in INCREMENTAL_GAPS {
        kept_world_matches_cold_index(fixture, Against::ReadAgainAndCold, steps);
    }
}

/// `graph_prepare` finds the users of new and gone names by a lookup per
/// name or, with at least one name per file, by one pass over the
/// postings: each way alone still matches a cold index on every gap (the
/// other tests, running meanwhile, see the same marks either way).
#[test]
fn incremental_gaps_match_a_cold_index_either_way_of_marking() {
    use crate::store::graph::{FORCE_BY_NAME, FORCE_ONE_PASS, MARKING_FORCED};
    use std::sync::atomic::Ordering;
    for way in [FORCE_BY_NAME, FORCE_ONE_PASS] {
        MARKING_FORCED.store(way, Ordering::Relaxed);
        for (fixture, steps) in INCREMENTAL_GAPS {
            kept_world_matches_cold_index(fixture, Against::ReadAgainAndCold, steps);
        }
    }
    MARKING_FORCED.store(0, Ordering::Relaxed);
}

/// A new `utils.py` re-resolves the files whose relative imports name it
/// from their own package (`.utils` beside it, `..utils` below it), not
/// every file with a `.utils` import anywhere (Django: 143 files for one
/// new `utils.py` in a package, issue 32), and the graph is still a cold
/// index's.
#[test]
fn a_new_module_re_resolves_only_the_relative_imports_of_its_package() {
    let tree = tempfile::tempdir().expect("tempdir");
    let root = tree.path();
    let user = "from .utils import helper\n\n\ndef run():\n    return helper()\n";
    let deep = "from ..utils import helper\n\n\ndef deep():\n    return helper()\n";
    // pkg_b's imports name nothing the new file defines: only their
    // module spelling (`.utils`, `..utils`) could mark them.
    let other_user = "from .utils import other\n\n\ndef run():\n    return other()\n";
    let other_deep = "from ..utils import other\n\n\ndef deep():\n    return other()\n";
    for edit in [
        Edit::Write("pkg_a/__init__.py", ""),
        Edit::Write("pkg_a/user.py", user),
        Edit::Write("pkg_a/sub/deep.py", deep),
        Edit::Write("pkg_b/__init__.py", ""),
        Edit::Write("pkg_b/user.py", other_user),
        Edit::Write("pkg_b/sub/deep.py", other_deep),
    ] {
        apply(root, &edit);
    }
    let db = tempfile::tempdir().expect("db");
    let mut store = open(db.path());
    let mut kept = KeptRows::default();
    run_index(root, &mut store, &options(), &NoProgress, Some(&mut kept)).expect("index");
    apply(
        root,
        &Edit::Write("pkg_a/utils.py", "def helper():\n    return 1\n"),
    );
    let report =
        run_index(root, &mut store, &options(), &NoProgress, Some(&mut kept)).expect("index");
    // The new file, pkg_a/user.py and pkg_a/sub/deep.py; pkg_b's two
    // files name a `pkg_b.utils` that is still missing.
    assert_eq!(report.graph_files_resolved, 3, "{report:?}");
    let cold_db = tempfile::tempdir().expect("db");
    let mut cold = open(cold_db.path());
    run_index(root, &mut cold, &options(), &NoProgress, None).expect("cold index");
    let (incremental, cold) = (edge_dump(&store), edge_dump(&cold));
    assert_eq!(incremental, cold);
    let callers: std::collections::BTreeSet<&str> = incremental
        .iter()
        .filter(|e| e.contains("-> pkg_a/utils.py:function:helper"))
        .filter_map(|e| e.split(' ').next())
        .collect();
    assert_eq!(
        callers,
        ["pkg_a/sub/deep.py", "pkg_a/user.py"].into(),
        "both importers in pkg_a, and only they, reach the new helper: {incremental:#?}"
    );
}

// Edits inside bodies and comments (no unit added, removed or renamed;
// the units after the edit move): the kept world is updated in place
// (`World::patch`) instead of built again, and must store what a cold index
// of the tree stores after each one. The edits move calls to other targets,
// shift every later unit of the file, and (Rust) shift `impl` blocks whose
// trait impls and types the world looks up.

/// Runs `steps` (each an edit of files that stay: inside bodies, or adding,
/// removing or renaming units) through a kept world and checks that each
/// one after the first index updated the world in place.
fn edits_patch_the_kept_world(fixture: &str, steps: &[&[Edit]]) {
    let kept = kept_world_matches_cold_index(fixture, Against::ReadAgainAndCold, steps);
    assert_eq!(
        kept.patches(),
        steps.len() as u64,
        "{fixture}: every edit of files that stay updates the kept world in place"
    );
}

#[test]
fn python_body_edits_update_the_kept_world_in_place() {
    edits_patch_the_kept_world(
        "python",
        &[
            &[Edit::Replace(
                "pkg/models.py",
                "        self.lexer.tokens()  # calls: Lexer.tokens\n",
                "        # two lines now\n        self.lexer.parse()\n",
            )],
            &[Edit::Replace(
                "app.py",
                "    lx.parse()  # calls: Lexer.parse\n",
                "    lx.tokens()\n    lx.parse()\n    q.run()\n",
            )],
            &[Edit::Replace(
                "pkg/models.py",
                "        return self.step()  # calls: Base.step\n",
                "        # every later unit of the file moves\n\n        return self.step()\n",
            )],
            &[
                Edit::Replace(
                    "pkg/models.py",
                    "        # two lines now\n        self.lexer.parse()\n",
                    "        self.lexer.tokens()\n",
                ),
                Edit::Replace("app.py", "    q.run()\n", "    q.step()\n"),
            ],
            // A new field and a call through it: the file's share of the
            // world (its fields) must be made again.
            &[
                Edit::Replace(
                    "pkg/models.py",
                    "        self.lexer = Lexer()  # calls: Lexer\n",
                    "        self.lexer = Lexer()\n        self.other = Lexer()\n",
                ),
                Edit::Replace(
                    "pkg/models.py",
                    "        return self.run()  # calls: Base.run\n",
                    "        self.other.parse()\n        return self.run()\n",
                ),
            ],
        ],
    );
}

#[test]
fn rust_body_edits_update_the_kept_world_in_place() {
    edits_patch_the_kept_world(
        "rust",
        &[
            &[Edit::Replace(
                "src/lib.rs",
                "    p.len() // calls: Parser.len\n",
                "    let _moved = 1;\n    p.len() + p.parse()\n",
            )],
            &[Edit::Replace(
                "src/gated.rs",
                "        name.len()\n",
                "        // the impls below move\n\n        name.len()\n",
            )],
            &[Edit::Replace(
                "src/gated.rs",
                "            spawn_task(\"nested\") // calls: spawn_task\n",
                "            let _n = 2;\n            spawn_task(\"nested\") + start(&Runner { n: 1 })\n",
            )],
        ],
    );
}

#[test]
fn go_body_edits_update_the_kept_world_in_place() {
    edits_patch_the_kept_world(
        "go",
        &[
            &[Edit::Replace(
                "main.go",
                "\tc.Area()             // calls: Circle.Area\n",
                "\t// moved\n\tc.Area()\n\tq.Area()\n",
            )],
            &[Edit::Replace(
                "main.go",
                "func total(s sh.Shape) int {\n",
                "// total moves down\nfunc total(s sh.Shape) int {\n",
            )],
        ],
    );
}

#[test]
fn typescript_body_edits_update_the_kept_world_in_place() {
    edits_patch_the_kept_world(
        "typescript",
        &[&[Edit::Replace(
            "src/index.ts",
            "  l.parse(); // calls: Lexer.parse\n",
            "  // moved\n  l.parse();\n  q.parse();\n",
        )]],
    );
}

// Edits that add, remove or rename units: the store gives each such file a
// new block of unit ids, above every other, and the kept world replaces
// that file's units (`World::replace_units`: the others' indices close up
// over the gap) instead of being built again. After each step the graph
// must be what a cold index of the tree stores. Sequences patch a world
// that was itself patched, and mix a file that keeps its units with one
// that does not.

#[test]
fn python_unit_edits_update_the_kept_world_in_place() {
    // Then one file keeps its units (a body edit) while the other does
    // not, and a method is added to a class.
    let mixed: &[Edit] = &[
        Edit::Replace(
            "pkg/models.py",
            "\n\ndef added():\n    return Lexer()\n",
            "",
        ),
        Edit::Replace(
            "app.py",
            "    lx.parse()  # calls: Lexer.parse\n",
            "    lx.tokens2()\n    lx.parse()\n",
        ),
    ];
    let add_method: &[Edit] = &[Edit::Replace(
        "pkg/models.py",
        "class Lexer:\n",
        "class Lexer:\n    def step(self):\n        return 1\n\n",
    )];
    edits_patch_the_kept_world(
        "python",
        &[PYTHON_UNIT_EDITS, &[mixed, add_method]].concat(),
    );
}

#[test]
fn rust_unit_edits_update_the_kept_world_in_place() {
    edits_patch_the_kept_world("rust", RUST_UNIT_EDITS);
}

#[test]
fn go_unit_edits_update_the_kept_world_in_place() {
    // Then a method leaves its type's file.
    let remove: &[Edit] = &[Edit::Replace(
        "shapes/shapes.go",
        "func (c Circle) Area() int { return c.r }\n",
        "",
    )];
    edits_patch_the_kept_world("go", &[GO_UNIT_EDITS, &[remove]].concat());
}

#[test]
fn typescript_unit_edits_update_the_kept_world_in_place() {
    edits_patch_the_kept_world("typescript", TYPESCRIPT_UNIT_EDITS);
}

// A watcher that starts on a complete index: its first run resolves
// nothing (nothing is pending), so no pass keeps a world, and the first
// edit after it used to build one from every file's rows. `KeptRows::warm`
// builds it before that edit (issue 28 item 5); the edit must then update
// it in place and store what a cold index stores.

#[test]
fn the_first_edit_after_a_warm_up_updates_the_world_in_place() {
    for (fixture, steps) in [
        ("python", PYTHON_UNIT_EDITS),
        ("rust", RUST_UNIT_EDITS),
        ("go", GO_UNIT_EDITS),
        ("typescript", TYPESCRIPT_UNIT_EDITS),
    ] {
        let (_tree, root) = fixture_copy(fixture);
        let db = tempfile::tempdir().expect("db");
        let mut store = open(db.path());
        // The index another process left complete.
        run_index(&root, &mut store, &options(), &NoProgress, None).expect("index");
        // The watcher's first run: nothing changed since.
        let mut kept = KeptRows::default();
        run_index(&root, &mut store, &options(), &NoProgress, Some(&mut kept)).expect("index");
        assert!(
            !kept.has_world(),
            "{fixture}: nothing was pending, so no pass kept a world"
        );
        kept.warm(&store, &root).expect("warm");
        assert!(kept.has_world(), "{fixture}: the warm-up keeps a world");
        for (step, edits) in steps.iter().enumerate() {
            for edit in *edits {
                apply(&root, edit);
            }
            run_index(&root, &mut store, &options(), &NoProgress, Some(&mut kept)).expect("index");
            assert_cold_index_edges(&root, &store, &format!("{fixture} step {step}, warmed"));
        }
        assert_eq!(
            kept.patches(),
            steps.len() as u64,
            "{fixture}: every edit, the first one too, updates the warmed world in place"
        );
    }
}

// An edit can arrive while the warm-up builds: the run waits for the kept
// rows' lock the warm-up holds, then updates the warmed world (or, when it
// took the lock first, builds one itself and the warm-up finds it kept).
// Either order must store a cold index's edges and leave a world kept.
// Each step starts a new engine on the complete index, so each edit races
// a warm-up of its own.

#[test]
fn an_edit_that_arrives_during_the_warm_up_stores_a_cold_index_edges() {
    use crate::engine::{Engine, EngineOptions};
    for (fixture, steps) in [("python", PYTHON_UNIT_EDITS), ("go", GO_UNIT_EDITS)] {
        let (_tree, root) = fixture_copy(fixture);
        Engine::open(&root, EngineOptions::default())
            .expect("open")
            .index(None, &NoProgress)
            .expect("index");
        for (step, edits) in steps.iter().enumerate() {
            let engine = Engine::open(&root, EngineOptions::default()).expect("open");
            engine.keep_resolver_world();
            let warm_up = engine.warm_resolver_world().expect("a warm-up thread");
            for edit in *edits {
                apply(&root, edit);
            }
            engine.index(None, &NoProgress).expect("the edit's run");
            warm_up.join().expect("the warm-up ends");
            assert!(
                engine.resolver_world_is_kept(),
                "{fixture} step {step}: a world is kept after the warm-up and the run"
            );
            let live = open(&root.join(".canopy"));
            assert_cold_index_edges(&root, &live, &format!("{fixture} step {step}, raced"));
        }
    }
}
