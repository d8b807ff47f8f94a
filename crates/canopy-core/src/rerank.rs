//! An experiment, off by default: re-rank the evidence pack's best
//! candidates by a blend of their score and the cosine of the question and
//! the unit under a transformer encoder ([`crate::encoder`]).
//!
//! Set by the measuring knob `CANOPY_PACK_TUNING` (`rerank` = blend weight,
//! 0 off; `rerank_n` = candidates re-scored, default 30; `rerank_len` =
//! tokens per unit text, default 64) with the model directory in
//! `CANOPY_RERANK_MODEL` (loaded once per process). Not an interface: the
//! numbers that decide whether it becomes one are in `bench/eval/README.md`
//! ("Transformer re-ranker").

use std::collections::HashMap;
use std::sync::OnceLock;

use crate::encoder::Encoder;
use crate::snapshot::Snapshot;
use crate::store::read::NodeRecord;

/// Tokens of the question the encoder reads (its start: an issue's title first).
const QUESTION_TOKENS: usize = 128;
/// Bytes of a unit's text read from its file (more than `rerank_len` tokens need).
const UNIT_BYTES: usize = 2_000;

/// The encoder of `CANOPY_RERANK_MODEL`, loaded on first use; `None`
/// (logged once) when unset or not loadable.
fn encoder() -> Option<&'static Encoder> {
    static ENCODER: OnceLock<Option<Encoder>> = OnceLock::new();
    ENCODER
        .get_or_init(|| {
            let dir = std::env::var_os("CANOPY_RERANK_MODEL")?;
            Encoder::load(&dir)
                .map_err(|e| tracing::warn!(error = %e, "re-ranker off: cannot load the encoder"))
                .ok()
        })
        .as_ref()
}

/// What the encoder reads of a unit: its qualified name, then its text
/// from the signature on, as words (identifiers split at `_` and case
/// changes, punctuation dropped: code spends BERT tokens on punctuation).
fn unit_text(n: &NodeRecord, file: Option<&str>) -> String {
    let mut text = String::new();
    let name = n
        .qualified_name
        .as_deref()
        .or(n.name.as_deref())
        .unwrap_or("");
    let body = file
        .and_then(|t| {
            let end = n.end_byte.min(t.len()).min(n.preview_start + UNIT_BYTES);
            let start = (n.preview_start.min(end)..=end).find(|&s| t.is_char_boundary(s))?;
            let end = (start..=end).rev().find(|&e| t.is_char_boundary(e))?;
            Some(&t[start..end])
        })
        .unwrap_or("");
    for word in crate::text::identifiers(name)
        .chain(crate::text::identifiers(body))
        .flat_map(crate::text::split_identifier)
    {
        text.push_str(&word);
        text.push(' ');
    }
    text
}

/// The cosines of the question and each of the ranked candidates `head`
/// (best first) under the encoder, in order; `None` without an encoder.
pub(crate) fn cosines(
    snapshot: Snapshot<'_>,
    head: &[&NodeRecord],
    question: &str,
    max_len: usize,
) -> Option<Vec<f64>> {
    let encoder = encoder()?;
    let mut files: HashMap<&str, Option<String>> = HashMap::new();
    let mut texts = Vec::with_capacity(head.len());
    for &n in head {
        let file = files.entry(n.file_path.as_str()).or_insert_with(|| {
            snapshot
                .read_verified(&n.file_path, &n.content_hash)
                .ok()
                .map(|b| crate::lang::extract::text_view(&b))
        });
        texts.push(unit_text(n, file.as_deref()));
    }
    let q = &encoder.encode(&[question], QUESTION_TOKENS)[0];
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let units = encoder.encode(&refs, max_len);
    Some(
        units
            .iter()
            .map(|u| f64::from(u.iter().zip(q).map(|(a, b)| a * b).sum::<f32>()))
            .collect(),
    )
}

/// New scores for all ranked candidates (`scores`, best first) given the
/// cosines of the first `cos.len()` of them: `(1 − weight) · score + weight
/// · top · cos / max cos`. The candidates past those were not read by the
/// encoder and count as cosine 0 (`(1 − weight) · score`): left at their
/// full score, one would pass every re-scored candidate whose cosine is low
/// only because the encoder never read it.
pub(crate) fn blend(scores: &[f64], cos: &[f64], weight: f64) -> Vec<f64> {
    let top = scores.first().copied().unwrap_or(0.0);
    let best = cos.iter().copied().fold(1e-9, f64::max);
    scores
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let c = cos.get(i).copied().unwrap_or(0.0);
            (1.0 - weight) * s + weight * top * c.max(0.0) / best
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unit_text_is_the_name_and_the_words_of_the_body() {
        let file = "x = 1\ndef parseConfig(path_name):\n    return load(path_name)\n";
        let start = file.find("def").unwrap();
        let n = NodeRecord {
            rowid: 1,
            handle: String::new(),
            file_path: "settings.py".into(),
            content_hash: String::new(),
            node_type: "function".into(),
            name: Some("parseConfig".into()),
            qualified_name: Some("settings.parseConfig".into()),
            parent_rowid: None,
            start_byte: start,
            end_byte: file.len(),
            start_line: 2,
            end_line: 3,
            token_count: 12,
            preview_start: start,
            score: 0.0,
        };
        assert_eq!(
            unit_text(&n, Some(file)),
            "settings parse config def parse config path name return load path name "
        );
        assert_eq!(unit_text(&n, None), "settings parse config ");
    }

    #[test]
    fn a_candidate_the_encoder_did_not_read_never_passes_one_it_did() {
        // Three candidates, the encoder read the first two (rerank_n = 2); the
        // second is unlike the question. The third, unread, keeps its place
        // below both instead of jumping over the second.
        let new = blend(&[1.0, 0.9, 0.85], &[0.8, 0.0], 0.4);
        assert_eq!(new.len(), 3);
        assert!((new[0] - 1.0).abs() < 1e-12, "{new:?}");
        assert!((new[1] - 0.54).abs() < 1e-12, "{new:?}");
        assert!(
            new[2] < new[1],
            "an unread candidate passed a read one: {new:?}"
        );
        assert!((new[2] - 0.51).abs() < 1e-12, "{new:?}");
    }

    #[test]
    fn blend_weight_zero_keeps_the_scores() {
        assert_eq!(
            blend(&[1.0, 0.5, 0.25], &[0.1, 0.9], 0.0),
            vec![1.0, 0.5, 0.25]
        );
    }
}
