//! One simulated node: what its kubelet and kube-proxy read and write, on its one HTTP/2
//! connection ([`super::conn`]), as the research notes' section 3 lists them from their sources.
//!
//! * kubelet: its pods (`fieldSelector=spec.nodeName=<node>`), its Node
//!   (`fieldSelector=metadata.name=<node>`), Services (`fieldSelector=spec.clusterIP!=None`),
//!   RuntimeClasses, CSIDrivers, and one informer per ConfigMap and Secret its pods reference
//!   (`fieldSelector=metadata.name=<name>` in the pod's namespace; `kube-root-ca.crt` of each
//!   namespace with a pod on the node comes through the pods' projected token volume), opened
//!   when the first pod referencing it appears and closed when the last one goes (the
//!   watch-based ConfigMap/Secret managers' reference counting); a Lease PUT to
//!   `kube-node-lease/<node>` every 10 s (created first when missing; JSON bodies).
//! * kube-proxy: Services and EndpointSlices with
//!   `labelSelector=!service.kubernetes.io/service-proxy-name,!service.kubernetes.io/headless`,
//!   and its Node by name.
//!
//! Holds what the convergence check reads (the pods the kubelet knows, the object informers it
//! has open and what each holds); the informers' loop is [`super::informer`]'s.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use bytes::Bytes;
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::conn::{self, NodeConn};
use super::counters::Fleet;
use super::informer::{self, Counted, Spec, State, Store};
use super::wire::{self, RefKind};

/// kube-proxy's label selector (services and endpointslices), URL-encoded.
const PROXY_SELECTOR: &str = "labelSelector=%21service.kubernetes.io%2Fservice-proxy-name%2C%21service.kubernetes.io%2Fheadless";
/// client-go's minimum watch timeout (`minWatchTimeout`).
const MIN_WATCH_TIMEOUT: Duration = Duration::from_secs(300);
/// The kubelet's ConfigMap and Secret reflectors' minimum (`watch_based_manager.go`).
const OBJECT_WATCH_TIMEOUT: Duration = Duration::from_secs(1800);
/// The kubelet's Lease renew interval.
const LEASE_RENEW: Duration = Duration::from_secs(10);

/// A ConfigMap or Secret a node's pods reference.
pub type ObjKey = (RefKind, Box<str>, Box<str>);

/// A pod: namespace and name.
pub type PodKey = (Box<str>, Box<str>);

/// What a pod references: kind and name (in the pod's namespace).
pub type PodRefs = Vec<(RefKind, Box<str>)>;

/// One informer of a ConfigMap or Secret, open while pods reference it.
pub struct ObjInformer {
    /// Pods referencing it.
    refs: u32,
    /// Its state (synced, streaming).
    pub state: Arc<State>,
    /// Objects it holds (0 or 1).
    pub objects: Arc<std::sync::atomic::AtomicI64>,
    stop: CancellationToken,
}

/// What the convergence check reads of a node.
#[derive(Default)]
pub struct View {
    /// The pods the kubelet's informer holds, by (namespace, name), with what each references.
    pub pods: BTreeMap<PodKey, PodRefs>,
    /// The ConfigMap and Secret informers open.
    pub objects: BTreeMap<ObjKey, ObjInformer>,
}

/// A running node.
pub struct Node {
    /// Its name (`node-00042`).
    pub name: String,
    /// What the check reads.
    pub view: Arc<Mutex<View>>,
    /// Its fixed informers' states (pods first), for the check.
    pub informers: Vec<Arc<State>>,
}

/// What a node's tasks share.
#[derive(Clone)]
struct Ctx {
    conn: NodeConn,
    fleet: Arc<Fleet>,
    tasks: TaskTracker,
    stop: CancellationToken,
}

impl Ctx {
    fn spawn(
        &self,
        spec: Spec,
        store: impl Store + 'static,
        stop: CancellationToken,
    ) -> Arc<State> {
        informer::spawn(
            &self.tasks,
            spec,
            self.conn.clone(),
            self.fleet.clone(),
            store,
            stop,
        )
    }
}

fn selector(key: &str, value: &str) -> String {
    let q: String = form_urlencoded::Serializer::new(String::new())
        .append_pair(key, value)
        .finish();
    q
}

/// Starts node `name`: its connection to `ep` (its requests carrying `token` as their bearer
/// token when given), its kubelet's and kube-proxy's informers, its Lease loop; everything
/// stops with `stop`.
pub fn start(
    name: String,
    ep: super::super::client::Endpoint,
    token: Option<&str>,
    fleet: Arc<Fleet>,
    tasks: &TaskTracker,
    stop: CancellationToken,
) -> Node {
    let conn = conn::connect(tasks, ep, token, fleet.clone(), stop.clone());
    let ctx = Ctx {
        conn,
        fleet,
        tasks: tasks.clone(),
        stop: stop.clone(),
    };
    let view = Arc::new(Mutex::new(View::default()));
    let own = selector("fieldSelector", &format!("metadata.name={name}"));
    let fixed = |path: &str, sel: String| Spec {
        path: path.to_string(),
        selector: sel,
        min_timeout: MIN_WATCH_TIMEOUT,
    };
    let pods = Pods {
        ctx: ctx.clone(),
        view: view.clone(),
        seen: None,
    };
    let mut informers = vec![ctx.spawn(
        fixed(
            "/api/v1/pods",
            selector("fieldSelector", &format!("spec.nodeName={name}")),
        ),
        pods,
        stop.clone(),
    )];
    // The kubelet's other informers, then kube-proxy's.
    for spec in [
        fixed("/api/v1/nodes", own.clone()),
        fixed(
            "/api/v1/services",
            selector("fieldSelector", "spec.clusterIP!=None"),
        ),
        fixed("/apis/node.k8s.io/v1/runtimeclasses", String::new()),
        fixed("/apis/storage.k8s.io/v1/csidrivers", String::new()),
        fixed("/api/v1/services", PROXY_SELECTOR.to_string()),
        fixed(
            "/apis/discovery.k8s.io/v1/endpointslices",
            PROXY_SELECTOR.to_string(),
        ),
        fixed("/api/v1/nodes", own),
    ] {
        informers.push(ctx.spawn(spec, Counted::default(), stop.clone()));
    }
    tasks.spawn(lease_loop(name.clone(), ctx));
    Node {
        name,
        view,
        informers,
    }
}

/// The kubelet's pod informer's store: the pods, and the ConfigMap and Secret informers their
/// references keep open.
struct Pods {
    ctx: Ctx,
    view: Arc<Mutex<View>>,
    /// During a watch-list: the pods it has delivered (the others are gone at its end).
    seen: Option<BTreeSet<PodKey>>,
}

impl Pods {
    /// Adds one reference to `key`, opening its informer on the first.
    fn reference(&self, view: &mut View, key: ObjKey) {
        if let Some(o) = view.objects.get_mut(&key) {
            o.refs += 1;
            return;
        }
        let (kind, ns, n) = &key;
        let spec = Spec {
            path: format!("/api/v1/namespaces/{ns}/{}", kind.resource()),
            selector: selector("fieldSelector", &format!("metadata.name={n}")),
            min_timeout: OBJECT_WATCH_TIMEOUT,
        };
        let store = Counted::default();
        let objects = store.objects.clone();
        let stop = self.ctx.stop.child_token();
        let state = self.ctx.spawn(spec, store, stop.clone());
        view.objects.insert(
            key,
            ObjInformer {
                refs: 1,
                state,
                objects,
                stop,
            },
        );
    }

    /// Drops one reference to `key`, closing its informer with the last.
    fn unreference(view: &mut View, key: &ObjKey) {
        if let Some(o) = view.objects.get_mut(key) {
            o.refs -= 1;
            if o.refs == 0 {
                o.stop.cancel();
                view.objects.remove(key);
            }
        }
    }

    /// Forgets pod `key` and its references.
    fn forget(view: &mut View, key: &PodKey) {
        if let Some(refs) = view.pods.remove(key) {
            for (k, n) in refs {
                Pods::unreference(view, &(k, key.0.clone(), n));
            }
        }
    }
}

impl Store for Pods {
    fn begin_list(&mut self) {
        self.seen = Some(BTreeSet::new());
    }

    fn apply(&mut self, ty: &[u8], object: &[u8], meta: &[u8]) {
        let key: PodKey = (
            String::from_utf8_lossy(wire::namespace(meta)).into(),
            String::from_utf8_lossy(wire::name(meta)).into(),
        );
        let mut view = self.view.lock();
        if ty == b"DELETED" {
            Pods::forget(&mut view, &key);
            return;
        }
        if let Some(seen) = &mut self.seen {
            seen.insert(key.clone());
        }
        let mut refs: Vec<(RefKind, &[u8])> = Vec::new();
        wire::pod_refs(object, |k, n| refs.push((k, n)));
        refs.sort_unstable();
        refs.dedup();
        let same = view.pods.get(&key).is_some_and(|old| {
            old.len() == refs.len()
                && old
                    .iter()
                    .zip(&refs)
                    .all(|((ok, on), (k, n))| ok == k && on.as_bytes() == *n)
        });
        if same {
            return;
        }
        let refs: PodRefs = refs
            .into_iter()
            .map(|(k, n)| (k, String::from_utf8_lossy(n).into()))
            .collect();
        for (k, n) in &refs {
            self.reference(&mut view, (*k, key.0.clone(), n.clone()));
        }
        // The new references first, so an object still referenced keeps its informer.
        if let Some(old) = view.pods.insert(key.clone(), refs) {
            for (k, n) in old {
                Pods::unreference(&mut view, &(k, key.0.clone(), n));
            }
        }
    }

    fn end_list(&mut self) {
        let Some(seen) = self.seen.take() else {
            return;
        };
        let mut view = self.view.lock();
        let gone: Vec<PodKey> = view
            .pods
            .keys()
            .filter(|k| !seen.contains(*k))
            .cloned()
            .collect();
        for k in &gone {
            Pods::forget(&mut view, k);
        }
    }
}

/// The Lease's JSON, renewed now (`resourceVersion` when updating).
fn lease_body(node: &str, rv: Option<&str>) -> Bytes {
    let now = kube_sim::util::now_unix_nanos();
    let secs = kube_wire::table::format_rfc3339(now as i128);
    // metav1.MicroTime: microseconds.
    let micro = format!(
        "{}.{:06}Z",
        secs.trim_end_matches('Z'),
        (now / 1000) % 1_000_000
    );
    let mut meta = serde_json::json!({"name": node, "namespace": "kube-node-lease"});
    if let Some(rv) = rv {
        meta["resourceVersion"] = rv.into();
    }
    let lease = serde_json::json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": meta,
        "spec": {"holderIdentity": node, "leaseDurationSeconds": 40, "renewTime": micro},
    });
    Bytes::from(lease.to_string())
}

/// The `metadata.resourceVersion` of a JSON object (the first `resourceVersion` in its body).
fn json_rv(body: &[u8]) -> Option<String> {
    let key = b"\"resourceVersion\":\"";
    let i = memchr::memmem::find(body, key)?;
    let rest = &body[i + key.len()..];
    let end = memchr::memchr(b'"', rest)?;
    Some(String::from_utf8_lossy(&rest[..end]).into_owned())
}

/// The kubelet's node lease: GET it, create it when missing, then PUT it every 10 s (±4 %
/// jitter, as the lease controller's `JitterUntil`); a conflict re-reads it.
async fn lease_loop(node: String, mut ctx: Ctx) {
    let path = format!(
        "{}/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases",
        ctx.conn.base
    );
    let own = format!("{path}/{node}");
    let mut rv: Option<String> = None;
    loop {
        let Some(mut sender) = ctx.conn.sender(&ctx.stop).await else {
            return;
        };
        let t0 = Instant::now();
        let answer = if rv.is_none() {
            let got = conn::exchange(
                &ctx.conn,
                &mut sender,
                http::Method::GET,
                &own,
                "application/json",
                Bytes::new(),
            )
            .await;
            match got {
                Ok(a) if a.status == 404 => {
                    conn::exchange(
                        &ctx.conn,
                        &mut sender,
                        http::Method::POST,
                        &path,
                        "application/json",
                        lease_body(&node, None),
                    )
                    .await
                }
                other => other,
            }
        } else {
            conn::exchange(
                &ctx.conn,
                &mut sender,
                http::Method::PUT,
                &own,
                "application/json",
                lease_body(&node, rv.as_deref()),
            )
            .await
        };
        let fleet = &ctx.fleet;
        let wait = match answer {
            Ok(a) if (200..300).contains(&a.status) => {
                fleet.lease_latency.record(t0.elapsed().as_micros() as u64);
                Fleet::add(&fleet.counts.lease_ok);
                rv = json_rv(&a.body);
                LEASE_RENEW.mul_f64(1.0 + 0.04 * rand::random::<f64>())
            }
            Ok(a) if a.status == 429 => {
                Fleet::add(&fleet.counts.lease_429);
                Duration::from_secs(a.retry_after.unwrap_or(1))
            }
            Ok(a) => {
                Fleet::add(&fleet.counts.lease_errors);
                if a.status == 409 {
                    rv = None;
                } else {
                    fleet.error(|| {
                        format!(
                            "Lease of {node}: {} {}",
                            a.status,
                            String::from_utf8_lossy(&a.body)
                        )
                    });
                }
                Duration::from_secs(1)
            }
            Err(_) => {
                Fleet::add(&fleet.counts.lease_errors);
                Duration::from_secs(1)
            }
        };
        tokio::select! {
            _ = ctx.stop.cancelled() => return,
            _ = tokio::time::sleep(wait) => {}
        }
    }
}

impl Node {
    /// Whether every informer of the node (the fixed ones and the per-object ones) is synced.
    pub fn synced(&self) -> bool {
        self.informers
            .iter()
            .all(|s| s.synced.load(Ordering::Relaxed))
            && self
                .view
                .lock()
                .objects
                .values()
                .all(|o| o.state.synced.load(Ordering::Relaxed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_bodies_carry_micro_time_and_their_resource_version() {
        let b = lease_body("node-00001", Some("77"));
        let v: serde_json::Value = serde_json::from_slice(&b).unwrap();
        assert_eq!(v["metadata"]["resourceVersion"], "77");
        let t = v["spec"]["renewTime"].as_str().unwrap();
        assert_eq!(t.len(), "2026-01-01T00:00:00.000000Z".len(), "{t}");
        assert_eq!(json_rv(&b).as_deref(), Some("77"));
        assert_eq!(json_rv(b"{}"), None);
        assert_eq!(
            selector("fieldSelector", "spec.clusterIP!=None"),
            "fieldSelector=spec.clusterIP%21%3DNone"
        );
    }
}
