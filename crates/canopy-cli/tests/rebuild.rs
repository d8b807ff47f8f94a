//! Rebuilds and other processes (issue 32): a process reading the index
//! while another rebuilds it gets the old complete index until the new one
//! is live (N2); a long-lived `canopy mcp` sees indexes written by other
//! processes, rebuilt or replaced (N9); the human pack output marks
//! handles of files changed since indexing (N4).

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Output, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, mpsc};

use canopy_core::index::{IndexProgress, NoProgress};
use canopy_core::{Engine, EngineOptions};
use serde_json::{Value, json};

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
    serde_json::from_slice(&out.stdout).expect("one JSON document")
}

fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A git repository (so roots are found the way agents' are).
fn git_repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let ok = Command::new("git")
        .args(["init", "-q"])
        .current_dir(dir.path())
        .status()
        .unwrap();
    assert!(ok.success());
    dir
}

const FILES: usize = 600;

fn probe_path(i: usize) -> String {
    format!("pkg{}/mod_{i}.py", i % 10)
}

/// Stops an index run at its `at`-th file until told to go on.
struct PauseAt {
    at: u64,
    seen: AtomicU64,
    paused: Mutex<mpsc::Sender<()>>,
    resume: Mutex<mpsc::Receiver<()>>,
}

impl IndexProgress for PauseAt {
    fn advance(&self, _path: &str, _bytes: u64) {
        if self.seen.fetch_add(1, Ordering::SeqCst) + 1 == self.at {
            let _ = self.paused.lock().unwrap().send(());
            // A failed test never says to go on: its rebuild ends anyway,
            // a while later, instead of hanging the test.
            let _ = self
                .resume
                .lock()
                .unwrap()
                .recv_timeout(std::time::Duration::from_secs(120));
        }
    }
}

#[test]
fn another_process_reads_the_old_complete_index_throughout_a_rebuild() {
    let repo = git_repo();
    let root = repo.path();
    for i in 0..FILES {
        write(
            root,
            &probe_path(i),
            &format!("def probe_{i}_fn(x):\n    return x + {i}\n"),
        );
    }
    json(root, &["index", "--json"]);
    let answer = |i: usize| {
        json(
            root,
            &["query", "--symbol", &format!("probe_{i}_fn"), "--json"],
        )
    };
    let before = answer(0)["freshness"]["generation"].as_u64().unwrap();

    let (paused_tx, paused_rx) = mpsc::channel();
    let (resume_tx, resume_rx) = mpsc::channel();
    let pause = PauseAt {
        at: 300,
        seen: AtomicU64::new(0),
        paused: Mutex::new(paused_tx),
        resume: Mutex::new(resume_rx),
    };
    let writer = Engine::open(root, EngineOptions::default()).unwrap();
    std::thread::scope(|s| {
        let rebuild = s.spawn(|| writer.rebuild(&pause));
        paused_rx.recv().unwrap();
        // Halfway through the rebuild, other processes read the old index,
        // whole. Status first: it only reads (a query would index what it
        // found missing itself).
        let status = json(root, &["status", "--json"]);
        assert_eq!(status["files_indexed"], FILES);
        assert_eq!(status["index_coverage"], 1.0);
        for i in (0..FILES).step_by(97) {
            let r = answer(i);
            let handles = r["handles"].as_array().unwrap();
            assert_eq!(handles.len(), 1, "probe_{i}_fn: {r}");
            assert_eq!(handles[0]["file_path"], probe_path(i).as_str());
            assert_eq!(r["freshness"]["generation"], before);
            assert!(r.get("index_coverage").is_none(), "{r}");
        }
        resume_tx.send(()).unwrap();
        assert!(rebuild.join().unwrap().unwrap().rebuilt.is_some());
    });
    let after = answer(FILES - 1);
    assert_eq!(
        after["handles"][0]["file_path"],
        probe_path(FILES - 1).as_str()
    );
    assert!(after["freshness"]["generation"].as_u64().unwrap() > before);
}

/// A `canopy mcp` over stdio, spoken to line by line.
struct Mcp {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next_id: u64,
}

impl Mcp {
    fn start(dir: &Path) -> Mcp {
        let mut child = Command::new(env!("CARGO_BIN_EXE_canopy"))
            .current_dir(dir)
            // No watcher: only what other processes write can change what it sees.
            .args(["mcp", "--watch", "false"])
            .env("CANOPY_LOG", "warn")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("canopy mcp starts");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut mcp = Mcp {
            child,
            stdin,
            stdout,
            next_id: 0,
        };
        mcp.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "rebuild-test", "version": "0"}}),
        );
        mcp.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        mcp
    }

    fn send(&mut self, message: &Value) {
        writeln!(self.stdin, "{message}").unwrap();
        self.stdin.flush().unwrap();
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let mut line = String::new();
            assert!(self.stdout.read_line(&mut line).unwrap() > 0, "mcp closed");
            let message: Value = serde_json::from_str(&line).unwrap();
            if message["id"] == id {
                return message;
            }
        }
    }

    /// `canopy_query` for a symbol: the file paths of its handles.
    fn symbol_paths(&mut self, root: &Path, symbol: &str) -> Vec<String> {
        let reply = self.request(
            "tools/call",
            json!({"name": "canopy_query", "arguments": {
                "path": root.display().to_string(), "symbol": symbol}}),
        );
        let text = reply["result"]["content"][0]["text"].as_str().unwrap();
        let answer: Value = serde_json::from_str(text).unwrap();
        answer["handles"]
            .as_array()
            .unwrap_or_else(|| panic!("{answer}"))
            .iter()
            .map(|h| h["file_path"].as_str().unwrap().to_string())
            .collect()
    }
}

impl Drop for Mcp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_long_lived_mcp_server_sees_what_other_processes_rebuild_or_replace() {
    let repo = git_repo();
    let root = repo.path().canonicalize().unwrap();
    let root = root.as_path();
    write(root, "a.py", "def first_fn():\n    pass\n");
    json(root, &["index", "--json"]);
    let mut mcp = Mcp::start(root);
    assert_eq!(mcp.symbol_paths(root, "first_fn"), ["a.py"]);

    // `canopy index --rebuild` in another process, with a new function.
    write(root, "b.py", "def added_before_rebuild_fn():\n    pass\n");
    let report = json(root, &["index", "--rebuild", "--json"]);
    assert!(report["rebuilt"].is_string(), "{report}");
    assert_eq!(
        mcp.symbol_paths(root, "added_before_rebuild_fn"),
        ["b.py"],
        "the server kept reading the index from before the rebuild"
    );

    // The index files deleted and written anew (an older Canopy's rebuild,
    // or `rm -rf .canopy`), with another new function.
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(root.join(format!(".canopy/index.db{suffix}")));
    }
    write(root, "c.py", "def added_to_a_new_file_fn():\n    pass\n");
    json(root, &["index", "--json"]);
    assert_eq!(
        mcp.symbol_paths(root, "added_to_a_new_file_fn"),
        ["c.py"],
        "the server kept reading the deleted index file"
    );
    assert_eq!(mcp.symbol_paths(root, "first_fn"), ["a.py"]);
}

#[test]
fn the_human_pack_output_marks_stale_handles() {
    let repo = git_repo();
    let root = repo.path();
    write(
        root,
        "billing/invoice.py",
        "def compute_invoice_total(invoice):\n    return sum(invoice.lines)\n",
    );
    write(
        root,
        "tax.py",
        "def apply_vat(amount):\n    return amount\n",
    );
    let e = Engine::open(root, EngineOptions::default()).unwrap();
    e.index(None, &NoProgress).unwrap();
    std::fs::remove_file(root.join("billing/invoice.py")).unwrap();
    let out = canopy(
        root,
        &[
            "pack",
            "--pattern",
            "Why does `compute_invoice_total` ignore discounts?",
        ],
    );
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    let handle_line = stdout
        .lines()
        .find(|l| l.contains("compute_invoice_total") && l.contains("score"))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(handle_line.contains("stale"), "{stdout}");
    assert!(stdout.contains("stop_querying=false"), "{stdout}");
}
