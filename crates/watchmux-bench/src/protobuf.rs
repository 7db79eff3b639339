//! S8 protobuf: what serving `application/vnd.kubernetes.protobuf` (what every kubelet and
//! controller asks for) costs and saves against JSON, through watchmux only: the encoding is
//! the variable, not the target, so every case runs in both encodings, interleaved inside each
//! repeat (which goes first alternates between repeats, so drift falls on both alike). Three
//! tables:
//!
//! - S8.1 delivery: S1's broadcast (its writer and its latency method; the protobuf client reads
//!   the write stamp from the event's annotations, [`super::pbframe`]) with all watchers of one
//!   encoding per case; watchmux's CPU per delivery, bytes per event on the wire, latency.
//! - S8.2 decode: in the bench process, no server: the typed decoding of one realistic pod event
//!   in each encoding by a Rust client ([`super::decode`]), and the transcoder's cost per object
//!   version (`kube_wire::proto`, what watchmux pays once per object version and encoding).
//! - S8.3 LIST: one `resourceVersion=0` LIST of many pods from watchmux's cache in each encoding,
//!   the first protobuf LIST of a fresh watchmux (which transcodes every pod) apart from the
//!   repeated ones, and the client's decoding of the whole body.
//!
//! Drives clients and reads usage; starting and stopping processes is [`targets`]'s, the
//! streaming machinery [`scenarios`]'s, rendering [`super::report`]'s.

use std::hint::black_box;
use std::time::{Duration, Instant};

use super::client::{self, Encoding};
use super::decode::{self, DecodeError, SamplePod};
use super::procs::{self, PeakRss, Proc};
use super::report::{Sample, ScenarioSpec, Variants, median, variant_case};
use super::scenarios::{self, MB, brief, m};
use super::targets::{self, Env, Target, TargetKind};
use super::{BenchError, Sizes};
use kube_wire::proto;

/// Id of the delivery table.
pub const DELIVERY_ID: &str = "S8.1";
/// Id of the decode table.
pub const DECODE_ID: &str = "S8.2";
/// Id of the LIST table.
pub const LIST_ID: &str = "S8.3";

/// The variant name of the first protobuf LIST of a fresh watchmux.
const FIRST: &str = "protobuf (first)";
/// Bound on one LIST (100k pods take seconds).
const LIST_TIMEOUT: Duration = Duration::from_secs(300);
/// The base case of S8.2.
const POD_EVENT: &str = "one pod event";

/// The encodings in the order repeat `r` runs them.
fn order(r: usize) -> [Encoding; 2] {
    if r.is_multiple_of(2) {
        [Encoding::Json, Encoding::Protobuf]
    } else {
        [Encoding::Protobuf, Encoding::Json]
    }
}

fn encodings(ratio_metrics: Vec<&'static str>) -> Option<Variants> {
    Some(Variants {
        label: "encoding",
        names: vec![Encoding::Json.name(), Encoding::Protobuf.name()],
        ratio_metrics,
    })
}

/// The report tables of S8.
pub fn specs(s: &Sizes) -> Vec<ScenarioSpec> {
    vec![delivery_spec(s), decode_spec(s), list_spec(s)]
}

fn delivery_spec(s: &Sizes) -> ScenarioSpec {
    ScenarioSpec {
        id: DELIVERY_ID,
        name: "protobuf delivery",
        about: format!(
            "S1's broadcast through watchmux only, in each encoding: W watchers on all pods, all asking for JSON (`Accept: application/json`) or all for protobuf (`application/vnd.kubernetes.protobuf,application/json`, as kubelets ask); the simulator makes {} status writes/s to its {} pods for {} s. Bytes per event = the event bytes the watchers received in the window (a JSON line with its newline; a protobuf event with its 4-byte length; chunked framing not counted) ÷ those events. Latency = receive time − the write time the simulator stamps into the pod (the protobuf client reads it from the event's annotations without decoding the pod). CPU is watchmux's: per 1M deliveries, and per upstream event (protobuf adds one transcode per object version, shared by all watchers). Client CPU = the bench's watchers (the JSON client searches each line for the stamp; the protobuf one walks the event's messages to it). Other CPU = the machine's busy cores minus watchmux's, the simulator's and the bench's: what other processes took from the two cores during the window (near 0 on a quiet machine).",
            s.broadcast_rate, s.broadcast_pods, s.window_secs
        ),
        case_label: "watchers",
        metrics: vec![
            m("bytes_per_event", "bytes per event", false),
            m("deliveries_per_s", "deliveries/s", true),
            m("p50_ms", "p50 ms", false),
            m("p99_ms", "p99 ms", false),
            m("delivered_pct", "delivered %", true),
            m("cpu_s_per_million", "CPU-s per 1M deliveries", false),
            m("cpu_us_per_event", "CPU µs per event", false),
            m("cpu_cores", "CPU cores", false),
            m("rss_mb", "RSS MB", false),
            m("client_cpu_cores", "client CPU cores", false),
            m("upstream_events_per_s", "writes/s made", true),
            m("other_cpu_cores", "other CPU cores", false),
        ],
        ratio_metrics: vec![],
        scaling_metric: None,
        variants: encodings(vec![
            "bytes_per_event",
            "cpu_s_per_million",
            "p99_ms",
            "client_cpu_cores",
        ]),
        versus: None,
    }
}

fn decode_spec(s: &Sizes) -> ScenarioSpec {
    ScenarioSpec {
        id: DECODE_ID,
        name: "protobuf decode",
        about: format!(
            "In the bench process, no server: the median-sized of 201 of the simulator's fleet pods, as one `MODIFIED` watch event in each encoding, decoded by a Rust client into typed objects: JSON with serde_json into `{{type, object: Pod}}` with k8s-openapi's `Pod` (the object straight into its type, as kube-rs does), protobuf with prost into k8s-pb's `WatchEvent`, its object's `runtime.Unknown` envelope and `Pod` (client-go's steps). The protobuf event is made by watchmux's transcoder, as watchmux sends it. \"via k8s-openapi's WatchEvent\" = the JSON event decoded with k8s-openapi's own `WatchEvent<Pod>`, which reads the object into a `serde_json::Value` first. Decode = median over 25 batches of {} decodes each (per repeat; a warm-up batch first). JSON → protobuf = `kube_wire::proto::json_to_proto` of the pod, what watchmux pays once per object version served in protobuf; protobuf → JSON = `proto_to_json` (the reverse, for protobuf request bodies).",
            (s.decode_iterations / 25).max(1)
        ),
        case_label: "case",
        metrics: vec![
            m("event_bytes", "event bytes", false),
            m("decode_ns", "client decode ns per event", false),
            m("decode_mb_per_s", "client decode MB/s", true),
            m("via_value_ns", "via k8s-openapi's WatchEvent ns", false),
            m("to_protobuf_ns", "JSON → protobuf ns", false),
            m("to_json_ns", "protobuf → JSON ns", false),
        ],
        ratio_metrics: vec![],
        scaling_metric: None,
        variants: encodings(vec!["event_bytes", "decode_ns"]),
        versus: None,
    }
}

fn list_spec(s: &Sizes) -> ScenarioSpec {
    ScenarioSpec {
        id: LIST_ID,
        name: "protobuf LIST",
        about: format!(
            "One client LISTs `/api/v1/pods?resourceVersion=0` of {} pods from watchmux's cache in each encoding, keeping the body in memory; a fresh watchmux every repeat. `{FIRST}` is the first protobuf LIST after watchmux's sync, which transcodes every pod once (later LISTs and watches reuse those bytes); `protobuf` the repeated ones. Latency = request to last byte; CPU-s = watchmux's during the LIST; RSS growth = its peak RSS during the LIST (sampled every 20 ms) − before; RSS kept = after − before (the protobuf copies a first LIST leaves in the cache). Decode = the client's decoding of the whole body (serde_json into k8s-openapi's `List<Pod>`; prost into k8s-pb's `Unknown` and `PodList`), not repeated for the first LIST (same bytes); items = the pods decoded. Upstream requests = pod LISTs and WATCHes the simulator served during the LIST (0: served from the cache).",
            s.protobuf_list_pods
        ),
        case_label: "pods",
        metrics: vec![
            m("list_ms", "LIST ms", false),
            m("body_mb", "body MB", false),
            m("cpu_s", "CPU-s", false),
            m("rss_growth_mb", "RSS growth MB", false),
            m("rss_kept_mb", "RSS kept MB", false),
            m("decode_ms", "client decode ms", false),
            m("items", "items", true),
            m("upstream_requests", "upstream requests", false),
        ],
        ratio_metrics: vec![],
        scaling_metric: None,
        variants: Some(Variants {
            label: "encoding",
            names: vec![Encoding::Json.name(), FIRST, Encoding::Protobuf.name()],
            ratio_metrics: vec!["list_ms", "body_mb", "cpu_s", "decode_ms"],
        }),
        versus: None,
    }
}

/// Runs S8: delivery and LIST through watchmux (when it is among `kinds`), decode in-process.
pub async fn run(
    env: &Env,
    s: &Sizes,
    kinds: &[TargetKind],
    out: &mut Vec<Sample>,
) -> Result<(), BenchError> {
    let watchmux = kinds.contains(&TargetKind::Watchmux);
    if !watchmux {
        eprintln!("  S8 measures watchmux only: its delivery and LIST tables are left out");
    }
    if watchmux {
        delivery(env, s, out).await?;
    }
    decode_costs(s, out).await?;
    if watchmux {
        lists(env, s, out).await?;
    }
    Ok(())
}

/// S8.1: S1's simulator and writer, one watchmux, every watcher count in both encodings.
async fn delivery(env: &Env, s: &Sizes, out: &mut Vec<Sample>) -> Result<(), BenchError> {
    let sim = targets::start_sim(env, 50, s.broadcast_pods).await?;
    let t = targets::start(env, TargetKind::Watchmux, &sim, &["pods"]).await?;
    let result = delivery_cases(&sim, &t, s, out).await;
    t.stop().await;
    sim.stop().await;
    result
}

async fn delivery_cases(
    sim: &Proc,
    t: &Target,
    s: &Sizes,
    out: &mut Vec<Sample>,
) -> Result<(), BenchError> {
    for &w in &s.protobuf_watchers {
        for r in 0..s.repeats {
            for enc in order(r) {
                let paths = vec!["/api/v1/pods?watch=1".to_string(); w];
                let run = scenarios::broadcast_run(sim, t, paths, enc, s, w).await?;
                let expected = (w as u64 * run.upstream_stamped).max(1);
                let mut values = run.figures();
                values.push((
                    "delivered_pct",
                    100.0 * run.stamped_in_window as f64 / expected as f64,
                ));
                values.push((
                    "bytes_per_event",
                    run.bytes_in_window as f64 / run.deliveries_in_window.max(1) as f64,
                ));
                values.push(("other_cpu_cores", run.other_cpu_cores()));
                let sample = Sample {
                    scenario: DELIVERY_ID,
                    case: variant_case(&w.to_string(), enc.name()),
                    target: t.kind,
                    repeat: r,
                    values,
                };
                eprintln!(
                    "  {DELIVERY_ID} W={w} {} #{r}: {}",
                    enc.name(),
                    brief(&sample)
                );
                out.push(sample);
            }
        }
    }
    Ok(())
}

/// The median time of one `op`, in ns: `iterations` calls in 25 batches after a warm-up batch,
/// the median of the batches' means.
fn ns_per_op(
    iterations: usize,
    mut op: impl FnMut() -> Result<(), DecodeError>,
) -> Result<f64, DecodeError> {
    const BATCHES: usize = 25;
    let per = (iterations / BATCHES).max(1);
    let mut means = Vec::with_capacity(BATCHES);
    for batch in 0..=BATCHES {
        let t0 = Instant::now();
        for _ in 0..per {
            op()?;
        }
        if batch > 0 {
            means.push(t0.elapsed().as_nanos() as f64 / per as f64);
        }
    }
    Ok(median(&means))
}

/// The figures of one encoding of S8.2.
fn decode_case(
    pod: &SamplePod,
    enc: Encoding,
    iterations: usize,
) -> Result<Vec<(&'static str, f64)>, DecodeError> {
    let wrong = |got: Option<&str>| DecodeError::Frame(format!("decoded pod {got:?}"));
    let mut extra = Vec::new();
    let (bytes, ns) = match enc {
        Encoding::Json => {
            // On the wire the line ends with a newline, which the reader splits off.
            let event = &pod.json_event;
            let ns = ns_per_op(iterations, || {
                let p = decode::json_event(black_box(event))?;
                match p.metadata.name.as_deref() {
                    Some(n) if n == pod.name => Ok(()),
                    other => Err(wrong(other)),
                }
            })?;
            let via_value = ns_per_op(iterations, || {
                black_box(decode::json_event_via_value(black_box(event))?);
                Ok(())
            })?;
            extra.push(("via_value_ns", via_value));
            (event.len() + 1, ns)
        }
        Encoding::Protobuf => {
            let frame = &pod.protobuf_frame;
            let ns = ns_per_op(iterations, || {
                let p = decode::protobuf_event(black_box(frame))?;
                match p.metadata.as_ref().and_then(|m| m.name.as_deref()) {
                    Some(n) if n == pod.name => Ok(()),
                    other => Err(wrong(other)),
                }
            })?;
            (frame.len(), ns)
        }
    };
    let mut v = vec![
        ("event_bytes", bytes as f64),
        ("decode_ns", ns),
        ("decode_mb_per_s", bytes as f64 / ns * 1e9 / MB),
    ];
    v.extend(extra);
    if enc == Encoding::Protobuf {
        let msg = proto::message_for("v1", "Pod")
            .ok_or_else(|| DecodeError::Frame("the transcoder has no v1 Pod".into()))?;
        let to_protobuf = ns_per_op(iterations, || {
            black_box(proto::json_to_proto(msg, black_box(&pod.json))?);
            Ok(())
        })?;
        let to_json = ns_per_op(iterations, || {
            black_box(proto::proto_to_json(
                msg,
                black_box(&pod.protobuf),
                Some(("v1", "Pod")),
            )?);
            Ok(())
        })?;
        v.push(("to_protobuf_ns", to_protobuf));
        v.push(("to_json_ns", to_json));
    }
    Ok(v)
}

/// S8.2: CPU-bound, so it runs on a blocking thread, not on the runtime's workers.
async fn decode_costs(s: &Sizes, out: &mut Vec<Sample>) -> Result<(), BenchError> {
    let (repeats, iterations) = (s.repeats, s.decode_iterations);
    let samples = tokio::task::spawn_blocking(move || {
        let pod = decode::sample_pod()?;
        let mut samples = Vec::new();
        for r in 0..repeats {
            for enc in order(r) {
                samples.push(Sample {
                    scenario: DECODE_ID,
                    case: variant_case(POD_EVENT, enc.name()),
                    target: TargetKind::Watchmux,
                    repeat: r,
                    values: decode_case(&pod, enc, iterations)?,
                });
            }
        }
        Ok::<_, DecodeError>(samples)
    })
    .await
    .map_err(|e| BenchError::Run(format!("decode thread: {e}")))?
    .map_err(|e| BenchError::Run(format!("{DECODE_ID}: {e}")))?;
    for sample in samples {
        eprintln!(
            "  {DECODE_ID} {} #{}: {}",
            sample.case,
            sample.repeat,
            brief(&sample)
        );
        out.push(sample);
    }
    Ok(())
}

/// S8.3: one simulator of many pods; a fresh watchmux every repeat, whose first LIST is in
/// protobuf, then one LIST in each encoding.
async fn lists(env: &Env, s: &Sizes, out: &mut Vec<Sample>) -> Result<(), BenchError> {
    let pods = s.protobuf_list_pods;
    let sim = targets::start_sim(env, (pods / 30).max(1), pods).await?;
    let result = list_repeats(env, s, &sim, out).await;
    sim.stop().await;
    result
}

async fn list_repeats(
    env: &Env,
    s: &Sizes,
    sim: &Proc,
    out: &mut Vec<Sample>,
) -> Result<(), BenchError> {
    let pods = s.protobuf_list_pods;
    for r in 0..s.repeats {
        let t = targets::start(env, TargetKind::Watchmux, sim, &["pods"]).await?;
        let mut cases = vec![(FIRST, Encoding::Protobuf, false)];
        cases.extend(order(r).map(|e| (e.name(), e, true)));
        let mut result = Ok(());
        for (name, enc, decode) in cases {
            tokio::time::sleep(s.pause(1.0)).await;
            match list_case(sim, &t, enc, decode, pods).await {
                Ok(values) => {
                    let sample = Sample {
                        scenario: LIST_ID,
                        case: variant_case(&pods.to_string(), name),
                        target: t.kind,
                        repeat: r,
                        values,
                    };
                    eprintln!("  {LIST_ID} {name} #{r}: {}", brief(&sample));
                    out.push(sample);
                }
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        t.stop().await;
        result?;
    }
    Ok(())
}

/// Runs a list decoder; returns the items and the milliseconds it took (freeing them after is
/// not the decoder's time).
fn timed<T>(
    decode: impl FnOnce() -> Result<Vec<T>, DecodeError>,
) -> Result<(usize, f64), DecodeError> {
    let t0 = Instant::now();
    let items = decode()?;
    let ms = t0.elapsed().as_secs_f64() * 1000.0;
    Ok((items.len(), ms))
}

/// One LIST of all pods from `t` in `enc`, then (when `decode`) the client's decoding of the
/// body; the figures of S8.3.
async fn list_case(
    sim: &Proc,
    t: &Target,
    enc: Encoding,
    decode: bool,
    pods: usize,
) -> Result<Vec<(&'static str, f64)>, BenchError> {
    let path = "/api/v1/pods?resourceVersion=0";
    let pids = t.pids();
    let (l0, w0, _) = targets::sim_requests(sim.addr, "pods").await?;
    let before = procs::usage(&pids);
    let peak = PeakRss::start(pids.clone());
    let t0 = Instant::now();
    let (head, body) = tokio::time::timeout(LIST_TIMEOUT, client::get_body_as(t.addr, path, enc))
        .await
        .map_err(|_| BenchError::Run(format!("{LIST_ID}: LIST took over {LIST_TIMEOUT:?}")))?
        .map_err(|e| BenchError::io(format!("{LIST_ID}: {} LIST", enc.name()), e))?;
    let list_ms = t0.elapsed().as_secs_f64() * 1000.0;
    let peak = peak.finish();
    let after = procs::usage(&pids);
    let (l1, w1, _) = targets::settled_requests(sim.addr, "pods").await?;
    if head.status != 200 || !enc.answered_by(head.content_type.as_deref()) {
        return Err(BenchError::Run(format!(
            "{LIST_ID}: watchmux answered {} ({:?}) to a {} LIST",
            head.status,
            head.content_type,
            enc.name()
        )));
    }
    let mut v = vec![
        ("list_ms", list_ms),
        ("body_mb", body.len() as f64 / MB),
        ("cpu_s", after.cpu_secs - before.cpu_secs),
        (
            "rss_growth_mb",
            peak.saturating_sub(before.rss_bytes) as f64 / MB,
        ),
        (
            "rss_kept_mb",
            (after.rss_bytes as f64 - before.rss_bytes as f64) / MB,
        ),
        ("upstream_requests", ((l1 - l0) + (w1 - w0)) as f64),
    ];
    if decode {
        let (items, ms) = tokio::task::spawn_blocking(move || match enc {
            Encoding::Json => timed(|| decode::json_pod_list(&body)),
            Encoding::Protobuf => timed(|| decode::protobuf_pod_list(&body)),
        })
        .await
        .map_err(|e| BenchError::Run(format!("decode thread: {e}")))?
        .map_err(|e| {
            BenchError::Run(format!("{LIST_ID}: decoding the {} LIST: {e}", enc.name()))
        })?;
        if items != pods {
            return Err(BenchError::Run(format!(
                "{LIST_ID}: the {} LIST decoded to {items} pods, not {pods}",
                enc.name()
            )));
        }
        v.push(("decode_ms", ms));
        v.push(("items", items as f64));
    }
    Ok(v)
}
