//! Deployment as users run it: every kustomize overlay under deploy/overlays renders
//! (`kubectl kustomize`) into objects with what they need, and `kubectl apply --dry-run=server`
//! of the rendered output through watchmux in front of a simulator is accepted and stores
//! nothing; the PrometheusRule is the generated copy of grafana/alerts.yaml; the alert rules
//! pass `promtool check rules` and their unit tests (grafana/alerts.test.yaml) with a case for
//! every alert; and a real Prometheus scrapes a running watchmux, evaluates every rule without
//! error, finds every metric the rules name, and fires an alert provoked on purpose.
//!
//! kubectl, promtool and prometheus must be installed (.ci/install-deps): a missing tool fails
//! the test that needs it, saying which.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use http::{Method, StatusCode};
use kube_sim::Simulator;
use kube_sim::kinds::CustomType;
use serde_json::{Value, json};
use watchmux::config::Config;

use crate::common::kubectl::{kubectl, run};
use crate::common::{get_json, proxy_for, send_json, sim_with};
use crate::observability::metric_names;

/// A path in the repository.
fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

fn read(rel: &str) -> String {
    let p = repo(rel);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// A command (tokio's: the tests run on the runtime's workers).
fn command(program: impl AsRef<std::ffi::OsStr>) -> tokio::process::Command {
    let mut c = tokio::process::Command::new(program);
    c.stdin(std::process::Stdio::null()).kill_on_drop(true);
    c
}

/// Runs a command to its end, for at most 60 s: (success, stdout, stderr); a missing program
/// fails saying how it is installed (`install`).
async fn output(c: &mut tokio::process::Command, install: &str) -> (bool, String, String) {
    let out = tokio::time::timeout(Duration::from_secs(60), c.output())
        .await
        .unwrap_or_else(|_| panic!("{c:?} did not finish within 60 s"))
        .unwrap_or_else(|e| panic!("{c:?}: {e} ({install})"));
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Every overlay under deploy/overlays, by name.
fn overlays() -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(repo("deploy/overlays"))
        .expect("deploy/overlays")
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    out.sort();
    assert!(
        out.contains(&"edge".to_string()) && out.contains(&"sidecar".to_string()),
        "{out:?}"
    );
    out
}

/// `kubectl kustomize deploy/overlays/<name>`: the YAML and its objects.
async fn render(overlay: &str) -> (String, Vec<Value>) {
    let home = tempfile::tempdir().unwrap();
    let (ok, out, err) = output(
        command("kubectl")
            .env("HOME", home.path())
            .env("KUBECONFIG", home.path().join("none"))
            .arg("kustomize")
            .arg(repo(&format!("deploy/overlays/{overlay}"))),
        "kubectl is installed by .ci/install-deps",
    )
    .await;
    assert!(ok, "kubectl kustomize deploy/overlays/{overlay}: {err}");
    let docs: Vec<Value> = serde_saphyr::from_multiple(&out)
        .unwrap_or_else(|e| panic!("{overlay}: rendered YAML: {e}"));
    let docs: Vec<Value> = docs.into_iter().filter(|d| !d.is_null()).collect();
    assert!(!docs.is_empty(), "{overlay} renders nothing");
    (out, docs)
}

/// The custom types of the Prometheus Operator's CRDs (tests/proxy/fixtures), as the
/// simulator serves them.
fn operator_types() -> Vec<CustomType> {
    let text = read("tests/proxy/fixtures/prometheus-operator-crds.yaml");
    let crds: Vec<Value> = serde_saphyr::from_multiple(&text).expect("CRD fixture");
    let mut out = Vec::new();
    for crd in crds.iter().filter(|d| !d.is_null()) {
        assert_eq!(crd["kind"], "CustomResourceDefinition");
        let spec = &crd["spec"];
        for v in spec["versions"].as_array().expect("versions") {
            if v["served"] != true {
                continue;
            }
            let decl = format!(
                "{}/{}/{}={},{}",
                spec["group"].as_str().unwrap(),
                v["name"].as_str().unwrap(),
                spec["names"]["plural"].as_str().unwrap(),
                spec["names"]["kind"].as_str().unwrap(),
                if spec["scope"] == "Namespaced" {
                    "namespaced"
                } else {
                    "cluster"
                },
            );
            out.push(decl.parse().expect("a custom type"));
        }
    }
    out
}

// ---- the rendered objects ----------------------------------------------------------------------

fn find<'a>(all: &'a [Value], kind: &str) -> Vec<&'a Value> {
    all.iter().filter(|d| d["kind"] == kind).collect()
}

fn one<'a>(all: &'a [Value], what: &str, kind: &str) -> &'a Value {
    let v = find(all, kind);
    assert_eq!(v.len(), 1, "{what}: one {kind}");
    v[0]
}

/// `selector` matches `labels` (every selector pair is among the labels).
fn selects(selector: &Value, labels: &Value) -> bool {
    selector
        .as_object()
        .is_some_and(|s| !s.is_empty() && s.iter().all(|(k, v)| labels[k] == *v))
}

/// The watchmux config carried by a ConfigMap: it parses, and gives the cached resources.
fn embedded_config(cm: &Value) -> Config {
    let text = cm["data"]["config.toml"]
        .as_str()
        .expect("config.toml in the ConfigMap");
    Config::from_toml_str(text, "ConfigMap config.toml")
        .unwrap_or_else(|e| panic!("the ConfigMap's config does not parse: {e}"))
}

/// Every cached resource may be listed and watched under `rules`.
fn rbac_covers(rules: &Value, config: &Config) {
    for r in &config.cache.resources {
        let ok = rules.as_array().unwrap().iter().any(|rule| {
            let has = |k: &str, v: &str| {
                rule[k]
                    .as_array()
                    .is_some_and(|a| a.iter().any(|x| x == v || x == "*"))
            };
            has("apiGroups", &r.group)
                && has("resources", &r.resource)
                && has("verbs", "list")
                && has("verbs", "watch")
        });
        assert!(ok, "RBAC does not allow list+watch on {r}");
    }
}

/// The image name the manifests carry until a user sets theirs (README, "Deploying").
const PLACEHOLDER_IMAGE: &str = "watchmux:set-me";

/// The watchmux container of a pod spec: the placeholder image, probes on its health
/// endpoints, ports, resources, and a hardened security context with a read-only root.
fn check_watchmux_container(spec: &Value, what: &str) -> Value {
    let containers = spec["containers"].as_array().expect("containers");
    let c = containers
        .iter()
        .find(|c| c["name"] == "watchmux")
        .unwrap_or_else(|| panic!("{what}: no watchmux container"))
        .clone();
    assert_eq!(c["image"], PLACEHOLDER_IMAGE, "{what}: image");
    let args: Vec<&str> = c["args"]
        .as_array()
        .expect("args")
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(args.first(), Some(&"serve"), "{what}: args");
    assert!(args.contains(&"--config"), "{what}: --config");
    // kubelet's httpGet, or `watchmux probe URL` inside the container (localhost-only sidecar).
    let probes = |probe: &Value, path: &str| {
        probe["httpGet"]["path"] == path
            || probe["exec"]["command"].as_array().is_some_and(|c| {
                c.iter().any(|a| a == "probe")
                    && c.last()
                        .and_then(Value::as_str)
                        .is_some_and(|u| u.ends_with(path))
            })
    };
    assert!(
        probes(&c["readinessProbe"], "/readyz"),
        "{what}: readiness probe"
    );
    assert!(
        probes(&c["livenessProbe"], "/livez"),
        "{what}: liveness probe"
    );
    for r in ["cpu", "memory"] {
        assert!(
            c["resources"]["requests"][r].is_string(),
            "{what}: requests.{r}"
        );
    }
    assert!(
        c["resources"]["limits"]["memory"].is_string(),
        "{what}: memory limit"
    );
    assert!(
        c["ports"].as_array().is_some_and(|p| !p.is_empty()),
        "{what}: ports"
    );
    assert!(
        c["volumeMounts"].as_array().is_some_and(|m| !m.is_empty()),
        "{what}: the config is mounted"
    );
    let sc = &c["securityContext"];
    assert_eq!(sc["readOnlyRootFilesystem"], true, "{what}: read-only root");
    assert_eq!(sc["allowPrivilegeEscalation"], false, "{what}");
    assert_eq!(sc["capabilities"]["drop"], json!(["ALL"]), "{what}");
    let non_root = |s: &Value| s["runAsNonRoot"] == true;
    assert!(
        non_root(sc) || non_root(&spec["securityContext"]),
        "{what}: runAsNonRoot"
    );
    c
}

/// The image's user and entrypoint, from the Dockerfile: (uid, binary path).
fn dockerfile_user_and_binary() -> (u64, String) {
    let text = read("Dockerfile");
    let runtime = text.rsplit("\nFROM ").next().expect("a runtime stage");
    let user = runtime
        .lines()
        .find_map(|l| l.strip_prefix("USER "))
        .expect("the runtime stage sets USER");
    let uid = user
        .split(':')
        .next()
        .unwrap()
        .trim()
        .parse()
        .expect("a numeric user");
    let entry = runtime
        .lines()
        .find_map(|l| l.strip_prefix("ENTRYPOINT "))
        .expect("ENTRYPOINT");
    let entry: Vec<String> = serde_json::from_str(entry).expect("exec-form ENTRYPOINT");
    (uid, entry[0].clone())
}

/// What every rendered overlay holds in common: well-formed objects, and the base's RBAC
/// (a ServiceAccount, a read-only ClusterRole, the binding of one to the other).
fn check_common<'a>(all: &'a [Value], what: &str) -> (&'a Value, &'a Value) {
    for d in all {
        assert!(d["apiVersion"].is_string(), "{what}: apiVersion");
        assert!(d["kind"].is_string(), "{what}: kind");
        assert!(
            d["metadata"]["name"].is_string(),
            "{what}: metadata.name of {}",
            d["kind"]
        );
        // No made-up registry: every image is a placeholder the user replaces.
        let mut images = Vec::new();
        crate::observability::strings_under(d, "image", &mut images);
        for i in images {
            assert!(
                i.ends_with(":set-me"),
                "{what}: image {i} is not a placeholder"
            );
        }
    }
    let sa = one(all, what, "ServiceAccount");
    let role = find(all, "ClusterRole")
        .into_iter()
        .find(|r| r["metadata"]["name"] == sa["metadata"]["name"])
        .unwrap_or_else(|| panic!("{what}: the ClusterRole of the base"));
    let binding = find(all, "ClusterRoleBinding")
        .into_iter()
        .find(|b| b["roleRef"]["name"] == role["metadata"]["name"])
        .unwrap_or_else(|| panic!("{what}: the binding of the ClusterRole"));
    assert_eq!(binding["roleRef"]["kind"], "ClusterRole");
    assert_eq!(binding["roleRef"]["apiGroup"], "rbac.authorization.k8s.io");
    assert!(
        binding["subjects"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["kind"] == "ServiceAccount"
                && s["name"] == sa["metadata"]["name"]
                && s["namespace"] == sa["metadata"]["namespace"]),
        "{what}: {binding}"
    );
    for rule in role["rules"].as_array().unwrap() {
        for v in rule["verbs"].as_array().unwrap() {
            assert!(
                matches!(v.as_str(), Some("get" | "list" | "watch")),
                "watchmux needs read access only: {rule}"
            );
        }
    }
    (sa, role)
}

#[tokio::test]
async fn every_overlay_renders_objects_with_what_they_need() {
    let (uid, binary) = dockerfile_user_and_binary();
    for o in overlays() {
        let (_, all) = render(&o).await;
        check_common(&all, &o);
    }

    // The edge cache: ConfigMap, StatefulSet with its own volume per replica, Service, PDB,
    // HPA, ServiceMonitor, PrometheusRule.
    let what = "edge";
    let (_, all) = render(what).await;
    let (sa, role) = check_common(&all, what);
    let cm = one(&all, what, "ConfigMap");
    let config = embedded_config(cm);
    assert!(!config.cache.resources.is_empty());
    assert!(
        config.server.listen.ip().is_unspecified(),
        "the edge listens for the Service"
    );
    rbac_covers(&role["rules"], &config);
    // On-demand: whatever kind clients read, so list and watch on every kind, read only.
    assert_eq!(config.cache.mode, watchmux::config::CacheMode::OnDemand);
    let wide = find(&all, "ClusterRole")
        .into_iter()
        .find(|r| r["metadata"]["name"] == "watchmux-on-demand")
        .expect("edge: the on-demand ClusterRole");
    assert_eq!(
        wide["rules"],
        json!([{"apiGroups": ["*"], "resources": ["*"], "verbs": ["get", "list", "watch"]}])
    );
    assert!(
        find(&all, "ClusterRoleBinding")
            .iter()
            .any(|b| b["roleRef"]["name"] == "watchmux-on-demand"
                && b["subjects"][0]["name"] == sa["metadata"]["name"]
                && b["subjects"][0]["namespace"] == sa["metadata"]["namespace"]),
        "edge: the on-demand ClusterRole is bound to watchmux's service account"
    );
    assert!(
        find(&all, "ClusterRoleBinding")
            .iter()
            .any(|b| b["roleRef"]["name"] == "system:auth-delegator"),
        "server.authz = delegated needs system:auth-delegator"
    );
    let sts = one(&all, what, "StatefulSet");
    assert_eq!(sts["apiVersion"], "apps/v1");
    let hpa = one(&all, what, "HorizontalPodAutoscaler");
    assert_eq!(hpa["apiVersion"], "autoscaling/v2");
    assert_eq!(hpa["spec"]["scaleTargetRef"]["kind"], "StatefulSet");
    assert_eq!(
        hpa["spec"]["scaleTargetRef"]["name"],
        sts["metadata"]["name"]
    );
    assert!(
        hpa["spec"]["minReplicas"].as_u64().is_some_and(|r| r >= 2),
        "replicas for the PDB"
    );
    assert!(
        sts["spec"].get("replicas").is_none(),
        "the HPA owns the replica count"
    );
    let labels = &sts["spec"]["template"]["metadata"]["labels"];
    assert!(selects(&sts["spec"]["selector"]["matchLabels"], labels));
    let pod = &sts["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], sa["metadata"]["name"]);
    assert_eq!(pod["securityContext"]["runAsUser"], uid, "the image's user");
    let c = check_watchmux_container(pod, what);
    let grace = pod["terminationGracePeriodSeconds"]
        .as_u64()
        .expect("grace period");
    let s = &config.server;
    // A preStop hook runs before SIGTERM, inside the same grace period.
    let pre_stop = c["lifecycle"]["preStop"]["sleep"]["seconds"]
        .as_u64()
        .unwrap_or(0);
    assert!(
        c["lifecycle"]["preStop"].is_null() || pre_stop > 0,
        "edge: a preStop other than a sleep is not accounted for"
    );
    assert!(
        pre_stop + (s.shutdown_delay + s.shutdown_timeout).as_secs() < grace,
        "watchmux drains and exits before the kubelet kills it"
    );
    assert!(
        !s.shutdown_watch_grace.is_zero() && s.shutdown_watch_grace < s.shutdown_timeout,
        "edge: the watches drain in paced batches, within the shutdown's bound"
    );
    assert!(
        !s.shutdown_delay.is_zero(),
        "edge: the Service drops the pod before it stops accepting"
    );
    // Replicas behind a Service: clients are dealt out again after a roll, in bounded time.
    assert!(
        s.goaway_chance > 0.0 && !s.max_connection_age.is_zero(),
        "edge: connections move between replicas (goaway_chance, max_connection_age_secs)"
    );
    // Replicas spread over zones; the readiness probe is /readyz (check_watchmux_container).
    let spread = pod["topologySpreadConstraints"]
        .as_array()
        .expect("edge: topologySpreadConstraints");
    assert!(
        spread
            .iter()
            .any(|t| t["topologyKey"] == "topology.kubernetes.io/zone"
                && selects(&t["labelSelector"]["matchLabels"], labels)),
        "edge: the replicas spread over zones"
    );
    assert!(
        pod["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|v| v["configMap"]["name"] == cm["metadata"]["name"]),
        "the ConfigMap is a volume"
    );
    // cache.persist_dir is on the replica's own claim, the only writable mount.
    let persist = config
        .cache
        .persist_dir
        .as_ref()
        .expect("the edge persists its cache");
    let claims: Vec<&str> = sts["spec"]["volumeClaimTemplates"]
        .as_array()
        .expect("volumeClaimTemplates")
        .iter()
        .map(|t| t["metadata"]["name"].as_str().unwrap())
        .collect();
    for m in c["volumeMounts"].as_array().unwrap() {
        let name = m["name"].as_str().unwrap();
        let path = m["mountPath"].as_str().unwrap();
        if claims.contains(&name) {
            assert!(
                persist.starts_with(path),
                "{} is not on the claim mounted at {path}",
                persist.display()
            );
            assert_ne!(m["readOnly"], true);
        } else {
            assert_eq!(m["readOnly"], true, "{name}: only the cache is writable");
        }
    }
    assert!(
        c["volumeMounts"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| claims.contains(&m["name"].as_str().unwrap())),
        "the claim is mounted"
    );
    let port = c["ports"][0]["containerPort"].as_u64().unwrap();
    assert_eq!(
        port,
        s.listen.port() as u64,
        "the container port is the configured listen port"
    );
    let svc = one(&all, what, "Service");
    assert_eq!(sts["spec"]["serviceName"], svc["metadata"]["name"]);
    assert!(
        selects(&svc["spec"]["selector"], labels),
        "the Service selects the pods"
    );
    let svc_port = &svc["spec"]["ports"][0];
    assert!(svc_port["name"].is_string());
    assert!(
        svc_port["targetPort"] == c["ports"][0]["name"]
            || svc_port["targetPort"].as_u64() == Some(port),
        "the Service targets the container port"
    );
    let pdb = one(&all, what, "PodDisruptionBudget");
    assert_eq!(pdb["apiVersion"], "policy/v1");
    assert!(selects(&pdb["spec"]["selector"]["matchLabels"], labels));
    assert!(
        pdb["spec"]["maxUnavailable"] == 1 || pdb["spec"]["minAvailable"].is_number(),
        "edge: a disruption takes one replica at a time"
    );
    let sm = one(&all, what, "ServiceMonitor");
    assert_eq!(sm["apiVersion"], "monitoring.coreos.com/v1");
    assert!(selects(
        &sm["spec"]["selector"]["matchLabels"],
        &svc["metadata"]["labels"]
    ));
    let ep = &sm["spec"]["endpoints"][0];
    assert_eq!(ep["port"], svc_port["name"]);
    assert_eq!(ep["path"], "/metrics");
    let rule = one(&all, what, "PrometheusRule");
    let alerts: Value = serde_saphyr::from_str(&read("grafana/alerts.yaml")).expect("alerts");
    assert_eq!(
        rule["spec"], alerts,
        "the PrometheusRule's spec is grafana/alerts.yaml"
    );
    for d in [cm, sts, svc, pdb, hpa, sm, rule] {
        assert_eq!(
            d["metadata"]["namespace"], sa["metadata"]["namespace"],
            "{}",
            d["kind"]
        );
    }

    // The sidecar: the application and watchmux in one pod, talking over localhost.
    let what = "sidecar";
    let (_, all) = render(what).await;
    let (sa, role) = check_common(&all, what);
    let cm = one(&all, what, "ConfigMap");
    let config = embedded_config(cm);
    assert!(
        config.server.listen.ip().is_loopback(),
        "the sidecar listens on localhost only"
    );
    // Only the application's kinds, which the base's RBAC allows.
    assert_eq!(config.cache.mode, watchmux::config::CacheMode::Listed);
    rbac_covers(&role["rules"], &config);
    let dep = one(&all, what, "Deployment");
    let pod = &dep["spec"]["template"]["spec"];
    assert!(selects(
        &dep["spec"]["selector"]["matchLabels"],
        &dep["spec"]["template"]["metadata"]["labels"]
    ));
    let c = check_watchmux_container(pod, what);
    assert_eq!(c["securityContext"]["runAsUser"], uid, "the image's user");
    for probe in ["readinessProbe", "livenessProbe"] {
        assert_eq!(
            c[probe]["exec"]["command"][0], binary,
            "{probe} runs the image's binary"
        );
    }
    let app = pod["containers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] != "watchmux" && c["name"] != "kubectl-proxy")
        .expect("an application container");
    let local = format!("http://127.0.0.1:{}", config.server.listen.port());
    let env_points_local = app["env"].as_array().is_some_and(|e| {
        e.iter()
            .any(|v| v["value"].as_str().is_some_and(|s| s.starts_with(&local)))
    });
    assert!(
        env_points_local,
        "the application is pointed at watchmux on {local}"
    );
    assert_eq!(pod["serviceAccountName"], sa["metadata"]["name"]);
    assert!(
        cm["data"]["kubeconfig"]
            .as_str()
            .is_some_and(|k| k.contains(&local)),
        "the application's kubeconfig points at watchmux"
    );
}

/// The URL of a rendered object on `sim` (whose registry must serve its kind).
fn object_url(sim: &Simulator, d: &Value) -> String {
    let api_version = d["apiVersion"].as_str().unwrap();
    let kind = d["kind"].as_str().unwrap();
    let rt = sim
        .state()
        .registry
        .by_kind(api_version, kind)
        .unwrap_or_else(|| panic!("the simulator does not serve {api_version} {kind}"));
    let prefix = if rt.group.is_empty() {
        "/api/v1".to_string()
    } else {
        format!("/apis/{}", rt.api_version())
    };
    let ns = match d["metadata"]["namespace"].as_str() {
        Some(ns) if rt.namespaced => format!("/namespaces/{ns}"),
        _ => String::new(),
    };
    let name = d["metadata"]["name"].as_str().unwrap();
    format!("{}{prefix}{ns}/{}/{name}", sim.url(), rt.resource)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_overlay_passes_a_server_side_dry_run_through_watchmux() {
    let sim = sim_with(|c| c.custom_types = operator_types()).await;
    let px = proxy_for(&sim, |_| {}).await;
    let home = tempfile::tempdir().unwrap();
    for overlay in overlays() {
        let (yaml, docs) = render(&overlay).await;
        // The namespaces the objects live in exist already, as a dry run needs: it creates
        // none, so its objects could not go into a namespace it "creates" (kube answers 404).
        let namespaces: BTreeSet<&str> = docs
            .iter()
            .filter_map(|d| d["metadata"]["namespace"].as_str())
            .collect();
        let mut created = BTreeSet::new();
        for ns in namespaces {
            let url = format!("{}/api/v1/namespaces/{ns}", sim.url());
            if get_json(&url).await.0 == StatusCode::NOT_FOUND {
                let (s, v) = send_json(
                    Method::POST,
                    &format!("{}/api/v1/namespaces", sim.url()),
                    "application/json",
                    &json!({"metadata": {"name": ns}}),
                )
                .await;
                assert_eq!(s, StatusCode::CREATED, "{v}");
            }
            created.insert(url);
        }
        let before = sim.store().revision();
        let file = home.path().join(format!("{overlay}.yaml"));
        std::fs::write(&file, &yaml).unwrap();
        let mut c = kubectl(&px.url, &home);
        c.arg("apply").arg("--dry-run=server").arg("-f").arg(&file);
        let (ok, out, err) = run(c).await;
        assert!(
            ok,
            "{overlay}: kubectl apply --dry-run=server: {err}\n{out}"
        );
        let accepted = out
            .lines()
            .filter(|l| l.ends_with(" (server dry run)"))
            .count();
        assert_eq!(
            accepted,
            docs.len(),
            "{overlay}: every object accepted:\n{out}"
        );
        assert_eq!(
            sim.store().revision(),
            before,
            "{overlay}: the dry run wrote nothing"
        );
        for d in &docs {
            let url = object_url(&sim, d);
            let (s, _) = get_json(&url).await;
            let want = if created.contains(&url) {
                StatusCode::OK
            } else {
                StatusCode::NOT_FOUND
            };
            assert_eq!(s, want, "{overlay}: {url} after the dry run");
        }
    }
}

#[tokio::test]
async fn the_prometheus_rule_is_generated_from_the_alerts() {
    let (ok, fresh, err) = output(
        command(repo("deploy/components/monitoring/generate")).arg("--stdout"),
        "bash runs it",
    )
    .await;
    assert!(ok, "{err}");
    let committed = read("deploy/components/monitoring/prometheusrule.yaml");
    assert!(
        fresh == committed,
        "deploy/components/monitoring/prometheusrule.yaml is stale: run \
         deploy/components/monitoring/generate after editing grafana/alerts.yaml"
    );
    let rule: Value = serde_saphyr::from_str(&committed).expect("YAML");
    let alerts: Value = serde_saphyr::from_str(&read("grafana/alerts.yaml")).expect("YAML");
    assert_eq!(rule["kind"], "PrometheusRule");
    assert_eq!(rule["spec"], alerts);
}

/// Every alert of grafana/alerts.yaml, by name, with its expression.
fn alerts() -> BTreeMap<String, String> {
    let rules: Value = serde_saphyr::from_str(&read("grafana/alerts.yaml")).expect("YAML");
    let mut out = BTreeMap::new();
    for g in rules["groups"].as_array().expect("groups") {
        for r in g["rules"].as_array().expect("rules") {
            out.insert(
                r["alert"].as_str().expect("alert").to_string(),
                r["expr"].as_str().expect("expr").to_string(),
            );
        }
    }
    assert!(!out.is_empty());
    out
}

#[tokio::test]
async fn alert_rules_pass_promtool_with_a_test_for_every_alert() {
    let install = "promtool is Debian's prometheus package, installed by .ci/install-deps";
    let (ok, out, err) = output(
        command("promtool")
            .args(["check", "rules"])
            .arg(repo("grafana/alerts.yaml")),
        install,
    )
    .await;
    assert!(ok, "promtool check rules: {out}{err}");
    let (ok, out, err) = output(
        command("promtool")
            .args(["test", "rules"])
            .arg(repo("grafana/alerts.test.yaml")),
        install,
    )
    .await;
    assert!(
        ok,
        "promtool test rules grafana/alerts.test.yaml:\n{out}{err}"
    );
    // Every alert is tested both ways: silent at one evaluation and firing at another.
    let tests: Value = serde_saphyr::from_str(&read("grafana/alerts.test.yaml")).expect("YAML");
    let mut silent = BTreeSet::new();
    let mut firing = BTreeSet::new();
    for t in tests["tests"].as_array().expect("tests") {
        for a in t["alert_rule_test"].as_array().into_iter().flatten() {
            let name = a["alertname"].as_str().unwrap().to_string();
            if a["exp_alerts"].as_array().is_some_and(|e| !e.is_empty()) {
                firing.insert(name);
            } else {
                silent.insert(name);
            }
        }
    }
    for name in alerts().keys() {
        assert!(firing.contains(name), "no test where {name} fires");
        assert!(silent.contains(name), "no test where {name} stays silent");
    }
}

// ---- a real Prometheus ------------------------------------------------------------------------

/// A Prometheus server on 127.0.0.1, killed when dropped.
struct Prometheus {
    url: String,
    _child: tokio::process::Child,
    dir: tempfile::TempDir,
}

impl Prometheus {
    /// Starts Prometheus scraping `target` (`host:port`) every second and evaluating
    /// grafana/alerts.yaml every second, with its storage in a temporary directory.
    async fn start(target: &str) -> Prometheus {
        let dir = tempfile::tempdir().unwrap();
        // A free port (Prometheus takes an address, not a listening socket).
        let port = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let config = dir.path().join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
                 rule_files:\n  - {}\n\
                 scrape_configs:\n  - job_name: watchmux\n    static_configs:\n      - targets: [\"{target}\"]\n",
                repo("grafana/alerts.yaml").display()
            ),
        )
        .unwrap();
        let log = std::fs::File::create(dir.path().join("prometheus.log")).unwrap();
        let child = command("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("prometheus is installed (Debian's prometheus package: .ci/install-deps)");
        let p = Prometheus {
            url: format!("http://127.0.0.1:{port}"),
            _child: child,
            dir,
        };
        // Listening first (the HTTP helpers take a refused connection for a failure), then
        // ready (its storage opened and the rules loaded).
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_err()
        {
            assert!(
                tokio::time::Instant::now() < deadline,
                "Prometheus does not listen within 20 s; log:\n{}",
                p.log()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        p.until("ready", |_| true, "/-/ready").await;
        p
    }

    /// Prometheus's own log, for failure messages.
    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("prometheus.log")).unwrap_or_default()
    }

    /// Polls `path` (an API GET answering JSON, or /-/ready) until `ok` holds of its answer,
    /// for at most 20 s; returns that answer.
    async fn until(&self, what: &str, ok: impl Fn(&Value) -> bool, path: &str) -> Value {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            let (s, _, b) =
                crate::common::request(Method::GET, &format!("{}{path}", self.url), &[], "").await;
            if s == StatusCode::OK {
                let v = serde_json::from_slice(&b).unwrap_or(Value::Null);
                if ok(&v) {
                    return v;
                }
            }
            let last = format!("{s} {}", String::from_utf8_lossy(&b));
            assert!(
                tokio::time::Instant::now() < deadline,
                "Prometheus: {what} not within 20 s; last answer to {path}: {last}\nlog:\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// `/api/v1/query?query=…`.
fn query(q: &str) -> String {
    let q: String = form_urlencoded::byte_serialize(q.as_bytes()).collect();
    format!("/api/v1/query?query={q}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_scrapes_watchmux_and_evaluates_every_alert() {
    let sim = crate::common::sim().await;
    // Small enough that one large ConfigMap exceeds it (WatchmuxUpstreamObjectTooLarge).
    let px = proxy_for(&sim, |c| c.cache.max_object_bytes = 64 * 1024).await;
    let target = px.url.trim_start_matches("http://").to_string();
    let prom = Prometheus::start(&target).await;
    // Clients, so that the per-request families (requests, reads, watch starts) have series.
    let (s, _) = get_json(&format!("{}/api/v1/namespaces/default/pods", px.url)).await;
    assert_eq!(s, StatusCode::OK);
    let w = crate::common::watch(&format!("{}/api/v1/pods?watch=1", px.url)).await;
    assert_eq!(w.status, StatusCode::OK);

    // The target is up.
    prom.until(
        "watchmux's target up",
        |v| {
            v["data"]["activeTargets"]
                .as_array()
                .is_some_and(|t| t.len() == 1 && t[0]["health"] == "up")
        },
        "/api/v1/targets",
    )
    .await;

    // Every rule of every group evaluated, without error.
    let names = alerts();
    let rules = prom
        .until(
            "every rule evaluated",
            |v| {
                let rules: Vec<&Value> = v["data"]["groups"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .flat_map(|g| g["rules"].as_array().into_iter().flatten())
                    .collect();
                rules.len() == names.len() && rules.iter().all(|r| r["health"] != "unknown")
            },
            "/api/v1/rules",
        )
        .await;
    for g in rules["data"]["groups"].as_array().unwrap() {
        for r in g["rules"].as_array().unwrap() {
            assert_eq!(r["health"], "ok", "{r}");
            assert!(
                r["lastError"].as_str().unwrap_or_default().is_empty(),
                "{r}"
            );
        }
    }

    // Every metric an alert names is in the scraped data (an alert on a renamed metric would
    // never fire).
    let used: BTreeSet<String> = names.values().flat_map(|e| metric_names(e)).collect();
    assert!(used.len() > 10, "{used:?}");
    for m in &used {
        prom.until(
            &format!("{m} scraped"),
            |v| {
                v["data"]["result"]
                    .as_array()
                    .is_some_and(|r| !r.is_empty())
            },
            &query(&format!("count({m})")),
        )
        .await;
    }

    // An upstream object larger than cache.max_object_bytes fires WatchmuxUpstreamObjectTooLarge
    // (for: 0m) once its counter has moved between two scrapes.
    let (s, v) = send_json(
        Method::POST,
        &format!("{}/api/v1/namespaces/default/configmaps", sim.url()),
        "application/json",
        &json!({"metadata": {"name": "huge"}, "data": {"blob": "x".repeat(100 * 1024)}}),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    let alerts = prom
        .until(
            "WatchmuxUpstreamObjectTooLarge firing",
            |v| {
                v["data"]["alerts"].as_array().is_some_and(|a| {
                    a.iter().any(|a| {
                        a["labels"]["alertname"] == "WatchmuxUpstreamObjectTooLarge"
                            && a["state"] == "firing"
                    })
                })
            },
            "/api/v1/alerts",
        )
        .await;
    let fired = alerts["data"]["alerts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["labels"]["alertname"] == "WatchmuxUpstreamObjectTooLarge")
        .unwrap();
    assert_eq!(fired["labels"]["resource"], "configmaps", "{fired}");
    assert_eq!(fired["labels"]["instance"], target.as_str());
    drop(w);
}
