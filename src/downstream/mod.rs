//! The downstream side: the HTTP server clients talk to, from the accepted connection to the
//! bytes of each answer.
//!
//! * [`accept`]: TLS and the peer's identity; the accept loop and connection settings are here.
//! * [`router`]: cache or pass-through, and the checks before either.
//! * [`list`], [`watch`], [`websocket`]: the cache's answers; `watch` is the per-watcher task
//!   that turns hub deliveries and log reads into frames, the writers put them on the wire.
//! * [`authz`]: delegated authentication and authorization of cached reads.
//! * [`health`], [`limits`]: health endpoints, request and watch limits.
//!
//! Must not talk to the upstream except through [`crate::passthrough`] and the authorizer.

pub mod accept;
pub mod authz;
pub mod health;
pub mod limits;
pub mod list;
pub mod router;
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

/// Serves plain HTTP/1.1 and HTTP/2 (with upgrades) on `listener` until the proxy is cancelled,
/// in the default `server.auth` mode.
pub async fn serve(proxy: Arc<App>, listener: TcpListener) {
    serve_with(proxy, listener, Arc::new(Acceptor::default())).await
}

/// [`serve`], accepting connections as `downstream` says: TLS (with client certificates) or not,
/// and the `server.auth` mode every request carries as a [`crate::auth::PeerAuth`] extension.
pub async fn serve_with(proxy: Arc<App>, listener: TcpListener, downstream: Arc<Acceptor>) {
    loop {
        // Draining (a child of `cancel`) stops accepting: the listener closes with this loop.
        let conn = tokio::select! {
            _ = proxy.draining.cancelled() => return,
            c = listener.accept() => c,
        };
        let Ok((stream, _)) = conn else { continue };
        let _ = stream.set_nodelay(true);
        let p = proxy.clone();
        let cancel = proxy.cancel.clone();
        let draining = proxy.draining.clone();
        let downstream = downstream.clone();
        let header_read_timeout = proxy.header_read_timeout;
        let max_header_bytes = proxy.max_header_bytes.max(8192);
        proxy.conns.spawn(async move {
            // The TLS handshake (if any) runs here, not in the accept loop: a slow client must
            // not hold up the others.
            let peer_addr = stream.peer_addr().ok();
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
            let accepted = tokio::select! {
                a = downstream.accept(stream) => a,
                _ = draining.cancelled() => return,
            };
            let (io, peer) = match accepted {
                Ok(x) => x,
                Err(e) => {
                    tracing::debug!(peer = ?peer_addr, error = %e, "TLS handshake failed");
                    return;
                }
            };
            let client_addr = peer_addr.map(|a| limits::ClientAddr(a.ip()));
            let svc = service_fn(move |mut req: Request<Incoming>| {
                let p = p.clone();
                req.extensions_mut().insert(peer.clone());
                if let Some(a) = client_addr {
                    req.extensions_mut().insert(a);
                }
                async move { Ok::<_, std::convert::Infallible>(handle(p, req).await) }
            });
            let mut builder = auto::Builder::new(TokioExecutor::new());
            // Header limits and the slow-header guard (hyper answers 431 past max_buf_size and
            // closes a connection whose headers are late, without a response).
            builder
                .http1()
                .timer(TokioTimer::new())
                .header_read_timeout(header_read_timeout)
                .max_buf_size(max_header_bytes);
            builder
                .http2()
                .timer(TokioTimer::new())
                .max_header_list_size(u32::try_from(max_header_bytes).unwrap_or(u32::MAX));
            let conn = builder.serve_connection_with_upgrades(TokioIo::new(io), svc);
            tokio::pin!(conn);
            tokio::select! {
                _ = conn.as_mut() => return,
                _ = draining.cancelled() => {}
            }
            // Graceful: HTTP/2 GOAWAY, HTTP/1 closes once the response in flight is done (a
            // watch's stream has just been ended); `cancel` drops whatever is left.
            conn.as_mut().graceful_shutdown();
            tokio::select! {
                _ = conn => {}
                _ = cancel.cancelled() => {}
            }
        });
    }
}

/// Binds `addr` and serves in the background; returns the bound address.
pub async fn bind_and_serve(proxy: Arc<App>, addr: SocketAddr) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    let p = proxy.clone();
    proxy.tasks.spawn(async move { serve(p, listener).await });
    Ok(local)
}

/// [`bind_and_serve`] with TLS and the `server.auth` mode of `downstream`
/// (see [`Acceptor::from_config`]).
pub async fn bind_and_serve_with(
    proxy: Arc<App>,
    addr: SocketAddr,
    downstream: Acceptor,
) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    let p = proxy.clone();
    let d = Arc::new(downstream);
    proxy
        .tasks
        .spawn(async move { serve_with(p, listener, d).await });
    Ok(local)
}
