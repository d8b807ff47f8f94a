//! End-to-end tests of `canopy follow` against a real `canopy serve`:
//! a follower killed mid-stream resumes from its cursor with no event lost
//! or repeated, and one whose service stops backs off, reports its health
//! and picks up again when the service is back.
//!
//! They test the follower (`canopy follow`) and the HTTP service
//! (`canopy-service`) through the `canopy` binary, so they live in
//! canopy-cli, where Cargo builds it for them.

use std::collections::BTreeSet;
use std::time::Duration;

use canopy_test_support::follow::{FollowAuth, Follower};
use canopy_test_support::repo::Repo;
use canopy_test_support::serve::{Opts, Server, add_and_index};
use canopy_test_support::{WAIT, canopy_bin, eventually};
use serde_json::Value;

/// Changes a file and reindexes: one generation bump and one files_changed.
fn change(client: &canopy_client::client::ServiceClient, repo: &Repo, id: &str, n: usize) {
    repo.write(
        &format!("src/gen_{n}.rs"),
        &format!("pub fn generated_{n}() {{}}\n"),
    );
    client.reindex(id, None).expect("reindex");
    client.wait_until_idle(id, WAIT).expect("idle");
}

/// The relevant events (default kinds) in the feed, by sequence number.
fn relevant_seqs(client: &canopy_client::client::ServiceClient) -> Vec<u64> {
    client
        .events(0, Some(1000), None)
        .expect("events")
        .items
        .iter()
        .filter(|e| matches!(e.kind.as_str(), "generation_bumped" | "files_changed"))
        .map(|e| e.seq)
        .collect()
}

#[test]
fn a_killed_follower_resumes_from_its_cursor_without_losing_or_repeating_events() {
    let data = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let cursor = state.path().join("follow.cursor");
    let repo = Repo::small();
    let server = Server::start(canopy_bin!(), data.path(), &Opts::default());
    let client = server.client();
    let id = add_and_index(&client, &repo);

    let first = Follower::start(
        canopy_bin!(),
        &server.url,
        FollowAuth::DataDir(data.path()),
        &cursor,
        &[],
    );
    change(&client, &repo, &id, 1);
    change(&client, &repo, &id, 2);
    let so_far = relevant_seqs(&client);
    first.wait_handled(&cursor, &so_far);
    let first_seen = first.seqs();
    first.kill();

    // The stream goes on while the follower is down.
    change(&client, &repo, &id, 3);
    change(&client, &repo, &id, 4);
    let all = relevant_seqs(&client);
    assert!(all.len() > so_far.len());

    let mut second = Follower::start(
        canopy_bin!(),
        &server.url,
        FollowAuth::DataDir(data.path()),
        &cursor,
        &["--duration-seconds", "3"],
    );
    assert!(second.wait_exit(), "the second follower failed");
    let second_seen = second.seqs();
    let mut seen = first_seen.clone();
    seen.extend(&second_seen);
    assert_eq!(
        seen, all,
        "first run {first_seen:?}, second run {second_seen:?}, feed {all:?}"
    );
    let unique: BTreeSet<u64> = seen.iter().copied().collect();
    assert_eq!(unique.len(), seen.len(), "an event was handled twice");
    let end = second.end().expect("a follow_end line");
    assert_eq!(end["follow_end"]["reason"], "duration");
    assert_eq!(end["follow_end"]["status"]["health"], "healthy", "{end}");
    let saved: u64 = std::fs::read_to_string(&cursor)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(saved >= *all.last().unwrap());
}

#[test]
fn a_follower_backs_off_while_the_service_is_down_and_resumes_when_it_is_back() {
    let data = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let cursor = state.path().join("follow.cursor");
    let status_file = state.path().join("status.json");
    let repo = Repo::small();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let opts = Opts {
        bind: Some(format!("127.0.0.1:{port}")),
        ..Opts::default()
    };
    let server = Server::start(canopy_bin!(), data.path(), &opts);
    let client = server.client();
    let id = add_and_index(&client, &repo);
    let url = server.url.clone();
    let status = || -> Value {
        std::fs::read_to_string(&status_file)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or(Value::Null)
    };
    let follower = Follower::start(
        canopy_bin!(),
        &url,
        FollowAuth::DataDir(data.path()),
        &cursor,
        &[
            "--status-file",
            status_file.to_str().unwrap(),
            "--duration-seconds",
            "25",
        ],
    );
    eventually("the follower is healthy", || {
        status()["health"] == "healthy"
    });

    server.kill();
    eventually("the follower notices the outage", || {
        let s = status();
        s["health"] == "degraded" || s["health"] == "unhealthy"
    });
    // Backoff, not a busy loop: polls stay few while the service is down.
    std::thread::sleep(Duration::from_secs(3));
    let down = status();
    assert!(down["consecutive_errors"].as_u64().unwrap() <= 4, "{down}");
    assert!(
        down["blind_window_seconds"].as_f64().unwrap() > 1.0,
        "{down}"
    );
    assert_eq!(down["wake_source"], "retry", "{down}");
    assert!(down["last_error"].is_string(), "{down}");

    // Back on the same address: the follower picks up what happened.
    let server = Server::start(canopy_bin!(), data.path(), &opts);
    let client = server.client();
    change(&client, &repo, &id, 1);
    let all = relevant_seqs(&client);
    eventually("the follower caught up after the restart", || {
        follower.seqs().last() == all.last()
    });
    eventually("the follower is healthy again", || {
        let s = status();
        s["health"] == "healthy" && s["consecutive_errors"] == 0
    });
    follower.kill();
}
