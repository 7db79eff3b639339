//! proto-gen: writes kube-wire's protobuf schema (`crates/kube-wire/src/proto/schema.rs`) from
//! the Kubernetes Go API sources, so the transcoder knows every built-in kind's fields exactly as
//! kube's Go types declare them: JSON name and order, `omitempty`, pointer or value, protobuf
//! number, element, map key and value types.
//!
//! Regenerate (from the repository root):
//!
//! ```text
//! V=v0.36.2
//! for r in api apimachinery apiextensions-apiserver kube-aggregator; do
//!   mkdir -p /tmp/k8s-$r && git -C /work/.mirror/kubernetes+$r/repo archive $V | tar -x -C /tmp/k8s-$r
//! done
//! cargo run -p proto-gen -- $V /tmp/k8s-api /tmp/k8s-apimachinery /tmp/k8s-apiextensions-apiserver \
//!   /tmp/k8s-kube-aggregator crates/kube-wire/src/proto/schema.rs
//! cargo fmt --all
//! ```
//!
//! It reads Go struct declarations and their tags only (it compiles nothing), follows every type
//! reachable from the roots listed in [`ROOTS`], and stops with an error naming the type and
//! field for anything it cannot represent (interfaces, nested slices, non-string map keys, hand-
//! written JSON marshalling on a type it does not know, JSON name clashes between inline structs)
//! rather than guess. Fields without a `protobuf` tag (`TypeMeta`) are not on the protobuf wire
//! and are left out; the ones that are visible in JSON are listed on stderr.
//!
//! A development tool: the product never depends on it.

mod goparse;
mod lex;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fmt::Write as _;
use std::path::PathBuf;

use goparse::{GoType, Package, tag_value};

const META: &str = "k8s.io/apimachinery/pkg/apis/meta/v1";
const RUNTIME: &str = "k8s.io/apimachinery/pkg/runtime";
const EXT: &str = "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1";
const AGGREGATOR: &str = "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1";
const CORE: &str = "k8s.io/api/core/v1";
const ADMISSION: &str = "k8s.io/api/admissionregistration/v1";
const APPS: &str = "k8s.io/api/apps/v1";
const AUTOSCALING_V1: &str = "k8s.io/api/autoscaling/v1";
const AUTOSCALING_V2: &str = "k8s.io/api/autoscaling/v2";
const BATCH: &str = "k8s.io/api/batch/v1";
const CERTIFICATES: &str = "k8s.io/api/certificates/v1";
const COORDINATION: &str = "k8s.io/api/coordination/v1";
const DISCOVERY: &str = "k8s.io/api/discovery/v1";
const EVENTS: &str = "k8s.io/api/events/v1";
const FLOWCONTROL: &str = "k8s.io/api/flowcontrol/v1";
const NETWORKING: &str = "k8s.io/api/networking/v1";
const NODE: &str = "k8s.io/api/node/v1";
const POLICY: &str = "k8s.io/api/policy/v1";
const RBAC: &str = "k8s.io/api/rbac/v1";
const RESOURCE: &str = "k8s.io/api/resource/v1";
const SCHEDULING: &str = "k8s.io/api/scheduling/v1";
const STORAGE: &str = "k8s.io/api/storage/v1";

const ADMISSION_V1: &str = "admissionregistration.k8s.io/v1";
const FLOWCONTROL_V1: &str = "flowcontrol.apiserver.k8s.io/v1";
const NETWORKING_V1: &str = "networking.k8s.io/v1";
const RBAC_V1: &str = "rbac.authorization.k8s.io/v1";
const RESOURCE_V1: &str = "resource.k8s.io/v1";
const STORAGE_V1: &str = "storage.k8s.io/v1";

/// Root types: (apiVersion, Go import path, type, whether its `<Type>List` is a root too).
/// Entries with an empty apiVersion are in the schema but reached by name, not by kind.
///
/// The kinds are every resource kube-apiserver 1.36 serves with list and watch by default: the
/// GA group versions (alpha and beta ones are off by default, and no beta resource is on by
/// default any more), `apiextensions.k8s.io/v1` and `apiregistration.k8s.io/v1` of the servers
/// it chains; `autoscaling` in both its served versions.
const ROOTS: &[(&[&str], &str, &str, bool)] = &[
    (&["v1"], CORE, "Pod", true),
    (&["v1"], CORE, "Node", true),
    (&["v1"], CORE, "Namespace", true),
    (&["v1"], CORE, "Service", true),
    (&["v1"], CORE, "ConfigMap", true),
    (&["v1"], CORE, "Secret", true),
    (&["v1"], CORE, "Event", true),
    (&["v1"], CORE, "Endpoints", true),
    (&["v1"], CORE, "PodTemplate", true),
    (&["v1"], CORE, "LimitRange", true),
    (&["v1"], CORE, "PersistentVolume", true),
    (&["v1"], CORE, "PersistentVolumeClaim", true),
    (&["v1"], CORE, "ReplicationController", true),
    (&["v1"], CORE, "ResourceQuota", true),
    (&["v1"], CORE, "ServiceAccount", true),
    (
        &[ADMISSION_V1],
        ADMISSION,
        "MutatingWebhookConfiguration",
        true,
    ),
    (
        &[ADMISSION_V1],
        ADMISSION,
        "ValidatingWebhookConfiguration",
        true,
    ),
    (
        &[ADMISSION_V1],
        ADMISSION,
        "ValidatingAdmissionPolicy",
        true,
    ),
    (
        &[ADMISSION_V1],
        ADMISSION,
        "ValidatingAdmissionPolicyBinding",
        true,
    ),
    (&[ADMISSION_V1], ADMISSION, "MutatingAdmissionPolicy", true),
    (
        &[ADMISSION_V1],
        ADMISSION,
        "MutatingAdmissionPolicyBinding",
        true,
    ),
    (
        &["apiextensions.k8s.io/v1"],
        EXT,
        "CustomResourceDefinition",
        true,
    ),
    (
        &["apiregistration.k8s.io/v1"],
        AGGREGATOR,
        "APIService",
        true,
    ),
    (&["apps/v1"], APPS, "Deployment", true),
    (&["apps/v1"], APPS, "ReplicaSet", true),
    (&["apps/v1"], APPS, "StatefulSet", true),
    (&["apps/v1"], APPS, "DaemonSet", true),
    (&["apps/v1"], APPS, "ControllerRevision", true),
    (&["autoscaling/v1"], AUTOSCALING_V1, "Scale", false),
    (
        &["autoscaling/v1"],
        AUTOSCALING_V1,
        "HorizontalPodAutoscaler",
        true,
    ),
    (
        &["autoscaling/v2"],
        AUTOSCALING_V2,
        "HorizontalPodAutoscaler",
        true,
    ),
    (&["batch/v1"], BATCH, "Job", true),
    (&["batch/v1"], BATCH, "CronJob", true),
    (
        &["certificates.k8s.io/v1"],
        CERTIFICATES,
        "CertificateSigningRequest",
        true,
    ),
    (&["coordination.k8s.io/v1"], COORDINATION, "Lease", true),
    (&["discovery.k8s.io/v1"], DISCOVERY, "EndpointSlice", true),
    (&["events.k8s.io/v1"], EVENTS, "Event", true),
    (&[FLOWCONTROL_V1], FLOWCONTROL, "FlowSchema", true),
    (
        &[FLOWCONTROL_V1],
        FLOWCONTROL,
        "PriorityLevelConfiguration",
        true,
    ),
    (&[NETWORKING_V1], NETWORKING, "Ingress", true),
    (&[NETWORKING_V1], NETWORKING, "IngressClass", true),
    (&[NETWORKING_V1], NETWORKING, "NetworkPolicy", true),
    (&[NETWORKING_V1], NETWORKING, "IPAddress", true),
    (&[NETWORKING_V1], NETWORKING, "ServiceCIDR", true),
    (&["node.k8s.io/v1"], NODE, "RuntimeClass", true),
    (&["policy/v1"], POLICY, "PodDisruptionBudget", true),
    (&[RBAC_V1], RBAC, "ClusterRole", true),
    (&[RBAC_V1], RBAC, "ClusterRoleBinding", true),
    (&[RBAC_V1], RBAC, "Role", true),
    (&[RBAC_V1], RBAC, "RoleBinding", true),
    (&[RESOURCE_V1], RESOURCE, "DeviceClass", true),
    (&[RESOURCE_V1], RESOURCE, "ResourceClaim", true),
    (&[RESOURCE_V1], RESOURCE, "ResourceClaimTemplate", true),
    (&[RESOURCE_V1], RESOURCE, "ResourceSlice", true),
    (&["scheduling.k8s.io/v1"], SCHEDULING, "PriorityClass", true),
    (&[STORAGE_V1], STORAGE, "CSIDriver", true),
    (&[STORAGE_V1], STORAGE, "CSINode", true),
    (&[STORAGE_V1], STORAGE, "CSIStorageCapacity", true),
    (&[STORAGE_V1], STORAGE, "StorageClass", true),
    (&[STORAGE_V1], STORAGE, "VolumeAttachment", true),
    (&[STORAGE_V1], STORAGE, "VolumeAttributesClass", true),
    (&["meta.k8s.io/v1", "v1"], META, "Status", false),
    (&["meta.k8s.io/v1", "v1"], META, "DeleteOptions", false),
    (
        &["meta.k8s.io/v1", "v1"],
        META,
        "PartialObjectMetadata",
        false,
    ),
    (
        &["meta.k8s.io/v1", "v1"],
        META,
        "PartialObjectMetadataList",
        false,
    ),
    (&[], META, "ListMeta", false),
    (&[], META, "ObjectMeta", false),
    (&[], META, "WatchEvent", false),
    (&[], RUNTIME, "Unknown", false),
];

/// Types whose Go code marshals them by hand: the transcoder handles each one itself.
const SPECIAL: &[(&str, &str, &str)] = &[
    (META, "Time", "Time"),
    (META, "MicroTime", "MicroTime"),
    (META, "Duration", "Duration"),
    (META, "FieldsV1", "FieldsV1"),
    (
        "k8s.io/apimachinery/pkg/api/resource",
        "Quantity",
        "Quantity",
    ),
    (
        "k8s.io/apimachinery/pkg/util/intstr",
        "IntOrString",
        "IntOrString",
    ),
    (RUNTIME, "RawExtension", "RawExtension"),
    (EXT, "JSON", "JsonRaw"),
];

/// Structs expanded from their Go fields whose JSON form is hand-written (apiextensions'
/// either-or types); the transcoder knows each form.
const FORMS: &[(&str, &str, &str)] = &[
    (EXT, "JSONSchemaPropsOrBool", "OrBool"),
    (EXT, "JSONSchemaPropsOrArray", "OrArray"),
    (EXT, "JSONSchemaPropsOrStringArray", "OrStringArray"),
];

/// Structs with hand-written JSON methods that are never transcoded to or from JSON as such:
/// `runtime.Unknown` is the protobuf envelope.
const ENVELOPE_ONLY: &[(&str, &str)] = &[(RUNTIME, "Unknown")];

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 7 {
        eprintln!(
            "usage: proto-gen <version> <k8s.io/api dir> <k8s.io/apimachinery dir> \
             <k8s.io/apiextensions-apiserver dir> <k8s.io/kube-aggregator dir> <out.rs>"
        );
        std::process::exit(2);
    }
    let out = &args[6];
    let roots = [
        ("k8s.io/api/", PathBuf::from(&args[2])),
        ("k8s.io/apimachinery/", PathBuf::from(&args[3])),
        ("k8s.io/apiextensions-apiserver/", PathBuf::from(&args[4])),
        ("k8s.io/kube-aggregator/", PathBuf::from(&args[5])),
    ];
    let mut generator = Gen {
        dirs: roots.to_vec(),
        packages: HashMap::new(),
        messages: Vec::new(),
        ids: HashMap::new(),
        queue: VecDeque::new(),
        warnings: Vec::new(),
    };
    match generator.run(&args[1]) {
        Ok(code) => {
            if let Err(e) = std::fs::write(out, code) {
                eprintln!("proto-gen: writing {out}: {e}");
                std::process::exit(1);
            }
            for w in &generator.warnings {
                eprintln!("note: {w}");
            }
            let fields: usize = generator.messages.iter().map(|m| m.fields.len()).sum();
            eprintln!(
                "proto-gen: {} messages, {fields} fields -> {out}",
                generator.messages.len(),
            );
        }
        Err(e) => {
            eprintln!("proto-gen: {e}");
            std::process::exit(1);
        }
    }
}

/// A resolved element type, as the schema spells it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Elem {
    Scalar(&'static str),
    Special(&'static str),
    Message(usize),
}

impl Elem {
    fn code(&self) -> String {
        match self {
            Elem::Scalar(s) | Elem::Special(s) => format!("E::{s}"),
            Elem::Message(i) => format!("E::Message({i})"),
        }
    }
}

/// A resolved field type before it is split into shape and element.
#[derive(Debug, Clone)]
enum Resolved {
    Elem(Elem),
    Byte,
    Ptr(Box<Resolved>),
    Slice(Box<Resolved>),
    Map(Box<Resolved>, Box<Resolved>),
}

struct Field {
    go: String,
    json: String,
    tag: u32,
    shape: &'static str,
    elem: Elem,
    flags: Vec<&'static str>,
}

struct Msg {
    name: String,
    form: &'static str,
    fields: Vec<Field>,
}

struct Gen {
    dirs: Vec<(&'static str, PathBuf)>,
    packages: HashMap<String, Package>,
    messages: Vec<Msg>,
    ids: HashMap<(String, String), usize>,
    queue: VecDeque<(String, String)>,
    warnings: Vec<String>,
}

impl Gen {
    fn run(&mut self, version: &str) -> Result<String, String> {
        let mut root_ids = Vec::new();
        for &(versions, pkg, ty, list) in ROOTS {
            let id = self.message(pkg, ty)?;
            root_ids.push((versions, ty.to_string(), id));
            if list {
                let list_ty = format!("{ty}List");
                let id = self.message(pkg, &list_ty)?;
                root_ids.push((versions, list_ty, id));
            }
        }
        while let Some((pkg, ty)) = self.queue.pop_front() {
            self.expand(&pkg, &ty)?;
        }
        let mut keys = Vec::new();
        for i in 0..self.messages.len() {
            keys.push(self.keys(i, 0)?);
        }
        self.emit(version, &root_ids, &keys)
    }

    fn package(&mut self, path: &str) -> Result<&Package, String> {
        if !self.packages.contains_key(path) {
            let dir = self
                .dirs
                .iter()
                .find_map(|(prefix, dir)| path.strip_prefix(prefix).map(|rest| dir.join(rest)))
                .ok_or_else(|| format!("package {path} is outside the given source trees"))?;
            let pkg = goparse::parse_dir(&dir)?;
            self.packages.insert(path.to_string(), pkg);
        }
        self.packages
            .get(path)
            .ok_or_else(|| format!("package {path} not loaded"))
    }

    /// The message id of a struct, queueing it for expansion the first time.
    fn message(&mut self, pkg: &str, ty: &str) -> Result<usize, String> {
        let key = (pkg.to_string(), ty.to_string());
        if let Some(&id) = self.ids.get(&key) {
            return Ok(id);
        }
        let decl = self
            .package(pkg)?
            .types
            .get(ty)
            .ok_or_else(|| format!("type {pkg}.{ty} not found"))?;
        let form = if nullable_slice(decl) {
            "Items"
        } else if matches!(decl.ty, GoType::Struct(_)) {
            FORMS
                .iter()
                .find(|(p, t, _)| *p == pkg && *t == ty)
                .map_or("Struct", |f| f.2)
        } else {
            return Err(format!("{pkg}.{ty} is not a struct"));
        };
        let id = self.messages.len();
        self.messages.push(Msg {
            name: format!("{}.{ty}", pkg.replace('/', ".").replace('-', "_")),
            form,
            fields: Vec::new(),
        });
        self.ids.insert(key.clone(), id);
        self.queue.push_back(key);
        Ok(id)
    }

    fn expand(&mut self, pkg: &str, ty: &str) -> Result<(), String> {
        let package = self.package(pkg)?;
        let decl = package
            .types
            .get(ty)
            .cloned()
            .ok_or_else(|| format!("type {pkg}.{ty} not found"))?;
        let hand_json = package.json_methods.contains(ty);
        let known = FORMS.iter().any(|(p, t, _)| *p == pkg && *t == ty)
            || ENVELOPE_ONLY.iter().any(|(p, t)| *p == pkg && *t == ty);
        if hand_json && !known {
            return Err(format!(
                "{pkg}.{ty} has hand-written JSON marshalling the transcoder does not know"
            ));
        }
        let id = self.ids[&(pkg.to_string(), ty.to_string())];
        if nullable_slice(&decl) {
            let items = self.items_field(pkg, &decl)?;
            self.messages[id].fields = vec![items];
            return Ok(());
        }
        let GoType::Struct(go_fields) = &decl.ty else {
            return Err(format!("{pkg}.{ty} is not a struct"));
        };
        let mut fields = Vec::new();
        for f in go_fields {
            let at = || format!("{pkg}.{ty}.{}", f.name);
            let json_tag = tag_value(&f.tag, "json");
            let Some(pb) = tag_value(&f.tag, "protobuf") else {
                let is_type_meta = f.embedded && f.name == "TypeMeta";
                if json_tag != Some("-") && !is_type_meta {
                    self.warnings.push(format!(
                        "{}: no protobuf tag, not on the protobuf wire",
                        at()
                    ));
                }
                continue;
            };
            let tag: u32 = pb
                .split(',')
                .nth(1)
                .and_then(|n| n.parse().ok())
                .ok_or_else(|| format!("{}: bad protobuf tag {pb:?}", at()))?;
            let mut parts = json_tag.unwrap_or("").split(',');
            let json_name = parts.next().unwrap_or("");
            let opts: Vec<&str> = parts.collect();
            let mut flags = Vec::new();
            for o in &opts {
                match *o {
                    "omitempty" => flags.push("OMITEMPTY"),
                    "omitzero" => flags.push("OMITZERO"),
                    "inline" | "" => {}
                    other => return Err(format!("{}: json option {other:?}", at())),
                }
            }
            let json = if json_tag == Some("-") {
                flags.push("NO_JSON");
                String::new()
            } else if f.embedded && json_name.is_empty() {
                flags.push("INLINE");
                String::new()
            } else if json_name.is_empty() {
                f.name.clone()
            } else {
                json_name.to_string()
            };
            let resolved = self
                .resolve(pkg, &decl.imports, &f.ty)
                .map_err(|e| format!("{}: {e}", at()))?;
            let (shape, elem) = shape_of(resolved).map_err(|e| format!("{}: {e}", at()))?;
            // kube has nullable slices only as map values (`map[string]ExtraValue`), the one
            // place whose encoding is known: gogo writes each value's message, empty or not.
            if let Elem::Message(child) = elem
                && self.messages[child].form == "Items"
                && shape != "Map"
            {
                return Err(format!(
                    "{}: a nullable slice that is not a map value",
                    at()
                ));
            }
            // The wire type and `opt`/`rep` parts of the tag are not authoritative (kube has
            // `opt` slices and `bytes` bools): go-to-protobuf derives both from the Go type, and
            // so does this generator.
            if flags.contains(&"INLINE")
                && !(matches!(elem, Elem::Message(_)) && matches!(shape, "Value" | "Pointer"))
            {
                return Err(format!("{}: inline field that is not a struct", at()));
            }
            if flags.contains(&"OMITZERO")
                && !(shape == "Value" && matches!(elem, Elem::Special("Time" | "MicroTime")))
            {
                return Err(format!("{}: omitzero on a type other than a Time", at()));
            }
            fields.push(Field {
                go: f.name.clone(),
                json,
                tag,
                shape,
                elem,
                flags,
            });
        }
        let mut tags: Vec<u32> = fields.iter().map(|f| f.tag).collect();
        tags.sort_unstable();
        if tags.windows(2).any(|w| w[0] == w[1]) {
            return Err(format!("{pkg}.{ty}: two fields share a protobuf number"));
        }
        if fields.len() > 255 {
            return Err(format!("{pkg}.{ty}: more than 255 fields"));
        }
        self.messages[id].fields = fields;
        Ok(())
    }

    /// The one field of a nullable slice's message: go-to-protobuf wraps `type X []T` marked
    /// `+protobuf.nullable=true` in `message X { repeated T items = 1; }`.
    fn items_field(&mut self, pkg: &str, decl: &goparse::Decl) -> Result<Field, String> {
        let resolved = self.resolve(pkg, &decl.imports, &decl.ty)?;
        let (shape, elem) = shape_of(resolved)?;
        if shape != "Slice" {
            return Err(format!("{pkg}: a nullable slice of {elem:?}"));
        }
        Ok(Field {
            go: "Items".into(),
            json: "items".into(),
            tag: 1,
            shape,
            elem,
            flags: Vec::new(),
        })
    }

    /// Resolves a Go type to what the wire sees, following named types across packages.
    fn resolve(
        &mut self,
        pkg: &str,
        imports: &BTreeMap<String, String>,
        ty: &GoType,
    ) -> Result<Resolved, String> {
        match ty {
            GoType::Ptr(t) => Ok(Resolved::Ptr(Box::new(self.resolve(pkg, imports, t)?))),
            GoType::Slice(t) => Ok(Resolved::Slice(Box::new(self.resolve(pkg, imports, t)?))),
            GoType::Map(k, v) => Ok(Resolved::Map(
                Box::new(self.resolve(pkg, imports, k)?),
                Box::new(self.resolve(pkg, imports, v)?),
            )),
            GoType::Array(_) => Err("fixed-size arrays are not represented".into()),
            GoType::Struct(_) => Err("anonymous structs are not represented".into()),
            GoType::Opaque(what) => Err(format!("{what} types are not represented")),
            GoType::Named(None, name)
                if builtin(name).is_some() || name == "byte" || name == "uint8" =>
            {
                match name.as_str() {
                    "byte" | "uint8" => Ok(Resolved::Byte),
                    _ => builtin(name)
                        .map(|s| Resolved::Elem(Elem::Scalar(s)))
                        .ok_or_else(|| format!("Go type {name}")),
                }
            }
            GoType::Named(alias, name) => {
                let target = match alias {
                    None => pkg.to_string(),
                    Some(a) => imports
                        .get(a)
                        .cloned()
                        .ok_or_else(|| format!("unknown package alias {a}"))?,
                };
                if let Some(s) = SPECIAL.iter().find(|(p, t, _)| *p == target && t == name) {
                    return Ok(Resolved::Elem(Elem::Special(s.2)));
                }
                let package = self.package(&target)?;
                let decl = package
                    .types
                    .get(name)
                    .cloned()
                    .ok_or_else(|| format!("type {target}.{name} not found"))?;
                let hand_json = package.json_methods.contains(name);
                if nullable_slice(&decl) && !hand_json {
                    return Ok(Resolved::Elem(Elem::Message(self.message(&target, name)?)));
                }
                if let Some(m) = decl
                    .markers
                    .iter()
                    .find(|m| m.starts_with("+protobuf.nullable") || m.starts_with("+protobuf.as"))
                {
                    return Err(format!("{target}.{name} is marked {m}"));
                }
                match &decl.ty {
                    GoType::Struct(_) => {
                        Ok(Resolved::Elem(Elem::Message(self.message(&target, name)?)))
                    }
                    _ if hand_json => Err(format!(
                        "{target}.{name} has hand-written JSON marshalling the transcoder does not know"
                    )),
                    other => {
                        let other = other.clone();
                        self.resolve(&target, &decl.imports, &other)
                    }
                }
            }
        }
    }

    /// Every JSON key of a message: its own fields and, flattened, its inline fields'.
    fn keys(&self, id: usize, depth: usize) -> Result<Vec<(String, Vec<usize>)>, String> {
        if depth > 8 {
            return Err(format!(
                "{}: inline structs nest too deep",
                self.messages[id].name
            ));
        }
        let msg = &self.messages[id];
        let mut out: Vec<(String, Vec<usize>)> = Vec::new();
        for (i, f) in msg.fields.iter().enumerate() {
            if f.flags.contains(&"NO_JSON") {
                continue;
            }
            if f.flags.contains(&"INLINE") {
                let Elem::Message(child) = f.elem else {
                    return Err(format!("{}.{}: inline non-struct", msg.name, f.go));
                };
                for (name, mut path) in self.keys(child, depth + 1)? {
                    path.insert(0, i);
                    out.push((name, path));
                }
            } else {
                out.push((f.json.clone(), vec![i]));
            }
        }
        out.sort();
        for w in out.windows(2) {
            if w[0].0 == w[1].0 {
                return Err(format!(
                    "{}: JSON key {:?} is declared twice (Go would shadow or drop it)",
                    msg.name, w[0].0
                ));
            }
        }
        Ok(out)
    }

    fn emit(
        &self,
        version: &str,
        roots: &[(&[&str], String, usize)],
        keys: &[Vec<(String, Vec<usize>)>],
    ) -> Result<String, String> {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "// generated by proto-gen from k8s.io/api {version}, k8s.io/apimachinery {version}, \
             k8s.io/apiextensions-apiserver {version} and k8s.io/kube-aggregator {version}; do not \
             edit.\n\
             // Regenerate: see crates/proto-gen/src/main.rs.\n"
        );
        s.push_str(
            "//! The Kubernetes built-in kinds' protobuf and JSON shapes, generated from kube's Go \
             types (see\n//! [`super::model`] for what each entry means). Data only.\n\n",
        );
        s.push_str(
            "use super::model::Elem as E;\n\
             use super::model::Shape::{Map as Mp, Pointer as P, Slice as S, Value as V};\n\
             use super::model::{\n    Field, INLINE, JsonForm, JsonKey, Message, MsgId, NO_JSON, OMITEMPTY, OMITZERO, Root,\n};\n\n",
        );
        s.push_str(
            "const fn f(name: &'static str, tag: u32, shape: super::model::Shape, elem: E, flags: u8) -> Field {\n    \
             Field { name, tag, shape, elem, flags }\n}\n\n\
             const fn k(name: &'static str, path: &'static [u8]) -> JsonKey {\n    JsonKey { name, path }\n}\n\n",
        );
        let _ = writeln!(
            s,
            "/// Every message, by [`MsgId`].\npub static MESSAGES: [Message; {}] = [",
            self.messages.len()
        );
        for (id, m) in self.messages.iter().enumerate() {
            let _ = writeln!(
                s,
                "    // {id}\n    Message {{\n        name: {:?},",
                m.name
            );
            let _ = writeln!(s, "        form: JsonForm::{},", m.form);
            s.push_str("        fields: &[\n");
            for fl in &m.fields {
                let flags = if fl.flags.is_empty() {
                    "0".to_string()
                } else {
                    fl.flags.join(" | ")
                };
                let shape = match fl.shape {
                    "Value" => "V",
                    "Pointer" => "P",
                    "Slice" => "S",
                    _ => "Mp",
                };
                let _ = writeln!(
                    s,
                    "            f({:?}, {}, {shape}, {}, {flags}),",
                    fl.json,
                    fl.tag,
                    fl.elem.code()
                );
            }
            s.push_str("        ],\n");
            let mut order: Vec<usize> = (0..m.fields.len()).collect();
            order.sort_by_key(|&i| m.fields[i].tag);
            let order: Vec<String> = order.iter().map(|i| i.to_string()).collect();
            let _ = writeln!(s, "        by_tag: &[{}],", order.join(", "));
            s.push_str("        keys: &[\n");
            for (name, path) in &keys[id] {
                let path: Vec<String> = path.iter().map(|i| i.to_string()).collect();
                let _ = writeln!(s, "            k({name:?}, &[{}]),", path.join(", "));
            }
            s.push_str("        ],\n    },\n");
        }
        s.push_str("];\n\n");
        let mut table: Vec<(String, String, usize)> = Vec::new();
        for (versions, kind, id) in roots {
            for v in *versions {
                table.push((v.to_string(), kind.clone(), *id));
            }
        }
        table.sort();
        let _ = writeln!(
            s,
            "/// The root kinds and their lists by `(apiVersion, kind)`, sorted.\npub static ROOTS: [Root; {}] = [",
            table.len()
        );
        for (v, kind, id) in &table {
            let _ = writeln!(
                s,
                "    Root {{ api_version: {v:?}, kind: {kind:?}, message: {id} }},"
            );
        }
        s.push_str("];\n\n");
        for (name, doc, id) in constants(roots)? {
            let _ = writeln!(s, "/// {doc}.\npub const {name}: MsgId = {id};");
        }
        Ok(s)
    }
}

/// Whether a declaration is a named slice type marked `+protobuf.nullable=true` (certificates'
/// `ExtraValue []string`): a message in protobuf, the bare slice in JSON.
fn nullable_slice(decl: &goparse::Decl) -> bool {
    matches!(decl.ty, GoType::Slice(_))
        && decl.markers.iter().any(|m| m == "+protobuf.nullable=true")
}

/// Splits a resolved type into the schema's shape and element.
fn shape_of(r: Resolved) -> Result<(&'static str, Elem), String> {
    let elem = |r: Resolved| match r {
        Resolved::Elem(e) => Ok(e),
        Resolved::Slice(inner) if matches!(*inner, Resolved::Byte) => Ok(Elem::Scalar("Bytes")),
        other => Err(format!("unsupported element {other:?}")),
    };
    match r {
        Resolved::Ptr(inner) => match *inner {
            Resolved::Elem(e) => Ok(("Pointer", e)),
            other => Err(format!("pointer to {other:?}")),
        },
        Resolved::Slice(inner) => match *inner {
            Resolved::Byte => Ok(("Value", Elem::Scalar("Bytes"))),
            Resolved::Elem(e) => Ok(("Slice", e)),
            other => Err(format!("slice of {other:?}")),
        },
        Resolved::Map(k, v) => {
            if !matches!(*k, Resolved::Elem(Elem::Scalar("String"))) {
                return Err(format!("map key {k:?} is not a string"));
            }
            Ok(("Map", elem(*v)?))
        }
        Resolved::Elem(e) => Ok(("Value", e)),
        Resolved::Byte => Err("a lone byte".into()),
    }
}

fn builtin(name: &str) -> Option<&'static str> {
    Some(match name {
        "string" => "String",
        "bool" => "Bool",
        "int32" => "Int32",
        "int64" | "int" => "Int64",
        "uint32" => "Uint32",
        "uint64" => "Uint64",
        "float64" => "Float64",
        _ => return None,
    })
}

/// The schema constant of each root message: its name, doc and id. A kind is named after itself
/// (`POD`, `EVENT`); one whose name an earlier root already took is prefixed with its group's
/// first label and its version (`EVENTS_V1_EVENT`, `AUTOSCALING_V2_HORIZONTAL_POD_AUTOSCALER`).
fn constants(roots: &[(&[&str], String, usize)]) -> Result<Vec<(String, String, usize)>, String> {
    let mut out: Vec<(String, String, usize)> = Vec::new();
    for (versions, kind, id) in roots {
        let mut name = upper_snake(kind);
        let doc = match versions.first() {
            Some(v) => format!("`{v}` `{kind}`"),
            None => format!("`{kind}`"),
        };
        if out.iter().any(|c| c.0 == name) {
            let v = versions
                .first()
                .ok_or_else(|| format!("{kind}: two roots of that name without an apiVersion"))?;
            let (group, version) = v.split_once('/').unwrap_or(("", v));
            let label = match group.split('.').next() {
                Some("") | None => "core",
                Some(label) => label,
            };
            name = format!("{}_{}_{name}", upper_snake(label), upper_snake(version));
        }
        if out.iter().any(|c| c.0 == name) {
            return Err(format!("{kind}: schema constant {name} is taken twice"));
        }
        out.push((name, doc, *id));
    }
    Ok(out)
}

/// `PodTemplate` → `POD_TEMPLATE`, with an acronym kept whole: `APIService` → `API_SERVICE`,
/// `ServiceCIDR` → `SERVICE_CIDR`.
fn upper_snake(s: &str) -> String {
    let chars: Vec<char> = s.chars().collect();
    let mut out = String::new();
    for (i, &c) in chars.iter().enumerate() {
        let prev = i.checked_sub(1).and_then(|p| chars.get(p));
        let next = chars.get(i + 1);
        let starts_word = c.is_uppercase()
            && prev.is_some_and(|p| !p.is_uppercase() || next.is_some_and(|n| n.is_lowercase()));
        if starts_word {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{Elem, Gen, constants, upper_snake};
    use std::collections::{HashMap, VecDeque};

    /// A generator over one Go package, `example.com/x`, made of `src`.
    fn generator(name: &str, src: &str) -> Gen {
        let dir = std::env::temp_dir().join(format!("proto-gen-{name}-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("x")).unwrap();
        std::fs::write(dir.join("x/types.go"), src).unwrap();
        let mut g = Gen {
            dirs: vec![("example.com/", dir.clone())],
            packages: HashMap::new(),
            messages: Vec::new(),
            ids: HashMap::new(),
            queue: VecDeque::new(),
            warnings: Vec::new(),
        };
        // Parsed once, kept in memory: the files are not needed any more.
        g.package("example.com/x").unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        g
    }

    /// Expands `ty` of `example.com/x` and everything it reaches.
    fn expand_all(g: &mut Gen, ty: &str) -> Result<usize, String> {
        let id = g.message("example.com/x", ty)?;
        while let Some((pkg, ty)) = g.queue.pop_front() {
            g.expand(&pkg, &ty)?;
        }
        Ok(id)
    }

    const EXTRA: &str = "package x

// ExtraValue masks the value so protobuf can generate
// +protobuf.nullable=true
// +protobuf.options.(gogoproto.goproto_stringer)=false
type ExtraValue []string
";

    #[test]
    fn a_nullable_slice_map_value_is_a_message_of_items() {
        let src = format!(
            "{EXTRA}
type Spec struct {{
	Extra map[string]ExtraValue `json:\"extra,omitempty\" protobuf:\"bytes,6,rep,name=extra\"`
}}
"
        );
        let mut g = generator("items", &src);
        let spec = expand_all(&mut g, "Spec").unwrap();
        let extra = &g.messages[spec].fields[0];
        assert_eq!((extra.json.as_str(), extra.shape), ("extra", "Map"));
        let Elem::Message(value) = extra.elem else {
            panic!("{:?}", extra.elem);
        };
        let value = &g.messages[value];
        assert_eq!(
            (value.name.as_str(), value.form),
            ("example.com.x.ExtraValue", "Items")
        );
        let items = &value.fields[0];
        assert_eq!(
            (items.tag, items.shape, items.elem.clone()),
            (1, "Slice", Elem::Scalar("String"))
        );
    }

    #[test]
    fn a_nullable_slice_elsewhere_is_refused() {
        let src = format!(
            "{EXTRA}
type Spec struct {{
	Extra ExtraValue `json:\"extra,omitempty\" protobuf:\"bytes,6,rep,name=extra\"`
}}
"
        );
        let mut g = generator("refused", &src);
        let err = expand_all(&mut g, "Spec").unwrap_err();
        assert!(err.contains("Spec.Extra: a nullable slice"), "{err}");
    }

    #[test]
    fn constant_names_keep_acronyms_whole() {
        for (kind, want) in [
            ("Pod", "POD"),
            ("PodTemplate", "POD_TEMPLATE"),
            ("APIService", "API_SERVICE"),
            ("CSIStorageCapacity", "CSI_STORAGE_CAPACITY"),
            ("ServiceCIDR", "SERVICE_CIDR"),
            ("IPAddress", "IP_ADDRESS"),
            ("PartialObjectMetadataList", "PARTIAL_OBJECT_METADATA_LIST"),
        ] {
            assert_eq!(upper_snake(kind), want);
        }
    }

    #[test]
    fn a_kind_served_twice_is_prefixed_by_its_group_version() {
        let core: &[&str] = &["v1"];
        let events: &[&str] = &["events.k8s.io/v1"];
        let hpa2: &[&str] = &["autoscaling/v2"];
        let roots = [
            (core, "Event".to_string(), 3),
            (events, "Event".to_string(), 7),
            (
                &["autoscaling/v1"][..],
                "HorizontalPodAutoscaler".to_string(),
                8,
            ),
            (hpa2, "HorizontalPodAutoscaler".to_string(), 9),
        ];
        let names: Vec<String> = constants(&roots)
            .unwrap()
            .into_iter()
            .map(|c| c.0)
            .collect();
        assert_eq!(
            names,
            [
                "EVENT",
                "EVENTS_V1_EVENT",
                "HORIZONTAL_POD_AUTOSCALER",
                "AUTOSCALING_V2_HORIZONTAL_POD_AUTOSCALER"
            ]
        );
        // Roots that would still share a name are an error, not a silent overwrite.
        let thrice = [
            (hpa2, "Scale".to_string(), 1),
            (hpa2, "Scale".to_string(), 2),
            (hpa2, "Scale".to_string(), 3),
        ];
        assert!(constants(&thrice).is_err());
    }
}
