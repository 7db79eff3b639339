//! The cache's answers in the forms other than plain JSON — a `meta.k8s.io/v1` Table, or
//! PartialObjectMetadata(List) — for a LIST, a GET and watch events, and the GET of an object as
//! plain JSON.
//!
//! Printing is [`kube_wire::table`]'s, the simulator's own printer, so the cache prints exactly
//! what the simulator prints, with the [`TablePrinter`] the router chose (a kind's printer, or a
//! custom resource's CRD columns). This module turns cached objects ([`Cached`]: stored bodies
//! without type meta) into its input and its output into responses and watch frames. Age-like cells
//! depend on the clock: each answer reads it once.
//!
//! It must not choose the form ([`super::form`] does, and says which kinds are printed like
//! kube), read or wait for the cache (the router and the handlers hand it the objects), nor
//! decide which watcher gets which frame ([`super::watch`] and the event log's shared frames do).

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http::{Response, StatusCode};
use serde_json::{Map, Value, json};

use super::form::Form;
use crate::cache::{Cached, ResourceInfo};
use kube_wire::event::{EventType, bookmark_frame as json_bookmark_frame, bookmark_object};
use kube_wire::negotiate::Encoding;
use kube_wire::response::{
    Body, ItemWriter, ListParts, json_response, list_head, stream_list_encoded,
};
use kube_wire::table::{self as printer, TablePrinter, to_go_json};

/// The metadata of a list answer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListMeta {
    /// The list's resourceVersion (the snapshot's).
    pub resource_version: u64,
    /// The `continue` token of a page that is not the last.
    pub continue_token: Option<String>,
    /// Objects after this page (set only when counting them is allowed: no selectors).
    pub remaining_item_count: Option<u64>,
    /// `shardInfo.selector`: the shard selector applied, in kube's canonical form (a typed
    /// list's only, as kube sets it).
    pub shard_info: Option<String>,
}

impl ListMeta {
    /// The `metadata` member of the list, as kube encodes `metav1.ListMeta`.
    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        m.insert(
            "resourceVersion".into(),
            json!(self.resource_version.to_string()),
        );
        if let Some(t) = &self.continue_token {
            m.insert("continue".into(), json!(t));
        }
        if let Some(n) = self.remaining_item_count {
            m.insert("remainingItemCount".into(), json!(n));
        }
        if let Some(s) = &self.shard_info {
            m.insert("shardInfo".into(), json!({ "selector": s }));
        }
        Value::Object(m)
    }
}

/// Seconds since the UNIX epoch, now: the clock Age cells are printed against.
pub fn now_unix() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// A cached object as the printers read it for `form`: `kind` and `apiVersion`, then its
/// JSON — only its `metadata` for a PartialObjectMetadata ([`Cached::metadata_json`]: a
/// protobuf object is not decoded whole for it).
fn value_of(info: &ResourceInfo, obj: &Cached, form: &Form) -> Value {
    let json = match form {
        Form::Metadata => obj.metadata_json(),
        _ => obj.json(),
    };
    printer::object_value(&info.kind, &info.api_version(), &json)
}

/// An item of a list answer: a cached object, as the store shares it (`&Arc<Cached>`) or
/// borrowed (`&Cached`, copied when the answer must own it).
pub trait ListItem<'a> {
    /// The object.
    fn cached(&self) -> &'a Cached;
    /// The object, owned by the answer while it streams.
    fn shared(self) -> Arc<Cached>;
}

impl<'a> ListItem<'a> for &'a Cached {
    fn cached(&self) -> &'a Cached {
        self
    }
    fn shared(self) -> Arc<Cached> {
        Arc::new(self.clone())
    }
}

impl<'a> ListItem<'a> for &'a Arc<Cached> {
    fn cached(&self) -> &'a Cached {
        self
    }
    fn shared(self) -> Arc<Cached> {
        Arc::clone(self)
    }
}

/// Below this many stored bytes, a JSON list of objects stored in protobuf is transcoded
/// before it is sent (its exact length decides gzip as kube decides it); above, part by part
/// on blocking threads as the body is sent ([`super::parts`]), so that an answer holds a few
/// parts of JSON, not all of it.
const EAGER_JSON_BYTES: usize = 1 << 20;

/// The plain JSON List of `items`: the stored bytes of JSON objects, and the JSON of protobuf
/// ones made as the body is sent (a large list) or before (a small one).
fn json_list<'a, I: ListItem<'a>>(
    info: &ResourceInfo,
    items: impl Iterator<Item = I>,
    list_meta: &Value,
    gzip: bool,
) -> Response<Body> {
    let head = list_head(&info.list_kind(), &info.api_version(), list_meta);
    let items: Vec<Arc<Cached>> = items.map(ListItem::shared).collect();
    let stored = stored_bytes(&items);
    if stored < EAGER_JSON_BYTES || !items.iter().any(|c| c.is_protobuf()) {
        let items = items.iter().map(|c| info.list_item(c)).collect();
        return stream_list_encoded(head, items, gzip).0;
    }
    let info = info.clone();
    let write: ItemWriter<Arc<Cached>> = Box::new(move |c, out| info.write_list_item(c, out));
    // A pod's JSON is about 1.45 times its protobuf.
    in_parts(head, items, write, |c| c.stored().len() * 3 / 2, gzip)
}

/// A LIST answer of `items` (in order) in `form`: the kind's List, a Table, or a
/// PartialObjectMetadataList (the protobuf forms by [`super::protobuf`]); gzip-compressed when
/// `gzip` (the client accepts it) and the body is large, as kube-apiserver does. Tables are
/// printed by `p`. Objects are printed one at a time (one parsed object alive per thread), a
/// large list's on blocking threads.
pub fn list_response<'a, I: ListItem<'a>>(
    info: &ResourceInfo,
    p: &TablePrinter,
    items: impl IntoIterator<Item = I>,
    meta: &ListMeta,
    form: &Form,
    gzip: bool,
) -> Response<Body> {
    let list_meta = meta.to_value();
    let items = items.into_iter();
    match form {
        Form::Json => json_list(info, items, &list_meta, gzip),
        Form::Table { include_object } => {
            table_list(info, p, items, &list_meta, *include_object, gzip)
        }
        Form::Metadata => metadata_list(info, items, &list_meta, gzip),
        Form::Protobuf | Form::MetadataProtobuf => {
            super::protobuf::list_response(info, items.map(|c| c.cached()), meta, form, gzip)
        }
    }
}

/// A Table of `items`: printed before it is sent (a small list), or part by part on blocking
/// threads as the body is sent ([`super::parts`]; printing a row parses its object, about
/// 0.1 ms a pod, which must not hold a runtime worker for a large list).
fn table_list<'a, I: ListItem<'a>>(
    info: &ResourceInfo,
    p: &TablePrinter,
    items: impl Iterator<Item = I>,
    list_meta: &Value,
    include_object: printer::IncludeObject,
    gzip: bool,
) -> Response<Body> {
    let form = Form::Table { include_object };
    let now = now_unix();
    let items: Vec<Arc<Cached>> = items.map(ListItem::shared).collect();
    let stored = stored_bytes(&items);
    let head = String::from_utf8(p.table_list_head(list_meta));
    let head = match head {
        Ok(head) if stored >= EAGER_JSON_BYTES => head,
        _ => {
            let body = p.table_list(
                &info.group,
                &info.kind,
                items.iter().map(|c| value_of(info, c, &form)),
                list_meta,
                include_object,
                now,
            );
            return list_body_response(body, gzip);
        }
    };
    let (info, p) = (info.clone(), p.clone());
    let write: ItemWriter<Arc<Cached>> = Box::new(move |c, out| {
        let mut metadata = Vec::new();
        let metadata = (include_object == printer::IncludeObject::Metadata
            && c.write_protobuf_metadata(&mut metadata))
        .then_some(&metadata[..]);
        // A row whose object is not written from the tree (none, or metadata written from the
        // protobuf) needs only the cells: a built-in printer's are read without the managed
        // fields, half of a pod's JSON (a custom resource's columns may name any field).
        let cells_only = include_object == printer::IncludeObject::None || metadata.is_some();
        let obj = if cells_only && !p.is_crd() {
            printer::printed_value(&info.kind, &info.api_version(), &c.json())
        } else {
            value_of(&info, c, &form)
        };
        p.write_table_row(
            &info.group,
            &info.kind,
            &obj,
            include_object,
            now,
            metadata,
            out,
        );
    });
    // A pod's row (with its metadata) is somewhat smaller than its protobuf.
    in_parts(head, items, write, |c| c.stored().len(), gzip)
}

/// A PartialObjectMetadataList of `items`: made before it is sent (a small list), or part by
/// part on blocking threads as the body is sent ([`super::parts`]; each item parses its
/// object's metadata).
fn metadata_list<'a, I: ListItem<'a>>(
    info: &ResourceInfo,
    items: impl Iterator<Item = I>,
    list_meta: &Value,
    gzip: bool,
) -> Response<Body> {
    let items: Vec<Arc<Cached>> = items.map(ListItem::shared).collect();
    let stored = stored_bytes(&items);
    let head = match String::from_utf8(printer::metadata_list_head(list_meta)) {
        Ok(head) if !items.is_empty() => head,
        // No items: `"items":null`.
        _ => return list_body_response(printer::metadata_list([], list_meta), gzip),
    };
    if stored < EAGER_JSON_BYTES {
        let items = items
            .iter()
            .map(|c| {
                let mut item = Vec::with_capacity(c.stored().len());
                write_metadata_item(info, c, &mut item);
                Bytes::from(item)
            })
            .collect();
        return stream_list_encoded(head, items, gzip).0;
    }
    let info = info.clone();
    let write: ItemWriter<Arc<Cached>> = Box::new(move |c, out| write_metadata_item(&info, c, out));
    // An item is its object's metadata: about half a pod's protobuf.
    in_parts(head, items, write, |c| c.stored().len() / 2, gzip)
}

/// Appends `c`'s item of a PartialObjectMetadataList to `out`: for an object stored in
/// protobuf, its metadata's JSON written from the protobuf and wrapped as it is (no tree built);
/// for one stored as JSON, its parsed metadata.
fn write_metadata_item(info: &ResourceInfo, c: &Cached, out: &mut Vec<u8>) {
    let start = out.len();
    out.extend_from_slice(printer::METADATA_ITEM_HEAD.as_bytes());
    if c.write_protobuf_metadata(out) {
        out.push(b'}');
    } else {
        out.truncate(start);
        printer::write_metadata_item(&value_of(info, c, &Form::Metadata), out);
    }
}

/// The answer whose body is `head` and `items` written by `write`, made in parts of about
/// [`super::parts::PART_BYTES`] (an item expected to write `size(item)` bytes) on blocking
/// threads; when the client accepts gzip (`gzip`), compressed as kube decides, by the body's
/// length.
fn in_parts(
    head: String,
    items: Vec<Arc<Cached>>,
    write: ItemWriter<Arc<Cached>>,
    size: fn(&Arc<Cached>) -> usize,
    gzip: bool,
) -> Response<Body> {
    let parts = ListParts::new(head, items, write, size, super::parts::PART_BYTES);
    let gzip = if gzip {
        super::parts::Gzip::Above(kube_wire::response::GZIP_THRESHOLD)
    } else {
        super::parts::Gzip::Off
    };
    super::parts::response(parts, gzip)
}

/// The stored bytes of `items`: what decides whether a list is made in parts.
fn stored_bytes(items: &[Arc<Cached>]) -> usize {
    items.iter().map(|c| c.stored().len()).sum()
}

/// A whole list body as the answer, through the list writer (Go's trailing newline, gzip when
/// large and accepted): the writer appends the closing `]}` of the items array itself. A body
/// that does not end with one (a generic Table without rows: `"rows":null`) is small, never
/// compressed.
fn list_body_response(body: Vec<u8>, gzip: bool) -> Response<Body> {
    let body = if body.ends_with(b"]}") {
        match String::from_utf8(body) {
            Ok(mut head) => {
                head.truncate(head.len() - 2);
                return stream_list_encoded(head, Vec::new(), gzip).0;
            }
            Err(e) => e.into_bytes(),
        }
    } else {
        body
    };
    json_response(StatusCode::OK, body)
}

/// The answer to a GET of one object in `form`: the object with its `kind` and `apiVersion`
/// (plain JSON), its PartialObjectMetadata, or a Table of it with column definitions. Tables are printed by `p`.
pub fn object_response(
    info: &ResourceInfo,
    p: &TablePrinter,
    obj: &Cached,
    form: &Form,
) -> Response<Body> {
    let body = match form {
        Form::Protobuf | Form::MetadataProtobuf => {
            return super::protobuf::object_response(info, obj, form);
        }
        Form::Json => info.full_object(obj),
        Form::Metadata => Bytes::from(to_go_json(&printer::partial_object_metadata(&value_of(
            info, obj, form,
        )))),
        Form::Table { include_object } => Bytes::from(to_go_json(&p.object_table(
            &info.group,
            &info.kind,
            &value_of(info, obj, form),
            *include_object,
            false,
            now_unix(),
        ))),
    };
    json_response(StatusCode::OK, body)
}

/// The watch frame of an event of type `ty` whose object is `obj`, in `form`: the
/// object (plain JSON, with its type meta), its PartialObjectMetadata, or a one-row Table of it,
/// with column definitions unless `no_headers` (kube sends them with a watcher's first event
/// only). `now_unix` is the clock Age cells are printed against. Tables are printed by `p`.
pub fn event_frame(
    info: &ResourceInfo,
    p: &TablePrinter,
    ty: EventType,
    obj: &Cached,
    form: &Form,
    no_headers: bool,
    now_unix: i64,
) -> Bytes {
    if *form == Form::Json {
        return kube_wire::event::encode_frame(ty.as_str(), &info.type_prefix, &obj.json());
    }
    let object = p.event_object(
        form.repr(),
        &info.group,
        &info.kind,
        &value_of(info, obj, form),
        form.include_object(),
        no_headers,
        now_unix,
    );
    printer::event_frame(ty.as_str(), &object)
}

/// A BOOKMARK frame at `rv` in `form` (the first one after a watch-list's initial events carries
/// the `k8s.io/initial-events-end` annotation): an empty object of the kind, its
/// PartialObjectMetadata, or a Table whose one row embeds that PartialObjectMetadata.
pub fn bookmark_frame(info: &ResourceInfo, rv: u64, initial_end: bool, form: &Form) -> Bytes {
    let core = info.builtin;
    let api_version = info.api_version();
    if *form == Form::Json {
        return json_bookmark_frame(&info.kind, &api_version, core, rv, initial_end);
    }
    if form.encoding() == Encoding::Protobuf {
        return super::protobuf::bookmark_frame(info, rv, initial_end, form);
    }
    let b = bookmark_object(&info.kind, &api_version, core, rv, initial_end);
    printer::event_frame(
        "BOOKMARK",
        &printer::bookmark_event_object(form.repr(), &b, rv),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The printer of a built-in kind.
    fn kind_printer(info: &ResourceInfo) -> TablePrinter {
        TablePrinter::for_kind(&info.group, &info.kind)
    }
    use crate::cache::record::decode_object;
    use http_body_util::BodyExt;
    use kube_wire::table::IncludeObject;

    fn pods() -> ResourceInfo {
        ResourceInfo::new("", "v1", "pods", "Pod", true)
    }

    fn pod(name: &str, rv: u64) -> Cached {
        let raw = format!(
            r#"{{"kind":"Pod","apiVersion":"v1","metadata":{{"name":"{name}","namespace":"d","resourceVersion":"{rv}","creationTimestamp":"2026-01-01T00:00:00Z"}},"spec":{{"containers":[{{"name":"c"}}]}},"status":{{"phase":"Pending"}}}}"#
        );
        decode_object(&pods(), raw.as_bytes()).expect("a pod")
    }

    async fn body(r: Response<Body>) -> Value {
        let b = r.into_body().collect().await.expect("body").to_bytes();
        assert_eq!(
            b.last(),
            Some(&b'\n'),
            "Go's encoder ends bodies with a newline"
        );
        serde_json::from_slice(&b).expect("JSON")
    }

    #[test]
    fn list_meta_is_kubes_list_meta() {
        let m = ListMeta {
            resource_version: 7,
            continue_token: Some("t".into()),
            remaining_item_count: Some(2),
            shard_info: None,
        };
        assert_eq!(
            serde_json::to_string(&m.to_value()).unwrap(),
            r#"{"resourceVersion":"7","continue":"t","remainingItemCount":2}"#
        );
        // Go's field order: shardInfo comes last.
        let m = ListMeta {
            shard_info: Some(
                "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')"
                    .into(),
            ),
            ..m
        };
        assert_eq!(
            serde_json::to_string(&m.to_value()).unwrap(),
            r#"{"resourceVersion":"7","continue":"t","remainingItemCount":2,"shardInfo":{"selector":"shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')"}}"#
        );
        assert_eq!(
            ListMeta::default().to_value(),
            json!({"resourceVersion": "0"})
        );
    }

    #[tokio::test]
    async fn lists_in_every_form() {
        let info = pods();
        let objs = [pod("a", 3), pod("b", 4)];
        let meta = ListMeta {
            resource_version: 9,
            ..Default::default()
        };
        let json = body(list_response(
            &info,
            &kind_printer(&info),
            &objs,
            &meta,
            &Form::Json,
            false,
        ))
        .await;
        assert_eq!(json["kind"], "PodList");
        assert_eq!(json["items"][1]["metadata"]["name"], "b");
        let t = Form::Table {
            include_object: IncludeObject::None,
        };
        let table = body(list_response(
            &info,
            &kind_printer(&info),
            &objs,
            &meta,
            &t,
            false,
        ))
        .await;
        assert_eq!(table["kind"], "Table");
        assert_eq!(table["metadata"]["resourceVersion"], "9");
        assert_eq!(table["rows"][0]["cells"][0], "a");
        assert_eq!(table["rows"][1]["object"], Value::Null);
        let m = body(list_response(
            &info,
            &kind_printer(&info),
            &objs,
            &meta,
            &Form::Metadata,
            false,
        ))
        .await;
        assert_eq!(m["kind"], "PartialObjectMetadataList");
        assert_eq!(m["items"][0]["kind"], "PartialObjectMetadata");
        assert_eq!(m["items"][0]["metadata"]["resourceVersion"], "3");
        // The generic convertor's empty Table (`"rows":null`) is answered whole.
        let widgets = ResourceInfo::new("example.com", "v1", "widgets", "Widget", true);
        let empty = body(list_response(
            &widgets,
            &kind_printer(&widgets),
            [] as [&Cached; 0],
            &meta,
            &t,
            true,
        ))
        .await;
        assert_eq!(empty["rows"], Value::Null);
    }

    #[tokio::test]
    async fn objects_in_every_form() {
        let info = pods();
        let p = pod("a", 3);
        let json = body(object_response(
            &info,
            &kind_printer(&info),
            &p,
            &Form::Json,
        ))
        .await;
        assert_eq!(json["kind"], "Pod");
        assert_eq!(json["apiVersion"], "v1");
        let t = Form::Table {
            include_object: IncludeObject::Object,
        };
        let table = body(object_response(&info, &kind_printer(&info), &p, &t)).await;
        assert_eq!(table["metadata"]["resourceVersion"], "3");
        assert!(table["columnDefinitions"].is_array());
        assert_eq!(table["rows"][0]["object"]["kind"], "Pod");
        let m = body(object_response(
            &info,
            &kind_printer(&info),
            &p,
            &Form::Metadata,
        ))
        .await;
        assert_eq!(m["kind"], "PartialObjectMetadata");
    }

    #[test]
    fn frames_in_every_form() {
        let info = pods();
        let p = pod("a", 3);
        let json = event_frame(
            &info,
            &kind_printer(&info),
            EventType::Added,
            &p,
            &Form::Json,
            true,
            0,
        );
        assert_eq!(
            json,
            kube_wire::event::encode_frame("ADDED", &info.type_prefix, &p.json())
        );
        let t = Form::Table {
            include_object: IncludeObject::Metadata,
        };
        let headed = event_frame(
            &info,
            &kind_printer(&info),
            EventType::Modified,
            &p,
            &t,
            false,
            0,
        );
        let v: Value = serde_json::from_slice(&headed).unwrap();
        assert_eq!(v["type"], "MODIFIED");
        assert!(v["object"]["columnDefinitions"].is_array());
        let bare = event_frame(
            &info,
            &kind_printer(&info),
            EventType::Modified,
            &p,
            &t,
            true,
            0,
        );
        let v: Value = serde_json::from_slice(&bare).unwrap();
        assert_eq!(v["object"]["columnDefinitions"], Value::Null);
        assert_eq!(
            v["object"]["rows"][0]["object"]["kind"],
            "PartialObjectMetadata"
        );

        assert_eq!(
            bookmark_frame(&info, 5, true, &Form::Json),
            kube_wire::event::bookmark_frame("Pod", "v1", true, 5, true)
        );
        let b: Value = serde_json::from_slice(&bookmark_frame(&info, 5, true, &t)).unwrap();
        assert_eq!(b["type"], "BOOKMARK");
        assert_eq!(
            b["object"]["rows"][0]["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
            "true"
        );
        let b: Value =
            serde_json::from_slice(&bookmark_frame(&info, 5, false, &Form::Metadata)).unwrap();
        assert_eq!(b["object"]["kind"], "PartialObjectMetadata");
        assert_eq!(b["object"]["metadata"]["resourceVersion"], "5");
    }
}
