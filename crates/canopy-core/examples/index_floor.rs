//! The parse-and-extract floor of a cold index: the same files, grammars,
//! extraction queries and thread count as `canopy index`, and nothing else.
//!
//! Usage: `cargo run --release -p canopy-core --example index_floor -- REPO [--threads N]`
//!
//! Lists the files `canopy index` would (`discover`, default size limit),
//! reads each, parses it and runs its language's compiled extraction query
//! (`lang::parse_and_match`) on N worker threads (default: the machine's
//! parallelism, as the index's parser threads). Prints one JSON line: files,
//! bytes, captures and wall seconds. CPU time is the caller's to measure
//! (`bench/floor.sh` runs it under GNU time beside a cold index).

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

fn main() {
    let mut root: Option<PathBuf> = None;
    let mut threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--threads" => {
                threads = args
                    .next()
                    .and_then(|n| n.parse().ok())
                    .filter(|&n| n > 0)
                    .unwrap_or_else(|| usage("--threads needs a positive number"));
            }
            _ if root.is_none() => root = Some(PathBuf::from(arg)),
            _ => usage("one repository only"),
        }
    }
    let root = root.unwrap_or_else(|| usage("no repository given"));
    let started = Instant::now();
    let discovery =
        canopy_core::discover::discover(&root, canopy_core::discover::DEFAULT_MAX_FILE_SIZE, None)
            .unwrap_or_else(|e| {
                eprintln!("cannot list {}: {e}", root.display());
                std::process::exit(1);
            });
    let files = discovery.files;
    let next = AtomicUsize::new(0);
    let bytes = AtomicUsize::new(0);
    let captures = AtomicUsize::new(0);
    let parsed = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(file) = files.get(i) else { break };
                    let Ok(source) = std::fs::read(&file.abs_path) else {
                        continue;
                    };
                    bytes.fetch_add(source.len(), Ordering::Relaxed);
                    if let Some(n) = canopy_core::lang::parse_and_match(&file.path, &source) {
                        captures.fetch_add(n, Ordering::Relaxed);
                        parsed.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }
    });
    println!(
        "{{\"files\": {}, \"parsed\": {}, \"bytes\": {}, \"captures\": {}, \"threads\": {threads}, \"wall_s\": {:.3}}}",
        files.len(),
        parsed.into_inner(),
        bytes.into_inner(),
        captures.into_inner(),
        started.elapsed().as_secs_f64()
    );
}

fn usage(why: &str) -> ! {
    eprintln!("{why}\nusage: index_floor REPO [--threads N]");
    std::process::exit(2);
}
