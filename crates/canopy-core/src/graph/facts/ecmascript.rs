//! TypeScript and JavaScript: which facts a file states.
//!
//! Facts: calls and `new`, other identifier and member uses, type
//! references, `import` clauses (default, named with aliases, namespace),
//! `export … from` re-exports (named and `*`), variable declarations with
//! type or initialiser, typed parameters (constructor parameter properties
//! become fields), class properties and `this.x = …` as fields, return
//! types, `extends` / `implements`.

use tree_sitter::Node;

use super::model::{DefFactKind, IMPORT_RECV, SiteKind};
use super::walker::{Cx, GrammarLookup, Up, walk_tree};

/// The normalised expression of a value node.
pub(crate) fn expr(cx: &Cx, n: Node) -> Option<String> {
    match n.kind_name() {
        "identifier" | "this" | "super" => Some(cx.t(n).to_string()),
        "member_expression" => {
            let obj = expr(cx, n.field("object")?)?;
            let prop = cx.t(n.field("property")?);
            Some(format!("{obj}.{prop}"))
        }
        "call_expression" => Some(format!("{}()", expr(cx, n.field("function")?)?)),
        "new_expression" => Some(format!("{}()", expr(cx, n.field("constructor")?)?)),
        "parenthesized_expression"
        | "non_null_expression"
        | "await_expression"
        | "as_expression"
        | "satisfies_expression"
        | "type_assertion" => expr(cx, n.named_child(0)?),
        _ => None,
    }
}

/// The normalised name of a type node.
pub(crate) fn type_expr(cx: &Cx, n: Node) -> Option<String> {
    match n.kind_name() {
        "type_annotation" | "parenthesized_type" | "readonly_type" => {
            type_expr(cx, n.named_child(0)?)
        }
        "type_identifier" | "identifier" => Some(cx.t(n).to_string()),
        "nested_type_identifier" | "member_expression" => Some(cx.t(n).replace(' ', "")),
        "generic_type" => type_expr(cx, n.field("name").or(n.named_child(0))?),
        "union_type" => {
            let mut c = n.walk();
            let parts: Vec<Node> = n.named_children(&mut c).collect();
            parts.into_iter().find_map(|p| {
                let t = cx.t(p);
                if t == "null" || t == "undefined" {
                    None
                } else {
                    type_expr(cx, p)
                }
            })
        }
        _ => None,
    }
}

fn is_declaration_name(n: Node, parent: Node) -> bool {
    let field_is = |f: &str| parent.field(f) == Some(n);
    match parent.kind_name() {
        "function_declaration"
        | "function_signature"
        | "class_declaration"
        | "method_definition"
        | "function_expression"
        | "generator_function_declaration"
        | "abstract_class_declaration"
        | "interface_declaration"
        | "type_alias_declaration"
        | "enum_declaration" => field_is("name"),
        "variable_declarator" => field_is("name"),
        "required_parameter" | "optional_parameter" => field_is("pattern"),
        "formal_parameters" | "arrow_function" => true,
        "member_expression" => field_is("property"),
        "call_expression" => field_is("function"),
        "new_expression" => field_is("constructor"),
        "import_specifier" | "namespace_import" | "import_clause" | "export_specifier" => true,
        "assignment_expression" => field_is("left"),
        "pair" | "shorthand_property_identifier" => field_is("key"),
        "labeled_statement" | "break_statement" | "continue_statement" => true,
        _ => false,
    }
}

fn string_content(cx: &Cx, n: Node) -> String {
    cx.t(n)
        .trim_matches(|c| c == '"' || c == '\'' || c == '`')
        .to_string()
}

/// `export { a, b as c }` without `from`: imported names it lists become
/// members of this module for its importers (under the exported name).
fn export_local_imports(cx: &mut Cx, n: Node) {
    let mut c = n.walk();
    let Some(clause) = n
        .named_children(&mut c)
        .find(|c| c.kind_name() == "export_clause")
    else {
        return;
    };
    let mut c = clause.walk();
    let specs: Vec<Node> = clause.named_children(&mut c).collect();
    for spec in specs {
        let Some(name) = spec.field("name") else {
            continue;
        };
        let alias = spec.field("alias").unwrap_or(name);
        let (local, exported) = (cx.t(name).to_string(), cx.t(alias).to_string());
        let found = cx
            .facts
            .imports
            .iter()
            .find(|i| i.local == local)
            .map(|i| (i.module.clone(), i.name.clone()));
        if let Some((module, imported)) = found {
            cx.import(n, &exported, &module, imported.as_deref());
        }
    }
}

/// Walks one TypeScript / JavaScript tree.
pub(crate) fn walk(cx: &mut Cx, root: Node) {
    walk_tree(root, &mut |n, up| match n.kind_name() {
        "call_expression" | "new_expression" => call_or_new(cx, n),
        "member_expression" => member(cx, n, up),
        "identifier" => identifier(cx, n, up),
        "type_identifier" => type_identifier(cx, n, up),
        "nested_type_identifier" => nested_type(cx, n),
        "import_statement" => import_statement(cx, n),
        "export_statement" => export_statement(cx, n),
        "variable_declarator" => variable_declarator(cx, n),
        "required_parameter" | "optional_parameter" => parameter(cx, n),
        "public_field_definition" | "property_signature" => field_definition(cx, n),
        "assignment_expression" => assignment(cx, n),
        "function_declaration"
        | "method_definition"
        | "method_signature"
        | "abstract_method_signature"
        | "function_signature" => {
            if let (Some(name), Some(r)) = (n.field("name"), n.field("return_type")) {
                let t = type_expr(cx, r);
                cx.def_fact(name, t, DefFactKind::Returns);
            }
        }
        "class_declaration" | "abstract_class_declaration" | "class" | "interface_declaration" => {
            class_like(cx, n)
        }
        _ => {}
    });
}

/// `f()`, `a.f()`, `new F()`, `super()`: a call site of the name called.
fn call_or_new(cx: &mut Cx, n: Node) {
    let field = if n.kind_name() == "call_expression" {
        "function"
    } else {
        "constructor"
    };
    let Some(f) = n.field(field) else {
        return;
    };
    match f.kind_name() {
        "identifier" => cx.site(f, None, SiteKind::Call),
        "member_expression" => {
            if let Some(p) = f.field("property") {
                let recv = f.field("object").and_then(|o| expr(cx, o));
                cx.site(p, recv.or_else(|| Some("?".into())), SiteKind::Call);
            }
        }
        "super" => cx.site_named(
            f.start_byte(),
            "constructor".into(),
            Some("super".into()),
            SiteKind::Call,
        ),
        _ => {}
    }
}

/// `a.b` not called: a use of `b` on `a`.
fn member<'t>(cx: &mut Cx, n: Node<'t>, up: &Up<'_, 't>) {
    let called = up.parent().is_some_and(|p| {
        (p.kind_name() == "call_expression" && p.field("function") == Some(n))
            || (p.kind_name() == "new_expression" && p.field("constructor") == Some(n))
    });
    if !called && let Some(p) = n.field("property") {
        let recv = n.field("object").and_then(|o| expr(cx, o));
        if let Some(recv) = recv {
            cx.site(p, Some(recv), SiteKind::Other);
        }
    }
}

/// A name that is no declaration: a use.
fn identifier<'t>(cx: &mut Cx, n: Node<'t>, up: &Up<'_, 't>) {
    if let Some(p) = up.parent()
        && !is_declaration_name(n, p)
        && !matches!(cx.t(n), "undefined" | "arguments")
    {
        cx.site(n, None, SiteKind::Other);
    }
}

/// A type name that is no declaration: a type use.
fn type_identifier<'t>(cx: &mut Cx, n: Node<'t>, up: &Up<'_, 't>) {
    if let Some(p) = up.parent()
        && !matches!(
            p.kind_name(),
            "class_declaration"
                | "interface_declaration"
                | "type_alias_declaration"
                | "abstract_class_declaration"
                | "type_parameter"
                | "nested_type_identifier"
        )
    {
        cx.site(n, None, SiteKind::Type);
    }
}

/// `ns.T` in a type: a type use of `T` on `ns`.
fn nested_type(cx: &mut Cx, n: Node) {
    if let (Some(m), Some(name)) = (n.field("module"), n.field("name")) {
        let recv = cx.t(m).replace(' ', "");
        cx.site(name, Some(recv), SiteKind::Type);
    }
}

/// `import d, { a as b } from "m"`, `import * as ns from "m"`: bindings that
/// importers do not see, and an import site per named import.
fn import_statement(cx: &mut Cx, n: Node) {
    let Some(source) = n.field("source") else {
        return;
    };
    let module = string_content(cx, source);
    let mut c = n.walk();
    let clauses: Vec<Node> = n
        .named_children(&mut c)
        .filter(|c| c.kind_name() == "import_clause")
        .collect();
    for clause in clauses {
        let mut c = clause.walk();
        for part in clause.named_children(&mut c) {
            match part.kind_name() {
                "identifier" => {
                    let local = cx.t(part).to_string();
                    cx.import_as(n, &local, &module, Some("default"), false);
                }
                "namespace_import" => {
                    if let Some(id) = part.named_child(0) {
                        let local = cx.t(id).to_string();
                        cx.import_as(n, &local, &module, None, false);
                    }
                }
                "named_imports" => {
                    let mut c = part.walk();
                    for spec in part.named_children(&mut c) {
                        if spec.kind_name() != "import_specifier" {
                            continue;
                        }
                        let Some(name) = spec.field("name") else {
                            continue;
                        };
                        let alias = spec.field("alias").unwrap_or(name);
                        let (o, a) = (cx.t(name).to_string(), cx.t(alias).to_string());
                        cx.import_as(n, &a, &module, Some(&o), false);
                        cx.site(
                            name,
                            Some(format!("{IMPORT_RECV}{module}")),
                            SiteKind::Import,
                        );
                    }
                }
                _ => {}
            }
        }
    }
}

/// `export { a as b } from "m"` and `export * from "m"`: re-exports; `export { a }`
/// without `from`: see [`export_local_imports`].
fn export_statement(cx: &mut Cx, n: Node) {
    let Some(source) = n.field("source") else {
        export_local_imports(cx, n);
        return;
    };
    let module = string_content(cx, source);
    let mut c = n.walk();
    let clause = n
        .named_children(&mut c)
        .find(|c| c.kind_name() == "export_clause");
    match clause {
        Some(clause) => {
            let mut c = clause.walk();
            for spec in clause.named_children(&mut c) {
                let Some(name) = spec.field("name") else {
                    continue;
                };
                let alias = spec.field("alias").unwrap_or(name);
                let (o, a) = (cx.t(name).to_string(), cx.t(alias).to_string());
                cx.import(n, &a, &module, Some(&o));
                cx.site(
                    name,
                    Some(format!("{IMPORT_RECV}{module}")),
                    SiteKind::Import,
                );
            }
        }
        None => cx.import(n, "*", &module, None),
    }
}

/// `let x: T` / `const x = v`: `x` is a `T` or `v`.
fn variable_declarator(cx: &mut Cx, n: Node) {
    let Some(name) = n.field("name").filter(|x| x.kind_name() == "identifier") else {
        return;
    };
    let name = cx.t(name).to_string();
    if let Some(t) = n.field("type") {
        let t = type_expr(cx, t);
        cx.bind(n.start_byte(), &name, t, true, false);
    } else if let Some(v) = n.field("value") {
        let e = expr(cx, v);
        cx.bind(n.start_byte(), &name, e, false, false);
    }
}

/// `p: T`; a constructor parameter property (`private p: T`) is a field too.
fn parameter(cx: &mut Cx, n: Node) {
    let (Some(p), Some(t)) = (n.field("pattern"), n.field("type")) else {
        return;
    };
    if p.kind_name() != "identifier" {
        return;
    }
    let name = cx.t(p).to_string();
    let t = type_expr(cx, t);
    let mut c = n.walk();
    let is_property = n
        .children(&mut c)
        .any(|c| c.kind_name() == "accessibility_modifier" || c.kind_name() == "readonly");
    cx.bind(n.start_byte(), &name, t.clone(), true, false);
    if is_property {
        cx.bind(n.start_byte(), &name, t, true, true);
    }
}

/// A class property or interface member with a type or value: a field.
fn field_definition(cx: &mut Cx, n: Node) {
    let Some(name) = n.field("name") else {
        return;
    };
    let name = cx.t(name).to_string();
    if let Some(t) = n.field("type") {
        let t = type_expr(cx, t);
        cx.bind(n.start_byte(), &name, t, true, true);
    } else if let Some(v) = n.field("value") {
        let e = expr(cx, v);
        cx.bind(n.start_byte(), &name, e, false, true);
    }
}

/// `this.x = v`: a field.
fn assignment(cx: &mut Cx, n: Node) {
    let (Some(l), Some(r)) = (n.field("left"), n.field("right")) else {
        return;
    };
    if l.kind_name() == "member_expression"
        && l.field("object").is_some_and(|o| o.kind_name() == "this")
        && let Some(p) = l.field("property")
    {
        let name = cx.t(p).to_string();
        let e = expr(cx, r);
        cx.bind(n.start_byte(), &name, e, false, true);
    }
}

/// `extends` / `implements` clauses: the bases of a class or interface.
fn class_like(cx: &mut Cx, n: Node) {
    let Some(name) = n.field("name") else {
        return;
    };
    let mut c = n.walk();
    for ch in n.named_children(&mut c) {
        match ch.kind_name() {
            "class_heritage" => {
                let mut c = ch.walk();
                for clause in ch.named_children(&mut c) {
                    let mut c = clause.walk();
                    for b in clause.named_children(&mut c) {
                        let e = type_expr(cx, b).or_else(|| expr(cx, b));
                        cx.def_fact(name, e, DefFactKind::Base);
                    }
                }
            }
            "extends_type_clause" => {
                let mut c = ch.walk();
                for b in ch.named_children(&mut c) {
                    let e = type_expr(cx, b);
                    cx.def_fact(name, e, DefFactKind::Base);
                }
            }
            _ => {}
        }
    }
}
