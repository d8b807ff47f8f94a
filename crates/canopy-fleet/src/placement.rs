//! Rendezvous (highest-random-weight) placement: which live node should own
//! a repository. Every node computes the same answer from the same list of
//! live nodes, with no coordination, and when a node joins or leaves only
//! the repositories it wins or held move (about 1/N of them).
//!
//! The weight of (node, repository) is xxh3-64 of the node id, a 0xFF byte
//! (which no UTF-8 text contains, so `("ab", "c")` and `("a", "bc")` differ)
//! and the repository id. xxh3 is a fixed, specified function: nodes built
//! by different canopy versions agree.

use xxhash_rust::xxh3::xxh3_64;

/// The weight of `node_id` for `repo_id` (higher wins).
pub fn weight(node_id: &str, repo_id: &str) -> u64 {
    let mut key = Vec::with_capacity(node_id.len() + 1 + repo_id.len());
    key.extend_from_slice(node_id.as_bytes());
    key.push(0xFF);
    key.extend_from_slice(repo_id.as_bytes());
    xxh3_64(&key)
}

/// `nodes` ordered best first for `repo_id` (ties, which need a 64-bit
/// collision, go to the smaller id).
pub fn ranking<'a, S: AsRef<str>>(nodes: &'a [S], repo_id: &str) -> Vec<&'a str> {
    let mut ranked: Vec<(u64, &str)> = nodes
        .iter()
        .map(|n| (weight(n.as_ref(), repo_id), n.as_ref()))
        .collect();
    ranked.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(b.1)));
    ranked.dedup_by(|a, b| a.1 == b.1);
    ranked.into_iter().map(|(_, n)| n).collect()
}

/// The node that should own `repo_id` (`None` when `nodes` is empty).
pub fn owner<'a, S: AsRef<str>>(nodes: &'a [S], repo_id: &str) -> Option<&'a str> {
    nodes
        .iter()
        .map(|n| (weight(n.as_ref(), repo_id), n.as_ref()))
        .max_by(|a, b| a.0.cmp(&b.0).then_with(|| b.1.cmp(a.1)))
        .map(|(_, n)| n)
}

/// Where `node_id` stands for `repo_id` (0: the preferred owner; `None`:
/// not among `nodes`).
pub fn rank_of<S: AsRef<str>>(nodes: &[S], repo_id: &str, node_id: &str) -> Option<usize> {
    let mine = weight(node_id, repo_id);
    if !nodes.iter().any(|n| n.as_ref() == node_id) {
        return None;
    }
    Some(
        nodes
            .iter()
            .filter(|n| {
                let n = n.as_ref();
                n != node_id && {
                    let w = weight(n, repo_id);
                    w > mine || (w == mine && n < node_id)
                }
            })
            .count(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repos(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("repo-{i:05}")).collect()
    }

    fn nodes(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("node-{i}")).collect()
    }

    #[test]
    fn owner_rank_and_ranking_agree() {
        let ns = nodes(5);
        for r in repos(200) {
            let ranked = ranking(&ns, &r);
            assert_eq!(ranked.len(), 5);
            assert_eq!(Some(ranked[0]), owner(&ns, &r));
            for (i, n) in ranked.iter().enumerate() {
                assert_eq!(rank_of(&ns, &r, n), Some(i));
            }
        }
        assert_eq!(rank_of(&ns, "x", "stranger"), None);
        assert_eq!(owner::<String>(&[], "x"), None);
    }

    #[test]
    fn a_joining_node_takes_about_one_in_n_and_only_for_itself() {
        let rs = repos(10_000);
        let before = nodes(5);
        let mut after = before.clone();
        after.push("node-new".into());
        let mut moved = 0;
        for r in &rs {
            let a = owner(&before, r);
            let b = owner(&after, r);
            if a != b {
                moved += 1;
                // A repository moves only to the new node, never between old ones.
                assert_eq!(b, Some("node-new"), "{r} moved from {a:?} to {b:?}");
            }
        }
        let fraction = moved as f64 / rs.len() as f64;
        // Expected 1/6 = 0.167; binomial standard deviation at n = 10,000 is 0.004.
        assert!((0.15..0.185).contains(&fraction), "moved {fraction}");
    }

    #[test]
    fn a_leaving_node_moves_only_its_own_repositories() {
        let rs = repos(5_000);
        let before = nodes(4);
        let after: Vec<String> = before.iter().filter(|n| *n != "node-2").cloned().collect();
        for r in &rs {
            let a = owner(&before, r);
            let b = owner(&after, r);
            if a != Some("node-2") {
                assert_eq!(a, b, "{r} moved although its owner stayed");
            } else {
                // Its repositories go to their second choice.
                assert_eq!(b, Some(ranking(&before, r)[1]));
            }
        }
    }

    #[test]
    fn load_is_balanced() {
        let rs = repos(10_000);
        let ns = nodes(5);
        let mut counts = std::collections::HashMap::new();
        for r in &rs {
            *counts
                .entry(owner(&ns, r).unwrap_or_default())
                .or_insert(0usize) += 1;
        }
        for (n, c) in counts {
            // 2,000 expected each; ±10% is over 5 standard deviations.
            assert!((1800..2200).contains(&c), "{n} owns {c}");
        }
    }

    #[test]
    fn weights_are_stable_across_builds() {
        // Pinned: nodes built by different versions must agree on placement.
        assert_eq!(weight("a", "bc"), xxh3_64(b"a\xffbc"));
        assert_ne!(weight("ab", "c"), weight("a", "bc"));
    }
}
