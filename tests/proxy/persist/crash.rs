//! The durable cache against crashes: the `watchmux` binary killed with SIGKILL in the middle
//! of churn, with the upstream down, and restarted; and its files damaged every way a crash or
//! a disk can damage them. What a restart serves from disk must be a state the upstream really
//! had (a prefix of what the killed process had seen), never damaged data; resumed watches get
//! exactly the events they missed; once the upstream is back every client converges to it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::common::{Next, WatchStream, get_json, rv_of, sim, spawn_watchmux, watch};
use kube_sim::Simulator;

const DEADLINE: Duration = Duration::from_secs(30);

/// Configmaps the churn writes (names `c0`..).
const NAMES: usize = 24;

/// A `watchmux serve` process caching configmaps, persisted to `dir`, its JSON log collected.
struct Proc {
    child: tokio::process::Child,
    url: String,
    log: Arc<Mutex<Vec<Value>>>,
}

impl Proc {
    async fn start(sim: &Simulator, dir: &Path) -> Proc {
        let config = dir.join("watchmux.toml");
        std::fs::write(
            &config,
            format!(
                "[server]\nlisten = \"127.0.0.1:0\"\n\n[upstream]\nurl = \"{}\"\n\n[log]\nformat = \"json\"\nlevel = \"info\"\n\n[cache]\nbookmark_interval_secs = 1\nnot_ready_wait_ms = 0\npersist_dir = \"{}\"\n[[cache.resources]]\nversion = \"v1\"\nresource = \"configmaps\"\n",
                sim.url(),
                dir.join("cache").display()
            ),
        )
        .unwrap();
        let (child, mut lines) = spawn_watchmux(&config);
        let log = Arc::new(Mutex::new(Vec::new()));
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
        let kept = log.clone();
        tokio::spawn(async move {
            while let Some(v) = lines.recv().await {
                if v["message"] == "watchmux serving" {
                    let _ = tx.send(v["listen"].as_str().unwrap().to_string());
                }
                kept.lock().push(v);
            }
        });
        let listen = tokio::time::timeout(DEADLINE, rx.recv())
            .await
            .expect("watchmux serving in time")
            .expect("watchmux running");
        Proc {
            child,
            url: format!("http://{listen}"),
            log,
        }
    }

    /// SIGKILL: no clean stop, no last batch.
    async fn kill(mut self) {
        self.child.kill().await.unwrap();
    }

    /// Whether a log line's message starts with `m`.
    fn logged(&self, m: &str) -> bool {
        self.log
            .lock()
            .iter()
            .any(|v| v["message"].as_str().is_some_and(|s| s.starts_with(m)))
    }

    /// The log lines at WARN or above, as text.
    fn warnings(&self) -> Vec<String> {
        self.log
            .lock()
            .iter()
            .filter(|v| v["level"] == "WARN" || v["level"] == "ERROR")
            .map(|v| v.to_string())
            .collect()
    }
}

/// Writes to the simulator's configmaps (create, modify, delete over [`NAMES`] names) every few
/// milliseconds until stopped; the writes also go on while the upstream refuses watchmux.
struct Churn {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl Churn {
    fn start(sim: &Simulator) -> Churn {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let ops = sim.ops().clone();
        let cms = sim.resource("", "v1", "configmaps").unwrap();
        let task = tokio::spawn(async move {
            let mut i = 0u64;
            while !s.load(Ordering::Relaxed) && i < 100_000 {
                let name = format!("c{}", i % NAMES as u64);
                let exists = ops.get(&cms, Some("default"), &name).is_ok();
                if !exists {
                    let obj = json!({"metadata": {"name": name}, "data": {"n": i.to_string()}});
                    ops.create(&cms, Some("default"), obj, false).unwrap();
                } else if i % 7 == 3 {
                    ops.delete(&cms, Some("default"), &name, &Default::default())
                        .unwrap();
                } else {
                    ops.modify(&cms, Some("default"), &name, |v| {
                        v["data"]["n"] = json!(i.to_string())
                    })
                    .unwrap();
                }
                i += 1;
                tokio::time::sleep(Duration::from_millis(3)).await;
            }
        });
        Churn { stop, task }
    }

    async fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        self.task.await.unwrap();
    }
}

/// One event a client saw: type, resourceVersion, name.
type Seen = (String, u64, String);

/// A client's view of the configmaps (name → resourceVersion) and everything it heard, with
/// kube's rules checked on every event.
#[derive(Default)]
struct View {
    objects: BTreeMap<String, u64>,
    rv: u64,
    heard: Vec<Seen>,
}

impl View {
    /// A LIST's answer.
    async fn list(url: &str) -> View {
        let (s, v) = get_json(&format!("{url}/api/v1/configmaps?resourceVersion=0")).await;
        assert_eq!(s, 200, "{v}");
        View {
            objects: v["items"]
                .as_array()
                .unwrap()
                .iter()
                .map(|o| (o["metadata"]["name"].as_str().unwrap().into(), rv_of(o)))
                .collect(),
            rv: v["metadata"]["resourceVersion"]
                .as_str()
                .unwrap()
                .parse()
                .unwrap(),
            heard: Vec::new(),
        }
    }

    /// A client that starts from this view's state (and has heard nothing yet).
    fn fork(&self) -> View {
        View {
            objects: self.objects.clone(),
            rv: self.rv,
            heard: Vec::new(),
        }
    }

    /// Applies one watch line; `Err` with the Status of an ERROR event.
    fn apply(&mut self, line: &[u8]) -> Result<(), Value> {
        let v: Value = serde_json::from_slice(line).unwrap();
        let ty = v["type"].as_str().unwrap().to_string();
        let o = &v["object"];
        if ty == "ERROR" {
            return Err(o.clone());
        }
        let rv = rv_of(o);
        if ty == "BOOKMARK" {
            assert!(rv >= self.rv, "bookmark {rv} after {}", self.rv);
            self.rv = rv;
            return Ok(());
        }
        assert!(rv > self.rv, "{ty} at {rv} after {}", self.rv);
        self.rv = rv;
        let name = o["metadata"]["name"].as_str().unwrap().to_string();
        let had = match ty.as_str() {
            "ADDED" => self.objects.insert(name.clone(), rv).is_some(),
            "MODIFIED" => self.objects.insert(name.clone(), rv).is_none(),
            "DELETED" => self.objects.remove(&name).is_none(),
            other => panic!("event type {other}"),
        };
        assert!(!had, "{ty} of {name} at {rv} does not fit the view");
        self.heard.push((ty, rv, name));
        Ok(())
    }

    /// Reads `w` for `d` (or until it ends); `Err` with an ERROR event's Status.
    async fn read_for(&mut self, w: &mut WatchStream, d: Duration) -> Result<(), Value> {
        let until = Instant::now() + d;
        while Instant::now() < until {
            match w.next_line(until - Instant::now()).await {
                Next::Line(l) => self.apply(&l)?,
                Next::Timeout => {}
                _ => return Ok(()),
            }
        }
        Ok(())
    }

    /// A watch from the view's resourceVersion.
    async fn watch(&self, url: &str) -> WatchStream {
        watch(&format!(
            "{url}/api/v1/configmaps?watch=1&allowWatchBookmarks=true&resourceVersion={}",
            self.rv
        ))
        .await
    }
}

/// The simulator's configmaps, name → resourceVersion.
fn upstream_state(sim: &Simulator) -> BTreeMap<String, u64> {
    let cms = sim.resource("", "v1", "configmaps").unwrap();
    (0..NAMES)
        .filter_map(|i| {
            let name = format!("c{i}");
            let o = sim.ops().get(&cms, Some("default"), &name).ok()?;
            Some((name, o.rv))
        })
        .collect()
}

/// The state at `rv` as a client that saw every event from `start` knows it.
fn state_at(start: &View, heard: &[Seen], rv: u64) -> BTreeMap<String, u64> {
    let mut s = start.objects.clone();
    for (ty, at, name) in heard.iter().filter(|(_, at, _)| *at <= rv) {
        if ty == "DELETED" {
            s.remove(name);
        } else {
            s.insert(name.clone(), *at);
        }
    }
    s
}

/// Keeps a client's view following `url` (re-watching after a clean end, relisting after
/// 410) until it equals the simulator's state.
async fn converge(view: &mut View, url: &str, sim: &Simulator, who: &str) {
    let deadline = Instant::now() + DEADLINE;
    let mut w = view.watch(url).await;
    loop {
        if view.objects == upstream_state(sim) {
            return;
        }
        assert!(Instant::now() < deadline, "{who} never converged");
        if w.status != 200 {
            *view = View::list(url).await;
            w = view.watch(url).await;
            continue;
        }
        match w.next_line(Duration::from_millis(200)).await {
            Next::Line(l) => {
                if let Err(status) = view.apply(&l) {
                    assert_eq!(status["code"], 410, "{who}: {status}");
                    *view = View::list(url).await;
                    w = view.watch(url).await;
                }
            }
            Next::Timeout => {}
            _ => w = view.watch(url).await,
        }
    }
}

/// Waits until `/readyz` answers `code`; its body.
async fn readyz_becomes(url: &str, code: u16) -> String {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let (s, _, b) =
            crate::common::request(http::Method::GET, &format!("{url}/readyz?verbose"), &[], "")
                .await;
        let body = String::from_utf8_lossy(&b).into_owned();
        if s.as_u16() == code {
            return body;
        }
        assert!(Instant::now() < deadline, "readyz never {code}: {body}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// SIGKILL mid-churn with the upstream down, restarted while it is still down: the cached
/// reads answer at once from disk with a state the upstream had; a client that stopped
/// watching earlier resumes and gets exactly the events it missed, from disk; once the
/// upstream is back, every client converges.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_mid_churn_with_the_upstream_down_then_restart() {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim().await;
    let churn = Churn::start(&sim);
    let p1 = Proc::start(&sim, dir.path()).await;
    readyz_becomes(&p1.url, 200).await;
    // A sees everything; B stops watching early and resumes after the restart.
    let start = View::list(&p1.url).await;
    let mut a = start.fork();
    let mut b = start.fork();
    let mut wa = a.watch(&p1.url).await;
    let mut wb = b.watch(&p1.url).await;
    b.read_for(&mut wb, Duration::from_millis(400))
        .await
        .unwrap();
    drop(wb);
    a.read_for(&mut wa, Duration::from_millis(800))
        .await
        .unwrap();
    assert!(
        b.heard.len() > 10 && a.heard.len() > b.heard.len(),
        "churn reached the clients: a {}, b {}",
        a.heard.len(),
        b.heard.len()
    );
    // The upstream goes away (the cluster goes on changing), then watchmux is killed.
    sim.faults()
        .refuse_connections_for(Duration::from_secs(120));
    a.read_for(&mut wa, Duration::from_millis(200))
        .await
        .unwrap();
    p1.kill().await;
    drop(wa);

    let p2 = Proc::start(&sim, dir.path()).await;
    // At once: ready, serving stale, from disk.
    let body = readyz_becomes(&p2.url, 200).await;
    assert!(
        body.contains("[+]cache/configmaps ok: serving stale"),
        "{body}"
    );
    let restored = View::list(&p2.url).await;
    // A state the upstream had: the one A knew at that resourceVersion (A heard every event
    // the killed process had), which B's resume point does not pass (written long before the
    // kill).
    assert!(restored.rv >= b.rv, "{} before {}", restored.rv, b.rv);
    assert_eq!(restored.objects, state_at(&start, &a.heard, restored.rv));
    // B resumes from disk while the upstream is still down: exactly what it missed, in order,
    // up to what the disk holds.
    let mut wb = b.watch(&p2.url).await;
    assert_eq!(wb.status, 200);
    let missed: Vec<Seen> = a
        .heard
        .iter()
        .filter(|(_, rv, _)| *rv > b.rv && *rv <= restored.rv)
        .cloned()
        .collect();
    let before = b.heard.len();
    let deadline = Instant::now() + DEADLINE;
    while b.heard.len() - before < missed.len() {
        assert!(
            Instant::now() < deadline,
            "B heard {:?}",
            &b.heard[before..]
        );
        b.read_for(&mut wb, Duration::from_millis(100))
            .await
            .unwrap();
    }
    assert_eq!(b.heard[before..], missed[..]);
    drop(wb);

    // The upstream is back; the churn goes on a little, then stops: everyone converges.
    sim.faults().clear();
    tokio::time::sleep(Duration::from_millis(300)).await;
    churn.stop().await;
    converge(&mut b, &p2.url, &sim, "B").await;
    converge(&mut a, &p2.url, &sim, "A").await;
    let mut fresh = View::list(&p2.url).await;
    converge(&mut fresh, &p2.url, &sim, "a new client").await;
    assert!(
        p2.warnings().iter().all(|w| !w.contains("damaged")),
        "{:?}",
        p2.warnings()
    );
}

/// Damage done to a resource's directory.
type Damage = Box<dyn Fn(&Path)>;

/// The ways a crash or a disk damages the files, applied to a copy of a killed process's
/// directory: `(what, damage)`.
fn damages() -> Vec<(&'static str, Damage)> {
    fn segment(dir: &Path) -> PathBuf {
        let mut segs: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "seg"))
            .collect();
        segs.sort();
        segs.pop().expect("a segment")
    }
    fn edit(path: &Path, f: impl Fn(&mut Vec<u8>)) {
        let mut b = std::fs::read(path).unwrap();
        f(&mut b);
        std::fs::write(path, b).unwrap();
    }
    vec![
        (
            "truncated mid-record",
            Box::new(|d| edit(&segment(d), |b| b.truncate(b.len() - 3))),
        ),
        (
            "a flipped byte near the end",
            Box::new(|d| {
                edit(&segment(d), |b| {
                    let i = b.len() - 20;
                    b[i] ^= 0xff
                })
            }),
        ),
        (
            "a flipped byte in the state",
            Box::new(|d| edit(&segment(d), |b| b[40] ^= 0x01)),
        ),
        (
            "a bad header",
            Box::new(|d| edit(&segment(d), |b| b[0] = b'X')),
        ),
        (
            "zeroed tail (a lost page)",
            Box::new(|d| {
                edit(&segment(d), |b| {
                    let n = b.len();
                    b[n / 2..].fill(0)
                })
            }),
        ),
        (
            "garbage type information",
            Box::new(|d| std::fs::write(d.join("info.json"), b"{\"kind\": 7").unwrap()),
        ),
    ]
}

/// Every kind of damage: the restart logs a line naming the file, serves only what was
/// consistent before the damage (a state the upstream had) or nothing (then it is not ready
/// until the upstream answers), and converges once the upstream is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn damaged_files_are_cut_back_never_served() {
    let base = tempfile::tempdir().unwrap();
    let sim = sim().await;
    let churn = Churn::start(&sim);
    let p = Proc::start(&sim, base.path()).await;
    readyz_becomes(&p.url, 200).await;
    let start = View::list(&p.url).await;
    let mut seen = start.fork();
    let mut w = seen.watch(&p.url).await;
    seen.read_for(&mut w, Duration::from_millis(600))
        .await
        .unwrap();
    sim.faults()
        .refuse_connections_for(Duration::from_secs(120));
    seen.read_for(&mut w, Duration::from_millis(200))
        .await
        .unwrap();
    p.kill().await;
    churn.stop().await;
    let pristine = base.path().join("cache").join("core_v1_configmaps");

    for (what, damage) in damages() {
        let dir = tempfile::tempdir().unwrap();
        let copy = dir.path().join("cache").join("core_v1_configmaps");
        std::fs::create_dir_all(&copy).unwrap();
        for e in std::fs::read_dir(&pristine).unwrap() {
            let e = e.unwrap();
            std::fs::copy(e.path(), copy.join(e.file_name())).unwrap();
        }
        damage(&copy);
        sim.faults()
            .refuse_connections_for(Duration::from_secs(120));
        let p = Proc::start(&sim, dir.path()).await;
        // Restored from what was consistent, or not at all: the restore (logged) comes before
        // the first discovery attempt, which fails while the upstream is down.
        let deadline = Instant::now() + DEADLINE;
        while !p.logged("discovery failed") {
            assert!(Instant::now() < deadline, "{what}: no discovery attempt");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let url = format!("{}/api/v1/configmaps?resourceVersion=0", p.url);
        let restored = if p.logged("cache restored from disk") {
            let r = View::list(&p.url).await;
            assert_eq!(r.objects, state_at(&start, &seen.heard, r.rv), "{what}");
            Some(r)
        } else {
            let (s, v) = get_json(&url).await;
            assert_eq!(s, 429, "{what}: {v}");
            readyz_becomes(&p.url, 503).await;
            None
        };
        let warnings = p.warnings();
        assert!(
            warnings.iter().any(|w| w.contains("persisted cache")
                && (w.contains(".seg") || w.contains("info.json"))),
            "{what}: no log line names the damaged file: {warnings:?}"
        );
        // The upstream is back: it converges.
        sim.faults().clear();
        let mut v = match restored {
            Some(v) => v,
            None => {
                readyz_becomes(&p.url, 200).await;
                View::list(&p.url).await
            }
        };
        converge(&mut v, &p.url, &sim, what).await;
        p.kill().await;
    }
}
