//! On-demand caching (`cache.mode = "on-demand"`): a kind is cached from its first read, with
//! one upstream watch however many clients watch it; the reads before its sync pass through;
//! an idle kind is dropped and started again by its next read without its clients noticing;
//! near `cache.memory_limit` the least recently read kind goes first, and new kinds pass through
//! when nothing can go; secrets, excluded kinds and aggregated APIs always pass through; a CRD
//! created through watchmux is cached like a built-in kind, and its deletion ends its watchers.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use http::Method;
use serde_json::{Value, json};

use crate::common::*;
use kube_sim::Simulator;
use watchmux::cache::ResourceCache;
use watchmux::config::KindPattern;

/// The synced cache of a kind, once its first read started it (within 20 s).
async fn until_cached(px: &TestProxy, group: &str, resource: &str) -> Arc<ResourceCache> {
    for _ in 0..2000 {
        if let Some(c) = px.proxy.cache(group, "v1", resource)
            && c.is_synced()
        {
            return c;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{group}/{resource} was not cached within 20 s");
}

/// Waits (up to 20 s) until a kind is no longer cached.
async fn until_dropped(px: &TestProxy, group: &str, resource: &str) {
    for _ in 0..2000 {
        if px.proxy.cache(group, "v1", resource).is_none() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{group}/{resource} was not dropped within 20 s");
}

/// `watchmux_cache_kind_changes_total{change}`.
async fn kind_changes(px: &TestProxy, change: &str) -> u64 {
    let (_, _, body) = request(Method::GET, &format!("{}/metrics", px.url), &[], "").await;
    let series = format!("watchmux_cache_kind_changes_total{{change=\"{change}\"}} ");
    String::from_utf8_lossy(&body)
        .lines()
        .find_map(|l| l.strip_prefix(series.as_str())?.parse().ok())
        .unwrap_or_else(|| panic!("no {series}"))
}

/// A counter of the simulator for one resource (`configmaps`, `roles.rbac.authorization.k8s.io`).
fn sim_count(sim: &Simulator, resource: &str, counter: &str) -> u64 {
    sim.stats()["resources"][resource][counter]
        .as_u64()
        .unwrap_or_else(|| panic!("no {counter} for {resource}"))
}

/// The names of a LIST's items.
fn names(list: &Value) -> BTreeSet<String> {
    list["items"]
        .as_array()
        .expect("a list")
        .iter()
        .map(|o| o["metadata"]["name"].as_str().unwrap().to_string())
        .collect()
}

/// Creates `n` objects at `collection` (a path on the simulator), each with an annotation of
/// `pad` bytes.
async fn create(sim: &Simulator, collection: &str, prefix: &str, n: usize, pad: usize) {
    for i in 0..n {
        let obj = json!({"metadata": {"name": format!("{prefix}-{i}"),
                         "annotations": {"pad": "x".repeat(pad)}}});
        create_object(&sim.url(), collection, &obj).await;
    }
}

/// A LIST through watchmux and the same LIST from the simulator: same status, same objects.
async fn same_list(px: &TestProxy, sim: &Simulator, path_query: &str) -> (Value, bool) {
    let (s, h, body) = request(Method::GET, &format!("{}{path_query}", px.url), &[], "").await;
    let (ss, want) = get_json(&format!("{}{path_query}", sim.url())).await;
    assert_eq!((s.as_u16(), ss.as_u16()), (200, 200), "{path_query}");
    let got: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(names(&got), names(&want), "{path_query}");
    (got, h.contains_key("x-watchmux-cache-resource-version"))
}

const CMS: &str = "/api/v1/namespaces/default/configmaps";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kind_is_cached_from_its_first_read_and_dropped_when_idle_without_clients_noticing() {
    let sim = sim().await;
    create(&sim, CMS, "cm", 3, 10).await;
    let px = on_demand(&sim, |c| c.cache.idle = Some(Duration::from_secs(1))).await;
    assert!(px.proxy.cache("", "v1", "configmaps").is_none());
    assert_eq!(sim_count(&sim, "configmaps", "watchRequests"), 0);

    // The first read passes through (the cache is starting), the later ones come from it.
    let path = format!("{CMS}?resourceVersion=0");
    same_list(&px, &sim, &path).await;
    let first = until_cached(&px, "", "configmaps").await;
    let lists = sim_count(&sim, "configmaps", "listRequests");
    let (_, from_cache) = same_list(&px, &sim, &path).await;
    assert!(from_cache, "answered by the cache");
    assert_eq!(
        sim_count(&sim, "configmaps", "listRequests"),
        lists + 1,
        "only the test's own LIST of the simulator reached it"
    );
    // The reflector watches once its LIST is in: it may not be watching yet.
    crate::common::reflectors_watching(&sim, &["configmaps"]).await;
    assert_eq!(sim_count(&sim, "configmaps", "openWatches"), 1);

    // An open watch is a read: the kind stays past idle_secs and the watch goes on.
    let rv = first.rv();
    let mut w = watch(&format!("{}{CMS}?watch=1&resourceVersion={rv}", px.url)).await;
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let still = px
        .proxy
        .cache("", "v1", "configmaps")
        .expect("still cached");
    assert!(Arc::ptr_eq(&still, &first), "the same cache");
    create(&sim, CMS, "watched", 1, 10).await;
    let ev = w.next_non_bookmark(Duration::from_secs(10)).await;
    assert_eq!(
        (
            ev["type"].as_str(),
            ev["object"]["metadata"]["name"].as_str()
        ),
        (Some("ADDED"), Some("watched-0"))
    );
    let before_drop = ev["object"]["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    drop(w);

    // Unwatched and unread: dropped, its upstream watch closed, its memory freed.
    until_dropped(&px, "", "configmaps").await;
    assert_eq!(kind_changes(&px, "dropped_idle").await, 1);
    drop(first);
    drop(still);
    for _ in 0..500 {
        if sim_count(&sim, "configmaps", "openWatches") == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(sim_count(&sim, "configmaps", "openWatches"), 0);

    // The next reads see the upstream's state: through the upstream while the kind starts
    // again, then from its new cache. A watch from before the drop gets what happened since
    // (the new cache does not know it: the upstream answers it).
    create(&sim, CMS, "later", 1, 10).await;
    let (got, _) = same_list(&px, &sim, &path).await;
    assert!(names(&got).contains("later-0"));
    let second = until_cached(&px, "", "configmaps").await;
    let (_, from_cache) = same_list(&px, &sim, &path).await;
    assert!(from_cache);
    let mut w = watch(&format!(
        "{}{CMS}?watch=1&resourceVersion={before_drop}",
        px.url
    ))
    .await;
    let ev = w.next_non_bookmark(Duration::from_secs(10)).await;
    assert_eq!(ev["object"]["metadata"]["name"], "later-0", "{ev}");
    assert!(second.first_rv().unwrap() > before_drop.parse::<u64>().unwrap());
    assert_eq!(kind_changes(&px, "started").await, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_memory_budget_drops_the_least_recently_read_kind_first_then_passes_new_kinds_through()
{
    const N: usize = 8;
    const PAD: usize = 64 << 10;
    let sim = sim().await;
    let kinds = [
        ("", "configmaps", CMS.to_string()),
        (
            "",
            "serviceaccounts",
            "/api/v1/namespaces/default/serviceaccounts".to_string(),
        ),
        (
            "rbac.authorization.k8s.io",
            "roles",
            "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles".to_string(),
        ),
        (
            "rbac.authorization.k8s.io",
            "rolebindings",
            "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings".to_string(),
        ),
    ];
    for (_, r, path) in &kinds {
        create(&sim, path, r, N, PAD).await;
    }
    // What one kind of N such objects holds in the budget.
    let one = {
        let px = on_demand(&sim, |_| {}).await;
        same_list(&px, &sim, CMS).await;
        let used = until_cached(&px, "", "configmaps").await.account().used();
        px.stop().await;
        used
    };
    assert!(one > (N * PAD) as u64, "{one}");

    // Room for three kinds under 80 % (71 %); a fourth takes it past 90 % (95 %).
    let px = on_demand(&sim, |c| c.cache.memory_limit = one * 42 / 10).await;
    let read = |i: usize| {
        let path = format!("{}?resourceVersion=0", kinds[i].2);
        let (px, sim) = (&px, &sim);
        async move { same_list(px, sim, &path).await }
    };
    for (i, (group, resource, _)) in kinds.iter().take(3).enumerate() {
        read(i).await;
        until_cached(&px, group, resource).await;
    }
    // configmaps is read again: serviceaccounts is now the least recently read.
    tokio::time::sleep(Duration::from_millis(20)).await;
    let (_, from_cache) = read(0).await;
    assert!(from_cache);
    tokio::time::sleep(Duration::from_millis(20)).await;
    read(3).await;
    until_dropped(&px, kinds[1].0, kinds[1].1).await;
    // One is enough: the keeper, looking again, drops nothing more.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    for i in [0, 2, 3] {
        assert!(
            px.proxy.cache(kinds[i].0, "v1", kinds[i].1).is_some(),
            "{} stays",
            kinds[i].1
        );
    }
    assert_eq!(kind_changes(&px, "dropped_memory").await, 1);
    assert!(px.proxy.budget.used() < px.proxy.budget.limit() * 9 / 10);
    px.stop().await;

    // A listed kind is never dropped: with it past 80 % of the limit, a new kind passes through
    // instead of being cached.
    let px = on_demand(&sim, |c| {
        c.cache.memory_limit = one * 115 / 100;
        c.cache.resources = vec![watchmux::config::ResourceSpec::new("", "v1", "configmaps")];
    })
    .await;
    let path = format!("{}?resourceVersion=0", kinds[1].2);
    for _ in 0..3 {
        let (_, from_cache) = same_list(&px, &sim, &path).await;
        assert!(!from_cache);
    }
    assert!(px.proxy.cache("", "v1", "serviceaccounts").is_none());
    assert!(kind_changes(&px, "refused_memory").await >= 3);
    assert!(px.proxy.cache("", "v1", "configmaps").is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_scoped_kinds_are_cached_and_subresources_pass_through() {
    let sim = sim().await;
    for name in ["n1", "n2"] {
        let (s, _) = send_json(
            Method::POST,
            &format!("{}/api/v1/nodes", sim.url()),
            "application/json",
            &json!({"metadata": {"name": name}}),
        )
        .await;
        assert!(s.is_success());
    }
    let px = on_demand(&sim, |_| {}).await;
    same_list(&px, &sim, "/api/v1/nodes").await;
    until_cached(&px, "", "nodes").await;
    let (_, from_cache) = same_list(&px, &sim, "/api/v1/nodes?resourceVersion=0").await;
    assert!(from_cache);
    // kube's router: no namespaced path for a cluster-scoped kind, answered from the cache's
    // knowledge of the kind as kube answers it.
    for path in [
        "/api/v1/namespaces/default/nodes",
        "/api/v1/nodes/n1/status",
    ] {
        let (s, _, body) = request(Method::GET, &format!("{}{path}", px.url), &[], "").await;
        let (ss, _, sim_body) =
            request(Method::GET, &format!("{}{path}", sim.url()), &[], "").await;
        assert_eq!(s, ss, "{path}");
        if path.ends_with("/status") {
            // A subresource passes through, untouched.
            assert_eq!(body, sim_body);
        }
    }
    assert_eq!(
        px.proxy.cached_kinds().len(),
        1,
        "the subresource started nothing"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aggregated_apis_pass_through() {
    let sim = sim_with(|c| {
        c.custom_types = vec![
            "metrics.k8s.io/v1beta1/nodemetrics=NodeMetrics,cluster,aggregated"
                .parse()
                .unwrap(),
        ];
    })
    .await;
    let path = "/apis/metrics.k8s.io/v1beta1/nodemetrics";
    let (s, _) = send_json(
        Method::POST,
        &format!("{}{path}", sim.url()),
        "application/json",
        &json!({"apiVersion": "metrics.k8s.io/v1beta1", "kind": "NodeMetrics", "metadata": {"name": "n1"}}),
    )
    .await;
    assert!(s.is_success());
    let px = on_demand(&sim, |_| {}).await;
    for _ in 0..3 {
        let (_, from_cache) = same_list(&px, &sim, &format!("{path}?resourceVersion=0")).await;
        assert!(!from_cache);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(px.proxy.cached_kinds().is_empty());
    assert_eq!(
        sim_count(&sim, "nodemetrics.metrics.k8s.io", "watchRequests"),
        0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_and_excluded_kinds_pass_through_unless_named() {
    let sim = sim().await;
    let secrets = "/api/v1/namespaces/default/secrets";
    let (s, _) = send_json(
        Method::POST,
        &format!("{}{secrets}", sim.url()),
        "application/json",
        &json!({"metadata": {"name": "s"}, "stringData": {"k": "v"}}),
    )
    .await;
    assert!(s.is_success());
    let px = on_demand(&sim, |c| {
        c.cache.exclude = vec![KindPattern::parse("core/config*").unwrap()];
    })
    .await;
    for path in [secrets, CMS] {
        for _ in 0..2 {
            let (_, from_cache) = same_list(&px, &sim, path).await;
            assert!(!from_cache, "{path}");
        }
    }
    assert_eq!(sim_count(&sim, "secrets", "watchRequests"), 0);
    assert_eq!(sim_count(&sim, "configmaps", "watchRequests"), 0);
    assert!(px.proxy.cached_kinds().is_empty());
    px.stop().await;

    // Named, secrets are cached like any other kind.
    let px = on_demand(&sim, |c| {
        c.cache.include = vec![KindPattern::parse("core/secrets").unwrap()];
    })
    .await;
    same_list(&px, &sim, secrets).await;
    until_cached(&px, "", "secrets").await;
    let (_, from_cache) = same_list(&px, &sim, &format!("{secrets}?resourceVersion=0")).await;
    assert!(from_cache);
    // Not matched by the include list: passed through.
    let (_, from_cache) = same_list(&px, &sim, CMS).await;
    assert!(!from_cache);
    assert!(px.proxy.cache("", "v1", "configmaps").is_none());
}

/// The README's widgets CRD (`examples/widgets-crd.yaml`), as JSON.
fn widgets_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
                 "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
                 "versions": [{"name": "v1", "served": true, "storage": true,
                               "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
                               "additionalPrinterColumns": [{"name": "Color", "type": "string", "jsonPath": ".spec.color"}],
                               "selectableFields": [{"jsonPath": ".spec.color"}]}]}
    })
}

const WIDGETS: &str = "/apis/example.com/v1/namespaces/default/widgets";

/// Creates a widget through watchmux.
async fn widget(px: &TestProxy, name: &str, color: &str) {
    let (s, body) = send_json(
        Method::POST,
        &format!("{}{WIDGETS}", px.url),
        "application/json",
        &json!({"apiVersion": "example.com/v1", "kind": "Widget",
                "metadata": {"name": name}, "spec": {"color": color}}),
    )
    .await;
    assert_eq!(s, 201, "{body}");
}

/// A kube-rs watcher of widgets through watchmux, folding what it sees into `name → color`.
fn widget_informer(
    url: &str,
    config: kube::runtime::watcher::Config,
) -> (
    Arc<parking_lot::Mutex<std::collections::BTreeMap<String, String>>>,
    tokio::task::JoinHandle<()>,
) {
    use futures_util::StreamExt;
    use kube::runtime::watcher::{self, Event};
    let client = kube::Client::try_from(kube::Config::new(url.parse().unwrap())).unwrap();
    let ar = kube::api::ApiResource {
        group: "example.com".into(),
        version: "v1".into(),
        api_version: "example.com/v1".into(),
        kind: "Widget".into(),
        plural: "widgets".into(),
    };
    let api = kube::Api::<kube::api::DynamicObject>::all_with(client, &ar);
    let state = Arc::new(parking_lot::Mutex::new(std::collections::BTreeMap::new()));
    let s = state.clone();
    let task = tokio::spawn(async move {
        let mut pending = std::collections::BTreeMap::new();
        let mut stream = std::pin::pin!(watcher::watcher(api, config));
        let color = |o: &kube::api::DynamicObject| {
            o.data["spec"]["color"].as_str().unwrap_or("").to_string()
        };
        let name = |o: &kube::api::DynamicObject| o.metadata.name.clone().unwrap_or_default();
        while let Some(ev) = stream.next().await {
            match ev {
                Ok(Event::Init) => pending.clear(),
                Ok(Event::InitApply(o)) => {
                    pending.insert(name(&o), color(&o));
                }
                Ok(Event::InitDone) => *s.lock() = std::mem::take(&mut pending),
                Ok(Event::Apply(o)) => {
                    s.lock().insert(name(&o), color(&o));
                }
                Ok(Event::Delete(o)) => {
                    s.lock().remove(&name(&o));
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    });
    (state, task)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crd_created_through_watchmux_is_cached_with_one_upstream_watch_and_its_deletion_ends_its_watchers()
 {
    let sim = sim().await;
    let px = on_demand(&sim, |_| {}).await;
    let crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    let (s, body) = send_json(
        Method::POST,
        &format!("{}{crds}", px.url),
        "application/json",
        &widgets_crd(),
    )
    .await;
    assert_eq!(s, 201, "{body}");
    widget(&px, "a", "blue").await;
    widget(&px, "b", "red").await;

    // The first read once the CRD watch has seen the CRD starts the kind's cache (one before
    // passes through and starts nothing).
    for _ in 0..100 {
        same_list(&px, &sim, WIDGETS).await;
        if px.proxy.cache("example.com", "v1", "widgets").is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let cache = until_cached(&px, "example.com", "widgets").await;
    assert_eq!(cache.info.selectable_fields, ["spec.color"]);

    // Informers (list-then-watch and watch-list) through watchmux, all on one upstream watch.
    let configs = [
        kube::runtime::watcher::Config::default(),
        kube::runtime::watcher::Config::default(),
        kube::runtime::watcher::Config::default().streaming_lists(),
        kube::runtime::watcher::Config::default().streaming_lists(),
        kube::runtime::watcher::Config::default().fields("spec.color=blue"),
    ];
    let informers: Vec<_> = configs
        .into_iter()
        .map(|c| widget_informer(&px.url, c))
        .collect();
    widget(&px, "c", "blue").await;
    let map = |pairs: &[(&str, &str)]| -> std::collections::BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(n, c)| (n.to_string(), c.to_string()))
            .collect()
    };
    let all = |want: &[(&str, &str)], blue: &[(&str, &str)]| {
        let (want, blue) = (map(want), map(blue));
        informers
            .iter()
            .enumerate()
            .all(|(i, (s, _))| *s.lock() == if i == 4 { blue.clone() } else { want.clone() })
    };
    let mut converged = false;
    for _ in 0..2000 {
        if all(
            &[("a", "blue"), ("b", "red"), ("c", "blue")],
            &[("a", "blue"), ("c", "blue")],
        ) {
            converged = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(converged, "the informers saw every widget");
    // A list-then-watch informer has its state from its LIST: its WATCH, which follows, may
    // not have reached the cache yet.
    for _ in 0..1000 {
        if cache.watcher_count() >= 5 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(cache.watcher_count(), 5, "every informer watches the cache");
    assert_eq!(sim_count(&sim, "widgets.example.com", "openWatches"), 1);
    assert_eq!(sim_count(&sim, "widgets.example.com", "watchRequests"), 1);
    // Field selectors on the CRD's selectable field, from the cache, as kube answers them.
    let (got, from_cache) = same_list(
        &px,
        &sim,
        &format!("{WIDGETS}?fieldSelector=spec.color%3Dred&resourceVersion=0"),
    )
    .await;
    assert!(from_cache);
    assert_eq!(names(&got), BTreeSet::from(["b".to_string()]));

    // Deleting the CRD: kube deletes every widget first (each a DELETED event to the
    // watchers), then the watchers' streams end and the resource is gone.
    let mut raw = watch(&format!(
        "{}{WIDGETS}?watch=1&resourceVersion={}",
        px.url,
        cache.rv()
    ))
    .await;
    let (s, _, body) = request(
        Method::DELETE,
        &format!("{}{crds}/widgets.example.com", px.url),
        &[],
        "",
    )
    .await;
    assert!(s.is_success(), "{}", String::from_utf8_lossy(&body));
    let mut deleted = BTreeSet::new();
    loop {
        match raw.next_line(Duration::from_secs(20)).await {
            Next::Line(l) => {
                let ev: Value = serde_json::from_slice(&l).unwrap();
                if ev["type"] == "DELETED" {
                    deleted.insert(
                        ev["object"]["metadata"]["name"]
                            .as_str()
                            .unwrap()
                            .to_string(),
                    );
                }
            }
            Next::End => break,
            other => panic!("the stream did not end cleanly: {other:?}"),
        }
    }
    assert_eq!(deleted, BTreeSet::from(["a", "b", "c"].map(String::from)));
    until_dropped(&px, "example.com", "widgets").await;
    assert_eq!(kind_changes(&px, "dropped_removed").await, 1);
    let (s, _, body) = request(Method::GET, &format!("{}{WIDGETS}", px.url), &[], "").await;
    let (ss, _, sim_body) = request(Method::GET, &format!("{}{WIDGETS}", sim.url()), &[], "").await;
    assert_eq!((s, &body), (ss, &sim_body));
    assert_eq!(s, 404);
    for (state, _) in &informers {
        assert!(state.lock().is_empty(), "every informer saw the deletions");
    }
    for (_, task) in informers {
        task.abort();
    }
}
