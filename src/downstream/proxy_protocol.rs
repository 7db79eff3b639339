//! The PROXY protocol (HAProxy's, version 1 text and version 2 binary): the header a load
//! balancer in TCP mode sends first on each connection, before TLS, to name the client it
//! forwards (`server.proxy_protocol_trusted`).
//!
//! Owns which sources may send a header ([`TrustedSources`]), where a header ends and what it
//! says ([`parse`], a pure function over the bytes received so far: the fuzz target
//! `proxy_header` calls it too), and reading one from a connection ([`read_header`]) without
//! taking a byte past it: what follows is the client's TLS handshake or HTTP request, which the
//! accept path hands on untouched. The header's fields are decoded by the `ppp` crate; this
//! module frames it (a version 1 header is the first line, at most 107 bytes; a version 2 header
//! is as long as its fixed part says) and keeps what watchmux uses: the client's address. It must
//! not decide what a refusal does to the connection nor log it (the accept path does).

use std::io;
use std::net::{IpAddr, SocketAddr};

use ipnet::IpNet;
use ppp::PartialResult;
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

/// The first bytes of a version 1 header.
const V1_PREFIX: &[u8] = b"PROXY ";

/// A version 1 header's longest line, its CRLF included (the specification's bound).
pub const V1_MAX_LEN: usize = 107;

/// The 12-byte signature a version 2 header starts with.
pub const V2_SIGNATURE: &[u8] = ppp::v2::PROTOCOL_PREFIX;

/// How many bytes of a signature must have arrived before [`begins_like_header`] calls them
/// one: `PROXY` (no HTTP method is spelled so), or a version 2 signature's `\r\n\r\n\0` (an
/// HTTP request may start with empty lines, but never a NUL).
const SIGNATURE_EVIDENCE: usize = 5;

/// The bytes read per step while a header is incomplete: a version 1 header, or a version 2
/// header with the TLVs balancers usually add, arrives in one step.
const READ_STEP: usize = 256;

/// The header's version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    /// Text: `PROXY TCP4 <src> <dst> <sport> <dport>\r\n`.
    V1,
    /// Binary, with the 12-byte signature.
    V2,
}

/// The client's address and the address it connected to (the balancer's listener).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Addresses {
    /// The client's address: what the connection counts as.
    pub source: SocketAddr,
    /// Where the client connected to.
    pub destination: SocketAddr,
}

impl Addresses {
    /// From `ppp`'s IPv4 pair (version 1's `TCP4`, version 2's IPv4 family).
    fn from_ipv4(a: ppp::v2::IPv4) -> Addresses {
        Addresses {
            source: SocketAddr::from((a.source_address, a.source_port)),
            destination: SocketAddr::from((a.destination_address, a.destination_port)),
        }
    }

    /// From `ppp`'s IPv6 pair (version 1's `TCP6`, version 2's IPv6 family).
    fn from_ipv6(a: ppp::v2::IPv6) -> Addresses {
        Addresses {
            source: SocketAddr::from((a.source_address, a.source_port)),
            destination: SocketAddr::from((a.destination_address, a.destination_port)),
        }
    }
}

/// What a header says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Version 1 or 2.
    pub version: Version,
    /// The proxied connection's addresses; `None` where the connection's own peer address
    /// stands: a version 2 LOCAL header (the balancer's own connection, e.g. a health check), a
    /// version 1 `UNKNOWN` one, and a version 2 PROXY header of an address family other than
    /// IPv4 and IPv6 (unspecified, or a UNIX socket, which has no IP address to count by).
    /// A version 2 header's TLVs are skipped.
    pub addresses: Option<Addresses>,
}

/// What [`parse`] made of the bytes received so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parsed {
    /// A header, and its length: the bytes after it are not the header's.
    Header(Header, usize),
    /// The bytes so far are the beginning of a header: more must arrive.
    NeedMore,
}

/// Why bytes are not a header.
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum HeaderError {
    /// They do not start with a version 1 or 2 signature.
    #[error("no PROXY protocol header: the connection does not start with one")]
    Missing,
    /// A version 1 header without its line end within the first 107 bytes.
    #[error("a version 1 header longer than {V1_MAX_LEN} bytes")]
    V1TooLong,
    /// A version 1 line that is not a header (its text is in this error's; not a `source()`).
    #[error("a malformed version 1 header: {0}")]
    V1(ppp::v1::BinaryParseError),
    /// A version 2 header that is not valid (its text is in this error's; not a `source()`).
    #[error("a malformed version 2 header: {0}")]
    V2(ppp::v2::ParseError),
}

/// Reads `buf`, the first bytes of a connection, as a PROXY header: the header and its length,
/// [`Parsed::NeedMore`] while `buf` is a header's beginning (an empty `buf` included), or why it
/// is not one. Whatever follows a header in `buf` does not change the answer.
pub fn parse(buf: &[u8]) -> Result<Parsed, HeaderError> {
    if starts_with_or_within(buf, V2_SIGNATURE) {
        parse_v2(buf)
    } else if starts_with_or_within(buf, V1_PREFIX) {
        parse_v1(buf)
    } else {
        Err(HeaderError::Missing)
    }
}

/// Whether `buf` starts with `signature`, or is the beginning of it.
fn starts_with_or_within(buf: &[u8], signature: &[u8]) -> bool {
    let n = buf.len().min(signature.len());
    buf[..n] == signature[..n]
}

fn parse_v1(buf: &[u8]) -> Result<Parsed, HeaderError> {
    // The header is the first line: framed here, so that `ppp` only ever sees a whole line
    // (asked about a line still arriving, it may call it malformed where more bytes would have
    // completed it).
    let window = &buf[..buf.len().min(V1_MAX_LEN)];
    let Some(end) = memchr::memchr(b'\n', window) else {
        return if buf.len() >= V1_MAX_LEN {
            Err(HeaderError::V1TooLong)
        } else {
            Ok(Parsed::NeedMore)
        };
    };
    let line = &buf[..=end];
    // `ppp` also takes a line that ends in a bare LF after a space; the specification (and
    // every balancer) ends it with CRLF.
    if !line.ends_with(b"\r\n") {
        return Err(HeaderError::V1(ppp::v1::ParseError::InvalidSuffix.into()));
    }
    let header = ppp::v1::Header::try_from(line).map_err(HeaderError::V1)?;
    // `ppp` reads up to the first CR and its LF: a CR before this line's end makes it a header
    // shorter than the line, and the rest of the line would be taken for the client's bytes.
    if header.header.len() != line.len() {
        return Err(HeaderError::V1(ppp::v1::ParseError::InvalidSuffix.into()));
    }
    let addresses = match header.addresses {
        ppp::v1::Addresses::Tcp4(a) => Some(Addresses::from_ipv4(a)),
        ppp::v1::Addresses::Tcp6(a) => Some(Addresses::from_ipv6(a)),
        ppp::v1::Addresses::Unknown => None,
    };
    Ok(Parsed::Header(
        Header {
            version: Version::V1,
            addresses,
        },
        line.len(),
    ))
}

fn parse_v2(buf: &[u8]) -> Result<Parsed, HeaderError> {
    let header = match ppp::v2::Header::try_from(buf) {
        Ok(h) => h,
        // The signature or the fixed part is still arriving, or the addresses and TLVs its
        // length announces.
        Err(e) if e.is_incomplete() => return Ok(Parsed::NeedMore),
        Err(e) => return Err(HeaderError::V2(e)),
    };
    let addresses = match (header.command, header.addresses) {
        (ppp::v2::Command::Local, _) => None,
        (ppp::v2::Command::Proxy, ppp::v2::Addresses::IPv4(a)) => Some(Addresses::from_ipv4(a)),
        (ppp::v2::Command::Proxy, ppp::v2::Addresses::IPv6(a)) => Some(Addresses::from_ipv6(a)),
        (
            ppp::v2::Command::Proxy,
            ppp::v2::Addresses::Unspecified | ppp::v2::Addresses::Unix(_),
        ) => None,
    };
    Ok(Parsed::Header(
        Header {
            version: Version::V2,
            addresses,
        },
        header.len(),
    ))
}

/// Whether a connection's first bytes are a PROXY header's, as far as they go: at least
/// `SIGNATURE_EVIDENCE` (5) bytes of a version 1 or 2 signature. For connections from sources
/// not trusted to send one; fewer bytes than that are given the benefit of the doubt (they go on
/// to TLS or HTTP, which refuses a header's bytes anyway).
pub fn begins_like_header(first: &[u8]) -> bool {
    first.len() >= SIGNATURE_EVIDENCE
        && (starts_with_or_within(first, V1_PREFIX) || starts_with_or_within(first, V2_SIGNATURE))
}

/// Why no header could be read from a connection.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The bytes are not a header.
    #[error(transparent)]
    Header(#[from] HeaderError),
    /// The connection ended before the header was whole.
    #[error("the connection ended in the PROXY protocol header, after {read} bytes")]
    Closed {
        /// The header's bytes received.
        read: usize,
    },
    /// Reading failed (its text is in this error's; not a `source()`).
    #[error("reading the PROXY protocol header: {0}")]
    Io(io::Error),
}

/// Reads a PROXY header from the start of `stream`, and not a byte past it: the bytes after
/// it stay in the socket for TLS or HTTP. Waits for as long as the header is incomplete (the
/// caller bounds it in time).
///
/// The bytes are peeked, and only those known to be the header's are taken: all of them while
/// the header is incomplete (the next peek then waits for new bytes, never spinning on the
/// same ones), up to its end once it is whole.
pub async fn read_header(stream: &mut TcpStream) -> Result<Header, ReadError> {
    let mut buf = Vec::new();
    loop {
        let have = buf.len();
        buf.resize(have + READ_STEP, 0);
        let n = stream.peek(&mut buf[have..]).await.map_err(ReadError::Io)?;
        buf.truncate(have + n);
        if n == 0 {
            return Err(ReadError::Closed { read: have });
        }
        let (parsed, take) = match parse(&buf)? {
            Parsed::Header(h, len) => (Some(h), len - have),
            Parsed::NeedMore => (None, n),
        };
        // The same bytes again, now taken from the socket: they are there, peeked.
        stream
            .read_exact(&mut buf[have..have + take])
            .await
            .map_err(ReadError::Io)?;
        if let Some(h) = parsed {
            return Ok(h);
        }
    }
}

/// The sources allowed to send a PROXY header (`server.proxy_protocol_trusted`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustedSources(Vec<IpNet>);

impl TrustedSources {
    /// These networks.
    pub fn new(networks: Vec<IpNet>) -> TrustedSources {
        TrustedSources(networks)
    }

    /// No source is trusted: the PROXY protocol is off.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether `peer` is in a trusted network. An IPv4 peer on a dual-stack listener (an
    /// IPv4-mapped IPv6 address) is matched as the IPv4 address it is.
    pub fn contains(&self, peer: IpAddr) -> bool {
        let peer = peer.to_canonical();
        self.0.iter().any(|net| net.contains(&peer))
    }
}

/// Why a connection was closed for the PROXY protocol, the `reason` of
/// `watchmux_proxy_protocol_rejected_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rejection {
    /// A source not trusted to send a header started with one.
    Untrusted,
    /// A trusted source sent no header.
    Missing,
    /// A trusted source's header is malformed.
    Malformed,
    /// A trusted source's connection ended, failed or ran out of time before its header was
    /// whole.
    Incomplete,
}

impl Rejection {
    /// Every value (so the metric's series exist from the start), in declaration order: a
    /// value `as usize` is its index.
    pub const ALL: [Rejection; 4] = [
        Rejection::Untrusted,
        Rejection::Missing,
        Rejection::Malformed,
        Rejection::Incomplete,
    ];

    /// The metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            Rejection::Untrusted => "untrusted",
            Rejection::Missing => "missing",
            Rejection::Malformed => "malformed",
            Rejection::Incomplete => "incomplete",
        }
    }
}

impl ReadError {
    /// The refusal this error makes.
    pub fn rejection(&self) -> Rejection {
        match self {
            ReadError::Header(HeaderError::Missing) => Rejection::Missing,
            ReadError::Header(_) => Rejection::Malformed,
            ReadError::Closed { .. } | ReadError::Io(_) => Rejection::Incomplete,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    /// A version 2 header (PROXY, TCP over IPv4) from 10.1.2.3:4567 to 10.0.0.1:443, with a
    /// NOOP TLV of 3 bytes.
    fn v2_tcp4() -> Vec<u8> {
        let mut h = V2_SIGNATURE.to_vec();
        h.extend([0x21, 0x11, 0, 18]);
        h.extend([10, 1, 2, 3, 10, 0, 0, 1]);
        h.extend(4567u16.to_be_bytes());
        h.extend(443u16.to_be_bytes());
        h.extend([0x04, 0, 3, 7, 7, 7]);
        h
    }

    fn addresses(src: &str, dst: &str) -> Option<Addresses> {
        Some(Addresses {
            source: src.parse().unwrap(),
            destination: dst.parse().unwrap(),
        })
    }

    #[test]
    fn version_1_headers_are_read_to_their_line_end() {
        let text = b"PROXY TCP4 192.0.2.7 10.0.0.1 51000 443\r\n\x16\x03\x01";
        assert_eq!(
            parse(text),
            Ok(Parsed::Header(
                Header {
                    version: Version::V1,
                    addresses: addresses("192.0.2.7:51000", "10.0.0.1:443"),
                },
                text.len() - 3
            ))
        );
        let text = b"PROXY TCP6 2001:db8::7 2001:db8::1 51000 443\r\nGET";
        let Ok(Parsed::Header(h, 46)) = parse(text) else {
            panic!("{:?}", parse(text))
        };
        assert_eq!(
            h.addresses,
            addresses("[2001:db8::7]:51000", "[2001:db8::1]:443")
        );
        assert_eq!(
            parse(b"PROXY UNKNOWN\r\n"),
            Ok(Parsed::Header(
                Header {
                    version: Version::V1,
                    addresses: None
                },
                15
            ))
        );
    }

    #[test]
    fn version_2_headers_are_read_to_their_length() {
        let mut bytes = v2_tcp4();
        let len = bytes.len();
        bytes.extend(b"\x16\x03\x01");
        assert_eq!(
            parse(&bytes),
            Ok(Parsed::Header(
                Header {
                    version: Version::V2,
                    addresses: addresses("10.1.2.3:4567", "10.0.0.1:443"),
                },
                len
            ))
        );
        // LOCAL: the balancer's own connection, whatever its addresses say.
        let mut local = V2_SIGNATURE.to_vec();
        local.extend([0x20, 0x00, 0, 0]);
        assert_eq!(
            parse(&local),
            Ok(Parsed::Header(
                Header {
                    version: Version::V2,
                    addresses: None
                },
                16
            ))
        );
        let mut local = v2_tcp4();
        local[12] = 0x20;
        assert!(matches!(
            parse(&local),
            Ok(Parsed::Header(
                Header {
                    addresses: None,
                    ..
                },
                _
            ))
        ));
    }

    #[test]
    fn every_beginning_of_a_header_needs_more() {
        let v1 = b"PROXY TCP4 192.0.2.7 10.0.0.1 51000 443\r\n".to_vec();
        for whole in [v1, v2_tcp4()] {
            for n in 0..whole.len() {
                assert_eq!(parse(&whole[..n]), Ok(Parsed::NeedMore), "{n} bytes");
            }
        }
    }

    #[test]
    fn what_is_not_a_header_is_refused() {
        for bytes in [
            &b"GET / HTTP/1.1\r\n"[..],
            b"\x16\x03\x01\x02\x00",
            b"PROXZ",
            b"PRI * HTTP/2.0\r\n",
            b"\r\n\r\nGET",
        ] {
            assert_eq!(parse(bytes), Err(HeaderError::Missing), "{bytes:?}");
        }
        assert_eq!(parse(b"P"), Ok(Parsed::NeedMore), "P may begin PROXY");
        let long = [b"PROXY UNKNOWN ".as_slice(), &[b'x'; 100]].concat();
        assert_eq!(parse(&long), Err(HeaderError::V1TooLong));
        for bad in [
            &b"PROXY TCP4 192.0.2.7 10.0.0.1 51000\r\n"[..],
            b"PROXY TCP4 2001:db8::7 10.0.0.1 1 2\r\n",
            b"PROXY TCP4 192.0.2.7 10.0.0.1 70000 443\r\n",
            b"PROXY TCP4 192.0.2.7 10.0.0.1 1 2\n",
            b"PROXY TCP4 192.0.2.7 10.0.0.1 1 2 \n",
            b"PROXY UNKNOWN \n",
            b"PROXY TCP4 192.0.2.7 10.0.0.1 1 2\rX\n",
            b"PROXY UDP4 192.0.2.7 10.0.0.1 1 2\r\n",
        ] {
            assert!(matches!(parse(bad), Err(HeaderError::V1(_))), "{bad:?}");
        }
        let mut v3 = v2_tcp4();
        v3[12] = 0x31;
        assert!(matches!(parse(&v3), Err(HeaderError::V2(_))));
        // A length too short for the IPv4 addresses it announces.
        let mut short = v2_tcp4();
        short[15] = 4;
        assert!(matches!(parse(&short), Err(HeaderError::V2(_))));
    }

    #[test]
    fn evidence_of_a_header_takes_five_bytes() {
        assert!(begins_like_header(b"PROXY TCP4 1"));
        assert!(begins_like_header(b"PROXY"));
        assert!(begins_like_header(&V2_SIGNATURE[..5]));
        assert!(!begins_like_header(b"PROX"));
        assert!(!begins_like_header(b"POST / HTTP/1.1"));
        assert!(!begins_like_header(b"\r\n\r\nGET"));
        assert!(!begins_like_header(b"\x16\x03\x01\x02\x00"));
    }

    #[test]
    fn trusted_sources_match_their_networks() {
        let t = TrustedSources::new(vec![
            "10.0.0.0/8".parse().unwrap(),
            "fd00::/8".parse().unwrap(),
        ]);
        assert!(t.contains("10.200.0.1".parse().unwrap()));
        assert!(
            t.contains("::ffff:10.200.0.1".parse().unwrap()),
            "IPv4-mapped"
        );
        assert!(t.contains("fd12::1".parse().unwrap()));
        assert!(!t.contains("11.0.0.1".parse().unwrap()));
        assert!(!t.contains("fe80::1".parse().unwrap()));
        assert!(TrustedSources::default().is_empty());
    }

    /// A header that arrives in pieces is read whole, and the bytes after it stay in the socket.
    #[tokio::test]
    async fn reading_takes_the_header_and_nothing_after_it() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        for (header, want) in [
            (
                b"PROXY TCP4 192.0.2.7 10.0.0.1 51000 443\r\n".to_vec(),
                addresses("192.0.2.7:51000", "10.0.0.1:443"),
            ),
            (v2_tcp4(), addresses("10.1.2.3:4567", "10.0.0.1:443")),
        ] {
            let mut client = TcpStream::connect(addr).await.unwrap();
            let (mut server, _) = listener.accept().await.unwrap();
            let (head, rest) = header.split_at(7);
            client.write_all(head).await.unwrap();
            let reading = tokio::spawn(async move {
                let h = read_header(&mut server).await;
                (h, server)
            });
            // The reader (on this test's one thread) runs until it waits for more than the
            // 7 bytes there: it has taken them as a header's beginning. Then the rest of the
            // header and the client's own bytes, in one write.
            tokio::task::yield_now().await;
            client
                .write_all(&[rest, b"GET / HTTP/1.1\r\n"].concat())
                .await
                .unwrap();
            let (h, mut server) = reading.await.unwrap();
            assert_eq!(h.unwrap().addresses, want);
            let mut after = [0u8; 16];
            server.read_exact(&mut after).await.unwrap();
            assert_eq!(&after, b"GET / HTTP/1.1\r\n");
        }
    }

    #[tokio::test]
    async fn reading_refuses_what_is_not_a_header() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        for (sent, want) in [
            (&b"GET / HTTP/1.1\r\n\r\n"[..], Rejection::Missing),
            (b"PROXY TCP4 nonsense\r\n", Rejection::Malformed),
            (b"PROXY TCP4 192.0.2.7", Rejection::Incomplete),
        ] {
            let mut client = TcpStream::connect(addr).await.unwrap();
            let (mut server, _) = listener.accept().await.unwrap();
            client.write_all(sent).await.unwrap();
            client.shutdown().await.unwrap();
            let e = read_header(&mut server).await.unwrap_err();
            assert_eq!(e.rejection(), want, "{sent:?}: {e}");
        }
    }
}
