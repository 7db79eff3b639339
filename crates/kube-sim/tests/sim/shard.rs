//! `shardSelector` (KEP-5866) as a kube 1.36 apiserver with `ShardedListAndWatch` on serves it:
//! four shards of the hash space, by uid and by namespace, partition every LIST (JSON and
//! protobuf, whole and paged), a typed list echoes the canonical selector in
//! `metadata.shardInfo` (and nothing else does), a bad selector is a reasonless 500, a watch and
//! a watch-list's initial events see exactly their shard, and with the gate off the parameter is
//! ignored.
//!
//! Which object is in which shard is computed here from kube's hash (FNV-1a 64 of the uid or
//! namespace), independently of the simulator's filter.

use std::collections::BTreeSet;
use std::time::Duration;

use http::{Method, StatusCode};
use k8s_pb::api::core::v1 as core;
use k8s_pb::apimachinery::pkg::runtime::Unknown;
use kube_sim::Simulator;
use kube_sim::fleet::FleetSpec;
use kube_sim::kinds::CustomType;
use kube_sim::testkit::{get_json, pod, request, rv_of, send_json, sim_with, watch};
use kube_wire::shard::shard_hash;
use prost::Message;
use serde_json::{Value, json};

const T: Duration = Duration::from_secs(10);
const PB: &str = "application/vnd.kubernetes.protobuf";
const TABLE: &str = "application/json;as=Table;g=meta.k8s.io;v=v1";
const METADATA: &str = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";

/// Four shards: `[0, 2^62)`, …, `[3·2^62, 2^64)`.
const BOUNDS: [&str; 5] = [
    "0x0000000000000000",
    "0x4000000000000000",
    "0x8000000000000000",
    "0xc000000000000000",
    "0x10000000000000000",
];

/// Shard `i` over `field` (`uid` or `namespace`), in kube's canonical form.
fn shard(field: &str, i: usize) -> String {
    format!(
        "shardRange(object.metadata.{field}, '{}', '{}')",
        BOUNDS[i],
        BOUNDS[i + 1]
    )
}

fn enc(s: &str) -> String {
    form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

/// Which shard an object is in, by kube's hash.
fn shard_of(field: &str, uid: &str, namespace: &str) -> usize {
    let value = if field == "uid" { uid } else { namespace };
    (shard_hash(value.as_bytes()) >> 62) as usize
}

fn widgets() -> CustomType {
    CustomType {
        group: "example.com".into(),
        version: "v1".into(),
        resource: "widgets".into(),
        kind: "Widget".into(),
        namespaced: true,
        selectable_fields: Vec::new(),
        printer_columns: Vec::new(),
        served_without_crd: false,
    }
}

/// 60 pods over 12 namespaces, 3 nodes, 8 widgets; the gate as `sharded`.
async fn cluster(sharded: bool) -> Simulator {
    let sim = sim_with(|c| {
        c.fleet = Some(FleetSpec {
            nodes: 3,
            pods: 60,
            namespaces: 12,
            seed: 7,
        });
        c.custom_types = vec![widgets()];
        c.sharded_list_and_watch = sharded;
    })
    .await;
    for i in 0..8 {
        let w = json!({"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":format!("w{i}")}});
        let url = format!(
            "{}/apis/example.com/v1/namespaces/default/widgets",
            sim.url()
        );
        let (s, out) = send_json(Method::POST, &url, "application/json", &w).await;
        assert_eq!(s, StatusCode::CREATED, "{out}");
    }
    sim
}

/// An item's `namespace/name`, uid and namespace.
fn identity(item: &Value) -> (String, String, String) {
    let m = &item["metadata"];
    let ns = m["namespace"].as_str().unwrap_or_default().to_string();
    let name = m["name"].as_str().unwrap().to_string();
    (
        format!("{ns}/{name}"),
        m["uid"].as_str().unwrap().to_string(),
        ns,
    )
}

/// A whole LIST in JSON, paged by `limit` (0: one page): the items and each page's metadata
/// and raw body.
async fn list_json(url: &str, limit: usize) -> (Vec<Value>, Vec<(Value, String)>) {
    let (mut items, mut pages) = (Vec::new(), Vec::new());
    let mut cont = String::new();
    loop {
        let sep = if url.contains('?') { '&' } else { '?' };
        let page_url = format!("{url}{sep}limit={limit}&continue={}", enc(&cont));
        let (s, _, b) = request(
            Method::GET,
            &page_url,
            &[("accept", "application/json")],
            "",
        )
        .await;
        let raw = String::from_utf8(b.to_vec()).unwrap();
        assert_eq!(s, StatusCode::OK, "{page_url}: {raw}");
        let v: Value = serde_json::from_str(&raw).unwrap();
        items.extend(v["items"].as_array().unwrap().iter().cloned());
        cont = v["metadata"]["continue"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        pages.push((v["metadata"].clone(), raw));
        if cont.is_empty() {
            return (items, pages);
        }
    }
}

/// The fields of a protobuf message, in order: (tag, payload of a length-delimited field, or
/// the bytes of a varint).
fn pb_fields(mut b: &[u8]) -> Vec<(u32, &[u8])> {
    use prost::encoding::decode_varint;
    let mut out = Vec::new();
    while !b.is_empty() {
        let key = decode_varint(&mut b).unwrap();
        let tag = (key >> 3) as u32;
        match key & 7 {
            0 => {
                let start = b;
                decode_varint(&mut b).unwrap();
                out.push((tag, &start[..start.len() - b.len()]));
            }
            2 => {
                let n = decode_varint(&mut b).unwrap() as usize;
                out.push((tag, &b[..n]));
                b = &b[n..];
            }
            w => panic!("wire type {w}"),
        }
    }
    out
}

/// A whole pod LIST in protobuf, paged by `limit`: each item's `namespace/name`, and each
/// page's ListMeta field tags and `shardInfo.selector` (ListMeta field 5, ShardInfo field 1).
async fn list_pb(url: &str, limit: usize) -> (Vec<String>, Vec<(Vec<u32>, Option<String>)>) {
    let (mut names, mut pages) = (Vec::new(), Vec::new());
    let mut cont = String::new();
    loop {
        let sep = if url.contains('?') { '&' } else { '?' };
        let page_url = format!("{url}{sep}limit={limit}&continue={}", enc(&cont));
        let (s, _, b) = request(Method::GET, &page_url, &[("accept", PB)], "").await;
        assert_eq!(s, StatusCode::OK, "{page_url}");
        let u = Unknown::decode(b.strip_prefix(b"k8s\0").unwrap()).unwrap();
        let raw = u.raw.unwrap_or_default();
        let list = core::PodList::decode(raw.as_slice()).unwrap();
        for p in &list.items {
            let m = p.metadata.clone().unwrap_or_default();
            names.push(format!(
                "{}/{}",
                m.namespace.unwrap_or_default(),
                m.name.unwrap_or_default()
            ));
        }
        let meta = pb_fields(&raw)
            .into_iter()
            .find(|(t, _)| *t == 1)
            .map(|(_, m)| m)
            .unwrap();
        let meta_fields = pb_fields(meta);
        let selector = meta_fields.iter().find(|(t, _)| *t == 5).map(|(_, info)| {
            let sel = pb_fields(info);
            assert_eq!(sel.len(), 1, "ShardInfo has only its selector");
            assert_eq!(sel[0].0, 1);
            String::from_utf8(sel[0].1.to_vec()).unwrap()
        });
        pages.push((meta_fields.iter().map(|(t, _)| *t).collect(), selector));
        cont = list.metadata.and_then(|m| m.r#continue).unwrap_or_default();
        if cont.is_empty() {
            return (names, pages);
        }
    }
}

fn names(items: &[Value]) -> Vec<String> {
    items.iter().map(|i| identity(i).0).collect()
}

/// The shards' lists are disjoint, their union is the whole list, and each holds exactly the
/// objects kube's hash puts in it.
fn assert_partition(field: &str, all: &[Value], shards: &[Vec<String>], what: &str) {
    let whole: BTreeSet<String> = names(all).into_iter().collect();
    assert_eq!(whole.len(), all.len(), "{what}: no repeats");
    let mut union = BTreeSet::new();
    for (i, got) in shards.iter().enumerate() {
        let want: BTreeSet<String> = all
            .iter()
            .map(identity)
            .filter(|(_, uid, ns)| shard_of(field, uid, ns) == i)
            .map(|(n, _, _)| n)
            .collect();
        let got_set: BTreeSet<String> = got.iter().cloned().collect();
        assert_eq!(
            got_set.len(),
            got.len(),
            "{what}: shard {i} repeats an item"
        );
        assert_eq!(got_set, want, "{what}: shard {i} over {field}");
        for n in &got_set {
            assert!(union.insert(n.clone()), "{what}: {n} in two shards");
        }
    }
    assert_eq!(union, whole, "{what}: the shards cover the list");
}

#[tokio::test]
async fn shards_partition_lists_in_json_and_protobuf_whole_and_paged() {
    let sim = cluster(true).await;
    let u = sim.url();
    for (resource, field) in [("api/v1/pods", "uid"), ("api/v1/pods", "namespace")] {
        let url = format!("{u}/{resource}");
        let (all, _) = list_json(&url, 0).await;
        assert_eq!(all.len(), 60);
        for limit in [0, 7] {
            let mut json_shards = Vec::new();
            let mut pb_shards = Vec::new();
            for i in 0..4 {
                let sel = shard(field, i);
                let surl = format!("{url}?shardSelector={}", enc(&sel));
                let (items, pages) = list_json(&surl, limit).await;
                for (meta, raw) in &pages {
                    // The canonical echo, after everything else in ListMeta, as Go orders it.
                    assert_eq!(meta["shardInfo"], json!({"selector": sel}), "{raw}");
                    let keys: Vec<&String> = meta.as_object().unwrap().keys().collect();
                    assert_eq!(keys.last().map(|k| k.as_str()), Some("shardInfo"), "{raw}");
                    assert!(raw.contains(&format!(
                        r#""shardInfo":{{"selector":"{}"}}}},"items":"#,
                        sel
                    )));
                    // kube 1.37: no remainingItemCount under a shard selector.
                    assert!(meta.get("remainingItemCount").is_none(), "{raw}");
                    if limit > 0 {
                        assert!(items.len() <= 7 * pages.len());
                    }
                }
                json_shards.push(names(&items));
                let (pb_names, pb_pages) = list_pb(&surl, limit).await;
                for (tags, selector) in &pb_pages {
                    assert_eq!(selector.as_deref(), Some(sel.as_str()));
                    assert_eq!(tags.last(), Some(&5), "shardInfo is ListMeta's last field");
                    assert!(tags.windows(2).all(|w| w[0] < w[1]), "{tags:?}");
                }
                pb_shards.push(pb_names);
            }
            let what = format!("{field}, limit {limit}");
            assert_partition(field, &all, &json_shards, &format!("JSON {what}"));
            assert_partition(field, &all, &pb_shards, &format!("protobuf {what}"));
        }
    }
    // Pages of 7 that count only the shard's items: a shard of more than 7 is paged. As kube's
    // cacher, a page whose last item is not the last object scanned carries a token even if
    // nothing after it matches, so one more (empty) page may follow (the uids are random: a
    // shard of exactly 14 pods made 3 pages once in CI).
    let sel = shard("uid", 0);
    let (items, pages) =
        list_json(&format!("{u}/api/v1/pods?shardSelector={}", enc(&sel)), 7).await;
    let full = items.len().div_ceil(7).max(1);
    assert!(
        pages.len() == full || pages.len() == full + 1,
        "{} items in {} pages",
        items.len(),
        pages.len()
    );
    // Without a selector, a paged LIST still counts the rest.
    let (_, pages) = list_json(&format!("{u}/api/v1/pods"), 7).await;
    assert_eq!(pages[0].0["remainingItemCount"], json!(53));
    assert!(pages[0].0.get("shardInfo").is_none());
}

#[tokio::test]
async fn cluster_scoped_objects_all_hash_to_the_empty_namespace() {
    let sim = cluster(true).await;
    let url = format!("{}/api/v1/nodes", sim.url());
    // FNV-1a of "" is 0xcbf29ce484222325: the last of the four shards.
    for i in 0..4 {
        let (items, _) = list_json(
            &format!("{url}?shardSelector={}", enc(&shard("namespace", i))),
            0,
        )
        .await;
        assert_eq!(items.len(), if i == 3 { 3 } else { 0 }, "shard {i}");
    }
}

#[tokio::test]
async fn only_typed_lists_echo_the_selector() {
    let sim = cluster(true).await;
    let u = sim.url();
    // Any spelling kube accepts; the echo is canonical.
    let spelled = format!(
        "( shardRange(object.metadata.uid,\"{}\",r'{}') )",
        BOUNDS[0], BOUNDS[2]
    );
    let canonical = format!(
        "shardRange(object.metadata.uid, '{}', '{}')",
        BOUNDS[0], BOUNDS[2]
    );
    let q = format!("shardSelector={}", enc(&spelled));
    let (s, list) = get_json(&format!("{u}/api/v1/pods?{q}")).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(list["metadata"]["shardInfo"]["selector"], json!(canonical));
    let want: BTreeSet<String> = names(list["items"].as_array().unwrap())
        .into_iter()
        .collect();
    assert!(!want.is_empty() && want.len() < 60, "{}", want.len());
    // A Table and a PartialObjectMetadataList of the same LIST: filtered, no shardInfo.
    for accept in [TABLE, METADATA] {
        let (s, _, b) = request(
            Method::GET,
            &format!("{u}/api/v1/pods?{q}"),
            &[("accept", accept)],
            "",
        )
        .await;
        assert_eq!(s, StatusCode::OK);
        let v: Value = serde_json::from_slice(&b).unwrap();
        assert!(
            v["metadata"].get("shardInfo").is_none(),
            "{accept}: {}",
            v["metadata"]
        );
        let rows = if accept == TABLE {
            v["rows"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| {
                    format!(
                        "{}/{}",
                        r["object"]["metadata"]["namespace"].as_str().unwrap(),
                        r["object"]["metadata"]["name"].as_str().unwrap()
                    )
                })
                .collect::<BTreeSet<_>>()
        } else {
            names(v["items"].as_array().unwrap()).into_iter().collect()
        };
        assert_eq!(rows, want, "{accept}");
    }
    // A custom resource's list (an UnstructuredList in kube): filtered, no shardInfo.
    let wurl = format!("{u}/apis/example.com/v1/widgets");
    let (all, _) = list_json(&wurl, 0).await;
    let mut shards = Vec::new();
    for i in 0..4 {
        let (items, pages) = list_json(
            &format!("{wurl}?shardSelector={}", enc(&shard("uid", i))),
            0,
        )
        .await;
        assert!(pages[0].0.get("shardInfo").is_none(), "{}", pages[0].1);
        shards.push(names(&items));
    }
    assert_partition("uid", &all, &shards, "widgets");
}

/// kube's answer to a selector it cannot parse: 500, no reason, the parser's message.
fn assert_invalid(status: StatusCode, body: &[u8], message: &str) {
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
    let want = json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "code": 500
    });
    assert_eq!(serde_json::from_slice::<Value>(body).unwrap(), want);
}

#[tokio::test]
async fn a_bad_selector_is_a_reasonless_500_for_lists_and_watches() {
    let sim = cluster(true).await;
    let u = sim.url();
    let cases = [
        (
            format!("shardRange(object.metadata.uid, '0x0', '{}')", BOUNDS[1]),
            r#"invalid shard selector: hexStart must be a 0x-prefixed 16-digit hex value, got "0x0" (did you mean "0x0000000000000000"?)"#.to_string(),
        ),
        (
            format!("shardRange(object.metadata.uid, '{0}', '{0}')", BOUNDS[1]),
            format!("invalid shard selector: shard range start {0} must be less than end {0}", BOUNDS[1]),
        ),
        (
            format!("{} && {}", shard("uid", 0), shard("uid", 1)),
            r#"invalid shard selector: unsupported function "_&&_"; only shardRange() and || are allowed"#.to_string(),
        ),
        (
            " ".to_string(),
            "invalid shard selector: empty shard selector is not allowed; omit the parameter for unfiltered lists".to_string(),
        ),
    ];
    for (sel, message) in &cases {
        let q = format!("shardSelector={}", enc(sel));
        for path in [
            "api/v1/pods",
            "api/v1/namespaces/fleet-1/pods",
            "apis/example.com/v1/widgets",
        ] {
            for extra in [
                "",
                "&watch=1",
                "&watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true",
            ] {
                let url = format!("{u}/{path}?{q}{extra}");
                let (s, _, b) = request(Method::GET, &url, &[], "").await;
                assert_invalid(s, &b, message);
            }
        }
    }
    // The shard selector is parsed after the handler's checks: a bad label selector is its 400.
    let q = format!(
        "shardSelector={}&labelSelector=a%3D%3D%3Db",
        enc(&cases[0].0)
    );
    let (s, _) = get_json(&format!("{u}/api/v1/pods?{q}")).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    // And before the storage's: an invalid continue token does not hide it.
    let q = format!("shardSelector={}&continue=x", enc(&cases[0].0));
    let (s, _, b) = request(Method::GET, &format!("{u}/api/v1/pods?{q}"), &[], "").await;
    assert_invalid(s, &b, &cases[0].1);
    // An empty parameter is no selector.
    let (s, list) = get_json(&format!("{u}/api/v1/pods?shardSelector=")).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(list["items"].as_array().unwrap().len(), 60);
    assert!(list["metadata"].get("shardInfo").is_none());
}

#[tokio::test]
async fn with_the_gate_off_the_parameter_is_ignored() {
    let sim = cluster(false).await;
    let u = sim.url();
    for sel in [
        shard("uid", 0),
        "shardRange(object.metadata.uid, '0x0', '0x1')".into(),
        " ".into(),
    ] {
        let (s, list) = get_json(&format!("{u}/api/v1/pods?shardSelector={}", enc(&sel))).await;
        assert_eq!(s, StatusCode::OK, "{sel}: {list}");
        assert_eq!(list["items"].as_array().unwrap().len(), 60);
        assert!(list["metadata"].get("shardInfo").is_none());
        let mut w = watch(&format!("{u}/api/v1/pods?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&shardSelector={}", enc(&sel))).await;
        assert_eq!(w.status, StatusCode::OK);
        let initial = w.until(T, |e| e["type"] == "BOOKMARK").await;
        assert_eq!(initial.len(), 61);
    }
}

/// Names of the objects of a watch's ADDED/MODIFIED/DELETED events, with their types.
fn changes(events: &[Value]) -> Vec<(String, String)> {
    events
        .iter()
        .filter(|e| e["type"] != "BOOKMARK")
        .map(|e| {
            (
                e["type"].as_str().unwrap().to_string(),
                identity(&e["object"]).0,
            )
        })
        .collect()
}

#[tokio::test]
async fn each_shards_watch_sees_exactly_its_objects() {
    let sim = cluster(true).await;
    let u = sim.url();
    let (_, list) = get_json(&format!("{u}/api/v1/pods")).await;
    let start = rv_of(&list);
    let mut watches = Vec::new();
    for field in ["uid", "namespace"] {
        for i in 0..4 {
            let url = format!(
                "{u}/api/v1/pods?watch=1&allowWatchBookmarks=true&resourceVersion={start}&shardSelector={}",
                enc(&shard(field, i))
            );
            watches.push((field, i, watch(&url).await));
        }
    }
    // Creates in three namespaces, updates of every new pod and of three fleet pods, deletes.
    let mut expected: Vec<(String, String, String, String)> = Vec::new(); // type, name, uid, ns
    for (k, ns) in ["default", "fleet-1", "fleet-2"]
        .iter()
        .cycle()
        .take(12)
        .enumerate()
    {
        let name = format!("shard-{k}");
        let url = format!("{u}/api/v1/namespaces/{ns}/pods");
        let (s, out) = send_json(
            Method::POST,
            &url,
            "application/json",
            &pod(&name, "", json!({})),
        )
        .await;
        assert_eq!(s, StatusCode::CREATED, "{out}");
        let uid = out["metadata"]["uid"].as_str().unwrap().to_string();
        expected.push(("ADDED".into(), format!("{ns}/{name}"), uid, ns.to_string()));
    }
    let mut touched: Vec<(String, String, String)> = expected
        .iter()
        .map(|(_, n, uid, ns)| (n.clone(), uid.clone(), ns.clone()))
        .collect();
    touched.extend(list["items"].as_array().unwrap()[..3].iter().map(identity));
    for (n, uid, ns) in &touched {
        let (_, name) = n.split_once('/').unwrap();
        let url = format!("{u}/api/v1/namespaces/{ns}/pods/{name}");
        let patch = json!({"metadata": {"labels": {"touched": "yes"}}});
        let (s, out) = send_json(Method::PATCH, &url, "application/merge-patch+json", &patch).await;
        assert_eq!(s, StatusCode::OK, "{out}");
        expected.push(("MODIFIED".into(), n.clone(), uid.clone(), ns.clone()));
    }
    // Unscheduled pods: deleted at once, as kube deletes a pod bound to no node.
    for (n, uid, ns) in touched[..12].iter().step_by(2) {
        let (_, name) = n.split_once('/').unwrap();
        let url = format!("{u}/api/v1/namespaces/{ns}/pods/{name}?gracePeriodSeconds=0");
        let (s, _, b) = request(Method::DELETE, &url, &[], "").await;
        assert_eq!(s, StatusCode::OK, "{}", String::from_utf8_lossy(&b));
        expected.push(("DELETED".into(), n.clone(), uid.clone(), ns.clone()));
    }
    let (_, now) = get_json(&format!("{u}/api/v1/pods")).await;
    let end = rv_of(&now);
    let mut seen = BTreeSet::new();
    for (field, i, w) in &mut watches {
        // Bookmarks are not filtered: one at or past the last write says everything came.
        let events = w
            .until(T, |e| e["type"] == "BOOKMARK" && rv_of(&e["object"]) >= end)
            .await;
        let got = changes(&events);
        let want: Vec<(String, String)> = expected
            .iter()
            .filter(|(_, _, uid, ns)| shard_of(field, uid, ns) == *i)
            .map(|(t, n, _, _)| (t.clone(), n.clone()))
            .collect();
        assert_eq!(got, want, "{field} shard {i}");
        for w in want {
            seen.insert((field.to_string(), w));
        }
    }
    // Every change reached one shard per field (12 creates, 15 updates, 6 deletes).
    assert_eq!(expected.len(), 33);
    assert_eq!(seen.len(), 2 * expected.len());
}

#[tokio::test]
async fn each_shards_watch_list_starts_with_exactly_its_objects() {
    let sim = cluster(true).await;
    let u = sim.url();
    let (all, _) = list_json(&format!("{u}/api/v1/pods"), 0).await;
    for field in ["uid", "namespace"] {
        let mut shards = Vec::new();
        for i in 0..4 {
            let url = format!(
                "{u}/api/v1/pods?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&shardSelector={}",
                enc(&shard(field, i))
            );
            let mut w = watch(&url).await;
            assert_eq!(w.status, StatusCode::OK);
            let events = w.until(T, |e| e["type"] == "BOOKMARK").await;
            let (initial, end) = events.split_at(events.len() - 1);
            // The end of the initial events is the usual bookmark: no shard in it.
            let annotations = &end[0]["object"]["metadata"]["annotations"];
            assert_eq!(annotations, &json!({"k8s.io/initial-events-end": "true"}));
            assert!(initial.iter().all(|e| e["type"] == "ADDED"));
            shards.push(names(
                &initial
                    .iter()
                    .map(|e| e["object"].clone())
                    .collect::<Vec<_>>(),
            ));
        }
        assert_partition(field, &all, &shards, &format!("watch-list over {field}"));
    }
}
