//! The code-graph subcommands (`canopy callers Parser.parse --depth 2`, …):
//! a thin translation of [`canopy_core::graph::nav`] answers into human
//! text, JSON (`--json`), DOT or Mermaid (`--format dot|mermaid`).

use std::fmt::Write as _;

use anyhow::Context;
use canopy_core::Engine;
use canopy_core::graph::nav::{DEFAULT_MAX_RESULTS, Empty, GraphAnswer, MAX_RESULTS};
use canopy_core::graph::ops::{DepAnswer, Level};
use canopy_core::index::NoProgress;
use clap::{Args, Subcommand, ValueEnum};

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
    /// The definition a name at FILE:LINE:COL resolves to (COL 0-based).
    Definition {
        /// `path:line:col`.
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
    },
    /// Dependency cycles between files (or packages, --package), Tarjan SCC.
    Cycles {
        /// Packages (directories) instead of files.
        #[arg(long)]
        package: bool,
    },
    /// Definitions nothing resolved uses (candidates; tests, entry points and public API left out).
    Unused {
        /// Include public (exported) definitions.
        #[arg(long)]
        include_public: bool,
        /// Most candidates.
        #[arg(long, default_value_t = DEFAULT_MAX_RESULTS)]
        max_results: usize,
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
    },
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
}

fn level(package: bool) -> Level {
    if package { Level::Package } else { Level::File }
}

fn print_json<T: serde::Serialize>(v: &T) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(v)?);
    Ok(())
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

/// Runs the whole-graph commands; `None` when `cmd` is a navigation command.
fn run_ops(engine: &Engine, cmd: &GraphCommand, json: bool) -> anyhow::Result<bool> {
    match cmd {
        GraphCommand::Dependencies(a) | GraphCommand::Dependents(a) => {
            let outgoing = matches!(cmd, GraphCommand::Dependencies(_));
            let ans = engine.graph(|g| {
                if outgoing {
                    g.dependencies(&a.target, level(a.package), a.max_results)
                } else {
                    g.dependents(&a.target, level(a.package), a.max_results)
                }
            })?;
            if json {
                print_json(&ans)?
            } else {
                println!("{}", dep_text(&ans, Format::Text))
            }
        }
        GraphCommand::DependencyGraph {
            prefix,
            package,
            max_results,
            format,
        } => {
            let ans = engine
                .graph(|g| g.dependency_graph(level(*package), prefix.as_deref(), *max_results))?;
            if json {
                print_json(&ans)?
            } else {
                println!("{}", dep_text(&ans, *format))
            }
        }
        GraphCommand::Cycles { package } => {
            let ans = engine.graph(|g| g.circular_dependencies(level(*package), MAX_RESULTS))?;
            if json {
                print_json(&ans)?
            } else if ans.cycles.is_empty() {
                println!("no cycles");
            } else {
                for c in &ans.cycles {
                    println!("cycle ({}): {}", c.len(), c.join(" -> "));
                }
            }
        }
        GraphCommand::Symbols(a) => {
            let filter = a.filter();
            let ans = engine.graph(|g| g.symbols("symbols", &filter, a.max_results))?;
            print_symbols(&ans, json)?
        }
        GraphCommand::Search { pattern, filter } => {
            let mut f = filter.filter();
            f.name = Some(pattern.clone());
            let ans = engine.graph(|g| g.symbols("search", &f, filter.max_results))?;
            print_symbols(&ans, json)?
        }
        GraphCommand::Summary { file } => {
            let ans = engine.graph(|g| g.summary("summary", file, DEFAULT_MAX_RESULTS))?;
            print_summary(&ans, json)?
        }
        GraphCommand::PackageSummary { dir } => {
            let ans = engine.graph(|g| g.summary("package_summary", dir, DEFAULT_MAX_RESULTS))?;
            print_summary(&ans, json)?
        }
        GraphCommand::Hotspots { top } => {
            let ans = engine.graph(|g| g.hotspots(*top))?;
            if json {
                print_json(&ans)?
            } else {
                for h in &ans.hotspots {
                    println!(
                        "{:>4} in {:>4} out  {}  {}:{}  {}",
                        h.fan_in,
                        h.fan_out,
                        h.qualified_name.as_deref().unwrap_or(&h.handle.node_type),
                        h.handle.file_path,
                        h.handle.line_range[0],
                        h.handle.id
                    );
                }
            }
        }
        GraphCommand::Unused {
            include_public,
            max_results,
        } => {
            let ans = engine.graph(|g| g.unused_symbols(*include_public, *max_results))?;
            if json {
                print_json(&ans)?
            } else {
                for h in &ans.candidates {
                    println!(
                        "{}:{}  {}  {}",
                        h.file_path, h.line_range[0], h.id, h.preview
                    );
                }
                println!(
                    "{} candidates; {} more left out because unresolved call sites share their name",
                    ans.total, ans.maybe_used
                );
            }
        }
        _ => return Ok(false),
    }
    Ok(true)
}

/// A target and a result cap.
#[derive(Args, Debug)]
pub struct TargetArgs {
    /// `Type.method`, `Type::method`, `pkg.Name`, `file.py:Type.method`, a path, or `path:line:col`.
    pub target: String,
    /// Most nodes in the answer.
    #[arg(long, default_value_t = DEFAULT_MAX_RESULTS)]
    pub max_results: usize,
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
fn symbol_line(e: &canopy_core::graph::ops::SymbolEntry) -> String {
    format!(
        "{:>5} refs  {}  {}:{}  {}{}",
        e.refs,
        e.qualified_name.as_deref().unwrap_or(&e.handle.node_type),
        e.handle.file_path,
        e.handle.line_range[0],
        e.handle.id,
        if e.exported { "" } else { "  (private)" }
    )
}

fn print_symbols(ans: &canopy_core::graph::ops::SymbolsAnswer, json: bool) -> anyhow::Result<()> {
    if json {
        return print_json(ans);
    }
    for e in &ans.symbols {
        println!("{}", symbol_line(e));
    }
    match ans.next_offset {
        Some(next) => println!(
            "{} of {}; next page: --offset {next}",
            ans.symbols.len(),
            ans.total
        ),
        None => println!("{} of {}", ans.symbols.len(), ans.total),
    }
    Ok(())
}

fn print_summary(a: &canopy_core::graph::ops::SummaryAnswer, json: bool) -> anyhow::Result<()> {
    if json {
        return print_json(a);
    }
    if a.empty.is_some() {
        println!("{}: nothing indexed under {}", a.op, a.target);
        return Ok(());
    }
    let list = |m: &std::collections::BTreeMap<String, usize>| {
        m.iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    println!("{}: {} files, {} tokens", a.target, a.files, a.tokens);
    println!("  languages: {}", list(&a.languages));
    println!("  units: {}", list(&a.units_by_kind));
    for s in &a.top_symbols {
        println!("  {}", symbol_line(s));
    }
    let names = |v: &[canopy_core::graph::ops::DepNode]| {
        v.iter()
            .map(|d| d.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    println!("  depends on: {}", names(&a.dependencies));
    println!("  used by: {}", names(&a.dependents));
    Ok(())
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

/// Runs one graph command (indexing first when the repository has no index).
pub fn run(engine: &Engine, cmd: GraphCommand, json: bool) -> anyhow::Result<()> {
    if !engine.is_indexed()? {
        engine.index(None, &NoProgress)?;
    }
    if run_ops(engine, &cmd, json)? {
        return Ok(());
    }
    let (answer, format) = match cmd {
        GraphCommand::Callers(a) => (
            engine.graph(|g| g.callers(&a.target.target, a.depth, a.target.max_results))?,
            a.format,
        ),
        GraphCommand::Callees(a) => (
            engine.graph(|g| g.callees(&a.target.target, a.depth, a.target.max_results))?,
            a.format,
        ),
        GraphCommand::References(a) => (
            engine.graph(|g| g.references(&a.target, a.max_results))?,
            Format::Text,
        ),
        GraphCommand::TypeUsages(a) => (
            engine.graph(|g| g.type_usages(&a.target, a.max_results))?,
            Format::Text,
        ),
        GraphCommand::Definition { position } => {
            let (path, line, col) = parse_position(&position)?;
            (
                engine.graph(|g| g.definition(path, line, col))?,
                Format::Text,
            )
        }
        GraphCommand::Path { from, to } => (engine.graph(|g| g.path(&from, &to))?, Format::Text),
        GraphCommand::Implementations(a) => (
            engine.graph(|g| g.implementations(&a.target, a.max_results))?,
            Format::Text,
        ),
        GraphCommand::Implements(a) => (
            engine.graph(|g| g.implements(&a.target, a.max_results))?,
            Format::Text,
        ),
        GraphCommand::TypeHierarchy(a) => (
            engine.graph(|g| g.type_hierarchy(&a.target.target, a.depth, a.target.max_results))?,
            a.format,
        ),
        GraphCommand::Impact(a) => (
            engine.graph(|g| g.impact(&a.target, a.max_results))?,
            Format::Text,
        ),
        GraphCommand::Detail(a) => (
            engine.graph(|g| g.detail(&a.target, a.max_results))?,
            Format::Text,
        ),
        GraphCommand::Scope { position } => {
            let (path, line, _) = canopy_core::graph::request::parse_position(&position)
                .with_context(|| format!("expected FILE:LINE[:COL], got {position:?}"))?;
            (engine.graph(|g| g.scope(path, line))?, Format::Text)
        }
        _ => anyhow::bail!("unhandled graph command"),
    };
    let out = if json {
        serde_json::to_string_pretty(&answer)?
    } else {
        match format {
            Format::Text => text(&answer),
            Format::Dot => dot(&answer),
            Format::Mermaid => mermaid(&answer),
        }
    };
    println!("{out}");
    Ok(())
}

fn parse_position(position: &str) -> anyhow::Result<(&str, u32, u32)> {
    let mut it = position.rsplitn(3, ':');
    let (Some(col), Some(line), Some(path)) = (it.next(), it.next(), it.next()) else {
        anyhow::bail!("expected FILE:LINE:COL, got {position:?}");
    };
    let line = line
        .parse()
        .with_context(|| format!("bad line in {position:?}"))?;
    let col = col
        .parse()
        .with_context(|| format!("bad column in {position:?}"))?;
    Ok((path, line, col))
}

fn label(qualified: Option<&str>, path: &str, line: u32) -> String {
    match qualified {
        Some(q) => format!("{q} ({path}:{line})"),
        None => format!("{path}:{line}"),
    }
}

fn text(a: &GraphAnswer) -> String {
    let mut s = String::new();
    if !a.candidates.is_empty() {
        let _ = writeln!(
            s,
            "ambiguous target: {} candidates (use a longer name or path:line):",
            a.total
        );
        for c in &a.candidates {
            let _ = writeln!(
                s,
                "  {}  {}:{}  {}",
                c.id, c.file_path, c.line_range[0], c.preview
            );
        }
        return s.trim_end().to_string();
    }
    if let Some(t) = &a.target {
        let _ = writeln!(
            s,
            "{} of {}:{}  {}",
            a.op, t.file_path, t.line_range[0], t.preview
        );
    }
    if let Some(d) = &a.detail {
        let _ = writeln!(s, "  signature: {}", d.signature);
        if !d.parameters.is_empty() {
            let _ = writeln!(s, "  parameters: {}", d.parameters.join(" | "));
        }
        let _ = writeln!(
            s,
            "  callers: {}  callees: {}  references: {}  members: {}",
            d.callers, d.callees, d.references, d.members
        );
    }
    for n in &a.nodes {
        let _ = writeln!(
            s,
            "{}{}  {}:{}-{}  {}  [{} {} {}%]",
            "  ".repeat(n.depth as usize),
            n.qualified_name.as_deref().unwrap_or(&n.handle.node_type),
            n.handle.file_path,
            n.handle.line_range[0],
            n.handle.line_range[1],
            n.handle.id,
            n.edge_kind,
            n.how,
            n.confidence
        );
    }
    if !a.review.is_empty() {
        s.push_str("needs review:\n");
        for n in &a.review {
            let _ = writeln!(
                s,
                "  {}  {}:{}  {}  [{} {}%]",
                n.qualified_name.as_deref().unwrap_or(&n.handle.node_type),
                n.handle.file_path,
                n.handle.line_range[0],
                n.handle.id,
                n.how,
                n.confidence
            );
        }
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
    if a.unresolved_count > 0 && a.empty.is_none() {
        let _ = writeln!(s, "({} unresolved sites)", a.unresolved_count);
    }
    if a.truncated {
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

/// Edges as (from, to): callers point at what they call.
fn drawn_edges(a: &GraphAnswer) -> Vec<(String, String)> {
    let incoming = a.op == "callers" || a.op == "references" || a.op == "type_usages";
    a.nodes
        .iter()
        .filter_map(|n| {
            let p = n.parent.as_ref()?.to_string();
            let me = n.handle.id.to_string();
            Some(if incoming { (me, p) } else { (p, me) })
        })
        .collect()
}

fn dot(a: &GraphAnswer) -> String {
    let mut s = String::from("digraph canopy {\n  rankdir=LR;\n");
    for (id, l) in node_labels(a) {
        let _ = writeln!(s, "  \"{id}\" [label=\"{}\"];", l.replace('"', "\\\""));
    }
    for (f, t) in drawn_edges(a) {
        let _ = writeln!(s, "  \"{f}\" -> \"{t}\";");
    }
    s.push('}');
    s
}

fn mermaid(a: &GraphAnswer) -> String {
    let mut s = String::from("flowchart LR\n");
    for (id, l) in node_labels(a) {
        let _ = writeln!(s, "  {id}[\"{}\"]", l.replace('"', "'"));
    }
    for (f, t) in drawn_edges(a) {
        let _ = writeln!(s, "  {f} --> {t}");
    }
    s.trim_end().to_string()
}
