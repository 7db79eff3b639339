//! LIST and WATCH semantics of the simulator over raw HTTP, against kube-apiserver 1.34+ as the
//! spec describes it: §1.5 (LIST matrix, snapshots, ordering), §1.6 (WATCH matrix, watch-list),
//! §2 (wire format, move-in/move-out, bookmarks, how streams end), §3.4 (continue tokens), plus
//! the simulator's fault switches and counters.

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use http::{Method, StatusCode};
use kube_sim::Simulator;
use kube_sim::testkit::*;
use serde_json::{Value, json};

const T: Duration = Duration::from_secs(5);
/// How long "nothing arrives" is checked for where the absence of an event is the point.
const QUIET: Duration = Duration::from_millis(400);

fn list_rv(v: &Value) -> u64 {
    rv_of(v)
}

async fn post(url: &str, body: Value) -> Value {
    let (s, v) = send_json(Method::POST, url, "application/json", &body).await;
    assert_eq!(s, StatusCode::CREATED, "POST {url}: {v}");
    v
}

async fn put(url: &str, body: &Value) -> Value {
    let (s, v) = send_json(Method::PUT, url, "application/json", body).await;
    assert_eq!(s, StatusCode::OK, "PUT {url}: {v}");
    v
}

async fn delete(url: &str) -> Value {
    let (s, _, b) = request(Method::DELETE, url, &[], "").await;
    let v: Value = serde_json::from_slice(&b).unwrap();
    assert_eq!(s, StatusCode::OK, "DELETE {url}: {v}");
    v
}

async fn create_ns(u: &str, name: &str) {
    post(
        &format!("{u}/api/v1/namespaces"),
        json!({"metadata":{"name":name}}),
    )
    .await;
}

async fn create_cm(u: &str, ns: &str, name: &str, data: &str) -> Value {
    post(
        &format!("{u}/api/v1/namespaces/{ns}/configmaps"),
        json!({"metadata":{"name":name,"labels":{"app":"x"}},"data":{"k":data}}),
    )
    .await
}

async fn create_pod(u: &str, ns: &str, name: &str, node: &str, labels: Value) -> Value {
    post(
        &format!("{u}/api/v1/namespaces/{ns}/pods"),
        pod(name, node, labels),
    )
    .await
}

/// `ns/name` of every item of a list.
fn keys(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .unwrap_or_else(|| panic!("no items in {list}"))
        .iter()
        .map(|i| {
            format!(
                "{}/{}",
                i["metadata"]["namespace"].as_str().unwrap_or_default(),
                i["metadata"]["name"].as_str().unwrap()
            )
        })
        .collect()
}

async fn list(url: &str) -> Value {
    let (s, v) = get_json(url).await;
    assert_eq!(s, 200, "GET {url}: {v}");
    v
}

fn decode_token(t: &str) -> String {
    String::from_utf8(URL_SAFE_NO_PAD.decode(t).expect("base64url token")).unwrap()
}

/// (type, name, resourceVersion) of an event.
fn ev(e: &Value) -> (String, String, u64) {
    (
        e["type"].as_str().unwrap().to_string(),
        e["object"]["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        rv_of(&e["object"]),
    )
}

fn ev_tuple(ty: &str, name: &str, rv: u64) -> (String, String, u64) {
    (ty.to_string(), name.to_string(), rv)
}

async fn next_raw(w: &mut WatchStream) -> String {
    match w.next_line(T).await {
        Next::Line(l) => String::from_utf8(l.to_vec()).unwrap(),
        other => panic!("expected a line, got {other:?}"),
    }
}

async fn assert_quiet(w: &mut WatchStream, d: Duration) {
    match w.next_line(d).await {
        Next::Timeout => {}
        Next::Line(l) => panic!("expected nothing, got {}", String::from_utf8_lossy(&l)),
        other => panic!("expected nothing, got {other:?}"),
    }
}

fn pods_rt(sim: &Simulator) -> std::sync::Arc<kube_sim::kinds::ResourceType> {
    sim.resource("", "v1", "pods").unwrap()
}

fn set_node(sim: &Simulator, ns: &str, name: &str, node: &str) -> u64 {
    let node = node.to_string();
    sim.ops()
        .modify(&pods_rt(sim), Some(ns), name, move |v| {
            v["spec"]["nodeName"] = json!(node)
        })
        .expect("modify")
        .rv
}

fn pod_bookmark(rv: u64, initial_end: bool) -> String {
    let ann = if initial_end {
        r#","annotations":{"k8s.io/initial-events-end":"true"}"#
    } else {
        ""
    };
    format!(
        r#"{{"type":"BOOKMARK","object":{{"kind":"Pod","apiVersion":"v1","metadata":{{"resourceVersion":"{rv}"{ann}}},"spec":{{"containers":null}},"status":{{}}}}}}"#
    )
}

async fn poll_stats(u: &str, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let deadline = tokio::time::Instant::now() + T;
    loop {
        let v = list(&format!("{u}/sim/stats")).await;
        if pred(&v) {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "stats never showed {what}: {v}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

// ---------------------------------------------------------------------------------------------
// LIST
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn list_order_type_meta_and_resource_version() {
    let sim = sim().await;
    let u = sim.url();
    create_ns(&u, "a").await;
    create_ns(&u, "a-b").await;
    // Created out of order on purpose.
    create_cm(&u, "default", "z", "1").await;
    create_cm(&u, "a", "y", "1").await;
    create_cm(&u, "a-b", "x", "1").await;
    create_cm(&u, "a", "x", "1").await;
    let last = rv_of(&create_cm(&u, "a-b", "a", "1").await);
    assert_eq!(sim.store().revision(), last);

    // Storage-key byte order: "a-b/..." sorts before "a/..." ('-' < '/').
    let want = ["a-b/a", "a-b/x", "a/x", "a/y", "default/z"];
    let (s, h, b) = request(Method::GET, &format!("{u}/api/v1/configmaps"), &[], "").await;
    assert_eq!(s, 200);
    assert_eq!(h["content-type"], "application/json");
    let text = String::from_utf8(b.to_vec()).unwrap();
    // The list has kind/apiVersion, its items do not (built-in kind).
    assert!(
        text.starts_with(&format!(
            r#"{{"kind":"ConfigMapList","apiVersion":"v1","metadata":{{"resourceVersion":"{last}"}},"items":[{{"metadata":{{"name":"a","namespace":"a-b","#
        )),
        "{text}"
    );
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(keys(&v), want);
    for i in v["items"].as_array().unwrap() {
        assert!(
            i.get("kind").is_none() && i.get("apiVersion").is_none(),
            "{i}"
        );
    }

    // RV=0 ignores limit (L5): everything, no continue, no remainingItemCount.
    for q in [
        "resourceVersion=0&limit=1",
        "resourceVersion=0&resourceVersionMatch=NotOlderThan&limit=2",
        "resourceVersion=0",
    ] {
        let v = list(&format!("{u}/api/v1/configmaps?{q}")).await;
        assert_eq!(keys(&v), want, "{q}");
        assert_eq!(
            v["metadata"],
            json!({"resourceVersion": last.to_string()}),
            "{q}"
        );
    }
    // Namespaced: only that namespace (no prefix confusion between "a" and "a-b").
    let v = list(&format!("{u}/api/v1/namespaces/a/configmaps")).await;
    assert_eq!(keys(&v), ["a/x", "a/y"]);

    // The list RV is the current revision, even when the last write was to another resource.
    let secret = post(
        &format!("{u}/api/v1/namespaces/default/secrets"),
        json!({"metadata":{"name":"s"},"stringData":{"a":"b"}}),
    )
    .await;
    let now = rv_of(&secret);
    assert!(now > last);
    for q in ["", "?resourceVersion=0", "?limit=500"] {
        let v = list(&format!("{u}/api/v1/configmaps{q}")).await;
        assert_eq!(list_rv(&v), now, "{q}");
        assert!(
            v["items"]
                .as_array()
                .unwrap()
                .iter()
                .all(|i| rv_of(i) < now)
        );
    }
}

#[tokio::test]
async fn paginated_list_is_a_consistent_snapshot() {
    let sim = sim().await;
    let u = sim.url();
    create_ns(&u, "a").await;
    create_ns(&u, "a-b").await;
    for (ns, name) in [
        ("default", "s"),
        ("a", "q"),
        ("default", "r"),
        ("a-b", "p"),
        ("a", "p"),
    ] {
        create_cm(&u, ns, name, "old").await;
    }
    let r = sim.store().revision();
    let all = format!("{u}/api/v1/configmaps");

    // Page 1 (RV unset, limit=2: "Most Recent, paged").
    let p1 = list(&format!("{all}?limit=2")).await;
    assert_eq!(keys(&p1), ["a-b/p", "a/p"]);
    assert_eq!(list_rv(&p1), r);
    assert_eq!(p1["metadata"]["remainingItemCount"], 3);
    let t1 = p1["metadata"]["continue"].as_str().unwrap().to_string();
    assert_eq!(
        decode_token(&t1),
        format!(r#"{{"v":"meta.k8s.io/v1","rv":{r},"start":"/a/p\u0000"}}"#)
    );

    // Writes between pages: change a/q, delete default/r, add a/pp (sorts after the cursor).
    let mut q = list(&format!("{u}/api/v1/namespaces/a/configmaps/q")).await;
    let q_old_rv = rv_of(&q);
    q["data"]["k"] = json!("new");
    put(&format!("{u}/api/v1/namespaces/a/configmaps/q"), &q).await;
    delete(&format!("{u}/api/v1/namespaces/default/configmaps/r")).await;
    create_cm(&u, "a", "pp", "new").await;
    let now = sim.store().revision();

    // Pages 2 and 3 still show the snapshot at r.
    let p2 = list(&format!("{all}?limit=2&continue={t1}")).await;
    assert_eq!(keys(&p2), ["a/q", "default/r"]);
    assert_eq!(p2["items"][0]["data"]["k"], "old");
    assert_eq!(rv_of(&p2["items"][0]), q_old_rv);
    assert_eq!(list_rv(&p2), r);
    assert_eq!(p2["metadata"]["remainingItemCount"], 1);
    let t2 = p2["metadata"]["continue"].as_str().unwrap().to_string();
    assert_eq!(
        decode_token(&t2),
        format!(r#"{{"v":"meta.k8s.io/v1","rv":{r},"start":"/default/r\u0000"}}"#)
    );
    let p3 = list(&format!("{all}?limit=2&continue={t2}")).await;
    assert_eq!(keys(&p3), ["default/s"]);
    assert_eq!(p3["metadata"], json!({"resourceVersion": r.to_string()}));

    // A new list sees the writes.
    let fresh = list(&all).await;
    assert_eq!(keys(&fresh), ["a-b/p", "a/p", "a/pp", "a/q", "default/s"]);
    assert_eq!(list_rv(&fresh), now);
    assert_eq!(fresh["items"][3]["data"]["k"], "new");

    // A page that ends exactly at the last item has no continue token.
    let v = list(&format!("{all}?limit=5")).await;
    assert_eq!(v["metadata"], json!({"resourceVersion": now.to_string()}));
    assert_eq!(v["items"].as_array().unwrap().len(), 5);

    // Namespaced paging: the token's start is relative to the namespace.
    let v = list(&format!("{u}/api/v1/namespaces/a/configmaps?limit=1")).await;
    assert_eq!(keys(&v), ["a/p"]);
    assert_eq!(v["metadata"]["remainingItemCount"], 2);
    let t = v["metadata"]["continue"].as_str().unwrap();
    assert_eq!(
        decode_token(t),
        format!(r#"{{"v":"meta.k8s.io/v1","rv":{now},"start":"/p\u0000"}}"#)
    );
    let v = list(&format!(
        "{u}/api/v1/namespaces/a/configmaps?limit=5&continue={t}"
    ))
    .await;
    assert_eq!(keys(&v), ["a/pp", "a/q"]);

    // remainingItemCount only without selectors.
    for sel in [
        "labelSelector=app%3Dx",
        "fieldSelector=metadata.namespace%21%3Dnope",
        "labelSelector=app&fieldSelector=metadata.name%21%3Dzz",
    ] {
        let v = list(&format!("{all}?limit=2&{sel}")).await;
        assert_eq!(keys(&v), ["a-b/p", "a/p"], "{sel}");
        assert!(v["metadata"]["continue"].is_string(), "{sel}: {v}");
        assert!(
            v["metadata"].get("remainingItemCount").is_none(),
            "{sel}: {v}"
        );
        let t = v["metadata"]["continue"].as_str().unwrap();
        let v = list(&format!("{all}?limit=10&{sel}&continue={t}")).await;
        assert_eq!(keys(&v), ["a/pp", "a/q", "default/s"], "{sel}");
    }
    // A selector filters within pages: limit counts matching items.
    let v = list(&format!(
        "{all}?limit=1&fieldSelector=metadata.namespace%3Ddefault"
    ))
    .await;
    assert_eq!(keys(&v), ["default/s"]);
}

#[tokio::test]
async fn exact_resource_version_list_returns_the_old_state() {
    let sim = sim().await;
    let u = sim.url();
    let cms = format!("{u}/api/v1/namespaces/default/configmaps");
    let e1 = create_cm(&u, "default", "e", "v1").await;
    let r1 = rv_of(&e1);
    let mut e = e1.clone();
    e["data"]["k"] = json!("v2");
    let r2 = rv_of(&put(&format!("{cms}/e"), &e).await);
    let r3 = rv_of(&create_cm(&u, "default", "f", "v1").await);
    delete(&format!("{cms}/e")).await;
    let r4 = sim.store().revision();
    assert!(r1 < r2 && r2 < r3 && r3 < r4);

    let data = |v: &Value| -> Vec<String> {
        v["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| {
                format!(
                    "{}={}@{}",
                    i["metadata"]["name"].as_str().unwrap(),
                    i["data"]["k"].as_str().unwrap(),
                    rv_of(i)
                )
            })
            .collect()
    };
    for (at, want) in [
        (r1, vec![format!("e=v1@{r1}")]),
        (r2, vec![format!("e=v2@{r2}")]),
        (r3, vec![format!("e=v2@{r2}"), format!("f=v1@{r3}")]),
        (r4, vec![format!("f=v1@{r3}")]),
    ] {
        for q in [
            format!("resourceVersion={at}&resourceVersionMatch=Exact"),
            // legacy exact: RV=N with a limit (L9)
            format!("resourceVersion={at}&limit=10"),
        ] {
            let v = list(&format!("{cms}?{q}")).await;
            assert_eq!(data(&v), want, "{q}");
            assert_eq!(list_rv(&v), at, "{q}");
        }
    }
    // Exact paging stays at that revision.
    let v = list(&format!(
        "{cms}?resourceVersion={r3}&resourceVersionMatch=Exact&limit=1"
    ))
    .await;
    assert_eq!(data(&v), [format!("e=v2@{r2}")]);
    let t = v["metadata"]["continue"].as_str().unwrap();
    assert_eq!(
        decode_token(t),
        format!(r#"{{"v":"meta.k8s.io/v1","rv":{r3},"start":"/e\u0000"}}"#)
    );
    let v = list(&format!("{cms}?continue={t}")).await;
    assert_eq!(data(&v), [format!("f=v1@{r3}")]);
    assert_eq!(list_rv(&v), r3);
    // "Not older than" an old revision is the current state (L7/L8), paged at the served RV.
    let v = list(&format!("{cms}?resourceVersion={r1}")).await;
    assert_eq!(data(&v), [format!("f=v1@{r3}")]);
    assert_eq!(list_rv(&v), r4);
    let v = list(&format!(
        "{cms}?resourceVersion={r1}&resourceVersionMatch=NotOlderThan&limit=5"
    ))
    .await;
    assert_eq!(data(&v), [format!("f=v1@{r3}")]);
    assert_eq!(list_rv(&v), r4);
}

#[tokio::test]
async fn custom_resource_list_items_keep_kind_and_api_version() {
    let sim = sim_with(|c| {
        c.custom_types
            .push("example.com/v1/widgets=Widget".parse().unwrap())
    })
    .await;
    let u = sim.url();
    let widgets = format!("{u}/apis/example.com/v1/namespaces/default/widgets");
    post(
        &widgets,
        json!({"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w1"},"spec":{"size":1}}),
    )
    .await;
    post(
        &widgets,
        json!({"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w0"},"spec":{"size":2}}),
    )
    .await;
    create_cm(&u, "default", "c", "1").await;
    for url in [widgets.clone(), format!("{u}/apis/example.com/v1/widgets")] {
        let v = list(&url).await;
        assert_eq!(v["kind"], "WidgetList");
        assert_eq!(v["apiVersion"], "example.com/v1");
        assert_eq!(keys(&v), ["default/w0", "default/w1"]);
        for i in v["items"].as_array().unwrap() {
            assert_eq!(i["kind"], "Widget", "{i}");
            assert_eq!(i["apiVersion"], "example.com/v1", "{i}");
        }
    }
    // Built-in items in the same simulator have neither.
    let v = list(&format!("{u}/api/v1/namespaces/default/configmaps")).await;
    assert_eq!(v["kind"], "ConfigMapList");
    assert!(v["items"][0].get("kind").is_none());
    assert!(v["items"][0].get("apiVersion").is_none());
    // Watch events of both carry kind/apiVersion.
    let mut w = watch(&format!("{widgets}?watch=1")).await;
    let e = w.next_event(T).await;
    assert_eq!(e["object"]["kind"], "Widget");
    assert_eq!(e["object"]["apiVersion"], "example.com/v1");
    let mut w = watch(&format!("{u}/api/v1/configmaps?watch=1")).await;
    let e = w.next_event(T).await;
    assert_eq!(e["object"]["kind"], "ConfigMap");
    assert_eq!(e["object"]["apiVersion"], "v1");
}

// ---------------------------------------------------------------------------------------------
// WATCH: request forms, watch-list, start points
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn watch_headers_arrive_before_any_event_in_every_request_form() {
    let sim = sim().await;
    let u = sim.url();
    let rv = sim.store().revision();
    let mut streams = Vec::new();
    for url in [
        format!("{u}/api/v1/namespaces/default/pods?watch=1&resourceVersion={rv}"),
        format!("{u}/api/v1/pods?watch=true&resourceVersion={rv}"),
        format!("{u}/api/v1/pods?watch=&resourceVersion={rv}"),
        format!("{u}/api/v1/pods?watch=yes&resourceVersion={rv}&allowWatchBookmarks=true"),
        format!("{u}/api/v1/watch/namespaces/default/pods?resourceVersion={rv}"),
        // the legacy path is a watch whatever `watch` says
        format!("{u}/api/v1/watch/pods?resourceVersion={rv}&watch=false"),
        format!("{u}/api/v1/watch/namespaces/default/pods/p1?resourceVersion={rv}"),
        format!(
            "{u}/api/v1/pods?watch=1&sendInitialEvents=false&resourceVersionMatch=NotOlderThan"
        ),
    ] {
        // `watch()` returns once the response head arrived: no event exists yet.
        let mut w = watch(&url).await;
        assert_eq!(w.status, 200, "{url}");
        assert_eq!(w.headers["content-type"], "application/json", "{url}");
        assert_eq!(w.headers["cache-control"], "no-cache, private", "{url}");
        assert!(w.headers.get("content-length").is_none(), "{url}");
        assert_quiet(&mut w, Duration::from_millis(200)).await;
        streams.push((url, w));
    }
    let p1 = create_pod(&u, "default", "p1", "", json!({})).await;
    for (url, w) in &mut streams {
        let e = w.next_event(T).await;
        assert_eq!(ev(&e), ev_tuple("ADDED", "p1", rv_of(&p1)), "{url}");
        assert_eq!(e["object"]["kind"], "Pod");
        assert_eq!(e["object"]["apiVersion"], "v1");
        assert_eq!(e.as_object().unwrap().len(), 2, "{e}");
    }
    // `watch=false` / `watch=0` on the collection path is a LIST; a GET of an object with
    // `watch=true` is a GET (only the list handler watches).
    for q in ["watch=false", "watch=0", "watch=FALSE"] {
        let v = list(&format!("{u}/api/v1/pods?{q}")).await;
        assert_eq!(v["kind"], "PodList", "{q}");
    }
    let v = list(&format!("{u}/api/v1/namespaces/default/pods/p1?watch=true")).await;
    assert_eq!(v["kind"], "Pod");
}

#[tokio::test]
async fn legacy_single_object_watch_path_is_scoped_to_that_object() {
    let sim = sim().await;
    let u = sim.url();
    let p1 = create_pod(&u, "default", "p1", "", json!({})).await;
    create_pod(&u, "default", "p2", "", json!({})).await;
    create_ns(&u, "other").await;
    create_pod(&u, "other", "p1", "", json!({})).await;
    // RV unset: a watch-list of just that object.
    let mut w = watch(&format!(
        "{u}/api/v1/watch/namespaces/default/pods/p1?allowWatchBookmarks=true"
    ))
    .await;
    let e = w.next_event(T).await;
    assert_eq!(ev(&e), ev_tuple("ADDED", "p1", rv_of(&p1)));
    assert_eq!(e["object"]["metadata"]["namespace"], "default");
    let cur = sim.store().revision();
    assert_eq!(next_raw(&mut w).await, pod_bookmark(cur, true));
    // Changes to other objects are not delivered; changes to p1 are.
    let mut p2 = list(&format!("{u}/api/v1/namespaces/default/pods/p2")).await;
    p2["metadata"]["labels"] = json!({"a": "b"});
    put(&format!("{u}/api/v1/namespaces/default/pods/p2"), &p2).await;
    let mut o1 = list(&format!("{u}/api/v1/namespaces/other/pods/p1")).await;
    o1["metadata"]["labels"] = json!({"a": "b"});
    put(&format!("{u}/api/v1/namespaces/other/pods/p1"), &o1).await;
    let mut p = p1.clone();
    p["metadata"]["labels"] = json!({"a": "c"});
    let m = put(&format!("{u}/api/v1/namespaces/default/pods/p1"), &p).await;
    let e = w.next_non_bookmark(T).await;
    assert_eq!(ev(&e), ev_tuple("MODIFIED", "p1", rv_of(&m)));
    assert_eq!(e["object"]["metadata"]["labels"], json!({"a": "c"}));
}

#[tokio::test]
async fn watch_list_sends_initial_events_then_the_end_bookmark() {
    let sim = sim().await;
    let u = sim.url();
    let c = create_pod(&u, "default", "c", "n1", json!({})).await;
    let a = create_pod(&u, "default", "a", "n1", json!({})).await;
    let b = create_pod(&u, "default", "b", "", json!({})).await;
    create_ns(&u, "other").await;
    create_pod(&u, "other", "x", "", json!({})).await;
    let cur = sim.store().revision();
    let pods = format!("{u}/api/v1/namespaces/default/pods");
    let initial = vec![
        ev_tuple("ADDED", "a", rv_of(&a)),
        ev_tuple("ADDED", "b", rv_of(&b)),
        ev_tuple("ADDED", "c", rv_of(&c)),
    ];
    // RV unset / "0" are defaulted to sendInitialEvents=true (W2/W4); explicit forms (W6) too.
    for q in [
        "watch=1&allowWatchBookmarks=true",
        "watch=1&resourceVersion=0&allowWatchBookmarks=true",
        "watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true",
        &format!(
            "watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion={}&allowWatchBookmarks=true",
            rv_of(&a)
        ),
    ] {
        let mut w = watch(&format!("{pods}?{q}")).await;
        let mut got = Vec::new();
        for _ in 0..3 {
            let e = w.next_event(T).await;
            assert_eq!(e["object"]["kind"], "Pod");
            got.push(ev(&e));
        }
        // Ordered by key, each object with its own RV.
        assert_eq!(got, initial, "{q}");
        // The end marker: exact bytes, RV = the current revision, no creationTimestamp.
        assert_eq!(next_raw(&mut w).await, pod_bookmark(cur, true), "{q}");
    }
    // The same over the cluster-wide legacy path.
    let mut w = watch(&format!("{u}/api/v1/watch/pods?allowWatchBookmarks=true")).await;
    let mut names = Vec::new();
    for _ in 0..4 {
        let e = w.next_event(T).await;
        names.push(format!(
            "{}/{}",
            e["object"]["metadata"]["namespace"].as_str().unwrap(),
            e["object"]["metadata"]["name"].as_str().unwrap()
        ));
    }
    assert_eq!(names, ["default/a", "default/b", "default/c", "other/x"]);
    assert_eq!(next_raw(&mut w).await, pod_bookmark(cur, true));

    // Without allowWatchBookmarks: the initial events and no end marker at all (W10),
    // and no periodic bookmark either (the simulator's interval is 1 s here).
    let mut quiet = watch(&format!("{pods}?watch=1")).await;
    let mut got = Vec::new();
    for _ in 0..3 {
        got.push(ev(&quiet.next_event(T).await));
    }
    assert_eq!(got, initial);
    // Another resource changes, so a bookmark *could* advance.
    create_cm(&u, "default", "bump", "1").await;
    assert_quiet(&mut quiet, Duration::from_millis(1500)).await;

    // Live events continue after the initial ones.
    let mut w = watch(&format!("{pods}?watch=1&allowWatchBookmarks=true")).await;
    for _ in 0..3 {
        w.next_event(T).await;
    }
    let end = w.next_event(T).await;
    assert_eq!(end["type"], "BOOKMARK");
    let end_rv = rv_of(&end["object"]);
    let d = create_pod(&u, "default", "d", "", json!({})).await;
    let e = w.next_non_bookmark(T).await;
    assert_eq!(ev(&e), ev_tuple("ADDED", "d", rv_of(&d)));
    assert!(rv_of(&d) > end_rv);
    assert_eq!(
        ev(&quiet.next_event(T).await),
        ev_tuple("ADDED", "d", rv_of(&d))
    );
}

#[tokio::test]
async fn send_initial_events_false_starts_now() {
    let sim = sim().await;
    let u = sim.url();
    let p = create_pod(&u, "default", "old", "", json!({})).await;
    let pods = format!("{u}/api/v1/namespaces/default/pods");
    let mut ws = Vec::new();
    for q in [
        "sendInitialEvents=false&resourceVersionMatch=NotOlderThan",
        "sendInitialEvents=false&resourceVersionMatch=NotOlderThan&resourceVersion=0",
        "sendInitialEvents=false&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true",
    ] {
        let mut w = watch(&format!("{pods}?watch=1&{q}")).await;
        assert_eq!(w.status, 200);
        assert_quiet(&mut w, QUIET).await;
        ws.push(w);
    }
    // W9: sendInitialEvents=false with RV=N replays after N.
    let mut replay = watch(&format!(
        "{pods}?watch=1&sendInitialEvents=false&resourceVersionMatch=NotOlderThan&resourceVersion={}",
        rv_of(&p) - 1
    ))
    .await;
    assert_eq!(
        ev(&replay.next_event(T).await),
        ev_tuple("ADDED", "old", rv_of(&p))
    );

    let n = create_pod(&u, "default", "new", "", json!({})).await;
    for w in &mut ws {
        let e = w.next_event(T).await;
        assert_eq!(ev(&e), ev_tuple("ADDED", "new", rv_of(&n)));
    }
    assert_eq!(
        ev(&replay.next_event(T).await),
        ev_tuple("ADDED", "new", rv_of(&n))
    );
}

#[tokio::test]
async fn watch_from_rv_replays_exactly_the_events_after_it() {
    let sim = sim().await;
    let u = sim.url();
    let pods = format!("{u}/api/v1/namespaces/default/pods");
    let p1 = create_pod(&u, "default", "p1", "", json!({})).await;
    let r1 = rv_of(&p1);
    let r2 = rv_of(&create_pod(&u, "default", "p2", "", json!({})).await);
    let mut p = p1.clone();
    p["metadata"]["labels"] = json!({"v": "2"});
    let r3 = rv_of(&put(&format!("{pods}/p1"), &p).await);
    // p2 is unbound: deleted at once.
    delete(&format!("{pods}/p2")).await;
    let r4 = sim.store().revision();
    assert_eq!((r2, r3, r4), (r1 + 1, r1 + 2, r1 + 3));

    for (from, want) in [
        (
            r1,
            vec![
                ev_tuple("ADDED", "p2", r2),
                ev_tuple("MODIFIED", "p1", r3),
                ev_tuple("DELETED", "p2", r4),
            ],
        ),
        (
            r2,
            vec![
                ev_tuple("MODIFIED", "p1", r3),
                ev_tuple("DELETED", "p2", r4),
            ],
        ),
        (r3, vec![ev_tuple("DELETED", "p2", r4)]),
        (r4, vec![]),
    ] {
        for url in [
            format!("{pods}?watch=1&resourceVersion={from}"),
            format!("{u}/api/v1/watch/pods?resourceVersion={from}"),
        ] {
            let mut w = watch(&url).await;
            for want in &want {
                assert_eq!(&ev(&w.next_event(T).await), want, "{url}");
            }
            assert_quiet(&mut w, Duration::from_millis(200)).await;
        }
    }
    // The DELETED object is p2's last state, stamped with the deletion's RV.
    let mut w = watch(&format!("{pods}?watch=1&resourceVersion={r3}")).await;
    let d = w.next_event(T).await;
    assert!(d["object"]["metadata"]["uid"].is_string(), "{d}");
    assert_eq!(d["object"]["spec"]["containers"][0]["name"], "c");

    // A future RV is not an error: the watch waits and suppresses events up to it.
    let cur = sim.store().revision();
    let mut w = watch(&format!("{pods}?watch=1&resourceVersion={}", cur + 2)).await;
    assert_eq!(w.status, 200);
    create_pod(&u, "default", "q1", "", json!({})).await;
    create_pod(&u, "default", "q2", "", json!({})).await;
    assert_quiet(&mut w, Duration::from_millis(200)).await;
    let q3 = create_pod(&u, "default", "q3", "", json!({})).await;
    assert_eq!(rv_of(&q3), cur + 3);
    assert_eq!(ev(&w.next_event(T).await), ev_tuple("ADDED", "q3", cur + 3));
}

// ---------------------------------------------------------------------------------------------
// WATCH: selectors, move-in/move-out, deletion
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn label_selector_move_in_and_move_out() {
    let sim = sim().await;
    let u = sim.url();
    let pods = format!("{u}/api/v1/namespaces/default/pods");
    let start = sim.store().revision();
    let live = format!("{pods}?watch=1&labelSelector=app%3Dweb&resourceVersion={start}");
    let mut w = watch(&live).await;

    let p = create_pod(&u, "default", "p", "", json!({"app": "db"})).await;
    let mut body = p.clone();
    body["metadata"]["labels"] = json!({"app": "web"});
    let r_in = rv_of(&put(&format!("{pods}/p"), &body).await);
    body["metadata"]["resourceVersion"] = json!(r_in.to_string());
    body["metadata"]["labels"] = json!({"app": "web", "tier": "x"});
    let r_mod = rv_of(&put(&format!("{pods}/p"), &body).await);
    body["metadata"]["resourceVersion"] = json!(r_mod.to_string());
    body["metadata"]["labels"] = json!({"app": "db"});
    let r_out = rv_of(&put(&format!("{pods}/p"), &body).await);

    let check = |events: Vec<Value>| {
        let got: Vec<_> = events.iter().map(ev).collect();
        assert_eq!(
            got,
            [
                ev_tuple("ADDED", "p", r_in),
                ev_tuple("MODIFIED", "p", r_mod),
                ev_tuple("DELETED", "p", r_out),
            ]
        );
        assert_eq!(
            events[0]["object"]["metadata"]["labels"],
            json!({"app": "web"})
        );
        // DELETED carries the previous (last matching) state with the event's RV.
        assert_eq!(
            events[2]["object"]["metadata"]["labels"],
            json!({"app": "web", "tier": "x"})
        );
        assert_eq!(
            events[2]["object"]["metadata"]["resourceVersion"],
            r_out.to_string()
        );
    };
    let mut live_events = Vec::new();
    for _ in 0..3 {
        live_events.push(w.next_event(T).await);
    }
    check(live_events);
    assert_quiet(&mut w, Duration::from_millis(200)).await;
    // Replaying the same history applies the same conversion.
    let mut replay = watch(&live).await;
    let mut replayed = Vec::new();
    for _ in 0..3 {
        replayed.push(replay.next_event(T).await);
    }
    check(replayed);
    // `!=` matches objects that lack the key; a watch-list with a selector lists only matches.
    create_pod(&u, "default", "nolabel", "", json!({})).await;
    let mut w = watch(&format!("{pods}?watch=1&labelSelector=app%21%3Ddb")).await;
    assert_eq!(
        w.next_event(T).await["object"]["metadata"]["name"],
        "nolabel"
    );
    assert_quiet(&mut w, Duration::from_millis(200)).await;
}

#[tokio::test]
async fn node_name_field_selector_follows_binding_moves_and_deletion() {
    let sim = sim().await;
    let u = sim.url();
    let start = sim.store().revision();
    let kubelet = |node: &str| {
        format!(
            "{u}/api/v1/pods?watch=1&fieldSelector=spec.nodeName%3D{node}&resourceVersion={start}"
        )
    };
    let mut n1 = watch(&kubelet("n1")).await;
    let mut n2 = watch(&kubelet("n2")).await;
    // kubelets of old used the legacy prefix and the `spec.host` alias.
    let mut n1_legacy = watch(&format!(
        "{u}/api/v1/watch/pods?fieldSelector=spec.host%3Dn1&resourceVersion={start}"
    ))
    .await;

    let created = create_pod(&u, "default", "k", "", json!({})).await;
    let r_bind = set_node(&sim, "default", "k", "n1");
    let r_move = set_node(&sim, "default", "k", "n2");
    let r_back = set_node(&sim, "default", "k", "n1");
    assert!(rv_of(&created) < r_bind && r_bind < r_move && r_move < r_back);

    for w in [&mut n1, &mut n1_legacy] {
        let e = w.next_event(T).await;
        assert_eq!(ev(&e), ev_tuple("ADDED", "k", r_bind));
        assert_eq!(e["object"]["spec"]["nodeName"], "n1");
        let e = w.next_event(T).await;
        assert_eq!(ev(&e), ev_tuple("DELETED", "k", r_move));
        // The previous state (still on n1), stamped with the move's RV.
        assert_eq!(e["object"]["spec"]["nodeName"], "n1");
        assert_eq!(
            e["object"]["metadata"]["resourceVersion"],
            r_move.to_string()
        );
        let e = w.next_event(T).await;
        assert_eq!(ev(&e), ev_tuple("ADDED", "k", r_back));
    }
    let e = n2.next_event(T).await;
    assert_eq!(ev(&e), ev_tuple("ADDED", "k", r_move));
    assert_eq!(e["object"]["spec"]["nodeName"], "n2");
    let e = n2.next_event(T).await;
    assert_eq!(ev(&e), ev_tuple("DELETED", "k", r_back));
    assert_eq!(e["object"]["spec"]["nodeName"], "n2");

    // Deleting a bound pod: MODIFIED (deletionTimestamp, grace period) then, once the simulated
    // kubelet is done, DELETED with the deletion's RV.
    let marked = delete(&format!("{u}/api/v1/namespaces/default/pods/k")).await;
    let r_mark = rv_of(&marked);
    assert!(
        marked["metadata"]["deletionTimestamp"].is_string(),
        "{marked}"
    );
    for w in [&mut n1, &mut n1_legacy] {
        let e = w.next_event(T).await;
        assert_eq!(ev(&e), ev_tuple("MODIFIED", "k", r_mark));
        assert!(e["object"]["metadata"]["deletionTimestamp"].is_string());
        assert_eq!(e["object"]["metadata"]["deletionGracePeriodSeconds"], 30);
        let e = w.next_event(T).await;
        let (ty, name, r_del) = ev(&e);
        assert_eq!((ty.as_str(), name.as_str()), ("DELETED", "k"));
        assert!(r_del > r_mark);
        assert!(e["object"]["metadata"]["deletionTimestamp"].is_string());
        assert_quiet(w, Duration::from_millis(200)).await;
    }
    assert_quiet(&mut n2, Duration::from_millis(200)).await;
    let (s, _) = get_json(&format!("{u}/api/v1/namespaces/default/pods/k")).await;
    assert_eq!(s, 404);
}

// ---------------------------------------------------------------------------------------------
// WATCH: bookmarks and stream ends
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn periodic_bookmarks_only_with_allow_watch_bookmarks() {
    let sim = sim().await;
    let u = sim.url();
    let start = sim.store().revision();
    // A selector matching nothing: bookmarks are not filtered by selectors.
    let base = format!("{u}/api/v1/pods?watch=1&resourceVersion={start}&labelSelector=app%3Dnone");
    let mut with = watch(&format!("{base}&allowWatchBookmarks=true")).await;
    let mut without = watch(&base).await;
    let mut cm_watch = watch(&format!(
        "{u}/api/v1/namespaces/default/configmaps?watch=1&resourceVersion={start}&allowWatchBookmarks=true&fieldSelector=metadata.name%3Dnone"
    ))
    .await;
    // Nothing happened since `start`: no bookmark may repeat the start RV.
    assert_quiet(&mut with, Duration::from_millis(1500)).await;

    // Writes elsewhere advance the revision a bookmark announces.
    create_cm(&u, "default", "a", "1").await;
    create_pod(&u, "default", "p", "", json!({"app": "other"})).await;
    let r = sim.store().revision();

    let (b, cb, _) = tokio::join!(next_raw(&mut with), next_raw(&mut cm_watch), async {
        assert_quiet(&mut without, Duration::from_millis(2500)).await
    });
    // kind/apiVersion present, no creationTimestamp, no annotation on periodic bookmarks.
    assert_eq!(b, pod_bookmark(r, false));
    assert_eq!(
        cb,
        format!(
            r#"{{"type":"BOOKMARK","object":{{"kind":"ConfigMap","apiVersion":"v1","metadata":{{"resourceVersion":"{r}"}}}}}}"#
        )
    );
    // As kube's cacher (observed-1.36.md): once the revision moved past the watch's start, the
    // periodic bookmark goes out even when nothing changed since the last one (same RV); after a
    // write the next one carries the new RV.
    assert_eq!(next_raw(&mut with).await, pod_bookmark(r, false));
    let r2 = rv_of(&create_cm(&u, "default", "b", "1").await);
    let mut next = next_raw(&mut with).await;
    if next == pod_bookmark(r, false) {
        next = next_raw(&mut with).await;
    }
    assert_eq!(next, pod_bookmark(r2, false));
}

#[tokio::test]
async fn timeout_seconds_ends_the_stream_cleanly() {
    let sim = sim().await;
    let u = sim.url();
    let rv = sim.store().revision();
    // Written first, so that both streams have something to send at once.
    let p = create_pod(&u, "default", "p", "", json!({})).await;
    let cur = sim.store().revision();
    let mut w = watch(&format!(
        "{u}/api/v1/pods?watch=1&resourceVersion={rv}&timeoutSeconds=1&allowWatchBookmarks=true"
    ))
    .await;
    let mut list_watch = watch(&format!(
        "{u}/api/v1/namespaces/default/pods?watch=1&timeoutSeconds=1&allowWatchBookmarks=true"
    ))
    .await;
    assert_eq!(
        ev(&w.next_event(T).await),
        ev_tuple("ADDED", "p", rv_of(&p))
    );
    // No bookmark is due before a 1 s deadline (kube: deadline - 2 s); then a clean end.
    assert!(matches!(w.next_line(T).await, Next::End));
    // A watch-list ends the same way after its events and end marker.
    assert_eq!(
        ev(&list_watch.next_event(T).await),
        ev_tuple("ADDED", "p", rv_of(&p))
    );
    assert_eq!(next_raw(&mut list_watch).await, pod_bookmark(cur, true));
    assert!(matches!(list_watch.next_line(T).await, Next::End));
}

#[tokio::test]
async fn drop_watches_fault_aborts_connections() {
    let sim = sim().await;
    let u = sim.url();
    let rv = sim.store().revision();
    let mut pods_w = watch(&format!("{u}/api/v1/pods?watch=1&resourceVersion={rv}")).await;
    let mut cms_w = watch(&format!(
        "{u}/api/v1/configmaps?watch=1&resourceVersion={rv}&allowWatchBookmarks=true"
    ))
    .await;
    let p = create_pod(&u, "default", "p", "", json!({})).await;
    assert_eq!(
        ev(&pods_w.next_event(T).await),
        ev_tuple("ADDED", "p", rv_of(&p))
    );

    let (s, _, _) = request(
        Method::POST,
        &format!("{u}/sim/faults/drop-watches"),
        &[],
        "",
    )
    .await;
    assert_eq!(s, 200);
    assert!(matches!(pods_w.next_line(T).await, Next::Aborted));
    assert!(matches!(cms_w.next_line(T).await, Next::Aborted));
    poll_stats(&u, "no open watches", |v| {
        v["resources"]["pods"]["openWatches"] == 0
            && v["resources"]["configmaps"]["openWatches"] == 0
    })
    .await;

    // New watches (and everything else) work afterwards; the client resumes from its last RV.
    let q = create_pod(&u, "default", "q", "", json!({})).await;
    let mut again = watch(&format!(
        "{u}/api/v1/pods?watch=1&resourceVersion={}",
        rv_of(&p)
    ))
    .await;
    assert_eq!(
        ev(&again.next_event(T).await),
        ev_tuple("ADDED", "q", rv_of(&q))
    );
}

#[tokio::test]
async fn malformed_event_fault_corrupts_exactly_one_line() {
    let sim = sim().await;
    let u = sim.url();
    let rv = sim.store().revision();
    let mut w = watch(&format!("{u}/api/v1/pods?watch=1&resourceVersion={rv}")).await;
    let (s, _, _) = request(
        Method::POST,
        &format!("{u}/sim/faults/malformed-event"),
        &[],
        "",
    )
    .await;
    assert_eq!(s, 200);
    let a = create_pod(&u, "default", "a", "", json!({})).await;
    let bad = match w.next_line(T).await {
        Next::Line(l) => l,
        other => panic!("expected a line, got {other:?}"),
    };
    assert!(
        serde_json::from_slice::<Value>(&bad).is_err(),
        "{}",
        String::from_utf8_lossy(&bad)
    );
    // The real event follows, and the fault is one-shot.
    assert_eq!(
        ev(&w.next_event(T).await),
        ev_tuple("ADDED", "a", rv_of(&a))
    );
    let b = create_pod(&u, "default", "b", "", json!({})).await;
    assert_eq!(
        ev(&w.next_event(T).await),
        ev_tuple("ADDED", "b", rv_of(&b))
    );
}

#[tokio::test]
async fn expire_watches_fault_answers_the_next_watch_from_a_resource_version_with_410() {
    let sim = sim().await;
    let u = sim.url();
    let p = create_pod(&u, "default", "p", "", json!({})).await;
    let (s, _, _) = request(
        Method::POST,
        &format!("{u}/sim/faults/expire-watches?count=1"),
        &[],
        "",
    )
    .await;
    assert_eq!(s, 200);
    // A watch from a resourceVersion still in the history is refused as compacted, with kube's
    // ERROR event and a clean end; the store itself kept its history.
    let rv = rv_of(&p);
    let mut w = watch(&format!("{u}/api/v1/pods?watch=1&resourceVersion={rv}")).await;
    assert_eq!(w.status, 200);
    let e = w.next_event(T).await;
    assert_eq!(e["type"], "ERROR", "{e}");
    assert_eq!(e["object"]["code"], 410, "{e}");
    assert_eq!(e["object"]["reason"], "Expired", "{e}");
    assert!(matches!(w.next_line(T).await, Next::End));
    // One-shot: the same watch now starts, and sees what comes next.
    let mut again = watch(&format!("{u}/api/v1/pods?watch=1&resourceVersion={rv}")).await;
    let q = create_pod(&u, "default", "q", "", json!({})).await;
    assert_eq!(
        ev(&again.next_event(T).await),
        ev_tuple("ADDED", "q", rv_of(&q))
    );
    // faults/clear drops a pending one.
    sim.faults().expire_next_watches(1);
    let (s, _, _) = request(Method::POST, &format!("{u}/sim/faults/clear"), &[], "").await;
    assert_eq!(s, 200);
    let mut third = watch(&format!("{u}/api/v1/pods?watch=1&resourceVersion={rv}")).await;
    assert_eq!(
        ev(&third.next_event(T).await),
        ev_tuple("ADDED", "q", rv_of(&q))
    );
}

#[tokio::test]
async fn watch_lag_fault_is_set_over_http_and_loses_nothing() {
    let sim = sim().await;
    let u = sim.url();
    let rv = sim.store().revision();
    let mut w = watch(&format!("{u}/api/v1/pods?watch=1&resourceVersion={rv}")).await;
    let (s, _, _) = request(
        Method::POST,
        &format!("{u}/sim/faults/watch-lag?ms=150"),
        &[],
        "",
    )
    .await;
    assert_eq!(s, 200);
    assert_eq!(sim.faults().watch_lag(), Duration::from_millis(150));
    // A lagging stream still delivers every write, in order.
    let a = create_pod(&u, "default", "a", "", json!({})).await;
    let b = create_pod(&u, "default", "b", "", json!({})).await;
    let got: Vec<_> = [w.next_event(T).await, w.next_event(T).await]
        .iter()
        .map(ev)
        .collect();
    assert_eq!(
        got,
        [
            ev_tuple("ADDED", "a", rv_of(&a)),
            ev_tuple("ADDED", "b", rv_of(&b))
        ]
    );
    let (s, _, _) = request(
        Method::POST,
        &format!("{u}/sim/faults/watch-lag?ms=0"),
        &[],
        "",
    )
    .await;
    assert_eq!(s, 200);
    assert_eq!(sim.faults().watch_lag(), Duration::ZERO);
}

// ---------------------------------------------------------------------------------------------
// Table watches and counters
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn table_watch_has_column_definitions_only_on_the_first_event() {
    let sim = sim().await;
    let u = sim.url();
    let accept = [("accept", "application/json;as=Table;v=v1;g=meta.k8s.io")];
    let t0 = create_pod(&u, "default", "t0", "", json!({})).await;
    let rv = sim.store().revision();
    let mut w = watch_with(
        &format!("{u}/api/v1/namespaces/default/pods?watch=1&resourceVersion={rv}"),
        &accept,
    )
    .await;
    assert_eq!(w.status, 200);
    // A watch-list in Table form: the first initial event carries the headers.
    let mut wl = watch_with(
        &format!("{u}/api/v1/namespaces/default/pods?watch=1"),
        &accept,
    )
    .await;
    let t1 = create_pod(&u, "default", "t1", "", json!({})).await;
    let mut t1m = t1.clone();
    t1m["metadata"]["labels"] = json!({"x": "y"});
    let t1m = put(&format!("{u}/api/v1/namespaces/default/pods/t1"), &t1m).await;
    let t2 = create_pod(&u, "default", "t2", "", json!({})).await;

    let check_row = |e: &Value, ty: &str, name: &str, rv: u64, first: bool| {
        assert_eq!(e["type"], ty, "{e}");
        let t = &e["object"];
        assert_eq!(t["kind"], "Table", "{e}");
        assert_eq!(t["apiVersion"], "meta.k8s.io/v1", "{e}");
        if first {
            let cols = t["columnDefinitions"]
                .as_array()
                .expect("columns on the first event");
            assert_eq!(cols[0]["name"], "Name", "{e}");
            assert!(cols.len() >= 5, "{e}");
        } else {
            assert!(
                t.get("columnDefinitions").is_some_and(Value::is_null),
                "only the first event has column definitions: {e}"
            );
        }
        let rows = t["rows"].as_array().unwrap();
        assert_eq!(rows.len(), 1, "{e}");
        assert_eq!(rows[0]["cells"][0], name, "{e}");
        assert_eq!(rows[0]["object"]["kind"], "PartialObjectMetadata", "{e}");
        assert_eq!(rows[0]["object"]["metadata"]["name"], name, "{e}");
        assert_eq!(rv_of(&rows[0]["object"]), rv, "{e}");
    };
    check_row(&w.next_event(T).await, "ADDED", "t1", rv_of(&t1), true);
    check_row(&w.next_event(T).await, "MODIFIED", "t1", rv_of(&t1m), false);
    check_row(&w.next_event(T).await, "ADDED", "t2", rv_of(&t2), false);

    check_row(&wl.next_event(T).await, "ADDED", "t0", rv_of(&t0), true);
    let e = wl.next_event(T).await;
    assert_eq!(e["object"]["rows"][0]["cells"][0], "t1");
    assert!(e["object"]["columnDefinitions"].is_null());
}

#[tokio::test]
async fn stats_count_open_watches_and_list_requests() {
    let sim = sim().await;
    let u = sim.url();
    let before = list(&format!("{u}/sim/stats")).await;
    let n = |v: &Value, res: &str, k: &str| v["resources"][res][k].as_i64().unwrap();
    assert_eq!(n(&before, "pods", "openWatches"), 0);

    list(&format!("{u}/api/v1/pods")).await;
    list(&format!("{u}/api/v1/namespaces/default/pods?limit=1")).await;
    list(&format!("{u}/api/v1/configmaps?resourceVersion=0")).await;
    let rv = sim.store().revision();
    let w1 = watch(&format!("{u}/api/v1/pods?watch=1&resourceVersion={rv}")).await;
    let w2 = watch(&format!(
        "{u}/api/v1/watch/namespaces/default/pods?resourceVersion={rv}"
    ))
    .await;
    let w3 = watch(&format!(
        "{u}/api/v1/configmaps?watch=1&resourceVersion={rv}"
    ))
    .await;
    let short = watch(&format!(
        "{u}/api/v1/secrets?watch=1&resourceVersion={rv}&timeoutSeconds=1"
    ))
    .await;

    let v = poll_stats(&u, "3 pod/configmap watches", |v| {
        n(v, "pods", "openWatches") == 2 && n(v, "configmaps", "openWatches") == 1
    })
    .await;
    // Watches are not lists.
    assert_eq!(
        n(&v, "pods", "listRequests"),
        n(&before, "pods", "listRequests") + 2
    );
    assert_eq!(
        n(&v, "configmaps", "listRequests"),
        n(&before, "configmaps", "listRequests") + 1
    );
    assert_eq!(
        n(&v, "pods", "watchRequests"),
        n(&before, "pods", "watchRequests") + 2
    );
    assert_eq!(
        n(&v, "nodes", "listRequests"),
        n(&before, "nodes", "listRequests")
    );

    // Closing a stream (client side) or its timeout ends it.
    drop(w1);
    drop(short);
    let v = poll_stats(&u, "one pod watch closed", |v| {
        n(v, "pods", "openWatches") == 1 && n(v, "secrets", "openWatches") == 0
    })
    .await;
    assert_eq!(n(&v, "configmaps", "openWatches"), 1);
    assert_eq!(n(&v, "secrets", "watchRequests"), 1);
    drop((w2, w3));
    poll_stats(&u, "no open watches", |v| {
        n(v, "pods", "openWatches") == 0 && n(v, "configmaps", "openWatches") == 0
    })
    .await;
}
