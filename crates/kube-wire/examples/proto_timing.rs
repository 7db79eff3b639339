//! Timing of `proto_to_json` (protobuf → JSON) on the transcoder's fixtures and, with
//! `MEASURE_PODS=<file>` (one pod's JSON a line, e.g. the simulator's fleet pods written by
//! kube-sim's ignored test `dump_fleet_pods`), on those pods: the median time per call over
//! several rounds, and the JSON written per second.
//!
//! `cargo run --release -p kube-wire --example proto_timing [ROUNDS] [CASE]`
//!
//! A round decodes each case's objects about 50 ms long, or `PASSES` times (a fixed amount of
//! work, to count instructions or cycles with `perf stat` on a busy machine). `CASE` keeps the
//! cases whose name contains it. With `INTO` set, each case is also timed decoding all its
//! objects into one reused buffer (`proto_to_json_into`, as a list is written), and the same with
//! the trusted entry point for bytes decoded once before (`stored_proto_to_json_into`, as a cache
//! serves them): each line gives the time per object. `INTO=stored` times the trusted entry
//! point alone (to profile it).

use std::time::{Duration, Instant};

use kube_wire::proto::{
    MessageRef, json_to_proto, message_for, proto_to_json, proto_to_json_into,
    stored_proto_to_json_into,
};

/// How a case's objects are decoded.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    /// Each alone, into a new buffer (`proto_to_json`).
    Alone,
    /// All into one reused buffer (`proto_to_json_into`).
    Into,
    /// All into one reused buffer, trusted (`stored_proto_to_json_into`).
    Stored,
}

const FIXTURES: &[(&str, &str, &str)] = &[
    ("v1", "Pod", include_str!("../src/proto/testdata/pod.json")),
    (
        "v1",
        "Node",
        include_str!("../src/proto/testdata/node.json"),
    ),
    (
        "apps/v1",
        "Deployment",
        include_str!("../src/proto/testdata/deployment.json"),
    ),
    (
        "v1",
        "ConfigMap",
        include_str!("../src/proto/testdata/configmap.json"),
    ),
    (
        "discovery.k8s.io/v1",
        "EndpointSlice",
        include_str!("../src/proto/testdata/endpointslice.json"),
    ),
    (
        "apiextensions.k8s.io/v1",
        "CustomResourceDefinition",
        include_str!("../src/proto/testdata/crd.json"),
    ),
];

/// One case: its message, TypeMeta and encoded objects.
struct Case {
    name: String,
    msg: MessageRef,
    type_meta: (&'static str, &'static str),
    objects: Vec<Vec<u8>>,
}

/// The median and minimum time per object of `rounds` rounds of about 50 ms each: each object
/// decoded as `mode` says.
fn time(case: &Case, rounds: usize, mode: Mode) -> (Duration, Duration, usize) {
    let buffer = std::cell::RefCell::new(Vec::new());
    let once = || {
        let mut bytes = 0;
        let mut out = buffer.borrow_mut();
        out.clear();
        for pb in &case.objects {
            let tm = Some(case.type_meta);
            match mode {
                Mode::Alone => {
                    let json = proto_to_json(case.msg, pb, tm).expect("decodes");
                    bytes += json.len();
                }
                Mode::Into => proto_to_json_into(case.msg, pb, tm, &mut out).expect("decodes"),
                Mode::Stored => {
                    stored_proto_to_json_into(case.msg, pb, tm, &mut out).expect("decodes")
                }
            }
        }
        bytes + out.len()
    };
    let bytes = once();
    let start = Instant::now();
    once();
    let per_pass = start.elapsed().max(Duration::from_nanos(1));
    let passes = match std::env::var("PASSES").ok().and_then(|p| p.parse().ok()) {
        Some(passes) => passes,
        None => (Duration::from_millis(50).as_nanos() / per_pass.as_nanos()).max(1) as u32,
    };
    let mut samples: Vec<Duration> = (0..rounds)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..passes {
                std::hint::black_box(once());
            }
            start.elapsed() / (passes * case.objects.len() as u32)
        })
        .collect();
    samples.sort();
    (
        samples[samples.len() / 2],
        samples[0],
        bytes / case.objects.len(),
    )
}

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|r| r.parse().ok())
        .unwrap_or(15);
    let mut cases: Vec<Case> = FIXTURES
        .iter()
        .map(|&(v, kind, json)| {
            let msg = message_for(v, kind).expect("a root kind");
            let pb = json_to_proto(msg, json.as_bytes()).expect("encodes");
            Case {
                name: kind.to_string(),
                msg,
                type_meta: (v, kind),
                objects: vec![pb],
            }
        })
        .collect();
    if let Ok(path) = std::env::var("MEASURE_PODS") {
        let msg = message_for("v1", "Pod").expect("Pod");
        let text = std::fs::read_to_string(&path).expect("MEASURE_PODS names a readable file");
        let objects: Vec<Vec<u8>> = text
            .lines()
            .map(|l| json_to_proto(msg, l.as_bytes()).expect("a pod"))
            .collect();
        cases.push(Case {
            name: format!("{} fleet pods", objects.len()),
            msg,
            type_meta: ("v1", "Pod"),
            objects,
        });
    }
    if let Some(only) = std::env::args().nth(2) {
        cases.retain(|c| c.name.contains(&only));
    }
    let stored_only = std::env::var_os("INTO").is_some_and(|v| v == "stored");
    for case in &cases {
        if stored_only {
            let (median, min, _) = time(case, rounds, Mode::Stored);
            println!(
                "{:<26} {:<30} median {:>9.2?}  min {:>9.2?}",
                case.name, "stored", median, min
            );
            continue;
        }
        let (median, min, bytes) = time(case, rounds, Mode::Alone);
        let mbs = bytes as f64 / median.as_secs_f64() / 1e6;
        let pb = case.objects.iter().map(Vec::len).sum::<usize>() / case.objects.len();
        println!(
            "{:<26} {:>6} B protobuf {:>7} B JSON  median {:>9.2?}  min {:>9.2?}  {:>6.0} MB/s",
            case.name, pb, bytes, median, min, mbs
        );
        if std::env::var_os("INTO").is_some() {
            for (mode, label) in [(Mode::Into, "into one buffer"), (Mode::Stored, "stored")] {
                let (median, min, _) = time(case, rounds, mode);
                println!(
                    "{:<26} {:<30} median {:>9.2?}  min {:>9.2?}",
                    case.name, label, median, min
                );
            }
        }
    }
}
