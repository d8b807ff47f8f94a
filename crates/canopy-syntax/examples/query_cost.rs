//! What each pattern of an extraction query costs.
//!
//! Usage: `cargo run --release -p canopy-syntax --example query_cost -- LANG FILE...`
//! (`LANG`: rust, python, typescript, go; `QUERY_COST_SCM=file.scm` measures
//! that query text instead of the bundled one). Parses every file once, then times
//! query matching over all trees: with the whole query, and with each
//! pattern alone and without each pattern. Patterns are listed by their
//! first line in the `.scm` file, those whose removal saves most first. Times are the best of 5 passes, so a noisy
//! neighbour inflates them less.
//!
//! A pattern's cost alone does not add up to the whole query's (tree-sitter
//! shares work between patterns), but an outlier here is what to rewrite.
//! On tokio (session 3) no pattern was one: a single trivial pattern alone
//! already costs ~40% of the whole query, the price of the cursor visiting
//! every node, and the differences between patterns were within the noise.

use std::time::{Duration, Instant};

use streaming_iterator::StreamingIterator;
use tree_sitter::{Parser, Query, QueryCursor, Tree};

fn main() {
    let mut args = std::env::args().skip(1);
    let lang = args.next().unwrap_or_else(|| usage());
    let (grammar, source): (tree_sitter::Language, String) = match lang.as_str() {
        "rust" => (
            tree_sitter_rust::LANGUAGE.into(),
            include_str!("../queries/rust.scm").into(),
        ),
        "python" => (
            tree_sitter_python::LANGUAGE.into(),
            include_str!("../queries/python.scm").into(),
        ),
        "typescript" => (
            tree_sitter_typescript::LANGUAGE_TYPESCRIPT.into(),
            format!(
                "{}\n{}",
                include_str!("../queries/ecmascript.scm"),
                include_str!("../queries/typescript.scm")
            ),
        ),
        "go" => (
            tree_sitter_go::LANGUAGE.into(),
            include_str!("../queries/go.scm").into(),
        ),
        _ => usage(),
    };
    // To try a rewrite without rebuilding: QUERY_COST_SCM=edited.scm.
    let source = match std::env::var_os("QUERY_COST_SCM") {
        Some(path) => std::fs::read_to_string(&path).expect("QUERY_COST_SCM is readable"),
        None => source,
    };
    let mut parser = Parser::new();
    parser.set_language(&grammar).expect("grammar loads");
    let mut files: Vec<(Vec<u8>, Tree)> = Vec::new();
    let parse_start = Instant::now();
    for path in args {
        let Ok(bytes) = std::fs::read(&path) else {
            eprintln!("skipping unreadable {path}");
            continue;
        };
        if let Some(tree) = parser.parse(&bytes, None) {
            files.push((bytes, tree));
        }
    }
    let parse_time = parse_start.elapsed();
    let bytes: usize = files.iter().map(|(b, _)| b.len()).sum();
    println!(
        "{} files, {:.1} MB, parse {:.0} ms",
        files.len(),
        bytes as f64 / 1e6,
        parse_time.as_secs_f64() * 1e3
    );

    let compile_start = Instant::now();
    let whole = Query::new(&grammar, &source).expect("query compiles");
    println!(
        "compiling the query: {:.1} ms",
        compile_start.elapsed().as_secs_f64() * 1e3
    );
    let (all_time, all_matches) = time_matching(&whole, &files);
    println!(
        "whole query: {:.1} ms, {all_matches} matches",
        all_time.as_secs_f64() * 1e3
    );

    let mut costs = Vec::new();
    for pattern in 0..whole.pattern_count() {
        let mut alone = Query::new(&grammar, &source).expect("query compiles");
        for other in 0..whole.pattern_count() {
            if other != pattern {
                alone.disable_pattern(other);
            }
        }
        let (alone_time, matches) = time_matching(&alone, &files);
        let mut without = Query::new(&grammar, &source).expect("query compiles");
        without.disable_pattern(pattern);
        let (without_time, _) = time_matching(&without, &files);
        let (start, end) = (
            whole.start_byte_for_pattern(pattern),
            whole.end_byte_for_pattern(pattern),
        );
        let compile_start = Instant::now();
        // Some patterns only compile with their neighbours (shared predicates).
        let compile = Query::new(&grammar, &source[start..end])
            .is_ok()
            .then(|| compile_start.elapsed());
        costs.push(PatternCost {
            pattern,
            first_line: source[start..]
                .lines()
                .next()
                .unwrap_or("")
                .trim()
                .to_string(),
            alone: alone_time,
            saved: all_time.saturating_sub(without_time),
            matches,
            compile,
        });
    }
    costs.sort_by_key(|c| std::cmp::Reverse(c.saved));
    println!(
        "| pattern | first line | ms alone | ms saved without it | matches | compile ms alone |"
    );
    println!("|---:|---|---:|---:|---:|---:|");
    let ms = |d: Duration| format!("{:.1}", d.as_secs_f64() * 1e3);
    for c in costs {
        println!(
            "| {} | `{}` | {} | {} | {} | {} |",
            c.pattern,
            c.first_line,
            ms(c.alone),
            ms(c.saved),
            c.matches,
            c.compile.map_or("(needs the rest)".to_string(), ms)
        );
    }
}

/// One pattern's measurements.
struct PatternCost {
    pattern: usize,
    first_line: String,
    /// Matching with only this pattern enabled.
    alone: Duration,
    /// The whole query's time minus the time without this pattern.
    saved: Duration,
    matches: usize,
    /// Compiling this pattern on its own.
    compile: Option<Duration>,
}

fn time_matching(query: &Query, files: &[(Vec<u8>, Tree)]) -> (Duration, usize) {
    let mut best = Duration::MAX;
    let mut count = 0;
    for _ in 0..5 {
        let start = Instant::now();
        count = 0;
        let mut cursor = QueryCursor::new();
        for (bytes, tree) in files {
            let mut matches = cursor.matches(query, tree.root_node(), bytes.as_slice());
            while matches.next().is_some() {
                count += 1;
            }
        }
        best = best.min(start.elapsed());
    }
    (best, count)
}

fn usage() -> ! {
    eprintln!("usage: query_cost rust|python|typescript|go FILE...");
    std::process::exit(2)
}
