//! `server.authz = "delegated"`: who may read what the cache answers.
//!
//! Every request the cache answers (LIST and WATCH of a cached resource) is first authenticated
//! and then authorized through the upstream, as kube-apiserver's delegated authn/authz does:
//!
//! * **identity**: a verified client certificate ([`PeerAuth`]: user = CN, groups = O), else a
//!   bearer token (the `Authorization` header, or the websocket subprotocol
//!   `base64url.bearer.authorization.k8s.io.<token>`) sent in a TokenReview, else
//!   `system:anonymous` / `system:unauthenticated`. A token the upstream rejects gets kube's 401.
//! * **authorization**: a SubjectAccessReview with the identity and the request's resource
//!   attributes (verb `list` or `watch`, group, version, resource, namespace, and the name of a
//!   `metadata.name` field selector or legacy watch path). Denied: kube's 403.
//!
//! Both reviews are made with watchmux's own credentials. Their results are cached (moka): allow
//! and deny with their own TTLs (`server.authz_allow_ttl_secs`, 300, and
//! `server.authz_deny_ttl_secs`, 30: kube's webhook authorizer's defaults for authorized and
//! unauthorized answers), each cache bounded in entries. Upstream failures are not cached.
//! Concurrent lookups of one key that is not cached make a single review, which they all wait
//! for (kube's cached token authenticator does the same; its webhook authorizer does not).
//! Every lookup is counted by its result (`watchmux_authz_cache_requests_total`): `hit`, `miss`
//! (it sent the review: the upstream's reviews are the misses) or `shared` (it waited for a
//! concurrent identical one).
//!
//! **Sized for a fleet.** A kubelet opens one watch per ConfigMap and Secret its pods mount
//! (each namespace's `kube-root-ca.crt` included), scoped by name, so each is its own
//! SubjectAccessReview key (user × verb × resource × namespace × name). Pods spread over every
//! node, so a node's pods come from different Deployments and namespaces: in clusterloader2's
//! load shape (`kube-sim --shape cl2`, 30 pods a node, a ConfigMap and a Secret per
//! Deployment) that is 59 keys per node at 500 nodes, 74 at 2,000 and 80 at 5,000 (402,000),
//! plus each node's 6 other reads (its pods, its Node, Services, EndpointSlices,
//! RuntimeClasses, CSIDrivers): about 430,000 for 5,000 nodes. kube-apiserver answers those
//! in-process (its Node authorizer); its webhook authorizer keeps only 8,192 answers (an LRU),
//! which such a fleet would churn through. So the access cache holds
//! `server.authz_access_cache_size` (524,288) entries, the token cache
//! `server.authz_token_cache_size` (65,536: kubelets usually present certificates, which need
//! no TokenReview; bearer-token kubelets and workloads do). Memory follows the entries held,
//! not the bound. An access entry is its key in one allocation (each string length-prefixed:
//! 166 bytes for a kubelet's per-object watch) with moka's own share (its maps, deques and
//! timer wheel): about 460 bytes asked of the allocator per entry for such keys, measured
//! (`entries_stay_small`), so a full default cache holds about 240 MB; a key over
//! [`MAX_CACHED_KEY_BYTES`] (kube's bound on the requester's attributes) is reviewed every time
//! instead of cached. A token entry is keyed on an HMAC-SHA256 of the token under a key drawn
//! at start (kube's token cache does the same): 32 bytes whatever the token's length (a
//! service account's JWT is about a kilobyte), and no token kept in memory; with the user it
//! names, about 500 bytes, so about 33 MB full.
//!
//! The allow TTL, not the size, decides how often such a fleet's watches are reviewed again:
//! client-go ends each watch after 5 to 10 minutes and re-watches, so with kube's 300 s most
//! re-watches find their entry expired (a miss, one review each); a longer allow TTL trades
//! the time a revoked grant is still honoured for fewer reviews.
//!
//! Owns the reviews and their caches. Failures are [`AuthzError`]s (`crate::error` makes them
//! kube's 401, 403 or 500); it must not build answers, nor look at pass-through requests (the
//! upstream authorizes those itself, with the client's own credentials).

use std::hash::Hash;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use http::header::CONTENT_TYPE;
use http::{HeaderMap, HeaderValue, Method, Request, StatusCode, Uri};
use http_body_util::{BodyExt, Limited};
use moka::Expiry;
use moka::future::Cache;
use serde_json::{Value, json};

use crate::auth::PeerAuth;
use crate::config::ServerConfig;
use crate::metrics::AuthzMetrics;
use crate::upstream::{Upstream, UpstreamError};
use kube_wire::access::{AUTHENTICATED, Attributes, Credential, UserInfo, credential};
use kube_wire::response::full;
use kube_wire::status::Status;

/// Why a request the cache would answer is not let through.
#[derive(Debug, thiserror::Error)]
pub enum AuthzError {
    /// The `Authorization` header or the websocket bearer subprotocol is malformed.
    #[error("the bearer credential is malformed")]
    MalformedCredential,
    /// The upstream's TokenReview did not authenticate the token.
    #[error("the token is not authenticated by the upstream's TokenReview")]
    TokenNotAuthenticated,
    /// The upstream's SubjectAccessReview did not allow the request.
    #[error(
        "{user:?} may not {} {}: denied by the SubjectAccessReview",
        .attributes.verb,
        .attributes.resource
    )]
    Forbidden {
        /// Who asked.
        user: String,
        /// What was asked for.
        attributes: Box<Attributes>,
        /// The authorizer's reason (may be empty).
        reason: String,
    },
    /// The TokenReview failed (no verdict).
    #[error("token review failed: {0}")]
    TokenReview(#[source] Arc<ReviewError>),
    /// The SubjectAccessReview failed (no verdict).
    #[error("subject access review failed: {0}")]
    AccessReview(#[source] Arc<ReviewError>),
}

/// Why a TokenReview or SubjectAccessReview gave no verdict.
#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    /// The review could not be sent, or no answer came.
    #[error(transparent)]
    Upstream(#[from] UpstreamError),
    /// The answer's body could not be read, or is larger than [`MAX_REVIEW_BYTES`].
    #[error("{0}")]
    Body(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The upstream answered with an error (not 2xx).
    #[error("{path}: HTTP {code}: {excerpt}")]
    Refused {
        /// The review's path.
        path: &'static str,
        /// The HTTP status.
        code: StatusCode,
        /// The start of the body, as text.
        excerpt: String,
        /// The body as a kube Status, when it is one.
        #[source]
        status: Option<Status>,
    },
    /// A 2xx answer whose body is not JSON.
    #[error("{path}: {source}")]
    Malformed {
        /// The review's path.
        path: &'static str,
        /// The JSON error.
        #[source]
        source: serde_json::Error,
    },
}

/// Which review a cache lookup is for (the `review` label of the lookup counter).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Review {
    /// A TokenReview (authentication of a bearer token).
    Token,
    /// A SubjectAccessReview (authorization of a request).
    Access,
}

impl Review {
    /// Every review, in label order.
    pub const ALL: [Review; 2] = [Review::Token, Review::Access];

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Review::Token => "token",
            Review::Access => "access",
        }
    }
}

/// How a cache lookup was answered (the `result` label of the lookup counter).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lookup {
    /// From the cache.
    Hit,
    /// By a review this lookup sent upstream.
    Miss,
    /// By a concurrent lookup's review of the same key, which this one waited for.
    Shared,
}

impl Lookup {
    /// Every result, in label order.
    pub const ALL: [Lookup; 3] = [Lookup::Hit, Lookup::Miss, Lookup::Shared];

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Lookup::Hit => "hit",
            Lookup::Miss => "miss",
            Lookup::Shared => "shared",
        }
    }
}

/// A SubjectAccessReview's verdict; the authorizer's reason is kept for a denial only (it goes
/// into the 403's message).
#[derive(Debug, Clone)]
struct Decision {
    allowed: bool,
    reason: Option<Arc<str>>,
}

/// A TokenReview's verdict: who the token belongs to, or `None` when it is not authenticated.
type TokenVerdict = Option<UserInfo>;

/// The token cache's key: an HMAC-SHA256 of the token.
type TokenKey = [u8; 32];

/// The access cache's key: the identity and the attributes, each string length-prefixed, in
/// one allocation (a struct of ten `String`s costs half as much again).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct AccessKey(Box<[u8]>);

/// Keys longer than this are not cached (reviewed every time): kube's webhook authorizer does
/// not cache requests whose requester-controlled attributes reach 10,000 bytes, so that a
/// client cannot fill the cache with huge entries.
pub const MAX_CACHED_KEY_BYTES: usize = 10_000;

impl AccessKey {
    fn new(u: &UserInfo, a: &Attributes) -> AccessKey {
        let strings = [
            &u.user,
            &u.uid,
            &a.verb,
            &a.group,
            &a.version,
            &a.resource,
            &a.subresource,
            &a.namespace,
            &a.name,
        ];
        let len = strings
            .into_iter()
            .chain(&u.groups)
            .map(|s| 4 + s.len())
            .sum();
        let mut b = Vec::with_capacity(len);
        let mut put = |s: &str| {
            // Lengths past u32 cannot occur (a request's header and URL limits are far below).
            b.extend_from_slice(&(s.len() as u32).to_le_bytes());
            b.extend_from_slice(s.as_bytes());
        };
        // The groups last: what follows the attributes is all groups.
        for s in strings.into_iter().chain(&u.groups) {
            put(s);
        }
        AccessKey(b.into_boxed_slice())
    }
}

#[derive(Debug, Clone, Copy)]
struct Ttls {
    allow: Duration,
    deny: Duration,
}

impl Expiry<TokenKey, TokenVerdict> for Ttls {
    fn expire_after_create(&self, _: &TokenKey, v: &TokenVerdict, _: Instant) -> Option<Duration> {
        Some(if v.is_some() { self.allow } else { self.deny })
    }
}

impl Expiry<AccessKey, Decision> for Ttls {
    fn expire_after_create(&self, _: &AccessKey, v: &Decision, _: Instant) -> Option<Duration> {
        Some(if v.allowed { self.allow } else { self.deny })
    }
}

/// Delegated authentication and authorization with cached results.
pub struct Authorizer {
    upstream: Upstream,
    /// Reviews in flight at once ([`MAX_REVIEWS_IN_FLIGHT`]).
    in_flight: tokio::sync::Semaphore,
    tokens: Cache<TokenKey, TokenVerdict>,
    /// The HMAC key of the token cache's keys, drawn at start.
    token_hmac: ring::hmac::Key,
    decisions: Cache<AccessKey, Decision>,
    metrics: AuthzMetrics,
}

impl std::fmt::Debug for Authorizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authorizer").finish_non_exhaustive()
    }
}

/// Most reviews sent upstream at once: a fleet's cold start asks for hundreds of thousands of
/// distinct decisions within seconds (every kubelet's name-scoped watches); the rest wait their
/// turn rather than each holding an upstream stream, or an upstream connection where the
/// upstream speaks HTTP/1.1. kube-apiserver's default cap of concurrent streams per HTTP/2
/// connection.
const MAX_REVIEWS_IN_FLIGHT: usize = 100;

/// Largest review response read.
pub const MAX_REVIEW_BYTES: usize = 1 << 20;

/// Bytes of a refused review's body kept in [`ReviewError::Refused`]'s text.
const EXCERPT_BYTES: usize = 512;

/// Where TokenReviews are posted.
const TOKEN_REVIEWS: &str = "/apis/authentication.k8s.io/v1/tokenreviews";

/// Where SubjectAccessReviews are posted.
const ACCESS_REVIEWS: &str = "/apis/authorization.k8s.io/v1/subjectaccessreviews";

impl Authorizer {
    /// From `[server]`'s `authz_*` keys; reviews go to `upstream` as watchmux, lookups are
    /// counted in `metrics`.
    pub fn new(upstream: Upstream, server: &ServerConfig, metrics: AuthzMetrics) -> Authorizer {
        let ttls = Ttls {
            allow: server.authz_allow_ttl,
            deny: server.authz_deny_ttl,
        };
        let rng = ring::rand::SystemRandom::new();
        Authorizer {
            upstream,
            in_flight: tokio::sync::Semaphore::new(MAX_REVIEWS_IN_FLIGHT),
            tokens: Cache::builder()
                .max_capacity(server.authz_token_cache_size)
                .expire_after(ttls)
                .build(),
            token_hmac: ring::hmac::Key::generate(ring::hmac::HMAC_SHA256, &rng)
                .expect("the system's random numbers"),
            decisions: Cache::builder()
                .max_capacity(server.authz_access_cache_size)
                .expire_after(ttls)
                .build(),
            metrics,
        }
    }

    /// The cached verdict of `key`, else `review`'s, made once for every concurrent lookup of
    /// `key` (see the module doc); the lookup counted by how it was answered.
    async fn lookup<K, V>(
        &self,
        cache: &Cache<K, V>,
        which: Review,
        key: K,
        review: impl Future<Output = Result<V, ReviewError>>,
    ) -> Result<V, Arc<ReviewError>>
    where
        K: Hash + Eq + Send + Sync + 'static,
        V: Clone + Send + Sync + 'static,
    {
        if let Some(v) = cache.get(&key).await {
            self.metrics.lookup(which, Lookup::Hit);
            return Ok(v);
        }
        let sent = AtomicBool::new(false);
        let entry = cache
            .entry(key)
            .or_try_insert_with(async {
                sent.store(true, Ordering::Relaxed);
                review.await
            })
            .await;
        let how = if sent.load(Ordering::Relaxed) {
            Lookup::Miss
        } else {
            Lookup::Shared
        };
        self.metrics.lookup(which, how);
        entry.map(|e| e.into_value())
    }

    /// Who the request is made by.
    pub async fn authenticate(
        &self,
        headers: &HeaderMap,
        peer: Option<&PeerAuth>,
    ) -> Result<UserInfo, AuthzError> {
        if let Some(id) = peer.and_then(|p| p.identity.as_deref()) {
            let mut groups = id.groups.clone();
            groups.push(AUTHENTICATED.to_string());
            return Ok(UserInfo {
                user: id.user.clone(),
                groups,
                uid: String::new(),
            });
        }
        let token = match credential(headers) {
            Credential::None => return Ok(UserInfo::anonymous()),
            Credential::Invalid => return Err(AuthzError::MalformedCredential),
            Credential::Token(t) => t,
        };
        let key = ring::hmac::sign(&self.token_hmac, token.as_bytes());
        let key: TokenKey = key.as_ref().try_into().expect("SHA-256 is 32 bytes");
        let r = self
            .lookup(&self.tokens, Review::Token, key, self.token_review(token))
            .await;
        match r {
            Ok(Some(u)) => Ok(u),
            Ok(None) => Err(AuthzError::TokenNotAuthenticated),
            Err(e) => Err(AuthzError::TokenReview(e)),
        }
    }

    /// Whether `user` may do `attrs`.
    pub async fn authorize(&self, user: UserInfo, attrs: &Attributes) -> Result<(), AuthzError> {
        let key = AccessKey::new(&user, attrs);
        let review = self.access_review(&user, attrs);
        let r = if key.0.len() > MAX_CACHED_KEY_BYTES {
            self.metrics.lookup(Review::Access, Lookup::Miss);
            review.await.map_err(Arc::new)
        } else {
            self.lookup(&self.decisions, Review::Access, key, review)
                .await
        };
        match r {
            Ok(d) if d.allowed => Ok(()),
            Ok(d) => Err(AuthzError::Forbidden {
                user: user.user,
                attributes: Box::new(attrs.clone()),
                reason: d.reason.as_deref().unwrap_or_default().to_string(),
            }),
            Err(e) => Err(AuthzError::AccessReview(e)),
        }
    }

    /// Posts a review to `path` as watchmux and returns the answer's JSON.
    async fn review(&self, path: &'static str, body: Value) -> Result<Value, ReviewError> {
        let mut req = Request::new(full(body.to_string()));
        *req.method_mut() = Method::POST;
        *req.uri_mut() = Uri::from_static(path);
        req.headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        req.headers_mut().insert(
            http::header::ACCEPT,
            HeaderValue::from_static("application/json"),
        );
        // Held until the answer is read; the semaphore is never closed.
        let _turn = self.in_flight.acquire().await.ok();
        let resp = self.upstream.send(req).await?;
        let code = resp.status();
        let bytes = Limited::new(resp.into_body(), MAX_REVIEW_BYTES)
            .collect()
            .await
            .map_err(ReviewError::Body)?
            .to_bytes();
        if !code.is_success() {
            return Err(ReviewError::Refused {
                path,
                code,
                excerpt: String::from_utf8_lossy(&bytes[..bytes.len().min(EXCERPT_BYTES)])
                    .into_owned(),
                status: Status::parse(&bytes, code.as_u16()).ok(),
            });
        }
        serde_json::from_slice(&bytes).map_err(|source| ReviewError::Malformed { path, source })
    }

    async fn token_review(&self, token: String) -> Result<TokenVerdict, ReviewError> {
        let body = json!({
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenReview",
            "spec": {"token": token},
        });
        // Boxed when sent: every concurrent lookup of the key holds this future unpolled.
        let v = Box::pin(self.review(TOKEN_REVIEWS, body)).await?;
        let st = &v["status"];
        if st["authenticated"].as_bool() != Some(true) {
            return Ok(None);
        }
        let u = &st["user"];
        let strings = |v: &Value| -> Vec<String> {
            v.as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|g| g.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default()
        };
        Ok(Some(UserInfo {
            user: u["username"].as_str().unwrap_or_default().to_string(),
            groups: strings(&u["groups"]),
            uid: u["uid"].as_str().unwrap_or_default().to_string(),
        }))
    }

    async fn access_review(&self, u: &UserInfo, a: &Attributes) -> Result<Decision, ReviewError> {
        let mut ra = json!({
            "verb": a.verb,
            "group": a.group,
            "version": a.version,
            "resource": a.resource,
        });
        for (k, v) in [
            ("subresource", &a.subresource),
            ("namespace", &a.namespace),
            ("name", &a.name),
        ] {
            if !v.is_empty() {
                ra[k] = json!(v);
            }
        }
        let mut spec = json!({"user": u.user, "groups": u.groups, "resourceAttributes": ra});
        if !u.uid.is_empty() {
            spec["uid"] = json!(u.uid);
        }
        let body = json!({
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": spec,
        });
        // Boxed when sent: every concurrent lookup of the key holds this future unpolled (a
        // fleet's cold start has hundreds of thousands waiting); the request's is 10+ KB.
        let v = Box::pin(self.review(ACCESS_REVIEWS, body)).await?;
        let st = &v["status"];
        let allowed = st["allowed"].as_bool() == Some(true) && st["denied"].as_bool() != Some(true);
        Ok(Decision {
            allowed,
            reason: st["reason"]
                .as_str()
                .filter(|r| !allowed && !r.is_empty())
                .map(Arc::from),
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use super::*;
    use crate::config::{Config, UpstreamConfig};
    use crate::metrics::Metrics;

    /// An authorizer whose upstream is never asked (the tests make their own reviews), with
    /// the metrics it counts in.
    fn authorizer(server: &ServerConfig) -> (Authorizer, Metrics) {
        let up = Upstream::new(&UpstreamConfig {
            url: Some("http://127.0.0.1:9".parse().unwrap()),
            ..UpstreamConfig::default()
        })
        .unwrap();
        let metrics = Metrics::new(&Config::default());
        (Authorizer::new(up, server, metrics.authz()), metrics)
    }

    /// The lookups of `review`'s cache counted as `result`.
    fn counted(metrics: &Metrics, review: Review, result: Lookup) -> u64 {
        let series = format!(
            "watchmux_authz_cache_requests_total{{result=\"{}\",review=\"{}\"}} ",
            result.as_str(),
            review.as_str()
        );
        metrics
            .render()
            .lines()
            .find_map(|l| l.strip_prefix(series.as_str())?.parse().ok())
            .unwrap_or_else(|| panic!("no {series}"))
    }

    /// A kubelet's watch of one ConfigMap by name: the access key of a 5,000-node fleet.
    fn kubelet_watch(i: usize) -> (UserInfo, Attributes) {
        let node = i / 30;
        let user = UserInfo {
            user: format!(
                "system:node:ip-10-0-{}-{}.eu-west-1.compute.internal",
                node / 250,
                node % 250
            ),
            groups: vec!["system:nodes".into(), AUTHENTICATED.into()],
            uid: String::new(),
        };
        let attrs = Attributes {
            verb: "watch".into(),
            version: "v1".into(),
            resource: "configmaps".into(),
            namespace: format!("team-{}", i % 300),
            name: format!("app-config-{i:06}"),
            ..Attributes::default()
        };
        (user, attrs)
    }

    /// Concurrent lookups of a key that is not cached make one review and share it; the later
    /// lookup hits. The first lookup's review is held until every lookup has started (a
    /// current-thread runtime: a task that counted itself in ran on to where it waits).
    #[tokio::test(flavor = "current_thread")]
    async fn concurrent_lookups_of_one_key_share_one_review() {
        const N: usize = 20;
        let (authz, metrics) = authorizer(&ServerConfig::default());
        let authz = Arc::new(authz);
        let (user, attrs) = kubelet_watch(1);
        let reviews = Arc::new(AtomicUsize::new(0));
        let arrived = Arc::new(AtomicUsize::new(0));
        let (release, held) = tokio::sync::watch::channel(false);
        let mut lookups = Vec::new();
        for _ in 0..N {
            let (authz, reviews, arrived) = (authz.clone(), reviews.clone(), arrived.clone());
            let key = AccessKey::new(&user, &attrs);
            let mut held = held.clone();
            lookups.push(tokio::spawn(async move {
                arrived.fetch_add(1, Ordering::Relaxed);
                let review = async {
                    reviews.fetch_add(1, Ordering::Relaxed);
                    let _ = held.wait_for(|go| *go).await;
                    Ok(Decision {
                        allowed: true,
                        reason: None,
                    })
                };
                authz
                    .lookup(&authz.decisions, Review::Access, key, review)
                    .await
                    .map(|d| d.allowed)
            }));
        }
        while arrived.load(Ordering::Relaxed) < N {
            tokio::task::yield_now().await;
        }
        release.send_replace(true);
        for l in lookups {
            assert!(l.await.unwrap().unwrap(), "allowed");
        }
        assert_eq!(
            reviews.load(Ordering::Relaxed),
            1,
            "one review for {N} lookups"
        );
        let count = |r| counted(&metrics, Review::Access, r);
        assert_eq!(
            (
                count(Lookup::Miss),
                count(Lookup::Shared),
                count(Lookup::Hit)
            ),
            (1, N as u64 - 1, 0)
        );
        // Cached now: a hit, no review.
        let key = AccessKey::new(&user, &attrs);
        let review = async { unreachable!("a cached key is not reviewed") };
        let d = authz
            .lookup(&authz.decisions, Review::Access, key, review)
            .await
            .unwrap();
        assert!(d.allowed);
        assert_eq!(count(Lookup::Hit), 1);
        assert_eq!(counted(&metrics, Review::Token, Lookup::Miss), 0);
    }

    /// A review that fails is shared by the lookups waiting for it, and not cached: the next
    /// lookup reviews again.
    #[tokio::test(flavor = "current_thread")]
    async fn a_failed_review_is_shared_and_not_cached() {
        let (authz, metrics) = authorizer(&ServerConfig::default());
        let (user, attrs) = kubelet_watch(2);
        let key = || AccessKey::new(&user, &attrs);
        let (release, held) = tokio::sync::watch::channel(false);
        let failing = || {
            let mut held = held.clone();
            async move {
                let _ = held.wait_for(|go| *go).await;
                Err::<Decision, _>(ReviewError::Body("the upstream hung up".into()))
            }
        };
        // One task: both lookups run to where they wait before the review is let go.
        let (a, b, ()) = tokio::join!(
            authz.lookup(&authz.decisions, Review::Access, key(), failing()),
            authz.lookup(&authz.decisions, Review::Access, key(), failing()),
            async {
                tokio::task::yield_now().await;
                release.send_replace(true);
            }
        );
        assert!(a.is_err() && b.is_err());
        let count = |r| counted(&metrics, Review::Access, r);
        assert_eq!((count(Lookup::Miss), count(Lookup::Shared)), (1, 1));
        let denied = async {
            Ok(Decision {
                allowed: false,
                reason: Some("no".into()),
            })
        };
        let d = authz
            .lookup(&authz.decisions, Review::Access, key(), denied)
            .await
            .unwrap();
        assert!(!d.allowed);
        assert_eq!(count(Lookup::Miss), 2, "the failure was not cached");
    }

    #[test]
    fn access_keys_tell_every_field_apart() {
        let (u, a) = kubelet_watch(3);
        let base = AccessKey::new(&u, &a);
        assert_eq!(base, AccessKey::new(&u.clone(), &a.clone()));
        // Moving a byte from one field to the next makes another key.
        let mut other = a.clone();
        other.namespace = format!("{}{}", a.namespace, &a.name[..1]);
        other.name = a.name[1..].to_string();
        assert_ne!(AccessKey::new(&u, &other), base);
        let mut groups = u.clone();
        groups.groups = vec![format!("{}{}", u.groups[0], u.groups[1])];
        assert_ne!(AccessKey::new(&groups, &a), base);
        let mut verb = a.clone();
        verb.verb = "list".into();
        assert_ne!(AccessKey::new(&u, &verb), base);
        assert_eq!(base.0.len(), 166, "a kubelet's per-object watch");
    }

    /// What an entry costs, as config.toml and the module doc say: a fleet's worth of kubelet
    /// per-object access keys, and as many token keys naming a kubelet, inserted into the
    /// authorizer's own caches (with their expiry), counted by the allocator on this thread.
    #[test]
    fn entries_stay_small() {
        const N: usize = 50_000;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let (authz, _) = authorizer(&ServerConfig::default());
        let fleet: Vec<(UserInfo, Attributes)> = (0..N).map(kubelet_watch).collect();
        let keys: Vec<AccessKey> = fleet.iter().map(|(u, a)| AccessKey::new(u, a)).collect();
        let access = allocation_counter::measure(|| {
            rt.block_on(async {
                for k in &keys {
                    let d = Decision {
                        allowed: true,
                        reason: None,
                    };
                    authz.decisions.insert(k.clone(), d).await;
                }
                authz.decisions.run_pending_tasks().await;
            })
        });
        let tokens = allocation_counter::measure(|| {
            rt.block_on(async {
                for (i, (u, _)) in fleet.iter().enumerate() {
                    let tag = ring::hmac::sign(&authz.token_hmac, format!("token-{i}").as_bytes());
                    let key: TokenKey = tag.as_ref().try_into().unwrap();
                    authz.tokens.insert(key, Some(u.clone())).await;
                }
                authz.tokens.run_pending_tasks().await;
            })
        });
        assert_eq!(authz.decisions.entry_count(), N as u64);
        assert_eq!(authz.tokens.entry_count(), N as u64);
        for (what, held, most) in [("access", access, 512), ("token", tokens, 512)] {
            let per_entry = held.bytes_current / N as i64;
            eprintln!(
                "{what}: {per_entry} bytes and {} allocations per entry",
                held.count_current / N as i64
            );
            assert!(per_entry <= most, "{what}: {per_entry} bytes per entry");
        }
    }
}
