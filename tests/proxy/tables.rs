//! Tables and metadata-only answers from watchmux's cache (issue 13): what `kubectl get`
//! (`as=Table`) and metadata informers (`as=PartialObjectMetadata(List)`) receive.
//!
//! For every kind the test proxy caches, watchmux's answer equals the simulator's own answer to
//! the same request byte for byte, with two allowances: a list's own resourceVersion (the
//! cache's is its resource's, the simulator's its store's), and time — answers are compared only
//! when the simulator answered the same just before and just after ours, so no Age cell ticked in
//! between; watch events, printed when they happen, are compared byte for byte when their Age
//! cells agree and cell for cell otherwise. Reads the cache answers must not reach the simulator.
//!
//! The first tests print the cache's objects with `downstream::table` directly (the printing);
//! the last ones go through watchmux's router (the plumbing).

use std::time::Duration;

use bytes::Bytes;
use http::StatusCode;
use http_body_util::BodyExt;
use kube_sim::Simulator;
use kube_sim::fleet::FleetSpec;
use kube_wire::negotiate::Target;
use kube_wire::table::{IncludeObject, TablePrinter};
use serde_json::{Value, json};
use watchmux::cache::ResourceCache;
use watchmux::downstream::form::{self, Form};
use watchmux::downstream::table::{self, ListMeta};

use crate::common::{
    Next, TestProxy, WatchStream, from_the_cache, get_accepting, sim_answer, upstream_reads,
    without_list_rv,
};

/// Upper bound for anything we wait on (a hang guard, never a timing assertion).
const T: Duration = Duration::from_secs(10);
/// The resources the test proxy caches (all cluster-scoped or core namespaced kinds).
const CACHED: [&str; 4] = ["pods", "nodes", "namespaces", "configmaps"];
/// What `kubectl get` and `kubectl get -w` send.
const KUBECTL: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
/// What a metadata informer's LIST sends (its JSON fallback form).
const METADATA_LIST: &str =
    "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
/// What a metadata informer's WATCH and GET send.
const METADATA: &str =
    "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json";

fn table_form(include_object: IncludeObject) -> Form {
    Form::Table { include_object }
}

/// The LIST forms compared: `Accept`, query, and the form watchmux negotiates for them.
fn list_forms() -> [(&'static str, &'static str, Form); 4] {
    [
        (KUBECTL, "", table_form(IncludeObject::Metadata)),
        (
            KUBECTL,
            "includeObject=None",
            table_form(IncludeObject::None),
        ),
        (
            KUBECTL,
            "includeObject=Object",
            table_form(IncludeObject::Object),
        ),
        (METADATA_LIST, "", Form::Metadata),
    ]
}

/// A simulator with a small fleet (nodes with status, pods in assorted states, namespaces) and
/// config maps with data, binary data, HTML characters or nothing; watchmux in front of it.
async fn env() -> (Simulator, TestProxy) {
    let sim = fleet(FleetSpec {
        nodes: 3,
        pods: 24,
        namespaces: 2,
        seed: 13,
    })
    .await;
    create_configmap(
        &sim,
        "fleet-0",
        json!({"metadata": {"name": "html", "labels": {"app": "<web>"}},
               "data": {"k": "<v> & more", "l": "x"}, "binaryData": {"b": "AA=="}}),
    );
    create_configmap(&sim, "fleet-1", json!({"metadata": {"name": "empty"}}));
    let px = crate::common::proxy_for(&sim, |_| {}).await;
    (sim, px)
}

/// A simulator of `spec`'s fleet.
async fn fleet(spec: FleetSpec) -> Simulator {
    crate::common::sim_with(|c| c.fleet = Some(spec)).await
}

fn create_configmap(sim: &Simulator, ns: &str, obj: Value) {
    let rt = sim.resource("", "v1", "configmaps").expect("served");
    sim.ops()
        .create(&rt, Some(ns), obj, false)
        .unwrap_or_else(|s| panic!("create configmap: {}", s.message));
}

fn cache(px: &TestProxy, resource: &str) -> std::sync::Arc<ResourceCache> {
    px.proxy
        .cache("", "v1", resource)
        .expect("cache discovered")
}

async fn body_of(resp: http::Response<kube_wire::response::Body>) -> Bytes {
    assert_eq!(resp.status(), StatusCode::OK);
    resp.into_body().collect().await.expect("body").to_bytes()
}

/// Calls `ours` (watchmux's answer) between two identical answers of the simulator to
/// `path_query` with no write in between, the cache having reached the simulator's revision,
/// and returns both answers.
async fn with_sim_still<F, Fut>(
    sim: &Simulator,
    cache: &ResourceCache,
    path_query: &str,
    accept: &str,
    mut ours: F,
) -> (Bytes, Bytes)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Bytes>,
{
    for _ in 0..20 {
        let rev = sim.store().revision();
        let before = sim_answer(sim, path_query, accept).await;
        assert!(
            cache.wait_rv(rev, T).await,
            "the cache did not reach revision {rev}"
        );
        let answer = ours().await;
        let after = sim_answer(sim, path_query, accept).await;
        if before == after && sim.store().revision() == rev {
            return (answer, before);
        }
    }
    panic!("{path_query}: the simulator's answer never held still");
}

// ---------------------------------------------------------------------------------------------
// The printing, on the cache's objects
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn cached_lists_print_as_the_simulator() {
    let (sim, px) = env().await;
    for r in CACHED {
        let c = cache(&px, r);
        for (accept, query, want) in list_forms() {
            let got = form::negotiate(Some(accept), Some(query), Target::List, true, false);
            assert_eq!(got, Some(want), "{accept} {query}");
            assert!(watchmux::downstream::form::renders(&want, &c.info), "{r}");
            let path = format!("/api/v1/{r}?{query}");
            let (ours, theirs) = with_sim_still(&sim, &c, &path, accept, || async {
                let snap = c.snapshot();
                let meta = ListMeta {
                    resource_version: snap.rv,
                    ..Default::default()
                };
                let items = snap.objects.values().map(|o| &**o);
                body_of(table::list_response(
                    &c.info,
                    &TablePrinter::for_kind(&c.info.group, &c.info.kind),
                    items,
                    &meta,
                    &want,
                    false,
                ))
                .await
            })
            .await;
            assert_eq!(
                without_list_rv(&ours),
                without_list_rv(&theirs),
                "{r}: {accept} {query}"
            );
        }
    }
}

#[tokio::test]
async fn large_table_lists_are_gzipped_when_accepted() {
    let (_sim, px) = env().await;
    let c = cache(&px, "pods");
    let snap = c.snapshot();
    let meta = ListMeta {
        resource_version: snap.rv,
        continue_token: Some("tok".into()),
        remaining_item_count: Some(3),
        shard_info: None,
    };
    let form = table_form(IncludeObject::Object);
    let items = || snap.objects.values().map(|o| &**o);
    let plain = body_of(table::list_response(
        &c.info,
        &TablePrinter::for_kind(&c.info.group, &c.info.kind),
        items(),
        &meta,
        &form,
        false,
    ))
    .await;
    let v: Value = serde_json::from_slice(&plain).expect("a Table");
    assert_eq!(
        v["metadata"],
        json!({"resourceVersion": snap.rv.to_string(), "continue": "tok", "remainingItemCount": 3})
    );
    assert_eq!(v["rows"].as_array().map(Vec::len), Some(snap.objects.len()));
    // Large enough only when repeated: gzip applies above kube's 128 KiB.
    let many: Vec<_> = (0..40).flat_map(|_| items()).collect();
    let resp = table::list_response(
        &c.info,
        &TablePrinter::for_kind(&c.info.group, &c.info.kind),
        many.iter().copied(),
        &meta,
        &form,
        true,
    );
    assert_eq!(resp.headers()[http::header::CONTENT_ENCODING], "gzip");
    let gz = body_of(resp).await;
    let mut unzipped = Vec::new();
    std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&gz[..]), &mut unzipped)
        .expect("gzip");
    let v: Value = serde_json::from_slice(&unzipped).expect("a Table");
    assert_eq!(
        v["rows"].as_array().map(Vec::len),
        Some(40 * snap.objects.len())
    );
}

/// A Table or PartialObjectMetadataList LIST of more than a MiB of stored pods is printed part by
/// part on blocking threads (`downstream::parts`): each form is the simulator's (byte for byte
/// when no Age cell ticked meanwhile), and gzip follows kube's threshold on the body's length,
/// not on the objects' size: rows without objects make a body under 128 KiB, sent as it is.
#[tokio::test]
async fn large_table_and_metadata_lists_made_in_parts_print_as_the_simulator() {
    let sim = fleet(FleetSpec {
        nodes: 8,
        pods: 400,
        namespaces: 3,
        seed: 17,
    })
    .await;
    let px = crate::common::proxy_for(&sim, |_| {}).await;
    let c = cache(&px, "pods");
    let stored: usize = c
        .snapshot()
        .objects
        .values()
        .map(|o| o.stored().len())
        .sum();
    assert!(
        stored > 1 << 20,
        "precondition: {stored} bytes stored, made in parts"
    );
    for (accept, query, gzipped) in [
        (KUBECTL, "", true),
        (KUBECTL, "includeObject=Object", true),
        (KUBECTL, "includeObject=None", false),
        (METADATA_LIST, "", true),
    ] {
        let path = format!("/api/v1/pods?resourceVersion=0&{query}");
        let ask = |encoding: &'static str| {
            let url = format!("{}{path}", px.url);
            async move {
                let (code, h, body) = crate::common::request(
                    http::Method::GET,
                    &url,
                    &[("accept", accept), ("accept-encoding", encoding)],
                    "",
                )
                .await;
                assert_eq!(code, StatusCode::OK);
                let compressed = h.get("content-encoding").is_some();
                let mut plain = Vec::new();
                if compressed {
                    std::io::Read::read_to_end(
                        &mut flate2::read::GzDecoder::new(&body[..]),
                        &mut plain,
                    )
                    .expect("one gzip member");
                } else {
                    plain = body.to_vec();
                }
                (Bytes::from(plain), compressed)
            }
        };
        for (encoding, compress) in [("identity", false), ("gzip", gzipped)] {
            // The pods are seconds old, so their Age cells tick every second, and three Tables of
            // 400 pods can take longer than that on a busy machine: the simulator answers just
            // before ours (no write in between), the answers are compared with the Age cells
            // blanked, and byte for byte when no Age cell ticked between them.
            let rev = sim.store().revision();
            assert!(c.wait_rv(rev, T).await, "the cache reached revision {rev}");
            let theirs = sim_answer(&sim, &path, accept).await;
            let (ours, compressed) = ask(encoding).await;
            assert_eq!(sim.store().revision(), rev, "no write meanwhile");
            assert_eq!(
                compressed,
                compress,
                "{accept} {query} {encoding}: {} bytes",
                ours.len()
            );
            assert_same_list(&ours, &theirs, &format!("{accept} {query} {encoding}"));
        }
    }
}

#[tokio::test]
async fn cached_objects_print_as_the_simulator() {
    let (sim, px) = env().await;
    let forms = [
        ("application/json", "", Form::Json),
        (KUBECTL, "", table_form(IncludeObject::Metadata)),
        (
            KUBECTL,
            "includeObject=Object",
            table_form(IncludeObject::Object),
        ),
        (METADATA, "", Form::Metadata),
    ];
    for r in CACHED {
        let c = cache(&px, r);
        let snap = c.snapshot();
        let obj = snap
            .objects
            .values()
            .next_back()
            .expect("an object")
            .clone();
        let path = match obj.rec.namespace.as_str() {
            "" => format!("/api/v1/{r}/{}", obj.rec.name),
            ns => format!("/api/v1/namespaces/{ns}/{r}/{}", obj.rec.name),
        };
        for (accept, query, want) in forms {
            let got = form::negotiate(Some(accept), Some(query), Target::Object, true, false);
            assert_eq!(got, Some(want), "{accept} {query}");
            let path = format!("{path}?{query}");
            let (ours, theirs) = with_sim_still(&sim, &c, &path, accept, || async {
                body_of(table::object_response(
                    &c.info,
                    &TablePrinter::for_kind(&c.info.group, &c.info.kind),
                    &obj,
                    &want,
                ))
                .await
            })
            .await;
            assert_eq!(
                String::from_utf8_lossy(&ours),
                String::from_utf8_lossy(&theirs),
                "{path} {accept}"
            );
        }
    }
}

/// Index of the Age column of `kind`'s Table, if it has one.
fn age_column(kind: &str) -> Option<usize> {
    kube_wire::table::column_definitions("", kind)
        .as_array()?
        .iter()
        .position(|c| c["name"] == "Age")
}

/// One watch event line, parsed, with the Age cells of its Table rows blanked.
fn without_ages(line: &[u8], kind: &str) -> Value {
    let mut v: Value = serde_json::from_slice(line).expect("event JSON");
    blank_ages(&mut v["object"], kind);
    v
}

/// Blanks the Age cells of a Table's rows.
fn blank_ages(table: &mut Value, kind: &str) {
    if let (Some(i), Some(rows)) = (age_column(kind), table["rows"].as_array_mut()) {
        for row in rows {
            if let Some(cell) = row["cells"].get_mut(i) {
                *cell = Value::Null;
            }
        }
    }
}

/// Asserts two pod list answers are equal but for the list's resourceVersion: byte for byte
/// when their Age cells agree, cell for cell otherwise. Bodies of megabytes: they are not
/// printed.
fn assert_same_list(ours: &[u8], theirs: &[u8], what: &str) {
    let parse = |l: &[u8], blank: bool| {
        let mut v: Value = serde_json::from_slice(l).expect("list JSON");
        v["metadata"]["resourceVersion"] = Value::Null;
        if blank {
            blank_ages(&mut v, "Pod");
        }
        v
    };
    assert!(
        parse(ours, true) == parse(theirs, true),
        "{what}: not the simulator's"
    );
    if parse(ours, false) == parse(theirs, false) {
        assert!(
            without_list_rv(ours) == without_list_rv(theirs),
            "{what}: not the simulator's bytes"
        );
    }
}

/// Asserts two watch event lines are equal: byte for byte when their Age cells agree, cell for
/// cell otherwise.
fn assert_same_event(ours: &[u8], theirs: &[u8], kind: &str, what: &str) {
    let (a, b) = (without_ages(ours, kind), without_ages(theirs, kind));
    assert_eq!(a, b, "{what}");
    let full = |l: &[u8]| serde_json::from_slice::<Value>(l).expect("event JSON");
    if full(ours) == full(theirs) {
        assert_eq!(
            String::from_utf8_lossy(ours),
            String::from_utf8_lossy(theirs),
            "{what}"
        );
    }
}

async fn next_line(w: &mut WatchStream, what: &str) -> Bytes {
    match w.next_line(T).await {
        Next::Line(l) => l,
        other => panic!("{what}: expected an event, got {other:?}"),
    }
}

/// Writes a config map's life (ADDED, MODIFIED, DELETED) and a change of another one.
fn config_map_life(sim: &Simulator) {
    let rt = sim.resource("", "v1", "configmaps").expect("served");
    create_configmap(
        sim,
        "fleet-0",
        json!({"metadata": {"name": "w1"}, "data": {"a": "1"}}),
    );
    sim.ops()
        .modify(&rt, Some("fleet-0"), "w1", |v| {
            v["data"]["b"] = json!("<2>");
        })
        .expect("modify");
    sim.ops()
        .modify(&rt, Some("fleet-1"), "empty", |v| {
            v["metadata"]["labels"] = json!({"touched": "yes"});
        })
        .expect("modify");
    sim.ops()
        .delete(&rt, Some("fleet-0"), "w1", &Default::default())
        .expect("delete");
}

#[tokio::test]
async fn watch_frames_print_as_the_simulator() {
    let (sim, px) = env().await;
    let c = cache(&px, "configmaps");
    let rv = sim.store().revision();
    let watches = [
        (KUBECTL, "", table_form(IncludeObject::Metadata)),
        (
            KUBECTL,
            "&includeObject=None",
            table_form(IncludeObject::None),
        ),
        (
            KUBECTL,
            "&includeObject=Object",
            table_form(IncludeObject::Object),
        ),
        (METADATA, "", Form::Metadata),
    ];
    let mut streams = Vec::new();
    for (accept, query, want) in watches {
        let q = format!("watch=1&resourceVersion={rv}{query}");
        assert_eq!(
            form::negotiate(Some(accept), Some(&q), Target::Object, true, true),
            Some(want)
        );
        let url = format!("{}/api/v1/configmaps?{q}", sim.url());
        let w = crate::common::watch_with(&url, &[("accept", accept)]).await;
        assert_eq!(w.status, StatusCode::OK);
        streams.push((w, want));
    }
    config_map_life(&sim);
    assert!(c.wait_rv(sim.store().revision(), T).await);
    let events = c.events_after(rv, 16).expect("in the log").events;
    assert_eq!(events.len(), 4);
    for (w, form) in &mut streams {
        let mut headers_sent = !matches!(form, Form::Table { .. });
        for (i, ev) in events.iter().enumerate() {
            let theirs = next_line(w, "simulator watch").await;
            let emitted = ev.ty;
            let now = table::now_unix();
            let printer = TablePrinter::for_kind(&c.info.group, &c.info.kind);
            // A watcher's first Table event carries the column definitions, in a frame of its
            // own; the others are shared.
            let ours = if headers_sent {
                ev.frame_in(&c.info, emitted, form, |body| {
                    table::event_frame(&c.info, &printer, emitted, body, form, true, now)
                })
            } else {
                headers_sent = true;
                table::event_frame(
                    &c.info,
                    &printer,
                    emitted,
                    &ev.emitted_object(emitted),
                    form,
                    false,
                    now,
                )
            };
            assert_eq!(ours.last(), Some(&b'\n'));
            assert_same_event(
                &ours[..ours.len() - 1],
                &theirs,
                "ConfigMap",
                &format!("{form:?} event {i}"),
            );
        }
    }
    // Shared frames are encoded once per form.
    let f = table_form(IncludeObject::None);
    let a = events[1].frame_in(&c.info, events[1].ty, &f, |_| Bytes::from_static(b"x"));
    let b = events[1].frame_in(&c.info, events[1].ty, &f, |_| Bytes::from_static(b"y"));
    assert_eq!(a, b);
    assert_ne!(&a[..], b"x", "already encoded by the loop above");
}

#[tokio::test]
async fn bookmark_frames_print_as_the_simulator() {
    let (sim, px) = env().await;
    let c = cache(&px, "pods");
    // A watch-list of an empty selection: no events, then the initial-events-end bookmark.
    let q = "watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&labelSelector=none%3Dnone";
    for (accept, want) in [
        (KUBECTL, table_form(IncludeObject::Metadata)),
        (METADATA, Form::Metadata),
        ("application/json", Form::Json),
    ] {
        let url = format!("{}/api/v1/pods?{q}", sim.url());
        let mut w = crate::common::watch_with(&url, &[("accept", accept)]).await;
        let theirs = next_line(&mut w, "simulator bookmark").await;
        let v: Value = serde_json::from_slice(&theirs).expect("JSON");
        assert_eq!(
            v["type"],
            "BOOKMARK",
            "{}",
            String::from_utf8_lossy(&theirs)
        );
        let rv: u64 = v["object"]["metadata"]["resourceVersion"]
            .as_str()
            .expect("rv")
            .parse()
            .expect("numeric rv");
        let ours = table::bookmark_frame(&c.info, rv, true, &want);
        assert_eq!(
            String::from_utf8_lossy(&ours[..ours.len() - 1]),
            String::from_utf8_lossy(&theirs),
            "{want:?}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Through watchmux
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn tables_and_metadata_through_watchmux_do_not_reach_the_simulator() {
    let (sim, px) = env().await;
    for r in CACHED {
        let c = cache(&px, r);
        for (accept, query, _) in list_forms() {
            // resourceVersion=0: served from the cache as it is, without a freshness check.
            let path = format!("/api/v1/{r}?resourceVersion=0&{query}");
            let (ours, theirs) = with_sim_still(&sim, &c, &path, accept, || {
                from_the_cache(&sim, &px, &CACHED, &path, accept)
            })
            .await;
            assert_eq!(
                without_list_rv(&ours),
                without_list_rv(&theirs),
                "{path} {accept}"
            );
        }
        // One object, by name.
        let snap = c.snapshot();
        let obj = snap.objects.values().next().expect("an object").clone();
        let path = match obj.rec.namespace.as_str() {
            "" => format!("/api/v1/{r}/{}?resourceVersion=0", obj.rec.name),
            ns => format!(
                "/api/v1/namespaces/{ns}/{r}/{}?resourceVersion=0",
                obj.rec.name
            ),
        };
        for accept in [KUBECTL, METADATA] {
            let (ours, theirs) = with_sim_still(&sim, &c, &path, accept, || {
                from_the_cache(&sim, &px, &CACHED, &path, accept)
            })
            .await;
            assert_eq!(
                String::from_utf8_lossy(&ours),
                String::from_utf8_lossy(&theirs),
                "{path} {accept}"
            );
        }
    }
}

#[tokio::test]
async fn kubectl_get_watch_through_watchmux_matches_the_simulator() {
    let (sim, px) = env().await;
    let c = cache(&px, "configmaps");
    assert!(c.wait_rv(sim.store().revision(), T).await);
    // Every cached kind's reflector past its LIST and watching: one whose WATCH came after the
    // count below would look like a read this watch caused.
    crate::common::reflectors_watching(&sim, &CACHED).await;
    // `kubectl get -w`: a Table LIST, then a Table watch from its resourceVersion.
    let (s, list) = get_accepting(&px.url, "/api/v1/configmaps?resourceVersion=0", KUBECTL).await;
    assert_eq!(s, StatusCode::OK);
    let list: Value = serde_json::from_slice(&list).expect("a Table");
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .expect("list rv")
        .to_string();
    let q = format!("/api/v1/configmaps?watch=1&resourceVersion={rv}");
    let mut theirs =
        crate::common::watch_with(&format!("{}{q}", sim.url()), &[("accept", KUBECTL)]).await;
    let before = upstream_reads(&sim, &CACHED);
    let mut ours =
        crate::common::watch_with(&format!("{}{q}", px.url), &[("accept", KUBECTL)]).await;
    assert_eq!(ours.status, StatusCode::OK);
    assert_eq!(
        ours.headers.get("content-type"),
        theirs.headers.get("content-type")
    );
    config_map_life(&sim);
    for i in 0..4 {
        let a = next_line(&mut ours, "watchmux watch").await;
        let b = next_line(&mut theirs, "simulator watch").await;
        assert_same_event(&a, &b, "ConfigMap", &format!("event {i}"));
        let v: Value = serde_json::from_slice(&a).expect("event");
        assert_eq!(
            v["object"]["columnDefinitions"].is_array(),
            i == 0,
            "only the first event carries the column definitions"
        );
    }
    assert_eq!(
        upstream_reads(&sim, &CACHED),
        before,
        "the watch was served from the cache"
    );
}
