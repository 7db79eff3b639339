//! The HTTP/1.1 path of cached watches: a connection whose request is a watch of a cached
//! resource is served here, by a loop that writes the watch's chunks to the socket itself;
//! every other connection, from its first request that is not such a watch, is handed to hyper
//! unchanged (the bytes already read go with it).
//!
//! Why: hyper keeps, for every connection, a read buffer that never shrinks, a write buffer, a
//! dispatcher and its state — about 12 KB that an idle watch does not need — and a delivery
//! passes its body channel and its task. Here an idle watch costs its socket (and TLS state),
//! this loop's small state and the watch itself ([`super::watch`], polled from this loop): no
//! read buffer is kept once the request is read, and a delivery wakes this one task, which
//! writes every frame ready as one chunk with one vectored write, without allocating.
//!
//! What the client sees is what hyper would send: the router's answer (the same code, the same
//! headers; `date` and `transfer-encoding: chunked` added as hyper adds them), the same chunked
//! framing, keep-alive (the next request on the connection is read here again), the header read
//! timeout and size limit (a head that is too large or does not parse goes to hyper, which
//! answers it as before), and the end of the stream at the watch's timeout or at shutdown.
//!
//! Owns the HTTP/1.1 framing of these answers only: it must not decide anything a request is
//! answered with (the router does) nor parse anything but request heads.

use std::io::{self, IoSlice};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use futures_util::Stream;
use http::{HeaderMap, HeaderName, HeaderValue, Method, Request, Response, Version};
use http_body_util::BodyExt;
use parking_lot::Mutex;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio_util::sync::CancellationToken;

use super::accept::Io;
use super::limits::Permit;
use super::request_body::ReqBody;
use super::watch::{Out, WatchStream};
use crate::app::App;
use kube_wire::response::Body;

/// Most header lines a request may have (hyper's default).
const MAX_HEADERS: usize = 100;

/// Most frames, and bytes, written as one chunk.
const MAX_BATCH_FRAMES: usize = 48;
const MAX_BATCH_BYTES: usize = 256 * 1024;

/// Most `IoSlice`s of one write: a chunk's size line, its frames' parts, its CRLF.
const MAX_SLICES: usize = MAX_BATCH_FRAMES * 3 + 2;

thread_local! {
    /// A frame list for the next chunk written on this thread. A connection takes it while it
    /// gathers and writes a chunk and gives it back after (an idle connection holds none), so
    /// a thread's steady stream of chunks reuses one list and allocates nothing.
    static SPARE_FRAMES: std::cell::Cell<Vec<Out>> = const { std::cell::Cell::new(Vec::new()) };
}

/// Gives `frames` back to this thread's spare (emptied), keeping the larger of the two lists.
fn give_back(frames: &mut Vec<Out>) {
    let mut v = std::mem::take(frames);
    v.clear();
    SPARE_FRAMES.with(|s| {
        let spare = s.take();
        s.set(if spare.capacity() >= v.capacity() {
            spare
        } else {
            v
        });
    });
}

/// Put into a request's extensions by this path: the router then answers a cached watch with
/// [`direct_response`] instead of a hyper body.
#[derive(Debug, Clone, Copy)]
pub struct Direct;

/// A watch answered by [`direct_response`]: the stream and the slot it holds, for this path to
/// write. In an `Arc` only because extensions must be `Clone`.
#[derive(Clone)]
struct DirectWatch(Arc<Mutex<Option<(WatchStream, Permit)>>>);

/// The router's answer to a cached watch read by this path: the watch's head, its stream
/// carried beside it for [`serve`] to write.
pub fn direct_response(stream: WatchStream, protobuf: bool, permit: Permit) -> Response<Body> {
    let mut r = super::watch::watch_head(protobuf);
    r.extensions_mut()
        .insert(DirectWatch(Arc::new(Mutex::new(Some((stream, permit))))));
    r
}

/// What every request of a connection carries, and the connection's settings.
#[derive(Debug, Clone)]
pub struct ConnSettings {
    /// The peer's authentication (see [`crate::auth::PeerAuth`]).
    pub peer: crate::auth::PeerAuth,
    /// The client's address (see [`super::limits::ClientAddr`]).
    pub client_addr: Option<super::limits::ClientAddr>,
    /// `server.header_read_timeout`.
    pub header_read_timeout: Duration,
    /// `server.max_header_bytes` (at least 8 KiB).
    pub max_header_bytes: usize,
    /// When the connection reaches `server.max_connection_age_secs` (jittered), if set: past
    /// it no further request is read on it (here, its watch runs to its own end first).
    pub ends_at: Option<tokio::time::Instant>,
}

/// How [`serve`] left a connection.
pub enum Served {
    /// Done: closed, or failed.
    Done,
    /// Not a cached watch: hyper serves the rest, starting with these bytes already read.
    ToHyper(Box<dyn Io>, Bytes),
}

/// Serves the connection's requests as long as they are cached watches (see the module doc).
pub async fn serve(
    app: &Arc<App>,
    mut io: Box<dyn Io>,
    s: &ConnSettings,
    draining: &CancellationToken,
) -> Served {
    let mut buf = BytesMut::new();
    loop {
        let head = match read_head(&mut io, &mut buf, s, draining).await {
            HeadRead::Head(h) => h,
            HeadRead::NotOurs => return Served::ToHyper(io, buf.freeze()),
            HeadRead::Closed => return Served::Done,
        };
        let (len, keep_alive) = (head.len, head.keep_alive);
        let Some(mut req) = head.into_request() else {
            return Served::ToHyper(io, buf.freeze());
        };
        let info = app.metrics.classify(&req);
        if info.verb != "watch" || info.cached.is_none() {
            return Served::ToHyper(io, buf.freeze());
        }
        buf.advance(len);
        if buf.is_empty() {
            // What a request head needed is given back: an idle watch keeps no read buffer.
            buf = BytesMut::new();
        }
        req.extensions_mut().insert(s.peer.clone());
        if let Some(a) = s.client_addr {
            req.extensions_mut().insert(a);
        }
        req.extensions_mut().insert(Direct);
        // Boxed: the router's future is large (every kind of answer), and the connection's
        // task would otherwise keep room for it for as long as the watch lasts.
        let in_flight = app.metrics.request_in_flight();
        let resp = Box::pin(super::router::handle(app.clone(), req)).await;
        drop(in_flight);
        let direct = resp
            .extensions()
            .get::<DirectWatch>()
            .map(|DirectWatch(w)| w.lock().take());
        let finished = match direct {
            Some(taken) => match taken {
                Some((stream, permit)) => {
                    let (parts, _) = resp.into_parts();
                    let r = write_watch(&mut io, &mut buf, parts, stream, s).await;
                    drop(permit);
                    r
                }
                None => Err(io::Error::other("watch taken twice")),
            },
            None => Box::pin(write_response(&mut io, resp)).await,
        };
        let aged = s.ends_at.is_some_and(|t| t <= tokio::time::Instant::now());
        if aged && finished.is_ok() && keep_alive && !draining.is_cancelled() {
            app.metrics.connection_goaway(super::GoawayCause::Age);
        }
        if finished.is_err() || !keep_alive || draining.is_cancelled() || aged {
            let _ = io.shutdown().await;
            return Served::Done;
        }
    }
}

/// A parsed request head.
struct Head {
    method: Method,
    target: String,
    headers: HeaderMap,
    /// Its length in the buffer.
    len: usize,
    /// The connection stays open after the answer (HTTP/1.1 without `Connection: close`).
    keep_alive: bool,
    /// Only a GET without a body, an upgrade or an expectation may be served here.
    plain_get: bool,
}

impl Head {
    /// The request, if this path may serve it (its headers moved into it).
    fn into_request(self) -> Option<Request<ReqBody>> {
        if !self.plain_get {
            return None;
        }
        let mut req = Request::builder()
            .method(self.method)
            .uri(self.target)
            .version(Version::HTTP_11)
            .body(ReqBody::Empty)
            .ok()?;
        // Moved, not copied: the head is not kept for the watch's life.
        *req.headers_mut() = self.headers;
        Some(req)
    }
}

enum HeadRead {
    Head(Head),
    /// Not a head this path reads (HTTP/2's preface, HTTP/1.0, a malformed or oversized head):
    /// hyper's to answer.
    NotOurs,
    /// The client left, sent nothing in time, or the server is draining.
    Closed,
}

/// Reads until `buf` holds a complete request head.
async fn read_head(
    io: &mut Box<dyn Io>,
    buf: &mut BytesMut,
    s: &ConnSettings,
    draining: &CancellationToken,
) -> HeadRead {
    // hyper's header read timeout also runs from the moment it waits for a head.
    let deadline = tokio::time::Instant::now() + s.header_read_timeout;
    loop {
        match parse_head(buf) {
            Parsed::Complete(h) => return HeadRead::Head(h),
            Parsed::Invalid => return HeadRead::NotOurs,
            Parsed::Partial => {}
        }
        if buf.len() >= s.max_header_bytes {
            return HeadRead::NotOurs;
        }
        buf.reserve(1024);
        let read = tokio::select! {
            r = tokio::io::AsyncReadExt::read_buf(io, buf) => r,
            _ = tokio::time::sleep_until(deadline) => return HeadRead::Closed,
            _ = draining.cancelled() => return HeadRead::Closed,
        };
        match read {
            Ok(0) | Err(_) => return HeadRead::Closed,
            Ok(_) => {}
        }
    }
}

enum Parsed {
    Complete(Head),
    Partial,
    Invalid,
}

/// Parses a request head (off the async state: the header array lives on the stack only).
fn parse_head(buf: &[u8]) -> Parsed {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    let len = match req.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Parsed::Partial,
        Err(_) => return Parsed::Invalid,
    };
    let (Some(method), Some(target), Some(1)) = (req.method, req.path, req.version) else {
        return Parsed::Invalid;
    };
    let Ok(method) = Method::from_bytes(method.as_bytes()) else {
        return Parsed::Invalid;
    };
    let mut map = HeaderMap::with_capacity(req.headers.len());
    let mut keep_alive = true;
    let mut plain_get = method == Method::GET;
    for h in req.headers.iter() {
        let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(h.name.as_bytes()),
            HeaderValue::from_bytes(h.value),
        ) else {
            return Parsed::Invalid;
        };
        if name == http::header::CONNECTION {
            for t in h.value.split(|b| *b == b',') {
                let t = t.trim_ascii();
                if t.eq_ignore_ascii_case(b"close") {
                    keep_alive = false;
                } else if t.eq_ignore_ascii_case(b"upgrade") {
                    plain_get = false;
                }
            }
        }
        if name == http::header::TRANSFER_ENCODING
            || name == http::header::UPGRADE
            || name == http::header::EXPECT
            || (name == http::header::CONTENT_LENGTH && h.value != b"0")
        {
            plain_get = false;
        }
        map.append(name, value);
    }
    Parsed::Complete(Head {
        method,
        target: target.to_string(),
        headers: map,
        len,
        keep_alive,
        plain_get,
    })
}

/// The status line and headers of `parts` as hyper writes them: names in lower case, `date`
/// added, and `transfer-encoding: chunked` or `content-length` as given.
fn encode_head(parts: &http::response::Parts, length: Option<u64>) -> Vec<u8> {
    use std::io::Write;
    let mut h = Vec::with_capacity(256 + parts.headers.len() * 48);
    let reason = parts.status.canonical_reason().unwrap_or("");
    let _ = write!(h, "HTTP/1.1 {} {reason}\r\n", parts.status.as_u16());
    for (name, value) in &parts.headers {
        if name == http::header::CONTENT_LENGTH || name == http::header::TRANSFER_ENCODING {
            continue;
        }
        h.extend_from_slice(name.as_str().as_bytes());
        h.extend_from_slice(b": ");
        h.extend_from_slice(value.as_bytes());
        h.extend_from_slice(b"\r\n");
    }
    match length {
        Some(n) => {
            let _ = write!(h, "content-length: {n}\r\n");
        }
        None => h.extend_from_slice(b"transfer-encoding: chunked\r\n"),
    }
    if !parts.headers.contains_key(http::header::DATE) {
        let _ = write!(
            h,
            "date: {}\r\n",
            httpdate::fmt_http_date(std::time::SystemTime::now())
        );
    }
    h.extend_from_slice(b"\r\n");
    h
}

/// Writes an answer that is not a watch of this path (a refusal, in practice) whole: with its
/// length when its body's is known, else chunked.
async fn write_response(io: &mut Box<dyn Io>, resp: Response<Body>) -> io::Result<()> {
    use http_body::Body as _;
    let (parts, mut body) = resp.into_parts();
    let exact = body.size_hint().exact();
    io.write_all(&encode_head(&parts, exact)).await?;
    while let Some(frame) = body.frame().await {
        let Ok(data) = frame?.into_data() else {
            continue;
        };
        if data.is_empty() {
            continue;
        }
        if exact.is_some() {
            io.write_all(&data).await?;
        } else {
            io.write_all(format!("{:x}\r\n", data.len()).as_bytes())
                .await?;
            io.write_all(&data).await?;
            io.write_all(b"\r\n").await?;
        }
    }
    if exact.is_none() {
        io.write_all(b"0\r\n\r\n").await?;
    }
    io.flush().await
}

/// Writes a watch's head, then its frames as they come, until the watch or the client ends.
/// Bytes the client sends meanwhile (its next request) are kept in `buf`, up to a head's limit.
async fn write_watch(
    io: &mut Box<dyn Io>,
    buf: &mut BytesMut,
    parts: http::response::Parts,
    mut stream: WatchStream,
    s: &ConnSettings,
) -> io::Result<()> {
    io.write_all(&encode_head(&parts, None)).await?;
    io.flush().await?;
    drop(parts);
    let mut frames: Vec<Out> = Vec::new();
    loop {
        let more = std::future::poll_fn(|cx| {
            gather(cx, io, buf, s.max_header_bytes, &mut stream, &mut frames)
        })
        .await?;
        if !frames.is_empty() {
            let written = write_chunk(io, &frames).await;
            give_back(&mut frames);
            written?;
        }
        if !more {
            io.write_all(b"0\r\n\r\n").await?;
            return io.flush().await;
        }
    }
}

/// Waits for frames: takes every frame the watch has ready into `frames` (up to a chunk's
/// bounds). Ready with `true` once there are frames to write, with `false` when the watch has
/// ended; an error when the client has gone. Reads what the client sends meanwhile into `buf`.
fn gather(
    cx: &mut Context<'_>,
    io: &mut Box<dyn Io>,
    buf: &mut BytesMut,
    max_head: usize,
    stream: &mut WatchStream,
    frames: &mut Vec<Out>,
) -> Poll<io::Result<bool>> {
    if buf.len() < max_head {
        let mut scratch = [0u8; 512];
        let mut rb = ReadBuf::new(&mut scratch);
        if let Poll::Ready(r) = Pin::new(&mut **io).poll_read(cx, &mut rb) {
            r?;
            if rb.filled().is_empty() {
                return Poll::Ready(Err(io::ErrorKind::UnexpectedEof.into()));
            }
            buf.extend_from_slice(rb.filled());
            // Read again: the read registered no waker.
            cx.waker().wake_by_ref();
        }
    }
    if frames.capacity() == 0 {
        *frames = SPARE_FRAMES.with(std::cell::Cell::take);
    }
    let mut bytes = 0;
    while frames.len() < MAX_BATCH_FRAMES && bytes < MAX_BATCH_BYTES {
        match Pin::new(&mut *stream).poll_next(cx) {
            Poll::Ready(Some(out)) => {
                bytes += out.len();
                frames.push(out);
            }
            Poll::Ready(None) => return Poll::Ready(Ok(false)),
            Poll::Pending => break,
        }
    }
    if frames.is_empty() {
        give_back(frames);
        Poll::Pending
    } else {
        Poll::Ready(Ok(true))
    }
}

/// Writes `frames` as one chunk with vectored writes, then flushes.
async fn write_chunk(io: &mut Box<dyn Io>, frames: &[Out]) -> io::Result<()> {
    let len: usize = frames.iter().map(Out::len).sum();
    let mut size = [0u8; 20];
    let size_len = chunk_size_line(len, &mut size);
    let mut pos = Cursor::default();
    std::future::poll_fn(|cx| {
        loop {
            let mut slices = [IoSlice::new(&[]); MAX_SLICES];
            let n = pos.fill(&size[..size_len], frames, &mut slices);
            if n == 0 {
                return Poll::Ready(Ok::<(), io::Error>(()));
            }
            let written = ready!(Pin::new(&mut **io).poll_write_vectored(cx, &slices[..n]))?;
            if written == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            pos.advance(written, size_len, frames);
        }
    })
    .await?;
    io.flush().await
}

/// `{len:x}\r\n` into `out`; returns its length.
fn chunk_size_line(len: usize, out: &mut [u8; 20]) -> usize {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut digits = [0u8; 16];
    let mut n = 0;
    let mut v = len;
    loop {
        digits[n] = HEX[v & 15];
        n += 1;
        v >>= 4;
        if v == 0 {
            break;
        }
    }
    for (i, d) in digits[..n].iter().rev().enumerate() {
        out[i] = *d;
    }
    out[n] = b'\r';
    out[n + 1] = b'\n';
    n + 2
}

/// Where a chunk's write stands: the piece (0 = the size line, then each part of each frame,
/// then the closing CRLF) and the offset in it.
#[derive(Default)]
struct Cursor {
    piece: usize,
    offset: usize,
}

impl Cursor {
    /// The chunk's pieces from here, in order.
    fn pieces<'a>(size: &'a [u8], frames: &'a [Out]) -> impl Iterator<Item = &'a [u8]> + 'a {
        std::iter::once(size)
            .chain(
                frames
                    .iter()
                    .flat_map(|f| f.parts().iter().map(|b| b.as_ref())),
            )
            .chain(std::iter::once(&b"\r\n"[..]))
    }

    /// Fills `slices` with what is left to write; returns how many.
    fn fill<'a>(
        &self,
        size: &'a [u8],
        frames: &'a [Out],
        slices: &mut [IoSlice<'a>; MAX_SLICES],
    ) -> usize {
        let mut n = 0;
        for (i, p) in Self::pieces(size, frames).enumerate().skip(self.piece) {
            let p = if i == self.piece {
                &p[self.offset..]
            } else {
                p
            };
            if p.is_empty() {
                continue;
            }
            if n == slices.len() {
                break;
            }
            slices[n] = IoSlice::new(p);
            n += 1;
        }
        n
    }

    /// Moves past `written` bytes.
    fn advance(&mut self, mut written: usize, size_len: usize, frames: &[Out]) {
        let size = [0u8; 20];
        for p in Self::pieces(&size[..size_len], frames).skip(self.piece) {
            let left = p.len() - self.offset;
            if written < left {
                self.offset += written;
                return;
            }
            written -= left;
            self.piece += 1;
            self.offset = 0;
        }
    }
}

/// A connection handed to hyper with the bytes this path already read from it.
pub struct Rewind {
    pre: Bytes,
    io: Box<dyn Io>,
}

impl Rewind {
    /// `io`, whose next bytes are `pre`.
    pub fn new(io: Box<dyn Io>, pre: Bytes) -> Self {
        Rewind { pre, io }
    }
}

impl AsyncRead for Rewind {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.pre.is_empty() {
            let n = this.pre.len().min(out.remaining());
            out.put_slice(&this.pre[..n]);
            this.pre.advance(n);
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut *this.io).poll_read(cx, out)
    }
}

impl AsyncWrite for Rewind {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, b: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut *self.get_mut().io).poll_write(cx, b)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        b: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut *self.get_mut().io).poll_write_vectored(cx, b)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.get_mut().io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_size_lines_are_lower_hex() {
        let mut b = [0u8; 20];
        for (n, want) in [
            (0, "0\r\n"),
            (10, "a\r\n"),
            (4096, "1000\r\n"),
            (0xabcdef, "abcdef\r\n"),
        ] {
            let k = chunk_size_line(n, &mut b);
            assert_eq!(&b[..k], want.as_bytes());
        }
    }

    #[test]
    fn a_cursor_walks_every_piece_across_partial_writes() {
        let f = |s: &'static str| Bytes::from_static(s.as_bytes());
        let frames = vec![
            Out::Frame(f("abc")),
            Out::Parts([f("de"), f(""), f("fgh")]),
            Out::Frame(f("i")),
        ];
        let size = b"9\r\n";
        for step in 1..=14 {
            let mut pos = Cursor::default();
            let mut out = Vec::new();
            loop {
                let mut slices = [IoSlice::new(&[]); MAX_SLICES];
                let n = pos.fill(size, &frames, &mut slices);
                if n == 0 {
                    break;
                }
                let all: Vec<u8> = slices[..n].iter().flat_map(|s| s.iter().copied()).collect();
                let w = step.min(all.len());
                out.extend_from_slice(&all[..w]);
                pos.advance(w, size.len(), &frames);
            }
            assert_eq!(out, b"9\r\nabcdefghi\r\n", "writing {step} bytes at a time");
        }
    }

    #[test]
    fn heads_that_are_not_plain_gets_are_refused() {
        let parse = |s: &str| match parse_head(s.as_bytes()) {
            Parsed::Complete(h) => Some((h.plain_get, h.keep_alive, h.len)),
            _ => None,
        };
        let get = "GET /api/v1/pods?watch=1 HTTP/1.1\r\nhost: x\r\n\r\n";
        assert_eq!(parse(get), Some((true, true, get.len())));
        let close = "GET / HTTP/1.1\r\nConnection: close\r\n\r\n";
        assert_eq!(parse(close), Some((true, false, close.len())));
        for refused in [
            "POST / HTTP/1.1\r\n\r\n",
            "GET / HTTP/1.1\r\ncontent-length: 3\r\n\r\n",
            "GET / HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n",
            "GET / HTTP/1.1\r\nconnection: Upgrade\r\nupgrade: websocket\r\n\r\n",
            "GET / HTTP/1.1\r\nexpect: 100-continue\r\n\r\n",
        ] {
            assert_eq!(parse(refused).map(|p| p.0), Some(false), "{refused:?}");
        }
        assert!(matches!(
            parse_head(b"GET / HTTP/1.0\r\n\r\n"),
            Parsed::Invalid
        ));
        assert!(matches!(
            parse_head(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"),
            Parsed::Invalid
        ));
        assert!(matches!(
            parse_head(b"GET / HTTP/1.1\r\nho"),
            Parsed::Partial
        ));
    }
}
