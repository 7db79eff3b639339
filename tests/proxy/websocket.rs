//! Websocket watches through watchmux: one text message per event carrying exactly the chunked
//! frame, the same sequence a chunked watcher gets, kube's subprotocol rules.

use std::time::Duration;

use futures_util::StreamExt;
use serde_json::json;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn connect(
    url: &str,
    protocols: Option<&str>,
) -> Result<(Ws, Option<String>), tokio_tungstenite::tungstenite::Error> {
    let mut req = url
        .replace("http://", "ws://")
        .into_client_request()
        .unwrap();
    if let Some(p) = protocols {
        req.headers_mut()
            .insert("Sec-WebSocket-Protocol", HeaderValue::from_str(p).unwrap());
    }
    let (ws, resp) = tokio_tungstenite::connect_async(req).await?;
    let proto = resp
        .headers()
        .get("Sec-WebSocket-Protocol")
        .map(|v| v.to_str().unwrap().to_string());
    Ok((ws, proto))
}

/// The next text message, or None when the server closed.
async fn next_text(ws: &mut Ws) -> Option<String> {
    loop {
        match tokio::time::timeout(Duration::from_secs(10), ws.next())
            .await
            .expect("a message within 10 s")
        {
            Some(Ok(Message::Text(t))) => return Some(t.to_string()),
            Some(Ok(Message::Binary(_))) => panic!("watch events of JSON watches are text frames"),
            Some(Ok(Message::Close(_))) | None => return None,
            Some(Ok(_)) => continue,
            Some(Err(e)) => panic!("websocket error: {e}"),
        }
    }
}

#[tokio::test]
async fn websocket_and_chunked_watchers_get_the_same_frames() {
    let sim = crate::common::sim().await;
    let pods = sim.resource("", "v1", "pods").unwrap();
    for i in 0..3 {
        sim.ops()
            .create(
                &pods,
                Some("default"),
                crate::common::pod(&format!("p{i}"), "n1", json!({"app":"web"})),
                false,
            )
            .unwrap();
    }
    let px = crate::common::proxy_for(&sim, |_| {}).await;
    let url = format!(
        "{}/api/v1/namespaces/default/pods?watch=1&resourceVersion=0&allowWatchBookmarks=true&timeoutSeconds=30",
        px.url
    );
    let mut chunked = crate::common::watch(&url).await;
    let (mut ws, proto) = connect(&url, None).await.expect("handshake");
    assert_eq!(proto, None, "no subprotocol offered, none echoed");
    // Initial events and the end bookmark.
    let mut want = Vec::new();
    for _ in 0..4 {
        match chunked.next_line(Duration::from_secs(10)).await {
            crate::common::Next::Line(l) => {
                want.push(format!("{}\n", String::from_utf8(l.to_vec()).unwrap()))
            }
            other => panic!("{other:?}"),
        }
    }
    let mut got = Vec::new();
    for _ in 0..4 {
        got.push(next_text(&mut ws).await.expect("an event"));
    }
    assert_eq!(
        got, want,
        "one message per event, payload identical to the chunked frame (with its newline)"
    );
    assert!(got[3].contains("k8s.io/initial-events-end"));
    // Live events.
    let mut p = sim
        .ops()
        .get(&pods, Some("default"), "p1")
        .unwrap()
        .to_value(&pods);
    p["metadata"]["labels"]["app"] = json!("db");
    sim.ops()
        .update(
            &pods,
            Some("default"),
            "p1",
            p,
            kube_sim::semantics::UpdateScope::Main,
        )
        .unwrap();
    let c = match chunked.next_line(Duration::from_secs(10)).await {
        crate::common::Next::Line(l) => format!("{}\n", String::from_utf8(l.to_vec()).unwrap()),
        other => panic!("{other:?}"),
    };
    let w = next_text(&mut ws).await.unwrap();
    assert_eq!(w, c);
    assert!(w.starts_with("{\"type\":\"MODIFIED\""));
}

#[tokio::test]
async fn websocket_watch_ends_with_a_close_at_the_deadline() {
    let sim = crate::common::sim().await;
    let px = crate::common::proxy_for(&sim, |_| {}).await;
    let url = format!(
        "{}/api/v1/configmaps?watch=1&resourceVersion={}&timeoutSeconds=1",
        px.url,
        sim.store().revision()
    );
    let (mut ws, _) = connect(&url, Some("binary.k8s.io")).await.unwrap();
    assert_eq!(
        next_text(&mut ws).await,
        None,
        "the server closes when the watch times out"
    );
}

#[tokio::test]
async fn subprotocols_follow_kube_apiserver() {
    let sim = crate::common::sim().await;
    let px = crate::common::proxy_for(&sim, |_| {}).await;
    let url = format!(
        "{}/api/v1/pods?watch=1&resourceVersion=0&timeoutSeconds=5",
        px.url
    );
    // A dashboard: bearer token + one protocol; the token entry is not echoed.
    let (_, proto) = connect(
        &url,
        Some("base64url.bearer.authorization.k8s.io.dG9rZW4, base64.binary.k8s.io"),
    )
    .await
    .unwrap();
    assert_eq!(proto.as_deref(), Some("base64.binary.k8s.io"));
    let (_, proto) = connect(&url, Some("binary.k8s.io")).await.unwrap();
    assert_eq!(proto.as_deref(), Some("binary.k8s.io"));
    // More than one protocol: the handshake is refused with 400.
    match connect(&url, Some("binary.k8s.io, base64.binary.k8s.io")).await {
        Err(tokio_tungstenite::tungstenite::Error::Http(resp)) => assert_eq!(resp.status(), 400),
        other => panic!("expected a 400, got {:?}", other.map(|(_, p)| p)),
    }
}

/// A client's frames are read as kube reads them (`x/net/websocket` under `IgnoreReceives`):
/// a ping is answered, data is skipped, and a frame announcing more than 32 MiB ends the watch
/// with a close at once, its header alone: neither watchmux nor the simulator waits for (or
/// makes room for) the payload.
#[tokio::test]
async fn client_frames_are_never_buffered() {
    use futures_util::SinkExt;
    use tokio::io::AsyncWriteExt;
    use tokio_tungstenite::MaybeTlsStream;
    let sim = crate::common::sim().await;
    let px = crate::common::proxy_for(&sim, |_| {}).await;
    for base in [px.url.clone(), sim.url()] {
        let url = format!(
            "{base}/api/v1/configmaps?watch=1&resourceVersion={}",
            sim.store().revision()
        );
        let (mut ws, _) = connect(&url, Some("binary.k8s.io")).await.unwrap();
        ws.send(Message::Text("ignored".into())).await.unwrap();
        ws.send(Message::Ping(b"still there?".to_vec().into()))
            .await
            .unwrap();
        let pong = loop {
            match tokio::time::timeout(Duration::from_secs(10), ws.next())
                .await
                .expect("a pong within 10 s")
            {
                Some(Ok(Message::Pong(p))) => break p,
                Some(Ok(Message::Text(_))) => continue,
                other => panic!("{base}: {other:?}"),
            }
        };
        assert_eq!(&pong[..], b"still there?", "{base}");
        // A masked binary frame announcing 60 MiB, without its payload.
        let mut head = vec![0x82, 0x80 | 127];
        head.extend_from_slice(&(60u64 << 20).to_be_bytes());
        head.extend_from_slice(&[1, 2, 3, 4]);
        match ws.get_mut() {
            MaybeTlsStream::Plain(tcp) => tcp.write_all(&head).await.unwrap(),
            _ => unreachable!("plain HTTP"),
        }
        assert_eq!(
            next_text(&mut ws).await,
            None,
            "{base}: the oversized frame ends the watch"
        );
    }
}
