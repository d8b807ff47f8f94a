//! # canopy-service
//!
//! `canopy serve`: the multi-repository HTTP service over
//! [`canopy_core::Engine`]. Agents register git repositories, trigger
//! background reindexing, and query, pack and expand over JSON; every handle
//! the service returns carries the *generation* it was issued at, so a client
//! learns (409 `stale_generation`) when the index changed under it.
//!
//! ## Endpoints
//!
//! | endpoint | what it does |
//! |---|---|
//! | `POST /repos/add` `{path, name?}` | register a git repository root → `repo_id` |
//! | `GET /repos` | registered repositories and their state |
//! | `POST /reindex` `{repo, glob?}` | start a background run (or coalesce: `already_indexing`) |
//! | `POST /query` `{repo, …query params}` | handles, each with `source`, `commit_sha`, `generation` |
//! | `POST /evidence_pack` `{repo, session?, …}` | ranked evidence pack (session also via `X-Canopy-Session`) |
//! | `POST /expand` `{repo, handles: [{id, generation?}]}` | exact text; 409 on a stale generation |
//! | `GET /status[?repo=]` | service and repository state with index statistics |
//! | `GET /events?after_seq=&limit=&wait=&repo=` | durable event feed with long-poll |
//! | `GET /health` | `healthy` / `degraded` / `recovering` / `unhealthy` |
//! | `GET /metrics` | Prometheus text |
//! | `GET /openapi.json` | OpenAPI 3 description of all of the above |
//!
//! Errors are always `{"code", "message", "hint"}` ([`error::ApiError`]).
//!
//! ## Modules
//!
//! * [`config`]: `canopy serve` arguments ([`ServeArgs`]) and the start-up security rules;
//! * [`service`]: repositories, the reindex runner, generations and health
//!   (the consistency design is documented there);
//! * [`registry`]: the SQLite registry in `--data-dir` (repositories and events);
//! * [`http`]: the axum router, handlers, authentication and metrics middleware;
//! * [`metrics`]: counters, histograms and the Prometheus rendering;
//! * [`error`]: the error type and its HTTP mapping.
//!
//! The wire types (requests, responses, the error body, events) are
//! `canopy_client::api`, shared with the client side of service mode
//! (`canopy-client`), which also owns the blocking client.
//!
//! ## Security
//!
//! Loopback bind by default. `--token` (or `CANOPY_TOKEN`) requires
//! `Authorization: Bearer` on every endpoint except `/health`; a non-loopback
//! `--bind` without a token refuses to start. Without a token, requests whose
//! `Host` or `Origin` is not local are refused (DNS-rebinding and cross-site
//! protection). `--allow-root` restricts which paths may be registered;
//! bodies are bounded by `--max-body-bytes`; limits are clamped; handles and
//! globs cannot leave a registered repository (the core refuses `..`,
//! absolute paths and symlinks out).
//!

#![warn(missing_docs)]
pub mod config;
pub mod error;
pub mod fleet;
pub mod http;
pub mod metrics;
pub mod registry;
pub mod service;

use std::sync::Arc;

use anyhow::Context;

pub use config::{Config, ServeArgs};
pub use http::routes;
pub use service::Service;

/// Runs the service until interrupted (Ctrl-C or SIGTERM).
///
/// Prints `listening on http://ADDR` to stderr once the socket is bound
/// (with `--bind 127.0.0.1:0`, ADDR has the port the system chose).
pub fn run(args: ServeArgs) -> anyhow::Result<()> {
    let config = Config::from_args(args)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("canopy-serve")
        .build()
        .context("cannot start the async runtime")?;
    let served = runtime.block_on(serve(config));
    // Dropping the runtime would wait for every blocking task (a query
    // still running on the blocking pool) to finish; a stopping service
    // must not wait for them. Their work is bounded by the time budget
    // anyway, and SQLite's WAL keeps the index consistent if the process
    // exits mid-read.
    runtime.shutdown_timeout(SHUTDOWN_GRACE);
    served
}

/// How long a stopping service waits for in-flight requests before it
/// exits anyway.
pub const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(3);

/// Binds, starts the [`Service`] and serves until a shutdown signal.
pub async fn serve(config: Config) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(config.bind)
        .await
        .with_context(|| format!("cannot listen on {}", config.bind))?;
    let addr = listener.local_addr()?;
    let exposure = config.exposure();
    let generated = match (&config.token_source, &config.token) {
        (config::TokenSource::Generated(file), Some(token)) => Some(format!(
            "generated an access token (shown once; stored in {}, readable by you only): {token}",
            file.display()
        )),
        _ => None,
    };
    let fleet_settings = config.fleet.clone();
    let service = Service::start(config)?;
    // Fleet mode only: nothing of canopy-fleet runs without --fleet.
    let fleet = match &fleet_settings {
        Some(settings) => Some(fleet::FleetNode::start(&service, settings, addr).await?),
        None => None,
    };
    if let Some(line) = generated {
        eprintln!("{line}");
    }
    eprintln!("{exposure}");
    eprintln!("listening on http://{addr}");
    tracing::info!(%addr, "canopy service started");
    if let Some(idle) = service.config().engine_idle {
        tokio::spawn(close_idle_engines(Arc::downgrade(&service), idle));
    }
    let app = http::router(service.clone());
    let (stopping_tx, stopping) = tokio::sync::oneshot::channel::<()>();
    let server = axum::serve(listener, app).with_graceful_shutdown(async move {
        shutdown_signal(service).await;
        let _ = stopping_tx.send(());
    });
    // Graceful shutdown waits for open requests; after a signal, wait at
    // most SHUTDOWN_GRACE for them, so SIGTERM always stops the service.
    let deadline = async move {
        if stopping.await.is_ok() {
            tokio::time::sleep(SHUTDOWN_GRACE).await;
        } else {
            std::future::pending::<()>().await;
        }
    };
    let served = tokio::select! {
        served = server => served.context("the HTTP server failed"),
        _ = deadline => {
            eprintln!("requests still open after {SHUTDOWN_GRACE:?}; exiting anyway");
            Ok(())
        }
    };
    // Leaving cleanly releases every lease at once: the other nodes take
    // the repositories over at their next heartbeat, not after the TTL.
    if let Some(node) = fleet {
        node.shutdown().await;
    }
    served
}

/// Closes idle engines every half `idle` (at most every 30 s), until the
/// service is gone.
async fn close_idle_engines(service: std::sync::Weak<Service>, idle: std::time::Duration) {
    let every = (idle / 2).clamp(
        std::time::Duration::from_millis(100),
        std::time::Duration::from_secs(30),
    );
    loop {
        tokio::time::sleep(every).await;
        let Some(svc) = service.upgrade() else { return };
        // Closing drops an engine (file handles, caches): off the async threads.
        let _ = tokio::task::spawn_blocking(move || svc.close_idle_engines(idle)).await;
    }
}

async fn shutdown_signal(service: Arc<Service>) {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = terminate => {},
    }
    eprintln!("shutting down");
    service.begin_shutdown();
}
