//! A `canopy follow --json` under test: its printed events collected as
//! they arrive, the process killed when the test ends.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::WAIT;
use crate::process::KillOnDrop;

/// How a follower authenticates.
pub enum FollowAuth<'a> {
    /// No token given: it reads the one the service generated in this
    /// data directory, as a follower on the service's machine does.
    DataDir(&'a Path),
    /// This token (`CANOPY_SERVICE_TOKEN`), e.g. a fleet's shared one.
    Token(&'a str),
}

/// A running `canopy follow --json`, its stdout lines collected.
pub struct Follower {
    /// Killed when the follower is dropped, so a failing test leaves no process behind.
    child: KillOnDrop,
    lines: Arc<Mutex<Vec<Value>>>,
}

impl Follower {
    /// Starts `bin follow` against `url` with one-second long polls, its
    /// cursor kept in `cursor`, `extra` flags after the rest.
    pub fn start(
        bin: &Path,
        url: &str,
        auth: FollowAuth<'_>,
        cursor: &Path,
        extra: &[&str],
    ) -> Follower {
        let mut command = Command::new(bin);
        command
            .args([
                "--json",
                "--service-url",
                url,
                "follow",
                "--wait-seconds",
                "1",
            ])
            .arg("--cursor-file")
            .arg(cursor)
            .args(extra)
            .env("CANOPY_LOG", "warn")
            .env_remove("CANOPY_SERVICE_TOKEN")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        match auth {
            FollowAuth::DataDir(dir) => command.env("CANOPY_DATA_DIR", dir),
            FollowAuth::Token(token) => command.env("CANOPY_SERVICE_TOKEN", token),
        };
        let mut child = command.spawn().expect("spawn canopy follow");
        let stdout = child.stdout.take().expect("stdout");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let value: Value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("follow printed a non-JSON line ({e}): {line}"));
                sink.lock().unwrap().push(value);
            }
        });
        Follower {
            child: KillOnDrop(child),
            lines,
        }
    }

    /// Waits until the follower has printed every event of `seqs` (the
    /// relevant ones so far) and saved its cursor `cursor` past the last:
    /// only then may a test kill it and expect a restarted follower to
    /// repeat nothing. It prints an event before it saves the cursor
    /// (at least once, `canopy_client::follow`), so a kill between the two
    /// has the event handled again.
    pub fn wait_handled(&self, cursor: &Path, seqs: &[u64]) {
        let last = seqs.last().copied().unwrap_or(0);
        crate::eventually("the follower handled the events so far", || {
            self.seqs().len() >= seqs.len()
                && canopy_client::follow::read_cursor(cursor).is_ok_and(|c| c >= last)
        });
    }

    /// Sequence numbers of the events printed so far.
    pub fn seqs(&self) -> Vec<u64> {
        self.lines
            .lock()
            .unwrap()
            .iter()
            .filter_map(|l| l["seq"].as_u64())
            .collect()
    }

    /// The `follow_end` line, once the follower printed it.
    pub fn end(&self) -> Option<Value> {
        self.lines
            .lock()
            .unwrap()
            .iter()
            .find(|l| l.get("follow_end").is_some())
            .cloned()
    }

    /// Kills the follower now (SIGKILL: it gets no chance to save more).
    pub fn kill(mut self) {
        self.child.kill();
    }

    /// Waits (at most [`WAIT`]) for the follower to exit; whether it succeeded.
    pub fn wait_exit(&mut self) -> bool {
        let deadline = Instant::now() + WAIT;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.0.try_wait() {
                // Let the reader thread drain the pipe.
                std::thread::sleep(Duration::from_millis(100));
                return status.success();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("canopy follow did not exit");
    }
}
