//! HTTP response building shared by the proxy and the simulator: JSON and Status answers with
//! kube-apiserver's headers, and list bodies streamed from stored bytes.
//!
//! Builds `http::Response` values only: it never writes to a connection, and it does not decide
//! which Status a failure becomes (the caller does).

use std::convert::Infallible;
use std::io;

use bytes::{BufMut, Bytes, BytesMut};
use http::header::{CACHE_CONTROL, CONTENT_TYPE, HeaderValue, RETRY_AFTER};
use http::{Response, StatusCode};
use http_body::Frame;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Empty, Full, StreamBody};

use crate::status::Status;

/// The one HTTP body type of the workspace: every response watchmux and the simulator send, and
/// every request body watchmux sends to the upstream (a streamed body, boxed).
pub type Body = BoxBody<Bytes, io::Error>;

/// A complete body.
pub fn full(b: impl Into<Bytes>) -> Body {
    Full::new(b.into())
        .map_err(|e: Infallible| match e {})
        .boxed()
}

/// A body with no bytes (a GET sent upstream, a `101 Switching Protocols` answer).
pub fn empty() -> Body {
    Empty::new().map_err(|e: Infallible| match e {}).boxed()
}

/// A JSON response with kube-apiserver's standard headers. The body ends with a newline, as
/// Go's `json.Encoder` (kube's serializer) writes it; `body` is the encoded object without it.
pub fn json_response(code: StatusCode, body: impl Into<Bytes>) -> Response<Body> {
    let body: Bytes = body.into();
    let mut b = BytesMut::with_capacity(body.len() + 1);
    b.put_slice(&body);
    b.put_u8(b'\n');
    with_json_headers(Response::new(full(b.freeze())), code)
}

/// The `Audit-Id` header kube-apiserver puts on every response: the request's own `Audit-Id`
/// (`requested`) if it sent one, else a random (version 4) UUID made from `random`.
pub fn audit_id(requested: Option<&HeaderValue>, random: u128) -> HeaderValue {
    if let Some(v) = requested.filter(|v| !v.is_empty()) {
        return v.clone();
    }
    let id = uuid_v4(random.to_be_bytes());
    HeaderValue::from_str(&id).unwrap_or_else(|_| HeaderValue::from_static("unknown"))
}

/// `resp` with its whole body indented as Go's `json.MarshalIndent` writes it (kube's
/// `?pretty=true`; see [`wants_pretty`]), without the trailing newline. The body must be a
/// complete, uncompressed JSON answer (never a watch stream); one that fails to read is answered
/// empty, the headers having promised JSON.
pub async fn pretty_printed(resp: Response<Body>) -> Response<Body> {
    let (mut parts, body) = resp.into_parts();
    let bytes = body
        .collect()
        .await
        .map(|c| c.to_bytes())
        .unwrap_or_default();
    parts.headers.remove(http::header::CONTENT_LENGTH);
    Response::from_parts(parts, full(crate::gofmt::indent(&bytes)))
}

/// A version-4 UUID made from 16 random bytes, as Go's `uuid.New().String()` prints it (the
/// form of kube's `metadata.uid` and `Audit-Id`).
pub fn uuid_v4(mut b: [u8; 16]) -> String {
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// The `Audit-Id` header name.
pub const AUDIT_ID: &str = "audit-id";

/// Whether kube-apiserver would pretty-print JSON for this request: `?pretty=true` (or `1`,
/// as Go's `strconv.ParseBool` reads it), or no `pretty` parameter and a `User-Agent` that
/// starts with `curl` or `Wget` (apiserver `handlers/negotiation` `isPrettyPrint`).
pub fn wants_pretty(query: Option<&str>, headers: &http::HeaderMap) -> bool {
    if let Some(q) = query {
        for (k, v) in form_urlencoded::parse(q.as_bytes()) {
            if k == "pretty" {
                return matches!(v.as_ref(), "1" | "t" | "T" | "true" | "TRUE" | "True");
            }
        }
    }
    headers
        .get(http::header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ua| ua.starts_with("curl") || ua.starts_with("Wget"))
}

fn with_json_headers(mut r: Response<Body>, code: StatusCode) -> Response<Body> {
    *r.status_mut() = code;
    let h = r.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache, private"));
    r
}

/// An answer in protobuf (`application/vnd.kubernetes.protobuf`) with kube's headers.
pub fn protobuf_response(code: StatusCode, body: impl Into<Bytes>) -> Response<Body> {
    let mut r = Response::new(full(body.into()));
    *r.status_mut() = code;
    let h = r.headers_mut();
    h.insert(
        CONTENT_TYPE,
        HeaderValue::from_static(crate::negotiate::PROTOBUF),
    );
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache, private"));
    r
}

/// [`status_response`] in protobuf, for a client whose `Accept` settles on it
/// ([`crate::negotiate::status_encoding`]); in JSON should the Status not transcode.
pub fn protobuf_status_response(s: &Status) -> Response<Body> {
    let Ok(body) = crate::proto::envelope::status(&s.to_json()) else {
        return status_response(s);
    };
    for_status(s, |code| protobuf_response(code, body))
}

/// The HTTP answer for a Status (with `Retry-After` when it carries one).
pub fn status_response(s: &Status) -> Response<Body> {
    for_status(s, |code| json_response(code, s.to_json()))
}

/// The answer `build` makes for `s`'s HTTP code, with `s`'s `Retry-After` when it carries one.
fn for_status(s: &Status, build: impl FnOnce(StatusCode) -> Response<Body>) -> Response<Body> {
    let code = StatusCode::from_u16(s.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut r = build(code);
    if let Some(ra) = s.retry_after() {
        r.headers_mut().insert(RETRY_AFTER, HeaderValue::from(ra));
    }
    r
}

/// A Status as kube's `WriteRawJSON` writes it when the client's `Accept` header takes none of
/// its serializers (see [`crate::negotiate::status_encoding`]): indented as `json.MarshalIndent`
/// does, without the trailing newline of its serializers.
pub fn raw_status_response(s: &Status) -> Response<Body> {
    for_status(s, |code| {
        with_json_headers(
            Response::new(full(crate::gofmt::indent(&s.to_json()))),
            code,
        )
    })
}

/// A streamed JSON response (a watch, or a list built from stored items).
pub fn stream_response<S>(stream: S) -> Response<Body>
where
    S: futures_util::Stream<Item = Result<Frame<Bytes>, io::Error>> + Send + Sync + 'static,
{
    with_json_headers(
        Response::new(BodyExt::boxed(StreamBody::new(stream))),
        StatusCode::OK,
    )
}

/// The head of a List body: `{"kind":…,"apiVersion":…,"metadata":{…},"items":[`.
pub fn list_head(list_kind: &str, api_version: &str, metadata: &serde_json::Value) -> String {
    format!(
        "{{\"kind\":\"{list_kind}\",\"apiVersion\":\"{api_version}\",\"metadata\":{metadata},\"items\":["
    )
}

/// kube-apiserver gzips responses larger than this when the client accepts gzip.
pub const GZIP_THRESHOLD: usize = 128 * 1024;

/// Whether `Accept-Encoding` allows gzip (a `gzip` coding without `q=0`).
pub fn accepts_gzip(headers: &http::HeaderMap) -> bool {
    headers
        .get_all(http::header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|coding| {
            let mut parts = coding.split(';').map(str::trim);
            let name = parts.next().unwrap_or_default();
            let zero_q = parts.any(|p| {
                matches!(
                    p.replace(' ', "").as_str(),
                    "q=0" | "q=0.0" | "q=0.00" | "q=0.000"
                )
            });
            (name.eq_ignore_ascii_case("gzip") || name == "*") && !zero_q
        })
}

/// Streams a List body built from stored items, never copied into one buffer and never
/// re-encoded; gzip-compressed (level 1, as kube-apiserver) when `gzip` is set and the body is
/// larger than [`GZIP_THRESHOLD`]. Returns the response and the uncompressed length.
pub fn stream_list_encoded(head: String, items: Vec<Bytes>, gzip: bool) -> (Response<Body>, usize) {
    let total = head.len()
        + items.iter().map(Bytes::len).sum::<usize>()
        + items.len().saturating_sub(1)
        + 3;
    let write: ItemWriter<Bytes> = Box::new(|item, buf| buf.extend_from_slice(item));
    // Chunks of about 64 KiB, made as they are sent.
    let parts = ListParts::new(head, items, write, Bytes::len, 64 * 1024);
    let chunks = (0..parts.len()).map(move |k| parts.part(k));
    (stream_maybe_gzip(chunks, total, gzip), total)
}

/// Writes one item of a list into the chunk being built.
pub type ItemWriter<T> = Box<dyn Fn(&T, &mut Vec<u8>) + Send + Sync>;

/// A List body cut into parts that can be made independently of each other, on any thread and
/// in any order, and are sent in order: part 0 starts with the head, each part holds a run of
/// items (every item but the list's first preceded by `,`), and the last part ends with `]}` and
/// Go's newline. For items made as they are sent (objects stored in another encoding), so that a
/// caller can make several parts at once while earlier ones are written, holding only the parts
/// in flight.
pub struct ListParts<T> {
    head: String,
    items: Vec<T>,
    /// Where each part's items start, then `items.len()`: at least two entries.
    starts: Vec<usize>,
    /// Each part's expected size, for its buffer.
    sizes: Vec<usize>,
    write: ItemWriter<T>,
}

impl<T> ListParts<T> {
    /// `items` cut into parts of about `part_size` bytes each, an item expected to write
    /// `size(item)` bytes: every part but the last holds items until it reaches `part_size` (so
    /// at least one), and an empty list is one part.
    pub fn new(
        head: String,
        items: Vec<T>,
        write: ItemWriter<T>,
        size: impl Fn(&T) -> usize,
        part_size: usize,
    ) -> Self {
        let (mut starts, mut sizes) = (vec![0], Vec::new());
        let mut filled = head.len();
        for (i, item) in items.iter().enumerate() {
            filled += size(item) + 1;
            if filled >= part_size && i + 1 < items.len() {
                starts.push(i + 1);
                sizes.push(filled);
                filled = 0;
            }
        }
        starts.push(items.len());
        sizes.push(filled + 3);
        ListParts {
            head,
            items,
            starts,
            sizes,
            write,
        }
    }

    /// How many parts the body has (at least one).
    pub fn len(&self) -> usize {
        self.starts.len() - 1
    }

    /// Always false: a list body has at least its head and end.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Part `k` (`k < len()`; an empty body beyond).
    pub fn part(&self, k: usize) -> Bytes {
        let (Some(&from), Some(&to)) = (self.starts.get(k), self.starts.get(k + 1)) else {
            return Bytes::new();
        };
        let mut buf = Vec::with_capacity(self.sizes.get(k).copied().unwrap_or_default() + 64);
        if k == 0 {
            buf.extend_from_slice(self.head.as_bytes());
        }
        for (i, item) in self
            .items
            .get(from..to)
            .unwrap_or_default()
            .iter()
            .enumerate()
        {
            if from + i > 0 {
                buf.push(b',');
            }
            (self.write)(item, &mut buf);
        }
        if k + 1 == self.len() {
            // Go's `json.Encoder` ends the body with a newline.
            buf.extend_from_slice(b"]}\n");
        }
        Bytes::from(buf)
    }
}

/// One part of a gzip body whose parts are compressed independently (on several threads at
/// once) and still form one gzip member, as `pigz` writes it: each part is raw deflate ending at
/// a byte boundary (a sync flush; the last part ends the deflate stream), and [`GzipJoin`]
/// adds the header before the first and the trailer, the parts' CRC-32s combined, after the
/// last. A client reads it as any gzip body.
pub struct GzipPart {
    deflated: Vec<u8>,
    crc: crc32fast::Hasher,
    len: u64,
}

impl GzipPart {
    /// `plain` compressed at kube-apiserver's level (1); `last` ends the deflate stream.
    pub fn new(plain: &[u8], last: bool) -> io::Result<GzipPart> {
        use flate2::{Compress, Compression, FlushCompress, Status};
        let mut c = Compress::new(Compression::new(1), false);
        let mut out = Vec::with_capacity(plain.len() / 2 + 64);
        let flush = if last {
            FlushCompress::Finish
        } else {
            FlushCompress::Sync
        };
        // Each round consumes input or fills the room it was given, which doubles: bounded.
        for _ in 0..64 {
            let consumed = usize::try_from(c.total_in()).unwrap_or(usize::MAX);
            let status = c
                .compress_vec(plain.get(consumed..).unwrap_or_default(), &mut out, flush)
                .map_err(io::Error::other)?;
            let all_in = c.total_in() == plain.len() as u64;
            // A sync flush is complete once it left room unused; the end once deflate says so.
            let done = if last {
                status == Status::StreamEnd
            } else {
                all_in && out.len() < out.capacity()
            };
            if done {
                let mut crc = crc32fast::Hasher::new();
                crc.update(plain);
                return Ok(GzipPart {
                    deflated: out,
                    crc,
                    len: plain.len() as u64,
                });
            }
            out.reserve(out.capacity().max(4096));
        }
        Err(io::Error::other("deflate made no progress"))
    }
}

/// Joins [`GzipPart`]s, in order, into one gzip member.
#[derive(Default)]
pub struct GzipJoin {
    crc: crc32fast::Hasher,
    len: u64,
    started: bool,
}

impl GzipJoin {
    /// The bytes to send for `part`: the gzip header before the first, the trailer after the
    /// `last`.
    pub fn push(&mut self, part: GzipPart, last: bool) -> Bytes {
        let mut out = Vec::with_capacity(part.deflated.len() + 18);
        if !self.started {
            self.started = true;
            // Magic, deflate, no flags, no time, the fastest level (XFL 4), an unknown OS, as
            // Go's gzip writer at `BestSpeed` writes it.
            out.extend_from_slice(&[0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 4, 0xff]);
        }
        out.extend_from_slice(&part.deflated);
        self.crc.combine(&part.crc);
        self.len += part.len;
        if last {
            let crc = std::mem::take(&mut self.crc);
            out.extend_from_slice(&crc.finalize().to_le_bytes());
            // ISIZE: the uncompressed length modulo 2^32.
            out.extend_from_slice(&(self.len as u32).to_le_bytes());
        }
        Bytes::from(out)
    }
}

/// A streamed answer with JSON headers whose body is `chunks` as they come, gzip-compressed
/// already when `gzipped` (its headers say so).
pub fn stream_made<S>(chunks: S, gzipped: bool) -> Response<Body>
where
    S: futures_util::Stream<Item = Result<Bytes, io::Error>> + Send + Sync + 'static,
{
    use futures_util::StreamExt as _;
    let mut resp = stream_response(chunks.map(|c| c.map(Frame::data)));
    if gzipped {
        gzip_headers(&mut resp);
    }
    resp
}

/// Marks a response as gzip-compressed.
fn gzip_headers(resp: &mut Response<Body>) {
    let h = resp.headers_mut();
    h.insert(
        http::header::CONTENT_ENCODING,
        HeaderValue::from_static("gzip"),
    );
    h.insert(
        http::header::VARY,
        HeaderValue::from_static("Accept-Encoding"),
    );
}

/// Streams a body of `total` bytes made of `chunks` (taken as they are sent, or gzip-compressed
/// as [`stream_list_encoded`] does), with JSON headers: a caller answering in another encoding
/// sets its `Content-Type`.
pub fn stream_chunks<I>(chunks: I, total: usize, gzip: bool) -> Response<Body>
where
    I: Iterator<Item = Bytes> + Send + Sync + 'static,
{
    stream_maybe_gzip(chunks, total, gzip)
}

/// The streaming (and, when `gzip` and larger than [`GZIP_THRESHOLD`], compressing) answer of
/// a body of `total` bytes in `chunks`.
fn stream_maybe_gzip<I>(chunks: I, total: usize, gzip: bool) -> Response<Body>
where
    I: Iterator<Item = Bytes> + Send + Sync + 'static,
{
    if !gzip || total <= GZIP_THRESHOLD {
        let stream = futures_util::stream::iter(chunks.map(|b| Ok::<_, io::Error>(Frame::data(b))));
        return stream_response(stream);
    }
    let mut chunks = chunks;
    let mut enc = Some(flate2::write::GzEncoder::new(
        Vec::with_capacity(64 * 1024),
        flate2::Compression::new(1),
    ));
    let stream = futures_util::stream::iter(std::iter::from_fn(move || {
        use std::io::Write;
        loop {
            let e = enc.as_mut()?;
            match chunks.next() {
                Some(c) => {
                    if let Err(err) = e.write_all(&c) {
                        enc = None;
                        return Some(Err(err));
                    }
                    let out = std::mem::take(e.get_mut());
                    if !out.is_empty() {
                        return Some(Ok(Frame::data(Bytes::from(out))));
                    }
                }
                None => {
                    let done = enc.take()?.finish();
                    return Some(done.map(|v| Frame::data(Bytes::from(v))));
                }
            }
        }
    }));
    let mut resp = stream_response(stream);
    gzip_headers(&mut resp);
    resp
}

/// [`stream_list_encoded`] without compression.
pub fn stream_list(head: String, items: Vec<Bytes>) -> (Response<Body>, usize) {
    stream_list_encoded(head, items, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn streams_a_list_that_parses() {
        let items: Vec<Bytes> = (0..3000)
            .map(|i| Bytes::from(format!("{{\"metadata\":{{\"name\":\"n{i}\"}}}}")))
            .collect();
        let head = list_head("PodList", "v1", &serde_json::json!({"resourceVersion":"5"}));
        let (resp, total) = stream_list(head, items);
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(body.len(), total);
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["items"].as_array().unwrap().len(), 3000);
        let (resp, _) = stream_list(
            list_head("PodList", "v1", &serde_json::json!({})),
            Vec::new(),
        );
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(
            &body[..],
            b"{\"kind\":\"PodList\",\"apiVersion\":\"v1\",\"metadata\":{},\"items\":[]}\n",
            "ends with a newline, as Go's json.Encoder writes it"
        );
    }

    #[tokio::test]
    async fn large_lists_are_gzipped_when_accepted() {
        let items: Vec<Bytes> = (0..5000)
            .map(|i| Bytes::from(format!("{{\"metadata\":{{\"name\":\"pod-{i}\"}}}}")))
            .collect();
        let head = list_head("PodList", "v1", &serde_json::json!({"resourceVersion":"5"}));
        let (resp, total) = stream_list_encoded(head.clone(), items.clone(), true);
        assert!(total > GZIP_THRESHOLD);
        assert_eq!(resp.headers()[http::header::CONTENT_ENCODING], "gzip");
        let gz = resp.into_body().collect().await.unwrap().to_bytes();
        assert!(gz.len() < total / 4);
        let mut plain = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&gz[..]), &mut plain).unwrap();
        let (resp, _) = stream_list_encoded(head, items, false);
        assert!(resp.headers().get(http::header::CONTENT_ENCODING).is_none());
        assert_eq!(
            plain,
            resp.into_body()
                .collect()
                .await
                .unwrap()
                .to_bytes()
                .to_vec()
        );
        let (small, _) = stream_list_encoded(
            list_head("PodList", "v1", &serde_json::json!({})),
            Vec::new(),
            true,
        );
        assert!(
            small
                .headers()
                .get(http::header::CONTENT_ENCODING)
                .is_none(),
            "small bodies are not compressed"
        );
    }

    #[tokio::test]
    async fn list_parts_make_the_streamed_body_and_gzip_parts_one_member() {
        for n in [0usize, 1, 2, 7, 300] {
            let items: Vec<Bytes> = (0..n)
                .map(|i| Bytes::from(format!("{{\"metadata\":{{\"name\":\"pod-{i}\"}}}}")))
                .collect();
            let head = list_head("PodList", "v1", &serde_json::json!({"resourceVersion":"5"}));
            let (resp, _) = stream_list(head.clone(), items.clone());
            let want = resp.into_body().collect().await.unwrap().to_bytes();
            for part_size in [1, 100, 4096, usize::MAX] {
                let write: ItemWriter<Bytes> = Box::new(|item, buf| buf.extend_from_slice(item));
                let parts =
                    ListParts::new(head.clone(), items.clone(), write, Bytes::len, part_size);
                let expected_parts = if part_size == 1 { n.max(1) } else { 1 };
                if part_size == 1 || part_size == usize::MAX {
                    assert_eq!(
                        parts.len(),
                        expected_parts,
                        "{n} items in parts of {part_size}"
                    );
                }
                let made: Vec<Bytes> = (0..parts.len()).map(|k| parts.part(k)).collect();
                assert_eq!(
                    made.concat(),
                    want.to_vec(),
                    "{n} items, parts of {part_size}"
                );
                let mut join = GzipJoin::default();
                let gz: Vec<u8> = made
                    .iter()
                    .enumerate()
                    .flat_map(|(k, p)| {
                        let last = k + 1 == made.len();
                        join.push(GzipPart::new(p, last).unwrap(), last).to_vec()
                    })
                    .collect();
                let mut plain = Vec::new();
                std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&gz[..]), &mut plain)
                    .expect("one member, CRC and length checked");
                assert_eq!(
                    plain,
                    want.to_vec(),
                    "{n} items gzipped in parts of {part_size}"
                );
            }
        }
    }

    #[test]
    fn accept_encoding_parsing() {
        let h = |v: &str| {
            let mut m = http::HeaderMap::new();
            m.insert(
                http::header::ACCEPT_ENCODING,
                HeaderValue::from_str(v).unwrap(),
            );
            accepts_gzip(&m)
        };
        assert!(h("gzip"));
        assert!(h("deflate, gzip;q=0.5"));
        assert!(!h("gzip;q=0"));
        assert!(!h("identity"));
        assert!(!accepts_gzip(&http::HeaderMap::new()));
    }

    #[test]
    fn status_carries_retry_after() {
        let r = status_response(&Status::too_many_requests("storage is (re)initializing", 1));
        assert_eq!(r.status(), 429);
        assert_eq!(r.headers()[RETRY_AFTER], "1");
    }

    #[test]
    fn audit_id_echoes_the_request_or_is_a_v4_uuid() {
        let id = audit_id(None, u128::MAX);
        let s = id.to_str().unwrap();
        assert_eq!(s.len(), 36);
        assert_eq!(&s[14..15], "4", "version 4: {s}");
        assert!(matches!(&s[19..20], "8" | "9" | "a" | "b"), "variant: {s}");
        assert_ne!(audit_id(None, 1), audit_id(None, 2));
        assert_eq!(audit_id(Some(&HeaderValue::from_static("abc")), 1), "abc");
    }

    #[test]
    fn pretty_for_the_parameter_or_curl() {
        let mut h = http::HeaderMap::new();
        assert!(!wants_pretty(None, &h));
        assert!(wants_pretty(Some("pretty=true"), &h));
        assert!(wants_pretty(Some("limit=1&pretty=1"), &h));
        h.insert(
            http::header::USER_AGENT,
            HeaderValue::from_static("curl/8.5.0"),
        );
        assert!(wants_pretty(None, &h));
        assert!(!wants_pretty(Some("pretty=false"), &h));
        h.insert(
            http::header::USER_AGENT,
            HeaderValue::from_static("kubectl/v1.36.0"),
        );
        assert!(!wants_pretty(None, &h));
    }

    #[tokio::test]
    async fn pretty_printing_indents_a_json_answer_without_its_newline() {
        let r = pretty_printed(json_response(StatusCode::OK, &b"{\"a\":[1]}"[..])).await;
        let b = r.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(&b[..], b"{\n  \"a\": [\n    1\n  ]\n}");
    }
}
