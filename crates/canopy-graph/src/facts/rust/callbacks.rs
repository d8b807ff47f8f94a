//! Closures typed by the function they are passed to. A function's
//! parameter whose type is an `Fn` / `FnMut` / `FnOnce` signature (a type
//! parameter bounded by one, `F: FnMut(&K, &V) -> bool` or `where F: …`;
//! `impl Fn(&K)`; `&dyn Fn(&K)`; `Box<dyn Fn(&K)>`; `fn(&K)`) binds, in
//! the function, the types that signature gives a callback's parameters
//! (`#arg:i#arg:j`, see [`ARG`]); a closure passed as argument `i` of a
//! call binds its untyped parameter `j` to `callee#arg:i#arg:j`, which the
//! resolver reads through the callee it finds (`World::contextual_parameter`,
//! as ECMAScript's callbacks).

use tree_sitter::Node;

use super::super::model::ARG;
use super::super::walker::{Cx, GrammarLookup, Up};
use super::{expr, type_expr};

/// The `Fn(A, B)` signature (a `function_type` node) that parameter type
/// `t` of function item `f` names, if any.
fn callback_signature<'t>(cx: &Cx, f: Node<'t>, t: Node<'t>) -> Option<Node<'t>> {
    match t.kind_name() {
        "function_type" => Some(t),
        "reference_type" => callback_signature(cx, f, t.field("type")?),
        "abstract_type" | "dynamic_type" => {
            let tr = t.field("trait").or_else(|| t.named_child(0))?;
            fn_in_bound(tr)
        }
        "generic_type" if cx.t(t.field("type")?) == "Box" => {
            callback_signature(cx, f, t.field("type_arguments")?.named_child(0)?)
        }
        "type_identifier" => type_parameter_signature(cx, f, cx.t(t)),
        _ => None,
    }
}

/// The `Fn(…)` among a bound (`Fn(&K) -> bool + Sync` is a bounded type).
fn fn_in_bound(b: Node) -> Option<Node> {
    match b.kind_name() {
        "function_type" => Some(b),
        "bounded_type" | "trait_bounds" => {
            let mut c = b.walk();
            let parts: Vec<Node> = b.named_children(&mut c).collect();
            parts.into_iter().find_map(fn_in_bound)
        }
        _ => None,
    }
}

/// The `Fn(…)` bound of `f`'s type parameter `name`, in its parameter list
/// (`<F: FnMut(&K)>`) or its `where` clause (`where F: FnMut(&K)`).
fn type_parameter_signature<'t>(cx: &Cx, f: Node<'t>, name: &str) -> Option<Node<'t>> {
    if let Some(params) = f.field("type_parameters") {
        let mut c = params.walk();
        for p in params.named_children(&mut c) {
            if p.field("name").is_some_and(|n| cx.t(n) == name)
                && let Some(sig) = p.field("bounds").and_then(fn_in_bound)
            {
                return Some(sig);
            }
        }
    }
    let mut c = f.walk();
    let clause = f
        .named_children(&mut c)
        .find(|k| k.kind_name() == "where_clause")?;
    let mut c = clause.walk();
    let predicates: Vec<Node> = clause.named_children(&mut c).collect();
    predicates.into_iter().find_map(|w| {
        w.field("left")
            .filter(|l| cx.t(*l) == name)
            .and_then(|_| w.field("bounds"))
            .and_then(fn_in_bound)
    })
}

/// Parameter `n` (a `parameter` node) of a function item whose type is a
/// callback signature: binds `#arg:i#arg:j` to the type the signature gives
/// the callback's parameter `j` (`i`: `n`'s position among the function's
/// parameters, `self` not counted, as a method call's arguments are).
pub(super) fn callback_parameter_types(cx: &mut Cx, n: Node) {
    let Some(list) = n.parent().filter(|l| l.kind_name() == "parameters") else {
        return;
    };
    let Some(f) = list
        .parent()
        .filter(|f| matches!(f.kind_name(), "function_item" | "function_signature_item"))
    else {
        return;
    };
    let Some(t) = n.field("type") else {
        return;
    };
    let Some(sig) = callback_signature(cx, f, t) else {
        return;
    };
    let mut c = list.walk();
    let Some(i) = list
        .named_children(&mut c)
        .filter(|p| p.kind_name() == "parameter")
        .position(|p| p == n)
    else {
        return;
    };
    let Some(ps) = sig.field("parameters") else {
        return;
    };
    let mut c = ps.walk();
    let types: Vec<Node> = ps
        .named_children(&mut c)
        .filter(|p| p.kind_name() != "attribute_item")
        .collect();
    for (j, p) in types.into_iter().enumerate() {
        // `fn(x: A)` names its parameters; `Fn(A)` gives types only.
        let pt = if p.kind_name() == "parameter" {
            p.field("type")
        } else {
            Some(p)
        };
        let value = pt.and_then(|pt| type_expr(cx, pt));
        cx.bind(
            n.start_byte(),
            &format!("{ARG}{i}{ARG}{j}"),
            value,
            true,
            false,
        );
    }
}

/// The expression closure `n` stands for as argument `i` of the call it is
/// passed to (`callee#arg:i`), when it is one (`f(a, |x| …)`,
/// `m.retain(|k, v| …)`; `up`: `n`'s ancestors).
pub(super) fn callback_context(cx: &Cx, n: Node, up: &Up) -> Option<String> {
    let args = up.parent().filter(|a| a.kind_name() == "arguments")?;
    let call = up.nth(1).filter(|c| c.kind_name() == "call_expression")?;
    let callee = expr(cx, call.field("function")?)?;
    let mut c = args.walk();
    let i = args
        .named_children(&mut c)
        .filter(|a| {
            !matches!(
                a.kind_name(),
                "attribute_item" | "line_comment" | "block_comment"
            )
        })
        .position(|a| a == n)?;
    Some(format!("{callee}{ARG}{i}"))
}
