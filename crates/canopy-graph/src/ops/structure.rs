//! Structure of the source around a unit, without edges: the scope chain
//! at a position, and a unit's detail (signature, parameters, use
//! counts, members).

use crate::error::Result;
use crate::handle::HandleId;
use crate::nav::{Empty, Graph, GraphAnswer, MAX_RESULTS};
use crate::store::read::NodeRecord;

/// The declaration of a unit up to its body: from the line its name is on,
/// until a line that opens the body (`{`, `:`, `=>`, `=`) or 5 lines.
pub fn signature_of(text: &str, n: &NodeRecord) -> String {
    let start = n.preview_start.min(text.len());
    let end = n.end_byte.min(text.len()).max(start);
    let mut out = Vec::new();
    for line in text[start..end].lines().take(5) {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        out.push(line.to_string());
        if line.ends_with('{') || line.ends_with(':') || line.ends_with("=>") || line.ends_with('=')
        {
            break;
        }
    }
    let joined = out.join(" ");
    let collapsed: Vec<&str> = joined.split_whitespace().collect();
    let mut sig = collapsed.join(" ");
    for body in [" {", "{"] {
        if let Some(stripped) = sig.strip_suffix(body) {
            sig = stripped.to_string();
            break;
        }
    }
    sig
}

/// The comma-separated items inside the signature's first parentheses
/// (nested brackets kept together).
pub(super) fn parameters_of(signature: &str) -> Vec<String> {
    let Some(open) = signature.find('(') else {
        return Vec::new();
    };
    let mut depth = 0i32;
    let mut current = String::new();
    let mut out = Vec::new();
    let mut prev = ' ';
    for c in signature[open + 1..].chars() {
        // `->` and `=>` are arrows, not closing angle brackets.
        let arrow = c == '>' && matches!(prev, '-' | '=');
        prev = c;
        match c {
            '(' | '[' | '{' | '<' => depth += 1,
            ')' if depth == 0 => break,
            '>' if arrow => {}
            ')' | ']' | '}' | '>' => depth -= 1,
            ',' if depth == 0 => {
                out.push(std::mem::take(&mut current));
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    out.push(current);
    out.into_iter()
        .map(|p| p.trim().to_string())
        .filter(|p| !p.is_empty())
        .collect()
}

impl Graph<'_> {
    /// A node related to the answer's target by structure (enclosing scope,
    /// member), not by a resolved edge: certain, with `edge_kind` = `how` = `kind`.
    fn structural_node(
        &self,
        n: &NodeRecord,
        depth: u32,
        kind: &str,
        parent: Option<HandleId>,
    ) -> crate::nav::GraphNode {
        crate::nav::GraphNode {
            handle: self.handle(n),
            qualified_name: n.qualified_name.clone(),
            depth,
            edge_kind: kind.into(),
            confidence: 100,
            status: "resolved".into(),
            how: kind.into(),
            guess: false,
            sites: Vec::new(),
            sites_total: 0,
            parent,
        }
    }

    /// The scope chain at `path:line[:col]`: the file, then every unit
    /// enclosing the line, outermost first (`depth` is the nesting level);
    /// `target` is the innermost.
    pub fn scope(&self, path: &str, line: u32) -> Result<GraphAnswer> {
        let mut a = self.answer("scope");
        let Some(file) = self.store.file_node(path)? else {
            a.empty = Some(Empty::TargetNotFound);
            return Ok(a);
        };
        let (lo, hi) = self.store.file_node_range(path)?;
        let mut chain = self.store.nodes_by_rowids(&(lo..=hi).collect::<Vec<_>>())?;
        chain.retain(|n| {
            n.rowid != file.rowid && n.name.is_some() && n.start_line <= line && line <= n.end_line
        });
        chain.sort_by_key(|n| (n.start_byte, std::cmp::Reverse(n.end_byte)));
        let innermost = chain.last().cloned().unwrap_or_else(|| file.clone());
        a.target = Some(self.handle(&innermost));
        a.nodes.push(self.structural_node(&file, 0, "scope", None));
        for (i, n) in chain.iter().enumerate() {
            a.nodes
                .push(self.structural_node(n, i as u32 + 1, "scope", None));
        }
        a.total = a.nodes.len();
        Ok(a)
    }

    /// A unit in detail: signature, parameters, use counts, and its named
    /// members as `nodes` (`edge_kind: "member"`).
    pub fn detail(&self, target: &str, max_results: usize) -> Result<GraphAnswer> {
        let (mut a, node) = self.with_target("detail", target)?;
        let Some(node) = node else {
            return Ok(a);
        };
        let signature = self
            .file_text(&node.file_path, &node.content_hash)
            .map(|t| signature_of(&t, &node))
            .unwrap_or_else(|| node.qualified_name.clone().unwrap_or_default());
        // Only callables have parameters (a class's parentheses hold bases).
        let callable = matches!(
            node.node_type.as_str(),
            "function" | "method" | "arrow_function" | "constructor"
        );
        let parameters = if callable {
            parameters_of(&signature)
        } else {
            Vec::new()
        };
        let mut members = self.store.children_of(&[node.rowid])?;
        members.retain(|m| m.name.is_some());
        // The counts are the lengths of what `callers`, `callees` and
        // `references` list for the unit at depth 1 (one source of truth:
        // those answers themselves), so the two never disagree.
        let counted = |answer: &GraphAnswer| {
            let guesses = answer.nodes.iter().filter(|n| n.guess).count();
            (answer.total, guesses)
        };
        let (callers, _) = counted(&self.callers(target, 1, MAX_RESULTS)?);
        let (callees, callee_guesses) = counted(&self.callees(target, 1, MAX_RESULTS)?);
        // `references` holds the callers too, so their guesses count once.
        let (references, reference_guesses) = counted(&self.references(target, MAX_RESULTS)?);
        let guesses = callee_guesses + reference_guesses;
        a.total = members.len();
        a.truncated = members.len() > max_results;
        for m in members.iter().take(max_results) {
            let parent = HandleId::parse(&node.handle);
            a.nodes.push(self.structural_node(m, 1, "member", parent));
        }
        a.detail = Some(crate::nav::UnitDetail {
            signature,
            parameters,
            members: members.len(),
            callers,
            callees,
            references,
            guesses,
        });
        Ok(a)
    }
}
