//! TLS to the fleet database. `sslmode` and `sslrootcert` in the fleet URL
//! mean what libpq says they mean; they are read out of the URL here
//! (the driver knows only `disable`, `prefer` and `require`, and checks
//! no certificate), and a rustls connector (ring provider) does the
//! handshake for `tokio-postgres`:
//!
//! | `sslmode` | TLS | certificate checked |
//! |---|---|---|
//! | `disable` | never | — |
//! | `prefer` (the default) | when the server offers it, else plain | no |
//! | `require` | always | no; as `verify-ca` when a root certificate is given (`sslrootcert=`, or `~/.postgresql/root.crt` exists) |
//! | `verify-ca` | always | signed by a root in `sslrootcert` |
//! | `verify-full` | always | signed by a root in `sslrootcert`, and issued for the host in the URL |
//!
//! `sslrootcert=PATH` is a PEM file of one or more CA certificates
//! (default `~/.postgresql/root.crt`); `sslrootcert=system` uses the
//! system's CAs and implies `verify-full`. `allow`, client certificates
//! (`sslcert`, `sslkey`) and revocation lists (`sslcrl`) are refused with
//! an error naming the setting. Unix-socket hosts never use TLS (as in
//! libpq). SCRAM channel binding (`tls-server-end-point`) is offered for
//! RSA and ECDSA server certificates signed with SHA-1/SHA-2.

use std::future::Future;
use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_postgres::Socket;
use tokio_postgres::tls::{ChannelBinding, MakeTlsConnect, TlsConnect};

use crate::error::FleetError;

/// How TLS is used, as libpq's `sslmode` (`allow` is not supported).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SslMode {
    /// Plain TCP only.
    Disable,
    /// TLS when the server offers it, no certificate check.
    Prefer,
    /// TLS always, no certificate check.
    Require,
    /// TLS always, the certificate chain checked against the root certificates.
    VerifyCa,
    /// As `VerifyCa`, and the certificate must name the host connected to.
    VerifyFull,
}

impl SslMode {
    fn parse(value: &str) -> Result<SslMode, FleetError> {
        Ok(match value {
            "disable" => SslMode::Disable,
            "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            "allow" => {
                return Err(FleetError::Config(
                    "sslmode=allow is not supported (plain first, TLS only if refused): use sslmode=prefer or sslmode=disable".into(),
                ));
            }
            other => {
                return Err(FleetError::Config(format!(
                    "sslmode={other:?} is not one of disable, prefer, require, verify-ca, verify-full"
                )));
            }
        })
    }

    /// The libpq spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        }
    }

    fn checks_chain(self) -> bool {
        matches!(self, SslMode::VerifyCa | SslMode::VerifyFull)
    }
}

/// Where the trusted root certificates come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RootCerts {
    /// A PEM file of CA certificates.
    File(PathBuf),
    /// The system's CAs (`sslrootcert=system`).
    System,
}

/// The TLS settings of a fleet URL, resolved as libpq resolves them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsSettings {
    /// The effective mode.
    pub mode: SslMode,
    /// The root certificates (for `verify-ca` and `verify-full`).
    pub root: Option<RootCerts>,
    /// The certificate the node presents to the server, if any.
    pub client: Option<ClientCert>,
}

/// A client certificate (`sslcert=`) and its private key (`sslkey=`),
/// PEM files, for a server that authenticates clients by certificate
/// (`hostssl … cert` in `pg_hba.conf`, or `clientcert=verify-full`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientCert {
    /// The PEM file of the certificate, then any intermediates.
    pub cert: PathBuf,
    /// The PEM file of its private key (PKCS#8, PKCS#1 or SEC1; not encrypted).
    pub key: PathBuf,
}

impl TlsSettings {
    /// Resolves `sslmode` and `sslrootcert` as given in the URL;
    /// `default_root` is libpq's default root file (`~/.postgresql/root.crt`).
    pub fn resolve(
        mode: Option<&str>,
        root: Option<&str>,
        default_root: Option<&Path>,
    ) -> Result<TlsSettings, FleetError> {
        let root = match root {
            None | Some("") => None,
            Some("system") => Some(RootCerts::System),
            Some(path) => Some(RootCerts::File(PathBuf::from(path))),
        };
        let mode = match mode {
            Some(m) => SslMode::parse(m)?,
            None if root == Some(RootCerts::System) => SslMode::VerifyFull,
            None => SslMode::Prefer,
        };
        if root == Some(RootCerts::System) && mode != SslMode::VerifyFull {
            return Err(FleetError::Config(format!(
                "sslrootcert=system needs sslmode=verify-full (as in libpq), not sslmode={}",
                mode.as_str()
            )));
        }
        let default_file = || {
            default_root
                .filter(|p| p.is_file())
                .map(|p| RootCerts::File(p.to_path_buf()))
        };
        Ok(match (mode, root) {
            // libpq: `require` with a root certificate file behaves as `verify-ca`.
            (SslMode::Require, Some(root)) => TlsSettings {
                mode: SslMode::VerifyCa,
                root: Some(root),
                client: None,
            },
            (SslMode::Require, None) => match default_file() {
                Some(root) => TlsSettings {
                    mode: SslMode::VerifyCa,
                    root: Some(root),
                    client: None,
                },
                None => TlsSettings {
                    mode,
                    root: None,
                    client: None,
                },
            },
            (mode, None) if mode.checks_chain() => match default_file() {
                Some(root) => TlsSettings {
                    mode,
                    root: Some(root),
                    client: None,
                },
                None => {
                    return Err(FleetError::Config(format!(
                        "sslmode={} checks the server's certificate against a CA certificate, and none was given: add sslrootcert=/path/to/ca.pem to the fleet URL (or sslrootcert=system for the system's CAs){}",
                        mode.as_str(),
                        default_root
                            .map(|p| format!("; {} does not exist", p.display()))
                            .unwrap_or_default()
                    )));
                }
            },
            (mode, root) => TlsSettings {
                mode,
                root,
                client: None,
            },
        })
    }

    /// How the settings read in messages: `sslmode=… sslrootcert=…
    /// sslcert=…`.
    pub fn describe(&self) -> String {
        let mut out = self.describe_server_check();
        if let Some(c) = &self.client {
            out.push_str(&format!(" sslcert={}", c.cert.display()));
        }
        out
    }

    /// `sslmode=… sslrootcert=…`: how the server is checked.
    fn describe_server_check(&self) -> String {
        match &self.root {
            Some(RootCerts::File(p)) => {
                format!("sslmode={} sslrootcert={}", self.mode.as_str(), p.display())
            }
            Some(RootCerts::System) => format!("sslmode={} sslrootcert=system", self.mode.as_str()),
            None => format!("sslmode={}", self.mode.as_str()),
        }
    }

    /// Adds the client certificate given by `sslcert=` and `sslkey=`,
    /// which go together; TLS must be possible (not `sslmode=disable`).
    pub fn with_client(
        mut self,
        cert: Option<&str>,
        key: Option<&str>,
    ) -> Result<TlsSettings, FleetError> {
        let nonempty = |v: Option<&str>| v.filter(|v| !v.is_empty()).map(PathBuf::from);
        self.client = match (nonempty(cert), nonempty(key)) {
            (None, None) => None,
            (Some(cert), Some(key)) => Some(ClientCert { cert, key }),
            (Some(_), None) | (None, Some(_)) => {
                return Err(FleetError::Config(
                    "sslcert= and sslkey= go together in the fleet URL: give the client certificate and its private key, both PEM files".into(),
                ));
            }
        };
        if self.client.is_some() && self.mode == SslMode::Disable {
            return Err(FleetError::Config(
                "sslcert= needs TLS, and sslmode=disable never uses it: use sslmode=verify-full (or require)".into(),
            ));
        }
        Ok(self)
    }

    /// The client certificate chain and key, read from their files.
    fn client_identity(
        client: &ClientCert,
    ) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), FleetError> {
        let bad = |setting: &str, path: &Path, e: &dyn std::fmt::Display| {
            FleetError::Config(format!("{setting}={}: {e}", path.display()))
        };
        let certs = CertificateDer::pem_file_iter(&client.cert)
            .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
            .map_err(|e| {
                bad(
                    "sslcert",
                    &client.cert,
                    &format!("cannot read a PEM certificate: {e}"),
                )
            })?;
        if certs.is_empty() {
            return Err(bad(
                "sslcert",
                &client.cert,
                &"the file holds no CERTIFICATE block",
            ));
        }
        let key = PrivateKeyDer::from_pem_file(&client.key).map_err(|e| {
            bad(
                "sslkey",
                &client.key,
                &format!("cannot read an unencrypted PEM private key: {e}"),
            )
        })?;
        Ok((certs, key))
    }

    fn roots(&self) -> Result<RootCertStore, FleetError> {
        let mut store = RootCertStore::empty();
        let certs = match &self.root {
            None => Vec::new(),
            Some(RootCerts::File(path)) => {
                let bad = |e: &dyn std::fmt::Display| {
                    FleetError::Config(format!(
                        "sslrootcert={}: cannot read a PEM certificate: {e}",
                        path.display()
                    ))
                };
                let certs = CertificateDer::pem_file_iter(path)
                    .map_err(|e| bad(&e))?
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| bad(&e))?;
                if certs.is_empty() {
                    return Err(bad(&"the file holds no CERTIFICATE block"));
                }
                certs
            }
            Some(RootCerts::System) => {
                let found = rustls_native_certs::load_native_certs();
                if found.certs.is_empty() {
                    return Err(FleetError::Config(format!(
                        "sslrootcert=system: no system CA certificates found ({})",
                        found
                            .errors
                            .iter()
                            .map(|e| e.to_string())
                            .collect::<Vec<_>>()
                            .join("; ")
                    )));
                }
                found.certs
            }
        };
        let (added, _ignored) = store.add_parsable_certificates(certs);
        if added == 0 {
            return Err(FleetError::Config(format!(
                "{}: no usable CA certificate in it",
                self.describe()
            )));
        }
        Ok(store)
    }

    /// The rustls connector for these settings (none for `disable`).
    pub(crate) fn connector(&self) -> Result<MakeTls, FleetError> {
        if self.mode == SslMode::Disable {
            return Ok(MakeTls { config: None });
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| FleetError::Config(format!("TLS set-up: {e}")))?;
        let chain = if self.mode.checks_chain() {
            let roots = Arc::new(self.roots()?);
            let webpki = WebPkiServerVerifier::builder_with_provider(roots, provider.clone())
                .build()
                .map_err(|e| FleetError::Config(format!("{}: {e}", self.describe())))?;
            Some(webpki)
        } else {
            None
        };
        let verifier: Arc<dyn ServerCertVerifier> = match chain {
            Some(webpki) if self.mode == SslMode::VerifyFull => webpki,
            chain => Arc::new(LibpqVerifier { provider, chain }),
        };
        let builder = builder
            .dangerous()
            .with_custom_certificate_verifier(verifier);
        let config = match &self.client {
            None => builder.with_no_client_auth(),
            Some(client) => {
                let (certs, key) = Self::client_identity(client)?;
                builder.with_client_auth_cert(certs, key).map_err(|e| {
                    FleetError::Config(format!(
                        "sslcert={} with sslkey={}: {e}",
                        client.cert.display(),
                        client.key.display()
                    ))
                })?
            }
        };
        Ok(MakeTls {
            config: Some(Arc::new(config)),
        })
    }

    /// A connection failure explained in terms of these settings when TLS
    /// caused it (`None` otherwise).
    pub(crate) fn explain(&self, host: &str, e: &tokio_postgres::Error) -> Option<String> {
        let settings = self.describe();
        if let Some(handshake) =
            std::error::Error::source(e).and_then(|s| s.downcast_ref::<HandshakeError>())
        {
            let why = match handshake {
                HandshakeError::Tls(rustls::Error::InvalidCertificate(
                    CertificateError::UnknownIssuer,
                )) => match &self.root {
                    Some(RootCerts::File(p)) => format!(
                        "the server's certificate is not signed by a CA certificate in sslrootcert={}",
                        p.display()
                    ),
                    _ => "the server's certificate is not signed by a CA the system trusts".into(),
                },
                HandshakeError::Tls(rustls::Error::InvalidCertificate(
                    CertificateError::NotValidForName
                    | CertificateError::NotValidForNameContext { .. },
                )) => format!(
                    "the server's certificate is not issued for host {host:?} (sslmode=verify-full checks the name: connect by a name the certificate lists, or use sslmode=verify-ca)"
                ),
                HandshakeError::Tls(rustls::Error::InvalidCertificate(c)) => {
                    format!("the server's certificate was refused: {c:?}")
                }
                other => format!("the TLS handshake failed: {other}"),
            };
            return Some(format!(
                "TLS to the fleet database at {host} ({settings}): {why}"
            ));
        }
        // A fatal alert after the handshake: under TLS 1.3 the server
        // checks a client certificate after the client has finished, so a
        // refused one shows up on the first read, as an I/O error.
        let alert = std::error::Error::source(e)
            .and_then(|s| s.downcast_ref::<io::Error>())
            .and_then(|io| io.get_ref())
            .and_then(|inner| inner.downcast_ref::<rustls::Error>());
        if let Some(rustls::Error::AlertReceived(alert)) = alert {
            let why = match &self.client {
                Some(_) => format!(
                    "the server refused the TLS session ({alert:?}): it did not accept the client certificate (is it signed by a CA in the server's ssl_ca_file, and still valid?)"
                ),
                None => format!("the server refused the TLS session ({alert:?})"),
            };
            return Some(format!(
                "TLS to the fleet database at {host} ({settings}): {why}"
            ));
        }
        // The driver's own refusal (a string, not a type to downcast to).
        let cause = std::error::Error::source(e).map(|s| s.to_string());
        if cause.is_some_and(|c| c.contains("server does not support TLS")) {
            return Some(format!(
                "the fleet database at {host} does not accept TLS connections (its ssl setting is off), and {settings} requires TLS: turn TLS on in the server, or use sslmode=prefer or sslmode=disable"
            ));
        }
        None
    }
}

/// The TLS settings canopy reads itself, taken out of a fleet URL (libpq
/// URL or `key=value` form); returns the rest for the driver.
/// `sslpassword`, `sslcrl` and `sslcrldir` are refused.
pub fn split_settings(
    url: &str,
    default_root: Option<&Path>,
) -> Result<(String, TlsSettings), FleetError> {
    let mut mode = None;
    let mut root = None;
    let (mut cert, mut key_file) = (None, None);
    let mut take = |key: &str, value: String| -> Result<bool, FleetError> {
        match key {
            "sslmode" => mode = Some(value),
            "sslrootcert" => root = Some(value),
            "sslcert" => cert = Some(value),
            "sslkey" => key_file = Some(value),
            "sslpassword" => {
                return Err(FleetError::Config(
                    "sslpassword= is not supported in the fleet URL: canopy reads no encrypted private key (decrypt it to a file only the node's user can read, e.g. `openssl pkey -in key.pem -out plain.pem`, and name that in sslkey=)".into(),
                ));
            }
            "sslcrl" | "sslcrldir" => {
                return Err(FleetError::Config(format!(
                    "{key}= is not supported in the fleet URL: canopy reads no revocation list"
                )));
            }
            _ => return Ok(false),
        }
        Ok(true)
    };
    let rest = if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        split_query(url, &mut take)?
    } else {
        split_key_values(url, &mut take)?
    };
    let settings = TlsSettings::resolve(mode.as_deref(), root.as_deref(), default_root)?
        .with_client(cert.as_deref(), key_file.as_deref())?;
    Ok((rest, settings))
}

type Take<'a> = dyn FnMut(&str, String) -> Result<bool, FleetError> + 'a;

fn split_query(url: &str, take: &mut Take<'_>) -> Result<String, FleetError> {
    let Some((base, query)) = url.split_once('?') else {
        return Ok(url.to_string());
    };
    let mut kept = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        if !take(&percent_decode(key)?, percent_decode(value)?)? {
            kept.push(pair);
        }
    }
    Ok(if kept.is_empty() {
        base.to_string()
    } else {
        format!("{base}?{}", kept.join("&"))
    })
}

fn percent_decode(s: &str) -> Result<String, FleetError> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok());
            let Some(b) = hex else {
                return Err(FleetError::Config(format!(
                    "bad percent-encoding in the fleet URL's parameter {s:?}"
                )));
            };
            out.push(b);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out)
        .map_err(|_| FleetError::Config("a fleet URL parameter is not UTF-8".into()))
}

/// `key = value` pairs as libpq reads them: values may be single-quoted,
/// with `\` escaping the next character.
fn split_key_values(s: &str, take: &mut Take<'_>) -> Result<String, FleetError> {
    let bad = |m: String| FleetError::Config(format!("cannot read the fleet URL: {m}"));
    let mut kept: Vec<&str> = Vec::new();
    let mut it = s.char_indices().peekable();
    loop {
        while it.next_if(|(_, c)| c.is_whitespace()).is_some() {}
        let Some(&(start, _)) = it.peek() else { break };
        let mut key = String::new();
        while let Some((_, c)) = it.next_if(|(_, c)| !c.is_whitespace() && *c != '=') {
            key.push(c);
        }
        while it.next_if(|(_, c)| c.is_whitespace()).is_some() {}
        if it.next_if(|(_, c)| *c == '=').is_none() {
            return Err(bad(format!("expected `=` after {key:?}")));
        }
        while it.next_if(|(_, c)| c.is_whitespace()).is_some() {}
        let mut value = String::new();
        if it.next_if(|(_, c)| *c == '\'').is_some() {
            loop {
                match it.next() {
                    None => return Err(bad(format!("unterminated quoted value of {key:?}"))),
                    Some((_, '\'')) => break,
                    Some((_, '\\')) => match it.next() {
                        Some((_, c)) => value.push(c),
                        None => return Err(bad(format!("unterminated value of {key:?}"))),
                    },
                    Some((_, c)) => value.push(c),
                }
            }
        } else {
            while let Some((_, c)) = it.next_if(|(_, c)| !c.is_whitespace()) {
                match c {
                    '\\' => {
                        if let Some((_, c)) = it.next() {
                            value.push(c)
                        }
                    }
                    c => value.push(c),
                }
            }
        }
        let end = it.peek().map_or(s.len(), |(i, _)| *i);
        if !take(&key, value)? {
            kept.push(s[start..end].trim_end());
        }
    }
    Ok(kept.join(" "))
}

/// The verifier for `require`, `prefer` and `verify-ca`, the modes libpq
/// checks less than rustls would. Without `chain` (`require`, `prefer`)
/// the server is not authenticated: encryption only, as in libpq. With it
/// (`verify-ca`) the chain must lead to a trusted root and the name is
/// not checked (webpki checks the chain before the name, so a name error
/// means the chain was good). In every mode the handshake's signatures are
/// checked against the certificate presented, with the provider's
/// algorithms, as `WebPkiServerVerifier` itself does.
#[derive(Debug)]
struct LibpqVerifier {
    provider: Arc<CryptoProvider>,
    chain: Option<Arc<WebPkiServerVerifier>>,
}

impl ServerCertVerifier for LibpqVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let Some(chain) = &self.chain else {
            return Ok(ServerCertVerified::assertion());
        };
        match chain.verify_server_cert(end_entity, intermediates, server_name, ocsp, now) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// What `tokio-postgres` is given to open TLS sessions.
#[derive(Clone)]
pub(crate) struct MakeTls {
    config: Option<Arc<ClientConfig>>,
}

impl MakeTlsConnect<Socket> for MakeTls {
    type Stream = TlsStream;
    type TlsConnect = Connector;
    type Error = io::Error;

    fn make_tls_connect(&mut self, domain: &str) -> Result<Connector, io::Error> {
        Ok(Connector {
            config: self.config.clone(),
            // An empty or unparsable name (a Unix socket) fails only if a
            // handshake is attempted.
            name: ServerName::try_from(domain.to_string()).ok(),
        })
    }
}

/// One handshake.
pub(crate) struct Connector {
    config: Option<Arc<ClientConfig>>,
    name: Option<ServerName<'static>>,
}

impl TlsConnect<Socket> for Connector {
    type Stream = TlsStream;
    type Error = HandshakeError;
    type Future = Pin<Box<dyn Future<Output = Result<TlsStream, HandshakeError>> + Send>>;

    fn connect(self, stream: Socket) -> Self::Future {
        Box::pin(async move {
            let (Some(config), Some(name)) = (self.config, self.name) else {
                return Err(HandshakeError::NoServerName);
            };
            tokio_rustls::TlsConnector::from(config)
                .connect(name, stream)
                .await
                .map(TlsStream)
                .map_err(HandshakeError::from_io)
        })
    }
}

/// Why a handshake failed (the rustls error when there is one, so the
/// caller can explain it).
#[derive(Debug)]
pub(crate) enum HandshakeError {
    Tls(rustls::Error),
    Io(io::Error),
    NoServerName,
}

impl HandshakeError {
    fn from_io(e: io::Error) -> HandshakeError {
        match e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>()) {
            Some(t) => HandshakeError::Tls(t.clone()),
            None => HandshakeError::Io(e),
        }
    }
}

impl std::fmt::Display for HandshakeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HandshakeError::Tls(e) => write!(f, "{e}"),
            HandshakeError::Io(e) => write!(f, "{e}"),
            HandshakeError::NoServerName => {
                f.write_str("no host name to check the certificate against")
            }
        }
    }
}

impl std::error::Error for HandshakeError {}

/// A TLS session to the database.
pub(crate) struct TlsStream(tokio_rustls::client::TlsStream<Socket>);

impl AsyncRead for TlsStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl AsyncWrite for TlsStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

impl tokio_postgres::tls::TlsStream for TlsStream {
    fn channel_binding(&self) -> ChannelBinding {
        let cert = self
            .0
            .get_ref()
            .1
            .peer_certificates()
            .and_then(|c| c.first());
        match cert.and_then(|c| end_point_digest(c.as_ref())) {
            Some(digest) => ChannelBinding::tls_server_end_point(digest),
            None => ChannelBinding::none(),
        }
    }
}

/// `tls-server-end-point` (RFC 5929): the certificate hashed with its
/// signature's hash, SHA-256 for MD5 and SHA-1; `None` for algorithms
/// without one named in the OID (RSA-PSS, Ed25519), as PostgreSQL does.
fn end_point_digest(der: &[u8]) -> Option<Vec<u8>> {
    use ring::digest::{SHA256, SHA384, SHA512, digest};
    // Certificate ::= SEQUENCE { tbsCertificate SEQUENCE, signatureAlgorithm SEQUENCE { OID, … }, … }
    let (_, cert, _) = der_item(der)?;
    let (_, _tbs, rest) = der_item(cert)?;
    let (_, algorithm, _) = der_item(rest)?;
    let (tag, oid, _) = der_item(algorithm)?;
    if tag != 0x06 {
        return None;
    }
    const RSA: &[u8] = &[0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x01];
    const ECDSA: &[u8] = &[0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x04];
    let hash = match oid {
        [head @ .., 0x04 | 0x05 | 0x0B] if head == RSA => &SHA256,
        [head @ .., 0x0C] if head == RSA => &SHA384,
        [head @ .., 0x0D] if head == RSA => &SHA512,
        [head @ .., 0x01] if head == ECDSA => &SHA256, // ecdsa-with-SHA1
        [head @ .., 0x03, 0x02] if head == ECDSA => &SHA256,
        [head @ .., 0x03, 0x03] if head == ECDSA => &SHA384,
        [head @ .., 0x03, 0x04] if head == ECDSA => &SHA512,
        _ => return None,
    };
    Some(digest(hash, der).as_ref().to_vec())
}

/// One DER item: (tag, contents, what follows).
fn der_item(data: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let tag = *data.first()?;
    let first = *data.get(1)?;
    let (len, header) = if first < 0x80 {
        (first as usize, 2)
    } else {
        let n = (first & 0x7F) as usize;
        if n == 0 || n > 4 {
            return None;
        }
        let bytes = data.get(2..2 + n)?;
        (
            bytes.iter().fold(0usize, |acc, b| (acc << 8) | *b as usize),
            2 + n,
        )
    };
    let contents = data.get(header..header.checked_add(len)?)?;
    Some((tag, contents, &data[header + len..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(url: &str) -> Result<(String, TlsSettings), FleetError> {
        split_settings(url, None)
    }

    #[test]
    fn tls_settings_leave_the_url_and_the_rest_stays() {
        let (rest, s) = split(
            "postgres://u:p@db.example:5432/canopy?sslmode=verify-full&sslrootcert=%2Fetc%2Fca.pem&application_name=x",
        )
        .unwrap();
        assert_eq!(
            rest,
            "postgres://u:p@db.example:5432/canopy?application_name=x"
        );
        assert_eq!(s.mode, SslMode::VerifyFull);
        assert_eq!(s.root, Some(RootCerts::File("/etc/ca.pem".into())));
        let (rest, s) = split("postgres://u@h/db?sslmode=require").unwrap();
        assert_eq!(
            (rest.as_str(), s.mode, s.root),
            ("postgres://u@h/db", SslMode::Require, None)
        );
        let (rest, s) = split("postgres://u@h/db").unwrap();
        assert_eq!(
            (rest.as_str(), s.mode),
            ("postgres://u@h/db", SslMode::Prefer)
        );

        let (rest, s) = split(
            "host=db user=u sslmode = 'verify-ca' sslrootcert='/a b/ca.pem' password='it\\'s'",
        )
        .unwrap();
        assert_eq!(rest, "host=db user=u password='it\\'s'");
        assert_eq!(s.mode, SslMode::VerifyCa);
        assert_eq!(s.root, Some(RootCerts::File("/a b/ca.pem".into())));
        // What is left still reads as the driver reads it.
        let pg: tokio_postgres::Config = rest.parse().unwrap();
        assert_eq!(pg.get_password(), Some(&b"it's"[..]));
    }

    #[test]
    fn modes_resolve_as_libpq_says() {
        let none = None;
        // `require` with a root certificate is `verify-ca`.
        let s = TlsSettings::resolve(Some("require"), Some("/ca.pem"), none).unwrap();
        assert_eq!(s.mode, SslMode::VerifyCa);
        // `sslrootcert=system` implies `verify-full` and refuses weaker modes.
        let s = TlsSettings::resolve(None, Some("system"), none).unwrap();
        assert_eq!(
            (s.mode, s.root),
            (SslMode::VerifyFull, Some(RootCerts::System))
        );
        let e = TlsSettings::resolve(Some("require"), Some("system"), none).unwrap_err();
        assert!(
            e.to_string()
                .contains("sslrootcert=system needs sslmode=verify-full"),
            "{e}"
        );
        // Checking modes need a root certificate; the error names the setting.
        let missing = Path::new("/nonexistent/.postgresql/root.crt");
        let e = TlsSettings::resolve(Some("verify-full"), None, Some(missing)).unwrap_err();
        let e = e.to_string();
        assert!(
            e.contains("sslrootcert=") && e.contains("/nonexistent/.postgresql/root.crt"),
            "{e}"
        );
        // The default root file is used when it exists.
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root.crt");
        std::fs::write(&root, "x").unwrap();
        let s = TlsSettings::resolve(Some("require"), None, Some(&root)).unwrap();
        assert_eq!(
            (s.mode, s.root),
            (SslMode::VerifyCa, Some(RootCerts::File(root.clone())))
        );
        let s = TlsSettings::resolve(Some("verify-full"), None, Some(&root)).unwrap();
        assert_eq!(s.root, Some(RootCerts::File(root)));
        // Unsupported settings are named.
        for (url, named) in [
            ("postgres://h/db?sslmode=allow", "sslmode=allow"),
            ("postgres://h/db?sslmode=verify", "sslmode=\"verify\""),
            (
                "postgres://h/db?sslcert=/c.pem",
                "sslcert= and sslkey= go together",
            ),
            ("host=h sslkey=/k.pem", "sslcert= and sslkey= go together"),
            (
                "postgres://h/db?sslmode=disable&sslcert=/c.pem&sslkey=/k.pem",
                "sslmode=disable",
            ),
            ("postgres://h/db?sslpassword=x", "sslpassword="),
            ("postgres://h/db?sslcrl=/crl.pem", "sslcrl="),
        ] {
            let e = split(url).unwrap_err().to_string();
            assert!(e.contains(named), "{url}: {e}");
        }
    }

    #[test]
    fn a_client_certificate_is_taken_from_the_url_and_its_files_are_named() {
        let (rest, s) = split(
            "postgres://u@h/db?sslmode=verify-full&sslrootcert=/ca.pem&sslcert=%2Fc.pem&sslkey=/k.pem",
        )
        .unwrap();
        assert_eq!(rest, "postgres://u@h/db");
        assert_eq!(
            s.client,
            Some(ClientCert {
                cert: "/c.pem".into(),
                key: "/k.pem".into()
            })
        );
        assert_eq!(
            s.describe(),
            "sslmode=verify-full sslrootcert=/ca.pem sslcert=/c.pem"
        );
        let (_, s) = split("host=h sslmode=require sslcert=/c.pem sslkey=/k.pem").unwrap();
        let e = s.connector().err().expect("refused").to_string();
        assert!(e.contains("sslcert=/c.pem"), "{e}");
    }

    #[test]
    fn a_missing_root_file_is_named() {
        let s =
            TlsSettings::resolve(Some("verify-full"), Some("/nonexistent/ca.pem"), None).unwrap();
        let e = s.connector().err().expect("refused").to_string();
        assert!(e.contains("sslrootcert=/nonexistent/ca.pem"), "{e}");
    }

    #[test]
    fn der_items_are_read() {
        // SEQUENCE { SEQUENCE {}, SEQUENCE { OID 1.2.840.10045.4.3.2 } }
        let oid = [0x06, 0x08, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x04, 0x03, 0x02];
        let mut alg = vec![0x30, oid.len() as u8];
        alg.extend(oid);
        let mut body = vec![0x30, 0x00];
        body.extend(&alg);
        let mut cert = vec![0x30, body.len() as u8];
        cert.extend(&body);
        let d = end_point_digest(&cert).unwrap();
        assert_eq!(
            d,
            ring::digest::digest(&ring::digest::SHA256, &cert).as_ref()
        );
        assert!(end_point_digest(&cert[..cert.len() - 1]).is_none());
    }
}
