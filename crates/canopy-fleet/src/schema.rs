//! The fleet's tables and functions in PostgreSQL, as versioned migrations
//! applied on start ([`migrate`]).
//!
//! Migrations run in one transaction under a transaction-scoped advisory
//! lock, so nodes starting together apply each one exactly once (the
//! others wait, then find nothing to do), a node killed halfway leaves the
//! previous version intact, and the lock goes away with the session. A
//! database whose version is newer than this build knows is refused.
//!
//! Why server-side functions: a write that publishes a generation or events
//! must check the lease in the same transaction ([`SCHEMA_V1`]'s
//! `fleet_publish`). Done as one statement it is one round trip with no
//! transaction left open on the client side, so a client paused between
//! statements can never hold the lease row locked.
//!
//! Why a counter row for event sequence numbers instead of a sequence:
//! sequence values are handed out at insert time but become visible at
//! commit, in any order, so a reader could see 12 before 11 commits and
//! move its cursor past 11 for ever. Taking the next numbers from
//! `fleet_feed` under its row lock makes commit order equal sequence order
//! (the lock is released after the commit is visible), so every snapshot
//! holds a gap-free prefix of the feed.

use tokio_postgres::Client;

use crate::error::{FleetError, classify};

/// Key of the advisory lock held while migrating ("canopy-f" in ASCII).
pub const MIGRATION_LOCK_KEY: i64 = 0x6361_6e6f_7079_2d66;

/// Events kept in the feed; older ones are pruned (as in the single-node registry).
pub const MAX_EVENTS: i64 = 100_000;

/// Channel notified with the newest sequence number after each append.
pub const EVENTS_CHANNEL: &str = "canopy_fleet_events";

/// Version 1: nodes, repositories, leases, settings, the event feed and
/// the two writing functions.
pub const SCHEMA_V1: &str = r#"
CREATE TABLE fleet_nodes (
    node_id       text PRIMARY KEY,
    incarnation   bigint NOT NULL,
    advertise_url text NOT NULL,
    version       text NOT NULL,
    state         text NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'leaving', 'left')),
    joined_at     timestamptz NOT NULL DEFAULT clock_timestamp(),
    heartbeat_at  timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE TABLE fleet_repos (
    repo_id              text PRIMARY KEY,
    name                 text NOT NULL UNIQUE,
    source_key           text NOT NULL UNIQUE,
    git_url              text,
    git_ref              text,
    path                 text,
    watch                boolean NOT NULL DEFAULT false,
    settings             jsonb NOT NULL DEFAULT '{}'::jsonb,
    added_at             bigint NOT NULL,
    generation           bigint NOT NULL DEFAULT 0 CHECK (generation >= 0),
    commit_sha           text,
    status               text NOT NULL DEFAULT 'not_indexed',
    dirty                boolean NOT NULL DEFAULT false,
    consecutive_failures integer NOT NULL DEFAULT 0,
    last_started_at      bigint,
    last_indexed_at      bigint,
    last_report          jsonb,
    last_error           jsonb,
    published_by         text,
    published_epoch      bigint,
    CHECK (git_url IS NOT NULL OR path IS NOT NULL)
);

-- One row per repository, created with it; epoch only grows. NULL expiry:
-- never held.
CREATE TABLE fleet_leases (
    repo_id     text PRIMARY KEY REFERENCES fleet_repos(repo_id) ON DELETE CASCADE,
    node_id     text,
    epoch       bigint NOT NULL DEFAULT 0,
    acquired_at timestamptz,
    renewed_at  timestamptz,
    expires_at  timestamptz
);
CREATE INDEX fleet_leases_by_node ON fleet_leases(node_id);

CREATE TABLE fleet_settings (
    key        text PRIMARY KEY,
    value      jsonb NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE TABLE fleet_feed (
    id       integer PRIMARY KEY CHECK (id = 1),
    last_seq bigint NOT NULL
);
INSERT INTO fleet_feed(id, last_seq) VALUES (1, 0);

CREATE TABLE fleet_events (
    seq     bigint PRIMARY KEY,
    ts_ms   bigint NOT NULL,
    kind    text NOT NULL,
    repo_id text,
    node_id text,
    epoch   bigint,
    data    jsonb NOT NULL
);
CREATE INDEX fleet_events_by_repo ON fleet_events(repo_id, seq);

-- Appends events with the next sequence numbers, taken under the feed
-- row's lock (commit order = sequence order), prunes when a multiple of
-- 1,000 is crossed, and notifies listeners at commit.
CREATE FUNCTION fleet_append_events(p_node text, p_epoch bigint, p_repos text[],
                                    p_kinds text[], p_data jsonb[])
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    n integer := coalesce(array_length(p_kinds, 1), 0);
    last bigint;
BEGIN
    IF n = 0 THEN
        RETURN 0;
    END IF;
    IF coalesce(array_length(p_repos, 1), 0) <> n OR coalesce(array_length(p_data, 1), 0) <> n THEN
        RAISE EXCEPTION 'fleet_append_events: % kinds, % repositories, % data',
            n, array_length(p_repos, 1), array_length(p_data, 1);
    END IF;
    UPDATE fleet_feed SET last_seq = last_seq + n WHERE id = 1 RETURNING last_seq INTO last;
    INSERT INTO fleet_events(seq, ts_ms, kind, repo_id, node_id, epoch, data)
    SELECT last - n + e.ord, floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint,
           e.kind, e.repo_id, p_node, p_epoch, e.data
    FROM unnest(p_kinds, p_repos, p_data) WITH ORDINALITY AS e(kind, repo_id, data, ord);
    IF last / 1000 > (last - n) / 1000 THEN
        DELETE FROM fleet_events WHERE seq <= last - 100000;
    END IF;
    PERFORM pg_notify('canopy_fleet_events', last::text);
    RETURN last;
END $$;

-- The only way a repository's generation and indexing state change: the
-- caller's lease (node, epoch) must be the current one and unexpired, by
-- the database's clock, while the lease row is locked (a takeover waits for
-- this transaction; one that committed first is seen). The generation
-- must be the expected one and never goes down.
CREATE FUNCTION fleet_publish(p_repo text, p_node text, p_epoch bigint, p_expect bigint,
                              p_generation bigint, p_commit text, p_status text,
                              p_dirty boolean, p_failures integer, p_started bigint,
                              p_indexed bigint, p_report jsonb, p_error jsonb,
                              p_kinds text[], p_data jsonb[])
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    l fleet_leases%ROWTYPE;
    cur bigint;
    n integer := coalesce(array_length(p_kinds, 1), 0);
BEGIN
    SELECT * INTO l FROM fleet_leases WHERE repo_id = p_repo FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'repository % is not registered', p_repo USING ERRCODE = 'CF002';
    END IF;
    IF l.node_id IS DISTINCT FROM p_node OR l.epoch <> p_epoch
       OR l.expires_at IS NULL OR l.expires_at <= clock_timestamp() THEN
        RAISE EXCEPTION 'lease epoch % of repository % held by % is not current: the lease is at epoch %, held by %, %',
            p_epoch, p_repo, p_node, l.epoch, coalesce(l.node_id, 'nobody'),
            CASE WHEN l.expires_at IS NOT NULL AND l.expires_at > clock_timestamp()
                 THEN 'unexpired' ELSE 'expired' END
            USING ERRCODE = 'CF001';
    END IF;
    SELECT generation INTO cur FROM fleet_repos WHERE repo_id = p_repo FOR UPDATE;
    IF cur <> p_expect OR p_generation < cur THEN
        RAISE EXCEPTION 'repository % is at generation %; the writer expected % and asked for %',
            p_repo, cur, p_expect, p_generation USING ERRCODE = 'CF003';
    END IF;
    UPDATE fleet_repos SET generation = p_generation, commit_sha = p_commit, status = p_status,
        dirty = p_dirty, consecutive_failures = p_failures, last_started_at = p_started,
        last_indexed_at = p_indexed, last_report = p_report, last_error = p_error,
        published_by = p_node, published_epoch = p_epoch
    WHERE repo_id = p_repo;
    RETURN fleet_append_events(p_node, p_epoch, array_fill(p_repo, ARRAY[n]), p_kinds, p_data);
END $$;
"#;

/// Version 2: the fleet's identity, a random id made once per database.
/// Every session checks it on connecting, so a node whose URL now reaches
/// another database (a DNS or port change, a stranger's server on a reused
/// port) treats it as an outage instead of acting on foreign state.
pub const SCHEMA_V2: &str = r#"
CREATE TABLE fleet_identity (
    id         integer PRIMARY KEY CHECK (id = 1),
    fleet_id   text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
INSERT INTO fleet_identity(id, fleet_id) VALUES (1, gen_random_uuid()::text);
"#;

/// Version 3: `fleet_repos.settings` goes. It was a free-form JSON object
/// that no node read: a repository's one setting, `watch`, has its own
/// column, which `GET`/`POST /repos/{id}/settings` read and write, so a
/// key stored there would have looked set while no node honoured it. A
/// new setting gets a typed column (and its validation) with the
/// migration that adds it.
pub const SCHEMA_V3: &str = r#"
ALTER TABLE fleet_repos DROP COLUMN settings;
"#;

/// Version 4: `fleet_repos.named_up_to`, the highest generation the
/// owner has given to a state of the index in the middle of a run
/// (an answer read it before the run published). Written before the
/// answer carrying it leaves, so a node that takes the repository over
/// after the owner died mid-run publishes above it and one generation
/// never names two states. Only ever raised (`GREATEST`).
pub const SCHEMA_V4: &str = r#"
ALTER TABLE fleet_repos ADD COLUMN named_up_to bigint NOT NULL DEFAULT 0;
"#;

/// Every migration, in order: (version, name, SQL).
pub const MIGRATIONS: &[(i32, &str, &str)] = &[
    (1, "fleet base schema", SCHEMA_V1),
    (2, "fleet identity", SCHEMA_V2),
    (3, "drop fleet_repos.settings", SCHEMA_V3),
    (4, "fleet_repos.named_up_to", SCHEMA_V4),
];

/// The database's fleet id (schema version 2 and later).
pub async fn fleet_id(client: &Client) -> Result<String, tokio_postgres::Error> {
    client
        .query_one("SELECT fleet_id FROM fleet_identity WHERE id = 1", &[])
        .await?
        .try_get(0)
}

/// The newest schema version this build knows.
pub fn latest_version() -> i32 {
    MIGRATIONS.last().map_or(0, |m| m.0)
}

/// Applies the missing migrations; returns the schema version now in the
/// database. Safe to call from several nodes at once.
pub async fn migrate(client: &mut Client) -> Result<i32, FleetError> {
    let db = |e: tokio_postgres::Error| classify(&e).0;
    let tx = client.transaction().await.map_err(db)?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK_KEY])
        .await
        .map_err(db)?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS fleet_schema_migrations (
             version    integer PRIMARY KEY,
             name       text NOT NULL,
             applied_at timestamptz NOT NULL DEFAULT clock_timestamp()
         )",
    )
    .await
    .map_err(db)?;
    let current: i32 = tx
        .query_one(
            "SELECT coalesce(max(version), 0) FROM fleet_schema_migrations",
            &[],
        )
        .await
        .map_err(db)?
        .try_get(0)
        .map_err(db)?;
    let known = latest_version();
    if current > known {
        return Err(FleetError::SchemaTooNew {
            found: current,
            known,
        });
    }
    for (version, name, sql) in MIGRATIONS.iter().filter(|m| m.0 > current) {
        tracing::info!(version, name, "applying fleet schema migration");
        tx.batch_execute(sql).await.map_err(db)?;
        tx.execute(
            "INSERT INTO fleet_schema_migrations(version, name) VALUES ($1, $2)",
            &[version, name],
        )
        .await
        .map_err(db)?;
    }
    tx.commit().await.map_err(db)?;
    Ok(known)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrations_are_ordered_and_consistent_with_the_constants() {
        let versions: Vec<i32> = MIGRATIONS.iter().map(|m| m.0).collect();
        let mut sorted = versions.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(versions, sorted, "versions strictly increase");
        assert_eq!(versions.first(), Some(&1));
        assert_eq!(latest_version(), 4);
        // The SQL spells the constants the Rust side relies on.
        assert!(SCHEMA_V1.contains(&format!("'{EVENTS_CHANNEL}'")));
        assert!(SCHEMA_V1.contains(&format!("seq <= last - {MAX_EVENTS}")));
        for code in [
            crate::error::SQLSTATE_FENCED,
            crate::error::SQLSTATE_NO_REPO,
            crate::error::SQLSTATE_GENERATION,
        ] {
            assert!(SCHEMA_V1.contains(&format!("ERRCODE = '{code}'")), "{code}");
        }
    }
}
