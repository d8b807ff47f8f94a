//! `canopy`: the command-line front end.
//!
//! This crate only translates: arguments into typed requests (`args`,
//! `graph_cmd`), requests into calls on one [`Backend`] — the local engine,
//! or the service with `--service-url` (`backend`) — in one dispatcher
//! ([`run`]), and answers into text or JSON (`output`, `graph_cmd`). Every
//! behaviour lives in `canopy-core`; `canopy mcp` and `canopy serve` are
//! their own crates'.

mod args;
mod backend;
mod doctor;
mod follow_cmd;
mod graph_cmd;
mod output;
mod setup;
mod tree;

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use canopy_client::backend::{Backend, BackendError, Need};
use canopy_client::client::ClientError;
use canopy_client::request::{Expand, GraphQuery, IndexRequest};
use canopy_core::discover::RootRule;
use canopy_core::{CanopyError, EngineOptions};
use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};

use crate::args::{ContextArgs, PackArgs, QueryArgs};
use crate::backend::Scope;

/// Token-efficient code search for LLM agents: index a repository, query it
/// for small handles, expand only what you need.
#[derive(Parser, Debug)]
#[command(name = "canopy", about, long_about = None)]
struct Cli {
    #[command(flatten)]
    global: GlobalArgs,
    #[command(subcommand)]
    command: Command,
}

/// Flags every subcommand accepts; `--help` lists them under their own
/// heading so a command's own options stand apart.
#[derive(Args, Debug)]
#[command(next_help_heading = "Global options")]
pub(crate) struct GlobalArgs {
    /// Repository root, or any directory inside it (default: the current directory).
    #[arg(long, global = true, env = "CANOPY_ROOT")]
    pub(crate) root: Option<PathBuf>,
    /// Print machine-readable JSON on stdout (and nothing else).
    #[arg(long, global = true)]
    pub(crate) json: bool,
    /// No progress bar and no summary on stderr.
    #[arg(long, short, global = true)]
    pub(crate) quiet: bool,
    /// Send index, query, pack, context, expand, status and the graph commands to a running `canopy serve` at this URL.
    #[arg(long, global = true, env = "CANOPY_SERVICE_URL")]
    pub(crate) service_url: Option<String>,
    /// Bearer token for --service-url [default: for a loopback URL, the
    /// token the local `canopy serve` generated in its data directory
    /// ($CANOPY_DATA_DIR, else $XDG_DATA_HOME/canopy or
    /// ~/.local/share/canopy)].
    #[arg(
        long,
        global = true,
        env = "CANOPY_SERVICE_TOKEN",
        hide_env_values = true
    )]
    pub(crate) service_token: Option<String>,
    /// Skip files larger than this many bytes.
    #[arg(long, global = true, default_value_t = canopy_core::discover::DEFAULT_MAX_FILE_SIZE)]
    pub(crate) max_file_size: u64,
    /// Static embedding model directory for semantic retrieval in context
    /// packs (tokenizer.json or vocab.txt, and model.safetensors; see
    /// README "Semantic retrieval"). Without one, semantic is skipped.
    #[arg(long, global = true, env = "CANOPY_MODEL")]
    pub(crate) model: Option<PathBuf>,
    /// Escape sequences on stdout (the graph commands' `path:line`
    /// hyperlinks): `auto` on a terminal unless NO_COLOR is set.
    #[arg(long, global = true, value_enum, default_value_t = tree::ColorChoice::Auto)]
    pub(crate) color: tree::ColorChoice,
}

impl GlobalArgs {
    /// The token to send to the service at `url`: `--service-token`, else
    /// the local service's generated one when `url` is on this machine.
    pub(crate) fn token_for(&self, url: &str) -> Option<String> {
        self.service_token
            .clone()
            .or_else(|| canopy_client::auth::local_token_for(url))
    }
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Index the repository (incremental: unchanged files are not re-parsed).
    Index {
        /// Repository root or a directory inside it (overrides --root).
        path: Option<PathBuf>,
        /// Only index files matching this glob (e.g. "src/**/*.rs").
        #[arg(long)]
        glob: Option<String>,
        /// Throw the index away and build it again (the repair for a damaged index).
        #[arg(long, conflicts_with = "glob")]
        rebuild: bool,
        /// Threads that read and parse files and resolve the graph (default:
        /// one per core). With more than one the writer is one more thread;
        /// with 1 it parses too, so the run is single-threaded.
        #[arg(long, value_parser = clap::value_parser!(u16).range(1..=256))]
        threads: Option<u16>,
    },
    /// Keep the index fresh: re-index changed files as they change, until
    /// interrupted (or --max-cycles / --duration-seconds).
    Watch {
        /// Repository root or a directory inside it (overrides --root).
        path: Option<PathBuf>,
        /// Stop after this many index runs (the initial one included).
        #[arg(long)]
        max_cycles: Option<u64>,
        /// Stop after this many seconds.
        #[arg(long)]
        duration_seconds: Option<u64>,
        /// Quiet time, in milliseconds, that closes a batch of changes.
        #[arg(long, default_value_t = 50)]
        debounce_ms: u64,
    },
    /// Follow a service's event feed (needs --service-url): wake on relevant
    /// events, run --exec for each, resume from a durable cursor.
    Follow(follow_cmd::FollowArgs),
    /// Show index statistics.
    Status {
        /// Repository root or a directory inside it (overrides --root).
        path: Option<PathBuf>,
    },
    /// Force files to be re-parsed (all, or those matching --glob), then re-index them.
    Invalidate {
        /// Only files matching this glob.
        #[arg(long)]
        glob: Option<String>,
    },
    /// Print the exact text of handles.
    Expand {
        /// Handle ids (h + 24 hex), as returned by query.
        #[arg(required = true)]
        ids: Vec<String>,
    },
    /// Search the index; returns handles (id, path, lines, tokens, preview).
    Query(QueryArgs),
    /// Evidence pack: the few handles that answer a question, with guidance on when to stop.
    Pack(PackArgs),
    /// Context pack: the code a task needs, cut to a token budget, each
    /// fragment with where it came from and why.
    Context(ContextArgs),
    /// Serve the Model Context Protocol on stdio (for Claude Code and other MCP clients).
    Mcp(canopy_mcp::McpArgs),
    /// Run the multi-repo HTTP service.
    Serve(canopy_service::ServeArgs),
    /// Print a shell completion script (e.g. `canopy completions bash >
    /// ~/.local/share/bash-completion/completions/canopy`).
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff), e.g. `canopy man > ~/.local/share/man/man1/canopy.1`.
    Man,
    /// Check this installation: binary and schema version, the index, the
    /// embedding model, the agents Canopy is registered with, the service;
    /// each with what to do about it.
    Doctor,
    /// Register `canopy mcp` with an agent (Claude Code, Cursor, Codex CLI,
    /// VS Code) in its MCP configuration file.
    Setup(setup::SetupArgs),
    #[command(flatten)]
    Graph(graph_cmd::GraphCommand),
}

fn main() -> ExitCode {
    let started = canopy_core::timing::mark();
    let parsed = cli_command()
        .try_get_matches()
        .and_then(|matches| Cli::from_arg_matches(&matches));
    let cli = match parsed {
        Ok(cli) => cli,
        Err(err) => {
            use clap::error::ErrorKind;
            let wants_json = std::env::args_os().any(|a| a == "--json");
            if wants_json
                && !matches!(
                    err.kind(),
                    ErrorKind::DisplayHelp | ErrorKind::DisplayVersion
                )
            {
                let message = err.kind().as_str().unwrap_or("invalid arguments");
                let body = serde_json::json!({
                    "error": { "code": "Usage", "message": message, "hint": "run `canopy --help`" }
                });
                println!("{body}");
            }
            err.exit()
        }
    };
    // Only commands whose stdout is their answer: the protocol servers
    // handle closed streams themselves, and a broken pipe on one of their
    // sockets must never end the process as a success.
    if !matches!(cli.command, Command::Mcp(_) | Command::Serve(_)) {
        quiet_on_closed_stdout();
    }
    init_tracing(cli.global.quiet, cli.global.color);
    canopy_core::timing::phase("cli.args", started);
    let json = cli.global.json;
    let ran = run(cli);
    canopy_core::timing::phase("cli.main", started);
    match ran {
        Ok(()) => ExitCode::SUCCESS,
        // Output written with `write!` returns the closed pipe as an error:
        // the same ending as the panic above, and as quiet.
        Err(err)
            if err.chain().any(|cause| {
                cause
                    .downcast_ref::<std::io::Error>()
                    .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
            }) =>
        {
            ExitCode::SUCCESS
        }
        Err(err) => {
            report_error(&err, json);
            ExitCode::FAILURE
        }
    }
}

/// The command line as clap sees it: the derived definitions, the version
/// string, and `canopy mcp --help`'s list of tools, from the same table
/// `tools/list` is built from (so it is attached at run time).
fn cli_command() -> clap::Command {
    Cli::command()
        .version(version())
        .mut_subcommand("mcp", |mcp| mcp.after_help(canopy_mcp::help_text()))
}

/// `canopy --version`: the version, the commit it was built from
/// (`build.rs`; `unknown` outside git) and the index schema it reads.
fn version() -> &'static str {
    static VERSION: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    VERSION.get_or_init(|| {
        format!(
            "{} (commit {}, index schema {})",
            env!("CARGO_PKG_VERSION"),
            env!("CANOPY_GIT_COMMIT"),
            canopy_core::store::SCHEMA_VERSION
        )
    })
}

/// `canopy … | head`: when the reader of stdout goes away, `print!` panics
/// on the broken pipe; that is how the command learns nobody reads on, not
/// a fault, so it ends quietly with success (as `rg … | head` does) instead of printing
/// a panic and a backtrace. Every other panic is reported as before.
fn quiet_on_closed_stdout() {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or_default();
        // std's wording: "failed printing to stdout: Broken pipe (os error 32)";
        // writers that `expect` their writes (clap_complete, clap_mangen)
        // word it their own way around the same io error.
        if message.contains("Broken pipe") {
            std::process::exit(0);
        }
        report(info)
    }));
}

/// Prints a failed command's error: on stderr for people, and with `--json`
/// also as `{"error": {code, message, hint}}` on stdout, so a script reading
/// stdout always gets one JSON document.
fn report_error(err: &anyhow::Error, json: bool) {
    let (code, message, hint) = describe_error(err);
    eprintln!("error: {message}");
    if let Some(hint) = hint {
        eprintln!("hint: {hint}");
    }
    if json {
        let body = serde_json::json!({
            "error": { "code": code, "message": message, "hint": hint }
        });
        println!("{body}");
    }
}

/// An error's code, message and hint: the backend's (the core's own codes,
/// the service's, or the client's) when it is one, else the whole chain.
fn describe_error(err: &anyhow::Error) -> (&str, String, Option<&str>) {
    if let Some(core) = err.downcast_ref::<CanopyError>() {
        return (core.code(), core.to_string(), Some(core.hint()));
    }
    match err.downcast_ref::<BackendError>() {
        Some(BackendError::Core(core)) => (core.code(), core.to_string(), Some(core.hint())),
        // The service's own words; its hint goes on its own line, not twice.
        Some(
            backend @ BackendError::Client(ClientError::Api {
                status, message, ..
            }),
        ) => (
            backend.code(),
            format!("{message} [{status} {}]", backend.code()),
            Some(backend.hint()),
        ),
        Some(backend) => (backend.code(), format!("{err:#}"), Some(backend.hint())),
        None => ("Error", format!("{err:#}"), None),
    }
}

fn init_tracing(quiet: bool, color: tree::ColorChoice) {
    let default = if quiet { "error" } else { "warn" };
    let filter = tracing_subscriber::EnvFilter::try_from_env("CANOPY_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        // Escape codes only for a person watching a terminal, never in
        // captured logs.
        // Colour only for a person at a terminal who has not opted out
        // (https://no-color.org).
        .with_ansi(
            color != tree::ColorChoice::Never
                && std::io::stderr().is_terminal()
                && std::env::var_os("NO_COLOR").is_none(),
        )
        .without_time()
        .init();
}

/// The one dispatcher: each command is a call on the backend that answers
/// it (the local engine, or the service with `--service-url`: `backend`),
/// rendered by `output`; `serve`, `mcp` and `follow` hand over to their
/// crates, and `watch` and `invalidate` need a local index.
fn run(cli: Cli) -> anyhow::Result<()> {
    let Cli { global, command } = cli;
    let g = &global;
    match command {
        Command::Serve(mut args) => {
            args.engine_options = backend::engine_options(g);
            canopy_service::run(args)
        }
        Command::Mcp(args) => mcp(g, args),
        Command::Completions { shell } => {
            let mut command = cli_command();
            clap_complete::generate(shell, &mut command, "canopy", &mut std::io::stdout());
            Ok(())
        }
        Command::Man => {
            clap_mangen::Man::new(cli_command()).render(&mut std::io::stdout())?;
            Ok(())
        }
        Command::Doctor => {
            if !doctor::run(g, backend::engine_options(g))? {
                // The report above is the answer; its failing check says why.
                std::process::exit(1);
            }
            Ok(())
        }
        Command::Setup(args) => setup::run(args, g.root.as_deref(), g.json),
        Command::Follow(args) => match &g.service_url {
            Some(url) => follow_cmd::run(args, url, g.token_for(url), g.json, g.quiet),
            None => anyhow::bail!(
                "canopy follow reads a service's event feed: pass --service-url URL (or set CANOPY_SERVICE_URL)"
            ),
        },
        Command::Watch {
            path,
            max_cycles,
            duration_seconds,
            debounce_ms,
        } => {
            let options = canopy_core::watch::WatchOptions {
                debounce: std::time::Duration::from_millis(debounce_ms),
                max_cycles,
                duration: duration_seconds.map(std::time::Duration::from_secs),
                initial_run: true,
            };
            // Watching writes the index: like `canopy index`, a person asked.
            watch(g, local_only(g, path, Scope::Index)?.as_ref(), &options)
        }
        Command::Invalidate { glob } => {
            let backend = local_only(g, None, Scope::Read)?;
            let progress = output::Progress::new(show_progress(g));
            output::indexed(
                &backend.invalidate(glob.as_deref(), &progress)?,
                g.json,
                g.quiet,
            )
        }
        Command::Index {
            path,
            glob,
            rebuild,
            threads,
        } => {
            if let Some(n) = threads {
                canopy_core::index::set_index_threads(usize::from(n));
            }
            index(g, path, IndexRequest { glob, rebuild })
        }
        Command::Status { path } => {
            let backend = backend::open(g, path, Scope::Read)?;
            output::status(&backend.status()?, g.json)
        }
        Command::Expand { ids } => {
            let ids = Expand::new(ids).context("pass at least one handle id")?;
            let backend = backend::open(g, None, Scope::Read)?;
            output::expansions(&backend.expand(&ids)?, g.json)
        }
        Command::Query(args) => {
            let query = args.query()?;
            let backend = backend::open(g, None, Scope::Read)?;
            output::query_result(&backend.query(&query)?, g.json)?;
            finish_after_answer(backend.as_ref(), g.quiet)
        }
        Command::Pack(args) => {
            let pack = args.pack()?;
            let backend = backend::open(g, None, Scope::Read)?;
            output::pack(&backend.evidence_pack(&pack)?, g.json)?;
            finish_after_answer(backend.as_ref(), g.quiet)
        }
        Command::Context(args) => {
            use canopy_core::timing::phase;
            let t = canopy_core::timing::mark();
            let context = args.context()?;
            let backend = backend::open(g, None, Scope::Read)?;
            let t = phase("cli.open", t);
            let pack = backend.context(&context)?;
            let t = phase("cli.context", t);
            output::context(&pack, g.json)?;
            let t = phase("cli.output", t);
            let finished = finish_after_answer(backend.as_ref(), g.quiet);
            phase("cli.finish", t);
            finished
        }
        Command::Graph(cmd) => {
            let (request, format) = cmd.request()?;
            // `--max-results` is honoured up to 100,000 here (a service
            // keeps an agent's 500 and says so in `max_results_clamped`).
            let request = GraphQuery::new(request)?.for_scripts();
            let backend = backend::open(g, None, Scope::Read)?;
            let progress = output::FirstIndexProgress::new(
                show_progress(g),
                !g.quiet,
                "the graph needs the whole repository",
            );
            backend.prepare(Need::Graph, &progress)?;
            let answer = backend.graph(&request)?;
            graph_cmd::print(&answer, format, g.json, &links(g))
        }
    }
}

/// How the graph commands write `path:line`: as hyperlinks to the files of
/// the repository the command runs in, when stdout takes escapes
/// (`--color`); plain otherwise, or when that root cannot be found.
fn links(global: &GlobalArgs) -> tree::Links {
    if global.json || !global.color.escapes_on_stdout() {
        return tree::Links::plain();
    }
    backend::start_dir(global, None)
        .ok()
        .and_then(|start| canopy_core::discover::find_repo_root(&start).ok())
        .map_or_else(tree::Links::plain, tree::Links::to_files_under)
}

/// A progress bar only for a person watching a terminal.
fn show_progress(global: &GlobalArgs) -> bool {
    !global.quiet && !global.json && std::io::stderr().is_terminal()
}

/// The local backend of a command that only a local index can run.
fn local_only(
    global: &GlobalArgs,
    path: Option<PathBuf>,
    scope: Scope,
) -> anyhow::Result<Box<dyn Backend>> {
    if global.service_url.is_some() {
        anyhow::bail!("this command does not work with --service-url; run it without the flag");
    }
    backend::open(global, path, scope)
}

/// `canopy index`: a local run with a progress bar, or the service's run
/// (which registers the repository first if needed).
fn index(global: &GlobalArgs, path: Option<PathBuf>, request: IndexRequest) -> anyhow::Result<()> {
    if global.service_url.is_some() {
        if request.rebuild {
            anyhow::bail!(
                "--rebuild is not supported with --service-url: POST /reindex with \"rebuild\": true"
            );
        }
        if request.glob.is_some() {
            anyhow::bail!(
                "--glob is not supported with --service-url: the service reindexes whole repositories"
            );
        }
    }
    let backend = backend::open(global, path, Scope::Index)?;
    let progress = output::Progress::new(show_progress(global));
    output::indexed(
        &backend.index(&request, &progress)?,
        global.json,
        global.quiet,
    )
}

/// `canopy watch`: keeps the index fresh until interrupted or a limit.
fn watch(
    global: &GlobalArgs,
    backend: &dyn Backend,
    options: &canopy_core::watch::WatchOptions,
) -> anyhow::Result<()> {
    let Some(local) = backend.local() else {
        anyhow::bail!("this command does not work with --service-url; run it without the flag");
    };
    let engine = local.engine()?;
    if !global.quiet {
        eprintln!(
            "watching {} (Ctrl-C to stop; stopping mid-run loses nothing)",
            engine.root().display()
        );
    }
    let stop = std::sync::atomic::AtomicBool::new(false);
    let summary = canopy_core::watch::watch(&engine, options, &stop, |cycle| {
        output::watch_cycle(cycle, global.json, global.quiet);
    })?;
    if !global.quiet {
        eprintln!(
            "watch ended after {} run(s): {}",
            summary.cycles, summary.reason
        );
    }
    Ok(())
}

/// `canopy mcp`: every repository an agent names is served from its own
/// index, or with `--service-url` by the service, with the agent's own
/// uncommitted edits overlaid.
fn mcp(global: &GlobalArgs, mut args: canopy_mcp::McpArgs) -> anyhow::Result<()> {
    // Paths come from agents: only git repositories and folders a person
    // indexed by hand.
    args.engine_options = EngineOptions {
        root_rule: RootRule::Discovered,
        ..backend::engine_options(global)
    };
    args.service = global
        .service_url
        .as_ref()
        .map(|url| canopy_mcp::ServiceMode {
            url: url.clone(),
            token: global.token_for(url),
        });
    canopy_mcp::run_stdio(args)
}

/// [`finish_background_index`] once the answer is on stdout: a failure to
/// finish the index is no longer the command's failure. stdout already holds
/// its one answer (which says how much was indexed), and a second JSON
/// document after it would break every script that reads it, so the failure
/// is a warning on stderr and the command succeeds; the next command
/// continues the index and reports the failure again if it persists.
fn finish_after_answer(backend: &dyn Backend, quiet: bool) -> anyhow::Result<()> {
    if let Err(err) = finish_background_index(backend, quiet) {
        let (_, message, hint) = describe_error(&err);
        eprintln!(
            "warning: the answer above stands; completing the rest of the index failed: {message}"
        );
        if let Some(hint) = hint {
            eprintln!("hint: {hint}");
        }
    }
    Ok(())
}

/// A first query on a large repository answers from a partial index; the
/// rest is indexed in the background. Finish it before the process exits so
/// the next command sees everything.
fn finish_background_index(backend: &dyn Backend, quiet: bool) -> anyhow::Result<()> {
    let Some(local) = backend.local() else {
        return Ok(());
    };
    let engine = local.engine()?;
    if engine.is_complete()? {
        return Ok(());
    }
    if !quiet {
        let done = engine
            .status()
            .map(|s| format!(" ({})", percent(s.index_coverage)))
            .unwrap_or_default();
        eprintln!(
            "the answer is above; indexing the rest of the repository{done} so the next command sees every file. Ctrl-C is safe: the next command continues from where this stops."
        );
    }
    // On a terminal, a line that says how far the index is and how long is
    // left, updated while the process waits (the index reads its own
    // coverage without waiting for the writer).
    let ticker = (!quiet && std::io::stderr().is_terminal()).then(|| {
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let engine = engine.clone();
        let thread = std::thread::spawn(move || {
            let started = std::time::Instant::now();
            let first = engine.status().map(|s| s.index_coverage).unwrap_or(0.0);
            while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                stopped.recv_timeout(std::time::Duration::from_millis(500))
            {
                let Ok(now) = engine.status().map(|s| s.index_coverage) else {
                    continue;
                };
                let rate = (now - first) / started.elapsed().as_secs_f64().max(1e-3);
                let left = match (1.0 - now) / rate {
                    s if rate <= 0.0 || !s.is_finite() => String::new(),
                    s if s < 1.0 => ", less than a second left".to_string(),
                    s => format!(", about {s:.0} s left"),
                };
                eprint!("\r\x1b[2Kindexing the rest: {}{left}", percent(now));
            }
            eprint!("\r\x1b[2K");
        });
        (stop, thread)
    });
    let finished = engine.wait_for_background_index();
    if let Some((stop, thread)) = ticker {
        let _ = stop.send(());
        let _ = thread.join();
    }
    finished?;
    Ok(())
}

/// A coverage fraction for people: whole percent, but never "0%" or "100%"
/// for a part (a first answer on a large repository may have 0.1% indexed).
fn percent(coverage: f64) -> String {
    let p = coverage * 100.0;
    if p > 0.0 && p < 1.0 {
        format!("{p:.1}% indexed")
    } else if p > 99.0 && p < 100.0 {
        "99% indexed".to_string()
    } else {
        format!("{p:.0}% indexed")
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn a_part_is_never_shown_as_none_or_all() {
        assert_eq!(super::percent(0.0008), "0.1% indexed");
        assert_eq!(super::percent(0.0), "0% indexed");
        assert_eq!(super::percent(0.456), "46% indexed");
        assert_eq!(super::percent(0.9996), "99% indexed");
        assert_eq!(super::percent(1.0), "100% indexed");
    }

    #[test]
    fn cli_definition_is_consistent() {
        super::Cli::command().debug_assert();
    }
}
