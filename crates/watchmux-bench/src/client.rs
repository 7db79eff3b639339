//! The bench's HTTP/1.1 client: a raw socket, a hand-rolled response reader and no JSON
//! parsing. It has to keep up with hundreds of thousands of deliveries per second on the same
//! two cores as the servers it measures, so it does the least a real client must: decode the
//! chunked framing, split lines (JSON) or length-prefixed frames (protobuf, read by
//! [`super::pbframe`]), and read the write-time stamp the simulator puts in each object to
//! compute delivery latency. Each request asks for one [`Encoding`] in its `Accept`.
//!
//! HTTP/1.1 over TCP or over TLS ([`Endpoint`]: the reader is generic over the stream), no gzip
//! (it sends no `Accept-Encoding`), and no retries: what to do with a 429 or a failed watch is
//! the scenario's decision. [`spawn_h2_watches`] opens idle watches over HTTP/2 (hyper's
//! client, many streams per connection) for the per-watch cost scenario; it counts streams and
//! frames, it does not read events.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::LazyLock;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::{Buf, Bytes, BytesMut};
use http_body_util::BodyExt;
use memchr::memmem::Finder;
use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

use super::hist::Histogram;
use super::pbframe;
use kube_sim::fleet::WRITE_TIME_ANNOTATION;
use kube_sim::util::now_unix_nanos;

/// Largest response head accepted.
const MAX_HEAD: usize = 64 * 1024;

/// A response's status line and the headers the bench needs.
#[derive(Debug, Clone, Default)]
pub struct Head {
    /// HTTP status code.
    pub status: u16,
    /// `Transfer-Encoding: chunked`.
    pub chunked: bool,
    /// `Content-Length`, when given.
    pub content_length: Option<u64>,
    /// `Retry-After` seconds, when given.
    pub retry_after: Option<u64>,
    /// `Content-Type`, when given.
    pub content_type: Option<String>,
}

/// The wire form a request asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// `Accept: application/json`.
    Json,
    /// `Accept: application/vnd.kubernetes.protobuf,application/json`, as every Kubernetes
    /// component asks (kubelets, controllers).
    Protobuf,
}

impl Encoding {
    /// The `Accept` header value.
    pub fn accept(self) -> &'static str {
        match self {
            Encoding::Json => "application/json",
            Encoding::Protobuf => "application/vnd.kubernetes.protobuf,application/json",
        }
    }

    /// Name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Encoding::Json => "JSON",
            Encoding::Protobuf => "protobuf",
        }
    }

    /// Whether a response's `Content-Type` is this encoding's.
    pub fn answered_by(self, content_type: Option<&str>) -> bool {
        let essence = content_type
            .and_then(|c| c.split(';').next())
            .map(str::trim)
            .unwrap_or("");
        match self {
            Encoding::Json => essence.eq_ignore_ascii_case("application/json"),
            Encoding::Protobuf => essence.eq_ignore_ascii_case(kube_wire::negotiate::PROTOBUF),
        }
    }
}

/// Where a client connects: an address, and the TLS connector (trusting the run's CA, offering
/// one ALPN protocol) when the target serves TLS there.
#[derive(Clone)]
pub struct Endpoint {
    /// The target's address.
    pub addr: SocketAddr,
    /// TLS over the TCP connection, when set.
    pub tls: Option<TlsConnector>,
}

impl Endpoint {
    /// Plain TCP to `addr`.
    pub fn plain(addr: SocketAddr) -> Endpoint {
        Endpoint { addr, tls: None }
    }
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        write!(f, "{scheme}://{}", self.addr)
    }
}

/// A TCP connection to `addr` with Nagle off, and TLS over it when `tls` is given (the server
/// name is the address: the run's certificate names 127.0.0.1).
pub(crate) async fn dial_tls(
    addr: SocketAddr,
    tls: &TlsConnector,
) -> std::io::Result<TlsStream<TcpStream>> {
    let tcp = TcpStream::connect(addr).await?;
    tcp.set_nodelay(true)?;
    tls.connect(ServerName::IpAddress(addr.ip().into()), tcp)
        .await
}

/// One HTTP/1.1 connection over `S`: plain TCP (the default) or TLS.
pub struct Conn<S = TcpStream> {
    stream: S,
    buf: BytesMut,
    host: String,
}

fn bad(msg: impl Into<String>) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, msg.into())
}

impl Conn<TcpStream> {
    /// Connects to `addr`.
    pub async fn connect(addr: SocketAddr) -> std::io::Result<Conn> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        Ok(Conn::from_stream(stream, addr.to_string()))
    }
}

impl Conn<TlsStream<TcpStream>> {
    /// Connects to `addr` and makes a TLS handshake with `tls`.
    pub async fn connect_tls(
        addr: SocketAddr,
        tls: &TlsConnector,
    ) -> std::io::Result<Conn<TlsStream<TcpStream>>> {
        let stream = dial_tls(addr, tls).await?;
        Ok(Conn::from_stream(stream, addr.to_string()))
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> Conn<S> {
    /// Wraps a connected stream (e.g. one with socket options of its own); `host` is what the
    /// `Host` header names.
    pub fn from_stream(stream: S, host: String) -> Conn<S> {
        Conn {
            stream,
            buf: BytesMut::with_capacity(16 * 1024),
            host,
        }
    }

    /// The socket and what was read past the response head, for a reader of its own.
    pub fn into_parts(self) -> (S, BytesMut) {
        (self.stream, self.buf)
    }

    /// Sends `GET path_and_query` asking for JSON.
    pub async fn get(&mut self, path_and_query: &str) -> std::io::Result<()> {
        self.get_as(path_and_query, Encoding::Json).await
    }

    /// Sends `GET path_and_query` asking for `encoding`.
    pub async fn get_as(
        &mut self,
        path_and_query: &str,
        encoding: Encoding,
    ) -> std::io::Result<()> {
        self.get_as_bearer(path_and_query, encoding, None).await
    }

    /// [`Conn::get_as`] with `Authorization: Bearer <token>` when `token` is given.
    pub async fn get_as_bearer(
        &mut self,
        path_and_query: &str,
        encoding: Encoding,
        token: Option<&str>,
    ) -> std::io::Result<()> {
        let auth = token
            .map(|t| format!("Authorization: Bearer {t}\r\n"))
            .unwrap_or_default();
        let req = format!(
            "GET {path_and_query} HTTP/1.1\r\nHost: {}\r\nAccept: {}\r\nUser-Agent: watchmux-bench\r\n{auth}\r\n",
            self.host,
            encoding.accept()
        );
        self.raw_write(req.as_bytes()).await
    }

    /// Sends `method path_and_query` with `body` (of `content_type`) and reads the whole
    /// answer; returns its status.
    pub async fn send(
        &mut self,
        method: &str,
        path_and_query: &str,
        content_type: &str,
        body: &[u8],
    ) -> std::io::Result<u16> {
        let mut req = format!(
            "{method} {path_and_query} HTTP/1.1\r\nHost: {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nUser-Agent: watchmux-bench\r\n\r\n",
            self.host,
            body.len()
        )
        .into_bytes();
        req.extend_from_slice(body);
        self.raw_write(&req).await?;
        let head = self.read_head().await?;
        self.read_body(&head, |_| {}).await?;
        Ok(head.status)
    }

    /// Writes raw request bytes (and flushes them: TLS may hold them back otherwise).
    pub async fn raw_write(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.stream.write_all(bytes).await?;
        self.stream.flush().await
    }

    async fn fill(&mut self) -> std::io::Result<()> {
        if self.buf.capacity() - self.buf.len() < 8 * 1024 {
            self.buf.reserve(64 * 1024);
        }
        match self.stream.read_buf(&mut self.buf).await? {
            0 => Err(std::io::ErrorKind::UnexpectedEof.into()),
            _ => Ok(()),
        }
    }

    /// Reads the status line and headers.
    pub async fn read_head(&mut self) -> std::io::Result<Head> {
        let end = loop {
            if let Some(i) = memchr::memmem::find(&self.buf, b"\r\n\r\n") {
                break i;
            }
            if self.buf.len() > MAX_HEAD {
                return Err(bad("response head too large"));
            }
            self.fill().await?;
        };
        let text = String::from_utf8_lossy(&self.buf[..end]).into_owned();
        self.buf.advance(end + 4);
        let mut lines = text.split("\r\n");
        let status = lines
            .next()
            .and_then(|l| l.split(' ').nth(1))
            .and_then(|c| c.parse().ok())
            .ok_or_else(|| bad(format!("bad status line in {text:?}")))?;
        let mut head = Head {
            status,
            ..Head::default()
        };
        for l in lines {
            let Some((k, v)) = l.split_once(':') else {
                continue;
            };
            let v = v.trim();
            match k.trim().to_ascii_lowercase().as_str() {
                "transfer-encoding" => head.chunked = v.eq_ignore_ascii_case("chunked"),
                "content-length" => head.content_length = v.parse().ok(),
                "retry-after" => head.retry_after = v.parse().ok(),
                "content-type" => head.content_type = Some(v.to_string()),
                _ => {}
            }
        }
        Ok(head)
    }

    /// Reads the body, handing each piece of payload to `sink` as it arrives (a watch body
    /// never ends on its own). Returns the payload bytes read.
    pub async fn read_body(
        &mut self,
        head: &Head,
        mut sink: impl FnMut(&[u8]),
    ) -> std::io::Result<u64> {
        let mut total = 0u64;
        if head.chunked {
            loop {
                let line_end = loop {
                    if let Some(i) = memchr::memmem::find(&self.buf, b"\r\n") {
                        break i;
                    }
                    if self.buf.len() > 1024 {
                        return Err(bad("chunk size line too long"));
                    }
                    self.fill().await?;
                };
                let size_text = std::str::from_utf8(&self.buf[..line_end])
                    .map_err(|_| bad("chunk size not ASCII"))?;
                let size_text = size_text.split(';').next().unwrap_or("").trim();
                let mut left = u64::from_str_radix(size_text, 16)
                    .map_err(|_| bad(format!("bad chunk size {size_text:?}")))?;
                self.buf.advance(line_end + 2);
                if left == 0 {
                    // Trailers (none expected) end with an empty line.
                    loop {
                        if let Some(i) = memchr::memmem::find(&self.buf, b"\r\n") {
                            let empty = i == 0;
                            self.buf.advance(i + 2);
                            if empty {
                                return Ok(total);
                            }
                        } else {
                            self.fill().await?;
                        }
                    }
                }
                while left > 0 {
                    if self.buf.is_empty() {
                        self.fill().await?;
                    }
                    let n = (self.buf.len() as u64).min(left) as usize;
                    sink(&self.buf[..n]);
                    self.buf.advance(n);
                    left -= n as u64;
                    total += n as u64;
                }
                while self.buf.len() < 2 {
                    self.fill().await?;
                }
                if &self.buf[..2] != b"\r\n" {
                    return Err(bad("chunk not followed by CRLF"));
                }
                self.buf.advance(2);
            }
        }
        let mut left = head.content_length.unwrap_or(u64::MAX);
        while left > 0 {
            if self.buf.is_empty() {
                match self.fill().await {
                    Ok(()) => {}
                    Err(e)
                        if e.kind() == std::io::ErrorKind::UnexpectedEof
                            && head.content_length.is_none() =>
                    {
                        return Ok(total);
                    }
                    Err(e) => return Err(e),
                }
            }
            let n = (self.buf.len() as u64).min(left) as usize;
            sink(&self.buf[..n]);
            self.buf.advance(n);
            left -= n as u64;
            total += n as u64;
        }
        Ok(total)
    }
}

/// The measurement window, as UNIX nanoseconds: writes stamped inside it are the ones whose
/// deliveries are counted and timed.
#[derive(Debug)]
pub struct Window {
    start: AtomicU64,
    end: AtomicU64,
}

impl Default for Window {
    fn default() -> Self {
        Window {
            start: AtomicU64::new(u64::MAX),
            end: AtomicU64::new(u64::MAX),
        }
    }
}

impl Window {
    /// Opens the window now.
    pub fn open(&self) -> u64 {
        let now = now_unix_nanos() as u64;
        self.end.store(u64::MAX, Ordering::SeqCst);
        self.start.store(now, Ordering::SeqCst);
        now
    }

    /// Closes the window now.
    pub fn close(&self) -> u64 {
        let now = now_unix_nanos() as u64;
        self.end.store(now, Ordering::SeqCst);
        now
    }

    /// Whether `t` lies inside.
    pub fn contains(&self, t: u64) -> bool {
        t >= self.start.load(Ordering::Relaxed) && t < self.end.load(Ordering::Relaxed)
    }
}

/// Counters shared by all the watchers of one run.
#[derive(Default)]
pub struct WatchStats {
    /// Watches that got their 200 response head.
    pub connected: AtomicU64,
    /// Watches that failed to connect or got another status.
    pub failed: AtomicU64,
    /// Watch streams that ended or broke after connecting.
    pub ended: AtomicU64,
    /// Event lines of every type.
    pub frames: AtomicU64,
    /// BOOKMARK events.
    pub bookmarks: AtomicU64,
    /// ERROR events.
    pub errors: AtomicU64,
    /// ADDED/MODIFIED/DELETED events received while the window is open.
    pub received_in_window: AtomicU64,
    /// Bytes of those events as they came in the body (a JSON line with its newline, a
    /// protobuf event with its length prefix; without the chunked framing).
    pub bytes_in_window: AtomicU64,
    /// Deliveries of writes stamped inside the window (whenever they arrive).
    pub stamped_in_window: AtomicU64,
    /// Latency (µs) of those deliveries: receive time minus the write's stamp.
    pub latency: Histogram,
    /// The measurement window.
    pub window: Window,
    /// Why the first failed watch failed.
    pub first_failure: parking_lot::Mutex<Option<String>>,
}

static STAMP: LazyLock<Finder<'static>> = LazyLock::new(|| {
    let needle: &'static str =
        Box::leak(format!("\"{WRITE_TIME_ANNOTATION}\":\"").into_boxed_str());
    Finder::new(needle.as_bytes())
});
static DELETING: LazyLock<Finder<'static>> =
    LazyLock::new(|| Finder::new(b"\"deletionTimestamp\""));

impl WatchStats {
    /// Counts a watch that did not start, keeping the first reason.
    pub fn fail(&self, why: String) {
        self.failed.fetch_add(1, Ordering::Relaxed);
        self.first_failure.lock().get_or_insert(why);
    }

    /// Counts an event of an object (not a bookmark or an error) of `bytes` on the wire;
    /// returns the time it was received.
    fn received(&self, bytes: usize) -> u64 {
        let now = now_unix_nanos() as u64;
        if self.window.contains(now) {
            self.received_in_window.fetch_add(1, Ordering::Relaxed);
            self.bytes_in_window
                .fetch_add(bytes as u64, Ordering::Relaxed);
        }
        now
    }

    /// Times the delivery received at `now` of a write stamped `stamp` (decimal digits) when
    /// the write lies inside the window and the object is not being deleted (`deleting` is only
    /// asked then: it costs a search).
    fn timed(&self, now: u64, stamp: &[u8], deleting: impl FnOnce() -> bool) {
        let Some(stamp) = parse_stamp(stamp) else {
            return;
        };
        if !self.window.contains(stamp) || deleting() {
            return;
        }
        self.stamped_in_window.fetch_add(1, Ordering::Relaxed);
        self.latency.record(now.saturating_sub(stamp) / 1000);
    }

    /// Accounts one event line.
    pub fn on_line(&self, line: &[u8]) {
        self.frames.fetch_add(1, Ordering::Relaxed);
        if line.starts_with(b"{\"type\":\"BOOKMARK\"") {
            self.bookmarks.fetch_add(1, Ordering::Relaxed);
            return;
        }
        if line.starts_with(b"{\"type\":\"ERROR\"") {
            self.errors.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let now = self.received(line.len() + 1);
        // A DELETED event carries the object's last state, and the simulated kubelet's final
        // update of a deleting pod does not stamp: neither says when its write happened.
        if line.starts_with(b"{\"type\":\"DELETED\"") {
            return;
        }
        let Some(at) = STAMP.find(line) else { return };
        let rest = &line[at + STAMP.needle().len()..];
        self.timed(now, rest, || DELETING.find(line).is_some());
    }

    /// Accounts one protobuf watch event (a frame without its length prefix), as
    /// [`WatchStats::on_line`] does a JSON one.
    pub fn on_protobuf(&self, event: &[u8]) {
        let ty = pbframe::event_type(event);
        self.on_protobuf_read(event.len(), ty, || pbframe::object_meta(event));
    }

    /// [`WatchStats::on_protobuf`] for a caller that has read the event already: `len` is the
    /// event's size without its length prefix, `ty` its type, `meta` its object's encoded
    /// `ObjectMeta` (asked only for an object's event).
    pub fn on_protobuf_read<'a>(
        &self,
        len: usize,
        ty: &[u8],
        meta: impl FnOnce() -> Option<&'a [u8]>,
    ) {
        self.frames.fetch_add(1, Ordering::Relaxed);
        match ty {
            b"BOOKMARK" => {
                self.bookmarks.fetch_add(1, Ordering::Relaxed);
                return;
            }
            b"ERROR" => {
                self.errors.fetch_add(1, Ordering::Relaxed);
                return;
            }
            _ => {}
        }
        let now = self.received(len + 4);
        if ty == b"DELETED" {
            return;
        }
        let Some(meta) = meta() else {
            return;
        };
        let Some(stamp) = pbframe::annotation(meta, WRITE_TIME_ANNOTATION) else {
            return;
        };
        self.timed(now, stamp, || pbframe::deleting(meta));
    }
}

/// The UNIX nanoseconds of a write-time stamp: the decimal digits `stamp` starts with.
pub fn parse_stamp(stamp: &[u8]) -> Option<u64> {
    let digits = stamp.iter().take_while(|b| b.is_ascii_digit()).count();
    std::str::from_utf8(&stamp[..digits]).ok()?.parse().ok()
}

/// Runs one watch asking for `encoding` until the stream ends or `stop` fires: connects
/// (holding `gate` until the response head arrives, so thousands of watchers do not overflow a
/// listen backlog), then feeds every event to `stats`. An answer in another encoding counts as
/// a failed watch.
pub async fn watch(
    ep: Endpoint,
    path_and_query: String,
    encoding: Encoding,
    stats: Arc<WatchStats>,
    gate: Arc<tokio::sync::Semaphore>,
    stop: tokio_util::sync::CancellationToken,
) {
    let addr = ep.addr;
    match ep.tls {
        None => {
            let connect = Conn::connect(addr);
            watch_over(connect, path_and_query, encoding, stats, gate, stop).await
        }
        Some(tls) => {
            let connect = async move { Conn::connect_tls(addr, &tls).await };
            watch_over(connect, path_and_query, encoding, stats, gate, stop).await
        }
    }
}

/// [`watch`] on the connection `connect` makes (awaited once the gate lets it through).
async fn watch_over<S: AsyncRead + AsyncWrite + Unpin>(
    connect: impl Future<Output = std::io::Result<Conn<S>>>,
    path_and_query: String,
    encoding: Encoding,
    stats: Arc<WatchStats>,
    gate: Arc<tokio::sync::Semaphore>,
    stop: tokio_util::sync::CancellationToken,
) {
    let permit = gate.acquire_owned().await;
    let opened = async {
        let mut c = connect.await?;
        c.get_as(&path_and_query, encoding).await?;
        let head = c.read_head().await?;
        std::io::Result::Ok((c, head))
    };
    let (mut conn, head) = tokio::select! {
        _ = stop.cancelled() => return,
        r = opened => match r {
            Ok((_, h)) if h.status == 200 && !encoding.answered_by(h.content_type.as_deref()) => {
                stats.fail(format!(
                    "answered {:?} to a {} watch",
                    h.content_type.unwrap_or_default(),
                    encoding.name()
                ));
                return;
            }
            Ok((c, h)) if h.status == 200 => (c, h),
            Ok((_, h)) => {
                stats.fail(format!("answered {}", h.status));
                return;
            }
            Err(e) => {
                stats.fail(e.to_string());
                return;
            }
        }
    };
    stats.connected.fetch_add(1, Ordering::Relaxed);
    drop(permit);
    let mut carry: Vec<u8> = Vec::new();
    let mut frames = pbframe::Frames::default();
    let mut broken = false;
    let read = conn.read_body(&head, |mut piece| match encoding {
        Encoding::Json => {
            while let Some(nl) = memchr::memchr(b'\n', piece) {
                if carry.is_empty() {
                    stats.on_line(&piece[..nl]);
                } else {
                    carry.extend_from_slice(&piece[..nl]);
                    stats.on_line(&carry);
                    carry.clear();
                }
                piece = &piece[nl + 1..];
            }
            carry.extend_from_slice(piece);
        }
        Encoding::Protobuf => {
            if !frames.push(piece, |event| stats.on_protobuf(event)) && !broken {
                broken = true;
                stats.errors.fetch_add(1, Ordering::Relaxed);
                stats
                    .first_failure
                    .lock()
                    .get_or_insert_with(|| "a protobuf frame over 64 MiB".into());
            }
        }
    });
    tokio::select! {
        _ = stop.cancelled() => {}
        _ = read => { stats.ended.fetch_add(1, Ordering::Relaxed); }
    }
}

/// Opens `streams` idle watches of `path_and_query` over HTTP/2 through `ep` (TLS with ALPN
/// `h2`), `per_connection` streams to a connection, as a kubelet carries its watches on one
/// connection: the tasks go into `tasks`. A stream whose response head is a 200 counts in
/// `stats.connected` (every other outcome in `stats.failed`); its body is then held open and
/// polled (frames counted in `stats.frames`, a stream that ends in `stats.ended`) until `stop`.
/// `gate` is held by a connection until all its streams have their heads.
#[allow(
    clippy::too_many_arguments,
    reason = "one caller, each argument named there"
)]
pub fn spawn_h2_watches(
    tasks: &mut tokio::task::JoinSet<()>,
    ep: &Endpoint,
    path_and_query: &str,
    streams: usize,
    per_connection: usize,
    stats: Arc<WatchStats>,
    gate: Arc<tokio::sync::Semaphore>,
    stop: tokio_util::sync::CancellationToken,
) {
    let per = per_connection.max(1);
    let mut left = streams;
    while left > 0 {
        let n = left.min(per);
        left -= n;
        tasks.spawn(h2_connection(
            ep.clone(),
            path_and_query.to_string(),
            n,
            stats.clone(),
            gate.clone(),
            stop.clone(),
        ));
    }
}

/// One HTTP/2 connection carrying `n` watch streams; see [`spawn_h2_watches`].
async fn h2_connection(
    ep: Endpoint,
    path_and_query: String,
    n: usize,
    stats: Arc<WatchStats>,
    gate: Arc<tokio::sync::Semaphore>,
    stop: tokio_util::sync::CancellationToken,
) {
    use hyper_util::rt::{TokioExecutor, TokioIo};
    let fail = |k: usize, why: String| {
        for _ in 0..k {
            stats.fail(why.clone());
        }
    };
    let Some(tls) = ep.tls.clone() else {
        fail(n, "HTTP/2 watches need TLS (ALPN h2)".into());
        return;
    };
    let permit = gate.acquire_owned().await;
    let opened = async {
        let io = dial_tls(ep.addr, &tls).await?;
        if io.get_ref().1.alpn_protocol() != Some(b"h2".as_slice()) {
            return Err(bad("the server did not negotiate h2"));
        }
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(io))
            .await
            .map_err(|e| bad(format!("HTTP/2 handshake: {e}")))
    };
    let (mut sender, conn) = tokio::select! {
        _ = stop.cancelled() => return,
        r = opened => match r {
            Ok(p) => p,
            Err(e) => {
                fail(n, e.to_string());
                return;
            }
        }
    };
    let mut bodies = tokio::task::JoinSet::new();
    bodies.spawn(async move {
        let _ = conn.await;
    });
    let uri = format!("https://{}{path_and_query}", ep.addr);
    for i in 0..n {
        let req = http::Request::get(uri.as_str())
            .header(http::header::ACCEPT, Encoding::Json.accept())
            .header(http::header::USER_AGENT, "watchmux-bench")
            .body(http_body_util::Empty::<Bytes>::new());
        let sent = async {
            let req = req.map_err(|e| bad(e.to_string()))?;
            sender
                .ready()
                .await
                .map_err(|e| bad(format!("HTTP/2 connection: {e}")))?;
            sender
                .send_request(req)
                .await
                .map_err(|e| bad(format!("HTTP/2 stream: {e}")))
        };
        let resp = tokio::select! {
            _ = stop.cancelled() => return,
            r = sent => r,
        };
        let mut body = match resp {
            Ok(r) if r.status() == http::StatusCode::OK => r.into_body(),
            Ok(r) => {
                stats.fail(format!("answered {}", r.status().as_u16()));
                continue;
            }
            Err(e) => {
                // The connection is gone: its remaining streams fail with it.
                fail(n - i, e.to_string());
                break;
            }
        };
        stats.connected.fetch_add(1, Ordering::Relaxed);
        let (stats, stop) = (stats.clone(), stop.clone());
        bodies.spawn(async move {
            loop {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    f = body.frame() => match f {
                        Some(Ok(_)) => {
                            stats.frames.fetch_add(1, Ordering::Relaxed);
                        }
                        _ => {
                            stats.ended.fetch_add(1, Ordering::Relaxed);
                            return;
                        }
                    },
                }
            }
        });
    }
    drop(permit);
    stop.cancelled().await;
    // Dropping the sender, the bodies and the connection's task closes the connection.
    bodies.abort_all();
    while bodies.join_next().await.is_some() {}
}

/// The result of one LIST.
#[derive(Debug, Clone, Default)]
pub struct Listed {
    /// HTTP status.
    pub status: u16,
    /// Body bytes.
    pub bytes: u64,
    /// `metadata.resourceVersion` of the list, read from the body's first bytes.
    pub resource_version: Option<String>,
    /// `Retry-After`, when the answer was a 429.
    pub retry_after: Option<u64>,
    /// `metadata.continue`, when the list is one page of several.
    pub continue_token: Option<String>,
}

/// GETs `path_and_query` on `conn` and reads the whole body, keeping only its size and the
/// list's resourceVersion (a list body starts with its metadata).
pub async fn list_on<S: AsyncRead + AsyncWrite + Unpin>(
    conn: &mut Conn<S>,
    path_and_query: &str,
) -> std::io::Result<Listed> {
    conn.get(path_and_query).await?;
    let head = conn.read_head().await?;
    // The list's metadata (resourceVersion, continue) comes first; a continue token is
    // a few hundred bytes.
    let mut first = Vec::new();
    let bytes = conn
        .read_body(&head, |piece| {
            if first.len() < 2048 {
                let take = piece.len().min(2048 - first.len());
                first.extend_from_slice(&piece[..take]);
            }
        })
        .await?;
    let field = |name: &str| {
        let key = format!("\"{name}\":\"");
        let i = memchr::memmem::find(&first, key.as_bytes())?;
        let rest = &first[i + key.len()..];
        let end = memchr::memchr(b'"', rest)?;
        Some(String::from_utf8_lossy(&rest[..end]).into_owned())
    };
    let resource_version = field("resourceVersion");
    let continue_token = field("continue");
    Ok(Listed {
        status: head.status,
        bytes,
        resource_version,
        retry_after: head.retry_after,
        continue_token,
    })
}

/// One LIST on a new connection.
pub async fn list(addr: SocketAddr, path_and_query: &str) -> std::io::Result<Listed> {
    let mut c = Conn::connect(addr).await?;
    list_on(&mut c, path_and_query).await
}

/// One LIST on a new connection to `ep` (over TLS when it says so).
pub async fn list_at(ep: &Endpoint, path_and_query: &str) -> std::io::Result<Listed> {
    match &ep.tls {
        None => list(ep.addr, path_and_query).await,
        Some(tls) => {
            let mut c = Conn::connect_tls(ep.addr, tls).await?;
            list_on(&mut c, path_and_query).await
        }
    }
}

/// One GET on a new connection, keeping the whole body (small answers only: `/metrics`).
pub async fn get_body(addr: SocketAddr, path_and_query: &str) -> std::io::Result<(u16, Vec<u8>)> {
    let (head, body) = get_body_as(addr, path_and_query, Encoding::Json).await?;
    Ok((head.status, body))
}

/// [`get_body`] on a new connection to `ep` (over TLS when it says so).
pub async fn get_body_at(ep: &Endpoint, path_and_query: &str) -> std::io::Result<(u16, Vec<u8>)> {
    let Some(tls) = &ep.tls else {
        return get_body(ep.addr, path_and_query).await;
    };
    let mut c = Conn::connect_tls(ep.addr, tls).await?;
    c.get(path_and_query).await?;
    let head = c.read_head().await?;
    let mut body = Vec::new();
    c.read_body(&head, |p| body.extend_from_slice(p)).await?;
    Ok((head.status, body))
}

/// One GET asking for `encoding` on a new connection, keeping the whole body in memory (sized
/// once from `Content-Length` when given).
pub async fn get_body_as(
    addr: SocketAddr,
    path_and_query: &str,
    encoding: Encoding,
) -> std::io::Result<(Head, Vec<u8>)> {
    get_body_as_bearer(addr, path_and_query, encoding, None).await
}

/// [`get_body_as`] with `Authorization: Bearer <token>` when `token` is given.
pub async fn get_body_as_bearer(
    addr: SocketAddr,
    path_and_query: &str,
    encoding: Encoding,
    token: Option<&str>,
) -> std::io::Result<(Head, Vec<u8>)> {
    let mut c = Conn::connect(addr).await?;
    c.get_as_bearer(path_and_query, encoding, token).await?;
    let head = c.read_head().await?;
    let size = head.content_length.unwrap_or(0).min(1 << 32);
    let mut body = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    c.read_body(&head, |p| body.extend_from_slice(p)).await?;
    Ok((head, body))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(stamp: u64, ty: &str) -> Vec<u8> {
        format!(
            "{{\"type\":\"{ty}\",\"object\":{{\"metadata\":{{\"annotations\":{{\"{WRITE_TIME_ANNOTATION}\":\"{stamp}\"}}}}}}}}"
        )
        .into_bytes()
    }

    #[test]
    fn lines_are_classified_and_timed_inside_the_window_only() {
        let s = WatchStats::default();
        let before = now_unix_nanos() as u64 - 1_000_000;
        let start = s.window.open();
        s.on_line(&line(start + 1, "MODIFIED"));
        s.on_line(&line(before, "MODIFIED"));
        s.on_line(&line(start + 1, "DELETED"));
        s.on_line(b"{\"type\":\"BOOKMARK\",\"object\":{}}");
        s.on_line(b"{\"type\":\"ERROR\",\"object\":{}}");
        s.window.close();
        s.on_line(&line(start + 2, "MODIFIED"));
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        assert_eq!(get(&s.frames), 6);
        assert_eq!((get(&s.bookmarks), get(&s.errors)), (1, 1));
        assert_eq!(get(&s.received_in_window), 3);
        assert_eq!(get(&s.stamped_in_window), 2);
        assert_eq!(s.latency.count(), 2);
    }

    #[test]
    fn protobuf_events_are_classified_and_timed_like_lines() {
        use kube_wire::proto::{envelope, json_to_proto, message_for};
        let event = |stamp: u64, ty: &str, deleting: bool| {
            let mut meta = serde_json::json!({"name": "p",
                "annotations": {WRITE_TIME_ANNOTATION: stamp.to_string()}});
            if deleting {
                meta["deletionTimestamp"] = "2026-01-01T00:00:00Z".into();
            }
            let pod = serde_json::json!({ "metadata": meta }).to_string();
            let body = json_to_proto(message_for("v1", "Pod").unwrap(), pod.as_bytes()).unwrap();
            envelope::watch_event(ty, &envelope::wrap("v1", "Pod", &body))
        };
        let s = WatchStats::default();
        let before = now_unix_nanos() as u64 - 1_000_000;
        let start = s.window.open();
        let objects = [
            event(start + 1, "MODIFIED", false),
            event(before, "MODIFIED", false),
            event(start + 1, "MODIFIED", true),
            event(start + 1, "DELETED", false),
        ];
        for e in &objects {
            s.on_protobuf(e);
        }
        s.on_protobuf(&envelope::watch_event("BOOKMARK", b""));
        s.on_protobuf(&envelope::watch_event("ERROR", b""));
        s.window.close();
        s.on_protobuf(&event(start + 2, "MODIFIED", false));
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        assert_eq!(get(&s.frames), 7);
        assert_eq!((get(&s.bookmarks), get(&s.errors)), (1, 1));
        assert_eq!(get(&s.received_in_window), 4);
        // The in-window write received after the window closed counts; the deleting pod's and
        // the DELETED event's do not.
        assert_eq!(get(&s.stamped_in_window), 2);
        assert_eq!(s.latency.count(), 2);
        let wire: usize = objects.iter().map(|e| e.len() + 4).sum();
        assert_eq!(get(&s.bytes_in_window), wire as u64);
    }

    #[tokio::test]
    async fn reads_chunked_and_sized_bodies() {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut s, _) = l.accept().await.unwrap();
            let mut b = vec![0u8; 4096];
            let _ = s.read(&mut b).await.unwrap();
            s.write_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"met\r\n1f;x=y\r\nadata\":{\"resourceVersion\":\"7\"}}\r\n0\r\n\r\n")
                .await
                .unwrap();
            let _ = s.read(&mut b).await.unwrap();
            s.write_all(
                b"HTTP/1.1 429 Too Many Requests\r\nContent-Length: 2\r\nRetry-After: 1\r\n\r\n{}",
            )
            .await
            .unwrap();
        });
        let mut c = Conn::connect(addr).await.unwrap();
        let a = list_on(&mut c, "/a").await.unwrap();
        assert_eq!((a.status, a.bytes), (200, 36));
        assert_eq!(a.resource_version.as_deref(), Some("7"));
        let b = list_on(&mut c, "/b").await.unwrap();
        assert_eq!((b.status, b.bytes, b.retry_after), (429, 2, Some(1)));
    }
}
