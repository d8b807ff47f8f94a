//! Rust receivers of standard-library types. A receiver known to hold
//! one (a path into `std` / `core` / `alloc`, an everyday type such as
//! `String`, `Vec<T>` or `u64`, what a std constructor or function gives
//! back) is never guessed into the repository by a method's name
//! ([`builtin_type`]; issue 27). The methods a repository's own traits
//! give such types (`impl<T> UnwrapUnchecked<T> for Option<T>`, `impl Ext
//! for Vec<u8>`, a blanket `impl<T: ?Sized> Ext for T`) are found on it
//! when the trait is in scope, as Rust's method lookup does
//! ([`std_type_methods`]); a name the std types define themselves is
//! theirs (inherent methods come first).

use crate::facts::model::{BLANKET, CALL_RESULT, LITERAL, RETURNED, STD_WRAPPER};
use crate::lang::NodeType;
use crate::resolve::eval::{Ctx, Val};
use crate::resolve::ids::{FileIdx, Idx, SymId};
use crate::resolve::world::{World, is_classlike, is_function};

use super::STD_METHODS;

/// Whether expression `e` (a binding's type or value as the facts write
/// it) is known to be a standard-library type: a path into std
/// ([`std_path_value`]), a slice (`[u8]`), a call of an everyday type's
/// constructor ([`std_constructor`]), or one of those types by name
/// (`String`, `Vec<T>`, `u64`).
pub(super) fn builtin_type(w: &World, fi: FileIdx, e: &str) -> bool {
    if e.starts_with(LITERAL) {
        // `#lit:str`, `#lit:Vec` (`vec![…]`), `#lit:Range` (`0..n`).
        return true;
    }
    let (e, head) = super::super::type_head(e, &['<', '(', ':', ' ']);
    std_path_value(e) || e.starts_with('[') || std_constructor(w, fi, e) || is_std_type_name(head)
}

/// The methods named `name` of the repository's trait impls for the
/// standard-library types receiver `r` is known to hold at `cx`
/// ([`std_heads`]), and of its blanket impls (`impl<T> Tr for T`), where
/// the impl's trait is in scope at `cx`. Empty when `name` is a method of
/// the standard library's everyday types ([`STD_METHODS`]).
pub(super) fn std_type_methods(w: &World, cx: &Ctx, name: &str, r: &str) -> Vec<SymId> {
    if STD_METHODS.binary_search(&name).is_ok() {
        return Vec::new();
    }
    // Most names have no method in an impl of a trait at all: nothing to
    // evaluate then.
    let impls: Vec<(SymId, SymId)> = w
        .units_named(name)
        .iter()
        .filter(|&&m| is_function(w.syms[m].node_type))
        .filter_map(|&m| Some((w.parent_of(m)?, m)))
        .filter(|&(i, _)| w.syms[i].node_type == NodeType::Impl && trait_of(w, i).is_some())
        .collect();
    let provided = trait_methods_named(w, name);
    if impls.is_empty() && provided.is_empty() {
        return Vec::new();
    }
    let heads = std_heads(w, cx, r, 0);
    if heads.is_empty() {
        return Vec::new();
    }
    let applies = |i: SymId| {
        let for_type = &w.syms[i].name;
        ((heads.contains(for_type) && !defined_type(w, i)) || blanket(w, i))
            && trait_of(w, i).is_some_and(|tr| trait_in_scope(w, cx, tr))
    };
    let mut out: Vec<SymId> = impls
        .iter()
        .filter(|&&(i, _)| applies(i))
        .map(|&(_, m)| m)
        .collect();
    out.extend(provided_through_impls(w, name, &provided, applies));
    out.sort_unstable();
    out.dedup();
    if out.len() > 1 {
        // A type's own impl before a blanket one.
        let own: Vec<SymId> = out
            .iter()
            .copied()
            .filter(|&m| w.parent_of(m).is_some_and(|i| !blanket(w, i)))
            .collect();
        if !own.is_empty() {
            out = own;
        }
    }
    out
}

/// The methods named `name` of the repository's traits, with their trait
/// (a provided method's body is the trait's: an impl that does not define
/// it has it from there).
fn trait_methods_named(w: &World, name: &str) -> Vec<(SymId, SymId)> {
    w.units_named(name)
        .iter()
        .filter(|&&m| is_function(w.syms[m].node_type))
        .filter_map(|&m| Some((w.parent_of(m)?, m)))
        .filter(|&(t, _)| w.syms[t].node_type == NodeType::Trait)
        .collect()
}

/// The trait methods of `provided` (trait, method) that an impl of their
/// trait for which `applies` holds (a blanket `impl<T: Iterator> Tr for T`
/// on an iterator) does not define itself: `(0..n).progress()` calls
/// `Tr::progress`'s own body. The impls are read from the world's table
/// of every trait impl, only for a name some trait has a method of.
fn provided_through_impls(
    w: &World,
    name: &str,
    provided: &[(SymId, SymId)],
    applies: impl Fn(SymId) -> bool,
) -> Vec<SymId> {
    let mut out = Vec::new();
    for &(tr, m) in provided {
        let trait_name = w.syms[tr].name.as_str();
        // The entry's own trait path first (the segment `trait_of` reads
        // from the impl's first entry): most impls are of other traits,
        // and `trait_of`'s table lookup on every impl of the repository,
        // for every call of such a name, cost tokio's index ~1.9% of its CPU.
        let reached = w.impl_traits.values().flatten().any(|(i, tr)| {
            last_segment(tr) == trait_name
                && trait_of(w, *i) == Some(trait_name)
                && w.named_children(*i, name).is_empty()
                && applies(*i)
        });
        if reached {
            out.push(m);
        }
    }
    out
}

/// The last path segment of an entry's trait in [`World::impl_traits`]
/// (`scope\u{0}path`), as [`super::traits::impl_trait_name`] reads it.
fn last_segment(tr: &str) -> &str {
    let tr = tr.split_once('\u{0}').map_or(tr, |(_, t)| t);
    tr.rsplit('.').next().unwrap_or(tr)
}

/// The last path segment of the trait impl unit `i` implements, if any.
fn trait_of(w: &World, i: SymId) -> Option<&str> {
    super::traits::impl_trait_name(w, i).filter(|t| !t.is_empty())
}

/// Whether the type impl `i` is for is one the repository defines, as
/// the impl's own scope sees its name (then its methods are found through
/// that type, and it is no std type; a `struct Result` elsewhere, in a
/// test module, does not count).
fn defined_type(w: &World, i: SymId) -> bool {
    w.type_of_impl(i) != i
}

/// Whether impl `i` is for its own type parameter (`impl<T: ?Sized> Ext
/// for T`): its facts bind `T#std` to [`BLANKET`] in the impl's scope.
fn blanket(w: &World, i: SymId) -> bool {
    let s = &w.syms[i];
    let facts = w.files[s.file].facts.get();
    let part = w.part(s.file);
    part.bindings_named(facts, &format!("{}{STD_WRAPPER}", s.name))
        .iter()
        .any(|&bi| part.scopes[bi] == i && facts.s(facts.bindings[bi.index()].expr) == BLANKET)
}

/// Whether trait `tr` (its last path segment) can be called through at
/// `cx`: a name in scope there, or imported by the file under any local
/// name (`use crate::util::Ext as _;`).
fn trait_in_scope(w: &World, cx: &Ctx, tr: &str) -> bool {
    let found = w.lookup(cx, tr, 0).0;
    if found.iter().any(
        |v| matches!(v, Val::Class(t) | Val::Inst(t) if w.syms[*t].node_type == NodeType::Trait),
    ) {
        return true;
    }
    let facts = w.files[cx.file].facts.get();
    facts
        .imports
        .iter()
        .any(|i| i.name.is_some_and(|n| facts.s(n) == tr))
}

/// The standard-library types (their last path segment: `Option`,
/// `Vec`, `str`, `File`) receiver `r` is known to hold at `cx`:
/// - a call `f()` of a function whose return type is written as one
///   (`-> Option<&V>`: the [`STD_WRAPPER`] binding `#ret#std`; `-> Vec<T>`);
/// - a local or parameter typed as one (`x: Result<K, E>`, `v: &[u8]`
///   is none: a slice has no name to implement a trait for by), bound to
///   a literal (`#lit:str`) or to such a call;
/// - a field typed as one (`self.slots`, `slots: Vec<Slot<V>>`).
fn std_heads(w: &World, cx: &Ctx, r: &str, depth: u32) -> Vec<String> {
    let rules = w.rules_of(cx.file);
    let builtin_head = |e: &str| -> Option<String> {
        if !rules.builtin_type(w, cx.file, e) || e.contains(CALL_RESULT) {
            return None;
        }
        let head = e.split(['<', ' ']).next().unwrap_or_default();
        let last = head.rsplit(['.', ':']).next().unwrap_or_default();
        (!last.is_empty() && !last.starts_with('[')).then(|| last.to_string())
    };
    let mut out = Vec::new();
    if let Some(lit) = r.strip_prefix(LITERAL) {
        // `"x".f()`, `(0..n).f()`.
        out.push(lit.to_string());
    } else if let Some(callee) = r.strip_suffix(CALL_RESULT) {
        let vals = w.eval(cx, callee, 0);
        for v in &vals {
            let Val::Func(f) = v else { continue };
            match returned_wrapper(w, *f) {
                Some(wrapper) => out.push(wrapper),
                None => out.extend(w.returns_of(*f).and_then(builtin_head)),
            }
        }
        // `v.iter()` of a std value `v`: a method of the standard library
        // gives a std value (its type unnamed here: blanket impls only).
        if vals.is_empty()
            && depth < 2
            && let Some((recv, _)) = callee.rsplit_once('.')
            && !std_heads(w, cx, recv, depth + 1).is_empty()
        {
            out.push(SOME_STD_TYPE.to_string());
        }
    } else if r.chars().all(|c| c.is_alphanumeric() || c == '_') {
        if let Some(wrapper) = w.binding_expr(cx, &format!("{r}{STD_WRAPPER}")) {
            out.push(wrapper.to_string());
        } else if let Some((e, is_type, byte)) = w.binding_of(cx, r) {
            if is_type {
                out.extend(builtin_head(e));
                if out.is_empty() && w.bounded_outside(cx, e) {
                    // `it: I` with `I: Iterator`: a type from elsewhere.
                    out.push(SOME_STD_TYPE.to_string());
                }
            } else if let Some(lit) = e.strip_prefix(LITERAL) {
                out.extend(builtin_head(lit));
            } else if e.ends_with(CALL_RESULT) && depth == 0 {
                let at = Ctx {
                    file: cx.file,
                    byte: byte.saturating_sub(1),
                    scope: cx.scope,
                };
                out.extend(std_heads(w, &at, e, depth + 1));
            }
        }
    } else if let Some((base, field)) = r.rsplit_once('.')
        && !base.contains(CALL_RESULT)
    {
        let wrapped = format!("{field}{STD_WRAPPER}");
        for v in w.eval(cx, base, 0) {
            let Val::Inst(t) = v else { continue };
            for o in [t, w.type_of_impl(t)] {
                for (n, e, is_type) in w.fields_of(o) {
                    if n == wrapped {
                        out.push(e.to_string());
                    } else if n == field && is_type {
                        out.extend(builtin_head(e));
                    }
                }
            }
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// What [`std_heads`] gives for a value known to be of a type from outside
/// the repository whose name is not written (`v.iter()`): no impl is
/// named so, so only blanket impls (`impl<T: Iterator> Ext for T`) apply.
const SOME_STD_TYPE: &str = "?";

/// The [`STD_WRAPPER`] function `f`'s return type is written in
/// (`#ret#std` in `f`'s scope).
fn returned_wrapper(w: &World, f: SymId) -> Option<String> {
    let fi = w.syms[f].file;
    let part = w.part(fi);
    let facts = w.files[fi].facts.get();
    let name = format!("{RETURNED}{STD_WRAPPER}");
    part.bindings_named(facts, &name)
        .iter()
        .find(|&&bi| part.scopes[bi] == f)
        .map(|&bi| facts.s(facts.bindings[bi.index()].expr).to_string())
}

/// Whether `head` (a type's last written name) is one of the standard
/// library's everyday types or a primitive.
fn is_std_type_name(head: &str) -> bool {
    STD_TYPE_NAMES.contains(&head)
}

/// The standard library's everyday types and the primitives, by the name
/// code writes them with (the prelude's, or a `use std::…` of one).
#[rustfmt::skip] // a word list, kept compact
const STD_TYPE_NAMES: &[&str] = &[
    "String", "str", "Vec", "VecDeque", "HashMap", "HashSet", "BTreeMap", "BTreeSet",
    "BinaryHeap", "LinkedList", "Option", "Result", "Box", "Rc", "Arc", "RefCell", "Cell",
    "Mutex", "RwLock", "Cow", "PathBuf", "Path", "OsString", "OsStr", "Duration", "Instant",
    "Range", "RangeInclusive",
    "i8", "i16", "i32", "i64", "i128", "isize", "u8", "u16", "u32", "u64", "u128", "usize",
    "f32", "f64", "bool", "char",
];

/// The roots of the standard library's paths (`std::fs::File`, written
/// `std.fs.File` by the facts).
const STD_ROOTS: &[&str] = &["std", "core", "alloc"];

/// Functions of the standard library's modules whose result has the type
/// of a value passed in or a type asked for (`ptr::read(p)`,
/// `mem::transmute(x)`, `cmp::max(a, b)`): not known to be a std type.
#[rustfmt::skip] // a word list, kept compact
const STD_GENERIC_FUNCTIONS: &[&str] = &[
    "black_box", "identity", "max", "min", "read", "read_unaligned", "read_volatile", "replace",
    "take", "transmute", "transmute_copy", "uninitialized", "zeroed",
];

/// Types of the standard library whose constructors give back the value
/// they are given (`Box::new(x)`, `Some`-like wrappers, `Default`): the
/// facts read through them, so a call of one holds no known std type.
#[rustfmt::skip] // a word list, kept compact
const STD_PASSING: &[&str] = &[
    "Box", "Rc", "Arc", "Cell", "RefCell", "Cow", "Pin", "ManuallyDrop", "Option", "Result",
    "From", "Into", "TryFrom", "TryInto", "Default", "Clone", "Iterator", "IntoIterator",
    "FromIterator", "AsRef", "AsMut", "Deref", "DerefMut", "ToOwned", "ToString", "FromStr",
];

/// Whether `e` (a type or value expression as the facts write it) is a
/// path into the standard library (`std.fs.File`, `std::fs::File`,
/// `core.fmt.Formatter`), or a call through one whose result is a std
/// type: an associated function of a std type (`std.fs.File.open()`) or
/// a module's function (`std.env.var()`), except those that give back a
/// value of the caller's type ([`STD_GENERIC_FUNCTIONS`], [`STD_PASSING`]).
fn std_path_value(e: &str) -> bool {
    let Some(rest) = STD_ROOTS.iter().find_map(|r| {
        e.strip_prefix(r)
            .and_then(|x| x.strip_prefix('.').or_else(|| x.strip_prefix("::")))
    }) else {
        return false;
    };
    let Some((path, _)) = rest.split_once('(') else {
        return true;
    };
    let mut segs = path.rsplit(['.', ':']).filter(|s| !s.is_empty());
    let (Some(func), owner) = (segs.next(), segs.next()) else {
        return false;
    };
    match owner {
        Some(t) if t.starts_with(char::is_uppercase) => !STD_PASSING.contains(&t),
        _ => !STD_GENERIC_FUNCTIONS.contains(&func),
    }
}

/// Whether `e` is a call of an associated function of one of the
/// standard library's everyday types ([`STD_TYPE_NAMES`]: `String.new()`,
/// `Vec.with_capacity()`, `HashMap.default()`) that the repository does
/// not define itself, other than those that give back what they are
/// given ([`STD_PASSING`]).
fn std_constructor(w: &World, fi: FileIdx, e: &str) -> bool {
    let Some((path, _)) = e.split_once('(') else {
        return false;
    };
    let Some((ty, _)) = path.split_once('.') else {
        return false;
    };
    is_std_type_name(ty)
        && !STD_PASSING.contains(&ty)
        && !w.units_named(ty).iter().any(|&t| {
            let s = &w.syms[t];
            is_classlike(s.node_type)
                && s.node_type != NodeType::Impl
                && w.files[s.file].family == w.files[fi].family
        })
}
