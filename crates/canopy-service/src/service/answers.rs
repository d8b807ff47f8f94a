//! The answers: `/query`, `/evidence_pack`, `/context`, `/graph` and
//! `/expand`, each a [`Served`] answer under the generation naming the
//! index state it read (503 `not_ready` before the first complete run; 409
//! `stale_generation` for what names a state the index has left); `/status`
//! and `/events`.

use std::sync::Arc;

use canopy_client::api::{
    ContextRequest, EventsResponse, ExpandRequest, ExpandResponse, ExpandedContent,
    GraphHttpRequest, HandleRef, PackRequest, QueryRequest, RepoStatusView, StatusResponse,
};
use canopy_client::served::{Served, ServedAt};
use canopy_core::Engine;
use canopy_core::context::ContextPack;
use canopy_core::graph::request::GraphResponse;
use canopy_core::model::QueryResult;
use canopy_core::pack::EvidencePack;

use super::entry::{Judged, RepoEntry, RepoState};
use super::{Service, lock};
use crate::error::ApiError;

/// Largest `expand_budget` honoured on `/query` (larger values are clamped).
pub const MAX_EXPAND_BUDGET: u64 = 100_000;
/// Longest accepted session id.
pub const MAX_SESSION_LEN: usize = 128;

fn check_session(session: Option<String>) -> Result<Option<String>, ApiError> {
    match session {
        None => Ok(None),
        Some(s) if s.is_empty() => Ok(None),
        Some(s) if s.len() <= MAX_SESSION_LEN && s.chars().all(|c| c.is_ascii_graphic()) => {
            Ok(Some(s))
        }
        Some(_) => Err(ApiError::Validation(format!(
            "session must be 1..={MAX_SESSION_LEN} printable ASCII characters"
        ))),
    }
}

impl Service {
    /// The engine and the state it answers from, or 503 `not_ready`.
    fn serving(&self, entry: &RepoEntry) -> Result<(Arc<Engine>, ServedAt), ApiError> {
        let (generation, commit_sha, indexing) = {
            let st = lock(&entry.state);
            (
                st.record.generation,
                st.record.commit_sha.clone(),
                st.run.is_some(),
            )
        };
        if generation == 0 {
            return Err(ApiError::NotReady {
                repo: entry.id.clone(),
                indexing,
            });
        }
        let at = ServedAt {
            repo_id: entry.id.clone(),
            generation,
            commit_sha,
        };
        Ok((entry.engine(&self.config)?, at))
    }

    /// `at` with the generation naming the state an answer read: the
    /// engine generation of its snapshot (`read`), else the index's now
    /// (see `entry::StateNames`).
    fn named(
        &self,
        entry: &RepoEntry,
        engine: &Engine,
        mut at: ServedAt,
        read: Option<u64>,
    ) -> ServedAt {
        if let Some(read) = read.or_else(|| engine.generation().ok()) {
            let mut st = lock(&entry.state);
            at.generation = st.name_state(read);
            self.save_named(entry, &mut st);
        }
        at
    }

    /// Saves a generation naming just gave (see `RepoRecord::named_up_to`)
    /// before the answer carrying it leaves, so a restart in the middle of
    /// a run never gives it again: in the registry, or in fleet mode in
    /// PostgreSQL (`fleet_repos.named_up_to`), where the node that takes
    /// the repository over after this one died mid-run reads it and
    /// publishes above it (`adopted_record`).
    fn save_named(&self, entry: &RepoEntry, st: &mut RepoState) {
        let Some(name) = st.names.take_unsaved() else {
            return;
        };
        let saved = match self.fleet.get() {
            Some(node) => node.note_named(&entry.id, name),
            None => self
                .registry
                .note_named(&entry.id, name)
                .map_err(Into::into),
        };
        if let Err(e) = saved {
            // Answering matters more; a restart mid-run could then repeat it.
            tracing::warn!(repo = %entry.id, "cannot save generation {name} as given: {e}");
        }
    }

    /// `POST /query`.
    pub fn query(&self, req: QueryRequest) -> Result<Served<QueryResult>, ApiError> {
        let entry = self.lookup(&req.repo)?;
        let mut params = req.params;
        params.validate()?;
        params.expand_budget = params.expand_budget.map(|b| b.min(MAX_EXPAND_BUDGET));
        let (engine, at) = self.serving(&entry)?;
        let result = engine.query(&params)?;
        self.metrics.returned(&entry.id, result.handles.len(), &[]);
        let at = self.named(&entry, &engine, at, read_at(&result.freshness));
        Ok(Served::new(at, result))
    }

    /// The generation a graph or context request's target came from: one
    /// naming the index's state now (or, during a run, a state of that
    /// run) passes, an older one is 409 `stale_generation` (naming
    /// `target`), one this service never gave is a 400.
    fn check_generation(
        &self,
        entry: &RepoEntry,
        engine: &Engine,
        given: Option<u64>,
        target: &str,
    ) -> Result<(), ApiError> {
        let Some(given) = given else {
            return Ok(());
        };
        let now = engine.generation()?;
        let verdict = {
            let mut st = lock(&entry.state);
            let verdict = st.judge(given, now);
            self.save_named(entry, &mut st);
            verdict
        };
        match verdict {
            Judged::Current(_) | Judged::DuringRun(_) => Ok(()),
            Judged::Future(current) => Err(ApiError::Validation(format!(
                "generation {given} is newer than the current generation {current} of {}; \
                 pass a generation from a response of this service",
                entry.id
            ))),
            Judged::Stale(current) => {
                self.metrics.stale_rejection();
                Err(ApiError::StaleGeneration {
                    ids: target.to_string(),
                    given,
                    current,
                })
            }
        }
    }

    /// `POST /graph`: one navigation request over one snapshot of the index.
    pub fn graph(&self, req: GraphHttpRequest) -> Result<Served<GraphResponse>, ApiError> {
        let entry = self.lookup(&req.repo)?;
        req.request.validate()?;
        let (engine, at) = self.serving(&entry)?;
        self.check_generation(&entry, &engine, req.generation, &req.request.target)?;
        let (answer, read) = engine.graph_request_at(&req.request)?;
        self.metrics.returned(&entry.id, answer.len(), &[]);
        let at = self.named(&entry, &engine, at, Some(read));
        Ok(Served::new(at, answer))
    }

    /// `POST /context`.
    pub fn context(&self, req: ContextRequest) -> Result<Served<ContextPack>, ApiError> {
        let entry = self.lookup(&req.repo)?;
        let params = canopy_core::context::ContextParams {
            task: req.task,
            focus: req.focus,
            budget_tokens: req.budget_tokens,
            strategy: req.strategy,
        };
        params.validate()?;
        let (engine, at) = self.serving(&entry)?;
        let focus = params.focus.clone().unwrap_or_default();
        self.check_generation(&entry, &engine, req.generation, &focus)?;
        let pack = engine.context(&params)?;
        self.metrics.returned(&entry.id, pack.fragments.len(), &[]);
        let at = self.named(&entry, &engine, at, read_at(&pack.freshness));
        Ok(Served::new(at, pack))
    }

    /// `POST /evidence_pack`.
    pub fn evidence_pack(
        &self,
        req: PackRequest,
        header_session: Option<String>,
    ) -> Result<Served<EvidencePack>, ApiError> {
        let entry = self.lookup(&req.repo)?;
        let session = check_session(req.session.or(header_session))?;
        let mut params = req.params;
        params.query.validate()?;
        params.query.expand_budget = None;
        let (engine, at) = self.serving(&entry)?;
        let pack = engine.evidence_pack(&params, session.as_deref())?;
        let suggested: Vec<String> = pack
            .expand_suggestion
            .iter()
            .map(|h| h.as_str().to_string())
            .collect();
        self.metrics
            .returned(&entry.id, pack.handles.len(), &suggested);
        let at = self.named(&entry, &engine, at, read_at(&pack.freshness));
        Ok(Served::new(at, pack).with_session(session))
    }

    /// `POST /expand`.
    pub fn expand(
        &self,
        req: ExpandRequest,
        header_session: Option<String>,
    ) -> Result<ExpandResponse, ApiError> {
        let entry = self.lookup(&req.repo)?;
        let session = check_session(req.session.or(header_session))?;
        if req.handles.is_empty() {
            return Err(ApiError::Validation(
                "`handles` must list at least one handle ({\"id\": \"h…\", \"generation\": N})"
                    .into(),
            ));
        }
        if req.handles.len() > self.config.max_expand_handles {
            return Err(ApiError::Validation(format!(
                "at most {} handles per expand request (got {})",
                self.config.max_expand_handles,
                req.handles.len()
            )));
        }
        let (engine, at) = self.serving(&entry)?;
        let now = engine.generation()?;
        let mut generation = at.generation;
        let mut stale: Vec<&HandleRef> = Vec::new();
        {
            let mut st = lock(&entry.state);
            for handle in &req.handles {
                let verdict = match handle.generation() {
                    Some(given) => st.judge(given, now),
                    None => Judged::Current(st.name_state(now)),
                };
                self.save_named(&entry, &mut st);
                match verdict {
                    Judged::Current(current) | Judged::DuringRun(current) => generation = current,
                    // A generation this service never issued is a client
                    // bug, not a stale handle: re-querying would not help.
                    Judged::Future(current) => {
                        return Err(ApiError::Validation(format!(
                            "handle {} carries generation {}, newer than the current generation {current}; \
                             pass the generation a response of this service gave",
                            handle.id(),
                            handle.generation().unwrap_or_default()
                        )));
                    }
                    Judged::Stale(current) => {
                        generation = current;
                        stale.push(handle);
                    }
                }
            }
        }
        if let Some(first) = stale.first() {
            self.metrics.stale_rejection();
            let ids: Vec<&str> = stale.iter().take(5).map(|h| h.id()).collect();
            let more = if stale.len() > 5 {
                format!(" and {} more", stale.len() - 5)
            } else {
                String::new()
            };
            return Err(ApiError::StaleGeneration {
                ids: format!("{}{more}", ids.join(", ")),
                given: first.generation().unwrap_or(0),
                current: generation,
            });
        }
        let ids: Vec<&str> = req.handles.iter().map(|h| h.id()).collect();
        let expansions = engine.expand_in_session(&ids, session.as_deref())?;
        let contents: Vec<ExpandedContent> = expansions
            .into_iter()
            .map(|e| ExpandedContent {
                handle_id: e.handle_id.as_str().to_string(),
                file_path: e.file_path,
                line_range: e.line_range,
                token_count: canopy_core::tokens::count_tokens(&e.content) as u64,
                content: e.content,
            })
            .collect();
        let total_tokens = contents.iter().map(|c| c.token_count).sum();
        let served: Vec<String> = contents.iter().map(|c| c.handle_id.clone()).collect();
        self.metrics.expanded(&entry.id, &served, total_tokens);
        Ok(ExpandResponse {
            repo_id: at.repo_id,
            generation,
            commit_sha: at.commit_sha,
            contents,
            total_tokens,
        })
    }

    /// `GET /status` (optionally one repository).
    pub fn status(&self, repo: Option<&str>) -> Result<StatusResponse, ApiError> {
        let entries = match repo.filter(|r| !r.trim().is_empty()) {
            Some(r) => vec![self.lookup(r)?],
            None => self.entries(),
        };
        let repos = entries
            .iter()
            .map(|e| {
                let view = e.view();
                let engine = if view.ready {
                    e.engine(&self.config).ok()
                } else {
                    None
                };
                let index = engine.as_ref().and_then(|eng| eng.status().ok());
                // Peeked, never named: a poll must not use up generations.
                let serving_generation = engine
                    .and_then(|eng| eng.generation().ok())
                    .and_then(|now| lock(&e.state).peek_state(now));
                RepoStatusView {
                    repo: view,
                    index,
                    serving_generation,
                }
            })
            .collect();
        Ok(StatusResponse {
            service: "canopy-service".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            uptime_seconds: self.started.elapsed().as_secs(),
            repos,
        })
    }

    /// `GET /events`: one page after the cursor (no waiting; see the HTTP layer).
    pub fn events(
        &self,
        after: u64,
        limit: usize,
        repo: Option<&str>,
    ) -> Result<EventsResponse, ApiError> {
        let repo_id = match repo.filter(|r| !r.trim().is_empty()) {
            Some(r) => Some(self.lookup(r)?.id.clone()),
            None => None,
        };
        let (items, latest) = self
            .registry
            .events_after(after, limit, repo_id.as_deref())
            .map_err(ApiError::internal)?;
        let next_after_seq = match items.last() {
            Some(last) => last.seq,
            // Nothing (matching) up to `latest`: the cursor may skip ahead.
            None if repo_id.is_some() => after.max(latest),
            None => after,
        };
        Ok(EventsResponse {
            items,
            next_after_seq,
            latest_seq: latest,
        })
    }
}

/// The engine generation an answer's snapshot had, when it says.
fn read_at(freshness: &Option<canopy_core::model::Freshness>) -> Option<u64> {
    freshness.as_ref().map(|f| f.generation)
}
