//! Shared set-up of the fleet integration tests: a throwaway PostgreSQL
//! per test, node configurations with short leases, and a consumer of
//! each node's ownership changes that records them and completes
//! handovers the way the service will.

#![allow(dead_code)]

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use canopy_fleet::testing::PgServer;
use canopy_fleet::{Fleet, FleetConfig, LeaseChange, NewRepo, RepoSource, Timing};

/// A server for this test, or `None` (skip) when PostgreSQL is not
/// installed and `CANOPY_REQUIRE_POSTGRES` is not set.
pub use canopy_test_support::WAIT;

pub fn pg() -> Option<PgServer> {
    canopy_test_support::postgres::started_or_skip(PgServer::start(Some(Path::new(env!(
        "CARGO_TARGET_TMPDIR"
    )))))
}

/// Short leases, with room for a loaded 2-core machine.
pub fn timing() -> Timing {
    Timing {
        lease_ttl: Duration::from_secs(3),
        heartbeat: Duration::from_millis(500),
        safety_margin: Duration::from_millis(300),
        takeover_step: Duration::from_secs(1),
        settle: Duration::from_secs(1),
        drain_timeout: Duration::from_secs(1),
        op_timeout: Duration::from_millis(1400),
        connect_timeout: Duration::from_millis(1400),
        backoff_start: Duration::from_millis(50),
        backoff_max: Duration::from_secs(1),
    }
}

pub fn config(pg: &PgServer, node: &str) -> FleetConfig {
    let mut c = FleetConfig::new(pg.url(), node, format!("http://{node}.invalid:1"));
    c.timing = timing();
    c
}

/// A started node and what it was told.
pub struct Node {
    pub fleet: Fleet,
    pub changes: Arc<Mutex<Vec<(Instant, LeaseChange)>>>,
}

impl Node {
    pub async fn start(config: FleetConfig) -> Node {
        let (fleet, mut rx) = Fleet::start(config).await.expect("node starts");
        let changes = Arc::new(Mutex::new(Vec::new()));
        let log = changes.clone();
        let releaser = fleet.clone();
        tokio::spawn(async move {
            while let Some(change) = rx.recv().await {
                if let LeaseChange::Handover { repo_id, .. } = &change {
                    // The service stops its index run, then releases.
                    let _ = releaser.release(repo_id).await;
                }
                log.lock().unwrap().push((Instant::now(), change));
            }
        });
        Node { fleet, changes }
    }

    pub fn id(&self) -> &str {
        self.fleet.node_id()
    }

    pub fn owned(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .fleet
            .fences()
            .iter()
            .map(|f| f.repo_id().to_string())
            .collect();
        v.sort();
        v
    }

    /// (repo, epoch) of every acquisition so far.
    pub fn acquisitions(&self) -> Vec<(String, u64)> {
        self.changes
            .lock()
            .unwrap()
            .iter()
            .filter_map(|(_, c)| match c {
                LeaseChange::Acquired { repo, fence, .. } => {
                    Some((repo.repo_id.clone(), fence.epoch()))
                }
                _ => None,
            })
            .collect()
    }
}

pub fn git_repo(i: usize) -> NewRepo {
    NewRepo {
        name: format!("repo{i}"),
        name_is_explicit: false,
        source: RepoSource::Git {
            url: format!("file:///srv/git/repo{i}.git"),
            git_ref: "main".into(),
        },
        watch: false,
    }
}

/// Polls `cond` every 20 ms until it holds or [`WAIT`] passes (a bound
/// that only stops a hung test: how soon things happen is measured by
/// `bench/fleet.py`, never asserted here).
pub async fn wait_for(mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + WAIT;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A raw session for inspecting the database.
pub async fn raw(pg: &PgServer) -> tokio_postgres::Client {
    let (client, conn) = tokio_postgres::connect(&pg.url(), tokio_postgres::NoTls)
        .await
        .expect("raw connection");
    tokio::spawn(conn);
    client
}
