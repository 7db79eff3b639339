//! The benchmark suite at tiny sizes, so it never rots: every scenario runs end to end against
//! every target (nginx when installed; over TLS and HTTP/2 too where the scenario does; S13
//! behind HAProxy when installed), writes
//! its reports, and the figures that do not depend on timing hold. And a short chaos soak (`watchmux-bench soak`) whose checks must all hold,
//! and a short HTTP fuzz (`watchmux-bench httpfuzz`) without findings.

use std::time::Duration;

use watchmux_bench::httpfuzz::{self, FuzzOptions, case::Transport};
use watchmux_bench::soak::{self, SoakOptions, plan::FaultKind};
use watchmux_bench::targets::TargetKind;
use watchmux_bench::{BenchOptions, BenchReport, Scenario, Sizes, report::Sample};

// The tests of this file run at once: each starts its own simulator and watchmux processes on
// their own ports and directories, and what they assert does not depend on timing (the bench's
// figures that do are reported, not asserted). They mostly wait (the bench on its pauses and
// windows, the soak on its schedule): one after the other they took 140 s, at once about 35 s.

fn values(samples: &[Sample], scenario: &str, target: TargetKind, key: &str) -> Vec<f64> {
    samples
        .iter()
        .filter(|s| s.scenario == scenario && s.target == target)
        .flat_map(|s| s.values.iter().filter(|(k, _)| *k == key).map(|(_, v)| *v))
        .collect()
}

/// A smoke-sized bench run of `scenarios` against every target (nginx when installed), in a
/// directory of its own; checks the reports it writes (Markdown with every scenario, CSVs with
/// every sample, the fan-out PNG when S1 ran) and that each streaming and list scenario measured
/// every target, each case twice. Returns the report and the targets that ran.
async fn smoke_bench(scenarios: &[Scenario], ids: &[&str]) -> (BenchReport, Vec<TargetKind>) {
    let out = tempfile::tempdir().unwrap();
    let nginx = watchmux_bench::targets::find_nginx().is_some();
    let opts = BenchOptions {
        exe: env!("CARGO_BIN_EXE_watchmux-bench").into(),
        // S11's baseline build is this one too (the figures are the noise between two runs).
        baseline_exe: Some(env!("CARGO_BIN_EXE_watchmux-bench").into()),
        out: out.path().to_path_buf(),
        scenarios: scenarios.to_vec(),
        targets: TargetKind::ALL.to_vec(),
        sizes: Sizes::smoke(),
        command: "watchmux-bench run --smoke".into(),
    };
    let report = watchmux_bench::run(&opts).await.expect("bench runs");
    let s = &report.samples;
    let ran: Vec<&str> = report.specs.iter().map(|x| x.id).collect();
    assert_eq!(ran, ids);

    // Every streaming and list scenario measured every target, each case twice.
    let mut expected = vec![TargetKind::Watchmux, TargetKind::Direct, TargetKind::Limit];
    if nginx {
        expected.push(TargetKind::Nginx);
    } else {
        eprintln!("nginx not installed: its baseline is not exercised");
    }
    for sc in ["S1", "S2", "S3", "S5"]
        .into_iter()
        .filter(|x| ids.contains(x))
    {
        for &t in &expected {
            // Plain HTTP/1.1 cases (a TLS case is named `N · TLS`).
            let n = s
                .iter()
                .filter(|x| x.scenario == sc && x.target == t && !x.case.contains(" · "))
                .count();
            assert_eq!(n, 2, "{sc} {t}: {n} samples");
        }
    }

    // The reports: Markdown with every scenario, CSVs with every sample, a PNG of S1.
    let md = std::fs::read_to_string(out.path().join("results.md")).unwrap();
    for id in ids {
        assert!(
            md.contains(&format!("### {id} ")),
            "{id} missing from results.md"
        );
    }
    let csv = std::fs::read_to_string(out.path().join("samples.csv")).unwrap();
    let rows = csv.lines().count() - 1;
    assert_eq!(rows, s.iter().map(|x| x.values.len()).sum::<usize>());
    let summary = std::fs::read_to_string(out.path().join("summary.csv")).unwrap();
    assert!(summary.starts_with("scenario,case,target,metric,median"));
    let png = out.path().join("fanout.png");
    if ids.contains(&"S1") {
        let png = std::fs::read(png).unwrap();
        assert!(
            png.starts_with(b"\x89PNG\r\n\x1a\n"),
            "fanout.png is not a PNG"
        );
    } else {
        assert!(!png.exists(), "fanout.png without S1");
    }
    (report, expected)
}

// The suite runs as three groups at once (each mostly waits on its pauses and windows); S2, S4
// and S6 share one large simulator, so they stay in one run.

/// S1, S3 and S7 at smoke sizes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smoke_bench_broadcast_list_and_consistent_reads() {
    let (report, expected) = smoke_bench(
        &[Scenario::Broadcast, Scenario::List, Scenario::Consistent],
        &["S1", "S3", "S7.1", "S7.2"],
    )
    .await;
    let s = &report.samples;
    // S1: at this load every watcher receives every write of the window, through every target;
    // in smoke runs the limit program also runs S1 over TLS (S9 has every target's TLS).
    let tls_cases: Vec<&Sample> = s
        .iter()
        .filter(|x| x.scenario == "S1" && x.case.ends_with(" · TLS"))
        .collect();
    assert_eq!(tls_cases.len(), 2, "{tls_cases:?}");
    assert!(tls_cases.iter().all(|x| x.target == TargetKind::Limit));
    for &t in &expected {
        let d = values(s, "S1", t, "delivered_pct");
        assert!(
            d.iter().all(|p| (*p - 100.0).abs() < 1e-9),
            "S1 {t} delivered {d:?}"
        );
        let p50 = values(s, "S1", t, "p50_ms");
        assert!(p50.iter().all(|p| *p > 0.0), "S1 {t} p50 {p50:?}");
    }
    // S3: every target hands out a body of the same size (the same pods).
    let direct = values(s, "S3", TargetKind::Direct, "body_mb")[0];
    for &t in &expected {
        for b in values(s, "S3", t, "body_mb") {
            assert!(
                (b - direct).abs() / direct < 0.01,
                "S3 {t} body {b} vs {direct}"
            );
        }
    }

    // S7.1: consistent LISTs hand out the same pods through watchmux as from the simulator,
    // each watchmux LIST after a freshness check (shared or not) instead of the upstream's list.
    let sizes = Sizes::smoke();
    let s71 = |t| {
        s.iter()
            .filter(|x| x.scenario == "S7.1" && x.target == t)
            .count()
    };
    let per_target = sizes.repeats * sizes.consistent_pods.len() * sizes.consistent_clients.len();
    assert_eq!(s71(TargetKind::Watchmux), per_target);
    assert_eq!(s71(TargetKind::Direct), per_target);
    assert_eq!(s71(TargetKind::Nginx) + s71(TargetKind::Limit), 0);
    let direct = values(s, "S7.1", TargetKind::Direct, "body_mb")[0];
    for b in values(s, "S7.1", TargetKind::Watchmux, "body_mb") {
        assert!(
            (b - direct).abs() / direct < 0.01,
            "S7.1 body {b} vs {direct}"
        );
    }
    let full_kb = values(s, "S7.1", TargetKind::Direct, "upstream_kb_per_list");
    for kb in values(s, "S7.1", TargetKind::Watchmux, "upstream_kb_per_list") {
        assert!(
            kb < full_kb[0] / 4.0,
            "watchmux sent {kb} KB upstream per LIST"
        );
    }
    for c in values(s, "S7.1", TargetKind::Watchmux, "checks_per_list") {
        assert!(c > 0.0 && c <= 1.0, "checks per LIST {c}");
    }
    // S7.2: every case ran its rounds, and watchmux checked freshness for its consistent LISTs
    // (at most one check per LIST; whether a check beat its 3 s budget is timing, not asserted).
    let s72: Vec<&Sample> = s.iter().filter(|x| x.scenario == "S7.2").collect();
    // Two resources, idle and busy, with each of the two proofs.
    assert_eq!(s72.len(), 8 * sizes.repeats);
    for x in &s72 {
        let get = |k: &str| x.values.iter().find(|(n, _)| *n == k).map(|(_, v)| *v);
        let lists = sizes.freshness_rounds as f64;
        assert_eq!(get("lists"), Some(lists), "{x:?}");
        let checks: f64 = ["ahead", "state", "caught_up", "event", "bookmark", "failed"]
            .iter()
            .filter_map(|k| get(k))
            .sum();
        assert!((1.0..=lists).contains(&checks), "{x:?}");
        // The namespaces, few enough, are never proven by a short watch when states may be
        // compared.
        if x.case.starts_with("namespaces") && x.case.ends_with("state proof") {
            assert_eq!(
                (get("event"), get("bookmark")),
                (Some(0.0), Some(0.0)),
                "{x:?}"
            );
        }
    }

    // S1 over TLS beside plain HTTP/1.1.
    assert!(
        report.markdown.contains("Each transport ÷ plain HTTP/1.1"),
        "{}",
        report.markdown
    );
}

/// S6, S2, S4 (one large simulator) and S9 at smoke sizes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smoke_bench_sync_fleet_herd_and_watch_cost() {
    let (report, expected) = smoke_bench(
        &[
            Scenario::Sync,
            Scenario::Fleet,
            Scenario::Herd,
            Scenario::WatchCost,
        ],
        &["S6", "S2", "S4", "S9"],
    )
    .await;
    let s = &report.samples;
    // S6: watchmux synced the fleet's pods.
    let json = values(s, "S6", TargetKind::Watchmux, "json_mb");
    assert!(json.len() == 2 && json.iter().all(|j| *j > 0.0), "{json:?}");

    // S2: kubelets receive their pods' changes through watchmux.
    let d = values(s, "S2", TargetKind::Watchmux, "deliveries_per_s");
    assert!(d.iter().all(|x| *x > 0.0), "S2 deliveries {d:?}");

    // S4: without a cache every client's LIST and WATCH reaches the upstream; watchmux needs
    // only its own sync (a list and a watch, however many clients).
    let clients = Sizes::smoke().herd_clients as f64;
    for r in values(s, "S4", TargetKind::Direct, "upstream_requests") {
        assert_eq!(r, 2.0 * clients);
    }
    for r in values(s, "S4", TargetKind::Watchmux, "upstream_requests") {
        assert!(r <= 4.0, "watchmux herd cost {r} upstream requests");
    }

    // S9: every target held every watch over each transport it speaks.
    s9(&report, &expected);
    let md = &report.markdown;
    assert!(md.contains("Each transport ÷ plain HTTP/1.1"), "{md}");
    assert!(
        md.contains(
            "Not run on this machine:\n\n- 50 · h2 · limit: the limit program speaks HTTP/1.1 only"
        ),
        "{md}"
    );
}

/// S5 and S8 at smoke sizes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smoke_bench_idle_and_protobuf() {
    let (report, _) = smoke_bench(
        &[Scenario::Idle, Scenario::Protobuf],
        &["S5", "S8.1", "S8.2", "S8.3"],
    )
    .await;
    // S8: every case ran in both encodings through watchmux (the LIST's first protobuf one too).
    s8(&report.samples, &Sizes::smoke());
}

/// S10 at smoke sizes: watchmux listed and on demand over built-in and CRD-backed kinds. One
/// upstream watch per kind read however many watchers read it; on demand, only the kinds read
/// are cached; listed, every read comes from the cache.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smoke_bench_on_demand_kinds() {
    let (report, _) = smoke_bench(&[Scenario::OnDemand], &["S10"]).await;
    let sizes = Sizes::smoke();
    let (n, read, w) = (
        sizes.ondemand_kinds as f64,
        sizes.ondemand_read as f64,
        sizes.ondemand_watchers as f64,
    );
    let cases = [
        (format!("listed ({n} kinds)"), n),
        ("on-demand".to_string(), n),
        (format!("on-demand, {read} of {n} read"), read),
    ];
    for (case, kinds_read) in &cases {
        let rows: Vec<&Sample> = report
            .samples
            .iter()
            .filter(|x| x.scenario == "S10" && &x.case == case)
            .collect();
        assert_eq!(rows.len(), sizes.repeats, "{case}: {:?}", report.samples);
        for x in rows {
            let get = |k: &str| x.values.iter().find(|(n, _)| *n == k).map(|(_, v)| *v);
            assert_eq!(x.target, TargetKind::Watchmux);
            // Only the kinds read are cached (listed: all of them), each with one upstream watch.
            assert_eq!(get("kinds_cached"), Some(*kinds_read), "{case}: {x:?}");
            assert_eq!(
                get("upstream_open_watches"),
                Some(*kinds_read),
                "{case}: {x:?}"
            );
            assert_eq!(get("max_open_per_kind"), Some(1.0), "{case}: {x:?}");
            // Each watcher's LIST and WATCH, from the cache or passed through.
            let reads = get("cache_reads").unwrap() + get("passed_through").unwrap();
            assert_eq!(reads, 2.0 * w, "{case}: {x:?}");
            if case.starts_with("listed") {
                assert_eq!(get("passed_through"), Some(0.0), "{case}: {x:?}");
                assert_eq!(get("upstream_lists"), Some(n), "{case}: {x:?}");
            } else {
                assert_eq!(get("kinds_started"), Some(*kinds_read), "{case}: {x:?}");
            }
            // Every watcher received every write to its kind.
            assert_eq!(get("delivered_pct"), Some(100.0), "{case}: {x:?}");
        }
    }
}

/// S12 at smoke sizes: 5 nodes (kubelet and kube-proxy each, one HTTP/2 connection per node)
/// through watchmux and against the simulator directly, every phase. Every cold start synced;
/// after the upstream's outage every node checked holds what the simulator holds (its pods, one
/// synced informer per ConfigMap/Secret they reference, holding the object when it exists);
/// no client met an error status or an ERROR event. Each node sent its own token, reviewed
/// by watchmux's delegated authz through the simulator: every watchmux phase has a hit rate,
/// and its cold starts sent the simulator TokenReviews and SubjectAccessReviews.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smoke_bench_node_fleet() {
    let (report, _) = smoke_bench(&[Scenario::NodeFleet], &["S12.1", "S12.2", "S12.3"]).await;
    let sizes = Sizes::smoke();
    let n = sizes.nodefleet_nodes[0];
    let s = &report.samples;
    let table = |id: &str, t: TargetKind, phase: &str| -> Vec<(&'static str, f64)> {
        let case = format!("{n} · {phase}");
        let rows: Vec<&Sample> = s
            .iter()
            .filter(|x| x.scenario == id && x.target == t && x.case == case)
            .collect();
        assert_eq!(
            rows.len(),
            sizes.nodefleet_repeats,
            "{id} {t} {case}: {s:?}"
        );
        rows[0].values.clone()
    };
    let row = |t: TargetKind, phase: &str| table("S12.1", t, phase);
    let get = |v: &[(&'static str, f64)], k: &str| {
        v.iter()
            .find(|(n, _)| *n == k)
            .map(|(_, x)| *x)
            .unwrap_or(f64::NAN)
    };
    for t in [TargetKind::Watchmux, TargetKind::Direct] {
        let mut phases = vec!["cold start", "steady churn", "upstream down"];
        if t == TargetKind::Watchmux {
            phases.push("restart on persist_dir");
        }
        for phase in phases {
            let v = row(t, phase);
            assert_eq!(get(&v, "errors"), 0.0, "{t} {phase}: {v:?}");
            // Five kubelets and kube-proxies: eight fixed informers each, and the per-object
            // ones of their pods (kube-root-ca.crt of the pods' namespace at least).
            assert!(get(&v, "informers") > (8 * n) as f64, "{t} {phase}: {v:?}");
            let cold = phase == "cold start" || phase == "restart on persist_dir";
            if cold {
                assert!(get(&v, "sync_s").is_finite(), "{t} {phase}: {v:?}");
                assert!(get(&v, "initial_mb") > 0.0, "{t} {phase}: {v:?}");
            }
            let c = table("S12.2", t, phase);
            let hit = get(&c, "authz_hit_pct");
            if t == TargetKind::Watchmux {
                assert!((0.0..=100.0).contains(&hit), "{t} {phase}: {c:?}");
                let access = get(&c, "access_hit_pct");
                assert!((0.0..=100.0).contains(&access), "{t} {phase}: {c:?}");
                if cold {
                    assert!(get(&c, "up_token_reviews") >= n as f64, "{phase}: {c:?}");
                    assert!(get(&c, "up_access_reviews") > 0.0, "{phase}: {c:?}");
                }
            } else {
                assert!(hit.is_nan(), "{t} {phase}: {c:?}");
            }
        }
        let last = row(t, "upstream down");
        assert!(get(&last, "recover_s").is_finite(), "{t}: {last:?}");
        assert_eq!(get(&last, "converged_pct"), 100.0, "{t}: {last:?}");
    }
    // The cold starts' upstream requests per kind, for each target.
    let kinds = s.iter().filter(|x| x.scenario == "S12.3").count();
    assert_eq!(kinds, 9 * 3 * sizes.nodefleet_repeats, "{s:?}");
}

/// S13 at smoke sizes: HAProxy in front of three watchmux replicas, 30 watchers through it,
/// two rolling restarts (the second starting the replicas with `goaway_chance`) and an upstream
/// restart. Every phase reports its row and the targets are judged; what must hold at any size:
/// no watcher lost, repeated or reordered an event against the simulator's log, none relisted,
/// no replica answered 500, and each roll ended watches cleanly (the drains) and restarted every
/// replica. Skipped
/// (with the reason printed) where haproxy is not installed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smoke_bench_replicas_behind_haproxy() {
    if watchmux_bench::haproxy::Haproxy::find().is_none() {
        eprintln!(
            "skipped: haproxy is not installed (crates/watchmux-bench/scripts/install-haproxy installs it)"
        );
        return;
    }
    let (report, _) = smoke_bench(&[Scenario::Balancer], &["S13"]).await;
    let s = &report.samples;
    let phases = [
        "rolling restart",
        "upstream restart",
        "rolling restart, goaway_chance on",
        "rolling restart, max_connection_age on",
    ];
    for phase in phases {
        let rows: Vec<&Sample> = s
            .iter()
            .filter(|x| x.scenario == "S13" && x.case == phase)
            .collect();
        assert_eq!(rows.len(), 1, "{phase}: {s:?}");
        let get = |k: &str| {
            rows[0]
                .values
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, x)| *x)
                .unwrap_or_else(|| panic!("{phase}: no {k} in {:?}", rows[0]))
        };
        for k in ["lost", "duplicated", "out_of_order", "replica_500"] {
            assert_eq!(get(k), 0.0, "{phase}: {k} in {:?}", rows[0]);
        }
        // No relist but after a 410. One can happen in a roll, as between kube-apiservers: a
        // watch that reaches a draining replica gets kube's 503 with `Retry-After: 1`, and its
        // retry may reach the replica started meanwhile, whose history begins at its first
        // LIST, after the watch's resourceVersion (seen once in a smoke run, not in full runs).
        assert!(
            get("relists") <= get("gone_410"),
            "{phase}: a relist without a 410 in {:?}",
            rows[0]
        );
        assert!(get("secs") > 0.0, "{phase}: {:?}", rows[0]);
        if phase != "upstream restart" {
            assert!(get("stream_ends") > 0.0, "{phase}: {:?}", rows[0]);
            // Three replicas started again: a LIST and a WATCH of pods each, upstream.
            assert!(get("up_watches") >= 3.0, "{phase}: {:?}", rows[0]);
        }
    }
    let md = &report.markdown;
    assert!(md.contains("Targets (the issue's), per phase:"), "{md}");
    assert!(
        md.contains("| 0 events lost or duplicated (and none out of order) | **met**"),
        "{md}"
    );
}

/// S14 at smoke sizes: watchmux checking a cache of 500 pods every second, then the same with
/// the checks off. Every check of the window succeeded (the scenario fails otherwise), each
/// read one page of metadata, smaller than the full LIST of the sync, and the figures exist.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smoke_bench_consistency_checks() {
    let (report, _) = smoke_bench(&[Scenario::Checks], &["S14.1", "S14.2"]).await;
    let sizes = Sizes::smoke();
    let rows: Vec<&Sample> = report
        .samples
        .iter()
        .filter(|x| x.scenario == "S14.1")
        .collect();
    assert_eq!(
        rows.len(),
        sizes.checks_repeats.unwrap(),
        "{:?}",
        report.samples
    );
    for x in rows {
        let get = |k: &str| {
            x.values
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| *v)
                .unwrap_or_else(|| panic!("no {k} in {x:?}"))
        };
        assert_eq!(x.target, TargetKind::Watchmux);
        assert_eq!(x.case, sizes.checks_pods.to_string());
        assert!(get("checks") >= sizes.checks_count as f64, "{x:?}");
        // 500 pods: one page of 10,000.
        assert_eq!(get("pages_per_check"), 1.0, "{x:?}");
        assert!(get("check_mb") > 0.0, "{x:?}");
        assert!(get("check_list_ratio") < 1.0, "{x:?}");
        for k in ["cpu_ms_per_check", "idle_cpu_ms_per_s", "s_per_check"] {
            assert!(get(k).is_finite() && get(k) >= 0.0, "{k}: {x:?}");
        }
    }
    assert!(report.markdown.contains("net CPU-ms per check"));
    // S14.2: both cases ran; each event reached the watchers once in all, and the four shard
    // watchers cost one filter evaluation per event, as the one watcher of everything does.
    for case in ["1 unsharded", "4 shards"] {
        let x = report
            .samples
            .iter()
            .find(|x| x.scenario == "S14.2" && x.case == case)
            .unwrap_or_else(|| panic!("no S14.2 {case}: {:?}", report.samples));
        let get = |k: &str| {
            x.values
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| *v)
                .unwrap()
        };
        assert!(get("events_per_s") > 0.0, "{x:?}");
        let evaluations = get("evaluations_per_event");
        assert!(
            (0.9..1.1).contains(&evaluations),
            "{case}: {evaluations} evaluations per event"
        );
        assert!(get("cpu_us_per_event").is_finite(), "{x:?}");
    }
}

/// S9's figures that do not depend on timing: every watch established over plain HTTP/1.1,
/// TLS and HTTP/2 (the limit program: not HTTP/2, recorded as not run), a heap figure for the
/// bench's own roles and none for nginx.
fn s9(report: &watchmux_bench::BenchReport, expected: &[TargetKind]) {
    let sizes = Sizes::smoke();
    let n = sizes.watchcost_watches[0];
    let s = &report.samples;
    let get = |case: &str, t: TargetKind, key: &str| -> Vec<f64> {
        s.iter()
            .filter(|x| x.scenario == "S9" && x.case == case && x.target == t)
            .flat_map(|x| x.values.iter().filter(|(k, _)| *k == key).map(|(_, v)| *v))
            .collect()
    };
    for case in [n.to_string(), format!("{n} · TLS"), format!("{n} · h2")] {
        for &t in expected {
            let established = get(&case, t, "established");
            if t == TargetKind::Limit && case.ends_with("h2") {
                assert!(established.is_empty(), "{case} {t}");
                continue;
            }
            assert_eq!(established, [n as f64], "{case} {t}");
            let rss = get(&case, t, "rss_kb_per_watch");
            assert!(
                rss.len() == 1 && rss[0].is_finite(),
                "{case} {t} rss {rss:?}"
            );
            let heap = get(&case, t, "heap_kb_per_watch");
            if t == TargetKind::Nginx {
                assert!(
                    heap.iter().all(|h| h.is_nan()),
                    "{case} nginx heap {heap:?}"
                );
            } else {
                // Each watch's state is on the target's heap.
                assert!(heap.len() == 1 && heap[0] > 0.0, "{case} {t} heap {heap:?}");
            }
        }
    }
    let skipped: Vec<String> = report
        .not_run
        .iter()
        .map(|x| format!("{} {} {}", x.scenario, x.case, x.target))
        .collect();
    assert_eq!(skipped, [format!("S9 {n} · h2 limit")]);
}

/// The figure `key` of S8 table `id`'s `variant` samples, one per repeat.
fn s8_values(s: &[Sample], id: &str, variant: &str, key: &str) -> Vec<f64> {
    let suffix = format!(" · {variant}");
    s.iter()
        .filter(|x| x.scenario == id && x.case.ends_with(&suffix))
        .flat_map(|x| x.values.iter().filter(|(k, _)| *k == key).map(|(_, v)| *v))
        .collect()
}

/// S8's figures that do not depend on timing.
fn s8(s: &[Sample], sizes: &Sizes) {
    let r = sizes.repeats;
    assert!(
        s.iter()
            .filter(|x| x.scenario.starts_with("S8"))
            .all(|x| x.target == TargetKind::Watchmux)
    );
    // S8.1: every watcher got every write of the window in either encoding (the protobuf
    // client read each write's stamp out of a protobuf event), and protobuf events are smaller.
    let cases = sizes.protobuf_watchers.len() * r;
    for enc in ["JSON", "protobuf"] {
        let d = s8_values(s, "S8.1", enc, "delivered_pct");
        assert_eq!(d.len(), cases, "S8.1 {enc}");
        assert!(
            d.iter().all(|p| (*p - 100.0).abs() < 1e-9),
            "S8.1 {enc} delivered {d:?}"
        );
        let p50 = s8_values(s, "S8.1", enc, "p50_ms");
        assert!(p50.iter().all(|p| *p > 0.0), "S8.1 {enc} p50 {p50:?}");
    }
    let json = s8_values(s, "S8.1", "JSON", "bytes_per_event");
    let pb = s8_values(s, "S8.1", "protobuf", "bytes_per_event");
    assert!(
        json.iter().all(|b| *b > 1000.0),
        "JSON bytes per event {json:?}"
    );
    assert!(
        pb.iter().all(|b| *b > 100.0 && *b < json[0]),
        "protobuf bytes per event {pb:?} vs JSON {json:?}"
    );
    // S8.2: both encodings decoded (to the sample pod: decode_case checks its name) and the
    // transcoder ran; the protobuf event is the smaller.
    let json = s8_values(s, "S8.2", "JSON", "event_bytes");
    let pb = s8_values(s, "S8.2", "protobuf", "event_bytes");
    assert_eq!((json.len(), pb.len()), (r, r));
    assert!(pb[0] < json[0], "event bytes {pb:?} vs {json:?}");
    for k in ["decode_ns", "to_protobuf_ns", "to_json_ns"] {
        let v = s8_values(s, "S8.2", "protobuf", k);
        assert!(v.len() == r && v.iter().all(|x| *x > 0.0), "S8.2 {k} {v:?}");
    }
    // S8.3: a LIST in each encoding served from watchmux's cache, decoded by a typed client
    // into every pod; the protobuf body is the smaller.
    let pods = sizes.protobuf_list_pods as f64;
    for enc in ["JSON", "protobuf (first)", "protobuf"] {
        let up = s8_values(s, "S8.3", enc, "upstream_requests");
        assert!(
            up.len() == r && up.iter().all(|u| *u == 0.0),
            "S8.3 {enc} upstream {up:?}"
        );
    }
    for enc in ["JSON", "protobuf"] {
        let items = s8_values(s, "S8.3", enc, "items");
        assert!(
            items.len() == r && items.iter().all(|i| *i == pods),
            "S8.3 {enc} items {items:?}"
        );
    }
    let json = s8_values(s, "S8.3", "JSON", "body_mb");
    let first = s8_values(s, "S8.3", "protobuf (first)", "body_mb");
    let pb = s8_values(s, "S8.3", "protobuf", "body_mb");
    assert!(
        pb[0] < json[0] && first[0] == pb[0],
        "bodies {json:?} {first:?} {pb:?}"
    );
}

/// A short soak: a hundred watchers of every kind through watchmux while the simulator churns
/// and injects every kind of fault; every check holds (no resourceVersion twice or out of order,
/// every view equal to the simulator's state, open files back to their baseline, no panic).
/// The checker itself is shown to catch a lost, duplicated or reordered event by its unit tests
/// (`soak::checker`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn short_chaos_soak_passes_every_check() {
    let out = tempfile::tempdir().unwrap();
    let mut opts = SoakOptions::new(env!("CARGO_BIN_EXE_watchmux-bench").into());
    opts.duration = Duration::from_secs(25);
    opts.watchers = 100;
    opts.churn_per_sec = 50.0;
    opts.seed = 15;
    opts.settle_timeout = Duration::from_secs(90);
    opts.out = Some(out.path().to_path_buf());
    opts.command = "watchmux-bench soak (smoke test)".into();
    let r = soak::run(&opts).await.expect("the soak runs");
    assert!(r.passed, "{}", r.markdown);
    let f = &r.findings;
    for k in FaultKind::ALL {
        assert!(
            f.faults.get(&k).copied().unwrap_or(0) >= 1,
            "{k:?} not injected"
        );
    }
    assert!(f.violations.is_empty(), "{:?}", f.violations);
    // Every transport and encoding delivered events, and watchers resumed.
    for kind in [
        "chunked/JSON",
        "chunked/protobuf",
        "websocket/JSON",
        "websocket/protobuf",
    ] {
        let events: u64 = f
            .mix
            .iter()
            .filter(|(k, _)| k.starts_with(kind))
            .map(|(_, r)| r.counts.events.values().sum::<u64>())
            .sum();
        assert!(events > 0, "no events over {kind}");
    }
    assert!(f.totals.resumes > 0 && f.totals.planned_disconnects > 0);
    assert_eq!(f.checks.len(), 9);
    let md = std::fs::read_to_string(out.path().join("soak.md")).unwrap();
    assert!(md.starts_with("# watchmux chaos soak: PASSED"), "{md}");
    let csv = std::fs::read_to_string(out.path().join("soak-rss.csv")).unwrap();
    assert!(csv.lines().count() > 10, "{csv}");
}

/// A short HTTP fuzz (`watchmux-bench httpfuzz`): 1,500 generated and mutated requests over
/// every transport (HTTP/1, websocket, h2c, raw HTTP/1 and HTTP/2 bytes) with a fixed seed,
/// and not one finding: every answer well-formed, every error a kube Status, no 5xx kube would
/// not send, no panic, watchmux's connections and files back to their baseline, its cache equal
/// to the simulator. The checker itself is shown to fail by its unit tests (`httpfuzz::check`:
/// a non-Status error body, a 500, a broken watch event, a panic line).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn short_http_fuzz_has_no_findings() {
    let mut opts = FuzzOptions::new(env!("CARGO_BIN_EXE_watchmux-bench").into());
    opts.requests = 1500;
    opts.seed = 15;
    opts.concurrency = 48;
    opts.limits.watch = Duration::from_millis(100);
    opts.pods = 60;
    opts.settle = Duration::from_secs(15);
    opts.command = "watchmux-bench httpfuzz (smoke test)".into();
    let r = httpfuzz::run(&opts).await.expect("the fuzz runs");
    assert!(r.passed, "{}", r.markdown);
    assert_eq!(r.stats.cases, 1500);
    for t in [
        Transport::Http1,
        Transport::WebSocket,
        Transport::H2,
        Transport::RawHttp1,
        Transport::RawH2,
    ] {
        assert!(
            r.stats.sent.keys().any(|(x, _)| *x == t),
            "no {} case",
            t.name()
        );
    }
    for code in ["101", "200", "201", "400", "404", "431"] {
        assert!(r.stats.statuses.contains_key(code), "no {code} answer");
    }
    assert_eq!(r.after.cache.len(), 3);
    assert!(r.after.cache.iter().all(|c| c.matched && c.sim > 0));
}

/// A short `watchmux-bench persist`: every start (no directory, an empty one, restored with the
/// upstream up and down) serves every pod; the restarts from disk serve them without a pod LIST
/// from the upstream before their relist (none at all with the upstream down), the first start
/// leaves a directory with the state in it, and under churn the persisting watchmux writes
/// what it receives to disk while the other writes nothing of the kind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn short_persist_bench_restores_and_measures_writes() {
    use watchmux_bench::persist::{self, PersistOptions, restart::StartKind};
    let out = tempfile::tempdir().unwrap();
    let mut opts = PersistOptions::smoke(env!("CARGO_BIN_EXE_watchmux-bench").into());
    opts.out = Some(out.path().to_path_buf());
    opts.command = "watchmux-bench persist (smoke test)".into();
    let r = persist::run(&opts).await.expect("the persist bench runs");
    let pods = r.fleet.pods;
    assert_eq!(pods, opts.pods as u64);
    assert_eq!(r.starts.len(), 4 * opts.repeats);
    for s in &r.starts {
        assert_eq!(s.served_items, pods, "{s:?}");
        assert!(s.served_s.is_some() && s.served_bytes > 0, "{s:?}");
        // With the upstream up every start ends following it; with it down none can.
        assert_eq!(s.fresh_s.is_some(), s.kind.upstream_up(), "{s:?}");
        match s.kind {
            StartKind::Fresh => {
                assert!(s.ready_s.is_some(), "{s:?}");
                assert_eq!(s.dir_bytes, 0);
                let u = s.upstream.expect("upstream up");
                assert!(u.pod_lists >= 1 && u.pod_items >= pods, "{s:?}");
            }
            StartKind::FreshPersisted => {
                assert!(s.checkpoint_s.is_some(), "{s:?}");
                // The state holds every pod's JSON, which the LIST carried too.
                assert!(s.dir_bytes > s.served_bytes / 2, "{s:?}");
            }
            StartKind::RestoredUp => {
                // Served from disk, then re-watched from the disk's resourceVersion (well inside
                // the simulator's history): following the upstream without a LIST.
                assert_eq!(s.reconciled_as, Some("watched"), "{s:?}");
                let u = s.upstream.expect("upstream up");
                assert_eq!(u.pod_lists, 0, "{s:?}");
                assert!(s.dir_bytes > 0);
            }
            StartKind::RestoredDown => {
                assert!(s.upstream.is_none() && s.reconciled_s.is_none());
                assert!(s.dir_bytes > 0);
            }
        }
    }
    assert_eq!(r.churn.len(), 2 * opts.repeats);
    for s in &r.churn {
        assert!(s.events > 0.0 && s.event_bytes > 0.0, "{s:?}");
        if s.persisted {
            // Every event is appended (its JSON plus a record's frame): at least about what
            // the upstream sent.
            assert!(s.persist_bytes > 0.5 * s.event_bytes, "{s:?}");
            assert!(
                s.disk_bytes > 0.0 && s.dropped == 0.0 && s.write_errors == 0.0,
                "{s:?}"
            );
        } else {
            assert_eq!(
                (s.persist_bytes, s.checkpoints, s.disk_bytes),
                (0.0, 0.0, 0.0)
            );
        }
    }
    let md = std::fs::read_to_string(out.path().join("persist.md")).unwrap();
    assert!(
        md.contains("## Restart time") && md.contains("## Write amplification"),
        "{md}"
    );
    let csv = std::fs::read_to_string(out.path().join("persist.csv")).unwrap();
    assert!(csv.lines().count() > 40, "{csv}");
}

/// S11 at smoke sizes, this binary as both builds: every table has each build's figures in
/// every repeat, both read the same pods, and the report puts the builds side by side. (Its
/// targets are reported, not asserted.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smoke_bench_pbnative_builds() {
    let ids = ["S11.1", "S11.2", "S11.3", "S11.4", "S11.5"];
    let (report, _) = smoke_bench(&[Scenario::PbNative], &ids).await;
    let sizes = Sizes::smoke();
    let get = |x: &Sample, k: &str| x.values.iter().find(|(n, _)| *n == k).map(|(_, v)| *v);
    for id in ids {
        for build in ["baseline", "current"] {
            let rows: Vec<&Sample> = report
                .samples
                .iter()
                .filter(|x| x.scenario == id && x.case.ends_with(&format!(" · {build}")))
                .collect();
            assert_eq!(rows.len(), sizes.repeats, "{id} {build}");
            for x in rows {
                match id {
                    "S11.1" => {
                        assert!(get(x, "json_mb").unwrap() > 0.0, "{x:?}");
                        assert!(get(x, "rss_per_json_json2").unwrap() > 0.0, "{x:?}");
                    }
                    "S11.2" | "S11.3" => {
                        let (pb, json) = (get(x, "pb_body_mb"), get(x, "json_body_mb"));
                        assert!(pb.or(json).unwrap() > 0.0, "{x:?}");
                    }
                    "S11.4" => {
                        assert!(get(x, "pb_cpu_per_m").unwrap().is_finite(), "{x:?}");
                        assert!(get(x, "json_delivered_pct").unwrap() > 0.0, "{x:?}");
                    }
                    _ => assert!(get(x, "sync_s").unwrap() > 0.0, "{x:?}"),
                }
            }
        }
    }
    // Both builds listed the same simulator.
    let json: Vec<f64> = values(&report.samples, "S11.1", TargetKind::Watchmux, "json_mb");
    assert!(json.windows(2).all(|w| w[0] == w[1]), "{json:?}");
    assert!(
        report
            .markdown
            .contains("| baseline | current | current ÷ baseline | target |"),
        "{}",
        report.markdown
    );
}
