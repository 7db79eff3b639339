//! A graceful shutdown as kube-apiserver's (issue 37): a replica drained mid-churn hands its
//! watchers to the other replica behind the same balancer, each by resourceVersion, with no
//! LIST, no 410 and nothing lost or repeated; and what a draining server answers a request that
//! still reaches it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use http::{Method, StatusCode};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::runtime::watcher;
use kube_sim::Simulator;
use kube_sim::semantics::DeleteOptions;
use serde_json::json;
use tokio::task::JoinHandle;

use crate::common::recorder::Recorder;
use crate::common::watch_log::{self, Seen, State};
use crate::common::{Informer, Relay, TestProxy, proxy_for, sim, wait_until};

/// Raw watchers (client-go's reflector, by hand: `Recorder`) besides the two informers.
const FOLLOWERS: usize = 24;

/// The drain's grace: the watches end in batches spread over it.
const GRACE: Duration = Duration::from_secs(2);

/// The simulator's ConfigMaps now.
fn sim_state(sim: &Simulator) -> State {
    let rt = sim.resource("", "v1", "configmaps").expect("served");
    watch_log::sim_state(sim, &rt, None, &|_| true)
}

/// The simulator's ConfigMap events in `(after, until]`.
fn sim_history(sim: &Simulator, after: u64, until: u64) -> Vec<Seen> {
    let rt = sim.resource("", "v1", "configmaps").expect("served");
    watch_log::sim_events(sim, &rt, after, until, &|_| true)
}

/// The sum of the series of metric `name` in `text` whose labels contain every one of `has`.
fn metric(text: &str, name: &str, has: &[&str]) -> u64 {
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) && has.iter().all(|h| l.contains(h)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

/// ConfigMap writes in the background, one every 20 ms (creates, changes, deletes), until
/// stopped.
struct Churn {
    stop: Arc<AtomicBool>,
    task: JoinHandle<()>,
}

impl Churn {
    fn start(sim: &Simulator) -> Churn {
        let state = sim.state().clone();
        let rt = sim.resource("", "v1", "configmaps").expect("served");
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let task = tokio::spawn(async move {
            let mut live: Vec<String> = Vec::new();
            let mut n = 0u64;
            while !s.load(Ordering::SeqCst) {
                n += 1;
                match n % 5 {
                    0 if live.len() > 4 => {
                        let name = live.remove(0);
                        let now = DeleteOptions {
                            grace_period_seconds: Some(0),
                            ..Default::default()
                        };
                        state
                            .ops
                            .delete(&rt, Some("default"), &name, &now)
                            .expect("delete");
                    }
                    1 | 3 if !live.is_empty() => {
                        let name = live[n as usize % live.len()].clone();
                        state
                            .ops
                            .modify(&rt, Some("default"), &name, |v| {
                                v["data"]["k"] = json!(n.to_string());
                            })
                            .expect("modify");
                    }
                    _ => {
                        let name = format!("churn-{n}");
                        let obj = json!({"metadata": {"name": name}, "data": {"k": "0"}});
                        state
                            .ops
                            .create(&rt, Some("default"), obj, false)
                            .expect("create");
                        live.push(name);
                    }
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        });
        Churn { stop, task }
    }

    async fn stop(self) {
        self.stop.store(true, Ordering::SeqCst);
        self.task.await.expect("the writer");
    }
}

/// Two replicas behind a balancer that sends each new connection to the first replica that
/// accepts it (a Service whose endpoints drop a pod that stopped accepting).
async fn replicas(sim: &Simulator) -> (TestProxy, TestProxy, Relay) {
    let drain = |c: &mut watchmux::config::Config| {
        c.server.shutdown_watch_grace = GRACE;
        c.server.shutdown_watch_min_rate = 4;
    };
    let a = proxy_for(sim, drain).await;
    let b = proxy_for(sim, drain).await;
    let lb = Relay::start_to_first(&[&a.url, &b.url]).await;
    (a, b, lb)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_drained_mid_churn_hands_its_watchers_to_the_other_by_resource_version() {
    let sim = sim().await;
    let (a, b, lb) = replicas(&sim).await;
    let churn = Churn::start(&sim);
    let mut followers = Vec::new();
    for _ in 0..FOLLOWERS {
        followers.push(Recorder::start(&lb.url, "configmaps").await);
    }
    let informers = [
        Informer::<ConfigMap>::start(&lb.url, watcher::Config::default()),
        Informer::<ConfigMap>::start(&lb.url, watcher::Config::default().streaming_lists()),
    ];
    for i in &informers {
        i.ready().await;
    }
    let on_a = a.proxy.cache("", "v1", "configmaps").expect("cached");
    let watches = FOLLOWERS + informers.len();
    wait_until("every client watches replica a", 30, async || {
        on_a.watcher_count() == watches
    })
    .await;
    let on_b = b.proxy.cache("", "v1", "configmaps").expect("cached");
    assert_eq!(on_b.watcher_count(), 0, "the balancer sent nothing to b");

    // The drain, with the cluster changing throughout.
    let clean = a
        .proxy
        .shutdown_within(Duration::ZERO, Duration::from_secs(20))
        .await;
    assert!(clean, "every connection of a's finished within the bound");
    let drained = a.proxy.metrics.render();
    wait_until("every client watches replica b", 30, async || {
        on_b.watcher_count() == watches
    })
    .await;
    churn.stop().await;

    // Every client converges to the simulator.
    let want = sim_state(&sim);
    let rvs: std::collections::BTreeMap<String, String> = want
        .iter()
        .map(|(k, (rv, _))| (k.clone(), rv.to_string()))
        .collect();
    wait_until("every client converged", 30, async || {
        followers.iter().all(|f| f.state().as_ref() == Ok(&want))
            && informers.iter().all(|i| i.state() == rvs)
    })
    .await;

    // Nothing lost, repeated or reordered: each follower's events are the simulator's history
    // since its LIST, exactly, across the two replicas.
    let until = sim.store().revision();
    for (i, f) in followers.iter().enumerate() {
        let events = f.events();
        assert_eq!(
            events,
            sim_history(&sim, f.from, until),
            "follower {i}: its events versus the simulator's history"
        );
        // One stream ended (a's, by the drain), cleanly, just after a bookmark at the
        // resourceVersion it re-watched b from.
        let ends = f.ends();
        assert_eq!(ends.len(), 1, "follower {i}: its streams' ends {ends:?}");
        assert!(ends[0].clean, "follower {i}: a's stream broke");
        let last = ends[0].last.as_ref().expect("a's stream said something");
        assert_eq!(
            last.ty, "BOOKMARK",
            "follower {i}: a's stream ended on {last:?}"
        );
    }
    // No informer relisted; b served no LIST of ConfigMaps and no 410.
    for (i, inf) in informers.iter().enumerate() {
        assert_eq!(
            inf.inits.load(Ordering::SeqCst),
            1,
            "informer {i} relisted (errors {:?})",
            inf.errors.lock()
        );
    }
    let at_b = b.proxy.metrics.render();
    let configmaps = "resource=\"configmaps\"";
    assert_eq!(
        metric(
            &at_b,
            "watchmux_requests_total",
            &[configmaps, "verb=\"list\""]
        ),
        0,
        "b served a LIST"
    );
    assert_eq!(
        metric(
            &at_b,
            "watchmux_watch_starts_total",
            &[configmaps, "outcome=\"410\""]
        ),
        0,
        "a re-watch at b was too old"
    );
    // Every watch of a's ended by the drain, none cut at its end.
    assert_eq!(
        metric(&drained, "watchmux_watches_drained_total", &[configmaps]),
        watches as u64,
        "watches a's drain ended"
    );
}

/// What reaches a draining server answers as kube-apiserver's filters do after its
/// `--shutdown-delay-duration`: a watch 503 with `Retry-After: 1`, any other request 429 with
/// `Retry-After: 5` and `Connection: close`, so the client goes to another replica; health and
/// metrics are still answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_draining_server_refuses_requests_as_kube_apiserver_does() {
    let sim = sim().await;
    let px = proxy_for(&sim, |_| {}).await;
    px.proxy.metrics.set_shutting_down();
    px.proxy.draining.cancel();
    let ask = |pq: &str| {
        let req = http::Request::builder()
            .method(Method::GET)
            .uri(pq)
            .header(http::header::ACCEPT, "application/json")
            .body(watchmux::downstream::request_body::ReqBody::Empty)
            .expect("a request");
        watchmux::downstream::router::handle(px.proxy.clone(), req)
    };
    let body = |r: http::Response<kube_wire::response::Body>| async move {
        let b = http_body_util::BodyExt::collect(r.into_body())
            .await
            .expect("the body")
            .to_bytes();
        serde_json::from_slice::<serde_json::Value>(&b).expect("a Status")
    };

    let watch = ask("/api/v1/configmaps?watch=1&resourceVersion=0").await;
    assert_eq!(watch.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(watch.headers()[http::header::RETRY_AFTER], "1");
    assert!(!watch.headers().contains_key(http::header::CONNECTION));
    let s = body(watch).await;
    assert_eq!(s["reason"], "ServiceUnavailable", "{s}");
    assert_eq!(s["message"], "apiserver is shutting down", "{s}");

    for pq in [
        "/api/v1/configmaps",
        "/api/v1/namespaces/default/secrets/x",
        "/version",
    ] {
        let r = ask(pq).await;
        assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS, "{pq}");
        assert_eq!(r.headers()[http::header::RETRY_AFTER], "5", "{pq}");
        assert_eq!(r.headers()[http::header::CONNECTION], "close", "{pq}");
        let s = body(r).await;
        assert_eq!(s["reason"], "TooManyRequests", "{pq}: {s}");
        assert_eq!(
            s["message"], "The apiserver is shutting down, please try again later.",
            "{pq}: {s}"
        );
    }
    for pq in ["/livez", "/metrics"] {
        assert_eq!(ask(pq).await.status(), StatusCode::OK, "{pq}");
    }
    assert_eq!(
        ask("/readyz").await.status(),
        StatusCode::SERVICE_UNAVAILABLE,
        "/readyz says the process is shutting down"
    );
}
