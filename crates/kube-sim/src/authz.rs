//! A small static authentication and authorization policy for the simulator.
//!
//! Without a policy (the default) the simulator serves every request as before, its TokenReview
//! endpoint authenticates nothing and its SubjectAccessReview endpoint allows everything. With a
//! policy ([`super::SimState::set_policy`]):
//!
//! * a bearer token (header or websocket subprotocol) must be one of [`Policy::tokens`] (else
//!   kube's 401); no credentials is `system:anonymous` in `system:unauthenticated`; a known token's
//!   identity also gets `system:authenticated`.
//! * every resource request must be allowed by a [`Rule`] (else kube's 403); non-resource paths
//!   (discovery, `/version`, health) are not authorized: any caller that authenticates, or sends
//!   no credentials, gets them.
//! * `POST /apis/authentication.k8s.io/v1/tokenreviews` and
//!   `/apis/authorization.k8s.io/v1/subjectaccessreviews` answer from the same policy (the caller
//!   needs `create` on them). Both are counted in `/sim/stats` (`tokenReviews`,
//!   `subjectAccessReviews`).
//!
//! Client certificates are not mapped to identities by the simulator, and the rules are flat
//! grants, not RBAC objects (no roles, bindings or aggregation). The TLS front's single required
//! token ([`super::tls`]) is a separate, earlier check.
//!
//! [`Policy::node_authorizer`] (`kube-sim --node-tokens ADMIN_TOKEN`) is a policy shaped like a
//! real cluster's for its kubelets, deliberately simpler than kube's Node authorizer: each node
//! authenticates by its own token ([`node_token`]) as `system:node:<node>` in `system:nodes`,
//! which may read everything and write what a kubelet writes; one admin token may do anything.

use std::collections::HashMap;
use std::sync::atomic::Ordering;

use http::{HeaderMap, Method, Response, StatusCode};
use serde_json::{Value, json};

use super::SimState;
use super::http::{Body, json_response};
use kube_wire::access::{Attributes, Credential, UserInfo, credential, forbidden, unauthorized};
use kube_wire::options::ListOptions;
use kube_wire::path::ResourcePath;
use kube_wire::status::Status;

/// The TokenReview endpoint.
pub const TOKEN_REVIEWS: &str = "/apis/authentication.k8s.io/v1/tokenreviews";
/// The SubjectAccessReview endpoint.
pub const ACCESS_REVIEWS: &str = "/apis/authorization.k8s.io/v1/subjectaccessreviews";

/// One grant, like an RBAC rule bound cluster-wide (`namespace: None`) or in one namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// A user name or a group name.
    pub subject: String,
    /// Verbs (`list`, `watch`, `get`, `create`, ...); `*` for all.
    pub verbs: Vec<String>,
    /// API group (`""` for core); `*` for all.
    pub group: String,
    /// Resources (`pods`, `pods/log`); `*` for all.
    pub resources: Vec<String>,
    /// `Some(ns)`: only requests in that namespace; `None`: every namespace and cluster scope.
    pub namespace: Option<String>,
}

impl Rule {
    /// A rule from string slices.
    pub fn new(
        subject: &str,
        verbs: &[&str],
        group: &str,
        resources: &[&str],
        namespace: Option<&str>,
    ) -> Rule {
        Rule {
            subject: subject.to_string(),
            verbs: verbs.iter().map(|s| s.to_string()).collect(),
            group: group.to_string(),
            resources: resources.iter().map(|s| s.to_string()).collect(),
            namespace: namespace.map(str::to_string),
        }
    }

    fn allows(&self, u: &UserInfo, a: &Attributes) -> bool {
        let any = |l: &[String], v: &str| l.iter().any(|x| x == "*" || x == v);
        let resource = if a.subresource.is_empty() {
            a.resource.clone()
        } else {
            format!("{}/{}", a.resource, a.subresource)
        };
        (self.subject == u.user || u.groups.contains(&self.subject))
            && any(&self.verbs, &a.verb)
            && (self.group == "*" || self.group == a.group)
            && any(&self.resources, &resource)
            && self.namespace.as_ref().is_none_or(|ns| *ns == a.namespace)
    }
}

/// Tokens and rules.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policy {
    /// token → (user, groups).
    pub tokens: HashMap<String, (String, Vec<String>)>,
    /// Grants; anything not granted is denied.
    pub rules: Vec<Rule>,
}

impl Policy {
    /// The identity of a request's credentials; `Err` is kube's 401.
    pub fn authenticate(&self, headers: &HeaderMap) -> Result<UserInfo, Status> {
        match credential(headers) {
            Credential::None => Ok(UserInfo::anonymous()),
            Credential::Invalid => Err(unauthorized()),
            Credential::Token(t) => self.user_of(&t).ok_or_else(unauthorized),
        }
    }

    /// The identity of a token, if it is one of the policy's.
    pub fn user_of(&self, token: &str) -> Option<UserInfo> {
        let (user, groups) = self.tokens.get(token)?;
        let mut groups = groups.clone();
        groups.push(kube_wire::access::AUTHENTICATED.to_string());
        Some(UserInfo {
            user: user.clone(),
            groups,
            uid: format!("uid-{user}"),
        })
    }

    /// Whether some rule allows `a` to `u`.
    pub fn allows(&self, u: &UserInfo, a: &Attributes) -> bool {
        self.rules.iter().any(|r| r.allows(u, a))
    }

    /// `Ok` or kube's 403.
    pub fn authorize(&self, u: &UserInfo, a: &Attributes) -> Result<(), Status> {
        if self.allows(u, a) {
            Ok(())
        } else {
            Err(forbidden(&u.user, a, ""))
        }
    }
}

/// The group of every node's identity in [`Policy::node_authorizer`].
pub const NODES_GROUP: &str = "system:nodes";

/// The admin token's user in [`Policy::node_authorizer`].
pub const ADMIN_USER: &str = "kube-sim-admin";

/// The admin token's group in [`Policy::node_authorizer`] (kube's superuser group).
pub const ADMIN_GROUP: &str = "system:masters";

/// The bearer token of node `node` in [`Policy::node_authorizer`]: `node-token-<node>`
/// (`node-token-node-00007`).
pub fn node_token(node: &str) -> String {
    format!("node-token-{node}")
}

/// The user name of node `node`, as kube names a kubelet: `system:node:<node>`.
pub fn node_user(node: &str) -> String {
    format!("system:node:{node}")
}

impl Policy {
    /// A policy like a real cluster's for its nodes, simplified: each of `nodes` authenticates
    /// by [`node_token`] as [`node_user`] in [`NODES_GROUP`], and that group may get, list and
    /// watch every resource, create, update and patch Leases in `kube-node-lease`, update and
    /// patch `pods/status` and `nodes/status`, and create, update and patch Events (core and
    /// `events.k8s.io`). Unlike kube's Node authorizer, a node is not limited to the objects
    /// bound to it. `admin_token` authenticates as [`ADMIN_USER`] in [`ADMIN_GROUP`], which may
    /// do anything (TokenReviews and SubjectAccessReviews included).
    pub fn node_authorizer(nodes: impl IntoIterator<Item = String>, admin_token: &str) -> Policy {
        let mut tokens: HashMap<String, (String, Vec<String>)> = nodes
            .into_iter()
            .map(|n| {
                (
                    node_token(&n),
                    (node_user(&n), vec![NODES_GROUP.to_string()]),
                )
            })
            .collect();
        tokens.insert(
            admin_token.to_string(),
            (ADMIN_USER.to_string(), vec![ADMIN_GROUP.to_string()]),
        );
        let writes = ["create", "update", "patch"];
        Policy {
            tokens,
            rules: vec![
                Rule::new(ADMIN_GROUP, &["*"], "*", &["*"], None),
                Rule::new(NODES_GROUP, &["get", "list", "watch"], "*", &["*"], None),
                Rule::new(
                    NODES_GROUP,
                    &writes,
                    "coordination.k8s.io",
                    &["leases"],
                    Some(crate::cl2::NODE_LEASE_NAMESPACE),
                ),
                Rule::new(
                    NODES_GROUP,
                    &["update", "patch"],
                    "",
                    &["pods/status", "nodes/status"],
                    None,
                ),
                Rule::new(NODES_GROUP, &writes, "", &["events"], None),
                Rule::new(NODES_GROUP, &writes, "events.k8s.io", &["events"], None),
            ],
        }
    }
}

/// The attributes of a resource request, as kube's requestinfo.go derives them.
pub fn attributes(method: &Method, rp: &ResourcePath, query: Option<&str>) -> Attributes {
    let opts = ListOptions::from_query(query).ok();
    let field_name = opts
        .as_ref()
        .and_then(|o| kube_wire::access::name_from_field_selector(&o.field_selector));
    let watch = rp.legacy_watch || opts.as_ref().is_some_and(|o| o.watch);
    let collection = rp.name.is_none();
    let verb = match *method {
        Method::GET | Method::HEAD if watch => "watch",
        Method::GET | Method::HEAD if collection => "list",
        Method::GET | Method::HEAD => "get",
        Method::POST => "create",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE if collection => "deletecollection",
        Method::DELETE => "delete",
        _ => "",
    };
    let name = match &rp.name {
        Some(n) => n.clone(),
        None if matches!(verb, "list" | "watch") => field_name.unwrap_or_default(),
        None => String::new(),
    };
    Attributes {
        verb: verb.to_string(),
        group: rp.group.clone(),
        version: rp.version.clone(),
        resource: rp.resource.clone(),
        subresource: rp.subresource.clone().unwrap_or_default(),
        namespace: rp.namespace.clone().unwrap_or_default(),
        name,
    }
}

fn review_caller(
    state: &SimState,
    headers: &HeaderMap,
    resource: &str,
    group: &str,
) -> Result<(), Status> {
    let Some(policy) = state.policy() else {
        return Ok(());
    };
    let u = policy.authenticate(headers)?;
    policy.authorize(
        &u,
        &Attributes {
            verb: "create".into(),
            group: group.into(),
            version: "v1".into(),
            resource: resource.into(),
            ..Default::default()
        },
    )
}

/// `POST /apis/authentication.k8s.io/v1/tokenreviews`.
pub fn token_review(
    state: &SimState,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Response<Body>, Status> {
    review_caller(state, headers, "tokenreviews", "authentication.k8s.io")?;
    state.stats.token_reviews.fetch_add(1, Ordering::Relaxed);
    let req: Value = serde_json::from_slice(body)
        .map_err(|e| Status::bad_request(format!("invalid TokenReview: {e}")))?;
    let token = req["spec"]["token"].as_str().unwrap_or_default();
    let user = state.policy().and_then(|p| p.user_of(token));
    let status = match user {
        Some(u) => json!({
            "authenticated": true,
            "user": {"username": u.user, "uid": u.uid, "groups": u.groups},
            "audiences": [],
        }),
        None => json!({"user": {}, "error": "invalid bearer token"}),
    };
    Ok(review_response(req, status))
}

/// `POST /apis/authorization.k8s.io/v1/subjectaccessreviews`.
pub fn access_review(
    state: &SimState,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Response<Body>, Status> {
    review_caller(
        state,
        headers,
        "subjectaccessreviews",
        "authorization.k8s.io",
    )?;
    state
        .stats
        .subject_access_reviews
        .fetch_add(1, Ordering::Relaxed);
    let req: Value = serde_json::from_slice(body)
        .map_err(|e| Status::bad_request(format!("invalid SubjectAccessReview: {e}")))?;
    let spec = &req["spec"];
    let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
    let u = UserInfo {
        user: s(&spec["user"]),
        groups: spec["groups"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|g| g.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default(),
        uid: s(&spec["uid"]),
    };
    let ra = &spec["resourceAttributes"];
    let a = Attributes {
        verb: s(&ra["verb"]),
        group: s(&ra["group"]),
        version: s(&ra["version"]),
        resource: s(&ra["resource"]),
        subresource: s(&ra["subresource"]),
        namespace: s(&ra["namespace"]),
        name: s(&ra["name"]),
    };
    let allowed = state.policy().is_none_or(|p| p.allows(&u, &a));
    Ok(review_response(req, json!({"allowed": allowed})))
}

fn review_response(mut req: Value, status: Value) -> Response<Body> {
    req["status"] = status;
    if req.get("metadata").is_none() {
        req["metadata"] = json!({"creationTimestamp": null});
    }
    json_response(StatusCode::CREATED, serde_json::to_vec(&req).expect("json"))
}
