//! `canopy_context` as an agent receives it (issue 31): the tokens of the
//! MCP content blocks, of the HTTP text body and of the CLI's stdout stay
//! within `budget_tokens` for every budget × strategy × focus; an explicit
//! focus comes first even when its name shares no word with the task; two
//! fresh indexes of the same tree give byte-identical packs.
//!
//! Real parts: the `canopy` binary, the rmcp client over stdio, the
//! service over loopback, the shared tokenizer.

use std::path::Path;
use std::process::{Command, Output};

use canopy_core::tokens::count_tokens;
use canopy_test_support::canopy_bin;
use canopy_test_support::mcp::*;
use canopy_test_support::repo::Repo;
use canopy_test_support::serve::{Opts, Server, add_and_index};
use rmcp::model::CallToolResult;
use serde_json::{Value, json};

const BUDGETS: [u64; 6] = [150, 220, 330, 600, 1_200, 2_500];
const STRATEGIES: [&str; 6] = [
    "keyword",
    "semantic",
    "graph",
    "history",
    "decisions",
    "fused",
];
const FOCUSES: [Option<&str>; 3] = [None, Some("Lexer.advance"), Some("no_such_thing")];
const TASK: &str = "invoice totals are rounded wrong when a discount applies";

/// A small tree whose code is full of what JSON escapes: quotes,
/// backslashes, newlines, tabs in strings.
fn repo() -> Repo {
    let billing = r#"# Billing: invoices, discounts and "rounding" rules.

import re


class Invoice:
    """An invoice: lines, a discount, and its total."""

    def __init__(self, lines, discount=0.0):
        self.lines = lines
        self.discount = discount

    def total(self):
        """The total after the discount, rounded to cents."""
        gross = sum(l["amount"] * l["qty"] for l in self.lines)
        return round(gross * (1 - self.discount), 2)

    def render(self):
        out = ["\"item\"\t\"qty\"\t\"amount\"\n"]
        for l in self.lines:
            out.append("\"%s\"\t%d\t%.2f\n" % (l["name"], l["qty"], l["amount"]))
        out.append("total:\t%.2f\n" % self.total())
        return "".join(out)


def apply_discount(invoice, rate):
    """Applies a discount rate ("0.1" means 10%)."""
    if not re.match(r"^\d+(\.\d+)?$", str(rate)):
        raise ValueError("bad rate: \"%s\"" % rate)
    invoice.discount = float(rate)
    return invoice.total()
"#;
    let lexer = r#"# A tiny lexer.


class Lexer:
    def __init__(self, src):
        self.src = src
        self.pos = 0

    def advance(self):
        ch = self.src[self.pos]
        self.pos += 1
        if ch == "\\":
            return "\\" + self.src[self.pos]
        return ch

    def peek(self):
        return self.src[self.pos] if self.pos < len(self.src) else "\0"


def tokenize(src):
    lx = Lexer(src)
    out = []
    while lx.pos < len(src):
        out.append(lx.advance())
    return out
"#;
    let report = r#"from billing import Invoice, apply_discount
from lexer import tokenize


def monthly_report(rows):
    """One invoice per row, discounted, as "name: total" lines."""
    lines = []
    for row in rows:
        inv = Invoice(row["lines"])
        total = apply_discount(inv, row.get("discount", "0"))
        lines.append("%s:\t%.2f" % (row["name"], total))
    return "\n".join(lines)


def parse_query(q):
    return [t for t in tokenize(q) if t.strip()]
"#;
    let notes = "# Rounding\n\nTotals are rounded to cents after the discount (\"banker's\" rounding is not used).\n";
    Repo::with_files(&[
        ("billing.py", billing),
        ("lexer.py", lexer),
        ("report.py", report),
        ("docs/rounding.md", notes),
    ])
}

fn args(path: &str, budget: u64, strategy: &str, focus: Option<&str>) -> Value {
    let mut a = json!({"path": path, "task": TASK, "budget_tokens": budget, "strategy": strategy});
    if let Some(f) = focus {
        a["focus"] = json!(f);
    }
    a
}

/// Every text block of a tool result.
fn blocks(result: &CallToolResult) -> Vec<&str> {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.as_str()))
        .collect()
}

/// The property over MCP: the content blocks together cost at most the
/// budget; the first is a JSON header, each other is one fragment under a
/// provenance line; and the code arrives unescaped.
#[tokio::test(flavor = "multi_thread")]
async fn mcp_results_fit_the_budget_on_the_wire() {
    let repo = repo();
    let client = connect(canopy_bin!()).await;
    let path = repo.path();
    let mut saw_code = false;
    for budget in BUDGETS {
        for strategy in STRATEGIES {
            for focus in FOCUSES {
                let result = call(
                    &client,
                    "canopy_context",
                    args(&path, budget, strategy, focus),
                )
                .await;
                assert_ne!(result.is_error, Some(true), "{}", text(&result));
                let blocks = blocks(&result);
                let cost: usize = blocks.iter().map(|b| count_tokens(b)).sum();
                assert!(
                    cost as u64 <= budget,
                    "{strategy} {focus:?} at {budget}: {cost} tokens on the wire\n{}",
                    blocks.join("\n")
                );
                let header: Value = serde_json::from_str(blocks[0]).expect("JSON header");
                assert_eq!(header["budget_tokens"], budget, "{header}");
                assert_eq!(header["fragments"], blocks.len() - 1, "{header}");
                if budget >= 1_200 {
                    // The full header: what ran and what gave how many
                    // fragments; what was skipped, why in a few words
                    // (no model here).
                    let ran = header["ran"].as_object().expect("ran");
                    let skipped = header["skipped"].as_object();
                    let every = ran.len() + skipped.map_or(0, |s| s.len());
                    assert_eq!(every, if strategy == "fused" { 5 } else { 1 }, "{header}");
                    if matches!(strategy, "fused" | "semantic") {
                        assert_eq!(
                            header["skipped"]["semantic"], "no embedding model configured",
                            "{header}"
                        );
                    }
                    for (name, why) in skipped.into_iter().flatten() {
                        let why = why.as_str().unwrap_or_default();
                        assert!(
                            !why.is_empty() && why.chars().count() <= 60,
                            "{name}: {header}"
                        );
                    }
                }
                for b in &blocks[1..] {
                    assert!(b.starts_with("--- "), "provenance line: {b}");
                    saw_code |= b.contains(r#"out = ["\"item\"\t"#);
                }
            }
        }
    }
    assert!(
        saw_code,
        "the escaped-looking code arrives as it is in the file"
    );
    client.cancel().await.expect("close");
}

/// The same property over HTTP (`Accept: text/plain`), and the JSON form
/// still there for programs, with `wire_tokens` saying what the text costs.
#[test]
fn http_text_fits_the_budget() {
    let data = tempfile::tempdir().unwrap();
    let repo = repo();
    let server = Server::start(
        canopy_bin!(),
        data.path(),
        &Opts {
            allow_roots: vec![repo.root()],
            ..Opts::default()
        },
    );
    let client = server.client();
    let id = add_and_index(&client, &repo);
    for budget in BUDGETS {
        for strategy in STRATEGIES {
            for focus in FOCUSES {
                let mut body = json!({"repo": id, "task": TASK, "budget_tokens": budget, "strategy": strategy});
                if let Some(f) = focus {
                    body["focus"] = json!(f);
                }
                let resp = client
                    .send_raw(
                        "POST",
                        "/context",
                        Some(body.to_string().as_bytes()),
                        &[("accept", "text/plain")],
                    )
                    .expect("request");
                let text = String::from_utf8(resp.body.clone()).expect("UTF-8");
                assert_eq!(resp.status, 200, "{text}");
                let cost = count_tokens(&text) as u64;
                assert!(
                    cost <= budget,
                    "{strategy} {focus:?} at {budget}: {cost} tokens\n{text}"
                );
                let json_resp = client
                    .send_raw("POST", "/context", Some(body.to_string().as_bytes()), &[])
                    .expect("request");
                let pack: Value = serde_json::from_slice(&json_resp.body).expect("JSON");
                assert_eq!(pack["wire_tokens"], cost, "{pack}");
            }
        }
    }
    server.kill();
}

fn canopy(dir: &Path, args: &[&str]) -> Output {
    Command::new(canopy_bin!())
        .args(args)
        .current_dir(dir)
        .env_remove("CANOPY_ROOT")
        .env_remove("CANOPY_SERVICE_URL")
        .output()
        .expect("run canopy")
}

fn stdout(o: &Output) -> String {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout.clone()).expect("UTF-8")
}

/// The CLI's human output is the wire text: within the budget too.
#[test]
fn cli_output_fits_the_budget() {
    let repo = repo();
    stdout(&canopy(repo.root().as_path(), &["index"]));
    for budget in BUDGETS {
        for strategy in ["keyword", "fused"] {
            let budget_arg = budget.to_string();
            let out = stdout(&canopy(
                repo.root().as_path(),
                &[
                    "context",
                    TASK,
                    "--budget",
                    &budget_arg,
                    "--strategy",
                    strategy,
                ],
            ));
            let cost = count_tokens(&out) as u64;
            assert!(cost <= budget, "{strategy} at {budget}: {cost}\n{out}");
        }
    }
}

/// A focus whose name shares no word with the task is the first fragment
/// in every strategy, its definition in full when it fits, and its graph
/// neighbours follow.
#[tokio::test(flavor = "multi_thread")]
async fn an_explicit_focus_comes_first() {
    let repo = repo();
    let client = connect_with_args(
        canopy_bin!(),
        TestClient::default(),
        &["--structured-content", "true"],
    )
    .await;
    let path = repo.path();
    for strategy in STRATEGIES {
        for budget in [450, 2_500] {
            let result = call(
                &client,
                "canopy_context",
                args(&path, budget, strategy, Some("Lexer.advance")),
            )
            .await;
            let pack = result.structured_content.clone().expect("structured pack");
            let fragments = pack["fragments"].as_array().expect("fragments");
            // The focus's definition, in full: alone, or inside its class
            // when the class's whole text fits (the reason says it holds it).
            let first = &fragments[0];
            assert_eq!(first["detail"], "full", "{strategy}: {pack}");
            assert!(
                first["text"].as_str().is_some_and(
                    |t| t.contains("def advance(self):\n        ch = self.src[self.pos]")
                ),
                "{strategy}: {pack}"
            );
            assert!(
                first["reason"]
                    .as_str()
                    .is_some_and(|r| r.contains("the focus `Lexer.advance`")),
                "{strategy}: {pack}"
            );
            let names: Vec<&str> = fragments
                .iter()
                .filter_map(|f| f["name"].as_str())
                .collect();
            assert!(
                names.iter().any(|n| *n == "tokenize" || *n == "Lexer"),
                "{strategy}: the focus's caller or class: {names:?}"
            );
        }
    }
    client.cancel().await.expect("close");
}

/// Two fresh indexes of the same tree: byte-identical context packs (wire
/// text) and evidence packs.
#[test]
fn fresh_indexes_give_identical_packs() {
    let repo = repo();
    let dir = repo.root();
    let run = || -> Vec<String> {
        let _ = std::fs::remove_dir_all(dir.join(".canopy"));
        stdout(&canopy(&dir, &["index"]));
        let mut outs = Vec::new();
        for strategy in STRATEGIES {
            for budget in ["200", "1000"] {
                outs.push(stdout(&canopy(
                    &dir,
                    &["context", TASK, "--budget", budget, "--strategy", strategy],
                )));
            }
        }
        let pack = stdout(&canopy(&dir, &["--json", "pack", "--pattern", TASK]));
        let mut pack: Value = serde_json::from_str(&pack).expect("JSON pack");
        // When the index run finished is the one thing that may differ.
        if let Some(f) = pack.get_mut("freshness") {
            f["indexed_at"] = Value::Null;
        }
        outs.push(pack.to_string());
        outs
    };
    let first = run();
    let second = run();
    assert_eq!(first, second);
}

/// The provenance line as an agent reads it (issue 31): a fragment whose
/// text is cut (signature, outline) names the handle that expands it, and
/// `canopy_expand` on that id gives the unit's whole text, which starts
/// with what the fragment shows; a full fragment names none (its text is
/// what expanding would give). Each file's path is on its first block
/// only, and a line costs few tokens.
#[tokio::test(flavor = "multi_thread")]
async fn a_cut_fragment_names_the_handle_that_expands_it() {
    let repo = repo();
    let client = connect(canopy_bin!()).await;
    let path = repo.path();
    let mut expanded = 0;
    let mut lines = 0;
    let mut line_tokens = 0;
    for budget in BUDGETS {
        for strategy in STRATEGIES {
            let result = call(
                &client,
                "canopy_context",
                args(&path, budget, strategy, Some("Lexer.advance")),
            )
            .await;
            let blocks = blocks(&result);
            let mut paths_seen: Vec<&str> = Vec::new();
            let mut previous: Option<&str> = None;
            for b in &blocks[1..] {
                let (line, body) = b.split_once('\n').unwrap_or((b, ""));
                lines += 1;
                let limit = if line.contains(" · expand h") {
                    48
                } else {
                    36
                };
                line_tokens += count_tokens(line);
                assert!(
                    count_tokens(line) <= limit,
                    "{strategy} at {budget}: {} tokens: {line}",
                    count_tokens(line)
                );
                let rest = line.strip_prefix("--- ").expect("provenance line");
                let (file, _) = rest.split_once(':').expect("path:lines");
                let file = if file.is_empty() {
                    previous.expect("a path-less line follows a block of its file")
                } else {
                    assert!(
                        !paths_seen.contains(&file),
                        "{strategy} at {budget}: a file's blocks come together, its path once: {blocks:?}"
                    );
                    paths_seen.push(file);
                    file
                };
                previous = Some(file);
                let Some((_, after)) = line.split_once(" · expand ") else {
                    assert!(
                        !line.contains("[signature") && !line.contains("[outline"),
                        "{line}"
                    );
                    continue;
                };
                let id = &after[..25];
                assert!(
                    id.starts_with('h') && id[1..].bytes().all(|c| c.is_ascii_hexdigit()),
                    "{line}"
                );
                let one = call(
                    &client,
                    "canopy_expand",
                    json!({"path": path, "handle_ids": [id]}),
                )
                .await;
                assert_ne!(one.is_error, Some(true), "{}", text(&one));
                let whole = text(&one);
                let first_line = body.lines().next().unwrap_or_default().trim();
                assert!(
                    whole.starts_with(&format!("// {id}\n")) && whole.contains(first_line),
                    "{line}\n{body}\n---\n{whole}"
                );
                assert!(
                    whole.len() > body.len(),
                    "the handle gives more than the cut text: {line}"
                );
                expanded += 1;
            }
        }
    }
    assert!(
        expanded > 0,
        "some budget cuts a fragment ({lines} lines seen)"
    );
    // The form before put a handle (about 15 tokens) on every line and
    // the path on every fragment of a file: about 60 tokens a line on
    // real packs (issue 31).
    assert!(
        line_tokens <= 26 * lines,
        "{line_tokens} tokens in {lines} provenance lines"
    );
    client.cancel().await.expect("close");
}
