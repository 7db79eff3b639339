//! `/livez`, `/readyz`, `/healthz` as kube-apiserver answers them, and `/metrics`. These are
//! answered before routing and never pass through to the upstream.
//!
//! * `/livez`, `/healthz`: the process serves (`ping`).
//! * `/readyz`: `ping`; `shutdown` (fails once SIGTERM arrived, so load balancers stop sending
//!   new clients while the watches drain); one `cache/<resource>` check per cached resource: synced,
//!   within `cache.max_staleness_secs`, and its upstream watch not broken for longer than
//!   `server.ready_outage_secs` (when set); with a kubeconfig exec credential plugin or `oidc`
//!   auth-provider, `upstream-credentials`: watchmux holds a credential that has not expired
//!   (else the last error: kubeconfig, user, then the command, exit status and the tail of its
//!   standard error, or the issuer URL and what it answered).
//!
//! Three answers: **ready** (200 `ok`); **serving stale** (200, every check passes but some
//! cache does not follow the upstream now — an outage, or a cache restored from disk and not
//! reconciled yet: the body says `ok: serving stale (cache/pods)` and `?verbose` says for how
//! long); **not ready** (503).
//!
//! As in kube-apiserver: `ok` on success; `?verbose` lists every check (`[+]name ok`,
//! `[-]name failed: why`) then `readyz check passed`; a failure lists every check and ends with
//! `readyz check failed`; `?exclude=name` skips a check; `/readyz/<name>` runs one check. Unlike
//! kube-apiserver (500, reasons withheld) a failure answers 503 and says why: the reasons name
//! no secret, only resources, durations and the credential plugin's failure.
//!
//! Owns the plain-text answers only: the checks themselves are [`crate::metrics`]'s, and nothing
//! here touches a cache or the upstream.

use http::header::{ALLOW, CACHE_CONTROL, CONTENT_TYPE, HeaderValue};
use http::{Method, Request, Response, StatusCode};

use crate::app::App;
use crate::metrics::{CONTENT_TYPE as METRICS_CONTENT_TYPE, Check};
use kube_wire::response::{Body, full};

/// The answer for `/metrics`, `/livez`, `/readyz`, `/healthz` (and their `/<check>` forms), or
/// `None` for every other path.
pub fn answer<B>(app: &App, req: &Request<B>) -> Option<Response<Body>> {
    let rest = req.uri().path().strip_prefix('/')?;
    let (endpoint, single) = match rest.split_once('/') {
        Some((e, check)) => (e, Some(check).filter(|c| !c.is_empty())),
        None => (rest, None),
    };
    if !(is_health(endpoint) || (endpoint == "metrics" && single.is_none())) {
        return None;
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        let mut r = text(
            StatusCode::METHOD_NOT_ALLOWED,
            "method not allowed\n".into(),
        );
        r.headers_mut()
            .insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
        return Some(r);
    }
    let m = &app.metrics;
    if endpoint == "metrics" {
        let mut r = text(StatusCode::OK, m.render());
        r.headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static(METRICS_CONTENT_TYPE));
        return Some(r);
    }
    let checks = if endpoint == "readyz" {
        m.readiness()
    } else {
        m.liveness()
    };
    Some(report(endpoint, &checks, single, req.uri().query()))
}

fn is_health(e: &str) -> bool {
    matches!(e, "livez" | "readyz" | "healthz")
}

/// kube's healthz handler output for `checks`.
pub fn report(
    endpoint: &str,
    checks: &[Check],
    single: Option<&str>,
    query: Option<&str>,
) -> Response<Body> {
    if let Some(name) = single {
        return match checks.iter().find(|c| c.name == name) {
            None => text(StatusCode::NOT_FOUND, format!("no such check: {name}\n")),
            Some(Check {
                error: None,
                stale: None,
                ..
            }) => text(StatusCode::OK, "ok".into()),
            Some(Check {
                error: None,
                stale: Some(why),
                ..
            }) => text(StatusCode::OK, format!("ok: serving stale ({why})\n")),
            Some(Check { error: Some(e), .. }) => text(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("internal server error: {e}\n"),
            ),
        };
    }
    let mut verbose = false;
    let mut excluded: Vec<String> = Vec::new();
    for (k, v) in form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
        match k.as_ref() {
            "verbose" => verbose = true,
            "exclude" => excluded.push(v.into_owned()),
            _ => {}
        }
    }
    let mut out = String::new();
    let mut failed = false;
    let mut stale: Vec<&str> = Vec::new();
    for c in checks {
        if let Some(i) = excluded.iter().position(|e| *e == c.name) {
            excluded.swap_remove(i);
            out.push_str(&format!("[+]{} excluded: ok\n", c.name));
            continue;
        }
        match &c.error {
            None => match &c.stale {
                None => out.push_str(&format!("[+]{} ok\n", c.name)),
                Some(why) => {
                    stale.push(&c.name);
                    out.push_str(&format!("[+]{} ok: serving stale, {why}\n", c.name));
                }
            },
            Some(e) => {
                failed = true;
                out.push_str(&format!("[-]{} failed: {e}\n", c.name));
            }
        }
    }
    if !excluded.is_empty() {
        out.push_str(&format!(
            "warn: some health checks cannot be excluded: no matches for {}\n",
            excluded.join(",")
        ));
    }
    if failed {
        out.push_str(&format!("{endpoint} check failed\n"));
        return text(StatusCode::SERVICE_UNAVAILABLE, out);
    }
    if !verbose {
        if stale.is_empty() {
            return text(StatusCode::OK, "ok".into());
        }
        return text(
            StatusCode::OK,
            format!("ok: serving stale ({})\n", stale.join(", ")),
        );
    }
    if stale.is_empty() {
        out.push_str(&format!("{endpoint} check passed\n"));
    } else {
        out.push_str(&format!("{endpoint} check passed, serving stale\n"));
    }
    text(StatusCode::OK, out)
}

fn text(code: StatusCode, body: String) -> Response<Body> {
    let mut r = Response::new(full(body));
    *r.status_mut() = code;
    let h = r.headers_mut();
    h.insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache, private"));
    h.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    fn checks(fail: bool) -> Vec<Check> {
        vec![
            Check {
                name: "ping".into(),
                error: None,
                stale: None,
            },
            Check {
                name: "cache/pods".into(),
                error: fail.then(|| "not synced".to_string()),
                stale: None,
            },
        ]
    }

    /// Ready, with `cache/pods` serving stale.
    fn stale_checks() -> Vec<Check> {
        let mut c = checks(false);
        c[1].stale = Some("not following the upstream for 42s".into());
        c
    }

    async fn body(r: Response<Body>) -> (u16, String) {
        let code = r.status().as_u16();
        let b = r.into_body().collect().await.unwrap().to_bytes();
        (code, String::from_utf8(b.to_vec()).unwrap())
    }

    #[tokio::test]
    async fn formats_like_kube() {
        assert_eq!(
            body(report("readyz", &checks(false), None, None)).await,
            (200, "ok".into())
        );
        assert_eq!(
            body(report("readyz", &checks(false), None, Some("verbose"))).await,
            (
                200,
                "[+]ping ok\n[+]cache/pods ok\nreadyz check passed\n".into()
            )
        );
        assert_eq!(
            body(report("readyz", &checks(true), None, None)).await,
            (
                503,
                "[+]ping ok\n[-]cache/pods failed: not synced\nreadyz check failed\n".into()
            )
        );
        assert_eq!(
            body(report(
                "readyz",
                &checks(true),
                None,
                Some("verbose&exclude=cache/pods&exclude=nope")
            ))
            .await,
            (
                200,
                "[+]ping ok\n[+]cache/pods excluded: ok\nwarn: some health checks cannot be excluded: no matches for nope\nreadyz check passed\n".into()
            )
        );
        assert_eq!(
            body(report("readyz", &checks(true), Some("cache/pods"), None)).await,
            (503, "internal server error: not synced\n".into())
        );
        assert_eq!(
            body(report("readyz", &checks(true), Some("ping"), None)).await,
            (200, "ok".into())
        );
        assert_eq!(
            body(report("readyz", &checks(true), Some("x"), None))
                .await
                .0,
            404
        );
    }

    #[tokio::test]
    async fn serving_stale_passes_and_says_so() {
        assert_eq!(
            body(report("readyz", &stale_checks(), None, None)).await,
            (200, "ok: serving stale (cache/pods)\n".into())
        );
        assert_eq!(
            body(report("readyz", &stale_checks(), None, Some("verbose"))).await,
            (
                200,
                "[+]ping ok\n[+]cache/pods ok: serving stale, not following the upstream for 42s\nreadyz check passed, serving stale\n".into()
            )
        );
        assert_eq!(
            body(report("readyz", &stale_checks(), Some("cache/pods"), None)).await,
            (
                200,
                "ok: serving stale (not following the upstream for 42s)\n".into()
            )
        );
        // An excluded check is not reported as stale.
        assert_eq!(
            body(report(
                "readyz",
                &stale_checks(),
                None,
                Some("exclude=cache/pods")
            ))
            .await,
            (200, "ok".into())
        );
    }
}
