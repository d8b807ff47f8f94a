//! Health and the gauges: `GET /health` classifies each repository (the
//! rule is on [`Service::health`]) and the service as its worst; `GET
//! /metrics` adds per-repository gauges, read from the state when rendered,
//! to the counters of [`crate::metrics`].

use std::sync::Arc;
use std::time::Duration;

use canopy_client::api::{HealthResponse, RepoHealth, RepoView};
use canopy_core::Engine;

use super::entry::{RepoEntry, RunInfo};
use super::{Service, head_sha, lock};
use crate::metrics::label;
use crate::registry::RepoRecord;

/// Consecutive failed runs after which a repository is `unhealthy`.
pub const UNHEALTHY_FAILURES: u32 = 3;
/// A follow-up run queued behind a run older than this counts as backlog.
pub const BACKLOG_AFTER: Duration = Duration::from_secs(60);
/// A watched repository whose oldest unindexed change is older than this
/// is `degraded` (index lag).
pub const INDEX_LAG_DEGRADED: Duration = Duration::from_secs(30);

impl Service {
    /// `GET /health`: classification from index errors, backlog and staleness.
    ///
    /// Per repository, the first matching rule wins:
    /// * `unhealthy`: the directory cannot be opened; or
    ///   [`UNHEALTHY_FAILURES`] runs failed in a row; or the last run failed
    ///   and there is no generation to serve;
    /// * `recovering`: a run is in progress after a failure or an interrupted
    ///   run, or the first run is in progress;
    /// * `degraded`: the last run failed (an older generation is served); no
    ///   run ever completed; a follow-up run has waited behind a run older
    ///   than [`BACKLOG_AFTER`] (backlog); a watched change waits longer
    ///   than [`INDEX_LAG_DEGRADED`] (index lag); or the served commit is behind
    ///   `HEAD` (stale);
    /// * `healthy` otherwise.
    ///
    /// The service's status is the worst of its repositories (order healthy <
    /// degraded < recovering < unhealthy), at least `degraded` when internal
    /// errors occurred in the last five minutes. `detailed` adds per-repo entries.
    pub fn health(&self, detailed: bool) -> HealthResponse {
        let mut repos = Vec::new();
        let mut worst = Health::Healthy;
        let mut reasons = Vec::new();
        // Without credentials no repository is named, but a status other
        // than healthy still says why in general terms (issue 32, U14).
        let mut anonymous_reasons = Vec::new();
        let mut not_healthy = 0usize;
        for entry in self.entries() {
            let (record, run, rerun) = {
                let st = lock(&entry.state);
                (st.record.clone(), st.run.clone(), st.rerun.is_some())
            };
            let (health, why) = classify(&entry, &record, run.as_ref(), rerun);
            if health != Health::Healthy {
                reasons.push(format!("{}: {}", record.name, why.join("; ")));
                not_healthy += 1;
            }
            worst = worst.max(health);
            repos.push(RepoHealth {
                repo_id: record.repo_id,
                name: record.name,
                status: health.as_str().into(),
                reasons: why,
            });
        }
        if not_healthy > 0 {
            anonymous_reasons.push(format!(
                "{not_healthy} repositor{} not healthy (send the token for details)",
                if not_healthy == 1 { "y is" } else { "ies are" }
            ));
        }
        let errors = self.metrics.recent_internal_errors();
        if errors > 0 {
            worst = worst.max(Health::Degraded);
            let reason = format!("{errors} internal error(s) in the last 5 minutes");
            reasons.push(reason.clone());
            anonymous_reasons.push(reason);
        }
        if let Err(e) = self.registry.latest_seq() {
            tracing::error!("registry unreadable: {e}");
            worst = Health::Unhealthy;
            let reason = "the registry database cannot be read".to_string();
            reasons.push(reason.clone());
            anonymous_reasons.push(reason);
        }
        HealthResponse {
            status: worst.as_str().into(),
            reasons: if detailed { reasons } else { anonymous_reasons },
            uptime_seconds: self.started.elapsed().as_secs(),
            repos: detailed.then_some(repos),
        }
    }

    /// The Prometheus text of `GET /metrics`: the request metrics, the
    /// service's own gauges, then the per-repository series.
    pub fn render_metrics(&self) -> String {
        let mut out = String::new();
        self.metrics.render(&mut out);
        let entries = self.entries();
        self.render_service_gauges(&mut out, &entries);
        let views: Vec<(RepoView, Option<f64>)> = entries
            .iter()
            .map(|e| {
                let last = lock(&e.state)
                    .record
                    .last_report
                    .as_ref()
                    .map(|r| r.duration_ms as f64 / 1000.0);
                (e.view(), last)
            })
            .collect();
        render_repo_gauges(&mut out, &views);
        render_last_index(&mut out, &views);
        out
    }

    /// The service-wide series: uptime, repositories, open and closed
    /// engines, the newest event.
    fn render_service_gauges(&self, out: &mut String, entries: &[Arc<RepoEntry>]) {
        gauge(
            out,
            "canopy_uptime_seconds",
            "Seconds since the service started.",
        );
        out.push_str(&format!(
            "canopy_uptime_seconds {}\n",
            self.started.elapsed().as_secs()
        ));
        gauge(out, "canopy_repos", "Registered repositories.");
        out.push_str(&format!("canopy_repos {}\n", entries.len()));
        gauge_of(
            out,
            "canopy_engines_open",
            "Repositories whose engine is open (idle ones are closed after --engine-idle-secs).",
            entries.iter().filter(|e| e.engine_open()).count(),
        );
        gauge_of(
            out,
            "canopy_resolver_worlds_kept",
            "Open engines holding a resolver world for the next edit to update (watched repositories build theirs when the watch starts).",
            entries.iter().filter(|e| e.resolver_world_kept()).count(),
        );
        out.push_str(
            "# HELP canopy_engines_closed_total Engines closed for being idle.\n# TYPE canopy_engines_closed_total counter\n",
        );
        out.push_str(&format!(
            "canopy_engines_closed_total {}\n",
            self.engines_closed
                .load(std::sync::atomic::Ordering::Relaxed)
        ));
        gauge(
            out,
            "canopy_events_latest_seq",
            "Sequence number of the newest event.",
        );
        out.push_str(&format!(
            "canopy_events_latest_seq {}\n",
            *self.events.borrow()
        ));
    }
}

/// Writes the `# HELP` and `# TYPE ... gauge` lines of one gauge.
fn gauge(out: &mut String, name: &str, help: &str) {
    out.push_str(&format!("# HELP {name} {help}\n# TYPE {name} gauge\n"));
}

/// Writes one gauge without labels: its `# HELP` and `# TYPE` lines and
/// its value.
fn gauge_of(out: &mut String, name: &str, help: &str, value: usize) {
    gauge(out, name, help);
    out.push_str(&format!("{name} {value}\n"));
}

/// The Prometheus labels naming one repository.
fn repo_labels(v: &RepoView) -> String {
    format!(
        "repo_id=\"{}\",name=\"{}\"",
        label(&v.repo_id),
        label(&v.name)
    )
}

/// One series per repository for each [`RepoGauge`], gauge by gauge.
fn render_repo_gauges(out: &mut String, views: &[(RepoView, Option<f64>)]) {
    let per_repo: [RepoGauge; 7] = [
        ("canopy_repo_generation", "Last complete generation.", |v| {
            v.generation as f64
        }),
        (
            "canopy_repo_ready",
            "1 when a complete generation is served.",
            |v| f64::from(u8::from(v.ready)),
        ),
        ("canopy_repo_indexing", "1 while a reindex runs.", |v| {
            f64::from(u8::from(v.indexing))
        }),
        (
            "canopy_repo_reindex_queued",
            "1 when a follow-up reindex is queued (backlog).",
            |v| f64::from(u8::from(v.rerun_queued)),
        ),
        (
            "canopy_repo_consecutive_failures",
            "Failed reindex runs since the last success.",
            |v| f64::from(v.consecutive_failures),
        ),
        (
            "canopy_repo_watched",
            "1 when the repository is re-indexed on file-system events.",
            |v| f64::from(u8::from(v.watch)),
        ),
        (
            "canopy_repo_index_lag_seconds",
            "Age of the oldest change seen by the watcher and not indexed yet (0: none).",
            |v| v.index_lag_seconds,
        ),
    ];
    for (name, help, get) in per_repo {
        gauge(out, name, help);
        for (v, _) in views {
            out.push_str(&format!("{name}{{{}}} {}\n", repo_labels(v), get(v)));
        }
    }
}

/// The duration and file counts of each repository's last successful
/// reindex (repositories without one have no series).
fn render_last_index(out: &mut String, views: &[(RepoView, Option<f64>)]) {
    gauge(
        out,
        "canopy_index_last_duration_seconds",
        "Duration of the last successful reindex.",
    );
    for (v, last) in views {
        if let Some(d) = last {
            out.push_str(&format!(
                "canopy_index_last_duration_seconds{{{}}} {d}\n",
                repo_labels(v)
            ));
        }
    }
    gauge(
        out,
        "canopy_index_last_files",
        "Files of the last successful reindex by outcome (indexed, removed, unchanged).",
    );
    for (v, _) in views {
        if let Some(r) = &v.last_index {
            for (kind, n) in [
                ("indexed", r.files_indexed),
                ("removed", r.files_removed),
                ("unchanged", r.files_unchanged),
            ] {
                out.push_str(&format!(
                    "canopy_index_last_files{{{},kind=\"{kind}\"}} {n}\n",
                    repo_labels(v)
                ));
            }
        }
    }
}

/// A per-repository gauge: name, help and how to read it.
type RepoGauge = (&'static str, &'static str, fn(&RepoView) -> f64);

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Health {
    Healthy,
    Degraded,
    Recovering,
    Unhealthy,
}

impl Health {
    fn as_str(self) -> &'static str {
        match self {
            Health::Healthy => "healthy",
            Health::Degraded => "degraded",
            Health::Recovering => "recovering",
            Health::Unhealthy => "unhealthy",
        }
    }
}

fn classify(
    entry: &RepoEntry,
    record: &RepoRecord,
    run: Option<&RunInfo>,
    rerun: bool,
) -> (Health, Vec<String>) {
    if !entry.root.is_dir() {
        return (
            Health::Unhealthy,
            vec!["the repository directory cannot be opened".into()],
        );
    }
    if let Some(damage) = Engine::damage_at(&entry.root) {
        return (
            Health::Unhealthy,
            vec![format!(
                "the index is damaged ({damage}); POST /reindex rebuilds it"
            )],
        );
    }
    let failures = record.consecutive_failures;
    if failures >= UNHEALTHY_FAILURES {
        return (
            Health::Unhealthy,
            vec![format!("{failures} reindex runs failed in a row")],
        );
    }
    if failures > 0 && record.generation == 0 && run.is_none() {
        return (
            Health::Unhealthy,
            vec!["the last reindex failed and no generation can be served".into()],
        );
    }
    if let Some(run) = run {
        if run.recovering {
            return (
                Health::Recovering,
                vec!["reindexing after a failed or interrupted run".into()],
            );
        }
        if record.generation == 0 {
            return (Health::Recovering, vec!["first index in progress".into()]);
        }
    }
    let mut why = Vec::new();
    if failures > 0 {
        why.push(format!(
            "the last reindex failed; serving generation {}",
            record.generation
        ));
    }
    if record.generation == 0 && run.is_none() && failures == 0 {
        why.push("never indexed: POST /reindex".into());
    }
    if let Some(since) = *lock(&entry.unindexed_since)
        && since.elapsed() > INDEX_LAG_DEGRADED
    {
        why.push(format!(
            "index lag: files changed {} s ago are not indexed yet",
            since.elapsed().as_secs()
        ));
    }
    if let Some(run) = run
        && rerun
        && run.started.elapsed() > BACKLOG_AFTER
    {
        why.push(format!(
            "reindex backlog: a follow-up run waits behind a run started {} s ago",
            run.started.elapsed().as_secs()
        ));
    }
    if run.is_none()
        && record.generation > 0
        && let (Some(served), Some(head)) = (&record.commit_sha, head_sha(&entry.root))
        && *served != head
    {
        why.push(format!(
            "stale: generation {} was indexed at {} but HEAD is {}",
            record.generation,
            &served[..served.len().min(12)],
            &head[..head.len().min(12)]
        ));
    }
    if why.is_empty() {
        (Health::Healthy, why)
    } else {
        (Health::Degraded, why)
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::time::Instant;

    use super::*;
    use crate::registry::RepoStatus;

    fn entry_at(root: &Path) -> (RepoEntry, RepoRecord) {
        let record = RepoRecord {
            generation: 1,
            status: RepoStatus::Ready,
            ..RepoRecord::registered("r".into(), "repo".into(), root.to_path_buf(), 0)
        };
        (RepoEntry::new(record.clone(), None), record)
    }

    fn run(recovering: bool, age: Duration) -> RunInfo {
        RunInfo {
            glob: None,
            paths: None,
            commit_sha: None,
            started: Instant::now().checked_sub(age).unwrap_or_else(Instant::now),
            carry_bump: false,
            recovering,
        }
    }

    #[test]
    fn health_classification_rules() {
        let dir = tempfile::tempdir().unwrap();
        let (entry, ready) = entry_at(dir.path());
        let health =
            |r: &RepoRecord, run: Option<&RunInfo>, rerun: bool| classify(&entry, r, run, rerun).0;
        assert_eq!(health(&ready, None, false), Health::Healthy);

        let mut failed = ready.clone();
        failed.consecutive_failures = 1;
        assert_eq!(health(&failed, None, false), Health::Degraded);
        assert_eq!(
            health(&failed, Some(&run(true, Duration::ZERO)), false),
            Health::Recovering
        );
        failed.consecutive_failures = UNHEALTHY_FAILURES;
        assert_eq!(health(&failed, None, false), Health::Unhealthy);

        let mut never = ready.clone();
        never.generation = 0;
        assert_eq!(health(&never, None, false), Health::Degraded);
        assert_eq!(
            health(&never, Some(&run(false, Duration::ZERO)), false),
            Health::Recovering
        );
        never.consecutive_failures = 1;
        assert_eq!(health(&never, None, false), Health::Unhealthy);

        // Backlog: a follow-up queued behind a long run.
        let long = run(false, BACKLOG_AFTER + Duration::from_secs(1));
        assert_eq!(health(&ready, Some(&long), true), Health::Degraded);
        assert_eq!(health(&ready, Some(&long), false), Health::Healthy);
        assert_eq!(
            health(&ready, Some(&run(false, Duration::ZERO)), true),
            Health::Healthy
        );

        let (gone, record) = entry_at(&dir.path().join("missing"));
        assert_eq!(classify(&gone, &record, None, false).0, Health::Unhealthy);
        assert!(Health::Unhealthy > Health::Recovering && Health::Recovering > Health::Degraded);
    }
}
