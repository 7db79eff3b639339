//! Node-fleet load: one watchmux in front of a simulated fleet, one kubelet-like pod watch per
//! node (`fieldSelector=spec.nodeName=<node>`), churn in the simulator; reports the selector
//! evaluations per upstream event, deliveries per second and delivery latency (receive time
//! minus the write time the simulator stamps into each pod).
//!
//! `ulimit -n 65536; cargo run --release -p watchmux-bench --example fleet_load -- 5000 50000 2000 20`
//! (nodes, pods, churn writes per second, seconds measured)

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use kube_sim::fleet::{FleetSpec, WRITE_TIME_ANNOTATION};
use kube_sim::{SimConfig, Simulator, churn::ChurnSpec, util::now_unix_nanos};
use watchmux::app::App;
use watchmux::config::Config;
use watchmux::downstream;
use watchmux::upstream::Upstream;

fn arg(i: usize, d: u64) -> u64 {
    std::env::args()
        .nth(i)
        .and_then(|a| a.parse().ok())
        .unwrap_or(d)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let (nodes, pods, churn, secs) = (
        arg(1, 5000) as usize,
        arg(2, 50_000) as usize,
        arg(3, 2000) as f64,
        arg(4, 20),
    );
    let t0 = Instant::now();
    let sim = Simulator::start(SimConfig {
        fleet: Some(FleetSpec {
            nodes,
            pods,
            namespaces: 50,
            seed: 1,
        }),
        ..SimConfig::default()
    })
    .await?;
    println!(
        "simulator: {nodes} nodes, {pods} pods loaded in {:?}",
        t0.elapsed()
    );
    let mut config = Config::from_toml_str(include_str!("../../../config.toml"), "config.toml")?;
    config.upstream.url = Some(sim.url().parse()?);
    config.server.listen = "127.0.0.1:0".parse()?;
    let proxy = App::start(&config, Upstream::new(&config.upstream)?);
    let addr = downstream::bind_and_serve(proxy.clone(), config.server.listen).await?;
    while !proxy.ready() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let cache = proxy.cache("", "v1", "pods").expect("pods cached");
    println!("watchmux synced in {:?}", t0.elapsed());

    let received = Arc::new(AtomicU64::new(0));
    let lat_sum_us = Arc::new(AtomicU64::new(0));
    let lat_max_us = Arc::new(AtomicU64::new(0));
    let timed = Arc::new(AtomicU64::new(0));
    let client: Client<_, Empty<Bytes>> = Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(0)
        .build_http();
    let rv = cache.rv();
    for i in 0..nodes {
        let url = format!(
            "http://{addr}/api/v1/pods?watch=1&resourceVersion={rv}&fieldSelector=spec.nodeName%3Dnode-{i:05}"
        );
        let (c, received, sum, max, timed) = (
            client.clone(),
            received.clone(),
            lat_sum_us.clone(),
            lat_max_us.clone(),
            timed.clone(),
        );
        tokio::spawn(async move {
            let Ok(resp) = c.get(url.parse().unwrap()).await else {
                return;
            };
            let mut body = resp.into_body();
            let mut buf = Vec::new();
            while let Some(Ok(f)) = body.frame().await {
                let Ok(d) = f.into_data() else { continue };
                buf.extend_from_slice(&d);
                while let Some(p) = buf.iter().position(|&b| b == b'\n') {
                    let line: Vec<u8> = buf.drain(..=p).collect();
                    received.fetch_add(1, Ordering::Relaxed);
                    // Only writes that stamp their own time: not DELETED (last state) and not the
                    // simulated kubelet finishing a graceful delete.
                    let stamped_write = !line.starts_with(b"{\"type\":\"DELETED\"")
                        && memchr::memmem::find(&line, b"\"deletionTimestamp\"").is_none();
                    let needle = format!("\"{WRITE_TIME_ANNOTATION}\":\"");
                    if !stamped_write {
                        continue;
                    }
                    if let Some(at) = memchr::memmem::find(&line, needle.as_bytes()) {
                        timed.fetch_add(1, Ordering::Relaxed);
                        let rest = &line[at + needle.len()..];
                        let end = rest.iter().position(|&b| b == b'"').unwrap_or(0);
                        if let Ok(t) = std::str::from_utf8(&rest[..end])
                            .unwrap_or("0")
                            .parse::<u128>()
                        {
                            let us = (now_unix_nanos().saturating_sub(t) / 1000) as u64;
                            sum.fetch_add(us, Ordering::Relaxed);
                            max.fetch_max(us, Ordering::Relaxed);
                        }
                    }
                }
            }
        });
    }
    while cache.watcher_count() < nodes {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    println!(
        "{nodes} node watchers registered ({} unindexed) after {:?}",
        cache.unindexed_watchers(),
        t0.elapsed()
    );
    // Churn only once every watcher is in place.
    kube_sim::churn::spawn(
        sim.state(),
        ChurnSpec {
            per_second: churn,
            seed: 2,
            mix: Default::default(),
        },
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (e0, s0, r0) = (
        cache.counters.events_received.load(Ordering::Relaxed),
        cache.counters.selector_evaluations.load(Ordering::Relaxed),
        received.load(Ordering::Relaxed),
    );
    lat_sum_us.store(0, Ordering::Relaxed);
    lat_max_us.store(0, Ordering::Relaxed);
    timed.store(0, Ordering::Relaxed);
    let start = Instant::now();
    tokio::time::sleep(Duration::from_secs(secs)).await;
    let el = start.elapsed().as_secs_f64();
    let events = cache.counters.events_received.load(Ordering::Relaxed) - e0;
    let evals = cache.counters.selector_evaluations.load(Ordering::Relaxed) - s0;
    let got = received.load(Ordering::Relaxed) - r0;
    println!(
        "over {el:.1} s: {events} upstream pod events ({:.0}/s), {evals} selector evaluations = {:.2} per event",
        events as f64 / el,
        evals as f64 / events.max(1) as f64
    );
    println!(
        "deliveries: {got} ({:.0}/s), mean latency {:.2} ms, max {:.2} ms",
        got as f64 / el,
        lat_sum_us.load(Ordering::Relaxed) as f64
            / timed.load(Ordering::Relaxed).max(1) as f64
            / 1000.0,
        lat_max_us.load(Ordering::Relaxed) as f64 / 1000.0
    );
    Ok(())
}
