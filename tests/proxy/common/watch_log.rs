//! What a watch client saw, checked against kube's guarantees, and what the simulator says it
//! should have seen: the lines of a stream ([`Seen`]), the state they lead to ([`fold`]), and
//! the simulator's state and history of a resource for one scope of watcher ([`sim_state`],
//! [`sim_events`]). Shared by the resilience and the tier tests.

use std::collections::BTreeMap;

use kube_sim::Simulator;
use kube_sim::kinds::ResourceType;
use kube_sim::store::{EventType as SimEventType, StoredObject};
use serde_json::Value;

/// One line of a watch stream: type, `ns/name` (empty for bookmarks), RV, uid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    pub ty: String,
    pub key: String,
    pub rv: u64,
    pub uid: String,
}

impl Seen {
    pub fn parse(line: &[u8]) -> Seen {
        let v: Value = serde_json::from_slice(line)
            .unwrap_or_else(|e| panic!("bad line ({e}): {}", String::from_utf8_lossy(line)));
        let m = &v["object"]["metadata"];
        let s = |k: &str| m[k].as_str().unwrap_or_default().to_string();
        let ty = v["type"].as_str().unwrap_or_default().to_string();
        Seen {
            // An ERROR's key is its Status code.
            key: match ty.as_str() {
                "BOOKMARK" => String::new(),
                "ERROR" => v["object"]["code"].to_string(),
                _ => format!("{}/{}", s("namespace"), s("name")),
            },
            rv: s("resourceVersion").parse().unwrap_or(0),
            uid: s("uid"),
            ty,
        }
    }

    /// One frame of a protobuf watch, decoded with `k8s-pb` (independently of watchmux's
    /// transcoder): the same fields as [`Seen::parse`] reads from JSON.
    pub fn parse_protobuf(frame: &[u8]) -> Seen {
        use k8s_pb::api::core::v1::Pod;
        use k8s_pb::apimachinery::pkg::apis::meta::v1::WatchEvent;
        use k8s_pb::apimachinery::pkg::runtime::Unknown;
        use prost::Message as _;
        let e = WatchEvent::decode(frame).expect("WatchEvent");
        let ty = e.r#type.unwrap_or_default();
        let raw = e.object.and_then(|o| o.raw).unwrap_or_default();
        let u = Unknown::decode(raw.get(4..).unwrap_or_default()).expect("runtime.Unknown");
        if ty == "ERROR" {
            let status = k8s_pb::apimachinery::pkg::apis::meta::v1::Status::decode(
                u.raw.as_deref().unwrap_or_default(),
            )
            .expect("Status");
            return Seen {
                ty,
                key: status.code.unwrap_or_default().to_string(),
                rv: 0,
                uid: String::new(),
            };
        }
        let pod = Pod::decode(u.raw.as_deref().unwrap_or_default()).expect("Pod");
        let m = pod.metadata.unwrap_or_default();
        let s = |v: Option<String>| v.unwrap_or_default();
        Seen {
            key: if ty == "BOOKMARK" {
                String::new()
            } else {
                format!("{}/{}", s(m.namespace), s(m.name))
            },
            rv: s(m.resource_version).parse().unwrap_or(0),
            uid: s(m.uid),
            ty,
        }
    }

    pub fn is_event(&self) -> bool {
        self.ty != "BOOKMARK"
    }
}

/// `ns/name` → (rv, uid).
pub type State = BTreeMap<String, (u64, String)>;

/// Applies `seen` to `state`, checking kube's guarantees: event RVs strictly increase above
/// `after`, and a bookmark never goes below the last RV sent (kube's cacher repeats it in its
/// periodic and pre-deadline bookmarks); no ERROR; ADDED only for absent keys, MODIFIED/DELETED
/// only for present ones with the same uid (a duplicate or a gap breaks one of these).
pub fn fold(mut state: State, after: u64, seen: &[Seen]) -> Result<State, String> {
    let mut last = after;
    for (i, e) in seen.iter().enumerate() {
        if e.ty == "ERROR" {
            return Err(format!("line {i}: an ERROR (code {})", e.key));
        }
        let bookmark = e.ty == "BOOKMARK";
        if e.rv < last || (e.rv == last && !bookmark) {
            let context = &seen[i.saturating_sub(4)..(i + 3).min(seen.len())];
            let earlier: Vec<usize> = (0..i).filter(|&j| seen[j].rv == e.rv).collect();
            return Err(format!(
                "line {i} {e:?}: RV not above the previous {last}; lines {}.. {context:?}; \
                 earlier lines with this RV: {earlier:?}",
                i.saturating_sub(4)
            ));
        }
        last = e.rv;
        match e.ty.as_str() {
            "BOOKMARK" => {}
            "ADDED" => {
                if let Some(old) = state.insert(e.key.clone(), (e.rv, e.uid.clone())) {
                    return Err(format!(
                        "line {i} {e:?}: ADDED but already present as {old:?}"
                    ));
                }
            }
            "MODIFIED" | "DELETED" => match state.get(&e.key) {
                Some((_, uid)) if *uid == e.uid => {
                    if e.ty == "DELETED" {
                        state.remove(&e.key);
                    } else {
                        state.insert(e.key.clone(), (e.rv, e.uid.clone()));
                    }
                }
                other => return Err(format!("line {i} {e:?}: but the state held {other:?}")),
            },
            _ => return Err(format!("line {i}: unexpected {e:?}")),
        }
    }
    Ok(state)
}

/// The simulator's objects of `rt` that `matches` selects, now or at revision `at` (inside its
/// history).
pub fn sim_state(
    sim: &Simulator,
    rt: &ResourceType,
    at: Option<u64>,
    matches: &dyn Fn(&StoredObject) -> bool,
) -> State {
    sim.store()
        .list(rt, None, at, None, 0, matches, false)
        .unwrap_or_else(|e| panic!("{} at {at:?}: {e:?}", rt.resource))
        .items
        .iter()
        .map(|o| (format!("{}/{}", o.namespace, o.name), (o.rv, o.uid.clone())))
        .collect()
}

/// The events a watcher of the objects `matches` selects must get for the simulator's history of
/// `rt` in `(after, until]` (move-in and move-out as ADDED and DELETED).
pub fn sim_events(
    sim: &Simulator,
    rt: &ResourceType,
    after: u64,
    until: u64,
    matches: &dyn Fn(&StoredObject) -> bool,
) -> Vec<Seen> {
    let batch = sim
        .store()
        .events_after(rt, after, usize::MAX)
        .unwrap_or_else(|e| {
            panic!(
                "{} history after {after} is gone (evicted {e})",
                rt.resource
            )
        });
    let mut out = Vec::new();
    for ev in batch.events.iter().filter(|e| e.rev <= until) {
        let now = matches(&ev.obj);
        let before = ev.prev.as_ref().is_some_and(|p| matches(p));
        let ty = match ev.ty {
            SimEventType::Added if now => "ADDED",
            SimEventType::Modified if now && before => "MODIFIED",
            SimEventType::Modified if now => "ADDED",
            SimEventType::Modified if before => "DELETED",
            SimEventType::Deleted if now => "DELETED",
            _ => continue,
        };
        out.push(Seen {
            ty: ty.to_string(),
            key: ev.key.clone(),
            rv: ev.rev,
            uid: ev.obj.uid.clone(),
        });
    }
    out
}
