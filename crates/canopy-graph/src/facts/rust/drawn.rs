//! The inputs a property-test macro's `fn` draws with `in` (`fn t(mut
//! table in table(), width in 0..100u16) { … }`, `fn s()(x in other()) ->
//! T { … }`): no Rust parameter list, so the macro body's items are
//! parsed without these lists (`lang::extract`'s `binding_lists`) and
//! their tokens are read here. Each name drawn is a local of the function,
//! bound to what the strategy call gives (`table` to `table()`), so a
//! bare `table` is that local, not the strategy function of the same name.

use tree_sitter::Node;

use super::super::walker::{Cx, GrammarLookup};

/// The `fn` parameter lists of token tree `tt` that bind with `in`: each
/// name drawn, bound at its token (its scope is the function).
pub(super) fn drawn_bindings(cx: &mut Cx, tt: Node) {
    let mut c = tt.walk();
    let kids: Vec<Node> = tt.children(&mut c).collect();
    let is_list = |cx: &Cx, n: &Node| n.kind_name() == "token_tree" && cx.t(*n).starts_with('(');
    let mut i = 0;
    while i + 2 < kids.len() {
        if cx.t(kids[i]) != "fn" || kids[i + 1].kind_name() != "identifier" {
            i += 1;
            continue;
        }
        let mut j = i + 2;
        while j < kids.len() && is_list(cx, &kids[j]) {
            list_bindings(cx, kids[j]);
            j += 1;
        }
        i = j;
    }
}

/// `pat in strategy, …` inside one parenthesized list (none when no
/// top-level `in`), each name bound at its token. (So a strategy called
/// as the name it draws, `table in table()`, reads the local: that call
/// stays unresolved.)
fn list_bindings(cx: &mut Cx, list: Node) {
    let mut c = list.walk();
    let tokens: Vec<Node> = list.children(&mut c).collect();
    let inner = tokens.get(1..tokens.len().saturating_sub(1)).unwrap_or(&[]);
    let commas: Vec<bool> = inner.iter().map(|t| cx.t(*t) == ",").collect();
    let mut groups = Vec::new();
    let mut start = 0;
    for (i, &comma) in commas.iter().enumerate() {
        if comma {
            groups.push(&inner[start..i]);
            start = i + 1;
        }
    }
    groups.push(&inner[start..]);
    for group in groups {
        let Some(at) = group
            .iter()
            .position(|t| t.kind_name() != "token_tree" && cx.t(*t) == "in")
        else {
            continue;
        };
        let (pattern, strategy) = (&group[..at], &group[at + 1..]);
        match pattern {
            // `x in s()`, `mut x in s()`: the strategy's call result.
            [.., name] if name.kind_name() == "identifier" => {
                let value = strategy_call(cx, strategy).unwrap_or_else(|| "?".to_string());
                let local = cx.t(*name).to_string();
                cx.bind(name.start_byte(), &local, Some(value), false, false);
            }
            // `(a, b) in s()`: names whose values are not read.
            [tuple] if tuple.kind_name() == "token_tree" => tuple_names(cx, *tuple),
            _ => {}
        }
    }
}

/// `f()` for a strategy written as a call of a plain name (`table()`),
/// as the facts write a call's value.
fn strategy_call(cx: &Cx, strategy: &[Node]) -> Option<String> {
    match strategy {
        [f, args] if f.kind_name() == "identifier" && cx.t(*args).starts_with('(') => {
            Some(format!("{}()", cx.t(*f)))
        }
        _ => None,
    }
}

/// Every identifier of a tuple pattern, bound to nothing known.
fn tuple_names(cx: &mut Cx, tuple: Node) {
    let mut c = tuple.walk();
    let kids: Vec<Node> = tuple.children(&mut c).collect();
    for k in kids {
        match k.kind_name() {
            "identifier" => {
                let local = cx.t(k).to_string();
                cx.bind(k.start_byte(), &local, Some("?".to_string()), false, false);
            }
            "token_tree" => tuple_names(cx, k),
            _ => {}
        }
    }
}
