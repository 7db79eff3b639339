//! TLS with rustls, always with the **ring** provider (a second provider compiled in makes rustls
//! refuse to pick one, so every config here is built with [`provider`] explicitly).
//!
//! - PEM parsing through `rustls::pki_types::pem::PemObject`.
//! - The upstream client config: the kubeconfig's CA (or the system roots), its client
//!   certificate, or no verification at all for `insecure-skip-tls-verify`.
//! - [`ServerTls`]: the downstream server config from `server.tls_cert_file` / `tls_key_file` /
//!   `client_ca_file`, rebuilt when one of the files changes (checked at most every
//!   [`RELOAD_CHECK`]); a file that fails to load keeps the previous config and logs why.
//! - [`ClientIdentity`]: the user (subject CN) and groups (subject O) of a verified client
//!   certificate, as kube-apiserver's x509 authenticator reads them.
//!
//! Failures are typed ([`PemError`], [`ClientConfigError`], [`TlsFileError`]) and keep rustls's
//! cause, whose text each writes into its own once (so it is not also their `source()`: a printed
//! chain would say it twice). This module must not decide what an identity may do upstream
//! (that is [`crate::auth`]) nor read HTTP (the accept loop hands hyper the stream after the
//! handshake).

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use arc_swap::{ArcSwap, ArcSwapOption};
use parking_lot::Mutex;
use rustls::client::ResolvesClientCert;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, verify_tls12_signature, verify_tls13_signature};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::sign::CertifiedKey;
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, ServerConfig, SignatureScheme};
use tokio::net::TcpStream;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

/// The downstream certificate files are checked for changes at most this often.
pub const RELOAD_CHECK: Duration = Duration::from_secs(2);

/// A TLS handshake from a downstream client must finish within this.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The crypto provider every config is built with: ring.
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Why a PEM text holds no usable certificate or key.
#[derive(Debug, thiserror::Error)]
pub enum PemError {
    /// The text is not valid PEM.
    #[error("invalid PEM: {0}")]
    Invalid(rustls::pki_types::pem::Error),
    /// Valid PEM, but without a `CERTIFICATE` block.
    #[error("no PEM CERTIFICATE block found")]
    NoCertificate,
    /// Valid PEM, but without a private key block.
    #[error("no PEM PRIVATE KEY block found")]
    NoPrivateKey,
}

/// Every `CERTIFICATE` block of a PEM text (at least one).
pub fn certs_from_pem(pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, PemError> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(PemError::Invalid)?;
    if certs.is_empty() {
        return Err(PemError::NoCertificate);
    }
    Ok(certs)
}

/// The first private key (PKCS#8, PKCS#1 or SEC1) of a PEM text.
pub fn key_from_pem(pem: &[u8]) -> Result<PrivateKeyDer<'static>, PemError> {
    PrivateKeyDer::from_pem_slice(pem).map_err(|e| match e {
        rustls::pki_types::pem::Error::NoItemsFound => PemError::NoPrivateKey,
        e => PemError::Invalid(e),
    })
}

/// How the upstream's certificate is checked.
#[derive(Debug, Clone)]
pub enum ServerTrust {
    /// Against these CA certificates (kubeconfig `certificate-authority(-data)`, in-cluster
    /// `ca.crt`).
    Roots(Vec<CertificateDer<'static>>),
    /// Against the system's root store (a kubeconfig cluster without a CA).
    System,
    /// Not at all (`insecure-skip-tls-verify: true`); the handshake signature is still checked.
    Insecure,
}

/// A client certificate chain and its key.
pub struct Identity {
    /// The chain, leaf first.
    pub certs: Vec<CertificateDer<'static>>,
    /// The leaf's private key.
    pub key: PrivateKeyDer<'static>,
}

impl fmt::Debug for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Identity")
            .field("certs", &self.certs.len())
            .finish_non_exhaustive()
    }
}

impl Clone for Identity {
    fn clone(&self) -> Self {
        Identity {
            certs: self.certs.clone(),
            key: self.key.clone_key(),
        }
    }
}

/// Why the upstream client config cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum ClientConfigError {
    /// The provider offers no protocol version rustls accepts.
    #[error("{0}")]
    Protocols(rustls::Error),
    /// A configured CA certificate is unusable.
    #[error("CA certificate #{number}: {error}")]
    CaCertificate {
        /// 1-based position among the configured CA certificates.
        number: usize,
        /// Why rustls refused it.
        error: rustls::Error,
    },
    /// No CA is configured and the system has no usable root certificate.
    #[error(
        "no CA is configured and no system root certificates could be loaded{}",
        .error.as_ref().map(|e| format!(" ({e})")).unwrap_or_default()
    )]
    NoSystemRoots {
        /// The first error met while loading them, if any.
        error: Option<rustls_native_certs::Error>,
    },
    /// The client certificate and key do not form a usable identity.
    #[error("client certificate: {0}")]
    ClientCertificate(rustls::Error),
}

/// A rustls client config for the upstream, offering `alpn` (e.g. `h2`, `http/1.1`).
pub fn client_config(
    trust: &ServerTrust,
    identity: Option<&Identity>,
    alpn: &[&[u8]],
) -> Result<ClientConfig, ClientConfigError> {
    let builder = verifying(trust)?;
    let mut config = match identity {
        Some(id) => builder
            .with_client_auth_cert(id.certs.clone(), id.key.clone_key())
            .map_err(ClientConfigError::ClientCertificate)?,
        None => builder.with_no_client_auth(),
    };
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Ok(config)
}

/// A rustls client config for the upstream whose client certificate is whatever `identity`
/// holds at each handshake (an exec plugin's, which changes). TLS session resumption is off: a
/// resumed session would carry the identity of the handshake it resumes, not the current one.
pub fn client_config_rotating(
    trust: &ServerTrust,
    identity: Arc<RotatingIdentity>,
    alpn: &[&[u8]],
) -> Result<ClientConfig, ClientConfigError> {
    let mut config = verifying(trust)?.with_client_cert_resolver(identity);
    config.resumption = rustls::client::Resumption::disabled();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Ok(config)
}

/// The client config builder with `trust`'s verification of the upstream's certificate.
fn verifying(
    trust: &ServerTrust,
) -> Result<rustls::ConfigBuilder<ClientConfig, rustls::client::WantsClientCert>, ClientConfigError>
{
    let provider = provider();
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(ClientConfigError::Protocols)?;
    let builder = match trust {
        ServerTrust::Roots(certs) => {
            let mut roots = RootCertStore::empty();
            for (i, c) in certs.iter().enumerate() {
                roots
                    .add(c.clone())
                    .map_err(|error| ClientConfigError::CaCertificate {
                        number: i + 1,
                        error,
                    })?;
            }
            builder.with_root_certificates(roots)
        }
        ServerTrust::System => {
            let found = rustls_native_certs::load_native_certs();
            let mut roots = RootCertStore::empty();
            let (added, _) = roots.add_parsable_certificates(found.certs);
            if added == 0 {
                return Err(ClientConfigError::NoSystemRoots {
                    error: found.errors.into_iter().next(),
                });
            }
            builder.with_root_certificates(roots)
        }
        ServerTrust::Insecure => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(NoVerification(provider))),
    };
    Ok(builder)
}

/// The client certificate presented to the upstream at each new handshake, replaceable at any
/// time (an exec credential plugin's certificate, which it renews). Empty: no certificate.
#[derive(Default)]
pub struct RotatingIdentity {
    current: ArcSwapOption<CertifiedKey>,
}

impl fmt::Debug for RotatingIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RotatingIdentity")
            .field("set", &self.current.load().is_some())
            .finish()
    }
}

impl RotatingIdentity {
    /// Presents `key` from the next handshake on (`None`: no certificate).
    pub fn set(&self, key: Option<Arc<CertifiedKey>>) {
        self.current.store(key);
    }

    /// The certificate presented now.
    pub fn get(&self) -> Option<Arc<CertifiedKey>> {
        self.current.load_full()
    }
}

impl ResolvesClientCert for RotatingIdentity {
    fn resolve(
        &self,
        _root_hint_subjects: &[&[u8]],
        _sigschemes: &[SignatureScheme],
    ) -> Option<Arc<CertifiedKey>> {
        self.current.load_full()
    }

    /// Always: a certificate may be set at any time, and rustls keeps what client
    /// authentication needs only when this says so.
    fn has_certs(&self) -> bool {
        true
    }
}

/// A certificate chain and its key as rustls signs with them; refused when the key is not the
/// leaf's or its type is not supported.
pub fn certified_key(identity: &Identity) -> Result<CertifiedKey, rustls::Error> {
    CertifiedKey::from_der(
        identity.certs.clone(),
        identity.key.clone_key(),
        &provider(),
    )
}

/// `insecure-skip-tls-verify`: any certificate is accepted, but the peer must still prove it
/// holds the key of the certificate it sent.
#[derive(Debug)]
struct NoVerification(Arc<CryptoProvider>);

impl ServerCertVerifier for NoVerification {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
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
        verify_tls13_signature(
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

/// A downstream TLS file that could not be used; names the config key.
#[derive(Debug, thiserror::Error)]
#[error("{key} ({}): {problem}", path.display())]
pub struct TlsFileError {
    /// The config key that names the file, e.g. `server.tls_cert_file`.
    pub key: &'static str,
    /// The file.
    pub path: PathBuf,
    /// What is wrong with it.
    pub problem: TlsFileProblem,
}

/// What is wrong with a downstream TLS file.
#[derive(Debug, thiserror::Error)]
pub enum TlsFileProblem {
    /// It cannot be read.
    #[error("cannot read: {0}")]
    Read(io::Error),
    /// It holds no usable certificate or key.
    #[error("{0}")]
    Pem(PemError),
    /// rustls refused it (a CA certificate, the client verifier, the protocol versions).
    #[error("{0}")]
    Rejected(rustls::Error),
    /// The client verifier cannot be built from the client CA file.
    #[error("{0}")]
    ClientVerifier(rustls::server::VerifierBuilderError),
    /// The private key is not the certificate's.
    #[error("does not match the certificate: {0}")]
    KeyMismatch(rustls::Error),
}

/// Size and modification time: a file counts as changed when either differs.
type Stamp = Option<(SystemTime, u64)>;

fn stamp(path: &Path) -> Stamp {
    let m = std::fs::metadata(path).ok()?;
    Some((m.modified().ok()?, m.len()))
}

/// The downstream server's TLS: certificate, key and optional client CA, reloaded on change.
pub struct ServerTls {
    cert: PathBuf,
    key: PathBuf,
    client_ca: Option<PathBuf>,
    current: ArcSwap<ServerConfig>,
    reload: Mutex<Reload>,
}

struct Reload {
    checked: Instant,
    stamps: Vec<Stamp>,
}

impl fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerTls")
            .field("cert", &self.cert)
            .field("key", &self.key)
            .field("client_ca", &self.client_ca)
            .finish_non_exhaustive()
    }
}

impl ServerTls {
    /// Loads the files; an error names the key of the file at fault.
    pub fn load(
        cert: &Path,
        key: &Path,
        client_ca: Option<&Path>,
    ) -> Result<ServerTls, TlsFileError> {
        let stamps = Self::stamps_of(cert, key, client_ca);
        let config = build_server_config(cert, key, client_ca)?;
        Ok(ServerTls {
            cert: cert.to_path_buf(),
            key: key.to_path_buf(),
            client_ca: client_ca.map(Path::to_path_buf),
            current: ArcSwap::from_pointee(config),
            reload: Mutex::new(Reload {
                checked: Instant::now(),
                stamps,
            }),
        })
    }

    fn stamps_of(cert: &Path, key: &Path, client_ca: Option<&Path>) -> Vec<Stamp> {
        let mut v = vec![stamp(cert), stamp(key)];
        if let Some(ca) = client_ca {
            v.push(stamp(ca));
        }
        v
    }

    /// Whether client certificates are asked for (and verified against `client_ca_file`).
    pub fn verifies_clients(&self) -> bool {
        self.client_ca.is_some()
    }

    /// The config in force, reloading the files first if they changed (checked at most every
    /// [`RELOAD_CHECK`]). A reload that fails keeps the previous config and logs why.
    pub fn config(&self) -> Arc<ServerConfig> {
        self.maybe_reload(false);
        self.current.load_full()
    }

    /// Checks the files now, ignoring [`RELOAD_CHECK`]; returns whether a new config was loaded.
    pub fn reload_now(&self) -> bool {
        self.maybe_reload(true)
    }

    fn maybe_reload(&self, force: bool) -> bool {
        let mut r = self.reload.lock();
        if !force && r.checked.elapsed() < RELOAD_CHECK {
            return false;
        }
        r.checked = Instant::now();
        let stamps = Self::stamps_of(&self.cert, &self.key, self.client_ca.as_deref());
        if stamps == r.stamps {
            return false;
        }
        match build_server_config(&self.cert, &self.key, self.client_ca.as_deref()) {
            Ok(c) => {
                self.current.store(Arc::new(c));
                r.stamps = stamps;
                tracing::info!(cert = %self.cert.display(), "reloaded the serving certificate");
                true
            }
            Err(e) => {
                // Often a half-written pair (new certificate, old key): try again next time,
                // serving with the previous config meanwhile.
                tracing::warn!(error = %e, "cannot reload the serving certificate; keeping the previous one");
                false
            }
        }
    }

    /// The TLS handshake with a downstream client (bounded by [`HANDSHAKE_TIMEOUT`]), and the
    /// identity of its certificate if it sent one (already verified against the client CA).
    pub async fn accept(
        &self,
        tcp: TcpStream,
    ) -> io::Result<(TlsStream<TcpStream>, Option<ClientIdentity>)> {
        let acceptor = TlsAcceptor::from(self.config());
        let tls = tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp))
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "TLS handshake timed out"))??;
        let identity = tls
            .get_ref()
            .1
            .peer_certificates()
            .and_then(|c| c.first())
            .and_then(|leaf| ClientIdentity::from_der(leaf));
        Ok((tls, identity))
    }
}

/// The error for the file `path` named by the config key `key`.
fn file_error(key: &'static str, path: &Path) -> impl FnOnce(TlsFileProblem) -> TlsFileError {
    let path = path.to_path_buf();
    move |problem| TlsFileError { key, path, problem }
}

fn read_file(key: &'static str, path: &Path) -> Result<Vec<u8>, TlsFileError> {
    std::fs::read(path).map_err(|e| file_error(key, path)(TlsFileProblem::Read(e)))
}

fn build_server_config(
    cert: &Path,
    key: &Path,
    client_ca: Option<&Path>,
) -> Result<ServerConfig, TlsFileError> {
    const CERT: &str = "server.tls_cert_file";
    const KEY: &str = "server.tls_key_file";
    const CLIENT_CA: &str = "server.client_ca_file";
    let certs = certs_from_pem(&read_file(CERT, cert)?)
        .map_err(|e| file_error(CERT, cert)(TlsFileProblem::Pem(e)))?;
    let private = key_from_pem(&read_file(KEY, key)?)
        .map_err(|e| file_error(KEY, key)(TlsFileProblem::Pem(e)))?;
    let provider = provider();
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| file_error(CERT, cert)(TlsFileProblem::Rejected(e)))?;
    let builder = match client_ca {
        None => builder.with_no_client_auth(),
        Some(ca) => {
            let cas = certs_from_pem(&read_file(CLIENT_CA, ca)?)
                .map_err(|e| file_error(CLIENT_CA, ca)(TlsFileProblem::Pem(e)))?;
            let mut roots = RootCertStore::empty();
            for c in cas {
                roots
                    .add(c)
                    .map_err(|e| file_error(CLIENT_CA, ca)(TlsFileProblem::Rejected(e)))?;
            }
            // Clients without a certificate are let in (they may carry a bearer token); a
            // certificate that is sent must verify.
            let verifier =
                WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                    .allow_unauthenticated()
                    .build()
                    .map_err(|e| file_error(CLIENT_CA, ca)(TlsFileProblem::ClientVerifier(e)))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder
        .with_single_cert(certs, private)
        .map_err(|e| file_error(KEY, key)(TlsFileProblem::KeyMismatch(e)))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

/// Who a verified client certificate says its holder is: kube-apiserver's x509 authenticator
/// takes the subject's common name as the user name and its organizations as the groups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientIdentity {
    /// Subject CN.
    pub user: String,
    /// Subject O values, in order.
    pub groups: Vec<String>,
}

impl ClientIdentity {
    /// The identity in a DER certificate; `None` when it cannot be read or has no CN.
    pub fn from_der(cert: &[u8]) -> Option<ClientIdentity> {
        let (user, groups) = subject_cn_and_o(cert)?;
        let user = user.filter(|u| !u.is_empty())?;
        Some(ClientIdentity { user, groups })
    }
}

// ---- a minimal DER reader for the certificate subject -----------------------------------------

/// One DER element: (tag, contents, rest).
fn tlv(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (first as usize, rest)
    } else {
        let n = (first & 0x7f) as usize;
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let len = rest[..n].iter().fold(0usize, |a, &b| (a << 8) | b as usize);
        (len, &rest[n..])
    };
    if rest.len() < len {
        return None;
    }
    Some((tag, &rest[..len], &rest[len..]))
}

const SEQUENCE: u8 = 0x30;
const SET: u8 = 0x31;
const OID_CN: &[u8] = &[0x55, 0x04, 0x03];
const OID_O: &[u8] = &[0x55, 0x04, 0x0a];

/// The fields of a DER X.509 certificate's `TBSCertificate` after its optional version:
/// serialNumber, signature, issuer, validity, subject, …
fn tbs_fields(cert: &[u8]) -> Option<&[u8]> {
    let (tag, cert, _) = tlv(cert)?;
    (tag == SEQUENCE).then_some(())?;
    let (tag, tbs, _) = tlv(cert)?;
    (tag == SEQUENCE).then_some(())?;
    // version [0] EXPLICIT, optional
    match tbs.first() {
        Some(&0xa0) => Some(tlv(tbs)?.2),
        _ => Some(tbs),
    }
}

/// The subject's CN and O values of an X.509 certificate.
fn subject_cn_and_o(cert: &[u8]) -> Option<(Option<String>, Vec<String>)> {
    let mut rest = tbs_fields(cert)?;
    // serialNumber, signature, issuer, validity
    for _ in 0..4 {
        rest = tlv(rest)?.2;
    }
    let (tag, mut name, _) = tlv(rest)?;
    (tag == SEQUENCE).then_some(())?;
    let mut cn = None;
    let mut orgs = Vec::new();
    while !name.is_empty() {
        let (tag, mut rdn, next) = tlv(name)?;
        (tag == SET).then_some(())?;
        name = next;
        while !rdn.is_empty() {
            let (tag, atv, next) = tlv(rdn)?;
            (tag == SEQUENCE).then_some(())?;
            rdn = next;
            let (tag, oid, value) = tlv(atv)?;
            (tag == 0x06).then_some(())?;
            let (vtag, value, _) = tlv(value)?;
            let text = decode_string(vtag, value)?;
            if oid == OID_CN {
                cn = Some(text);
            } else if oid == OID_O {
                orgs.push(text);
            }
        }
    }
    Some((cn, orgs))
}

/// When an X.509 certificate (DER) stops being valid: its `notAfter`. `None` when it cannot be
/// read.
pub fn not_after(cert: &[u8]) -> Option<SystemTime> {
    let mut rest = tbs_fields(cert)?;
    // serialNumber, signature, issuer
    for _ in 0..3 {
        rest = tlv(rest)?.2;
    }
    let (tag, validity, _) = tlv(rest)?;
    (tag == SEQUENCE).then_some(())?;
    let after = tlv(validity)?.2;
    let (tag, time, _) = tlv(after)?;
    asn1_time(tag, time)
}

/// An X.509 UTCTime (`YYMMDDHHMMSSZ`, years 1950–2049) or GeneralizedTime (`YYYYMMDDHHMMSSZ`).
fn asn1_time(tag: u8, v: &[u8]) -> Option<SystemTime> {
    let s = std::str::from_utf8(v).ok()?;
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let t = s.get(r)?;
        t.bytes()
            .all(|b| b.is_ascii_digit())
            .then(|| t.parse().ok())?
    };
    let (year, rest) = match tag {
        0x17 => {
            let yy = num(0..2)?;
            (if yy >= 50 { 1900 + yy } else { 2000 + yy }, 2)
        }
        0x18 => (num(0..4)?, 4),
        _ => return None,
    };
    if s.len() != rest + 11 || !s.ends_with('Z') {
        return None;
    }
    let field = |i: usize| num(rest + 2 * i..rest + 2 * i + 2);
    let (month, day, hour, min, sec) = (field(0)?, field(1)?, field(2)?, field(3)?, field(4)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || min > 59 || sec > 60 {
        return None;
    }
    // Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + hour * 3600 + min * 60 + sec;
    match u64::try_from(secs) {
        Ok(s) => SystemTime::UNIX_EPOCH.checked_add(Duration::from_secs(s)),
        Err(_) => SystemTime::UNIX_EPOCH.checked_sub(Duration::from_secs(secs.unsigned_abs())),
    }
}

/// The directory string types certificates use.
fn decode_string(tag: u8, v: &[u8]) -> Option<String> {
    match tag {
        // UTF8String, PrintableString, IA5String, VisibleString
        0x0c | 0x13 | 0x16 | 0x1a => String::from_utf8(v.to_vec()).ok(),
        // TeletexString: treated as Latin-1, as Go does
        0x14 => Some(v.iter().map(|&b| b as char).collect()),
        // BMPString: UTF-16BE
        0x1e => {
            let units: Vec<u16> = v
                .chunks(2)
                .map(|c| (c.len() == 2).then(|| u16::from_be_bytes([c[0], c[1]])))
                .collect::<Option<Vec<u16>>>()?;
            String::from_utf16(&units).ok()
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::{CertificateParams, DistinguishedName, DnType, KeyPair};

    fn cert_with(dn: DistinguishedName) -> Vec<u8> {
        let key = KeyPair::generate().unwrap();
        let mut p = CertificateParams::new(vec!["x.example".to_string()]).unwrap();
        p.distinguished_name = dn;
        p.self_signed(&key).unwrap().der().to_vec()
    }

    #[test]
    fn identity_is_cn_and_organization() {
        let mut dn = DistinguishedName::new();
        dn.push(DnType::OrganizationName, "system:masters");
        dn.push(DnType::CommonName, "alice");
        let id = ClientIdentity::from_der(&cert_with(dn)).unwrap();
        assert_eq!(id.user, "alice");
        assert_eq!(id.groups, ["system:masters"]);
    }

    fn der(tag: u8, content: &[u8]) -> Vec<u8> {
        let mut v = vec![tag];
        if content.len() < 0x80 {
            v.push(content.len() as u8);
        } else {
            v.extend([0x82, (content.len() >> 8) as u8, content.len() as u8]);
        }
        v.extend_from_slice(content);
        v
    }

    fn rdn(oid: &[u8], tag: u8, value: &str) -> Vec<u8> {
        let atv = [der(0x06, oid), der(tag, value.as_bytes())].concat();
        der(SET, &der(SEQUENCE, &atv))
    }

    /// rcgen keeps one value per attribute type; kube allows several O values (groups).
    #[test]
    fn every_organization_is_a_group() {
        let name = [
            rdn(OID_O, 0x0c, "system:masters"),
            rdn(OID_CN, 0x13, "bob"),
            rdn(OID_O, 0x13, "dev"),
            rdn(&[0x55, 0x04, 0x06], 0x13, "DE"),
        ]
        .concat();
        let tbs = [
            der(0xa0, &der(0x02, &[2])),
            der(0x02, &[1]),
            der(SEQUENCE, &[]),
            der(SEQUENCE, &[]),
            der(SEQUENCE, &[]),
            der(SEQUENCE, &name),
        ]
        .concat();
        let cert = der(SEQUENCE, &der(SEQUENCE, &tbs));
        let id = ClientIdentity::from_der(&cert).unwrap();
        assert_eq!(id.user, "bob");
        assert_eq!(id.groups, ["system:masters", "dev"]);
    }

    #[test]
    fn no_cn_is_no_identity() {
        let mut dn = DistinguishedName::new();
        dn.push(DnType::OrganizationName, "dev");
        assert_eq!(ClientIdentity::from_der(&cert_with(dn)), None);
        assert_eq!(ClientIdentity::from_der(b"\x30\x03\x02\x01"), None);
        assert_eq!(ClientIdentity::from_der(b""), None);
    }

    #[test]
    fn pem_errors_say_what_is_missing() {
        assert!(
            certs_from_pem(b"hello")
                .unwrap_err()
                .to_string()
                .contains("no PEM CERTIFICATE")
        );
        assert!(
            key_from_pem(b"")
                .unwrap_err()
                .to_string()
                .contains("no PEM PRIVATE KEY")
        );
    }

    #[test]
    fn not_after_is_read() {
        let key = KeyPair::generate().unwrap();
        for (y, m, d) in [(2001, 1, 1), (2049, 12, 31), (2050, 1, 1), (4000, 2, 29)] {
            let mut p = CertificateParams::new(vec!["x.example".to_string()]).unwrap();
            p.not_after = rcgen::date_time_ymd(y, m, d);
            let der = p.self_signed(&key).unwrap().der().to_vec();
            let want = p.not_after.unix_timestamp();
            let got = not_after(&der).unwrap();
            let got = got
                .duration_since(SystemTime::UNIX_EPOCH)
                .unwrap()
                .as_secs();
            assert_eq!(got as i64, want, "{y}-{m}-{d}");
        }
        assert_eq!(not_after(b"\x30\x03\x02\x01"), None);
        assert!(asn1_time(0x17, b"491231235959Z").is_some());
        assert_eq!(asn1_time(0x17, b"4912312359Z"), None);
        assert_eq!(asn1_time(0x18, b"20001301000000Z"), None);
    }

    #[test]
    fn bmp_strings_decode() {
        assert_eq!(
            decode_string(0x1e, &[0, b'h', 0, b'i']).as_deref(),
            Some("hi")
        );
        assert_eq!(decode_string(0x1e, &[0, b'h', 0]), None);
    }
}
