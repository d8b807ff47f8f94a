//! End-to-end tests of the `canopy` binary: JSON output contracts, repo-root
//! discovery from subdirectories, error messages, and crash safety under SIGKILL.

use std::fs;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use canopy_test_support::git::git as git_in;
use canopy_test_support::process::KillOnDrop;
use canopy_test_support::repo::write;
use canopy_test_support::serve::{Opts, Server};
use canopy_test_support::{canopy_bin, eventually};
use serde_json::Value;

/// Commits everything in `root`.
fn commit_all(root: &Path) {
    canopy_test_support::git::commit_all(root, "fixture");
}

fn canopy(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_canopy"))
        .current_dir(dir)
        .args(args)
        .env("CANOPY_LOG", "warn")
        .output()
        .expect("canopy runs")
}

fn json(dir: &Path, args: &[&str]) -> Value {
    let out = canopy(dir, args);
    assert!(
        out.status.success(),
        "canopy {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout of {args:?} is not one JSON document ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

fn git_repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let ok = Command::new("git")
        .arg("-C")
        .arg(dir.path())
        .args(["init", "-q"])
        .status()
        .unwrap();
    assert!(ok.success());
    write(
        dir.path(),
        "src/auth/controller.ts",
        "export class AuthController {\n  authenticate(req: Request) {\n    return validateToken(req.headers.token);\n  }\n}\n\nexport function validateToken(token: string): boolean {\n  return token.length > 0;\n}\n",
    );
    write(
        dir.path(),
        "src/routes/login.ts",
        "import { AuthController } from '../auth/controller';\nconst authController = new AuthController();\nexport const login = (req: Request) => {\n  const result = authController.authenticate(req);\n  return result;\n};\n",
    );
    write(
        dir.path(),
        "docs/guide.md",
        "# Guide\n\nIntro.\n\n## Install\n\nRun the installer.\n",
    );
    dir
}

#[test]
fn index_status_query_expand_speak_json() {
    let repo = git_repo();
    let root = repo.path();
    let report = json(root, &["index", "--json"]);
    assert_eq!(report["files_indexed"], 3);
    assert_eq!(report["file_discovery"], "git_ls_files");

    let status = json(root, &["status", "--json"]);
    for key in [
        "files_indexed",
        "total_tokens",
        "index_size_bytes",
        "last_indexed",
        "schema_version",
        "repo_root",
        "file_discovery",
        "languages",
        "skipped",
    ] {
        assert!(status.get(key).is_some(), "status lacks {key}: {status}");
    }
    assert_eq!(status["files_indexed"], 3);
    assert_eq!(status["languages"]["typescript"], 2);
    assert_eq!(status["languages"]["markdown"], 1);

    // From a subdirectory, with the seed's field names.
    let sub = root.join("src/routes");
    let result = json(&sub, &["query", "--symbol", "authenticate", "--json"]);
    let handles = result["handles"].as_array().unwrap();
    assert_eq!(handles.len(), 1);
    let h = &handles[0];
    assert_eq!(h["file_path"], "src/auth/controller.ts");
    assert_eq!(h["node_type"], "method");
    assert_eq!(h["line_range"], serde_json::json!([2, 4]));
    assert!(h["id"].as_str().unwrap().len() == 25);
    for key in ["span", "token_count", "preview"] {
        assert!(h.get(key).is_some());
    }
    assert_eq!(result["total_matches"], 1);
    assert_eq!(result["truncated"], false);
    canopy_test_support::assert_handles_name_what_they_hold(
        &result["handles"],
        "AuthController.authenticate",
    );
    // Pack handles too (issue 26): name, qualified name, kind, first line.
    let pack = json(
        root,
        &["pack", "--pattern", "authenticate request token", "--json"],
    );
    canopy_test_support::assert_handles_name_what_they_hold(
        &pack["handles"],
        "AuthController.authenticate",
    );

    let id = h["id"].as_str().unwrap();
    let out = canopy(root, &["expand", id]);
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "authenticate(req: Request) {\n    return validateToken(req.headers.token);\n  }"
    );
    // --json: each expansion carries the generation and time of the index it came from.
    let expanded = json(root, &["--json", "expand", id]);
    assert_eq!(expanded[0]["handle_id"], id);
    assert!(
        expanded[0]["generation"].as_u64().is_some_and(|g| g >= 1),
        "{expanded}"
    );
    assert!(expanded[0]["indexed_at"].is_string(), "{expanded}");

    let refs = json(
        root,
        &[
            "query",
            "--symbol",
            "authenticate",
            "--kind",
            "reference",
            "--json",
        ],
    );
    let r = &refs["ref_handles"][0];
    assert_eq!(r["file_path"], "src/routes/login.ts");
    assert_eq!(r["qualifier"], "authController");
    assert_eq!(r["ref_type"], "call");
    assert_eq!(r["line_range"], serde_json::json!([4, 4]));
    assert_eq!(
        r["preview"],
        "const result = authController.authenticate(req);"
    );

    let text = json(root, &["query", "--pattern", "installer", "--json"]);
    assert_eq!(text["handles"][0]["file_path"], "docs/guide.md");
}

#[test]
fn errors_are_clear_and_not_on_stdout() {
    let repo = git_repo();
    let root = repo.path();
    canopy(root, &["index", "-q"]);
    let out = canopy(root, &["expand", "h0123456789abcdef01234567"]);
    assert!(!out.status.success());
    assert!(out.stdout.is_empty());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("handle not found"), "{err}");
    assert!(err.contains("hint:"), "{err}");

    let id = json(root, &["query", "--symbol", "validateToken", "--json"])["handles"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    write(root, "src/auth/controller.ts", "// rewritten\n");
    let out = canopy(root, &["expand", &id]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("stale index"), "{err}");
    assert!(err.contains("controller.ts changed since"), "{err}");
    assert!(err.contains("canopy invalidate"), "{err}");
    // A deleted file says so, not "changed" (issue 32, U13).
    std::fs::remove_file(root.join("src/auth/controller.ts")).unwrap();
    let out = canopy(root, &["expand", &id]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("controller.ts was deleted since"), "{err}");

    // `expand` with no ids is refused with what to pass, not an empty
    // `expand:` (issue 32, U7).
    let out = canopy(root, &["expand"]);
    assert!(!out.status.success());
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("<IDS>") || err.contains("handle id"), "{err}");

    // A pattern may start with a dash (issue 32, U5).
    for pattern in ["-> None", "--verbose"] {
        let answer = json(root, &["query", "--pattern", pattern, "--json"]);
        assert!(answer["handles"].is_array(), "{pattern}: {answer}");
        let answer = json(root, &["query", "-p", pattern, "--json"]);
        assert!(answer["handles"].is_array(), "{pattern}: {answer}");
    }

    let out = canopy(root, &["query", "--json"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("at least one of"));
    let out = canopy(
        root,
        &["query", "--pattern", "x", "--glob", "src/[", "--json"],
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("invalid glob"));
    let out = canopy(root, &["query", "--query", "(grep \"x\"", "--json"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("expected ')'"));
}

#[test]
fn a_killed_indexer_leaves_a_consistent_queryable_index() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let files = 3000;
    for i in 0..files {
        let body: String = (0..30)
            .map(|j| format!("    total += helper_{i}_{j}(value, {j}) * {j};\n"))
            .collect();
        write(
            root,
            &format!("pkg{}/module_{i}.py", i % 40),
            format!(
                "\"\"\"Module {i}.\"\"\"\n\nclass Widget{i}:\n    def compute_{i}(self, value):\n        total = 0\n{body}        return total\n\n\ndef unique_symbol_{i}():\n    return Widget{i}()\n"
            ),
        );
    }
    let mut child = KillOnDrop(
        Command::new(env!("CARGO_BIN_EXE_canopy"))
            .current_dir(root)
            .args(["index", "--quiet"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    // Wait until some batches are committed (or the run ends), then SIGKILL.
    // The status polls beside the build are what an agent does while it
    // waits: they must neither wait for the indexer nor slow it (N10: each
    // poll took the write lock and turned the build into table scans).
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Ok(Some(_)) = child.0.try_wait() {
            break;
        }
        let out = canopy(root, &["status", "--json"]);
        if out.status.success() {
            let status: Value = serde_json::from_slice(&out.stdout).unwrap();
            if status["files_indexed"].as_u64().unwrap_or(0) > 0 {
                break;
            }
        }
        assert!(Instant::now() < deadline, "indexer made no progress");
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.0.kill(); // SIGKILL on Unix
    let _ = child.0.wait();

    // The index opens, answers status and queries consistently.
    let status = json(root, &["status", "--json"]);
    let indexed = status["files_indexed"].as_u64().unwrap();
    assert!(indexed > 0 && indexed <= files);
    let q = json(
        root,
        &["query", "--pattern", "total", "--limit", "5", "--json"],
    );
    assert!(q["total_matches"].as_u64().unwrap() > 0);
    // Every handle returned expands to exactly what it points at.
    for h in q["handles"].as_array().unwrap() {
        let out = canopy(root, &["expand", h["id"].as_str().unwrap()]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // A second run completes the index.
    let report = json(root, &["index", "--json"]);
    assert_eq!(
        report["files_indexed"].as_u64().unwrap() + report["files_unchanged"].as_u64().unwrap(),
        files
    );
    let status = json(root, &["status", "--json"]);
    assert_eq!(status["files_indexed"], files);
    assert_eq!(status["index_coverage"], 1.0);
    let found = json(root, &["query", "--symbol", "unique_symbol_2999", "--json"]);
    assert_eq!(found["handles"][0]["file_path"], "pkg39/module_2999.py");
}

#[test]
fn service_url_sends_commands_to_a_running_service() {
    let repo = git_repo();
    let root = repo.path();
    // Committed: nothing for the local overlay, every answer is the service's.
    commit_all(root);
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(canopy_bin!(), data.path(), &Opts::default());
    let url = server.url.clone();
    // No --service-token: the CLI reads the token the service generated in
    // its data directory, as it does on the service's machine.
    let remote = |args: &[&str]| {
        let mut all = vec!["--service-url", url.as_str()];
        all.extend_from_slice(args);
        Command::new(env!("CARGO_BIN_EXE_canopy"))
            .current_dir(root)
            .args(&all)
            .env("CANOPY_LOG", "warn")
            .env("CANOPY_DATA_DIR", data.path())
            .env_remove("CANOPY_SERVICE_TOKEN")
            .output()
            .expect("canopy runs")
    };
    let out = remote(&["index", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // People get lines, not the service's JSON (issue 32, U6).
    let out = remote(&["status"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!text.trim_start().starts_with('{'), "{text}");
    for line in ["service:", "state:          ready", "files_indexed:"] {
        assert!(text.contains(line), "{line}: {text}");
    }
    let out = remote(&["query", "--symbol", "validateToken", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let result: Value = serde_json::from_slice(&out.stdout).unwrap();
    let h = &result["handles"][0];
    assert_eq!(h["file_path"], "src/auth/controller.ts");
    assert_eq!(h["source"], "service");
    assert!(h["generation"].as_u64().unwrap() >= 1);
    let out = remote(&["expand", h["id"].as_str().unwrap()]);
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("export function validateToken"));
    let out = remote(&["pack", "--pattern", "validate token length", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Context packs come from the service too (POST /context).
    let out = remote(&[
        "context",
        "validate token length",
        "--budget",
        "300",
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ctx: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(ctx["generation"].as_u64().is_some_and(|g| g >= 1), "{ctx}");
    assert!(
        ctx["total_tokens"]
            .as_u64()
            .is_some_and(|t| t > 0 && t <= 300),
        "{ctx}"
    );
    let human = remote(&["context", "validate token length", "--budget", "300"]);
    let human = String::from_utf8_lossy(&human.stdout);
    assert!(human.starts_with("{\"budget_tokens\":300,"), "{human}");
    assert!(canopy_core::tokens::count_tokens(&human) <= 300, "{human}");
    // A refusal by the service keeps its code and hint in the CLI's JSON
    // error, and its hint is printed once (issue 32).
    let out = remote(&["expand", "h00000000000000000000dead", "--json"]);
    assert!(!out.status.success());
    let refused: Value = serde_json::from_slice(&out.stdout).unwrap();
    let code = refused["error"]["code"].as_str().unwrap();
    assert!(
        code.chars().all(|c| c.is_ascii_lowercase() || c == '_'),
        "{refused}"
    );
    assert!(
        refused["error"]["hint"]
            .as_str()
            .is_some_and(|h| !h.is_empty()),
        "{refused}"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.matches("hint:").count(), 1, "{err}");
    server.kill();
    let unregistered = tempfile::tempdir().unwrap();
    let out = canopy(
        unregistered.path(),
        &[
            "--service-url",
            "http://127.0.0.1:9",
            "query",
            "--symbol",
            "x",
        ],
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot reach the Canopy service"), "{err}");
    // The cause once, not twice (issue 32, U6).
    assert_eq!(err.matches("Connection refused").count(), 1, "{err}");
    // A script polling `status --json` learns what failed and what to do,
    // not a bare "Error" with no hint (issue 32).
    let out = canopy(
        unregistered.path(),
        &["--service-url", "http://127.0.0.1:9", "status", "--json"],
    );
    assert!(!out.status.success());
    let failed: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(failed["error"]["code"], "ServiceUnreachable", "{failed}");
    let hint = failed["error"]["hint"].as_str().unwrap_or_default();
    assert!(hint.contains("canopy serve"), "{failed}");
}

/// Issue 15 item 3: a thousand copies of one word are one search; too many
/// distinct patterns are a clear error, not minutes of work.
#[test]
fn repeated_patterns_are_searched_once_and_too_many_are_refused() {
    let dir = git_repo();
    let one = json(dir.path(), &["query", "--patterns", "token", "--json"]);
    let mut args = vec!["query", "--json", "--patterns"];
    args.extend(std::iter::repeat_n("token", 1000));
    let many = json(dir.path(), &args);
    assert_eq!(one["total_matches"], many["total_matches"]);
    assert_eq!(one["handles"], many["handles"]);

    let words: Vec<String> = (0..40).map(|i| format!("word{i}")).collect();
    let mut args = vec!["query", "--patterns"];
    args.extend(words.iter().map(String::as_str));
    let out = canopy(dir.path(), &args);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("at most 32"), "{stderr}");
}

/// Issue 15 item 1: well-known secret files are never indexed, even when a
/// repository holds them, and status reports them as skipped with reason
/// `secret`.
#[test]
fn secret_files_are_skipped_and_reported() {
    let dir = git_repo();
    let marker = "SUPERSECRETVALUE";
    write(dir.path(), ".env", format!("API_TOKEN={marker}\n"));
    write(
        dir.path(),
        "deploy/server.pem",
        format!("-----BEGIN PRIVATE KEY-----\n{marker}\n"),
    );
    write(dir.path(), ".ssh/id_ed25519", format!("{marker}\n"));
    write(
        dir.path(),
        ".bash_history",
        format!("export TOKEN={marker}\n"),
    );
    write(
        dir.path(),
        "src/env_reader.py",
        "def read_env():\n    return 'API_TOKEN'\n",
    );
    let report = json(dir.path(), &["index", "--json"]);
    assert_eq!(report["skipped"]["secret"], 4, "{report}");
    let status = json(dir.path(), &["status", "--json"]);
    assert_eq!(status["skipped"]["secret"], 4, "{status}");
    let hits = json(dir.path(), &["query", "--pattern", marker, "--json"]);
    assert_eq!(hits["total_matches"], 0, "{hits}");
    // Ordinary files with similar names are indexed.
    let code = json(dir.path(), &["query", "--symbol", "read_env", "--json"]);
    assert_eq!(
        code["handles"][0]["file_path"], "src/env_reader.py",
        "{code}"
    );
}

/// The `{"error": …}` document a failed `--json` command prints on stdout.
fn json_error(dir: &Path, args: &[&str]) -> Value {
    let out = canopy(dir, args);
    assert!(!out.status.success(), "canopy {args:?} should fail");
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout of failed {args:?} is not one JSON document ({e}): {:?}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    assert!(doc["error"]["message"].is_string(), "{doc}");
    assert!(doc["error"]["hint"].is_string(), "{doc}");
    doc
}

#[test]
fn json_errors_are_one_document_on_stdout_with_a_code() {
    let repo = git_repo();
    let root = repo.path();
    canopy(root, &["index", "-q"]);
    let doc = json_error(root, &["expand", "h0123456789abcdef01234567", "--json"]);
    assert_eq!(doc["error"]["code"], "HandleNotFound");
    // A typo in an id is malformed, not a unit that went away.
    let doc = json_error(root, &["expand", "h0123-oops", "--json"]);
    assert_eq!(doc["error"]["code"], "MalformedHandle");
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .contains("malformed"),
        "{doc}"
    );
    let doc = json_error(
        root,
        &["query", "--pattern", "x", "--glob", "src/[", "--json"],
    );
    assert_eq!(doc["error"]["code"], "GlobPattern");
    let doc = json_error(root, &["query", "--query", "(grep \"x\"", "--json"]);
    assert_eq!(doc["error"]["code"], "QueryParse");
    // A usage error (unknown flag) too, exit code 2 as clap reports it.
    let out = canopy(root, &["query", "--no-such-flag", "--json"]);
    assert_eq!(out.status.code(), Some(2));
    let doc: Value = serde_json::from_slice(&out.stdout).expect("usage error as JSON");
    assert_eq!(doc["error"]["code"], "Usage");
    // No escape codes in captured (non-terminal) stderr.
    let out = canopy(root, &["expand", "nothex"]);
    assert!(
        !out.stderr.contains(&0x1b),
        "{:?}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_folder_outside_git_is_not_indexed_unless_named() {
    let dir = tempfile::tempdir().unwrap();
    let plain = dir.path().join("notes");
    write(
        &plain,
        "todo.py",
        "def remember_milk():\n    return 'milk'\n",
    );
    write(
        &plain,
        "sub/more.py",
        "def remember_eggs():\n    return 'eggs'\n",
    );

    // Reading commands from a plain folder refuse, create nothing, and say how.
    let doc = json_error(&plain, &["query", "--symbol", "remember_milk", "--json"]);
    assert_eq!(doc["error"]["code"], "NotARepository", "{doc}");
    assert!(
        doc["error"]["hint"]
            .as_str()
            .unwrap()
            .contains("canopy index")
    );
    let out = canopy(&plain, &["pack", "--pattern", "milk"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not inside a git repository"));
    json_error(&plain, &["status", "--json"]);
    assert!(
        !plain.join(".canopy").exists(),
        "a read-only command created .canopy"
    );

    // `canopy index` by hand is the opt-in; afterwards the folder answers.
    let report = json(&plain, &["index", "--json"]);
    assert_eq!(report["files_indexed"], 2);
    let hits = json(&plain, &["query", "--symbol", "remember_milk", "--json"]);
    assert_eq!(hits["handles"][0]["file_path"], "todo.py");

    // A subfolder does not silently inherit the parent's index outside git …
    let doc = json_error(
        &plain.join("sub"),
        &["query", "--symbol", "remember_eggs", "--json"],
    );
    assert_eq!(doc["error"]["code"], "NotARepository");
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .contains("an index exists above it")
    );
    assert!(!plain.join("sub/.canopy").exists());
    // … but --root names it.
    let root_arg = plain.to_str().unwrap();
    let hits = json(
        &plain.join("sub"),
        &[
            "query",
            "--root",
            root_arg,
            "--symbol",
            "remember_eggs",
            "--json",
        ],
    );
    assert_eq!(hits["handles"][0]["file_path"], "sub/more.py");
}

#[test]
fn status_never_creates_an_index() {
    let repo = git_repo();
    let root = repo.path();
    let status = json(root, &["status", "--json"]);
    assert_eq!(status["indexed"], false, "{status}");
    assert_eq!(status["files_indexed"], 0);
    assert!(!root.join(".canopy").exists(), "status created .canopy");
    let out = canopy(root, &["status"]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("canopy index"));
    assert!(!root.join(".canopy").exists());
    // A query in a git repository indexes lazily, as before.
    json(root, &["query", "--symbol", "validateToken", "--json"]);
    assert_eq!(json(root, &["status", "--json"])["indexed"], true);
}

#[test]
fn the_filesystem_root_and_the_home_folder_are_never_indexed() {
    let home = tempfile::tempdir().unwrap();
    write(
        home.path(),
        ".ssh/id_ed25519",
        "-----BEGIN OPENSSH PRIVATE KEY-----\n",
    );
    write(home.path(), "notes.txt", "my notes\n");
    let run = |dir: &Path, args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_canopy"))
            .current_dir(dir)
            .args(args)
            .env("HOME", home.path())
            .env_remove("CANOPY_ROOT")
            .output()
            .expect("canopy runs")
    };
    for args in [
        &["index", "--json"][..],
        &["query", "--pattern", "notes", "--json"][..],
        &["status", "--json"][..],
    ] {
        let out = run(home.path(), args);
        assert!(
            !out.status.success(),
            "{args:?} in the home folder succeeded"
        );
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(
            ["UnsafeRoot", "NotARepository"].contains(&doc["error"]["code"].as_str().unwrap()),
            "{doc}"
        );
    }
    let out = run(home.path(), &["index", "--root", "/", "--json"]);
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["error"]["code"], "UnsafeRoot", "{doc}");
    let out = run(home.path(), &["index", "--json"]);
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["error"]["code"], "UnsafeRoot", "{doc}");
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .contains("home folder")
    );
    assert!(!home.path().join(".canopy").exists());
}

#[test]
fn a_damaged_index_is_reported_by_code_and_rebuilt_by_the_next_index() {
    let repo = git_repo();
    let root = repo.path();
    for f in 0..40 {
        let mut text = String::new();
        for i in 0..30 {
            text.push_str(&format!(
                "def damage_probe_{f}_{i}(value):\n    \"\"\"Doubles value {i} of {f}.\"\"\"\n    return value * 2\n\n"
            ));
        }
        write(root, &format!("pkg/m{f:02}.py"), &text);
    }
    json(root, &["index", "--json"]);
    // Damage the second half of the file (the schema pages stay readable).
    let db = root.join(".canopy/index.db");
    let conn = rusqlite_free_checkpoint(&db);
    assert!(conn, "checkpoint");
    let mut bytes = fs::read(&db).unwrap();
    let half = bytes.len() / 2;
    for (i, b) in bytes.iter_mut().enumerate().skip(half) {
        *b = (i * 31 % 251) as u8;
    }
    fs::write(&db, bytes).unwrap();

    let doc = json_error(root, &["query", "--pattern", "doubles value", "--json"]);
    assert_eq!(doc["error"]["code"], "IndexDamaged", "{doc}");
    assert!(
        doc["error"]["hint"]
            .as_str()
            .unwrap()
            .contains("canopy index --rebuild")
    );
    let status = json(root, &["status", "--json"]);
    assert!(
        status["damaged"].is_string(),
        "status hides the damage: {status}"
    );
    let report = json(root, &["index", "--json"]);
    assert!(report["rebuilt"].is_string(), "{report}");
    let hits = json(root, &["query", "--symbol", "damage_probe_39_29", "--json"]);
    assert_eq!(hits["handles"][0]["file_path"], "pkg/m39.py");
    assert!(json(root, &["status", "--json"])["damaged"].is_null());
    let report = json(root, &["index", "--rebuild", "--json"]);
    assert!(report["rebuilt"].is_string(), "{report}");
}

/// Moves everything in the WAL into the main file by opening and closing
/// the index (the last connection to close checkpoints), via `canopy status`.
fn rusqlite_free_checkpoint(db: &Path) -> bool {
    let root = db.parent().and_then(Path::parent).unwrap();
    canopy(root, &["status", "--json"]).status.success()
        && !db.with_file_name("index.db-wal").exists()
}

#[test]
fn answers_say_how_fresh_they_are_and_flag_files_changed_on_disk() {
    let repo = git_repo();
    let root = repo.path();
    json(root, &["index", "--json"]);
    let fresh = json(root, &["query", "--symbol", "validateToken", "--json"]);
    let f = &fresh["freshness"];
    assert!(f["generation"].as_u64().is_some_and(|g| g >= 1), "{fresh}");
    assert!(f["indexed_at"].is_string(), "{fresh}");
    assert_eq!(f["stale_files"], 0);
    assert!(fresh["handles"][0].get("stale").is_none());

    // The file changes on disk (a branch switch, an editor) and nobody
    // re-indexes: the answer still comes from the index, and says so.
    write(
        root,
        "src/auth/controller.ts",
        "// moved around\n\n\nexport function validateToken(token: string): boolean {\n  return true;\n}\n",
    );
    let stale = json(root, &["query", "--symbol", "validateToken", "--json"]);
    assert_eq!(stale["freshness"]["stale_files"], 1, "{stale}");
    assert_eq!(
        stale["freshness"]["stale_paths"][0],
        "src/auth/controller.ts"
    );
    assert_eq!(stale["handles"][0]["stale"], true, "{stale}");
    let pack = json(root, &["pack", "--pattern", "validateToken", "--json"]);
    assert_eq!(pack["freshness"]["stale_files"], 1, "{pack}");
    assert!(
        pack["handles"]
            .as_array()
            .unwrap()
            .iter()
            .any(|h| h["stale"] == true),
        "{pack}"
    );

    // After an index run the generation moves on and nothing is stale.
    json(root, &["index", "--json"]);
    let again = json(root, &["query", "--symbol", "validateToken", "--json"]);
    assert_eq!(again["freshness"]["stale_files"], 0);
    assert!(again["freshness"]["generation"].as_u64() > f["generation"].as_u64());
}

fn finds_symbol(root: &Path, name: &str) -> Option<String> {
    let out = canopy(root, &["query", "--symbol", name, "--limit", "1", "--json"]);
    let v: Value = serde_json::from_slice(&out.stdout).ok()?;
    let h = &v["handles"][0];
    (h["preview"].as_str()?.contains(name)).then(|| h["file_path"].as_str().unwrap().to_string())
}

#[test]
fn watch_keeps_the_index_fresh_through_edits_renames_checkouts_and_bursts() {
    let repo = git_repo();
    let root = repo.path();
    git_in(root, &["add", "-A"]);
    git_in(root, &["commit", "-q", "-m", "base"]);
    git_in(root, &["checkout", "-q", "-b", "feature"]);
    write(
        root,
        "src/feature/only_here.py",
        "def feature_branch_only():\n    return 1\n",
    );
    git_in(root, &["add", "-A"]);
    git_in(root, &["commit", "-q", "-m", "feature"]);
    git_in(root, &["checkout", "-q", "-"]);

    let mut child = KillOnDrop(
        Command::new(env!("CARGO_BIN_EXE_canopy"))
            .current_dir(root)
            .args(["watch", "--json"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let stdout = child.0.stdout.take().unwrap();
    let cycles = std::sync::Arc::new(std::sync::Mutex::new(Vec::<Value>::new()));
    {
        let cycles = cycles.clone();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Ok(v) = serde_json::from_str(&line) {
                    cycles.lock().unwrap().push(v);
                }
            }
        });
    }
    eventually("the initial run is done", || {
        !cycles.lock().unwrap().is_empty()
    });
    assert_eq!(cycles.lock().unwrap()[0]["full_run"], "initial");

    // A new file.
    write(
        root,
        "src/fresh.py",
        "def written_while_watching():\n    return 1\n",
    );
    eventually("the new symbol is searchable", || {
        finds_symbol(root, "written_while_watching").is_some()
    });
    // A rename (editors save this way too): the symbol moves with the file.
    fs::rename(root.join("src/fresh.py"), root.join("src/renamed.py")).unwrap();
    eventually("the renamed file is indexed under its new path", || {
        finds_symbol(root, "written_while_watching").as_deref() == Some("src/renamed.py")
    });
    // A delete.
    fs::remove_file(root.join("src/renamed.py")).unwrap();
    eventually("the deleted symbol is gone", || {
        finds_symbol(root, "written_while_watching").is_none()
    });
    // A branch switch: files appear in a new directory at once.
    let before = cycles.lock().unwrap().len();
    git_in(root, &["checkout", "-q", "feature"]);
    eventually("the checked-out branch's symbol is searchable", || {
        finds_symbol(root, "feature_branch_only").is_some()
    });
    git_in(root, &["checkout", "-q", "-"]);
    eventually("switching back removes it", || {
        finds_symbol(root, "feature_branch_only").is_none()
    });
    assert!(
        cycles.lock().unwrap().len() - before <= 6,
        "a checkout is a few batches, not one run per file"
    );
    // A burst of 1,000 files.
    for i in 0..1000 {
        write(
            root,
            &format!("gen/g{i:04}.py"),
            format!("def generated_{i:04}():\n    return {i}\n"),
        );
    }
    eventually("the last file of the burst is searchable", || {
        finds_symbol(root, "generated_0999").is_some()
    });
    eventually("every file of the burst is indexed", || {
        json(root, &["status", "--json"])["files_indexed"].as_u64() == Some(3 + 1000)
    });
    // A .gitignore change takes the ignored files out of the index.
    write(root, ".gitignore", "gen/\n");
    eventually("ignored files leave the index", || {
        finds_symbol(root, "generated_0500").is_none()
    });
    child.kill();
    assert_eq!(json(root, &["status", "--json"])["indexed"], true);

    // A finite run ends by itself.
    let out = canopy(root, &["watch", "--max-cycles", "1", "--json"]);
    assert!(out.status.success());
    let first: Value =
        serde_json::from_slice(out.stdout.split(|b| *b == b'\n').next().unwrap()).unwrap();
    assert_eq!(first["cycle"], 1);
}

#[test]
fn help_shows_a_commands_own_options_apart_from_the_global_ones() {
    let dir = tempfile::tempdir().unwrap();
    for (command, own) in [
        ("query", "--pattern"),
        ("pack", "--max-handles"),
        ("index", "--rebuild"),
        ("callers", "--depth"),
    ] {
        let out = canopy(dir.path(), &[command, "--help"]);
        assert!(out.status.success(), "{command} --help failed");
        let help = String::from_utf8_lossy(&out.stdout);
        let own_at = help.find(own).unwrap_or_else(|| panic!("{own}:\n{help}"));
        let heading = help
            .find("Global options:")
            .unwrap_or_else(|| panic!("{command} --help has no Global options heading:\n{help}"));
        let globals = &help[heading..];
        assert!(own_at < heading, "{command}: {own} is listed as global");
        for global in [
            "--root",
            "--json",
            "--quiet",
            "--service-url",
            "--max-file-size",
        ] {
            assert!(
                globals.contains(global),
                "{command}: {global} is not under Global options:\n{help}"
            );
        }
    }
}

/// Issue 14 item 4: with --service-url, files with uncommitted changes are
/// answered from a local overlay, so line numbers are never from before
/// the agent's own edits.
#[test]
fn service_answers_are_overlaid_with_uncommitted_local_changes() {
    let repo = git_repo();
    let root = repo.path();
    commit_all(root);
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(canopy_bin!(), data.path(), &Opts::default());
    let url = server.url.clone();
    let token = server.admin_token().expect("a generated token");
    let remote = |args: &[&str]| {
        let mut all = vec!["--service-url", url.as_str(), "--service-token", &token];
        all.extend_from_slice(args);
        let out = canopy(root, &all);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out
    };
    remote(&["index", "--json"]);
    let ask =
        |args: &[&str]| -> Value { serde_json::from_slice(&remote(args).stdout).expect("JSON") };
    let before = ask(&["query", "--symbol", "validateToken", "--json"]);
    assert_eq!(before["handles"][0]["source"], "service");
    assert_eq!(before["handles"][0]["line_range"][0], 7);

    // The agent edits: three lines above the function, and a new function.
    let path = root.join("src/auth/controller.ts");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(
        &path,
        format!(
            "// one\n// two\n// three\n{text}\nexport function freshlyWritten(): number {{\n  return 1;\n}}\n"
        ),
    )
    .unwrap();

    let after = ask(&["query", "--symbol", "validateToken", "--json"]);
    let handles = after["handles"].as_array().unwrap();
    let in_file: Vec<&Value> = handles
        .iter()
        .filter(|h| h["file_path"] == "src/auth/controller.ts")
        .collect();
    assert_eq!(in_file.len(), 1, "{after}");
    assert_eq!(in_file[0]["source"], "local", "{after}");
    assert_eq!(
        in_file[0]["line_range"][0], 10,
        "the edit moved it down 3 lines: {after}"
    );
    assert_eq!(after["overlay"]["dirty_files"], 1, "{after}");
    assert_eq!(after["overlay"]["service_handles_dropped"], 1, "{after}");

    // An overlaid evidence pack says what its merged handles are: their
    // tokens, their files, suggestions among them, one generation.
    // (`freshlyWritten` is only in the working tree: the service's own
    // pack has no handle and counted 0 tokens.)
    let pack = ask(&[
        "pack",
        "--pattern",
        "validateToken freshlyWritten",
        "--json",
    ]);
    let handles = pack["handles"].as_array().unwrap();
    assert!(
        handles.iter().any(|h| h["source"] == "local"),
        "the changed file is answered locally: {pack}"
    );
    let tokens: u64 = handles
        .iter()
        .map(|h| h["token_count"].as_u64().unwrap())
        .sum();
    assert!(tokens > 0, "{pack}");
    assert_eq!(pack["total_tokens"], tokens, "{pack}");
    let files = pack["files"].as_array().unwrap();
    assert_eq!(
        files
            .iter()
            .map(|f| f["handles"].as_u64().unwrap())
            .sum::<u64>(),
        handles.len() as u64,
        "{pack}"
    );
    for f in files {
        assert!(
            handles.iter().any(|h| h["file_path"] == f["file_path"]),
            "{pack}"
        );
    }
    for id in pack["expand_suggestion"].as_array().unwrap() {
        assert!(handles.iter().any(|h| &h["id"] == id), "{pack}");
    }
    // Its guidance judges the merged handles, not the service's alone: it
    // says which came from the working tree, and suggests no more expands
    // than it lists.
    let guidance = &pack["guidance"];
    assert!(
        guidance["next_step"]
            .as_str()
            .unwrap()
            .contains("come from your uncommitted changes (1 changed file(s)"),
        "{pack}"
    );
    assert!(
        guidance["suggested_expand_count"].as_u64().unwrap()
            <= pack["expand_suggestion"].as_array().unwrap().len() as u64,
        "{pack}"
    );
    // One generation in one response (issue 32 N8), and the file the
    // overlay answers is not reported stale.
    assert_eq!(
        pack["freshness"]["generation"], pack["generation"],
        "{pack}"
    );
    assert_eq!(pack["freshness"]["stale_files"], 0, "{pack}");

    // A symbol only the working tree has is found, and expands to its text.
    let fresh = ask(&["query", "--symbol", "freshlyWritten", "--json"]);
    let h = &fresh["handles"][0];
    assert_eq!(h["source"], "local", "{fresh}");
    let out = remote(&["expand", h["id"].as_str().unwrap()]);
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with("export function freshlyWritten"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    // Unchanged files still come from the service.
    let login = ask(&["query", "--symbol", "login", "--json"]);
    assert!(
        login["handles"]
            .as_array()
            .unwrap()
            .iter()
            .any(|h| h["file_path"] == "src/routes/login.ts" && h["source"] == "service"),
        "{login}"
    );
    server.kill();
}

/// Issue 15 items 6 and 7 through the binary: a glob or `match=all` is exact
/// past the 2,000-candidate cap, and DSL references starting at the same
/// byte are all kept.
#[test]
fn filtered_queries_are_exact_and_same_byte_references_survive_end_to_end() {
    let dir = git_repo();
    let root = dir.path();
    for file in 0..30 {
        let mut text = String::new();
        for f in 0..100 {
            let extra = if f % 2 == 0 { " + field" } else { "" };
            text.push_str(&format!(
                "def crowd_{file}_{f}(model, other):\n    return build_model(model){extra}\n\n"
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
    write(
        root,
        "clean.py",
        "def clean(x):\n    return x.strip().split()\n",
    );
    let out = canopy(root, &["index", "--root", ".", "-q"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let globbed = json(
        root,
        &[
            "query",
            "--pattern",
            "model",
            "--glob",
            "narrow/**",
            "--json",
        ],
    );
    assert_eq!(globbed["total_matches"], 5, "{globbed}");
    assert_eq!(globbed["truncated"], false);
    assert!(
        globbed["handles"]
            .as_array()
            .unwrap()
            .iter()
            .all(|h| h["file_path"] == "narrow/fields.py")
    );
    // Both words: every other crowd function (1,500) plus the 5 narrow ones.
    let all = json(
        root,
        &[
            "query",
            "--patterns",
            "model",
            "--patterns",
            "field",
            "--match",
            "all",
            "--json",
        ],
    );
    assert_eq!(all["total_matches"], 1505, "{}", all["total_matches"]);

    let refs = json(
        root,
        &[
            "query",
            "--query",
            r#"(union (references "strip") (references "split"))"#,
            "--json",
        ],
    );
    let mut names: Vec<&str> = refs["ref_handles"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|h| h["name"].as_str())
        .collect();
    names.sort();
    assert_eq!(names, ["split", "strip"], "{refs}");
}

/// Issue 32 N3: a first question on a large unindexed repository is answered
/// from a partial index and the rest is indexed before the process exits. When
/// that completion fails (here: the file-size limit stops the index from
/// growing, as a full disk would), stdout still holds exactly one JSON
/// document — the answer — and the failure is a warning on stderr.
#[test]
fn a_failed_background_completion_after_the_answer_leaves_one_json_document() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    git_in(root, &["init", "-q"]);
    // More files than the lazy threshold (1,000), so the first answer comes
    // from the files the question points at.
    for i in 0..1_200 {
        let body: String = (0..15)
            .map(|j| {
                format!("def helper_{i}_{j}(x):\n    \"\"\"Helper {j} of module {i}.\"\"\"\n    return x * {j} + {i}\n\n")
            })
            .collect();
        write(root, &format!("pkg{}/mod{i}.py", i % 30), &body);
    }
    write(
        root,
        "payments/processor.py",
        "class PaymentProcessor:\n    def charge(self, amount):\n        return amount\n",
    );
    // bash's `ulimit -f` counts KiB; with SIGXFSZ ignored, a write past the
    // limit fails with EFBIG instead of killing the process. 1.5 MiB holds
    // the partial index of the first answer, not the whole one.
    let script = format!(
        "trap '' XFSZ; ulimit -f 1536; exec '{}' pack --json --pattern 'PaymentProcessor charge'",
        env!("CARGO_BIN_EXE_canopy")
    );
    let out = Command::new("bash")
        .current_dir(root)
        .args(["-c", &script])
        .env("CANOPY_LOG", "warn")
        .output()
        .expect("bash runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let mut docs = serde_json::Deserializer::from_str(&stdout).into_iter::<Value>();
    let answer = docs
        .next()
        .unwrap_or_else(|| panic!("no answer on stdout; stderr: {stderr}"))
        .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {stdout}"));
    assert!(
        docs.next().is_none(),
        "more than one JSON document: {stdout}"
    );
    assert!(answer.get("error").is_none(), "{answer}");
    assert!(
        answer["index_coverage"].as_f64().is_some_and(|c| c < 1.0),
        "the answer came from a partial index: {answer}"
    );
    // While the rest is indexed after the answer, the user is told the
    // answer is complete and that stopping is safe (issue 29).
    assert!(
        stderr.contains("the answer is above; indexing the rest of the repository")
            && stderr.contains("Ctrl-C is safe: the next command continues from where this stops"),
        "stderr: {stderr}"
    );
    // The limit did stop the completion (else this test proves nothing).
    assert!(
        stderr.contains("completing the rest of the index failed"),
        "stderr: {stderr}"
    );
    // EFBIG is not SQLITE_FULL: the advice is about the refused write, and
    // never to rebuild (which writes more).
    assert!(stderr.contains("refused a write"), "stderr: {stderr}");
    assert!(!stderr.contains("--rebuild"), "stderr: {stderr}");
    assert!(out.status.success(), "stderr: {stderr}");
    // Nothing was lost: without the limit the next command completes the
    // index and answers from all of it.
    let status = json(root, &["status", "--json"]);
    assert!(status.is_object(), "{status}");
    let pack = json(root, &["pack", "--json", "--pattern", "helper_1199_14"]);
    assert!(
        pack["handles"][0]["file_path"]
            .as_str()
            .is_some_and(|p| p.ends_with("mod1199.py")),
        "{pack}"
    );
}
