//! `canopy serve` arguments ([`ServeArgs`]) and their validation into a
//! [`Config`]: bind address, authentication, data directory, allowed roots
//! and request limits. Security rules that decide whether the service may
//! start at all live here.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
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
/// Default `--engine-idle-secs` (10 minutes).
pub const DEFAULT_ENGINE_IDLE_SECS: u64 = 600;

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

    /// The admin token: `Authorization: Bearer <TOKEN>` is required on every
    /// endpoint except /health. Without it (and without --no-auth) the
    /// service generates one on first start, stores it in
    /// `<data-dir>/token` (mode 0600) and prints it once; `canopy
    /// --service-url`, `canopy mcp --service-url` and `canopy follow` on
    /// this machine read it from there.
    #[arg(long, env = "CANOPY_TOKEN", hide_env_values = true)]
    pub token: Option<String>,

    /// A second token for agents: everything but admin operations
    /// (rebuilding an index). Give agents this one and keep the admin token
    /// for operators.
    #[arg(long, env = "CANOPY_AGENT_TOKEN", hide_env_values = true)]
    pub agent_token: Option<String>,

    /// Serve without authentication (loopback binds only; requests must
    /// then name a loopback Host). Any local process can then register,
    /// read and rebuild repositories under the allowed roots.
    #[arg(long, conflicts_with_all = ["token", "agent_token"])]
    pub no_auth: bool,

    /// A browser origin (`http://host:port`) allowed to call the service
    /// (repeatable). Requests with any other `Origin` header are refused,
    /// whatever their credentials: web pages cannot use the service unless
    /// named here.
    #[arg(long = "allow-origin", value_name = "ORIGIN")]
    pub allow_origin: Vec<String>,

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
    /// Close a repository's engine (its open index, caches and loaded
    /// model) after this many seconds without a request or run; the next
    /// request reopens it. Bounds memory on a service (or fleet node)
    /// serving many repositories. 0: never close.
    #[arg(long, default_value_t = DEFAULT_ENGINE_IDLE_SECS, env = "CANOPY_ENGINE_IDLE_SECS")]
    pub engine_idle_secs: u64,
    /// Fleet mode (`--fleet postgres://…`): off unless given.
    #[command(flatten)]
    pub fleet: crate::fleet::FleetArgs,
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
            agent_token: None,
            no_auth: false,
            allow_origin: Vec::new(),
            data_dir: None,
            allow_root: Vec::new(),
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            request_timeout_secs: DEFAULT_REQUEST_TIMEOUT_SECS,
            max_expand_handles: DEFAULT_MAX_EXPAND_HANDLES,
            watch: false,
            engine_idle_secs: DEFAULT_ENGINE_IDLE_SECS,
            fleet: crate::fleet::FleetArgs::default(),
            engine_options: EngineOptions::default(),
        }
    }
}

/// Validated service settings.
#[derive(Clone, Debug)]
pub struct Config {
    /// Address to bind.
    pub bind: SocketAddr,
    /// The admin bearer token; `None` only with `--no-auth`.
    pub token: Option<String>,
    /// The agent bearer token (no admin operations), if one was given.
    pub agent_token: Option<String>,
    /// Where the admin token came from (said at start-up).
    pub token_source: TokenSource,
    /// Browser origins allowed to send requests (`--allow-origin`), as
    /// `scheme://host[:port]`, lower-case, without a trailing slash.
    pub allow_origins: Vec<String>,
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
    /// Close an engine idle this long (`None`: never, `--engine-idle-secs 0`).
    pub engine_idle: Option<Duration>,
    /// Options for every repository's engine.
    pub engine_options: EngineOptions,
    /// Fleet mode's settings (`None`: a single node, no PostgreSQL).
    pub fleet: Option<crate::fleet::FleetSettings>,
}

/// The default data directory: `$XDG_DATA_HOME/canopy`, else
/// `~/.local/share/canopy` (`--data-dir` and `CANOPY_DATA_DIR` override it;
/// clients look for the generated token in the same place,
/// [`canopy_client::auth`]).
pub fn default_data_dir() -> Option<PathBuf> {
    canopy_client::auth::default_data_dir()
}

/// Where the admin token came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TokenSource {
    /// `--token` or `CANOPY_TOKEN`.
    Given,
    /// Generated by this start and stored in the file.
    Generated(PathBuf),
    /// Generated by an earlier start, read from the file.
    Stored(PathBuf),
    /// `--no-auth`: no token.
    NoAuth,
}

/// The stored token of `data_dir`, or a new one written there (0600).
/// Returns the token and whether it was generated now.
fn load_or_generate_token(data_dir: &Path) -> anyhow::Result<(String, bool)> {
    let file = canopy_client::auth::token_file(data_dir);
    if let Some(token) = canopy_client::auth::read_token(data_dir) {
        return Ok((token, false));
    }
    let mut bytes = [0u8; 24];
    getrandom::getrandom(&mut bytes)
        .map_err(|e| anyhow::anyhow!("cannot draw random bytes for a token: {e}"))?;
    let token: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut out = options
        .open(&file)
        .with_context(|| format!("cannot write the token file {}", file.display()))?;
    std::io::Write::write_all(&mut out, format!("{token}\n").as_bytes())
        .with_context(|| format!("cannot write the token file {}", file.display()))?;
    Ok((token, true))
}

fn valid_token(flag: &str, token: &str) -> anyhow::Result<()> {
    if token.len() < 8 || token.chars().any(|c| c.is_whitespace() || c.is_control()) {
        bail!("{flag} must be at least 8 characters without whitespace");
    }
    Ok(())
}

/// `--allow-origin` in the form browsers send (`scheme://host[:port]`).
fn normal_origin(origin: &str) -> anyhow::Result<String> {
    let o = origin.trim().trim_end_matches('/').to_ascii_lowercase();
    let rest = o
        .strip_prefix("http://")
        .or_else(|| o.strip_prefix("https://"));
    match rest {
        Some(host) if !host.is_empty() && !host.contains('/') => Ok(o),
        _ => bail!(
            "--allow-origin {origin:?} is not an origin: give it as a browser sends it, e.g. http://localhost:5173"
        ),
    }
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
        let who = match (&self.token_source, &self.agent_token) {
            (TokenSource::NoAuth, _) => format!(
                "any process on this machine that can reach {} (no --token; requests must name a loopback Host)",
                self.bind
            ),
            (TokenSource::Given, None) => "clients that send the --token bearer token".to_string(),
            (TokenSource::Given, Some(_)) => {
                "clients that send the --token (admin) or --agent-token bearer token".to_string()
            }
            (TokenSource::Generated(f) | TokenSource::Stored(f), agent) => format!(
                "clients that send the bearer token stored in {}{} (local canopy clients read it from there)",
                f.display(),
                if agent.is_some() {
                    " (admin) or the --agent-token"
                } else {
                    ""
                }
            ),
        };
        format!("serving {roots}{origin} to {who}")
    }

    /// Validates the arguments. Refuses a non-loopback bind without a token,
    /// an empty token, a missing allowed root and zero limits.
    pub fn from_args(args: ServeArgs) -> anyhow::Result<Config> {
        let fleet = crate::fleet::FleetSettings::from_args(
            &args.fleet,
            args.token.is_some() || args.no_auth,
        )?;
        let token = args.token.filter(|t| !t.is_empty());
        let agent_token = args.agent_token.filter(|t| !t.is_empty());
        let addrs: Vec<SocketAddr> = args
            .bind
            .to_socket_addrs()
            .with_context(|| format!("--bind {:?} is not a host:port address", args.bind))?
            .collect();
        let Some(bind) = addrs.first().copied() else {
            bail!("--bind {:?} resolves to no address", args.bind);
        };
        let all_loopback = addrs.iter().all(|a| a.ip().to_canonical().is_loopback());
        if !all_loopback && args.no_auth {
            bail!(
                "refusing to listen on {} without authentication: a non-loopback address exposes your repositories to the network. \
                 Drop --no-auth (a token is then generated), pass --token <secret> (or set CANOPY_TOKEN), or bind a loopback address such as {DEFAULT_BIND}",
                args.bind
            );
        }
        if let Some(t) = &token {
            valid_token("--token", t)?;
        }
        if let Some(t) = &agent_token {
            valid_token("--agent-token", t)?;
            if token.as_deref() == Some(t.as_str()) {
                bail!("--agent-token must differ from --token (the agent token cannot rebuild)");
            }
        }
        let allow_origins = args
            .allow_origin
            .iter()
            .map(|o| normal_origin(o))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let data_dir = match args.data_dir {
            Some(d) => d,
            None => default_data_dir().context(
                "cannot determine a data directory (no XDG_DATA_HOME or HOME); pass --data-dir",
            )?,
        };
        std::fs::create_dir_all(&data_dir)
            .with_context(|| format!("cannot create --data-dir {}", data_dir.display()))?;
        let (token, token_source) = match token {
            Some(t) => (Some(t), TokenSource::Given),
            None if args.no_auth => (None, TokenSource::NoAuth),
            None => {
                let (t, generated) = load_or_generate_token(&data_dir)?;
                let file = canopy_client::auth::token_file(&data_dir);
                if generated {
                    (Some(t), TokenSource::Generated(file))
                } else {
                    (Some(t), TokenSource::Stored(file))
                }
            }
        };
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
            agent_token,
            token_source,
            allow_origins,
            data_dir,
            allow_roots,
            allow_roots_defaulted,
            max_body_bytes: args.max_body_bytes,
            request_timeout: Duration::from_secs(args.request_timeout_secs),
            max_expand_handles: args.max_expand_handles,
            watch_all: args.watch,
            engine_idle: (args.engine_idle_secs > 0)
                .then(|| Duration::from_secs(args.engine_idle_secs)),
            fleet,
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
    fn non_loopback_requires_authentication() {
        let dir = tempfile::tempdir().unwrap();
        let no_auth = |bind: &str| ServeArgs {
            no_auth: true,
            ..args(bind, None, dir.path())
        };
        let err = Config::from_args(no_auth("0.0.0.0:0")).unwrap_err();
        assert!(err.to_string().contains("refusing to listen"), "{err}");
        assert!(Config::from_args(no_auth("127.0.0.1:0")).is_ok());
        assert!(Config::from_args(no_auth("[::1]:0")).is_ok());
        assert!(Config::from_args(args("0.0.0.0:0", Some("s3cret-token"), dir.path())).is_ok());
        assert!(Config::from_args(args("127.0.0.1:0", Some("short"), dir.path())).is_err());
    }

    #[test]
    fn without_a_token_one_is_generated_once_stored_owner_only_and_reused() {
        let dir = tempfile::tempdir().unwrap();
        let first = Config::from_args(args("127.0.0.1:0", None, dir.path())).unwrap();
        let file = canopy_client::auth::token_file(dir.path());
        assert_eq!(first.token_source, TokenSource::Generated(file.clone()));
        let token = first.token.clone().unwrap();
        assert_eq!(token.len(), 48, "{token}");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&file).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600, "{mode:o}");
        }
        let again = Config::from_args(args("127.0.0.1:0", None, dir.path())).unwrap();
        assert_eq!(again.token_source, TokenSource::Stored(file));
        assert_eq!(again.token, Some(token.clone()));
        // Another data directory, another token.
        let other = tempfile::tempdir().unwrap();
        let third = Config::from_args(args("127.0.0.1:0", None, other.path())).unwrap();
        assert_ne!(third.token, Some(token));
        // A given token wins and nothing is written.
        let given = tempfile::tempdir().unwrap();
        let cfg =
            Config::from_args(args("127.0.0.1:0", Some("s3cret-token"), given.path())).unwrap();
        assert_eq!(cfg.token_source, TokenSource::Given);
        assert!(!canopy_client::auth::token_file(given.path()).exists());
    }

    #[test]
    fn origins_and_agent_tokens_are_checked() {
        let dir = tempfile::tempdir().unwrap();
        let with = |origins: &[&str], agent: Option<&str>| ServeArgs {
            allow_origin: origins.iter().map(|o| o.to_string()).collect(),
            agent_token: agent.map(str::to_string),
            ..args("127.0.0.1:0", Some("s3cret-token"), dir.path())
        };
        let cfg = Config::from_args(with(&["HTTP://Localhost:5173/"], None)).unwrap();
        assert_eq!(cfg.allow_origins, vec!["http://localhost:5173".to_string()]);
        let err = Config::from_args(with(&["localhost:5173"], None)).unwrap_err();
        assert!(err.to_string().contains("is not an origin"), "{err}");
        let err = Config::from_args(with(&[], Some("s3cret-token"))).unwrap_err();
        assert!(err.to_string().contains("must differ"), "{err}");
        assert!(Config::from_args(with(&[], Some("short"))).is_err());
        assert!(Config::from_args(with(&[], Some("agent-token-1"))).is_ok());
    }
}
