//! Where the upstream is and how watchmux proves who it is there.
//!
//! One of, in this order:
//! 1. `upstream.in_cluster = true`: the pod's service account through kube's
//!    `Config::incluster()` (`KUBERNETES_SERVICE_HOST`/`_PORT`, `ca.crt`, and the token file,
//!    re-read when the kubelet rotates it).
//! 2. `upstream.kubeconfig`: that file, with `upstream.context` or its `current-context`.
//! 3. `upstream.url`: that URL, no credentials (an `https://` URL is verified against the
//!    system's root certificates).
//! 4. Otherwise the `KUBECONFIG` environment variable: a list of files, merged as client-go
//!    merges them ([`loader`]: the first file to define a name wins it, relative paths resolve
//!    against the folder of the file that names them).
//!
//! From the kubeconfig watchmux takes the cluster's `server`, `certificate-authority(-data)`,
//! `insecure-skip-tls-verify` and `tls-server-name`, and the user's `client-certificate(-data)` /
//! `client-key(-data)`, `token`, `tokenFile` (re-read when it changes; it wins over `token`, as in
//! client-go) or `username`/`password`, or its `exec` credential plugin (handed on as it is, with
//! the user's name, to [`super::exec`], which runs it; as in client-go it is not used when the
//! user also has a token, basic-auth or client certificate), or its `oidc` auth-provider (its
//! config and issuer CA handed on to [`super::exec::oidc`]). The `gcp` and `azure`
//! auth-providers (removed from client-go) are refused naming the exec plugin that replaces them,
//! any other auth-provider as unsupported, rather than connecting without credentials. Errors
//! name where the setting came from: the file(s), the context, and the cluster and user entries
//! (with their files when several are merged).
//!
//! Reads files, never the network: it must not connect (the client in [`super`] does).

mod loader;

use std::path::{Path, PathBuf};

use base64::Engine;
use kube::config::{AuthInfo, Cluster, ExecAuthCluster};
use secrecy::ExposeSecret;

pub use loader::LoadError;
use loader::Loaded;

use super::exec::ExecConfigError;
use super::exec::oidc::{OidcConfigError, OidcUser};
use super::proxy::{Proxy, ProxyError};
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
    /// The proxy every connection goes through: the cluster's `proxy-url`, or the one the
    /// environment names for this server (see [`super::proxy`]).
    pub proxy: Option<Proxy>,
    /// The cluster's `disable-compression`. watchmux's own requests never ask for gzip
    /// (`Accept-Encoding`), set or not; clients' pass-through requests keep their own.
    pub disable_compression: bool,
    /// The user's exec credential plugin (when it has no other credentials).
    pub exec: Option<ExecUser>,
    /// The user's `oidc` auth-provider (when it has no other credentials).
    pub oidc: Option<OidcUser>,
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
    #[error("{origin}: {error}")]
    Invalid {
        /// `upstream.kubeconfig (/path)`, `KUBECONFIG (...)`, `upstream.in_cluster`.
        origin: String,
        /// What is wrong.
        error: SetupError,
    },
}

/// What is wrong with the upstream connection settings (the text follows their origin). Each
/// text says its causes once: a cause written into the text is not also the `source()`.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// The in-cluster service account cannot be loaded.
    #[error("{}", full_text(.0))]
    InCluster(kube::config::InClusterError),
    /// A kubeconfig file cannot be read or parsed.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// kube cannot describe the cluster to an exec plugin (`provideClusterInfo`).
    #[error("{}", full_text(.0))]
    Kubeconfig(kube::config::KubeconfigError),
    /// The context names a cluster the kubeconfig does not define.
    #[error("cluster {name:?} is not defined ({known})")]
    UnknownCluster {
        /// The cluster's name.
        name: String,
        /// `it has a, b` or `it has none`.
        known: String,
    },
    /// The cluster has no `server`.
    #[error("cluster {name:?} has no server")]
    NoServer {
        /// The cluster's name.
        name: String,
    },
    /// The cluster's CA certificates are unusable.
    #[error("certificate-authority: {0}")]
    CertificateAuthority(PemError),
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
    /// The user uses an auth-provider that client-go removed.
    #[error(
        "the user uses the {name:?} auth-provider, which client-go removed: use the {plugin} \
         exec credential plugin instead ({url})"
    )]
    RemovedAuthProvider {
        /// `gcp` or `azure`.
        name: String,
        /// The exec plugin that replaces it.
        plugin: &'static str,
        /// Where to read about it.
        url: &'static str,
    },
    /// The user has both an exec plugin and an auth-provider (client-go refuses it too).
    #[error("the user has both exec and auth-provider, which cannot be used together")]
    ExecAndAuthProvider,
    /// The user's `oidc` auth-provider cannot be used.
    #[error(transparent)]
    Oidc(#[from] OidcConfigError),
    /// A `*-data` value is not base64.
    #[error("{what}-data is not valid base64: {error}")]
    Base64 {
        /// `certificate-authority`, `client-certificate` or `client-key`.
        what: &'static str,
        /// The decoding error.
        error: base64::DecodeError,
    },
    /// A file the user names cannot be read.
    #[error("{what} {file}: cannot read: {error}")]
    ReadFile {
        /// `certificate-authority`, `client-certificate` or `client-key`.
        what: &'static str,
        /// The file as named.
        file: String,
        /// The read error.
        error: std::io::Error,
    },
    /// `client-certificate` without `client-key`.
    #[error("client-certificate is set but client-key is not")]
    CertificateWithoutKey,
    /// `client-key` without `client-certificate`.
    #[error("client-key is set but client-certificate is not")]
    KeyWithoutCertificate,
    /// The client certificate's PEM is unusable.
    #[error("client-certificate: {0}")]
    ClientCertificate(PemError),
    /// The client key's PEM is unusable.
    #[error("client-key: {0}")]
    ClientKey(PemError),
    /// The user's `token` cannot be sent.
    #[error("token: {0}")]
    Token(TokenError),
    /// The user's `tokenFile` or `username`/`password` cannot be used.
    #[error(transparent)]
    Credentials(#[from] CredentialsError),
    /// `tls-server-name` is not a DNS name or IP address.
    #[error("tls-server-name {name:?}: {error}")]
    ServerName {
        /// The configured name.
        name: String,
        /// Why it is not a server name.
        error: rustls::pki_types::InvalidDnsNameError,
    },
    /// The TLS client config cannot be built from these settings.
    #[error(transparent)]
    Tls(#[from] ClientConfigError),
    /// The cluster's `proxy-url`, or the proxy the environment names, is unusable.
    #[error(transparent)]
    Proxy(#[from] ProxyError),
}

/// Resolves `config` into an upstream address, credentials and proxy. Reads files and the
/// environment; does not connect.
pub fn resolve(config: &UpstreamConfig) -> Result<Resolved, ResolveError> {
    let mut r = settings(config)?;
    // No `proxy-url`: the environment's proxy, as client-go's default transport takes it.
    if r.proxy.is_none() {
        r.proxy = Proxy::for_upstream(None, &r.url).map_err(|e| invalid(&r.origin, e.into()))?;
    }
    Ok(r)
}

/// [`resolve`] but for the environment's proxy.
fn settings(config: &UpstreamConfig) -> Result<Resolved, ResolveError> {
    if config.in_cluster {
        let origin = "upstream.in_cluster (the pod's service account)".to_string();
        let kc =
            kube::Config::incluster().map_err(|e| invalid(&origin, SetupError::InCluster(e)))?;
        return from_kube(kc, origin);
    }
    if let Some(path) = &config.kubeconfig {
        let origin = format!("upstream.kubeconfig ({})", path.display());
        let kc = loader::load(std::slice::from_ref(path), true)
            .map_err(|e| invalid(&origin, e.into()))?;
        return load(kc, config.context.as_deref(), origin);
    }
    if let Some(url) = &config.url {
        return Ok(Resolved {
            url: url.clone(),
            trust: ServerTrust::System,
            server_name: None,
            identity: None,
            credentials: None,
            proxy: None,
            disable_compression: false,
            exec: None,
            oidc: None,
            origin: "upstream.url".to_string(),
        });
    }
    let Some(v) = std::env::var_os("KUBECONFIG") else {
        return Err(ResolveError::NotConfigured);
    };
    let paths: Vec<PathBuf> = std::env::split_paths(&v)
        .filter(|p| !p.as_os_str().is_empty())
        .collect();
    if paths.is_empty() {
        return Err(ResolveError::NotConfigured);
    }
    let origin = format!("KUBECONFIG ({})", v.to_string_lossy());
    let kc = loader::load(&paths, false).map_err(|e| invalid(&origin, e.into()))?;
    load(kc, config.context.as_deref(), origin)
}

fn invalid(origin: &str, error: SetupError) -> ResolveError {
    ResolveError::Invalid {
        origin: origin.to_string(),
        error,
    }
}

/// A foreign error's text with each of its causes said once: kube's errors write their cause into
/// their text and also return it as `source()`; a cause whose text is already there is left out.
fn full_text(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let t = c.to_string();
        if !text.contains(&t) {
            text.push_str(": ");
            text.push_str(&t);
        }
        cause = c.source();
    }
    text
}

/// The merged kubeconfig's `context` (or its current context): its cluster and user, as kube's
/// resolved `Config`, then [`from_kube`].
fn load(kc: Loaded, context: Option<&str>, origin: String) -> Result<Resolved, ResolveError> {
    let known = |names: Vec<&str>| {
        if names.is_empty() {
            "it has none".to_string()
        } else {
            format!("it has {}", names.join(", "))
        }
    };
    let contexts = || known(kc.config.contexts.iter().map(|c| c.name.as_str()).collect());
    let chosen = match context {
        Some(c) => {
            if !kc.config.contexts.iter().any(|n| n.name == c) {
                return Err(invalid(
                    &origin,
                    SetupError::UnknownContext {
                        context: c.to_string(),
                        known: contexts(),
                    },
                ));
            }
            c.to_string()
        }
        None => match kc.config.current_context.as_deref() {
            Some(c) => c.to_string(),
            None => {
                return Err(invalid(
                    &origin,
                    SetupError::NoCurrentContext { known: contexts() },
                ));
            }
        },
    };
    let Some(ctx) = kc.config.contexts.iter().find(|c| c.name == chosen) else {
        // Only a current-context can name a context that is not there.
        return Err(invalid(
            &origin,
            SetupError::UnknownContext {
                context: chosen,
                known: contexts(),
            },
        ));
    };
    let ctx = ctx.context.clone().unwrap_or_default();
    let user_name = ctx.user.filter(|u| !u.is_empty());
    // Which entries the context uses, and (when files were merged) from which file.
    let from = |file: Option<&PathBuf>| match file {
        Some(f) if kc.files > 1 => format!(" in {}", f.display()),
        _ => String::new(),
    };
    let user_part = match &user_name {
        Some(u) if kc.users.contains_key(u) => format!("user {u:?}{}", from(kc.users.get(u))),
        Some(u) => format!("user {u:?} (not defined: no credentials)"),
        None => "no user".to_string(),
    };
    let origin = format!(
        "{origin}, context {chosen:?} (cluster {:?}{}, {user_part})",
        ctx.cluster,
        from(kc.clusters.get(&ctx.cluster)),
    );
    let cluster = kc
        .config
        .clusters
        .iter()
        .find(|c| c.name == ctx.cluster)
        .map(|c| c.cluster.clone().unwrap_or_default())
        .ok_or_else(|| {
            invalid(
                &origin,
                SetupError::UnknownCluster {
                    name: ctx.cluster.clone(),
                    known: known(kc.config.clusters.iter().map(|c| c.name.as_str()).collect()),
                },
            )
        })?;
    // A user the kubeconfig does not define is no user, as in client-go.
    let user = user_name
        .as_deref()
        .and_then(|u| kc.config.auth_infos.iter().find(|n| n.name == u))
        .and_then(|n| n.auth_info.clone())
        .unwrap_or_default();
    let mut config = kube_config(&ctx.cluster, &cluster, user).map_err(|e| invalid(&origin, e))?;
    let exec = config.auth_info.exec.take();
    let oidc = match config.auth_info.auth_provider.take() {
        Some(_) if exec.is_some() => return Err(invalid(&origin, SetupError::ExecAndAuthProvider)),
        Some(p) if p.name == "oidc" => Some(p),
        Some(p) => return Err(invalid(&origin, refused_provider(&p.name))),
        None => None,
    };
    let mut resolved = from_kube(config, origin)?;
    let user_name = user_name.unwrap_or_default();
    if let Some(p) = oidc {
        resolved.oidc =
            oidc_user(&resolved, user_name.clone(), p).map_err(|e| invalid(&resolved.origin, e))?;
    }
    resolved.exec = exec_user(&resolved, user_name, exec);
    if let Some(url) = &cluster.proxy_url {
        resolved.proxy = Proxy::for_upstream(Some(url), &resolved.url)
            .map_err(|e| invalid(&resolved.origin, e.into()))?;
    }
    Ok(resolved)
}

/// kube's resolved `Config` for a kubeconfig's cluster and user, as kube's loader makes it: the
/// server, its CA certificates, `insecure-skip-tls-verify`, `tls-server-name`, the user, and the
/// cluster's description for an exec plugin that asks for it (`provideClusterInfo`).
fn kube_config(
    name: &str,
    cluster: &Cluster,
    mut user: AuthInfo,
) -> Result<kube::Config, SetupError> {
    let server = cluster
        .server
        .as_deref()
        .ok_or_else(|| SetupError::NoServer {
            name: name.to_string(),
        })?;
    let url = server
        .parse::<http::Uri>()
        .map_err(|_| SetupError::NotHttp {
            url: server.to_string(),
        })?;
    let ca = data_or_file(
        "certificate-authority",
        cluster.certificate_authority_data.as_deref(),
        cluster.certificate_authority.as_deref(),
    )?;
    if let Some(exec) = &mut user.exec
        && exec.provide_cluster_info
    {
        exec.cluster = Some(ExecAuthCluster::try_from(cluster).map_err(SetupError::Kubeconfig)?);
    }
    let mut config = kube::Config::new(url);
    config.root_cert = match ca {
        Some(pem) => Some(
            certs_from_pem(&pem)
                .map_err(SetupError::CertificateAuthority)?
                .into_iter()
                .map(|c| c.to_vec())
                .collect(),
        ),
        None => None,
    };
    config.accept_invalid_certs = cluster.insecure_skip_tls_verify.unwrap_or(false);
    config.tls_server_name = cluster.tls_server_name.clone();
    config.disable_compression = cluster.disable_compression.unwrap_or(false);
    config.auth_info = user;
    Ok(config)
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

/// The user's `oidc` auth-provider with its issuer's CA read, unless it has other credentials
/// (they are used instead).
fn oidc_user(
    resolved: &Resolved,
    user: String,
    p: kube::config::AuthProviderConfig,
) -> Result<Option<OidcUser>, SetupError> {
    if resolved.identity.is_some() || resolved.credentials.is_some() {
        tracing::warn!(origin = %resolved.origin, %user, "the user has a token, basic-auth or client certificate besides its oidc auth-provider: the auth-provider is not used");
        return Ok(None);
    }
    let config = p.config;
    let nonempty = |k: &str| config.get(k).map(String::as_str).filter(|v| !v.is_empty());
    let ca_pem = data_or_file(
        "idp-certificate-authority",
        nonempty("idp-certificate-authority-data"),
        nonempty("idp-certificate-authority"),
    )?;
    Ok(Some(OidcUser {
        user,
        config,
        ca_pem,
    }))
}

/// Why an auth-provider other than `oidc` is refused.
fn refused_provider(name: &str) -> SetupError {
    let removed = |plugin, url| SetupError::RemovedAuthProvider {
        name: name.to_string(),
        plugin,
        url,
    };
    match name {
        "gcp" => removed(
            "gke-gcloud-auth-plugin",
            "https://cloud.google.com/blog/products/containers-kubernetes/kubectl-auth-changes-in-gke",
        ),
        "azure" => removed("kubelogin", "https://github.com/Azure/kubelogin"),
        _ => SetupError::AuthProvider {
            name: name.to_string(),
        },
    }
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
        return Err(invalid(&origin, refused_provider(&p.name)));
    }
    if user.impersonate.is_some() || user.impersonate_groups.is_some() {
        tracing::warn!(%origin, "the user's `as`/`as-groups` impersonation is ignored");
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
        proxy: None,
        disable_compression: c.disable_compression,
        exec: None,
        oidc: None,
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
            .map_err(|error| SetupError::Base64 { what, error });
    }
    match file {
        Some(f) => std::fs::read(Path::new(f))
            .map(Some)
            .map_err(|error| SetupError::ReadFile {
                what,
                file: f.to_string(),
                error,
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
        if let Some(o) = &self.oidc {
            auth.push(format!(
                "oidc auth-provider {} of user {:?}",
                o.config
                    .get(super::exec::oidc::ISSUER_URL)
                    .map_or("", String::as_str),
                o.user
            ));
        }
        if auth.is_empty() {
            auth.push("no credentials".to_string());
        }
        let via = match &self.proxy {
            Some(p) => format!(" through the proxy {}", p.describe()),
            None => String::new(),
        };
        format!("{} → {}{via} ({})", self.origin, self.url, auth.join(" + "))
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
    /// number of bytes made kube-client 5.0's reader index past the end of the file, a panic.
    /// watchmux's reader makes it an error naming the file.
    #[test]
    fn an_odd_utf16_file_is_an_error() {
        for mark in [[0xFF, 0xFE], [0xFE, 0xFF]] {
            let mut bytes = mark.to_vec();
            bytes.extend_from_slice(b"abc");
            let e = resolve_file(&bytes).unwrap_err().to_string();
            assert!(e.starts_with("upstream.kubeconfig ("), "{e}");
        }
    }

    /// UTF-16 with a byte order mark is read, as client-go's YAML reader reads it.
    #[test]
    fn a_utf16_file_is_read() {
        let text = "clusters: [{name: c, cluster: {server: 'https://h:1', insecure-skip-tls-verify: true}}]\ncontexts: [{name: c, context: {cluster: c}}]\ncurrent-context: c\n";
        for big_endian in [false, true] {
            let mut bytes = if big_endian {
                vec![0xFE, 0xFF]
            } else {
                vec![0xFF, 0xFE]
            };
            for u in text.encode_utf16() {
                let b = if big_endian {
                    u.to_be_bytes()
                } else {
                    u.to_le_bytes()
                };
                bytes.extend_from_slice(&b);
            }
            let r = resolve_file(&bytes).unwrap();
            assert_eq!(r.url, "https://h:1/");
        }
    }
}
