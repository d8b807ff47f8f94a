//! Queries: the `canopy_query` parameters and the DSL, evaluated against the store.
//!
//! Every parameter form is translated into an [`Expr`] and evaluated by
//! one evaluator, so `symbol="x"` and `(code "x")` cannot drift apart.
//!
//! Matching rules (documented for users in README.md, "Query rules"):
//! * **text** (`pattern`, `patterns`, `grep`): the text is split into words
//!   (letters, digits, `_`); every word must occur in the unit (its name, its
//!   path or its own text). Words are matched whole and case-insensitively;
//!   identifiers are also indexed by their parts, so `parse` finds
//!   `parse_expr` and `ParseError`. A word ending in `*` in the user text is a
//!   prefix. Text in double quotes is a phrase. When no unit has every word,
//!   units with any word are returned, ranked; when no unit has any word,
//!   the words (of 3 or more characters) are tried as prefixes, so the start
//!   of an identifier (`batch_probe`) finds it (`batch_probe_1_fn`). Anything else in the text
//!   (operators, punctuation, emoji) is ignored, never an error. Ranking is
//!   BM25 with weights name 10, path 4, body 1.
//! * **symbols** (`symbol`, `code`): exact name first, then the same name in
//!   another case, then names starting with the text, then names containing
//!   it (substring matches only when the closer tiers found fewer than 200).
//!   `Type.method`, `Type::method` and `module.func` restrict the match to
//!   that parent (qualified name) or module (file name).
//! * **definition**: exact name (any case) only.

use std::cell::Cell;
use std::collections::{HashMap, HashSet};
use std::rc::Rc;

use serde::{Deserialize, Serialize};

use crate::discover::{PathFilter, check_relative};
use crate::dsl;
use crate::error::{CanopyError, Result};
use crate::handle::HandleId;
use crate::lang::NodeType;
use crate::model::{Handle, QueryResult, RefHandle, Span};
use crate::snapshot::Snapshot;
use crate::store::Store;
use crate::store::read::{FileScope, NameMatch, NodeRecord, RefRecord};
use crate::text::{collapse_preview, fts_quote};

/// A query in the S-expression language's terms: what [`QueryParams::to_expr`]
/// makes of every parameter form (the `query` parameter is parsed into one).
pub use crate::dsl::Expr;

/// Default `limit`.
pub const DEFAULT_LIMIT: usize = 16;
/// Largest `limit` honoured (larger values are clamped).
pub const MAX_LIMIT: usize = 200;
/// Most candidates any one search considers.
pub const CANDIDATE_CAP: usize = 2_000;
/// Most distinct `patterns` one request may give (duplicates, compared
/// case-insensitively after trimming, count once).
pub const MAX_PATTERNS: usize = 32;
/// Most distinct words one text pattern may hold.
pub const MAX_PATTERN_TERMS: usize = 64;

/// The distinct non-empty patterns, first spelling kept, in request order.
fn distinct_patterns(list: &[String]) -> Vec<&str> {
    let mut seen = HashSet::new();
    list.iter()
        .map(|p| p.trim())
        .filter(|p| !p.is_empty() && seen.insert(p.to_lowercase()))
        .collect()
}

/// Rejects a text with more than [`MAX_PATTERN_TERMS`] distinct words:
/// each word is a search clause, and a pasted log or file would make one
/// request do the work of thousands.
fn check_terms(what: &str, text: &str) -> Result<()> {
    let mut seen = HashSet::new();
    for word in crate::text::identifiers(text) {
        if seen.insert(word.to_lowercase()) && seen.len() > MAX_PATTERN_TERMS {
            return Err(CanopyError::Validation(format!(
                "{what} has more than {MAX_PATTERN_TERMS} distinct words; search for the few \
                 that identify the code (or use canopy_evidence_pack with the question)"
            )));
        }
    }
    Ok(())
}

/// `kind` parameter.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum QueryKind {
    /// Definitions only.
    Definition,
    /// References (`ref_handles`).
    Reference,
    /// Anything (default).
    #[default]
    Any,
}

/// `match` parameter for `patterns`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MatchMode {
    /// Any pattern (OR, default).
    #[default]
    Any,
    /// All patterns (AND).
    All,
}

/// The `canopy_query` parameters (names and defaults as seed `004_…`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct QueryParams {
    /// Full-text search.
    pub pattern: Option<String>,
    /// Several text patterns, combined by `match`.
    pub patterns: Option<Vec<String>>,
    /// Code symbol name.
    pub symbol: Option<String>,
    /// Markdown section heading.
    pub section: Option<String>,
    /// Parent symbol (class, struct, impl, …).
    pub parent: Option<String>,
    /// `definition`, `reference` or `any`.
    pub kind: Option<QueryKind>,
    /// Path glob filter.
    pub glob: Option<String>,
    /// `any` or `all` for `patterns`.
    #[serde(rename = "match")]
    pub match_mode: Option<MatchMode>,
    /// Max results (default 16, clamped to 1..=200).
    pub limit: Option<usize>,
    /// Auto-expand handles while their tokens fit (default 0: off).
    pub expand_budget: Option<u64>,
    /// S-expression DSL.
    pub query: Option<String>,
    /// Keep the ranked results on the server and return a `result_set` id for `refine`.
    pub result_set: Option<bool>,
}

impl QueryParams {
    /// Checks that at least one search parameter is present and well formed.
    pub fn validate(&self) -> Result<()> {
        let has = |s: &Option<String>| s.as_deref().is_some_and(|s| !s.trim().is_empty());
        let has_patterns = self
            .patterns
            .as_ref()
            .is_some_and(|p| p.iter().any(|s| !s.trim().is_empty()));
        if !(has(&self.pattern)
            || has_patterns
            || has(&self.symbol)
            || has(&self.section)
            || has(&self.parent)
            || has(&self.query))
        {
            return Err(CanopyError::Validation(
                "no search parameter: provide at least one of pattern, patterns, symbol, section, parent or query".into(),
            ));
        }
        if let Some(glob) = &self.glob {
            PathFilter::new(glob)?;
        }
        if let Some(list) = &self.patterns {
            let distinct = distinct_patterns(list).len();
            if distinct > MAX_PATTERNS {
                return Err(CanopyError::Validation(format!(
                    "patterns has {distinct} distinct entries; at most {MAX_PATTERNS} are allowed"
                )));
            }
        }
        Ok(())
    }

    /// The word limit of a text search (`canopy_query`; an evidence pack
    /// picks its own key terms from a question of any length): at most
    /// [`MAX_PATTERN_TERMS`] distinct words per pattern.
    pub fn check_text_limits(&self) -> Result<()> {
        if let Some(p) = &self.pattern {
            check_terms("pattern", p)?;
        }
        for p in distinct_patterns(self.patterns.as_deref().unwrap_or_default()) {
            check_terms("a pattern in patterns", p)?;
        }
        Ok(())
    }

    /// The effective limit.
    pub fn effective_limit(&self) -> usize {
        self.limit.unwrap_or(DEFAULT_LIMIT).clamp(1, MAX_LIMIT)
    }

    /// Translates the parameters into one expression.
    pub fn to_expr(&self) -> Result<Expr> {
        let nonempty = |s: &Option<String>| s.clone().filter(|s| !s.trim().is_empty());
        let kind = self.kind.unwrap_or_default();
        let mut parts = Vec::new();
        if let Some(q) = nonempty(&self.query) {
            parts.push(dsl::parse(&q)?);
        }
        let symbol = nonempty(&self.symbol);
        let parent = nonempty(&self.parent);
        if kind == QueryKind::Reference {
            if let Some(name) = symbol.clone().or_else(|| nonempty(&self.pattern)) {
                parts.push(Expr::References(name));
            }
        } else {
            if let Some(p) = nonempty(&self.pattern) {
                parts.push(Expr::Grep(p));
            }
            if let Some(list) = &self.patterns {
                // Repeats add no matches, only work.
                let greps: Vec<Expr> = distinct_patterns(list)
                    .into_iter()
                    .map(|p| Expr::Grep(p.to_string()))
                    .collect();
                if !greps.is_empty() {
                    parts.push(match self.match_mode.unwrap_or_default() {
                        MatchMode::Any => Expr::Union(greps),
                        MatchMode::All => Expr::Intersect(greps),
                    });
                }
            }
            match (&parent, &symbol) {
                (Some(p), Some(s)) => parts.push(Expr::ChildrenNamed(p.clone(), s.clone())),
                (Some(p), None) => parts.push(Expr::Children(p.clone())),
                (None, Some(s)) => parts.push(Expr::Code(s.clone())),
                (None, None) => {}
            }
        }
        if let Some(s) = nonempty(&self.section) {
            parts.push(Expr::Section(s));
        }
        let mut expr = match parts.len() {
            0 => {
                return Err(CanopyError::Validation(
                    "no search parameter: provide at least one of pattern, patterns, symbol, section, parent or query".into(),
                ));
            }
            1 => parts.remove(0),
            _ => Expr::Intersect(parts),
        };
        if let Some(glob) = nonempty(&self.glob) {
            expr = Expr::InFile(glob, Box::new(expr));
        }
        Ok(expr)
    }
}

/// Ranked results of evaluating an expression.
#[derive(Default, Debug)]
pub(crate) struct Hits {
    pub nodes: Vec<NodeRecord>,
    pub refs: Vec<RefRecord>,
    /// A search behind these hits stopped at [`CANDIDATE_CAP`]: there may be
    /// more matches than the hits hold (the response then says so).
    pub capped: bool,
}

impl Hits {
    fn dedup(mut self) -> Hits {
        let mut seen = HashSet::new();
        self.nodes.retain(|n| seen.insert(n.rowid));
        let mut seen_refs = HashSet::new();
        self.refs.retain(|r| seen_refs.insert(ref_key(r)));
        self
    }
}

/// What makes two reference records the same reference. Not the start
/// byte alone: in `x.strip().split()` both calls start at `x`.
fn ref_key(r: &RefRecord) -> (String, usize, usize, String, String) {
    (
        r.file_path.clone(),
        r.start_byte,
        r.end_byte,
        r.name.clone(),
        r.ref_type.clone(),
    )
}

/// Evaluates expressions against one store.
pub(crate) struct Evaluator<'a> {
    pub store: &'a Store,
    /// The files an enclosing `in-file` restricts the searches to; text and
    /// reference searches run inside it, so the cap never drops a match in
    /// scope for one out of scope.
    pub scope: Option<FileScope>,
    /// Set when a text search fell to its prefix tier (no unit in scope
    /// held any of its words whole), so the answer can say so. Shared with
    /// the scoped evaluators [`Evaluator::within`] makes.
    prefixed: Rc<Cell<bool>>,
}

/// Builds an FTS5 expression from free text: quoted phrases, `word*`
/// prefixes, every other word whole. `None` when the text has no words.
pub fn fts_expression(text: &str, all: bool) -> Option<String> {
    fts_expression_with(text, all, false)
}

/// `QueryResult::match_note` of an answer found by the prefix tier.
fn prefix_note() -> String {
    "no unit holds the searched words whole: these units hold words that start with them \
     (as `word*` would match); put a word in double quotes to match it whole only"
        .to_string()
}

/// Shortest word [`prefix_expression`] turns into a prefix: a shorter one
/// would match a large share of the vocabulary and say little.
const MIN_PREFIX_CHARS: usize = 3;

/// [`fts_expression`] with every whole word of at least
/// [`MIN_PREFIX_CHARS`] characters outside quotes made a prefix: the last
/// tier of a text search, for words that are the start of an indexed
/// identifier but not a whole word of it (`batch_probe` for
/// `batch_probe_1_fn`: identifiers are indexed whole and by their parts,
/// not by other prefixes). `None` when that changes nothing.
fn prefix_expression(text: &str, all: bool) -> Option<String> {
    let prefixed = fts_expression_with(text, all, true)?;
    (Some(&prefixed) != fts_expression(text, all).as_ref()).then_some(prefixed)
}

fn fts_expression_with(text: &str, all: bool, every_word_a_prefix: bool) -> Option<String> {
    let mut clauses = Vec::new();
    let mut rest = String::new();
    // Quoted phrases first.
    let mut in_quote = false;
    let mut current = String::new();
    for c in text.chars() {
        if c == '"' {
            if in_quote {
                let words = crate::text::query_terms(&current);
                if !words.is_empty() {
                    let phrase: Vec<String> = words.iter().map(|w| fts_quote(w)).collect();
                    clauses.push(phrase.join(" + "));
                }
                current.clear();
            }
            in_quote = !in_quote;
        } else if in_quote {
            current.push(c);
        } else {
            rest.push(c);
        }
    }
    rest.push(' ');
    rest.push_str(&current); // an unbalanced quote is plain text
    for raw in rest.split_whitespace() {
        let prefix = raw.ends_with('*');
        let words = crate::text::query_terms(raw);
        let n = words.len();
        for (i, w) in words.into_iter().enumerate() {
            let long_enough = w.chars().count() >= MIN_PREFIX_CHARS;
            if (prefix && i + 1 == n) || (every_word_a_prefix && long_enough) {
                clauses.push(format!("{}*", fts_quote(&w)));
            } else {
                clauses.push(fts_quote(&w));
            }
        }
    }
    clauses.sort();
    clauses.dedup();
    if clauses.is_empty() {
        return None;
    }
    Some(clauses.join(if all { " AND " } else { " OR " }))
}

/// The texts of an intersection made only of text searches (`match = all`).
fn all_text(items: &[Expr]) -> Option<Vec<&str>> {
    items
        .iter()
        .map(|e| match e {
            Expr::Grep(text) => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

/// A text-only query (`pattern`, `patterns` with `match = all`, either under
/// a glob): its texts and glob. These are answered with an exact count and
/// only the returned page loaded.
fn text_only(expr: &Expr) -> Option<(Vec<&str>, Option<&str>)> {
    match expr {
        Expr::Grep(text) => Some((vec![text.as_str()], None)),
        Expr::Intersect(items) => all_text(items).map(|t| (t, None)),
        Expr::InFile(glob, inner) => match text_only(inner)? {
            (texts, None) => Some((texts, Some(glob.as_str()))),
            _ => None,
        },
        _ => None,
    }
}

/// Splits `Type.method`, `Type::method`, `pkg/mod.func` into (qualifier, name).
fn split_qualified(symbol: &str) -> (Option<String>, String) {
    let normalized = symbol.trim().replace("::", ".");
    match normalized.rsplit_once('.') {
        Some((q, n)) if !q.is_empty() && !n.is_empty() => (Some(q.to_string()), n.to_string()),
        _ => (None, normalized),
    }
}

fn qualifier_matches(node: &NodeRecord, qualifier: &str) -> bool {
    let q = qualifier.to_lowercase();
    let parent_q = node
        .qualified_name
        .as_deref()
        .and_then(|qn| qn.rsplit_once('.').map(|(p, _)| p.to_lowercase()));
    if parent_q
        .as_deref()
        .is_some_and(|p| p == q || p.ends_with(&format!(".{q}")))
    {
        return true;
    }
    // `module.func`: the file stem (or its directory for index files) names the module.
    let path = node.file_path.to_lowercase();
    let module = q.replace('.', "/");
    let stem = path.rsplit_once('.').map_or(path.as_str(), |(s, _)| s);
    stem == module
        || stem.ends_with(&format!("/{module}"))
        || stem.ends_with(&format!("{module}/__init__"))
        || stem.ends_with(&format!("{module}/mod"))
        || stem.ends_with(&format!("{module}/index"))
}

fn is_symbol_type(node_type: &str) -> bool {
    NodeType::from_name(node_type).is_some_and(NodeType::is_symbol)
}

impl Evaluator<'_> {
    pub fn eval(&self, expr: &Expr) -> Result<Hits> {
        Ok(match expr {
            Expr::Grep(text) => self.grep(text)?,
            Expr::Code(name) => self.node_hits(self.symbols(name, false)?),
            Expr::Definition(name) => self.node_hits(self.symbols(name, true)?),
            Expr::References(name) => self.references(name)?,
            Expr::Section(heading) => self.node_hits(self.sections(heading)?),
            Expr::File(path) => {
                check_relative(path)?;
                let path = path.trim_start_matches("./");
                self.node_hits(self.store.file_node(path)?.into_iter().collect())
            }
            Expr::Children(parent) => self.node_hits(self.children(parent)?),
            Expr::ChildrenNamed(parent, child) => {
                let children = self.children(parent)?;
                self.node_hits(rank_by_name(children, child))
            }
            Expr::InFile(glob, inner) => {
                let filter = PathFilter::new(glob)?;
                let mut hits = self.within(&filter)?.eval(inner)?;
                // Searches that are not scoped in SQL (names, sections) are
                // filtered here.
                hits.nodes.retain(|n| filter.is_match(&n.file_path));
                hits.refs.retain(|r| filter.is_match(&r.file_path));
                hits
            }
            Expr::Union(items) => self.union(items)?,
            Expr::Intersect(items) if all_text(items).is_some() => {
                // One search for the conjunction: intersecting capped
                // per-pattern candidate lists would lose matches.
                let texts = all_text(items).unwrap_or_default();
                self.grep_all(&texts)?
            }
            Expr::Intersect(items) => self.intersect(items)?,
            Expr::Limit(n, inner) => {
                let mut hits = self.eval(inner)?;
                hits.nodes.truncate(*n);
                hits.refs.truncate(*n);
                hits
            }
        })
    }

    /// References to a name; `a.b` keeps those whose qualifier ends in `a`.
    fn references(&self, name: &str) -> Result<Hits> {
        let (qualifier, bare) = split_qualified(name);
        let mut refs = self
            .store
            .refs_by_name(&bare, CANDIDATE_CAP, self.scope.as_ref())?;
        let capped = refs.len() >= CANDIDATE_CAP;
        if let Some(q) = qualifier {
            let q = q.to_lowercase();
            let last = q.rsplit('.').next().unwrap_or(&q).to_string();
            refs.retain(|r| {
                r.qualifier.as_deref().is_some_and(|rq| {
                    let rq = rq.to_lowercase().replace("::", ".");
                    rq == q || rq.ends_with(&format!(".{last}")) || rq == last
                })
            });
        }
        // Exact-case names first, then by path and position (already ordered).
        refs.sort_by_key(|r| r.name != bare);
        Ok(Hits {
            nodes: vec![],
            refs,
            capped,
        })
    }

    /// Every sub-query's hits, interleaved so each one's best come early.
    fn union(&self, items: &[Expr]) -> Result<Hits> {
        let parts: Vec<Hits> = items.iter().map(|e| self.eval(e)).collect::<Result<_>>()?;
        let mut out = Hits {
            capped: parts.iter().any(|p| p.capped),
            ..Hits::default()
        };
        let longest = parts
            .iter()
            .map(|h| h.nodes.len().max(h.refs.len()))
            .max()
            .unwrap_or(0);
        for i in 0..longest {
            for part in &parts {
                if let Some(n) = part.nodes.get(i) {
                    out.nodes.push(n.clone());
                }
                if let Some(r) = part.refs.get(i) {
                    out.refs.push(r.clone());
                }
            }
        }
        Ok(out.dedup())
    }

    /// The first sub-query's hits that every other sub-query also has (a
    /// reference counts when its enclosing unit or the reference itself is
    /// in each).
    fn intersect(&self, items: &[Expr]) -> Result<Hits> {
        let mut parts = items
            .iter()
            .map(|e| self.eval(e))
            .collect::<Result<Vec<_>>>()?;
        let capped = parts.iter().any(|p| p.capped);
        let first = parts.remove(0);
        let capped = capped || first.capped;
        let node_sets: Vec<HashSet<i64>> = parts
            .iter()
            .filter(|p| !p.nodes.is_empty() || p.refs.is_empty())
            .map(|p| p.nodes.iter().map(|n| n.rowid).collect())
            .collect();
        let handle_sets: Vec<HashSet<&str>> = parts
            .iter()
            .filter(|p| !p.nodes.is_empty() || p.refs.is_empty())
            .map(|p| p.nodes.iter().map(|n| n.handle.as_str()).collect())
            .collect();
        let ref_sets: Vec<HashSet<_>> = parts
            .iter()
            .filter(|p| !p.refs.is_empty())
            .map(|p| p.refs.iter().map(ref_key).collect())
            .collect();
        let nodes = first
            .nodes
            .into_iter()
            .filter(|n| node_sets.iter().all(|s| s.contains(&n.rowid)))
            .collect();
        let refs = first
            .refs
            .into_iter()
            .filter(|r| {
                handle_sets
                    .iter()
                    .all(|s| s.contains(r.source_handle.as_str()))
                    && ref_sets.iter().all(|s| s.contains(&ref_key(r)))
            })
            .collect();
        Ok(Hits {
            nodes,
            refs,
            capped,
        })
    }

    /// Hits made of units, capped when the list reached [`CANDIDATE_CAP`].
    fn node_hits(&self, nodes: Vec<NodeRecord>) -> Hits {
        Hits {
            capped: nodes.len() >= CANDIDATE_CAP,
            nodes,
            refs: vec![],
        }
    }

    /// An evaluator for the part of the repository `filter` selects (within
    /// this one's scope).
    fn within(&self, filter: &PathFilter) -> Result<Evaluator<'_>> {
        let scope = self.store.file_scope(|path| filter.is_match(path))?;
        let scope = match &self.scope {
            Some(outer) => outer.intersect(&scope),
            None => scope,
        };
        Ok(Evaluator {
            store: self.store,
            scope: Some(scope),
            prefixed: Rc::clone(&self.prefixed),
        })
    }

    /// An evaluator over the whole store.
    pub(crate) fn new<'s>(store: &'s Store) -> Evaluator<'s> {
        Evaluator {
            store,
            scope: None,
            prefixed: Rc::default(),
        }
    }

    /// Whether some text search of this evaluator (or of one it scoped)
    /// matched its words as prefixes.
    pub(crate) fn matched_prefixes(&self) -> bool {
        self.prefixed.get()
    }

    /// The FTS expression for units matching every text in `texts`: each
    /// text's words all together, or, for a text no unit in scope matches
    /// whole, any of its words. `None` when a text has no words.
    fn text_match(&self, texts: &[&str]) -> Result<Option<String>> {
        let mut clauses = Vec::with_capacity(texts.len());
        for text in texts {
            let Some(all) = fts_expression(text, true) else {
                return Ok(None);
            };
            // Tiers, each tried only when the one before matches nothing in
            // scope: every word, any word, then the same with the words as
            // prefixes.
            let tiers = [
                fts_expression(text, false),
                prefix_expression(text, true),
                prefix_expression(text, false),
            ];
            let mut clause = all;
            let mut clause_has_prefixes = false;
            for (tier, expression) in tiers.into_iter().enumerate() {
                let Some(expression) = expression else {
                    continue;
                };
                if expression != clause {
                    if self.store.fts_count(&clause, self.scope.as_ref())? > 0 {
                        break;
                    }
                    clause = expression;
                    clause_has_prefixes = tier >= 1;
                }
            }
            if clause_has_prefixes {
                self.prefixed.set(true);
            }
            clauses.push(clause);
        }
        Ok(match clauses.len() {
            0 => None,
            1 => clauses.pop(),
            _ => Some(
                clauses
                    .iter()
                    .map(|c| format!("({c})"))
                    .collect::<Vec<_>>()
                    .join(" AND "),
            ),
        })
    }

    fn grep(&self, text: &str) -> Result<Hits> {
        self.grep_all(&[text])
    }

    /// Units matching every text (`match = all`), searched as one
    /// conjunction within the scope.
    fn grep_all(&self, texts: &[&str]) -> Result<Hits> {
        let Some(expr) = self.text_match(texts)? else {
            return Ok(Hits::default());
        };
        let nodes = self
            .store
            .fts_search(&expr, CANDIDATE_CAP, self.scope.as_ref())?;
        Ok(self.node_hits(nodes))
    }

    /// The best `top` units for a text search and the true number of
    /// matches, for a search that nothing filters afterwards. Ranking all
    /// matches is unavoidable, but only `top` of them are loaded; the count
    /// does not rank. Same order as [`Evaluator::grep_all`].
    fn grep_top(&self, texts: &[&str], top: usize) -> Result<(Vec<NodeRecord>, usize)> {
        let Some(expr) = self.text_match(texts)? else {
            return Ok((vec![], 0));
        };
        let total = self.store.fts_count(&expr, self.scope.as_ref())?;
        if total == 0 {
            return Ok((vec![], 0));
        }
        Ok((
            self.store.fts_search(&expr, top, self.scope.as_ref())?,
            total as usize,
        ))
    }

    fn symbols(&self, symbol: &str, exact_only: bool) -> Result<Vec<NodeRecord>> {
        let (qualifier, name) = split_qualified(symbol);
        if name.is_empty() {
            return Ok(vec![]);
        }
        let keep = |n: &NodeRecord| {
            is_symbol_type(&n.node_type)
                && qualifier.as_deref().is_none_or(|q| qualifier_matches(n, q))
        };
        let mut equal: Vec<NodeRecord> = self
            .store
            .nodes_by_name(&name, NameMatch::Equal, CANDIDATE_CAP)?
            .into_iter()
            .filter(|n| keep(n))
            .collect();
        // Exact case before other cases; definitions of types before impl blocks.
        equal.sort_by_key(|n| {
            (
                n.name.as_deref() != Some(name.as_str()),
                n.node_type == "impl",
            )
        });
        if exact_only {
            return Ok(equal);
        }
        let mut out = equal;
        for how in [NameMatch::Prefix, NameMatch::Substring] {
            // A substring match scans every name; it is only worth it when the
            // closer tiers leave room in the largest page a caller can ask for.
            let enough = if how == NameMatch::Substring {
                MAX_LIMIT
            } else {
                CANDIDATE_CAP
            };
            if out.len() >= enough {
                break;
            }
            let mut more: Vec<NodeRecord> = self
                .store
                .nodes_by_name(&name, how, CANDIDATE_CAP)?
                .into_iter()
                .filter(|n| keep(n))
                .collect();
            // Shorter names are closer matches.
            more.sort_by_key(|n| n.name.as_ref().map_or(usize::MAX, |s| s.len()));
            out.extend(more);
        }
        Ok(out)
    }

    fn sections(&self, heading: &str) -> Result<Vec<NodeRecord>> {
        // "Guide > Install" matches by the last heading, then filters by the path.
        let parts: Vec<&str> = heading
            .split('>')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect();
        let Some(last) = parts.last() else {
            return Ok(vec![]);
        };
        let mut out = Vec::new();
        for how in [NameMatch::Equal, NameMatch::Prefix, NameMatch::Substring] {
            out.extend(
                self.store
                    .nodes_by_name(last, how, CANDIDATE_CAP)?
                    .into_iter()
                    .filter(|n| n.node_type == NodeType::Section.as_str())
                    .filter(|n| {
                        parts.len() < 2
                            || n.qualified_name.as_deref().is_some_and(|q| {
                                q.to_lowercase()
                                    .contains(&parts[..parts.len() - 1].join(" > ").to_lowercase())
                            })
                    }),
            );
        }
        Ok(out)
    }

    fn children(&self, parent: &str) -> Result<Vec<NodeRecord>> {
        let (qualifier, name) = split_qualified(parent);
        let parents: Vec<i64> = self
            .store
            .nodes_by_name(&name, NameMatch::Equal, CANDIDATE_CAP)?
            .into_iter()
            .filter(|n| n.node_type != NodeType::File.as_str())
            .filter(|n| qualifier.as_deref().is_none_or(|q| qualifier_matches(n, q)))
            .map(|n| n.rowid)
            .collect();
        if parents.is_empty() {
            return Ok(vec![]);
        }
        let mut children = self.store.children_of(&parents)?;
        children.retain(|n| n.node_type != NodeType::Chunk.as_str());
        Ok(children)
    }
}

/// Children matching `child`: exact case, other case, prefix, substring.
fn rank_by_name(nodes: Vec<NodeRecord>, child: &str) -> Vec<NodeRecord> {
    let lower = child.to_lowercase();
    let mut ranked: Vec<(u8, NodeRecord)> = nodes
        .into_iter()
        .filter_map(|n| {
            let name = n.name.clone()?;
            let l = name.to_lowercase();
            let tier = if name == child {
                0
            } else if l == lower {
                1
            } else if l.starts_with(&lower) {
                2
            } else if l.contains(&lower) {
                3
            } else {
                return None;
            };
            Some((tier, n))
        })
        .collect();
    ranked.sort_by_key(|(t, _)| *t);
    ranked.into_iter().map(|(_, n)| n).collect()
}

/// Builds handle previews from the files on disk (the index stores only
/// where a preview starts). Each file is read and hash-checked once per
/// response; a file that changed since indexing gets a preview from the
/// index alone (the unit's qualified name), never text from the wrong place.
/// Longest pack-handle signature line, in bytes (about 20 tokens).
pub(crate) const SIGNATURE_BYTES: usize = 72;

pub(crate) struct Previews<'a> {
    snapshot: Snapshot<'a>,
    texts: HashMap<String, Option<String>>,
}

impl<'a> Previews<'a> {
    pub(crate) fn new(snapshot: Snapshot<'a>) -> Previews<'a> {
        Previews {
            snapshot,
            texts: HashMap::new(),
        }
    }

    /// Files read for this answer whose content no longer has the indexed
    /// hash (changed, deleted or unreadable), sorted.
    pub(crate) fn stale_paths(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .texts
            .iter()
            .filter(|(_, t)| t.is_none())
            .map(|(p, _)| p.clone())
            .collect();
        out.sort();
        out
    }

    /// Whether the file still has the indexed content (read once).
    pub(crate) fn is_fresh(&mut self, path: &str, content_hash: &str) -> bool {
        self.file_text(path, content_hash).is_some()
    }

    /// Files read for this answer.
    pub(crate) fn checked_files(&self) -> usize {
        self.texts.len()
    }

    /// The text view of a file, if it still has the indexed hash (read once).
    fn file_text(&mut self, path: &str, content_hash: &str) -> Option<&str> {
        let snapshot = self.snapshot;
        self.texts
            .entry(path.to_string())
            .or_insert_with(|| {
                snapshot
                    .read_verified(path, content_hash)
                    .ok()
                    .map(|bytes| crate::lang::extract::text_view(&bytes))
            })
            .as_deref()
    }

    /// The unit's first line from its signature, whitespace-collapsed and
    /// cut to [`SIGNATURE_BYTES`] (`…` marks a cut); its qualified name when
    /// the file changed since indexing.
    pub(crate) fn signature(&mut self, n: &NodeRecord) -> String {
        let fallback = || {
            n.qualified_name
                .clone()
                .unwrap_or_else(|| n.node_type.clone())
        };
        let Some(text) = self.file_text(&n.file_path, &n.content_hash) else {
            return fallback();
        };
        let end = n.end_byte.min(text.len());
        let Some(start) = (n.preview_start.min(end)..=end).find(|&s| text.is_char_boundary(s))
        else {
            return fallback();
        };
        let body = &text[start..end];
        let line = body
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .unwrap_or("");
        let mut line = line.split_whitespace().collect::<Vec<_>>().join(" ");
        if line.len() > SIGNATURE_BYTES {
            let cut = (0..=SIGNATURE_BYTES)
                .rev()
                .find(|&i| line.is_char_boundary(i))
                .unwrap_or(0);
            line.truncate(cut);
            line.push('…');
        }
        line
    }

    fn preview(&mut self, n: &NodeRecord) -> String {
        match self.file_text(&n.file_path, &n.content_hash) {
            Some(text) => crate::lang::extract::preview_text(text, n.preview_start, n.end_byte),
            None => n
                .qualified_name
                .clone()
                .unwrap_or_else(|| n.node_type.clone()),
        }
    }
}

pub(crate) fn to_handle(n: &NodeRecord, previews: &mut Previews) -> Handle {
    let stale = previews.file_text(&n.file_path, &n.content_hash).is_none();
    n.to_handle(previews.preview(n), stale)
}

/// A query's answer, plus the ranked candidates the engine keeps as a
/// result set when the caller asked for one (`result_set: true`).
pub(crate) struct Executed {
    /// The answer.
    pub(crate) result: QueryResult,
    /// Candidates to keep (the engine stores them and sets `result_set`).
    pub(crate) keep: Option<Vec<NodeRecord>>,
}

/// Runs a query and shapes the response.
pub(crate) fn execute(snapshot: Snapshot<'_>, params: &QueryParams) -> Result<Executed> {
    let store = snapshot.store();
    let expr = params.to_expr()?;
    let kind = params.kind.unwrap_or_default();
    let limit = params.effective_limit();
    let evaluator = Evaluator::new(store);
    let mut previews = Previews::new(snapshot);
    let mut keep = None;
    // A text search (under a glob or not) loads only the page it returns
    // and counts the rest exactly; everything else goes through `eval`.
    if let Some((texts, glob)) = text_only(&expr)
        && kind != QueryKind::Definition
        && params.result_set != Some(true)
    {
        let scoped;
        let evaluator = match glob {
            Some(glob) => {
                scoped = evaluator.within(&PathFilter::new(glob)?)?;
                &scoped
            }
            None => &evaluator,
        };
        let (nodes, total) = evaluator.grep_top(&texts, limit)?;
        let mut result = QueryResult {
            total_matches: total,
            truncated: total > nodes.len(),
            handles: nodes.iter().map(|n| to_handle(n, &mut previews)).collect(),
            match_note: (evaluator.matched_prefixes() && !nodes.is_empty()).then(prefix_note),
            ..Default::default()
        };
        result.freshness = Some(freshness(store, &previews)?);
        return Ok(Executed {
            result: finish(snapshot, params, result)?,
            keep,
        });
    }
    // Likewise a bare reference lookup (no qualifier, no parent): the page
    // comes from the name index, the total from a count.
    let plain_refs = match &expr {
        Expr::References(name) if params.parent.as_deref().is_none_or(|p| p.trim().is_empty()) => {
            match split_qualified(name) {
                (None, bare) => Some(bare),
                _ => None,
            }
        }
        _ => None,
    };
    let (mut hits, refs_total) = match plain_refs {
        Some(name) => {
            let (refs, total) = store.refs_top(&name, limit)?;
            (
                Hits {
                    nodes: vec![],
                    refs,
                    capped: false,
                },
                Some(total as usize),
            )
        }
        None => (evaluator.eval(&expr)?.dedup(), None),
    };
    if kind == QueryKind::Definition {
        hits.nodes
            .retain(|n| is_symbol_type(&n.node_type) || n.node_type == NodeType::Section.as_str());
    }
    let mut result = QueryResult::default();
    // `(references …)` in the DSL yields references whatever `kind` says.
    if kind == QueryKind::Reference || !hits.refs.is_empty() {
        reference_answer(
            store,
            params,
            &mut hits,
            refs_total,
            limit,
            &mut previews,
            &mut result,
        )?;
    } else {
        result.total_matches = hits.nodes.len();
        result.truncated = hits.nodes.len() > limit;
        if params.result_set == Some(true) {
            keep = Some(hits.nodes.clone());
        }
        hits.nodes.truncate(limit);
        result.handles = hits
            .nodes
            .iter()
            .map(|n| to_handle(n, &mut previews))
            .collect();
    }
    let answered =
        !result.handles.is_empty() || result.ref_handles.as_ref().is_some_and(|r| !r.is_empty());
    result.match_note = (evaluator.matched_prefixes() && answered).then(prefix_note);
    if hits.capped {
        // Some search stopped at its cap: say so rather than present a
        // lower bound as the total.
        result.truncated = true;
        result.candidates_capped = true;
    }
    result.freshness = Some(freshness(store, &previews)?);
    Ok(Executed {
        result: finish(snapshot, params, result)?,
        keep,
    })
}

/// The answer of a reference query: the references of the page (kept to
/// those inside `parent` when given) with a preview line each, then any unit
/// hits, then the units enclosing the references, so callers can be
/// expanded directly.
fn reference_answer(
    store: &Store,
    params: &QueryParams,
    hits: &mut Hits,
    refs_total: Option<usize>,
    limit: usize,
    previews: &mut Previews<'_>,
    result: &mut QueryResult,
) -> Result<()> {
    if let Some(parent) = params.parent.as_deref().filter(|p| !p.trim().is_empty()) {
        let (_, pname) = split_qualified(parent);
        let pname = pname.to_lowercase();
        hits.refs.retain(|r| {
            r.source_qualified_name.as_deref().is_some_and(|q| {
                q.to_lowercase()
                    .replace("::", ".")
                    .split('.')
                    .any(|seg| seg == pname)
            })
        });
    }
    result.total_matches = refs_total.unwrap_or(hits.refs.len());
    result.truncated = result.total_matches > limit;
    hits.refs.truncate(limit);
    let mut ref_handles = Vec::with_capacity(hits.refs.len());
    let mut sources: Vec<String> = Vec::new();
    for r in &hits.refs {
        // The same file reads serve the enclosing units' previews below.
        let preview = previews
            .file_text(&r.file_path, &r.content_hash)
            .map(|text| line_at(text.as_bytes(), r.start_byte))
            .unwrap_or_default();
        if !sources.contains(&r.source_handle) {
            sources.push(r.source_handle.clone());
        }
        ref_handles.push(RefHandle {
            file_path: r.file_path.clone(),
            span: Span {
                start: r.start_byte,
                end: r.end_byte,
            },
            line_range: [r.line, r.line],
            name: r.name.clone(),
            qualifier: r.qualifier.clone(),
            ref_type: r.ref_type.clone(),
            source_handle: HandleId::parse(&r.source_handle).ok_or_else(|| {
                CanopyError::Internal(format!("bad stored handle {}", r.source_handle))
            })?,
            preview,
        });
    }
    // Any unit hits (from a DSL union), then the enclosing units of the
    // references.
    hits.nodes.truncate(limit);
    result.total_matches += hits.nodes.len();
    result.handles = hits.nodes.iter().map(|n| to_handle(n, previews)).collect();
    for s in &sources {
        if result.handles.iter().any(|h| h.id.as_str() == s.as_str()) {
            continue;
        }
        if let Some(n) = store.node_by_handle(s)? {
            result.handles.push(to_handle(&n, previews));
        }
    }
    result.ref_handles = Some(ref_handles);
    Ok(())
}

/// The freshness block of an answer whose files `previews` read.
pub(crate) fn freshness(store: &Store, previews: &Previews) -> Result<crate::model::Freshness> {
    freshness_of(store, previews.stale_paths(), previews.checked_files())
}

/// The freshness block of an answer that checked `checked` files against
/// the disk and found `stale` (sorted) changed since indexing.
pub(crate) fn freshness_of(
    store: &Store,
    stale: Vec<String>,
    checked: usize,
) -> Result<crate::model::Freshness> {
    Ok(crate::model::Freshness {
        generation: store.generation()?,
        indexed_at: store.indexed_at()?,
        stale_files: stale.len(),
        stale_paths: stale.into_iter().take(20).collect(),
        checked_files: checked,
    })
}

/// Totals the handles' tokens and applies `expand_budget`.
fn finish(
    snapshot: Snapshot<'_>,
    params: &QueryParams,
    mut result: QueryResult,
) -> Result<QueryResult> {
    result.total_tokens = result
        .handles
        .iter()
        .map(|h| u64::from(h.token_count))
        .sum();
    let budget = params.expand_budget.unwrap_or(0);
    if budget > 0 {
        auto_expand(snapshot, &mut result, budget)?;
    }
    Ok(result)
}

/// Expands handles in rank order while their tokens fit the budget.
fn auto_expand(snapshot: Snapshot<'_>, result: &mut QueryResult, budget: u64) -> Result<()> {
    let mut used = 0u64;
    let mut skipped = false;
    for handle in result.handles.iter_mut() {
        let cost = u64::from(handle.token_count);
        if used + cost > budget {
            skipped = true;
            continue;
        }
        let expansion = snapshot.expand(&[handle.id.as_str()])?;
        if let Some(e) = expansion.into_iter().next() {
            handle.content = Some(e.content);
            used += cost;
            result.expanded_handle_ids.push(handle.id.clone());
        }
    }
    result.auto_expanded = !result.handles.is_empty() && !skipped;
    if skipped {
        result.expand_note = Some(format!(
            "Results exceed expand_budget ({budget} tokens; {used} used). Expand specific handles."
        ));
    }
    Ok(())
}

/// The whitespace-collapsed line containing `byte`.
fn line_at(bytes: &[u8], byte: usize) -> String {
    let byte = byte.min(bytes.len());
    let start = bytes[..byte]
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    let end = bytes[byte..]
        .iter()
        .position(|&b| b == b'\n')
        .map_or(bytes.len(), |i| byte + i);
    collapse_preview(&String::from_utf8_lossy(&bytes[start..end]), 160)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fts_expressions_quote_everything() {
        assert_eq!(
            fts_expression("self.path", true).unwrap(),
            "\"path\" AND \"self\""
        );
        assert_eq!(
            fts_expression("NEAR ( AND *", true).unwrap(),
            "\"and\" AND \"near\""
        );
        assert_eq!(fts_expression("pars*", true).unwrap(), "\"pars\"*");
        assert_eq!(
            fts_expression("\"hello world\" x", true).unwrap(),
            "\"hello\" + \"world\" AND \"x\""
        );
        assert!(fts_expression("🎉 ( ) \"", true).is_none());
    }

    #[test]
    fn prefix_tier_makes_long_words_prefixes_and_keeps_phrases() {
        assert_eq!(
            prefix_expression("batch_probe of", true).unwrap(),
            "\"batch_probe\"* AND \"of\""
        );
        assert_eq!(
            prefix_expression("\"hello world\" parse", false).unwrap(),
            "\"hello\" + \"world\" OR \"parse\"*"
        );
        // Nothing to make a prefix: no tier.
        assert!(prefix_expression("a bc pars*", true).is_none());
    }

    #[test]
    fn qualified_symbols_split() {
        assert_eq!(
            split_qualified("Type::method"),
            (Some("Type".into()), "method".into())
        );
        assert_eq!(split_qualified("a.b.c"), (Some("a.b".into()), "c".into()));
        assert_eq!(split_qualified("plain"), (None, "plain".into()));
    }

    #[test]
    fn params_need_a_search_parameter() {
        let err = QueryParams::default().validate().unwrap_err();
        assert!(matches!(err, CanopyError::Validation(_)));
        let p = QueryParams {
            pattern: Some("  ".into()),
            ..Default::default()
        };
        assert!(p.validate().is_err());
        let p = QueryParams {
            symbol: Some("x".into()),
            glob: Some("src/[".into()),
            ..Default::default()
        };
        assert!(matches!(
            p.validate().unwrap_err(),
            CanopyError::GlobPattern { .. }
        ));
    }
}
