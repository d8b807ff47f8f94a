//! Where a local `canopy serve` keeps its access token, so that clients on
//! the same machine find it without being told.
//!
//! `canopy serve` without `--token` (and without `--no-auth`) generates a
//! token once and stores it in its data directory as `token`, readable by
//! its owner only. `canopy --service-url`, `canopy mcp --service-url` and
//! `canopy follow` given no token read that file — but only for a loopback
//! URL: a token of this machine's service is never sent anywhere else.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

/// The file, in a service's data directory, that holds its generated token.
pub const TOKEN_FILE: &str = "token";

/// The service's data directory when none is given: `$CANOPY_DATA_DIR`,
/// else `$XDG_DATA_HOME/canopy`, else `~/.local/share/canopy`.
pub fn default_data_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("CANOPY_DATA_DIR").filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(dir));
    }
    if let Some(xdg) = std::env::var_os("XDG_DATA_HOME").filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(xdg).join("canopy"));
    }
    std::env::var_os("HOME")
        .filter(|v| !v.is_empty())
        .map(|home| PathBuf::from(home).join(".local/share/canopy"))
}

/// The token file of the service whose data directory is `data_dir`.
pub fn token_file(data_dir: &Path) -> PathBuf {
    data_dir.join(TOKEN_FILE)
}

/// The token stored in `data_dir`, if there is one (trimmed, non-empty).
pub fn read_token(data_dir: &Path) -> Option<String> {
    let text = std::fs::read_to_string(token_file(data_dir)).ok()?;
    let token = text.trim();
    (!token.is_empty()).then(|| token.to_string())
}

/// The token a client should send to `url` when it was given none: the
/// local service's stored token, if `url` names this machine (a loopback
/// address or `localhost`) and the default data directory holds one.
pub fn local_token_for(url: &str) -> Option<String> {
    if !is_loopback_url(url) {
        return None;
    }
    read_token(&default_data_dir()?)
}

/// Whether `url` (`http://HOST[:PORT][/…]`) names this machine.
pub fn is_loopback_url(url: &str) -> bool {
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
        .unwrap_or(url);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let authority = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    is_loopback_host(authority)
}

/// Whether a `Host`-style value (`name[:port]`, `[v6]:port`) names this
/// machine: `localhost`, `*.localhost` or a loopback address.
pub fn is_loopback_host(host: &str) -> bool {
    let host = host.trim();
    let name = if let Some(rest) = host.strip_prefix('[') {
        rest.split(']').next().unwrap_or("")
    } else {
        host.rsplit_once(':').map_or(host, |(h, _)| h)
    };
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    name == "localhost"
        || name.ends_with(".localhost")
        || name
            .parse::<IpAddr>()
            .is_ok_and(|ip| ip.to_canonical().is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_urls_get_the_local_token() {
        for url in [
            "http://127.0.0.1:3000",
            "http://localhost:3000/",
            "http://[::1]:3000/query",
            "http://app.localhost",
        ] {
            assert!(is_loopback_url(url), "{url}");
        }
        for url in [
            "http://10.0.0.2:3000",
            "https://canopy.example.com",
            "http://127.0.0.1.example.com:3000",
            "http://localhost.example:3000",
        ] {
            assert!(!is_loopback_url(url), "{url}");
        }
    }

    #[test]
    fn a_stored_token_is_read_trimmed_and_an_empty_one_is_none() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read_token(dir.path()), None);
        std::fs::write(token_file(dir.path()), "abc123secret\n").unwrap();
        assert_eq!(read_token(dir.path()).as_deref(), Some("abc123secret"));
        std::fs::write(token_file(dir.path()), "  \n").unwrap();
        assert_eq!(read_token(dir.path()), None);
    }
}
