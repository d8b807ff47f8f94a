//! Rust receivers of standard-library types. A receiver known to hold
//! one (a path into `std` / `core` / `alloc`, an everyday type such as
//! `String`, `Vec<T>` or `u64`, what a std constructor or function gives
//! back) is never guessed into the repository by a method's name
//! ([`builtin_type`]; issue 27).

use crate::lang::NodeType;
use crate::resolve::ids::FileIdx;
use crate::resolve::world::{World, is_classlike};

/// Whether expression `e` (a binding's type or value as the facts write
/// it) is known to be a standard-library type: a path into std
/// ([`std_path_value`]), a slice (`[u8]`), a call of an everyday type's
/// constructor ([`std_constructor`]), or one of those types by name
/// (`String`, `Vec<T>`, `u64`).
pub(super) fn builtin_type(w: &World, fi: FileIdx, e: &str) -> bool {
    let (e, head) = super::super::type_head(e, &['<', '(', ':', ' ']);
    std_path_value(e) || e.starts_with('[') || std_constructor(w, fi, e) || is_std_type_name(head)
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
