//! Human and JSON rendering of answers, local or served, and the indexing
//! progress bar.
//!
//! With `--json`, stdout carries exactly one JSON document (a service's
//! answer as the service wrote it); everything for people (progress,
//! summaries, hints) goes to stderr.

use std::io::Write;
use std::time::Duration;

use canopy_client::backend::{Answer, Expanded, Indexed, StatusReport};
use canopy_client::remote::ExpandAnswer;
use canopy_core::context::ContextPack;
use canopy_core::index::IndexProgress;
use canopy_core::model::{Expansion, IndexReport, QueryResult, Status};
use canopy_core::pack::EvidencePack;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Progress bar on stderr (hidden when not wanted).
pub struct Progress {
    bar: ProgressBar,
}

impl Progress {
    pub fn new(visible: bool) -> Progress {
        let bar = if visible {
            let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr());
            bar.set_style(
                ProgressStyle::with_template(
                    "{spinner} indexing [{elapsed_precise}] {wide_bar} {pos}/{len} files ({per_sec}) {msg}",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
            bar.enable_steady_tick(Duration::from_millis(120));
            bar
        } else {
            ProgressBar::hidden()
        };
        Progress { bar }
    }
}

impl IndexProgress for Progress {
    fn start(&self, to_parse: u64) {
        self.bar.set_length(to_parse);
    }
    fn advance(&self, path: &str, _bytes: u64) {
        self.bar.inc(1);
        if !path.is_empty() && self.bar.position().is_multiple_of(32) {
            self.bar.set_message(path.to_string());
        }
    }
    fn finish(&self, _report: &IndexReport) {
        self.bar.finish_and_clear();
    }
}

/// The progress of an index run a command needs before it can answer (the
/// graph needs the whole repository): the bar on a terminal, else one line
/// on stderr when the run starts, so a script or an agent waiting on the
/// command knows why the first answer takes longer; nothing with `--quiet`.
pub struct FirstIndexProgress {
    bar: Progress,
    announce: bool,
    why: &'static str,
}

impl FirstIndexProgress {
    /// `bar`: draw the bar (a terminal); `announce`: else print the line.
    pub fn new(bar: bool, announce: bool, why: &'static str) -> FirstIndexProgress {
        FirstIndexProgress {
            bar: Progress::new(bar),
            announce: announce && !bar,
            why,
        }
    }
}

impl IndexProgress for FirstIndexProgress {
    fn start(&self, to_parse: u64) {
        if self.announce && to_parse > 0 {
            eprintln!(
                "indexing {to_parse} files first ({}); later commands reuse the index",
                self.why
            );
        }
        self.bar.start(to_parse);
    }
    fn advance(&self, path: &str, bytes: u64) {
        self.bar.advance(path, bytes);
    }
    fn finish(&self, report: &IndexReport) {
        self.bar.finish(report);
    }
}

fn print_json<T: serde::Serialize>(value: &T) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    serde_json::to_writer(&mut out, value)?;
    writeln!(out)?;
    Ok(())
}

/// An index run: a local run's report, or the service's repository after its run.
pub fn indexed(indexed: &Indexed, json: bool, quiet: bool) -> anyhow::Result<()> {
    match indexed {
        Indexed::Local { report, db_path } => index_report(report, db_path, json, quiet),
        Indexed::Served(view) if json => print_json(view),
        Indexed::Served(view) => {
            println!(
                "service repo {} ({}): generation {}, status {}",
                view.name, view.repo_id, view.generation, view.status
            );
            Ok(())
        }
    }
}

fn index_report(
    report: &IndexReport,
    db_path: &std::path::Path,
    json: bool,
    quiet: bool,
) -> anyhow::Result<()> {
    if let Some(note) = &report.rebuilt {
        eprintln!("note: {note}");
    }
    if json {
        return print_json(report);
    }
    if quiet {
        return Ok(());
    }
    let secs = report.duration_ms as f64 / 1000.0;
    let rate = if secs > 0.0 {
        report.files_indexed as f64 / secs
    } else {
        0.0
    };
    let skipped: u64 = report.skipped.values().sum();
    println!(
        "indexed {} files ({:.1} MB, {} units, {} refs) in {:.2}s ({:.0} files/s); {} unchanged, {} removed, {} skipped",
        report.files_indexed,
        report.bytes_parsed as f64 / 1e6,
        report.units_written,
        report.refs_written,
        secs,
        rate,
        report.files_unchanged,
        report.files_removed,
        skipped
    );
    if skipped > 0 {
        let reasons: Vec<String> = report
            .skipped
            .iter()
            .map(|(k, v)| format!("{k}: {v}"))
            .collect();
        println!("skipped: {}", reasons.join(", "));
    }
    println!("index: {}", db_path.display());
    Ok(())
}

/// Index statistics, of the local index or of the service's repository.
pub fn status(report: &StatusReport, json: bool) -> anyhow::Result<()> {
    match report {
        StatusReport::Local(status) => local_status(status, json),
        StatusReport::Served(_) if json => print_json(report),
        StatusReport::Served(served) => {
            // People read the same lines as for a local index, after what
            // the service adds (issue 32, U6: this was raw JSON).
            println!(
                "service:        {} {} (up {} s)",
                served.service, served.version, served.uptime_seconds
            );
            for view in &served.repos {
                let repo = &view.repo;
                println!("repo:           {} ({})", repo.name, repo.repo_id);
                println!(
                    "state:          {}{}, generation {}",
                    repo.status,
                    if repo.indexing { ", indexing" } else { "" },
                    repo.generation
                );
                if let Some(sha) = &repo.commit_sha {
                    println!("commit:         {sha}");
                }
                println!("watch:          {}", if repo.watch { "on" } else { "off" });
                if let Some(error) = &repo.last_error {
                    println!("last_error:     {}", error.message);
                }
                match &view.index {
                    Some(index) => local_status(index, false)?,
                    None => println!("indexed:        no"),
                }
            }
            Ok(())
        }
    }
}

fn local_status(status: &Status, json: bool) -> anyhow::Result<()> {
    if json {
        return print_json(status);
    }
    if !status.indexed {
        println!("repo_root:      {}", status.repo_root);
        println!("indexed:        no");
        eprintln!(
            "hint: run `canopy index {}` to build the index (or just query: the first query indexes what it needs)",
            status.repo_root
        );
        return Ok(());
    }
    println!("repo_root:      {}", status.repo_root);
    if let Some(damage) = &status.damaged {
        println!("damaged:        {damage}");
        eprintln!(
            "hint: the next `canopy index` rebuilds it (or run `canopy index --rebuild` now)"
        );
    }
    println!("files_indexed:  {}", status.files_indexed);
    println!("units:          {}", status.units);
    println!("references:     {}", status.references);
    println!("total_tokens:   {}", status.total_tokens);
    println!("source_bytes:   {}", status.source_bytes);
    println!("index_size:     {} bytes", status.index_size_bytes);
    println!(
        "last_indexed:   {}",
        status.last_indexed.as_deref().unwrap_or("never")
    );
    println!("schema_version: {}", status.schema_version);
    println!(
        "file_discovery: {}",
        status.file_discovery.as_deref().unwrap_or("-")
    );
    println!("index_coverage: {:.0}%", status.index_coverage * 100.0);
    let langs: Vec<String> = status
        .languages
        .iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    println!(
        "languages:      {}",
        if langs.is_empty() {
            "-".into()
        } else {
            langs.join(", ")
        }
    );
    let skipped: Vec<String> = status
        .skipped
        .iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    println!(
        "skipped:        {}",
        if skipped.is_empty() {
            "-".into()
        } else {
            skipped.join(", ")
        }
    );
    Ok(())
}

/// The exact text of handles.
pub fn expansions(expanded: &Expanded, json: bool) -> anyhow::Result<()> {
    if json {
        return print_json(expanded);
    }
    match expanded {
        Expanded::Local(items) => local_expansions(items),
        Expanded::Served(answer) => served_expansions(answer),
    }
}

/// The exact bytes, with `// id path:lines` headers between several.
fn local_expansions(items: &[Expansion]) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    for (i, e) in items.iter().enumerate() {
        if items.len() > 1 {
            if i > 0 {
                writeln!(out)?;
            }
            writeln!(
                out,
                "// {} {}:{}-{}",
                e.handle_id, e.file_path, e.line_range[0], e.line_range[1]
            )?;
        }
        // The exact bytes of the span.
        out.write_all(&e.bytes)?;
        if items.len() > 1 && !e.bytes.ends_with(b"\n") {
            writeln!(out)?;
        }
    }
    Ok(())
}

/// The handles of a service's expansion, with `// id` headers between several.
fn served_expansions(answer: &ExpandAnswer) -> anyhow::Result<()> {
    let contents = &answer.contents;
    for (i, c) in contents.iter().enumerate() {
        if contents.len() > 1 {
            if i > 0 {
                println!();
            }
            println!("// {}", c.handle_id);
        }
        print!("{}", c.content);
        if contents.len() > 1 && !c.content.ends_with('\n') {
            println!();
        }
    }
    Ok(())
}

pub fn query_result(answer: &Answer<QueryResult>, json: bool) -> anyhow::Result<()> {
    if json {
        return print_json(answer);
    }
    let result = answer.get();
    let mut out = std::io::stdout().lock();
    for h in &result.handles {
        writeln!(
            out,
            "{} {}:{}-{} {} {}t  {}",
            h.id,
            h.file_path,
            h.line_range[0],
            h.line_range[1],
            h.node_type,
            h.token_count,
            h.preview
        )?;
        if let Some(content) = &h.content {
            writeln!(out, "{content}")?;
        }
    }
    if let Some(refs) = &result.ref_handles {
        for r in refs {
            let name = match &r.qualifier {
                Some(q) => format!("{q}.{}", r.name),
                None => r.name.clone(),
            };
            writeln!(
                out,
                "{}:{} {} {} (in {})  {}",
                r.file_path, r.line_range[0], r.ref_type, name, r.source_handle, r.preview
            )?;
        }
    }
    let shown = result
        .ref_handles
        .as_ref()
        .map_or(result.handles.len(), Vec::len);
    eprintln!(
        "{} of {} matches, {} tokens{}",
        shown,
        result.total_matches,
        result.total_tokens,
        if result.truncated {
            " (truncated: narrow the query or raise --limit)"
        } else {
            ""
        }
    );
    if let Some(note) = &result.expand_note {
        eprintln!("{note}");
    }
    if let Some(note) = &result.match_note {
        eprintln!("{note}");
    }
    Ok(())
}

/// A context pack: with `--json` every field (for scripts); else its wire
/// form (`canopy_core::context::wire`), the JSON header line and each
/// fragment's text under a provenance line, which `budget_tokens` bounds.
pub fn context(answer: &Answer<ContextPack>, json: bool) -> anyhow::Result<()> {
    if json {
        return print_json(answer);
    }
    let mut out = std::io::stdout().lock();
    out.write_all(canopy_core::context::wire::text(answer.get()).as_bytes())?;
    Ok(())
}

pub fn pack(answer: &Answer<EvidencePack>, json: bool) -> anyhow::Result<()> {
    if json {
        return print_json(answer);
    }
    let pack = answer.get();
    let mut out = std::io::stdout().lock();
    for file in &pack.files {
        writeln!(out, "{}", file.file_path)?;
        for h in pack
            .handles
            .iter()
            .filter(|h| h.file_path == file.file_path)
        {
            writeln!(
                out,
                "  {} {}-{} {} {} {}t score {:.2}{}\n      {}",
                h.id,
                h.line_range[0],
                h.line_range[1],
                h.node_type,
                h.qualified_name.as_deref().unwrap_or("-"),
                h.token_count,
                h.score,
                // Changed or deleted on disk since indexed (issue N4).
                if h.stale { " · stale" } else { "" },
                h.preview
            )?;
        }
    }
    if let Some(steps) = &pack.plan_steps {
        for step in steps {
            writeln!(out, "plan: {step}")?;
        }
    }
    let g = &pack.guidance;
    writeln!(
        out,
        "guidance: {} (confidence {:.2} {}, stop_querying={}, expand {}): {}",
        g.recommended_action,
        g.confidence,
        g.confidence_band,
        g.stop_querying,
        g.suggested_expand_count,
        g.next_step
    )?;
    let ids: Vec<&str> = pack.expand_suggestion.iter().map(|h| h.as_str()).collect();
    writeln!(out, "expand: canopy expand {}", ids.join(" "))?;
    Ok(())
}

/// One line per watch cycle: JSON on stdout with `--json`, else a summary
/// on stderr.
pub fn watch_cycle(cycle: &canopy_core::watch::WatchCycle, json: bool, quiet: bool) {
    if json {
        if let Ok(line) = serde_json::to_string(cycle) {
            println!("{line}");
        }
        return;
    }
    if quiet {
        return;
    }
    let r = &cycle.report;
    let what = match cycle.full_run {
        Some(why) => format!("full run ({why})"),
        None => format!("{} changed path(s)", cycle.paths),
    };
    eprintln!(
        "#{} {what}: {} indexed, {} removed, {} unchanged; searchable {} ms after the first change",
        cycle.cycle, r.files_indexed, r.files_removed, r.files_unchanged, cycle.latency_ms
    );
}
