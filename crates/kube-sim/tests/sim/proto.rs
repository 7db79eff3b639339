//! Every object the simulator serves survives kube's protobuf: JSON → protobuf → JSON (kube-wire's
//! transcoder) gives back the same values. Objects: the fleet's nodes, namespaces and realistic
//! pods, what churn writes, the testkit's pod, a realistic object of every built-in kind created
//! over HTTP, and the CRDs of custom types.
//!
//! Where the simulator's JSON is not exactly what Go would write (a zero value Go writes that the
//! simulator leaves out, an empty value Go would omit), the values still round-trip; those
//! differences are collected and printed, and only a real loss (a value changed or dropped) fails.

use std::collections::BTreeSet;
use std::time::Duration;

use http::{Method, StatusCode};
use kube_sim::churn::ChurnSpec;
use kube_sim::fleet::FleetSpec;
use kube_sim::kinds::CustomType;
use kube_sim::testkit::{get_json, send_json, sim_with};
use kube_wire::proto::{json_to_proto, message_for, proto_to_json};
use serde_json::{Value, json};

/// Realistic objects, shared with kube-wire's transcoder tests: (collection path, JSON).
const OBJECTS: &[(&str, &str)] = &[
    (
        "/api/v1/namespaces",
        include_str!("../../../kube-wire/src/proto/testdata/namespace.json"),
    ),
    (
        "/api/v1/nodes",
        include_str!("../../../kube-wire/src/proto/testdata/node.json"),
    ),
    (
        "/api/v1/namespaces/shop/pods",
        include_str!("../../../kube-wire/src/proto/testdata/pod.json"),
    ),
    (
        "/api/v1/namespaces/shop/services",
        include_str!("../../../kube-wire/src/proto/testdata/service.json"),
    ),
    (
        "/api/v1/namespaces/shop/configmaps",
        include_str!("../../../kube-wire/src/proto/testdata/configmap.json"),
    ),
    (
        "/api/v1/namespaces/shop/secrets",
        include_str!("../../../kube-wire/src/proto/testdata/secret.json"),
    ),
    (
        "/api/v1/namespaces/shop/events",
        include_str!("../../../kube-wire/src/proto/testdata/event.json"),
    ),
    (
        "/api/v1/namespaces/shop/endpoints",
        include_str!("../../../kube-wire/src/proto/testdata/endpoints.json"),
    ),
    (
        "/apis/discovery.k8s.io/v1/namespaces/shop/endpointslices",
        include_str!("../../../kube-wire/src/proto/testdata/endpointslice.json"),
    ),
    (
        "/apis/apps/v1/namespaces/shop/deployments",
        include_str!("../../../kube-wire/src/proto/testdata/deployment.json"),
    ),
    (
        "/apis/apps/v1/namespaces/shop/replicasets",
        include_str!("../../../kube-wire/src/proto/testdata/replicaset.json"),
    ),
    (
        "/apis/apps/v1/namespaces/shop/statefulsets",
        include_str!("../../../kube-wire/src/proto/testdata/statefulset.json"),
    ),
    (
        "/apis/apps/v1/namespaces/shop/daemonsets",
        include_str!("../../../kube-wire/src/proto/testdata/daemonset.json"),
    ),
    (
        "/apis/apps/v1/namespaces/shop/controllerrevisions",
        include_str!("../../../kube-wire/src/proto/testdata/controllerrevision.json"),
    ),
    (
        "/apis/batch/v1/namespaces/shop/jobs",
        include_str!("../../../kube-wire/src/proto/testdata/job.json"),
    ),
    (
        "/apis/batch/v1/namespaces/shop/cronjobs",
        include_str!("../../../kube-wire/src/proto/testdata/cronjob.json"),
    ),
    (
        "/apis/coordination.k8s.io/v1/namespaces/shop/leases",
        include_str!("../../../kube-wire/src/proto/testdata/lease.json"),
    ),
    (
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        include_str!("../../../kube-wire/src/proto/testdata/crd.json"),
    ),
];

/// A JSON value Go leaves out of an `omitempty` field.
fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
    }
}

/// A Go zero value as `encoding/json` writes it: empty, or a struct of zero values.
fn is_zero(v: &Value) -> bool {
    match v {
        Value::Object(o) => o.values().all(is_zero),
        v => is_empty(v),
    }
}

/// Places where the simulator's JSON is not what Go writes: note → an example object.
type Notes = std::collections::BTreeMap<String, String>;

/// Compares what the simulator served with what came back through protobuf: `losses` are values
/// changed or dropped; `notes` the places where the simulator's JSON is not what Go writes but
/// the values are the same (`example` names the object).
fn compare(
    path: &str,
    served: &Value,
    back: &Value,
    example: &str,
    losses: &mut Vec<String>,
    notes: &mut Notes,
) {
    let mut note = |n: String| {
        notes.entry(n).or_insert_with(|| example.to_string());
    };
    match (served, back) {
        (Value::Object(s), Value::Object(b)) => {
            for (k, v) in s {
                let p = format!("{path}.{k}");
                match b.get(k) {
                    Some(bv) => compare(&p, v, bv, example, losses, notes),
                    None if is_empty(v) => {
                        notes
                            .entry(format!(
                                "{}: the simulator writes {v} where Go omits the field",
                                generic(&p)
                            ))
                            .or_insert_with(|| example.to_string());
                    }
                    None => losses.push(format!("{example}: {p}: {v} lost")),
                }
            }
            let mut note = |n: String| {
                notes.entry(n).or_insert_with(|| example.to_string());
            };
            for (k, v) in b {
                if !s.contains_key(k) {
                    let p = format!("{path}.{k}");
                    if is_zero(v) {
                        note(format!(
                            "{}: Go writes {v}, the simulator leaves the field out",
                            generic(&p)
                        ));
                    } else {
                        losses.push(format!("{example}: {p}: {v} appeared"));
                    }
                }
            }
            let order = |m: &serde_json::Map<String, Value>,
                         other: &serde_json::Map<String, Value>| {
                m.keys()
                    .filter(|k| other.contains_key(*k))
                    .cloned()
                    .collect::<Vec<_>>()
            };
            if order(s, b) != order(b, s) {
                note(format!(
                    "{}: keys not in Go's order (struct field order, sorted map keys)",
                    generic(path)
                ));
            }
        }
        (Value::Array(s), Value::Array(b)) if s.len() == b.len() => {
            for (i, (s, b)) in s.iter().zip(b).enumerate() {
                compare(&format!("{path}[{i}]"), s, b, example, losses, notes);
            }
        }
        // protobuf has no nil/empty distinction: an empty slice comes back as Go's nil.
        (Value::Array(s), Value::Null) if s.is_empty() => {
            note(format!(
                "{}: [] comes back as null (nil slice) through protobuf",
                generic(path)
            ));
        }
        (s, b) if s == b => {}
        // The same quantity: Go writes the canonical form (`2048Mi` is `2Gi`).
        (Value::String(s), Value::String(b)) if go_quantity(s).as_deref() == Some(b.as_str()) => {
            note(format!(
                "{}: the simulator writes quantities Go would canonicalise (e.g. {s:?}, Go writes {b:?})",
                generic(path)
            ));
        }
        (s, b) => losses.push(format!("{example}: {path}: {s} became {b}")),
    }
}

/// The string Go writes for a `resource.Quantity` parsed from `s`.
fn go_quantity(s: &str) -> Option<String> {
    let pod = message_for("v1", "Pod")?;
    let json = json!({"spec": {"overhead": {"q": s}}}).to_string();
    let pb = json_to_proto(pod, json.as_bytes()).ok()?;
    let back: Value = serde_json::from_slice(&proto_to_json(pod, &pb, None).ok()?).ok()?;
    back["spec"]["overhead"]["q"].as_str().map(str::to_string)
}

/// A path without list indexes and object names, to group the notes.
fn generic(path: &str) -> String {
    let mut out = String::new();
    let mut skip = false;
    for c in path.chars() {
        match c {
            '[' => {
                skip = true;
                out.push_str("[]");
            }
            ']' => skip = false,
            c if !skip => out.push(c),
            _ => {}
        }
    }
    out
}

/// A fixture as a create request: as Go would write it (transcoded once through protobuf), in
/// namespace `shop`, without the fields the server sets.
fn create_body(json: &str) -> Value {
    let raw: Value = serde_json::from_str(json).unwrap();
    let (api_version, kind) = (
        raw["apiVersion"].as_str().unwrap(),
        raw["kind"].as_str().unwrap(),
    );
    let msg = message_for(api_version, kind).unwrap();
    let pb = json_to_proto(msg, json.as_bytes()).unwrap();
    let mut v: Value =
        serde_json::from_slice(&proto_to_json(msg, &pb, Some((api_version, kind))).unwrap())
            .unwrap();
    if let Some(spec) = v.get_mut("spec").and_then(Value::as_object_mut)
        && kind == "Job"
    {
        // The server generates a Job's selector and its labels.
        spec.remove("selector");
        spec.remove("manualSelector");
    }
    if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        if m.contains_key("namespace") {
            m.insert("namespace".into(), json!("shop"));
        }
        for k in [
            "uid",
            "resourceVersion",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
            "managedFields",
            "ownerReferences",
        ] {
            m.remove(k);
        }
    }
    v
}

#[tokio::test]
async fn every_object_the_simulator_serves_round_trips_through_protobuf() {
    let sim = sim_with(|c| {
        // Enough pods that churn's creates and deletes (a random walk) leave well over the 60
        // objects checked below.
        c.fleet = Some(FleetSpec {
            nodes: 3,
            pods: 60,
            namespaces: 2,
            seed: 11,
        });
        c.churn = Some(ChurnSpec {
            per_second: 200.0,
            seed: 11,
            mix: Default::default(),
        });
        c.custom_types = vec![CustomType {
            group: "example.org".into(),
            version: "v1".into(),
            resource: "gadgets".into(),
            kind: "Gadget".into(),
            namespaced: true,
            selectable_fields: vec![".spec.color".into()],
            printer_columns: Vec::new(),
            served_without_crd: false,
        }];
    })
    .await;
    let base = sim.url();
    let mut refused = Vec::new();
    for (path, json) in OBJECTS {
        let (code, body) = send_json(
            Method::POST,
            &format!("{base}{path}"),
            "application/json",
            &create_body(json),
        )
        .await;
        if code != StatusCode::CREATED {
            refused.push(format!("{path}: {code} {}", body["message"]));
        }
    }
    let tk = kube_sim::testkit::pod("testkit-pod", "node-00000", json!({"app": "tk"}));
    let (code, _) = send_json(
        Method::POST,
        &format!("{base}/api/v1/namespaces/shop/pods"),
        "application/json",
        &tk,
    )
    .await;
    assert_eq!(code, StatusCode::CREATED);
    // Let churn write for a while (creates, status updates, relabels, moves, deletes).
    tokio::time::sleep(Duration::from_millis(1500)).await;

    let mut losses = Vec::new();
    let mut notes = Notes::new();
    let mut checked = 0usize;
    let mut kinds = BTreeSet::new();
    for rt in sim.state().registry.all() {
        let api_version = rt.api_version();
        let Some(msg) = message_for(&api_version, &rt.kind) else {
            continue;
        };
        let prefix = if rt.group.is_empty() {
            "/api".to_string()
        } else {
            "/apis".to_string()
        };
        let url = format!("{base}{prefix}/{api_version}/{}", rt.resource);
        let (code, list) = get_json(&url).await;
        assert_eq!(code, StatusCode::OK, "{url}");
        // The list itself as one message, then every item on its own (list items carry no
        // kind/apiVersion for built-in kinds).
        let list_msg = message_for(&api_version, &rt.list_kind()).expect("a list message");
        let list_bytes = serde_json::to_vec(&list).unwrap();
        let pb = json_to_proto(list_msg, &list_bytes).unwrap_or_else(|e| panic!("{url}: {e}"));
        let back: Value = serde_json::from_slice(
            &proto_to_json(list_msg, &pb, Some((&api_version, &rt.list_kind()))).unwrap(),
        )
        .unwrap();
        compare(&rt.list_kind(), &list, &back, &url, &mut losses, &mut notes);
        for item in list["items"].as_array().unwrap() {
            let bytes = serde_json::to_vec(item).unwrap();
            let pb = json_to_proto(msg, &bytes).unwrap_or_else(|e| panic!("{url}: {e}: {item}"));
            let json = proto_to_json(msg, &pb, None).unwrap();
            let back: Value = serde_json::from_slice(&json).unwrap();
            let example = format!(
                "{} {}/{}",
                rt.kind,
                item["metadata"]["namespace"].as_str().unwrap_or(""),
                item["metadata"]["name"].as_str().unwrap_or("")
            );
            compare(&rt.kind, item, &back, &example, &mut losses, &mut notes);
            // What Go wrote is a fixed point.
            assert_eq!(json_to_proto(msg, &json).unwrap(), pb, "{}", rt.kind);
            checked += 1;
            kinds.insert(rt.kind.clone());
        }
        // One object by GET, with its kind and apiVersion.
        if let Some(name) = list["items"][0]["metadata"]["name"].as_str() {
            let ns = list["items"][0]["metadata"]["namespace"].as_str();
            let url = match ns {
                Some(ns) => format!(
                    "{base}{prefix}/{api_version}/namespaces/{ns}/{}/{name}",
                    rt.resource
                ),
                None => format!("{url}/{name}"),
            };
            let (code, obj) = get_json(&url).await;
            if code == StatusCode::OK {
                let pb = json_to_proto(msg, &serde_json::to_vec(&obj).unwrap()).unwrap();
                let back: Value = serde_json::from_slice(
                    &proto_to_json(msg, &pb, Some((&api_version, &rt.kind))).unwrap(),
                )
                .unwrap();
                compare(&rt.kind, &obj, &back, &url, &mut losses, &mut notes);
            }
        }
    }
    println!(
        "checked {checked} objects of {} kinds: {kinds:?}",
        kinds.len()
    );
    println!("create requests the simulator refused: {refused:#?}");
    println!("where the simulator's JSON differs from what Go writes (values round-trip):");
    for (n, example) in &notes {
        println!("  {n} (e.g. {example})");
    }
    assert!(
        losses.is_empty(),
        "values lost through protobuf:\n{}",
        losses.join("\n")
    );
    for kind in [
        "Pod",
        "Node",
        "Namespace",
        "Deployment",
        "CustomResourceDefinition",
        "Lease",
        "Job",
    ] {
        assert!(kinds.contains(kind), "no {kind} checked");
    }
    assert!(checked > 60, "only {checked} objects checked");
}

/// Writes 1000 of the fleet's realistic pods, one JSON document a line, to the file named by
/// `FLEET_PODS_OUT`, for kube-wire's transcoding measurement
/// (`MEASURE_PODS=<file> cargo test -p kube-wire --release -- --ignored --nocapture measure`).
#[test]
#[ignore]
fn dump_fleet_pods() {
    use rand::SeedableRng;
    let Ok(path) = std::env::var("FLEET_PODS_OUT") else {
        return;
    };
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let mut out = String::new();
    for i in 0..1000 {
        let pod = kube_sim::fleet::pod(i, "fleet-0", "node-00001", &mut rng);
        out.push_str(&serde_json::to_string(&pod).unwrap());
        out.push('\n');
    }
    std::fs::write(path, out).unwrap();
}
