//! Fleet behaviour against a real, throwaway PostgreSQL: several
//! in-process nodes, each with its own connections, as separate
//! `canopy serve --fleet` processes would be.

mod common;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use canopy_fleet::testing::PgServer;
use canopy_fleet::{
    FleetError, LeaseChange, LossReason, NewEvent, RepoState, Route, migrate, placement,
};
use common::{Node, WAIT, config, git_repo, pg, raw, wait_for};
use serde_json::json;

fn state(generation: u64, status: &str) -> RepoState {
    RepoState {
        generation,
        status: status.into(),
        commit_sha: Some(format!("sha{generation}")),
        ..RepoState::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrations_are_idempotent_concurrent_and_versioned() {
    let Some(pg) = pg() else { return };
    let latest = canopy_fleet::schema::latest_version();
    let cfg = config(&pg, "m");
    let runs: Vec<_> = (0..4)
        .map(|_| {
            let cfg = cfg.clone();
            tokio::spawn(async move { migrate(&cfg).await })
        })
        .collect();
    for r in runs {
        assert_eq!(r.await.unwrap().unwrap(), latest);
    }
    assert_eq!(migrate(&cfg).await.unwrap(), latest);
    let db = raw(&pg).await;
    let applied: i64 = db
        .query_one("SELECT count(*) FROM fleet_schema_migrations", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(applied, canopy_fleet::schema::MIGRATIONS.len() as i64);
    let identities: i64 = db
        .query_one("SELECT count(*) FROM fleet_identity", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(identities, 1, "one fleet id, however many nodes migrated");

    // A database at version 1 is brought to the latest version.
    db.batch_execute("CREATE DATABASE old_fleet").await.unwrap();
    let old_url = pg.url().replace("/postgres", "/old_fleet");
    let (old, conn) = tokio_postgres::connect(&old_url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    old.batch_execute(
        "CREATE TABLE fleet_schema_migrations (version integer PRIMARY KEY, name text NOT NULL,
             applied_at timestamptz NOT NULL DEFAULT clock_timestamp())",
    )
    .await
    .unwrap();
    old.batch_execute(canopy_fleet::schema::SCHEMA_V1)
        .await
        .unwrap();
    old.execute(
        "INSERT INTO fleet_schema_migrations(version, name) VALUES (1, 'fleet base schema')",
        &[],
    )
    .await
    .unwrap();
    let mut old_cfg = cfg.clone();
    old_cfg.url = old_url;
    assert_eq!(migrate(&old_cfg).await.unwrap(), latest);
    let versions: Vec<i32> = old
        .query(
            "SELECT version FROM fleet_schema_migrations ORDER BY version",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(versions, (1..=latest).collect::<Vec<_>>());

    // A database migrated by a newer canopy is refused, not altered.
    db.execute(
        "INSERT INTO fleet_schema_migrations(version, name) VALUES (99, 'future')",
        &[],
    )
    .await
    .unwrap();
    match migrate(&cfg).await {
        Err(FleetError::SchemaTooNew { found: 99, known }) => assert_eq!(known, latest),
        other => panic!("expected SchemaTooNew, got {other:?}"),
    }
    assert!(canopy_fleet::Fleet::start(cfg).await.is_err());
}

/// Renames databases, terminating the sessions that hold them (a node
/// reconnects in between, so this retries).
async fn swap_databases(admin: &tokio_postgres::Client, renames: &[(&str, &str)]) {
    let deadline = Instant::now() + Duration::from_secs(20);
    for (from, to) in renames {
        loop {
            admin
                .execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1",
                    &[from],
                )
                .await
                .unwrap();
            match admin
                .batch_execute(&format!("ALTER DATABASE {from} RENAME TO {to}"))
                .await
            {
                Ok(()) => break,
                Err(e) if Instant::now() < deadline => {
                    let _ = e;
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Err(e) => panic!("cannot rename {from}: {e}"),
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_refuses_a_database_that_is_not_its_fleets() {
    let Some(pg) = pg() else { return };
    let admin = raw(&pg).await;
    admin
        .batch_execute("CREATE DATABASE fleetdb")
        .await
        .unwrap();
    admin
        .batch_execute("CREATE DATABASE imposter")
        .await
        .unwrap();
    let mut cfg = config(&pg, "loyal");
    cfg.url = pg.url().replace("/postgres", "/fleetdb");
    let mut imposter_cfg = cfg.clone();
    imposter_cfg.url = pg.url().replace("/postgres", "/imposter");
    migrate(&imposter_cfg).await.unwrap();
    let node = Node::start(cfg).await;
    let repo = node.fleet.add_repo(&git_repo(1)).await.unwrap().0.repo_id;
    let own_id = node.fleet.view().await.unwrap().fleet_id;
    assert!(wait_for(|| node.fleet.health().status == "healthy").await);

    // The URL now reaches another fleet's database.
    swap_databases(
        &admin,
        &[("fleetdb", "fleetdb_real"), ("imposter", "fleetdb")],
    )
    .await;
    assert!(
        wait_for(|| {
            let h = node.fleet.health();
            !h.database.connected
                && h.database
                    .last_error
                    .as_deref()
                    .is_some_and(|e| e.contains("another fleet's database"))
        })
        .await,
        "{:?}",
        node.fleet.health()
    );
    assert!(matches!(
        node.fleet.repo(&repo).await,
        Err(FleetError::Unavailable(_))
    ));
    // Back to its own database: the node carries on.
    swap_databases(
        &admin,
        &[("fleetdb", "imposter"), ("fleetdb_real", "fleetdb")],
    )
    .await;
    assert!(
        wait_for(|| node.fleet.health().database.connected).await,
        "{:?}",
        node.fleet.health()
    );
    let mut found = None;
    for _ in 0..100 {
        if let Ok(Some(r)) = node.fleet.repo(&repo).await {
            found = Some(r);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(found.is_some(), "its own database answers again");
    assert_eq!(node.fleet.view().await.unwrap().fleet_id, own_id);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registry_is_shared_and_long_polls_wake_across_nodes() {
    let Some(pg) = pg() else { return };
    let a = Node::start(config(&pg, "a")).await;
    let b = Node::start(config(&pg, "b")).await;

    let (r1, created) = a.fleet.add_repo(&git_repo(1)).await.unwrap();
    assert!(created);
    assert_eq!(r1.name, "repo1");
    assert_eq!(r1.state.generation, 0);
    // Same source from another node: the same repository.
    let (again, created) = b.fleet.add_repo(&git_repo(1)).await.unwrap();
    assert!(!created);
    assert_eq!(again.repo_id, r1.repo_id);
    // Another source with the same derived name gets a suffix; an explicit
    // name that is taken is refused.
    let mut other = git_repo(2);
    other.name = "repo1".into();
    let (r2, _) = b.fleet.add_repo(&other).await.unwrap();
    assert_eq!(r2.name, "repo1-2");
    let mut explicit = git_repo(3);
    explicit.name = "repo1".into();
    explicit.name_is_explicit = true;
    assert!(matches!(
        a.fleet.add_repo(&explicit).await,
        Err(FleetError::NameTaken(n)) if n == "repo1"
    ));
    // Watch flags and settings written on one node are read on the other.
    assert!(b.fleet.set_watch(&r1.repo_id, true).await.unwrap());
    b.fleet
        .set_setting("max_file_size", Some(&json!(1_000_000)))
        .await
        .unwrap();
    let seen = a.fleet.repo("repo1").await.unwrap().unwrap();
    assert!(seen.watch);
    assert_eq!(
        a.fleet.settings().await.unwrap()["max_file_size"],
        json!(1_000_000)
    );
    assert_eq!(a.fleet.repos().await.unwrap().len(), 2);

    // A long-poll on b wakes when a appends (LISTEN/NOTIFY), not at its
    // timeout: the timeout is an hour, and the test gives up long before.
    assert!(wait_for(|| b.fleet.health().event_listener).await);
    let after = b.fleet.latest_seq().await.unwrap();
    let waiter = {
        let f = b.fleet.clone();
        tokio::spawn(async move { f.wait_events(after, Duration::from_secs(3600)).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let seq = a
        .fleet
        .append_events(&[NewEvent {
            kind: "ping".into(),
            repo_id: None,
            data: json!({}),
        }])
        .await
        .unwrap();
    let woken = tokio::time::timeout(WAIT, waiter)
        .await
        .expect("the long-poll was not woken by the append")
        .unwrap();
    assert_eq!(woken.unwrap(), seq);

    // Removal is seen everywhere, with its event.
    assert!(a.fleet.remove_repo(&r2.repo_id).await.unwrap());
    assert!(!a.fleet.remove_repo(&r2.repo_id).await.unwrap());
    assert!(b.fleet.repo(&r2.repo_id).await.unwrap().is_none());
    let page = b.fleet.events_after(0, 100, None).await.unwrap();
    let kinds: Vec<&str> = page.items.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(kinds.iter().filter(|k| **k == "repo_added").count(), 2);
    assert_eq!(kinds.iter().filter(|k| **k == "node_joined").count(), 2);
    assert!(kinds.contains(&"repo_removed"));
    let only_r2 = b
        .fleet
        .events_after(0, 100, Some(&r2.repo_id))
        .await
        .unwrap();
    assert_eq!(only_r2.items.len(), 2);
    assert_eq!(only_r2.latest_seq, page.latest_seq);
}

/// Samples every node's valid fences and fails on two owners at once.
fn spawn_exclusivity_sampler(
    nodes: Vec<canopy_fleet::Fleet>,
    stop: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<(u64, Vec<String>)> {
    tokio::spawn(async move {
        let mut samples = 0;
        let mut violations = Vec::new();
        while !stop.load(Ordering::SeqCst) {
            let mut owners: HashMap<String, Vec<String>> = HashMap::new();
            for n in &nodes {
                for f in n.fences() {
                    owners
                        .entry(f.repo_id().to_string())
                        .or_default()
                        .push(n.node_id().to_string());
                }
            }
            for (repo, who) in owners {
                if who.len() > 1 {
                    violations.push(format!("{repo} owned by {who:?}"));
                }
            }
            samples += 1;
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        (samples, violations)
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn placement_converges_and_ownership_is_exclusive() {
    let Some(pg) = pg() else { return };
    let a = Node::start(config(&pg, "node-a")).await;
    let mut ids = Vec::new();
    for i in 0..12 {
        ids.push(a.fleet.add_repo(&git_repo(i)).await.unwrap().0.repo_id);
    }
    let b = Node::start(config(&pg, "node-b")).await;
    let c = Node::start(config(&pg, "node-c")).await;
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = spawn_exclusivity_sampler(
        vec![a.fleet.clone(), b.fleet.clone(), c.fleet.clone()],
        stop.clone(),
    );
    let names = ["node-a", "node-b", "node-c"];
    let nodes = [&a, &b, &c];
    let converged = wait_for(|| {
        ids.iter().all(|r| {
            let want = placement::owner(&names, r).unwrap_or_default();
            nodes
                .iter()
                .all(|n| n.owned().contains(r) == (n.id() == want))
        })
    })
    .await;
    // Keep sampling a while after convergence: placement must also stay put.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    stop.store(true, Ordering::SeqCst);
    let (samples, violations) = sampler.await.unwrap();
    assert!(
        converged,
        "a {:?} b {:?} c {:?}",
        a.owned(),
        b.owned(),
        c.owned()
    );
    assert!(samples > 50, "{samples} samples");
    assert!(violations.is_empty(), "{violations:?}");
    for r in &ids {
        let want = placement::owner(&names, r).unwrap_or_default();
        for n in nodes {
            assert_eq!(
                n.owned().contains(r),
                n.id() == want,
                "{r} moved after convergence"
            );
        }
    }
    // Every acquisition has its own epoch, and epochs grow per repository.
    let mut by_repo: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for n in nodes {
        for (r, e) in n.acquisitions() {
            by_repo.entry(r).or_default().push(e);
        }
    }
    for (r, mut epochs) in by_repo {
        let n = epochs.len();
        epochs.sort_unstable();
        epochs.dedup();
        assert_eq!(epochs.len(), n, "{r}: an epoch was acquired twice");
    }
    // Routing: the owner answers locally, the others forward to it.
    let r = &ids[0];
    let owner = placement::owner(&names, r).unwrap();
    for n in nodes {
        match n.fleet.route_fresh(r).await.unwrap() {
            Route::Local(f) => assert_eq!(n.id(), owner, "{f:?}"),
            Route::Forward { node_id, url, .. } => {
                assert_eq!(node_id, owner);
                assert_eq!(url, format!("http://{owner}.invalid:1"));
            }
            other => panic!("unexpected route {other:?}"),
        }
    }
    let view = a.fleet.view().await.unwrap();
    assert_eq!(view.nodes.len(), 3);
    for n in &view.nodes {
        let share = ids
            .iter()
            .filter(|r| placement::owner(&names, r) == Some(n.node_id.as_str()))
            .count();
        assert!(n.live, "{n:?}");
        assert_eq!(n.owned, share as u64, "{n:?}");
    }
    assert_eq!(view.nodes.iter().map(|n| n.owned).sum::<u64>(), 12);
    assert!(view.repos.iter().all(|p| p.owner == p.preferred));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_stay_exclusive_when_every_node_races_and_owners_crash() {
    let Some(pg) = pg() else { return };
    // Every node competes for every free lease at once (no rank delay) and
    // nothing is handed over: only the database decides.
    let racing = |node: &str| {
        let mut c = config(&pg, node);
        c.timing.takeover_step = Duration::ZERO;
        c.timing.settle = Duration::from_secs(3600);
        c
    };
    let mut nodes = Vec::new();
    for i in 0..4 {
        nodes.push(Node::start(racing(&format!("racer-{i}"))).await);
    }
    let mut ids = Vec::new();
    for i in 0..6 {
        ids.push(
            nodes[0]
                .fleet
                .add_repo(&git_repo(i))
                .await
                .unwrap()
                .0
                .repo_id,
        );
    }
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = spawn_exclusivity_sampler(
        nodes.iter().map(|n| n.fleet.clone()).collect(),
        stop.clone(),
    );
    let all_owned = |nodes: &[Node]| {
        let owned: HashSet<String> = nodes.iter().flat_map(|n| n.owned()).collect();
        ids.iter().all(|r| owned.contains(r))
    };
    assert!(wait_for(|| all_owned(&nodes)).await);
    // Crash the owner of the first repository twice; the others take over.
    let mut crashed = Vec::new();
    for round in 0..2 {
        let victim = nodes
            .iter()
            .position(|n| n.owned().contains(&ids[0]))
            .expect("someone owns it");
        let dead = nodes.remove(victim);
        dead.fleet.abort();
        crashed.push(dead);
        nodes.push(Node::start(racing(&format!("late-{round}"))).await);
        assert!(
            wait_for(|| all_owned(&nodes)).await,
            "round {round}: not every repository was taken over"
        );
    }
    stop.store(true, Ordering::SeqCst);
    let (samples, violations) = sampler.await.unwrap();
    assert!(samples > 50);
    assert!(violations.is_empty(), "{violations:?}");
    let mut seen: HashMap<(String, u64), usize> = HashMap::new();
    for n in nodes.iter().chain(crashed.iter()) {
        for key in n.acquisitions() {
            *seen.entry(key).or_insert(0) += 1;
        }
    }
    assert!(
        seen.values().all(|n| *n == 1),
        "an epoch was won by two nodes: {seen:?}"
    );
    let db = raw(&pg).await;
    let epoch: i64 = db
        .query_one(
            "SELECT epoch FROM fleet_leases WHERE repo_id = $1",
            &[&ids[0]],
        )
        .await
        .unwrap()
        .get(0);
    assert!(
        epoch >= 3,
        "two takeovers after the first acquisition: {epoch}"
    );
}

/// (epoch, expiry, acquisition) of `repo_id`'s lease, times in seconds
/// by the database's clock.
async fn lease_row(db: &tokio_postgres::Client, repo_id: &str) -> (u64, f64, f64) {
    let row = db
        .query_one(
            "SELECT epoch, extract(epoch FROM expires_at)::float8,
                    extract(epoch FROM acquired_at)::float8
             FROM fleet_leases WHERE repo_id = $1",
            &[&repo_id],
        )
        .await
        .unwrap();
    (
        row.get::<_, i64>(0).max(0) as u64,
        row.get::<_, f64>(1),
        row.get::<_, f64>(2),
    )
}

/// Node "owner" with one repository it holds the lease of, then a second
/// live node `second` (neither rebalances on its own: settle is an hour).
async fn owner_and_second_node(pg: &PgServer, second: &str) -> (Node, String, Node) {
    let mut cfg_a = config(pg, "owner");
    cfg_a.timing.settle = Duration::from_secs(3600);
    let a = Node::start(cfg_a).await;
    let repo = a.fleet.add_repo(&git_repo(1)).await.unwrap().0.repo_id;
    assert!(wait_for(|| a.fleet.fence(&repo).is_some()).await);
    let mut cfg_b = config(pg, second);
    cfg_b.timing.settle = Duration::from_secs(3600);
    let b = Node::start(cfg_b).await;
    (a, repo, b)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_owner_is_replaced_after_its_lease_expires() {
    let Some(pg) = pg() else { return };
    let (a, repo, b) = owner_and_second_node(&pg, "standby").await;
    let epoch_a = a.fleet.fence(&repo).unwrap().epoch();
    // b is live but a holds the lease: nothing moves.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(b.owned().is_empty());

    // kill -9: no release, no more renewals. The standby takes over, and
    // not before the lease expired: by the database's own clock, the new
    // epoch was acquired no earlier than the last expiry recorded for the
    // old one (watched until the takeover; how soon it comes is
    // `bench/fleet.py`'s takeover time, not asserted here).
    let db = raw(&pg).await;
    let (epoch, mut last_expiry, _) = lease_row(&db, &repo).await;
    assert_eq!(epoch, epoch_a);
    a.fleet.abort();
    let deadline = Instant::now() + WAIT;
    while b.fleet.fence(&repo).is_none() {
        assert!(Instant::now() < deadline, "the standby did not take over");
        let (epoch, expiry, _) = lease_row(&db, &repo).await;
        if epoch == epoch_a {
            last_expiry = expiry;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (epoch, _, acquired) = lease_row(&db, &repo).await;
    assert_eq!(epoch, epoch_a + 1);
    assert!(
        acquired >= last_expiry,
        "taken over at {acquired}, before the lease expired at {last_expiry}"
    );
    let fence_b = b.fleet.fence(&repo).unwrap();
    assert_eq!(fence_b.epoch(), epoch_a + 1);
    // The service hears of it with the previous holder named.
    assert!(
        wait_for(|| b.changes.lock().unwrap().iter().any(|(_, c)| matches!(
            c,
            LeaseChange::Acquired { previous_holder: Some(p), .. } if p == "owner"
        )))
        .await
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_owner_cannot_publish_after_it_resumes() {
    let Some(pg) = pg() else { return };
    let a = Node::start(config(&pg, "paused")).await;
    let repo = a.fleet.add_repo(&git_repo(1)).await.unwrap().0.repo_id;
    assert!(wait_for(|| a.fleet.fence(&repo).is_some()).await);
    let fence_a = a.fleet.fence(&repo).unwrap();
    let bump = vec![NewEvent::repo("generation_bumped", &repo, json!({"to": 1}))];
    a.fleet
        .publish(&fence_a, 0, &state(1, "ready"), &bump)
        .await
        .unwrap();

    // The pause: heartbeats stop (the process is stopped) ...
    a.fleet.abort();
    // ... and on resuming, its clock says the lease is gone: refused locally.
    assert!(wait_for(|| !fence_a.is_valid()).await);
    let late = vec![NewEvent::repo("generation_bumped", &repo, json!({"to": 2}))];
    assert!(matches!(
        a.fleet
            .publish(&fence_a, 1, &state(2, "ready"), &late)
            .await,
        Err(FleetError::Fenced(_))
    ));
    // A process that has not looked at its clock yet is refused by the
    // database: first while the lease is merely expired ...
    let blind = fence_a.ignoring_local_deadline();
    // Wait for the database's own clock to pass the lease's expiry (the
    // local deadline is a safety margin earlier, and a renewal's round
    // trip later still on a loaded machine): observed, not slept on.
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let view = a.fleet.view().await.unwrap();
        let lease = view.repos.iter().find(|p| p.repo_id == repo).unwrap();
        if lease.lease_remaining_ms.is_some_and(|ms| ms < 0) {
            assert_eq!(lease.owner, None, "an expired lease has no owner");
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the lease did not expire in the database: {lease:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    match a.fleet.publish(&blind, 1, &state(2, "ready"), &late).await {
        Err(FleetError::Fenced(m)) => assert!(m.contains("expired"), "{m}"),
        other => panic!("expected Fenced, got {other:?}"),
    }
    // ... then once another node took it over.
    let b = Node::start(config(&pg, "successor")).await;
    assert!(wait_for(|| b.fleet.fence(&repo).is_some()).await);
    let fence_b = b.fleet.fence(&repo).unwrap();
    assert_eq!(fence_b.epoch(), fence_a.epoch() + 1);
    assert!(matches!(
        a.fleet.publish(&blind, 1, &state(2, "ready"), &late).await,
        Err(FleetError::Fenced(_))
    ));
    // The new owner publishes; generations never go back.
    let next = vec![NewEvent::repo("generation_bumped", &repo, json!({"to": 2}))];
    b.fleet
        .publish(&fence_b, 1, &state(2, "ready"), &next)
        .await
        .unwrap();
    assert!(matches!(
        b.fleet.publish(&fence_b, 2, &state(1, "ready"), &[]).await,
        Err(FleetError::GenerationConflict(_))
    ));
    assert!(matches!(
        b.fleet.publish(&fence_b, 1, &state(3, "ready"), &[]).await,
        Err(FleetError::GenerationConflict(_))
    ));
    let row = b.fleet.repo(&repo).await.unwrap().unwrap();
    assert_eq!(row.state.generation, 2);
    assert_eq!(
        row.published_by,
        Some(("successor".into(), fence_b.epoch()))
    );
    // The feed holds exactly the accepted writes.
    let page = b.fleet.events_after(0, 100, Some(&repo)).await.unwrap();
    let bumps: Vec<(u64, Option<u64>)> = page
        .items
        .iter()
        .filter(|e| e.kind == "generation_bumped")
        .map(|e| (e.data["to"].as_u64().unwrap_or(0), e.epoch))
        .collect();
    assert_eq!(
        bumps,
        vec![(1, Some(fence_a.epoch())), (2, Some(fence_b.epoch()))]
    );
    assert!(a.fleet.metrics().fenced_refusals() >= 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_are_gap_free_and_exactly_once_for_every_reader() {
    let Some(pg) = pg() else { return };
    // The writers publish under the leases they hold when they start, so no
    // lease may lapse meanwhile: the production timing (10 s leases, 3 s
    // operation timeout), as 3 s leases lapsed under a loaded machine's
    // stalls (3 of 10 runs beside two CPU hogs).
    let steady = |node: &str| {
        let mut c = config(&pg, node);
        c.timing = canopy_fleet::Timing::default();
        c
    };
    let nodes = vec![
        Node::start(steady("w1")).await,
        Node::start(steady("w2")).await,
        Node::start(steady("w3")).await,
    ];
    let mut ids = Vec::new();
    for i in 0..6 {
        ids.push(
            nodes[0]
                .fleet
                .add_repo(&git_repo(i))
                .await
                .unwrap()
                .0
                .repo_id,
        );
    }
    assert!(
        wait_for(|| {
            let owned: HashSet<String> = nodes.iter().flat_map(|n| n.owned()).collect();
            ids.iter().all(|r| owned.contains(r))
                && nodes.iter().all(|n| n.fleet.health().live_nodes == 3)
        })
        .await
    );
    let start_seq = nodes[0].fleet.latest_seq().await.unwrap();
    const BUMPS: u64 = 20;
    const NOTES: usize = 15;
    // Readers on every node tail the feed from the same cursor while the
    // writers run.
    let expected_total = ids.len() as u64 * BUMPS * 2 + (NOTES * nodes.len()) as u64;
    let target = start_seq + expected_total;
    let readers: Vec<_> = nodes
        .iter()
        .map(|n| {
            let f = n.fleet.clone();
            tokio::spawn(async move {
                let mut cursor = start_seq;
                let mut got = Vec::new();
                let deadline = Instant::now() + Duration::from_secs(60);
                while cursor < target && Instant::now() < deadline {
                    let page = f.events_after(cursor, 7, None).await.expect("page");
                    if page.items.is_empty() {
                        let _ = f.wait_events(cursor, Duration::from_millis(500)).await;
                        continue;
                    }
                    for e in page.items {
                        cursor = e.seq;
                        got.push(e);
                    }
                }
                got
            })
        })
        .collect();
    let mut writers = Vec::new();
    for n in &nodes {
        for fence in n.fleet.fences() {
            let f = n.fleet.clone();
            writers.push(tokio::spawn(async move {
                for g in 1..=BUMPS {
                    let events = vec![
                        NewEvent::repo("generation_bumped", fence.repo_id(), json!({"to": g})),
                        NewEvent::repo("files_changed", fence.repo_id(), json!({"generation": g})),
                    ];
                    f.publish(&fence, g - 1, &state(g, "ready"), &events)
                        .await
                        .expect("publish");
                }
            }));
        }
        let f = n.fleet.clone();
        let me = n.id().to_string();
        writers.push(tokio::spawn(async move {
            for i in 0..NOTES {
                f.append_events(&[NewEvent {
                    kind: "note".into(),
                    repo_id: None,
                    data: json!({"node": me, "i": i}),
                }])
                .await
                .expect("append");
            }
        }));
    }
    for w in writers {
        w.await.unwrap();
    }
    assert_eq!(nodes[1].fleet.latest_seq().await.unwrap(), target);
    let mut first: Option<Vec<(u64, String, serde_json::Value)>> = None;
    for r in readers {
        let got = r.await.unwrap();
        let seqs: Vec<u64> = got.iter().map(|e| e.seq).collect();
        let want: Vec<u64> = (start_seq + 1..=target).collect();
        assert_eq!(seqs, want, "a reader missed or repeated events");
        // Per repository, generations appear in order, each exactly once.
        let mut per_repo: HashMap<String, Vec<u64>> = HashMap::new();
        for e in got.iter().filter(|e| e.kind == "generation_bumped") {
            per_repo
                .entry(e.repo_id.clone().unwrap_or_default())
                .or_default()
                .push(e.data["to"].as_u64().unwrap_or(0));
        }
        for r in &ids {
            assert_eq!(
                per_repo.get(r),
                Some(&(1..=BUMPS).collect::<Vec<_>>()),
                "{r}"
            );
        }
        let content: Vec<_> = got.into_iter().map(|e| (e.seq, e.kind, e.data)).collect();
        match &first {
            None => first = Some(content),
            Some(f) => assert_eq!(f, &content, "readers on different nodes disagree"),
        }
    }
}

/// The bad order behind `a_database_restart_under_load_is_survived`'s
/// flakiness, driven by hand (no heartbeat task runs): one keeper turn
/// reads its snapshot (the new repository's lease free, no holder), then
/// takes the lease; the database goes away before another snapshot is
/// read; the lease runs out locally. This node was the lease's last holder
/// and nobody can take a lease without the database, so routing must say
/// `LocalReadOnly`, not that the repository has no owner. (Under load the
/// restart test's outage sometimes began within that heartbeat.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_taken_just_before_an_outage_is_still_known_as_this_nodes() {
    let Some(mut pg) = pg() else { return };
    let (fleet, _changes) = canopy_fleet::Fleet::start_without_keeper(config(&pg, "last"))
        .await
        .expect("node starts");
    let repo = fleet.add_repo(&git_repo(1)).await.unwrap().0.repo_id;
    fleet.keeper_turn().await.unwrap();
    let fence = fleet
        .fence(&repo)
        .expect("the lease is taken in the first turn");

    pg.stop().expect("fast shutdown");
    // Wait out the local deadline (TTL − margin after the take).
    assert!(wait_for(|| !fence.is_valid()).await);
    // The next turn drops the lease and finds the database gone.
    assert!(fleet.keeper_turn().await.is_err());
    assert!(!fleet.health().database.connected);
    assert!(fleet.fence(&repo).is_none());
    match fleet.route(&repo) {
        Route::LocalReadOnly { epoch } => assert_eq!(epoch, fence.epoch()),
        other => panic!("expected LocalReadOnly, got {other:?}"),
    }
}

/// What one load task of [`a_database_restart_under_load_is_survived`] saw.
#[derive(Debug, Default)]
struct Load {
    ok: u64,
    /// `Unavailable` after trying the database (refused, broken, timed out).
    unavailable: u64,
    /// `Unavailable` without trying: inside the pool's backoff delay.
    refused_in_backoff: u64,
    other: Vec<String>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_restart_under_load_is_survived() {
    let Some(mut pg) = pg() else { return };
    let a = Node::start(config(&pg, "survivor")).await;
    let repo = a.fleet.add_repo(&git_repo(1)).await.unwrap().0.repo_id;
    assert!(wait_for(|| a.fleet.fence(&repo).is_some()).await);
    let fence = a.fleet.fence(&repo).unwrap();
    a.fleet
        .publish(
            &fence,
            0,
            &state(1, "ready"),
            &[NewEvent::repo("generation_bumped", &repo, json!({"to": 1}))],
        )
        .await
        .unwrap();
    let seq_before = a.fleet.latest_seq().await.unwrap();
    assert!(wait_for(|| a.fleet.health().status == "healthy").await);

    // Load: readers hitting the registry and the feed the whole time. Each
    // call has a hang guard (WAIT, which only stops a hung test; a call that
    // hit it counts as an error below). How fast a call fails is not timed:
    // each one is bounded by its connect and operation timeouts by
    // construction; what is checked is that the calls keep returning.
    let stop = Arc::new(AtomicBool::new(false));
    let load: Vec<_> = (0..4)
        .map(|i| {
            let f = a.fleet.clone();
            let stop = stop.clone();
            let repo = repo.clone();
            tokio::spawn(async move {
                let mut seen = Load::default();
                while !stop.load(Ordering::SeqCst) {
                    let call = async {
                        if i % 2 == 0 {
                            f.repo(&repo).await.map(|_| ())
                        } else {
                            f.events_after(0, 10, None).await.map(|_| ())
                        }
                    };
                    let r = tokio::time::timeout(WAIT, call).await;
                    let _ = f.route(&repo);
                    match r {
                        Ok(Ok(())) => seen.ok += 1,
                        Ok(Err(FleetError::Unavailable(m))) if m.starts_with("reconnecting in") => {
                            seen.refused_in_backoff += 1
                        }
                        Ok(Err(FleetError::Unavailable(_))) => seen.unavailable += 1,
                        Ok(Err(e)) => seen.other.push(e.to_string()),
                        Err(_) => seen.other.push(format!("no answer within {WAIT:?}")),
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                seen
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(500)).await;

    pg.stop().expect("fast shutdown");
    assert!(
        wait_for(|| !a.fleet.health().database.connected).await,
        "the outage was not noticed"
    );
    let during = a.fleet.health();
    assert_eq!(during.status, "degraded", "{during:?}");
    // The lease runs out locally; the last owner still answers reads.
    assert!(wait_for(|| a.fleet.fence(&repo).is_none()).await);
    let route = a.fleet.route(&repo);
    assert!(
        matches!(route, Route::LocalReadOnly { .. }),
        "{route:?} {:?}",
        a.fleet.health()
    );
    assert!(
        wait_for(|| a.changes.lock().unwrap().iter().any(|(_, c)| matches!(
            c,
            LeaseChange::Lost {
                reason: LossReason::Expired,
                ..
            }
        )))
        .await
    );

    pg.restart().expect("restart");
    let back = Instant::now();
    assert!(
        wait_for(|| a.fleet.fence(&repo).is_some()).await,
        "the lease was not taken again after the restart: {:?}",
        a.fleet.health()
    );
    assert!(wait_for(|| a.fleet.health().status == "healthy").await);
    eprintln!("lease back {:?} after the restart", back.elapsed());
    stop.store(true, Ordering::SeqCst);
    let mut refused_in_backoff = 0;
    for l in load {
        let seen = l.await.unwrap();
        assert!(
            seen.other.is_empty(),
            "errors other than unavailable: {:?}",
            seen.other
        );
        assert!(seen.ok > 0, "{seen:?}");
        // Failing, not hanging: every caller had calls fail during the
        // outage and went on calling (one call stuck across the outage would
        // leave it at most one failure).
        assert!(
            seen.unavailable + seen.refused_in_backoff >= 2,
            "a caller did not keep failing through the outage: {seen:?}"
        );
        refused_in_backoff += seen.refused_in_backoff;
    }
    // Between attempts the pool backs off: calls inside a backoff delay
    // fail at once, without trying the database (no connection storm).
    assert!(
        refused_in_backoff > 0,
        "no call was refused during a backoff"
    );
    // Nothing lost: the generation, the feed and its sequence carry on.
    let fence = a.fleet.fence(&repo).unwrap();
    assert!(fence.epoch() > 1);
    let row = a.fleet.repo(&repo).await.unwrap().unwrap();
    assert_eq!(row.state.generation, 1);
    assert_eq!(
        row.published_by.as_ref().map(|p| p.0.as_str()),
        Some("survivor")
    );
    let seq = a
        .fleet
        .publish(
            &fence,
            1,
            &state(2, "ready"),
            &[NewEvent::repo("generation_bumped", &repo, json!({"to": 2}))],
        )
        .await
        .unwrap();
    assert_eq!(seq, seq_before + 1);
    assert!(a.fleet.health().database.reconnects >= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_ids_are_exclusive_and_shutdown_hands_over_at_once() {
    let Some(pg) = pg() else { return };
    let a = Node::start(config(&pg, "leaver")).await;
    let mut ids = Vec::new();
    for i in 0..4 {
        ids.push(a.fleet.add_repo(&git_repo(i)).await.unwrap().0.repo_id);
    }
    assert!(wait_for(|| a.owned().len() == 4).await);
    // A second process with the same id is refused while the first lives.
    match canopy_fleet::Fleet::start(config(&pg, "leaver")).await {
        Err(FleetError::NodeIdInUse { node_id, .. }) => assert_eq!(node_id, "leaver"),
        other => panic!("expected NodeIdInUse, got {:?}", other.map(|(f, _)| f)),
    }
    let mut cfg_b = config(&pg, "stayer");
    cfg_b.timing.settle = Duration::from_secs(3600);
    let b = Node::start(cfg_b).await;
    assert!(wait_for(|| b.fleet.health().live_nodes == 2).await);
    a.fleet.shutdown().await.unwrap();
    assert!(a.owned().is_empty());
    // Released, not left to expire: as soon as shutdown returns, the
    // database holds no unexpired lease of the leaver (its TTL would keep
    // each one for seconds), so the stayer takes them at its next heartbeat.
    // Read from the database's own clock, not timed here.
    let view = b.fleet.view().await.unwrap();
    for lease in view.repos.iter().filter(|p| ids.contains(&p.repo_id)) {
        assert_ne!(
            lease.owner.as_deref(),
            Some("leaver"),
            "a lease outlived its holder's shutdown: {lease:?}"
        );
    }
    assert!(wait_for(|| b.owned().len() == 4).await);
    let view = b.fleet.view().await.unwrap();
    let leaver = view.nodes.iter().find(|n| n.node_id == "leaver").unwrap();
    assert_eq!(leaver.state, "left");
    assert!(!leaver.live);
    let page = b.fleet.events_after(0, 100, None).await.unwrap();
    assert!(page.items.iter().any(|e| e.kind == "node_left"));
    // The id is free again once its holder left.
    let again = Node::start(config(&pg, "leaver")).await;
    assert_eq!(
        again.fleet.health().node_state,
        canopy_fleet::NodeState::Active
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_joining_node_receives_exactly_its_share() {
    let Some(pg) = pg() else { return };
    let a = Node::start(config(&pg, "first")).await;
    let mut ids = Vec::new();
    for i in 0..20 {
        ids.push(a.fleet.add_repo(&git_repo(i)).await.unwrap().0.repo_id);
    }
    assert!(wait_for(|| a.owned().len() == 20).await);
    let b = Node::start(config(&pg, "second")).await;
    let names = ["first", "second"];
    let mut want: Vec<String> = ids
        .iter()
        .filter(|r| placement::owner(&names, r) == Some("second"))
        .cloned()
        .collect();
    want.sort();
    assert!(!want.is_empty() && want.len() < 20);
    assert!(
        wait_for(|| b.owned() == want && a.owned().len() == 20 - want.len()).await,
        "b owns {:?}, wanted {want:?}",
        b.owned()
    );
    let mut handed: Vec<String> = a
        .changes
        .lock()
        .unwrap()
        .iter()
        .filter_map(|(_, c)| match c {
            LeaseChange::Handover { repo_id, .. } => Some(repo_id.clone()),
            _ => None,
        })
        .collect();
    handed.sort();
    // Under load the old owner may take one back (ranked second, after a
    // takeover step) before the new one did and hand it over again: each
    // is still one the new node wins, and none other moved.
    handed.dedup();
    assert_eq!(handed, want, "only the repositories the new node wins move");
}

/// A watch flag changed by a node that does not own the repository
/// reaches the owner (`LeaseChange::Settings`) at its next heartbeat, once
/// per change; the node that changed it is told nothing (it owns nothing).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_flag_changed_anywhere_reaches_the_owner() {
    let Some(pg) = pg() else { return };
    let (a, repo, b) = owner_and_second_node(&pg, "other").await;
    let told = |n: &Node| -> Vec<bool> {
        n.changes
            .lock()
            .unwrap()
            .iter()
            .filter_map(|(_, c)| match c {
                LeaseChange::Settings { repo_id, watch } if *repo_id == repo => Some(*watch),
                _ => None,
            })
            .collect()
    };
    assert!(told(&a).is_empty());

    assert!(b.fleet.set_watch(&repo, true).await.unwrap());
    assert!(wait_for(|| told(&a) == [true]).await, "{:?}", told(&a));
    assert!(b.fleet.set_watch(&repo, false).await.unwrap());
    assert!(
        wait_for(|| told(&a) == [true, false]).await,
        "{:?}",
        told(&a)
    );
    // Unchanged flags are not sent again.
    tokio::time::sleep(a.fleet.config().timing.heartbeat * 3).await;
    assert_eq!(told(&a), [true, false]);
    assert!(told(&b).is_empty());
    assert!(!b.fleet.set_watch("no-such-repo", true).await.unwrap());
}

/// `note_named` only raises a repository's `named_up_to`, and the row a
/// node adopts with carries it (the service's side:
/// `fleet_e2e::a_takeover_after_an_owner_died_mid_run_never_gives_a_generation_twice`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn named_up_to_is_only_raised_and_read_with_the_row() {
    let Some(pg) = pg() else { return };
    let a = Node::start(config(&pg, "a")).await;
    let repo = a.fleet.add_repo(&git_repo(1)).await.unwrap().0.repo_id;
    let named = |row: Option<canopy_fleet::RepoRow>| row.expect("the repository").named_up_to;
    assert_eq!(named(a.fleet.repo(&repo).await.unwrap()), 0);
    assert!(a.fleet.note_named(&repo, 7).await.unwrap());
    assert!(a.fleet.note_named(&repo, 5).await.unwrap());
    assert_eq!(named(a.fleet.repo(&repo).await.unwrap()), 7);
    assert!(!a.fleet.note_named("no-such-repo", 9).await.unwrap());
}
