//! watchmux's credentials from an exec credential plugin (a kubeconfig user's `exec`: EKS's
//! `aws eks get-token`, GKE's `gke-gcloud-auth-plugin`, AKS's `kubelogin`, …), as client-go's
//! exec authenticator keeps them.
//!
//! [`ExecCredentials`] holds the credential the plugin ([`plugin::Plugin`]) last gave (a bearer
//! token and/or a client certificate) and when it expires:
//! - it is used until `status.expirationTimestamp` (or the certificate's notAfter, if earlier),
//!   and renewed in the background shortly before: a fifth of its lifetime before, at most
//!   [`MAX_REFRESH_MARGIN`];
//! - a request made with it that the upstream answers 401 makes the plugin run again, once for
//!   every request that used that credential ([`ExecCredentials::rejected`]), and is then sent
//!   again with the new one ([`send`]; a request whose body is not empty is sent again only when
//!   it is at most [`REPLAY_BODY_LIMIT`] bytes, which are then kept to be sent twice);
//! - one run at a time, however many requests wait for it (single-flight);
//! - a failed run keeps the credential it had (still used while it has not expired) and is
//!   retried in the background with back-off ([`BACKOFF_FIRST`] doubling to [`BACKOFF_MAX`])
//!   until one succeeds; while no usable credential is left, requests fail at once with the
//!   last error, and `/readyz`'s `upstream-credentials` check fails with it
//!   ([`ExecCredentials::health`]);
//! - a new client certificate is presented from the next TLS handshake on
//!   ([`RotatingIdentity`]) and every connection made with the previous one is closed
//!   ([`ConnectionTracker`]), as client-go's connection rotation does.
//!
//! The same machinery keeps the id-token of a kubeconfig user's `oidc` auth-provider
//! ([`oidc`]): a [`Source`] is either; for OIDC a "run" uses the kubeconfig's id-token while it
//! is valid, else refreshes it at the issuer, and a failure names the issuer.
//!
//! Which requests carry watchmux's credentials is `crate::auth`'s and [`super::Upstream`]'s
//! business; this module must not build HTTP answers or read the kubeconfig.

pub mod oidc;
pub mod plugin;

use std::error::Error as StdError;
use std::future::Future;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use http::header::AUTHORIZATION;
use http::{HeaderValue, Request, Response, StatusCode};
use http_body_util::BodyExt;
use hyper::body::{Body as _, Incoming};
use parking_lot::Mutex;
use rustls::sign::CertifiedKey;
use tokio::sync::Notify;

use super::UpstreamError;
use super::rotation::ConnectionTracker;
use crate::tls::RotatingIdentity;
use kube_wire::response::{Body, full};
pub use oidc::{Oidc, OidcConfigError, OidcError};
pub use plugin::{Credential, ExecConfigError, ExecError, ExecProblem, Plugin};

/// Where the credentials come from: an exec plugin, or a kubeconfig user's `oidc`
/// auth-provider ([`oidc`]). Renewal, 401s, single-flight, back-off and readiness are the same.
#[derive(Debug)]
pub enum Source {
    /// Run the exec credential plugin.
    Plugin(Plugin),
    /// Use, then refresh, the OIDC id-token.
    Oidc(Box<Oidc>),
}

impl From<Plugin> for Source {
    fn from(p: Plugin) -> Source {
        Source::Plugin(p)
    }
}

impl From<Oidc> for Source {
    fn from(o: Oidc) -> Source {
        Source::Oidc(Box::new(o))
    }
}

impl Source {
    /// Where it is configured: the kubeconfig, context and user.
    pub fn origin(&self) -> &str {
        match self {
            Source::Plugin(p) => p.origin(),
            Source::Oidc(o) => o.origin(),
        }
    }

    /// What it is, for the log and `/readyz`: `the exec credential plugin`, `the oidc
    /// auth-provider`.
    fn what(&self) -> &'static str {
        match self {
            Source::Plugin(_) => "the exec credential plugin",
            Source::Oidc(_) => "the oidc auth-provider",
        }
    }

    /// The command or the issuer, for the log.
    fn target(&self) -> &str {
        match self {
            Source::Plugin(p) => p.command(),
            Source::Oidc(o) => o.issuer(),
        }
    }

    async fn run(&self) -> Result<Credential, CredentialError> {
        match self {
            Source::Plugin(p) => Ok(p.run().await?),
            Source::Oidc(o) => Ok(o.run().await?),
        }
    }
}

/// Why a [`Source`] gave no credential (its text names the kubeconfig, user and plugin or
/// issuer).
#[derive(Debug, thiserror::Error)]
pub enum CredentialError {
    /// The exec plugin's run failed.
    #[error(transparent)]
    Exec(#[from] ExecError),
    /// The OIDC refresh failed.
    #[error(transparent)]
    Oidc(#[from] OidcError),
}

/// A credential is renewed this long before it expires at most (less for a short-lived one: a
/// fifth of its lifetime).
pub const MAX_REFRESH_MARGIN: Duration = Duration::from_secs(60);

/// The first retry after a failed run comes this much later…
pub const BACKOFF_FIRST: Duration = Duration::from_secs(1);

/// …doubling after each further failure up to this.
pub const BACKOFF_MAX: Duration = Duration::from_secs(60);

/// A request body of at most this many bytes is kept, so that the request can be sent again
/// after a 401 with a renewed credential; a longer (or unsized) one is streamed and not retried.
pub const REPLAY_BODY_LIMIT: u64 = 64 * 1024;

/// A credential the plugin gave, as requests use it.
#[derive(Debug)]
pub struct Issued {
    /// Which run gave it (1, 2, …): a 401 names the credential it was answered to.
    serial: u64,
    credential: Credential,
    /// When to renew it.
    refresh_at: Option<SystemTime>,
}

impl Issued {
    /// `Authorization: Bearer …`, when the plugin gave a token.
    pub fn authorization(&self) -> Option<&HeaderValue> {
        self.credential.authorization.as_ref()
    }

    /// The client certificate, when the plugin gave one.
    pub fn certificate(&self) -> Option<&Arc<CertifiedKey>> {
        self.credential.certificate.as_ref()
    }

    fn usable(&self, now: SystemTime) -> bool {
        self.credential.expires.is_none_or(|e| now < e)
    }

    fn due(&self, now: SystemTime) -> bool {
        self.refresh_at.is_some_and(|r| now >= r)
    }
}

/// The last run's failure.
#[derive(Debug)]
struct Failure {
    error: Arc<CredentialError>,
    /// Consecutive failures.
    count: u32,
    /// No run before this.
    retry_at: Instant,
}

#[derive(Debug, Default)]
struct State {
    current: Option<Arc<Issued>>,
    failure: Option<Failure>,
    runs: u64,
}

/// Why a run is wanted.
#[derive(Debug, Clone, Copy)]
enum Need {
    /// A usable credential (none, or the one held expired).
    Usable,
    /// The upstream refused the credential of this serial.
    Replace(u64),
    /// The background renewal: the credential is due, or the last run failed.
    Refresh,
}

impl Need {
    /// For the log.
    fn reason(self) -> &'static str {
        match self {
            Need::Usable => "no usable credential",
            Need::Replace(_) => "the upstream answered 401",
            Need::Refresh => "renewal or retry",
        }
    }
}

/// watchmux's credentials from an exec plugin (see the module doc). Shared by the upstream
/// client's handles.
#[derive(Debug)]
pub struct ExecCredentials {
    source: Source,
    state: Mutex<State>,
    /// Held while the plugin runs: one run at a time.
    run: tokio::sync::Mutex<()>,
    identity: Arc<RotatingIdentity>,
    connections: ConnectionTracker,
    /// Wakes the background renewal when the state changed (or this is dropped).
    wake: Arc<Notify>,
    renewal: std::sync::Once,
}

impl Drop for ExecCredentials {
    fn drop(&mut self) {
        self.wake.notify_one();
    }
}

impl ExecCredentials {
    /// Credentials from `source`; it first runs when a request needs them.
    pub fn new(source: impl Into<Source>) -> ExecCredentials {
        ExecCredentials {
            source: source.into(),
            state: Mutex::new(State::default()),
            run: tokio::sync::Mutex::new(()),
            identity: Arc::new(RotatingIdentity::default()),
            connections: ConnectionTracker::default(),
            wake: Arc::new(Notify::new()),
            renewal: std::sync::Once::new(),
        }
    }

    /// Where the credentials come from.
    pub fn source(&self) -> &Source {
        &self.source
    }

    /// The client certificate to present (the TLS config's resolver).
    pub fn identity(&self) -> Arc<RotatingIdentity> {
        self.identity.clone()
    }

    /// The connections to close when the certificate changes (the pools' connector's).
    pub fn connections(&self) -> &ConnectionTracker {
        &self.connections
    }

    /// How many times the plugin has run.
    pub fn runs(&self) -> u64 {
        self.state.lock().runs
    }

    /// The `Authorization` value of the credential held now, if it is usable and has a token.
    pub fn current_authorization(&self) -> Option<HeaderValue> {
        let st = self.state.lock();
        st.current
            .as_ref()
            .filter(|c| c.usable(SystemTime::now()))
            .and_then(|c| c.authorization().cloned())
    }

    /// `None` while a usable credential is held; else why not (for `/readyz`): the last run's
    /// error with its causes, or that the first run has not finished.
    pub fn health(&self) -> Option<String> {
        let st = self.state.lock();
        let now = SystemTime::now();
        if st.current.as_ref().is_some_and(|c| c.usable(now)) {
            return None;
        }
        Some(match &st.failure {
            Some(f) => {
                let wait = f.retry_at.saturating_duration_since(Instant::now());
                format!(
                    "{} (retrying in {}s)",
                    chain(f.error.as_ref()),
                    wait.as_secs()
                )
            }
            None if st.current.is_some() => format!(
                "{}: {}'s credential expired; renewing it",
                self.source.origin(),
                self.source.what()
            ),
            None => format!(
                "{}: waiting for {}'s first credential",
                self.source.origin(),
                self.source.what()
            ),
        })
    }

    /// A usable credential: the one held, else the plugin's next (running it now unless a run
    /// is under way, whose result is shared, or the last one failed within its back-off, whose
    /// error is returned).
    pub async fn credential(self: &Arc<Self>) -> Result<Arc<Issued>, Arc<CredentialError>> {
        self.start_renewal();
        {
            let st = self.state.lock();
            if let Some(c) = st.current.as_ref().filter(|c| c.usable(SystemTime::now())) {
                return Ok(c.clone());
            }
            if let Some(f) = st.failure.as_ref().filter(|f| Instant::now() < f.retry_at) {
                return Err(f.error.clone());
            }
        }
        self.obtain(Need::Usable).await
    }

    /// The upstream answered 401 to a request made with `used`: a new credential, from one run
    /// of the plugin for all the requests that used `used` (unless the last run failed within
    /// its back-off: then its error).
    pub async fn rejected(
        self: &Arc<Self>,
        used: &Issued,
    ) -> Result<Arc<Issued>, Arc<CredentialError>> {
        tracing::debug!(user = %self.source.origin(), serial = used.serial, source = self.source.what(), "the upstream answered 401 to watchmux's credential");
        self.obtain(Need::Replace(used.serial)).await
    }

    /// Before a request that carries its own `Authorization` and so needs no credential of
    /// watchmux's, but whose connection presents watchmux's client certificate: waits for the
    /// plugin's first credential, when that may be a certificate (errors are the request's
    /// connection's to meet).
    pub async fn ensure_identity(self: &Arc<Self>) {
        if matches!(self.source, Source::Oidc(_)) {
            return;
        }
        let wait = {
            let st = self.state.lock();
            st.current
                .as_ref()
                .is_none_or(|c| c.certificate().is_some())
        };
        if wait {
            let _ = self.credential().await;
        }
    }

    /// Runs the plugin for `need`, unless, once it is our turn, another run has met it or the
    /// back-off forbids it.
    async fn obtain(&self, need: Need) -> Result<Arc<Issued>, Arc<CredentialError>> {
        let _turn = self.run.lock().await;
        {
            let st = self.state.lock();
            let now = SystemTime::now();
            let usable = st.current.as_ref().filter(|c| c.usable(now));
            let met = match need {
                Need::Usable => usable,
                Need::Replace(serial) => usable.filter(|c| c.serial != serial),
                Need::Refresh => usable.filter(|c| !c.due(now) && st.failure.is_none()),
            };
            if let Some(c) = met {
                return Ok(c.clone());
            }
            if let Some(f) = st.failure.as_ref().filter(|f| Instant::now() < f.retry_at) {
                return Err(f.error.clone());
            }
        }
        tracing::debug!(target_ = %self.source.target(), ?need, source = self.source.what(), "obtaining a credential");
        let started = Instant::now();
        let result = self.source.run().await;
        let out = self.record(result, need, started.elapsed());
        self.wake.notify_one();
        out
    }

    /// Keeps a run's result: a new credential (presenting a new certificate and closing the
    /// connections made with the old one), or its failure and the next retry.
    fn record(
        &self,
        result: Result<Credential, CredentialError>,
        need: Need,
        took: Duration,
    ) -> Result<Arc<Issued>, Arc<CredentialError>> {
        let mut st = self.state.lock();
        st.runs += 1;
        match result {
            Ok(credential) => {
                let now = SystemTime::now();
                let refresh_at = credential.expires.map(|e| {
                    let life = e.duration_since(now).unwrap_or_default();
                    e - (life / 5).min(MAX_REFRESH_MARGIN)
                });
                let issued = Arc::new(Issued {
                    serial: st.runs,
                    credential,
                    refresh_at,
                });
                let old_cert = st
                    .current
                    .as_ref()
                    .and_then(|c| c.certificate())
                    .map(|c| c.cert.clone());
                let new_cert = issued.certificate().map(|c| c.cert.clone());
                let had_one = st.current.is_some();
                st.current = Some(issued.clone());
                st.failure = None;
                drop(st);
                let expires_in = issued
                    .credential
                    .expires
                    .and_then(|e| e.duration_since(now).ok())
                    .map(|d| d.as_secs());
                tracing::info!(
                    command = %self.source.target(),
                    user = %self.source.origin(),
                    source = self.source.what(),
                    kind = issued.credential.kind(),
                    reason = need.reason(),
                    expires_in_secs = expires_in,
                    took_ms = took.as_millis() as u64,
                    "new upstream credential"
                );
                if old_cert != new_cert {
                    self.identity.set(issued.certificate().cloned());
                    let closed = self.connections.close_all();
                    if had_one {
                        tracing::info!(
                            closed,
                            "the exec credential plugin's client certificate changed: closed the upstream connections made with the previous one"
                        );
                    }
                }
                Ok(issued)
            }
            Err(e) => {
                let e = Arc::new(e);
                let count = st.failure.as_ref().map_or(1, |f| f.count.saturating_add(1));
                let delay = BACKOFF_FIRST
                    .saturating_mul(1u32 << (count - 1).min(16))
                    .min(BACKOFF_MAX);
                st.failure = Some(Failure {
                    error: e.clone(),
                    count,
                    retry_at: Instant::now() + delay,
                });
                let still_usable = st
                    .current
                    .as_ref()
                    .is_some_and(|c| c.usable(SystemTime::now()));
                drop(st);
                tracing::warn!(
                    source = self.source.what(),
                    error = %chain(e.as_ref()),
                    reason = need.reason(),
                    failures = count,
                    retry_in_secs = delay.as_secs(),
                    keeping_previous_credential = still_usable,
                    "no new upstream credential"
                );
                Err(e)
            }
        }
    }

    /// When the background renewal should run the plugin next: after a failed run, at the end
    /// of its back-off (until a run succeeds); else now when there is no credential, at its
    /// renewal time when it has one, never for a credential without expiry.
    fn next_run(&self) -> Option<Instant> {
        let st = self.state.lock();
        if let Some(f) = &st.failure {
            return Some(f.retry_at);
        }
        let now = Instant::now();
        match &st.current {
            None => Some(now),
            Some(c) => c.refresh_at.map(|r| {
                now + r
                    .duration_since(SystemTime::now())
                    .unwrap_or(Duration::ZERO)
            }),
        }
    }

    /// Starts the background renewal (once; it ends when these credentials are dropped).
    fn start_renewal(self: &Arc<Self>) {
        self.renewal.call_once(|| {
            tokio::spawn(renew(Arc::downgrade(self), self.wake.clone()));
        });
    }
}

/// Renews the credential before it expires and retries failed runs, until `creds` is gone.
async fn renew(creds: Weak<ExecCredentials>, wake: Arc<Notify>) {
    loop {
        let notified = wake.notified();
        let next = match creds.upgrade() {
            Some(c) => c.next_run(),
            None => return,
        };
        match next {
            Some(at) if at <= Instant::now() => {}
            Some(at) => {
                tokio::select! {
                    _ = tokio::time::sleep_until(at.into()) => {}
                    _ = notified => continue,
                }
            }
            None => {
                notified.await;
                continue;
            }
        }
        let Some(c) = creds.upgrade() else { return };
        if c.next_run().is_some_and(|t| t <= Instant::now()) {
            let _ = c.obtain(Need::Refresh).await;
        }
    }
}

/// An error and its causes, joined by `: ` (for the log and `/readyz`).
pub fn chain(e: &(dyn StdError + 'static)) -> String {
    let mut s = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cause = c.source();
    }
    s
}

/// Sends `req` (which carries no `Authorization`) with the plugin's credential through `send`;
/// on a 401, once, with a new credential (see the module doc for which bodies allow it).
pub async fn send<F, Fut>(
    creds: &Arc<ExecCredentials>,
    req: Request<Body>,
    send: F,
) -> Result<Response<Incoming>, UpstreamError>
where
    F: Fn(Request<Body>) -> Fut,
    Fut: Future<Output = Result<Response<Incoming>, UpstreamError>>,
{
    let issued = creds.credential().await?;
    let (parts, body) = req.into_parts();
    let hint = body.size_hint();
    let (body, replay) = if body.is_end_stream() {
        (full(Bytes::new()), Some(Bytes::new()))
    } else if hint.exact().is_some_and(|n| n <= REPLAY_BODY_LIMIT) {
        let bytes = body
            .collect()
            .await
            .map_err(UpstreamError::RequestBody)?
            .to_bytes();
        (full(bytes.clone()), Some(bytes))
    } else {
        (body, None)
    };
    let again = replay.map(|b| {
        let mut r = Request::new(full(b));
        *r.method_mut() = parts.method.clone();
        *r.uri_mut() = parts.uri.clone();
        *r.version_mut() = parts.version;
        *r.headers_mut() = parts.headers.clone();
        r
    });
    let first = Request::from_parts(parts, body);
    let resp = send(with_credential(first, &issued)).await?;
    if resp.status() != StatusCode::UNAUTHORIZED {
        return Ok(resp);
    }
    let fresh = match creds.rejected(&issued).await {
        Ok(f) => f,
        // No new credential: the client gets the upstream's answer.
        Err(_) => return Ok(resp),
    };
    match again {
        Some(req) => {
            drop(resp);
            send(with_credential(req, &fresh)).await
        }
        None => Ok(resp),
    }
}

fn with_credential(mut req: Request<Body>, issued: &Issued) -> Request<Body> {
    if let Some(auth) = issued.authorization() {
        req.headers_mut().insert(AUTHORIZATION, auth.clone());
    }
    req
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Credentials from a script in `dir` that prints token `tok-<run>` unless `dir/fail`
    /// exists (then it exits 1). The plugin is `/bin/sh` reading the script, not the script
    /// itself: executing a file just written fails with ETXTBSY while a child that another test
    /// thread forked meanwhile still holds its write descriptor (until that child's exec).
    fn credentials(dir: &std::path::Path) -> Arc<ExecCredentials> {
        let script = dir.join("plugin.sh");
        std::fs::write(
            &script,
            "#!/bin/sh\nD=\"$(dirname \"$0\")\"\necho x >> \"$D/runs\"\nif [ -e \"$D/fail\" ]; then exit 1; fi\nN=$(wc -l < \"$D/runs\")\necho \"{\\\"apiVersion\\\":\\\"client.authentication.k8s.io/v1\\\",\\\"kind\\\":\\\"ExecCredential\\\",\\\"status\\\":{\\\"token\\\":\\\"tok-$N\\\"}}\"\n",
        )
        .unwrap();
        let exec: kube::config::ExecConfig = serde_json::from_value(serde_json::json!({
            "apiVersion": plugin::V1, "command": "/bin/sh", "args": [script],
            "interactiveMode": "Never",
        }))
        .unwrap();
        let plugin = Plugin::new("u", "kc", &exec, Duration::from_secs(10)).unwrap();
        Arc::new(ExecCredentials::new(plugin))
    }

    /// A credential the upstream refused, whose re-run failed, is still used (it has not
    /// expired) and `/readyz` passes; the run is retried in the background until it succeeds.
    #[tokio::test]
    async fn a_failed_run_after_a_401_is_retried_until_it_succeeds() {
        let dir = tempfile::tempdir().unwrap();
        let creds = credentials(dir.path());
        let first = creds.credential().await.unwrap();
        assert_eq!(first.authorization().unwrap(), "Bearer tok-1");
        std::fs::write(dir.path().join("fail"), "").unwrap();
        let e = creds.rejected(&first).await.unwrap_err();
        assert!(e.to_string().contains("failed with exit status: 1"), "{e}");
        assert_eq!(creds.runs(), 2);
        // Within the back-off, a second 401 runs nothing.
        assert!(creds.rejected(&first).await.is_err());
        assert_eq!(creds.runs(), 2);
        assert_eq!(creds.health(), None);
        assert_eq!(creds.current_authorization().unwrap(), "Bearer tok-1");
        std::fs::remove_file(dir.path().join("fail")).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while creds.current_authorization().unwrap() == "Bearer tok-1" {
            assert!(Instant::now() < deadline, "not retried");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(creds.current_authorization().unwrap(), "Bearer tok-3");
        assert_eq!(creds.runs(), 3);
    }

    /// Without any credential, requests fail at once with the last error during the back-off,
    /// and `/readyz` says why.
    #[tokio::test]
    async fn without_a_credential_requests_get_the_last_error() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("fail"), "").unwrap();
        let creds = credentials(dir.path());
        let e = creds.credential().await.unwrap_err();
        let again = creds.credential().await.unwrap_err();
        assert!(Arc::ptr_eq(&e, &again), "the same error, no second run");
        assert_eq!(creds.runs(), 1);
        let health = creds.health().unwrap();
        assert!(
            health.starts_with("kc, user \"u\": exec credential plugin ")
                && health.contains("exit status: 1")
                && health.contains("retrying in"),
            "{health}"
        );
    }
}
