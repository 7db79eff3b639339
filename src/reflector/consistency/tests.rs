use super::*;
use crate::cache::record::decode_object;
use crate::cache::{CacheSettings, ResourceCache, ResourceInfo};

fn configmaps() -> ResourceInfo {
    ResourceInfo::new("", "v1", "configmaps", "ConfigMap", true)
}

fn cm(ns: &str, name: &str, rv: u64) -> Cached {
    let j = format!(
        r#"{{"metadata":{{"name":"{name}","namespace":"{ns}","resourceVersion":"{rv}"}}}}"#
    );
    decode_object(&configmaps(), j.as_bytes()).unwrap()
}

/// A snapshot of a cache holding `objs` at `rv`.
fn snapshot(objs: &[(&str, &str, u64)], rv: u64) -> Snapshot {
    let (cache, writer) = ResourceCache::new(configmaps(), CacheSettings::default());
    writer.replace(objs.iter().map(|(ns, n, r)| cm(ns, n, *r)).collect(), rv);
    cache.snapshot()
}

/// `snap` compared with the upstream's `items`, in the order given.
fn compare(snap: &Snapshot, items: &[(&str, &str, u64)]) -> Result<Outcome, OutOfOrder> {
    let mut c = Comparison::new(snap);
    for (ns, name, rv) in items {
        c.upstream(ns, name, *rv)?;
    }
    Ok(c.finish(snap.rv))
}

/// FNV-1 (multiply, then xor), not FNV-1a: the published 64-bit vectors ("" and "a"; FNV-1a's
/// "a" is af63dc4c8601ec8c), and kube's `%x`, which does not pad.
#[test]
fn the_digest_is_fnv1_printed_as_kube_prints_it() {
    assert_eq!(Digest::default().to_string(), "cbf29ce484222325");
    let mut d = Digest::default();
    d.bytes(b"a");
    assert_eq!(d.to_string(), "af63bd4c8601b7be");
    let mut d = Digest::default();
    d.bytes(b"foobar");
    assert_eq!(
        d.to_string(),
        "340d8765a4dda9c2",
        "FNV-1a would be 85944171f73967e8"
    );
    assert_eq!(Digest(0xab).to_string(), "ab");
    // One item is `ns/name/rv`, with nothing between items.
    let mut item = Digest::default();
    item.add("default", "x", 42);
    let mut raw = Digest::default();
    raw.bytes(b"default/x/42");
    assert_eq!(item, raw);
    let mut zero = Digest::default();
    zero.add("", "n", 0);
    let mut raw = Digest::default();
    raw.bytes(b"/n/0");
    assert_eq!(zero, raw);
}

#[test]
fn equal_lists_are_consistent_with_one_digest() {
    let objs = [("a", "x", 3), ("a-b", "y", 5), ("b", "z", 4)];
    let snap = snapshot(&objs, 9);
    // kube's key order: "a-b/y" sorts before "a/x" ('-' < '/').
    let upstream = [("a-b", "y", 5), ("a", "x", 3), ("b", "z", 4)];
    let mut d = Digest::default();
    for (ns, n, rv) in upstream {
        d.add(ns, n, rv);
    }
    assert_eq!(
        compare(&snap, &upstream).unwrap(),
        Outcome::Consistent {
            rv: 9,
            objects: 3,
            digest: d
        }
    );
    let empty = snapshot(&[], 2);
    assert!(matches!(
        compare(&empty, &[]).unwrap(),
        Outcome::Consistent { objects: 0, .. }
    ));
}

/// A missing object shifts nothing: each difference is named once, with both sides.
#[test]
fn differences_are_named_in_key_order() {
    let snap = snapshot(
        &[("a", "1", 3), ("a", "3", 4), ("a", "4", 6), ("b", "9", 7)],
        9,
    );
    let upstream = [("a", "1", 3), ("a", "2", 8), ("a", "3", 4), ("a", "4", 9)];
    let Outcome::Inconsistent(m) = compare(&snap, &upstream).unwrap() else {
        panic!("they differ");
    };
    let named: Vec<String> = m.first.iter().map(ToString::to_string).collect();
    assert_eq!(
        named,
        [
            "a/2 (cache: missing, upstream: 8)",
            "a/4 (cache: 6, upstream: 9)",
            "b/9 (cache: 7, upstream: missing)",
        ]
    );
    assert_eq!(m.differing, 3);
    assert_eq!((m.cache.1, m.upstream.1), (4, 4));
    assert_ne!(m.cache.0, m.upstream.0);
    assert_eq!(m.rv, 9);
    assert_eq!(
        Named(&m.first[..2]).to_string(),
        "a/2 (cache: missing, upstream: 8), a/4 (cache: 6, upstream: 9)"
    );
}

#[test]
fn at_most_the_first_few_are_named_and_all_are_counted() {
    let snap = snapshot(&[], 9);
    let names: Vec<String> = (0..20).map(|i| format!("o{i:02}")).collect();
    let upstream: Vec<(&str, &str, u64)> = names.iter().map(|n| ("d", n.as_str(), 1)).collect();
    let Outcome::Inconsistent(m) = compare(&snap, &upstream).unwrap() else {
        panic!("they differ");
    };
    assert_eq!(m.differing, 20);
    assert_eq!(m.first.len(), NAMED);
    assert_eq!(m.first[0].key, "d/o00");
}

/// A cluster-scoped object's key is its name.
#[test]
fn cluster_scoped_keys_are_names() {
    let info = ResourceInfo::new("", "v1", "nodes", "Node", false);
    let (cache, writer) = ResourceCache::new(info.clone(), CacheSettings::default());
    let node = |n: &str, rv: u64| {
        decode_object(
            &info,
            format!(r#"{{"metadata":{{"name":"{n}","resourceVersion":"{rv}"}}}}"#).as_bytes(),
        )
        .unwrap()
    };
    writer.replace(vec![node("n1", 2), node("n2", 3)], 5);
    let snap = cache.snapshot();
    assert!(matches!(
        compare(&snap, &[("", "n1", 2), ("", "n2", 3)]).unwrap(),
        Outcome::Consistent { objects: 2, .. }
    ));
}

/// An upstream whose list is not in key order cannot be compared side by side: refused, not
/// reported as a difference.
#[test]
fn an_upstream_out_of_key_order_is_refused() {
    let snap = snapshot(&[("a", "x", 3), ("b", "y", 4)], 9);
    let e = compare(&snap, &[("b", "y", 4), ("a", "x", 3)]).unwrap_err();
    assert_eq!(
        e.to_string(),
        r#"the upstream's list is not in key order ("a/x" came after "b/y")"#
    );
    assert!(compare(&snap, &[("a", "x", 3), ("a", "x", 3)]).is_err());
}

fn field(tag: u32, bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    prost::encoding::encode_key(tag, prost::encoding::WireType::LengthDelimited, &mut out);
    prost::encoding::encode_varint(bytes.len() as u64, &mut out);
    out.extend_from_slice(bytes);
    out
}

/// A PartialObjectMetadataList in protobuf, as kube sends it.
fn protobuf_page(rv: &str, token: &str, items: &[(&str, &str, &str)]) -> Vec<u8> {
    let mut raw = field(
        1,
        &[field(2, rv.as_bytes()), field(3, token.as_bytes())].concat(),
    );
    for (ns, name, rv) in items {
        let meta = [
            field(1, name.as_bytes()),
            field(3, ns.as_bytes()),
            field(5, b"uid"),
            field(6, rv.as_bytes()),
        ]
        .concat();
        raw.extend(field(2, &field(1, &meta)));
    }
    kube_wire::proto::envelope::wrap("meta.k8s.io/v1", "PartialObjectMetadataList", &raw)
}

fn read(body: &[u8], protobuf: bool) -> Result<(PageMeta, Vec<String>), MalformedData> {
    let mut seen = Vec::new();
    let meta = read_page(body, protobuf, |ns, name, rv| {
        seen.push(format!("{ns}/{name}@{rv}"));
        Ok(())
    })?;
    Ok((meta, seen))
}

#[test]
fn pages_are_read_in_protobuf_and_json() {
    let pb = protobuf_page("120", "tok", &[("a", "x", "3"), ("", "n1", "7")]);
    let (meta, seen) = read(&pb, true).unwrap();
    assert_eq!(meta.resource_version, "120");
    assert_eq!(meta.continue_token, "tok");
    assert_eq!(seen, ["a/x@3", "/n1@7"]);
    let json = br#"{"kind":"PartialObjectMetadataList","apiVersion":"meta.k8s.io/v1","metadata":{"resourceVersion":"120"},"items":[{"metadata":{"name":"x","namespace":"a","resourceVersion":"3","managedFields":[{"manager":"m"}]}},{"metadata":{"name":"n1","resourceVersion":"7"}}]}"#;
    let (meta, seen) = read(json, false).unwrap();
    assert_eq!(meta.resource_version, "120");
    assert_eq!(meta.continue_token, "");
    assert_eq!(seen, ["a/x@3", "/n1@7"]);
    let (_, none) = read(
        br#"{"metadata":{"resourceVersion":"5"},"items":null}"#,
        false,
    )
    .unwrap();
    assert!(none.is_empty());
}

/// Bad pages are errors, never a panic: truncated protobuf, a resourceVersion that is not a
/// number, JSON without names.
#[test]
fn malformed_pages_are_errors() {
    let pb = protobuf_page("120", "", &[("a", "x", "3")]);
    for cut in [pb.len() - 1, pb.len() - 5, 6] {
        assert!(read(&pb[..cut], true).is_err(), "cut at {cut}");
    }
    assert!(read(&protobuf_page("1", "", &[("a", "x", "x3")]), true).is_err());
    assert!(
        read(
            br#"{"metadata":{},"items":[{"metadata":{"namespace":"a"}}]}"#,
            false
        )
        .is_err()
    );
    assert!(read(b"{", false).is_err());
}
