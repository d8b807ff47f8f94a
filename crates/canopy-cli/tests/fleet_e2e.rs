//! Fleet mode end to end (issue 30): real `canopy serve --fleet` processes
//! on loopback sharing one throwaway PostgreSQL (`CANOPY_PG_BIN`; skipped
//! without PostgreSQL unless `CANOPY_REQUIRE_POSTGRES=1`).
//!
//! * two nodes: a repository registered through one is answered through
//!   the other (forwarded to its owner, with the caller's credentials);
//!   loop protection; the owner killed (`kill -9`) and the survivor taking
//!   the repository over and answering at a newer generation; the event
//!   feed gap-free and generations strictly increasing throughout;
//! * a paused owner (SIGSTOP past its lease, then SIGCONT) whose index run
//!   is held just before its publish until after the takeover: its
//!   publish is refused, and nothing it wrote late reaches the shared state;
//! * PostgreSQL restarted under load: `/health` degraded, then recovered;
//! * PostgreSQL down past the owner's lease: reads still answered, writes 503;
//! * an owner unreachable over HTTP; an idle engine closed and reopened;
//! * repository settings read and changed through any node, in PostgreSQL,
//!   and applied by the owner;
//! * without `--fleet`, nothing of fleet mode is there.
//!
//! Nothing is timed (speed is `bench/fleet.py`'s) and every wait is
//! bounded by `WAIT`. What a lease TTL still decides is how long a node
//! may stall (a loaded machine) before it loses its repositories without
//! cause: tests that wait for a takeover use `TAKEOVER_LEASE_TTL_MS`
//! (short, so the takeover comes soon, yet a stall of 4.5 s is survived),
//! the others the production default `STEADY_LEASE_TTL_MS`. The paused
//! owner is held at a known point (the publish hold), not caught mid-run.

use std::path::Path;
use std::process::Command;

use canopy_core::query::QueryParams;
use canopy_fleet::testing::PgServer;
use canopy_test_support::follow::{FollowAuth, Follower};
use canopy_test_support::repo::Repo;
use canopy_test_support::serve::{Opts, Server, assert_error, assert_settings_refusals, get, post};
use canopy_test_support::{canopy_bin, eventually};

use serde_json::{Value, json};

const TOKEN: &str = "fleet-e2e-shared-token";
/// The lease of the nodes in tests that wait for a takeover.
const TAKEOVER_LEASE_TTL_MS: &str = "5000";
/// The lease of the nodes in tests where no lease may move (the default).
const STEADY_LEASE_TTL_MS: &str = "10000";

fn pg() -> Option<PgServer> {
    canopy_test_support::postgres::started_or_skip(PgServer::start(Some(Path::new(env!(
        "CARGO_TARGET_TMPDIR"
    )))))
}

/// A fleet node of a test that waits for a takeover.
fn node(pg: &PgServer, id: &str, data: &Path) -> Server {
    takeover_node(pg, id, data, &[])
}

/// A fleet node of a test that waits for a takeover, with `env` set for
/// its process.
fn takeover_node(pg: &PgServer, id: &str, data: &Path, env: &[(String, String)]) -> Server {
    node_env(pg, id, data, TAKEOVER_LEASE_TTL_MS, &[], env)
}

/// A fleet node of a test where no lease may move, with `more` flags
/// after the fleet's.
fn node_with(pg: &PgServer, id: &str, data: &Path, more: &[&str]) -> Server {
    node_env(pg, id, data, STEADY_LEASE_TTL_MS, more, &[])
}

/// A fleet node with a lease of `lease_ttl_ms`, `more` flags after the
/// fleet's and `env` set for its process.
fn node_env(
    pg: &PgServer,
    id: &str,
    data: &Path,
    lease_ttl_ms: &str,
    more: &[&str],
    env: &[(String, String)],
) -> Server {
    let opts = Opts {
        env: env.to_vec(),
        token: Some(TOKEN.into()),
        extra: [
            "--fleet",
            &pg.url(),
            "--fleet-node-id",
            id,
            "--fleet-lease-ttl-ms",
            lease_ttl_ms,
            "--fleet-allow-local-git",
        ]
        .iter()
        .chain(more)
        .map(|s| s.to_string())
        .collect(),
        ..Opts::default()
    };
    Server::start(canopy_bin!(), data, &opts)
}

/// The value of the unlabelled metric `name` in `server`'s `/metrics`.
fn metric(server: &Server, name: &str) -> u64 {
    let text = server.client().metrics().unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in:\n{text}"))
}

/// Registers `repo` through `server` as a git source at `HEAD`; its id.
fn add_git(server: &Server, repo: &Repo) -> String {
    let added = post(
        &server.client(),
        "/repos/add",
        &json!({ "git_url": repo.path(), "ref": "HEAD" }),
    );
    assert_eq!(added.status, 200, "{}", added.text());
    added.json().unwrap()["repo_id"]
        .as_str()
        .expect("a repo_id")
        .to_string()
}

fn view(server: &Server) -> Value {
    let r = get(&server.client(), "/fleet");
    assert_eq!(r.status, 200, "{}", r.text());
    r.json().unwrap()
}

/// (owner, epoch, generation) of `repo_id` in `GET /fleet`.
fn placement(server: &Server, repo_id: &str) -> (Option<String>, u64, u64) {
    let v = view(server);
    let p = v["repos"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["repo_id"] == repo_id)
        .cloned()
        .unwrap_or_else(|| panic!("{repo_id} not in /fleet: {v}"));
    (
        p["owner"].as_str().map(str::to_string),
        p["epoch"].as_u64().unwrap(),
        p["generation"].as_u64().unwrap(),
    )
}

fn symbol(name: &str) -> QueryParams {
    QueryParams {
        symbol: Some(name.into()),
        ..QueryParams::default()
    }
}

/// Waits until `server` answers a query on `repo_id` at a generation
/// above `above`; returns that generation. On timeout, panics with the
/// node's log and `GET /fleet`.
fn answered_above(server: &Server, repo_id: &str, name: &str, above: u64) -> u64 {
    let deadline = std::time::Instant::now() + canopy_test_support::WAIT;
    let mut last = String::new();
    while std::time::Instant::now() < deadline {
        match server.client().query(repo_id, &symbol(name)) {
            Ok(served) if served.at.generation > above && !served.answer.handles.is_empty() => {
                return served.at.generation;
            }
            Ok(served) => last = format!("generation {}", served.at.generation),
            Err(e) => last = e.to_string(),
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let fleet = get(&server.client(), "/fleet").text();
    panic!(
        "{} did not answer {repo_id} above generation {above} (last: {last})\nfleet: {fleet}\nlog:\n{}",
        server.url,
        server.log()
    );
}

/// Every event of the feed, read through `server`.
fn feed(server: &Server) -> Vec<Value> {
    let r = get(&server.client(), "/events?after_seq=0&limit=1000");
    assert_eq!(r.status, 200, "{}", r.text());
    r.json().unwrap()["items"].as_array().unwrap().clone()
}

/// The feed is 1..=N without gaps or repeats, and `repo_id`'s
/// `generation_bumped` events strictly increase, each from the previous.
fn assert_feed_consistent(events: &[Value], repo_id: &str) {
    let seqs: Vec<u64> = events.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    let expected: Vec<u64> = (1..=seqs.len() as u64).collect();
    assert_eq!(seqs, expected, "the feed has gaps or repeats");
    let bumps: Vec<(u64, u64)> = events
        .iter()
        .filter(|e| e["kind"] == "generation_bumped" && e["repo_id"] == repo_id)
        .map(|e| {
            (
                e["data"]["from"].as_u64().unwrap(),
                e["data"]["to"].as_u64().unwrap(),
            )
        })
        .collect();
    assert!(!bumps.is_empty());
    let mut last = 0;
    for (from, to) in bumps {
        assert_eq!(from, last, "a bump did not start from the last generation");
        assert!(to > from);
        last = to;
    }
}

fn signal(server: &Server, sig: &str) {
    let status = Command::new("kill")
        .args([sig, &server.pid().to_string()])
        .status()
        .expect("kill");
    assert!(status.success(), "kill {sig} failed");
}

#[test]
fn two_nodes_share_a_registry_forward_and_take_over_from_a_killed_owner() {
    let Some(pg) = pg() else { return };
    let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = node(&pg, "node-a", da.path());
    let b = node(&pg, "node-b", db.path());
    let repo = Repo::small();

    // Registered through A (a git source: each owner keeps its own checkout)…
    let repo_id = add_git(&a, &repo);
    // …known to B at once (one registry), and the same source is the same repository.
    let listed = b.client().repos().unwrap();
    assert!(listed.iter().any(|r| r.repo_id == repo_id), "{listed:?}");
    let again = post(
        &b.client(),
        "/repos/add",
        &json!({ "git_url": repo.path() }),
    );
    assert_eq!(again.json().unwrap()["repo_id"], repo_id.as_str());
    assert_eq!(again.json().unwrap()["created"], false);

    // Answered through either node, at the same generation.
    let g1 = answered_above(&b, &repo_id, "authenticate", 0);
    let via_a = a.client().query(&repo_id, &symbol("authenticate")).unwrap();
    assert_eq!(via_a.at.generation, g1);
    let (owner, epoch1, published) = placement(&b, &repo_id);
    assert_eq!(published, g1);
    let owner = owner.expect("an owner");
    let (owner_node, other) = if owner == "node-a" { (a, b) } else { (b, a) };
    // A follower reading the feed through the owner (it moves to the other
    // node when the owner dies, below).
    let cursor_dir = tempfile::tempdir().unwrap();
    let follow_cursor = cursor_dir.path().join("cursor");
    let first_follower = Follower::start(
        canopy_bin!(),
        &owner_node.url,
        FollowAuth::Token(TOKEN),
        &follow_cursor,
        &[],
    );

    // `/status` without `repo` lists the fleet's repositories on every
    // node (from PostgreSQL), with owner and lease epoch; only the owner
    // has the index statistics.
    for (server, owns) in [(&owner_node, true), (&other, false)] {
        let status: Value = get(&server.client(), "/status").json().unwrap();
        let listed = status["repos"].as_array().unwrap();
        assert_eq!(listed.len(), 1, "{status}");
        let entry = &listed[0];
        assert_eq!(entry["repo_id"], repo_id.as_str(), "{status}");
        assert_eq!(entry["owner"], owner.as_str(), "{status}");
        assert_eq!(entry["lease_epoch"], epoch1, "{status}");
        assert_eq!(entry["generation"], g1, "{status}");
        assert_eq!(entry["index"].is_object(), owns, "{status}");
        assert_eq!(
            status["node_id"],
            if owns {
                owner.as_str()
            } else {
                other_id(&owner)
            }
        );
    }

    // The other node forwarded (its metrics say so); a forwarded request
    // is never forwarded again; the caller's credentials go along.
    let metrics = other.client().metrics().unwrap();
    assert!(
        metrics.contains("canopy_fleet_forward_seconds_count{node_id=")
            && metrics
                .lines()
                .any(|l| l.starts_with("canopy_fleet_forward_seconds_count")
                    && l.contains("outcome=\"ok\"")
                    && !l.ends_with(" 0")),
        "{metrics}"
    );
    let looped = other
        .client()
        .send_raw(
            "POST",
            "/query",
            Some(
                json!({ "repo": repo_id, "symbol": "authenticate" })
                    .to_string()
                    .as_bytes(),
            ),
            &[("X-Canopy-Forwarded-By", "node-x")],
        )
        .unwrap();
    assert_error(&looped, 421, "misdirected");
    let wrong = other.client_with("not-the-fleet-token");
    let refused = post(
        &wrong,
        "/query",
        &json!({ "repo": repo_id, "symbol": "authenticate" }),
    );
    assert_eq!(refused.status, 403, "{}", refused.text());

    // Health and metrics carry the fleet's state.
    let health: Value = get(&other.client(), "/health").json().unwrap();
    assert_eq!(health["fleet"]["node_id"], other_id(&owner));
    assert!(health["fleet"]["database"]["connected"].as_bool().unwrap());

    // A follower's cursor means the same on every node: paging two events
    // at a time, alternating nodes, reads exactly the feed.
    let mut cursor = 0;
    let mut paged = Vec::new();
    for turn in 0.. {
        let via = if turn % 2 == 0 { &owner_node } else { &other };
        let page: Value = get(
            &via.client(),
            &format!("/events?after_seq={cursor}&limit=2"),
        )
        .json()
        .unwrap();
        let items = page["items"].as_array().unwrap().clone();
        if items.is_empty() {
            break;
        }
        cursor = page["next_after_seq"].as_u64().unwrap();
        paged.extend(items);
    }
    let whole = feed(&other);
    let seqs = |v: &[Value]| {
        v.iter()
            .map(|e| e["seq"].as_u64().unwrap())
            .collect::<Vec<_>>()
    };
    assert_eq!(seqs(&paged)[..], seqs(&whole)[..paged.len()]);
    assert!(paged.len() >= 6, "{paged:?}");

    // A rebuild asked through the other node runs on the owner; after it, a
    // handle of the old generation gets the same 409 from both nodes: the
    // forward passes the owner's refusal through as it is (issue 30 item 4).
    let rebuild = post(
        &other.client(),
        "/reindex",
        &json!({ "repo": repo_id, "rebuild": true }),
    );
    assert!(rebuild.status < 300, "{}", rebuild.text());
    // "After it" is after its publish: an answer read between the swap and
    // the publish names that state with a generation of its own, and while
    // the run is going a handle of the old generation still passes (each
    // handle's file is checked instead), so neither marks the end.
    eventually("the rebuild is published", || {
        placement(&other, &repo_id).2 > g1
    });
    let rebuilt = placement(&other, &repo_id).2;
    answered_above(&other, &repo_id, "authenticate", g1);
    let handle = via_a.answer.handles[0].id.clone();
    for server in [&owner_node, &other] {
        let stale = post(
            &server.client(),
            "/expand",
            &json!({ "repo": repo_id, "handles": [{ "id": handle, "generation": g1 }] }),
        );
        assert_error(&stale, 409, "stale_generation");
    }

    // The owner dies; the survivor takes the lease (a newer epoch),
    // re-indexes and answers at a newer generation.
    let so_far = relevant_seqs(&feed(&other));
    first_follower.wait_handled(&follow_cursor, &so_far);
    let first_seen = first_follower.seqs();
    first_follower.kill();
    owner_node.kill();
    let g2 = answered_above(&other, &repo_id, "authenticate", rebuilt);
    // The follower, moved to the surviving node with its cursor, goes on
    // where it stopped: across the switch, every relevant event of the
    // feed exactly once (issue 30's checks: `canopy follow` across a node
    // switch without loss or duplicates).
    let mut second_follower = Follower::start(
        canopy_bin!(),
        &other.url,
        FollowAuth::Token(TOKEN),
        &follow_cursor,
        &["--duration-seconds", "3"],
    );
    assert!(second_follower.wait_exit(), "the moved follower failed");
    let mut seen = first_seen;
    seen.extend(second_follower.seqs());
    let all = relevant_seqs(&feed(&other));
    assert!(
        all.len() > so_far.len(),
        "the takeover published events: {all:?}"
    );
    assert_eq!(
        seen, all,
        "each relevant event once, in order, across the switch"
    );
    let (new_owner, epoch2, published2) = placement(&other, &repo_id);
    assert_eq!(new_owner.as_deref(), Some(other_id(&owner)));
    assert!(epoch2 > epoch1);
    assert_eq!(published2, g2);
    // A handle of the dead owner's generation is stale on the new owner too.
    let handle = via_a.answer.handles[0].id.clone();
    let stale = post(
        &other.client(),
        "/expand",
        &json!({ "repo": repo_id, "handles": [{ "id": handle, "generation": g1 }] }),
    );
    assert_error(&stale, 409, "stale_generation");
    assert_feed_consistent(&feed(&other), &repo_id);
}

/// Sequence numbers of a feed's events that `canopy follow` handles by
/// default (`generation_bumped`, `files_changed`).
fn relevant_seqs(events: &[Value]) -> Vec<u64> {
    events
        .iter()
        .filter(|e| {
            matches!(
                e["kind"].as_str(),
                Some("generation_bumped" | "files_changed")
            )
        })
        .filter_map(|e| e["seq"].as_u64())
        .collect()
}

fn other_id(owner: &str) -> &'static str {
    if owner == "node-a" {
        "node-b"
    } else {
        "node-a"
    }
}

/// The test-only publish hold of `canopy serve` (`CANOPY_TEST_FLEET_HOLD_DIR`):
/// while `hold-<node>` exists in the directory, that node stops just
/// before it publishes a new generation and says so in `held-<node>`.
struct PublishHold {
    dir: tempfile::TempDir,
}

impl PublishHold {
    fn new() -> PublishHold {
        PublishHold {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    /// `node_with`'s extra environment for a node that can be held.
    fn env(&self) -> (String, String) {
        (
            "CANOPY_TEST_FLEET_HOLD_DIR".to_string(),
            self.dir.path().display().to_string(),
        )
    }

    fn arm(&self, node: &str) {
        std::fs::write(self.dir.path().join(format!("hold-{node}")), "").unwrap();
    }

    fn release(&self, node: &str) {
        std::fs::remove_file(self.dir.path().join(format!("hold-{node}"))).unwrap();
    }

    /// What `node` is held at ("<repo id> <generation>"), once it is.
    fn held_at(&self, node: &str) -> Option<String> {
        std::fs::read_to_string(self.dir.path().join(format!("held-{node}"))).ok()
    }
}

/// The owner's run has indexed a new commit and is held just before it
/// publishes (no race with the run: `PublishHold`); it is paused there
/// (SIGSTOP) until the other node has taken the repository over and
/// published, then released and resumed (SIGCONT): its publish is
/// refused, and nothing it wrote late reaches the shared state.
/// Files of [`a_takeover_after_an_owner_died_mid_run_never_gives_a_generation_twice`]:
/// enough that a run held part-way has committed some batches and not others.
const MID_RUN_FILES: usize = 400;

fn mid_run_file(i: usize, second: bool) -> (String, String) {
    let mut text = format!("def probe_{i}_fn(x):\n    return x + {i}\n");
    if second {
        text.push_str(&format!("\n\ndef second_{i}_fn(x):\n    return x - {i}\n"));
    }
    (format!("pkg{}/mod_{i:03}.py", i % 8), text)
}

/// A generation the owner gave to a state in the middle of a run (an
/// answer read a batch the run had committed) is saved in PostgreSQL
/// (`fleet_repos.named_up_to`) before that answer leaves, so the node
/// that takes the repository over after the owner is killed mid-run
/// publishes above it: one generation never names two states, across
/// nodes as across a restart (`serve_e2e::a_restart_in_the_middle_of_a_run_never_gives_a_generation_twice`).
/// Without the save the new owner published the generation after the
/// last published one, the very number the dead owner had given.
#[test]
fn a_takeover_after_an_owner_died_mid_run_never_gives_a_generation_twice() {
    let Some(pg) = pg() else { return };
    let holds = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let hold_env = |h: &tempfile::TempDir| {
        vec![(
            "CANOPY_TEST_RUN_HOLD_DIR".to_string(),
            h.path().display().to_string(),
        )]
    };
    let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = takeover_node(&pg, "node-a", da.path(), &hold_env(&holds[0]));
    let b = takeover_node(&pg, "node-b", db.path(), &hold_env(&holds[1]));
    let files: Vec<(String, String)> = (0..MID_RUN_FILES).map(|i| mid_run_file(i, false)).collect();
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, c)| (p.as_str(), c.as_str()))
        .collect();
    let repo = Repo::new(&refs);
    let repo_id = add_git(&a, &repo);
    let published = answered_above(&a, &repo_id, "probe_0_fn", 0);
    let owner = placement(&a, &repo_id).0.expect("an owner");
    let (owner_node, hold, other) = if owner == "node-a" {
        (a, holds[0].path(), b)
    } else {
        (b, holds[1].path(), a)
    };

    // A new commit, fetched and indexed by the owner, held part-way.
    for i in 0..MID_RUN_FILES {
        let (path, text) = mid_run_file(i, true);
        repo.write(&path, &text);
    }
    repo.commit("a second function in every file");
    std::fs::write(hold.join("hold"), "300").unwrap();
    let resp = post(
        &owner_node.client(),
        "/reindex",
        &json!({ "repo": repo_id }),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    eventually("the owner's run is held part-way", || {
        hold.join("held").exists()
    });
    let mid = owner_node
        .client()
        .query(&repo_id, &symbol("second_0_fn"))
        .unwrap();
    let during = mid.at.generation;
    assert!(
        during > published,
        "an answer read a state of the run, not the published one: {during} after {published}"
    );
    owner_node.kill();

    // The survivor takes the repository over, indexes the commit and
    // publishes: above what the dead owner gave.
    let after = answered_above(&other, &repo_id, "second_0_fn", published);
    assert!(
        after > during,
        "the killed owner gave {during} to a state of its run; the new owner published {after}"
    );
    let (new_owner, _, generation) = placement(&other, &repo_id);
    assert_eq!(new_owner.as_deref(), Some(other_id(&owner)));
    assert_eq!(generation, after);
}

#[test]
fn a_paused_owner_cannot_publish_after_it_resumes() {
    let Some(pg) = pg() else { return };
    let hold = PublishHold::new();
    let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = takeover_node(&pg, "node-a", da.path(), &[hold.env()]);
    let b = takeover_node(&pg, "node-b", db.path(), &[hold.env()]);
    let repo = Repo::small();
    let repo_id = add_git(&a, &repo);
    let g1 = answered_above(&a, &repo_id, "authenticate", 0);
    let (owner, epoch1, _) = placement(&a, &repo_id);
    let owner = owner.expect("an owner");
    let (paused, other) = if owner == "node-a" { (a, b) } else { (b, a) };

    // A new commit, fetched by the owner: its run starts, indexes the
    // commit and stops just before publishing; pause the owner there.
    hold.arm(&owner);
    repo.write(
        "src/paused.rs",
        "pub fn written_while_paused() -> u32 {\n    1\n}\n",
    );
    repo.commit("v1");
    let fetched = post(
        &other.client(),
        &format!("/repos/{repo_id}/fetch"),
        &json!({}),
    );
    assert_eq!(fetched.status, 200, "{}", fetched.text());
    assert_eq!(
        fetched.json().unwrap()["status"],
        "indexing",
        "{}",
        fetched.text()
    );
    canopy_test_support::eventually("the owner's run is held before it publishes", || {
        hold.held_at(&owner).is_some()
    });
    let held_at = hold.held_at(&owner).unwrap();
    assert_eq!(
        held_at.split_whitespace().collect::<Vec<_>>(),
        [repo_id.as_str(), &(g1 + 1).to_string()],
        "{held_at}"
    );
    signal(&paused, "-STOP");

    // The other node takes over after the lease lapses and publishes.
    let g2 = answered_above(&other, &repo_id, "written_while_paused", g1);
    let (new_owner, epoch2, _) = placement(&other, &repo_id);
    assert_eq!(new_owner.as_deref(), Some(other_id(&owner)));
    assert!(epoch2 > epoch1);
    let before_resume = feed(&other).len();

    // The paused owner is released and resumes: the run it held publishes
    // only now, after its lease lapsed, and is refused.
    hold.release(&owner);
    signal(&paused, "-CONT");
    let deadline = std::time::Instant::now() + canopy_test_support::WAIT;
    while !paused.log().contains("publish refused") {
        assert!(
            std::time::Instant::now() < deadline,
            "the resumed node did not report a refused publish; log:\n{}\nfeed: {:?}",
            paused.log(),
            feed(&other)
                .iter()
                .map(|e| format!(
                    "{} {} {} {}",
                    e["seq"], e["kind"], e["data"]["written_by"], e["data"]["generation"]
                ))
                .collect::<Vec<_>>()
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    // It forwards to the new owner now, and answers at the new owner's generation.
    let via_paused = answered_above(&paused, &repo_id, "written_while_paused", g1);
    assert!(via_paused >= g2);
    // Whatever the resumed node wrote since came from a newer lease (it
    // may win the repository back: rendezvous prefers it), never epoch1's run.
    let events = feed(&other);
    for e in &events[before_resume..] {
        if e["repo_id"] == repo_id.as_str() && writer(e) == Some(owner.as_str()) {
            let epoch = e["data"]["written_by"]["epoch"].as_u64().unwrap();
            assert!(
                epoch > epoch2,
                "the paused owner wrote under an old lease: {e}"
            );
        }
    }
    assert_feed_consistent(&events, &repo_id);
    let (_, _, published) = placement(&other, &repo_id);
    assert!(published >= g2);
}

/// The node that wrote a repository event (fleet mode says so in its data).
fn writer(event: &Value) -> Option<&str> {
    event["data"]["written_by"]["node_id"].as_str()
}

/// One repository's row of `GET /fleet`.
#[derive(Clone, Debug, PartialEq)]
struct Placed {
    owner: Option<String>,
    preferred: Option<String>,
    generation: u64,
}

/// Every repository's placement in `GET /fleet`, by id.
fn placements(server: &Server) -> std::collections::BTreeMap<String, Placed> {
    view(server)["repos"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let text = |k: &str| p[k].as_str().map(str::to_string);
            (
                p["repo_id"].as_str().unwrap().to_string(),
                Placed {
                    owner: text("owner"),
                    preferred: text("preferred"),
                    generation: p["generation"].as_u64().unwrap(),
                },
            )
        })
        .collect()
}

/// Live node ids in `GET /fleet`.
fn live_nodes(server: &Server) -> Vec<String> {
    view(server)["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["live"] == true)
        .map(|n| n["node_id"].as_str().unwrap().to_string())
        .collect()
}

/// Waits until `live` are exactly the live nodes and every repository is
/// owned by the node rendezvous placement prefers, published (generation
/// > 0); returns the placements.
fn settled(server: &Server, live: &[&str]) -> std::collections::BTreeMap<String, Placed> {
    let mut last = Default::default();
    let deadline = std::time::Instant::now() + canopy_test_support::WAIT;
    while std::time::Instant::now() < deadline {
        let mut nodes = live_nodes(server);
        nodes.sort();
        last = placements(server);
        if nodes == live
            && last
                .values()
                .all(|p| p.owner.is_some() && p.owner == p.preferred && p.generation > 0)
        {
            return last;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    panic!(
        "placement did not settle on {live:?}: {last:?}\nlog:\n{}",
        server.log()
    );
}

/// Three nodes: repositories are owned where rendezvous placement puts
/// them; a node joining takes exactly the repositories it is preferred
/// for (and no others move); a node killed has its repositories taken
/// over by the two others, answered at newer generations, with the feed
/// gap-free and every repository's generations increasing.
#[test]
fn three_nodes_place_by_rendezvous_move_only_to_a_new_node_and_survive_a_kill() {
    const REPOS: usize = 6;
    let Some(pg) = pg() else { return };
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let a = node(&pg, "node-a", dirs[0].path());
    let b = node(&pg, "node-b", dirs[1].path());
    let sources: Vec<Repo> = (0..REPOS).map(|_| Repo::small()).collect();
    let ids: Vec<String> = sources.iter().map(|r| add_git(&a, r)).collect();
    for id in &ids {
        answered_above(&b, id, "authenticate", 0);
    }
    let two = settled(&a, &["node-a", "node-b"]);
    assert_eq!(two.len(), REPOS);

    // A third node joins: it takes over exactly the repositories it is now
    // preferred for; every other repository stays with its owner.
    let c = node(&pg, "node-c", dirs[2].path());
    let three = settled(&c, &["node-a", "node-b", "node-c"]);
    for (id, now) in &three {
        let before = &two[id];
        if now.preferred.as_deref() == Some("node-c") {
            assert_eq!(now.owner.as_deref(), Some("node-c"), "{id}: {three:?}");
        } else {
            assert_eq!(
                now.owner, before.owner,
                "{id} moved between old nodes: {three:?}"
            );
        }
    }
    let nodes = [("node-a", a), ("node-b", b), ("node-c", c)];
    // Any node answers any repository.
    for id in &ids {
        for (_, server) in &nodes {
            answered_above(server, id, "authenticate", 0);
        }
    }

    // Kill the node owning the most repositories (ties: the first).
    let owned = |n: &str| {
        three
            .values()
            .filter(|p| p.owner.as_deref() == Some(n))
            .count()
    };
    let victim = ["node-a", "node-b", "node-c"]
        .into_iter()
        .max_by_key(|n| (owned(n), std::cmp::Reverse(*n)))
        .unwrap();
    assert!(owned(victim) > 0);
    let survivors: Vec<&str> = ["node-a", "node-b", "node-c"]
        .into_iter()
        .filter(|n| *n != victim)
        .collect();
    let (mut killed, mut alive) = (None, Vec::new());
    for (id, server) in nodes {
        if id == victim {
            killed = Some(server);
        } else {
            alive.push(server);
        }
    }
    let lost: Vec<&String> = three
        .iter()
        .filter(|(_, p)| p.owner.as_deref() == Some(victim))
        .map(|(id, _)| id)
        .collect();
    killed.unwrap().kill();
    for id in &lost {
        answered_above(&alive[0], id, "authenticate", three[*id].generation);
    }
    let after = settled(&alive[1], &survivors);
    for (id, p) in &after {
        assert!(
            survivors.contains(&p.owner.as_deref().unwrap()),
            "{id}: {p:?}"
        );
        if !lost.contains(&id) {
            assert_eq!(p.owner, three[id].owner, "{id} moved without cause");
        }
    }
    let events = feed(&alive[0]);
    for id in &ids {
        assert_feed_consistent(&events, id);
    }
}

/// PostgreSQL stopped and started again while two nodes serve a steady
/// stream of queries: meanwhile `/health` says degraded and every answer
/// is 200 or 503 (never another 5xx); once the database is back, the
/// nodes reconnect, `/health` is healthy again, every query is answered
/// again, and the repository's lease works again (a fetch is indexed and
/// published at a newer generation, the feed gap-free).
#[test]
fn a_postgres_restart_under_load_is_survived_by_the_nodes() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let Some(mut pg) = pg() else { return };
    let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = node(&pg, "node-a", da.path());
    let b = node(&pg, "node-b", db.path());
    let repo = Repo::small();
    let repo_id = add_git(&a, &repo);
    let g1 = answered_above(&a, &repo_id, "authenticate", 0);
    answered_above(&b, &repo_id, "authenticate", 0);

    // Load: two clients querying through each node the whole time.
    let stop = Arc::new(AtomicBool::new(false));
    let load: Vec<_> = [a.client(), b.client()]
        .into_iter()
        .map(|client| {
            let (stop, repo_id) = (stop.clone(), repo_id.clone());
            std::thread::spawn(move || {
                let body = json!({ "repo": repo_id, "symbol": "authenticate" });
                let mut statuses = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let r = post(&client, "/query", &body);
                    statuses.push((r.status, r.text()));
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                statuses
            })
        })
        .collect();

    pg.stop().expect("stop PostgreSQL");
    for server in [&a, &b] {
        canopy_test_support::eventually("a node reports the database down", || {
            let health: Value = get(&server.client(), "/health").json().unwrap();
            health["status"] != "healthy" && health["fleet"]["database"]["connected"] == false
        });
    }
    pg.restart().expect("start PostgreSQL again");
    for server in [&a, &b] {
        canopy_test_support::eventually("a node reconnects", || {
            let health: Value = get(&server.client(), "/health").json().unwrap();
            health["fleet"]["database"]["connected"] == true
        });
    }
    // Back: `/health` recovers, and every query through either node is
    // answered again.
    for server in [&a, &b] {
        canopy_test_support::eventually("a node is healthy again", || {
            let health: Value = get(&server.client(), "/health").json().unwrap();
            health["status"] == "healthy"
        });
        canopy_test_support::eventually("queries are answered again", || {
            (0..5).all(|_| {
                server
                    .client()
                    .query(&repo_id, &symbol("authenticate"))
                    .is_ok_and(|s| !s.answer.handles.is_empty())
            })
        });
    }
    stop.store(true, Ordering::Relaxed);
    let mut answered = 0;
    for handle in load {
        for (status, text) in handle.join().unwrap() {
            assert!(status == 200 || status == 503, "{status}: {text}");
            answered += usize::from(status == 200);
        }
    }
    assert!(answered > 0);

    // The lease works again: a new commit fetched through either node is
    // indexed and published at a newer generation.
    repo.write(
        "src/extra.rs",
        "pub fn after_restart() -> u32 {\n    7\n}\n",
    );
    repo.commit("after the restart");
    canopy_test_support::eventually("a fetch is accepted again", || {
        post(&b.client(), &format!("/repos/{repo_id}/fetch"), &json!({})).status == 200
    });
    let g2 = answered_above(&a, &repo_id, "after_restart", g1);
    assert!(g2 > g1);
    assert_feed_consistent(&feed(&b), &repo_id);
}

/// The database is down for longer than a lease: the owner's lease has
/// lapsed (its last successful heartbeat is older than the TTL, which
/// `/health` says), and it still answers reads from its index at the
/// generation it published (`LocalReadOnly`: no node can take the lease
/// while the database is down, so its index is the newest there is),
/// while `/reindex` and a fetch are refused with 503 and `Retry-After`.
/// With the database back, the lease works again: a new commit is
/// indexed and published at a newer generation.
#[test]
fn an_owner_answers_reads_only_after_its_lease_lapsed_in_a_database_outage() {
    let Some(mut pg) = pg() else { return };
    let da = tempfile::tempdir().unwrap();
    let a = node(&pg, "node-a", da.path());
    let repo = Repo::small();
    let repo_id = add_git(&a, &repo);
    let g1 = answered_above(&a, &repo_id, "authenticate", 0);
    let (owner, _, _) = placement(&a, &repo_id);
    assert_eq!(owner.as_deref(), Some("node-a"));

    pg.stop().expect("stop PostgreSQL");
    let lease_ms: u64 = TAKEOVER_LEASE_TTL_MS.parse().unwrap();
    canopy_test_support::eventually("the owner's lease lapses (no heartbeat for a TTL)", || {
        let health: Value = get(&a.client(), "/health").json().unwrap();
        health["fleet"]["database"]["connected"] == false
            && health["fleet"]["last_heartbeat_ms"]
                .as_u64()
                .is_some_and(|ms| ms > lease_ms)
    });
    // Reads: answered from the local index, at the published generation.
    for _ in 0..3 {
        let served = a
            .client()
            .query(&repo_id, &symbol("authenticate"))
            .expect("a read is answered past the lease");
        assert_eq!(served.at.generation, g1);
        assert!(!served.answer.handles.is_empty());
    }
    // Writes: refused, with a time to retry.
    for path in ["/reindex".to_string(), format!("/repos/{repo_id}/fetch")] {
        let body = json!({ "repo": repo_id });
        let r = post(&a.client(), &path, &body);
        assert_eq!(r.status, 503, "{path}: {}", r.text());
        assert!(r.header("retry-after").is_some(), "{path}: no Retry-After");
        assert!(
            r.text().contains("answers reads only"),
            "{path}: {}",
            r.text()
        );
    }

    pg.restart().expect("start PostgreSQL again");
    repo.write(
        "src/after.rs",
        "pub fn after_the_outage() -> u32 {\n    3\n}\n",
    );
    repo.commit("after the outage");
    canopy_test_support::eventually("a fetch is accepted again", || {
        post(&a.client(), &format!("/repos/{repo_id}/fetch"), &json!({})).status == 200
    });
    let g2 = answered_above(&a, &repo_id, "after_the_outage", g1);
    assert!(g2 > g1);
    assert_feed_consistent(&feed(&a), &repo_id);
}

/// A loopback URL nobody listens on: a port the kernel handed out and
/// that was closed again at once.
fn dead_url() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    format!("http://127.0.0.1:{port}")
}

/// Nodes that cannot reach each other while PostgreSQL can: both nodes
/// advertise an address nobody listens on, so the owner keeps its lease
/// (it heartbeats) and answers locally, while the other node's forwards
/// fail. The other node answers 503 `owner_unreachable` with
/// `Retry-After`, naming the owner and the failed forward, counts it in
/// `/metrics` and reports the owner in `/health` (degraded); ownership
/// does not move.
#[test]
fn an_owner_unreachable_over_http_is_a_503_naming_it() {
    let Some(pg) = pg() else { return };
    let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (url_a, url_b) = (dead_url(), dead_url());
    let a = node_with(&pg, "node-a", da.path(), &["--fleet-advertise", &url_a]);
    let b = node_with(&pg, "node-b", db.path(), &["--fleet-advertise", &url_b]);
    let repo = Repo::small();
    let repo_id = add_git(&a, &repo);
    canopy_test_support::eventually("the repository is owned and published", || {
        let (owner, _, generation) = placement(&a, &repo_id);
        owner.is_some() && generation > 0
    });
    let (owner, epoch, _) = placement(&a, &repo_id);
    let owner = owner.unwrap();
    let (owner_node, other, owner_url) = if owner == "node-a" {
        (a, b, url_a)
    } else {
        (b, a, url_b)
    };
    let g = answered_above(&owner_node, &repo_id, "authenticate", 0);

    let body = json!({ "repo": repo_id, "symbol": "authenticate" });
    let refused = post(&other.client(), "/query", &body);
    assert_eq!(refused.status, 503, "{}", refused.text());
    assert!(
        refused
            .header("retry-after")
            .and_then(|v| v.parse::<u64>().ok())
            .is_some_and(|secs| secs >= 1),
        "{:?}",
        refused.headers
    );
    let error = refused.json().unwrap();
    assert_eq!(error["code"], "owner_unreachable", "{error}");
    assert_eq!(error["owner"]["node_id"], owner.as_str(), "{error}");
    assert_eq!(error["owner"]["url"], owner_url.as_str(), "{error}");
    assert_eq!(error["forward"]["from"], other_id(&owner), "{error}");
    assert_eq!(error["forward"]["stage"], "connect", "{error}");
    assert!(
        error["message"].as_str().unwrap().contains(&owner_url),
        "{error}"
    );

    // Counted, and reported by the forwarding node's health.
    let metrics = other.client().metrics().unwrap();
    let failures = metrics
        .lines()
        .find_map(|l| {
            let labels = format!(
                "canopy_fleet_forward_failures_total{{node_id=\"{}\",owner=\"{owner}\",stage=\"connect\"}} ",
                other_id(&owner)
            );
            l.strip_prefix(&labels)?.parse::<u64>().ok()
        })
        .unwrap_or_else(|| panic!("no forward failures in:\n{metrics}"));
    assert!(failures >= 1);
    let health: Value = get(&other.client(), "/health").json().unwrap();
    assert_eq!(health["status"], "degraded", "{health}");
    let unreachable = health["fleet"]["unreachable_owners"].as_array().unwrap();
    assert_eq!(unreachable.len(), 1, "{health}");
    assert_eq!(unreachable[0]["node_id"], owner.as_str(), "{health}");
    assert_eq!(unreachable[0]["url"], owner_url.as_str(), "{health}");
    assert!(health["fleet"]["forward_failures"].as_u64().unwrap() >= 1);
    assert!(
        health["reasons"].as_array().unwrap().iter().any(|r| r
            .as_str()
            .unwrap()
            .contains(&format!("cannot reach node {owner}"))),
        "{health}"
    );

    // Ownership did not move, and the owner answers as before.
    let (still, epoch_now, generation) = placement(&other, &repo_id);
    assert_eq!(still.as_deref(), Some(owner.as_str()));
    assert_eq!((epoch_now, generation), (epoch, g));
    let here = owner_node
        .client()
        .query(&repo_id, &symbol("authenticate"))
        .unwrap();
    assert_eq!(here.at.generation, g);
    let owner_health: Value = get(&owner_node.client(), "/health").json().unwrap();
    assert_eq!(
        owner_health["fleet"]["unreachable_owners"],
        json!([]),
        "{owner_health}"
    );
}

/// A node owning many repositories keeps memory bounded: an engine
/// nobody used for `--engine-idle-secs` is closed, and the next request
/// reopens it and answers as before (same generation, same handles).
#[test]
fn an_idle_engine_is_closed_and_reopened_by_the_next_request() {
    let Some(pg) = pg() else { return };
    let data = tempfile::tempdir().unwrap();
    let a = node_with(&pg, "node-a", data.path(), &["--engine-idle-secs", "1"]);
    let repo = Repo::small();
    let repo_id = add_git(&a, &repo);
    let g1 = answered_above(&a, &repo_id, "authenticate", 0);
    let first = a.client().query(&repo_id, &symbol("authenticate")).unwrap();

    // Nobody asks: the engine is closed.
    canopy_test_support::eventually("the idle engine is closed", || {
        metric(&a, "canopy_engines_open") == 0 && metric(&a, "canopy_engines_closed_total") >= 1
    });
    let closed = metric(&a, "canopy_engines_closed_total");

    // The next request reopens it, transparently.
    let again = a.client().query(&repo_id, &symbol("authenticate")).unwrap();
    assert_eq!(again.at.generation, g1);
    assert!(!again.answer.handles.is_empty());
    let ids = |handles: &[canopy_core::model::Handle]| {
        handles.iter().map(|h| h.id.clone()).collect::<Vec<_>>()
    };
    assert_eq!(ids(&again.answer.handles), ids(&first.answer.handles));
    // It was open again: idle once more, it is closed a second time.
    canopy_test_support::eventually("the reopened engine is closed again", || {
        metric(&a, "canopy_engines_closed_total") > closed
    });
}

/// Repository settings in fleet mode are PostgreSQL's (`fleet_repos.watch`),
/// read and changed through any node: changed through the node that does
/// not own the repository, the owner starts watching it (an edit is indexed
/// without `/reindex`); both nodes answer the same value; refusals (as on
/// one machine) and a change while PostgreSQL is down (503
/// `fleet_unavailable`) change nothing; the flag survives restarting both
/// nodes, and the owner after the restart watches as well.
#[test]
fn repository_settings_are_shared_in_postgres_and_applied_by_the_owner() {
    let Some(mut pg) = pg() else { return };
    let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut a = node_with(&pg, "node-a", da.path(), &[]);
    let mut b = node_with(&pg, "node-b", db.path(), &[]);
    let repo = Repo::small();
    // A path source (every node reads the same directory on this machine),
    // so the owner watches the files the test edits.
    let added = post(&a.client(), "/repos/add", &json!({ "path": repo.path() }));
    assert_eq!(added.status, 200, "{}", added.text());
    let added = added.json().unwrap();
    let repo_id = added["repo_id"].as_str().unwrap().to_string();
    let name = added["name"].as_str().unwrap().to_string();
    let placed = settled(&a, &["node-a", "node-b"]);
    let owner = placed[&repo_id].owner.clone().expect("an owner");
    let (owner_node, other) = if owner == "node-a" {
        (&a, &b)
    } else {
        (&b, &a)
    };
    let g1 = answered_above(other, &repo_id, "authenticate", 0);
    let path = format!("/repos/{repo_id}/settings");
    let settings = |server: &Server| {
        let r = get(&server.client(), &path);
        assert_eq!(r.status, 200, "{}", r.text());
        r.json().unwrap()
    };
    for server in [&a, &b] {
        let s = settings(server);
        assert_eq!(s["repo_id"], repo_id.as_str(), "{s}");
        assert_eq!((&s["watch"], &s["watched"]), (&json!(false), &json!(false)));
    }

    // Refused as on one machine, through the node that does not own it,
    // and nothing changes.
    let client = other.client();
    assert_settings_refusals(&client, &path);
    assert_eq!(settings(owner_node)["watch"], false);

    // Set by name through the node that does not own it: every node reads
    // it, and the owner watches (an edit is indexed without /reindex).
    let resp = post(
        &client,
        &format!("/repos/{name}/settings"),
        &json!({"watch": true}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(resp.json().unwrap()["watch"], true, "{}", resp.text());
    for server in [&a, &b] {
        let s = settings(server);
        assert_eq!((&s["watch"], &s["watched"]), (&json!(true), &json!(true)));
        assert!(server.client().repos().unwrap()[0].watch);
    }
    repo.write("src/later.rs", "pub fn set_over_http() -> u8 {\n    3\n}\n");
    let g2 = answered_above(other, &repo_id, "set_over_http", g1);
    // Indexed by the owner it was (no lease moved to make a new owner index
    // it). The run's rows are readable before the owner publishes its
    // completion (ARCHITECTURE.md, "Generations name what readers see"),
    // so the answer can come an instant before the publish: wait for it.
    canopy_test_support::eventually("the owner publishes the generation answered", || {
        placement(other, &repo_id).2 >= g2
    });
    let (still, _, published) = placement(other, &repo_id);
    assert_eq!(still.as_deref(), Some(owner.as_str()));
    assert!(published >= g2);

    // PostgreSQL down: reading and changing are refused with a time to
    // retry, and nothing changes.
    pg.stop().expect("stop PostgreSQL");
    let down = post(&client, &path, &json!({"watch": false}));
    assert_error(&down, 503, "fleet_unavailable");
    assert!(down.header("retry-after").is_some(), "{}", down.text());
    assert_error(&get(&client, &path), 503, "fleet_unavailable");
    pg.restart().expect("start PostgreSQL again");
    canopy_test_support::eventually("the settings are read again", || {
        get(&client, &path).status == 200
    });
    assert_eq!(settings(other)["watch"], true);

    // Both nodes restarted: the flag is PostgreSQL's, and whichever node
    // owns the repository now watches it.
    drop(client);
    for server in [&mut a, &mut b] {
        assert!(server.terminate(std::time::Duration::from_secs(30)));
    }
    drop((a, b));
    let a = node_with(&pg, "node-a", da.path(), &[]);
    let b = node_with(&pg, "node-b", db.path(), &[]);
    settled(&a, &["node-a", "node-b"]);
    for server in [&a, &b] {
        assert_eq!(settings(server)["watch"], true);
    }
    let g3 = answered_above(&a, &repo_id, "set_over_http", 0);
    repo.write(
        "src/after_restart.rs",
        "pub fn watched_after_restart() -> u8 {\n    4\n}\n",
    );
    answered_above(&b, &repo_id, "watched_after_restart", g3);

    // And off again, through either node.
    let resp = post(&a.client(), &path, &json!({"watch": false}));
    assert_eq!(resp.json().unwrap()["watched"], false, "{}", resp.text());
    assert_eq!(settings(&b)["watch"], false);
    assert_feed_consistent(&feed(&a), &repo_id);
}

#[test]
fn without_the_flag_nothing_of_fleet_mode_is_there() {
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(canopy_bin!(), data.path(), &Opts::default());
    let client = server.client();
    assert_error(&get(&client, "/fleet"), 404, "not_found");
    let health: Value = get(&client, "/health").json().unwrap();
    assert!(health.get("fleet").is_none(), "{health}");
    let metrics = client.metrics().unwrap();
    assert!(!metrics.contains("canopy_fleet_"), "{metrics}");
    // No fleet argument means no fleet: the registry is the data
    // directory's, as before.
    assert!(
        data.path().join("registry.db").exists() || data.path().read_dir().unwrap().count() > 0
    );
    assert!(!server.log().contains("fleet"), "{}", server.log());
}

#[test]
fn fleet_mode_refuses_a_per_node_generated_token() {
    let data = tempfile::tempdir().unwrap();
    let (ok, err) = canopy_test_support::serve::serve_exits(
        canopy_bin!(),
        data.path(),
        &[
            "--bind",
            "127.0.0.1:0",
            "--fleet",
            "postgres://nobody@127.0.0.1:1/x",
        ],
    );
    assert!(!ok);
    assert!(err.contains("--token"), "{err}");
}
