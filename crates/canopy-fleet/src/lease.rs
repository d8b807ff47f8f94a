//! Leases as one node sees them: the [`Fence`] handed to the code that
//! indexes and publishes, the per-repository state machine ([`LocalLease`])
//! and the pure planning step ([`plan`]) that decides, from one snapshot of
//! the database, which leases to take and which to hand over.
//!
//! PostgreSQL decides who holds a lease (`fleet_leases.expires_at`, set
//! from its own clock). A node additionally stops *using* a lease at its
//! local deadline: the time it *sent* the last successful renewal plus the
//! TTL minus a safety margin. The database set the expiry from a moment
//! after the send, so the local deadline always comes first; a node that
//! was paused (SIGSTOP, a long GC-like stall, a suspended VM) wakes up past
//! its deadline and finds its fence invalid before it does anything. Even
//! if it did not, every publishing write re-checks the epoch and expiry in
//! the database ([`crate::Fleet::publish`]), which is what actually fences.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use crate::config::Timing;
use crate::placement;

/// Process-wide origin for deadlines kept in atomics.
fn origin() -> Instant {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    *ORIGIN.get_or_init(Instant::now)
}

fn to_nanos(t: Instant) -> u64 {
    t.saturating_duration_since(origin())
        .as_nanos()
        .min(u64::MAX as u128) as u64
}

/// Proof that this node owns a repository under one lease epoch, for as
/// long as [`Fence::is_valid`] says so. Cheap to clone; every clone sees
/// renewals and revocation.
#[derive(Clone)]
pub struct Fence {
    inner: Arc<FenceInner>,
}

struct FenceInner {
    repo_id: String,
    node_id: String,
    epoch: u64,
    /// Local deadline, nanoseconds after [`origin`].
    deadline: AtomicU64,
    /// Set when the node gives the lease up (handover, loss, shutdown).
    revoked: AtomicBool,
    /// Tests only: skip the local deadline so the database's check is
    /// what refuses (see [`Fence::ignoring_local_deadline`]).
    unchecked: bool,
}

impl std::fmt::Debug for Fence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fence")
            .field("repo_id", &self.inner.repo_id)
            .field("node_id", &self.inner.node_id)
            .field("epoch", &self.inner.epoch)
            .field("valid", &self.is_valid())
            .finish()
    }
}

impl Fence {
    pub(crate) fn new(repo_id: &str, node_id: &str, epoch: u64, deadline: Instant) -> Fence {
        Fence {
            inner: Arc::new(FenceInner {
                repo_id: repo_id.to_string(),
                node_id: node_id.to_string(),
                epoch,
                deadline: AtomicU64::new(to_nanos(deadline)),
                revoked: AtomicBool::new(false),
                unchecked: false,
            }),
        }
    }

    /// The repository.
    pub fn repo_id(&self) -> &str {
        &self.inner.repo_id
    }

    /// The node holding it.
    pub fn node_id(&self) -> &str {
        &self.inner.node_id
    }

    /// The lease epoch: the fencing token every publishing write carries.
    pub fn epoch(&self) -> u64 {
        self.inner.epoch
    }

    /// Whether the node may still act as the owner: not revoked and before
    /// the local deadline. Index runs check it between files (so a paused
    /// node that resumes stops at once); the database checks it again on
    /// every publishing write.
    pub fn is_valid(&self) -> bool {
        self.valid_at(Instant::now())
    }

    /// [`Fence::is_valid`] at `now`.
    pub fn valid_at(&self, now: Instant) -> bool {
        if self.inner.unchecked {
            return true;
        }
        !self.inner.revoked.load(Ordering::SeqCst)
            && to_nanos(now) < self.inner.deadline.load(Ordering::SeqCst)
    }

    /// Time left before the local deadline (zero when invalid).
    pub fn remaining(&self) -> Duration {
        if self.inner.revoked.load(Ordering::SeqCst) {
            return Duration::ZERO;
        }
        let deadline = self.inner.deadline.load(Ordering::SeqCst);
        Duration::from_nanos(deadline.saturating_sub(to_nanos(Instant::now())))
    }

    /// Moves the deadline later (never earlier: an old renewal's answer
    /// arriving late must not shorten a newer one).
    pub(crate) fn extend(&self, deadline: Instant) {
        self.inner
            .deadline
            .fetch_max(to_nanos(deadline), Ordering::SeqCst);
    }

    pub(crate) fn revoke(&self) {
        self.inner.revoked.store(true, Ordering::SeqCst);
    }

    /// Tests of the database's fencing only: a copy of this fence that
    /// skips the local deadline and revocation, as a paused process that
    /// has not looked at its clock yet would. Never used by canopy itself.
    #[doc(hidden)]
    pub fn ignoring_local_deadline(&self) -> Fence {
        Fence {
            inner: Arc::new(FenceInner {
                repo_id: self.inner.repo_id.clone(),
                node_id: self.inner.node_id.clone(),
                epoch: self.inner.epoch,
                deadline: AtomicU64::new(self.inner.deadline.load(Ordering::SeqCst)),
                revoked: AtomicBool::new(false),
                unchecked: true,
            }),
        }
    }
}

/// The local deadline of a lease renewed (or acquired) by a request sent at
/// `sent_at`.
pub fn local_deadline(sent_at: Instant, timing: &Timing) -> Instant {
    sent_at + timing.lease_ttl.saturating_sub(timing.safety_margin)
}

/// One lease this node holds, and where it is in its life.
#[derive(Clone, Debug)]
pub struct LocalLease {
    /// The fence handed to the service.
    pub fence: Fence,
    /// Set when the node started handing the repository over.
    pub draining_since: Option<Instant>,
}

/// The state of a held lease at a given moment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LeasePhase {
    /// Valid: the node owns the repository.
    Owned,
    /// Being handed over: renewed, but the fence is revoked; released once
    /// the service says its work stopped or the drain timeout passes.
    Draining,
    /// Handing over took too long: release now.
    DrainDue,
    /// The local deadline passed without a renewal: lost.
    Expired,
}

impl LocalLease {
    /// A lease acquired by a request sent at `sent_at`.
    pub fn acquired(
        repo_id: &str,
        node_id: &str,
        epoch: u64,
        sent_at: Instant,
        timing: &Timing,
    ) -> LocalLease {
        LocalLease {
            fence: Fence::new(repo_id, node_id, epoch, local_deadline(sent_at, timing)),
            draining_since: None,
        }
    }

    /// A renewal sent at `sent_at` succeeded.
    pub fn renewed(&self, sent_at: Instant, timing: &Timing) {
        self.fence.extend(local_deadline(sent_at, timing));
    }

    /// Starts handing the lease over: the fence is revoked at once.
    pub fn start_drain(&mut self, now: Instant) {
        self.fence.revoke();
        self.draining_since.get_or_insert(now);
    }

    /// Where the lease stands at `now`.
    pub fn phase(&self, now: Instant, timing: &Timing) -> LeasePhase {
        let deadline_passed = to_nanos(now) >= self.fence.inner.deadline.load(Ordering::SeqCst);
        match self.draining_since {
            _ if deadline_passed => LeasePhase::Expired,
            Some(since) if now.saturating_duration_since(since) >= timing.drain_timeout => {
                LeasePhase::DrainDue
            }
            Some(_) => LeasePhase::Draining,
            None => LeasePhase::Owned,
        }
    }
}

/// A node as one snapshot of `fleet_nodes` showed it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeSeen {
    /// Node id.
    pub node_id: String,
    /// Heartbeat younger than the TTL and state `active`.
    pub live: bool,
    /// How long this incarnation has been registered.
    pub joined_for: Duration,
}

/// A lease as one snapshot of `fleet_leases` showed it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseSeen {
    /// Repository.
    pub repo_id: String,
    /// Last holder (also after expiry), if any ever.
    pub holder: Option<String>,
    /// Current epoch (0: never held).
    pub epoch: u64,
    /// Unexpired.
    pub held: bool,
    /// How long it has been free (since expiry, or since the repository was
    /// registered when never held); zero while held.
    pub free_for: Duration,
}

/// What a node does after one snapshot.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// Leases to take: (repository, the epoch seen, which the take must still find).
    pub acquire: Vec<(String, u64)>,
    /// Held leases to hand over to a better-placed live node.
    pub handover: Vec<String>,
    /// Leases the database says this node holds but it does not know
    /// (an acquisition whose answer was lost): released.
    pub orphans: Vec<(String, u64)>,
}

/// Decides, from one consistent snapshot, which leases `me` takes and
/// which it hands over.
///
/// * A free lease is taken by the node ranked k-th among live nodes
///   (rendezvous order) once it has been free k × `takeover_step`: the
///   preferred node takes it at once, the next one if the preferred node
///   does not within a step, and so on.
/// * A held lease is handed over when the preferred owner is another live
///   node that has been registered for at least `settle`.
/// * A node that is not live itself (leaving, or its heartbeat failed)
///   takes nothing.
pub fn plan(
    me: &str,
    nodes: &[NodeSeen],
    leases: &[LeaseSeen],
    held: &HashMap<String, LocalLease>,
    timing: &Timing,
) -> Plan {
    let mut live: Vec<&str> = nodes
        .iter()
        .filter(|n| n.live)
        .map(|n| n.node_id.as_str())
        .collect();
    live.sort_unstable();
    let settled: HashSet<&str> = nodes
        .iter()
        .filter(|n| n.live && n.joined_for >= timing.settle)
        .map(|n| n.node_id.as_str())
        .collect();
    let me_live = live.contains(&me);
    let mut out = Plan::default();
    for lease in leases {
        let mine_in_db = lease.held && lease.holder.as_deref() == Some(me);
        if mine_in_db {
            match held.get(&lease.repo_id) {
                Some(local) if local.fence.epoch() == lease.epoch => {
                    if local.draining_since.is_none()
                        && let Some(best) = placement::owner(&live, &lease.repo_id)
                        && best != me
                        && settled.contains(best)
                    {
                        out.handover.push(lease.repo_id.clone());
                    }
                }
                _ => out.orphans.push((lease.repo_id.clone(), lease.epoch)),
            }
            continue;
        }
        if lease.held || !me_live || held.contains_key(&lease.repo_id) {
            continue;
        }
        if let Some(rank) = placement::rank_of(&live, &lease.repo_id, me) {
            let wait = timing
                .takeover_step
                .saturating_mul(rank.min(u32::MAX as usize) as u32);
            if lease.free_for >= wait {
                out.acquire.push((lease.repo_id.clone(), lease.epoch));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timing() -> Timing {
        Timing::default()
    }

    fn node(id: &str, live: bool, joined_secs: u64) -> NodeSeen {
        NodeSeen {
            node_id: id.into(),
            live,
            joined_for: Duration::from_secs(joined_secs),
        }
    }

    fn free(repo: &str, epoch: u64, free_ms: u64) -> LeaseSeen {
        LeaseSeen {
            repo_id: repo.into(),
            holder: None,
            epoch,
            held: false,
            free_for: Duration::from_millis(free_ms),
        }
    }

    #[test]
    fn fence_deadline_renewal_and_revocation() {
        let t = timing();
        let sent = Instant::now();
        let lease = LocalLease::acquired("r", "n", 7, sent, &t);
        let deadline = sent + t.lease_ttl - t.safety_margin;
        assert!(lease.fence.valid_at(deadline - Duration::from_millis(1)));
        assert!(!lease.fence.valid_at(deadline));
        assert_eq!(lease.phase(deadline, &t), LeasePhase::Expired);
        assert_eq!(lease.fence.epoch(), 7);
        // A renewal sent later extends; a late answer to an older one does not shorten.
        lease.renewed(sent + Duration::from_secs(2), &t);
        assert!(lease.fence.valid_at(deadline + Duration::from_secs(1)));
        lease.renewed(sent, &t);
        assert!(lease.fence.valid_at(deadline + Duration::from_secs(1)));
        // Clones share the state.
        let clone = lease.fence.clone();
        let mut lease = lease;
        lease.start_drain(sent);
        assert!(!clone.valid_at(sent));
        assert_eq!(clone.remaining(), Duration::ZERO);
        assert_eq!(lease.phase(sent, &t), LeasePhase::Draining);
        assert_eq!(
            lease.phase(sent + t.drain_timeout, &t),
            LeasePhase::DrainDue
        );
        // The test-only copy skips local checks (the database must refuse).
        assert!(
            clone
                .ignoring_local_deadline()
                .valid_at(deadline + t.lease_ttl)
        );
    }

    #[test]
    fn a_paused_process_finds_its_fence_invalid() {
        let t = timing();
        let sent = Instant::now();
        let lease = LocalLease::acquired("r", "n", 1, sent, &t);
        // Woken after longer than the TTL (SIGSTOP): invalid before any renewal.
        let woken = sent + t.lease_ttl + Duration::from_secs(5);
        assert!(!lease.fence.valid_at(woken));
        assert_eq!(lease.phase(woken, &t), LeasePhase::Expired);
    }

    #[test]
    fn free_leases_go_to_the_preferred_node_first() {
        let t = timing();
        let nodes = vec![
            node("a", true, 60),
            node("b", true, 60),
            node("c", true, 60),
        ];
        let ids = ["a", "b", "c"];
        let held = HashMap::new();
        for i in 0..50 {
            let repo = format!("r{i}");
            let ranked = placement::ranking(&ids, &repo);
            let leases = [free(&repo, 3, 0)];
            // Just freed: only the preferred node takes it.
            for (rank, me) in ranked.iter().enumerate() {
                let p = plan(me, &nodes, &leases, &held, &t);
                assert_eq!(!p.acquire.is_empty(), rank == 0, "{repo} rank {rank}");
                if rank == 0 {
                    assert_eq!(p.acquire, vec![(repo.clone(), 3)]);
                }
            }
            // Free for one step: the second choice may take it too (the
            // database lets exactly one of them win).
            let leases = [free(&repo, 3, t.takeover_step.as_millis() as u64)];
            assert!(
                !plan(ranked[1], &nodes, &leases, &held, &t)
                    .acquire
                    .is_empty()
            );
            assert!(
                plan(ranked[2], &nodes, &leases, &held, &t)
                    .acquire
                    .is_empty()
            );
        }
    }

    #[test]
    fn held_and_dead_and_leaving() {
        let t = timing();
        let held = HashMap::new();
        let taken = LeaseSeen {
            repo_id: "r".into(),
            holder: Some("b".into()),
            epoch: 4,
            held: true,
            free_for: Duration::ZERO,
        };
        let nodes = vec![node("a", true, 60), node("b", true, 60)];
        assert_eq!(plan("a", &nodes, &[taken], &held, &t), Plan::default());
        // A node that is not live (leaving, or its heartbeat failed) takes nothing.
        let nodes = vec![node("a", false, 60), node("b", true, 60)];
        assert_eq!(
            plan("a", &nodes, &[free("r", 0, 99_000)], &held, &t),
            Plan::default()
        );
        // Dead nodes are not ranked: the only live node is preferred.
        let nodes = vec![node("a", true, 60), node("dead", false, 60)];
        for i in 0..20 {
            let repo = format!("r{i}");
            let p = plan("a", &nodes, &[free(&repo, 1, 0)], &held, &t);
            assert_eq!(p.acquire.len(), 1);
        }
    }

    #[test]
    fn handover_waits_for_a_settled_preferred_node() {
        let t = timing();
        let ids = ["a", "b"];
        // A repository b prefers, held by a.
        let repo = (0..100)
            .map(|i| format!("r{i}"))
            .find(|r| placement::owner(&ids, r) == Some("b"))
            .expect("some repository prefers b");
        let now = Instant::now();
        let mut held = HashMap::new();
        held.insert(repo.clone(), LocalLease::acquired(&repo, "a", 2, now, &t));
        let lease = LeaseSeen {
            repo_id: repo.clone(),
            holder: Some("a".into()),
            epoch: 2,
            held: true,
            free_for: Duration::ZERO,
        };
        let fresh = vec![node("a", true, 60), node("b", true, 0)];
        assert!(
            plan("a", &fresh, std::slice::from_ref(&lease), &held, &t)
                .handover
                .is_empty()
        );
        let settled = vec![node("a", true, 60), node("b", true, t.settle.as_secs())];
        assert_eq!(
            plan("a", &settled, std::slice::from_ref(&lease), &held, &t).handover,
            vec![repo.clone()]
        );
        // Not twice: once draining it stays draining.
        if let Some(l) = held.get_mut(&repo) {
            l.start_drain(now);
        }
        assert!(
            plan("a", &settled, std::slice::from_ref(&lease), &held, &t)
                .handover
                .is_empty()
        );
        // A lease the database gives to a but a does not know is an orphan.
        let p = plan(
            "a",
            &settled,
            std::slice::from_ref(&lease),
            &HashMap::new(),
            &t,
        );
        assert_eq!(p.orphans, vec![(repo, 2)]);
    }
}
