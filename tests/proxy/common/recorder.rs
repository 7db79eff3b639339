//! A raw watch client that records every line it hears, as client-go's reflector behaves: it
//! lists once, watches with bookmarks from the list's resourceVersion and, when a stream ends
//! (cleanly or not), re-watches from the last resourceVersion it heard (an event's or a
//! bookmark's); an answer other than 200, or an ERROR event, stops it (it would have to relist).
//! The tier and drain tests check its lines against the simulator's history.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::Value;
use tokio::task::JoinHandle;

use super::watch_log::{Seen, State, fold};
use super::{Next, get_json, try_watch};

/// How one stream ended.
#[derive(Debug, Clone)]
pub struct StreamEnd {
    /// Cleanly (else the connection broke).
    pub clean: bool,
    /// The stream's last line, if it had one.
    pub last: Option<Seen>,
}

/// See the module doc. Stops when dropped.
pub struct Recorder {
    /// The core/v1 resource it watches.
    pub resource: &'static str,
    /// The state and resourceVersion of the LIST it started from.
    pub initial: State,
    pub from: u64,
    seen: Arc<Mutex<Vec<Seen>>>,
    ends: Arc<Mutex<Vec<StreamEnd>>>,
    task: JoinHandle<()>,
}

impl Recorder {
    /// Lists `resource` at `base` (a consistent LIST) and watches from the list's
    /// resourceVersion; returns once the server has answered that watch, so that a restart the
    /// test makes after it ends a stream that was open (a watch still connecting at a stop would
    /// fail to connect and go unnoticed as a resume).
    pub async fn start(base: &str, resource: &'static str) -> Recorder {
        let (from, initial) = list_at(base, resource).await;
        let seen = Arc::new(Mutex::new(Vec::<Seen>::new()));
        let ends = Arc::new(Mutex::new(Vec::new()));
        let (s, e, base) = (seen.clone(), ends.clone(), base.to_string());
        let (answered, first_answer) = tokio::sync::oneshot::channel();
        let mut answered = Some(answered);
        let task = tokio::spawn(async move {
            loop {
                let rv = s.lock().last().map_or(from, |l: &Seen| l.rv);
                let url = format!(
                    "{base}/api/v1/{resource}?watch=1&allowWatchBookmarks=true&resourceVersion={rv}"
                );
                let Some(mut w) = try_watch(&url).await else {
                    // The server is away, or a pooled connection had just closed: try again
                    // shortly.
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                };
                if let Some(a) = answered.take() {
                    let _ = a.send(());
                }
                if w.status != 200 {
                    s.lock().push(Seen {
                        ty: "ERROR".into(),
                        key: format!("status {}", w.status),
                        rv: u64::MAX,
                        uid: String::new(),
                    });
                    return;
                }
                let mut last = None;
                loop {
                    match w.next_line(Duration::from_secs(3600)).await {
                        Next::Line(l) => {
                            let line = Seen::parse(&l);
                            let error = line.ty == "ERROR";
                            s.lock().push(line.clone());
                            if error {
                                return;
                            }
                            last = Some(line);
                        }
                        other => {
                            e.lock().push(StreamEnd {
                                clean: matches!(other, Next::End),
                                last,
                            });
                            break;
                        }
                    }
                }
            }
        });
        tokio::time::timeout(Duration::from_secs(30), first_answer)
            .await
            .unwrap_or_else(|_| panic!("the {resource} watch was not answered within 30 s"))
            .expect("the recorder's task");
        Recorder {
            resource,
            initial,
            from,
            seen,
            ends,
            task,
        }
    }

    /// Every line so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().clone()
    }

    /// The events so far (no bookmarks).
    pub fn events(&self) -> Vec<Seen> {
        self.seen().into_iter().filter(Seen::is_event).collect()
    }

    /// How its streams ended so far.
    pub fn ends(&self) -> Vec<StreamEnd> {
        self.ends.lock().clone()
    }

    /// Streams that ended or broke and were resumed.
    pub fn resumed(&self) -> usize {
        self.ends.lock().len()
    }

    /// The state its lines lead to, or what they broke.
    pub fn state(&self) -> Result<State, String> {
        fold(self.initial.clone(), self.from, &self.seen())
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The objects of `items` (a LIST's).
pub fn state_of(items: &Value) -> State {
    items
        .as_array()
        .expect("items")
        .iter()
        .map(|o| {
            let m = &o["metadata"];
            let s = |k: &str| m[k].as_str().unwrap_or_default().to_string();
            (
                format!("{}/{}", s("namespace"), s("name")),
                (s("resourceVersion").parse().expect("an RV"), s("uid")),
            )
        })
        .collect()
}

/// A consistent LIST of the core/v1 `resource` at `server`: its resourceVersion and objects.
pub async fn list_at(server: &str, resource: &str) -> (u64, State) {
    let (status, list) = get_json(&format!("{server}/api/v1/{resource}")).await;
    assert_eq!(status, 200, "{list}");
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|v| v.parse().ok())
        .expect("the list's RV");
    (rv, state_of(&list["items"]))
}
