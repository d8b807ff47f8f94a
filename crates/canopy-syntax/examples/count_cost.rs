//! What token counting costs on a repository's texts.
//!
//! Usage: `cargo run --release --workspace --example count_cost -- FILE...`
//! (e.g. `git ls-files -z | xargs -0 target/release/examples/count_cost`).
//! Reads every file that is UTF-8 text, then counts each one's
//! `o200k_base` tokens (`tokens::count_tokens`, the index's counter) in
//! lines of up to 60 lines, as an index counts units, for 3 passes on one
//! thread, and prints bytes, tokens and the best pass's seconds and MB/s,
//! for ASCII and non-ASCII texts apart.

use std::time::Instant;

fn main() {
    let mut ascii: Vec<String> = Vec::new();
    let mut other: Vec<String> = Vec::new();
    for path in std::env::args().skip(1) {
        let Ok(bytes) = std::fs::read(&path) else {
            continue;
        };
        let Ok(text) = String::from_utf8(bytes) else {
            continue;
        };
        let lines: Vec<&str> = text.split_inclusive('\n').collect();
        for chunk in lines.chunks(60) {
            let chunk = chunk.concat();
            if chunk.is_ascii() {
                ascii.push(chunk);
            } else {
                other.push(chunk);
            }
        }
    }
    canopy_syntax::tokens::warm_up();
    for (name, texts) in [("ascii", &ascii), ("non-ascii", &other)] {
        let bytes: usize = texts.iter().map(String::len).sum();
        let mut best = f64::MAX;
        let mut tokens = 0;
        for _ in 0..3 {
            let started = Instant::now();
            tokens = texts
                .iter()
                .map(|t| canopy_syntax::tokens::count_tokens(t))
                .sum::<usize>();
            best = best.min(started.elapsed().as_secs_f64());
        }
        println!(
            "{name}: {} texts, {bytes} bytes, {tokens} tokens, best {best:.3} s, {:.1} MB/s",
            texts.len(),
            bytes as f64 / best / 1e6
        );
    }
}
