//! From which state of the cache a read is served: kube-apiserver's resourceVersion rules for
//! LIST and GET (spec §1.5) mapped to a [`ReadPoint`], and why a read that the cache cannot
//! answer goes to the upstream ([`PassReason`]).
//!
//! Owns the mapping only. It must not wait for the cache, check freshness or build answers: the
//! router resolves a point to a snapshot (waiting, or asking the freshness check), and the
//! handlers answer from it.

use kube_wire::continue_token::ContinueToken;
use kube_wire::options::{ListOptions, RvMatch};
use kube_wire::status::Status;

/// The state of the cache a read must be served from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadPoint {
    /// `resourceVersion=0`: whatever the cache holds ("Any"); a LIST ignores `limit`.
    Any,
    /// `resourceVersion=N` (not older than): any state at or after N.
    NotOlderThan(u64),
    /// No resourceVersion ("Most Recent"): a state that holds every write the upstream
    /// acknowledged before the request arrived (linearizable).
    Consistent,
    /// `resourceVersionMatch=Exact`, or the legacy `resourceVersion=N` with `limit`: the state at
    /// exactly N.
    Exact(u64),
    /// A `continue` token: the rest of the list it was cut from.
    Continue(ContinueToken),
}

impl ReadPoint {
    /// The point a LIST with these (validated) options reads (spec §1.5, L1–L12).
    pub fn for_list(opts: &ListOptions) -> Result<ReadPoint, Status> {
        if let Some(token) = opts.continuation()? {
            return Ok(ReadPoint::Continue(token));
        }
        Ok(match (opts.rv()?, opts.rv_match()) {
            (None, _) => ReadPoint::Consistent,
            (Some(0), _) if opts.rv_is_literal_zero() => ReadPoint::Any,
            // A resourceVersion like "00" parses to 0 but is not kube's "0": an exact read (or a
            // legacy one, with a limit) at revision 0 is no revision at all, and kube's storage
            // then lists the latest state; otherwise it is "any".
            (Some(0), Some(RvMatch::Exact)) => ReadPoint::Consistent,
            (Some(0), None) if opts.limit > 0 => ReadPoint::Consistent,
            (Some(0), _) => ReadPoint::Any,
            (Some(n), Some(RvMatch::Exact)) => ReadPoint::Exact(n),
            (Some(n), Some(RvMatch::NotOlderThan)) => ReadPoint::NotOlderThan(n),
            (Some(n), None) if opts.limit > 0 => ReadPoint::Exact(n),
            (Some(n), None) => ReadPoint::NotOlderThan(n),
        })
    }

    /// The point a GET of one object reads: no resourceVersion is a consistent read, `0` any
    /// state, `N` not older than N (kube's GET has no Exact). A resourceVersion kube's watch
    /// cache cannot parse is its 500 ([`ListOptions::cacher_rv`]).
    pub fn for_get(opts: &ListOptions) -> Result<ReadPoint, Status> {
        Ok(match opts.cacher_rv()? {
            None => ReadPoint::Consistent,
            Some(0) => ReadPoint::Any,
            Some(n) => ReadPoint::NotOlderThan(n),
        })
    }

    /// The point a watch's initial events are taken at: after watch-list defaulting,
    /// `sendInitialEvents=true` with no resourceVersion is a consistent start (kube 1.34+, W2).
    pub fn for_watch_list(opts: &ListOptions) -> Result<ReadPoint, Status> {
        Ok(match opts.cacher_rv()? {
            None => ReadPoint::Consistent,
            Some(0) => ReadPoint::Any,
            Some(n) => ReadPoint::NotOlderThan(n),
        })
    }
}

/// Why a read the cache might have answered went to the upstream (the `reason` label of
/// `watchmux_reads_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PassReason {
    /// Not a read of a cached resource (writes, uncached kinds, subresources, discovery).
    NotCached,
    /// A representation the cache does not produce (e.g. protobuf only).
    Representation,
    /// A consistent read whose freshness could not be proven within kube's 3 s.
    NotFresh,
    /// The cache did not reach the requested resourceVersion within kube's 3 s.
    ResourceVersionAhead,
    /// An exact resourceVersion or a continue token outside what the cache keeps.
    OutsideWindow,
    /// The cache has not synced yet, and the read is one kube's cacher hands to the storage
    /// meanwhile (a GET, a LIST with a `limit` and no selector), or of an on-demand kind whose
    /// reflector the upstream refuses.
    NotReady,
    /// A watch of an on-demand kind from a resourceVersion before its cache began (from a LIST
    /// the upstream answered while the cache was starting): only the upstream knows what
    /// happened since.
    BeforeCache,
    /// A GET with no resourceVersion: kube-apiserver never answers one from its watch cache
    /// (its cacher hands it to etcd, `CacheDelegator.Get`), so the upstream does, in one
    /// request, rather than a freshness check that can cost two and wait for a bookmark.
    ConsistentGet,
}

impl PassReason {
    /// The metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            PassReason::NotCached => "not_cached",
            PassReason::Representation => "representation",
            PassReason::NotFresh => "not_fresh",
            PassReason::ResourceVersionAhead => "resource_version_ahead",
            PassReason::OutsideWindow => "outside_window",
            PassReason::NotReady => "not_ready",
            PassReason::BeforeCache => "before_cache",
            PassReason::ConsistentGet => "consistent_get",
        }
    }

    /// Every label value (so the metric's series exist from the start).
    pub const ALL: [PassReason; 8] = [
        PassReason::NotCached,
        PassReason::Representation,
        PassReason::NotFresh,
        PassReason::ResourceVersionAhead,
        PassReason::OutsideWindow,
        PassReason::NotReady,
        PassReason::BeforeCache,
        PassReason::ConsistentGet,
    ];
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(q: &str) -> ReadPoint {
        ReadPoint::for_list(&ListOptions::from_query(Some(q)).unwrap()).unwrap()
    }

    #[test]
    fn list_points_follow_the_matrix() {
        assert_eq!(list(""), ReadPoint::Consistent);
        assert_eq!(list("limit=500"), ReadPoint::Consistent);
        assert_eq!(list("resourceVersion=0"), ReadPoint::Any);
        assert_eq!(list("resourceVersion=0&limit=5"), ReadPoint::Any);
        // "00" is 0 to kube's versioner, but not its "0".
        assert_eq!(list("resourceVersion=00"), ReadPoint::Any);
        assert_eq!(list("resourceVersion=00&limit=5"), ReadPoint::Consistent);
        assert_eq!(
            list("resourceVersion=00&resourceVersionMatch=Exact"),
            ReadPoint::Consistent
        );
        assert_eq!(
            list("resourceVersion=00&resourceVersionMatch=NotOlderThan&limit=5"),
            ReadPoint::Any
        );
        assert_eq!(list("resourceVersion=7"), ReadPoint::NotOlderThan(7));
        assert_eq!(
            list("resourceVersion=7&resourceVersionMatch=NotOlderThan&limit=5"),
            ReadPoint::NotOlderThan(7)
        );
        assert_eq!(list("resourceVersion=7&limit=5"), ReadPoint::Exact(7));
        assert_eq!(
            list("resourceVersion=7&resourceVersionMatch=Exact"),
            ReadPoint::Exact(7)
        );
        let t = ContinueToken::after(9, "a/b").encode();
        assert!(
            matches!(list(&format!("continue={t}")), ReadPoint::Continue(c) if c == ContinueToken::after(9, "a/b"))
        );
    }

    #[test]
    fn a_malformed_continue_token_is_kubes_400() {
        let e = ReadPoint::for_list(&ListOptions::from_query(Some("continue=%%%")).unwrap())
            .unwrap_err();
        assert_eq!(e.code, 400);
    }
}
