//! TypeScript's and JavaScript's resolution rules: `this` / `super`,
//! modules as relative file specifiers, overloads (a use means the
//! implementation), a source's definition over its `.d.ts` copy.

use super::{Among, Conventions, LanguageRules};
use crate::facts::model::{APPLIED, OWN_MODULE};
use crate::lang::Language;
use crate::resolve::eval::{Ctx, Val};
use crate::resolve::ids::{FileIdx, SymId};
use crate::resolve::world::{World, is_function};

/// TypeScript's and JavaScript's differences as data: a method (of a class
/// or an object literal) is no name in scope, only a member; collection
/// methods that give back an item.
pub(crate) const CONVENTIONS: Conventions = Conventions {
    methods_in_scope: false,
    functions_in_values_in_scope: false,
    call_bindings: true,
    value_unions_are_each: true,
    variables_are_module_members: true,
    awaited_types: &["Promise", "PromiseLike"],
    item_methods: ITEM_METHODS,
    ..Conventions::NEUTRAL
};

/// Methods of `Map`, `WeakMap` and arrays that give back one item (the
/// value type of a map, the element type of an array; see
/// [`crate::facts::model::ELEM`]).
const ITEM_METHODS: &[&str] = &["get", "at", "pop", "shift", "find", "findLast"];

/// The methods ECMAScript's own built-in prototypes define (ECMA-262:
/// `Object`, `Function`, `Array`, `String`, `Map`, `Set`, `WeakMap`,
/// `WeakRef`, `Promise`, `RegExp`, `Number`), sorted. A call of one of
/// these names on a receiver nothing is known of is as likely a `Map`'s
/// `get` or a `Promise`'s `then` as the corpus's one method of the name
/// (issue 27: @reduxjs/toolkit's 51 `get`/`has`/`then` guesses, all wrong;
/// prosemirror-model's 15 `slice` guesses, all wrong), so it is never
/// guessed. The platform's own types (`Headers.has`, a stream controller's
/// `close`) are left to the receiver rules ([`PLATFORM_TYPES`]).
const BUILTIN_METHODS: &[&str] = &[
    "add",
    "apply",
    "at",
    "bind",
    "call",
    "catch",
    "charAt",
    "charCodeAt",
    "clear",
    "codePointAt",
    "concat",
    "copyWithin",
    "delete",
    "deref",
    "difference",
    "endsWith",
    "entries",
    "every",
    "exec",
    "fill",
    "filter",
    "finally",
    "find",
    "findIndex",
    "findLast",
    "findLastIndex",
    "flat",
    "flatMap",
    "forEach",
    "get",
    "has",
    "hasOwnProperty",
    "includes",
    "indexOf",
    "intersection",
    "isDisjointFrom",
    "isPrototypeOf",
    "isSubsetOf",
    "isSupersetOf",
    "join",
    "keys",
    "lastIndexOf",
    "localeCompare",
    "map",
    "match",
    "matchAll",
    "normalize",
    "padEnd",
    "padStart",
    "pop",
    "propertyIsEnumerable",
    "push",
    "reduce",
    "reduceRight",
    "repeat",
    "replace",
    "replaceAll",
    "reverse",
    "search",
    "set",
    "shift",
    "slice",
    "some",
    "sort",
    "splice",
    "split",
    "startsWith",
    "substr",
    "substring",
    "symmetricDifference",
    "test",
    "then",
    "toExponential",
    "toFixed",
    "toLocaleLowerCase",
    "toLocaleString",
    "toLocaleUpperCase",
    "toLowerCase",
    "toPrecision",
    "toReversed",
    "toSorted",
    "toSpliced",
    "toString",
    "toUpperCase",
    "trim",
    "trimEnd",
    "trimStart",
    "union",
    "unshift",
    "valueOf",
    "values",
    "with",
];

/// Types of the web platform and Node.js that a corpus uses without
/// defining them (WHATWG streams, fetch, URL, encoding, events, abort):
/// a receiver declared as one (`signal: AbortSignal`) or made by its
/// constructor (`new ReadableStream(…)`, `new AbortController()`) is
/// never guessed to hold the corpus's one `close` or `addEventListener`
/// (issue 27: @trpc/server's stream controllers and abort signals). Only
/// reached for a type the corpus does not define itself (a receiver whose
/// type is a unit is resolved, not guessed).
const PLATFORM_TYPES: &[&str] = &[
    "AbortController",
    "AbortSignal",
    "Blob",
    "CustomEvent",
    "Event",
    "EventTarget",
    "File",
    "FormData",
    "Headers",
    "MessageChannel",
    "MessagePort",
    "ReadableByteStreamController",
    "ReadableStream",
    "ReadableStreamBYOBReader",
    "ReadableStreamController",
    "ReadableStreamDefaultController",
    "ReadableStreamDefaultReader",
    "Request",
    "Response",
    "TextDecoder",
    "TextDecoderStream",
    "TextEncoder",
    "TextEncoderStream",
    "TransformStream",
    "TransformStreamDefaultController",
    "URL",
    "URLSearchParams",
    "WebSocket",
    "WritableStream",
    "WritableStreamDefaultController",
    "WritableStreamDefaultWriter",
];

/// The web platform's DOM types and global objects that a corpus uses
/// without defining them: a receiver declared or cast as one (`el as
/// HTMLElement`), or read through a global (`document.querySelectorAll(…)`,
/// `const el = document.getElementById(…)`), is never guessed to hold the
/// corpus's one `querySelectorAll` or `focus` (issue 27: @tiptap/core's
/// `document.querySelectorAll(…)`, guessed to be `NodePos.querySelectorAll`).
/// As for [`PLATFORM_TYPES`], only reached when nothing in the corpus
/// gives the receiver a value.
const DOM_NAMES: &[&str] = &[
    "CSSStyleDeclaration",
    "ClipboardEvent",
    "DOMRect",
    "DataTransfer",
    "Document",
    "DocumentFragment",
    "DragEvent",
    "Element",
    "FocusEvent",
    "HTMLElement",
    "HTMLInputElement",
    "HTMLTextAreaElement",
    "InputEvent",
    "KeyboardEvent",
    "MouseEvent",
    "MutationObserver",
    "PointerEvent",
    "ResizeObserver",
    "ShadowRoot",
    "TouchEvent",
    "document",
    "globalThis",
    "localStorage",
    "navigator",
    "sessionStorage",
    "window",
];

/// TypeScript's and JavaScript's rules (they keep no tables).
pub(crate) struct EcmaScript;

impl LanguageRules for EcmaScript {
    fn builtin_type(&self, _w: &World, _fi: FileIdx, e: &str) -> bool {
        let (e, head) = super::type_head(e, &['(', '<', '.', '[', APPLIED]);
        e.ends_with("[]")
            || matches!(
                head,
                "Array"
                    | "ReadonlyArray"
                    | "Map"
                    | "ReadonlyMap"
                    | "Set"
                    | "ReadonlySet"
                    | "WeakMap"
                    | "WeakSet"
                    | "WeakRef"
                    | "Promise"
                    | "PromiseLike"
                    | "String"
                    | "Number"
                    | "Boolean"
                    | "BigInt"
                    | "Symbol"
                    | "RegExp"
                    | "Date"
                    | "Error"
                    | "JSON"
                    | "Math"
                    | "Reflect"
                    | "Record"
                    | "string"
                    | "number"
                    | "boolean"
                    | "bigint"
                    | "symbol"
                    | "Uint8Array"
                    | "Int32Array"
                    | "Float64Array"
                    | "ArrayBuffer"
            )
            || PLATFORM_TYPES.contains(&head)
            || DOM_NAMES.contains(&head)
    }

    fn builtin_method(&self, name: &str) -> bool {
        BUILTIN_METHODS.binary_search(&name).is_ok()
    }

    fn head(
        &self,
        w: &World,
        cx: &Ctx,
        head: &str,
        _called: bool,
        _value: bool,
    ) -> Option<Vec<Val>> {
        match head {
            "this" => Some(w.enclosing_class_as(cx, Val::Inst)),
            "super" => Some(w.enclosing_class_as(cx, Val::Super)),
            _ => None,
        }
    }

    fn is_self_receiver(&self, first: &str) -> bool {
        first == "this" || first == "super"
    }

    fn choose(&self, w: &World, found: Vec<SymId>, _among: Among) -> Vec<SymId> {
        overload_implementation(w, declaration_copies_dropped(w, found))
    }

    fn drop_copies(&self, w: &World, found: Vec<SymId>) -> Vec<SymId> {
        declaration_copies_dropped(w, found)
    }

    /// Not from JavaScript into TypeScript: a package's compiled `.js`
    /// (`build/lib/row.js`, a bundle) beside its `.ts` sources calls its
    /// own compiled code, never the sources' interface methods.
    fn may_guess(&self, w: &World, caller: FileIdx, target: FileIdx) -> bool {
        w.files[caller].language != Language::JavaScript
            || w.files[target].language == Language::JavaScript
    }

    /// Only when the call's argument count fits the method's parameters
    /// ([`DefFactKind::Arity`](crate::facts::DefFactKind::Arity)): the one
    /// method of a name need not be what an unknown receiver holds, and a
    /// same-named property of another type (never a unit) may be
    /// (`props.getValue()` of `CellContext`, not `CoreRow.getValue(id)`).
    fn guess_fits(&self, w: &World, args: u8, m: SymId) -> bool {
        let Some(n) = args.checked_sub(1) else {
            return true;
        };
        let Some((min, max)) = w.arity_of(m).and_then(|a| a.split_once(':')) else {
            return true;
        };
        let n = usize::from(n);
        let above = min.parse::<usize>().ok().is_none_or(|min| n >= min);
        above && (max == "*" || max.parse::<usize>().ok().is_none_or(|max| n <= max))
    }

    fn import_module(&self, w: &World, fi: FileIdx, module: &str) -> Option<Val> {
        if module == OWN_MODULE {
            // `export { h as jsx }`: `h` of this very module.
            return Some(Val::File(fi));
        }
        resolve_module(&w.files[fi].path, module, &|p| {
            w.file_by_path.contains_key(p)
        })
        .and_then(|p| w.file_by_path.get(&p).map(|&f| Val::File(f)))
    }

    /// `import X from "m"`: the module's default export ([`default_export`]).
    fn default_import(&self, w: &World, m: &Val, depth: u32) -> Vec<Val> {
        default_export(w, m, depth)
    }
}

/// What module `m` exports as its default: the member `default` its
/// `export default …` or export list names (`export { A as default }`,
/// `export { default } from "./a"`), only those: `export * from "./a"`
/// re-exports every name but `default` (ECMA-262), so a module without a
/// `default` of its own has none.
fn default_export(w: &World, m: &Val, depth: u32) -> Vec<Val> {
    let Val::File(f) = *m else {
        return Vec::new();
    };
    let facts = w.files[f].facts.get();
    let own = facts
        .imports
        .iter()
        .any(|i| i.exported && facts.s(i.local) == "default");
    if own {
        w.member(m, "default", depth + 1)
    } else {
        Vec::new()
    }
}

/// Whether `path` is a TypeScript declaration file (`x.d.ts`, `x.d.mts`,
/// `x.d.cts`): declarations without code, as a package's build ships them
/// beside (or instead of) its sources.
fn is_declaration_file(path: &str) -> bool {
    let file = path.rsplit('/').next().unwrap_or(path);
    [".d.ts", ".d.mts", ".d.cts"]
        .iter()
        .any(|ext| file.ends_with(ext))
}

/// `found` without the definitions in declaration files whose qualified
/// name a definition among `found` in a source file (`.ts`, `.tsx`, not a
/// declaration file) also has. An npm package that ships `build/lib/row.d.ts`
/// beside `src/core/row.ts` declares `CoreRow.getValue` twice: the copy is
/// not a second candidate (issue 27: table-core's callers of
/// `CoreRow.getValue`, 4 resolved with `build/`, 40 without). A declaration
/// that is the only one of its name stays, and so do two sources.
fn declaration_copies_dropped(w: &World, found: Vec<SymId>) -> Vec<SymId> {
    if found.len() < 2 {
        return found;
    }
    let is_source = |d: SymId| {
        let file = &w.files[w.syms[d].file];
        matches!(file.language, Language::TypeScript | Language::Tsx)
            && !is_declaration_file(&file.path)
    };
    let sources: Vec<&str> = found
        .iter()
        .filter(|&&d| is_source(d))
        .map(|&d| w.syms[d].qualified_name.as_str())
        .collect();
    if sources.is_empty() || sources.len() == found.len() {
        return found;
    }
    found
        .iter()
        .copied()
        .filter(|&d| {
            is_source(d)
                || !is_declaration_file(&w.files[w.syms[d].file].path)
                || !sources.contains(&w.syms[d].qualified_name.as_str())
        })
        .collect()
}

/// TypeScript overloads: signatures, then the implementation, all functions
/// of one kind and name in one file; a use means the implementation (the
/// last). Anything else (a class and a namespace of one name…) stays as it is.
fn overload_implementation(w: &World, defs: Vec<SymId>) -> Vec<SymId> {
    let first = &w.syms[defs[0]];
    let overloads = defs.iter().all(|&d| {
        let s = &w.syms[d];
        s.node_type == first.node_type && is_function(s.node_type) && s.file == first.file
    });
    if !overloads {
        return defs;
    }
    defs.into_iter()
        .max_by_key(|&d| w.syms[d].start)
        .into_iter()
        .collect()
}

/// The file a relative module specifier names, among `exists` (`./x` from
/// `src/a/b.ts` → `src/a/x.ts`, `src/a/x/index.ts`, …).
pub(crate) fn resolve_module(
    from: &str,
    spec: &str,
    exists: &dyn Fn(&str) -> bool,
) -> Option<String> {
    if !spec.starts_with('.') {
        return None;
    }
    let mut parts: Vec<&str> = from.split('/').collect();
    parts.pop();
    for seg in spec.split('/') {
        match seg {
            "." | "" => {}
            ".." => {
                parts.pop()?;
            }
            s => parts.push(s),
        }
    }
    let base = parts.join("/");
    let base = base
        .strip_suffix(".js")
        .or_else(|| base.strip_suffix(".mjs"))
        .unwrap_or(&base)
        .to_string();
    for ext in [
        "",
        ".ts",
        ".tsx",
        ".d.ts",
        ".js",
        ".jsx",
        ".mjs",
        "/index.ts",
        "/index.tsx",
        "/index.js",
    ] {
        let candidate = format!("{base}{ext}");
        if exists(&candidate) {
            return Some(candidate);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    #[test]
    fn builtin_methods_are_sorted_for_the_binary_search() {
        assert!(super::BUILTIN_METHODS.windows(2).all(|w| w[0] < w[1]));
    }
}
