//! Mutations: what a careless, old, hostile or broken client does to a real request. Structured
//! ones change one part of a [`Req`] (method, path, a query parameter, a header, the body, the
//! framing) to values at and past kube's boundaries; raw ones change the bytes
//! themselves. Each returns a short note of what it did, for the report.
//!
//! The value catalogues are here too ([`number`], [`selector`], [`continue_token`], …), shared
//! with the grammar in [`super::generate`]. Never produces a path under `/sim/` (the simulator's
//! control endpoints, which would inject faults): [`super::generate`] drops any case that does.

use rand::Rng;
use rand::rngs::StdRng;
use rand::seq::IndexedRandom;

use super::case::{Framing, Req};
use super::corpus::{META_ACCEPT, META_LIST_ACCEPT, PROTOBUF_ACCEPT, TABLE_ACCEPT};

/// A random string of `n` characters from `alphabet`.
fn chars(rng: &mut StdRng, alphabet: &[u8], len: std::ops::Range<usize>) -> String {
    let n = rng.random_range(len);
    (0..n)
        .map(|_| char::from(*alphabet.choose(rng).unwrap_or(&b'a')))
        .collect()
}

/// Random bytes.
pub fn random_bytes(rng: &mut StdRng, n: usize) -> Vec<u8> {
    (0..n).map(|_| rng.random()).collect()
}

/// A number as text: boundaries, overflows, signs, spaces, bases, words.
pub fn number(rng: &mut StdRng) -> String {
    const FIXED: &[&str] = &[
        "0",
        "1",
        "-1",
        "2",
        "10",
        "500",
        "2147483647",
        "2147483648",
        "-2147483648",
        "4294967296",
        "9223372036854775807",
        "9223372036854775808",
        "-9223372036854775808",
        "-9223372036854775809",
        "18446744073709551615",
        "18446744073709551616",
        "99999999999999999999999999999",
        "+5",
        "05",
        "0x10",
        "1e3",
        "1.5",
        "-0",
        " 5",
        "5%20",
        "",
        "NaN",
        "Infinity",
        "abc",
        "%00",
        "%EF%BC%95",
        "\u{0661}",
    ];
    match rng.random_range(0..5u32) {
        0 => rng.random_range(0..u64::MAX).to_string(),
        1 => (-rng.random_range(0..i64::MAX)).to_string(),
        2 => "9".repeat(rng.random_range(20..2000)),
        _ => FIXED.choose(rng).copied().unwrap_or("0").to_string(),
    }
}

/// A boolean as text: Go's `ParseBool` words and others.
pub fn boolean(rng: &mut StdRng) -> String {
    [
        "true", "false", "1", "0", "t", "f", "T", "F", "TRUE", "False", "yes", "", "2", "tru",
    ]
    .choose(rng)
    .copied()
    .unwrap_or("true")
    .to_string()
}

/// A label or field selector, valid or not.
pub fn selector(rng: &mut StdRng, field: bool) -> String {
    const LABEL: &[&str] = &[
        "app%3Dweb",
        "app%3Dfuzz",
        "tier%20in%20(frontend%2Cbackend)",
        "track!%3Dcanary",
        "!track",
        "track",
        "fuzz%3Dtrue",
        "app%3D%3Dweb",
        "%3D",
        "a%3D%3D",
        "in%20(",
        "x%20in%20()",
        "!!a",
        "a%20in",
        "((",
        "a%3Db%2C",
        "%2C%2C%2C",
        "a%20notin%20(b)%2C!c%2Cd%3De",
        "%E2%9C%93%3Dyes",
        "a%3D%00",
        "a%3E5",
        "a%20gt%205",
        "kubernetes.io%2Fos%3Dlinux",
        "-bad%3Dx",
        "a%3Dbad_value_",
    ];
    const FIELD: &[&str] = &[
        "metadata.name%3Dx",
        "metadata.namespace%3Dns-1",
        "spec.nodeName%3Dnode-1",
        "spec.nodeName%3D",
        "spec.nodeName!%3Dnode-1",
        "status.phase%3DRunning",
        "spec.foo%3Dbar",
        "metadata.name%3D%3Dx",
        "metadata.name",
        "metadata.name%20in%20(a)",
        "%3D",
        "metadata.name%3Da%2Cmetadata.name%3Db",
        "spec.schedulerName%3Ddefault-scheduler",
        "status.podIP%3D10.0.0.1",
        "metadata.uid%3Dx",
        "involvedObject.kind%3DPod",
        "spec.unschedulable%3Dtrue",
        "type%3DOpaque",
    ];
    match rng.random_range(0..6u32) {
        0 => {
            // Many terms.
            let n = rng.random_range(10..3000);
            (0..n)
                .map(|i| format!("k{i}%3Dv{i}"))
                .collect::<Vec<_>>()
                .join("%2C")
        }
        1 => chars(rng, b"abc=!,()%in ", 1..40).replace(' ', "%20"),
        _ if field => FIELD.choose(rng).copied().unwrap_or("").to_string(),
        _ => LABEL.choose(rng).copied().unwrap_or("").to_string(),
    }
}

/// A `continue` token: real ones, and ones kube must refuse.
pub fn continue_token(rng: &mut StdRng, real: &[String]) -> String {
    use kube_wire::continue_token::ContinueToken;
    let start = [
        "a",
        "ns-1/pod",
        "../../etc",
        "/abs",
        "a/../b",
        "x\u{0}y",
        "\u{1F600}",
        "",
    ]
    .choose(rng)
    .copied()
    .unwrap_or("a");
    let rv = *[0i64, -1, 1, -2, i64::MAX, i64::MIN, 7]
        .choose(rng)
        .unwrap_or(&1);
    match rng.random_range(0..9u32) {
        0 | 1 => real.choose(rng).cloned().unwrap_or_default(),
        2 => ContinueToken::after(rv, start).encode(),
        3 => {
            // A real token, damaged.
            let mut t = real
                .choose(rng)
                .cloned()
                .unwrap_or_else(|| "eyJ2IjoibWV0YSJ9".into());
            if !t.is_empty() {
                let cut = rng.random_range(0..t.len());
                t.truncate(cut);
            }
            t
        }
        4 => "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6IjEiLCJzdGFydCI6ImEifQ".into(),
        5 => "%%%".into(),
        6 => "bm90IGpzb24".into(),
        7 => chars(
            rng,
            b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_",
            1..400,
        ),
        _ => "e30".into(),
    }
}

/// The query parameters kube knows, and the value kinds each takes.
const PARAMS: &[&str] = &[
    "watch",
    "resourceVersion",
    "resourceVersionMatch",
    "allowWatchBookmarks",
    "sendInitialEvents",
    "timeoutSeconds",
    "limit",
    "continue",
    "labelSelector",
    "fieldSelector",
    "timeout",
    "pretty",
    "dryRun",
    "fieldManager",
    "fieldValidation",
    "force",
    "gracePeriodSeconds",
    "propagationPolicy",
    "orphanDependents",
    "includeUninitialized",
    "export",
    "exact",
    "ignoreStoreReadErrorWithClusterBreakingPotential",
    "container",
    "follow",
    "tailLines",
    "limitBytes",
    "sinceSeconds",
    "timestamps",
    "previous",
];

/// A value for query parameter `key`.
pub fn param_value(rng: &mut StdRng, key: &str, tokens: &[String], rv: u64) -> String {
    if rng.random_ratio(1, 12) {
        // Anything at all.
        return match rng.random_range(0..4u32) {
            0 => String::new(),
            1 => "%".into(),
            2 => "%ZZ%0".into(),
            _ => chars(rng, b"abcXYZ019%+&=;/.-_~!*'()", 1..64),
        };
    }
    match key {
        "watch"
        | "allowWatchBookmarks"
        | "sendInitialEvents"
        | "pretty"
        | "force"
        | "orphanDependents"
        | "includeUninitialized"
        | "export"
        | "exact"
        | "follow"
        | "timestamps"
        | "previous"
        | "ignoreStoreReadErrorWithClusterBreakingPotential" => boolean(rng),
        "resourceVersion" => match rng.random_range(0..6u32) {
            0 => rv.to_string(),
            1 => rv
                .saturating_add(rng.random_range(1..1_000_000))
                .to_string(),
            2 => "1".into(),
            3 => "0".into(),
            _ => number(rng),
        },
        "resourceVersionMatch" => [
            "NotOlderThan",
            "Exact",
            "",
            "notolderthan",
            "MostRecent",
            "exact ",
        ]
        .choose(rng)
        .copied()
        .unwrap_or("Exact")
        .to_string(),
        "timeoutSeconds" | "limit" | "gracePeriodSeconds" | "tailLines" | "limitBytes"
        | "sinceSeconds" => number(rng),
        "continue" => continue_token(rng, tokens),
        "labelSelector" => selector(rng, false),
        "fieldSelector" => selector(rng, true),
        "timeout" => [
            "1s",
            "30s",
            "0",
            "-1s",
            "1h",
            "1",
            "10ms",
            "999999999h",
            "1x",
            "",
            "1.5m",
            "+3s",
            "9223372036854775807ns",
        ]
        .choose(rng)
        .copied()
        .unwrap_or("1s")
        .to_string(),
        "dryRun" => ["All", "all", "", "None", "All&dryRun=All"]
            .choose(rng)
            .copied()
            .unwrap_or("All")
            .to_string(),
        "fieldValidation" => ["Strict", "Warn", "Ignore", "strict", ""]
            .choose(rng)
            .copied()
            .unwrap_or("Strict")
            .to_string(),
        "propagationPolicy" => ["Background", "Foreground", "Orphan", "bogus"]
            .choose(rng)
            .copied()
            .unwrap_or("Orphan")
            .to_string(),
        _ => chars(rng, b"abcdefghijklmnop-", 0..20),
    }
}

/// A query piece `key=value` for a random known parameter (sometimes without `=`, with an
/// empty or strange key).
pub fn query_piece(rng: &mut StdRng, tokens: &[String], rv: u64) -> String {
    let key = PARAMS.choose(rng).copied().unwrap_or("watch");
    let value = param_value(rng, key, tokens, rv);
    match rng.random_range(0..20u32) {
        0 => key.to_string(),
        1 => format!("={value}"),
        2 => format!("{}={value}", key.to_ascii_lowercase()),
        3 => format!("{key}%3D{value}"),
        4 => format!("{key}={value}={value}"),
        _ => format!("{key}={value}"),
    }
}

/// An Accept header value.
pub fn accept(rng: &mut StdRng) -> Vec<u8> {
    const FIXED: &[&str] = &[
        "application/json",
        TABLE_ACCEPT,
        META_LIST_ACCEPT,
        META_ACCEPT,
        PROTOBUF_ACCEPT,
        "application/vnd.kubernetes.protobuf",
        "application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io",
        "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io",
        "application/json;as=Table;v=v1;g=meta.k8s.io;includeObject=Object",
        "application/json;as=Table;v=v1;g=meta.k8s.io;includeObject=None",
        "application/json;as=Table;v=v1;g=meta.k8s.io;includeObject=Bogus",
        "application/json;as=Table;v=v2;g=meta.k8s.io",
        "application/json;as=Table;g=meta.k8s.io",
        "application/json;as=Bogus;v=v1;g=meta.k8s.io",
        "application/json;g=meta.k8s.io;v=v1;as=Table",
        "application/json;stream=watch",
        "application/vnd.kubernetes.protobuf;stream=watch",
        "application/yaml",
        "application/cbor",
        "text/html",
        "text/plain",
        "*/*",
        "application/*",
        "",
        "application/json;q=0",
        "application/json;q=0, application/vnd.kubernetes.protobuf;q=0.5",
        "APPLICATION/JSON",
        ",,,;;;",
        "application/json;;;as",
        "application/json;as=Table;v=v1;g=meta.k8s.io;as=Table",
        "\u{e9}",
    ];
    match rng.random_range(0..10u32) {
        0 => vec![b'a'; rng.random_range(1000..20_000)],
        1 => (0..rng.random_range(2..200))
            .map(|_| *FIXED.choose(rng).unwrap_or(&"*/*"))
            .collect::<Vec<_>>()
            .join(",")
            .into_bytes(),
        _ => FIXED
            .choose(rng)
            .copied()
            .unwrap_or("*/*")
            .as_bytes()
            .to_vec(),
    }
}

/// A Content-Type header value.
pub fn content_type(rng: &mut StdRng) -> Vec<u8> {
    [
        "application/json",
        "application/json; charset=utf-8",
        "application/merge-patch+json",
        "application/strategic-merge-patch+json",
        "application/json-patch+json",
        "application/apply-patch+yaml",
        "application/apply-patch+cbor",
        "application/vnd.kubernetes.protobuf",
        "application/yaml",
        "application/cbor",
        "text/plain",
        "multipart/form-data; boundary=x",
        "",
        ";",
        "application/json;as=Table",
        "\u{ff}",
    ]
    .choose(rng)
    .copied()
    .unwrap_or("application/json")
    .as_bytes()
    .to_vec()
}

/// A header (name and value) a client might send, weird ones included.
pub fn header(rng: &mut StdRng) -> (String, Vec<u8>) {
    let v = |s: &str| s.as_bytes().to_vec();
    match rng.random_range(0..26u32) {
        0 | 1 => ("Accept".into(), accept(rng)),
        2 => ("Content-Type".into(), content_type(rng)),
        3 => (
            "User-Agent".into(),
            v([
                "curl/8.5.0",
                "Wget/1.21",
                "kubectl/v1.36.2",
                "",
                "Go-http-client/1.1",
            ]
            .choose(rng)
            .copied()
            .unwrap_or("")),
        ),
        4 => (
            "Authorization".into(),
            match rng.random_range(0..4u32) {
                0 => v("Bearer fuzz-token"),
                1 => v("Basic Zm9vOmJhcg=="),
                2 => format!("Bearer {}", "x".repeat(rng.random_range(1..20_000))).into_bytes(),
                _ => v("Bearer"),
            },
        ),
        5 => (
            [
                "Impersonate-User",
                "Impersonate-Group",
                "Impersonate-Uid",
                "Impersonate-Extra-scopes",
            ]
            .choose(rng)
            .copied()
            .unwrap_or("Impersonate-User")
            .into(),
            v("system:admin"),
        ),
        6 => ("Audit-Id".into(), random_printable(rng, 0..300)),
        7 => (
            "Accept-Encoding".into(),
            v([
                "gzip",
                "gzip, deflate, br",
                "identity;q=0",
                "*",
                "br",
                "gzip;q=0",
            ]
            .choose(rng)
            .copied()
            .unwrap_or("gzip")),
        ),
        8 => (
            "Expect".into(),
            v(["100-continue", "200-ok", ""]
                .choose(rng)
                .copied()
                .unwrap_or("")),
        ),
        9 => (
            "Connection".into(),
            v([
                "close",
                "keep-alive",
                "Upgrade",
                "close, Upgrade",
                "TE",
                "accept",
                "content-type",
            ]
            .choose(rng)
            .copied()
            .unwrap_or("close")),
        ),
        10 => (
            "TE".into(),
            v(["trailers", "gzip", "chunked"]
                .choose(rng)
                .copied()
                .unwrap_or("trailers")),
        ),
        11 => ("X-Forwarded-For".into(), v("10.0.0.1, 10.0.0.2")),
        12 => ("Proxy-Authorization".into(), v("Basic eDp5")),
        13 => (
            "Upgrade".into(),
            v(["websocket", "h2c", "SPDY/3.1", "tls/1.3"]
                .choose(rng)
                .copied()
                .unwrap_or("h2c")),
        ),
        14 => ("Cookie".into(), random_printable(rng, 0..2000)),
        15 => ("Range".into(), v("bytes=0-10")),
        16 => ("If-None-Match".into(), v("\"x\"")),
        17 => ("X-Remote-User".into(), v("admin")),
        18 => ("Kubectl-Command".into(), v("kubectl get")),
        19 => (
            "Content-Encoding".into(),
            v(["gzip", "br", "identity"]
                .choose(rng)
                .copied()
                .unwrap_or("gzip")),
        ),
        20 => ("Sec-WebSocket-Protocol".into(), v("v4.channel.k8s.io")),
        21 => (
            "Host".into(),
            v(["", "evil.example", "127.0.0.1:1", "a b"]
                .choose(rng)
                .copied()
                .unwrap_or("")),
        ),
        22 => ("Max-Forwards".into(), v("0")),
        23 => ("X-Http-Method-Override".into(), v("DELETE")),
        24 => ("Warning".into(), v("299 - \"fuzz\"")),
        _ => {
            let name = chars(rng, b"abcdefghijklmnopqrstuvwxyz-", 1..30);
            (format!("X-{name}"), random_printable(rng, 0..200))
        }
    }
}

/// Printable ASCII (a valid header value) of a length in `len`.
fn random_printable(rng: &mut StdRng, len: std::ops::Range<usize>) -> Vec<u8> {
    let n = rng.random_range(len);
    (0..n).map(|_| rng.random_range(0x20..0x7f)).collect()
}

/// A request body: random bytes, broken JSON, broken protobuf, nesting, sizes.
pub fn body(rng: &mut StdRng, current: &[u8]) -> (Vec<u8>, &'static str) {
    match rng.random_range(0..10u32) {
        0 => {
            let n = rng.random_range(0..4096);
            (random_bytes(rng, n), "random body")
        }
        1 if !current.is_empty() => {
            let cut = rng.random_range(0..current.len());
            (current[..cut].to_vec(), "truncated body")
        }
        2 => {
            let mut pb = b"k8s\0".to_vec();
            let n = rng.random_range(0..512);
            pb.extend(random_bytes(rng, n));
            (pb, "protobuf magic + garbage")
        }
        3 => {
            let d = rng.random_range(100..100_000);
            let mut b = "[".repeat(d).into_bytes();
            b.extend("]".repeat(d).into_bytes());
            (b, "deeply nested JSON")
        }
        4 => {
            let d = rng.random_range(100..20_000);
            (format!("{}1{}", "{\"a\":".repeat(d), "}".repeat(d)).into_bytes(), "deeply nested objects")
        }
        5 => (
            format!("{{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{{\"name\":\"big\"}},\"data\":{{\"k\":\"{}\"}}}}", "x".repeat(rng.random_range(1 << 20..4 << 20))).into_bytes(),
            "huge body",
        ),
        6 => (b"null".to_vec(), "null body"),
        7 => (
            br#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"x","resourceVersion":"18446744073709551616","generation":-1,"labels":{"a":1}},"spec":{"containers":"no"}}"#.to_vec(),
            "mistyped object",
        ),
        8 => (br#"{"kind":"Status","apiVersion":"v1","code":500}"#.to_vec(), "a Status as body"),
        _ => (Vec::new(), "empty body"),
    }
}

/// A path built from the kube grammar or broken on purpose.
pub fn path_mutation(rng: &mut StdRng, path: &str) -> (String, &'static str) {
    let segs: Vec<&str> = path.split('/').collect();
    match rng.random_range(0..16u32) {
        0 => (format!("{path}/.."), "path /.."),
        1 => (path.replacen("/v1/", "/v1/../v1/", 1), "path with .."),
        2 => (path.replace('/', "//"), "empty segments"),
        3 => (format!("{path}/"), "trailing slash"),
        4 => (
            path.replacen("pods", "%70ods", 1),
            "percent-encoded resource",
        ),
        5 => (path.replace('/', "%2F"), "encoded slashes"),
        6 => (
            format!("{path}/{}", "a".repeat(rng.random_range(1000..20_000))),
            "very long path",
        ),
        7 => (format!("{path}/%E2%9C%93%F0%9F%98%80"), "encoded unicode"),
        8 => (format!("{path}/\u{00e9}t\u{00e9}"), "raw unicode"),
        9 => (format!("{path}/%00"), "encoded NUL"),
        10 => (format!("{path}/%"), "bad percent-encoding"),
        11 => (path.to_ascii_uppercase(), "upper case"),
        12 => {
            // Drop a segment.
            if segs.len() > 2 {
                let i = rng.random_range(1..segs.len());
                let mut s = segs.clone();
                s.remove(i);
                (s.join("/"), "segment dropped")
            } else {
                ("".into(), "empty path")
            }
        }
        13 => (
            path.replacen("/namespaces/", "/namespaces/%2E%2E/", 1),
            "encoded dot-dot namespace",
        ),
        14 => (format!("{path}/status/scale/log"), "subresource chain"),
        _ => ("*".into(), "asterisk target"),
    }
}

/// Applies one structured mutation to `r`; returns its note.
pub fn mutate(rng: &mut StdRng, r: &mut Req, tokens: &[String], rv: u64) -> String {
    match rng.random_range(0..22u32) {
        0 => {
            let m = [
                "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE", "CONNECT",
                "PROPFIND", "get", "PURGE", "WATCH", "LIST", "BREW", "M-SEARCH",
            ]
            .choose(rng)
            .copied()
            .unwrap_or("OPTIONS")
            .to_string();
            let m = if rng.random_ratio(1, 20) {
                "X".repeat(rng.random_range(100..5000))
            } else {
                m
            };
            let note = format!("method {}", if m.len() > 20 { "long" } else { &m });
            r.method = m;
            note
        }
        1 | 2 => {
            let (p, note) = path_mutation(rng, &r.path);
            r.path = p;
            note.to_string()
        }
        3..=6 => {
            let piece = query_piece(rng, tokens, rv);
            let note = format!("query +{}", trunc(&piece, 40));
            r.query.push(piece);
            note
        }
        7 => {
            // Repeat a key with another value.
            let Some(first) = r.query.first().cloned() else {
                r.query.push("watch=1&watch=0".into());
                return "repeated watch".into();
            };
            let key = first.split('=').next().unwrap_or("").to_string();
            let v = param_value(rng, &key, tokens, rv);
            r.query.push(format!("{key}={v}"));
            format!("repeated {key}")
        }
        8 => {
            if !r.query.is_empty() {
                let i = rng.random_range(0..r.query.len());
                r.query.remove(i);
            }
            r.query.push(
                ["&&&", "=", "==", "&", ";", "a=b;c=d", "%26", "+"]
                    .choose(rng)
                    .copied()
                    .unwrap_or("&")
                    .into(),
            );
            "malformed query".into()
        }
        9 | 10 => {
            let (n, v) = header(rng);
            let note = format!("header {n}");
            if rng.random_bool(0.5) {
                r.remove(&n);
            }
            r.headers.push((n, v));
            note
        }
        11 => {
            r.remove("accept");
            r.headers.push(("Accept".into(), accept(rng)));
            "accept".into()
        }
        12 => {
            // A header past watchmux's limit, or very many.
            if rng.random_bool(0.5) {
                r.headers.push((
                    "X-Huge".into(),
                    vec![b'h'; rng.random_range(40_000..200_000)],
                ));
                "huge header".into()
            } else {
                for i in 0..rng.random_range(100..3000) {
                    r.headers.push((format!("X-Many-{i}"), b"v".to_vec()));
                }
                "many headers".into()
            }
        }
        13 | 14 => {
            let (b, note) = body(rng, &r.body);
            r.body = b;
            if r.method == "GET" && rng.random_bool(0.5) {
                r.method = ["POST", "PUT", "PATCH"]
                    .choose(rng)
                    .copied()
                    .unwrap_or("POST")
                    .into();
            }
            note.into()
        }
        15 => {
            r.framing = Framing::Chunked;
            if r.body.is_empty() {
                r.body = b"{}".to_vec();
            }
            "chunked body".into()
        }
        16 => {
            // Content-Length that does not match: smaller leaves bytes for a "next request".
            if r.body.is_empty() {
                r.body = random_bytes(rng, 16);
            }
            let len = r.body.len();
            r.framing = Framing::Declared(rng.random_range(0..len).to_string());
            "Content-Length shorter than body".into()
        }
        17 => {
            r.framing = Framing::Declared(
                [
                    "-1",
                    "abc",
                    "1 2",
                    "18446744073709551616",
                    "+3",
                    " 3",
                    "0x10",
                    "",
                ]
                .choose(rng)
                .copied()
                .unwrap_or("-1")
                .into(),
            );
            "bad Content-Length".into()
        }
        18 => {
            let te = [
                "chunked, chunked",
                "gzip, chunked",
                "identity",
                "xchunked",
                "chunked;x=1",
                "Chunked",
                "chunked\t",
            ]
            .choose(rng)
            .copied()
            .unwrap_or("identity");
            r.framing = Framing::Bare;
            r.headers
                .push(("Transfer-Encoding".into(), te.as_bytes().to_vec()));
            if rng.random_bool(0.5) {
                r.headers.push((
                    "Content-Length".into(),
                    r.body.len().to_string().into_bytes(),
                ));
            }
            format!("Transfer-Encoding {te}")
        }
        19 => {
            r.version = "HTTP/1.0";
            if rng.random_bool(0.5) {
                r.no_host = true;
            }
            "HTTP/1.0".into()
        }
        20 => {
            r.no_host = true;
            "no Host".into()
        }
        _ => {
            r.headers.push(("Content-Type".into(), content_type(rng)));
            "content type".into()
        }
    }
}

/// Applies one raw mutation to request bytes; returns the note and whether the result is
/// known to be an incomplete request (the write side is then shut).
pub fn mutate_raw(rng: &mut StdRng, b: &mut Vec<u8>) -> (String, bool) {
    let len = b.len().max(1);
    match rng.random_range(0..14u32) {
        0 => {
            for _ in 0..rng.random_range(1..8) {
                let i = rng.random_range(0..len).min(b.len().saturating_sub(1));
                if let Some(x) = b.get_mut(i) {
                    *x ^= 1 << rng.random_range(0..8);
                }
            }
            ("bit flips".into(), false)
        }
        1 => {
            let c = *[0u8, b'\r', b'\n', b' ', b':', 0xff, 0x7f, b'\t', b'"', b'%']
                .choose(rng)
                .unwrap_or(&0);
            let i = rng.random_range(0..=b.len());
            b.insert(i, c);
            (format!("byte 0x{c:02x} inserted"), false)
        }
        2 => {
            let i = rng.random_range(0..len);
            let j = rng.random_range(i..=len).min(b.len());
            b.drain(i.min(b.len())..j);
            ("range deleted".into(), false)
        }
        3 => {
            let cut = rng.random_range(0..len);
            b.truncate(cut);
            ("truncated".into(), true)
        }
        4 => {
            *b = replace_all(b, b"\r\n", b"\n");
            ("LF line endings".into(), false)
        }
        5 => {
            // obs-fold: a header line continued on the next line.
            if let Some(i) = memchr::memmem::find(b, b"\r\n").and_then(|i| {
                b.get(i + 2..)
                    .and_then(|rest| memchr::memmem::find(rest, b"\r\n"))
                    .map(|j| i + 2 + j)
            }) {
                b.splice(i..i, b"\r\n  folded".iter().copied());
            }
            ("obs-fold".into(), false)
        }
        6 => {
            let line = [
                "GET / HTTP/9.9",
                "GET /api/v1/pods HTTP/1.1 extra",
                "GET  /api/v1/pods  HTTP/1.1",
                "GET http://127.0.0.1/api/v1/pods HTTP/1.1",
                "GET http://evil.example/api/v1/pods HTTP/1.1",
                "CONNECT 127.0.0.1:443 HTTP/1.1",
                "OPTIONS * HTTP/1.1",
                "GET /api/v1/pods",
                "GET",
                "/api/v1/pods HTTP/1.1",
                "GET /api/v1/pods HTTP/1.1\r\n\r\n",
                "G\u{00c9}T /api HTTP/1.1",
                "GET /api/v1/pods?x=\u{00ff} HTTP/1.1",
                "GET /api/v1/pods#frag HTTP/1.1",
                "GET /api v1 HTTP/1.1",
                "PRI * HTTP/2.0",
            ]
            .choose(rng)
            .copied()
            .unwrap_or("GET / HTTP/9.9");
            let end = memchr::memmem::find(b, b"\r\n").unwrap_or(b.len());
            b.splice(..end, line.bytes());
            (format!("request line {}", trunc(line, 40)), false)
        }
        7 => {
            let n = rng.random_range(1..2048);
            *b = random_bytes(rng, n);
            if rng.random_bool(0.5) {
                b.extend_from_slice(b"\r\n\r\n");
            }
            ("random bytes".into(), false)
        }
        8 => {
            // Pipelined copies.
            let one = b.clone();
            for _ in 0..rng.random_range(1..3) {
                b.extend_from_slice(&one);
            }
            ("pipelined".into(), false)
        }
        9 => {
            // A header line without a colon, or with a space before it.
            let bad = [
                &b"NoColon\r\n"[..],
                b"Bad Name: x\r\n",
                b"Name : x\r\n",
                b": empty\r\n",
                b"X-Nul: a\x00b\r\n",
                b"X-Ctl: \x01\r\n",
            ]
            .choose(rng)
            .copied()
            .unwrap_or(b"NoColon\r\n");
            if let Some(i) = memchr::memmem::find(b, b"\r\n") {
                b.splice(i + 2..i + 2, bad.iter().copied());
            }
            ("bad header line".into(), false)
        }
        10 => {
            // Chunked body with broken sizes.
            let end = memchr::memmem::find(b, b"\r\n\r\n").map_or(b.len(), |i| i + 2);
            b.truncate(end);
            b.extend_from_slice(b"Transfer-Encoding: chunked\r\n\r\n");
            let body = [
                &b"zz\r\nxx\r\n0\r\n\r\n"[..],
                b"ffffffffffffffffff\r\n",
                b"5\r\nabc\r\n0\r\n\r\n",
                b"3\nabc\n0\n\n",
                b"-1\r\n\r\n",
            ]
            .choose(rng)
            .copied()
            .unwrap_or(b"zz\r\n");
            b.extend_from_slice(body);
            ("broken chunked body".into(), false)
        }
        11 => {
            // The head never ends: the server must give up (shut: the server sees the end).
            if let Some(i) = memchr::memmem::find(b, b"\r\n\r\n") {
                b.truncate(i + 2);
            }
            b.extend_from_slice(b"X-Never: ");
            ("head never ends".into(), true)
        }
        12 => {
            let n = rng.random_range(1..64);
            let mut junk = random_bytes(rng, n);
            junk.extend_from_slice(b"\r\n");
            b.splice(0..0, junk);
            ("garbage before the request".into(), false)
        }
        _ => {
            // Lowercase/odd-cased framing header names, duplicated Content-Length.
            b.splice(
                memchr::memmem::find(b, b"\r\n").map_or(0, |i| i + 2)
                    ..memchr::memmem::find(b, b"\r\n").map_or(0, |i| i + 2),
                b"content-length: 0\r\nCONTENT-LENGTH: 5\r\n"
                    .iter()
                    .copied(),
            );
            ("conflicting Content-Length".into(), false)
        }
    }
}

fn replace_all(b: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b.get(i..i + from.len()) == Some(from) {
            out.extend_from_slice(to);
            i += from.len();
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    out
}

/// `s` cut to `n` characters.
pub fn trunc(s: &str, n: usize) -> String {
    s.chars().take(n).collect()
}
