//! Tests of the transcoder against an independent protobuf implementation (k8s-pb's prost
//! types): every root kind's realistic object encodes to bytes prost decodes and re-encodes
//! identically, round trips losslessly, and decodes back to the JSON Go writes; envelopes and
//! frames decode with k8s-pb; malformed input is an error, never a panic.

use prost::Message as _;
use serde_json::Value;

use super::envelope::{self, MAGIC};
use super::{MessageRef, ProtoError, json_to_proto, message_for, proto_to_json, schema};

use k8s_pb::api::apps::v1 as apps;
use k8s_pb::api::core::v1 as core;
use k8s_pb::apiextensions_apiserver::pkg::apis::apiextensions::v1 as ext;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;

/// (apiVersion, kind, JSON) of one realistic object per root kind: the kinds of the first
/// `props::GOLDEN_FIXTURES` entries, then the rest of the kinds kube 1.36 serves (the golden digests of
/// the first ones' inputs stay as they were).
const FIXTURES: &[(&str, &str, &str)] = &[
    ("v1", "Pod", include_str!("testdata/pod.json")),
    ("v1", "Node", include_str!("testdata/node.json")),
    ("v1", "Namespace", include_str!("testdata/namespace.json")),
    ("v1", "Service", include_str!("testdata/service.json")),
    ("v1", "ConfigMap", include_str!("testdata/configmap.json")),
    ("v1", "Secret", include_str!("testdata/secret.json")),
    ("v1", "Event", include_str!("testdata/event.json")),
    ("v1", "Endpoints", include_str!("testdata/endpoints.json")),
    (
        "v1",
        "PodTemplate",
        include_str!("testdata/podtemplate.json"),
    ),
    (
        "discovery.k8s.io/v1",
        "EndpointSlice",
        include_str!("testdata/endpointslice.json"),
    ),
    (
        "apps/v1",
        "Deployment",
        include_str!("testdata/deployment.json"),
    ),
    (
        "apps/v1",
        "ReplicaSet",
        include_str!("testdata/replicaset.json"),
    ),
    (
        "apps/v1",
        "StatefulSet",
        include_str!("testdata/statefulset.json"),
    ),
    (
        "apps/v1",
        "DaemonSet",
        include_str!("testdata/daemonset.json"),
    ),
    (
        "apps/v1",
        "ControllerRevision",
        include_str!("testdata/controllerrevision.json"),
    ),
    ("batch/v1", "Job", include_str!("testdata/job.json")),
    ("batch/v1", "CronJob", include_str!("testdata/cronjob.json")),
    (
        "coordination.k8s.io/v1",
        "Lease",
        include_str!("testdata/lease.json"),
    ),
    (
        "autoscaling/v1",
        "Scale",
        include_str!("testdata/scale.json"),
    ),
    (
        "apiextensions.k8s.io/v1",
        "CustomResourceDefinition",
        include_str!("testdata/crd.json"),
    ),
    ("v1", "Status", include_str!("testdata/status.json")),
    (
        "v1",
        "DeleteOptions",
        include_str!("testdata/deleteoptions.json"),
    ),
    (
        "meta.k8s.io/v1",
        "PartialObjectMetadata",
        include_str!("testdata/partial.json"),
    ),
    (
        "meta.k8s.io/v1",
        "PartialObjectMetadataList",
        include_str!("testdata/partiallist.json"),
    ),
    ("v1", "LimitRange", include_str!("testdata/limitrange.json")),
    (
        "v1",
        "ResourceQuota",
        include_str!("testdata/resourcequota.json"),
    ),
    (
        "v1",
        "ServiceAccount",
        include_str!("testdata/serviceaccount.json"),
    ),
    (
        "v1",
        "PersistentVolumeClaim",
        include_str!("testdata/persistentvolumeclaim.json"),
    ),
    (
        "v1",
        "PersistentVolume",
        include_str!("testdata/persistentvolume.json"),
    ),
    (
        "v1",
        "ReplicationController",
        include_str!("testdata/replicationcontroller.json"),
    ),
    (
        "admissionregistration.k8s.io/v1",
        "MutatingWebhookConfiguration",
        include_str!("testdata/mutatingwebhookconfiguration.json"),
    ),
    (
        "admissionregistration.k8s.io/v1",
        "ValidatingWebhookConfiguration",
        include_str!("testdata/validatingwebhookconfiguration.json"),
    ),
    (
        "admissionregistration.k8s.io/v1",
        "ValidatingAdmissionPolicy",
        include_str!("testdata/validatingadmissionpolicy.json"),
    ),
    (
        "admissionregistration.k8s.io/v1",
        "ValidatingAdmissionPolicyBinding",
        include_str!("testdata/validatingadmissionpolicybinding.json"),
    ),
    (
        "admissionregistration.k8s.io/v1",
        "MutatingAdmissionPolicy",
        include_str!("testdata/mutatingadmissionpolicy.json"),
    ),
    (
        "admissionregistration.k8s.io/v1",
        "MutatingAdmissionPolicyBinding",
        include_str!("testdata/mutatingadmissionpolicybinding.json"),
    ),
    (
        "apiregistration.k8s.io/v1",
        "APIService",
        include_str!("testdata/apiservice.json"),
    ),
    (
        "autoscaling/v1",
        "HorizontalPodAutoscaler",
        include_str!("testdata/horizontalpodautoscaler-v1.json"),
    ),
    (
        "autoscaling/v2",
        "HorizontalPodAutoscaler",
        include_str!("testdata/horizontalpodautoscaler-v2.json"),
    ),
    (
        "certificates.k8s.io/v1",
        "CertificateSigningRequest",
        include_str!("testdata/certificatesigningrequest.json"),
    ),
    (
        "events.k8s.io/v1",
        "Event",
        include_str!("testdata/events-event.json"),
    ),
    (
        "flowcontrol.apiserver.k8s.io/v1",
        "FlowSchema",
        include_str!("testdata/flowschema.json"),
    ),
    (
        "flowcontrol.apiserver.k8s.io/v1",
        "PriorityLevelConfiguration",
        include_str!("testdata/prioritylevelconfiguration.json"),
    ),
    (
        "networking.k8s.io/v1",
        "Ingress",
        include_str!("testdata/ingress.json"),
    ),
    (
        "networking.k8s.io/v1",
        "IngressClass",
        include_str!("testdata/ingressclass.json"),
    ),
    (
        "networking.k8s.io/v1",
        "NetworkPolicy",
        include_str!("testdata/networkpolicy.json"),
    ),
    (
        "networking.k8s.io/v1",
        "IPAddress",
        include_str!("testdata/ipaddress.json"),
    ),
    (
        "networking.k8s.io/v1",
        "ServiceCIDR",
        include_str!("testdata/servicecidr.json"),
    ),
    (
        "node.k8s.io/v1",
        "RuntimeClass",
        include_str!("testdata/runtimeclass.json"),
    ),
    (
        "policy/v1",
        "PodDisruptionBudget",
        include_str!("testdata/poddisruptionbudget.json"),
    ),
    (
        "rbac.authorization.k8s.io/v1",
        "ClusterRole",
        include_str!("testdata/clusterrole.json"),
    ),
    (
        "rbac.authorization.k8s.io/v1",
        "ClusterRoleBinding",
        include_str!("testdata/clusterrolebinding.json"),
    ),
    (
        "rbac.authorization.k8s.io/v1",
        "Role",
        include_str!("testdata/role.json"),
    ),
    (
        "rbac.authorization.k8s.io/v1",
        "RoleBinding",
        include_str!("testdata/rolebinding.json"),
    ),
    (
        "resource.k8s.io/v1",
        "DeviceClass",
        include_str!("testdata/deviceclass.json"),
    ),
    (
        "resource.k8s.io/v1",
        "ResourceClaim",
        include_str!("testdata/resourceclaim.json"),
    ),
    (
        "resource.k8s.io/v1",
        "ResourceClaimTemplate",
        include_str!("testdata/resourceclaimtemplate.json"),
    ),
    (
        "resource.k8s.io/v1",
        "ResourceSlice",
        include_str!("testdata/resourceslice.json"),
    ),
    (
        "scheduling.k8s.io/v1",
        "PriorityClass",
        include_str!("testdata/priorityclass.json"),
    ),
    (
        "storage.k8s.io/v1",
        "CSIDriver",
        include_str!("testdata/csidriver.json"),
    ),
    (
        "storage.k8s.io/v1",
        "CSINode",
        include_str!("testdata/csinode.json"),
    ),
    (
        "storage.k8s.io/v1",
        "CSIStorageCapacity",
        include_str!("testdata/csistoragecapacity.json"),
    ),
    (
        "storage.k8s.io/v1",
        "StorageClass",
        include_str!("testdata/storageclass.json"),
    ),
    (
        "storage.k8s.io/v1",
        "VolumeAttachment",
        include_str!("testdata/volumeattachment.json"),
    ),
    (
        "storage.k8s.io/v1",
        "VolumeAttributesClass",
        include_str!("testdata/volumeattributesclass.json"),
    ),
];

fn msg(api_version: &str, kind: &str) -> MessageRef {
    message_for(api_version, kind).unwrap_or_else(|| panic!("no message for {api_version} {kind}"))
}

/// JSON → protobuf → JSON: the protobuf bytes and the JSON Go would write for them.
fn transcode(api_version: &str, kind: &str, json: &str) -> (Vec<u8>, String) {
    let m = msg(api_version, kind);
    let pb = json_to_proto(m, json.as_bytes()).unwrap_or_else(|e| panic!("{kind}: {e}"));
    let back =
        proto_to_json(m, &pb, Some((api_version, kind))).unwrap_or_else(|e| panic!("{kind}: {e}"));
    (pb, String::from_utf8(back).unwrap())
}

/// A JSON value Go omits from an `omitempty` field.
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

/// Every value of `want` is in `got` (objects may have more keys: the zero values Go writes;
/// and fewer: the empty values Go omits).
fn assert_subset(want: &Value, got: &Value, path: &str) {
    match (want, got) {
        (Value::Object(w), Value::Object(g)) => {
            for (k, v) in w {
                let Some(g) = g.get(k) else {
                    assert!(is_empty(v), "{path}.{k} lost");
                    continue;
                };
                assert_subset(v, g, &format!("{path}.{k}"));
            }
        }
        (Value::Array(w), Value::Array(g)) => {
            assert_eq!(w.len(), g.len(), "{path}: length");
            for (i, (w, g)) in w.iter().zip(g).enumerate() {
                assert_subset(w, g, &format!("{path}[{i}]"));
            }
        }
        (w, g) => assert_eq!(w, g, "{path}"),
    }
}

#[test]
fn every_root_kind_round_trips_and_keeps_every_value() {
    for &(api_version, kind, json) in FIXTURES {
        let (pb, canonical) = transcode(api_version, kind, json);
        let m = msg(api_version, kind);
        // The canonical JSON encodes to the same bytes, and decodes to itself.
        assert_eq!(
            json_to_proto(m, canonical.as_bytes()).unwrap(),
            pb,
            "{kind}"
        );
        let want: Value = serde_json::from_str(json).unwrap();
        let got: Value = serde_json::from_str(&canonical).unwrap();
        assert_subset(&want, &got, kind);
        // Keys come in Go's order: kind, apiVersion, then the struct's fields.
        assert!(
            canonical.starts_with(&format!("{{\"kind\":\"{kind}\",\"apiVersion\":")),
            "{canonical}"
        );
    }
}

/// Decodes with prost and checks prost's re-encoding is byte-identical: same tags, wire types,
/// order, zero values, map order. One known difference is normalised first: prost leaves a map
/// entry's key or value out when it is empty (its default), where gogo writes both (Go's
/// `generated.pb.go`: `Labels` entries always have `0x0a key 0x12 value`).
fn prost_identical<M: prost::Message + Default>(api_version: &str, kind: &str, pb: &[u8]) -> M {
    let decoded =
        M::decode(pb).unwrap_or_else(|e| panic!("{api_version} {kind}: k8s-pb cannot decode: {e}"));
    let id = if kind == "WatchEvent" {
        schema::WATCH_EVENT
    } else {
        msg(api_version, kind).0
    };
    assert_eq!(
        decoded.encode_to_vec(),
        prost_form(id, pb),
        "{api_version} {kind}: prost re-encodes differently"
    );
    decoded
}

/// Our bytes with empty map-entry keys and values dropped, as prost writes map entries.
fn prost_form(id: u16, pb: &[u8]) -> Vec<u8> {
    use super::model::{Elem, Shape};
    use prost::encoding::{WireType, decode_key, decode_varint, encode_key, encode_varint};
    let msg = &schema::MESSAGES[usize::from(id)];
    let mut out = Vec::new();
    let mut buf = pb;
    let put = |out: &mut Vec<u8>, tag: u32, b: &[u8]| {
        encode_key(tag, WireType::LengthDelimited, out);
        encode_varint(b.len() as u64, out);
        out.extend_from_slice(b);
    };
    while !buf.is_empty() {
        let start = buf;
        let (tag, wt) = decode_key(&mut buf).unwrap();
        let field = msg.field_by_tag(tag).map(|(_, f)| f);
        if wt != WireType::LengthDelimited {
            prost::encoding::skip_field(wt, tag, &mut buf, Default::default()).unwrap();
            out.extend_from_slice(&start[..start.len() - buf.len()]);
            continue;
        }
        let len = decode_varint(&mut buf).unwrap() as usize;
        let (value, rest) = buf.split_at(len);
        buf = rest;
        match field {
            Some(f) if f.shape == Shape::Map => {
                let mut entry = Vec::new();
                let mut eb = value;
                while !eb.is_empty() {
                    let (t, _) = decode_key(&mut eb).unwrap();
                    let l = decode_varint(&mut eb).unwrap() as usize;
                    let (v, r) = eb.split_at(l);
                    eb = r;
                    if v.is_empty() {
                        continue;
                    }
                    match (t, f.elem) {
                        (2, Elem::Message(child)) => put(&mut entry, 2, &prost_form(child, v)),
                        _ => put(&mut entry, t, v),
                    }
                }
                put(&mut out, tag, &entry);
            }
            Some(f) => match f.elem {
                Elem::Message(child) => put(&mut out, tag, &prost_form(child, value)),
                _ => put(&mut out, tag, value),
            },
            None => put(&mut out, tag, value),
        }
    }
    out
}

/// The JSON fixture of a kind.
fn fixture(api_version: &str, kind: &str) -> &'static str {
    FIXTURES
        .iter()
        .find(|f| (f.0, f.1) == (api_version, kind))
        .map(|f| f.2)
        .unwrap_or_else(|| panic!("no fixture for {api_version} {kind}"))
}

/// The protobuf of a kind's fixture.
fn pb_of(api_version: &str, kind: &str) -> Vec<u8> {
    transcode(api_version, kind, fixture(api_version, kind)).0
}

/// A kind's fixture, and a list of it (two items, a continue token), decode with k8s-pb's `M`
/// and `L` and re-encode to the same bytes.
fn same_in_k8s_pb<M, L>(api_version: &str, kind: &str) -> M
where
    M: prost::Message + Default,
    L: prost::Message + Default,
{
    let pb = pb_of(api_version, kind);
    let list_kind = format!("{kind}List");
    let list_meta = envelope::list_meta(br#"{"resourceVersion":"12345","continue":"next"}"#)
        .unwrap_or_else(|e| panic!("{e}"));
    let wrapped = envelope::list(api_version, &list_kind, &list_meta, [&pb[..], &pb[..]]);
    let unk = envelope::unwrap(&wrapped).unwrap_or_else(|e| panic!("{e}"));
    prost_identical::<L>(api_version, &list_kind, unk.raw);
    prost_identical::<M>(api_version, kind, &pb)
}

#[test]
fn k8s_pb_decodes_every_root_kind_and_re_encodes_the_same_bytes() {
    use k8s_pb::api::admissionregistration::{v1 as admission, v1beta1 as admission_beta};
    use k8s_pb::api::autoscaling::{v1 as autoscaling, v2 as autoscaling2};
    use k8s_pb::api::batch::v1 as batch;
    use k8s_pb::api::certificates::v1 as certificates;
    use k8s_pb::api::coordination::v1 as coordination;
    use k8s_pb::api::discovery::v1 as discovery;
    use k8s_pb::api::events::v1 as events;
    use k8s_pb::api::flowcontrol::v1 as flowcontrol;
    use k8s_pb::api::networking::v1 as networking;
    use k8s_pb::api::node::v1 as node;
    use k8s_pb::api::policy::v1 as policy;
    use k8s_pb::api::rbac::v1 as rbac;
    use k8s_pb::api::resource::v1 as resource;
    use k8s_pb::api::scheduling::v1 as scheduling;
    use k8s_pb::api::storage::v1 as storage;
    use k8s_pb::kube_aggregator::pkg::apis::apiregistration::v1 as apiregistration;
    const ADMISSION: &str = "admissionregistration.k8s.io/v1";
    const FLOWCONTROL: &str = "flowcontrol.apiserver.k8s.io/v1";
    const NETWORKING: &str = "networking.k8s.io/v1";
    const RBAC: &str = "rbac.authorization.k8s.io/v1";
    const RESOURCE: &str = "resource.k8s.io/v1";
    const STORAGE: &str = "storage.k8s.io/v1";

    same_in_k8s_pb::<core::Pod, core::PodList>("v1", "Pod");
    same_in_k8s_pb::<core::Node, core::NodeList>("v1", "Node");
    same_in_k8s_pb::<core::Namespace, core::NamespaceList>("v1", "Namespace");
    same_in_k8s_pb::<core::Service, core::ServiceList>("v1", "Service");
    same_in_k8s_pb::<core::ConfigMap, core::ConfigMapList>("v1", "ConfigMap");
    same_in_k8s_pb::<core::Secret, core::SecretList>("v1", "Secret");
    same_in_k8s_pb::<core::Event, core::EventList>("v1", "Event");
    same_in_k8s_pb::<core::Endpoints, core::EndpointsList>("v1", "Endpoints");
    same_in_k8s_pb::<core::PodTemplate, core::PodTemplateList>("v1", "PodTemplate");
    same_in_k8s_pb::<core::LimitRange, core::LimitRangeList>("v1", "LimitRange");
    same_in_k8s_pb::<core::ResourceQuota, core::ResourceQuotaList>("v1", "ResourceQuota");
    same_in_k8s_pb::<core::ServiceAccount, core::ServiceAccountList>("v1", "ServiceAccount");
    same_in_k8s_pb::<core::PersistentVolumeClaim, core::PersistentVolumeClaimList>(
        "v1",
        "PersistentVolumeClaim",
    );
    same_in_k8s_pb::<core::PersistentVolume, core::PersistentVolumeList>("v1", "PersistentVolume");
    same_in_k8s_pb::<core::ReplicationController, core::ReplicationControllerList>(
        "v1",
        "ReplicationController",
    );
    same_in_k8s_pb::<
        admission::MutatingWebhookConfiguration,
        admission::MutatingWebhookConfigurationList,
    >(ADMISSION, "MutatingWebhookConfiguration");
    same_in_k8s_pb::<
        admission::ValidatingWebhookConfiguration,
        admission::ValidatingWebhookConfigurationList,
    >(ADMISSION, "ValidatingWebhookConfiguration");
    same_in_k8s_pb::<admission::ValidatingAdmissionPolicy, admission::ValidatingAdmissionPolicyList>(
        ADMISSION,
        "ValidatingAdmissionPolicy",
    );
    same_in_k8s_pb::<
        admission::ValidatingAdmissionPolicyBinding,
        admission::ValidatingAdmissionPolicyBindingList,
    >(ADMISSION, "ValidatingAdmissionPolicyBinding");
    // k8s-pb 0.9 predates admissionregistration v1's MutatingAdmissionPolicy; its v1beta1 is the
    // same protobuf in k8s.io/api v0.36.2 (every message it reaches has the same fields, numbers
    // and types; v1beta1 reuses v1's Rule types).
    same_in_k8s_pb::<
        admission_beta::MutatingAdmissionPolicy,
        admission_beta::MutatingAdmissionPolicyList,
    >(ADMISSION, "MutatingAdmissionPolicy");
    same_in_k8s_pb::<
        admission_beta::MutatingAdmissionPolicyBinding,
        admission_beta::MutatingAdmissionPolicyBindingList,
    >(ADMISSION, "MutatingAdmissionPolicyBinding");
    same_in_k8s_pb::<ext::CustomResourceDefinition, ext::CustomResourceDefinitionList>(
        "apiextensions.k8s.io/v1",
        "CustomResourceDefinition",
    );
    same_in_k8s_pb::<apiregistration::APIService, apiregistration::APIServiceList>(
        "apiregistration.k8s.io/v1",
        "APIService",
    );
    same_in_k8s_pb::<apps::Deployment, apps::DeploymentList>("apps/v1", "Deployment");
    same_in_k8s_pb::<apps::ReplicaSet, apps::ReplicaSetList>("apps/v1", "ReplicaSet");
    same_in_k8s_pb::<apps::StatefulSet, apps::StatefulSetList>("apps/v1", "StatefulSet");
    same_in_k8s_pb::<apps::DaemonSet, apps::DaemonSetList>("apps/v1", "DaemonSet");
    same_in_k8s_pb::<apps::ControllerRevision, apps::ControllerRevisionList>(
        "apps/v1",
        "ControllerRevision",
    );
    prost_identical::<autoscaling::Scale>(
        "autoscaling/v1",
        "Scale",
        &pb_of("autoscaling/v1", "Scale"),
    );
    same_in_k8s_pb::<autoscaling::HorizontalPodAutoscaler, autoscaling::HorizontalPodAutoscalerList>(
        "autoscaling/v1",
        "HorizontalPodAutoscaler",
    );
    same_in_k8s_pb::<
        autoscaling2::HorizontalPodAutoscaler,
        autoscaling2::HorizontalPodAutoscalerList,
    >("autoscaling/v2", "HorizontalPodAutoscaler");
    same_in_k8s_pb::<batch::Job, batch::JobList>("batch/v1", "Job");
    same_in_k8s_pb::<batch::CronJob, batch::CronJobList>("batch/v1", "CronJob");
    same_in_k8s_pb::<
        certificates::CertificateSigningRequest,
        certificates::CertificateSigningRequestList,
    >("certificates.k8s.io/v1", "CertificateSigningRequest");
    same_in_k8s_pb::<coordination::Lease, coordination::LeaseList>(
        "coordination.k8s.io/v1",
        "Lease",
    );
    same_in_k8s_pb::<discovery::EndpointSlice, discovery::EndpointSliceList>(
        "discovery.k8s.io/v1",
        "EndpointSlice",
    );
    same_in_k8s_pb::<events::Event, events::EventList>("events.k8s.io/v1", "Event");
    same_in_k8s_pb::<flowcontrol::FlowSchema, flowcontrol::FlowSchemaList>(
        FLOWCONTROL,
        "FlowSchema",
    );
    same_in_k8s_pb::<
        flowcontrol::PriorityLevelConfiguration,
        flowcontrol::PriorityLevelConfigurationList,
    >(FLOWCONTROL, "PriorityLevelConfiguration");
    same_in_k8s_pb::<networking::Ingress, networking::IngressList>(NETWORKING, "Ingress");
    same_in_k8s_pb::<networking::IngressClass, networking::IngressClassList>(
        NETWORKING,
        "IngressClass",
    );
    same_in_k8s_pb::<networking::NetworkPolicy, networking::NetworkPolicyList>(
        NETWORKING,
        "NetworkPolicy",
    );
    same_in_k8s_pb::<networking::IPAddress, networking::IPAddressList>(NETWORKING, "IPAddress");
    same_in_k8s_pb::<networking::ServiceCIDR, networking::ServiceCIDRList>(
        NETWORKING,
        "ServiceCIDR",
    );
    same_in_k8s_pb::<node::RuntimeClass, node::RuntimeClassList>("node.k8s.io/v1", "RuntimeClass");
    same_in_k8s_pb::<policy::PodDisruptionBudget, policy::PodDisruptionBudgetList>(
        "policy/v1",
        "PodDisruptionBudget",
    );
    same_in_k8s_pb::<rbac::ClusterRole, rbac::ClusterRoleList>(RBAC, "ClusterRole");
    same_in_k8s_pb::<rbac::ClusterRoleBinding, rbac::ClusterRoleBindingList>(
        RBAC,
        "ClusterRoleBinding",
    );
    same_in_k8s_pb::<rbac::Role, rbac::RoleList>(RBAC, "Role");
    same_in_k8s_pb::<rbac::RoleBinding, rbac::RoleBindingList>(RBAC, "RoleBinding");
    same_in_k8s_pb::<resource::DeviceClass, resource::DeviceClassList>(RESOURCE, "DeviceClass");
    same_in_k8s_pb::<resource::ResourceClaim, resource::ResourceClaimList>(
        RESOURCE,
        "ResourceClaim",
    );
    same_in_k8s_pb::<resource::ResourceClaimTemplate, resource::ResourceClaimTemplateList>(
        RESOURCE,
        "ResourceClaimTemplate",
    );
    same_in_k8s_pb::<resource::ResourceSlice, resource::ResourceSliceList>(
        RESOURCE,
        "ResourceSlice",
    );
    same_in_k8s_pb::<scheduling::PriorityClass, scheduling::PriorityClassList>(
        "scheduling.k8s.io/v1",
        "PriorityClass",
    );
    same_in_k8s_pb::<storage::CSIDriver, storage::CSIDriverList>(STORAGE, "CSIDriver");
    same_in_k8s_pb::<storage::CSINode, storage::CSINodeList>(STORAGE, "CSINode");
    same_in_k8s_pb::<storage::CSIStorageCapacity, storage::CSIStorageCapacityList>(
        STORAGE,
        "CSIStorageCapacity",
    );
    same_in_k8s_pb::<storage::StorageClass, storage::StorageClassList>(STORAGE, "StorageClass");
    same_in_k8s_pb::<storage::VolumeAttachment, storage::VolumeAttachmentList>(
        STORAGE,
        "VolumeAttachment",
    );
    same_in_k8s_pb::<storage::VolumeAttributesClass, storage::VolumeAttributesClassList>(
        STORAGE,
        "VolumeAttributesClass",
    );
    prost_identical::<meta::Status>("v1", "Status", &pb_of("v1", "Status"));
    prost_identical::<meta::DeleteOptions>("v1", "DeleteOptions", &pb_of("v1", "DeleteOptions"));
    prost_identical::<meta::PartialObjectMetadata>(
        "meta.k8s.io/v1",
        "PartialObjectMetadata",
        &pb_of("meta.k8s.io/v1", "PartialObjectMetadata"),
    );
    prost_identical::<meta::PartialObjectMetadataList>(
        "meta.k8s.io/v1",
        "PartialObjectMetadataList",
        &pb_of("meta.k8s.io/v1", "PartialObjectMetadataList"),
    );
}

#[test]
fn decoded_values_are_the_json_values() {
    let pod = prost_identical::<core::Pod>("v1", "Pod", &pb_of("v1", "Pod"));
    let meta = pod.metadata.unwrap();
    assert_eq!(meta.name.as_deref(), Some("web-7d4b9c6f5-x2k8p"));
    // 2024-05-01T10:20:30Z; a Time has no nanos (written as 0).
    let created = meta.creation_timestamp.unwrap();
    assert_eq!(
        (created.seconds, created.nanos),
        (Some(1_714_558_830), Some(0))
    );
    assert_eq!(
        meta.labels.get("tier").map(String::as_str),
        Some("<frontend>&")
    );
    let fields = meta.managed_fields[0]
        .fields_v1
        .as_ref()
        .unwrap()
        .raw
        .as_ref()
        .unwrap();
    assert!(fields.starts_with(b"{\"f:metadata\""));
    let spec = pod.spec.unwrap();
    let web = &spec.containers[0];
    let res = web.resources.as_ref().unwrap();
    assert_eq!(res.requests["memory"].string.as_deref(), Some("1536Mi"));
    assert_eq!(res.limits["cpu"].string.as_deref(), Some("2"));
    // Probe.ProbeHandler is inline in JSON, a nested message in protobuf.
    let http = web
        .liveness_probe
        .as_ref()
        .unwrap()
        .handler
        .as_ref()
        .unwrap()
        .http_get
        .as_ref()
        .unwrap();
    let port = http.port.as_ref().unwrap();
    assert_eq!(
        (port.r#type, port.int_val, port.str_val.as_deref()),
        (Some(0), Some(8080), Some(""))
    );
    let tcp = web
        .readiness_probe
        .as_ref()
        .unwrap()
        .handler
        .as_ref()
        .unwrap()
        .tcp_socket
        .as_ref()
        .unwrap();
    let port = tcp.port.as_ref().unwrap();
    assert_eq!(
        (port.r#type, port.int_val, port.str_val.as_deref()),
        (Some(1), Some(0), Some("http"))
    );
    // Volume.VolumeSource inline.
    let cache = spec.volumes[1]
        .volume_source
        .as_ref()
        .unwrap()
        .empty_dir
        .as_ref()
        .unwrap();
    assert_eq!(
        cache.size_limit.as_ref().unwrap().string.as_deref(),
        Some("512Mi")
    );
    // Repeated int64, unpacked, negative values sign-extended.
    assert_eq!(
        spec.security_context.unwrap().supplemental_groups,
        vec![4000, -5, 2_147_483_647]
    );
    assert_eq!(spec.tolerations[0].toleration_seconds, Some(300));
    // Value fields absent from the JSON are written as Go's zero values.
    assert_eq!(spec.host_pid, Some(false));
    assert_eq!(spec.containers[1].working_dir.as_deref(), Some(""));

    let event = prost_identical::<core::Event>("v1", "Event", &pb_of("v1", "Event"));
    let t = event.event_time.unwrap();
    assert_eq!(
        (t.seconds, t.nanos),
        (Some(1_714_558_840), Some(123_456_000))
    );

    let secret = prost_identical::<core::Secret>("v1", "Secret", &pb_of("v1", "Secret"));
    assert_eq!(secret.data["password"], b"secret!");
    assert_eq!(secret.data["empty"], b"");

    let crd = prost_identical::<ext::CustomResourceDefinition>(
        "apiextensions.k8s.io/v1",
        "CustomResourceDefinition",
        &pb_of("apiextensions.k8s.io/v1", "CustomResourceDefinition"),
    );
    let schema = crd.spec.unwrap().versions[0]
        .schema
        .clone()
        .unwrap()
        .open_apiv3_schema
        .unwrap();
    let spec_props = &schema.properties["spec"];
    let size = &spec_props.properties["size"];
    assert_eq!(size.maximum, Some(100.0));
    assert_eq!(size.minimum, Some(-1.5));
    assert_eq!(
        size.default.as_ref().unwrap().raw.as_deref(),
        Some(&b"3"[..])
    );
    let closed = &spec_props.properties["closed"];
    let ap = closed.additional_properties.as_ref().unwrap();
    assert_eq!((ap.allows, ap.schema.is_none()), (Some(false), true));
    let pair = spec_props.properties["pair"].items.as_ref().unwrap();
    assert_eq!(pair.j_son_schemas.len(), 2);
    assert_eq!(
        spec_props.dependencies["color"].property,
        vec!["size".to_string()]
    );
    assert_eq!(spec_props.properties["color"].r#enum.len(), 4);
}

#[test]
fn go_output_details() {
    let pod = msg("v1", "Pod");
    // A zero value struct is written (empty ObjectMeta, PodSpec's zero values); a zero
    // creationTimestamp is omitted from JSON (omitzero), a nil slice of a non-omitempty field is
    // `null`, an empty string of a non-omitempty field is kept.
    let pb = json_to_proto(pod, b"{}").unwrap();
    let json = String::from_utf8(proto_to_json(pod, &pb, None).unwrap()).unwrap();
    assert_eq!(
        json,
        r#"{"metadata":{},"spec":{"containers":null},"status":{}}"#
    );
    // A zero Time in a non-omitzero field is `null`.
    let cond =
        r#"{"status":{"conditions":[{"type":"Ready","status":"True","lastTransitionTime":null}]}}"#;
    let pb = json_to_proto(pod, cond.as_bytes()).unwrap();
    let json = String::from_utf8(proto_to_json(pod, &pb, None).unwrap()).unwrap();
    assert!(json.contains(r#""conditions":[{"type":"Ready","status":"True","lastProbeTime":null,"lastTransitionTime":null}]"#), "{json}");
    // Non-canonical quantities and times are written as Go writes them.
    let q = r#"{"metadata":{"creationTimestamp":"2024-01-01T02:00:00.9+02:00"},"spec":{"overhead":{"cpu":"1000m","mem":"0.5Gi","n":2}}}"#;
    let pb = json_to_proto(pod, q.as_bytes()).unwrap();
    let json = String::from_utf8(proto_to_json(pod, &pb, None).unwrap()).unwrap();
    assert!(
        json.contains(r#""creationTimestamp":"2024-01-01T00:00:00Z""#),
        "{json}"
    );
    assert!(
        json.contains(r#""overhead":{"cpu":"1","mem":"512Mi","n":"2"}"#),
        "{json}"
    );
    // Strings are escaped as Go escapes them.
    let s = r#"{"metadata":{"name":"a<b>&\u2028\u0001é"}}"#;
    let pb = json_to_proto(pod, s.as_bytes()).unwrap();
    let json = String::from_utf8(proto_to_json(pod, &pb, None).unwrap()).unwrap();
    assert!(
        json.contains(r#""name":"a\u003cb\u003e\u0026\u2028\u0001é""#),
        "{json}"
    );
}

/// certificates' `ExtraValue` (`[]string` marked `+protobuf.nullable=true`): a message of items
/// in protobuf, written for every map value (empty ones too, as gogo does), the bare array in
/// JSON; no items decode to a nil slice, `null`.
#[test]
fn nullable_slices_as_go_writes_them() {
    let csr = msg("certificates.k8s.io/v1", "CertificateSigningRequest");
    let pb = json_to_proto(
        csr,
        br#"{"spec":{"extra":{"a":["x","y"],"b":[],"c":null}}}"#,
    )
    .unwrap();
    let json = String::from_utf8(proto_to_json(csr, &pb, None).unwrap()).unwrap();
    assert!(
        json.contains(r#""extra":{"a":["x","y"],"b":null,"c":null}"#),
        "{json}"
    );
    // The entry of "b": key, and an empty value message.
    let b_entry = [0x32, 0x05, 0x0a, 0x01, b'b', 0x12, 0x00];
    assert!(pb.windows(b_entry.len()).any(|w| w == b_entry), "{pb:?}");
    let decoded =
        k8s_pb::api::certificates::v1::CertificateSigningRequest::decode(&pb[..]).unwrap();
    let extra = decoded.spec.unwrap().extra;
    assert_eq!(extra["a"].items, ["x", "y"]);
    assert!(extra["b"].items.is_empty() && extra["c"].items.is_empty());
    // Anything but an array or null is refused, as Go's decoder refuses it.
    for bad in [r#""x""#, "1", "true", r#"{"items":["x"]}"#] {
        let doc = format!(r#"{{"spec":{{"extra":{{"a":{bad}}}}}}}"#);
        let err = json_to_proto(csr, doc.as_bytes()).unwrap_err();
        assert!(
            matches!(&err, ProtoError::Json { path, message } if path == r#"spec.extra["a"]"# && message.contains("ExtraValue")),
            "{bad}: {err}"
        );
    }
}

#[test]
fn type_mismatches_name_the_json_path() {
    let pod = msg("v1", "Pod");
    let err = json_to_proto(
        pod,
        br#"{"spec":{"containers":[{"name":"a"},{"name":"b","ports":[{"containerPort":"x"}]}]}}"#,
    )
    .unwrap_err();
    match err {
        ProtoError::Json { path, message } => {
            assert_eq!(path, "spec.containers[1].ports[0].containerPort");
            assert!(message.contains("string"), "{message}");
        }
        other => panic!("{other}"),
    }
    let err = json_to_proto(pod, br#"{"metadata":{"labels":{"a":1}}}"#).unwrap_err();
    assert!(
        matches!(&err, ProtoError::Json { path, .. } if path == r#"metadata.labels["a"]"#),
        "{err}"
    );
    let err = json_to_proto(
        pod,
        br#"{"spec":{"containers":[{"resources":{"limits":{"cpu":"lots"}}}]}}"#,
    )
    .unwrap_err();
    assert!(
        matches!(&err, ProtoError::Json { path, .. } if path == r#"spec.containers[0].resources.limits["cpu"]"#),
        "{err}"
    );
    let err = json_to_proto(pod, br#"{"spec":{"priority":2147483648}}"#).unwrap_err();
    assert!(matches!(err, ProtoError::Json { .. }));
    let err = json_to_proto(pod, br#"{"metadata":{"creationTimestamp":"yesterday"}}"#).unwrap_err();
    assert!(matches!(err, ProtoError::Json { .. }));
    assert!(matches!(
        json_to_proto(pod, b"{\"a\":"),
        Err(ProtoError::Syntax(_))
    ));
    // Unknown keys are skipped, whatever their value.
    let pb = json_to_proto(pod, br#"{"nope":{"deep":[1,{"x":null}]},"kind":"Pod"}"#).unwrap();
    assert_eq!(pb, json_to_proto(pod, b"{}").unwrap());
}

#[test]
fn lists_assemble_from_per_object_bytes() {
    let (pod_v, pod_json) = ("v1", fixture("v1", "Pod"));
    let pod = transcode(pod_v, "Pod", pod_json).0;
    let small = json_to_proto(msg("v1", "Pod"), br#"{"metadata":{"name":"b"}}"#).unwrap();
    let list_meta = envelope::list_meta(
        br#"{"resourceVersion":"777","continue":"abc","remainingItemCount":5}"#,
    )
    .unwrap();
    let wrapped = envelope::list("v1", "PodList", &list_meta, [&pod[..], &small[..]]);
    let unk = envelope::unwrap(&wrapped).unwrap();
    assert_eq!((unk.api_version, unk.kind), ("v1", "PodList"));
    // k8s-pb reads the whole wrapped list.
    let decoded = k8s_pb::apimachinery::pkg::runtime::Unknown::decode(&wrapped[4..]).unwrap();
    assert_eq!(decoded.encode_to_vec(), &wrapped[4..]);
    let list = prost_identical::<core::PodList>("v1", "PodList", unk.raw);
    assert_eq!(list.items.len(), 2);
    assert_eq!(
        list.metadata.as_ref().unwrap().remaining_item_count,
        Some(5)
    );
    // The same as transcoding the list's JSON.
    let list_json = format!(
        r#"{{"kind":"PodList","apiVersion":"v1","metadata":{{"resourceVersion":"777","continue":"abc","remainingItemCount":5}},"items":[{pod_json},{{"metadata":{{"name":"b"}}}}]}}"#
    );
    assert_eq!(
        json_to_proto(msg("v1", "PodList"), list_json.as_bytes()).unwrap(),
        unk.raw
    );

    // The chunked form is the same bytes.
    let many: Vec<bytes::Bytes> = (0..300).map(|_| bytes::Bytes::from(pod.clone())).collect();
    let whole = envelope::list("v1", "PodList", &list_meta, many.iter().map(|b| &b[..]));
    let chunks = envelope::list_chunks("v1", "PodList", &list_meta, many);
    assert_eq!(chunks.total_len(), whole.len());
    let chunks: Vec<bytes::Bytes> = chunks.collect();
    assert!(chunks.len() > 1);
    assert_eq!(chunks.concat(), whole);

    // PartialObjectMetadata from an encoded object, without a second transcode.
    let partial = envelope::partial_object_metadata(msg("v1", "Pod"), &pod).unwrap();
    let from_json = json_to_proto(
        msg("meta.k8s.io/v1", "PartialObjectMetadata"),
        serde_json::to_string(&serde_json::json!({"metadata": serde_json::from_str::<Value>(pod_json).unwrap()["metadata"]})).unwrap().as_bytes(),
    )
    .unwrap();
    assert_eq!(partial, from_json);
    assert_eq!(envelope::field_slice(&pod, 1), Some(&partial[2 + 1..]));
}

#[test]
fn envelope_and_watch_frames_as_kube_writes_them() {
    let pod = pb_of("v1", "Pod");
    let wrapped = envelope::wrap("v1", "Pod", &pod);
    assert_eq!(&wrapped[..4], &MAGIC);
    let unk = envelope::unwrap(&wrapped).unwrap();
    assert_eq!(
        (
            unk.api_version,
            unk.kind,
            unk.raw,
            unk.content_encoding,
            unk.content_type
        ),
        ("v1", "Pod", &pod[..], "", "")
    );
    let decoded = k8s_pb::apimachinery::pkg::runtime::Unknown::decode(&wrapped[4..]).unwrap();
    assert_eq!(decoded.content_encoding.as_deref(), Some(""));
    assert_eq!(decoded.content_type.as_deref(), Some(""));
    assert_eq!(decoded.encode_to_vec(), &wrapped[4..]);

    let event = envelope::watch_event("MODIFIED", &wrapped);
    let we = prost_identical::<meta::WatchEvent>("v1", "WatchEvent", &event);
    assert_eq!(we.r#type.as_deref(), Some("MODIFIED"));
    assert_eq!(we.object.unwrap().raw.unwrap(), wrapped);
    let frame = envelope::length_prefixed(&event);
    assert_eq!(
        u32::from_be_bytes(frame[..4].try_into().unwrap()) as usize,
        event.len()
    );
    assert_eq!(&frame[4..], &event[..]);

    let status = envelope::status(include_str!("testdata/status.json").as_bytes()).unwrap();
    let unk = envelope::unwrap(&status).unwrap();
    assert_eq!((unk.api_version, unk.kind), ("v1", "Status"));
    let st = prost_identical::<meta::Status>("v1", "Status", unk.raw);
    assert_eq!(st.code, Some(403));
    assert_eq!(st.reason.as_deref(), Some("Forbidden"));
}

#[test]
fn malformed_input_is_an_error() {
    assert!(matches!(
        envelope::unwrap(b"k8s"),
        Err(ProtoError::NotProtobuf)
    ));
    assert!(matches!(
        envelope::unwrap(b"{\"kind\":1}"),
        Err(ProtoError::NotProtobuf)
    ));
    assert!(envelope::unwrap(b"").is_err());
    assert!(envelope::unwrap(b"k8s\0").is_err());
    let pod = pb_of("v1", "Pod");
    let pod_msg = msg("v1", "Pod");
    // Every truncation of a valid message is an error or a shorter valid prefix, never a panic.
    for cut in 0..pod.len() {
        let _ = proto_to_json(pod_msg, &pod[..cut], None);
    }
    assert!(proto_to_json(pod_msg, &pod[..pod.len() - 1], None).is_err());
    // A length far beyond the input.
    assert!(proto_to_json(pod_msg, &[0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f], None).is_err());
    // A varint that never ends.
    assert!(proto_to_json(pod_msg, &[0x08; 20], None).is_err());
    // A wire type that does not match the field (metadata as a varint).
    assert!(proto_to_json(pod_msg, &[0x08, 0x01], None).is_err());
    // Deep nesting: JSONSchemaProps.not, 10000 levels.
    let mut deep = Vec::new();
    for _ in 0..10_000 {
        let mut outer = vec![0xe2, 0x01]; // field 28 (not), wire type 2
        prost::encoding::encode_varint(deep.len() as u64, &mut outer);
        outer.extend_from_slice(&deep);
        deep = outer;
    }
    let props = super::message(schema_id("JSONSchemaProps")).unwrap();
    assert!(matches!(
        proto_to_json(props, &deep, None),
        Err(ProtoError::TooDeep(_))
    ));
    // Deep JSON is refused by the JSON reader's own limit.
    let deep_json = format!("{}{}", "{\"not\":".repeat(5000), "}".repeat(5000));
    assert!(json_to_proto(props, deep_json.as_bytes()).is_err());
}

#[test]
fn decoding_into_a_buffer_appends_or_leaves_it_as_it_was() {
    let m = msg("v1", "Pod");
    let pod = pb_of("v1", "Pod");
    let alone = proto_to_json(m, &pod, Some(("v1", "Pod"))).unwrap();
    let mut out = b"[".to_vec();
    super::proto_to_json_into(m, &pod, Some(("v1", "Pod")), &mut out).unwrap();
    out.push(b',');
    super::proto_to_json_into(m, &pod, None, &mut out).unwrap();
    let before = out.clone();
    // Cut inside the last field: an error after much has been written.
    let cut = &pod[..pod.len() - 1];
    assert!(super::proto_to_json_into(m, cut, Some(("v1", "Pod")), &mut out).is_err());
    assert_eq!(out, before);
    out.push(b']');
    let items: Vec<Value> = serde_json::from_slice(&out).unwrap();
    assert_eq!(items.len(), 2);
    assert!(
        out[1..].starts_with(&alone),
        "the same bytes as proto_to_json"
    );
}

/// Every fixture: JSON → protobuf → JSON → protobuf → JSON is a fixed point after one round,
/// and decoding all of them into one buffer gives each one's JSON, one after the other.
#[test]
fn fixtures_are_fixed_points_and_decode_into_one_buffer() {
    let mut all = Vec::new();
    let mut each = Vec::new();
    for &(api_version, kind, json) in FIXTURES {
        let m = msg(api_version, kind);
        let tm = Some((api_version, kind));
        let pb = json_to_proto(m, json.as_bytes()).unwrap();
        let j1 = proto_to_json(m, &pb, tm).unwrap();
        let pb1 = json_to_proto(m, &j1).unwrap();
        assert_eq!(pb1, pb, "{kind}: protobuf of the decoded JSON");
        let j2 = proto_to_json(m, &pb1, tm).unwrap();
        assert_eq!(
            String::from_utf8_lossy(&j2),
            String::from_utf8_lossy(&j1),
            "{kind}"
        );
        super::proto_to_json_into(m, &pb, tm, &mut all).unwrap();
        each.extend_from_slice(&j1);
    }
    assert!(all == each, "decoded into one buffer");
}

fn schema_id(short: &str) -> u16 {
    schema::MESSAGES
        .iter()
        .position(|m| m.name.rsplit('.').next() == Some(short))
        .unwrap() as u16
}

#[test]
fn every_root_is_reachable_by_kind() {
    for root in schema::ROOTS.iter() {
        assert_eq!(
            message_for(root.api_version, root.kind),
            Some(MessageRef(root.message))
        );
    }
    assert_eq!(
        message_for("apps/v1", "DeleteOptions"),
        Some(MessageRef(schema::DELETE_OPTIONS))
    );
    assert_eq!(
        message_for("meta.k8s.io/v1", "PartialObjectMetadataList").map(|m| m.name()),
        Some("k8s.io.apimachinery.pkg.apis.meta.v1.PartialObjectMetadataList")
    );
    assert_eq!(message_for("v1", "Table"), None);
    assert_eq!(message_for("v2", "Pod"), None);
}

/// Every resource kube-apiserver 1.36 serves with list and watch by default, as (apiVersion,
/// kind, the protobuf package of its message): GA group versions only (alpha and beta ones are
/// off by default; ClusterTrustBundle has no v1 in k8s.io/api v0.36.2), plus apiextensions'
/// and kube-aggregator's.
const SERVED: &[(&str, &str, &str)] = &[
    ("v1", "ConfigMap", "k8s.io.api.core.v1"),
    ("v1", "Endpoints", "k8s.io.api.core.v1"),
    ("v1", "Event", "k8s.io.api.core.v1"),
    ("v1", "LimitRange", "k8s.io.api.core.v1"),
    ("v1", "Namespace", "k8s.io.api.core.v1"),
    ("v1", "Node", "k8s.io.api.core.v1"),
    ("v1", "PersistentVolumeClaim", "k8s.io.api.core.v1"),
    ("v1", "PersistentVolume", "k8s.io.api.core.v1"),
    ("v1", "Pod", "k8s.io.api.core.v1"),
    ("v1", "PodTemplate", "k8s.io.api.core.v1"),
    ("v1", "ReplicationController", "k8s.io.api.core.v1"),
    ("v1", "ResourceQuota", "k8s.io.api.core.v1"),
    ("v1", "Secret", "k8s.io.api.core.v1"),
    ("v1", "ServiceAccount", "k8s.io.api.core.v1"),
    ("v1", "Service", "k8s.io.api.core.v1"),
    (ADMISSION_V1, "MutatingWebhookConfiguration", ADMISSION_PKG),
    (
        ADMISSION_V1,
        "ValidatingWebhookConfiguration",
        ADMISSION_PKG,
    ),
    (ADMISSION_V1, "ValidatingAdmissionPolicy", ADMISSION_PKG),
    (
        ADMISSION_V1,
        "ValidatingAdmissionPolicyBinding",
        ADMISSION_PKG,
    ),
    (ADMISSION_V1, "MutatingAdmissionPolicy", ADMISSION_PKG),
    (
        ADMISSION_V1,
        "MutatingAdmissionPolicyBinding",
        ADMISSION_PKG,
    ),
    (
        "apiextensions.k8s.io/v1",
        "CustomResourceDefinition",
        "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1",
    ),
    (
        "apiregistration.k8s.io/v1",
        "APIService",
        "k8s.io.kube_aggregator.pkg.apis.apiregistration.v1",
    ),
    ("apps/v1", "ControllerRevision", "k8s.io.api.apps.v1"),
    ("apps/v1", "DaemonSet", "k8s.io.api.apps.v1"),
    ("apps/v1", "Deployment", "k8s.io.api.apps.v1"),
    ("apps/v1", "ReplicaSet", "k8s.io.api.apps.v1"),
    ("apps/v1", "StatefulSet", "k8s.io.api.apps.v1"),
    (
        "autoscaling/v1",
        "HorizontalPodAutoscaler",
        "k8s.io.api.autoscaling.v1",
    ),
    (
        "autoscaling/v2",
        "HorizontalPodAutoscaler",
        "k8s.io.api.autoscaling.v2",
    ),
    ("batch/v1", "CronJob", "k8s.io.api.batch.v1"),
    ("batch/v1", "Job", "k8s.io.api.batch.v1"),
    (
        "certificates.k8s.io/v1",
        "CertificateSigningRequest",
        "k8s.io.api.certificates.v1",
    ),
    (
        "coordination.k8s.io/v1",
        "Lease",
        "k8s.io.api.coordination.v1",
    ),
    (
        "discovery.k8s.io/v1",
        "EndpointSlice",
        "k8s.io.api.discovery.v1",
    ),
    ("events.k8s.io/v1", "Event", "k8s.io.api.events.v1"),
    (FLOWCONTROL_V1, "FlowSchema", "k8s.io.api.flowcontrol.v1"),
    (
        FLOWCONTROL_V1,
        "PriorityLevelConfiguration",
        "k8s.io.api.flowcontrol.v1",
    ),
    (NETWORKING_V1, "IngressClass", NETWORKING_PKG),
    (NETWORKING_V1, "Ingress", NETWORKING_PKG),
    (NETWORKING_V1, "NetworkPolicy", NETWORKING_PKG),
    (NETWORKING_V1, "IPAddress", NETWORKING_PKG),
    (NETWORKING_V1, "ServiceCIDR", NETWORKING_PKG),
    ("node.k8s.io/v1", "RuntimeClass", "k8s.io.api.node.v1"),
    ("policy/v1", "PodDisruptionBudget", "k8s.io.api.policy.v1"),
    (RBAC_V1, "ClusterRoleBinding", RBAC_PKG),
    (RBAC_V1, "ClusterRole", RBAC_PKG),
    (RBAC_V1, "RoleBinding", RBAC_PKG),
    (RBAC_V1, "Role", RBAC_PKG),
    (RESOURCE_V1, "DeviceClass", RESOURCE_PKG),
    (RESOURCE_V1, "ResourceClaim", RESOURCE_PKG),
    (RESOURCE_V1, "ResourceClaimTemplate", RESOURCE_PKG),
    (RESOURCE_V1, "ResourceSlice", RESOURCE_PKG),
    (
        "scheduling.k8s.io/v1",
        "PriorityClass",
        "k8s.io.api.scheduling.v1",
    ),
    (STORAGE_V1, "CSIDriver", STORAGE_PKG),
    (STORAGE_V1, "CSINode", STORAGE_PKG),
    (STORAGE_V1, "CSIStorageCapacity", STORAGE_PKG),
    (STORAGE_V1, "StorageClass", STORAGE_PKG),
    (STORAGE_V1, "VolumeAttachment", STORAGE_PKG),
    (STORAGE_V1, "VolumeAttributesClass", STORAGE_PKG),
];
const ADMISSION_V1: &str = "admissionregistration.k8s.io/v1";
const ADMISSION_PKG: &str = "k8s.io.api.admissionregistration.v1";
const FLOWCONTROL_V1: &str = "flowcontrol.apiserver.k8s.io/v1";
const NETWORKING_V1: &str = "networking.k8s.io/v1";
const NETWORKING_PKG: &str = "k8s.io.api.networking.v1";
const RBAC_V1: &str = "rbac.authorization.k8s.io/v1";
const RBAC_PKG: &str = "k8s.io.api.rbac.v1";
const RESOURCE_V1: &str = "resource.k8s.io/v1";
const RESOURCE_PKG: &str = "k8s.io.api.resource.v1";
const STORAGE_V1: &str = "storage.k8s.io/v1";
const STORAGE_PKG: &str = "k8s.io.api.storage.v1";

#[test]
fn every_served_kind_and_its_list_has_its_message_and_a_fixture() {
    assert_eq!(
        SERVED.len(),
        60,
        "the resources kube 1.36 serves with list and watch"
    );
    for &(api_version, kind, package) in SERVED {
        let list = format!("{kind}List");
        for k in [kind, list.as_str()] {
            let m = message_for(api_version, k);
            assert_eq!(
                m.map(MessageRef::name),
                Some(format!("{package}.{k}").as_str()),
                "{api_version} {k}"
            );
        }
        assert!(
            FIXTURES.iter().any(|f| (f.0, f.1) == (api_version, kind)),
            "{api_version} {kind}: no fixture"
        );
        // The list's items are the kind's message.
        let list_msg = msg(api_version, &list).message();
        let items = list_msg
            .key("items")
            .and_then(|p| list_msg.fields.get(usize::from(p[0])));
        assert_eq!(
            items.map(|f| f.elem),
            Some(super::model::Elem::Message(msg(api_version, kind).0)),
            "{api_version} {list}"
        );
    }
    // Beta, alpha and removed versions are not served by default: no message.
    for (api_version, kind) in [
        ("certificates.k8s.io/v1beta1", "ClusterTrustBundle"),
        (
            "admissionregistration.k8s.io/v1beta1",
            "MutatingAdmissionPolicy",
        ),
        ("autoscaling/v2beta2", "HorizontalPodAutoscaler"),
        ("policy/v1beta1", "PodSecurityPolicy"),
        ("v1", "ComponentStatus"),
    ] {
        assert_eq!(message_for(api_version, kind), None, "{api_version} {kind}");
    }
}

/// The fields kube's field selectors read, per built-in kind with a field label conversion of
/// its own ([`crate::selector::selectable`]), as JSON paths of the v1 object.
const SELECTABLE_PATHS: &[(&str, &str, &[&str])] = &[
    (
        "v1",
        "Pod",
        &[
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.serviceAccount",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.podIPs[0].ip",
            "status.nominatedNodeName",
        ],
    ),
    ("v1", "Node", &["spec.unschedulable"]),
    ("v1", "ReplicationController", &["status.replicas"]),
    ("v1", "Namespace", &["status.phase"]),
    ("v1", "Secret", &["type"]),
    ("v1", "Service", &["spec.clusterIP", "spec.type"]),
    ("batch/v1", "Job", &["status.succeeded"]),
    (
        "v1",
        "Event",
        &[
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source.component",
            "type",
        ],
    ),
    (
        "events.k8s.io/v1",
        "Event",
        &[
            "regarding.kind",
            "regarding.namespace",
            "regarding.name",
            "regarding.uid",
            "regarding.apiVersion",
            "regarding.resourceVersion",
            "regarding.fieldPath",
            "reason",
            "reportingController",
            "deprecatedSource.component",
            "type",
        ],
    ),
    (
        "certificates.k8s.io/v1",
        "CertificateSigningRequest",
        &["spec.signerName"],
    ),
    (
        "resource.k8s.io/v1",
        "ResourceSlice",
        &["spec.nodeName", "spec.driver"],
    ),
];

/// The object `paths` read from protobuf make, as a selector sees it: `metadata.name` and
/// `metadata.namespace`, and each path's value where it is present (absent scalars are Go's
/// zero values, as protobuf has them).
fn selectable_view(m: MessageRef, pb: &[u8], paths: &[&'static str]) -> Value {
    use super::fields::{FieldValue, ScalarPath};
    let mut view = serde_json::json!({});
    let all = ["metadata.name", "metadata.namespace"];
    for path in all.iter().chain(paths) {
        let scalar = ScalarPath::new(m, path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let Some(value) = scalar.read(pb).unwrap_or_else(|e| panic!("{path}: {e}")) else {
            continue;
        };
        let value = match value {
            FieldValue::Str(s) => Value::from(s),
            FieldValue::Bool(b) => Value::from(b),
            FieldValue::Int(i) => Value::from(i),
        };
        let mut at = &mut view;
        for part in path.split('.') {
            at = match part.strip_suffix("[0]") {
                Some(list) => {
                    at[list] = serde_json::json!([{}]);
                    &mut at[list][0]
                }
                None => &mut at[part],
            };
        }
        *at = value;
    }
    view
}

/// Each selectable path resolves through the schema as the cache resolves it (a
/// [`super::fields::ScalarPath`] of the kind's message), and the selectable fields of the
/// values read from each fixture's protobuf are those of its JSON.
#[test]
fn selectable_fields_resolve_through_the_schema() {
    use crate::selector::selectable::selectable_fields;
    for &(api_version, kind, paths) in SELECTABLE_PATHS {
        let m = msg(api_version, kind);
        let pb = pb_of(api_version, kind);
        let json: Value = serde_json::from_str(fixture(api_version, kind)).unwrap();
        let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
        let namespaced = json["metadata"].get("namespace").is_some();
        let view = selectable_view(m, &pb, paths);
        // Each value read is the JSON's, or Go's zero value where the JSON omits it.
        for path in paths {
            let pointer = format!("/{}", path.replace("[0]", "/0").replace('.', "/"));
            let (want, got) = (json.pointer(&pointer), view.pointer(&pointer));
            match want {
                Some(w) => assert_eq!(Some(w), got, "{api_version} {kind} {path}"),
                None => assert!(
                    got.is_none_or(|g| g == "" || g == false || g == 0),
                    "{api_version} {kind} {path}: {got:?} in protobuf, absent in JSON"
                ),
            }
        }
        let from_json = selectable_fields(group, kind, namespaced, &[], &json);
        let from_pb = selectable_fields(group, kind, namespaced, &[], &view);
        assert_eq!(from_pb, from_json, "{api_version} {kind}");
        // The fixture sets the kind's own fields: the comparison is not of empty values only.
        let set = from_json
            .iter()
            .filter(|(label, value)| !label.starts_with("metadata.") && !value.is_empty())
            .count();
        assert!(set > 0, "{api_version} {kind}: {from_json:?}");
    }
}

mod props {
    //! Random objects of every root kind, generated from the schema as protobuf.
    use proptest::prelude::*;

    use super::super::model::Root;
    use super::super::model::{Elem, JsonForm, Shape};
    use super::super::{MessageRef, json_to_proto, proto_to_json, schema};
    use prost::encoding::{WireType, encode_key, encode_varint};

    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
        fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
            xs[self.below(xs.len() as u64) as usize]
        }
    }

    const STRINGS: &[&str] = &[
        "",
        "a",
        "web-0",
        "<&>",
        "é ✓ 🚀",
        "line\nbreak\t\"q\"",
        "\u{2028}",
        "x\u{1}y",
    ];
    const QUANTITIES: &[&str] = &[
        "0",
        "1",
        "100m",
        "1Gi",
        "1536Mi",
        "0.5",
        "1000m",
        "2e3",
        "12345678901234567890",
        "1.5Gi",
        "-3",
    ];
    const RAWS: &[&str] = &[
        "{}",
        "{\"a\":[1,2,{\"b\":null}]}",
        "[1,\"x\"]",
        "\"s<>\"",
        "3.5",
        "true",
        " { \"sp\" : 1 } ",
    ];

    fn bytes_field(tag: u32, b: &[u8], out: &mut Vec<u8>) {
        encode_key(tag, WireType::LengthDelimited, out);
        encode_varint(b.len() as u64, out);
        out.extend_from_slice(b);
    }

    fn varint_field(tag: u32, v: u64, out: &mut Vec<u8>) {
        encode_key(tag, WireType::Varint, out);
        encode_varint(v, out);
    }

    /// One element, as a field `tag`.
    fn elem(rng: &mut Rng, elem: Elem, tag: u32, depth: usize, pointer: bool, out: &mut Vec<u8>) {
        match elem {
            Elem::String => bytes_field(tag, rng.pick(STRINGS).as_bytes(), out),
            Elem::Bytes => {
                let n = rng.below(5) as usize;
                let b: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
                bytes_field(tag, &b, out)
            }
            Elem::Bool => varint_field(tag, rng.below(2), out),
            Elem::Int32 => varint_field(tag, rng.next() as i32 as i64 as u64, out),
            Elem::Int64 | Elem::Uint64 => varint_field(tag, rng.next() >> rng.below(64), out),
            Elem::Uint32 => varint_field(tag, u64::from(rng.next() as u32), out),
            Elem::Float64 => {
                let f = [0.0, -0.0, 1.5, -2.0, 1e21, 1e-7, 123456.789, 0.1][rng.below(8) as usize];
                encode_key(tag, WireType::SixtyFourBit, out);
                out.extend_from_slice(&f64::to_bits(f).to_le_bytes());
            }
            Elem::Message(id) => {
                let mut body = Vec::new();
                message(rng, id, depth + 1, &mut body);
                bytes_field(tag, &body, out);
            }
            Elem::Time | Elem::MicroTime => {
                let mut body = Vec::new();
                // A nil *Time is absent; a non-nil zero Time cannot come from JSON.
                if pointer || rng.below(4) != 0 {
                    let secs = rng.below(253_402_300_799 + 62_135_596_800) as i64 - 62_135_596_799;
                    varint_field(1, secs as u64, &mut body);
                    let nanos = if elem == Elem::MicroTime {
                        rng.below(1_000_000) * 1000
                    } else {
                        0
                    };
                    varint_field(2, nanos, &mut body);
                }
                bytes_field(tag, &body, out);
            }
            Elem::Duration => {
                let mut body = Vec::new();
                varint_field(1, rng.next(), &mut body);
                bytes_field(tag, &body, out);
            }
            Elem::Quantity => {
                let mut body = Vec::new();
                bytes_field(1, rng.pick(QUANTITIES).as_bytes(), &mut body);
                bytes_field(tag, &body, out);
            }
            Elem::IntOrString => {
                let mut body = Vec::new();
                varint_field(1, rng.below(2), &mut body);
                varint_field(2, rng.next() as i32 as i64 as u64, &mut body);
                bytes_field(3, rng.pick(STRINGS).as_bytes(), &mut body);
                bytes_field(tag, &body, out);
            }
            Elem::RawExtension | Elem::FieldsV1 | Elem::JsonRaw => {
                let mut body = Vec::new();
                bytes_field(1, rng.pick(RAWS).as_bytes(), &mut body);
                bytes_field(tag, &body, out);
            }
        }
    }

    /// A random message body with fields in tag order.
    fn message(rng: &mut Rng, id: u16, depth: usize, out: &mut Vec<u8>) {
        let msg = &schema::MESSAGES[usize::from(id)];
        let deep = depth > 5;
        if msg.form == JsonForm::Items {
            // A nullable slice: its elements, none to a few.
            let (_, f) = msg.field_by_tag(1).unwrap();
            for _ in 0..rng.below(3) {
                elem(rng, f.elem, 1, depth, false, out);
            }
            return;
        }
        if msg.form != JsonForm::Struct {
            // Either-or types: always one alternative set (a pointer to an empty one would be
            // `null`, which decodes as nil).
            let schema_tag = if msg.form == JsonForm::OrBool { 2 } else { 1 };
            let choice = if deep { 0 } else { rng.below(2) };
            match (msg.form, choice) {
                (JsonForm::OrBool, 0) => varint_field(1, rng.below(2), out),
                (JsonForm::OrBool, _) => {
                    varint_field(1, 1, out);
                    let (_, f) = msg.field_by_tag(2).unwrap();
                    elem(rng, f.elem, 2, depth, true, out);
                }
                (_, 0) if !deep => {
                    let (_, f) = msg.field_by_tag(schema_tag).unwrap();
                    elem(rng, f.elem, schema_tag, depth, true, out);
                }
                _ => {
                    let (_, f) = msg.field_by_tag(2).unwrap();
                    if let Elem::Message(_) = f.elem {
                        if deep {
                            // An empty schema object in the list.
                            bytes_field(2, b"", out);
                        } else {
                            elem(rng, f.elem, 2, depth, false, out);
                        }
                    } else {
                        elem(rng, f.elem, 2, depth, false, out);
                    }
                }
            }
            return;
        }
        for &i in msg.by_tag {
            let f = &msg.fields[usize::from(i)];
            let nested = matches!(f.elem, Elem::Message(_));
            match f.shape {
                Shape::Value => {
                    if deep && nested {
                        bytes_field(f.tag, b"", out);
                    } else if rng.below(5) != 0 {
                        elem(rng, f.elem, f.tag, depth, false, out);
                    }
                }
                Shape::Pointer => {
                    if !(deep && nested) && rng.below(2) == 0 {
                        elem(rng, f.elem, f.tag, depth, true, out);
                    }
                }
                Shape::Slice => {
                    if !(deep && nested) {
                        for _ in 0..rng.below(3) {
                            elem(rng, f.elem, f.tag, depth, false, out);
                        }
                    }
                }
                Shape::Map => {
                    if !(deep && nested) {
                        for _ in 0..rng.below(3) {
                            let mut entry = Vec::new();
                            bytes_field(1, rng.pick(STRINGS).as_bytes(), &mut entry);
                            elem(rng, f.elem, 2, depth, false, &mut entry);
                            bytes_field(f.tag, &entry, out);
                        }
                    }
                }
            }
        }
    }

    /// Every top-level field of a message body, as (start, end) byte ranges.
    fn top_fields(pb: &[u8]) -> Option<Vec<(usize, usize)>> {
        let mut spans = Vec::new();
        let mut buf = pb;
        while !buf.is_empty() {
            let start = pb.len() - buf.len();
            let (tag, wt) = prost::encoding::decode_key(&mut buf).ok()?;
            prost::encoding::skip_field(wt, tag, &mut buf, Default::default()).ok()?;
            spans.push((start, pb.len() - buf.len()));
        }
        Some(spans)
    }

    /// A decoder input: (message, bytes, with TypeMeta).
    type Input = (MessageRef, Vec<u8>, Option<(&'static str, &'static str)>);

    /// The roots the golden inputs were first written for (the schema's roots before kube 1.36's
    /// full served set was added), in the order they were then: their inputs come first, so that
    /// their digests stay comparable across the addition.
    const GOLDEN_ROOTS: &[(&str, &str)] = &[
        ("apiextensions.k8s.io/v1", "CustomResourceDefinition"),
        ("apiextensions.k8s.io/v1", "CustomResourceDefinitionList"),
        ("apps/v1", "ControllerRevision"),
        ("apps/v1", "ControllerRevisionList"),
        ("apps/v1", "DaemonSet"),
        ("apps/v1", "DaemonSetList"),
        ("apps/v1", "Deployment"),
        ("apps/v1", "DeploymentList"),
        ("apps/v1", "ReplicaSet"),
        ("apps/v1", "ReplicaSetList"),
        ("apps/v1", "StatefulSet"),
        ("apps/v1", "StatefulSetList"),
        ("autoscaling/v1", "Scale"),
        ("batch/v1", "CronJob"),
        ("batch/v1", "CronJobList"),
        ("batch/v1", "Job"),
        ("batch/v1", "JobList"),
        ("coordination.k8s.io/v1", "Lease"),
        ("coordination.k8s.io/v1", "LeaseList"),
        ("discovery.k8s.io/v1", "EndpointSlice"),
        ("discovery.k8s.io/v1", "EndpointSliceList"),
        ("meta.k8s.io/v1", "DeleteOptions"),
        ("meta.k8s.io/v1", "PartialObjectMetadata"),
        ("meta.k8s.io/v1", "PartialObjectMetadataList"),
        ("meta.k8s.io/v1", "Status"),
        ("v1", "ConfigMap"),
        ("v1", "ConfigMapList"),
        ("v1", "DeleteOptions"),
        ("v1", "Endpoints"),
        ("v1", "EndpointsList"),
        ("v1", "Event"),
        ("v1", "EventList"),
        ("v1", "Namespace"),
        ("v1", "NamespaceList"),
        ("v1", "Node"),
        ("v1", "NodeList"),
        ("v1", "PartialObjectMetadata"),
        ("v1", "PartialObjectMetadataList"),
        ("v1", "Pod"),
        ("v1", "PodList"),
        ("v1", "PodTemplate"),
        ("v1", "PodTemplateList"),
        ("v1", "Secret"),
        ("v1", "SecretList"),
        ("v1", "Service"),
        ("v1", "ServiceList"),
        ("v1", "Status"),
    ];

    /// How many of [`super::FIXTURES`] (the first ones) the golden inputs were first written for.
    const GOLDEN_FIXTURES: usize = 24;

    /// Inputs that exercise the decoder everywhere: each fixture as its kind and as every other
    /// root kind, mutated (flipped, cut, spliced); random objects of every root kind, merged
    /// with themselves and others, fields reversed and repeated; the fleet pods of
    /// `MEASURE_PODS` if set. The inputs of the first fixtures and [`GOLDEN_ROOTS`] (and the
    /// fleet pods) come first, in the order they always had; those of the kinds added since
    /// follow, so a golden file written before they were added is a prefix of one written now.
    fn golden_inputs() -> Vec<Input> {
        let old_roots: Vec<&Root> = GOLDEN_ROOTS
            .iter()
            .map(|&(v, kind)| {
                schema::ROOTS
                    .iter()
                    .find(|r| (r.api_version, r.kind) == (v, kind))
                    .unwrap()
            })
            .collect();
        let new_roots: Vec<&Root> = schema::ROOTS
            .iter()
            .filter(|r| !GOLDEN_ROOTS.contains(&(r.api_version, r.kind)))
            .collect();
        let all_roots: Vec<&Root> = schema::ROOTS.iter().collect();
        let (old_fixtures, new_fixtures) = super::FIXTURES.split_at(GOLDEN_FIXTURES);
        let mut inputs: Vec<Input> = Vec::new();
        fixture_inputs(
            old_fixtures,
            &old_roots,
            Rng(0x9e37_79b9_7f4a_7c15),
            &mut inputs,
        );
        random_inputs(&old_roots, &mut inputs);
        if let Ok(path) = std::env::var("MEASURE_PODS") {
            let m = super::msg("v1", "Pod");
            for line in std::fs::read_to_string(path).unwrap().lines() {
                inputs.push((
                    m,
                    json_to_proto(m, line.as_bytes()).unwrap(),
                    Some(("v1", "Pod")),
                ));
            }
        }
        for &(v, kind, _) in old_fixtures {
            let pb = super::pb_of(v, kind);
            for root in &new_roots {
                inputs.push((MessageRef(root.message), pb.clone(), None));
            }
        }
        fixture_inputs(
            new_fixtures,
            &all_roots,
            Rng(0x2545_f491_4f6c_dd1d),
            &mut inputs,
        );
        random_inputs(&new_roots, &mut inputs);
        inputs
    }

    /// Each fixture as its kind and as each of `roots`, and 300 mutations of it (one `rng` for
    /// all).
    fn fixture_inputs(
        fixtures: &[(&'static str, &'static str, &'static str)],
        roots: &[&Root],
        mut rng: Rng,
        inputs: &mut Vec<Input>,
    ) {
        for &(v, kind, _) in fixtures {
            let m = super::msg(v, kind);
            let pb = super::pb_of(v, kind);
            inputs.push((m, pb.clone(), Some((v, kind))));
            for root in roots {
                inputs.push((MessageRef(root.message), pb.clone(), None));
            }
            for _ in 0..300 {
                inputs.push((m, mutated(&mut rng, &pb), None));
            }
        }
    }

    /// `pb` with a few bytes flipped, cut short, a byte inserted, or a piece of it spliced in.
    fn mutated(rng: &mut Rng, pb: &[u8]) -> Vec<u8> {
        let mut bad = pb.to_vec();
        match rng.below(4) {
            0 => {
                for _ in 0..=rng.below(4) {
                    let at = rng.below(bad.len() as u64) as usize;
                    bad[at] = rng.next() as u8;
                }
            }
            1 => bad.truncate(rng.below(bad.len() as u64) as usize),
            2 => {
                let at = rng.below(bad.len() as u64) as usize;
                bad.insert(at, rng.next() as u8);
            }
            _ => {
                let a = rng.below(bad.len() as u64) as usize;
                let b = a + rng.below((bad.len() - a) as u64) as usize;
                let at = rng.below(bad.len() as u64) as usize;
                let piece = bad[a..b].to_vec();
                bad.splice(at..at, piece);
            }
        }
        bad
    }

    /// For seeds 1 to 300, for each of `roots`: a random object of it, the object twice, merged
    /// with another, its fields reversed, each field repeated.
    fn random_inputs(roots: &[&Root], inputs: &mut Vec<Input>) {
        for seed in 1..=300u64 {
            for root in roots {
                let m = MessageRef(root.message);
                let mut rng = Rng(seed);
                let mut pb = Vec::new();
                message(&mut rng, root.message, 0, &mut pb);
                let mut other = Vec::new();
                message(&mut rng, root.message, 0, &mut other);
                let mut twice = pb.clone();
                twice.extend_from_slice(&pb);
                let mut merged = pb.clone();
                merged.extend_from_slice(&other);
                let spans = top_fields(&pb).unwrap_or_default();
                let mut reversed = Vec::new();
                let mut repeated = Vec::new();
                for &(a, b) in spans.iter().rev() {
                    reversed.extend_from_slice(&pb[a..b]);
                    repeated.extend_from_slice(&pb[a..b]);
                    repeated.extend_from_slice(&pb[a..b]);
                }
                inputs.push((m, pb, Some((root.api_version, root.kind))));
                inputs.push((m, twice, None));
                inputs.push((m, merged, None));
                inputs.push((m, reversed, None));
                inputs.push((m, repeated, None));
            }
        }
    }

    /// A digest of the decoder's answer to each of [`golden_inputs`] (its JSON, or its error's
    /// text), one line each: with `PROTO_GOLDEN=<file>`, written to the file when it does not
    /// exist and compared with it when it does. For changes to the decoder that must not change
    /// its output: run once before, once after
    /// (`PROTO_GOLDEN=/tmp/golden cargo test -p kube-wire --release -- --ignored golden`).
    #[test]
    #[ignore]
    fn golden_outputs() {
        use std::hash::{Hash, Hasher};
        let Ok(path) = std::env::var("PROTO_GOLDEN") else {
            return;
        };
        let mut lines = String::new();
        let (mut oks, mut errs) = (0, 0);
        for (i, (m, pb, tm)) in golden_inputs().iter().enumerate() {
            let mut h = std::hash::DefaultHasher::new();
            let answer = match proto_to_json(*m, pb, *tm) {
                Ok(json) => {
                    oks += 1;
                    json
                }
                Err(e) => {
                    errs += 1;
                    format!("error: {e}").into_bytes()
                }
            };
            answer.hash(&mut h);
            lines.push_str(&format!("{i} {} {:016x}\n", answer.len(), h.finish()));
        }
        println!("{oks} decoded, {errs} refused");
        match std::fs::read_to_string(&path) {
            Ok(want) => {
                for (i, (w, g)) in want.lines().zip(lines.lines()).enumerate() {
                    assert_eq!(w, g, "input {i}");
                }
                assert_eq!(want.lines().count(), lines.lines().count());
            }
            Err(_) => std::fs::write(&path, lines).unwrap(),
        }
    }

    /// The trusted entry point writes what the normal one writes for every input that one
    /// decodes (every fixture, and the golden inputs: objects of every kind, mutated, merged,
    /// reordered), into one buffer after other output as alone; on the others it never panics.
    #[test]
    fn stored_bytes_decode_as_the_first_time() {
        let mut inputs = golden_inputs();
        for &(v, kind, _) in super::FIXTURES {
            inputs.push((super::msg(v, kind), super::pb_of(v, kind), Some((v, kind))));
        }
        let (mut same, mut refused) = (0, 0);
        let mut all = b"[".to_vec();
        let mut each = b"[".to_vec();
        for (m, pb, tm) in &inputs {
            let mut stored = Vec::new();
            let trusted = super::super::stored_proto_to_json_into(*m, pb, *tm, &mut stored);
            match proto_to_json(*m, pb, *tm) {
                Ok(json) => {
                    trusted.unwrap();
                    assert!(stored == json, "{}", String::from_utf8_lossy(&json));
                    super::super::stored_proto_to_json_into(*m, pb, *tm, &mut all).unwrap();
                    each.extend_from_slice(&json);
                    same += 1;
                }
                Err(_) => refused += 1,
            }
        }
        assert!(all == each, "decoded into one buffer");
        assert!(same > 10_000 && refused > 1000, "{same} {refused}");
    }

    /// Raw JSON that is not valid JSON (which bytes a cache stores never hold): the normal
    /// entry point refuses it, the trusted one copies it, neither panics.
    #[test]
    fn stored_bytes_with_invalid_raw_json_do_not_panic() {
        use k8s_pb::api::core::v1 as core;
        use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
        use prost::Message as _;
        let m = super::msg("v1", "Pod");
        for raw in [
            &b"{\"f:metadata\":"[..],
            b"{\"a\" : \"<\xe2\x80\xa8\"",
            b"\"",
            b"\xe2",
            b"\xe2\x80",
            b"}}}]]]",
            b" \\",
        ] {
            let pod = core::Pod {
                metadata: Some(meta::ObjectMeta {
                    name: Some("p".into()),
                    managed_fields: vec![meta::ManagedFieldsEntry {
                        manager: Some("m".into()),
                        fields_v1: Some(meta::FieldsV1 {
                            raw: Some(raw.to_vec()),
                        }),
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
                ..Default::default()
            };
            let pb = pod.encode_to_vec();
            assert!(proto_to_json(m, &pb, None).is_err());
            let mut out = b"x".to_vec();
            super::super::stored_proto_to_json_into(m, &pb, None, &mut out).unwrap();
            assert!(out.starts_with(b"x{\"metadata\":{\"name\":\"p\""));
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn random_objects_of_every_root_kind_round_trip(seed in 1u64..) {
            for root in schema::ROOTS.iter() {
                let m = MessageRef(root.message);
                let mut rng = Rng(seed);
                let mut pb = Vec::new();
                message(&mut rng, root.message, 0, &mut pb);
                let json = proto_to_json(m, &pb, None).unwrap();
                // JSON → protobuf → JSON is the identity on JSON Go wrote …
                let pb2 = json_to_proto(m, &json).unwrap();
                let json2 = proto_to_json(m, &pb2, None).unwrap();
                prop_assert_eq!(String::from_utf8_lossy(&json), String::from_utf8_lossy(&json2), "{}", root.kind);
                // … and protobuf → JSON → protobuf on protobuf Go wrote.
                prop_assert_eq!(json_to_proto(m, &json2).unwrap(), pb2);
            }
        }

        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256), kind in 0usize..schema::ROOTS.len()) {
            let m = MessageRef(schema::ROOTS[kind].message);
            let _ = proto_to_json(m, &bytes, None);
            let mut wrapped = super::MAGIC.to_vec();
            wrapped.extend_from_slice(&bytes);
            let _ = super::envelope::unwrap(&wrapped);
            let _ = json_to_proto(m, &bytes);
        }

        #[test]
        fn stored_random_and_mutated_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256), kind in 0usize..schema::ROOTS.len(), flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..8)) {
            let m = MessageRef(schema::ROOTS[kind].message);
            let _ = super::super::stored_proto_to_json_into(m, &bytes, None, &mut Vec::new());
            let mut pb = super::pb_of("v1", "Pod");
            for (at, byte) in flips {
                let len = pb.len();
                pb[at % len] = byte;
            }
            let _ = super::super::stored_proto_to_json_into(super::msg("v1", "Pod"), &pb, Some(("v1", "Pod")), &mut Vec::new());
        }

        #[test]
        fn mutated_objects_never_panic(flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..8)) {
            let mut pb = super::pb_of("v1", "Pod");
            for (at, byte) in flips {
                let len = pb.len();
                pb[at % len] = byte;
            }
            let _ = proto_to_json(super::msg("v1", "Pod"), &pb, Some(("v1", "Pod")));
        }
    }
}

/// Transcoding speed and size on the simulator's fleet pods (written by the kube-sim test
/// `proto::dump_fleet_pods`, one JSON a line, in the file `MEASURE_PODS`); run with
/// `MEASURE_PODS=<file> cargo test -p kube-wire --release -- --ignored --nocapture measure`.
#[test]
#[ignore]
fn measure_fleet_pods() {
    let Ok(path) = std::env::var("MEASURE_PODS") else {
        return;
    };
    let text = std::fs::read_to_string(path).unwrap();
    let m = msg("v1", "Pod");
    // Canonical (Go-written) JSON of each pod, as an apiserver would have sent it.
    let pods: Vec<Vec<u8>> = text
        .lines()
        .map(|l| {
            let pb = json_to_proto(m, l.as_bytes()).unwrap();
            proto_to_json(m, &pb, Some(("v1", "Pod"))).unwrap()
        })
        .collect();
    let json_bytes: usize = pods.iter().map(Vec::len).sum();
    let rounds = 10;
    let start = std::time::Instant::now();
    let mut pb_bytes = 0;
    let mut encoded = Vec::new();
    for _ in 0..rounds {
        encoded = pods
            .iter()
            .map(|p| json_to_proto(m, p).unwrap())
            .collect::<Vec<_>>();
    }
    let enc = start.elapsed() / (rounds * pods.len() as u32);
    for pb in &encoded {
        pb_bytes += pb.len();
    }
    let start = std::time::Instant::now();
    for _ in 0..rounds {
        for pb in &encoded {
            let _ = proto_to_json(m, pb, Some(("v1", "Pod"))).unwrap();
        }
    }
    let dec = start.elapsed() / (rounds * pods.len() as u32);
    println!(
        "{} fleet pods: mean json {} B, protobuf {} B (ratio {:.2}); json_to_proto {:?}/pod, proto_to_json {:?}/pod",
        pods.len(),
        json_bytes / pods.len(),
        pb_bytes / pods.len(),
        pb_bytes as f64 / json_bytes as f64,
        enc,
        dec
    );
}

/// Transcoding speed and size on a realistic pod; run with
/// `cargo test -p kube-wire --release -- --ignored --nocapture measure`.
#[test]
#[ignore]
fn measure_transcoding() {
    let (v, json) = ("v1", fixture("v1", "Pod"));
    let m = msg(v, "Pod");
    // The canonical form, as an apiserver would have written it.
    let canonical = transcode(v, "Pod", json).1;
    let n: u32 = std::env::var("MEASURE_N")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(20_000);
    let start = std::time::Instant::now();
    let mut pb = Vec::new();
    for _ in 0..n {
        pb = json_to_proto(m, canonical.as_bytes()).unwrap();
    }
    let enc = start.elapsed() / n;
    let start = std::time::Instant::now();
    for _ in 0..n {
        let _ = proto_to_json(m, &pb, Some((v, "Pod"))).unwrap();
    }
    let dec = start.elapsed() / n;
    println!(
        "pod: json {} B, protobuf {} B (ratio {:.2}); json_to_proto {:?}/pod, proto_to_json {:?}/pod",
        canonical.len(),
        pb.len(),
        pb.len() as f64 / canonical.len() as f64,
        enc,
        dec
    );
}

#[test]
#[ignore]
fn measure_baseline() {
    let (v, json) = ("v1", fixture("v1", "Pod"));
    let canonical = transcode(v, "Pod", json).1;
    let n = 20_000;
    let start = std::time::Instant::now();
    for _ in 0..n {
        let _: Value = serde_json::from_str(&canonical).unwrap();
    }
    println!("serde_json Value parse {:?}/pod", start.elapsed() / n);
    let start = std::time::Instant::now();
    for _ in 0..n {
        let _: serde::de::IgnoredAny = serde_json::from_str(&canonical).unwrap();
    }
    println!("serde_json IgnoredAny {:?}/pod", start.elapsed() / n);
}
