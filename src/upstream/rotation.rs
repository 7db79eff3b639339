//! Closing the upstream connections made with a client certificate that has been replaced.
//!
//! A TLS connection keeps the identity of its handshake for as long as it lives, and the pools
//! keep connections for long (an HTTP/2 connection carries every reflector's watch). When an exec
//! credential plugin hands watchmux a new client certificate, the connections made with the old
//! one are closed, as client-go's `connrotation` dialer does: their requests fail (a reflector
//! watches again, from where it was) and new connections present the new certificate.
//!
//! [`Tracked`] wraps the pools' connector (under TLS): each connection it makes registers with
//! its [`ConnectionTracker`]; [`ConnectionTracker::close_all`] marks every registered connection
//! closed and wakes its task, whose next read or write then fails. Without a tracker the wrapper
//! only forwards. This module must not decide when to close (the exec credentials do).

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::task::{Context, Poll};

use futures_util::task::AtomicWaker;
use http::Uri;
use hyper::rt::{Read, ReadBufCursor, Write};
use hyper_util::client::legacy::connect::{Connected, Connection};
use parking_lot::Mutex;
use tower_service::Service;

/// The connections made through a [`Tracked`] connector (closed ones are forgotten).
#[derive(Debug, Clone, Default)]
pub struct ConnectionTracker {
    live: Arc<Mutex<Vec<Weak<ConnState>>>>,
}

/// One connection's side of the tracker.
#[derive(Debug, Default)]
struct ConnState {
    closed: AtomicBool,
    read: AtomicWaker,
    write: AtomicWaker,
}

impl ConnectionTracker {
    fn register(&self) -> Arc<ConnState> {
        let state = Arc::new(ConnState::default());
        let mut live = self.live.lock();
        live.retain(|w| w.strong_count() > 0);
        live.push(Arc::downgrade(&state));
        state
    }

    /// Closes every connection made so far (those in use too); returns how many were open.
    pub fn close_all(&self) -> usize {
        let live = std::mem::take(&mut *self.live.lock());
        let mut closed = 0;
        for s in live.iter().filter_map(Weak::upgrade) {
            s.closed.store(true, Ordering::Release);
            s.read.wake();
            s.write.wake();
            closed += 1;
        }
        closed
    }

    /// How many tracked connections are open.
    pub fn open(&self) -> usize {
        self.live
            .lock()
            .iter()
            .filter(|w| w.strong_count() > 0)
            .count()
    }
}

/// A connector whose connections a [`ConnectionTracker`] can close (none without one).
#[derive(Debug, Clone)]
pub struct Tracked<C> {
    inner: C,
    tracker: Option<ConnectionTracker>,
}

impl<C> Tracked<C> {
    /// `inner`'s connections, registered with `tracker` if there is one.
    pub fn new(inner: C, tracker: Option<ConnectionTracker>) -> Tracked<C> {
        Tracked { inner, tracker }
    }
}

impl<C> Service<Uri> for Tracked<C>
where
    C: Service<Uri>,
    C::Future: Send + 'static,
    C::Response: Send + 'static,
    C::Error: Send + 'static,
{
    type Response = TrackedIo<C::Response>;
    type Error = C::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let connecting = self.inner.call(uri);
        let tracker = self.tracker.clone();
        Box::pin(async move {
            let io = connecting.await?;
            // Registered before the TLS handshake on top of it, so a certificate replaced from
            // now on closes it.
            let state = tracker.map(|t| t.register());
            Ok(TrackedIo { io, state })
        })
    }
}

/// A connection made through [`Tracked`]: forwards everything until closed by its tracker, then
/// fails every read and write.
#[derive(Debug)]
pub struct TrackedIo<T> {
    io: T,
    state: Option<Arc<ConnState>>,
}

fn closed() -> io::Error {
    io::Error::new(
        io::ErrorKind::ConnectionAborted,
        "closed by watchmux: the client certificate it was made with has been replaced",
    )
}

impl<T> TrackedIo<T> {
    /// Whether the tracker closed it; registers `waker` to be woken when it does.
    fn is_closed(&self, waker: impl FnOnce(&ConnState)) -> bool {
        match &self.state {
            Some(s) => {
                waker(s);
                s.closed.load(Ordering::Acquire)
            }
            None => false,
        }
    }
}

impl<T: Read + Unpin> Read for TrackedIo<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        if self.is_closed(|s| s.read.register(cx.waker())) {
            return Poll::Ready(Err(closed()));
        }
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<T: Write + Unpin> Write for TrackedIo<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if self.is_closed(|s| s.write.register(cx.waker())) {
            return Poll::Ready(Err(closed()));
        }
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        if self.is_closed(|s| s.write.register(cx.waker())) {
            return Poll::Ready(Err(closed()));
        }
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.is_closed(|s| s.write.register(cx.waker())) {
            return Poll::Ready(Err(closed()));
        }
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

impl<T: Connection> Connection for TrackedIo<T> {
    fn connected(&self) -> Connected {
        self.io.connected()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper_util::rt::TokioIo;
    use tokio::io::AsyncWriteExt;

    /// One read from `io`: how many bytes, and `io` back.
    async fn read<T: Read + Unpin>(mut io: T) -> (io::Result<usize>, T) {
        let mut buf = [0u8; 16];
        let r = std::future::poll_fn(|cx| {
            let mut rb = hyper::rt::ReadBuf::new(&mut buf);
            let r = Pin::new(&mut io).poll_read(cx, rb.unfilled());
            r.map(|r| r.map(|()| rb.filled().len()))
        })
        .await;
        (r, io)
    }

    /// A connection closed by its tracker fails its pending read at once, and later writes.
    #[tokio::test]
    async fn close_all_fails_a_pending_read() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move { listener.accept().await.unwrap().0 });
        let tracker = ConnectionTracker::default();
        let mut http = hyper_util::client::legacy::connect::HttpConnector::new();
        http.enforce_http(false);
        let mut connector = Tracked::new(http, Some(tracker.clone()));
        let uri: Uri = format!("http://{addr}").parse().unwrap();
        let io = connector.call(uri).await.unwrap();
        let mut peer = server.await.unwrap();
        assert_eq!(tracker.open(), 1);

        // Data flows…
        peer.write_all(b"x").await.unwrap();
        let (n, io) = read(io).await;
        assert_eq!(n.unwrap(), 1);
        // …until the tracker closes it: a read waiting for data fails at once.
        let reading = tokio::spawn(read(io));
        tokio::task::yield_now().await;
        assert_eq!(tracker.close_all(), 1);
        let (r, mut io) = reading.await.unwrap();
        assert_eq!(r.unwrap_err().kind(), io::ErrorKind::ConnectionAborted);
        let w = std::future::poll_fn(|cx| Pin::new(&mut io).poll_write(cx, b"y")).await;
        assert_eq!(w.unwrap_err().kind(), io::ErrorKind::ConnectionAborted);
        // Closed connections are forgotten; new ones are tracked afresh.
        assert_eq!(tracker.close_all(), 0);
        drop(io);
        assert_eq!(tracker.open(), 0);
    }

    /// Without a tracker, the wrapper only forwards.
    #[tokio::test]
    async fn untracked_connections_just_forward() {
        let (a, mut b) = tokio::io::duplex(64);
        let io = TrackedIo {
            io: TokioIo::new(a),
            state: None,
        };
        b.write_all(b"hello").await.unwrap();
        let (n, _) = read(io).await;
        assert_eq!(n.unwrap(), 5);
    }
}
