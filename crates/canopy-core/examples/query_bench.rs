//! In-process query latency:
//! `cargo run --release -p canopy-core --example query_bench -- <repo> [iterations] [name,name,…]`.
//!
//! Indexes the repository if needed, then times symbol, pattern, reference,
//! DSL, evidence-pack and planned-pack calls against the warm engine and
//! prints p50/p95/max per kind as a Markdown table. Symbol and reference
//! queries use the given names (`bench/query.sh` passes the repository's
//! most-called names); without them, names are taken from definitions.

use std::time::{Duration, Instant};

use canopy_core::index::NoProgress;
use canopy_core::pack::PackParams;
use canopy_core::query::{QueryKind, QueryParams};
use canopy_core::{Engine, EngineOptions};

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

fn time(iterations: usize, f: &mut dyn FnMut(usize)) -> Vec<Duration> {
    let mut out: Vec<Duration> = (0..iterations)
        .map(|i| {
            let t = Instant::now();
            f(i);
            t.elapsed()
        })
        .collect();
    out.sort();
    out
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let repo = args
        .next()
        .ok_or("usage: query_bench <repo> [iterations]")?;
    let iterations: usize = args.next().map(|s| s.parse()).transpose()?.unwrap_or(200);
    let given: Vec<String> = args
        .next()
        .map(|s| {
            s.split(',')
                .filter(|n| !n.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    let engine = Engine::open(&repo, EngineOptions::default())?;
    let t = Instant::now();
    let report = engine.index(None, &NoProgress)?;
    eprintln!(
        "index: {} parsed, {} unchanged in {:.2}s",
        report.files_indexed,
        report.files_unchanged,
        t.elapsed().as_secs_f64()
    );
    let status = engine.status()?;

    // Names to look up: symbols found by a broad query, so the bench fits any repo.
    let probe = engine.query(&QueryParams {
        query: Some("(limit 200 (grep \"def fn func function class return\"))".into()),
        ..Default::default()
    })?;
    let mut names: Vec<String> = probe
        .handles
        .iter()
        .filter_map(|h| {
            let first = h.preview.split(['(', ' ', ':', '<', '{']).find(|w| {
                w.len() > 3
                    && ![
                        "def", "class", "func", "function", "pub", "async", "export", "const",
                        "static", "impl", "struct", "type",
                    ]
                    .contains(w)
            })?;
            Some(first.to_string())
        })
        .collect();
    names.sort();
    names.dedup();
    if !given.is_empty() {
        names = given;
    }
    if names.is_empty() {
        names.push("main".into());
    }
    let words = [
        "error",
        "config",
        "parse request",
        "handler",
        "test",
        "read file",
        "user",
        "cache",
    ];
    let questions = [
        "how does the server parse an incoming request and report errors",
        "where is the configuration file read and validated",
        "why does the cache return stale values after an update",
    ];

    // `QUERY_BENCH_ONLY=symbol,pattern` times only those kinds (for profiling).
    let only: Option<Vec<String>> = std::env::var("QUERY_BENCH_ONLY")
        .ok()
        .map(|s| s.split(',').map(str::to_string).collect());
    let wanted = |label: &str| {
        only.as_ref()
            .is_none_or(|o| o.iter().any(|w| label.starts_with(w.as_str())))
    };
    let mut rows = Vec::new();
    let mut run = |label: &str, n: usize, f: &mut dyn FnMut(usize)| {
        if !wanted(label) || n == 0 {
            return;
        }
        let samples = time(n, f);
        rows.push(format!(
            "| {label} | {} | {:.2} | {:.2} | {:.2} |",
            samples.len(),
            percentile(&samples, 0.5).as_secs_f64() * 1e3,
            percentile(&samples, 0.95).as_secs_f64() * 1e3,
            samples.last().copied().unwrap_or_default().as_secs_f64() * 1e3
        ));
    };
    let query = |params: QueryParams| {
        let _ = engine.query(&params);
    };
    let pack = |i: usize, plan: bool| {
        let _ = engine.evidence_pack(
            &PackParams {
                query: QueryParams {
                    pattern: Some(questions[i % questions.len()].into()),
                    ..Default::default()
                },
                plan: plan.then_some(true),
                ..Default::default()
            },
            None,
        );
    };
    run("symbol", iterations, &mut |i| {
        query(QueryParams {
            symbol: Some(names[i % names.len()].clone()),
            ..Default::default()
        })
    });
    run("pattern", iterations, &mut |i| {
        query(QueryParams {
            pattern: Some(words[i % words.len()].into()),
            ..Default::default()
        })
    });
    run("reference", iterations, &mut |i| {
        query(QueryParams {
            symbol: Some(names[i % names.len()].clone()),
            kind: Some(QueryKind::Reference),
            ..Default::default()
        })
    });
    run("dsl (in-file + intersect)", iterations, &mut |i| {
        query(QueryParams {
            query: Some(format!(
                "(in-file \"**/*\" (intersect (grep \"{}\") (code \"{}\")))",
                words[i % words.len()],
                names[i % names.len()]
            )),
            ..Default::default()
        })
    });
    run("evidence pack", iterations / 2, &mut |i| pack(i, false));
    run("evidence pack, plan=true", iterations / 4, &mut |i| {
        pack(i, true)
    });
    println!(
        "repo: {repo} ({} files, {} units, {} refs)\n",
        status.files_indexed, status.units, status.references
    );
    println!("| query | n | p50 ms | p95 ms | max ms |\n|---|---|---|---|---|");
    for row in rows {
        println!("{row}");
    }
    Ok(())
}
