//! Printers of the networking.k8s.io kinds (Ingresses, IngressClasses, NetworkPolicies,
//! ServiceCIDRs, IPAddresses), as kube 1.36's `pkg/printers/internalversion/printers.go` prints
//! them.
//!
//! Same interface as [`super::workloads`]: [`Kind`], [`kind_for`], [`columns`], [`cells`];
//! [`KINDS`] lists the kinds printed here and [`GENERIC`] the kinds of this module's groups
//! that kube prints with its default convertor (`Name` + `Created At`): none, every kind
//! networking.k8s.io/v1 serves has a printer.
//!
//! Cells are read from the v1 JSON form as the apiserver would decode it (none of these
//! printers reads a defaulted field). The apiserver prints in wide mode, so an Ingress's
//! addresses are never clipped to kube's 16 characters. Pure: no I/O; the clock is an argument.

use serde_json::{Value, json};

use super::cells::{
    arr, format_label_selector, go_lower, join_strings, name_marked_default, name_of, present,
    str_at,
};
use super::{age, age_col, name_col, text};

// Column descriptions: the Ingress and IngressClass ones are literal in printers.go; the others
// are k8s.io/api networking/v1 swagger docs (kube 1.36 names the v1 types since it dropped the
// extensions/v1beta1 ones).
const D_INGRESS_CLASS: &str =
    "The name of the IngressClass resource that should be used for additional configuration";
const D_INGRESS_HOSTS: &str =
    "Hosts that incoming requests are matched against before the ingress rule";
const D_INGRESS_ADDRESS: &str = "Address is a list containing ingress points for the load-balancer";
const D_INGRESS_PORTS: &str = "Ports of TLS configurations that open";
const D_IC_CONTROLLER: &str = "Controller that is responsible for handling this class";
const D_IC_PARAMETERS: &str = "A reference to a resource with additional parameters";
const D_NP_POD_SELECTOR: &str = "podSelector selects the pods to which this NetworkPolicy object applies. The array of rules is applied to any pods selected by this field. An empty selector matches all pods in the policy's namespace. Multiple network policies can select the same set of pods. In this case, the ingress rules for each are combined additively. This field is optional. If it is not specified, it defaults to an empty selector.";
const D_SERVICE_CIDRS: &str = "CIDRs defines the IP blocks in CIDR notation (e.g. \"192.168.0.0/24\" or \"2001:db8::/64\") from which to assign service cluster IPs. Max of two CIDRs is allowed, one of each IP family. This field is immutable.";
const D_IP_PARENT_REF: &str = "ParentRef references the resource that an IPAddress is attached to. An IPAddress must reference a parent object.";

/// The annotation that marks the cluster's default IngressClass (`networking/v1`
/// `AnnotationIsDefaultIngressClass`).
const DEFAULT_INGRESS_CLASS: &str = "ingressclass.kubernetes.io/is-default-class";

/// How many hosts an Ingress's `Hosts` cell lists before `+ N more...`.
const MAX_HOSTS: usize = 3;

/// The kinds printed here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    Ingress,
    IngressClass,
    NetworkPolicy,
    ServiceCidr,
    IpAddress,
}

/// Every (group, kind) printed here.
pub(super) const KINDS: &[(&str, &str)] = &[
    ("networking.k8s.io", "Ingress"),
    ("networking.k8s.io", "IngressClass"),
    ("networking.k8s.io", "NetworkPolicy"),
    ("networking.k8s.io", "ServiceCIDR"),
    ("networking.k8s.io", "IPAddress"),
];

/// The (group, kind)s of this module's groups that kube prints with the default convertor.
pub(super) const GENERIC: &[(&str, &str)] = &[];

/// The kind printed for `(group, kind)`, if it is one of this module's.
pub(super) fn kind_for(group: &str, kind: &str) -> Option<Kind> {
    Some(match (group, kind) {
        ("networking.k8s.io", "Ingress") => Kind::Ingress,
        ("networking.k8s.io", "IngressClass") => Kind::IngressClass,
        ("networking.k8s.io", "NetworkPolicy") => Kind::NetworkPolicy,
        ("networking.k8s.io", "ServiceCIDR") => Kind::ServiceCidr,
        ("networking.k8s.io", "IPAddress") => Kind::IpAddress,
        _ => return None,
    })
}

/// The column definitions of `kind`.
pub(super) fn columns(kind: Kind) -> Vec<Value> {
    match kind {
        Kind::Ingress => vec![
            name_col(),
            text("Class", D_INGRESS_CLASS),
            text("Hosts", D_INGRESS_HOSTS),
            text("Address", D_INGRESS_ADDRESS),
            text("Ports", D_INGRESS_PORTS),
            age_col(),
        ],
        Kind::IngressClass => vec![
            name_col(),
            text("Controller", D_IC_CONTROLLER),
            text("Parameters", D_IC_PARAMETERS),
            age_col(),
        ],
        Kind::NetworkPolicy => vec![
            name_col(),
            text("Pod-Selector", D_NP_POD_SELECTOR),
            age_col(),
        ],
        Kind::ServiceCidr => vec![name_col(), text("CIDRs", D_SERVICE_CIDRS), age_col()],
        // kube's IPAddress printer has no Age column.
        Kind::IpAddress => vec![name_col(), text("ParentRef", D_IP_PARENT_REF)],
    }
}

/// One row's cells for `obj`, one per column of [`columns`].
pub(super) fn cells(kind: Kind, obj: &Value, now: i64) -> Vec<Value> {
    match kind {
        Kind::Ingress => vec![
            json!(name_of(obj)),
            json!(ingress_class_name(obj)),
            json!(format_hosts(arr(obj.pointer("/spec/rules")))),
            json!(load_balancer_ingress(arr(
                obj.pointer("/status/loadBalancer/ingress")
            ))),
            json!(format_ports(arr(obj.pointer("/spec/tls")))),
            json!(age(obj, now)),
        ],
        Kind::IngressClass => vec![
            json!(name_marked_default(obj, &[DEFAULT_INGRESS_CLASS])),
            json!(str_at(obj, "/spec/controller")),
            json!(ingress_class_parameters(obj.pointer("/spec/parameters"))),
            json!(age(obj, now)),
        ],
        Kind::NetworkPolicy => vec![
            json!(name_of(obj)),
            json!(format_label_selector(obj.pointer("/spec/podSelector"))),
            json!(age(obj, now)),
        ],
        Kind::ServiceCidr => vec![
            json!(name_of(obj)),
            json!(join_strings(arr(obj.pointer("/spec/cidrs")), ",")),
            json!(age(obj, now)),
        ],
        Kind::IpAddress => vec![
            json!(name_of(obj)),
            json!(ip_address_parent(obj.pointer("/spec/parentRef"))),
        ],
    }
}

/// `spec.ingressClassName`, `<none>` when unset (an empty name prints as itself).
fn ingress_class_name(obj: &Value) -> &str {
    match present(obj.pointer("/spec/ingressClassName")) {
        Some(v) => v.as_str().unwrap_or(""),
        None => "<none>",
    }
}

/// kube's `formatHosts`: the first three rules' hosts (rules without a host are skipped), then
/// `+ N more...` where N counts every rule past the third, hosts or not; `*` when no rule
/// names a host.
fn format_hosts(rules: &[Value]) -> String {
    let mut list: Vec<&str> = Vec::new();
    let mut more = false;
    for rule in rules {
        if list.len() == MAX_HOSTS {
            more = true;
        }
        let host = str_at(rule, "/host");
        if !more && !host.is_empty() {
            list.push(host);
        }
    }
    if list.is_empty() {
        return "*".to_string();
    }
    let ret = list.join(",");
    if more {
        format!("{ret} + {} more...", rules.len() - MAX_HOSTS)
    } else {
        ret
    }
}

/// kube's `ingressLoadBalancerStatusStringer` in wide mode: each load-balancer ingress point's
/// IP, or its hostname when it has no IP, sorted and deduplicated, joined by `,`.
fn load_balancer_ingress(points: &[Value]) -> String {
    let mut set: Vec<&str> = points
        .iter()
        .map(|p| {
            let ip = str_at(p, "/ip");
            if ip.is_empty() {
                str_at(p, "/hostname")
            } else {
                ip
            }
        })
        .filter(|s| !s.is_empty())
        .collect();
    set.sort_unstable();
    set.dedup();
    set.join(",")
}

/// kube's `formatPorts`: `80, 443` when the Ingress has TLS configurations, else `80`.
fn format_ports(tls: &[Value]) -> &'static str {
    if tls.is_empty() { "80" } else { "80, 443" }
}

/// `kind[.apiGroup]/name` of an IngressClass's `spec.parameters`, `<none>` when unset. A set
/// `apiGroup` adds its dot even when empty, as kube's pointer test does.
fn ingress_class_parameters(params: Option<&Value>) -> String {
    let Some(p) = present(params) else {
        return "<none>".to_string();
    };
    let mut s = str_at(p, "/kind").to_string();
    if let Some(group) = present(p.get("apiGroup")) {
        s.push('.');
        s.push_str(group.as_str().unwrap_or(""));
    }
    s.push('/');
    s.push_str(str_at(p, "/name"));
    s
}

/// An IPAddress's parent as kube prints it: `resource[.group][/namespace]/name` in lower case
/// (`services/default/web`), `<none>` without a parent reference.
fn ip_address_parent(parent: Option<&Value>) -> String {
    let Some(p) = present(parent) else {
        return "<none>".to_string();
    };
    // schema.GroupResource.String(), lowered.
    let resource = str_at(p, "/resource");
    let group = str_at(p, "/group");
    let mut s = if group.is_empty() {
        go_lower(resource)
    } else {
        go_lower(&format!("{resource}.{group}"))
    };
    let namespace = str_at(p, "/namespace");
    if !namespace.is_empty() {
        s.push('/');
        s.push_str(namespace);
    }
    s.push('/');
    s.push_str(str_at(p, "/name"));
    s
}

#[cfg(test)]
mod tests {
    use super::super::testkit::{NOW, bare_row, shape, strings, ts};
    use super::super::{D_CREATED, column_definitions, has_printer, row_cells};
    use super::*;

    const G: &str = "networking.k8s.io";

    #[test]
    fn every_networking_kind_has_a_printer() {
        for (g, k) in KINDS {
            assert!(has_printer(g, k), "{g} {k}");
            assert!(kind_for(g, k).is_some(), "{g} {k}");
        }
        assert!(!has_printer(G, "Gateway"));
        assert!(!has_printer("extensions", "Ingress"));
    }

    #[test]
    fn ingress_columns_and_cells() {
        assert_eq!(
            shape(G, "Ingress"),
            strings(&[
                ("Name", "name"),
                ("Class", ""),
                ("Hosts", ""),
                ("Address", ""),
                ("Ports", ""),
                ("Age", "")
            ])
        );
        let defs = column_definitions(G, "Ingress");
        assert_eq!(defs[1]["description"], D_INGRESS_CLASS);
        assert_eq!(defs[5]["description"], D_CREATED);
        let ing = json!({
            "metadata": {"name": "web", "namespace": "default", "creationTimestamp": ts(300)},
            "spec": {
                "ingressClassName": "nginx",
                "tls": [{"hosts": ["a.example.com"], "secretName": "tls"}],
                "rules": [{"host": "a.example.com"}, {"host": "b.example.com"}]
            },
            "status": {"loadBalancer": {"ingress": [
                {"ip": "10.0.0.9"}, {"hostname": "lb.example.com"}, {"ip": "10.0.0.10"},
                {"ip": "10.0.0.9"}, {}
            ]}}
        });
        // Wide mode: the addresses are not clipped to 16 characters.
        assert_eq!(
            row_cells(G, "Ingress", &ing, NOW),
            json!([
                "web",
                "nginx",
                "a.example.com,b.example.com",
                "10.0.0.10,10.0.0.9,lb.example.com",
                "80, 443",
                "5m"
            ])
        );
        assert_eq!(
            bare_row(G, "Ingress"),
            json!(["x", "<none>", "*", "", "80", "<unknown>"])
        );
    }

    #[test]
    fn ingress_hosts_are_cut_after_three() {
        let rules = |hosts: &[&str]| -> Vec<Value> {
            hosts
                .iter()
                .map(|h| {
                    if h.is_empty() {
                        json!({})
                    } else {
                        json!({"host": h})
                    }
                })
                .collect()
        };
        assert_eq!(format_hosts(&rules(&["a", "b", "c"])), "a,b,c");
        assert_eq!(
            format_hosts(&rules(&["a", "b", "c", "d", "e"])),
            "a,b,c + 2 more..."
        );
        // A rule without a host is skipped but still counted past the third host.
        assert_eq!(
            format_hosts(&rules(&["", "a", "b", "c", ""])),
            "a,b,c + 2 more..."
        );
        assert_eq!(format_hosts(&rules(&["", ""])), "*");
        assert_eq!(format_hosts(&rules(&["a", ""])), "a");
    }

    #[test]
    fn ingress_class_cells() {
        assert_eq!(
            shape(G, "IngressClass"),
            strings(&[
                ("Name", "name"),
                ("Controller", ""),
                ("Parameters", ""),
                ("Age", "")
            ])
        );
        let ic = json!({
            "metadata": {"name": "nginx", "creationTimestamp": ts(7200),
                         "annotations": {"ingressclass.kubernetes.io/is-default-class": "true"}},
            "spec": {"controller": "k8s.io/ingress-nginx",
                     "parameters": {"apiGroup": "k8s.example.com", "kind": "IngressParameters", "name": "external-lb"}}
        });
        assert_eq!(
            row_cells(G, "IngressClass", &ic, NOW),
            json!([
                "nginx (default)",
                "k8s.io/ingress-nginx",
                "IngressParameters.k8s.example.com/external-lb",
                "120m"
            ])
        );
        let not_default = json!({
            "metadata": {"name": "b", "annotations": {"ingressclass.kubernetes.io/is-default-class": "True"}},
            "spec": {"controller": "c", "parameters": {"kind": "ConfigMap", "name": "p", "scope": "Namespace", "namespace": "ns"}}
        });
        let cells = row_cells(G, "IngressClass", &not_default, NOW);
        assert_eq!((&cells[0], &cells[2]), (&json!("b"), &json!("ConfigMap/p")));
        let empty_group = json!({"metadata": {"name": "c"}, "spec": {"parameters": {"apiGroup": "", "kind": "K", "name": "n"}}});
        assert_eq!(row_cells(G, "IngressClass", &empty_group, NOW)[2], "K./n");
        assert_eq!(
            bare_row(G, "IngressClass"),
            json!(["x", "", "<none>", "<unknown>"])
        );
    }

    #[test]
    fn network_policy_cells() {
        assert_eq!(
            shape(G, "NetworkPolicy"),
            strings(&[("Name", "name"), ("Pod-Selector", ""), ("Age", "")])
        );
        assert_eq!(
            column_definitions(G, "NetworkPolicy")[1]["description"],
            D_NP_POD_SELECTOR
        );
        let np = json!({
            "metadata": {"name": "deny", "creationTimestamp": ts(45)},
            "spec": {"podSelector": {"matchLabels": {"role": "db"},
                                     "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["web"]}]},
                     "policyTypes": ["Ingress"]}
        });
        assert_eq!(
            row_cells(G, "NetworkPolicy", &np, NOW),
            json!(["deny", "role=db,tier notin (web)", "45s"])
        );
        let all = json!({"metadata": {"name": "all"}, "spec": {"podSelector": {}}});
        assert_eq!(row_cells(G, "NetworkPolicy", &all, NOW)[1], "<none>");
        let bad = json!({"metadata": {"name": "b"}, "spec": {"podSelector": {"matchExpressions": [{"key": "a", "operator": "Gt"}]}}});
        assert_eq!(row_cells(G, "NetworkPolicy", &bad, NOW)[1], "<error>");
        assert_eq!(
            bare_row(G, "NetworkPolicy"),
            json!(["x", "<none>", "<unknown>"])
        );
    }

    #[test]
    fn service_cidr_and_ip_address_cells() {
        assert_eq!(
            shape(G, "ServiceCIDR"),
            strings(&[("Name", "name"), ("CIDRs", ""), ("Age", "")])
        );
        let cidr = json!({"metadata": {"name": "kubernetes", "creationTimestamp": ts(86_400 * 3)},
                          "spec": {"cidrs": ["10.96.0.0/16", "fd00:10:96::/112"]}});
        assert_eq!(
            row_cells(G, "ServiceCIDR", &cidr, NOW),
            json!(["kubernetes", "10.96.0.0/16,fd00:10:96::/112", "3d"])
        );
        assert_eq!(bare_row(G, "ServiceCIDR"), json!(["x", "", "<unknown>"]));

        assert_eq!(
            shape(G, "IPAddress"),
            strings(&[("Name", "name"), ("ParentRef", "")])
        );
        assert_eq!(
            column_definitions(G, "IPAddress")[1]["description"],
            D_IP_PARENT_REF
        );
        let ip = json!({"metadata": {"name": "10.96.0.1", "creationTimestamp": ts(10)},
                        "spec": {"parentRef": {"group": "", "resource": "services", "namespace": "default", "name": "kubernetes"}}});
        assert_eq!(
            row_cells(G, "IPAddress", &ip, NOW),
            json!(["10.96.0.1", "services/default/kubernetes"])
        );
        let grouped = json!({"metadata": {"name": "ip"},
                             "spec": {"parentRef": {"group": "Gateway.Networking.k8s.io", "resource": "Gateways", "name": "gw"}}});
        assert_eq!(
            row_cells(G, "IPAddress", &grouped, NOW)[1],
            "gateways.gateway.networking.k8s.io/gw"
        );
        assert_eq!(bare_row(G, "IPAddress"), json!(["x", "<none>"]));
    }
}
