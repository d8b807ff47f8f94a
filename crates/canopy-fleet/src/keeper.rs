//! The lease keeper: one task per node that, every heartbeat, records the
//! node as live, renews its leases in one statement, reads one snapshot of
//! nodes and leases, and acts on [`crate::lease::plan`] (take free leases,
//! hand over misplaced ones, release orphans). It reports every change of
//! ownership to the service as a [`LeaseChange`].
//!
//! It runs on its own database session, so requests queueing for the pool
//! never delay a renewal; and it checks local deadlines before anything
//! else on each turn, so a node whose turns stall (database down, process
//! paused) stops using its leases on time.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::config::Timing;
use crate::db::with_client;
use crate::error::FleetError;
use crate::fleet::{Cached, Inner, NodeState};
use crate::lease::{self, Fence, LeasePhase, LeaseSeen, LocalLease, NodeSeen};
use crate::model::RepoRow;

/// Why this node stopped owning a repository.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LossReason {
    /// The local deadline passed without a successful renewal (the
    /// database was unreachable, or the process was paused).
    Expired,
    /// A renewal found the lease held by another node (taken over after
    /// it expired).
    TakenOver,
    /// The repository was unregistered.
    Removed,
    /// A write was refused by the database's fence.
    Fenced,
    /// Handed over to a better-placed node (after [`LeaseChange::Handover`]).
    HandedOver,
    /// The node is shutting down.
    Shutdown,
    /// Another process registered this node id.
    Superseded,
}

impl LossReason {
    /// The label used in metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            LossReason::Expired => "expired",
            LossReason::TakenOver => "taken_over",
            LossReason::Removed => "removed",
            LossReason::Fenced => "fenced",
            LossReason::HandedOver => "handed_over",
            LossReason::Shutdown => "shutdown",
            LossReason::Superseded => "superseded",
        }
    }
}

/// A change of ownership, sent to the service in order.
#[derive(Clone, Debug)]
pub enum LeaseChange {
    /// This node now owns `repo`: bring its checkout and index up to date
    /// and publish under `fence`.
    Acquired {
        /// The repository as registered, with the state last published.
        repo: Box<RepoRow>,
        /// The lease.
        fence: Fence,
        /// The node that held the lease before (itself after a restart or
        /// an outage; `None` the first time).
        previous_holder: Option<String>,
    },
    /// Hand `repo_id` over: stop index runs for it (the fence is already
    /// revoked), then call [`crate::Fleet::release`]. Released anyway after
    /// the drain timeout.
    Handover {
        /// Repository.
        repo_id: String,
        /// The lease epoch being given up.
        epoch: u64,
    },
    /// This node no longer owns `repo_id`: stop writing. (Its local index
    /// may still answer reads while [`crate::Fleet::route`] says so.)
    Lost {
        /// Repository.
        repo_id: String,
        /// The lease epoch lost.
        epoch: u64,
        /// Why.
        reason: LossReason,
    },
    /// A setting of `repo_id`, which this node owns, changed in the
    /// registry (`fleet_repos.watch`, written by any node with
    /// [`crate::Fleet::set_watch`]): apply it. Seen by the keeper's
    /// snapshot, so at most one heartbeat after the change committed; sent
    /// again if it changes back, never for a repository this node does not
    /// hold. (On acquisition the flag comes with [`LeaseChange::Acquired`].)
    Settings {
        /// Repository.
        repo_id: String,
        /// The watch flag now stored.
        watch: bool,
    },
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

fn ms(v: i64) -> Duration {
    Duration::from_millis(v.max(0) as u64)
}

/// Runs until the node stops or its `Inner` is dropped.
pub(crate) async fn run(weak: Weak<Inner>, mut stop: tokio::sync::watch::Receiver<bool>) {
    loop {
        let Some(inner) = weak.upgrade() else { return };
        let started = Instant::now();
        let delay = match turn(&inner).await {
            Ok(()) => {
                inner.metrics.turn(started.elapsed());
                inner
                    .config
                    .timing
                    .heartbeat
                    .saturating_sub(started.elapsed())
            }
            Err(e) => {
                tracing::debug!(node = %inner.config.node_id, "fleet heartbeat failed: {e}");
                // Retry sooner than a heartbeat: leases run out meanwhile.
                (inner.config.timing.heartbeat / 4).max(Duration::from_millis(50))
            }
        };
        drop(inner);
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = stop.changed() => return,
        }
        if *stop.borrow() {
            return;
        }
    }
}

/// One heartbeat turn: check local deadlines, then beat, renew, read one
/// snapshot, act on the plan and finish overdue drains, in that order.
pub(crate) async fn turn(inner: &Arc<Inner>) -> Result<(), FleetError> {
    expire_local(inner);
    if inner.node_state() != NodeState::Active {
        return Ok(());
    }
    let timing = inner.config.timing.clone();
    let me = inner.config.node_id.clone();
    beat(inner, &me).await?;
    *crate::fleet::lock(&inner.last_beat) = Some(Instant::now());
    let not_renewed = renew_held(inner, &me, &timing).await?;
    let (nodes, leases_seen) = refresh_snapshot(inner, &me, not_renewed).await?;
    act_on_plan(inner, &me, &timing, &nodes, &leases_seen).await?;
    finish_due_drains(inner, &timing).await
}

/// Step 1: the heartbeat. A row taken by another incarnation means this
/// process must stop acting as the node.
async fn beat(inner: &Arc<Inner>, me: &str) -> Result<(), FleetError> {
    let beat = with_client!(&inner.db, keeper_conn, |c| c
        .query_opt(
            "UPDATE fleet_nodes SET heartbeat_at = clock_timestamp()
             WHERE node_id = $1 AND incarnation = $2 AND state = 'active' RETURNING 1",
            &[&me, &inner.incarnation],
        )
        .await);
    match beat {
        Ok(Some(_)) => inner.metrics.heartbeat(true),
        Ok(None) => {
            inner.metrics.heartbeat(false);
            tracing::error!(node = %me, "another process took over this node id; giving up every lease");
            inner.set_node_state(NodeState::Superseded);
            inner.drop_all(LossReason::Superseded);
            return Err(FleetError::NodeIdInUse {
                node_id: me.to_string(),
                age: Duration::ZERO,
            });
        }
        Err(e) => {
            inner.metrics.heartbeat(false);
            return Err(e);
        }
    }
    Ok(())
}

/// Step 2: renews everything held (draining leases too: nobody may take
/// them before the service stopped). Returns the leases the database did
/// not renew, already revoked locally, with their epochs.
async fn renew_held(
    inner: &Arc<Inner>,
    me: &str,
    timing: &Timing,
) -> Result<Vec<(String, u64)>, FleetError> {
    let held: Vec<(String, i64)> = inner
        .held()
        .into_iter()
        .map(|(r, e)| (r, e.min(i64::MAX as u64) as i64))
        .collect();
    let mut not_renewed = Vec::new();
    if !held.is_empty() {
        let (repos, epochs): (Vec<String>, Vec<i64>) = held.iter().cloned().unzip();
        let sent = Instant::now();
        let rows = with_client!(&inner.db, keeper_conn, |c| c
            .query(
                "UPDATE fleet_leases l SET renewed_at = clock_timestamp(),
                        expires_at = clock_timestamp() + make_interval(secs => $2)
                 FROM unnest($3::text[], $4::int8[]) AS h(repo_id, epoch)
                 WHERE l.repo_id = h.repo_id AND l.epoch = h.epoch AND l.node_id = $1
                   AND l.expires_at > clock_timestamp()
                 RETURNING l.repo_id",
                &[&me, &secs(timing.lease_ttl), &repos, &epochs],
            )
            .await)?;
        let renewed: HashSet<String> = rows
            .iter()
            .filter_map(|r| r.try_get::<_, String>(0).ok())
            .collect();
        let mut leases = crate::fleet::lock(&inner.leases);
        for (repo, epoch) in &held {
            match leases.get(repo) {
                Some(l) if renewed.contains(repo) => {
                    l.renewed(sent, timing);
                    inner.metrics.renewed();
                }
                Some(l) if l.fence.epoch() as i64 == *epoch => {
                    if let Some(l) = leases.remove(repo) {
                        l.fence.revoke();
                        not_renewed.push((repo.clone(), l.fence.epoch()));
                    }
                }
                _ => {}
            }
        }
    }
    Ok(not_renewed)
}

/// Step 3: one snapshot of nodes and leases; records why each lease that
/// was not renewed was lost, and publishes the snapshot to the cache.
async fn refresh_snapshot(
    inner: &Arc<Inner>,
    me: &str,
    not_renewed: Vec<(String, u64)>,
) -> Result<(Vec<NodeSeen>, Vec<LeaseSeen>), FleetError> {
    let (nodes, leases_seen, cache, watches) = snapshot(inner).await?;
    for (repo, epoch) in not_renewed {
        let reason = match cache.leases.get(&repo) {
            None => LossReason::Removed,
            Some(c) if c.held && c.holder.as_deref() != Some(me) => LossReason::TakenOver,
            Some(_) => LossReason::Expired,
        };
        inner.lost(&repo, epoch, reason);
    }
    *crate::fleet::write(&inner.cache) = cache;
    let held: Vec<String> = crate::fleet::lock(&inner.leases).keys().cloned().collect();
    let changed = {
        let mut known = crate::fleet::lock(&inner.watch_known);
        watch_changes(&held, &watches, &mut known)
    };
    for (repo_id, watch) in changed {
        tracing::info!(repo = %repo_id, watch, "the repository's watch flag changed");
        inner.send(LeaseChange::Settings { repo_id, watch });
    }
    Ok((nodes, leases_seen))
}

/// The watch flags of held repositories that differ from what this node
/// last told the service (`known`, updated); forgets repositories no
/// longer held, so a lease taken again starts from its acquisition's row.
fn watch_changes(
    held: &[String],
    seen: &HashMap<String, bool>,
    known: &mut HashMap<String, bool>,
) -> Vec<(String, bool)> {
    known.retain(|repo, _| held.contains(repo));
    let mut changed = Vec::new();
    for repo in held {
        let Some(&watch) = seen.get(repo) else {
            continue;
        };
        if known.insert(repo.clone(), watch) != Some(watch) {
            changed.push((repo.clone(), watch));
        }
    }
    changed.sort();
    changed
}

/// Step 4: plans from the snapshot and acts (release orphans, start
/// handovers, take free leases).
async fn act_on_plan(
    inner: &Arc<Inner>,
    me: &str,
    timing: &Timing,
    nodes: &[NodeSeen],
    leases_seen: &[LeaseSeen],
) -> Result<(), FleetError> {
    let plan = {
        let leases = crate::fleet::lock(&inner.leases);
        lease::plan(me, nodes, leases_seen, &leases, timing)
    };
    if !plan.orphans.is_empty() {
        let (repos, epochs): (Vec<String>, Vec<i64>) = plan
            .orphans
            .iter()
            .map(|(r, e)| (r.clone(), *e as i64))
            .unzip();
        release_in_db(inner, &repos, &epochs).await?;
    }
    for repo in &plan.handover {
        let epoch = {
            let mut leases = crate::fleet::lock(&inner.leases);
            leases.get_mut(repo).map(|l| {
                l.start_drain(Instant::now());
                l.fence.epoch()
            })
        };
        if let Some(epoch) = epoch {
            inner.metrics.handover();
            inner.send(LeaseChange::Handover {
                repo_id: repo.clone(),
                epoch,
            });
        }
    }
    if !plan.acquire.is_empty() {
        acquire(inner, &plan.acquire, leases_seen).await?;
    }
    Ok(())
}

/// Step 5: releases the drains the service did not finish in time.
async fn finish_due_drains(inner: &Arc<Inner>, timing: &Timing) -> Result<(), FleetError> {
    let due: Vec<(String, u64)> = {
        let leases = crate::fleet::lock(&inner.leases);
        leases
            .iter()
            .filter(|(_, l)| l.phase(Instant::now(), timing) == LeasePhase::DrainDue)
            .map(|(r, l)| (r.clone(), l.fence.epoch()))
            .collect()
    };
    for (repo, _) in due {
        inner.release_local(&repo, LossReason::HandedOver).await?;
    }
    Ok(())
}

/// Drops leases whose local deadline passed.
pub(crate) fn expire_local(inner: &Inner) {
    let now = Instant::now();
    let expired: Vec<(String, u64)> = {
        let mut leases = crate::fleet::lock(&inner.leases);
        let gone: Vec<String> = leases
            .iter()
            .filter(|(_, l)| l.phase(now, &inner.config.timing) == LeasePhase::Expired)
            .map(|(r, _)| r.clone())
            .collect();
        gone.into_iter()
            .filter_map(|r| leases.remove(&r).map(|l| (r, l.fence.epoch())))
            .collect()
    };
    for (repo, epoch) in expired {
        tracing::warn!(repo = %repo, epoch, "lease expired locally before it could be renewed");
        inner.lost(&repo, epoch, LossReason::Expired);
    }
}

/// Nodes, leases, the routing cache, and each repository's watch flag.
type Snapshot = (Vec<NodeSeen>, Vec<LeaseSeen>, Cached, HashMap<String, bool>);

async fn snapshot(inner: &Arc<Inner>) -> Result<Snapshot, FleetError> {
    let ttl = secs(inner.config.timing.lease_ttl);
    let (node_rows, lease_rows) = with_client!(&inner.db, keeper_conn, |c| {
        let nodes = c
            .query(
                "SELECT node_id, advertise_url,
                        state = 'active' AND heartbeat_at > clock_timestamp() - make_interval(secs => $1),
                        floor(extract(epoch FROM clock_timestamp() - joined_at) * 1000)::int8
                 FROM fleet_nodes",
                &[&ttl],
            )
            .await?;
        let leases = c
            .query(
                "SELECT l.repo_id, l.node_id, l.epoch,
                        l.expires_at IS NOT NULL AND l.expires_at > clock_timestamp(),
                        floor(extract(epoch FROM clock_timestamp()
                              - coalesce(l.expires_at, to_timestamp(r.added_at))) * 1000)::int8,
                        r.watch
                 FROM fleet_leases l JOIN fleet_repos r USING (repo_id)",
                &[],
            )
            .await?;
        Ok((nodes, leases))
    })?;
    let parse = |e: tokio_postgres::Error| FleetError::Database(e.to_string());
    let mut nodes = Vec::with_capacity(node_rows.len());
    let mut urls = HashMap::new();
    for r in &node_rows {
        let node_id: String = r.try_get(0).map_err(parse)?;
        let url: String = r.try_get(1).map_err(parse)?;
        let live: bool = r.try_get(2).map_err(parse)?;
        let joined: i64 = r.try_get(3).map_err(parse)?;
        urls.insert(node_id.clone(), (url, live));
        nodes.push(NodeSeen {
            node_id,
            live,
            joined_for: ms(joined),
        });
    }
    let mut leases = Vec::with_capacity(lease_rows.len());
    let mut cached = HashMap::with_capacity(lease_rows.len());
    let mut watches = HashMap::with_capacity(lease_rows.len());
    for r in &lease_rows {
        let seen = LeaseSeen {
            repo_id: r.try_get(0).map_err(parse)?,
            holder: r.try_get(1).map_err(parse)?,
            epoch: r.try_get::<_, i64>(2).map_err(parse)?.max(0) as u64,
            held: r.try_get(3).map_err(parse)?,
            free_for: ms(r.try_get(4).map_err(parse)?),
        };
        watches.insert(seen.repo_id.clone(), r.try_get(5).map_err(parse)?);
        cached.insert(
            seen.repo_id.clone(),
            crate::fleet::CachedLease {
                holder: seen.holder.clone(),
                epoch: seen.epoch,
                held: seen.held,
            },
        );
        leases.push(seen);
    }
    let cache = Cached {
        nodes: urls,
        leases: cached,
    };
    Ok((nodes, leases, cache, watches))
}

async fn acquire(
    inner: &Arc<Inner>,
    wanted: &[(String, u64)],
    seen: &[LeaseSeen],
) -> Result<(), FleetError> {
    let timing = inner.config.timing.clone();
    let me = inner.config.node_id.clone();
    let (repos, epochs): (Vec<String>, Vec<i64>) =
        wanted.iter().map(|(r, e)| (r.clone(), *e as i64)).unzip();
    let sent = Instant::now();
    let rows = with_client!(&inner.db, keeper_conn, |c| c
        .query(
            "UPDATE fleet_leases l SET node_id = $1, epoch = l.epoch + 1,
                    acquired_at = clock_timestamp(), renewed_at = clock_timestamp(),
                    expires_at = clock_timestamp() + make_interval(secs => $2)
             FROM unnest($3::text[], $4::int8[]) AS w(repo_id, epoch)
             WHERE l.repo_id = w.repo_id AND l.epoch = w.epoch
               AND (l.expires_at IS NULL OR l.expires_at <= clock_timestamp())
               AND EXISTS (SELECT 1 FROM fleet_nodes n WHERE n.node_id = $1
                           AND n.incarnation = $5 AND n.state = 'active')
             RETURNING l.repo_id, l.epoch",
            &[
                &me,
                &secs(timing.lease_ttl),
                &repos,
                &epochs,
                &inner.incarnation
            ],
        )
        .await)?;
    let mut won = Vec::new();
    {
        let mut leases = crate::fleet::lock(&inner.leases);
        for r in &rows {
            let (Ok(repo), Ok(epoch)) = (r.try_get::<_, String>(0), r.try_get::<_, i64>(1)) else {
                continue;
            };
            let local = LocalLease::acquired(&repo, &me, epoch.max(0) as u64, sent, &timing);
            won.push((repo.clone(), local.fence.clone()));
            leases.insert(repo, local);
        }
    }
    if won.is_empty() {
        return Ok(());
    }
    // Routing reads the cache once the fence is gone (an outage outlasting
    // the lease): it must name this node as the holder from now on, not
    // from the next snapshot, which an outage may prevent. This turn's
    // snapshot was read before the take and shows the lease free.
    {
        let mut cache = crate::fleet::write(&inner.cache);
        for (repo, fence) in &won {
            cache.learn(
                repo,
                crate::fleet::CachedLease {
                    holder: Some(me.clone()),
                    epoch: fence.epoch(),
                    held: true,
                },
            );
        }
    }
    let ids: Vec<String> = won.iter().map(|(r, _)| r.clone()).collect();
    let rows = match crate::registry::repos_by_id(&inner.db, &ids).await {
        Ok(rows) => rows,
        Err(e) => {
            // Owned but not announced: give the leases back rather than
            // hold repositories nobody serves.
            let epochs: Vec<i64> = won.iter().map(|(_, f)| f.epoch() as i64).collect();
            {
                let mut leases = crate::fleet::lock(&inner.leases);
                for id in &ids {
                    if let Some(l) = leases.remove(id) {
                        l.fence.revoke();
                    }
                }
            }
            let _ = release_in_db(inner, &ids, &epochs).await;
            return Err(e);
        }
    };
    let by_id: HashMap<&str, &RepoRow> = rows.iter().map(|r| (r.repo_id.as_str(), r)).collect();
    for (repo_id, fence) in won {
        inner.metrics.acquired();
        let previous_holder = seen
            .iter()
            .find(|s| s.repo_id == repo_id)
            .and_then(|s| s.holder.clone());
        // A repository removed between the take and the read is not
        // announced: the next renewal fails and reports it.
        if let Some(row) = by_id.get(repo_id.as_str()) {
            // What the service adopts with; later changes are `Settings`.
            crate::fleet::lock(&inner.watch_known).insert(repo_id.clone(), row.watch);
            tracing::info!(repo = %repo_id, epoch = fence.epoch(), previous = ?previous_holder, "lease acquired");
            inner.send(LeaseChange::Acquired {
                repo: Box::new((*row).clone()),
                fence,
                previous_holder,
            });
        }
    }
    Ok(())
}

/// Ends leases in the database (expiry set to now), if still this node's
/// at that epoch.
pub(crate) async fn release_in_db(
    inner: &Inner,
    repos: &[String],
    epochs: &[i64],
) -> Result<u64, FleetError> {
    let me = inner.config.node_id.clone();
    with_client!(&inner.db, |c| c
        .execute(
            "UPDATE fleet_leases l SET expires_at = clock_timestamp()
             FROM unnest($2::text[], $3::int8[]) AS h(repo_id, epoch)
             WHERE l.repo_id = h.repo_id AND l.epoch = h.epoch AND l.node_id = $1
               AND l.expires_at > clock_timestamp()",
            &[&me, &repos, &epochs],
        )
        .await)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watch_changes_are_reported_once_and_only_for_held_repositories() {
        let seen = |pairs: &[(&str, bool)]| -> HashMap<String, bool> {
            pairs.iter().map(|(r, w)| (r.to_string(), *w)).collect()
        };
        let held = vec!["a".to_string(), "b".to_string()];
        let mut known = seen(&[("a", false), ("b", false), ("gone", true)]);
        // Unchanged: nothing; a repository no longer held is forgotten.
        let all = seen(&[("a", false), ("b", false), ("c", true)]);
        assert!(watch_changes(&held, &all, &mut known).is_empty());
        assert!(!known.contains_key("gone"));
        // Changed on one held repository (not on `c`, held elsewhere): once.
        let all = seen(&[("a", true), ("b", false), ("c", false)]);
        assert_eq!(
            watch_changes(&held, &all, &mut known),
            vec![("a".to_string(), true)]
        );
        assert!(watch_changes(&held, &all, &mut known).is_empty());
        // And back.
        let all = seen(&[("a", false), ("b", false)]);
        assert_eq!(
            watch_changes(&held, &all, &mut known),
            vec![("a".to_string(), false)]
        );
        // A held repository never seen before (no acquisition row): reported.
        let held = vec!["a".to_string(), "d".to_string()];
        let all = seen(&[("a", false), ("d", true)]);
        assert_eq!(
            watch_changes(&held, &all, &mut known),
            vec![("d".to_string(), true)]
        );
    }
}
