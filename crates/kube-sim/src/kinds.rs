//! The resource types the simulator serves: built-in kinds plus CRD-like ones declared at start.
//!
//! Everything the HTTP layer, discovery and storage need to know about a type lives here, so that
//! serving another kind is one table entry. Its per-kind behaviour (write rules, printer columns,
//! strategic-merge metadata, selectable fields) lives in `semantics`, `table`, `patch` and
//! kube-wire's `selector::selectable`, each with a generic default for kinds it does not list.
//!
//! The [`Registry`] is fixed when the simulator starts: no type is added or removed while it runs.
//! Custom types are also described by `CustomResourceDefinition` objects
//! ([`CustomType::crd_object`], stored at start and served like any object), whose printer
//! columns the simulator prints custom resources' Tables with: those may change while it runs.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Value, json};

/// One group/version/resource the simulator serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceType {
    /// API group; empty for the core group.
    pub group: String,
    /// API version, e.g. `v1`.
    pub version: String,
    /// Plural resource name, e.g. `pods`.
    pub resource: String,
    /// Singular resource name, e.g. `pod`.
    pub singular: String,
    /// Kind, e.g. `Pod`.
    pub kind: String,
    /// Namespace-scoped (true) or cluster-scoped.
    pub namespaced: bool,
    /// kubectl short names.
    pub short_names: Vec<String>,
    /// Discovery categories (`all`: listed by `kubectl get all`).
    pub categories: Vec<String>,
    /// Built into kube-apiserver (list items carry no kind/apiVersion) or custom (they do).
    pub builtin: bool,
    /// Has a `/status` subresource: the main endpoint ignores status changes and vice versa.
    pub status_subresource: bool,
    /// Has a `/scale` subresource (`autoscaling/v1` `Scale` of `spec.replicas`).
    pub scale_subresource: bool,
    /// Extra selectable fields (CRD `selectableFields`, KEP-4358), as dotted JSON paths.
    pub selectable_fields: Vec<String>,
    /// Index of this type in the registry (dense, stable for the simulator's lifetime).
    pub index: usize,
}

impl ResourceType {
    /// `v1` or `group/version`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `PodList`.
    pub fn list_kind(&self) -> String {
        format!("{}List", self.kind)
    }

    /// `pods` or `widgets.example.com`, as kube names the resource in messages.
    pub fn group_resource(&self) -> String {
        kube_wire::status::group_resource(&self.group, &self.resource)
    }

    /// The prefix `{"kind":"Pod","apiVersion":"v1",` that turns a stored body (which starts with
    /// `{`) into a full object as a watch event or a GET carries it.
    pub fn type_meta_prefix(&self) -> String {
        format!(
            "{{\"kind\":\"{}\",\"apiVersion\":\"{}\",",
            self.kind,
            self.api_version()
        )
    }

    /// Whether a name must be a DNS-1123 label (namespaces, services) rather than a subdomain.
    pub fn name_is_label(&self) -> bool {
        self.group.is_empty() && (self.resource == "namespaces" || self.resource == "services")
    }
}

/// One of a custom type's `additionalPrinterColumns` (`apiextensions.k8s.io/v1`
/// `CustomResourceColumnDefinition`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrinterColumn {
    /// Column name.
    pub name: String,
    /// `integer`, `number`, `string`, `boolean` or `date`.
    pub ty: String,
    /// The JSONPath of the cell, e.g. `.spec.replicas`.
    pub json_path: String,
    /// 0: shown by `kubectl get`; 1 and more: only with `-o wide`.
    pub priority: i32,
    /// Optional format (`int32`, `byte`, …); empty if none.
    pub format: String,
    /// Optional description; empty if none (kube then describes the JSONPath).
    pub description: String,
}

impl PrinterColumn {
    /// A column of type `ty` named `name`, with cells from `json_path`, priority 0.
    pub fn new(name: &str, ty: &str, json_path: &str) -> Self {
        PrinterColumn {
            name: name.into(),
            ty: ty.into(),
            json_path: json_path.into(),
            priority: 0,
            format: String::new(),
            description: String::new(),
        }
    }

    /// The same column with this priority.
    pub fn priority(mut self, priority: i32) -> Self {
        self.priority = priority;
        self
    }

    /// The column as a CRD carries it (`omitempty` members left out, as kube encodes them).
    pub fn to_value(&self) -> Value {
        let mut m = serde_json::Map::new();
        m.insert("name".into(), json!(self.name));
        m.insert("type".into(), json!(self.ty));
        if !self.format.is_empty() {
            m.insert("format".into(), json!(self.format));
        }
        if !self.description.is_empty() {
            m.insert("description".into(), json!(self.description));
        }
        if self.priority != 0 {
            m.insert("priority".into(), json!(self.priority));
        }
        m.insert("jsonPath".into(), json!(self.json_path));
        Value::Object(m)
    }
}

impl std::str::FromStr for PrinterColumn {
    type Err = String;

    /// `Name:type:priority:jsonPath` (the JSONPath last: it may contain `:`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut parts = s.splitn(4, ':');
        let (Some(name), Some(ty), Some(priority), Some(path)) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(format!("{s:?}: expected Name:type:priority:jsonPath"));
        };
        if !matches!(ty, "integer" | "number" | "string" | "boolean" | "date") {
            return Err(format!("{s:?}: unknown column type {ty:?}"));
        }
        let priority = priority
            .parse()
            .map_err(|_| format!("{s:?}: priority {priority:?} is not a number"))?;
        if name.is_empty() || !path.starts_with('.') {
            return Err(format!(
                "{s:?}: a column needs a name and a JSONPath starting with '.'"
            ));
        }
        Ok(PrinterColumn::new(name, ty, path).priority(priority))
    }
}

/// A CRD-like type declared on the command line or in the simulator config:
/// `group/version/resource` with kind and scope, e.g. `example.com/v1/widgets=Widget,namespaced`,
/// and optionally selectable fields and printer columns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CustomType {
    /// Group (must be non-empty and contain a dot, as CRD groups do).
    pub group: String,
    /// Version.
    pub version: String,
    /// Plural resource.
    pub resource: String,
    /// Kind.
    pub kind: String,
    /// Namespace-scoped.
    pub namespaced: bool,
    /// Selectable fields.
    pub selectable_fields: Vec<String>,
    /// `additionalPrinterColumns` of this version (none: kube prints Name and Age).
    pub printer_columns: Vec<PrinterColumn>,
}

impl CustomType {
    /// The same type with one more printer column.
    pub fn with_column(mut self, column: PrinterColumn) -> Self {
        self.printer_columns.push(column);
        self
    }

    /// `widgets.example.com`: the name of the type's CRD.
    pub fn crd_name(&self) -> String {
        format!("{}.{}", self.resource, self.group)
    }

    /// The `CustomResourceDefinition` (`apiextensions.k8s.io/v1`, without type meta) that
    /// describes `versions` (the declared types of one group and resource, the first one the
    /// storage version), as kube-apiserver stores an established CRD.
    pub fn crd_object(versions: &[&CustomType]) -> Option<Value> {
        let first = versions.first()?;
        let names = json!({
            "plural": first.resource,
            "singular": first.kind.to_ascii_lowercase(),
            "kind": first.kind,
            "listKind": format!("{}List", first.kind),
        });
        let vs: Vec<Value> = versions
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let mut v = json!({
                    "name": t.version,
                    "served": true,
                    "storage": i == 0,
                    "schema": {"openAPIV3Schema": {
                        "type": "object",
                        "x-kubernetes-preserve-unknown-fields": true,
                    }},
                    "subresources": {"status": {}},
                });
                if !t.printer_columns.is_empty() {
                    v["additionalPrinterColumns"] = Value::Array(
                        t.printer_columns
                            .iter()
                            .map(PrinterColumn::to_value)
                            .collect(),
                    );
                }
                if !t.selectable_fields.is_empty() {
                    v["selectableFields"] = Value::Array(
                        t.selectable_fields
                            .iter()
                            .map(|f| json!({"jsonPath": format!(".{f}")}))
                            .collect(),
                    );
                }
                v
            })
            .collect();
        let condition = |ty: &str, reason: &str, message: &str| {
            json!({"type": ty, "status": "True", "lastTransitionTime": crate::util::rfc3339(crate::util::now_unix()),
                   "reason": reason, "message": message})
        };
        Some(json!({
            "metadata": {"name": first.crd_name()},
            "spec": {
                "group": first.group,
                "names": names,
                "scope": if first.namespaced { "Namespaced" } else { "Cluster" },
                "versions": vs,
                "conversion": {"strategy": "None"},
            },
            "status": {
                "conditions": [
                    condition("NamesAccepted", "NoConflicts", "no conflicts found"),
                    condition("Established", "InitialNamesAccepted", "the initial names have been accepted"),
                ],
                "acceptedNames": names,
                "storedVersions": [first.version],
            },
        }))
    }
}

impl std::str::FromStr for CustomType {
    type Err = String;

    /// `group/version/resource=Kind[,namespaced|,cluster][,field=spec.x][,column=Name:type:priority:.json.path]...`
    /// (a column's JSONPath cannot contain `,`: declare such columns with [`CustomType::with_column`]).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (gvr, rest) = s
            .split_once('=')
            .ok_or_else(|| format!("{s:?}: expected group/version/resource=Kind[,cluster]"))?;
        let parts: Vec<&str> = gvr.split('/').collect();
        let [group, version, resource] = parts[..] else {
            return Err(format!("{s:?}: expected group/version/resource before '='"));
        };
        if group.is_empty() || !group.contains('.') {
            return Err(format!(
                "{s:?}: a custom group must be a domain such as example.com"
            ));
        }
        let mut opts = rest.split(',');
        let kind = opts.next().unwrap_or_default().to_string();
        if kind.is_empty() || !kind.starts_with(|c: char| c.is_ascii_uppercase()) {
            return Err(format!("{s:?}: kind must start with an upper-case letter"));
        }
        let mut ct = CustomType {
            group: group.into(),
            version: version.into(),
            resource: resource.into(),
            kind,
            namespaced: true,
            selectable_fields: Vec::new(),
            printer_columns: Vec::new(),
        };
        for opt in opts {
            match opt {
                "namespaced" => ct.namespaced = true,
                "cluster" => ct.namespaced = false,
                f if f.starts_with("field=") => ct.selectable_fields.push(f[6..].to_string()),
                c if c.starts_with("column=") => ct.printer_columns.push(c[7..].parse()?),
                other => return Err(format!("{s:?}: unknown option {other:?}")),
            }
        }
        Ok(ct)
    }
}

/// All types served, looked up by (group, version, resource).
#[derive(Debug, Clone)]
pub struct Registry {
    types: Vec<Arc<ResourceType>>,
    by_gvr: HashMap<(String, String, String), usize>,
}

/// A built-in type: the facts discovery reports about it (kube-apiserver 1.36's `APIResource`s).
struct Builtin {
    group: &'static str,
    version: &'static str,
    resource: &'static str,
    singular: &'static str,
    kind: &'static str,
    namespaced: bool,
    short_names: &'static [&'static str],
    categories: &'static [&'static str],
    status: bool,
    scale: bool,
}

/// A namespaced built-in type with no short name, category or subresource.
const fn builtin(
    group: &'static str,
    resource: &'static str,
    singular: &'static str,
    kind: &'static str,
) -> Builtin {
    Builtin {
        group,
        version: "v1",
        resource,
        singular,
        kind,
        namespaced: true,
        short_names: &[],
        categories: &[],
        status: false,
        scale: false,
    }
}

impl Builtin {
    const fn cluster(mut self) -> Self {
        self.namespaced = false;
        self
    }
    const fn short(mut self, names: &'static [&'static str]) -> Self {
        self.short_names = names;
        self
    }
    /// In the `all` category (`kubectl get all`).
    const fn all(mut self) -> Self {
        self.categories = &["all"];
        self
    }
    const fn status(mut self) -> Self {
        self.status = true;
        self
    }
    const fn scale(mut self) -> Self {
        self.scale = true;
        self
    }
    const fn version(mut self, version: &'static str) -> Self {
        self.version = version;
        self
    }
}

/// In kube-apiserver's group order (`/apis` lists `apps`, `autoscaling`, `batch`, `policy`,
/// `rbac.authorization.k8s.io`, `apiextensions.k8s.io`, `coordination.k8s.io`,
/// `discovery.k8s.io` in this order), each group's resources sorted by name as its discovery
/// document lists them (the core group too).
const BUILTINS: &[Builtin] = &[
    builtin("", "configmaps", "configmap", "ConfigMap").short(&["cm"]),
    builtin("", "endpoints", "endpoints", "Endpoints").short(&["ep"]),
    builtin("", "events", "event", "Event").short(&["ev"]),
    builtin("", "namespaces", "namespace", "Namespace")
        .cluster()
        .short(&["ns"])
        .status(),
    builtin("", "nodes", "node", "Node")
        .cluster()
        .short(&["no"])
        .status(),
    builtin(
        "",
        "persistentvolumeclaims",
        "persistentvolumeclaim",
        "PersistentVolumeClaim",
    )
    .short(&["pvc"])
    .status(),
    builtin("", "pods", "pod", "Pod")
        .short(&["po"])
        .all()
        .status(),
    builtin("", "secrets", "secret", "Secret"),
    builtin("", "serviceaccounts", "serviceaccount", "ServiceAccount").short(&["sa"]),
    builtin("", "services", "service", "Service")
        .short(&["svc"])
        .all()
        .status(),
    builtin(
        "apps",
        "controllerrevisions",
        "controllerrevision",
        "ControllerRevision",
    ),
    builtin("apps", "daemonsets", "daemonset", "DaemonSet")
        .short(&["ds"])
        .all()
        .status(),
    builtin("apps", "deployments", "deployment", "Deployment")
        .short(&["deploy"])
        .all()
        .status()
        .scale(),
    builtin("apps", "replicasets", "replicaset", "ReplicaSet")
        .short(&["rs"])
        .all()
        .status()
        .scale(),
    builtin("apps", "statefulsets", "statefulset", "StatefulSet")
        .short(&["sts"])
        .all()
        .status()
        .scale(),
    // kube serves autoscaling/v1 too (the same objects); the simulator serves v2 only.
    builtin(
        "autoscaling",
        "horizontalpodautoscalers",
        "horizontalpodautoscaler",
        "HorizontalPodAutoscaler",
    )
    .version("v2")
    .short(&["hpa"])
    .all()
    .status(),
    builtin("batch", "cronjobs", "cronjob", "CronJob")
        .short(&["cj"])
        .all()
        .status(),
    builtin("batch", "jobs", "job", "Job").all().status(),
    builtin(
        "policy",
        "poddisruptionbudgets",
        "poddisruptionbudget",
        "PodDisruptionBudget",
    )
    .short(&["pdb"])
    .status(),
    builtin(
        RBAC_GROUP,
        "clusterrolebindings",
        "clusterrolebinding",
        "ClusterRoleBinding",
    )
    .cluster(),
    builtin(RBAC_GROUP, "clusterroles", "clusterrole", "ClusterRole").cluster(),
    builtin(RBAC_GROUP, "rolebindings", "rolebinding", "RoleBinding"),
    builtin(RBAC_GROUP, "roles", "role", "Role"),
    builtin(
        CRD_GROUP,
        CRD_RESOURCE,
        "customresourcedefinition",
        "CustomResourceDefinition",
    )
    .cluster()
    .short(&["crd", "crds"])
    .status(),
    builtin("coordination.k8s.io", "leases", "lease", "Lease"),
    builtin(
        "discovery.k8s.io",
        "endpointslices",
        "endpointslice",
        "EndpointSlice",
    ),
];

/// The RBAC group (Roles, ClusterRoles and their bindings).
const RBAC_GROUP: &str = "rbac.authorization.k8s.io";
/// The group of `CustomResourceDefinition`s.
pub const CRD_GROUP: &str = "apiextensions.k8s.io";
/// Their resource.
pub const CRD_RESOURCE: &str = "customresourcedefinitions";

impl Registry {
    /// The built-in kinds plus `custom`.
    pub fn new(custom: &[CustomType]) -> Result<Self, String> {
        let mut types = Vec::new();
        for b in BUILTINS {
            types.push(ResourceType {
                group: b.group.into(),
                version: b.version.into(),
                resource: b.resource.into(),
                singular: b.singular.into(),
                kind: b.kind.into(),
                namespaced: b.namespaced,
                short_names: b.short_names.iter().map(|s| s.to_string()).collect(),
                categories: b.categories.iter().map(|s| s.to_string()).collect(),
                builtin: true,
                status_subresource: b.status,
                scale_subresource: b.scale,
                selectable_fields: Vec::new(),
                index: 0,
            });
        }
        for c in custom {
            types.push(ResourceType {
                group: c.group.clone(),
                version: c.version.clone(),
                resource: c.resource.clone(),
                singular: c.kind.to_ascii_lowercase(),
                kind: c.kind.clone(),
                namespaced: c.namespaced,
                short_names: Vec::new(),
                categories: vec!["all".to_string()],
                builtin: false,
                status_subresource: true,
                scale_subresource: false,
                selectable_fields: c.selectable_fields.clone(),
                index: 0,
            });
        }
        let mut by_gvr = HashMap::new();
        let mut out = Vec::new();
        for (i, mut t) in types.into_iter().enumerate() {
            t.index = i;
            let key = (t.group.clone(), t.version.clone(), t.resource.clone());
            if by_gvr.insert(key, i).is_some() {
                return Err(format!(
                    "resource {}/{}/{} declared twice",
                    t.group, t.version, t.resource
                ));
            }
            out.push(Arc::new(t));
        }
        Ok(Registry { types: out, by_gvr })
    }

    /// Look up a type.
    pub fn get(&self, group: &str, version: &str, resource: &str) -> Option<&Arc<ResourceType>> {
        self.by_gvr
            .get(&(group.to_string(), version.to_string(), resource.to_string()))
            .map(|&i| &self.types[i])
    }

    /// Look up by kind and apiVersion (`v1` or `group/version`).
    pub fn by_kind(&self, api_version: &str, kind: &str) -> Option<&Arc<ResourceType>> {
        self.types
            .iter()
            .find(|t| t.kind == kind && t.api_version() == api_version)
    }

    /// Core `pods` etc. by plural name.
    pub fn core(&self, resource: &str) -> &Arc<ResourceType> {
        self.get("", "v1", resource)
            .expect("built-in core resource is always registered")
    }

    /// All types in registration order.
    pub fn all(&self) -> &[Arc<ResourceType>] {
        &self.types
    }

    /// Groups other than core, in first-seen order, each with its versions.
    pub fn groups(&self) -> Vec<(String, Vec<String>)> {
        let mut out: Vec<(String, Vec<String>)> = Vec::new();
        for t in &self.types {
            if t.group.is_empty() {
                continue;
            }
            match out.iter_mut().find(|(g, _)| *g == t.group) {
                Some((_, vs)) => {
                    if !vs.contains(&t.version) {
                        vs.push(t.version.clone())
                    }
                }
                None => out.push((t.group.clone(), vec![t.version.clone()])),
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_custom_types() {
        let c: CustomType = "example.com/v1/widgets=Widget,cluster,field=spec.color"
            .parse()
            .unwrap();
        assert_eq!(c.group, "example.com");
        assert!(!c.namespaced);
        assert_eq!(c.selectable_fields, vec!["spec.color".to_string()]);
        let c: CustomType =
            "example.com/v1/widgets=Widget,column=Ready:string:1:.status.conditions[?(@.type==\"Ready\")].status"
                .parse()
                .unwrap();
        assert_eq!(
            c.printer_columns,
            [PrinterColumn::new(
                "Ready",
                "string",
                ".status.conditions[?(@.type==\"Ready\")].status"
            )
            .priority(1)]
        );
        assert!(
            "example.com/v1/widgets=Widget,column=A:text:0:.a"
                .parse::<CustomType>()
                .is_err()
        );
        assert!("widgets=Widget".parse::<CustomType>().is_err());
        assert!("example/v1/widgets=Widget".parse::<CustomType>().is_err());
        assert!(
            "example.com/v1/widgets=widget"
                .parse::<CustomType>()
                .is_err()
        );
    }

    #[test]
    fn registry_rejects_duplicates_and_finds_types() {
        let c: CustomType = "example.com/v1/widgets=Widget".parse().unwrap();
        let r = Registry::new(std::slice::from_ref(&c)).unwrap();
        assert_eq!(r.core("pods").kind, "Pod");
        assert_eq!(
            r.get("discovery.k8s.io", "v1", "endpointslices")
                .unwrap()
                .api_version(),
            "discovery.k8s.io/v1"
        );
        assert_eq!(
            r.by_kind("example.com/v1", "Widget").unwrap().resource,
            "widgets"
        );
        let deploy = r.get("apps", "v1", "deployments").unwrap();
        assert!(deploy.namespaced && deploy.status_subresource && deploy.scale_subresource);
        assert_eq!(deploy.short_names, ["deploy"]);
        assert_eq!(deploy.categories, ["all"]);
        let lease = r.by_kind("coordination.k8s.io/v1", "Lease").unwrap();
        assert!(!lease.status_subresource && !lease.scale_subresource);
        assert!(lease.categories.is_empty());
        assert!(!r.get("apps", "v1", "daemonsets").unwrap().scale_subresource);
        assert_eq!(
            r.by_kind("batch/v1", "CronJob").unwrap().short_names,
            ["cj"]
        );
        assert_eq!(
            r.by_kind("example.com/v1", "Widget").unwrap().categories,
            ["all"]
        );
        assert!(Registry::new(&[c.clone(), c]).is_err());
        assert_eq!(
            r.core("pods").type_meta_prefix(),
            r#"{"kind":"Pod","apiVersion":"v1","#
        );
    }
}
