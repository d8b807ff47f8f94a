//! The measuring knob `CANOPY_PACK_TUNING=local=N` (same-file callees of the
//! first handles, off by default). Its own test binary: the knob is an
//! environment variable, and no other test may run while it is set.

use canopy_test_support::repo::write;

use canopy_core::index::NoProgress;
use canopy_core::pack::EvidencePack;
use canopy_core::{Engine, EngineOptions};

mod pack_knobs;

const NORMAL_FORMS: &str = "def hermite_normal_form(A, D=None):
    \"\"\"Compute the Hermite normal form of the integer matrix A.\"\"\"
    if D is not None:
        return _modular_form(A, D)
    return _reduce_columns(A)


def _reduce_columns(A):
    rows = len(A)
    pivots = []
    for i in range(rows - 1, -1, -1):
        if A[i][0] == 0:
            continue
        pivots.append(i)
    return [A[i] for i in pivots]


def _modular_form(A, D):
    return [[x % D for x in row] for row in A]


def smith_normal_form(matrix):
    \"\"\"Smith normal form of a matrix: diagonal matrix of invariant factors of the matrix.\"\"\"
    return invariant_factors(matrix)


def invariant_factors(matrix):
    \"\"\"Invariant factors of a matrix, from its Smith normal form matrix.\"\"\"
    return [row[0] for row in matrix]
";

const QUESTION: &str = "hermite_normal_form drops rows of the matrix
When the matrix has a zero first column, hermite_normal_form returns fewer rows than the matrix has.";

fn names(p: &EvidencePack) -> Vec<String> {
    p.handles
        .iter()
        .map(|h| h.qualified_name.clone().unwrap_or_default())
        .collect()
}

#[test]
fn a_first_function_brings_in_the_helper_it_calls_in_its_file_only_with_the_knob() {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    write(r, "matrices/normalforms.py", NORMAL_FORMS);
    write(
        r,
        "other/display.py",
        "def show_matrix(matrix):\n    \"\"\"Print a matrix row by row: the rows of the matrix.\"\"\"\n    for row in matrix:\n        print(row)\n",
    );
    write(
        r,
        "other/shapes.py",
        "def matrix_shape(matrix):\n    \"\"\"Rows and columns of a matrix.\"\"\"\n    return len(matrix), len(matrix[0])\n",
    );
    let e = Engine::open(r, EngineOptions::default()).unwrap();
    e.index(None, &NoProgress).unwrap();
    let pack = |e: &Engine| pack_knobs::pack_for(e, QUESTION);

    // Off (the default): the file's two slots go to the two best matches.
    let off = names(&pack(&e));
    assert_eq!(off[0], "hermite_normal_form", "{off:?}");
    assert!(!off.contains(&"_reduce_columns".to_string()), "{off:?}");

    // SAFETY: this binary holds this one test, so no other thread reads the
    // environment while it changes.
    unsafe { std::env::set_var("CANOPY_PACK_TUNING", "local=2") };
    let on = names(&pack(&e));
    unsafe { std::env::remove_var("CANOPY_PACK_TUNING") };
    // The helper the first function calls comes in just below it, over the
    // per-file cap; a same-file function it calls that the question does not
    // match (`_modular_form`) does not, and the other files stay in order.
    assert_eq!(
        on[..2],
        ["hermite_normal_form", "_reduce_columns"],
        "{on:?}"
    );
    assert!(!on.contains(&"_modular_form".to_string()), "{on:?}");
    let files = |p: &[String]| -> Vec<String> {
        p.iter()
            .filter(|n| n.as_str() == "matrix_shape" || n.as_str() == "show_matrix")
            .cloned()
            .collect()
    };
    assert_eq!(files(&off), files(&on), "{off:?} / {on:?}");
}
