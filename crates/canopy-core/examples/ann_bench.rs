//! Exact scan against the approximate index (HNSW) for semantic search, on
//! real vectors: the measurement behind `canopy_core::ANN_MIN_UNITS`.
//!
//! `cargo run --release -p canopy-core --example ann_bench -- <repo> <model dir> [sizes...]`
//!
//! Indexes `<repo>` with the model (embedding every unit, as `canopy index
//! --model` does; a repository indexed already only syncs), reads the stored
//! int8 vectors back from `.canopy/index.db` and embeds up to
//! `ANN_BENCH_QUERIES` (default 200) queries: the qualified names of units
//! spread evenly over the index, as text through the model. Then, for the
//! real size and each size given (default 125000 250000 500000 1000000), with
//! the vectors replicated under small deterministic perturbations up to that
//! size: the exact scan's p50/p95 at k = 40 (what a context pack asks for),
//! the approximate index's build time and p50/p95 at k = 40, and its
//! recall@10 and recall@40 against the exact scan of the same run. Prints a
//! markdown table on stdout and progress on stderr.

use std::collections::HashSet;
use std::path::PathBuf;
use std::time::Instant;

use canopy_core::embed::{Quantized, StaticModel};
use canopy_core::index::NoProgress;
use canopy_core::{Engine, EngineOptions, UnitVectors};

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

/// Deterministic noise in [-1, 1) (splitmix64).
struct Noise(u64);

impl Noise {
    fn next(&mut self) -> f32 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        (z >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }
}

/// Copy `copy` (≥ 1) of a file's rows: each vector moved by noise of about
/// a third of its own size (cosine to the original ≈ 0.95), renormalised,
/// with ids of its own.
fn perturbed(rows: &Quantized, copy: i64, noise: &mut Noise) -> Quantized {
    let dim = rows.dim();
    // A unit vector's components are about 1/sqrt(dim); noise of ±0.6 of that.
    let amplitude = 0.6 / (dim as f32).sqrt();
    let mut out = Quantized::new(dim);
    for (i, id) in rows.ids().iter().enumerate() {
        let Some(v) = rows.vector(i) else { continue };
        let moved: Vec<f32> = v.iter().map(|x| x + amplitude * noise.next()).collect();
        let norm = moved.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
        let moved: Vec<f32> = moved.iter().map(|x| x / norm).collect();
        out.push(id + copy * 1_000_000_000, &moved);
    }
    out
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(repo), Some(model_dir)) = (args.first(), args.get(1)) else {
        return Err("usage: ann_bench <repo> <model dir> [sizes...]".into());
    };
    let sizes: Vec<usize> = if args.len() > 2 {
        args[2..]
            .iter()
            .map(|s| s.parse())
            .collect::<Result<_, _>>()?
    } else {
        vec![125_000, 250_000, 500_000, 1_000_000]
    };
    let queries_wanted: usize = std::env::var("ANN_BENCH_QUERIES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);

    let model = StaticModel::load(model_dir)?;
    let started = Instant::now();
    let engine = Engine::open(
        repo,
        EngineOptions {
            embedding_model: Some(PathBuf::from(model_dir)),
            ..EngineOptions::default()
        },
    )?;
    engine.index(None, &NoProgress)?;
    eprintln!("indexed and embedded in {:.1} s", ms(started) / 1000.0);

    let db = rusqlite::Connection::open(engine.root().join(".canopy").join("index.db"))?;
    let mut files: Vec<(String, Quantized)> = Vec::new();
    {
        let mut stmt = db.prepare(
            "SELECT f.path, u.data FROM unit_vectors u JOIN files f ON f.id = u.file_id
             WHERE u.model = ?1 ORDER BY f.path",
        )?;
        let mut rows = stmt.query([model.fingerprint()])?;
        while let Some(row) = rows.next()? {
            let path: String = row.get(0)?;
            let blob: Vec<u8> = row.get(1)?;
            if let Some(q) = Quantized::from_blob(&blob, model.dim()) {
                files.push((path, q));
            }
        }
    }
    let real: usize = files.iter().map(|f| f.1.len()).sum();
    let names: Vec<String> = db
        .prepare(
            "SELECT qualified_name FROM nodes
             WHERE node_type != 'file' AND qualified_name IS NOT NULL ORDER BY id",
        )?
        .query_map([], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    let step = (names.len() / queries_wanted.max(1)).max(1);
    let queries: Vec<Vec<f32>> = names
        .iter()
        .step_by(step)
        .filter_map(|n| model.embed(n))
        .take(queries_wanted)
        .collect();
    eprintln!(
        "{} files, {real} units of {} dims, {} queries",
        files.len(),
        model.dim(),
        queries.len()
    );

    println!(
        "| units | exact p50 ms | exact p95 ms | ANN build s | ANN p50 ms | ANN p95 ms | ANN p50 / exact p50 | recall@10 | recall@40 | same top hit |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut all_sizes = vec![real];
    all_sizes.extend(sizes.into_iter().filter(|s| *s > real));
    let mut vectors = UnitVectors::new(model.dim());
    for (path, rows) in &files {
        vectors.insert_file(path, rows.clone());
    }
    let mut noise = Noise(42);
    let mut copy = 1;
    for size in all_sizes {
        'fill: while vectors.len() < size {
            for (path, rows) in &files {
                if vectors.len() >= size {
                    break 'fill;
                }
                vectors.insert_file(&format!("{path}#{copy}"), perturbed(rows, copy, &mut noise));
            }
            copy += 1;
        }
        let units = vectors.len();
        // Exact: the scan every search did before the index (one warm-up).
        vectors.set_ann_min_units(usize::MAX);
        vectors.search_exact(&queries[0], 40);
        let mut exact_ms = Vec::new();
        let mut exact10 = Vec::new();
        let mut exact40 = Vec::new();
        for q in &queries {
            let t = Instant::now();
            let hits = vectors.search_exact(q, 40);
            exact_ms.push(ms(t));
            exact10.push(vectors.search_exact(q, 10));
            exact40.push(hits);
        }
        vectors.set_ann_min_units(0);
        let t = Instant::now();
        vectors.prepare();
        let build_s = ms(t) / 1000.0;
        vectors.search(&queries[0], 40);
        let mut ann_ms = Vec::new();
        let (mut found10, mut found40, mut want10, mut want40, mut same_top) = (0, 0, 0, 0, 0);
        for (i, q) in queries.iter().enumerate() {
            let t = Instant::now();
            let hits = vectors.search(q, 40);
            ann_ms.push(ms(t));
            let hits10 = vectors.search(q, 10);
            let e10: HashSet<i64> = exact10[i].iter().map(|h| h.0).collect();
            let e40: HashSet<i64> = exact40[i].iter().map(|h| h.0).collect();
            found10 += hits10.iter().filter(|h| e10.contains(&h.0)).count();
            found40 += hits.iter().filter(|h| e40.contains(&h.0)).count();
            want10 += e10.len();
            want40 += e40.len();
            same_top += usize::from(hits.first().map(|h| h.0) == exact40[i].first().map(|h| h.0));
        }
        let (e50, a50) = (percentile(&exact_ms, 50.0), percentile(&ann_ms, 50.0));
        println!(
            "| {units} | {e50:.2} | {:.2} | {build_s:.1} | {a50:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {same_top}/{} |",
            percentile(&exact_ms, 95.0),
            percentile(&ann_ms, 95.0),
            a50 / e50,
            found10 as f64 / want10.max(1) as f64,
            found40 as f64 / want40.max(1) as f64,
            queries.len(),
        );
        eprintln!("{units} units done");
    }
    Ok(())
}
