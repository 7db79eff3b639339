//! HAProxy (Debian's package) as the load balancer in front of several watchmux replicas: TCP
//! mode, round robin, each replica health-checked on its `/readyz` (so a replica that is
//! shutting down is taken out before it stops accepting), and optionally sending the PROXY
//! protocol v2 header (`send-proxy-v2`) on every connection to a replica, health checks
//! included. A connection to a replica that refuses it is tried again on another
//! (`option redispatch`).
//!
//! Starting, reading its stats socket (`show stat`: each replica's open connections and state)
//! and stopping only; what the connection counts mean is the scenario's business. HAProxy runs
//! in the foreground (`-db`, one process) as the bench's child, killed when dropped, with its
//! configuration, stats socket and output in its own work directory, bound to 127.0.0.1.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, Command};

use super::BenchError;
use super::procs;

/// How long [`Haproxy::start`] waits for HAProxy to accept connections.
const START_TIMEOUT: Duration = Duration::from_secs(10);
/// How long [`Haproxy::stop`] waits after SIGTERM before killing.
const STOP_TIMEOUT: Duration = Duration::from_secs(5);
/// Lines of HAProxy's output quoted in errors.
const LOG_TAIL_LINES: usize = 20;
/// The backend's name in the configuration and the stats.
const BACKEND: &str = "replicas";

/// How HAProxy talks to the replicas.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Send the PROXY protocol v2 header on every connection to a replica (`send-proxy-v2`),
    /// health checks included (`check-send-proxy`).
    pub send_proxy_v2: bool,
    /// Connect to the replicas from this local address (`source`), so that a replica can trust
    /// the PROXY header from the balancer alone (another loopback address than the bench's own
    /// connections to it).
    pub source: Option<IpAddr>,
    /// Health check interval (also `fastinter` and `downinter`); a replica is marked down after
    /// two failed checks and up after two good ones.
    pub check_interval: Duration,
}

/// One replica as HAProxy's stats show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerStat {
    /// Its name (`r0`, `r1`, …: the order of the addresses given to [`Haproxy::start`]).
    pub name: String,
    /// `UP`, `DOWN`, `UP 1/2`, `NOLB`, `MAINT`…
    pub status: String,
    /// Connections open to it now (`scur`).
    pub current: u64,
    /// Connections it was given in all (`stot`).
    pub total: u64,
}

impl ServerStat {
    /// Whether HAProxy sends it new connections.
    pub fn up(&self) -> bool {
        self.status == "UP"
    }
}

/// A running HAProxy; dropping it kills it.
pub struct Haproxy {
    child: Option<Child>,
    pid: u32,
    dir: PathBuf,
    /// Where clients connect.
    pub addr: SocketAddr,
}

/// The replica names HAProxy's stats use, in the order of their addresses.
pub fn server_name(i: usize) -> String {
    format!("r{i}")
}

impl Haproxy {
    /// The haproxy binary if installed (PATH, then /usr/sbin/haproxy).
    pub fn find() -> Option<PathBuf> {
        procs::find_binary("haproxy", &["/usr/sbin/haproxy"])
    }

    /// Writes a configuration under `dir` and starts HAProxy listening on `listen`, balancing
    /// over `servers` round robin; returns once it accepts connections and answers on its stats
    /// socket (bounded wait; an error quotes its output otherwise).
    pub async fn start(
        binary: &Path,
        listen: SocketAddr,
        servers: &[SocketAddr],
        dir: &Path,
        opts: &Options,
    ) -> Result<Haproxy, BenchError> {
        std::fs::create_dir_all(dir)
            .map_err(|e| BenchError::io(format!("creating {}", dir.display()), e))?;
        let dir = std::path::absolute(dir)
            .map_err(|e| BenchError::io(format!("resolving {}", dir.display()), e))?;
        let conf = dir.join("haproxy.cfg");
        std::fs::write(&conf, config(&dir, listen, servers, opts))
            .map_err(|e| BenchError::io(format!("writing {}", conf.display()), e))?;
        let _ = std::fs::remove_file(dir.join("haproxy.sock"));
        let out = dir.join("haproxy.out");
        let stdout = std::fs::File::create(&out)
            .map_err(|e| BenchError::io(format!("creating {}", out.display()), e))?;
        let stderr = stdout
            .try_clone()
            .map_err(|e| BenchError::io(format!("creating {}", out.display()), e))?;
        let child = Command::new(binary)
            .arg("-db")
            .arg("-f")
            .arg(&conf)
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| BenchError::io(format!("starting {}", binary.display()), e))?;
        let pid = child.id().unwrap_or_default();
        let mut h = Haproxy {
            child: Some(child),
            pid,
            dir,
            addr: listen,
        };
        h.wait_ready().await?;
        Ok(h)
    }

    async fn wait_ready(&mut self) -> Result<(), BenchError> {
        let deadline = tokio::time::Instant::now() + START_TIMEOUT;
        loop {
            if let Some(c) = self.child.as_mut()
                && let Ok(Some(status)) = c.try_wait()
            {
                self.child = None;
                return Err(BenchError::Setup(format!(
                    "haproxy exited while starting ({status}); its output ends with:\n{}",
                    self.log_tail()
                )));
            }
            if tokio::net::TcpStream::connect(self.addr).await.is_ok() && self.stats().await.is_ok()
            {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(BenchError::Setup(format!(
                    "haproxy does not accept connections on {} after {START_TIMEOUT:?}; its output ends with:\n{}",
                    self.addr,
                    self.log_tail()
                )));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Its process id (one process: `-db`).
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The replicas' lines of `show stat`, in server order.
    pub async fn stats(&self) -> Result<Vec<ServerStat>, BenchError> {
        let sock = self.dir.join("haproxy.sock");
        let io = |e| BenchError::io(format!("asking {} for its stats", sock.display()), e);
        let mut s = tokio::net::UnixStream::connect(&sock).await.map_err(io)?;
        s.write_all(b"show stat\n").await.map_err(io)?;
        let mut text = String::new();
        tokio::time::timeout(Duration::from_secs(5), s.read_to_string(&mut text))
            .await
            .map_err(|_| BenchError::Run("haproxy's stats socket did not answer".into()))?
            .map_err(io)?;
        parse_stats(&text)
    }

    /// Waits (at most `max`) until every replica is up in HAProxy's eyes.
    pub async fn wait_all_up(&self, max: Duration) -> Result<(), BenchError> {
        let t0 = tokio::time::Instant::now();
        loop {
            let s = self.stats().await?;
            if !s.is_empty() && s.iter().all(ServerStat::up) {
                return Ok(());
            }
            if t0.elapsed() > max {
                return Err(BenchError::Run(format!(
                    "haproxy: not every replica up after {max:?}: {s:?}"
                )));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Stops HAProxy (SIGTERM: its hard stop, every connection closed) and waits for it.
    pub async fn stop(mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        procs::signal("TERM", &[self.pid]).await;
        if tokio::time::timeout(STOP_TIMEOUT, child.wait())
            .await
            .is_err()
        {
            let _ = child.start_kill();
            let _ = child.wait().await;
        }
    }

    fn log_tail(&self) -> String {
        procs::tail(&[self.dir.join("haproxy.out")], LOG_TAIL_LINES)
    }
}

impl Drop for Haproxy {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.start_kill();
            let _ = c.try_wait();
        }
    }
}

/// The configuration: one TCP frontend on `listen`, one backend of `servers`.
fn config(dir: &Path, listen: SocketAddr, servers: &[SocketAddr], opts: &Options) -> String {
    let d = dir.display();
    let ms = opts.check_interval.as_millis().max(10);
    let mut server_opts =
        format!("check inter {ms}ms fastinter {ms}ms downinter {ms}ms fall 2 rise 2");
    if opts.send_proxy_v2 {
        server_opts.push_str(" send-proxy-v2 check-send-proxy");
    }
    if let Some(src) = opts.source {
        server_opts.push_str(&format!(" source {src}"));
    }
    let mut lines = String::new();
    for (i, s) in servers.iter().enumerate() {
        lines.push_str(&format!(
            "    server {} {s} {server_opts}\n",
            server_name(i)
        ));
    }
    format!(
        r#"# Written by `watchmux-bench`: HAProxy in front of watchmux replicas.
global
    nbthread 1
    maxconn 8000
    stats socket {d}/haproxy.sock mode 600 level user

defaults
    mode tcp
    timeout connect 2s
    timeout client 1h
    timeout server 1h
    timeout check 1s
    retries 3
    option redispatch

frontend apiserver
    bind {listen}
    default_backend {BACKEND}

backend {BACKEND}
    balance roundrobin
    option httpchk
    http-check send meth GET uri /readyz ver HTTP/1.1 hdr Host localhost
    http-check expect status 200
{lines}"#
    )
}

/// The backend's servers from `show stat`'s CSV (`# pxname,svname,…` then one line per proxy
/// and server).
fn parse_stats(csv: &str) -> Result<Vec<ServerStat>, BenchError> {
    let mut lines = csv.lines();
    let header = lines
        .next()
        .and_then(|h| h.strip_prefix("# "))
        .ok_or_else(|| BenchError::Run(format!("haproxy's stats: no header in {csv:?}")))?;
    let cols: Vec<&str> = header.split(',').collect();
    let col = |name: &str| {
        cols.iter()
            .position(|c| *c == name)
            .ok_or_else(|| BenchError::Run(format!("haproxy's stats: no {name} column")))
    };
    let (px, sv, scur, stot, status) = (
        col("pxname")?,
        col("svname")?,
        col("scur")?,
        col("stot")?,
        col("status")?,
    );
    Ok(lines
        .map(|l| l.split(',').collect::<Vec<_>>())
        .filter(|f| {
            f.get(px) == Some(&BACKEND)
                && !matches!(f.get(sv), Some(&"BACKEND") | Some(&"FRONTEND") | None)
        })
        .map(|f| {
            let num = |i: usize| f.get(i).and_then(|v| v.parse().ok()).unwrap_or(0);
            ServerStat {
                name: f[sv].to_string(),
                status: f.get(status).unwrap_or(&"").to_string(),
                current: num(scur),
                total: num(stot),
            }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_a_tcp_round_robin_config_and_reads_its_stats() {
        let servers: Vec<SocketAddr> = vec![
            "127.0.0.1:2".parse().unwrap(),
            "127.0.0.1:3".parse().unwrap(),
        ];
        let plain = config(
            Path::new("/w"),
            "127.0.0.1:1".parse().unwrap(),
            &servers,
            &Options {
                check_interval: Duration::from_millis(250),
                ..Options::default()
            },
        );
        assert!(plain.contains("mode tcp"), "{plain}");
        assert!(plain.contains("bind 127.0.0.1:1\n"), "{plain}");
        assert!(plain.contains("balance roundrobin"), "{plain}");
        assert!(plain.contains("stats socket /w/haproxy.sock"), "{plain}");
        assert!(
            plain.contains("server r1 127.0.0.1:3 check inter 250ms fastinter 250ms downinter 250ms fall 2 rise 2\n"),
            "{plain}"
        );
        assert!(!plain.contains("send-proxy"), "{plain}");
        let proxied = config(
            Path::new("/w"),
            "127.0.0.1:1".parse().unwrap(),
            &servers,
            &Options {
                send_proxy_v2: true,
                source: Some("127.0.0.2".parse().unwrap()),
                check_interval: Duration::from_millis(250),
            },
        );
        assert!(
            proxied.contains("send-proxy-v2 check-send-proxy source 127.0.0.2\n"),
            "{proxied}"
        );

        let csv = "# pxname,svname,qcur,qmax,scur,smax,slim,stot,bin,bout,dreq,dresp,ereq,econ,eresp,wretr,wredis,status\n\
                   apiserver,FRONTEND,,,5,9,8000,40,0,0,0,0,0,,,,,OPEN\n\
                   replicas,r0,0,0,3,4,,20,0,0,,0,,0,0,0,0,UP\n\
                   replicas,r1,0,0,2,5,,20,0,0,,0,,0,0,0,0,DOWN\n\
                   replicas,BACKEND,0,0,5,9,800,40,0,0,0,0,,0,0,0,0,UP\n\n";
        let s = parse_stats(csv).unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(
            (s[0].name.as_str(), s[0].current, s[0].total),
            ("r0", 3, 20)
        );
        assert!(s[0].up() && !s[1].up());
        assert!(parse_stats("").is_err());
    }

    /// HAProxy (when installed) spreads connections over two servers and counts them.
    #[tokio::test]
    async fn balances_connections_and_counts_them() {
        let Some(binary) = Haproxy::find() else {
            eprintln!(
                "skipped: haproxy is not installed (crates/watchmux-bench/scripts/install-haproxy installs it)"
            );
            return;
        };
        // Two servers that answer /readyz 200 and keep other connections open.
        let mut addrs = Vec::new();
        for _ in 0..2 {
            let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            addrs.push(l.local_addr().unwrap());
            tokio::spawn(async move {
                loop {
                    let Ok((mut s, _)) = l.accept().await else {
                        return;
                    };
                    tokio::spawn(async move {
                        let mut buf = [0u8; 1024];
                        let n = s.read(&mut buf).await.unwrap_or(0);
                        if buf[..n].starts_with(b"GET /readyz") {
                            let _ = s
                                .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
                                .await;
                            return;
                        }
                        let _ = s.read(&mut buf).await;
                    });
                }
            });
        }
        let dir = tempfile::tempdir().unwrap();
        let listen = procs::free_addr().unwrap();
        let opts = Options {
            check_interval: Duration::from_millis(100),
            ..Options::default()
        };
        let h = Haproxy::start(&binary, listen, &addrs, dir.path(), &opts)
            .await
            .unwrap();
        h.wait_all_up(Duration::from_secs(5)).await.unwrap();
        let mut conns = Vec::new();
        for _ in 0..4 {
            let mut c = tokio::net::TcpStream::connect(listen).await.unwrap();
            c.write_all(b"hello").await.unwrap();
            conns.push(c);
        }
        let mut s = Vec::new();
        for _ in 0..50 {
            s = h.stats().await.unwrap();
            if s.iter().map(|x| x.current).sum::<u64>() == 4 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(
            s.iter().map(|x| x.current).collect::<Vec<_>>(),
            vec![2, 2],
            "{s:?}"
        );
        let pid = h.pid();
        h.stop().await;
        assert!(
            !Path::new(&format!("/proc/{pid}/cmdline")).exists() || {
                // A zombie until reaped is gone for our purpose.
                std::fs::read_to_string(format!("/proc/{pid}/stat"))
                    .is_ok_and(|t| t.contains(") Z"))
            }
        );
    }
}
