//! Rust bindings that patterns, loops and closures make: tuple
//! destructuring, enum variant and struct patterns, `for` loops and
//! iterator closures over collections (items as `v#elem`, map keys and
//! values as `m#k` / `m#v`), `Option` / `Result` payload closures, type
//! parameter bounds and positional fields.

use tree_sitter::Node;

use super::super::model::{ARG, ELEM, FIRST_KNOWN, KEY, STD_WRAPPER, UNION, VALUE};
use super::super::walker::{Cx, GrammarLookup, Up};
use super::callbacks::callback_context;
use super::{DEREF_WRAPPERS, PASSTHROUGH, expr, tuple_elements, type_expr};

/// `let (a, b) = f(x)?;` binds `a` to `f.#0` and `b` to `f.#1` (the
/// elements of what `f` returns, [`TUPLE`]); `let (a, b): (A, B) = …` binds
/// them to the element types. Elements after a `..` are not bound.
pub(super) fn tuple_bindings(cx: &mut Cx, decl: Node, pattern: Node) {
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

/// A pattern with `ref` / `mut` / `ref mut` taken off.
fn bare_pattern(mut p: Node) -> Node {
    loop {
        let inner = p.named_child(p.named_child_count().saturating_sub(1));
        p = match (p.kind_name(), inner) {
            ("ref_pattern" | "mut_pattern", Some(inner)) => inner,
            // `&x` (`while let Some(&op) = ops.get(i)`, `for &x in v`)
            // names a value of the same type as `x` would; a destructured
            // `&(a, b)` is left as it was (a tuple literal's items are
            // not read so, and `&str` pairs then met `HeaderValue`'s).
            ("reference_pattern", Some(inner)) if inner.kind_name() == "identifier" => inner,
            _ => return p,
        };
    }
}

/// The value a top-level pattern is matched against — the `match`
/// scrutinee, the right side of `if let` / `while let` / `let … else` —
/// given the pattern's `parent` and the ancestors `above` it.
pub(super) fn scrutinee_node<'t>(parent: Node<'t>, above: &Up<'_, 't>) -> Option<Node<'t>> {
    match parent.kind_name() {
        // match_pattern < match_arm < match_block < match_expression
        "match_pattern" => above.nth(2)?.field("value"),
        "let_condition" | "let_declaration" => parent.field("value"),
        _ => None,
    }
}

/// The value pattern `n` (whose ancestors are `up`) is matched against:
/// the scrutinee of a top-level pattern ([`scrutinee_node`]); of an
/// element of a tuple pattern matched against a tuple expression (`if let
/// (Some(a), Some(b)) = (x, &y.z)`, `match (x, y)`), the element of the
/// same place.
fn matched_node<'t>(n: Node<'t>, up: &Up<'_, 't>) -> Option<Node<'t>> {
    let parent = up.parent()?;
    if parent.kind_name() != "tuple_pattern" {
        return scrutinee_node(parent, &up.above());
    }
    let parts = pattern_elements(parent);
    let i = parts.iter().position(|p| p.id() == n.id())?;
    let above = up.above();
    let outer = scrutinee_node(above.parent()?, &above.above())?;
    let outer = match outer.kind_name() {
        "tuple_expression" => outer,
        _ => return None,
    };
    let mut c = outer.walk();
    let elements: Vec<Node> = outer
        .named_children(&mut c)
        .filter(|e| !e.is_extra())
        .collect();
    (elements.len() == parts.len())
        .then(|| elements.get(i).copied())
        .flatten()
}

/// Bindings of `Path::Variant(a, b)` / `Some(x)` patterns: `a` is the first
/// payload of the variant (a field `Variant#0` of the enum), `x` the
/// scrutinee itself (`Option` and `Result` are transparent). A name whose
/// value is unknown is not bound: the binding would outlive its arm, as
/// bindings are scoped to the enclosing function.
///
/// Bindings start to be visible after the value matched (`if let Some(v) =
/// v.get()` reads the outer `v` on the right).
pub(super) fn tuple_struct_bindings(cx: &mut Cx, n: Node, up: &Up) {
    let Some(ty) = n.field("type") else {
        return;
    };
    let matched = matched_node(n, up);
    let value_end = matched.map_or(0, |v| v.end_byte());
    let path = match ty.kind_name() {
        "identifier" => Some(cx.t(ty).to_string()),
        "scoped_identifier" => expr(cx, ty),
        _ => None,
    };
    if let Some(path) = path.as_deref()
        && let Some(entry) = map_entry_variant(cx, path, matched)
    {
        // `Entry::Occupied(e)` of `m.entry(k)`: `e`'s key and value are `m`'s.
        if let Some(p) = pattern_elements(n).first().map(|p| bare_pattern(*p))
            && p.kind_name() == "identifier"
        {
            let name = cx.t(p).to_string();
            let at = value_end.max(p.start_byte());
            cx.bind(
                at,
                &format!("{name}{KEY}"),
                Some(format!("{entry}{KEY}")),
                false,
                false,
            );
            cx.bind(
                at,
                &format!("{name}{ELEM}"),
                Some(format!("{entry}{VALUE}")),
                false,
                false,
            );
        }
        return;
    }
    for (i, item) in pattern_elements(n).into_iter().enumerate() {
        if item.kind_name() == "remaining_field_pattern" {
            break;
        }
        let p = bare_pattern(item);
        if p.kind_name() == "tuple_pattern" && matches!(path.as_deref(), Some("Some" | "Ok")) {
            // `Some((k, v))`: the elements of the pair the value holds.
            let source = matched.and_then(|v| expr(cx, v));
            bind_pair(cx, p, source.as_deref(), value_end);
            continue;
        }
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

/// `m` for a pattern `Entry::Occupied(e)` / `Entry::Vacant(e)` matched
/// against `m.entry(k)`, when `m` is a path without calls.
fn map_entry_variant(cx: &Cx, path: &str, matched: Option<Node>) -> Option<String> {
    let mut segs = path.rsplit('.');
    let (variant, ty) = (segs.next()?, segs.next()?);
    if ty != "Entry" || !matches!(variant, "Occupied" | "Vacant") {
        return None;
    }
    let map = expr(cx, matched?)?.strip_suffix(".entry()")?.to_string();
    (!map.contains("()")).then_some(map)
}

/// Methods whose result holds a map's `(key, value)` pair: an iterator's
/// `next()` (`IntoIter<K, V>` binds `#k` / `#v` like the map), a map's
/// removals and ends.
const PAIR_METHODS: &[&str] = &[
    "next",
    "next_back",
    "remove_entry",
    "shift_remove_entry",
    "swap_remove_entry",
    "pop",
    "first",
    "last",
    "get_key_value",
];

/// Names of a tuple's elements as pseudo-fields (`value#0` for a field
/// `value: Option<(A, B)>`).
const TUPLE_ITEMS: &[&str] = &["#0", "#1", "#2", "#3"];

/// The expressions of the elements of a pair that `source` holds
/// (`Some((k, v))` matched against it, `|(k, v)|` given its payload):
/// `m#k` / `m#v` of `m.next()`, `m.remove_entry(x)`, …
/// ([`PAIR_METHODS`]); `t#0`, `t#1`, … of a path `t` (or `t.take()`)
/// whose type is a tuple ([`TUPLE_ITEMS`]). Nothing for any other source.
fn pair_elements(source: &str, n: usize) -> Vec<String> {
    let (base, method) = match source.strip_suffix("()").and_then(|s| s.rsplit_once('.')) {
        Some((base, m)) => (base, Some(m)),
        None => (source, None),
    };
    if base.contains("()") || base.is_empty() {
        return Vec::new();
    }
    match method {
        // A map's pair, else (a type of the repository's own method of
        // that name) the elements of the tuple it returns.
        Some(m) if PAIR_METHODS.contains(&m) && n == 2 => vec![
            format!("{base}{KEY}{FIRST_KNOWN}{base}.{m}.#0"),
            format!("{base}{VALUE}{FIRST_KNOWN}{base}.{m}.#1"),
        ],
        None | Some("take") => TUPLE_ITEMS
            .iter()
            .take(n)
            .map(|i| format!("{base}{i}"))
            .collect(),
        _ => Vec::new(),
    }
}

/// Binds the names of tuple pattern `p` to the elements of the pair
/// `source` holds ([`pair_elements`]), visible from `after` on.
fn bind_pair(cx: &mut Cx, p: Node, source: Option<&str>, after: usize) {
    let Some(source) = source else {
        return;
    };
    let parts = pattern_elements(p);
    let elements = pair_elements(source, parts.len());
    for (part, element) in parts.into_iter().zip(elements) {
        let part = bare_pattern(part);
        if part.kind_name() == "identifier" {
            let name = cx.t(part).to_string();
            cx.bind(
                after.max(part.start_byte()),
                &name,
                Some(element),
                false,
                false,
            );
        }
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

/// A map's entries (`OccupiedEntry<'a, K, V>` of indexmap and std): the
/// key is the first type argument, the value (what `get()`, `into_mut()`,
/// `insert(v)` give, [`crate::resolve::lang::Conventions::item_methods`])
/// the second.
const ENTRIES: &[&str] = &["OccupiedEntry", "VacantEntry"];

/// Iterators over a map's pairs (`indexmap::map::IntoIter<K, V>`): keys
/// and values as a map's; with one type argument, items as a sequence's.
const ITERATORS: &[&str] = &["IntoIter", "Iter", "IterMut", "Drain"];

/// Traits whose `Item = X` names what an `impl Trait` / `dyn Trait` value
/// yields.
const ITERATOR_TRAITS: &[&str] = &[
    "Iterator",
    "DoubleEndedIterator",
    "ExactSizeIterator",
    "IntoIterator",
];

/// `X` of `impl Iterator<Item = X>` or `dyn Iterator<Item = X> + 'a` (see
/// [`ITERATOR_TRAITS`]).
fn iterator_item<'t>(cx: &Cx, mut t: Node<'t>) -> Option<Node<'t>> {
    loop {
        t = match t.kind_name() {
            "bounded_type" => {
                let mut c = t.walk();
                let first = t
                    .named_children(&mut c)
                    .find(|k| k.kind_name() != "lifetime");
                first?
            }
            "abstract_type" | "dynamic_type" => t.field("trait").or_else(|| t.named_child(0))?,
            _ => break,
        };
    }
    if t.kind_name() != "generic_type" {
        return None;
    }
    let name = type_expr(cx, t.field("type")?)?;
    if !ITERATOR_TRAITS.contains(&name.rsplit('.').next().unwrap_or_default()) {
        return None;
    }
    let args = t.field("type_arguments")?;
    let mut c = args.walk();
    let item = args.named_children(&mut c).find(|a| {
        a.kind_name() == "type_binding" && a.field("name").is_some_and(|n| cx.t(n) == "Item")
    })?;
    item.field("type")
}

/// What a sequence of `item`s yields: each item (`#elem`); an item that is
/// a pair also as a key and a value (`#k` / `#v`, what `for (a, b) in v`
/// binds, as over a map).
fn sequence_items<'t>(item: Node<'t>) -> Vec<(&'static str, Node<'t>)> {
    let mut out = vec![(ELEM, item)];
    let bare = match item.kind_name() {
        "reference_type" => item.field("type").unwrap_or(item),
        _ => item,
    };
    if bare.kind_name() == "tuple_type" {
        let mut c = bare.walk();
        let pair: Vec<Node> = bare.named_children(&mut c).collect();
        if let [k, v] = pair[..] {
            out.extend([(KEY, k), (VALUE, v)]);
        }
    }
    out
}

/// Wrappers whose payload's items are named as theirs: a function's
/// `-> Result<Vec<T>, E>` gives `T` items to `f()?`, `f().unwrap()`
/// (`let docs = load(s)?; docs[0]`), as `Option<(A, B)>` gives its
/// tuple's elements.
const PAYLOAD_ITEMS: &[&str] = &["Option", "Result"];

/// The item type nodes of a collection type: `[(suffix, item type)]`.
fn item_nodes<'t>(cx: &Cx, t: Node<'t>) -> Vec<(&'static str, Node<'t>)> {
    if let Some(elems) = tuple_elements(cx, t) {
        // `Option<(A, B)>`: its elements as `#0`, `#1`, … (see [`TUPLE_ITEMS`]).
        return elems
            .into_iter()
            .zip(TUPLE_ITEMS)
            .map(|(e, i)| (*i, e))
            .collect();
    }
    if let Some(item) = iterator_item(cx, t) {
        return sequence_items(item);
    }
    let t = match t.kind_name() {
        "reference_type" => match t.field("type") {
            Some(inner) => inner,
            None => return Vec::new(),
        },
        _ => t,
    };
    match t.kind_name() {
        "array_type" => t.field("element").map(sequence_items).unwrap_or_default(),
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
            let pairs = ITERATORS.contains(&name.as_str()) && args.len() == 2;
            let two = |a: &'static str, b: &'static str| match args[..] {
                [k, v, ..] => vec![(a, k), (b, v)],
                _ => Vec::new(),
            };
            if SEQUENCES.contains(&name.as_str()) || ITERATORS.contains(&name.as_str()) && !pairs {
                args.first().map(|a| sequence_items(*a)).unwrap_or_default()
            } else if MAPS.contains(&name.as_str()) || pairs {
                two(KEY, VALUE)
            } else if ENTRIES.contains(&name.as_str()) {
                two(KEY, ELEM)
            } else if DEREF_WRAPPERS.contains(&name.as_str())
                || PAYLOAD_ITEMS.contains(&name.as_str())
            {
                args.first().map(|a| item_nodes(cx, *a)).unwrap_or_default()
            } else if name == "OnceLock" || name == "OnceCell" {
                // `get()` gives the value, as an item's method does.
                args.first().map(|a| vec![(ELEM, *a)]).unwrap_or_default()
            } else {
                Vec::new()
            }
        }
        _ => Vec::new(),
    }
}

/// The item types of a collection type: `[(suffix, item type)]`, and the
/// items of an item that is a collection itself, one level down
/// (`Vec<(Vec<&A>, &B)>`: `#k#elem` is `A`).
fn item_types(cx: &Cx, t: Node) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (suffix, item) in item_nodes(cx, t) {
        if let Some(e) = type_expr(cx, item) {
            out.push((suffix.to_string(), e));
        }
        for (inner, deeper) in item_nodes(cx, item) {
            if let Some(e) = type_expr(cx, deeper) {
                out.push((format!("{suffix}{inner}"), e));
            }
        }
    }
    out
}

/// Binds the item pseudo-names of `name: t` (see [`ELEM`]), and the
/// standard-library wrapper `t` is written in ([`STD_WRAPPER`]).
pub(super) fn bind_items(cx: &mut Cx, at: usize, name: &str, t: Node, field: bool) {
    for (suffix, item) in item_types(cx, t) {
        cx.bind(at, &format!("{name}{suffix}"), Some(item), true, field);
    }
    if let Some(w) = std_wrapper(cx, t) {
        cx.bind(at, &format!("{name}{STD_WRAPPER}"), Some(w), true, field);
    }
}

/// The wrappers a type's binding reads through (the payload is what is
/// bound) whose own type a repository trait may be implemented for, and
/// which do not deref to their payload: a method called on one is its own
/// (or such a trait's), never the payload's.
const STD_WRAPPERS: &[&str] = &[
    "Option", "Result", "Mutex", "RwLock", "Weak", "OnceLock", "OnceCell", "RefCell",
];

/// `Option` for `Option<&V>` / `&mut Option<T>` / `std::option::Option<T>`
/// (see [`STD_WRAPPERS`]), else `None`.
fn std_wrapper(cx: &Cx, t: Node) -> Option<String> {
    let t = match t.kind_name() {
        "reference_type" => t.field("type")?,
        _ => t,
    };
    if t.kind_name() != "generic_type" {
        return None;
    }
    let name = type_expr(cx, t.field("type")?)?;
    let last = name.rsplit('.').next().unwrap_or_default();
    STD_WRAPPERS.contains(&last).then(|| last.to_string())
}

/// Iterator adapters that keep the items as they are.
pub(crate) const ADAPTERS: &[&str] = &[
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
    // indexmap's `MutableKeys::iter_mut2`: `(&mut K, &mut V)` pairs.
    "iter_mut2",
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

/// What a loop or an iterator closure walks ([`iteration_source`]).
struct Source {
    /// The collection: a field or local path (`self.values`), or a call
    /// of one whose items its return type states (`sheet.rows()`, items
    /// `sheet.rows()#elem`, see `model::RETURNED`).
    base: String,
    /// How the items are seen.
    items: Items,
    /// Whether any iterator method was seen.
    adapted: bool,
    /// `v.iter()` for a walk of `v.iter()` (`iter_mut`, `into_iter`): the
    /// items of what that method of `v`'s type returns, for a `v` that
    /// names no collection itself (`node: &mut Array`).
    via: Option<String>,
}

/// Methods that give the items of what they are called on, whose own
/// return type may say what those are ([`Source::via`]).
const ITER_METHODS: &[&str] = &["iter", "iter_mut", "into_iter"];

/// `&self.values.iter().enumerate()` → (`self.values`, Enumerated), when the
/// base is a field or local path (no calls); `sheet.rows().map(…)` →
/// `sheet.rows()` when the innermost call is no iterator method and is
/// called on such a path (or is a function's call, `parse(s)`).
fn iteration_source(cx: &Cx, mut n: Node) -> Option<Source> {
    let mut items = Items::Each;
    let mut adapted = false;
    let mut innermost = None;
    loop {
        match n.kind_name() {
            "reference_expression" | "parenthesized_expression" => {
                n = n.field("value").or_else(|| n.named_child(0))?;
            }
            "call_expression" => {
                let f = n.field("function")?;
                let m = f
                    .field("field")
                    .filter(|_| f.kind_name() == "field_expression")
                    .map(|m| cx.t(m));
                match m {
                    Some("enumerate") if items == Items::Each => items = Items::Enumerated,
                    Some("values" | "values_mut" | "into_values") => items = Items::Values,
                    Some("keys" | "into_keys") => items = Items::Keys,
                    Some(m) if ADAPTERS.contains(&m) => {}
                    _ => {
                        // A call whose return type says what it yields.
                        let e = expr(cx, n)?;
                        let head = e.strip_suffix("()")?;
                        let by_value = matches!(items, Items::Each | Items::Enumerated);
                        return (!head.contains("()") && !head.is_empty() && by_value).then_some(
                            Source {
                                base: e,
                                items,
                                adapted: true,
                                via: None,
                            },
                        );
                    }
                }
                innermost = m;
                adapted = true;
                n = f.field("value")?;
            }
            _ => {
                let base = expr(cx, n)?;
                if base.contains("()") {
                    return None;
                }
                let via = innermost
                    .filter(|m| ITER_METHODS.contains(m))
                    .filter(|_| matches!(items, Items::Each | Items::Enumerated))
                    .map(|m| format!("{base}.{m}()"));
                return Some(Source {
                    base,
                    items,
                    adapted,
                    via,
                });
            }
        }
    }
}

/// Binds the names a loop pattern or closure parameter gets from the
/// items of `source`.
fn bind_iteration(cx: &mut Cx, pattern: Node, source: &Source) {
    for (at, name, item) in iteration_names(cx, pattern, source, source.items) {
        cx.bind(at, &name, Some(item), false, false);
    }
}

/// Item `suffix` of `source` (`base#elem`), else of its `via`
/// (`base#elem¦base.iter()#elem`, see [`FIRST_KNOWN`]).
fn item_of(source: &Source, suffix: &str) -> String {
    match &source.via {
        Some(via) => format!("{}{suffix}{FIRST_KNOWN}{via}{suffix}", source.base),
        None => format!("{}{suffix}", source.base),
    }
}

/// The names a loop pattern or closure parameter gets from `items` of
/// `source`, each with its byte and the item it is (`base#elem`, `base#k`,
/// …, [`item_of`]). `(i, (k, v))` of a map's `enumerate()` names its pairs.
fn iteration_names(
    cx: &Cx,
    pattern: Node,
    source: &Source,
    items: Items,
) -> Vec<(usize, String, String)> {
    let p = bare_pattern(pattern);
    let named = |suffix: &str| vec![(p.start_byte(), cx.t(p).to_string(), item_of(source, suffix))];
    match (p.kind_name(), items) {
        ("identifier", Items::Each) => named(ELEM),
        ("identifier", Items::Values) => named(VALUE),
        ("identifier", Items::Keys) => named(KEY),
        ("tuple_pattern", Items::Enumerated | Items::Each) => {
            // `(i, x)` of `enumerate()`; `(k, v)` of a map.
            let parts = pattern_elements(p);
            let suffixes: [&str; 2] = if items == Items::Enumerated {
                ["", ELEM]
            } else {
                [KEY, VALUE]
            };
            let mut out = Vec::new();
            for (part, suffix) in parts.into_iter().zip(suffixes) {
                let part = bare_pattern(part);
                match part.kind_name() {
                    "identifier" if !suffix.is_empty() => {
                        out.push((
                            part.start_byte(),
                            cx.t(part).to_string(),
                            item_of(source, suffix),
                        ));
                    }
                    // `(i, (k, v))`: the enumerated item is a pair.
                    "tuple_pattern" if items == Items::Enumerated && suffix == ELEM => {
                        out.extend(iteration_names(cx, part, source, Items::Each));
                    }
                    _ => {}
                }
            }
            out
        }
        _ => Vec::new(),
    }
}

/// `v.iter().map(|(k, x)| (k.f(), x))`: per element of the tuple the
/// closure gives, that element with the closure's parameters read as the
/// items of `v` they are (`v#k.f()`, `v#v`); `None` for any other source.
fn mapped_tuple(cx: &Cx, v: Node) -> Option<Vec<Option<String>>> {
    let f = v
        .field("function")
        .filter(|f| f.kind_name() == "field_expression")?;
    if v.kind_name() != "call_expression" || cx.t(f.field("field")?) != "map" {
        return None;
    }
    let source = iteration_source(cx, f.field("value")?)?;
    let closure = v
        .field("arguments")?
        .named_child(0)
        .filter(|c| c.kind_name() == "closure_expression")?;
    let body = closure
        .field("body")
        .filter(|b| b.kind_name() == "tuple_expression")?;
    let param = closure.field("parameters")?.named_child(0)?;
    if !source.adapted {
        return None;
    }
    let params = iteration_names(cx, param, &source, source.items);
    let mut c = body.walk();
    let elements = body
        .named_children(&mut c)
        .filter(|e| !e.is_extra())
        .map(|e| {
            let e = expr(cx, e)?;
            let head_len = e.find(['.', '#']).unwrap_or(e.len());
            let (head, rest) = e.split_at(head_len);
            Some(match params.iter().find(|(_, name, _)| name == head) {
                // Each alternative of the item ([`item_of`]) goes on.
                Some((_, _, item)) => item
                    .split(FIRST_KNOWN)
                    .map(|alt| format!("{alt}{rest}"))
                    .collect::<Vec<_>>()
                    .join(&FIRST_KNOWN.to_string()),
                None => e.clone(),
            })
        })
        .collect();
    Some(elements)
}

/// `for p in v.iter() { … }`: `p` is an item of `v` (see [`bind_iteration`]).
pub(super) fn for_bindings(cx: &mut Cx, n: Node) {
    let (Some(p), Some(v)) = (n.field("pattern"), n.field("value")) else {
        return;
    };
    if let Some(source) = iteration_source(cx, v) {
        bind_iteration(cx, p, &source);
    }
}

/// The body of `for p in v` (reached after `v` in the walk): when the
/// items' type is unknown, the pattern's names are unknown in the body,
/// not the closure parameters of the same names in `v`
/// (`xs.iter().map(|(key, v)| …)`), bound before; when `v` maps items to
/// a tuple (`xs.iter().map(|(key, v)| (key.f(), v))`), each name is its
/// element ([`mapped_tuple`]).
pub(super) fn for_body_bindings(cx: &mut Cx, body: Node, up: &Up) {
    let Some(n) = up
        .parent()
        .filter(|f| f.kind_name() == "for_expression" && f.field("body") == Some(body))
    else {
        return;
    };
    let (Some(p), Some(v)) = (n.field("pattern"), n.field("value")) else {
        return;
    };
    if iteration_source(cx, v).is_some() {
        return;
    }
    // `for (k, x) in v.iter().map(|(k, x)| (k.f(), x))`: each name is its
    // element of the closure's tuple.
    let mut mapped: Vec<(String, String)> = Vec::new();
    let tuple = bare_pattern(p);
    if tuple.kind_name() == "tuple_pattern"
        && let Some(elements) = mapped_tuple(cx, v)
        && let parts = pattern_elements(tuple)
        && parts.len() == elements.len()
    {
        for (part, element) in parts.into_iter().zip(elements) {
            let part = bare_pattern(part);
            if part.kind_name() == "identifier"
                && let Some(element) = element
            {
                mapped.push((cx.t(part).to_string(), element));
            }
        }
    }
    let mut names = Vec::new();
    pattern_names(cx, p, &mut names);
    for name in names {
        let value = match mapped.iter().find(|(n, _)| *n == name) {
            Some((_, element)) => element.clone(),
            None => name.clone(),
        };
        cx.bind(body.start_byte(), &name, Some(value), false, false);
    }
}

/// The names a (tuple) pattern binds.
fn pattern_names(cx: &Cx, p: Node, out: &mut Vec<String>) {
    let p = bare_pattern(p);
    match p.kind_name() {
        "identifier" => out.push(cx.t(p).to_string()),
        "tuple_pattern" => {
            for part in pattern_elements(p) {
                pattern_names(cx, part, out);
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
/// the receiver itself since `Option` and `Result` are transparent. A
/// parameter these rules give no value is unknown in the closure (bound
/// to its own name), not the outer name it shadows (`key: &str` around
/// `.map(|(_, key, _)| key.as_mut())`).
pub(super) fn closure_bindings(cx: &mut Cx, n: Node, up: &Up) {
    let Some(params) = n.field("parameters") else {
        return;
    };
    let first_new = cx.facts.bindings.len();
    closure_parameter_values(cx, params, up);
    // Passed as argument `i` of a call: an untyped parameter `j` is what
    // the callee's `Fn` bound gives it (`callee#arg:i#arg:j`).
    let context = callback_context(cx, n, up);
    let mut names = Vec::new();
    let mut typed: Vec<(String, String)> = Vec::new();
    let mut c = params.walk();
    for (j, p) in params.named_children(&mut c).enumerate() {
        let bare = bare_pattern(p);
        if let Some(context) = &context
            && bare.kind_name() == "identifier"
        {
            typed.push((cx.t(bare).to_string(), format!("{context}{ARG}{j}")));
        }
        pattern_names(cx, p, &mut names);
    }
    // Bindings last until the end of the function: after the closure, an
    // outer binding of the same function that a parameter shadowed holds
    // again.
    let function_start = up
        .iter()
        .find(|a| a.kind_name() == "function_item")
        .map_or(0, |f| f.start_byte() as u32);
    for name in names {
        if cx.facts.bindings[first_new..]
            .iter()
            .any(|b| b.name == name)
        {
            continue;
        }
        let end = n.end_byte() as u32;
        let earlier = &cx.facts.bindings[..first_new];
        // A `let` around the closure binds the name after it anyway.
        let rebound = earlier.iter().any(|b| b.name == name && b.byte > end);
        let outer = earlier
            .iter()
            .rfind(|b| b.name == name && !b.field && b.byte >= function_start)
            .filter(|_| !rebound)
            .map(|b| (b.expr.clone(), b.is_type));
        let value = typed
            .iter()
            .find(|(n, _)| *n == name)
            .map_or_else(|| name.clone(), |(_, v)| v.clone());
        cx.bind(params.start_byte(), &name, Some(value), false, false);
        if let Some((expr, is_type)) = outer {
            cx.bind(n.end_byte(), &name, Some(expr), is_type, false);
        }
    }
}

/// The values [`closure_bindings`] gives a closure's parameters `params`.
fn closure_parameter_values(cx: &mut Cx, params: Node, up: &Up) {
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
        && let Some(source) = iteration_source(cx, recv)
        // `self.get(k).map(|x| …)`: an `Option`'s payload, not items (below).
        && !(source.base.ends_with(')') && PAYLOAD_CLOSURES.contains(&cx.t(m)))
    {
        let m = cx.t(m);
        let first = params.named_child(0);
        let (fold, collection) = (m == "fold", COLLECTION_CLOSURES.contains(&m));
        let adapted = source.adapted;
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
                bind_iteration(cx, target, &source);
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
        && first.kind_name() == "tuple_pattern"
    {
        // `m.shift_remove_entry(k).and_then(|(k, v)| …)`: the pair's elements.
        bind_pair(cx, first, payload.as_deref(), first.start_byte());
    } else if let Some(first) = params.named_child(0).map(bare_pattern)
        && first.kind_name() == "identifier"
    {
        let name = cx.t(first).to_string();
        cx.bind(first.start_byte(), &name, payload, false, false);
    }
}

/// Bindings of `Type { a, b: x }` patterns: the fields of `Type`.
pub(super) fn struct_pattern_bindings(cx: &mut Cx, n: Node) {
    let Some(path) = n.field("type").and_then(|t| type_expr(cx, t)) else {
        return;
    };
    // `E::Variant { f, .. }` (a type's path before the last segment): a
    // struct variant's field, which the enum holds among its fields.
    let variant_of = path
        .rsplit_once('.')
        .map(|(owner, _)| owner)
        .filter(|owner| {
            let last = owner.rsplit('.').next().unwrap_or_default();
            last.starts_with(char::is_uppercase)
        })
        .map(str::to_string);
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
            let value = match &variant_of {
                Some(e) => format!("{path}.{field_name}{FIRST_KNOWN}{e}.{field_name}"),
                None => format!("{path}.{field_name}"),
            };
            cx.bind(bound.start_byte(), &name, Some(value), false, false);
        }
    }
}

/// `T: A + B` (a type parameter or `where` bound): `T` stands for each of
/// its traits (`A∪B`, see [`UNION`]; lifetimes and `?Sized` name none), so
/// a method of any bound the repository defines is found whichever bound
/// comes first, and a value bounded only by traits from elsewhere is
/// known to be one (no guess on its methods).
pub(super) fn bind_bounded(cx: &mut Cx, at: Node, name: Node, bounds: Node) {
    let mut c = bounds.walk();
    let traits: Vec<String> = bounds
        .named_children(&mut c)
        .filter_map(|b| type_expr(cx, b))
        .collect();
    let value = (!traits.is_empty()).then(|| traits.join(&UNION.to_string()));
    let name = cx.t(name).to_string();
    cx.bind(at.start_byte(), &name, value, true, false);
}

/// Positional fields of tuple structs (`0`, `1`, …) and enum variants
/// (`Variant#0`, …), as typed fields of the struct / enum.
pub(super) fn ordered_fields(cx: &mut Cx, list: Node, variant: Option<&str>) {
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
