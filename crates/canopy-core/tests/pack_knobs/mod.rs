//! What the pack-knob tests (`pack_local_callees`, `pack_within_file`,
//! `pack_within_floor`) share: the evidence pack an engine gives for one
//! question. Each of those tests is its own binary because it sets an
//! environment variable.

use canopy_core::Engine;
use canopy_core::pack::{EvidencePack, PackParams};
use canopy_core::query::QueryParams;

/// The evidence pack `e` gives for `question`, with default parameters.
pub fn pack_for(e: &Engine, question: &str) -> EvidencePack {
    let params = PackParams {
        query: QueryParams {
            pattern: Some(question.into()),
            ..Default::default()
        },
        ..Default::default()
    };
    e.evidence_pack(&params, None).unwrap()
}
