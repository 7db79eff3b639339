//! The HTTP client to the upstream kube-apiserver.
//!
//! [`Upstream`] is a cheap-to-clone handle over hyper-util's pooled legacy `Client` plus the
//! upstream's base URL. Requests are given as a path and query (`/api/v1/pods?watch=1`) or as a
//! whole request whose URI is rewritten onto the base; the response body is never buffered and
//! never timed out, because watches stream for as long as the upstream keeps them open.
//!
//! The reflectors' long-lived watches use the handle from [`Upstream::watch_client`]: a pool of
//! their own, separate from pass-through traffic, that offers HTTP/2 by ALPN on `https://`
//! upstreams, so every reflector's list and watch share one connection (kube-apiserver serves
//! HTTP/2; HTTP/2 PINGs notice a dead connection under a quiet watch). The pass-through pool speaks
//! HTTP/1.1 only, because exec/attach/port-forward upgrades need it.
//!
//! Where the upstream is and who watchmux is there come from [`kubeconfig`] (a kubeconfig,
//! the in-cluster service account, or a bare `upstream.url`); TLS is rustls with the ring
//! provider (`crate::tls`). Both pools connect through the same [`proxy::Connector`]: directly,
//! or through the cluster's `proxy-url` or the environment's proxy, as client-go does.
//! watchmux's token or basic-auth user (if any) goes on every reflector request
//! ([`Upstream::get`]) and on pass-through requests that carry no `Authorization` of their own
//! ([`Upstream::send`]; `crate::auth` decides what a pass-through request carries). When the
//! kubeconfig's user has an exec credential plugin (or the `oidc` auth-provider), [`exec`]
//! supplies that token and/or client certificate instead: it renews them, retries a request the
//! upstream answers 401 once with a new one, and closes the pools' connections ([`rotation`])
//! when the certificate changes.
//!
//! Every failure is an [`UpstreamError`] that keeps its cause. This module must not interpret
//! what the upstream answers (status codes, bodies) nor answer clients: the reflector, the
//! pass-through and the authorizer do, and `crate::error` turns failures into kube `Status`es.

use std::error::Error as StdError;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use http::header::{ACCEPT, AUTHORIZATION, HOST, PROXY_AUTHORIZATION};
use http::uri::{Authority, Scheme};
use http::{HeaderValue, Method, Request, Response, Uri, Version};
use hyper::body::Incoming;
use hyper_rustls::{FixedServerNameResolver, HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use rustls::pki_types::ServerName;

pub mod exec;
pub mod kubeconfig;
pub mod proxy;
pub mod rotation;
pub mod watch_pools;

use crate::auth::Credentials;
use crate::config::UpstreamConfig;
use crate::tls::ServerTrust;
use exec::{CredentialError, ExecCredentials};
use kube_wire::response::{Body, empty};
use kubeconfig::{ResolveError, SetupError};
use rotation::Tracked;

/// A pooled client over plain TCP or rustls, directly or through a proxy, its connections
/// tracked (to close them when an exec plugin's client certificate changes); request bodies are
/// the workspace's one [`Body`].
type Pool = Client<HttpsConnector<Tracked<proxy::Connector>>, Body>;

/// Idle pooled connections are closed after this long (kube-apiserver's own idle timeout is 90 s
/// too; closing first avoids racing a request against the server's close).
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(85);

/// TCP keep-alive probes start after this much silence, so a dead upstream under a long watch is
/// noticed even when no bytes are due.
const TCP_KEEPALIVE: Duration = Duration::from_secs(30);

/// HTTP/2 PING interval (the watch pool negotiates h2 over TLS), for the same reason.
const H2_KEEPALIVE: Duration = Duration::from_secs(30);

/// A handle to the upstream kube-apiserver. Clones share the connection pool.
#[derive(Clone)]
pub struct Upstream {
    client: Pool,
    base: Arc<Base>,
    /// A reflector's hold on its pool ([`Upstream::watch_client`]), shared by its clones.
    _lease: Option<Arc<watch_pools::Lease>>,
}

/// The parts of the base URL requests are rewritten onto, and what every request shares.
#[derive(Debug)]
struct Base {
    scheme: Scheme,
    authority: Authority,
    /// Path prefix without a trailing slash; empty for none.
    prefix: String,
    /// `Host` header value: the authority.
    host: HeaderValue,
    connect_timeout: Duration,
    /// watchmux's own token or basic-auth credentials.
    credentials: Option<Credentials>,
    /// `Proxy-Authorization` for every request, when an `http://` upstream is reached through a
    /// proxy that takes requests in absolute form and the proxy URL has credentials.
    proxy_authorization: Option<HeaderValue>,
    /// watchmux's credentials from an exec plugin or the oidc auth-provider (instead of
    /// `credentials`).
    exec: Option<Arc<ExecCredentials>>,
    /// The reflectors' pools (HTTP/2 where the upstream offers it), a bounded number of
    /// [`Upstream::watch_client`]s on each.
    watch: watch_pools::WatchPools<Pool>,
    /// The access reviews' pool (HTTP/2 where the upstream offers it), shared by every
    /// [`Upstream::review_client`].
    reviews: Pool,
}

impl fmt::Debug for Upstream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Upstream")
            .field("url", &self.url())
            .field("connect_timeout", &self.base.connect_timeout)
            .finish_non_exhaustive()
    }
}

/// Why an upstream request failed.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    /// Nothing names an upstream (no url, kubeconfig, in-cluster mode or `KUBECONFIG`).
    #[error(
        "no upstream is configured: set upstream.url, upstream.kubeconfig or upstream.in_cluster, \
         or the KUBECONFIG environment variable"
    )]
    NotConfigured,
    /// The kubeconfig, the service account, or a certificate, key or token they name is unusable.
    #[error("{origin}: {error}")]
    Setup {
        /// `upstream.kubeconfig (/path), context "x"`, `upstream.in_cluster (...)`, `upstream.url`.
        origin: String,
        /// What is wrong (its text is in this error's, so it is not a `source()`).
        error: SetupError,
    },
    /// TLS with the upstream failed: its certificate was rejected, or it rejected watchmux's.
    #[error("TLS with the upstream {authority} failed: {detail}")]
    Tls {
        /// `host:port` of the upstream.
        authority: String,
        /// The rustls error, with a hint.
        detail: String,
        /// Cause.
        source: hyper_util::client::legacy::Error,
    },
    /// The configured URL is not usable by this client.
    #[error("upstream URL {url:?}: {reason}")]
    BadUrl {
        /// The URL.
        url: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The request's path and query do not form a valid URI on the upstream.
    #[error("invalid upstream request URI {path:?}: {reason}")]
    InvalidUri {
        /// The path and query that were given.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The TCP connection could not be established (refused, unreachable, DNS failure).
    #[error("cannot connect to the upstream {authority}: {detail}")]
    Connect {
        /// `host:port` of the upstream.
        authority: String,
        /// The innermost causes, for the log and the Status message.
        detail: String,
        /// Cause.
        source: hyper_util::client::legacy::Error,
    },
    /// The TCP connection was not established within the connect timeout.
    #[error("connecting to the upstream {authority} timed out after {timeout:?}")]
    ConnectTimeout {
        /// `host:port` of the upstream.
        authority: String,
        /// The configured connect timeout.
        timeout: Duration,
        /// Cause.
        source: hyper_util::client::legacy::Error,
    },
    /// The connection was established but the exchange failed: the upstream closed it, sent an
    /// invalid response, or the request body failed.
    #[error("request to the upstream {authority} failed: {detail}")]
    Protocol {
        /// `host:port` of the upstream.
        authority: String,
        /// The innermost causes.
        detail: String,
        /// Cause.
        source: hyper_util::client::legacy::Error,
    },
    /// The exec credential plugin or the oidc auth-provider gave no usable credential (the
    /// error names the kubeconfig, user and command or issuer).
    #[error(transparent)]
    Credentials(#[from] Arc<CredentialError>),
    /// The request's body could not be read (it was being kept to be sent again after a 401).
    #[error("the request body could not be read")]
    RequestBody(#[source] std::io::Error),
}

impl UpstreamError {
    /// The upstream could not be reached at all (refused, unreachable, timed out, TLS failed):
    /// retrying later may help, and the request was not processed by the upstream.
    pub fn is_connect(&self) -> bool {
        matches!(
            self,
            UpstreamError::Connect { .. }
                | UpstreamError::ConnectTimeout { .. }
                | UpstreamError::Tls { .. }
        )
    }

    /// TLS with the upstream failed (certificate rejected on either side).
    pub fn is_tls(&self) -> bool {
        matches!(self, UpstreamError::Tls { .. })
    }

    /// watchmux has no credential: its exec plugin failed.
    pub fn is_credentials(&self) -> bool {
        matches!(self, UpstreamError::Credentials(_))
    }

    /// Connecting timed out.
    pub fn is_timeout(&self) -> bool {
        matches!(self, UpstreamError::ConnectTimeout { .. })
    }

    /// The request's URI was invalid (a caller error, not an upstream one).
    pub fn is_invalid_uri(&self) -> bool {
        matches!(self, UpstreamError::InvalidUri { .. })
    }

    /// The exchange failed after connecting; the request may have reached the upstream.
    pub fn is_protocol(&self) -> bool {
        matches!(self, UpstreamError::Protocol { .. })
    }

    /// The client is misconfigured (no or unusable URL, kubeconfig, certificate or token).
    pub fn is_config(&self) -> bool {
        matches!(
            self,
            UpstreamError::NotConfigured
                | UpstreamError::BadUrl { .. }
                | UpstreamError::Setup { .. }
        )
    }
}

impl Upstream {
    /// A client for the configured upstream (its URL, kubeconfig, or in-cluster service account;
    /// see [`kubeconfig`]), with its own connection pools. Reads the kubeconfig and the files
    /// it names; does not connect.
    pub fn new(config: &UpstreamConfig) -> Result<Upstream, UpstreamError> {
        let resolved = kubeconfig::resolve(config).map_err(|e| match e {
            ResolveError::NotConfigured => UpstreamError::NotConfigured,
            ResolveError::Invalid { origin, error } => UpstreamError::Setup { origin, error },
        })?;
        let url = &resolved.url;
        let bad = |reason| UpstreamError::BadUrl {
            url: url.to_string(),
            reason,
        };
        let scheme = match url.scheme_str() {
            Some("http") => Scheme::HTTP,
            Some("https") => Scheme::HTTPS,
            _ => return Err(bad("not an http(s) URL")),
        };
        let authority = url.authority().cloned().ok_or_else(|| bad("no host"))?;
        let host = HeaderValue::from_str(authority.as_str()).map_err(|_| bad("invalid host"))?;
        let prefix = url.path().trim_end_matches('/').to_string();
        let setup = |error: SetupError| UpstreamError::Setup {
            origin: resolved.origin.clone(),
            error,
        };
        // A plain-HTTP upstream uses the TLS config only for an `https://` proxy; otherwise it
        // is built without loading roots.
        let tls_proxy = resolved.proxy.as_ref().is_some_and(|p| p.is_https());
        let trust = if scheme == Scheme::HTTPS || tls_proxy {
            resolved.trust.clone()
        } else {
            ServerTrust::Roots(Vec::new())
        };
        let exec = match (&resolved.exec, &resolved.oidc) {
            (Some(e), _) => {
                let plugin =
                    exec::Plugin::new(&e.user, &resolved.origin, &e.config, config.exec_timeout)
                        .map_err(|e| setup(SetupError::Exec(e)))?;
                Some(Arc::new(ExecCredentials::new(plugin)))
            }
            (None, Some(o)) => {
                let oidc =
                    exec::Oidc::new(o, &resolved.origin).map_err(|e| setup(SetupError::Oidc(e)))?;
                Some(Arc::new(ExecCredentials::new(oidc)))
            }
            (None, None) => None,
        };
        // No ALPN here: hyper-rustls sets it per pool (see `build_client`).
        let tls = match &exec {
            Some(x) => crate::tls::client_config_rotating(&trust, x.identity(), &[]),
            None => crate::tls::client_config(&trust, resolved.identity.as_ref(), &[]),
        }
        .map_err(|e| setup(SetupError::Tls(e)))?;
        let server_name = match &resolved.server_name {
            Some(n) => Some(ServerName::try_from(n.clone()).map_err(|error| {
                setup(SetupError::ServerName {
                    name: n.clone(),
                    error,
                })
            })?),
            None => None,
        };
        let timeout = config.connect_timeout;
        let https = scheme == Scheme::HTTPS;
        let tracker = exec.as_ref().map(|x| x.connections().clone());
        let connector = |tcp| {
            let via = proxy::Connector::new(tcp, resolved.proxy.as_ref(), https, &tls, timeout);
            Tracked::new(via, tracker.clone())
        };
        let client = build_client(timeout, tls.clone(), server_name.clone(), false, connector);
        let reviews = build_client(timeout, tls.clone(), server_name.clone(), true, connector);
        let watch = {
            let (via_proxy, tracker) = (resolved.proxy.clone(), tracker.clone());
            watch_pools::WatchPools::new(move || {
                let connector = |tcp| {
                    let via = proxy::Connector::new(tcp, via_proxy.as_ref(), https, &tls, timeout);
                    Tracked::new(via, tracker.clone())
                };
                build_client(timeout, tls.clone(), server_name.clone(), true, connector)
            })
        };
        tracing::info!(upstream = %resolved.describe(), "upstream");
        let base = Base {
            scheme,
            authority,
            prefix,
            host,
            connect_timeout: timeout,
            credentials: resolved.credentials,
            proxy_authorization: resolved
                .proxy
                .as_ref()
                .and_then(|p| p.forward_authorization(https)),
            exec,
            watch,
            reviews,
        };
        Ok(Upstream {
            client,
            base: Arc::new(base),
            _lease: None,
        })
    }

    /// A handle to the same upstream for one reflector (its list, watch and freshness checks):
    /// separate from pass-through traffic, HTTP/2 when the upstream offers it over TLS, on a
    /// connection shared with at most [`watch_pools::WATCHES_PER_CONNECTION`] other reflectors
    /// (kube-apiserver lets a connection have 100 streams open; see [`watch_pools`]). The
    /// handle and its clones hold the reflector's place on that connection until the last is
    /// dropped.
    pub fn watch_client(&self) -> Upstream {
        let (pool, lease) = self.base.watch.lease();
        Upstream {
            _lease: Some(Arc::new(lease)),
            ..self.over(&pool)
        }
    }

    /// Reflectors per upstream connection of theirs, in the order the connections' pools were
    /// made.
    pub fn watch_connections(&self) -> Vec<usize> {
        self.base.watch.holders()
    }

    /// A handle to the same upstream over the pool of delegated authentication and
    /// authorization reviews: HTTP/2 when the upstream offers it over TLS (a fleet's reviews
    /// share a connection instead of opening one each), and apart from the reflectors' pool,
    /// whose freshness checks would otherwise wait for stream slots behind a cold start's
    /// hundreds of thousands of reviews.
    pub fn review_client(&self) -> Upstream {
        self.over(&self.base.reviews)
    }

    /// A handle to the same upstream over `pool`.
    fn over(&self, pool: &Pool) -> Upstream {
        Upstream {
            client: pool.clone(),
            base: self.base.clone(),
            _lease: None,
        }
    }

    /// watchmux's own `Authorization` value, if it has a token or basic-auth credentials (an
    /// exec plugin's token: the one it holds now, if it is usable).
    pub fn authorization(&self) -> Option<HeaderValue> {
        if let Some(x) = &self.base.exec {
            return x.current_authorization();
        }
        self.base
            .credentials
            .as_ref()
            .map(Credentials::authorization)
    }

    /// watchmux's credentials from an exec plugin, if its kubeconfig user has one.
    pub fn exec_credentials(&self) -> Option<&Arc<ExecCredentials>> {
        self.base.exec.as_ref()
    }

    /// The base URL, e.g. `http://127.0.0.1:8001` (with the path prefix, if any).
    pub fn url(&self) -> String {
        format!(
            "{}://{}{}",
            self.base.scheme, self.base.authority, self.base.prefix
        )
    }

    /// The upstream's `host:port`, as sent in `Host`.
    pub fn authority(&self) -> &Authority {
        &self.base.authority
    }

    /// The full upstream URI for a path and query such as `/api/v1/pods?limit=500`.
    pub fn uri_for(&self, path_and_query: &str) -> Result<Uri, UpstreamError> {
        let invalid = |reason: String| UpstreamError::InvalidUri {
            path: path_and_query.to_string(),
            reason,
        };
        if !path_and_query.starts_with('/') {
            // An authority-form or absolute URI here would silently change the target.
            return Err(invalid("does not start with '/'".to_string()));
        }
        Uri::builder()
            .scheme(self.base.scheme.clone())
            .authority(self.base.authority.clone())
            .path_and_query(format!("{}{}", self.base.prefix, path_and_query))
            .build()
            .map_err(|e| invalid(e.to_string()))
    }

    /// GET `path_and_query` with the given `Accept`, as watchmux (its own credentials), returning
    /// as soon as the response head arrives; the body streams (a LIST page, or a WATCH for as long
    /// as the upstream keeps it).
    pub async fn get(
        &self,
        path_and_query: &str,
        accept: &str,
    ) -> Result<Response<Incoming>, UpstreamError> {
        let uri = self.uri_for(path_and_query)?;
        let accept = HeaderValue::from_str(accept).map_err(|_| UpstreamError::InvalidUri {
            path: path_and_query.to_string(),
            reason: format!("invalid Accept header {accept:?}"),
        })?;
        let mut req = Request::new(empty());
        *req.method_mut() = Method::GET;
        *req.uri_mut() = uri;
        req.headers_mut().insert(ACCEPT, accept);
        self.send_as_watchmux(req).await
    }

    /// Sends a request to the upstream: its URI is rewritten onto the base URL (keeping the path
    /// and query), `Host` is set to the upstream's authority, everything else (method, headers,
    /// streaming body) goes as given. A request without an `Authorization` header gets
    /// watchmux's own (if it has one; an exec plugin's is retried once after a 401, see
    /// [`exec`]); one with an `Authorization` header keeps it. Hop-by-hop headers and the
    /// pass-through credential policy are the caller's business (see `crate::passthrough`,
    /// `crate::auth`).
    pub async fn send(&self, mut req: Request<Body>) -> Result<Response<Incoming>, UpstreamError> {
        let pq = req
            .uri()
            .path_and_query()
            .map_or("/", |pq| pq.as_str())
            .to_string();
        *req.uri_mut() = self.uri_for(&pq)?;
        if req.headers().contains_key(AUTHORIZATION) {
            if let Some(x) = &self.base.exec {
                x.ensure_identity().await;
            }
            return self.send_raw(req).await;
        }
        self.send_as_watchmux(req).await
    }

    /// Sends `req` (without an `Authorization` header) with watchmux's own credentials.
    async fn send_as_watchmux(
        &self,
        mut req: Request<Body>,
    ) -> Result<Response<Incoming>, UpstreamError> {
        if let Some(x) = &self.base.exec {
            return exec::send(x, req, |r| self.send_raw(r)).await;
        }
        if let Some(auth) = self.authorization() {
            req.headers_mut().insert(AUTHORIZATION, auth);
        }
        self.send_raw(req).await
    }

    async fn send_raw(&self, mut req: Request<Body>) -> Result<Response<Incoming>, UpstreamError> {
        req.headers_mut().insert(HOST, self.base.host.clone());
        if let Some(auth) = &self.base.proxy_authorization {
            req.headers_mut().insert(PROXY_AUTHORIZATION, auth.clone());
        }
        // The downstream may have spoken HTTP/2; the version of the upstream exchange is the
        // pool's choice (a request marked HTTP/2 would be refused on an HTTP/1.1 connection).
        *req.version_mut() = Version::HTTP_11;
        self.client.request(req).await.map_err(|e| self.classify(e))
    }

    fn classify(&self, e: hyper_util::client::legacy::Error) -> UpstreamError {
        let authority = self.base.authority.to_string();
        if let Some(hint) = tls_failure(&e) {
            return UpstreamError::Tls {
                authority,
                detail: format!("{}{hint}", detail(&e)),
                source: e,
            };
        }
        let timed_out = causes(&e).any(|c| {
            c.downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == std::io::ErrorKind::TimedOut)
        });
        if e.is_connect() && timed_out {
            UpstreamError::ConnectTimeout {
                authority,
                timeout: self.base.connect_timeout,
                source: e,
            }
        } else if e.is_connect() {
            UpstreamError::Connect {
                authority,
                detail: detail(&e),
                source: e,
            }
        } else {
            UpstreamError::Protocol {
                authority,
                detail: detail(&e),
                source: e,
            }
        }
    }
}

/// A pooled client: keep-alive, TCP_NODELAY (watch events are small writes that must not wait for
/// Nagle), a connect timeout, TCP keep-alive, the proxy (if any) and the connection tracking
/// (closed when an exec plugin's client certificate changes) by `connector`, rustls for
/// `https://` (verifying the server as `server_name` when given), offering HTTP/2 by ALPN when
/// `h2`. No request or body timeout: watches are long.
fn build_client(
    connect_timeout: Duration,
    tls: rustls::ClientConfig,
    server_name: Option<ServerName<'static>>,
    h2: bool,
    connector: impl Fn(HttpConnector) -> Tracked<proxy::Connector>,
) -> Pool {
    let mut tcp = HttpConnector::new();
    tcp.enforce_http(false);
    tcp.set_nodelay(true);
    tcp.set_connect_timeout(Some(connect_timeout));
    tcp.set_keepalive(Some(TCP_KEEPALIVE));
    let builder = HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http();
    let builder = match server_name {
        Some(name) => builder.with_server_name_resolver(FixedServerNameResolver::new(name)),
        None => builder,
    };
    // HTTP/1.1 only offers no ALPN (the server then speaks HTTP/1.1); enabling HTTP/2 offers
    // `h2`, then `http/1.1`.
    let connector = if h2 {
        builder
            .enable_http1()
            .enable_http2()
            .wrap_connector(connector(tcp))
    } else {
        builder.enable_http1().wrap_connector(connector(tcp))
    };
    Client::builder(TokioExecutor::new())
        .pool_timer(TokioTimer::new())
        .pool_idle_timeout(POOL_IDLE_TIMEOUT)
        .timer(TokioTimer::new())
        .http2_keep_alive_interval(H2_KEEPALIVE)
        .http2_keep_alive_while_idle(true)
        .http2_adaptive_window(true)
        .build(connector)
}

/// Whether the chain holds a TLS failure, and then the hint to add (possibly empty). rustls errors
/// travel inside (possibly nested) `io::Error`s, whose `source()` skips the wrapped error, hence
/// the descent through `get_ref`; on an HTTP/2 connection only the error's text survives (h2
/// rebuilds I/O errors from their message), hence the textual match.
fn tls_failure(e: &(dyn StdError + 'static)) -> Option<&'static str> {
    if let Some(r) = e.downcast_ref::<rustls::Error>() {
        return Some(tls_hint(&r.to_string()).unwrap_or(""));
    }
    if let Some(io) = e.downcast_ref::<std::io::Error>()
        && let Some(inner) = io.get_ref()
    {
        if let Some(h) = tls_failure(inner) {
            return Some(h);
        }
        if io.kind() == std::io::ErrorKind::InvalidData
            && let Some(h) = tls_hint(&inner.to_string())
        {
            return Some(h);
        }
    }
    tls_failure(e.source()?)
}

/// For rustls's certificate and alert messages, what the operator should check.
fn tls_hint(text: &str) -> Option<&'static str> {
    const CLIENT_CERT_ALERTS: &[&str] = &[
        "BadCertificate",
        "CertificateExpired",
        "CertificateRevoked",
        "CertificateUnknown",
        "CertificateRequired",
        "UnknownCA",
        "AccessDenied",
    ];
    if let Some(alert) = text.strip_prefix("received fatal alert: ") {
        return Some(if CLIENT_CERT_ALERTS.contains(&alert.trim()) {
            " (the upstream rejected watchmux's client certificate: check the kubeconfig's \
             client-certificate(-data), its expiry and the CA the upstream trusts)"
        } else {
            ""
        });
    }
    let cert = text.strip_prefix("invalid peer certificate: ")?;
    let hint = if cert.contains("UnknownIssuer") || cert.contains("BadSignature") {
        " (the upstream's certificate is not signed by the configured CA: check the \
         kubeconfig's certificate-authority(-data))"
    } else if cert.contains("NotValidForName") || cert.contains("not valid for name") {
        " (the upstream's certificate does not name this host: check the server URL or \
         tls-server-name)"
    } else if cert.to_ascii_lowercase().contains("expired") {
        " (the upstream's certificate has expired)"
    } else {
        ""
    };
    Some(hint)
}

/// The error and its causes, outermost first.
fn causes<'a>(
    e: &'a (dyn StdError + 'static),
) -> impl Iterator<Item = &'a (dyn StdError + 'static)> {
    std::iter::successors(Some(e), |e: &&'a (dyn StdError + 'static)| (*e).source())
}

/// The causes below hyper-util's generic "client error (Connect)", joined: e.g.
/// `tcp connect error: Connection refused (os error 111)`.
fn detail(e: &hyper_util::client::legacy::Error) -> String {
    let parts: Vec<String> = causes(e).skip(1).map(|c| c.to_string()).collect();
    if parts.is_empty() {
        e.to_string()
    } else {
        parts.join(": ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn upstream(url: &str) -> Result<Upstream, UpstreamError> {
        Upstream::new(&UpstreamConfig {
            url: Some(url.parse().unwrap()),
            ..UpstreamConfig::default()
        })
    }

    #[test]
    fn uris_are_rewritten_onto_the_base() {
        let up = upstream("http://10.0.0.1:6443").unwrap();
        assert_eq!(up.url(), "http://10.0.0.1:6443");
        assert_eq!(
            up.uri_for("/api/v1/pods?watch=1").unwrap().to_string(),
            "http://10.0.0.1:6443/api/v1/pods?watch=1"
        );
        let up = upstream("http://h:1/k8s/clusters/c1/").unwrap();
        assert_eq!(
            up.uri_for("/version").unwrap().to_string(),
            "http://h:1/k8s/clusters/c1/version"
        );
        assert!(up.uri_for("version").unwrap_err().is_invalid_uri());
        assert!(up.uri_for("http://evil/x").unwrap_err().is_invalid_uri());
    }

    #[test]
    fn unusable_urls_are_config_errors() {
        assert!(
            Upstream::new(&UpstreamConfig::default())
                .unwrap_err()
                .is_config()
        );
        assert!(upstream("ftp://h:6443").unwrap_err().is_config());
    }

    #[test]
    fn tls_failures_get_a_hint() {
        use rustls::{AlertDescription, CertificateError, Error};
        let hint = |e: Error| tls_hint(&e.to_string());
        assert!(
            hint(Error::InvalidCertificate(CertificateError::UnknownIssuer))
                .unwrap()
                .contains("certificate-authority")
        );
        assert!(
            hint(Error::InvalidCertificate(CertificateError::Expired))
                .unwrap()
                .contains("expired")
        );
        assert!(
            hint(Error::AlertReceived(AlertDescription::CertificateExpired))
                .unwrap()
                .contains("client certificate")
        );
        assert_eq!(
            hint(Error::AlertReceived(AlertDescription::HandshakeFailure)),
            Some("")
        );
        assert_eq!(tls_hint("connection reset by peer"), None);
        // The same, found through nested io::Errors, and through h2's text-only copy.
        let nested = std::io::Error::other(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            Error::InvalidCertificate(CertificateError::UnknownIssuer),
        ));
        assert!(
            tls_failure(&nested)
                .unwrap()
                .contains("certificate-authority")
        );
        let text = std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "received fatal alert: BadCertificate",
        );
        assert!(tls_failure(&text).unwrap().contains("client certificate"));
        assert_eq!(tls_failure(&std::io::Error::other("x")), None);
    }

    #[test]
    fn a_kubeconfig_that_cannot_be_read_names_the_key() {
        let e = Upstream::new(&UpstreamConfig {
            kubeconfig: Some("/nonexistent/kubeconfig".into()),
            ..UpstreamConfig::default()
        })
        .unwrap_err();
        assert!(e.is_config(), "{e:?}");
        assert!(
            e.to_string()
                .starts_with("upstream.kubeconfig (/nonexistent/kubeconfig): "),
            "{e}"
        );
    }

    #[tokio::test]
    async fn refused_connection_is_a_connect_error() {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        drop(l);
        let up = upstream(&format!("http://{addr}")).unwrap();
        let e = up.get("/version", "application/json").await.unwrap_err();
        assert!(e.is_connect() && !e.is_timeout(), "{e:?}");
        assert!(e.to_string().contains(&addr.to_string()), "{e}");
    }
}
