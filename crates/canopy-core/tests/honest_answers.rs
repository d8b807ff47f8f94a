//! Answers that stay honest at the edges (issue 32):
//!
//! * evidence from files changed or deleted since indexing never says stop
//!   (N4);
//! * a huge single-line file, admitted by a raised `--max-file-size`, is
//!   indexed in bounded units, every byte of it still searchable (N6).

use canopy_test_support::repo::write;
use std::fs;

use canopy_core::index::NoProgress;
use canopy_core::pack::{EvidencePack, PackParams};
use canopy_core::query::QueryParams;
use canopy_core::{Engine, EngineOptions};

fn pack(e: &Engine, question: &str) -> EvidencePack {
    e.evidence_pack(
        &PackParams {
            query: QueryParams {
                pattern: Some(question.into()),
                ..Default::default()
            },
            ..Default::default()
        },
        None,
    )
    .unwrap()
}

#[test]
fn evidence_from_files_changed_since_indexing_never_says_stop() {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    write(
        r,
        "billing/invoice.py",
        "class InvoiceRenderer:\n    def render_invoice(self, invoice):\n        return compute_invoice_total(invoice)\n\n\ndef compute_invoice_total(invoice):\n    \"\"\"Sums the invoice lines; discounts are applied later.\"\"\"\n    return sum(line.amount for line in invoice.lines)\n",
    );
    write(
        r,
        "billing/tax.py",
        "def apply_vat(amount, rate):\n    return amount * (1 + rate)\n",
    );
    write(
        r,
        "shipping/tracker.py",
        "class ParcelTracker:\n    def track_parcel(self, code):\n        return code\n",
    );
    // No watcher: the index is not told about what happens next.
    let e = Engine::open(r, EngineOptions::default()).unwrap();
    e.index(None, &NoProgress).unwrap();
    // Naming the member by its qualified name is what earns a stop (issue 26).
    let question = "Why does `InvoiceRenderer.render_invoice` ignore discounts?";
    let fresh = pack(&e, question);
    assert_eq!(fresh.handles[0].file_path, "billing/invoice.py");
    assert!(
        fresh.guidance.stop_querying && fresh.guidance.confidence_band == "high",
        "the fresh pack is sure of itself (what makes this test mean something): {:?}",
        fresh.guidance
    );

    // A branch switch deletes the file.
    fs::remove_file(r.join("billing/invoice.py")).unwrap();
    let stale = pack(&e, question);
    assert_eq!(stale.handles[0].file_path, "billing/invoice.py");
    assert!(stale.handles[0].stale);
    assert_eq!(stale.freshness.as_ref().unwrap().stale_files, 1);
    let g = &stale.guidance;
    assert!(!g.stop_querying, "{g:?}");
    assert_eq!(g.confidence_band, "low", "{g:?}");
    assert!(g.max_additional_queries >= 1);
    assert!(g.next_step.contains("stale"), "{}", g.next_step);
    // Handles of the deleted file are suggested last, if at all.
    let first_stale = stale
        .expand_suggestion
        .iter()
        .position(|id| stale.handles.iter().any(|h| &h.id == id && h.stale));
    let last_fresh = stale
        .expand_suggestion
        .iter()
        .rposition(|id| stale.handles.iter().any(|h| &h.id == id && !h.stale));
    if let (Some(s), Some(f)) = (first_stale, last_fresh) {
        assert!(f < s, "{:?}", stale.expand_suggestion);
    }

    // Changed rather than deleted: the same.
    write(
        r,
        "billing/invoice.py",
        "def compute_invoice_total(invoice):\n    return 0\n",
    );
    let changed = pack(&e, question);
    assert!(changed.handles.iter().any(|h| h.stale));
    assert!(!changed.guidance.stop_querying, "{:?}", changed.guidance);
    assert_ne!(changed.guidance.confidence_band, "high");

    // Re-indexed: sure of itself again.
    e.index(None, &NoProgress).unwrap();
    let reindexed = pack(&e, question);
    assert!(reindexed.handles.iter().all(|h| !h.stale));
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

    let bound = canopy_core::index::MAX_UNIT_BYTES;
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
    assert_eq!(e.totals_drift().unwrap(), 0);
}
