//! TLS for the connections to Redis and Postgres, on one stack: rustls with the ring provider
//! (aws-lc-rs, rustls' default, is a long C build on a small machine). What it covers:
//!
//! * Redis: `rediss://` URLs, a CA file to verify against (`--redis-ca`), a client
//!   certificate (`--redis-cert`, `--redis-key`) and an opt-out of verification that warns
//!   (`--redis-insecure`).
//! * Postgres: `sslmode` and `sslrootcert` read from the URL as libpq reads them.
//!   tokio-postgres knows only disable/prefer/require and verifies nothing itself, so the
//!   two parameters are taken out of the URL here and the verification is ours: verify-full
//!   checks the chain and the host name, verify-ca the chain only, require nothing unless a
//!   root certificate is given (then, as in libpq, it is verify-ca).
//! * Errors that say which name and which CA a certificate failed against, and when a
//!   server wants TLS that the URL does not ask for.
//! * The certificates of managed servers started with `--tls`: a CA and a server
//!   certificate made for the run, in the server's temp dir.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Result;
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use serde::{Deserialize, Serialize};
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::error::{EnvError, UsageError};
use crate::values::redact_url;

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Make ring the process's rustls provider: the redis crate builds its TLS configuration
/// with the process default. Idempotent.
pub fn install_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// The certificates in a PEM file.
fn read_certs(path: &Path, what: &str) -> Result<Vec<CertificateDer<'static>>, EnvError> {
    let certs: Vec<_> = CertificateDer::pem_file_iter(path)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| EnvError(format!("reading {what} {}: {e}", path.display())))?;
    if certs.is_empty() {
        return Err(EnvError(format!(
            "{what} {} holds no PEM certificate",
            path.display()
        )));
    }
    Ok(certs)
}

fn root_store(ca: &Path) -> Result<RootCertStore, EnvError> {
    let mut roots = RootCertStore::empty();
    for c in read_certs(ca, "CA file")? {
        roots
            .add(c)
            .map_err(|e| EnvError(format!("CA file {}: {e}", ca.display())))?;
    }
    Ok(roots)
}

fn system_roots() -> Result<RootCertStore, EnvError> {
    let mut roots = RootCertStore::empty();
    let found = rustls_native_certs::load_native_certs();
    for c in found.certs {
        let _ = roots.add(c);
    }
    if roots.is_empty() {
        return Err(EnvError(
            "sslrootcert=system: no CA certificates found in the system's store (Debian: apt-get install ca-certificates)".into(),
        ));
    }
    Ok(roots)
}

/// Whether a TLS error is a certificate that did not verify.
fn is_certificate_error(text: &str) -> bool {
    text.contains("invalid peer certificate") || text.contains("certificate")
}

// ---------------------------------------------------------------------------------------
// Redis

/// How to speak TLS to Redis, besides the `rediss://` scheme of its URL.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RedisTls {
    /// Verify the server's certificate against this CA (PEM) instead of the system's store.
    pub ca: Option<PathBuf>,
    /// Client certificate (PEM), for servers that require one.
    pub cert: Option<PathBuf>,
    /// The client certificate's private key (PEM).
    pub key: Option<PathBuf>,
    /// Do not verify the server's certificate at all.
    #[serde(default)]
    pub insecure: bool,
}

impl RedisTls {
    pub fn is_empty(&self) -> bool {
        *self == RedisTls::default()
    }

    /// Refuse settings that cannot work together, before anything starts.
    pub fn check(&self, url: Option<&str>) -> Result<(), UsageError> {
        if self.cert.is_some() != self.key.is_some() {
            return Err(UsageError::new(
                "--redis-cert and --redis-key go together: give the client certificate and its key",
            ));
        }
        if self.insecure && self.ca.is_some() {
            return Err(UsageError::new(
                "--redis-insecure skips the verification --redis-ca asks for: give one of them",
            ));
        }
        if let Some(u) = url
            && !self.is_empty()
            && !u.starts_with("rediss://")
        {
            return Err(UsageError::new(format!(
                "--redis-ca, --redis-cert, --redis-key and --redis-insecure are for TLS: use a rediss:// URL (got {})",
                redact_url(u)
            )));
        }
        Ok(())
    }
}

/// A Redis client for `url` with `tls` applied.
pub fn redis_client(url: &str, tls: &RedisTls) -> Result<redis::Client> {
    let bad = |e: redis::RedisError| EnvError(format!("bad Redis URL {}: {e}", redact_url(url)));
    if !url.starts_with("rediss://") {
        return Ok(redis::Client::open(url).map_err(bad)?);
    }
    let url = if tls.insecure && !url.contains('#') {
        format!("{url}#insecure")
    } else {
        url.to_string()
    };
    if tls.ca.is_none() && tls.cert.is_none() {
        return Ok(redis::Client::open(url.as_str()).map_err(bad)?);
    }
    let read = |p: &Path, what: &str| {
        std::fs::read(p).map_err(|e| EnvError(format!("reading {what} {}: {e}", p.display())))
    };
    let root_cert = match &tls.ca {
        Some(ca) => {
            // Read and parsed here too, so a bad file is named before any connection.
            root_store(ca)?;
            Some(read(ca, "the Redis CA file (--redis-ca)")?)
        }
        None => None,
    };
    let client_tls = match (&tls.cert, &tls.key) {
        (Some(c), Some(k)) => Some(redis::ClientTlsConfig {
            client_cert: read(c, "the Redis client certificate (--redis-cert)")?,
            client_key: read(k, "the Redis client key (--redis-key)")?,
        }),
        _ => None,
    };
    Ok(redis::Client::build_with_tls(
        url.as_str(),
        redis::TlsCertificates {
            client_tls,
            root_cert,
        },
    )
    .map_err(bad)?)
}

/// Say once that `--redis-insecure` is in force.
pub fn warn_insecure(tls: &RedisTls) {
    static WARNED: std::sync::Once = std::sync::Once::new();
    if tls.insecure {
        WARNED.call_once(|| {
            eprintln!(
                "warning: --redis-insecure: Redis's certificate is not verified; anyone on the path can read and change the traffic"
            );
        });
    }
}

/// `host:port` of a URL, for messages and probes.
fn host_port(url: &str) -> Option<(String, u16)> {
    let rest = url.split_once("://")?.1;
    let authority = rest.split(['/', '?', '#']).next()?;
    let hostport = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let (host, port) = match hostport.rsplit_once(':') {
        Some((h, p)) if !h.is_empty() && !p.contains(']') => (h, p.parse().ok()?),
        _ => (hostport, 6379),
    };
    Some((host.trim_matches(['[', ']']).to_string(), port))
}

/// What a failed first connection to Redis means, when TLS explains it; None otherwise.
pub async fn explain_redis_failure(url: &str, tls: &RedisTls, error: &str) -> Option<String> {
    let (host, port) = host_port(url)?;
    if url.starts_with("rediss://") {
        if is_certificate_error(error) {
            let against = match &tls.ca {
                Some(ca) => format!("the CA in {}", ca.display()),
                None => "the system's CA store".to_string(),
            };
            return Some(format!(
                "the TLS certificate of Redis at {host}:{port} does not verify for the name {host} against {against}: {error}; give the CA that signed the server's certificate with --redis-ca (or skip verification with --redis-insecure)"
            ));
        }
        return None;
    }
    speaks_tls(&host, port).await.then(|| {
        format!(
            "Redis at {host}:{port} wants TLS and the URL has none: use rediss://{host}:{port}/ (with --redis-ca FILE for a private CA)"
        )
    })
}

/// Whether the server on `host:port` answers a TLS handshake (its certificate unchecked).
async fn speaks_tls(host: &str, port: u16) -> bool {
    let Ok(name) = ServerName::try_from(host.to_string()) else {
        return false;
    };
    let config = Arc::new(unverified_config());
    let probe = async {
        let tcp = tokio::net::TcpStream::connect((host, port)).await.ok()?;
        tokio_rustls::TlsConnector::from(config)
            .connect(name, tcp)
            .await
            .ok()
    };
    matches!(
        tokio::time::timeout(std::time::Duration::from_secs(2), probe).await,
        Ok(Some(_))
    )
}

// ---------------------------------------------------------------------------------------
// Postgres

/// libpq's `sslmode`, the values stampede supports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SslMode {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl SslMode {
    fn parse(s: &str) -> Result<SslMode, UsageError> {
        Ok(match s {
            "disable" => SslMode::Disable,
            "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            other => {
                return Err(UsageError::new(format!(
                    "sslmode={other} in the Postgres URL is not supported: use disable, prefer, require, verify-ca or verify-full"
                )));
            }
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        }
    }
}

/// A Postgres URL read: the connection settings and the TLS connector that enforces its
/// `sslmode`.
#[derive(Clone)]
pub struct PgTarget {
    pub config: tokio_postgres::Config,
    pub tls: MakeRustlsConnect,
    pub mode: SslMode,
    /// The root certificate file verification uses, when it verifies.
    pub root: Option<String>,
    url: String,
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && let Some(v) = b
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(v);
            i += 3;
            continue;
        }
        out.push(if b[i] == b'+' { b' ' } else { b[i] });
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Read a `postgres://` URL as libpq would for `sslmode` and `sslrootcert`.
pub fn pg_target(url: &str) -> Result<PgTarget> {
    let (base, query) = url.split_once('?').unwrap_or((url, ""));
    let mut mode = None;
    let mut rootcert = None;
    let mut kept = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        match k {
            "sslmode" => mode = Some(SslMode::parse(&percent_decode(v))?),
            "sslrootcert" => rootcert = Some(percent_decode(v)),
            _ => kept.push(pair),
        }
    }
    let stripped = if kept.is_empty() {
        base.to_string()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    let mut config: tokio_postgres::Config = stripped
        .parse()
        .map_err(|e| EnvError(format!("bad Postgres URL {}: {e}", redact_url(url))))?;
    // libpq's default root file, used when the URL names none.
    let default_root = std::env::var_os("HOME")
        .map(|h| PathBuf::from(h).join(".postgresql/root.crt"))
        .filter(|p| p.exists())
        .map(|p| p.display().to_string());
    let mut mode = mode.unwrap_or(SslMode::Prefer);
    // libpq: "if a root CA file exists, sslmode=require behaves as verify-ca".
    if mode == SslMode::Require && (rootcert.is_some() || default_root.is_some()) {
        mode = SslMode::VerifyCa;
    }
    let root = match mode {
        SslMode::VerifyCa | SslMode::VerifyFull => Some(rootcert.or(default_root).ok_or_else(|| {
            EnvError(format!(
                "sslmode={} needs the CA to verify the server against: add sslrootcert=FILE to the Postgres URL (there is no ~/.postgresql/root.crt)",
                mode.name()
            ))
        })?),
        _ => None,
    };
    let client = match &root {
        Some(r) => {
            let roots = if r == "system" {
                system_roots()?
            } else {
                root_store(Path::new(r))?
            };
            let inner = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider())
                .build()
                .map_err(|e| EnvError(format!("the CA in {r}: {e}")))?;
            let verifier = PgVerifier {
                inner,
                check_name: mode == SslMode::VerifyFull,
            };
            ClientConfig::builder_with_provider(provider())
                .with_safe_default_protocol_versions()
                .map_err(|e| EnvError(format!("TLS set-up: {e}")))?
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(verifier))
                .with_no_client_auth()
        }
        None => unverified_config(),
    };
    config.ssl_mode(match mode {
        SslMode::Disable => tokio_postgres::config::SslMode::Disable,
        SslMode::Prefer => tokio_postgres::config::SslMode::Prefer,
        _ => tokio_postgres::config::SslMode::Require,
    });
    Ok(PgTarget {
        config,
        tls: MakeRustlsConnect::new(client),
        mode,
        root,
        url: url.to_string(),
    })
}

impl PgTarget {
    /// What a failed connection means, in words that say what to do.
    pub fn explain(&self, error: &tokio_postgres::Error) -> String {
        let text = error.to_string();
        let full = format!(
            "{text}{}",
            std::error::Error::source(error).map_or(String::new(), |s| format!(": {s}"))
        );
        let host = host_port(&self.url).map_or_else(|| "?".to_string(), |(h, _)| h);
        let at = redact_url(&self.url);
        if full.contains("TLS handshake") && is_certificate_error(&full) {
            let checks = if self.mode == SslMode::VerifyFull {
                format!("for the name {host}")
            } else {
                "(chain only)".to_string()
            };
            return format!(
                "the TLS certificate of Postgres at {at} does not verify {checks} against the CA in {} (sslmode={}): {full}; give sslrootcert= the CA that signed the server's certificate",
                self.root.as_deref().unwrap_or("?"),
                self.mode.name()
            );
        }
        if full.contains("server does not support TLS") {
            return format!(
                "Postgres at {at} does not offer TLS but sslmode={} asks for it: enable ssl on the server or use sslmode=prefer|disable",
                self.mode.name()
            );
        }
        if full.contains("no encryption") || full.contains("SSL off") {
            return format!(
                "Postgres at {at} refused a connection without TLS ({full}): it wants TLS; use sslmode=require or verify-full (with sslrootcert=CA) in the URL"
            );
        }
        format!("cannot connect to Postgres at {at}: {full} (is it running and reachable?)")
    }
}

/// Verifies the chain against the roots; the host name only for verify-full.
#[derive(Debug)]
struct PgVerifier {
    inner: Arc<WebPkiServerVerifier>,
    check_name: bool,
}

impl ServerCertVerifier for PgVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .inner
            .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
        {
            // The name is checked after the chain: a name error means the chain verified.
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) if !self.check_name => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// Accepts any certificate (sslmode prefer/require without a root, as libpq, and the probe
/// that tells whether a server speaks TLS) but still checks the handshake's signatures.
#[derive(Debug)]
struct Unverified(Arc<CryptoProvider>);

impl ServerCertVerifier for Unverified {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
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
            &self.0.signature_verification_algorithms,
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
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

fn unverified_config() -> ClientConfig {
    let p = provider();
    ClientConfig::builder_with_provider(p.clone())
        .with_safe_default_protocol_versions()
        .expect("ring supports the default protocol versions")
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(Unverified(p)))
        .with_no_client_auth()
}

mod certs;
pub use certs::{RunCerts, connect_loopback, generate_run_certs};

/// A private key file, parsed (to name a bad one before any connection).
pub fn check_key(path: &Path) -> Result<(), EnvError> {
    PrivateKeyDer::from_pem_file(path)
        .map(|_| ())
        .map_err(|e| EnvError(format!("reading the private key {}: {e}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sslmode_and_rootcert_are_read_and_removed() {
        let dir = tempfile::tempdir().unwrap();
        let certs = generate_run_certs(dir.path()).unwrap();
        let url = format!(
            "postgres://u:secret@127.0.0.1:5/db?sslmode=verify-full&sslrootcert={}&application_name=x",
            certs.ca.display()
        );
        let t = pg_target(&url).unwrap();
        assert_eq!(t.mode, SslMode::VerifyFull);
        assert_eq!(t.root.as_deref(), Some(certs.ca.to_str().unwrap()));
        assert_eq!(t.config.get_application_name(), Some("x"));
        // require with a root file is verify-ca, as in libpq.
        let t = pg_target(&url.replace("verify-full", "require")).unwrap();
        assert_eq!(t.mode, SslMode::VerifyCa);
        assert!(pg_target("postgres://u@h/db?sslmode=allow").is_err());
        assert_eq!(
            pg_target("postgres://u@h/db").unwrap().mode,
            SslMode::Prefer
        );
    }

    #[test]
    fn host_and_port() {
        assert_eq!(
            host_port("rediss://u:p@example.com:6380/0"),
            Some(("example.com".into(), 6380))
        );
        assert_eq!(host_port("redis://h/"), Some(("h".into(), 6379)));
    }
}
