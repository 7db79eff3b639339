//! Parsing kube-apiserver URL paths into what they address (as `requestinfo.go` does).
//!
//! Syntax only: whether the addressed group, version or resource exists is the caller's question
//! (discovery).

/// A path under `/api/v1` or `/apis/{group}/{version}` that names a resource.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ResourcePath {
    /// API group (empty for core).
    pub group: String,
    /// API version.
    pub version: String,
    /// Namespace from the path, if any.
    pub namespace: Option<String>,
    /// Plural resource.
    pub resource: String,
    /// Object name, if the path names one.
    pub name: Option<String>,
    /// Subresource (`status`, `log`, ...), if any.
    pub subresource: Option<String>,
    /// The deprecated `/watch/` verb-in-path form: always a watch.
    pub legacy_watch: bool,
}

impl ResourcePath {
    /// Whether kube registers a route for this path of a kind that is (or is not) `namespaced`:
    /// a cluster-scoped kind's paths lie outside namespaces only, and a namespaced kind's objects
    /// (and their subresources) inside one only (its cluster-wide path is the collection alone,
    /// for LIST and WATCH): `/api/v1/pods/NAME` is no route.
    pub fn has_route(&self, namespaced: bool) -> bool {
        if namespaced {
            self.namespace.is_some() || self.name.is_none()
        } else {
            self.namespace.is_none()
        }
    }
}

/// What a request path addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiPath {
    /// `/version`.
    Version,
    /// `/api`.
    CoreRoot,
    /// `/apis`.
    GroupsRoot,
    /// `/api/v1` or `/apis/{group}/{version}`.
    GroupVersion {
        /// Group (empty for core).
        group: String,
        /// Version.
        version: String,
    },
    /// `/apis/{group}`.
    Group(String),
    /// A resource, collection or object (with optional subresource).
    Resource(ResourcePath),
    /// Anything else (`/healthz`, `/openapi/v2`, ...).
    Other,
}

/// Namespace subresources, which stay on the `namespaces` resource (requestinfo.go).
const NAMESPACE_SUBRESOURCES: &[&str] = &["status", "finalize"];

/// Parses a path (without query). Percent-encoding is not decoded: Kubernetes names cannot
/// contain characters that need it.
pub fn parse(path: &str) -> ApiPath {
    let trimmed = path.trim_matches('/');
    let parts: Vec<&str> = if trimmed.is_empty() {
        Vec::new()
    } else {
        trimmed.split('/').collect()
    };
    if parts.iter().any(|p| p.is_empty()) {
        return ApiPath::Other;
    }
    match parts.as_slice() {
        ["version"] => ApiPath::Version,
        ["api"] => ApiPath::CoreRoot,
        ["apis"] => ApiPath::GroupsRoot,
        ["api", v] => ApiPath::GroupVersion {
            group: String::new(),
            version: v.to_string(),
        },
        ["apis", g] => ApiPath::Group(g.to_string()),
        ["apis", g, v] => ApiPath::GroupVersion {
            group: g.to_string(),
            version: v.to_string(),
        },
        ["api", v, rest @ ..] => resource(String::new(), v, rest),
        ["apis", g, v, rest @ ..] => resource(g.to_string(), v, rest),
        _ => ApiPath::Other,
    }
}

fn resource(group: String, version: &str, mut rest: &[&str]) -> ApiPath {
    let mut rp = ResourcePath {
        group,
        version: version.to_string(),
        ..Default::default()
    };
    if rest.first() == Some(&"watch") {
        rp.legacy_watch = true;
        rest = &rest[1..];
    }
    // `/namespaces/{ns}/{resource}…` is scoped to `ns`; `/namespaces/{name}` and its
    // `status`/`finalize` are the namespace itself, not a scope. (A `namespaces` resource *under*
    // a namespace keeps that scope: kube has no such route, and the caller answers 404 for a
    // cluster-scoped resource.)
    if let ["namespaces", ns, tail @ ..] = rest
        && tail
            .first()
            .is_some_and(|next| !NAMESPACE_SUBRESOURCES.contains(next))
    {
        rp.namespace = Some(ns.to_string());
        rest = tail;
    }
    match rest {
        [] => return ApiPath::Other,
        [r] => rp.resource = r.to_string(),
        [r, n] => {
            rp.resource = r.to_string();
            rp.name = Some(n.to_string());
        }
        [r, n, s] => {
            rp.resource = r.to_string();
            rp.name = Some(n.to_string());
            rp.subresource = Some(s.to_string());
        }
        _ => return ApiPath::Other,
    }
    ApiPath::Resource(rp)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_by_scope() {
        let rp = |p: &str| match parse(p) {
            ApiPath::Resource(rp) => rp,
            other => panic!("{p}: {other:?}"),
        };
        assert!(rp("/api/v1/pods").has_route(true));
        assert!(rp("/api/v1/namespaces/a/pods/x").has_route(true));
        assert!(!rp("/api/v1/pods/x").has_route(true));
        assert!(!rp("/api/v1/watch/pods/x").has_route(true));
        assert!(rp("/api/v1/nodes/x").has_route(false));
        assert!(!rp("/api/v1/namespaces/a/nodes").has_route(false));
    }

    fn res(p: &str) -> ResourcePath {
        match parse(p) {
            ApiPath::Resource(r) => r,
            other => panic!("{p}: {other:?}"),
        }
    }

    #[test]
    fn parses_kube_paths() {
        assert_eq!(parse("/version"), ApiPath::Version);
        assert_eq!(parse("/api"), ApiPath::CoreRoot);
        assert_eq!(parse("/apis"), ApiPath::GroupsRoot);
        assert_eq!(parse("/apis/apps"), ApiPath::Group("apps".into()));
        assert_eq!(
            parse("/api/v1"),
            ApiPath::GroupVersion {
                group: String::new(),
                version: "v1".into()
            }
        );
        let r = res("/api/v1/pods");
        assert_eq!(
            (r.resource.as_str(), r.namespace, r.name),
            ("pods", None, None)
        );
        let r = res("/api/v1/namespaces/ns1/pods/p/status");
        assert_eq!(r.namespace.as_deref(), Some("ns1"));
        assert_eq!(r.name.as_deref(), Some("p"));
        assert_eq!(r.subresource.as_deref(), Some("status"));
        let r = res("/api/v1/namespaces/ns1");
        assert_eq!(
            (r.resource.as_str(), r.name.as_deref(), r.namespace),
            ("namespaces", Some("ns1"), None)
        );
        let r = res("/api/v1/namespaces/ns1/status");
        assert_eq!(
            (
                r.resource.as_str(),
                r.name.as_deref(),
                r.subresource.as_deref()
            ),
            ("namespaces", Some("ns1"), Some("status"))
        );
        let r = res("/api/v1/namespaces");
        assert_eq!((r.resource.as_str(), r.name), ("namespaces", None));
        let r = res("/api/v1/watch/namespaces/ns1/pods/p");
        assert!(r.legacy_watch);
        assert_eq!(r.name.as_deref(), Some("p"));
        let r = res("/apis/discovery.k8s.io/v1/namespaces/a/endpointslices");
        assert_eq!(r.group, "discovery.k8s.io");
        assert_eq!(parse("/api/v1/a/b/c/d"), ApiPath::Other);
        // Namespaces under a namespace: a scope kube has no route for, kept as such (it used to
        // be dropped, and `/namespaces/x/namespaces/y` read namespace y).
        let r = res("/api/v1/namespaces/x/namespaces/y");
        assert_eq!(
            (
                r.namespace.as_deref(),
                r.resource.as_str(),
                r.name.as_deref()
            ),
            (Some("x"), "namespaces", Some("y"))
        );
        let r = res("/api/v1/namespaces/x/namespaces/y/status");
        assert_eq!(
            (r.namespace.as_deref(), r.subresource.as_deref()),
            (Some("x"), Some("status"))
        );
        let r = res("/api/v1/watch/namespaces/x/namespaces");
        assert_eq!((r.namespace.as_deref(), r.name), (Some("x"), None));
        assert_eq!(parse("/healthz"), ApiPath::Other);
        assert_eq!(parse("/api//v1"), ApiPath::Other);
    }
}
