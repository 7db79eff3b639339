//! Measures what the README's `cargo run --release --example demo` costs with many watchers: the same simulator
//! fleet and watchmux in one process, N concurrent pod watches through watchmux, then the
//! upstream connection count (from the simulator's counters) and the process RSS.
//!
//! `cargo run --release -p watchmux-bench --example demo_load -- 1000`

use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use kube_sim::{SimConfig, Simulator, churn::ChurnSpec, fleet::FleetSpec};
use watchmux::app::App;
use watchmux::config::Config;
use watchmux::downstream;
use watchmux::upstream::Upstream;

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1000);
    // "list": informers after their list (watch from the list's RV); "watchlist": every watcher
    // first receives all 1,000 pods (watch-list / RV=0).
    let mode = std::env::args().nth(2).unwrap_or_else(|| "list".into());
    let sim = Simulator::start(SimConfig {
        fleet: Some(FleetSpec {
            nodes: 50,
            pods: 1000,
            namespaces: 10,
            seed: 1,
        }),
        churn: Some(ChurnSpec {
            per_second: 10.0,
            seed: 1,
            mix: Default::default(),
        }),
        ..SimConfig::default()
    })
    .await?;
    let mut config = Config::from_toml_str(include_str!("../../../config.toml"), "config.toml")?;
    config.upstream.url = Some(sim.url().parse()?);
    config.server.listen = "127.0.0.1:0".parse()?;
    let proxy = App::start(&config, Upstream::new(&config.upstream)?);
    let addr = downstream::bind_and_serve(proxy.clone(), config.server.listen).await?;
    while !proxy.ready() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let rss_before = rss_kib();
    let client: Client<_, Empty<Bytes>> = Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(0)
        .build_http();
    let started = Instant::now();
    let mut tasks = Vec::new();
    let list_rv = proxy.cache("", "v1", "pods").map(|c| c.rv()).unwrap_or(0);
    for i in 0..n {
        let rv = if mode == "watchlist" { 0 } else { list_rv };
        let url = format!(
            "http://{addr}/api/v1/pods?watch=1&resourceVersion={rv}&allowWatchBookmarks=true&labelSelector=app%21%3Dx{i}"
        );
        let c = client.clone();
        tasks.push(tokio::spawn(async move {
            let resp = c.get(url.parse().unwrap()).await.unwrap();
            let mut body = resp.into_body();
            let mut bytes = 0usize;
            while let Some(Ok(f)) = body.frame().await {
                bytes += f.data_ref().map_or(0, |d| d.len());
            }
            bytes
        }));
    }
    // Wait until every watcher is registered (after its initial events), then some churn.
    let deadline = Instant::now() + Duration::from_secs(300);
    while proxy
        .cache("", "v1", "pods")
        .map(|c| c.watcher_count())
        .unwrap_or(0)
        < n
        && Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let registered_after = started.elapsed();
    tokio::time::sleep(Duration::from_secs(5)).await;
    let stats = sim.stats();
    let res = &stats["resources"];
    let open: i64 = res
        .as_object()
        .unwrap()
        .values()
        .map(|r| r["openWatches"].as_i64().unwrap_or(0))
        .sum();
    let lists: u64 = res
        .as_object()
        .unwrap()
        .values()
        .map(|r| r["listRequests"].as_u64().unwrap_or(0))
        .sum();
    let watchers = proxy
        .cache("", "v1", "pods")
        .map(|c| c.watcher_count())
        .unwrap_or(0);
    println!(
        "mode {mode}: {n} downstream watchers requested, {watchers} registered (all registered after {registered_after:?})"
    );
    println!(
        "upstream: {open} open watch connections, {lists} list requests ({} cached resources)",
        config.cache.resources.len()
    );
    println!(
        "process RSS (simulator + watchmux): {} MiB before the watchers, {} MiB with them",
        rss_before / 1024,
        rss_kib() / 1024
    );
    for t in tasks {
        t.abort();
    }
    Ok(())
}
