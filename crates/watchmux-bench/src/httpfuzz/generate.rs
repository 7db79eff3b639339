//! Case generation: case `i` of seed `s` is a pure function of `(s, i)` and the run's [`Ctx`],
//! so any case of a report is generated again with `--seed s --only i`. The mix: real requests
//! unchanged and mutated, requests from the kube path/query grammar, websocket watches (good
//! and broken handshakes, then good and garbage frames), HTTP/2 with prior knowledge, raw
//! malformed HTTP/1, and raw HTTP/2 frames (garbage, CONTINUATION and rapid-reset floods).
//!
//! Generation only: no I/O. A case whose bytes would reach the simulator's `/sim/` control
//! endpoints is never produced.

use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};

use super::case::{Case, Framing, Kind, Origin, Req, Transport, Wire};
use super::corpus::{self, Ctx, RESOURCES};
use super::mutate::{self, trunc};

/// The HTTP/2 connection preface.
pub const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// The per-case seed: a SplitMix64 step over seed and index, so neighbouring cases differ.
fn case_seed(seed: u64, index: u64) -> u64 {
    let mut z = seed
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(index)
        .wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Case `index` of `seed`.
pub fn case(seed: u64, index: u64, ctx: &Ctx) -> Case {
    let mut rng = StdRng::seed_from_u64(case_seed(seed, index));
    for _ in 0..16 {
        let c = draw(&mut rng, index, ctx);
        if !touches_sim_control(&c, &ctx.host) {
            return c;
        }
    }
    Case {
        index,
        transport: Transport::Http1,
        origin: Origin::Corpus,
        kind: Kind::Discovery,
        note: "fallback".into(),
        wire: Wire::Http1 {
            bytes: Req::get("/healthz", &[]).to_http1(&ctx.host),
            half_close: false,
            more: false,
        },
    }
}

/// Whether the case's bytes name the simulator's control endpoints.
fn touches_sim_control(c: &Case, host: &str) -> bool {
    memchr::memmem::find(&c.bytes(host), b"/sim/").is_some()
}

fn draw(rng: &mut StdRng, index: u64, ctx: &Ctx) -> Case {
    let roll = rng.random_range(0..100u32);
    match roll {
        0..10 => {
            let (kind, name, r) = corpus::pick(ctx, rng, index);
            http1(index, Origin::Corpus, kind, name.to_string(), &r, ctx)
        }
        10..45 => {
            let (kind, name, mut r) = corpus::pick(ctx, rng, index);
            let mut notes = vec![name.to_string()];
            for _ in 0..rng.random_range(1..=4) {
                notes.push(mutate::mutate(rng, &mut r, &ctx.continue_tokens, ctx.rv));
            }
            http1(index, Origin::Mutated, kind, notes.join("; "), &r, ctx)
        }
        45..57 => {
            let (kind, r) = grammar(rng, ctx);
            let note = format!("{} {}", r.method, trunc(&r.target(), 80));
            http1(index, Origin::Generated, kind, note, &r, ctx)
        }
        57..67 => websocket(rng, index, ctx),
        67..79 => h2(rng, index, ctx),
        79..93 => {
            let (kind, name, mut r) = corpus::pick(ctx, rng, index);
            if rng.random_bool(0.3) {
                mutate::mutate(rng, &mut r, &ctx.continue_tokens, ctx.rv);
            }
            let mut bytes = r.to_http1(&ctx.host);
            let mut notes = vec![name.to_string()];
            let mut half_close = false;
            for _ in 0..rng.random_range(1..=3) {
                let (n, incomplete) = mutate::mutate_raw(rng, &mut bytes);
                half_close |= incomplete;
                notes.push(n);
            }
            Case {
                index,
                transport: Transport::RawHttp1,
                origin: Origin::Mutated,
                kind,
                note: notes.join("; "),
                wire: Wire::Http1 {
                    bytes,
                    half_close,
                    more: true,
                },
            }
        }
        _ => raw_h2(rng, index, ctx),
    }
}

fn http1(index: u64, origin: Origin, kind: Kind, note: String, r: &Req, ctx: &Ctx) -> Case {
    // A Content-Length the body does not reach leaves the server waiting for the rest: the
    // write side is shut so it sees the end. One shorter than the body leaves bytes that the
    // server reads as a next request: their answer is read too.
    let (half_close, more) = match &r.framing {
        Framing::Declared(v) => match v.trim().parse::<usize>() {
            Ok(n) if n > r.body.len() => (true, false),
            Ok(n) => (false, n < r.body.len()),
            Err(_) => (false, true),
        },
        Framing::Bare => (!r.body.is_empty(), true),
        _ => (false, false),
    };
    Case {
        index,
        transport: Transport::Http1,
        origin,
        kind,
        note,
        wire: Wire::Http1 {
            bytes: r.to_http1(&ctx.host),
            half_close,
            more,
        },
    }
}

/// A request from the kube path and query grammar, with random parts.
fn grammar(rng: &mut StdRng, ctx: &Ctx) -> (Kind, Req) {
    let (group, resource, namespaced) =
        RESOURCES.choose(rng).copied().unwrap_or(("", "pods", true));
    let mut path = match rng.random_range(0..12u32) {
        0 => "/api".to_string(),
        1 => "/apis".to_string(),
        2 => "/api/v2".to_string(),
        3 => format!(
            "/apis/{}",
            ["apps", "batch", "fuzz.example.com", "x"]
                .choose(rng)
                .copied()
                .unwrap_or("x")
        ),
        4 => "/apis/fuzz.example.com/v1".to_string(),
        5 => format!(
            "/{}",
            [
                "healthz",
                "readyz",
                "livez",
                "metrics",
                "version",
                "openapi/v2",
                "logs",
                "debug/pprof",
                "x"
            ]
            .choose(rng)
            .copied()
            .unwrap_or("x")
        ),
        _ if group.is_empty() => "/api/v1".to_string(),
        _ => format!("/apis/{group}/v1"),
    };
    let legacy_watch = rng.random_ratio(1, 10);
    if legacy_watch {
        path.push_str("/watch");
    }
    if (namespaced && rng.random_bool(0.6)) || rng.random_ratio(1, 10) {
        let ns = ctx
            .namespaces
            .choose(rng)
            .cloned()
            .unwrap_or_else(|| "default".into());
        let ns = if rng.random_ratio(1, 8) {
            "no-such-ns".to_string()
        } else {
            ns
        };
        path.push_str(&format!("/namespaces/{ns}"));
    }
    let resource = if rng.random_ratio(1, 10) {
        "nosuchresources"
    } else {
        resource
    };
    path.push('/');
    path.push_str(resource);
    let named = rng.random_bool(0.35);
    if named {
        let name = match rng.random_range(0..4u32) {
            0 => ctx
                .pods
                .choose(rng)
                .map(|p| p.1.clone())
                .unwrap_or_default(),
            1 => ctx.nodes.choose(rng).cloned().unwrap_or_default(),
            2 => "no-such-name".into(),
            _ => ctx
                .configmaps
                .choose(rng)
                .map(|c| c.1.clone())
                .unwrap_or_default(),
        };
        path.push('/');
        path.push_str(&name);
        if rng.random_ratio(1, 3) {
            path.push('/');
            path.push_str(
                [
                    "status",
                    "scale",
                    "log",
                    "exec",
                    "proxy",
                    "binding",
                    "eviction",
                    "ephemeralcontainers",
                    "attach",
                    "portforward",
                    "x",
                ]
                .choose(rng)
                .copied()
                .unwrap_or("status"),
            );
        }
    }
    if rng.random_ratio(1, 5) {
        path = mutate::path_mutation(rng, &path).0;
    }
    let method = if rng.random_bool(0.7) {
        "GET".to_string()
    } else {
        [
            "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS", "TRACE", "CONNECT", "PROPFIND",
            "QUERY",
        ]
        .choose(rng)
        .copied()
        .unwrap_or("OPTIONS")
        .to_string()
    };
    let mut r = Req::get(path, &[]);
    r.method = method;
    for _ in 0..rng.random_range(0..7) {
        r.query
            .push(mutate::query_piece(rng, &ctx.continue_tokens, ctx.rv));
    }
    for _ in 0..rng.random_range(0..4) {
        let (n, v) = mutate::header(rng);
        r.headers.push((n, v));
    }
    if r.method != "GET" && r.method != "HEAD" && rng.random_bool(0.7) {
        r.body = mutate::body(rng, &[]).0;
    }
    let watch = legacy_watch || r.query.iter().any(|q| q.starts_with("watch="));
    let kind = match (r.method.as_str(), watch, named) {
        ("GET", true, _) => Kind::Watch,
        ("GET", false, true) => Kind::Get,
        ("GET", false, false) => Kind::List,
        ("POST" | "PUT" | "PATCH" | "DELETE", _, _) => Kind::Write,
        _ => Kind::Other,
    };
    (kind, r)
}

/// Standard base64 of `b` (websocket keys).
fn base64(b: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut s = String::new();
    for c in b.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for (i, shift) in [18u32, 12, 6, 0].into_iter().enumerate() {
            if i <= c.len() {
                s.push(char::from(A[((n >> shift) & 63) as usize]));
            } else {
                s.push('=');
            }
        }
    }
    s
}

/// A client-to-server websocket frame: `opcode`, masked unless `unmasked`, with `rsv` bits.
pub fn ws_client_frame(
    rng: &mut StdRng,
    fin: bool,
    rsv: u8,
    opcode: u8,
    payload: &[u8],
    unmasked: bool,
) -> Vec<u8> {
    let mut f = vec![(u8::from(fin) << 7) | ((rsv & 7) << 4) | (opcode & 0x0f)];
    let mask_bit = if unmasked { 0 } else { 0x80 };
    match payload.len() {
        n if n < 126 => f.push(mask_bit | n as u8),
        n if n <= 0xffff => {
            f.push(mask_bit | 126);
            f.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            f.push(mask_bit | 127);
            f.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    if unmasked {
        f.extend_from_slice(payload);
    } else {
        let key: [u8; 4] = rng.random();
        f.extend_from_slice(&key);
        f.extend(payload.iter().enumerate().map(|(i, b)| b ^ key[i % 4]));
    }
    f
}

fn websocket(rng: &mut StdRng, index: u64, ctx: &Ctx) -> Case {
    let (resource, path_ns) = *[
        ("pods", true),
        ("configmaps", true),
        ("nodes", false),
        ("services", true),
        ("namespaces", false),
    ]
    .choose(rng)
    .unwrap_or(&("pods", true));
    let ns = ctx
        .namespaces
        .choose(rng)
        .cloned()
        .unwrap_or_else(|| "default".into());
    let path = if path_ns && rng.random_bool(0.5) {
        format!("/api/v1/namespaces/{ns}/{resource}")
    } else {
        format!("/api/v1/{resource}")
    };
    let mut q = vec!["watch=true".to_string()];
    match rng.random_range(0..4u32) {
        0 => q.push(format!("resourceVersion={}", ctx.rv)),
        1 => q.extend(
            [
                "sendInitialEvents=true",
                "allowWatchBookmarks=true",
                "resourceVersionMatch=NotOlderThan",
            ]
            .map(String::from),
        ),
        2 => q.push("resourceVersion=0".into()),
        _ => q.push(mutate::query_piece(rng, &ctx.continue_tokens, ctx.rv)),
    }
    let key: [u8; 16] = rng.random();
    let mut r = Req::get(path, &[]);
    r.query = q;
    r = r
        .header("Connection", "Upgrade")
        .header("Upgrade", "websocket")
        .header("Sec-WebSocket-Version", "13")
        .header("Sec-WebSocket-Key", base64(&key).into_bytes());
    if rng.random_bool(0.3) {
        r = r.header("Accept", "application/vnd.kubernetes.protobuf");
    }
    let mut notes = vec![format!("websocket watch {resource}")];
    match rng.random_range(0..8u32) {
        0 => {
            r = r.header("Sec-WebSocket-Protocol", "binary.k8s.io");
        }
        1 => {
            r = r.header(
                "Sec-WebSocket-Protocol",
                "base64.binary.k8s.io, base64url.bearer.authorization.k8s.io.dG9rZW4",
            );
        }
        _ => {}
    }
    let broken = rng.random_bool(0.35);
    if broken {
        let what = match rng.random_range(0..9u32) {
            0 => {
                r.remove("sec-websocket-key");
                "no key"
            }
            1 => {
                r.remove("sec-websocket-version");
                r = r.header("Sec-WebSocket-Version", "8");
                "version 8"
            }
            2 => {
                r.remove("sec-websocket-key");
                r = r.header("Sec-WebSocket-Key", "short");
                "short key"
            }
            3 => {
                r.remove("connection");
                r = r.header("Connection", "keep-alive");
                "no Connection: Upgrade"
            }
            4 => {
                r.method = "POST".into();
                "POST upgrade"
            }
            5 => {
                r = r.header("Sec-WebSocket-Protocol", "a, b");
                "several protocols"
            }
            6 => {
                r = r.header(
                    "Sec-WebSocket-Protocol",
                    "base64url.bearer.authorization.k8s.io.eA",
                );
                "only the bearer protocol"
            }
            7 => {
                r.remove("upgrade");
                r = r.header("Upgrade", "websocket2");
                "Upgrade: websocket2"
            }
            _ => {
                r.version = "HTTP/1.0";
                "HTTP/1.0 upgrade"
            }
        };
        notes.push(what.to_string());
    }
    let mut after = Vec::new();
    for _ in 0..rng.random_range(0..6) {
        let (frame, note) = match rng.random_range(0..12u32) {
            0 => (ws_client_frame(rng, true, 0, 1, b"hello", false), "text"),
            1 => (ws_client_frame(rng, true, 0, 9, b"ping", false), "ping"),
            2 => (
                ws_client_frame(rng, true, 0, 8, &1000u16.to_be_bytes(), false),
                "close 1000",
            ),
            3 => (
                ws_client_frame(rng, true, 0, 8, &[3, 0xe7], false),
                "close 999",
            ),
            4 => (
                ws_client_frame(rng, true, 0, 8, &[1], false),
                "close with 1 byte",
            ),
            5 => (
                ws_client_frame(rng, true, 0, 2, b"unmasked", true),
                "unmasked",
            ),
            6 => {
                let mut f = vec![0x82, 0xff];
                f.extend_from_slice(&(u64::MAX >> 1).to_be_bytes());
                (f, "2^63-byte frame announced")
            }
            7 => (
                ws_client_frame(rng, true, 0, 3, b"x", false),
                "reserved opcode",
            ),
            8 => (ws_client_frame(rng, true, 7, 1, b"x", false), "rsv bits"),
            9 => (
                ws_client_frame(rng, false, 0, 9, b"p", false),
                "fragmented ping",
            ),
            10 => {
                let n = rng.random_range(0..70_000);
                let p = mutate::random_bytes(rng, n);
                (ws_client_frame(rng, true, 0, 2, &p, false), "binary")
            }
            _ => {
                let n = rng.random_range(1..300);
                (mutate::random_bytes(rng, n), "garbage")
            }
        };
        after.extend_from_slice(&frame);
        notes.push(note.to_string());
    }
    Case {
        index,
        transport: Transport::WebSocket,
        origin: if broken {
            Origin::Mutated
        } else {
            Origin::Corpus
        },
        kind: Kind::Watch,
        note: notes.join("; "),
        wire: Wire::WebSocket {
            handshake: r.to_http1(&ctx.host),
            after,
        },
    }
}

fn h2(rng: &mut StdRng, index: u64, ctx: &Ctx) -> Case {
    let mut requests = Vec::new();
    let mut notes = Vec::new();
    let mut kind = Kind::Other;
    let mut origin = Origin::Corpus;
    for _ in 0..rng.random_range(1..=3) {
        let (k, name, r) = corpus::pick(ctx, rng, index);
        let mut m = r.clone();
        let mut note = name.to_string();
        if rng.random_bool(0.5) {
            note.push_str("; ");
            note.push_str(&mutate::mutate(rng, &mut m, &ctx.continue_tokens, ctx.rv));
        }
        // Only what HTTP/2 can carry: otherwise the request as the client sent it.
        if m.to_h2(&ctx.host).is_some() && m != r {
            origin = Origin::Mutated;
            requests.push(m);
        } else {
            requests.push(r);
        }
        kind = k;
        notes.push(note);
    }
    Case {
        index,
        transport: Transport::H2,
        origin,
        kind,
        note: notes.join(" | "),
        wire: Wire::H2 { requests },
    }
}

/// An HTTP/2 frame.
fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len().min(0xff_ffff) as u32;
    let mut f = len.to_be_bytes()[1..].to_vec();
    f.push(kind);
    f.push(flags);
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// A valid HPACK block for `GET path` (literals without Huffman coding).
fn hpack_get(path: &str, authority: &str) -> Vec<u8> {
    // :method GET (2), :scheme http (6), then :path and :authority literals (name indexed).
    let mut b = vec![0x82, 0x86];
    for (idx, v) in [(4u8, path), (1u8, authority)] {
        b.push(idx);
        let v = v.as_bytes();
        b.push(v.len().min(127) as u8);
        b.extend_from_slice(&v[..v.len().min(127)]);
    }
    b
}

fn raw_h2(rng: &mut StdRng, index: u64, ctx: &Ctx) -> Case {
    let mut bytes = H2_PREFACE.to_vec();
    let mut notes = Vec::new();
    if rng.random_ratio(1, 8) {
        let i = rng.random_range(0..bytes.len());
        bytes[i] ^= 0x20;
        notes.push("damaged preface".to_string());
    }
    if rng.random_bool(0.8) {
        bytes.extend(frame(4, 0, 0, &[]));
    }
    let host = ctx.host.as_str();
    for _ in 0..rng.random_range(1..4) {
        let (b, note): (Vec<u8>, &str) = match rng.random_range(0..12u32) {
            0 => {
                let len = rng.random_range(0..64);
                let p = mutate::random_bytes(rng, len);
                (
                    frame(
                        rng.random_range(0..12),
                        rng.random(),
                        rng.random_range(0..8),
                        &p,
                    ),
                    "random frame",
                )
            }
            1 => (
                frame(4, 0, 0, &[0, 4, 0xff, 0xff, 0xff, 0xff, 0, 5, 0, 0, 0, 1]),
                "odd SETTINGS",
            ),
            2 => {
                let len = rng.random_range(1..200);
                let p = mutate::random_bytes(rng, len);
                (frame(1, 0x5, 1, &p), "HEADERS with garbage HPACK")
            }
            3 => (frame(0, 1, 0, b"data on stream 0"), "DATA on stream 0"),
            4 => (frame(8, 0, 0, &[0, 0, 0, 0]), "WINDOW_UPDATE of 0"),
            5 => (frame(6, 0, 0, &[1, 2, 3]), "short PING"),
            6 => {
                // CONTINUATION flood: headers that never end.
                let mut b = frame(1, 0x1, 1, &hpack_get("/api/v1/pods", host));
                for _ in 0..rng.random_range(50..2000) {
                    b.extend(frame(9, 0, 1, &[0x40, 1, b'x', 1, b'y']));
                }
                (b, "CONTINUATION flood")
            }
            7 => {
                // Rapid reset: open and cancel many streams.
                let mut b = Vec::new();
                let mut s = 1u32;
                for _ in 0..rng.random_range(50..1500) {
                    b.extend(frame(1, 0x5, s, &hpack_get("/api/v1/pods?watch=1", host)));
                    b.extend(frame(3, 0, s, &8u32.to_be_bytes()));
                    s += 2;
                }
                (b, "rapid reset")
            }
            8 => (
                frame(1, 0x5, 1, &hpack_get("/api/v1/namespaces", host)),
                "valid GET",
            ),
            9 => (frame(1, 0x5, 2, &hpack_get("/api", host)), "even stream id"),
            10 => {
                let mut f = frame(0, 0, 1, &[]);
                f[0] = 0xff;
                f[1] = 0xff;
                f[2] = 0xff;
                (f, "16 MiB frame announced")
            }
            _ => (frame(7, 0, 0, &[0, 0, 0, 0, 0, 0, 0, 2]), "GOAWAY"),
        };
        bytes.extend(b);
        notes.push(note.to_string());
    }
    Case {
        index,
        transport: Transport::RawH2,
        origin: Origin::Generated,
        kind: Kind::Other,
        note: notes.join("; "),
        wire: Wire::RawH2 { bytes },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx() -> Ctx {
        Ctx {
            host: "127.0.0.1:1".into(),
            namespaces: vec!["ns-1".into()],
            pods: vec![("ns-1".into(), "p".into())],
            nodes: vec!["node-1".into()],
            configmaps: vec![("ns-1".into(), "cm".into())],
            rv: 100,
            continue_tokens: vec!["abc".into()],
        }
    }

    #[test]
    fn cases_are_reproducible_and_varied() {
        let ctx = ctx();
        let mut transports = std::collections::BTreeSet::new();
        for i in 0..400 {
            let a = case(7, i, &ctx);
            let b = case(7, i, &ctx);
            assert_eq!(a.bytes(&ctx.host), b.bytes(&ctx.host), "case {i}");
            assert!(!touches_sim_control(&a, &ctx.host));
            transports.insert(a.transport);
        }
        assert_eq!(transports.len(), 5, "{transports:?}");
        assert_ne!(
            case(7, 1, &ctx).bytes(&ctx.host),
            case(8, 1, &ctx).bytes(&ctx.host)
        );
    }

    #[test]
    fn base64_and_frames() {
        assert_eq!(base64(b"hello"), "aGVsbG8=");
        assert_eq!(base64(&[0u8; 16]), "AAAAAAAAAAAAAAAAAAAAAA==");
        let mut rng = StdRng::seed_from_u64(1);
        let f = ws_client_frame(&mut rng, true, 0, 1, b"hi", false);
        let (p, _) = super::super::parse::ws_frame(&f).unwrap().unwrap();
        assert_eq!(
            (p.opcode, p.masked, p.payload.as_slice()),
            (1, true, &b"hi"[..])
        );
        let h = frame(4, 0, 0, &[]);
        assert_eq!(super::super::parse::h2_frames(&h).unwrap().len(), 1);
    }
}
