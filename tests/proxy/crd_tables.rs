//! Tables of custom resources from watchmux's cache (issue 13 item 5): printed with their CRD's
//! `additionalPrinterColumns`, which watchmux reads from the upstream's CRD objects and keeps
//! current by watching them.
//!
//! The simulator serves `widgets` (printer columns: an integer, a string with a filter JSONPath,
//! a date and a priority-1 string) and `gadgets` (none: kube's Name and Age), and their CRDs.
//! watchmux's Table LISTs, GETs and watch events equal the simulator's byte for byte (answers are
//! compared when the simulator answered the same just before and just after ours, so no age cell
//! ticked in between; watch events, printed when they happen, with their date cells removed when
//! those differ), and the reads do not reach the simulator. Changing the CRD's columns upstream
//! changes watchmux's Tables; `kubectl get` prints the same through both.

use std::time::Duration;

use bytes::Bytes;
use http::{Method, StatusCode};
use kube_sim::Simulator;
use kube_sim::kinds::{CustomType, PrinterColumn};
use serde_json::{Value, json};
use watchmux::cache::ResourceCache;
use watchmux::config::ResourceSpec;

use crate::common::kubectl::{kubectl, run};
use crate::common::{
    Next, TestProxy, WatchStream, from_the_cache, get_accepting, sim_answer, upstream_reads,
    without_list_rv,
};

/// Upper bound for anything we wait on (a hang guard, never a timing assertion).
const T: Duration = Duration::from_secs(10);
/// What `kubectl get` and `kubectl get -w` send.
const KUBECTL: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
const READY: &str = r#".status.conditions[?(@.type=="Ready")].status"#;
const CRD_PATH: &str =
    "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.com";
/// The two custom resources, as the simulator's counters name them.
const CUSTOM: [&str; 2] = ["widgets.example.com", "gadgets.example.com"];

fn widget_type() -> CustomType {
    "example.com/v1/widgets=Widget"
        .parse::<CustomType>()
        .expect("a custom type")
        .with_column(PrinterColumn::new("Replicas", "integer", ".spec.replicas"))
        .with_column(PrinterColumn::new("Ready", "string", READY))
        .with_column(PrinterColumn::new("Started", "date", ".status.startTime"))
        .with_column(PrinterColumn::new("Size", "string", ".spec.size").priority(1))
}

fn create(sim: &Simulator, resource: &str, ns: Option<&str>, obj: Value) {
    let rt = sim.resource("example.com", "v1", resource).expect("served");
    sim.ops()
        .create(&rt, ns, obj, true)
        .unwrap_or_else(|s| panic!("create {resource}: {}", s.message));
}

/// The simulator with widgets (one of each kind of cell: found, filtered out, missing, invalid
/// date, an object printed as text) and gadgets; watchmux caching both, once it knows the
/// columns of both CRDs.
async fn env() -> (Simulator, TestProxy) {
    let sim = crate::common::sim_with(|c| {
        c.custom_types.push(widget_type());
        c.custom_types.push(
            "example.com/v1/gadgets=Gadget,cluster"
                .parse()
                .expect("a custom type"),
        );
    })
    .await;
    let ready =
        |s: &str| json!([{"type": "Synced", "status": "True"}, {"type": "Ready", "status": s}]);
    create(
        &sim,
        "widgets",
        Some("default"),
        json!({"metadata": {"name": "w1"}, "spec": {"replicas": 3, "size": "L"},
               "status": {"conditions": ready("True"), "startTime": "2026-01-01T00:00:00Z"}}),
    );
    create(
        &sim,
        "widgets",
        Some("default"),
        json!({"metadata": {"name": "w2"}, "spec": {"replicas": 1.5},
               "status": {"conditions": [{"type": "Synced", "status": "False"}]}}),
    );
    create(
        &sim,
        "widgets",
        Some("kube-system"),
        json!({"metadata": {"name": "w3"}, "spec": {"size": {"b": "<x>", "a": 1}},
               "status": {"conditions": ready("False"), "startTime": "yesterday"}}),
    );
    for g in ["g1", "g2"] {
        create(&sim, "gadgets", None, json!({"metadata": {"name": g}}));
    }
    let px = crate::common::proxy_for(&sim, |c| {
        for r in ["widgets", "gadgets"] {
            c.cache
                .resources
                .push(ResourceSpec::new("example.com", "v1", r));
        }
    })
    .await;
    wait_for(|| {
        ["widgets", "gadgets"]
            .iter()
            .all(|r| px.proxy.crds.printer("example.com", "v1", r).is_some())
    })
    .await;
    // The reflectors' watches are open: a reflector between its LIST and its WATCH (a moment
    // on a loaded machine) would count its WATCH among the reads the tests count.
    crate::common::reflectors_watching(&sim, &CUSTOM).await;
    (sim, px)
}

/// Waits (bounded) until `done`.
async fn wait_for(done: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + T;
    while !done() {
        assert!(tokio::time::Instant::now() < deadline, "timed out");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn cache(px: &TestProxy, resource: &str) -> std::sync::Arc<ResourceCache> {
    px.proxy
        .cache("example.com", "v1", resource)
        .expect("cache discovered")
}

/// watchmux's answer to `path` (from the cache) and the simulator's, taken when the simulator
/// answered the same just before and just after ours, with no write in between.
async fn ours_and_theirs(
    sim: &Simulator,
    px: &TestProxy,
    c: &ResourceCache,
    path: &str,
) -> (String, String) {
    for _ in 0..20 {
        let rev = sim.store().revision();
        let before = sim_answer(sim, path, KUBECTL).await;
        assert!(c.wait_rv(rev, T).await, "the cache did not reach {rev}");
        let ours = from_the_cache(sim, px, &CUSTOM, path, KUBECTL).await;
        let after = sim_answer(sim, path, KUBECTL).await;
        if before == after && sim.store().revision() == rev {
            return (without_list_rv(&ours), without_list_rv(&before));
        }
    }
    panic!("{path}: the simulator's answer never held still");
}

/// The same answer from both, byte for byte.
async fn assert_same(sim: &Simulator, px: &TestProxy, resource: &str, path: &str) -> Value {
    let (ours, theirs) = ours_and_theirs(sim, px, &cache(px, resource), path).await;
    assert_eq!(ours, theirs, "{path}");
    serde_json::from_str(&ours).expect("a Table")
}

fn names(table: &Value, key: &str) -> Vec<Value> {
    table["columnDefinitions"]
        .as_array()
        .expect("column definitions")
        .iter()
        .map(|c| c[key].clone())
        .collect()
}

#[tokio::test]
async fn crd_table_lists_and_gets_come_from_the_cache_as_the_simulator_prints_them() {
    let (sim, px) = env().await;
    for q in ["", "&includeObject=None", "&includeObject=Object"] {
        for path in [
            format!("/apis/example.com/v1/widgets?resourceVersion=0{q}"),
            format!("/apis/example.com/v1/namespaces/default/widgets?resourceVersion=0{q}"),
        ] {
            assert_same(&sim, &px, "widgets", &path).await;
        }
        assert_same(
            &sim,
            &px,
            "gadgets",
            &format!("/apis/example.com/v1/gadgets?resourceVersion=0{q}"),
        )
        .await;
    }
    // Every cell as kube prints it.
    let all = assert_same(
        &sim,
        &px,
        "widgets",
        "/apis/example.com/v1/widgets?resourceVersion=0",
    )
    .await;
    assert_eq!(
        names(&all, "name"),
        ["Name", "Replicas", "Ready", "Started", "Size"]
    );
    assert_eq!(
        names(&all, "type"),
        ["string", "integer", "string", "date", "string"]
    );
    assert_eq!(names(&all, "priority"), [0, 0, 0, 0, 1]);
    let cells: Vec<Value> = all["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .map(|r| r["cells"].clone())
        .collect();
    // Sorted by namespace and name: default/w1, default/w2, kube-system/w3.
    assert_eq!(
        cells[0].as_array().expect("cells")[..3],
        [json!("w1"), json!(3), json!("True")]
    );
    assert!(
        cells[0][3]
            .as_str()
            .is_some_and(|a| a.ends_with(['s', 'm', 'h', 'd', 'y']))
    );
    assert_eq!(cells[0][4], "L");
    assert_eq!(cells[1], json!(["w2", 1, null, null, null]));
    assert_eq!(
        cells[2],
        json!([
            "w3",
            null,
            "False",
            "<invalid>",
            r#"{"a":1,"b":"\u003cx\u003e"}"#
        ])
    );
    // No printer columns: kube's Name and Age.
    let gadgets = assert_same(
        &sim,
        &px,
        "gadgets",
        "/apis/example.com/v1/gadgets?resourceVersion=0",
    )
    .await;
    assert_eq!(names(&gadgets, "name"), ["Name", "Age"]);
    // An empty list prints `"rows":[]`, as kube's CRD convertor does.
    let empty = assert_same(
        &sim,
        &px,
        "widgets",
        "/apis/example.com/v1/namespaces/kube-public/widgets?resourceVersion=0",
    )
    .await;
    assert_eq!(empty["rows"], json!([]));
    // One object, by name.
    assert_same(
        &sim,
        &px,
        "widgets",
        "/apis/example.com/v1/namespaces/kube-system/widgets/w3?resourceVersion=0",
    )
    .await;
    assert_same(
        &sim,
        &px,
        "gadgets",
        "/apis/example.com/v1/gadgets/g2?resourceVersion=0&includeObject=Object",
    )
    .await;
}

/// One watch event line with its date cells (`dates`: their indexes) blanked.
fn without_dates(line: &[u8], dates: &[usize]) -> Value {
    let mut v: Value = serde_json::from_slice(line).expect("event JSON");
    if let Some(rows) = v["object"]["rows"].as_array_mut() {
        for row in rows {
            for &i in dates {
                if let Some(cell) = row["cells"].get_mut(i) {
                    *cell = Value::Null;
                }
            }
        }
    }
    v
}

async fn next_line(w: &mut WatchStream, what: &str) -> Bytes {
    match w.next_line(T).await {
        Next::Line(l) => l,
        other => panic!("{what}: expected an event, got {other:?}"),
    }
}

#[tokio::test]
async fn crd_table_watches_come_from_the_cache_as_the_simulator_prints_them() {
    let (sim, px) = env().await;
    let c = cache(&px, "widgets");
    assert!(c.wait_rv(sim.store().revision(), T).await);
    let q = format!(
        "/apis/example.com/v1/namespaces/default/widgets?watch=1&resourceVersion={}",
        c.rv()
    );
    let mut theirs =
        crate::common::watch_with(&format!("{}{q}", sim.url()), &[("accept", KUBECTL)]).await;
    let before = upstream_reads(&sim, &CUSTOM);
    let mut ours =
        crate::common::watch_with(&format!("{}{q}", px.url), &[("accept", KUBECTL)]).await;
    assert_eq!(ours.status, StatusCode::OK);
    let url = format!(
        "{}/apis/example.com/v1/namespaces/default/widgets",
        sim.url()
    );
    let json_ct = [("content-type", "application/json")];
    let (s, _, _) = crate::common::request(
        Method::POST,
        &url,
        &json_ct,
        r#"{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w4"},"spec":{"replicas":2,"size":"S"}}"#,
    )
    .await;
    assert_eq!(s, StatusCode::CREATED);
    let (s, _, _) = crate::common::request(
        Method::PATCH,
        &format!("{url}/w4"),
        &[("content-type", "application/merge-patch+json")],
        r#"{"spec":{"replicas":5}}"#,
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    let (s, _, _) = crate::common::request(Method::DELETE, &format!("{url}/w4"), &[], "").await;
    assert_eq!(s, StatusCode::OK);
    for (i, ty) in ["ADDED", "MODIFIED", "DELETED"].into_iter().enumerate() {
        let a = next_line(&mut ours, "watchmux watch").await;
        let b = next_line(&mut theirs, "simulator watch").await;
        let (va, vb) = (without_dates(&a, &[3]), without_dates(&b, &[3]));
        assert_eq!(va, vb, "event {i}");
        if serde_json::from_slice::<Value>(&a).ok() == serde_json::from_slice::<Value>(&b).ok() {
            assert_eq!(
                String::from_utf8_lossy(&a),
                String::from_utf8_lossy(&b),
                "event {i}"
            );
        }
        assert_eq!(va["type"], ty);
        assert_eq!(
            va["object"]["columnDefinitions"].is_array(),
            i == 0,
            "only the first event carries the column definitions"
        );
        let replicas = if i == 0 { 2 } else { 5 };
        assert_eq!(va["object"]["rows"][0]["cells"][1], replicas, "event {i}");
        assert_eq!(va["object"]["rows"][0]["cells"][4], "S", "event {i}");
    }
    // The simulator served the test's three writes, and no read of watchmux's.
    let (lists, others, watches) = before;
    assert_eq!(
        upstream_reads(&sim, &CUSTOM),
        (lists, others + 3, watches),
        "the watch was served from the cache"
    );
}

/// Replaces the printer columns of the widgets CRD in the simulator (`None`: none).
async fn set_widget_columns(sim: &Simulator, columns: Option<Value>) {
    let (s, crd) = get_accepting(&sim.url(), CRD_PATH, "application/json").await;
    assert_eq!(s, StatusCode::OK);
    let mut crd: Value = serde_json::from_slice(&crd).expect("a CRD");
    let v = &mut crd["spec"]["versions"][0];
    match columns {
        Some(c) => v["additionalPrinterColumns"] = c,
        None => {
            v.as_object_mut()
                .expect("a version")
                .remove("additionalPrinterColumns");
        }
    }
    let (s, _, b) = crate::common::request(
        Method::PUT,
        &format!("{}{CRD_PATH}", sim.url()),
        &[("content-type", "application/json")],
        &crd.to_string(),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{}", String::from_utf8_lossy(&b));
}

#[tokio::test]
async fn crd_column_changes_upstream_change_watchmux_tables() {
    let (sim, px) = env().await;
    let path = "/apis/example.com/v1/widgets?resourceVersion=0";
    let columns = |px: &TestProxy| {
        px.proxy
            .crds
            .printer("example.com", "v1", "widgets")
            .map(|p| p.column_definitions())
    };
    let old = columns(&px);
    set_widget_columns(
        &sim,
        Some(json!([
            {"name": "Size", "type": "string", "jsonPath": ".spec.size", "description": "How big"},
            {"name": "Replicas", "type": "number", "format": "int32", "jsonPath": ".spec.replicas"},
            {"name": "First", "type": "string", "jsonPath": ".status.conditions[0].type", "priority": 2},
        ])),
    )
    .await;
    wait_for(|| columns(&px) != old).await;
    let t = assert_same(&sim, &px, "widgets", path).await;
    assert_eq!(names(&t, "name"), ["Name", "Size", "Replicas", "First"]);
    assert_eq!(t["rows"][0]["cells"], json!(["w1", "L", 3, "Synced"]));
    assert_eq!(t["rows"][1]["cells"], json!(["w2", null, 1.5, "Synced"]));
    assert_same(
        &sim,
        &px,
        "widgets",
        "/apis/example.com/v1/namespaces/default/widgets/w2?resourceVersion=0",
    )
    .await;
    // No columns any more: kube's Name and Age.
    let old = columns(&px);
    set_widget_columns(&sim, None).await;
    wait_for(|| columns(&px) != old).await;
    let t = assert_same(&sim, &px, "widgets", path).await;
    assert_eq!(names(&t, "name"), ["Name", "Age"]);
    // A column beyond what watchmux evaluates (recursive descent): the upstream prints them.
    set_widget_columns(
        &sim,
        Some(json!([{"name": "Any", "type": "string", "jsonPath": ".spec..size"}])),
    )
    .await;
    wait_for(|| columns(&px).is_none()).await;
    let before = upstream_reads(&sim, &CUSTOM);
    let (s, _) = get_accepting(&px.url, path, KUBECTL).await;
    assert_eq!(s, StatusCode::OK);
    assert_ne!(
        upstream_reads(&sim, &CUSTOM),
        before,
        "the Table passed through"
    );
}

/// `kubectl args` against `server`: its output, which must be a success.
async fn kubectl_out(server: &str, home: &tempfile::TempDir, args: &[&str]) -> String {
    let mut c = kubectl(server, home);
    c.args(args);
    let (ok, out, err) = run(c).await;
    assert!(ok, "kubectl {args:?} via {server} failed: {err}");
    out
}

#[tokio::test]
async fn kubectl_get_widgets_prints_the_same_through_watchmux() {
    let (sim, px) = env().await;
    let home = tempfile::tempdir().expect("tempdir");
    for args in [
        &["get", "widgets", "-A"][..],
        &["get", "widgets", "-n", "default", "-o", "wide"][..],
        &["get", "widget", "w3", "-n", "kube-system"][..],
        &["get", "gadgets"][..],
    ] {
        let mut same = false;
        for _ in 0..10 {
            let before = kubectl_out(&sim.url(), &home, args).await;
            let ours = kubectl_out(&px.url, &home, args).await;
            let after = kubectl_out(&sim.url(), &home, args).await;
            if before == after {
                assert_eq!(ours, before, "kubectl {args:?}");
                same = true;
                break;
            }
        }
        assert!(
            same,
            "kubectl {args:?}: the simulator's output never held still"
        );
    }
    // The priority-1 column shows with `-o wide` only.
    let narrow = kubectl_out(&px.url, &home, &["get", "widgets", "-n", "default"]).await;
    let wide = kubectl_out(
        &px.url,
        &home,
        &["get", "widgets", "-n", "default", "-o", "wide"],
    )
    .await;
    assert!(
        !narrow.lines().next().unwrap_or("").contains("SIZE"),
        "{narrow}"
    );
    assert!(wide.lines().next().unwrap_or("").contains("SIZE"), "{wide}");
    assert!(
        narrow.lines().next().unwrap_or("").contains("READY"),
        "{narrow}"
    );
}
