//! Graph query latency through a warm [`Engine`] (issue 12: "callers at
//! depth 3 and the 20 hotspots answer in under 20 ms p50"): no process
//! start-up, one read snapshot per request, as `canopy mcp` answers them.
//!
//! `cargo run --release -p canopy-core --example graph_perf -- <indexed repo> [rounds] [name...]`
//!
//! The repository must be indexed already (`canopy index <repo>`); nothing is
//! indexed here. Targets: each `name` given (e.g. `QuerySet.filter`) that
//! resolves to exactly one unit, then the hotspots' own units (as
//! `path/without/ext.Qualified.name`) until there are `GRAPH_PERF_TARGETS`
//! (default 30). Each round times `hotspots(20)` once and `callers(target, 3)`
//! (and `callers(target, 1)` for comparison) once per target, after one
//! untimed warm-up round. Prints one JSON object on stdout (every sample in
//! ms, and the targets with their answer sizes) and a summary on stderr.
//! `bench/graph/perf.py` runs it. Environment: `GRAPH_PERF_TARGETS`,
//! `GRAPH_PERF_MAX_RESULTS` (default 50, as the CLI).

use std::time::Instant;

use canopy_core::graph::nav::{DEFAULT_MAX_RESULTS, TargetMatch};
use canopy_core::graph::ops::PathScope;
use canopy_core::{Engine, EngineOptions};

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn ms(started: Instant) -> f64 {
    started.elapsed().as_secs_f64() * 1000.0
}

fn percentile(samples: &[f64], p: f64) -> f64 {
    if samples.is_empty() {
        return f64::NAN;
    }
    let mut v = samples.to_vec();
    v.sort_by(f64::total_cmp);
    let rank = (p / 100.0 * (v.len() - 1) as f64).round() as usize;
    v[rank.min(v.len() - 1)]
}

/// A graph target string that names the unit alone: its path without the
/// extension, then its qualified name (`django/db/models/query.QuerySet.filter`).
fn path_target(path: &str, qualified: &str) -> String {
    let stem = match path.rfind('.') {
        Some(dot) if !path[dot..].contains('/') => &path[..dot],
        _ => path,
    };
    format!("{stem}.{qualified}")
}

struct Target {
    target: String,
    source: &'static str,
    path: String,
    line: u32,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let Some(repo) = args.get(1) else {
        return Err("usage: graph_perf <indexed repo> [rounds] [name...]".into());
    };
    let rounds: usize = args.get(2).map_or(Ok(30), |r| r.parse())?;
    let names = args.get(3..).unwrap_or_default();
    let want = env_usize("GRAPH_PERF_TARGETS", 30);
    let max_results = env_usize("GRAPH_PERF_MAX_RESULTS", DEFAULT_MAX_RESULTS);

    let opened = Instant::now();
    let engine = Engine::open(
        repo,
        EngineOptions {
            auto_index: false,
            ..EngineOptions::default()
        },
    )?;
    let open_ms = ms(opened);

    // First answers on a fresh connection (page cache warm, SQLite cache cold).
    let first = Instant::now();
    let hot = engine.graph(|g| g.hotspots(20, PathScope::default()))?;
    let first_hotspots_ms = ms(first);

    let mut targets: Vec<Target> = Vec::new();
    let mut skipped: Vec<serde_json::Value> = Vec::new();
    let mut pick = |target: String, source: &'static str, targets: &mut Vec<Target>| {
        if targets.len() >= want || targets.iter().any(|t| t.target == target) {
            return Ok::<(), canopy_core::CanopyError>(());
        }
        match engine.graph(|g| g.resolve_target(&target))? {
            TargetMatch::One(n) => targets.push(Target {
                target,
                source,
                path: n.file_path.clone(),
                line: n.start_line,
            }),
            TargetMatch::Ambiguous(c) => skipped.push(
                serde_json::json!({"target": target, "why": format!("ambiguous ({} units)", c.len())}),
            ),
            TargetMatch::NotFound | TargetMatch::NoUnit(_) => {
                skipped.push(serde_json::json!({"target": target, "why": "not found"}))
            }
        }
        Ok(())
    };
    for name in names {
        pick(name.clone(), "named", &mut targets)?;
    }
    for h in &hot.hotspots {
        if let Some(q) = &h.qualified_name {
            pick(path_target(&h.handle.file_path, q), "hotspot", &mut targets)?;
        }
    }
    if targets.is_empty() {
        return Err("no target resolved to one unit".into());
    }

    // Warm-up round (untimed).
    engine.graph(|g| g.hotspots(20, PathScope::default()))?;
    for t in &targets {
        engine.graph(|g| g.callers(&t.target, 3, max_results))?;
    }

    let mut hotspots_ms = Vec::with_capacity(rounds);
    let mut callers3_ms = Vec::with_capacity(rounds * targets.len());
    let mut callers1_ms = Vec::with_capacity(rounds * targets.len());
    let mut per_target: Vec<Vec<f64>> = vec![Vec::with_capacity(rounds); targets.len()];
    let mut sizes: Vec<(usize, usize, bool)> = vec![(0, 0, false); targets.len()];
    for _ in 0..rounds {
        let t0 = Instant::now();
        let h = engine.graph(|g| g.hotspots(20, PathScope::default()))?;
        hotspots_ms.push(ms(t0));
        assert_eq!(h.hotspots.len(), hot.hotspots.len());
        for (i, t) in targets.iter().enumerate() {
            let t0 = Instant::now();
            let a = engine.graph(|g| g.callers(&t.target, 3, max_results))?;
            let took = ms(t0);
            callers3_ms.push(took);
            per_target[i].push(took);
            sizes[i] = (a.nodes.len(), a.total, a.truncated);
            let t0 = Instant::now();
            engine.graph(|g| g.callers(&t.target, 1, max_results))?;
            callers1_ms.push(ms(t0));
        }
    }

    let summary = |v: &[f64]| {
        serde_json::json!({
            "n": v.len(),
            "p50": percentile(v, 50.0),
            "p95": percentile(v, 95.0),
            "max": percentile(v, 100.0),
        })
    };
    let target_rows: Vec<serde_json::Value> = targets
        .iter()
        .zip(&per_target)
        .zip(&sizes)
        .map(|((t, samples), &(nodes, total, truncated))| {
            serde_json::json!({
                "target": t.target, "source": t.source, "path": t.path, "line": t.line,
                "nodes": nodes, "total": total, "truncated": truncated,
                "p50": percentile(samples, 50.0), "max": percentile(samples, 100.0),
            })
        })
        .collect();
    let hotspot_rows: Vec<serde_json::Value> = hot
        .hotspots
        .iter()
        .map(|h| {
            serde_json::json!({
                "qualified_name": h.qualified_name, "path": h.handle.file_path,
                "node_type": h.handle.node_type, "lines": h.handle.line_range,
                "fan_in": h.fan_in, "fan_out": h.fan_out,
            })
        })
        .collect();
    let out = serde_json::json!({
        "repo": repo,
        "rounds": rounds,
        "max_results": max_results,
        "open_ms": open_ms,
        "first_hotspots_ms": first_hotspots_ms,
        "units_with_call_edges": hot.total,
        "hotspots": summary(&hotspots_ms),
        "callers_depth3": summary(&callers3_ms),
        "callers_depth1": summary(&callers1_ms),
        "samples": {"hotspots": hotspots_ms, "callers_depth3": callers3_ms, "callers_depth1": callers1_ms},
        "targets": target_rows,
        "skipped_targets": skipped,
        "hotspot_units": hotspot_rows,
    });
    println!("{out}");
    eprintln!(
        "graph_perf {repo}: {} targets x {rounds} rounds; callers depth 3 p50 {:.2} ms p95 {:.2} ms; hotspots(20) p50 {:.2} ms p95 {:.2} ms (first {:.1} ms)",
        targets.len(),
        percentile(&callers3_ms, 50.0),
        percentile(&callers3_ms, 95.0),
        percentile(&hotspots_ms, 50.0),
        percentile(&hotspots_ms, 95.0),
        first_hotspots_ms
    );
    Ok(())
}
