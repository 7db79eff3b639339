//! A simulated node's one HTTP/2 connection, which all its watches, its Lease writes and the
//! probe's reads share as client-go's cached transport shares one: over TLS (ALPN `h2`, the
//! run's CA) or h2c (HTTP/2 with prior knowledge on plain TCP), kept up by a task that redials
//! with client-go's reflector back-off (0.8 s doubling to 30 s, up to twice that with jitter)
//! when it fails, at once when the server ended it gracefully (a GOAWAY: the streams still open
//! finish on the old connection; at most one dial per 100 ms), and pings like client-go (30 s
//! idle, 15 s timeout).
//!
//! Also the request helpers the node's tasks send on it. It reads no events: the informers do
//! ([`super::informer`]).

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http2::SendRequest;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::super::client::{Endpoint, dial_tls};
use super::counters::Fleet;

/// The request body type of every request on a node's connection.
pub type Body = Full<Bytes>;

/// A sender of requests on a node's connection.
pub type Sender = SendRequest<Body>;

/// client-go's reflector back-off: 800 ms, doubling up to 30 s, each wait up to twice as long
/// with jitter.
#[derive(Debug, Clone, Copy)]
pub struct Backoff {
    next: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            next: Backoff::FIRST,
        }
    }
}

impl Backoff {
    const FIRST: Duration = Duration::from_millis(800);
    const MAX: Duration = Duration::from_secs(30);

    /// The next wait (and doubles the one after).
    pub fn next_wait(&mut self) -> Duration {
        let d = self.next.mul_f64(1.0 + rand::random::<f64>());
        self.next = (self.next * 2).min(Backoff::MAX);
        d
    }

    /// Starts over (after a success).
    pub fn reset(&mut self) {
        self.next = Backoff::FIRST;
    }
}

/// The shortest time between a connection's dial and the next one's after a graceful end (a
/// GOAWAY): a young connection's GOAWAY is followed by a dial this long after its own.
const GRACEFUL_REDIAL_EVERY: Duration = Duration::from_millis(100);

/// A node's connection as its tasks see it: the current sender, when connected.
#[derive(Clone)]
pub struct NodeConn {
    rx: watch::Receiver<Option<Sender>>,
    /// `http://addr` or `https://addr`: the scheme and authority of every request URI.
    pub base: String,
    /// The `Authorization` header of every request (`Bearer <token>`), when it has a token.
    auth: Option<http::HeaderValue>,
    /// How many connections were dialed: the newest one's number (counted before its sender
    /// is published), what a request left unanswered is traced to.
    dialed: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl NodeConn {
    /// A request of `method` to `uri` as every request on this connection goes: the fleet's
    /// User-Agent, and the client's bearer token when it has one.
    pub fn request(&self, method: http::Method, uri: &str) -> http::request::Builder {
        let mut b = http::Request::builder()
            .method(method)
            .uri(uri)
            .header(http::header::USER_AGENT, super::USER_AGENT);
        if let Some(auth) = &self.auth {
            b = b.header(http::header::AUTHORIZATION, auth.clone());
        }
        b
    }

    /// The number of the newest connection dialed (from 1; 0 before the first) and whether
    /// it is up (its sender published).
    pub fn generation(&self) -> (u64, bool) {
        (
            self.dialed.load(std::sync::atomic::Ordering::Relaxed),
            self.rx.borrow().is_some(),
        )
    }

    /// Resolves once connection number `n` is no longer the newest one up: replaced, or
    /// down.
    pub async fn replaced(&self, n: u64) {
        let mut rx = self.rx.clone();
        while rx.borrow_and_update().is_some() && self.generation().0 == n {
            if rx.changed().await.is_err() {
                return;
            }
        }
    }

    /// Waits for a live connection (or `stop`); `None` once stopped.
    pub async fn sender(&mut self, stop: &CancellationToken) -> Option<Sender> {
        loop {
            if let Some(s) = self.rx.borrow_and_update().as_ref()
                && !s.is_closed()
            {
                return Some(s.clone());
            }
            tokio::select! {
                _ = stop.cancelled() => return None,
                r = self.rx.changed() => {
                    if r.is_err() {
                        return None;
                    }
                }
            }
        }
    }
}

/// A connected stream, plain TCP or TLS.
trait Io: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send> Io for T {}

/// An HTTP/2 connection's driving future.
type Driver = hyper::client::conn::http2::Connection<TokioIo<Box<dyn Io>>, Body, TokioExecutor>;

/// Opens one HTTP/2 connection to `ep` (TLS when it has a connector, h2c otherwise).
async fn dial(ep: &Endpoint) -> std::io::Result<(Sender, Driver)> {
    let io: Box<dyn Io> = match &ep.tls {
        Some(tls) => {
            let s = dial_tls(ep.addr, tls).await?;
            if s.get_ref().1.alpn_protocol() != Some(b"h2".as_slice()) {
                return Err(std::io::Error::other("the server did not negotiate h2"));
            }
            Box::new(s)
        }
        None => {
            let s = tokio::net::TcpStream::connect(ep.addr).await?;
            s.set_nodelay(true)?;
            Box::new(s)
        }
    };
    hyper::client::conn::http2::Builder::new(TokioExecutor::new())
        .timer(TokioTimer::new())
        .keep_alive_interval(Duration::from_secs(30))
        .keep_alive_timeout(Duration::from_secs(15))
        .keep_alive_while_idle(true)
        .handshake(TokioIo::new(io))
        .await
        .map_err(|e| std::io::Error::other(format!("HTTP/2 handshake: {e}")))
}

/// Starts keeping a connection to `ep` up until `stop`, in a task of `tasks`; returns the
/// handle its users wait on, whose requests carry `token` as their bearer token when given.
pub fn connect(
    tasks: &tokio_util::task::TaskTracker,
    ep: Endpoint,
    token: Option<&str>,
    fleet: std::sync::Arc<Fleet>,
    stop: CancellationToken,
) -> NodeConn {
    let auth = token.map(|t| {
        let mut v = http::HeaderValue::from_str(&format!("Bearer {t}"))
            .expect("the fleet's tokens are header values");
        v.set_sensitive(true);
        v
    });
    let (tx, rx) = watch::channel(None);
    let dialed = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let dialed_w = dialed.clone();
    let scheme = if ep.tls.is_some() { "https" } else { "http" };
    let base = format!("{scheme}://{}", ep.addr);
    tasks.spawn(async move {
        let mut backoff = Backoff::default();
        loop {
            let dialed = tokio::select! {
                _ = stop.cancelled() => break,
                d = dial(&ep) => d,
            };
            match dialed {
                Ok((sender, driver)) => {
                    Fleet::add(&fleet.counts.dials);
                    backoff.reset();
                    dialed_w.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    tx.send_replace(Some(sender));
                    let up = tokio::time::Instant::now();
                    let graceful = tokio::select! {
                        _ = stop.cancelled() => break,
                        r = driver => match r {
                            Ok(()) => true,
                            Err(e) => {
                                // hyper's text is "http2 error"; the cause (a keep-alive
                                // timeout, a GOAWAY, a reset) is in its sources.
                                let why = crate::httpfuzz::wire::chain(&e);
                                fleet.error(|| format!("HTTP/2 connection: {why}"));
                                false
                            }
                        },
                    };
                    tx.send_replace(None);
                    Fleet::add(&fleet.counts.conns_lost);
                    // A GOAWAY (or a clean close): as client-go's transport, the next request
                    // dials a new connection at once, while the streams still open on the old
                    // one run to their end. (A server that ends every connection at once is
                    // dialed at most every GRACEFUL_REDIAL_EVERY.)
                    if graceful {
                        let wait = GRACEFUL_REDIAL_EVERY.saturating_sub(up.elapsed());
                        tokio::select! {
                            _ = stop.cancelled() => break,
                            _ = tokio::time::sleep(wait) => {}
                        }
                        continue;
                    }
                }
                Err(e) => {
                    Fleet::add(&fleet.counts.dial_failures);
                    fleet.error(|| format!("connecting to {}: {e}", ep.addr));
                }
            }
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = tokio::time::sleep(backoff.next_wait()) => {}
            }
        }
        // Dropping the sender and the driver closes the connection.
        tx.send_replace(None);
    });
    NodeConn {
        rx,
        base,
        auth,
        dialed,
    }
}

/// A response read whole (small answers only: Lease writes, probe reads).
#[derive(Debug, Clone, Default)]
pub struct Answer {
    /// HTTP status.
    pub status: u16,
    /// `Retry-After` seconds, when given.
    pub retry_after: Option<u64>,
    /// The body.
    pub body: Bytes,
}

/// Sends `method uri` on `sender` as `conn`'s requests go ([`NodeConn::request`]), with `body`
/// (JSON when not empty) asking for `accept`, and reads the whole answer.
pub async fn exchange(
    conn: &NodeConn,
    sender: &mut Sender,
    method: http::Method,
    uri: &str,
    accept: &str,
    body: Bytes,
) -> Result<Answer, String> {
    let mut req = conn
        .request(method, uri)
        .header(http::header::ACCEPT, accept);
    if !body.is_empty() {
        req = req.header(http::header::CONTENT_TYPE, "application/json");
    }
    let req = req.body(Full::new(body)).map_err(|e| e.to_string())?;
    sender.ready().await.map_err(|e| e.to_string())?;
    let resp = sender.send_request(req).await.map_err(|e| e.to_string())?;
    let status = resp.status().as_u16();
    let retry_after = retry_after(resp.headers());
    let body = resp
        .into_body()
        .collect()
        .await
        .map_err(|e| e.to_string())?
        .to_bytes();
    Ok(Answer {
        status,
        retry_after,
        body,
    })
}

/// A response's `Retry-After` seconds.
pub fn retry_after(h: &http::HeaderMap) -> Option<u64> {
    h.get(http::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_thirty_seconds_with_jitter_and_resets() {
        let mut b = Backoff::default();
        let waits: Vec<Duration> = (0..8).map(|_| b.next_wait()).collect();
        assert!(waits[0] >= Duration::from_millis(800) && waits[0] <= Duration::from_millis(1600));
        assert!(waits[7] >= Duration::from_secs(30) && waits[7] <= Duration::from_secs(60));
        b.reset();
        assert!(b.next_wait() <= Duration::from_millis(1600));
    }
}
