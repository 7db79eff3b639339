//! Fuzz target `upstream`: what the reflector reads from the upstream — watch event lines
//! ([`apply_line`], through [`decode_object`] into a cache), LIST pages ([`read_page`]) and
//! error answers ([`ReflectorError::from_answer`], [`Status::parse`]).
//!
//! Input: the bytes of an upstream answer; all three readings are tried on every input: as a
//! watch stream (one event per line, blank lines skipped, as the reflector frames it), as a
//! LIST body and as an error body. Each is read for four kinds that take different paths: pods
//! (built-in, record from the borrowed skeleton), events (built-in, record from the full
//! object), nodes (cluster-scoped) and a custom resource with a CRD selectable field.
//!
//! Invariants: an accepted object's record (name, namespace, uid, resourceVersion, labels,
//! selectable fields) is what `serde_json` reads from the same bytes, its stored body is the
//! object without `kind`/`apiVersion`, and the object a client gets back (GET, watch event,
//! LIST item) is the object with the kind's `kind`/`apiVersion`; an applied line moves the
//! cache as its type says (a BOOKMARK's or an event's resourceVersion, never backwards); an
//! ERROR line is a Status (410 ends the watch); a Status read from the upstream writes back as
//! itself. Bytes `serde_json` cannot read as a value (a number beyond `f64`) are not compared.

use bytes::Bytes;
use http::StatusCode;
use kube_wire::status::Status;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use watchmux::cache::record::decode_object;
use watchmux::cache::{CacheSettings, Cached, ResourceCache, ResourceInfo};
use watchmux::reflector::{ReflectorError, WatchEnd, apply_line, read_page};

/// Lines of one input applied as a watch stream (more only repeat the same paths).
const MAX_LINES: usize = 32;

fn kinds() -> Vec<ResourceInfo> {
    let mut widgets = ResourceInfo::new("example.com", "v1", "widgets", "Widget", true);
    widgets.selectable_fields = vec![".spec.color".into()];
    vec![
        ResourceInfo::new("", "v1", "pods", "Pod", true),
        ResourceInfo::new("", "v1", "events", "Event", true),
        ResourceInfo::new("", "v1", "nodes", "Node", false),
        widgets,
    ]
}

/// The check (see the module doc).
pub fn check(data: &[u8]) {
    for info in kinds() {
        watch_stream(&info, data);
        list_page(&info, data);
    }
    error_answer(data);
}

#[derive(Deserialize)]
struct Line<'a> {
    #[serde(rename = "type")]
    ty: String,
    #[serde(borrow)]
    object: &'a RawValue,
}

fn watch_stream(info: &ResourceInfo, data: &[u8]) {
    let (cache, writer) = ResourceCache::new(info.clone(), CacheSettings::default());
    writer.replace(Vec::new(), 0);
    let lines = data
        .split(|b| *b == b'\n')
        .filter(|l| !l.iter().all(u8::is_ascii_whitespace))
        .take(MAX_LINES);
    for line in lines {
        let (rv, len) = (cache.rv(), cache.len());
        let applied = apply_line(&writer, line, None);
        let Ok(parsed) = serde_json::from_slice::<Line<'_>>(line) else {
            assert!(
                applied.is_err(),
                "a line that is not an event applied: {line:?}"
            );
            continue;
        };
        let object = parsed.object.get().as_bytes();
        match applied {
            Ok(None) => match parsed.ty.as_str() {
                "BOOKMARK" => {
                    let at = object_rv(object).expect("an applied BOOKMARK has a resourceVersion");
                    assert_eq!(cache.rv(), rv.max(at), "BOOKMARK at {at}");
                    assert_eq!(cache.len(), len);
                }
                "ADDED" | "MODIFIED" | "DELETED" => {
                    let c = decode_object(info, object).expect("an applied event's object decodes");
                    same_as_serde(info, &c, object);
                    assert_eq!(cache.rv(), rv.max(c.rec.rv), "event at {}", c.rec.rv);
                }
                other => panic!("a line of type {other:?} applied"),
            },
            Ok(Some(WatchEnd::Expired(s))) => {
                assert_eq!(parsed.ty, "ERROR");
                assert!(s.is_expired(), "{s:?}");
                assert_eq!(cache.rv(), rv);
            }
            Ok(Some(end)) => panic!("a line ended the watch as {end:?}"),
            Err(e) => {
                assert!(!e.to_string().is_empty());
                assert_eq!(
                    (cache.rv(), cache.len()),
                    (rv, len),
                    "a refused line changed the cache"
                );
            }
        }
    }
}

fn object_rv(object: &[u8]) -> Option<u64> {
    let v: Value = serde_json::from_slice(object).ok()?;
    v.get("metadata")?
        .get("resourceVersion")?
        .as_str()?
        .parse()
        .ok()
}

#[derive(Deserialize)]
struct Page<'a> {
    #[serde(borrow, default, deserialize_with = "kube_wire::list::nullable")]
    items: Vec<&'a RawValue>,
}

fn list_page(info: &ResourceInfo, data: &[u8]) {
    let Ok(page) = read_page(info, data, "fuzz") else {
        return;
    };
    let wire: Page<'_> = serde_json::from_slice(data).expect("an accepted page is JSON");
    assert_eq!(page.items.len(), wire.items.len());
    for (c, raw) in page.items.iter().zip(&wire.items) {
        same_as_serde(info, c, raw.get().as_bytes());
    }
    let Ok(v) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let meta = |k: &str| v["metadata"][k].as_str().unwrap_or_default().to_string();
    assert_eq!(page.resource_version, meta("resourceVersion"));
    assert_eq!(page.continue_token, meta("continue"));
}

/// The record and bodies of `c`, decoded from `raw`, against what serde_json reads from `raw`.
fn same_as_serde(info: &ResourceInfo, c: &Cached, raw: &[u8]) {
    let Ok(Value::Object(obj)) = serde_json::from_slice::<Value>(raw) else {
        return;
    };
    let meta = obj.get("metadata").cloned().unwrap_or(Value::Null);
    let text = |k: &str| meta.get(k).and_then(Value::as_str).unwrap_or_default();
    let rec = &c.rec;
    assert_eq!(rec.name, text("name"));
    assert_eq!(rec.namespace, text("namespace"));
    assert_eq!(rec.uid, text("uid"));
    assert_eq!(Ok(rec.rv), text("resourceVersion").parse::<u64>());
    let mut labels: Vec<(String, String)> = meta
        .get("labels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| {
                    (
                        k.clone(),
                        v.as_str().expect("labels are strings").to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    labels.sort();
    assert_eq!(rec.labels, labels);
    let fields = kube_wire::selector::selectable::selectable_fields(
        &info.group,
        &info.kind,
        info.namespaced,
        &info.selectable_fields,
        &Value::Object(obj.clone()),
    );
    let got: Vec<(String, String)> = rec
        .fields
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    assert_eq!(got, fields, "selectable fields of {raw:?}");
    let mut bare = obj;
    bare.shift_remove("kind");
    bare.shift_remove("apiVersion");
    let stored = c.json();
    let body = as_map(&stored, "the stored body");
    assert_eq!(
        body.keys,
        [] as [&str; 0],
        "the stored body {:?} of {raw:?} keeps its type meta",
        String::from_utf8_lossy(&stored)
    );
    assert_eq!(
        body.map,
        bare,
        "the stored body {:?} of {raw:?}",
        String::from_utf8_lossy(&stored)
    );
    let want: [&str; 2] = if info.builtin {
        ["kind", "apiVersion"]
    } else {
        ["apiVersion", "kind"]
    };
    let full = info.full_object(c);
    let mut typed = as_map(&full, "the full object");
    assert_eq!(
        typed.keys,
        want,
        "type meta of {:?}",
        String::from_utf8_lossy(&full)
    );
    assert_eq!(
        typed.first,
        want,
        "type meta first in {:?}",
        String::from_utf8_lossy(&full)
    );
    assert_eq!(
        typed.map.shift_remove("kind"),
        Some(Value::String(info.kind.clone()))
    );
    assert_eq!(
        typed.map.shift_remove("apiVersion"),
        Some(Value::String(info.api_version()))
    );
    assert_eq!(
        typed.map,
        bare,
        "the full object {:?}",
        String::from_utf8_lossy(&full)
    );
    let item = as_map(&info.list_item(c), "the list item");
    let item_keys: &[&str] = if info.builtin { &[] } else { &want };
    assert_eq!(item.keys, item_keys, "type meta of a LIST item");
}

/// A JSON object as a client reads it (repeated keys: the last wins, as in Go), with its
/// top-level `kind`/`apiVersion` keys, every occurrence, and its first two keys.
struct Read {
    map: Map<String, Value>,
    keys: Vec<String>,
    first: Vec<String>,
}

fn as_map(bytes: &Bytes, what: &str) -> Read {
    let map: Map<String, Value> = serde_json::from_slice(bytes).unwrap_or_else(|e| {
        panic!(
            "{what} {:?} is not a JSON object: {e}",
            String::from_utf8_lossy(bytes)
        )
    });
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let all = top_level_keys(&mut de);
    let first = all.iter().take(2).cloned().collect();
    let keys = all
        .into_iter()
        .filter(|k| k == "kind" || k == "apiVersion")
        .collect();
    Read { map, keys, first }
}

fn top_level_keys(de: &mut serde_json::Deserializer<serde_json::de::SliceRead<'_>>) -> Vec<String> {
    struct Keys;
    impl<'de> serde::de::Visitor<'de> for Keys {
        type Value = Vec<String>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("an object")
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(
            self,
            mut m: A,
        ) -> Result<Vec<String>, A::Error> {
            let mut keys = Vec::new();
            while let Some(k) = m.next_key::<String>()? {
                m.next_value::<serde::de::IgnoredAny>()?;
                keys.push(k);
            }
            Ok(keys)
        }
    }
    serde::Deserializer::deserialize_map(de, Keys).unwrap_or_default()
}

fn error_answer(data: &[u8]) {
    for code in [
        StatusCode::GONE,
        StatusCode::FORBIDDEN,
        StatusCode::INTERNAL_SERVER_ERROR,
    ] {
        let e = ReflectorError::from_answer(code, "fuzz", data);
        assert!(!e.to_string().is_empty());
        // Expired: a 410 whose body is no Status, or a Status that says so (its code wins).
        let expired =
            Status::parse(data, code.as_u16()).map_or(code == StatusCode::GONE, |s| s.is_expired());
        assert_eq!(matches!(e, ReflectorError::Expired(_)), expired, "{e:?}");
    }
    if let Ok(s) = Status::parse(data, 500) {
        let back = Status::parse(&s.to_json(), s.code).expect("a Status writes back as a Status");
        assert_eq!(back, s);
    }
}
