//! The resource types the simulator serves: built-in kinds, CRD-like ones declared at start, and
//! the custom resources of `CustomResourceDefinition`s created while it runs.
//!
//! Everything the HTTP layer, discovery and storage need to know about a type lives here, so that
//! serving another kind is one table entry. Its per-kind behaviour (write rules, printer columns,
//! strategic-merge metadata, selectable fields) lives in `semantics`, `table`, `patch` and
//! kube-wire's `selector::selectable`, each with a generic default for kinds it does not list.
//!
//! The [`Registry`] changes while the simulator runs, as kube-apiserver's apiextensions server
//! does: a CRD's served versions are added, changed and removed with the CRD
//! ([`Registry::set_custom`], driven by `ops`). Every type has an index (its slot) for the
//! store's and the counters' per-resource tables: indices are never reused, a removed type's
//! slot stays unused and a type served again gets a new one. Custom types declared at start are
//! also described by `CustomResourceDefinition` objects ([`CustomType::crd_object`], stored at
//! start and served like any object: deleting one stops serving its types), unless declared
//! [`served_without_crd`](CustomType::served_without_crd) (an aggregated API's types). The
//! simulator prints custom resources' Tables with the printer columns of their stored CRD.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::RwLock;

use serde_json::{Value, json};

mod builtins;
use builtins::BUILTINS;

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
    /// Has an `/approval` subresource (CertificateSigningRequests: writes only
    /// `status.conditions`).
    pub approval_subresource: bool,
    /// Extra selectable fields (CRD `selectableFields`, KEP-4358), as dotted JSON paths.
    pub selectable_fields: Vec<String>,
    /// Served by an aggregated API server (an `APIService`, as `metrics.k8s.io` is): a custom
    /// type with no `CustomResourceDefinition`.
    pub aggregated: bool,
    /// Index of this type in the registry (its slot; never reused while the simulator runs).
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

    /// Whether any name that is a valid path segment is allowed (kube's `ValidateRBACName`,
    /// `path.IsValidPathSegmentName`): the RBAC kinds, whose built-in objects are named
    /// `system:kube-scheduler`, `cluster-admin`, …
    pub fn name_is_path_segment(&self) -> bool {
        self.builtin && self.group == "rbac.authorization.k8s.io"
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
    /// Served as an aggregated API server's type would be (an `APIService`-backed group such as
    /// `metrics.k8s.io`): discovery, reads, writes and watches as any custom type, but no
    /// `CustomResourceDefinition` is stored for it (so no CRD can be created for its group and
    /// resource either). The `aggregated` option of the string form.
    pub served_without_crd: bool,
}

impl CustomType {
    /// The same type with one more printer column.
    pub fn with_column(mut self, column: PrinterColumn) -> Self {
        self.printer_columns.push(column);
        self
    }

    /// The same type, served without a CRD (see [`CustomType::served_without_crd`]).
    pub fn without_crd(mut self) -> Self {
        self.served_without_crd = true;
        self
    }

    /// The type as the registry serves it (before it is given an index).
    pub fn resource_type(&self) -> ResourceType {
        ResourceType {
            group: self.group.clone(),
            version: self.version.clone(),
            resource: self.resource.clone(),
            singular: self.kind.to_ascii_lowercase(),
            kind: self.kind.clone(),
            namespaced: self.namespaced,
            short_names: Vec::new(),
            categories: vec!["all".to_string()],
            builtin: false,
            status_subresource: true,
            scale_subresource: false,
            approval_subresource: false,
            selectable_fields: self.selectable_fields.clone(),
            aggregated: self.served_without_crd,
            index: 0,
        }
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
            "categories": ["all"],
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
        let mut crd = json!({
            "metadata": {"name": first.crd_name()},
            "spec": {
                "group": first.group,
                "names": names,
                "scope": if first.namespaced { "Namespaced" } else { "Cluster" },
                "versions": vs,
                "conversion": {"strategy": "None"},
            },
        });
        crate::semantics::crds::set_status(&mut crd, None);
        Some(crd)
    }
}

impl std::str::FromStr for CustomType {
    type Err = String;

    /// `group/version/resource=Kind[,namespaced|,cluster][,aggregated][,field=spec.x][,column=Name:type:priority:.json.path]...`
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
            served_without_crd: false,
        };
        for opt in opts {
            match opt {
                "namespaced" => ct.namespaced = true,
                "aggregated" => ct.served_without_crd = true,
                "cluster" => ct.namespaced = false,
                f if f.starts_with("field=") => ct.selectable_fields.push(f[6..].to_string()),
                c if c.starts_with("column=") => ct.printer_columns.push(c[7..].parse()?),
                other => return Err(format!("{s:?}: unknown option {other:?}")),
            }
        }
        Ok(ct)
    }
}

/// All types served, looked up by (group, version, resource). Changes while the simulator runs
/// (see the module documentation); every accessor answers from the current state.
#[derive(Debug)]
pub struct Registry {
    slots: RwLock<Slots>,
}

#[derive(Debug, Default)]
struct Slots {
    /// Every type ever registered, by index; `live[i]` says whether it is still served.
    types: Vec<Arc<ResourceType>>,
    live: Vec<bool>,
    by_gvr: HashMap<(String, String, String), usize>,
}

impl Slots {
    fn push(&mut self, mut t: ResourceType) -> Result<Arc<ResourceType>, String> {
        let key = (t.group.clone(), t.version.clone(), t.resource.clone());
        if self.by_gvr.contains_key(&key) {
            return Err(format!(
                "resource {}/{}/{} declared twice",
                t.group, t.version, t.resource
            ));
        }
        t.index = self.types.len();
        let t = Arc::new(t);
        self.by_gvr.insert(key, t.index);
        self.types.push(t.clone());
        self.live.push(true);
        Ok(t)
    }

    fn live(&self) -> impl Iterator<Item = &Arc<ResourceType>> {
        self.types
            .iter()
            .zip(&self.live)
            .filter(|(_, l)| **l)
            .map(|(t, _)| t)
    }

    /// The types served for `group` and `resource` (a CRD's versions).
    fn versions_of(&self, group: &str, resource: &str) -> Vec<Arc<ResourceType>> {
        self.live()
            .filter(|t| t.group == group && t.resource == resource)
            .cloned()
            .collect()
    }
}

/// What [`Registry::set_custom`] changed.
#[derive(Debug, Default)]
pub struct CustomChange {
    /// Versions served from now on (new slots).
    pub added: Vec<Arc<ResourceType>>,
    /// Versions still served whose description changed (same slot, new description).
    pub changed: Vec<Arc<ResourceType>>,
    /// Versions no longer served (their slots stay unused).
    pub removed: Vec<Arc<ResourceType>>,
}

/// The group of `CustomResourceDefinition`s.
pub const CRD_GROUP: &str = "apiextensions.k8s.io";
/// Their resource.
pub const CRD_RESOURCE: &str = "customresourcedefinitions";

impl Registry {
    /// The built-in kinds plus `custom`.
    pub fn new(custom: &[CustomType]) -> Result<Self, String> {
        let mut slots = Slots::default();
        for b in BUILTINS {
            slots.push(ResourceType {
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
                approval_subresource: b.approval,
                selectable_fields: Vec::new(),
                aggregated: false,
                index: 0,
            })?;
        }
        for c in custom {
            slots.push(c.resource_type())?;
        }
        Ok(Registry {
            slots: RwLock::new(slots),
        })
    }

    /// Look up a served type.
    pub fn get(&self, group: &str, version: &str, resource: &str) -> Option<Arc<ResourceType>> {
        let slots = self.slots.read();
        slots
            .by_gvr
            .get(&(group.to_string(), version.to_string(), resource.to_string()))
            .map(|&i| slots.types[i].clone())
    }

    /// Look up a served type by kind and apiVersion (`v1` or `group/version`).
    pub fn by_kind(&self, api_version: &str, kind: &str) -> Option<Arc<ResourceType>> {
        self.slots
            .read()
            .live()
            .find(|t| t.kind == kind && t.api_version() == api_version)
            .cloned()
    }

    /// Core `pods` etc. by plural name.
    pub fn core(&self, resource: &str) -> Arc<ResourceType> {
        self.get("", "v1", resource)
            .expect("built-in core resource is always registered")
    }

    /// All types served now, in registration order.
    pub fn all(&self) -> Vec<Arc<ResourceType>> {
        self.slots.read().live().cloned().collect()
    }

    /// Every type ever registered, by index, each with whether it is still served.
    pub fn slots(&self) -> Vec<(Arc<ResourceType>, bool)> {
        let slots = self.slots.read();
        slots
            .types
            .iter()
            .cloned()
            .zip(slots.live.iter().copied())
            .collect()
    }

    /// How many slots exist (the next type registered gets this index).
    pub fn slot_count(&self) -> usize {
        self.slots.read().types.len()
    }

    /// The custom types served now for `group` and `resource` (one per version).
    pub fn custom_versions(&self, group: &str, resource: &str) -> Vec<Arc<ResourceType>> {
        self.slots.read().versions_of(group, resource)
    }

    /// Whether a `CustomResourceDefinition` may serve `group`/`resource`: not if a built-in
    /// type or an aggregated API's type already does.
    pub fn check_custom(&self, group: &str, resource: &str) -> Result<(), String> {
        Self::check(&self.slots.read(), group, resource)
    }

    fn check(slots: &Slots, group: &str, resource: &str) -> Result<(), String> {
        match slots
            .versions_of(group, resource)
            .iter()
            .find(|t| t.builtin || t.aggregated)
        {
            Some(t) if t.builtin => Err(format!(
                "the built-in resource {} is served already",
                t.group_resource()
            )),
            Some(t) => Err(format!(
                "the resource {} is served by an aggregated API already",
                t.group_resource()
            )),
            None => Ok(()),
        }
    }

    /// Serves exactly `versions` (the served versions of one CRD: `group`, `resource`, one
    /// type per version; none: stop serving the CRD's types) from now on. A version served
    /// before keeps its slot (with the new description if it changed); a new version gets a
    /// new slot; a version no longer listed stops being served.
    pub fn set_custom(
        &self,
        group: &str,
        resource: &str,
        versions: Vec<ResourceType>,
    ) -> Result<CustomChange, String> {
        let mut slots = self.slots.write();
        Self::check(&slots, group, resource)?;
        let mut change = CustomChange::default();
        let before = slots.versions_of(group, resource);
        for old in &before {
            if !versions.iter().any(|v| v.version == old.version) {
                slots.live[old.index] = false;
                slots.by_gvr.remove(&(
                    old.group.clone(),
                    old.version.clone(),
                    old.resource.clone(),
                ));
                change.removed.push(old.clone());
            }
        }
        for mut t in versions {
            if t.group != group || t.resource != resource {
                return Err(format!(
                    "{}/{} is not {group}/{resource}",
                    t.group, t.resource
                ));
            }
            match before.iter().find(|o| o.version == t.version) {
                Some(old) => {
                    t.index = old.index;
                    if **old != t {
                        let t = Arc::new(t);
                        slots.types[old.index] = t.clone();
                        change.changed.push(t);
                    }
                }
                None => change.added.push(slots.push(t)?),
            }
        }
        Ok(change)
    }

    /// Groups other than core, in first-seen order, each with its versions.
    pub fn groups(&self) -> Vec<(String, Vec<String>)> {
        let mut out: Vec<(String, Vec<String>)> = Vec::new();
        for t in self.all() {
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
    fn custom_types_come_and_go_in_slots_never_reused() {
        let r = Registry::new(&[]).unwrap();
        let n = r.slot_count();
        let v = |version: &str, field: &str| {
            let mut t = format!("example.com/{version}/widgets=Widget")
                .parse::<CustomType>()
                .unwrap()
                .resource_type();
            t.selectable_fields = vec![field.to_string()];
            t
        };
        let c = r
            .set_custom("example.com", "widgets", vec![v("v1", "spec.a")])
            .unwrap();
        assert_eq!(c.added[0].index, n);
        assert_eq!(r.get("example.com", "v1", "widgets").unwrap().index, n);
        let c = r
            .set_custom(
                "example.com",
                "widgets",
                vec![v("v1", "spec.b"), v("v2", "spec.a")],
            )
            .unwrap();
        assert_eq!((c.changed[0].index, c.added[0].index), (n, n + 1));
        assert_eq!(
            r.get("example.com", "v1", "widgets")
                .unwrap()
                .selectable_fields,
            ["spec.b"]
        );
        let c = r.set_custom("example.com", "widgets", Vec::new()).unwrap();
        assert_eq!(c.removed.len(), 2);
        assert!(r.get("example.com", "v1", "widgets").is_none());
        assert!(r.groups().iter().all(|(g, _)| g != "example.com"));
        let c = r
            .set_custom("example.com", "widgets", vec![v("v1", "spec.a")])
            .unwrap();
        assert_eq!(c.added[0].index, n + 2, "a new slot");
        assert_eq!(r.slots().iter().filter(|(_, live)| !live).count(), 2);
        assert!(r.check_custom("", "pods").is_err());
        assert!(r.set_custom("apps", "deployments", Vec::new()).is_err());
        let m: CustomType = "metrics.k8s.io/v1beta1/pods=PodMetrics,aggregated"
            .parse()
            .unwrap();
        assert!(m.served_without_crd);
        let r = Registry::new(&[m]).unwrap();
        assert!(r.check_custom("metrics.k8s.io", "pods").is_err());
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
