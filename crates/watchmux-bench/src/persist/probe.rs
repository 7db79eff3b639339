//! What the durable-cache bench reads to measure: the items of a streamed LIST body (counted
//! without holding the body), a process's disk writes (`/proc/PID/io`), the CPU of its threads
//! of one name (`/proc/PID/task/*/stat`), a directory's size, and the simulator's counters.
//!
//! Reading only: it starts, stops and decides nothing (the scenario modules do).

use std::net::SocketAddr;
use std::path::Path;

use super::super::BenchError;
use super::super::client;
use super::super::procs;
use super::super::targets;

/// Counts the elements of a JSON list's top-level `items` array as its body streams by: a
/// 150,000-pod LIST is most of a gigabyte, which the bench must not hold to count it.
#[derive(Debug, Default, Clone)]
pub struct ItemCounter {
    depth: u32,
    in_string: bool,
    escaped: bool,
    /// The string being read is a key or value of the top-level object.
    top_string: bool,
    /// The top-level string being read (bounded: only `items` matters).
    current: Vec<u8>,
    /// The last complete top-level string.
    last: Vec<u8>,
    /// Inside the top-level `items` array (whose elements are at depth 2).
    in_items: bool,
    /// Elements of `items` seen so far.
    pub items: u64,
}

impl ItemCounter {
    /// Feeds the next piece of the body.
    pub fn feed(&mut self, piece: &[u8]) {
        for &b in piece {
            if self.in_string {
                if self.escaped {
                    self.escaped = false;
                } else if b == b'\\' {
                    self.escaped = true;
                } else if b == b'"' {
                    self.in_string = false;
                    if self.top_string {
                        self.last = std::mem::take(&mut self.current);
                    }
                } else if self.top_string && self.current.len() < 16 {
                    self.current.push(b);
                }
                continue;
            }
            match b {
                b'"' => {
                    self.in_string = true;
                    self.top_string = self.depth == 1;
                    self.current.clear();
                }
                b'{' | b'[' => {
                    if b == b'{' && self.in_items && self.depth == 2 {
                        self.items += 1;
                    }
                    if b == b'[' && self.depth == 1 && self.last == b"items" {
                        self.in_items = true;
                    }
                    self.depth += 1;
                }
                b'}' | b']' => {
                    if b == b']' && self.in_items && self.depth == 2 {
                        self.in_items = false;
                    }
                    self.depth = self.depth.saturating_sub(1);
                }
                _ => {}
            }
        }
    }
}

/// One LIST answered in full.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counted {
    /// HTTP status.
    pub status: u16,
    /// Body bytes.
    pub bytes: u64,
    /// Elements of the list's `items` (0 for an error body).
    pub items: u64,
}

/// GETs `path_and_query` on a new connection and counts the list's items as the body streams.
pub async fn count_list(addr: SocketAddr, path_and_query: &str) -> std::io::Result<Counted> {
    let mut c = client::Conn::connect(addr).await?;
    c.get(path_and_query).await?;
    let head = c.read_head().await?;
    let mut counter = ItemCounter::default();
    let bytes = c.read_body(&head, |p| counter.feed(p)).await?;
    Ok(Counted {
        status: head.status,
        bytes,
        items: counter.items,
    })
}

/// Bytes `pid` caused to be written to storage (`write_bytes` of `/proc/PID/io`: what reached
/// the block layer, page-cache writeback included); `None` when unreadable.
pub fn io_write_bytes(pid: u32) -> Option<u64> {
    let io = std::fs::read_to_string(format!("/proc/{pid}/io")).ok()?;
    io.lines()
        .find_map(|l| l.strip_prefix("write_bytes:"))
        .and_then(|v| v.trim().parse().ok())
}

/// CPU seconds (user + system) of `pid`'s live threads whose name starts with `prefix` (the
/// kernel keeps 15 bytes of a thread's name: `watchmux-persist` reads `watchmux-persis`).
pub fn thread_cpu_secs(pid: u32, prefix: &str) -> f64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0.0;
    };
    let mut ticks = 0.0;
    for t in tasks.flatten() {
        let Ok(stat) = std::fs::read_to_string(t.path().join("stat")) else {
            continue;
        };
        // `tid (name) state … utime stime`: the name may hold spaces, so split at its parens.
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        if !stat
            .get(open + 1..close)
            .is_some_and(|n| n.starts_with(prefix))
        {
            continue;
        }
        let f: Vec<&str> = stat[close + 1..].split_whitespace().collect();
        ticks += f
            .get(11..13)
            .map(|x| x.iter().filter_map(|v| v.parse::<f64>().ok()).sum())
            .unwrap_or(0.0);
    }
    ticks / procs::clock_ticks()
}

/// Bytes of the files under `dir` (their lengths; 0 when it does not exist).
pub fn dir_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_bytes(&e.path()),
            Ok(_) => e.metadata().map(|m| m.len()).unwrap_or(0),
            Err(_) => 0,
        })
        .sum()
}

/// What the simulator has served so far (its `/sim/stats`; each read is itself one request).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SimCounters {
    /// Every HTTP request.
    pub requests: u64,
    /// Every response byte.
    pub bytes: u64,
    /// Pod LIST requests (pages).
    pub pod_lists: u64,
    /// Pod WATCH requests.
    pub pod_watches: u64,
    /// Pods sent in LIST answers.
    pub pod_items: u64,
    /// Response bytes for pods (lists and watch frames).
    pub pod_bytes: u64,
}

impl SimCounters {
    /// Reads the simulator's counters.
    pub async fn read(sim: SocketAddr) -> Result<SimCounters, BenchError> {
        let s = targets::sim_stats(sim).await?;
        let n = |v: &serde_json::Value| v.as_u64().unwrap_or(0);
        let p = &s["resources"]["pods"];
        Ok(SimCounters {
            requests: n(&s["requests"]),
            bytes: n(&s["bytesSent"]),
            pod_lists: n(&p["listRequests"]),
            pod_watches: n(&p["watchRequests"]),
            pod_items: n(&p["listItemsSent"]),
            pod_bytes: n(&p["bytesSent"]),
        })
    }

    /// What was served between `earlier` and `self`, less the one `/sim/stats` read that
    /// `self` counts.
    pub fn since(&self, earlier: &SimCounters) -> SimCounters {
        SimCounters {
            requests: self.requests.saturating_sub(earlier.requests + 1),
            bytes: self.bytes.saturating_sub(earlier.bytes),
            pod_lists: self.pod_lists.saturating_sub(earlier.pod_lists),
            pod_watches: self.pod_watches.saturating_sub(earlier.pod_watches),
            pod_items: self.pod_items.saturating_sub(earlier.pod_items),
            pod_bytes: self.pod_bytes.saturating_sub(earlier.pod_bytes),
        }
    }
}

/// The simulator's counters once they stop moving (a second at most): a watch is counted when
/// its stream starts, and a LIST's bytes when its body has gone out. The extra `/sim/stats`
/// reads this takes are taken off `requests` (so that [`SimCounters::since`] stays exact).
pub async fn settled(sim: SocketAddr) -> Result<SimCounters, BenchError> {
    let mut last = SimCounters::read(sim).await?;
    let mut reads = 1u64;
    for _ in 0..10 {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        let now = SimCounters::read(sim).await?;
        reads += 1;
        let moved = (now.pod_lists, now.pod_watches, now.pod_bytes)
            != (last.pod_lists, last.pod_watches, last.pod_bytes);
        last = now;
        if !moved {
            break;
        }
    }
    last.requests = last.requests.saturating_sub(reads - 1);
    Ok(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count(pieces: &[&[u8]]) -> u64 {
        let mut c = ItemCounter::default();
        for p in pieces {
            c.feed(p);
        }
        c.items
    }

    #[test]
    fn counts_the_items_of_a_list_however_the_body_is_cut() {
        let body = br#"{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"12","items":[{"x":1}]},"items":[{"metadata":{"name":"a\"]{","labels":{"items":"["}},"spec":{"containers":[{"n":1},{"n":2}]}},{"metadata":{"name":"b"}},{}]}"#;
        assert_eq!(count(&[body]), 3);
        for cut in 0..body.len() {
            assert_eq!(count(&[&body[..cut], &body[cut..]]), 3, "cut at {cut}");
        }
        assert_eq!(count(&[br#"{"items":[]}"#]), 0);
        assert_eq!(count(&[br#"{"kind":"Status","code":429}"#]), 0);
        assert_eq!(count(&[br#"{"kind":"List","other":[{}],"items":null}"#]), 0);
    }

    #[test]
    fn reads_this_process_io_and_threads() {
        let me = std::process::id();
        assert!(io_write_bytes(me).is_some(), "/proc/self/io readable");
        assert_eq!(thread_cpu_secs(me, "no-such-thread-name"), 0.0);
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("sub")).unwrap();
        std::fs::write(d.path().join("a"), [0u8; 10]).unwrap();
        std::fs::write(d.path().join("sub/b"), [0u8; 5]).unwrap();
        assert_eq!(dir_bytes(d.path()), 15);
        assert_eq!(dir_bytes(&d.path().join("missing")), 0);
    }
}
