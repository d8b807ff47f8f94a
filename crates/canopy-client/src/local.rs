//! [`LocalBackend`]: the [`Backend`] over a repository's own index
//! ([`canopy_core::Engine`]), opened on first use so that a read-only
//! request (`status`) never creates one.
//!
//! Its engine is there for what only a local index does beyond the trait
//! (watching, finishing a background index before the process exits):
//! [`Backend::local`].

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use canopy_core::context::ContextPack;
use canopy_core::discover::discover;
use canopy_core::graph::request::GraphResponse;
use canopy_core::index::IndexProgress;
use canopy_core::lazy::LAZY_THRESHOLD;
use canopy_core::model::QueryResult;
use canopy_core::pack::EvidencePack;
use canopy_core::query::QueryParams;
use canopy_core::resultset::{RefineParams, RefineResult};
use canopy_core::{CanopyError, Engine, EngineOptions};

use crate::backend::{Answer, Backend, BackendError, Expanded, Indexed, Need, StatusReport};
use crate::request::{Context, Expand, GraphQuery, IndexRequest, Pack, Query};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Nothing is left half-done under these locks (an open engine, or none).
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The local engine of one repository.
pub struct LocalBackend {
    /// Where the repository is (any directory inside it).
    start: PathBuf,
    /// How the engine is opened.
    options: EngineOptions,
    /// The engine, once opened.
    engine: Mutex<Option<Engine>>,
    /// The convergence session of evidence packs and expansions.
    session: Option<String>,
    /// Held while a run that makes the repository answerable is under way,
    /// so concurrent first requests wait for one run instead of starting
    /// several (shared by every backend over the same engine).
    first_index: Arc<Mutex<()>>,
}

impl LocalBackend {
    /// The repository containing `start`, opened with `options` on first use.
    pub fn new(start: PathBuf, options: EngineOptions) -> LocalBackend {
        LocalBackend {
            start,
            options,
            engine: Mutex::new(None),
            session: None,
            first_index: Arc::new(Mutex::new(())),
        }
    }

    /// An engine already open, with the first-index guard of its repository.
    pub fn with_engine(engine: Engine, first_index: Arc<Mutex<()>>) -> LocalBackend {
        LocalBackend {
            start: engine.root().to_path_buf(),
            options: engine.options().clone(),
            engine: Mutex::new(Some(engine)),
            session: None,
            first_index,
        }
    }

    /// Packs and expansions count in `session`'s convergence memory.
    pub fn with_session(mut self, session: Option<String>) -> LocalBackend {
        self.session = session;
        self
    }

    /// The engine, opened now if it was not.
    pub fn engine(&self) -> Result<Engine, CanopyError> {
        let mut slot = lock(&self.engine);
        if let Some(engine) = slot.as_ref() {
            return Ok(engine.clone());
        }
        let engine = Engine::open(&self.start, self.options.clone())?;
        *slot = Some(engine.clone());
        Ok(engine)
    }

    /// The engine if it is open.
    fn opened(&self) -> Option<Engine> {
        lock(&self.engine).clone()
    }

    /// Indexes the repository if it never was: fully with progress up to
    /// [`LAZY_THRESHOLD`] files, else predictively (the files the query
    /// points at first, the rest in the background, without progress).
    fn ensure_indexed(
        &self,
        engine: &Engine,
        params: &QueryParams,
        progress: &dyn IndexProgress,
    ) -> Result<(), CanopyError> {
        if engine.is_indexed()? {
            return Ok(());
        }
        let _first = lock(&self.first_index);
        if engine.is_indexed()? {
            return Ok(());
        }
        let candidates = discover(engine.root(), engine.options().max_file_size, None)?
            .files
            .len();
        if candidates <= LAZY_THRESHOLD {
            engine.index(None, progress)?;
        } else {
            engine.prepare_for(params)?;
        }
        Ok(())
    }

    /// Indexes the whole repository unless its index is complete.
    fn ensure_complete(
        &self,
        engine: &Engine,
        progress: &dyn IndexProgress,
    ) -> Result<(), CanopyError> {
        let complete = |e: &Engine| Ok::<_, CanopyError>(e.is_indexed()? && e.is_complete()?);
        if complete(engine)? {
            return Ok(());
        }
        let _first = lock(&self.first_index);
        if complete(engine)? {
            return Ok(());
        }
        engine.index(None, progress)?;
        Ok(())
    }
}

impl Backend for LocalBackend {
    fn prepare(&self, need: Need<'_>, progress: &dyn IndexProgress) -> Result<(), BackendError> {
        let engine = self.engine()?;
        match need {
            Need::Query(params) => self.ensure_indexed(&engine, params, progress)?,
            Need::Context(params) => {
                let probe = QueryParams {
                    pattern: Some(params.task.clone()),
                    ..QueryParams::default()
                };
                self.ensure_indexed(&engine, &probe, progress)?;
            }
            Need::Graph => self.ensure_complete(&engine, progress)?,
        }
        Ok(())
    }

    fn query(&self, query: &Query) -> Result<Answer<QueryResult>, BackendError> {
        Ok(Answer::Local(self.engine()?.query(query.params())?))
    }

    fn evidence_pack(&self, pack: &Pack) -> Result<Answer<EvidencePack>, BackendError> {
        let engine = self.engine()?;
        let answer = engine.evidence_pack(pack.params(), self.session.as_deref())?;
        Ok(Answer::Local(answer))
    }

    fn context(&self, context: &Context) -> Result<Answer<ContextPack>, BackendError> {
        Ok(Answer::Local(self.engine()?.context(context.params())?))
    }

    fn graph(&self, request: &GraphQuery) -> Result<Answer<GraphResponse>, BackendError> {
        Ok(Answer::Local(self.engine()?.graph_request_within(
            request.request(),
            request.result_cap(),
        )?))
    }

    fn expand(&self, ids: &Expand) -> Result<Expanded, BackendError> {
        let engine = self.engine()?;
        let expansions = engine.expand_in_session(ids.ids(), self.session.as_deref())?;
        Ok(Expanded::Local(expansions))
    }

    /// Read-only: a repository nobody indexed reports `indexed: false`
    /// without getting an empty `.canopy/`.
    fn status(&self) -> Result<StatusReport, BackendError> {
        let status = match self.opened() {
            Some(engine) => engine.status()?,
            None => Engine::peek_status(&self.start, self.options.clone())?,
        };
        Ok(StatusReport::Local(status))
    }

    fn index(
        &self,
        request: &IndexRequest,
        progress: &dyn IndexProgress,
    ) -> Result<Indexed, BackendError> {
        let engine = self.engine()?;
        let report = if request.rebuild {
            engine.rebuild(progress)?
        } else {
            engine.index(request.glob.as_deref(), progress)?
        };
        Ok(Indexed::Local {
            report,
            db_path: engine.db_path().to_path_buf(),
        })
    }

    fn refine(&self, params: &RefineParams) -> Result<RefineResult, BackendError> {
        Ok(self.engine()?.refine(params)?)
    }

    fn invalidate(
        &self,
        glob: Option<&str>,
        progress: &dyn IndexProgress,
    ) -> Result<Indexed, BackendError> {
        let engine = self.engine()?;
        Ok(Indexed::Local {
            report: engine.invalidate(glob, progress)?,
            db_path: engine.db_path().to_path_buf(),
        })
    }

    fn local(&self) -> Option<&LocalBackend> {
        Some(self)
    }
}
