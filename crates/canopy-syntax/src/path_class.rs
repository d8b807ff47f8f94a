//! What kind of code a path holds, judged from its name alone: test code,
//! vendored copies of other projects, or minified / generated files. One
//! classifier, so ranking (evidence and context packs) and the graph
//! analyses (`unused_symbols`, `hotspots`) agree on what "test code" means.

use serde::{Deserialize, Serialize};

/// Why a path is not the repository's own hand-written source.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PathClass {
    /// A copy of another project (`vendor/`, `node_modules/`, `third_party/`, …).
    Vendored,
    /// Minified or generated output (`*.min.js`, `*.bundle.js`, `*.pb.go`, `*_pb2.py`, …).
    Generated,
    /// Test code (see [`is_test_path`]).
    Test,
}

/// Directory names whose contents are other projects' code.
const VENDOR_DIRS: &[&str] = &[
    "vendor",
    "vendored",
    "node_modules",
    "bower_components",
    "jspm_packages",
    "third_party",
    "third-party",
    "thirdparty",
];

/// File-name endings of minified bundles and code generators' output.
const GENERATED_SUFFIXES: &[&str] = &[
    ".min.js",
    ".min.mjs",
    ".min.cjs",
    ".min.css",
    "-min.js",
    ".bundle.js",
    ".pb.go",
    ".pb.cc",
    ".pb.h",
    "_pb2.py",
    "_pb2_grpc.py",
    ".g.dart",
];

/// The class of `path` (`/`-separated, relative to the repository root),
/// or `None` for the repository's own source. A vendored test file is
/// vendored: the stronger reason wins (vendored, then generated, then test).
pub fn classify(path: &str) -> Option<PathClass> {
    if is_vendored_path(path) {
        Some(PathClass::Vendored)
    } else if is_generated_path(path) {
        Some(PathClass::Generated)
    } else if is_test_path(path) {
        Some(PathClass::Test)
    } else {
        None
    }
}

/// Whether a directory on the path is a vendored-code directory
/// (`vendor`, `node_modules`, `third_party`, `bower_components`, …).
pub fn is_vendored_path(path: &str) -> bool {
    let mut dirs: Vec<&str> = path.split('/').collect();
    dirs.pop();
    dirs.iter()
        .any(|d| VENDOR_DIRS.iter().any(|v| d.eq_ignore_ascii_case(v)))
}

/// Whether the file is minified or generated, by its name (`*.min.js`,
/// `*.bundle.js`, `*.pb.go`, `*_pb2.py`, `*.generated.*`, …).
pub fn is_generated_path(path: &str) -> bool {
    let file = path.rsplit('/').next().unwrap_or(path).to_ascii_lowercase();
    GENERATED_SUFFIXES.iter().any(|s| file.ends_with(s)) || file.contains(".generated.")
}

/// Whether a path is test code: a path word (split on `/ . _ -`) is
/// test/tests/testing/testdata/spec/conftest, which covers `tests/…`,
/// `test_*.py`, `*_test.go`, `*.spec.ts`, `*.test.js`, `__tests__/…` and
/// `conftest.py`.
pub fn is_test_path(path: &str) -> bool {
    path.to_ascii_lowercase()
        .split(['/', '.', '_', '-'])
        .any(|w| {
            matches!(
                w,
                "test" | "tests" | "testing" | "testdata" | "spec" | "conftest"
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_paths_are_recognised() {
        for p in [
            "tests/test_query.py",
            "pkg/query_test.go",
            "src/a.spec.ts",
            "src/a.test.js",
            "x/__tests__/a.js",
            "testing/utils.py",
            "pkg/testdata/input.go",
            "conftest.py",
        ] {
            assert!(is_test_path(p), "{p}");
            assert_eq!(classify(p), Some(PathClass::Test), "{p}");
        }
        for p in [
            "src/query.py",
            "django/db/models/sql/compiler.py",
            "latest/attest.rs",
            "src/contest.py",
        ] {
            assert!(!is_test_path(p), "{p}");
            assert_eq!(classify(p), None, "{p}");
        }
    }

    #[test]
    fn vendored_and_generated_paths_are_recognised() {
        for p in [
            "vendor/github.com/x/y.go",
            "web/node_modules/lodash/index.js",
            "third_party/zlib/inflate.c",
            "src/Third-Party/a.ts",
            "node_modules/pkg/test/a.js",
        ] {
            assert_eq!(classify(p), Some(PathClass::Vendored), "{p}");
        }
        for p in [
            "static/app.min.js",
            "dist/site.bundle.js",
            "api/service.pb.go",
            "api/service_pb2.py",
            "src/Model.generated.cs",
        ] {
            assert_eq!(classify(p), Some(PathClass::Generated), "{p}");
        }
        // A file named like a vendor directory is not in one.
        for p in ["src/vendor.py", "vendoring/a.go", "src/admin.js"] {
            assert_eq!(classify(p), None, "{p}");
        }
    }
}
