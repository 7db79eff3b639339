//! Property tests of the watch cache's relist bridge: after a random history with an outage,
//! every resume point a client could hold outside the bridged range replays to exactly the
//! upstream's state, with strictly increasing resourceVersions inside (old cache RV, new list RV],
//! for unfiltered and filtered watchers alike; one strictly inside the range gets 410.

use std::collections::BTreeMap;
use std::sync::Arc;

use kube_wire::event::EventType;
use kube_wire::selector::Filter;
use proptest::prelude::*;
use watchmux::cache::record::decode_object;
use watchmux::cache::{CacheSettings, Cached, ResourceCache, ResourceInfo, bridge::Outcome};

#[derive(Debug, Clone)]
enum Op {
    /// Create or update key k with label value v.
    Put(u8, u8),
    /// Delete key k (if present).
    Delete(u8),
    /// Other resources' writes advance the global revision.
    Skip(u8),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (0..6u8, 0..3u8).prop_map(|(k, v)| Op::Put(k, v)),
        2 => (0..6u8).prop_map(Op::Delete),
        1 => (1..4u8).prop_map(Op::Skip),
    ]
}

fn info() -> ResourceInfo {
    ResourceInfo::new("", "v1", "configmaps", "ConfigMap", true)
}

/// The upstream: one global revision, objects by key (uid, rv, label value).
#[derive(Default, Clone)]
struct Upstream {
    rev: u64,
    objects: BTreeMap<String, (String, u64, u8)>,
    uids: u64,
}

fn object(key: &str, uid: &str, rv: u64, v: u8) -> Cached {
    let json = format!(
        r#"{{"metadata":{{"name":"{key}","namespace":"ns","uid":"{uid}","resourceVersion":"{rv}","labels":{{"tier":"t{v}"}}}},"data":{{"v":"{v}"}}}}"#
    );
    decode_object(&info(), json.as_bytes()).unwrap()
}

impl Upstream {
    /// Applies `op`; returns the event it produced.
    fn apply(&mut self, op: &Op) -> Option<(EventType, Cached)> {
        match *op {
            Op::Skip(n) => {
                self.rev += n as u64;
                None
            }
            Op::Put(k, v) => {
                self.rev += 1;
                let key = format!("k{k}");
                let (ty, uid) = match self.objects.get(&key) {
                    Some((uid, _, _)) => (EventType::Modified, uid.clone()),
                    None => {
                        self.uids += 1;
                        (EventType::Added, format!("u{}", self.uids))
                    }
                };
                self.objects.insert(key.clone(), (uid.clone(), self.rev, v));
                Some((ty, object(&key, &uid, self.rev, v)))
            }
            Op::Delete(k) => {
                let key = format!("k{k}");
                let (uid, _, v) = self.objects.remove(&key)?;
                self.rev += 1;
                Some((EventType::Deleted, object(&key, &uid, self.rev, v)))
            }
        }
    }

    fn list(&self) -> Vec<Cached> {
        self.objects
            .iter()
            .map(|(k, (uid, rv, v))| object(k, uid, *rv, *v))
            .collect()
    }
}

/// name → (uid, rv) folded from events.
type View = BTreeMap<String, (String, u64)>;

fn fold(mut view: View, events: &[(EventType, String, String, u64)]) -> View {
    for (ty, name, uid, rv) in events {
        match ty {
            EventType::Deleted => {
                view.remove(name);
            }
            _ => {
                view.insert(name.clone(), (uid.clone(), *rv));
            }
        }
    }
    view
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn every_resume_point_converges_after_a_bridged_relist(
        before in proptest::collection::vec(op(), 0..20),
        live in proptest::collection::vec(op(), 0..20),
        outage in proptest::collection::vec(op(), 0..30),
        gap in 0..5u64,
        selector in 0..4u8,
    ) {
        let mut up = Upstream { rev: 1, ..Default::default() };
        for o in &before {
            up.apply(o);
        }
        let (cache, writer) = ResourceCache::new(info(), CacheSettings::default());
        let initial_rv = up.rev;
        let initial = up.list();
        prop_assert_eq!(writer.replace(initial.clone(), initial_rv), Outcome::Initial);
        for o in &live {
            if let Some((ty, obj)) = up.apply(o) {
                prop_assert!(writer.apply(ty, obj));
            }
        }
        let old_rv = cache.rv();
        for o in &outage {
            up.apply(o);
        }
        up.rev += gap;
        let list_rv = up.rev;
        let outcome = writer.replace(up.list(), list_rv);
        prop_assert!(matches!(outcome, Outcome::Bridged { .. }), "{:?}", outcome);
        prop_assert_eq!(cache.rv(), list_rv);

        // The whole log, in order.
        let log = cache.events_after(initial_rv, usize::MAX).unwrap();
        prop_assert!(log.at_head);
        let mut last = initial_rv;
        for e in &log.events {
            prop_assert!(e.rv > last, "RVs strictly increase: {} after {}", e.rv, last);
            last = e.rv;
            prop_assert_eq!(e.obj.rec.rv, e.rv, "the object carries the event's RV");
            if e.rv > old_rv {
                prop_assert!(e.rv <= list_rv, "bridge RV {} outside ({}, {}]", e.rv, old_rv, list_rv);
            }
        }

        // A filtered or unfiltered watcher, resumed from any RV it could have been sent.
        let label = match selector { 0 => String::new(), n => format!("tier=t{}", n - 1) };
        let filter = Filter::parse("", "ConfigMap", true, &[], None, &label, "").unwrap();
        let matches = |c: &Cached| filter.matches(&c.rec.namespace, &c.rec.labels, |f| c.rec.field(f));
        let view0: View = initial.iter().filter(|c| matches(c)).map(|c| (c.rec.name.clone(), (c.rec.uid.clone(), c.rec.rv))).collect();
        let emitted: Vec<(u64, (EventType, String, String, u64))> = log
            .events
            .iter()
            .filter_map(|e| {
                let ty = e.emitted_for(&filter)?;
                let obj = if ty == EventType::Deleted && e.ty == EventType::Modified { e.prev.clone().unwrap() } else { e.obj.clone() };
                Some((e.rv, (ty, obj.rec.name.clone(), obj.rec.uid.clone(), e.rv)))
            })
            .collect();
        let want: View = up
            .list()
            .iter()
            .filter(|c| matches(c))
            .map(|c| (c.rec.name.clone(), (c.rec.uid.clone(), c.rec.rv)))
            .collect();
        // Strictly inside the bridged relist, a resume point is refused with 410 (the list's RV in
        // the message): the bridge events' own RVs are also real revisions a client may have read
        // upstream, where the state is not the bridge's summary.
        let resume_points: Vec<u64> = [initial_rv, old_rv].into_iter().chain(emitted.iter().map(|(rv, _)| *rv)).collect();
        for r in resume_points {
            if old_rv < r && r < list_rv {
                prop_assert_eq!(cache.check_watch_start(r), Err(list_rv), "resume from {} inside ({}, {})", r, old_rv, list_rv);
                continue;
            }
            let seen: Vec<_> = emitted.iter().filter(|(rv, _)| *rv <= r).map(|(_, e)| e.clone()).collect();
            let state_at_r = fold(view0.clone(), &seen);
            prop_assert!(cache.check_watch_start(r).is_ok());
            let replay = cache.events_after(r, usize::MAX).unwrap();
            let rest: Vec<_> = replay
                .events
                .iter()
                .filter_map(|e| {
                    let ty = e.emitted_for(&filter)?;
                    let obj = if ty == EventType::Deleted && e.ty == EventType::Modified { e.prev.clone().unwrap() } else { e.obj.clone() };
                    Some((ty, obj.rec.name.clone(), obj.rec.uid.clone(), e.rv))
                })
                .collect();
            let mut end = fold(state_at_r, &rest);
            // Objects carry their own RVs; a filtered MODIFIED keeps the newest.
            for (name, (_, rv)) in end.iter_mut() {
                if let Some((_, want_rv)) = want.get(name) {
                    prop_assert_eq!(*rv, *want_rv, "rv of {} after resuming from {}", name, r);
                }
            }
            prop_assert_eq!(&end, &want, "resume from {} (selector {:?})", r, label);
        }
        let cached: View = cache.snapshot().objects.values().map(|c| (c.rec.name.clone(), (c.rec.uid.clone(), c.rec.rv))).collect();
        let all: View = up.list().iter().map(|c| (c.rec.name.clone(), (c.rec.uid.clone(), c.rec.rv))).collect();
        prop_assert_eq!(cached, all);
        let _ = Arc::strong_count(&cache);
    }
}
