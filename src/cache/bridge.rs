//! Relist without a herd: when the reflector must relist (its watch RV expired, or after a long
//! outage), the difference between the cached state at `old_rv` and the fresh list at `list_rv`
//! is turned into ordinary watch events that every watcher receives and that enter the history,
//! so downstream clients keep their watches instead of all relisting at once (kube-apiserver
//! closes every watcher at that point).
//!
//! ## The resourceVersion rules
//!
//! Every bridge event gets a resourceVersion in `(old_rv, list_rv]`, all distinct, delivered in
//! increasing order, so every watcher's RVs keep strictly increasing. The states in between are
//! a summary, not the upstream's: a watch from inside the range gets 410
//! (`EventLog::bridged_gap` says why a bridge event's own RV is no exception). So that a
//! watcher's client, whose last event is the bridge's (below `list_rv` as a rule: other
//! resources move the revision), does not resume from inside the range, every watcher that asked
//! for bookmarks is sent one at `list_rv` right after the bridge (`WatcherShared::want_bookmark`).
//!
//! * ADDED and MODIFIED carry the listed object with **its own** resourceVersion (the revision
//!   of its last write, which lies in `(old_rv, list_rv]` for anything that changed meanwhile).
//! * DELETED carries the last cached state of the object, stamped with a resourceVersion the
//!   upstream did not give us: the deletion's real revision is unknown. We choose the smallest
//!   revisions in `(old_rv, list_rv]` that no listed object carries. Every real deletion consumed
//!   a distinct revision in that range that no surviving object carries, so there are always
//!   enough; and when a name was deleted and created again (different uid), its DELETED must come
//!   before the new ADDED, which the real deletion's revision (free, below the new object's)
//!   guarantees is possible. Assignment is earliest-deadline-first, which finds a valid
//!   assignment whenever one exists.
//!
//! ## When it falls back
//!
//! Where these rules cannot hold, the plan fails and the cache does what kube-apiserver does:
//! close every watcher and restart the history at the new list's RV. That happens when the list
//! is older than the cache (`list_rv < old_rv`, e.g. a lagging upstream replica), when a listed
//! object that changed carries an RV outside `(old_rv, list_rv]`, or when there are not enough
//! free revisions for the deletions (an upstream whose RVs are not etcd revisions).
//!
//! ## A repair
//!
//! After a consistency check found the cache unlike the upstream (`crate::reflector::
//! consistency`), the relist repairs it ([`plan_repair`]): an event was lost, so the listed
//! object it wrote carries a revision at or below `old_rv`, which no watcher past it may be
//! sent (its resourceVersions would go back), and which must not be restamped either (a client
//! would hold a version of the object the upstream never had, and its updates from it would be
//! refused with 409 Conflict for as long as the object does not change). Such a change is
//! *silent*: the store takes it without an event, and the watchers it concerns are closed with
//! 410, so that their clients relist (from the repaired cache, not the upstream). Every other
//! difference is bridged as above; a deletion finds no free revision only where the upstream's
//! revision has not moved since the cache's, and is then silent too. A repair never falls back.
//!
//! Owns the plan only: it reads the cached objects and the list and returns the events. It must
//! not apply them (the cache writer does, as ordinary appends that the hub dispatches).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use kube_wire::event::EventType;

use super::record::Cached;

/// What a relist did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The first sync.
    Initial,
    /// The difference was delivered as this many events.
    Bridged {
        /// Number of bridge events.
        events: usize,
    },
    /// A repair after a failed consistency check ([`plan_repair`]).
    Repaired {
        /// Number of bridge events.
        events: usize,
        /// Changes made without an event.
        silent: usize,
        /// Watchers those concerned, closed.
        closed: usize,
    },
    /// Every watcher was closed and the history restarted (kube-apiserver's behaviour).
    Reset {
        /// Why bridging was not safe.
        why: String,
    },
}

/// One bridge event: type, object (with the event's RV), previous cached state.
pub type BridgeEvent = (EventType, Arc<Cached>, Option<Arc<Cached>>);

/// Plans the bridge events from the cached objects at `old_rv` to `items` listed at `list_rv`,
/// in increasing resourceVersion order; `Err` says why it is not safe. Every object of an event
/// is a new version made by `keep` (the cache's writer charges it to the memory budget).
pub fn plan(
    old: &imbl::OrdMap<Arc<str>, Arc<Cached>>,
    old_rv: u64,
    items: &[Cached],
    list_rv: u64,
    keep: impl Fn(Cached) -> Cached,
) -> Result<Vec<BridgeEvent>, String> {
    planned(old, old_rv, items, list_rv, keep, false).map(|p| p.events)
}

/// A change the repair of a lost event makes without an event (see the module doc): the
/// listed object (`None`: deleted) and the cached one it replaces (`None`: missing).
pub type SilentChange = (Option<Arc<Cached>>, Option<Arc<Cached>>);

/// What a repair does: the bridge events, in increasing resourceVersion order, and the silent
/// changes.
#[derive(Debug, Default)]
pub struct Repair {
    /// Bridged as after any relist.
    pub events: Vec<BridgeEvent>,
    /// Taken by the store without an event; their watchers are closed.
    pub silent: Vec<SilentChange>,
}

/// Plans the repair of the cached objects at `old_rv` by `items` listed at `list_rv` (see the
/// module doc); `Err` only when the list is older than the cache.
pub fn plan_repair(
    old: &imbl::OrdMap<Arc<str>, Arc<Cached>>,
    old_rv: u64,
    items: &[Cached],
    list_rv: u64,
    keep: impl Fn(Cached) -> Cached,
) -> Result<Repair, String> {
    planned(old, old_rv, items, list_rv, keep, true)
}

/// [`plan`] and [`plan_repair`]: with `repair`, what cannot be bridged is silent instead of an
/// error.
fn planned(
    old: &imbl::OrdMap<Arc<str>, Arc<Cached>>,
    old_rv: u64,
    items: &[Cached],
    list_rv: u64,
    keep: impl Fn(Cached) -> Cached,
    repair: bool,
) -> Result<Repair, String> {
    if list_rv < old_rv {
        return Err(format!(
            "the new list (RV {list_rv}) is older than the cache (RV {old_rv})"
        ));
    }
    let mut events: Vec<BridgeEvent> = Vec::new();
    let mut silent: Vec<SilentChange> = Vec::new();
    // Deletions to place: (latest allowed RV exclusive, previous object).
    let mut deletions: Vec<(u64, Arc<Cached>)> = Vec::new();
    let mut used: HashSet<u64> = HashSet::new();
    let mut listed: HashMap<String, ()> = HashMap::with_capacity(items.len());
    for item in items {
        let key = item.rec.key();
        let prev = old.get(key.as_str()).cloned();
        let rv = item.rec.rv;
        listed.insert(key, ());
        if repair
            && rv <= old_rv
            && prev
                .as_ref()
                .is_none_or(|p| p.rec.rv != rv || !p.same_object(item))
        {
            // The upstream wrote it at or before the cache's resourceVersion: an event lost.
            silent.push((Some(Arc::new(keep(item.clone()))), prev));
            continue;
        }
        let changed = match &prev {
            None => Some((EventType::Added, None)),
            Some(p) if p.rec.uid != item.rec.uid && !p.rec.uid.is_empty() => {
                // Deleted and created again: DELETED (below the new object's RV), then ADDED.
                deletions.push((rv, p.clone()));
                Some((EventType::Added, None))
            }
            Some(p) if p.rec.rv != rv || !p.same_object(item) => {
                Some((EventType::Modified, Some(p.clone())))
            }
            Some(_) => None,
        };
        if let Some((ty, prev)) = changed {
            if rv <= old_rv || rv > list_rv {
                return Err(format!(
                    "object {:?} changed but its RV {rv} is outside ({old_rv}, {list_rv}]",
                    item.rec.key()
                ));
            }
            if !used.insert(rv) {
                return Err(format!("two listed objects share RV {rv}"));
            }
            events.push((ty, Arc::new(keep(item.clone())), prev));
        }
    }
    for (key, p) in old.iter() {
        if !listed.contains_key(key.as_ref()) {
            deletions.push((list_rv.saturating_add(1), p.clone()));
        }
    }
    // Earliest deadline first: each deletion takes the smallest free RV above old_rv.
    deletions.sort_by_key(|(bound, p)| (*bound, p.rec.key()));
    let mut next = old_rv + 1;
    for (bound, p) in deletions {
        while used.contains(&next) {
            next += 1;
        }
        if next >= bound || next > list_rv {
            if repair {
                silent.push((None, Some(p)));
                continue;
            }
            return Err(format!(
                "no free resourceVersion below {bound} for the deletion of {:?}",
                p.rec.key()
            ));
        }
        used.insert(next);
        let stamped = p.restamped(next);
        events.push((EventType::Deleted, Arc::new(keep(stamped)), Some(p)));
        next += 1;
    }
    events.sort_by_key(|(_, o, _)| o.rec.rv);
    Ok(Repair { events, silent })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::record::ObjectRecord;
    use bytes::Bytes;

    fn obj(name: &str, uid: &str, rv: u64, data: &str) -> Cached {
        Cached::new(
            Bytes::from(format!(
                "{{\"metadata\":{{\"name\":\"{name}\",\"namespace\":\"d\",\"uid\":\"{uid}\",\"resourceVersion\":\"{rv}\"}},\"data\":\"{data}\"}}"
            )),
            ObjectRecord {
                namespace: "d".into(),
                name: name.into(),
                uid: uid.into(),
                rv,
                ..Default::default()
            },
        )
    }

    fn map(objs: &[Cached]) -> imbl::OrdMap<Arc<str>, Arc<Cached>> {
        objs.iter()
            .map(|o| (Arc::from(o.rec.key()), Arc::new(o.clone())))
            .collect()
    }

    /// The cached objects the tests start from: a, b, c at 5, 6, 7.
    fn abc() -> imbl::OrdMap<Arc<str>, Arc<Cached>> {
        map(&[
            obj("a", "ua", 5, "1"),
            obj("b", "ub", 6, "1"),
            obj("c", "uc", 7, "1"),
        ])
    }

    /// Each event's type, object name and resourceVersion.
    fn summary(events: &[BridgeEvent]) -> Vec<(EventType, String, u64)> {
        events
            .iter()
            .map(|(t, o, _)| (*t, o.rec.name.clone(), o.rec.rv))
            .collect()
    }

    /// A repair (after events were lost at or before the cache's resourceVersion 10): what a
    /// watcher past 10 may be sent is bridged; the rest is silent, never an error.
    #[test]
    fn a_repair_bridges_what_it_can_and_the_rest_is_silent() {
        let old = abc();
        // Lost: b's MODIFIED at 8, d's ADDED at 9, c's DELETED; seen by nobody: e at 12.
        let new = [
            obj("a", "ua", 5, "1"),
            obj("b", "ub", 8, "2"),
            obj("d", "ud", 9, "1"),
            obj("e", "ue", 12, "1"),
        ];
        assert!(plan(&old, 10, &new, 15, |c| c).is_err(), "a relist refuses");
        let r = plan_repair(&old, 10, &new, 15, |c| c).unwrap();
        let got = summary(&r.events);
        assert_eq!(
            got,
            vec![
                (EventType::Deleted, "c".into(), 11),
                (EventType::Added, "e".into(), 12),
            ]
        );
        type Seen = (Option<(String, u64)>, Option<u64>);
        let silent: Vec<Seen> = r
            .silent
            .iter()
            .map(|(n, p)| {
                (
                    n.as_ref().map(|o| (o.rec.name.clone(), o.rec.rv)),
                    p.as_ref().map(|o| o.rec.rv),
                )
            })
            .collect();
        assert_eq!(
            silent,
            vec![
                (Some(("b".into(), 8)), Some(6)),
                (Some(("d".into(), 9)), None)
            ]
        );
        // Nothing free above 10 (the upstream's revision has not moved): the deletion is silent.
        let r = plan_repair(
            &old,
            10,
            &[obj("a", "ua", 5, "1"), obj("b", "ub", 6, "1")],
            10,
            |c| c,
        )
        .unwrap();
        assert!(r.events.is_empty());
        assert_eq!(r.silent.len(), 1);
        assert!(r.silent[0].0.is_none());
        assert_eq!(r.silent[0].1.as_ref().map(|o| o.rec.rv), Some(7));
        assert!(
            plan_repair(&old, 10, &[], 9, |c| c).is_err(),
            "a list older than the cache"
        );
    }

    #[test]
    fn bridges_adds_modifies_deletes_in_rv_order() {
        let old = abc();
        // During the outage (old RV 10): b modified at 13, c deleted (at 11, unknown to us),
        // d created at 12, a unchanged; list at 15.
        let new = [
            obj("a", "ua", 5, "1"),
            obj("b", "ub", 13, "2"),
            obj("d", "ud", 12, "1"),
        ];
        let ev = plan(&old, 10, &new, 15, |c| c).unwrap();
        let got = summary(&ev);
        assert_eq!(
            got,
            vec![
                (EventType::Deleted, "c".into(), 11),
                (EventType::Added, "d".into(), 12),
                (EventType::Modified, "b".into(), 13),
            ]
        );
        let deleted = &ev[0].1;
        assert!(
            std::str::from_utf8(&deleted.json())
                .unwrap()
                .contains("\"resourceVersion\":\"11\"")
        );
        assert_eq!(
            ev[2].2.as_ref().unwrap().rec.rv,
            6,
            "MODIFIED keeps the previous state for move-out"
        );
    }

    #[test]
    fn recreated_name_is_deleted_before_it_is_added() {
        let old = map(&[obj("a", "u1", 5, "x")]);
        // a deleted at 11, re-created at 12 with a new uid; z created at 13.
        let new = [obj("a", "u2", 12, "y"), obj("z", "uz", 13, "y")];
        let ev = plan(&old, 10, &new, 13, |c| c).unwrap();
        let got: Vec<(EventType, String, u64)> = ev
            .iter()
            .map(|(t, o, _)| (*t, o.rec.uid.clone(), o.rec.rv))
            .collect();
        assert_eq!(
            got,
            vec![
                (EventType::Deleted, "u1".into(), 11),
                (EventType::Added, "u2".into(), 12),
                (EventType::Added, "uz".into(), 13)
            ]
        );
    }

    #[test]
    fn unsafe_cases_fall_back() {
        let old = map(&[obj("a", "u1", 5, "x"), obj("b", "u2", 6, "x")]);
        assert!(
            plan(&old, 10, &[], 9, |c| c).is_err(),
            "list older than the cache"
        );
        assert!(
            plan(&old, 10, &[obj("a", "u1", 8, "y")], 12, |c| c).is_err(),
            "changed object with an old RV"
        );
        // Two deletions but only one free revision: not etcd-like.
        assert!(plan(&old, 10, &[obj("c", "u3", 11, "x")], 12, |c| c).is_err());
        assert_eq!(
            plan(
                &old,
                10,
                &[obj("a", "u1", 5, "x"), obj("b", "u2", 6, "x")],
                10,
                |c| c
            )
            .unwrap()
            .len(),
            0
        );
    }
}
