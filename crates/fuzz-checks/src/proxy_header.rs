//! Fuzz target `proxy_header`: the first bytes of a connection from a trusted load balancer,
//! read as a PROXY protocol header by [`proxy_protocol::parse`], the function the accept path
//! reads every header with (through `read_header`, which takes only the bytes it says are the
//! header's).
//!
//! Input: the connection's first bytes (a version 1 or 2 header and what follows it, or
//! anything).
//!
//! Invariants, which are what `read_header` relies on to never take a byte of the client's
//! TLS handshake or request, nor refuse a header still arriving:
//! * a header's length is within the bytes, and the header alone parses the same (what follows
//!   it does not matter); every shorter beginning of it asks for more bytes;
//! * its addresses are the ones its bytes spell (read here independently: the text's fields,
//!   the binary header's address block), and the header re-encoded (by `ppp`'s writers) parses
//!   to the same addresses;
//! * asking for more means the bytes are all the header's: no line end yet and under 107 bytes
//!   (version 1), or fewer than the fixed 16 bytes plus the announced length (version 2);
//! * an error is final: more bytes never turn it into a header;
//! * what [`proxy_protocol::begins_like_header`] calls a header's start is never "no header".

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use watchmux::downstream::proxy_protocol::{
    self, Addresses, Header, HeaderError, Parsed, V1_MAX_LEN, V2_SIGNATURE, Version,
};

/// The check (see the module doc).
pub fn check(data: &[u8]) {
    let parsed = proxy_protocol::parse(data);
    if proxy_protocol::begins_like_header(data) {
        assert_ne!(
            parsed,
            Err(HeaderError::Missing),
            "{data:?} begins like a header"
        );
    }
    match parsed {
        Ok(Parsed::Header(header, len)) => a_header(data, header, len),
        Ok(Parsed::NeedMore) => all_the_headers(data),
        Err(e) => {
            for more in [&b"\r\n"[..], data, &[0u8; 64]] {
                let longer = [data, more].concat();
                assert!(
                    proxy_protocol::parse(&longer).is_err(),
                    "{data:?} was refused ({e}), but with more bytes it is not"
                );
            }
        }
    }
}

fn a_header(data: &[u8], header: Header, len: usize) {
    assert!(
        len > 0 && len <= data.len(),
        "a header of {len} bytes in {}",
        data.len()
    );
    let bytes = &data[..len];
    assert_eq!(
        proxy_protocol::parse(bytes),
        Ok(Parsed::Header(header, len)),
        "the header alone, {bytes:?}, does not parse the same"
    );
    for n in 0..len {
        assert_eq!(
            proxy_protocol::parse(&bytes[..n]),
            Ok(Parsed::NeedMore),
            "the first {n} bytes of the header {bytes:?}"
        );
    }
    let spelled = match header.version {
        Version::V1 => spelled_v1(bytes),
        Version::V2 => spelled_v2(bytes),
    };
    assert_eq!(header.addresses, spelled, "{bytes:?}");
    let again = encode(&header);
    match proxy_protocol::parse(&again) {
        Ok(Parsed::Header(h, n)) => {
            assert_eq!(n, again.len(), "{again:?}");
            assert_eq!(h, header, "{bytes:?} re-encoded as {again:?}");
        }
        other => panic!("{bytes:?} re-encoded as {again:?} parses as {other:?}"),
    }
}

/// `data`, which asks for more bytes, is all a header's beginning.
fn all_the_headers(data: &[u8]) {
    let n = data.len().min(V2_SIGNATURE.len());
    if data[..n] == V2_SIGNATURE[..n] {
        // The fixed part: the signature, version and command, family and protocol, and the
        // length of what follows.
        if let Some(fixed) = data.get(..16) {
            let announced = usize::from(u16::from_be_bytes([fixed[14], fixed[15]]));
            assert!(
                data.len() < 16 + announced,
                "{} bytes with {announced} announced ask for more",
                data.len()
            );
        }
    } else {
        assert!(
            b"PROXY ".starts_with(&data[..data.len().min(6)]),
            "{data:?}"
        );
        assert!(
            data.len() < V1_MAX_LEN,
            "{} bytes of a version 1 line",
            data.len()
        );
        assert!(
            !data.contains(&b'\n'),
            "a whole line asks for more: {data:?}"
        );
    }
}

/// The addresses a version 1 line spells: `PROXY TCP4|TCP6 src dst sport dport\r\n`.
fn spelled_v1(line: &[u8]) -> Option<Addresses> {
    let text = std::str::from_utf8(line).expect("a version 1 header is text");
    let text = text.strip_suffix("\r\n").expect("a line ending in CRLF");
    let fields: Vec<&str> = text.split(' ').collect();
    assert_eq!(fields[0], "PROXY");
    let family_v4 = match fields[1] {
        "UNKNOWN" => return None,
        "TCP4" => true,
        "TCP6" => false,
        other => panic!("a header of protocol {other:?}: {text:?}"),
    };
    assert_eq!(fields.len(), 6, "{text:?}");
    let ip = |s: &str| -> IpAddr {
        if family_v4 {
            IpAddr::V4(s.parse::<Ipv4Addr>().expect("TCP4: an IPv4 address"))
        } else {
            IpAddr::V6(s.parse::<Ipv6Addr>().expect("TCP6: an IPv6 address"))
        }
    };
    let port = |s: &str| -> u16 { s.parse().expect("a port") };
    Some(Addresses {
        source: SocketAddr::new(ip(fields[2]), port(fields[4])),
        destination: SocketAddr::new(ip(fields[3]), port(fields[5])),
    })
}

/// The addresses a version 2 header spells: those of its address block for the PROXY command
/// and the IPv4 or IPv6 family, else none.
fn spelled_v2(header: &[u8]) -> Option<Addresses> {
    assert_eq!(&header[..12], V2_SIGNATURE);
    assert_eq!(header[12] >> 4, 2, "version 2");
    if header[12] & 0x0f == 0 {
        return None;
    }
    let block = &header[16..];
    let port = |at: usize| u16::from_be_bytes([block[at], block[at + 1]]);
    match header[13] >> 4 {
        1 => {
            let ip = |at: usize| -> [u8; 4] { block[at..at + 4].try_into().expect("4 bytes") };
            Some(Addresses {
                source: SocketAddr::from((ip(0), port(8))),
                destination: SocketAddr::from((ip(4), port(10))),
            })
        }
        2 => {
            let ip = |at: usize| -> [u8; 16] { block[at..at + 16].try_into().expect("16 bytes") };
            Some(Addresses {
                source: SocketAddr::from((ip(0), port(32))),
                destination: SocketAddr::from((ip(16), port(34))),
            })
        }
        _ => None,
    }
}

/// `header` written anew by `ppp` (a version 2 header without addresses as LOCAL).
fn encode(header: &Header) -> Vec<u8> {
    use ppp::v2::{AddressFamily, Builder, Command, Protocol};
    let pair = header.addresses.map(|a| (a.source, a.destination));
    match (header.version, pair) {
        (Version::V1, Some(p)) => ppp::v1::Addresses::from(p).to_string().into_bytes(),
        (Version::V1, None) => ppp::v1::Addresses::Unknown.to_string().into_bytes(),
        (Version::V2, Some(p)) => {
            Builder::with_addresses(ppp::v2::Version::Two | Command::Proxy, Protocol::Stream, p)
                .build()
                .expect("a header")
        }
        (Version::V2, None) => Builder::new(
            ppp::v2::Version::Two | Command::Local,
            AddressFamily::Unspecified | Protocol::Unspecified,
        )
        .build()
        .expect("a header"),
    }
}
