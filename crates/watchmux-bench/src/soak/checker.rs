//! The soak's checker: one [`Tracker`] per watcher follows what an informer would build from
//! its LISTs and watch events (its view: key → resourceVersion and uid) and flags every way the
//! stream could have lied to it: a resourceVersion seen twice or going backwards (per watch
//! connection and across resumes, since the order is checked over the watcher's whole life),
//! events that do not fit the view (ADDED of an object it has, MODIFIED or DELETED of one it
//! does not, a uid that changed under the same key), bookmarks and consistent LISTs older than
//! what was already seen, malformed events. [`Tracker::diff`] compares the view at the end
//! with the simulator's state: an event lost anywhere shows up there.
//!
//! Pure bookkeeping: no I/O, no clocks. It decides nothing about retries (the watcher does).

use std::collections::{BTreeMap, HashMap};

use super::events::ObjEvent;

/// What a view holds for one object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Obj {
    /// Its resourceVersion.
    pub rv: u64,
    /// Its uid (identity: a deleted and re-created object has a new one).
    pub uid: String,
}

/// An informer's view: `namespace/name` → object.
pub type State = HashMap<String, Obj>;

/// A kind of violation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// An event whose resourceVersion equals the last event's: delivered twice.
    Duplicate,
    /// An event whose resourceVersion is below what the watcher already had.
    OutOfOrder,
    /// ADDED for an object the view already holds.
    AddedPresent,
    /// MODIFIED for an object the view does not hold.
    ModifiedAbsent,
    /// DELETED for an object the view does not hold.
    DeletedAbsent,
    /// MODIFIED or DELETED carrying another uid than the view's object.
    IdentityChanged,
    /// A BOOKMARK below what the watcher already had.
    BookmarkBackwards,
    /// A consistent LIST (or a watch-list's snapshot) older than what the watcher already had.
    StaleList,
    /// A watch-list's initial events were not one ADDED per object.
    InitialEvents,
    /// An event that does not decode (a malformed event reached the client).
    Undecodable,
    /// The final view differs from the simulator's state.
    Divergence,
}

impl Kind {
    /// Name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Duplicate => "duplicate resourceVersion",
            Kind::OutOfOrder => "resourceVersion out of order",
            Kind::AddedPresent => "ADDED of an object the view has",
            Kind::ModifiedAbsent => "MODIFIED of an object the view lacks",
            Kind::DeletedAbsent => "DELETED of an object the view lacks",
            Kind::IdentityChanged => "uid changed under the same key",
            Kind::BookmarkBackwards => "BOOKMARK went backwards",
            Kind::StaleList => "consistent LIST older than seen",
            Kind::InitialEvents => "bad watch-list initial events",
            Kind::Undecodable => "undecodable event",
            Kind::Divergence => "final view differs from the simulator",
        }
    }
}

/// One violation, with what showed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// Which rule.
    pub kind: Kind,
    /// The evidence.
    pub detail: String,
}

/// Violations kept with their evidence per watcher and kind (all are counted).
const KEEP: usize = 3;

/// One watcher's view and the checks on what built it.
#[derive(Debug, Default)]
pub struct Tracker {
    state: State,
    /// A watch-list's initial events, until its `initial-events-end` bookmark.
    initial: Option<State>,
    /// Everything up to here is known: the last event, bookmark or LIST.
    last_rv: u64,
    /// The last event's resourceVersion (to tell a duplicate from a reordering).
    last_event_rv: u64,
    synced: bool,
    kept: Vec<Violation>,
    counts: BTreeMap<Kind, u64>,
}

impl Tracker {
    fn flag(&mut self, kind: Kind, detail: String) {
        let n = self.counts.entry(kind).or_default();
        *n += 1;
        if *n <= KEEP as u64 {
            self.kept.push(Violation { kind, detail });
        }
    }

    /// A consistent LIST answered `items` at `rv`: the view restarts from it.
    pub fn listed(&mut self, rv: u64, items: impl IntoIterator<Item = (String, Obj)>) {
        if rv < self.last_rv {
            self.flag(
                Kind::StaleList,
                format!("LIST at {rv} after {} was seen", self.last_rv),
            );
        }
        self.state = items.into_iter().collect();
        self.initial = None;
        self.last_rv = rv;
        self.synced = true;
    }

    /// A watch-list (`sendInitialEvents=true`) started: its ADDED events build a new view.
    pub fn watch_list_started(&mut self) {
        self.initial = Some(State::new());
        self.synced = false;
    }

    /// A watch stream ended: a watch-list cut before its end bookmark must start over.
    pub fn interrupted(&mut self) {
        if self.initial.take().is_some() {
            self.synced = false;
        }
    }

    /// One object event.
    pub fn event(&mut self, ty: ObjEvent, key: String, obj: Obj) {
        if let Some(initial) = &mut self.initial {
            let bad = match ty {
                ObjEvent::Added if initial.contains_key(&key) => Some("twice"),
                ObjEvent::Added => None,
                _ => Some("not ADDED"),
            };
            initial.insert(key.clone(), obj.clone());
            if let Some(why) = bad {
                self.flag(
                    Kind::InitialEvents,
                    format!("{} {key} at {}: {why}", ty.name(), obj.rv),
                );
            }
            return;
        }
        if obj.rv <= self.last_rv {
            let kind = if obj.rv == self.last_event_rv {
                Kind::Duplicate
            } else {
                Kind::OutOfOrder
            };
            self.flag(
                kind,
                format!(
                    "{} {key} at {} after {} (last event {})",
                    ty.name(),
                    obj.rv,
                    self.last_rv,
                    self.last_event_rv
                ),
            );
            return;
        }
        self.last_rv = obj.rv;
        self.last_event_rv = obj.rv;
        let detail = |had: Option<&Obj>| {
            format!(
                "{} {key} at {} (uid {}); view had {had:?}",
                ty.name(),
                obj.rv,
                obj.uid
            )
        };
        match ty {
            ObjEvent::Added => {
                if let Some(had) = self.state.get(&key) {
                    let d = detail(Some(had));
                    self.flag(Kind::AddedPresent, d);
                }
                self.state.insert(key, obj);
            }
            ObjEvent::Modified | ObjEvent::Deleted => {
                match self.state.get(&key) {
                    None => {
                        let kind = if ty == ObjEvent::Modified {
                            Kind::ModifiedAbsent
                        } else {
                            Kind::DeletedAbsent
                        };
                        let d = detail(None);
                        self.flag(kind, d);
                    }
                    Some(had) if had.uid != obj.uid => {
                        let d = detail(Some(had));
                        self.flag(Kind::IdentityChanged, d);
                    }
                    Some(_) => {}
                }
                if ty == ObjEvent::Modified {
                    self.state.insert(key, obj);
                } else {
                    self.state.remove(&key);
                }
            }
        }
    }

    /// A BOOKMARK at `rv`; `initial_end` ends a watch-list's initial events.
    pub fn bookmark(&mut self, rv: u64, initial_end: bool) {
        if let Some(initial) = self.initial.take() {
            if !initial_end {
                // Only the end marker counts while initial events flow.
                self.initial = Some(initial);
                return;
            }
            if rv < self.last_rv {
                self.flag(
                    Kind::StaleList,
                    format!(
                        "watch-list snapshot at {rv} after {} was seen",
                        self.last_rv
                    ),
                );
            }
            self.state = initial;
            self.last_rv = rv;
            self.synced = true;
            return;
        }
        if rv < self.last_rv {
            self.flag(
                Kind::BookmarkBackwards,
                format!("BOOKMARK at {rv} after {}", self.last_rv),
            );
            return;
        }
        self.last_rv = rv;
    }

    /// An event that did not decode.
    pub fn undecodable(&mut self, why: String) {
        self.flag(Kind::Undecodable, why);
    }

    /// The final view differs from the simulator's (see [`Tracker::diff`]).
    pub fn diverged(&mut self, diff: Vec<String>) {
        self.flag(Kind::Divergence, diff.join("; "));
    }

    /// Where a watch resumes: the last resourceVersion known, once the view is synced.
    pub fn resume_point(&self) -> Option<u64> {
        self.synced.then_some(self.last_rv)
    }

    /// The last resourceVersion known (event, bookmark or LIST).
    pub fn last_rv(&self) -> u64 {
        self.last_rv
    }

    /// Whether the view is synced (a LIST or a complete watch-list).
    pub fn synced(&self) -> bool {
        self.synced
    }

    /// How many objects the view holds.
    pub fn len(&self) -> usize {
        self.state.len()
    }

    /// Whether the view is empty.
    pub fn is_empty(&self) -> bool {
        self.state.is_empty()
    }

    /// Up to `max` differences between the view and `expected` (empty: equal, and synced).
    pub fn diff(&self, expected: &State, max: usize) -> Vec<String> {
        let mut out = Vec::new();
        if !self.synced {
            out.push("not synced".to_string());
        }
        let mut keys: Vec<&String> = expected.keys().chain(self.state.keys()).collect();
        keys.sort();
        keys.dedup();
        for k in keys {
            if out.len() >= max {
                break;
            }
            match (self.state.get(k), expected.get(k)) {
                (Some(a), Some(b)) if a == b => {}
                (Some(a), Some(b)) => out.push(format!(
                    "{k}: view rv {} uid {}, simulator rv {} uid {}",
                    a.rv, a.uid, b.rv, b.uid
                )),
                (None, Some(b)) => out.push(format!("{k}: missing (simulator rv {})", b.rv)),
                (Some(a), None) => out.push(format!("{k}: extra (view rv {})", a.rv)),
                (None, None) => {}
            }
        }
        out
    }

    /// Violations by kind.
    pub fn counts(&self) -> &BTreeMap<Kind, u64> {
        &self.counts
    }

    /// The first violations, with their evidence.
    pub fn kept(&self) -> &[Violation] {
        &self.kept
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn o(rv: u64, uid: &str) -> Obj {
        Obj {
            rv,
            uid: uid.into(),
        }
    }

    /// The simulator's history in these tests: a at 11, b at 12, a modified at 13, b deleted
    /// at 14, c at 15.
    fn history() -> Vec<(ObjEvent, &'static str, Obj)> {
        vec![
            (ObjEvent::Added, "n/a", o(11, "ua")),
            (ObjEvent::Added, "n/b", o(12, "ub")),
            (ObjEvent::Modified, "n/a", o(13, "ua")),
            (ObjEvent::Deleted, "n/b", o(14, "ub")),
            (ObjEvent::Added, "n/c", o(15, "uc")),
        ]
    }

    fn expected() -> State {
        [
            ("n/a".to_string(), o(13, "ua")),
            ("n/c".into(), o(15, "uc")),
        ]
        .into()
    }

    fn replay(events: &[(ObjEvent, &'static str, Obj)]) -> Tracker {
        let mut t = Tracker::default();
        t.listed(10, []);
        for (ty, k, obj) in events {
            t.event(*ty, k.to_string(), obj.clone());
        }
        t
    }

    #[test]
    fn a_faithful_stream_passes() {
        let t = replay(&history());
        assert!(t.counts().is_empty(), "{:?}", t.kept());
        assert!(t.diff(&expected(), 10).is_empty());
        assert_eq!(t.resume_point(), Some(15));
    }

    #[test]
    fn a_dropped_event_is_caught() {
        // The MODIFIED of a is lost: the view ends with a's older version.
        let mut h = history();
        h.remove(2);
        let t = replay(&h);
        assert!(t.counts().is_empty(), "nothing looks wrong on the way");
        let d = t.diff(&expected(), 10);
        assert_eq!(d, ["n/a: view rv 11 uid ua, simulator rv 13 uid ua"]);
        // The ADDED of b is lost: its DELETED shows it at once, and nothing is left over.
        let mut h = history();
        h.remove(1);
        let t = replay(&h);
        assert_eq!(t.counts().get(&Kind::DeletedAbsent), Some(&1));
        assert!(t.diff(&expected(), 10).is_empty());
        // The DELETED of b is lost: b stays in the view.
        let mut h = history();
        h.remove(3);
        let t = replay(&h);
        assert_eq!(
            t.diff(&expected(), 10),
            ["n/b: extra (view rv 12)".to_string()]
        );
    }

    #[test]
    fn duplicates_and_reordering_are_caught() {
        let mut h = history();
        h.insert(3, h[2].clone());
        let t = replay(&h);
        assert_eq!(t.counts().get(&Kind::Duplicate), Some(&1));
        assert!(t.diff(&expected(), 10).is_empty());

        let mut h = history();
        h.swap(2, 3);
        let t = replay(&h);
        assert_eq!(t.counts().get(&Kind::OutOfOrder), Some(&1));
        assert!(!t.diff(&expected(), 10).is_empty());
    }

    #[test]
    fn resumes_are_checked_across_connections() {
        // First connection up to 12, a bookmark at 12; the resumed watch replays 12.
        let mut t = Tracker::default();
        t.listed(10, []);
        let h = history();
        for (ty, k, obj) in &h[..2] {
            t.event(*ty, k.to_string(), obj.clone());
        }
        t.bookmark(12, false);
        t.interrupted();
        assert_eq!(t.resume_point(), Some(12));
        t.event(h[1].0, h[1].1.into(), h[1].2.clone());
        assert_eq!(t.counts().get(&Kind::Duplicate), Some(&1));
        for (ty, k, obj) in &h[2..] {
            t.event(*ty, k.to_string(), obj.clone());
        }
        assert!(t.diff(&expected(), 10).is_empty());
        // A bookmark or a consistent LIST older than what was seen is flagged.
        t.bookmark(14, false);
        t.listed(14, expected());
        assert_eq!(t.counts().get(&Kind::BookmarkBackwards), Some(&1));
        assert_eq!(t.counts().get(&Kind::StaleList), Some(&1));
    }

    #[test]
    fn event_shapes_that_do_not_fit_the_view_are_caught() {
        let mut t = Tracker::default();
        t.listed(10, [("n/a".to_string(), o(5, "ua"))]);
        t.event(ObjEvent::Added, "n/a".into(), o(11, "ua"));
        t.event(ObjEvent::Modified, "n/z".into(), o(12, "uz"));
        t.event(ObjEvent::Modified, "n/a".into(), o(13, "other"));
        let c = t.counts();
        assert_eq!(c.get(&Kind::AddedPresent), Some(&1));
        assert_eq!(c.get(&Kind::ModifiedAbsent), Some(&1));
        assert_eq!(c.get(&Kind::IdentityChanged), Some(&1));
        assert_eq!(t.kept().len(), 3);
    }

    #[test]
    fn watch_lists_build_their_view_from_initial_events() {
        let mut t = Tracker::default();
        t.watch_list_started();
        assert_eq!(t.resume_point(), None);
        // Initial events come in any resourceVersion order.
        t.event(ObjEvent::Added, "n/c".into(), o(15, "uc"));
        t.event(ObjEvent::Added, "n/a".into(), o(13, "ua"));
        t.bookmark(14, false);
        assert!(!t.synced());
        t.bookmark(16, true);
        assert!(t.counts().is_empty());
        assert!(t.diff(&expected(), 10).is_empty());
        assert_eq!(t.resume_point(), Some(16));
        // One cut before its end starts over; a repeated key is flagged.
        t.watch_list_started();
        t.event(ObjEvent::Added, "n/a".into(), o(13, "ua"));
        t.interrupted();
        assert_eq!(t.resume_point(), None);
        t.watch_list_started();
        t.event(ObjEvent::Added, "n/a".into(), o(13, "ua"));
        t.event(ObjEvent::Added, "n/a".into(), o(13, "ua"));
        t.bookmark(15, true);
        assert_eq!(t.counts().get(&Kind::InitialEvents), Some(&1));
        assert_eq!(t.counts().get(&Kind::StaleList), Some(&1));
    }
}
