//! Measuring knobs: environment variables the evaluation sets to compare
//! ranking settings on one index. Not an interface: read where a setting is
//! used, never documented as a user option.

/// The `key=value,…` pairs (numbers) of a measuring knob: an environment
/// variable the evaluation sets to compare ranking settings on one index
/// (`CANOPY_PACK_TUNING`, `CANOPY_CONTEXT_FUSION`), not an interface. Pairs
/// that do not parse are skipped; keys are trimmed.
pub(crate) fn measuring_knobs(var: &str) -> Vec<(String, f64)> {
    let Ok(spec) = std::env::var(var) else {
        return Vec::new();
    };
    spec.split(',')
        .filter_map(|part| {
            let (k, v) = part.split_once('=')?;
            Some((k.trim().to_string(), v.trim().parse::<f64>().ok()?))
        })
        .collect()
}
