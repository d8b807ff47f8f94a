//! Rust: which facts a file states, and how its modules are named.
//!
//! Facts: calls (`f()`, `a.f()`, `A::f()`, turbofish, and `f(` / `a.f(`
//! inside macro arguments), other path and identifier uses, type
//! references, `use` trees (`self`, `super`, `crate`, aliases, globs),
//! `let` bindings (`let p = Parser::new()`, `let p: T`), typed parameters,
//! struct fields, return types, `impl Trait for Type`, supertraits.

use std::collections::HashSet;

use tree_sitter::Node;

use crate::graph::facts::{Binding, Cx, DefFactKind, GrammarLookup, SiteKind, Up, walk_tree};

/// `S { f: Default::default(), ..Default::default() }`: the type whose
/// `default` is called, as an expression (`S.f` — the field's type — or `S()`).
/// `up`: the call's ancestors.
fn default_target(cx: &Cx, up: &Up) -> Option<String> {
    let parent = up.parent()?;
    // Both initializers sit in a field_initializer_list of the struct expression.
    let strukt = up.nth(2)?;
    let field = match parent.kind_name() {
        "field_initializer" => Some(parent.field("field")?),
        "base_field_initializer" => None,
        _ => return None,
    };
    if strukt.kind_name() != "struct_expression" {
        return None;
    }
    let name = type_expr(cx, strukt.field("name")?)?;
    Some(match field {
        Some(f) => format!("{name}.{}", cx.t(f)),
        None => format!("{name}()"),
    })
}

/// Marks the trait of a qualified path's type (`Error~Error` for
/// `<Error as serde::de::Error>`): the resolver prefers that trait's impl
/// over an inherent method of the same name, and ignores it otherwise.
pub(crate) const TRAIT_HINT: char = '~';

/// Separates a path receiver from the call's first argument in a site's
/// receiver (`serde::ser::SerializeSeq|self`): the resolver tries the
/// path, then the argument's type, for fully qualified trait calls.
pub(crate) const UFCS_SEP: char = '|';

/// Smart pointers a method call sees through (`Box<T>` → `T`).
///
/// `Option` and `Result` are seen through too, so that `x?`, `if let Some(t) = x`
/// and `x.unwrap()` reach the payload; [`PASSTHROUGH`] names the unwrapping methods.
const TRANSPARENT: &[&str] = &[
    "Box",
    "Rc",
    "Arc",
    "RefCell",
    "Cow",
    "Pin",
    "ManuallyDrop",
    "Option",
    "Result",
];

/// Methods of the [`TRANSPARENT`] wrappers and of references that give back
/// (a reference to) the value they are called on, when the value's type does
/// not define them itself: `t.unwrap().insert(..)` calls the payload's `insert`.
pub(crate) const PASSTHROUGH: &[&str] = &[
    "unwrap",
    "expect",
    "unwrap_or",
    "unwrap_or_default",
    "unwrap_or_else",
    "unwrap_unchecked",
    "as_ref",
    "as_mut",
    "as_deref",
    "as_deref_mut",
    "borrow",
    "borrow_mut",
    "clone",
    "to_owned",
    "ok",
    "ok_or",
    "ok_or_else",
    "map_err",
    "context",
    "with_context",
];

fn path_text(cx: &Cx, n: Node) -> String {
    cx.t(n)
        .split_whitespace()
        .collect::<String>()
        .replace("::", ".")
}

/// The normalised expression of a value node.
pub(crate) fn expr(cx: &Cx, n: Node) -> Option<String> {
    match n.kind_name() {
        "identifier" | "self" | "crate" | "super" => Some(cx.t(n).to_string()),
        "field_expression" => {
            let v = expr(cx, n.field("value")?)?;
            Some(format!("{v}.{}", cx.t(n.field("field")?)))
        }
        "call_expression" => {
            let f = expr(cx, n.field("function")?)?;
            // `mem::take(x)` / `mem::replace(x, v)` give back a value of `x`'s type.
            if matches!(f.rsplit('.').next(), Some("take" | "replace"))
                && f.rsplit('.').nth(1) == Some("mem")
            {
                let first = n.field("arguments")?.named_child(0)?;
                return expr(cx, first);
            }
            Some(format!("{f}()"))
        }
        "scoped_identifier" => {
            let name = cx.t(n.field("name")?);
            match n.field("path") {
                Some(p) => Some(format!("{}.{name}", path_head(cx, p)?)),
                None => Some(name.to_string()),
            }
        }
        "generic_function" => expr(cx, n.field("function")?),
        "struct_expression" => {
            let name = n.field("name")?;
            Some(format!("{}()", type_expr(cx, name)?))
        }
        "reference_expression" => expr(cx, n.field("value")?),
        "try_expression" | "parenthesized_expression" | "unary_expression" => {
            expr(cx, n.named_child(0)?)
        }
        "await_expression" => expr(cx, n.named_child(0)?),
        _ => None,
    }
}

/// Marks the first segment of a path that a local of the same name could be
/// mistaken for (`scheduler^.Handle`): see [`path_head`].
pub(crate) const PATH_HEAD: char = '^';

/// The path `p` (the part before a `::name`) as [`scoped_path`] writes it,
/// with its first segment marked [`PATH_HEAD`] when a local of that name is
/// bound before it in the same function: after `let (scheduler, handle) =
/// …`, `scheduler::Handle` still names the module, since a path is read
/// where locals do not exist, while the expressions the resolver reads
/// write `a::b` and the field `a.b` alike. Only then, so every other
/// expression stays as it was.
fn path_head(cx: &Cx, p: Node) -> Option<String> {
    if p.kind_name() != "identifier" {
        return scoped_path(cx, p);
    }
    let name = cx.t(p);
    let at = p.start_byte() as u32;
    let local = |b: &&Binding| !b.field && !b.is_type && b.byte <= at && b.name == name;
    // Most heads have no local of their name at all: no walk up the tree
    // (each `parent()` descends from the root again).
    if !cx.facts.bindings.iter().any(|b| local(&b)) {
        return Some(name.to_string());
    }
    let mut f = p.parent();
    while let Some(n) = f
        && n.kind_name() != "function_item"
    {
        f = n.parent();
    }
    let start = f.map_or(u32::MAX, |f| f.start_byte() as u32);
    let shadowed = cx
        .facts
        .bindings
        .iter()
        .filter(local)
        .any(|b| b.byte >= start);
    Some(if shadowed {
        format!("{name}{PATH_HEAD}")
    } else {
        name.to_string()
    })
}

fn scoped_path(cx: &Cx, p: Node) -> Option<String> {
    match p.kind_name() {
        "self" => Some("self_mod".to_string()),
        "identifier" | "crate" | "super" | "type_identifier" => Some(cx.t(p).to_string()),
        "scoped_identifier" | "scoped_type_identifier" => {
            expr(cx, p).or_else(|| Some(path_text(cx, p)))
        }
        "generic_type" => type_expr(cx, p),
        // `<T as Trait>::f`: `f` of `T`'s impl of `Trait` (`T~Trait`, see `TRAIT_HINT`).
        "bracketed_type" => {
            let inner = p.named_child(0)?;
            match inner.kind_name() {
                "qualified_type" => {
                    let t = type_expr(cx, inner.field("type")?)?;
                    let tr = inner
                        .field("alias")
                        .and_then(|a| type_expr(cx, a))
                        .map(|a| a.rsplit('.').next().unwrap_or_default().to_string());
                    Some(match tr {
                        Some(tr) if !tr.is_empty() => format!("{t}{TRAIT_HINT}{tr}"),
                        _ => t,
                    })
                }
                _ => type_expr(cx, inner),
            }
        }
        _ => Some(path_text(cx, p)).filter(|s| {
            s.chars()
                .all(|c| c.is_alphanumeric() || c == '_' || c == '.')
        }),
    }
}

/// The stored return type of a function returning a tuple (`-> (A, B)`,
/// also inside `Result` / `Option`): this prefix, then the element types
/// separated by `;` (empty where unknown), then `)`. A call of such a
/// function is no value itself; `f.#0` is its first element (the binding
/// of `let (a, b) = f(x)?`, see [`tuple_bindings`]).
pub(crate) const TUPLE: &str = "#tuple(";

/// The element types of a tuple type, through references and the
/// [`TRANSPARENT`] wrappers (`Result<(A, B), E>` → `A`, `B`).
fn tuple_elements<'t>(cx: &Cx, n: Node<'t>) -> Option<Vec<Node<'t>>> {
    match n.kind_name() {
        "tuple_type" => {
            let mut c = n.walk();
            Some(n.named_children(&mut c).collect())
        }
        "reference_type" => tuple_elements(cx, n.field("type")?),
        "generic_type" if TRANSPARENT.contains(&cx.t(n.field("type")?)) => {
            tuple_elements(cx, n.field("type_arguments")?.named_child(0)?)
        }
        _ => None,
    }
}

/// What a function's `-> T` stores: the type's name, or a [`TUPLE`].
fn return_type(cx: &Cx, r: Node) -> Option<String> {
    if let Some(elems) = tuple_elements(cx, r) {
        let names: Vec<String> = elems
            .iter()
            .map(|e| type_expr(cx, *e).unwrap_or_default())
            .collect();
        return names
            .iter()
            .any(|n| !n.is_empty())
            .then(|| format!("{TUPLE}{})", names.join(";")));
    }
    type_expr(cx, r)
}

/// `let (a, b) = f(x)?;` binds `a` to `f.#0` and `b` to `f.#1` (the
/// elements of what `f` returns, [`TUPLE`]); `let (a, b): (A, B) = …` binds
/// them to the element types. Elements after a `..` are not bound.
fn tuple_bindings(cx: &mut Cx, decl: Node, pattern: Node) {
    let parts = pattern_elements(pattern);
    let typed: Option<Vec<Node>> = decl.field("type").and_then(|t| tuple_elements(cx, t));
    // The call whose result is destructured, without the payload-passing
    // methods after it (`f(x).unwrap()` is `f(x)`'s tuple).
    let base = decl
        .field("value")
        .and_then(|v| expr(cx, v))
        .and_then(|mut v| {
            while let Some(head) = v.strip_suffix("()")
                && let Some((before, m)) = head.rsplit_once('.')
                && PASSTHROUGH.contains(&m)
                && before.ends_with(')')
            {
                v = before.to_string();
            }
            v.strip_suffix("()").map(str::to_string)
        });
    for (i, part) in parts.into_iter().enumerate() {
        if part.kind_name() == "remaining_field_pattern" {
            break;
        }
        let p = bare_pattern(part);
        if p.kind_name() != "identifier" {
            continue;
        }
        let name = cx.t(p).to_string();
        match (&typed, &base) {
            (Some(types), _) => {
                let t = types.get(i).and_then(|t| type_expr(cx, *t));
                cx.bind(decl.end_byte(), &name, t, true, false);
            }
            (None, Some(base)) => {
                cx.bind(
                    decl.end_byte(),
                    &name,
                    Some(format!("{base}.#{i}")),
                    false,
                    false,
                );
            }
            (None, None) => {}
        }
    }
}

/// The normalised name of a type node (`&mut Box<Foo<T>>` → `Foo`).
pub(crate) fn type_expr(cx: &Cx, n: Node) -> Option<String> {
    match n.kind_name() {
        "type_identifier" | "identifier" => Some(cx.t(n).to_string()),
        "scoped_type_identifier" | "scoped_identifier" => {
            let name = cx.t(n.field("name")?);
            match n.field("path") {
                Some(p) => Some(format!("{}.{name}", path_head(cx, p)?)),
                None => Some(name.to_string()),
            }
        }
        "generic_type" => {
            let t = n.field("type")?;
            let name = type_expr(cx, t)?;
            if TRANSPARENT.contains(&name.as_str())
                && let Some(args) = n.field("type_arguments")
                && let Some(first) = args.named_child(0)
            {
                return type_expr(cx, first);
            }
            Some(name)
        }
        "reference_type" | "pointer_type" => type_expr(cx, n.field("type")?),
        "abstract_type" | "dynamic_type" => {
            let t = n.field("trait").or_else(|| n.named_child(0))?;
            type_expr(cx, t)
        }
        "bounded_type" => type_expr(cx, n.named_child(0)?),
        _ => None,
    }
}

fn is_declaration_name(n: Node, parent: Node) -> bool {
    let field_is = |f: &str| parent.field(f) == Some(n);
    match parent.kind_name() {
        "function_item"
        | "function_signature_item"
        | "const_item"
        | "static_item"
        | "mod_item"
        | "macro_definition" => field_is("name"),
        "let_declaration" | "parameter" | "closure_parameters" | "for_expression" => {
            field_is("pattern") || parent.kind_name() == "closure_parameters"
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
    match n.kind_name() {
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
            let Some(name) = n.field("name") else {
                return;
            };
            let path = n
                .field("path")
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
            let (Some(path), Some(alias)) = (n.field("path"), n.field("alias")) else {
                return;
            };
            let alias = cx.t(alias).to_string();
            let (module, name) = match path.kind_name() {
                "scoped_identifier" => {
                    let m = path
                        .field("path")
                        .and_then(|p| scoped_path(cx, p))
                        .unwrap_or_default();
                    let name = path.field("name");
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
                .field("path")
                .and_then(|p| scoped_path(cx, p))
                .unwrap_or_default();
            let module = join(prefix, &p);
            if let Some(list) = n.field("list") {
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
        if k.kind_name() != "identifier" {
            continue;
        }
        let next_is_call = kids
            .get(i + 1)
            .is_some_and(|nx| nx.kind_name() == "token_tree" && cx.t(*nx).starts_with('('));
        if !next_is_call {
            continue;
        }
        let recv = if i >= 2 && matches!(cx.t(kids[i - 1]), "." | "::") {
            let r = kids[i - 2];
            matches!(r.kind_name(), "identifier" | "self" | "crate" | "super")
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
    // Type names in macro arguments (`empty_visit!(visit_float, Formatted<f64>)`):
    // a capitalised identifier not after `.` / `::` and not called.
    for (i, k) in kids.iter().enumerate() {
        if k.kind_name() != "identifier" || !cx.t(*k).starts_with(|c: char| c.is_ascii_uppercase())
        {
            continue;
        }
        let after_path = i >= 1 && matches!(cx.t(kids[i - 1]), "." | "::");
        let called = kids
            .get(i + 1)
            .is_some_and(|nx| nx.kind_name() == "token_tree" && cx.t(*nx).starts_with('('));
        if !after_path && !called {
            cx.site(*k, None, SiteKind::Other);
        }
    }
}

/// Whether a (path of a) scoped identifier sits in a `use` tree.
fn in_use_tree(up: &Up) -> bool {
    for p in up.iter() {
        match p.kind_name() {
            "scoped_identifier" => continue,
            k => return k.starts_with("use") || k == "scoped_use_list",
        }
    }
    false
}

/// A pattern with `ref` / `mut` / `ref mut` taken off.
/// The elements of a tuple or tuple-struct pattern, in order, `_` included:
/// tree-sitter makes `_` an anonymous node, so the named children alone
/// would number `(_, x)`'s `x` as the first element. A tuple struct's path
/// is not an element.
fn pattern_elements(p: Node) -> Vec<Node> {
    let ty = p.field("type").map(|t| t.id());
    let mut c = p.walk();
    p.children(&mut c)
        .filter(|k| !k.is_extra() && Some(k.id()) != ty)
        .filter(|k| k.is_named() || k.kind_name() == "_")
        .collect()
}

fn bare_pattern(mut p: Node) -> Node {
    while matches!(p.kind_name(), "ref_pattern" | "mut_pattern") {
        match p.named_child(p.named_child_count().saturating_sub(1)) {
            Some(inner) => p = inner,
            None => break,
        }
    }
    p
}

/// The value a top-level pattern is matched against — the `match`
/// scrutinee, the right side of `if let` / `while let` / `let … else` —
/// given the pattern's `parent` and the ancestors `above` it.
fn scrutinee_node<'t>(parent: Node<'t>, above: &Up<'_, 't>) -> Option<Node<'t>> {
    match parent.kind_name() {
        // match_pattern < match_arm < match_block < match_expression
        "match_pattern" => above.nth(2)?.field("value"),
        "let_condition" | "let_declaration" => parent.field("value"),
        _ => None,
    }
}

/// Bindings of `Path::Variant(a, b)` / `Some(x)` patterns: `a` is the first
/// payload of the variant (a field `Variant#0` of the enum), `x` the
/// scrutinee itself (`Option` and `Result` are transparent). A name whose
/// value is unknown is not bound: the binding would outlive its arm, as
/// bindings are scoped to the enclosing function.
///
/// Bindings start to be visible after the value matched (`if let Some(v) =
/// v.get()` reads the outer `v` on the right).
fn tuple_struct_bindings(cx: &mut Cx, n: Node, up: &Up) {
    let Some(ty) = n.field("type") else {
        return;
    };
    let matched = up.parent().and_then(|p| scrutinee_node(p, &up.above()));
    let value_end = matched.map_or(0, |v| v.end_byte());
    let path = match ty.kind_name() {
        "identifier" => Some(cx.t(ty).to_string()),
        "scoped_identifier" => expr(cx, ty),
        _ => None,
    };
    for (i, item) in pattern_elements(n).into_iter().enumerate() {
        if item.kind_name() == "remaining_field_pattern" {
            break;
        }
        let p = bare_pattern(item);
        if p.kind_name() != "identifier" {
            continue;
        }
        let value = match path.as_deref() {
            Some("Some" | "Ok") => matched.and_then(|v| expr(cx, v)),
            Some("Err" | "None") | None => None,
            Some(path) => Some(format!("{path}#{i}")),
        };
        let name = cx.t(p).to_string();
        let at = value_end.max(p.start_byte());
        cx.bind(at, &name, value, false, false);
    }
}

/// Collections whose items are their first type argument.
const SEQUENCES: &[&str] = &[
    "Vec",
    "VecDeque",
    "LinkedList",
    "BinaryHeap",
    "HashSet",
    "BTreeSet",
    "IndexSet",
    "SmallVec",
];

/// Maps: keys are the first type argument, values the second.
const MAPS: &[&str] = &["HashMap", "BTreeMap", "IndexMap"];

/// Pseudo-fields that name what a collection holds: `values#elem` is an
/// item of the `values: Vec<Item>` field (or local), `m#k` / `m#v` a key /
/// value of a map. Bindings of `for` patterns and iterator closures point
/// at them, so `for v in &self.values { v.f() }` finds `Item::f`.
pub(crate) const ELEM: &str = "#elem";
const KEY: &str = "#k";
const VALUE: &str = "#v";

/// The item types of a collection type: `[(suffix, item type)]`.
fn item_types(cx: &Cx, t: Node) -> Vec<(&'static str, String)> {
    let t = match t.kind_name() {
        "reference_type" => match t.field("type") {
            Some(inner) => inner,
            None => return Vec::new(),
        },
        _ => t,
    };
    match t.kind_name() {
        "array_type" => t
            .field("element")
            .and_then(|e| type_expr(cx, e))
            .map(|e| vec![(ELEM, e)])
            .unwrap_or_default(),
        "generic_type" => {
            let Some(name) = t.field("type").and_then(|n| type_expr(cx, n)) else {
                return Vec::new();
            };
            let name = name.rsplit('.').next().unwrap_or_default().to_string();
            let Some(args) = t.field("type_arguments") else {
                return Vec::new();
            };
            let mut c = args.walk();
            let args: Vec<Node> = args
                .named_children(&mut c)
                .filter(|a| a.kind_name() != "lifetime")
                .collect();
            let arg = |i: usize| args.get(i).and_then(|a| type_expr(cx, *a));
            if SEQUENCES.contains(&name.as_str()) {
                arg(0).map(|e| vec![(ELEM, e)]).unwrap_or_default()
            } else if MAPS.contains(&name.as_str()) {
                [(KEY, arg(0)), (VALUE, arg(1))]
                    .into_iter()
                    .filter_map(|(k, v)| v.map(|v| (k, v)))
                    .collect()
            } else if name == "Box" || name == "Rc" || name == "Arc" {
                args.first().map(|a| item_types(cx, *a)).unwrap_or_default()
            } else {
                Vec::new()
            }
        }
        _ => Vec::new(),
    }
}

/// Binds the item pseudo-names of `name: t` (see [`ELEM`]).
fn bind_items(cx: &mut Cx, at: usize, name: &str, t: Node, field: bool) {
    for (suffix, item) in item_types(cx, t) {
        cx.bind(at, &format!("{name}{suffix}"), Some(item), true, field);
    }
}

/// Collection methods that give back (a reference to, an `Option` of) an item.
pub(crate) const ITEM_METHODS: &[&str] = &[
    "first",
    "last",
    "get",
    "get_mut",
    "first_mut",
    "last_mut",
    "remove",
    "swap_remove",
    "pop",
    "pop_front",
    "pop_back",
    "front",
    "back",
    "front_mut",
    "back_mut",
];

/// Iterator adapters that keep the items as they are.
const ADAPTERS: &[&str] = &[
    "iter",
    "iter_mut",
    "into_iter",
    "drain",
    "rev",
    "skip",
    "take",
    "cloned",
    "copied",
    "peekable",
    "step_by",
    "filter",
    "skip_while",
    "take_while",
    "inspect",
];

/// How a loop or closure sees the items of a collection.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Items {
    /// Each item (`iter()`, a sequence, `&v`).
    Each,
    /// `(index, item)` from `enumerate()`.
    Enumerated,
    /// Map values (`values()`).
    Values,
    /// Map keys (`keys()`).
    Keys,
}

/// `&self.values.iter().enumerate()` → (`self.values`, Enumerated), when the
/// base is a field or local path (no calls) and `adapted` says whether any
/// iterator method was seen.
fn iteration_source(cx: &Cx, mut n: Node) -> Option<(String, Items, bool)> {
    let mut items = Items::Each;
    let mut adapted = false;
    loop {
        match n.kind_name() {
            "reference_expression" | "parenthesized_expression" => {
                n = n.field("value").or_else(|| n.named_child(0))?;
            }
            "call_expression" => {
                let f = n.field("function")?;
                if f.kind_name() != "field_expression" {
                    return None;
                }
                let m = cx.t(f.field("field")?);
                match m {
                    "enumerate" if items == Items::Each => items = Items::Enumerated,
                    "values" | "values_mut" | "into_values" => items = Items::Values,
                    "keys" | "into_keys" => items = Items::Keys,
                    m if ADAPTERS.contains(&m) => {}
                    _ => return None,
                }
                adapted = true;
                n = f.field("value")?;
            }
            _ => {
                let base = expr(cx, n)?;
                return (!base.contains("()")).then_some((base, items, adapted));
            }
        }
    }
}

/// Binds the names a loop pattern or closure parameter gets from `items` of `base`.
fn bind_iteration(cx: &mut Cx, pattern: Node, base: &str, items: Items) {
    let p = bare_pattern(pattern);
    let item = |suffix: &str| Some(format!("{base}{suffix}"));
    match (p.kind_name(), items) {
        ("identifier", Items::Each) => {
            let name = cx.t(p).to_string();
            cx.bind(p.start_byte(), &name, item(ELEM), false, false);
        }
        ("identifier", Items::Values) => {
            let name = cx.t(p).to_string();
            cx.bind(p.start_byte(), &name, item(VALUE), false, false);
        }
        ("identifier", Items::Keys) => {
            let name = cx.t(p).to_string();
            cx.bind(p.start_byte(), &name, item(KEY), false, false);
        }
        ("tuple_pattern", Items::Enumerated | Items::Each) => {
            // `(i, x)` of `enumerate()`; `(k, v)` of a map.
            let parts = pattern_elements(p);
            let suffixes: [&str; 2] = if items == Items::Enumerated {
                ["", ELEM]
            } else {
                [KEY, VALUE]
            };
            for (part, suffix) in parts.into_iter().zip(suffixes) {
                let part = bare_pattern(part);
                if part.kind_name() == "identifier" && !suffix.is_empty() {
                    let name = cx.t(part).to_string();
                    cx.bind(part.start_byte(), &name, item(suffix), false, false);
                }
            }
        }
        _ => {}
    }
}

/// Closure-taking methods of iterators and collections whose first
/// parameter is an item.
const ITEM_CLOSURES: &[&str] = &[
    "map",
    "filter",
    "for_each",
    "any",
    "all",
    "find",
    "find_map",
    "filter_map",
    "flat_map",
    "position",
    "take_while",
    "skip_while",
    "inspect",
    "max_by_key",
    "min_by_key",
    "partition",
    "fold",
];

/// Closure-taking methods of the collections themselves (no iterator in between).
const COLLECTION_CLOSURES: &[&str] = &[
    "retain",
    "retain_mut",
    "sort_by_key",
    "sort_by",
    "dedup_by_key",
];

/// Methods of `Option` / `Result` whose closure argument receives the
/// payload (`opt.and_then(|r| r.span())`: `r` is what `opt` holds).
const PAYLOAD_CLOSURES: &[&str] = &[
    "map",
    "and_then",
    "filter",
    "is_some_and",
    "is_ok_and",
    "is_none_or",
    "map_or",
    "map_or_else",
    "inspect",
    "take_if",
];

/// `recv.map(|x| …)` (see [`PAYLOAD_CLOSURES`]): `x` is `recv`'s payload,
/// the receiver itself since `Option` and `Result` are transparent.
fn closure_bindings(cx: &mut Cx, n: Node, up: &Up) {
    let Some(params) = n.field("parameters") else {
        return;
    };
    // `v.iter().map(|x| …)`, `v.retain(|x| …)`: `x` is an item of `v`.
    let method = up
        .parent()
        .filter(|a| a.kind_name() == "arguments")
        .and_then(|_| up.nth(1))
        .filter(|call| call.kind_name() == "call_expression")
        .and_then(|call| call.field("function"))
        .filter(|f| f.kind_name() == "field_expression");
    if let Some(f) = method
        && let (Some(m), Some(recv)) = (f.field("field"), f.field("value"))
        && let Some((base, items, adapted)) = iteration_source(cx, recv)
    {
        let m = cx.t(m);
        let first = params.named_child(0);
        let (fold, collection) = (m == "fold", COLLECTION_CLOSURES.contains(&m));
        if ((adapted && ITEM_CLOSURES.contains(&m)) || (!adapted && collection))
            && let Some(first) = first
        {
            // `fold(init, |acc, x| …)`: the item is the second parameter.
            let target = if fold {
                params.named_child(1)
            } else {
                Some(first)
            };
            if let Some(target) = target {
                bind_iteration(cx, target, &base, items);
                return;
            }
        }
    }
    // `opt.map(|x| …)`: `x` is the payload. Typed parameters (`|e: Error|`)
    // are bound by the `parameter` rule; untyped others stay unknown.
    let payload = method
        .filter(|f| {
            f.field("field")
                .is_some_and(|m| PAYLOAD_CLOSURES.contains(&cx.t(m)))
        })
        .and_then(|f| f.field("value"))
        .and_then(|v| expr(cx, v));
    if let Some(first) = params.named_child(0).map(bare_pattern)
        && first.kind_name() == "identifier"
    {
        let name = cx.t(first).to_string();
        cx.bind(first.start_byte(), &name, payload, false, false);
    }
}

/// Bindings of `Type { a, b: x }` patterns: the fields of `Type`.
fn struct_pattern_bindings(cx: &mut Cx, n: Node) {
    let Some(path) = n.field("type").and_then(|t| type_expr(cx, t)) else {
        return;
    };
    let mut c = n.walk();
    let fields: Vec<Node> = n
        .named_children(&mut c)
        .filter(|k| k.kind_name() == "field_pattern")
        .collect();
    for f in fields {
        let Some(field) = f.field("name") else {
            continue;
        };
        let field_name = cx.t(field).to_string();
        let bound = match f.field("pattern") {
            Some(p) => bare_pattern(p),
            None => field,
        };
        if matches!(
            bound.kind_name(),
            "identifier" | "shorthand_field_identifier"
        ) {
            let name = cx.t(bound).to_string();
            cx.bind(
                bound.start_byte(),
                &name,
                Some(format!("{path}.{field_name}")),
                false,
                false,
            );
        }
    }
}

/// `T: Trait` (a type parameter or `where` bound): `T` stands for its first trait.
fn bind_bounded(cx: &mut Cx, at: Node, name: Node, bounds: Node) {
    let mut c = bounds.walk();
    let first = bounds.named_children(&mut c).find_map(|b| type_expr(cx, b));
    let name = cx.t(name).to_string();
    cx.bind(at.start_byte(), &name, first, true, false);
}

/// Positional fields of tuple structs (`0`, `1`, …) and enum variants
/// (`Variant#0`, …), as typed fields of the struct / enum.
fn ordered_fields(cx: &mut Cx, list: Node, variant: Option<&str>) {
    let mut c = list.walk();
    let types: Vec<Node> = list.children_by_field_name("type", &mut c).collect();
    for (i, t) in types.into_iter().enumerate() {
        let name = match variant {
            Some(v) => format!("{v}#{i}"),
            None => i.to_string(),
        };
        let t = type_expr(cx, t);
        cx.bind(list.start_byte(), &name, t, true, true);
    }
}

/// Walks one Rust tree.
pub(crate) fn walk(cx: &mut Cx, root: Node) {
    walk_tree(root, &mut |n, up| {
        // Inside an item compiled out by its `cfg`: no facts. Ranges are
        // found in walk order and do not overlap, so the last one is the
        // only one that can hold this node.
        if let Some(&(start, end)) = cx.facts.disabled.last()
            && n.start_byte() as u32 >= start
            && n.end_byte() as u32 <= end
        {
            return;
        }
        walk_node(cx, n, up);
    });
}

fn walk_node<'t>(cx: &mut Cx, n: Node<'t>, up: &Up<'_, 't>) {
    match n.kind_name() {
        "attribute_item" | "inner_attribute_item" if cfg_attribute(cx, n) == Some(false) => {
            compile_out(cx, n);
        }
        "call_expression" => {
            let Some(mut f) = n.field("function") else {
                return;
            };
            if f.kind_name() == "generic_function" {
                match f.field("function") {
                    Some(g) => f = g,
                    None => return,
                }
            }
            match f.kind_name() {
                "identifier" => cx.site(f, None, SiteKind::Call),
                "field_expression" => {
                    if let Some(field) = f.field("field") {
                        let recv = f.field("value").and_then(|v| expr(cx, v));
                        cx.site(field, recv.or_else(|| Some("?".into())), SiteKind::Call);
                    }
                }
                "scoped_identifier" => {
                    if let Some(name) = f.field("name") {
                        let recv = f.field("path").and_then(|p| path_head(cx, p));
                        // `Trait::method(x, …)`: when `Trait` is not in the
                        // repository, the method is `x`'s (see `UFCS_SEP`).
                        let first_arg = n
                            .field("arguments")
                            .and_then(|a| a.named_child(0))
                            .and_then(|a| expr(cx, a));
                        let recv = match (recv, first_arg) {
                            (Some(r), Some(a)) if r != "Self" && !r.contains(TRAIT_HINT) => {
                                Some(format!("{r}{UFCS_SEP}{a}"))
                            }
                            (Some(r), _) if r == "Default" && cx.t(name) == "default" => {
                                default_target(cx, up).or(Some(r))
                            }
                            (r, _) => r,
                        };
                        cx.site(name, recv.or_else(|| Some("?".into())), SiteKind::Call);
                    }
                }
                _ => {}
            }
        }
        "token_tree" => token_tree_calls(cx, n),
        "scoped_identifier" => {
            let called = up.parent().is_some_and(|p| {
                (p.kind_name() == "call_expression" && p.field("function") == Some(n))
                    || p.kind_name() == "generic_function"
                    || p.kind_name().starts_with("use")
                    || p.kind_name() == "scoped_use_list"
            });
            let in_use = in_use_tree(up);
            if !called
                && !in_use
                && let Some(name) = n.field("name")
            {
                // Also the middle of a longer path: `Item` in `crate::Item::Value`.
                let recv = n.field("path").and_then(|p| path_head(cx, p));
                cx.site(name, recv, SiteKind::Other);
            }
            // The head of the path: `Table` in `Table::new()`, `Item` in `Item::Value(v)`.
            if !in_use
                && let Some(head) = n.field("path")
                && head.kind_name() == "identifier"
            {
                cx.site(head, None, SiteKind::Other);
            }
        }
        "tuple_struct_pattern" => tuple_struct_bindings(cx, n, up),
        "closure_expression" => closure_bindings(cx, n, up),
        "match_pattern" => {
            // `e => …`: a catch-all arm names the scrutinee.
            if let Some(p) = n.named_child(0)
                && p.kind_name() == "identifier"
                && !cx.t(p).starts_with(|c: char| c.is_ascii_uppercase())
            {
                let name = cx.t(p).to_string();
                let value = scrutinee_node(n, up).and_then(|v| expr(cx, v));
                cx.bind(p.start_byte(), &name, value, false, false);
            }
        }
        "struct_pattern" => struct_pattern_bindings(cx, n),
        "type_parameter" => {
            if let (Some(name), Some(bounds)) = (n.field("name"), n.field("bounds")) {
                bind_bounded(cx, n, name, bounds);
            }
        }
        "where_predicate" => {
            if let (Some(left), Some(bounds)) = (n.field("left"), n.field("bounds"))
                && left.kind_name() == "type_identifier"
            {
                // Visible from the start of the item it constrains: the
                // parameters before the `where` use it.
                let item = up.nth(1).unwrap_or(n);
                bind_bounded(cx, item, left, bounds);
            }
        }
        "ordered_field_declaration_list" => {
            let variant = up
                .parent()
                .filter(|p| p.kind_name() == "enum_variant")
                .and_then(|p| p.field("name"))
                .map(|v| cx.t(v).to_string());
            ordered_fields(cx, n, variant.as_deref());
        }
        "identifier" => {
            if let Some(p) = up.parent()
                && !is_declaration_name(n, p)
                && p.kind_name() != "field_expression"
            {
                cx.site(n, None, SiteKind::Other);
            }
        }
        "type_identifier" => {
            if let Some(p) = up.parent()
                && !matches!(
                    p.kind_name(),
                    "struct_item"
                        | "enum_item"
                        | "trait_item"
                        | "type_parameters"
                        | "scoped_type_identifier"
                        | "union_item"
                        | "associated_type"
                )
                // `type A = B;` and `<T: Trait = D>` name `A` and `T`; `B` and `D` are uses.
                && !(matches!(p.kind_name(), "type_item" | "type_parameter")
                    && p.field("name") == Some(n))
                && !(p.kind_name() == "where_predicate" && p.field("left") == Some(n))
            {
                cx.site(n, None, SiteKind::Type);
            }
        }
        "scoped_type_identifier" => {
            if let Some(name) = n.field("name") {
                let recv = n.field("path").and_then(|p| path_head(cx, p));
                cx.site(name, recv, SiteKind::Type);
            }
        }
        "use_declaration" => {
            if let Some(arg) = n.field("argument") {
                use_tree(cx, n, arg, "");
            }
        }
        "let_declaration" => {
            let Some(p) = n.field("pattern") else {
                return;
            };
            let p = if p.kind_name() == "mut_pattern" {
                p.named_child(0).unwrap_or(p)
            } else {
                p
            };
            if p.kind_name() == "tuple_pattern" {
                tuple_bindings(cx, n, p);
                return;
            }
            if p.kind_name() != "identifier" {
                return;
            }
            let name = cx.t(p).to_string();
            if let Some(t) = n.field("type") {
                bind_items(cx, n.end_byte(), &name, t, false);
                let t = type_expr(cx, t);
                cx.bind(n.end_byte(), &name, t, true, false);
            } else if let Some(v) = n.field("value") {
                let e = expr(cx, v);
                cx.bind(n.end_byte(), &name, e, false, false);
            }
        }
        "parameter" => {
            let (Some(p), Some(t)) = (n.field("pattern"), n.field("type")) else {
                return;
            };
            let p = if p.kind_name() == "mut_pattern" {
                p.named_child(0).unwrap_or(p)
            } else {
                p
            };
            if p.kind_name() == "identifier" {
                let name = cx.t(p).to_string();
                bind_items(cx, n.start_byte(), &name, t, false);
                let t = type_expr(cx, t);
                cx.bind(n.start_byte(), &name, t, true, false);
            }
        }
        "field_declaration" => {
            if let (Some(name), Some(t)) = (n.field("name"), n.field("type")) {
                let name = cx.t(name).to_string();
                bind_items(cx, n.start_byte(), &name, t, true);
                let t = type_expr(cx, t);
                cx.bind(n.start_byte(), &name, t, true, true);
            }
        }
        "for_expression" => {
            if let (Some(p), Some(v)) = (n.field("pattern"), n.field("value"))
                && let Some((base, items, _)) = iteration_source(cx, v)
            {
                bind_iteration(cx, p, &base, items);
            }
        }
        "function_item" | "function_signature_item" => {
            if let (Some(name), Some(r)) = (n.field("name"), n.field("return_type")) {
                let t = return_type(cx, r);
                cx.def_fact(name, t, DefFactKind::Returns);
            }
        }
        "impl_item" => {
            let (Some(t), Some(tr)) = (n.field("type"), n.field("trait")) else {
                return;
            };
            let t = match t.kind_name() {
                "reference_type" => t.field("type").unwrap_or(t),
                _ => t,
            };
            let name = match t.kind_name() {
                "generic_type" => t.field("type"),
                _ => Some(t),
            };
            let name = name.map(|x| {
                if x.kind_name() == "scoped_type_identifier" {
                    x.field("name").unwrap_or(x)
                } else {
                    x
                }
            });
            if let Some(name) = name {
                let e = type_expr(cx, tr);
                cx.def_fact(name, e, DefFactKind::ImplTrait);
            }
        }
        "type_item" => {
            // `type A = B;`: members of `A` are those of `B`.
            if let (Some(name), Some(t)) = (n.field("name"), n.field("type")) {
                let e = type_expr(cx, t);
                cx.def_fact(name, e, DefFactKind::Base);
            }
        }
        "trait_item" => {
            let (Some(name), Some(bounds)) = (n.field("name"), n.field("bounds")) else {
                return;
            };
            let mut c = bounds.walk();
            for b in bounds.named_children(&mut c) {
                let e = type_expr(cx, b);
                cx.def_fact(name, e, DefFactKind::Base);
            }
        }
        _ => {}
    }
}

/// The module path of a file (`src/lib.rs` → `crate`, `src/a/b.rs` and
/// `src/a/b/mod.rs` → `crate.a.b`), relative to its crate's `src/`.
/// Integration tests, examples and benches are crates of one file each
/// (`tests/a.rs` → `crate`), whose `mod util;` is `tests/util/mod.rs` or
/// `tests/util.rs` (`crate.util`, shared by the files that declare it).
pub(crate) fn module_path(path: &str) -> (String, String) {
    let segment_at = |name: &str| {
        path.rfind(name)
            .filter(|&i| i == 0 || path.as_bytes()[i - 1] == b'/')
    };
    if let Some(i) = segment_at("src/") {
        let (root, rel) = (&path[..i + 4], &path[i + 4..]);
        return (root.to_string(), module_of(rel, &["lib", "main"]));
    }
    if let Some(i) = ["tests/", "examples/", "benches/"]
        .iter()
        .filter_map(|d| segment_at(d).map(|i| i + d.len()))
        .max()
    {
        let (root, rel) = (&path[..i], &path[i..]);
        let module = if rel.contains('/') {
            module_of(rel, &[])
        } else {
            "crate".to_string()
        };
        return (root.to_string(), module);
    }
    let (root, rel) = match path.rfind('/') {
        Some(i) => (&path[..i + 1], &path[i + 1..]),
        None => ("", path),
    };
    (root.to_string(), module_of(rel, &["lib", "main"]))
}

/// `a/b.rs`, `a/b/mod.rs` → `crate.a.b`; a `roots` stem → `crate`.
fn module_of(rel: &str, roots: &[&str]) -> String {
    let stem = rel.strip_suffix(".rs").unwrap_or(rel);
    let stem = stem.strip_suffix("/mod").unwrap_or(stem);
    if roots.contains(&stem) {
        "crate".to_string()
    } else {
        format!("crate.{}", stem.replace('/', "."))
    }
}

/// The Cargo side of a Rust repository, from its file paths: the library
/// crates by the name other crates `use` them (`[lib] name`, else
/// `[package] name`, `-` as `_`) → their `src/` folder (those with a
/// `src/lib.rs`), and every package ([`packages`]). Each manifest is read
/// once: the indexed `Cargo.toml`s and the one beside each `src/lib.rs`.
pub(crate) fn cargo<'a>(
    repo: &std::path::Path,
    paths: impl IntoIterator<Item = &'a str>,
) -> (std::collections::HashMap<String, String>, Vec<Package>) {
    let mut roots = Vec::new();
    let mut manifests = std::collections::BTreeSet::new();
    for p in paths {
        if p == "Cargo.toml" || p.ends_with("/Cargo.toml") {
            manifests.insert(p.to_string());
        } else if p.ends_with("src/lib.rs") {
            let (root, _) = module_path(p);
            manifests.insert(format!(
                "{}Cargo.toml",
                root.strip_suffix("src/").unwrap_or(&root)
            ));
            roots.push(root);
        }
    }
    let packages = packages(repo, manifests.iter().map(String::as_str));
    let crates = roots
        .into_iter()
        .filter_map(|src| {
            let dir = src.strip_suffix("src/").unwrap_or(&src);
            let p = packages.iter().find(|p| p.dir == dir)?;
            Some((p.lib_name.clone().unwrap_or_else(|| p.name.clone()), src))
        })
        .collect();
    (crates, packages)
}

/// A Cargo package of the repository, as far as it limits which other
/// packages its code can call into: a package reaches its own code and the
/// packages it depends on, and never the functions of a proc-macro crate
/// (which exports only macros).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Package {
    /// Its folder, repository-relative, with a trailing `/` (`""` at the root).
    pub dir: String,
    /// `[package] name`, `-` as `_`.
    pub name: String,
    /// `[lib] name` when it differs, `-` as `_`: what other crates `use`.
    pub lib_name: Option<String>,
    /// `[lib] proc-macro = true`.
    pub proc_macro: bool,
    /// Packages its library and binaries use (`[dependencies]`, also per
    /// `[target.…]`; the `package = "…"` of a renamed one), `-` as `_`.
    pub deps: HashSet<String>,
    /// What its tests, examples and benches add (`[dev-dependencies]`).
    pub dev_deps: HashSet<String>,
}

impl Package {
    /// Whether code in `caller_path` (a file of this package) can call into
    /// package `target`.
    pub fn reaches(&self, caller_path: &str, target: &Package) -> bool {
        if target.dir == self.dir {
            return true;
        }
        if target.proc_macro {
            return false;
        }
        let rel = caller_path.strip_prefix(&self.dir).unwrap_or(caller_path);
        let dev = ["tests/", "examples/", "benches/"]
            .iter()
            .any(|d| rel.starts_with(d));
        self.deps.contains(&target.name) || (dev && self.dev_deps.contains(&target.name))
    }
}

/// The packages of the repository: one per `Cargo.toml` among `manifests`
/// (repository-relative paths) with a `[package]` name; a workspace-only
/// manifest or an unreadable one is none.
pub fn packages<'a>(
    repo: &std::path::Path,
    manifests: impl IntoIterator<Item = &'a str>,
) -> Vec<Package> {
    manifests
        .into_iter()
        .filter_map(|m| {
            let dir = m.strip_suffix("Cargo.toml")?;
            if !(dir.is_empty() || dir.ends_with('/')) {
                return None;
            }
            let text = std::fs::read_to_string(repo.join(m)).ok()?;
            parse_manifest(dir, &text)
        })
        .collect()
}

/// What [`packages`] reads from one manifest. Line-based (the keys read
/// are plain `key = …` lines in practice): dependency tables as `[dependencies]` with one
/// `key = …` line each (`key.workspace = true` too), or one
/// `[dependencies.key]` table each (the form `cargo publish` writes).
fn parse_manifest(dir: &str, manifest: &str) -> Option<Package> {
    #[derive(Clone, Copy, PartialEq)]
    enum Table {
        Package,
        Lib,
        Deps { dev: bool },
        Dep { dev: bool },
        Other,
    }
    let norm = |s: &str| {
        s.trim()
            .trim_matches('"')
            .trim_matches('\'')
            .replace('-', "_")
    };
    // `package = "real"` inside an inline table or a `[dependencies.key]` one.
    let renamed = |v: &str| -> Option<String> {
        let at = v.find("package")?;
        let rest = v[at + "package".len()..].trim_start().strip_prefix('=')?;
        let rest = rest.trim_start();
        let quote = rest.chars().next().filter(|c| *c == '"' || *c == '\'')?;
        let end = rest[1..].find(quote)?;
        Some(norm(&rest[1..=end]))
    };
    let mut pkg = Package {
        dir: dir.to_string(),
        ..Package::default()
    };
    let mut table = Table::Other;
    // The last `[dependencies.key]`: its key, to replace on a rename.
    let mut last: Option<String> = None;
    for line in manifest.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(header) = line.strip_prefix('[') {
            let header = header.trim_end_matches(']').trim();
            // `target.'cfg(unix)'.dependencies…` is `dependencies…` of a target.
            let header = match header.strip_prefix("target.") {
                Some(t) => ["dev-dependencies", "dependencies", "build-dependencies"]
                    .iter()
                    .find_map(|k| t.find(&format!(".{k}")).map(|i| &t[i + 1..]))
                    .unwrap_or(header),
                None => header,
            };
            table = match header {
                "package" => Table::Package,
                "lib" => Table::Lib,
                "dependencies" => Table::Deps { dev: false },
                "dev-dependencies" => Table::Deps { dev: true },
                h => {
                    let dev = h.starts_with("dev-");
                    match h.strip_prefix(if dev {
                        "dev-dependencies."
                    } else {
                        "dependencies."
                    }) {
                        Some(key) => {
                            last = Some(key.to_string());
                            Table::Dep { dev }
                        }
                        None => Table::Other,
                    }
                }
            };
            if let Table::Dep { dev } = table
                && let Some(key) = &last
            {
                pkg.dep_set(dev).insert(norm(key));
            }
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let key = key.trim();
        match table {
            Table::Package if key == "name" => pkg.name = norm(value),
            Table::Lib if key == "name" => pkg.lib_name = Some(norm(value)),
            Table::Lib if key == "proc-macro" || key == "proc_macro" => {
                pkg.proc_macro = value.trim() == "true";
            }
            Table::Deps { dev } => {
                let key = key.split('.').next().unwrap_or(key);
                let name = renamed(value).unwrap_or_else(|| norm(key));
                pkg.dep_set(dev).insert(name);
            }
            Table::Dep { dev } if key == "package" => {
                if let Some(old) = last.take() {
                    pkg.dep_set(dev).remove(&norm(&old));
                }
                pkg.dep_set(dev).insert(norm(value));
            }
            _ => {}
        }
    }
    (!pkg.name.is_empty()).then_some(pkg)
}

impl Package {
    fn dep_set(&mut self, dev: bool) -> &mut HashSet<String> {
        if dev {
            &mut self.dev_deps
        } else {
            &mut self.deps
        }
    }
}

/// The value of a `#[cfg(…)]` / `#![cfg(…)]` attribute in a default build
/// on this host, `None` when it is not a `cfg` or cannot be known here.
fn cfg_attribute(cx: &Cx, attr_item: Node) -> Option<bool> {
    let mut c = attr_item.walk();
    let attr = attr_item
        .named_children(&mut c)
        .find(|k| k.kind_name() == "attribute")?;
    let text = cx.t(attr).trim();
    let args = text.strip_prefix("cfg")?.trim_start();
    let inner = args.strip_prefix('(')?.strip_suffix(')')?;
    let mut p = CfgParser { rest: inner.trim() };
    let value = p.predicate()?;
    p.rest.trim().is_empty().then_some(value)?
}

/// Records the code a false `cfg` attribute compiles out: the item after an
/// outer attribute (other attributes and comments in between belong to
/// it), or everything around an inner one (`#![cfg(x)]` at the top of a
/// file or module).
fn compile_out(cx: &mut Cx, attr_item: Node) {
    let range = if attr_item.kind_name() == "inner_attribute_item" {
        attr_item.parent().map(|p| (p.start_byte(), p.end_byte()))
    } else {
        let mut next = attr_item.next_named_sibling();
        while let Some(k) = next
            && matches!(
                k.kind_name(),
                "attribute_item" | "line_comment" | "block_comment"
            )
        {
            next = k.next_named_sibling();
        }
        next.map(|item| (attr_item.start_byte(), item.end_byte()))
    };
    if let Some((start, end)) = range {
        cx.facts.disabled.push((start as u32, end as u32));
    }
}

/// `all` (`absorbing` false) or `any` (true) over three-valued operands:
/// one absorbing value decides; otherwise known only when every one is.
fn combine(values: &[Option<bool>], absorbing: bool) -> Option<bool> {
    if values.contains(&Some(absorbing)) {
        Some(absorbing)
    } else if values.iter().all(|v| *v == Some(!absorbing)) {
        Some(!absorbing)
    } else {
        None
    }
}

/// A `cfg` predicate reader: `name`, `key = "value"`, `not(p)`,
/// `all(p, …)`, `any(p, …)`, evaluated as a default `cargo build` on a
/// 64-bit Linux host sees them (what rust-analyzer shows by default):
/// `test`, `debug_assertions`, `unix` hold; every other bare name (`windows`,
/// `miri`, `docsrs`, and the flags build scripts set for old compilers)
/// does not; `feature = …` and other key-value pairs are unknown (`None`),
/// so nothing under them is compiled out.
struct CfgParser<'a> {
    rest: &'a str,
}

impl CfgParser<'_> {
    fn word(&mut self) -> Option<&str> {
        let s = self.rest.trim_start();
        let end = s
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(s.len());
        if end == 0 {
            return None;
        }
        self.rest = &s[end..];
        Some(&s[..end])
    }

    fn eat(&mut self, c: char) -> bool {
        let s = self.rest.trim_start();
        match s.strip_prefix(c) {
            Some(r) => {
                self.rest = r;
                true
            }
            None => false,
        }
    }

    /// Three-valued: `Some(Some(b))` known, `Some(None)` unknown, `None` unreadable.
    fn predicate(&mut self) -> Option<Option<bool>> {
        let name = self.word()?.to_string();
        if self.eat('(') {
            let mut values = Vec::new();
            if !self.eat(')') {
                loop {
                    values.push(self.predicate()?);
                    if self.eat(')') {
                        break;
                    }
                    if !self.eat(',') {
                        return None;
                    }
                    if self.eat(')') {
                        break; // trailing comma
                    }
                }
            }
            return match name.as_str() {
                "not" if values.len() == 1 => Some(values[0].map(|v| !v)),
                "all" => Some(combine(&values, false)),
                "any" => Some(combine(&values, true)),
                _ => None,
            };
        }
        if self.eat('=') {
            let s = self.rest.trim_start().strip_prefix('"')?;
            let close = s.find('"')?;
            self.rest = &s[close + 1..];
            return Some(None);
        }
        Some(Some(matches!(
            name.as_str(),
            "test" | "debug_assertions" | "unix"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifests_say_which_packages_a_package_reaches() {
        // The published form: one table per dependency, per target too.
        let macros = parse_manifest(
            "m/",
            "[package]\nname = \"my-macros\"\n\n[lib]\nproc-macro = true\n\n\
             [dependencies.syn]\nversion = \"2\"\n\n[dev-dependencies.my-lib]\npath = \"..\"\n",
        )
        .expect("a package");
        assert!(macros.proc_macro);
        assert_eq!(macros.name, "my_macros");
        assert_eq!(macros.deps, HashSet::from(["syn".to_string()]));
        assert_eq!(macros.dev_deps, HashSet::from(["my_lib".to_string()]));
        // The hand-written form: inline tables, renames, `workspace = true`,
        // target tables, comments.
        let lib = parse_manifest(
            "",
            "# a comment\n[package]\nname = 'my-lib'\n[dependencies]\n\
             my-macros = { path = \"m\" }\nutil2 = { package = \"my-util\", path = \"u\" }\n\
             serde.workspace = true\n\
             [target.'cfg(unix)'.dependencies]\nlibc = \"0.2\"\n\
             [target.\"cfg(unix)\".dev-dependencies.nix]\nversion = \"1\"\n\
             [dependencies.renamed]\npackage = \"real-name\"\n\
             [build-dependencies]\ncc = \"1\"\n",
        )
        .expect("a package");
        let deps: HashSet<String> = ["my_macros", "my_util", "serde", "libc", "real_name"]
            .map(String::from)
            .into();
        assert_eq!(lib.deps, deps);
        assert_eq!(lib.dev_deps, HashSet::from(["nix".to_string()]));
        assert!(!lib.proc_macro);
        let util = parse_manifest("u/", "[package]\nname = \"my-util\"\n").expect("a package");
        // `[lib] name` is what other crates `use`.
        let renamed_lib = parse_manifest(
            "r/",
            "[package]\nname = \"r-pkg\"\n[lib]\nname = \"r_core\"\n",
        )
        .expect("a package");
        assert_eq!(
            (renamed_lib.name.as_str(), renamed_lib.lib_name.as_deref()),
            ("r_pkg", Some("r_core"))
        );
        assert_eq!(lib.lib_name, None);
        // A workspace-only manifest is no package.
        assert_eq!(parse_manifest("", "[workspace]\nmembers = [\"a\"]\n"), None);

        // The library reaches its dependencies, never a proc-macro crate's
        // functions; the macro crate reaches the library from its tests only.
        assert!(lib.reaches("src/a.rs", &util));
        assert!(lib.reaches("src/a.rs", &lib));
        assert!(!lib.reaches("src/a.rs", &macros));
        assert!(!macros.reaches("m/src/lib.rs", &lib));
        assert!(macros.reaches("m/tests/t.rs", &lib));
        assert!(macros.reaches("m/src/lib.rs", &macros));
        assert!(!util.reaches("u/src/lib.rs", &lib));
    }

    fn eval(predicate: &str) -> Option<Option<bool>> {
        let mut p = CfgParser { rest: predicate };
        let v = p.predicate()?;
        p.rest.trim().is_empty().then_some(v)
    }

    #[test]
    fn cfg_predicates_are_evaluated_as_a_default_linux_build() {
        assert_eq!(eval("test"), Some(Some(true)));
        assert_eq!(eval("unix"), Some(Some(true)));
        assert_eq!(eval("windows"), Some(Some(false)));
        assert_eq!(eval("no_alloc_crate"), Some(Some(false)));
        assert_eq!(eval("not(miri)"), Some(Some(true)));
        assert_eq!(eval(r#"feature = "std""#), Some(None));
        assert_eq!(eval(r#"not(feature = "std")"#), Some(None));
        assert_eq!(
            eval(r#"all(unix, not(windows), feature = "x")"#),
            Some(None)
        );
        assert_eq!(eval(r#"all(windows, feature = "x")"#), Some(Some(false)));
        assert_eq!(eval(r#"any(docsrs, feature = "x")"#), Some(None));
        assert_eq!(eval("any(docsrs, test,)"), Some(Some(true)));
        assert_eq!(eval("any()"), Some(Some(false)));
        // Unreadable: left alone.
        assert_eq!(eval("all(unix"), None);
        assert_eq!(eval("= \"x\""), None);
    }

    #[test]
    fn a_false_cfg_compiles_out_the_item_or_the_whole_file() {
        let src = "#[cfg(windows)]\n#[inline]\nfn a() { b(); }\n\n#[cfg(feature = \"x\")]\nfn c() { d(); }\n\nfn e() { f(); }\n";
        let facts = crate::lang::parse_file("src/x.rs", src.as_bytes())
            .facts
            .expect("rust has fact rules");
        let names: Vec<&str> = facts.sites.iter().map(|s| s.name.as_str()).collect();
        assert!(!names.contains(&"b"), "{names:?}");
        assert!(names.contains(&"d") && names.contains(&"f"), "{names:?}");
        let fn_a_end = src.find("\n\n#[cfg(feature").unwrap() as u32;
        assert_eq!(facts.disabled, [(0, fn_a_end)]);

        let file = "#![cfg(miri)]\nuse x::y;\nfn g() { h(); }\n";
        let facts = crate::lang::parse_file("src/m.rs", file.as_bytes())
            .facts
            .expect("rust has fact rules");
        assert!(
            facts.sites.is_empty() && facts.imports.is_empty(),
            "{facts:?}"
        );
        assert_eq!(facts.disabled, [(0, file.len() as u32)]);
    }
}
