//! The indexing pipeline: discover → read and parse in parallel → one writer.
//!
//! Parsing runs on rayon's pool (all cores); parsed files flow through a
//! bounded channel to the calling thread, the only writer, which commits
//! them in batches of whole files. Unchanged files (same size and mtime, or
//! same content hash) are not parsed again; files no longer listed are
//! removed.
//!
//! Each batch is one transaction that moves the generation
//! (`store::advance_generation`): a large run (a `git checkout` of a
//! thousand files) becomes visible batch by batch, each state under a
//! generation of its own, and readers never wait for the run.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::Read;
use std::path::Path;
use std::sync::mpsc::sync_channel;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use xxhash_rust::xxh3::xxh3_64;

use crate::discover::{Candidate, PathFilter, SkipReason, discover_named, discover_with};
use crate::error::Result;
use crate::lang::Language;
use crate::model::IndexReport;
use crate::store::read::StoredFile;
use crate::store::write::{FileWrite, ParsedWrite};
use crate::store::{Store, meta_keys};
use crate::tokens;

/// Leaf pages of text merging a run does at most after its writes, per
/// file it indexed or removed (`Store::merge_text_segments`, in steps of
/// at most 256 pages). A one-file run writes a segment of a few pages, and
/// merging such segments level by level costs a few times that; what a
/// run leaves is done by the next runs, or by an idle watcher, and FTS5's
/// crisis merge bounds the segments meanwhile. The bound matters where the
/// runs reach the large segments a first index left: a build that merges
/// by eights leaves them on levels 0 and 1, and the deletes of one-line
/// edits push the runs' small segments up to level 1 within a few runs
/// (FTS5's `deletemerge`), so after a cold index of Django its first eleven
/// one-file runs each merged two steps of 256 pages (~5,400 pages in all:
/// the rewrite the build no longer does), ~30 ms of CPU each. A merge's
/// cost is about proportional to its pages, so a small bound spreads that
/// rewrite thin over the runs after a build instead of charging it to the
/// first few (issue 28 item 5; `bench/README.md`, "Twenty-third session":
/// 64 pages a file cost a one-line edit ~4 ms each). Before, a small run
/// did two steps of 256 pages (sixteenth session: no run paid for a merge
/// of large segments at once; four steps put the p95 over the bar). FTS5
/// ends a step at a term boundary, so a step through a common term's long
/// list of rows writes that list whole.
const MERGE_PAGES_PER_FILE: u64 = 16;

/// The leaf pages of text merging a run that indexed or removed `files`
/// files may do.
fn merge_pages(files: u64) -> u64 {
    files.max(1).saturating_mul(MERGE_PAGES_PER_FILE)
}

/// Bytes sniffed for NUL to detect binary files.
const BINARY_SNIFF_BYTES: usize = 8192;
/// A batch is committed when it holds this many files …
const BATCH_FILES: usize = 256;
/// … or this many bytes of source.
const BATCH_BYTES: u64 = 4 * 1024 * 1024;
/// Bytes of source being read and parsed or waiting for the writer, at
/// most (a larger file goes alone): with `--max-file-size` raised, a
/// channel of parsed files could otherwise hold gigabytes. 16 MiB, not 64:
/// what waits is parsed output, several times its source, and on a cold
/// index of sympy the larger budget and queue held ~10 MiB more at the
/// peak of the write phase without writing faster (issue 28 item 4).
const IN_FLIGHT_BYTES: u64 = 16 * 1024 * 1024;
/// Parsed files waiting for the writer, at most: a batch's worth. The
/// writer does a batch's SQL work all at once as it commits it (tens of
/// milliseconds, the files of a batch are small on average), and takes
/// nothing from the queue meanwhile; with room for 32 files the parsers
/// filled it in a few milliseconds and waited: on a cold index of Django
/// half the writer's CPU ran with both parsers idle (issue 28 item 2,
/// `bench/thread_account.py`). [`IN_FLIGHT_BYTES`] still bounds what
/// waits by its size.
const PARSED_QUEUE: usize = BATCH_FILES;

// A file above the default size limit, admitted by a raised
// `max_file_size`, is cut into units of at most this many bytes (`oversize`).
pub use crate::oversize::MAX_UNIT_BYTES;

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

/// Threads an index run parses and resolves on, when set (0: one per core).
static INDEX_THREADS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Sets how many threads this process's index runs read and parse files on
/// and resolve the graph on (`canopy index --threads`; by default one per
/// core). Set it before the first run: the resolution pool is started once.
pub fn set_index_threads(threads: usize) {
    INDEX_THREADS.store(threads, std::sync::atomic::Ordering::Relaxed);
}

/// The threads an index run parses and resolves on.
fn index_threads() -> usize {
    match INDEX_THREADS.load(std::sync::atomic::Ordering::Relaxed) {
        0 => std::thread::available_parallelism().map_or(2, |n| n.get()),
        n => n,
    }
}

/// The rayon pool an index run's parallel work (graph resolution) runs on,
/// its own, not the global one that readers share (listing files,
/// embedding): a resolution pass keeps every worker busy for seconds on a
/// large repository, and readers never wait for a writer, not even for
/// threads. As many threads as [`set_index_threads`] says. `None` when it
/// cannot be started (then rayon's global pool does the work). (Parsing
/// has threads of its own, see [`parse_and_write`].)
fn index_pool() -> Option<&'static rayon::ThreadPool> {
    static POOL: std::sync::OnceLock<Option<rayon::ThreadPool>> = std::sync::OnceLock::new();
    POOL.get_or_init(|| {
        rayon::ThreadPoolBuilder::new()
            // 0: rayon's default (one per core, or RAYON_NUM_THREADS).
            .num_threads(INDEX_THREADS.load(std::sync::atomic::Ordering::Relaxed))
            .thread_name(|i| format!("canopy-index-{i}"))
            .build()
            .map_err(|e| tracing::warn!("cannot start the index threads ({e}); sharing rayon's"))
            .ok()
    })
    .as_ref()
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
/// `build_flags`: the bare `cfg` names the build script of the file's
/// Cargo package turns on ([`BuildFlags::of`]).
fn process(
    candidate: &Candidate,
    old_hash: Option<&str>,
    max_file_size: u64,
    build_flags: &[String],
) -> Outcome {
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
    let (parsed, facts) = if size > crate::oversize::PARSE_MAX_BYTES {
        // Bounded work and memory whatever the size limit (issue N6).
        (
            crate::oversize::parse_windows(&candidate.path, &bytes),
            None,
        )
    } else {
        crate::graph::facts::parse_with_facts_in(&candidate.path, &bytes, build_flags)
    };
    let facts = facts.map(|f| {
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

/// What a run found to do, before it writes anything: the discovery, the
/// files to (re)read, the removals, and the repository-wide facts it will
/// record when it finishes.
struct RunPlan {
    discovery: crate::discover::Discovery,
    /// The bare `cfg` names each Cargo package's build script turns on.
    build_flags: BuildFlags,
    /// Indexes of `discovery.files` to read, each with its stored content
    /// hash when the file was indexed before.
    work: Vec<(usize, Option<String>)>,
    removals: Vec<FileWrite>,
    skipped: BTreeMap<SkipReason, u64>,
    files_unchanged: u64,
    candidates_in_repo: usize,
    filtered: bool,
    was_complete: bool,
    /// The run records repository-wide facts (candidates, skip counts,
    /// completeness): no filter, or a glob that keeps every path.
    covers_repository: bool,
    started_empty: bool,
}

/// Totals the writer keeps while batches commit.
#[derive(Default)]
struct WriteTotals {
    report: IndexReport,
    /// Files whose earlier rows this run deleted (see `BatchStats::rows_replaced`).
    rows_replaced: u64,
    skipped: BTreeMap<SkipReason, u64>,
}

/// Runs one index pass over the repository at `root` into `store`:
/// plan (discover, compare with the index), remove what is gone, parse and
/// write in batches, record what the run covered, resolve the graph, finish.
/// `kept`: the resolver world's rows a long-lived process keeps between
/// runs ([`crate::graph::resolve::KeptRows`]); `None` reads them all.
pub(crate) fn run_index(
    root: &Path,
    store: &mut Store,
    options: &IndexOptions,
    progress: &dyn IndexProgress,
    kept: Option<&mut crate::graph::resolve::KeptRows>,
) -> Result<IndexReport> {
    // What a run reads stays out of the process's resident memory (see
    // `Store::map_for_reading`); readers of this connection map it again after.
    store.map_for_reading(false)?;
    let report = run_index_unmapped(root, store, options, progress, kept);
    let mapped = store.map_for_reading(true);
    let report = report?;
    mapped?;
    Ok(report)
}

/// [`run_index`] on a connection that does not map the index.
fn run_index_unmapped(
    root: &Path,
    store: &mut Store,
    options: &IndexOptions,
    progress: &dyn IndexProgress,
    kept: Option<&mut crate::graph::resolve::KeptRows>,
) -> Result<IndexReport> {
    let started = Instant::now();
    let plan = plan_run(root, store, options)?;
    let planned_ms = started.elapsed().as_millis() as u64;
    let mut totals = WriteTotals {
        report: IndexReport {
            files_discovered: plan.discovery.files.len() as u64,
            file_discovery: plan.discovery.method.as_str().to_string(),
            files_unchanged: plan.files_unchanged,
            ..IndexReport::default()
        },
        rows_replaced: 0,
        skipped: plan.skipped.clone(),
    };
    let writes_text = !plan.removals.is_empty() || !plan.work.is_empty();
    // A first build creates its secondary indexes once, at the end, from
    // the finished tables; and merges its text segments as it writes.
    let bulk_build = plan.started_empty && !plan.work.is_empty();
    if bulk_build {
        store.merge_text_during_build()?;
    } else if writes_text {
        store.defer_text_merges()?;
    }
    if !plan.removals.is_empty() {
        for removal in &plan.removals {
            if let FileWrite::Remove { path } = removal {
                totals.report.note_changed(path);
            }
        }
        let stats = store.write_batch(&plan.removals, now_unix())?;
        totals.report.files_removed += stats.removed;
        totals.rows_replaced += stats.rows_replaced;
    }
    progress.start(plan.work.len() as u64);
    if options.is_full() && plan.work.iter().any(|(_, old)| old.is_none()) {
        // Until this run finishes, the files it adds are missing: the index
        // is partial. A run that only re-reads files it holds leaves it
        // complete (files changed on disk since are stale, which answers
        // say per file), so queries and graph calls need not wait for it.
        store.set_meta(meta_keys::INDEX_COMPLETE, "0")?;
    }
    if bulk_build {
        store.defer_indexes()?;
    }
    let cancelled = read_work(store, &plan, options, progress, &mut totals)?;
    if cancelled {
        return finish_cancelled(store, options, bulk_build);
    }
    tracing::debug!(ms = started.elapsed().as_millis() as u64, "files written");
    record_coverage(store, &plan, &totals.skipped)?;
    if bulk_build {
        // Later runs defer their merging (what is left of the build's
        // merging runs at the end, as theirs does).
        store.defer_text_merges()?;
        // Before resolution, which looks names up in `ref_names` (the
        // users of each new definition, `graph_prepare`): without its index
        // each lookup is a scan of the table (tokio: ~40% of a cold index's
        // CPU). Resolution writes none of the indexed tables, so the
        // indexes are built from the same finished rows either way.
        store.ensure_indexes()?;
    }
    // The run's files are visible from here (each batch committed).
    let written_ms = started.elapsed().as_millis() as u64;
    // Resolution: only when something changed (or a killed run left work).
    let resolve_started = Instant::now();
    let resolved = resolve_run(store, root, kept, totals.report.bytes_parsed)?;
    let mut report = totals.report;
    report.graph_files_resolved = resolved.files;
    report.graph_resolve_ms = resolve_started.elapsed().as_millis() as u64;
    // The generation moved with each batch and edge chunk that changed
    // anything (in their own transactions); nothing to bump here.
    let mut merge_ms = 0;
    if writes_text {
        // After the run's answers are visible: the merging its batches
        // deferred (see `Store::defer_text_merges`).
        let merge_started = Instant::now();
        let steps =
            store.merge_text_segments(merge_pages(report.files_indexed + report.files_removed))?;
        merge_ms = merge_started.elapsed().as_millis() as u64;
        tracing::debug!(steps, ms = merge_ms, "text index merged");
    }
    if report.files_indexed + report.files_removed > 0 {
        if totals.rows_replaced > 0 || !plan.started_empty {
            store.drop_unused_ref_names()?;
        }
        store.release_free_pages()?;
    }
    if report.files_indexed > 1000 {
        store.checkpoint()?;
    }
    report.skipped = skip_counts(&totals.skipped);
    report.duration_ms = started.elapsed().as_millis() as u64;
    // Where a run's time goes, as milliseconds since it started (issue 32:
    // edit -> searchable is the debounce plus `written_ms`).
    tracing::debug!(
        planned_ms,
        written_ms,
        resolved_ms = written_ms + report.graph_resolve_ms,
        merge_ms,
        finished_ms = report.duration_ms,
        files = report.files_indexed,
        "index run timeline"
    );
    progress.finish(&report);
    Ok(report)
}

/// Reads, parses and writes the run's work ([`parse_and_write`]), each Rust
/// file with its package's build flags, then records the flags the
/// indexed files were read with. Returns whether the run was cancelled.
fn read_work(
    store: &mut Store,
    plan: &RunPlan,
    options: &IndexOptions,
    progress: &dyn IndexProgress,
    totals: &mut WriteTotals,
) -> Result<bool> {
    let work: Vec<(&Candidate, Option<&str>, &[String])> = plan
        .work
        .iter()
        .map(|(i, hash)| {
            let candidate = &plan.discovery.files[*i];
            let flags = plan.build_flags.of(&candidate.path);
            (candidate, hash.as_deref(), flags)
        })
        .collect();
    let cancelled = parse_and_write(store, &work, options.max_file_size, progress, totals)?;
    if !cancelled && let Some(record) = &plan.build_flags.record {
        // Every indexed file of a package whose flags changed was read
        // again with them ([`plan_build_flags`]).
        store.set_meta(meta_keys::RUST_BUILD_FLAGS, record)?;
    }
    Ok(cancelled)
}

/// Bytes parsed in one run from which its resolution pass starts by
/// returning the allocator's free memory to the system (see
/// [`releases_memory_before_resolving`]).
const RELEASE_MEMORY_PARSED_BYTES: u64 = 4 * crate::discover::DEFAULT_MAX_FILE_SIZE;

/// Whether a run that parsed `bytes_parsed` bytes returns the allocator's
/// free memory ([`crate::graph::release_free_memory`]) before it resolves.
/// A cold index of Django (36 MB parsed) peaks 15 MiB lower for it (105
/// -> 90 MiB, `bench/README.md`); a small run gains nothing (its peak is
/// its parse phase) and would only pay the walk of every arena and fault
/// the returned pages in again. The bound is four of the largest files
/// indexed by default, so an edit of a few files never pays.
fn releases_memory_before_resolving(bytes_parsed: u64) -> bool {
    bytes_parsed >= RELEASE_MEMORY_PARSED_BYTES
}

/// The run's resolution pass, its parallel work on the index pool, after
/// returning free memory when the run parsed enough for it to matter.
///
/// This thread reads the store and writes the edges; only the resolving
/// goes to the pool. (Until s18 the whole pass ran inside the pool, and the
/// pass's resolver thread, not a pool worker, sent its chunks to rayon's
/// global pool: `--threads 1` resolved on every core, and the default run
/// kept one index thread blocked writing.)
fn resolve_run(
    store: &mut Store,
    root: &Path,
    kept: Option<&mut crate::graph::resolve::KeptRows>,
    bytes_parsed: u64,
) -> Result<crate::graph::ResolveStats> {
    // A phase boundary for `bench/thread_account.py`.
    tracing::debug!(bytes_parsed, "resolution started");
    if releases_memory_before_resolving(bytes_parsed) {
        let started = Instant::now();
        crate::graph::release_free_memory();
        let ms = started.elapsed().as_millis() as u64;
        tracing::debug!(bytes_parsed, ms, "free memory released");
    }
    match index_pool() {
        Some(pool) => crate::graph::resolve_pending_on(store, root, kept, pool),
        None => match kept {
            Some(kept) => crate::graph::resolve_pending_kept(store, root, kept),
            None => crate::graph::resolve_pending(store, root),
        },
    }
}

/// Discovers the repository's files and compares them with the index:
/// which to read, which are unchanged, which left the listing.
fn plan_run(root: &Path, store: &mut Store, options: &IndexOptions) -> Result<RunPlan> {
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
    let warm_up = |c: &Candidate| {
        let unchanged = stored.get(&c.path).is_some_and(|s| is_unchanged(s, c))
            || known_skips
                .get(&c.path)
                .is_some_and(|(size, mtime, _)| *size == c.size && *mtime == c.mtime_ns);
        if !unchanged {
            Language::from_path(&c.path).warm_up_in_background();
        }
    };
    let was_complete = store.meta(meta_keys::INDEX_COMPLETE)?.as_deref() == Some("1");
    let (mut discovery, listed_in_repo) =
        match discover_only_named(root, store, options, was_complete, &warm_up)? {
            Some(named) => {
                // Every file of a complete index is indexed or recorded as
                // skipped: the named paths counted before are those, and
                // the count moves by the difference.
                let counted_before = named
                    .only
                    .iter()
                    .filter(|p| stored.contains_key(*p) || known_skips.contains_key(*p))
                    .count() as u64;
                let listed = (named.candidates_before + named.discovery.files.len() as u64)
                    .saturating_sub(counted_before);
                (named.discovery, listed)
            }
            None => {
                let discovery =
                    discover_with(root, options.max_file_size, filter.as_ref(), &warm_up)?;
                // A glob's run counts what its filter left out too.
                let listed = discovery.files.len() as u64 + discovery.filtered_out;
                (discovery, listed)
            }
        };
    let candidates_in_repo = listed_in_repo as usize - discovery.filtered_out as usize;
    // Known from the start, so coverage is right while a first run is still
    // writing (queries and status read it then).
    if filter.is_none() || store.meta(meta_keys::CANDIDATE_FILES)?.is_none() {
        store.set_meta(meta_keys::CANDIDATE_FILES, &listed_in_repo.to_string())?;
    }
    if let Some(only) = &options.only_paths {
        discovery.files.retain(|c| only.contains(&c.path));
    }
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
    let Sorted {
        mut work,
        skipped,
        mut files_unchanged,
    } = sort_listed(&discovery, &stored, &known_skips);
    let build_flags = plan_build_flags(
        root,
        store,
        &stored,
        &mut discovery,
        &mut work,
        &mut files_unchanged,
    )?;
    Ok(RunPlan {
        discovery,
        build_flags,
        work,
        removals,
        skipped,
        files_unchanged,
        candidates_in_repo,
        filtered: filter.is_some(),
        was_complete,
        covers_repository,
        started_empty,
    })
}

/// The bare `cfg` names each Cargo package's build script turns on in a
/// default build (`cargo:rustc-cfg=wrap_proc_macro`), read when a run
/// starts: the walker reads a Rust file's `#[cfg(name)]` with its
/// package's. Facts are kept by file content, so a file's facts depend on
/// another file (the build script, the manifest's features): the index
/// records the flags its files were read with, and a run that finds them
/// changed reads every indexed Rust file of those packages again.
#[derive(Default)]
struct BuildFlags {
    /// Every package's folder (`""` at the root, else ending in `/`) with
    /// its flags, the deepest folder first.
    packages: Vec<(String, Vec<String>)>,
    /// What the run records once its files are written, when it differs
    /// from what the index holds.
    record: Option<String>,
}

impl BuildFlags {
    /// The flags of the package a file belongs to (its deepest folder);
    /// none for a file that is no Rust source.
    fn of(&self, path: &str) -> &[String] {
        if !path.ends_with(".rs") {
            return &[];
        }
        self.packages
            .iter()
            .find(|(dir, _)| path.starts_with(dir.as_str()))
            .map_or(&[], |(_, flags)| flags.as_slice())
    }
}

/// The packages' flags as the index records them ([`meta_keys::RUST_BUILD_FLAGS`]).
fn encode_build_flags(packages: &[(String, Vec<String>)]) -> BTreeMap<String, String> {
    packages
        .iter()
        .filter(|(_, flags)| !flags.is_empty())
        .map(|(dir, flags)| (dir.clone(), flags.join(" ")))
        .collect()
}

/// Reads the packages' build flags ([`BuildFlags`]) of the repository at
/// `root` (its manifests among the indexed and listed files) and, where a
/// package's differ from those the index recorded, adds every indexed Rust
/// file under its folder to `work` to be read again (one the run did not
/// list, as a named or filtered run does not, from the disk).
fn plan_build_flags(
    root: &Path,
    store: &Store,
    stored: &HashMap<String, StoredFile>,
    discovery: &mut crate::discover::Discovery,
    work: &mut Vec<(usize, Option<String>)>,
    files_unchanged: &mut u64,
) -> Result<BuildFlags> {
    let paths = stored
        .keys()
        .map(String::as_str)
        .chain(discovery.files.iter().map(|c| c.path.as_str()));
    let mut packages = crate::graph::resolve::Manifests::read(root, paths).rust_build_flags();
    packages.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then_with(|| a.0.cmp(&b.0)));
    let now = encode_build_flags(&packages);
    let recorded = store.meta(meta_keys::RUST_BUILD_FLAGS)?.unwrap_or_default();
    let before: BTreeMap<String, String> = recorded
        .lines()
        .filter_map(|l| l.split_once('\t'))
        .map(|(dir, flags)| (dir.to_string(), flags.to_string()))
        .collect();
    if now == before {
        return Ok(BuildFlags {
            packages,
            record: None,
        });
    }
    let changed: Vec<&String> = now
        .keys()
        .chain(before.keys())
        .filter(|dir| now.get(*dir) != before.get(*dir))
        .collect();
    let listed: HashMap<&str, usize> = discovery
        .files
        .iter()
        .enumerate()
        .map(|(i, c)| (c.path.as_str(), i))
        .collect();
    let mut queued: HashMap<usize, usize> =
        work.iter().enumerate().map(|(w, (i, _))| (*i, w)).collect();
    let mut again: Vec<&String> = stored
        .keys()
        .filter(|p| p.ends_with(".rs") && changed.iter().any(|d| p.starts_with(d.as_str())))
        .collect();
    again.sort_unstable();
    let mut unlisted = Vec::new();
    for path in again {
        match listed.get(path.as_str()) {
            Some(&i) => match queued.get(&i) {
                Some(&w) => work[w].1 = None,
                None => {
                    queued.insert(i, work.len());
                    work.push((i, None));
                    *files_unchanged = files_unchanged.saturating_sub(1);
                }
            },
            None => unlisted.push(path),
        }
    }
    for path in unlisted {
        let abs_path = root.join(path);
        let Ok(meta) = std::fs::metadata(&abs_path) else {
            continue;
        };
        let mtime_ns = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos() as i64);
        work.push((discovery.files.len(), None));
        discovery.files.push(Candidate {
            path: path.clone(),
            abs_path,
            size: meta.len(),
            mtime_ns,
        });
    }
    let record: Vec<String> = now
        .iter()
        .map(|(dir, flags)| format!("{dir}\t{flags}"))
        .collect();
    Ok(BuildFlags {
        packages,
        record: Some(record.join("\n")),
    })
}

/// The listed files sorted by what the run does with them.
struct Sorted {
    /// Files to read: their index in the listing and, when indexed
    /// before, their stored content hash.
    work: Vec<(usize, Option<String>)>,
    /// Files not indexed, by reason (those skipped before and unchanged
    /// since included).
    skipped: BTreeMap<SkipReason, u64>,
    /// Indexed files unchanged since.
    files_unchanged: u64,
}

/// Sorts `discovery`'s files against the index: unchanged, skipped before
/// and unchanged since (not read again), or to read.
fn sort_listed(
    discovery: &crate::discover::Discovery,
    stored: &HashMap<String, StoredFile>,
    known_skips: &HashMap<String, (u64, i64, String)>,
) -> Sorted {
    let mut sorted = Sorted {
        work: Vec::new(),
        skipped: discovery.skipped.clone(),
        files_unchanged: 0,
    };
    for (i, candidate) in discovery.files.iter().enumerate() {
        if let Some((size, mtime, reason)) = known_skips.get(&candidate.path)
            && *size == candidate.size
            && *mtime == candidate.mtime_ns
        {
            // Skipped before and unchanged since: not read again.
            *sorted
                .skipped
                .entry(stored_skip_reason(reason))
                .or_insert(0) += 1;
            continue;
        }
        match stored.get(&candidate.path) {
            Some(s) if is_unchanged(s, candidate) => sorted.files_unchanged += 1,
            Some(s) => sorted.work.push((i, Some(s.content_hash.clone()))),
            None => sorted.work.push((i, None)),
        }
    }
    sorted
}

/// A listing of a run's named paths alone (see [`discover_named`]).
struct NamedDiscovery<'a> {
    discovery: crate::discover::Discovery,
    /// The paths the run names.
    only: &'a HashSet<String>,
    /// The candidate count the index held before the run.
    candidates_before: u64,
}

/// Lists only the paths a run names, when it names a few, without a glob,
/// on a complete index whose candidate count is known (the count then
/// moves by what the named paths changed). `None`: list the whole tree.
fn discover_only_named<'a>(
    root: &Path,
    store: &Store,
    options: &'a IndexOptions,
    was_complete: bool,
    on_file: &(dyn Fn(&Candidate) + Sync),
) -> Result<Option<NamedDiscovery<'a>>> {
    let Some(only) = options.only_paths.as_ref() else {
        return Ok(None);
    };
    if options.glob.is_some() || !was_complete || lists_whole_tree_always() {
        return Ok(None);
    }
    let Some(candidates_before) = store
        .meta(meta_keys::CANDIDATE_FILES)?
        .and_then(|v| v.parse::<u64>().ok())
    else {
        return Ok(None);
    };
    Ok(
        discover_named(root, options.max_file_size, only, on_file)?.map(|discovery| {
            NamedDiscovery {
                discovery,
                only,
                candidates_before,
            }
        }),
    )
}

/// The measuring knob `CANOPY_DISCOVERY=whole`: runs over named paths list
/// the whole tree, as before [`discover_named`], so `bench/freshness.py`
/// can compare the two on one build. Not an interface.
fn lists_whole_tree_always() -> bool {
    std::env::var("CANOPY_DISCOVERY").as_deref() == Ok("whole")
}

/// A skip reason as the index stored it.
fn stored_skip_reason(reason: &str) -> SkipReason {
    [
        SkipReason::Binary,
        SkipReason::TooLarge,
        SkipReason::Unreadable,
        SkipReason::Secret,
    ]
    .into_iter()
    .find(|r| r.as_str() == reason)
    .unwrap_or(SkipReason::Unreadable)
}

/// Reads and parses `work` while this thread, the only writer, commits
/// the outcomes in batches of whole files. Returns whether the run was
/// cancelled (what was written stays: whole files).
///
/// With one index thread (`--threads 1`) this thread parses too, so the
/// run's file work is one thread of CPU, and `--threads 1` against the
/// default measures what more threads buy (issue 28 item 2). With more,
/// the parsers are threads of their own, not rayon's: they wait whenever
/// the writer is behind (the channel is full) or memory is (see
/// [`IN_FLIGHT_BYTES`]), and waiting rayon workers would hold up whatever
/// else shares their pool: a reader listing files or embedding, another
/// repository's run (issue N5).
fn parse_and_write(
    store: &mut Store,
    work: &[(&Candidate, Option<&str>, &[String])],
    max_file_size: u64,
    progress: &dyn IndexProgress,
    totals: &mut WriteTotals,
) -> Result<bool> {
    let parsers = index_threads().min(work.len().max(1));
    // A phase boundary for `bench/thread_account.py`.
    tracing::debug!(files = work.len(), parsers, "parsing started");
    let mut writer = BatchWriter::new(store, progress, totals);
    if parsers <= 1 {
        for (candidate, old, flags) in work {
            if writer.take(process(candidate, *old, max_file_size, flags))? {
                return Ok(true);
            }
        }
        writer.flush()?;
        return Ok(false);
    }
    let (sender, receiver) = sync_channel::<(usize, Outcome, u64)>(PARSED_QUEUE);
    let budget = InFlight::new(IN_FLIGHT_BYTES);
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|scope| {
        let (budget, next) = (&budget, &next);
        let mut started = 0;
        for i in 0..parsers {
            let sender = sender.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("canopy-parse-{i}"))
                .spawn_scoped(scope, move || {
                    loop {
                        let n = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some((candidate, old, flags)) = work.get(n) else {
                            break;
                        };
                        let held = budget.acquire(n, candidate.size);
                        // A send error means the writer stopped (it failed
                        // or the run was cancelled): this parser stops too.
                        if sender
                            .send((n, process(candidate, *old, max_file_size, flags), held))
                            .is_err()
                        {
                            break;
                        }
                    }
                });
            match spawned {
                Ok(_) => started += 1,
                // Fewer parsers do the same work, slower.
                Err(e) => tracing::warn!("cannot start a parser thread: {e}"),
            }
        }
        drop(sender);
        if started == 0 {
            return Err(crate::CanopyError::Internal(
                "cannot start any parser thread".into(),
            ));
        }
        // However the writer leaves, parsers waiting for budget go on (and
        // find the channel closed).
        let _close = budget.closer();
        // Outcomes that arrived before an earlier file's: the writer takes
        // files in `work` (path) order whatever the parsers' timing, so
        // file and node ids, and every answer that lists by them, are the
        // same on any number of threads (issue 25). Their bytes stay taken
        // until written, which bounds this as the channel is bounded.
        let mut early: BTreeMap<usize, (Outcome, u64)> = BTreeMap::new();
        for (n, outcome, held) in receiver {
            early.insert(n, (outcome, held));
            while let Some((outcome, held)) = early.remove(&budget.next_in_order()) {
                // Out of the channel: the batch bounds it from here (it is
                // committed at BATCH_BYTES).
                budget.release_in_order(held);
                if writer.take(outcome)? {
                    return Ok(true);
                }
            }
        }
        writer.flush()?;
        Ok(false)
    })
}

/// The writer's side of [`parse_and_write`]: takes outcomes in `work`
/// order and commits them in batches of whole files.
struct BatchWriter<'a> {
    store: &'a mut Store,
    progress: &'a dyn IndexProgress,
    totals: &'a mut WriteTotals,
    batch: Vec<FileWrite>,
    batch_bytes: u64,
}

impl<'a> BatchWriter<'a> {
    fn new(
        store: &'a mut Store,
        progress: &'a dyn IndexProgress,
        totals: &'a mut WriteTotals,
    ) -> BatchWriter<'a> {
        BatchWriter {
            store,
            progress,
            totals,
            batch: Vec::new(),
            batch_bytes: 0,
        }
    }

    /// Adds the next file's outcome, committing the batch when it is full.
    /// Returns whether the run was cancelled; then what the batch held is
    /// committed (complete per file) and nothing more should be taken.
    fn take(&mut self, outcome: Outcome) -> Result<bool> {
        if crate::cancel::requested() {
            self.flush()?;
            return Ok(true);
        }
        self.batch_bytes += count_outcome(&outcome, self.progress, self.totals);
        self.batch.push(match outcome {
            Outcome::Write(write, _) | Outcome::Skip(_, write) => write,
        });
        if self.batch.len() >= BATCH_FILES || self.batch_bytes >= BATCH_BYTES {
            self.flush()?;
        }
        Ok(false)
    }

    /// Commits what the batch holds.
    fn flush(&mut self) -> Result<()> {
        self.batch_bytes = 0;
        flush(self.store, &mut self.batch, self.totals)
    }
}

/// Bytes of source in flight between the parsers and the writer (see
/// [`IN_FLIGHT_BYTES`]): a parser takes its file's size before reading it
/// and the writer gives it back when it writes the outcome, in `work`
/// order. The file the writer waits for next never waits for bytes, so
/// the writer cannot deadlock with the parsers.
struct InFlight {
    limit: u64,
    state: std::sync::Mutex<InFlightState>,
    freed: std::sync::Condvar,
}

/// What [`InFlight`] guards.
struct InFlightState {
    /// Bytes taken.
    taken: u64,
    /// The position in `work` of the file the writer takes next.
    next: usize,
    /// Whether the writer stopped (then nobody waits).
    closed: bool,
}

impl InFlight {
    fn new(limit: u64) -> InFlight {
        InFlight {
            limit,
            state: std::sync::Mutex::new(InFlightState {
                taken: 0,
                next: 0,
                closed: false,
            }),
            freed: std::sync::Condvar::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, InFlightState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits until `size` bytes of file `n` (at most the whole limit: a
    /// larger file goes alone) fit, or file `n` is the one the writer
    /// waits for; takes them and returns how many it took.
    fn acquire(&self, n: usize, size: u64) -> u64 {
        let want = size.min(self.limit);
        let mut state = self.lock();
        while !state.closed && n != state.next && state.taken > 0 && state.taken + want > self.limit
        {
            state = self.freed.wait(state).unwrap_or_else(|e| e.into_inner());
        }
        state.taken += want;
        want
    }

    /// The position in `work` of the file the writer takes next.
    fn next_in_order(&self) -> usize {
        self.lock().next
    }

    /// Gives back the bytes of the file the writer just took, and moves on
    /// to the next.
    fn release_in_order(&self, taken: u64) {
        let mut state = self.lock();
        state.taken = state.taken.saturating_sub(taken);
        state.next += 1;
        self.freed.notify_all();
    }

    /// Wakes every waiting parser for good when dropped (the writer left).
    fn closer(&self) -> impl Drop + '_ {
        struct Closer<'a>(&'a InFlight);
        impl Drop for Closer<'_> {
            fn drop(&mut self) {
                self.0.lock().closed = true;
                self.0.freed.notify_all();
            }
        }
        Closer(self)
    }
}

/// Counts one outcome into the report and the progress sink; returns the
/// source bytes it parsed.
fn count_outcome(outcome: &Outcome, progress: &dyn IndexProgress, totals: &mut WriteTotals) -> u64 {
    let report = &mut totals.report;
    match outcome {
        Outcome::Write(write, bytes) => {
            let path = match write {
                FileWrite::Parsed(w) => {
                    report.files_indexed += 1;
                    report.bytes_parsed += bytes;
                    report.note_changed(&w.path);
                    w.path.as_str()
                }
                FileWrite::Touch { path, .. } => {
                    report.files_unchanged += 1;
                    path.as_str()
                }
                FileWrite::Remove { path } => {
                    report.note_changed(path);
                    path.as_str()
                }
                FileWrite::Skipped { path, .. } => path.as_str(),
            };
            progress.advance(path, *bytes);
            *bytes
        }
        Outcome::Skip(reason, _) => {
            *totals.skipped.entry(*reason).or_insert(0) += 1;
            progress.advance("", 0);
            0
        }
    }
}

/// Commits one batch of whole files.
fn flush(store: &mut Store, batch: &mut Vec<FileWrite>, totals: &mut WriteTotals) -> Result<()> {
    if batch.is_empty() {
        return Ok(());
    }
    let stats = store.write_batch(batch, now_unix())?;
    totals.report.units_written += stats.units;
    totals.report.refs_written += stats.refs;
    totals.report.files_removed += stats.removed;
    totals.rows_replaced += stats.rows_replaced;
    batch.clear();
    Ok(())
}

/// Ends a cancelled run like a killed one, minus the kill: the batches
/// written stay (the index is consistent per file, each batch committed
/// with its generation), and the index says it is partial. Resolution of
/// the written files is pending and runs with the next run.
fn finish_cancelled(
    store: &mut Store,
    options: &IndexOptions,
    bulk_build: bool,
) -> Result<IndexReport> {
    if bulk_build {
        store.ensure_indexes()?;
    }
    if options.is_full() {
        store.set_meta(meta_keys::INDEX_COMPLETE, "0")?;
    }
    Err(crate::CanopyError::Cancelled)
}

/// Records what a finished run covered: when it ran, how files were
/// listed, and for a run over the whole repository the candidates, skip
/// counts and completeness.
fn record_coverage(
    store: &mut Store,
    plan: &RunPlan,
    skipped: &BTreeMap<SkipReason, u64>,
) -> Result<()> {
    store.set_meta(meta_keys::LAST_INDEXED, &now_unix().to_string())?;
    store.set_meta(meta_keys::FILE_DISCOVERY, plan.discovery.method.as_str())?;
    if !plan.filtered || plan.covers_repository {
        store.set_meta(
            meta_keys::CANDIDATE_FILES,
            &plan.candidates_in_repo.to_string(),
        )?;
    }
    if plan.covers_repository {
        store.set_meta(
            meta_keys::SKIPPED,
            &serde_json::to_string(&skip_counts(skipped)).unwrap_or_else(|_| "{}".into()),
        )?;
        store.set_meta(meta_keys::INDEX_COMPLETE, "1")?;
    } else {
        // A partial run keeps a complete index complete and a partial one partial.
        store.set_meta(
            meta_keys::INDEX_COMPLETE,
            if plan.was_complete { "1" } else { "0" },
        )?;
    }
    Ok(())
}

fn skip_counts(skipped: &BTreeMap<SkipReason, u64>) -> BTreeMap<String, u64> {
    skipped
        .iter()
        .map(|(k, v)| (k.as_str().to_string(), *v))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run of a few files merges a bounded share of the text index's
    /// pending merge work; a large run merges in proportion to its files.
    #[test]
    fn small_runs_merge_a_bounded_share_of_the_text_index() {
        assert_eq!(merge_pages(0), MERGE_PAGES_PER_FILE);
        assert_eq!(merge_pages(1), MERGE_PAGES_PER_FILE);
        assert_eq!(merge_pages(1_300), 1_300 * MERGE_PAGES_PER_FILE);
        assert_eq!(merge_pages(u64::MAX), u64::MAX);
    }

    #[test]
    fn only_runs_that_parsed_several_large_files_release_memory() {
        let max_file = crate::discover::DEFAULT_MAX_FILE_SIZE;
        // A watcher's pass after an edit of one file, even the largest
        // indexed by default, or of three of them: no arena walk.
        assert!(!releases_memory_before_resolving(0));
        assert!(!releases_memory_before_resolving(max_file));
        assert!(!releases_memory_before_resolving(3 * max_file));
        assert!(!releases_memory_before_resolving(4 * max_file - 1));
        // A cold index of a mid-size repository (Django parses ~36 MB).
        assert!(releases_memory_before_resolving(4 * max_file));
        assert!(releases_memory_before_resolving(36_521_460));
    }
}
