//! The downstream side: the HTTP server clients talk to, from the accepted connection to the
//! bytes of each answer.
//!
//! * this file: the accept loop (a connection refused before HTTP is logged there, and counted
//!   when the PROXY protocol refused it) and the connection settings (HTTP/1 and HTTP/2, header
//!   limits, the slow-header guard, graceful draining, and the graceful end that moves clients
//!   between replicas: the HTTP/2 GOAWAY a request may draw, `server.goaway_chance`, and the
//!   end of a connection at `server.max_connection_age_secs`).
//! * [`accept`]: a trusted balancer's PROXY protocol header, then the TLS handshake and the
//!   peer's identity.
//! * [`proxy_protocol`]: that header: the sources trusted to send one, where it ends, the
//!   client it names.
//! * [`router`]: cache or pass-through, and the checks before either.
//! * [`list`], [`watch`], [`websocket`]: the cache's answers; `watch` is the per-watcher task
//!   that turns hub deliveries and log reads into frames, the writers put them on the wire.
//! * [`form`]: which wire form a read asks for (plain JSON or protobuf, Table,
//!   PartialObjectMetadata); [`table`]: the cache's answers in the Table and metadata forms,
//!   and a GET's object; [`protobuf`]: every answer in protobuf; [`parts`]: a large JSON list
//!   made on blocking threads, several parts at once.
//! * [`authz`]: delegated authentication and authorization of cached reads.
//! * [`health`], [`limits`]: health endpoints, request and watch limits.
//!
//! Must not talk to the upstream except through [`crate::passthrough`] and the authorizer, nor
//! turn errors into `Status` bodies itself (that is `crate::error`).

pub mod accept;
pub mod authz;
pub mod form;
pub mod frames;
pub mod get;
pub mod h1;
pub mod health;
pub mod limits;
pub mod list;
pub mod parts;
pub mod protobuf;
pub mod proxy_protocol;
pub mod read_point;
pub mod request_body;
pub mod router;
pub mod shards;
pub mod table;
pub mod watch;
pub mod websocket;

use std::net::SocketAddr;
use std::sync::Arc;

use http::Request;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;

use crate::app::App;
pub use accept::Acceptor;
pub use router::handle;

/// Serves plain HTTP/1.1 and HTTP/2 (with upgrades) on `listener` until the app is cancelled,
/// in the default `server.auth` mode.
pub async fn serve(app: Arc<App>, listener: TcpListener) {
    serve_with(app, listener, Arc::new(Acceptor::default())).await
}

/// [`serve`], accepting connections as `acceptor` says: TLS (with client certificates) or not,
/// and the `server.auth` mode every request carries as a [`crate::auth::PeerAuth`] extension.
pub async fn serve_with(app: Arc<App>, listener: TcpListener, acceptor: Arc<Acceptor>) {
    loop {
        // Draining (a child of `cancel`) stops accepting: the listener closes with this loop.
        let conn = tokio::select! {
            _ = app.draining.cancelled() => return,
            c = listener.accept() => c,
        };
        let Ok((mut stream, _)) = conn else { continue };
        let _ = stream.set_nodelay(true);
        let conn_app = app.clone();
        let cancel = app.cancel.clone();
        let draining = app.draining.clone();
        let acceptor = acceptor.clone();
        let header_read_timeout = app.header_read_timeout;
        let max_header_bytes = app.max_header_bytes.max(8192);
        app.conns.spawn(async move {
            // The PROXY header and the TLS handshake (if any) run here, not in the accept
            // loop: a slow client must not hold up the others.
            // A socket without a peer address has been disconnected already.
            let Ok(peer_addr) = stream.peer_addr() else {
                return;
            };
            // A connection that sends nothing at all is closed after the header read timeout
            // too (hyper's timer only starts once the HTTP/1 request is being read).
            let mut first = [0u8; 1];
            let sent = tokio::select! {
                r = tokio::time::timeout(header_read_timeout, stream.peek(&mut first)) => {
                    matches!(r, Ok(Ok(n)) if n > 0)
                }
                _ = draining.cancelled() => return,
            };
            if !sent {
                return;
            }
            let read = acceptor.client_addr(&mut stream, peer_addr, header_read_timeout);
            let client = tokio::select! {
                c = Box::pin(read) => c,
                _ = draining.cancelled() => return,
            };
            let client = match client {
                Ok(c) => c,
                Err(e) => {
                    // Counted before the connection closes (with this task), so that whoever
                    // sees it closed sees it counted. Named in a warning: a balancer sending no
                    // header or a broken one, or a client trying to name another, is a
                    // misconfiguration or an attack an operator must see.
                    match e.proxy_rejection() {
                        Some(reason) => {
                            conn_app.metrics.proxy_protocol_rejected(reason);
                            tracing::warn!(
                                peer = %peer_addr, error = %e,
                                "connection closed: PROXY protocol"
                            );
                        }
                        None => {
                            tracing::debug!(peer = %peer_addr, error = %e, "connection closed")
                        }
                    }
                    return;
                }
            };
            if client != peer_addr {
                tracing::debug!(peer = %peer_addr, %client, "PROXY protocol: the client behind");
            }
            let accepted = tokio::select! {
                // Boxed, as the hyper path below: a connection's task is as large as the
                // largest state it may be in, and an idle watch should not pay for these.
                a = Box::pin(acceptor.accept(stream, client)) => a,
                _ = draining.cancelled() => return,
            };
            let (io, peer) = match accepted {
                Ok(x) => x,
                Err(e) => {
                    tracing::debug!(peer = %peer_addr, error = %e, "connection closed");
                    return;
                }
            };
            let settings = h1::ConnSettings {
                peer,
                client_addr: Some(limits::ClientAddr(client.ip().to_canonical())),
                header_read_timeout,
                max_header_bytes,
                ends_at: (!conn_app.max_connection_age.is_zero()).then(|| {
                    tokio::time::Instant::now() + jittered_age(conn_app.max_connection_age)
                }),
            };
            // Cached watches over HTTP/1.1 are written by `h1`; hyper serves the rest.
            let served = tokio::select! {
                s = h1::serve(&conn_app, io, &settings, &draining) => s,
                _ = cancel.cancelled() => return,
            };
            if let h1::Served::ToHyper(io, read) = served {
                Box::pin(serve_hyper(
                    conn_app,
                    h1::Rewind::new(io, read),
                    settings,
                    draining,
                    cancel,
                ))
                .await;
            }
        });
    }
}

/// hyper serving a connection (HTTP/1.1 or HTTP/2) until it ends, gracefully at draining.
async fn serve_hyper(
    app: Arc<App>,
    io: h1::Rewind,
    settings: h1::ConnSettings,
    draining: tokio_util::sync::CancellationToken,
    cancel: tokio_util::sync::CancellationToken,
) {
    let h1::ConnSettings {
        peer,
        client_addr,
        header_read_timeout,
        max_header_bytes,
        ends_at,
    } = settings;
    let http2_max_concurrent_streams = app.http2_max_concurrent_streams;
    // Cancelled by the request that drew the GOAWAY (`server.goaway_chance`) or at the
    // connection's age (`server.max_connection_age_secs`); none when both are off, so the
    // connection's task polls no token for it.
    let goaway = (app.goaway_chance > 0.0 || ends_at.is_some())
        .then(tokio_util::sync::CancellationToken::new);
    let goaway_asked = goaway.clone();
    let metrics = app.metrics.clone();
    let svc = service_fn(move |req: Request<Incoming>| {
        let h2 = req.version() == http::Version::HTTP_2;
        if let Some(g) = &goaway_asked
            && h2
            && draws_goaway(app.goaway_chance)
        {
            g.cancel();
        }
        let app = app.clone();
        let mut req = req.map(request_body::ReqBody::Hyper);
        if let Some(g) = &goaway_asked {
            // HTTP/1 too: at the connection's age its watch (an HTTP/1 connection carries one
            // at a time) ends after a bookmark and the connection closes after it.
            req.extensions_mut().insert(ConnectionGoaway(g.clone()));
        }
        req.extensions_mut().insert(peer.clone());
        if let Some(a) = client_addr {
            req.extensions_mut().insert(a);
        }
        // Boxed: hyper keeps an HTTP/2 stream's service future in the stream's task for as
        // long as the stream lives, and the router's future is large.
        let in_flight = app.metrics.request_in_flight();
        Box::pin(async move {
            let resp = handle(app, req).await;
            drop(in_flight);
            Ok::<_, std::convert::Infallible>(resp)
        })
    });
    let mut builder = auto::Builder::new(TokioExecutor::new());
    // Header limits and the slow-header guard (hyper answers 431 past max_buf_size and
    // closes a connection whose headers are late, without a response); the HTTP/2 streams a
    // client may have open at once (hyper's default of 200 is fewer than one kubelet may
    // watch on its connection).
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(header_read_timeout)
        .max_buf_size(max_header_bytes);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_header_list_size(u32::try_from(max_header_bytes).unwrap_or(u32::MAX))
        .max_concurrent_streams(http2_max_concurrent_streams)
        // What one stream may have queued for its client beyond what the client's window
        // lets out: hyper's default (400 KB) times a kubelet's hundreds of watch-lists, each
        // sending its initial events at once, made gigabytes at a fleet's cold start.
        .max_send_buf_size(HTTP2_STREAM_SEND_BUFFER);
    let conn = builder.serve_connection_with_upgrades(TokioIo::new(io), svc);
    tokio::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => return,
        _ = draining.cancelled() => {}
        _ = async {
            match &goaway {
                Some(g) => g.cancelled().await,
                None => std::future::pending().await,
            }
        } => {
            tracing::debug!(peer = ?client_addr, "HTTP/2 GOAWAY (server.goaway_chance)");
            metrics.connection_goaway(GoawayCause::Chance);
        }
        _ = async {
            match ends_at {
                Some(t) => tokio::time::sleep_until(t).await,
                None => std::future::pending().await,
            }
        } => {
            tracing::debug!(peer = ?client_addr, "connection ended at server.max_connection_age_secs");
            metrics.connection_goaway(GoawayCause::Age);
            if let Some(g) = &goaway {
                g.cancel();
            }
        }
    }
    // Graceful: HTTP/2 GOAWAY (the streams in flight, the request that drew it included, go
    // on to their end; the cached watches end after a bookmark, at draining in the drain's
    // batches, at a drawn GOAWAY at once: `ConnectionGoaway`),
    // HTTP/1 closes once the response in flight is done; `cancel` drops whatever is left.
    conn.as_mut().graceful_shutdown();
    let _closing = metrics.connection_closing();
    tokio::select! {
        _ = conn => {}
        _ = cancel.cancelled() => {}
    }
}

/// A request extension: the graceful end its connection may come to to move its client, a
/// GOAWAY an HTTP/2 request draws (`server.goaway_chance`) or the connection's age
/// (`server.max_connection_age_secs`). A cached watch on the connection ends when it fires,
/// just after a bookmark at its resourceVersion: the GOAWAY alone would leave the connection
/// open for as long as its watches last (up to twice `server.min_request_timeout_secs`), and the
/// client's watches, re-made on its new connection, go where the balancer sends that.
#[derive(Debug, Clone)]
pub struct ConnectionGoaway(pub tokio_util::sync::CancellationToken);

/// Why watchmux ended a connection to move its client, the `cause` of
/// `watchmux_connection_goaways_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GoawayCause {
    /// An HTTP/2 request drew it (`server.goaway_chance`).
    Chance,
    /// The connection reached `server.max_connection_age_secs`.
    Age,
}

impl GoawayCause {
    /// Every value, in declaration order: a value `as usize` is its index.
    pub const ALL: [GoawayCause; 2] = [GoawayCause::Chance, GoawayCause::Age];

    /// The metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            GoawayCause::Chance => "chance",
            GoawayCause::Age => "age",
        }
    }
}

/// A connection's age limit: `max` give or take 10 % (gRPC's jitter for `MAX_CONNECTION_AGE`),
/// so that the connections a fleet opened together (after a replica roll) do not all end
/// together again.
fn jittered_age(max: std::time::Duration) -> std::time::Duration {
    max.mul_f64(rand::random_range(0.9..1.1))
}

/// Whether an HTTP/2 request draws its connection's GOAWAY, with probability `chance`
/// (kube-apiserver's `WithProbabilisticGoaway`).
fn draws_goaway(chance: f64) -> bool {
    rand::random::<f64>() < chance
}

/// Bytes an HTTP/2 stream may hold queued for its client; beyond this a watch's events wait in
/// its queue of shared events, where they cost no copy.
const HTTP2_STREAM_SEND_BUFFER: usize = 64 * 1024;

/// The longest accept queue asked for; the kernel caps it at `net.core.somaxconn` (as Go's
/// listeners, and so kube-apiserver's, ask for that cap). Rust's default of 128 overflows when a
/// fleet of clients reconnects at once, and each refused SYN is retried only after a second.
const ACCEPT_BACKLOG: u32 = 65535;

/// A listening socket on `addr` (address reuse as `std` sets it, a deep accept queue).
fn listen(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(ACCEPT_BACKLOG)
}

/// Binds `addr` and serves in the background; returns the bound address.
pub async fn bind_and_serve(app: Arc<App>, addr: SocketAddr) -> std::io::Result<SocketAddr> {
    let listener = listen(addr)?;
    let local = listener.local_addr()?;
    let served = app.clone();
    app.tasks
        .spawn(async move { serve(served, listener).await });
    Ok(local)
}

/// [`bind_and_serve`] with TLS and the `server.auth` mode of `acceptor`
/// (see [`Acceptor::from_config`]).
pub async fn bind_and_serve_with(
    app: Arc<App>,
    addr: SocketAddr,
    acceptor: Acceptor,
) -> std::io::Result<SocketAddr> {
    let listener = listen(addr)?;
    let local = listener.local_addr()?;
    let served = app.clone();
    let acceptor = Arc::new(acceptor);
    app.tasks
        .spawn(async move { serve_with(served, listener, acceptor).await });
    Ok(local)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 200 clients connecting at once to a listener that has not accepted yet all get their
    /// connection (a queue of 128, Rust's default, would leave the rest retrying their SYN) —
    /// or as many as the kernel's cap allows, where `net.core.somaxconn` is lower.
    #[tokio::test]
    async fn the_accept_queue_holds_a_burst_of_clients() {
        let cap = std::fs::read_to_string("/proc/sys/net/core/somaxconn")
            .ok()
            .and_then(|s| s.trim().parse::<usize>().ok())
            .unwrap_or(4096);
        let n = cap.min(200);
        let listener = listen(SocketAddr::from(([127, 0, 0, 1], 0))).unwrap();
        let addr = listener.local_addr().unwrap();
        let connects = (0..n).map(|_| {
            tokio::time::timeout(
                std::time::Duration::from_secs(5),
                tokio::net::TcpStream::connect(addr),
            )
        });
        let done = futures_util::future::join_all(connects).await;
        let connected = done.iter().filter(|r| matches!(r, Ok(Ok(_)))).count();
        assert_eq!(connected, n);
        drop(listener);
    }
}
