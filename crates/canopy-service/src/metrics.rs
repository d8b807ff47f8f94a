//! In-process metrics and their Prometheus text rendering (exposition format
//! 0.0.4), without a metrics crate.
//!
//! This module owns the counters and histograms that requests and index runs
//! update; per-repository gauges (generation, indexing, last run) are read
//! from the service's state when `/metrics` is rendered (see
//! `Service::render_metrics`).

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::fmt::Write as _;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Latency buckets (seconds).
const LATENCY_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];
/// Index run duration buckets (seconds).
const INDEX_BUCKETS: &[f64] = &[
    0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 900.0,
];
/// Tokens-per-expand buckets.
const TOKEN_BUCKETS: &[f64] = &[
    50.0, 100.0, 250.0, 500.0, 1000.0, 2500.0, 5000.0, 10000.0, 25000.0, 50000.0,
];
/// Suggested handles remembered for the acceptance ratio.
const MAX_SUGGESTED: usize = 50_000;
/// Window in which internal errors make the service `degraded`.
pub const ERROR_WINDOW: Duration = Duration::from_secs(300);

/// A fixed-bucket histogram.
#[derive(Clone, Debug)]
pub struct Histogram {
    bounds: &'static [f64],
    counts: Vec<u64>,
    sum: f64,
    count: u64,
}

impl Histogram {
    fn new(bounds: &'static [f64]) -> Histogram {
        Histogram {
            bounds,
            counts: vec![0; bounds.len()],
            sum: 0.0,
            count: 0,
        }
    }

    /// Records one observation.
    pub fn observe(&mut self, value: f64) {
        for (i, bound) in self.bounds.iter().enumerate() {
            if value <= *bound {
                self.counts[i] += 1;
            }
        }
        self.sum += value;
        self.count += 1;
    }

    fn render(&self, out: &mut String, name: &str, labels: &str) {
        let sep = if labels.is_empty() { "" } else { "," };
        for (bound, count) in self.bounds.iter().zip(&self.counts) {
            let _ = writeln!(out, "{name}_bucket{{{labels}{sep}le=\"{bound}\"}} {count}");
        }
        let _ = writeln!(
            out,
            "{name}_bucket{{{labels}{sep}le=\"+Inf\"}} {}",
            self.count
        );
        let braces = |s: &str| {
            if s.is_empty() {
                String::new()
            } else {
                format!("{{{s}}}")
            }
        };
        let _ = writeln!(out, "{name}_sum{} {}", braces(labels), self.sum);
        let _ = writeln!(out, "{name}_count{} {}", braces(labels), self.count);
    }
}

/// Escapes a Prometheus label value.
pub fn label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[derive(Debug)]
struct Inner {
    requests: BTreeMap<(String, String, u16), u64>,
    latency: BTreeMap<String, Histogram>,
    index_runs: BTreeMap<(String, &'static str), u64>,
    index_duration: Histogram,
    reindex_coalesced: u64,
    expand_requests: u64,
    expand_handles: u64,
    expand_tokens: Histogram,
    stale_generation_rejections: u64,
    handles_returned: u64,
    suggested: HashSet<(String, String)>,
    suggested_order: VecDeque<(String, String)>,
    suggested_total: u64,
    suggested_expanded: u64,
    internal_errors_total: u64,
    recent_internal_errors: VecDeque<Instant>,
}

/// All counters and histograms of one service.
#[derive(Debug)]
pub struct Metrics {
    inner: Mutex<Inner>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            inner: Mutex::new(Inner {
                requests: BTreeMap::new(),
                latency: BTreeMap::new(),
                index_runs: BTreeMap::new(),
                index_duration: Histogram::new(INDEX_BUCKETS),
                reindex_coalesced: 0,
                expand_requests: 0,
                expand_handles: 0,
                expand_tokens: Histogram::new(TOKEN_BUCKETS),
                stale_generation_rejections: 0,
                handles_returned: 0,
                suggested: HashSet::new(),
                suggested_order: VecDeque::new(),
                suggested_total: 0,
                suggested_expanded: 0,
                internal_errors_total: 0,
                recent_internal_errors: VecDeque::new(),
            }),
        }
    }
}

impl Metrics {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records one HTTP request (`endpoint` is the route template).
    pub fn request(&self, endpoint: &str, method: &str, status: u16, elapsed: Duration) {
        let mut m = self.lock();
        *m.requests
            .entry((endpoint.to_string(), method.to_string(), status))
            .or_insert(0) += 1;
        m.latency
            .entry(endpoint.to_string())
            .or_insert_with(|| Histogram::new(LATENCY_BUCKETS))
            .observe(elapsed.as_secs_f64());
        if status >= 500 && status != 503 {
            m.internal_errors_total += 1;
            let now = Instant::now();
            m.recent_internal_errors.push_back(now);
            while m.recent_internal_errors.len() > 1000 {
                m.recent_internal_errors.pop_front();
            }
        }
    }

    /// Internal (5xx other than 503) errors within [`ERROR_WINDOW`].
    pub fn recent_internal_errors(&self) -> usize {
        let mut m = self.lock();
        let now = Instant::now();
        while m
            .recent_internal_errors
            .front()
            .is_some_and(|t| now.duration_since(*t) > ERROR_WINDOW)
        {
            m.recent_internal_errors.pop_front();
        }
        m.recent_internal_errors.len()
    }

    /// Records a finished index run.
    pub fn index_run(&self, repo_id: &str, outcome: &'static str, elapsed: Duration) {
        let mut m = self.lock();
        *m.index_runs
            .entry((repo_id.to_string(), outcome))
            .or_insert(0) += 1;
        m.index_duration.observe(elapsed.as_secs_f64());
    }

    /// A reindex request was coalesced into a running one.
    pub fn coalesced(&self) {
        self.lock().reindex_coalesced += 1;
    }

    /// Handles returned by a query or pack; `suggested` are a pack's `expand_suggestion`.
    pub fn returned(&self, repo_id: &str, handles: usize, suggested: &[String]) {
        let mut m = self.lock();
        m.handles_returned += handles as u64;
        for id in suggested {
            let key = (repo_id.to_string(), id.clone());
            if m.suggested.insert(key.clone()) {
                m.suggested_total += 1;
                m.suggested_order.push_back(key);
                if m.suggested_order.len() > MAX_SUGGESTED
                    && let Some(old) = m.suggested_order.pop_front()
                {
                    m.suggested.remove(&old);
                }
            }
        }
    }

    /// An expand request was served: its handle ids and total tokens.
    pub fn expanded(&self, repo_id: &str, ids: &[String], tokens: u64) {
        let mut m = self.lock();
        m.expand_requests += 1;
        m.expand_handles += ids.len() as u64;
        m.expand_tokens.observe(tokens as f64);
        for id in ids {
            // Each suggestion counts as accepted once.
            if m.suggested.remove(&(repo_id.to_string(), id.clone())) {
                m.suggested_expanded += 1;
            }
        }
    }

    /// An expand was refused with `stale_generation`.
    pub fn stale_rejection(&self) {
        self.lock().stale_generation_rejections += 1;
    }

    /// Renders every counter and histogram (not the per-repo gauges).
    pub fn render(&self, out: &mut String) {
        let m = self.lock();
        out.push_str(
            "# HELP canopy_http_requests_total HTTP requests by endpoint, method and status.\n",
        );
        out.push_str("# TYPE canopy_http_requests_total counter\n");
        for ((endpoint, method, status), n) in &m.requests {
            let _ = writeln!(
                out,
                "canopy_http_requests_total{{endpoint=\"{}\",method=\"{}\",status=\"{status}\"}} {n}",
                label(endpoint),
                label(method)
            );
        }
        out.push_str(
            "# HELP canopy_http_request_duration_seconds HTTP request latency by endpoint.\n",
        );
        out.push_str("# TYPE canopy_http_request_duration_seconds histogram\n");
        for (endpoint, h) in &m.latency {
            h.render(
                out,
                "canopy_http_request_duration_seconds",
                &format!("endpoint=\"{}\"", label(endpoint)),
            );
        }
        out.push_str("# HELP canopy_index_runs_total Index runs by repository and outcome.\n");
        out.push_str("# TYPE canopy_index_runs_total counter\n");
        for ((repo, outcome), n) in &m.index_runs {
            let _ = writeln!(
                out,
                "canopy_index_runs_total{{repo_id=\"{}\",outcome=\"{outcome}\"}} {n}",
                label(repo)
            );
        }
        out.push_str(
            "# HELP canopy_index_duration_seconds Duration of index runs (all repositories).\n",
        );
        out.push_str("# TYPE canopy_index_duration_seconds histogram\n");
        m.index_duration
            .render(out, "canopy_index_duration_seconds", "");
        let counters: [(&str, &str, u64); 6] = [
            (
                "canopy_reindex_coalesced_total",
                "Reindex requests coalesced into a running reindex.",
                m.reindex_coalesced,
            ),
            (
                "canopy_expand_requests_total",
                "Expand requests served.",
                m.expand_requests,
            ),
            (
                "canopy_expand_handles_total",
                "Handles expanded.",
                m.expand_handles,
            ),
            (
                "canopy_stale_generation_rejections_total",
                "Expand requests refused with 409 stale_generation.",
                m.stale_generation_rejections,
            ),
            (
                "canopy_handles_returned_total",
                "Handles returned by /query and /evidence_pack.",
                m.handles_returned,
            ),
            (
                "canopy_internal_errors_total",
                "Responses with a 5xx status other than 503.",
                m.internal_errors_total,
            ),
        ];
        for (name, help, value) in counters {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} counter\n{name} {value}"
            );
        }
        out.push_str("# HELP canopy_expand_tokens Tokens per served expand request.\n");
        out.push_str("# TYPE canopy_expand_tokens histogram\n");
        m.expand_tokens.render(out, "canopy_expand_tokens", "");
        let _ = writeln!(
            out,
            "# HELP canopy_pack_suggested_handles_total Distinct handles suggested for expansion by evidence packs.\n# TYPE canopy_pack_suggested_handles_total counter\ncanopy_pack_suggested_handles_total {}",
            m.suggested_total
        );
        let _ = writeln!(
            out,
            "# HELP canopy_pack_suggestions_expanded_total Suggested handles that were later expanded.\n# TYPE canopy_pack_suggestions_expanded_total counter\ncanopy_pack_suggestions_expanded_total {}",
            m.suggested_expanded
        );
        let ratio = if m.suggested_total == 0 {
            0.0
        } else {
            m.suggested_expanded as f64 / m.suggested_total as f64
        };
        let _ = writeln!(
            out,
            "# HELP canopy_expand_acceptance_ratio Share of suggested handles that were expanded.\n# TYPE canopy_expand_acceptance_ratio gauge\ncanopy_expand_acceptance_ratio {ratio}"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_histograms_and_acceptance() {
        let m = Metrics::default();
        m.request("/query", "POST", 200, Duration::from_millis(3));
        m.returned("r", 4, &["h1".into(), "h2".into()]);
        m.expanded("r", &["h1".into()], 120);
        m.expanded("r", &["h1".into()], 120);
        let mut out = String::new();
        m.render(&mut out);
        assert!(out.contains(
            "canopy_http_requests_total{endpoint=\"/query\",method=\"POST\",status=\"200\"} 1"
        ));
        assert!(out.contains(
            "canopy_http_request_duration_seconds_bucket{endpoint=\"/query\",le=\"0.005\"} 1"
        ));
        assert!(out.contains("canopy_expand_acceptance_ratio 0.5"));
        assert!(out.contains("canopy_expand_tokens_count 2"));
    }
}
