//! Every error the simulator answers, over raw HTTP, against kube-apiserver's exact behaviour:
//! HTTP code, `reason`, `message` text and the byte-exact `metav1.Status` body (field order
//! `kind, apiVersion, metadata, status, message, reason, details, code`, Go's HTML escaping),
//! plus the "HTTP status vs. ERROR event" split of spec §1.4.

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use http::{HeaderMap, Method, StatusCode};
use kube_sim::testkit::*;
use serde_json::{Map, Value, json};

const T: Duration = Duration::from_secs(5);

// ---------------------------------------------------------------------------------------------
// Expected bodies
// ---------------------------------------------------------------------------------------------

/// A JSON string literal as Go's encoding/json writes it (HTML characters escaped).
fn go_str(s: &str) -> String {
    serde_json::to_string(s)
        .unwrap()
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
}

/// The exact bytes of a failure Status; `details` is the raw JSON of the `details` member.
fn status_json(code: u16, reason: &str, message: &str, details: Option<&str>) -> String {
    status_json_meta(code, reason, message, details, "{}")
}

fn status_json_meta(
    code: u16,
    reason: &str,
    message: &str,
    details: Option<&str>,
    metadata: &str,
) -> String {
    let mut s = format!(
        r#"{{"kind":"Status","apiVersion":"v1","metadata":{metadata},"status":"Failure","message":{}"#,
        go_str(message)
    );
    if !reason.is_empty() {
        s.push_str(&format!(r#","reason":"{reason}""#));
    }
    if let Some(d) = details {
        s.push_str(&format!(r#","details":{d}"#));
    }
    s.push_str(&format!(r#","code":{code}}}"#));
    s
}

/// `details` naming a resource and object, as `NewNotFound` / `NewConflict` / ... write it.
fn named_details(group: &str, kind: &str, name: &str) -> String {
    let mut m = Map::new();
    if !name.is_empty() {
        m.insert("name".into(), json!(name));
    }
    if !group.is_empty() {
        m.insert("group".into(), json!(group));
    }
    m.insert("kind".into(), json!(kind));
    Value::Object(m).to_string()
}

/// One field error: (cause type, field, detail).
type Cause<'a> = (&'a str, &'a str, String);

/// The exact 422 body `NewInvalid(GroupKind{group, kind}, name, errs)` writes.
fn invalid_json(group: &str, kind: &str, name: &str, causes: &[Cause<'_>]) -> String {
    let qualified = if group.is_empty() {
        kind.to_string()
    } else {
        format!("{kind}.{group}")
    };
    let errs: Vec<String> = causes
        .iter()
        .map(|(_, field, detail)| format!("{field}: {detail}"))
        .collect();
    let agg = if errs.len() == 1 {
        errs[0].clone()
    } else {
        format!("[{}]", errs.join(", "))
    };
    let message = format!("{qualified} {} is invalid: {agg}", go_str(name));
    let mut d = Map::new();
    if !name.is_empty() {
        d.insert("name".into(), json!(name));
    }
    if !group.is_empty() {
        d.insert("group".into(), json!(group));
    }
    d.insert("kind".into(), json!(kind));
    d.insert(
        "causes".into(),
        Value::Array(
            causes
                .iter()
                .map(|(reason, field, detail)| json!({"reason": reason, "message": detail, "field": field}))
                .collect(),
        ),
    );
    status_json(
        422,
        "Invalid",
        &message,
        Some(&Value::Object(d).to_string()),
    )
}

fn forbidden(field: &'static str, detail: &str) -> Cause<'static> {
    ("FieldValueForbidden", field, format!("Forbidden: {detail}"))
}

fn rvm_not_supported(value: &str, supported: &str) -> Cause<'static> {
    (
        "FieldValueNotSupported",
        "resourceVersionMatch",
        format!("Unsupported value: \"{value}\": supported values: {supported}"),
    )
}

fn list_options_invalid(causes: &[Cause<'_>]) -> String {
    invalid_json("meta.k8s.io", "ListOptions", "", causes)
}

// ---------------------------------------------------------------------------------------------
// Requests
// ---------------------------------------------------------------------------------------------

/// Sends a request and asserts the exact status code, `Content-Type` and body bytes (`want` plus
/// the newline Go's encoder writes).
async fn expect(
    method: Method,
    url: &str,
    headers: &[(&str, &str)],
    body: &str,
    code: u16,
    want: &str,
) -> HeaderMap {
    // Go's json.Encoder (kube's serializer) ends every body with a newline.
    expect_body(method, url, headers, body, code, &format!("{want}\n")).await
}

/// As [`expect`], for an error whose `Accept` header takes none of kube's serializers: kube
/// writes it with `WriteRawJSON`, indented by `json.MarshalIndent`, with no trailing newline.
async fn expect_raw(url: &str, accept: &str, code: u16, want: &str) {
    let indented = String::from_utf8(kube_wire::gofmt::indent(want.as_bytes())).unwrap();
    assert!(
        indented.contains("\n  \"kind\": \"Status\",\n"),
        "{indented}"
    );
    expect_body(Method::GET, url, &[("accept", accept)], "", code, &indented).await;
}

/// The request's answer: `code`, JSON, exactly `want`.
async fn expect_body(
    method: Method,
    url: &str,
    headers: &[(&str, &str)],
    body: &str,
    code: u16,
    want: &str,
) -> HeaderMap {
    let (s, h, b) = request(method.clone(), url, headers, body).await;
    let got = String::from_utf8_lossy(&b);
    assert_eq!(s.as_u16(), code, "{method} {url}: {got}");
    assert_eq!(
        h.get("content-type").and_then(|v| v.to_str().ok()),
        Some("application/json"),
        "{method} {url}"
    );
    assert_eq!(got, want, "{method} {url}");
    h
}

async fn expect_get(url: &str, code: u16, want: &str) -> HeaderMap {
    expect(Method::GET, url, &[], "", code, want).await
}

async fn post(url: &str, body: Value) -> Value {
    let (s, v) = send_json(Method::POST, url, "application/json", &body).await;
    assert_eq!(s, StatusCode::CREATED, "POST {url}: {v}");
    v
}

fn cm(name: &str) -> Value {
    json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":name},"data":{"k":"v"}})
}

fn token(json: &str) -> String {
    URL_SAFE_NO_PAD.encode(json)
}

fn decode_token(t: &str) -> String {
    String::from_utf8(URL_SAFE_NO_PAD.decode(t).expect("base64url")).unwrap()
}

// ---------------------------------------------------------------------------------------------
// 400
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn selector_errors_are_400_for_list_and_watch() {
    let sim = sim().await;
    let u = sim.url();
    let bad = |m: &str| status_json(400, "BadRequest", m, None);
    let cases: &[(&str, &str)] = &[
        (
            "labelSelector=x%20y",
            "unable to parse requirement: found 'y', expected: in, notin, =, ==, !=, gt, lt",
        ),
        (
            "labelSelector=x%3D%3Da%3D%3Db",
            "found '==', expected: ',' or 'end of string'",
        ),
        (
            "labelSelector=x%3C1%2Cy%3Cz",
            "unable to parse requirement: values[0]: Invalid value: \"z\": for 'Gt', 'Lt' operators, the value must be an integer",
        ),
        (
            "fieldSelector=x",
            "invalid selector: 'x'; can't understand 'x'",
        ),
        // `<` in the echoed selector is written as \u003c, as Go's encoder does.
        (
            "fieldSelector=x%3C5",
            "invalid selector: 'x<5'; can't understand 'x<5'",
        ),
        (
            "fieldSelector=a%3Dc%3Dd",
            "invalid field selector: unescaped character in value: 61",
        ),
        (
            "fieldSelector=a%3D%5Cx",
            "invalid field selector: invalid escape sequence: \\x",
        ),
        // Pods use the core/v1 converter.
        ("fieldSelector=x%3D1", "field label not supported: x"),
        (
            "fieldSelector=spec.nodeName%3Dn%2Cspec.foo%3Db",
            "field label not supported: spec.foo",
        ),
    ];
    for (q, msg) in cases {
        for path in [
            format!("{u}/api/v1/pods?{q}"),
            format!("{u}/api/v1/namespaces/default/pods?{q}&limit=5"),
            format!("{u}/api/v1/pods?watch=1&{q}"),
            format!("{u}/api/v1/watch/namespaces/default/pods?{q}"),
            format!("{u}/api/v1/namespaces/default/pods?watch=true&resourceVersion=1&{q}"),
        ] {
            expect_get(&path, 400, &bad(msg)).await;
        }
    }
    // Kinds on the default converter accept metadata.name / metadata.namespace only.
    let default_msg =
        r#""x" is not a known field selector: only "metadata.name", "metadata.namespace""#;
    for path in [
        format!("{u}/api/v1/namespaces/default/configmaps?fieldSelector=x%3D1"),
        format!("{u}/api/v1/configmaps?watch=1&fieldSelector=metadata.name%3Da%2Cx%3D1"),
        format!("{u}/apis/discovery.k8s.io/v1/endpointslices?fieldSelector=x%3D1"),
    ] {
        expect_get(&path, 400, &bad(default_msg)).await;
    }
    expect_get(
        &format!("{u}/apis/discovery.k8s.io/v1/endpointslices?fieldSelector=addressType%3DIPv4"),
        400,
        &bad(
            r#""addressType" is not a known field selector: only "metadata.name", "metadata.namespace""#,
        ),
    )
    .await;
    // ...and the accepted keys work.
    let (s, v) = get_json(&format!(
        "{u}/api/v1/configmaps?fieldSelector=metadata.namespace%3Ddefault%2Cmetadata.name%21%3Dx"
    ))
    .await;
    assert_eq!(s, 200, "{v}");
}

#[tokio::test]
async fn continue_and_resource_version_errors_are_400() {
    let sim = sim().await;
    let u = sim.url();
    let ns = format!("{u}/api/v1/namespaces/default/configmaps");
    for i in 0..3 {
        post(&ns, cm(&format!("cm-{i}"))).await;
    }
    let (s, page) = get_json(&format!("{ns}?limit=1")).await;
    assert_eq!(s, 200);
    let tok = page["metadata"]["continue"].as_str().unwrap().to_string();
    let bad = |m: &str| status_json(400, "BadRequest", m, None);
    let invalid_tok = |detail: &str| bad(&format!("invalid continue token: {detail}"));

    // Token decoding (kube's storage.DecodeContinue messages).
    let cases: Vec<(String, String)> = vec![
        (
            "!!!".into(),
            invalid_tok("continue key is not valid: illegal base64 data at input byte 0"),
        ),
        (
            "eyJ2Ijoi!".into(),
            invalid_tok("continue key is not valid: illegal base64 data at input byte 8"),
        ),
        // kube 1.36's offset: Go finds the bad byte before the bad length.
        (
            "garbage!!".into(),
            invalid_tok("continue key is not valid: illegal base64 data at input byte 7"),
        ),
        (
            token(r#"{"v":"meta.k8s.io/v1","rv":0,"start":"cm-0\u0000"}"#),
            invalid_tok(
                "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)",
            ),
        ),
        (
            token(r#"{"v":"meta.k8s.io/v1","rv":3,"start":""}"#),
            invalid_tok(
                "continue key is not valid: encoded start key empty (version meta.k8s.io/v1)",
            ),
        ),
        (
            token(r#"{"v":"meta.k8s.io/v2","rv":3,"start":"cm-0\u0000"}"#),
            invalid_tok(
                "continue key is not valid: server does not recognize this encoded version meta.k8s.io/v2",
            ),
        ),
    ];
    for (t, want) in &cases {
        expect_get(&format!("{ns}?limit=1&continue={t}"), 400, want).await;
        // The token is decoded before the resourceVersion is looked at.
        expect_get(
            &format!("{ns}?limit=1&continue={t}&resourceVersion=5"),
            400,
            want,
        )
        .await;
    }

    // A valid token with a resourceVersion other than ""/"0" (L13); the RV is not even parsed.
    let no_rv = bad("specifying resource version is not allowed when using continue");
    for rv in ["1", "5", "99999", "abc"] {
        expect_get(
            &format!("{ns}?limit=1&continue={tok}&resourceVersion={rv}"),
            400,
            &no_rv,
        )
        .await;
    }
    // ""/"0" are fine with a token.
    for rv in ["", "0"] {
        let (s, v) = get_json(&format!("{ns}?limit=1&continue={tok}&resourceVersion={rv}")).await;
        assert_eq!(s, 200, "{v}");
        assert_eq!(v["items"][0]["metadata"]["name"], "cm-1");
    }

    // Non-numeric resourceVersion on LIST (and on GET of an object).
    for rv in ["abc", "-1", "1.5", "0x10"] {
        let msg = format!(
            "invalid resource version: resourceVersion: Invalid value: \"{rv}\": strconv.ParseUint: parsing \"{rv}\": invalid syntax"
        );
        expect_get(&format!("{ns}?resourceVersion={rv}"), 400, &bad(&msg)).await;
        expect_get(
            &format!("{ns}?resourceVersion={rv}&limit=2"),
            400,
            &bad(&msg),
        )
        .await;
    }
}

#[tokio::test]
async fn legacy_watch_path_name_conflicting_with_field_selector_is_400() {
    let sim = sim().await;
    let u = sim.url();
    post(
        &format!("{u}/api/v1/namespaces/default/pods"),
        pod("a", "", json!({})),
    )
    .await;
    let want = status_json(
        400,
        "BadRequest",
        "fieldSelector metadata.name doesn't match requested name",
        None,
    );
    for q in [
        "fieldSelector=metadata.name%3Db",
        "fieldSelector=metadata.name%3D%3Db",
        "fieldSelector=spec.nodeName%3Dn%2Cmetadata.name%3Db",
        "fieldSelector=metadata.name%3Db&resourceVersion=0",
        // a non-empty selector must itself pin metadata.name to the name in the path
        "fieldSelector=spec.nodeName%3Dn",
        "fieldSelector=metadata.name%21%3Da",
        "fieldSelector=metadata.namespace%3Ddefault",
    ] {
        expect_get(
            &format!("{u}/api/v1/watch/namespaces/default/pods/a?{q}"),
            400,
            &want,
        )
        .await;
    }
    // Validation (422) and field label conversion (400) come before the name rule.
    expect_get(
        &format!("{u}/api/v1/watch/namespaces/default/pods/a?fieldSelector=metadata.name%3Db&resourceVersionMatch=NotOlderThan&resourceVersion=1"),
        422,
        &list_options_invalid(&[forbidden(
            "resourceVersionMatch",
            "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
        )]),
    )
    .await;
    expect_get(
        &format!("{u}/api/v1/watch/namespaces/default/pods/a?fieldSelector=x%3D1"),
        400,
        &status_json(400, "BadRequest", "field label not supported: x", None),
    )
    .await;
    // The same name (alone or with other terms) is accepted and scopes the watch to that object.
    let mut w = watch(&format!(
        "{u}/api/v1/watch/namespaces/default/pods/a?fieldSelector=spec.nodeName%3D%2Cmetadata.name%3Da"
    ))
    .await;
    assert_eq!(w.status, 200);
    assert_eq!(w.next_event(T).await["object"]["metadata"]["name"], "a");
    let mut w = watch(&format!(
        "{u}/api/v1/watch/namespaces/default/pods/a?fieldSelector=metadata.name%3Da"
    ))
    .await;
    assert_eq!(w.status, 200);
    let e = w.next_event(T).await;
    assert_eq!(e["type"], "ADDED");
    assert_eq!(e["object"]["metadata"]["name"], "a");
}

// ---------------------------------------------------------------------------------------------
// 422
// ---------------------------------------------------------------------------------------------

/// kube's handler order (`ListResource`, `listOpts`): the query is decoded first (400: numbers
/// in `metav1.ListOptions` field order, then the label selector, then the field selector's
/// syntax), then validated (422), then the kind's field labels are converted (400); the
/// continue token is the storage's, after all of these, and is Go's JSON error when its
/// base64 holds no JSON.
#[tokio::test]
async fn errors_come_in_kubes_order() {
    let sim = sim().await;
    let u = sim.url();
    let bad = |m: &str| status_json(400, "BadRequest", m, None);
    let parse = "unable to parse requirement: found 'y', expected: in, notin, =, ==, !=, gt, lt";
    let unless_rv = list_options_invalid(&[forbidden(
        "resourceVersionMatch",
        "resourceVersionMatch is forbidden unless resourceVersion is provided",
    )]);
    for (q, code, want) in [
        // A bad selector before a 422.
        (
            "resourceVersionMatch=Exact&labelSelector=x%20y",
            400,
            bad(parse),
        ),
        (
            "resourceVersionMatch=Exact&fieldSelector=x",
            400,
            bad("invalid selector: 'x'; can't understand 'x'"),
        ),
        // The label selector before the field selector, numbers before both.
        ("fieldSelector=x&labelSelector=x%20y", 400, bad(parse)),
        (
            "labelSelector=x%20y&limit=z&timeoutSeconds=q",
            400,
            bad(r#"strconv.ParseInt: parsing "q": invalid syntax"#),
        ),
        // A 422 before a field label the kind does not support.
        (
            "resourceVersionMatch=Exact&fieldSelector=x%3D1",
            422,
            unless_rv,
        ),
        // The continue token last; not JSON inside: Go's json error, as kube embeds it.
        (
            "fieldSelector=x%3D1&continue=gQID",
            400,
            bad("field label not supported: x"),
        ),
        (
            "continue=gQID",
            400,
            bad(
                r"invalid continue token: continue key is not valid: invalid character '\x81' looking for beginning of value",
            ),
        ),
    ] {
        expect_get(
            &format!("{u}/api/v1/namespaces/default/pods?{q}"),
            code,
            &want,
        )
        .await;
    }
}

#[tokio::test]
async fn list_options_validation_is_422_for_list_and_watch() {
    let sim = sim().await;
    let u = sim.url();
    let pods = format!("{u}/api/v1/namespaces/default/pods");
    let unless_rv = forbidden(
        "resourceVersionMatch",
        "resourceVersionMatch is forbidden unless resourceVersion is provided",
    );
    let with_continue = forbidden(
        "resourceVersionMatch",
        "resourceVersionMatch is forbidden when continue is provided",
    );
    let exact_zero = forbidden(
        "resourceVersionMatch",
        "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
    );
    let sie_list = forbidden(
        "sendInitialEvents",
        "sendInitialEvents is forbidden for list",
    );
    let list_values = r#""Exact", "NotOlderThan", """#;

    // LIST (spec §1.3, L3/L6): every error is reported, in apimachinery's order.
    let list_cases: Vec<(&str, Vec<Cause<'_>>)> = vec![
        ("resourceVersionMatch=NotOlderThan", vec![unless_rv.clone()]),
        (
            "resourceVersionMatch=Exact&limit=5",
            vec![unless_rv.clone()],
        ),
        (
            "resourceVersion=&resourceVersionMatch=Exact",
            vec![unless_rv.clone()],
        ),
        (
            "resourceVersion=3&resourceVersionMatch=NotOlderThan&continue=abc",
            vec![with_continue.clone()],
        ),
        (
            "resourceVersion=3&resourceVersionMatch=Bogus",
            vec![rvm_not_supported("Bogus", list_values)],
        ),
        (
            "resourceVersion=3&resourceVersionMatch=exact",
            vec![rvm_not_supported("exact", list_values)],
        ),
        (
            "resourceVersion=0&resourceVersionMatch=Exact",
            vec![exact_zero.clone()],
        ),
        ("sendInitialEvents=true", vec![sie_list.clone()]),
        ("sendInitialEvents=false&limit=1", vec![sie_list.clone()]),
        // Several errors at once: "[a, b]" and one cause each.
        (
            "resourceVersionMatch=Bogus",
            vec![unless_rv.clone(), rvm_not_supported("Bogus", list_values)],
        ),
        (
            "resourceVersionMatch=Exact&continue=abc",
            vec![unless_rv.clone(), with_continue.clone()],
        ),
        (
            "resourceVersion=0&resourceVersionMatch=Exact&sendInitialEvents=true",
            vec![exact_zero.clone(), sie_list.clone()],
        ),
    ];
    for (q, causes) in &list_cases {
        expect_get(&format!("{pods}?{q}"), 422, &list_options_invalid(causes)).await;
    }
    // Validation runs before the continue token or the selectors are looked at.
    expect_get(
        &format!("{pods}?resourceVersionMatch=NotOlderThan&continue=!!!"),
        422,
        &list_options_invalid(&[unless_rv.clone(), with_continue.clone()]),
    )
    .await;

    // WATCH (after watch-list defaulting of RV ""/"0").
    let requires_not_older = forbidden(
        "resourceVersionMatch",
        "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
    );
    let unless_sie = forbidden(
        "resourceVersionMatch",
        "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
    );
    let watch_values = r#""NotOlderThan""#;
    let watch_cases: Vec<(&str, Vec<Cause<'_>>)> = vec![
        ("sendInitialEvents=true", vec![requires_not_older.clone()]),
        (
            "sendInitialEvents=false&resourceVersion=5",
            vec![requires_not_older.clone()],
        ),
        (
            "resourceVersion=5&resourceVersionMatch=NotOlderThan",
            vec![unless_sie.clone()],
        ),
        (
            "resourceVersionMatch=NotOlderThan",
            vec![unless_sie.clone()],
        ),
        (
            "sendInitialEvents=true&resourceVersionMatch=Exact",
            vec![
                requires_not_older.clone(),
                rvm_not_supported("Exact", watch_values),
            ],
        ),
        (
            "resourceVersion=7&resourceVersionMatch=Exact",
            vec![unless_sie.clone(), rvm_not_supported("Exact", watch_values)],
        ),
        (
            "sendInitialEvents=true&resourceVersionMatch=NotOlderThan&continue=abc",
            vec![with_continue.clone()],
        ),
        // RV unset + continue is defaulted to a watch-list, whose RVM conflicts with continue.
        ("continue=abc", vec![with_continue.clone()]),
        (
            "resourceVersion=0&continue=abc",
            vec![with_continue.clone()],
        ),
        (
            "resourceVersion=3&resourceVersionMatch=Bogus&continue=x",
            vec![
                unless_sie.clone(),
                rvm_not_supported("Bogus", watch_values),
                with_continue.clone(),
            ],
        ),
    ];
    for (q, causes) in &watch_cases {
        let want = list_options_invalid(causes);
        expect_get(&format!("{pods}?watch=1&{q}"), 422, &want).await;
        expect_get(&format!("{u}/api/v1/watch/pods?{q}"), 422, &want).await;
        expect_get(
            &format!("{u}/api/v1/watch/namespaces/default/pods/a?{q}"),
            422,
            &want,
        )
        .await;
    }
    // A valid watch-list request is not refused.
    let w = watch(&format!(
        "{pods}?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan"
    ))
    .await;
    assert_eq!(w.status, 200);
}

#[tokio::test]
async fn object_validation_is_422() {
    let sim = sim().await;
    let u = sim.url();
    let cms = format!("{u}/api/v1/namespaces/default/configmaps");
    let pods = format!("{u}/api/v1/namespaces/default/pods");
    let subdomain = |name: &str| {
        format!(
            "Invalid value: \"{name}\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
        )
    };
    for name in ["Bad_Name", "-x", "x.", "UPPER"] {
        let body = cm(name).to_string();
        expect(
            Method::POST,
            &cms,
            &[("content-type", "application/json")],
            &body,
            422,
            &invalid_json(
                "",
                "ConfigMap",
                name,
                &[("FieldValueInvalid", "metadata.name", subdomain(name))],
            ),
        )
        .await;
    }
    // Namespaces use the DNS label rule.
    let label_msg = "Invalid value: \"a.b\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
    expect(
        Method::POST,
        &format!("{u}/api/v1/namespaces"),
        &[("content-type", "application/json")],
        r#"{"metadata":{"name":"a.b"}}"#,
        422,
        &invalid_json(
            "",
            "Namespace",
            "a.b",
            &[("FieldValueInvalid", "metadata.name", label_msg.to_string())],
        ),
    )
    .await;
    // Missing name (and no generateName).
    let required = invalid_json(
        "",
        "ConfigMap",
        "",
        &[(
            "FieldValueRequired",
            "metadata.name",
            "Required value: name or generateName is required".into(),
        )],
    );
    for body in [
        r#"{"metadata":{}}"#,
        r#"{"apiVersion":"v1","kind":"ConfigMap","data":{"a":"b"}}"#,
        r#"{"metadata":{"name":""}}"#,
    ] {
        expect(
            Method::POST,
            &cms,
            &[("content-type", "application/json")],
            body,
            422,
            &required,
        )
        .await;
    }
    // A pod without containers.
    let no_containers = invalid_json(
        "",
        "Pod",
        "x",
        &[(
            "FieldValueRequired",
            "spec.containers",
            "Required value".into(),
        )],
    );
    for body in [
        r#"{"metadata":{"name":"x"},"spec":{}}"#,
        r#"{"metadata":{"name":"x"},"spec":{"containers":[]}}"#,
        r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"x"}}"#,
    ] {
        expect(
            Method::POST,
            &pods,
            &[("content-type", "application/json")],
            body,
            422,
            &no_containers,
        )
        .await;
    }
    // Nothing was created by any of these.
    let (_, list) = get_json(&format!("{u}/api/v1/configmaps")).await;
    assert_eq!(list["items"], json!([]));
    let (_, list) = get_json(&format!("{u}/api/v1/pods")).await;
    assert_eq!(list["items"], json!([]));
}

// ---------------------------------------------------------------------------------------------
// 404, 405, 406
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn not_found_method_not_allowed_not_acceptable() {
    let sim = sim().await;
    let u = sim.url();
    post(
        &format!("{u}/api/v1/namespaces/default/pods"),
        pod("a", "", json!({})),
    )
    .await;

    // 404 for paths the server does not serve: `details` is present and empty.
    let no_path = status_json(
        404,
        "NotFound",
        "the server could not find the requested resource",
        Some("{}"),
    );
    for p in [
        "/api/v1/foos",
        "/api/v1/namespaces/default/foos",
        "/apis/nope.example.com/v1/things",
        "/apis/discovery.k8s.io/v1/namespaces/default/widgets",
        // cluster-scoped kind under a namespace
        "/api/v1/namespaces/default/nodes",
        // an unknown subresource
        "/api/v1/namespaces/default/pods/a/bogus",
        // an object of a namespaced kind outside a namespace (existing or not), its
        // subresource, and its legacy watch path: kube registers none of these routes
        "/api/v1/pods/a",
        "/api/v1/pods/zz",
        "/api/v1/pods/a/status",
        "/api/v1/watch/pods/a",
        "/apis/apps/v1/deployments/d",
        "/nonsense",
    ] {
        expect_get(&format!("{u}{p}"), 404, &no_path).await;
    }
    // 404 for a missing object: `<resource> "<name>" not found` with name/kind details.
    let missing = |res: &str, group: &str, name: &str| {
        let gr = if group.is_empty() {
            res.to_string()
        } else {
            format!("{res}.{group}")
        };
        status_json(
            404,
            "NotFound",
            &format!("{gr} \"{name}\" not found"),
            Some(&named_details(group, res, name)),
        )
    };
    expect_get(
        &format!("{u}/api/v1/namespaces/default/pods/x"),
        404,
        &missing("pods", "", "x"),
    )
    .await;
    expect_get(
        &format!("{u}/api/v1/namespaces/other/pods/a"),
        404,
        &missing("pods", "", "a"),
    )
    .await;
    expect_get(
        &format!("{u}/api/v1/nodes/n9"),
        404,
        &missing("nodes", "", "n9"),
    )
    .await;
    expect_get(
        &format!("{u}/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/web"),
        404,
        &missing("endpointslices", "discovery.k8s.io", "web"),
    )
    .await;
    expect(
        Method::DELETE,
        &format!("{u}/api/v1/namespaces/default/pods/x"),
        &[],
        "",
        404,
        &missing("pods", "", "x"),
    )
    .await;
    expect(
        Method::PUT,
        &format!("{u}/api/v1/namespaces/default/configmaps/x"),
        &[("content-type", "application/json")],
        &cm("x").to_string(),
        404,
        &missing("configmaps", "", "x"),
    )
    .await;
    // Creating into a namespace that does not exist.
    expect(
        Method::POST,
        &format!("{u}/api/v1/namespaces/nope/configmaps"),
        &[("content-type", "application/json")],
        &cm("x").to_string(),
        404,
        &missing("namespaces", "", "nope"),
    )
    .await;

    // 405.
    let not_allowed = status_json(
        405,
        "MethodNotAllowed",
        "the server does not allow this method on the requested resource",
        Some("{}"),
    );
    let body = pod("b", "", json!({})).to_string();
    let ct = [("content-type", "application/json")];
    for (m, p) in [
        // a namespaced collection without a namespace only lists and watches
        (Method::POST, "/api/v1/pods"),
        (Method::POST, "/apis/discovery.k8s.io/v1/endpointslices"),
        (Method::DELETE, "/api/v1/pods"),
        // the legacy watch paths are GET only
        (Method::DELETE, "/api/v1/watch/namespaces/default/pods/a"),
        (Method::POST, "/api/v1/watch/namespaces/default/pods"),
        (Method::PUT, "/api/v1/watch/namespaces/default/pods/a"),
        // no POST on an object, no PUT/PATCH on a collection
        (Method::POST, "/api/v1/namespaces/default/pods/a"),
        (Method::PUT, "/api/v1/namespaces/default/pods"),
        (Method::PATCH, "/api/v1/namespaces/default/pods"),
        // discovery is read-only
        (Method::POST, "/api/v1"),
        (Method::DELETE, "/apis"),
    ] {
        expect(m, &format!("{u}{p}"), &ct, &body, 405, &not_allowed).await;
    }
    // The pod survived the DELETE on the legacy watch path.
    let (s, _) = get_json(&format!("{u}/api/v1/namespaces/default/pods/a")).await;
    assert_eq!(s, 200);

    // 406: nothing the endpoint serializes accepted (kube lists its serializers; a watch, its
    // stream ones), and PartialObjectMetadata (not ...List) asked of a list. (Protobuf alone
    // is served for built-in kinds: see the `protobuf` module.)
    let not_acceptable = |types: &str| {
        status_json(
            406,
            "NotAcceptable",
            &format!("only the following media types are accepted: {types}"),
            None,
        )
    };
    let serializers = "application/json, application/yaml, application/vnd.kubernetes.protobuf";
    let streams = "application/json;stream=watch, application/vnd.kubernetes.protobuf;stream=watch";
    // go-restful refuses first a header with no clause naming exactly a type the route
    // produces (or */*): wildcards like application/* included, which kube's own negotiation
    // would take. Its words, empty details.
    let route_refuses = |code: u16, reason: &str, what: &str, types: &str| {
        status_json(
            code,
            reason,
            &format!("{what}\n\nAvailable representations: {types}"),
            Some("{}"),
        )
    };
    let collection = format!("{serializers}, {streams}");
    // The Status is negotiated as errors are: JSON for `application/*`, raw indented JSON
    // when no clause takes a serializer.
    for (p, accept, types, raw) in [
        ("/api/v1/pods", "text/html", collection.as_str(), true),
        ("/api/v1/pods", "application/*", &collection, false),
        (
            "/api/v1/namespaces/default/pods?watch=1",
            "*/json",
            &collection,
            true,
        ),
        (
            "/api/v1/watch/namespaces/default/pods/a",
            "application/*",
            &collection,
            false,
        ),
        (
            "/api/v1/namespaces/default/pods/a",
            "image/png",
            serializers,
            true,
        ),
        (
            "/api/v1/namespaces/default/pods/a",
            "application/*",
            serializers,
            false,
        ),
        (
            "/api/v1/namespaces/default/pods/a",
            "APPLICATION/JSON",
            serializers,
            true,
        ),
        (
            "/apis/apps/v1/deployments",
            "application/*;q=1, text/*",
            &collection,
            false,
        ),
    ] {
        let want = route_refuses(406, "NotAcceptable", "406: Not Acceptable", types);
        let url = format!("{u}{p}");
        if raw {
            expect_raw(&url, accept, 406, &want).await;
        } else {
            expect(Method::GET, &url, &[("accept", accept)], "", 406, &want).await;
        }
    }
    // A write with no body and no acceptable type: go-restful's 415.
    expect(
        Method::POST,
        &format!("{u}/api/v1/namespaces/default/pods"),
        &[("accept", "application/*")],
        "",
        415,
        &route_refuses(
            415,
            "UnsupportedMediaType",
            "415: Unsupported Media Type",
            serializers,
        ),
    )
    .await;
    for (p, accept, types) in [
        (
            "/api/v1/pods?watch=1",
            "application/vnd.kubernetes.protobuf;stream=other",
            streams,
        ),
        (
            "/api/v1/pods",
            "application/json;as=Table;g=example.com;v=v1",
            serializers,
        ),
    ] {
        // Their headers take no serializer for the Status either: raw JSON.
        expect_raw(&format!("{u}{p}"), accept, 406, &not_acceptable(types)).await;
    }
    let pom = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";
    expect_raw(
        &format!("{u}/api/v1/namespaces/default/pods"),
        pom,
        406,
        &status_json(
            406,
            "NotAcceptable",
            "you requested PartialObjectMetadata, but the requested object is a list (*v1.PodList)",
            None,
        ),
    )
    .await;
    // protobuf listed first with a JSON fallback is fine, as is the metadata form for a GET.
    let (s, _, _) = request(
        Method::GET,
        &format!("{u}/api/v1/pods"),
        &[(
            "accept",
            "application/vnd.kubernetes.protobuf,application/json",
        )],
        "",
    )
    .await;
    assert_eq!(s, 200);
    let (s, _, b) = request(
        Method::GET,
        &format!("{u}/api/v1/namespaces/default/pods/a"),
        &[("accept", pom)],
        "",
    )
    .await;
    assert_eq!(s, 200);
    let v: Value = serde_json::from_slice(&b).unwrap();
    assert_eq!(v["kind"], "PartialObjectMetadata");
}

// ---------------------------------------------------------------------------------------------
// 409
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn conflicts_are_409() {
    let sim = sim().await;
    let u = sim.url();
    let cms = format!("{u}/api/v1/namespaces/default/configmaps");
    let pods = format!("{u}/api/v1/namespaces/default/pods");
    let ct = [("content-type", "application/json")];
    let c1 = post(&cms, cm("a")).await;
    let p1 = post(&pods, pod("p", "", json!({}))).await;

    // AlreadyExists.
    expect(
        Method::POST,
        &cms,
        &ct,
        &cm("a").to_string(),
        409,
        &status_json(
            409,
            "AlreadyExists",
            "configmaps \"a\" already exists",
            Some(&named_details("", "configmaps", "a")),
        ),
    )
    .await;
    expect(
        Method::POST,
        &pods,
        &ct,
        &pod("p", "n1", json!({})).to_string(),
        409,
        &status_json(
            409,
            "AlreadyExists",
            "pods \"p\" already exists",
            Some(&named_details("", "pods", "p")),
        ),
    )
    .await;
    expect(
        Method::POST,
        &format!("{u}/api/v1/namespaces"),
        &ct,
        r#"{"metadata":{"name":"default"}}"#,
        409,
        &status_json(
            409,
            "AlreadyExists",
            "namespaces \"default\" already exists",
            Some(&named_details("", "namespaces", "default")),
        ),
    )
    .await;

    // Conflict: PUT with a stale resourceVersion.
    let mut upd = c1.clone();
    upd["data"] = json!({"k": "v2"});
    let (s, c2) = send_json(Method::PUT, &format!("{cms}/a"), "application/json", &upd).await;
    assert_eq!(s, 200, "{c2}");
    assert!(rv_of(&c2) > rv_of(&c1));
    upd["data"] = json!({"k": "v3"});
    let modified = "the object has been modified; please apply your changes to the latest version and try again";
    expect(
        Method::PUT,
        &format!("{cms}/a"),
        &ct,
        &upd.to_string(),
        409,
        &status_json(
            409,
            "Conflict",
            &format!("Operation cannot be fulfilled on configmaps \"a\": {modified}"),
            Some(&named_details("", "configmaps", "a")),
        ),
    )
    .await;
    let mut pupd = p1.clone();
    pupd["metadata"]["resourceVersion"] = json!("1");
    pupd["metadata"]["labels"] = json!({"x": "y"});
    expect(
        Method::PUT,
        &format!("{pods}/p"),
        &ct,
        &pupd.to_string(),
        409,
        &status_json(
            409,
            "Conflict",
            &format!("Operation cannot be fulfilled on pods \"p\": {modified}"),
            Some(&named_details("", "pods", "p")),
        ),
    )
    .await;
    // The stale writes changed nothing.
    let (_, now) = get_json(&format!("{cms}/a")).await;
    assert_eq!(now["data"]["k"], "v2");
    assert_eq!(rv_of(&now), rv_of(&c2));

    // Conflict: DELETE preconditions (rest.BeforeDelete names the kind).
    let stale = rv_of(&c1);
    let current = rv_of(&c2);
    expect(
        Method::DELETE,
        &format!("{cms}/a"),
        &ct,
        &json!({"preconditions": {"resourceVersion": stale.to_string()}}).to_string(),
        409,
        &status_json(
            409,
            "Conflict",
            &format!(
                "Operation cannot be fulfilled on ConfigMap \"a\": the ResourceVersion in the precondition ({stale}) does not match the ResourceVersion in record ({current}). The object might have been modified"
            ),
            Some(&named_details("", "ConfigMap", "a")),
        ),
    )
    .await;
    let uid = c1["metadata"]["uid"].as_str().unwrap();
    expect(
        Method::DELETE,
        &format!("{cms}/a"),
        &ct,
        r#"{"kind":"DeleteOptions","apiVersion":"v1","preconditions":{"uid":"00000000-0000-0000-0000-000000000000"}}"#,
        409,
        &status_json(
            409,
            "Conflict",
            &format!(
                "Operation cannot be fulfilled on ConfigMap \"a\": the UID in the precondition (00000000-0000-0000-0000-000000000000) does not match the UID in record ({uid}). The object might have been deleted and then recreated"
            ),
            Some(&named_details("", "ConfigMap", "a")),
        ),
    )
    .await;
    let puid = p1["metadata"]["uid"].as_str().unwrap();
    expect(
        Method::DELETE,
        &format!("{pods}/p"),
        &ct,
        r#"{"preconditions":{"uid":"u-1"}}"#,
        409,
        &status_json(
            409,
            "Conflict",
            &format!(
                "Operation cannot be fulfilled on Pod \"p\": the UID in the precondition (u-1) does not match the UID in record ({puid}). The object might have been deleted and then recreated"
            ),
            Some(&named_details("", "Pod", "p")),
        ),
    )
    .await;
    // Matching preconditions delete.
    let (s, v) = send_json(
        Method::DELETE,
        &format!("{cms}/a"),
        "application/json",
        &json!({"preconditions": {"resourceVersion": current.to_string(), "uid": uid}}),
    )
    .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["status"], "Success");
}

// ---------------------------------------------------------------------------------------------
// 410
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn compacted_reads_are_410_and_watches_get_an_error_event() {
    let sim = sim().await;
    let u = sim.url();
    let cms = format!("{u}/api/v1/namespaces/default/configmaps");
    let mut rvs = Vec::new();
    for i in 0..3 {
        rvs.push(rv_of(&post(&cms, cm(&format!("cm-{i}"))).await));
    }
    let (_, page) = get_json(&format!("{cms}?limit=1")).await;
    let tok = page["metadata"]["continue"].as_str().unwrap().to_string();
    let list_rv: u64 = page["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(list_rv, rvs[2]);
    // Before compaction the old revisions are served.
    let (s, v) = get_json(&format!(
        "{cms}?resourceVersion={}&resourceVersionMatch=Exact",
        rvs[0]
    ))
    .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["items"].as_array().unwrap().len(), 1);

    // One more write, so that the token's revision falls below the compaction point.
    rvs.push(rv_of(&post(&cms, cm("cm-3")).await));
    let (s, c) = send_json(
        Method::POST,
        &format!("{u}/sim/compact"),
        "application/json",
        &json!({}),
    )
    .await;
    assert_eq!(s, 200);
    let compacted = c["compacted"].as_u64().unwrap();
    assert_eq!(compacted, rvs[3]);
    // One more write after compaction.
    let after = rv_of(&post(&cms, cm("cm-4")).await);

    // Exact and legacy-exact LISTs below the compaction point.
    let too_old = status_json(
        410,
        "Expired",
        "The resourceVersion for the provided list is too old.",
        None,
    );
    for q in [
        format!("resourceVersion={}&resourceVersionMatch=Exact", rvs[0]),
        format!(
            "resourceVersion={}&resourceVersionMatch=Exact&limit=1",
            rvs[1]
        ),
        format!("resourceVersion={}&limit=2", rvs[0]),
        format!("resourceVersion={}&resourceVersionMatch=Exact", rvs[2]),
    ] {
        expect_get(&format!("{cms}?{q}"), 410, &too_old).await;
    }
    // At the compaction revision itself, and "not older than" an old revision, are fine.
    let (s, v) = get_json(&format!(
        "{cms}?resourceVersion={compacted}&resourceVersionMatch=Exact"
    ))
    .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["items"].as_array().unwrap().len(), 4);
    let (s, v) = get_json(&format!(
        "{cms}?resourceVersion={}&resourceVersionMatch=NotOlderThan",
        rvs[0]
    ))
    .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["metadata"]["resourceVersion"], after.to_string());
    assert_eq!(v["items"].as_array().unwrap().len(), 5);

    // A continue token pinned below the compaction point: the long message and a fresh token
    // with rv -1 that continues after the same key.
    let (s, h, b) = request(
        Method::GET,
        &format!("{cms}?limit=1&continue={tok}"),
        &[],
        "",
    )
    .await;
    assert_eq!(s, 410);
    assert_eq!(h["content-type"], "application/json");
    let body: Value = serde_json::from_slice(&b).unwrap();
    let new_tok = body["metadata"]["continue"]
        .as_str()
        .expect("metadata.continue");
    assert_eq!(
        decode_token(new_tok),
        r#"{"v":"meta.k8s.io/v1","rv":-1,"start":"cm-0\u0000"}"#
    );
    let long = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.";
    assert_eq!(
        String::from_utf8_lossy(&b),
        status_json_meta(
            410,
            "Expired",
            long,
            None,
            &format!(r#"{{"continue":"{new_tok}"}}"#)
        ) + "\n"
    );
    // The rv -1 token continues at the latest revision (L12).
    let (s, v) = get_json(&format!("{cms}?continue={new_tok}")).await;
    assert_eq!(s, 200, "{v}");
    let names: Vec<&str> = v["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["cm-1", "cm-2", "cm-3", "cm-4"]);
    assert_eq!(v["metadata"]["resourceVersion"], after.to_string());

    // WATCH from below the oldest retained revision: HTTP 200, one ERROR event, end of stream.
    let oldest_minus_one = compacted;
    for (url, n) in [
        (format!("{cms}?watch=1&resourceVersion={}", rvs[0]), rvs[0]),
        (
            format!(
                "{u}/api/v1/watch/configmaps?resourceVersion={}&allowWatchBookmarks=true",
                rvs[1]
            ),
            rvs[1],
        ),
        (
            format!(
                "{cms}?watch=1&resourceVersion={}&sendInitialEvents=false&resourceVersionMatch=NotOlderThan",
                compacted - 1
            ),
            compacted - 1,
        ),
    ] {
        let mut w = watch(&url).await;
        assert_eq!(w.status, 200, "{url}");
        assert_eq!(w.headers["content-type"], "application/json");
        let line = match w.next_line(T).await {
            Next::Line(l) => String::from_utf8(l.to_vec()).unwrap(),
            other => panic!("{url}: expected the ERROR event, got {other:?}"),
        };
        let status = status_json(
            410,
            "Expired",
            &format!("too old resource version: {n} ({oldest_minus_one})"),
            None,
        );
        assert_eq!(
            line,
            format!(r#"{{"type":"ERROR","object":{status}}}"#),
            "{url}"
        );
        assert!(
            matches!(w.next_line(T).await, Next::End),
            "{url}: stream ends"
        );
    }
    // From exactly oldest-1 the watch is served and replays what came after.
    let mut w = watch(&format!("{cms}?watch=1&resourceVersion={compacted}")).await;
    let e = w.next_event(T).await;
    assert_eq!(e["type"], "ADDED");
    assert_eq!(e["object"]["metadata"]["name"], "cm-4");
    assert_eq!(
        e["object"]["metadata"]["resourceVersion"],
        after.to_string()
    );
}

// ---------------------------------------------------------------------------------------------
// 504
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn too_large_resource_version_is_504_after_the_block_timeout() {
    let sim = sim().await;
    let u = sim.url();
    let cms = format!("{u}/api/v1/namespaces/default/configmaps");
    let current = rv_of(&post(&cms, cm("a")).await);
    let future = current + 1000;
    let too_large = status_json(
        504,
        "Timeout",
        &format!("Timeout: Too large resource version: {future}, current: {current}"),
        Some(
            r#"{"causes":[{"reason":"ResourceVersionTooLarge","message":"Too large resource version"}],"retryAfterSeconds":1}"#,
        ),
    );
    // All slow cases run concurrently (each waits kube's 3 s block timeout).
    let http_case = |q: String| {
        let url = format!("{cms}{q}");
        let want = too_large.clone();
        async move {
            let h = expect_get(&url, 504, &want).await;
            assert_eq!(h["retry-after"], "1", "{url}");
        }
    };
    let watch_case = async {
        // A watch-list that must wait for a future RV fails as an ERROR event on a 200 stream.
        let mut w = watch(&format!(
            "{cms}?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion={future}&allowWatchBookmarks=true"
        ))
        .await;
        assert_eq!(w.status, 200);
        let line = match w.next_line(Duration::from_secs(10)).await {
            Next::Line(l) => String::from_utf8(l.to_vec()).unwrap(),
            other => panic!("expected the ERROR event, got {other:?}"),
        };
        assert_eq!(line, format!(r#"{{"type":"ERROR","object":{too_large}}}"#));
        assert!(matches!(w.next_line(T).await, Next::End));
    };
    let started = std::time::Instant::now();
    tokio::join!(
        http_case(format!(
            "?resourceVersion={future}&resourceVersionMatch=NotOlderThan"
        )),
        http_case(format!(
            "?resourceVersion={future}&resourceVersionMatch=NotOlderThan&limit=1"
        )),
        http_case(format!("?resourceVersion={future}")),
        http_case(format!(
            "?resourceVersion={future}&resourceVersionMatch=Exact"
        )),
        http_case(format!("/a?resourceVersion={future}")),
        watch_case,
    );
    // (kube waits 3 s before giving up; sanity bound only, not a timing assertion)
    assert!(started.elapsed() >= Duration::from_secs(2));

    // A plain watch from a future RV is not an error: it waits silently (W5).
    let mut w = watch(&format!("{cms}?watch=1&resourceVersion={future}")).await;
    assert_eq!(w.status, 200);
    assert!(matches!(
        w.next_line(Duration::from_millis(300)).await,
        Next::Timeout
    ));
}

// ---------------------------------------------------------------------------------------------
// 415, 429, 500
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn unsupported_patch_media_types_are_415() {
    let sim = sim_with(|c| {
        c.custom_types
            .push("example.com/v1/widgets=Widget".parse().unwrap())
    })
    .await;
    let u = sim.url();
    post(
        &format!("{u}/api/v1/namespaces/default/pods"),
        pod("p", "", json!({})),
    )
    .await;
    post(
        &format!("{u}/apis/example.com/v1/namespaces/default/widgets"),
        json!({"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":1}}),
    )
    .await;
    let prefix =
        "the body of the request was in an unknown format - accepted media types include: ";
    let builtin = status_json(
        415,
        "UnsupportedMediaType",
        &format!(
            "{prefix}application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json"
        ),
        None,
    );
    let custom = status_json(
        415,
        "UnsupportedMediaType",
        &format!("{prefix}application/json-patch+json, application/merge-patch+json"),
        None,
    );
    let pod_url = format!("{u}/api/v1/namespaces/default/pods/p");
    let widget_url = format!("{u}/apis/example.com/v1/namespaces/default/widgets/w");
    for ct in [
        "application/apply-patch+yaml",
        "application/apply-patch+yaml; charset=utf-8",
        "text/plain",
        "application/json",
    ] {
        expect(
            Method::PATCH,
            &pod_url,
            &[("content-type", ct)],
            r#"{"metadata":{"labels":{"a":"b"}}}"#,
            415,
            &builtin,
        )
        .await;
    }
    for ct in [
        "application/apply-patch+yaml",
        "application/strategic-merge-patch+json",
    ] {
        expect(
            Method::PATCH,
            &widget_url,
            &[("content-type", ct)],
            r#"{"metadata":{"labels":{"a":"b"}}}"#,
            415,
            &custom,
        )
        .await;
    }
    // The object is unchanged.
    let (_, p) = get_json(&pod_url).await;
    assert!(
        p["metadata"]
            .get("labels")
            .is_none_or(|l| l.get("a").is_none())
    );
}

#[tokio::test]
async fn injected_429_and_500() {
    let sim = sim().await;
    let u = sim.url();
    let pods = format!("{u}/api/v1/namespaces/default/pods");
    let fault = |q: &str| {
        let url = format!("{u}/sim/faults/errors?{q}");
        async move {
            let (s, _, b) = request(Method::POST, &url, &[], "").await;
            assert_eq!(s, 200, "{}", String::from_utf8_lossy(&b));
        }
    };

    fault("code=429&retryAfter=3&count=2&path=/pods").await;
    // Requests to other paths are not affected.
    let (s, _) = get_json(&format!("{u}/api/v1/configmaps")).await;
    assert_eq!(s, 200);
    let throttled = status_json(
        429,
        "TooManyRequests",
        "the server has received too many requests and has asked us to try again later",
        Some(r#"{"retryAfterSeconds":3}"#),
    );
    let h = expect_get(&pods, 429, &throttled).await;
    assert_eq!(h["retry-after"], "3");
    // Watches are answered with the HTTP status too (before any stream starts).
    let h = expect_get(&format!("{pods}?watch=1"), 429, &throttled).await;
    assert_eq!(h["retry-after"], "3");
    // count=2 is used up.
    let (s, _) = get_json(&pods).await;
    assert_eq!(s, 200);

    fault("code=500").await;
    let internal = status_json(
        500,
        "InternalError",
        "Internal error occurred: injected failure",
        Some(r#"{"causes":[{"message":"injected failure"}]}"#),
    );
    let h = expect(
        Method::POST,
        &pods,
        &[("content-type", "application/json")],
        &pod("x", "", json!({})).to_string(),
        500,
        &internal,
    )
    .await;
    assert!(h.get("retry-after").is_none());
    // The failed create did not happen; the next request succeeds.
    expect_get(
        &format!("{pods}/x"),
        404,
        &status_json(
            404,
            "NotFound",
            "pods \"x\" not found",
            Some(&named_details("", "pods", "x")),
        ),
    )
    .await;

    // 429 with the default Retry-After of 1.
    fault("code=429").await;
    let h = expect_get(
        &pods,
        429,
        &status_json(
            429,
            "TooManyRequests",
            "the server has received too many requests and has asked us to try again later",
            Some(r#"{"retryAfterSeconds":1}"#),
        ),
    )
    .await;
    assert_eq!(h["retry-after"], "1");
    // faults/clear removes a pending fault.
    fault("code=500&count=5").await;
    let (s, _, _) = request(Method::POST, &format!("{u}/sim/faults/clear"), &[], "").await;
    assert_eq!(s, 200);
    let (s, _) = get_json(&pods).await;
    assert_eq!(s, 200);
}
