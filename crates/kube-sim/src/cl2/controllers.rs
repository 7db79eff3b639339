//! The controllers that keep the CL2 shape's objects in step with its pods, as
//! kube-controller-manager's would: the endpointslice controller (each Service's EndpointSlices
//! list the pods it selects that have an IP, with their readiness; at most
//! [`MAX_ENDPOINTS_PER_SLICE`] per slice) and the replica-set and deployment controllers' status
//! (counts, `observedGeneration`, conditions).
//!
//! One task follows the pods' event log in the store, whoever wrote them (churn, a test, a
//! kubectl user), and after each batch of events writes what changed through [`Ops`], so
//! watchers see ordinary events. It only knows the Services and Deployments the shape loaded
//! ([`Model`], handed over by the loader): pods of other Deployments or Services are not
//! followed. If it falls behind the event log it lists the pods again.
//!
//! Not reproduced: the endpointslice controller's packing and batching heuristics (a new
//! endpoint goes to the first slice with room, an empty slice is deleted unless it is the
//! Service's only one), topology hints, the v1 Endpoints objects of the endpoints controller.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use serde_json::Value;

use super::objects::{self, Endpoint, PodCounts, ServiceRef};
use super::{Cl2Spec, MAX_ENDPOINTS_PER_SLICE, NAME_LABEL, SERVICE_LABEL};
use crate::SimState;
use crate::fleet;
use crate::kinds::ResourceType;
use crate::ops::Ops;
use crate::semantics::DeleteOptions;
use crate::store::{Event, EventType, StoredObject};
use crate::util::now_unix;

/// What the controllers know of a pod.
#[derive(Debug, Clone, PartialEq, Eq)]
struct PodInfo {
    uid: String,
    /// `status.podIP`, when it has one and is not finished (an endpoint).
    ip: Option<String>,
    node: String,
    /// Its `Ready` condition is `True`.
    ready: bool,
    /// It has a `deletionTimestamp`.
    terminating: bool,
    /// `ns/deployment` of a known Deployment selecting it.
    set: Option<String>,
    /// `ns/service` of a known Service selecting it.
    service: Option<String>,
}

impl PodInfo {
    fn endpoint(&self, name: &str) -> Option<Endpoint> {
        Some(Endpoint {
            ip: self.ip.clone()?,
            ready: self.ready && !self.terminating,
            serving: self.ready,
            terminating: self.terminating,
            node: self.node.clone(),
            pod: name.to_string(),
            uid: self.uid.clone(),
        })
    }
}

/// A ReplicaSet and its Deployment.
#[derive(Debug, Default)]
struct SetInfo {
    /// Pod names.
    pods: BTreeSet<String>,
    /// What was last written (the loader wrote the status of this many ready pods).
    written: Option<PodCounts>,
    dirty: bool,
}

#[derive(Debug)]
struct SliceInfo {
    name: String,
    /// Pod names, in the order they were added.
    pods: Vec<String>,
    /// Stored already.
    stored: bool,
    dirty: bool,
}

#[derive(Debug)]
struct ServiceInfo {
    service: ServiceRef,
    slices: Vec<SliceInfo>,
    /// Slices made so far (for their names).
    made: u64,
}

/// The controllers' view of the shape: its Deployments and Services and the pods they select.
#[derive(Debug)]
pub struct Model {
    spec: Cl2Spec,
    /// By `ns/name`.
    pods: HashMap<String, PodInfo>,
    /// By `ns/deployment`.
    sets: HashMap<String, SetInfo>,
    /// By `ns/service`.
    services: HashMap<String, ServiceInfo>,
}

fn key(ns: &str, name: &str) -> String {
    format!("{ns}/{name}")
}

fn split(key: &str) -> (&str, &str) {
    key.split_once('/').unwrap_or(("", key))
}

impl Model {
    /// A model without Deployments or Services.
    pub(crate) fn new(spec: &Cl2Spec) -> Model {
        Model {
            spec: *spec,
            pods: HashMap::new(),
            sets: HashMap::new(),
            services: HashMap::new(),
        }
    }

    /// Registers a loaded Deployment whose status the loader wrote for `replicas` ready pods.
    pub(crate) fn add_deployment(&mut self, ns: &str, name: &str, replicas: usize) {
        self.sets.insert(
            key(ns, name),
            SetInfo {
                written: Some(PodCounts {
                    replicas,
                    ready: replicas,
                }),
                ..SetInfo::default()
            },
        );
    }

    /// Registers a loaded Service; its pods are added after it.
    pub(crate) fn add_service(&mut self, service: ServiceRef) {
        self.services.insert(
            key(&service.namespace, &service.name),
            ServiceInfo {
                service,
                slices: Vec::new(),
                made: 0,
            },
        );
    }

    /// Adds a loaded pod (in its slice, without marking anything to write).
    pub(crate) fn add_pod(&mut self, pod: &Value) {
        let (ns, name) = (
            pod["metadata"]["namespace"].as_str().unwrap_or_default(),
            pod["metadata"]["name"].as_str().unwrap_or_default(),
        );
        let info = self.pod_info(ns, pod);
        self.upsert(&key(ns, name), info);
    }

    /// Marks the loaded ReplicaSets and Deployments as written (the loader wrote their status).
    pub(crate) fn loaded(&mut self) {
        for set in self.sets.values_mut() {
            set.dirty = false;
        }
    }

    /// The EndpointSlices of the loaded Services of namespace `ns` (their pods added already),
    /// created at `created` and last changed at `now`, as the controller would have written
    /// them.
    pub(crate) fn loaded_slices(&mut self, ns: &str, created: i64, now: i64) -> Vec<Value> {
        let mut keys: Vec<String> = self
            .services
            .keys()
            .filter(|k| split(k).0 == ns)
            .cloned()
            .collect();
        keys.sort();
        let mut out = Vec::new();
        for k in keys {
            if self.services[&k].slices.is_empty() {
                self.place_slice(&k);
            }
            let svc = &self.services[&k];
            for s in &svc.slices {
                let mut obj = self.slice_object(svc, s, now);
                let uid = self.spec.uid("EndpointSlice", ns, &s.name);
                objects::stamp(&mut obj, uid, created);
                out.push(obj);
            }
            for s in &mut self.services.get_mut(&k).expect("service").slices {
                s.stored = true;
                s.dirty = false;
            }
        }
        out
    }

    fn pod_info(&self, ns: &str, pod: &Value) -> PodInfo {
        let labels = &pod["metadata"]["labels"];
        let known = |label: &str, map_has: &dyn Fn(&str) -> bool| {
            labels[label]
                .as_str()
                .map(|v| key(ns, v))
                .filter(|k| map_has(k))
        };
        let finished = matches!(
            pod["status"]["phase"].as_str(),
            Some("Succeeded" | "Failed")
        );
        let ready = pod["status"]["conditions"].as_array().is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        });
        PodInfo {
            uid: pod["metadata"]["uid"].as_str().unwrap_or_default().into(),
            ip: pod["status"]["podIP"]
                .as_str()
                .filter(|ip| !ip.is_empty() && !finished)
                .map(str::to_string),
            node: pod["spec"]["nodeName"].as_str().unwrap_or_default().into(),
            ready,
            terminating: pod["metadata"]["deletionTimestamp"].is_string(),
            set: known(NAME_LABEL, &|k| self.sets.contains_key(k)),
            service: known(SERVICE_LABEL, &|k| self.services.contains_key(k)),
        }
    }

    /// Replaces what is known of pod `k` (`None`: it is gone), marking the sets and slices it
    /// changes.
    fn upsert(&mut self, k: &str, info: PodInfo) {
        if info.set.is_none() && info.service.is_none() && !self.pods.contains_key(k) {
            // Neither ours now nor before.
            return;
        }
        let old = self.pods.remove(k);
        self.apply(k, old, Some(info));
    }

    fn remove(&mut self, k: &str) {
        let old = self.pods.remove(k);
        self.apply(k, old, None);
    }

    fn apply(&mut self, k: &str, old: Option<PodInfo>, new: Option<PodInfo>) {
        if old == new {
            if let Some(n) = new {
                self.pods.insert(k.to_string(), n);
            }
            return;
        }
        let name = split(k).1.to_string();
        let old_set = old.as_ref().and_then(|o| o.set.clone());
        let new_set = new.as_ref().and_then(|n| n.set.clone());
        if let Some(s) = old_set.as_ref().and_then(|s| self.sets.get_mut(s)) {
            s.pods.remove(&name);
            s.dirty = true;
        }
        if let Some(s) = new_set.as_ref().and_then(|s| self.sets.get_mut(s)) {
            s.pods.insert(name.clone());
            s.dirty = true;
        }
        let old_svc = old.as_ref().and_then(|o| o.service.clone());
        let new_svc = new
            .as_ref()
            .filter(|n| n.ip.is_some())
            .and_then(|n| n.service.clone());
        if let Some(svc) = old_svc.as_ref().and_then(|s| self.services.get_mut(s)) {
            for slice in &mut svc.slices {
                if let Some(i) = slice.pods.iter().position(|p| *p == name) {
                    if new_svc.as_ref() == old_svc.as_ref() {
                        // Still an endpoint of the same Service: changed in place.
                        slice.dirty = true;
                    } else {
                        slice.pods.remove(i);
                        slice.dirty = true;
                    }
                }
            }
        }
        if let Some(n) = new {
            self.pods.insert(k.to_string(), n);
        }
        if let Some(svc_key) = new_svc {
            let present = self.services[&svc_key]
                .slices
                .iter()
                .any(|s| s.pods.contains(&name));
            if !present {
                let i = self.place_slice(&svc_key);
                let slice = &mut self.services.get_mut(&svc_key).expect("service").slices[i];
                slice.pods.push(name);
                slice.dirty = true;
            }
        }
    }

    /// The slice of a Service a new endpoint goes to: the first with room, or a new one.
    fn place_slice(&mut self, svc_key: &str) -> usize {
        let spec = self.spec;
        let svc = self.services.get_mut(svc_key).expect("service");
        if let Some(i) = svc
            .slices
            .iter()
            .position(|s| s.pods.len() < MAX_ENDPOINTS_PER_SLICE)
        {
            return i;
        }
        let seed = spec.seed.to_string();
        let made = svc.made.to_string();
        let suffix = fleet::alphabet_string(
            fleet::fnv(&[&seed, &svc.service.namespace, &svc.service.name, &made]),
            5,
        );
        svc.made += 1;
        svc.slices.push(SliceInfo {
            name: format!("{}-{suffix}", svc.service.name),
            pods: Vec::new(),
            stored: false,
            dirty: true,
        });
        svc.slices.len() - 1
    }

    fn slice_object(&self, svc: &ServiceInfo, slice: &SliceInfo, now: i64) -> Value {
        let ns = &svc.service.namespace;
        let endpoints: Vec<Endpoint> = slice
            .pods
            .iter()
            .filter_map(|p| self.pods.get(&key(ns, p))?.endpoint(p))
            .collect();
        objects::endpoint_slice(
            ns,
            &svc.service.name,
            &svc.service.uid,
            &slice.name,
            &endpoints,
            now,
        )
    }

    fn counts(&self, set_key: &str) -> PodCounts {
        let ns = split(set_key).0;
        let mut c = PodCounts::default();
        for p in &self.sets[set_key].pods {
            if let Some(info) = self.pods.get(&key(ns, p)).filter(|i| !i.terminating) {
                c.replicas += 1;
                c.ready += usize::from(info.ready);
            }
        }
        c
    }

    /// Applies one pod event.
    fn on_event(&mut self, rt: &ResourceType, ev: &Event) {
        if ev.ty == EventType::Deleted {
            self.remove(&ev.key);
            return;
        }
        self.on_object(rt, &ev.key, &ev.obj);
    }

    fn on_object(&mut self, rt: &ResourceType, k: &str, obj: &StoredObject) {
        let ns = split(k).0.to_string();
        let value = obj.to_value(rt);
        let info = self.pod_info(&ns, &value);
        self.upsert(k, info);
    }

    /// Lists the pods again (after falling behind the event log) and applies the
    /// differences; returns the revision listed at.
    fn resync(&mut self, state: &SimState, pods: &ResourceType) -> u64 {
        let Ok(page) = state
            .store
            .list(pods, None, None, None, 0, &|_| true, false)
        else {
            return state.store.revision();
        };
        let mut seen = BTreeSet::new();
        for obj in &page.items {
            let k = key(&obj.namespace, &obj.name);
            self.on_object(pods, &k, obj);
            seen.insert(k);
        }
        let gone: Vec<String> = self
            .pods
            .keys()
            .filter(|k| !seen.contains(*k))
            .cloned()
            .collect();
        for k in gone {
            self.remove(&k);
        }
        page.rev
    }

    /// Writes what changed: slices, ReplicaSet and Deployment status.
    fn flush(&mut self, state: &SimState) {
        let now = now_unix();
        let reg = &state.registry;
        let (Some(slices), Some(rs), Some(deploy)) = (
            reg.get("discovery.k8s.io", "v1", "endpointslices"),
            reg.get("apps", "v1", "replicasets"),
            reg.get("apps", "v1", "deployments"),
        ) else {
            return;
        };
        let svc_keys: Vec<String> = self
            .services
            .iter()
            .filter(|(_, s)| s.slices.iter().any(|x| x.dirty))
            .map(|(k, _)| k.clone())
            .collect();
        for k in svc_keys {
            self.flush_service(&state.ops, &slices, &k, now);
        }
        let set_keys: Vec<String> = self
            .sets
            .iter()
            .filter(|(_, s)| s.dirty)
            .map(|(k, _)| k.clone())
            .collect();
        for k in set_keys {
            let counts = self.counts(&k);
            let set = self.sets.get_mut(&k).expect("set");
            set.dirty = false;
            if set.written == Some(counts) {
                continue;
            }
            set.written = Some(counts);
            write_status(&state.ops, &rs, &deploy, &k, counts, now);
        }
    }

    fn flush_service(&mut self, ops: &Ops, rt: &Arc<ResourceType>, k: &str, now: i64) {
        let ns = split(k).0.to_string();
        let mut svc = self.services.remove(k).expect("service");
        let mut keep = Vec::with_capacity(svc.slices.len());
        let only = svc.slices.len() == 1;
        for mut slice in std::mem::take(&mut svc.slices) {
            if !slice.dirty {
                keep.push(slice);
                continue;
            }
            slice.dirty = false;
            if slice.pods.is_empty() && !only {
                if slice.stored {
                    let _ = ops.delete(rt, Some(&ns), &slice.name, &DeleteOptions::default());
                }
                continue;
            }
            let mut obj = self.slice_object(&svc, &slice, now);
            fleet::stamp_write_time(&mut obj, crate::util::now_unix_nanos());
            let written = if slice.stored {
                ops.modify(rt, Some(&ns), &slice.name, |v| {
                    v["endpoints"] = obj["endpoints"].take();
                    v["metadata"]["annotations"] = obj["metadata"]["annotations"].take();
                })
            } else {
                ops.create(rt, Some(&ns), obj, false)
            };
            slice.stored = written.is_ok();
            keep.push(slice);
        }
        svc.slices = keep;
        self.services.insert(k.to_string(), svc);
    }
}

/// Writes a ReplicaSet's and its Deployment's status for `counts`.
fn write_status(
    ops: &Ops,
    rs: &ResourceType,
    deploy: &ResourceType,
    set_key: &str,
    counts: PodCounts,
    now: i64,
) {
    let (ns, name) = split(set_key);
    let rs_name = super::replica_set_name(name);
    let _ = ops.modify(rs, Some(ns), &rs_name, |v| {
        let generation = v["metadata"]["generation"].as_i64().unwrap_or(1);
        v["status"] = objects::replica_set_status(counts, generation);
    });
    let _ = ops.modify(deploy, Some(ns), name, |v| {
        let generation = v["metadata"]["generation"].as_i64().unwrap_or(1);
        let desired = v["spec"]["replicas"].as_u64().unwrap_or(1) as usize;
        let status =
            objects::deployment_status(desired, counts, generation, &rs_name, v.get("status"), now);
        v["status"] = status;
    });
}

/// Starts the controllers on `model`; they stop with the simulator.
pub(crate) fn spawn(state: &Arc<SimState>, model: Model) {
    let st = state.clone();
    state.tasks.spawn(run(st, model));
}

async fn run(state: Arc<SimState>, mut model: Model) {
    let pods = state.registry.core("pods").clone();
    let mut changed = state.store.subscribe(&pods);
    let mut cursor = state.store.revision();
    loop {
        changed.borrow_and_update();
        loop {
            match state.store.events_after(&pods, cursor, 1024) {
                Ok(batch) => {
                    for ev in &batch.events {
                        model.on_event(&pods, ev);
                        cursor = ev.rev;
                    }
                    model.flush(&state);
                    if let Some(rev) = batch.caught_up_to {
                        cursor = cursor.max(rev);
                        break;
                    }
                }
                Err(_) => {
                    cursor = model.resync(&state, &pods);
                    model.flush(&state);
                }
            }
        }
        tokio::select! {
            _ = state.cancel.cancelled() => return,
            r = changed.changed() => if r.is_err() { return },
        }
    }
}
