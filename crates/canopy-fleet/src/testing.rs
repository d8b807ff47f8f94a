//! A throwaway PostgreSQL server for tests and benchmarks: its own data
//! directory in a temporary folder, loopback TCP on a free port, and no
//! trace once dropped (the server is stopped — killed if it does not stop
//! — and the folder removed), also when the test that started it panics.
//!
//! `initdb` refuses to run as root, and so does `postgres`: as root, both
//! run as an unprivileged user (`postgres`, or `CANOPY_PG_USER`) through
//! `setpriv`, which execs in place, so the child process *is* the server.
//! A cluster is initialised once into a template (cached in the folder
//! the caller names, else one per user under the temporary folder) and
//! copied for each server: `initdb` takes seconds, a copy a fraction of one.
//!
//! The binaries are found in `CANOPY_PG_BIN`, else `pg_config --bindir`,
//! else the newest `/usr/lib/postgresql/*/bin`.

use std::fs;
use std::io;
use std::net::TcpListener;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// User the server runs as when the caller is root.
pub const DEFAULT_PG_USER: &str = "postgres";
/// Superuser created by `initdb` (trust authentication on loopback).
pub const SUPERUSER: &str = "canopy";

fn other(msg: impl Into<String>) -> io::Error {
    io::Error::other(msg.into())
}

/// The directory holding `initdb`, `postgres` and `pg_isready`, if any.
pub fn find_bin_dir() -> Option<PathBuf> {
    let has = |d: &Path| d.join("initdb").is_file() && d.join("postgres").is_file();
    if let Some(dir) = std::env::var_os("CANOPY_PG_BIN").map(PathBuf::from) {
        return has(&dir).then_some(dir);
    }
    if let Ok(out) = Command::new("pg_config").arg("--bindir").output()
        && out.status.success()
    {
        let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        if has(&dir) {
            return Some(dir);
        }
    }
    let mut versions: Vec<(u32, PathBuf)> = fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .flatten()
        .filter_map(|e| {
            let v = e.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = e.path().join("bin");
            has(&bin).then_some((v, bin))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, d)| d)
}

fn running_as_root() -> bool {
    fs::metadata("/proc/self")
        .map(|m| m.uid() == 0)
        .unwrap_or(false)
}

/// (uid, gid) of `user` from /etc/passwd.
fn user_ids(user: &str) -> io::Result<(u32, u32)> {
    let passwd = fs::read_to_string("/etc/passwd")?;
    passwd
        .lines()
        .find_map(|line| {
            let mut f = line.split(':');
            (f.next()? == user).then_some(())?;
            let _ = f.next()?;
            Some((f.next()?.parse().ok()?, f.next()?.parse().ok()?))
        })
        .ok_or_else(|| {
            other(format!(
                "no user {user:?} in /etc/passwd; set CANOPY_PG_USER"
            ))
        })
}

/// Who runs the server: `None` is the current user.
fn server_user() -> io::Result<Option<(String, u32, u32)>> {
    if !running_as_root() {
        return Ok(None);
    }
    let user = std::env::var("CANOPY_PG_USER").unwrap_or_else(|_| DEFAULT_PG_USER.to_string());
    let (uid, gid) = user_ids(&user)?;
    Ok(Some((user, uid, gid)))
}

/// A command for `program`, run as the server user when we are root.
fn as_server_user(program: &Path, user: &Option<(String, u32, u32)>) -> Command {
    match user {
        Some((name, _, _)) => {
            let mut c = Command::new("setpriv");
            c.arg(format!("--reuid={name}"))
                .arg(format!("--regid={name}"))
                .arg("--init-groups")
                .arg("--")
                .arg(program);
            c
        }
        None => Command::new(program),
    }
}

fn chown_tree(path: &Path, user: &Option<(String, u32, u32)>) -> io::Result<()> {
    if let Some((_, uid, gid)) = user {
        let status = Command::new("chown")
            .arg("-R")
            .arg(format!("{uid}:{gid}"))
            .arg(path)
            .status()?;
        if !status.success() {
            return Err(other(format!("chown -R {} failed", path.display())));
        }
    }
    Ok(())
}

fn unique_dir(parent: &Path, prefix: &str) -> io::Result<PathBuf> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    for _ in 0..100 {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let dir = parent.join(format!(
            "{prefix}-{}-{n}-{:x}",
            std::process::id(),
            crate::db::random_u64() & 0xffff_ffff
        ));
        match fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(other("cannot create a unique temporary directory"))
}

fn copy_tree(from: &Path, to: &Path) -> io::Result<()> {
    let status = Command::new("cp").arg("-a").arg(from).arg(to).status()?;
    if status.success() {
        Ok(())
    } else {
        Err(other(format!(
            "cp -a {} {} failed",
            from.display(),
            to.display()
        )))
    }
}

/// An initialised cluster to copy: `<cache>/pg-template-<bin hash>`,
/// created once (atomically renamed into place, so concurrent test
/// processes agree).
fn template(bin: &Path, cache: &Path, user: &Option<(String, u32, u32)>) -> io::Result<PathBuf> {
    let tag = xxhash_rust::xxh3::xxh3_64(bin.as_os_str().as_encoded_bytes());
    let done = cache.join(format!("pg-template-{tag:016x}"));
    if done.join("PG_VERSION").is_file() {
        return Ok(done);
    }
    fs::create_dir_all(cache)?;
    // initdb writes into a folder the server user owns, under /tmp (the
    // cache folder may not be reachable by that user).
    let work = unique_dir(&std::env::temp_dir(), "canopy-initdb")?;
    let result = (|| {
        chown_tree(&work, user)?;
        let data = work.join("data");
        let out = as_server_user(&bin.join("initdb"), user)
            .arg("-D")
            .arg(&data)
            .args([
                "-U",
                SUPERUSER,
                "--auth=trust",
                "-E",
                "UTF8",
                "--locale=C",
                "-N",
            ])
            .stdin(Stdio::null())
            .output()?;
        if !out.status.success() {
            return Err(other(format!(
                "initdb failed: {}",
                String::from_utf8_lossy(&out.stderr)
            )));
        }
        let staging = unique_dir(cache, "pg-template-staging")?;
        copy_tree(&data, &staging.join("data"))?;
        match fs::rename(staging.join("data"), &done) {
            Ok(()) => {}
            // Another process finished first: theirs is as good.
            Err(_) if done.join("PG_VERSION").is_file() => {}
            Err(e) => return Err(e),
        }
        let _ = fs::remove_dir_all(&staging);
        Ok(done.clone())
    })();
    let _ = fs::remove_dir_all(&work);
    result
}

fn free_port() -> io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// Keeps a stopped server's port taken, so that no other server started
/// meanwhile (tests run in parallel) gets it and the stopped server's
/// clients reach a stranger's database: connections are accepted and
/// closed at once, which clients see as a server going away.
struct PortGuard {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl PortGuard {
    fn hold(port: u16) -> io::Result<PortGuard> {
        let listener = TcpListener::bind(("127.0.0.1", port))?;
        listener.set_nonblocking(true)?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            while !flag.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((stream, _)) => drop(stream),
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Ok(PortGuard {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for PortGuard {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A running throwaway server.
pub struct PgServer {
    bin: PathBuf,
    root: PathBuf,
    data: PathBuf,
    port: u16,
    user: Option<(String, u32, u32)>,
    child: Option<Child>,
    port_guard: Option<PortGuard>,
}

impl std::fmt::Debug for PgServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgServer")
            .field("port", &self.port)
            .field("data", &self.data)
            .field("running", &self.child.is_some())
            .finish()
    }
}

impl PgServer {
    /// Starts a server, its template cached in `cache` (or in
    /// `canopy-pg-cache-<uid>` under the temporary folder when `None`). `Ok(None)` when no
    /// PostgreSQL binaries are installed.
    pub fn start(cache: Option<&Path>) -> io::Result<Option<PgServer>> {
        let Some(bin) = find_bin_dir() else {
            return Ok(None);
        };
        let user = server_user()?;
        let cache = match cache {
            Some(c) => c.to_path_buf(),
            // One cache per user, shared by every process (the template is
            // renamed into place atomically), so repeated runs reuse it
            // instead of leaving one per process.
            None => {
                let uid = fs::metadata("/proc/self").map(|m| m.uid()).unwrap_or(0);
                std::env::temp_dir().join(format!("canopy-pg-cache-{uid}"))
            }
        };
        let template = template(&bin, &cache, &user)?;
        let root = unique_dir(&std::env::temp_dir(), "canopy-pg")?;
        let mut server = PgServer {
            data: root.join("data"),
            bin,
            root,
            port: 0,
            user,
            child: None,
            port_guard: None,
        };
        // From here on, Drop cleans up whatever fails.
        copy_tree(&template, &server.data)?;
        chown_tree(&server.root, &server.user)?;
        let mut last = None;
        for _ in 0..5 {
            server.port = free_port()?;
            match server.spawn() {
                Ok(()) => return Ok(Some(server)),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| other("postgres did not start")))
    }

    fn spawn(&mut self) -> io::Result<()> {
        let log = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.root.join("server.log"))?;
        let child = as_server_user(&self.bin.join("postgres"), &self.user)
            .arg("-D")
            .arg(&self.data)
            .arg("-p")
            .arg(self.port.to_string())
            .arg("-c")
            .arg("listen_addresses=127.0.0.1")
            .arg("-c")
            .arg(format!("unix_socket_directories={}", self.root.display()))
            // Throwaway data: durability only costs time here.
            .args(["-c", "fsync=off", "-c", "synchronous_commit=off"])
            .args(["-c", "full_page_writes=off", "-c", "shared_buffers=16MB"])
            .args([
                "-c",
                "max_connections=200",
                "-c",
                "log_min_messages=warning",
            ])
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()?;
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(child) = self.child.as_mut()
                && let Some(status) = child.try_wait()?
            {
                self.child = None;
                return Err(other(format!(
                    "postgres exited at start ({status}): {}",
                    self.log_tail()
                )));
            }
            let ready = Command::new(self.bin.join("pg_isready"))
                .args([
                    "-q",
                    "-h",
                    "127.0.0.1",
                    "-p",
                    &self.port.to_string(),
                    "-U",
                    SUPERUSER,
                ])
                .stdin(Stdio::null())
                .status()
                .map(|s| s.success())
                .unwrap_or(false);
            if ready {
                return Ok(());
            }
            if Instant::now() > deadline {
                self.halt();
                return Err(other(format!(
                    "postgres not ready after 60 s: {}",
                    self.log_tail()
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The last lines of the server's log.
    pub fn log_tail(&self) -> String {
        let text = fs::read_to_string(self.root.join("server.log")).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }

    /// The loopback port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// A URL for the `postgres` database as the superuser.
    pub fn url(&self) -> String {
        format!("postgres://{SUPERUSER}@127.0.0.1:{}/postgres", self.port)
    }

    /// Whether the server process is running.
    pub fn is_running(&mut self) -> bool {
        match self.child.as_mut() {
            Some(c) => matches!(c.try_wait(), Ok(None)),
            None => false,
        }
    }

    fn signal(&self, sig: &str) {
        if let Some(child) = &self.child {
            let _ = Command::new("kill")
                .arg(format!("-{sig}"))
                .arg(child.id().to_string())
                .stderr(Stdio::null())
                .status();
        }
    }

    fn wait_exit(&mut self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        while let Some(child) = self.child.as_mut() {
            match child.try_wait() {
                Ok(Some(_)) | Err(_) => {
                    self.child = None;
                    return true;
                }
                Ok(None) if Instant::now() >= deadline => return false,
                Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
        true
    }

    /// Stops the server like an administrator's fast shutdown (SIGINT:
    /// sessions are terminated, data kept); the data stays for
    /// [`PgServer::restart`], and the port stays reserved until then
    /// (connections to it are closed at once, as by a server going away).
    pub fn stop(&mut self) -> io::Result<()> {
        self.signal("INT");
        if !self.wait_exit(Duration::from_secs(30)) {
            self.halt();
            return Err(other("postgres did not stop within 30 s; killed"));
        }
        self.port_guard = Some(PortGuard::hold(self.port)?);
        Ok(())
    }

    /// Starts the stopped server again on the same port and data.
    pub fn restart(&mut self) -> io::Result<()> {
        if self.is_running() {
            self.stop()?;
        }
        self.port_guard = None;
        self.spawn()
    }

    /// Turns TLS on: writes the server's certificate chain and key (PEM)
    /// into the data directory, replaces `pg_hba.conf` with `hba` (its
    /// lines, e.g. `hostssl all all 127.0.0.1/32 scram-sha-256`), sets
    /// `ssl = on`, and restarts the server on the same port.
    pub fn enable_tls(&mut self, cert_pem: &str, key_pem: &str, hba: &str) -> io::Result<()> {
        use std::io::Write;
        use std::os::unix::fs::PermissionsExt;
        fs::write(self.data.join("server.crt"), cert_pem)?;
        let key = self.data.join("server.key");
        fs::write(&key, key_pem)?;
        // The server refuses a key others can read.
        fs::set_permissions(&key, fs::Permissions::from_mode(0o600))?;
        fs::write(self.data.join("pg_hba.conf"), hba)?;
        let mut conf = fs::OpenOptions::new()
            .append(true)
            .open(self.data.join("postgresql.conf"))?;
        writeln!(
            conf,
            "\nssl = on\nssl_cert_file = 'server.crt'\nssl_key_file = 'server.key'"
        )?;
        drop(conf);
        chown_tree(&self.data, &self.user)?;
        self.restart()
    }

    /// Makes the server (TLS already on, [`PgServer::enable_tls`]) trust
    /// client certificates signed by `ca_pem` and authenticate by the rules
    /// in `hba` (e.g. `hostssl all all 127.0.0.1/32 cert`), then restarts it.
    pub fn trust_client_certs(&mut self, ca_pem: &str, hba: &str) -> io::Result<()> {
        use std::io::Write;
        fs::write(self.data.join("client-ca.crt"), ca_pem)?;
        fs::write(self.data.join("pg_hba.conf"), hba)?;
        let mut conf = fs::OpenOptions::new()
            .append(true)
            .open(self.data.join("postgresql.conf"))?;
        writeln!(conf, "\nssl_ca_file = 'client-ca.crt'")?;
        drop(conf);
        chown_tree(&self.data, &self.user)?;
        self.restart()
    }

    /// Immediate shutdown, then SIGKILL if that does not end it.
    fn halt(&mut self) {
        self.signal("QUIT");
        if !self.wait_exit(Duration::from_secs(10))
            && let Some(mut child) = self.child.take()
        {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        self.halt();
        let _ = fs::remove_dir_all(&self.root);
    }
}
