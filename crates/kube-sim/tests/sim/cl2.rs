//! The CL2 shape (`kube-sim --shape cl2`): its counts follow the load test's formula, its pods
//! name ConfigMaps and Secrets that exist and owners that resolve, its EndpointSlices and
//! workload status follow the pods through churn, and a seed makes the same cluster.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use kube_sim::Simulator;
use kube_sim::churn::{ChurnMix, ChurnSpec};
use kube_sim::cl2::{Cl2Spec, MAX_ENDPOINTS_PER_SLICE, SizeClass};
use kube_sim::kinds::ResourceType;
use serde_json::Value;

async fn cl2_sim(nodes: usize, seed: u64) -> Simulator {
    kube_sim::testkit::sim_with(|c| c.cl2 = Some(Cl2Spec { nodes, seed })).await
}

fn rt(sim: &Simulator, group: &str, resource: &str) -> Arc<ResourceType> {
    sim.resource(group, "v1", resource)
        .unwrap_or_else(|| panic!("{group}/{resource} is served"))
}

/// Every object of a kind, as stored now.
fn objects(sim: &Simulator, group: &str, resource: &str) -> Vec<Value> {
    let rt = rt(sim, group, resource);
    let page = sim
        .store()
        .list(&rt, None, None, None, 0, &|_| true, false)
        .expect("list");
    page.items.iter().map(|o| o.to_value(&rt)).collect()
}

fn name(v: &Value) -> &str {
    v["metadata"]["name"].as_str().unwrap_or_default()
}

fn ns(v: &Value) -> &str {
    v["metadata"]["namespace"].as_str().unwrap_or_default()
}

fn count(sim: &Simulator, group: &str, resource: &str) -> usize {
    sim.store().count(&rt(sim, group, resource))
}

#[tokio::test]
async fn counts_follow_the_load_tests_formula() {
    for nodes in [5usize, 200] {
        let spec = Cl2Spec { nodes, seed: 1 };
        let sim = cl2_sim(nodes, 1).await;
        let deployments = spec.deployment_count();
        let namespaces = spec.namespace_count() + kube_sim::SYSTEM_NAMESPACES.len();
        assert_eq!(count(&sim, "", "nodes"), nodes);
        assert_eq!(count(&sim, "", "namespaces"), namespaces);
        assert_eq!(count(&sim, "apps", "deployments"), deployments);
        assert_eq!(count(&sim, "apps", "replicasets"), deployments);
        assert_eq!(count(&sim, "", "pods"), spec.pod_count());
        assert_eq!(count(&sim, "", "services"), spec.service_count());
        assert_eq!(count(&sim, "", "secrets"), deployments);
        assert_eq!(count(&sim, "", "configmaps"), deployments + namespaces);
        assert_eq!(count(&sim, "", "serviceaccounts"), namespaces);
        assert_eq!(count(&sim, "coordination.k8s.io", "leases"), nodes);
        assert_eq!(count(&sim, "node.k8s.io", "runtimeclasses"), 1);
        assert_eq!(count(&sim, "storage.k8s.io", "csidrivers"), 1);
        // Per namespace, each size scaled by its nodes / 100 with one at least; a Service
        // per two Deployments of a size.
        let mut per_class: BTreeMap<(String, String), usize> = BTreeMap::new();
        for d in objects(&sim, "apps", "deployments") {
            let size = name(&d).split('-').next().unwrap_or_default().to_string();
            *per_class.entry((ns(&d).to_string(), size)).or_default() += 1;
        }
        for i in 0..spec.namespace_count() {
            let namespace = kube_sim::cl2::namespace_name(i);
            for class in SizeClass::ALL {
                let want = (class.per_full_namespace() * spec.namespace_nodes(i) + 50) / 100;
                assert_eq!(
                    per_class[&(namespace.clone(), class.name().to_string())],
                    want.max(1),
                    "{nodes} nodes: {} deployments in {namespace}",
                    class.name()
                );
            }
        }
        // The pods are spread evenly over the nodes.
        let mut per_node: BTreeMap<String, usize> = BTreeMap::new();
        for p in objects(&sim, "", "pods") {
            let node = p["spec"]["nodeName"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            *per_node.entry(node).or_default() += 1;
        }
        assert_eq!(per_node.len(), nodes);
        for (i, node) in spec.node_names().iter().enumerate() {
            assert_eq!(per_node[node], spec.pods_on_node(i), "{node}");
        }
        let leases = objects(&sim, "coordination.k8s.io", "leases");
        assert!(leases.iter().all(|l| ns(l) == "kube-node-lease"
            && l["spec"]["holderIdentity"] == l["metadata"]["name"]
            && l["spec"]["renewTime"].is_string()));
        sim.shutdown().await;
    }
    let full = Cl2Spec {
        nodes: 5_000,
        seed: 1,
    };
    assert_eq!(full.namespace_count(), 50);
    assert_eq!(full.deployment_count(), 16_150);
    assert_eq!(full.service_count(), 8_100);
    assert_eq!(full.pod_count(), 134_000);
}

/// What a kubelet reads from its pods: the ConfigMaps and Secrets their volumes name.
fn referenced(pod: &Value) -> (Vec<String>, Vec<String>) {
    let mut cms = Vec::new();
    let mut secrets = Vec::new();
    for v in pod["spec"]["volumes"].as_array().into_iter().flatten() {
        if let Some(n) = v["configMap"]["name"].as_str() {
            cms.push(n.to_string());
        }
        if let Some(n) = v["secret"]["secretName"].as_str() {
            secrets.push(n.to_string());
        }
        for src in v["projected"]["sources"].as_array().into_iter().flatten() {
            if let Some(n) = src["configMap"]["name"].as_str() {
                cms.push(n.to_string());
            }
        }
    }
    (cms, secrets)
}

#[tokio::test]
async fn pods_name_configmaps_and_secrets_that_exist_and_owners_that_resolve() {
    let sim = cl2_sim(5, 7).await;
    let url = sim.url();
    // A kubelet's view: its node's pods, over HTTP.
    let (code, list) = kube_sim::testkit::get_json(&format!(
        "{url}/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-00002"
    ))
    .await;
    assert_eq!(code, 200);
    let pods = list["items"].as_array().expect("items");
    assert_eq!(pods.len(), Cl2Spec { nodes: 5, seed: 7 }.pods_on_node(2));
    let mut wanted = BTreeSet::new();
    for p in pods {
        let (cms, secrets) = referenced(p);
        assert!(cms.contains(&"kube-root-ca.crt".to_string()), "{}", name(p));
        let deployment = p["metadata"]["labels"]["name"].as_str().unwrap();
        assert!(cms.contains(&deployment.to_string()), "{}", name(p));
        assert_eq!(secrets, vec![deployment.to_string()]);
        let api = p["spec"]["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["name"].as_str().unwrap().starts_with("kube-api-access-"))
            .expect("the service account's volume");
        assert_eq!(
            api["name"].as_str().unwrap().len(),
            "kube-api-access-".len() + 5
        );
        assert!(api["projected"]["sources"][0]["serviceAccountToken"].is_object());
        assert!(api["projected"]["sources"][2]["downwardAPI"].is_object());
        for c in cms {
            wanted.insert(("configmaps", ns(p).to_string(), c));
        }
        for s in secrets {
            wanted.insert(("secrets", ns(p).to_string(), s));
        }
    }
    for (kind, ns, n) in &wanted {
        let (code, _) =
            kube_sim::testkit::get_json(&format!("{url}/api/v1/namespaces/{ns}/{kind}/{n}")).await;
        assert_eq!(code, 200, "{kind} {ns}/{n}");
    }
    // Every pod (all nodes): pod → ReplicaSet → Deployment by controller references with
    // matching uids, selectors and the pod-template-hash.
    let by_key = |items: Vec<Value>| -> BTreeMap<(String, String), Value> {
        items
            .into_iter()
            .map(|o| ((ns(&o).to_string(), name(&o).to_string()), o))
            .collect()
    };
    let replica_sets = by_key(objects(&sim, "apps", "replicasets"));
    let deployments = by_key(objects(&sim, "apps", "deployments"));
    let configmaps = by_key(objects(&sim, "", "configmaps"));
    let secrets = by_key(objects(&sim, "", "secrets"));
    let all = objects(&sim, "", "pods");
    assert_eq!(all.len(), 355);
    for p in &all {
        let owner = &p["metadata"]["ownerReferences"][0];
        assert_eq!(owner["kind"], "ReplicaSet");
        assert_eq!(owner["controller"], true);
        assert_eq!(owner["blockOwnerDeletion"], true);
        let rs = &replica_sets[&(
            ns(p).to_string(),
            owner["name"].as_str().unwrap().to_string(),
        )];
        assert_eq!(rs["metadata"]["uid"], owner["uid"]);
        let hash = p["metadata"]["labels"]["pod-template-hash"]
            .as_str()
            .unwrap();
        assert!(name(rs).ends_with(&format!("-{hash}")));
        assert!(name(p).starts_with(&format!("{}-", name(rs))));
        for (k, v) in rs["spec"]["selector"]["matchLabels"].as_object().unwrap() {
            assert_eq!(&p["metadata"]["labels"][k], v, "{}: {k}", name(p));
        }
        let downer = &rs["metadata"]["ownerReferences"][0];
        assert_eq!(downer["kind"], "Deployment");
        assert_eq!(downer["controller"], true);
        let d = &deployments[&(
            ns(p).to_string(),
            downer["name"].as_str().unwrap().to_string(),
        )];
        assert_eq!(d["metadata"]["uid"], downer["uid"]);
        let (cms, secs) = referenced(p);
        for c in cms {
            assert!(configmaps.contains_key(&(ns(p).to_string(), c)));
        }
        for s in secs {
            assert!(secrets.contains_key(&(ns(p).to_string(), s)));
        }
    }
    for d in deployments.values() {
        let n = d["spec"]["replicas"].as_u64().unwrap();
        assert_eq!(
            d["status"]["readyReplicas"].as_u64(),
            Some(n),
            "{}",
            name(d)
        );
        assert_eq!(d["status"]["availableReplicas"].as_u64(), Some(n));
        assert_eq!(
            d["status"]["observedGeneration"],
            d["metadata"]["generation"]
        );
        assert_eq!(d["status"]["conditions"][0]["type"], "Available");
        assert_eq!(d["status"]["conditions"][0]["status"], "True");
    }
    sim.shutdown().await;
}

/// Whether the EndpointSlices list exactly the selected pods that have an IP (ready when ready
/// and not terminating), at most 100 a slice, and every ReplicaSet's and Deployment's status
/// counts its pods; the first difference otherwise.
fn check_in_step(sim: &Simulator) -> Result<(), String> {
    let pods = objects(sim, "", "pods");
    if let Some(p) = pods
        .iter()
        .find(|p| p["metadata"]["deletionTimestamp"].is_string())
    {
        return Err(format!("{} is still terminating", name(p)));
    }
    let ready = |p: &Value| {
        p["status"]["conditions"].as_array().is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
    };
    let mut slices: BTreeMap<(String, String), BTreeMap<String, (String, bool)>> = BTreeMap::new();
    for s in objects(sim, "discovery.k8s.io", "endpointslices") {
        let labels = &s["metadata"]["labels"];
        if labels["endpointslice.kubernetes.io/managed-by"] != "endpointslice-controller.k8s.io" {
            return Err(format!("{} lacks the managed-by label", name(&s)));
        }
        let svc = labels["kubernetes.io/service-name"]
            .as_str()
            .unwrap_or_default();
        let eps = s["endpoints"].as_array().cloned().unwrap_or_default();
        if eps.len() > MAX_ENDPOINTS_PER_SLICE {
            return Err(format!("{} has {} endpoints", name(&s), eps.len()));
        }
        let entry = slices
            .entry((ns(&s).to_string(), svc.to_string()))
            .or_default();
        for e in eps {
            let pod = e["targetRef"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let ip = e["addresses"][0].as_str().unwrap_or_default().to_string();
            let r = e["conditions"]["ready"] == true;
            if entry.insert(pod.clone(), (ip, r)).is_some() {
                return Err(format!("{pod} is twice in {svc}'s slices"));
            }
        }
    }
    for svc in objects(sim, "", "services") {
        let key = (ns(&svc).to_string(), name(&svc).to_string());
        let selector = &svc["spec"]["selector"]["svc"];
        let want: BTreeMap<String, (String, bool)> = pods
            .iter()
            .filter(|p| ns(p) == key.0 && &p["metadata"]["labels"]["svc"] == selector)
            .filter_map(|p| {
                let ip = p["status"]["podIP"].as_str()?;
                Some((name(p).to_string(), (ip.to_string(), ready(p))))
            })
            .collect();
        let have = slices.remove(&key).unwrap_or_default();
        if have != want {
            let differ = |a: &BTreeMap<String, (String, bool)>,
                          b: &BTreeMap<String, (String, bool)>| {
                a.iter()
                    .filter(|(k, v)| b.get(*k) != Some(v))
                    .map(|(k, _)| k.clone())
                    .collect::<Vec<_>>()
            };
            return Err(format!(
                "{key:?}: slices lack {:?} and have {:?} too",
                differ(&want, &have),
                differ(&have, &want)
            ));
        }
    }
    for d in objects(sim, "apps", "deployments") {
        let own: Vec<&Value> = pods
            .iter()
            .filter(|p| ns(p) == ns(&d) && p["metadata"]["labels"]["name"] == name(&d))
            .collect();
        let n_ready = own.iter().filter(|p| ready(p)).count() as u64;
        let status = &d["status"];
        let got = (
            status["replicas"].as_u64().unwrap_or(0),
            status["readyReplicas"].as_u64().unwrap_or(0),
        );
        if got != (own.len() as u64, n_ready) {
            return Err(format!(
                "{}/{} status {got:?}, pods {} ({n_ready} ready)",
                ns(&d),
                name(&d),
                own.len()
            ));
        }
        if status["observedGeneration"] != d["metadata"]["generation"] {
            return Err(format!("{} observedGeneration behind", name(&d)));
        }
    }
    Ok(())
}

/// Waits, on the store's revision, until [`check_in_step`] holds; fails after 30 s.
async fn wait_in_step(sim: &Simulator) {
    let mut rev = sim.store().subscribe_revision();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        rev.borrow_and_update();
        let err = match check_in_step(sim) {
            Ok(()) => return,
            Err(e) => e,
        };
        match tokio::time::timeout_at(deadline, rev.changed()).await {
            Ok(Ok(())) => {}
            _ => panic!("not in step: {err}"),
        }
    }
}

/// Each EndpointSlice's resourceVersion, by name.
fn slice_versions(sim: &Simulator) -> BTreeMap<String, String> {
    objects(sim, "discovery.k8s.io", "endpointslices")
        .iter()
        .map(|s| {
            let rv = s["metadata"]["resourceVersion"].to_string();
            (name(s).to_string(), rv)
        })
        .collect()
}

#[tokio::test]
async fn endpoint_slices_and_status_follow_the_pods_through_churn() {
    let sim = cl2_sim(5, 3).await;
    check_in_step(&sim).expect("in step after loading");
    let slices_before = slice_versions(&sim);
    let start = sim.store().revision();
    let mut w = kube_sim::testkit::watch(&format!(
        "{}/api/v1/pods?watch=1&resourceVersion={start}",
        sim.url()
    ))
    .await;
    kube_sim::churn::restart(
        sim.state(),
        ChurnSpec {
            per_second: 500.0,
            seed: 3,
            mix: ChurnMix::Realistic,
        },
    );
    let (mut added, mut deleted, mut modified) = (0, 0, 0);
    while added < 20 || deleted < 20 || modified < 50 {
        let e = w.next_non_bookmark(Duration::from_secs(10)).await;
        match e["type"].as_str() {
            Some("ADDED") => added += 1,
            Some("DELETED") => deleted += 1,
            _ => modified += 1,
        }
    }
    kube_sim::churn::restart(
        sim.state(),
        ChurnSpec {
            per_second: 0.0,
            seed: 3,
            mix: ChurnMix::Realistic,
        },
    );
    wait_in_step(&sim).await;
    let slices_after = slice_versions(&sim);
    assert_ne!(slices_before, slices_after, "churn changed no slice");
    // A client's own write is followed too: a deleted pod leaves its slice.
    let pods = kube_sim::testkit::get_json(&format!(
        "{}/api/v1/namespaces/test-cl2-1/pods?labelSelector=svc%3Dbig-service-0",
        sim.url()
    ))
    .await
    .1;
    let victim = name(&pods["items"][0]).to_string();
    let resp = kube_sim::testkit::send(
        hyper::Method::DELETE,
        &format!("{}/api/v1/namespaces/test-cl2-1/pods/{victim}", sim.url()),
        &[],
        "",
    )
    .await;
    assert_eq!(resp.status(), 200);
    wait_in_step(&sim).await;
    let listed = objects(&sim, "discovery.k8s.io", "endpointslices")
        .iter()
        .flat_map(|s| s["endpoints"].as_array().cloned().unwrap_or_default())
        .any(|e| e["targetRef"]["name"] == victim.as_str());
    assert!(!listed, "{victim} is still an endpoint");
    sim.shutdown().await;
}

#[tokio::test]
async fn a_seed_makes_the_same_cluster() {
    let kinds = [
        ("", "nodes"),
        ("", "pods"),
        ("", "services"),
        ("", "configmaps"),
        ("", "secrets"),
        ("", "serviceaccounts"),
        ("apps", "deployments"),
        ("apps", "replicasets"),
        ("discovery.k8s.io", "endpointslices"),
        ("coordination.k8s.io", "leases"),
    ];
    let dump = |sim: &Simulator| -> Vec<Vec<Value>> {
        kinds.iter().map(|(g, r)| objects(sim, g, r)).collect()
    };
    let a = cl2_sim(5, 11).await;
    let b = cl2_sim(5, 11).await;
    let c = cl2_sim(5, 12).await;
    let (da, db, dc) = (dump(&a), dump(&b), dump(&c));
    assert_eq!(da, db, "the same seed made other objects");
    let pods = |d: &Vec<Vec<Value>>| d[1].clone();
    assert_ne!(pods(&da), pods(&dc), "another seed made the same pods");
    // Names do not depend on the seed.
    let names = |d: &Vec<Vec<Value>>| -> Vec<String> {
        d.iter().flatten().map(|o| name(o).to_string()).collect()
    };
    assert_eq!(names(&da), names(&dc));
}
