//! Go: which facts a file states.
//!
//! Facts: calls (`f()`, `x.F()`, `pkg.F()`), other identifier and selector
//! uses, type references, imports (with names), `:=` / `var` bindings
//! (`p := &Parser{}`, `t := NewTree()`), typed parameters and receivers,
//! struct fields, embedded fields and interfaces (as bases), result types
//! (several as a tuple, named one by one by `a, err := f()`), the items of
//! typed slices, maps and variadic parameters, and of named slice and map
//! types, `range` values as items, the types of constants, and the
//! `package` clause.

use tree_sitter::Node;

use super::model::{
    AT, DefFactKind, ELEM, FIRST_KNOWN, KEY, RETURNED, SiteKind, TUPLE, UNBOUND, VALUE,
};
use super::walker::{Cx, GrammarLookup, Up, walk_tree_pruned};

/// The normalised expression of a value node.
pub(crate) fn expr(cx: &Cx, n: Node) -> Option<String> {
    match n.kind_name() {
        "identifier" => Some(cx.t(n).to_string()),
        "selector_expression" => {
            let o = expr(cx, n.field("operand")?)?;
            Some(format!("{o}.{}", cx.t(n.field("field")?)))
        }
        "call_expression" => Some(format!("{}()", expr(cx, n.field("function")?)?)),
        "composite_literal" => Some(format!("{}()", type_expr(cx, n.field("type")?)?)),
        "unary_expression" => expr(cx, n.field("operand")?),
        "parenthesized_expression" => expr(cx, n.named_child(0)?),
        "type_assertion_expression" => Some(format!("{}()", type_expr(cx, n.field("type")?)?)),
        // `blocks[i]`: an element of a slice or array (`blocks#elem`; for a
        // call, `f()#elem`, an item of what it returns).
        "index_expression" => Some(format!("{}{ELEM}", expr(cx, n.field("operand")?)?)),
        _ => None,
    }
}

/// The normalised name of a type node (`*pkg.T[int]` → `pkg.T`).
pub(crate) fn type_expr(cx: &Cx, n: Node) -> Option<String> {
    match n.kind_name() {
        "type_identifier" | "identifier" => Some(cx.t(n).to_string()),
        "pointer_type" | "parenthesized_type" => type_expr(cx, n.named_child(0)?),
        "qualified_type" => Some(format!(
            "{}.{}",
            cx.t(n.field("package")?),
            cx.t(n.field("name")?)
        )),
        "generic_type" => type_expr(cx, n.field("type")?),
        "parameter_list" => {
            let first = n.named_child(0)?;
            type_expr(cx, first.field("type")?)
        }
        _ => None,
    }
}

fn is_declaration_name(n: Node, parent: Node) -> bool {
    let field_is = |f: &str| parent.field(f) == Some(n);
    match parent.kind_name() {
        "function_declaration"
        | "const_spec"
        | "var_spec"
        | "parameter_declaration"
        | "variadic_parameter_declaration" => {
            field_is("name")
                || parent.kind_name() != "function_declaration" && {
                    let mut c = parent.walk();
                    parent
                        .children_by_field_name("name", &mut c)
                        .any(|x| x == n)
                }
        }
        "call_expression" => field_is("function"),
        "selector_expression" => true,
        "labeled_statement" | "break_statement" | "continue_statement" | "goto_statement" => true,
        "keyed_element" | "literal_element" => false,
        _ => false,
    }
}

/// Walks one Go tree. A file whose build constraints a default build here
/// does not meet ([`super::go_build::header_builds`]) is compiled out as a
/// whole, as a Rust `#![cfg(…)]` file: its units are no definitions and
/// it has no sites.
pub(crate) fn walk(cx: &mut Cx, root: Node) {
    walk_with(cx, root, true);
}

/// [`walk`]; `prune`: skip the subtrees no handler reads (see
/// [`unread_below`]; `false` only to test that skipping them changes
/// nothing).
fn walk_with(cx: &mut Cx, root: Node, prune: bool) {
    if root.kind_name() == "source_file" && header_builds(cx, root) == Some(false) {
        let mut c = root.walk();
        let package = root
            .named_children(&mut c)
            .find(|k| k.kind_name() == "package_clause")
            .and_then(|p| p.named_child(0));
        cx.facts.package = package.map(|id| cx.t(id).to_string());
        cx.facts.disabled.push((0, cx.text.len() as u32));
        return;
    }
    walk_tree_pruned(root, &mut |n, up| {
        // Read once: the handlers' match and the pruning test both need it.
        let kind = n.kind_name();
        visit(cx, n, kind, up);
        !(prune && unread_below(n, kind))
    });
    // In source order: a type switch binds its cases and its end when the
    // walk reaches it, before the bindings inside its cases (a nested
    // switch's end would otherwise outlive the next case of the outer one).
    cx.facts.bindings.sort_by_key(|b| b.byte);
}

/// Whether no handler of [`walk`] acts on any node below `n`: a literal
/// (its content and escapes), or an import spec, whose name and path
/// [`import_spec`] reads through its fields (the name is a
/// `package_identifier`, `.` or `_`, no `identifier`). Not a subtree with a
/// syntax error in it: error recovery can put any node anywhere.
fn unread_below(n: Node, kind: &str) -> bool {
    matches!(
        kind,
        "interpreted_string_literal" | "raw_string_literal" | "rune_literal" | "import_spec"
    ) && !n.has_error()
}

/// Hands one node to the handler of its kind (`kind`, `n`'s).
fn visit<'t>(cx: &mut Cx, n: Node<'t>, kind: &str, up: &Up<'_, 't>) {
    match kind {
        "package_clause" => {
            if let Some(id) = n.named_child(0) {
                cx.facts.package = Some(cx.t(id).to_string());
            }
        }
        "call_expression" => call(cx, n),
        "selector_expression" => selector(cx, n, up),
        "identifier" => identifier(cx, n, up),
        "type_identifier" => type_identifier(cx, n, up),
        "qualified_type" => qualified_type(cx, n),
        "import_spec" => import_spec(cx, n),
        // `a = x` binds nothing: see [`short_var_declaration`].
        "short_var_declaration" => short_var_declaration(cx, n),
        "range_clause" => range(cx, n),
        "var_spec" | "parameter_declaration" | "variadic_parameter_declaration" => {
            declaration(cx, n)
        }
        "const_spec" => constant(cx, n),
        "type_switch_statement" => type_switch(cx, n),
        "type_spec" => named_collection(cx, n),
        "field_declaration" => field_declaration(cx, n, up),
        "type_elem" | "constraint_elem" => interface_element(cx, n, up),
        "function_declaration" | "method_declaration" | "method_elem" => function(cx, n),
        _ => {}
    }
}

/// `f()`, `x.F()`, `pkg.F()`: a call site of the name called.
fn call(cx: &mut Cx, n: Node) {
    let Some(f) = n.field("function") else {
        return;
    };
    match f.kind_name() {
        "identifier" => cx.site(f, None, SiteKind::Call),
        "selector_expression" => {
            if let Some(field) = f.field("field") {
                let recv = f.field("operand").and_then(|o| expr(cx, o));
                cx.site(field, recv.or_else(|| Some("?".into())), SiteKind::Call);
            }
        }
        _ => {}
    }
}

/// `x.f` not called: a use of `f` on `x`.
fn selector<'t>(cx: &mut Cx, n: Node<'t>, up: &Up<'_, 't>) {
    let called = up
        .parent()
        .is_some_and(|p| p.kind_name() == "call_expression" && p.field("function") == Some(n));
    if !called && let Some(field) = n.field("field") {
        let recv = n.field("operand").and_then(|o| expr(cx, o));
        if let Some(recv) = recv {
            cx.site(field, Some(recv), SiteKind::Other);
        }
    }
}

/// A name that is no declaration (nor declared by `:=`): a use.
fn identifier<'t>(cx: &mut Cx, n: Node<'t>, up: &Up<'_, 't>) {
    if let Some(p) = up.parent()
        && !is_declaration_name(n, p)
        && !matches!(cx.t(n), "nil" | "true" | "false" | "_" | "iota")
    {
        // `x := …` declares x; `x = …` uses it.
        let declared = p.kind_name() == "expression_list"
            && up.nth(1).is_some_and(|d| {
                d.kind_name() == "short_var_declaration" && d.field("left") == Some(p)
            });
        if !declared {
            cx.site(n, None, SiteKind::Other);
        }
    }
}

/// A type name that is no declaration: a type use.
fn type_identifier<'t>(cx: &mut Cx, n: Node<'t>, up: &Up<'_, 't>) {
    if let Some(p) = up.parent()
        && !(p.kind_name() == "type_spec" && p.field("name") == Some(n))
        && p.kind_name() != "qualified_type"
        && p.kind_name() != "type_parameter_declaration"
    {
        cx.site(n, None, SiteKind::Type);
    }
}

/// `pkg.T` in a type: a type use of `T` on `pkg`.
fn qualified_type(cx: &mut Cx, n: Node) {
    if let (Some(p), Some(name)) = (n.field("package"), n.field("name")) {
        let recv = cx.t(p).to_string();
        cx.site(name, Some(recv), SiteKind::Type);
    }
}

/// `import name "path"` (the last path segment when unnamed; `.` a glob; `_` nothing).
fn import_spec(cx: &mut Cx, n: Node) {
    let Some(path) = n.field("path") else {
        return;
    };
    let module = cx
        .t(path)
        .trim_matches(|c| c == '"' || c == '`')
        .to_string();
    let local = match n.field("name") {
        Some(name) => cx.t(name).to_string(),
        None => module.rsplit('/').next().unwrap_or_default().to_string(),
    };
    if local == "_" {
        return;
    }
    let local = if local == "." { "*".to_string() } else { local };
    cx.import(n, &local, &module, None);
}

/// `a, b := x, y`: each name is its value (one value: the first name).
/// An assignment `a = x` binds nothing: a Go variable's static type is
/// fixed where it is declared (`:=`, `var`, a parameter), and a later
/// assignment of a value of another type (`file =
/// mem.NewReadOnlyFileHandle(…)` into a `File` interface variable) does not
/// change which methods its calls mean.
fn short_var_declaration(cx: &mut Cx, n: Node) {
    let (Some(l), Some(r)) = (n.field("left"), n.field("right")) else {
        return;
    };
    let mut c = l.walk();
    let lefts: Vec<Node> = l.named_children(&mut c).collect();
    let mut c = r.walk();
    let rights: Vec<Node> = r.named_children(&mut c).collect();
    if rights.len() == 1 && lefts.len() > 1 && rights[0].kind_name() == "call_expression" {
        results(cx, n, &lefts, rights[0]);
        return;
    }
    let pairs: Vec<(Node, Node)> = if rights.len() == lefts.len() {
        lefts.into_iter().zip(rights).collect()
    } else if rights.len() == 1 && !lefts.is_empty() {
        vec![(lefts[0], rights[0])]
    } else {
        Vec::new()
    };
    for (l, r) in pairs {
        if l.kind_name() == "identifier" {
            let name = cx.t(l).to_string();
            let e = bound_value(cx, r);
            cx.bind(n.start_byte(), &name, e, false, false);
        }
    }
}

/// The value a declared name is bound to: [`expr`], except that an
/// element by index (`s := m[k]`) is a slice's or array's element, else a
/// map's value ([`VALUE`]), whichever the operand's type has.
fn bound_value(cx: &Cx, v: Node) -> Option<String> {
    if v.kind_name() == "index_expression" {
        let o = expr(cx, v.field("operand")?)?;
        if !o.contains(FIRST_KNOWN) {
            return Some(format!("{o}{ELEM}{FIRST_KNOWN}{o}{VALUE}"));
        }
    }
    expr(cx, v)
}

/// `a, err := f()` / `_, seg := r.PeekLine()`: the `i`th name is the `i`th
/// result of the function called (`f.#1`, see [`TUPLE`]). The first name
/// falls back on the call's value (`f()`), for a callee whose results are
/// not known as a list (a function value).
fn results(cx: &mut Cx, n: Node, lefts: &[Node], call: Node) {
    let Some(callee) = call.field("function").and_then(|f| expr(cx, f)) else {
        return;
    };
    for (i, l) in lefts.iter().enumerate() {
        if l.kind_name() != "identifier" || cx.t(*l) == "_" {
            continue;
        }
        let name = cx.t(*l).to_string();
        let e = if i == 0 {
            format!("{callee}.#0{FIRST_KNOWN}{callee}()")
        } else {
            format!("{callee}.#{i}")
        };
        cx.bind(n.start_byte(), &name, Some(e), false, false);
    }
}

/// `for k, v := range xs`: `v` is an item of `xs` (a slice's element or a
/// map's value: [`ELEM`], else [`VALUE`]), `k` a map's key ([`KEY`]; a
/// slice's index is an `int`), when `xs` is a name or a member path (no
/// call).
fn range(cx: &mut Cx, n: Node) {
    let (Some(l), Some(r)) = (n.field("left"), n.field("right")) else {
        return;
    };
    // `for k, v = range xs` assigns variables declared before: their
    // declarations type them (see [`short_var_declaration`]).
    if !declares(n) {
        return;
    }
    let Some(source) = expr(cx, r).filter(|e| !e.contains("()")) else {
        return;
    };
    let mut c = l.walk();
    let lefts: Vec<Node> = l.named_children(&mut c).collect();
    for (i, v) in lefts.iter().enumerate().take(2) {
        if v.kind_name() != "identifier" || cx.t(*v) == "_" {
            continue;
        }
        let e = if i == 0 {
            format!("{source}{KEY}")
        } else {
            format!("{source}{ELEM}{FIRST_KNOWN}{source}{VALUE}")
        };
        let name = cx.t(*v).to_string();
        cx.bind(n.start_byte(), &name, Some(e), false, false);
    }
}

/// `switch x := v.(type) { case *T: … }`: in a case of one type, `x` is
/// that type; in a case of several, `nil` or `default`, it is `v` (as the
/// language types it). After the switch `x` is out of scope, so the name is
/// what it was where the switch starts ([`AT`]): the outer `v` when `x`
/// shadows `v` itself (`switch sel := sel.(type)`), the outer `x` when it
/// shadows another name (`switch n := next.(type)` inside a case whose `n`
/// is a `*Range`), nothing when there was none.
fn type_switch(cx: &mut Cx, n: Node) {
    let Some(alias) = n
        .field("alias")
        .and_then(|a| a.named_child(0))
        .filter(|a| a.kind_name() == "identifier")
    else {
        return;
    };
    let name = cx.t(alias).to_string();
    let operand = n
        .field("value")
        .and_then(|v| expr(cx, v))
        .map(|v| format!("{AT}{}:{v}", n.start_byte()));
    let mut c = n.walk();
    let cases: Vec<Node> = n
        .named_children(&mut c)
        .filter(|k| matches!(k.kind_name(), "type_case" | "default_case"))
        .collect();
    for case in cases {
        let mut c = case.walk();
        let types: Vec<Node> = case.children_by_field_name("type", &mut c).collect();
        let one = match types[..] {
            [t] if cx.t(t) != "nil" => type_expr(cx, t),
            _ => None,
        };
        match one {
            Some(t) => cx.bind(case.start_byte(), &name, Some(t), true, false),
            // An operand no expression is read of: unknown, not the type
            // of the case above.
            None => {
                let e = operand.clone().unwrap_or_else(|| UNBOUND.to_string());
                cx.bind(case.start_byte(), &name, Some(e), false, false);
            }
        }
    }
    let outer = format!("{AT}{}:{name}", n.start_byte());
    cx.bind(n.end_byte(), &name, Some(outer), false, false);
}

/// Whether a `range` clause declares its variables (`:=`), not assigns them (`=`).
fn declares(n: Node) -> bool {
    let mut c = n.walk();
    n.children(&mut c).any(|k| k.kind_name() == ":=")
}

/// Binds what a collection type holds to pseudo-fields of `name`: a slice's
/// or array's element (`name#elem`), a map's key and value (`name#k`,
/// `name#v`). A map's element by index (`m[k]`, which [`expr`] writes
/// `m#elem`) is its value, so a map's `name#elem` is the value type too.
fn bind_items(cx: &mut Cx, at: usize, name: &str, t: Node, field: bool) {
    let t = match t.kind_name() {
        "parenthesized_type" | "pointer_type" => match t.named_child(0) {
            Some(inner) => inner,
            None => return,
        },
        _ => t,
    };
    match t.kind_name() {
        "slice_type" | "array_type" => {
            let e = t.field("element").and_then(|e| type_expr(cx, e));
            cx.bind(at, &format!("{name}{ELEM}"), e, true, field);
        }
        "map_type" => {
            let k = t.field("key").and_then(|k| type_expr(cx, k));
            cx.bind(at, &format!("{name}{KEY}"), k, true, field);
            let v = t.field("value").and_then(|v| type_expr(cx, v));
            cx.bind(at, &format!("{name}{VALUE}"), v.clone(), true, field);
            cx.bind(at, &format!("{name}{ELEM}"), v, true, field);
        }
        _ => {}
    }
}

/// The expressions of a `var` or `const` spec's `value` list, in order
/// (none without one).
fn values_of(spec: Node) -> Vec<Node> {
    spec.field("value").map_or_else(Vec::new, |v| {
        let mut c = v.walk();
        v.named_children(&mut c).collect()
    })
}

/// `var a T = v`, parameters: each name is its type, else its value.
fn declaration(cx: &mut Cx, n: Node) {
    let mut c = n.walk();
    let names: Vec<Node> = n.children_by_field_name("name", &mut c).collect();
    let ty = n.field("type").and_then(|t| type_expr(cx, t));
    let values = values_of(n);
    // `var a, b = f()`: the results of one call, by position, as `a, b :=
    // f()` reads them.
    if ty.is_none()
        && names.len() > 1
        && values.len() == 1
        && values[0].kind_name() == "call_expression"
    {
        results(cx, n, &names, values[0]);
        return;
    }
    let variadic = n.kind_name() == "variadic_parameter_declaration";
    for (i, name) in names.into_iter().enumerate() {
        // `var a, b = x, y`: each name its own value; with fewer values
        // than names (not valid Go) only the first name has one.
        let value = values
            .get(i)
            .filter(|_| i == 0 || values.len() > 1)
            .and_then(|v| bound_value(cx, *v));
        let name = cx.t(name).to_string();
        if let Some(t) = n.field("type") {
            if variadic {
                // `opts ...Option`: a slice of its type.
                let e = type_expr(cx, t);
                cx.bind(n.start_byte(), &format!("{name}{ELEM}"), e, true, false);
            } else {
                bind_items(cx, n.start_byte(), &name, t, false);
            }
        }
        if ty.is_some() {
            cx.bind(n.start_byte(), &name, ty.clone(), true, false);
        } else {
            cx.bind(n.start_byte(), &name, value, false, false);
        }
    }
}

/// `type Trackers []*Tracker`, `type Index map[string]Entry`: what the
/// named type holds are fields of its unit (`#elem`, `#k`, `#v`, see
/// [`bind_items`]), bound where the type is declared, so an element of a
/// value of the type (`ts[i]`, `for _, t := range ts`) is read as the
/// element of a field of an alias is.
fn named_collection(cx: &mut Cx, n: Node) {
    if let Some(t) = n.field("type") {
        bind_items(cx, n.start_byte(), "", t, true);
    }
}

/// `const a, b T = x, y`: each name is its type, else its value. In a
/// parenthesised `const` block, a spec with neither type nor value repeats
/// the nearest spec above it that has a value, type included (the
/// language's implicit repetition: `AlignLeft` after `AlignDefault Align =
/// iota` is an `Align`). A constant is a unit; the binding says what it
/// holds (see `World::constant_value`).
fn constant(cx: &mut Cx, n: Node) {
    let mut spec = n;
    while spec.field("value").is_none() {
        // The spec above, past comments (`AlignRight // "  right"`).
        let mut above = spec.prev_named_sibling();
        while let Some(c) = above.filter(|c| c.kind_name() == "comment") {
            above = c.prev_named_sibling();
        }
        match above.filter(|p| p.kind_name() == "const_spec") {
            Some(p) => spec = p,
            None => return,
        }
    }
    let ty = spec.field("type").and_then(|t| type_expr(cx, t));
    let values = values_of(spec);
    let mut c = n.walk();
    let names: Vec<Node> = n.children_by_field_name("name", &mut c).collect();
    for (i, name) in names.into_iter().enumerate() {
        let name = cx.t(name).to_string();
        match &ty {
            Some(_) => cx.bind(n.start_byte(), &name, ty.clone(), true, false),
            None => {
                let value = values.get(i).and_then(|v| bound_value(cx, *v));
                cx.bind(n.start_byte(), &name, value, false, false);
            }
        }
    }
}

/// Struct fields (typed), and embedded fields (bases: their methods are promoted).
fn field_declaration<'t>(cx: &mut Cx, n: Node<'t>, up: &Up<'_, 't>) {
    let mut c = n.walk();
    let names: Vec<Node> = n.children_by_field_name("name", &mut c).collect();
    let ty = n.field("type").and_then(|t| type_expr(cx, t));
    if names.is_empty() {
        // An embedded field: its methods are promoted to the struct, and
        // it is a field named by its type (`html.Config` → `c.Config`).
        if let Some(t) = &ty {
            let field = t.rsplit('.').next().unwrap_or(t).to_string();
            cx.bind(n.start_byte(), &field, ty.clone(), true, true);
        }
        if let Some(spec) = up.iter().find(|p| p.kind_name() == "type_spec")
            && let Some(name) = spec.field("name")
        {
            cx.def_fact(name, ty, DefFactKind::Base);
        }
        return;
    }
    for name in names {
        let name = cx.t(name).to_string();
        if let Some(t) = n.field("type") {
            bind_items(cx, n.start_byte(), &name, t, true);
        }
        cx.bind(n.start_byte(), &name, ty.clone(), true, true);
    }
}

/// An interface embedded in an interface: a base.
fn interface_element<'t>(cx: &mut Cx, n: Node<'t>, up: &Up<'_, 't>) {
    if up
        .parent()
        .is_some_and(|p| p.kind_name() == "interface_type")
        && let Some(spec) = up.iter().find(|p| p.kind_name() == "type_spec")
        && let Some(name) = spec.field("name")
        && let Some(t) = n.named_child(0)
    {
        let e = type_expr(cx, t);
        cx.def_fact(name, e, DefFactKind::Base);
    }
}

/// A function's or method's result type; several results as a [`TUPLE`]
/// (`(*Square, error)` → `#tuple(Square;error)`), whose call is no value
/// itself, but whose `i`th result a multi-value assignment names.
fn function(cx: &mut Cx, n: Node) {
    if let (Some(name), Some(r)) = (n.field("name"), n.field("result")) {
        let t = match result_types(cx, r) {
            Some(types) if types.len() > 1 => Some(format!("{TUPLE}{})", types.join(";"))),
            _ => type_expr(cx, r),
        };
        cx.def_fact(name, t, DefFactKind::Returns);
        // `-> []Block`: what a call returns has items (`#ret#elem`).
        bind_items(cx, name.start_byte(), RETURNED, r, false);
    }
}

/// The result types of a result list, one per result (`(a, b int, err
/// error)` is three; empty where unknown); `None` for a single result
/// type written without parentheses.
fn result_types(cx: &Cx, r: Node) -> Option<Vec<String>> {
    if r.kind_name() != "parameter_list" {
        return None;
    }
    let mut out = Vec::new();
    let mut c = r.walk();
    for p in r.named_children(&mut c) {
        if p.kind_name() != "parameter_declaration" {
            continue;
        }
        let t = p
            .field("type")
            .and_then(|t| type_expr(cx, t))
            .unwrap_or_default();
        let mut c = p.walk();
        let names = p.children_by_field_name("name", &mut c).count().max(1);
        out.extend(std::iter::repeat_n(t, names));
    }
    Some(out)
}

/// The value of the build constraint comments above a file's `package`
/// clause.
fn header_builds(cx: &Cx, root: Node) -> Option<bool> {
    let mut c = root.walk();
    let comments: Vec<&str> = root
        .named_children(&mut c)
        .take_while(|k| k.kind_name() == "comment")
        .map(|k| cx.t(k))
        .collect();
    super::go_build::header_builds(&comments)
}

#[cfg(test)]
mod tests {
    use super::super::walker::{fixture_sources, walked_facts};
    use crate::lang::Language;

    /// The facts of a Go walk, entering every subtree or not.
    fn walked(source: &str, prune: bool) -> super::super::FileFacts {
        walked_facts(Language::Go, source, |cx, root| {
            super::walk_with(cx, root, prune)
        })
    }

    /// Skipping literals and import specs leaves every fact as it was, in
    /// the same order: on named, dot and blank imports, syntax errors, and
    /// every Go fixture of the repository.
    #[test]
    fn skipped_subtrees_hold_no_facts() {
        let source = r#"
package main

import "fmt"
import (
	alias "example.com/pkg/v2"
	. "dotted/pkg"
	_ "blank/pkg"
	"strings" // a comment
)

func main() {
	s := "plain \" {notCalled()}" + `raw {alsoNot()}`
	r := '\''
	fmt.Println(alias.Make(s, r), strings.ToUpper(s))
	broken := "unclosed
	import "late"
	after()
}
"#;
        assert_eq!(walked(source, true), walked(source, false));
        let facts = walked(source, true);
        let sites: Vec<&str> = facts.sites.iter().map(|s| s.name.as_str()).collect();
        for used in ["Println", "Make", "ToUpper"] {
            assert!(sites.contains(&used), "{used} in {sites:?}");
        }
        for unseen in ["notCalled", "alsoNot"] {
            assert!(!sites.contains(&unseen), "{unseen} in {sites:?}");
        }
        assert!(facts.imports.len() >= 3, "{:?}", facts.imports);

        let fixtures = fixture_sources(&["go"]);
        for (path, text) in &fixtures {
            assert_eq!(
                walked(text, true),
                walked(text, false),
                "{}",
                path.display()
            );
        }
        assert!(fixtures.len() >= 10, "{} Go fixtures", fixtures.len());
    }
}
