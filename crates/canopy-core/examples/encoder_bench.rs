//! What a transformer re-ranker would cost per evidence pack: the time to
//! encode one question and 30 unit texts (name, signature and first lines),
//! each cut to 32, 64 and 128 tokens, with the full encoder
//! (`canopy_core::encoder`).
//!
//! ```bash
//! cargo run --example encoder_bench -- MODEL_DIR [SOURCE_DIR] [REPS]
//! ```
//!
//! MODEL_DIR: a BERT model directory (`scripts/get-model.sh --raw`, e.g.
//! `target/ci-model`). The unit texts are the first 30 function definitions
//! (`fn` / `def` lines and the 20 lines after each) found under SOURCE_DIR
//! (default `crates/canopy-core/src`), in path order. Prints the load time and,
//! per length, the median and min of REPS (default 7) runs and the tokens encoded.

use std::path::{Path, PathBuf};
use std::time::Instant;

use canopy_core::encoder::Encoder;

const UNITS: usize = 30;
const QUESTION: &str = "QuerySet.only() after select_related() crashes on a proxy model";

fn source_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    for p in paths {
        if p.is_dir() {
            source_files(&p, out);
        } else if matches!(p.extension().and_then(|e| e.to_str()), Some("rs" | "py")) {
            out.push(p);
        }
    }
}

fn unit_texts(dir: &Path) -> Vec<String> {
    let mut files = Vec::new();
    source_files(dir, &mut files);
    let mut texts = Vec::new();
    for f in files {
        let Ok(text) = std::fs::read_to_string(&f) else {
            continue;
        };
        let lines: Vec<&str> = text.lines().collect();
        for (i, l) in lines.iter().enumerate() {
            let t = l.trim_start();
            if t.starts_with("fn ") || t.starts_with("pub fn ") || t.starts_with("def ") {
                texts.push(lines[i..(i + 21).min(lines.len())].join("\n"));
                if texts.len() == UNITS {
                    return texts;
                }
            }
        }
    }
    texts
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let model = args
        .first()
        .expect("usage: encoder_bench MODEL_DIR [SOURCE_DIR] [REPS]");
    let source = args.get(1).map_or("crates/canopy-core/src", String::as_str);
    let reps: usize = args.get(2).and_then(|r| r.parse().ok()).unwrap_or(7);
    let t = Instant::now();
    let encoder = Encoder::load(model).expect("cannot load the model");
    println!("load: {:.0} ms", t.elapsed().as_secs_f64() * 1e3);
    let units = unit_texts(Path::new(source));
    assert_eq!(
        units.len(),
        UNITS,
        "fewer than {UNITS} functions under {source}"
    );
    let mut texts: Vec<&str> = vec![QUESTION];
    texts.extend(units.iter().map(String::as_str));
    println!("texts: 1 question + {UNITS} units; ms per pack (median / min of {reps})");
    for len in [32, 64, 128] {
        let tokens: usize = texts.iter().map(|t| encoder.tokenize(t, len).len()).sum();
        let mut ms: Vec<f64> = (0..reps)
            .map(|_| {
                let t = Instant::now();
                let v = encoder.encode(&texts, len);
                std::hint::black_box(v);
                t.elapsed().as_secs_f64() * 1e3
            })
            .collect();
        ms.sort_by(f64::total_cmp);
        println!(
            "max {len:>3} tokens: {tokens:>5} tokens, {:>7.1} ms median, {:>7.1} ms min",
            ms[ms.len() / 2],
            ms[0]
        );
    }
}
