//! Ingest: turning one upstream object — the kind's protobuf message, or JSON — into the stored
//! bytes and the small record that selectors and indexes read, without building a tree of the
//! whole object.
//!
//! A protobuf object ([`decode_protobuf`]) is stored as sent; it is checked to decode whole
//! first (as a malformed JSON object is refused whole), and its record is read field by field
//! ([`record_from_protobuf`]). A JSON object ([`decode_object`]) is stored *without* its
//! `kind`/`apiVersion` prefix, starting `{"metadata":…`, so a built-in LIST item is the body as
//! is, and a watch frame is a constant head, the body minus its opening brace, and a constant
//! tail.
//!
//! Owns the decoding of one object and of an upstream resourceVersion ([`parse_rv`]), and the
//! byte-level edits of stored bytes ([`strip_type_meta`], [`restamp`], [`restamp_protobuf`]).
//! It must not keep any state: storing objects is the store's job, and the reflector decides
//! what to ingest.

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::rc::Rc;
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;

use bytes::{BufMut, Bytes, BytesMut};
use kube_wire::proto::MessageRef;
use kube_wire::proto::fields::ScalarPath;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::ResourceInfo;

/// What selectors and indexes need of an object, extracted once at ingest.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ObjectRecord {
    /// `metadata.namespace` ("" for cluster-scoped).
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.uid`.
    pub uid: String,
    /// `metadata.resourceVersion`.
    pub rv: u64,
    /// `metadata.labels`, sorted by key.
    pub labels: Vec<(String, String)>,
    /// Selectable field values of the kind (metadata.name, metadata.namespace, spec.nodeName…),
    /// each name shared by every object ([`field_name`]).
    pub fields: Vec<(Arc<str>, String)>,
}

/// The one shared copy of a selectable field's name (`spec.nodeName`): a record holds its
/// kind's names for every object, so they are kept once for the process (a few dozen).
pub fn field_name(name: &str) -> Arc<str> {
    static NAMES: OnceLock<Mutex<HashSet<Arc<str>>>> = OnceLock::new();
    let mut names = NAMES.get_or_init(Default::default).lock();
    if let Some(n) = names.get(name) {
        return n.clone();
    }
    let n: Arc<str> = Arc::from(name);
    names.insert(n.clone());
    n
}

/// `selectable_fields`' pairs with their names shared ([`field_name`]).
fn shared_names(fields: Vec<(String, String)>) -> Vec<(Arc<str>, String)> {
    fields
        .into_iter()
        .map(|(k, v)| (field_name(&k), v))
        .collect()
}

impl ObjectRecord {
    /// A selectable field's value, or the uid as `kube_wire::selector::UID_FIELD` (which a
    /// shard selector hashes).
    pub fn field(&self, name: &str) -> Option<&str> {
        if name == kube_wire::selector::UID_FIELD {
            return Some(&self.uid);
        }
        self.fields
            .iter()
            .find(|(k, _)| &**k == name)
            .map(|(_, v)| v.as_str())
    }

    /// Storage key: `ns/name`, or `name` for cluster-scoped objects (kube's key order).
    pub fn key(&self) -> String {
        object_key(&self.namespace, &self.name)
    }
}

/// The store's key of the object `name` in `namespace` ("" for a cluster-scoped one): `ns/name`,
/// or the name alone.
pub fn object_key(namespace: &str, name: &str) -> String {
    if namespace.is_empty() {
        name.to_string()
    } else {
        format!("{namespace}/{name}")
    }
}

pub use super::object::Cached;

/// Why an object could not be ingested.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// Not a JSON object, or malformed.
    #[error("malformed object JSON: {0}")]
    Json(String),
    /// `metadata.resourceVersion` missing or not an unsigned integer within int64.
    #[error("object {name:?} has a missing or non-numeric resourceVersion {rv:?}")]
    ResourceVersion {
        /// Object name.
        name: String,
        /// The value seen.
        rv: String,
    },
    /// `metadata.name` missing.
    #[error("object has no metadata.name")]
    NoName,
    /// Protobuf bytes that do not decode as the kind's message.
    #[error("malformed object protobuf: {0}")]
    Protobuf(String),
}

#[derive(Deserialize)]
struct Skeleton<'a> {
    #[serde(borrow, default)]
    metadata: Meta<'a>,
    #[serde(borrow, default)]
    spec: Option<SpecSel<'a>>,
    #[serde(borrow, default)]
    status: Option<StatusSel<'a>>,
    #[serde(borrow, default, rename = "type")]
    type_: Option<Cow<'a, str>>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Meta<'a> {
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    namespace: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    uid: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    resource_version: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    labels: Option<BTreeMap<Cow<'a, str>, Cow<'a, str>>>,
}

/// The `spec` fields any built-in kind's field selectors read.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct SpecSel<'a> {
    #[serde(borrow, default)]
    node_name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    restart_policy: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    scheduler_name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    service_account_name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    service_account: Option<Cow<'a, str>>,
    #[serde(default)]
    host_network: Option<bool>,
    #[serde(default)]
    unschedulable: Option<bool>,
    #[serde(borrow, default, rename = "clusterIP")]
    cluster_ip: Option<Cow<'a, str>>,
    #[serde(borrow, default, rename = "type")]
    type_: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    signer_name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pod_name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    driver: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct PodIp<'a> {
    #[serde(borrow, default)]
    ip: Option<Cow<'a, str>>,
}

/// The `status` fields any built-in kind's field selectors read.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct StatusSel<'a> {
    #[serde(borrow, default)]
    phase: Option<Cow<'a, str>>,
    #[serde(borrow, default, rename = "podIP")]
    pod_ip: Option<Cow<'a, str>>,
    #[serde(borrow, default, rename = "podIPs")]
    pod_ips: Option<Vec<PodIp<'a>>>,
    #[serde(borrow, default)]
    nominated_node_name: Option<Cow<'a, str>>,
    #[serde(default)]
    replicas: Option<i64>,
    #[serde(default)]
    succeeded: Option<i64>,
}

fn put(m: &mut Map<String, Value>, k: &str, v: Option<Value>) {
    if let Some(v) = v {
        m.insert(k.to_string(), v);
    }
}

fn s(v: &Option<Cow<'_, str>>) -> Option<Value> {
    v.as_ref().map(|x| Value::String(x.to_string()))
}

impl Skeleton<'_> {
    /// A tiny JSON value with only the fields selectors read, so that the per-kind rules in
    /// `kube_wire::selector::selectable` (written against full objects) apply unchanged.
    fn selectable_view(&self) -> Value {
        let mut meta = Map::new();
        put(&mut meta, "name", s(&self.metadata.name));
        put(&mut meta, "namespace", s(&self.metadata.namespace));
        let mut spec = Map::new();
        if let Some(sp) = &self.spec {
            put(&mut spec, "nodeName", s(&sp.node_name));
            put(&mut spec, "restartPolicy", s(&sp.restart_policy));
            put(&mut spec, "schedulerName", s(&sp.scheduler_name));
            put(&mut spec, "serviceAccountName", s(&sp.service_account_name));
            put(&mut spec, "serviceAccount", s(&sp.service_account));
            put(&mut spec, "hostNetwork", sp.host_network.map(Value::Bool));
            put(
                &mut spec,
                "unschedulable",
                sp.unschedulable.map(Value::Bool),
            );
            put(&mut spec, "clusterIP", s(&sp.cluster_ip));
            put(&mut spec, "type", s(&sp.type_));
            put(&mut spec, "signerName", s(&sp.signer_name));
            put(&mut spec, "podName", s(&sp.pod_name));
            put(&mut spec, "driver", s(&sp.driver));
        }
        let mut status = Map::new();
        if let Some(st) = &self.status {
            put(&mut status, "phase", s(&st.phase));
            put(&mut status, "podIP", s(&st.pod_ip));
            if let Some(ips) = &st.pod_ips {
                let list: Vec<Value> = ips
                    .iter()
                    .map(|i| json!({"ip": i.ip.as_deref().unwrap_or_default()}))
                    .collect();
                status.insert("podIPs".into(), Value::Array(list));
            }
            put(&mut status, "nominatedNodeName", s(&st.nominated_node_name));
            put(&mut status, "replicas", st.replicas.map(Value::from));
            put(&mut status, "succeeded", st.succeeded.map(Value::from));
        }
        let mut out = Map::new();
        out.insert("metadata".into(), Value::Object(meta));
        out.insert("spec".into(), Value::Object(spec));
        out.insert("status".into(), Value::Object(status));
        put(&mut out, "type", s(&self.type_));
        Value::Object(out)
    }
}

/// Kinds whose selectable fields are not all in [`Skeleton`]: parsed fully (rare; events are
/// not cached by default in kube-apiserver either).
fn needs_full_parse(info: &ResourceInfo) -> bool {
    !info.selectable_fields.is_empty() || info.kind == "Event"
}

/// An upstream resourceVersion: an unsigned integer that is also an int64, as etcd's revisions
/// and kube's continue tokens are (a larger one would wrap in the tokens the cache hands out).
/// Digits only, as Go's `strconv.ParseUint` (Rust's parser also takes a leading `+`).
pub fn parse_rv(s: &str) -> Result<u64, std::num::ParseIntError> {
    let s = if s.starts_with('+') { "+x" } else { s };
    s.parse::<u64>()?;
    s.parse::<i64>().map(|v| v.unsigned_abs())
}

/// Ingests one object's JSON (with or without `kind`/`apiVersion`).
pub fn decode_object(info: &ResourceInfo, raw: &[u8]) -> Result<Cached, DecodeError> {
    decode_with(info, raw, strip_type_meta)
}

/// An object as the cache itself stored it ([`Cached::stored`]: a persisted object,
/// checksummed on disk), decoded as [`decode_protobuf`] or [`decode_object`] does (but without
/// the latter's scan for type meta, already stripped); copied into an exactly sized buffer all
/// the same, so that no object keeps a whole segment file's buffer alive. The form is told by
/// the first byte: JSON's `{` is the key of a protobuf field 15 of the group wire type, which no
/// kind has (a log written before objects were stored in protobuf holds JSON).
pub fn decode_stored(info: &ResourceInfo, raw: &[u8]) -> Result<Cached, DecodeError> {
    if raw.first() == Some(&b'{') {
        decode_with(info, raw, |r| Ok(Bytes::copy_from_slice(r)))
    } else {
        decode_protobuf(info, raw)
    }
}

fn decode_with(
    info: &ResourceInfo,
    raw: &[u8],
    body: impl FnOnce(&[u8]) -> Result<Bytes, DecodeError>,
) -> Result<Cached, DecodeError> {
    let sk: Skeleton<'_> =
        serde_json::from_slice(raw).map_err(|e| DecodeError::Json(e.to_string()))?;
    let name = sk.metadata.name.as_deref().unwrap_or_default().to_string();
    if name.is_empty() {
        return Err(DecodeError::NoName);
    }
    let rv_text = sk.metadata.resource_version.as_deref().unwrap_or_default();
    // An int64 too, as etcd's revisions and kube's continue tokens are.
    let rv = parse_rv(rv_text)
        .ok()
        .ok_or_else(|| DecodeError::ResourceVersion {
            name: name.clone(),
            rv: rv_text.to_string(),
        })?;
    let fields = shared_names(if needs_full_parse(info) {
        let full: Value =
            serde_json::from_slice(raw).map_err(|e| DecodeError::Json(e.to_string()))?;
        kube_wire::selector::selectable::selectable_fields(
            &info.group,
            &info.kind,
            info.namespaced,
            &info.selectable_fields,
            &full,
        )
    } else {
        kube_wire::selector::selectable::selectable_fields(
            &info.group,
            &info.kind,
            info.namespaced,
            &[],
            &sk.selectable_view(),
        )
    });
    let labels = sk
        .metadata
        .labels
        .as_ref()
        .map(|l| {
            l.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        })
        .unwrap_or_default();
    let rec = ObjectRecord {
        namespace: sk
            .metadata
            .namespace
            .as_deref()
            .unwrap_or_default()
            .to_string(),
        name,
        uid: sk.metadata.uid.as_deref().unwrap_or_default().to_string(),
        rv,
        labels,
        fields,
    };
    Ok(Cached::new(body(raw)?, rec))
}

/// Ingests one object's protobuf message (`pb`, of `info`'s kind, without envelope). The whole
/// message must decode as the kind's, as kube's own decoder would have it (and as a JSON object
/// must parse whole): what is stored can always be written as JSON later. Bytes that do not,
/// a missing name or a bad resourceVersion are refused as malformed JSON is.
pub fn decode_protobuf(info: &ResourceInfo, pb: &[u8]) -> Result<Cached, DecodeError> {
    thread_local! {
        /// The JSON the check writes, reused: no allocation per object.
        static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    }
    let msg = info
        .message
        .ok_or_else(|| DecodeError::Protobuf(format!("no protobuf message for {}", info.kind)))?;
    let rec = SCRATCH.with(|s| {
        let mut json = s.borrow_mut();
        json.clear();
        let checked = kube_wire::proto::proto_to_json_into(msg, pb, None, &mut json)
            .map_err(|e| DecodeError::Protobuf(e.to_string()));
        let rec = checked.and_then(|()| {
            if needs_full_parse(info) {
                decode_object(info, &json).map(|c| c.rec)
            } else {
                record_from_protobuf(info, msg, pb)
            }
        });
        if json.capacity() > 1 << 20 {
            *json = Vec::new();
        }
        rec
    })?;
    Ok(Cached::from_protobuf(Bytes::copy_from_slice(pb), msg, rec))
}

/// An object's stored protobuf with `metadata.resourceVersion` (field 6 of `metadata`, field 1
/// of every kind) set to `rv`, every other byte as it was: the bytes kube would write for the
/// restamped object, as its fields stay in tag order. The stored bytes were read field by field
/// at ingest with the same reader, so they parse; were they not to, they are kept as they are
/// (a wrong resourceVersion on one event rather than a panic).
pub fn restamp_protobuf(pb: &[u8], rv: u64) -> Bytes {
    restamp_fields(pb, rv).map_or_else(|| Bytes::copy_from_slice(pb), Bytes::from)
}

/// [`restamp_protobuf`] on the wire: every occurrence of field 1 rewritten without field 6,
/// the new field 6 placed in the first one before its first field of a higher tag (a message
/// without field 1 gets one holding only field 6, first); `None` for bytes that do not parse.
fn restamp_fields(pb: &[u8], rv: u64) -> Option<Vec<u8>> {
    use kube_wire::proto::wire::{Value, fields, put_bytes};
    const RV: u32 = meta_tag::RESOURCE_VERSION;
    let rv = rv.to_string();
    let mut out = Vec::with_capacity(pb.len() + 16);
    let mut stamped = false;
    for field in fields(pb, "object").with_encoding() {
        let (tag, value, encoding) = field.ok()?;
        let (1, Value::Bytes(meta)) = (tag, value) else {
            out.extend_from_slice(encoding);
            continue;
        };
        let mut m = Vec::with_capacity(meta.len() + rv.len() + 2);
        for f in fields(meta, "ObjectMeta").with_encoding() {
            let (t, _, encoding) = f.ok()?;
            if t > RV && !stamped {
                put_bytes(&mut m, RV, rv.as_bytes());
                stamped = true;
            }
            if t != RV {
                m.extend_from_slice(encoding);
            }
        }
        if !stamped {
            put_bytes(&mut m, RV, rv.as_bytes());
            stamped = true;
        }
        put_bytes(&mut out, 1, &m);
    }
    if !stamped {
        let mut meta = Vec::with_capacity(rv.len() + 2);
        put_bytes(&mut meta, RV, rv.as_bytes());
        let mut first = Vec::with_capacity(out.len() + meta.len() + 4);
        put_bytes(&mut first, 1, &meta);
        first.extend_from_slice(&out);
        out = first;
    }
    Some(out)
}

/// The scalar fields [`Skeleton`] reads for the built-in kinds' field selectors, as paths
/// `kube_wire::proto::fields` follows (the first pod IP for `status.podIPs`).
const SELECTABLE_PATHS: &[&str] = &[
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "spec.serviceAccount",
    "spec.hostNetwork",
    "spec.unschedulable",
    "spec.clusterIP",
    "spec.type",
    "spec.signerName",
    "spec.podName",
    "spec.driver",
    "status.phase",
    "status.podIP",
    "status.podIPs[0].ip",
    "status.nominatedNodeName",
    "status.replicas",
    "status.succeeded",
    "type",
];

/// The [`SELECTABLE_PATHS`] `msg` has, resolved through the schema once per thread.
fn selectable_paths(msg: MessageRef) -> Rc<[ScalarPath]> {
    thread_local! {
        static PATHS: RefCell<HashMap<MessageRef, Rc<[ScalarPath]>>> =
            RefCell::new(HashMap::new());
    }
    PATHS.with(|p| {
        p.borrow_mut()
            .entry(msg)
            .or_insert_with(|| {
                SELECTABLE_PATHS
                    .iter()
                    .filter_map(|path| ScalarPath::new(msg, path).ok())
                    .collect()
            })
            .clone()
    })
}

/// `ObjectMeta`'s fields the record reads, by tag (fixed forever by kube's `generated.proto`).
mod meta_tag {
    pub const NAME: u32 = 1;
    pub const NAMESPACE: u32 = 3;
    pub const UID: u32 = 5;
    pub const RESOURCE_VERSION: u32 = 6;
    pub const LABELS: u32 = 11;
}

/// What the record reads of an encoded `ObjectMeta`, in one pass.
#[derive(Default)]
struct MetaFields<'a> {
    name: &'a str,
    namespace: &'a str,
    uid: &'a str,
    resource_version: &'a str,
    labels: Vec<(&'a str, &'a str)>,
}

fn read_meta(meta: &[u8]) -> Result<MetaFields<'_>, String> {
    use kube_wire::proto::wire::fields;
    fn text(b: &[u8]) -> Result<&str, String> {
        std::str::from_utf8(b).map_err(|_| "a string is not UTF-8".to_string())
    }
    let mut m = MetaFields::default();
    for field in fields(meta, "ObjectMeta").bytes() {
        let (tag, v) = field.map_err(|e| e.to_string())?;
        match tag {
            meta_tag::NAME => m.name = text(v)?,
            meta_tag::NAMESPACE => m.namespace = text(v)?,
            meta_tag::UID => m.uid = text(v)?,
            meta_tag::RESOURCE_VERSION => m.resource_version = text(v)?,
            meta_tag::LABELS => {
                let (mut key, mut value) = ("", "");
                for f in fields(v, "ObjectMeta.labels").bytes() {
                    match f.map_err(|e| e.to_string())? {
                        (1, k) => key = text(k)?,
                        (2, x) => value = text(x)?,
                        _ => {}
                    }
                }
                m.labels.push((key, value));
            }
            _ => {}
        }
    }
    Ok(m)
}

/// The record of an object from its protobuf message (`msg`, its kind's), read field by field
/// without decoding the object: the record [`decode_object`] reads from the same object's JSON.
/// Bytes that do not decode, a missing name or a bad resourceVersion are refused as malformed
/// JSON is.
pub fn record_from_protobuf(
    info: &ResourceInfo,
    msg: MessageRef,
    pb: &[u8],
) -> Result<ObjectRecord, DecodeError> {
    use kube_wire::proto::fields::FieldValue;
    let bad = |e: kube_wire::proto::ProtoError| DecodeError::Protobuf(e.to_string());
    if needs_full_parse(info) {
        // Kinds whose selectable fields the paths below do not cover (events): via JSON.
        let json = kube_wire::proto::proto_to_json(msg, pb, None).map_err(bad)?;
        return decode_object(info, &json).map(|c| c.rec);
    }
    // `metadata` is field 1 of every kind; its last occurrence is the one kube writes.
    let meta = top_level_field(pb, 1).map_err(DecodeError::Protobuf)?;
    let meta = read_meta(meta.unwrap_or_default()).map_err(DecodeError::Protobuf)?;
    if meta.name.is_empty() {
        return Err(DecodeError::NoName);
    }
    let rv = parse_rv(meta.resource_version).map_err(|_| DecodeError::ResourceVersion {
        name: meta.name.to_string(),
        rv: meta.resource_version.to_string(),
    })?;
    // The selectors' view of the object, as `Skeleton::selectable_view` builds it from JSON.
    let mut view = json!({"metadata": {"name": meta.name, "namespace": meta.namespace}, "spec": {}, "status": {}});
    for path in selectable_paths(msg).iter() {
        let Some(v) = path.read(pb).map_err(bad)? else {
            continue;
        };
        let v = match v {
            FieldValue::Str(s) => Value::from(s),
            FieldValue::Bool(b) => Value::from(b),
            FieldValue::Int(i) => Value::from(i),
        };
        match path.path() {
            "status.podIPs[0].ip" => view["status"]["podIPs"] = json!([{ "ip": v }]),
            "type" => view["type"] = v,
            p => {
                let (top, key) = p.split_once('.').unwrap_or(("", p));
                view[top][key] = v;
            }
        }
    }
    let fields = shared_names(kube_wire::selector::selectable::selectable_fields(
        &info.group,
        &info.kind,
        info.namespaced,
        &[],
        &view,
    ));
    // Sorted by key; of a repeated key the later entry wins, as protobuf merges a map.
    let labels: Vec<(String, String)> = meta
        .labels
        .iter()
        .copied()
        .collect::<BTreeMap<&str, &str>>()
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Ok(ObjectRecord {
        namespace: meta.namespace.to_string(),
        name: meta.name.to_string(),
        uid: meta.uid.to_string(),
        rv,
        labels,
        fields,
    })
}

/// The last occurrence of the length-delimited field `tag` of a message, every field of
/// which is read.
fn top_level_field(buf: &[u8], tag: u32) -> Result<Option<&[u8]>, String> {
    let mut found = None;
    for field in kube_wire::proto::wire::fields(buf, "object").bytes() {
        let (t, v) = field.map_err(|e| e.to_string())?;
        if t == tag {
            found = Some(v);
        }
    }
    Ok(found)
}

/// The object's JSON without `kind`/`apiVersion`, copied into an exactly sized buffer (so no
/// list page or watch read buffer is kept alive by a cached object).
pub fn strip_type_meta(raw: &[u8]) -> Result<Bytes, DecodeError> {
    let raw = trim(raw);
    let mut rest = raw
        .strip_prefix(b"{")
        .ok_or_else(|| DecodeError::Json("not an object".into()))?;
    // kube encodes typed objects as {"kind":..,"apiVersion":..,...} and unstructured ones with
    // sorted keys {"apiVersion":..,"kind":..,...}; strip either when they lead.
    for _ in 0..2 {
        match leading_string_member(rest, &[b"\"kind\"", b"\"apiVersion\""]) {
            Some(after) => rest = after,
            None => break,
        }
    }
    if rest.first() == Some(&b'}') || !contains_member_elsewhere(rest) {
        let mut b = BytesMut::with_capacity(rest.len() + 1);
        b.put_u8(b'{');
        b.put_slice(rest);
        return Ok(b.freeze());
    }
    // Type meta not leading: rebuild without it (rare; never for kube-apiserver's own output).
    let mut v: Map<String, Value> =
        serde_json::from_slice(raw).map_err(|e| DecodeError::Json(e.to_string()))?;
    v.shift_remove("kind");
    v.shift_remove("apiVersion");
    let out = kube_wire::gofmt::escape_html(serde_json::to_vec(&v).expect("map serialises"));
    Ok(Bytes::from(out))
}

fn trim(raw: &[u8]) -> &[u8] {
    let start = raw
        .iter()
        .position(|c| !c.is_ascii_whitespace())
        .unwrap_or(raw.len());
    let end = raw
        .iter()
        .rposition(|c| !c.is_ascii_whitespace())
        .map_or(start, |e| e + 1);
    &raw[start..end]
}

/// If `s` starts with `"<key>":"<string without escapes>",` for one of `keys`, the rest after it.
fn leading_string_member<'a>(s: &'a [u8], keys: &[&[u8]]) -> Option<&'a [u8]> {
    for k in keys {
        if let Some(after_key) = s.strip_prefix(*k) {
            let v = after_key.strip_prefix(b":\"")?;
            let end = v.iter().position(|&c| c == b'"' || c == b'\\')?;
            if v[end] != b'"' {
                return None;
            }
            return v[end + 1..].strip_prefix(b",");
        }
    }
    None
}

/// Whether a top-level `"kind"` or `"apiVersion"` member may still follow (a cheap, conservative
/// check: any top-level key that is one of them, however spaced (`"kind" :`), or that has an
/// escape (`"\u006bind"` is `kind` too), is handled by the slow path).
fn contains_member_elsewhere(rest: &[u8]) -> bool {
    let mut depth = 0i32;
    let mut in_str = false;
    let mut esc = false;
    // The last byte outside strings that is not whitespace: a string at depth 0 after a `,`
    // (or first) is a member's key.
    let mut last: Option<u8> = None;
    for (i, &c) in rest.iter().enumerate() {
        if in_str {
            if esc {
                esc = false;
            } else if c == b'\\' {
                esc = true;
            } else if c == b'"' {
                in_str = false;
            }
            continue;
        }
        match c {
            b'"' => {
                let key = depth == 0 && matches!(last, None | Some(b','));
                if key && may_be_type_meta(rest.get(i + 1..).unwrap_or_default()) {
                    return true;
                }
                in_str = true;
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' => depth -= 1,
            _ => {}
        }
        if !c.is_ascii_whitespace() {
            last = Some(c);
        }
    }
    false
}

/// Whether the key whose text starts at `key` (after its opening quote) may be `kind` or
/// `apiVersion`: it is one of them, or it has an escape.
fn may_be_type_meta(key: &[u8]) -> bool {
    match key.iter().position(|&c| c == b'"' || c == b'\\') {
        Some(end) => key[end] == b'\\' || matches!(&key[..end], b"kind" | b"apiVersion"),
        None => false,
    }
}

/// The body with `metadata.resourceVersion` replaced by `rv` (a DELETED event for an object
/// moving out of a selector carries the previous state stamped with the event's RV).
pub fn restamp(body: &Bytes, old_rv: u64, rv: u64) -> Bytes {
    let needle = format!("\"resourceVersion\":\"{old_rv}\"");
    let hits: Vec<usize> = memchr::memmem::find_iter(body, needle.as_bytes()).collect();
    if let [at] = hits[..] {
        let mut b = BytesMut::with_capacity(body.len() + 8);
        b.put_slice(&body[..at]);
        b.put_slice(format!("\"resourceVersion\":\"{rv}\"").as_bytes());
        b.put_slice(&body[at + needle.len()..]);
        return b.freeze();
    }
    // Ambiguous (the same text elsewhere): edit the parsed object.
    let mut v: Map<String, Value> =
        serde_json::from_slice(body).expect("cached bodies are valid JSON");
    if let Some(Value::Object(m)) = v.get_mut("metadata") {
        m.insert("resourceVersion".into(), Value::String(rv.to_string()));
    }
    Bytes::from(kube_wire::gofmt::escape_html(
        serde_json::to_vec(&v).expect("map serialises"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

    fn pods() -> ResourceInfo {
        ResourceInfo::new("", "v1", "pods", "Pod", true)
    }

    #[test]
    fn decodes_pod_record_and_strips_type_meta() {
        let raw = br#"{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p","namespace":"d","uid":"u1","resourceVersion":"42","labels":{"b":"2","a":"1"}},"spec":{"nodeName":"n1","containers":[{"name":"c"}]},"status":{"phase":"Running","podIPs":[{"ip":"10.0.0.1"}]}}"#;
        let c = decode_object(&pods(), raw).unwrap();
        assert!(c.json().starts_with(br#"{"metadata":{"name":"p""#));
        assert_eq!(c.rec.rv, 42);
        assert_eq!(c.rec.key(), "d/p");
        assert_eq!(
            c.rec.labels,
            vec![("a".into(), "1".into()), ("b".into(), "2".into())]
        );
        assert_eq!(c.rec.field("spec.nodeName"), Some("n1"));
        assert_eq!(c.rec.field("status.phase"), Some("Running"));
        assert_eq!(c.rec.field("status.podIP"), Some("10.0.0.1"));
        assert_eq!(c.rec.field("metadata.namespace"), Some("d"));
        assert_eq!(c.rec.field("spec.hostNetwork"), Some("false"));
    }

    #[test]
    fn a_record_read_from_protobuf_is_the_one_read_from_json() {
        let fixture = |name: &str| {
            std::fs::read_to_string(format!(
                "{}/crates/kube-wire/src/proto/testdata/{name}.json",
                env!("CARGO_MANIFEST_DIR")
            ))
            .unwrap()
        };
        for (info, api_version, file) in [
            (pods(), "v1", "pod"),
            (
                ResourceInfo::new("", "v1", "nodes", "Node", false),
                "v1",
                "node",
            ),
            (
                ResourceInfo::new("", "v1", "services", "Service", true),
                "v1",
                "service",
            ),
            (
                ResourceInfo::new("", "v1", "secrets", "Secret", true),
                "v1",
                "secret",
            ),
            (
                ResourceInfo::new("", "v1", "events", "Event", true),
                "v1",
                "event",
            ),
            (
                ResourceInfo::new("apps", "v1", "replicasets", "ReplicaSet", true),
                "apps/v1",
                "replicaset",
            ),
            (
                ResourceInfo::new("batch", "v1", "jobs", "Job", true),
                "batch/v1",
                "job",
            ),
        ] {
            let json = fixture(file);
            let msg = kube_wire::proto::message_for(api_version, &info.kind).unwrap();
            let pb = kube_wire::proto::json_to_proto(msg, json.as_bytes()).unwrap();
            let want = decode_object(&info, json.as_bytes()).unwrap().rec;
            assert!(!want.fields.is_empty());
            assert_eq!(
                record_from_protobuf(&info, msg, &pb).unwrap(),
                want,
                "{file}"
            );
        }
        // What does not decode is refused, as malformed JSON is; so is an object without a
        // name or with a bad resourceVersion.
        let msg = kube_wire::proto::message_for("v1", "Pod").unwrap();
        assert!(matches!(
            record_from_protobuf(&pods(), msg, &[0x0a, 0x05, 0x0a]),
            Err(DecodeError::Protobuf(_))
        ));
        let pb = |json: &str| kube_wire::proto::json_to_proto(msg, json.as_bytes()).unwrap();
        assert_eq!(
            record_from_protobuf(&pods(), msg, &pb(r#"{"metadata":{"resourceVersion":"1"}}"#)),
            Err(DecodeError::NoName)
        );
        assert!(matches!(
            record_from_protobuf(
                &pods(),
                msg,
                &pb(r#"{"metadata":{"name":"p","resourceVersion":"x"}}"#)
            ),
            Err(DecodeError::ResourceVersion { .. })
        ));
    }

    #[test]
    fn an_object_in_protobuf_is_checked_whole_kept_as_sent_and_written_as_its_json() {
        let json = std::fs::read(format!(
            "{}/crates/kube-wire/src/proto/testdata/pod.json",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap();
        let info = pods();
        let msg = info.message.unwrap();
        let pb = kube_wire::proto::json_to_proto(msg, &json).unwrap();
        let c = decode_protobuf(&info, &pb).unwrap();
        assert!(c.is_protobuf());
        assert_eq!(&c.stored()[..], &pb[..], "stored as sent");
        assert_eq!(c.rec, decode_object(&info, &json).unwrap().rec);
        let want = kube_wire::proto::proto_to_json(msg, &pb, None).unwrap();
        assert_eq!(&c.json()[..], &want[..]);
        assert!(c.json().starts_with(br#"{"metadata":{"name":"#));
        assert_eq!(c.protobuf(|_| unreachable!("stored")), pb);
        // Only `metadata`, as PartialObjectMetadata needs it.
        let meta: Value = serde_json::from_slice(&c.metadata_json()).unwrap();
        let full: Value = serde_json::from_slice(&want).unwrap();
        assert_eq!(meta, json!({ "metadata": full["metadata"] }));
        // Restamped: the bytes kube writes for the restamped object.
        let re = c.restamped(99);
        assert_eq!(re.rec.rv, 99);
        let re_json = restamp(&Bytes::from(want.clone()), c.rec.rv, 99);
        assert_eq!(
            &re.stored()[..],
            &kube_wire::proto::json_to_proto(msg, &re_json).unwrap()[..]
        );
        assert_eq!(re.json(), re_json);
        assert!(re.same_object(&re.clone()) && !re.same_object(&c));
        // The same object stored as JSON is the same state.
        assert!(c.same_object(&decode_object(&info, &want).unwrap()));
    }

    #[test]
    fn restamping_protobuf_edits_the_wire_and_gives_metadata_to_an_object_without() {
        let msg = pods().message.unwrap();
        let pb = |j: &str| kube_wire::proto::json_to_proto(msg, j.as_bytes()).unwrap();
        let with = pb(
            r#"{"metadata":{"name":"p","resourceVersion":"5","labels":{"a":"b"}},"spec":{"nodeName":"n"}}"#,
        );
        assert_eq!(
            &restamp_protobuf(&with, 9)[..],
            &pb(
                r#"{"metadata":{"name":"p","resourceVersion":"9","labels":{"a":"b"}},"spec":{"nodeName":"n"}}"#
            )[..]
        );
        let without = pb(r#"{"spec":{"nodeName":"n"}}"#);
        assert_eq!(
            &restamp_protobuf(&without, 9)[..],
            &pb(r#"{"metadata":{"resourceVersion":"9"},"spec":{"nodeName":"n"}}"#)[..]
        );
        // Bytes that do not parse are kept.
        assert_eq!(&restamp_protobuf(&[0x0a, 0x05], 9)[..], &[0x0a, 0x05]);
    }

    #[test]
    fn protobuf_that_does_not_decode_whole_is_refused_though_its_record_reads() {
        let info = pods();
        let msg = info.message.unwrap();
        let ok = kube_wire::proto::json_to_proto(
            msg,
            br#"{"metadata":{"name":"p","namespace":"d","resourceVersion":"5"}}"#,
        )
        .unwrap();
        let meta = kube_wire::proto::envelope::field_slice(&ok, 1).unwrap();
        // spec { containers { name: "c", resources: <a field whose length runs past its end> } }
        let container = [0x0a, 0x01, b'c', 0x42, 0x02, 0x0a, 0x7f];
        let mut spec = vec![0x12, container.len() as u8];
        spec.extend_from_slice(&container);
        let mut pb = vec![0x0a, meta.len() as u8];
        pb.extend_from_slice(meta);
        pb.push(0x12);
        pb.push(spec.len() as u8);
        pb.extend_from_slice(&spec);
        // The record alone does not look inside containers…
        assert_eq!(record_from_protobuf(&info, msg, &pb).unwrap().name, "p");
        // …but the object is refused whole, as a malformed JSON object is.
        assert!(matches!(
            decode_protobuf(&info, &pb),
            Err(DecodeError::Protobuf(_))
        ));
        assert!(matches!(
            decode_protobuf(&info, b"not protobuf"),
            Err(DecodeError::Protobuf(_))
        ));
        assert!(matches!(
            decode_object(
                &info,
                br#"{"metadata":{"name":"p","resourceVersion":"5"},"spec":{"#
            ),
            Err(DecodeError::Json(_))
        ));
        // A persisted object is read in the form it was stored in.
        assert!(decode_stored(&info, &ok).unwrap().is_protobuf());
        let j = br#"{"metadata":{"name":"p","resourceVersion":"5"}}"#;
        assert!(!decode_stored(&info, j).unwrap().is_protobuf());
    }

    #[test]
    fn list_items_and_unstructured_objects() {
        let item = br#"{"metadata":{"name":"p","resourceVersion":"1"}}"#;
        assert_eq!(&decode_object(&pods(), item).unwrap().json()[..], &item[..]);
        let cr = br#"{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w","resourceVersion":"3"},"spec":{"kind":"inner"}}"#;
        let w = ResourceInfo::new("example.com", "v1", "widgets", "Widget", true);
        let c = decode_object(&w, cr).unwrap();
        assert_eq!(
            &c.json()[..],
            br#"{"metadata":{"name":"w","resourceVersion":"3"},"spec":{"kind":"inner"}}"#
        );
        let odd = br#"{"metadata":{"name":"w","resourceVersion":"3"},"kind":"Widget"}"#;
        assert_eq!(
            &decode_object(&w, odd).unwrap().json()[..],
            br#"{"metadata":{"name":"w","resourceVersion":"3"}}"#
        );
    }

    /// Found by fuzzing (target `upstream`): a top-level `kind` spaced from its colon, or
    /// spelled with an escape, stayed in the stored body, and the object a client got back
    /// carried `kind` twice.
    #[test]
    fn strips_type_meta_however_it_is_written() {
        let w = ResourceInfo::new("example.com", "v1", "widgets", "Widget", true);
        for raw in [
            &b"{\"apiVersion\":\"example.com/v1\",\"kind\"\r:\"Widget\",\"metadata\":{\"name\":\"w\",\"resourceVersion\":\"3\"}}"[..],
            br#"{"metadata":{"name":"w","resourceVersion":"3"}, "kind" : "Widget"}"#,
            br#"{"\u006bind":"Widget","metadata":{"name":"w","resourceVersion":"3"}}"#,
            br#"{"metadata":{"name":"w","resourceVersion":"3"},"api\u0056ersion":"example.com/v1"}"#,
        ] {
            let body = decode_object(&w, raw).unwrap().json();
            assert_eq!(
                &body[..],
                br#"{"metadata":{"name":"w","resourceVersion":"3"}}"#,
                "{}",
                String::from_utf8_lossy(raw)
            );
        }
        // A nested `kind`, or one that is a value, stays.
        let nested =
            br#"{"metadata":{"name":"w","resourceVersion":"3"},"spec":{"kind" :"x","a":"kind"}}"#;
        assert_eq!(&decode_object(&w, nested).unwrap().json()[..], &nested[..]);
    }

    #[test]
    fn rejects_bad_objects() {
        assert!(matches!(
            decode_object(&pods(), b"[1]"),
            Err(DecodeError::Json(_))
        ));
        assert_eq!(
            decode_object(&pods(), br#"{"metadata":{"resourceVersion":"1"}}"#),
            Err(DecodeError::NoName)
        );
        assert!(matches!(
            decode_object(
                &pods(),
                br#"{"metadata":{"name":"a","resourceVersion":"x"}}"#
            ),
            Err(DecodeError::ResourceVersion { .. })
        ));
        // Past int64 (etcd's revisions are int64; the cache's continue tokens too).
        for rv in ["9223372036854775808", "18446744073709551615", "-1", "+1"] {
            let body = format!(r#"{{"metadata":{{"name":"a","resourceVersion":"{rv}"}}}}"#);
            assert!(matches!(
                decode_object(&pods(), body.as_bytes()),
                Err(DecodeError::ResourceVersion { .. })
            ));
        }
        decode_object(
            &pods(),
            br#"{"metadata":{"name":"a","resourceVersion":"9223372036854775807"}}"#,
        )
        .unwrap();
        assert_eq!(parse_rv("9223372036854775807"), Ok(i64::MAX as u64));
        for bad in ["9223372036854775808", "-1", "+1", ""] {
            assert!(parse_rv(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn charges_follow_the_version_and_its_protobuf_copy_unless_under_pressure() {
        use crate::cache::budget::MemoryBudget;
        let body = br#"{"metadata":{"name":"p","namespace":"d","resourceVersion":"5"}}"#;
        let budget = MemoryBudget::new(100_000);
        let account = budget.account();
        let c = decode_object(&pods(), body).unwrap().charged(&account);
        let base = c.charged_bytes();
        assert!(base > body.len() as u64);
        assert_eq!(budget.used(), base);
        // The copy is kept and counted; later readers do not transcode again.
        let mut calls = 0;
        let pb = c.protobuf(|_| {
            calls += 1;
            Bytes::from_static(&[0u8; 1000])
        });
        assert_eq!((pb.len(), budget.used()), (1000, base + 1000));
        c.protobuf(|_| unreachable!("kept"));
        assert_eq!(calls, 1);
        // A clone is uncharged and carries no copy; dropping the version releases all of it.
        let twin = c.clone();
        assert_eq!(twin.charged_bytes(), 0);
        drop(c);
        assert_eq!(budget.used(), 0);
        // Under pressure (80 % of the limit) a copy is made for the reader only.
        let _held = account.charge(85_000);
        let c = decode_object(&pods(), body).unwrap().charged(&account);
        let used = budget.used();
        assert_eq!(c.protobuf(|_| Bytes::from_static(b"x")).len(), 1);
        assert_eq!(
            c.protobuf(|_| Bytes::from_static(b"yy")).len(),
            2,
            "not kept"
        );
        assert_eq!(budget.used(), used);
        assert_eq!(budget.shed.protobuf_copies.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn restamps_the_resource_version() {
        let b = Bytes::from_static(br#"{"metadata":{"name":"p","resourceVersion":"5"},"spec":{}}"#);
        assert_eq!(
            &restamp(&b, 5, 9)[..],
            br#"{"metadata":{"name":"p","resourceVersion":"9"},"spec":{}}"#
        );
        let amb = Bytes::from_static(
            br#"{"metadata":{"annotations":{"resourceVersion":"5"},"resourceVersion":"5"}}"#,
        );
        let v: Value = serde_json::from_slice(&restamp(&amb, 5, 9)).unwrap();
        assert_eq!(v["metadata"]["resourceVersion"], "9");
        assert_eq!(v["metadata"]["annotations"]["resourceVersion"], "5");
    }
}
