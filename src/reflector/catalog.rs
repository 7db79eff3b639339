//! The kinds the upstream serves, read from its discovery documents: for on-demand caching
//! (`cache.mode = "on-demand"`), which group/version/resource exists, its kind and scope, and
//! whether it can be listed and watched.
//!
//! Read as kube 1.30+ clients read it: aggregated discovery (`/api` and `/apis` as
//! `apidiscovery.k8s.io/v2` `APIGroupDiscoveryList`, two requests for the whole API), with the
//! legacy documents (`/api/v1`, `/apis/<group>/<version>`, one request per group version) when
//! the upstream does not serve it (older servers, the simulator's config). A group version the
//! upstream cannot describe now (an aggregated API whose backend is down answers 503) is left
//! out until the next read.
//!
//! Read at start, then again when something says discovery changed: a CRD added, changed or
//! removed ([`Catalog::refresh_soon`], from the CRD watch), a read of a kind the catalog does
//! not know (a new aggregated API, a CRD not yet in), and every [`REFRESH_INTERVAL`] in any case;
//! at most once per [`MIN_INTERVAL`]. Until the first read succeeds, nothing is known and every
//! read passes through.
//!
//! Owns those documents and their reading. Which of the kinds may be cached (patterns, CRD or
//! aggregated, the memory budget) is [`crate::app`]'s decision.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::RwLock;
use serde::Deserialize;
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

use super::{Backoff, ReflectorError, read_body};
use crate::upstream::Upstream;

/// The aggregated discovery form first, the legacy JSON documents as the fallback.
const AGGREGATED_ACCEPT: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json";
/// The discovery documents are re-read at least this often.
pub const REFRESH_INTERVAL: Duration = Duration::from_secs(60);
/// And at most this often.
pub const MIN_INTERVAL: Duration = Duration::from_secs(1);

/// One kind the upstream serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServedKind {
    /// `Pod`.
    pub kind: String,
    /// Namespace-scoped.
    pub namespaced: bool,
    /// Its verbs include `list` and `watch`.
    pub list_watch: bool,
}

/// `(group, version, resource)`.
pub type Gvr = (String, String, String);

/// What discovery said, the last time it was read.
#[derive(Debug, Default)]
pub struct Catalog {
    kinds: RwLock<Arc<HashMap<Gvr, ServedKind>>>,
    /// Bumped by every successful read (0: never read).
    generation: watch::Sender<u64>,
    wake: Notify,
}

impl Catalog {
    /// Nothing known yet.
    pub fn new() -> Arc<Catalog> {
        Arc::new(Catalog::default())
    }

    /// The kind served at `group`/`version`/`resource`, if discovery lists it.
    pub fn get(&self, group: &str, version: &str, resource: &str) -> Option<ServedKind> {
        self.kinds
            .read()
            .get(&(group.into(), version.into(), resource.into()))
            .cloned()
    }

    /// Every kind served, as last read.
    pub fn all(&self) -> Arc<HashMap<Gvr, ServedKind>> {
        self.kinds.read().clone()
    }

    /// Whether discovery was read successfully at least once.
    pub fn is_loaded(&self) -> bool {
        *self.generation.borrow() > 0
    }

    /// Changes with every successful read.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.generation.subscribe()
    }

    /// Asks for a new read (within [`MIN_INTERVAL`]).
    pub fn refresh_soon(&self) {
        self.wake.notify_one();
    }

    /// Sets what a read found.
    pub fn install(&self, kinds: HashMap<Gvr, ServedKind>) {
        *self.kinds.write() = Arc::new(kinds);
        self.generation.send_modify(|g| *g += 1);
    }
}

/// Keeps `catalog` current until `cancel` (see the module doc).
pub async fn run(up: Upstream, catalog: Arc<Catalog>, cancel: CancellationToken) {
    let mut backoff = Backoff::new(Duration::from_millis(200), Duration::from_secs(30));
    let mut failing = false;
    loop {
        let started = tokio::time::Instant::now();
        let wait = match read(&up).await {
            Ok(kinds) => {
                if failing || !catalog.is_loaded() {
                    tracing::info!(kinds = kinds.len(), "read upstream discovery");
                }
                failing = false;
                backoff.reset();
                catalog.install(kinds);
                REFRESH_INTERVAL
            }
            Err(e) => {
                if !failing {
                    tracing::warn!(error = %e, "reading upstream discovery failed; kinds not known yet pass through; retrying");
                }
                failing = true;
                backoff.next_delay()
            }
        };
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tokio::time::sleep(wait) => {}
            _ = catalog.wake.notified() => {
                tokio::select! {
                    _ = cancel.cancelled() => return,
                    _ = tokio::time::sleep_until(started + MIN_INTERVAL) => {}
                }
            }
        }
    }
}

/// Reads the whole catalog once.
pub async fn read(up: &Upstream) -> Result<HashMap<Gvr, ServedKind>, ReflectorError> {
    let mut kinds = HashMap::new();
    for root in ["/api", "/apis"] {
        let resp = up.get(root, AGGREGATED_ACCEPT).await?;
        let code = resp.status();
        let aggregated = resp
            .headers()
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|t| t.contains("as=APIGroupDiscoveryList"));
        let body = read_body(resp, root).await?;
        if !code.is_success() {
            return Err(ReflectorError::from_answer(code, root, &body));
        }
        if aggregated {
            read_aggregated(&body, root, &mut kinds)?;
        } else {
            for gv in legacy_group_versions(&body, root)? {
                read_legacy(up, &gv, &mut kinds).await?;
            }
        }
    }
    Ok(kinds)
}

/// An `APIGroupDiscoveryList`.
fn read_aggregated(
    body: &[u8],
    what: &str,
    out: &mut HashMap<Gvr, ServedKind>,
) -> Result<(), ReflectorError> {
    #[derive(Deserialize)]
    struct List {
        #[serde(default, deserialize_with = "kube_wire::list::nullable")]
        items: Vec<Group>,
    }
    #[derive(Deserialize)]
    struct Group {
        #[serde(default)]
        metadata: Meta,
        #[serde(default, deserialize_with = "kube_wire::list::nullable")]
        versions: Vec<Version>,
    }
    #[derive(Deserialize, Default)]
    struct Meta {
        #[serde(default)]
        name: String,
    }
    #[derive(Deserialize)]
    struct Version {
        version: String,
        #[serde(default, deserialize_with = "kube_wire::list::nullable")]
        resources: Vec<Resource>,
    }
    #[derive(Deserialize)]
    struct Resource {
        resource: String,
        #[serde(rename = "responseKind", default)]
        response_kind: Option<Kind>,
        #[serde(default)]
        scope: String,
        #[serde(default, deserialize_with = "kube_wire::list::nullable")]
        verbs: Vec<String>,
    }
    #[derive(Deserialize)]
    struct Kind {
        #[serde(default)]
        kind: String,
    }
    let list: List =
        serde_json::from_slice(body).map_err(|e| ReflectorError::malformed(what, e))?;
    for g in list.items {
        for v in g.versions {
            for r in v.resources {
                let Some(kind) = r.response_kind.map(|k| k.kind).filter(|k| !k.is_empty()) else {
                    continue;
                };
                out.insert(
                    (g.metadata.name.clone(), v.version.clone(), r.resource),
                    ServedKind {
                        kind,
                        namespaced: r.scope == "Namespaced",
                        list_watch: has_list_watch(&r.verbs),
                    },
                );
            }
        }
    }
    Ok(())
}

fn has_list_watch(verbs: &[String]) -> bool {
    verbs.iter().any(|v| v == "list") && verbs.iter().any(|v| v == "watch")
}

/// The group versions an `/api` (`APIVersions`) or `/apis` (`APIGroupList`) document lists:
/// `("", "v1")`, `("apps", "v1")`.
fn legacy_group_versions(body: &[u8], what: &str) -> Result<Vec<(String, String)>, ReflectorError> {
    #[derive(Deserialize)]
    struct Doc {
        #[serde(default, deserialize_with = "kube_wire::list::nullable")]
        versions: Vec<String>,
        #[serde(default, deserialize_with = "kube_wire::list::nullable")]
        groups: Vec<Group>,
    }
    #[derive(Deserialize)]
    struct Group {
        name: String,
        #[serde(default, deserialize_with = "kube_wire::list::nullable")]
        versions: Vec<Gv>,
    }
    #[derive(Deserialize)]
    struct Gv {
        version: String,
    }
    let doc: Doc = serde_json::from_slice(body).map_err(|e| ReflectorError::malformed(what, e))?;
    let mut out: Vec<(String, String)> = doc
        .versions
        .into_iter()
        .map(|v| (String::new(), v))
        .collect();
    for g in doc.groups {
        out.extend(g.versions.into_iter().map(|v| (g.name.clone(), v.version)));
    }
    Ok(out)
}

/// One legacy `APIResourceList`; a group version that fails to answer is left out (an
/// aggregated API whose backend is down), other failures fail the read.
async fn read_legacy(
    up: &Upstream,
    (group, version): &(String, String),
    out: &mut HashMap<Gvr, ServedKind>,
) -> Result<(), ReflectorError> {
    let path = if group.is_empty() {
        format!("/api/{version}")
    } else {
        format!("/apis/{group}/{version}")
    };
    let resp = up.get(&path, "application/json").await?;
    let code = resp.status();
    let body = read_body(resp, &path).await?;
    if !code.is_success() {
        tracing::debug!(
            path,
            code = code.as_u16(),
            "a group version is not described now"
        );
        return Ok(());
    }
    #[derive(Deserialize)]
    struct List {
        #[serde(default, deserialize_with = "kube_wire::list::nullable")]
        resources: Vec<Res>,
    }
    #[derive(Deserialize)]
    struct Res {
        name: String,
        #[serde(default)]
        kind: String,
        #[serde(default)]
        namespaced: bool,
        #[serde(default, deserialize_with = "kube_wire::list::nullable")]
        verbs: Vec<String>,
    }
    let list: List =
        serde_json::from_slice(&body).map_err(|e| ReflectorError::malformed(&path, e))?;
    for r in list.resources {
        if r.name.contains('/') {
            continue;
        }
        out.insert(
            (group.clone(), version.clone(), r.name),
            ServedKind {
                kind: r.kind,
                namespaced: r.namespaced,
                list_watch: has_list_watch(&r.verbs),
            },
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_an_aggregated_document() {
        let doc = json!({"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "items": [
            {"metadata": {"name": "apps"}, "versions": [{"version": "v1", "freshness": "Current", "resources": [
                {"resource": "deployments", "responseKind": {"group": "", "version": "", "kind": "Deployment"},
                 "scope": "Namespaced", "verbs": ["create", "get", "list", "watch"],
                 "subresources": [{"subresource": "scale", "verbs": ["get"]}]},
                {"resource": "controllerrevisions", "responseKind": {"kind": "ControllerRevision"},
                 "scope": "Namespaced", "verbs": ["get", "list"]},
            ]}]},
            {"metadata": {"name": "rbac.authorization.k8s.io"}, "versions": [{"version": "v1", "resources": [
                {"resource": "clusterroles", "responseKind": {"kind": "ClusterRole"}, "scope": "Cluster",
                 "verbs": ["list", "watch"]},
            ]}]},
        ]});
        let mut out = HashMap::new();
        read_aggregated(&serde_json::to_vec(&doc).unwrap(), "/apis", &mut out).unwrap();
        let d = &out[&("apps".into(), "v1".into(), "deployments".into())];
        assert_eq!(d.kind, "Deployment");
        assert!(d.namespaced && d.list_watch);
        assert!(!out[&("apps".into(), "v1".into(), "controllerrevisions".into())].list_watch);
        let c = &out[&(
            "rbac.authorization.k8s.io".into(),
            "v1".into(),
            "clusterroles".into(),
        )];
        assert!(!c.namespaced && c.list_watch);
        assert_eq!(out.len(), 3);
        assert!(read_aggregated(b"[", "/apis", &mut out).is_err());
    }

    #[test]
    fn reads_legacy_group_lists() {
        let core = legacy_group_versions(br#"{"kind":"APIVersions","versions":["v1"]}"#, "/api");
        assert_eq!(core.unwrap(), vec![(String::new(), "v1".to_string())]);
        let groups = legacy_group_versions(
            br#"{"kind":"APIGroupList","groups":[{"name":"apps","versions":[{"groupVersion":"apps/v1","version":"v1"}]},
                {"name":"x.io","versions":[{"version":"v2"},{"version":"v1"}]}]}"#,
            "/apis",
        )
        .unwrap();
        assert_eq!(groups.len(), 3);
        assert_eq!(groups[2], ("x.io".to_string(), "v1".to_string()));
    }
}
