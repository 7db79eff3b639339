//! Child processes under test and what they cost: CPU time and resident memory read from
//! `/proc`, so each process is measured on its own while the clients run elsewhere.
//!
//! It signals only the children it started (killed when dropped), and does not decide when to
//! measure: the scenarios do.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use tokio::process::{Child, Command};

use super::BenchError;

/// An installed program: the first executable `name` on `PATH`, else the first of `fallbacks`
/// that is executable (Debian puts daemons in `/usr/sbin`, which a user's `PATH` may lack).
pub fn find_binary(name: &str, fallbacks: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .chain(fallbacks.iter().map(PathBuf::from))
        .find(|p| is_executable(p))
}

/// Whether `p` is a file with an execute bit.
pub fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Sends `sig` (`TERM`, `KILL`, …) to `pids` with the `kill` command (no `unsafe` for
/// `libc::kill` in this crate).
pub async fn signal(sig: &str, pids: &[u32]) {
    let _ = Command::new("kill")
        .arg(format!("-{sig}"))
        .args(pids.iter().map(u32::to_string))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .await;
}

/// The last `lines` lines of each of `files` that exists, one after the other (for errors that
/// quote a child's logs); `(empty)` when there are none.
pub fn tail(files: &[PathBuf], lines: usize) -> String {
    let mut out = String::new();
    for f in files {
        let text = std::fs::read_to_string(f).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        for l in &all[all.len().saturating_sub(lines)..] {
            out.push_str(l);
            out.push('\n');
        }
    }
    if out.is_empty() {
        out.push_str("(empty)\n");
    }
    out
}

/// The first line `bin -v` prints (on its output, else its error output: nginx prints its
/// version there), trimmed.
#[allow(
    clippy::disallowed_methods,
    reason = "`-v` runs once per report, before or after the measured windows"
)]
pub fn version_line(bin: &Path) -> Option<String> {
    let o = std::process::Command::new(bin).arg("-v").output().ok()?;
    [o.stdout, o.stderr].iter().find_map(|b| {
        String::from_utf8_lossy(b)
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .map(str::to_string)
    })
}

/// A free port on 127.0.0.1 (bound and released; the child binds it a moment later).
#[allow(
    clippy::disallowed_types,
    reason = "bind and local_addr never block; the port is released at once"
)]
pub fn free_addr() -> Result<SocketAddr, BenchError> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")
        .map_err(|e| BenchError::io("binding a probe port", e))?;
    l.local_addr()
        .map_err(|e| BenchError::io("reading a probe port", e))
}

/// One TCP socket of `/proc/net/tcp*`.
pub(crate) struct TcpSocket {
    /// Its local port.
    pub local: u16,
    /// Its peer's port.
    pub remote: u16,
    /// The kernel's state, in hexadecimal (`0A` listening, `01` established, `08` close-wait, …).
    pub state: String,
    /// Bytes received and not read yet.
    pub unread: u64,
    /// The socket's inode (what `/proc/<pid>/fd` links name).
    pub inode: u64,
}

/// The machine's TCP sockets, IPv4 and IPv6, from `/proc/net` (none where it cannot be read).
pub(crate) fn tcp_sockets() -> Vec<TcpSocket> {
    let mut out = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else {
            continue;
        };
        for line in text.lines().skip(1) {
            // sl local_address rem_address st tx_queue:rx_queue tr:when retrnsmt uid timeout inode
            let cols: Vec<&str> = line.split_whitespace().collect();
            let port = |c: Option<&&str>| {
                c.and_then(|a| a.rsplit_once(':'))
                    .and_then(|(_, p)| u16::from_str_radix(p, 16).ok())
            };
            let (Some(local), Some(remote), Some(state), Some(inode)) = (
                port(cols.get(1)),
                port(cols.get(2)),
                cols.get(3),
                cols.get(9).and_then(|i| i.parse::<u64>().ok()),
            ) else {
                continue;
            };
            let unread = cols
                .get(4)
                .and_then(|q| q.split_once(':'))
                .and_then(|(_, rx)| u64::from_str_radix(rx, 16).ok())
                .unwrap_or(0);
            out.push(TcpSocket {
                local,
                remote,
                state: state.to_string(),
                unread,
                inode,
            });
        }
    }
    out
}

/// The inodes of the sockets listening on TCP `port` (IPv4 and IPv6).
fn listening_inodes(port: u16) -> Vec<u64> {
    tcp_sockets()
        .into_iter()
        .filter(|s| s.state == "0A" && s.local == port)
        .map(|s| s.inode)
        .collect()
}

/// Whether process `pid` is running (not gone, not a zombie waiting to be reaped).
pub fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        // `pid (comm) state …`: the state follows the last ')'.
        s.rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X")
    })
}

/// Whether process `pid` holds a socket listening on TCP `port` (not another process that
/// took the port meanwhile). Where `/proc` cannot say, it is taken to.
fn owns_listener(pid: u32, port: u16) -> bool {
    let inodes = listening_inodes(port);
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return true;
    };
    fds.flatten().any(|fd| {
        std::fs::read_link(fd.path()).is_ok_and(|target| {
            let t = target.to_string_lossy();
            t.strip_prefix("socket:[")
                .and_then(|s| s.strip_suffix(']'))
                .and_then(|s| s.parse::<u64>().ok())
                .is_some_and(|i| inodes.contains(&i))
        })
    })
}

/// Waits until `addr` accepts TCP connections (`child`'s own listener, when there is a child:
/// a port the bench found free can be taken by another process before the child binds it, and
/// a connection to that one proves nothing), `child` exits, or `timeout` passes.
pub async fn wait_listening(
    what: &str,
    addr: SocketAddr,
    child: Option<&mut Child>,
    timeout: Duration,
) -> Result<(), BenchError> {
    let deadline = Instant::now() + timeout;
    let mut child = child;
    loop {
        if let Some(c) = child.as_deref_mut()
            && let Ok(Some(status)) = c.try_wait()
        {
            return Err(BenchError::ExitedEarly(format!(
                "{what} exited early: {status}"
            )));
        }
        let ours = child
            .as_deref()
            .and_then(Child::id)
            .is_none_or(|pid| owns_listener(pid, addr.port()));
        if ours && tokio::net::TcpStream::connect(addr).await.is_ok() {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(BenchError::Setup(format!(
                "{what} does not listen on {addr} after {timeout:?}"
            )));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A child process that is killed when dropped: the bench never leaves a server behind.
pub struct Proc {
    /// What it is ("simulator", "watchmux", …).
    pub name: String,
    /// Where it listens.
    pub addr: SocketAddr,
    /// Where it also serves TLS, when it does on a second address (the simulator's
    /// `--tls-listen`).
    pub tls_addr: Option<SocketAddr>,
    /// The file it writes its live heap bytes to ([`super::heap`]), when asked to.
    pub heap_file: Option<PathBuf>,
    child: Child,
}

impl Proc {
    /// Starts `exe args…` with stdout and stderr appended to `log` (watchmux logs to stdout, a
    /// panic goes to stderr), and waits until it listens on `addr`.
    pub async fn spawn(
        name: &str,
        exe: &Path,
        args: &[String],
        addr: SocketAddr,
        log: &Path,
        ready_timeout: Duration,
    ) -> Result<Proc, BenchError> {
        Proc::spawn_with(name, exe, args, None, addr, log, ready_timeout).await
    }

    /// [`Proc::spawn`], telling the child (a role of the bench binary) to write its live heap
    /// bytes to `heap_file` ([`super::heap::HEAP_FILE_ENV`]) when given.
    pub async fn spawn_with(
        name: &str,
        exe: &Path,
        args: &[String],
        heap_file: Option<&Path>,
        addr: SocketAddr,
        log: &Path,
        ready_timeout: Duration,
    ) -> Result<Proc, BenchError> {
        let err = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .map_err(|e| BenchError::io(format!("opening {}", log.display()), e))?;
        let out = err
            .try_clone()
            .map_err(|e| BenchError::io(format!("opening {}", log.display()), e))?;
        let mut cmd = Command::new(exe);
        if let Some(f) = heap_file {
            cmd.env(super::heap::HEAP_FILE_ENV, f);
        }
        let mut child = cmd
            .args(args)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| BenchError::io(format!("starting {}", exe.display()), e))?;
        wait_listening(name, addr, Some(&mut child), ready_timeout)
            .await
            .map_err(|e| match e {
                BenchError::ExitedEarly(m) => {
                    BenchError::ExitedEarly(format!("{m} (log: {})", log.display()))
                }
                e => BenchError::Setup(format!("{e} (log: {})", log.display())),
            })?;
        Ok(Proc {
            name: name.to_string(),
            addr,
            tls_addr: None,
            heap_file: heap_file.map(Path::to_path_buf),
            child,
        })
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id().unwrap_or(0)
    }

    /// Kills the process and waits for it.
    pub async fn stop(mut self) {
        let _ = self.child.start_kill();
        let _ = tokio::time::timeout(Duration::from_secs(10), self.child.wait()).await;
    }

    /// Stops the process cleanly: SIGTERM (sent with the `kill` command: this crate has no
    /// `unsafe` for `libc::kill`), then waits up to `grace` for it to exit, and kills it if it
    /// has not. Returns whether it exited on its own.
    pub async fn terminate(mut self, grace: Duration) -> bool {
        signal("TERM", &[self.pid()]).await;
        if tokio::time::timeout(grace, self.child.wait()).await.is_ok() {
            return true;
        }
        self.stop().await;
        false
    }
}

/// CPU time and memory of a set of processes at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Usage {
    /// User + system CPU seconds since each process started.
    pub cpu_secs: f64,
    /// Resident set size, bytes (sum over the processes).
    pub rss_bytes: u64,
}

#[allow(
    clippy::disallowed_methods,
    reason = "getconf runs once per process and returns at once"
)]
pub(crate) fn clock_ticks() -> f64 {
    static TICKS: OnceLock<f64> = OnceLock::new();
    *TICKS.get_or_init(|| {
        std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(100.0)
    })
}

/// Reads `/proc/PID/stat` and `/proc/PID/status` of each process (0 = this process). A
/// process that has gone counts as zero.
pub fn usage(pids: &[u32]) -> Usage {
    let mut u = Usage::default();
    for &pid in pids {
        let dir = if pid == 0 {
            "/proc/self".to_string()
        } else {
            format!("/proc/{pid}")
        };
        if let Ok(stat) = std::fs::read_to_string(format!("{dir}/stat")) {
            // The command name (field 2) may contain spaces; fields after its ')' are fixed.
            if let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) {
                let f: Vec<&str> = rest.split_whitespace().collect();
                // After ')': state is index 0, so utime (field 14) is index 11, stime index 12.
                let ticks: f64 = f
                    .get(11..13)
                    .map(|t| t.iter().filter_map(|x| x.parse::<f64>().ok()).sum())
                    .unwrap_or(0.0);
                u.cpu_secs += ticks / clock_ticks();
            }
        }
        if let Ok(status) = std::fs::read_to_string(format!("{dir}/status"))
            && let Some(line) = status.lines().find(|l| l.starts_with("VmRSS:"))
        {
            let kb: u64 = line
                .split_whitespace()
                .nth(1)
                .and_then(|x| x.parse().ok())
                .unwrap_or(0);
            u.rss_bytes += kb * 1024;
        }
    }
    u
}

/// CPU seconds the whole machine has spent busy since boot, over all cores (`/proc/stat`: every
/// state but idle and iowait, steal included: time the hypervisor gave to another guest);
/// 0 when unreadable. The difference over a window, minus the
/// measured processes' own, is what other processes took from them.
pub fn machine_busy_secs() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/stat") else {
        return 0.0;
    };
    let Some(cpu) = stat.lines().find(|l| l.starts_with("cpu ")) else {
        return 0.0;
    };
    // user nice system idle iowait irq softirq steal (guest time is inside user already).
    let ticks: Vec<f64> = cpu
        .split_whitespace()
        .skip(1)
        .take(8)
        .filter_map(|x| x.parse().ok())
        .collect();
    let busy: f64 = ticks
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != 3 && *i != 4)
        .map(|(_, t)| t)
        .sum();
    busy / clock_ticks()
}

/// The machine's kernel memory that grows with sockets, bytes: the TCP sockets' buffers
/// (`/proc/net/sockstat`'s `TCP ... mem`, in pages) and the slab (`/proc/meminfo`'s `Slab`,
/// where the socket structures themselves live). Machine-wide: both ends of every connection,
/// and whatever else the machine does; 0 when unreadable.
pub fn kernel_socket_memory() -> (u64, u64) {
    let tcp_pages: u64 = std::fs::read_to_string("/proc/net/sockstat")
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("TCP:"))?.to_string();
            let mut it = line.split_whitespace();
            while let Some(k) = it.next() {
                if k == "mem" {
                    return it.next()?.parse().ok();
                }
            }
            None
        })
        .unwrap_or(0);
    let slab_kb: u64 = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find(|l| l.starts_with("Slab:"))?
                .split_whitespace()
                .nth(1)?
                .parse()
                .ok()
        })
        .unwrap_or(0);
    (tcp_pages * page_size(), slab_kb * 1024)
}

/// TCP connections (IPv4) established to a server listening on one of `ports`, counted on the
/// server's side (`/proc/net/tcp` rows whose local port is one of them): on loopback each
/// connection also has a client row, which is not counted. 0 when unreadable.
pub fn established_to(ports: &[u16]) -> u64 {
    let Ok(table) = std::fs::read_to_string("/proc/net/tcp") else {
        return 0;
    };
    table
        .lines()
        .skip(1)
        .filter(|row| {
            let f: Vec<&str> = row.split_whitespace().collect();
            // sl local_address rem_address st …; state 01 is ESTABLISHED.
            let local_port = f
                .get(1)
                .and_then(|a| a.rsplit_once(':'))
                .and_then(|(_, p)| u16::from_str_radix(p, 16).ok());
            f.get(3) == Some(&"01") && local_port.is_some_and(|p| ports.contains(&p))
        })
        .count() as u64
}

#[allow(
    clippy::disallowed_methods,
    reason = "getconf runs once per process and returns at once"
)]
fn page_size() -> u64 {
    static SIZE: OnceLock<u64> = OnceLock::new();
    *SIZE.get_or_init(|| {
        std::process::Command::new("getconf")
            .arg("PAGESIZE")
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(4096)
    })
}

/// Waits (at most `max`) until `pids` use less than a tenth of a core over a quarter second:
/// a server still working off a previous run's requests would disturb the next run.
pub async fn wait_quiet(pids: &[u32], max: Duration) {
    let t0 = Instant::now();
    while t0.elapsed() < max {
        let a = usage(pids).cpu_secs;
        tokio::time::sleep(Duration::from_millis(250)).await;
        if usage(pids).cpu_secs - a < 0.025 {
            return;
        }
    }
}

/// Samples the RSS of `pids` every 20 ms until stopped, keeping the peak: list benchmarks
/// report how far memory rises while bodies are in flight, not where it settles.
pub struct PeakRss {
    peak: std::sync::Arc<std::sync::atomic::AtomicU64>,
    stop: tokio_util::sync::CancellationToken,
}

impl PeakRss {
    /// Starts sampling.
    pub fn start(pids: Vec<u32>) -> PeakRss {
        let peak = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(usage(&pids).rss_bytes));
        let stop = tokio_util::sync::CancellationToken::new();
        let (p, s) = (peak.clone(), stop.clone());
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(20));
            loop {
                tokio::select! {
                    _ = s.cancelled() => return,
                    _ = tick.tick() => {
                        p.fetch_max(usage(&pids).rss_bytes, std::sync::atomic::Ordering::Relaxed);
                    }
                }
            }
        });
        PeakRss { peak, stop }
    }

    /// Stops sampling and returns the peak (bytes).
    pub fn finish(self) -> u64 {
        self.stop.cancel();
        self.peak.load(std::sync::atomic::Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[allow(
        clippy::disallowed_types,
        reason = "a synchronous test outside any runtime opens one loopback connection"
    )]
    fn usage_of_this_process_is_plausible() {
        let a = usage(&[0]);
        // Burn a little CPU so the counter moves.
        let t = Instant::now();
        let mut x = 0u64;
        while t.elapsed() < Duration::from_millis(120) {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        std::hint::black_box(x);
        let b = usage(&[0]);
        assert!(a.rss_bytes > 1 << 20, "rss {}", a.rss_bytes);
        assert!(b.cpu_secs > a.cpu_secs, "{a:?} {b:?}");
        assert!(
            machine_busy_secs() >= b.cpu_secs,
            "the machine ran this process"
        );
        assert_eq!(usage(&[u32::MAX]), Usage::default());
        // A connection of this test's own is counted once, on its server's side.
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let c = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        let _accepted = l.accept().unwrap();
        assert_eq!(established_to(&[port]), 1);
        drop(c);
        // The kernel holds some slab on any running machine.
        let (_, slab) = kernel_socket_memory();
        assert!(slab > 1 << 20, "slab {slab}");
    }

    /// A listener is told apart from another process's on the same port: this process owns
    /// the one it bound, not a port nobody listens on (the probe's, once dropped).
    #[tokio::test]
    async fn a_listener_is_known_by_its_owner() {
        let me = std::process::id();
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        assert!(owns_listener(me, port));
        let free = free_addr().unwrap().port();
        assert!(!owns_listener(me, free));
        drop(l);
        assert!(!owns_listener(me, port));
        assert!(alive(me));
        assert!(!alive(u32::MAX - 1));
    }
}
