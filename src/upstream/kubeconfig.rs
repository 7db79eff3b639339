//! Where the upstream is and how watchmux proves who it is there.
//!
//! One of, in this order:
//! 1. `upstream.in_cluster = true`: the pod's service account through kube's
//!    `Config::incluster()` (`KUBERNETES_SERVICE_HOST`/`_PORT`, `ca.crt`, and the token file,
//!    re-read when the kubelet rotates it).
//! 2. `upstream.kubeconfig`: that file, through kube's loader (`Kubeconfig::read_from`, then
//!    `Config::from_custom_kubeconfig` with `upstream.context` or the `current-context`).
//! 3. `upstream.url`: that URL, no credentials (an `https://` URL is verified against the
//!    system's root certificates).
//! 4. Otherwise the `KUBECONFIG` environment variable (a list of files, merged as kubectl does).
//!
//! From the kubeconfig watchmux takes the cluster's `server`, `certificate-authority(-data)`,
//! `insecure-skip-tls-verify` and `tls-server-name`, and the user's `client-certificate(-data)` /
//! `client-key(-data)`, `token`, `tokenFile` (re-read when it changes; it wins over `token`, as in
//! client-go) or `username`/`password`, or its `exec` credential plugin (handed on as it is, with
//! the user's name, to [`super::exec`], which runs it; as in client-go it is not used when the
//! user also has a token, basic-auth or client certificate). Auth-provider plugins are refused
//! with a message saying so, rather than connecting without credentials.
//!
//! Reads files, never the network: it must not connect (the client in [`super`] does).

use std::path::{Path, PathBuf};

use base64::Engine;
use futures_util::FutureExt;
use kube::config::{AuthInfo, KubeConfigOptions, Kubeconfig, KubeconfigError};
use secrecy::ExposeSecret;

use super::exec::ExecConfigError;
use crate::auth::{Credentials, CredentialsError, TokenError};
use crate::config::UpstreamConfig;
use crate::tls::{
    ClientConfigError, Identity, PemError, ServerTrust, certs_from_pem, key_from_pem,
};

/// The upstream's address, how to verify it, and watchmux's credentials.
#[derive(Debug)]
pub struct Resolved {
    /// The server URL, `http://` or `https://`.
    pub url: http::Uri,
    /// How the server certificate is verified (https only).
    pub trust: ServerTrust,
    /// The name the server certificate must carry instead of the URL's host
    /// (`tls-server-name`).
    pub server_name: Option<String>,
    /// watchmux's client certificate.
    pub identity: Option<Identity>,
    /// watchmux's token or basic-auth credentials.
    pub credentials: Option<Credentials>,
    /// The user's exec credential plugin (when it has no other credentials).
    pub exec: Option<ExecUser>,
    /// Where all this came from, for the log and errors: `upstream.kubeconfig (/path)`.
    pub origin: String,
}

/// A kubeconfig user whose credentials come from an exec plugin.
#[derive(Debug, Clone)]
pub struct ExecUser {
    /// The user entry's name.
    pub user: String,
    /// Its `exec` (a relative command already made absolute against the kubeconfig's folder,
    /// the cluster filled in with `provideClusterInfo`).
    pub config: kube::config::ExecConfig,
}

/// Why the upstream connection settings could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    /// Nothing names an upstream.
    #[error(
        "no upstream is configured: set upstream.url, upstream.kubeconfig or upstream.in_cluster, \
         or the KUBECONFIG environment variable"
    )]
    NotConfigured,
    /// The kubeconfig, service account or one of the files it names is unusable.
    #[error("{origin}: {source}")]
    Invalid {
        /// `upstream.kubeconfig (/path)`, `KUBECONFIG (...)`, `upstream.in_cluster`.
        origin: String,
        /// What is wrong.
        #[source]
        source: SetupError,
    },
}

/// What is wrong with the upstream connection settings (the text follows their origin).
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// The in-cluster service account cannot be loaded.
    #[error("{0}")]
    InCluster(#[source] kube::config::InClusterError),
    /// The kubeconfig cannot be read, parsed or resolved.
    #[error("{0}")]
    Kubeconfig(#[source] kube::config::KubeconfigError),
    /// `upstream.context` names a context the kubeconfig does not have.
    #[error("upstream.context {context:?} is not a context of this kubeconfig ({known})")]
    UnknownContext {
        /// The context asked for.
        context: String,
        /// `it has a, b` or `it has none`.
        known: String,
    },
    /// No `upstream.context` and no `current-context`.
    #[error("no current-context; set upstream.context ({known})")]
    NoCurrentContext {
        /// `it has a, b` or `it has none`.
        known: String,
    },
    /// kube's loader wanted to wait (it never does: it reads files synchronously).
    #[error("the kubeconfig loader did not complete")]
    LoaderPending,
    /// The cluster's `server` is not `http://` or `https://`.
    #[error("server {url:?} is not an http(s) URL")]
    NotHttp {
        /// The server URL.
        url: String,
    },
    /// The user's exec credential plugin cannot be used.
    #[error(transparent)]
    Exec(#[from] ExecConfigError),
    /// The user uses an auth-provider.
    #[error(
        "the user uses the {name:?} auth-provider, which watchmux does not support; give \
         watchmux a token, tokenFile or client certificate instead"
    )]
    AuthProvider {
        /// The provider's name.
        name: String,
    },
    /// A `*-data` value is not base64.
    #[error("{what}-data is not valid base64: {source}")]
    Base64 {
        /// `client-certificate` or `client-key`.
        what: &'static str,
        /// The decoding error.
        #[source]
        source: base64::DecodeError,
    },
    /// A file the user names cannot be read.
    #[error("{what} {file}: cannot read: {source}")]
    ReadFile {
        /// `client-certificate` or `client-key`.
        what: &'static str,
        /// The file as named.
        file: String,
        /// The read error.
        #[source]
        source: std::io::Error,
    },
    /// `client-certificate` without `client-key`.
    #[error("client-certificate is set but client-key is not")]
    CertificateWithoutKey,
    /// `client-key` without `client-certificate`.
    #[error("client-key is set but client-certificate is not")]
    KeyWithoutCertificate,
    /// The client certificate's PEM is unusable.
    #[error("client-certificate: {0}")]
    ClientCertificate(#[source] PemError),
    /// The client key's PEM is unusable.
    #[error("client-key: {0}")]
    ClientKey(#[source] PemError),
    /// The user's `token` cannot be sent.
    #[error("token: {0}")]
    Token(#[source] TokenError),
    /// The user's `tokenFile` or `username`/`password` cannot be used.
    #[error(transparent)]
    Credentials(#[from] CredentialsError),
    /// `tls-server-name` is not a DNS name or IP address.
    #[error("tls-server-name {name:?}: {source}")]
    ServerName {
        /// The configured name.
        name: String,
        /// Why it is not a server name.
        #[source]
        source: rustls::pki_types::InvalidDnsNameError,
    },
    /// The TLS client config cannot be built from these settings.
    #[error(transparent)]
    Tls(#[from] ClientConfigError),
}

/// Resolves `config` into an upstream address and credentials. Reads files; does not connect.
pub fn resolve(config: &UpstreamConfig) -> Result<Resolved, ResolveError> {
    if config.in_cluster {
        let origin = "upstream.in_cluster (the pod's service account)".to_string();
        let kc =
            kube::Config::incluster().map_err(|e| invalid(&origin, SetupError::InCluster(e)))?;
        return from_kube(kc, origin);
    }
    if let Some(path) = &config.kubeconfig {
        let origin = format!("upstream.kubeconfig ({})", path.display());
        let kc = read_kubeconfig(path).map_err(|e| invalid(&origin, SetupError::Kubeconfig(e)))?;
        return load(kc, config.context.as_deref(), origin);
    }
    if let Some(url) = &config.url {
        return Ok(Resolved {
            url: url.clone(),
            trust: ServerTrust::System,
            server_name: None,
            identity: None,
            credentials: None,
            exec: None,
            origin: "upstream.url".to_string(),
        });
    }
    match std::env::var_os("KUBECONFIG").filter(|v| !v.is_empty()) {
        Some(v) => {
            let origin = format!("KUBECONFIG ({})", v.to_string_lossy());
            let kc = kubeconfig_from_env(&v)
                .map_err(|e| invalid(&origin, SetupError::Kubeconfig(e)))?
                .ok_or(ResolveError::NotConfigured)?;
            load(kc, config.context.as_deref(), origin)
        }
        None => Err(ResolveError::NotConfigured),
    }
}

/// kube's `Kubeconfig::read_from`, except for a file its reader panics on (kube-client 5.0's
/// `read_path` indexes past the end of a file that starts with a UTF-16 byte order mark and has
/// an odd number of bytes after it; found by fuzzing): that one gets the error kube gives for
/// UTF-16 it cannot decode.
fn read_kubeconfig(path: &Path) -> Result<Kubeconfig, KubeconfigError> {
    if let Some(order) = odd_utf16(path) {
        let e = std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("Invalid UTF-16 {order}"),
        );
        return Err(KubeconfigError::ReadConfig(e, path.to_path_buf()));
    }
    Kubeconfig::read_from(path)
}

/// `LE` or `BE` when `path` is a regular file that starts with that UTF-16 byte order mark and
/// has an odd number of bytes after it. Only regular files are looked at: reading a pipe here
/// would take what kube's reader then reads.
fn odd_utf16(path: &Path) -> Option<&'static str> {
    use std::io::Read;
    let meta = std::fs::metadata(path).ok().filter(|m| m.is_file())?;
    // The mark is two bytes: an odd rest is an odd length.
    if meta.len() % 2 == 0 {
        return None;
    }
    let mut mark = [0u8; 2];
    std::fs::File::open(path).ok()?.read_exact(&mut mark).ok()?;
    match mark {
        [0xFF, 0xFE] => Some("LE"),
        [0xFE, 0xFF] => Some("BE"),
        _ => None,
    }
}

/// kube's `Kubeconfig::from_env` for the value `v` of `KUBECONFIG` (a list of files, merged as
/// kubectl merges them; none: `None`), each file read by [`read_kubeconfig`].
fn kubeconfig_from_env(v: &std::ffi::OsStr) -> Result<Option<Kubeconfig>, KubeconfigError> {
    let paths: Vec<PathBuf> = std::env::split_paths(v)
        .filter(|p| !p.as_os_str().is_empty())
        .collect();
    if paths.is_empty() {
        return Ok(None);
    }
    paths
        .iter()
        .try_fold(Kubeconfig::default(), |merged, p| {
            read_kubeconfig(p).and_then(|c| merged.merge(c))
        })
        .map(Some)
}

fn invalid(origin: &str, source: SetupError) -> ResolveError {
    ResolveError::Invalid {
        origin: origin.to_string(),
        source,
    }
}

/// A parsed kubeconfig, with `context` or its current context.
fn load(kc: Kubeconfig, context: Option<&str>, origin: String) -> Result<Resolved, ResolveError> {
    let known = || {
        let v: Vec<&str> = kc.contexts.iter().map(|c| c.name.as_str()).collect();
        if v.is_empty() {
            "it has none".to_string()
        } else {
            format!("it has {}", v.join(", "))
        }
    };
    let chosen = match context {
        Some(c) => {
            if !kc.contexts.iter().any(|n| n.name == c) {
                return Err(invalid(
                    &origin,
                    SetupError::UnknownContext {
                        context: c.to_string(),
                        known: known(),
                    },
                ));
            }
            c.to_string()
        }
        None => match kc.current_context.as_deref().filter(|c| !c.is_empty()) {
            Some(c) => c.to_string(),
            None => {
                return Err(invalid(
                    &origin,
                    SetupError::NoCurrentContext { known: known() },
                ));
            }
        },
    };
    let origin = format!("{origin}, context {chosen:?}");
    let user = kc
        .contexts
        .iter()
        .find(|c| c.name == chosen)
        .and_then(|c| c.context.as_ref()?.user.clone())
        .unwrap_or_default();
    let options = KubeConfigOptions {
        context: Some(chosen),
        ..KubeConfigOptions::default()
    };
    // kube's loader is async in signature only: it reads files synchronously and never waits.
    let mut config = kube::Config::from_custom_kubeconfig(kc, &options)
        .now_or_never()
        .ok_or_else(|| invalid(&origin, SetupError::LoaderPending))?
        .map_err(|e| invalid(&origin, SetupError::Kubeconfig(e)))?;
    let exec = config.auth_info.exec.take();
    let mut resolved = from_kube(config, origin)?;
    resolved.exec = exec_user(&resolved, user, exec);
    Ok(resolved)
}

/// The user's exec plugin, unless it has other credentials: client-go then ignores the plugin.
fn exec_user(
    resolved: &Resolved,
    user: String,
    exec: Option<kube::config::ExecConfig>,
) -> Option<ExecUser> {
    let config = exec?;
    if resolved.identity.is_some() || resolved.credentials.is_some() {
        tracing::warn!(origin = %resolved.origin, %user, "the user has a token, basic-auth or client certificate besides its exec plugin: the plugin is not run (as in client-go)");
        return None;
    }
    Some(ExecUser { user, config })
}

/// The parts of kube's resolved `Config` that watchmux uses.
fn from_kube(c: kube::Config, origin: String) -> Result<Resolved, ResolveError> {
    let https = match c.cluster_url.scheme_str() {
        Some("https") => true,
        Some("http") => false,
        _ => {
            return Err(invalid(
                &origin,
                SetupError::NotHttp {
                    url: c.cluster_url.to_string(),
                },
            ));
        }
    };
    let trust = if c.accept_invalid_certs {
        if https {
            tracing::warn!(%origin, "insecure-skip-tls-verify: the upstream's certificate is not verified");
        }
        ServerTrust::Insecure
    } else if let Some(roots) = &c.root_cert {
        ServerTrust::Roots(roots.iter().map(|d| d.clone().into()).collect())
    } else {
        ServerTrust::System
    };
    let user = &c.auth_info;
    if let Some(p) = &user.auth_provider {
        return Err(invalid(
            &origin,
            SetupError::AuthProvider {
                name: p.name.clone(),
            },
        ));
    }
    if user.impersonate.is_some() || user.impersonate_groups.is_some() {
        tracing::warn!(%origin, "the user's `as`/`as-groups` impersonation is ignored");
    }
    if c.proxy_url.is_some() {
        tracing::warn!(%origin, "proxy-url / HTTPS_PROXY is not supported: connecting to the upstream directly");
    }
    let identity = identity(user).map_err(|e| invalid(&origin, e))?;
    let credentials = credentials(user).map_err(|e| invalid(&origin, e))?;
    if !https && identity.is_some() {
        tracing::warn!(%origin, "the server is http://: the client certificate is not used");
    }
    Ok(Resolved {
        url: c.cluster_url,
        trust,
        server_name: c.tls_server_name,
        identity,
        credentials,
        exec: None,
        origin,
    })
}

/// `*-data` (base64) wins over the file, as in kube and client-go.
fn data_or_file(
    what: &'static str,
    data: Option<&str>,
    file: Option<&str>,
) -> Result<Option<Vec<u8>>, SetupError> {
    if let Some(d) = data {
        let d: String = d.split_ascii_whitespace().collect();
        return base64::engine::general_purpose::STANDARD
            .decode(d)
            .map(Some)
            .map_err(|source| SetupError::Base64 { what, source });
    }
    match file {
        Some(f) => std::fs::read(Path::new(f))
            .map(Some)
            .map_err(|source| SetupError::ReadFile {
                what,
                file: f.to_string(),
                source,
            }),
        None => Ok(None),
    }
}

fn identity(user: &AuthInfo) -> Result<Option<Identity>, SetupError> {
    let cert = data_or_file(
        "client-certificate",
        user.client_certificate_data.as_deref(),
        user.client_certificate.as_deref(),
    )?;
    let key_data = user
        .client_key_data
        .as_ref()
        .map(|s| s.expose_secret().to_string());
    let key = data_or_file(
        "client-key",
        key_data.as_deref(),
        user.client_key.as_deref(),
    )?;
    match (cert, key) {
        (None, None) => Ok(None),
        (Some(_), None) => Err(SetupError::CertificateWithoutKey),
        (None, Some(_)) => Err(SetupError::KeyWithoutCertificate),
        (Some(cert), Some(key)) => Ok(Some(Identity {
            certs: certs_from_pem(&cert).map_err(SetupError::ClientCertificate)?,
            key: key_from_pem(&key).map_err(SetupError::ClientKey)?,
        })),
    }
}

fn credentials(user: &AuthInfo) -> Result<Option<Credentials>, SetupError> {
    if let Some(f) = user.token_file.as_deref().filter(|f| !f.is_empty()) {
        return Ok(Some(Credentials::token_file(&PathBuf::from(f))?));
    }
    if let Some(t) = &user.token {
        return Credentials::token(t.expose_secret())
            .map(Some)
            .map_err(SetupError::Token);
    }
    if let (Some(u), Some(p)) = (&user.username, &user.password) {
        return Ok(Some(Credentials::basic(u, p.expose_secret())?));
    }
    Ok(None)
}

impl Resolved {
    /// For the log: the origin, the server and the kinds of credentials (never their values).
    pub fn describe(&self) -> String {
        let mut auth = Vec::new();
        if self.identity.is_some() {
            auth.push("client certificate".to_string());
        }
        if let Some(c) = &self.credentials {
            auth.push(c.describe());
        }
        if let Some(e) = &self.exec {
            auth.push(format!(
                "exec plugin {} of user {:?}",
                e.config.command.as_deref().unwrap_or_default(),
                e.user
            ));
        }
        if auth.is_empty() {
            auth.push("no credentials".to_string());
        }
        format!("{} → {} ({})", self.origin, self.url, auth.join(" + "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve_file(bytes: &[u8]) -> Result<Resolved, ResolveError> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kubeconfig");
        std::fs::write(&path, bytes).unwrap();
        resolve(&UpstreamConfig {
            kubeconfig: Some(path),
            ..UpstreamConfig::default()
        })
    }

    /// Found by fuzzing (target `kubeconfig`): a UTF-16 byte order mark followed by an odd
    /// number of bytes made kube's reader index past the end of the file, a panic.
    #[test]
    fn an_odd_utf16_file_is_an_error() {
        for (mark, order) in [([0xFF, 0xFE], "LE"), ([0xFE, 0xFF], "BE")] {
            let mut bytes = mark.to_vec();
            bytes.extend_from_slice(b"abc");
            let e = resolve_file(&bytes).unwrap_err().to_string();
            assert!(e.contains(&format!("Invalid UTF-16 {order}")), "{e}");
        }
        // An even one is kube's to decode (here: valid UTF-16 that is no kubeconfig).
        let e = resolve_file(&[0xFF, 0xFE, b'a', 0])
            .unwrap_err()
            .to_string();
        assert!(!e.contains("Invalid UTF-16"), "{e}");
    }
}
