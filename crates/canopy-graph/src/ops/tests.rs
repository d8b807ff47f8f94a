//! Unit tests of the analyses' pure parts.

use super::deps::tarjan_scc;
use super::structure::parameters_of;
use super::symbols::wildcard_match;

#[test]
fn tarjan_finds_cycles_and_leaves_dags_alone() {
    // 0 -> 1 -> 2 -> 0, 2 -> 3, 3 -> 4 -> 3, 5 alone
    let adj = vec![vec![1], vec![2], vec![0, 3], vec![4], vec![3], vec![]];
    let mut comps: Vec<Vec<usize>> = tarjan_scc(6, &adj)
        .into_iter()
        .map(|mut c| {
            c.sort();
            c
        })
        .collect();
    comps.sort();
    assert_eq!(comps, vec![vec![0, 1, 2], vec![3, 4], vec![5]]);
    assert_eq!(tarjan_scc(3, &[vec![1], vec![2], vec![]]).len(), 3);
}

#[test]
fn parameters_split_at_top_level_commas() {
    assert_eq!(
        parameters_of("def parse(self, text: str, opts: dict[str, int] = {}) -> Ast:"),
        ["self", "text: str", "opts: dict[str, int] = {}"]
    );
    assert_eq!(
        parameters_of("pub fn new(map: HashMap<K, V>, f: impl Fn(u8) -> u8) -> Self"),
        ["map: HashMap<K, V>", "f: impl Fn(u8) -> u8"]
    );
    assert!(parameters_of("class Parser:").is_empty());
    assert!(parameters_of("fn f()").is_empty());
}

#[test]
fn wildcards_match_like_a_shell() {
    assert!(wildcard_match("parse*", "parse_expr"));
    assert!(wildcard_match("*Parser*", "pkg.BigParser.run"));
    assert!(wildcard_match("P*r", "parser"));
    assert!(!wildcard_match("parse*", "reparse"));
    assert!(wildcard_match("*", ""));
    assert!(!wildcard_match("a*b*c", "acb"));
}
