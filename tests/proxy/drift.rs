//! Consistency checks (kube 1.34's `DetectCacheInconsistency`, for any upstream): an upstream
//! whose watch loses one event leaves the cache unlike it, silently; the periodic check finds
//! the difference, the relist repairs it, and every watcher's view converges to the upstream's
//! without a gap or a duplicate in resourceVersion order. The simulator's lost-event fault plays
//! the upstream (`Faults::lose_next_event_of`); its bookmarks are off, so the cache's
//! resourceVersion moves only with the events it gets.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::runtime::watcher;
use kube_sim::Simulator;
use kube_sim::kinds::ResourceType;
use kube_sim::semantics::DeleteOptions;
use serde_json::json;

use crate::common::recorder::{Recorder, state_of};
use crate::common::watch_log::{self, State};
use crate::common::*;

fn rt(sim: &Simulator, resource: &str) -> Arc<ResourceType> {
    sim.resource("", "v1", resource).expect("served")
}

/// Creates the configmap `ns/name` in the simulator; its resourceVersion.
fn create_cm(sim: &Simulator, ns: &str, name: &str) -> u64 {
    let obj = json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":name,"namespace":ns},"data":{"k":"v"}});
    sim.ops()
        .create(&rt(sim, "configmaps"), Some(ns), obj, false)
        .unwrap_or_else(|s| panic!("create {ns}/{name}: {}", s.message))
        .rv
}

/// The simulator's configmaps in `ns` (all with `None`).
fn sim_cms(sim: &Simulator, ns: Option<&str>) -> State {
    watch_log::sim_state(sim, &rt(sim, "configmaps"), None, &|o| {
        ns.is_none_or(|n| o.namespace == n)
    })
}

/// A simulator without bookmarks, holding configmaps in namespaces `a` and `b`, and watchmux
/// in front of it checking its caches every second.
async fn rig(cms: &[(&str, &str)]) -> (Simulator, TestProxy) {
    let sim = sim_with(|c| c.bookmark_interval = Duration::from_secs(3600)).await;
    for ns in ["a", "b"] {
        let obj = json!({"apiVersion":"v1","kind":"Namespace","metadata":{"name":ns}});
        sim.ops()
            .create(&rt(&sim, "namespaces"), None, obj, false)
            .expect("namespace");
    }
    for (ns, name) in cms {
        create_cm(&sim, ns, name);
    }
    let px = proxy_for(&sim, |c| {
        c.cache.consistency_check = Some(Duration::from_secs(1));
    })
    .await;
    (sim, px)
}

async fn checks(px: &TestProxy, status: &str) -> f64 {
    metric_sum(
        px,
        "watchmux_consistency_checks_total",
        &[("resource", "configmaps"), ("status", status)],
    )
    .await
}

/// Waits for one failed check and a passing one after it, and that no other check fails.
async fn found_and_repaired(px: &TestProxy) {
    wait_until("a check finds the difference", 30, async || {
        checks(px, "failure").await >= 1.0
    })
    .await;
    let passed = checks(px, "success").await;
    wait_until("a check passes after the repair", 30, async || {
        checks(px, "success").await > passed
    })
    .await;
    assert_eq!(
        checks(px, "failure").await,
        1.0,
        "one failure, then repaired"
    );
    // Every check is timed, whatever its status.
    let ended = checks(px, "success").await + checks(px, "failure").await;
    let timed = metric_sum(
        px,
        "watchmux_consistency_check_duration_seconds_count",
        &[("resource", "configmaps")],
    )
    .await;
    assert!(timed >= ended, "{timed} checks timed of {ended} ended");
}

/// Pods written every 20 ms (3,000 at most) until stopped: the upstream's revision moves on
/// while the configmaps are quiet, as leases move a real cluster's (a repair waits for it to
/// pass the cache's).
struct Churn {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl Churn {
    fn start(sim: &Simulator) -> Churn {
        let stop = Arc::new(AtomicBool::new(false));
        let (sim_url, flag) = (sim.url(), stop.clone());
        let task = tokio::spawn(async move {
            for i in 0..3000 {
                if flag.load(Ordering::SeqCst) {
                    break;
                }
                create_object(
                    &sim_url,
                    "/api/v1/namespaces/default/pods",
                    &pod(&format!("churn-{i}"), "n1", json!({})),
                )
                .await;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        });
        Churn { stop, task }
    }

    async fn stop(self) {
        self.stop.store(true, Ordering::SeqCst);
        self.task.await.expect("churn");
    }
}

/// The watchers' scopes: every namespace, `a` (where the event is lost), `b`.
const SCOPES: [(&str, Option<&str>); 3] = [
    ("configmaps", None),
    ("namespaces/a/configmaps", Some("a")),
    ("namespaces/b/configmaps", Some("b")),
];

/// A recorder per scope of [`SCOPES`], and a kube-rs informer of every configmap, started.
async fn watchers(px: &TestProxy) -> (Vec<Recorder>, Informer<ConfigMap>) {
    let recorders =
        futures_util::future::join_all(SCOPES.map(|(path, _)| Recorder::start(&px.url, path)))
            .await;
    let informer = Informer::<ConfigMap>::start(&px.url, watcher::Config::default());
    informer.ready().await;
    (recorders, informer)
}

/// Waits until `informer` holds the simulator's configmaps at their resourceVersions.
async fn informer_converges(sim: &Simulator, informer: &Informer<ConfigMap>) {
    let want: std::collections::BTreeMap<String, String> = sim_cms(sim, None)
        .into_iter()
        .map(|(k, (rv, _))| (k, rv.to_string()))
        .collect();
    wait_until("the informer converges", 30, async || {
        informer.state() == want
    })
    .await;
}

/// A lost create: the cache's resourceVersion passes it with the next event, so the check at
/// that resourceVersion finds the object missing. Its revision lies below what the watchers
/// already received: no event can carry it, so the watchers that see the object (every
/// namespace, namespace `a`, the informer) are closed with 410 and relist from the repaired
/// cache; the watcher of namespace `b` is not touched. No watch starts below the repair.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_create_is_found_repaired_and_its_watchers_relist_into_it() {
    let (sim, px) = rig(&[("a", "a1"), ("a", "a2"), ("b", "b1")]).await;
    let (recorders, informer) = watchers(&px).await;
    wait_until("a first check passes", 30, async || {
        checks(&px, "success").await >= 1.0
    })
    .await;

    sim.faults().lose_next_event_of("a/lost");
    let lost = create_cm(&sim, "a", "lost");
    let after = create_cm(&sim, "b", "after");
    let cache = px.proxy.cache("", "v1", "configmaps").expect("cached");
    assert!(cache.wait_rv(after, Duration::from_secs(10)).await);
    assert_eq!(
        sim.faults().lost_revision(),
        Some(lost),
        "the create was lost"
    );

    let churn = Churn::start(&sim);
    found_and_repaired(&px).await;
    churn.stop().await;
    sim.faults().clear();
    // The cache is the upstream's again.
    let (code, cached) = get_json(&format!("{}/api/v1/configmaps?resourceVersion=0", px.url)).await;
    assert_eq!(code, 200);
    assert_eq!(state_of(&cached["items"]), sim_cms(&sim, None));

    for ((path, ns), rec) in SCOPES.iter().zip(&recorders) {
        let seen = rec.seen();
        let errors: Vec<_> = seen.iter().filter(|s| s.ty == "ERROR").collect();
        if *ns == Some("b") {
            assert!(errors.is_empty(), "{path}: not closed: {seen:?}");
            assert_eq!(rec.state().expect(path), sim_cms(&sim, Some("b")));
        } else {
            wait_until(&format!("{path} is told to relist"), 30, async || {
                rec.seen().iter().any(|s| s.ty == "ERROR")
            })
            .await;
            let seen = rec.seen();
            let errors: Vec<_> = seen.iter().filter(|s| s.ty == "ERROR").collect();
            assert_eq!(errors.len(), 1, "{path}: closed once: {seen:?}");
            assert_eq!(seen.last().map(|s| s.key.as_str()), Some("410"), "{path}");
            // What it had before is sound; relisting gives the upstream's state.
            let before = &seen[..seen.len() - 1];
            assert!(
                watch_log::fold(rec.initial.clone(), rec.from, before).is_ok(),
                "{path}: {before:?}"
            );
            let again = Recorder::start(&px.url, path).await;
            assert_eq!(again.initial, sim_cms(&sim, *ns), "{path} relisted");
        }
    }
    // The informer relisted once (its 410), into the upstream's state.
    informer_converges(&sim, &informer).await;
    assert_eq!(informer.inits.load(Ordering::SeqCst), 2);
    // A watch from before the repair would miss the lost create: 410.
    let mut w = watch(&format!(
        "{}/api/v1/configmaps?watch=1&resourceVersion={}",
        px.url, recorders[0].from
    ))
    .await;
    match w.next_line(Duration::from_secs(10)).await {
        Next::Line(l) => {
            let line = String::from_utf8_lossy(&l).to_string();
            assert!(line.contains("\"ERROR\"") && line.contains("410"), "{line}");
        }
        other => panic!("no ERROR: {other:?}"),
    }
}

/// A lost deletion: the repair sends it as an ordinary DELETED at a free revision (pods written
/// meanwhile move the upstream's revision past the cache's, as leases do in a real cluster),
/// so every watcher converges without being closed or relisting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_deletion_is_found_and_bridged_to_every_watcher() {
    let (sim, px) = rig(&[("a", "gone"), ("a", "a1"), ("b", "b1")]).await;
    let (recorders, informer) = watchers(&px).await;

    sim.faults().lose_next_event_of("a/gone");
    sim.ops()
        .delete(
            &rt(&sim, "configmaps"),
            Some("a"),
            "gone",
            &DeleteOptions::default(),
        )
        .expect("delete");
    let after = create_cm(&sim, "b", "after");
    let cache = px.proxy.cache("", "v1", "configmaps").expect("cached");
    assert!(cache.wait_rv(after, Duration::from_secs(10)).await);
    assert!(
        sim.faults().lost_revision().is_some(),
        "the deletion was lost"
    );
    let churn = Churn::start(&sim);
    found_and_repaired(&px).await;
    churn.stop().await;
    sim.faults().clear();

    for ((path, ns), rec) in SCOPES.iter().zip(&recorders) {
        let want = sim_cms(&sim, *ns);
        wait_until(&format!("{path} converges"), 30, async || {
            rec.state().as_ref() == Ok(&want)
        })
        .await;
        assert_eq!(rec.resumed(), 0, "{path}: never closed");
        let deleted: Vec<_> = rec
            .events()
            .into_iter()
            .filter(|e| e.ty == "DELETED")
            .collect();
        let expected = usize::from(*ns != Some("b"));
        assert_eq!(deleted.len(), expected, "{path}: {deleted:?}");
    }
    informer_converges(&sim, &informer).await;
    assert_eq!(
        informer.inits.load(Ordering::SeqCst),
        1,
        "it never relisted"
    );
}

/// A quiet kind whose cache's resourceVersion the upstream compacted away: the exact LIST at
/// it answers 410, and the check is made at a later resourceVersion the cache is proven to
/// hold (as for a consistent read), and passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_check_at_a_compacted_resource_version_is_made_at_a_later_one() {
    let (sim, px) = rig(&[("a", "a1"), ("b", "b1")]).await;
    let churn = Churn::start(&sim);
    let cache = px.proxy.cache("", "v1", "configmaps").expect("cached");
    let quiet = cache.rv();
    wait_until("the upstream's revision moves on", 30, async || {
        sim.store().revision() > quiet + 5
    })
    .await;
    sim.store().compact_now();
    let expired = || {
        metric_sum(
            &px,
            "watchmux_upstream_requests_total",
            &[
                ("resource", "configmaps"),
                ("verb", "consistency"),
                ("code", "410"),
            ],
        )
    };
    wait_until("a check meets the compaction", 30, async || {
        expired().await >= 1.0
    })
    .await;
    let passed = checks(&px, "success").await;
    wait_until("two checks pass after it", 30, async || {
        checks(&px, "success").await >= passed + 2.0
    })
    .await;
    churn.stop().await;
    // The check that met the 410 has ended (checks run one after the other), neither failed
    // nor skipped: it passed at a later resourceVersion.
    assert_eq!(checks(&px, "failure").await, 0.0);
    assert_eq!(checks(&px, "skipped").await, 0.0);
}
