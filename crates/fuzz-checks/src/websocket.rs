//! Fuzz target `websocket`: the bytes a client sends on a watch websocket after the handshake,
//! read by watchmux's websocket writer ([`pump_io`], the same code and settings as an upgraded
//! connection) over in-memory I/O on a current-thread runtime, while it writes a watch's events
//! (a frame, a batch, a frame in parts), as text messages and as binary (protobuf) ones.
//!
//! Input: the client's bytes (websocket frames, or anything).
//!
//! Invariants: once the client's bytes end, the writer ends (no hang: the runtime's clock is
//! paused, so a writer waiting for nothing is seen at once); everything it wrote is a sequence
//! of well-formed, unmasked, unfragmented server frames: the watch's events in order (each
//! whole, as one message), pongs (at most 125 bytes), and nothing after a close.

use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;
use watchmux::downstream::watch::Out;
use watchmux::downstream::websocket::pump_io;

/// What the writer is given to send: (what the watch hands it, the messages that must result).
fn events(binary: bool) -> (Vec<Out>, Vec<Vec<u8>>) {
    let json: [&[u8]; 4] = [
        br#"{"type":"ADDED","object":{"kind":"Pod","apiVersion":"v1","metadata":{"name":"a","namespace":"d","resourceVersion":"5"}}}
"#,
        br#"{"type":"MODIFIED","object":{"kind":"Pod","apiVersion":"v1","metadata":{"name":"a","namespace":"d","resourceVersion":"6"}}}
"#,
        br#"{"type":"BOOKMARK","object":{"kind":"Pod","apiVersion":"v1","metadata":{"resourceVersion":"7"}}}
"#,
        br#"{"type":"DELETED","object":{"kind":"Pod","apiVersion":"v1","metadata":{"name":"a","namespace":"d","resourceVersion":"8"}}}
"#,
    ];
    // A protobuf frame on the chunked transport: a 4-byte length, then the event (a websocket
    // message carries the event alone).
    let frame = |b: &[u8]| -> Vec<u8> {
        if binary {
            let mut v = (b.len() as u32).to_be_bytes().to_vec();
            v.extend_from_slice(b);
            v
        } else {
            b.to_vec()
        }
    };
    let [a, b, c, d] = json.map(frame);
    let (d1, rest) = d.split_at(3);
    let (d2, d3) = rest.split_at(rest.len() / 2);
    let outs = vec![
        Out::Frame(Bytes::from(a.clone())),
        Out::Frame(Bytes::from(b.clone())),
        Out::Frame(Bytes::from(c.clone())),
        Out::Parts([
            Bytes::copy_from_slice(d1),
            Bytes::copy_from_slice(d2),
            Bytes::copy_from_slice(d3),
        ]),
    ];
    let strip = |v: Vec<u8>| if binary { v[4..].to_vec() } else { v };
    (outs, [a, b, c, d].map(strip).to_vec())
}

/// The check (see the module doc).
pub fn check(data: &[u8]) {
    for binary in [false, true] {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .expect("a runtime");
        let written = rt.block_on(session(data, binary));
        server_frames(&written, binary, data);
    }
}

async fn session(data: &[u8], binary: bool) -> Vec<u8> {
    let (client, server) = tokio::io::duplex(64 << 10);
    let (tx, mut rx) = mpsc::channel(8);
    let (outs, _) = events(binary);
    for o in outs {
        tx.send(o).await.expect("the writer's channel is open");
    }
    let stream = futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx));
    let pump = tokio::spawn(pump_io(server, stream, binary));
    let (mut from_server, mut to_server) = tokio::io::split(client);
    let reader = tokio::spawn(async move {
        let mut out = Vec::new();
        let _ = from_server.read_to_end(&mut out).await;
        out
    });
    // The server may close before reading everything: then the write fails, as on a socket.
    let _ = to_server.write_all(data).await;
    let _ = to_server.shutdown().await;
    // The watch still runs (its sender is alive): only the client's end may end the writer.
    let ended = tokio::time::timeout(Duration::from_secs(3600), pump).await;
    assert!(
        matches!(ended, Ok(Ok(()))),
        "the writer did not end after the client's bytes ended: {ended:?}"
    );
    drop(tx);
    drop(to_server);
    reader.await.expect("the client's reader")
}

/// Reads `out` as a client would: server frames, checked (see the module doc).
fn server_frames(mut out: &[u8], binary: bool, input: &[u8]) {
    let (_, want) = events(binary);
    let mut messages = Vec::new();
    let mut closed = false;
    while !out.is_empty() {
        assert!(!closed, "a frame after the close, for input {input:?}");
        let [b0, b1, rest @ ..] = out else {
            panic!("a truncated frame header: {out:?}")
        };
        assert_eq!(b0 & 0xf0, 0x80, "fragmented or reserved bits: {b0:#x}");
        assert_eq!(b1 & 0x80, 0, "a server frame is never masked");
        let (len, rest) = match b1 & 0x7f {
            126 => {
                let (n, r) = rest.split_first_chunk::<2>().expect("16-bit length");
                (usize::from(u16::from_be_bytes(*n)), r)
            }
            127 => {
                let (n, r) = rest.split_first_chunk::<8>().expect("64-bit length");
                (usize::try_from(u64::from_be_bytes(*n)).expect("length"), r)
            }
            n => (usize::from(n), rest),
        };
        let (payload, rest) = rest.split_at_checked(len).expect("a truncated payload");
        match b0 & 0x0f {
            1 => {
                assert!(!binary, "a text message on a binary watch");
                messages.push(payload.to_vec());
            }
            2 => {
                assert!(binary, "a binary message on a text watch");
                messages.push(payload.to_vec());
            }
            8 => closed = true,
            10 => assert!(len <= 125, "a pong of {len} bytes"),
            op => panic!("opcode {op} written by the server"),
        }
        out = rest;
    }
    assert!(
        messages.len() <= want.len() && messages[..] == want[..messages.len()],
        "the messages written are not the watch's events, in order"
    );
}
