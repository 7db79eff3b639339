//! Numbers a client sends the simulator, clamped or refused as kube-apiserver 1.36 does
//! (issue 15): a DELETE's `gracePeriodSeconds` (kube's `rest.BeforeDelete` and Go's wrapping
//! `Duration` arithmetic), its options read from the body or else the query and validated
//! (`ValidateDeleteOptions`), request bodies past kube's 3 MiB `MaxRequestBodyBytes`, the
//! `timeout` of requests that are not watches, and the control endpoints' own numbers. None may
//! panic a task, whatever its size.

use std::time::Duration;

use http::{Method, StatusCode};
use kube_sim::testkit::*;
use serde_json::{Value, json};

async fn create_pod(u: &str, name: &str) {
    let (s, v) = send_json(
        Method::POST,
        &format!("{u}/api/v1/namespaces/default/pods"),
        "application/json",
        &pod(name, "node-1", json!({})),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
}

async fn delete(url: &str, body: &str) -> (StatusCode, Value) {
    let (s, _, b) = request(
        Method::DELETE,
        url,
        &[("content-type", "application/json")],
        body,
    )
    .await;
    let v = serde_json::from_slice(&b)
        .unwrap_or_else(|e| panic!("{url}: not JSON ({e}): {}", String::from_utf8_lossy(&b)));
    (s, v)
}

#[tokio::test]
async fn delete_grace_periods_are_clamped_and_wrapped_as_kube_does() {
    let sim = sim().await;
    let u = sim.url();
    let pods = format!("{u}/api/v1/namespaces/default/pods");
    // Negative: one second (kube's `BeforeDelete`), not an immediate delete.
    create_pod(&u, "neg").await;
    let (s, v) = delete(&format!("{pods}/neg?gracePeriodSeconds=-5"), "").await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["metadata"]["deletionGracePeriodSeconds"], 1, "{v}");
    // The largest: Go's `time.Second * Duration(n)` wraps; the pod is still marked, with the
    // number as sent, and nothing overflows.
    create_pod(&u, "huge").await;
    let (s, v) = delete(
        &format!("{pods}/huge?gracePeriodSeconds=9223372036854775807"),
        "",
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(
        v["metadata"]["deletionGracePeriodSeconds"], 9223372036854775807i64,
        "{v}"
    );
    assert!(v["metadata"]["deletionTimestamp"].is_string(), "{v}");
    // Not an int64: Go's errors, as kube's 400.
    create_pod(&u, "typed").await;
    for (url, body, msg) in [
        (
            format!("{pods}/typed?gracePeriodSeconds=x"),
            "",
            "strconv.ParseInt: parsing \"x\": invalid syntax",
        ),
        (
            format!("{pods}/typed?gracePeriodSeconds=9223372036854775808"),
            "",
            "strconv.ParseInt: parsing \"9223372036854775808\": value out of range",
        ),
        (
            format!("{pods}/typed"),
            r#"{"gracePeriodSeconds":1.5}"#,
            "json: cannot unmarshal number 1.5 into Go struct field DeleteOptions.gracePeriodSeconds of type int64",
        ),
        (
            format!("{pods}/typed"),
            r#"{"gracePeriodSeconds":1e30}"#,
            "json: cannot unmarshal number 1e30 into Go struct field DeleteOptions.gracePeriodSeconds of type int64",
        ),
        (
            format!("{pods}/typed"),
            r#"{"gracePeriodSeconds":"5"}"#,
            "json: cannot unmarshal string into Go struct field DeleteOptions.gracePeriodSeconds of type int64",
        ),
    ] {
        let (s, v) = delete(&url, body).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{url} {body}: {v}");
        assert_eq!(v["message"], msg, "{url} {body}");
    }
    // With a body, kube never reads the query.
    let (s, v) = delete(
        &format!("{pods}/typed?gracePeriodSeconds=x&propagationPolicy=Bogus"),
        r#"{"gracePeriodSeconds":0}"#,
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let (s, _) = get_json(&format!("{pods}/typed")).await;
    assert_eq!(s, StatusCode::NOT_FOUND, "grace period 0 deletes at once");
}

#[tokio::test]
async fn delete_options_are_validated_before_the_object_is_looked_up() {
    let sim = sim().await;
    let missing = format!("{}/api/v1/namespaces/default/pods/nobody", sim.url());
    let prefix = "DeleteOptions.meta.k8s.io \"\" is invalid: ";
    for (q, body, detail) in [
        (
            "?propagationPolicy=Bogus",
            "",
            "propagationPolicy: Unsupported value: \"Bogus\": supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\"",
        ),
        (
            "?orphanDependents=false&propagationPolicy=Orphan",
            "",
            "propagationPolicy: Invalid value: \"Orphan\": orphanDependents and deletionPropagation cannot be both set",
        ),
        (
            "",
            r#"{"orphanDependents":true,"propagationPolicy":"<x>"}"#,
            "[propagationPolicy: Invalid value: \"\\u003cx\\u003e\": orphanDependents and deletionPropagation cannot be both set, propagationPolicy: Unsupported value: \"\\u003cx\\u003e\": supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\"]",
        ),
    ] {
        let (s, v) = delete(&format!("{missing}{q}"), body).await;
        assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{q} {body}: {v}");
        assert_eq!(v["reason"], "Invalid");
        assert_eq!(v["message"], format!("{prefix}{detail}"), "{q} {body}");
    }
    let (s, v) = delete(&format!("{missing}?propagationPolicy=Foreground"), "").await;
    assert_eq!(s, StatusCode::NOT_FOUND, "{v}");
}

#[tokio::test]
async fn request_bodies_past_3_mib_are_kubes_413() {
    let sim = sim().await;
    let url = format!("{}/api/v1/namespaces/default/configmaps", sim.url());
    let limit = 3 * 1024 * 1024;
    let ct = [("content-type", "application/json")];
    let (s, _, b) = request(Method::POST, &url, &ct, &" ".repeat(limit + 1)).await;
    assert_eq!(s, StatusCode::PAYLOAD_TOO_LARGE);
    let v: Value = serde_json::from_slice(&b).unwrap();
    assert_eq!(v["reason"], "RequestEntityTooLarge");
    assert_eq!(v["message"], "Request entity too large: limit is 3145728");
    // Exactly the limit is read (and then fails to decode, as kube's would).
    let (s, _, _) = request(Method::POST, &url, &ct, &" ".repeat(limit)).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn request_timeouts_are_read_unless_the_request_is_a_watch() {
    let sim = sim().await;
    let u = sim.url();
    for pq in [
        "/version?timeout=x",
        "/api/v1/namespaces/default/pods?timeout=10",
        "/api/v1/namespaces/default/pods/p?watch=1&timeout=1x",
    ] {
        let (s, v) = get_json(&format!("{u}{pq}")).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{pq}: {v}");
        assert!(
            v["message"]
                .as_str()
                .unwrap()
                .starts_with("invalid timeout specified in the request URL - time: "),
            "{pq}: {v}"
        );
    }
    let (s, v) = get_json(&format!("{u}/version?timeout=-3s")).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let w = watch(&format!(
        "{u}/api/v1/namespaces/default/pods?watch=1&timeout=x&timeoutSeconds=1"
    ))
    .await;
    assert_eq!(w.status, StatusCode::OK);
}

/// The control endpoints take numbers too: one past an `Instant`'s range is "for good".
#[tokio::test]
async fn control_numbers_never_overflow() {
    let sim = sim().await;
    sim.faults()
        .refuse_connections_for(Duration::from_millis(u64::MAX));
    assert!(sim.faults().refusing());
    sim.faults().clear();
    let (s, _) = get_json(&format!("{}/version", sim.url())).await;
    assert_eq!(s, StatusCode::OK);
}
