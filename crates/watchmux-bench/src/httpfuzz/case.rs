//! One fuzz case: the request (as a structure while it is generated and mutated, then as the
//! exact bytes or HTTP/2 request that go out), the transport it goes out on, and what the checker
//! needs to know of each request the server saw ([`Meta`], read back from the bytes themselves,
//! so a mutation that changed the path or the method is judged by what was really sent).
//!
//! Data and rendering only: generating is [`super::generate`]'s, sending [`super::wire`]'s.

use bytes::Bytes;
use http_body_util::Full;

/// The transport a case uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Transport {
    /// Well-formed HTTP/1.1 (or 1.0) bytes, possibly with mutated values and framing.
    Http1,
    /// A websocket handshake (good or broken), then frames (good and garbage).
    WebSocket,
    /// HTTP/2 with prior knowledge (h2c), through hyper's client.
    H2,
    /// Raw, malformed HTTP/1 bytes.
    RawHttp1,
    /// The HTTP/2 preface followed by garbage frames.
    RawH2,
}

impl Transport {
    /// Name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Transport::Http1 => "http1",
            Transport::WebSocket => "websocket",
            Transport::H2 => "h2c",
            Transport::RawHttp1 => "raw-http1",
            Transport::RawH2 => "raw-h2",
        }
    }
}

/// Where a case's request came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Origin {
    /// A real client's request, unchanged.
    Corpus,
    /// A real client's request, mutated.
    Mutated,
    /// Generated from the kube path and query grammar.
    Generated,
}

impl Origin {
    /// Name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Origin::Corpus => "corpus",
            Origin::Mutated => "mutated",
            Origin::Generated => "generated",
        }
    }
}

/// What a request was meant to be (before mutation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// A LIST.
    List,
    /// A LIST with `limit` or `continue`.
    PagedList,
    /// A GET of one object.
    Get,
    /// A WATCH.
    Watch,
    /// A watch-list (`sendInitialEvents=true`).
    WatchList,
    /// A write (POST, PUT, PATCH, DELETE).
    Write,
    /// Discovery, version, health, metrics.
    Discovery,
    /// Anything else (random paths, odd methods, garbage).
    Other,
}

impl Kind {
    /// Name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Kind::List => "list",
            Kind::PagedList => "paged-list",
            Kind::Get => "get",
            Kind::Watch => "watch",
            Kind::WatchList => "watch-list",
            Kind::Write => "write",
            Kind::Discovery => "discovery",
            Kind::Other => "other",
        }
    }
}

/// How a structured request's body is framed on HTTP/1.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Framing {
    /// `Content-Length` of the body (none for an empty body).
    Auto,
    /// Neither `Content-Length` nor chunking (the headers may carry their own).
    Bare,
    /// `Transfer-Encoding: chunked`, the body in one or more well-formed chunks.
    Chunked,
    /// This `Content-Length` value, whatever the body's length.
    Declared(String),
}

/// A request as a structure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Req {
    /// Method token (any bytes that are text).
    pub method: String,
    /// Path, as sent (percent-encoding included).
    pub path: String,
    /// Query pieces (`k=v`, already encoded), joined with `&`; none: no `?`.
    pub query: Vec<String>,
    /// Headers in order (`Host` is added first unless `no_host`).
    pub headers: Vec<(String, Vec<u8>)>,
    /// Body.
    pub body: Vec<u8>,
    /// Body framing.
    pub framing: Framing,
    /// `HTTP/1.1` or `HTTP/1.0`.
    pub version: &'static str,
    /// Leave `Host` out.
    pub no_host: bool,
}

impl Req {
    /// A GET of `path` with `query` pieces and no headers.
    pub fn get(path: impl Into<String>, query: &[&str]) -> Req {
        Req {
            method: "GET".into(),
            path: path.into(),
            query: query.iter().map(|q| q.to_string()).collect(),
            headers: Vec::new(),
            body: Vec::new(),
            framing: Framing::Auto,
            version: "HTTP/1.1",
            no_host: false,
        }
    }

    /// Adds a header.
    pub fn header(mut self, name: &str, value: impl Into<Vec<u8>>) -> Req {
        self.headers.push((name.to_string(), value.into()));
        self
    }

    /// Sets the method and body.
    pub fn with_body(mut self, method: &str, body: impl Into<Vec<u8>>) -> Req {
        self.method = method.to_string();
        self.body = body.into();
        self
    }

    /// The request target: path and query.
    pub fn target(&self) -> String {
        if self.query.is_empty() {
            self.path.clone()
        } else {
            format!("{}?{}", self.path, self.query.join("&"))
        }
    }

    /// Whether a header named `name` (any case) is set.
    pub fn has(&self, name: &str) -> bool {
        self.headers
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case(name))
    }

    /// Removes every header named `name` (any case).
    pub fn remove(&mut self, name: &str) {
        self.headers.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
    }

    /// The HTTP/1 bytes: request line, `Host`, headers, framing, body.
    pub fn to_http1(&self, host: &str) -> Vec<u8> {
        let mut out = Vec::with_capacity(256 + self.body.len());
        out.extend_from_slice(self.method.as_bytes());
        out.push(b' ');
        out.extend_from_slice(self.target().as_bytes());
        out.push(b' ');
        out.extend_from_slice(self.version.as_bytes());
        out.extend_from_slice(b"\r\n");
        if !self.no_host && !self.has("host") {
            out.extend_from_slice(format!("Host: {host}\r\n").as_bytes());
        }
        for (n, v) in &self.headers {
            out.extend_from_slice(n.as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(v);
            out.extend_from_slice(b"\r\n");
        }
        match &self.framing {
            Framing::Auto if !self.body.is_empty() => {
                out.extend_from_slice(format!("Content-Length: {}\r\n", self.body.len()).as_bytes())
            }
            Framing::Declared(v) => {
                out.extend_from_slice(format!("Content-Length: {v}\r\n").as_bytes())
            }
            Framing::Chunked => out.extend_from_slice(b"Transfer-Encoding: chunked\r\n"),
            Framing::Auto | Framing::Bare => {}
        }
        out.extend_from_slice(b"\r\n");
        if self.framing == Framing::Chunked {
            // Two chunks when there is enough body, to exercise the decoder.
            let cut = self.body.len() / 2;
            for part in [&self.body[..cut], &self.body[cut..]] {
                if !part.is_empty() {
                    out.extend_from_slice(format!("{:x}\r\n", part.len()).as_bytes());
                    out.extend_from_slice(part);
                    out.extend_from_slice(b"\r\n");
                }
            }
            out.extend_from_slice(b"0\r\n\r\n");
        } else {
            out.extend_from_slice(&self.body);
        }
        out
    }

    /// The size of its header list as HTTP/2 counts it (RFC 9113 §6.5.2: name, value and 32
    /// bytes per field).
    pub fn header_list_size(&self) -> usize {
        self.headers
            .iter()
            .map(|(n, v)| n.len() + v.len() + 32)
            .sum::<usize>()
            + self.target().len()
            + self.method.len()
            + 4 * 32
    }

    /// The same request for hyper's HTTP/2 client, when the http crate can express it
    /// (a method token, a URI, header names and values); HTTP/1-only headers are left out, as
    /// HTTP/2 forbids them (RFC 9113 §8.2.2).
    pub fn to_h2(&self, authority: &str) -> Option<http::Request<Full<Bytes>>> {
        let method = http::Method::from_bytes(self.method.as_bytes()).ok()?;
        // hyper's client sends CONNECT only as an authority-form tunnel request.
        if method == http::Method::CONNECT {
            return None;
        }
        let uri: http::Uri = format!("http://{authority}{}", self.target())
            .parse()
            .ok()?;
        let mut b = http::Request::builder()
            .method(method)
            .uri(uri)
            .version(http::Version::HTTP_2);
        for (n, v) in &self.headers {
            let lower = n.to_ascii_lowercase();
            if matches!(
                lower.as_str(),
                "host"
                    | "connection"
                    | "keep-alive"
                    | "proxy-connection"
                    | "transfer-encoding"
                    | "upgrade"
                    | "te"
                    | "content-length"
            ) {
                continue;
            }
            let name = http::HeaderName::from_bytes(n.as_bytes()).ok()?;
            let value = http::HeaderValue::from_bytes(v).ok()?;
            b = b.header(name, value);
        }
        b.body(Full::new(Bytes::from(self.body.clone()))).ok()
    }
}

/// What goes on the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Wire {
    /// HTTP/1 bytes written as they are (one or more requests); with `half_close` the write
    /// side is shut afterwards (the bytes are known to be an incomplete request, which the
    /// server would otherwise wait for); `more` says the bytes may draw more than one answer.
    Http1 {
        /// The bytes.
        bytes: Vec<u8>,
        /// Shut the write side after writing.
        half_close: bool,
        /// Read answers after the first.
        more: bool,
    },
    /// A websocket handshake, then `after` once the server switched protocols.
    WebSocket {
        /// The handshake request.
        handshake: Vec<u8>,
        /// Frames (or garbage) sent after a 101.
        after: Vec<u8>,
    },
    /// HTTP/2 requests on one connection, one after the other.
    H2 {
        /// The requests.
        requests: Vec<Req>,
    },
    /// Bytes on a fresh connection that speak (broken) HTTP/2.
    RawH2 {
        /// The bytes.
        bytes: Vec<u8>,
    },
}

/// One fuzz case.
#[derive(Debug, Clone)]
pub struct Case {
    /// Index in the run (with the seed, all it takes to generate it again).
    pub index: u64,
    /// Transport.
    pub transport: Transport,
    /// Origin of the request.
    pub origin: Origin,
    /// What the request was meant to be.
    pub kind: Kind,
    /// What was done to it (mutations), for the report.
    pub note: String,
    /// What goes on the wire.
    pub wire: Wire,
}

impl Case {
    /// The bytes that reproduce the case: HTTP/1, websocket (handshake, then what follows the
    /// 101) and raw HTTP/2 as sent; HTTP/2 requests as their HTTP/1 rendering (for reading: they
    /// went out as HTTP/2 frames).
    pub fn bytes(&self, host: &str) -> Vec<u8> {
        match &self.wire {
            Wire::Http1 { bytes, .. } | Wire::RawH2 { bytes } => bytes.clone(),
            Wire::WebSocket { handshake, after } => {
                let mut b = handshake.clone();
                b.extend_from_slice(after);
                b
            }
            Wire::H2 { requests } => requests.iter().flat_map(|r| r.to_http1(host)).collect(),
        }
    }
}

/// What the checker knows of one request the server saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Meta {
    /// Method token.
    pub method: String,
    /// Path (without query).
    pub path: String,
    /// Under `/api` or `/apis`: an error answer with a body must be a kube `Status`.
    pub api: bool,
    /// kube reads it as a watch (`watch` query parameter, or a `/watch/` path).
    pub watch: bool,
    /// A GET of one object (or of its subresource).
    pub object: bool,
    /// It asks for a protocol upgrade.
    pub upgrade: bool,
    /// The length of its body: its `Content-Length`, or what its chunks decode to (0 without
    /// either).
    pub body: u64,
    /// Bytes follow it on the connection that are not a complete request (a pipelined
    /// fragment, garbage, a body longer than announced).
    pub trailing: bool,
    /// Its body breaks off: shorter than announced, or chunks that do not decode or never end.
    pub broken_body: bool,
}

impl Meta {
    /// The meta of a request with `method` and `target` (path and query).
    pub fn of(method: &str, target: &str, upgrade: bool) -> Meta {
        let (path, query) = match target.split_once('?') {
            Some((p, q)) => (p, Some(q)),
            None => (target, None),
        };
        let api = path == "/api"
            || path == "/apis"
            || path.starts_with("/api/")
            || path.starts_with("/apis/");
        // kube's request info: a GET is a watch on a `/watch/` path, or on a collection (no
        // name, no subresource) with a true `watch` parameter; a GET of one object ignores it.
        let (watch, object) = match kube_wire::path::parse(path) {
            kube_wire::path::ApiPath::Resource(rp) if method == "GET" => (
                rp.legacy_watch
                    || (rp.name.is_none()
                        && rp.subresource.is_none()
                        && kube_wire::options::is_watch_query(query)),
                rp.name.is_some() && !rp.legacy_watch,
            ),
            _ => (false, false),
        };
        Meta {
            method: method.to_string(),
            path: path.to_string(),
            api,
            watch,
            object,
            upgrade,
            body: 0,
            trailing: false,
            broken_body: false,
        }
    }

    /// A HEAD request (its answers have no body).
    pub fn head(&self) -> bool {
        self.method == "HEAD"
    }
}

/// The requests in HTTP/1 `bytes` as the server's parser reads them, in order, until one does
/// not parse (or the bytes end): the checker judges each answer against its request.
pub fn metas(bytes: &[u8]) -> Vec<Meta> {
    let mut out: Vec<Meta> = Vec::new();
    let mut at = 0usize;
    while at < bytes.len() && out.len() < 16 {
        let mut headers = [httparse::EMPTY_HEADER; 512];
        let mut r = httparse::Request::new(&mut headers);
        let Some(rest) = bytes.get(at..) else { break };
        let Ok(httparse::Status::Complete(n)) = r.parse(rest) else {
            if let Some(last) = out.last_mut() {
                last.trailing = true;
            }
            break;
        };
        let (Some(method), Some(path)) = (r.method, r.path) else {
            break;
        };
        let mut length = Some(0u64);
        let mut chunked = false;
        let mut upgrade = false;
        for h in r.headers.iter() {
            if h.name.eq_ignore_ascii_case("content-length") {
                length = std::str::from_utf8(h.value)
                    .ok()
                    .and_then(|v| v.trim().parse().ok());
            } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
                chunked = true;
            } else if h.name.eq_ignore_ascii_case("upgrade") {
                upgrade = true;
            }
        }
        let mut m = Meta::of(method, path, upgrade);
        m.body = length.unwrap_or(0);
        let body = rest.get(n..).unwrap_or_default();
        m.broken_body = if chunked {
            let mut c = super::parse::Chunked::default();
            let mut decoded = Vec::new();
            let broken = c.feed(body, &mut decoded).is_err() || !c.done();
            m.body = decoded.len() as u64;
            broken
        } else {
            length.is_some_and(|l| (body.len() as u64) < l)
        };
        out.push(m);
        // The end of a chunked body is not worth finding here, nor that of an unreadable
        // length: later requests, if any, are not judged.
        let next = at
            .checked_add(n)
            .and_then(|x| x.checked_add(usize::try_from(length?).ok()?));
        match next {
            Some(next) if !chunked => at = next,
            _ => break,
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rendering_and_metas() {
        let r = Req::get("/api/v1/pods", &["watch=1", "resourceVersion=0"])
            .header("Accept", "application/json");
        let b = r.to_http1("h:1");
        assert_eq!(
            b,
            b"GET /api/v1/pods?watch=1&resourceVersion=0 HTTP/1.1\r\nHost: h:1\r\nAccept: application/json\r\n\r\n"
        );
        let mut w = Req::get("/api/v1/namespaces/a/configmaps", &[]).with_body("POST", "{}");
        w.framing = Framing::Chunked;
        let mut both = w.to_http1("h");
        w.framing = Framing::Auto;
        assert!(w.to_http1("h").ends_with(b"Content-Length: 2\r\n\r\n{}"));
        both.extend_from_slice(&Req::get("/healthz", &[]).to_http1("h"));
        let m = metas(&both);
        assert_eq!(m.len(), 1, "a chunked request ends the scan");
        let mut two = w.to_http1("h");
        two.extend_from_slice(&b);
        let m = metas(&two);
        assert_eq!(m.len(), 2);
        assert!(m[0].api && !m[0].watch && m[0].method == "POST");
        assert!(m[1].api && m[1].watch);
        assert!(Meta::of("GET", "/api/v1/watch/pods", false).watch);
        assert!(
            Meta::of("GET", "/api/v1/pods?watch=F", false).watch,
            "kube's bool"
        );
        for not in [
            ("GET", "/api/v1/namespaces/a/pods/b?watch=1"),
            ("GET", "/api/v1/namespaces/a/pods/b/status?watch=1"),
            ("PATCH", "/api/v1/pods?watch=1"),
            ("GET", "/api?watch=1"),
            ("GET", "/readyz?watch=1"),
        ] {
            assert!(!Meta::of(not.0, not.1, false).watch, "{not:?}");
        }
        assert!(!Meta::of("GET", "/apix/v1/pods?watch=0", false).api);
        assert!(metas(b"\x00garbage").is_empty());
        let mut junk = b.clone();
        junk.extend_from_slice(b"GET /x HTTP/1.1\r\nHost");
        let m = metas(&junk);
        assert!(m.len() == 1 && m[0].watch && m[0].trailing);
        assert!(!metas(&b)[0].trailing);
        let short = b"POST /api/v1/x HTTP/1.1\r\ncontent-length: 5\r\n\r\nab";
        assert!(metas(short)[0].broken_body);
        let bad =
            b"GET /api/v1/x HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n5\r\nabc\r\n0\r\n\r\n";
        assert!(metas(bad)[0].broken_body);
        let good =
            b"GET /api/v1/x HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n";
        assert!(!metas(good)[0].broken_body);
    }

    #[test]
    fn h2_requests_drop_connection_headers() {
        let r = Req::get("/api/v1/pods", &["limit=1"])
            .header("Connection", "close")
            .header("Accept", "application/json");
        let h = r.to_h2("127.0.0.1:1").unwrap();
        assert!(h.headers().get("connection").is_none());
        assert_eq!(
            h.uri().path_and_query().unwrap().as_str(),
            "/api/v1/pods?limit=1"
        );
        let bad = Req::get("/api/v1/pods", &[]).header("Bad Name", "x");
        assert!(bad.to_h2("h").is_none());
    }
}
