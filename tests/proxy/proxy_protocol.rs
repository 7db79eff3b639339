//! The PROXY protocol (`server.proxy_protocol_trusted`), through a real watchmux in front of the
//! simulator: raw TCP connections that start with a version 1 or 2 header, as a load balancer
//! in TCP mode sends them (HAProxy's `send-proxy` and `send-proxy-v2`), before HTTP and before
//! TLS. The watch cap (`server.max_watches_per_client`) shows whom a connection counts as; the
//! headers are written here byte by byte, not by the crate watchmux reads them with.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Empty;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

use crate::common::{TestProxy, proxy_for, request, sim, watch};
use crate::pki::{Ca, Leaf, write_serving_files};

/// A cached watch.
const PODS: &str = "/api/v1/pods?watch=true";

/// The balancer's address: the one trusted source.
const BALANCER: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 1);

/// Another loopback address, not trusted.
const STRANGER: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 2);

/// The version 2 signature.
const SIGNATURE: &[u8; 12] = b"\r\n\r\n\0\r\nQUIT\n";

/// Header writers: the client's address and watchmux's (the header's destination).
type Writer = fn(SocketAddr, SocketAddr) -> Vec<u8>;

/// A version 1 header naming `src` (of `dst`'s family).
fn v1(src: SocketAddr, dst: SocketAddr) -> Vec<u8> {
    let family = if src.is_ipv4() { "TCP4" } else { "TCP6" };
    let (s, d) = (src.ip(), dst.ip());
    let (sp, dp) = (src.port(), dst.port());
    format!("PROXY {family} {s} {d} {sp} {dp}\r\n").into_bytes()
}

/// A version 2 PROXY header (TCP) naming `src` (of `dst`'s family), with a TLV, which is
/// skipped (cloud balancers add their own).
fn v2(src: SocketAddr, dst: SocketAddr) -> Vec<u8> {
    let (family, mut block) = match (src.ip(), dst.ip()) {
        (IpAddr::V4(s), IpAddr::V4(d)) => (0x11, [s.octets(), d.octets()].concat()),
        (IpAddr::V6(s), IpAddr::V6(d)) => (0x21, [s.octets(), d.octets()].concat()),
        _ => panic!("{src} and {dst} are of one family"),
    };
    block.extend(src.port().to_be_bytes());
    block.extend(dst.port().to_be_bytes());
    block.extend([0xEA, 0, 3, 1, 2, 3]);
    let mut h = SIGNATURE.to_vec();
    h.extend([0x21, family]);
    h.extend(u16::try_from(block.len()).unwrap().to_be_bytes());
    h.extend(block);
    h
}

/// A version 2 LOCAL header: the balancer's own connection (its health check).
fn v2_local() -> Vec<u8> {
    [SIGNATURE.as_slice(), &[0x20, 0x00, 0, 0]].concat()
}

/// Watchmux's address, as a header names it: of `src`'s family.
fn toward(src: SocketAddr, px: SocketAddr) -> SocketAddr {
    match src {
        SocketAddr::V4(_) => px,
        SocketAddr::V6(_) => SocketAddr::new(Ipv6Addr::LOCALHOST.into(), px.port()),
    }
}

fn addr_of(px: &TestProxy) -> SocketAddr {
    let (_, addr) = px.url.split_once("://").unwrap();
    addr.parse().unwrap()
}

/// `fut`, which must be done within 10 s (a connection that hangs fails the test rather than
/// stalling it).
async fn within<T>(fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(10), fut)
        .await
        .expect("done within 10 s")
}

/// A connection to `px` from `from` that starts with `first`.
async fn connect(px: &TestProxy, from: Ipv4Addr, first: &[u8]) -> TcpStream {
    let sock = TcpSocket::new_v4().unwrap();
    sock.bind(SocketAddr::from((from, 0))).unwrap();
    let mut s = within(sock.connect(addr_of(px))).await.unwrap();
    s.write_all(first).await.unwrap();
    s
}

/// GETs `path` over HTTP/1.1 on `io`: the answer, whose body (a watch) stays open while it is
/// held.
async fn get_h1<I>(io: I, path: &str) -> Response<Incoming>
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (mut send, conn) = within(hyper::client::conn::http1::handshake(TokioIo::new(io)))
        .await
        .unwrap();
    tokio::spawn(conn);
    let req = Request::get(path)
        .header("host", "watchmux")
        .body(Empty::<Bytes>::new())
        .unwrap();
    within(send.send_request(req)).await.unwrap()
}

/// `n` watches of pods on one HTTP/2 connection over `io`.
async fn watches_h2(io: TcpStream, base: &str, n: usize) -> Vec<Response<Incoming>> {
    let (send, conn) = within(hyper::client::conn::http2::handshake(
        TokioExecutor::new(),
        TokioIo::new(io),
    ))
    .await
    .unwrap();
    tokio::spawn(conn);
    let mut answers = Vec::new();
    for _ in 0..n {
        let req = Request::get(format!("{base}{PODS}"))
            .body(Empty::<Bytes>::new())
            .unwrap();
        answers.push(within(send.clone().send_request(req)).await.unwrap());
    }
    answers
}

/// Reads what watchmux sends until it closes the connection, and asserts that it is nothing:
/// refused before HTTP, no answer at all. (A close with the client's bytes unread is a reset.)
async fn closed_unanswered(mut s: TcpStream, what: &str) {
    let mut got = Vec::new();
    match within(s.read_to_end(&mut got)).await {
        Ok(_) => {}
        Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset, "{what}: {e}"),
    }
    assert!(
        got.is_empty(),
        "{what}: answered {:?}",
        String::from_utf8_lossy(&got)
    );
}

/// `watchmux_proxy_protocol_rejected_total{reason}`, read in the process: an HTTP scrape from
/// 127.0.0.1, the trusted balancer, would need a header of its own.
fn rejected(px: &TestProxy, reason: &str) -> f64 {
    let series = format!("watchmux_proxy_protocol_rejected_total{{reason=\"{reason}\"}} ");
    let text = px.proxy.metrics.render();
    let value = text
        .lines()
        .find_map(|l| l.strip_prefix(series.as_str()))
        .unwrap_or_else(|| panic!("no series {series}"));
    value.parse().unwrap()
}

/// Every reason's count: untrusted, missing, malformed, incomplete.
fn all_rejected(px: &TestProxy) -> [f64; 4] {
    ["untrusted", "missing", "malformed", "incomplete"].map(|r| rejected(px, r))
}

/// watchmux trusting the balancer (127.0.0.1), with at most two watches per client.
async fn behind_a_balancer(
    sim: &kube_sim::Simulator,
    f: impl FnOnce(&mut watchmux::config::Config),
) -> TestProxy {
    proxy_for(sim, |c| {
        c.server.max_watches_per_client = 2;
        c.server.proxy_protocol_trusted = vec!["127.0.0.1/32".parse().unwrap()];
        f(c)
    })
    .await
}

/// Three clients behind one balancer each get their two watches (on one HTTP/2 connection);
/// one client on three connections (HTTP/1.1, a watch each) gets 429 on the third: the cap
/// counts the address the header names, not the balancer's.
async fn the_cap_counts_the_header_source(header: Writer) {
    let sim = sim().await;
    let px = behind_a_balancer(&sim, |_| {}).await;
    let addr = addr_of(&px);
    let clients: [SocketAddr; 3] = [
        "192.0.2.1:40001".parse().unwrap(),
        "192.0.2.2:40002".parse().unwrap(),
        "[2001:db8::3]:40003".parse().unwrap(),
    ];
    let mut held = Vec::new();
    for src in clients {
        let io = connect(&px, BALANCER, &header(src, toward(src, addr))).await;
        for w in watches_h2(io, &px.url, 2).await {
            assert_eq!(w.status(), StatusCode::OK, "{src}");
            held.push(w);
        }
        assert_eq!(px.proxy.limits.watches_of(&format!("ip:{}", src.ip())), 2);
    }
    assert_eq!(px.proxy.limits.watches_of(&format!("ip:{BALANCER}")), 0);
    for (i, want) in [
        StatusCode::OK,
        StatusCode::OK,
        StatusCode::TOO_MANY_REQUESTS,
    ]
    .into_iter()
    .enumerate()
    {
        let src = SocketAddr::from(([198, 51, 100, 9], 50000 + i as u16));
        let io = connect(&px, BALANCER, &header(src, addr)).await;
        let w = get_h1(io, PODS).await;
        assert_eq!(w.status(), want, "watch {i} of one client");
        held.push(w);
    }
    assert_eq!(px.proxy.limits.watches_of("ip:198.51.100.9"), 2);
    assert_eq!(all_rejected(&px), [0.0; 4]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn version_2_headers_name_the_client_the_watch_cap_counts() {
    the_cap_counts_the_header_source(v2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn version_1_headers_name_the_client_the_watch_cap_counts() {
    the_cap_counts_the_header_source(v1).await;
}

/// An IPv4 client named in an IPv6 header (IPv4-mapped, as a dual-stack balancer may write
/// it) is the same client as in an IPv4 header.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ipv4_mapped_source_is_its_ipv4_client() {
    let sim = sim().await;
    let px = behind_a_balancer(&sim, |_| {}).await;
    let addr = addr_of(&px);
    let plain: SocketAddr = "192.0.2.7:40001".parse().unwrap();
    let mapped: SocketAddr = "[::ffff:192.0.2.7]:40002".parse().unwrap();
    let io = connect(&px, BALANCER, &v2(plain, addr)).await;
    let held = watches_h2(io, &px.url, 2).await;
    assert!(held.iter().all(|w| w.status() == StatusCode::OK));
    let io = connect(&px, BALANCER, &v2(mapped, toward(mapped, addr))).await;
    let third = get_h1(io, PODS).await;
    assert_eq!(third.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(px.proxy.limits.watches_of("ip:192.0.2.7"), 2);
}

/// From the trusted balancer, a connection without a valid header is closed unanswered and
/// counted by reason; from any other source a header is refused, and plain HTTP is served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trusted_source_must_send_a_valid_header_and_no_other_may() {
    let sim = sim().await;
    let px = behind_a_balancer(&sim, |_| {}).await;
    let get = b"GET /api/v1/namespaces HTTP/1.1\r\nhost: x\r\n\r\n";

    let s = connect(
        &px,
        BALANCER,
        &[b"PROXY TCP4 192.0.2.1 nonsense\r\n", &get[..]].concat(),
    )
    .await;
    closed_unanswered(s, "a malformed version 1 header").await;
    assert_eq!(rejected(&px, "malformed"), 1.0);
    let mut bad_version = v2("192.0.2.1:1".parse().unwrap(), addr_of(&px));
    bad_version[12] = 0x31;
    let s = connect(&px, BALANCER, &[&bad_version[..], get].concat()).await;
    closed_unanswered(s, "a version 3 header").await;
    assert_eq!(rejected(&px, "malformed"), 2.0);

    let s = connect(&px, BALANCER, get).await;
    closed_unanswered(s, "no header").await;
    assert_eq!(rejected(&px, "missing"), 1.0);

    let mut s = connect(&px, BALANCER, b"PROXY TCP4 192.0.2.1 ").await;
    s.shutdown().await.unwrap();
    closed_unanswered(s, "half a header").await;
    assert_eq!(rejected(&px, "incomplete"), 1.0);

    let header = v1("192.0.2.1:1".parse().unwrap(), addr_of(&px));
    let s = connect(&px, STRANGER, &[&header[..], get].concat()).await;
    closed_unanswered(s, "a header from an untrusted source").await;
    assert_eq!(rejected(&px, "untrusted"), 1.0);
    let s = connect(&px, STRANGER, &v2_local()).await;
    closed_unanswered(s, "a LOCAL header from an untrusted source").await;
    assert_eq!(rejected(&px, "untrusted"), 2.0);

    // The untrusted source's plain HTTP is served, as its own client.
    let s = connect(&px, STRANGER, b"").await;
    let w = get_h1(s, PODS).await;
    assert_eq!(w.status(), StatusCode::OK);
    assert_eq!(px.proxy.limits.watches_of(&format!("ip:{STRANGER}")), 1);
    // And the balancer's valid headers still are.
    let src: SocketAddr = "192.0.2.1:1".parse().unwrap();
    let s = connect(&px, BALANCER, &v2(src, addr_of(&px))).await;
    let w2 = get_h1(s, PODS).await;
    assert_eq!(w2.status(), StatusCode::OK);
    assert_eq!(px.proxy.limits.watches_of("ip:192.0.2.1"), 1);
    assert_eq!(all_rejected(&px), [2.0, 1.0, 2.0, 1.0]);
}

/// With the PROXY protocol off (the default), a connection that starts with a header is closed
/// unanswered, and plain clients are served as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_protocol_off_a_header_is_refused() {
    let sim = sim().await;
    let px = proxy_for(&sim, |_| {}).await;
    let src: SocketAddr = "192.0.2.1:1".parse().unwrap();
    let get = b"GET /api/v1/namespaces HTTP/1.1\r\nhost: x\r\n\r\n";
    for (i, header) in [v1(src, addr_of(&px)), v2(src, addr_of(&px))]
        .into_iter()
        .enumerate()
    {
        let s = connect(&px, BALANCER, &[&header[..], get].concat()).await;
        closed_unanswered(s, "a header, with the protocol off").await;
        assert_eq!(rejected(&px, "untrusted"), (i + 1) as f64);
    }
    let (status, _, _) = request(
        http::Method::GET,
        &format!("{}/api/v1/namespaces", px.url),
        &[],
        "",
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let w = watch(&format!("{}{PODS}", px.url)).await;
    assert_eq!(w.status, StatusCode::OK);
    assert_eq!(px.proxy.limits.watches_of(&format!("ip:{BALANCER}")), 1);
    assert_eq!(all_rejected(&px), [2.0, 0.0, 0.0, 0.0]);
}

/// A version 2 LOCAL header (the balancer's health check) and a version 1 UNKNOWN one are
/// served as the connection's own peer: the balancer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_and_unknown_headers_are_served_as_the_peer() {
    let sim = sim().await;
    let px = behind_a_balancer(&sim, |_| {}).await;
    let s = connect(&px, BALANCER, &v2_local()).await;
    let ready = get_h1(s, "/readyz").await;
    assert_eq!(
        ready.status(),
        StatusCode::OK,
        "the balancer's health check"
    );
    let s = connect(&px, BALANCER, &v2_local()).await;
    let w1 = get_h1(s, PODS).await;
    assert_eq!(w1.status(), StatusCode::OK);
    let s = connect(&px, BALANCER, b"PROXY UNKNOWN\r\n").await;
    let w2 = get_h1(s, PODS).await;
    assert_eq!(w2.status(), StatusCode::OK);
    assert_eq!(px.proxy.limits.watches_of(&format!("ip:{BALANCER}")), 2);
    assert_eq!(px.proxy.limits.watching_clients(), 1);
    assert_eq!(all_rejected(&px), [0.0; 4]);
}

/// A TLS client's handshake over `io` (behind the balancer: its header already sent),
/// presenting `cert`, offering HTTP/1.1.
async fn tls(
    ca: &Ca,
    cert: Option<&Leaf>,
    io: TcpStream,
) -> std::io::Result<tokio_rustls::client::TlsStream<TcpStream>> {
    use watchmux::tls::{Identity, ServerTrust, certs_from_pem, key_from_pem};
    let trust = ServerTrust::Roots(certs_from_pem(ca.pem.as_bytes()).unwrap());
    let id = cert.map(|c| Identity {
        certs: certs_from_pem(c.cert_pem.as_bytes()).unwrap(),
        key: key_from_pem(c.key_pem.as_bytes()).unwrap(),
    });
    let config =
        watchmux::tls::client_config(&trust, id.as_ref(), &[b"http/1.1".as_slice()]).unwrap();
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
    within(tokio_rustls::TlsConnector::from(Arc::new(config)).connect(name, io)).await
}

/// Serving TLS, the header comes first on the connection, before the handshake. A client
/// certificate names the client: its user's watches count together, wherever the balancer
/// says they come from; without one, the header's address is the client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_header_precedes_tls_and_a_certificate_user_is_the_client() {
    let sim = sim().await;
    let ca = Ca::new("watchmux-test-ca");
    let dir = tempfile::tempdir().unwrap();
    let (cert, key, client_ca) = write_serving_files(dir.path(), &ca, &ca.server());
    let px = behind_a_balancer(&sim, |c| {
        c.server.tls_cert_file = Some(cert);
        c.server.tls_key_file = Some(key);
        c.server.client_ca_file = Some(client_ca);
    })
    .await;
    assert!(px.url.starts_with("https://"), "{}", px.url);
    let addr = addr_of(&px);

    let anonymous: SocketAddr = "192.0.2.1:40001".parse().unwrap();
    let s = connect(&px, BALANCER, &v2(anonymous, addr)).await;
    let w = get_h1(tls(&ca, None, s).await.expect("TLS after the header"), PODS).await;
    assert_eq!(w.status(), StatusCode::OK);
    assert_eq!(px.proxy.limits.watches_of("ip:192.0.2.1"), 1);

    let alice = ca.client("alice", &["dev"], false);
    let mut held = Vec::new();
    for (last, want) in [
        (2, StatusCode::OK),
        (3, StatusCode::OK),
        (4, StatusCode::TOO_MANY_REQUESTS),
    ] {
        let src = SocketAddr::from(([192, 0, 2, last], 40000));
        let s = connect(&px, BALANCER, &v1(src, addr)).await;
        let io = tls(&ca, Some(&alice), s)
            .await
            .expect("TLS after the header");
        let w = get_h1(io, PODS).await;
        assert_eq!(w.status(), want, "alice's watch from {src}");
        held.push(w);
    }
    assert_eq!(px.proxy.limits.watches_of("user:alice"), 2);
    assert_eq!(px.proxy.limits.watches_of("ip:192.0.2.2"), 0);

    // The handshake without a header, from the balancer: refused before TLS.
    let s = connect(&px, BALANCER, b"").await;
    assert!(
        tls(&ca, None, s).await.is_err(),
        "a handshake without a header"
    );
    assert_eq!(rejected(&px, "missing"), 1.0);
}
