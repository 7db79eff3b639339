//! The printer columns of cached custom resources, learnt from the upstream's
//! `CustomResourceDefinition` objects and kept current by one upstream watch of
//! `apiextensions.k8s.io/v1` `customresourcedefinitions` for all of them, so that a Table of a
//! custom resource is printed from the cache exactly as kube-apiserver prints it (its CRD
//! version's `additionalPrinterColumns`, [`kube_wire::table::PrinterColumns`]).
//!
//! It lives with the reflectors because it is one: a list-then-watch of one resource against the
//! upstream, with watchmux's own credentials, relisting after a 410 and backing off after
//! errors; what it writes is not a cache of objects but [`CrdColumns`], the one table of columns
//! that request handlers read ([`CrdColumns::printer`]). Until a CRD's columns are known (or when
//! a column's JSONPath is beyond what kube-wire evaluates), the columns are unknown, and a Table
//! of that resource goes to the upstream. When the upstream refuses the watch (401/403: watchmux
//! may not read CRDs), nothing is known, every such Table keeps going to the upstream, and this
//! is logged once (until a LIST succeeds again).
//!
//! It must not serve requests (`crate::downstream` reads [`CrdColumns`]) nor touch the caches.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use parking_lot::RwLock;
use rand::Rng;
use serde_json::Value;
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

/// The printer columns of the cached custom resources, per CRD and version. Written by the CRD
/// watch ([`run`]), read by request handlers.
#[derive(Debug, Default)]
pub struct CrdColumns {
    /// The CRDs of interest, by name (`widgets.example.com`): the cached custom resources.
    wanted: HashSet<String>,
    /// Per CRD name, per version: the printer, or `None` when a column cannot be printed here.
    known: RwLock<HashMap<String, HashMap<String, Option<TablePrinter>>>>,
    /// The refusal of the upstream was logged (reset by a successful LIST).
    denial_logged: AtomicBool,
}

impl CrdColumns {
    /// The columns of the CRDs of these custom resources (`(group, resource)`); none known yet.
    pub fn new<'a>(resources: impl IntoIterator<Item = (&'a str, &'a str)>) -> CrdColumns {
        CrdColumns {
            wanted: resources.into_iter().map(|(g, r)| crd_name(g, r)).collect(),
            ..CrdColumns::default()
        }
    }

    /// Whether any custom resource is of interest (else no CRD watch is needed).
    pub fn wants_any(&self) -> bool {
        !self.wanted.is_empty()
    }

    /// How a Table of `resource` in `group`/`version` is printed, if its CRD's columns for that
    /// version are known and printable here.
    pub fn printer(&self, group: &str, version: &str, resource: &str) -> Option<TablePrinter> {
        self.known
            .read()
            .get(&crd_name(group, resource))?
            .get(version)?
            .clone()
    }

    /// Replaces everything known with the CRDs of a LIST.
    fn replace(&self, crds: &[Value]) {
        let mut next = HashMap::new();
        for crd in crds {
            if let Some((name, versions)) = self.read_crd(crd) {
                next.insert(name, versions);
            }
        }
        *self.known.write() = next;
    }

    /// Applies one watch event's CRD.
    fn apply(&self, deleted: bool, crd: &Value) {
        let Some((name, versions)) = self.read_crd(crd) else {
            return;
        };
        let mut known = self.known.write();
        if deleted {
            known.remove(&name);
        } else {
            known.insert(name, versions);
        }
    }

    /// Knows exactly `crd` (as a LIST of it would), for other modules' tests.
    #[cfg(test)]
    pub(crate) fn replace_for_test(&self, crd: &Value) {
        self.replace(std::slice::from_ref(crd));
    }

    /// Forgets everything: the columns can no longer be kept current.
    fn clear(&self) {
        self.known.write().clear();
    }

    /// The name and per-version printers of a CRD of interest.
    #[allow(clippy::type_complexity)]
    fn read_crd(&self, crd: &Value) -> Option<(String, HashMap<String, Option<TablePrinter>>)> {
        let name = crd.pointer("/metadata/name")?.as_str()?;
        if !self.wanted.contains(name) {
            return None;
        }
        let versions = crd
            .pointer("/spec/versions")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or(&[])
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
                Some((version.to_string(), printer))
            })
            .collect();
        Some((name.to_string(), versions))
    }
}

/// `widgets.example.com`: the name kube requires of the CRD of `widgets` in `example.com`.
fn crd_name(group: &str, resource: &str) -> String {
    format!("{resource}.{group}")
}

/// Keeps `columns` current until `cancel`: LIST the CRDs, then watch them from the list's
/// resourceVersion; relist after a 410, back off after errors.
pub async fn run(up: Upstream, columns: Arc<CrdColumns>, cancel: CancellationToken) {
    tokio::select! {
        _ = cancel.cancelled() => {}
        _ = keep_current(&up, &columns) => {}
    }
}

async fn keep_current(up: &Upstream, columns: &CrdColumns) {
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
                    if is_denied(&e) {
                        break;
                    }
                }
            }
        }
    }
}

fn is_denied(e: &ReflectorError) -> bool {
    matches!(e, ReflectorError::Status { status, .. } if matches!(status.code, 401 | 403))
}

/// Logs a failure; a refusal clears the columns (they cannot be kept current) and is logged once.
fn failed(columns: &CrdColumns, e: &ReflectorError, what: &str) {
    if is_denied(e) {
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
async fn watch(
    up: &Upstream,
    columns: &CrdColumns,
    rv: &mut u64,
) -> Result<Option<u64>, ReflectorError> {
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
        let c = CrdColumns::new([("example.com", "widgets")]);
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
        assert!(!CrdColumns::new([]).wants_any());
    }

    #[test]
    fn a_refusal_forgets_the_columns_and_is_logged_once() {
        let c = CrdColumns::new([("example.com", "widgets")]);
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
