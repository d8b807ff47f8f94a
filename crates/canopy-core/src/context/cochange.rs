//! Co-changed units for the `history` strategy: which functions and
//! classes changed in the same commits as the focus code.
//!
//! Each commit's diff (`git show -U0`) gives, per file, the line ranges it
//! changed. A range is carried forward to the checked-out commit's lines
//! through the hunks of the newer commits read for the same file (exact on
//! a linear history of the focus file; for other files only their commits
//! that also touched the focus files are known, so a range may drift), then
//! laid on the indexed units: the innermost definition it overlaps, or the
//! file when it lies outside every definition of a code file. Prose files
//! (release notes, changelogs, `AUTHORS`: no definitions) and tests (unless
//! the focus is a test) are never proposed.

use std::collections::HashMap;
use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;

use crate::context::history::Commit;
use crate::error::Result;
use crate::pack::is_docs_path;
use crate::path_class::is_test_path;
use crate::store::Store;
use crate::store::read::NodeRecord;

/// A commit touching more files than this (a reformat, a rename sweep)
/// says nothing of coupling.
pub(crate) const MAX_FILES: usize = 30;
/// What a commit that touched the focus file but none of the focus units
/// counts for, next to one that changed a focus unit.
const FILE_ONLY_WEIGHT: f64 = 0.25;

/// One hunk of a `-U0` diff: `@@ -old_start,old_len +new_start,new_len @@`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Hunk {
    pub(crate) old_start: u32,
    pub(crate) old_len: u32,
    pub(crate) new_start: u32,
    pub(crate) new_len: u32,
}

/// The hunks one commit made in one file (as git names it, from the top).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct FileChange {
    pub(crate) path: String,
    pub(crate) hunks: Vec<Hunk>,
}

/// A unit that changed together with the focus code.
#[derive(Clone, Debug)]
pub(crate) struct CoChanged {
    pub(crate) rowid: i64,
    /// Commits that changed a focus unit and this one count 1, commits that
    /// only touched a focus file count [`FILE_ONLY_WEIGHT`].
    pub(crate) weight: f64,
    /// Commits that changed it with a focus unit (or, when none did, with a focus file).
    pub(crate) times: u32,
    pub(crate) with_unit: bool,
    /// The newest such commit's time and subject.
    pub(crate) time: i64,
    pub(crate) subject: String,
}

/// What one `git show` gave: per commit id its file changes and the bytes
/// git printed for it (commits git cannot show are absent), and whether
/// the read stopped at its bound before git had printed everything.
#[derive(Debug, Default)]
pub(crate) struct Shown {
    pub(crate) diffs: HashMap<String, (Vec<FileChange>, usize)>,
    pub(crate) stopped: bool,
}

/// The `-U0` diffs of `ids` (in that order), read as git prints them until
/// more than `max_bytes` have come: then git is stopped and the commit it
/// was printing is left out (with every one after it).
pub(crate) fn git_diffs(
    root: &Path,
    ids: &[&str],
    paths: &[&str],
    max_bytes: usize,
) -> std::result::Result<Shown, String> {
    if ids.is_empty() {
        return Ok(Shown::default());
    }
    let mut child = Command::new("git")
        .arg("-C")
        .arg(root)
        .args([
            "-c",
            "core.quotePath=false",
            "show",
            "-U0",
            "--no-renames",
            "--no-color",
            "--no-ext-diff",
            "--format=%x1e%H",
        ])
        .args(ids)
        .arg("--")
        .args(paths)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("git could not run: {e}"))?;
    let (mut out, mut stopped) = (Vec::new(), false);
    if let Some(mut stdout) = child.stdout.take() {
        let mut chunk = vec![0u8; 64 * 1024];
        loop {
            match stdout.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => out.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => {
                    stopped = true;
                    break;
                }
            }
            if out.len() > max_bytes {
                stopped = true;
                break;
            }
        }
    }
    if stopped {
        let _ = child.kill();
        let _ = child.wait();
        // Whole records only: the last one may be cut short.
        out.truncate(out.iter().rposition(|&b| b == 0x1e).unwrap_or(0));
    } else {
        let status = child
            .wait()
            .map_err(|e| format!("git could not run: {e}"))?;
        if !status.success() {
            return Err("git show failed".to_string());
        }
    }
    Ok(Shown {
        diffs: parse_diffs(&String::from_utf8_lossy(&out)),
        stopped,
    })
}

/// The records of `git show -U0 --format=%x1e%H`: per commit, per file, its
/// hunks, and the record's length in bytes.
pub(crate) fn parse_diffs(text: &str) -> HashMap<String, (Vec<FileChange>, usize)> {
    let mut out = HashMap::new();
    for record in text.split('\u{1e}').filter(|r| !r.trim().is_empty()) {
        let mut lines = record.lines();
        let id = lines.next().unwrap_or("").trim().to_string();
        let mut files: Vec<FileChange> = Vec::new();
        // Between `diff --git` and the first `@@`: the file's header lines.
        let mut in_header = false;
        let mut old_path: Option<String> = None;
        for line in lines {
            if line.starts_with("diff --git ") {
                in_header = true;
                old_path = None;
                continue;
            }
            if in_header {
                if let Some(p) = line.strip_prefix("--- a/") {
                    old_path = Some(p.to_string());
                } else if let Some(p) = line.strip_prefix("+++ ") {
                    // A deleted file keeps its old name (nothing of it is left to map onto).
                    let path = p.strip_prefix("b/").map(String::from).or(old_path.take());
                    if let Some(path) = path {
                        files.push(FileChange {
                            path,
                            hunks: Vec::new(),
                        });
                    }
                } else if line.starts_with("@@") {
                    in_header = false;
                }
            }
            if !in_header
                && line.starts_with("@@ ")
                && let (Some(hunk), Some(file)) = (parse_hunk(line), files.last_mut())
            {
                file.hunks.push(hunk);
            }
        }
        out.insert(id, (files, record.len() + 1));
    }
    out
}

/// `@@ -a[,b] +c[,d] @@ ...`.
fn parse_hunk(line: &str) -> Option<Hunk> {
    let mut parts = line.split_whitespace().skip(1);
    let old = parts.next()?.strip_prefix('-')?;
    let new = parts.next()?.strip_prefix('+')?;
    let range = |r: &str| -> Option<(u32, u32)> {
        match r.split_once(',') {
            Some((s, l)) => Some((s.parse().ok()?, l.parse().ok()?)),
            None => Some((r.parse().ok()?, 1)),
        }
    };
    let (old_start, old_len) = range(old)?;
    let (new_start, new_len) = range(new)?;
    Some(Hunk {
        old_start,
        old_len,
        new_start,
        new_len,
    })
}

/// Where line `line` of a file before a commit is after it, given the
/// commit's hunks in that file (a changed line goes to its hunk's new lines).
pub(crate) fn carry(line: u32, hunks: &[Hunk]) -> u32 {
    let mut shift: i64 = 0;
    for h in hunks {
        // With no old lines the hunk inserts after `old_start`.
        let first_old = if h.old_len == 0 {
            h.old_start + 1
        } else {
            h.old_start
        };
        if line < first_old {
            break;
        }
        if line < first_old + h.old_len {
            let into = (line - first_old).min(h.new_len.saturating_sub(1));
            return h.new_start.max(1) + into;
        }
        shift += i64::from(h.new_len) - i64::from(h.old_len);
    }
    (i64::from(line) + shift).max(1) as u32
}

/// The lines a hunk changed, after the commit: its new lines, or for a
/// deletion the lines on either side of the gap.
fn changed_lines(h: &Hunk) -> (u32, u32) {
    if h.new_len == 0 {
        (h.new_start.max(1), h.new_start + 1)
    } else {
        (h.new_start, h.new_start + h.new_len - 1)
    }
}

/// Per file, its units worth proposing: definitions, and the file unit for
/// what lies outside them (only in files that hold a definition).
struct Units {
    defs: Vec<NodeRecord>,
    file: Option<NodeRecord>,
}

fn is_definition(n: &NodeRecord) -> bool {
    n.name.is_some()
        && !matches!(
            n.node_type.as_str(),
            "file" | "chunk" | "section" | "paragraph" | "code_block"
        )
}

fn units_of(store: &Store, path: &str) -> Result<Units> {
    let nodes = store.nodes_of_file(path)?;
    let file = nodes.iter().find(|n| n.node_type == "file").cloned();
    let defs: Vec<NodeRecord> = nodes.into_iter().filter(is_definition).collect();
    Ok(Units {
        file: file.filter(|_| !defs.is_empty()),
        defs,
    })
}

/// The innermost definitions overlapping `lines`, or the file unit when none does.
fn units_at(units: &Units, (from, to): (u32, u32)) -> Vec<&NodeRecord> {
    let over: Vec<&NodeRecord> = units
        .defs
        .iter()
        .filter(|n| n.start_line <= to && n.end_line >= from)
        .collect();
    let inner: Vec<&NodeRecord> = over
        .iter()
        .copied()
        .filter(|n| {
            !over.iter().any(|m| {
                m.rowid != n.rowid
                    && m.start_line >= n.start_line
                    && m.end_line <= n.end_line
                    && (m.start_line, m.end_line) != (n.start_line, n.end_line)
            })
        })
        .collect();
    if inner.is_empty() {
        units.file.iter().collect()
    } else {
        inner
    }
}

/// The units changed with the focus in `commits` (newest first, as the log
/// lists them), ranked: weight, then the newest change, then row id.
pub(crate) fn co_changed(
    store: &Store,
    focus: &[NodeRecord],
    commits: &[Commit],
    diffs: &HashMap<String, Arc<Vec<FileChange>>>,
) -> Result<Vec<CoChanged>> {
    let focus_is_test = focus.iter().any(|n| is_test_path(&n.file_path));
    let mut units: HashMap<String, Units> = HashMap::new();
    // Per path, the hunks of the newer commits seen so far, newest first.
    let mut newer: HashMap<String, Vec<Vec<Hunk>>> = HashMap::new();
    let mut found: HashMap<i64, CoChanged> = HashMap::new();
    for c in commits {
        let Some(changes) = diffs.get(&c.id) else {
            continue;
        };
        let small = c.files.len() <= MAX_FILES;
        // Each file's changed lines, carried to the checked-out lines.
        let mut changed: Vec<(&str, Vec<(u32, u32)>)> = Vec::new();
        for fc in changes.iter() {
            let later = newer.entry(fc.path.clone()).or_default();
            let ranges = fc
                .hunks
                .iter()
                .map(|h| {
                    let (a, b) = changed_lines(h);
                    let (a, b) = later
                        .iter()
                        .rev()
                        .fold((a, b), |(a, b), hs| (carry(a, hs), carry(b, hs)));
                    (a, b.max(a))
                })
                .collect();
            later.insert(0, fc.hunks.clone());
            changed.push((fc.path.as_str(), ranges));
        }
        if !small {
            continue; // read for carrying lines only
        }
        let mut touched = Vec::new();
        for (path, ranges) in &changed {
            if is_docs_path(path) || (is_test_path(path) && !focus_is_test) {
                continue;
            }
            if !units.contains_key(*path) {
                units.insert(path.to_string(), units_of(store, path)?);
            }
            let Some(u) = units.get(*path) else { continue };
            for r in ranges {
                touched.extend(
                    units_at(u, *r)
                        .into_iter()
                        .map(|n| (n.rowid, n.file_path.clone(), n.start_line, n.end_line)),
                );
            }
        }
        touched.sort_unstable();
        touched.dedup();
        // The focus itself, and what encloses it or lies in it, is already there.
        touched.retain(|(rowid, path, from, to)| {
            !focus.iter().any(|f| {
                f.rowid == *rowid
                    || (f.file_path == *path
                        && (f.node_type == "file" || (f.start_line <= *to && f.end_line >= *from)))
            })
        });
        let hits_focus = |n: &NodeRecord| {
            changed.iter().any(|(p, ranges)| {
                *p == n.file_path
                    && (n.node_type == "file"
                        || ranges
                            .iter()
                            .any(|(a, b)| n.start_line <= *b && n.end_line >= *a))
            })
        };
        let with_unit = focus.iter().any(hits_focus);
        let weight = if with_unit { 1.0 } else { FILE_ONLY_WEIGHT };
        for (rowid, ..) in touched {
            let e = found.entry(rowid).or_insert(CoChanged {
                rowid,
                weight: 0.0,
                times: 0,
                with_unit: false,
                time: c.time,
                subject: c.subject.clone(),
            });
            e.weight += weight;
            if with_unit && !e.with_unit {
                // Count from here the commits that changed a focus unit.
                e.times = 0;
                e.time = c.time;
                e.subject = c.subject.clone();
            }
            if with_unit || !e.with_unit {
                e.times += 1;
            }
            e.with_unit |= with_unit;
        }
    }
    let mut ranked: Vec<CoChanged> = found.into_values().collect();
    ranked.sort_by(|a, b| {
        b.weight
            .total_cmp(&a.weight)
            .then(b.time.cmp(&a.time))
            .then(a.rowid.cmp(&b.rowid))
    });
    Ok(ranked)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(old_start: u32, old_len: u32, new_start: u32, new_len: u32) -> Hunk {
        Hunk {
            old_start,
            old_len,
            new_start,
            new_len,
        }
    }

    #[test]
    fn lines_are_carried_past_inserts_and_deletes() {
        // Two lines inserted after line 3, line 10 deleted.
        let hunks = [h(3, 0, 4, 2), h(10, 1, 11, 0)];
        assert_eq!(carry(2, &hunks), 2);
        assert_eq!(carry(3, &hunks), 3);
        assert_eq!(carry(4, &hunks), 6);
        assert_eq!(carry(9, &hunks), 11);
        assert_eq!(carry(12, &hunks), 13);
        // A changed line goes to its replacement.
        assert_eq!(carry(5, &[h(5, 1, 5, 3)]), 5);
    }

    #[test]
    fn a_show_output_gives_each_files_hunks() {
        let text = "\u{1e}abc\n\ndiff --git a/x.py b/x.py\nindex 1..2 100644\n--- a/x.py\n+++ b/x.py\n@@ -3 +3,2 @@ def f():\n-a\n+b\n+c\n@@ -10,0 +12 @@\n+d\ndiff --git a/old.py b/old.py\ndeleted file mode 100644\n--- a/old.py\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-x\n-y\n\u{1e}def\n\ndiff --git a/n.md b/n.md\nnew file mode 100644\n--- /dev/null\n+++ b/n.md\n@@ -0,0 +1 @@\n++++ b/z\n";
        let d = parse_diffs(text);
        assert_eq!(d["abc"].1, text.find("\u{1e}def").unwrap());
        assert_eq!(
            d["abc"].0,
            vec![
                FileChange {
                    path: "x.py".into(),
                    hunks: vec![h(3, 1, 3, 2), h(10, 0, 12, 1)]
                },
                FileChange {
                    path: "old.py".into(),
                    hunks: vec![h(1, 2, 0, 0)]
                }
            ]
        );
        assert_eq!(
            d["def"].0,
            vec![FileChange {
                path: "n.md".into(),
                hunks: vec![h(0, 0, 1, 1)]
            }]
        );
    }
}
