//! Database-side costs of fleet mode at a given number of repositories,
//! for `docs/fleet.md`'s capacity model: registration, one heartbeat turn
//! (heartbeat, renewal of the node's leases, snapshot of every lease) per
//! node, a fenced publish, a page of events, the cross-node wake-up of a
//! long-poll, and the bytes each repository costs in PostgreSQL.
//!
//! Runs N in-process nodes against a throwaway PostgreSQL (or `--url`).
//! Everything runs on this machine; numbers are printed as a markdown
//! table with the machine's load average beside them.
//!
//! ```sh
//! cargo run --release -p canopy-fleet --example fleet_costs -- --repos 10000 --nodes 3
//! ```

use std::time::{Duration, Instant};

use canopy_fleet::{Fleet, FleetConfig, NewEvent, NewRepo, RepoSource, RepoState};
use serde_json::json;

struct Args {
    repos: usize,
    nodes: usize,
    samples: usize,
    url: Option<String>,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        repos: 10_000,
        nodes: 3,
        samples: 300,
        url: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--repos" => a.repos = value()?.parse().map_err(|e| format!("--repos: {e}"))?,
            "--nodes" => a.nodes = value()?.parse().map_err(|e| format!("--nodes: {e}"))?,
            "--samples" => a.samples = value()?.parse().map_err(|e| format!("--samples: {e}"))?,
            "--url" => a.url = Some(value()?),
            other => {
                return Err(format!(
                    "unknown argument {other}; use --repos N --nodes N --samples N --url URL"
                ));
            }
        }
    }
    if a.nodes == 0 || a.repos == 0 || a.samples == 0 {
        return Err("--repos, --nodes and --samples must be positive".into());
    }
    Ok(a)
}

fn pct(v: &mut [Duration], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_unstable();
    let i = ((v.len() - 1) as f64 * p).round() as usize;
    v[i].as_secs_f64() * 1000.0
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = parse_args()?;
    let server;
    let url = match &args.url {
        Some(u) => u.clone(),
        None => {
            server = canopy_fleet::testing::PgServer::start(None)?
                .ok_or("no PostgreSQL binaries (install postgresql or pass --url)")?;
            server.url()
        }
    };
    let cfg = |i: usize| {
        FleetConfig::new(
            url.clone(),
            format!("cost-{i}"),
            format!("http://cost-{i}.invalid:1"),
        )
    };
    println!("load average before: {}", load());

    // Registration through the API (each one transaction with its event).
    let (first, _rx0) = Fleet::start(cfg(0)).await?;
    let mut add = Vec::new();
    let api_adds = args.samples.min(args.repos);
    for i in 0..api_adds {
        let new = NewRepo {
            name: format!("r{i}"),
            name_is_explicit: true,
            source: RepoSource::Git {
                url: format!("https://example.invalid/r{i}.git"),
                git_ref: "main".into(),
            },
            watch: false,
        };
        let t = Instant::now();
        first.add_repo(&new).await?;
        add.push(t.elapsed());
    }
    // The rest in bulk, as a migration of an existing registry would.
    if args.repos > api_adds {
        let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await?;
        tokio::spawn(conn);
        client
            .execute(
                "WITH ins AS (
                   INSERT INTO fleet_repos(repo_id, name, source_key, git_url, git_ref, added_at)
                   SELECT gen_random_uuid()::text, 'r' || i, 'git:https://example.invalid/r' || i || '.git#main',
                          'https://example.invalid/r' || i || '.git', 'main', 0
                   FROM generate_series($1::int, $2::int) AS i
                   RETURNING repo_id)
                 INSERT INTO fleet_leases(repo_id) SELECT repo_id FROM ins",
                &[&(api_adds as i32), &(args.repos as i32 - 1)],
            )
            .await?;
    }
    let mut nodes = vec![first];
    let mut receivers = Vec::new();
    for i in 1..args.nodes {
        let (f, rx) = Fleet::start(cfg(i)).await?;
        nodes.push(f);
        receivers.push(rx);
    }
    // Wait until every lease is held and placement is settled.
    let settle = Instant::now();
    loop {
        let owned: usize = nodes.iter().map(|n| n.fences().len()).sum();
        let view = nodes[0].view().await?;
        let placed = view
            .repos
            .iter()
            .filter(|p| p.owner.is_some() && p.owner == p.preferred)
            .count();
        if owned == args.repos && placed == args.repos {
            break;
        }
        if settle.elapsed() > Duration::from_secs(300) {
            return Err(format!("not settled after 300 s: {owned} owned, {placed} placed").into());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let settled_in = settle.elapsed();

    // Heartbeat turns over a steady 20 s.
    let before: Vec<usize> = nodes
        .iter()
        .map(|n| n.metrics().turn_durations().len())
        .collect();
    tokio::time::sleep(Duration::from_secs(20)).await;
    let mut turns = Vec::new();
    for (n, skip) in nodes.iter().zip(before) {
        turns.extend(n.metrics().turn_durations().into_iter().skip(skip));
    }

    // Fenced publishes on the first node's repositories.
    let fences = nodes[0].fences();
    let mut publish = Vec::new();
    for i in 0..args.samples {
        let fence = &fences[i % fences.len()];
        let repo = nodes[0]
            .repo(fence.repo_id())
            .await?
            .ok_or("repository vanished")?;
        let g = repo.state.generation;
        let state = RepoState {
            generation: g + 1,
            status: "ready".into(),
            ..RepoState::default()
        };
        let events = [
            NewEvent::repo(
                "reindex_finished",
                fence.repo_id(),
                json!({"generation": g + 1}),
            ),
            NewEvent::repo(
                "generation_bumped",
                fence.repo_id(),
                json!({"from": g, "to": g + 1}),
            ),
        ];
        let t = Instant::now();
        nodes[0].publish(fence, g, &state, &events).await?;
        publish.push(t.elapsed());
    }
    // Pages of 100 events.
    let latest = nodes[0].latest_seq().await?;
    let mut pages = Vec::new();
    for i in 0..args.samples {
        let after = (i as u64 * 7) % latest.max(1);
        let t = Instant::now();
        nodes[nodes.len() - 1]
            .events_after(after, 100, None)
            .await?;
        pages.push(t.elapsed());
    }
    // Cross-node wake-up: append on the first node, a long-poll on the last.
    let mut wakes = Vec::new();
    let waiter = nodes[nodes.len() - 1].clone();
    for _ in 0..args.samples.min(200) {
        let after = waiter.latest_seq().await?;
        let w = waiter.clone();
        let poll = tokio::spawn(async move {
            (
                w.wait_events(after, Duration::from_secs(10)).await,
                Instant::now(),
            )
        });
        tokio::time::sleep(Duration::from_millis(5)).await;
        let t = Instant::now();
        nodes[0]
            .append_events(&[NewEvent {
                kind: "ping".into(),
                repo_id: None,
                data: json!({}),
            }])
            .await?;
        let (r, woke) = poll.await?;
        r?;
        wakes.push(woke.saturating_duration_since(t));
    }
    // Bytes in PostgreSQL per repository (tables and indexes).
    let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await?;
    tokio::spawn(conn);
    let mut sizes = Vec::new();
    for table in ["fleet_repos", "fleet_leases", "fleet_events", "fleet_nodes"] {
        let bytes: i64 = client
            .query_one(
                "SELECT pg_total_relation_size($1::text::regclass)",
                &[&table],
            )
            .await?
            .get(0);
        sizes.push((table, bytes));
    }
    let events: i64 = client
        .query_one("SELECT count(*) FROM fleet_events", &[])
        .await?
        .get(0);

    println!("load average after: {}", load());
    println!();
    println!(
        "{} repositories, {} nodes, settled in {:.1} s",
        args.repos,
        args.nodes,
        settled_in.as_secs_f64()
    );
    println!();
    println!("| operation | n | p50 ms | p95 ms |");
    println!("|---|---:|---:|---:|");
    let row = |name: &str, v: &mut Vec<Duration>| {
        let n = v.len();
        println!(
            "| {name} | {n} | {:.2} | {:.2} |",
            pct(v, 0.5),
            pct(v, 0.95)
        );
    };
    row("add_repo (transaction + event)", &mut add);
    row(
        &format!(
            "heartbeat turn (heartbeat, renew ~{} leases, snapshot of {} leases)",
            args.repos / args.nodes,
            args.repos
        ),
        &mut turns,
    );
    row("publish (fenced, 2 events)", &mut publish);
    row("events page of 100", &mut pages);
    row(
        "long-poll wake-up across nodes (append → waiter returns)",
        &mut wakes,
    );
    println!();
    println!("| table | bytes | bytes per repository |");
    println!("|---|---:|---:|");
    for (table, bytes) in sizes {
        let per = if table == "fleet_events" {
            format!(
                "{:.0} per event ({events} events)",
                bytes as f64 / events.max(1) as f64
            )
        } else {
            format!("{:.0}", bytes as f64 / args.repos as f64)
        };
        println!("| {table} | {bytes} | {per} |");
    }
    for n in &nodes {
        n.shutdown().await?;
    }
    Ok(())
}
