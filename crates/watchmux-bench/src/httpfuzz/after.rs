//! After the run: what the fuzz left behind in watchmux (its open files, sorted into client
//! connections, upstream connections, listeners and the rest, read from `/proc/PID/fd` and
//! `/proc/net/tcp*`; its resident memory), and whether its cache still matches the simulator
//! (each cached resource LISTed through watchmux at `resourceVersion=0` and from the simulator
//! directly, compared by object → resourceVersion).
//!
//! Measures and compares; deciding what is "near the baseline" is [`super`]'s, and it never
//! writes to either process.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;

use crate::client;

/// How a socket missing from `/proc/net/tcp*` is named in [`Fds::other_kinds`]: its
/// connection is gone (reset, or not TCP) while its file is still open.
pub const GONE_SOCKET: &str = "socket (not in /proc/net/tcp)";

/// watchmux's open files by kind.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Fds {
    /// All open files.
    pub total: usize,
    /// Connections from clients (its listen port).
    pub downstream: usize,
    /// Connections to the upstream (the simulator's port): the reflectors' and the idle pool.
    pub upstream: usize,
    /// Listening sockets.
    pub listening: usize,
    /// Anything else (epoll, pipes, files, other sockets).
    pub other: usize,
    /// What the `other` files are (link targets without their numbers; a socket missing from
    /// `/proc/net/tcp*` is one no longer connected, e.g. reset, whose file is still open).
    pub other_kinds: BTreeMap<String, usize>,
    /// The client connections: the client's port and the TCP state (`/proc/net/tcp` code:
    /// 01 established, 08 close-wait, …).
    pub clients: Vec<(u16, String)>,
}

/// The TCP sockets of `/proc/net/tcp*` by inode: local port, remote port, state (with the
/// bytes received and not read yet, when there are any).
fn tcp_sockets() -> HashMap<u64, (u16, u16, String)> {
    crate::procs::tcp_sockets()
        .into_iter()
        .map(|s| {
            let state = if s.unread > 0 {
                format!("{}, {} bytes unread", s.state, s.unread)
            } else {
                s.state
            };
            (s.inode, (s.local, s.remote, state))
        })
        .collect()
}

/// watchmux's (`pid`) open files, its clients being those on `listen_port` and its upstream
/// the peer on `upstream_port`.
pub fn fds(pid: u32, listen_port: u16, upstream_port: u16) -> Fds {
    let mut f = Fds::default();
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return f;
    };
    let sockets = tcp_sockets();
    for e in dir.flatten() {
        f.total += 1;
        let Ok(link) = std::fs::read_link(e.path()) else {
            f.other += 1;
            *f.other_kinds.entry("unreadable".into()).or_default() += 1;
            continue;
        };
        let link = link.to_string_lossy().into_owned();
        let inode = link
            .strip_prefix("socket:[")
            .and_then(|s| s.strip_suffix(']'))
            .and_then(|s| s.parse::<u64>().ok());
        match inode.and_then(|i| sockets.get(&i)) {
            Some((_, _, st)) if st.starts_with("0A") => f.listening += 1,
            Some((local, remote, st)) if *local == listen_port => {
                f.downstream += 1;
                f.clients.push((*remote, st.clone()));
            }
            Some((_, remote, _)) if *remote == upstream_port => f.upstream += 1,
            Some(_) => {
                f.other += 1;
                *f.other_kinds
                    .entry("socket (other peer)".into())
                    .or_default() += 1;
            }
            None => {
                f.other += 1;
                let kind = if inode.is_some() {
                    GONE_SOCKET.to_string()
                } else {
                    link.chars().filter(|c| !c.is_ascii_digit()).collect()
                };
                *f.other_kinds.entry(kind).or_default() += 1;
            }
        }
    }
    f
}

/// Waits (at most `max`) until watchmux has no client connection left; returns its files then.
pub async fn wait_clients_gone(
    pid: u32,
    listen_port: u16,
    upstream_port: u16,
    max: Duration,
) -> Fds {
    let deadline = Instant::now() + max;
    loop {
        let f = fds(pid, listen_port, upstream_port);
        if f.downstream == 0 || Instant::now() > deadline {
            return f;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The comparison of one resource.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CacheCheck {
    /// Resource (core group).
    pub resource: String,
    /// Objects in watchmux's answer.
    pub watchmux: usize,
    /// Objects in the simulator's.
    pub sim: usize,
    /// Objects whose resourceVersion differ, or that only one side has (first few).
    pub differences: Vec<String>,
    /// Every object had the same resourceVersion on both sides (within the wait).
    pub matched: bool,
    /// An error reading either side.
    pub error: Option<String>,
}

/// `namespace/name` → resourceVersion of a LIST body.
fn by_name(body: &[u8]) -> Result<BTreeMap<String, String>, String> {
    let v: Value = serde_json::from_slice(body).map_err(|e| format!("LIST body: {e}"))?;
    let items = v
        .get("items")
        .and_then(Value::as_array)
        .ok_or("LIST body without items")?;
    Ok(items
        .iter()
        .map(|i| {
            let m = i.get("metadata");
            let s = |k| {
                m.and_then(|m| m.get(k))
                    .and_then(Value::as_str)
                    .unwrap_or_default()
            };
            (
                format!("{}/{}", s("namespace"), s("name")),
                s("resourceVersion").to_string(),
            )
        })
        .collect())
}

async fn list(addr: SocketAddr, path: &str) -> Result<BTreeMap<String, String>, String> {
    let (status, body) = client::get_body(addr, path)
        .await
        .map_err(|e| format!("{path}: {e}"))?;
    if status != 200 {
        return Err(format!("{path}: status {status}"));
    }
    by_name(&body)
}

/// `watchmux_memory_used_bytes` from watchmux's `/metrics` (0 when unreadable).
pub async fn counted_bytes(watchmux: SocketAddr) -> u64 {
    let Ok((200, body)) = client::get_body(watchmux, "/metrics").await else {
        return 0;
    };
    String::from_utf8_lossy(&body)
        .lines()
        .find_map(|l| l.strip_prefix("watchmux_memory_used_bytes "))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .map_or(0, |v| v as u64)
}

/// Compares `resource` (core group) through watchmux (`resourceVersion=0`, the cache) with the
/// simulator's own LIST, again and again for at most `wait` until they match (watchmux follows
/// the simulator's writes a moment later).
pub async fn compare(
    watchmux: SocketAddr,
    sim: SocketAddr,
    resource: &str,
    wait: Duration,
) -> CacheCheck {
    let deadline = Instant::now() + wait;
    let path = format!("/api/v1/{resource}");
    loop {
        let mut c = CacheCheck {
            resource: resource.to_string(),
            ..CacheCheck::default()
        };
        match (
            list(sim, &path).await,
            list(watchmux, &format!("{path}?resourceVersion=0")).await,
        ) {
            (Ok(s), Ok(w)) => {
                c.sim = s.len();
                c.watchmux = w.len();
                for (k, rv) in &s {
                    match w.get(k) {
                        Some(x) if x == rv => {}
                        Some(x) => c
                            .differences
                            .push(format!("{k}: watchmux {x}, simulator {rv}")),
                        None => c.differences.push(format!("{k}: missing from watchmux")),
                    }
                }
                for k in w.keys().filter(|k| !s.contains_key(*k)) {
                    c.differences.push(format!("{k}: only in watchmux"));
                }
                c.matched = c.differences.is_empty();
                c.differences.truncate(5);
            }
            (a, b) => c.error = a.err().or(b.err()),
        }
        if c.matched || Instant::now() > deadline {
            return c;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_bodies_by_name() {
        let b = br#"{"items":[{"metadata":{"name":"a","namespace":"n","resourceVersion":"5"}},{"metadata":{"name":"b","resourceVersion":"6"}}]}"#;
        let m = by_name(b).unwrap();
        assert_eq!(m.get("n/a").map(String::as_str), Some("5"));
        assert_eq!(m.get("/b").map(String::as_str), Some("6"));
        assert!(by_name(b"{}").is_err());
    }

    #[test]
    fn this_process_has_files() {
        let f = fds(std::process::id(), 1, 2);
        assert!(f.total > 0 && f.total == f.downstream + f.upstream + f.listening + f.other);
    }
}
