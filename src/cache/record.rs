//! Ingest: turning one upstream object's JSON into the stored body and the small record that
//! selectors and indexes read, in one borrowed pass (no JSON tree of the whole object).
//!
//! The body is stored *without* its `kind`/`apiVersion` prefix, starting `{"metadata":…`, so a
//! built-in LIST item is the body as is, and a watch frame is a constant head, the body minus
//! its opening brace, and a constant tail — no re-encoding, ever.
//!
//! Owns the decoding of one object ([`decode_object`]) and of an upstream resourceVersion
//! ([`parse_rv`]), and the byte-level edits of a stored body
//! ([`strip_type_meta`], [`restamp`]). It must not keep any state: storing objects is the
//! store's job, and the reflector decides what to ingest.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};

use bytes::{BufMut, Bytes, BytesMut};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::ResourceInfo;
use super::budget::{Account, Charge, Pressure};

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
    /// Selectable field values of the kind (metadata.name, metadata.namespace, spec.nodeName…).
    pub fields: Vec<(String, String)>,
}

impl ObjectRecord {
    /// A selectable field's value.
    pub fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(k, _)| k == name)
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

/// One cached object: its body (exactly sized, shared) and its record.
#[derive(Debug)]
pub struct Cached {
    /// JSON without `kind`/`apiVersion`, starting with `{`.
    pub body: Bytes,
    /// Extracted record.
    pub rec: ObjectRecord,
    /// The object's protobuf message, transcoded from `body` on first use by a protobuf
    /// client and shared by every later one ([`Cached::protobuf`]): empty when it does not
    /// transcode. Derived from `body`: a clone starts without it (a clone is made to be
    /// changed: a bridge's restamped deletion must not carry the old bytes), and equality
    /// ignores it.
    protobuf: OnceLock<Bytes>,
    /// What this version counts for in the memory budget, once a cache holds it
    /// ([`Cached::charged`]); the protobuf copy is added to it.
    charge: Option<Charge>,
}

impl Clone for Cached {
    /// A copy without the protobuf copy (see [`Cached::protobuf`]) and uncharged: a clone is
    /// made to be changed, and is charged when a cache takes it.
    fn clone(&self) -> Self {
        Cached::new(self.body.clone(), self.rec.clone())
    }
}

impl PartialEq for Cached {
    fn eq(&self, other: &Self) -> bool {
        self.body == other.body && self.rec == other.rec
    }
}

impl Eq for Cached {}

/// What an object's record, its key in the store and the store's tree node cost beside the
/// body, apart from the strings counted one by one.
const RECORD_OVERHEAD: u64 = 256;

impl Cached {
    /// An object of `body` (JSON without type meta) and its record.
    pub fn new(body: Bytes, rec: ObjectRecord) -> Self {
        Cached {
            body,
            rec,
            protobuf: OnceLock::new(),
            charge: None,
        }
    }

    /// This version, counted in `account` for as long as it lives (the cache's writer charges
    /// every version it stores). Its size: the body, the record's strings (twice the key, as
    /// the store keys by it) and a fixed overhead.
    pub fn charged(mut self, account: &Arc<Account>) -> Self {
        let r = &self.rec;
        let strings: usize = [&r.namespace, &r.name, &r.uid]
            .iter()
            .map(|s| s.len())
            .sum::<usize>()
            + r.labels
                .iter()
                .chain(&r.fields)
                .map(|(k, v)| k.len() + v.len() + 48)
                .sum::<usize>();
        let bytes = self.body.len() + strings + r.namespace.len() + r.name.len();
        self.charge = Some(account.charge(bytes as u64 + RECORD_OVERHEAD));
        self
    }

    /// The bytes this version counts for in the memory budget (0 when uncharged).
    pub fn charged_bytes(&self) -> u64 {
        self.charge.as_ref().map_or(0, Charge::bytes)
    }

    /// The object's protobuf message, transcoded from `body` by `transcode` on first use and
    /// kept for every later reader (an empty message when it does not transcode) — unless the
    /// memory budget is under pressure ([`Pressure::Soft`]), when it is transcoded for this
    /// reader only.
    pub fn protobuf(&self, transcode: impl FnOnce(&Bytes) -> Bytes) -> Bytes {
        if let Some(b) = self.protobuf.get() {
            return b.clone();
        }
        let budget = self.charge.as_ref().map(|c| c.account().budget());
        if let Some(b) = budget.filter(|b| b.pressure() >= Pressure::Soft) {
            b.shed.protobuf_copies.fetch_add(1, Ordering::Relaxed);
            return transcode(&self.body);
        }
        let mut made = false;
        let b = self.protobuf.get_or_init(|| {
            made = true;
            transcode(&self.body)
        });
        if made && let Some(c) = &self.charge {
            c.add(b.len() as u64);
        }
        b.clone()
    }
}

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

/// An object as the cache itself stored it (a persisted body: without `kind`/`apiVersion`
/// already, and checksummed on disk), decoded as [`decode_object`] does but without its scan for
/// type meta; copied into an exactly sized buffer all the same, so that no object keeps a whole
/// segment file's buffer alive.
pub fn decode_stored(info: &ResourceInfo, raw: &[u8]) -> Result<Cached, DecodeError> {
    decode_with(info, raw, |r| Ok(Bytes::copy_from_slice(r)))
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
    let fields = if needs_full_parse(info) {
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
    };
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

/// The record of an object from its protobuf message (`msg`, its kind's), read field by field
/// without decoding the object: the record [`decode_object`] reads from the same object's JSON.
/// Bytes that do not decode, a missing name or a bad resourceVersion are refused as malformed
/// JSON is.
pub fn record_from_protobuf(
    info: &ResourceInfo,
    msg: kube_wire::proto::MessageRef,
    pb: &[u8],
) -> Result<ObjectRecord, DecodeError> {
    use kube_wire::proto::fields::{FieldValue, has_scalar, read_scalar, read_string_map};
    let bad = |e: kube_wire::proto::ProtoError| DecodeError::Protobuf(e.to_string());
    if needs_full_parse(info) {
        // Kinds whose selectable fields the paths below do not cover (events): via JSON.
        let json = kube_wire::proto::proto_to_json(msg, pb, None).map_err(bad)?;
        return decode_object(info, &json).map(|c| c.rec);
    }
    let text = |path: &str| -> Result<String, DecodeError> {
        Ok(read_scalar(msg, pb, path)
            .map_err(bad)?
            .map(|v| v.to_string())
            .unwrap_or_default())
    };
    let name = text("metadata.name")?;
    if name.is_empty() {
        return Err(DecodeError::NoName);
    }
    let rv_text = text("metadata.resourceVersion")?;
    let rv = parse_rv(&rv_text).map_err(|_| DecodeError::ResourceVersion {
        name: name.clone(),
        rv: rv_text.clone(),
    })?;
    let namespace = text("metadata.namespace")?;
    // The selectors' view of the object, as `Skeleton::selectable_view` builds it from JSON.
    let mut view =
        json!({"metadata": {"name": name, "namespace": namespace}, "spec": {}, "status": {}});
    for path in SELECTABLE_PATHS.iter().filter(|p| has_scalar(msg, p)) {
        let Some(v) = read_scalar(msg, pb, path).map_err(bad)? else {
            continue;
        };
        let v = match v {
            FieldValue::Str(s) => Value::from(s),
            FieldValue::Bool(b) => Value::from(b),
            FieldValue::Int(i) => Value::from(i),
        };
        match *path {
            "status.podIPs[0].ip" => view["status"]["podIPs"] = json!([{ "ip": v }]),
            "type" => view["type"] = v,
            p => {
                let (top, key) = p.split_once('.').unwrap_or(("", p));
                view[top][key] = v;
            }
        }
    }
    let fields = kube_wire::selector::selectable::selectable_fields(
        &info.group,
        &info.kind,
        info.namespaced,
        &[],
        &view,
    );
    let mut labels: Vec<(String, String)> = read_string_map(msg, pb, "metadata.labels")
        .map_err(bad)?
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    labels.sort();
    Ok(ObjectRecord {
        namespace,
        name,
        uid: text("metadata.uid")?,
        rv,
        labels,
        fields,
    })
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

    fn pods() -> ResourceInfo {
        ResourceInfo::new("", "v1", "pods", "Pod", true)
    }

    #[test]
    fn decodes_pod_record_and_strips_type_meta() {
        let raw = br#"{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p","namespace":"d","uid":"u1","resourceVersion":"42","labels":{"b":"2","a":"1"}},"spec":{"nodeName":"n1","containers":[{"name":"c"}]},"status":{"phase":"Running","podIPs":[{"ip":"10.0.0.1"}]}}"#;
        let c = decode_object(&pods(), raw).unwrap();
        assert!(c.body.starts_with(br#"{"metadata":{"name":"p""#));
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
    fn list_items_and_unstructured_objects() {
        let item = br#"{"metadata":{"name":"p","resourceVersion":"1"}}"#;
        assert_eq!(&decode_object(&pods(), item).unwrap().body[..], &item[..]);
        let cr = br#"{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w","resourceVersion":"3"},"spec":{"kind":"inner"}}"#;
        let w = ResourceInfo::new("example.com", "v1", "widgets", "Widget", true);
        let c = decode_object(&w, cr).unwrap();
        assert_eq!(
            &c.body[..],
            br#"{"metadata":{"name":"w","resourceVersion":"3"},"spec":{"kind":"inner"}}"#
        );
        let odd = br#"{"metadata":{"name":"w","resourceVersion":"3"},"kind":"Widget"}"#;
        assert_eq!(
            &decode_object(&w, odd).unwrap().body[..],
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
            let body = decode_object(&w, raw).unwrap().body;
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
        assert_eq!(&decode_object(&w, nested).unwrap().body[..], &nested[..]);
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
