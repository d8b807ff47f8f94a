//! The code-graph subcommands (`canopy callers Parser.parse --depth 2`, …):
//! a thin translation of [`canopy_core::graph::nav`] answers into human
//! text, JSON (`--json`), DOT or Mermaid (`--format dot|mermaid`).

use std::fmt::Write as _;

use anyhow::Context;
use canopy_core::Engine;
use canopy_core::graph::nav::{DEFAULT_MAX_RESULTS, Empty, GraphAnswer};
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
}

/// A target and a result cap.
#[derive(Args, Debug)]
pub struct TargetArgs {
    /// `Type.method`, `Type::method`, `pkg.Name`, a path, or `path:line:col`.
    pub target: String,
    /// Most nodes in the answer.
    #[arg(long, default_value_t = DEFAULT_MAX_RESULTS)]
    pub max_results: usize,
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
