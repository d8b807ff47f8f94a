//! The bare `cfg` flags a package's build script turns on in a default
//! build (`println!("cargo:rustc-cfg=wrap_proc_macro")`), read without
//! running it.
//!
//! A build script decides its flags with the compiler's version, probes
//! that compile test programs and environment variables, none of which
//! can be known here. But some flags are printed whatever those say:
//! proc-macro2 prints `wrap_proc_macro` under `proc_macro_span ||
//! !semver_exempt`, where `semver_exempt = cfg!(procmacro2_semver_exempt)`
//! is false unless `RUSTFLAGS` sets it, past `if !cfg!(feature =
//! "proc-macro") { return; }` with `proc-macro` a default feature. The
//! reader here is conservative: `main`'s statements in order, three-valued
//! conditions (`cfg!(…)` with the default features, `true`/`false`, `!`,
//! `&&`, `||`, and `let` names bound to those; anything else is unknown),
//! `if`/`else` and `return`. A flag is on only when every path through
//! `main` that the reader cannot rule out prints it; a flag printed
//! anywhere else (a loop, a `match`, a helper function, a formatted name)
//! stays off, as the walker reads every bare name it does not know.

use std::collections::{BTreeSet, HashMap, HashSet};

use tree_sitter::{Node, Parser};

use crate::facts::rust::{CfgEnv, holds_in};
use crate::lang::Language;

/// Three-valued: `Some(b)` known, `None` unknown.
type Tri = Option<bool>;

/// The rustc version every toolchain that builds a crate today is assumed
/// to reach: 1.56, the release that made edition 2021 stable. Current
/// crates and their dependencies are written for it or later (syn 2,
/// which most of the ecosystem's proc macros pull in, needs 1.56 or
/// newer), so a build script's probe for this version or an older one is
/// true, and one for a newer version stays unknown. Kept low on purpose:
/// a floor too low only leaves a probe unknown, one too high turns a flag
/// on that a real toolchain may not.
const FLOOR: (u64, u64, u64) = (1, 56, 0);

/// Whether the toolchain is at least `asked`: true up to the floor,
/// unknown above.
fn at_least(asked: (u64, u64, u64)) -> Tri {
    (asked <= FLOOR).then_some(true)
}

/// `"1.51.0"`, `"1.51"` as `(1, 51, 0)`.
fn parse_version(s: &str) -> Option<(u64, u64, u64)> {
    let mut parts = s.trim().split('.').map(|p| p.parse::<u64>().ok());
    let major = parts.next()??;
    let minor = parts.next()??;
    let patch = parts.next().unwrap_or(Some(0))?;
    parts.next().is_none().then_some((major, minor, patch))
}

/// `Some(true)` / `Some(false)` as the `bool` inside.
fn some_bool(s: &str) -> Option<bool> {
    match s.split_whitespace().collect::<String>().as_str() {
        "Some(true)" => Some(true),
        "Some(false)" => Some(false),
        _ => None,
    }
}

/// The version `Version::new(1, 51, 0)` or `Version::parse("1.51.0")…`
/// names.
fn requested_version(s: &str) -> Option<(u64, u64, u64)> {
    let s: String = s.split_whitespace().collect();
    let s = s.strip_prefix("rustc_version::").unwrap_or(&s);
    if let Some(rest) = s.strip_prefix("Version::new(") {
        let inner = rest.strip_suffix(')')?;
        let parts: Vec<u64> = inner
            .split(',')
            .map(|p| p.parse().ok())
            .collect::<Option<_>>()?;
        let [major, minor, patch] = parts[..] else {
            return None;
        };
        return Some((major, minor, patch));
    }
    let rest = s.strip_prefix("Version::parse(\"")?;
    let (version, tail) = rest.split_once("\")")?;
    matches!(tail, "" | ".unwrap()" | "?").then_some(())?;
    parse_version(version)
}

/// The bare flags `script` (a build script's text) prints on every path a
/// default build can take, sorted; `default_features`: the package's
/// features a default build turns on (`[features] default`, followed).
pub fn build_flags(script: &str, default_features: &[String]) -> Vec<String> {
    let mut parser = Parser::new();
    let Some(spec) = Language::Rust.spec() else {
        return Vec::new();
    };
    if parser.set_language(&spec.grammar).is_err() {
        return Vec::new();
    }
    let Some(tree) = parser.parse(script, None) else {
        return Vec::new();
    };
    let root = tree.root_node();
    let mut c = root.walk();
    let Some(body) = root
        .named_children(&mut c)
        .filter(|n| n.kind() == "function_item")
        .find(|f| {
            f.child_by_field_name("name")
                .is_some_and(|n| &script[n.byte_range()] == "main")
        })
        .and_then(|f| f.child_by_field_name("body"))
    else {
        return Vec::new();
    };
    let reader = Reader {
        text: script,
        features: default_features,
        assigned: assigned_names(script, body),
    };
    let end = reader.block(body, &HashMap::new(), BTreeSet::new());
    // Every path ends by falling off `main` or by a `return`.
    let on = match (end.fall, end.exits) {
        (Some(a), Some(b)) => a.intersection(&b).cloned().collect(),
        (Some(a), None) | (None, Some(a)) => a,
        (None, None) => BTreeSet::new(),
    };
    on.into_iter().collect()
}

/// Where the paths through a block go, each set the flags printed on every
/// path of its kind (`None`: no such path).
struct Paths {
    /// The paths that reach the block's end.
    fall: Option<BTreeSet<String>>,
    /// The paths that `return` inside it.
    exits: Option<BTreeSet<String>>,
}

/// The flags printed on every path of two groups (`None`: no path).
fn meet(a: Option<BTreeSet<String>>, b: Option<BTreeSet<String>>) -> Option<BTreeSet<String>> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.intersection(&b).cloned().collect()),
        (a, None) => a,
        (None, b) => b,
    }
}

/// Names assigned after their `let` (`proc_macro_span = true;` in a
/// branch): their value is unknown everywhere.
fn assigned_names(text: &str, body: Node) -> HashSet<String> {
    let mut out = HashSet::new();
    let mut stack = vec![body];
    while let Some(n) = stack.pop() {
        if matches!(
            n.kind(),
            "assignment_expression" | "compound_assignment_expr"
        ) && let Some(left) = n.child_by_field_name("left")
        {
            out.insert(text[left.byte_range()].to_string());
        }
        let mut c = n.walk();
        stack.extend(n.named_children(&mut c));
    }
    out
}

/// The reader of one build script's `main`.
struct Reader<'a> {
    text: &'a str,
    features: &'a [String],
    assigned: HashSet<String>,
}

impl Reader<'_> {
    fn t(&self, n: Node) -> &str {
        &self.text[n.byte_range()]
    }

    /// The paths through `block`, entered on paths that printed `must`.
    fn block(&self, block: Node, outer: &HashMap<String, Tri>, must: BTreeSet<String>) -> Paths {
        let mut env = outer.clone();
        let mut paths = Paths {
            fall: Some(must),
            exits: None,
        };
        let mut c = block.walk();
        for stmt in block.named_children(&mut c) {
            let Some(fall) = paths.fall.take() else {
                break;
            };
            let inner = match stmt.kind() {
                "expression_statement" => stmt.named_child(0).unwrap_or(stmt),
                _ => stmt,
            };
            let step = self.statement(inner, &mut env, fall);
            paths.fall = step.fall;
            paths.exits = meet(paths.exits.take(), step.exits);
        }
        paths
    }

    /// The paths through one statement (or expression), entered on paths
    /// that printed `must`.
    fn statement(&self, n: Node, env: &mut HashMap<String, Tri>, must: BTreeSet<String>) -> Paths {
        let through = |fall| Paths { fall, exits: None };
        match n.kind() {
            "let_declaration" => {
                let value = n
                    .child_by_field_name("value")
                    .and_then(|v| self.condition(v, env));
                if let Some(p) = n.child_by_field_name("pattern")
                    && p.kind() == "identifier"
                {
                    let name = self.t(p).to_string();
                    let value = if self.assigned.contains(&name) {
                        None
                    } else {
                        value
                    };
                    env.insert(name, value);
                }
                self.opaque(n, must)
            }
            "macro_invocation" => {
                let mut must = must;
                if let Some(flag) = self.printed_flag(n) {
                    must.insert(flag);
                }
                through(Some(must))
            }
            "return_expression" => Paths {
                fall: None,
                exits: Some(must),
            },
            "block" => self.block(n, env, must),
            "if_expression" => self.if_(n, env, must),
            "line_comment" | "block_comment" | "empty_statement" => through(Some(must)),
            _ => self.opaque(n, must),
        }
    }

    /// `if c { … } else { … }`: a known condition takes one branch; an
    /// unknown one both, and the paths of each are kept.
    fn if_(&self, n: Node, env: &HashMap<String, Tri>, must: BTreeSet<String>) -> Paths {
        let condition = n
            .child_by_field_name("condition")
            .and_then(|c| self.condition(c, env));
        let then = n.child_by_field_name("consequence");
        let otherwise = n
            .child_by_field_name("alternative")
            .and_then(|e| e.named_child(0));
        let branch = |b: Option<Node>, must: BTreeSet<String>| match b {
            Some(b) => {
                let mut env = env.clone();
                self.statement(b, &mut env, must)
            }
            None => Paths {
                fall: Some(must),
                exits: None,
            },
        };
        match condition {
            Some(true) => branch(then, must),
            Some(false) => branch(otherwise, must),
            None => {
                let a = branch(then, must.clone());
                let b = branch(otherwise, must);
                Paths {
                    fall: meet(a.fall, b.fall),
                    exits: meet(a.exits, b.exits),
                }
            }
        }
    }

    /// A statement the reader does not follow: what it prints is not
    /// counted; a `return` in it (not in a closure or nested function)
    /// may end the path.
    fn opaque(&self, n: Node, must: BTreeSet<String>) -> Paths {
        let mut stack = vec![n];
        let mut returns = false;
        while let Some(k) = stack.pop() {
            match k.kind() {
                "return_expression" => returns = true,
                "closure_expression" | "function_item" => continue,
                _ => {}
            }
            let mut c = k.walk();
            stack.extend(k.named_children(&mut c));
        }
        Paths {
            exits: returns.then(|| must.clone()),
            fall: Some(must),
        }
    }

    /// A condition's value in a default build.
    fn condition(&self, n: Node, env: &HashMap<String, Tri>) -> Tri {
        match n.kind() {
            "parenthesized_expression" => self.condition(n.named_child(0)?, env),
            "boolean_literal" => Some(self.t(n) == "true"),
            "identifier" => env.get(self.t(n)).copied().flatten(),
            "unary_expression" if self.t(n).starts_with('!') => {
                self.condition(n.named_child(0)?, env).map(|v| !v)
            }
            "binary_expression" => {
                if let Some(v) = self.probe_comparison(n) {
                    return v;
                }
                let op = n.child_by_field_name("operator")?;
                let left = self.condition(n.child_by_field_name("left")?, env);
                let right = self.condition(n.child_by_field_name("right")?, env);
                match self.t(op) {
                    "&&" if left == Some(false) || right == Some(false) => Some(false),
                    "&&" => Some(left? && right?),
                    "||" if left == Some(true) || right == Some(true) => Some(true),
                    "||" => Some(left? || right?),
                    _ => None,
                }
            }
            "call_expression" | "let_condition" => self.probe_test(n),
            "macro_invocation" if self.macro_name(n) == Some("cfg") => {
                let args = self.t(n.named_child(1)?);
                let predicate = args.strip_prefix('(')?.strip_suffix(')')?;
                let env = CfgEnv {
                    features: Some(self.features),
                    build_script: true,
                    ..CfgEnv::default()
                };
                holds_in(predicate, &env).flatten()
            }
            _ => None,
        }
    }

    /// A `bool` read from a compiler probe: `probe(…).unwrap_or(b)`,
    /// `if let Some(true) = probe(…)`, autocfg's `probe_rustc_version`.
    fn probe_test(&self, n: Node) -> Tri {
        if n.kind() == "let_condition" {
            let want = some_bool(self.t(n.child_by_field_name("pattern")?))?;
            return self
                .option_probe(n.child_by_field_name("value")?)
                .map(|v| v == want);
        }
        let function = n.child_by_field_name("function")?;
        let args = n.child_by_field_name("arguments")?;
        if function.kind() != "field_expression" {
            return None;
        }
        let method = self.t(function.child_by_field_name("field")?);
        let receiver = function.child_by_field_name("value")?;
        match method {
            // `None` only when rustc cannot be run, and then nothing builds.
            "unwrap_or" => self.option_probe(receiver),
            "probe_rustc_version" => {
                let mut c = args.walk();
                let parts: Vec<u64> = args
                    .named_children(&mut c)
                    .map(|a| self.t(a).parse().ok())
                    .collect::<Option<_>>()?;
                let [major, minor] = parts[..] else {
                    return None;
                };
                at_least((major, minor, 0))
            }
            _ => None,
        }
    }

    /// What the `Option<bool>` a version_check probe returns holds once
    /// rustc has answered, on the assumed toolchain ([`FLOOR`], stable).
    fn option_probe(&self, n: Node) -> Tri {
        if n.kind() != "call_expression" {
            return None;
        }
        let path = self.t(n.child_by_field_name("function")?);
        let name = path.strip_prefix("version_check::")?;
        let args = n.child_by_field_name("arguments")?;
        let version = || {
            let arg = self.t(args.named_child(0)?);
            parse_version(arg.strip_prefix('"')?.strip_suffix('"')?)
        };
        match name {
            "is_min_version" => at_least(version()?),
            // Older than the floor: the toolchain is newer.
            "is_max_version" | "is_exact_version" => (version()? < FLOOR).then_some(false),
            // A stable toolchain: no `#![feature]`, not nightly.
            "is_feature_flaggable" | "supports_feature" => Some(false),
            _ => None,
        }
    }

    /// `probe == Some(true)`, `rustc_version::version_meta()?.channel ==
    /// Channel::Nightly`, `rustc_version::version().unwrap() >=
    /// Version::new(1, 51, 0)`: `Some` when `n` is such a comparison.
    fn probe_comparison(&self, n: Node) -> Option<Tri> {
        let op = self.t(n.child_by_field_name("operator")?);
        let left = n.child_by_field_name("left")?;
        let right = n.child_by_field_name("right")?;
        let (l, r) = (self.t(left), self.t(right));
        let negate = |v: Tri, op: &str| match op {
            "==" => Some(v),
            "!=" => Some(v.map(|v| !v)),
            _ => None,
        };
        if let Some(want) = some_bool(r) {
            let probe = left.kind() == "call_expression" && l.starts_with("version_check::");
            return probe.then(|| negate(self.option_probe(left).map(|v| v == want), op))?;
        }
        if l.ends_with(".channel") && self.text.contains("rustc_version") {
            let stable = match r.rsplit("::").next()? {
                "Stable" => true,
                "Nightly" | "Beta" | "Dev" => false,
                _ => return None,
            };
            return negate(Some(stable), op);
        }
        let reads_rustc = l.starts_with("rustc_version::version()")
            || (l.starts_with("version()") && self.text.contains("rustc_version"));
        if !reads_rustc {
            return None;
        }
        let asked = requested_version(r)?;
        Some(match op {
            ">=" => at_least(asked),
            ">" => (asked < FLOOR).then_some(true),
            "<" => (asked <= FLOOR).then_some(false),
            "<=" => (asked < FLOOR).then_some(false),
            _ => return None,
        })
    }

    /// A macro invocation's name (`println`, `std::println` as `println`).
    fn macro_name(&self, n: Node) -> Option<&str> {
        let name = self.t(n.child_by_field_name("macro")?);
        Some(name.rsplit("::").next().unwrap_or(name))
    }

    /// The bare flag a `println!("cargo:rustc-cfg=NAME")` (or
    /// `cargo::rustc-cfg=`) prints; not a formatted name nor `key="value"`.
    fn printed_flag(&self, n: Node) -> Option<String> {
        if self.macro_name(n) != Some("println") {
            return None;
        }
        let args = self.t(n.named_child(1)?).trim();
        let inner = args.strip_prefix('(')?.strip_suffix(')')?.trim();
        let s = inner.strip_prefix('"')?.strip_suffix('"')?;
        let name = s
            .strip_prefix("cargo:rustc-cfg=")
            .or_else(|| s.strip_prefix("cargo::rustc-cfg="))?;
        let plain = !name.is_empty()
            && name.chars().all(|c| c.is_alphanumeric() || c == '_')
            && !name.starts_with(|c: char| c.is_ascii_digit());
        plain.then(|| name.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags(script: &str, features: &[&str]) -> Vec<String> {
        let features: Vec<String> = features.iter().map(|f| f.to_string()).collect();
        build_flags(script, &features)
    }

    #[test]
    fn a_flag_is_on_when_every_path_a_default_build_takes_prints_it() {
        // proc-macro2's shape: a RUSTFLAGS-only cfg, an early return on a
        // default feature, a probe's unknown result under `||`.
        let script = r#"
fn main() {
    let rustc = rustc_minor_version().unwrap_or(u32::MAX);
    let semver_exempt = cfg!(procmacro2_semver_exempt);
    if semver_exempt {
        println!("cargo:rustc-cfg=procmacro2_semver_exempt");
    }
    if semver_exempt || cfg!(feature = "span-locations") {
        println!("cargo:rustc-cfg=span_locations");
    }
    if rustc < 57 {
        println!("cargo:rustc-cfg=no_is_available");
    }
    if !cfg!(feature = "proc-macro") {
        println!("cargo:rerun-if-changed=build.rs");
        return;
    }
    let proc_macro_span;
    if probe("proc_macro_span") {
        proc_macro_span = true;
    } else if let Some(b) = env::var_os("RUSTC_BOOTSTRAP") {
        proc_macro_span = b == "1";
    } else {
        proc_macro_span = false;
    }
    if proc_macro_span || !semver_exempt {
        println!("cargo:rustc-cfg=wrap_proc_macro");
    }
    if proc_macro_span {
        println!("cargo::rustc-cfg=proc_macro_span");
    }
    println!("cargo::rustc-cfg=always");
    println!("cargo:rustc-cfg=fast=\"64\"");
}
"#;
        assert_eq!(
            flags(script, &["proc-macro"]),
            ["always", "wrap_proc_macro"]
        );
        // Without the default feature the early return may be taken:
        // only what is printed before it on every path is on.
        assert_eq!(flags(script, &[]), Vec::<String>::new());
    }

    #[test]
    fn unknown_paths_keep_a_flag_off_unless_each_prints_it() {
        let script = r#"
fn main() {
    let nightly = env::var_os("NIGHTLY").is_some();
    if nightly {
        println!("cargo:rustc-cfg=a");
        println!("cargo:rustc-cfg=b");
    } else {
        println!("cargo:rustc-cfg=b");
    }
    for f in ["c"] {
        println!("cargo:rustc-cfg=c");
    }
    let d = true;
    if d && cfg!(unix) {
        println!("cargo:rustc-cfg=d");
    }
    if cfg!(windows) || cfg!(feature = "extra") {
        println!("cargo:rustc-cfg=e");
    }
    emit("f");
    match version() {
        Some(_) => return,
        None => {}
    }
    println!("cargo:rustc-cfg=g");
}
fn emit(name: &str) {
    println!("cargo:rustc-cfg={}", name);
}
"#;
        // `g` may be skipped by the `return` in the `match`.
        assert_eq!(flags(script, &[]), ["b", "d"]);
        // A script without `main`, or not Rust: nothing.
        assert_eq!(flags("fn other() {}", &[]), Vec::<String>::new());
        assert_eq!(flags("not rust {", &[]), Vec::<String>::new());
    }

    #[test]
    fn version_probes_read_against_the_assumed_toolchain() {
        // slotmap's shape: version_check probes read through `unwrap_or`
        // and `== Some(true)`; a nightly probe is false on stable.
        let script = r#"
fn main() {
    let is_nightly = version_check::is_feature_flaggable() == Some(true);
    let is_at_least_1_49 = version_check::is_min_version("1.49.0").unwrap_or(false);
    let is_at_least_1_51 = version_check::is_min_version("1.51.0").unwrap_or(false);
    if !is_at_least_1_49 {
        println!("cargo:warning=needs 1.49");
        return;
    }
    if is_at_least_1_51 || is_nightly {
        println!("cargo:rustc-cfg=has_min_const_generics");
    }
    if is_nightly {
        println!("cargo:rustc-cfg=nightly");
    }
    if version_check::is_min_version("9.0.0").unwrap_or(true) {
        println!("cargo:rustc-cfg=future");
    }
    if version_check::is_max_version("1.40.0") == Some(true) {
        println!("cargo:rustc-cfg=ancient");
    }
    if version_check::is_max_version("1.99.0").unwrap_or(false) {
        println!("cargo:rustc-cfg=maybe_old");
    }
    if let Some(true) = version_check::is_min_version("1.36") {
        println!("cargo:rustc-cfg=let_probe");
    }
    if version_check::supports_feature("never_type").unwrap_or(false) {
        println!("cargo:rustc-cfg=never");
    }
}
"#;
        assert_eq!(flags(script, &[]), ["has_min_const_generics", "let_probe"]);
    }

    #[test]
    fn autocfg_and_rustc_version_probes_read_the_same_way() {
        let script = r#"
use rustc_version::{version, version_meta, Channel, Version};
fn main() {
    let ac = autocfg::new();
    if ac.probe_rustc_version(1, 51) {
        println!("cargo:rustc-cfg=autocfg_old");
    }
    if ac.probe_rustc_version(1, 200) {
        println!("cargo:rustc-cfg=autocfg_new");
    }
    if version().unwrap() >= Version::parse("1.26.0").unwrap() {
        println!("cargo:rustc-cfg=rv_parse");
    }
    if rustc_version::version().unwrap() < Version::new(1, 40, 0) {
        println!("cargo:rustc-cfg=rv_below");
    }
    if rustc_version::version().unwrap() >= Version::new(1, 90, 0) {
        println!("cargo:rustc-cfg=rv_new");
    }
    if version_meta().unwrap().channel == Channel::Nightly {
        println!("cargo:rustc-cfg=rv_nightly");
    }
    if version_meta().unwrap().channel != Channel::Nightly {
        println!("cargo:rustc-cfg=rv_stable");
    }
}
"#;
        assert_eq!(flags(script, &[]), ["autocfg_old", "rv_parse", "rv_stable"]);
        // Unknown stays unknown: another crate's function, a bare
        // `unwrap_or` default.
        let other = r#"
fn main() {
    if other::is_min_version("1.0.0").unwrap_or(false) {
        println!("cargo:rustc-cfg=other");
    }
}
"#;
        assert_eq!(flags(other, &[]), Vec::<String>::new());
    }
}
