//! The indexing pipeline: discover → read and parse in parallel → one writer.
//!
//! Parsing runs on rayon's pool (all cores); parsed files flow through a
//! bounded channel to the calling thread, the only writer, which commits
//! them in batches of whole files. Unchanged files (same size and mtime, or
//! same content hash) are not parsed again; files no longer listed are
//! removed.

use std::collections::{BTreeMap, HashSet};
use std::io::Read;
use std::path::Path;
use std::sync::mpsc::sync_channel;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use rayon::prelude::*;
use xxhash_rust::xxh3::xxh3_64;

use crate::discover::{Candidate, PathFilter, SkipReason, discover_with};
use crate::error::Result;
use crate::lang::{Language, parse_file};
use crate::model::IndexReport;
use crate::store::read::StoredFile;
use crate::store::write::{FileWrite, ParsedWrite};
use crate::store::{Store, meta_keys};
use crate::tokens;

/// Bytes sniffed for NUL to detect binary files.
const BINARY_SNIFF_BYTES: usize = 8192;
/// A batch is committed when it holds this many files …
const BATCH_FILES: usize = 256;
/// … or this many bytes of source.
const BATCH_BYTES: u64 = 4 * 1024 * 1024;

/// What to index.
#[derive(Clone, Debug)]
pub struct IndexOptions {
    /// Only files matching this glob (others are left as they are).
    pub glob: Option<String>,
    /// Files larger than this are skipped.
    pub max_file_size: u64,
    /// Only these repo-relative paths (predictive lazy indexing); others are left as they are.
    pub only_paths: Option<HashSet<String>>,
}

impl IndexOptions {
    /// Whether this run covers the whole repository.
    pub fn is_full(&self) -> bool {
        self.glob.is_none() && self.only_paths.is_none()
    }
}

/// Receives progress from an index run (called on the writer thread).
pub trait IndexProgress {
    /// Discovery finished: `to_parse` files will be read and parsed.
    fn start(&self, _to_parse: u64) {}
    /// One file was processed.
    fn advance(&self, _path: &str, _bytes: u64) {}
    /// The run finished.
    fn finish(&self, _report: &IndexReport) {}
}

/// Progress sink that ignores everything.
pub struct NoProgress;
impl IndexProgress for NoProgress {}

enum Outcome {
    Write(FileWrite, u64),
    Skip(SkipReason, FileWrite),
}

fn now_unix() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// Reads, sniffs, hashes and (if changed) parses one file.
fn process(candidate: &Candidate, old_hash: Option<&str>, max_file_size: u64) -> Outcome {
    let skip = |reason: SkipReason| {
        Outcome::Skip(
            reason,
            FileWrite::Skipped {
                path: candidate.path.clone(),
                size: candidate.size,
                mtime_ns: candidate.mtime_ns,
                reason: reason.as_str(),
            },
        )
    };
    let mut bytes = Vec::with_capacity(candidate.size as usize + 1);
    let read = std::fs::File::open(&candidate.abs_path)
        .and_then(|f| f.take(max_file_size + 1).read_to_end(&mut bytes));
    if read.is_err() {
        return skip(SkipReason::Unreadable);
    }
    if bytes.len() as u64 > max_file_size {
        return skip(SkipReason::TooLarge);
    }
    if bytes[..bytes.len().min(BINARY_SNIFF_BYTES)].contains(&0) {
        return skip(SkipReason::Binary);
    }
    let content_hash = format!("{:016x}", xxh3_64(&bytes));
    let size = bytes.len() as u64;
    if old_hash == Some(content_hash.as_str()) {
        return Outcome::Write(
            FileWrite::Touch {
                path: candidate.path.clone(),
                size,
                mtime_ns: candidate.mtime_ns,
            },
            0,
        );
    }
    // The first file that needs parsing starts compiling the tokenizer's
    // regex (unless a fresh index already did), while tree-sitter parses it.
    tokens::warm_up_in_background();
    let mut parsed = parse_file(&candidate.path, &bytes);
    let facts = parsed.facts.take().map(|f| {
        let encoded = f.encode();
        crate::store::graph_rows::StoredFacts::pack(&encoded.world, &encoded.sites)
    });
    let line_count = bytes.iter().filter(|&&b| b == b'\n').count() as u32
        + u32::from(!bytes.is_empty() && !bytes.ends_with(b"\n"));
    Outcome::Write(
        FileWrite::Parsed(Box::new(ParsedWrite {
            path: candidate.path.clone(),
            size,
            mtime_ns: candidate.mtime_ns,
            content_hash,
            line_count,
            parsed,
            facts,
        })),
        size,
    )
}

/// Whether an indexed file is as it was: same size and modification time,
/// and not invalidated since (no content hash).
fn is_unchanged(stored: &StoredFile, candidate: &Candidate) -> bool {
    stored.size == candidate.size
        && stored.mtime_ns == candidate.mtime_ns
        && !stored.content_hash.is_empty()
}

/// Runs one index pass over the repository at `root` into `store`.
pub(crate) fn run_index(
    root: &Path,
    store: &mut Store,
    options: &IndexOptions,
    progress: &dyn IndexProgress,
) -> Result<IndexReport> {
    let started = Instant::now();
    let filter = options.glob.as_deref().map(PathFilter::new).transpose()?;
    let stored = store.file_states()?;
    let known_skips = store.skipped_files()?;
    if stored.is_empty() && known_skips.is_empty() {
        // A fresh index parses every file it lists: the tokenizer's regex
        // compiles while discovery runs (see also `process`).
        tokens::warm_up_in_background();
    }
    // A run that starts from an empty index and only adds files cannot
    // leave a reference name unused, so it skips that cleanup (an index
    // probe per name) at the end. Names a killed earlier run may have left
    // behind go now, while there are no references and it costs nothing.
    let started_empty = stored.is_empty();
    if started_empty {
        store.drop_unused_ref_names()?;
    }
    // A build that was killed or failed may have left the indexes it
    // defers missing.
    store.ensure_indexes()?;
    // The first changed file of each language starts compiling that
    // language's query while the rest of the tree is listed (see
    // `Language::warm_up_in_background`).
    let mut discovery = discover_with(root, options.max_file_size, filter.as_ref(), &|c| {
        let unchanged = stored.get(&c.path).is_some_and(|s| is_unchanged(s, c))
            || known_skips
                .get(&c.path)
                .is_some_and(|(size, mtime, _)| *size == c.size && *mtime == c.mtime_ns);
        if !unchanged {
            Language::from_path(&c.path).warm_up_in_background();
        }
    })?;
    let candidates_in_repo = discovery.files.len();
    // Known from the start, so coverage is right while a first run is still
    // writing (queries and status read it then); a glob's run counts what
    // its filter left out too.
    let listed_in_repo = candidates_in_repo as u64 + discovery.filtered_out;
    if filter.is_none() || store.meta(meta_keys::CANDIDATE_FILES)?.is_none() {
        store.set_meta(meta_keys::CANDIDATE_FILES, &listed_in_repo.to_string())?;
    }
    if let Some(only) = &options.only_paths {
        discovery.files.retain(|c| only.contains(&c.path));
    }
    let was_complete = store.meta(meta_keys::INDEX_COMPLETE)?.as_deref() == Some("1");
    // A glob that keeps every listed and every indexed path (e.g. `**/*`)
    // makes a run as complete as one without a glob: it records the same
    // repository-wide facts (candidates, skip counts, completeness).
    let covers_repository = options.is_full()
        || (options.only_paths.is_none()
            && discovery.filtered_out == 0
            && filter.as_ref().is_some_and(|f| {
                stored
                    .keys()
                    .chain(known_skips.keys())
                    .all(|p| f.is_match(p))
            }));
    let mut skipped: BTreeMap<SkipReason, u64> = discovery.skipped.clone();

    // Files gone from the listing (deleted, ignored, now too large, …) leave the index.
    let listed: HashSet<&str> = discovery.files.iter().map(|c| c.path.as_str()).collect();
    let removals: Vec<FileWrite> = stored
        .keys()
        .chain(known_skips.keys())
        .filter(|p| filter.as_ref().is_none_or(|f| f.is_match(p)))
        .filter(|p| {
            options
                .only_paths
                .as_ref()
                .is_none_or(|only| only.contains(p.as_str()))
        })
        .filter(|p| !listed.contains(p.as_str()))
        .map(|p| FileWrite::Remove { path: p.clone() })
        .collect();
    let mut report = IndexReport {
        files_discovered: discovery.files.len() as u64,
        file_discovery: discovery.method.as_str().to_string(),
        ..IndexReport::default()
    };
    // Files whose earlier rows this run deleted (see `BatchStats::rows_replaced`).
    let mut rows_replaced = 0u64;
    if !removals.is_empty() {
        for removal in &removals {
            if let FileWrite::Remove { path } = removal {
                report.note_changed(path);
            }
        }
        let stats = store.write_batch(&removals, now_unix())?;
        report.files_removed += stats.removed;
        rows_replaced += stats.rows_replaced;
    }

    let mut work: Vec<(&Candidate, Option<&str>)> = Vec::new();
    for candidate in &discovery.files {
        if let Some((size, mtime, reason)) = known_skips.get(&candidate.path)
            && *size == candidate.size
            && *mtime == candidate.mtime_ns
        {
            // Skipped before and unchanged since: not read again.
            let reason = [
                SkipReason::Binary,
                SkipReason::TooLarge,
                SkipReason::Unreadable,
                SkipReason::Secret,
            ]
            .into_iter()
            .find(|r| r.as_str() == reason)
            .unwrap_or(SkipReason::Unreadable);
            *skipped.entry(reason).or_insert(0) += 1;
            continue;
        }
        match stored.get(&candidate.path) {
            Some(s) if is_unchanged(s, candidate) => {
                report.files_unchanged += 1;
            }
            Some(s) => work.push((candidate, Some(s.content_hash.as_str()))),
            None => work.push((candidate, None)),
        }
    }
    progress.start(work.len() as u64);
    if !work.is_empty() && options.is_full() {
        // Until this run finishes, the index is known to be partial.
        store.set_meta(meta_keys::INDEX_COMPLETE, "0")?;
    }
    // A first build creates its secondary indexes once, at the end, from
    // the finished tables.
    let bulk_build = started_empty && !work.is_empty();
    if bulk_build {
        store.defer_indexes()?;
    }

    let max_file_size = options.max_file_size;
    let (sender, receiver) = sync_channel::<Outcome>(BATCH_FILES);
    let mut cancelled = false;
    let write_result: Result<()> = std::thread::scope(|scope| {
        let work = &work;
        scope.spawn(move || {
            // A send error means the writer stopped (it failed or the run
            // was cancelled): the error ends the parallel loop early.
            let _ = work
                .par_iter()
                .try_for_each_with(sender, |sender, (candidate, old)| {
                    sender.send(process(candidate, *old, max_file_size))
                });
        });
        let mut batch: Vec<FileWrite> = Vec::new();
        let mut batch_bytes = 0u64;
        let mut flush = |batch: &mut Vec<FileWrite>, report: &mut IndexReport| -> Result<()> {
            if batch.is_empty() {
                return Ok(());
            }
            let stats = store.write_batch(batch, now_unix())?;
            report.units_written += stats.units;
            report.refs_written += stats.refs;
            report.files_removed += stats.removed;
            rows_replaced += stats.rows_replaced;
            batch.clear();
            Ok(())
        };
        for outcome in receiver {
            if crate::cancel::requested() {
                // What is in `batch` is complete per file: keep it, stop
                // reading (dropping the receiver stops the parsers).
                cancelled = true;
                break;
            }
            match outcome {
                Outcome::Write(write, bytes) => {
                    let path = match &write {
                        FileWrite::Parsed(w) => {
                            report.files_indexed += 1;
                            report.bytes_parsed += bytes;
                            report.note_changed(&w.path);
                            w.path.clone()
                        }
                        FileWrite::Touch { path, .. } => {
                            report.files_unchanged += 1;
                            path.clone()
                        }
                        FileWrite::Remove { path } => {
                            report.note_changed(path);
                            path.clone()
                        }
                        FileWrite::Skipped { path, .. } => path.clone(),
                    };
                    progress.advance(&path, bytes);
                    batch_bytes += bytes;
                    batch.push(write);
                }
                Outcome::Skip(reason, write) => {
                    *skipped.entry(reason).or_insert(0) += 1;
                    progress.advance("", 0);
                    batch.push(write);
                }
            }
            if batch.len() >= BATCH_FILES || batch_bytes >= BATCH_BYTES {
                flush(&mut batch, &mut report)?;
                batch_bytes = 0;
            }
        }
        flush(&mut batch, &mut report)
    });
    write_result?;
    if cancelled {
        // Like a killed run, minus the kill: the batches written stay (the
        // index is consistent per file), the index says it is partial, and
        // readers learn it changed. Resolution of the written files is
        // pending and runs with the next run.
        if bulk_build {
            store.ensure_indexes()?;
        }
        if report.files_indexed + report.files_removed > 0 {
            let generation = store.generation()? + 1;
            store.set_meta(meta_keys::GENERATION, &generation.to_string())?;
        }
        if options.is_full() {
            store.set_meta(meta_keys::INDEX_COMPLETE, "0")?;
        }
        return Err(crate::CanopyError::Cancelled);
    }

    let skipped: BTreeMap<String, u64> = skipped
        .into_iter()
        .map(|(k, v)| (k.as_str().to_string(), v))
        .collect();
    store.set_meta(meta_keys::LAST_INDEXED, &now_unix().to_string())?;
    store.set_meta(meta_keys::FILE_DISCOVERY, discovery.method.as_str())?;
    if filter.is_none() || covers_repository {
        store.set_meta(meta_keys::CANDIDATE_FILES, &candidates_in_repo.to_string())?;
    }
    if covers_repository {
        store.set_meta(
            meta_keys::SKIPPED,
            &serde_json::to_string(&skipped).unwrap_or_else(|_| "{}".into()),
        )?;
        store.set_meta(meta_keys::INDEX_COMPLETE, "1")?;
    } else {
        // A partial run keeps a complete index complete and a partial one partial.
        store.set_meta(
            meta_keys::INDEX_COMPLETE,
            if was_complete { "1" } else { "0" },
        )?;
    }
    // Resolution: only when something changed (or a killed run left work).
    let resolve_started = Instant::now();
    let resolved = crate::graph::resolve_pending(store, root)?;
    report.graph_files_resolved = resolved.files;
    report.graph_resolve_ms = resolve_started.elapsed().as_millis() as u64;
    if bulk_build {
        store.ensure_indexes()?;
    }
    if report.files_indexed + report.files_removed > 0 {
        let generation = store.generation()? + 1;
        store.set_meta(meta_keys::GENERATION, &generation.to_string())?;
        if rows_replaced > 0 || !started_empty {
            store.drop_unused_ref_names()?;
        }
        store.release_free_pages()?;
    }
    if report.files_indexed > 1000 {
        store.checkpoint()?;
    }
    report.skipped = skipped;
    report.duration_ms = started.elapsed().as_millis() as u64;
    progress.finish(&report);
    Ok(report)
}
