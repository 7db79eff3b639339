//! The seed corpus: requests as real clients send them (kubectl, client-go reflectors and
//! watch-lists, kubelets, metadata informers, protobuf clients, controllers writing), aimed at
//! the objects of the running simulator ([`Ctx`]: names, a recent resourceVersion, real
//! `continue` tokens read at the start of the run).
//!
//! Requests only: mutating them is [`super::mutate`]'s, choosing [`super::generate`]'s.

use rand::Rng;
use rand::rngs::StdRng;
use rand::seq::IndexedRandom;

use super::case::{Kind, Req};

/// kubectl's Accept for `get` (Table, then JSON).
pub const TABLE_ACCEPT: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
/// A metadata informer's Accept for LISTs.
pub const META_LIST_ACCEPT: &str =
    "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io,application/json";
/// A metadata informer's Accept for watches and GETs.
pub const META_ACCEPT: &str =
    "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io,application/json";
/// client-go's Accept with protobuf preferred.
pub const PROTOBUF_ACCEPT: &str = "application/vnd.kubernetes.protobuf, */*";
/// kubectl's User-Agent.
pub const KUBECTL_UA: &str = "kubectl/v1.36.2 (linux/amd64) kubernetes/7e5b6b2";
/// A controller's User-Agent.
pub const CONTROLLER_UA: &str = "kube-controller-manager/v1.36.2 (linux/amd64) kubernetes/7e5b6b2/system:serviceaccount:kube-system:fuzz";

/// What the running simulator holds, read at the start of a run.
#[derive(Debug, Clone, Default)]
pub struct Ctx {
    /// `Host` header value (watchmux's address).
    pub host: String,
    /// Namespaces.
    pub namespaces: Vec<String>,
    /// Pods (namespace, name).
    pub pods: Vec<(String, String)>,
    /// Nodes.
    pub nodes: Vec<String>,
    /// ConfigMaps (namespace, name).
    pub configmaps: Vec<(String, String)>,
    /// A resourceVersion of the pods at the start.
    pub rv: u64,
    /// `continue` tokens handed out by paged LISTs at the start.
    pub continue_tokens: Vec<String>,
}

impl Ctx {
    fn ns(&self, rng: &mut StdRng) -> String {
        self.namespaces
            .choose(rng)
            .cloned()
            .unwrap_or_else(|| "default".into())
    }

    fn pod(&self, rng: &mut StdRng) -> (String, String) {
        self.pods
            .choose(rng)
            .cloned()
            .unwrap_or_else(|| ("default".into(), "missing".into()))
    }

    fn node(&self, rng: &mut StdRng) -> String {
        self.nodes
            .choose(rng)
            .cloned()
            .unwrap_or_else(|| "node-0".into())
    }

    fn configmap(&self, rng: &mut StdRng) -> (String, String) {
        self.configmaps
            .choose(rng)
            .cloned()
            .unwrap_or_else(|| ("default".into(), "missing".into()))
    }

    fn token(&self, rng: &mut StdRng) -> String {
        self.continue_tokens
            .choose(rng)
            .cloned()
            .unwrap_or_default()
    }
}

/// A ConfigMap's JSON.
pub fn configmap_json(ns: &str, name: &str, value: &str) -> Vec<u8> {
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns, "labels": {"fuzz": "true"}},
        "data": {"key": value}
    })
    .to_string()
    .into_bytes()
}

/// A ConfigMap in kube's protobuf envelope.
pub fn configmap_protobuf(ns: &str, name: &str, value: &str) -> Vec<u8> {
    let json = configmap_json(ns, name, value);
    kube_wire::proto::message_for("v1", "ConfigMap")
        .and_then(|m| kube_wire::proto::json_to_proto(m, &json).ok())
        .map(|b| kube_wire::proto::envelope::wrap("v1", "ConfigMap", &b))
        .unwrap_or_default()
}

/// A minimal Pod's JSON.
pub fn pod_json(ns: &str, name: &str, node: &str) -> Vec<u8> {
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": {"app": "fuzz", "fuzz": "true"}},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busybox"}]}
    })
    .to_string()
    .into_bytes()
}

fn kubectl(r: Req) -> Req {
    r.header("User-Agent", KUBECTL_UA)
        .header("Accept", TABLE_ACCEPT)
        .header("Kubectl-Command", "kubectl get")
        .header("Kubectl-Session", "0f3d6c4e-6f1b-4c59-9d0b-2a9e5f0f1c11")
}

fn informer(r: Req, accept: &str) -> Req {
    r.header("User-Agent", CONTROLLER_UA)
        .header("Accept", accept)
        .header("Accept-Encoding", "gzip")
}

fn write(r: Req, content_type: &str) -> Req {
    r.header("User-Agent", CONTROLLER_UA)
        .header("Accept", "application/json, */*")
        .header("Content-Type", content_type)
}

/// The resources a real client's request may name (all served by the simulator; pods, nodes,
/// namespaces and configmaps cached by watchmux in a fuzz run).
pub const RESOURCES: &[(&str, &str, bool)] = &[
    ("", "pods", true),
    ("", "nodes", false),
    ("", "configmaps", true),
    ("", "namespaces", false),
    ("", "services", true),
    ("", "secrets", true),
    ("", "events", true),
    ("apps", "deployments", true),
    ("apps", "replicasets", true),
    ("batch", "jobs", true),
];

/// One real request, chosen at random, with its kind and a name for the report.
pub fn pick(ctx: &Ctx, rng: &mut StdRng, index: u64) -> (Kind, &'static str, Req) {
    let ns = ctx.ns(rng);
    let (pns, pod) = ctx.pod(rng);
    let node = ctx.node(rng);
    let rv = ctx.rv.to_string();
    let timeout = format!("timeoutSeconds={}", rng.random_range(1..600));
    let bookmarks = "allowWatchBookmarks=true";
    let watch = "watch=true";
    let limit = format!("limit={}", [1, 2, 5, 50, 500].choose(rng).unwrap_or(&500));
    match rng.random_range(0..34u32) {
        0 => (
            Kind::PagedList,
            "kubectl get pods -A",
            kubectl(Req::get("/api/v1/pods", &["limit=500"])),
        ),
        1 => (
            Kind::PagedList,
            "kubectl get pods -n",
            kubectl(Req::get(
                format!("/api/v1/namespaces/{ns}/pods"),
                &["limit=500"],
            )),
        ),
        2 => (
            Kind::Get,
            "kubectl get pod NAME",
            kubectl(Req::get(
                format!("/api/v1/namespaces/{pns}/pods/{pod}"),
                &[],
            )),
        ),
        3 => (
            Kind::PagedList,
            "kubectl get nodes -l",
            kubectl(Req::get(
                "/api/v1/nodes",
                &["labelSelector=kubernetes.io%2Fos%3Dlinux", "limit=500"],
            )),
        ),
        4 => (
            Kind::Watch,
            "kubectl get pods -w",
            kubectl(Req::get(
                format!("/api/v1/namespaces/{ns}/pods"),
                &[&format!("resourceVersion={rv}"), watch],
            )),
        ),
        5 => (
            Kind::Get,
            "kubectl get pod -o yaml",
            Req::get(format!("/api/v1/namespaces/{pns}/pods/{pod}"), &[])
                .header("User-Agent", KUBECTL_UA)
                .header("Accept", "application/json"),
        ),
        6 => (
            Kind::PagedList,
            "reflector LIST rv=0",
            informer(
                Req::get("/api/v1/pods", &["limit=500", "resourceVersion=0"]),
                PROTOBUF_ACCEPT,
            ),
        ),
        7 => (
            Kind::Watch,
            "reflector WATCH",
            informer(
                Req::get(
                    "/api/v1/pods",
                    &[bookmarks, &format!("resourceVersion={rv}"), &timeout, watch],
                ),
                "application/json, */*",
            ),
        ),
        8 => (
            Kind::WatchList,
            "watch-list",
            informer(
                Req::get(
                    "/api/v1/pods",
                    &[
                        bookmarks,
                        "resourceVersionMatch=NotOlderThan",
                        "sendInitialEvents=true",
                        &timeout,
                        watch,
                    ],
                ),
                PROTOBUF_ACCEPT,
            ),
        ),
        9 => (
            Kind::PagedList,
            "kubelet pods LIST",
            informer(
                Req::get(
                    "/api/v1/pods",
                    &[
                        &format!("fieldSelector=spec.nodeName%3D{node}"),
                        "limit=500",
                        "resourceVersion=0",
                    ],
                ),
                "application/vnd.kubernetes.protobuf,application/json",
            ),
        ),
        10 => (
            Kind::Watch,
            "kubelet pods WATCH",
            informer(
                Req::get(
                    "/api/v1/pods",
                    &[
                        bookmarks,
                        &format!("fieldSelector=spec.nodeName%3D{node}"),
                        &format!("resourceVersion={rv}"),
                        &timeout,
                        watch,
                    ],
                ),
                "application/vnd.kubernetes.protobuf,application/json",
            ),
        ),
        11 => (
            Kind::Get,
            "kubelet node GET",
            informer(
                Req::get(format!("/api/v1/nodes/{node}"), &["resourceVersion=0"]),
                "application/vnd.kubernetes.protobuf,application/json",
            ),
        ),
        12 => (
            Kind::Watch,
            "kubelet node WATCH",
            informer(
                Req::get(
                    "/api/v1/nodes",
                    &[
                        bookmarks,
                        &format!("fieldSelector=metadata.name%3D{node}"),
                        &format!("resourceVersion={rv}"),
                        &timeout,
                        watch,
                    ],
                ),
                "application/vnd.kubernetes.protobuf,application/json",
            ),
        ),
        13 => (
            Kind::PagedList,
            "paged consistent LIST",
            informer(Req::get("/api/v1/pods", &[&limit]), "application/json"),
        ),
        14 => (
            Kind::PagedList,
            "paged LIST continue",
            informer(
                Req::get(
                    "/api/v1/pods",
                    &[&format!("continue={}", ctx.token(rng)), &limit],
                ),
                "application/json",
            ),
        ),
        15 => (
            Kind::PagedList,
            "exact LIST",
            informer(
                Req::get(
                    "/api/v1/pods",
                    &[
                        &limit,
                        &format!("resourceVersion={rv}"),
                        "resourceVersionMatch=Exact",
                    ],
                ),
                "application/json",
            ),
        ),
        16 => (
            Kind::PagedList,
            "metadata informer LIST",
            informer(
                Req::get("/api/v1/configmaps", &["limit=500", "resourceVersion=0"]),
                META_LIST_ACCEPT,
            ),
        ),
        17 => (
            Kind::Watch,
            "metadata informer WATCH",
            informer(
                Req::get(
                    "/api/v1/configmaps",
                    &[bookmarks, &format!("resourceVersion={rv}"), &timeout, watch],
                ),
                META_ACCEPT,
            ),
        ),
        18 => (
            Kind::Get,
            "protobuf GET",
            informer(
                Req::get(format!("/api/v1/namespaces/{pns}/pods/{pod}"), &[]),
                "application/vnd.kubernetes.protobuf",
            ),
        ),
        19 => (
            Kind::Watch,
            "legacy watch path",
            informer(
                Req::get(
                    format!("/api/v1/watch/namespaces/{pns}/pods/{pod}"),
                    &[&format!("resourceVersion={rv}")],
                ),
                "application/json",
            ),
        ),
        20 => {
            let (group, resource, _) = RESOURCES.choose(rng).copied().unwrap_or(("", "pods", true));
            let base = if group.is_empty() {
                "/api/v1".to_string()
            } else {
                format!("/apis/{group}/v1")
            };
            let w = rng.random_bool(0.5);
            let q: Vec<&str> = if w {
                vec![watch, "resourceVersion=0"]
            } else {
                vec!["limit=500"]
            };
            (
                if w { Kind::Watch } else { Kind::PagedList },
                "informer of another resource",
                informer(
                    Req::get(format!("{base}/{resource}"), &q),
                    "application/json",
                ),
            )
        }
        21 => {
            let path = *[
                "/api",
                "/apis",
                "/api/v1",
                "/apis/apps/v1",
                "/apis/batch/v1",
                "/apis/apiextensions.k8s.io/v1",
                "/version",
                "/openapi/v2",
                "/openapi/v3",
                "/healthz",
                "/readyz",
                "/livez",
                "/metrics",
                "/readyz?verbose",
                "/",
            ]
            .choose(rng)
            .unwrap_or(&"/api");
            let (p, q) = path.split_once('?').unwrap_or((path, ""));
            let q: Vec<&str> = if q.is_empty() { vec![] } else { vec![q] };
            (
                Kind::Discovery,
                "discovery",
                Req::get(p, &q)
                    .header("User-Agent", KUBECTL_UA)
                    .header("Accept", "application/json, */*"),
            )
        }
        22 => (
            Kind::Write,
            "create configmap",
            write(
                Req::get(
                    format!("/api/v1/namespaces/{ns}/configmaps"),
                    &["fieldManager=fuzz"],
                )
                .with_body("POST", configmap_json(&ns, &format!("fuzz-{index}"), "v")),
                "application/json",
            ),
        ),
        23 => (
            Kind::Write,
            "create configmap protobuf",
            write(
                Req::get(format!("/api/v1/namespaces/{ns}/configmaps"), &[]).with_body(
                    "POST",
                    configmap_protobuf(&ns, &format!("fuzz-pb-{index}"), "v"),
                ),
                "application/vnd.kubernetes.protobuf",
            )
            .header("Accept", "application/vnd.kubernetes.protobuf"),
        ),
        24 => {
            let (cns, cm) = ctx.configmap(rng);
            (
                Kind::Write,
                "update configmap",
                write(
                    Req::get(format!("/api/v1/namespaces/{cns}/configmaps/{cm}"), &[])
                        .with_body("PUT", configmap_json(&cns, &cm, &index.to_string())),
                    "application/json",
                ),
            )
        }
        25 => {
            let (cns, cm) = ctx.configmap(rng);
            let (ct, body): (&str, Vec<u8>) = match rng.random_range(0..4u32) {
                0 => ("application/merge-patch+json", br#"{"data":{"patched":"yes"}}"#.to_vec()),
                1 => (
                    "application/strategic-merge-patch+json",
                    br#"{"metadata":{"labels":{"patched":"yes"}}}"#.to_vec(),
                ),
                2 => (
                    "application/json-patch+json",
                    br#"[{"op":"add","path":"/data/j","value":"x"}]"#.to_vec(),
                ),
                _ => (
                    "application/apply-patch+yaml",
                    format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {cm}\n  namespace: {cns}\ndata:\n  applied: \"yes\"\n").into_bytes(),
                ),
            };
            let q: Vec<&str> = if ct.contains("apply") {
                vec!["fieldManager=fuzz", "force=true"]
            } else {
                vec![]
            };
            (
                Kind::Write,
                "patch configmap",
                write(
                    Req::get(format!("/api/v1/namespaces/{cns}/configmaps/{cm}"), &q)
                        .with_body("PATCH", body),
                    ct,
                ),
            )
        }
        26 => {
            let (cns, cm) = ctx.configmap(rng);
            (
                Kind::Write,
                "delete configmap",
                write(
                    Req::get(format!("/api/v1/namespaces/{cns}/configmaps/{cm}"), &[])
                        .with_body("DELETE", &b"{\"kind\":\"DeleteOptions\",\"apiVersion\":\"v1\",\"propagationPolicy\":\"Background\"}"[..]),
                    "application/json",
                ),
            )
        }
        27 => (
            Kind::Write,
            "delete pod",
            write(
                Req::get(
                    format!("/api/v1/namespaces/{pns}/pods/{pod}"),
                    &["gracePeriodSeconds=0"],
                )
                .with_body("DELETE", Vec::new()),
                "application/json",
            ),
        ),
        28 => (
            Kind::Write,
            "patch node labels",
            write(
                Req::get(format!("/api/v1/nodes/{node}"), &[]).with_body(
                    "PATCH",
                    format!("{{\"metadata\":{{\"labels\":{{\"fuzz\":\"{index}\"}}}}}}"),
                ),
                "application/strategic-merge-patch+json",
            ),
        ),
        29 => (
            Kind::Write,
            "create pod",
            write(
                Req::get(format!("/api/v1/namespaces/{ns}/pods"), &[])
                    .with_body("POST", pod_json(&ns, &format!("fuzz-{index}"), &node)),
                "application/json",
            ),
        ),
        30 => (
            Kind::Write,
            "deletecollection configmaps",
            write(
                Req::get(
                    format!("/api/v1/namespaces/{ns}/configmaps"),
                    &["labelSelector=fuzz%3Dtrue"],
                )
                .with_body("DELETE", Vec::new()),
                "application/json",
            ),
        ),
        31 => (
            Kind::Write,
            "dry-run create",
            write(
                Req::get(
                    format!("/api/v1/namespaces/{ns}/configmaps"),
                    &["dryRun=All"],
                )
                .with_body("POST", configmap_json(&ns, "dry", "v")),
                "application/json",
            ),
        ),
        32 => (
            Kind::Get,
            "pod status",
            informer(
                Req::get(format!("/api/v1/namespaces/{pns}/pods/{pod}/status"), &[]),
                "application/json",
            ),
        ),
        _ => (
            Kind::Write,
            "patch pod status",
            write(
                Req::get(format!("/api/v1/namespaces/{pns}/pods/{pod}/status"), &[]).with_body(
                    "PATCH",
                    &br#"{"status":{"conditions":[{"type":"Fuzz","status":"True"}]}}"#[..],
                ),
                "application/strategic-merge-patch+json",
            ),
        ),
    }
}
