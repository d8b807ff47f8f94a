//! Indexes one corpus and writes every resolved edge in the graph scorer's
//! prediction format (`/work/shared/eval/graph/README.md`), one JSON line each:
//! call edges (callers / callees), references, and definitions at call sites.
//!
//! `cargo run --release -p canopy-core --example graph_eval -- <corpus dir> <corpus name> > pred.jsonl`
//! (`bench/graph/run.sh` runs it on every corpus and scores the result.)

use std::io::Write;

use canopy_core::index::NoProgress;
use canopy_core::{Engine, EngineOptions};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let (Some(dir), Some(corpus)) = (args.get(1), args.get(2)) else {
        return Err("usage: graph_eval <corpus dir> <corpus name>".into());
    };
    let engine = Engine::open(dir, EngineOptions::default())?;
    let started = std::time::Instant::now();
    let report = engine.index(None, &NoProgress)?;
    eprintln!(
        "{corpus}: {} files indexed in {} ms (resolution {} ms of it; wall {} ms)",
        report.files_indexed,
        report.duration_ms,
        report.graph_resolve_ms,
        started.elapsed().as_millis()
    );
    let edges = engine.graph(|g| g.export_edges())?;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let (mut calls, mut refs) = (0u64, 0u64);
    for e in &edges {
        if e.status != "resolved" || e.how == "base" {
            continue;
        }
        refs += 1;
        let reference = serde_json::json!({
            "corpus": corpus, "def_path": e.dst_path, "def_line": e.dst_line,
            "path": e.path, "line": e.line,
        });
        writeln!(out, "{reference}")?;
        if e.kind == "call" {
            calls += 1;
            let edge = serde_json::json!({
                "corpus": corpus, "caller_path": e.path, "call_line": e.line,
                "callee_path": e.dst_path, "callee_line": e.dst_line,
            });
            writeln!(out, "{edge}")?;
            let definition = serde_json::json!({
                "corpus": corpus, "type": "definition", "path": e.path, "line": e.line, "col": e.col,
                "def_path": e.dst_path, "def_line": e.dst_line,
            });
            writeln!(out, "{definition}")?;
        }
    }
    eprintln!("{corpus}: {calls} call edges, {refs} references");
    Ok(())
}
