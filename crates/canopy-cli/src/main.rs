//! `canopy`: the command-line front end over [`canopy_core::Engine`].
//!
//! This crate only translates arguments into engine calls and results into
//! text or JSON; every behaviour lives in `canopy-core`.

mod follow_cmd;
mod graph_cmd;
mod output;
mod remote;

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use canopy_core::discover::RootRule;
use canopy_core::pack::PackParams;
use canopy_core::query::{MatchMode, QueryKind, QueryParams};
use canopy_core::{CanopyError, Engine, EngineOptions};
use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};

/// Token-efficient code search for LLM agents: index a repository, query it
/// for small handles, expand only what you need.
#[derive(Parser, Debug)]
#[command(name = "canopy", version, about, long_about = None)]
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
struct GlobalArgs {
    /// Repository root, or any directory inside it (default: the current directory).
    #[arg(long, global = true, env = "CANOPY_ROOT")]
    root: Option<PathBuf>,
    /// Print machine-readable JSON on stdout (and nothing else).
    #[arg(long, global = true)]
    json: bool,
    /// No progress bar and no summary on stderr.
    #[arg(long, short, global = true)]
    quiet: bool,
    /// Send index, query, pack, expand and status to a running `canopy serve` at this URL.
    #[arg(long, global = true, env = "CANOPY_SERVICE_URL")]
    service_url: Option<String>,
    /// Bearer token for --service-url.
    #[arg(
        long,
        global = true,
        env = "CANOPY_SERVICE_TOKEN",
        hide_env_values = true
    )]
    service_token: Option<String>,
    /// Skip files larger than this many bytes.
    #[arg(long, global = true, default_value_t = canopy_core::discover::DEFAULT_MAX_FILE_SIZE)]
    max_file_size: u64,
    /// Static embedding model directory for semantic retrieval in context
    /// packs (tokenizer.json or vocab.txt, and model.safetensors; see
    /// README "Semantic retrieval"). Without one, semantic is skipped.
    #[arg(long, global = true, env = "CANOPY_MODEL")]
    model: Option<PathBuf>,
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
    #[command(flatten)]
    Graph(graph_cmd::GraphCommand),
}

#[derive(Args, Debug)]
struct ContextArgs {
    /// What you are about to do (an issue text is fine; "-" reads it from stdin). Of several
    /// lines, the first is taken as the summary and weighs most.
    task: String,
    /// Code to centre on: Type.method, Type::method, a path, or path:line[:col].
    #[arg(long)]
    focus: Option<String>,
    /// Most tokens the fragments' text may add up to.
    #[arg(long, default_value_t = canopy_core::context::DEFAULT_BUDGET)]
    budget: u64,
    /// Which strategy chooses candidates.
    #[arg(long, value_enum, default_value_t = StrategyArg::Fused)]
    strategy: StrategyArg,
}

/// `--strategy` values (see `canopy_core::context::Strategy`).
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum StrategyArg {
    Fused,
    Keyword,
    Semantic,
    Graph,
    History,
    Decisions,
}

impl From<StrategyArg> for canopy_core::context::Strategy {
    fn from(s: StrategyArg) -> Self {
        use canopy_core::context::Strategy;
        match s {
            StrategyArg::Fused => Strategy::Fused,
            StrategyArg::Keyword => Strategy::Keyword,
            StrategyArg::Semantic => Strategy::Semantic,
            StrategyArg::Graph => Strategy::Graph,
            StrategyArg::History => Strategy::History,
            StrategyArg::Decisions => Strategy::Decisions,
        }
    }
}

#[derive(Args, Debug)]
struct PackArgs {
    #[command(flatten)]
    query: QueryArgs,
    /// Most handles in the pack (default 8).
    #[arg(long)]
    max_handles: Option<usize>,
    /// Most handles per file (default 2).
    #[arg(long)]
    max_per_file: Option<usize>,
    /// Run a bounded server-side plan (follow definitions of the top hits).
    #[arg(long)]
    plan: bool,
    /// Most tokens the pack's handles may add up to (default 1500).
    #[arg(long)]
    max_tokens: Option<u64>,
}

#[derive(Args, Debug)]
struct QueryArgs {
    /// Full-text search (words are ANDed; "quoted phrases"; word* for prefixes).
    #[arg(long, short)]
    pattern: Option<String>,
    /// Several text patterns, combined by --match (repeatable).
    #[arg(long = "patterns", num_args = 1..)]
    patterns: Vec<String>,
    /// Code symbol (function, class, struct, method; Type.method works).
    #[arg(long, short)]
    symbol: Option<String>,
    /// Markdown section heading.
    #[arg(long)]
    section: Option<String>,
    /// Parent symbol (class, struct, impl) whose members to search.
    #[arg(long)]
    parent: Option<String>,
    /// definition, reference or any.
    #[arg(long, value_enum)]
    kind: Option<KindArg>,
    /// Restrict to paths matching this glob.
    #[arg(long)]
    glob: Option<String>,
    /// How --patterns combine: any (OR) or all (AND).
    #[arg(long = "match", value_enum)]
    match_mode: Option<MatchArg>,
    /// Maximum handles (default 16, at most 200).
    #[arg(long, short)]
    limit: Option<usize>,
    /// Auto-expand handles in rank order while their tokens fit this budget.
    #[arg(long)]
    expand_budget: Option<u64>,
    /// S-expression query, e.g. '(in-file "src/**" (grep "auth"))'.
    #[arg(long)]
    query: Option<String>,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum KindArg {
    Definition,
    Reference,
    Any,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum MatchArg {
    Any,
    All,
}

fn main() -> ExitCode {
    // `canopy mcp --help` lists the server's tools from the same table
    // `tools/list` is built from, so it is attached at run time.
    let command =
        Cli::command().mut_subcommand("mcp", |mcp| mcp.after_help(canopy_mcp::help_text()));
    let parsed = command
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
    init_tracing(cli.global.quiet);
    let json = cli.global.json;
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            report_error(&err, json);
            ExitCode::FAILURE
        }
    }
}

/// Prints a failed command's error: on stderr for people, and with `--json`
/// also as `{"error": {code, message, hint}}` on stdout, so a script reading
/// stdout always gets one JSON document.
fn report_error(err: &anyhow::Error, json: bool) {
    let core = err.downcast_ref::<CanopyError>();
    let code = core.map_or("Error", CanopyError::code);
    let message = match core {
        Some(core) => core.to_string(),
        None => format!("{err:#}"),
    };
    let hint = core.map(CanopyError::hint);
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

fn init_tracing(quiet: bool) {
    let default = if quiet { "error" } else { "warn" };
    let filter = tracing_subscriber::EnvFilter::try_from_env("CANOPY_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        // Escape codes only for a person watching a terminal, never in
        // captured logs.
        .with_ansi(std::io::stderr().is_terminal())
        .without_time()
        .init();
}

/// Opens the engine for a command. A directory the user named (a PATH
/// argument, `--root`, `CANOPY_ROOT`, or any `canopy index`) may be a plain
/// folder; the working directory must be inside a git repository or already
/// indexed, so that running canopy in a random folder never indexes it.
fn open_engine(
    global: &GlobalArgs,
    path: Option<PathBuf>,
    by_hand: bool,
) -> anyhow::Result<Engine> {
    let options = options_for(global, path.is_some() || by_hand);
    let start = start_dir(global, path)?;
    Ok(Engine::open(&start, options)?)
}

/// [`engine_options`] with the root rule for a command (see [`open_engine`]).
fn options_for(global: &GlobalArgs, named: bool) -> EngineOptions {
    EngineOptions {
        root_rule: if named || global.root.is_some() {
            RootRule::Named
        } else {
            RootRule::Discovered
        },
        ..engine_options(global)
    }
}

/// Engine settings from the global flags: the same for the CLI's own
/// commands, `canopy mcp` and `canopy serve`.
fn engine_options(global: &GlobalArgs) -> EngineOptions {
    EngineOptions {
        max_file_size: global.max_file_size,
        embedding_model: global.model.clone(),
        ..EngineOptions::default()
    }
}

/// The directory a command applies to: its PATH argument, --root, or the working directory.
fn start_dir(global: &GlobalArgs, path: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    match path.or_else(|| global.root.clone()) {
        Some(p) => Ok(p),
        None => std::env::current_dir().context("cannot read the current directory"),
    }
}

/// Service mode (`--service-url`): the commands that have a service counterpart.
fn run_remote(cli: Cli, url: &str) -> anyhow::Result<()> {
    let global = &cli.global;
    let token = global.service_token.clone();
    // The registered repository containing `path` (or --root, or the working directory).
    let connect = |path: Option<PathBuf>| -> anyhow::Result<remote::Remote> {
        remote::Remote::connect(
            url,
            global.service_token.clone(),
            &start_dir(global, path)?,
            engine_options(global),
        )
    };
    match cli.command {
        Command::Index {
            path,
            glob,
            rebuild,
        } => {
            if rebuild {
                anyhow::bail!(
                    "--rebuild is not supported with --service-url: POST /reindex with \"rebuild\": true"
                );
            }
            if glob.is_some() {
                anyhow::bail!(
                    "--glob is not supported with --service-url: the service reindexes whole repositories"
                );
            }
            let root = canopy_core::discover::find_repo_root(&start_dir(global, path)?)?;
            remote::Remote::index(url, token, &root, global.json)
        }
        Command::Query(args) => {
            let params = query_params(args);
            params.validate()?;
            connect(None)?.query(&params, global.json)
        }
        Command::Pack(args) => {
            let params = pack_params(args);
            params.query.validate()?;
            connect(None)?.pack(&params, global.json)
        }
        Command::Expand { ids } => connect(None)?.expand(&ids, global.json),
        Command::Status { path } => connect(path)?.status(),
        Command::Follow(args) => follow_cmd::run(args, url, token, global.json, global.quiet),
        Command::Context(args) => {
            let params = context_params(args)?;
            params.validate()?;
            connect(None)?.context(&params, global.json)
        }
        Command::Mcp(mut args) => {
            // Each repository an agent names is answered by the service,
            // with the agent's own uncommitted edits overlaid.
            args.engine_options = EngineOptions {
                root_rule: RootRule::Discovered,
                ..engine_options(global)
            };
            args.service = Some(canopy_mcp::ServiceMode {
                url: url.to_string(),
                token,
            });
            canopy_mcp::run_stdio(args)
        }
        Command::Invalidate { .. }
        | Command::Watch { .. }
        | Command::Serve(_)
        | Command::Graph(_) => {
            anyhow::bail!("this command does not work with --service-url; run it without the flag")
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    // `canopy serve` is the service; every other command with a service
    // counterpart (the MCP server included) is answered by it.
    if let Some(url) = cli.global.service_url.clone()
        && !matches!(cli.command, Command::Serve(_))
    {
        return run_remote(cli, &url);
    }
    let global = &cli.global;
    let show_progress = !global.quiet && !global.json && std::io::stderr().is_terminal();
    match cli.command {
        Command::Index {
            path,
            glob,
            rebuild,
        } => {
            let engine = open_engine(global, path, true)?;
            let progress = output::Progress::new(show_progress);
            let report = if rebuild {
                engine.rebuild(&progress)?
            } else {
                engine.index(glob.as_deref(), &progress)?
            };
            output::index_report(&engine, &report, global.json, global.quiet)
        }
        Command::Invalidate { glob } => {
            let engine = open_engine(global, None, false)?;
            let progress = output::Progress::new(show_progress);
            let report = engine.invalidate(glob.as_deref(), &progress)?;
            output::index_report(&engine, &report, global.json, global.quiet)
        }
        Command::Follow(_) => anyhow::bail!(
            "canopy follow reads a service's event feed: pass --service-url URL (or set CANOPY_SERVICE_URL)"
        ),
        Command::Watch {
            path,
            max_cycles,
            duration_seconds,
            debounce_ms,
        } => {
            // Watching writes the index: like `canopy index`, a person asked.
            let engine = open_engine(global, path, true)?;
            let options = canopy_core::watch::WatchOptions {
                debounce: std::time::Duration::from_millis(debounce_ms),
                max_cycles,
                duration: duration_seconds.map(std::time::Duration::from_secs),
                initial_run: true,
            };
            if !global.quiet {
                eprintln!(
                    "watching {} (Ctrl-C to stop; stopping mid-run loses nothing)",
                    engine.root().display()
                );
            }
            let stop = std::sync::atomic::AtomicBool::new(false);
            let summary = canopy_core::watch::watch(&engine, &options, &stop, |cycle| {
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
        Command::Status { path } => {
            // Read-only: never creates `.canopy/`.
            let options = options_for(global, path.is_some());
            let status = Engine::peek_status(start_dir(global, path)?, options)?;
            output::status(&status, global.json)
        }
        Command::Expand { ids } => {
            let engine = open_engine(global, None, false)?;
            output::expansions(&engine.expand(&ids)?, global.json)
        }
        Command::Query(args) => {
            let engine = open_engine(global, None, false)?;
            let params = query_params(args);
            params.validate()?;
            output::query_result(&engine.query(&params)?, global.json)?;
            finish_background_index(&engine, global.quiet)
        }
        Command::Pack(args) => {
            let engine = open_engine(global, None, false)?;
            let params = pack_params(args);
            params.query.validate()?;
            // One CLI process is one session.
            let session = format!("cli-{}", std::process::id());
            output::pack(&engine.evidence_pack(&params, Some(&session))?, global.json)?;
            finish_background_index(&engine, global.quiet)
        }
        Command::Context(args) => {
            let params = context_params(args)?;
            params.validate()?;
            let engine = open_engine(global, None, false)?;
            output::context(&engine.context(&params)?, global.json)?;
            finish_background_index(&engine, global.quiet)
        }
        Command::Mcp(mut args) => {
            // Paths come from agents: only git repositories and folders a
            // person indexed by hand.
            args.engine_options = EngineOptions {
                root_rule: RootRule::Discovered,
                ..engine_options(global)
            };
            canopy_mcp::run_stdio(args)
        }
        Command::Graph(cmd) => {
            let engine = open_engine(global, None, false)?;
            graph_cmd::run(&engine, cmd, global.json)
        }
        Command::Serve(mut args) => {
            args.engine_options = engine_options(global);
            canopy_service::run(args)
        }
    }
}

/// A first query on a large repository answers from a partial index; the
/// rest is indexed in the background. Finish it before the process exits so
/// the next command sees everything.
fn finish_background_index(engine: &Engine, quiet: bool) -> anyhow::Result<()> {
    if engine.is_complete()? {
        return Ok(());
    }
    if !quiet {
        eprintln!("completing the index in the background before exiting…");
    }
    engine.wait_for_background_index()?;
    Ok(())
}

fn context_params(args: ContextArgs) -> anyhow::Result<canopy_core::context::ContextParams> {
    let task = if args.task == "-" {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)
            .map_err(|e| anyhow::anyhow!("reading the task from stdin: {e}"))?;
        text
    } else {
        args.task
    };
    Ok(canopy_core::context::ContextParams {
        task,
        focus: args.focus,
        budget_tokens: Some(args.budget),
        strategy: Some(args.strategy.into()),
    })
}

fn pack_params(args: PackArgs) -> PackParams {
    PackParams {
        query: query_params(args.query),
        max_handles: args.max_handles,
        max_per_file: args.max_per_file,
        plan: args.plan.then_some(true),
        max_tokens: args.max_tokens,
    }
}

fn query_params(args: QueryArgs) -> QueryParams {
    QueryParams {
        pattern: args.pattern,
        patterns: (!args.patterns.is_empty()).then_some(args.patterns),
        symbol: args.symbol,
        section: args.section,
        parent: args.parent,
        kind: args.kind.map(|k| match k {
            KindArg::Definition => QueryKind::Definition,
            KindArg::Reference => QueryKind::Reference,
            KindArg::Any => QueryKind::Any,
        }),
        glob: args.glob,
        match_mode: args.match_mode.map(|m| match m {
            MatchArg::Any => MatchMode::Any,
            MatchArg::All => MatchMode::All,
        }),
        limit: args.limit,
        expand_budget: args.expand_budget,
        query: args.query,
        result_set: None,
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        super::Cli::command().debug_assert();
    }
}
