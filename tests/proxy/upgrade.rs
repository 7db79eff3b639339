//! Upgrades and content negotiation through watchmux: exec over SPDY and websocket reaches the
//! simulator's echo and bytes round-trip; protobuf-first and protobuf-only clients get protobuf
//! from the cache; kube-rs's metadata lists work; large lists are gzipped; a large JSON list of
//! objects stored in protobuf, made part by part on several threads, is the simulator's body.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;

async fn with_pod() -> (kube_sim::Simulator, crate::common::TestProxy) {
    let sim = crate::common::sim().await;
    let pods = sim.resource("", "v1", "pods").unwrap();
    sim.ops()
        .create(
            &pods,
            Some("default"),
            crate::common::pod("shell", "n1", json!({})),
            false,
        )
        .unwrap();
    let px = crate::common::proxy_for(&sim, |_| {}).await;
    (sim, px)
}

#[tokio::test]
async fn exec_over_spdy_round_trips_bytes() {
    let (_sim, px) = with_pod().await;
    let addr = px.url.trim_start_matches("http://").to_string();
    let mut s = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let req = format!(
        "POST /api/v1/namespaces/default/pods/shell/exec?command=sh&stdin=true&stdout=true HTTP/1.1\r\nHost: {addr}\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: v4.channel.k8s.io\r\nX-Stream-Protocol-Version: channel.k8s.io\r\nContent-Length: 0\r\n\r\n"
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        tokio::time::timeout(Duration::from_secs(5), s.read_exact(&mut b))
            .await
            .expect("response head")
            .unwrap();
        head.push(b[0]);
    }
    let head = String::from_utf8(head).unwrap().to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 101"), "{head}");
    assert!(head.contains("upgrade: spdy/3.1"), "{head}");
    assert!(
        head.contains("x-stream-protocol-version: v4.channel.k8s.io"),
        "{head}"
    );
    for msg in [
        &b"hello"[..],
        &[0u8, 1, 2, 255][..],
        &vec![7u8; 100_000][..],
    ] {
        s.write_all(msg).await.unwrap();
        let mut got = vec![0u8; msg.len()];
        tokio::time::timeout(Duration::from_secs(5), s.read_exact(&mut got))
            .await
            .expect("echo")
            .unwrap();
        assert_eq!(got, msg);
    }
}

#[tokio::test]
async fn exec_over_websocket_round_trips_messages() {
    let (_sim, px) = with_pod().await;
    let url = format!(
        "{}/api/v1/namespaces/default/pods/shell/exec?command=sh&stdin=true&stdout=true",
        px.url.replace("http://", "ws://")
    );
    let mut req = url.into_client_request().unwrap();
    req.headers_mut().insert(
        "Sec-WebSocket-Protocol",
        HeaderValue::from_static("v5.channel.k8s.io"),
    );
    let (mut ws, resp) = tokio_tungstenite::connect_async(req)
        .await
        .expect("websocket handshake through watchmux");
    assert_eq!(
        resp.headers()["sec-websocket-protocol"],
        "v5.channel.k8s.io"
    );
    for payload in [vec![0u8, b'l', b's', b'\n'], vec![1u8; 70_000]] {
        ws.send(Message::Binary(payload.clone().into()))
            .await
            .unwrap();
        match tokio::time::timeout(Duration::from_secs(5), ws.next())
            .await
            .expect("echo")
        {
            Some(Ok(Message::Binary(b))) => assert_eq!(b.to_vec(), payload),
            other => panic!("{other:?}"),
        }
    }
    ws.close(None).await.unwrap();
}

#[tokio::test]
async fn protobuf_first_and_protobuf_only_clients_get_protobuf_from_the_cache() {
    use k8s_pb::api::core::v1::PodList;
    use prost::Message as _;
    let (sim, px) = with_pod().await;
    let lists_before = sim.stats()["resources"]["pods"]["listRequests"]
        .as_u64()
        .unwrap();
    // kubelet/controller style (protobuf first, JSON as the fallback), and protobuf only.
    for accept in [
        "application/vnd.kubernetes.protobuf, application/json",
        "application/vnd.kubernetes.protobuf",
    ] {
        let (code, headers, body) = crate::common::request(
            http::Method::GET,
            &format!("{}/api/v1/pods?resourceVersion=0", px.url),
            &[("accept", accept)],
            "",
        )
        .await;
        assert_eq!(code, 200);
        assert_eq!(
            headers["content-type"],
            "application/vnd.kubernetes.protobuf"
        );
        assert_eq!(&body[..4], b"k8s\0");
        let u = k8s_pb::apimachinery::pkg::runtime::Unknown::decode(&body[4..]).unwrap();
        let list = PodList::decode(u.raw.as_deref().unwrap()).unwrap();
        assert_eq!(
            list.items[0].metadata.as_ref().unwrap().name.as_deref(),
            Some("shell")
        );
    }
    assert_eq!(
        sim.stats()["resources"]["pods"]["listRequests"]
            .as_u64()
            .unwrap(),
        lists_before,
        "served from the cache"
    );
}

#[tokio::test]
async fn kube_rs_metadata_lists_work_through_watchmux() {
    use k8s_openapi::api::core::v1::Pod;
    use kube::api::{Api, ListParams};
    let (_sim, px) = with_pod().await;
    let client = kube::Client::try_from(kube::Config::new(px.url.parse().unwrap())).unwrap();
    // Metadata-only (PartialObjectMetadataList), in kube-rs's JSON form.
    let api: Api<Pod> = Api::namespaced(client, "default");
    let meta = api.list_metadata(&ListParams::default()).await.unwrap();
    assert_eq!(meta.items.len(), 1);
    assert_eq!(meta.items[0].metadata.name.as_deref(), Some("shell"));
}

/// A simulated fleet of `pods` on `nodes` in `namespaces`, and watchmux in front of it.
async fn fleet(
    nodes: usize,
    pods: usize,
    namespaces: usize,
    seed: u64,
) -> (kube_sim::Simulator, crate::common::TestProxy) {
    let sim = crate::common::sim_with(|c| {
        c.fleet = Some(kube_sim::fleet::FleetSpec {
            nodes,
            pods,
            namespaces,
            seed,
        })
    })
    .await;
    let px = crate::common::proxy_for(&sim, |_| {}).await;
    (sim, px)
}

#[tokio::test]
async fn large_cached_lists_are_gzipped_for_clients_that_accept_it() {
    let (_sim, px) = fleet(3, 60, 2, 5).await;
    let url = format!("{}/api/v1/pods?resourceVersion=0", px.url);
    let (code, h, plain) = crate::common::request(http::Method::GET, &url, &[], "").await;
    assert_eq!(code, 200);
    assert!(h.get("content-encoding").is_none());
    assert!(
        plain.len() > 128 * 1024,
        "the fleet's list is {} bytes",
        plain.len()
    );
    let (code, h, gz) =
        crate::common::request(http::Method::GET, &url, &[("accept-encoding", "gzip")], "").await;
    assert_eq!(code, 200);
    assert_eq!(h["content-encoding"], "gzip");
    assert_eq!(h["vary"], "Accept-Encoding");
    assert!(
        gz.len() < plain.len() / 3,
        "{} compressed vs {}",
        gz.len(),
        plain.len()
    );
    let mut out = Vec::new();
    std::io::Read::read_to_end(&mut flate2::read::MultiGzDecoder::new(&gz[..]), &mut out).unwrap();
    assert_eq!(out, plain.to_vec(), "the same body, compressed");
    // A small list is sent as is, as kube-apiserver does below 128 KiB.
    let (_, h, _) = crate::common::request(
        http::Method::GET,
        &format!("{}/api/v1/nodes?resourceVersion=0", px.url),
        &[("accept-encoding", "gzip")],
        "",
    )
    .await;
    assert!(h.get("content-encoding").is_none());
}

/// A JSON LIST of more than a MiB of pods stored in protobuf is transcoded part by part on
/// blocking threads, several parts at once: the parts arrive in order and make exactly the body
/// the simulator sends, and gzipped they form one gzip member (read here by a decoder that reads
/// only the first member) with that body inside.
#[tokio::test]
async fn a_large_json_list_made_in_parallel_parts_is_the_simulators_body() {
    let (sim, px) = fleet(8, 400, 3, 11).await;
    let path = "/api/v1/pods?resourceVersion=0";
    let (code, _, truth) =
        crate::common::request(http::Method::GET, &format!("{}{path}", sim.url()), &[], "").await;
    assert_eq!(code, 200);
    let (code, h, plain) =
        crate::common::request(http::Method::GET, &format!("{}{path}", px.url), &[], "").await;
    assert_eq!(code, 200);
    assert!(h.get("content-encoding").is_none());
    assert!(
        plain.len() > 2 << 20,
        "{} bytes: more than a MiB of protobuf, and many parts",
        plain.len()
    );
    assert!(plain == truth, "the simulator's bytes, in order");
    let (code, h, gz) = crate::common::request(
        http::Method::GET,
        &format!("{}{path}", px.url),
        &[("accept-encoding", "gzip")],
        "",
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(h["content-encoding"], "gzip");
    let mut out = Vec::new();
    std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&gz[..]), &mut out)
        .expect("one gzip member, its CRC and length right");
    assert!(out == truth.to_vec(), "the same body, compressed");
    assert!(gz.len() < plain.len() / 3, "{} compressed", gz.len());
}
