//! The certificates of managed servers started with `--tls`: a CA made for the run and the
//! server and client certificates it signs, in the server's temp dir, and the readiness
//! probe's TLS connection to such a server.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::ClientConfig;
use rustls::pki_types::ServerName;

use super::{provider, root_store};

/// The files of a CA and the certificates it signed, written for one managed server.
#[derive(Debug, Clone)]
pub struct RunCerts {
    pub ca: PathBuf,
    pub server_cert: PathBuf,
    pub server_key: PathBuf,
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
}

/// Make a CA, a server certificate for 127.0.0.1 and localhost, and a client certificate,
/// all signed by that CA, and write them (PEM) into `dir`. The keys are 0600.
pub fn generate_run_certs(dir: &Path) -> Result<RunCerts, std::io::Error> {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, KeyUsagePurpose};
    let err = |e: rcgen::Error| std::io::Error::other(format!("generating certificates: {e}"));
    let ca_key = KeyPair::generate().map_err(err)?;
    let mut ca_params = CertificateParams::new(Vec::new()).map_err(err)?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    // A name of its own: a client holding another run's CA is told the issuer is unknown,
    // not that a signature is bad.
    ca_params.distinguished_name.push(
        DnType::CommonName,
        format!("stampede run CA {:08x}", rand::random::<u32>()),
    );
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca_cert = ca_params.self_signed(&ca_key).map_err(err)?;
    let issuer = rcgen::Issuer::new(ca_params, ca_key);
    let leaf = |names: Vec<String>, cn: &str| -> Result<(String, String), std::io::Error> {
        let key = KeyPair::generate().map_err(err)?;
        let mut p = CertificateParams::new(names).map_err(err)?;
        p.distinguished_name.push(DnType::CommonName, cn);
        let cert = p.signed_by(&key, &issuer).map_err(err)?;
        Ok((cert.pem(), key.serialize_pem()))
    };
    let (server_pem, server_key) = leaf(
        vec!["127.0.0.1".to_string(), "localhost".to_string()],
        "127.0.0.1",
    )?;
    let (client_pem, client_key) = leaf(Vec::new(), "stampede")?;
    let certs = RunCerts {
        ca: dir.join("ca.crt"),
        server_cert: dir.join("server.crt"),
        server_key: dir.join("server.key"),
        client_cert: dir.join("client.crt"),
        client_key: dir.join("client.key"),
    };
    write_private(&certs.ca, ca_cert.pem().as_bytes(), 0o644)?;
    write_private(&certs.server_cert, server_pem.as_bytes(), 0o644)?;
    write_private(&certs.server_key, server_key.as_bytes(), 0o600)?;
    write_private(&certs.client_cert, client_pem.as_bytes(), 0o644)?;
    write_private(&certs.client_key, client_key.as_bytes(), 0o600)?;
    Ok(certs)
}

fn write_private(path: &Path, bytes: &[u8], mode: u32) -> Result<(), std::io::Error> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .mode(mode)
        .open(path)?;
    f.write_all(bytes)
}

/// A one-off TLS connection to `127.0.0.1:port` verified against `ca` (readiness probes of
/// managed servers started with `--tls`).
pub async fn connect_loopback(
    port: u16,
    ca: &Path,
) -> Result<tokio_rustls::client::TlsStream<tokio::net::TcpStream>, String> {
    let roots = root_store(ca).map_err(|e| e.0)?;
    let config = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .map_err(|e| e.to_string())?;
    tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(
            ServerName::IpAddress(IpAddr::from([127, 0, 0, 1]).into()),
            tcp,
        )
        .await
        .map_err(|e| e.to_string())
}
