//! The proxy between watchmux and the upstream, chosen and used as client-go does:
//!
//! - The cluster's `proxy-url` (client-go's `parseProxyURL`: `http://`, `https://` or
//!   `socks5://`) carries every connection to the upstream.
//! - Without it, the environment, as Go's `http.ProxyFromEnvironment` (client-go's default):
//!   `HTTPS_PROXY`/`https_proxy` for an `https://` upstream, `HTTP_PROXY`/`http_proxy` for an
//!   `http://` one (ignored when `REQUEST_METHOD` is set: a CGI environment); a value without a
//!   scheme is `http://`. Not for `localhost` or a loopback address, nor for a host that
//!   `NO_PROXY`/`no_proxy` lists (`*`, IP addresses and CIDR ranges, `name` for the name and its
//!   subdomains, `.name` or `*.name` for subdomains only, each optionally `:port`). `ALL_PROXY`
//!   is not read (Go does not).
//!
//! Through an `http://` or `https://` proxy, an `https://` upstream is reached by an HTTP
//! `CONNECT` tunnel (hyper-util's [`Tunnel`]) and TLS to the upstream inside it, verified with
//! the upstream's own name; an `http://` upstream is sent requests in absolute form
//! (`GET http://host/path`), as Go does. The URL's user and password go as
//! `Proxy-Authorization: Basic` on the `CONNECT` (or on each forwarded request). Through
//! `socks5://`, a SOCKS5 tunnel (hyper-util's [`SocksV5`], the user and password as its
//! username/password authentication; the proxy resolves the upstream's name). TLS with an
//! `https://` proxy uses the upstream's TLS settings (its CA, watchmux's client certificate), as
//! Go's transport does, and verifies the proxy's own name. Connecting through a proxy (TCP and
//! the proxy's handshake) is bounded by `upstream.connect_timeout_ms`.
//!
//! Owns the proxy settings and the connector; it must not send requests (the client in
//! [`super`] does) nor decide on credentials other than the proxy's.

use std::error::Error as StdError;
use std::fmt;
use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use http::{HeaderValue, Uri};
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder, MaybeHttpsStream};
use hyper_util::client::legacy::connect::proxy::{SocksV5, Tunnel};
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tower_service::Service;

type BoxError = Box<dyn StdError + Send + Sync>;

/// A proxy to reach the upstream through.
#[derive(Clone, PartialEq, Eq)]
pub struct Proxy {
    kind: Kind,
    /// `scheme://host:port/`, without user and password.
    uri: Uri,
    /// The URL's user and password, percent-decoded.
    user: Option<(String, String)>,
    /// Where it is configured: `proxy-url`, `HTTPS_PROXY`, ….
    from: &'static str,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Http,
    Https,
    Socks5,
}

impl fmt::Debug for Proxy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.describe())
    }
}

/// Why the proxy setting is unusable.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    /// The URL does not parse or has no host.
    #[error("{from} {url:?}: not a proxy URL")]
    Invalid {
        /// `proxy-url`, `HTTPS_PROXY`, ….
        from: &'static str,
        /// The value.
        url: String,
    },
    /// A scheme watchmux (and client-go) cannot use.
    #[error("{from} {url:?}: unsupported scheme {scheme:?}, must be {allowed}")]
    Scheme {
        /// `proxy-url`, `HTTPS_PROXY`, ….
        from: &'static str,
        /// The value.
        url: String,
        /// Its scheme.
        scheme: String,
        /// The schemes accepted there.
        allowed: &'static str,
    },
}

impl Proxy {
    /// The cluster's `proxy-url`, or else the proxy the environment names for `upstream`.
    pub fn for_upstream(
        proxy_url: Option<&str>,
        upstream: &Uri,
    ) -> Result<Option<Proxy>, ProxyError> {
        match proxy_url {
            Some(url) => Proxy::parse(url, "proxy-url", false).map(Some),
            None => Proxy::from_environment(upstream, &|name| std::env::var(name).ok()),
        }
    }

    /// The proxy `env` names for `upstream`, as Go's `http.ProxyFromEnvironment` chooses it.
    fn from_environment(
        upstream: &Uri,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Option<Proxy>, ProxyError> {
        let first = |names: [&'static str; 2]| {
            names
                .into_iter()
                .find_map(|n| env(n).filter(|v| !v.is_empty()).map(|v| (n, v)))
        };
        let (https, port) = match upstream.scheme_str() {
            Some("https") => (true, 443),
            _ => (false, 80),
        };
        let chosen = if https {
            first(["HTTPS_PROXY", "https_proxy"])
        } else if env("REQUEST_METHOD").is_some_and(|v| !v.is_empty()) {
            // Go refuses HTTP_PROXY in a CGI environment, where a request header can set it.
            None
        } else {
            first(["HTTP_PROXY", "http_proxy"])
        };
        let Some((from, value)) = chosen else {
            return Ok(None);
        };
        let host = upstream.host().unwrap_or_default();
        let port = upstream.port_u16().unwrap_or(port);
        let no_proxy = first(["NO_PROXY", "no_proxy"])
            .map(|(_, v)| v)
            .unwrap_or_default();
        if !uses_proxy(host, port, &no_proxy) {
            return Ok(None);
        }
        Proxy::parse(&value, from, true).map(Some)
    }

    /// Parses a proxy URL. `from_env`: Go's environment rules (a value without a scheme is
    /// `http://`; `socks5h://` is `socks5://`); otherwise client-go's `parseProxyURL`.
    fn parse(text: &str, from: &'static str, from_env: bool) -> Result<Proxy, ProxyError> {
        let invalid = || ProxyError::Invalid {
            from,
            url: text.to_string(),
        };
        let mut uri: Uri = text.parse().map_err(|_| invalid())?;
        if from_env && (uri.scheme().is_none() || uri.host().is_none_or(str::is_empty)) {
            uri = format!("http://{text}").parse().map_err(|_| invalid())?;
        }
        let scheme = uri.scheme_str().unwrap_or_default().to_ascii_lowercase();
        let kind = match scheme.as_str() {
            "http" => Kind::Http,
            "https" => Kind::Https,
            "socks5" => Kind::Socks5,
            "socks5h" if from_env => Kind::Socks5,
            _ => {
                return Err(ProxyError::Scheme {
                    from,
                    url: text.to_string(),
                    scheme,
                    allowed: if from_env {
                        "http, https, socks5 or socks5h"
                    } else {
                        "http, https or socks5"
                    },
                });
            }
        };
        let authority = uri.authority().ok_or_else(invalid)?.as_str();
        let (user, host_port) = match authority.rsplit_once('@') {
            Some((userinfo, rest)) => {
                let (u, p) = userinfo.split_once(':').unwrap_or((userinfo, ""));
                (Some((percent_decode(u), percent_decode(p))), rest)
            }
            None => (None, authority),
        };
        let host_port: http::uri::Authority = host_port.parse().map_err(|_| invalid())?;
        if host_port.host().is_empty() {
            return Err(invalid());
        }
        let port = host_port.port_u16().unwrap_or(match kind {
            Kind::Http => 80,
            Kind::Https => 443,
            Kind::Socks5 => 1080,
        });
        let scheme = match kind {
            Kind::Http => "http",
            Kind::Https => "https",
            Kind::Socks5 => "socks5",
        };
        let uri = format!("{scheme}://{}:{port}/", host_port.host())
            .parse()
            .map_err(|_| invalid())?;
        Ok(Proxy {
            kind,
            uri,
            user,
            from,
        })
    }

    /// For the log and errors: `http://host:port (proxy-url, as user "u")`; never the password.
    pub fn describe(&self) -> String {
        let uri = self.uri.to_string();
        let uri = uri.trim_end_matches('/');
        match &self.user {
            Some((u, _)) => format!("{uri} ({}, as user {u:?})", self.from),
            None => format!("{uri} ({})", self.from),
        }
    }

    /// Whether watchmux speaks TLS to the proxy itself (`https://`).
    pub fn is_https(&self) -> bool {
        self.kind == Kind::Https
    }

    /// `Proxy-Authorization: Basic …` from the URL's user and password, if it has them.
    fn basic_auth(&self) -> Option<HeaderValue> {
        let (u, p) = self.user.as_ref()?;
        crate::auth::basic_header(u, p).ok()
    }

    /// The `Proxy-Authorization` every request to an `http://` upstream carries when it goes
    /// through this proxy in absolute form (none for tunnels: the `CONNECT` carries it).
    pub fn forward_authorization(&self, upstream_https: bool) -> Option<HeaderValue> {
        match self.kind {
            Kind::Http | Kind::Https if !upstream_https => self.basic_auth(),
            _ => None,
        }
    }
}

/// `%XX` sequences decoded (a URL's user and password); anything else as it is.
fn percent_decode(s: &str) -> String {
    percent_encoding::percent_decode_str(s)
        .decode_utf8_lossy()
        .into_owned()
}

/// Whether Go's `ProxyFromEnvironment` proxies `host:port` given `NO_PROXY` (httpproxy's
/// `useProxy`): never `localhost` or a loopback address; not a host `no_proxy` lists.
fn uses_proxy(host: &str, port: u16, no_proxy: &str) -> bool {
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host)
        .to_ascii_lowercase();
    if host == "localhost" {
        return false;
    }
    let ip = host.parse::<IpAddr>().ok();
    if ip.is_some_and(|ip| ip.is_loopback()) {
        return false;
    }
    let port = port.to_string();
    for entry in no_proxy.split(',') {
        let entry = entry.trim().to_ascii_lowercase();
        if entry.is_empty() {
            continue;
        }
        if entry == "*" {
            return false;
        }
        if let Some((net, bits)) = entry.split_once('/') {
            if let (Some(ip), Ok(net), Ok(bits)) = (ip, net.parse::<IpAddr>(), bits.parse::<u8>())
                && in_network(ip, net, bits)
            {
                return false;
            }
            continue;
        }
        // `host:port`, `[v6]:port`, or a bare host (a bare IPv6 address has colons too).
        let (entry_host, entry_port) = match entry.parse::<IpAddr>() {
            Ok(_) => (entry.as_str(), ""),
            Err(_) => match entry.rsplit_once(':') {
                Some((h, p)) if !p.is_empty() && p.bytes().all(|c| c.is_ascii_digit()) => (h, p),
                _ => (entry.as_str(), ""),
            },
        };
        let entry_host = entry_host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(entry_host);
        if entry_host.is_empty() {
            continue;
        }
        let port_matches = entry_port.is_empty() || entry_port == port;
        if let Ok(entry_ip) = entry_host.parse::<IpAddr>() {
            if ip == Some(entry_ip) && port_matches {
                return false;
            }
            continue;
        }
        if ip.is_some() {
            continue;
        }
        // `name` matches the name and its subdomains; `.name` and `*.name` subdomains only.
        let entry_host = entry_host.strip_prefix('*').unwrap_or(entry_host);
        let (suffix, match_host) = match entry_host.strip_prefix('.') {
            Some(_) => (entry_host.to_string(), false),
            None => (format!(".{entry_host}"), true),
        };
        if (host.ends_with(&suffix) || (match_host && host == suffix[1..])) && port_matches {
            return false;
        }
    }
    true
}

fn in_network(ip: IpAddr, net: IpAddr, bits: u8) -> bool {
    match (ip, net) {
        (IpAddr::V4(a), IpAddr::V4(n)) if bits <= 32 => {
            let mask = u32::MAX.checked_shl(32 - u32::from(bits)).unwrap_or(0);
            u32::from(a) & mask == u32::from(n) & mask
        }
        (IpAddr::V6(a), IpAddr::V6(n)) if bits <= 128 => {
            let mask = u128::MAX.checked_shl(128 - u32::from(bits)).unwrap_or(0);
            u128::from(a) & mask == u128::from(n) & mask
        }
        _ => false,
    }
}

/// Connecting through the proxy failed. Its text says which step; the cause is its `source()`
/// (the upstream client writes the whole chain into its own error, once).
#[derive(Debug, thiserror::Error)]
#[error("through the proxy {proxy}: {step}")]
pub struct ProxyConnectError {
    proxy: Arc<str>,
    step: String,
    #[source]
    cause: Option<BoxError>,
}

/// The connector under the upstream client's TLS: TCP to the upstream, or through the proxy.
#[derive(Clone)]
pub struct Connector {
    route: Route,
    timeout: Duration,
}

#[derive(Clone)]
enum Route {
    Direct(HttpConnector),
    /// An `http(s)://` proxy, `CONNECT` tunnels (an `https://` upstream).
    Tunnel(Tunnel<HttpsConnector<HttpConnector>>, Arc<Proxy>),
    /// An `http(s)://` proxy, requests in absolute form (an `http://` upstream).
    Forward(HttpsConnector<HttpConnector>, Arc<Proxy>),
    /// A SOCKS5 proxy: TCP to it, then hyper-util's SOCKS5 handshake over that connection.
    Socks(HttpConnector, Arc<Proxy>),
}

impl Connector {
    /// Connects over `tcp`, through `proxy` when given; `tls` (the upstream's TLS settings) is
    /// used with an `https://` proxy. `timeout` bounds a connection through the proxy.
    pub fn new(
        tcp: HttpConnector,
        proxy: Option<&Proxy>,
        upstream_https: bool,
        tls: &rustls::ClientConfig,
        timeout: Duration,
    ) -> Connector {
        let route = match proxy {
            None => Route::Direct(tcp),
            Some(p) => {
                let p = Arc::new(p.clone());
                match p.kind {
                    Kind::Socks5 => Route::Socks(tcp, p),
                    Kind::Http | Kind::Https => {
                        let mut tls = tls.clone();
                        tls.alpn_protocols.clear();
                        let to_proxy = HttpsConnectorBuilder::new()
                            .with_tls_config(tls)
                            .https_or_http()
                            .enable_http1()
                            .wrap_connector(tcp);
                        if upstream_https {
                            let mut tunnel = Tunnel::new(p.uri.clone(), to_proxy);
                            if let Some(auth) = p.basic_auth() {
                                tunnel = tunnel.with_auth(auth);
                            }
                            Route::Tunnel(tunnel, p)
                        } else {
                            Route::Forward(to_proxy, p)
                        }
                    }
                }
            }
        };
        Connector { route, timeout }
    }
}

/// `dst` with its port written out (hyper-util's tunnels take a missing one for 443).
fn with_port(dst: Uri) -> Uri {
    if dst.port().is_some() {
        return dst;
    }
    let port = if dst.scheme_str() == Some("https") {
        443
    } else {
        80
    };
    let Some(host) = dst.host() else {
        return dst;
    };
    let authority = format!("{host}:{port}");
    let mut parts = dst.clone().into_parts();
    match authority.parse() {
        Ok(a) => {
            parts.authority = Some(a);
            Uri::from_parts(parts).unwrap_or(dst)
        }
        Err(_) => dst,
    }
}

async fn ready<S: Service<Uri>>(s: &mut S) -> Result<(), S::Error> {
    std::future::poll_fn(|cx| s.poll_ready(cx)).await
}

impl Service<Uri> for Connector {
    type Response = ProxyStream;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<ProxyStream, BoxError>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        // Every route's connector is always ready; each call readies its own clone.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, dst: Uri) -> Self::Future {
        let route = self.route.clone();
        let timeout = self.timeout;
        Box::pin(async move {
            let proxy = match &route {
                Route::Direct(_) => None,
                Route::Tunnel(_, p) | Route::Forward(_, p) | Route::Socks(_, p) => Some(p.clone()),
            };
            let connecting = connect(route, with_port(dst));
            match proxy {
                None => connecting.await,
                Some(p) => match tokio::time::timeout(timeout, connecting).await {
                    Ok(r) => r,
                    Err(_) => Err(step(
                        &p,
                        format!("no connection within {timeout:?}"),
                        Some(Box::new(std::io::Error::from(std::io::ErrorKind::TimedOut))),
                    )),
                },
            }
        })
    }
}

fn step(p: &Proxy, what: String, cause: Option<BoxError>) -> BoxError {
    Box::new(ProxyConnectError {
        proxy: p.describe().into(),
        step: what,
        cause,
    })
}

/// A connection made already, handed out once (to run the SOCKS5 handshake over it: hyper-util's
/// SOCKS errors keep no cause, so watchmux connects to the proxy itself).
struct Made(Option<TokioIo<TcpStream>>);

impl Service<Uri> for Made {
    type Response = TokioIo<TcpStream>;
    type Error = std::io::Error;
    type Future = std::future::Ready<std::io::Result<TokioIo<TcpStream>>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: Uri) -> Self::Future {
        std::future::ready(
            self.0
                .take()
                .ok_or_else(|| std::io::Error::other("the connection to the proxy was used")),
        )
    }
}

async fn connect(route: Route, dst: Uri) -> Result<ProxyStream, BoxError> {
    let target = dst.authority().map(|a| a.to_string()).unwrap_or_default();
    match route {
        Route::Direct(mut tcp) => {
            ready(&mut tcp).await?;
            let io = tcp.call(dst).await?;
            Ok(ProxyStream::new(MaybeHttpsStream::Http(io), false))
        }
        Route::Forward(mut to_proxy, p) => {
            let failed = |e: BoxError| step(&p, "cannot connect to the proxy".into(), Some(e));
            ready(&mut to_proxy).await.map_err(failed)?;
            let io = to_proxy.call(p.uri.clone()).await.map_err(failed)?;
            Ok(ProxyStream::new(io, true))
        }
        Route::Tunnel(mut tunnel, p) => {
            // hyper-util's tunnel error says which step failed ("tunnel error: unsuccessful",
            // "…: proxy authorization required") and keeps the cause of a failed connection.
            let failed = |e: BoxError| step(&p, format!("CONNECT {target}"), Some(e));
            ready(&mut tunnel).await.map_err(|e| failed(e.into()))?;
            let io = tunnel.call(dst).await.map_err(|e| failed(e.into()))?;
            Ok(ProxyStream::new(io, false))
        }
        Route::Socks(mut tcp, p) => {
            let failed = |e: BoxError| step(&p, "cannot connect to the proxy".into(), Some(e));
            ready(&mut tcp).await.map_err(|e| failed(e.into()))?;
            let io = tcp
                .call(p.uri.clone())
                .await
                .map_err(|e| failed(e.into()))?;
            let mut socks = SocksV5::new(p.uri.clone(), Made(Some(io)));
            if let Some((u, pw)) = &p.user {
                socks = socks.with_auth(u.clone(), pw.clone());
            }
            // Its text says what failed ("SOCKS error: connection refused", "…: credentials not
            // accepted"); it keeps no cause.
            let io = socks
                .call(dst)
                .await
                .map_err(|e| step(&p, format!("to {target}: {e}"), None))?;
            Ok(ProxyStream::new(MaybeHttpsStream::Http(io), false))
        }
    }
}

/// A connection to the upstream (maybe through a proxy), under the upstream's TLS. `forward`:
/// it is a connection to an `http(s)://` proxy that takes requests in absolute form.
pub struct ProxyStream {
    io: MaybeHttpsStream<TokioIo<TcpStream>>,
    forward: bool,
}

impl ProxyStream {
    fn new(io: MaybeHttpsStream<TokioIo<TcpStream>>, forward: bool) -> ProxyStream {
        ProxyStream { io, forward }
    }
}

impl Connection for ProxyStream {
    fn connected(&self) -> Connected {
        let c = self.io.connected();
        if self.forward { c.proxy(true) } else { c }
    }
}

impl hyper::rt::Read for ProxyStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl hyper::rt::Write for ProxyStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
    }

    fn from_env(upstream: &str, vars: &[(&str, &str)]) -> Option<String> {
        Proxy::from_environment(&upstream.parse().unwrap(), &env(vars))
            .unwrap()
            .map(|p| p.describe())
    }

    #[test]
    fn proxy_urls_parse_as_client_go_takes_them() {
        let p = Proxy::parse(
            "http://us%40er:p%3Ass@proxy.corp:3128/ignored",
            "proxy-url",
            false,
        )
        .unwrap();
        assert_eq!(p.kind, Kind::Http);
        assert_eq!(p.uri, "http://proxy.corp:3128/");
        assert_eq!(p.user, Some(("us@er".to_string(), "p:ss".to_string())));
        assert_eq!(
            p.describe(),
            "http://proxy.corp:3128 (proxy-url, as user \"us@er\")"
        );
        // Go's basic auth: base64("us@er:p:ss").
        assert_eq!(p.basic_auth().unwrap(), "Basic dXNAZXI6cDpzcw==");
        assert_eq!(
            Proxy::parse("socks5://127.0.0.1", "proxy-url", false)
                .unwrap()
                .uri,
            "socks5://127.0.0.1:1080/"
        );
        assert_eq!(
            Proxy::parse("https://[::1]", "proxy-url", false)
                .unwrap()
                .uri,
            "https://[::1]:443/"
        );
        for bad in [
            "ftp://x:1",
            "socks4://x:1",
            "proxy.corp:3128",
            "socks5h://x",
        ] {
            let e = Proxy::parse(bad, "proxy-url", false)
                .unwrap_err()
                .to_string();
            assert!(e.contains("must be http, https or socks5"), "{bad}: {e}");
        }
        assert!(Proxy::parse("http://", "proxy-url", false).is_err());
        // From the environment, a bare host:port is http://, and socks5h is accepted.
        let p = Proxy::parse("proxy.corp:3128", "HTTPS_PROXY", true).unwrap();
        assert_eq!(p.uri, "http://proxy.corp:3128/");
        assert_eq!(
            Proxy::parse("socks5h://s:1", "HTTPS_PROXY", true)
                .unwrap()
                .kind,
            Kind::Socks5
        );
    }

    #[test]
    fn the_environment_is_read_as_go_reads_it() {
        let https = [("HTTPS_PROXY", "http://p:1"), ("HTTP_PROXY", "http://q:2")];
        assert_eq!(
            from_env("https://kube.example:6443", &https).as_deref(),
            Some("http://p:1 (HTTPS_PROXY)")
        );
        assert_eq!(
            from_env("http://kube.example", &https).as_deref(),
            Some("http://q:2 (HTTP_PROXY)")
        );
        // The upper-case name first, an empty value is unset; lower case otherwise.
        assert_eq!(
            from_env(
                "https://k",
                &[("HTTPS_PROXY", ""), ("https_proxy", "socks5://s:9")]
            )
            .as_deref(),
            Some("socks5://s:9 (https_proxy)")
        );
        // ALL_PROXY is not Go's.
        assert_eq!(from_env("https://k", &[("ALL_PROXY", "http://a:1")]), None);
        // CGI: HTTP_PROXY is not trusted, HTTPS_PROXY is.
        let cgi = [
            ("HTTP_PROXY", "http://q:2"),
            ("HTTPS_PROXY", "http://p:1"),
            ("REQUEST_METHOD", "GET"),
        ];
        assert_eq!(from_env("http://k", &cgi), None);
        assert!(from_env("https://k", &cgi).is_some());
        // Never for localhost or loopback addresses.
        for local in [
            "https://localhost:6443",
            "https://127.0.0.2",
            "https://[::1]:6443",
        ] {
            assert_eq!(from_env(local, &https), None, "{local}");
        }
        // A bad value is an error naming the variable.
        let e = Proxy::from_environment(
            &"https://k".parse().unwrap(),
            &env(&[("HTTPS_PROXY", "ftp://p:1")]),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("HTTPS_PROXY \"ftp://p:1\": unsupported scheme"),
            "{e}"
        );
    }

    #[test]
    fn no_proxy_follows_go() {
        let uses = |host: &str, port: u16, no: &str| uses_proxy(host, port, no);
        assert!(uses("kube.example", 443, ""));
        assert!(!uses("kube.example", 443, "*"));
        assert!(!uses("kube.example", 443, "example.com, kube.example"));
        // A name matches itself and its subdomains; a leading dot or *. subdomains only.
        assert!(!uses("api.kube.example", 443, "kube.example"));
        assert!(uses("notkube.example", 443, "kube.example"));
        assert!(uses("kube.example", 443, ".kube.example"));
        assert!(!uses("a.kube.example", 443, ".kube.example"));
        assert!(uses("kube.example", 443, "*.kube.example"));
        assert!(!uses("a.kube.example", 443, "*.kube.example"));
        // Ports.
        assert!(!uses("kube.example", 6443, "kube.example:6443"));
        assert!(uses("kube.example", 443, "kube.example:6443"));
        // Addresses and ranges; a name entry never matches an address.
        assert!(!uses("10.1.2.3", 443, "10.0.0.0/8"));
        assert!(uses("11.1.2.3", 443, "10.0.0.0/8"));
        assert!(!uses("10.1.2.3", 6443, "10.1.2.3"));
        assert!(!uses("10.1.2.3", 6443, "10.1.2.3:6443"));
        assert!(uses("10.1.2.3", 443, "10.1.2.3:6443"));
        assert!(!uses("[fd00::1]", 443, "fd00::/8"));
        assert!(!uses("[fd00::1]", 443, "[fd00::1]:443"));
        assert!(uses("10.1.2.3", 443, "3"));
        // Case-insensitive; loopback and localhost never.
        assert!(!uses("Kube.Example", 443, "KUBE.example"));
        assert!(!uses("localhost", 443, ""));
        assert!(!uses("127.1.2.3", 443, ""));
    }

    #[test]
    fn missing_ports_are_written_out() {
        assert_eq!(with_port("https://h/x".parse().unwrap()), "https://h:443/x");
        assert_eq!(with_port("http://h".parse().unwrap()), "http://h:80/");
        assert_eq!(with_port("http://h:8/".parse().unwrap()), "http://h:8/");
        assert_eq!(
            with_port("https://[::1]/".parse().unwrap()),
            "https://[::1]:443/"
        );
    }
}
