//! [`Fleet`]: the handle `canopy serve --fleet` holds. Starting it
//! connects, migrates, registers the node and spawns the lease keeper and
//! the event listener; its methods are the whole surface the service
//! needs: the shared registry, fenced publishing, the event feed, routing,
//! health, metrics and shutdown.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock, RwLockWriteGuard};
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use crate::config::FleetConfig;
use crate::db::{Db, connect, random_u64, with_client};
use crate::error::FleetError;
use crate::feed;
use crate::keeper::{self, LeaseChange, LossReason};
use crate::lease::{Fence, LocalLease};
use crate::metrics::UnreachableOwner;
use crate::metrics::{FleetGauges, FleetMetrics};
use crate::model::{
    EventPage, FleetView, NewEvent, NewRepo, NodeView, PlacementView, RepoRow, RepoState,
};
use crate::placement;
use crate::registry;
use crate::schema;

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

pub(crate) fn write<T>(m: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    m.write().unwrap_or_else(|e| e.into_inner())
}

fn read<T: Clone>(m: &RwLock<T>) -> T {
    m.read().unwrap_or_else(|e| e.into_inner()).clone()
}

/// This process's standing as a fleet node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NodeState {
    /// Registered and heartbeating.
    Active,
    /// Another process registered the same node id after this one was
    /// presumed dead: it holds nothing and takes nothing.
    Superseded,
    /// Shut down (or aborted).
    Stopped,
}

/// A lease as the last snapshot showed it.
#[derive(Clone, Debug, Default)]
pub(crate) struct CachedLease {
    pub(crate) holder: Option<String>,
    pub(crate) epoch: u64,
    pub(crate) held: bool,
}

/// The last snapshot, for routing without a round trip, with what this
/// node learned of single leases since (its own acquisitions, direct reads).
#[derive(Clone, Debug, Default)]
pub(crate) struct Cached {
    /// node id → (advertised URL, live).
    pub(crate) nodes: HashMap<String, (String, bool)>,
    pub(crate) leases: HashMap<String, CachedLease>,
}

impl Cached {
    /// Records one lease as a statement other than the snapshot read it
    /// (the keeper's acquisition, [`Fleet::route_fresh`]). Epochs only
    /// grow, so a read that finds an older epoch than the one cached is
    /// older news and is dropped.
    pub(crate) fn learn(&mut self, repo_id: &str, lease: CachedLease) {
        if self
            .leases
            .get(repo_id)
            .is_none_or(|known| known.epoch <= lease.epoch)
        {
            self.leases.insert(repo_id.to_string(), lease);
        }
    }
}

/// Where a request for a repository should be answered.
#[derive(Clone, Debug)]
pub enum Route {
    /// Here: this node owns it.
    Local(Fence),
    /// The database is unreachable and this node was the last owner it
    /// knows of: answer reads from the local index; start no index run
    /// and publish nothing (nobody can take the lease meanwhile, because
    /// taking one needs the database).
    LocalReadOnly {
        /// The epoch this node last held.
        epoch: u64,
    },
    /// Another node owns it: forward the request there.
    Forward {
        /// Owner.
        node_id: String,
        /// Its advertised URL (`http://host:port`).
        url: String,
        /// Its lease epoch when last seen.
        epoch: u64,
    },
    /// Nobody can answer right now (no owner yet, a takeover or a handover
    /// in progress): answer 503 with `Retry-After`.
    Unavailable {
        /// Why, for the error message.
        reason: String,
        /// When to try again.
        retry_after: Duration,
    },
}

/// `/health`'s fleet section.
#[derive(Clone, Debug, Serialize)]
pub struct FleetHealth {
    /// `healthy`, `degraded` or `unhealthy`.
    pub status: &'static str,
    /// This node.
    pub node_id: String,
    /// This process's standing.
    pub node_state: NodeState,
    /// The database as this node sees it.
    pub database: crate::db::DatabaseHealth,
    /// Event notifications are received (else long-polls poll).
    pub event_listener: bool,
    /// Leases held.
    pub leases_held: usize,
    /// Live nodes in the last snapshot.
    pub live_nodes: usize,
    /// Milliseconds since the last successful heartbeat.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_heartbeat_ms: Option<u64>,
    /// Forwards to an owner that could not be reached, since start.
    pub forward_failures: u64,
    /// Owners whose last forward from this node failed within
    /// [`UNREACHABLE_WINDOW`] with none answered since: requests for their
    /// repositories get 503 `owner_unreachable` here.
    pub unreachable_owners: Vec<UnreachableOwner>,
    /// Why not healthy.
    pub reasons: Vec<String>,
}

/// How long a failed forward keeps its owner listed as unreachable in
/// `/health` (unless a forward to it succeeds first): long enough for a
/// scrape to see it, short enough that an idle path does not stay degraded.
pub const UNREACHABLE_WINDOW: Duration = Duration::from_secs(60);

pub(crate) struct Inner {
    pub(crate) config: FleetConfig,
    pub(crate) incarnation: i64,
    pub(crate) db: Db,
    pub(crate) latest: Arc<watch::Sender<u64>>,
    pub(crate) listening: Arc<AtomicBool>,
    pub(crate) leases: Mutex<HashMap<String, LocalLease>>,
    pub(crate) cache: RwLock<Cached>,
    /// Repository → the watch flag this node last gave the service for a
    /// held lease (with the acquisition, or a [`LeaseChange::Settings`]).
    pub(crate) watch_known: Mutex<HashMap<String, bool>>,
    pub(crate) last_beat: Mutex<Option<Instant>>,
    changes: mpsc::UnboundedSender<LeaseChange>,
    pub(crate) metrics: FleetMetrics,
    state: Mutex<NodeState>,
    stop: watch::Sender<bool>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.stop.send_replace(true);
        for t in lock(&self.tasks).drain(..) {
            t.abort();
        }
    }
}

impl Inner {
    pub(crate) fn node_state(&self) -> NodeState {
        *lock(&self.state)
    }

    pub(crate) fn set_node_state(&self, s: NodeState) {
        *lock(&self.state) = s;
    }

    pub(crate) fn send(&self, change: LeaseChange) {
        // The service may have stopped listening (shutting down): fine.
        let _ = self.changes.send(change);
    }

    /// (repository, epoch) of every lease held, draining ones included.
    pub(crate) fn held(&self) -> Vec<(String, u64)> {
        lock(&self.leases)
            .iter()
            .map(|(r, l)| (r.clone(), l.fence.epoch()))
            .collect()
    }

    pub(crate) fn lost(&self, repo_id: &str, epoch: u64, reason: LossReason) {
        self.metrics.lost(reason.as_str());
        self.send(LeaseChange::Lost {
            repo_id: repo_id.to_string(),
            epoch,
            reason,
        });
    }

    /// Forgets every lease locally (revoking the fences) and reports them lost.
    pub(crate) fn drop_all(&self, reason: LossReason) -> Vec<(String, u64)> {
        let all: Vec<(String, u64)> = {
            let mut leases = lock(&self.leases);
            leases
                .drain()
                .map(|(r, l)| {
                    l.fence.revoke();
                    (r, l.fence.epoch())
                })
                .collect()
        };
        for (repo, epoch) in &all {
            self.lost(repo, *epoch, reason);
        }
        all
    }

    /// Gives one lease up: locally first (fence revoked), then in the database.
    pub(crate) async fn release_local(
        &self,
        repo_id: &str,
        reason: LossReason,
    ) -> Result<bool, FleetError> {
        let Some(local) = lock(&self.leases).remove(repo_id) else {
            return Ok(false);
        };
        local.fence.revoke();
        let epoch = local.fence.epoch();
        self.lost(repo_id, epoch, reason);
        let released = keeper::release_in_db(self, &[repo_id.to_string()], &[epoch as i64]).await?;
        Ok(released > 0)
    }
}

/// A running fleet node. Cheap to clone; dropping the last clone stops its
/// background tasks without releasing anything (as a crash would: the
/// leases lapse), so call [`Fleet::shutdown`] to leave cleanly.
#[derive(Clone)]
pub struct Fleet {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Fleet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fleet")
            .field("node_id", &self.inner.config.node_id)
            .finish_non_exhaustive()
    }
}

/// Applies the fleet schema migrations at `url` and returns the schema
/// version (what [`Fleet::start`] does first; also usable alone, e.g. from
/// a deployment job).
pub async fn migrate(config: &FleetConfig) -> Result<i32, FleetError> {
    let pg = config.validate()?;
    let mut client = connect(&pg, &config.timing, None).await?;
    schema::migrate(&mut client).await
}

impl Fleet {
    /// Joins the fleet: connects (retrying with backoff for up to three
    /// lease TTLs, so nodes may start before the database), applies
    /// migrations, registers this node (waiting up to a TTL for a previous
    /// process with the same id to lapse), ends leases a previous process
    /// of this node left, appends `node_joined`, and starts the lease
    /// keeper and the event listener. Ownership changes arrive on the
    /// returned receiver.
    pub async fn start(
        config: FleetConfig,
    ) -> Result<(Fleet, mpsc::UnboundedReceiver<LeaseChange>), FleetError> {
        Fleet::start_with(config, true).await
    }

    /// Tests only: [`Fleet::start`] without the heartbeat task, so the test
    /// runs the keeper's turns itself ([`Fleet::keeper_turn`]) in the order
    /// it needs. Never used by canopy itself.
    #[doc(hidden)]
    pub async fn start_without_keeper(
        config: FleetConfig,
    ) -> Result<(Fleet, mpsc::UnboundedReceiver<LeaseChange>), FleetError> {
        Fleet::start_with(config, false).await
    }

    /// Tests only: one turn of the lease keeper, what the heartbeat task
    /// does every heartbeat (with [`Fleet::start_without_keeper`]).
    #[doc(hidden)]
    pub async fn keeper_turn(&self) -> Result<(), FleetError> {
        keeper::turn(&self.inner).await
    }

    async fn start_with(
        config: FleetConfig,
        run_keeper: bool,
    ) -> Result<(Fleet, mpsc::UnboundedReceiver<LeaseChange>), FleetError> {
        let pg = config.validate()?;
        let timing = config.timing.clone();
        let mut backoff = crate::db::Backoff::new(timing.backoff_start, timing.backoff_max);
        let give_up = Instant::now() + timing.lease_ttl * 3;
        let mut client = loop {
            match connect(&pg, &timing, None).await {
                Ok(c) => break c,
                Err(e) if e.is_retryable() && Instant::now() < give_up => {
                    tracing::warn!("cannot reach the fleet database yet: {e}");
                    tokio::time::sleep(backoff.next_delay()).await;
                }
                Err(e) => return Err(e),
            }
        };
        let version = schema::migrate(&mut client).await?;
        let fleet_id = schema::fleet_id(&client)
            .await
            .map_err(|e| crate::error::classify(&e).0)?;
        tracing::info!(version, fleet_id, "fleet schema ready");
        let incarnation = (random_u64() >> 1) as i64;
        register(&client, &config, incarnation).await?;
        drop(client);

        let (changes, receiver) = mpsc::unbounded_channel();
        let (stop, _) = watch::channel(false);
        let inner = Arc::new(Inner {
            db: Db::new(
                pg.clone(),
                fleet_id.clone(),
                timing.clone(),
                config.pool_size,
            ),
            config,
            incarnation,
            latest: Arc::new(watch::channel(0).0),
            listening: Arc::new(AtomicBool::new(false)),
            leases: Mutex::new(HashMap::new()),
            cache: RwLock::new(Cached::default()),
            watch_known: Mutex::new(HashMap::new()),
            last_beat: Mutex::new(Some(Instant::now())),
            changes,
            metrics: FleetMetrics::default(),
            state: Mutex::new(NodeState::Active),
            stop,
            tasks: Mutex::new(Vec::new()),
        });
        let fleet = Fleet { inner };
        let seq = fleet
            .append_events(&[NewEvent {
                kind: "node_joined".into(),
                repo_id: None,
                data: json!({
                    "node_id": fleet.inner.config.node_id,
                    "advertise_url": fleet.inner.config.advertise_url,
                    "version": fleet.inner.config.version,
                }),
            }])
            .await?;
        feed::note_seq(&fleet.inner.latest, seq);
        let listener = tokio::spawn(feed::listen(
            pg,
            fleet_id,
            timing,
            fleet.inner.latest.clone(),
            fleet.inner.listening.clone(),
            fleet.inner.stop.subscribe(),
        ));
        lock(&fleet.inner.tasks).push(listener);
        if run_keeper {
            let keeper = tokio::spawn(keeper::run(
                Arc::downgrade(&fleet.inner),
                fleet.inner.stop.subscribe(),
            ));
            lock(&fleet.inner.tasks).push(keeper);
        }
        Ok((fleet, receiver))
    }

    /// This node's id.
    pub fn node_id(&self) -> &str {
        &self.inner.config.node_id
    }

    /// The configuration it started with.
    pub fn config(&self) -> &FleetConfig {
        &self.inner.config
    }

    /// The node's counters (the service records forward latency here).
    pub fn metrics(&self) -> &FleetMetrics {
        &self.inner.metrics
    }

    /// This process's standing.
    pub fn node_state(&self) -> NodeState {
        self.inner.node_state()
    }

    /// The valid fence for `repo_id`, if this node owns it now.
    pub fn fence(&self, repo_id: &str) -> Option<Fence> {
        lock(&self.inner.leases)
            .get(repo_id)
            .map(|l| l.fence.clone())
            .filter(Fence::is_valid)
    }

    /// Every valid fence this node holds.
    pub fn fences(&self) -> Vec<Fence> {
        lock(&self.inner.leases)
            .values()
            .map(|l| l.fence.clone())
            .filter(Fence::is_valid)
            .collect()
    }

    /// Where to answer a request for `repo_id`, from local leases and the
    /// last snapshot (at most a heartbeat old). A forward that the target
    /// refuses as misdirected should be retried once with
    /// [`Fleet::route_fresh`].
    pub fn route(&self, repo_id: &str) -> Route {
        if let Some(fence) = self.fence(repo_id) {
            return Route::Local(fence);
        }
        let cache = read(&self.inner.cache);
        let connected = self.inner.db.health.view().connected;
        route_from(
            &self.inner.config.node_id,
            repo_id,
            &cache,
            connected,
            self.inner.config.timing.heartbeat,
        )
    }

    /// [`Fleet::route`] after reading the repository's lease and its
    /// holder from the database.
    pub async fn route_fresh(&self, repo_id: &str) -> Result<Route, FleetError> {
        if let Some(fence) = self.fence(repo_id) {
            return Ok(Route::Local(fence));
        }
        let ttl = self.inner.config.timing.lease_ttl.as_secs_f64();
        let row = with_client!(&self.inner.db, |c| {
            c
            .query_opt(
                "SELECT l.node_id, l.epoch,
                        l.expires_at IS NOT NULL AND l.expires_at > clock_timestamp(),
                        n.advertise_url,
                        n.state = 'active' AND n.heartbeat_at > clock_timestamp() - make_interval(secs => $2)
                 FROM fleet_leases l LEFT JOIN fleet_nodes n ON n.node_id = l.node_id
                 WHERE l.repo_id = $1",
                &[&repo_id, &ttl],
            )
            .await
        })?;
        let Some(row) = row else {
            return Err(FleetError::NoSuchRepo(repo_id.to_string()));
        };
        let parse = |e: tokio_postgres::Error| FleetError::Database(e.to_string());
        let holder: Option<String> = row.try_get(0).map_err(parse)?;
        let epoch = row.try_get::<_, i64>(1).map_err(parse)?.max(0) as u64;
        let held: bool = row.try_get(2).map_err(parse)?;
        let url: Option<String> = row.try_get(3).map_err(parse)?;
        let live: Option<bool> = row.try_get(4).map_err(parse)?;
        {
            let mut cache = write(&self.inner.cache);
            cache.learn(
                repo_id,
                CachedLease {
                    holder: holder.clone(),
                    epoch,
                    held,
                },
            );
            if let (Some(h), Some(u)) = (&holder, url) {
                cache.nodes.insert(h.clone(), (u, live.unwrap_or(false)));
            }
        }
        Ok(self.route(repo_id))
    }

    // ---- registry ----

    /// Registers a repository (or returns the one registered from the
    /// same source); `repo_added` is appended in the same transaction.
    /// Returns the row and whether it was created.
    pub async fn add_repo(&self, new: &NewRepo) -> Result<(RepoRow, bool), FleetError> {
        let (row, created) = registry::add_repo(&self.inner.db, self.node_id(), new).await?;
        if created && let Ok(seq) = feed::latest(&self.inner.db).await {
            feed::note_seq(&self.inner.latest, seq);
        }
        Ok((row, created))
    }

    /// Unregisters a repository (`repo_removed` appended); its owner loses
    /// the lease at its next heartbeat. Returns whether it existed.
    pub async fn remove_repo(&self, repo_id: &str) -> Result<bool, FleetError> {
        let removed = registry::remove_repo(&self.inner.db, self.node_id(), repo_id).await?;
        if removed {
            if let Some(local) = lock(&self.inner.leases).remove(repo_id) {
                local.fence.revoke();
                self.inner
                    .lost(repo_id, local.fence.epoch(), LossReason::Removed);
            }
            if let Ok(seq) = feed::latest(&self.inner.db).await {
                feed::note_seq(&self.inner.latest, seq);
            }
        }
        Ok(removed)
    }

    /// Every registered repository, in registration order.
    pub async fn repos(&self) -> Result<Vec<RepoRow>, FleetError> {
        registry::repos(&self.inner.db).await
    }

    /// One repository by id, else by name.
    pub async fn repo(&self, id_or_name: &str) -> Result<Option<RepoRow>, FleetError> {
        registry::repo(&self.inner.db, id_or_name).await
    }

    /// Sets a repository's watch flag in the registry (the fleet's one
    /// copy of it); returns whether it exists. The owner learns of it at
    /// its next heartbeat ([`LeaseChange::Settings`]); a node taking the
    /// lease later reads it with the row ([`LeaseChange::Acquired`]).
    pub async fn set_watch(&self, repo_id: &str, watch: bool) -> Result<bool, FleetError> {
        registry::set_watch(&self.inner.db, repo_id, watch).await
    }

    /// Records that this node gave `generation` to a state of
    /// `repo_id`'s index (an answer read it in the middle of a run): the
    /// repository's `named_up_to` is raised to it, never lowered, so the
    /// next owner publishes above every generation any answer carried.
    /// Not fenced: only the owner names states, and a raise from a node
    /// that just lost the lease can only push the next generation higher.
    /// Call it before the answer carrying `generation` leaves. Returns
    /// whether the repository exists.
    pub async fn note_named(&self, repo_id: &str, generation: u64) -> Result<bool, FleetError> {
        registry::note_named(&self.inner.db, repo_id, generation).await
    }

    /// Fleet-wide settings.
    pub async fn settings(&self) -> Result<BTreeMap<String, Value>, FleetError> {
        registry::settings(&self.inner.db).await
    }

    /// Sets (`Some`) or deletes (`None`) a fleet-wide setting.
    pub async fn set_setting(&self, key: &str, value: Option<&Value>) -> Result<(), FleetError> {
        registry::set_setting(&self.inner.db, key, value).await
    }

    // ---- owner writes ----

    /// Publishes the owner's new state of `fence`'s repository and its
    /// events, atomically, if and only if `fence` is the repository's
    /// current unexpired lease *in the database* at that moment and the
    /// stored generation is `expect_generation` (`state.generation` may be
    /// equal or higher, never lower). Refused with [`FleetError::Fenced`]
    /// otherwise; the local fence is checked first to fail fast. Returns
    /// the last event sequence number written (0 without events).
    pub async fn publish(
        &self,
        fence: &Fence,
        expect_generation: u64,
        state: &RepoState,
        events: &[NewEvent],
    ) -> Result<u64, FleetError> {
        if fence.node_id() != self.node_id() {
            return Err(FleetError::Fenced(format!(
                "the fence belongs to node {}, not {}",
                fence.node_id(),
                self.node_id()
            )));
        }
        if !fence.is_valid() {
            self.inner.metrics.fenced();
            return Err(FleetError::Fenced(format!(
                "the lease epoch {} of {} is no longer valid on this node",
                fence.epoch(),
                fence.repo_id()
            )));
        }
        match feed::publish(&self.inner.db, fence, expect_generation, state, events).await {
            Ok(seq) => {
                self.inner.metrics.published();
                feed::note_seq(&self.inner.latest, seq);
                Ok(seq)
            }
            Err(FleetError::Fenced(m)) => {
                self.inner.metrics.fenced();
                // The database knows better: stop using this lease at once.
                let lost = {
                    let mut leases = lock(&self.inner.leases);
                    match leases.get(fence.repo_id()) {
                        Some(l) if l.fence.epoch() == fence.epoch() => {
                            leases.remove(fence.repo_id())
                        }
                        _ => None,
                    }
                };
                fence.revoke();
                if let Some(l) = lost {
                    l.fence.revoke();
                    self.inner
                        .lost(fence.repo_id(), fence.epoch(), LossReason::Fenced);
                }
                Err(FleetError::Fenced(m))
            }
            Err(e) => Err(e),
        }
    }

    /// Appends events that belong to no lease (registry changes, node
    /// events). Returns the last sequence number written.
    pub async fn append_events(&self, events: &[NewEvent]) -> Result<u64, FleetError> {
        let seq = feed::append(&self.inner.db, self.node_id(), events).await?;
        feed::note_seq(&self.inner.latest, seq);
        Ok(seq)
    }

    /// Gives a lease up after [`LeaseChange::Handover`] (or at any time):
    /// the fence is revoked, then the lease ends in the database so the
    /// preferred node takes it at its next heartbeat. Returns whether the
    /// database still had it.
    pub async fn release(&self, repo_id: &str) -> Result<bool, FleetError> {
        self.inner
            .release_local(repo_id, LossReason::HandedOver)
            .await
    }

    // ---- feed ----

    /// The newest event sequence number known to this node without a round
    /// trip (raised by notifications, publishes and reads).
    pub fn latest_seq_hint(&self) -> u64 {
        *self.inner.latest.borrow()
    }

    /// A receiver that changes when a newer sequence number becomes known.
    pub fn subscribe_seq(&self) -> watch::Receiver<u64> {
        self.inner.latest.subscribe()
    }

    /// The newest event sequence number, from the database.
    pub async fn latest_seq(&self) -> Result<u64, FleetError> {
        let seq = feed::latest(&self.inner.db).await?;
        feed::note_seq(&self.inner.latest, seq);
        Ok(seq)
    }

    /// Events after `after` (of one repository when given), oldest first.
    pub async fn events_after(
        &self,
        after: u64,
        limit: usize,
        repo_id: Option<&str>,
    ) -> Result<EventPage, FleetError> {
        let page = feed::page(&self.inner.db, after, limit, repo_id).await?;
        feed::note_seq(&self.inner.latest, page.latest_seq);
        Ok(page)
    }

    /// Waits until an event newer than `after` exists or `timeout` passes;
    /// returns the newest sequence number. Woken by LISTEN/NOTIFY from any
    /// node; polls every [`feed::POLL_FALLBACK`] while notifications are
    /// down, and reads the database once more before giving up.
    pub async fn wait_events(&self, after: u64, timeout: Duration) -> Result<u64, FleetError> {
        let deadline = Instant::now() + timeout;
        let mut rx = self.inner.latest.subscribe();
        loop {
            let known = *rx.borrow_and_update();
            if known > after {
                return Ok(known);
            }
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            let listening = self.inner.listening.load(Ordering::SeqCst);
            let step = if listening {
                deadline - now
            } else {
                (deadline - now).min(feed::POLL_FALLBACK)
            };
            tokio::select! {
                changed = rx.changed() => {
                    if changed.is_err() {
                        break;
                    }
                }
                _ = tokio::time::sleep(step) => {
                    if !listening && Instant::now() < deadline {
                        // Polling is best effort: an outage shows in the
                        // final read below.
                        if let Ok(seq) = feed::latest(&self.inner.db).await {
                            feed::note_seq(&self.inner.latest, seq);
                        }
                    }
                }
            }
        }
        self.latest_seq().await
    }

    // ---- observability ----

    /// `/health`'s fleet section. `unhealthy` when this process no longer
    /// acts as the node (superseded or stopped); `degraded` while the
    /// database is unreachable (the last known owners answer reads, nothing
    /// is indexed or published), while notifications are down, when the
    /// last heartbeat is older than the lease TTL, or while an owner is
    /// unreachable from this node (see [`UNREACHABLE_WINDOW`]).
    pub fn health(&self) -> FleetHealth {
        let database = self.inner.db.health.view();
        let node_state = self.inner.node_state();
        let listening = self.inner.listening.load(Ordering::SeqCst);
        let leases_held = lock(&self.inner.leases).len();
        let cache = read(&self.inner.cache);
        let live_nodes = cache.nodes.values().filter(|(_, live)| *live).count();
        let last_beat = lock(&self.inner.last_beat).map(|t| t.elapsed());
        let mut reasons = Vec::new();
        let mut status = "healthy";
        match node_state {
            NodeState::Active => {}
            NodeState::Superseded => {
                status = "unhealthy";
                reasons.push(
                    "another process registered this node id; this one holds no lease".into(),
                );
            }
            NodeState::Stopped => {
                status = "unhealthy";
                reasons.push("the fleet node is stopped".into());
            }
        }
        if !database.connected {
            if status == "healthy" {
                status = "degraded";
            }
            reasons.push(format!(
                "the fleet database is unreachable ({:.0} s, {} failures in a row): last known owners answer reads; nothing is indexed or published",
                database.for_seconds, database.consecutive_failures
            ));
        } else if !listening {
            if status == "healthy" {
                status = "degraded";
            }
            reasons.push("event notifications are down: long-polls poll the database".into());
        }
        if let Some(age) = last_beat
            && age > self.inner.config.timing.lease_ttl
            && node_state == NodeState::Active
        {
            if status == "healthy" {
                status = "degraded";
            }
            reasons.push(format!(
                "no successful heartbeat for {:.1} s",
                age.as_secs_f64()
            ));
        }
        let unreachable_owners = self.inner.metrics.unreachable_owners(UNREACHABLE_WINDOW);
        for owner in &unreachable_owners {
            if status == "healthy" {
                status = "degraded";
            }
            reasons.push(format!(
                "cannot reach node {} at {} ({} failed forwards, the last {:.1} s ago at {}: {}): requests for its repositories are answered 503 here",
                owner.node_id,
                owner.url,
                owner.failures,
                owner.last_failure_ms as f64 / 1000.0,
                owner.stage.as_str(),
                owner.error
            ));
        }
        FleetHealth {
            status,
            node_id: self.node_id().to_string(),
            node_state,
            database,
            event_listener: listening,
            leases_held,
            live_nodes,
            last_heartbeat_ms: last_beat.map(|d| d.as_millis().min(u64::MAX as u128) as u64),
            forward_failures: self.inner.metrics.forward_failures(),
            unreachable_owners,
            reasons,
        }
    }

    /// Appends the node's fleet series to a Prometheus text.
    pub fn render_metrics(&self, out: &mut String) {
        let database = self.inner.db.health.view();
        let cache = read(&self.inner.cache);
        let gauges = FleetGauges {
            owned: lock(&self.inner.leases).len(),
            live_nodes: cache.nodes.values().filter(|(_, live)| *live).count(),
            db_connected: database.connected,
            listening: self.inner.listening.load(Ordering::SeqCst),
            db_reconnects: database.reconnects,
            db_errors: database.errors_total,
        };
        self.inner.metrics.render(self.node_id(), &gauges, out);
    }

    /// `GET /fleet`: nodes, repositories, leases and heartbeats, read from
    /// the database now.
    pub async fn view(&self) -> Result<FleetView, FleetError> {
        let ttl = self.inner.config.timing.lease_ttl.as_secs_f64();
        let (node_rows, repo_rows, feed_row, version_row) = with_client!(&self.inner.db, |c| {
            let nodes = c
                .query(
                    "SELECT n.node_id, n.advertise_url, n.state, n.version,
                            n.state = 'active' AND n.heartbeat_at > clock_timestamp() - make_interval(secs => $1),
                            floor(extract(epoch FROM clock_timestamp() - n.heartbeat_at) * 1000)::int8,
                            floor(extract(epoch FROM clock_timestamp() - n.joined_at) * 1000)::int8,
                            (SELECT count(*) FROM fleet_leases l
                              WHERE l.node_id = n.node_id AND l.expires_at > clock_timestamp())
                     FROM fleet_nodes n ORDER BY n.node_id",
                    &[&ttl],
                )
                .await?;
            let repos = c
                .query(
                    "SELECT r.repo_id, r.name, l.node_id, l.epoch,
                            l.expires_at IS NOT NULL AND l.expires_at > clock_timestamp(),
                            CASE WHEN l.expires_at IS NULL THEN NULL ELSE
                              floor(extract(epoch FROM l.expires_at - clock_timestamp()) * 1000)::int8 END,
                            r.generation, r.status
                     FROM fleet_repos r JOIN fleet_leases l USING (repo_id)
                     ORDER BY r.added_at, r.repo_id",
                    &[],
                )
                .await?;
            let feed = c
                .query_one("SELECT last_seq FROM fleet_feed WHERE id = 1", &[])
                .await?;
            let version = c
                .query_one(
                    "SELECT coalesce(max(version), 0) FROM fleet_schema_migrations",
                    &[],
                )
                .await?;
            Ok((nodes, repos, feed, version))
        })?;
        let parse = |e: tokio_postgres::Error| FleetError::Database(e.to_string());
        let mut nodes = Vec::new();
        for r in &node_rows {
            nodes.push(NodeView {
                node_id: r.try_get(0).map_err(parse)?,
                advertise_url: r.try_get(1).map_err(parse)?,
                state: r.try_get(2).map_err(parse)?,
                version: r.try_get(3).map_err(parse)?,
                live: r.try_get(4).map_err(parse)?,
                heartbeat_age_ms: r.try_get(5).map_err(parse)?,
                joined_ms: r.try_get(6).map_err(parse)?,
                owned: r.try_get::<_, i64>(7).map_err(parse)?.max(0) as u64,
            });
        }
        let live: Vec<&str> = nodes
            .iter()
            .filter(|n| n.live)
            .map(|n| n.node_id.as_str())
            .collect();
        let mut repos = Vec::new();
        for r in &repo_rows {
            let repo_id: String = r.try_get(0).map_err(parse)?;
            let held: bool = r.try_get(4).map_err(parse)?;
            let holder: Option<String> = r.try_get(2).map_err(parse)?;
            repos.push(PlacementView {
                preferred: placement::owner(&live, &repo_id).map(str::to_string),
                name: r.try_get(1).map_err(parse)?,
                owner: if held { holder } else { None },
                epoch: r.try_get::<_, i64>(3).map_err(parse)?.max(0) as u64,
                lease_remaining_ms: r.try_get(5).map_err(parse)?,
                generation: r.try_get::<_, i64>(6).map_err(parse)?.max(0) as u64,
                status: r.try_get(7).map_err(parse)?,
                repo_id,
            });
        }
        let latest_seq = feed_row.try_get::<_, i64>(0).map_err(parse)?.max(0) as u64;
        Ok(FleetView {
            node_id: self.node_id().to_string(),
            schema_version: version_row.try_get(0).map_err(parse)?,
            fleet_id: self.inner.db.fleet_id().to_string(),
            latest_seq,
            nodes,
            repos,
        })
    }

    // ---- lifecycle ----

    /// Leaves the fleet cleanly: stops the keeper, marks the node
    /// `leaving` (others stop ranking it), reports every lease lost
    /// ([`LossReason::Shutdown`]), ends them in the database so other nodes
    /// take over at their next heartbeat instead of after the TTL, appends
    /// `node_left` and marks the node `left`.
    pub async fn shutdown(&self) -> Result<(), FleetError> {
        self.stop_tasks().await;
        let me = self.node_id().to_string();
        let incarnation = self.inner.incarnation;
        let mark = |state: &'static str| {
            let me = me.clone();
            async move {
                with_client!(&self.inner.db, |c| c
                    .execute(
                        "UPDATE fleet_nodes SET state = $3 WHERE node_id = $1 AND incarnation = $2",
                        &[&me, &incarnation, &state],
                    )
                    .await)
            }
        };
        let leaving = mark("leaving").await;
        let all = self.inner.drop_all(LossReason::Shutdown);
        self.inner.set_node_state(NodeState::Stopped);
        leaving?;
        if !all.is_empty() {
            let (repos, epochs): (Vec<String>, Vec<i64>) =
                all.into_iter().map(|(r, e)| (r, e as i64)).unzip();
            keeper::release_in_db(&self.inner, &repos, &epochs).await?;
        }
        self.append_events(&[NewEvent {
            kind: "node_left".into(),
            repo_id: None,
            data: json!({ "node_id": me }),
        }])
        .await?;
        mark("left").await?;
        Ok(())
    }

    /// Stops the background tasks at once and releases nothing, as a
    /// crash would (other nodes take the leases once they expire). Fences
    /// stay valid until their local deadline, as in a process that was
    /// killed mid-write. For tests and for an emergency stop.
    pub fn abort(&self) {
        self.inner.stop.send_replace(true);
        for t in lock(&self.inner.tasks).drain(..) {
            t.abort();
        }
        self.inner.set_node_state(NodeState::Stopped);
    }

    async fn stop_tasks(&self) {
        self.inner.stop.send_replace(true);
        let tasks: Vec<JoinHandle<()>> = lock(&self.inner.tasks).drain(..).collect();
        for t in tasks {
            let abort = t.abort_handle();
            if tokio::time::timeout(self.inner.config.timing.op_timeout, t)
                .await
                .is_err()
            {
                abort.abort();
            }
        }
    }
}

/// Registers this process as `config.node_id`, waiting up to a TTL (plus a
/// heartbeat) for a previous live process with that id to lapse; then ends
/// the leases a previous process of this node left behind.
async fn register(
    client: &tokio_postgres::Client,
    config: &FleetConfig,
    incarnation: i64,
) -> Result<(), FleetError> {
    let timing = &config.timing;
    let ttl = timing.lease_ttl.as_secs_f64();
    let give_up = Instant::now() + timing.lease_ttl + timing.heartbeat;
    let db = |e: tokio_postgres::Error| crate::error::classify(&e).0;
    loop {
        let row = client
            .query_opt(
                "INSERT INTO fleet_nodes(node_id, incarnation, advertise_url, version, state, joined_at, heartbeat_at)
                 VALUES ($1, $2, $3, $4, 'active', clock_timestamp(), clock_timestamp())
                 ON CONFLICT (node_id) DO UPDATE SET incarnation = excluded.incarnation,
                     advertise_url = excluded.advertise_url, version = excluded.version,
                     state = 'active', joined_at = excluded.joined_at, heartbeat_at = excluded.heartbeat_at
                 WHERE fleet_nodes.state <> 'active'
                    OR fleet_nodes.heartbeat_at <= clock_timestamp() - make_interval(secs => $5)
                 RETURNING 1",
                &[&config.node_id, &incarnation, &config.advertise_url, &config.version, &ttl],
            )
            .await
            .map_err(db)?;
        if row.is_some() {
            break;
        }
        let age: i64 = client
            .query_one(
                "SELECT coalesce(floor(extract(epoch FROM clock_timestamp() - heartbeat_at) * 1000)::int8, 0)
                 FROM fleet_nodes WHERE node_id = $1",
                &[&config.node_id],
            )
            .await
            .map_err(db)?
            .try_get(0)
            .map_err(db)?;
        if Instant::now() >= give_up {
            return Err(FleetError::NodeIdInUse {
                node_id: config.node_id.clone(),
                age: Duration::from_millis(age.max(0) as u64),
            });
        }
        tokio::time::sleep(timing.heartbeat / 2).await;
    }
    client
        .execute(
            "UPDATE fleet_leases SET expires_at = clock_timestamp()
             WHERE node_id = $1 AND expires_at > clock_timestamp()",
            &[&config.node_id],
        )
        .await
        .map_err(db)?;
    Ok(())
}

/// The routing rule without a local fence (pure, for tests).
fn route_from(me: &str, repo_id: &str, cache: &Cached, connected: bool, retry: Duration) -> Route {
    let Some(lease) = cache.leases.get(repo_id) else {
        return Route::Unavailable {
            reason: "this node has not seen the repository's lease yet".into(),
            retry_after: retry,
        };
    };
    let holder = lease.holder.as_deref();
    if !connected {
        // Nobody can take a lease while the database is down: the last
        // known owner keeps answering reads.
        return match holder {
            Some(h) if h == me => Route::LocalReadOnly { epoch: lease.epoch },
            Some(h) => match cache.nodes.get(h) {
                Some((url, _)) => Route::Forward {
                    node_id: h.to_string(),
                    url: url.clone(),
                    epoch: lease.epoch,
                },
                None => Route::Unavailable {
                    reason: "the fleet database is unreachable and the owner's address is unknown"
                        .into(),
                    retry_after: retry,
                },
            },
            None => Route::Unavailable {
                reason: "the fleet database is unreachable and the repository has no owner".into(),
                retry_after: retry,
            },
        };
    }
    match holder {
        Some(h) if lease.held && h != me => match cache.nodes.get(h) {
            Some((url, true)) => Route::Forward {
                node_id: h.to_string(),
                url: url.clone(),
                epoch: lease.epoch,
            },
            _ => Route::Unavailable {
                reason: format!("the owner {h} is not live; another node takes over"),
                retry_after: retry,
            },
        },
        Some(h) if lease.held && h == me => Route::Unavailable {
            reason: "this node is handing the repository over".into(),
            retry_after: retry,
        },
        _ => Route::Unavailable {
            reason: "the repository has no owner yet; one takes it within a heartbeat".into(),
            retry_after: retry,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache(holder: &str, held: bool, live: bool) -> Cached {
        let mut c = Cached::default();
        c.leases.insert(
            "r".into(),
            CachedLease {
                holder: Some(holder.into()),
                epoch: 4,
                held,
            },
        );
        c.nodes
            .insert(holder.into(), (format!("http://{holder}:1"), live));
        c
    }

    #[test]
    fn routing_rules() {
        let d = Duration::from_secs(2);
        assert!(matches!(
            route_from("a", "r", &cache("b", true, true), true, d),
            Route::Forward { ref node_id, epoch: 4, .. } if node_id == "b"
        ));
        assert!(matches!(
            route_from("a", "r", &cache("b", true, false), true, d),
            Route::Unavailable { .. }
        ));
        assert!(matches!(
            route_from("a", "r", &cache("b", false, true), true, d),
            Route::Unavailable { .. }
        ));
        assert!(matches!(
            route_from("a", "missing", &cache("b", true, true), true, d),
            Route::Unavailable { .. }
        ));
        // Database down: the last known owner answers reads.
        assert!(matches!(
            route_from("a", "r", &cache("a", false, true), false, d),
            Route::LocalReadOnly { epoch: 4 }
        ));
        assert!(matches!(
            route_from("a", "r", &cache("b", false, false), false, d),
            Route::Forward { .. }
        ));
    }

    #[test]
    fn the_cache_never_goes_back_to_an_older_epoch() {
        let mut c = cache("a", true, true);
        let lease = |holder: &str, epoch| CachedLease {
            holder: Some(holder.into()),
            epoch,
            held: true,
        };
        c.learn("r", lease("b", 3));
        assert_eq!(c.leases["r"].holder.as_deref(), Some("a"));
        c.learn("r", lease("b", 4));
        assert_eq!(c.leases["r"].holder.as_deref(), Some("b"));
        c.learn("r", lease("c", 5));
        c.learn("new", lease("c", 1));
        assert_eq!(c.leases["r"].epoch, 5);
        assert_eq!(c.leases["new"].holder.as_deref(), Some("c"));
    }
}
