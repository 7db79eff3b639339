//! S10 on-demand kinds: watchmux caching the kinds its clients read (`cache.mode =
//! "on-demand"`, the default) against caching a fixed list of them (`mode = "listed"` with every
//! kind in `[[cache.resources]]`), with many kinds and informer-like watchers on them.
//!
//! One simulator serves K kinds: its built-in kinds that list and watch (but `secrets`, which
//! on-demand mode does not cache unless named, and `customresourcedefinitions`, which on-demand
//! watchmux watches for itself) and CRD-backed custom types (`--crd`) to make up K, each seeded
//! over HTTP with objects padded to a size. Three watchmux processes run in front of it, one after
//! the other inside each repeat (fresh for every repeat): `listed`, `on-demand` (both read by
//! watchers on all K kinds) and `on-demand` whose watchers read only R of the K kinds. Each
//! watcher is an informer: a LIST `resourceVersion=0`, then a WATCH from the list's
//! resourceVersion with bookmarks; then a steady phase of merge-patch writes spread over all K
//! kinds, straight to the simulator.
//!
//! Drives clients and reads counters (the simulator's `/sim/stats`, watchmux's `/metrics` and
//! `/readyz?verbose`, `/proc`); starting and stopping processes is [`targets`]'s.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::client::{self, Conn, Encoding};
use super::procs::{self, Proc};
use super::report::{Sample, ScenarioSpec};
use super::scenarios::{MB, Watchers, brief, m};
use super::scrape;
use super::targets::{self, Env, Gvr, Target, TargetKind};
use super::{BenchError, Sizes};

/// The scenario's id.
pub const ID: &str = "S10";
/// The group of the custom types.
pub const CRD_GROUP: &str = "bench.example.com";
/// Bound on starting watchmux, its first answer, and the watchers' start.
const SETUP_BOUND: Duration = Duration::from_secs(60);

/// A kind the simulator serves and the watchers read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kind {
    /// API group ("" for the core group).
    pub group: String,
    /// API version.
    pub version: String,
    /// Plural resource.
    pub resource: String,
    /// Kind.
    pub kind: String,
    /// Namespaced (its objects are in `default`) or cluster-scoped.
    pub namespaced: bool,
}

impl Kind {
    /// The key of its counters in the simulator's `/sim/stats`: `resource[.group]`.
    pub fn stats_key(&self) -> String {
        kube_wire::status::group_resource(&self.group, &self.resource)
    }

    fn prefix(&self) -> String {
        if self.group.is_empty() {
            format!("/api/{}", self.version)
        } else {
            format!("/apis/{}/{}", self.group, self.version)
        }
    }

    /// The collection over all namespaces (what the watchers LIST and WATCH).
    pub fn collection(&self) -> String {
        format!("{}/{}", self.prefix(), self.resource)
    }

    /// The collection objects are created in (`default` for a namespaced kind).
    fn create_path(&self) -> String {
        if self.namespaced {
            format!("{}/namespaces/default/{}", self.prefix(), self.resource)
        } else {
            self.collection()
        }
    }

    fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The `--crd` flag value of a custom kind.
    fn crd_flag(&self) -> String {
        format!(
            "{}/{}/{}={}",
            self.group, self.version, self.resource, self.kind
        )
    }

    /// Object `i` of this kind: valid for the simulator's checks of the kind, padded by an
    /// annotation of `pad` bytes.
    pub fn object(&self, i: usize, pad: usize) -> Value {
        let labels = json!({"app": "bench"});
        let mut o = json!({
            "apiVersion": self.api_version(),
            "kind": self.kind,
            "metadata": {
                "name": format!("bench-{i:03}"),
                "labels": labels,
                "annotations": {"bench.example.com/pad": "x".repeat(pad)},
            },
        });
        let container = json!([{"name": "c", "image": "busybox"}]);
        let template = |restart: &str| {
            json!({"metadata": {"labels": labels},
                   "spec": {"containers": container, "restartPolicy": restart}})
        };
        let selected = |restart: &str| json!({"selector": {"matchLabels": labels}, "template": template(restart)});
        let extra = match (self.group.as_str(), self.resource.as_str()) {
            ("", "configmaps") => json!({"data": {"key": format!("value-{i}")}}),
            ("", "events") => json!({
                "involvedObject": {"kind": "Pod", "namespace": "default", "name": "p"},
                "reason": "Bench", "message": "bench event", "type": "Normal"}),
            ("", "persistentvolumeclaims") => json!({"spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}}}}),
            ("", "pods") => json!({"spec": {"containers": container}}),
            ("", "services") => json!({"spec": {"ports": [{"port": 80}]}}),
            ("apps", "controllerrevisions") => json!({"data": {}, "revision": 1}),
            ("apps", "daemonsets" | "deployments" | "replicasets" | "statefulsets") => {
                json!({"spec": selected("Always")})
            }
            ("batch", "jobs") => json!({"spec": selected("Never")}),
            ("batch", "cronjobs") => json!({"spec": {"schedule": "*/5 * * * *",
                "jobTemplate": {"spec": {"template": template("Never")}}}}),
            ("autoscaling", "horizontalpodautoscalers") => json!({"spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d"},
                "maxReplicas": 3}}),
            ("policy", "poddisruptionbudgets") => {
                json!({"spec": {"minAvailable": 1, "selector": {"matchLabels": labels}}})
            }
            ("rbac.authorization.k8s.io", "clusterrolebindings" | "rolebindings") => json!({
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                            "name": "view"},
                "subjects": []}),
            ("rbac.authorization.k8s.io", "clusterroles" | "roles") => json!({"rules": []}),
            ("coordination.k8s.io", "leases") => json!({"spec": {"holderIdentity": "bench"}}),
            ("discovery.k8s.io", "endpointslices") => {
                json!({"addressType": "IPv4", "endpoints": []})
            }
            (CRD_GROUP, _) => json!({"spec": {"index": i}}),
            _ => json!({}),
        };
        if let (Some(o), Value::Object(extra)) = (o.as_object_mut(), extra) {
            o.extend(extra);
        }
        o
    }
}

/// The `n` kinds of the scenario: built-in kinds of the simulator and custom ones (at least two
/// in five, more when the built-in kinds run out).
pub fn kinds(n: usize) -> Vec<Kind> {
    let builtin: Vec<Kind> = kube_sim::kinds::Registry::new(&[])
        .map(|r| r.all())
        .unwrap_or_default()
        .iter()
        .filter(|t| {
            t.builtin
                && !(t.group.is_empty() && t.resource == "secrets")
                && t.group != kube_sim::kinds::CRD_GROUP
        })
        .map(|t| Kind {
            group: t.group.clone(),
            version: t.version.clone(),
            resource: t.resource.clone(),
            kind: t.kind.clone(),
            namespaced: t.namespaced,
        })
        .collect();
    let custom = n.saturating_sub(builtin.len()).max(n * 2 / 5);
    let mut out: Vec<Kind> = builtin.into_iter().take(n - custom).collect();
    out.extend((0..custom).map(|i| Kind {
        group: CRD_GROUP.into(),
        version: "v1".into(),
        resource: format!("kind{i:02}s"),
        kind: format!("Kind{i:02}"),
        namespaced: true,
    }));
    out
}

/// Which `read` of `n` kinds the watchers of the last row read: spread evenly, so built-in and
/// custom kinds are both among them.
pub fn read_subset(n: usize, read: usize) -> Vec<usize> {
    let read = read.clamp(1, n.max(1));
    (0..read).map(|i| (i + 1) * n / read - 1).collect()
}

/// The three ways watchmux runs, in row order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Row {
    /// `mode = "listed"`, every kind in `[[cache.resources]]`.
    Listed,
    /// `mode = "on-demand"`, the watchers on every kind.
    OnDemand,
    /// `mode = "on-demand"`, the watchers on a few of the kinds.
    OnDemandSome,
}

impl Row {
    const ALL: [Row; 3] = [Row::Listed, Row::OnDemand, Row::OnDemandSome];

    fn case(self, s: &Sizes) -> String {
        let k = s.ondemand_kinds;
        match self {
            Row::Listed => format!("listed ({k} kinds)"),
            Row::OnDemand => "on-demand".into(),
            Row::OnDemandSome => {
                format!(
                    "on-demand, {} of {k} read",
                    read_subset(k, s.ondemand_read).len()
                )
            }
        }
    }

    /// The `[cache]` mode line of its watchmux, and the kinds it lists.
    fn cache_config(self, kinds: &[Kind]) -> (&'static str, Vec<Gvr<'_>>) {
        match self {
            Row::Listed => (
                "mode = \"listed\"\n",
                kinds
                    .iter()
                    .map(|k| (k.group.as_str(), k.version.as_str(), k.resource.as_str()))
                    .collect(),
            ),
            Row::OnDemand | Row::OnDemandSome => ("mode = \"on-demand\"\n", Vec::new()),
        }
    }

    /// The indices of the kinds its watchers read.
    fn read(self, s: &Sizes, n: usize) -> Vec<usize> {
        match self {
            Row::OnDemandSome => read_subset(n, s.ondemand_read),
            Row::Listed | Row::OnDemand => (0..n).collect(),
        }
    }
}

/// The report table of S10.
pub fn spec(s: &Sizes) -> ScenarioSpec {
    let k = s.ondemand_kinds;
    let custom = kinds(k).iter().filter(|x| x.group == CRD_GROUP).count();
    ScenarioSpec::table(
        ID,
        "on-demand kinds",
        format!(
            "One simulator serves {k} kinds ({} of its built-in kinds, all but `secrets` and `customresourcedefinitions`, and {custom} CRD-backed custom types), each seeded with {} objects (POSTed; {} bytes of padding in an annotation, about {} bytes of JSON each). Three watchmux processes in front of it, one after the other in each repeat, each fresh: `listed` caches every kind from the start (`mode = \"listed\"`, {k} `[[cache.resources]]` tables); `on-demand` (the default mode, no tables) caches what is read; the third is on-demand mode with its watchers on {} of the {k} kinds. {} watchers spread evenly over the kinds read, each an informer: a LIST `resourceVersion=0` then a WATCH from the list's resourceVersion with `allowWatchBookmarks=true` (each on its own connection, all at once); then {} s of steady writes, {} merge patches/s spread round-robin over all {k} kinds (to the simulator). Ready s = from starting the process until `/readyz` answers 200 (listed: every kind synced); first answer s = from starting the process until a LIST `resourceVersion=0` of one kind read, sent as soon as it listens, is answered 200. Setup s = from the first informer LIST until every watch has its response head. RSS at start = after the first answer and readiness; RSS = after the steady phase; budget MB = `watchmux_memory_used_bytes` then. Kinds cached = `cache/` checks of `/readyz?verbose` then; kinds started = `watchmux_cache_kind_changes_total{{change=\"started\"}}`. Upstream LISTs and WATCHes = the requests the simulator served for the {k} kinds from before the process started to the end of the steady phase (the informers' LISTs and WATCHes watchmux passed through included); upstream watches open = those open at the end; kinds watched = kinds with at least one; most on a kind = the largest count on one kind; other watches = upstream watches open on other resources (watchmux's own watch of CustomResourceDefinitions). Reads = the informers' `watchmux_reads_total` (after the first answer) summed by source (cache, pass_through: every read of a cached kind, also those that arrived before its sync); WATCHes passed = those with verb watch. Delivered % = events the watchers received ÷ (writes to each kind read × its watchers).",
            k - custom,
            s.ondemand_objects,
            s.ondemand_object_bytes,
            s.ondemand_object_bytes + 350,
            read_subset(k, s.ondemand_read).len(),
            s.ondemand_watchers,
            s.ondemand_secs,
            s.ondemand_rate,
        ),
        "watchmux",
        vec![
            m("ready_s", "ready s", false),
            m("first_answer_s", "first answer s", false),
            m("setup_s", "setup s", false),
            m("rss_start_mb", "RSS at start MB", false),
            m("rss_mb", "RSS MB", false),
            m("budget_mb", "budget MB", false),
            m("kinds_cached", "kinds cached", false),
            m("kinds_started", "kinds started", false),
            m("upstream_lists", "upstream LISTs", false),
            m("upstream_watches", "upstream WATCHes", false),
            m("upstream_open_watches", "upstream watches open", false),
            m("kinds_watched", "kinds watched", false),
            m("max_open_per_kind", "most on a kind", false),
            m("other_open", "other watches", false),
            m("cache_reads", "reads from cache", true),
            m("passed_through", "reads passed", false),
            m("watches_passed", "WATCHes passed", false),
            m("delivered_pct", "delivered %", true),
            m("failed_watches", "failed watches", false),
        ],
    )
}

/// Runs S10 (watchmux only: the scenario compares its modes, not proxies).
pub async fn run(
    env: &Env,
    s: &Sizes,
    kinds_asked: &[TargetKind],
    out: &mut Vec<Sample>,
) -> Result<(), BenchError> {
    if !kinds_asked.contains(&TargetKind::Watchmux) {
        return Ok(());
    }
    let kinds = kinds(s.ondemand_kinds);
    let mut args: Vec<String> = ["--history-window-secs", "600"].map(String::from).to_vec();
    for k in kinds.iter().filter(|k| k.group == CRD_GROUP) {
        args.extend(["--crd".to_string(), k.crd_flag()]);
    }
    let sim = targets::start_sim_args(env, &args).await?;
    let result = async {
        seed(
            sim.addr,
            &kinds,
            s.ondemand_objects,
            s.ondemand_object_bytes,
        )
        .await?;
        for r in 0..s.repeats {
            for row in Row::ALL {
                let values = row_run(env, s, &sim, &kinds, row).await?;
                let sample = Sample {
                    scenario: ID,
                    case: row.case(s),
                    target: TargetKind::Watchmux,
                    repeat: r,
                    values,
                };
                eprintln!("  {ID} {} #{r}: {}", sample.case, brief(&sample));
                out.push(sample);
            }
        }
        Ok(())
    }
    .await;
    sim.stop().await;
    result
}

/// A write to the simulator (anything but a 2xx is an error).
async fn write(
    c: &mut Conn,
    method: &str,
    path: &str,
    content_type: &str,
    body: &Value,
) -> Result<(), BenchError> {
    let status = c
        .send(method, path, content_type, body.to_string().as_bytes())
        .await
        .map_err(|e| BenchError::io(format!("{method} {path}"), e))?;
    if !(200..300).contains(&status) {
        return Err(BenchError::Setup(format!(
            "simulator answered {status} to {method} {path} ({body})"
        )));
    }
    Ok(())
}

/// Creates `objects` objects of every kind, a connection per kind.
async fn seed(
    sim: SocketAddr,
    kinds: &[Kind],
    objects: usize,
    pad: usize,
) -> Result<(), BenchError> {
    let mut set = tokio::task::JoinSet::new();
    for k in kinds {
        let k = k.clone();
        set.spawn(async move {
            let mut c = Conn::connect(sim)
                .await
                .map_err(|e| BenchError::io("connecting to the simulator", e))?;
            for i in 0..objects {
                let path = k.create_path();
                write(&mut c, "POST", &path, "application/json", &k.object(i, pad)).await?;
            }
            Ok::<_, BenchError>(())
        });
    }
    while let Some(j) = set.join_next().await {
        j.map_err(|e| BenchError::Run(e.to_string()))??;
    }
    Ok(())
}

/// The simulator's counters of one resource: LIST and WATCH requests, watches open.
#[derive(Debug, Clone, Copy, Default)]
struct Upstream {
    lists: u64,
    watches: u64,
    open: i64,
}

/// Every resource's [`Upstream`] counters, by `/sim/stats` key.
async fn upstream(sim: SocketAddr) -> Result<BTreeMap<String, Upstream>, BenchError> {
    let stats = targets::sim_stats(sim).await?;
    let Some(res) = stats["resources"].as_object() else {
        return Err(BenchError::Run("/sim/stats has no resources".into()));
    };
    Ok(res
        .iter()
        .map(|(k, v)| {
            let u = Upstream {
                lists: v["listRequests"].as_u64().unwrap_or(0),
                watches: v["watchRequests"].as_u64().unwrap_or(0),
                open: v["openWatches"].as_i64().unwrap_or(0),
            };
            (k.clone(), u)
        })
        .collect())
}

/// Watches open upstream over all resources.
fn open_total(u: &BTreeMap<String, Upstream>) -> i64 {
    u.values().map(|x| x.open).sum()
}

/// A LIST `resourceVersion=0` of `path`, retried after a 429 or a refused connection until
/// `deadline`; the list's resourceVersion.
async fn list_rv0(addr: SocketAddr, path: &str, deadline: Instant) -> Result<String, BenchError> {
    let q = format!("{path}?resourceVersion=0");
    loop {
        let retry = match client::list(addr, &q).await {
            Ok(l) if l.status == 200 => {
                return l.resource_version.ok_or_else(|| {
                    BenchError::Run(format!("no resourceVersion in the LIST of {path}"))
                });
            }
            Ok(l) if l.status == 429 => Duration::from_secs(l.retry_after.unwrap_or(1)),
            Ok(l) => {
                return Err(BenchError::Run(format!(
                    "watchmux answered {} to LIST {q}",
                    l.status
                )));
            }
            Err(_) => Duration::from_millis(20),
        };
        if Instant::now() + retry > deadline {
            return Err(BenchError::Run(format!(
                "LIST {q} not answered within {SETUP_BOUND:?}"
            )));
        }
        tokio::time::sleep(retry).await;
    }
}

/// Waits until the watchers' received events stop growing for half a second, reach
/// `expected`, or 5 s pass.
async fn drain(w: &Watchers, expected: u64) {
    let got = || w.stats.received_in_window.load(Ordering::Relaxed);
    let t0 = Instant::now();
    let (mut last, mut since) = (got(), Instant::now());
    while t0.elapsed() < Duration::from_secs(5) && got() < expected {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let now = got();
        if now != last {
            (last, since) = (now, Instant::now());
        } else if since.elapsed() >= Duration::from_millis(500) {
            return;
        }
    }
}

/// Merge patches at `rate` per second for `secs`, round-robin over `kinds` (object by object);
/// how many went to each kind.
async fn steady_writes(
    sim: SocketAddr,
    kinds: &[Kind],
    objects: usize,
    rate: f64,
    secs: f64,
) -> Result<Vec<u64>, BenchError> {
    let mut c = Conn::connect(sim)
        .await
        .map_err(|e| BenchError::io("connecting to the simulator", e))?;
    let mut per_kind = vec![0u64; kinds.len()];
    let total = (rate * secs).round() as usize;
    let t0 = tokio::time::Instant::now();
    for w in 0..total {
        tokio::time::sleep_until(t0 + Duration::from_secs_f64(w as f64 / rate)).await;
        let k = w % kinds.len();
        let name = format!("bench-{:03}", (w / kinds.len()) % objects.max(1));
        let path = format!("{}/{name}", kinds[k].create_path());
        // A value no earlier write set (an unchanged object makes no event).
        let stamp = kube_sim::util::now_unix_nanos().to_string();
        let patch = json!({"metadata": {"annotations": {"bench.example.com/write": stamp}}});
        write(
            &mut c,
            "PATCH",
            &path,
            "application/merge-patch+json",
            &patch,
        )
        .await?;
        per_kind[k] += 1;
    }
    Ok(per_kind)
}

/// One row: a fresh watchmux, its first answer and readiness, the informers, the steady writes;
/// then its figures.
async fn row_run(
    env: &Env,
    s: &Sizes,
    sim: &Proc,
    kinds: &[Kind],
    row: Row,
) -> Result<Vec<(&'static str, f64)>, BenchError> {
    let read = row.read(s, kinds.len());
    let before = upstream(sim.addr).await?;
    let t0 = Instant::now();
    let (mode, listed) = row.cache_config(kinds);
    let t = targets::start_watchmux_gvr(env, sim, &listed, mode, None).await?;
    let result = measure(s, sim, kinds, &read, &t, t0, &before).await;
    t.stop().await;
    // The simulator sees the upstream watches end (bounded: its count is what the next row's
    // figures start from).
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline && open_total(&upstream(sim.addr).await?) > open_total(&before)
    {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    result
}

/// The figures of one row against the running watchmux `t`, started at `t0`.
async fn measure(
    s: &Sizes,
    sim: &Proc,
    kinds: &[Kind],
    read: &[usize],
    t: &Target,
    t0: Instant,
    before: &BTreeMap<String, Upstream>,
) -> Result<Vec<(&'static str, f64)>, BenchError> {
    let deadline = t0 + SETUP_BOUND;
    let first = kinds[read[0]].collection();
    let (ready, first_answer) = tokio::join!(
        async {
            t.wait_ready(SETUP_BOUND).await?;
            Ok::<_, BenchError>(t0.elapsed())
        },
        async {
            list_rv0(t.addr, &first, deadline).await?;
            Ok::<_, BenchError>(t0.elapsed())
        }
    );
    let (ready, first_answer) = (ready?, first_answer?);
    let rss_start = procs::usage(&t.pids()).rss_bytes;
    // The informers' reads are counted from here (the first answer's LIST is not one).
    let metrics0 = scrape::scrape(t.addr).await?;

    // The informers: every LIST at once, then every WATCH from its list's resourceVersion.
    let setup = Instant::now();
    let mut lists = tokio::task::JoinSet::new();
    let mut watchers_of = vec![0u64; kinds.len()];
    for w in 0..s.ondemand_watchers {
        let k = read[w % read.len()];
        watchers_of[k] += 1;
        let (addr, path) = (t.addr, kinds[k].collection());
        lists.spawn(async move {
            let rv = list_rv0(addr, &path, deadline).await?;
            Ok::<_, BenchError>(format!(
                "{path}?watch=1&allowWatchBookmarks=true&resourceVersion={rv}"
            ))
        });
    }
    let mut paths = Vec::with_capacity(s.ondemand_watchers);
    while let Some(j) = lists.join_next().await {
        paths.push(j.map_err(|e| BenchError::Run(e.to_string()))??);
    }
    let watchers = Watchers::start(&t.h1(), paths, Encoding::Json);
    let (_, failed) = watchers.wait_started(SETUP_BOUND).await;
    let setup_s = setup.elapsed().as_secs_f64();
    if failed > 0 {
        let why = watchers.stats.first_failure.lock().clone();
        eprintln!("  {ID}: {failed} watches failed to start (first: {why:?})");
    }

    // Steady writes over every kind, read or not.
    watchers.stats.window.open();
    let writes = steady_writes(
        sim.addr,
        kinds,
        s.ondemand_objects,
        s.ondemand_rate,
        s.ondemand_secs,
    )
    .await;
    let expected: u64 = match &writes {
        Ok(w) => w.iter().zip(&watchers_of).map(|(a, b)| a * b).sum(),
        Err(_) => 0,
    };
    drain(&watchers, expected).await;
    watchers.stats.window.close();
    let received = watchers.stats.received_in_window.load(Ordering::Relaxed);
    let ended = watchers.stats.ended.load(Ordering::Relaxed);

    let rss = procs::usage(&t.pids()).rss_bytes;
    let after = upstream(sim.addr).await;
    let metrics = scrape::scrape(t.addr).await;
    let readyz = client::get_body(t.addr, "/readyz?verbose").await;
    watchers.close().await;
    writes?;
    let (after, metrics) = (after?, metrics?);
    let (_, readyz) = readyz.map_err(|e| BenchError::io("reading /readyz?verbose", e))?;
    let readyz_caches = String::from_utf8_lossy(&readyz)
        .lines()
        .filter(|l| l.starts_with("[+]cache/") || l.starts_with("[-]cache/"))
        .count();
    if ended > 0 {
        eprintln!("  {ID}: {ended} watches ended during the run");
    }

    let delta = |key: &str| {
        let (a, b) = (
            after.get(key).copied().unwrap_or_default(),
            before.get(key).copied().unwrap_or_default(),
        );
        Upstream {
            lists: a.lists.saturating_sub(b.lists),
            watches: a.watches.saturating_sub(b.watches),
            open: a.open - b.open,
        }
    };
    let per_kind: Vec<Upstream> = kinds.iter().map(|k| delta(&k.stats_key())).collect();
    let open: i64 = per_kind.iter().map(|u| u.open).sum();
    let reads = |labels: &[(&str, &str)]| {
        metrics.sum("watchmux_reads_total", labels) - metrics0.sum("watchmux_reads_total", labels)
    };
    Ok(vec![
        ("ready_s", ready.as_secs_f64()),
        ("first_answer_s", first_answer.as_secs_f64()),
        ("setup_s", setup_s),
        ("rss_start_mb", rss_start as f64 / MB),
        ("rss_mb", rss as f64 / MB),
        (
            "budget_mb",
            metrics.sum("watchmux_memory_used_bytes", &[]) / MB,
        ),
        ("kinds_cached", readyz_caches as f64),
        (
            "kinds_started",
            metrics.sum(
                "watchmux_cache_kind_changes_total",
                &[("change", "started")],
            ),
        ),
        (
            "upstream_lists",
            per_kind.iter().map(|u| u.lists).sum::<u64>() as f64,
        ),
        (
            "upstream_watches",
            per_kind.iter().map(|u| u.watches).sum::<u64>() as f64,
        ),
        ("upstream_open_watches", open as f64),
        (
            "kinds_watched",
            per_kind.iter().filter(|u| u.open > 0).count() as f64,
        ),
        (
            "max_open_per_kind",
            per_kind.iter().map(|u| u.open).max().unwrap_or(0) as f64,
        ),
        (
            "other_open",
            (open_total(&after) - open_total(before) - open) as f64,
        ),
        ("cache_reads", reads(&[("source", "cache")])),
        ("passed_through", reads(&[("source", "pass_through")])),
        (
            "watches_passed",
            reads(&[("source", "pass_through"), ("verb", "watch")]),
        ),
        (
            "delivered_pct",
            100.0 * received as f64 / expected.max(1) as f64,
        ),
        ("failed_watches", failed as f64),
        ("kinds_read", read.len() as f64),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forty_kinds_are_built_in_and_custom_and_the_subset_mixes_both() {
        let k = kinds(40);
        assert_eq!(k.len(), 40);
        let custom = k.iter().filter(|x| x.group == CRD_GROUP).count();
        assert_eq!(custom, 16);
        assert!(k.iter().all(|x| x.resource != "secrets"));
        let keys: std::collections::BTreeSet<String> = k.iter().map(Kind::stats_key).collect();
        assert_eq!(keys.len(), 40);
        let sub = read_subset(40, 10);
        assert_eq!(sub, vec![3, 7, 11, 15, 19, 23, 27, 31, 35, 39]);
        let small = kinds(6);
        assert_eq!(small.iter().filter(|x| x.group == CRD_GROUP).count(), 2);
        let sub = read_subset(6, 2);
        assert_eq!(sub, vec![2, 5]);
        assert_eq!(small[5].group, CRD_GROUP);
        assert_ne!(small[2].group, CRD_GROUP);
        assert_eq!(read_subset(3, 10), vec![0, 1, 2]);
    }

    #[test]
    fn objects_carry_their_type_and_padding() {
        for k in kinds(40) {
            let o = k.object(7, 1024);
            assert_eq!(o["kind"], k.kind.as_str());
            assert_eq!(o["metadata"]["name"], "bench-007");
            let len = o.to_string().len();
            assert!((1000..2000).contains(&len), "{} {len}", k.resource);
        }
    }
}
