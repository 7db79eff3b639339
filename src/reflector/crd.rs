//! The upstream's `CustomResourceDefinition`s, kept current by one upstream watch of
//! `apiextensions.k8s.io/v1` `customresourcedefinitions`: which custom resources exist (so
//! on-demand caching knows a custom resource from an aggregated API, which is never cached), their
//! scope, kind and selectable fields (kube 1.31+ `selectableFields`, honoured in field
//! selectors), and their printer columns, so that a Table of a custom resource is printed from
//! the cache exactly as kube-apiserver prints it (its CRD version's `additionalPrinterColumns`,
//! [`kube_wire::table::PrinterColumns`]).
//!
//! It lives with the reflectors because it is one: a list-then-watch of one resource against the
//! upstream, with watchmux's own credentials, relisting after a 410 and backing off after
//! errors; what it writes is not a cache of objects but [`Crds`], the one table that request
//! handlers and the on-demand caching read. Every change is announced ([`Crds::subscribe`]).
//! Until a CRD is known (or when a column's JSONPath is beyond what kube-wire evaluates), its
//! columns are unknown, and a Table of that resource goes to the upstream. When the upstream
//! refuses the watch (401/403: watchmux may not read CRDs), nothing is known, every custom
//! resource passes through, and this is logged once (until a LIST succeeds again).
//!
//! It must not serve requests (`crate::downstream` reads [`Crds`]) nor touch the caches.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use parking_lot::RwLock;
use rand::Rng;
use serde_json::Value;
use tokio::sync::watch as tokio_watch;
use tokio_util::sync::CancellationToken;

use super::watch::WatchLines;
use super::{Backoff, MalformedData, ReflectorError, read_body};
use crate::upstream::Upstream;
use kube_wire::status::Status;
use kube_wire::table::{PrinterColumns, TablePrinter};

/// The collection of CRDs.
const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
/// CRDs per LIST page (they can be large: each carries its schemas).
const PAGE: usize = 100;

/// What a CRD says of its custom resource.
#[derive(Debug, Clone, PartialEq)]
struct Crd {
    group: String,
    resource: String,
    kind: String,
    namespaced: bool,
    /// Its `Established` condition is true: kube serves it.
    established: bool,
    versions: HashMap<String, CrdVersion>,
}

#[derive(Debug, Clone, PartialEq)]
struct CrdVersion {
    served: bool,
    /// `selectableFields` without the JSONPath's leading dot: `spec.color`.
    selectable_fields: Vec<String>,
    /// `None` when a column cannot be printed here.
    printer: Option<TablePrinter>,
}

/// A custom resource version kube serves, as its CRD describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CustomKind {
    /// `Widget`.
    pub kind: String,
    /// Namespace-scoped.
    pub namespaced: bool,
    /// Its `selectableFields`.
    pub selectable_fields: Vec<String>,
}

impl CustomKind {
    /// Whether a cache made for `info` holds this kind as the CRD describes it now (its kind,
    /// scope and selectable fields).
    pub fn describes(&self, info: &crate::cache::ResourceInfo) -> bool {
        info.kind == self.kind
            && info.namespaced == self.namespaced
            && info.selectable_fields == self.selectable_fields
    }
}

/// The CRDs of interest, by name. Written by the CRD watch ([`run`]), read by request
/// handlers and on-demand caching.
#[derive(Debug, Default)]
pub struct Crds {
    /// The CRDs of interest, by name (`widgets.example.com`); `None`: all of them.
    wanted: Option<HashSet<String>>,
    /// Per CRD name.
    known: RwLock<HashMap<String, Crd>>,
    /// Bumped by every change of what is known.
    changed: tokio_watch::Sender<u64>,
    /// The refusal of the upstream was logged (reset by a successful LIST).
    denial_logged: AtomicBool,
}

impl Crds {
    /// The CRDs of these custom resources (`(group, resource)`); none known yet.
    pub fn new<'a>(resources: impl IntoIterator<Item = (&'a str, &'a str)>) -> Crds {
        Crds {
            wanted: Some(resources.into_iter().map(|(g, r)| crd_name(g, r)).collect()),
            ..Crds::default()
        }
    }

    /// Every CRD (on-demand caching); none known yet.
    pub fn all() -> Crds {
        Crds::default()
    }

    /// Whether any custom resource is of interest (else no CRD watch is needed).
    pub fn wants_any(&self) -> bool {
        self.wanted.as_ref().is_none_or(|w| !w.is_empty())
    }

    /// How a Table of `resource` in `group`/`version` is printed, if its CRD's columns for that
    /// version are known and printable here.
    pub fn printer(&self, group: &str, version: &str, resource: &str) -> Option<TablePrinter> {
        self.known
            .read()
            .get(&crd_name(group, resource))?
            .versions
            .get(version)?
            .printer
            .clone()
    }

    /// The custom resource `group`/`version`/`resource`, if an established CRD serves it.
    pub fn custom(&self, group: &str, version: &str, resource: &str) -> Option<CustomKind> {
        let known = self.known.read();
        let crd = known.get(&crd_name(group, resource))?;
        let v = crd.versions.get(version)?;
        (crd.established && v.served && crd.group == group && crd.resource == resource).then(|| {
            CustomKind {
                kind: crd.kind.clone(),
                namespaced: crd.namespaced,
                selectable_fields: v.selectable_fields.clone(),
            }
        })
    }

    /// Changes with every change of what is known.
    pub fn subscribe(&self) -> tokio_watch::Receiver<u64> {
        self.changed.subscribe()
    }

    fn bump(&self) {
        self.changed.send_modify(|g| *g += 1);
    }

    /// Replaces everything known with the CRDs of a LIST.
    fn replace(&self, crds: &[Value]) {
        let mut next = HashMap::new();
        for crd in crds {
            if let Some((name, c)) = self.read_crd(crd) {
                next.insert(name, c);
            }
        }
        let mut known = self.known.write();
        if *known != next {
            *known = next;
            drop(known);
            self.bump();
        }
    }

    /// Applies one watch event's CRD.
    fn apply(&self, deleted: bool, crd: &Value) {
        let Some((name, c)) = self.read_crd(crd) else {
            return;
        };
        let mut known = self.known.write();
        let before = if deleted {
            known.remove(&name)
        } else {
            known.insert(name, c.clone())
        };
        drop(known);
        if deleted || before.as_ref() != Some(&c) {
            self.bump();
        }
    }

    /// Knows exactly `crd` (as a LIST of it would), for other modules' tests.
    #[cfg(test)]
    pub(crate) fn replace_for_test(&self, crd: &Value) {
        self.replace(std::slice::from_ref(crd));
    }

    /// Forgets everything: the CRDs can no longer be kept current.
    fn clear(&self) {
        let had = !std::mem::take(&mut *self.known.write()).is_empty();
        if had {
            self.bump();
        }
    }

    /// The name and description of a CRD of interest.
    fn read_crd(&self, crd: &Value) -> Option<(String, Crd)> {
        let name = crd.pointer("/metadata/name")?.as_str()?;
        if self.wanted.as_ref().is_some_and(|w| !w.contains(name)) {
            return None;
        }
        let text = |p: &str| crd.pointer(p).and_then(Value::as_str).unwrap_or_default();
        let established = items(crd, "/status/conditions")
            .iter()
            .any(|c| c["type"] == "Established" && c["status"] == "True");
        let versions = items(crd, "/spec/versions")
            .iter()
            .filter_map(|v| {
                let version = v.get("name")?.as_str()?;
                let printer = match PrinterColumns::of_crd(crd, version)? {
                    Ok(columns) => Some(TablePrinter::crd(Arc::new(columns))),
                    Err(e) => {
                        tracing::info!(crd = name, version, error = %e, "Tables of this custom resource are passed through");
                        None
                    }
                };
                let selectable_fields = items(v, "/selectableFields")
                    .iter()
                    .filter_map(|f| f.get("jsonPath")?.as_str())
                    .map(|p| p.trim_start_matches('.').to_string())
                    .collect();
                Some((
                    version.to_string(),
                    CrdVersion {
                        served: v.get("served").and_then(Value::as_bool).unwrap_or(false),
                        selectable_fields,
                        printer,
                    },
                ))
            })
            .collect();
        Some((
            name.to_string(),
            Crd {
                group: text("/spec/group").to_string(),
                resource: text("/spec/names/plural").to_string(),
                kind: text("/spec/names/kind").to_string(),
                namespaced: text("/spec/scope") == "Namespaced",
                established,
                versions,
            },
        ))
    }
}

/// The array at `pointer` in `v` (none when absent or not an array).
fn items<'a>(v: &'a Value, pointer: &str) -> &'a [Value] {
    v.pointer(pointer)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// `widgets.example.com`: the name kube requires of the CRD of `widgets` in `example.com`.
fn crd_name(group: &str, resource: &str) -> String {
    format!("{resource}.{group}")
}

/// Keeps `columns` current until `cancel`: LIST the CRDs, then watch them from the list's
/// resourceVersion; relist after a 410, back off after errors.
pub async fn run(up: Upstream, columns: Arc<Crds>, cancel: CancellationToken) {
    tokio::select! {
        _ = cancel.cancelled() => {}
        _ = keep_current(&up, &columns) => {}
    }
}

async fn keep_current(up: &Upstream, columns: &Crds) {
    let mut backoff = Backoff::new(Duration::from_millis(200), Duration::from_secs(30));
    loop {
        let mut rv = match list(up).await {
            Ok((crds, rv)) => {
                columns.replace(&crds);
                columns.denial_logged.store(false, Ordering::Relaxed);
                backoff.reset();
                rv
            }
            Err(e) => {
                failed(columns, &e, "list");
                tokio::time::sleep(backoff.next_delay()).await;
                continue;
            }
        };
        loop {
            match watch(up, columns, &mut rv).await {
                Ok(Some(received)) => {
                    if received > 0 {
                        backoff.reset();
                    } else {
                        tokio::time::sleep(backoff.next_delay()).await;
                    }
                }
                // Expired: relist.
                Ok(None) => break,
                Err(e) => {
                    failed(columns, &e, "watch");
                    tokio::time::sleep(backoff.next_delay()).await;
                    if e.is_refused() {
                        break;
                    }
                }
            }
        }
    }
}

/// Logs a failure; a refusal clears the columns (they cannot be kept current) and is logged once.
fn failed(columns: &Crds, e: &ReflectorError, what: &str) {
    if e.is_refused() {
        columns.clear();
        if !columns.denial_logged.swap(true, Ordering::Relaxed) {
            tracing::warn!(error = %e, "the upstream refuses to let watchmux {what} customresourcedefinitions: Tables of custom resources are passed through");
        }
        return;
    }
    tracing::warn!(error = %e, "{what} of customresourcedefinitions failed; retrying");
}

/// A consistent, paged LIST of the CRDs: the items and the list's resourceVersion.
async fn list(up: &Upstream) -> Result<(Vec<Value>, u64), ReflectorError> {
    let mut items = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let mut q = format!("{CRDS}?limit={PAGE}");
        if let Some(t) = &token {
            q.push_str("&continue=");
            q.push_str(&form_urlencoded::byte_serialize(t.as_bytes()).collect::<String>());
        }
        let resp = up.get(&q, "application/json").await?;
        let code = resp.status();
        let body = read_body(resp, &q).await?;
        if !code.is_success() {
            return Err(ReflectorError::from_answer(code, &q, &body));
        }
        let mut page: Value =
            serde_json::from_slice(&body).map_err(|e| ReflectorError::malformed(&q, e))?;
        if let Some(Value::Array(page_items)) = page.get_mut("items").map(Value::take) {
            items.extend(page_items);
        }
        let meta = |k: &str| {
            page.pointer(&format!("/metadata/{k}"))
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
        };
        token = meta("continue");
        if token.is_none() {
            let value = meta("resourceVersion").unwrap_or_default();
            let rv = MalformedData::parse_list_rv(&value)
                .map_err(|e| ReflectorError::malformed(&q, e))?;
            return Ok((items, rv));
        }
    }
}

/// One watch from `rv` (moved along with the events and bookmarks): `Some(events received)`
/// when the stream ended, `None` when `rv` expired.
async fn watch(up: &Upstream, columns: &Crds, rv: &mut u64) -> Result<Option<u64>, ReflectorError> {
    let timeout = rand::rng().random_range(300..600u64);
    let q = format!(
        "{CRDS}?watch=1&allowWatchBookmarks=true&resourceVersion={rv}&timeoutSeconds={timeout}"
    );
    let resp = up.get(&q, "application/json").await?;
    let code = resp.status();
    if !code.is_success() {
        let body = read_body(resp, &q).await?;
        return match ReflectorError::from_answer(code, &q, &body) {
            ReflectorError::Expired(_) => Ok(None),
            e => Err(e),
        };
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(timeout + 30);
    let mut lines = WatchLines::new(resp.into_body(), &q, Some(deadline));
    let mut received = 0u64;
    while let Some(line) = lines.next(|_| {}).await? {
        let ev: Value = serde_json::from_slice(&line)
            .map_err(|e| ReflectorError::malformed("CRD watch event", e))?;
        let ty = ev.get("type").and_then(Value::as_str).unwrap_or("");
        let obj = ev.get("object").unwrap_or(&Value::Null);
        if ty == "ERROR" {
            let status = serde_json::to_vec(obj)
                .ok()
                .and_then(|b| Status::parse(&b, 500).ok())
                .unwrap_or_else(|| Status::internal("watch error"));
            if status.is_expired() {
                return Ok(None);
            }
            return Err(ReflectorError::Status {
                what: "watch".into(),
                status,
            });
        }
        if matches!(ty, "ADDED" | "MODIFIED" | "DELETED") {
            columns.apply(ty == "DELETED", obj);
        }
        if let Some(n) = obj
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .and_then(|s| s.parse().ok())
        {
            *rv = n;
        }
        received += 1;
    }
    Ok(Some(received))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn crd(columns: Value) -> Value {
        json!({"metadata": {"name": "widgets.example.com"}, "spec": {"versions": [
            {"name": "v1", "additionalPrinterColumns": columns},
            {"name": "v2"},
        ]}})
    }

    #[test]
    fn learns_forgets_and_refuses_columns() {
        let c = Crds::new([("example.com", "widgets")]);
        assert!(c.wants_any());
        assert!(c.printer("example.com", "v1", "widgets").is_none());
        c.replace(&[
            crd(json!([{"name": "R", "type": "integer", "jsonPath": ".spec.r"}])),
            json!({"metadata": {"name": "other.example.com"}, "spec": {"versions": [{"name": "v1"}]}}),
        ]);
        let p = c.printer("example.com", "v1", "widgets").unwrap();
        assert!(p.is_crd());
        assert_eq!(p.column_definitions()[1]["name"], "R");
        // No columns: kube's Age.
        let p2 = c.printer("example.com", "v2", "widgets").unwrap();
        assert_eq!(p2.column_definitions()[1]["name"], "Age");
        assert!(c.printer("example.com", "v1", "other").is_none());
        // A JSONPath beyond the subset: not printable here.
        c.apply(
            false,
            &crd(json!([{"name": "U", "type": "string", "jsonPath": ".a..b"}])),
        );
        assert!(c.printer("example.com", "v1", "widgets").is_none());
        assert!(c.printer("example.com", "v2", "widgets").is_some());
        c.apply(true, &crd(json!([])));
        assert!(c.printer("example.com", "v2", "widgets").is_none());
        assert!(!Crds::new([]).wants_any());
    }

    #[test]
    fn knows_every_established_crd_and_announces_changes() {
        let c = Crds::all();
        assert!(c.wants_any());
        let mut changes = c.subscribe();
        let gadget = |established: &str, served: bool| {
            json!({"metadata": {"name": "gadgets.example.com"}, "spec": {
                "group": "example.com", "scope": "Cluster",
                "names": {"plural": "gadgets", "kind": "Gadget"},
                "versions": [{"name": "v1", "served": served,
                              "selectableFields": [{"jsonPath": ".spec.color"}]}]},
                "status": {"conditions": [{"type": "Established", "status": established}]}})
        };
        c.replace(&[gadget("True", true)]);
        assert!(changes.has_changed().unwrap());
        changes.mark_unchanged();
        assert_eq!(
            c.custom("example.com", "v1", "gadgets"),
            Some(CustomKind {
                kind: "Gadget".into(),
                namespaced: false,
                selectable_fields: vec!["spec.color".into()],
            })
        );
        assert_eq!(c.custom("example.com", "v2", "gadgets"), None);
        assert_eq!(c.custom("other.com", "v1", "gadgets"), None);
        // The same CRD again: no change announced.
        c.apply(false, &gadget("True", true));
        assert!(!changes.has_changed().unwrap());
        // Not established, or the version not served: not served by kube.
        c.apply(false, &gadget("False", true));
        assert!(changes.has_changed().unwrap());
        assert_eq!(c.custom("example.com", "v1", "gadgets"), None);
        c.apply(false, &gadget("True", false));
        assert_eq!(c.custom("example.com", "v1", "gadgets"), None);
        c.apply(false, &gadget("True", true));
        c.apply(true, &gadget("True", true));
        assert_eq!(c.custom("example.com", "v1", "gadgets"), None);
    }

    #[test]
    fn a_refusal_forgets_the_columns_and_is_logged_once() {
        let c = Crds::new([("example.com", "widgets")]);
        c.replace(&[crd(json!([]))]);
        let other = ReflectorError::Status {
            what: "list".into(),
            status: Status::new(500, "InternalError", "boom"),
        };
        failed(&c, &other, "list");
        assert!(c.printer("example.com", "v1", "widgets").is_some());
        let denied = ReflectorError::Status {
            what: "list".into(),
            status: Status::new(403, "Forbidden", "no"),
        };
        failed(&c, &denied, "list");
        assert!(c.printer("example.com", "v1", "widgets").is_none());
        assert!(c.denial_logged.load(Ordering::Relaxed));
    }
}
