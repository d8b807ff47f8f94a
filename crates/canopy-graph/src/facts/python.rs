//! Python: which facts a file states.
//!
//! Facts: calls (`f()`, `a.f()`), other name uses (identifiers and
//! attributes that are not definitions, parameters or assignment targets),
//! `import` / `from … import … as …` bindings, assignments (`p = Parser()`,
//! `x: T = …`, `self.x = …` as a field of the class), typed parameters,
//! return annotations (or the first returned value) and base classes.

use tree_sitter::Node;

use super::model::{
    AT, Binding, DefFact, DefFactKind, EACH, ELEM, FIRST_KNOWN, KEY, PARAM_VALUE, RETURNED,
    SUBSCRIPT_CALL, SiteKind, TUPLE, UNION, VALUE,
};
use super::walker::{Cx, GrammarLookup, Up, walk_tree_pruned};

/// Receiver names that mean "the enclosing class's instance" / "the class".
pub(crate) const SELF_NAMES: &[&str] = &["self"];
/// Receiver names that mean the enclosing class itself.
pub(crate) const CLS_NAMES: &[&str] = &["cls"];

/// The normalised expression of a value node (see [`crate::facts`]).
pub(crate) fn expr(cx: &Cx, n: Node) -> Option<String> {
    match n.kind_name() {
        "identifier" => Some(cx.t(n).to_string()),
        "attribute" if own_class(cx, n).is_some() => own_class(cx, n),
        "attribute" => {
            let obj = expr(cx, n.field("object")?)?;
            let attr = cx.t(n.field("attribute")?);
            Some(format!("{obj}.{attr}"))
        }
        "call" => match own_class(cx, n) {
            Some(class) => Some(class),
            None => Some(format!("{}()", expr(cx, n.field("function")?)?)),
        },
        "parenthesized_expression" | "await" => expr(cx, n.named_child(0)?),
        "subscript" => subscript(cx, n),
        _ => None,
    }
}

/// `x[k]` is what `x.__getitem__(k)` gives: the method's result on an
/// instance of a repository class that defines it, else an item of the
/// collection `x` (`x#elem`, or a map's value `x#v`; the Python
/// [`crate::resolve::lang::Conventions::item_methods`]). A slice
/// (`x[1:]`) is a collection, no item: left unknown.
fn subscript(cx: &Cx, n: Node) -> Option<String> {
    let mut c = n.walk();
    if n.children_by_field_name("subscript", &mut c)
        .any(|k| k.kind_name() == "slice")
    {
        return None;
    }
    Some(format!("{}.{SUBSCRIPT_CALL}", expr(cx, n.field("value")?)?))
}

/// `type(self)` or `self.__class__` in a method: the class around it (so
/// `type(self)()` makes one, as the method's own class does; a subclass's
/// instance is read as the class that defines the method, except where a
/// method returns it: see [`own_class_value`]).
fn own_class(cx: &Cx, n: Node) -> Option<String> {
    match n.kind_name() {
        "call" => {
            let f = n.field("function")?;
            if f.kind_name() != "identifier" || cx.t(f) != "type" {
                return None;
            }
            let args = n.field("arguments")?;
            if args.named_child_count() != 1 || !SELF_NAMES.contains(&cx.t(args.named_child(0)?)) {
                return None;
            }
        }
        "attribute" => {
            let object = n.field("object")?;
            if cx.t(n.field("attribute")?) != "__class__" || !SELF_NAMES.contains(&cx.t(object)) {
                return None;
            }
        }
        _ => return None,
    }
    let mut up = n.parent();
    while let Some(x) = up {
        if x.kind_name() == "class_definition" {
            return x.field("name").map(|name| cx.t(name).to_string());
        }
        up = x.parent();
    }
    None
}

/// A returned value made of the receiver's own class, written as `cls`
/// would make it, so that a call on a subclass's instance gives the
/// subclass's ([`crate::resolve::lang::ReceiverResult`]): `type(self)` and
/// `self.__class__` are `cls`, and a call of either `cls()` (`return
/// type(self)(**kw)`, `return self.__class__(x)`). Else `None` (the value
/// reads as [`expr`] reads it).
fn own_class_value(cx: &Cx, n: Node) -> Option<String> {
    let cls = CLS_NAMES[0];
    if own_class(cx, n).is_some() {
        return Some(cls.to_string());
    }
    let f = n.field("function").filter(|_| n.kind_name() == "call")?;
    own_class(cx, f).map(|_| format!("{cls}()"))
}

/// The normalised name of a type annotation (`Optional[X]`, `"X"`, `X | None` → `X`).
pub(crate) fn type_expr(cx: &Cx, n: Node) -> Option<String> {
    match n.kind_name() {
        "type" => type_expr(cx, n.named_child(0)?),
        "identifier" | "attribute" => expr(cx, n),
        "string" => {
            let s = cx.t(n).trim_matches(|c| c == '"' || c == '\'');
            s.split('[')
                .next()
                .filter(|s| {
                    s.chars()
                        .all(|c| c.is_alphanumeric() || c == '_' || c == '.')
                })
                .map(str::to_string)
        }
        // `A | B | None`: each alternative ([`union_of`]).
        "binary_operator" => union_of(cx, &union_operands(n)),
        "generic_type" | "subscript" => {
            let head = n.named_child(0)?;
            let name = cx.t(head);
            if name.ends_with("Optional") || name.ends_with("Union") {
                // `Union[A, B]` in a type is one `type_parameter` holding
                // both; `typing.Union[A, B]` (a subscript) has them side
                // by side after the head.
                let inner = n.named_child(1)?;
                let mut c = n.walk();
                let args: Vec<Node> = if inner.kind_name() == "type_parameter" {
                    let mut c = inner.walk();
                    inner.named_children(&mut c).collect()
                } else {
                    n.named_children(&mut c).skip(1).collect()
                };
                union_of(cx, &args)
            } else if matches!(name.rsplit('.').next(), Some("type" | "Type")) {
                // `type[X]`: the class `X` itself, read as an `X` for the
                // methods looked up on it (a classmethod, or any method
                // called through the class). Not the class as a value: a
                // parameter so annotated would read each use of it as a
                // reference to `X`, and `x()` makes nothing known.
                class_of_type_annotation(cx, n)
            } else if name.ends_with("Type") || name.ends_with("Callable") {
                None
            } else {
                // `ParamType[t.Any]` → `ParamType`; builtins (`list[X]`) simply do not resolve.
                expr(cx, head)
            }
        }
        _ => None,
    }
}

/// The operands of a chain of `|` in an annotation (`A | B | None` is
/// `(A | B) | None` in the tree), in source order.
fn union_operands(n: Node) -> Vec<Node> {
    let mut out = Vec::new();
    let mut stack = vec![n];
    while let Some(x) = stack.pop() {
        match (x.kind_name(), x.field("left"), x.field("right")) {
            ("binary_operator", Some(l), Some(r)) => {
                stack.push(r);
                stack.push(l);
            }
            _ => out.push(x),
        }
    }
    out
}

/// The type a union of `alts` names (`A | B`, `Union[A, B]`,
/// `Optional[A]`): each alternative that is no `None` and that
/// [`type_expr`] reads, joined by [`UNION`] (a value of the union is one
/// of them, as a type checker reads it: a call on it may mean any one's
/// method). An alternative the corpus does not define (`str`) is skipped
/// by the resolver, since it holds none of the corpus's methods.
fn union_of(cx: &Cx, alts: &[Node]) -> Option<String> {
    let mut out: Vec<String> = Vec::new();
    for &a in alts {
        if cx.t(a) == "None" {
            continue;
        }
        if let Some(t) = type_expr(cx, a)
            && !out.contains(&t)
        {
            out.push(t);
        }
    }
    (!out.is_empty()).then(|| out.join(&UNION.to_string()))
}

/// Generic types whose first argument is what iterating one gives
/// (`for x in xs` with `xs: list[T]` makes `x` a `T`).
const ITERABLES: &[&str] = &[
    "list",
    "List",
    "set",
    "Set",
    "frozenset",
    "FrozenSet",
    "AbstractSet",
    "MutableSet",
    "Sequence",
    "MutableSequence",
    "Iterable",
    "Iterator",
    "Collection",
    "Reversible",
    "Generator",
    "deque",
    "Deque",
    // A mapping's views: `ValuesView[V]` iterates its values, `KeysView[K]`
    // (an `AbstractSet`) its keys.
    "ValuesView",
    "KeysView",
    "AsyncIterable",
    "AsyncIterator",
];

/// The item type of an iterable annotation (`list[T]`, `t.Sequence[T]`,
/// `Optional[List["T"]]`, `Iterable[T] | None` → `T`).
fn item_type(cx: &Cx, n: Node) -> Option<String> {
    generic_argument(cx, n, ITERABLES)
}

/// `T` of an annotation `G[T]` whose head `G` is one of `heads`
/// (qualified or not), looking through `Optional[…]` and `… | None`.
fn generic_argument(cx: &Cx, n: Node, heads: &[&str]) -> Option<String> {
    match n.kind_name() {
        "type" => generic_argument(cx, n.named_child(0)?, heads),
        "binary_operator" => {
            let (left, right) = (n.field("left")?, n.field("right")?);
            let kept = if cx.t(left) == "None" { right } else { left };
            generic_argument(cx, kept, heads)
        }
        "generic_type" | "subscript" => {
            let head = cx.t(n.named_child(0)?);
            let head = head.rsplit('.').next().unwrap_or_default();
            let arg = n.named_child(1)?;
            let arg = if arg.kind_name() == "type_parameter" {
                arg.named_child(0)?
            } else {
                arg
            };
            if head == "Optional" {
                generic_argument(cx, arg, heads)
            } else if heads.contains(&head) {
                type_expr(cx, arg)
            } else {
                None
            }
        }
        _ => None,
    }
}

/// Generic mapping types whose arguments are the key and value types
/// (`m: dict[K, V]`: `m.values()` gives `V`s).
const MAPPINGS: &[&str] = &[
    "dict",
    "Dict",
    "Mapping",
    "MutableMapping",
    "OrderedDict",
    "DefaultDict",
    "defaultdict",
];

/// The key and value types of a mapping annotation (`dict[K, V]`,
/// `t.Mapping[K, V]`, `Optional[Dict[K, V]]`, `dict[K, V] | None`).
fn mapping_types(cx: &Cx, n: Node) -> Option<(Option<String>, Option<String>)> {
    let (head, args, skip) = generic_parts(cx, n)?;
    if head == "Optional" {
        return mapping_types(cx, args.named_child(skip)?);
    }
    if !MAPPINGS.contains(&head) {
        return None;
    }
    let key = args.named_child(skip).and_then(|k| type_expr(cx, k));
    let value = args.named_child(skip + 1).and_then(|v| type_expr(cx, v));
    Some((key, value))
}

/// A generic annotation's head (its last dotted segment: `Dict` of
/// `typing.Dict`), the node holding its arguments and the index of the
/// first of them, through `type` wrappers and `X | None`: `dict[K, V]` in
/// a type is one `type_parameter` holding both, `typing.Dict[K, V]` (a
/// subscript) has them side by side after the head. `None` for any other
/// annotation.
fn generic_parts<'t, 'c>(cx: &'c Cx, n: Node<'t>) -> Option<(&'c str, Node<'t>, usize)> {
    match n.kind_name() {
        "type" => generic_parts(cx, n.named_child(0)?),
        "binary_operator" => {
            let (left, right) = (n.field("left")?, n.field("right")?);
            generic_parts(cx, if cx.t(left) == "None" { right } else { left })
        }
        "generic_type" | "subscript" => {
            let head = cx.t(n.named_child(0)?);
            let head = head.rsplit('.').next().unwrap_or_default();
            let first = n.named_child(1)?;
            Some(if first.kind_name() == "type_parameter" {
                (head, first, 0)
            } else {
                (head, n, 1)
            })
        }
        _ => None,
    }
}

/// Binds `name#elem` (see [`ELEM`]) to the item type of annotation `t`, if
/// it is an iterable of one, or `name#k` / `name#v` ([`KEY`], [`VALUE`]) to
/// its key and value types, if it is a mapping; and `name#elem#k` /
/// `name#elem#v` to the two parts of an item that is a pair
/// ([`pair_items`]), what `for a, b in name:` binds.
fn bind_items(cx: &mut Cx, at: usize, name: &str, t: Node, field: bool) {
    if let Some(item) = item_type(cx, t) {
        cx.bind(at, &format!("{name}{ELEM}"), Some(item), true, field);
    } else if let Some((key, value)) = mapping_types(cx, t) {
        cx.bind(at, &format!("{name}{KEY}"), key, true, field);
        cx.bind(at, &format!("{name}{VALUE}"), value, true, field);
    }
    if let Some((first, second)) = pair_items(cx, t) {
        cx.bind(at, &format!("{name}{ELEM}{KEY}"), first, true, field);
        cx.bind(at, &format!("{name}{ELEM}{VALUE}"), second, true, field);
    }
}

/// The two types of an iterable whose items are pairs: `ItemsView[K, V]`
/// (a mapping's `items()`), or an iterable of `Tuple[A, B]` / `tuple[A,
/// B]` ([`ITERABLES`]); `Optional[…]` and `… | None` looked through.
fn pair_items(cx: &Cx, n: Node) -> Option<(Option<String>, Option<String>)> {
    let (head, args, skip) = generic_parts(cx, n)?;
    let arg = args.named_child(skip)?;
    if head == "Optional" {
        return pair_items(cx, arg);
    }
    if head == "ItemsView" {
        let value = args.named_child(skip + 1)?;
        return Some((type_expr(cx, arg), type_expr(cx, value)));
    }
    if !ITERABLES.contains(&head) {
        return None;
    }
    let pair = tuple_types(cx, arg)?;
    let inner = pair.strip_prefix(TUPLE)?.strip_suffix(')')?;
    let (a, b) = inner.split_once(';').filter(|(_, b)| !b.contains(';'))?;
    let known = |t: &str| (!t.is_empty()).then(|| t.to_string());
    Some((known(a), known(b)))
}

/// `for v in m.values()`, `for k in m.keys()`, `for k, v in m.items()`
/// (no arguments) over a name or attribute path `m`: `k` / `v` are `m`'s
/// keys / values ([`KEY`], [`VALUE`]; `self._mounts#v` for a field
/// annotated `dict[URLPattern, BaseTransport | None]`). Whether `right` is
/// such a call (then nothing else binds the loop's names).
fn mapping_loop(cx: &mut Cx, left: Node, right: Node) -> bool {
    if right.kind_name() != "call" {
        return false;
    }
    let Some(f) = right
        .field("function")
        .filter(|f| f.kind_name() == "attribute")
    else {
        return false;
    };
    if right
        .field("arguments")
        .is_none_or(|a| a.named_child_count() > 0)
    {
        return false;
    }
    let (Some(object), Some(method)) = (f.field("object"), f.field("attribute")) else {
        return false;
    };
    let Some(m) = expr(cx, object).filter(|m| !m.contains("()")) else {
        return false;
    };
    let pair = || {
        let mut c = left.walk();
        let names: Vec<Node> = left.named_children(&mut c).collect();
        match names.as_slice() {
            [k, v] if k.kind_name() == "identifier" && v.kind_name() == "identifier" => {
                Some((*k, *v))
            }
            _ => None,
        }
    };
    let bound: Vec<(Node, &str)> = match (cx.t(method), left.kind_name()) {
        ("values", "identifier") => vec![(left, VALUE)],
        ("keys", "identifier") => vec![(left, KEY)],
        ("items", "pattern_list" | "tuple_pattern") => match pair() {
            Some((k, v)) => vec![(k, KEY), (v, VALUE)],
            None => return false,
        },
        _ => return false,
    };
    for (name, item) in bound {
        let n = cx.t(name).to_string();
        cx.bind(
            name.start_byte(),
            &n,
            Some(format!("{m}{item}")),
            false,
            false,
        );
    }
    true
}

/// `for x in xs:` (and `… for x in xs` in a comprehension): `x` is an item
/// of `xs`, when `xs` is a name or attribute path, or one that ends in a
/// call (`self._iter_fields()#elem`: the item its return annotation
/// states), past builtins that keep the items (`sorted(xs)`,
/// [`items_path`]). Over a
/// literal list, tuple or set (`for func in [group_a, group_b]:`), `x` is
/// every one of its items that `expr` reads ([`EACH`]): `func(stmt)`
/// calls each.
fn for_loop(cx: &mut Cx, n: Node) {
    let (Some(left), Some(right)) = (n.field("left"), n.field("right")) else {
        return;
    };
    if matches!(
        right.kind_name(),
        "list" | "tuple" | "set" | "expression_list"
    ) {
        if left.kind_name() != "identifier" {
            return;
        }
        let mut c = right.walk();
        let items: Vec<String> = right
            .named_children(&mut c)
            .filter_map(|item| expr(cx, item))
            .collect();
        if !items.is_empty() {
            let each = format!("{EACH}{}", items.join(&UNION.to_string()));
            let name = cx.t(left).to_string();
            cx.bind(left.start_byte(), &name, Some(each), false, false);
        }
        return;
    }
    if mapping_loop(cx, left, right) {
        return;
    }
    // A mapping's views (`values`, `keys`, `items`) are read by
    // `mapping_loop` alone: with arguments, or on a value whose mapping
    // annotation is not known, they are no iterable the loop can name.
    let view = right
        .field("function")
        .and_then(|f| f.field("attribute"))
        .is_some_and(|a| matches!(cx.t(a), "values" | "keys" | "items"));
    if left.kind_name() == "identifier"
        && !view
        && let Some(items) = items_path(cx, right)
    {
        // `for f in self._iter_fields(…)`, `for c in sorted(children)`.
        let name = cx.t(left).to_string();
        cx.bind(left.start_byte(), &name, Some(items), false, false);
    } else if matches!(left.kind_name(), "pattern_list" | "tuple_pattern")
        && !view
        && let Some(items) = items_path(cx, right)
    {
        // `for role, conn in pair.items_view:`: the parts of an item that
        // is a pair (`#elem#k`, `#elem#v`, see [`bind_items`]).
        let mut c = left.walk();
        let names: Vec<Node> = left.named_children(&mut c).collect();
        if let [a, b] = names[..]
            && a.kind_name() == "identifier"
            && b.kind_name() == "identifier"
        {
            for (x, part) in [(a, KEY), (b, VALUE)] {
                let name = cx.t(x).to_string();
                cx.bind(
                    x.start_byte(),
                    &name,
                    Some(format!("{items}{part}")),
                    false,
                    false,
                );
            }
        }
    }
}

/// What an unannotated function returns: the value of the first `return`
/// or `yield` of its body (in source order) that has one, found while the
/// walk passes it (a second walk over every body to look for it was a
/// quarter of Python's fact extraction). A `return` or `yield` counts for
/// the nearest enclosing function unless a class, lambda, `return` or
/// `yield` lies in between; one without a value, or with one `expr` cannot
/// read, does not end the search.
#[derive(Default)]
struct FirstReturns {
    /// Function node id → index of its placeholder in `facts.defs`.
    pending: foldhash::HashMap<usize, usize>,
    /// (function node id, local name) → the receiver's own class value its
    /// last assignment so far gave it ([`own_class_value`]: `query =
    /// type(self)()` … `return query`), for the pending functions only.
    own_class_locals: foldhash::HashMap<(usize, String), String>,
}

impl FirstReturns {
    /// At an unannotated function with a body: a placeholder `Returns` fact
    /// where the fact goes (its place among the facts is the function's).
    fn open(&mut self, cx: &mut Cx, function: Node, name: Node) {
        self.pending.insert(function.id(), cx.facts.defs.len());
        cx.facts.defs.push(DefFact {
            byte: name.start_byte() as u32,
            name: cx.t(name).to_string(),
            expr: String::new(),
            what: DefFactKind::Returns,
        });
    }

    /// At a `return` or `yield`.
    fn found(&mut self, cx: &mut Cx, node: Node, up: &Up) {
        // The nearest ancestor that ends the search: only a function's own
        // body counts.
        let Some(owner) = up.iter().find(|p| {
            matches!(
                p.kind_name(),
                "function_definition"
                    | "class_definition"
                    | "lambda"
                    | "return_statement"
                    | "yield"
            )
        }) else {
            return;
        };
        let Some(&slot) = self.pending.get(&owner.id()) else {
            return; // not an unannotated function, or its value is known
        };
        if owner
            .field("body")
            .is_none_or(|body| node.start_byte() < body.start_byte())
        {
            return;
        }
        let value = node.named_child(0);
        let own_local = |v: Node| {
            let key = (owner.id(), cx.t(v).to_string());
            (v.kind_name() == "identifier")
                .then(|| self.own_class_locals.get(&key).cloned())
                .flatten()
        };
        let read = |v: Node| {
            own_class_value(cx, v)
                .or_else(|| own_local(v))
                .or_else(|| expr(cx, v))
        };
        if let Some(t) = value.and_then(|v| tuple_literal(cx, v)) {
            cx.facts.defs[slot].expr = t;
            self.pending.remove(&owner.id());
        } else if let Some(v) = value.and_then(read) {
            cx.facts.defs[slot].expr = format!("={v}");
            self.pending.remove(&owner.id());
        }
    }

    /// At an assignment `name = value` in a pending function's body: what
    /// [`own_class_value`] reads `name` as from here on, if anything.
    fn assigned(&mut self, cx: &Cx, n: Node, up: &Up) {
        let Some(owner) = up.iter().find(|p| {
            matches!(
                p.kind_name(),
                "function_definition" | "class_definition" | "lambda"
            )
        }) else {
            return;
        };
        let Some(left) = n
            .field("left")
            .filter(|l| l.kind_name() == "identifier" && self.pending.contains_key(&owner.id()))
        else {
            return;
        };
        let key = (owner.id(), cx.t(left).to_string());
        match n.field("right").and_then(|r| own_class_value(cx, r)) {
            Some(v) => self.own_class_locals.insert(key, v),
            None => self.own_class_locals.remove(&key),
        };
    }

    /// After the walk: placeholders of functions that return no value go.
    fn close(self, cx: &mut Cx) {
        if !self.pending.is_empty() {
            cx.facts.defs.retain(|d| !d.expr.is_empty());
        }
    }
}

/// The [`TUPLE`] a returned tuple literal makes (`return Connection(r),
/// b""`, `return (a, b)`): each element's value as [`expr`] reads it,
/// empty where it reads none; `None` when it reads no element (or `v` is
/// no tuple). The resolver reads each element where the function ends.
fn tuple_literal(cx: &Cx, v: Node) -> Option<String> {
    if !matches!(v.kind_name(), "expression_list" | "tuple") {
        return None;
    }
    let mut c = v.walk();
    let elems: Vec<String> = v
        .named_children(&mut c)
        .filter(|e| e.kind_name() != "comment")
        .map(|e| expr(cx, e).unwrap_or_default())
        .collect();
    (elems.len() >= 2 && elems.iter().any(|e| !e.is_empty()))
        .then(|| format!("{TUPLE}{})", elems.join(";")))
}

/// Generic return types of a generator or a context-manager factory whose
/// first argument is what `with f(…) as x` binds to `x`
/// (`@contextmanager def f() -> Iterator[T]`: `x` is a `T`).
const ENTERED: &[&str] = &[
    "Iterator",
    "Generator",
    "AsyncIterator",
    "AsyncGenerator",
    "ContextManager",
    "AbstractContextManager",
    "AsyncContextManager",
    "AbstractAsyncContextManager",
];

/// The type `with f(…) as x` gives `x` for a function annotated `-> r`
/// ([`ENTERED`]; `Optional[…]` and `… | None` looked through).
fn entered_type(cx: &Cx, r: Node) -> Option<String> {
    generic_argument(cx, r, ENTERED)
}

/// Whether a method annotated `-> t` returns its receiver: `t` is `Self`
/// (`typing.Self`, `typing_extensions.Self`) or the annotation of its first
/// parameter (`def __enter__(self: T) -> T`, with `T` a `TypeVar`).
fn returns_receiver(cx: &Cx, f: Node, up: &Up, t: Option<&str>) -> bool {
    let Some(t) = t else {
        return false;
    };
    // A method: directly in a class body, decorated or not.
    let class_at = match up.parent().map(|p| p.kind_name()) {
        Some("decorated_definition") => 2,
        _ => 1,
    };
    if up
        .nth(class_at)
        .is_none_or(|c| c.kind_name() != "class_definition")
    {
        return false;
    }
    if t.rsplit('.').next() == Some("Self") {
        return true;
    }
    let Some(params) = f.field("parameters") else {
        return false;
    };
    let mut c = params.walk();
    let first = params.named_children(&mut c).next();
    first
        .filter(|p| p.kind_name() == "typed_parameter")
        .and_then(|p| p.field("type"))
        .and_then(|a| type_expr(cx, a))
        .is_some_and(|a| a == t)
}

/// `with X(…) as x:` / `async with X(…) as x:`: `x` is what `X(…)`'s
/// `__enter__` (`__aenter__`) returns, else, for a generator or factory
/// annotated `-> Iterator[T]` / `ContextManager[T]` (`@contextmanager`),
/// its `T` (`X()#elem`, see [`entered_type`]). A class whose `__enter__`
/// is not in the repository (an external base's) gives the instance
/// itself (the Python rules' `unknown_method`); `open(…)` and other
/// unknown values give nothing. Each item of `with A() as a, B() as b` on
/// its own; a tuple or attribute target is not bound. `n`: the
/// `as_pattern_target`, visited after the value, so the bindings stay in
/// source order.
fn with_target(cx: &mut Cx, n: Node, up: &Up) {
    let (Some(pattern), Some(item)) = (up.parent(), up.nth(1)) else {
        return;
    };
    if pattern.kind_name() != "as_pattern" || item.kind_name() != "with_item" {
        return;
    }
    let Some(target) = n.named_child(0).filter(|t| t.kind_name() == "identifier") else {
        return;
    };
    let Some(value) = pattern.named_child(0).and_then(|v| expr(cx, v)) else {
        return;
    };
    let is_async = up
        .nth(3)
        .filter(|s| s.kind_name() == "with_statement")
        .and_then(|s| s.child(0))
        .is_some_and(|k| k.kind() == "async");
    let enter = if is_async { "__aenter__" } else { "__enter__" };
    let mut e = format!("{value}.{enter}()");
    if value.ends_with("()") {
        e.push(FIRST_KNOWN);
        e.push_str(&format!("{value}{ELEM}"));
    }
    let name = cx.t(target).to_string();
    cx.bind(target.start_byte(), &name, Some(e), false, false);
}

fn is_declaration_name(n: Node, parent: Node) -> bool {
    match parent.kind_name() {
        "function_definition" | "class_definition" => parent.field("name") == Some(n),
        "parameters" | "lambda_parameters" | "list_splat_pattern" | "dictionary_splat_pattern" => {
            true
        }
        "typed_parameter" | "default_parameter" | "typed_default_parameter" => {
            parent.field("name") == Some(n) || parent.named_child(0) == Some(n)
        }
        "keyword_argument" => parent.field("name") == Some(n),
        "attribute" => parent.field("attribute") == Some(n),
        "call" => parent.field("function") == Some(n),
        "dotted_name" | "aliased_import" | "global_statement" | "nonlocal_statement" => true,
        "assignment" | "augmented_assignment" => parent.field("left") == Some(n),
        "pattern_list" | "tuple_pattern" | "for_statement" | "for_in_clause"
        | "as_pattern_target" => true,
        _ => false,
    }
}

/// `Type` for a name inside an annotation (`p: Parser`, `-> Optional[Parser]`,
/// `x: models.Parser = …`; tree-sitter wraps each in a `type` node a few
/// levels up), `Other` for any other non-call use.
fn use_kind(up: &Up) -> SiteKind {
    let in_annotation = up.iter().take(5).any(|p| p.kind_name() == "type");
    if in_annotation {
        SiteKind::Type
    } else {
        SiteKind::Other
    }
}

/// Walks one Python tree.
pub(crate) fn walk(cx: &mut Cx, root: Node) {
    walk_with(cx, root, true);
}

/// [`walk`]; `prune`: skip the subtrees no handler reads (see
/// [`unread_below`]; `false` only to test that skipping them changes
/// nothing).
fn walk_with(cx: &mut Cx, root: Node, prune: bool) {
    let mut returns = FirstReturns::default();
    let mut decorated = DecoratedValues::default();
    let mut passed = PassedFunctions::default();
    walk_tree_pruned(root, &mut |n, up| {
        match n.kind_name() {
            "return_statement" | "yield" => returns.found(cx, n, up),
            "call" => {
                passed.at_call(n);
                call(cx, n, &decorated)
            }
            "attribute" => attribute(cx, n, up, &decorated),
            "identifier" => identifier(cx, n, up),
            "import_statement" => {
                import_statement(cx, n);
                return !(prune && unread_below(cx, n, false));
            }
            "import_from_statement" => {
                import_from_statement(cx, n);
                return !(prune && unread_below(cx, n, false));
            }
            "future_import_statement" => return !(prune && unread_below(cx, n, false)),
            "string" => return !(prune && unread_below(cx, n, true)),
            "assignment" => {
                returns.assigned(cx, n, up);
                assignment(cx, n)
            }
            "typed_parameter" | "typed_default_parameter" => typed_parameter(cx, n),
            "type_alias_statement" => type_alias_statement(cx, n),
            "for_statement" | "for_in_clause" => for_loop(cx, n),
            "as_pattern_target" => with_target(cx, n, up),
            "function_definition" => {
                function_definition(cx, n, up, &mut returns);
                decorated.at_function(cx, n, up);
                passed.at_function(n, up);
            }
            "class_definition" => class_definition(cx, n),
            _ => {}
        }
        true
    });
    returns.close(cx);
    passed.close(cx);
}

/// Whether no handler of [`walk`] acts on any node below `n`, an import
/// statement or (`string`) a string: then the walk does not enter it.
/// * An import's names are `dotted_name`s and aliases (`aliased_import`):
///   their identifiers are declarations ([`is_declaration_name`]), and the
///   statement's own handler reads them through its fields.
/// * A string that is no f-string (or t-string: its prefix has no `f` or
///   `t`) has no `{…}` interpolation, only quotes, content and escapes.
///
/// Not a subtree with a syntax error in it: error recovery can put any node
/// anywhere (an identifier under an `ERROR` is a use).
fn unread_below(cx: &Cx, n: Node, string: bool) -> bool {
    if n.has_error() {
        return false;
    }
    if !string {
        return true;
    }
    let head = cx.text.as_bytes().get(n.start_byte()..).unwrap_or_default();
    // The prefix is at most two letters (`rb`, `fr`, …) before the quote.
    match head.iter().take(3).position(|&b| b == b'"' || b == b'\'') {
        Some(quote) => !head[..quote]
            .iter()
            .any(|b| matches!(b, b'f' | b'F' | b't' | b'T')),
        None => false,
    }
}

/// A parameter called in its function's body (`def _group(tlist, match):
/// … match(token)`) is every function the file's calls of that function
/// pass there (`_group(tlist, match)` in `group_as`, whose `match` is a
/// nested `def`): each is called ([`EACH`]), as jedi reads a parameter
/// without annotation. Only calls in the same file, by a plain name, of a
/// function outside a class body; an argument is a name or an attribute
/// path, read where it is written ([`AT`]). The binding sits where the
/// parameters end, so it stands over the parameter's own (a pytest
/// fixture's) inside the body.
#[derive(Default)]
struct PassedFunctions<'t> {
    /// Functions outside a class body, in source order.
    functions: Vec<Node<'t>>,
    /// Calls whose callee is a plain name, in source order.
    calls: Vec<Node<'t>>,
}

impl<'t> PassedFunctions<'t> {
    fn at_call(&mut self, n: Node<'t>) {
        if n.field("function")
            .is_some_and(|f| f.kind_name() == "identifier")
        {
            self.calls.push(n);
        }
    }

    fn at_function(&mut self, n: Node<'t>, up: &Up<'_, 't>) {
        let in_class = up
            .iter()
            .take(3)
            .any(|p| p.kind_name() == "class_definition");
        if !in_class {
            self.functions.push(n);
        }
    }

    /// The name a call calls (a plain name: see [`Self::at_call`]).
    fn callee<'c>(cx: &'c Cx, call: Node) -> &'c str {
        call.field("function").map_or("", |f| cx.t(f))
    }

    /// After the walk: the bindings of called parameters.
    fn close(self, cx: &mut Cx) {
        let mut found = Vec::new();
        for &f in &self.functions {
            let (Some(name), Some(params), Some(body)) =
                (f.field("name"), f.field("parameters"), f.field("body"))
            else {
                continue;
            };
            let (start, end) = (body.start_byte(), body.end_byte());
            let lo = self.calls.partition_point(|c| c.start_byte() < start);
            let hi = self.calls.partition_point(|c| c.start_byte() < end);
            let inside = &self.calls[lo..hi];
            for (pos, param) in parameters(cx, params) {
                if !inside.iter().any(|&c| Self::callee(cx, c) == param) {
                    continue;
                }
                let fname = cx.t(name);
                let alts: Vec<String> = self
                    .calls
                    .iter()
                    .filter(|c| !(start..end).contains(&c.start_byte()))
                    .filter(|&&c| Self::callee(cx, c) == fname)
                    .filter_map(|&c| {
                        let arg = argument(cx, c, param, pos)?;
                        let e = expr(cx, arg)
                            .filter(|_| matches!(arg.kind_name(), "identifier" | "attribute"))?;
                        Some(format!("{AT}{}:{e}", c.start_byte()))
                    })
                    .collect();
                if alts.is_empty() {
                    continue;
                }
                found.push(Binding {
                    // Where the parameters end, not where the body starts:
                    // an alias in the body's first statement (`orig = check`)
                    // reads its value one byte before that statement, and
                    // must see this binding, not the parameter's own.
                    byte: params.end_byte() as u32,
                    name: param.to_string(),
                    expr: format!("{EACH}{}", alts.join(&UNION.to_string())),
                    is_type: false,
                    field: false,
                });
            }
        }
        // Each in its place among the bindings, which are in source order.
        for b in found {
            let at = cx.facts.bindings.partition_point(|x| x.byte <= b.byte);
            cx.facts.bindings.insert(at, b);
        }
    }
}

/// A function's parameters without annotation: (position among the
/// positional ones, or `None` after `*`; name).
fn parameters<'c>(cx: &'c Cx, params: Node) -> Vec<(Option<usize>, &'c str)> {
    let mut out = Vec::new();
    let mut pos = Some(0);
    let mut c = params.walk();
    for p in params.named_children(&mut c) {
        let id = match p.kind_name() {
            "identifier" => Some(p),
            "default_parameter" => p.field("name"),
            // An annotated one is what its annotation says (jedi reads
            // the annotation, not the calls); it still takes a position.
            "typed_parameter" | "typed_default_parameter" => {
                pos = pos.map(|i| i + 1);
                None
            }
            "list_splat_pattern" | "keyword_separator" | "dictionary_splat_pattern" => {
                pos = None;
                None
            }
            _ => None,
        };
        if let Some(id) = id {
            out.push((pos, cx.t(id)));
            pos = pos.map(|i| i + 1);
        }
    }
    out
}

/// The argument a call passes for parameter `name` at position `pos`: by
/// keyword, else positional (unknown after a `*args`).
fn argument<'t>(cx: &Cx, call: Node<'t>, name: &str, pos: Option<usize>) -> Option<Node<'t>> {
    let args = call.field("arguments")?;
    let mut c = args.walk();
    let mut i = 0;
    let mut positional = None;
    for a in args.named_children(&mut c) {
        match a.kind_name() {
            "keyword_argument" => {
                if a.field("name").is_some_and(|k| cx.t(k) == name) {
                    return a.field("value");
                }
            }
            "list_splat" if positional.is_none() => return None,
            "list_splat" | "dictionary_splat" | "comment" => {}
            _ => {
                if Some(i) == pos {
                    positional = Some(a);
                }
                i += 1;
            }
        }
    }
    positional
}

/// `f()` and `a.f()`: a call site of the name called.
fn call(cx: &mut Cx, n: Node, decorated: &DecoratedValues) {
    let Some(f) = n.field("function") else {
        return;
    };
    match f.kind_name() {
        "identifier" => cx.site(f, None, SiteKind::Call),
        "attribute" => {
            if let Some(attr) = f.field("attribute") {
                let recv = f.field("object").and_then(|o| expr(cx, o));
                let recv = recv.map(|r| decorated.receiver(r, n.start_byte()));
                let recv = recv.or_else(|| Some("?".to_string()));
                cx.site(attr, recv, SiteKind::Call);
            }
        }
        _ => {}
    }
}

/// `a.b` not called and not assigned to: a use of `b` on `a`.
fn attribute<'t>(cx: &mut Cx, n: Node<'t>, up: &Up<'_, 't>, decorated: &DecoratedValues) {
    let called = up
        .parent()
        .is_some_and(|p| p.kind_name() == "call" && p.field("function") == Some(n));
    let assigned = up
        .parent()
        .is_some_and(|p| p.kind_name() == "assignment" && p.field("left") == Some(n));
    if !called
        && !assigned
        && let Some(attr) = n.field("attribute")
    {
        let recv = n.field("object").and_then(|o| expr(cx, o));
        if let Some(recv) = recv {
            let recv = decorated.receiver(recv, n.start_byte());
            cx.site(attr, Some(recv), use_kind(up));
        }
    }
}

/// A name that is no declaration: a use.
fn identifier<'t>(cx: &mut Cx, n: Node<'t>, up: &Up<'_, 't>) {
    if let Some(p) = up.parent()
        && !is_declaration_name(n, p)
        && !matches!(cx.t(n), "self" | "cls" | "None" | "True" | "False")
    {
        cx.site(n, None, use_kind(up));
    }
}

/// `import a.b` (binds `a`) and `import a.b as c`.
fn import_statement(cx: &mut Cx, n: Node) {
    let mut c = n.walk();
    for name in n.children_by_field_name("name", &mut c) {
        match name.kind_name() {
            "dotted_name" => {
                let full = cx.t(name).to_string();
                let top = full.split('.').next().unwrap_or_default().to_string();
                cx.import(n, &top, &top, None);
            }
            "aliased_import" => {
                let (Some(m), Some(a)) = (name.field("name"), name.field("alias")) else {
                    continue;
                };
                let (m, a) = (cx.t(m).to_string(), cx.t(a).to_string());
                cx.import(n, &a, &m, None);
            }
            _ => {}
        }
    }
}

/// `from m import a as b` and `from m import *`: bindings, and an import site per name.
fn import_from_statement(cx: &mut Cx, n: Node) {
    let Some(module) = n.field("module_name") else {
        return;
    };
    let module = cx.t(module).to_string();
    let mut c = n.walk();
    let names: Vec<Node> = n.children_by_field_name("name", &mut c).collect();
    for name in names {
        let (orig, alias) = match name.kind_name() {
            "dotted_name" => (name, name),
            "aliased_import" => match (name.field("name"), name.field("alias")) {
                (Some(o), Some(a)) => (o, a),
                _ => continue,
            },
            _ => continue,
        };
        let (o, a) = (cx.t(orig).to_string(), cx.t(alias).to_string());
        cx.import(n, &a, &module, Some(&o));
        cx.site(orig, Some(module.clone()), SiteKind::Import);
    }
    let mut c = n.walk();
    if n.children(&mut c)
        .any(|ch| ch.kind_name() == "wildcard_import")
    {
        cx.import(n, "*", &module, None);
    }
}

/// `x = v`, `x: T = v`, `self.x = v` (a field of the class).
fn assignment(cx: &mut Cx, n: Node) {
    let (Some(left), mut right) = (n.field("left"), n.field("right")) else {
        return;
    };
    // `ib = attr = attrib`: every name of a chain is bound to its last value
    // (the inner `attr = attrib` is an assignment of its own).
    while let Some(r) = right.filter(|r| r.kind_name() == "assignment") {
        right = r.field("right");
    }
    let annotation = n.field("type");
    if left.kind_name() == "identifier"
        && let Some(t) = alias_type(cx, annotation, right)
    {
        // `_Match = Union[Match[str], "M"]`: the name is the type it
        // names, wherever it annotates a value (here or imported).
        let name = cx.t(left).to_string();
        cx.bind(n.start_byte(), &name, Some(t), true, false);
        return;
    }
    let (name, field) = match left.kind_name() {
        "identifier" => (cx.t(left).to_string(), false),
        "pattern_list" | "tuple_pattern" => {
            if !unpacked_call(cx, n, left, right) {
                unpacked_names(cx, n, left);
            }
            return;
        }
        "attribute" => {
            let obj = left.field("object");
            if obj.is_some_and(|o| SELF_NAMES.contains(&cx.t(o))) {
                match left.field("attribute") {
                    Some(a) => (cx.t(a).to_string(), true),
                    None => return,
                }
            } else {
                return;
            }
        }
        _ => return,
    };
    // `self.parser = parser` with `parser: BlockParser` a parameter: the
    // field is read from other methods, where the parameter is not in scope,
    // so it takes the parameter's annotation.
    let annotation = annotation.or_else(|| {
        right
            .filter(|r| field && r.kind_name() == "identifier")
            .and_then(|r| parameter_annotation(cx, n, cx.t(r)))
    });
    if let Some(class) = annotation.and_then(|t| class_of_type_annotation(cx, t)) {
        // `TableBase: type[Table] = with_typehint(Table)`: the name holds the
        // class itself (a base class, or called to make one), whatever the
        // value the checker is told to trust.
        cx.bind(n.start_byte(), &name, Some(class), false, field);
    } else if let Some(t) = annotation {
        bind_items(cx, n.start_byte(), &name, t, field);
        let t = type_expr(cx, t);
        cx.bind(n.start_byte(), &name, t, true, field);
    } else if let Some(r) = right {
        let e = assigned_value(cx, r);
        let e = if field {
            e.map(|e| {
                e.split(UNION)
                    .map(|alt| through_typed_parameter(cx, n, alt.to_string()))
                    .collect::<Vec<_>>()
                    .join(&UNION.to_string())
            })
        } else {
            // A name assigned in a function is that function's local
            // whatever its value: bound to itself (a value not known), it
            // shadows the import or global of that name, in the function
            // and in the functions nested in it (`retry = a & b` then
            // `def r(s): return retry(s)`). Not a name the function
            // declares `global` or `nonlocal`: that assignment rebinds the
            // outer name, so a value not known leaves the outer one's
            // meaning (a known one is read as the value, as before).
            match e {
                Some(e) => Some(e),
                None if declared_outer(cx, n, &name) => return,
                None => Some(name.clone()),
            }
        };
        cx.bind(n.start_byte(), &name, e, false, field);
        iterable_items(cx, n, &name, r, field);
        literal_items(cx, n, &name, r, field);
    }
}

/// `handlers = [A(), B()]`, `self.conn = {CLIENT: Connection(CLIENT), …}`:
/// the items of a literal list or set (`name#elem`), the keys and values
/// of a literal dict (`name#k`, `name#v`), each one `expr` reads
/// ([`EACH`]), so `self.conn[role].send(e)` and `for h in handlers:
/// h.run()` reach them. A tuple's items are told apart by position, so
/// none is every item: not bound.
fn literal_items(cx: &mut Cx, at: Node, name: &str, value: Node, field: bool) {
    let each = |items: Vec<Node>| {
        let mut known: Vec<String> = items.into_iter().filter_map(|i| expr(cx, i)).collect();
        known.dedup();
        (!known.is_empty()).then(|| format!("{EACH}{}", known.join(&UNION.to_string())))
    };
    let mut c = value.walk();
    let children: Vec<Node> = value.named_children(&mut c).collect();
    let bound: Vec<(&str, Option<String>)> = match value.kind_name() {
        "list" | "set" => vec![(ELEM, each(children))],
        "dictionary" => {
            let pairs = children.iter().filter(|p| p.kind_name() == "pair");
            let keys = pairs.clone().filter_map(|p| p.field("key")).collect();
            let values = pairs.filter_map(|p| p.field("value")).collect();
            vec![(KEY, each(keys)), (VALUE, each(values))]
        }
        _ => return,
    };
    for (item, e) in bound {
        if e.is_some() {
            cx.bind(at.start_byte(), &format!("{name}{item}"), e, false, field);
        }
    }
}

/// The type a type alias names: the right side of `X: TypeAlias = …`,
/// or of a plain assignment whose right side can only be a type
/// ([`is_type_form`]). `None` for any other assignment.
fn alias_type(cx: &Cx, annotation: Option<Node>, right: Option<Node>) -> Option<String> {
    let r = right?;
    let alias = match annotation {
        Some(a) => {
            let a = cx.t(a);
            a == "TypeAlias" || a.ends_with(".TypeAlias")
        }
        None => is_type_form(cx, r),
    };
    alias.then(|| type_expr(cx, r)).flatten()
}

/// Whether value `r` is a type written as one: `Union[…]`,
/// `Optional[…]`, `type[…]` (qualified or not), or a `|` chain of names,
/// quoted names and generics with at least one `None`, quoted name or
/// generic in it (`A | None`; `Flag.A | Flag.B` of two values is no type).
fn is_type_form(cx: &Cx, r: Node) -> bool {
    match r.kind_name() {
        "subscript" | "generic_type" => r.named_child(0).is_some_and(|h| {
            let head = cx.t(h).rsplit('.').next().unwrap_or_default();
            matches!(head, "Union" | "Optional" | "type" | "Type")
        }),
        "binary_operator" if r.field("operator").is_some_and(|o| cx.t(o) == "|") => {
            let ops = union_operands(r);
            let typed = |o: &Node| {
                matches!(o.kind_name(), "string" | "subscript" | "generic_type")
                    || cx.t(*o) == "None"
            };
            ops.iter()
                .all(|o| typed(o) || matches!(o.kind_name(), "identifier" | "attribute"))
                && ops.iter().any(typed)
        }
        _ => false,
    }
}

/// `type X = …` (Python 3.12): `X` is the type on the right, as an alias
/// assignment's name is ([`alias_type`]); the statement is a unit of its
/// own, whose one base fact [`EACH`] of the alternatives says what a
/// value of it is (as a TypeScript union alias's).
fn type_alias_statement(cx: &mut Cx, n: Node) {
    let (Some(left), Some(right)) = (n.field("left"), n.field("right")) else {
        return;
    };
    let left = if left.kind_name() == "type" {
        left.named_child(0).unwrap_or(left)
    } else {
        left
    };
    if left.kind_name() == "identifier" {
        let (name, t) = (cx.t(left).to_string(), type_expr(cx, right));
        cx.def_fact(
            left,
            t.as_ref().map(|t| format!("{EACH}{t}")),
            DefFactKind::Base,
        );
        cx.bind(n.start_byte(), &name, t, true, false);
    }
}

/// `X` of an annotation `type[X]` / `Type[X]` / `typing.Type[X]` (one class
/// named by a plain or dotted name), the annotation of a name that holds the
/// class `X` itself rather than an instance of it.
fn class_of_type_annotation(cx: &Cx, t: Node) -> Option<String> {
    let t = if t.kind_name() == "type" {
        t.named_child(0)?
    } else {
        t
    };
    if !matches!(t.kind_name(), "generic_type" | "subscript") {
        return None;
    }
    let head = cx.t(t.named_child(0)?);
    if !matches!(head, "type" | "Type" | "typing.Type" | "t.Type") {
        return None;
    }
    // `type[X]` in a type is a `type_parameter` holding `X`; `typing.Type[X]`
    // (a subscript) has `X` after the head.
    let mut arg = t.named_child(1)?;
    if arg.kind_name() == "type_parameter" {
        if arg.named_child_count() != 1 {
            return None;
        }
        arg = arg.named_child(0)?;
    }
    if arg.kind_name() == "type" {
        arg = arg.named_child(0)?;
    }
    matches!(arg.kind_name(), "identifier" | "attribute")
        .then(|| expr(cx, arg))
        .flatten()
}

/// `a, (b, c) = …`: each name becomes a local of a value not known (bound
/// to itself), which shadows an import or global of that name as any
/// assignment does.
fn unpacked_names(cx: &mut Cx, n: Node, left: Node) {
    let mut stack = vec![left];
    while let Some(x) = stack.pop() {
        match x.kind_name() {
            "identifier" => {
                let name = cx.t(x).to_string();
                if !declared_outer(cx, n, &name) {
                    cx.bind(n.start_byte(), &name, Some(name.clone()), false, false);
                }
            }
            "pattern_list" | "tuple_pattern" | "list_pattern" | "list_splat_pattern" => {
                let mut c = x.walk();
                stack.extend(x.named_children(&mut c));
            }
            _ => {}
        }
    }
}

/// Whether the function around `n` declares `name` `global` or `nonlocal`
/// (anywhere in its own body, as Python reads the declaration for the whole
/// function; not in the functions or classes nested in it): an assignment
/// of it there rebinds the module's or the enclosing function's name, so it
/// makes no local that shadows it.
fn declared_outer(cx: &Cx, n: Node, name: &str) -> bool {
    let mut up = n.parent();
    let function = loop {
        match up {
            Some(x) if x.kind_name() == "function_definition" => break x,
            Some(x) if matches!(x.kind_name(), "class_definition" | "lambda") => return false,
            Some(x) => up = x.parent(),
            None => return false,
        }
    };
    let Some(body) = function.field("body") else {
        return false;
    };
    // Most functions declare nothing: skip the walk.
    let text = cx.t(body);
    if !text.contains("global") && !text.contains("nonlocal") {
        return false;
    }
    let mut stack = vec![body];
    while let Some(x) = stack.pop() {
        match x.kind_name() {
            "global_statement" | "nonlocal_statement" => {
                let mut c = x.walk();
                if x.named_children(&mut c).any(|id| cx.t(id) == name) {
                    return true;
                }
            }
            "function_definition" | "class_definition" | "lambda" => {}
            _ => {
                let mut c = x.walk();
                stack.extend(x.named_children(&mut c));
            }
        }
    }
    false
}

/// The value expression an assignment binds its target to: [`expr`]'s, a
/// literal's builtin type ([`literal_value`]), or for a conditional
/// expression (`URL(url) if params is None else URL(url, params=params)`)
/// each branch's value joined by [`UNION`] (one of them: the same value
/// when they agree, as a type checker joins them), a `None` branch left
/// out (an `Optional`); unknown when a branch is.
fn assigned_value(cx: &Cx, r: Node) -> Option<String> {
    if r.kind_name() != "conditional_expression" {
        return expr(cx, r).or_else(|| literal_value(r).map(str::to_string));
    }
    let mut alts: Vec<String> = Vec::new();
    let mut stack = vec![r];
    while let Some(x) = stack.pop() {
        if x.kind_name() == "conditional_expression" {
            // `body if condition else alternative`.
            let (Some(body), Some(alt)) = (x.named_child(0), x.named_child(2)) else {
                return None;
            };
            stack.push(alt);
            stack.push(body);
            continue;
        }
        if cx.t(x) == "None" {
            continue;
        }
        let e = expr(cx, x).or_else(|| literal_value(x).map(str::to_string))?;
        if !alts.contains(&e) {
            alts.push(e);
        }
    }
    (!alts.is_empty()).then(|| alts.join(&UNION.to_string()))
}

/// Builtins whose result holds the items of their first argument, an
/// iterable (`list(self._iter_fields(…))`, `sorted(xs)`).
const ITEM_KEEPING: &[&str] = &[
    "list",
    "tuple",
    "set",
    "frozenset",
    "sorted",
    "reversed",
    "iter",
];

/// `n` past calls of [`ITEM_KEEPING`] builtins with one positional
/// argument (`list(reversed(children))`: `children`).
fn items_source<'t>(cx: &Cx, n: Node<'t>) -> Node<'t> {
    let mut n = n;
    loop {
        let inner = (n.kind_name() == "call")
            .then(|| n.field("function"))
            .flatten()
            .filter(|f| f.kind_name() == "identifier" && ITEM_KEEPING.contains(&cx.t(*f)))
            .and_then(|_| n.field("arguments"))
            .and_then(|a| {
                let mut c = a.walk();
                let mut positional = a
                    .named_children(&mut c)
                    .filter(|x| !matches!(x.kind_name(), "keyword_argument" | "comment"));
                let first = positional.next()?;
                (positional.next().is_none() && first.kind_name() != "list_splat").then_some(first)
            });
        match inner {
            Some(i) => n = i,
            None => return n,
        }
    }
}

/// What iterating over `n` gives, as a path (`xs#elem`,
/// `self._iter_fields()#elem`: an item of what the call returns): a name
/// or attribute path, or one that ends in a call, past [`ITEM_KEEPING`]
/// builtins ([`items_source`]). `None` for anything else.
fn items_path(cx: &Cx, n: Node) -> Option<String> {
    let e = expr(cx, items_source(cx, n))?;
    let bare = e.strip_suffix("()").unwrap_or(&e);
    // `super().find(…)` (the base's method a method extends): its only
    // inner call is `super()`, which names the bases, no value.
    let bare = bare.strip_prefix("super().").unwrap_or(bare);
    (!bare.contains("()")).then(|| format!("{e}{ELEM}"))
}

/// `xs = list(self._iter_fields(…))`, `self.children =
/// list(reversed(children))`: the target's items (`name#elem`) are those of
/// the iterable the builtins copy ([`items_source`]). An annotated
/// parameter (`children: Sequence[ContentDecoder]`) gives its item type,
/// since a field is read in its class, where the parameter is not in
/// scope; anything else is the path [`items_path`] reads.
fn iterable_items(cx: &mut Cx, at: Node, name: &str, value: Node, field: bool) {
    let source = items_source(cx, value);
    if source == value {
        return;
    }
    let key = format!("{name}{ELEM}");
    if source.kind_name() == "identifier"
        && let Some(t) = parameter_annotation(cx, at, cx.t(source))
    {
        let item = item_type(cx, t);
        cx.bind(at.start_byte(), &key, item, true, field);
        return;
    }
    let path = items_path(cx, source);
    cx.bind(at.start_byte(), &key, path, false, field);
}

/// A field's expression whose head is an annotated parameter of the
/// function around `n` (`self.stream = environment.tokenize(…)` with
/// `environment: Environment`) is read in the class's scope, where the
/// parameter is not visible: its head becomes an instance of the
/// annotation (`Environment().tokenize()`), so the field takes the
/// method's declared result.
fn through_typed_parameter(cx: &Cx, n: Node, e: String) -> String {
    let head_end = e.find(['.', '(']).unwrap_or(e.len());
    if head_end == e.len() {
        return e;
    }
    let ty = parameter_annotation(cx, n, &e[..head_end]).and_then(|t| type_expr(cx, t));
    // `A | B` (a union annotation): through its first alternative, as
    // before unions were read (a value's path is known only when every
    // alternative is, and one is most often a builtin: `Env | str`).
    match ty.as_deref().and_then(|t| t.split(UNION).next()) {
        Some(ty) => format!("{ty}(){}", &e[head_end..]),
        None => e,
    }
}

/// The annotation of parameter `param` of the function around `n`
/// (`def __init__(self, parser: BlockParser)`), if it has one.
fn parameter_annotation<'t>(cx: &Cx, n: Node<'t>, param: &str) -> Option<Node<'t>> {
    let mut up = n.parent();
    while let Some(p) = up {
        match p.kind_name() {
            "function_definition" => break,
            "class_definition" | "lambda" => return None,
            _ => up = p.parent(),
        }
    }
    let params = up?.field("parameters")?;
    let mut c = params.walk();
    let typed = params.named_children(&mut c).find(|p| {
        matches!(p.kind_name(), "typed_parameter" | "typed_default_parameter")
            && p.field("name")
                .or_else(|| p.named_child(0))
                .is_some_and(|x| x.kind_name() == "identifier" && cx.t(x) == param)
    });
    typed.and_then(|p| p.field("type"))
}

/// A literal's value as a call of its builtin type (`"a"` → `str()`,
/// `[]` → `list()`), so a receiver bound to one is known to be builtin.
fn literal_value(n: Node) -> Option<&'static str> {
    Some(match n.kind_name() {
        "string" | "concatenated_string" => "str()",
        "list" | "list_comprehension" => "list()",
        "dictionary" | "dictionary_comprehension" => "dict()",
        "set" | "set_comprehension" => "set()",
        "tuple" => "tuple()",
        "integer" => "int()",
        "float" => "float()",
        _ => return None,
    })
}

/// The [`TUPLE`] a return annotation `Tuple[A, B]` / `tuple[A, B]` (also
/// `typing.Tuple`, and inside `Optional[…]` / `… | None`) states: each
/// element's type, empty where [`type_expr`] reads none. `None` for any
/// other annotation, and for `Tuple[A, ...]`, whose elements are alike and
/// not told apart by position.
fn tuple_types(cx: &Cx, n: Node) -> Option<String> {
    let (head, args, skip) = generic_parts(cx, n)?;
    if head == "Optional" {
        return tuple_types(cx, args.named_child(skip)?);
    }
    if !matches!(head, "Tuple" | "tuple") {
        return None;
    }
    let mut c = args.walk();
    let elems: Vec<Node> = args.named_children(&mut c).skip(skip).collect();
    if elems.len() < 2 || elems.iter().any(|e| cx.t(*e) == "...") {
        return None;
    }
    let types: Vec<String> = elems
        .iter()
        .map(|e| type_expr(cx, *e).unwrap_or_default())
        .collect();
    Some(format!("{TUPLE}{})", types.join(";")))
}

/// `a, b = f(…)` (names only, as many as the call's tuple has): the `i`th
/// name is element `i` of the tuple `f` returns (`f.#1`, see [`TUPLE`]),
/// known when `f` is annotated `-> Tuple[A, B]` or returns a tuple
/// literal. Whether it bound them; `false` for any other target or value.
fn unpacked_call(cx: &mut Cx, n: Node, left: Node, right: Option<Node>) -> bool {
    let Some(callee) = right
        .filter(|r| r.kind_name() == "call")
        .and_then(|r| r.field("function"))
        .and_then(|f| expr(cx, f))
        .filter(|f| !f.contains("()"))
    else {
        return false;
    };
    let mut c = left.walk();
    let names: Vec<Node> = left.named_children(&mut c).collect();
    if names.len() < 2 || names.iter().any(|x| x.kind_name() != "identifier") {
        return false;
    }
    for (i, x) in names.into_iter().enumerate() {
        let name = cx.t(x).to_string();
        if declared_outer(cx, n, &name) {
            continue;
        }
        cx.bind(
            n.start_byte(),
            &name,
            Some(format!("{callee}.#{i}")),
            false,
            false,
        );
    }
    true
}

/// `p: T` and `p: T = d`: `p` is a `T`.
fn typed_parameter(cx: &mut Cx, n: Node) {
    let name = n
        .field("name")
        .or_else(|| n.named_child(0))
        .filter(|x| x.kind_name() == "identifier");
    if let (Some(name), Some(t)) = (name, n.field("type")) {
        let name = cx.t(name).to_string();
        bind_items(cx, n.start_byte(), &name, t, false);
        let t = type_expr(cx, t);
        cx.bind(n.start_byte(), &name, t, true, false);
    }
}

/// A function's return type (or, unannotated, its first returned value) and
/// its unannotated parameters (which shadow outer names and may be pytest fixtures).
fn function_definition<'t>(cx: &mut Cx, n: Node<'t>, up: &Up<'_, 't>, returns: &mut FirstReturns) {
    let Some(name) = n.field("name") else {
        return;
    };
    if let Some(class) = property_owner(cx, up) {
        // A property reads as a field whose value is the getter's result
        // (`obj.prop.method()`); the getter's return type or first
        // returned value says what that is.
        let field = cx.t(name).to_string();
        let getter = format!("{}.{field}()", SELF_NAMES[0]);
        cx.bind(class, &field, Some(getter), false, true);
        if let Some(r) = n.field("return_type") {
            // `-> ValuesView[Connection]`: the field's items, as an
            // annotated field's (`for conn in pair.conns:`).
            bind_items(cx, class, &field, r, true);
        }
    }
    if let Some(r) = n.field("return_type") {
        let t = tuple_types(cx, r).or_else(|| type_expr(cx, r));
        // `def __enter__(self: T) -> T` / `-> Self`: the instance itself
        // (as a value read in the method, `self` is its class's instance).
        let t = if returns_receiver(cx, n, up, t.as_deref()) {
            Some(format!("={}", SELF_NAMES[0]))
        } else {
            t
        };
        cx.def_fact(name, t, DefFactKind::Returns);
        // `@contextmanager def stream(…) -> Iterator[Response]`: what
        // `with stream(…) as r` binds (`stream()#elem`, see [`with_target`]).
        // `-> list[Field]`: what `for f in x.fields()` binds to `f` too.
        if let Some(entered) = entered_type(cx, r).or_else(|| item_type(cx, r)) {
            cx.bind(
                name.start_byte(),
                &format!("{RETURNED}{ELEM}"),
                Some(entered),
                true,
                false,
            );
        }
        if let Some((first, second)) = pair_items(cx, r) {
            // `-> ItemsView[K, V]`: what `for k, v in x.f()` binds.
            let at = name.start_byte();
            cx.bind(at, &format!("{RETURNED}{ELEM}{KEY}"), first, true, false);
            cx.bind(at, &format!("{RETURNED}{ELEM}{VALUE}"), second, true, false);
        }
    } else if n.field("body").is_some() {
        // Unannotated: what the body returns, as a value (`=` marks
        // a value expression), once the walk reaches it.
        returns.open(cx, n, name);
    }
    // Unannotated parameters shadow outer names (and may be pytest fixtures).
    if let Some(params) = n.field("parameters") {
        let mut c = params.walk();
        for p in params.named_children(&mut c) {
            let id = match p.kind_name() {
                "identifier" => Some(p),
                "default_parameter" => p.field("name"),
                _ => None,
            };
            if let Some(id) = id {
                let pname = cx.t(id).to_string();
                if pname != "self" && pname != "cls" {
                    let marker = Some(format!("{PARAM_VALUE}{pname}"));
                    cx.bind(p.start_byte(), &pname, marker, false, false);
                }
            }
        }
    }
}

/// The byte of the decorated definition of a method decorated as a
/// property getter (`@property`, `@functools.cached_property`, …; not a
/// `@x.setter`), where its field binding goes. `up`: the function's
/// ancestors (the walk's, not `Node::parent`, which descends from the root).
fn property_owner(cx: &Cx, up: &Up) -> Option<usize> {
    let decorated = up
        .parent()
        .filter(|p| p.kind_name() == "decorated_definition")?;
    let in_class = up
        .nth(2)
        .is_some_and(|c| c.kind_name() == "class_definition");
    if !in_class {
        return None;
    }
    let mut c = decorated.walk();
    let is_property = decorated
        .named_children(&mut c)
        .filter(|d| d.kind_name() == "decorator")
        .filter_map(|d| d.named_child(0))
        .any(|d| {
            matches!(d.kind_name(), "identifier" | "attribute")
                && cx.t(d).rsplit('.').next().is_some_and(|last| {
                    matches!(last, "property" | "cached_property" | "abstractproperty")
                })
        });
    is_property.then(|| decorated.start_byte())
}

/// A class's base classes.
fn class_definition(cx: &mut Cx, n: Node) {
    let (Some(name), Some(bases)) = (n.field("name"), n.field("superclasses")) else {
        return;
    };
    let mut c = bases.walk();
    for b in bases.named_children(&mut c) {
        // `Base[T]` (a generic base): the class `Base`.
        let b = match b.kind_name() {
            "subscript" => b.field("value").unwrap_or(b),
            _ => b,
        };
        let e = expr(cx, b);
        cx.def_fact(name, e, DefFactKind::Base);
    }
}

#[cfg(test)]
mod tests {
    use super::super::model::DefFactKind;

    /// (function, what it returns) for every unannotated function with a value.
    fn returns(source: &str) -> Vec<(String, String)> {
        let (_, facts) = crate::facts::parse_with_facts("m.py", source.as_bytes());
        let facts = facts.expect("python has fact rules");
        facts
            .defs
            .into_iter()
            .filter(|d| d.what == DefFactKind::Returns)
            .map(|d| (d.name, d.expr))
            .collect()
    }

    #[test]
    fn an_unannotated_function_returns_its_first_returned_value() {
        let source = "\
def outer():
    def inner():
        return Inner()
    k = lambda: Lambda()
    class Local:
        def method(self):
            return Method()
    return Outer()

def bare_then_value():
    if x:
        return
    return Second()

def generator():
    yield Made()
    return Later()

def nothing():
    pass

def annotated() -> Declared:
    return Ignored()

def nested_yield():
    return (yield Inside())
";
        let got = returns(source);
        let names: Vec<&str> = got.iter().map(|(n, _)| n.as_str()).collect();
        // In the order of the functions; `nothing` returns no value and
        // `nested_yield`'s `return` holds a `yield`, which is not looked into.
        assert_eq!(
            names,
            [
                "outer",
                "inner",
                "method",
                "bare_then_value",
                "generator",
                "annotated"
            ],
            "{got:?}"
        );
        let of = |name: &str| &got.iter().find(|(n, _)| n == name).unwrap().1;
        assert!(of("outer").contains("Outer"), "{got:?}");
        assert!(of("inner").contains("Inner"), "{got:?}");
        assert!(of("method").contains("Method"), "{got:?}");
        assert!(of("bare_then_value").contains("Second"), "{got:?}");
        assert!(of("generator").contains("Made"), "{got:?}");
        assert!(of("outer").starts_with('='), "a value, not a type: {got:?}");
        assert!(of("annotated").contains("Declared") && !of("annotated").starts_with('='));
    }

    /// (name, expression) of every binding of `source`, in order.
    fn bindings(source: &str) -> Vec<(String, String)> {
        let (_, facts) = crate::facts::parse_with_facts("m.py", source.as_bytes());
        let facts = facts.expect("python has fact rules");
        facts
            .bindings
            .into_iter()
            .map(|b| (b.name, b.expr))
            .collect()
    }

    /// What `name` is bound to, binding by binding.
    fn bound_to<'a>(got: &'a [(String, String)], name: &str) -> Vec<&'a str> {
        got.iter()
            .filter(|(n, _)| n == name)
            .map(|(_, e)| e.as_str())
            .collect()
    }

    #[test]
    fn a_with_target_is_what_its_context_manager_enters() {
        let source = "\
async def f(lock):
    with A() as a, b.open() as (c, d), lock as held, g() as self.x:
        pass
    async with C(1) as c:
        pass
    try:
        pass
    except E as e:
        pass
";
        let got = bindings(source);
        let of = |name: &str| bound_to(&got, name);
        assert_eq!(of("a"), ["A().__enter__()¦A()#elem"], "{got:?}");
        assert_eq!(of("held"), ["lock.__enter__()"], "{got:?}");
        // `async with`: `__aenter__`; a tuple, an attribute or an
        // `except … as` target is not bound.
        assert_eq!(of("c"), ["C().__aenter__()¦C()#elem"], "{got:?}");
        assert!(
            of("d").is_empty() && of("e").is_empty() && of("x").is_empty(),
            "{got:?}"
        );
    }

    #[test]
    fn a_method_returning_its_receiver_returns_self() {
        let source = "\
class K:
    def __enter__(self: T) -> T:
        return self

    @property
    def me(self) -> typing.Self:
        return self

    def other(self: T) -> U:
        return U()

    @contextlib.contextmanager
    def stream(self) -> Iterator[Response]:
        yield Response()

def ident(x: T) -> T:
    return x
";
        let got = returns(source);
        let of = |name: &str| &got.iter().find(|(n, _)| n == name).unwrap().1;
        assert_eq!(of("__enter__"), "=self", "{got:?}");
        assert_eq!(of("me"), "=self", "{got:?}");
        assert_eq!(of("other"), "U", "{got:?}");
        assert_eq!(of("ident"), "T", "outside a class: {got:?}");
        let entered: Vec<_> = bindings(source)
            .into_iter()
            .filter(|(n, _)| n == "#ret#elem")
            .collect();
        assert_eq!(entered, [("#ret#elem".into(), "Response".into())]);
    }

    #[test]
    fn a_mapping_loop_binds_keys_and_values() {
        let source = "\
def f(m: dict[K, V], n: typing.Optional[typing.Mapping[str, W]]):
    for v in m.values():
        pass
    for k, w in n.items():
        pass
    for key in self.by_key.keys():
        pass
    for x in m.values(1):
        pass
";
        let got = bindings(source);
        let of = |name: &str| bound_to(&got, name);
        assert_eq!(of("m#k"), ["K"], "{got:?}");
        assert_eq!(of("m#v"), ["V"], "{got:?}");
        assert_eq!(of("n#v"), ["W"], "{got:?}");
        assert_eq!(of("v"), ["m#v"], "{got:?}");
        assert_eq!(of("k"), ["n#k"], "{got:?}");
        assert_eq!(of("w"), ["n#v"], "{got:?}");
        assert_eq!(of("key"), ["self.by_key#k"], "{got:?}");
        // A call with arguments is no mapping's view.
        assert!(of("x").is_empty(), "{got:?}");
    }

    /// The facts a walk gathers, entering every subtree or not.
    fn walked(source: &str, prune: bool) -> super::super::FileFacts {
        super::super::walker::walked_facts(crate::lang::Language::Python, source, |cx, root| {
            super::walk_with(cx, root, prune)
        })
    }

    /// Skipping the subtrees of imports and of strings without
    /// interpolations leaves every fact as it was, in the same order: on
    /// f-strings and t-strings holding calls, imports and strings with
    /// syntax errors in them, and every Python fixture of the repository.
    #[test]
    fn skipped_subtrees_hold_no_facts() {
        let source = r#"
from __future__ import annotations
import os.path as osp, sys
from .models import (Model as M, Field)
from . import views
from x import *
s = "plain" + r'raw' + b"bytes" + u"\x00{not(interpolated)}"
f = f"{call(1)} {obj.attr!r:>{width()}}" + F'{x}' + rf"{y()}" + fR'{z.w}'
t = t"{template(1)}" + Tr'{other.one}'
doc = """Docstring {braces()} and "quotes" """
g = f"{ (lambda: inner())() }"
print(f"{'nested' + f'{deep()}'}")
from m import a b(c)
import os sys.path(d)
from .x import (y, z w(e))
broken = "unclosed {x()}
import a.b.
from y import (z
"#;
        assert_eq!(walked(source, true), walked(source, false));
        let facts = walked(source, true);
        let sites: Vec<&str> = facts.sites.iter().map(|s| s.name.as_str()).collect();
        for called in ["call", "y", "template", "inner"] {
            assert!(sites.contains(&called), "{called} in {sites:?}");
        }
        assert!(!sites.contains(&"interpolated"), "{sites:?}");
        assert!(!sites.contains(&"braces"), "{sites:?}");

        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures");
        let mut dirs = vec![root];
        let mut files = 0;
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).expect("fixtures are readable") {
                let path = entry.expect("a directory entry").path();
                if path.is_dir() {
                    dirs.push(path);
                } else if path.extension().is_some_and(|e| e == "py") {
                    let text = std::fs::read_to_string(&path).expect("fixtures are UTF-8");
                    assert_eq!(
                        walked(&text, true),
                        walked(&text, false),
                        "{}",
                        path.display()
                    );
                    files += 1;
                }
            }
        }
        assert!(files >= 10, "{files} Python fixtures");
    }
}

/// `@click.group(chain=True)` over `def cli(): …` outside a class body: as
/// a receiver (`cli.command()`), the name `cli` is what the outermost
/// decorator's call returns (a `Group`), while a plain use of `cli` stays a
/// reference to the function. Only a decorator that is itself a call on a
/// dotted path (a decorator factory such as `click.group(…)` or
/// `cli.command()`) counts; a method's decorators (`@property`,
/// `@x.setter`) describe access, not a value, and a bare `@wraps`-style
/// name often returns the function itself.
#[derive(Default)]
struct DecoratedValues {
    /// (scope start, scope end, end of the definition, name, value): the
    /// name's receivers inside the scope after the definition read as value.
    names: Vec<(usize, usize, usize, String, String)>,
}

impl DecoratedValues {
    /// At a function definition (`up`: its ancestors): remembers the value
    /// of a decorated one.
    fn at_function(&mut self, cx: &Cx, function: Node, up: &Up) {
        let Some(name) = function.field("name") else {
            return;
        };
        let Some(decorated) = up
            .parent()
            .filter(|p| p.kind_name() == "decorated_definition")
        else {
            return;
        };
        let Some(scope) = up.nth(1) else {
            return;
        };
        if up
            .nth(2)
            .is_some_and(|c| c.kind_name() == "class_definition")
        {
            return;
        }
        let mut c = decorated.walk();
        let Some(outermost) = decorated
            .named_children(&mut c)
            .find(|d| d.kind_name() == "decorator")
            .and_then(|d| d.named_child(0))
        else {
            return;
        };
        let dotted_call = outermost.kind_name() == "call"
            && outermost
                .field("function")
                .is_some_and(|f| f.kind_name() == "attribute");
        if !dotted_call {
            return;
        }
        // `click.group()` is read as the factory's return type, which for
        // one typed `-> Group` (an overload, or the left of `Group | …`) is
        // the decorated value.
        if let Some(value) = expr(cx, outermost) {
            // `@cli.command()` under `@click.group(…) def cli`: `cli` read
            // through its own value.
            let value = self.receiver(value, decorated.start_byte());
            self.names.push((
                scope.start_byte(),
                scope.end_byte(),
                decorated.end_byte(),
                cx.t(name).to_string(),
                value,
            ));
        }
    }

    /// A receiver expression at `byte`, its head replaced by a decorated
    /// name's value when one is in scope there.
    fn receiver(&self, recv: String, byte: usize) -> String {
        let head = recv.split('.').next().unwrap_or_default();
        let found = self
            .names
            .iter()
            .rev()
            .find(|(start, end, after, name, _)| {
                name == head && *start <= byte && byte < *end && *after <= byte
            });
        match found {
            Some((.., value)) => format!("{value}{}", &recv[head.len()..]),
            None => recv,
        }
    }
}
