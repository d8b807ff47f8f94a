//! TypeScript and JavaScript: which facts a file states.
//!
//! Facts: calls and `new`, other identifier and member uses, type
//! references, `import` clauses (default, named with aliases, namespace),
//! `export … from` re-exports (named and `*`), variable declarations with
//! type or initialiser, typed parameters (constructor parameter properties
//! become fields), class properties and `this.x = …` as fields, return
//! types, accessors (`get x()`, read as `o.x`), `extends` / `implements`; the item types of typed collections
//! (`Map<K, V>`, `T[]`, `Set<T>`), `for … of` variables and the first
//! parameter of array callbacks (`xs.map((x) => …)`) as items, casts
//! (`x as T`) as locals of their type.

use tree_sitter::Node;

use super::model::{
    APPLIED, APPLIED_END, ARG, CALL_RESULT, CALLED, CAST, DefFactKind, EACH, ELEM, FIRST_KNOWN,
    GUARD_CALL, GUARD_OF, IMPORT_RECV, KEEPS, KEY, OWN_MODULE, RETURNED, SiteKind, TYPE_PARAMS,
    UNBOUND, UNION, split_top, type_arguments,
};
use super::walker::{Cx, GrammarLookup, Up, walk_tree_pruned};

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
        "subscript_expression" => subscript(cx, n),
        "as_expression" | "type_assertion" => match cast_type(cx, n) {
            Some(_) => Some(format!("{CAST}{}", n.start_byte())),
            None => expr(cx, cast_value(n)?),
        },
        // `const r = (this.#retryer = create())`: the value assigned.
        "assignment_expression" => expr(cx, n.field("right")?),
        "parenthesized_expression"
        | "non_null_expression"
        | "await_expression"
        | "satisfies_expression" => expr(cx, n.named_child(0)?),
        _ => None,
    }
}

/// `h[$admin]`, `xs[i]`: the segment `[$admin]` / `[i]` (the field a key
/// of that name declares, else an item); `xs[0]`: an item of `xs`
/// ([`ELEM`]); `o["name"]`: the member `name`.
fn subscript(cx: &Cx, n: Node) -> Option<String> {
    let obj = expr(cx, n.field("object")?)?;
    let index = n.field("index")?;
    match index.kind_name() {
        "identifier" => Some(format!("{obj}.[{}]", cx.t(index))),
        "string" => {
            let key = string_content(cx, index);
            let plain = !key.is_empty()
                && key
                    .chars()
                    .all(|c| c.is_alphanumeric() || c == '_' || c == '$');
            plain.then(|| format!("{obj}.{key}"))
        }
        _ if obj.ends_with(')') => None,
        _ => Some(format!("{obj}{ELEM}")),
    }
}

/// The type a cast (`x as T`, `<T>x`) gives its value, when it names one
/// (`as any`, `as const` name none: the value keeps its own).
fn cast_type(cx: &Cx, n: Node) -> Option<String> {
    let t = match n.kind_name() {
        "as_expression" => n.named_child(1)?,
        _ => n.named_child(0)?.named_child(0)?,
    };
    type_expr(cx, t)
}

/// The value a cast converts.
fn cast_value(n: Node) -> Option<Node> {
    match n.kind_name() {
        "as_expression" => n.named_child(0),
        _ => n.named_child(1),
    }
}

/// Which type argument of a collection type [`collection_part`] reads.
#[derive(Clone, Copy)]
enum CollectionPart {
    /// The item: the element of an array or set, the value of a map
    /// (what `for (const x of c)` and `m.get(k)` give).
    Item,
    /// A map's key: what `m.keys()` and the first of `[k, v]` in
    /// `for (const [k, v] of m)` give.
    Key,
}

/// The item or key type ([`CollectionPart`]) of a collection type, through
/// annotation, parenthesis and `readonly` wrappers and the first
/// alternative of a union that gives one.
fn collection_part(cx: &Cx, t: Node, part: CollectionPart) -> Option<String> {
    match t.kind_name() {
        "type_annotation" | "parenthesized_type" | "readonly_type" => {
            collection_part(cx, t.named_child(0)?, part)
        }
        "array_type" => match part {
            CollectionPart::Item => type_expr(cx, t.named_child(0)?),
            CollectionPart::Key => None,
        },
        "union_type" => {
            let mut c = t.walk();
            let parts: Vec<Node> = t.named_children(&mut c).collect();
            parts.into_iter().find_map(|p| collection_part(cx, p, part))
        }
        // `{ [key: string]: Attributor }`: a value of the index signature
        // is an item (not a mapped type's `[P in keyof T]`).
        "object_type" => match part {
            CollectionPart::Item => {
                let mut c = t.walk();
                let sig = t
                    .named_children(&mut c)
                    .find(|m| m.kind_name() == "index_signature" && m.field("name").is_some())?;
                type_expr(cx, sig.field("type")?)
            }
            CollectionPart::Key => None,
        },
        "generic_type" => {
            let name = cx.t(t.field("name").or(t.named_child(0))?);
            let args = t.field("type_arguments").or(t.named_child(1))?;
            // `Record<string, V>`: an object whose values are `V`, as a map's.
            let map = MAP_TYPES.contains(&name) || name == "Record";
            let index = match part {
                CollectionPart::Item if map => 1,
                CollectionPart::Item
                    if matches!(name, "Array" | "ReadonlyArray" | "Set" | "ReadonlySet") =>
                {
                    0
                }
                CollectionPart::Key if map => 0,
                _ => return None,
            };
            type_expr(cx, args.named_child(index)?)
        }
        _ => None,
    }
}

/// ECMAScript's map types: their first type argument is the key, the
/// second the value (an item, [`ELEM`]).
const MAP_TYPES: &[&str] = &["Map", "ReadonlyMap", "WeakMap"];

/// ECMAScript's collection types whose one type argument is the item.
const ITEM_TYPES: &[&str] = &["Array", "ReadonlyArray", "Set", "ReadonlySet", "WeakSet"];

/// `new Map<K, V>()`, `new Set<T>()`, `new Array<T>()` as the value of a
/// local or field without a type of its own: its items (`name#elem`, a
/// map's values) and a map's keys (`name#k`, [`KEY`]), as a declared type
/// would bind them.
fn bind_new_collection(cx: &mut Cx, at: usize, name: &str, value: Node, field: bool) {
    if value.kind_name() != "new_expression" {
        return;
    }
    let (Some(ctor), Some(args)) = (value.field("constructor"), value.field("type_arguments"))
    else {
        return;
    };
    let ctor = cx.t(ctor);
    let (key, item) = if MAP_TYPES.contains(&ctor) {
        (args.named_child(0), args.named_child(1))
    } else if ITEM_TYPES.contains(&ctor) {
        (None, args.named_child(0))
    } else {
        return;
    };
    let key = key.and_then(|k| type_expr(cx, k));
    let item = item.and_then(|i| type_expr(cx, i));
    cx.bind(at, &format!("{name}{KEY}"), key, true, field);
    cx.bind(at, &format!("{name}{ELEM}"), item, true, field);
}

/// Binds `name#elem` ([`ELEM`]) to the item type of `t`, if it is a
/// collection of one, and `name#k` ([`KEY`]) to a map's key type.
fn bind_items(cx: &mut Cx, at: usize, name: &str, t: Node, field: bool) {
    bind_items_bounded(cx, at, name, t, field, &[]);
}

/// [`bind_items`], an item that is a type parameter of `bounds` read as
/// its constraint ([`bounded`]).
fn bind_items_bounded(
    cx: &mut Cx,
    at: usize,
    name: &str,
    t: Node,
    field: bool,
    bounds: &[(String, String)],
) {
    if let Some(item) = bounded(collection_part(cx, t, CollectionPart::Item), bounds) {
        cx.bind(at, &format!("{name}{ELEM}"), Some(item), true, field);
    }
    if let Some(key) = bounded(collection_part(cx, t, CollectionPart::Key), bounds) {
        cx.bind(at, &format!("{name}{KEY}"), Some(key), true, field);
    }
}

/// The type parameters with a constraint that declaration `decl` (a class,
/// an interface, a type alias, a function) declares, each with its
/// constraint's type (`R extends Renderer`: `(R, Renderer)`).
fn type_parameter_bounds(cx: &Cx, decl: Option<Node>) -> Vec<(String, String)> {
    let Some(params) = decl.and_then(|d| d.field("type_parameters")) else {
        return Vec::new();
    };
    let mut c = params.walk();
    params
        .named_children(&mut c)
        .filter(|p| p.kind_name() == "type_parameter")
        .filter_map(|p| {
            let name = cx.t(p.field("name")?).to_string();
            let bound = type_expr(cx, p.field("constraint")?.named_child(0)?)?;
            (bound != name).then_some((name, bound))
        })
        .collect()
}

/// `interface Cache<R extends Renderer> { items: Map<string, R> }`,
/// `function f<T extends Base>(x: T)`: a field's or parameter's type that
/// is a type parameter with a constraint is that constraint, what
/// TypeScript's checker gives a value of type `R` (the members of
/// `Renderer`), so `cache.items.get(k).destroy()` is `Renderer.destroy`.
fn bounded(t: Option<String>, bounds: &[(String, String)]) -> Option<String> {
    let t = t?;
    if let Some((head, args, "")) = type_arguments(&t) {
        // `date: Mutable<T>`: the constraint in the argument too.
        let args: Vec<String> = args
            .into_iter()
            .map(|a| bounded(Some(a.to_string()), bounds).unwrap_or_default())
            .collect();
        return Some(format!("{head}{APPLIED}{}{APPLIED_END}", args.join(",")));
    }
    Some(
        bounds
            .iter()
            .find(|(p, _)| *p == t)
            .map_or(t, |(_, b)| b.clone()),
    )
}

/// `x as T`, `<T>x`: the type binding the cast's expression names (see [`CAST`]).
fn cast(cx: &mut Cx, n: Node) {
    if let Some(t) = cast_type(cx, n) {
        let name = format!("{CAST}{}", n.start_byte());
        cx.bind(n.start_byte(), &name, Some(t), true, false);
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
        "generic_type" => {
            let name = n.field("name").or(n.named_child(0))?;
            // `Partial<Observer<T>>`: TypeScript's utility types that keep
            // their argument's members are that argument.
            if MEMBER_KEEPING.contains(&cx.t(name))
                && let Some(arg) = n
                    .field("type_arguments")
                    .or(n.named_child(1))
                    .and_then(|a| a.named_child(0))
            {
                return type_expr(cx, arg);
            }
            let head = type_expr(cx, name)?;
            // `Mutable<AnyCalendarDate>`: the generic with its arguments
            // ([`APPLIED`]), so that the resolver can read an alias that
            // keeps an argument's members ([`KEEPS`]) as that argument;
            // any other generic is read as itself, as before.
            let mut args = Vec::new();
            if let Some(list) = n.field("type_arguments").or(n.named_child(1)) {
                let mut c = list.walk();
                for a in list.named_children(&mut c) {
                    args.push(type_expr(cx, a).unwrap_or_default());
                }
            }
            if args.iter().all(String::is_empty) {
                return Some(head);
            }
            Some(format!("{head}{APPLIED}{}{APPLIED_END}", args.join(",")))
        }
        "union_type" => union_of(cx, n),
        _ => None,
    }
}

/// The type a union (`A | B | null`) names: each alternative that is no
/// `null` / `undefined` and that [`type_expr`] reads; several are
/// [`EACH`] of them joined by [`UNION`]. TypeScript's checker reads a
/// member of a union-typed value as the union of each alternative's
/// member, so `value.copy()` on `value: Time | CalendarDateTime` names
/// both `copy`s (resolved, not ambiguous); one alternative is itself.
fn union_of(cx: &Cx, n: Node) -> Option<String> {
    let mut alts: Vec<String> = Vec::new();
    for p in flattened(n) {
        if matches!(cx.t(p), "null" | "undefined") {
            continue;
        }
        let Some(t) = type_expr(cx, p) else {
            continue;
        };
        // A nested union (`(A | B) | C`) joins its alternatives.
        for alt in split_top(t.strip_prefix(EACH).unwrap_or(&t), UNION) {
            if !alts.iter().any(|a| a == alt) {
                alts.push(alt.to_string());
            }
        }
    }
    match alts.as_slice() {
        [] => None,
        [one] => Some(one.clone()),
        _ => Some(format!("{EACH}{}", alts.join(&UNION.to_string()))),
    }
}

/// TypeScript's utility types whose members are those of their type
/// argument (optional, read-only or required as they may be).
/// `Pick<T, K>` and `Omit<T, K>` keep some of `T`'s members: a member a
/// value of them is used by is one of those, so it is `T`'s.
const MEMBER_KEEPING: &[&str] = &[
    "Partial",
    "Readonly",
    "Required",
    "NonNullable",
    "Pick",
    "Omit",
];

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
/// members of this module for its importers (under the exported name); a
/// name of the module's own exported under another (`export { h as jsx }`)
/// is that name's definition ([`OWN_MODULE`]).
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
        export_local(cx, n, &local, &exported);
    }
}

/// This module's `local` exported as `exported`: an imported name is what
/// it was imported as; a name of the module's own under another name is
/// that name's definition ([`OWN_MODULE`]).
fn export_local(cx: &mut Cx, n: Node, local: &str, exported: &str) {
    let found = cx
        .facts
        .imports
        .iter()
        .find(|i| i.local == local)
        .map(|i| (i.module.clone(), i.name.clone()));
    if let Some((module, imported)) = found {
        cx.import(n, exported, &module, imported.as_deref());
    } else if exported != local {
        cx.import(n, exported, OWN_MODULE, Some(local));
    }
}

/// `export default class A {…}`, `export default function f() {…}`,
/// `export default A;`: the module's member `default` (what `import X from`
/// binds, [`import_statement`]) is `A`'s definition, or what `A` was
/// imported as. An anonymous default (`export default class {…}`, an
/// expression) names nothing.
fn export_default(cx: &mut Cx, n: Node) {
    let mut c = n.walk();
    if !n.children(&mut c).any(|ch| ch.kind_name() == "default") {
        return;
    }
    let name = match n.field("declaration") {
        Some(d) => d.field("name"),
        None => n.field("value").filter(|v| v.kind_name() == "identifier"),
    };
    let Some(name) = name else {
        return;
    };
    let local = cx.t(name).to_string();
    let before = cx.facts.imports.len();
    export_local(cx, n, &local, "default");
    // A unit's span grows over its `export default`: at the statement's
    // start the binding would be the class's own, not the module's.
    if let Some(i) = cx.facts.imports.get_mut(before) {
        i.byte = n.end_byte() as u32;
    }
}

/// Walks one TypeScript / JavaScript tree.
pub(crate) fn walk(cx: &mut Cx, root: Node) {
    walk_with(cx, root, true);
}

/// [`walk`]; `prune`: skip the subtrees no handler reads (see
/// [`unread_below`]; `false` only to test that skipping them changes
/// nothing).
fn walk_with(cx: &mut Cx, root: Node, prune: bool) {
    walk_tree_pruned(root, &mut |n, up| {
        // Read once: the handlers' match and the pruning test both need it.
        let kind = n.kind_name();
        visit(cx, n, kind, up);
        !(prune && unread_below(cx, n, kind))
    });
    rewrite_narrowed_paths(&mut cx.facts);
    // In source order: a narrowed binding's end (see [`narrowing`]) was
    // written before the bindings inside the block.
    cx.facts.bindings.sort_by_key(|b| b.byte);
}

/// Whether no handler of [`walk`] acts on any node below `n`: then the
/// walk does not enter it.
/// * A string, a regular expression, or a template without `${…}` holds
///   only its content and escapes.
/// * An import with a source (`… from "m"`, `import "m"`): its names are
///   declarations ([`is_declaration_name`]) that [`import_statement`]
///   reads through its fields; but not one with attributes after the
///   source (`with { … }`: an object), nor with a `/* … */` comment in it
///   (a doc comment's links are read). (`import x = require("m")` has no
///   source field: entered.)
///
/// Not a subtree with a syntax error in it: error recovery can put any node
/// anywhere.
fn unread_below(cx: &Cx, n: Node, kind: &str) -> bool {
    if !matches!(
        kind,
        "string" | "regex" | "template_string" | "import_statement"
    ) || n.has_error()
    {
        return false;
    }
    match kind {
        "template_string" => !cx.t(n).contains("${"),
        "import_statement" => n.field("source").is_some_and(|source| {
            let (start, end) = (n.start_byte(), n.end_byte());
            let before = &cx.text[start..source.start_byte()];
            let after = cx.text[source.end_byte()..end].trim();
            !before.contains("/*") && (after.is_empty() || after == ";")
        }),
        _ => true,
    }
}

/// Hands one node to the handler of its kind (`kind`, `n`'s).
fn visit<'t>(cx: &mut Cx, n: Node<'t>, kind: &str, up: &Up<'_, 't>) {
    match kind {
        "call_expression" | "new_expression" => call_or_new(cx, n),
        "member_expression" => member(cx, n, up),
        "identifier" => identifier(cx, n, up),
        "type_identifier" => type_identifier(cx, n, up),
        "nested_type_identifier" => nested_type(cx, n),
        "import_statement" => import_statement(cx, n),
        "export_statement" => export_statement(cx, n),
        "variable_declarator" => variable_declarator(cx, n),
        "required_parameter" | "optional_parameter" => parameter(cx, n, up),
        "public_field_definition" | "property_signature" => {
            field_definition(cx, n);
            method_arity(cx, n);
        }
        "field_definition" => method_arity(cx, n),
        "assignment_expression" => assignment(cx, n),
        "as_expression" | "type_assertion" => cast(cx, n),
        "for_in_statement" => for_of(cx, n),
        "arrow_function" | "function_expression" => {
            callback_parameters(cx, n);
            pair_function_parameters(cx, n, up);
            held_function_returns(cx, n, up);
        }
        "function_declaration"
        | "method_definition"
        | "method_signature"
        | "abstract_method_signature"
        | "function_signature" => {
            if n.kind_name().contains("method") {
                method_arity(cx, n);
            }
            if kind == "method_definition" {
                literal_method_parameters(cx, n, up);
            }
            if let (Some(name), Some(r)) = (n.field("name"), n.field("return_type")) {
                let t = guarded_type(cx, r)
                    .or_else(|| type_expr(cx, r))
                    .or_else(|| guard_maker(cx, n, r));
                cx.def_fact(name, t, DefFactKind::Returns);
                // `getAll(): Query[]`: what its items are, for
                // `this.getAll().forEach((q) => …)` (`#ret#elem`).
                bind_items(cx, name.start_byte(), RETURNED, r, false);
                called_result(cx, n, name, r);
            } else if let (Some(name), Some(body)) = (n.field("name"), n.field("body")) {
                // No declared type: what its `return`s give, when they agree.
                let value = inferred_result(cx, n, body).map(|e| format!("={e}"));
                cx.def_fact(name, value, DefFactKind::Returns);
            }
            if let Some(name) = n.field("name")
                && has_keyword(n, "get")
            {
                cx.def_fact(name, Some("get".into()), DefFactKind::Getter);
            }
        }
        "if_statement" => narrowing(cx, n),
        "binary_expression" => and_narrowing(cx, n),
        "comment" => doc_links(cx, n),
        "object" => object_literal(cx, n, up),
        "class_declaration" | "abstract_class_declaration" | "class" | "interface_declaration" => {
            class_like(cx, n)
        }
        "type_alias_declaration" => type_alias(cx, n),
        _ => {}
    }
}

/// `const make = () => new Editor()`, `const f = (): T => …`: a function
/// held by a `const` (a unit named by the declaration) returns what its
/// return type says, else what its body gives (an expression body's
/// value, or its `return`s, [`inferred_result`]), as a declared function
/// does; so `const editor = make()` is an `Editor`. Not when the
/// declaration has a type of its own (a guard's, see
/// [`variable_declarator`]).
fn held_function_returns<'t>(cx: &mut Cx, n: Node<'t>, up: &Up<'_, 't>) {
    let Some(decl) = up.parent().filter(|d| {
        d.kind_name() == "variable_declarator"
            && d.field("value") == Some(n)
            && d.field("type").is_none()
    }) else {
        return;
    };
    let Some(name) = decl.field("name").filter(|x| x.kind_name() == "identifier") else {
        return;
    };
    if let Some(r) = n.field("return_type") {
        let t = guarded_type(cx, r).or_else(|| type_expr(cx, r));
        cx.def_fact(name, t, DefFactKind::Returns);
        bind_items(cx, name.start_byte(), RETURNED, r, false);
        return;
    }
    let Some(body) = n.field("body") else {
        return;
    };
    let value = if body.kind_name() == "statement_block" {
        inferred_result(cx, n, body)
    } else if matches!(cx.t(body), "null" | "undefined") {
        None
    } else {
        expr(cx, body)
    };
    cx.def_fact(name, value.map(|e| format!("={e}")), DefFactKind::Returns);
}

/// `iterator(): () => T | null`: what calling the function it returns
/// gives, as the binding `#ret#call` ([`CALLED`]) at the function's name; a
/// type parameter of the function or of a method's class with a constraint
/// (`T extends LinkedNode`) is that constraint, as in a parameter's type.
fn called_result(cx: &mut Cx, f: Node, name: Node, r: Node) {
    let mut t = r;
    while matches!(t.kind_name(), "type_annotation" | "parenthesized_type") {
        match t.named_child(0) {
            Some(inner) => t = inner,
            None => return,
        }
    }
    let Some(result) = t
        .field("return_type")
        .filter(|_| t.kind_name() == "function_type")
    else {
        return;
    };
    let mut bounds = type_parameter_bounds(cx, Some(f));
    if f.kind_name() == "method_definition" {
        bounds.extend(type_parameter_bounds(
            cx,
            f.parent().and_then(|body| body.parent()),
        ));
    }
    let value = bounded(type_expr(cx, result), &bounds);
    cx.bind(
        name.start_byte(),
        &format!("{RETURNED}{CALLED}"),
        value,
        true,
        false,
    );
}

/// Whether `keyword` (`get`, `*`, `async`) stands before a function's name.
fn has_keyword(n: Node, keyword: &str) -> bool {
    let name = n.field("name");
    let mut c = n.walk();
    n.children(&mut c)
        .take_while(|ch| Some(*ch) != name)
        .any(|ch| ch.kind_name() == keyword)
}

/// What a function without a declared return type returns, from its own
/// body's `return`s (not those of functions nested in it): their values'
/// expressions joined by [`UNION`] (the resolver takes the value only when
/// they all agree). `None` when one is unknown (a literal, a ternary), when
/// none returns a value, for a generator, or past a few alternatives. A
/// `return null` / `return undefined` / bare `return` is skipped, as a
/// declared `T | null` reads as `T`. Evaluating the result is bounded by
/// the resolver's depth, so `f() { return f() }` cannot recurse without end.
fn inferred_result(cx: &Cx, f: Node, body: Node) -> Option<String> {
    if has_keyword(f, "*") || body.kind_name() != "statement_block" {
        return None;
    }
    let mut alts: Vec<String> = Vec::new();
    let mut stack = vec![body];
    while let Some(x) = stack.pop() {
        match x.kind_name() {
            "function_declaration"
            | "function_expression"
            | "arrow_function"
            | "method_definition"
            | "class"
            | "class_declaration"
            | "generator_function"
            | "generator_function_declaration" => continue,
            "return_statement" => {
                let Some(v) = x.named_child(0) else {
                    continue;
                };
                if matches!(cx.t(v), "null" | "undefined") {
                    continue;
                }
                let e = expr(cx, v)?;
                if !alts.contains(&e) {
                    alts.push(e);
                }
                if alts.len() > 4 {
                    return None;
                }
                continue;
            }
            _ => {}
        }
        let mut c = x.walk();
        stack.extend(x.named_children(&mut c));
    }
    alts.sort();
    (!alts.is_empty()).then(|| alts.join(&UNION.to_string()))
}

/// The type a guard's return annotation (`x is T`) narrows its argument
/// to. It stands as the guard's return type: a call of the guard then is a
/// `T`, which the narrowed binding of [`narrowing`] reads (a guard's
/// boolean has no members a call could mean).
fn guarded_type(cx: &Cx, r: Node) -> Option<String> {
    let r = match r.kind_name() {
        "type_annotation" => r.named_child(0)?,
        _ => r,
    };
    let predicate = match r.kind_name() {
        "type_predicate_annotation" => r.named_child(0)?,
        "type_predicate" => r,
        _ => return None,
    };
    (predicate.kind_name() == "type_predicate")
        .then(|| predicate.field("type"))
        .flatten()
        .and_then(|t| type_expr(cx, t))
}

/// `function make<T>(name, c: new (...a: any[]) => T): (x: any) => x is T`:
/// a maker of guards whose type is a type parameter, taken from the
/// argument whose type gives it (a constructor's or function's result, or
/// `T` itself): [`GUARD_OF`] and that argument's index.
fn guard_maker(cx: &Cx, f: Node, r: Node) -> Option<String> {
    let r = match r.kind_name() {
        "type_annotation" => r.named_child(0)?,
        _ => r,
    };
    if r.kind_name() != "function_type" {
        return None;
    }
    let t = guarded_type(cx, r.field("return_type")?)?;
    let mut c = f.field("type_parameters")?.walk();
    let is_param = f
        .field("type_parameters")?
        .named_children(&mut c)
        .any(|p| p.field("name").is_some_and(|n| cx.t(n) == t));
    if !is_param {
        return None;
    }
    let params = f.field("parameters")?;
    let mut c = params.walk();
    let at = params
        .named_children(&mut c)
        .filter(|p| matches!(p.kind_name(), "required_parameter" | "optional_parameter"))
        .position(|p| {
            let ty =
                p.field("type")
                    .and_then(|a| a.named_child(0))
                    .map(|ty| match ty.kind_name() {
                        "constructor_type" => ty.field("type"),
                        "function_type" => ty.field("return_type"),
                        _ => Some(ty),
                    });
            ty.flatten().is_some_and(|ty| cx.t(ty) == t)
        })?;
    Some(format!("{GUARD_OF}{at}"))
}

/// `const isT = make("T", T)` at the top of a module: a call that may make
/// a guard ([`GUARD_CALL`]), its callee and its arguments' expressions.
fn maker_call(cx: &Cx, n: Node) -> Option<String> {
    let v = n
        .field("value")
        .filter(|v| v.kind_name() == "call_expression")?;
    let top = n
        .parent()
        .and_then(|d| d.parent())
        .is_some_and(|p| matches!(p.kind_name(), "program" | "export_statement"));
    if !top || n.field("type").is_some() {
        return None;
    }
    let callee = expr(cx, v.field("function")?)?;
    let mut c = v.field("arguments")?.walk();
    let args: Vec<String> = v
        .field("arguments")?
        .named_children(&mut c)
        .filter(|a| !a.is_extra())
        .map(|a| match a.kind_name() {
            "identifier" | "member_expression" => expr(cx, a).unwrap_or_default(),
            _ => String::new(),
        })
        .collect();
    args.iter()
        .any(|a| !a.is_empty())
        .then(|| format!("{GUARD_CALL}{callee};{})", args.join(";")))
}

/// `if (isT(x)) { … }` (also `isT(x) && …`, `isT(x) || isU(x)`): inside the
/// block `x` is what the guard `isT` narrows to; after it, what it was
/// before (its binding copied, else unknown).
fn narrowing(cx: &mut Cx, n: Node) {
    let (Some(cond), Some(body)) = (n.field("condition"), n.field("consequence")) else {
        return;
    };
    for (var, guards) in narrowed(cx, cond) {
        narrow_within(cx, n, body, &var, &guards);
    }
}

/// `x instanceof C && x.m()`, `isT(x) && f(x.m())`: the right operand of
/// `&&` runs only when the left one holds, so there `x` is what the left
/// one narrows it to ([`narrowed`]), as in an `if` block ([`narrowing`]).
fn and_narrowing(cx: &mut Cx, n: Node) {
    if n.field("operator").map(|o| cx.t(o)) != Some("&&") {
        return;
    }
    let (Some(left), Some(right)) = (n.field("left"), n.field("right")) else {
        return;
    };
    // Only by `instanceof`: a call in a test need not be a type guard, and
    // narrowing by one that is not would lose the value's type.
    let classes = instanceof_classes(cx, left);
    for (var, guards) in narrowed(cx, left) {
        if guards.iter().all(|g| classes.contains(g)) {
            narrow_within(cx, n, right, &var, &guards);
        }
    }
}

/// The classes `C` of the `x instanceof C` tests a condition is made of
/// (through `&&`, `||` and parentheses).
fn instanceof_classes(cx: &Cx, cond: Node) -> Vec<String> {
    match cond.kind_name() {
        "parenthesized_expression" => cond
            .named_child(0)
            .map(|i| instanceof_classes(cx, i))
            .unwrap_or_default(),
        "binary_expression" => match cond.field("operator").map(|o| cx.t(o)) {
            Some("&&" | "||") => {
                let mut out = Vec::new();
                for side in [cond.field("left"), cond.field("right")]
                    .into_iter()
                    .flatten()
                {
                    out.extend(instanceof_classes(cx, side));
                }
                out
            }
            Some("instanceof") => cond
                .field("right")
                .map(|r| vec![cx.t(r).to_string()])
                .unwrap_or_default(),
            _ => Vec::new(),
        },
        _ => Vec::new(),
    }
}

/// Binds `var` inside `range` (a block, an operand of the test `test`) to
/// what `guards` narrow it to, and after it to what it was before (its
/// binding copied, else unknown).
fn narrow_within(cx: &mut Cx, test: Node, range: Node, var: &str, guards: &[String]) {
    if var.contains('.') {
        narrow_path(cx, range, var, guards);
        return;
    }
    let before = cx
        .facts
        .bindings
        .iter()
        .rev()
        .find(|b| b.name == var && !b.field)
        .map(|b| (b.expr.clone(), b.is_type));
    if before.is_none() {
        // Uses before the test do not see the narrowed binding as the one
        // that stands in for a name bound only later.
        cx.bind(test.start_byte(), var, Some(var.to_string()), false, false);
    }
    let sep = UNION.to_string();
    let alternatives: Vec<String> = guards.iter().map(|g| format!("{g}()")).collect();
    cx.bind(
        range.start_byte(),
        var,
        Some(alternatives.join(&sep)),
        false,
        false,
    );
    let (expr, is_type) = before.unwrap_or_else(|| (var.to_string(), false));
    cx.bind(range.end_byte(), var, Some(expr), is_type, false);
}

/// The name of a pending rewrite of a narrowed member path ([`narrow_path`]),
/// kept among the bindings until the walk ends ([`rewrite_narrowed_paths`]).
const NARROWED_PATH: &str = "#narrowed-path";

/// `if (this.next instanceof C) { this.next.m() }`, `this.next instanceof C
/// && this.next.m()`: a member path narrowed inside `range`. A local
/// `#is<byte>` is bound there to what `guards` narrow it to, and each use of
/// the path inside `range` (a site's receiver, a binding's value) becomes a
/// use of that local when the walk has seen them all.
fn narrow_path(cx: &mut Cx, range: Node, path: &str, guards: &[String]) {
    let alias = format!("#is{}", range.start_byte());
    let sep = UNION.to_string();
    let alternatives: Vec<String> = guards.iter().map(|g| format!("{g}()")).collect();
    let (start, end) = (range.start_byte(), range.end_byte());
    cx.bind(start, &alias, Some(alternatives.join(&sep)), false, false);
    let pending = format!("{path} {end} {alias}");
    cx.bind(start, NARROWED_PATH, Some(pending), false, false);
}

/// Applies the rewrites [`narrow_path`] left pending: inside each range, a
/// site's receiver or a binding's value that is the narrowed path, or
/// starts with it, starts with its local instead.
fn rewrite_narrowed_paths(facts: &mut super::FileFacts) {
    if !facts.bindings.iter().any(|b| b.name == NARROWED_PATH) {
        return;
    }
    let mut pending = Vec::new();
    facts.bindings.retain(|b| {
        if b.name != NARROWED_PATH {
            return true;
        }
        let mut parts = b.expr.split(' ');
        if let (Some(path), Some(end), Some(alias)) = (parts.next(), parts.next(), parts.next())
            && let Ok(end) = end.parse::<u32>()
        {
            pending.push((path.to_string(), b.byte, end, alias.to_string()));
        }
        false
    });
    for (path, start, end, alias) in pending {
        let renamed = |e: &str| -> Option<String> {
            let rest = e.strip_prefix(path.as_str())?;
            (rest.is_empty() || rest.starts_with(['.', '#'])).then(|| format!("{alias}{rest}"))
        };
        for s in facts
            .sites
            .iter_mut()
            .filter(|s| (start..end).contains(&s.byte))
        {
            if let Some(r) = s.recv.as_deref().and_then(renamed) {
                s.recv = Some(r);
            }
        }
        for b in facts.bindings.iter_mut() {
            if (start..end).contains(&b.byte)
                && !b.is_type
                && b.name != alias
                && let Some(e) = renamed(&b.expr)
            {
                b.expr = e;
            }
        }
    }
}

/// The variables a condition narrows, each with the guards it passed, in
/// source order: `isT(x) && isU(y)` narrows `x` by `isT` and `y` by `isU`
/// (of `isT(x) && isU(x)`, the first); `isT(x) || isU(x)` narrows `x` to a
/// `T` or a `U`, and `isT(x) || isU(y)` narrows neither (either may be
/// false inside the block).
fn narrowed(cx: &Cx, cond: Node) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    match cond.kind_name() {
        "parenthesized_expression" => {
            if let Some(inner) = cond.named_child(0) {
                out = narrowed(cx, inner);
            }
        }
        "binary_expression" => {
            let op = cond.field("operator").map(|o| cx.t(o));
            let sides = cond.field("left").zip(cond.field("right"));
            match (op, sides) {
                (Some("&&"), Some((l, r))) => {
                    out = narrowed(cx, l);
                    for (var, guards) in narrowed(cx, r) {
                        if !out.iter().any(|(v, _)| *v == var) {
                            out.push((var, guards));
                        }
                    }
                }
                (Some("||"), Some((l, r))) => {
                    let right = narrowed(cx, r);
                    for (var, mut guards) in narrowed(cx, l) {
                        if let Some((_, more)) = right.iter().find(|(v, _)| *v == var) {
                            guards.extend(more.iter().cloned());
                            guards.dedup();
                            out.push((var, guards));
                        }
                    }
                }
                _ => {
                    if let Some((guard, var)) = guard_call(cx, cond) {
                        out.push((var, vec![guard]));
                    }
                }
            }
        }
        _ => {
            if let Some((guard, var)) = guard_call(cx, cond) {
                out.push((var, vec![guard]));
            }
        }
    }
    out
}

/// The `(guard, variable)` of a condition `guard(variable)`. `variable
/// instanceof C` is `(C, variable)`: `C()` is an instance of `C`, as
/// `new C()` is.
fn guard_call(cx: &Cx, n: Node) -> Option<(String, String)> {
    match n.kind_name() {
        "binary_expression" => {
            let op = n.field("operator").map(|o| cx.t(o));
            // A name, or a member path (`this.next instanceof TextBlot`).
            let var = n
                .field("left")
                .filter(|l| matches!(l.kind_name(), "identifier" | "member_expression"))
                .and_then(|l| expr(cx, l))
                .filter(|v| !v.contains(['(', '#', '[']));
            let class = n.field("right").filter(|r| r.kind_name() == "identifier");
            match (op, var, class) {
                (Some("instanceof"), Some(var), Some(class)) => {
                    Some((cx.t(class).to_string(), var))
                }
                _ => None,
            }
        }
        "call_expression" => {
            let f = n
                .field("function")
                .filter(|f| f.kind_name() == "identifier")?;
            let arg = n
                .field("arguments")
                .and_then(|a| a.named_child(0))
                .filter(|a| a.kind_name() == "identifier")?;
            Some((cx.t(f).to_string(), cx.t(arg).to_string()))
        }
        _ => None,
    }
}

/// `f()`, `a.f()`, `new F()`, `super()`: a call site of the name called.
fn call_or_new(cx: &mut Cx, n: Node) {
    let field = if n.kind_name() == "call_expression" {
        "function"
    } else {
        "constructor"
    };
    let Some(f) = n.field(field).map(non_null_inner) else {
        return;
    };
    match f.kind_name() {
        "identifier" => cx.site(f, None, SiteKind::Call),
        "member_expression" => {
            if let Some(p) = f.field("property") {
                let recv = f.field("object").and_then(|o| expr(cx, o));
                cx.site(p, recv.or_else(|| Some("?".into())), SiteKind::Call);
                cx.call_args(p.start_byte(), argument_count(n));
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

/// `f!` (a non-null assertion, `spec.createInRange!(…)`): `f`, which is
/// what a call of `f!` calls; any other node itself.
fn non_null_inner(n: Node) -> Node {
    let mut n = n;
    while n.kind_name() == "non_null_expression" {
        match n.named_child(0) {
            Some(inner) => n = inner,
            None => break,
        }
    }
    n
}

/// How many arguments call `n` passes; `None` with a spread argument
/// (`f(...xs)`) or a tagged template.
fn argument_count(n: Node) -> Option<usize> {
    let args = n
        .field("arguments")
        .filter(|a| a.kind_name() == "arguments")?;
    let mut c = args.walk();
    let mut count = 0;
    for a in args.named_children(&mut c) {
        match a.kind_name() {
            "comment" => {}
            "spread_element" => return None,
            _ => count += 1,
        }
    }
    Some(count)
}

/// How many arguments a method (or function) takes, as a definition fact
/// `min:max` (`max` is `*` with a rest parameter): a signature or method's
/// parameters, a property whose type is a function type
/// (`getValue: (id: string) => T`), a class field holding a function. A
/// call whose argument count does not fit is no call of it, which is what
/// keeps a unique-name guess off a same-named property of another type
/// (`props.getValue()` of `CellContext`, not `CoreRow.getValue(id)`).
fn method_arity(cx: &mut Cx, n: Node) {
    let name = n.field("name").or_else(|| n.field("property"));
    let params = match n.kind_name() {
        "property_signature" => n
            .field("type")
            .and_then(|t| t.named_child(0))
            .filter(|f| f.kind_name() == "function_type")
            .and_then(|f| f.field("parameters")),
        "public_field_definition" | "field_definition" => {
            let Some(v) = n.field("value").filter(|v| {
                matches!(
                    v.kind_name(),
                    "arrow_function" | "function_expression" | "generator_function"
                )
            }) else {
                return;
            };
            if v.field("parameter").is_some() {
                // `x => …`: one parameter, no parentheses.
                if let Some(name) = name {
                    cx.def_fact(name, Some("1:1".into()), DefFactKind::Arity);
                }
                return;
            }
            v.field("parameters")
        }
        _ => n.field("parameters"),
    };
    let (Some(name), Some(params)) = (name, params) else {
        return;
    };
    cx.def_fact(name, parameter_range(params), DefFactKind::Arity);
}

/// `min:max` of a parameter list (`this: T` is no parameter; `p?`, `p = v`
/// are optional; `...rest` makes `max` `*`); `None` for anything unknown.
fn parameter_range(params: Node) -> Option<String> {
    let (mut min, mut max, mut rest) = (0usize, 0usize, false);
    let mut c = params.walk();
    for p in params.named_children(&mut c) {
        let pattern = p.field("pattern");
        match p.kind_name() {
            "comment" | "decorator" => continue,
            "required_parameter" if pattern.is_some_and(|x| x.kind_name() == "this") => continue,
            "required_parameter" if pattern.is_some_and(|x| x.kind_name() == "rest_pattern") => {
                rest = true;
            }
            "required_parameter" if p.field("value").is_none() => min = max + 1,
            "rest_pattern" => rest = true,
            "identifier" | "object_pattern" | "array_pattern" => min = max + 1,
            "required_parameter" | "optional_parameter" | "assignment_pattern" => {}
            _ => return None,
        }
        if !rest {
            max += 1;
        }
    }
    Some(if rest {
        format!("{min}:*")
    } else {
        format!("{min}:{max}")
    })
}

/// `{@link Query#cancel}`, `{@linkcode hashKey}` in a JSDoc block
/// (`/** … */`): TypeScript binds the names of a link's target, so each is
/// a reference (`Query`, then `cancel` on `Query`; `#` names an instance
/// member, `.` a member, and a class's members are found either way).
/// A URL (`{@link https://…}`) names nothing.
fn doc_links(cx: &mut Cx, n: Node) {
    let text = cx.t(n);
    if !text.starts_with("/**") {
        return;
    }
    let mut links: Vec<(usize, &str)> = Vec::new();
    let mut from = 0;
    while let Some(at) = text[from..].find("{@link") {
        let mut p = from + at + "{@link".len();
        for variant in ["code", "plain"] {
            if text[p..].starts_with(variant) {
                p += variant.len();
            }
        }
        let target = text[p..].trim_start();
        from = p;
        if target.len() == text[p..].len() {
            continue; // `{@linkfoo`: no tag
        }
        p += text[p..].len() - target.len();
        let end = target
            .find(|c: char| !(c.is_alphanumeric() || matches!(c, '_' | '$' | '.' | '#')))
            .unwrap_or(target.len());
        if target[end..].starts_with([':', '/']) {
            continue; // a URL
        }
        links.push((p, &target[..end]));
        from = p + end;
    }
    let base = n.start_byte();
    let links: Vec<(usize, String)> = links.into_iter().map(|(p, t)| (p, t.to_string())).collect();
    for (p, target) in links {
        let mut recv: Option<String> = None;
        let mut off = 0;
        for seg in target.split(['.', '#']) {
            // After `#` TypeScript reads an identifier, which no reserved
            // word is (`{@link Mutation#continue}` binds nothing); after
            // `.` any name.
            if off > 0 && target.as_bytes()[off - 1] == b'#' && RESERVED.contains(&seg) {
                break;
            }
            cx.site_named(
                base + p + off,
                seg.to_string(),
                recv.clone(),
                SiteKind::Other,
            );
            recv = Some(match recv {
                Some(r) => format!("{r}.{seg}"),
                None => seg.to_string(),
            });
            off += seg.len() + 1;
        }
    }
}

/// `{ promise, cancel, start: () => … }`: a shorthand property is a use of
/// the local of its name. In an object that a function returns as its
/// declared type (`function f(): Retryer { return { cancel, start } }`,
/// `(): Retryer => ({ … })`), that a typed declaration holds (`const c:
/// Config = { … }`), that is checked with `satisfies Config`, or that is
/// passed to a typed parameter, each property and each method (`{ next(v)
/// { … } }`) is also a use of that type's member of its name:
/// TypeScript's contextual typing binds it there.
fn object_literal<'t>(cx: &mut Cx, n: Node<'t>, up: &Up<'_, 't>) {
    let typed = contextual_type(cx, n, up);
    let mut c = n.walk();
    for p in n.named_children(&mut c) {
        match p.kind_name() {
            "shorthand_property_identifier" => {
                cx.site(p, None, SiteKind::Other);
                if let Some(t) = &typed {
                    cx.second_site(p, Some(t.clone()), SiteKind::Other);
                }
            }
            // `{ next(value) { … } }` in an object typed `Observer`: the
            // method implements `Observer.next`, as a `next: …` pair does.
            "pair" | "method_definition" => {
                let key = p.field("key").or_else(|| p.field("name"));
                if let (Some(k), Some(t)) = (key, &typed)
                    && k.kind_name() == "property_identifier"
                {
                    cx.site(k, Some(t.clone()), SiteKind::Other);
                }
            }
            _ => {}
        }
    }
}

/// The declared type an object literal is written for (see
/// [`object_literal`]): its function's return type when it is returned,
/// its declaration's type, or the type of the parameter it is passed to
/// (`f#arg:0`).
fn contextual_type<'t>(cx: &Cx, n: Node<'t>, up: &Up<'_, 't>) -> Option<String> {
    let parent = up.parent()?;
    let owner = match parent.kind_name() {
        "arguments" => {
            // `createRetryer({ … })`: the parameter's declared type there.
            let callee = callee_of(cx, up.nth(1)?)?;
            let mut c = parent.walk();
            let at = parent.named_children(&mut c).position(|a| a == n)?;
            return Some(format!("{callee}{ARG}{at}"));
        }
        "variable_declarator" => return type_expr(cx, parent.field("type")?),
        // `{ … } satisfies Handler`: checked against (so typed by) `Handler`.
        "satisfies_expression" => return type_expr(cx, parent.named_child(1)?),
        "return_statement" => up.iter().skip(1).find(|a| {
            matches!(
                a.kind_name(),
                "function_declaration"
                    | "function_expression"
                    | "arrow_function"
                    | "method_definition"
                    | "class_declaration"
                    | "class"
            )
        })?,
        "parenthesized_expression" => up
            .nth(1)
            .filter(|a| a.kind_name() == "arrow_function" && a.field("body") == Some(parent))?,
        _ => return None,
    };
    type_expr(cx, owner.field("return_type")?)
}

/// ECMAScript's reserved words, which are no identifiers.
const RESERVED: &[&str] = &[
    "break",
    "case",
    "catch",
    "class",
    "const",
    "continue",
    "debugger",
    "default",
    "delete",
    "do",
    "else",
    "enum",
    "export",
    "extends",
    "false",
    "finally",
    "for",
    "function",
    "if",
    "import",
    "in",
    "instanceof",
    "new",
    "null",
    "return",
    "super",
    "switch",
    "this",
    "throw",
    "true",
    "try",
    "typeof",
    "var",
    "void",
    "while",
    "with",
];

/// `a.b` not called: a use of `b` on `a`.
fn member<'t>(cx: &mut Cx, n: Node<'t>, up: &Up<'_, 't>) {
    // `a.f()`, `new a.F()`, `a.f!()`: the call's site, not a use.
    let callee = |p: Node, c: Node| {
        (p.kind_name() == "call_expression" && p.field("function") == Some(c))
            || (p.kind_name() == "new_expression" && p.field("constructor") == Some(c))
    };
    let called = up.parent().is_some_and(|p| {
        callee(p, n)
            || (p.kind_name() == "non_null_expression" && up.nth(1).is_some_and(|g| callee(g, p)))
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
                    default_import_site(cx, part, &module);
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

/// `import X from "m"`: an import site at `X` of the name it imports,
/// `default` (as `import { a as b }` has one of `a`), so the import is a
/// reference to the module's default export and the file's dependency on
/// `m`, as a named import's site is.
fn default_import_site(cx: &mut Cx, local: Node, module: &str) {
    cx.site_named(
        local.start_byte(),
        "default".to_string(),
        Some(format!("{IMPORT_RECV}{module}")),
        SiteKind::Import,
    );
}

/// `export { a as b } from "m"` and `export * from "m"`: re-exports; `export { a }`
/// without `from`: see [`export_local_imports`] and [`export_default`].
fn export_statement(cx: &mut Cx, n: Node) {
    let Some(source) = n.field("source") else {
        export_local_imports(cx, n);
        export_default(cx, n);
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
        bind_items(cx, n.start_byte(), &name, t, false);
        let t = type_expr(cx, t);
        cx.bind(n.start_byte(), &name, t, true, false);
    } else if let Some(v) = n.field("value") {
        let e = expr(cx, v);
        cx.bind(n.start_byte(), &name, e, false, false);
        bind_chain_items(cx, n.start_byte(), &name, v);
        bind_new_collection(cx, n.start_byte(), &name, v, false);
    }
    // `const isT = make() as (x: any) => x is T`: a guard of `T`.
    let guard = n
        .field("type")
        .or_else(|| {
            n.field("value")
                .filter(|v| v.kind_name() == "as_expression")
                .and_then(|v| v.named_child(1))
        })
        .and_then(|t| t.field("return_type"))
        .and_then(|r| guarded_type(cx, r));
    if let (Some(t), Some(name_node)) = (guard, n.field("name")) {
        // A `const` is a unit (a constant), whose return type this is; a
        // `var` is none: what a call of it gives is a binding of its own.
        cx.bind(
            n.start_byte(),
            &format!("{name}{CALL_RESULT}"),
            Some(t.clone()),
            true,
            false,
        );
        cx.def_fact(name_node, Some(t), DefFactKind::Returns);
    } else if let (Some(call), Some(name_node)) = (maker_call(cx, n), n.field("name")) {
        cx.def_fact(name_node, Some(call), DefFactKind::Returns);
    }
}

/// `p: T`; a constructor parameter property (`private p: T`) is a field too.
fn parameter<'t>(cx: &mut Cx, n: Node<'t>, up: &Up<'_, 't>) {
    let (Some(p), Some(t)) = (n.field("pattern"), n.field("type")) else {
        return;
    };
    // The function's type parameters, then a method's class's.
    let mut bounds = type_parameter_bounds(cx, up.nth(1));
    if up
        .nth(1)
        .is_some_and(|f| f.kind_name() == "method_definition")
    {
        bounds.extend(type_parameter_bounds(cx, up.nth(3)));
    }
    if let Some(list) = up.parent()
        && (names_a_unit(up) || aliased_function_type(up))
    {
        // Its position, for an object literal passed there (`#arg:0`).
        // Only a function that is a unit: a callback's parameters would
        // be bindings of the unit around it.
        let mut c = list.walk();
        let at = list
            .named_children(&mut c)
            .filter(|x| matches!(x.kind_name(), "required_parameter" | "optional_parameter"))
            .position(|x| x == n);
        if let Some(at) = at {
            cx.bind(
                n.start_byte(),
                &format!("{ARG}{at}"),
                bounded(type_expr(cx, t), &bounds),
                true,
                false,
            );
            function_type_parameters(cx, n.start_byte(), &format!("{ARG}{at}"), t, false);
        }
    }
    if p.kind_name() != "identifier" {
        return;
    }
    let name = cx.t(p).to_string();
    let mut c = n.walk();
    let is_property = n
        .children(&mut c)
        .any(|c| c.kind_name() == "accessibility_modifier" || c.kind_name() == "readonly");
    bind_items_bounded(cx, n.start_byte(), &name, t, false, &bounds);
    if is_property {
        bind_items_bounded(cx, n.start_byte(), &name, t, true, &bounds);
    }
    let t = bounded(type_expr(cx, t), &bounds);
    cx.bind(n.start_byte(), &name, t.clone(), true, false);
    if is_property {
        cx.bind(n.start_byte(), &name, t, true, true);
    }
}

/// `cb: (ctx: Ctx, i: number) => R`, the parameter at `key` (`#arg:0`) of
/// a function that is a unit, or the field `key` (`onEvent`) when `field`:
/// binds `#arg:0#arg:0` (`onEvent#arg:0`) to `Ctx` ([`ARG`]), the type a
/// callback passed there gives its own first parameter
/// (`register((ctx) => ctx.next())`, read by `World::contextual_parameter`).
fn function_type_parameters(cx: &mut Cx, at: usize, key: &str, t: Node, field: bool) {
    let mut t = t;
    while matches!(t.kind_name(), "type_annotation" | "parenthesized_type") {
        match t.named_child(0) {
            Some(inner) => t = inner,
            None => return,
        }
    }
    let Some(ps) = t
        .field("parameters")
        .filter(|_| t.kind_name() == "function_type")
    else {
        return;
    };
    let mut c = ps.walk();
    let params: Vec<Node> = ps
        .named_children(&mut c)
        .filter(|x| matches!(x.kind_name(), "required_parameter" | "optional_parameter"))
        .collect();
    for (j, p) in params.into_iter().enumerate() {
        if p.field("pattern")
            .is_some_and(|r| r.kind_name() == "rest_pattern")
        {
            // `(...args: A) => R`: a tuple's items, not one parameter's type.
            break;
        }
        if let Some(pt) = p.field("type") {
            let value = type_expr(cx, pt);
            cx.bind(at, &format!("{key}{ARG}{j}"), value, true, field);
        }
    }
}

/// Whether the parameter list above a parameter (its parent) is that of
/// the function type a type alias names (`type Handler = (e: Ev) => void`):
/// the alias, a unit, binds `#arg:0` to `Ev` ([`ARG`]), what a callback
/// passed as a `Handler` types its first parameter by.
fn aliased_function_type(up: &Up) -> bool {
    up.nth(1).is_some_and(|f| f.kind_name() == "function_type")
        && up
            .nth(2)
            .is_some_and(|a| a.kind_name() == "type_alias_declaration")
}

/// Whether the parameter list above a parameter (its parent) is that of a
/// function that is a unit: a declaration, a method, a signature, or an
/// arrow function or function expression bound to a `const` or a class
/// property.
fn names_a_unit(up: &Up) -> bool {
    let (Some(f), holder) = (up.nth(1), up.nth(2)) else {
        return false;
    };
    match f.kind_name() {
        "function_declaration"
        | "generator_function_declaration"
        | "method_definition"
        | "method_signature"
        | "abstract_method_signature"
        | "function_signature" => true,
        "arrow_function" | "function_expression" => holder.is_some_and(|h| {
            matches!(
                h.kind_name(),
                "variable_declarator" | "public_field_definition"
            )
        }),
        _ => false,
    }
}

/// A class property or interface member with a type or value: a field.
fn field_definition(cx: &mut Cx, n: Node) {
    let Some(name) = n.field("name") else {
        return;
    };
    let name = cx.t(name).to_string();
    if let Some(t) = n.field("type") {
        // Its class's or interface's type parameters (`R extends Renderer`).
        let bounds = type_parameter_bounds(cx, n.parent().and_then(|b| b.parent()));
        bind_items_bounded(cx, n.start_byte(), &name, t, true, &bounds);
        // `onEvent?: (e: Ev) => void`: the field `onEvent#arg:0` is `Ev`.
        function_type_parameters(cx, n.start_byte(), &name, t, true);
        let t = bounded(type_expr(cx, t), &bounds);
        cx.bind(n.start_byte(), &name, t, true, true);
    } else if let Some(v) = n.field("value") {
        let e = expr(cx, v);
        cx.bind(n.start_byte(), &name, e, false, true);
        bind_new_collection(cx, n.start_byte(), &name, v, true);
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
    type_parameter_names(cx, n);
    let mut c = n.walk();
    for ch in n.named_children(&mut c) {
        match ch.kind_name() {
            "class_heritage" => {
                let mut c = ch.walk();
                for clause in ch.named_children(&mut c) {
                    if !clause.kind_name().ends_with("_clause") {
                        // JavaScript's `extends E`: the expression itself.
                        let e = expr(cx, clause);
                        cx.def_fact(name, e, DefFactKind::Base);
                        continue;
                    }
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

/// `class Chain<T extends Link, M>`, `interface Store<T>`: the names of its
/// type parameters, in order, as the binding [`TYPE_PARAMS`] inside it (at
/// the parameter list, so the class is its scope): what a method's
/// signature means by `T` when it is called on a value typed `Chain<Bead>`.
fn type_parameter_names(cx: &mut Cx, n: Node) {
    let Some(params) = n.field("type_parameters") else {
        return;
    };
    let mut c = params.walk();
    let names: Vec<&str> = params
        .named_children(&mut c)
        .filter(|p| p.kind_name() == "type_parameter")
        .filter_map(|p| p.field("name").map(|x| cx.t(x)))
        .collect();
    if !names.is_empty() {
        let names = names.join(",");
        cx.bind(params.start_byte(), TYPE_PARAMS, Some(names), true, false);
    }
}

/// `type AnyRouter = RouterCore<any>`, `type Both = A & { extra: number }`:
/// the alias has the members of each type it names, as bases, so that a
/// value typed by the alias finds its class's or interface's methods. A
/// union of one type besides `null` / `undefined` is that type; one of
/// several is each of them ([`union_of`], read by the resolver as the
/// alternatives); object type literals name no unit.
fn type_alias(cx: &mut Cx, n: Node) {
    let (Some(name), Some(value)) = (n.field("name"), n.field("value")) else {
        return;
    };
    let named = |t: Node| {
        matches!(
            t.kind_name(),
            "type_identifier" | "nested_type_identifier" | "generic_type" | "parenthesized_type"
        )
    };
    let parts: Vec<Node> = match value.kind_name() {
        "intersection_type" => flattened(value).into_iter().filter(|&t| named(t)).collect(),
        "union_type" => {
            let rest: Vec<Node> = flattened(value)
                .into_iter()
                .filter(|&t| !matches!(cx.t(t), "null" | "undefined"))
                .collect();
            match rest.as_slice() {
                [only] if named(*only) => vec![*only],
                // `type DateValue = CalendarDate | CalendarDateTime`: a
                // value of the alias is each alternative, one base fact
                // [`EACH`] of them (the resolver reads it as the
                // alternatives, not as bases the alias inherits from).
                _ => {
                    if let Some(e) = union_of(cx, value).filter(|e| e.starts_with(EACH)) {
                        cx.def_fact(name, Some(e), DefFactKind::Base);
                    }
                    Vec::new()
                }
            }
        }
        _ if named(value) => vec![value],
        "object_type" => {
            if let Some(k) = kept_argument(cx, n, value) {
                cx.def_fact(name, Some(format!("{KEEPS}{k}")), DefFactKind::Base);
            }
            Vec::new()
        }
        _ => Vec::new(),
    };
    for t in parts {
        let e = type_expr(cx, t);
        cx.def_fact(name, e, DefFactKind::Base);
    }
}

/// `type Mutable<T> = {-readonly [P in keyof T]: T[P]}` (alias `alias`,
/// its value `value`): a homomorphic mapped type whose every member is
/// its argument's member of the same name (`readonly` and `?` added or
/// taken away, `| null` / `| undefined` allowed), so a value of it has
/// `T`'s members: the position of `T` among the alias's type parameters.
fn kept_argument(cx: &Cx, alias: Node, value: Node) -> Option<usize> {
    let mut c = value.walk();
    let members: Vec<Node> = value.named_children(&mut c).collect();
    let [sig] = members.as_slice() else {
        return None;
    };
    let mut c = sig.walk();
    let clause = sig
        .named_children(&mut c)
        .find(|x| x.kind_name() == "mapped_type_clause")?;
    let key = cx.t(clause.field("name")?);
    let keyof = clause.field("type")?;
    if keyof.kind_name() != "index_type_query" || clause.field("alias").is_some() {
        return None;
    }
    let t = cx.t(keyof.named_child(0)?);
    // The member's type: `T[P]`, alone or with `null` / `undefined`.
    let member = sig.field("type")?.named_child(0)?;
    let lookups: Vec<Node> = match member.kind_name() {
        "union_type" => flattened(member)
            .into_iter()
            .filter(|&x| !matches!(cx.t(x), "null" | "undefined"))
            .collect(),
        _ => vec![member],
    };
    let [lookup] = lookups.as_slice() else {
        return None;
    };
    let same = |i: usize| lookup.named_child(i).map(|x| cx.t(x));
    if lookup.kind_name() != "lookup_type" || same(0) != Some(t) || same(1) != Some(key) {
        return None;
    }
    let params = alias.field("type_parameters")?;
    let mut c = params.walk();
    params
        .named_children(&mut c)
        .filter(|p| p.kind_name() == "type_parameter")
        .position(|p| p.field("name").is_some_and(|x| cx.t(x) == t))
}

/// The operands of a chain of one binary type operator (`A & B & C` is
/// `(A & B) & C` in the tree), in source order.
fn flattened(n: Node) -> Vec<Node> {
    let mut out = Vec::new();
    let mut c = n.walk();
    for t in n.named_children(&mut c) {
        if t.kind_name() == n.kind_name() {
            out.extend(flattened(t));
        } else {
            out.push(t);
        }
    }
    out
}

/// `for (const x of xs)`: `x` is an item of `xs` (a name or member path,
/// no call).
fn for_of(cx: &mut Cx, n: Node) {
    let (Some(left), Some(right)) = (n.field("left"), n.field("right")) else {
        return;
    };
    let is_of = n
        .children(&mut n.walk())
        .any(|c| !c.is_named() && cx.t(c) == "of");
    if !is_of {
        return;
    }
    match array_each(cx, right) {
        Some(each) if left.kind_name() == "identifier" => {
            let name = cx.t(left).to_string();
            cx.bind(left.start_byte(), &name, Some(each), false, false);
        }
        Some(_) => {}
        None => iterated_items(cx, left, right),
    }
}

/// `for (const x of xs)` over anything but an array literal: `x` is an
/// item of `xs` (past calls that keep the items, [`items_source`]:
/// `m.values()`, `Array.from(s)`, `[...s]`; of what a call returns,
/// `this.getAll()#elem`), a key of a map over `m.keys()` ([`KEY`]); `[k, v]`
/// over a map (`m`, `m.entries()`) is its key and its value (of an array's
/// `entries()`, an index and an item: `#k` of an array names nothing).
fn iterated_items(cx: &mut Cx, left: Node, right: Node) {
    let (source, suffix) = match view_of(cx, right, "keys") {
        Some(map) => (map, KEY),
        None => (items_source(right, cx), ELEM),
    };
    let entries = view_of(cx, source, "entries").unwrap_or(source);
    let Some(e) = expr(cx, entries).filter(|e| call_only_last(e)) else {
        return;
    };
    match left.kind_name() {
        "identifier" => {
            let name = cx.t(left).to_string();
            cx.bind(
                left.start_byte(),
                &name,
                Some(format!("{e}{suffix}")),
                false,
                false,
            );
        }
        "array_pattern" if suffix == ELEM => {
            let mut c = left.walk();
            let names: Vec<Node> = left
                .named_children(&mut c)
                .filter(|x| x.kind_name() != "comment")
                .collect();
            for (x, item) in names.into_iter().zip([KEY, ELEM]) {
                if x.kind_name() == "identifier" {
                    let name = cx.t(x).to_string();
                    cx.bind(
                        x.start_byte(),
                        &name,
                        Some(format!("{e}{item}")),
                        false,
                        false,
                    );
                }
            }
        }
        _ => {}
    }
}

/// `m` of `m.keys()` / `m.entries()` (`method`, called without arguments).
fn view_of<'t>(cx: &Cx, n: Node<'t>, method: &str) -> Option<Node<'t>> {
    let n = match n.kind_name() {
        "parenthesized_expression" | "non_null_expression" => n.named_child(0)?,
        _ => n,
    };
    if n.kind_name() != "call_expression"
        || n.field("arguments")
            .is_none_or(|a| a.named_child_count() > 0)
    {
        return None;
    }
    let f = n
        .field("function")
        .filter(|f| f.kind_name() == "member_expression")?;
    f.field("property")
        .is_some_and(|p| cx.t(p) == method)
        .then(|| f.field("object"))
        .flatten()
}

/// `[Extension, Node, Mark]`, an array literal: every one of its items that
/// [`expr`] reads ([`EACH`]), so that `C.create()` in `for (const C of […])`
/// or `[…].forEach((C) => C.create())` calls each one's `create`, as
/// TypeScript's checker reads a value of the union of the items' types.
/// `None` for anything but an array literal, or one with no item read
/// (`[1, 2]`) or with a spread (`[...xs, a]`: its items are unknown).
fn array_each(cx: &Cx, n: Node) -> Option<String> {
    let n = match n.kind_name() {
        "parenthesized_expression" => n.named_child(0)?,
        _ => n,
    };
    if n.kind_name() != "array" {
        return None;
    }
    let mut c = n.walk();
    let mut items: Vec<String> = Vec::new();
    for item in n.named_children(&mut c) {
        match item.kind_name() {
            "comment" => {}
            "spread_element" => return None,
            _ => {
                if let Some(e) = expr(cx, item)
                    && !items.contains(&e)
                {
                    items.push(e);
                }
            }
        }
    }
    (!items.is_empty()).then(|| format!("{EACH}{}", items.join(&UNION.to_string())))
}

/// Array methods whose callback's first parameter is an item of the array.
const ITEM_CALLBACKS: &[&str] = &[
    "forEach",
    "map",
    "filter",
    "some",
    "every",
    "find",
    "findIndex",
    "findLast",
    "flatMap",
];

/// Array methods that return an array of the receiver's own items
/// (ECMA-262 `Array.prototype`): `xs.filter(…)` holds what `xs` holds.
const SAME_ITEMS: &[&str] = &[
    "filter",
    "slice",
    "sort",
    "reverse",
    "concat",
    "toSorted",
    "toReversed",
];

/// The array whose items `n` holds, past calls of [`SAME_ITEMS`] methods
/// (`a.findAll().filter(…).slice()`: `a.findAll()`); `n` itself otherwise.
fn items_source<'t>(n: Node<'t>, cx: &Cx) -> Node<'t> {
    let mut n = n;
    loop {
        let inner = match n.kind_name() {
            "parenthesized_expression" | "non_null_expression" => n.named_child(0),
            "call_expression" => {
                let args = n.field("arguments");
                let count = args.map_or(0, |a| a.named_child_count());
                let f = n
                    .field("function")
                    .filter(|f| f.kind_name() == "member_expression");
                let (obj, prop) = (
                    f.and_then(|f| f.field("object")),
                    f.and_then(|f| f.field("property")).map(|p| cx.t(p)),
                );
                match (obj.map(|o| cx.t(o)), prop) {
                    (_, Some(p)) if SAME_ITEMS.contains(&p) => obj,
                    // `m.values()`: a map's values, an array's or a set's
                    // items.
                    (_, Some("values")) if count == 0 => obj,
                    // `Array.from(s)`: a copy of an iterable's items.
                    (Some("Array"), Some("from")) if count == 1 => {
                        args.and_then(|a| a.named_child(0))
                    }
                    _ => None,
                }
            }
            // `[...s]`: the items of one spread iterable.
            "array" if n.named_child_count() == 1 => n
                .named_child(0)
                .filter(|x| x.kind_name() == "spread_element")
                .and_then(|x| x.named_child(0)),
            _ => None,
        };
        match inner {
            Some(i) => n = i,
            None => return n,
        }
    }
}

/// `const xs = a.findAll().filter(…)`: `xs#elem` ([`ELEM`]) is an item of
/// `a.findAll()`, the array the [`SAME_ITEMS`] calls start from (the value
/// `a.findAll().filter()` states no items of its own).
fn bind_chain_items(cx: &mut Cx, at: usize, name: &str, value: Node) {
    let source = items_source(value, cx);
    if source == value {
        return;
    }
    if let Some(e) = expr(cx, source).filter(|e| call_only_last(e)) {
        cx.bind(
            at,
            &format!("{name}{ELEM}"),
            Some(format!("{e}{ELEM}")),
            false,
            false,
        );
    }
}

/// Whether path `e` has a call only as its last segment, if any (what
/// `#elem` can be read of: a name, a member path, or a call's return type).
fn call_only_last(e: &str) -> bool {
    !e.strip_suffix("()").unwrap_or(e).contains("()")
}

/// `xs.forEach((x) => …)` (and `map`, `filter`, …): the callback's first
/// parameter, without a type of its own, is an item of `xs` (contextual
/// typing), when `xs` is a name or member path, or ends in a call whose
/// return type states its items (`this.getAll().forEach(…)`: `getAll()#elem`),
/// past calls that keep the items (`a.findAll().filter(…).map(…)`,
/// [`items_source`]). `xs.reduce((acc, x) => …)`: its second parameter.
/// Whether it bound the parameter.
fn callback(cx: &mut Cx, n: Node) -> bool {
    let Some(call) = n
        .parent()
        .filter(|a| a.kind_name() == "arguments" && a.named_child(0) == Some(n))
        .and_then(|a| a.parent())
        .filter(|c| c.kind_name() == "call_expression")
    else {
        return false;
    };
    let Some(f) = call
        .field("function")
        .filter(|f| f.kind_name() == "member_expression")
    else {
        return false;
    };
    let (Some(obj), Some(prop)) = (f.field("object"), f.field("property")) else {
        return false;
    };
    let method = cx.t(prop).to_string();
    let at = match method.as_str() {
        "reduce" | "reduceRight" => 1,
        m if ITEM_CALLBACKS.contains(&m) => 0,
        _ => return false,
    };
    // A call only as the last segment: its return type's items.
    let items = items_source(obj, cx);
    let each = array_each(cx, items);
    let Some(source) = each
        .clone()
        .or_else(|| expr(cx, items).filter(|e| call_only_last(e)))
    else {
        return false;
    };
    let param = match n.field("parameter") {
        Some(p) if at == 0 => Some(p),
        Some(_) => None,
        None => n.field("parameters").and_then(|ps| {
            let mut c = ps.walk();
            ps.named_children(&mut c)
                .filter(|p| p.kind_name() != "comment")
                .nth(at)
        }),
    };
    let Some(ident) = param.and_then(untyped_name) else {
        return false;
    };
    let name = cx.t(ident).to_string();
    if let Some(each) = each {
        // `[A, B].forEach((C) => …)`: `C` is every item, inside the
        // callback only (a callback that is no unit binds into the unit
        // around it).
        cx.bind(ident.start_byte(), &name, Some(each), false, false);
        cx.bind(n.end_byte(), &name, Some(UNBOUND.into()), false, false);
        return true;
    }
    if method == "forEach"
        && at == 0
        && items == obj
        && let Some(key) = n
            .field("parameters")
            .and_then(|ps| {
                let mut c = ps.walk();
                ps.named_children(&mut c)
                    .filter(|p| p.kind_name() != "comment")
                    .nth(1)
            })
            .and_then(untyped_name)
    {
        // `m.forEach((v, k) => …)`: a map's key (an array's index names
        // nothing: `xs#k` is bound by no type).
        let key_name = cx.t(key).to_string();
        if !bound_before(cx, n, &key_name) {
            cx.bind(
                key.start_byte(),
                &key_name,
                Some(format!("{source}{KEY}")),
                false,
                false,
            );
            cx.bind(n.end_byte(), &key_name, Some(UNBOUND.into()), false, false);
        }
    }
    if (at == 1 || items != obj) && bound_before(cx, n, &name) {
        // `.reduce((sum, column) => …)` below a `column` of the unit: kept,
        // as for any callback (`bind_contextual_parameters`), where these
        // forms went before items through them were known.
        return false;
    }
    // Else (no items known of `xs`) what the method's signature types the
    // parameter by: `children.forEach((c) => …)` on `children: Chain<Bead>`
    // with `forEach(callback: (cur: T) => void)` in `class Chain<T>`.
    let value = match expr(cx, obj) {
        Some(o) => format!("{source}{ELEM}{FIRST_KNOWN}{o}.{method}{ARG}0{ARG}{at}"),
        None => format!("{source}{ELEM}"),
    };
    cx.bind(ident.start_byte(), &name, Some(value), false, false);
    true
}

/// The name a parameter without a type annotation binds (`x`, `(x)`,
/// `x = 1` has a type of its own: none).
fn untyped_name(param: Node) -> Option<Node> {
    match param.kind_name() {
        "identifier" => Some(param),
        "required_parameter" if param.field("type").is_none() && param.field("value").is_none() => {
            param
                .field("pattern")
                .filter(|p| p.kind_name() == "identifier")
        }
        _ => None,
    }
}

/// What the callee of call or `new` expression `call` is, as the
/// contextual types of its arguments name it (`f`, `a.f`, `C.constructor`).
fn callee_of(cx: &Cx, call: Node) -> Option<String> {
    match call.kind_name() {
        "call_expression" => expr(cx, call.field("function")?),
        "new_expression" => Some(format!(
            "{}.constructor",
            expr(cx, call.field("constructor")?)?
        )),
        _ => None,
    }
}

/// Binds each parameter without a type of function `f` to `{context}#arg:i`
/// ([`ARG`]): what TypeScript types it by, the callee's parameter its
/// function is passed to (`new Promise((resolve) => …)`: `resolve` is
/// `Promise.constructor#arg:0#arg:0`) or the member of the contextual type
/// it implements. Such a parameter is a name of its own, never an outer
/// name or a module's function; and when its context is a type of the
/// platform (`new ReadableStream({ start(controller) { … } })`) a call on
/// it is never guessed to be the corpus's one method of its name (issue 27:
/// @trpc/server's stream controllers).
///
/// A callback that is no unit binds into the unit around it: its
/// parameter is bound only when that unit has no binding of the name
/// before it (a `column` in `.reduce((sum, column) => …)` below a typed
/// `column`, a second `.map((query) => …)` after a `.filter((query) => …)`
/// is most often a value of the same type, and keeps it), and its end
/// unbinds the name again ([`UNBOUND`]): after it, the name is the outer
/// one.
fn bind_contextual_parameters(cx: &mut Cx, f: Node, context: &str) {
    let params: Vec<Node> = match (f.field("parameter"), f.field("parameters")) {
        (Some(p), _) => vec![p],
        (None, Some(ps)) => {
            let mut c = ps.walk();
            ps.named_children(&mut c)
                .filter(|p| p.kind_name() != "comment")
                .collect()
        }
        _ => return,
    };
    let unit = f.kind_name() == "method_definition";
    for (i, p) in params.into_iter().enumerate() {
        let Some(ident) = untyped_name(p) else {
            continue;
        };
        let name = cx.t(ident).to_string();
        if !unit && bound_before(cx, f, &name) {
            continue;
        }
        let value = format!("{context}{ARG}{i}");
        cx.bind(ident.start_byte(), &name, Some(value), false, false);
        if !unit {
            cx.bind(f.end_byte(), &name, Some(UNBOUND.into()), false, false);
        }
    }
}

/// Whether the function around callback `f` that is a unit (a callback
/// around it is none) binds `name` before `f`.
fn bound_before(cx: &Cx, f: Node, name: &str) -> bool {
    let from = std::iter::successors(f.parent(), |a| a.parent())
        .find(|a| match a.kind_name() {
            "function_declaration"
            | "generator_function_declaration"
            | "method_definition"
            | "program" => true,
            "arrow_function" | "function_expression" => a.parent().is_some_and(|h| {
                matches!(
                    h.kind_name(),
                    "variable_declarator" | "public_field_definition"
                )
            }),
            _ => false,
        })
        .map_or(0, |a| a.start_byte() as u32);
    let start = f.start_byte() as u32;
    // The latest binding before `f`, unless it ends an earlier callback's.
    cx.facts
        .bindings
        .iter()
        .filter(|b| b.name == name && !b.field && b.byte >= from && b.byte < start)
        .max_by_key(|b| b.byte)
        .is_some_and(|b| b.expr != UNBOUND)
}

/// A function passed as an argument: its parameters as items of an array
/// ([`callback`]), else typed by their context ([`argument_parameters`]).
fn callback_parameters(cx: &mut Cx, n: Node) {
    if !callback(cx, n) {
        argument_parameters(cx, n);
    }
}

/// `f((x) => …)`, `new C(function (x) { … })`: the parameters of a function
/// passed as an argument, typed by that argument's context
/// ([`bind_contextual_parameters`]).
fn argument_parameters(cx: &mut Cx, n: Node) {
    let Some(args) = n.parent().filter(|a| a.kind_name() == "arguments") else {
        return;
    };
    let Some(callee) = args.parent().and_then(|call| callee_of(cx, call)) else {
        return;
    };
    let mut c = args.walk();
    let Some(at) = args.named_children(&mut c).position(|a| a == n) else {
        return;
    };
    bind_contextual_parameters(cx, n, &format!("{callee}{ARG}{at}"));
}

/// `{ onEvent: (e) => … }` in an object literal of a contextual type
/// ([`contextual_type`]): the function's parameters, typed by that type's
/// member (`onEvent?: (e: Ev) => void`, [`bind_contextual_parameters`]).
fn pair_function_parameters<'t>(cx: &mut Cx, n: Node<'t>, up: &Up<'_, 't>) {
    let Some(pair) = up
        .parent()
        .filter(|p| p.kind_name() == "pair" && p.field("value") == Some(n))
    else {
        return;
    };
    let pair_up = up.above();
    let Some(object) = pair_up.parent().filter(|o| o.kind_name() == "object") else {
        return;
    };
    let Some(key) = pair
        .field("key")
        .filter(|k| k.kind_name() == "property_identifier")
    else {
        return;
    };
    let Some(typed) = contextual_type(cx, object, &pair_up.above()) else {
        return;
    };
    let name = cx.t(key).to_string();
    bind_contextual_parameters(cx, n, &format!("{typed}.{name}"));
}

/// `{ start(controller) { … } }` in an object literal of a contextual type
/// ([`contextual_type`]): the method's parameters, typed by that type's
/// member ([`bind_contextual_parameters`]).
fn literal_method_parameters<'t>(cx: &mut Cx, n: Node<'t>, up: &Up<'_, 't>) {
    let Some(object) = up.parent().filter(|o| o.kind_name() == "object") else {
        return;
    };
    let (Some(typed), Some(name)) = (contextual_type(cx, object, &up.above()), n.field("name"))
    else {
        return;
    };
    let name = cx.t(name).to_string();
    bind_contextual_parameters(cx, n, &format!("{typed}.{name}"));
}

#[cfg(test)]
mod tests {
    use super::super::walker::{fixture_sources, walked_facts};
    use crate::lang::Language;

    /// The facts of a TypeScript / JavaScript walk, entering every subtree
    /// or not.
    fn walked(language: Language, source: &str, prune: bool) -> super::super::FileFacts {
        walked_facts(language, source, |cx, root| {
            super::walk_with(cx, root, prune)
        })
    }

    /// Skipping strings, regular expressions, templates without
    /// substitutions and imports leaves every fact as it was, in the same
    /// order: on templates holding calls, `import x = require(…)`, import
    /// attributes, doc comments inside imports, syntax errors, and every
    /// TypeScript, TSX and JavaScript fixture of the repository.
    #[test]
    fn skipped_subtrees_hold_no_facts() {
        let source = r#"
import def, { a as b, type C } from "./m";
import * as ns from './ns';
import "side-effect";
import data from "./data.json" with { type: jsonKind() };
import req = require("req");
import Alias = Space.Inner;
import { /** {@link Linked} */ d } from "./d";
export { e as f } from "./e";
export * as g from "./g";
const s = "plain \" {notCalled()}" + 'single';
const r = /a(b)[c]\/d/gi;
const t = `plain ${"{"} ${called(1)} ${`nested ${deep()}`}`;
const u = `no substitution {alsoNot()}`;
const v = tagged`x ${tagArg()}`;
function h(x: Thing): Other { return b(ns.k(x), def, d); }
const broken = "unclosed;
import { half from "./half";
const w = `open ${
"#;
        for language in [Language::TypeScript, Language::Tsx] {
            assert_eq!(
                walked(language, source, true),
                walked(language, source, false)
            );
        }
        let facts = walked(Language::TypeScript, source, true);
        let sites: Vec<&str> = facts.sites.iter().map(|s| s.name.as_str()).collect();
        for used in ["called", "deep", "tagArg", "jsonKind", "b", "k", "Thing"] {
            assert!(sites.contains(&used), "{used} in {sites:?}");
        }
        for unseen in ["notCalled", "alsoNot"] {
            assert!(!sites.contains(&unseen), "{unseen} in {sites:?}");
        }

        let fixtures = fixture_sources(&["ts", "tsx", "js", "mjs", "cjs", "jsx"]);
        for (path, text) in &fixtures {
            let language = match path.extension().and_then(|e| e.to_str()) {
                Some("ts") => Language::TypeScript,
                Some("tsx") => Language::Tsx,
                _ => Language::JavaScript,
            };
            assert_eq!(
                walked(language, text, true),
                walked(language, text, false),
                "{}",
                path.display()
            );
        }
        assert!(fixtures.len() >= 20, "{} fixtures", fixtures.len());
    }
}
