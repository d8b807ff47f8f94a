//! Rust: which facts a file states.
//!
//! Facts: calls (`f()`, `a.f()`, `A::f()`, turbofish, also inside macro
//! arguments that parse as expressions ([`args`]), else `f(` / `a.f(` read
//! from the macro's tokens), other path and identifier uses, type
//! references, `use` trees (`self`, `super`, `crate`, aliases, globs),
//! `let` bindings (`let p = Parser::new()`, `let p: T`), typed parameters,
//! struct fields, return types, `impl Trait for Type`, supertraits. The
//! bindings that patterns, loops and closures make are in [`bindings`];
//! code compiled out by `cfg` is found by [`cfg`].

mod args;
mod bindings;
mod callbacks;
mod cfg;
mod drawn;

use tree_sitter::Node;

use super::model::{
    BLANKET, Binding, DefFactKind, ELEM, IMPORT_RECV, LITERAL, PATH_HEAD, RETURNED, STD_WRAPPER,
    SiteKind, TRAIT_HINT, TUPLE, UFCS_SEP,
};
use super::walker::{Cx, GrammarLookup, Up, walk_tree_pruned};
pub(crate) use bindings::ADAPTERS;
use bindings::{
    bind_bounded, bind_items, closure_bindings, for_bindings, for_body_bindings, ordered_fields,
    scrutinee_node, struct_pattern_bindings, tuple_bindings, tuple_struct_bindings,
};
pub(crate) use cfg::{CfgEnv, holds_in, names_a_build_key};
use cfg::{build_cfg, cfg_attribute, compile_out};

/// `S { f: Default::default(), ..Default::default() }`, `let x: T =
/// Default::default()`, `fn new() -> Self { Default::default() }`: the type
/// whose `default` is called, as an expression (`S.f` — the field's type —
/// or `S()`, `T()`, `Self()`). `up`: the call's ancestors.
fn default_target(cx: &Cx, call: Node, up: &Up) -> Option<String> {
    let parent = up.parent()?;
    if let Some(t) = expected_type(cx, call, parent, up) {
        return Some(format!("{t}()"));
    }
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

/// The type a value at `call` must have, where its place says so: `let x:
/// T = call`, `return call` or `call` as a function body's last
/// expression (`-> T`, `Self` too). Not through a wrapper (`Option<T>`'s
/// default is no `T`'s).
fn expected_type(cx: &Cx, call: Node, parent: Node, up: &Up) -> Option<String> {
    let t = match parent.kind_name() {
        "let_declaration" if parent.field("value") == Some(call) => parent.field("type")?,
        "return_expression" => {
            let f = up
                .iter()
                .find(|a| matches!(a.kind_name(), "function_item" | "closure_expression"))?;
            f.field("return_type")?
        }
        "block" => {
            let mut c = parent.walk();
            let last = parent
                .named_children(&mut c)
                .filter(|k| !k.kind_name().ends_with("comment"))
                .last();
            let f = up.nth(1)?;
            if last != Some(call) || f.kind_name() != "function_item" {
                return None;
            }
            f.field("return_type")?
        }
        _ => return None,
    };
    match t.kind_name() {
        "type_identifier" | "scoped_type_identifier" => type_expr(cx, t),
        "generic_type" => {
            let base = t.field("type")?;
            let name = type_expr(cx, base)?;
            let last = name.rsplit('.').next().unwrap_or_default();
            (!TRANSPARENT.contains(&last)).then_some(name)
        }
        _ => None,
    }
}

/// Smart pointers a method call sees through (`Box<T>` → `T`).
///
/// `Option` and `Result` are seen through too, so that `x?`, `if let Some(t) = x`
/// and `x.unwrap()` reach the payload; [`PASSTHROUGH`] names the unwrapping methods.
/// So are the standard library's locks, their guards and lazy cells
/// ([`DEREF_WRAPPERS`]): `Mutex<T>::lock` gives a `LockResult<MutexGuard<T>>`,
/// `unwrap` its guard, and the guard derefs to the `T`.
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
    "Mutex",
    "RwLock",
    "MutexGuard",
    "RwLockReadGuard",
    "RwLockWriteGuard",
    "LockResult",
    "TryLockResult",
    "Weak",
    "OnceLock",
    "OnceCell",
    "Lazy",
    "LazyLock",
    "LazyCell",
];

/// The [`TRANSPARENT`] wrappers that hold one value and deref to it (or
/// lock to it), whose items are the held value's items
/// (`Arc<Mutex<Vec<T>>>`: a `T`).
pub(crate) const DEREF_WRAPPERS: &[&str] = &[
    "Box",
    "Rc",
    "Arc",
    "RefCell",
    "Mutex",
    "RwLock",
    "MutexGuard",
    "RwLockReadGuard",
    "RwLockWriteGuard",
    "Weak",
    "Lazy",
    "LazyLock",
    "LazyCell",
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
    // `Option::take`: the `Option` itself (`if let Some(v) = self.v.take()`).
    "take",
    // `Option::replace` (the `Option` before), `get_or_insert_with` (the payload).
    "replace",
    "get_or_insert",
    "get_or_insert_with",
    // A lock's guard (`Mutex::lock`, `RwLock::read` / `write`, their `try_`
    // forms), a `Weak`'s `upgrade`, a cell's value.
    "lock",
    "try_lock",
    "read",
    "write",
    "try_read",
    "try_write",
    "upgrade",
    "get_or_init",
    "into_inner",
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
            if let Some(t) = parsed_type(cx, n.field("function")?) {
                return Some(format!("{t}()"));
            }
            if let Some(inner) = wrapped_map(cx, n).or_else(|| wrapper_made(cx, n)) {
                return expr(cx, inner);
            }
            if let Some(body) = and_then_body(cx, n) {
                return Some(body);
            }
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
        "unary_expression" if cx.t(n).starts_with('*') => {
            let inner = expr(cx, n.named_child(0)?)?;
            if inner == "self"
                && let Some(t) = deref_self(cx, n)
            {
                return Some(t);
            }
            Some(inner)
        }
        "try_expression" | "parenthesized_expression" | "unary_expression" => {
            expr(cx, n.named_child(0)?)
        }
        "await_expression" => expr(cx, n.named_child(0)?),
        // `v[i]`: an item of `v` (`self.indices[probe].resolve()`,
        // `STD[j].as_str()`). `v[a..b]` is none: a range of a `String` is
        // a `str`, of a `Vec<T>` a `[T]`, not another `v`.
        "index_expression" => {
            let index = n.named_child(1)?;
            if index.kind_name() == "range_expression" {
                return None;
            }
            Some(format!("{}{ELEM}", expr(cx, n.named_child(0)?)?))
        }
        _ => None,
    }
}

/// `ops.get()` of `i.checked_sub(1).and_then(|idx| ops.get(idx))`: what an
/// `Option` / `Result`'s `and_then` gives is its closure's value (both
/// are transparent), when the closure's body is an expression that does
/// not start at one of its parameters (`|x| x.next()`: `x` is no name
/// outside the closure).
fn and_then_body(cx: &Cx, call: Node) -> Option<String> {
    let f = call.field("function")?;
    if f.kind_name() != "field_expression" || cx.t(f.field("field")?) != "and_then" {
        return None;
    }
    let args = call.field("arguments")?;
    let closure = args
        .named_child(0)
        .filter(|c| c.kind_name() == "closure_expression" && args.named_child_count() == 1)?;
    let body = closure.field("body")?;
    let value = expr(cx, body)?;
    let head = value.split('.').next().unwrap_or_default();
    let head = head.strip_suffix("()").unwrap_or(head);
    let params = closure.field("parameters")?;
    let mut c = params.walk();
    let shadowed = params.named_children(&mut c).any(|p| {
        cx.t(p)
            .trim_start_matches(['&', ' '])
            .trim_start_matches("mut ")
            == head
    });
    (!shadowed).then_some(value)
}

/// `x` of `x.map(Cow::Borrowed)` (`Box::new`, `Some`, …: a constructor
/// of a [`TRANSPARENT`] wrapper): the payload stays what it was.
fn wrapped_map<'t>(cx: &Cx, call: Node<'t>) -> Option<Node<'t>> {
    let f = call.field("function")?;
    if f.kind_name() != "field_expression" || cx.t(f.field("field")?) != "map" {
        return None;
    }
    let args = call.field("arguments")?;
    if args.named_child_count() != 1 {
        return None;
    }
    let arg = args.named_child(0)?;
    let wrapper = match arg.kind_name() {
        "identifier" => matches!(cx.t(arg), "Some" | "Ok"),
        "scoped_identifier" => {
            let ty = arg.field("path").map(|p| cx.t(p)).unwrap_or_default();
            let ty = ty.rsplit("::").next().unwrap_or_default();
            TRANSPARENT.contains(&ty)
                && matches!(
                    cx.t(arg.field("name")?),
                    "new" | "Borrowed" | "Owned" | "from"
                )
        }
        _ => false,
    };
    wrapper.then(|| f.field("value")).flatten()
}

/// `x` of `Arc::new(x)`, `Rc::clone(&x)`, `Mutex::new(x)`, `Arc::downgrade(&x)`:
/// a [`DEREF_WRAPPERS`] value made of (or sharing) one value, which
/// method calls see through to it.
fn wrapper_made<'t>(cx: &Cx, call: Node<'t>) -> Option<Node<'t>> {
    let f = call.field("function")?;
    if f.kind_name() != "scoped_identifier" {
        return None;
    }
    let ty = cx.t(f.field("path")?);
    let ty = ty.rsplit("::").next().unwrap_or_default();
    let made = matches!(
        cx.t(f.field("name")?),
        "new" | "clone" | "from" | "pin" | "downgrade"
    );
    let args = call.field("arguments")?;
    (DEREF_WRAPPERS.contains(&ty) && made && args.named_child_count() == 1)
        .then(|| args.named_child(0))
        .flatten()
}

/// The type `T` of the function of a call `s.parse::<T>()` (`FromStr`:
/// the call gives a `T`, or a `Result` of one).
fn parsed_type(cx: &Cx, f: Node) -> Option<String> {
    if f.kind_name() != "generic_function" {
        return None;
    }
    let method = f.field("function")?;
    if method.kind_name() != "field_expression" || cx.t(method.field("field")?) != "parse" {
        return None;
    }
    type_expr(cx, f.field("type_arguments")?.named_child(0)?)
}

/// Whether array expression `a` holds bytes: byte literals (`b'/'`) and
/// integers without a suffix, one of them a byte literal, or integers
/// suffixed `u8` (`[0xc0u8]`).
fn byte_array(cx: &Cx, a: Node) -> bool {
    let mut c = a.walk();
    let (mut bytes, mut any) = (false, false);
    for e in a.named_children(&mut c) {
        let t = cx.t(e);
        match e.kind_name() {
            "char_literal" if t.starts_with("b'") => bytes = true,
            "integer_literal" if t.ends_with("u8") => bytes = true,
            "integer_literal" if !t.contains(['i', 'u']) => {}
            _ => return false,
        }
        any = true;
    }
    any && bytes
}

/// A literal's type as [`LITERAL`] writes it (`#lit:str` for `"x"`).
fn literal_type(cx: &Cx, n: Node) -> Option<String> {
    let t = match n.kind_name() {
        "string_literal" | "raw_string_literal" => "str",
        "integer_literal" => "int",
        "float_literal" => "float",
        "boolean_literal" => "bool",
        "char_literal" => "char",
        "reference_expression" => return literal_type(cx, n.field("value")?),
        "parenthesized_expression" => return literal_type(cx, n.named_child(0)?),
        "range_expression" => "Range",
        // `&b"abc"[..]` / `&"abc"[..]`: a slice of a literal.
        "index_expression" => {
            let (value, index) = (n.named_child(0)?, n.named_child(1)?);
            if index.kind_name() != "range_expression" {
                return None;
            }
            match value.kind_name() {
                "string_literal" if cx.t(value).starts_with('b') => "[u8]",
                "string_literal" => "str",
                // `&[b'/', 0xFF][..]`: a slice of an array of bytes.
                "array_expression" if byte_array(cx, value) => "[u8]",
                _ => return None,
            }
        }
        // `vec![…]`, `b"…".to_vec()`: a `Vec` (the type as a parameter writes it).
        "macro_invocation" if n.field("macro").is_some_and(|m| cx.t(m) == "vec") => "Vec",
        "call_expression"
            if n.field("function")
                .filter(|f| f.kind_name() == "field_expression")
                .and_then(|f| f.field("field"))
                .is_some_and(|m| cx.t(m) == "to_vec") =>
        {
            "Vec"
        }
        _ => return None,
    };
    Some(format!("{LITERAL}{t}"))
}

/// `*self` / `**self` (`n`, the outermost `*`) inside an `impl … for &T`
/// (or `&mut T`) / `impl … for Box<T>` (`Rc`, `Arc`) whose `T` is a type
/// parameter of the impl: `T` (a value of its bound, the resolver reads),
/// once enough `*` reach it (one through a reference, two through a box;
/// fewer call the impl's own method). `None` otherwise.
fn deref_self(cx: &Cx, n: Node) -> Option<String> {
    let mut derefs = 0;
    let mut cur = Some(n);
    while let Some(u) = cur.filter(|u| {
        matches!(
            u.kind_name(),
            "unary_expression" | "parenthesized_expression"
        )
    }) {
        derefs += usize::from(u.kind_name() == "unary_expression");
        cur = u.named_child(0);
    }
    let mut item = n.parent();
    while let Some(p) = item
        && p.kind_name() != "impl_item"
    {
        item = p.parent();
    }
    let item = item?;
    let ty = item.field("type")?;
    let (param, needed) = match ty.kind_name() {
        "reference_type" => (ty.field("type")?, 1),
        "generic_type" if matches!(cx.t(ty.field("type")?), "Box" | "Rc" | "Arc") => {
            (ty.field("type_arguments")?.named_child(0)?, 2)
        }
        _ => return None,
    };
    if param.kind_name() != "type_identifier" || derefs < needed {
        return None;
    }
    let name = cx.t(param);
    let params = item.field("type_parameters")?;
    let mut c = params.walk();
    let declared = params.named_children(&mut c).any(|p| {
        let id = if p.kind_name() == "type_identifier" {
            Some(p)
        } else {
            p.field("name")
        };
        id.is_some_and(|id| cx.t(id) == name)
    });
    declared.then(|| name.to_string())
}

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
                && let Some(first) = first_type_argument(args)
            {
                // `Box<[u8]>` stays a `Box`: no repository type is inside,
                // and a `From<Box<[u8]>>` is not a `From<&[u8]>`.
                let inner = type_expr(cx, first);
                if !inner.as_deref().is_some_and(|t| t.starts_with('[')) {
                    return inner;
                }
            }
            Some(name)
        }
        // `&str`, `usize`: a name the resolver finds nothing for, but
        // which says the value is no unknown (no guess on its methods).
        "primitive_type" => Some(cx.t(n).to_string()),
        // `[u8]` (a slice, as `&[u8]` writes it): a builtin; an array
        // `[u8; 4]` stays unknown.
        "array_type" if n.field("length").is_none() => {
            Some(format!("[{}]", type_expr(cx, n.field("element")?)?))
        }
        "reference_type" | "pointer_type" => type_expr(cx, n.field("type")?),
        "abstract_type" | "dynamic_type" => {
            let t = n.field("trait").or_else(|| n.named_child(0))?;
            type_expr(cx, t)
        }
        "bounded_type" => type_expr(cx, n.named_child(0)?),
        // `&(impl Tr + ?Sized)`, `&(dyn Tr + Sync)`: a type in parentheses
        // (the grammar's one-element tuple; `(T,)` is a tuple).
        "tuple_type"
            if n.named_child_count() == 1
                && !cx.t(n).trim_end_matches(')').trim_end().ends_with(',') =>
        {
            type_expr(cx, n.named_child(0)?)
        }
        _ => None,
    }
}

/// The first type argument of `<…>` that is no lifetime (`MutexGuard<'_,
/// T>`: `T`).
fn first_type_argument(args: Node) -> Option<Node> {
    let mut c = args.walk();
    args.named_children(&mut c)
        .find(|a| a.kind_name() != "lifetime")
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

/// One item of a `use` tree under `prefix` (the path its lists are in;
/// empty at the root, where a path is first [`rebased`] on `inline`, the
/// inline modules the `use` stands in).
fn use_tree(cx: &mut Cx, stmt: Node, n: Node, prefix: &str, inline: &[String]) {
    // `use a::{b, *}`: the glob inside a list has no path of its own, so
    // it is the list's prefix (`a`), not `a.` (a module no file has).
    let join = |p: &str, s: &str| {
        if p.is_empty() {
            rebased(s, inline)
        } else if s.is_empty() {
            p.to_string()
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
                cx.site(n, Some(format!("{IMPORT_RECV}{prefix}")), SiteKind::Import);
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
                cx.site(
                    name,
                    Some(format!("{IMPORT_RECV}{module}")),
                    SiteKind::Import,
                );
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
                cx.site(
                    name,
                    Some(format!("{IMPORT_RECV}{module}")),
                    SiteKind::Import,
                );
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
                    use_tree(cx, stmt, item, &module, inline);
                }
            }
        }
        "use_list" => {
            let mut c = n.walk();
            let items: Vec<Node> = n.named_children(&mut c).collect();
            for item in items {
                use_tree(cx, stmt, item, prefix, inline);
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
    token_tree_calls_from(cx, tt, 0);
}

/// [`token_tree_calls`] over the tokens of `tt` from byte `from` on (those
/// before were read as code: `matches!`'s first argument).
fn token_tree_calls_from(cx: &mut Cx, tt: Node, from: usize) {
    let mut c = tt.walk();
    let kids: Vec<Node> = tt
        .children(&mut c)
        .filter(|k| k.start_byte() >= from)
        .collect();
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

/// Walks one Rust tree.
pub(crate) fn walk(cx: &mut Cx, root: Node) {
    walk_with(cx, root, true);
}

/// [`walk`]; `prune`: skip the subtrees no handler reads (compiled-out
/// code and [`unread_below`]; `false` only to test that skipping them
/// changes nothing).
fn walk_with(cx: &mut Cx, root: Node, prune: bool) {
    // The end of the macro arguments last read as code ([`args`]): the
    // tokens before it were read from their parse, not token by token.
    let mut read_to = 0;
    walk_tree_pruned(root, &mut |n, up| {
        // Inside an item compiled out by its `cfg`: no facts, nor in any
        // node below. Ranges are found in walk order and do not overlap,
        // so the last one is the only one that can hold this node.
        if let Some(&(start, end)) = cx.facts.disabled.last()
            && n.start_byte() as u32 >= start
            && n.end_byte() as u32 <= end
        {
            return !prune;
        }
        if n.start_byte() < read_to {
            return true;
        }
        // Read once: the handlers' match and the pruning test both need it.
        let kind = n.kind_name();
        if kind == "token_tree"
            && let Some(invocation) = up.parent()
            && invocation.kind_name() == "macro_invocation"
            && let Some(parsed) = args::parse_args(cx, invocation, n)
        {
            if let Some(expression) = parsed.node() {
                walk_with(cx, expression, prune);
            }
            token_tree_calls_from(cx, n, parsed.rest);
            read_to = parsed.rest;
            return true;
        }
        walk_node(cx, n, kind, up);
        !(prune && unread_below(cx, n, kind))
    });
}

/// Whether no handler of [`walk`] acts on any node below `n`: then the
/// walk does not enter it.
/// * Literals and comments hold only their content, escapes and doc
///   markers.
/// * A `use` item's names are declarations ([`is_declaration_name`],
///   [`in_use_tree`]) that [`use_declaration`] reads through its fields;
///   but not a glob's path (`use a::*`: the identifier `a` under
///   `use_wildcard` is a use), nor a `pub(in path)` visibility's path.
///
/// Not a subtree with a syntax error in it: error recovery can put any node
/// anywhere.
fn unread_below(cx: &Cx, n: Node, kind: &str) -> bool {
    match kind {
        "string_literal" | "raw_string_literal" | "char_literal" | "line_comment"
        | "block_comment" => !n.has_error(),
        "use_declaration" => {
            let text = cx.t(n);
            !n.has_error()
                && !text.contains('*')
                && !text
                    .split('(')
                    .skip(1)
                    .any(|inside| inside.trim_start().starts_with("in"))
        }
        _ => false,
    }
}

/// Hands one node to the handler of its kind (`kind`, `n`'s).
fn walk_node<'t>(cx: &mut Cx, n: Node<'t>, kind: &str, up: &Up<'_, 't>) {
    match kind {
        "attribute_item" | "inner_attribute_item" if cfg_attribute(cx, n) == Some(false) => {
            compile_out(cx, n);
        }
        "attribute_item" => build_cfg(cx, n),
        "call_expression" => call(cx, n, up),
        "token_tree" => {
            token_tree_calls(cx, n);
            drawn::drawn_bindings(cx, n);
        }
        "scoped_identifier" => scoped_identifier(cx, n, up),
        "tuple_struct_pattern" => tuple_struct_bindings(cx, n, up),
        "closure_expression" => closure_bindings(cx, n, up),
        "match_pattern" => match_pattern(cx, n, up),
        "struct_pattern" => struct_pattern_bindings(cx, n),
        "type_parameter" => type_parameter(cx, n),
        "where_predicate" => where_predicate(cx, n, up),
        "ordered_field_declaration_list" => positional_fields(cx, n, up),
        "identifier" => identifier(cx, n, up),
        "type_identifier" => type_identifier(cx, n, up),
        "scoped_type_identifier" => scoped_type(cx, n),
        "use_declaration" => use_declaration(cx, n, up),
        "let_declaration" => let_declaration(cx, n),
        "parameter" => parameter(cx, n),
        "field_declaration" => field_declaration(cx, n),
        "const_item" | "static_item" => constant_item(cx, n),
        "for_expression" => for_bindings(cx, n),
        "block" => for_body_bindings(cx, n, up),
        "function_item" | "function_signature_item" => function(cx, n),
        "impl_item" => impl_item(cx, n),
        "type_item" => type_item(cx, n),
        "mod_item" => mod_item(cx, n),
        "associated_type" => associated_type(cx, n),
        "trait_item" => trait_item(cx, n),
        _ => {}
    }
}

/// `f()`, `a.f()`, `A::f()`, turbofish: a call site of the name called; a path
/// call's receiver carries its first argument (`UFCS_SEP`) or, for
/// `Default::default()` in a struct expression, the type it makes.
fn call<'t>(cx: &mut Cx, n: Node<'t>, up: &Up<'_, 't>) {
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
                // A literal receiver (`"x".f()`, `(0..n).f()`) is a std value.
                let recv = f
                    .field("value")
                    .and_then(|v| expr(cx, v).or_else(|| literal_type(cx, v)));
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
                    .and_then(|a| expr(cx, a).or_else(|| literal_type(cx, a)));
                let recv = match (recv, first_arg) {
                    (Some(r), Some(a)) if !r.contains(TRAIT_HINT) => {
                        Some(format!("{r}{UFCS_SEP}{a}"))
                    }
                    (Some(r), _) if r == "Default" && cx.t(name) == "default" => {
                        default_target(cx, n, up).or(Some(r))
                    }
                    // No first argument, or none the walker can write
                    // (`thread::current()`, `mem::replace(&mut v[i], x)`):
                    // still a path, never a value of unknown type.
                    (Some(r), None) if !r.contains(TRAIT_HINT) => Some(format!("{r}{UFCS_SEP}")),
                    (r, _) => r,
                };
                cx.site(name, recv.or_else(|| Some("?".into())), SiteKind::Call);
            }
        }
        _ => {}
    }
}

/// `a::b` outside a `use` and not called: a use of `b` on `a`, and of the head `a`.
fn scoped_identifier<'t>(cx: &mut Cx, n: Node<'t>, up: &Up<'_, 't>) {
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

/// `e => …`: a catch-all arm names the scrutinee.
fn match_pattern<'t>(cx: &mut Cx, n: Node<'t>, up: &Up<'_, 't>) {
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

/// `<T: Trait>`: `T` stands for its first trait.
fn type_parameter(cx: &mut Cx, n: Node) {
    if let (Some(name), Some(bounds)) = (n.field("name"), n.field("bounds")) {
        bind_bounded(cx, n, name, bounds);
    }
}

/// `where T: Trait`: as a bound in the parameter list.
fn where_predicate<'t>(cx: &mut Cx, n: Node<'t>, up: &Up<'_, 't>) {
    if let (Some(left), Some(bounds)) = (n.field("left"), n.field("bounds"))
        && left.kind_name() == "type_identifier"
    {
        // Visible from the start of the item it constrains: the
        // parameters before the `where` use it.
        let item = up.nth(1).unwrap_or(n);
        bind_bounded(cx, item, left, bounds);
    }
}

/// `struct S(A, B)` and `Variant(A, B)`: positional fields.
fn positional_fields<'t>(cx: &mut Cx, n: Node<'t>, up: &Up<'_, 't>) {
    let variant = up
        .parent()
        .filter(|p| p.kind_name() == "enum_variant")
        .and_then(|p| p.field("name"))
        .map(|v| cx.t(v).to_string());
    ordered_fields(cx, n, variant.as_deref());
}

/// A name that is no declaration nor a field access: a use.
fn identifier<'t>(cx: &mut Cx, n: Node<'t>, up: &Up<'_, 't>) {
    if let Some(p) = up.parent()
        && !is_declaration_name(n, p)
        && p.kind_name() != "field_expression"
    {
        cx.site(n, None, SiteKind::Other);
    }
}

/// A type name that is no declaration: a type use.
fn type_identifier<'t>(cx: &mut Cx, n: Node<'t>, up: &Up<'_, 't>) {
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

/// `a::T` in a type: a type use of `T` on `a`.
fn scoped_type(cx: &mut Cx, n: Node) {
    if let Some(name) = n.field("name") {
        let recv = n.field("path").and_then(|p| path_head(cx, p));
        cx.site(name, recv, SiteKind::Type);
    }
}

/// A `use` item: see [`use_tree`].
fn use_declaration<'t>(cx: &mut Cx, n: Node<'t>, up: &Up<'_, 't>) {
    let Some(arg) = n.field("argument") else {
        return;
    };
    // The inline `mod name { … }` blocks around the item, outermost first.
    let mut inline: Vec<String> = up
        .iter()
        .filter(|a| a.kind_name() == "mod_item" && a.field("body").is_some())
        .filter_map(|a| a.field("name").map(|m| cx.t(m).to_string()))
        .collect();
    inline.reverse();
    use_tree(cx, n, arg, "", &inline);
}

/// A `use` path written inside the inline modules `inline` (outermost
/// first) as a path from the file's own module: `self::x` is
/// `self_mod.a.b.x` inside `mod a { mod b { … } }`, `super::x` is
/// `self_mod.a.x` there, and `super::super::x` is the file's `self_mod.x`;
/// a `super` beyond the inline modules stays one. Resolution reads every
/// import of a file from the file's module, so `pub use super::parse_it`
/// in a `pub mod _benchable { … }` of the crate root re-exports the root's
/// `parse_it`, not its parent's.
fn rebased(path: &str, inline: &[String]) -> String {
    let segs: Vec<&str> = path.split('.').collect();
    let ups = segs.iter().take_while(|s| **s == "super").count();
    if inline.is_empty() || (ups == 0 && segs[0] != "self_mod") {
        return path.to_string();
    }
    let inline = inline.iter().map(String::as_str);
    let (head, rest): (Vec<&str>, &[&str]) = if ups == 0 {
        (
            std::iter::once("self_mod").chain(inline).collect(),
            &segs[1..],
        )
    } else if ups <= inline.len() {
        let kept = inline.len() - ups;
        (
            std::iter::once("self_mod")
                .chain(inline.take(kept))
                .collect(),
            &segs[ups..],
        )
    } else {
        (vec!["super"; ups - inline.len()], &segs[ups..])
    };
    head.into_iter()
        .chain(rest.iter().copied())
        .collect::<Vec<_>>()
        .join(".")
}

/// `let x: T` / `let x = v` (and a tuple pattern, [`tuple_bindings`]):
/// visible from the end of the statement; `let x = x` binds nothing new.
fn let_declaration(cx: &mut Cx, n: Node) {
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
        // `let v = vec![…]`: a literal's type (`#lit:Vec`), which chooses
        // among `From` impls where `v` is passed.
        let e = expr(cx, v).or_else(|| literal_type(cx, v));
        // `let x = std::mem::replace(x, y)`, `let x = x`: the same value,
        // so the binding `x` had holds on (a binding to its own name would
        // read as unknown).
        if e.as_deref() == Some(name.as_str()) {
            return;
        }
        cx.bind(n.end_byte(), &name, e, false, false);
    }
}

/// `p: T`: `p` is a `T` (and its items, if `T` is a collection); a
/// function's parameter of a callback type also types the parameters of
/// the closures passed there ([`callbacks`]).
fn parameter(cx: &mut Cx, n: Node) {
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
    callbacks::callback_parameter_types(cx, n);
}

/// A struct field `f: T`.
fn field_declaration(cx: &mut Cx, n: Node) {
    if let (Some(name), Some(t)) = (n.field("name"), n.field("type")) {
        let name = cx.t(name).to_string();
        bind_items(cx, n.start_byte(), &name, t, true);
        let t = type_expr(cx, t);
        cx.bind(n.start_byte(), &name, t, true, true);
    }
}

/// `static NAME: T = …;` / `const NAME: T = …;` (and `lazy_static!`'s
/// `static ref`): the item's unit holds a `T` (read by
/// `World::constant_value`, so `NAME.len()` is `T`'s `len`). Bound at the
/// name, inside the item's unit.
fn constant_item(cx: &mut Cx, n: Node) {
    if let (Some(name), Some(t)) = (n.field("name"), n.field("type")) {
        let at = name.start_byte();
        let name = cx.t(name).to_string();
        // `const STD: &[HeaderName]`: what `STD[j]` holds.
        bind_items(cx, at, &name, t, false);
        let t = type_expr(cx, t);
        cx.bind(at, &name, t, true, false);
    }
}

/// A function's return type (or tuple of types), and the items of what it
/// returns (`-> Vec<T>`: `#ret#elem`, see [`RETURNED`]).
fn function(cx: &mut Cx, n: Node) {
    if let (Some(name), Some(r)) = (n.field("name"), n.field("return_type")) {
        let t = return_type(cx, r);
        cx.def_fact(name, t, DefFactKind::Returns);
        bind_items(cx, name.start_byte(), RETURNED, r, false);
    }
}

/// `dyn Tr` of `Box<dyn Tr>` (a [`DEREF_WRAPPERS`] type of a trait object).
fn boxed_object<'t>(cx: &Cx, t: Node<'t>) -> Option<Node<'t>> {
    if t.kind_name() != "generic_type" || !DEREF_WRAPPERS.contains(&cx.t(t.field("type")?)) {
        return None;
    }
    let object = first_type_argument(t.field("type_arguments")?)?;
    let object = match object.kind_name() {
        "bounded_type" => object.named_child(0)?,
        _ => object,
    };
    (object.kind_name() == "dynamic_type").then_some(object)
}

/// `impl Trait for Type`: the trait the impl implements; `impl … for
/// crate::X`: the type's path.
fn impl_item(cx: &mut Cx, n: Node) {
    let Some(t) = n.field("type") else {
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
    let Some(name) = name else {
        return;
    };
    if name.kind_name() == "type_identifier"
        && let Some(path) = name
            .parent()
            .filter(|p| p.kind_name() == "scoped_type_identifier")
    {
        cx.def_fact(name, type_expr(cx, path), DefFactKind::ImplType);
    }
    if let Some(object) = boxed_object(cx, t) {
        // `impl Clone for Box<dyn Tr>`: `self` is a `dyn Tr`, with `Tr`'s
        // methods (`self.clone_box()`).
        cx.def_fact(name, type_expr(cx, object), DefFactKind::ImplType);
    }
    if let Some(tr) = n.field("trait") {
        cx.def_fact(name, type_expr(cx, tr), DefFactKind::ImplTrait);
        if is_own_parameter(cx, n, t) {
            // `impl<T: ?Sized> Ext for T`: every type has the trait.
            let own = format!("{}{STD_WRAPPER}", cx.t(t));
            cx.bind(t.start_byte(), &own, Some(BLANKET.to_string()), true, false);
        }
    }
}

/// Whether the type `t` an impl block `n` is for is one of the block's own
/// type parameters (`impl<T> Tr for T`).
fn is_own_parameter(cx: &Cx, n: Node, t: Node) -> bool {
    if t.kind_name() != "type_identifier" {
        return false;
    }
    let Some(params) = n.field("type_parameters") else {
        return false;
    };
    let mut c = params.walk();
    params.named_children(&mut c).any(|p| {
        let name = match p.kind_name() {
            "type_parameter" | "constrained_type_parameter" => p.field("name").or(p.named_child(0)),
            "type_identifier" => Some(p),
            _ => None,
        };
        name.is_some_and(|x| cx.t(x) == cx.t(t))
    })
}

/// `type A = B;`: members of `A` are those of `B`.
fn type_item(cx: &mut Cx, n: Node) {
    // `type A = B;`: members of `A` are those of `B`.
    if let (Some(name), Some(t)) = (n.field("name"), n.field("type")) {
        let e = type_expr(cx, t);
        cx.def_fact(name, e, DefFactKind::Base);
        // `type Pairs = IndexMap<Key, Item>`: the alias's items (`#k`,
        // `#v`) are fields of the alias, read through a field or local of
        // the alias type (`self.items#k`, `items: Pairs`).
        bind_items(cx, t.start_byte(), "", t, true);
    }
}

/// `#[path = "lexical/math.rs"] mod math;` at a file's top level: where
/// the module's file is (read by the resolver's module table).
fn mod_item(cx: &mut Cx, n: Node) {
    if n.field("body").is_some() || n.parent().is_none_or(|p| p.kind_name() != "source_file") {
        return;
    }
    let Some(name) = n.field("name") else {
        return;
    };
    let mut prev = n.prev_named_sibling();
    while let Some(a) = prev
        && a.kind_name() == "attribute_item"
    {
        let text = cx.t(a);
        let inner = text.trim_start_matches("#[").trim_end_matches(']').trim();
        if let Some(rest) = inner.strip_prefix("path")
            && let Some(value) = rest.trim_start().strip_prefix('=')
            && let Some(path) = value
                .trim()
                .strip_prefix('"')
                .and_then(|v| v.strip_suffix('"'))
        {
            cx.def_fact(name, Some(path.to_string()), DefFactKind::ModulePath);
            return;
        }
        prev = a.prev_named_sibling();
    }
}

/// `type Config: Config;` in a trait: the associated type's members are
/// its first bound's (a trait), so `self.config().encode_padding()`, with
/// `fn config(&self) -> &Self::Config`, finds the bound trait's method.
fn associated_type(cx: &mut Cx, n: Node) {
    let (Some(name), Some(bounds)) = (n.field("name"), n.field("bounds")) else {
        return;
    };
    let mut c = bounds.walk();
    let first = bounds.named_children(&mut c).find_map(|b| type_expr(cx, b));
    if first.is_some() {
        cx.def_fact(name, first, DefFactKind::Base);
    }
}

/// A trait's supertraits: its bases.
fn trait_item(cx: &mut Cx, n: Node) {
    let (Some(name), Some(bounds)) = (n.field("name"), n.field("bounds")) else {
        return;
    };
    let mut c = bounds.walk();
    for b in bounds.named_children(&mut c) {
        let e = type_expr(cx, b);
        cx.def_fact(name, e, DefFactKind::Base);
    }
}

#[cfg(test)]
mod tests {
    use super::super::walker::{fixture_sources, walked_facts};
    use crate::lang::Language;

    /// The facts of a Rust walk, entering every subtree or not.
    fn walked(source: &str, prune: bool) -> super::super::FileFacts {
        walked_facts(Language::Rust, source, |cx, root| {
            super::walk_with(cx, root, prune)
        })
    }

    /// Skipping literals, comments, `use` items and compiled-out code
    /// leaves every fact as it was, in the same order: on globs and
    /// `pub(in path)` paths (whose names are uses), macros whose arguments
    /// hold strings, syntax errors, and every Rust fixture of the
    /// repository.
    #[test]
    fn skipped_subtrees_hold_no_facts() {
        let source = r###"
#![allow(dead_code)]
use std::collections::HashMap;
use crate::a::{b::{self, C as D}, e};
pub(crate) use super::f::G;
use glob::*;
use nested::{inner::*, other};
pub(in crate::vis) use h::I;
pub( in vis2 ) use j::K;
/// Docs with `code()` and [`Link`].
//! Inner docs.
/* block /* nested */ call() */
const S: &str = "escaped \" \n {not_called()}";
const R: &str = r#"raw "quoted" {x()}"#;
const C: char = '\'';
#[cfg(any())]
fn gone() { compiled_out(); use also::*; }
#[cfg(any())]
use gone::*;
mod m {
    #![cfg(any())]
    fn inner() { hidden(); }
}
fn f(x: Thing) -> Other {
    println!("{} {x}", g(x.y()));
    let s = format!("{}", "lit");
    assert_eq!(s, "lit", "message {}", h());
    use local::Imported;
    Imported::new(S, R, C)
}
fn broken() { let s = "unclosed; use half::{a b}; call_after(); }
use after::{error
"###;
        assert_eq!(walked(source, true), walked(source, false));
        let facts = walked(source, true);
        let sites: Vec<&str> = facts.sites.iter().map(|s| s.name.as_str()).collect();
        for used in ["glob", "inner", "vis2", "g", "h", "Thing", "Imported"] {
            assert!(sites.contains(&used), "{used} in {sites:?}");
        }
        for unseen in ["not_called", "compiled_out", "hidden"] {
            assert!(!sites.contains(&unseen), "{unseen} in {sites:?}");
        }

        let fixtures = fixture_sources(&["rs"]);
        for (path, text) in &fixtures {
            assert_eq!(
                walked(text, true),
                walked(text, false),
                "{}",
                path.display()
            );
        }
        assert!(fixtures.len() >= 20, "{} Rust fixtures", fixtures.len());
    }

    /// A `use` inside inline modules names its `self` and `super` paths
    /// from the file's module (`self_mod`); outside them, and for other
    /// paths, the path stays as written.
    #[test]
    fn use_paths_in_inline_modules_start_at_the_file_module() {
        let source = r#"
use super::top;
pub mod a {
    pub use super::parse_it;
    pub use self::inner::Deep;
    pub use crate::iter::Bytes;
    use super::super::far;
    pub mod b {
        use super::super::{one, two::Three};
        pub use super::*;
    }
}
"#;
        let facts = walked(source, true);
        let modules: Vec<(&str, &str)> = facts
            .imports
            .iter()
            .map(|i| (i.local.as_str(), i.module.as_str()))
            .collect();
        assert_eq!(
            modules,
            [
                ("top", "super"),
                ("parse_it", "self_mod"),
                ("Deep", "self_mod.a.inner"),
                ("Bytes", "crate.iter"),
                ("far", "super"),
                ("one", "self_mod"),
                ("Three", "self_mod.two"),
                ("*", "self_mod.a"),
            ]
        );
    }
}
