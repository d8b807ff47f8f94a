//! The shared registry in PostgreSQL: repositories (source, name, watch
//! flag, and the indexing state their owner publishes), and fleet-wide
//! settings. Registration and removal are not owner writes:
//! any node may do them, each with its event in the same transaction.

use std::collections::BTreeMap;

use serde_json::{Value, json};
use tokio_postgres::Row;

use crate::db::{Db, with_client};
use crate::error::{FleetError, classify};
use crate::model::{NewRepo, RepoRow, RepoSource, RepoState};

/// The columns [`repo_from_row`] reads, in order.
pub(crate) const REPO_COLUMNS: &str = "repo_id, name, git_url, git_ref, path, watch, \
     added_at, generation, commit_sha, status, dirty, consecutive_failures, last_started_at, \
     last_indexed_at, last_report, last_error, published_by, published_epoch, named_up_to";

/// Most names tried when a derived name is taken (`name-2` … `name-N`).
const MAX_NAME_TRIES: usize = 100;

fn to_u64(v: i64) -> u64 {
    v.max(0) as u64
}

pub(crate) fn repo_from_row(r: &Row) -> Result<RepoRow, tokio_postgres::Error> {
    let git_url: Option<String> = r.try_get(2)?;
    let git_ref: Option<String> = r.try_get(3)?;
    let path: Option<String> = r.try_get(4)?;
    let source = match (git_url, path) {
        (Some(url), _) => RepoSource::Git {
            url,
            git_ref: git_ref.unwrap_or_else(|| "HEAD".into()),
        },
        (None, path) => RepoSource::Path {
            path: path.unwrap_or_default(),
        },
    };
    let published_by: Option<String> = r.try_get(16)?;
    let published_epoch: Option<i64> = r.try_get(17)?;
    Ok(RepoRow {
        repo_id: r.try_get(0)?,
        name: r.try_get(1)?,
        source,
        watch: r.try_get(5)?,
        added_at: r.try_get(6)?,
        state: RepoState {
            generation: to_u64(r.try_get(7)?),
            commit_sha: r.try_get(8)?,
            status: r.try_get(9)?,
            dirty: r.try_get(10)?,
            consecutive_failures: r.try_get::<_, i32>(11)?.max(0) as u32,
            last_started_at: r.try_get(12)?,
            last_indexed_at: r.try_get(13)?,
            last_report: r.try_get(14)?,
            last_error: r.try_get(15)?,
        },
        published_by: published_by.zip(published_epoch.map(to_u64)),
        named_up_to: to_u64(r.try_get(18)?),
    })
}

/// The names to try for `new`: the name itself, then (when derived) `-2`, `-3`, ….
fn name_candidates(new: &NewRepo) -> Vec<String> {
    if new.name_is_explicit {
        return vec![new.name.clone()];
    }
    std::iter::once(new.name.clone())
        .chain((2..=MAX_NAME_TRIES).map(|i| format!("{}-{i}", new.name)))
        .collect()
}

enum AddOutcome {
    Existing(RepoRow),
    Created(RepoRow),
    NameTaken,
}

/// Registers `new` (with its `repo_added` event and an unheld lease row),
/// or returns the repository already registered from the same source.
/// Returns the row and whether it was created.
pub(crate) async fn add_repo(
    db: &Db,
    node_id: &str,
    new: &NewRepo,
) -> Result<(RepoRow, bool), FleetError> {
    let key = new.source.key();
    let (git_url, git_ref, path) = match &new.source {
        RepoSource::Git { url, git_ref } => (Some(url.as_str()), Some(git_ref.as_str()), None),
        RepoSource::Path { path } => (None, None, Some(path.as_str())),
    };
    let select = format!("SELECT {REPO_COLUMNS} FROM fleet_repos WHERE source_key = $1");
    let insert = format!(
        "INSERT INTO fleet_repos(repo_id, name, source_key, git_url, git_ref, path, watch, added_at)
         VALUES (gen_random_uuid()::text, $1, $2, $3, $4, $5, $6,
                 floor(extract(epoch FROM clock_timestamp()))::bigint)
         ON CONFLICT DO NOTHING
         RETURNING {REPO_COLUMNS}"
    );
    for name in name_candidates(new) {
        let outcome = with_client!(db, |c| {
            let tx = c.transaction().await?;
            if let Some(row) = tx.query_opt(&select, &[&key]).await? {
                let repo = repo_from_row(&row)?;
                tx.commit().await?;
                return Ok::<_, tokio_postgres::Error>(AddOutcome::Existing(repo));
            }
            let Some(row) = tx
                .query_opt(
                    &insert,
                    &[&name, &key, &git_url, &git_ref, &path, &new.watch],
                )
                .await?
            else {
                // The name is taken, or the same source was registered
                // concurrently: the next round tells which.
                return Ok(AddOutcome::NameTaken);
            };
            let repo = repo_from_row(&row)?;
            tx.execute(
                "INSERT INTO fleet_leases(repo_id) VALUES ($1)",
                &[&repo.repo_id],
            )
            .await?;
            let data = json!({ "name": repo.name, "source": repo.source, "watch": repo.watch });
            tx.execute(
                "SELECT fleet_append_events($1, NULL, ARRAY[$2::text], ARRAY['repo_added'], ARRAY[$3::jsonb])",
                &[&node_id, &repo.repo_id, &data],
            )
            .await?;
            tx.commit().await?;
            Ok(AddOutcome::Created(repo))
        })?;
        match outcome {
            AddOutcome::Existing(repo) => return Ok((repo, false)),
            AddOutcome::Created(repo) => return Ok((repo, true)),
            AddOutcome::NameTaken => {
                // A concurrent registration of the same source wins over a
                // name clash: look again before trying another name.
                let existing = with_client!(db, |c| c.query_opt(&select, &[&key]).await)?;
                if let Some(row) = existing {
                    let repo = repo_from_row(&row).map_err(|e| classify(&e).0)?;
                    return Ok((repo, false));
                }
            }
        }
    }
    Err(FleetError::NameTaken(new.name.clone()))
}

/// Unregisters a repository (its lease row goes with it, so its owner's
/// next renewal or publish fails) and appends `repo_removed`. Returns
/// whether it existed.
pub(crate) async fn remove_repo(db: &Db, node_id: &str, repo_id: &str) -> Result<bool, FleetError> {
    with_client!(db, |c| {
        let tx = c.transaction().await?;
        // Lease row first, as `fleet_publish` locks them: no deadlock.
        tx.query_opt(
            "SELECT 1 FROM fleet_leases WHERE repo_id = $1 FOR UPDATE",
            &[&repo_id],
        )
        .await?;
        let gone = tx
            .query_opt(
                "DELETE FROM fleet_repos WHERE repo_id = $1 RETURNING name",
                &[&repo_id],
            )
            .await?;
        let Some(row) = gone else {
            tx.rollback().await?;
            return Ok(false);
        };
        let name: String = row.try_get(0)?;
        let data = json!({ "name": name });
        tx.execute(
            "SELECT fleet_append_events($1, NULL, ARRAY[$2::text], ARRAY['repo_removed'], ARRAY[$3::jsonb])",
            &[&node_id, &repo_id, &data],
        )
        .await?;
        tx.commit().await?;
        Ok(true)
    })
}

/// Every repository, in registration order.
pub(crate) async fn repos(db: &Db) -> Result<Vec<RepoRow>, FleetError> {
    let sql = format!("SELECT {REPO_COLUMNS} FROM fleet_repos ORDER BY added_at, repo_id");
    with_client!(db, |c| {
        let rows = c.query(&sql, &[]).await?;
        rows.iter()
            .map(repo_from_row)
            .collect::<Result<Vec<_>, _>>()
    })
}

/// One repository by id, else by name.
pub(crate) async fn repo(db: &Db, id_or_name: &str) -> Result<Option<RepoRow>, FleetError> {
    let sql = format!(
        "SELECT {REPO_COLUMNS} FROM fleet_repos WHERE repo_id = $1
         UNION ALL
         SELECT {REPO_COLUMNS} FROM fleet_repos WHERE name = $1 AND repo_id <> $1
         LIMIT 1"
    );
    with_client!(db, |c| {
        match c.query_opt(&sql, &[&id_or_name]).await? {
            Some(row) => repo_from_row(&row).map(Some),
            None => Ok(None),
        }
    })
}

/// Repositories by id (those that exist).
pub(crate) async fn repos_by_id(db: &Db, ids: &[String]) -> Result<Vec<RepoRow>, FleetError> {
    let sql = format!("SELECT {REPO_COLUMNS} FROM fleet_repos WHERE repo_id = ANY($1)");
    with_client!(db, |c| {
        let rows = c.query(&sql, &[&ids]).await?;
        rows.iter()
            .map(repo_from_row)
            .collect::<Result<Vec<_>, _>>()
    })
}

/// Sets a repository's watch flag; returns whether it exists.
pub(crate) async fn set_watch(db: &Db, repo_id: &str, watch: bool) -> Result<bool, FleetError> {
    with_client!(db, |c| c
        .execute(
            "UPDATE fleet_repos SET watch = $2 WHERE repo_id = $1",
            &[&repo_id, &watch],
        )
        .await
        .map(|n| n > 0))
}

/// Raises `repo_id`'s `named_up_to` to `generation` (never lowers it).
/// Whether the repository exists.
pub(crate) async fn note_named(
    db: &Db,
    repo_id: &str,
    generation: u64,
) -> Result<bool, FleetError> {
    let generation = generation.min(i64::MAX as u64) as i64;
    with_client!(db, |c| c
        .execute(
            "UPDATE fleet_repos SET named_up_to = GREATEST(named_up_to, $2) WHERE repo_id = $1",
            &[&repo_id, &generation],
        )
        .await
        .map(|n| n > 0))
}

/// Fleet-wide settings.
pub(crate) async fn settings(db: &Db) -> Result<BTreeMap<String, Value>, FleetError> {
    with_client!(db, |c| {
        let rows = c
            .query("SELECT key, value FROM fleet_settings ORDER BY key", &[])
            .await?;
        rows.iter()
            .map(|r| Ok((r.try_get::<_, String>(0)?, r.try_get::<_, Value>(1)?)))
            .collect::<Result<BTreeMap<_, _>, tokio_postgres::Error>>()
    })
}

/// Sets (or, with `None`, deletes) a fleet-wide setting.
pub(crate) async fn set_setting(
    db: &Db,
    key: &str,
    value: Option<&Value>,
) -> Result<(), FleetError> {
    with_client!(db, |c| {
        match value {
            Some(v) => {
                c.execute(
                    "INSERT INTO fleet_settings(key, value) VALUES ($1, $2)
                     ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = clock_timestamp()",
                    &[&key, v],
                )
                .await?;
            }
            None => {
                c.execute("DELETE FROM fleet_settings WHERE key = $1", &[&key])
                    .await?;
            }
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_names_get_suffixes_and_explicit_ones_do_not() {
        let mut new = NewRepo {
            name: "tokio".into(),
            name_is_explicit: false,
            source: RepoSource::Path { path: "/x".into() },
            watch: false,
        };
        let names = name_candidates(&new);
        assert_eq!(&names[..3], ["tokio", "tokio-2", "tokio-3"]);
        assert_eq!(names.len(), MAX_NAME_TRIES);
        new.name_is_explicit = true;
        assert_eq!(name_candidates(&new), vec!["tokio".to_string()]);
    }
}
