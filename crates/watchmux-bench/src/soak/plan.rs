//! What a soak does, drawn from its seed: the watcher mix (transport, encoding, selector, how
//! each reads and resumes) and the fault schedule (which fault when, and its parameters). The
//! same seed, sizes and duration give the same plan, so a failing run can be replayed.
//!
//! Pure: no I/O and no clocks (times are offsets from the soak's start). Carrying the plan out
//! is [`super::watcher`]'s and [`super::chaos`]'s.

use std::time::Duration;

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use super::stream::Transport;
use crate::client::Encoding;

/// Which pods a watcher asks for: a collection path and its selector query.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Selector {
    /// `/api/v1/pods` or `/api/v1/namespaces/NS/pods`.
    pub path: String,
    /// `labelSelector=…&fieldSelector=…` (URL-encoded), or empty.
    pub query: String,
}

impl Selector {
    fn new(path: String, label: &str, field: &str) -> Selector {
        let mut q = form_urlencoded::Serializer::new(String::new());
        if !label.is_empty() {
            q.append_pair("labelSelector", label);
        }
        if !field.is_empty() {
            q.append_pair("fieldSelector", field);
        }
        Selector {
            path,
            query: q.finish(),
        }
    }

    /// `path?query&extra` (or `path?extra`).
    pub fn url(&self, extra: &str) -> String {
        match (self.query.is_empty(), extra.is_empty()) {
            (true, true) => self.path.clone(),
            (true, false) => format!("{}?{extra}", self.path),
            (false, true) => format!("{}?{}", self.path, self.query),
            (false, false) => format!("{}?{}&{extra}", self.path, self.query),
        }
    }

    /// Whether it selects every pod.
    pub fn is_all(&self) -> bool {
        self.path == "/api/v1/pods" && self.query.is_empty()
    }
}

/// How a watcher reads its stream.
#[derive(Debug, Clone, PartialEq)]
pub enum Reader {
    /// As fast as events come.
    Normal,
    /// Pauses after every event, and takes at most `read_limit` bytes per socket read.
    Slow {
        /// Pause after each event.
        pause: Duration,
        /// Bytes per socket read.
        read_limit: usize,
    },
    /// Stops reading for long periods (offset from the start, length): watchmux must cut it off.
    Stalled {
        /// The stalls.
        stalls: Vec<(Duration, Duration)>,
    },
}

impl Reader {
    /// Name in reports.
    pub fn name(&self) -> &'static str {
        match self {
            Reader::Normal => "normal",
            Reader::Slow { .. } => "slow",
            Reader::Stalled { .. } => "stalled",
        }
    }
}

/// One watcher.
#[derive(Debug, Clone)]
pub struct WatcherPlan {
    /// Index.
    pub id: usize,
    /// Chunked or websocket.
    pub transport: Transport,
    /// What it asks for.
    pub encoding: Encoding,
    /// Which pods.
    pub selector: Selector,
    /// How it reads.
    pub reader: Reader,
    /// Disconnects this often and resumes from its last resourceVersion.
    pub resume_every: Option<(Duration, Duration)>,
    /// Syncs with a watch-list (`sendInitialEvents=true`) instead of a LIST.
    pub watch_list: bool,
    /// `timeoutSeconds` of its watches.
    pub timeout_secs: u64,
    /// Seed of its own random choices (backoff jitter, disconnect times).
    pub seed: u64,
    /// When it starts, from the soak's start.
    pub start: Duration,
}

impl WatcherPlan {
    /// A short description: `chunked/JSON all normal`.
    pub fn kind(&self) -> String {
        let mut s = format!(
            "{}/{} {}",
            self.transport.name(),
            self.encoding.name(),
            self.reader.name()
        );
        if self.resume_every.is_some() {
            s.push_str(" resumer");
        }
        if self.watch_list {
            s.push_str(" watch-list");
        }
        s
    }
}

/// A fault the simulator injects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FaultKind {
    /// Every open watch is aborted.
    DropWatches,
    /// Connections are refused for a while (watches dropped too).
    Outage,
    /// The next requests are answered 429 (and watches dropped, so the proxy meets them).
    TooManyRequests,
    /// The next requests are answered 500 (and watches dropped).
    ServerError,
    /// The history is compacted at the current revision.
    Compaction,
    /// Compaction while the proxy's watch is down: its re-watch gets 410 and it must relist.
    GoneOnRewatch,
    /// A malformed line precedes the next event.
    Malformed,
    /// Every API answer is delayed for a while.
    SlowResponses,
    /// Watch streams deliver late for a while.
    WatchLag,
}

impl FaultKind {
    /// Every kind.
    pub const ALL: [FaultKind; 9] = [
        FaultKind::DropWatches,
        FaultKind::Outage,
        FaultKind::TooManyRequests,
        FaultKind::ServerError,
        FaultKind::Compaction,
        FaultKind::GoneOnRewatch,
        FaultKind::Malformed,
        FaultKind::SlowResponses,
        FaultKind::WatchLag,
    ];

    /// Name in reports.
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::DropWatches => "dropped watches",
            FaultKind::Outage => "outage (refused connections)",
            FaultKind::TooManyRequests => "429 answers",
            FaultKind::ServerError => "500 answers",
            FaultKind::Compaction => "compaction",
            FaultKind::GoneOnRewatch => "410 on re-watch",
            FaultKind::Malformed => "malformed event",
            FaultKind::SlowResponses => "slow responses",
            FaultKind::WatchLag => "lagging watch",
        }
    }
}

/// One scheduled fault.
#[derive(Debug, Clone, PartialEq)]
pub struct FaultPlan {
    /// When, from the soak's start.
    pub at: Duration,
    /// Which.
    pub kind: FaultKind,
    /// How long it lasts (outage, slow responses, lag); zero for one-shot faults.
    pub length: Duration,
    /// Its size: the delay or lag in ms, or how many error answers.
    pub amount: u64,
}

/// The sizes a plan is drawn for.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    /// Watchers.
    pub watchers: usize,
    /// Length of the chaos phase (churn and faults).
    pub duration: Duration,
    /// Nodes of the fleet (`node-00000` …).
    pub nodes: usize,
    /// Namespaces of the fleet (`fleet-0` …).
    pub namespaces: usize,
}

/// The watchers and faults of a soak.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Watchers.
    pub watchers: Vec<WatcherPlan>,
    /// Faults, in time order.
    pub faults: Vec<FaultPlan>,
}

fn secs(x: f64) -> Duration {
    Duration::from_secs_f64(x.max(0.0))
}

fn pick<T: Copy>(rng: &mut StdRng, weighted: &[(u32, T)]) -> T {
    let total: u32 = weighted.iter().map(|(w, _)| w).sum();
    let mut x = rng.random_range(0..total.max(1));
    for (w, t) in weighted {
        if x < *w {
            return *t;
        }
        x -= w;
    }
    weighted[0].1
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Sel {
    All,
    Namespace,
    Canary,
    Shards,
    Node,
    NotNode,
    StableOnNode,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Read {
    Normal,
    Slow,
    Stalled,
}

/// Watchers that every soak of at least this many has, so each behaviour is covered: (wire,
/// selector, reader, resumer, watch-list).
const ARCHETYPES: [(Transport, Encoding, Sel, Read, bool, bool); 8] = [
    (
        Transport::Chunked,
        Encoding::Json,
        Sel::All,
        Read::Stalled,
        false,
        false,
    ),
    (
        Transport::Websocket,
        Encoding::Json,
        Sel::All,
        Read::Stalled,
        false,
        false,
    ),
    (
        Transport::Chunked,
        Encoding::Protobuf,
        Sel::All,
        Read::Slow,
        false,
        false,
    ),
    (
        Transport::Chunked,
        Encoding::Json,
        Sel::Canary,
        Read::Normal,
        true,
        false,
    ),
    (
        Transport::Websocket,
        Encoding::Protobuf,
        Sel::Node,
        Read::Normal,
        false,
        true,
    ),
    (
        Transport::Chunked,
        Encoding::Json,
        Sel::All,
        Read::Normal,
        true,
        true,
    ),
    (
        Transport::Chunked,
        Encoding::Protobuf,
        Sel::All,
        Read::Stalled,
        false,
        false,
    ),
    (
        Transport::Websocket,
        Encoding::Json,
        Sel::Namespace,
        Read::Slow,
        true,
        false,
    ),
];

/// Draws the plan for `shape` from `seed`.
pub fn plan(seed: u64, shape: Shape) -> Plan {
    let mut rng = StdRng::seed_from_u64(seed);
    let d = shape.duration.as_secs_f64();
    // Watchers start over the first tenth of the run (at most 20 s), so thousands of initial
    // LISTs do not all land at once.
    let ramp = (d / 10.0).min(20.0);
    let watchers = (0..shape.watchers)
        .map(|id| {
            let (transport, encoding, sel, read, resumer, watch_list) = match ARCHETYPES.get(id) {
                Some(a) => *a,
                None => {
                    let (t, e) = pick(
                        &mut rng,
                        &[
                            (45, (Transport::Chunked, Encoding::Json)),
                            (25, (Transport::Websocket, Encoding::Json)),
                            (20, (Transport::Chunked, Encoding::Protobuf)),
                            (10, (Transport::Websocket, Encoding::Protobuf)),
                        ],
                    );
                    let sel = pick(
                        &mut rng,
                        &[
                            (35, Sel::All),
                            (15, Sel::Namespace),
                            (10, Sel::Canary),
                            (10, Sel::Shards),
                            (15, Sel::Node),
                            (5, Sel::NotNode),
                            (10, Sel::StableOnNode),
                        ],
                    );
                    let read = pick(
                        &mut rng,
                        &[(70, Read::Normal), (17, Read::Slow), (8, Read::Stalled)],
                    );
                    let resumer = read != Read::Stalled && rng.random_bool(0.15);
                    (t, e, sel, read, resumer, rng.random_bool(0.2))
                }
            };
            let node = format!("node-{:05}", rng.random_range(0..shape.nodes.max(1) as u64));
            let ns = format!(
                "fleet-{}",
                rng.random_range(0..shape.namespaces.max(1) as u64)
            );
            let all = "/api/v1/pods".to_string();
            let selector = match sel {
                Sel::All => Selector::new(all, "", ""),
                Sel::Namespace => Selector::new(format!("/api/v1/namespaces/{ns}/pods"), "", ""),
                Sel::Canary => Selector::new(all, "track=canary", ""),
                Sel::Shards => Selector::new(all, "shard in (1,2,3,4)", ""),
                Sel::Node => Selector::new(all, "", &format!("spec.nodeName={node}")),
                Sel::NotNode => Selector::new(all, "", &format!("spec.nodeName!={node}")),
                Sel::StableOnNode => {
                    Selector::new(all, "track=stable", &format!("spec.nodeName={node}"))
                }
            };
            let reader = match read {
                Read::Normal => Reader::Normal,
                Read::Slow => Reader::Slow {
                    pause: Duration::from_millis(rng.random_range(5..60)),
                    read_limit: 4096,
                },
                Read::Stalled => {
                    // Until watchmux cuts it off, the kernel holds what a stalled reader does
                    // not read (up to a 4 MiB send buffer on Linux), then watchmux its queue
                    // and its lag bound: megabytes of events. A short soak stalls for all of
                    // its chaos phase so that much goes by; a long one stalls twice, for a
                    // third to a half of it and then for a tenth.
                    let long = d >= 120.0;
                    let at = secs(d * rng.random_range(0.02..0.1));
                    let len = if long {
                        secs(d * rng.random_range(0.3..0.5))
                    } else {
                        secs(d)
                    };
                    let mut stalls = vec![(at, len)];
                    if long {
                        stalls.push((
                            secs(d * rng.random_range(0.6..0.7)),
                            secs(d * rng.random_range(0.1..0.15)),
                        ));
                    }
                    Reader::Stalled { stalls }
                }
            };
            let resume_every = resumer.then(|| {
                let lo = (d / 40.0).max(2.0);
                (secs(lo), secs((d / 10.0).max(lo * 2.0)))
            });
            // Stalled readers keep their watches past the whole soak: a stream that ends, ends
            // because watchmux cut it off (or a fault), not at its deadline.
            let lo = if read == Read::Stalled {
                (d * 3.0).max(600.0)
            } else {
                (d / 4.0).max(10.0)
            };
            WatcherPlan {
                id,
                transport,
                encoding,
                selector,
                reader,
                resume_every,
                watch_list,
                timeout_secs: rng.random_range(lo as u64..=(lo * 2.0) as u64),
                seed: rng.random(),
                start: secs(rng.random_range(0.0..=ramp)),
            }
        })
        .collect();
    Plan {
        watchers,
        faults: faults(&mut rng, d),
    }
}

/// Faults over [0.1 d, 0.8 d]: every kind once (in a random order), then random kinds, about
/// one every 8 s; each in its own slot so they never overlap (a fault's control requests must
/// not meet an outage).
fn faults(rng: &mut StdRng, d: f64) -> Vec<FaultPlan> {
    let (from, to) = (0.1 * d, 0.8 * d);
    let n = (((to - from) / 8.0).round() as usize).max(FaultKind::ALL.len());
    let slot = (to - from) / n as f64;
    let mut kinds = FaultKind::ALL.to_vec();
    kinds.shuffle(rng);
    while kinds.len() < n {
        kinds.push(FaultKind::ALL[rng.random_range(0..FaultKind::ALL.len())]);
    }
    kinds
        .into_iter()
        .enumerate()
        .map(|(i, kind)| {
            let start = from + slot * i as f64;
            // At most half the slot, so the next fault starts after this one ended.
            let room = slot / 2.0;
            let (length, amount) = match kind {
                FaultKind::Outage => (rng.random_range(0.3..3.0f64).min(room), 0),
                FaultKind::SlowResponses => (
                    rng.random_range(1.0..5.0f64).min(room),
                    rng.random_range(100..1000),
                ),
                FaultKind::WatchLag => (
                    rng.random_range(1.0..8.0f64).min(room),
                    rng.random_range(100..1500),
                ),
                FaultKind::TooManyRequests | FaultKind::ServerError => {
                    (0.0, rng.random_range(1..5))
                }
                _ => (0.0, 0),
            };
            FaultPlan {
                at: secs(start + rng.random_range(0.0..(slot - length).max(0.001) / 2.0)),
                kind,
                length: secs(length),
                amount,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(watchers: usize, secs: u64) -> Shape {
        Shape {
            watchers,
            duration: Duration::from_secs(secs),
            nodes: 10,
            namespaces: 5,
        }
    }

    #[test]
    fn the_same_seed_gives_the_same_plan() {
        let a = plan(7, shape(100, 20));
        let b = plan(7, shape(100, 20));
        let c = plan(8, shape(100, 20));
        let key = |p: &Plan| {
            format!(
                "{:?}{:?}",
                p.watchers
                    .iter()
                    .map(|w| (w.kind(), w.selector.clone(), w.seed))
                    .collect::<Vec<_>>(),
                p.faults
            )
        };
        assert_eq!(key(&a), key(&b));
        assert_ne!(key(&a), key(&c));
    }

    #[test]
    fn every_fault_kind_is_scheduled_without_overlap_inside_the_chaos_phase() {
        for secs in [20, 600] {
            let p = plan(1, shape(10, secs));
            for k in FaultKind::ALL {
                assert!(p.faults.iter().any(|f| f.kind == k), "{k:?} in {secs} s");
            }
            for w in p.faults.windows(2) {
                assert!(w[0].at + w[0].length < w[1].at, "{w:?}");
            }
            let d = Duration::from_secs(secs);
            let last = p.faults.last().unwrap();
            assert!(last.at + last.length <= d.mul_f64(0.8));
            assert!(p.faults[0].at >= d.mul_f64(0.1));
        }
    }

    #[test]
    fn the_archetypes_come_first_and_the_mix_covers_every_behaviour() {
        let p = plan(3, shape(2000, 600));
        assert_eq!(p.watchers[0].reader.name(), "stalled");
        assert!(p.watchers[0].selector.is_all());
        let count = |f: &dyn Fn(&WatcherPlan) -> bool| p.watchers.iter().filter(|w| f(w)).count();
        assert!(count(&|w| w.transport == Transport::Websocket) > 400);
        assert!(count(&|w| w.encoding == Encoding::Protobuf) > 400);
        assert!(count(&|w| !w.selector.query.is_empty()) > 600);
        assert!(count(&|w| w.reader.name() == "slow") > 200);
        assert!(count(&|w| w.reader.name() == "stalled") > 80);
        assert!(count(&|w| w.resume_every.is_some()) > 200);
        assert!(count(&|w| w.watch_list) > 200);
        assert_eq!(
            Selector::new("/p".into(), "a=b", "c!=d").url("watch=1"),
            "/p?labelSelector=a%3Db&fieldSelector=c%21%3Dd&watch=1"
        );
    }
}
