//! Rust `cfg` attributes: which code a default build compiles out.

use tree_sitter::Node;

use super::super::model::DefFactKind;
use super::super::walker::{Cx, GrammarLookup};

/// The value of a `#[cfg(…)]` / `#![cfg(…)]` attribute in a default build
/// on this host, `None` when it is not a `cfg` or cannot be known here.
pub(super) fn cfg_attribute(cx: &Cx, attr_item: Node) -> Option<bool> {
    holds_in(cfg_predicate(cx, attr_item)?, &env_of(cx))?
}

/// What the walker evaluates a file's `cfg` attributes against: the bare
/// names its package's build script turns on ([`Cx::build_flags`]).
fn env_of<'c>(cx: &'c Cx) -> CfgEnv<'c> {
    CfgEnv {
        on: cx.build_flags,
        ..CfgEnv::default()
    }
}

/// The predicate of a `#[cfg(…)]` / `#![cfg(…)]` attribute (`unix`,
/// `all(a, b)`), as written.
fn cfg_predicate<'c>(cx: &'c Cx, attr_item: Node) -> Option<&'c str> {
    let mut c = attr_item.walk();
    let attr = attr_item
        .named_children(&mut c)
        .find(|k| k.kind_name() == "attribute")?;
    let text = cx.t(attr).trim();
    let args = text.strip_prefix("cfg")?.trim_start();
    Some(args.strip_prefix('(')?.strip_suffix(')')?.trim())
}

/// A `cfg` predicate's value in a default build where a build script set
/// the key-value pairs `set` (`("fast_arithmetic", "64")`): a key it sets
/// has those values only; other key-value pairs stay unknown (`None`).
/// The outer `None`: unreadable.
#[cfg(test)]
fn holds_with(predicate: &str, set: &[(String, String)]) -> Option<Option<bool>> {
    holds_in(
        predicate,
        &CfgEnv {
            set,
            ..CfgEnv::default()
        },
    )
}

/// What a `cfg` predicate is evaluated against beyond the host: what the
/// package's build script prints, and where the predicate is read.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct CfgEnv<'a> {
    /// Key-value pairs a build script sets (`("fast_arithmetic", "64")`):
    /// a key it sets has those values only.
    pub set: &'a [(String, String)],
    /// Bare names the package's build script turns on in a default build
    /// (`wrap_proc_macro`, see `resolve::lang::rust::build_script`).
    pub on: &'a [String],
    /// The package's default features, when known: `feature = "x"` of one
    /// holds (others stay unknown: a dependent may turn them on).
    pub features: Option<&'a [String]>,
    /// Whether a feature outside [`CfgEnv::features`] is off, as in the
    /// package's default build: what chooses between twins (an item under
    /// `cfg(feature = "x")` and one under `cfg(not(feature = "x"))`).
    pub only_default_features: bool,
    /// A build script's own `cfg!(…)`: it is no test build, and a bare
    /// name other than the host's can only come from `RUSTFLAGS` (a build
    /// script cannot set its own), so it is off; `debug_assertions`
    /// depends on the profile.
    pub build_script: bool,
}

/// A `cfg` predicate's value in a default build under `env`; the outer
/// `None`: unreadable.
pub(crate) fn holds_in(predicate: &str, env: &CfgEnv) -> Option<Option<bool>> {
    let mut p = CfgParser {
        rest: predicate,
        env,
    };
    let value = p.predicate()?;
    p.rest.trim().is_empty().then_some(value)
}

/// An outer `#[cfg(…)]` the walker cannot decide whose key-value pairs
/// include one a build script may set (not `target_…`) or a `feature`:
/// the predicate is kept on the item's name ([`DefFactKind::Cfg`]), and
/// the resolver decides with the package's `build.rs` (a unit a key the
/// script sets rules out is no definition) and its default features (of
/// twins, the one a default build compiles is meant).
pub(super) fn build_cfg(cx: &mut Cx, attr_item: Node) {
    let Some(predicate) = cfg_predicate(cx, attr_item).map(str::to_string) else {
        return;
    };
    if holds_in(&predicate, &env_of(cx)) != Some(None)
        || !(names_a_build_key(&predicate) || names_a_feature(&predicate))
    {
        return;
    }
    let mut next = attr_item.next_named_sibling();
    while let Some(k) = next
        && is_leading(k)
    {
        next = k.next_named_sibling();
    }
    if let Some(name) = next.and_then(|item| item.field("name")) {
        cx.def_fact(name, Some(predicate), DefFactKind::Cfg);
    }
}

/// Whether a predicate has a `key = "…"` whose key a build script may set.
pub(crate) fn names_a_build_key(predicate: &str) -> bool {
    predicate_keys(predicate).any(|key| key != "feature" && !key.starts_with("target_"))
}

/// Whether a predicate has a `feature = "…"`.
fn names_a_feature(predicate: &str) -> bool {
    predicate_keys(predicate).any(|key| key == "feature")
}

/// The keys of a predicate's `key = "…"` pairs.
fn predicate_keys(predicate: &str) -> impl Iterator<Item = &str> {
    predicate.match_indices('=').filter_map(|(at, _)| {
        let key = predicate[..at].trim_end();
        let start = key
            .rfind(|c: char| !(c.is_alphanumeric() || c == '_'))
            .map_or(0, |i| i + 1);
        let key = &key[start..];
        (!key.is_empty()).then_some(key)
    })
}

/// Records the code a false `cfg` attribute compiles out: the item after an
/// outer attribute (other attributes and comments in between belong to
/// it), or everything around an inner one (`#![cfg(x)]` at the top of a
/// file or module).
///
/// The range covers the item as its unit spans it (`extend_span` in
/// canopy-syntax): from the doc comments and attributes directly above the
/// `cfg` (`/// Docs` then `#[inline]` then `#[cfg(x)]`) to a comment
/// trailing its last line. Starting at the `cfg` instead left the unit of a
/// documented item outside the range, so a compiled-out twin stayed a
/// definition and calls to the name became ambiguous.
pub(super) fn compile_out(cx: &mut Cx, attr_item: Node) {
    let range = if attr_item.kind_name() == "inner_attribute_item" {
        attr_item.parent().map(|p| (p.start_byte(), p.end_byte()))
    } else if let Some(owner) = owner_of(attr_item) {
        Some((owner.start_byte(), trailing_end(cx, owner)))
    } else {
        let mut next = attr_item.next_named_sibling();
        while let Some(k) = next
            && is_leading(k)
        {
            next = k.next_named_sibling();
        }
        next.map(|item| (leading_start(cx, attr_item), trailing_end(cx, item)))
    };
    if let Some((start, end)) = range {
        // Ranges are pushed in walk order and must not overlap (the walker
        // checks only the last): a comment trailing the previous
        // compiled-out item stays with it.
        let start = cx
            .facts
            .disabled
            .last()
            .map_or(start as u32, |&(_, e)| e.max(start as u32));
        cx.facts.disabled.push((start, end as u32));
    }
}

/// The node an outer attribute belongs to when the grammar puts it inside
/// that node (`#[cfg(x)] E::A => a(),` is one `match_arm` whose first
/// child is the attribute; a struct expression's field likewise): the
/// next sibling is only the arm's pattern or the field's name, and the
/// arm's value would stay compiled in. Only an attribute leading a node
/// parsed without error: an attribute where the grammar has none (on a
/// field of a struct pattern, as proc-macro2 writes) leaves error
/// recovery to place it, and the arm around it is not its item.
fn owner_of(attr_item: Node) -> Option<Node> {
    let owner = attr_item.parent()?;
    let kinds = [
        "match_arm",
        "field_initializer",
        "shorthand_field_initializer",
    ];
    if !kinds.contains(&owner.kind_name()) || owner.has_error() {
        return None;
    }
    let mut prev = attr_item.prev_sibling();
    while let Some(p) = prev {
        if !is_leading(p) && p.kind_name() != "inner_attribute_item" {
            return None;
        }
        prev = p.prev_sibling();
    }
    Some(owner)
}

/// Kinds that belong to the item after them.
fn is_leading(n: Node) -> bool {
    matches!(
        n.kind_name(),
        "attribute_item" | "line_comment" | "block_comment"
    )
}

/// Where the item an outer `cfg` attribute belongs to starts: at the first
/// of the attributes and doc comments directly above it, on lines of their
/// own with no blank line between (a comment ending an attribute's line
/// goes with that attribute), as canopy-syntax's `extend_span` starts a unit.
fn leading_start(cx: &Cx, attr_item: Node) -> usize {
    let text = cx.text;
    let mut first = attr_item;
    while let Some(prev) = first.prev_named_sibling()
        && is_leading(prev)
    {
        let last_char = prev.end_byte().saturating_sub(1).max(prev.start_byte());
        let gap = text.get(last_char..first.start_byte()).unwrap_or("\n\n");
        if gap.matches('\n').count() > 1 {
            break;
        }
        let line_start = text[..prev.start_byte()].rfind('\n').map_or(0, |i| i + 1);
        if text[line_start..prev.start_byte()].trim().is_empty() {
            first = prev;
            continue;
        }
        // `#[inline] // note`: the comment goes with the attribute before it.
        match prev.prev_named_sibling() {
            Some(before)
                if prev.kind_name() != "attribute_item"
                    && before.kind_name() == "attribute_item"
                    && !text[before.end_byte()..prev.start_byte()].contains('\n') =>
            {
                first = before;
            }
            _ => break,
        }
    }
    first.start_byte()
}

/// Where a compiled-out item ends: after a comment on its last line
/// (`#[cfg(x)] const A: u8 = 1; // note`), as its unit ends.
fn trailing_end(cx: &Cx, item: Node) -> usize {
    let mut next = item.next_sibling();
    if let Some(n) = next
        && !n.is_named()
        && matches!(n.kind_name(), ";" | ",")
    {
        next = n.next_sibling();
    }
    match next {
        Some(c)
            if matches!(c.kind_name(), "line_comment" | "block_comment")
                && !cx.text[item.end_byte()..c.start_byte()].contains('\n') =>
        {
            item.end_byte()
                .max(c.start_byte() + cx.t(c).trim_end().len())
        }
        _ => item.end_byte(),
    }
}

/// `all` (`absorbing` false) or `any` (true) over three-valued operands:
/// one absorbing value decides; otherwise known only when every one is.
fn combine(values: &[Option<bool>], absorbing: bool) -> Option<bool> {
    if values.contains(&Some(absorbing)) {
        Some(absorbing)
    } else if values.iter().all(|v| *v == Some(!absorbing)) {
        Some(!absorbing)
    } else {
        None
    }
}

/// A `cfg` predicate reader: `name`, `key = "value"`, `not(p)`,
/// `all(p, …)`, `any(p, …)`, evaluated as a default `cargo build` on a
/// 64-bit Linux host sees them (what rust-analyzer shows by default):
/// `test`, `debug_assertions`, `unix` hold, and the names the package's
/// build script turns on ([`CfgEnv::on`]); every other bare name
/// (`windows`, `miri`, `docsrs`, and the flags build scripts set for old
/// compilers) does not; `feature = …` and other key-value pairs are
/// unknown (`None`), so nothing under them is compiled out.
struct CfgParser<'a> {
    rest: &'a str,
    env: &'a CfgEnv<'a>,
}

impl CfgParser<'_> {
    fn word(&mut self) -> Option<&str> {
        let s = self.rest.trim_start();
        let end = s
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(s.len());
        if end == 0 {
            return None;
        }
        self.rest = &s[end..];
        Some(&s[..end])
    }

    fn eat(&mut self, c: char) -> bool {
        let s = self.rest.trim_start();
        match s.strip_prefix(c) {
            Some(r) => {
                self.rest = r;
                true
            }
            None => false,
        }
    }

    /// Three-valued: `Some(Some(b))` known, `Some(None)` unknown, `None` unreadable.
    fn predicate(&mut self) -> Option<Option<bool>> {
        let name = self.word()?.to_string();
        if self.eat('(') {
            let mut values = Vec::new();
            if !self.eat(')') {
                loop {
                    values.push(self.predicate()?);
                    if self.eat(')') {
                        break;
                    }
                    if !self.eat(',') {
                        return None;
                    }
                    if self.eat(')') {
                        break; // trailing comma
                    }
                }
            }
            return match name.as_str() {
                "not" if values.len() == 1 => Some(values[0].map(|v| !v)),
                "all" => Some(combine(&values, false)),
                "any" => Some(combine(&values, true)),
                _ => None,
            };
        }
        if self.eat('=') {
            let s = self.rest.trim_start().strip_prefix('"')?;
            let close = s.find('"')?;
            self.rest = &s[close + 1..];
            let value = &s[..close];
            let set = self.env.set;
            if set.iter().any(|(k, _)| *k == name) {
                return Some(Some(set.iter().any(|(k, v)| *k == name && v == value)));
            }
            if name == "feature"
                && let Some(features) = self.env.features
            {
                if features.iter().any(|f| f == value) {
                    return Some(Some(true));
                }
                if self.env.only_default_features {
                    return Some(Some(false));
                }
            }
            return Some(None);
        }
        if self.env.build_script {
            return Some(match name.as_str() {
                "unix" => Some(true),
                "debug_assertions" => None,
                _ => Some(false),
            });
        }
        Some(Some(
            matches!(name.as_str(), "test" | "debug_assertions" | "unix")
                || self.env.on.contains(&name),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eval(predicate: &str) -> Option<Option<bool>> {
        holds_with(predicate, &[])
    }

    #[test]
    fn a_key_a_build_script_sets_has_its_value_only() {
        let set = [("fast_arithmetic".to_string(), "64".to_string())];
        assert_eq!(
            holds_with(r#"fast_arithmetic = "64""#, &set),
            Some(Some(true))
        );
        assert_eq!(
            holds_with(r#"fast_arithmetic = "32""#, &set),
            Some(Some(false))
        );
        assert_eq!(
            holds_with(r#"not(fast_arithmetic = "32")"#, &set),
            Some(Some(true))
        );
        assert_eq!(holds_with(r#"feature = "std""#, &set), Some(None));
        assert!(names_a_build_key(r#"fast_arithmetic = "64""#));
        assert!(!names_a_build_key(
            r#"all(feature = "std", target_os = "linux")"#
        ));
    }

    #[test]
    fn cfg_predicates_are_evaluated_as_a_default_linux_build() {
        assert_eq!(eval("test"), Some(Some(true)));
        assert_eq!(eval("unix"), Some(Some(true)));
        assert_eq!(eval("windows"), Some(Some(false)));
        assert_eq!(eval("no_alloc_crate"), Some(Some(false)));
        assert_eq!(eval("not(miri)"), Some(Some(true)));
        assert_eq!(eval(r#"feature = "std""#), Some(None));
        assert_eq!(eval(r#"not(feature = "std")"#), Some(None));
        assert_eq!(
            eval(r#"all(unix, not(windows), feature = "x")"#),
            Some(None)
        );
        assert_eq!(eval(r#"all(windows, feature = "x")"#), Some(Some(false)));
        assert_eq!(eval(r#"any(docsrs, feature = "x")"#), Some(None));
        assert_eq!(eval("any(docsrs, test,)"), Some(Some(true)));
        assert_eq!(eval("any()"), Some(Some(false)));
        // Unreadable: left alone.
        assert_eq!(eval("all(unix"), None);
        assert_eq!(eval("= \"x\""), None);
    }

    /// The names of the sites a file's facts keep, read as a file of a
    /// package whose build script turns `flags` on.
    fn kept_names(src: &str, flags: &[&str]) -> Vec<String> {
        let flags: Vec<String> = flags.iter().map(|f| f.to_string()).collect();
        let facts = crate::facts::parse_with_facts_in("src/x.rs", src.as_bytes(), &flags)
            .1
            .expect("rust has fact rules");
        let mut names: Vec<String> = facts.sites.into_iter().map(|s| s.name).collect();
        names.extend(facts.imports.into_iter().map(|i| i.local));
        names
    }

    #[test]
    fn a_flag_the_build_script_turns_on_decides_each_form_it_is_on() {
        // proc-macro2's forms: a `use … as`, a `mod`, statements, `let`s,
        // trait functions; `on_*` compiled in, `off_*` out.
        let src = "#[cfg(not(wrapped))]\nuse crate::off_fallback as off_imp;\n\
                   #[cfg(wrapped)]\nuse crate::on_wrapper as on_imp;\n\
                   #[cfg(not(wrapped))]\nmod off_mod { fn f() { off_in_mod(); } }\n\
                   fn g() {\n    #[cfg(wrapped)]\n    on_stmt();\n    #[cfg(not(wrapped))]\n    off_stmt();\n\
                   \x20   #[cfg(not(wrapped))]\n    let x = off_let();\n    #[cfg(all(wrapped, unix))]\n    let x = on_let();\n}\n\
                   trait T {\n    #[cfg(not(wrapped))]\n    fn h() { off_trait_fn(); }\n}\n";
        let names = kept_names(src, &["wrapped"]);
        for on in ["on_imp", "on_stmt", "on_let"] {
            assert!(names.iter().any(|n| n == on), "{on} missing: {names:?}");
        }
        assert!(!names.iter().any(|n| n.starts_with("off_")), "{names:?}");
        // Without the flag (a package whose build script does not print it
        // on every path), the other way round.
        let names = kept_names(src, &[]);
        assert!(names.iter().any(|n| n == "off_stmt"), "{names:?}");
        assert!(!names.iter().any(|n| n.starts_with("on_")), "{names:?}");
    }

    #[test]
    fn a_false_cfg_on_a_match_arm_or_a_field_compiles_out_all_of_it() {
        // proc-macro2's `#[cfg(wrap_proc_macro)] DelimSpanEnum::Compiler {
        // .. } => …` arms and struct fields under a `cfg`.
        let src = "fn f(x: E) -> u8 {\n    match x {\n        #[cfg(windows)]\n        E::A => off_arm(),\n\
                   \x20       #[cfg(not(windows))]\n        E::B => on_arm(),\n        #[cfg(windows)]\n\
                   \x20       E::C => {\n            off_block()\n        }\n        _ => on_rest(),\n    }\n}\n\
                   fn g(on_short: u8) -> S {\n    S {\n        #[cfg(windows)]\n        a: off_field(),\n\
                   \x20       #[cfg(unix)]\n        b: on_field(),\n        #[cfg(windows)]\n        off_short,\n\
                   \x20       on_short,\n    }\n}\n\
                   fn h(t: T) {\n    match t {\n        T::L(L {\n            #[cfg(windows)]\n\
                   \x20           inner: in_pattern,\n            ..\n        }) => on_guarded(),\n        _ => {}\n    }\n}\n";
        let names = kept_names(src, &[]);
        for on in ["on_arm", "on_rest", "on_field", "on_short", "on_guarded"] {
            assert!(names.iter().any(|n| n == on), "{on} missing: {names:?}");
        }
        assert!(!names.iter().any(|n| n.starts_with("off_")), "{names:?}");
    }

    #[test]
    fn a_false_cfg_compiles_out_the_item_or_the_whole_file() {
        let src = "#[cfg(windows)]\n#[inline]\nfn a() { b(); }\n\n#[cfg(feature = \"x\")]\nfn c() { d(); }\n\nfn e() { f(); }\n";
        let facts = crate::facts::parse_with_facts("src/x.rs", src.as_bytes())
            .1
            .expect("rust has fact rules");
        let names: Vec<&str> = facts.sites.iter().map(|s| s.name.as_str()).collect();
        assert!(!names.contains(&"b"), "{names:?}");
        assert!(names.contains(&"d") && names.contains(&"f"), "{names:?}");
        let fn_a_end = src.find("\n\n#[cfg(feature").unwrap() as u32;
        assert_eq!(facts.disabled, [(0, fn_a_end)]);

        // Doc comments and attributes directly above the `cfg` belong to
        // the item (its unit starts at the first); a blank line ends them;
        // a comment on the item's last line ends it.
        let src = "// header\n\n/// Docs.\n#[inline]\n#[cfg(miri)]\nconst A: u8 = 1; // note\n";
        let facts = crate::facts::parse_with_facts("src/y.rs", src.as_bytes())
            .1
            .expect("rust has fact rules");
        let start = src.find("/// Docs").unwrap() as u32;
        assert_eq!(facts.disabled, [(start, src.trim_end().len() as u32)]);

        let file = "#![cfg(miri)]\nuse x::y;\nfn g() { h(); }\n";
        let facts = crate::facts::parse_with_facts("src/m.rs", file.as_bytes())
            .1
            .expect("rust has fact rules");
        assert!(
            facts.sites.is_empty() && facts.imports.is_empty(),
            "{facts:?}"
        );
        assert_eq!(facts.disabled, [(0, file.len() as u32)]);
    }
}
