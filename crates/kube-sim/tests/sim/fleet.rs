//! The synthetic fleet and the churn generator: realistic objects at start, then a stream of
//! writes that watchers see with write-time stamps.

use std::collections::HashSet;
use std::time::Duration;

use kube_sim::churn::ChurnSpec;
use kube_sim::fleet::{FleetSpec, WRITE_TIME_ANNOTATION};
use serde_json::Value;

#[tokio::test]
async fn fleet_loads_realistic_pods_spread_over_nodes_and_namespaces() {
    let sim = kube_sim::testkit::sim_with(|c| {
        c.fleet = Some(FleetSpec {
            nodes: 5,
            pods: 60,
            namespaces: 3,
            seed: 3,
        })
    })
    .await;
    let (code, list) = kube_sim::testkit::get_json(&format!("{}/api/v1/pods", sim.url())).await;
    assert_eq!(code, 200);
    let items = list["items"].as_array().unwrap();
    assert_eq!(items.len(), 60);
    let mut nodes = HashSet::new();
    let mut namespaces = HashSet::new();
    for p in items {
        let size = serde_json::to_vec(p).unwrap().len();
        assert!((3_000..=8_500).contains(&size), "pod JSON is {size} bytes");
        assert_eq!(
            p["status"]["phase"], "Running",
            "fleet pods keep the status their kubelet wrote"
        );
        assert!(p["metadata"]["ownerReferences"][0]["kind"].is_string());
        nodes.insert(p["spec"]["nodeName"].as_str().unwrap().to_string());
        namespaces.insert(p["metadata"]["namespace"].as_str().unwrap().to_string());
    }
    assert_eq!(nodes.len(), 5);
    assert_eq!(namespaces.len(), 3);
    let (_, nodes) = kube_sim::testkit::get_json(&format!("{}/api/v1/nodes", sim.url())).await;
    assert_eq!(nodes["items"].as_array().unwrap().len(), 5);
    // Field selectors see the fleet's placement.
    let (_, on0) = kube_sim::testkit::get_json(&format!(
        "{}/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-00000",
        sim.url()
    ))
    .await;
    assert_eq!(on0["items"].as_array().unwrap().len(), 12);
}

#[tokio::test]
async fn churn_writes_stamped_events_that_watchers_receive() {
    let sim = kube_sim::testkit::sim_with(|c| {
        c.fleet = Some(FleetSpec {
            nodes: 4,
            pods: 40,
            namespaces: 2,
            seed: 9,
        });
        c.churn = Some(ChurnSpec {
            per_second: 200.0,
            seed: 9,
            mix: Default::default(),
        });
    })
    .await;
    let start = sim.store().revision();
    let url = format!(
        "{}/api/v1/pods?watch=1&resourceVersion={start}&timeoutSeconds=10",
        sim.url()
    );
    let mut w = kube_sim::testkit::watch(&url).await;
    let mut types = HashSet::new();
    let mut last_rv = start;
    let mut stamped = 0;
    for _ in 0..100 {
        let e = w.next_event(Duration::from_secs(5)).await;
        let rv: u64 = e["object"]["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!(rv > last_rv, "events arrive in resourceVersion order");
        last_rv = rv;
        let ty = e["type"].as_str().unwrap().to_string();
        let stamp: u128 = e["object"]["metadata"]["annotations"][WRITE_TIME_ANNOTATION]
            .as_str()
            .unwrap_or("0")
            .parse()
            .unwrap();
        if stamp > 0 {
            stamped += 1;
        } else {
            // Only a kubelet finishing a graceful delete writes without a stamp.
            assert!(
                e["object"]["metadata"]["deletionTimestamp"].is_string(),
                "unstamped {ty} event: {e}"
            );
        }
        types.insert(ty);
    }
    assert!(types.contains("MODIFIED"), "{types:?}");
    assert!(
        stamped > 50,
        "{stamped} of 100 events carry a write-time stamp"
    );
    assert!(types.contains("ADDED"), "{types:?}");
    // The pod population stays in the same order of magnitude (creates balance deletes).
    let (_, list) = kube_sim::testkit::get_json(&format!("{}/api/v1/pods", sim.url())).await;
    let n = list["items"].as_array().unwrap().len();
    assert!((20..=80).contains(&n), "{n} pods after churn");
    let v: Value = list["items"][0].clone();
    assert!(v["spec"]["nodeName"].is_string());
}

#[tokio::test]
async fn churn_is_started_changed_and_stopped_at_runtime() {
    let sim = kube_sim::testkit::sim_with(|c| {
        c.fleet = Some(FleetSpec {
            nodes: 2,
            pods: 10,
            namespaces: 1,
            seed: 5,
        })
    })
    .await;
    let (_, list) = kube_sim::testkit::get_json(&format!("{}/api/v1/pods", sim.url())).await;
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let mut w = kube_sim::testkit::watch(&format!(
        "{}/api/v1/pods?watch=1&resourceVersion={rv}",
        sim.url()
    ))
    .await;
    let post = |q: &str| {
        let url = format!("{}/sim/churn?{q}", sim.url());
        async move {
            kube_sim::testkit::send(hyper::Method::POST, &url, &[], "")
                .await
                .status()
        }
    };
    // Bad input is a 400, not a panic or a silent default.
    assert_eq!(post("perSecond=10&mix=storm").await, 400);
    assert_eq!(post("perSecond=-1").await, 400);
    // `status` churn: every write is a stamped MODIFIED event.
    assert_eq!(post("perSecond=100&mix=status").await, 200);
    for _ in 0..10 {
        let ev = w.next_non_bookmark(Duration::from_secs(5)).await;
        assert_eq!(ev["type"], "MODIFIED", "{ev}");
        assert!(ev["object"]["metadata"]["annotations"][WRITE_TIME_ANNOTATION].is_string());
    }
    // Stopped: after what was in flight, nothing more arrives.
    assert_eq!(post("perSecond=0").await, 200);
    tokio::time::sleep(Duration::from_millis(200)).await;
    while let kube_sim::testkit::Next::Line(_) = w.next_line(Duration::from_millis(50)).await {}
    assert!(
        matches!(
            w.next_line(Duration::from_millis(500)).await,
            kube_sim::testkit::Next::Timeout
        ),
        "churn went on after perSecond=0"
    );
}

/// The fleet's objects are stored as they are generated, without transcoding
/// (`Store::load_canonical`): each must be what kube-apiserver writes back (JSON → protobuf →
/// JSON gives the same bytes), and its protobuf, encoded at its first read, what that JSON
/// encodes to.
#[tokio::test]
async fn fleet_objects_are_stored_canonical() {
    use kube_wire::proto::{json_to_proto, proto_to_json};
    for seed in [1, 2, 3, 4] {
        let sim = kube_sim::testkit::sim_with(|c| {
            c.fleet = Some(FleetSpec {
                nodes: 40,
                pods: 600,
                namespaces: 5,
                seed,
            })
        })
        .await;
        let mut checked = 0;
        for resource in ["pods", "nodes", "namespaces"] {
            let rt = sim.state().registry.core(resource);
            let msg = kube_sim::protobuf::message(&rt).unwrap();
            let page = sim
                .store()
                .list(&rt, None, None, None, usize::MAX, &|_| true, false)
                .unwrap();
            for obj in &page.items {
                let body = String::from_utf8_lossy(&obj.body);
                let pb = json_to_proto(msg, &obj.body).unwrap_or_else(|e| panic!("{e}: {body}"));
                let canonical = proto_to_json(msg, &pb, None).unwrap();
                assert_eq!(
                    String::from_utf8_lossy(&canonical),
                    body,
                    "seed {seed}: a {resource} not in its canonical form"
                );
                assert_eq!(obj.protobuf(&rt).map(|b| &b[..]), Some(&pb[..]));
                checked += 1;
            }
        }
        assert!(checked > 640, "{checked}");
        sim.shutdown().await;
    }
}
