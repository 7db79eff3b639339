//! A synthetic cluster that looks like a real one, for load tests, benchmarks and tests.
//!
//! Objects are plain v1 JSON as a client would create them (no `uid`, `resourceVersion` or
//! `creationTimestamp`: the store fills those). Everything random comes from the caller's RNG,
//! so a seeded RNG gives byte-identical objects. Pods look like Deployment pods in a busy
//! cluster: labels, annotations, a ReplicaSet owner, server-side-apply `managedFields` for the
//! controller-manager and the kubelet, 1–3 containers with probes, env, resources and mounts,
//! and a kubelet-written `Running` status; their JSON is 3–8 KB.
//!
//! Builds and mutates JSON values only: it never writes to the store (the simulator's loader and
//! [`super::churn`] do) and never reads the clock.

use rand::Rng;
use serde_json::{Map, Value, json};

use kube_wire::table::{format_rfc3339, parse_rfc3339};

/// Shape of a synthetic cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FleetSpec {
    /// Nodes (`node-0` …).
    pub nodes: usize,
    /// Pods, spread round-robin over the nodes and namespaces.
    pub pods: usize,
    /// Namespaces the pods are spread over.
    pub namespaces: usize,
    /// Seed of every random choice, so a fleet is reproducible.
    pub seed: u64,
}

/// Annotation that carries a write time, used to measure delivery latency.
pub const WRITE_TIME_ANNOTATION: &str = "watchmux.dev/write-time-ns";

/// Time base of generated timestamps (2026-01-01T00:00:00Z) used by [`pod`].
pub const FLEET_EPOCH_UNIX: i64 = 1_767_225_600;

const NS: i128 = 1_000_000_000;

/// Namespace names used by the fleet: `fleet-0` .. `fleet-{n-1}`.
pub fn namespace_names(spec: &FleetSpec) -> Vec<String> {
    (0..spec.namespaces).map(|i| format!("fleet-{i}")).collect()
}

/// A Namespace object for `name` (status as the namespace strategy sets it).
pub fn namespace(name: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/metadata.name": name, "watchmux.dev/fleet": "true"}
        },
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"}
    })
}

/// Name of node `index`: `node-00000`, `node-00001`, ...
pub fn node_name(index: usize) -> String {
    format!("node-{index:05}")
}

/// Namespace of fleet pod `index` (round robin over [`namespace_names`]).
pub fn pod_namespace(spec: &FleetSpec, index: usize) -> String {
    format!("fleet-{}", index % spec.namespaces.max(1))
}

/// Node of fleet pod `index` (spread evenly over the nodes).
pub fn pod_node(spec: &FleetSpec, index: usize) -> String {
    node_name(index.wrapping_mul(7919) % spec.nodes.max(1))
}

// ---------------------------------------------------------------------------------------------
// Small deterministic helpers

/// FNV-1a, for values derived from names rather than from the RNG.
pub(crate) fn fnv(parts: &[&str]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for b in p.bytes().chain(std::iter::once(0xff)) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h
}

/// Alphabet of kube's generated name suffixes (`k8s.io/apimachinery/pkg/util/rand`).
const NAME_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

pub(crate) fn alphabet_string(mut n: u64, len: usize) -> String {
    let mut s = String::with_capacity(len);
    for _ in 0..len {
        s.push(NAME_ALPHABET[(n % 27) as usize] as char);
        n /= 27;
    }
    s
}

/// A quantity as kube-apiserver writes it back (`"2048Mi"` is `"2Gi"`): generated objects are
/// stored as they are, so they must be canonical already (see `Store::load_canonical`).
fn quantity(s: String) -> String {
    kube_wire::proto::canonical_quantity(&s).unwrap_or(s)
}

pub(crate) fn hex(rng: &mut impl Rng, bytes: usize) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes * 2);
    for _ in 0..bytes {
        let b: u8 = rng.random();
        s.push(DIGITS[usize::from(b >> 4)] as char);
        s.push(DIGITS[usize::from(b & 15)] as char);
    }
    s
}

pub(crate) fn uuid_from(a: u64, b: u64) -> String {
    let x = (u128::from(a) << 64) | u128::from(b);
    let h = format!("{x:032x}");
    // Version 4 / RFC 4122 variant nibbles, like the apiserver's UIDs.
    format!(
        "{}-{}-4{}-{}{}-{}",
        &h[0..8],
        &h[8..12],
        &h[13..16],
        ["8", "9", "a", "b"][(a & 3) as usize],
        &h[17..20],
        &h[20..32]
    )
}

fn uuid(rng: &mut impl Rng) -> String {
    uuid_from(rng.random(), rng.random())
}

pub(crate) fn ts(unix: i64) -> String {
    format_rfc3339(i128::from(unix) * NS)
}

/// `n` as a dotted IPv4 address.
pub(crate) fn ipv4(n: u32) -> String {
    format!(
        "{}.{}.{}.{}",
        n >> 24,
        (n >> 16) & 0xff,
        (n >> 8) & 0xff,
        n & 0xff
    )
}

/// InternalIP of node `index`: 10.64.0.2 onwards.
fn node_ip(index: usize) -> String {
    ipv4(0x0a40_0000u32.wrapping_add(index as u32 + 2))
}

/// Pod CIDR base of node `index`: 10.128.0.0/24, 10.128.1.0/24, ...
fn pod_cidr_base(index: usize) -> u32 {
    0x0a80_0000u32.wrapping_add(((index as u32) & 0x7fff) << 8)
}

/// Node index of a node name: the trailing number of `node-00042`, else a hash.
pub(crate) fn node_index(node: &str) -> usize {
    let digits: String = node
        .chars()
        .rev()
        .take_while(char::is_ascii_digit)
        .collect();
    let digits: String = digits.chars().rev().collect();
    match digits.parse::<usize>() {
        Ok(n) if !digits.is_empty() => n,
        _ => (fnv(&[node]) % 32_768) as usize,
    }
}

// ---------------------------------------------------------------------------------------------
// Nodes

struct InstanceType {
    name: &'static str,
    cpu: u32,
    mem_gib: u32,
}

const INSTANCE_TYPES: &[InstanceType] = &[
    InstanceType {
        name: "m6i.xlarge",
        cpu: 4,
        mem_gib: 16,
    },
    InstanceType {
        name: "m6i.2xlarge",
        cpu: 8,
        mem_gib: 32,
    },
    InstanceType {
        name: "m6i.4xlarge",
        cpu: 16,
        mem_gib: 64,
    },
    InstanceType {
        name: "r6i.2xlarge",
        cpu: 8,
        mem_gib: 64,
    },
];

const REGION: &str = "us-east-1";
const ZONES: &[&str] = &["us-east-1a", "us-east-1b", "us-east-1c"];

/// The zone (`topology.kubernetes.io/zone`) of node `index`.
pub fn node_zone(index: usize) -> &'static str {
    ZONES[index % ZONES.len()]
}
const KUBELET_VERSIONS: &[&str] = &["v1.34.2", "v1.34.2", "v1.34.2", "v1.34.1"];
const NODE_IMAGES: &[(&str, &str, u64)] = &[
    ("registry.k8s.io/kube-proxy", "v1.34.2", 30_912_411),
    ("docker.io/envoyproxy/envoy", "v1.31.2", 64_381_220),
    ("cr.fluentbit.io/fluent/fluent-bit", "3.1.9", 35_127_844),
    ("registry.k8s.io/pause", "3.10", 320_368),
    ("registry.k8s.io/coredns/coredns", "v1.12.0", 20_938_885),
];

/// A realistic Node object named `node-{index:05}` (no `uid`/`resourceVersion`/
/// `creationTimestamp`): topology and instance labels, capacity/allocatable, the kubelet's four
/// conditions (Ready=True), addresses, nodeInfo (kubelet v1.34.x, containerd 2.0), daemon
/// endpoints, runtime handlers and a few images.
pub fn node(index: usize, rng: &mut impl Rng) -> Value {
    let name = node_name(index);
    let it = &INSTANCE_TYPES[rng.random_range(0..INSTANCE_TYPES.len())];
    let zone = node_zone(index);
    let kubelet = KUBELET_VERSIONS[rng.random_range(0..KUBELET_VERSIONS.len())];
    let ip = node_ip(index);
    let cidr_base = pod_cidr_base(index);
    let cidr = format!("{}/24", ipv4(cidr_base));
    let booted =
        FLEET_EPOCH_UNIX - 86_400 * rng.random_range(1..60i64) - rng.random_range(0..86_400i64);
    let heartbeat = FLEET_EPOCH_UNIX - rng.random_range(0..40i64);

    let mem_ki = u64::from(it.mem_gib) * 1024 * 1024 - 360_000 - rng.random_range(0..4096u64);
    let alloc_mem_ki = mem_ki - u64::from(it.mem_gib) * 100_000 - 100 * 1024;
    let alloc_cpu_m = it.cpu * 1000 - 60 - it.cpu * 10;
    let disk_ki: u64 = 101_430_960;

    let condition = |ty: &str, status: &str, reason: &str, message: &str| {
        json!({
            "type": ty,
            "status": status,
            "lastHeartbeatTime": ts(heartbeat),
            "lastTransitionTime": ts(booted + 25),
            "reason": reason,
            "message": message
        })
    };
    let images: Vec<Value> = NODE_IMAGES
        .iter()
        .map(|(repo, tag, size)| {
            let digest = hex(rng, 32);
            json!({
                "names": [format!("{repo}@sha256:{digest}"), format!("{repo}:{tag}")],
                "sizeBytes": size
            })
        })
        .collect();
    let machine_id = hex(rng, 16);
    let system_uuid = uuid(rng);
    let boot_id = uuid(rng);

    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "beta.kubernetes.io/arch": "amd64",
                "beta.kubernetes.io/instance-type": it.name,
                "beta.kubernetes.io/os": "linux",
                "failure-domain.beta.kubernetes.io/region": REGION,
                "failure-domain.beta.kubernetes.io/zone": zone,
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "node-role.kubernetes.io/worker": "",
                "node.kubernetes.io/instance-type": it.name,
                "topology.kubernetes.io/region": REGION,
                "topology.kubernetes.io/zone": zone,
                "watchmux.dev/pool": format!("pool-{}", index % 4)
            },
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true"
            }
        },
        "spec": {
            "podCIDR": cidr,
            "podCIDRs": [cidr],
            "providerID": format!("aws:///{zone}/i-{}", hex(rng, 8).get(..17).unwrap_or_default())
        },
        "status": {
            "capacity": {
                "cpu": it.cpu.to_string(),
                "ephemeral-storage": quantity(format!("{disk_ki}Ki")),
                "hugepages-1Gi": "0",
                "hugepages-2Mi": "0",
                "memory": quantity(format!("{mem_ki}Ki")),
                "pods": "110"
            },
            "allocatable": {
                "cpu": quantity(format!("{alloc_cpu_m}m")),
                "ephemeral-storage": "93478772582",
                "hugepages-1Gi": "0",
                "hugepages-2Mi": "0",
                "memory": quantity(format!("{alloc_mem_ki}Ki")),
                "pods": "110"
            },
            "conditions": [
                condition("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
                condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                condition("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
                condition("Ready", "True", "KubeletReady", "kubelet is posting ready status")
            ],
            "addresses": [
                {"type": "InternalIP", "address": ip},
                {"type": "InternalDNS", "address": format!("ip-{}.ec2.internal", ip.replace('.', "-"))},
                {"type": "Hostname", "address": name}
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": machine_id,
                "systemUUID": system_uuid,
                "bootID": boot_id,
                "kernelVersion": "6.8.0-1021-aws",
                "osImage": "Ubuntu 24.04.2 LTS",
                "containerRuntimeVersion": "containerd://2.0.5",
                "kubeletVersion": kubelet,
                "kubeProxyVersion": "",
                "operatingSystem": "linux",
                "architecture": "amd64"
            },
            "images": images,
            "runtimeHandlers": [
                {"name": "runc", "features": {"recursiveReadOnlyMounts": true, "userNamespaces": true}},
                {"name": "", "features": {"recursiveReadOnlyMounts": true, "userNamespaces": true}}
            ],
            "features": {"supplementalGroupsPolicy": true}
        }
    })
}

// ---------------------------------------------------------------------------------------------
// Pods

struct App {
    name: &'static str,
    tier: &'static str,
    port: u16,
    cpu_m: u32,
    mem_mi: u32,
    /// Requests equal limits (QoS Guaranteed).
    guaranteed: bool,
}

const APPS: &[App] = &[
    App {
        name: "frontend",
        tier: "web",
        port: 8080,
        cpu_m: 250,
        mem_mi: 256,
        guaranteed: false,
    },
    App {
        name: "checkout",
        tier: "backend",
        port: 8080,
        cpu_m: 200,
        mem_mi: 256,
        guaranteed: false,
    },
    App {
        name: "cart",
        tier: "backend",
        port: 7070,
        cpu_m: 100,
        mem_mi: 128,
        guaranteed: true,
    },
    App {
        name: "catalog",
        tier: "backend",
        port: 3550,
        cpu_m: 150,
        mem_mi: 192,
        guaranteed: false,
    },
    App {
        name: "payments",
        tier: "backend",
        port: 50051,
        cpu_m: 100,
        mem_mi: 128,
        guaranteed: true,
    },
    App {
        name: "search",
        tier: "backend",
        port: 9200,
        cpu_m: 500,
        mem_mi: 1024,
        guaranteed: false,
    },
    App {
        name: "recommendation",
        tier: "backend",
        port: 8080,
        cpu_m: 300,
        mem_mi: 512,
        guaranteed: false,
    },
    App {
        name: "auth",
        tier: "backend",
        port: 8443,
        cpu_m: 100,
        mem_mi: 128,
        guaranteed: false,
    },
    App {
        name: "inventory",
        tier: "backend",
        port: 8080,
        cpu_m: 200,
        mem_mi: 256,
        guaranteed: false,
    },
    App {
        name: "shipping",
        tier: "backend",
        port: 50051,
        cpu_m: 100,
        mem_mi: 96,
        guaranteed: false,
    },
    App {
        name: "notification",
        tier: "worker",
        port: 8080,
        cpu_m: 50,
        mem_mi: 64,
        guaranteed: false,
    },
    App {
        name: "ledger",
        tier: "backend",
        port: 5432,
        cpu_m: 400,
        mem_mi: 768,
        guaranteed: true,
    },
    App {
        name: "gateway",
        tier: "edge",
        port: 8443,
        cpu_m: 250,
        mem_mi: 256,
        guaranteed: false,
    },
    App {
        name: "sessions",
        tier: "cache",
        port: 6379,
        cpu_m: 200,
        mem_mi: 512,
        guaranteed: true,
    },
    App {
        name: "analytics",
        tier: "worker",
        port: 8080,
        cpu_m: 300,
        mem_mi: 384,
        guaranteed: false,
    },
    App {
        name: "reviews",
        tier: "backend",
        port: 9080,
        cpu_m: 100,
        mem_mi: 128,
        guaranteed: false,
    },
];

/// A sidecar: name, image and an optional named port.
type Sidecar = (&'static str, &'static str, Option<(&'static str, u16)>);

const SIDECARS: &[Sidecar] = &[
    (
        "envoy",
        "docker.io/envoyproxy/envoy:v1.31.2",
        Some(("admin", 9901)),
    ),
    (
        "log-shipper",
        "cr.fluentbit.io/fluent/fluent-bit:3.1.9",
        Some(("http-metrics", 2020)),
    ),
    (
        "otel-agent",
        "docker.io/otel/opentelemetry-collector-contrib:0.110.0",
        Some(("otlp-grpc", 4317)),
    ),
];

fn field_env(name: &str, path: &str) -> Value {
    json!({"name": name, "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": path}}})
}

fn probe(path: &str, port: u16, initial: u32, period: u32) -> Value {
    json!({
        "httpGet": {"path": path, "port": port, "scheme": "HTTP"},
        "initialDelaySeconds": initial,
        "timeoutSeconds": 1,
        "periodSeconds": period,
        "successThreshold": 1,
        "failureThreshold": 3
    })
}

/// The app's own container, by richness: 2 = probes, env (single-container pods); 1 =
/// readiness probe only (pods with one sidecar); 0 = lean, no probes or ports (workers, pods
/// with two sidecars). This keeps every pod within 3–8 KB of JSON. It mounts `mounts` (volume
/// name, path); the service-account token's mount is the admission plugin's
/// ([`pod_from_template`]).
fn main_container(
    app: &App,
    image: &str,
    mounts: &[(&str, &str)],
    richness: u8,
    rng: &mut impl Rng,
) -> Value {
    let log_level = ["info", "info", "debug", "warn"][rng.random_range(0..4)];
    let mut env = Vec::new();
    if richness >= 1 {
        env.push(field_env("POD_NAME", "metadata.name"));
    }
    env.push(json!({"name": "LOG_LEVEL", "value": log_level}));
    if richness == 2 {
        env.push(json!({"name": "OTEL_EXPORTER_OTLP_ENDPOINT", "value": "http://otel-collector.observability:4317"}));
    }
    let cpu = quantity(format!("{}m", app.cpu_m));
    let mem = quantity(format!("{}Mi", app.mem_mi));
    let resources = if app.guaranteed {
        json!({"limits": {"cpu": cpu, "memory": mem}, "requests": {"cpu": cpu, "memory": mem}})
    } else {
        json!({"limits": {"memory": quantity(format!("{}Mi", app.mem_mi * 2))}, "requests": {"cpu": cpu, "memory": mem}})
    };
    let mounts: Vec<Value> = mounts
        .iter()
        .map(|(name, path)| json!({"name": name, "readOnly": true, "mountPath": path}))
        .collect();

    let mut c = Map::new();
    c.insert("name".into(), json!(app.name));
    c.insert("image".into(), json!(image));
    if richness >= 1 {
        c.insert(
            "ports".into(),
            json!([{"name": "http", "containerPort": app.port, "protocol": "TCP"}]),
        );
    }
    c.insert("env".into(), Value::Array(env));
    c.insert("resources".into(), resources);
    c.insert("volumeMounts".into(), Value::Array(mounts));
    if richness == 2 {
        c.insert("livenessProbe".into(), probe("/healthz", app.port, 10, 10));
    }
    if richness >= 1 {
        c.insert("readinessProbe".into(), probe("/readyz", app.port, 5, 5));
    }
    c.insert(
        "terminationMessagePath".into(),
        json!("/dev/termination-log"),
    );
    c.insert("terminationMessagePolicy".into(), json!("File"));
    c.insert("imagePullPolicy".into(), json!("IfNotPresent"));
    Value::Object(c)
}

/// A sidecar; its only mount is the service-account token's ([`pod_from_template`]).
fn sidecar_container(idx: usize, n_containers: usize) -> Value {
    let (name, image, port) = SIDECARS[idx];
    let mut c = Map::new();
    c.insert("name".into(), json!(name));
    c.insert("image".into(), json!(image));
    if let (Some((pname, p)), 2) = (port, n_containers) {
        c.insert(
            "ports".into(),
            json!([{"name": pname, "containerPort": p, "protocol": "TCP"}]),
        );
    }
    c.insert(
        "resources".into(),
        json!({"requests": {"cpu": "50m", "memory": "64Mi"}}),
    );
    c.insert("volumeMounts".into(), json!([]));
    c.insert(
        "terminationMessagePath".into(),
        json!("/dev/termination-log"),
    );
    c.insert("terminationMessagePolicy".into(), json!("File"));
    c.insert("imagePullPolicy".into(), json!("IfNotPresent"));
    Value::Object(c)
}

/// Server-side-apply field set of a JSON value, in `fieldsV1` form: `f:<field>` for object
/// members, `k:{...}` for elements of keyed lists, `{}` for leaves, atomic lists and empty
/// objects, `.` for owned maps and list elements; keys sorted as structured-merge-diff writes
/// them.
fn fields_of(v: &Value, nested: bool) -> Value {
    let mut entries: Vec<(String, Value)> = Vec::new();
    if let Value::Object(m) = v {
        if nested {
            entries.push((".".into(), json!({})));
        }
        for (k, child) in m {
            let f = match child {
                Value::Object(o) if !o.is_empty() => fields_of(child, true),
                Value::Array(items) => match list_key(k) {
                    Some((keys, atomic_items)) => {
                        let mut lm: Vec<(String, Value)> = Vec::new();
                        for item in items {
                            let mut key = Map::new();
                            for kk in keys {
                                if let Some(x) = item.get(*kk) {
                                    key.insert((*kk).to_string(), x.clone());
                                }
                            }
                            let sub = if atomic_items {
                                json!({})
                            } else {
                                fields_of(item, true)
                            };
                            lm.push((format!("k:{}", Value::Object(key)), sub));
                        }
                        lm.sort_by(|a, b| a.0.cmp(&b.0));
                        Value::Object(lm.into_iter().collect())
                    }
                    None => json!({}),
                },
                _ => json!({}),
            };
            entries.push((format!("f:{k}"), f));
        }
    }
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    Value::Object(entries.into_iter().collect())
}

/// Merge keys of the keyed (associative) lists in pod objects; other lists are atomic.
/// The second value is true for lists whose elements are atomic structs.
fn list_key(field: &str) -> Option<(&'static [&'static str], bool)> {
    match field {
        "containers" | "initContainers" | "volumes" | "env" => Some((&["name"], false)),
        "volumeMounts" => Some((&["mountPath"], false)),
        "ports" => Some((&["containerPort", "protocol"], false)),
        "conditions" => Some((&["type"], false)),
        "podIPs" | "hostIPs" => Some((&["ip"], false)),
        "ownerReferences" => Some((&["uid"], true)),
        _ => None,
    }
}

fn controller_fields(metadata: &Value, spec: &Value) -> Value {
    let mut meta = Map::new();
    for k in ["annotations", "generateName", "labels", "ownerReferences"] {
        if let Some(v) = metadata.get(k) {
            meta.insert(k.to_string(), v.clone());
        }
    }
    let mut spec = spec.clone();
    if let Some(m) = spec.as_object_mut() {
        m.shift_remove("nodeName");
    }
    let mut f = Map::new();
    f.insert("f:metadata".into(), fields_of(&Value::Object(meta), false));
    f.insert("f:spec".into(), fields_of(&spec, false));
    Value::Object(f)
}

fn kubelet_fields(status: &Value) -> Value {
    let mut st = status.clone();
    if let Some(m) = st.as_object_mut() {
        m.shift_remove("qosClass");
    }
    json!({"f:status": fields_of(&st, false)})
}

fn container_status(c: &Value, started_at: i64, rng: &mut impl Rng) -> Value {
    let image = c["image"].as_str().unwrap_or("");
    let repo = image.rsplit_once(':').map_or(image, |(r, _)| r);
    json!({
        "name": c["name"].clone(),
        "state": {"running": {"startedAt": ts(started_at)}},
        "lastState": {},
        "ready": true,
        "restartCount": 0,
        "image": image,
        "imageID": format!("{repo}@sha256:{}", hex(rng, 32)),
        "containerID": format!("containerd://{}", hex(rng, 32)),
        "started": true
    })
}

/// Where kube's ServiceAccount admission plugin mounts the `kube-api-access-<5>` volume.
const SA_MOUNT_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// How many apps [`pod_template`] knows (its `app` argument is taken modulo this).
pub const APP_COUNT: usize = APPS.len();

/// A volume of a pod template, mounted read-only in the template's main container.
#[derive(Debug, Clone, PartialEq)]
pub struct TemplateVolume {
    /// Volume name (`spec.volumes[].name`).
    pub name: String,
    /// Where the main container mounts it.
    pub mount_path: String,
    /// The volume source, e.g. `{"configMap": {"name": "x", "defaultMode": 420}}`.
    pub source: Value,
}

/// A workload's pod template (`spec.template` of a Deployment or ReplicaSet) as kube stores it
/// after defaulting: `labels`, a few annotations, app number `app` (modulo [`APP_COUNT`]) in 1–3
/// containers (the app's own, with env, resources and probes, and 0–2 sidecars), `volumes`
/// mounted in the app's container, and `service_account` when given. The image tag comes from
/// `version_seed`. Deterministic given the RNG.
pub fn pod_template(
    app: usize,
    version_seed: u64,
    labels: Map<String, Value>,
    volumes: &[TemplateVolume],
    service_account: Option<&str>,
    rng: &mut impl Rng,
) -> Value {
    let app = &APPS[app % APPS.len()];
    let version = format!("v1.{}.{}", version_seed % 12, version_seed % 7);
    let image = format!("ghcr.io/acme/{}:{}", app.name, version);
    let n_containers = match rng.random_range(0..20) {
        0..=9 => 1,
        10..=16 => 2,
        _ => 3,
    };
    let richness = match n_containers {
        1 if rng.random_bool(0.7) => 2,
        1 | 3 => 0,
        _ => 1,
    };
    let mounts: Vec<(&str, &str)> = volumes
        .iter()
        .map(|v| (v.name.as_str(), v.mount_path.as_str()))
        .collect();
    let mut containers = vec![main_container(app, &image, &mounts, richness, rng)];
    let first_sidecar = rng.random_range(0..SIDECARS.len());
    for i in 1..n_containers {
        containers.push(sidecar_container(
            (first_sidecar + i) % SIDECARS.len(),
            n_containers,
        ));
    }
    let mut annotations = Map::new();
    if rng.random_bool(0.3) {
        let at = ts(FLEET_EPOCH_UNIX - rng.random_range(0..86_400 * 30));
        annotations.insert("kubectl.kubernetes.io/restartedAt".into(), json!(at));
    }
    annotations.insert("prometheus.io/scrape".into(), json!("true"));
    let volumes: Vec<Value> = volumes
        .iter()
        .map(|v| {
            let mut m = Map::new();
            m.insert("name".into(), json!(v.name));
            if let Some(src) = v.source.as_object() {
                m.extend(src.clone());
            }
            Value::Object(m)
        })
        .collect();
    let mut spec = Map::new();
    if !volumes.is_empty() {
        spec.insert("volumes".into(), Value::Array(volumes));
    }
    spec.insert("containers".into(), Value::Array(containers));
    spec.insert("restartPolicy".into(), json!("Always"));
    spec.insert("terminationGracePeriodSeconds".into(), json!(30));
    spec.insert("dnsPolicy".into(), json!("ClusterFirst"));
    if let Some(sa) = service_account {
        spec.insert("serviceAccountName".into(), json!(sa));
        spec.insert("serviceAccount".into(), json!(sa));
    }
    spec.insert("securityContext".into(), json!({}));
    spec.insert("schedulerName".into(), json!("default-scheduler"));
    json!({"metadata": {"labels": labels, "annotations": annotations}, "spec": spec})
}

/// Who makes a pod from a template: the pod's name, `generateName` and namespace, and the
/// controller's owner reference.
#[derive(Debug, Clone, Copy)]
pub struct PodOrigin<'a> {
    /// `metadata.name`.
    pub name: &'a str,
    /// `metadata.generateName` (the owner's name and a dash).
    pub generate_name: &'a str,
    /// `metadata.namespace`.
    pub namespace: &'a str,
    /// The controller's entry of `metadata.ownerReferences`.
    pub owner: &'a Value,
}

/// kube's QoS class of a pod spec: Guaranteed when every container's requests equal its limits
/// for both cpu and memory, BestEffort when none has any, else Burstable.
fn qos_class(spec: &Value) -> &'static str {
    let containers = spec["containers"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let guaranteed = containers.iter().all(|c| {
        ["cpu", "memory"].iter().all(|r| {
            let limit = &c["resources"]["limits"][r];
            !limit.is_null() && c["resources"]["requests"][r] == *limit
        })
    });
    let any = containers.iter().any(|c| {
        c["resources"].as_object().is_some_and(|r| {
            r.values()
                .any(|v| v.as_object().is_some_and(|m| !m.is_empty()))
        })
    });
    match (guaranteed && !containers.is_empty(), any) {
        (true, _) => "Guaranteed",
        (false, true) => "Burstable",
        (false, false) => "BestEffort",
    }
}

/// A pod as a cluster makes it from `template`: the controller's create (the template's labels
/// and annotations, `origin`'s name and owner), what admission adds (service account `default`
/// unless the template names one, its `kube-api-access-<5>` projected volume mounted in every
/// container, the not-ready/unreachable tolerations, priority), the scheduler's `node`, and the
/// kubelet's `Running` status with pod IP `<node's pod CIDR>.<ip_host>` (`ip_host` in 1..=254);
/// it was created at `created` (seconds since the UNIX epoch) and was ready within a minute;
/// managed fields are those of the controller-manager and the kubelet. Deterministic given the
/// RNG.
pub fn pod_from_template(
    template: &Value,
    origin: &PodOrigin<'_>,
    node: &str,
    ip_host: u32,
    created: i64,
    rng: &mut impl Rng,
) -> Value {
    let scheduled = created + 1;
    let started = scheduled + rng.random_range(2..15);
    let ready_at = started + rng.random_range(3..30);
    let api_mount = format!("kube-api-access-{}", alphabet_string(rng.random(), 5));

    let mut spec = template["spec"].as_object().cloned().unwrap_or_default();
    let mount = json!({"name": api_mount, "readOnly": true, "mountPath": SA_MOUNT_PATH});
    if let Some(containers) = spec.get_mut("containers").and_then(Value::as_array_mut) {
        for c in containers.iter_mut().filter_map(Value::as_object_mut) {
            match c.get_mut("volumeMounts").and_then(Value::as_array_mut) {
                Some(mounts) => mounts.push(mount.clone()),
                None => {
                    c.insert("volumeMounts".into(), json!([mount.clone()]));
                }
            }
        }
    }
    let api_volume = json!({"name": api_mount, "projected": {
        "sources": [
            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
            {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}
        ],
        "defaultMode": 420
    }});
    match spec.get_mut("volumes").and_then(Value::as_array_mut) {
        Some(volumes) => volumes.push(api_volume),
        None => {
            spec.insert("volumes".into(), json!([api_volume]));
        }
    }
    let sa = spec
        .get("serviceAccountName")
        .and_then(Value::as_str)
        .unwrap_or("default")
        .to_string();
    spec.insert("serviceAccountName".into(), json!(sa));
    spec.insert("serviceAccount".into(), json!(sa));
    // Where Go's PodSpec has it (after the service account, before securityContext and
    // schedulerName, which the template may have set): the fleet is generated canonical.
    let after = spec
        .keys()
        .position(|k| k == "serviceAccount")
        .map_or(spec.len(), |i| i + 1);
    spec.shift_insert(after, "nodeName".into(), json!(node));
    spec.insert(
        "tolerations".into(),
        json!([
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
        ]),
    );
    spec.insert("priority".into(), json!(0));
    spec.insert("enableServiceLinks".into(), json!(true));
    spec.insert("preemptionPolicy".into(), json!("PreemptLowerPriority"));
    let spec = Value::Object(spec);

    let node_idx = node_index(node);
    let host_ip = node_ip(node_idx);
    let pod_ip = ipv4(pod_cidr_base(node_idx) + ip_host.clamp(1, 254));
    let condition = |ty: &str, at: i64| json!({"type": ty, "status": "True", "lastProbeTime": null, "lastTransitionTime": ts(at)});
    let statuses: Vec<Value> = spec["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| container_status(c, started, rng))
        .collect();
    let status = json!({
        "phase": "Running",
        "conditions": [
            condition("PodReadyToStartContainers", started - 1),
            condition("Initialized", scheduled),
            condition("Ready", ready_at),
            condition("ContainersReady", ready_at),
            condition("PodScheduled", scheduled)
        ],
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}],
        "podIP": pod_ip,
        "podIPs": [{"ip": pod_ip}],
        "startTime": ts(scheduled),
        "containerStatuses": statuses,
        "qosClass": qos_class(&spec)
    });

    let mut metadata = Map::new();
    metadata.insert("name".into(), json!(origin.name));
    metadata.insert("generateName".into(), json!(origin.generate_name));
    metadata.insert("namespace".into(), json!(origin.namespace));
    metadata.insert("labels".into(), template["metadata"]["labels"].clone());
    if let Some(a) = template["metadata"]["annotations"]
        .as_object()
        .filter(|a| !a.is_empty())
    {
        metadata.insert("annotations".into(), Value::Object(a.clone()));
    }
    metadata.insert("ownerReferences".into(), json!([origin.owner]));
    let metadata_v = Value::Object(metadata.clone());
    metadata.insert(
        "managedFields".into(),
        json!([
            {
                "manager": "kube-controller-manager",
                "operation": "Update",
                "apiVersion": "v1",
                "time": ts(created),
                "fieldsType": "FieldsV1",
                "fieldsV1": controller_fields(&metadata_v, &spec)
            },
            {
                "manager": "kubelet",
                "operation": "Update",
                "apiVersion": "v1",
                "time": ts(ready_at),
                "fieldsType": "FieldsV1",
                "fieldsV1": kubelet_fields(&status),
                "subresource": "status"
            }
        ]),
    );

    let mut pod = Map::new();
    pod.insert("apiVersion".into(), json!("v1"));
    pod.insert("kind".into(), json!("Pod"));
    pod.insert("metadata".into(), Value::Object(metadata));
    pod.insert("spec".into(), spec);
    pod.insert("status".into(), status);
    Value::Object(pod)
}

/// A realistic Pod (3–8 KB of JSON) of a Deployment in `namespace`, bound to `node`, with a
/// `Running` status; timestamps are based on [`FLEET_EPOCH_UNIX`]. Deterministic given the RNG.
/// Names are unique per `index` (`<app>-<template-hash>-<suffix from index>`).
pub fn pod(index: usize, namespace: &str, node: &str, rng: &mut impl Rng) -> Value {
    pod_at(index, namespace, node, FLEET_EPOCH_UNIX, rng)
}

/// [`pod`] with its timestamps around `base_unix` (seconds since the UNIX epoch) instead of
/// the fixed fleet epoch, e.g. the current time for pods created during a run.
pub fn pod_at(
    index: usize,
    namespace: &str,
    node: &str,
    base_unix: i64,
    rng: &mut impl Rng,
) -> Value {
    let app_index = (fnv(&[namespace]) as usize).wrapping_add(index / 7) % APPS.len();
    let app = &APPS[app_index];
    // One ReplicaSet per (namespace, app): same hash and owner UID for all its pods.
    let rs_seed = fnv(&[namespace, app.name]);
    let hash = alphabet_string(rs_seed, 10);
    let rs_name = format!("{}-{}", app.name, hash);
    let rs_uid = uuid_from(rs_seed, fnv(&[app.name, namespace, "rs"]));
    let name = format!("{rs_name}-{}", pod_suffix(index));
    let track = if rng.random_bool(0.1) {
        "canary"
    } else {
        "stable"
    };
    let labels = json!({
        "app": app.name,
        "pod-template-hash": hash,
        "tier": app.tier,
        "track": track
    });
    let config = TemplateVolume {
        name: "config".into(),
        mount_path: "/etc/app".into(),
        source: json!({"configMap": {"name": format!("{}-config", app.name), "defaultMode": 420}}),
    };
    let labels = labels.as_object().cloned().unwrap_or_default();
    let template = pod_template(app_index, rs_seed, labels, &[config], Some(app.name), rng);
    let owner = json!({
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "name": rs_name,
        "uid": rs_uid,
        "controller": true,
        "blockOwnerDeletion": true
    });
    let origin = PodOrigin {
        name: &name,
        generate_name: &format!("{rs_name}-"),
        namespace,
        owner: &owner,
    };
    let ip_host = rng.random_range(2..254u32);
    let created = base_unix - rng.random_range(60..86_400 * 14);
    pod_from_template(&template, &origin, node, ip_host, created, rng)
}

/// The 5-character name suffix of pod number `index` of its owner: distinct for every index
/// below 27^5, in kube's generated-name alphabet.
pub fn pod_suffix(index: usize) -> String {
    // Bijective in `index` below 27^5 (the multiplier is coprime with 3^15).
    alphabet_string(
        (index as u64 % 14_348_907).wrapping_mul(7_654_321) % 14_348_907,
        5,
    )
}

// ---------------------------------------------------------------------------------------------
// Churn mutations

/// Latest timestamp (seconds) found in a pod's status, or the fleet epoch.
fn latest_status_time(pod: &Value) -> i64 {
    let mut latest: Option<i128> = None;
    let mut consider = |v: Option<&Value>| {
        if let Some(t) = v.and_then(Value::as_str).and_then(parse_rfc3339) {
            latest = Some(latest.map_or(t, |l| l.max(t)));
        }
    };
    consider(pod.pointer("/status/startTime"));
    for c in pod
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        consider(c.get("lastTransitionTime"));
        consider(c.get("lastProbeTime"));
    }
    for cs in pod
        .pointer("/status/containerStatuses")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        consider(cs.pointer("/state/running/startedAt"));
        consider(cs.pointer("/lastState/terminated/finishedAt"));
    }
    latest.map_or(FLEET_EPOCH_UNIX, |t| t.div_euclid(NS) as i64)
}

fn refresh_kubelet_fields(pod: &mut Value) {
    let fields = kubelet_fields(&pod["status"]);
    if let Some(mf) = pod
        .pointer_mut("/metadata/managedFields")
        .and_then(Value::as_array_mut)
    {
        for e in mf.iter_mut() {
            if e.get("manager").and_then(Value::as_str) == Some("kubelet") {
                e["fieldsV1"] = fields.clone();
            }
        }
    }
}

fn set_condition(pod: &mut Value, ty: &str, status: &str, at: i64) {
    if let Some(cs) = pod
        .pointer_mut("/status/conditions")
        .and_then(Value::as_array_mut)
    {
        for c in cs.iter_mut() {
            if c.get("type").and_then(Value::as_str) == Some(ty) {
                if c.get("status").and_then(Value::as_str) != Some(status) {
                    c["lastTransitionTime"] = json!(ts(at));
                }
                c["status"] = json!(status);
            }
        }
    }
}

/// A kubelet-style status update: a container restart (restart count, last state, new
/// container ID), a readiness flip (Ready/ContainersReady and the container's `ready`), or a
/// probe time refresh. Keeps the pod `Running`.
pub fn touch_status(pod: &mut Value, rng: &mut impl Rng) {
    let now = latest_status_time(pod) + rng.random_range(1..120i64);
    let n = pod
        .pointer("/status/containerStatuses")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    match rng.random_range(0..10) {
        0..=3 if n > 0 => {
            // Container restart.
            let i = rng.random_range(0..n);
            let new_id = format!("containerd://{}", hex(rng, 32));
            let (code, reason) = [
                (137, "OOMKilled"),
                (1, "Error"),
                (2, "Error"),
                (143, "Error"),
            ][rng.random_range(0..4)];
            let cs = &mut pod["status"]["containerStatuses"][i];
            let prev_start = cs
                .pointer("/state/running/startedAt")
                .cloned()
                .unwrap_or_else(|| json!(ts(now - 60)));
            let prev_id = cs.get("containerID").cloned().unwrap_or(Value::Null);
            let restarts = cs.get("restartCount").and_then(Value::as_i64).unwrap_or(0) + 1;
            cs["restartCount"] = json!(restarts);
            cs["lastState"] = json!({"terminated": {
                "exitCode": code, "reason": reason, "startedAt": prev_start,
                "finishedAt": ts(now), "containerID": prev_id
            }});
            cs["state"] = json!({"running": {"startedAt": ts(now + 1)}});
            cs["containerID"] = json!(new_id);
            cs["ready"] = json!(true);
            cs["started"] = json!(true);
        }
        4..=6 if n > 0 => {
            // Readiness flip: Ready/ContainersReady go False with one unready container, or
            // back to True with every container ready.
            let was_ready = pod
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .is_some_and(|cs| {
                    cs.iter().any(|c| {
                        c.get("type").and_then(Value::as_str) == Some("Ready")
                            && c.get("status").and_then(Value::as_str) == Some("True")
                    })
                });
            let target = rng.random_range(0..n);
            let cname = pod
                .pointer(&format!("/status/containerStatuses/{target}/name"))
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            let status = if was_ready { "False" } else { "True" };
            set_condition(pod, "Ready", status, now);
            set_condition(pod, "ContainersReady", status, now);
            if let Some(css) = pod
                .pointer_mut("/status/containerStatuses")
                .and_then(Value::as_array_mut)
            {
                for (i, cs) in css.iter_mut().enumerate() {
                    if !was_ready {
                        cs["ready"] = json!(true);
                    } else if i == target {
                        cs["ready"] = json!(false);
                    }
                }
            }
            if let Some(conds) = pod
                .pointer_mut("/status/conditions")
                .and_then(Value::as_array_mut)
            {
                for c in conds.iter_mut() {
                    let ty = c.get("type").and_then(Value::as_str).unwrap_or("");
                    if ty != "Ready" && ty != "ContainersReady" {
                        continue;
                    }
                    if was_ready {
                        c["reason"] = json!("ContainersNotReady");
                        c["message"] = json!(format!("containers with unready status: [{cname}]"));
                    } else if let Some(m) = c.as_object_mut() {
                        m.shift_remove("reason");
                        m.shift_remove("message");
                    }
                }
            }
        }
        _ => {
            // Probe time refresh on the Ready condition.
            if let Some(conds) = pod
                .pointer_mut("/status/conditions")
                .and_then(Value::as_array_mut)
            {
                for c in conds.iter_mut() {
                    if c.get("type").and_then(Value::as_str) == Some("Ready") {
                        c["lastProbeTime"] = json!(ts(now));
                    }
                }
            }
        }
    }
    refresh_kubelet_fields(pod);
}

/// Changes a label value like a controller or an operator would, so that label selectors see
/// the pod move in or out: flips `track` between `stable` and `canary`, or moves `shard`.
pub fn relabel(pod: &mut Value, rng: &mut impl Rng) {
    let Some(meta) = pod.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    let labels = meta
        .entry("labels")
        .or_insert_with(|| Value::Object(Map::new()));
    if !labels.is_object() {
        *labels = Value::Object(Map::new());
    }
    let labels = labels.as_object_mut().expect("labels is an object");
    if rng.random_bool(0.5) {
        let next = match labels.get("track").and_then(Value::as_str) {
            Some("canary") => "stable",
            _ => "canary",
        };
        labels.insert("track".into(), json!(next));
    } else {
        let cur = labels
            .get("shard")
            .and_then(Value::as_str)
            .and_then(|s| s.parse::<u32>().ok());
        let mut next = rng.random_range(0..16u32);
        if Some(next) == cur {
            next = (next + 1) % 16;
        }
        labels.insert("shard".into(), json!(next.to_string()));
    }
}

/// Moves the pod to `node`: `spec.nodeName`, the host IPs and a pod IP in that node's pod CIDR
/// (same host part).
pub fn reassign(pod: &mut Value, node: &str) {
    let idx = node_index(node);
    let host_ip = node_ip(idx);
    let host_part = pod
        .pointer("/status/podIP")
        .and_then(Value::as_str)
        .and_then(|ip| ip.rsplit('.').next())
        .and_then(|x| x.parse::<u32>().ok())
        .filter(|x| (1..255).contains(x))
        .unwrap_or(2);
    let pod_ip = ipv4(pod_cidr_base(idx) + host_part);
    if let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) {
        spec.insert("nodeName".into(), json!(node));
    } else if let Some(m) = pod.as_object_mut() {
        m.insert("spec".into(), json!({"nodeName": node}));
    }
    if let Some(status) = pod.get_mut("status").and_then(Value::as_object_mut) {
        status.insert("hostIP".into(), json!(host_ip));
        status.insert("hostIPs".into(), json!([{"ip": host_ip}]));
        if status.contains_key("podIP") {
            status.insert("podIP".into(), json!(pod_ip));
            status.insert("podIPs".into(), json!([{"ip": pod_ip}]));
        }
    }
    refresh_kubelet_fields(pod);
}

/// Stamps `unix_nanos` into `metadata.annotations["watchmux.dev/write-time-ns"]` (decimal).
pub fn stamp_write_time(obj: &mut Value, unix_nanos: u128) {
    let Some(root) = obj.as_object_mut() else {
        return;
    };
    let meta = root
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if !meta.is_object() {
        *meta = Value::Object(Map::new());
    }
    let meta = meta.as_object_mut().expect("metadata is an object");
    let ann = meta
        .entry("annotations")
        .or_insert_with(|| Value::Object(Map::new()));
    if !ann.is_object() {
        *ann = Value::Object(Map::new());
    }
    ann.as_object_mut()
        .expect("annotations is an object")
        .insert(WRITE_TIME_ANNOTATION.into(), json!(unix_nanos.to_string()));
}

// ---------------------------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use super::*;
    use kube_wire::table;
    use rand::SeedableRng;
    use rand::rngs::StdRng;
    use std::collections::HashSet;

    fn spec() -> FleetSpec {
        FleetSpec {
            nodes: 50,
            pods: 3000,
            namespaces: 7,
            seed: 42,
        }
    }

    #[test]
    fn pod_size_within_3_to_8_kb() {
        let s = spec();
        let mut min = usize::MAX;
        let mut max = 0;
        for seed in [1u64, 2, 3] {
            let mut rng = StdRng::seed_from_u64(seed);
            for i in 0..2000 {
                let p = pod(i, &pod_namespace(&s, i), &pod_node(&s, i), &mut rng);
                let n = serde_json::to_vec(&p).unwrap().len();
                min = min.min(n);
                max = max.max(n);
                assert!(
                    (3 * 1024..=8 * 1024).contains(&n),
                    "pod {i} seed {seed}: {n} bytes"
                );
            }
        }
        eprintln!("pod sizes: {min}..{max} bytes");
    }

    #[test]
    fn deterministic_for_a_seed() {
        let s = spec();
        let gen_all = |seed: u64| {
            let mut rng = StdRng::seed_from_u64(seed);
            let mut out = Vec::new();
            for i in 0..5 {
                out.push(node(i, &mut rng));
            }
            for i in 0..50 {
                let mut p = pod(i, &pod_namespace(&s, i), &pod_node(&s, i), &mut rng);
                touch_status(&mut p, &mut rng);
                relabel(&mut p, &mut rng);
                out.push(p);
            }
            serde_json::to_string(&out).unwrap()
        };
        assert_eq!(gen_all(7), gen_all(7));
        assert_ne!(gen_all(7), gen_all(8));
    }

    #[test]
    fn pod_shapes_and_unique_names() {
        let s = FleetSpec {
            nodes: 100,
            pods: 6_000,
            namespaces: 3,
            seed: 1,
        };
        let mut rng = StdRng::seed_from_u64(s.seed);
        let mut names = HashSet::new();
        for i in 0..s.pods {
            let ns = pod_namespace(&s, i);
            let nd = pod_node(&s, i);
            let p = pod(i, &ns, &nd, &mut rng);
            let name = p["metadata"]["name"].as_str().unwrap().to_string();
            assert!(
                names.insert((ns.clone(), name.clone())),
                "duplicate {ns}/{name}"
            );
            if i % 97 != 0 {
                continue;
            }
            assert_eq!(p["kind"], "Pod");
            assert_eq!(p["metadata"]["namespace"], json!(ns));
            assert!(p["metadata"].get("uid").is_none());
            assert!(p["metadata"].get("resourceVersion").is_none());
            assert!(p["metadata"].get("creationTimestamp").is_none());
            assert!(name.len() <= 63, "{name}");
            assert!(name.starts_with(p["metadata"]["generateName"].as_str().unwrap()));
            let hash = p["metadata"]["labels"]["pod-template-hash"]
                .as_str()
                .unwrap();
            assert!(
                p["metadata"]["ownerReferences"][0]["name"]
                    .as_str()
                    .unwrap()
                    .ends_with(hash)
            );
            assert_eq!(p["metadata"]["ownerReferences"][0]["kind"], "ReplicaSet");
            assert_eq!(p["metadata"]["managedFields"].as_array().unwrap().len(), 2);
            assert_eq!(p["spec"]["nodeName"], json!(nd));
            assert_eq!(p["status"]["phase"], "Running");
            let containers = p["spec"]["containers"].as_array().unwrap();
            assert!((1..=3).contains(&containers.len()));
            assert_eq!(
                p["status"]["containerStatuses"].as_array().unwrap().len(),
                containers.len()
            );
            let conds: Vec<&str> = p["status"]["conditions"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c["type"].as_str().unwrap())
                .collect();
            for want in ["PodScheduled", "Initialized", "ContainersReady", "Ready"] {
                assert!(conds.contains(&want), "{want}");
            }
            assert_eq!(p["status"]["podIP"], p["status"]["podIPs"][0]["ip"]);
            assert_eq!(p["status"]["hostIP"], json!(node_ip(node_index(&nd))));
            assert!(p["status"]["qosClass"].is_string());
            assert!(p["status"]["startTime"].is_string());

            let cells = table::row_cells("", "Pod", &p, FLEET_EPOCH_UNIX);
            let n = containers.len();
            assert_eq!(cells[1], json!(format!("{n}/{n}")));
            assert_eq!(cells[2], json!("Running"));
            assert_eq!(cells[3], json!("0"));
            assert_eq!(cells[6], json!(nd));
        }
    }

    #[test]
    fn managed_fields_look_like_ssa() {
        let mut rng = StdRng::seed_from_u64(3);
        let p = pod(0, "fleet-0", "node-00003", &mut rng);
        let mf = &p["metadata"]["managedFields"];
        let c = &mf[0]["fieldsV1"];
        let cname = p["spec"]["containers"][0]["name"].as_str().unwrap();
        let key = format!("k:{{\"name\":\"{cname}\"}}");
        assert!(c["f:spec"]["f:containers"][&key]["f:image"].is_object());
        assert!(c["f:metadata"]["f:labels"]["f:app"].is_object());
        assert!(c["f:spec"].get("f:nodeName").is_none());
        let k = &mf[1]["fieldsV1"]["f:status"];
        assert_eq!(mf[1]["subresource"], "status");
        assert!(k["f:conditions"]["k:{\"type\":\"Ready\"}"]["f:status"].is_object());
        let ip = p["status"]["podIP"].as_str().unwrap();
        assert!(k["f:podIPs"][format!("k:{{\"ip\":\"{ip}\"}}")].is_object());
    }

    #[test]
    fn node_shape_and_table_row() {
        let mut rng = StdRng::seed_from_u64(9);
        let mut names = HashSet::new();
        for i in 0..300 {
            let n = node(i, &mut rng);
            assert!(names.insert(n["metadata"]["name"].as_str().unwrap().to_string()));
            assert!(n["metadata"].get("uid").is_none());
            assert!(n["metadata"].get("creationTimestamp").is_none());
            assert_eq!(
                n["metadata"]["labels"]["kubernetes.io/hostname"],
                n["metadata"]["name"]
            );
            assert!(n["metadata"]["labels"]["topology.kubernetes.io/zone"].is_string());
            assert!(n["status"]["capacity"]["cpu"].is_string());
            assert!(n["status"]["allocatable"]["memory"].is_string());
            assert_eq!(
                n["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"],
                10250
            );
            assert!(
                n["status"]["nodeInfo"]["kubeletVersion"]
                    .as_str()
                    .unwrap()
                    .starts_with("v1.34.")
            );
        }
        let n = node(42, &mut rng);
        assert_eq!(n["metadata"]["name"], "node-00042");
        let cells = table::row_cells("", "Node", &n, FLEET_EPOCH_UNIX);
        assert_eq!(cells[0], "node-00042");
        assert_eq!(cells[1], "Ready");
        assert_eq!(cells[2], "worker");
        assert_eq!(cells[5], json!(node_ip(42)));
        assert_eq!(cells[6], "<none>");
        assert!(cells[4].as_str().unwrap().starts_with("v1.34."));
        // Pods on this node use its pod CIDR.
        let p = pod(5, "fleet-1", "node-00042", &mut rng);
        let cidr = n["spec"]["podCIDR"].as_str().unwrap();
        let prefix = cidr.trim_end_matches("0/24");
        assert!(p["status"]["podIP"].as_str().unwrap().starts_with(prefix));
    }

    #[test]
    fn mutations_keep_pods_valid() {
        let mut rng = StdRng::seed_from_u64(11);
        let mut p = pod(17, "fleet-2", "node-00001", &mut rng);
        let mut restarts_seen = false;
        let mut not_ready_seen = false;
        for _ in 0..200 {
            touch_status(&mut p, &mut rng);
            assert_eq!(p["status"]["phase"], "Running");
            let cells = table::row_cells("", "Pod", &p, FLEET_EPOCH_UNIX + 90 * 86_400);
            let restarts = cells[3].as_str().unwrap();
            if restarts != "0" {
                restarts_seen = true;
                assert!(restarts.contains(" ago)"), "{restarts}");
            }
            let ready = cells[1].as_str().unwrap();
            let (a, b) = ready.split_once('/').unwrap();
            if a != b {
                not_ready_seen = true;
            }
            let n = serde_json::to_vec(&p).unwrap().len();
            assert!(n <= 9 * 1024, "{n}");
        }
        assert!(restarts_seen && not_ready_seen);

        let before = p["metadata"]["labels"].clone();
        relabel(&mut p, &mut rng);
        assert_ne!(before, p["metadata"]["labels"]);
        assert_eq!(before["app"], p["metadata"]["labels"]["app"]);

        let last_octet = p["status"]["podIP"]
            .as_str()
            .unwrap()
            .rsplit('.')
            .next()
            .unwrap()
            .to_string();
        reassign(&mut p, "node-00007");
        assert_eq!(p["spec"]["nodeName"], "node-00007");
        assert_eq!(p["status"]["hostIP"], json!(node_ip(7)));
        let ip = p["status"]["podIP"].as_str().unwrap();
        assert_eq!(
            ip,
            format!(
                "{}{}",
                ipv4(pod_cidr_base(7)).trim_end_matches('0'),
                last_octet
            )
        );
        assert_eq!(p["status"]["podIPs"][0]["ip"], json!(ip));
        let k = &p["metadata"]["managedFields"][1]["fieldsV1"]["f:status"]["f:podIPs"];
        assert!(k[format!("k:{{\"ip\":\"{ip}\"}}")].is_object());
    }

    #[test]
    fn stamp_write_time_sets_annotation() {
        let mut rng = StdRng::seed_from_u64(5);
        let mut p = pod(0, "fleet-0", "node-00000", &mut rng);
        stamp_write_time(&mut p, 1_767_225_600_123_456_789);
        assert_eq!(
            p["metadata"]["annotations"][WRITE_TIME_ANNOTATION],
            "1767225600123456789"
        );
        assert_eq!(p["metadata"]["annotations"]["prometheus.io/scrape"], "true");
        let mut bare = json!({"kind": "ConfigMap"});
        stamp_write_time(&mut bare, 5);
        assert_eq!(bare["metadata"]["annotations"][WRITE_TIME_ANNOTATION], "5");
    }

    #[test]
    fn namespaces_and_placement() {
        let s = spec();
        assert_eq!(
            namespace_names(&s),
            (0..7).map(|i| format!("fleet-{i}")).collect::<Vec<_>>()
        );
        assert_eq!(namespace("fleet-3")["metadata"]["name"], "fleet-3");
        let mut per_node = vec![0usize; s.nodes];
        for i in 0..s.pods {
            assert!(namespace_names(&s).contains(&pod_namespace(&s, i)));
            per_node[node_index(&pod_node(&s, i))] += 1;
        }
        assert!(
            per_node.iter().all(|&n| n == s.pods / s.nodes),
            "{per_node:?}"
        );
        assert_eq!(node_index("node-00042"), 42);
    }
}
