//! The limit baseline: a minimal server that writes the upstream's pre-encoded bytes to the same
//! sockets, with no cache, selectors or HTTP framework.
//!
//! The benchmark compares watchmux with what a user would otherwise run (the simulator directly,
//! nginx) and with this program: the physical limit of a fan-out proxy on this machine. Whatever
//! watchmux spends above it is overhead that could in principle be removed; whatever this program
//! spends is the cost of moving the bytes at all. So it does as little as possible:
//!
//! * **Fan-out.** For each resource (`pods`, `nodes`) it holds one upstream watch, opened on the
//!   first downstream watch of that resource. Every upstream line is turned once into the bytes
//!   of one HTTP chunk (`{len:x}\r\n{line}\r\n`, a [`Bytes`]); that one buffer is then queued to
//!   every matching downstream socket (a reference-count increment each) and written with
//!   vectored writes, several frames per system call when a socket has fallen behind. A socket
//!   64Ki frames behind is hung up on, so one slow client cannot hold the others up or grow
//!   memory without bound. When the upstream watch ends, it is resumed from the last
//!   resourceVersion seen (from a fresh one when that has expired).
//! * **Routing.** A pod watch with `fieldSelector=spec.nodeName=X` (the kubelet's watch) gets the
//!   frames whose first `"nodeName":"` value is `X`; a node watch with
//!   `fieldSelector=metadata.name=X` gets the frames of node `X`. The subscribers of a resource
//!   are kept in a map from that key, so dispatching a frame costs a byte search plus one queue
//!   push per *matching* socket, not per socket. BOOKMARK frames go to every watcher.
//! * **List.** The first GET of a path and query fetches the upstream's response once; every
//!   request for it (the first included) is answered from that one pre-built body.
//!
//! It is a yardstick, **not a correct proxy**: it ignores `resourceVersion`, `sendInitialEvents`,
//! label selectors and namespaces (a namespaced pod watch gets the whole cluster's stream); the
//! routing ignores move-out (a pod that moves away from node `X` is not sent to `X`'s watchers as
//! DELETED, and a pod without a node reaches no node-routed watcher); lists are never refreshed;
//! request headers (`Accept`, authentication) are not forwarded. Each of these would only add
//! work, so what this program measures is a lower bound on the work a fan-out proxy must do.
//!
//! * **TLS.** With `--tls-cert-file` and `--tls-key-file` it serves TLS (rustls, ALPN
//!   `http/1.1` only: it speaks no HTTP/2); the handshake happens in the connection's own task,
//!   which then runs the same code over the TLS stream. The upstream stays plain HTTP.
//!
//! It runs as its own child process (`watchmux-bench limit --listen ADDR --upstream URL`), so its
//! CPU time and RSS can be read from `/proc` like those of the other processes under test.

use std::collections::HashMap;
use std::io::{self, IoSlice};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::header::{ACCEPT, HOST};
use http::{Request, Response, StatusCode, Uri};
use http_body_util::{BodyExt, Empty};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use memchr::memmem;
use parking_lot::Mutex;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OnceCell, mpsc};
use tokio_rustls::TlsAcceptor;

/// Settings of the limit server.
#[derive(Debug, Clone)]
pub struct LimitArgs {
    /// Address to listen on (127.0.0.1:PORT; the runner picks the port).
    pub listen: SocketAddr,
    /// The simulator's base URL, e.g. `http://127.0.0.1:8001` (plain HTTP only).
    pub upstream: String,
    /// Serve TLS with this certificate chain and key (PEM files); plain TCP when `None`.
    pub tls: Option<(PathBuf, PathBuf)>,
}

/// Why the limit server could not start. Once it serves, upstream failures are retried and
/// answered per request (502), never returned: the benchmark kills the process when done.
#[derive(Debug, thiserror::Error)]
pub enum LimitError {
    /// The listen address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// Address.
        addr: SocketAddr,
        /// Cause.
        source: io::Error,
    },
    /// The TLS certificate or key could not be loaded.
    #[error("TLS: {0}")]
    Tls(String),
    /// The upstream URL is not a plain `http://host:port` URL.
    #[error("invalid upstream URL {url:?}: {reason}")]
    Upstream {
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
}

/// Longest request head read (request line and headers).
const MAX_HEAD: usize = 16 * 1024;
/// Frames a downstream socket may fall behind before it is dropped.
const QUEUE: usize = 65_536;
/// Frames taken from a socket's queue at once (and written with as few system calls as possible).
const BATCH: usize = 256;
/// Buffers per vectored write (Linux allows 1024).
const MAX_IOV: usize = 64;
/// Pause before retrying a failed upstream request.
const RETRY: Duration = Duration::from_millis(200);
/// A client's TLS handshake must finish within this.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The head of every watch response: chunked, so a frame can be sent the moment it arrives.
const WATCH_HEAD: &[u8] =
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
const NOT_FOUND: &[u8] = b"HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\nContent-Length: 58\r\nConnection: close\r\n\r\nthe limit serves GET (lists) and watches of pods and nodes\n";
const BAD_GATEWAY: &[u8] = b"HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain\r\nContent-Length: 26\r\nConnection: close\r\n\r\nthe upstream is unreachable\n";

/// Binds `args.listen` and serves until the process is killed.
pub async fn serve(args: LimitArgs) -> Result<(), LimitError> {
    let upstream = Upstream::parse(&args.upstream)?;
    let tls = args
        .tls
        .as_ref()
        .map(|(cert, key)| super::tls::acceptor(cert, key, &[b"http/1.1"]))
        .transpose()
        .map_err(LimitError::Tls)?;
    let listener = TcpListener::bind(args.listen)
        .await
        .map_err(|source| LimitError::Bind {
            addr: args.listen,
            source,
        })?;
    serve_on(listener, upstream, tls).await
}

/// The accept loop, on a bound listener (tests bind port 0 themselves); TLS when `tls` is set.
async fn serve_on(
    listener: TcpListener,
    upstream: Upstream,
    tls: Option<TlsAcceptor>,
) -> Result<(), LimitError> {
    let limit = Arc::new(Limit {
        upstream,
        lists: Mutex::new(HashMap::new()),
        feeds: [OnceCell::new(), OnceCell::new()],
    });
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                let _ = stream.set_nodelay(true);
                match &tls {
                    None => {
                        tokio::spawn(connection(limit.clone(), stream));
                    }
                    Some(acceptor) => {
                        let (limit, acceptor) = (limit.clone(), acceptor.clone());
                        tokio::spawn(async move {
                            let accepted =
                                tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream));
                            if let Ok(Ok(stream)) = accepted.await {
                                connection(limit, stream).await;
                            }
                        });
                    }
                }
            }
            Err(e) => {
                // Usually EMFILE: back off instead of spinning; closing sockets free descriptors.
                tracing::warn!(error = %e, "limit: accept failed");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
}

/// Where the simulator is.
#[derive(Debug)]
struct Upstream {
    /// `host:port`, to connect to and for the `Host` header.
    authority: String,
    /// Path prefix of the base URL without the trailing `/` (usually empty).
    base: String,
}

impl Upstream {
    fn parse(url: &str) -> Result<Upstream, LimitError> {
        let err = |reason: &str| LimitError::Upstream {
            url: url.to_string(),
            reason: reason.to_string(),
        };
        let uri: Uri = url.parse().map_err(|_| err("not a URL"))?;
        if uri.scheme_str() != Some("http") {
            return Err(err("only http:// is supported"));
        }
        let authority = uri.authority().ok_or_else(|| err("no host"))?;
        let port = authority.port_u16().unwrap_or(80);
        Ok(Upstream {
            authority: format!("{}:{port}", authority.host()),
            base: uri.path().trim_end_matches('/').to_string(),
        })
    }
}

/// The two resources the limit watches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Resource {
    Pods = 0,
    Nodes = 1,
}

impl Resource {
    fn name(self) -> &'static str {
        match self {
            Resource::Pods => "pods",
            Resource::Nodes => "nodes",
        }
    }

    /// The field selector term that routes watches of this resource, and the JSON text that
    /// precedes the routed value in a frame. The simulator (like kube-apiserver) writes
    /// `metadata` first and `name` first in it, so a node frame's `"metadata":{"name":"` is its
    /// own name; `"nodeName":"` appears in a pod only as `spec.nodeName` (managed fields spell
    /// it `"f:nodeName"`).
    fn route(self) -> (&'static str, &'static [u8]) {
        match self {
            Resource::Pods => ("spec.nodeName", b"\"nodeName\":\""),
            Resource::Nodes => ("metadata.name", b"\"metadata\":{\"name\":\""),
        }
    }
}

/// Shared state of the server.
struct Limit {
    upstream: Upstream,
    /// Pre-built responses by path and query; the cell makes concurrent first requests fetch once.
    lists: Mutex<HashMap<String, Arc<OnceCell<Arc<Prebuilt>>>>>,
    /// The upstream watch of each [`Resource`], opened on first use.
    feeds: [OnceCell<Arc<Feed>>; 2],
}

/// A response fetched once and replayed: its head (with `Content-Length`) and body.
struct Prebuilt {
    head: Bytes,
    body: Bytes,
}

impl Limit {
    /// Sends `GET {base}{path_and_query}` on a new connection. A connection per request keeps the
    /// client trivial; it is only used for the first LIST of each URL and for (re)opening the two
    /// upstream watches.
    async fn get(&self, path_and_query: &str) -> Result<Response<Incoming>, String> {
        let stream = TcpStream::connect(&self.upstream.authority)
            .await
            .map_err(|e| format!("connect {}: {e}", self.upstream.authority))?;
        let _ = stream.set_nodelay(true);
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| e.to_string())?;
        // Ends with the response body, once `sender` is dropped.
        tokio::spawn(conn);
        let req = Request::get(format!("{}{path_and_query}", self.upstream.base))
            .header(HOST, &self.upstream.authority)
            .header(ACCEPT, "application/json")
            .body(Empty::<Bytes>::new())
            .map_err(|e| e.to_string())?;
        sender.send_request(req).await.map_err(|e| e.to_string())
    }

    /// The pre-built response for `path_and_query`, fetched on first use.
    async fn prebuilt(&self, path_and_query: &str) -> Result<Arc<Prebuilt>, String> {
        let cell = {
            let mut lists = self.lists.lock();
            match lists.get(path_and_query) {
                Some(c) => c.clone(),
                None => lists.entry(path_and_query.to_string()).or_default().clone(),
            }
        };
        let built = cell
            .get_or_try_init(|| async {
                let resp = self.get(path_and_query).await?;
                let status = resp.status();
                let content_type = resp
                    .headers()
                    .get(http::header::CONTENT_TYPE)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("application/json")
                    .to_string();
                let body = resp
                    .into_body()
                    .collect()
                    .await
                    .map_err(|e| e.to_string())?
                    .to_bytes();
                let head = format!(
                    "HTTP/1.1 {} {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\r\n",
                    status.as_u16(),
                    status.canonical_reason().unwrap_or(""),
                    body.len()
                );
                Ok::<_, String>(Arc::new(Prebuilt {
                    head: Bytes::from(head),
                    body,
                }))
            })
            .await?;
        Ok(built.clone())
    }

    /// The feed of `res`, opening the upstream watch on first use. When this returns, the
    /// upstream watch is established, so a subscriber added now misses no later change.
    async fn feed(self: &Arc<Self>, res: Resource) -> Result<Arc<Feed>, String> {
        let feed = self.feeds[res as usize]
            .get_or_try_init(|| async {
                let rv = self.current_rv(res).await?;
                let body = self.open_watch(res, &rv).await?;
                let feed = Arc::new(Feed::new(res));
                tokio::spawn(pump(self.clone(), feed.clone(), body, rv));
                Ok::<_, String>(feed)
            })
            .await?;
        Ok(feed.clone())
    }

    /// The resource's current `resourceVersion`, from a one-item LIST.
    async fn current_rv(&self, res: Resource) -> Result<String, String> {
        let resp = self.get(&format!("/api/v1/{}?limit=1", res.name())).await?;
        if resp.status() != StatusCode::OK {
            return Err(format!("LIST {} answered {}", res.name(), resp.status()));
        }
        let body = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| e.to_string())?
            .to_bytes();
        let v: serde_json::Value = serde_json::from_slice(&body).map_err(|e| e.to_string())?;
        v["metadata"]["resourceVersion"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| format!("LIST {} has no metadata.resourceVersion", res.name()))
    }

    async fn open_watch(&self, res: Resource, rv: &str) -> Result<Incoming, String> {
        let resp = self
            .get(&format!(
                "/api/v1/{}?watch=1&allowWatchBookmarks=true&resourceVersion={rv}",
                res.name()
            ))
            .await?;
        if resp.status() != StatusCode::OK {
            return Err(format!("WATCH {} answered {}", res.name(), resp.status()));
        }
        Ok(resp.into_body())
    }

    /// Retries `current_rv` until the upstream answers.
    async fn current_rv_retrying(&self, res: Resource) -> String {
        loop {
            match self.current_rv(res).await {
                Ok(rv) => return rv,
                Err(e) => {
                    tracing::warn!(resource = res.name(), error = %e, "limit: relist failed");
                    tokio::time::sleep(RETRY).await;
                }
            }
        }
    }
}

/// A downstream socket's queue. `try_send` never waits: a socket that is `QUEUE` frames behind
/// is dropped, so one slow client cannot hold up the others.
type Subscriber = mpsc::Sender<Bytes>;

/// The subscribers of one resource's upstream watch.
struct Feed {
    res: Resource,
    /// Finds the routing key in a frame.
    finder: memmem::Finder<'static>,
    subs: Mutex<Subscribers>,
}

#[derive(Default)]
struct Subscribers {
    /// Watches that get every frame.
    all: Vec<Subscriber>,
    /// Routed watches by key (node name).
    by_key: HashMap<Box<[u8]>, Vec<Subscriber>>,
}

/// Queues `frame` to each subscriber, forgetting the ones that are gone or too far behind.
fn send_all(subs: &mut Vec<Subscriber>, frame: &Bytes) {
    subs.retain(|tx| tx.try_send(frame.clone()).is_ok());
}

impl Feed {
    fn new(res: Resource) -> Feed {
        Feed {
            res,
            finder: memmem::Finder::new(res.route().1),
            subs: Mutex::new(Subscribers::default()),
        }
    }

    fn subscribe(&self, key: Option<Vec<u8>>) -> mpsc::Receiver<Bytes> {
        let (tx, rx) = mpsc::channel(QUEUE);
        let mut subs = self.subs.lock();
        match key {
            None => subs.all.push(tx),
            Some(k) => subs
                .by_key
                .entry(k.into_boxed_slice())
                .or_default()
                .push(tx),
        }
        rx
    }

    /// The routing key of `line`: the string value after the resource's marker.
    fn key<'a>(&self, line: &'a [u8]) -> Option<&'a [u8]> {
        let start = self.finder.find(line)? + self.finder.needle().len();
        let len = memchr::memchr(b'"', &line[start..])?;
        Some(&line[start..start + len])
    }

    /// Hands one upstream line (with its `\n`) to its subscribers as one HTTP chunk; returns the
    /// chunk.
    fn dispatch(&self, line: &[u8]) -> Bytes {
        let frame = chunk(line);
        let mut subs = self.subs.lock();
        let subs = &mut *subs;
        send_all(&mut subs.all, &frame);
        if subs.by_key.is_empty() {
            return frame;
        }
        if line.starts_with(b"{\"type\":\"BOOKMARK\"") {
            for v in subs.by_key.values_mut() {
                send_all(v, &frame);
            }
            subs.by_key.retain(|_, v| !v.is_empty());
        } else if let Some(key) = self.key(line)
            && let Some(v) = subs.by_key.get_mut(key)
        {
            send_all(v, &frame);
            if v.is_empty() {
                subs.by_key.remove(key);
            }
        }
        frame
    }
}

/// One line as one HTTP chunk: `{len:x}\r\n{line}\r\n`, built once for all sockets.
fn chunk(line: &[u8]) -> Bytes {
    let mut b = BytesMut::with_capacity(line.len() + 12);
    b.extend_from_slice(format!("{:x}\r\n", line.len()).as_bytes());
    b.extend_from_slice(line);
    b.extend_from_slice(b"\r\n");
    b.freeze()
}

/// Reads the upstream watch of `feed` forever: splits the body into lines and dispatches them;
/// when the stream ends (the apiserver's watch timeout, a fault), re-watches from the last
/// resourceVersion seen, or from a fresh LIST's when that has expired (events in between are
/// lost: acceptable for a yardstick).
async fn pump(limit: Arc<Limit>, feed: Arc<Feed>, mut body: Incoming, mut rv: String) {
    let res = feed.res;
    let rv_finder = memmem::Finder::new(b"\"resourceVersion\":\"");
    let mut partial: Vec<u8> = Vec::new();
    loop {
        // The last frame dispatched (a reference, not a copy), to resume from its resourceVersion.
        let mut last: Option<Bytes> = None;
        let mut expired = false;
        'stream: while let Some(Ok(frame)) = body.frame().await {
            let Ok(data) = frame.into_data() else {
                continue;
            };
            let mut rest: &[u8] = &data;
            while let Some(i) = memchr::memchr(b'\n', rest) {
                let (piece, tail) = rest.split_at(i + 1);
                rest = tail;
                let line: &[u8] = if partial.is_empty() {
                    piece
                } else {
                    partial.extend_from_slice(piece);
                    &partial
                };
                if line.starts_with(b"{\"type\":\"ERROR\"") {
                    // 410 Gone and friends: not the downstream's business; start over.
                    expired = true;
                    break 'stream;
                }
                if line.len() > 1 {
                    last = Some(feed.dispatch(line));
                }
                partial.clear();
            }
            partial.extend_from_slice(rest);
        }
        partial.clear();
        // metadata comes first in an object and resourceVersion early in metadata, so the first
        // match is the object's own (managed fields follow it).
        if let Some(l) = last
            && let Some(i) = rv_finder.find(&l)
        {
            let start = i + rv_finder.needle().len();
            if let Some(len) = memchr::memchr(b'"', &l[start..]) {
                rv = String::from_utf8_lossy(&l[start..start + len]).into_owned();
            }
        }
        if expired {
            rv = limit.current_rv_retrying(res).await;
        }
        body = loop {
            match limit.open_watch(res, &rv).await {
                Ok(b) => break b,
                Err(e) => {
                    tracing::warn!(resource = res.name(), error = %e, "limit: re-watch failed");
                    tokio::time::sleep(RETRY).await;
                    rv = limit.current_rv_retrying(res).await;
                }
            }
        };
    }
}

/// What a request asks for.
#[derive(Debug, PartialEq, Eq)]
enum Route {
    /// A watch of `Resource`, routed by key when it has the resource's field selector.
    Watch(Resource, Option<Vec<u8>>),
    /// A GET answered from a pre-built body.
    List,
    /// Anything else.
    NotFound,
}

/// The parts of a request head the limit looks at.
#[derive(Debug)]
struct Head<'a> {
    method: &'a str,
    target: &'a str,
    /// The client asked to close after the response (or spoke HTTP/1.0).
    close: bool,
    /// The request has a body (the limit does not read bodies; it answers and closes).
    has_body: bool,
}

fn parse_head(head: &[u8]) -> Option<Head<'_>> {
    let text = std::str::from_utf8(head).ok()?;
    let mut lines = text.split("\r\n");
    let mut parts = lines.next()?.split(' ');
    let (method, target, version) = (parts.next()?, parts.next()?, parts.next()?);
    let mut close = version != "HTTP/1.1";
    let mut has_body = false;
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("connection") {
            close = value.eq_ignore_ascii_case("close");
        } else if name.eq_ignore_ascii_case("transfer-encoding")
            || (name.eq_ignore_ascii_case("content-length") && value != "0")
        {
            has_body = true;
        }
    }
    Some(Head {
        method,
        target,
        close,
        has_body,
    })
}

/// Classifies a GET by its path and query.
fn route(target: &str) -> Route {
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let mut watch = false;
    let mut selector = None;
    for (k, v) in form_urlencoded::parse(query.as_bytes()) {
        match &*k {
            "watch" => watch = v == "1" || v == "true",
            "fieldSelector" => selector = Some(v.into_owned()),
            _ => {}
        }
    }
    let rest = match path.strip_prefix("/api/v1/watch/") {
        Some(rest) => {
            watch = true;
            rest
        }
        None => match path.strip_prefix("/api/v1/") {
            Some(rest) => rest,
            None => return if watch { Route::NotFound } else { Route::List },
        },
    };
    if !watch {
        return Route::List;
    }
    let res = match rest.split('/').collect::<Vec<_>>().as_slice() {
        ["pods"] | ["namespaces", _, "pods"] => Resource::Pods,
        ["nodes"] => Resource::Nodes,
        _ => return Route::NotFound,
    };
    let field = res.route().0;
    let key = selector.and_then(|s| {
        s.split(',').find_map(|term| {
            let value = term.strip_prefix(field)?;
            let value = value
                .strip_prefix("==")
                .or_else(|| value.strip_prefix('='))?;
            Some(value.as_bytes().to_vec())
        })
    });
    Route::Watch(res, key)
}

/// A downstream connection: plain TCP or TLS over it.
trait Downstream: AsyncRead + AsyncWrite + Unpin + Send + 'static {
    /// Whether the client hung up, while the watch has nothing to write: `Ready(true)` on EOF or
    /// an error, `Ready(false)` when bytes arrived (read into `scratch` and ignored), `Pending`
    /// until either happens.
    fn poll_hung_up(&mut self, cx: &mut Context<'_>, scratch: &mut [u8]) -> Poll<bool>;
}

impl Downstream for TcpStream {
    /// Readiness, then a non-blocking read: no read future is kept between frames.
    fn poll_hung_up(&mut self, cx: &mut Context<'_>, scratch: &mut [u8]) -> Poll<bool> {
        match self.poll_read_ready(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Err(_)) => Poll::Ready(true),
            Poll::Ready(Ok(())) => match self.try_read(scratch) {
                Ok(0) => Poll::Ready(true),
                Ok(_) => Poll::Ready(false),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => Poll::Ready(false),
                Err(_) => Poll::Ready(true),
            },
        }
    }
}

impl Downstream for tokio_rustls::server::TlsStream<TcpStream> {
    /// A read through TLS (a close_notify or a TCP EOF ends it).
    fn poll_hung_up(&mut self, cx: &mut Context<'_>, scratch: &mut [u8]) -> Poll<bool> {
        let mut buf = ReadBuf::new(scratch);
        match Pin::new(self).poll_read(cx, &mut buf) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Err(_)) => Poll::Ready(true),
            Poll::Ready(Ok(())) => Poll::Ready(buf.filled().is_empty()),
        }
    }
}

/// Writes `bytes` and flushes them (TLS holds written bytes until flushed; TCP has no buffer).
async fn send<S: Downstream>(stream: &mut S, bytes: &[u8]) -> io::Result<()> {
    stream.write_all(bytes).await?;
    stream.flush().await
}

/// Serves one downstream connection: requests until a watch (which keeps the connection), a
/// `Connection: close`, an error or EOF.
async fn connection<S: Downstream>(limit: Arc<Limit>, mut stream: S) {
    let mut buf: Vec<u8> = Vec::with_capacity(1024);
    loop {
        let Some(end) = read_head(&mut stream, &mut buf).await else {
            return;
        };
        let Some(head) = parse_head(&buf[..end - 4]) else {
            return;
        };
        let route = if head.method == "GET" && !head.has_body {
            route(head.target)
        } else {
            Route::NotFound
        };
        let keep = match route {
            Route::Watch(res, key) => {
                watch(&limit, stream, res, key).await;
                return;
            }
            Route::NotFound => {
                let _ = send(&mut stream, NOT_FOUND).await;
                return;
            }
            Route::List => {
                let target = head.target.to_string();
                let close = head.close;
                match limit.prebuilt(&target).await {
                    Ok(p) => {
                        write_all_vectored(&mut stream, &[&p.head, &p.body])
                            .await
                            .is_ok()
                            && !close
                    }
                    Err(e) => {
                        tracing::warn!(target = %target, error = %e, "limit: LIST failed");
                        let _ = send(&mut stream, BAD_GATEWAY).await;
                        false
                    }
                }
            }
        };
        if !keep {
            return;
        }
        buf.drain(..end);
    }
}

/// Reads until `buf` holds a whole request head; returns the offset just past its `\r\n\r\n`.
/// Bytes after it (a pipelined request) stay in `buf`.
async fn read_head<S: Downstream>(stream: &mut S, buf: &mut Vec<u8>) -> Option<usize> {
    use tokio::io::AsyncReadExt;
    let mut searched = 0;
    loop {
        if let Some(i) = memmem::find(&buf[searched..], b"\r\n\r\n") {
            return Some(searched + i + 4);
        }
        searched = buf.len().saturating_sub(3);
        if buf.len() >= MAX_HEAD {
            return None;
        }
        buf.reserve(1024);
        if stream.read_buf(buf).await.ok()? == 0 {
            return None;
        }
    }
}

/// Streams a watch to a downstream socket until either side goes away.
async fn watch<S: Downstream>(
    limit: &Arc<Limit>,
    mut stream: S,
    res: Resource,
    key: Option<Vec<u8>>,
) {
    let feed = match limit.feed(res).await {
        Ok(f) => f,
        Err(e) => {
            tracing::warn!(resource = res.name(), error = %e, "limit: upstream watch failed");
            let _ = send(&mut stream, BAD_GATEWAY).await;
            return;
        }
    };
    // Subscribed before the head goes out: a client that has seen the head misses nothing after.
    let mut rx = feed.subscribe(key);
    drop(feed);
    if send(&mut stream, WATCH_HEAD).await.is_err() {
        return;
    }
    let mut batch: Vec<Bytes> = Vec::with_capacity(BATCH);
    let mut scratch = [0u8; 256];
    loop {
        tokio::select! {
            n = rx.recv_many(&mut batch, BATCH) => {
                // The feed forgets a socket (drops its sender) only when it fell too far behind:
                // hang up at once rather than write the backlog first.
                if n == 0 || rx.is_closed() || write_frames(&mut stream, &batch).await.is_err() {
                    return;
                }
                batch.clear();
            }
            // Notices a client that hung up even when no frame is routed to it.
            gone = std::future::poll_fn(|cx| stream.poll_hung_up(cx, &mut scratch)) => {
                if gone {
                    return;
                }
            }
        }
    }
}

/// Writes whole frames with vectored writes, up to [`MAX_IOV`] frames per system call (over
/// TLS: per record batch), then flushes.
async fn write_frames<S: Downstream>(stream: &mut S, frames: &[Bytes]) -> io::Result<()> {
    for group in frames.chunks(MAX_IOV) {
        let mut iov = [IoSlice::new(&[]); MAX_IOV];
        for (slot, f) in iov.iter_mut().zip(group) {
            *slot = IoSlice::new(f);
        }
        write_iov(stream, &mut iov[..group.len()]).await?;
    }
    stream.flush().await
}

async fn write_all_vectored<S: Downstream>(stream: &mut S, bufs: &[&[u8]]) -> io::Result<()> {
    let mut iov = [IoSlice::new(&[]); 4];
    for (slot, b) in iov.iter_mut().zip(bufs) {
        *slot = IoSlice::new(b);
    }
    write_iov(stream, &mut iov[..bufs.len().min(4)]).await?;
    stream.flush().await
}

async fn write_iov<S: Downstream>(stream: &mut S, mut iov: &mut [IoSlice<'_>]) -> io::Result<()> {
    while !iov.is_empty() {
        let n = stream.write_vectored(iov).await?;
        if n == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        IoSlice::advance_slices(&mut iov, n);
    }
    Ok(())
}

/// A raw HTTP/1.1 client for tests: sees the bytes exactly as sent (chunk boundaries included),
/// which is what the limit and the nginx baseline are about.
#[cfg(test)]
pub(crate) mod raw_client {
    use std::net::SocketAddr;
    use std::time::Duration;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

    /// One connection and what has been read from it but not consumed.
    pub(crate) struct Conn {
        stream: TcpStream,
        buf: Vec<u8>,
    }

    /// A response head: status and headers (names lower-cased).
    pub(crate) struct Head {
        pub status: u16,
        pub headers: Vec<(String, String)>,
    }

    impl Head {
        pub fn header(&self, name: &str) -> Option<&str> {
            self.headers
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.as_str())
        }
    }

    impl Conn {
        pub async fn open(addr: SocketAddr) -> Conn {
            Conn {
                stream: TcpStream::connect(addr).await.expect("connect"),
                buf: Vec::new(),
            }
        }

        pub async fn send(&mut self, method: &str, target: &str) {
            let req = format!("{method} {target} HTTP/1.1\r\nHost: test\r\n\r\n");
            self.stream.write_all(req.as_bytes()).await.expect("write");
        }

        /// Reads more bytes; panics after `wait` without any, or on EOF.
        async fn fill(&mut self, wait: Duration) {
            self.buf.reserve(64 * 1024);
            let n = tokio::time::timeout(wait, self.stream.read_buf(&mut self.buf))
                .await
                .expect("timed out waiting for bytes")
                .expect("read");
            assert!(n > 0, "connection closed");
        }

        async fn take_until(&mut self, delim: &[u8], wait: Duration) -> Vec<u8> {
            loop {
                if let Some(i) = memchr::memmem::find(&self.buf, delim) {
                    let out: Vec<u8> = self.buf.drain(..i + delim.len()).collect();
                    return out[..i].to_vec();
                }
                self.fill(wait).await;
            }
        }

        async fn take(&mut self, n: usize, wait: Duration) -> Vec<u8> {
            while self.buf.len() < n {
                self.fill(wait).await;
            }
            self.buf.drain(..n).collect()
        }

        pub async fn head(&mut self) -> Head {
            let raw = self.take_until(b"\r\n\r\n", Duration::from_secs(10)).await;
            let text = String::from_utf8(raw).expect("utf-8 head");
            let mut lines = text.split("\r\n");
            let status = lines.next().unwrap().split(' ').nth(1).unwrap();
            Head {
                status: status.parse().unwrap(),
                headers: lines
                    .filter_map(|l| l.split_once(':'))
                    .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
                    .collect(),
            }
        }

        /// The next chunk's data (empty for the last chunk).
        pub async fn chunk(&mut self, wait: Duration) -> Vec<u8> {
            let size = self.take_until(b"\r\n", wait).await;
            let size = std::str::from_utf8(&size).unwrap();
            let size = usize::from_str_radix(size.split(';').next().unwrap(), 16).unwrap();
            let data = self.take(size + 2, wait).await;
            assert_eq!(&data[size..], b"\r\n", "chunk trailer");
            data[..size].to_vec()
        }

        /// The next line of a chunked body, however it is split into chunks.
        pub async fn line(&mut self, pending: &mut Vec<u8>, wait: Duration) -> Vec<u8> {
            loop {
                if let Some(i) = memchr::memchr(b'\n', pending) {
                    return pending.drain(..=i).collect();
                }
                let c = self.chunk(wait).await;
                assert!(!c.is_empty(), "stream ended");
                pending.extend_from_slice(&c);
            }
        }

        /// A whole response: head and body (Content-Length or chunked).
        pub async fn response(&mut self) -> (Head, Vec<u8>) {
            let head = self.head().await;
            let wait = Duration::from_secs(10);
            let body = if let Some(n) = head.header("content-length") {
                self.take(n.parse().unwrap(), wait).await
            } else if head.header("transfer-encoding") == Some("chunked") {
                let mut body = Vec::new();
                loop {
                    let c = self.chunk(wait).await;
                    if c.is_empty() {
                        break;
                    }
                    body.extend_from_slice(&c);
                }
                body
            } else {
                panic!("response without length")
            };
            (head, body)
        }

        /// Whether the server closes the connection within `wait`.
        pub async fn closed_within(&mut self, wait: Duration) -> bool {
            let mut tmp = [0u8; 1024];
            matches!(
                tokio::time::timeout(wait, self.stream.read(&mut tmp)).await,
                Ok(Ok(0) | Err(_))
            )
        }
    }

    /// `GET target` on a new connection.
    pub async fn get(addr: SocketAddr, target: &str) -> (Head, Vec<u8>) {
        let mut c = Conn::open(addr).await;
        c.send("GET", target).await;
        c.response().await
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::{Value, json};

    use super::raw_client::{Conn, get};
    use super::*;
    use kube_sim::fleet::FleetSpec;
    use kube_sim::{SimConfig, Simulator};

    const WAIT: Duration = Duration::from_secs(5);

    async fn fleet_sim(config: SimConfig) -> Simulator {
        Simulator::start(SimConfig {
            fleet: Some(FleetSpec {
                nodes: 2,
                pods: 6,
                namespaces: 2,
                seed: 7,
            }),
            ..config
        })
        .await
        .unwrap()
    }

    /// Starts the limit in front of `sim` on a free port; it stops with the test's runtime.
    async fn start_limit(sim: &Simulator) -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let upstream = Upstream::parse(&sim.url()).unwrap();
        tokio::spawn(serve_on(listener, upstream, None));
        addr
    }

    /// Opens a watch and checks the head.
    async fn watch(addr: SocketAddr, target: &str) -> Conn {
        let mut c = Conn::open(addr).await;
        c.send("GET", target).await;
        let head = c.head().await;
        assert_eq!(head.status, 200, "{target}");
        assert_eq!(head.header("transfer-encoding"), Some("chunked"));
        assert_eq!(head.header("content-type"), Some("application/json"));
        c
    }

    fn stat(sim: &Simulator, resource: &str, counter: &str) -> i64 {
        sim.stats()["resources"][resource][counter]
            .as_i64()
            .unwrap()
    }

    /// (namespace, name, node) of every pod.
    fn pods(sim: &Simulator) -> Vec<(String, String, String)> {
        let rt = sim.resource("", "v1", "pods").unwrap();
        let page = sim
            .store()
            .list(&rt, None, None, None, 0, &|_| true, false)
            .unwrap();
        page.items
            .iter()
            .map(|o| {
                let v: Value = serde_json::from_slice(&o.body).unwrap();
                let node = v["spec"]["nodeName"].as_str().unwrap().to_string();
                (o.namespace.clone(), o.name.clone(), node)
            })
            .collect()
    }

    fn touch(sim: &Simulator, resource: &str, ns: Option<&str>, name: &str, value: &str) {
        let rt = sim.resource("", "v1", resource).unwrap();
        sim.ops()
            .modify(&rt, ns, name, |v| {
                v["metadata"]["labels"]["bench-touch"] = json!(value)
            })
            .unwrap();
    }

    fn event(line: &[u8]) -> Value {
        assert_eq!(line.last(), Some(&b'\n'), "a frame is one line");
        serde_json::from_slice(line).unwrap()
    }

    #[test]
    fn routes_requests() {
        assert_eq!(
            route("/api/v1/pods?watch=1"),
            Route::Watch(Resource::Pods, None)
        );
        assert_eq!(
            route("/api/v1/namespaces/a/pods?watch=true&resourceVersion=5"),
            Route::Watch(Resource::Pods, None)
        );
        assert_eq!(
            route("/api/v1/watch/nodes?fieldSelector=metadata.name%3Dn1"),
            Route::Watch(Resource::Nodes, Some(b"n1".to_vec()))
        );
        assert_eq!(
            route(
                "/api/v1/pods?watch=1&fieldSelector=status.phase!%3DFailed,spec.nodeName%3D%3Dn2"
            ),
            Route::Watch(Resource::Pods, Some(b"n2".to_vec()))
        );
        assert_eq!(route("/api/v1/pods?watch=0"), Route::List);
        assert_eq!(route("/api/v1/namespaces/a/pods?limit=500"), Route::List);
        assert_eq!(route("/apis/apps/v1/deployments"), Route::List);
        assert_eq!(route("/api/v1/configmaps?watch=1"), Route::NotFound);
        assert_eq!(route("/apis/apps/v1/deployments?watch=1"), Route::NotFound);
    }

    #[test]
    fn parses_heads_and_upstreams() {
        let h = parse_head(b"GET /a?b HTTP/1.1\r\nHost: x\r\nConnection: Close").unwrap();
        assert_eq!(
            (h.method, h.target, h.close, h.has_body),
            ("GET", "/a?b", true, false)
        );
        let h = parse_head(b"POST /a HTTP/1.1\r\nContent-Length: 3").unwrap();
        assert!(h.has_body && !h.close);
        assert!(parse_head(b"GET /a HTTP/1.0").unwrap().close);
        let u = Upstream::parse("http://127.0.0.1:8001/").unwrap();
        assert_eq!(
            (u.authority.as_str(), u.base.as_str()),
            ("127.0.0.1:8001", "")
        );
        assert_eq!(
            Upstream::parse("http://localhost").unwrap().authority,
            "localhost:80"
        );
        assert!(Upstream::parse("https://127.0.0.1:6443").is_err());
        assert_eq!(&chunk(b"{\"a\":1}\n")[..], b"8\r\n{\"a\":1}\n\r\n");
    }

    #[tokio::test]
    async fn fans_out_the_same_frame_to_every_watch() {
        let sim = fleet_sim(SimConfig::default()).await;
        let addr = start_limit(&sim).await;
        let mut watches = vec![
            watch(addr, "/api/v1/pods?watch=1").await,
            watch(addr, "/api/v1/watch/pods").await,
            watch(
                addr,
                "/api/v1/namespaces/fleet-0/pods?watch=true&resourceVersion=0",
            )
            .await,
        ];
        // One upstream watch (and the one-item LIST that started it) for all three.
        assert_eq!(stat(&sim, "pods", "openWatches"), 1);
        assert_eq!(stat(&sim, "pods", "watchRequests"), 1);
        assert_eq!(stat(&sim, "pods", "listRequests"), 1);
        // A direct watch of the simulator from now on, to compare bytes with.
        let (_, list) = get(sim.addr(), "/api/v1/pods?limit=1").await;
        let rv = event(&[list, b"\n".to_vec()].concat())["metadata"]["resourceVersion"].clone();
        let rv = rv.as_str().unwrap();
        let mut direct = watch(
            sim.addr(),
            &format!("/api/v1/pods?watch=1&resourceVersion={rv}"),
        )
        .await;

        let (ns, name, _) = pods(&sim).into_iter().next().unwrap();
        touch(&sim, "pods", Some(&ns), &name, "1");
        let mut pending = Vec::new();
        let want = direct.line(&mut pending, WAIT).await;
        let ev = event(&want);
        assert_eq!(ev["type"], "MODIFIED");
        assert_eq!(ev["object"]["metadata"]["name"], name.as_str());
        for w in &mut watches {
            // One frame, one chunk, byte-identical to the simulator's line.
            assert_eq!(w.chunk(WAIT).await, want);
        }
        // A second watch of the same resource later still shares the upstream watch.
        let mut late = watch(addr, "/api/v1/pods?watch=1").await;
        touch(&sim, "pods", Some(&ns), &name, "2");
        let want = direct.line(&mut pending, WAIT).await;
        for w in watches.iter_mut().chain([&mut late]) {
            assert_eq!(w.chunk(WAIT).await, want);
        }
        assert_eq!(stat(&sim, "pods", "watchRequests"), 2); // ours + the direct one
    }

    #[tokio::test]
    async fn serves_lists_and_watches_over_tls_and_no_http2() {
        use crate::tls::{Pki, Transport, acceptor};
        let sim = fleet_sim(SimConfig::default()).await;
        let dir = tempfile::tempdir().unwrap();
        let pki = Pki::generate(dir.path()).unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let tls = acceptor(&pki.cert_file, &pki.key_file, &[b"http/1.1"]).unwrap();
        let upstream = Upstream::parse(&sim.url()).unwrap();
        tokio::spawn(serve_on(listener, upstream, Some(tls)));
        let h1 = pki.connector(Transport::Tls).unwrap();

        // A LIST over TLS is the simulator's body; then a watch on the same connection.
        let target = "/api/v1/namespaces/fleet-0/pods";
        let (_, direct) = get(sim.addr(), target).await;
        let mut c = crate::client::Conn::connect_tls(addr, &h1).await.unwrap();
        let l = crate::client::list_on(&mut c, target).await.unwrap();
        assert_eq!((l.status, l.bytes), (200, direct.len() as u64));
        c.get("/api/v1/pods?watch=1").await.unwrap();
        let head = c.read_head().await.unwrap();
        assert!(head.status == 200 && head.chunked, "{head:?}");
        let (ns, name, _) = pods(&sim).into_iter().next().unwrap();
        touch(&sim, "pods", Some(&ns), &name, "tls");
        let (mut stream, mut seen) = c.into_parts();
        let needle = format!("\"name\":\"{name}\"");
        tokio::time::timeout(WAIT, async {
            while memmem::find(&seen, needle.as_bytes()).is_none() {
                use tokio::io::AsyncReadExt;
                assert!(
                    stream.read_buf(&mut seen).await.unwrap() > 0,
                    "stream ended"
                );
            }
        })
        .await
        .expect("the touched pod's event over TLS");
        assert!(memmem::find(&seen, b"\"bench-touch\":\"tls\"").is_some());

        // HTTP/2 is refused at the handshake: ALPN offers only http/1.1.
        let h2 = pki.connector(Transport::H2).unwrap();
        let tcp = TcpStream::connect(addr).await.unwrap();
        let name = rustls::pki_types::ServerName::IpAddress(addr.ip().into());
        assert!(h2.connect(name, tcp).await.is_err());
    }

    #[tokio::test]
    async fn routes_by_node() {
        let sim = fleet_sim(SimConfig::default()).await;
        let addr = start_limit(&sim).await;
        let all = pods(&sim);
        let nodes: Vec<String> = {
            let mut n: Vec<String> = all.iter().map(|p| p.2.clone()).collect();
            n.sort();
            n.dedup();
            n
        };
        assert_eq!(nodes.len(), 2, "{all:?}");
        let sel = |n: &str| format!("/api/v1/pods?watch=1&fieldSelector=spec.nodeName%3D{n}");
        let mut on0 = watch(addr, &sel(&nodes[0])).await;
        let mut on1 = watch(addr, &sel(&nodes[1])).await;
        let mut nowhere = watch(addr, &sel("no-such-node")).await;
        let mut every = watch(addr, "/api/v1/pods?watch=1").await;
        let mut node0 = watch(
            addr,
            &format!(
                "/api/v1/nodes?watch=1&fieldSelector=metadata.name%3D{}",
                nodes[0]
            ),
        )
        .await;
        assert_eq!(stat(&sim, "pods", "watchRequests"), 1);
        assert_eq!(stat(&sim, "nodes", "watchRequests"), 1);

        // Every pod once: each node's watch gets exactly its pods, in order.
        for (ns, name, _) in &all {
            touch(&sim, "pods", Some(ns), name, "x");
        }
        for (ns, name, node) in &all {
            let ev = event(&every.chunk(WAIT).await);
            assert_eq!(ev["object"]["metadata"]["name"], name.as_str());
            let w = if *node == nodes[0] {
                &mut on0
            } else {
                &mut on1
            };
            let ev = event(&w.chunk(WAIT).await);
            assert_eq!(ev["object"]["metadata"]["name"], name.as_str());
            assert_eq!(ev["object"]["metadata"]["namespace"], ns.as_str());
            assert_eq!(ev["object"]["spec"]["nodeName"], node.as_str());
        }
        // Node changes: node 1 first, yet node 0's watch sees node 0's change first.
        touch(&sim, "nodes", None, &nodes[1], "y");
        touch(&sim, "nodes", None, &nodes[0], "y");
        let ev = event(&node0.chunk(WAIT).await);
        assert_eq!(ev["object"]["metadata"]["name"], nodes[0].as_str());
        // Nothing else was routed to the watches of a single node.
        for w in [&mut on0, &mut on1, &mut nowhere, &mut node0] {
            assert!(!w.closed_within(Duration::from_millis(200)).await);
        }
    }

    #[tokio::test]
    async fn bookmarks_reach_routed_watches() {
        let sim = fleet_sim(SimConfig {
            bookmark_interval: Duration::from_millis(200),
            ..SimConfig::default()
        })
        .await;
        let addr = start_limit(&sim).await;
        let mut w = watch(
            addr,
            "/api/v1/pods?watch=1&fieldSelector=spec.nodeName%3Dno-such-node",
        )
        .await;
        // A periodic bookmark is sent when the revision moved past the last event sent: a node
        // write moves it without a pod event.
        let node = kube_sim::fleet::node_name(0);
        touch(&sim, "nodes", None, &node, "b");
        let ev = event(&w.chunk(WAIT).await);
        assert_eq!(ev["type"], "BOOKMARK");
    }

    #[tokio::test]
    async fn resumes_when_the_upstream_watch_ends() {
        // Upstream watches last 300-600 ms: the limit must re-watch from the last revision it saw
        // without losing or repeating an event.
        let sim = fleet_sim(SimConfig {
            min_request_timeout: Duration::from_millis(300),
            ..SimConfig::default()
        })
        .await;
        let addr = start_limit(&sim).await;
        let mut w = watch(addr, "/api/v1/pods?watch=1").await;
        let (ns, name, _) = pods(&sim).into_iter().next().unwrap();
        for i in 0..8 {
            touch(&sim, "pods", Some(&ns), &name, &i.to_string());
            tokio::time::sleep(Duration::from_millis(150)).await;
        }
        for i in 0..8 {
            let ev = event(&w.chunk(WAIT).await);
            assert_eq!(
                ev["object"]["metadata"]["labels"]["bench-touch"],
                i.to_string()
            );
        }
        assert!(stat(&sim, "pods", "watchRequests") >= 2);
    }

    /// A rough throughput figure (clients, simulator and limit share this process):
    /// `cargo test --release -p watchmux-bench --lib limit::tests::fan_out_throughput -- --ignored --nocapture`
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[ignore = "measurement, not a check"]
    async fn fan_out_throughput() {
        const WATCHES: usize = 2000;
        const WRITES: usize = 500;
        let sim = fleet_sim(SimConfig::default()).await;
        let addr = start_limit(&sim).await;
        let mut readers = Vec::new();
        for _ in 0..WATCHES {
            let mut c = watch(addr, "/api/v1/pods?watch=1").await;
            readers.push(tokio::spawn(async move {
                for _ in 0..WRITES {
                    c.chunk(Duration::from_secs(30)).await;
                }
            }));
        }
        let all = pods(&sim);
        let started = std::time::Instant::now();
        for i in 0..WRITES {
            let (ns, name, _) = &all[i % all.len()];
            touch(&sim, "pods", Some(ns), name, &i.to_string());
            if i % 50 == 0 {
                tokio::task::yield_now().await;
            }
        }
        for r in readers {
            r.await.unwrap();
        }
        let took = started.elapsed();
        let frames = WATCHES * WRITES;
        eprintln!(
            "{WATCHES} watches x {WRITES} writes: {frames} frames in {took:?} ({:.0} frames/s)",
            frames as f64 / took.as_secs_f64()
        );
    }

    #[tokio::test]
    async fn lists_are_fetched_once_and_replayed() {
        let sim = fleet_sim(SimConfig::default()).await;
        let addr = start_limit(&sim).await;
        let target = "/api/v1/namespaces/fleet-0/pods";
        let (h, direct) = get(sim.addr(), target).await;
        assert_eq!(h.status, 200);
        assert_eq!(stat(&sim, "pods", "listRequests"), 1);

        // Concurrent first requests, then two more on one keep-alive connection, then a watch on
        // that same connection.
        let (a, b) = tokio::join!(get(addr, target), get(addr, target));
        for (h, body) in [a, b] {
            assert_eq!(h.status, 200);
            assert_eq!(h.header("content-type"), Some("application/json"));
            assert_eq!(h.header("content-length"), Some(&*direct.len().to_string()));
            assert_eq!(body, direct);
        }
        let mut c = Conn::open(addr).await;
        for _ in 0..2 {
            c.send("GET", target).await;
            let (h, body) = c.response().await;
            assert_eq!(h.status, 200);
            assert_eq!(body, direct);
        }
        assert_eq!(
            stat(&sim, "pods", "listRequests"),
            2,
            "one direct, one by the limit"
        );

        c.send("GET", "/api/v1/pods?watch=1").await;
        assert_eq!(c.head().await.status, 200);
        let (ns, name, _) = pods(&sim).into_iter().next().unwrap();
        touch(&sim, "pods", Some(&ns), &name, "w");
        let ev = event(&c.chunk(WAIT).await);
        assert_eq!(ev["object"]["metadata"]["name"], name.as_str());

        // Upstream errors are replayed as they were; other methods are not served.
        let (h, body) = get(addr, "/api/v1/namespaces/fleet-0/pods/nope").await;
        assert_eq!(h.status, 404);
        assert_eq!(
            body,
            get(sim.addr(), "/api/v1/namespaces/fleet-0/pods/nope")
                .await
                .1
        );
        let mut c = Conn::open(addr).await;
        c.send("DELETE", target).await;
        assert_eq!(c.head().await.status, 404);
    }
}
