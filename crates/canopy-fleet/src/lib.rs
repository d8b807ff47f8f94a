//! # canopy-fleet
//!
//! Fleet mode for `canopy serve`: several service nodes sharing one
//! PostgreSQL database. This crate owns everything that is shared: the
//! registry (repositories, watch flags, settings), one authoritative
//! generation per repository, the event feed with one global sequence,
//! node membership (heartbeats) and per-repository leases with fencing.
//! It knows nothing of HTTP or of the index: the service calls [`Fleet`].
//!
//! | module | owns |
//! |---|---|
//! | [`config`] | [`FleetConfig`], [`Timing`] and their validation |
//! | [`schema`] | the tables and functions, as versioned migrations |
//! | [`db`] | the connection pool, reconnection with backoff, database health |
//! | [`placement`] | rendezvous hashing: which live node should own a repository |
//! | [`lease`] | [`Fence`], the local lease state machine, the pure planning step |
//! | [`keeper`] | the heartbeat task that renews, takes and hands over leases |
//! | [`registry`] | repositories and settings in PostgreSQL |
//! | [`feed`] | appending, fenced publishing, reading and long-polling events |
//! | [`fleet`] | [`Fleet`], the handle the service holds; routing and health |
//! | [`git`] | the owner's working copy of a repository registered by git URL |
//! | [`metrics`] | fleet counters and their Prometheus text |
//! | [`model`] | the plain data types |
//! | [`testing`] | a throwaway PostgreSQL server for tests and benchmarks |
//! | [`tls`] | `sslmode` / `sslrootcert` as libpq reads them, the rustls connector |
//!
//! Design, failure cases and deployment: `docs/fleet.md`.

#![warn(missing_docs)]

pub mod config;
pub mod db;
pub mod error;
pub mod feed;
pub mod fleet;
pub mod git;
pub mod keeper;
pub mod lease;
pub mod metrics;
pub mod model;
pub mod placement;
pub mod registry;
pub mod schema;
pub mod testing;
pub mod tls;

pub use config::{FLEET_URL_ENV, FleetConfig, Timing};
pub use error::FleetError;
pub use fleet::{Fleet, FleetHealth, NodeState, Route, migrate};
pub use keeper::{LeaseChange, LossReason};
pub use lease::Fence;
pub use metrics::{ForwardStage, UnreachableOwner};
pub use model::{
    EventPage, EventRow, FleetView, NewEvent, NewRepo, NodeView, PlacementView, RepoRow,
    RepoSource, RepoState,
};
