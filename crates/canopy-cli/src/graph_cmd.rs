//! The code-graph subcommands (`canopy callers Parser.parse --depth 2`, …):
//! each is a [`GraphRequest`] — the one request type `Graph::run` answers
//! for every front end, locally or in the service — and its answer is
//! rendered as human text, JSON (`--json`), DOT or Mermaid (`--format
//! dot|mermaid`).

use std::fmt::Write as _;

use anyhow::Context;
use canopy_client::backend::Answer;
use canopy_core::graph::nav::{DEFAULT_MAX_RESULTS, Empty, GraphAnswer, GraphNode, MAX_RESULTS};
use canopy_core::graph::ops::{
    CycleAnswer, DepAnswer, HotspotAnswer, Level, SummaryAnswer, SymbolsAnswer, UnusedAnswer,
};
use canopy_core::graph::request::{GraphOp, GraphRequest, GraphResponse};
use clap::{Args, Subcommand, ValueEnum};

use crate::tree::{self, Links};

/// Graph navigation commands.
#[derive(Subcommand, Debug)]
pub enum GraphCommand {
    /// Units that call TARGET (`Type.method`, `Type::method`, `pkg.Name`, `path:line:col`).
    Callers(TraverseArgs),
    /// Units TARGET calls.
    Callees(TraverseArgs),
    /// Every resolved use of TARGET (calls, imports, types, other uses).
    References(TargetArgs),
    /// Units that use TARGET as a type.
    TypeUsages(TargetArgs),
    /// The definition a name at FILE:LINE[:COL] resolves to (COL 0-based;
    /// without it, the line's one site, or a list of the line's sites).
    Definition {
        /// `path:line:col`, or `path:line` when the line has one site.
        position: String,
    },
    /// The shortest call path from FROM to TO.
    Path {
        /// Start.
        from: String,
        /// End.
        to: String,
    },
    /// Types that extend or implement TARGET.
    Implementations(TargetArgs),
    /// Types TARGET extends or implements.
    Implements(TargetArgs),
    /// Supertypes and subtypes of TARGET.
    TypeHierarchy(TraverseArgs),
    /// TARGET in detail: signature, parameters, callers/callees/references counts, members.
    Detail(TargetArgs),
    /// Definitions, most referenced first: filter by path prefix, name, kind,
    /// visibility and reference count; page with --offset.
    Symbols(SymbolArgs),
    /// Definitions whose name matches PATTERN (`*` wildcards, else substring).
    Search {
        /// Name pattern.
        pattern: String,
        #[command(flatten)]
        filter: SymbolArgs,
    },
    /// A file at a glance: units, tokens, top symbols, dependencies, dependents.
    Summary {
        /// Repo-relative file path.
        file: String,
    },
    /// A directory at a glance, with package-level dependencies.
    PackageSummary {
        /// Repo-relative directory (`.` for the repository).
        dir: String,
    },
    /// The scope chain at FILE:LINE[:COL]: the file, then every enclosing unit.
    Scope {
        /// `path:line` or `path:line:col`.
        position: String,
    },
    /// What must change (direct users) and what needs review if TARGET changes.
    Impact(TargetArgs),
    /// Files (or packages, --package) TARGET depends on.
    Dependencies(DepArgs),
    /// Files (or packages) that depend on TARGET.
    Dependents(DepArgs),
    /// Units with the most callers plus callees.
    Hotspots {
        /// How many.
        #[arg(long, default_value_t = 20)]
        top: usize,
        #[command(flatten)]
        scope: ScopeArgs,
        #[command(flatten)]
        guesses: GuessArgs,
    },
    /// Dependency cycles between files (or packages, --package), Tarjan SCC.
    Cycles {
        /// Packages (directories) instead of files.
        #[arg(long)]
        package: bool,
        #[command(flatten)]
        guesses: GuessArgs,
    },
    /// Definitions nothing resolved uses (candidates; entry points, public
    /// API, vendored, generated and test code left out).
    Unused {
        /// Include public (exported) definitions.
        #[arg(long)]
        include_public: bool,
        #[command(flatten)]
        scope: ScopeArgs,
        /// Most candidates.
        #[arg(long, default_value_t = DEFAULT_MAX_RESULTS)]
        max_results: usize,
        #[command(flatten)]
        guesses: GuessArgs,
    },
    /// The file (or package) dependency graph, heaviest edges first.
    DependencyGraph {
        /// Only paths under this prefix.
        prefix: Option<String>,
        /// Packages (directories) instead of files.
        #[arg(long)]
        package: bool,
        /// Most edges.
        #[arg(long, default_value_t = DEFAULT_MAX_RESULTS)]
        max_results: usize,
        /// Output format for people (`--json` wins).
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
        #[command(flatten)]
        guesses: GuessArgs,
    },
}

/// `--include-guesses`.
#[derive(Args, Debug)]
pub struct GuessArgs {
    /// Count guessed edges too (`how: unique_name`: the receiver's type was
    /// unknown and the repository's only definition of the name was
    /// taken); by default only resolved edges count.
    #[arg(long)]
    pub include_guesses: bool,
}

impl GuessArgs {
    fn get(&self) -> Option<bool> {
        self.include_guesses.then_some(true)
    }
}

/// `--include-vendored`, `--include-tests` (`unused`, `hotspots`).
#[derive(Args, Debug)]
pub struct ScopeArgs {
    /// Also list units in vendored directories (vendor/, node_modules/,
    /// third_party/, …) and minified or generated files (*.min.js,
    /// *.bundle.js, *.pb.go, *_pb2.py, …); left out by default.
    #[arg(long)]
    pub include_vendored: bool,
    /// Also list units in test code (tests/, test_*.py, *_test.go,
    /// *.spec.ts, …); left out by default.
    #[arg(long)]
    pub include_tests: bool,
}

/// A file or package target.
#[derive(Args, Debug)]
pub struct DepArgs {
    /// A file path, or a directory with --package.
    pub target: String,
    /// Packages (directories) instead of files.
    #[arg(long)]
    pub package: bool,
    /// Most nodes.
    #[arg(long, default_value_t = DEFAULT_MAX_RESULTS)]
    pub max_results: usize,
    #[command(flatten)]
    pub guesses: GuessArgs,
}

fn level(package: bool) -> Level {
    if package { Level::Package } else { Level::File }
}

/// A request for `op` on `target` with a result cap.
fn request(op: GraphOp, target: &str, max_results: usize) -> GraphRequest {
    GraphRequest {
        max_results: Some(max_results),
        ..GraphRequest::new(op, target)
    }
}

impl GraphCommand {
    /// The command's graph request, and how a person wants the answer
    /// drawn. Positions are read here first, so a malformed one is told in
    /// the command line's own words (`FILE:LINE:COL`).
    pub fn request(self) -> anyhow::Result<(GraphRequest, Format)> {
        use GraphOp as Op;
        let traverse = |op, a: TraverseArgs| {
            let r = GraphRequest {
                depth: Some(a.depth),
                offset: a.target.offset,
                ..request(op, &a.target.target, a.target.max_results)
            };
            (r, a.format)
        };
        let target = |op, a: TargetArgs| {
            let r = GraphRequest {
                offset: a.offset,
                ..request(op, &a.target, a.max_results)
            };
            (r, Format::Text)
        };
        let dependencies = |op, a: DepArgs| {
            let r = GraphRequest {
                level: Some(level(a.package)),
                include_guesses: a.guesses.get(),
                ..request(op, &a.target, a.max_results)
            };
            (r, Format::Text)
        };
        let plain = |r: GraphRequest| (r, Format::Text);
        Ok(match self {
            GraphCommand::Callers(a) => traverse(Op::Callers, a),
            GraphCommand::Callees(a) => traverse(Op::Callees, a),
            GraphCommand::TypeHierarchy(a) => traverse(Op::TypeHierarchy, a),
            GraphCommand::References(a) => target(Op::References, a),
            GraphCommand::TypeUsages(a) => target(Op::TypeUsages, a),
            GraphCommand::Implementations(a) => target(Op::Implementations, a),
            GraphCommand::Implements(a) => target(Op::Implements, a),
            GraphCommand::Impact(a) => target(Op::Impact, a),
            GraphCommand::Detail(a) => target(Op::Detail, a),
            GraphCommand::Definition { position } => {
                check_definition_position(&position)?;
                plain(GraphRequest::new(Op::Definition, position))
            }
            GraphCommand::Scope { position } => {
                canopy_core::graph::request::parse_position(&position)
                    .with_context(|| format!("expected FILE:LINE[:COL], got {position:?}"))?;
                plain(GraphRequest::new(Op::Scope, position))
            }
            GraphCommand::Path { from, to } => plain(GraphRequest {
                to: Some(to),
                ..GraphRequest::new(Op::Path, from)
            }),
            GraphCommand::Dependencies(a) => dependencies(Op::Dependencies, a),
            GraphCommand::Dependents(a) => dependencies(Op::Dependents, a),
            GraphCommand::DependencyGraph {
                prefix,
                package,
                max_results,
                format,
                guesses,
            } => {
                let r = GraphRequest {
                    level: Some(level(package)),
                    include_guesses: guesses.get(),
                    ..request(
                        Op::DependencyGraph,
                        prefix.as_deref().unwrap_or(""),
                        max_results,
                    )
                };
                (r, format)
            }
            GraphCommand::Cycles { package, guesses } => plain(GraphRequest {
                level: Some(level(package)),
                include_guesses: guesses.get(),
                ..request(Op::CircularDependencies, "", MAX_RESULTS)
            }),
            GraphCommand::Hotspots {
                top,
                scope,
                guesses,
            } => plain(GraphRequest {
                include_guesses: guesses.get(),
                include_vendored: Some(scope.include_vendored),
                include_tests: Some(scope.include_tests),
                ..request(Op::Hotspots, "", top)
            }),
            GraphCommand::Unused {
                include_public,
                scope,
                max_results,
                guesses,
            } => plain(GraphRequest {
                include_public: Some(include_public),
                include_vendored: Some(scope.include_vendored),
                include_tests: Some(scope.include_tests),
                include_guesses: guesses.get(),
                ..request(Op::UnusedSymbols, "", max_results)
            }),
            GraphCommand::Symbols(a) => {
                let prefix = a.prefix.clone().unwrap_or_default();
                plain(GraphRequest {
                    filter: Some(a.filter()),
                    ..request(Op::Symbols, &prefix, a.max_results)
                })
            }
            GraphCommand::Search { pattern, filter } => plain(GraphRequest {
                filter: Some(filter.filter()),
                ..request(Op::Search, &pattern, filter.max_results)
            }),
            GraphCommand::Summary { file } => plain(GraphRequest::new(Op::Summary, file)),
            GraphCommand::PackageSummary { dir } => {
                plain(GraphRequest::new(Op::PackageSummary, dir))
            }
        })
    }
}

/// `definition` takes `FILE:LINE[:COL]`; without the column, the line's one site.
fn check_definition_position(position: &str) -> anyhow::Result<()> {
    if canopy_core::graph::position::Position::parse(position).is_none() {
        anyhow::bail!(
            "expected FILE:LINE[:COL] (COL 0-based; without it, the line's one site), got {position:?}"
        );
    }
    Ok(())
}

/// Prints a graph answer: JSON (pretty) with `--json`, else in `format`.
/// `links` writes each `path:line` of the text form (plain, or a terminal
/// hyperlink).
pub fn print(
    answer: &Answer<GraphResponse>,
    format: Format,
    json: bool,
    links: &Links,
) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(answer)?);
        return Ok(());
    }
    // Each renderer gives the whole of stdout, its last newline included.
    let out = match answer.get() {
        GraphResponse::Nodes(a) => match format {
            Format::Text => format!("{}\n", text(a, links)),
            Format::Dot => format!("{}\n", dot(a)),
            Format::Mermaid => format!("{}\n", mermaid(a)),
        },
        GraphResponse::Dependencies(a) => format!("{}\n", dep_text(a, format)),
        GraphResponse::Cycles(a) => cycles_text(a),
        GraphResponse::Hotspots(a) => hotspots_text(a, links),
        GraphResponse::Unused(a) => unused_text(a, links),
        GraphResponse::Symbols(a) => symbols_text(a, links),
        GraphResponse::Summary(a) => summary_text(a, links),
    };
    print!("{out}");
    Ok(())
}

fn cycles_text(a: &CycleAnswer) -> String {
    if a.cycles.is_empty() {
        return "no cycles\n".into();
    }
    let mut s = String::new();
    for c in &a.cycles {
        let _ = writeln!(s, "cycle ({}): {}", c.len(), c.join(" -> "));
    }
    s
}

/// One line per unit, each led by its `path:line` like every graph answer
/// for people: `path:line  name  N in, M out  handle`.
fn hotspots_text(a: &HotspotAnswer, links: &Links) -> String {
    let mut s = String::new();
    for h in &a.hotspots {
        let _ = writeln!(
            s,
            "{}  {}  {} in, {} out  {}",
            links.location(&h.handle.file_path, h.handle.line_range[0]),
            h.qualified_name.as_deref().unwrap_or(&h.handle.node_type),
            h.fan_in,
            h.fan_out,
            h.handle.id
        );
    }
    if let Some(hint) = &a.hint {
        let _ = writeln!(s, "{hint}");
    }
    s
}

fn unused_text(a: &UnusedAnswer, links: &Links) -> String {
    let mut s = String::new();
    for h in &a.candidates {
        let _ = writeln!(
            s,
            "{}  {}  {}",
            links.location(&h.file_path, h.line_range[0]),
            h.id,
            h.preview
        );
    }
    let _ = writeln!(
        s,
        "{} candidates; {} more left out because unresolved call sites share their name",
        a.total, a.maybe_used
    );
    if let Some(hint) = &a.hint {
        let _ = writeln!(s, "{hint}");
    }
    s
}

fn dep_text(a: &DepAnswer, format: Format) -> String {
    let mut s = String::new();
    match format {
        Format::Dot => {
            s.push_str("digraph canopy {\n  rankdir=LR;\n");
            for e in &a.edges {
                let _ = writeln!(
                    s,
                    "  \"{}\" -> \"{}\" [label=\"{}\"];",
                    e.from, e.to, e.weight
                );
            }
            s.push('}');
            return s;
        }
        Format::Mermaid => {
            s.push_str("flowchart LR\n");
            let ids: std::collections::BTreeMap<&str, usize> = a
                .nodes
                .iter()
                .enumerate()
                .map(|(i, n)| (n.name.as_str(), i))
                .collect();
            for (name, i) in &ids {
                let _ = writeln!(s, "  n{i}[\"{name}\"]");
            }
            for e in &a.edges {
                if let (Some(f), Some(t)) = (ids.get(e.from.as_str()), ids.get(e.to.as_str())) {
                    let _ = writeln!(s, "  n{f} -->|{}| n{t}", e.weight);
                }
            }
            return s.trim_end().to_string();
        }
        Format::Text => {}
    }
    for e in &a.edges {
        let _ = writeln!(s, "{} -> {}  ({} uses)", e.from, e.to, e.weight);
    }
    match &a.empty {
        Some(Empty::TargetNotFound) => s.push_str("target not found\n"),
        Some(_) => s.push_str("resolved: none\n"),
        None => {}
    }
    if a.truncated {
        let _ = writeln!(s, "(truncated: {} in all)", a.total);
    }
    s.trim_end().to_string()
}

/// A target and a result cap.
#[derive(Args, Debug)]
pub struct TargetArgs {
    /// `Type.method`, `Type::method`, `pkg.Name`, `file.py:Type.method`, a path, or `path:line:col`.
    pub target: String,
    /// Most nodes in the answer (at most 100,000; 500 through --service-url, which says so in `max_results_clamped`).
    #[arg(long, default_value_t = DEFAULT_MAX_RESULTS)]
    pub max_results: usize,
    /// callers, callees, references, type-usages: nodes to skip before
    /// the first listed (the previous answer's `next_offset`).
    #[arg(long)]
    pub offset: Option<usize>,
}

/// Filters of `canopy symbols` and `canopy search`.
#[derive(Args, Debug)]
pub struct SymbolArgs {
    /// Only definitions under this path prefix.
    pub prefix: Option<String>,
    /// Name pattern (`*` wildcards, else case-insensitive substring).
    #[arg(long)]
    pub name: Option<String>,
    /// Node types to keep (repeatable: function, method, class, struct, …).
    #[arg(long = "kind")]
    pub kinds: Vec<String>,
    /// Exported or private only (default: both).
    #[arg(long, value_enum)]
    pub visibility: Option<VisibilityArg>,
    /// Least resolved references.
    #[arg(long)]
    pub min_refs: Option<usize>,
    /// Most resolved references.
    #[arg(long)]
    pub max_refs: Option<usize>,
    /// Order (default: most referenced first).
    #[arg(long, value_enum)]
    pub sort: Option<SortArg>,
    /// Entries to skip (the previous answer's next_offset).
    #[arg(long)]
    pub offset: Option<usize>,
    /// Entries per page.
    #[arg(long, default_value_t = DEFAULT_MAX_RESULTS)]
    pub max_results: usize,
}

/// `--visibility`.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum VisibilityArg {
    /// Public API only.
    Exported,
    /// Everything else.
    Private,
}

/// `--sort`.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum SortArg {
    /// Most referenced first.
    Refs,
    /// By qualified name.
    Name,
    /// By path, then position.
    Path,
}

impl SymbolArgs {
    fn filter(&self) -> canopy_core::graph::ops::SymbolFilter {
        canopy_core::graph::ops::SymbolFilter {
            path_prefix: self.prefix.clone(),
            name: self.name.clone(),
            kinds: self.kinds.clone(),
            visibility: self.visibility.map(|v| match v {
                VisibilityArg::Exported => canopy_core::graph::ops::Visibility::Exported,
                VisibilityArg::Private => canopy_core::graph::ops::Visibility::Private,
            }),
            min_refs: self.min_refs,
            max_refs: self.max_refs,
            sort: self.sort.map(|s| match s {
                SortArg::Refs => canopy_core::graph::ops::SymbolSort::Refs,
                SortArg::Name => canopy_core::graph::ops::SymbolSort::Name,
                SortArg::Path => canopy_core::graph::ops::SymbolSort::Path,
            }),
            offset: self.offset,
        }
    }
}

/// One definition per line: reference count, name, location, id.
/// `path:line  name  N refs  handle`, `(private)` when not exported.
fn symbol_line(e: &canopy_core::graph::ops::SymbolEntry, links: &Links) -> String {
    format!(
        "{}  {}  {} refs  {}{}",
        links.location(&e.handle.file_path, e.handle.line_range[0]),
        e.qualified_name.as_deref().unwrap_or(&e.handle.node_type),
        e.refs,
        e.handle.id,
        if e.exported { "" } else { "  (private)" }
    )
}

fn symbols_text(ans: &SymbolsAnswer, links: &Links) -> String {
    let mut s = String::new();
    for e in &ans.symbols {
        let _ = writeln!(s, "{}", symbol_line(e, links));
    }
    let _ = match ans.next_offset {
        Some(next) => writeln!(
            s,
            "{} of {}; next page: --offset {next}",
            ans.symbols.len(),
            ans.total
        ),
        None => writeln!(s, "{} of {}", ans.symbols.len(), ans.total),
    };
    s
}

fn summary_text(a: &SummaryAnswer, links: &Links) -> String {
    if a.empty.is_some() {
        return format!("{}: nothing indexed under {}\n", a.op, a.target);
    }
    let list = |m: &std::collections::BTreeMap<String, usize>| {
        m.iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let names = |v: &[canopy_core::graph::ops::DepNode]| {
        v.iter()
            .map(|d| d.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut s = String::new();
    let _ = writeln!(s, "{}: {} files, {} tokens", a.target, a.files, a.tokens);
    let _ = writeln!(s, "  languages: {}", list(&a.languages));
    let _ = writeln!(s, "  units: {}", list(&a.units_by_kind));
    for e in &a.top_symbols {
        let _ = writeln!(s, "  {}", symbol_line(e, links));
    }
    let _ = writeln!(s, "  depends on: {}", names(&a.dependencies));
    let _ = writeln!(s, "  used by: {}", names(&a.dependents));
    s
}

/// A target, a depth and an output format.
#[derive(Args, Debug)]
pub struct TraverseArgs {
    #[command(flatten)]
    pub target: TargetArgs,
    /// Transitive depth (1..=10).
    #[arg(long, default_value_t = 1)]
    pub depth: u32,
    /// Output format for people (`--json` wins).
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

/// Output formats.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Lines of text.
    Text,
    /// Graphviz DOT.
    Dot,
    /// Mermaid flowchart.
    Mermaid,
}

fn label(qualified: Option<&str>, path: &str, line: u32) -> String {
    match qualified {
        Some(q) => format!("{q} ({path}:{line})"),
        None => format!("{path}:{line}"),
    }
}

/// The name a person knows a handle by.
fn handle_name(h: &canopy_core::model::Handle) -> &str {
    h.qualified_name
        .as_deref()
        .or(h.name.as_deref())
        .unwrap_or(&h.node_type)
}

/// A node's line: `path:line`, its name, how it was reached (with
/// `ambiguous` or `guess` when the edge is not a resolved one: a unit
/// reached by edges of two kinds is listed once per kind, and the two
/// lines must not read alike), its id, and, when the node it was reached
/// from is not drawn above it, `via` that one.
fn node_line(n: &GraphNode, via: Option<&str>, links: &Links) -> String {
    format!(
        "{}  {}  [{} {} {}%{}{}]  {}{}",
        links.location(&n.handle.file_path, n.handle.line_range[0]),
        n.qualified_name.as_deref().unwrap_or(&n.handle.node_type),
        n.edge_kind,
        n.how,
        n.confidence,
        if n.status == "ambiguous" {
            " ambiguous"
        } else {
            ""
        },
        if n.guess { " guess" } else { "" },
        n.handle.id,
        via.map(|v| format!("  via {v}")).unwrap_or_default()
    )
}

/// A section of nodes as a tree: each under the earlier node it was
/// reached from (`parent`), or, for answers that give no parents (`path`,
/// `scope`), under the last node one level up; each node's sites first,
/// then the nodes reached from it.
fn node_tree(a: &GraphAnswer, nodes: &[GraphNode], links: &Links) -> Vec<tree::Entry> {
    let parent_of = |i: usize| {
        let n = &nodes[i];
        match &n.parent {
            Some(p) => nodes[..i].iter().position(|m| m.handle.id == *p),
            None if n.depth > 0 => nodes[..i].iter().rposition(|m| m.depth + 1 == n.depth),
            None => None,
        }
    };
    let target = a.target.as_ref().map(|t| &t.id);
    let entry = |i: usize| {
        let n = &nodes[i];
        // Reached from a node drawn elsewhere (impact's review section
        // continues from its direct users): name it.
        let via = n
            .parent
            .as_ref()
            .filter(|p| Some(*p) != target && parent_of(i).is_none())
            .and_then(|p| a.nodes.iter().chain(&a.review).find(|m| m.handle.id == *p))
            .map(|m| m.qualified_name.as_deref().unwrap_or(&m.handle.node_type));
        let mut children: Vec<tree::Entry> = n
            .sites
            .iter()
            .map(|site| tree::Entry::leaf(format!("{}  {} site", links.site(site), n.edge_kind)))
            .collect();
        if n.sites_total > n.sites.len() {
            children.push(tree::Entry::leaf(format!(
                "… {} more sites",
                n.sites_total - n.sites.len()
            )));
        }
        tree::Entry {
            line: node_line(n, via, links),
            children,
        }
    };
    tree::forest(nodes.len(), parent_of, entry)
}

/// A graph answer for people: the target, then its nodes as a tree whose
/// every entry leads with `path:line`.
fn text(a: &GraphAnswer, links: &Links) -> String {
    let mut s = String::new();
    if !a.candidates.is_empty() {
        let _ = writeln!(
            s,
            "ambiguous target: {} candidates (use a longer name or path:line):",
            a.total
        );
        let entries: Vec<tree::Entry> = a
            .candidates
            .iter()
            .map(|c| {
                tree::Entry::leaf(format!(
                    "{}  {}  {}  {}",
                    links.location(&c.file_path, c.line_range[0]),
                    handle_name(c),
                    c.id,
                    c.preview
                ))
            })
            .collect();
        s.push_str(&tree::draw(&entries));
        return s.trim_end().to_string();
    }
    if let Some(t) = &a.target {
        let _ = writeln!(s, "{} of {}", a.op, handle_name(t));
        let _ = writeln!(
            s,
            "{}  {}",
            links.location(&t.file_path, t.line_range[0]),
            t.preview
        );
    }
    if let Some(d) = &a.detail {
        let _ = writeln!(s, "  signature: {}", d.signature);
        if !d.parameters.is_empty() {
            let _ = writeln!(s, "  parameters: {}", d.parameters.join(" | "));
        }
        let _ = writeln!(
            s,
            "  callers: {}  callees: {}  references: {}  members: {}  (guesses among them: {})",
            d.callers, d.callees, d.references, d.members, d.guesses
        );
    }
    s.push_str(&tree::draw(&node_tree(a, &a.nodes, links)));
    if !a.review.is_empty() {
        s.push_str("needs review:\n");
        s.push_str(&tree::draw(&node_tree(a, &a.review, links)));
    }
    match &a.empty {
        Some(Empty::TargetNotFound) => s.push_str("target not found\n"),
        Some(Empty::Resolved) => s.push_str("resolved: none\n"),
        Some(Empty::Unresolved { count, name }) => {
            let _ = writeln!(
                s,
                "no resolved edges; {count} call sites named {name} could not be resolved"
            );
        }
        None => {}
    }
    if !a.unresolved.is_empty() {
        let _ = writeln!(s, "unresolved sites ({}):", a.unresolved_count);
        let entries: Vec<tree::Entry> = a
            .unresolved
            .iter()
            .map(|u| {
                tree::Entry::leaf(format!(
                    "{}  {}",
                    links.location(&u.file_path, u.line),
                    u.name
                ))
            })
            .collect();
        s.push_str(&tree::draw(&entries));
        let listed = a.unresolved.len() as u64;
        if a.unresolved_count > listed {
            let _ = writeln!(s, "   … {} more", a.unresolved_count - listed);
        }
    } else if a.unresolved_count > 0 && a.empty.is_none() {
        let _ = writeln!(s, "({} unresolved sites)", a.unresolved_count);
    }
    if let Some(hint) = &a.hint {
        let _ = writeln!(s, "hint: {hint}");
    }
    if let Some(c) = &a.max_results_clamped {
        let _ = writeln!(
            s,
            "(--max-results {} is above the cap; {} used)",
            c.asked, c.used
        );
    }
    if a.offset > 0 || a.next_offset.is_some() {
        let _ = writeln!(
            s,
            "(nodes {}-{} of {})",
            a.offset + 1,
            a.offset + a.nodes.len(),
            a.total
        );
    }
    if let Some(next) = a.next_offset {
        let _ = writeln!(
            s,
            "(truncated: {} in all; next page: --offset {next})",
            a.total
        );
    } else if a.truncated {
        let _ = writeln!(s, "(truncated: {} in all)", a.total);
    }
    s.trim_end().to_string()
}

fn node_labels(a: &GraphAnswer) -> Vec<(String, String)> {
    let mut v = Vec::new();
    if let Some(t) = &a.target {
        v.push((
            t.id.to_string(),
            format!("{}:{}", t.file_path, t.line_range[0]),
        ));
    }
    for n in &a.nodes {
        v.push((
            n.handle.id.to_string(),
            label(
                n.qualified_name.as_deref(),
                &n.handle.file_path,
                n.handle.line_range[0],
            ),
        ));
    }
    v
}

/// Edges as (from, to, guessed): callers point at what they call.
fn drawn_edges(a: &GraphAnswer) -> Vec<(String, String, bool)> {
    let incoming = a.op == "callers" || a.op == "references" || a.op == "type_usages";
    a.nodes
        .iter()
        .filter_map(|n| {
            let p = n.parent.as_ref()?.to_string();
            let me = n.handle.id.to_string();
            Some(if incoming {
                (me, p, n.guess)
            } else {
                (p, me, n.guess)
            })
        })
        .collect()
}

fn dot(a: &GraphAnswer) -> String {
    let mut s = String::from("digraph canopy {\n  rankdir=LR;\n");
    for (id, l) in node_labels(a) {
        let _ = writeln!(s, "  \"{id}\" [label=\"{}\"];", l.replace('"', "\\\""));
    }
    for (f, t, guess) in drawn_edges(a) {
        // A guessed edge is drawn dashed and says so.
        let style = if guess {
            " [style=dashed, label=\"guess\"]"
        } else {
            ""
        };
        let _ = writeln!(s, "  \"{f}\" -> \"{t}\"{style};");
    }
    s.push('}');
    s
}

fn mermaid(a: &GraphAnswer) -> String {
    let mut s = String::from("flowchart LR\n");
    for (id, l) in node_labels(a) {
        let _ = writeln!(s, "  {id}[\"{}\"]", l.replace('"', "'"));
    }
    for (f, t, guess) in drawn_edges(a) {
        if guess {
            let _ = writeln!(s, "  {f} -. guess .-> {t}");
        } else {
            let _ = writeln!(s, "  {f} --> {t}");
        }
    }
    s.trim_end().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn id(n: u8) -> String {
        format!("h{n:024x}")
    }

    fn handle(n: u8, path: &str, line: u32, name: &str) -> serde_json::Value {
        json!({
            "id": id(n), "file_path": path, "node_type": "function", "qualified_name": name,
            "span": {"start": 0, "end": 1}, "line_range": [line, line + 2],
            "token_count": 3, "preview": format!("def {name}():"),
        })
    }

    fn node(n: u8, path: &str, line: u32, name: &str, depth: u32, parent: u8) -> serde_json::Value {
        json!({
            "handle": handle(n, path, line, name), "qualified_name": name, "depth": depth,
            "edge_kind": "call", "confidence": 100, "status": "resolved", "how": "scope",
            "sites": [format!("{path}:{}:4", line + 1)], "sites_total": 1, "parent": id(parent),
        })
    }

    fn answer(value: serde_json::Value) -> GraphAnswer {
        serde_json::from_value(value).expect("a graph answer")
    }

    #[test]
    fn callers_draw_each_unit_under_the_one_it_was_reached_from_sites_first() {
        let mut deep = node(3, "c.py", 30, "c", 2, 1);
        deep["sites"] = json!(["c.py:31:4", "c.py:32:4"]);
        deep["sites_total"] = json!(5);
        let a = answer(json!({
            "op": "callers", "target": handle(0, "t.py", 1, "t"),
            "nodes": [node(1, "a.py", 10, "a", 1, 0), node(2, "b.py", 20, "b", 1, 0), deep],
            "unresolved_count": 0, "total": 3, "truncated": false,
        }));
        let text = text(&a, &Links::plain());
        let expected = format!(
            "callers of t\n\
             t.py:1  def t():\n\
             ├─ a.py:10  a  [call scope 100%]  {a}\n\
             │  ├─ a.py:11:4  call site\n\
             │  └─ c.py:30  c  [call scope 100%]  {c}\n\
             │     ├─ c.py:31:4  call site\n\
             │     ├─ c.py:32:4  call site\n\
             │     └─ … 3 more sites\n\
             └─ b.py:20  b  [call scope 100%]  {b}\n\
             \x20  └─ b.py:21:4  call site",
            a = id(1),
            b = id(2),
            c = id(3)
        );
        assert_eq!(text, expected);
    }

    #[test]
    fn a_unit_reached_by_a_resolved_and_an_ambiguous_edge_shows_both_lines_apart() {
        let mut ambiguous = node(1, "a.py", 10, "a", 1, 0);
        ambiguous["status"] = json!("ambiguous");
        ambiguous["how"] = json!("inferred");
        ambiguous["confidence"] = json!(45);
        ambiguous["sites"] = json!(["a.py:12:4"]);
        let a = answer(json!({
            "op": "callers", "target": handle(0, "t.py", 1, "t"),
            "nodes": [node(1, "a.py", 10, "a", 1, 0), ambiguous],
            "unresolved_count": 0, "total": 1, "truncated": false,
        }));
        let text = text(&a, &Links::plain());
        assert!(
            text.contains(&format!("├─ a.py:10  a  [call scope 100%]  {}\n", id(1))),
            "{text}"
        );
        assert!(
            text.contains(&format!(
                "└─ a.py:10  a  [call inferred 45% ambiguous]  {}\n",
                id(1)
            )),
            "{text}"
        );
    }

    #[test]
    fn a_review_node_reached_from_a_direct_user_names_it() {
        let mut review = node(2, "b.py", 20, "b", 2, 1);
        review["how"] = json!("inherited");
        let a = answer(json!({
            "op": "impact", "target": handle(0, "t.py", 1, "t"),
            "nodes": [node(1, "a.py", 10, "a", 1, 0)], "review": [review],
            "unresolved_count": 0, "total": 2, "truncated": false,
        }));
        let text = text(&a, &Links::plain());
        assert!(
            text.contains(&format!(
                "needs review:\n└─ b.py:20  b  [call inherited 100%]  {}  via a\n",
                id(2)
            )),
            "{text}"
        );
    }

    #[test]
    fn links_wrap_every_location_and_change_nothing_else() {
        let a = answer(json!({
            "op": "callers", "target": handle(0, "t.py", 1, "t"),
            "nodes": [node(1, "a.py", 10, "a", 1, 0)],
            "unresolved": [{"name": "t", "file_path": "u.py", "line": 4, "source_handle": id(9)}],
            "unresolved_count": 1, "total": 1, "truncated": false,
        }));
        let plain = text(&a, &Links::plain());
        let linked = text(&a, &Links::to_files_under("/r".into()));
        for (path, line, shown) in [
            ("t.py", 1, "t.py:1"),
            ("a.py", 10, "a.py:10"),
            ("a.py", 11, "a.py:11:4"),
            ("u.py", 4, "u.py:4"),
        ] {
            let link = format!("\x1b]8;;file:///r/{path}#{line}\x1b\\{shown}\x1b]8;;\x1b\\");
            assert!(linked.contains(&link), "{link:?} in {linked:?}");
        }
        assert_eq!(linked.matches("\x1b]8;;file://").count(), 4);
        assert!(
            plain.contains("unresolved sites (1):\n└─ u.py:4  t"),
            "{plain}"
        );
        assert!(!plain.contains('\x1b'));
    }
}
