//! Byte parsers for what the server under test sends back to the HTTP fuzzer: HTTP/1 response
//! heads (httparse, the parser hyper itself uses) and body framing (RFC 9112 §6, strict:
//! one length, no length together with chunking, chunk lines ending in CRLF), websocket frames
//! from server to client (RFC 6455 §5.2) and HTTP/2 frame headers (RFC 9113 §4.1).
//!
//! Pure functions on byte slices: no I/O (that is [`super::wire`]), and no verdict beyond
//! "well-formed or not" (whether an answer is the right one is [`super::check`]'s business).
//! Every length comes from the server under test, so every one is bounded and checked.

/// The most headers a response head may carry before it counts as malformed.
const MAX_HEADERS: usize = 256;
/// A head longer than this is malformed (kube's and watchmux's are a few hundred bytes).
pub const MAX_HEAD: usize = 256 << 10;
/// A chunk-size line (size and extensions) longer than this is malformed.
const MAX_CHUNK_LINE: usize = 4096;
/// Websocket frames announcing more than this are taken for a broken stream.
pub const MAX_WS_FRAME: u64 = 64 << 20;
/// The largest HTTP/2 frame a server may send a client that never raised
/// `SETTINGS_MAX_FRAME_SIZE` (RFC 9113 §4.2).
pub const H2_MAX_FRAME: u32 = 16_384;

/// A parsed response head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    /// Status code.
    pub status: u16,
    /// Minor HTTP version (0 or 1).
    pub version: u8,
    /// Headers, names lower-cased, in order.
    pub headers: Vec<(String, Vec<u8>)>,
    /// Bytes of the head, blank line included.
    pub len: usize,
}

impl Head {
    /// Every value of header `name` (lower case).
    pub fn all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a [u8]> + 'a {
        self.headers
            .iter()
            .filter(move |(n, _)| n == name)
            .map(|(_, v)| v.as_slice())
    }

    /// The first value of header `name` (lower case), as text (lossy).
    pub fn get(&self, name: &str) -> Option<String> {
        self.all(name)
            .next()
            .map(|v| String::from_utf8_lossy(v).into_owned())
    }
}

/// What [`parse_head`] made of the bytes so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeadParse {
    /// More bytes are needed.
    Partial,
    /// A complete head.
    Done(Head),
    /// Not an HTTP/1 response head.
    Bad(String),
}

/// Parses a response head at the start of `buf`.
pub fn parse_head(buf: &[u8]) -> HeadParse {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut r = httparse::Response::new(&mut headers);
    match r.parse(buf) {
        Ok(httparse::Status::Partial) if buf.len() > MAX_HEAD => {
            HeadParse::Bad(format!("response head longer than {MAX_HEAD} bytes"))
        }
        Ok(httparse::Status::Partial) => HeadParse::Partial,
        Ok(httparse::Status::Complete(len)) => {
            let (Some(status), Some(version)) = (r.code, r.version) else {
                return HeadParse::Bad("status line without code or version".into());
            };
            HeadParse::Done(Head {
                status,
                version,
                headers: r
                    .headers
                    .iter()
                    .map(|h| (h.name.to_ascii_lowercase(), h.value.to_vec()))
                    .collect(),
                len,
            })
        }
        Err(e) => HeadParse::Bad(format!("response head: {e}")),
    }
}

/// How a response's body is delimited (RFC 9112 §6.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// No body (HEAD, 1xx, 204, 304).
    None,
    /// Exactly this many bytes.
    Length(u64),
    /// Chunked transfer coding.
    Chunked,
    /// Until the server closes the connection.
    Close,
}

/// The framing of a response to a request with method `HEAD` or not, or why it is malformed.
pub fn framing(head: &Head, head_request: bool) -> Result<Framing, String> {
    let te: Vec<String> = head
        .all("transfer-encoding")
        .map(|v| String::from_utf8_lossy(v).to_ascii_lowercase())
        .collect();
    let cl: Vec<&[u8]> = head.all("content-length").collect();
    if !te.is_empty() && !cl.is_empty() {
        return Err("both Transfer-Encoding and Content-Length".into());
    }
    let length = match cl.as_slice() {
        [] => None,
        [first, rest @ ..] => {
            if rest.iter().any(|v| v != first) {
                return Err("several different Content-Length values".into());
            }
            let text = std::str::from_utf8(first).map_err(|_| "Content-Length not text")?;
            if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
                return Err(format!("Content-Length {text:?} is not a number"));
            }
            Some(
                text.parse::<u64>()
                    .map_err(|_| format!("Content-Length {text:?} out of range"))?,
            )
        }
    };
    if head_request || head.status < 200 || head.status == 204 || head.status == 304 {
        if (head.status < 200 || head.status == 204) && (length.is_some_and(|l| l > 0)) {
            return Err(format!("{} with a Content-Length", head.status));
        }
        return Ok(Framing::None);
    }
    if !te.is_empty() {
        let codings: Vec<String> = te
            .iter()
            .flat_map(|v| v.split(','))
            .map(|c| c.trim().to_string())
            .filter(|c| !c.is_empty())
            .collect();
        return match codings.last().map(String::as_str) {
            Some("chunked") if codings.iter().filter(|c| *c == "chunked").count() == 1 => {
                Ok(Framing::Chunked)
            }
            Some("chunked") => Err("chunked applied more than once".into()),
            _ => Ok(Framing::Close),
        };
    }
    Ok(length.map_or(Framing::Close, Framing::Length))
}

/// Decodes a chunked body incrementally.
#[derive(Debug, Default, Clone)]
pub struct Chunked {
    state: ChunkState,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum ChunkState {
    /// Expecting a chunk-size line.
    #[default]
    Size,
    /// Inside a chunk's data: this many bytes left.
    Data(u64),
    /// Expecting the CRLF after a chunk's data.
    DataEnd,
    /// After the last chunk: trailer lines until an empty one.
    Trailer,
    /// The body ended.
    Done,
}

impl Chunked {
    /// Whether the body's last chunk and trailers have been read.
    pub fn done(&self) -> bool {
        self.state == ChunkState::Done
    }

    /// Decodes from the start of `input`, appending data to `out`; returns how many bytes of
    /// `input` were used (the rest belongs to a later call, or after [`Chunked::done`] to the
    /// next response), or why the coding is malformed.
    pub fn feed(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<usize, String> {
        let mut used = 0usize;
        loop {
            let rest = input.get(used..).unwrap_or_default();
            match self.state {
                ChunkState::Done => return Ok(used),
                ChunkState::Size => {
                    let Some(eol) = find_crlf(rest, MAX_CHUNK_LINE)? else {
                        return Ok(used);
                    };
                    let line = rest.get(..eol).unwrap_or_default();
                    let size_part = line.split(|b| *b == b';').next().unwrap_or_default();
                    let size_text = std::str::from_utf8(size_part)
                        .map_err(|_| "chunk size is not text")?
                        .trim_end_matches([' ', '\t']);
                    if size_text.is_empty()
                        || size_text.len() > 16
                        || !size_text.bytes().all(|b| b.is_ascii_hexdigit())
                    {
                        return Err(format!("bad chunk size line {:?}", lossy(line, 64)));
                    }
                    let size = u64::from_str_radix(size_text, 16)
                        .map_err(|e| format!("chunk size {size_text:?}: {e}"))?;
                    used = used.saturating_add(eol).saturating_add(2);
                    self.state = if size == 0 {
                        ChunkState::Trailer
                    } else {
                        ChunkState::Data(size)
                    };
                }
                ChunkState::Data(left) => {
                    if rest.is_empty() {
                        return Ok(used);
                    }
                    let take = usize::try_from(left).unwrap_or(usize::MAX).min(rest.len());
                    out.extend_from_slice(rest.get(..take).unwrap_or_default());
                    used = used.saturating_add(take);
                    let left = left.saturating_sub(take as u64);
                    self.state = if left == 0 {
                        ChunkState::DataEnd
                    } else {
                        ChunkState::Data(left)
                    };
                }
                ChunkState::DataEnd => match rest {
                    [b'\r', b'\n', ..] => {
                        used = used.saturating_add(2);
                        self.state = ChunkState::Size;
                    }
                    [] | [b'\r'] => return Ok(used),
                    _ => return Err("chunk data not followed by CRLF".into()),
                },
                ChunkState::Trailer => {
                    let Some(eol) = find_crlf(rest, MAX_CHUNK_LINE)? else {
                        return Ok(used);
                    };
                    used = used.saturating_add(eol).saturating_add(2);
                    if eol == 0 {
                        self.state = ChunkState::Done;
                    }
                }
            }
        }
    }
}

/// The position of the first CRLF in `b`; `None` when more bytes are needed; an error for a
/// bare LF or a line longer than `max`.
fn find_crlf(b: &[u8], max: usize) -> Result<Option<usize>, String> {
    match memchr::memchr(b'\n', b) {
        Some(0) => Err("bare LF in chunked framing".into()),
        Some(i) if b.get(i - 1) == Some(&b'\r') => Ok(Some(i - 1)),
        Some(_) => Err("bare LF in chunked framing".into()),
        None if b.len() > max => Err(format!("chunk line longer than {max} bytes")),
        None => Ok(None),
    }
}

/// `b`'s first `max` bytes as printable text (for messages).
pub fn lossy(b: &[u8], max: usize) -> String {
    escape(b.get(..max.min(b.len())).unwrap_or_default())
}

/// Bytes as printable ASCII: `\r`, `\n`, `\t`, `\\` and `\xNN` for the rest.
pub fn escape(b: &[u8]) -> String {
    let mut s = String::with_capacity(b.len());
    for &c in b {
        match c {
            b'\r' => s.push_str("\\r"),
            b'\n' => s.push_str("\\n"),
            b'\t' => s.push_str("\\t"),
            b'\\' => s.push_str("\\\\"),
            0x20..=0x7e => s.push(char::from(c)),
            _ => s.push_str(&format!("\\x{c:02x}")),
        }
    }
    s
}

/// A websocket frame as the server sent it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WsFrame {
    /// FIN bit.
    pub fin: bool,
    /// RSV1–3 bits (must be zero: no extension is negotiated).
    pub rsv: u8,
    /// Opcode.
    pub opcode: u8,
    /// MASK bit (a server must not mask).
    pub masked: bool,
    /// Payload (unmasked).
    pub payload: Vec<u8>,
}

/// Parses one websocket frame at the start of `buf`: `Ok(None)` when more bytes are needed,
/// else the frame and its length on the wire.
pub fn ws_frame(buf: &[u8]) -> Result<Option<(WsFrame, usize)>, String> {
    let (Some(&b0), Some(&b1)) = (buf.first(), buf.get(1)) else {
        return Ok(None);
    };
    let masked = b1 & 0x80 != 0;
    let (len, mut at) = match b1 & 0x7f {
        126 => match buf.get(2..4) {
            Some(l) => (u64::from(u16::from_be_bytes([l[0], l[1]])), 4usize),
            None => return Ok(None),
        },
        127 => match buf.get(2..10).and_then(|l| <[u8; 8]>::try_from(l).ok()) {
            Some(l) => (u64::from_be_bytes(l), 10),
            None => return Ok(None),
        },
        n => (u64::from(n), 2),
    };
    if len > MAX_WS_FRAME {
        return Err(format!("websocket frame of {len} bytes"));
    }
    let mut key = None;
    if masked {
        match buf.get(at..at + 4) {
            Some(k) => key = Some([k[0], k[1], k[2], k[3]]),
            None => return Ok(None),
        }
        at += 4;
    }
    let len = usize::try_from(len).map_err(|_| "websocket frame length")?;
    let Some(p) = buf.get(at..at.saturating_add(len)) else {
        return Ok(None);
    };
    let mut payload = p.to_vec();
    if let Some(k) = key {
        for (i, b) in payload.iter_mut().enumerate() {
            *b ^= k[i % 4];
        }
    }
    Ok(Some((
        WsFrame {
            fin: b0 & 0x80 != 0,
            rsv: (b0 >> 4) & 0x7,
            opcode: b0 & 0x0f,
            masked,
            payload,
        },
        at + len,
    )))
}

/// An HTTP/2 frame header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct H2Frame {
    /// Payload length.
    pub len: u32,
    /// Frame type.
    pub kind: u8,
    /// Flags.
    pub flags: u8,
    /// Stream identifier (reserved bit removed).
    pub stream: u32,
}

/// The complete frames at the start of `buf` (a partial last frame is left out), or why they
/// are not HTTP/2 frames a server may send.
pub fn h2_frames(buf: &[u8]) -> Result<Vec<H2Frame>, String> {
    let mut out = Vec::new();
    let mut at = 0usize;
    while let Some(h) = buf.get(at..at + 9) {
        let len = u32::from_be_bytes([0, h[0], h[1], h[2]]);
        let f = H2Frame {
            len,
            kind: h[3],
            flags: h[4],
            stream: u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & 0x7fff_ffff,
        };
        if len > H2_MAX_FRAME {
            return Err(format!("HTTP/2 frame of {len} bytes (max {H2_MAX_FRAME})"));
        }
        // PUSH_PROMISE (5) must not be sent to a client that disabled push; hyper's client does.
        if f.kind > 9 {
            return Err(format!("HTTP/2 frame of unknown type {}", f.kind));
        }
        let end = at + 9 + len as usize;
        if buf.len() < end {
            break;
        }
        out.push(f);
        at = end;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(s: &str) -> Head {
        match parse_head(s.as_bytes()) {
            HeadParse::Done(h) => h,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn heads_and_framing() {
        let h = head("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello");
        assert_eq!((h.status, h.version, h.len), (200, 1, 38));
        assert_eq!(framing(&h, false), Ok(Framing::Length(5)));
        assert_eq!(framing(&h, true), Ok(Framing::None));
        let h = head("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
        assert_eq!(framing(&h, false), Ok(Framing::Chunked));
        let h = head("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n");
        assert!(framing(&h, false).is_err());
        let h = head("HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n");
        assert!(framing(&h, false).is_err());
        let h = head("HTTP/1.1 200 OK\r\nContent-Length: -3\r\n\r\n");
        assert!(framing(&h, false).is_err());
        let h = head("HTTP/1.1 204 No Content\r\n\r\n");
        assert_eq!(framing(&h, false), Ok(Framing::None));
        let h = head("HTTP/1.0 200 OK\r\n\r\n");
        assert_eq!(framing(&h, false), Ok(Framing::Close));
        assert_eq!(parse_head(b"HTTP/1.1 200 OK\r\nA: b"), HeadParse::Partial);
        assert!(matches!(
            parse_head(b"HTP/1.1 200\r\n\r\n"),
            HeadParse::Bad(_)
        ));
        assert!(matches!(parse_head(b"\x00\x00\x00\x04"), HeadParse::Bad(_)));
    }

    #[test]
    fn chunked_is_decoded_in_any_pieces_and_strictly() {
        let body = b"5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nTrailer: x\r\n\r\nNEXT";
        for split in 0..body.len() {
            let mut c = Chunked::default();
            let mut out = Vec::new();
            let mut buf = body[..split].to_vec();
            let n = c.feed(&buf, &mut out).unwrap();
            buf.drain(..n);
            buf.extend_from_slice(&body[split..]);
            let n = c.feed(&buf, &mut out).unwrap();
            assert!(c.done(), "split {split}");
            assert_eq!(out, b"hello world");
            assert_eq!(&buf[n..], b"NEXT");
        }
        for bad in [
            &b"x\r\n"[..],
            b"5\nhello\r\n",
            b"5\r\nhelloXX",
            b"11111111111111111\r\n",
        ] {
            let mut c = Chunked::default();
            assert!(c.feed(bad, &mut Vec::new()).is_err(), "{}", escape(bad));
        }
    }

    #[test]
    fn websocket_frames() {
        assert_eq!(ws_frame(&[0x81]).unwrap(), None);
        let (f, n) = ws_frame(&[0x81, 2, b'h', b'i', 0]).unwrap().unwrap();
        assert_eq!((f.fin, f.opcode, f.masked, n), (true, 1, false, 4));
        assert_eq!(f.payload, b"hi");
        let (f, _) = ws_frame(&[0x82, 0x82, 1, 2, 3, 4, b'h' ^ 1, b'i' ^ 2])
            .unwrap()
            .unwrap();
        assert!(f.masked);
        assert_eq!(f.payload, b"hi");
        let mut long = vec![0x82, 127];
        long.extend_from_slice(&u64::MAX.to_be_bytes());
        assert!(ws_frame(&long).is_err());
        let mut mid = vec![0x82, 126, 1, 0];
        assert_eq!(ws_frame(&mid).unwrap(), None);
        mid.extend(std::iter::repeat_n(7u8, 256));
        assert_eq!(ws_frame(&mid).unwrap().unwrap().1, 260);
    }

    #[test]
    fn h2_frame_headers() {
        let settings = [0, 0, 6, 4, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 100];
        let mut b = settings.to_vec();
        b.extend_from_slice(&[0, 0, 8, 7]);
        let f = h2_frames(&b).unwrap();
        assert_eq!(f.len(), 1);
        assert_eq!((f[0].kind, f[0].len), (4, 6));
        assert!(h2_frames(&[0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0]).is_err());
        assert!(h2_frames(&[0, 0, 0, 42, 0, 0, 0, 0, 0]).is_err());
    }
}
