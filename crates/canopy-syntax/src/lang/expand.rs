//! Items a file's own `macro_rules!` write where it is invoked as an item
//! (slotmap's `new_key_type! { pub struct ListKey; }` writes the struct, an
//! `impl Key for ListKey` and an `impl From<KeyData> for ListKey` with
//! their methods): the invocation is matched against the macro's rules, the
//! first rule that matches is transcribed with its metavariables
//! substituted, and the text that makes is parsed as Rust items on its own.
//!
//! Only what can be decided from tokens: a rule whose pattern holds a
//! fragment this matcher cannot delimit (`$e:expr` before another
//! metavariable, `$i:item`, `$s:stmt`) makes the invocation unknown when
//! no earlier rule matched, and an unknown invocation writes nothing. A
//! macro defined twice in the file (one definition per `cfg`) is not
//! expanded either: which one is compiled is not known here.

use std::collections::HashMap;

use tree_sitter::Node;

/// Deepest nesting of macro invocations inside an expansion that are
/// expanded too (`$crate::new_key_type!($($rest)*)`, one struct at a time).
const MAX_EXPANSION_DEPTH: usize = 8;

/// Largest expansion text kept, in bytes: a macro that writes more is no
/// "simple expansion".
const MAX_EXPANSION_BYTES: usize = 64 * 1024;

/// A `macro_rules!` definition: its name and rules (pattern, body).
pub(super) struct Maker<'t> {
    name: &'t str,
    rules: Vec<(Node<'t>, Node<'t>)>,
}

impl Maker<'_> {
    /// The macro's name.
    pub(super) fn name(&self) -> &str {
        self.name
    }
}

/// The `macro_rules!` of `definitions` (nodes of `text`) whose name is
/// defined once.
pub(super) fn makers<'t>(definitions: &[Node<'t>], text: &'t str) -> Vec<Maker<'t>> {
    let mut out: Vec<Maker<'t>> = Vec::new();
    let mut twice: Vec<&str> = Vec::new();
    for &d in definitions {
        let Some(name) = d.child_by_field_name("name") else {
            continue;
        };
        let name = &text[name.byte_range()];
        let mut cursor = d.walk();
        let rules: Option<Vec<(Node, Node)>> = d
            .named_children(&mut cursor)
            .filter(|c| c.kind() == "macro_rule")
            .map(|r| {
                Some((
                    r.child_by_field_name("left")?,
                    r.child_by_field_name("right")?,
                ))
            })
            .collect();
        let Some(rules) = rules else { continue };
        if out.iter().any(|m| m.name == name) {
            twice.push(name);
        }
        out.push(Maker { name, rules });
    }
    out.retain(|m| !twice.contains(&m.name));
    out
}

/// The last segment of an invoked macro's path (`crate::new_key_type` →
/// `new_key_type`), when the path is the macro's own crate (`crate`,
/// `self`, `$crate`) or no path.
fn invoked_name<'a>(invocation: Node, text: &'a str) -> Option<&'a str> {
    let path = invocation.child_by_field_name("macro")?;
    let written = &text[path.byte_range()];
    // An expansion's own text spaces its tokens (`crate :: keys`).
    match written.rsplit_once("::") {
        None => Some(written.trim()),
        Some((head, name)) if matches!(head.trim(), "crate" | "$crate" | "self") => {
            Some(name.trim())
        }
        Some(_) => None,
    }
}

/// The maker an item-position `invocation` (a node of `text`) invokes.
pub(super) fn maker_of<'m, 't>(
    makers: &'m [Maker<'t>],
    invocation: Node,
    text: &str,
) -> Option<&'m Maker<'t>> {
    let name = invoked_name(invocation, text)?;
    makers.iter().find(|m| m.name == name)
}

/// The text an invocation writes, and where in it an identifier of the
/// invocation was put: (byte of the text, byte of the invocation's file).
pub(super) type Expansion = (String, Vec<(usize, usize)>);

/// The text `invocation` (a node of `text`) of `maker` expands to, nested
/// invocations of `makers` expanded too; `None` when it cannot be decided
/// (no rule matches, or a rule this matcher cannot read comes first). At
/// `depth` 0 `text` is the file's, and the identifiers the invocation
/// passes are marked where they land (`$name` → `NodeId`); nested
/// invocations read an expansion's text, so theirs are not.
pub(super) fn expand(
    makers: &[Maker],
    maker: &Maker,
    invocation: Node,
    text: &str,
    def_text: &str,
    depth: usize,
) -> Option<Expansion> {
    let args = invocation
        .named_children(&mut invocation.walk())
        .find(|c| c.kind() == "token_tree")?;
    let tokens = inner_tokens(args);
    let mut chosen = None;
    for (pattern, body) in &maker.rules {
        let mut binds = HashMap::new();
        let mut pos = 0;
        match match_seq(
            &inner_tokens(*pattern),
            def_text,
            &tokens,
            text,
            &mut pos,
            &mut binds,
        ) {
            Matched::Yes if pos == tokens.len() => {
                chosen = Some((*body, binds));
                break;
            }
            Matched::Yes | Matched::No => continue,
            Matched::Unknown => return None,
        }
    }
    let (body, binds) = chosen?;
    let mut out = String::new();
    let mut marks = Vec::new();
    let mut scope = Scope {
        binds: &binds,
        rounds: Vec::new(),
    };
    transcribe(
        &inner_tokens(body),
        def_text,
        &mut scope,
        &mut out,
        &mut marks,
    )?;
    if depth > 0 {
        marks.clear();
    }
    if out.len() > MAX_EXPANSION_BYTES {
        return None;
    }
    if depth + 1 >= MAX_EXPANSION_DEPTH {
        return Some((out, marks));
    }
    expand_nested(makers, (out, marks), def_text, depth + 1)
}

/// `text` with its item-position invocations of `makers` replaced by their
/// expansions (those that cannot be decided are left as they are).
fn expand_nested(
    makers: &[Maker],
    (text, marks): Expansion,
    def_text: &str,
    depth: usize,
) -> Option<Expansion> {
    let tree = super::extract::parse_rust(&text)?;
    let root = tree.root_node();
    let mut edits: Vec<(std::ops::Range<usize>, String)> = Vec::new();
    let mut cursor = root.walk();
    for child in root.named_children(&mut cursor) {
        let (range, invocation) = match child.kind() {
            "macro_invocation" => (child.byte_range(), child),
            "expression_statement" => match child.named_child(0) {
                Some(c) if c.kind() == "macro_invocation" => (child.byte_range(), c),
                _ => continue,
            },
            _ => continue,
        };
        let Some(maker) = maker_of(makers, invocation, &text) else {
            continue;
        };
        if let Some((expanded, _)) = expand(makers, maker, invocation, &text, def_text, depth) {
            edits.push((range, expanded));
        }
    }
    if edits.is_empty() {
        return Some((text, marks));
    }
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    // Marks move with the text after each edit; those inside one go.
    let mut shifted = Vec::with_capacity(marks.len());
    let mut marks = marks.into_iter().peekable();
    for (range, expanded) in edits {
        while let Some(&(m, file)) = marks.peek() {
            if m >= range.start {
                break;
            }
            shifted.push((m + out.len() - at, file));
            marks.next();
        }
        while marks.peek().is_some_and(|&(m, _)| m < range.end) {
            marks.next();
        }
        out.push_str(&text[at..range.start]);
        out.push_str(&expanded);
        at = range.end;
    }
    shifted.extend(marks.map(|(m, file)| (m + out.len() - at, file)));
    out.push_str(&text[at..]);
    (out.len() <= MAX_EXPANSION_BYTES).then_some((out, shifted))
}

/// The children of a token tree (or pattern) between its delimiters,
/// comments left out.
fn inner_tokens(tree: Node) -> Vec<Node> {
    let mut cursor = tree.walk();
    let all: Vec<Node> = tree.children(&mut cursor).collect();
    let inner = match all.len() {
        0..=2 => &[][..],
        n => &all[1..n - 1],
    };
    inner
        .iter()
        .copied()
        .filter(|t| !t.kind().contains("comment"))
        .collect()
}

/// What a metavariable matched: its tokens' text, or one match per
/// repetition of the `$( … )*` around it.
#[derive(Clone, Debug)]
enum Frag {
    /// The tokens' text, and the byte of the one identifier it is, if so.
    One(String, Option<usize>),
    Many(Vec<Frag>),
}

/// Whether a pattern matched a prefix of the tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Matched {
    Yes,
    No,
    /// The pattern holds what this matcher cannot delimit.
    Unknown,
}

/// What ends a fragment of many tokens: the pattern's next token.
enum Follow<'a> {
    /// The fragment runs to the end of the tokens.
    End,
    /// The fragment stops before this token.
    Token(&'a str),
    /// Anything else (another metavariable, a repetition, a group).
    Unclear,
}

/// Matches `pattern` (tokens of `ptext`) against `tokens` (of `text`) from
/// `*pos`, binding metavariables into `binds`.
fn match_seq(
    pattern: &[Node],
    ptext: &str,
    tokens: &[Node],
    text: &str,
    pos: &mut usize,
    binds: &mut HashMap<String, Frag>,
) -> Matched {
    for (i, p) in pattern.iter().enumerate() {
        let outcome = match p.kind() {
            "token_binding_pattern" => {
                let follow = match pattern.get(i + 1) {
                    None => Follow::End,
                    Some(n) if is_plain(*n) => Follow::Token(&ptext[n.byte_range()]),
                    Some(_) => Follow::Unclear,
                };
                match_binding(*p, ptext, tokens, text, pos, follow, binds)
            }
            "token_repetition_pattern" => {
                match_repetition(*p, ptext, tokens, text, pos, pattern.get(i + 1), binds)
            }
            "token_tree_pattern" => match tokens.get(*pos) {
                Some(t) if t.kind() == "token_tree" && same_open(*p, *t) => {
                    let inner = inner_tokens(*t);
                    let mut at = 0;
                    match match_seq(&inner_tokens(*p), ptext, &inner, text, &mut at, binds) {
                        Matched::Yes if at == inner.len() => {
                            *pos += 1;
                            Matched::Yes
                        }
                        Matched::Unknown => Matched::Unknown,
                        _ => Matched::No,
                    }
                }
                _ => Matched::No,
            },
            // `$x` without a fragment in a pattern: not a rule to read.
            "metavariable" => Matched::Unknown,
            _ => match tokens.get(*pos) {
                Some(t) if text[t.byte_range()] == ptext[p.byte_range()] => {
                    *pos += 1;
                    Matched::Yes
                }
                _ => Matched::No,
            },
        };
        if outcome != Matched::Yes {
            return outcome;
        }
    }
    Matched::Yes
}

/// A token of a pattern that matches itself.
fn is_plain(n: Node) -> bool {
    !matches!(
        n.kind(),
        "token_binding_pattern"
            | "token_repetition_pattern"
            | "token_tree_pattern"
            | "metavariable"
    )
}

/// Whether two token trees open with the same delimiter.
fn same_open(a: Node, b: Node) -> bool {
    a.child(0).map(|c| c.kind()) == b.child(0).map(|c| c.kind())
}

/// `$name:frag` against `tokens` from `*pos`.
fn match_binding(
    p: Node,
    ptext: &str,
    tokens: &[Node],
    text: &str,
    pos: &mut usize,
    follow: Follow,
    binds: &mut HashMap<String, Frag>,
) -> Matched {
    let (Some(name), Some(frag)) = (p.child_by_field_name("name"), p.child_by_field_name("type"))
    else {
        return Matched::Unknown;
    };
    let name = ptext[name.byte_range()].trim_start_matches('$').to_string();
    let start = *pos;
    let tok = |k: usize| tokens.get(k).map(|t| &text[t.byte_range()]);
    let taken = match &ptext[frag.byte_range()] {
        // `u8` is an identifier to the macro matcher too.
        "ident" => match tokens.get(start) {
            Some(t) if matches!(t.kind(), "identifier" | "primitive_type") => 1,
            _ => return Matched::No,
        },
        "lifetime" => match (tok(start), tokens.get(start + 1)) {
            (Some("'"), Some(t)) if t.kind() == "identifier" => 2,
            _ => return Matched::No,
        },
        "literal" => {
            let minus = usize::from(tok(start) == Some("-"));
            match tokens.get(start + minus) {
                Some(t) if t.kind().ends_with("_literal") => minus + 1,
                _ => return Matched::No,
            }
        }
        "tt" => match tok(start) {
            Some("'") if tokens.get(start + 1).is_some() => 2,
            Some("$") => return Matched::Unknown,
            Some(_) => 1,
            None => return Matched::No,
        },
        "vis" => match tok(start) {
            Some("pub") => match tokens.get(start + 1) {
                Some(t)
                    if t.kind() == "token_tree" && t.child(0).is_some_and(|c| c.kind() == "(") =>
                {
                    2
                }
                _ => 1,
            },
            _ => 0,
        },
        "block" => match tokens.get(start) {
            Some(t) if t.kind() == "token_tree" && t.child(0).is_some_and(|c| c.kind() == "{") => 1,
            _ => return Matched::No,
        },
        kind @ ("ty" | "path" | "meta" | "expr" | "expr_2021" | "pat" | "pat_param") => {
            match many_tokens(tokens, text, start, &follow, matches!(kind, "ty" | "path")) {
                Ok(0) => return Matched::No,
                Ok(n) => n,
                Err(unknown) => return unknown,
            }
        }
        // `item`, `stmt`: their ends are not read from tokens here.
        _ => return Matched::Unknown,
    };
    let text_of = tokens[start..start + taken]
        .iter()
        .fold(String::new(), |mut s, t| {
            push_token(&mut s, &text[t.byte_range()]);
            s
        });
    let ident =
        (taken == 1 && tokens[start].kind() == "identifier").then(|| tokens[start].start_byte());
    binds.insert(name, Frag::One(text_of, ident));
    *pos = start + taken;
    Matched::Yes
}

/// How many tokens from `start` a fragment of many tokens takes: up to
/// its follow token outside `<…>` (for types and paths), or to the end.
/// An expression or pattern holding `<` is not delimited here (`a < b, c`
/// or a turbofish): `Err(Unknown)`.
fn many_tokens(
    tokens: &[Node],
    text: &str,
    start: usize,
    follow: &Follow,
    angles: bool,
) -> Result<usize, Matched> {
    let stop = match follow {
        Follow::End => None,
        Follow::Token(t) => Some(*t),
        Follow::Unclear => return Err(Matched::Unknown),
    };
    let mut depth = 0i32;
    let mut k = start;
    while k < tokens.len() {
        let t = &text[tokens[k].byte_range()];
        if depth == 0 && Some(t) == stop {
            break;
        }
        match t {
            "<" | "<<" if !angles => return Err(Matched::Unknown),
            "<" => depth += 1,
            "<<" => depth += 2,
            ">" => depth -= 1,
            ">>" => depth -= 2,
            _ => {}
        }
        if depth < 0 {
            return Err(Matched::Unknown);
        }
        k += 1;
    }
    if stop.is_some() && k == tokens.len() {
        // The follow token never came: this rule does not match here.
        return Ok(0);
    }
    Ok(k - start)
}

/// `$( … ) sep? op` against `tokens` from `*pos`: as many repetitions as
/// match, each metavariable inside bound to one [`Frag`] per repetition.
fn match_repetition(
    p: Node,
    ptext: &str,
    tokens: &[Node],
    text: &str,
    pos: &mut usize,
    after: Option<&Node>,
    binds: &mut HashMap<String, Frag>,
) -> Matched {
    let Some((inner, sep, op)) = repetition_parts(p, ptext) else {
        return Matched::Unknown;
    };
    // A fragment of many tokens at the end of the repetition stops at the
    // separator, which this matcher does not hand down: unclear.
    if inner
        .last()
        .is_some_and(|n| n.kind() == "token_binding_pattern" && sep.is_none())
        && after.is_some()
        && !ends_fixed(*inner.last().expect("checked"), ptext)
    {
        return Matched::Unknown;
    }
    let mut rounds: Vec<HashMap<String, Frag>> = Vec::new();
    loop {
        let before = *pos;
        let mut at = *pos;
        if !rounds.is_empty()
            && let Some(sep) = sep
        {
            match tokens.get(at) {
                Some(t) if text[t.byte_range()] == *sep => at += 1,
                _ => break,
            }
        }
        if at >= tokens.len() {
            break;
        }
        let mut round = HashMap::new();
        match match_seq(&inner, ptext, tokens, text, &mut at, &mut round) {
            Matched::Yes if at > before => {
                *pos = at;
                rounds.push(round);
            }
            Matched::Unknown => return Matched::Unknown,
            _ => break,
        }
        if op == "?" {
            break;
        }
    }
    if op == "+" && rounds.is_empty() {
        return Matched::No;
    }
    let mut names = Vec::new();
    binding_names(&inner, ptext, &mut names);
    for name in names {
        let each: Vec<Frag> = rounds
            .iter()
            .filter_map(|r| r.get(&name).cloned())
            .collect();
        binds.insert(name, Frag::Many(each));
    }
    Matched::Yes
}

/// Whether a binding takes a fixed number of tokens.
fn ends_fixed(binding: Node, ptext: &str) -> bool {
    binding.child_by_field_name("type").is_some_and(|f| {
        matches!(
            &ptext[f.byte_range()],
            "ident" | "lifetime" | "literal" | "tt" | "block"
        )
    })
}

/// The inside, separator and operator of `$( … ) sep? op` (a pattern's or a body's).
fn repetition_parts<'t, 'x>(
    rep: Node<'t>,
    text: &'x str,
) -> Option<(Vec<Node<'t>>, Option<&'x str>, &'x str)> {
    let mut cursor = rep.walk();
    let all: Vec<Node> = rep.children(&mut cursor).collect();
    let close = all.iter().rposition(|c| c.kind() == ")")?;
    if close < 2 || all.first()?.kind() != "$" {
        return None;
    }
    let inner: Vec<Node> = all[2..close]
        .iter()
        .copied()
        .filter(|t| !t.kind().contains("comment"))
        .collect();
    let rest = &all[close + 1..];
    let (sep, op) = match rest {
        [op] => (None, &text[op.byte_range()]),
        [sep, op] => (Some(text[sep.byte_range()].trim()), &text[op.byte_range()]),
        _ => return None,
    };
    Some((inner, sep, op))
}

/// The metavariable names a pattern binds, at any depth.
fn binding_names(pattern: &[Node], ptext: &str, out: &mut Vec<String>) {
    for p in pattern {
        match p.kind() {
            "token_binding_pattern" => out.extend(
                p.child_by_field_name("name")
                    .map(|n| ptext[n.byte_range()].trim_start_matches('$').to_string()),
            ),
            "token_repetition_pattern" | "token_tree_pattern" => {
                let mut cursor = p.walk();
                let inner: Vec<Node> = p.children(&mut cursor).collect();
                binding_names(&inner, ptext, out);
            }
            _ => {}
        }
    }
}

/// Appends one token's text, spaced from the one before.
fn push_token(out: &mut String, token: &str) {
    // A lifetime's quote stays joined to its name.
    if !out.is_empty() && !out.ends_with('\'') {
        out.push(' ');
    }
    out.push_str(token);
}

/// The metavariables a transcription sees: the match's bindings, under
/// the current round of each `$( … )` being written (innermost last).
/// Rounds are pushed and popped rather than the bindings cloned per
/// round, which grew with every repetition of every expansion.
struct Scope<'a> {
    binds: &'a HashMap<String, Frag>,
    rounds: Vec<(&'a str, &'a Frag)>,
}

impl<'a> Scope<'a> {
    /// What metavariable `name` stands for here.
    fn get(&self, name: &str) -> Option<&'a Frag> {
        self.rounds
            .iter()
            .rev()
            .find(|(n, _)| *n == name)
            .map(|&(_, f)| f)
            .or_else(|| self.binds.get(name))
    }
}

/// Writes the body tokens `body` (of `text`) with the metavariables of
/// `scope` substituted.
fn transcribe<'a>(
    body: &[Node],
    text: &'a str,
    scope: &mut Scope<'a>,
    out: &mut String,
    marks: &mut Vec<(usize, usize)>,
) -> Option<()> {
    for t in body {
        match t.kind() {
            "token_tree" => {
                let mut cursor = t.walk();
                let all: Vec<Node> = t.children(&mut cursor).collect();
                let (open, close) = (all.first()?, all.last()?);
                push_token(out, &text[open.byte_range()]);
                transcribe(&inner_tokens(*t), text, scope, out, marks)?;
                push_token(out, &text[close.byte_range()]);
            }
            "metavariable" => {
                let name = text[t.byte_range()].trim_start_matches('$');
                match (name, scope.get(name)) {
                    ("crate", _) => push_token(out, "crate"),
                    (_, Some(Frag::One(s, at))) => {
                        if !s.is_empty() {
                            push_token(out, s);
                        }
                        if let Some(at) = at {
                            marks.push((out.len() - s.len(), *at));
                        }
                    }
                    _ => return None,
                }
            }
            "token_repetition" => {
                let (inner, sep, _) = repetition_parts(*t, text)?;
                let mut used = Vec::new();
                metavariables(&inner, text, &mut used);
                let repeated: Vec<(&str, &Vec<Frag>)> = used
                    .iter()
                    .filter_map(|n| match scope.get(n) {
                        Some(Frag::Many(each)) => Some((*n, each)),
                        _ => None,
                    })
                    .collect();
                let count = repeated.first()?.1.len();
                if repeated.iter().any(|(_, each)| each.len() != count) {
                    return None;
                }
                for k in 0..count {
                    if k > 0
                        && let Some(sep) = sep
                    {
                        push_token(out, sep);
                    }
                    let outer = scope.rounds.len();
                    scope
                        .rounds
                        .extend(repeated.iter().map(|&(n, each)| (n, &each[k])));
                    let written = transcribe(&inner, text, scope, out, marks);
                    scope.rounds.truncate(outer);
                    written?;
                }
            }
            _ => push_token(out, &text[t.byte_range()]),
        }
    }
    Some(())
}

/// The metavariables a body's tokens use, at any depth.
fn metavariables<'x>(body: &[Node], text: &'x str, out: &mut Vec<&'x str>) {
    for t in body {
        match t.kind() {
            "metavariable" => out.push(text[t.byte_range()].trim_start_matches('$')),
            "token_tree" | "token_repetition" => {
                let mut cursor = t.walk();
                let inner: Vec<Node> = t.children(&mut cursor).collect();
                metavariables(&inner, text, out);
            }
            _ => {}
        }
    }
}
