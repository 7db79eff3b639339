//! Every built-in kind the upstream serves with list and watch — found by walking its discovery,
//! as a client would — is cached on demand and served from the cache in every representation a
//! client asks for: JSON, protobuf, Table and PartialObjectMetadata (in JSON and protobuf), for
//! LIST, GET, WATCH and watch-list, each answer equal to the simulator's and none passed
//! through (`watchmux_reads_total{source="pass_through"}` does not move after a kind's first
//! read started its cache).
//!
//! Tables are compared with their `Age` cells blanked: both servers print the age at the moment
//! they answer, and the two moments may fall in different seconds.

use std::collections::BTreeSet;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, StatusCode};
use serde_json::{Value, json};

use crate::common::*;
use kube_sim::Simulator;
use watchmux::config::{CacheMode, KindPattern};

/// Upper bound for anything waited on (a hang guard, never a timing assertion).
const T: Duration = Duration::from_secs(10);

/// The representations, as the `Accept` headers of the clients that read them, for a LIST or
/// WATCH and for a GET: JSON (kubectl `-o json`, the Python client), protobuf (kubelets,
/// controllers), a Table (`kubectl get`), metadata in JSON and in protobuf (client-go's metadata
/// client: the List form for a LIST, the object form for a GET and a WATCH; kube refuses the
/// other).
const FORMS: [(&str, &str, &str); 5] = [
    ("JSON", "application/json", "application/json"),
    (
        "protobuf",
        "application/vnd.kubernetes.protobuf,application/json",
        "application/vnd.kubernetes.protobuf,application/json",
    ),
    (
        "Table",
        "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
        "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
    ),
    (
        "metadata",
        "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json",
        "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json",
    ),
    (
        "metadata in protobuf",
        "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json",
        "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json",
    ),
];

/// A built-in resource the upstream serves with list and watch, as its discovery says.
#[derive(Debug, Clone)]
struct Served {
    group: String,
    version: String,
    resource: String,
    kind: String,
    namespaced: bool,
}

impl Served {
    fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The collection's path (in namespace `default` when namespaced).
    fn collection(&self) -> String {
        let root = if self.group.is_empty() {
            format!("/api/{}", self.version)
        } else {
            format!("/apis/{}/{}", self.group, self.version)
        };
        if self.namespaced {
            format!("{root}/namespaces/default/{}", self.resource)
        } else {
            format!("{root}/{}", self.resource)
        }
    }

    /// watchmux's `resource` metrics label.
    fn label(&self) -> String {
        kube_wire::status::group_resource(&self.group, &self.resource)
    }
}

/// The built-in resources with `list` and `watch` in the simulator's discovery (legacy
/// documents: `/api/v1`, then `/apis` and each group version's resource list).
async fn discover(sim: &Simulator) -> Vec<Served> {
    let mut gvs = vec![(String::new(), "v1".to_string())];
    let (code, apis) = get_json(&format!("{}/apis", sim.url())).await;
    assert_eq!(code, StatusCode::OK, "{apis}");
    for g in apis["groups"].as_array().expect("groups") {
        let group = g["name"].as_str().unwrap().to_string();
        for v in g["versions"].as_array().expect("versions") {
            gvs.push((group.clone(), v["version"].as_str().unwrap().to_string()));
        }
    }
    let mut out = Vec::new();
    for (group, version) in gvs {
        if !kube_wire::selector::selectable::is_builtin_group(&group) {
            continue;
        }
        let path = if group.is_empty() {
            format!("/api/{version}")
        } else {
            format!("/apis/{group}/{version}")
        };
        let (code, list) = get_json(&format!("{}{path}", sim.url())).await;
        assert_eq!(code, StatusCode::OK, "{path}: {list}");
        for r in list["resources"].as_array().expect("resources") {
            let name = r["name"].as_str().unwrap();
            let verbs: BTreeSet<&str> = r["verbs"]
                .as_array()
                .map(|v| v.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            if name.contains('/') || !verbs.contains("list") || !verbs.contains("watch") {
                continue;
            }
            out.push(Served {
                group: group.clone(),
                version: version.clone(),
                resource: name.to_string(),
                kind: r["kind"].as_str().unwrap().to_string(),
                namespaced: r["namespaced"].as_bool().unwrap(),
            });
        }
    }
    out
}

/// `watchmux_reads_total` of `label` passed through.
fn passed_through(p: &TestProxy, label: &str) -> f64 {
    let res = format!("resource=\"{label}\"");
    p.proxy
        .metrics
        .render()
        .lines()
        .filter(|l| {
            l.starts_with("watchmux_reads_total{")
                && l.contains(&res)
                && l.contains("source=\"pass_through\"")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// A JSON body with the cells of every `Age` column blanked (Tables and Table watch events);
/// any other body as it is.
fn comparable(form: &str, body: &[u8]) -> Bytes {
    if form != "Table" {
        return Bytes::copy_from_slice(body);
    }
    let Ok(mut v) = serde_json::from_slice::<Value>(body) else {
        return Bytes::copy_from_slice(body);
    };
    let table = if v.get("object").is_some() {
        &mut v["object"]
    } else {
        &mut v
    };
    let ages: Vec<usize> = table["columnDefinitions"]
        .as_array()
        .map(|cols| {
            cols.iter()
                .enumerate()
                .filter(|(_, c)| c["name"] == "Age")
                .map(|(i, _)| i)
                .collect()
        })
        .unwrap_or_default();
    if let Some(rows) = table["rows"].as_array_mut() {
        for row in rows {
            for &i in &ages {
                if let Some(cell) = row["cells"].get_mut(i) {
                    *cell = Value::Null;
                }
            }
        }
    }
    Bytes::from(serde_json::to_vec(&v).unwrap())
}

/// The next event of a watch: a protobuf frame or a JSON line.
async fn next(w: &mut WatchStream, form: &str) -> Bytes {
    if form.contains("protobuf") {
        w.next_frame(T).await.expect("a protobuf frame")
    } else {
        match w.next_line(T).await {
            Next::Line(l) => l,
            other => panic!("a JSON event, not {other:?}"),
        }
    }
}

/// The realistic object of `s`'s kind that kube-wire's protobuf tests use (its fixture), as a
/// client would send it: without the fields the server sets (uid, resourceVersion,
/// creationTimestamp, generation, managedFields), in namespace `default` when namespaced.
fn fixture(s: &Served) -> Value {
    let file = match (s.group.as_str(), s.kind.as_str(), s.version.as_str()) {
        ("apiextensions.k8s.io", "CustomResourceDefinition", _) => "crd".to_string(),
        ("events.k8s.io", "Event", _) => "events-event".to_string(),
        ("autoscaling", "HorizontalPodAutoscaler", v) => format!("horizontalpodautoscaler-{v}"),
        (_, kind, _) => kind.to_lowercase(),
    };
    let path = format!(
        "{}/crates/kube-wire/src/proto/testdata/{file}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}/{}: no fixture {path}: {e}", s.group, s.kind));
    let mut obj: Value = serde_json::from_str(&text).expect("a JSON fixture");
    let meta = obj["metadata"].as_object_mut().expect("metadata");
    meta.retain(|k, _| matches!(k.as_str(), "name" | "labels" | "annotations"));
    if s.namespaced {
        meta.insert("namespace".into(), json!("default"));
    }
    obj["apiVersion"] = json!(s.api_version());
    obj["kind"] = json!(s.kind);
    if s.kind == "Job" {
        // The Job controller's selector and labels name the uid of the Job they were read
        // from: a new Job gets its own.
        if let Some(spec) = obj["spec"].as_object_mut() {
            spec.remove("selector");
        }
        if let Some(labels) = obj
            .pointer_mut("/spec/template/metadata/labels")
            .and_then(Value::as_object_mut)
        {
            labels.retain(|k, _| !k.contains("controller-uid") && !k.ends_with("job-name"));
        }
    }
    obj
}

/// Creates the test's object of `s` in the simulator; returns its name.
async fn create(sim: &Simulator, s: &Served) -> String {
    let obj = fixture(s);
    let (code, v) = send_json(
        Method::POST,
        &format!("{}{}", sim.url(), s.collection()),
        "application/json",
        &obj,
    )
    .await;
    assert!(code.is_success(), "create {}: {code} {v}", s.resource);
    v["metadata"]["name"].as_str().expect("a name").to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_built_in_kind_is_served_from_the_cache_in_every_form() {
    let sim = sim().await;
    let p = proxy_for(&sim, |c| {
        c.cache.mode = CacheMode::OnDemand;
        c.cache.resources.clear();
        c.cache
            .include
            .push(KindPattern::parse("core/secrets").unwrap());
    })
    .await;
    let served = discover(&sim).await;
    assert!(
        served.len() >= 59,
        "{} built-in kinds: {served:?}",
        served.len()
    );
    let mut names = Vec::new();
    for s in &served {
        names.push(create(&sim, s).await);
    }
    // The first read of each kind starts its cache (and may pass through).
    for s in &served {
        let (code, _) = get_json(&format!("{}{}", p.url, s.collection())).await;
        assert_eq!(code, StatusCode::OK, "{}", s.resource);
    }
    let target = sim.store().revision();
    for s in &served {
        let mut cache = None;
        for _ in 0..2000 {
            cache = p.proxy.cache(&s.group, &s.version, &s.resource);
            if cache.as_ref().is_some_and(|c| c.is_synced()) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let cache = cache.unwrap_or_else(|| panic!("{} is not cached", s.resource));
        assert!(
            cache.wait_rv(target, T).await,
            "{}'s cache did not reach {target}",
            s.resource
        );
    }
    let before: Vec<f64> = served
        .iter()
        .map(|s| passed_through(&p, &s.label()))
        .collect();

    // Every LIST and GET first, with no write in between: each cache is at the simulator's
    // revision, so the lists' resourceVersions are the simulator's too.
    for (s, name) in served.iter().zip(&names) {
        let list = format!("{}?resourceVersion=0", s.collection());
        let get = format!("{}/{name}?resourceVersion=0", s.collection());
        for (form, accept, get_accept) in FORMS {
            let case = format!("{} as {form}", s.resource);
            for (pq, accept) in [(&list, accept), (&get, get_accept)] {
                let (a, theirs) = get_accepting(&sim.url(), pq, accept).await;
                let (b, ours) = get_accepting(&p.url, pq, accept).await;
                assert_eq!((a, b), (StatusCode::OK, StatusCode::OK), "{case}: {pq}");
                assert_eq!(
                    comparable(form, &ours),
                    comparable(form, &theirs),
                    "{case}: {pq}: watchmux's answer differs from the simulator's"
                );
            }
        }
    }
    // Then, kind by kind: a watch from the current resourceVersion sees the next change as the
    // simulator tells it; a watch-list starts with the object as it is now.
    for (s, name) in served.iter().zip(&names) {
        for (form, _, get_accept) in FORMS {
            let case = format!("{} as {form}", s.resource);
            // From a resourceVersion the cache has reached (a client's LIST from it would say
            // so): both replay the kind's events after it, the change below last.
            let rv = p
                .proxy
                .cache(&s.group, &s.version, &s.resource)
                .expect("cached")
                .rv();
            let watch = format!("{}?watch=1&resourceVersion={rv}", s.collection());
            let mut ours =
                watch_with(&format!("{}{watch}", p.url), &[("accept", get_accept)]).await;
            let mut theirs =
                watch_with(&format!("{}{watch}", sim.url()), &[("accept", get_accept)]).await;
            assert_eq!(
                (ours.status, theirs.status),
                (StatusCode::OK, StatusCode::OK),
                "{case}: watch"
            );
            touch(&sim, s, name, form).await;
            let touched = |e: &[u8]| e.windows(form.len()).any(|w| w == form.as_bytes());
            loop {
                let (a, b) = (next(&mut ours, form).await, next(&mut theirs, form).await);
                assert_eq!(
                    comparable(form, &a),
                    comparable(form, &b),
                    "{case}: watch event"
                );
                if touched(&b) {
                    break;
                }
            }
            let selector: String =
                form_urlencoded::byte_serialize(format!("metadata.name={name}").as_bytes())
                    .collect();
            let watch_list = format!(
                "{}?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&fieldSelector={selector}",
                s.collection()
            );
            let mut ours =
                watch_with(&format!("{}{watch_list}", p.url), &[("accept", get_accept)]).await;
            let mut theirs = watch_with(
                &format!("{}{watch_list}", sim.url()),
                &[("accept", get_accept)],
            )
            .await;
            assert_eq!(
                (ours.status, theirs.status),
                (StatusCode::OK, StatusCode::OK),
                "{case}: watch-list"
            );
            let (a, b) = (next(&mut ours, form).await, next(&mut theirs, form).await);
            assert_eq!(
                comparable(form, &a),
                comparable(form, &b),
                "{case}: watch-list's initial event"
            );
        }
    }
    for (s, before) in served.iter().zip(before) {
        assert_eq!(
            passed_through(&p, &s.label()),
            before,
            "{}: a read passed through",
            s.resource
        );
    }
}

/// Changes the test's object `name` of `s` (an annotation), through the simulator.
async fn touch(sim: &Simulator, s: &Served, name: &str, value: &str) {
    let patch = json!({"metadata": {"annotations": {"watchmux.test/touched": value}}});
    let (code, v) = send_json(
        Method::PATCH,
        &format!("{}{}/{name}", sim.url(), s.collection()),
        "application/merge-patch+json",
        &patch,
    )
    .await;
    assert!(code.is_success(), "touch {}: {code} {v}", s.resource);
}
