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
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{verify_server_cert_signed_by_trust_anchor, verify_server_name};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::ParsedCertificate;
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use serde::{Deserialize, Serialize};
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::error::{EnvError, UsageError};
use crate::redact;

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

/// A client configuration for an HTTPS app under test: the system's CA store, as a browser
/// or curl on the same machine would verify the app's certificate.
pub fn web_client_config() -> Result<ClientConfig, EnvError> {
    let roots = system_roots().map_err(|_| {
        EnvError(
            "--target https://: no CA certificates found in the system's store (Debian: apt-get install ca-certificates)".into(),
        )
    })?;
    ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| EnvError(format!("TLS set-up: {e}")))
        .map(|b| b.with_root_certificates(roots).with_no_client_auth())
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
            && !u.starts_with("rediss+cluster://")
        {
            return Err(UsageError::new(format!(
                "--redis-ca, --redis-cert, --redis-key and --redis-insecure are for TLS: use a rediss:// URL (rediss+cluster:// for a cluster; got {})",
                redact::url(u)
            )));
        }
        Ok(())
    }
}

/// A Redis client for `url` with `tls` applied.
pub fn redis_client(url: &str, tls: &RedisTls) -> Result<redis::Client> {
    use redis::IntoConnectionInfo;
    let bad = |e: redis::RedisError| EnvError(format!("bad Redis URL {}: {e}", redact::url(url)));
    let url = if url.starts_with("rediss://") && tls.insecure && !url.contains('#') {
        format!("{url}#insecure")
    } else {
        url.to_string()
    };
    // TCP_NODELAY, as node-redis, ioredis, redis-py, go-redis and lettuce all set it: with
    // Nagle on (redis-rs's default) a pipelined command waits for the ACK of the one before,
    // which costs nothing against a server that answers in microseconds and a whole extra
    // round trip behind a real network (--net-rtt 0.5ms at 10k req/s: hit p50 1.01 ms).
    let info = url
        .as_str()
        .into_connection_info()
        .map_err(bad)?
        .set_tcp_settings(redis::io::tcp::TcpSettings::default().set_nodelay(true));
    if !url.starts_with("rediss://") {
        return Ok(redis::Client::open(info).map_err(bad)?);
    }
    match redis_certificates(tls)? {
        None => Ok(redis::Client::open(info).map_err(bad)?),
        Some(certs) => Ok(redis::Client::build_with_tls(info, certs).map_err(bad)?),
    }
}

/// The CA and client certificate of `tls` for the redis crate (a single server's client or a
/// cluster's), read and checked here so a bad file is named before any connection; None when
/// neither is given (the system's roots).
pub fn redis_certificates(tls: &RedisTls) -> Result<Option<redis::TlsCertificates>> {
    if tls.ca.is_none() && tls.cert.is_none() {
        return Ok(None);
    }
    let read = |p: &Path, what: &str| {
        std::fs::read(p).map_err(|e| EnvError(format!("reading {what} {}: {e}", p.display())))
    };
    let root_cert = match &tls.ca {
        Some(ca) => {
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
    Ok(Some(redis::TlsCertificates {
        client_tls,
        root_cert,
    }))
}

/// Say once that Redis's certificate goes unverified: `--redis-insecure`, or a `rediss://`
/// URL ending in `#insecure`, which the redis crate reads the same way.
pub fn warn_insecure(url: &str, tls: &RedisTls) {
    static WARNED: std::sync::Once = std::sync::Once::new();
    let by = if tls.insecure {
        "--redis-insecure"
    } else if url.starts_with("rediss://") && url.ends_with("#insecure") {
        "rediss://…#insecure"
    } else {
        return;
    };
    WARNED.call_once(|| {
        eprintln!(
            "warning: {by}: Redis's certificate is not verified; anyone on the path can read and change the traffic (give --redis-ca FILE to verify it)"
        );
    });
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

/// Read a `postgres://` URL as libpq would for `sslmode` and `sslrootcert`.
pub fn pg_target(url: &str) -> Result<PgTarget> {
    let (base, query) = url.split_once('?').unwrap_or((url, ""));
    let mut mode = None;
    let mut rootcert = None;
    let mut kept = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        match k {
            "sslmode" => mode = Some(SslMode::parse(&crate::redact::percent_decode(v))?),
            "sslrootcert" => rootcert = Some(crate::redact::percent_decode(v)),
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
        .map_err(|e| EnvError(format!("bad Postgres URL {}: {e}", redact::url(url))))?;
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
            if roots.is_empty() {
                return Err(
                    EnvError(format!("the CA file {r} holds no usable certificate")).into(),
                );
            }
            let verifier = PgVerifier {
                roots: Arc::new(roots),
                provider: provider(),
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
    if mode == SslMode::Require {
        warn_unverified_postgres();
    }
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

/// Say once that `sslmode=require` without a root certificate encrypts but verifies nothing.
fn warn_unverified_postgres() {
    static WARNED: std::sync::Once = std::sync::Once::new();
    WARNED.call_once(|| {
        eprintln!(
            "warning: sslmode=require without sslrootcert: Postgres's certificate is not verified; anyone on the path can read and change the traffic (add sslrootcert=CA and sslmode=verify-full to verify it)"
        );
    });
}

/// A connection to Postgres at `url`, made as its `sslmode` asks: every connection of the
/// tool to Postgres is made here or through [`PgTarget`], so none of them speaks another
/// TLS than the run's. The connection task is spawned; failures say what to do.
pub async fn pg_connect(url: &str) -> Result<(tokio_postgres::Client, PgTarget)> {
    pg_connect_with(url, |_| {}).await
}

/// As [`pg_connect`], with `configure` applied to the URL's settings first (e.g. options every
/// session of the connection starts with).
pub async fn pg_connect_with(
    url: &str,
    configure: impl FnOnce(&mut tokio_postgres::Config),
) -> Result<(tokio_postgres::Client, PgTarget)> {
    let mut target = pg_target(url)?;
    configure(&mut target.config);
    target
        .config
        .connect_timeout(std::time::Duration::from_secs(5));
    target.config.application_name("stampede");
    let connected = tokio::time::timeout(
        std::time::Duration::from_secs(6),
        target.config.connect(target.tls.clone()),
    )
    .await;
    let (client, conn) = match connected {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => return Err(EnvError(target.explain(&e)).into()),
        Err(_) => {
            return Err(EnvError(format!(
                "cannot connect to Postgres at {}: no answer within 6 s",
                redact::url(url)
            ))
            .into());
        }
    };
    tokio::spawn(async move {
        // Ends when the client is dropped; an error here surfaces on the next query instead.
        let _ = conn.await;
    });
    Ok((client, target))
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
        let at = redact::url(&self.url);
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

/// Verifies the chain against the roots, and the host name only for verify-full. The two
/// checks are rustls's own functions called one after the other, so verify-ca skipping the
/// name does not depend on the order in which a full verifier happens to check things.
#[derive(Debug)]
struct PgVerifier {
    roots: Arc<RootCertStore>,
    provider: Arc<CryptoProvider>,
    check_name: bool,
}

impl ServerCertVerifier for PgVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        _ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let cert = ParsedCertificate::try_from(end_entity)?;
        // The chain to one of the roots, each certificate within its validity at `now`, and
        // the end entity fit for a TLS server.
        verify_server_cert_signed_by_trust_anchor(
            &cert,
            &self.roots,
            intermediates,
            now,
            self.provider.signature_verification_algorithms.all,
        )?;
        if self.check_name {
            verify_server_name(&cert, server_name)?;
        }
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

    /// A CA of its own and the server certificates it signs, made here for the verifier's
    /// cases.
    struct Ca {
        cert: CertificateDer<'static>,
        issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
    }

    impl Ca {
        fn new(name: &str) -> Ca {
            let key = rcgen::KeyPair::generate().unwrap();
            let mut p = rcgen::CertificateParams::new(Vec::new()).unwrap();
            p.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
            p.distinguished_name
                .push(rcgen::DnType::CommonName, name.to_string());
            p.key_usages = vec![
                rcgen::KeyUsagePurpose::KeyCertSign,
                rcgen::KeyUsagePurpose::CrlSign,
            ];
            let cert = p.self_signed(&key).unwrap().der().clone();
            Ca {
                cert,
                issuer: rcgen::Issuer::new(p, key),
            }
        }

        /// A server certificate for `names`, valid from `years.0` to `years.1`.
        fn leaf(&self, names: &[&str], years: (i32, i32)) -> CertificateDer<'static> {
            let key = rcgen::KeyPair::generate().unwrap();
            let mut p = rcgen::CertificateParams::new(
                names.iter().map(|n| n.to_string()).collect::<Vec<_>>(),
            )
            .unwrap();
            p.not_before = rcgen::date_time_ymd(years.0, 1, 1);
            p.not_after = rcgen::date_time_ymd(years.1, 1, 1);
            p.signed_by(&key, &self.issuer).unwrap().der().clone()
        }
    }

    fn verify(ca: &Ca, cert: &CertificateDer<'_>, check_name: bool) -> Result<(), rustls::Error> {
        let mut roots = RootCertStore::empty();
        roots.add(ca.cert.clone()).unwrap();
        let v = PgVerifier {
            roots: Arc::new(roots),
            provider: provider(),
            check_name,
        };
        let name = ServerName::try_from("127.0.0.1").unwrap();
        v.verify_server_cert(cert, &[], &name, &[], UnixTime::now())
            .map(|_| ())
    }

    #[test]
    fn verify_ca_checks_the_chain_and_verify_full_the_name_too() {
        use rustls::CertificateError as E;
        let ca = Ca::new("the server's CA");
        let now = (2020, 2100);
        let right = ca.leaf(&["127.0.0.1", "localhost"], now);
        assert!(verify(&ca, &right, false).is_ok());
        assert!(verify(&ca, &right, true).is_ok());

        // Another host's certificate from the right CA: the chain holds, the name does not.
        let other_host = ca.leaf(&["db.example.internal"], now);
        assert!(verify(&ca, &other_host, false).is_ok());
        let e = verify(&ca, &other_host, true).unwrap_err();
        assert!(
            matches!(
                e,
                rustls::Error::InvalidCertificate(
                    E::NotValidForName | E::NotValidForNameContext { .. }
                )
            ),
            "{e:?}"
        );

        // Expired, or signed by another CA: neither mode lets it through, whatever the name.
        let expired = ca.leaf(&["127.0.0.1"], (2000, 2001));
        let stranger = Ca::new("someone else's CA").leaf(&["127.0.0.1"], now);
        for check_name in [false, true] {
            let e = verify(&ca, &expired, check_name).unwrap_err();
            assert!(
                matches!(
                    e,
                    rustls::Error::InvalidCertificate(E::Expired | E::ExpiredContext { .. })
                ),
                "{e:?}"
            );
            let e = verify(&ca, &stranger, check_name).unwrap_err();
            assert!(
                matches!(e, rustls::Error::InvalidCertificate(E::UnknownIssuer)),
                "{e:?}"
            );
        }
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
