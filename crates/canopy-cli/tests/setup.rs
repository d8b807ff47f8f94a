//! `canopy setup <client>` against a temporary HOME and project for each
//! client: the written configuration is re-read, its entry launched as an
//! MCP server and listed with the real client, other servers and unrelated
//! keys survive, a second run changes nothing, `--dry-run` writes nothing.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use canopy_test_support::mcp::TestClient;
use rmcp::ServiceExt;
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};

/// A temporary home folder and a git project, and `canopy setup` run in it.
struct Sandbox {
    home: tempfile::TempDir,
    project: tempfile::TempDir,
}

impl Sandbox {
    fn new() -> Sandbox {
        let project = tempfile::tempdir().unwrap();
        let ok = Command::new("git")
            .arg("-C")
            .arg(project.path())
            .args(["init", "-q"])
            .status()
            .unwrap();
        assert!(ok.success());
        fs::create_dir_all(project.path().join("src/deep")).unwrap();
        Sandbox {
            home: tempfile::tempdir().unwrap(),
            project,
        }
    }

    /// `canopy setup ARGS` from a subfolder of the project, with the
    /// sandbox's HOME and a PATH without `canopy` on it.
    fn setup(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_canopy"))
            .current_dir(self.project.path().join("src/deep"))
            .arg("setup")
            .args(args)
            .env("HOME", self.home.path())
            .env_remove("CODEX_HOME")
            .env_remove("XDG_CONFIG_HOME")
            .env("PATH", "/usr/bin:/bin")
            .env("CANOPY_LOG", "warn")
            .stdin(Stdio::null())
            .output()
            .expect("canopy runs")
    }

    fn setup_json(&self, args: &[&str]) -> Value {
        let mut all = args.to_vec();
        all.push("--json");
        let out = self.setup(&all);
        assert!(
            out.status.success(),
            "canopy setup {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).expect("one JSON report")
    }

    fn project_file(&self, rel: &str) -> PathBuf {
        self.project.path().canonicalize().unwrap().join(rel)
    }

    fn home_file(&self, rel: &str) -> PathBuf {
        self.home.path().join(rel)
    }
}

fn write(path: &Path, text: &str) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&fs::read_to_string(path).unwrap())
        .unwrap_or_else(|e| panic!("{} is not JSON after setup: {e}", path.display()))
}

/// Launches a configured server (`command`, `args`) the way a client does
/// and checks that it speaks MCP and offers Canopy's tools.
fn launch_and_list(command: &str, args: &[String]) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let mut cmd = tokio::process::Command::new(command);
        cmd.args(args).kill_on_drop(true);
        let (transport, _) = TokioChildProcess::builder(cmd)
            .stderr(Stdio::null())
            .spawn()
            .expect("the configured command starts");
        let client = TestClient::default()
            .serve(transport)
            .await
            .expect("the configured command speaks MCP");
        let tools = client.list_all_tools().await.expect("tools/list");
        assert!(
            tools.iter().any(|t| t.name == "canopy_query"),
            "the configured server is Canopy's"
        );
        let _ = client.cancel().await;
    });
}

fn same_file(a: &str, b: &str) -> bool {
    fs::canonicalize(a).ok() == fs::canonicalize(b).ok()
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .expect("args is an array")
        .iter()
        .map(|v| v.as_str().expect("args are strings").to_string())
        .collect()
}

/// A client's file as a person left it: another server, and keys before
/// and after the servers that setup must not touch.
fn seed_json_config(path: &Path, servers_key: &str) {
    let before = json!({
        "aaFirstKey": { "keep": [1, 2, 3] },
        servers_key: {
            "other": { "command": "other-server", "args": ["--flag"] }
        },
        "zzLastKey": "unrelated"
    });
    write(path, &serde_json::to_string_pretty(&before).unwrap());
}

/// Which folder a configuration file lives in.
enum Base {
    Project,
    Home,
}

#[test]
fn setup_writes_each_clients_documented_json_config() {
    // (client, scope, the file, where relative to what, servers key, whether entries name their transport)
    let cases = [
        (
            "claude-code",
            "project",
            Base::Project,
            ".mcp.json",
            "mcpServers",
            true,
        ),
        (
            "claude-code",
            "user",
            Base::Home,
            ".claude.json",
            "mcpServers",
            true,
        ),
        (
            "cursor",
            "project",
            Base::Project,
            ".cursor/mcp.json",
            "mcpServers",
            false,
        ),
        (
            "cursor",
            "user",
            Base::Home,
            ".cursor/mcp.json",
            "mcpServers",
            false,
        ),
        (
            "vscode",
            "project",
            Base::Project,
            ".vscode/mcp.json",
            "servers",
            true,
        ),
        (
            "vscode",
            "user",
            Base::Home,
            ".config/Code/User/mcp.json",
            "servers",
            true,
        ),
    ];
    for (client, scope, base, rel, servers_key, typed) in cases {
        let sandbox = Sandbox::new();
        let path = match base {
            Base::Project => sandbox.project_file(rel),
            Base::Home => sandbox.home_file(rel),
        };
        seed_json_config(&path, servers_key);
        let seeded = fs::read_to_string(&path).unwrap();
        let report = sandbox.setup_json(&[client, "--scope", scope]);
        assert_eq!(report["action"], "updated", "{client} {scope}: {report}");
        assert!(
            same_file(report["path"].as_str().unwrap(), path.to_str().unwrap()),
            "{client} {scope}: wrote {} instead of {}",
            report["path"],
            path.display()
        );

        // Every byte around the new entry is as it was.
        let text = fs::read_to_string(&path).unwrap();
        let other = seeded.find("\"other\"").unwrap();
        assert!(text.starts_with(&seeded[..other]), "{client}: {text}");
        assert!(text.ends_with(&seeded[other..]), "{client}: {text}");
        let config = read_json(&path);
        let keys: Vec<&String> = config.as_object().unwrap().keys().collect();
        assert_eq!(
            keys,
            ["aaFirstKey", servers_key, "zzLastKey"],
            "{client}: key order"
        );
        assert_eq!(config["aaFirstKey"], json!({ "keep": [1, 2, 3] }));
        assert_eq!(config["zzLastKey"], "unrelated");
        assert_eq!(
            config[servers_key]["other"],
            json!({ "command": "other-server", "args": ["--flag"] }),
            "{client}: the other server is untouched"
        );
        let entry = &config[servers_key]["canopy"];
        let command = entry["command"].as_str().expect("a command");
        assert!(
            same_file(command, env!("CARGO_BIN_EXE_canopy")),
            "{client}: command {command} is this binary (canopy is not on PATH)"
        );
        let args = strings(&entry["args"]);
        assert_eq!(args, ["mcp"]);
        if typed {
            assert_eq!(entry["type"], "stdio", "{client}: {entry}");
        }
        launch_and_list(command, &args);

        // Idempotent: a second run leaves the bytes as they are.
        let bytes = fs::read(&path).unwrap();
        let again = sandbox.setup_json(&[client, "--scope", scope]);
        assert_eq!(again["action"], "unchanged", "{client} {scope}: {again}");
        assert_eq!(
            fs::read(&path).unwrap(),
            bytes,
            "{client}: second run wrote"
        );

        if client == "claude-code" {
            let line = again["claude_command"]
                .as_str()
                .expect("claude mcp add line");
            assert!(
                line.starts_with(&format!("claude mcp add --scope {scope} canopy -- "))
                    && line.ends_with(" mcp"),
                "{line}"
            );
        } else {
            assert!(again.get("claude_command").is_none(), "{again}");
        }
    }
}

#[test]
fn setup_dry_run_prints_the_change_and_writes_nothing() {
    let sandbox = Sandbox::new();
    let out = sandbox.setup(&["claude-code", "--dry-run"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let path = sandbox.project_file(".mcp.json");
    assert!(!path.exists(), "--dry-run wrote {}", path.display());
    assert!(stdout.contains("would create"), "{stdout}");
    assert!(stdout.contains("\"mcpServers\""), "{stdout}");
    assert!(stdout.contains("\"canopy\""), "{stdout}");
    assert!(
        stdout.contains("claude mcp add --scope project canopy -- "),
        "{stdout}"
    );

    // Then for real: the file is created with just Canopy in it.
    let report = sandbox.setup_json(&["claude-code"]);
    assert_eq!(report["action"], "created");
    let config = read_json(&path);
    assert_eq!(
        config["mcpServers"]
            .as_object()
            .unwrap()
            .keys()
            .collect::<Vec<_>>(),
        ["canopy"]
    );
}

#[test]
fn setup_codex_edits_config_toml_and_keeps_the_rest() {
    let sandbox = Sandbox::new();
    let path = sandbox.home_file(".codex/config.toml");
    let before = "# my Codex settings\nmodel = \"o3\"\n\n[mcp_servers.other]\ncommand = \"other-server\" # keep this comment\nargs = [\"--flag\"]\n";
    write(&path, before);

    let dry = sandbox.setup(&["codex", "--dry-run"]);
    assert!(
        dry.status.success(),
        "{}",
        String::from_utf8_lossy(&dry.stderr)
    );
    assert!(String::from_utf8_lossy(&dry.stdout).contains("[mcp_servers.canopy]"));
    assert_eq!(
        fs::read_to_string(&path).unwrap(),
        before,
        "--dry-run wrote"
    );

    // Codex defaults to the user file.
    let report = sandbox.setup_json(&["codex"]);
    assert_eq!(report["action"], "updated", "{report}");
    assert_eq!(report["scope"], "user");
    let text = fs::read_to_string(&path).unwrap();
    assert!(
        text.starts_with(before),
        "the rest is kept byte for byte:\n{text}"
    );
    let config: toml::Table = toml::from_str(&text).expect("valid TOML after setup");
    assert_eq!(config["model"].as_str(), Some("o3"));
    let servers = config["mcp_servers"].as_table().unwrap();
    assert_eq!(servers["other"]["command"].as_str(), Some("other-server"));
    let entry = servers["canopy"].as_table().expect("[mcp_servers.canopy]");
    let command = entry["command"].as_str().unwrap();
    assert!(
        same_file(command, env!("CARGO_BIN_EXE_canopy")),
        "{command}"
    );
    let args: Vec<String> = entry["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    assert_eq!(args, ["mcp"]);
    launch_and_list(command, &args);

    let again = sandbox.setup_json(&["codex"]);
    assert_eq!(again["action"], "unchanged", "{again}");
    assert_eq!(fs::read_to_string(&path).unwrap(), text);

    // Project scope: the repository's .codex/config.toml.
    let project = sandbox.setup_json(&["codex", "--scope", "project"]);
    assert_eq!(project["action"], "created");
    let project_text = fs::read_to_string(sandbox.project_file(".codex/config.toml")).unwrap();
    let project_config: toml::Table = toml::from_str(&project_text).unwrap();
    assert!(project_config["mcp_servers"]["canopy"]["command"].is_str());
}

#[test]
fn setup_refuses_a_file_it_cannot_parse_and_leaves_it() {
    let sandbox = Sandbox::new();
    let path = sandbox.project_file(".cursor/mcp.json");
    write(&path, "{ \"mcpServers\": { broken");
    let out = sandbox.setup(&["cursor"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("not valid JSON"), "{stderr}");
    assert!(stderr.contains("left as it was"), "{stderr}");
    assert_eq!(
        fs::read_to_string(&path).unwrap(),
        "{ \"mcpServers\": { broken"
    );

    let out = sandbox.setup(&["cursor", "--scope", "galaxy"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("project") && stderr.contains("user"),
        "{stderr}"
    );
}

/// `canopy ARGS` in `dir` with the sandbox's HOME.
fn canopy_in(sandbox: &Sandbox, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_canopy"))
        .current_dir(sandbox.project.path())
        .args(args)
        .env("HOME", sandbox.home.path())
        .env_remove("CANOPY_MODEL")
        .env_remove("CANOPY_SERVICE_URL")
        .env("CANOPY_LOG", "warn")
        .stdin(Stdio::null())
        .output()
        .expect("canopy runs")
}

#[test]
fn doctor_reports_each_check_with_what_to_do() {
    let sandbox = Sandbox::new();
    fs::write(
        sandbox.project.path().join("lib.py"),
        "def answer():\n    return 42\n",
    )
    .unwrap();
    let out = canopy_in(&sandbox, &["doctor", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    let check = |name: &str| -> Value {
        report["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("no {name} check in {report}"))
    };
    assert_eq!(check("binary")["level"], "ok");
    assert!(report["schema_version"].as_u64().unwrap() > 0);
    assert!(!report["commit"].as_str().unwrap().is_empty());
    // Nothing set up yet: each says what to do.
    assert_eq!(check("index")["level"], "warn");
    assert!(
        check("index")["fix"]
            .as_str()
            .unwrap()
            .contains("canopy index")
    );
    assert_eq!(check("model")["level"], "warn");
    assert!(
        check("model")["fix"]
            .as_str()
            .unwrap()
            .contains("CANOPY_MODEL")
    );
    assert!(
        check("agents")["fix"]
            .as_str()
            .unwrap()
            .contains("canopy setup")
    );

    // After indexing and setup with the watcher off, doctor sees both.
    assert!(canopy_in(&sandbox, &["index", "-q"]).status.success());
    let path = sandbox.project_file(".mcp.json");
    write(
        &path,
        r#"{"mcpServers": {"canopy": {"command": "canopy", "args": ["mcp", "--watch", "false"]}}}"#,
    );
    let out = canopy_in(&sandbox, &["doctor", "--json"]);
    let report: Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    let find = |name: &str| {
        report["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .cloned()
            .unwrap()
    };
    assert_eq!(find("index")["level"], "ok", "{report}");
    assert!(
        find("agents")["detail"]
            .as_str()
            .unwrap()
            .contains("claude-code")
    );
    assert_eq!(find("watcher")["level"], "warn", "{report}");

    // A model folder that is not a model is an error, and doctor fails.
    let out = canopy_in(&sandbox, &["doctor", "--model", "/nonexistent-model"]);
    assert!(!out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("FAIL model"), "{stdout}");

    // A service that is not there: unreachable, with what to do.
    let out = canopy_in(
        &sandbox,
        &["doctor", "--json", "--service-url", "http://127.0.0.1:9"],
    );
    assert!(!out.status.success());
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let service = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "service")
        .cloned()
        .unwrap();
    assert_eq!(service["level"], "error");
    assert!(
        service["detail"]
            .as_str()
            .unwrap()
            .contains("not reachable")
    );
}

#[test]
fn version_names_the_commit_and_schema() {
    let sandbox = Sandbox::new();
    let out = canopy_in(&sandbox, &["--version"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with(&format!("canopy {} (commit ", env!("CARGO_PKG_VERSION"))),
        "{text}"
    );
    assert!(text.contains("index schema "), "{text}");
}

#[test]
fn completions_and_man_page_come_from_the_clap_definitions() {
    let sandbox = Sandbox::new();
    for shell in ["bash", "zsh", "fish"] {
        let out = canopy_in(&sandbox, &["completions", shell]);
        assert!(out.status.success(), "{shell}");
        let script = String::from_utf8_lossy(&out.stdout);
        assert!(
            script.contains("setup") && script.contains("doctor"),
            "{shell}: {script}"
        );
    }
    let out = canopy_in(&sandbox, &["man"]);
    assert!(out.status.success());
    let page = String::from_utf8_lossy(&out.stdout);
    assert!(
        page.starts_with(".ie") || page.contains(".TH canopy"),
        "{page}"
    );
    assert!(page.contains("setup"), "the man page lists subcommands");
}

/// `canopy … --json | head`: the reader goes away; canopy ends quietly.
#[test]
fn a_closed_stdout_ends_quietly() {
    let sandbox = Sandbox::new();
    for i in 0..200 {
        fs::write(
            sandbox.project.path().join(format!("m{i}.py")),
            format!("def handler_{i}():\n    return {i}\n"),
        )
        .unwrap();
    }
    assert!(canopy_in(&sandbox, &["index", "-q"]).status.success());
    for args in [
        &["completions", "bash"][..],
        &["query", "--pattern", "handler", "--limit", "200"][..],
    ] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_canopy"))
            .current_dir(sandbox.project.path())
            .args(args)
            .env("HOME", sandbox.home.path())
            .env("CANOPY_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Close the read end at once, like `head -c0`.
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert!(!stderr.contains("Broken pipe"), "{args:?}: {stderr}");
        #[cfg(unix)]
        {
            use std::os::unix::process::ExitStatusExt;
            assert!(
                out.status.success() || out.status.signal() == Some(libc_sigpipe()),
                "{args:?}: {:?} {stderr}",
                out.status
            );
        }
    }
}

/// SIGPIPE's number (13 on Linux and macOS).
#[cfg(unix)]
fn libc_sigpipe() -> i32 {
    13
}
