//! The simulator's optional TLS front, for tests of watchmux's upstream TLS: a serving
//! certificate, optionally a client CA (a client certificate is then required, as
//! kube-apiserver's `--client-ca-file` verifies them), and optionally a required bearer token
//! (a request without it gets kube's 401 Status). The plain-HTTP path is untouched when
//! [`super::SimConfig::tls`] is `None`, unless a token is later required with
//! [`super::Simulator::set_bearer_token`], which applies on plain HTTP too.
//!
//! Client certificates are verified, not mapped to identities; per-user authentication and
//! authorization is [`super::authz`]'s. Each verified client certificate is recorded, in the order
//! of the handshakes ([`super::Simulator::client_certificates`]), for tests of clients that
//! rotate theirs.

use std::fmt;
use std::sync::Arc;

use http::header::AUTHORIZATION;
use http::{Request, Response};
use hyper::body::Incoming;
use parking_lot::RwLock;
use rustls::RootCertStore;
use rustls::server::WebPkiClientVerifier;
use tokio::net::TcpStream;
use tokio_rustls::TlsAcceptor;

use kube_wire::response::{Body, status_response};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// A client's TLS handshake must finish within this (as watchmux's downstream bound).
const HANDSHAKE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// A connection the HTTP server runs on: plain TCP or TLS over it.
pub trait Io: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static> Io for T {}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn certs_from_pem(pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs: Vec<_> = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("invalid PEM: {e}"))?;
    if certs.is_empty() {
        return Err("no PEM CERTIFICATE block".into());
    }
    Ok(certs)
}

fn key_from_pem(pem: &[u8]) -> Result<PrivateKeyDer<'static>, String> {
    PrivateKeyDer::from_pem_slice(pem).map_err(|e| format!("invalid PEM private key: {e}"))
}

/// TLS settings of the simulator.
#[derive(Clone, Default)]
pub struct SimTls {
    /// Serving certificate chain, PEM.
    pub cert_pem: String,
    /// Its private key, PEM.
    pub key_pem: String,
    /// CA that client certificates must chain to; `Some` requires a client certificate.
    pub client_ca_pem: Option<String>,
    /// The bearer token every request must carry (changeable at run time with
    /// [`super::Simulator::set_bearer_token`]).
    pub bearer_token: Option<String>,
}

impl fmt::Debug for SimTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimTls")
            .field("client_ca", &self.client_ca_pem.is_some())
            .field("bearer_token", &self.bearer_token.is_some())
            .finish_non_exhaustive()
    }
}

/// The rustls acceptor for `tls`.
pub fn acceptor(tls: &SimTls) -> Result<TlsAcceptor, String> {
    let certs = certs_from_pem(tls.cert_pem.as_bytes()).map_err(|e| format!("cert_pem: {e}"))?;
    let key = key_from_pem(tls.key_pem.as_bytes()).map_err(|e| format!("key_pem: {e}"))?;
    let builder = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?;
    let builder = match &tls.client_ca_pem {
        None => builder.with_no_client_auth(),
        Some(ca) => {
            let mut roots = RootCertStore::empty();
            for c in certs_from_pem(ca.as_bytes()).map_err(|e| format!("client_ca_pem: {e}"))? {
                roots.add(c).map_err(|e| format!("client_ca_pem: {e}"))?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
                .build()
                .map_err(|e| format!("client_ca_pem: {e}"))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder
        .with_single_cert(certs, key)
        .map_err(|e| format!("key_pem: {e}"))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// The connection's byte stream: TLS after a handshake when `acceptor` is set, else the TCP
/// stream itself. `None` when the handshake fails (logged at debug, like kube-apiserver's
/// `http: TLS handshake error`). The client's certificate, if it sent one, is recorded in `auth`.
pub async fn accept(
    acceptor: Option<&TlsAcceptor>,
    tcp: TcpStream,
    auth: &SimAuth,
) -> Option<Box<dyn Io>> {
    let Some(acceptor) = acceptor else {
        return Some(Box::new(tcp));
    };
    let peer = tcp.peer_addr().ok();
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
        Ok(Ok(s)) => {
            if let Some(leaf) = s.get_ref().1.peer_certificates().and_then(|c| c.first()) {
                auth.client_certificates.lock().push(leaf.to_vec());
            }
            Some(Box::new(s))
        }
        Ok(Err(e)) => {
            tracing::debug!(?peer, error = %e, "simulator: TLS handshake error");
            None
        }
        Err(_) => None,
    }
}

/// The bearer token the simulator requires, if any.
#[derive(Debug, Default)]
pub struct SimAuth {
    token: RwLock<Option<String>>,
    /// The leaf (DER) of each verified client certificate, one per handshake.
    client_certificates: parking_lot::Mutex<Vec<Vec<u8>>>,
}

impl SimAuth {
    /// Requires `token` (or nothing, for `None`).
    pub fn new(token: Option<String>) -> SimAuth {
        SimAuth {
            token: RwLock::new(token),
            client_certificates: parking_lot::Mutex::new(Vec::new()),
        }
    }

    /// Changes the required token.
    pub fn set(&self, token: Option<String>) {
        *self.token.write() = token;
    }

    /// The leaf certificate (DER) each client presented, in the order of the handshakes.
    pub fn client_certificates(&self) -> Vec<Vec<u8>> {
        self.client_certificates.lock().clone()
    }

    /// kube's 401 when a token is required and `req` does not carry it.
    pub fn check(&self, req: &Request<Incoming>) -> Option<Response<Body>> {
        let want = self.token.read();
        let want = want.as_deref()?;
        let got = req
            .headers()
            .get(AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        if got == Some(want) {
            return None;
        }
        Some(status_response(&kube_wire::access::unauthorized()))
    }
}
