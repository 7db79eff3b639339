//! The HTTP client to the upstream kube-apiserver.
//!
//! [`Upstream`] is a cheap-to-clone handle over hyper-util's pooled legacy `Client` plus the
//! upstream's base URL. Requests are given as a path and query (`/api/v1/pods?watch=1`) or as a
//! whole request whose URI is rewritten onto the base; the response body is never buffered and
//! never timed out, because watches stream for as long as the upstream keeps them open.
//!
//! The reflector's few long-lived watches should use their own handle from
//! [`Upstream::watch_client`]: a separate connection pool, so that a stalled connection carrying
//! pass-through traffic (or, with HTTP/2, one stalled connection multiplexing many streams) cannot
//! hold up every cached resource at once, and the other way round.
//!
//! Only `http://` upstreams are supported for now; TLS comes later.

use std::error::Error as StdError;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{ACCEPT, HOST};
use http::uri::{Authority, Scheme};
use http::{HeaderValue, Method, Request, Response, Uri, Version};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Empty};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};

use crate::config::UpstreamConfig;

/// The request body type the upstream client sends: any streaming body, boxed.
pub type UpstreamBody = BoxBody<Bytes, std::io::Error>;

/// Idle pooled connections are closed after this long (kube-apiserver's own idle timeout is 90 s
/// too; closing first avoids racing a request against the server's close).
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(85);

/// TCP keep-alive probes start after this much silence, so a dead upstream under a long watch is
/// noticed even when no bytes are due.
const TCP_KEEPALIVE: Duration = Duration::from_secs(30);

/// HTTP/2 PING interval (used once TLS + ALPN can negotiate h2), for the same reason.
const H2_KEEPALIVE: Duration = Duration::from_secs(30);

/// A handle to the upstream kube-apiserver. Clones share the connection pool.
#[derive(Clone)]
pub struct Upstream {
    client: Client<HttpConnector, UpstreamBody>,
    base: Arc<Base>,
}

/// The parts of the base URL requests are rewritten onto.
#[derive(Debug)]
struct Base {
    scheme: Scheme,
    authority: Authority,
    /// Path prefix without a trailing slash; empty for none.
    prefix: String,
    /// `Host` header value: the authority.
    host: HeaderValue,
    connect_timeout: Duration,
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
    /// No upstream URL is configured.
    #[error("no upstream URL is configured (upstream.url)")]
    NotConfigured,
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
}

impl UpstreamError {
    /// The upstream could not be reached at all (refused, unreachable, timed out): retrying later
    /// may help, and the request certainly did not reach the upstream.
    pub fn is_connect(&self) -> bool {
        matches!(
            self,
            UpstreamError::Connect { .. } | UpstreamError::ConnectTimeout { .. }
        )
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

    /// The client is misconfigured (no or unusable URL).
    pub fn is_config(&self) -> bool {
        matches!(
            self,
            UpstreamError::NotConfigured | UpstreamError::BadUrl { .. }
        )
    }
}

impl Upstream {
    /// A client for the configured upstream, with its own connection pool.
    pub fn new(config: &UpstreamConfig) -> Result<Upstream, UpstreamError> {
        let url = config.url.as_ref().ok_or(UpstreamError::NotConfigured)?;
        let bad = |reason| UpstreamError::BadUrl {
            url: url.to_string(),
            reason,
        };
        let scheme = match url.scheme_str() {
            Some("http") => Scheme::HTTP,
            Some("https") => return Err(bad("https upstreams are not supported yet")),
            _ => return Err(bad("not an http URL")),
        };
        let authority = url.authority().cloned().ok_or_else(|| bad("no host"))?;
        let host = HeaderValue::from_str(authority.as_str()).map_err(|_| bad("invalid host"))?;
        let prefix = url.path().trim_end_matches('/').to_string();
        let base = Base {
            scheme,
            authority,
            prefix,
            host,
            connect_timeout: config.connect_timeout,
        };
        Ok(Upstream {
            client: build_client(base.connect_timeout),
            base: Arc::new(base),
        })
    }

    /// A handle to the same upstream with a new, separate connection pool: for the reflector's
    /// long-lived watches, so they never share a connection with pass-through traffic.
    pub fn watch_client(&self) -> Upstream {
        Upstream {
            client: build_client(self.base.connect_timeout),
            base: self.base.clone(),
        }
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

    /// GET `path_and_query` with the given `Accept`, returning as soon as the response head
    /// arrives; the body streams (a LIST page, or a WATCH for as long as the upstream keeps it).
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
        let mut req = Request::new(Empty::<Bytes>::new().map_err(|e| match e {}).boxed());
        *req.method_mut() = Method::GET;
        *req.uri_mut() = uri;
        req.headers_mut().insert(ACCEPT, accept);
        self.send_raw(req).await
    }

    /// Sends a request to the upstream: its URI is rewritten onto the base URL (keeping the path
    /// and query), `Host` is set to the upstream's authority, everything else (method, headers,
    /// streaming body) goes as given. Hop-by-hop headers are the caller's business
    /// (see `proxy`).
    pub async fn send(
        &self,
        mut req: Request<UpstreamBody>,
    ) -> Result<Response<Incoming>, UpstreamError> {
        let pq = req
            .uri()
            .path_and_query()
            .map_or("/", |pq| pq.as_str())
            .to_string();
        *req.uri_mut() = self.uri_for(&pq)?;
        self.send_raw(req).await
    }

    async fn send_raw(
        &self,
        mut req: Request<UpstreamBody>,
    ) -> Result<Response<Incoming>, UpstreamError> {
        req.headers_mut().insert(HOST, self.base.host.clone());
        // The downstream may have spoken HTTP/2; the version of the upstream exchange is the
        // pool's choice (a request marked HTTP/2 would be refused on an HTTP/1.1 connection).
        *req.version_mut() = Version::HTTP_11;
        self.client.request(req).await.map_err(|e| self.classify(e))
    }

    fn classify(&self, e: hyper_util::client::legacy::Error) -> UpstreamError {
        let authority = self.base.authority.to_string();
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
/// Nagle), a connect timeout, TCP keep-alive. No request or body timeout: watches are long.
fn build_client(connect_timeout: Duration) -> Client<HttpConnector, UpstreamBody> {
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    connector.set_connect_timeout(Some(connect_timeout));
    connector.set_keepalive(Some(TCP_KEEPALIVE));
    Client::builder(TokioExecutor::new())
        .pool_timer(TokioTimer::new())
        .pool_idle_timeout(POOL_IDLE_TIMEOUT)
        .timer(TokioTimer::new())
        .http2_keep_alive_interval(H2_KEEPALIVE)
        .http2_keep_alive_while_idle(true)
        .build(connector)
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
        assert!(upstream("https://h:6443").unwrap_err().is_config());
    }

    #[tokio::test]
    async fn refused_connection_is_a_connect_error() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        drop(l);
        let up = upstream(&format!("http://{addr}")).unwrap();
        let e = up.get("/version", "application/json").await.unwrap_err();
        assert!(e.is_connect() && !e.is_timeout(), "{e:?}");
        assert!(e.to_string().contains(&addr.to_string()), "{e}");
    }
}
