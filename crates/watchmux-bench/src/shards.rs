//! S14.2 shard dispatch: what an event costs watchmux when the watchers of all pods are four
//! shard watchers (`shardSelector`, KEP-5866, each a quarter of the hashed uids) instead of one
//! watcher of everything. Either way each event is delivered once in all; the shard index
//! (`src/hub/index.rs`) offers it to the one shard watcher whose range holds the pod, so an event
//! should cost the same, not four filter evaluations.
//!
//! One simulator holds P pods; one watchmux process per repeat caches pods. Its `1 unsharded`
//! case then its `4 shards` case each run S1's streaming window ([`scenarios::stream_run`]): the
//! watchers connect from the simulator's current resourceVersion, the simulator's realistic
//! churn runs at W writes/s, watchmux's CPU over the window is divided by the events of the
//! window (a reference watcher on the simulator counts them). Filter evaluations and deliveries
//! per event are watchmux's own counters over the whole case.
//!
//! Drives the watchers and reads counters; starting and stopping processes is [`targets`]'s.

use std::time::Duration;

use super::client::Encoding;
use super::report::{Sample, ScenarioSpec};
use super::scenarios::{self, Churn, brief, m};
use super::scrape::{self, Metrics};
use super::targets::{self, Env, Target, TargetKind};
use super::{BenchError, Sizes};

/// The table's id.
pub const ID: &str = "S14.2";
const RESOURCE: &str = "pods";
const EVALUATIONS: &str = "watchmux_cache_selector_evaluations_total";
const DELIVERIES: &str = "watchmux_cache_deliveries_total";
const APPLIED: &str = "watchmux_cache_events_applied_total";

/// The cases: how many shard watchers (1: one watcher of everything, no selector).
const CASES: [usize; 2] = [1, 4];

fn case_name(shards: usize) -> String {
    if shards == 1 {
        "1 unsharded".into()
    } else {
        format!("{shards} shards")
    }
}

/// The table of S14.2.
pub fn spec(s: &Sizes) -> ScenarioSpec {
    ScenarioSpec::table(
        ID,
        "shard dispatch",
        format!(
            "One simulator holds {} pods of its fleet; each repeat starts one watchmux caching pods. Case `1 unsharded`: one JSON watch of all pods; case `4 shards`: four, each with `shardSelector=shardRange(object.metadata.uid, …)` over a quarter of the hash space. Each case connects its watchers from the simulator's current resourceVersion, then the simulator's realistic churn runs at {} writes/s for a warm-up second and a {} s window. CPU-µs per event = watchmux's CPU over the window ÷ the events of the window (a reference watcher on the simulator counts them); deliveries per event = events the case's watchers received in the window ÷ those events (1: each event once, in all); evaluations and deliveries counted = `{EVALUATIONS}` and `{DELIVERIES}` ÷ `{APPLIED}` over the whole case (1 evaluation per event: the one watcher the event concerns was offered it; 4 would be every shard watcher checked).",
            s.shard_pods, s.shard_rate, s.window_secs
        ),
        "watchers",
        vec![
            m("cpu_us_per_event", "CPU-µs per event", false),
            m("deliveries_per_event", "deliveries per event", true),
            m("evaluations_per_event", "evaluations per event", false),
            m(
                "counted_deliveries_per_event",
                "deliveries counted per event",
                false,
            ),
            m("events_per_s", "events/s", true),
            m("p99_ms", "p99 ms", false),
        ],
    )
}

/// Runs S14.2 (watchmux only).
pub async fn run(
    env: &Env,
    s: &Sizes,
    kinds: &[TargetKind],
    out: &mut Vec<Sample>,
) -> Result<(), BenchError> {
    if !kinds.contains(&TargetKind::Watchmux) {
        return Ok(());
    }
    let sim = targets::start_sim(env, (s.shard_pods / 30).max(1), s.shard_pods).await?;
    let result = async {
        for r in 0..super::checks::repeats(s) {
            let t = targets::start_watchmux_with(env, &sim, &[RESOURCE], "", None).await?;
            let cases = async {
                t.wait_ready(Duration::from_secs(600)).await?;
                for shards in CASES {
                    let values = case(&sim, &t, s, shards).await?;
                    let sample = Sample {
                        scenario: ID,
                        case: case_name(shards),
                        target: TargetKind::Watchmux,
                        repeat: r,
                        values,
                    };
                    eprintln!("  {ID} {} #{r}: {}", sample.case, brief(&sample));
                    out.push(sample);
                }
                Ok::<_, BenchError>(())
            }
            .await;
            t.stop().await;
            cases?;
        }
        Ok(())
    }
    .await;
    sim.stop().await;
    result
}

/// The watch paths of `shards` watchers: one of everything, or one per equal range of the
/// uids' hash space.
pub fn paths(shards: usize) -> Vec<String> {
    if shards == 1 {
        return vec!["/api/v1/pods?watch=1".into()];
    }
    let width = (1u128 << 64) / shards as u128;
    (0..shards as u128)
        .map(|i| {
            let end = if i + 1 == shards as u128 {
                1u128 << 64
            } else {
                (i + 1) * width
            };
            let sel = format!(
                "shardRange(object.metadata.uid, '0x{:016x}', '0x{end:016x}')",
                i * width
            );
            let sel: String = form_urlencoded::byte_serialize(sel.as_bytes()).collect();
            format!("/api/v1/pods?watch=1&shardSelector={sel}")
        })
        .collect()
}

/// watchmux's evaluations, deliveries and applied events of pods.
fn counts(m: &Metrics) -> [f64; 3] {
    let r = [("resource", RESOURCE)];
    [
        m.sum(EVALUATIONS, &r),
        m.sum(DELIVERIES, &r),
        m.sum(APPLIED, &r),
    ]
}

/// One case: `shards` watchers through a streaming window.
async fn case(
    sim: &super::procs::Proc,
    t: &Target,
    s: &Sizes,
    shards: usize,
) -> Result<Vec<(&'static str, f64)>, BenchError> {
    let before = counts(&scrape::scrape(t.addr).await?);
    let run = scenarios::stream_run(
        sim,
        t,
        paths(shards),
        Encoding::Json,
        Churn {
            per_second: s.shard_rate,
            mix: "realistic",
        },
        s,
        Duration::from_secs_f64(s.window_secs),
        None,
    )
    .await?;
    let after = counts(&scrape::scrape(t.addr).await?);
    let applied = (after[2] - before[2]).max(1.0);
    let f = run.figures();
    let get = |k: &str| f.iter().find(|(n, _)| *n == k).map_or(0.0, |(_, v)| *v);
    Ok(vec![
        ("cpu_us_per_event", get("cpu_us_per_event")),
        (
            "deliveries_per_event",
            run.deliveries_in_window as f64 / (get("upstream_events_per_s") * run.secs()).max(1.0),
        ),
        ("evaluations_per_event", (after[0] - before[0]) / applied),
        (
            "counted_deliveries_per_event",
            (after[1] - before[1]) / applied,
        ),
        ("events_per_s", get("upstream_events_per_s")),
        ("p99_ms", get("p99_ms")),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube_wire::shard::ShardSelector;

    /// The shard paths cover the hash space exactly, as four selectors kube accepts.
    #[test]
    fn four_shard_paths_cover_the_hash_space() {
        assert_eq!(paths(1), ["/api/v1/pods?watch=1"]);
        let ps = paths(4);
        assert_eq!(ps.len(), 4);
        let mut next = 0u128;
        for p in ps {
            let v = p.split("shardSelector=").nth(1).unwrap();
            let sel: String = form_urlencoded::parse(format!("s={v}").as_bytes())
                .next()
                .unwrap()
                .1
                .into_owned();
            let sel = ShardSelector::parse(&sel).unwrap();
            let r = sel.ranges()[0];
            assert_eq!(r.start(), next);
            next = r.end();
        }
        assert_eq!(next, 1 << 64);
    }
}
