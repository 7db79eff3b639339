//! `kube-sim --node-tokens ADMIN_TOKEN`: each node of the loaded cluster authenticates by its
//! own token as `system:node:<node>` in `system:nodes` (read everything, write its Lease), the
//! admin token may do anything, and any other token gets kube's 401.

use clap::Parser;
use http::{Method, StatusCode};
use kube_sim::Simulator;
use kube_sim::authz::node_token;
use kube_sim::testkit::request;
use serde_json::{Value, json};

const ADMIN: &str = "admin-secret";

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    sim: kube_sim::cli::SimArgs,
}

/// A CL2 cluster of 3 nodes started from the command line, with `--node-tokens`.
async fn sim() -> Simulator {
    let cli = Cli::parse_from([
        "kube-sim",
        "--listen",
        "127.0.0.1:0",
        "--shape",
        "cl2",
        "--nodes",
        "3",
        "--node-tokens",
        ADMIN,
    ]);
    Simulator::start(cli.sim.config())
        .await
        .expect("simulator starts")
}

/// `method url` with `token` as bearer (none: no `Authorization`); status and JSON body.
async fn call(method: Method, url: &str, token: Option<&str>, body: &str) -> (StatusCode, Value) {
    let auth = token.map(|t| format!("Bearer {t}"));
    let mut headers = vec![("content-type", "application/json")];
    if let Some(a) = &auth {
        headers.push(("authorization", a));
    }
    let (status, _, b) = request(method, url, &headers, body).await;
    let v = serde_json::from_slice(&b).unwrap_or(Value::Null);
    (status, v)
}

#[tokio::test]
async fn node_tokens_authenticate_each_node_and_refuse_unknown_tokens() {
    let sim = sim().await;
    let url = sim.url();
    let node = "node-00001";
    let own = node_token(node);
    assert_eq!(own, "node-token-node-00001");

    // A node reads, and renews its Lease.
    let (s, _) = call(
        Method::GET,
        &format!("{url}/api/v1/nodes/{node}"),
        Some(&own),
        "",
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    let lease_url =
        format!("{url}/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{node}");
    let (s, lease) = call(Method::GET, &lease_url, Some(&own), "").await;
    assert_eq!(s, StatusCode::OK, "{lease}");
    let (s, v) = call(Method::PUT, &lease_url, Some(&own), &lease.to_string()).await;
    assert_eq!(s, StatusCode::OK, "{v}");

    // An unknown token: kube's 401, on resources and on the rest.
    for path in ["/api/v1/pods", "/version"] {
        let (s, v) = call(
            Method::GET,
            &format!("{url}{path}"),
            Some("node-token-node-99999"),
            "",
        )
        .await;
        assert_eq!(s, StatusCode::UNAUTHORIZED, "{path}: {v}");
        assert_eq!(v["reason"], "Unauthorized", "{path}: {v}");
    }

    // No token: anonymous, which may read no resource.
    let (s, v) = call(Method::GET, &format!("{url}/api/v1/pods"), None, "").await;
    assert_eq!(s, StatusCode::FORBIDDEN, "{v}");

    // A node may not delete, nor review tokens; the admin may.
    let (s, v) = call(Method::DELETE, &lease_url, Some(&own), "").await;
    assert_eq!(s, StatusCode::FORBIDDEN, "{v}");
    let review = json!({
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenReview",
        "spec": {"token": own},
    })
    .to_string();
    let reviews = format!("{url}/apis/authentication.k8s.io/v1/tokenreviews");
    let (s, v) = call(Method::POST, &reviews, Some(&own), &review).await;
    assert_eq!(s, StatusCode::FORBIDDEN, "{v}");

    // The admin's TokenReview of the node's token names the node.
    let (s, v) = call(Method::POST, &reviews, Some(ADMIN), &review).await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    assert_eq!(v["status"]["authenticated"], true, "{v}");
    assert_eq!(v["status"]["user"]["username"], "system:node:node-00001");
    let groups = v["status"]["user"]["groups"].to_string();
    assert!(groups.contains("\"system:nodes\""), "{groups}");
    // And of an unknown one, not authenticated.
    let unknown = review.replace(&own, "bogus");
    let (s, v) = call(Method::POST, &reviews, Some(ADMIN), &unknown).await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    assert_ne!(v["status"]["authenticated"], true, "{v}");

    // The admin's SubjectAccessReviews answer from the same rules: a node may watch a Secret
    // by name and update Leases in kube-node-lease, not elsewhere.
    let sar = |verb: &str, group: &str, resource: &str, ns: &str| {
        json!({
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": "system:node:node-00001",
                "groups": ["system:nodes", "system:authenticated"],
                "resourceAttributes": {"verb": verb, "group": group, "version": "v1",
                    "resource": resource, "namespace": ns, "name": "x"},
            },
        })
        .to_string()
    };
    let sars = format!("{url}/apis/authorization.k8s.io/v1/subjectaccessreviews");
    for (verb, group, resource, ns, allowed) in [
        ("watch", "", "secrets", "test-cl2-1", true),
        (
            "update",
            "coordination.k8s.io",
            "leases",
            "kube-node-lease",
            true,
        ),
        ("update", "coordination.k8s.io", "leases", "default", false),
        ("delete", "", "pods", "test-cl2-1", false),
    ] {
        let (s, v) = call(
            Method::POST,
            &sars,
            Some(ADMIN),
            &sar(verb, group, resource, ns),
        )
        .await;
        assert_eq!(s, StatusCode::CREATED, "{v}");
        assert_eq!(
            v["status"]["allowed"], allowed,
            "{verb} {group}/{resource} in {ns}: {v}"
        );
    }
    let stats = sim.stats();
    assert_eq!(stats["tokenReviews"], 2, "{stats}");
    assert_eq!(stats["subjectAccessReviews"], 4, "{stats}");
}
