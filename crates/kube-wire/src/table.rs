//! Server-side Table printing and the metadata-only forms: what kube-apiserver returns for
//! `Accept: application/json;as=Table;v=v1;g=meta.k8s.io` (what `kubectl get` prints) and for
//! `as=PartialObjectMetadata(List)` (metadata informers), as whole bodies, single objects and
//! watch-event objects. The simulator and watchmux both print with these functions, so the two
//! can only ever print one way.
//!
//! Behaviour follows kube's per-type printers (`pkg/printers/internalversion/printers.go` in
//! kubernetes/kubernetes), which the apiserver always runs with `Wide: true` (every column,
//! priority 0 and 1, gets a cell; kubectl hides priority-1 columns unless `-o wide`), and the
//! generic `DefaultTableConvertor` (k8s.io/apiserver `pkg/registry/rest/table.go`: columns
//! "Name" + "Created At") for every other kind ([`has_printer`] tells them apart). Custom
//! resources are printed with their CRD's `additionalPrinterColumns` ([`PrinterColumns`]) when
//! the caller knows them: a [`TablePrinter`] is either a kind's printer or a CRD version's
//! columns, and the free functions here are its methods for a kind's printer. JSON shapes
//! follow `meta/v1` `Table`, `TableColumnDefinition`, `TableRow` and `PartialObjectMetadata`;
//! bytes are Go's (`encoding/json` HTML escaping).
//!
//! All functions work on plain `serde_json::Value` objects as they are stored (v1 JSON), and take
//! the current time as an argument, so the output is deterministic. Pure: no I/O, no clock.
//! Choosing a Table at all is content negotiation's job ([`crate::negotiate`]), not this module's.

use std::sync::Arc;

use bytes::Bytes;
use serde_json::{Map, Value, json};

use crate::negotiate::Repr;
use crate::status::Status;
use cells::{
    arr, being_deleted, condition_is_true, format_labels, int_at, name_of, obj_len, str_at, str_or,
};

mod access;
mod cells;
mod cluster;
mod crd;
mod dra;
mod networking;
mod storage;
#[cfg(test)]
mod testkit;
mod workloads;
pub use cells::label_selector_as_selector;
pub use crd::{InvalidColumn, PrinterColumns};

/// `apiVersion` of every Table and PartialObjectMetadata(List) printed here.
pub const META_V1: &str = "meta.k8s.io/v1";

/// Value of the `includeObject` query parameter: what each row's `object` carries.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum IncludeObject {
    /// `includeObject=None`: `"object": null`.
    None,
    /// `includeObject=Metadata` (the default): a `PartialObjectMetadata`.
    #[default]
    Metadata,
    /// `includeObject=Object`: the full object.
    Object,
}

impl IncludeObject {
    /// Parses the query parameter value. The empty string means the default (`Metadata`), as in
    /// kube; anything unrecognised is `None` (see [`IncludeObject::from_query`] for kube's 400).
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "None" => Some(IncludeObject::None),
            "Metadata" | "" => Some(IncludeObject::Metadata),
            "Object" => Some(IncludeObject::Object),
            _ => None,
        }
    }

    /// The `includeObject` of a request's query (the first value, as kube's parameter codec
    /// takes; absent means `Metadata`), or kube's 400 for an unrecognised value
    /// (`handlers/response.go` `optionsForTransform`, `ValidateTableOptions`). kube checks it
    /// only when answering with a Table, after the read itself succeeded.
    pub fn from_query(query: Option<&str>) -> Result<IncludeObject, Status> {
        let value = query.and_then(|q| {
            form_urlencoded::parse(q.as_bytes())
                .find(|(k, _)| k == "includeObject")
                .map(|(_, v)| v.into_owned())
        });
        let Some(value) = value else {
            return Ok(IncludeObject::Metadata);
        };
        IncludeObject::parse(&value).ok_or_else(|| {
            Status::bad_request(format!(
                "Unable to convert to Table as requested: includeObject: Invalid value: {}: must be 'Metadata', 'Object', 'None', or empty",
                crate::gofmt::quote(&value)
            ))
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Column descriptions: the swagger doc strings kube puts into its column definitions
// (k8s.io/apimachinery meta/v1 and k8s.io/api core/v1 and discovery/v1
// types_swagger_doc_generated.go; kube 1.36's printers read EndpointSlice's from discovery/v1,
// where older printers read discovery/v1beta1, whose addressType and ports texts differ).

const D_NAME: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";
const D_CREATED: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";

const D_POD_READY: &str = "The aggregate readiness state of this pod for accepting traffic.";
const D_POD_STATUS: &str = "The aggregate status of the containers in this pod.";
const D_POD_RESTARTS: &str = "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.";
const D_POD_IP: &str = "podIP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated.";
const D_POD_NODE: &str = "NodeName indicates in which node this pod is scheduled. If empty, this pod is a candidate for scheduling by the scheduler defined in schedulerName. Once this field is set, the kubelet for this node becomes responsible for the lifecycle of this pod. This field should not be used to express a desire for the pod to be scheduled on a specific node. https://kubernetes.io/docs/concepts/scheduling-eviction/assign-pod-node/#nodename";
const D_POD_NOMINATED: &str = "nominatedNodeName is set only when this pod preempts other pods on the node, but it cannot be scheduled right away as preemption victims receive their graceful termination periods. This field does not guarantee that the pod will be scheduled on this node. Scheduler may decide to place the pod elsewhere if other nodes become available sooner. Scheduler may also decide to give the resources on this node to a higher priority pod that is created after preemption. As a result, this field may be different than PodSpec.nodeName when the pod is scheduled.";
const D_POD_GATES: &str = "If specified, all readiness gates will be evaluated for pod readiness. A pod is ready when all its containers are ready AND all conditions specified in the readiness gates have status equal to \"True\" More info: https://git.k8s.io/enhancements/keps/sig-network/580-pod-readiness-gates";

const D_NODE_STATUS: &str = "The status of the node";
const D_NODE_ROLES: &str = "The roles of the node";
const D_NODE_VERSION: &str = "Kubelet Version reported by the node.";
const D_NODE_ADDRESSES: &str = "List of addresses reachable to the node. Queried from cloud provider, if available. More info: https://kubernetes.io/docs/reference/node/node-status/#addresses Note: This field is declared as mergeable, but the merge key is not sufficiently unique, which can cause data corruption when it is merged. Callers should instead use a full-replacement patch. See https://pr.k8s.io/79391 for an example. Consumers should assume that addresses can change during the lifetime of a Node. However, there are some exceptions where this may not be possible, such as Pods that inherit a Node's address in its own status or consumers of the downward API (status.hostIP).";
const D_NODE_OS_IMAGE: &str =
    "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy)).";
const D_NODE_KERNEL: &str =
    "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64).";
const D_NODE_RUNTIME: &str = "ContainerRuntime Version reported by the node through runtime remote API (e.g. containerd://1.4.2).";

const D_NS_STATUS: &str = "The status of the namespace";

const D_SVC_TYPE: &str = "type determines how the Service is exposed. Defaults to ClusterIP. Valid options are ExternalName, ClusterIP, NodePort, and LoadBalancer. \"ClusterIP\" allocates a cluster-internal IP address for load-balancing to endpoints. Endpoints are determined by the selector or if that is not specified, by manual construction of an Endpoints object or EndpointSlice objects. If clusterIP is \"None\", no virtual IP is allocated and the endpoints are published as a set of endpoints rather than a virtual IP. \"NodePort\" builds on ClusterIP and allocates a port on every node which routes to the same endpoints as the clusterIP. \"LoadBalancer\" builds on NodePort and creates an external load-balancer (if supported in the current cloud) which routes to the same endpoints as the clusterIP. \"ExternalName\" aliases this service to the specified externalName. Several other fields do not apply to ExternalName services. More info: https://kubernetes.io/docs/concepts/services-networking/service/#publishing-services-service-types";
const D_SVC_CLUSTER_IP: &str = "clusterIP is the IP address of the service and is usually assigned randomly. If an address is specified manually, is in-range (as per system configuration), and is not in use, it will be allocated to the service; otherwise creation of the service will fail. This field may not be changed through updates unless the type field is also being changed to ExternalName (which requires this field to be blank) or the type field is being changed from ExternalName (in which case this field may optionally be specified, as describe above).  Valid values are \"None\", empty string (\"\"), or a valid IP address. Setting this to \"None\" makes a \"headless service\" (no virtual IP), which is useful when direct endpoint connections are preferred and proxying is not required.  Only applies to types ClusterIP, NodePort, and LoadBalancer. If this field is specified when creating a Service of type ExternalName, creation will fail. This field will be wiped when updating a Service to type ExternalName. More info: https://kubernetes.io/docs/concepts/services-networking/service/#virtual-ips-and-service-proxies";
const D_SVC_EXTERNAL_IPS: &str = "externalIPs is a list of IP addresses for which nodes in the cluster will also accept traffic for this service.  These IPs are not managed by Kubernetes.  The user is responsible for ensuring that traffic arrives at a node with this IP.  A common example is external load-balancers that are not part of the Kubernetes system.";
const D_SVC_PORTS: &str = "The list of ports that are exposed by this service. More info: https://kubernetes.io/docs/concepts/services-networking/service/#virtual-ips-and-service-proxies";
const D_SVC_SELECTOR: &str = "Route service traffic to pods with label keys and values matching this selector. If empty or not present, the service is assumed to have an external process managing its endpoints, which Kubernetes will not modify. Only applies to types ClusterIP, NodePort, and LoadBalancer. Ignored if type is ExternalName. More info: https://kubernetes.io/docs/concepts/services-networking/service/";

const D_CM_DATA: &str = "Data contains the configuration data. Each key must consist of alphanumeric characters, '-', '_' or '.'. Values with non-UTF-8 byte sequences must use the BinaryData field. The keys stored in Data must not overlap with the keys in the BinaryData field, this is enforced during validation process.";
const D_SECRET_TYPE: &str = "Used to facilitate programmatic handling of secret data. More info: https://kubernetes.io/docs/concepts/configuration/secret/#secret-types";
const D_SECRET_DATA: &str = "Data contains the secret data. Each key must consist of alphanumeric characters, '-', '_' or '.'. The serialized form of the secret data is a base64 encoded string, representing the arbitrary (possibly non-string) data value here. Described in https://tools.ietf.org/html/rfc4648#section-4";

const D_EV_LAST: &str = "The time at which the most recent occurrence of this event was recorded.";
const D_EV_TYPE: &str =
    "Type of this event (Normal, Warning), new types could be added in the future";
const D_EV_REASON: &str = "This should be a short, machine understandable string that gives the reason for the transition into the object's current status.";
const D_EV_OBJECT: &str = "The object that this event is about.";
const D_EV_SUBOBJECT: &str = "If referring to a piece of an object instead of an entire object, this string should contain a valid JSON/Go field access statement, such as desiredState.manifest.containers[2]. For example, if the object reference is to a container within a pod, this would take on a value like: \"spec.containers{name}\" (where \"name\" refers to the name of the container that triggered the event) or if no container name is specified \"spec.containers[2]\" (container with index 2 in this pod). This syntax is chosen only to have some well-defined way of referencing a part of an object.";
const D_EV_SOURCE: &str =
    "The component reporting this event. Should be a short machine understandable string.";
const D_EV_MESSAGE: &str = "A human-readable description of the status of this operation.";
const D_EV_FIRST: &str =
    "The time at which the event was first recorded. (Time of server receipt is in TypeMeta.)";
const D_EV_COUNT: &str = "The number of times this event has occurred.";

const D_EP_SUBSETS: &str = "The set of all endpoints is the union of all subsets. Addresses are placed into subsets according to the IPs they share. A single address with multiple ports, some of which are ready and some of which are not (because they come from different containers) will result in the address being displayed in different subsets for the different ports. No address will appear in both Addresses and NotReadyAddresses in the same subset. Sets of addresses and ports that comprise a service.";

const D_EPS_ADDRESS_TYPE: &str = "addressType specifies the type of address carried by this EndpointSlice. All addresses in this slice must be the same type. This field is immutable after creation. The following address types are currently supported: * IPv4: Represents an IPv4 Address. * IPv6: Represents an IPv6 Address. * FQDN: Represents a Fully Qualified Domain Name. (Deprecated) The EndpointSlice controller only generates, and kube-proxy only processes, slices of addressType \"IPv4\" and \"IPv6\". No semantics are defined for the \"FQDN\" type.";
const D_EPS_PORTS: &str = "ports specifies the list of network ports exposed by each endpoint in this slice. Each port must have a unique name. Each slice may include a maximum of 100 ports. Services always have at least 1 port, so EndpointSlices generated by the EndpointSlice controller will likewise always have at least 1 port. EndpointSlices used for other purposes may have an empty ports list.";
const D_EPS_ENDPOINTS: &str = "endpoints is a list of unique endpoints in this slice. Each slice may include a maximum of 1000 endpoints.";

// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Printer {
    Pod,
    Node,
    Namespace,
    Service,
    ConfigMap,
    Secret,
    Event,
    EventsV1,
    Endpoints,
    EndpointSlice,
    /// The workload kinds, Lease and Scale ([`workloads`]).
    Workload(workloads::Kind),
    /// [`storage`]'s kinds.
    Storage(storage::Kind),
    /// [`cluster`]'s kinds.
    Cluster(cluster::Kind),
    /// [`networking`]'s kinds.
    Networking(networking::Kind),
    /// [`access`]'s kinds.
    Access(access::Kind),
    /// [`dra`]'s kinds.
    Dra(dra::Kind),
    /// A built-in kind that kube prints with its default convertor (`Name` + `Created At`): it
    /// has no printer of its own (Roles, CustomResourceDefinitions, …).
    Generic,
    /// A kind this module does not know (a custom resource without its CRD's columns, a kind
    /// newer than this module): printed as the default convertor prints, which is what kube
    /// does only if the kind has no printer, so a server does not answer with it for certain.
    Default,
}

/// The (group, kind)s printed by a printer in this file.
const BASE_KINDS: &[(&str, &str)] = &[
    ("", "Pod"),
    ("", "Node"),
    ("", "Namespace"),
    ("", "Service"),
    ("", "ConfigMap"),
    ("", "Secret"),
    ("", "Event"),
    ("events.k8s.io", "Event"),
    ("", "Endpoints"),
    ("discovery.k8s.io", "EndpointSlice"),
];

/// Every (group, kind) kube prints with a printer of its own that this module reproduces, then
/// every built-in kind it prints with the default convertor ([`Printer::Generic`]): the kinds
/// [`has_printer`] is true of, for tests and fuzzing to go through them all.
pub fn printed_kinds() -> Vec<(&'static str, &'static str)> {
    let own = [
        BASE_KINDS,
        workloads::KINDS,
        storage::KINDS,
        cluster::KINDS,
        networking::KINDS,
        access::KINDS,
        dra::KINDS,
    ];
    let generic = [
        storage::GENERIC,
        cluster::GENERIC,
        networking::GENERIC,
        access::GENERIC,
        dra::GENERIC,
    ];
    own.iter()
        .chain(&generic)
        .flat_map(|k| k.iter().copied())
        .collect()
}

fn printer_for(group: &str, kind: &str) -> Printer {
    match (group, kind) {
        ("", "Pod") => Printer::Pod,
        ("", "Node") => Printer::Node,
        ("", "Namespace") => Printer::Namespace,
        ("", "Service") => Printer::Service,
        ("", "ConfigMap") => Printer::ConfigMap,
        ("", "Secret") => Printer::Secret,
        ("", "Event") => Printer::Event,
        // events.k8s.io Events are the same stored objects and use the same printer; only the
        // v1 field names differ.
        ("events.k8s.io", "Event") => Printer::EventsV1,
        ("", "Endpoints") => Printer::Endpoints,
        ("discovery.k8s.io", "EndpointSlice") => Printer::EndpointSlice,
        _ => workloads::kind_for(group, kind)
            .map(Printer::Workload)
            .or_else(|| storage::kind_for(group, kind).map(Printer::Storage))
            .or_else(|| cluster::kind_for(group, kind).map(Printer::Cluster))
            .or_else(|| networking::kind_for(group, kind).map(Printer::Networking))
            .or_else(|| access::kind_for(group, kind).map(Printer::Access))
            .or_else(|| dra::kind_for(group, kind).map(Printer::Dra))
            .unwrap_or_else(|| {
                let generic = [
                    storage::GENERIC,
                    cluster::GENERIC,
                    networking::GENERIC,
                    access::GENERIC,
                    dra::GENERIC,
                ];
                if generic.iter().any(|g| g.contains(&(group, kind))) {
                    Printer::Generic
                } else {
                    Printer::Default
                }
            }),
    }
}

// Column definitions, for this file's printers and its submodules' (through `super::`).

/// One `metav1.TableColumnDefinition`.
fn col(name: &str, ty: &str, format: &str, description: &str, priority: i32) -> Value {
    json!({
        "name": name,
        "type": ty,
        "format": format,
        "description": description,
        "priority": priority,
    })
}

/// The `Name` column most printers lead with: `ObjectMeta`'s name doc, format `name`.
fn name_col() -> Value {
    col("Name", "string", "name", D_NAME, 0)
}

/// The `Age` column: `ObjectMeta`'s creationTimestamp doc.
fn age_col() -> Value {
    text("Age", D_CREATED)
}

/// A priority-0 column of type `string` without a format (most of kube's columns).
fn text(name: &str, description: &str) -> Value {
    col(name, "string", "", description, 0)
}

/// A priority-1 column of type `string`: kubectl shows it only with `-o wide`.
fn wide(name: &str, description: &str) -> Value {
    col(name, "string", "", description, 1)
}

/// A priority-0 column of type `integer`.
fn integer(name: &str, description: &str) -> Value {
    col(name, "integer", "", description, 0)
}

/// A priority-0 column of type `boolean`.
fn boolean(name: &str, description: &str) -> Value {
    col(name, "boolean", "", description, 0)
}

/// Column definitions for a kind (group `""` = core), as a JSON array of
/// `{"name","type","format","description","priority"}` (all five keys always present, as
/// `metav1.TableColumnDefinition` serialises them).
pub fn column_definitions(group: &str, kind: &str) -> Value {
    columns_of(printer_for(group, kind))
}

fn columns_of(printer: Printer) -> Value {
    let cols = match printer {
        Printer::Pod => vec![
            name_col(),
            text("Ready", D_POD_READY),
            text("Status", D_POD_STATUS),
            text("Restarts", D_POD_RESTARTS),
            age_col(),
            wide("IP", D_POD_IP),
            wide("Node", D_POD_NODE),
            wide("Nominated Node", D_POD_NOMINATED),
            wide("Readiness Gates", D_POD_GATES),
        ],
        Printer::Node => vec![
            name_col(),
            text("Status", D_NODE_STATUS),
            text("Roles", D_NODE_ROLES),
            age_col(),
            text("Version", D_NODE_VERSION),
            wide("Internal-IP", D_NODE_ADDRESSES),
            wide("External-IP", D_NODE_ADDRESSES),
            wide("OS-Image", D_NODE_OS_IMAGE),
            wide("Kernel-Version", D_NODE_KERNEL),
            wide("Container-Runtime", D_NODE_RUNTIME),
        ],
        Printer::Namespace => vec![name_col(), text("Status", D_NS_STATUS), age_col()],
        Printer::Service => vec![
            name_col(),
            text("Type", D_SVC_TYPE),
            text("Cluster-IP", D_SVC_CLUSTER_IP),
            text("External-IP", D_SVC_EXTERNAL_IPS),
            text("Port(s)", D_SVC_PORTS),
            age_col(),
            wide("Selector", D_SVC_SELECTOR),
        ],
        Printer::ConfigMap => vec![name_col(), text("Data", D_CM_DATA), age_col()],
        Printer::Secret => vec![
            name_col(),
            text("Type", D_SECRET_TYPE),
            text("Data", D_SECRET_DATA),
            age_col(),
        ],
        Printer::Event | Printer::EventsV1 => vec![
            text("Last Seen", D_EV_LAST),
            text("Type", D_EV_TYPE),
            text("Reason", D_EV_REASON),
            text("Object", D_EV_OBJECT),
            wide("Subobject", D_EV_SUBOBJECT),
            wide("Source", D_EV_SOURCE),
            text("Message", D_EV_MESSAGE),
            wide("First Seen", D_EV_FIRST),
            wide("Count", D_EV_COUNT),
            col("Name", "string", "name", D_NAME, 1),
        ],
        Printer::Endpoints => vec![name_col(), text("Endpoints", D_EP_SUBSETS), age_col()],
        Printer::EndpointSlice => vec![
            name_col(),
            text("AddressType", D_EPS_ADDRESS_TYPE),
            text("Ports", D_EPS_PORTS),
            text("Endpoints", D_EPS_ENDPOINTS),
            age_col(),
        ],
        Printer::Workload(kind) => workloads::columns(kind),
        Printer::Storage(kind) => storage::columns(kind),
        Printer::Cluster(kind) => cluster::columns(kind),
        Printer::Networking(kind) => networking::columns(kind),
        Printer::Access(kind) => access::columns(kind),
        Printer::Dra(kind) => dra::columns(kind),
        Printer::Generic | Printer::Default => {
            vec![name_col(), col("Created At", "date", "", D_CREATED, 0)]
        }
    };
    Value::Array(cols)
}

/// One row's cells for an object (full object JSON), one cell per column of
/// [`column_definitions`] (kube's server-side printers run in wide mode). `now_unix` is the
/// current time in seconds, used for AGE-like cells.
pub fn row_cells(group: &str, kind: &str, obj: &Value, now_unix: i64) -> Value {
    Value::Array(row(printer_for(group, kind), obj, now_unix).0)
}

/// Cells plus the optional row conditions (pods in a terminal phase carry a `Completed`
/// condition).
fn row(printer: Printer, obj: &Value, now: i64) -> (Vec<Value>, Option<Value>) {
    match printer {
        Printer::Pod => pod_row(obj, now),
        Printer::Node => (node_row(obj, now), None),
        Printer::Namespace => {
            // The namespace strategy sets phase Active on create; an object without a phase
            // never exists in a real cluster.
            let phase = str_or(obj.pointer("/status/phase"), "Active");
            (
                vec![json!(name_of(obj)), json!(phase), json!(age(obj, now))],
                None,
            )
        }
        Printer::Service => (service_row(obj, now), None),
        Printer::ConfigMap => {
            let n = obj_len(obj.get("data")) + obj_len(obj.get("binaryData"));
            (
                vec![json!(name_of(obj)), json!(n), json!(age(obj, now))],
                None,
            )
        }
        Printer::Secret => {
            // Secret type defaults to Opaque on create.
            let ty = str_or(obj.get("type"), "Opaque");
            (
                vec![
                    json!(name_of(obj)),
                    json!(ty),
                    json!(obj_len(obj.get("data"))),
                    json!(age(obj, now)),
                ],
                None,
            )
        }
        Printer::Event => (event_row(&EventView::core(obj), now), None),
        Printer::EventsV1 => (event_row(&EventView::events_v1(obj), now), None),
        Printer::Endpoints => (
            vec![
                json!(name_of(obj)),
                json!(format_endpoints(obj)),
                json!(age(obj, now)),
            ],
            None,
        ),
        Printer::EndpointSlice => {
            let address_type = str_or(obj.get("addressType"), "");
            (
                vec![
                    json!(name_of(obj)),
                    json!(address_type),
                    json!(format_discovery_ports(obj.get("ports"))),
                    json!(format_discovery_endpoints(obj.get("endpoints"))),
                    json!(age(obj, now)),
                ],
                None,
            )
        }
        Printer::Workload(kind) => (workloads::cells(kind, obj, now), None),
        Printer::Storage(kind) => (storage::cells(kind, obj, now), None),
        Printer::Cluster(kind) => (cluster::cells(kind, obj, now), None),
        Printer::Networking(kind) => (networking::cells(kind, obj, now), None),
        Printer::Access(kind) => (access::cells(kind, obj, now), None),
        Printer::Dra(kind) => (dra::cells(kind, obj, now), None),
        Printer::Generic | Printer::Default => {
            let created =
                parse_time(obj.pointer("/metadata/creationTimestamp")).unwrap_or(GO_ZERO_TIME_NS);
            (
                vec![json!(name_of(obj)), json!(format_rfc3339(created))],
                None,
            )
        }
    }
}

/// Whether this module prints this kind's Tables as kube-apiserver does ([`printed_kinds`]):
/// with a per-type printer it reproduces (pods, nodes, namespaces, services, config maps,
/// secrets, events, endpoints, endpoint slices, and those of [`workloads`], [`storage`],
/// [`cluster`], [`networking`], [`access`] and [`dra`]), or with the default convertor's
/// "Name" + "Created At" for a built-in kind that has no printer in kube. Any other kind gets
/// the default convertor's columns here too, which kube prints only for kinds without a printer
/// of their own: custom resources get their CRD's `additionalPrinterColumns` (by default "Name"
/// + "Age").
pub fn has_printer(group: &str, kind: &str) -> bool {
    printer_for(group, kind) != Printer::Default
}

/// How a Table prints the objects of one kind: a built-in kind's printer (or the generic
/// convertor), or a CRD version's printer columns. Cheap to clone.
#[derive(Debug, Clone, PartialEq)]
pub struct TablePrinter(Columns);

#[derive(Debug, Clone, PartialEq)]
enum Columns {
    Kind(Printer),
    Crd(Arc<PrinterColumns>),
}

impl TablePrinter {
    /// The printer of a kind (group `""` = core): a per-type printer ([`has_printer`]) or the
    /// generic convertor's "Name" + "Created At".
    pub fn for_kind(group: &str, kind: &str) -> TablePrinter {
        TablePrinter(Columns::Kind(printer_for(group, kind)))
    }

    /// The printer of a custom resource whose CRD version has these columns.
    pub fn crd(columns: Arc<PrinterColumns>) -> TablePrinter {
        TablePrinter(Columns::Crd(columns))
    }

    /// Whether this prints a CRD's columns.
    pub fn is_crd(&self) -> bool {
        matches!(self.0, Columns::Crd(_))
    }

    /// The column definitions, as [`column_definitions`] for a kind.
    pub fn column_definitions(&self) -> Value {
        match &self.0 {
            Columns::Kind(p) => columns_of(*p),
            Columns::Crd(c) => Value::Array(c.definitions()),
        }
    }

    /// One row's cells for `obj`, as [`row_cells`] for a kind.
    pub fn row_cells(&self, obj: &Value, now_unix: i64) -> Value {
        Value::Array(self.row(obj, now_unix).0)
    }

    fn row(&self, obj: &Value, now: i64) -> (Vec<Value>, Option<Value>) {
        match &self.0 {
            Columns::Kind(p) => row(*p, obj, now),
            Columns::Crd(c) => (c.cells(obj, now), None),
        }
    }

    /// The `rows` member. The per-type printers build `make([]TableRow, 0, n)` and so does the
    /// CRD convertor (`MetaToTableRow`): an empty list prints `[]`; the default convertor
    /// appends to a nil slice, so an empty list prints `null`.
    fn rows_value(&self, rows: Vec<Value>) -> Value {
        if rows.is_empty() && matches!(self.0, Columns::Kind(Printer::Generic | Printer::Default)) {
            Value::Null
        } else {
            Value::Array(rows)
        }
    }

    /// [`table`] with this printer (`group` and `kind` name the objects' type, for
    /// `includeObject=Object`).
    #[allow(clippy::too_many_arguments)]
    pub fn table(
        &self,
        group: &str,
        kind: &str,
        objects: &[&Value],
        list_meta: &Value,
        include_object: IncludeObject,
        no_headers: bool,
        now_unix: i64,
    ) -> Value {
        let rows: Vec<Value> = objects
            .iter()
            .map(|obj| self.table_row(group, kind, obj, include_object, now_unix))
            .collect();
        let mut t = self.envelope(list_meta, no_headers);
        t.insert("rows".to_string(), self.rows_value(rows));
        Value::Object(t)
    }

    /// [`table_list`] with this printer.
    pub fn table_list(
        &self,
        group: &str,
        kind: &str,
        objects: impl IntoIterator<Item = Value>,
        list_meta: &Value,
        include_object: IncludeObject,
        now_unix: i64,
    ) -> Vec<u8> {
        let mut out = self.table_list_head(list_meta);
        // `[`, which `table_list_head` ends with, is the first row's or the empty array's.
        out.pop();
        let mut n = 0usize;
        for obj in objects {
            out.push(if n == 0 { b'[' } else { b',' });
            self.write_table_row(group, kind, &obj, include_object, now_unix, None, &mut out);
            n += 1;
        }
        if n == 0 {
            out.extend_from_slice(&to_go_json(&self.rows_value(Vec::new())));
        } else {
            out.push(b']');
        }
        out.push(b'}');
        out
    }

    /// The bytes of [`TablePrinter::table_list`] before its first row: the Table's envelope,
    /// with column definitions, then `"rows":[`. With [`TablePrinter::write_table_row`] for
    /// each object, commas between them and `]}` after the last, a list of at least one
    /// object made in parts (rows are independent of each other).
    pub fn table_list_head(&self, list_meta: &Value) -> Vec<u8> {
        let mut out = to_go_json(&Value::Object(self.envelope(list_meta, false)));
        // The envelope's closing brace: `rows` follows as its last member.
        out.pop();
        out.extend_from_slice(b",\"rows\":[");
        out
    }

    /// Appends one object's row of a Table list to `out`, as [`TablePrinter::table_list`]
    /// writes it. With `metadata`, the object's `metadata` already in Go's JSON (transcoded
    /// from protobuf), a row embedding only the metadata (`includeObject=Metadata`, kubectl's)
    /// wraps those bytes instead of serialising the parsed metadata again.
    #[allow(clippy::too_many_arguments)]
    pub fn write_table_row(
        &self,
        group: &str,
        kind: &str,
        obj: &Value,
        include_object: IncludeObject,
        now_unix: i64,
        metadata: Option<&[u8]>,
        out: &mut Vec<u8>,
    ) {
        let Some(metadata) = metadata.filter(|_| include_object == IncludeObject::Metadata) else {
            let row = self.table_row(group, kind, obj, include_object, now_unix);
            out.extend_from_slice(&to_go_json(&row));
            return;
        };
        // `table_row`'s members in its order: cells, conditions if any, object.
        let (cells, conditions) = self.row(obj, now_unix);
        out.extend_from_slice(b"{\"cells\":");
        out.extend_from_slice(&to_go_json(&Value::Array(cells)));
        if let Some(c) = conditions {
            out.extend_from_slice(b",\"conditions\":");
            out.extend_from_slice(&to_go_json(&c));
        }
        out.extend_from_slice(b",\"object\":");
        out.extend_from_slice(METADATA_ITEM_HEAD.as_bytes());
        out.extend_from_slice(metadata);
        out.extend_from_slice(b"}}");
    }

    /// [`object_table`] with this printer.
    pub fn object_table(
        &self,
        group: &str,
        kind: &str,
        obj: &Value,
        include_object: IncludeObject,
        no_headers: bool,
        now_unix: i64,
    ) -> Value {
        let rv = obj
            .pointer("/metadata/resourceVersion")
            .cloned()
            .unwrap_or(Value::Null);
        self.table(
            group,
            kind,
            &[obj],
            &json!({ "resourceVersion": rv }),
            include_object,
            no_headers,
            now_unix,
        )
    }

    /// [`event_object`] with this printer.
    #[allow(clippy::too_many_arguments)]
    pub fn event_object(
        &self,
        repr: Repr,
        group: &str,
        kind: &str,
        obj: &Value,
        include_object: IncludeObject,
        no_headers: bool,
        now_unix: i64,
    ) -> Value {
        match repr {
            Repr::Json => obj.clone(),
            Repr::Metadata => partial_object_metadata(obj),
            Repr::Table => {
                self.object_table(group, kind, obj, include_object, no_headers, now_unix)
            }
        }
    }

    /// `kind`, `apiVersion`, `metadata` and `columnDefinitions` of a Table: everything but
    /// `rows`, which comes last.
    fn envelope(&self, list_meta: &Value, no_headers: bool) -> Map<String, Value> {
        let mut meta = Map::new();
        for key in ["resourceVersion", "continue"] {
            if let Some(s) = list_meta.get(key).and_then(Value::as_str)
                && !s.is_empty()
            {
                meta.insert(key.to_string(), json!(s));
            }
        }
        if let Some(n) = list_meta
            .get("remainingItemCount")
            .filter(|v| v.is_number())
        {
            meta.insert("remainingItemCount".to_string(), n.clone());
        }
        // kube-aggregator's APIService convertor builds its column definitions whatever the
        // options say: kube sends them with every watch event.
        let headers_anyway =
            matches!(self.0, Columns::Kind(Printer::Access(k)) if access::ignores_no_headers(k));
        let columns = if no_headers && !headers_anyway {
            Value::Null
        } else {
            self.column_definitions()
        };
        let mut t = Map::new();
        t.insert("kind".to_string(), json!("Table"));
        t.insert("apiVersion".to_string(), json!(META_V1));
        t.insert("metadata".to_string(), Value::Object(meta));
        t.insert("columnDefinitions".to_string(), columns);
        t
    }

    /// One `TableRow`: the cells, the row conditions if any, and the embedded object.
    fn table_row(
        &self,
        group: &str,
        kind: &str,
        obj: &Value,
        include_object: IncludeObject,
        now_unix: i64,
    ) -> Value {
        let (cells, conditions) = self.row(obj, now_unix);
        let mut r = Map::new();
        r.insert("cells".to_string(), Value::Array(cells));
        if let Some(c) = conditions {
            r.insert("conditions".to_string(), c);
        }
        let embedded = match include_object {
            IncludeObject::None => Value::Null,
            IncludeObject::Metadata => partial_object_metadata(obj),
            IncludeObject::Object => full_object(group, kind, obj),
        };
        r.insert("object".to_string(), embedded);
        Value::Object(r)
    }
}

/// A whole Table as kube-apiserver returns it.
///
/// * `list_meta`: the list's metadata (or `{"resourceVersion": <object's RV>}` for a single
///   object); `resourceVersion`, `continue` and `remainingItemCount` are copied when set.
/// * `include_object`: what each row's `object` carries (kube's `includeObject` parameter).
/// * `no_headers`: `columnDefinitions` is `null` (kube sets this after the first event of a
///   Table watch, and for `?...` `TableOptions.noHeaders`).
pub fn table(
    group: &str,
    kind: &str,
    objects: &[&Value],
    list_meta: &Value,
    include_object: IncludeObject,
    no_headers: bool,
    now_unix: i64,
) -> Value {
    TablePrinter::for_kind(group, kind).table(
        group,
        kind,
        objects,
        list_meta,
        include_object,
        no_headers,
        now_unix,
    )
}

/// The body of a Table answering a LIST: the bytes of [`table`] (with column definitions), built
/// one object at a time, so only one parsed object is alive at once however long the list is.
pub fn table_list(
    group: &str,
    kind: &str,
    objects: impl IntoIterator<Item = Value>,
    list_meta: &Value,
    include_object: IncludeObject,
    now_unix: i64,
) -> Vec<u8> {
    TablePrinter::for_kind(group, kind).table_list(
        group,
        kind,
        objects,
        list_meta,
        include_object,
        now_unix,
    )
}

/// The Table of one object, as a GET answers it and a Table watch sends each event's object:
/// one row, and the object's resourceVersion as the Table's.
pub fn object_table(
    group: &str,
    kind: &str,
    obj: &Value,
    include_object: IncludeObject,
    no_headers: bool,
    now_unix: i64,
) -> Value {
    TablePrinter::for_kind(group, kind).object_table(
        group,
        kind,
        obj,
        include_object,
        no_headers,
        now_unix,
    )
}

/// The object of a BOOKMARK in a Table watch: no columns, and one row without cells that embeds
/// the bookmark object as `PartialObjectMetadata`, so that its `k8s.io/initial-events-end`
/// annotation survives.
pub fn bookmark_table(bookmark: &Value, rv: u64) -> Value {
    json!({
        "kind": "Table",
        "apiVersion": META_V1,
        "metadata": {"resourceVersion": rv.to_string()},
        "rows": [{"cells": [], "object": partial_object_metadata(bookmark)}],
    })
}

/// The object a watch event carries in `repr` for `obj` (a full object): the object itself, its
/// `PartialObjectMetadata`, or its [`object_table`] (`include_object`, `no_headers` and
/// `now_unix` matter only for a Table).
pub fn event_object(
    repr: Repr,
    group: &str,
    kind: &str,
    obj: &Value,
    include_object: IncludeObject,
    no_headers: bool,
    now_unix: i64,
) -> Value {
    TablePrinter::for_kind(group, kind).event_object(
        repr,
        group,
        kind,
        obj,
        include_object,
        no_headers,
        now_unix,
    )
}

/// The object a BOOKMARK carries in `repr` for `bookmark` (see
/// [`crate::event::bookmark_object`]): itself, its `PartialObjectMetadata`, or a
/// [`bookmark_table`].
pub fn bookmark_event_object(repr: Repr, bookmark: &Value, rv: u64) -> Value {
    match repr {
        Repr::Json => bookmark.clone(),
        Repr::Metadata => partial_object_metadata(bookmark),
        Repr::Table => bookmark_table(bookmark, rv),
    }
}

/// One chunked-JSON watch frame `{"type":…,"object":…}` and its newline, for an object built
/// here (plain JSON frames of stored objects are [`crate::event::encode_frame`]'s).
pub fn event_frame(ty: &str, object: &Value) -> Bytes {
    let mut out = b"{\"type\":".to_vec();
    out.extend_from_slice(&to_go_json(&Value::String(ty.to_string())));
    out.extend_from_slice(b",\"object\":");
    out.extend_from_slice(&to_go_json(object));
    out.extend_from_slice(crate::event::FRAME_TAIL);
    Bytes::from(out)
}

/// The body of a `PartialObjectMetadataList` answering a LIST, built one object at a time.
/// Without objects its `items` is `null`, as kube writes it (its converter appends to a nil
/// slice: [`crate::list`]).
pub fn metadata_list(objects: impl IntoIterator<Item = Value>, list_meta: &Value) -> Vec<u8> {
    let mut out = metadata_list_head(list_meta);
    // `[`, which the head ends with, belongs to a list with items.
    out.pop();
    let mut objects = objects.into_iter().peekable();
    if objects.peek().is_none() {
        out.extend_from_slice(b"null}");
        return out;
    }
    out.push(b'[');
    for (i, obj) in objects.enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_metadata_item(&obj, &mut out);
    }
    out.extend_from_slice(b"]}");
    out
}

/// The bytes of [`metadata_list`] before its first item, ending `"items":[`. With
/// [`write_metadata_item`] for each object, commas between them and `]}` after the last, a
/// list of at least one object made in parts (items are independent of each other).
pub fn metadata_list_head(list_meta: &Value) -> Vec<u8> {
    let mut out = format!(
        "{{\"kind\":\"PartialObjectMetadataList\",\"apiVersion\":\"{META_V1}\",\"metadata\":"
    )
    .into_bytes();
    out.extend_from_slice(&to_go_json(list_meta));
    out.extend_from_slice(b",\"items\":[");
    out
}

/// Appends one object's item of [`metadata_list`] to `out`.
pub fn write_metadata_item(obj: &Value, out: &mut Vec<u8>) {
    out.extend_from_slice(&to_go_json(&partial_object_metadata(obj)));
}

/// What [`write_metadata_item`] writes before an object's metadata: followed by an
/// `ObjectMeta` already in Go's JSON (e.g. transcoded from protobuf) and `}`, the same item
/// without parsing the metadata.
pub const METADATA_ITEM_HEAD: &str =
    "{\"kind\":\"PartialObjectMetadata\",\"apiVersion\":\"meta.k8s.io/v1\",\"metadata\":";

/// A stored object as the printers read it: `kind` and `apiVersion`, then the members of
/// `body` (a stored body, which has no type meta; members of the same name win). A body that is
/// not a JSON object (stored bodies always are: they were decoded when stored) has no members.
pub fn object_value(kind: &str, api_version: &str, body: &[u8]) -> Value {
    let members: Map<String, Value> = serde_json::from_slice(body).unwrap_or_default();
    typed(kind, api_version, members)
}

/// [`object_value`] without `metadata.managedFields`, for a built-in printer's cells alone
/// (none reads them): they are about half of a pod's JSON, and most of the small maps and
/// strings that building the tree allocates and dropping it frees. Not for a row that embeds
/// the object, nor for a custom resource's columns (a JSONPath may name any field).
pub fn printed_value(kind: &str, api_version: &str, body: &[u8]) -> Value {
    let mut de = serde_json::Deserializer::from_slice(body);
    let members = serde::de::Deserializer::deserialize_map(&mut de, unmanaged::Members(true))
        .unwrap_or_default();
    typed(kind, api_version, members)
}

/// `kind` and `apiVersion`, then `members` (members of the same name win).
fn typed(kind: &str, api_version: &str, members: Map<String, Value>) -> Value {
    let mut out = Map::with_capacity(members.len() + 2);
    out.insert("kind".into(), Value::String(kind.to_string()));
    out.insert("apiVersion".into(), Value::String(api_version.to_string()));
    out.extend(members);
    Value::Object(out)
}

/// An object's members read into a tree without its `metadata.managedFields`
/// ([`printed_value`]).
mod unmanaged {
    use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
    use serde_json::{Map, Value};

    /// A map's members; `true`: an object's top level, whose `metadata` is read by `Members(false)`,
    /// which leaves out `managedFields`.
    pub(super) struct Members(pub(super) bool);

    impl<'de> Visitor<'de> for Members {
        type Value = Map<String, Value>;

        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a JSON object")
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut members = Map::new();
            while let Some(key) = map.next_key::<String>()? {
                let value = match (self.0, key.as_str()) {
                    (true, "metadata") => Value::Object(map.next_value_seed(Members(false))?),
                    (false, "managedFields") => {
                        map.next_value::<IgnoredAny>()?;
                        continue;
                    }
                    _ => map.next_value()?,
                };
                members.insert(key, value);
            }
            Ok(members)
        }
    }

    impl<'de> DeserializeSeed<'de> for Members {
        type Value = Map<String, Value>;

        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_map(self)
        }
    }
}

/// Serialises compactly with Go `encoding/json`'s HTML escaping, as kube-apiserver's bytes are.
pub fn to_go_json(v: &Value) -> Vec<u8> {
    // Serialising a `Value` into memory cannot fail.
    crate::gofmt::escape_html(serde_json::to_vec(v).unwrap_or_default())
}

/// `PartialObjectMetadata` of an object:
/// `{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{...}}` with the
/// object's whole metadata (kube's `meta.AsPartialObjectMetadata` copies every field, managed
/// fields included).
pub fn partial_object_metadata(obj: &Value) -> Value {
    let metadata = obj
        .get("metadata")
        .cloned()
        .unwrap_or_else(|| Value::Object(Map::new()));
    let mut m = Map::new();
    m.insert("kind".to_string(), json!("PartialObjectMetadata"));
    m.insert("apiVersion".to_string(), json!(META_V1));
    m.insert("metadata".to_string(), metadata);
    Value::Object(m)
}

/// The embedded full object for `includeObject=Object`: kube encodes it with `kind` and
/// `apiVersion` set. Objects that already carry them are returned as they are.
fn full_object(group: &str, kind: &str, obj: &Value) -> Value {
    let Some(map) = obj.as_object() else {
        return obj.clone();
    };
    if map.contains_key("kind") && map.contains_key("apiVersion") {
        return obj.clone();
    }
    let api_version = map.get("apiVersion").cloned().unwrap_or_else(|| {
        json!(if group.is_empty() {
            "v1".to_string()
        } else {
            format!("{group}/v1")
        })
    });
    let kind_v = map.get("kind").cloned().unwrap_or_else(|| json!(kind));
    let mut out = Map::new();
    out.insert("kind".to_string(), kind_v);
    out.insert("apiVersion".to_string(), api_version);
    for (k, v) in map {
        if k != "kind" && k != "apiVersion" {
            out.insert(k.clone(), v.clone());
        }
    }
    Value::Object(out)
}

// ---------------------------------------------------------------------------------------------
// Durations and timestamps

const NS_PER_SEC: i128 = 1_000_000_000;

/// HumanDuration as kube prints AGE ("5s", "3m20s", "2d5h", ...): k8s.io/apimachinery
/// `pkg/util/duration.HumanDuration` for a whole number of seconds.
pub fn human_duration(secs: i64) -> String {
    human_duration_nanos(secs.saturating_mul(1_000_000_000))
}

/// HumanDuration for a duration in nanoseconds (Go's `time.Duration`).
pub fn human_duration_nanos(d: i64) -> String {
    const SEC: i64 = 1_000_000_000;
    const MIN: i64 = 60 * SEC;
    const HOUR: i64 = 60 * MIN;
    // Go: int(d.Seconds()), truncation toward zero.
    let seconds = d / SEC;
    if seconds < -1 {
        return "<invalid>".to_string();
    } else if seconds < 0 {
        return "0s".to_string();
    } else if seconds < 60 * 2 {
        return format!("{seconds}s");
    }
    let minutes = d / MIN;
    if minutes < 10 {
        let s = (d / SEC) % 60;
        if s == 0 {
            return format!("{minutes}m");
        }
        return format!("{minutes}m{s}s");
    } else if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = d / HOUR;
    if hours < 8 {
        let m = (d / MIN) % 60;
        if m == 0 {
            return format!("{hours}h");
        }
        format!("{hours}h{m}m")
    } else if hours < 48 {
        format!("{hours}h")
    } else if hours < 24 * 8 {
        let h = hours % 24;
        if h == 0 {
            return format!("{}d", hours / 24);
        }
        format!("{}d{}h", hours / 24, h)
    } else if hours < 24 * 365 * 2 {
        format!("{}d", hours / 24)
    } else if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        if dy == 0 {
            return format!("{}y", hours / 24 / 365);
        }
        format!("{}y{}d", hours / 24 / 365, dy)
    } else {
        format!("{}y", hours / 24 / 365)
    }
}

/// Go's zero `time.Time` (0001-01-01T00:00:00Z) in nanoseconds since the UNIX epoch.
const GO_ZERO_TIME_NS: i128 = -62_135_596_800 * NS_PER_SEC;

/// kube's `translateTimestampSince`: "<unknown>" for an unset time, else HumanDuration(now - t).
fn since(ts: Option<&Value>, now: i64) -> String {
    since_ns(parse_time(ts), now)
}

/// [`since`] for an already parsed time.
fn since_ns(t: Option<i128>, now: i64) -> String {
    match t {
        None => "<unknown>".to_string(),
        Some(t) => {
            // Go's Time.Sub saturates at the Duration range.
            let d = (now as i128 * NS_PER_SEC - t).clamp(i64::MIN as i128, i64::MAX as i128);
            human_duration_nanos(d as i64)
        }
    }
}

fn age(obj: &Value, now: i64) -> String {
    since(obj.pointer("/metadata/creationTimestamp"), now)
}

/// Parses an RFC 3339 timestamp (`metav1.Time` / `metav1.MicroTime` JSON) into nanoseconds since
/// the UNIX epoch. `None` for null, missing, unparsable or Go's zero time (`IsZero()`).
fn parse_time(v: Option<&Value>) -> Option<i128> {
    let s = v?.as_str()?;
    let t = parse_rfc3339(s)?;
    if t == GO_ZERO_TIME_NS { None } else { Some(t) }
}

/// Parses `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)` into nanoseconds since the UNIX epoch.
pub fn parse_rfc3339(s: &str) -> Option<i128> {
    let b = s.as_bytes();
    if b.len() < 20 {
        return None;
    }
    let num = |from: usize, len: usize| -> Option<i64> {
        let part = b.get(from..from + len)?;
        let mut n = 0i64;
        for &c in part {
            if !c.is_ascii_digit() {
                return None;
            }
            n = n * 10 + i64::from(c - b'0');
        }
        Some(n)
    };
    let year = num(0, 4)?;
    let month = num(5, 2)?;
    let day = num(8, 2)?;
    let hour = num(11, 2)?;
    let minute = num(14, 2)?;
    let second = num(17, 2)?;
    if b[4] != b'-'
        || b[7] != b'-'
        || !matches!(b[10], b'T' | b't' | b' ')
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    if !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    let mut i = 19;
    let mut frac_ns: i128 = 0;
    if b.get(i) == Some(&b'.') {
        i += 1;
        let start = i;
        let mut scale: i128 = 100_000_000;
        while let Some(&c) = b.get(i) {
            if !c.is_ascii_digit() {
                break;
            }
            frac_ns += i128::from(c - b'0') * scale;
            scale /= 10;
            i += 1;
        }
        if i == start {
            return None;
        }
    }
    let offset_secs: i64 = match b.get(i) {
        Some(b'Z') | Some(b'z') if i + 1 == b.len() => 0,
        Some(&sign @ (b'+' | b'-')) if i + 6 == b.len() && b[i + 3] == b':' => {
            let oh = num(i + 1, 2)?;
            let om = num(i + 4, 2)?;
            let o = oh * 3600 + om * 60;
            if sign == b'-' { -o } else { o }
        }
        _ => return None,
    };
    let days = crate::proto::gotime::days_from_civil(
        year,
        u32::try_from(month).ok()?,
        u32::try_from(day).ok()?,
    );
    let secs = days * 86_400 + hour * 3600 + minute * 60 + second - offset_secs;
    Some(i128::from(secs) * NS_PER_SEC + frac_ns)
}

/// Go's `t.UTC().Format(time.RFC3339)` (whole seconds, `Z`).
pub fn format_rfc3339(ns: i128) -> String {
    let secs = ns.div_euclid(NS_PER_SEC) as i64;
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = crate::proto::gotime::civil_from_days(days);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
        y,
        m,
        d,
        rem / 3600,
        (rem / 60) % 60,
        rem % 60
    )
}

// ---------------------------------------------------------------------------------------------
// Pod

fn pod_row(pod: &Value, now: i64) -> (Vec<Value>, Option<Value>) {
    let spec = pod.get("spec").unwrap_or(&Value::Null);
    let status = pod.get("status").unwrap_or(&Value::Null);
    let conditions = arr(status.get("conditions"));

    let mut restarts: i64 = 0;
    let mut restartable_init_restarts: i64 = 0;
    let mut total_containers = arr(spec.get("containers")).len();
    let mut ready_containers = 0usize;
    let mut last_restart: Option<i128> = None;
    let mut last_restartable_init_restart: Option<i128> = None;

    let phase = str_at(status, "/phase");
    let mut reason = phase.to_string();
    let status_reason = str_at(status, "/reason");
    if !status_reason.is_empty() {
        reason = status_reason.to_string();
    }

    for c in conditions {
        if str_at(c, "/type") == "PodScheduled" && str_at(c, "/reason") == "SchedulingGated" {
            reason = "SchedulingGated".to_string();
        }
    }

    let row_conditions = match phase {
        "Succeeded" => Some(json!([{
            "type": "Completed", "status": "True", "reason": "Succeeded",
            "message": "The pod has completed successfully."
        }])),
        "Failed" => Some(json!([{
            "type": "Completed", "status": "True", "reason": "Failed",
            "message": "The pod failed."
        }])),
        _ => None,
    };

    let init_specs = arr(spec.get("initContainers"));
    let is_restartable = |name: &str| {
        init_specs
            .iter()
            .any(|c| str_at(c, "/name") == name && str_at(c, "/restartPolicy") == "Always")
    };
    total_containers += init_specs
        .iter()
        .filter(|c| str_at(c, "/restartPolicy") == "Always")
        .count();

    let later = |cur: Option<i128>, t: Option<i128>| match (cur, t) {
        (Some(a), Some(b)) if b > a => Some(b),
        (None, Some(b)) => Some(b),
        (a, _) => a,
    };

    let mut initializing = false;
    for (i, cs) in arr(status.get("initContainerStatuses")).iter().enumerate() {
        let rc = int_at(cs, "restartCount");
        restarts += rc;
        let finished = parse_time(cs.pointer("/lastState/terminated/finishedAt"));
        last_restart = later(last_restart, finished);
        let name = str_at(cs, "/name");
        let restartable = is_restartable(name);
        if restartable {
            restartable_init_restarts += rc;
            last_restartable_init_restart = later(last_restartable_init_restart, finished);
        }
        let terminated = cs.pointer("/state/terminated").filter(|v| v.is_object());
        let waiting = cs.pointer("/state/waiting").filter(|v| v.is_object());
        if let Some(t) = terminated
            && int_at(t, "exitCode") == 0
        {
            continue;
        }
        if restartable && cs.get("started").and_then(Value::as_bool) == Some(true) {
            if cs.get("ready").and_then(Value::as_bool) == Some(true) {
                ready_containers += 1;
            }
            continue;
        }
        if let Some(t) = terminated {
            let r = str_at(t, "/reason");
            reason = if r.is_empty() {
                let signal = int_at(t, "signal");
                if signal != 0 {
                    format!("Init:Signal:{signal}")
                } else {
                    format!("Init:ExitCode:{}", int_at(t, "exitCode"))
                }
            } else {
                format!("Init:{r}")
            };
        } else if let Some(w) = waiting.filter(|w| {
            let r = str_at(w, "/reason");
            !r.is_empty() && r != "PodInitializing"
        }) {
            reason = format!("Init:{}", str_at(w, "/reason"));
        } else {
            reason = format!("Init:{}/{}", i, init_specs.len());
        }
        initializing = true;
        break;
    }

    let initialized_true = condition_is_true(conditions, "Initialized");

    if !initializing || initialized_true {
        restarts = restartable_init_restarts;
        last_restart = last_restartable_init_restart;
        let mut has_running = false;
        for cs in arr(status.get("containerStatuses")).iter().rev() {
            restarts += int_at(cs, "restartCount");
            last_restart = later(
                last_restart,
                parse_time(cs.pointer("/lastState/terminated/finishedAt")),
            );
            let waiting_reason = cs
                .pointer("/state/waiting")
                .filter(|v| v.is_object())
                .map(|w| str_at(w, "/reason"))
                .unwrap_or("");
            let terminated = cs.pointer("/state/terminated").filter(|v| v.is_object());
            let running = cs.pointer("/state/running").is_some_and(Value::is_object);
            if !waiting_reason.is_empty() {
                reason = waiting_reason.to_string();
            } else if let Some(t) = terminated {
                let r = str_at(t, "/reason");
                if !r.is_empty() {
                    reason = r.to_string();
                } else {
                    let signal = int_at(t, "signal");
                    reason = if signal != 0 {
                        format!("Signal:{signal}")
                    } else {
                        format!("ExitCode:{}", int_at(t, "exitCode"))
                    };
                }
            } else if cs.get("ready").and_then(Value::as_bool) == Some(true) && running {
                has_running = true;
                ready_containers += 1;
            }
        }
        if reason == "Completed" && has_running {
            let pod_ready = conditions
                .iter()
                .any(|c| str_at(c, "/type") == "Ready" && str_at(c, "/status") == "True");
            reason = if pod_ready { "Running" } else { "NotReady" }.to_string();
        }
    }

    let deleting = being_deleted(pod);
    if deleting && status_reason == "NodeLost" {
        reason = "Unknown".to_string();
    } else if deleting && phase != "Succeeded" && phase != "Failed" {
        reason = "Terminating".to_string();
    }

    let restarts_str = match last_restart {
        Some(t) if restarts != 0 => format!("{restarts} ({} ago)", since_ns(Some(t), now)),
        _ => restarts.to_string(),
    };

    // Wide columns (the apiserver always prints them).
    let mut pod_ip = str_at(status, "/podIP").to_string();
    if pod_ip.is_empty() {
        pod_ip = arr(status.get("podIPs"))
            .first()
            .map(|p| str_at(p, "/ip").to_string())
            .unwrap_or_default();
    }
    let none_if_empty = |s: &str| {
        if s.is_empty() {
            "<none>".to_string()
        } else {
            s.to_string()
        }
    };
    let gates = arr(spec.get("readinessGates"));
    let readiness_gates = if gates.is_empty() {
        "<none>".to_string()
    } else {
        let true_conditions = gates
            .iter()
            .filter(|g| {
                let ty = str_at(g, "/conditionType");
                conditions
                    .iter()
                    .find(|c| str_at(c, "/type") == ty)
                    .is_some_and(|c| str_at(c, "/status") == "True")
            })
            .count();
        format!("{}/{}", true_conditions, gates.len())
    };

    let cells = vec![
        json!(name_of(pod)),
        json!(format!("{ready_containers}/{total_containers}")),
        json!(reason),
        json!(restarts_str),
        json!(age(pod, now)),
        json!(none_if_empty(&pod_ip)),
        json!(none_if_empty(str_at(spec, "/nodeName"))),
        json!(none_if_empty(str_at(status, "/nominatedNodeName"))),
        json!(readiness_gates),
    ];
    (cells, row_conditions)
}

// ---------------------------------------------------------------------------------------------
// Node

fn node_row(node: &Value, now: i64) -> Vec<Value> {
    let status = node.get("status").unwrap_or(&Value::Null);
    // Last "Ready" condition wins, as with kube's condition map.
    let ready = arr(status.get("conditions"))
        .iter()
        .rfind(|c| str_at(c, "/type") == "Ready");
    let mut st: Vec<&str> = Vec::new();
    match ready {
        Some(c) if str_at(c, "/status") == "True" => st.push("Ready"),
        Some(_) => st.push("NotReady"),
        None => st.push("Unknown"),
    }
    if node.pointer("/spec/unschedulable").and_then(Value::as_bool) == Some(true) {
        st.push("SchedulingDisabled");
    }

    let mut roles: Vec<String> = Vec::new();
    if let Some(labels) = node.pointer("/metadata/labels").and_then(Value::as_object) {
        for (k, v) in labels {
            if let Some(role) = k.strip_prefix("node-role.kubernetes.io/") {
                if !role.is_empty() {
                    roles.push(role.to_string());
                }
            } else if k == "kubernetes.io/role"
                && let Some(v) = v.as_str().filter(|v| !v.is_empty())
            {
                roles.push(v.to_string());
            }
        }
    }
    roles.sort();
    roles.dedup();
    let roles = if roles.is_empty() {
        "<none>".to_string()
    } else {
        roles.join(",")
    };

    let addr = |ty: &str| {
        arr(status.get("addresses"))
            .iter()
            .find(|a| str_at(a, "/type") == ty)
            .map(|a| str_at(a, "/address").to_string())
            .unwrap_or_else(|| "<none>".to_string())
    };
    let info = |k: &str| {
        let s = str_at(status, &format!("/nodeInfo/{k}"));
        if s.is_empty() {
            "<unknown>".to_string()
        } else {
            s.to_string()
        }
    };
    vec![
        json!(name_of(node)),
        json!(st.join(",")),
        json!(roles),
        json!(age(node, now)),
        json!(str_at(status, "/nodeInfo/kubeletVersion")),
        json!(addr("InternalIP")),
        json!(addr("ExternalIP")),
        json!(info("osImage")),
        json!(info("kernelVersion")),
        json!(info("containerRuntimeVersion")),
    ]
}

// ---------------------------------------------------------------------------------------------
// Service

fn service_row(svc: &Value, now: i64) -> Vec<Value> {
    let spec = svc.get("spec").unwrap_or(&Value::Null);
    // Type defaults to ClusterIP on create.
    let ty = str_or(spec.get("type"), "ClusterIP");
    let mut cluster_ip = arr(spec.get("clusterIPs"))
        .first()
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if cluster_ip.is_empty() {
        cluster_ip = str_at(spec, "/clusterIP").to_string();
    }
    if cluster_ip.is_empty() {
        cluster_ip = "<none>".to_string();
    }
    let external_ips: Vec<String> = arr(spec.get("externalIPs"))
        .iter()
        .filter_map(Value::as_str)
        .map(str::to_string)
        .collect();
    let external = match ty {
        "ClusterIP" | "NodePort" => {
            if external_ips.is_empty() {
                "<none>".to_string()
            } else {
                external_ips.join(",")
            }
        }
        "LoadBalancer" => {
            // Wide output: not clipped to 16 characters.
            let mut lb: Vec<String> = arr(svc.pointer("/status/loadBalancer/ingress"))
                .iter()
                .filter_map(|i| {
                    let ip = str_at(i, "/ip");
                    let host = str_at(i, "/hostname");
                    if !ip.is_empty() {
                        Some(ip.to_string())
                    } else if !host.is_empty() {
                        Some(host.to_string())
                    } else {
                        None
                    }
                })
                .collect();
            lb.sort();
            lb.dedup();
            if !external_ips.is_empty() {
                lb.extend(external_ips);
                lb.join(",")
            } else if !lb.is_empty() {
                lb.join(",")
            } else {
                "<pending>".to_string()
            }
        }
        "ExternalName" => str_at(spec, "/externalName").to_string(),
        _ => "<unknown>".to_string(),
    };
    let ports: Vec<String> = arr(spec.get("ports"))
        .iter()
        .map(|p| {
            let port = int_at(p, "port");
            let proto = str_or(p.get("protocol"), "TCP");
            let node_port = int_at(p, "nodePort");
            if node_port > 0 {
                format!("{port}:{node_port}/{proto}")
            } else {
                format!("{port}/{proto}")
            }
        })
        .collect();
    let ports = if ports.is_empty() {
        "<none>".to_string()
    } else {
        ports.join(",")
    };
    vec![
        json!(name_of(svc)),
        json!(ty),
        json!(cluster_ip),
        json!(external),
        json!(ports),
        json!(age(svc, now)),
        json!(format_labels(spec.get("selector"))),
    ]
}

// ---------------------------------------------------------------------------------------------
// Endpoints / EndpointSlice

fn join_host_port(host: &str, port: i64) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// kube's `formatEndpoints` with all ports.
fn format_endpoints(ep: &Value) -> String {
    let subsets = arr(ep.get("subsets"));
    if subsets.is_empty() {
        return "<none>".to_string();
    }
    const MAX: usize = 3;
    let mut list: Vec<String> = Vec::new();
    let mut more = false;
    let mut count = 0usize;
    for ss in subsets {
        let addresses = arr(ss.get("addresses"));
        let ports = arr(ss.get("ports"));
        if ports.is_empty() {
            count += addresses.len();
            for a in addresses {
                if list.len() == MAX {
                    more = true;
                    break;
                }
                list.push(str_at(a, "/ip").to_string());
            }
            continue;
        }
        for p in ports {
            count += addresses.len();
            for a in addresses {
                if list.len() == MAX {
                    more = true;
                    break;
                }
                list.push(join_host_port(str_at(a, "/ip"), int_at(p, "port")));
            }
        }
    }
    let ret = list.join(",");
    if more {
        format!("{} + {} more...", ret, count - MAX)
    } else {
        ret
    }
}

fn list_with_more(list: &[String], more: bool, count: usize, max: usize) -> String {
    let ret = list.join(",");
    if more {
        return format!("{} + {} more...", ret, count - max);
    }
    if ret.is_empty() {
        "<unset>".to_string()
    } else {
        ret
    }
}

fn format_discovery_ports(ports: Option<&Value>) -> String {
    const MAX: usize = 3;
    let mut list = Vec::new();
    let mut more = false;
    let mut count = 0;
    for p in arr(ports) {
        if list.len() < MAX {
            let s = match (
                p.get("port").and_then(Value::as_i64),
                p.get("name").and_then(Value::as_str),
            ) {
                (Some(n), _) => n.to_string(),
                (None, Some(name)) => name.to_string(),
                (None, None) => "*".to_string(),
            };
            list.push(s);
        } else if list.len() == MAX {
            more = true;
        }
        count += 1;
    }
    list_with_more(&list, more, count, MAX)
}

fn format_discovery_endpoints(endpoints: Option<&Value>) -> String {
    const MAX: usize = 3;
    let mut list = Vec::new();
    let mut more = false;
    let mut count = 0;
    for e in arr(endpoints) {
        for a in arr(e.get("addresses")) {
            if list.len() < MAX {
                list.push(a.as_str().unwrap_or("").to_string());
            } else if list.len() == MAX {
                more = true;
            }
            count += 1;
        }
    }
    list_with_more(&list, more, count, MAX)
}

// ---------------------------------------------------------------------------------------------
// Event (core/v1 and events.k8s.io/v1 field names)

struct EventView<'a> {
    obj: &'a Value,
    first_timestamp: Option<&'a Value>,
    last_timestamp: Option<&'a Value>,
    count: i64,
    regarding: Option<&'a Value>,
    source: Option<&'a Value>,
    message: &'a str,
}

impl<'a> EventView<'a> {
    fn core(obj: &'a Value) -> Self {
        EventView {
            obj,
            first_timestamp: obj.get("firstTimestamp"),
            last_timestamp: obj.get("lastTimestamp"),
            count: int_at(obj, "count"),
            regarding: obj.get("involvedObject"),
            source: obj.get("source"),
            message: str_at(obj, "/message"),
        }
    }

    fn events_v1(obj: &'a Value) -> Self {
        EventView {
            obj,
            first_timestamp: obj.get("deprecatedFirstTimestamp"),
            last_timestamp: obj.get("deprecatedLastTimestamp"),
            count: int_at(obj, "deprecatedCount"),
            regarding: obj.get("regarding"),
            source: obj.get("deprecatedSource"),
            message: str_at(obj, "/note"),
        }
    }

    fn reporting_controller(&self) -> &'a str {
        // core/v1 serialises ReportingController as "reportingComponent".
        let core = str_at(self.obj, "/reportingComponent");
        if core.is_empty() {
            str_at(self.obj, "/reportingController")
        } else {
            core
        }
    }
}

fn event_row(ev: &EventView<'_>, now: i64) -> Vec<Value> {
    let obj = ev.obj;
    let first = if parse_time(ev.first_timestamp).is_none() {
        since(obj.get("eventTime"), now)
    } else {
        since(ev.first_timestamp, now)
    };
    let mut last = if parse_time(ev.last_timestamp).is_none() {
        first.clone()
    } else {
        since(ev.last_timestamp, now)
    };
    let mut count = ev.count;
    if let Some(series) = obj.get("series").filter(|s| s.is_object()) {
        last = since(series.get("lastObservedTime"), now);
        count = int_at(series, "count");
    } else if count == 0 {
        count = 1;
    }

    let regarding = ev.regarding.unwrap_or(&Value::Null);
    let kind = str_at(regarding, "/kind").to_lowercase();
    let rname = str_at(regarding, "/name");
    let target = if rname.is_empty() {
        kind
    } else {
        format!("{kind}/{rname}")
    };

    let source = ev.source.unwrap_or(&Value::Null);
    let component = str_or(source.get("component"), ev.reporting_controller());
    let host = str_or(source.get("host"), str_at(obj, "/reportingInstance"));
    let source = if host.is_empty() {
        component.to_string()
    } else {
        format!("{component}, {host}")
    };

    vec![
        json!(last),
        json!(str_at(obj, "/type")),
        json!(str_at(obj, "/reason")),
        json!(target),
        json!(str_at(regarding, "/fieldPath")),
        json!(source),
        json!(ev.message.trim()),
        json!(first),
        json!(count),
        json!(name_of(obj)),
    ]
}

// ---------------------------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_767_225_600; // 2026-01-01T00:00:00Z

    /// RFC 3339 with nanoseconds.
    fn format_rfc3339_nanos(ns: i128) -> String {
        let base = format_rfc3339(ns);
        let frac = ns.rem_euclid(NS_PER_SEC);
        if frac == 0 {
            base
        } else {
            format!("{}.{:09}Z", &base[..base.len() - 1], frac)
        }
    }

    fn ts(secs_ago: i64) -> String {
        testkit::ts_before(NOW, secs_ago)
    }

    #[test]
    fn human_duration_matches_kube_tests() {
        // k8s.io/apimachinery pkg/util/duration/duration_test.go TestHumanDuration
        let h = 3600;
        let cases: &[(i64, &str)] = &[
            (1, "1s"),
            (70, "70s"),
            (190, "3m10s"),
            (70 * 60, "70m"),
            (47 * h, "47h"),
            (49 * h, "2d1h"),
            ((8 * 24 + 2) * h, "8d"),
            (367 * 24 * h, "367d"),
            ((365 * 2 * 24 + 25) * h, "2y1d"),
            ((365 * 8 * 24 + 2) * h, "8y"),
        ];
        for &(s, want) in cases {
            assert_eq!(human_duration(s), want, "{s}s");
        }
    }

    #[test]
    fn human_duration_boundaries_match_kube_tests() {
        // TestHumanDurationBoundaries, in nanoseconds.
        const S: i64 = 1_000_000_000;
        const MS: i64 = 1_000_000;
        const M: i64 = 60 * S;
        const H: i64 = 60 * M;
        const D: i64 = 24 * H;
        const Y: i64 = 365 * D;
        let cases: &[(i64, &str)] = &[
            (-2 * S, "<invalid>"),
            (-2 * S + 1, "0s"),
            (0, "0s"),
            (S - MS, "0s"),
            (2 * M - MS, "119s"),
            (2 * M, "2m"),
            (2 * M + S, "2m1s"),
            (10 * M - MS, "9m59s"),
            (10 * M, "10m"),
            (10 * M + S, "10m"),
            (3 * H - MS, "179m"),
            (3 * H, "3h"),
            (3 * H + M, "3h1m"),
            (8 * H - MS, "7h59m"),
            (8 * H, "8h"),
            (8 * H + 59 * M, "8h"),
            (2 * D - MS, "47h"),
            (2 * D, "2d"),
            (2 * D + H, "2d1h"),
            (8 * D - MS, "7d23h"),
            (8 * D, "8d"),
            (8 * D + 23 * H, "8d"),
            (2 * Y - MS, "729d"),
            (2 * Y, "2y"),
            (2 * Y + 23 * H, "2y"),
            (2 * Y + 23 * H + 59 * M, "2y"),
            (2 * Y + 24 * H - MS, "2y"),
            (2 * Y + 24 * H, "2y1d"),
            (3 * Y, "3y"),
            (4 * Y, "4y"),
            (5 * Y, "5y"),
            (6 * Y, "6y"),
            (7 * Y, "7y"),
            (8 * Y - MS, "7y364d"),
            (8 * Y, "8y"),
            (8 * Y + 364 * D, "8y"),
            (9 * Y, "9y"),
        ];
        for &(d, want) in cases {
            assert_eq!(human_duration_nanos(d), want, "{d}ns");
        }
        assert_eq!(human_duration(5), "5s");
        assert_eq!(human_duration(200), "3m20s");
        assert_eq!(human_duration(2 * 86_400 + 5 * 3600), "2d5h");
    }

    #[test]
    fn rfc3339_round_trip() {
        assert_eq!(parse_rfc3339("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(
            parse_rfc3339("2026-01-01T00:00:00Z"),
            Some(i128::from(NOW) * NS_PER_SEC)
        );
        assert_eq!(
            parse_rfc3339("2026-01-01T01:00:00.5+01:00"),
            Some(i128::from(NOW) * NS_PER_SEC + 500_000_000)
        );
        assert_eq!(parse_rfc3339("0001-01-01T00:00:00Z"), Some(GO_ZERO_TIME_NS));
        assert_eq!(format_rfc3339(GO_ZERO_TIME_NS), "0001-01-01T00:00:00Z");
        assert_eq!(
            format_rfc3339(i128::from(NOW) * NS_PER_SEC),
            "2026-01-01T00:00:00Z"
        );
        assert_eq!(
            format_rfc3339(951_782_400 * NS_PER_SEC),
            "2000-02-29T00:00:00Z"
        );
        assert_eq!(
            parse_rfc3339("2000-02-29T00:00:00Z"),
            Some(951_782_400 * NS_PER_SEC)
        );
        assert_eq!(parse_rfc3339("garbage"), None);
        assert_eq!(parse_rfc3339("2026-01-01T00:00:00"), None);
    }

    fn sample_pod() -> Value {
        json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "web-7d4b9c6f5-x2x9k",
                "namespace": "default",
                "uid": "0b0e5f16-3a6e-4d3c-9d0f-6a0c2b7c1e11",
                "resourceVersion": "1234",
                "creationTimestamp": ts(300),
                "labels": {"app": "web"}
            },
            "spec": {
                "nodeName": "node-00001",
                "containers": [{"name": "app", "image": "nginx"}, {"name": "sidecar", "image": "envoy"}]
            },
            "status": {
                "phase": "Running",
                "podIP": "10.128.1.7",
                "podIPs": [{"ip": "10.128.1.7"}],
                "conditions": [
                    {"type": "Initialized", "status": "True"},
                    {"type": "Ready", "status": "True"},
                    {"type": "ContainersReady", "status": "True"},
                    {"type": "PodScheduled", "status": "True"}
                ],
                "containerStatuses": [
                    {"name": "app", "ready": true, "restartCount": 0, "state": {"running": {"startedAt": ts(290)}}},
                    {"name": "sidecar", "ready": true, "restartCount": 0, "state": {"running": {"startedAt": ts(290)}}}
                ]
            }
        })
    }

    /// A container status: ready flag, restart count, state, and optionally the time (seconds
    /// before NOW) its last termination finished.
    fn cst(ready: bool, restarts: i64, state: Value, last_finished_ago: Option<i64>) -> Value {
        let mut v = json!({"name": "", "ready": ready, "restartCount": restarts, "state": state});
        if let Some(ago) = last_finished_ago {
            v["lastState"] = json!({"terminated": {"exitCode": 0, "finishedAt": ts(ago)}});
        }
        v
    }

    fn pod_of(name: &str, containers: usize, status: Value) -> Value {
        json!({"metadata": {"name": name}, "spec": {"containers": vec![json!({}); containers]}, "status": status})
    }

    /// Ported from kube's TestPrintPod / TestPrintPodWithRestartableInitContainer /
    /// TestPrintPodConditions (pkg/printers/internalversion/printers_test.go); the first five
    /// cells are compared (kube's non-wide test output).
    #[test]
    fn kube_print_pod_cases() {
        let running = || json!({"running": {}});
        let waiting = |r: &str| json!({"waiting": {"reason": r}});
        let terminated =
            |r: &str, code: i64| json!({"terminated": {"reason": r, "exitCode": code}});
        let ready_true = json!([{"type": "Ready", "status": "True"}]);
        let mut cases: Vec<(Value, [&str; 5])> = vec![
            (
                pod_of(
                    "test1",
                    2,
                    json!({"phase": "podPhase", "containerStatuses": [
                cst(true, 3, running(), None), cst(false, 3, json!({}), None)]}),
                ),
                ["test1", "1/2", "podPhase", "6", "<unknown>"],
            ),
            (
                pod_of(
                    "test2",
                    2,
                    json!({"phase": "podPhase", "containerStatuses": [
                cst(true, 3, running(), None), cst(false, 3, waiting("ContainerWaitingReason"), None)]}),
                ),
                ["test2", "1/2", "ContainerWaitingReason", "6", "<unknown>"],
            ),
            (
                pod_of(
                    "test4",
                    2,
                    json!({"phase": "podPhase", "containerStatuses": [
                cst(true, 3, running(), None), cst(true, 3, json!({}), None)]}),
                ),
                ["test4", "1/2", "podPhase", "6", "<unknown>"],
            ),
            (
                pod_of(
                    "test5",
                    2,
                    json!({"phase": "podPhase", "reason": "podReason", "containerStatuses": [
                cst(true, 3, running(), None), cst(true, 3, json!({}), None)]}),
                ),
                ["test5", "1/2", "podReason", "6", "<unknown>"],
            ),
            (
                pod_of(
                    "test6",
                    2,
                    json!({"phase": "Running", "containerStatuses": [
                cst(true, 3, terminated("Completed", 0), None), cst(true, 3, running(), None)]}),
                ),
                ["test6", "1/2", "NotReady", "6", "<unknown>"],
            ),
            (
                pod_of(
                    "test6",
                    2,
                    json!({"phase": "Running", "conditions": ready_true, "containerStatuses": [
                cst(true, 3, terminated("Completed", 0), None), cst(true, 3, running(), None)]}),
                ),
                ["test6", "1/2", "Running", "6", "<unknown>"],
            ),
            (
                pod_of(
                    "test11",
                    1,
                    json!({"phase": "Running",
                "initContainerStatuses": [cst(false, 2, json!({"terminated": {"exitCode": 0}}), Some(120))],
                "containerStatuses": [cst(false, 4, running(), Some(20))]}),
                ),
                ["test11", "0/1", "Running", "4 (20s ago)", "<unknown>"],
            ),
            (
                pod_of(
                    "test14",
                    2,
                    json!({"phase": "Running", "containerStatuses": [
                cst(true, 6, running(), Some(5 * 86_400)), cst(true, 3, running(), Some(20 * 86_400))]}),
                ),
                ["test14", "2/2", "Running", "9 (5d ago)", "<unknown>"],
            ),
            (
                pod_of(
                    "test17",
                    1,
                    json!({"phase": "Failed", "containerStatuses": [
                cst(false, 0, terminated("Error", 1), None)]}),
                ),
                ["test17", "0/1", "Error", "0", "<unknown>"],
            ),
        ];
        // Init containers (test7 .. test10).
        let mut p = pod_of(
            "test7",
            1,
            json!({"phase": "podPhase",
            "initContainerStatuses": [cst(false, 3, running(), Some(10))],
            "containerStatuses": [cst(false, 0, json!({"waiting": {}}), None)]}),
        );
        p["spec"]["initContainers"] = json!([{}]);
        cases.push((p, ["test7", "0/1", "Init:0/1", "3 (10s ago)", "<unknown>"]));
        let mut p = pod_of(
            "test10",
            1,
            json!({"phase": "podPhase",
            "initContainerStatuses": [cst(false, 2, json!({"terminated": {"exitCode": 0}}), Some(120)),
                                      cst(false, 3, running(), Some(10))],
            "containerStatuses": [cst(false, 0, json!({"waiting": {}}), None)]}),
        );
        p["spec"]["initContainers"] = json!([{}, {}]);
        cases.push((p, ["test10", "0/1", "Init:1/2", "5 (10s ago)", "<unknown>"]));
        // Deletion: Succeeded stays Completed, Running/Pending become Terminating.
        let mut p = pod_of(
            "test18",
            1,
            json!({"phase": "Succeeded", "containerStatuses": [
            cst(false, 0, terminated("Completed", 0), None)]}),
        );
        p["metadata"]["deletionTimestamp"] = json!(ts(10));
        cases.push((p, ["test18", "0/1", "Completed", "0", "<unknown>"]));
        let mut p = pod_of("test20", 1, json!({"phase": "Pending"}));
        p["metadata"]["deletionTimestamp"] = json!(ts(10));
        cases.push((p, ["test20", "0/1", "Terminating", "0", "<unknown>"]));
        // Restartable (sidecar) init containers.
        let sidecars = json!([{"name": "r1", "restartPolicy": "Always"}, {"name": "r2", "restartPolicy": "Always"}]);
        let named = |mut v: Value, n: &str, started: bool| {
            v["name"] = json!(n);
            v["started"] = json!(started);
            v
        };
        let mut p = pod_of(
            "test1",
            1,
            json!({"phase": "Pending",
            "conditions": [{"type": "Initialized", "status": "False"}],
            "initContainerStatuses": [named(cst(false, 3, running(), Some(10)), "r1", true),
                                      named(cst(false, 0, running(), None), "r2", false)],
            "containerStatuses": [cst(false, 0, json!({"waiting": {}}), None)]}),
        );
        p["spec"]["initContainers"] = sidecars.clone();
        cases.push((p, ["test1", "0/3", "Init:1/2", "3 (10s ago)", "<unknown>"]));
        let mut p = pod_of(
            "test2",
            1,
            json!({"phase": "Running",
            "conditions": [{"type": "Initialized", "status": "True"}],
            "initContainerStatuses": [named(cst(false, 3, running(), Some(10)), "r1", true),
                                      named(cst(false, 0, running(), None), "r2", true)],
            "containerStatuses": [cst(true, 4, running(), Some(20))]}),
        );
        p["spec"]["initContainers"] = sidecars.clone();
        cases.push((p, ["test2", "1/3", "Running", "7 (10s ago)", "<unknown>"]));
        let mut p = pod_of(
            "test3",
            1,
            json!({"phase": "Succeeded",
            "conditions": [{"type": "Initialized", "status": "True"}],
            "initContainerStatuses": [named(cst(false, 3, terminated("Error", 137), Some(10)), "r1", false),
                                      named(cst(false, 0, terminated("Error", 137), None), "r2", false)],
            "containerStatuses": [cst(false, 4, terminated("Completed", 0), Some(20))]}),
        );
        p["spec"]["initContainers"] = sidecars;
        cases.push((p, ["test3", "0/3", "Completed", "7 (10s ago)", "<unknown>"]));

        for (pod, want) in cases {
            let cells = row_cells("", "Pod", &pod, NOW);
            let got: Vec<&str> = cells.as_array().unwrap()[..5]
                .iter()
                .map(|c| c.as_str().unwrap())
                .collect();
            assert_eq!(got, want, "{pod}");
        }

        // TestPrintPodwide: readiness gates and nominated node.
        let mut p = pod_of(
            "test1",
            2,
            json!({"phase": "podPhase",
            "conditions": [{"type": "condition1", "status": "False"}, {"type": "condition2", "status": "True"}],
            "podIPs": [{"ip": "1.1.1.1"}, {"ip": "2001:db8::"}], "nominatedNodeName": "node1",
            "containerStatuses": [cst(true, 3, running(), None), cst(false, 3, json!({}), None)]}),
        );
        p["spec"]["nodeName"] = json!("test1");
        p["spec"]["readinessGates"] = json!([{"conditionType": "condition1"}, {"conditionType": "condition2"}, {"conditionType": "condition3"}]);
        assert_eq!(
            row_cells("", "Pod", &p, NOW),
            json!([
                "test1",
                "1/2",
                "podPhase",
                "6",
                "<unknown>",
                "1.1.1.1",
                "test1",
                "node1",
                "1/3"
            ])
        );
    }

    #[test]
    fn pod_row_like_kubectl() {
        let pod = sample_pod();
        let cells = row_cells("", "Pod", &pod, NOW);
        assert_eq!(
            cells,
            json!([
                "web-7d4b9c6f5-x2x9k",
                "2/2",
                "Running",
                "0",
                "5m",
                "10.128.1.7",
                "node-00001",
                "<none>",
                "<none>"
            ])
        );
        assert_eq!(
            cells.as_array().unwrap().len(),
            column_definitions("", "Pod").as_array().unwrap().len()
        );
    }

    #[test]
    fn pod_restarts_waiting_and_terminating() {
        let mut pod = sample_pod();
        pod["status"]["containerStatuses"][1] = json!({
            "name": "sidecar", "ready": false, "restartCount": 3,
            "state": {"waiting": {"reason": "CrashLoopBackOff"}},
            "lastState": {"terminated": {"exitCode": 1, "reason": "Error", "finishedAt": ts(125)}}
        });
        let cells = row_cells("", "Pod", &pod, NOW);
        assert_eq!(cells[1], json!("1/2"));
        assert_eq!(cells[2], json!("CrashLoopBackOff"));
        assert_eq!(cells[3], json!("3 (2m5s ago)"));

        pod["metadata"]["deletionTimestamp"] = json!(ts(1));
        assert_eq!(row_cells("", "Pod", &pod, NOW)[2], json!("Terminating"));

        let mut pending = sample_pod();
        pending["status"] = json!({"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}]});
        pending["spec"]["nodeName"] = Value::Null;
        let cells = row_cells("", "Pod", &pending, NOW);
        assert_eq!(cells[1], json!("0/2"));
        assert_eq!(cells[2], json!("SchedulingGated"));
        assert_eq!(cells[5], json!("<none>"));
        assert_eq!(cells[6], json!("<none>"));
    }

    #[test]
    fn pod_init_containers_and_completed() {
        let mut pod = sample_pod();
        pod["spec"]["initContainers"] = json!([{"name": "init", "image": "busybox"}]);
        pod["status"]["phase"] = json!("Pending");
        pod["status"]["conditions"] = json!([{"type": "Initialized", "status": "False"}]);
        pod["status"]["initContainerStatuses"] =
            json!([{"name": "init", "ready": false, "restartCount": 0, "state": {"running": {}}}]);
        pod["status"]["containerStatuses"] = json!([
            {"name": "app", "ready": false, "restartCount": 0, "state": {"waiting": {"reason": "PodInitializing"}}},
            {"name": "sidecar", "ready": false, "restartCount": 0, "state": {"waiting": {"reason": "PodInitializing"}}}
        ]);
        assert_eq!(row_cells("", "Pod", &pod, NOW)[2], json!("Init:0/1"));

        // Native sidecar counts as a container and is ready once started.
        pod["spec"]["initContainers"] =
            json!([{"name": "init", "image": "busybox", "restartPolicy": "Always"}]);
        pod["status"]["initContainerStatuses"] = json!([{"name": "init", "ready": true, "started": true, "restartCount": 0, "state": {"running": {}}}]);
        let s = sample_pod();
        pod["status"]["containerStatuses"] = s["status"]["containerStatuses"].clone();
        pod["status"]["conditions"] = s["status"]["conditions"].clone();
        pod["status"]["phase"] = json!("Running");
        let cells = row_cells("", "Pod", &pod, NOW);
        assert_eq!(cells[1], json!("3/3"));
        assert_eq!(cells[2], json!("Running"));

        let mut done = sample_pod();
        done["status"]["phase"] = json!("Succeeded");
        done["status"]["containerStatuses"] = json!([
            {"name": "app", "ready": false, "restartCount": 0, "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}},
            {"name": "sidecar", "ready": false, "restartCount": 0, "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}
        ]);
        let t = table(
            "",
            "Pod",
            &[&done],
            &json!({}),
            IncludeObject::None,
            true,
            NOW,
        );
        assert_eq!(t["rows"][0]["cells"][1], json!("0/2"));
        assert_eq!(t["rows"][0]["cells"][2], json!("Completed"));
        assert_eq!(t["rows"][0]["conditions"][0]["type"], json!("Completed"));
        assert_eq!(t["rows"][0]["conditions"][0]["reason"], json!("Succeeded"));
        assert_eq!(t["rows"][0]["object"], Value::Null);
        assert_eq!(t["columnDefinitions"], Value::Null);
    }

    #[test]
    fn node_row_like_kubectl() {
        let node = json!({
            "metadata": {
                "name": "node-00000",
                "creationTimestamp": ts(3 * 86_400 + 4 * 3600),
                "labels": {
                    "kubernetes.io/hostname": "node-00000",
                    "node-role.kubernetes.io/worker": "",
                    "node-role.kubernetes.io/control-plane": "",
                    "kubernetes.io/role": "worker"
                }
            },
            "spec": {"unschedulable": true},
            "status": {
                "conditions": [
                    {"type": "MemoryPressure", "status": "False"},
                    {"type": "Ready", "status": "True"}
                ],
                "addresses": [{"type": "InternalIP", "address": "10.64.0.2"}, {"type": "Hostname", "address": "node-00000"}],
                "nodeInfo": {"kubeletVersion": "v1.34.1", "osImage": "Ubuntu 24.04.2 LTS", "kernelVersion": "6.8.0-1021-gcp", "containerRuntimeVersion": "containerd://2.0.4"}
            }
        });
        assert_eq!(
            row_cells("", "Node", &node, NOW),
            json!([
                "node-00000",
                "Ready,SchedulingDisabled",
                "control-plane,worker",
                "3d4h",
                "v1.34.1",
                "10.64.0.2",
                "<none>",
                "Ubuntu 24.04.2 LTS",
                "6.8.0-1021-gcp",
                "containerd://2.0.4"
            ])
        );
        let mut nr = node.clone();
        nr["status"]["conditions"][1]["status"] = json!("Unknown");
        nr["spec"] = json!({});
        nr["metadata"]["labels"] = json!({});
        let cells = row_cells("", "Node", &nr, NOW);
        assert_eq!(cells[1], json!("NotReady"));
        assert_eq!(cells[2], json!("<none>"));
        nr["status"]["conditions"] = json!([]);
        assert_eq!(row_cells("", "Node", &nr, NOW)[1], json!("Unknown"));
    }

    #[test]
    fn service_rows_like_kubectl() {
        let svc = json!({
            "metadata": {"name": "web", "creationTimestamp": ts(45 * 86_400)},
            "spec": {"type": "ClusterIP", "clusterIP": "10.96.12.34", "clusterIPs": ["10.96.12.34"],
                     "ports": [{"port": 80, "protocol": "TCP", "targetPort": 8080}, {"port": 443, "protocol": "TCP"}],
                     "selector": {"tier": "frontend", "app": "web"}}
        });
        assert_eq!(
            row_cells("", "Service", &svc, NOW),
            json!([
                "web",
                "ClusterIP",
                "10.96.12.34",
                "<none>",
                "80/TCP,443/TCP",
                "45d",
                "app=web,tier=frontend"
            ])
        );
        let lb = json!({
            "metadata": {"name": "lb", "creationTimestamp": ts(30)},
            "spec": {"type": "LoadBalancer", "clusterIPs": ["10.96.0.9"],
                     "ports": [{"port": 80, "nodePort": 31234, "protocol": "TCP"}]},
            "status": {"loadBalancer": {}}
        });
        assert_eq!(
            row_cells("", "Service", &lb, NOW),
            json!([
                "lb",
                "LoadBalancer",
                "10.96.0.9",
                "<pending>",
                "80:31234/TCP",
                "30s",
                "<none>"
            ])
        );
        let headless = json!({"metadata": {"name": "h"}, "spec": {"clusterIP": "None", "clusterIPs": ["None"]}});
        let cells = row_cells("", "Service", &headless, NOW);
        assert_eq!(cells[1], json!("ClusterIP"));
        assert_eq!(cells[2], json!("None"));
        assert_eq!(cells[4], json!("<none>"));
        assert_eq!(cells[5], json!("<unknown>"));
    }

    #[test]
    fn configmap_secret_namespace_rows() {
        let cm = json!({"metadata": {"name": "kube-root-ca.crt", "creationTimestamp": ts(10)},
                        "data": {"ca.crt": "x"}, "binaryData": {"b": "AA=="}});
        assert_eq!(
            row_cells("", "ConfigMap", &cm, NOW),
            json!(["kube-root-ca.crt", 2, "10s"])
        );
        let sec = json!({"metadata": {"name": "tls", "creationTimestamp": ts(7200)},
                         "type": "kubernetes.io/tls", "data": {"tls.crt": "", "tls.key": ""}});
        assert_eq!(
            row_cells("", "Secret", &sec, NOW),
            json!(["tls", "kubernetes.io/tls", 2, "120m"])
        );
        let ns = json!({"metadata": {"name": "fleet-0", "creationTimestamp": ts(86_400)},
                        "status": {"phase": "Terminating"}});
        assert_eq!(
            row_cells("", "Namespace", &ns, NOW),
            json!(["fleet-0", "Terminating", "24h"])
        );
    }

    #[test]
    fn endpoints_and_slices() {
        let ep = json!({"metadata": {"name": "web", "creationTimestamp": ts(60)},
            "subsets": [{"addresses": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}, {"ip": "10.0.0.3"}, {"ip": "fd00::4"}],
                         "ports": [{"port": 8080, "protocol": "TCP"}]}]});
        assert_eq!(
            row_cells("", "Endpoints", &ep, NOW),
            json!([
                "web",
                "10.0.0.1:8080,10.0.0.2:8080,10.0.0.3:8080 + 1 more...",
                "60s"
            ])
        );
        let empty = json!({"metadata": {"name": "e"}});
        assert_eq!(row_cells("", "Endpoints", &empty, NOW)[1], json!("<none>"));
        let v6 = json!({"metadata": {"name": "v6"}, "subsets": [{"addresses": [{"ip": "fd00::4"}], "ports": [{"port": 53}]}]});
        assert_eq!(
            row_cells("", "Endpoints", &v6, NOW)[1],
            json!("[fd00::4]:53")
        );

        let eps = json!({"metadata": {"name": "web-abcde", "creationTimestamp": ts(100)},
            "addressType": "IPv4",
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}, {"name": "named"}],
            "endpoints": [{"addresses": ["10.0.0.1"]}, {"addresses": ["10.0.0.2"]}]});
        assert_eq!(
            row_cells("discovery.k8s.io", "EndpointSlice", &eps, NOW),
            json!([
                "web-abcde",
                "IPv4",
                "8080,named",
                "10.0.0.1,10.0.0.2",
                "100s"
            ])
        );
        let none = json!({"metadata": {"name": "n"}, "addressType": "IPv4"});
        let cells = row_cells("discovery.k8s.io", "EndpointSlice", &none, NOW);
        assert_eq!(cells[2], json!("<unset>"));
        assert_eq!(cells[3], json!("<unset>"));
    }

    #[test]
    fn event_rows_core_and_events_v1() {
        let ev = json!({
            "metadata": {"name": "web.17f", "namespace": "default", "creationTimestamp": ts(600)},
            "involvedObject": {"kind": "Pod", "name": "web-1", "fieldPath": "spec.containers{app}"},
            "reason": "Pulled", "message": "Successfully pulled image \"nginx\"\n",
            "source": {"component": "kubelet", "host": "node-00001"},
            "firstTimestamp": ts(600), "lastTimestamp": ts(60), "count": 4, "type": "Normal"
        });
        assert_eq!(
            row_cells("", "Event", &ev, NOW),
            json!([
                "60s",
                "Normal",
                "Pulled",
                "pod/web-1",
                "spec.containers{app}",
                "kubelet, node-00001",
                "Successfully pulled image \"nginx\"",
                "10m",
                4,
                "web.17f"
            ])
        );
        let ev1 = json!({
            "metadata": {"name": "web.18a", "namespace": "default"},
            "eventTime": format_rfc3339_nanos(i128::from(NOW - 30) * NS_PER_SEC + 123_000),
            "reportingController": "default-scheduler", "reportingInstance": "",
            "regarding": {"kind": "Pod", "name": "web-2"},
            "reason": "Scheduled", "note": "Successfully assigned default/web-2 to node-00002", "type": "Normal"
        });
        assert_eq!(
            row_cells("events.k8s.io", "Event", &ev1, NOW),
            json!([
                "29s",
                "Normal",
                "Scheduled",
                "pod/web-2",
                "",
                "default-scheduler",
                "Successfully assigned default/web-2 to node-00002",
                "29s",
                1,
                "web.18a"
            ])
        );
    }

    #[test]
    fn default_convertor_and_table_shape() {
        let cr = json!({"apiVersion": "example.com/v1", "kind": "Widget",
                        "metadata": {"name": "w1", "creationTimestamp": "2025-12-31T23:59:00Z", "resourceVersion": "9"}});
        let cols = column_definitions("example.com", "Widget");
        assert_eq!(cols[0]["name"], json!("Name"));
        assert_eq!(
            cols[1],
            json!({"name": "Created At", "type": "date", "format": "", "description": D_CREATED, "priority": 0})
        );
        assert_eq!(
            row_cells("example.com", "Widget", &cr, NOW),
            json!(["w1", "2025-12-31T23:59:00Z"])
        );
        assert_eq!(
            row_cells("example.com", "Widget", &json!({}), NOW),
            json!(["", "0001-01-01T00:00:00Z"])
        );

        let empty = table(
            "example.com",
            "Widget",
            &[],
            &json!({"resourceVersion": "10"}),
            IncludeObject::Metadata,
            false,
            NOW,
        );
        assert_eq!(empty["rows"], Value::Null);
        let empty_pods = table(
            "",
            "Pod",
            &[],
            &json!({"resourceVersion": "10"}),
            IncludeObject::Metadata,
            false,
            NOW,
        );
        assert_eq!(empty_pods["rows"], json!([]));

        let t = table(
            "example.com",
            "Widget",
            &[&cr],
            &json!({"resourceVersion": "10", "continue": "abc", "remainingItemCount": 5}),
            IncludeObject::Metadata,
            false,
            NOW,
        );
        let s = serde_json::to_string(&t).unwrap();
        assert!(s.starts_with(
            r#"{"kind":"Table","apiVersion":"meta.k8s.io/v1","metadata":{"resourceVersion":"10","continue":"abc","remainingItemCount":5},"columnDefinitions":[{"name":"Name","type":"string","format":"name","#
        ));
        assert_eq!(
            t["rows"][0]["object"],
            json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                   "metadata": {"name": "w1", "creationTimestamp": "2025-12-31T23:59:00Z", "resourceVersion": "9"}})
        );
        let full = table(
            "example.com",
            "Widget",
            &[&cr],
            &json!({}),
            IncludeObject::Object,
            false,
            NOW,
        );
        assert_eq!(full["rows"][0]["object"], cr);
        assert_eq!(full["metadata"], json!({}));
    }

    #[test]
    fn full_object_gets_type_meta() {
        let pod = json!({"metadata": {"name": "p"}, "spec": {}});
        let t = table(
            "",
            "Pod",
            &[&pod],
            &json!({}),
            IncludeObject::Object,
            false,
            NOW,
        );
        let s = serde_json::to_string(&t["rows"][0]["object"]).unwrap();
        assert!(
            s.starts_with(r#"{"kind":"Pod","apiVersion":"v1","metadata""#),
            "{s}"
        );
    }

    #[test]
    fn include_object_parse() {
        assert_eq!(IncludeObject::parse("None"), Some(IncludeObject::None));
        assert_eq!(
            IncludeObject::parse("Metadata"),
            Some(IncludeObject::Metadata)
        );
        assert_eq!(IncludeObject::parse(""), Some(IncludeObject::Metadata));
        assert_eq!(IncludeObject::parse("Object"), Some(IncludeObject::Object));
        assert_eq!(IncludeObject::parse("object"), None);
        assert_eq!(IncludeObject::default(), IncludeObject::Metadata);
    }

    #[test]
    fn every_kind_has_cells_for_every_column() {
        for (g, k) in printed_kinds() {
            assert!(
                !matches!(printer_for(g, k), Printer::Default),
                "{g}/{k} has a printer"
            );
            let cols = column_definitions(g, k);
            let cells = row_cells(g, k, &testkit::bare(), NOW);
            assert_eq!(
                cols.as_array().unwrap().len(),
                cells.as_array().unwrap().len(),
                "{g}/{k}"
            );
            for c in cols.as_array().unwrap() {
                let m = c.as_object().unwrap();
                let keys: Vec<&str> = m.keys().map(String::as_str).collect();
                assert_eq!(keys, ["name", "type", "format", "description", "priority"]);
            }
        }
    }

    /// kube 1.36's printers take these descriptions from the v1 types' swagger docs (k8s.io/api
    /// v0.36 apps/v1 and discovery/v1 types_swagger_doc_generated.go), whose texts differ from
    /// the extensions/v1beta1, apps/v1beta1 and discovery/v1beta1 ones older printers used.
    #[test]
    fn descriptions_come_from_the_v1_types() {
        let desc = |g: &str, k: &str, column: &str| -> String {
            let cols = column_definitions(g, k);
            let found: Vec<&Value> = cols
                .as_array()
                .unwrap()
                .iter()
                .filter(|c| c["name"] == column)
                .collect();
            assert_eq!(found.len(), 1, "{g}/{k} {column}");
            found[0]["description"].as_str().unwrap().to_string()
        };
        // appsv1.DeploymentSpec{}.SwaggerDoc()["selector"]
        assert_eq!(
            desc("apps", "Deployment", "Selector"),
            "Label selector for pods. Existing ReplicaSets whose pods are selected by this will be the ones affected by this deployment. It must match the pod template's labels."
        );
        // appsv1.ReplicaSetSpec{}.SwaggerDoc()["selector"]
        assert_eq!(
            desc("apps", "ReplicaSet", "Selector"),
            "Selector is a label query over pods that should match the replica count. Label keys and values that must match in order to be controlled by this replica set. It must match the pod template's labels. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors"
        );
        // appsv1.DaemonSetSpec{}.SwaggerDoc()["selector"]
        assert_eq!(
            desc("apps", "DaemonSet", "Selector"),
            "A label query over pods that are managed by the daemon set. Must match in order to be controlled. It must match the pod template's labels. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors"
        );
        // appsv1.DaemonSetStatus{}.SwaggerDoc()["numberReady"]
        assert_eq!(
            desc("apps", "DaemonSet", "Ready"),
            "numberReady is the number of nodes that should be running the daemon pod and have one or more of the daemon pod running with a Ready Condition."
        );
        // appsv1.ControllerRevision{}.SwaggerDoc()["revision"]
        assert_eq!(
            desc("apps", "ControllerRevision", "Revision"),
            "Revision indicates the revision of the state represented by Data."
        );
        // discoveryv1.EndpointSlice{}.SwaggerDoc()["addressType"]
        assert_eq!(
            desc("discovery.k8s.io", "EndpointSlice", "AddressType"),
            "addressType specifies the type of address carried by this EndpointSlice. All addresses in this slice must be the same type. This field is immutable after creation. The following address types are currently supported: * IPv4: Represents an IPv4 Address. * IPv6: Represents an IPv6 Address. * FQDN: Represents a Fully Qualified Domain Name. (Deprecated) The EndpointSlice controller only generates, and kube-proxy only processes, slices of addressType \"IPv4\" and \"IPv6\". No semantics are defined for the \"FQDN\" type."
        );
        // discoveryv1.EndpointSlice{}.SwaggerDoc()["ports"]
        assert_eq!(
            desc("discovery.k8s.io", "EndpointSlice", "Ports"),
            "ports specifies the list of network ports exposed by each endpoint in this slice. Each port must have a unique name. Each slice may include a maximum of 100 ports. Services always have at least 1 port, so EndpointSlices generated by the EndpointSlice controller will likewise always have at least 1 port. EndpointSlices used for other purposes may have an empty ports list."
        );
        // Unchanged by the move to v1: the other DaemonSet counts, and the
        // CronJob columns (batch/v1 and batch/v1beta1 docs agree).
        assert_eq!(
            desc("apps", "DaemonSet", "Up-to-date"),
            "The total number of nodes that are running updated daemon pod"
        );
        assert_eq!(
            desc("batch", "CronJob", "Suspend"),
            "This flag tells the controller to suspend subsequent executions, it does not apply to already started executions.  Defaults to false."
        );
    }

    fn stored(kind: &str, api_version: &str, v: &Value) -> Value {
        object_value(kind, api_version, &to_go_json(v))
    }

    #[test]
    fn list_bodies_are_the_bytes_of_the_whole_table() {
        let pod = |name: &str, age: i64| {
            stored(
                "Pod",
                "v1",
                &json!({"metadata": {"name": name, "namespace": "default", "resourceVersion": "7",
                        "creationTimestamp": ts(age), "annotations": {"a": "<b>&"}},
                        "spec": {"nodeName": "n1", "containers": [{"name": "c"}]},
                        "status": {"phase": "Running"}}),
            )
        };
        let objs = [pod("a", 10), pod("b", 4000)];
        let meta = json!({"resourceVersion": "12", "continue": "tok", "remainingItemCount": 3});
        for include in [
            IncludeObject::None,
            IncludeObject::Metadata,
            IncludeObject::Object,
        ] {
            let refs: Vec<&Value> = objs.iter().collect();
            let whole = to_go_json(&table("", "Pod", &refs, &meta, include, false, NOW));
            let streamed = table_list("", "Pod", objs.iter().cloned(), &meta, include, NOW);
            assert_eq!(
                String::from_utf8(streamed).unwrap(),
                String::from_utf8(whole).unwrap()
            );
        }
        // Empty lists: `[]` for a per-type printer, `null` for the generic convertor.
        for (g, k) in [("", "Pod"), ("example.com", "Widget")] {
            let whole = to_go_json(&table(
                g,
                k,
                &[],
                &meta,
                IncludeObject::Metadata,
                false,
                NOW,
            ));
            let streamed = table_list(g, k, Vec::new(), &meta, IncludeObject::Metadata, NOW);
            assert_eq!(streamed, whole, "{g}/{k}");
        }
        assert!(has_printer("", "Pod"));
        assert!(has_printer("discovery.k8s.io", "EndpointSlice"));
        assert!(has_printer("apps", "Deployment"));
        assert!(has_printer("networking.k8s.io", "Ingress"));
        assert!(!has_printer("example.com", "Widget"));

        let items: Vec<Value> = objs.iter().map(partial_object_metadata).collect();
        let whole = to_go_json(
            &json!({"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1", "metadata": meta, "items": items}),
        );
        assert_eq!(metadata_list(objs.iter().cloned(), &meta), whole);
        assert_eq!(
            String::from_utf8(metadata_list(Vec::new(), &json!({"resourceVersion": "3"}))).unwrap(),
            r#"{"kind":"PartialObjectMetadataList","apiVersion":"meta.k8s.io/v1","metadata":{"resourceVersion":"3"},"items":null}"#,
            "kube's converter appends to a nil slice"
        );
    }

    #[test]
    fn api_services_send_their_columns_with_every_watch_event() {
        let obj = json!({"metadata": {"name": "v1.", "resourceVersion": "5"}});
        let later = |group, kind| {
            object_table(group, kind, &obj, IncludeObject::Metadata, true, NOW)["columnDefinitions"]
                .clone()
        };
        assert_eq!(
            later("apiregistration.k8s.io", "APIService"),
            column_definitions("apiregistration.k8s.io", "APIService")
        );
        assert_eq!(later("", "Pod"), Value::Null);
        assert_eq!(
            later("rbac.authorization.k8s.io", "RoleBinding"),
            Value::Null
        );
    }

    #[test]
    fn watch_event_objects_and_frames() {
        let pod = stored(
            "Pod",
            "v1",
            &json!({"metadata": {"name": "p", "resourceVersion": "9"}, "spec": {}}),
        );
        let t = event_object(Repr::Table, "", "Pod", &pod, IncludeObject::None, true, NOW);
        assert_eq!(t["metadata"], json!({"resourceVersion": "9"}));
        assert_eq!(t["columnDefinitions"], Value::Null);
        assert_eq!(t["rows"].as_array().unwrap().len(), 1);
        let headed = event_object(
            Repr::Table,
            "",
            "Pod",
            &pod,
            IncludeObject::None,
            false,
            NOW,
        );
        assert_eq!(headed["columnDefinitions"], column_definitions("", "Pod"));
        assert_eq!(
            event_object(
                Repr::Metadata,
                "",
                "Pod",
                &pod,
                IncludeObject::None,
                false,
                NOW
            ),
            partial_object_metadata(&pod)
        );
        assert_eq!(
            event_object(Repr::Json, "", "Pod", &pod, IncludeObject::None, false, NOW),
            pod
        );
        let f = event_frame("ADDED", &json!({"a": "<"}));
        assert_eq!(
            &f[..],
            b"{\"type\":\"ADDED\",\"object\":{\"a\":\"\\u003c\"}}\n"
        );

        let b = crate::event::bookmark_object("Pod", "v1", true, 11, true);
        let bt = bookmark_event_object(Repr::Table, &b, 11);
        assert_eq!(
            String::from_utf8(to_go_json(&bt)).unwrap(),
            r#"{"kind":"Table","apiVersion":"meta.k8s.io/v1","metadata":{"resourceVersion":"11"},"rows":[{"cells":[],"object":{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"resourceVersion":"11","annotations":{"k8s.io/initial-events-end":"true"}}}}]}"#
        );
        assert_eq!(
            bookmark_event_object(Repr::Metadata, &b, 11),
            partial_object_metadata(&b)
        );
        assert_eq!(bookmark_event_object(Repr::Json, &b, 11), b);
    }

    #[test]
    fn object_values_lead_with_type_meta() {
        let v = object_value("Pod", "v1", br#"{"metadata":{"name":"p"},"spec":{}}"#);
        assert_eq!(
            String::from_utf8(to_go_json(&v)).unwrap(),
            r#"{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p"},"spec":{}}"#
        );
        assert_eq!(
            object_value("Pod", "v1", b"[1]"),
            json!({"kind": "Pod", "apiVersion": "v1"})
        );
    }

    #[test]
    fn printed_values_leave_out_only_the_managed_fields() {
        let body = br#"{"metadata":{"name":"p","managedFields":[{"manager":"m","fieldsV1":{"f:spec":{}}}],"labels":{"a":"b"}},"spec":{"managedFields":1},"status":{}}"#;
        let mut want = object_value("Pod", "v1", body);
        want["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("managedFields");
        assert_eq!(printed_value("Pod", "v1", body), want);
        assert_eq!(want["spec"]["managedFields"], 1, "only metadata's");
        assert_eq!(
            printed_value("Pod", "v1", b"[1]"),
            json!({"kind": "Pod", "apiVersion": "v1"})
        );
    }

    #[test]
    fn include_object_from_query_is_kubes_400() {
        assert_eq!(IncludeObject::from_query(None), Ok(IncludeObject::Metadata));
        assert_eq!(
            IncludeObject::from_query(Some("watch=1&includeObject=Object&includeObject=x")),
            Ok(IncludeObject::Object)
        );
        assert_eq!(
            IncludeObject::from_query(Some("includeObject=")),
            Ok(IncludeObject::Metadata)
        );
        let e = IncludeObject::from_query(Some("includeObject=object")).unwrap_err();
        assert_eq!(e.code, 400);
        assert_eq!(e.reason, "BadRequest");
        assert_eq!(
            e.message,
            "Unable to convert to Table as requested: includeObject: Invalid value: \"object\": must be 'Metadata', 'Object', 'None', or empty"
        );
    }
}
