//! Sending a case and reading what comes back, within bounds: HTTP/1 bytes written as they are
//! (by a writer task, so an early answer is read while the rest is still being written) and
//! answers read strictly ([`super::parse`]); websocket handshakes, then frames; HTTP/2 through
//! hyper's client (hyper's own parser is the judge of the frames); raw HTTP/2 bytes.
//!
//! Every read has a deadline, a body is kept up to a size bound, a watch is read for a short
//! time and then dropped, and every connection is closed when the exchange ends. It records
//! what happened ([`Exchange`]); whether that is right is [`super::check`]'s business.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::net::tcp::OwnedReadHalf;
use tokio::time::{Instant, timeout_at};

use super::case::{Case, Meta, Wire, metas};
use super::parse::{self, Chunked, Framing, Head, HeadParse, WsFrame};

/// Time and size bounds of an exchange.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// To connect.
    pub connect: Duration,
    /// For an answer (head and body) that is not a stream.
    pub answer: Duration,
    /// The same for a case the server need not answer (broken framing, raw bytes): it may
    /// be waiting for bytes that never come. Longer than kube's 3 s waits, twice over.
    pub unsure_answer: Duration,
    /// How long a watch stream (or websocket) is read before it is dropped.
    pub watch: Duration,
    /// After an answer, how long to wait for another that may or may not come.
    pub maybe_more: Duration,
    /// Most body bytes kept per answer.
    pub max_body: usize,
    /// Most bytes of the conversation kept for the reproducer.
    pub capture: usize,
}

impl Limits {
    /// These limits for a case the server need not answer.
    pub fn unsure(self) -> Limits {
        Limits {
            answer: self.answer.min(self.unsure_answer),
            ..self
        }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            connect: Duration::from_secs(5),
            answer: Duration::from_secs(20),
            unsure_answer: Duration::from_millis(6500),
            watch: Duration::from_millis(300),
            maybe_more: Duration::from_millis(300),
            max_body: 64 << 20,
            capture: 8 << 10,
        }
    }
}

/// One answer.
#[derive(Debug, Clone)]
pub struct Answer {
    /// Which request (index into the case's metas) it answers.
    pub request: usize,
    /// Its head (HTTP/2: status and headers, version 2).
    pub head: Head,
    /// Its body (chunked coding removed), up to the size bound.
    pub body: Vec<u8>,
    /// The reader stopped before the server ended the body (a stream read for its time, the
    /// size bound, or the answer time bound: see `stalled`).
    pub cut: bool,
    /// The body did not end within the answer time bound (not a watch).
    pub stalled: bool,
    /// The connection ended before the body did (Content-Length or chunked not complete).
    pub truncated: bool,
}

/// How an exchange ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum End {
    /// The reader had what it came for and dropped the connection.
    Done,
    /// The server closed the connection.
    Closed,
    /// The connection failed (reset, refused).
    Reset(String),
    /// Nothing (more) arrived in time, while waiting for this.
    Timeout(&'static str),
    /// The server's bytes are not HTTP.
    Malformed(String),
}

/// What came back from a case.
#[derive(Debug, Clone)]
pub struct Exchange {
    /// The requests the server saw, as the checker reads them.
    pub metas: Vec<Meta>,
    /// Answers, in order.
    pub answers: Vec<Answer>,
    /// How it ended.
    pub end: End,
    /// The first bytes received (for the reproducer).
    pub received: Vec<u8>,
    /// After a 101 to a websocket handshake: the frames read, and why reading stopped early
    /// if the frames were malformed.
    pub ws: Option<(Vec<WsFrame>, Option<String>)>,
    /// Raw HTTP/2: the frames the server sent, or why they are not frames.
    pub h2_frames: Option<Result<Vec<parse::H2Frame>, String>>,
    /// HTTP/2 requests that failed in hyper's client (request index, error with its causes).
    pub h2_errors: Vec<(usize, String)>,
    /// The HTTP/2 connection failed (error with its causes).
    pub h2_conn_error: Option<String>,
    /// Writing the request failed (the server may close early: not an error by itself).
    pub write_error: Option<String>,
    /// Milliseconds the exchange took.
    pub millis: u64,
    /// The client port of the connection (to find the case again from a socket left open).
    pub local_port: Option<u16>,
}

impl Exchange {
    /// Nothing exchanged yet for the requests `metas` describe.
    pub(super) fn new(metas: Vec<Meta>) -> Exchange {
        Exchange {
            metas,
            answers: Vec::new(),
            end: End::Done,
            received: Vec::new(),
            ws: None,
            h2_frames: None,
            h2_errors: Vec::new(),
            h2_conn_error: None,
            write_error: None,
            millis: 0,
            local_port: None,
        }
    }
}

/// The error and its causes, as one line.
pub fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(c) = src {
        s.push_str(": ");
        s.push_str(&c.to_string());
        src = c.source();
    }
    s
}

/// Sends `case` to `addr` and reads the answers.
pub async fn exchange(addr: SocketAddr, host: &str, case: &Case, lim: &Limits) -> Exchange {
    let t0 = Instant::now();
    let mut x = match &case.wire {
        Wire::Http1 {
            bytes,
            half_close,
            more,
        } => http1(addr, bytes, *half_close, *more, lim).await,
        Wire::WebSocket { handshake, after } => websocket(addr, handshake, after, lim).await,
        Wire::H2 { requests } => {
            // Only what HTTP/2 can carry is sent (and judged).
            let (metas, reqs) = requests
                .iter()
                .filter_map(|r| {
                    let h = r.to_h2(host)?;
                    let mut m = Meta::of(&r.method, &r.target(), false);
                    m.body = r.body.len() as u64;
                    Some((m, h))
                })
                .unzip();
            h2(addr, metas, reqs, lim).await
        }
        Wire::RawH2 { bytes } => raw_h2(addr, bytes, lim).await,
    };
    x.millis = u64::try_from(t0.elapsed().as_millis()).unwrap_or(u64::MAX);
    x
}

async fn connect(addr: SocketAddr, lim: &Limits) -> Result<TcpStream, End> {
    match tokio::time::timeout(lim.connect, TcpStream::connect(addr)).await {
        Ok(Ok(s)) => {
            let _ = s.set_nodelay(true);
            Ok(s)
        }
        Ok(Err(e)) => Err(End::Reset(format!("connect: {e}"))),
        Err(_) => Err(End::Timeout("connect")),
    }
}

/// A connection for `x`: connected (a failure is `x`'s end, and `None`), its local port noted,
/// `bytes` being written by a task of its own (then the write side shut if `half_close`), and
/// the read side keeping up to `capture` bytes of what arrives.
async fn open(
    addr: SocketAddr,
    x: &mut Exchange,
    bytes: &[u8],
    half_close: bool,
    capture: usize,
    lim: &Limits,
) -> Option<(Reader, Writer)> {
    let s = match connect(addr, lim).await {
        Ok(s) => s,
        Err(e) => {
            x.end = e;
            return None;
        }
    };
    x.local_port = s.local_addr().ok().map(|a| a.port());
    let (read, write) = s.into_split();
    let writer = spawn_writer(
        write,
        bytes.to_vec(),
        half_close,
        Instant::now() + lim.answer,
    );
    let r = Reader {
        read,
        buf: Vec::new(),
        received: Vec::new(),
        capture,
    };
    Some((r, writer))
}

/// A writer task: its result is the write error, if any, and the write side.
type Writer = tokio::task::JoinHandle<(Option<String>, tokio::net::tcp::OwnedWriteHalf)>;

/// The read side of a connection with its buffer.
struct Reader {
    read: OwnedReadHalf,
    buf: Vec<u8>,
    received: Vec<u8>,
    capture: usize,
}

/// Why a read returned no bytes.
enum Stop {
    Eof,
    Timeout,
    Io(String),
}

impl Reader {
    /// Reads more bytes into the buffer before `deadline`.
    async fn more(&mut self, deadline: Instant) -> Result<(), Stop> {
        let mut tmp = [0u8; 16 << 10];
        match timeout_at(deadline, self.read.read(&mut tmp)).await {
            Err(_) => Err(Stop::Timeout),
            Ok(Err(e)) => Err(Stop::Io(e.to_string())),
            Ok(Ok(0)) => Err(Stop::Eof),
            Ok(Ok(n)) => {
                let got = tmp.get(..n).unwrap_or_default();
                let room = self.capture.saturating_sub(self.received.len());
                self.received
                    .extend_from_slice(got.get(..room.min(n)).unwrap_or_default());
                self.buf.extend_from_slice(got);
                Ok(())
            }
        }
    }
}

/// Writes `bytes` (then shuts the write side if asked) in a task of its own; the handle's
/// result is the write error, if any.
fn spawn_writer(
    mut w: tokio::net::tcp::OwnedWriteHalf,
    bytes: Vec<u8>,
    half_close: bool,
    deadline: Instant,
) -> Writer {
    tokio::spawn(async move {
        let r = timeout_at(deadline, async {
            w.write_all(&bytes).await?;
            if half_close {
                w.shutdown().await?;
            }
            Ok::<_, std::io::Error>(())
        })
        .await;
        let e = match r {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(e.to_string()),
            Err(_) => Some("write timed out".into()),
        };
        (e, w)
    })
}

/// Reads one answer; `Ok(None)` when the connection ended cleanly before one began.
async fn read_answer(
    r: &mut Reader,
    request: usize,
    meta: Option<&Meta>,
    first_byte: Instant,
    lim: &Limits,
) -> Result<Option<Answer>, End> {
    let mut deadline = first_byte;
    let head = loop {
        match parse::parse_head(&r.buf) {
            HeadParse::Done(h) => {
                r.buf.drain(..h.len);
                // Informational answers (100 Continue, 103) come before the real one.
                if (100..200).contains(&h.status) && h.status != 101 {
                    deadline = Instant::now() + lim.answer;
                    continue;
                }
                break h;
            }
            HeadParse::Bad(e) => return Err(End::Malformed(e)),
            HeadParse::Partial => match r.more(deadline).await {
                Ok(()) => {
                    // Once an answer has begun, it has the full answer time.
                    deadline = deadline.max(Instant::now() + lim.answer);
                }
                Err(Stop::Eof) if r.buf.is_empty() => return Ok(None),
                Err(Stop::Eof) => {
                    return Err(End::Malformed(format!(
                        "connection closed inside a response head: {}",
                        parse::lossy(&r.buf, 200)
                    )));
                }
                Err(Stop::Timeout) if r.buf.is_empty() => return Err(End::Timeout("answer")),
                Err(Stop::Timeout) => return Err(End::Timeout("rest of the head")),
                Err(Stop::Io(e)) if r.buf.is_empty() => return Err(End::Reset(e)),
                Err(Stop::Io(e)) => return Err(End::Reset(format!("inside a response head: {e}"))),
            },
        }
    };
    let head_request = meta.is_some_and(Meta::head);
    let framing = parse::framing(&head, head_request).map_err(End::Malformed)?;
    let mut a = Answer {
        request,
        head,
        body: Vec::new(),
        cut: false,
        stalled: false,
        truncated: false,
    };
    if a.head.status == 101 {
        return Ok(Some(a));
    }
    // A watch's stream is read for a short time; any other body until it ends.
    let stream = meta.is_some_and(|m| m.watch) && a.head.status == 200;
    let deadline = Instant::now() + if stream { lim.watch } else { lim.answer };
    let mut chunked = Chunked::default();
    let mut remaining = match framing {
        Framing::None => return Ok(Some(a)),
        Framing::Length(n) => Some(n),
        Framing::Chunked | Framing::Close => None,
    };
    loop {
        // Use what is buffered.
        match framing {
            Framing::Chunked => {
                let n = chunked
                    .feed(&r.buf, &mut a.body)
                    .map_err(|e| End::Malformed(format!("chunked body: {e}")))?;
                r.buf.drain(..n);
                if chunked.done() {
                    return Ok(Some(a));
                }
            }
            Framing::Length(_) => {
                let left = remaining.unwrap_or(0);
                let take = usize::try_from(left).unwrap_or(usize::MAX).min(r.buf.len());
                a.body.extend(r.buf.drain(..take));
                let left = left.saturating_sub(take as u64);
                remaining = Some(left);
                if left == 0 {
                    return Ok(Some(a));
                }
            }
            Framing::Close => a.body.append(&mut r.buf),
            Framing::None => return Ok(Some(a)),
        }
        if a.body.len() > lim.max_body {
            a.cut = true;
            return Ok(Some(a));
        }
        match r.more(deadline).await {
            Ok(()) => {}
            Err(Stop::Eof) => {
                a.truncated = framing != Framing::Close;
                return Ok(Some(a));
            }
            Err(Stop::Timeout) => {
                a.cut = true;
                a.stalled = !stream;
                return Ok(Some(a));
            }
            Err(Stop::Io(_)) => {
                a.truncated = true;
                return Ok(Some(a));
            }
        }
    }
}

/// Reads answers until the exchange is over: the first with the full answer time, later ones
/// with the full time while requests the server saw are unanswered, else briefly (`more`).
async fn read_answers(r: &mut Reader, x: &mut Exchange, more: bool, lim: &Limits) {
    let mut i = 0usize;
    loop {
        let first = i == 0 || i < x.metas.len();
        if !first && !more {
            x.end = End::Done;
            return;
        }
        let deadline = Instant::now() + if first { lim.answer } else { lim.maybe_more };
        match read_answer(r, i, x.metas.get(i), deadline, lim).await {
            Ok(None) => {
                x.end = End::Closed;
                return;
            }
            Ok(Some(a)) => {
                let over = a.cut || a.truncated || a.head.status == 101;
                let truncated = a.truncated;
                x.answers.push(a);
                if over {
                    x.end = if truncated { End::Closed } else { End::Done };
                    return;
                }
            }
            Err(End::Timeout(_)) if !first => {
                x.end = End::Done;
                return;
            }
            Err(e) => {
                x.end = e;
                return;
            }
        }
        i += 1;
    }
}

async fn http1(
    addr: SocketAddr,
    bytes: &[u8],
    half_close: bool,
    more: bool,
    lim: &Limits,
) -> Exchange {
    let mut x = Exchange::new(metas(bytes));
    let Some((mut r, writer)) = open(addr, &mut x, bytes, half_close, lim.capture, lim).await
    else {
        return x;
    };
    read_answers(&mut r, &mut x, more, lim).await;
    x.received = std::mem::take(&mut r.received);
    writer.abort();
    if let Ok((e, _)) = writer.await {
        x.write_error = e;
    }
    x
}

async fn websocket(addr: SocketAddr, handshake: &[u8], after: &[u8], lim: &Limits) -> Exchange {
    let mut x = Exchange::new(metas(handshake));
    let Some((mut r, writer)) = open(addr, &mut x, handshake, false, lim.capture, lim).await else {
        return x;
    };
    match read_answer(&mut r, 0, x.metas.first(), Instant::now() + lim.answer, lim).await {
        Ok(None) => x.end = End::Closed,
        Ok(Some(a)) => {
            let switched = a.head.status == 101;
            x.answers.push(a);
            if switched {
                // The handshake is written: send what follows, read frames for a while.
                let write = writer.await.ok().map(|(e, w)| {
                    x.write_error = e;
                    w
                });
                let writer2 = write
                    .map(|w| spawn_writer(w, after.to_vec(), false, Instant::now() + lim.watch));
                x.ws = Some(read_frames(&mut r, Instant::now() + lim.watch).await);
                if let Some(w) = writer2 {
                    w.abort();
                }
                x.end = End::Done;
                x.received = std::mem::take(&mut r.received);
                return x;
            }
            x.end = End::Done;
        }
        Err(e) => x.end = e,
    }
    x.received = std::mem::take(&mut r.received);
    writer.abort();
    x
}

/// Websocket frames until `deadline`, a close frame, the end of the connection, or a frame
/// that does not parse.
async fn read_frames(r: &mut Reader, deadline: Instant) -> (Vec<WsFrame>, Option<String>) {
    let mut frames = Vec::new();
    let mut bytes = 0usize;
    loop {
        loop {
            match parse::ws_frame(&r.buf) {
                Ok(Some((f, n))) => {
                    r.buf.drain(..n);
                    let close = f.opcode == 8;
                    bytes = bytes.saturating_add(n);
                    frames.push(f);
                    if close {
                        return (frames, None);
                    }
                }
                Ok(None) => break,
                Err(e) => return (frames, Some(e)),
            }
        }
        if bytes > 64 << 20 {
            return (frames, None);
        }
        if r.more(deadline).await.is_err() {
            return (frames, None);
        }
    }
}

async fn h2(
    addr: SocketAddr,
    metas: Vec<Meta>,
    reqs: Vec<http::Request<http_body_util::Full<Bytes>>>,
    lim: &Limits,
) -> Exchange {
    let mut x = Exchange::new(metas);
    let s = match connect(addr, lim).await {
        Ok(s) => s,
        Err(e) => {
            x.end = e;
            return x;
        }
    };
    x.local_port = s.local_addr().ok().map(|a| a.port());
    let hs = tokio::time::timeout(
        lim.answer,
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(s)),
    )
    .await;
    let (mut send, conn) = match hs {
        Ok(Ok(p)) => p,
        Ok(Err(e)) => {
            x.h2_conn_error = Some(chain(&e));
            x.end = End::Reset(chain(&e));
            return x;
        }
        Err(_) => {
            x.end = End::Timeout("HTTP/2 handshake");
            return x;
        }
    };
    let conn = tokio::spawn(conn);
    for (i, req) in reqs.into_iter().enumerate() {
        let watch = x.metas.get(i).is_some_and(|m| m.watch);
        let resp = match tokio::time::timeout(lim.answer, send.send_request(req)).await {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => {
                x.h2_errors.push((i, chain(&e)));
                if send.is_closed() {
                    break;
                }
                continue;
            }
            Err(_) => {
                x.end = End::Timeout("HTTP/2 answer");
                break;
            }
        };
        let (parts, mut body) = resp.into_parts();
        let head = Head {
            status: parts.status.as_u16(),
            version: 2,
            headers: parts
                .headers
                .iter()
                .map(|(n, v)| (n.as_str().to_string(), v.as_bytes().to_vec()))
                .collect(),
            len: 0,
        };
        let stream = watch && head.status == 200;
        let deadline = Instant::now() + if stream { lim.watch } else { lim.answer };
        let mut a = Answer {
            request: i,
            head,
            body: Vec::new(),
            cut: false,
            stalled: false,
            truncated: false,
        };
        loop {
            match timeout_at(deadline, body.frame()).await {
                Err(_) => {
                    a.cut = true;
                    a.stalled = !stream;
                    break;
                }
                Ok(None) => break,
                Ok(Some(Err(e))) => {
                    x.h2_errors.push((i, format!("body: {}", chain(&e))));
                    a.truncated = true;
                    break;
                }
                Ok(Some(Ok(f))) => {
                    if let Ok(d) = f.into_data() {
                        a.body.extend_from_slice(&d);
                        if a.body.len() > lim.max_body {
                            a.cut = true;
                            break;
                        }
                    }
                }
            }
        }
        x.answers.push(a);
    }
    drop(send);
    // The connection task ends once the client side is dropped; a protocol error shows here.
    match tokio::time::timeout(Duration::from_millis(200), conn).await {
        Ok(Ok(Err(e))) => x.h2_conn_error = Some(chain(&e)),
        Ok(_) => {}
        Err(_) => {}
    }
    x
}

async fn raw_h2(addr: SocketAddr, bytes: &[u8], lim: &Limits) -> Exchange {
    let mut x = Exchange::new(Vec::new());
    let Some((mut r, writer)) = open(addr, &mut x, bytes, false, 64 << 10, lim).await else {
        return x;
    };
    let deadline = Instant::now() + lim.watch.max(Duration::from_millis(500));
    loop {
        match r.more(deadline).await {
            Ok(()) if r.buf.len() < 64 << 10 => {}
            Ok(()) => {
                x.end = End::Done;
                break;
            }
            Err(Stop::Eof) => {
                x.end = End::Closed;
                break;
            }
            Err(Stop::Timeout) => {
                x.end = End::Done;
                break;
            }
            Err(Stop::Io(e)) => {
                x.end = End::Reset(e);
                break;
            }
        }
    }
    writer.abort();
    if r.buf.starts_with(b"HTTP/") {
        // The server took it for HTTP/1 (a damaged preface): its answer must be HTTP/1.
        match parse::parse_head(&r.buf) {
            HeadParse::Bad(e) => x.end = End::Malformed(e),
            HeadParse::Partial if x.end == End::Closed => {
                x.end = End::Malformed("connection closed inside a response head".into())
            }
            _ => {}
        }
    } else {
        x.h2_frames = Some(parse::h2_frames(&r.buf));
    }
    x.received = std::mem::take(&mut r.buf);
    x.received.truncate(lim.capture);
    x
}
