//! `canopy serve` arguments ([`ServeArgs`]) and their validation into a
//! [`Config`]: bind address, authentication, data directory, allowed roots
//! and request limits. Security rules that decide whether the service may
//! start at all live here.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use canopy_core::EngineOptions;

/// Default `--bind`.
pub const DEFAULT_BIND: &str = "127.0.0.1:3000";
/// Default `--max-body-bytes` (1 MiB).
pub const DEFAULT_MAX_BODY_BYTES: usize = 1024 * 1024;
/// Default `--request-timeout-secs`.
pub const DEFAULT_REQUEST_TIMEOUT_SECS: u64 = 60;
/// Default `--max-expand-handles`.
pub const DEFAULT_MAX_EXPAND_HANDLES: usize = 100;

/// Run the multi-repo HTTP service: register git repositories, reindex them
/// in the background with generation tracking, and answer query, evidence
/// pack and expand requests over JSON. Binds loopback by default; a
/// non-loopback --bind requires --token.
#[derive(clap::Args, Debug, Clone)]
pub struct ServeArgs {
    /// Address to listen on (`host:port`; port 0 picks a free port). The
    /// bound address is printed to stderr as `listening on http://ADDR`.
    #[arg(long, default_value = DEFAULT_BIND, env = "CANOPY_BIND")]
    pub bind: String,

    /// Require `Authorization: Bearer <TOKEN>` on every endpoint except
    /// /health. Required when --bind is not a loopback address.
    #[arg(long, env = "CANOPY_TOKEN", hide_env_values = true)]
    pub token: Option<String>,

    /// Directory for the service's registry (registered repos, their
    /// generations and the event feed) [default: $XDG_DATA_HOME/canopy, else
    /// ~/.local/share/canopy].
    #[arg(long, env = "CANOPY_DATA_DIR")]
    pub data_dir: Option<PathBuf>,

    /// Only repositories under this directory may be registered (repeatable;
    /// symlinks are resolved before the check). Without it, only
    /// repositories under the directory the service was started in.
    #[arg(long = "allow-root", value_name = "DIR")]
    pub allow_root: Vec<PathBuf>,

    /// Largest accepted request body in bytes; larger bodies get 413.
    #[arg(long, default_value_t = DEFAULT_MAX_BODY_BYTES)]
    pub max_body_bytes: usize,

    /// Longest a query, pack or expand request may run before it is answered
    /// with 503 timeout.
    #[arg(long, default_value_t = DEFAULT_REQUEST_TIMEOUT_SECS)]
    pub request_timeout_secs: u64,

    /// Most handles one /expand request may ask for.
    #[arg(long, default_value_t = DEFAULT_MAX_EXPAND_HANDLES)]
    pub max_expand_handles: usize,
    /// Re-index every registered repository on file-system events (off by
    /// default: the service indexes on `POST /reindex`). One repository is
    /// watched with `POST /repos/add {"path": …, "watch": true}` instead.
    #[arg(long)]
    pub watch: bool,
    /// How repositories' engines are opened (the binary's global flags,
    /// e.g. `--max-file-size`); the service always turns `auto_index` off.
    #[arg(skip)]
    pub engine_options: EngineOptions,
}

impl Default for ServeArgs {
    fn default() -> Self {
        ServeArgs {
            bind: DEFAULT_BIND.into(),
            token: None,
            data_dir: None,
            allow_root: Vec::new(),
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            request_timeout_secs: DEFAULT_REQUEST_TIMEOUT_SECS,
            max_expand_handles: DEFAULT_MAX_EXPAND_HANDLES,
            watch: false,
            engine_options: EngineOptions::default(),
        }
    }
}

/// Validated service settings.
#[derive(Clone, Debug)]
pub struct Config {
    /// Address to bind.
    pub bind: SocketAddr,
    /// Bearer token, if authentication is on.
    pub token: Option<String>,
    /// Registry directory (created if missing).
    pub data_dir: PathBuf,
    /// Canonical allowed roots (empty: any path; [`Config::from_args`]
    /// never leaves it empty).
    pub allow_roots: Vec<PathBuf>,
    /// The allowed root is the working directory, because no --allow-root
    /// was given (said at start-up).
    pub allow_roots_defaulted: bool,
    /// Body limit in bytes.
    pub max_body_bytes: usize,
    /// Per-request time limit for engine work.
    pub request_timeout: Duration,
    /// Most handles per expand.
    pub max_expand_handles: usize,
    /// Watch every repository (`--watch`), not only those registered with
    /// `watch: true`.
    pub watch_all: bool,
    /// Options for every repository's engine.
    pub engine_options: EngineOptions,
}

/// The default data directory: `$XDG_DATA_HOME/canopy`, else `~/.local/share/canopy`.
pub fn default_data_dir() -> Option<PathBuf> {
    if let Some(xdg) = std::env::var_os("XDG_DATA_HOME").filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(xdg).join("canopy"));
    }
    std::env::var_os("HOME")
        .filter(|v| !v.is_empty())
        .map(|home| PathBuf::from(home).join(".local/share/canopy"))
}

impl Config {
    /// One sentence for the start-up log: which repositories this service
    /// exposes, and to whom.
    pub fn exposure(&self) -> String {
        let roots: Vec<String> = self
            .allow_roots
            .iter()
            .map(|r| r.display().to_string())
            .collect();
        let roots = if roots.is_empty() {
            "any git repository this user can read".to_string()
        } else {
            format!("git repositories under {}", roots.join(", "))
        };
        let origin = if self.allow_roots_defaulted {
            " (the directory it was started in; --allow-root DIR changes this)"
        } else {
            ""
        };
        let who = match &self.token {
            Some(_) => "clients that send the --token bearer token".to_string(),
            None => format!(
                "any process on this machine that can reach {} (no --token; requests must name a loopback Host)",
                self.bind
            ),
        };
        format!("serving {roots}{origin} to {who}")
    }

    /// Validates the arguments. Refuses a non-loopback bind without a token,
    /// an empty token, a missing allowed root and zero limits.
    pub fn from_args(args: ServeArgs) -> anyhow::Result<Config> {
        let token = args.token.filter(|t| !t.is_empty());
        let addrs: Vec<SocketAddr> = args
            .bind
            .to_socket_addrs()
            .with_context(|| format!("--bind {:?} is not a host:port address", args.bind))?
            .collect();
        let Some(bind) = addrs.first().copied() else {
            bail!("--bind {:?} resolves to no address", args.bind);
        };
        let all_loopback = addrs.iter().all(|a| a.ip().to_canonical().is_loopback());
        if !all_loopback && token.is_none() {
            bail!(
                "refusing to listen on {} without authentication: a non-loopback address exposes your repositories to the network. \
                 Pass --token <secret> (or set CANOPY_TOKEN), or bind a loopback address such as {DEFAULT_BIND}",
                args.bind
            );
        }
        if let Some(t) = &token
            && (t.len() < 8 || t.chars().any(|c| c.is_whitespace() || c.is_control()))
        {
            bail!("--token must be at least 8 characters without whitespace");
        }
        let data_dir = match args.data_dir {
            Some(d) => d,
            None => default_data_dir().context(
                "cannot determine a data directory (no XDG_DATA_HOME or HOME); pass --data-dir",
            )?,
        };
        std::fs::create_dir_all(&data_dir)
            .with_context(|| format!("cannot create --data-dir {}", data_dir.display()))?;
        let mut allow_roots = Vec::new();
        for root in &args.allow_root {
            let canonical = root.canonicalize().with_context(|| {
                format!(
                    "--allow-root {} does not exist or is not accessible",
                    root.display()
                )
            })?;
            if !canonical.is_dir() {
                bail!("--allow-root {} is not a directory", root.display());
            }
            allow_roots.push(canonical);
        }
        // Safe by default: without --allow-root, only repositories under the
        // directory the service was started in, and never the whole disk.
        let allow_roots_defaulted = allow_roots.is_empty();
        if allow_roots_defaulted {
            let cwd = std::env::current_dir()
                .and_then(|d| d.canonicalize())
                .context("cannot read the current directory; pass --allow-root DIR")?;
            if cwd.parent().is_none() {
                bail!(
                    "canopy serve was started in {} without --allow-root, which would expose every repository on this machine; \
                     pass --allow-root DIR (repeatable) for the folders whose repositories it may serve, or start it in such a folder",
                    cwd.display()
                );
            }
            allow_roots.push(cwd);
        }
        if args.max_body_bytes == 0
            || args.request_timeout_secs == 0
            || args.max_expand_handles == 0
        {
            bail!(
                "--max-body-bytes, --request-timeout-secs and --max-expand-handles must be positive"
            );
        }
        Ok(Config {
            bind,
            token,
            data_dir,
            allow_roots,
            allow_roots_defaulted,
            max_body_bytes: args.max_body_bytes,
            request_timeout: Duration::from_secs(args.request_timeout_secs),
            max_expand_handles: args.max_expand_handles,
            watch_all: args.watch,
            // The service's runner owns indexing: queries never index on their own.
            engine_options: EngineOptions {
                auto_index: false,
                // No query outlives its request: the work stops with the 503.
                time_budget: Duration::from_secs(args.request_timeout_secs),
                ..args.engine_options.clone()
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(bind: &str, token: Option<&str>, dir: &std::path::Path) -> ServeArgs {
        ServeArgs {
            bind: bind.into(),
            token: token.map(str::to_string),
            data_dir: Some(dir.to_path_buf()),
            ..ServeArgs::default()
        }
    }

    #[test]
    fn non_loopback_requires_a_token() {
        let dir = tempfile::tempdir().unwrap();
        let err = Config::from_args(args("0.0.0.0:0", None, dir.path())).unwrap_err();
        assert!(err.to_string().contains("refusing to listen"), "{err}");
        assert!(Config::from_args(args("0.0.0.0:0", Some("s3cret-token"), dir.path())).is_ok());
        assert!(Config::from_args(args("127.0.0.1:0", None, dir.path())).is_ok());
        assert!(Config::from_args(args("[::1]:0", None, dir.path())).is_ok());
        assert!(Config::from_args(args("127.0.0.1:0", Some("short"), dir.path())).is_err());
    }
}
