//! Property tests of the simulator's MVCC history: after any sequence of writes (and
//! compactions), a watch from any retained revision replays exactly the later events in order,
//! and a list at revision R equals the fold of all events up to R.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use kube_sim::kinds::Registry;
use kube_sim::ops::{ControllerTimings, Ops};
use kube_sim::semantics::{DeleteOptions, UpdateScope};
use kube_sim::store::{EventType, HistoryConfig, ReadError, Store};
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

#[derive(Debug, Clone)]
enum Op {
    Create(usize, usize, u8),
    Update(usize, usize, u8),
    Delete(usize, usize),
    Compact,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..2usize, 0..4usize, any::<u8>()).prop_map(|(n, k, d)| Op::Create(n, k, d)),
        4 => (0..2usize, 0..4usize, any::<u8>()).prop_map(|(n, k, d)| Op::Update(n, k, d)),
        2 => (0..2usize, 0..4usize).prop_map(|(n, k)| Op::Delete(n, k)),
        1 => Just(Op::Compact),
    ]
}

const NS: [&str; 2] = ["a", "a-b"];

/// One recorded change: revision, type, key, data after (None when deleted).
type Change = (u64, EventType, String, Option<String>);

struct Model {
    ops: Ops,
    store: Arc<Store>,
    changes: Vec<Change>,
    start: u64,
}

fn new_model() -> Model {
    let reg = Arc::new(Registry::new(&[]).unwrap());
    let store = Arc::new(Store::new(reg.clone(), HistoryConfig::default()));
    let ops = Ops::new(
        store.clone(),
        ControllerTimings::default(),
        TaskTracker::new(),
        CancellationToken::new(),
    );
    for ns in NS {
        ops.create(
            &reg.core("namespaces"),
            None,
            json!({"metadata":{"name":ns}}),
            false,
        )
        .unwrap();
    }
    let start = store.revision();
    Model {
        ops,
        store,
        changes: Vec::new(),
        start,
    }
}

fn apply(m: &mut Model, op: &Op) {
    let cm = m.store.registry().core("configmaps").clone();
    let before = m.store.revision();
    let (ns, name, data) = match op {
        Op::Create(n, k, d) => {
            let _ = m.ops.create(
                &cm,
                Some(NS[*n]),
                json!({"metadata":{"name":format!("c{k}")},"data":{"v":d.to_string()}}),
                false,
            );
            (NS[*n], format!("c{k}"), Some(d.to_string()))
        }
        Op::Update(n, k, d) => {
            let name = format!("c{k}");
            let _ = m.ops.update(
                &cm,
                Some(NS[*n]),
                &name,
                json!({"metadata":{"name":name},"data":{"v":d.to_string()}}),
                UpdateScope::Main,
            );
            (NS[*n], name, Some(d.to_string()))
        }
        Op::Delete(n, k) => {
            let _ = m.ops.delete(
                &cm,
                Some(NS[*n]),
                &format!("c{k}"),
                &DeleteOptions::default(),
            );
            (NS[*n], format!("c{k}"), None)
        }
        Op::Compact => {
            m.store.compact_now();
            return;
        }
    };
    let after = m.store.revision();
    if after == before {
        return;
    }
    assert_eq!(after, before + 1, "one write, one revision");
    let key = format!("{ns}/{name}");
    let existed = fold(&m.changes, after - 1).contains_key(&key);
    let ty = match (&data, existed) {
        (None, _) => EventType::Deleted,
        (Some(_), true) => EventType::Modified,
        (Some(_), false) => EventType::Added,
    };
    m.changes.push((after, ty, key, data));
}

/// State at revision `r`: key → data.
fn fold(changes: &[Change], r: u64) -> BTreeMap<String, String> {
    let mut state = BTreeMap::new();
    for (rev, _, key, data) in changes.iter().filter(|c| c.0 <= r) {
        let _ = rev;
        match data {
            Some(d) => {
                state.insert(key.clone(), d.clone());
            }
            None => {
                state.remove(key);
            }
        }
    }
    state
}

fn data_of(body: &[u8]) -> String {
    let v: Value = serde_json::from_slice(body).unwrap();
    v["data"]["v"].as_str().unwrap().to_string()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn history_replays_and_lists_fold(ops in proptest::collection::vec(op(), 1..60)) {
        let mut m = new_model();
        for o in &ops {
            apply(&mut m, o);
        }
        let cm = m.store.registry().core("configmaps").clone();
        let end = m.store.revision();
        let compacted = m.store.compacted(&cm);
        for r in m.start..=end {
            // A list at r is the fold of every change up to r, in key byte order.
            match m.store.list(&cm, None, Some(r), None, 0, &|_| true, false) {
                Ok(page) => {
                    prop_assert!(r >= compacted);
                    prop_assert_eq!(page.rev, r);
                    let got: Vec<(String, String)> = page.items.iter().map(|o| (format!("{}/{}", o.namespace, o.name), data_of(&o.body))).collect();
                    let want: Vec<(String, String)> = fold(&m.changes, r).into_iter().collect();
                    prop_assert_eq!(got, want, "list at {}", r);
                    for o in &page.items {
                        prop_assert!(o.rv <= r);
                    }
                }
                Err(ReadError::Compacted { .. }) => prop_assert!(r < compacted, "{} readable above compaction {}", r, compacted),
                Err(e) => prop_assert!(false, "{}", e),
            }
            // A watch from r replays exactly the later changes, in order, or r is too old.
            match m.store.check_watch_start(&cm, r) {
                Ok(()) => {
                    let batch = m.store.events_after(&cm, r, usize::MAX).expect("replayable");
                    let got: Vec<(u64, EventType, String, Option<String>)> = batch
                        .events
                        .iter()
                        .map(|e| (e.rev, e.ty, e.key.clone(), (e.ty != EventType::Deleted).then(|| data_of(&e.obj.body))))
                        .collect();
                    let want: Vec<Change> = m.changes.iter().filter(|c| c.0 > r).cloned().collect();
                    prop_assert_eq!(got, want, "replay from {}", r);
                    for e in &batch.events {
                        prop_assert_eq!(e.obj.rv, e.rev, "event objects carry the event revision");
                    }
                }
                Err(_) => prop_assert!(r < compacted, "watch from {} refused above compaction {}", r, compacted),
            }
        }
    }
}

/// The same property through the HTTP API: exact-RV lists and watches from every retained
/// revision of a random write sequence.
#[tokio::test]
async fn http_lists_and_watches_agree_with_the_history() {
    let sim = kube_sim::testkit::sim().await;
    let cm = sim.resource("", "v1", "configmaps").unwrap();
    let ops = sim.ops();
    let mut rng = StdRng::seed_from_u64(42);
    let start = sim.store().revision();
    let mut changes: Vec<Change> = Vec::new();
    for _ in 0..40 {
        let name = format!("c{}", rng.random_range(0..4));
        let before = sim.store().revision();
        let d = rng.random_range(0..100u32).to_string();
        let (ty, data) = match rng.random_range(0..3) {
            0 => (
                ops.create(
                    &cm,
                    Some("default"),
                    json!({"metadata":{"name":name},"data":{"v":d}}),
                    false,
                )
                .map(|_| EventType::Added),
                Some(d),
            ),
            1 => (
                ops.update(
                    &cm,
                    Some("default"),
                    &name,
                    json!({"metadata":{"name":name},"data":{"v":d}}),
                    UpdateScope::Main,
                )
                .map(|_| EventType::Modified),
                Some(d),
            ),
            _ => (
                ops.delete(&cm, Some("default"), &name, &DeleteOptions::default())
                    .map(|_| EventType::Deleted),
                None,
            ),
        };
        if let Ok(ty) = ty {
            assert_eq!(sim.store().revision(), before + 1);
            changes.push((before + 1, ty, format!("default/{name}"), data));
        }
    }
    let end = sim.store().revision();
    for r in start..=end {
        let url = format!(
            "{}/api/v1/namespaces/default/configmaps?resourceVersion={r}&resourceVersionMatch=Exact",
            sim.url()
        );
        let (code, list) = kube_sim::testkit::get_json(&url).await;
        assert_eq!(code, 200, "{list}");
        assert_eq!(list["metadata"]["resourceVersion"], r.to_string());
        let got: Vec<(String, String)> = list["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| {
                (
                    format!("default/{}", i["metadata"]["name"].as_str().unwrap()),
                    i["data"]["v"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        let want: Vec<(String, String)> = fold(&changes, r).into_iter().collect();
        assert_eq!(got, want, "list at {r}");

        let url = format!(
            "{}/api/v1/namespaces/default/configmaps?watch=1&resourceVersion={r}&timeoutSeconds=5",
            sim.url()
        );
        let mut w = kube_sim::testkit::watch(&url).await;
        let want: Vec<&Change> = changes.iter().filter(|c| c.0 > r).collect();
        for c in want {
            let e = w.next_event(Duration::from_secs(5)).await;
            assert_eq!(
                e["type"],
                match c.1 {
                    EventType::Added => "ADDED",
                    EventType::Modified => "MODIFIED",
                    EventType::Deleted => "DELETED",
                }
            );
            assert_eq!(e["object"]["metadata"]["resourceVersion"], c.0.to_string());
            assert_eq!(
                format!(
                    "default/{}",
                    e["object"]["metadata"]["name"].as_str().unwrap()
                ),
                c.2
            );
        }
        assert!(
            matches!(
                w.next_line(Duration::from_millis(50)).await,
                kube_sim::testkit::Next::Timeout
            ),
            "no extra events after {r}"
        );
    }
}
