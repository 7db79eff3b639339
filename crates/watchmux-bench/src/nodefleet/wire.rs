//! What a simulated node reads from a protobuf watch event, and nothing more: the event's
//! type, its object's name, namespace and resourceVersion, whether a BOOKMARK ends the initial
//! events of a watch-list (`k8s.io/initial-events-end`), an ERROR's HTTP code, and, for a pod,
//! the ConfigMaps and Secrets it references, read as the kubelet's `VisitPodConfigmapNames` and
//! `VisitPodSecretNames` (`pkg/api/v1/pod/util.go`) walk a pod: volumes (`configMap`, `secret`,
//! and a `projected` volume's `configMap` and `secret` sources), every container's (init and
//! ephemeral too) `env[].valueFrom.{configMapKeyRef,secretKeyRef}` and
//! `envFrom[].{configMapRef,secretRef}`, and `imagePullSecrets`. The in-tree volume plugins'
//! secret references (azureFile, cephfs, cinder, flexVolume, iscsi, rbd, scaleIO, storageos,
//! csi) are not read: neither simulated fleet has them.
//!
//! Bytes only, borrowed from the frame (no allocation but the caller's), over
//! [`super::super::pbframe`]'s field walker; field numbers are `k8s.io/api`'s `generated.proto`.
//! Input comes from the server under test: a malformed message reads as one without the field.

use super::super::pbframe::{self, each_field, field};

/// The annotation on the BOOKMARK that ends a watch-list's initial events.
pub const INITIAL_EVENTS_END: &str = "k8s.io/initial-events-end";

/// `ObjectMeta` fields.
const META_NAME: u32 = 1;
const META_NAMESPACE: u32 = 3;
const META_RESOURCE_VERSION: u32 = 6;
/// `Status.reason` and `Status.code`.
const STATUS_REASON: u32 = 4;
const STATUS_CODE: u32 = 6;

/// What a pod references.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RefKind {
    /// A ConfigMap of the pod's namespace.
    ConfigMap,
    /// A Secret of the pod's namespace.
    Secret,
}

impl RefKind {
    /// Its plural resource (core/v1).
    pub fn resource(self) -> &'static str {
        match self {
            RefKind::ConfigMap => "configmaps",
            RefKind::Secret => "secrets",
        }
    }
}

/// One watch event, read lazily.
#[derive(Debug, Clone, Copy)]
pub struct Event<'a> {
    /// `ADDED`, `MODIFIED`, `DELETED`, `BOOKMARK`, `ERROR`; empty when missing.
    pub ty: &'a [u8],
    /// The object's message (inside the envelope), when it reads.
    pub object: Option<&'a [u8]>,
}

impl<'a> Event<'a> {
    /// Reads the envelope of one event (a frame without its length prefix).
    pub fn read(frame: &'a [u8]) -> Event<'a> {
        Event {
            ty: pbframe::event_type(frame),
            object: pbframe::object(frame),
        }
    }

    /// The object's encoded `ObjectMeta`.
    pub fn meta(&self) -> Option<&'a [u8]> {
        field(self.object?, 1)
    }
}

/// `metadata.name` of an encoded `ObjectMeta` (empty when absent).
pub fn name(meta: &[u8]) -> &[u8] {
    field(meta, META_NAME).unwrap_or_default()
}

/// `metadata.namespace` of an encoded `ObjectMeta` (empty when absent).
pub fn namespace(meta: &[u8]) -> &[u8] {
    field(meta, META_NAMESPACE).unwrap_or_default()
}

/// `metadata.resourceVersion` of an encoded `ObjectMeta` (empty when absent).
pub fn resource_version(meta: &[u8]) -> &[u8] {
    field(meta, META_RESOURCE_VERSION).unwrap_or_default()
}

/// Whether a BOOKMARK's `ObjectMeta` marks the end of a watch-list's initial events.
pub fn ends_initial_events(meta: &[u8]) -> bool {
    pbframe::annotation(meta, INITIAL_EVENTS_END) == Some(b"true".as_slice())
}

/// The HTTP code of an ERROR event's `Status` (its `code`; from its `reason` when the code is
/// missing: `Expired` and `Gone` are 410), or 0.
pub fn status_code(status: &[u8]) -> u32 {
    // The code's last occurrence, as proto merges a scalar; none or 0: the reason's.
    if let Ok(Some(kube_wire::proto::wire::Value::Varint(code))) =
        kube_wire::proto::wire::fields(status, "Status").last(STATUS_CODE)
        && let Ok(code) = u32::try_from(code)
        && code != 0
    {
        return code;
    }
    match field(status, STATUS_REASON) {
        Some(b"Expired" | b"Gone") => 410,
        _ => 0,
    }
}

/// The name in a message whose field 1 is a `LocalObjectReference` (`{1: name}`).
fn local_ref(msg: &[u8]) -> Option<&[u8]> {
    field(field(msg, 1)?, 1)
}

/// Calls `f` with each ConfigMap and Secret name a pod (its encoded `Pod` message) references,
/// in the pod's order; a name referenced twice is reported twice. Empty names are skipped.
pub fn pod_refs<'a>(pod: &'a [u8], mut f: impl FnMut(RefKind, &'a [u8])) {
    let Some(spec) = field(pod, 2) else {
        return;
    };
    let mut emit = |k: RefKind, n: Option<&'a [u8]>| {
        if let Some(n) = n.filter(|n| !n.is_empty()) {
            f(k, n);
        }
    };
    each_field(spec, |tag, v| {
        match tag {
            // volumes[].volumeSource
            1 => {
                if let Some(src) = field(v, 2) {
                    volume_refs(src, &mut emit);
                }
            }
            // containers, initContainers
            2 | 20 => container_refs(v, &mut emit),
            // ephemeralContainers[].ephemeralContainerCommon
            34 => {
                if let Some(common) = field(v, 1) {
                    container_refs(common, &mut emit);
                }
            }
            // imagePullSecrets[].name
            15 => emit(RefKind::Secret, field(v, 1)),
            _ => {}
        }
        true
    });
}

/// A `VolumeSource`'s references.
fn volume_refs<'a>(src: &'a [u8], emit: &mut impl FnMut(RefKind, Option<&'a [u8]>)) {
    each_field(src, |tag, v| {
        match tag {
            // secret.secretName
            6 => emit(RefKind::Secret, field(v, 1)),
            // configMap.localObjectReference.name
            19 => emit(RefKind::ConfigMap, local_ref(v)),
            // projected.sources[]
            26 => each_field(v, |t, source| {
                if t == 1 {
                    each_field(source, |st, p| {
                        match st {
                            1 => emit(RefKind::Secret, local_ref(p)),
                            3 => emit(RefKind::ConfigMap, local_ref(p)),
                            _ => {}
                        }
                        true
                    });
                }
                true
            }),
            _ => {}
        }
        true
    });
}

/// A `Container`'s (or `EphemeralContainerCommon`'s) `env` and `envFrom` references.
fn container_refs<'a>(c: &'a [u8], emit: &mut impl FnMut(RefKind, Option<&'a [u8]>)) {
    each_field(c, |tag, v| {
        match tag {
            // env[].valueFrom
            7 => {
                if let Some(from) = field(v, 3) {
                    each_field(from, |t, sel| {
                        match t {
                            3 => emit(RefKind::ConfigMap, local_ref(sel)),
                            4 => emit(RefKind::Secret, local_ref(sel)),
                            _ => {}
                        }
                        true
                    });
                }
            }
            // envFrom[]
            19 => each_field(v, |t, r| {
                match t {
                    2 => emit(RefKind::ConfigMap, local_ref(r)),
                    3 => emit(RefKind::Secret, local_ref(r)),
                    _ => {}
                }
                true
            }),
            _ => {}
        }
        true
    });
}

/// Calls `f` with each item (an encoded object) of a protobuf LIST body (`k8s\0` + `Unknown`
/// around a `…List{metadata: 1, items: 2}`); false when the body is not one.
pub fn list_items<'a>(body: &'a [u8], mut f: impl FnMut(&'a [u8])) -> bool {
    let Some(list) = body
        .strip_prefix(pbframe::MAGIC)
        .and_then(|unknown| field(unknown, 2))
    else {
        return false;
    };
    each_field(list, |tag, item| {
        if tag == 2 {
            f(item);
        }
        true
    });
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube_wire::proto::{envelope, json_to_proto, message_for};

    fn encode(kind: &str, obj: serde_json::Value) -> Vec<u8> {
        let msg = message_for("v1", kind).unwrap();
        json_to_proto(msg, obj.to_string().as_bytes()).unwrap()
    }

    fn event(ty: &str, kind: &str, obj: serde_json::Value) -> Vec<u8> {
        envelope::watch_event(ty, &envelope::wrap("v1", kind, &encode(kind, obj)))
    }

    #[test]
    fn reads_a_pods_references_as_the_kubelet_walks_them() {
        let sel = |k: &str, n: &str| serde_json::json!({k: {"name": n, "key": "k"}});
        let pod = serde_json::json!({
            "metadata": {"name": "p", "namespace": "ns", "resourceVersion": "42"},
            "spec": {
                "volumes": [
                    {"name": "a", "configMap": {"name": "cm-vol"}},
                    {"name": "b", "secret": {"secretName": "sec-vol"}},
                    {"name": "c", "emptyDir": {}},
                    {"name": "d", "projected": {"sources": [
                        {"serviceAccountToken": {"path": "token"}},
                        {"configMap": {"name": "kube-root-ca.crt"}},
                        {"secret": {"name": "sec-proj"}},
                        {"downwardAPI": {"items": []}}
                    ]}}
                ],
                "containers": [{"name": "c", "image": "i",
                    "env": [{"name": "A", "value": "x"},
                            {"name": "B", "valueFrom": sel("configMapKeyRef", "cm-env")},
                            {"name": "C", "valueFrom": sel("secretKeyRef", "sec-env")}],
                    "envFrom": [{"configMapRef": {"name": "cm-from"}},
                                {"secretRef": {"name": "sec-from"}}]}],
                "initContainers": [{"name": "i", "image": "i",
                    "envFrom": [{"configMapRef": {"name": "cm-init"}}]}],
                "ephemeralContainers": [{"name": "e", "image": "i",
                    "envFrom": [{"secretRef": {"name": "sec-eph"}}]}],
                "imagePullSecrets": [{"name": "pull"}, {"name": ""}],
                "nodeName": "node-00001"
            }
        });
        let ev = event("ADDED", "Pod", pod);
        let e = Event::read(&ev);
        assert_eq!(e.ty, b"ADDED");
        let meta = e.meta().unwrap();
        assert_eq!(
            (name(meta), namespace(meta), resource_version(meta)),
            (&b"p"[..], &b"ns"[..], &b"42"[..])
        );
        let mut got = Vec::new();
        pod_refs(e.object.unwrap(), |k, n| {
            got.push((k, String::from_utf8_lossy(n).into_owned()))
        });
        got.sort();
        let want: Vec<(RefKind, String)> = [
            (RefKind::ConfigMap, "cm-env"),
            (RefKind::ConfigMap, "cm-from"),
            (RefKind::ConfigMap, "cm-init"),
            (RefKind::ConfigMap, "cm-vol"),
            (RefKind::ConfigMap, "kube-root-ca.crt"),
            (RefKind::Secret, "pull"),
            (RefKind::Secret, "sec-env"),
            (RefKind::Secret, "sec-eph"),
            (RefKind::Secret, "sec-from"),
            (RefKind::Secret, "sec-proj"),
            (RefKind::Secret, "sec-vol"),
        ]
        .into_iter()
        .map(|(k, n)| (k, n.to_string()))
        .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn reads_bookmarks_errors_and_lists() {
        let bm = event(
            "BOOKMARK",
            "Pod",
            serde_json::json!({"metadata": {"resourceVersion": "9",
                "annotations": {INITIAL_EVENTS_END: "true"}}}),
        );
        let e = Event::read(&bm);
        assert_eq!(e.ty, b"BOOKMARK");
        assert!(ends_initial_events(e.meta().unwrap()));
        assert_eq!(resource_version(e.meta().unwrap()), b"9");
        let plain = event(
            "BOOKMARK",
            "Pod",
            serde_json::json!({"metadata": {"resourceVersion": "9"}}),
        );
        assert!(!ends_initial_events(Event::read(&plain).meta().unwrap()));

        let status = |s: serde_json::Value| {
            let msg = kube_wire::proto::message_for("v1", "Status").unwrap();
            json_to_proto(msg, s.to_string().as_bytes()).unwrap()
        };
        let gone =
            status(serde_json::json!({"status": "Failure", "reason": "Expired", "code": 410}));
        assert_eq!(status_code(&gone), 410);
        let no_code = status(serde_json::json!({"status": "Failure", "reason": "Gone"}));
        assert_eq!(status_code(&no_code), 410);
        let other = status(
            serde_json::json!({"status": "Failure", "reason": "InternalError", "code": 500}),
        );
        assert_eq!(status_code(&other), 500);
        assert_eq!(status_code(b"\xff"), 0);

        // A PodList of two pods.
        let list = serde_json::json!({"metadata": {"resourceVersion": "5"}, "items": [
            {"metadata": {"name": "a"}}, {"metadata": {"name": "b"}}]});
        let body = envelope::wrap("v1", "PodList", &encode("PodList", list));
        let mut names = Vec::new();
        assert!(list_items(&body, |item| names
            .push(name(field(item, 1).unwrap()).to_vec())));
        assert_eq!(names, vec![b"a".to_vec(), b"b".to_vec()]);
        assert!(!list_items(b"{}", |_| {}));
    }
}
