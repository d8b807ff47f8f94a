//! Answers that stay honest at the edges (issue 32):
//!
//! * a huge single-line file, admitted by a raised `--max-file-size`, is
//!   indexed in bounded units, every byte of it still searchable (N6).

use std::fs;
use std::path::Path;

use canopy_core::index::NoProgress;
use canopy_core::query::QueryParams;
use canopy_core::{Engine, EngineOptions};

fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

#[test]
fn a_huge_single_line_file_is_indexed_in_bounded_units() {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    // ~3 MB on one line: words, then one long run without whitespace,
    // then a word that must still be found.
    let mut text = String::with_capacity(3_200_000);
    let mut i = 0u64;
    while text.len() < 2_500_000 {
        text.push_str(&format!("token{} ", i * 7919 % 100_003));
        i += 1;
    }
    text.push_str(&"ab".repeat(300_000));
    text.push_str(" needle_at_the_very_end");
    write(r, "data/dump.txt", &text);
    write(r, "src/app.py", "def app():\n    return 1\n");
    let e = Engine::open(
        r,
        EngineOptions {
            max_file_size: 64 * 1024 * 1024,
            ..EngineOptions::default()
        },
    )
    .unwrap();
    let report = e.index(None, &NoProgress).unwrap();
    assert_eq!(report.files_indexed, 2);

    let bound = canopy_core::oversize::MAX_UNIT_BYTES;
    let all = e
        .query(&QueryParams {
            pattern: Some("token0".into()),
            glob: Some("data/dump.txt".into()),
            limit: Some(200),
            ..Default::default()
        })
        .unwrap();
    assert!(!all.handles.is_empty());
    for h in all.handles.iter().filter(|h| h.node_type != "file") {
        assert!(
            h.span.end - h.span.start <= bound,
            "a unit of {} bytes",
            h.span.end - h.span.start
        );
        assert!(h.token_count as usize <= bound, "{} tokens", h.token_count);
    }
    // The end of the file is searchable, and its unit expands to what it
    // says, within the bound.
    let needle = e
        .query(&QueryParams {
            pattern: Some("needle_at_the_very_end".into()),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(needle.handles.len(), 1, "{:?}", needle.handles);
    let h = &needle.handles[0];
    assert_eq!(h.file_path, "data/dump.txt");
    let expanded = e.expand(&[h.id.as_str()]).unwrap();
    assert!(expanded[0].content.ends_with("needle_at_the_very_end"));
    assert!(expanded[0].content.len() <= bound);
    assert_eq!(
        expanded[0].content.as_bytes(),
        &text.as_bytes()[h.span.start..h.span.end]
    );
    // A file the default limit admits is parsed as before.
    let app = e
        .query(&QueryParams {
            symbol: Some("app".into()),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(app.handles[0].node_type, "function");
    assert_eq!(e.orphan_rows().unwrap(), 0);
}
