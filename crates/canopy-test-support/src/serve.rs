//! `canopy serve` under test: [`Server`] starts the binary on a free
//! loopback port, reads `listening on http://ADDR` from its stderr and
//! kills it when dropped; [`serve_exits`] runs one that must refuse to
//! start. Plus the HTTP helpers the service tests share.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use canopy_client::client::{RawResponse, ServiceClient};
use serde_json::Value;

use crate::WAIT;
use crate::repo::Repo;

/// How to start a server.
#[derive(Clone, Debug, Default)]
pub struct Opts {
    /// `--token`.
    pub token: Option<String>,
    /// `--allow-root`, each.
    pub allow_roots: Vec<PathBuf>,
    /// `--max-body-bytes`.
    pub max_body_bytes: Option<usize>,
    /// More arguments, as given.
    pub extra: Vec<String>,
    /// Working directory of the server (default: the system's temporary
    /// directory, where the fixture repositories live: without
    /// --allow-root the service serves what is under its working directory).
    pub cwd: Option<PathBuf>,
    /// Address to bind (default `127.0.0.1:0`, a free port).
    pub bind: Option<String>,
    /// Environment variables set for the server only.
    pub env: Vec<(String, String)>,
}

/// A running `canopy serve`.
pub struct Server {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    /// Its `--data-dir`.
    pub data_dir: PathBuf,
    /// Its `--token`.
    pub token: Option<String>,
    log: Arc<Mutex<String>>,
}

fn base_command(bin: &Path, data_dir: &Path) -> Command {
    let mut cmd = Command::new(bin);
    cmd.arg("serve")
        .current_dir(std::env::temp_dir())
        .arg("--data-dir")
        .arg(data_dir)
        .env_remove("CANOPY_TOKEN")
        .env_remove("CANOPY_AGENT_TOKEN")
        .env_remove("CANOPY_BIND")
        .env_remove("CANOPY_DATA_DIR")
        .env(
            "CANOPY_LOG",
            std::env::var("CANOPY_TEST_SERVE_LOG").unwrap_or_else(|_| "warn".into()),
        )
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    cmd
}

impl Server {
    /// Starts `bin serve` on a free loopback port with its registry in `data_dir`.
    pub fn start(bin: &Path, data_dir: &Path, opts: &Opts) -> Server {
        let mut cmd = base_command(bin, data_dir);
        cmd.args(["--bind", opts.bind.as_deref().unwrap_or("127.0.0.1:0")]);
        if let Some(t) = &opts.token {
            cmd.args(["--token", t]);
        }
        for root in &opts.allow_roots {
            cmd.arg("--allow-root").arg(root);
        }
        if let Some(n) = opts.max_body_bytes {
            cmd.args(["--max-body-bytes", &n.to_string()]);
        }
        cmd.args(&opts.extra);
        cmd.envs(opts.env.iter().map(|(k, v)| (k, v)));
        if let Some(cwd) = &opts.cwd {
            cmd.current_dir(cwd);
        }
        let mut child = cmd.spawn().expect("spawn canopy serve");
        let stderr = child.stderr.take().expect("stderr");
        let log = Arc::new(Mutex::new(String::new()));
        let (tx, rx) = mpsc::channel();
        {
            let log = log.clone();
            std::thread::spawn(move || {
                let mut tx = Some(tx);
                for line in BufReader::new(stderr).lines() {
                    let Ok(line) = line else { break };
                    if let Some(addr) = line.strip_prefix("listening on ")
                        && let Some(tx) = tx.take()
                    {
                        let _ = tx.send(addr.trim().to_string());
                    }
                    log.lock().unwrap().push_str(&format!("{line}\n"));
                }
            });
        }
        let url = match rx.recv_timeout(WAIT) {
            Ok(url) => url,
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "canopy serve did not start; stderr:\n{}",
                    log.lock().unwrap()
                );
            }
        };
        Server {
            child,
            url,
            data_dir: data_dir.to_path_buf(),
            token: opts.token.clone(),
            log,
        }
    }

    /// The admin token: `--token`, else the one the server generated in
    /// its data directory (`None` with `--no-auth`).
    pub fn admin_token(&self) -> Option<String> {
        self.token
            .clone()
            .or_else(|| canopy_client::auth::read_token(&self.data_dir))
    }

    /// A client with the server's admin token.
    pub fn client(&self) -> ServiceClient {
        ServiceClient::new(&self.url)
            .expect("client")
            .with_token(self.admin_token())
    }

    /// A client with another token (the agent's, a wrong one).
    pub fn client_with(&self, token: &str) -> ServiceClient {
        ServiceClient::new(&self.url)
            .expect("client")
            .with_token(Some(token.to_string()))
    }

    /// A client without credentials.
    pub fn anonymous(&self) -> ServiceClient {
        ServiceClient::new(&self.url).expect("client")
    }

    /// The process id (to send it signals).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Kills the process (SIGKILL: no graceful shutdown).
    pub fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Sends SIGTERM and waits up to `within` for the process to exit;
    /// returns whether it did.
    pub fn terminate(&mut self, within: Duration) -> bool {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .is_ok_and(|s| s.success());
        assert!(sent, "kill -TERM {pid} failed");
        let deadline = std::time::Instant::now() + within;
        while std::time::Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    }

    /// Everything the server wrote to stderr so far.
    pub fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `bin serve ARGS` expecting it to exit; returns (success, stderr).
pub fn serve_exits(bin: &Path, data_dir: &Path, args: &[&str]) -> (bool, String) {
    serve_exits_in(bin, data_dir, &std::env::temp_dir(), args)
}

/// [`serve_exits`] with the server started in `cwd`.
pub fn serve_exits_in(bin: &Path, data_dir: &Path, cwd: &Path, args: &[&str]) -> (bool, String) {
    let mut cmd = base_command(bin, data_dir);
    cmd.current_dir(cwd);
    cmd.args(args);
    let mut child = cmd.spawn().expect("spawn");
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            let mut err = String::new();
            if let Some(mut s) = child.stderr.take() {
                let _ = std::io::Read::read_to_string(&mut s, &mut err);
            }
            return (status.success(), err);
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("canopy serve {args:?} did not exit");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Asserts an error response: status, code, and exactly `{code, message, hint}`, all non-empty.
pub fn assert_error(resp: &RawResponse, status: u16, code: &str) {
    assert_eq!(resp.status, status, "body: {}", resp.text());
    let body: Value = resp.json().expect("error body is JSON");
    let obj = body.as_object().expect("error body is an object");
    let mut keys: Vec<&str> = obj.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["code", "hint", "message"], "body: {body}");
    assert_eq!(body["code"], code, "body: {body}");
    assert!(!body["message"].as_str().unwrap_or("").is_empty());
    assert!(!body["hint"].as_str().unwrap_or("").is_empty());
    // A hint says what to do, not the message again (issue 32, U8).
    assert_ne!(body["hint"], body["message"], "body: {body}");
}

/// POSTs a JSON value and returns the raw response.
pub fn post(client: &ServiceClient, path: &str, body: &Value) -> RawResponse {
    client
        .send_raw("POST", path, Some(body.to_string().as_bytes()), &[])
        .expect("request")
}

/// GETs a path and returns the raw response.
pub fn get(client: &ServiceClient, path: &str) -> RawResponse {
    client.send_raw("GET", path, None, &[]).expect("request")
}

/// Asserts that `POST {path}` (a repository's settings route) refuses an
/// unknown key (naming it), a wrong type, a non-object and a body that is
/// not JSON with the documented codes, and that an unknown repository's
/// settings are 404 to `GET` and `POST`. It does not check that nothing
/// changed: the caller reads the settings afterwards.
pub fn assert_settings_refusals(client: &ServiceClient, path: &str) {
    let bad_key = post(
        client,
        path,
        &serde_json::json!({"watch": true, "wach": true}),
    );
    assert_error(&bad_key, 400, "validation_error");
    assert!(bad_key.text().contains("wach"), "{}", bad_key.text());
    for body in [
        serde_json::json!({"watch": "yes"}),
        serde_json::json!([true]),
    ] {
        assert_error(&post(client, path, &body), 400, "validation_error");
    }
    let raw = client
        .send_raw("POST", path, Some(b"{watch"), &[])
        .expect("request");
    assert_error(&raw, 400, "invalid_json");
    let unknown = "/repos/no-such-repo/settings";
    assert_error(&get(client, unknown), 404, "not_found");
    let body = serde_json::json!({"watch": true});
    assert_error(&post(client, unknown, &body), 404, "not_found");
}

/// Registers `repo`, reindexes it and waits until the run is over; returns the repo id.
pub fn add_and_index(client: &ServiceClient, repo: &Repo) -> String {
    let id = client.add_repo(&repo.root(), None).expect("add").repo_id;
    client.reindex(&id, None).expect("reindex");
    let view = client.wait_until_idle(&id, WAIT).expect("status");
    assert!(view.ready && view.status == "ready", "{view:?}");
    id
}
