//! Rust: which facts a file states, and how its modules are named.
//!
//! Facts: calls (`f()`, `a.f()`, `A::f()`, turbofish, and `f(` / `a.f(`
//! inside macro arguments), other path and identifier uses, type
//! references, `use` trees (`self`, `super`, `crate`, aliases, globs),
//! `let` bindings (`let p = Parser::new()`, `let p: T`), typed parameters,
//! struct fields, return types, `impl Trait for Type`, supertraits.

use tree_sitter::Node;

use crate::graph::facts::{Cx, DefFactKind, SiteKind, walk_tree};

/// Smart pointers a method call sees through (`Box<T>` → `T`).
const TRANSPARENT: &[&str] = &["Box", "Rc", "Arc", "RefCell", "Cow", "Pin", "ManuallyDrop"];

fn path_text(cx: &Cx, n: Node) -> String {
    cx.t(n)
        .split_whitespace()
        .collect::<String>()
        .replace("::", ".")
}

/// The normalised expression of a value node.
pub(crate) fn expr(cx: &Cx, n: Node) -> Option<String> {
    match n.kind() {
        "identifier" | "self" | "crate" | "super" => Some(cx.t(n).to_string()),
        "field_expression" => {
            let v = expr(cx, n.child_by_field_name("value")?)?;
            Some(format!("{v}.{}", cx.t(n.child_by_field_name("field")?)))
        }
        "call_expression" => Some(format!(
            "{}()",
            expr(cx, n.child_by_field_name("function")?)?
        )),
        "scoped_identifier" => {
            let name = cx.t(n.child_by_field_name("name")?);
            match n.child_by_field_name("path") {
                Some(p) => Some(format!("{}.{name}", scoped_path(cx, p)?)),
                None => Some(name.to_string()),
            }
        }
        "generic_function" => expr(cx, n.child_by_field_name("function")?),
        "struct_expression" => {
            let name = n.child_by_field_name("name")?;
            Some(format!("{}()", type_expr(cx, name)?))
        }
        "reference_expression" => expr(cx, n.child_by_field_name("value")?),
        "try_expression" | "parenthesized_expression" | "unary_expression" => {
            expr(cx, n.named_child(0)?)
        }
        "await_expression" => expr(cx, n.named_child(0)?),
        _ => None,
    }
}

fn scoped_path(cx: &Cx, p: Node) -> Option<String> {
    match p.kind() {
        "self" => Some("self_mod".to_string()),
        "identifier" | "crate" | "super" | "type_identifier" => Some(cx.t(p).to_string()),
        "scoped_identifier" | "scoped_type_identifier" => {
            expr(cx, p).or_else(|| Some(path_text(cx, p)))
        }
        "generic_type" => type_expr(cx, p),
        _ => Some(path_text(cx, p)).filter(|s| {
            s.chars()
                .all(|c| c.is_alphanumeric() || c == '_' || c == '.')
        }),
    }
}

/// The normalised name of a type node (`&mut Box<Foo<T>>` → `Foo`).
pub(crate) fn type_expr(cx: &Cx, n: Node) -> Option<String> {
    match n.kind() {
        "type_identifier" | "identifier" => Some(cx.t(n).to_string()),
        "scoped_type_identifier" | "scoped_identifier" => {
            let name = cx.t(n.child_by_field_name("name")?);
            match n.child_by_field_name("path") {
                Some(p) => Some(format!("{}.{name}", scoped_path(cx, p)?)),
                None => Some(name.to_string()),
            }
        }
        "generic_type" => {
            let t = n.child_by_field_name("type")?;
            let name = type_expr(cx, t)?;
            if TRANSPARENT.contains(&name.as_str())
                && let Some(args) = n.child_by_field_name("type_arguments")
                && let Some(first) = args.named_child(0)
            {
                return type_expr(cx, first);
            }
            Some(name)
        }
        "reference_type" | "pointer_type" => type_expr(cx, n.child_by_field_name("type")?),
        "abstract_type" | "dynamic_type" => {
            let t = n
                .child_by_field_name("trait")
                .or_else(|| n.named_child(0))?;
            type_expr(cx, t)
        }
        "bounded_type" => type_expr(cx, n.named_child(0)?),
        _ => None,
    }
}

fn is_declaration_name(n: Node, parent: Node) -> bool {
    let field_is = |f: &str| parent.child_by_field_name(f) == Some(n);
    match parent.kind() {
        "function_item"
        | "function_signature_item"
        | "const_item"
        | "static_item"
        | "mod_item"
        | "macro_definition" => field_is("name"),
        "let_declaration" | "parameter" | "closure_parameters" | "for_expression" => {
            field_is("pattern") || parent.kind() == "closure_parameters"
        }
        "call_expression" => field_is("function"),
        "scoped_identifier" => true,
        "macro_invocation" => field_is("macro"),
        "tuple_pattern"
        | "struct_pattern"
        | "field_pattern"
        | "tuple_struct_pattern"
        | "ref_pattern"
        | "mut_pattern"
        | "captured_pattern"
        | "or_pattern"
        | "slice_pattern" => true,
        "use_as_clause" | "use_list" | "scoped_use_list" | "use_declaration" => true,
        "field_initializer" | "shorthand_field_initializer" => field_is("field"),
        "generic_function" => field_is("function"),
        "lifetime" | "label" | "attribute" | "meta_item" | "token_tree" => true,
        _ => false,
    }
}

fn use_tree(cx: &mut Cx, stmt: Node, n: Node, prefix: &str) {
    let join = |p: &str, s: &str| {
        if p.is_empty() {
            s.to_string()
        } else {
            format!("{p}.{s}")
        }
    };
    match n.kind() {
        "identifier" | "crate" | "self" | "super" => {
            let name = cx.t(n).to_string();
            if name == "self" {
                let local = prefix.rsplit('.').next().unwrap_or_default().to_string();
                cx.import(stmt, &local, prefix, None);
            } else {
                cx.import(stmt, &name, prefix, Some(&name));
                cx.site(n, Some(format!("import:{prefix}")), SiteKind::Import);
            }
        }
        "scoped_identifier" => {
            let Some(name) = n.child_by_field_name("name") else {
                return;
            };
            let path = n
                .child_by_field_name("path")
                .and_then(|p| scoped_path(cx, p))
                .unwrap_or_default();
            let module = join(prefix, &path);
            let name_text = cx.t(name).to_string();
            if name_text == "self" {
                let local = module.rsplit('.').next().unwrap_or_default().to_string();
                cx.import(stmt, &local, &module, None);
            } else {
                cx.import(stmt, &name_text, &module, Some(&name_text));
                cx.site(name, Some(format!("import:{module}")), SiteKind::Import);
            }
        }
        "use_as_clause" => {
            let (Some(path), Some(alias)) = (
                n.child_by_field_name("path"),
                n.child_by_field_name("alias"),
            ) else {
                return;
            };
            let alias = cx.t(alias).to_string();
            let (module, name) = match path.kind() {
                "scoped_identifier" => {
                    let m = path
                        .child_by_field_name("path")
                        .and_then(|p| scoped_path(cx, p))
                        .unwrap_or_default();
                    let name = path.child_by_field_name("name");
                    (join(prefix, &m), name)
                }
                _ => (prefix.to_string(), Some(path)),
            };
            if let Some(name) = name {
                let nt = cx.t(name).to_string();
                cx.import(stmt, &alias, &module, Some(&nt));
                cx.site(name, Some(format!("import:{module}")), SiteKind::Import);
            }
        }
        "scoped_use_list" => {
            let p = n
                .child_by_field_name("path")
                .and_then(|p| scoped_path(cx, p))
                .unwrap_or_default();
            let module = join(prefix, &p);
            if let Some(list) = n.child_by_field_name("list") {
                let mut c = list.walk();
                let items: Vec<Node> = list.named_children(&mut c).collect();
                for item in items {
                    use_tree(cx, stmt, item, &module);
                }
            }
        }
        "use_list" => {
            let mut c = n.walk();
            let items: Vec<Node> = n.named_children(&mut c).collect();
            for item in items {
                use_tree(cx, stmt, item, prefix);
            }
        }
        "use_wildcard" => {
            let m = n
                .named_child(0)
                .and_then(|p| scoped_path(cx, p))
                .unwrap_or_default();
            cx.import(stmt, "*", &join(prefix, &m), None);
        }
        _ => {}
    }
}

/// Calls inside a macro's token tree: `name (` with an optional `recv .` / `recv ::` before it.
fn token_tree_calls(cx: &mut Cx, tt: Node) {
    let mut c = tt.walk();
    let kids: Vec<Node> = tt.children(&mut c).collect();
    for (i, k) in kids.iter().enumerate() {
        if k.kind() != "identifier" {
            continue;
        }
        let next_is_call = kids
            .get(i + 1)
            .is_some_and(|nx| nx.kind() == "token_tree" && cx.t(*nx).starts_with('('));
        if !next_is_call {
            continue;
        }
        let recv = if i >= 2 && matches!(cx.t(kids[i - 1]), "." | "::") {
            let r = kids[i - 2];
            matches!(r.kind(), "identifier" | "self" | "crate" | "super")
                .then(|| cx.t(r).to_string())
        } else {
            None
        };
        let recv = if i >= 1 && matches!(cx.t(kids[i - 1]), "." | "::") {
            recv.or_else(|| Some("?".into()))
        } else {
            recv
        };
        cx.site(*k, recv, SiteKind::Call);
    }
}

/// Walks one Rust tree.
pub(crate) fn walk(cx: &mut Cx, root: Node) {
    walk_tree(root, &mut |n| match n.kind() {
        "call_expression" => {
            let Some(mut f) = n.child_by_field_name("function") else {
                return;
            };
            if f.kind() == "generic_function" {
                match f.child_by_field_name("function") {
                    Some(g) => f = g,
                    None => return,
                }
            }
            match f.kind() {
                "identifier" => cx.site(f, None, SiteKind::Call),
                "field_expression" => {
                    if let Some(field) = f.child_by_field_name("field") {
                        let recv = f.child_by_field_name("value").and_then(|v| expr(cx, v));
                        cx.site(field, recv.or_else(|| Some("?".into())), SiteKind::Call);
                    }
                }
                "scoped_identifier" => {
                    if let Some(name) = f.child_by_field_name("name") {
                        let recv = f
                            .child_by_field_name("path")
                            .and_then(|p| scoped_path(cx, p));
                        cx.site(name, recv.or_else(|| Some("?".into())), SiteKind::Call);
                    }
                }
                _ => {}
            }
        }
        "token_tree" => token_tree_calls(cx, n),
        "scoped_identifier" => {
            let called = n.parent().is_some_and(|p| {
                (p.kind() == "call_expression" && p.child_by_field_name("function") == Some(n))
                    || p.kind() == "generic_function"
                    || p.kind() == "scoped_identifier"
                    || p.kind().starts_with("use")
                    || p.kind() == "scoped_use_list"
            });
            if !called && let Some(name) = n.child_by_field_name("name") {
                let recv = n
                    .child_by_field_name("path")
                    .and_then(|p| scoped_path(cx, p));
                cx.site(name, recv, SiteKind::Other);
            }
        }
        "identifier" => {
            if let Some(p) = n.parent()
                && !is_declaration_name(n, p)
                && p.kind() != "field_expression"
            {
                cx.site(n, None, SiteKind::Other);
            }
        }
        "type_identifier" => {
            if let Some(p) = n.parent()
                && !matches!(
                    p.kind(),
                    "struct_item"
                        | "enum_item"
                        | "trait_item"
                        | "type_item"
                        | "type_parameters"
                        | "constrained_type_parameter"
                        | "scoped_type_identifier"
                        | "union_item"
                        | "associated_type"
                )
            {
                cx.site(n, None, SiteKind::Type);
            }
        }
        "scoped_type_identifier" => {
            if let Some(name) = n.child_by_field_name("name") {
                let recv = n
                    .child_by_field_name("path")
                    .and_then(|p| scoped_path(cx, p));
                cx.site(name, recv, SiteKind::Type);
            }
        }
        "use_declaration" => {
            if let Some(arg) = n.child_by_field_name("argument") {
                use_tree(cx, n, arg, "");
            }
        }
        "let_declaration" => {
            let Some(p) = n.child_by_field_name("pattern") else {
                return;
            };
            let p = if p.kind() == "mut_pattern" {
                p.named_child(0).unwrap_or(p)
            } else {
                p
            };
            if p.kind() != "identifier" {
                return;
            }
            let name = cx.t(p).to_string();
            if let Some(t) = n.child_by_field_name("type") {
                let t = type_expr(cx, t);
                cx.bind(n.start_byte(), &name, t, true, false);
            } else if let Some(v) = n.child_by_field_name("value") {
                let e = expr(cx, v);
                cx.bind(n.start_byte(), &name, e, false, false);
            }
        }
        "parameter" => {
            let (Some(p), Some(t)) = (
                n.child_by_field_name("pattern"),
                n.child_by_field_name("type"),
            ) else {
                return;
            };
            let p = if p.kind() == "mut_pattern" {
                p.named_child(0).unwrap_or(p)
            } else {
                p
            };
            if p.kind() == "identifier" {
                let name = cx.t(p).to_string();
                let t = type_expr(cx, t);
                cx.bind(n.start_byte(), &name, t, true, false);
            }
        }
        "field_declaration" => {
            if let (Some(name), Some(t)) =
                (n.child_by_field_name("name"), n.child_by_field_name("type"))
            {
                let name = cx.t(name).to_string();
                let t = type_expr(cx, t);
                cx.bind(n.start_byte(), &name, t, true, true);
            }
        }
        "function_item" | "function_signature_item" => {
            if let (Some(name), Some(r)) = (
                n.child_by_field_name("name"),
                n.child_by_field_name("return_type"),
            ) {
                let t = type_expr(cx, r);
                cx.def_fact(name, t, DefFactKind::Returns);
            }
        }
        "impl_item" => {
            let (Some(t), Some(tr)) = (
                n.child_by_field_name("type"),
                n.child_by_field_name("trait"),
            ) else {
                return;
            };
            let name = match t.kind() {
                "generic_type" => t.child_by_field_name("type"),
                _ => Some(t),
            };
            let name = name.map(|x| {
                if x.kind() == "scoped_type_identifier" {
                    x.child_by_field_name("name").unwrap_or(x)
                } else {
                    x
                }
            });
            if let Some(name) = name {
                let e = type_expr(cx, tr);
                cx.def_fact(name, e, DefFactKind::ImplTrait);
            }
        }
        "trait_item" => {
            let (Some(name), Some(bounds)) = (
                n.child_by_field_name("name"),
                n.child_by_field_name("bounds"),
            ) else {
                return;
            };
            let mut c = bounds.walk();
            for b in bounds.named_children(&mut c) {
                let e = type_expr(cx, b);
                cx.def_fact(name, e, DefFactKind::Base);
            }
        }
        _ => {}
    });
}

/// The module path of a file (`src/lib.rs` → `crate`, `src/a/b.rs` and
/// `src/a/b/mod.rs` → `crate.a.b`), relative to its crate's `src/`.
pub(crate) fn module_path(path: &str) -> (String, String) {
    let (root, rel) = match path.rfind("src/") {
        Some(i) if i == 0 || path.as_bytes()[i - 1] == b'/' => (&path[..i + 4], &path[i + 4..]),
        _ => match path.rfind('/') {
            Some(i) => (&path[..i + 1], &path[i + 1..]),
            None => ("", path),
        },
    };
    let stem = rel.strip_suffix(".rs").unwrap_or(rel);
    let stem = stem.strip_suffix("/mod").unwrap_or(stem);
    let module = match stem {
        "lib" | "main" => "crate".to_string(),
        s => format!("crate.{}", s.replace('/', ".")),
    };
    (root.to_string(), module)
}
