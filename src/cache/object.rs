//! One cached object version: the bytes the upstream sent (its *stored form*), the small record
//! selectors and indexes read, and the forms derived from the stored one on demand.
//!
//! Built-in kinds are read from the upstream in protobuf, the encoding every Kubernetes
//! component asks for, so their stored form is the kind's protobuf message (no envelope): a
//! protobuf LIST or watch event is those bytes as they came. JSON is made from them on demand
//! ([`Cached::json`], [`Cached::write_json`]) by [`kube_wire::proto::proto_to_json`], the bytes
//! kube-apiserver writes for the same object, and is not kept: a JSON watch event is encoded
//! once per event and shared by the event log; a LIST writes each item's JSON straight into its
//! chunk. Custom resources (and kinds an upstream answers only in JSON) are stored as JSON
//! without `kind`/`apiVersion`, starting `{"metadata":`, and their protobuf form (only ever a
//! PartialObjectMetadata) is derived from that JSON once and kept ([`Cached::protobuf`]).
//!
//! Owns the object's bytes and what it costs in the memory budget. Ingest (reading upstream
//! bytes into a [`Cached`]) is [`super::record`]'s; storing versions is the store's.

use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use kube_wire::proto::{self, MessageRef};

use super::budget::{Account, Charge, Pressure};
use super::record::{ObjectRecord, restamp, restamp_protobuf};

/// The form an object's bytes are stored in.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Stored {
    /// JSON without `kind`/`apiVersion`, starting with `{`.
    Json(Bytes),
    /// The kind's protobuf message (without the `k8s\0` envelope) and which message it is.
    Protobuf(Bytes, MessageRef),
}

/// One cached object version: its stored bytes (exactly sized, shared) and its record.
#[derive(Debug)]
pub struct Cached {
    stored: Stored,
    /// Extracted record.
    pub rec: ObjectRecord,
    /// For an object stored as JSON, its protobuf message, transcoded on first use by a
    /// protobuf client and shared by every later one ([`Cached::protobuf`]): empty when it
    /// does not transcode. A clone starts without it (a clone is made to be changed: a
    /// bridge's restamped deletion must not carry the old bytes), and equality ignores it.
    protobuf: OnceLock<Bytes>,
    /// What this version counts for in the memory budget, once a cache holds it
    /// ([`Cached::charged`]); a kept protobuf copy is added to it.
    charge: Option<Charge>,
}

impl Clone for Cached {
    /// A copy without a derived protobuf copy and uncharged: a clone is made to be changed,
    /// and is charged when a cache takes it.
    fn clone(&self) -> Self {
        Cached::with(self.stored.clone(), self.rec.clone())
    }
}

impl PartialEq for Cached {
    fn eq(&self, other: &Self) -> bool {
        self.stored == other.stored && self.rec == other.rec
    }
}

impl Eq for Cached {}

/// What an object's record, its key in the store and the store's tree node cost beside the
/// stored bytes, apart from the strings counted one by one.
const RECORD_OVERHEAD: u64 = 256;

impl Cached {
    /// An object stored as `body` (JSON without type meta) with its record.
    pub fn new(body: Bytes, rec: ObjectRecord) -> Self {
        Cached::with(Stored::Json(body), rec)
    }

    /// An object stored as its protobuf message `pb` (of `msg`, without envelope), with its
    /// record. The caller has checked that `pb` decodes ([`super::record::decode_protobuf`]).
    pub fn from_protobuf(pb: Bytes, msg: MessageRef, rec: ObjectRecord) -> Self {
        Cached::with(Stored::Protobuf(pb, msg), rec)
    }

    fn with(stored: Stored, rec: ObjectRecord) -> Self {
        Cached {
            stored,
            rec,
            protobuf: OnceLock::new(),
            charge: None,
        }
    }

    /// The stored bytes: protobuf ([`Cached::is_protobuf`]) or JSON without type meta. What
    /// the durable log keeps and what the object's size is measured by.
    pub fn stored(&self) -> &Bytes {
        match &self.stored {
            Stored::Json(b) | Stored::Protobuf(b, _) => b,
        }
    }

    /// Whether `other` is the same object state: the same stored bytes, or, stored in the
    /// other form (a cache persisted as JSON, listed again in protobuf), the same JSON.
    pub fn same_object(&self, other: &Cached) -> bool {
        match (&self.stored, &other.stored) {
            (Stored::Json(a), Stored::Json(b)) => a == b,
            (Stored::Protobuf(a, _), Stored::Protobuf(b, _)) => a == b,
            _ => self.json() == other.json(),
        }
    }

    /// Whether the stored form is the kind's protobuf message.
    pub fn is_protobuf(&self) -> bool {
        matches!(self.stored, Stored::Protobuf(..))
    }

    /// The object's JSON without `kind`/`apiVersion` (starting `{"metadata":`): the stored
    /// bytes, or made from the stored protobuf for this caller (not kept).
    pub fn json(&self) -> Bytes {
        match &self.stored {
            Stored::Json(b) => b.clone(),
            Stored::Protobuf(..) => {
                let mut out = Vec::new();
                self.write_json(&mut out);
                Bytes::from(out)
            }
        }
    }

    /// Appends the object's JSON without `kind`/`apiVersion` to `out` (a LIST's chunk).
    pub fn write_json(&self, out: &mut Vec<u8>) {
        match &self.stored {
            Stored::Json(b) => out.extend_from_slice(b),
            Stored::Protobuf(pb, msg) => {
                // Ingest decoded these bytes with the checking decoder (`record::decode_protobuf`,
                // restamping changes only the resourceVersion): the trusted one writes the same
                // JSON without checking their raw JSON (managedFields) again.
                if let Err(e) = proto::stored_proto_to_json_into(*msg, pb, None, out) {
                    // Unreachable: ingest decoded these very bytes with the same function.
                    // Never half an object: its identity, as a client can still key it.
                    tracing::error!(
                        object = %self.rec.key(), error = %e,
                        "a stored protobuf object no longer decodes"
                    );
                    out.extend_from_slice(&self.identity_json());
                }
            }
        }
    }

    /// `{"metadata":{"name":…,"namespace":…,"uid":…,"resourceVersion":…}}` from the record.
    fn identity_json(&self) -> Vec<u8> {
        let r = &self.rec;
        let mut meta = serde_json::Map::new();
        meta.insert("name".into(), r.name.clone().into());
        if !r.namespace.is_empty() {
            meta.insert("namespace".into(), r.namespace.clone().into());
        }
        if !r.uid.is_empty() {
            meta.insert("uid".into(), r.uid.clone().into());
        }
        meta.insert("resourceVersion".into(), r.rv.to_string().into());
        let v = serde_json::json!({ "metadata": meta });
        serde_json::to_vec(&v).unwrap_or_default()
    }

    /// Appends the JSON of a protobuf object's `metadata` (its `ObjectMeta`, `{}` when it has
    /// none) to `out`, decoding only that field: `false` (and `out` as it was) for an object
    /// stored as JSON, whose metadata is read by parsing it.
    pub fn write_protobuf_metadata(&self, out: &mut Vec<u8>) -> bool {
        let Stored::Protobuf(pb, _) = &self.stored else {
            return false;
        };
        let Some(meta_msg) = proto::message(proto::schema::OBJECT_META) else {
            return false;
        };
        let meta = proto::envelope::field_slice(pb, 1).unwrap_or_default();
        // Part of bytes ingest decoded, as in `write_json`.
        proto::stored_proto_to_json_into(meta_msg, meta, None, out).is_ok()
    }

    /// The object's `{"metadata":…}` alone as JSON (what PartialObjectMetadata and a Table row
    /// without the object need): for a protobuf object only its `metadata` field (field 1 of
    /// every kind) is decoded, not the rest.
    pub fn metadata_json(&self) -> Bytes {
        let mut out = Vec::with_capacity(self.stored().len() + 16);
        out.extend_from_slice(b"{\"metadata\":");
        if self.write_protobuf_metadata(&mut out) {
            out.push(b'}');
            Bytes::from(out)
        } else {
            self.json()
        }
    }

    /// This version stamped with resourceVersion `rv` (a DELETED event for an object moving
    /// out of a selector carries the previous state with the event's RV), uncharged.
    pub fn restamped(&self, rv: u64) -> Cached {
        let stored = match &self.stored {
            Stored::Json(b) => Stored::Json(restamp(b, self.rec.rv, rv)),
            Stored::Protobuf(pb, msg) => Stored::Protobuf(restamp_protobuf(pb, rv), *msg),
        };
        let mut rec = self.rec.clone();
        rec.rv = rv;
        Cached::with(stored, rec)
    }

    /// This version, counted in `account` for as long as it lives (the cache's writer charges
    /// every version it stores). Its size: the stored bytes, the record's strings (twice the
    /// key, as the store keys by it) and a fixed overhead.
    pub fn charged(mut self, account: &Arc<Account>) -> Self {
        let r = &self.rec;
        let strings: usize = [&r.namespace, &r.name, &r.uid]
            .iter()
            .map(|s| s.len())
            .sum::<usize>()
            + r.labels
                .iter()
                .map(|(k, v)| k.len() + v.len() + 48)
                .sum::<usize>()
            // A field's name is shared by every object: its value and the pair.
            + r.fields.iter().map(|(_, v)| v.len() + 40).sum::<usize>();
        let bytes = self.stored().len() + strings + r.namespace.len() + r.name.len();
        self.charge = Some(account.charge(bytes as u64 + RECORD_OVERHEAD));
        self
    }

    /// The bytes this version counts for in the memory budget (0 when uncharged).
    pub fn charged_bytes(&self) -> u64 {
        self.charge.as_ref().map_or(0, Charge::bytes)
    }

    /// The object's protobuf message: the stored bytes of a protobuf object; for one stored as
    /// JSON, transcoded from it by `transcode` on first use and kept for every later reader (an
    /// empty message when it does not transcode) — unless the memory budget is under pressure
    /// ([`Pressure::Soft`]), when it is transcoded for this reader only.
    pub fn protobuf(&self, transcode: impl FnOnce(&Bytes) -> Bytes) -> Bytes {
        let body = match &self.stored {
            Stored::Protobuf(pb, _) => return pb.clone(),
            Stored::Json(b) => b,
        };
        if let Some(b) = self.protobuf.get() {
            return b.clone();
        }
        let budget = self.charge.as_ref().map(|c| c.account().budget());
        if let Some(b) = budget.filter(|b| b.pressure() >= Pressure::Soft) {
            b.shed.protobuf_copies.fetch_add(1, Ordering::Relaxed);
            return transcode(body);
        }
        let mut made = false;
        let b = self.protobuf.get_or_init(|| {
            made = true;
            transcode(body)
        });
        if made && let Some(c) = &self.charge {
            c.add(b.len() as u64);
        }
        b.clone()
    }
}
