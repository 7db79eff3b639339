//! The nginx baseline: nginx as a plain streaming reverse proxy in front of the simulator.
//!
//! This is what a user would otherwise put in front of an apiserver to spread clients over one
//! endpoint: every client request becomes an upstream request (nginx has no notion of a watch to
//! share), and every watch frame is copied through. Comparing watchmux with it shows what sharing
//! the upstream watch and serving lists from a cache buys over plain proxying.
//!
//! The configuration is tuned so that nginx is measured at its best for this traffic, not at its
//! defaults:
//!
//! * `proxy_buffering off` (and no cache, no gzip): a watch frame is sent downstream as soon as
//!   it arrives; with buffering, nginx would hold frames until a buffer fills and watch latency
//!   would be meaningless.
//! * HTTP/1.1 upstream with `Connection: ""` and a `keepalive` pool: LISTs reuse upstream
//!   connections instead of paying a TCP handshake each.
//! * Hour-long timeouts: watches are idle for long stretches; nginx's 60 s defaults would cut them.
//! * `worker_processes auto` with 20000 connections per worker and a matching descriptor limit:
//!   every proxied watch holds two connections (client and upstream).
//! * With TLS ([`Nginx::start_tls`]): `listen ... ssl http2` with the run's certificate, so
//!   clients negotiate HTTP/1.1 or HTTP/2 by ALPN; the upstream stays plain HTTP/1.1, one
//!   upstream connection per watch whatever the client's protocol.
//!
//! Everything nginx writes (pid file, error log, temp directories) stays inside the work
//! directory, so it runs without touching `/etc/nginx` or `/var/log/nginx` and several instances
//! can coexist. nginx runs in the foreground (`daemon off`) as our child process, so its CPU time
//! and RSS, and those of its workers, can be read from `/proc`.

use std::io;
use std::net::SocketAddr;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use tokio::net::TcpStream;
use tokio::process::{Child, Command};

/// How long [`Nginx::start`] waits for nginx to accept connections.
const START_TIMEOUT: Duration = Duration::from_secs(10);
/// How long [`Nginx::stop`] waits for a fast shutdown before killing.
const STOP_TIMEOUT: Duration = Duration::from_secs(5);
/// Lines of the error log quoted in errors.
const LOG_TAIL_LINES: usize = 20;

/// A running nginx (master and workers). Dropping it kills them.
pub struct Nginx {
    /// The master process; `None` once stopped.
    child: Option<Child>,
    /// The master's pid (kept: `Child::id` is `None` once it has been waited for).
    pid: u32,
    /// The work directory (configuration, logs, temp files).
    dir: PathBuf,
}

/// Why nginx could not be started.
#[derive(Debug, thiserror::Error)]
pub enum NginxError {
    /// The work directory or the configuration could not be written.
    #[error("cannot prepare {path}: {source}")]
    Setup {
        /// The file or directory.
        path: PathBuf,
        /// Cause.
        source: io::Error,
    },
    /// The binary could not be run.
    #[error("cannot run {binary}: {source}")]
    Spawn {
        /// The nginx binary.
        binary: PathBuf,
        /// Cause.
        source: io::Error,
    },
    /// nginx exited while starting (a configuration error, a port in use).
    #[error("nginx exited while starting ({status}); its log ends with:\n{log}")]
    Exited {
        /// Exit status of the master.
        status: ExitStatus,
        /// The tail of nginx's error log and output.
        log: String,
    },
    /// nginx did not accept connections in time.
    #[error("nginx did not accept connections on {listen} within {secs} s; its log ends with:\n{log}", secs = START_TIMEOUT.as_secs())]
    NotReady {
        /// The address it should listen on.
        listen: SocketAddr,
        /// The tail of nginx's error log and output.
        log: String,
    },
}

impl Nginx {
    /// The nginx binary if installed (PATH, then /usr/sbin/nginx).
    pub fn find() -> Option<PathBuf> {
        crate::procs::find_binary("nginx", &["/usr/sbin/nginx"])
    }

    /// Writes a config under `workdir` and starts nginx in the foreground (`daemon off`),
    /// listening on `listen` and proxying everything to `upstream`; returns once it accepts
    /// connections (bounded wait, clear error with the tail of nginx's error log otherwise).
    pub async fn start(
        binary: &Path,
        listen: SocketAddr,
        upstream: SocketAddr,
        workdir: &Path,
    ) -> Result<Nginx, NginxError> {
        Nginx::start_tls(binary, listen, upstream, workdir, None).await
    }

    /// [`Nginx::start`], serving TLS (HTTP/1.1 and HTTP/2 by ALPN) with `tls`'s certificate
    /// chain and key files when given.
    pub async fn start_tls(
        binary: &Path,
        listen: SocketAddr,
        upstream: SocketAddr,
        workdir: &Path,
        tls: Option<(&Path, &Path)>,
    ) -> Result<Nginx, NginxError> {
        let setup = |path: &Path| {
            let path = path.to_path_buf();
            move |source| NginxError::Setup { path, source }
        };
        std::fs::create_dir_all(workdir).map_err(setup(workdir))?;
        // nginx resolves relative paths against the prefix; an absolute prefix keeps the config
        // independent of our working directory.
        let dir = std::path::absolute(workdir).map_err(setup(workdir))?;
        for t in TEMP_DIRS {
            let p = dir.join(t);
            std::fs::create_dir_all(&p).map_err(setup(&p))?;
        }
        let conf = dir.join("nginx.conf");
        std::fs::write(
            &conf,
            config(&dir, listen, upstream, running_as_root(), tls),
        )
        .map_err(setup(&conf))?;
        // A pid file left by an earlier run would make us think this one is up.
        let _ = std::fs::remove_file(dir.join("nginx.pid"));
        let out = dir.join("nginx.out");
        let stdout = std::fs::File::create(&out).map_err(setup(&out))?;
        let stderr = stdout.try_clone().map_err(setup(&out))?;
        let child = Command::new(binary)
            // `-e`: even errors before the config is read go to our log, not /var/log/nginx.
            .arg("-p")
            .arg(&dir)
            .arg("-c")
            .arg(&conf)
            .arg("-e")
            .arg(dir.join("error.log"))
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr)
            .kill_on_drop(true)
            .spawn()
            .map_err(|source| NginxError::Spawn {
                binary: binary.to_path_buf(),
                source,
            })?;
        let pid = child.id().unwrap_or_default();
        let mut nginx = Nginx {
            child: Some(child),
            pid,
            dir,
        };
        nginx.wait_ready(listen).await?;
        Ok(nginx)
    }

    /// Waits until nginx has written its pid file (it does so after binding its sockets), has
    /// forked a worker and accepts a connection; fails early if it exits. (The kernel completes
    /// connections on the master's listening socket before any worker exists, and the bench
    /// accounts the workers' CPU and RSS from the start.)
    async fn wait_ready(&mut self, listen: SocketAddr) -> Result<(), NginxError> {
        let deadline = tokio::time::Instant::now() + START_TIMEOUT;
        let pid_file = self.dir.join("nginx.pid");
        loop {
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                self.child = None;
                return Err(NginxError::Exited {
                    status,
                    log: self.log_tail(),
                });
            }
            if pid_file.exists()
                && !children_of(self.pid).is_empty()
                && TcpStream::connect(listen).await.is_ok()
            {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                let log = self.log_tail();
                self.kill_now();
                return Err(NginxError::NotReady { listen, log });
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// PIDs of the master and its worker processes (read from /proc: processes whose parent is
    /// the master), for CPU/RSS accounting. The master comes first.
    pub fn pids(&self) -> Vec<u32> {
        if self.child.is_none() {
            return Vec::new();
        }
        let mut pids = vec![self.pid];
        pids.extend(children_of(self.pid));
        pids
    }

    /// Stops nginx (SIGQUIT/SIGTERM via `kill` command or nginx -s stop; then kill) and waits
    /// for it.
    ///
    /// SIGTERM is nginx's fast shutdown: workers close their connections at once. (SIGQUIT, the
    /// graceful one, would wait for every open watch to end, i.e. for an hour.) The master exits
    /// after its workers have, so waiting for the master waits for all of them.
    pub async fn stop(mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let workers = children_of(self.pid);
        crate::procs::signal("TERM", &[self.pid]).await;
        if tokio::time::timeout(STOP_TIMEOUT, child.wait())
            .await
            .is_err()
        {
            // Killing the master alone would orphan its workers, with the listening socket.
            let mut all = vec![self.pid];
            all.extend(workers);
            crate::procs::signal("KILL", &all).await;
            let _ = child.wait().await;
        }
    }

    /// Kills master and workers at once, without waiting (for errors and `Drop`).
    fn kill_now(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let mut all = vec![self.pid];
        all.extend(children_of(self.pid));
        let _ = std::process::Command::new("kill")
            .arg("-KILL")
            .args(all.iter().map(u32::to_string))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        // Reaps the master if it is gone already; tokio reaps it later otherwise.
        let _ = child.try_wait();
    }

    /// The last lines of nginx's error log and of its own output.
    fn log_tail(&self) -> String {
        let files = ["error.log", "nginx.out"].map(|n| self.dir.join(n));
        crate::procs::tail(&files, LOG_TAIL_LINES)
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        self.kill_now();
    }
}

/// Temp directories nginx may use; they must exist and be writable by the workers.
const TEMP_DIRS: [&str; 5] = [
    "client_body_temp",
    "proxy_temp",
    "fastcgi_temp",
    "uwsgi_temp",
    "scgi_temp",
];

/// The configuration. As root, nginx's workers switch to `nobody`, who could not use temp
/// directories inside a private (0700) work directory; the workers stay root then, as the
/// benchmark's other processes do. With `tls` (certificate chain and key files), the listener
/// serves TLS and offers HTTP/2.
fn config(
    dir: &Path,
    listen: SocketAddr,
    upstream: SocketAddr,
    root: bool,
    tls: Option<(&Path, &Path)>,
) -> String {
    let d = dir.display();
    let user = if root { "user root;\n" } else { "" };
    let listen = match tls {
        None => format!("listen {listen};"),
        Some((cert, key)) => format!(
            "listen {listen} ssl http2;\n        ssl_certificate {};\n        ssl_certificate_key {};\n        ssl_protocols TLSv1.2 TLSv1.3;",
            cert.display(),
            key.display()
        ),
    };
    format!(
        r#"# Written by `watchmux-bench`: nginx as a plain streaming reverse proxy.
daemon off;
master_process on;
{user}worker_processes auto;
worker_rlimit_nofile 20000;
pid {d}/nginx.pid;
error_log {d}/error.log warn;

events {{
    worker_connections 20000;
}}

http {{
    access_log off;
    client_body_temp_path {d}/client_body_temp;
    proxy_temp_path {d}/proxy_temp;
    fastcgi_temp_path {d}/fastcgi_temp;
    uwsgi_temp_path {d}/uwsgi_temp;
    scgi_temp_path {d}/scgi_temp;

    client_max_body_size 0;
    gzip off;
    send_timeout 3600s;
    keepalive_timeout 3600s;
    keepalive_requests 1000000;

    proxy_http_version 1.1;
    proxy_set_header Connection "";
    proxy_buffering off;
    proxy_request_buffering off;
    proxy_cache off;
    proxy_read_timeout 3600s;
    proxy_send_timeout 3600s;

    upstream apiserver {{
        server {upstream};
        keepalive 1024;
        keepalive_requests 1000000;
        keepalive_timeout 3600s;
    }}

    server {{
        {listen}
        location / {{
            proxy_pass http://apiserver;
        }}
    }}
}}
"#
    )
}

fn running_as_root() -> bool {
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// Processes whose parent is `parent`, from `/proc/PID/stat`.
fn children_of(parent: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut out: Vec<u32> = entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| parent_of(*pid) == Some(parent))
        .collect();
    out.sort_unstable();
    out
}

/// The parent pid: the second field after the command name, which is in parentheses and may
/// itself contain spaces and parentheses (hence the last `)`).
fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::{Value, json};

    use super::*;
    use crate::limit::raw_client::{Conn, get};
    use kube_sim::fleet::FleetSpec;
    use kube_sim::{SimConfig, Simulator};

    async fn free_port() -> SocketAddr {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        l.local_addr().unwrap()
    }

    /// Gone, or a zombie nobody reaped yet (not running either way).
    fn running(pid: u32) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
            let state = s[s.rfind(')').unwrap() + 1..].split_whitespace().next();
            state != Some("Z")
        })
    }

    async fn all_gone(pids: &[u32]) -> bool {
        for _ in 0..100 {
            if !pids.iter().any(|p| running(*p)) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        false
    }

    #[test]
    fn parses_proc_stat() {
        let me = std::process::id();
        let parent = parent_of(me).unwrap();
        assert!(children_of(parent).contains(&me));
        let conf = config(
            Path::new("/w"),
            "127.0.0.1:1".parse().unwrap(),
            "127.0.0.1:2".parse().unwrap(),
            true,
            None,
        );
        assert!(conf.contains("user root;\nworker_processes auto;"));
        assert!(conf.contains("listen 127.0.0.1:1;"));
        assert!(conf.contains("server 127.0.0.1:2;"));
        assert!(conf.contains("pid /w/nginx.pid;"));
        let tls = config(
            Path::new("/w"),
            "127.0.0.1:1".parse().unwrap(),
            "127.0.0.1:2".parse().unwrap(),
            false,
            Some((Path::new("/c/tls.crt"), Path::new("/c/tls.key"))),
        );
        assert!(!tls.contains("user root;"));
        assert!(tls.contains("listen 127.0.0.1:1 ssl http2;"), "{tls}");
        assert!(tls.contains("ssl_certificate /c/tls.crt;"), "{tls}");
        assert!(tls.contains("ssl_certificate_key /c/tls.key;"), "{tls}");
    }

    #[tokio::test]
    async fn proxies_lists_and_streams_watches() {
        let Some(binary) = Nginx::find() else {
            eprintln!(
                "skipped: nginx is not installed (crates/watchmux-bench/scripts/install-nginx installs it)"
            );
            return;
        };
        let sim = Simulator::start(SimConfig {
            fleet: Some(FleetSpec {
                nodes: 2,
                pods: 4,
                namespaces: 1,
                seed: 3,
            }),
            ..SimConfig::default()
        })
        .await
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let listen = free_port().await;
        let nginx = Nginx::start(&binary, listen, sim.addr(), dir.path())
            .await
            .unwrap();
        let pids = nginx.pids();
        assert!(pids.len() >= 2, "master and workers: {pids:?}");

        // A LIST through nginx is the simulator's body.
        let (h, through) = get(listen, "/api/v1/namespaces").await;
        assert_eq!(h.status, 200);
        assert_eq!(through, get(sim.addr(), "/api/v1/namespaces").await.1);

        // A watch frame passes through at once: proxy buffering is off.
        let (_, list) = get(listen, "/api/v1/pods?limit=1").await;
        let list: Value = serde_json::from_slice(&list).unwrap();
        let rv = list["metadata"]["resourceVersion"].as_str().unwrap();
        let name = list["items"][0]["metadata"]["name"].as_str().unwrap();
        let ns = list["items"][0]["metadata"]["namespace"].as_str().unwrap();
        let mut w = Conn::open(listen).await;
        w.send("GET", &format!("/api/v1/pods?watch=1&resourceVersion={rv}"))
            .await;
        let head = w.head().await;
        assert_eq!(head.status, 200);
        assert_eq!(head.header("transfer-encoding"), Some("chunked"));
        let rt = sim.resource("", "v1", "pods").unwrap();
        let started = std::time::Instant::now();
        sim.ops()
            .modify(&rt, Some(ns), name, |v| {
                v["metadata"]["labels"]["through"] = json!("nginx")
            })
            .unwrap();
        let line = w.line(&mut Vec::new(), Duration::from_secs(2)).await;
        let ev: Value = serde_json::from_slice(&line).unwrap();
        assert_eq!(ev["type"], "MODIFIED");
        assert_eq!(ev["object"]["metadata"]["labels"]["through"], "nginx");
        eprintln!("watch frame through nginx after {:?}", started.elapsed());

        nginx.stop().await;
        assert!(all_gone(&pids).await, "still running: {pids:?}");
        assert!(w.closed_within(Duration::from_secs(2)).await);
    }

    #[tokio::test]
    async fn reports_start_errors_and_drop_kills() {
        let Some(binary) = Nginx::find() else {
            eprintln!(
                "skipped: nginx is not installed (crates/watchmux-bench/scripts/install-nginx installs it)"
            );
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        let upstream = free_port().await;
        // A port in use: nginx exits and says why.
        let taken = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let err = Nginx::start(&binary, taken.local_addr().unwrap(), upstream, dir.path())
            .await
            .err()
            .expect("start must fail");
        let text = err.to_string();
        assert!(text.contains("Address already in use"), "{text}");
        drop(taken);

        let listen = free_port().await;
        let nginx = Nginx::start(&binary, listen, upstream, dir.path())
            .await
            .unwrap();
        let pids = nginx.pids();
        assert!(pids.len() >= 2, "{pids:?}");
        // No upstream: a clean 502 from nginx, not a hang.
        assert_eq!(get(listen, "/api/v1/pods").await.0.status, 502);
        drop(nginx);
        assert!(all_gone(&pids).await, "still running: {pids:?}");
    }
}
