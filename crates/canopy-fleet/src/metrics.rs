//! The fleet's counters and the Prometheus text they add to `/metrics`,
//! every series labelled with the node id (so a scrape of several nodes
//! can be told apart and summed).

use std::collections::{BTreeMap, VecDeque};
use std::fmt::Write as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;

/// Latency buckets (seconds) of forwards and heartbeat turns: loopback
/// forwards take about a millisecond, cross-zone ones tens.
const BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
];

/// A fixed-bucket histogram.
#[derive(Debug, Default, Clone)]
struct Histogram {
    counts: Vec<u64>,
    sum: f64,
    count: u64,
}

impl Histogram {
    fn observe(&mut self, value: f64) {
        if self.counts.is_empty() {
            self.counts = vec![0; BUCKETS.len()];
        }
        for (i, bound) in BUCKETS.iter().enumerate() {
            if value <= *bound {
                self.counts[i] += 1;
            }
        }
        self.sum += value;
        self.count += 1;
    }
}

/// Counters of one node.
#[derive(Debug, Default)]
pub struct FleetMetrics {
    heartbeats: AtomicU64,
    heartbeat_failures: AtomicU64,
    lease_acquisitions: AtomicU64,
    lease_renewals: AtomicU64,
    handovers: AtomicU64,
    fenced_refusals: AtomicU64,
    publishes: AtomicU64,
    losses: Mutex<BTreeMap<&'static str, u64>>,
    forwards: Mutex<BTreeMap<&'static str, Histogram>>,
    /// Owner node id → how forwards to it went.
    reach: Mutex<BTreeMap<String, Reach>>,
    turns: Mutex<Histogram>,
    recent_turns: Mutex<VecDeque<Duration>>,
}

/// Where a forward to the owner failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ForwardStage {
    /// No connection (refused, unreachable, connect timeout): nothing was
    /// sent, so the owner did nothing.
    Connect,
    /// Connected and sent, but no complete answer came back (reset, read
    /// timeout, not HTTP): a `/reindex` may have started there.
    Response,
}

impl ForwardStage {
    /// The `stage` label value.
    pub fn as_str(self) -> &'static str {
        match self {
            ForwardStage::Connect => "connect",
            ForwardStage::Response => "response",
        }
    }
}

/// How forwards to one owner went.
#[derive(Debug, Clone, Default)]
struct Reach {
    url: String,
    last_ok: Option<Instant>,
    last_failure: Option<(Instant, ForwardStage, String)>,
    failures: BTreeMap<ForwardStage, u64>,
}

/// An owner this node could not forward to lately (for `/health`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UnreachableOwner {
    /// The owner's node id.
    pub node_id: String,
    /// The URL it advertises (the one that failed).
    pub url: String,
    /// Where the last forward failed.
    pub stage: ForwardStage,
    /// The last failure's error.
    pub error: String,
    /// Milliseconds since that failure.
    pub last_failure_ms: u64,
    /// Failed forwards to this owner since this node started.
    pub failures: u64,
}

/// Heartbeat turns whose durations are kept for [`FleetMetrics::turn_durations`].
const RECENT_TURNS: usize = 4096;

/// Gauges read when rendering.
#[derive(Debug, Default, Clone)]
pub struct FleetGauges {
    /// Leases held.
    pub owned: usize,
    /// Live nodes in the last snapshot.
    pub live_nodes: usize,
    /// Database reachable.
    pub db_connected: bool,
    /// LISTEN session up.
    pub listening: bool,
    /// Reconnections so far.
    pub db_reconnects: u64,
    /// Database errors so far.
    pub db_errors: u64,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Escapes a Prometheus label value.
fn label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

impl FleetMetrics {
    pub(crate) fn heartbeat(&self, ok: bool) {
        if ok {
            self.heartbeats.fetch_add(1, Ordering::Relaxed);
        } else {
            self.heartbeat_failures.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub(crate) fn acquired(&self) {
        self.lease_acquisitions.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn renewed(&self) {
        self.lease_renewals.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn handover(&self) {
        self.handovers.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn fenced(&self) {
        self.fenced_refusals.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn published(&self) {
        self.publishes.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn lost(&self, reason: &'static str) {
        *lock(&self.losses).entry(reason).or_insert(0) += 1;
    }

    pub(crate) fn turn(&self, elapsed: Duration) {
        lock(&self.turns).observe(elapsed.as_secs_f64());
        let mut recent = lock(&self.recent_turns);
        if recent.len() == RECENT_TURNS {
            recent.pop_front();
        }
        recent.push_back(elapsed);
    }

    /// Durations of the last successful heartbeat turns (heartbeat,
    /// renewals, snapshot, acting on the plan), oldest first, at most 4,096.
    pub fn turn_durations(&self) -> Vec<Duration> {
        lock(&self.recent_turns).iter().copied().collect()
    }

    /// Records one request forwarded to the owner (`outcome`: `ok`,
    /// `error`, `misdirected`), measured by the service around the whole
    /// forward.
    pub fn observe_forward(&self, outcome: &'static str, elapsed: Duration) {
        lock(&self.forwards)
            .entry(outcome)
            .or_default()
            .observe(elapsed.as_secs_f64());
    }

    /// Records a forward that `owner` answered (whatever the status).
    pub fn forward_reached(&self, owner: &str, url: &str) {
        let mut reach = lock(&self.reach);
        let r = reach.entry(owner.to_string()).or_default();
        r.url = url.to_string();
        r.last_ok = Some(Instant::now());
    }

    /// Records a forward to `owner` at `url` that failed at `stage`.
    pub fn forward_failed(&self, owner: &str, url: &str, stage: ForwardStage, error: &str) {
        let mut reach = lock(&self.reach);
        let r = reach.entry(owner.to_string()).or_default();
        r.url = url.to_string();
        r.last_failure = Some((Instant::now(), stage, error.to_string()));
        *r.failures.entry(stage).or_insert(0) += 1;
    }

    /// Failed forwards so far, all owners and stages.
    pub fn forward_failures(&self) -> u64 {
        lock(&self.reach)
            .values()
            .flat_map(|r| r.failures.values())
            .sum()
    }

    /// The owners whose last forward failed less than `window` ago with no
    /// answered forward since, by node id.
    pub fn unreachable_owners(&self, window: Duration) -> Vec<UnreachableOwner> {
        lock(&self.reach)
            .iter()
            .filter_map(|(node_id, r)| {
                let (at, stage, error) = r.last_failure.as_ref()?;
                if at.elapsed() > window || r.last_ok.is_some_and(|ok| ok >= *at) {
                    return None;
                }
                Some(UnreachableOwner {
                    node_id: node_id.clone(),
                    url: r.url.clone(),
                    stage: *stage,
                    error: error.clone(),
                    last_failure_ms: at.elapsed().as_millis().min(u128::from(u64::MAX)) as u64,
                    failures: r.failures.values().sum(),
                })
            })
            .collect()
    }

    /// Leases taken so far.
    pub fn acquisitions(&self) -> u64 {
        self.lease_acquisitions.load(Ordering::Relaxed)
    }

    /// Lease renewals so far (one per lease per heartbeat).
    pub fn renewals(&self) -> u64 {
        self.lease_renewals.load(Ordering::Relaxed)
    }

    /// Writes refused because the lease was not current.
    pub fn fenced_refusals(&self) -> u64 {
        self.fenced_refusals.load(Ordering::Relaxed)
    }

    /// Leases lost, by reason.
    pub fn losses(&self) -> BTreeMap<&'static str, u64> {
        lock(&self.losses).clone()
    }

    /// Appends the Prometheus text of the node's fleet series.
    pub fn render(&self, node_id: &str, gauges: &FleetGauges, out: &mut String) {
        let node = format!("node_id=\"{}\"", label(node_id));
        render_gauges(&node, gauges, out);
        self.render_counters(&node, out);
        self.render_timings(&node, out);
    }

    /// Heartbeats, leases and publishing writes, counted since start.
    fn render_counters(&self, node: &str, out: &mut String) {
        let mut metric = |name: &str, kind: &str, help: &str, lines: &[(String, String)]| {
            write_metric(out, name, kind, help, lines);
        };
        let one = |v: String| vec![(node.to_string(), v)];
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed).to_string();
        metric(
            "canopy_fleet_heartbeats_total",
            "counter",
            "Successful heartbeats.",
            &one(load(&self.heartbeats)),
        );
        metric(
            "canopy_fleet_heartbeat_failures_total",
            "counter",
            "Failed heartbeats.",
            &one(load(&self.heartbeat_failures)),
        );
        metric(
            "canopy_fleet_lease_acquisitions_total",
            "counter",
            "Leases taken.",
            &one(load(&self.lease_acquisitions)),
        );
        metric(
            "canopy_fleet_lease_renewals_total",
            "counter",
            "Lease renewals (one per lease per heartbeat).",
            &one(load(&self.lease_renewals)),
        );
        metric(
            "canopy_fleet_handovers_total",
            "counter",
            "Leases handed over to a better-placed node.",
            &one(load(&self.handovers)),
        );
        metric(
            "canopy_fleet_fenced_writes_total",
            "counter",
            "Publishing writes refused because the lease was not current.",
            &one(load(&self.fenced_refusals)),
        );
        metric(
            "canopy_fleet_publishes_total",
            "counter",
            "Publishing writes accepted.",
            &one(load(&self.publishes)),
        );
        let losses: Vec<(String, String)> = lock(&self.losses)
            .iter()
            .map(|(reason, n)| (format!("{node},reason=\"{reason}\""), n.to_string()))
            .collect();
        metric(
            "canopy_fleet_lease_losses_total",
            "counter",
            "Leases lost, by reason.",
            &losses,
        );
    }

    /// Heartbeat turn and forward durations, and forwards that failed.
    fn render_timings(&self, node: &str, out: &mut String) {
        let turns = lock(&self.turns).clone();
        let _ = writeln!(
            out,
            "# HELP canopy_fleet_heartbeat_turn_seconds Successful heartbeat turns (heartbeat, renewals, snapshot, acting on the plan).\n# TYPE canopy_fleet_heartbeat_turn_seconds histogram"
        );
        render_histogram(out, "canopy_fleet_heartbeat_turn_seconds", node, &turns);
        let forwards = lock(&self.forwards).clone();
        let _ = writeln!(
            out,
            "# HELP canopy_fleet_forward_seconds Requests forwarded to the owner node, by outcome.\n# TYPE canopy_fleet_forward_seconds histogram"
        );
        for (outcome, h) in forwards {
            let labels = format!("{node},outcome=\"{outcome}\"");
            render_histogram(out, "canopy_fleet_forward_seconds", &labels, &h);
        }
        let failures: Vec<(String, String)> = lock(&self.reach)
            .iter()
            .flat_map(|(owner, r)| {
                let node = &node;
                r.failures.iter().map(move |(stage, n)| {
                    (
                        format!(
                            "{node},owner=\"{}\",stage=\"{}\"",
                            label(owner),
                            stage.as_str()
                        ),
                        n.to_string(),
                    )
                })
            })
            .collect();
        let _ = writeln!(
            out,
            "# HELP canopy_fleet_forward_failures_total Forwards whose owner could not be reached (stage connect: nothing sent; response: sent, no answer), by owner.\n# TYPE canopy_fleet_forward_failures_total counter"
        );
        for (labels, value) in failures {
            let _ = writeln!(
                out,
                "canopy_fleet_forward_failures_total{{{labels}}} {value}"
            );
        }
    }
}

/// The node's gauges: what it owns and sees, and its database connection.
fn render_gauges(node: &str, gauges: &FleetGauges, out: &mut String) {
    let mut metric = |name: &str, kind: &str, help: &str, lines: &[(String, String)]| {
        write_metric(out, name, kind, help, lines);
    };
    let one = |v: String| vec![(node.to_string(), v)];
    let flag = |b: bool| u8::from(b).to_string();
    metric(
        "canopy_fleet_owned_repos",
        "gauge",
        "Repositories whose lease this node holds.",
        &one(gauges.owned.to_string()),
    );
    metric(
        "canopy_fleet_live_nodes",
        "gauge",
        "Live nodes in the last snapshot.",
        &one(gauges.live_nodes.to_string()),
    );
    metric(
        "canopy_fleet_db_up",
        "gauge",
        "1 while the fleet database is reachable.",
        &one(flag(gauges.db_connected)),
    );
    metric(
        "canopy_fleet_listener_up",
        "gauge",
        "1 while event notifications are received.",
        &one(flag(gauges.listening)),
    );
    metric(
        "canopy_fleet_db_reconnects_total",
        "counter",
        "Times the database came back after an outage.",
        &one(gauges.db_reconnects.to_string()),
    );
    metric(
        "canopy_fleet_db_errors_total",
        "counter",
        "Failed database round trips and connection attempts.",
        &one(gauges.db_errors.to_string()),
    );
}

/// One series in the Prometheus text format: its help, type and lines.
fn write_metric(out: &mut String, name: &str, kind: &str, help: &str, lines: &[(String, String)]) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
    for (labels, value) in lines {
        let _ = writeln!(out, "{name}{{{labels}}} {value}");
    }
}

fn render_histogram(out: &mut String, name: &str, labels: &str, h: &Histogram) {
    let counts = if h.counts.is_empty() {
        vec![0; BUCKETS.len()]
    } else {
        h.counts.clone()
    };
    for (bound, count) in BUCKETS.iter().zip(&counts) {
        let _ = writeln!(out, "{name}_bucket{{{labels},le=\"{bound}\"}} {count}");
    }
    let _ = writeln!(out, "{name}_bucket{{{labels},le=\"+Inf\"}} {}", h.count);
    let _ = writeln!(out, "{name}_sum{{{labels}}} {}", h.sum);
    let _ = writeln!(out, "{name}_count{{{labels}}} {}", h.count);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_labelled_series() {
        let m = FleetMetrics::default();
        m.acquired();
        m.renewed();
        m.renewed();
        m.lost("expired");
        m.observe_forward("ok", Duration::from_micros(800));
        m.turn(Duration::from_millis(3));
        assert_eq!(m.turn_durations(), vec![Duration::from_millis(3)]);
        let mut out = String::new();
        let gauges = FleetGauges {
            owned: 3,
            live_nodes: 2,
            db_connected: true,
            ..FleetGauges::default()
        };
        m.render("n\"1", &gauges, &mut out);
        assert!(
            out.contains("canopy_fleet_owned_repos{node_id=\"n\\\"1\"} 3"),
            "{out}"
        );
        assert!(out.contains("canopy_fleet_lease_renewals_total{node_id=\"n\\\"1\"} 2"));
        assert!(
            out.contains(
                "canopy_fleet_lease_losses_total{node_id=\"n\\\"1\",reason=\"expired\"} 1"
            )
        );
        assert!(out.contains(
            "canopy_fleet_forward_seconds_bucket{node_id=\"n\\\"1\",outcome=\"ok\",le=\"0.001\"} 1"
        ));
        assert!(out.contains(
            "canopy_fleet_forward_seconds_bucket{node_id=\"n\\\"1\",outcome=\"ok\",le=\"0.0005\"} 0"
        ));
        assert!(out.contains("canopy_fleet_db_up{node_id=\"n\\\"1\"} 1"));
        assert!(out.contains("canopy_fleet_heartbeat_turn_seconds_count{node_id=\"n\\\"1\"} 1"));
    }

    #[test]
    fn an_owner_is_unreachable_until_a_forward_reaches_it() {
        let m = FleetMetrics::default();
        let window = Duration::from_secs(60);
        m.forward_reached("b", "http://b");
        assert!(m.unreachable_owners(window).is_empty());
        m.forward_failed("b", "http://b", ForwardStage::Connect, "refused");
        m.forward_failed("b", "http://b", ForwardStage::Response, "reset");
        let down = m.unreachable_owners(window);
        assert_eq!(down.len(), 1, "{down:?}");
        assert_eq!(
            (down[0].node_id.as_str(), down[0].stage, down[0].failures),
            ("b", ForwardStage::Response, 2)
        );
        let mut out = String::new();
        m.render("a", &FleetGauges::default(), &mut out);
        assert!(
            out.contains(
                "canopy_fleet_forward_failures_total{node_id=\"a\",owner=\"b\",stage=\"connect\"} 1"
            ),
            "{out}"
        );
        assert_eq!(m.forward_failures(), 2);
        m.forward_reached("b", "http://b");
        assert!(m.unreachable_owners(window).is_empty());
        assert_eq!(m.forward_failures(), 2);
    }
}
