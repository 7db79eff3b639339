//! TLS for the bench: the transports a case runs over, a throw-away CA with a serving
//! certificate for `127.0.0.1` and `localhost` made with rcgen at the start of a run, and the
//! clients' rustls configurations that trust that CA (ALPN `http/1.1` or `h2`).
//!
//! It writes the certificate and key files the servers are pointed at (watchmux's
//! `server.tls_cert_file`, the limit program's and the simulator's `--tls-cert-file`, nginx's
//! `ssl_certificate`) and nothing else; it serves and measures nothing. rustls runs with the
//! `ring` provider, as everywhere in the workspace.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::{TlsAcceptor, TlsConnector};

use super::BenchError;

/// How a case's clients talk to the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Transport {
    /// HTTP/1.1 over plain TCP.
    Plain,
    /// HTTP/1.1 over TLS (ALPN `http/1.1`).
    Tls,
    /// HTTP/2 over TLS (ALPN `h2`), several watch streams per connection.
    H2,
}

impl Transport {
    /// Name on the command line and in the CSVs.
    pub fn name(self) -> &'static str {
        match self {
            Transport::Plain => "plain",
            Transport::Tls => "tls",
            Transport::H2 => "h2",
        }
    }

    /// The suffix of a case's name in the reports (see [`case`]): none for plain HTTP/1.1.
    pub fn label(self) -> &'static str {
        match self {
            Transport::Plain => "",
            Transport::Tls => "TLS",
            Transport::H2 => "h2",
        }
    }

    /// Whether the target must serve TLS.
    pub fn is_tls(self) -> bool {
        self != Transport::Plain
    }
}

impl fmt::Display for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Transport {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "plain" => Ok(Transport::Plain),
            "tls" => Ok(Transport::Tls),
            "h2" => Ok(Transport::H2),
            other => Err(format!("unknown transport {other:?} (plain, tls, h2)")),
        }
    }
}

/// The name of case `base` over `t`: `base` itself for plain HTTP/1.1 (the names every report
/// had before TLS), `base · TLS` and `base · h2` otherwise.
pub fn case(base: &str, t: Transport) -> String {
    match t {
        Transport::Plain => base.to_string(),
        other => super::report::variant_case(base, other.label()),
    }
}

/// A run's CA and serving certificate, and the client configurations that trust it.
pub struct Pki {
    /// The serving certificate (PEM), valid for `127.0.0.1` and `localhost`.
    pub cert_file: PathBuf,
    /// Its private key (PEM).
    pub key_file: PathBuf,
    /// The CA's certificate (PEM), for clients other than the bench's own.
    pub ca_file: PathBuf,
    h1: TlsConnector,
    h2: TlsConnector,
}

impl fmt::Debug for Pki {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pki")
            .field("cert_file", &self.cert_file)
            .field("key_file", &self.key_file)
            .finish_non_exhaustive()
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn setup(what: &str, e: impl fmt::Display) -> BenchError {
    BenchError::Setup(format!("TLS: {what}: {e}"))
}

impl Pki {
    /// Makes a CA and a serving certificate signed by it, writes `ca.crt`, `tls.crt` and
    /// `tls.key` into `dir`, and builds the clients' configurations.
    pub fn generate(dir: &Path) -> Result<Pki, BenchError> {
        let ca_key = KeyPair::generate().map_err(|e| setup("CA key", e))?;
        let mut ca = CertificateParams::default();
        ca.distinguished_name = DistinguishedName::new();
        ca.distinguished_name
            .push(DnType::CommonName, "watchmux-bench CA");
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca_cert = ca.self_signed(&ca_key).map_err(|e| setup("CA", e))?;
        let issuer = Issuer::new(ca, ca_key);
        let mut leaf = CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".into()])
            .map_err(|e| setup("serving certificate names", e))?;
        leaf.distinguished_name = DistinguishedName::new();
        leaf.distinguished_name
            .push(DnType::CommonName, "127.0.0.1");
        leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let leaf_key = KeyPair::generate().map_err(|e| setup("serving key", e))?;
        let leaf_cert = leaf
            .signed_by(&leaf_key, &issuer)
            .map_err(|e| setup("serving certificate", e))?;
        let write = |name: &str, pem: &str| {
            let p = dir.join(name);
            std::fs::write(&p, pem)
                .map_err(|e| BenchError::io(format!("writing {}", p.display()), e))?;
            Ok::<_, BenchError>(p)
        };
        let ca_pem = ca_cert.pem();
        let ca_file = write("ca.crt", &ca_pem)?;
        let cert_file = write("tls.crt", &leaf_cert.pem())?;
        let key_file = write("tls.key", &leaf_key.serialize_pem())?;
        let mut roots = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
            roots
                .add(c.map_err(|e| setup("CA PEM", e))?)
                .map_err(|e| setup("CA", e))?;
        }
        let roots = Arc::new(roots);
        let client = |alpn: &[u8]| {
            let mut config = rustls::ClientConfig::builder_with_provider(provider())
                .with_safe_default_protocol_versions()
                .map_err(|e| setup("client", e))?
                .with_root_certificates(roots.clone())
                .with_no_client_auth();
            config.alpn_protocols = vec![alpn.to_vec()];
            Ok::<_, BenchError>(TlsConnector::from(Arc::new(config)))
        };
        Ok(Pki {
            cert_file,
            key_file,
            ca_file,
            h1: client(b"http/1.1")?,
            h2: client(b"h2")?,
        })
    }

    /// A connector offering ALPN `http/1.1` (for [`Transport::Tls`]) or `h2` ([`Transport::H2`]);
    /// `None` for plain TCP.
    pub fn connector(&self, t: Transport) -> Option<TlsConnector> {
        match t {
            Transport::Plain => None,
            Transport::Tls => Some(self.h1.clone()),
            Transport::H2 => Some(self.h2.clone()),
        }
    }
}

/// A rustls server configuration from a PEM certificate chain and key, offering `alpn` (the
/// limit program offers `http/1.1` only).
pub fn acceptor(cert_file: &Path, key_file: &Path, alpn: &[&[u8]]) -> Result<TlsAcceptor, String> {
    let read = |p: &Path| std::fs::read(p).map_err(|e| format!("reading {}: {e}", p.display()));
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&read(cert_file)?)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{}: {e}", cert_file.display()))?;
    if certs.is_empty() {
        return Err(format!("{}: no PEM CERTIFICATE block", cert_file.display()));
    }
    let key = PrivateKeyDer::from_pem_slice(&read(key_file)?)
        .map_err(|e| format!("{}: {e}", key_file.display()))?;
    let mut config = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| format!("{}: {e}", key_file.display()))?;
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Ok(TlsAcceptor::from(Arc::new(config)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_client_trusting_the_ca_reaches_a_server_with_its_certificate() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let dir = tempfile::tempdir().unwrap();
        let pki = Pki::generate(dir.path()).unwrap();
        let acc = acceptor(&pki.cert_file, &pki.key_file, &[b"h2", b"http/1.1"]).unwrap();
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        tokio::spawn(async move {
            for _ in 0..2 {
                let (s, _) = l.accept().await.unwrap();
                let mut s = acc.accept(s).await.unwrap();
                let alpn = s.get_ref().1.alpn_protocol().unwrap_or_default().to_vec();
                s.write_all(&alpn).await.unwrap();
                s.shutdown().await.unwrap();
            }
        });
        for t in [Transport::Tls, Transport::H2] {
            let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
            let name = rustls::pki_types::ServerName::IpAddress(addr.ip().into());
            let mut s = pki.connector(t).unwrap().connect(name, tcp).await.unwrap();
            let mut got = Vec::new();
            s.read_to_end(&mut got).await.unwrap();
            let want: &[u8] = if t == Transport::H2 {
                b"h2"
            } else {
                b"http/1.1"
            };
            assert_eq!(got, want);
        }
        assert!(pki.connector(Transport::Plain).is_none());
        assert_eq!(case("10", Transport::Plain), "10");
        assert_eq!(case("10", Transport::Tls), "10 · TLS");
    }
}
