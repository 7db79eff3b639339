//! One exec credential plugin: its configuration (a kubeconfig user's `exec`), one run of it,
//! and the reading of its answer, as client-go's `plugin/pkg/client/auth/exec` does them.
//!
//! A run: the command (a path with a separator as it is, kube's loader having made a relative
//! one absolute against the kubeconfig's folder; a bare name looked up on `PATH`) with its
//! `args`, watchmux's environment plus the user's `env` plus `KUBERNETES_EXEC_INFO` (an
//! `ExecCredential` whose `spec` says `interactive: false` and, with `provideClusterInfo`, holds
//! the cluster), no standard input (watchmux has no terminal), each line of its standard error
//! logged with the command, bounded by a timeout (then killed). Its standard output must be one
//! `ExecCredential` (JSON, or YAML as client-go's decoder also takes) of the configured
//! apiVersion whose `status` holds a token and/or a client certificate and key, not yet expired.
//!
//! Must not cache, schedule or share runs (that is [`super`]), nor touch HTTP.

use std::error::Error as StdError;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use base64::Engine;
use http::HeaderValue;
use k8s_openapi::jiff::Timestamp;
use kube::config::{ExecAuthCluster, ExecConfig, ExecInteractiveMode};
use rustls::sign::CertifiedKey;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt};

use crate::auth::{Credentials, TokenError};
use crate::tls::{Identity, PemError, certified_key, certs_from_pem, key_from_pem, not_after};

/// `client.authentication.k8s.io/v1`.
pub const V1: &str = "client.authentication.k8s.io/v1";
/// `client.authentication.k8s.io/v1beta1`.
pub const V1BETA1: &str = "client.authentication.k8s.io/v1beta1";

/// The environment variable a plugin reads its `ExecCredential` input from.
pub const EXEC_INFO_ENV: &str = "KUBERNETES_EXEC_INFO";

/// At most this much of a plugin's standard output is kept (an `ExecCredential` with a
/// certificate chain is a few kilobytes).
const MAX_OUTPUT: usize = 1 << 20;

/// The last lines of standard error kept for the error of a failed run.
const STDERR_TAIL_LINES: usize = 5;

/// A standard error line longer than this is cut (in the log and the error).
const MAX_STDERR_LINE: usize = 1000;

/// A configured exec credential plugin.
pub struct Plugin {
    origin: String,
    command: String,
    args: Vec<String>,
    env: Vec<(String, String)>,
    api_version: &'static str,
    install_hint: Option<String>,
    exec_info: String,
    timeout: Duration,
}

impl fmt::Debug for Plugin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The environment may hold secrets: names only.
        f.debug_struct("Plugin")
            .field("origin", &self.origin)
            .field("command", &self.command)
            .field("args", &self.args)
            .field(
                "env",
                &self.env.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(),
            )
            .field("api_version", &self.api_version)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

/// Why a kubeconfig user's `exec` cannot be used (found at start-up).
#[derive(Debug, thiserror::Error)]
#[error("user {user:?}: exec: {problem}")]
pub struct ExecConfigError {
    /// The kubeconfig's user entry.
    pub user: String,
    /// What is wrong.
    pub problem: ExecConfigProblem,
}

/// What is wrong with an `exec` stanza.
#[derive(Debug, thiserror::Error)]
pub enum ExecConfigProblem {
    /// No `command`.
    #[error("command must be specified")]
    NoCommand,
    /// No `apiVersion`.
    #[error("apiVersion must be specified ({V1} or {V1BETA1})")]
    NoApiVersion,
    /// An `apiVersion` client-go does not accept either.
    #[error("invalid apiVersion {0:?} (supported: {V1}, {V1BETA1})")]
    ApiVersion(String),
    /// `apiVersion: client.authentication.k8s.io/v1` without `interactiveMode`.
    #[error(
        "interactiveMode must be specified with apiVersion {V1} (watchmux has no terminal: use Never)"
    )]
    NoInteractiveMode,
    /// `interactiveMode: Always`.
    #[error(
        "interactiveMode Always needs a terminal, which watchmux never has (it runs the plugin \
         without standard input): use Never, or IfAvailable"
    )]
    AlwaysInteractive,
    /// An `env` entry without a `name`.
    #[error("env entry #{0} has no name")]
    EnvWithoutName(usize),
    /// The command is not there.
    #[error("{}", not_found(.command, .hint.as_deref()))]
    NotFound {
        /// The command as configured.
        command: String,
        /// The `installHint`.
        hint: Option<String>,
    },
}

fn not_found(command: &str, hint: Option<&str>) -> String {
    let mut s = if command.contains(std::path::MAIN_SEPARATOR) {
        format!("executable {command} not found")
    } else {
        format!("executable {command:?} not found on PATH")
    };
    match hint.map(str::trim).filter(|h| !h.is_empty()) {
        Some(h) => s.push_str(&format!(" (installHint: {h})")),
        None => s.push_str(
            " (see https://kubernetes.io/docs/reference/access-authn-authz/authentication/#client-go-credential-plugins)",
        ),
    }
    s
}

/// Why one run of a plugin gave no credential: what it was and which user entry configured it.
/// Its text names the kubeconfig, user and command, then the problem; [`StdError::source`] is
/// the problem's own cause (a JSON error, say), never the problem again.
#[derive(Debug)]
pub struct ExecError {
    origin: String,
    command: String,
    problem: ExecProblem,
}

impl ExecError {
    /// What went wrong.
    pub fn problem(&self) -> &ExecProblem {
        &self.problem
    }
}

impl fmt::Display for ExecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: exec credential plugin {}: {}",
            self.origin, self.command, self.problem
        )
    }
}

impl StdError for ExecError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.problem.source()
    }
}

/// What went wrong in one run.
#[derive(Debug, thiserror::Error)]
pub enum ExecProblem {
    /// The command is not there (any more).
    #[error("{}", not_found(.command, .hint.as_deref()))]
    NotFound {
        /// The command as configured.
        command: String,
        /// The `installHint`.
        hint: Option<String>,
    },
    /// It could not be started.
    #[error("cannot be started")]
    Spawn(#[source] std::io::Error),
    /// Its output could not be read, or it could not be waited for.
    #[error("cannot read its output")]
    Io(#[source] std::io::Error),
    /// It exited unsuccessfully.
    #[error("failed with {status}{}", stderr_tail(.stderr))]
    Failed {
        /// Its exit status.
        status: ExitStatus,
        /// The last lines of its standard error.
        stderr: Vec<String>,
    },
    /// It did not exit in time.
    #[error("did not finish within {}s: killed{}", .timeout.as_secs_f64(), stderr_tail(.stderr))]
    Timeout {
        /// `upstream.exec_timeout_secs`.
        timeout: Duration,
        /// The last lines of its standard error.
        stderr: Vec<String>,
    },
    /// Nothing on standard output.
    #[error("wrote nothing to standard output (an ExecCredential was expected)")]
    Empty,
    /// Too much on standard output.
    #[error("wrote more than {MAX_OUTPUT} bytes to standard output")]
    TooLarge,
    /// Not UTF-8.
    #[error("its output is not UTF-8 text")]
    NotText,
    /// Not a JSON (or YAML) object of the expected shape.
    #[error("its output is not an ExecCredential")]
    Malformed(#[source] Box<dyn StdError + Send + Sync>),
    /// The wrong apiVersion or kind.
    #[error(
        "it returned apiVersion {got_version:?}, kind {got_kind:?}: the kubeconfig asks for an ExecCredential of {want}"
    )]
    WrongType {
        /// The configured apiVersion.
        want: &'static str,
        /// What it returned.
        got_version: String,
        /// What it returned.
        got_kind: String,
    },
    /// No `status`.
    #[error("its ExecCredential has no status")]
    NoStatus,
    /// Neither a token nor a certificate and key.
    #[error(
        "its ExecCredential has neither status.token nor status.clientCertificateData and status.clientKeyData"
    )]
    NoCredential,
    /// A certificate without its key or a key without its certificate.
    #[error("its ExecCredential has {0} without {1}")]
    HalfCertificate(&'static str, &'static str),
    /// `status.token` cannot be sent.
    #[error("status.token cannot be used")]
    Token(#[source] TokenError),
    /// `status.clientCertificateData` holds no certificate.
    #[error("status.clientCertificateData cannot be used")]
    Certificate(#[source] PemError),
    /// `status.clientKeyData` holds no key.
    #[error("status.clientKeyData cannot be used")]
    Key(#[source] PemError),
    /// The key is not the certificate's, or of a type rustls cannot sign with.
    #[error("status.clientCertificateData and status.clientKeyData do not make a usable pair")]
    KeyPair(#[source] rustls::Error),
    /// `status.expirationTimestamp` is not a time.
    #[error("status.expirationTimestamp {value:?} is not an RFC 3339 time")]
    Expiration {
        /// The value.
        value: String,
        /// Why it is not one.
        #[source]
        source: k8s_openapi::jiff::Error,
    },
    /// The credential has expired already.
    #[error("it returned a credential that expired at {0}")]
    Expired(String),
}

fn stderr_tail(lines: &[String]) -> String {
    if lines.is_empty() {
        String::new()
    } else {
        format!("; stderr: {}", lines.join(" | "))
    }
}

/// What a run gave: the token and/or client certificate, and when they expire.
pub struct Credential {
    /// `Authorization: Bearer <status.token>` (marked sensitive).
    pub authorization: Option<HeaderValue>,
    /// The client certificate chain and its key.
    pub certificate: Option<Arc<CertifiedKey>>,
    /// The earlier of `status.expirationTimestamp` and the certificate's notAfter.
    pub expires: Option<SystemTime>,
}

impl fmt::Debug for Credential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credential")
            .field("token", &self.authorization.is_some())
            .field("certificate", &self.certificate.is_some())
            .field("expires", &self.expires)
            .finish()
    }
}

impl Credential {
    /// For the log: `token`, `client certificate` or both.
    pub fn kind(&self) -> &'static str {
        match (self.authorization.is_some(), self.certificate.is_some()) {
            (true, true) => "token and client certificate",
            (false, true) => "client certificate",
            _ => "token",
        }
    }
}

impl Plugin {
    /// The plugin of kubeconfig user `user`'s `exec`, for errors and the log named by `origin`
    /// (`upstream.kubeconfig (/path), context "c"`), each run bounded by `timeout`. Refuses what
    /// client-go's validation refuses, `interactiveMode: Always` (there is no terminal), and a
    /// command that cannot be found.
    pub fn new(
        user: &str,
        origin: &str,
        exec: &ExecConfig,
        timeout: Duration,
    ) -> Result<Plugin, ExecConfigError> {
        let err = |problem| ExecConfigError {
            user: user.to_string(),
            problem,
        };
        let command = exec
            .command
            .clone()
            .filter(|c| !c.is_empty())
            .ok_or_else(|| err(ExecConfigProblem::NoCommand))?;
        let api_version = match exec.api_version.as_deref() {
            None | Some("") => return Err(err(ExecConfigProblem::NoApiVersion)),
            Some(V1) => V1,
            Some(V1BETA1) => V1BETA1,
            Some(v) => return Err(err(ExecConfigProblem::ApiVersion(v.to_string()))),
        };
        // client-go's defaulting: v1beta1 without a mode is IfAvailable; v1 must say.
        match (&exec.interactive_mode, api_version) {
            (Some(ExecInteractiveMode::Always), _) => {
                return Err(err(ExecConfigProblem::AlwaysInteractive));
            }
            (None, V1) => return Err(err(ExecConfigProblem::NoInteractiveMode)),
            _ => {}
        }
        let mut env = Vec::new();
        for (i, e) in exec.env.iter().flatten().enumerate() {
            let name = e
                .get("name")
                .filter(|n| !n.is_empty())
                .ok_or_else(|| err(ExecConfigProblem::EnvWithoutName(i + 1)))?;
            env.push((name.clone(), e.get("value").cloned().unwrap_or_default()));
        }
        let install_hint = exec.install_hint.clone();
        if look_path(&command).is_none() {
            return Err(err(ExecConfigProblem::NotFound {
                command,
                hint: install_hint,
            }));
        }
        let cluster = exec
            .provide_cluster_info
            .then_some(exec.cluster.as_ref())
            .flatten();
        Ok(Plugin {
            origin: format!("{origin}, user {user:?}"),
            exec_info: exec_info(api_version, cluster),
            command,
            args: exec.args.clone().unwrap_or_default(),
            env,
            api_version,
            install_hint,
            timeout,
        })
    }

    /// The command as configured (an absolute path when the kubeconfig gave a relative one).
    pub fn command(&self) -> &str {
        &self.command
    }

    /// `upstream.kubeconfig (/path), context "c", user "u"`.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// The `KUBERNETES_EXEC_INFO` value of every run.
    pub fn exec_info(&self) -> &str {
        &self.exec_info
    }

    fn error(&self, problem: ExecProblem) -> ExecError {
        ExecError {
            origin: self.origin.clone(),
            command: self.command.clone(),
            problem,
        }
    }

    /// Runs the plugin once and reads its credential.
    pub async fn run(&self) -> Result<Credential, ExecError> {
        let out = self.execute().await.map_err(|p| self.error(p))?;
        parse(&out, self.api_version, SystemTime::now()).map_err(|p| self.error(p))
    }

    /// Runs the command; its standard output.
    async fn execute(&self) -> Result<Vec<u8>, ExecProblem> {
        let not_found = || ExecProblem::NotFound {
            command: self.command.clone(),
            hint: self.install_hint.clone(),
        };
        let program = look_path(&self.command).ok_or_else(not_found)?;
        let mut cmd = tokio::process::Command::new(program);
        cmd.args(&self.args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .env(EXEC_INFO_ENV, &self.exec_info)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd.spawn().map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => not_found(),
            _ => ExecProblem::Spawn(e),
        })?;
        let stdout = child.stdout.take();
        let stderr = child.stderr.take();
        let tail = parking_lot::Mutex::new(Vec::new());
        let work = async {
            let (out, ()) = tokio::join!(read_output(stdout), log_stderr(stderr, self, &tail));
            let status = child.wait().await.map_err(ExecProblem::Io)?;
            Ok::<_, ExecProblem>((out?, status))
        };
        let (out, status) = match tokio::time::timeout(self.timeout, work).await {
            Ok(r) => r?,
            Err(_) => {
                let _ = child.start_kill();
                // Reaped, so that no zombie is left (bounded: a killed process exits).
                let _ = tokio::time::timeout(Duration::from_secs(5), child.wait()).await;
                return Err(ExecProblem::Timeout {
                    timeout: self.timeout,
                    stderr: tail.into_inner(),
                });
            }
        };
        if !status.success() {
            return Err(ExecProblem::Failed {
                status,
                stderr: tail.into_inner(),
            });
        }
        out.ok_or(ExecProblem::TooLarge)
    }
}

/// Standard output, up to [`MAX_OUTPUT`] bytes (`None` past it; the rest is read and dropped,
/// so the plugin does not block on a full pipe).
async fn read_output(
    stdout: Option<impl AsyncRead + Unpin>,
) -> Result<Option<Vec<u8>>, ExecProblem> {
    let Some(mut stdout) = stdout else {
        return Ok(Some(Vec::new()));
    };
    let mut out = Vec::new();
    let mut buf = [0u8; 8192];
    let mut too_large = false;
    loop {
        let n = stdout.read(&mut buf).await.map_err(ExecProblem::Io)?;
        if n == 0 {
            break;
        }
        if out.len() + n > MAX_OUTPUT {
            too_large = true;
        } else {
            out.extend_from_slice(&buf[..n]);
        }
    }
    Ok((!too_large).then_some(out))
}

/// Logs each line of standard error with the command, keeping the last few in `tail`.
async fn log_stderr(
    stderr: Option<impl AsyncRead + Unpin>,
    plugin: &Plugin,
    tail: &parking_lot::Mutex<Vec<String>>,
) {
    let Some(stderr) = stderr else { return };
    let mut lines = tokio::io::BufReader::new(stderr).split(b'\n');
    while let Ok(Some(line)) = lines.next_segment().await {
        let line = String::from_utf8_lossy(&line);
        let mut line = line.trim_end().to_string();
        if line.len() > MAX_STDERR_LINE {
            let mut cut = MAX_STDERR_LINE;
            while !line.is_char_boundary(cut) {
                cut -= 1;
            }
            line.truncate(cut);
            line.push('…');
        }
        if line.is_empty() {
            continue;
        }
        tracing::info!(command = %plugin.command, user = %plugin.origin, stderr = %line, "exec credential plugin");
        let mut t = tail.lock();
        if t.len() == STDERR_TAIL_LINES {
            t.remove(0);
        }
        t.push(line);
    }
}

/// Where `command` is: itself when it holds a path separator, else the first executable file
/// of that name on `PATH` (as Go's `exec.LookPath`; empty `PATH` entries are skipped).
pub fn look_path(command: &str) -> Option<PathBuf> {
    if command.contains(std::path::MAIN_SEPARATOR) {
        let p = PathBuf::from(command);
        return executable(&p).then_some(p);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .filter(|d| !d.as_os_str().is_empty())
        .map(|d| d.join(command))
        .find(|p| executable(p))
}

fn executable(p: &Path) -> bool {
    let Ok(m) = std::fs::metadata(p) else {
        return false;
    };
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        m.is_file() && m.permissions().mode() & 0o111 != 0
    }
    #[cfg(not(unix))]
    {
        m.is_file()
    }
}

/// The `KUBERNETES_EXEC_INFO` value: an `ExecCredential` whose spec is not interactive and, with
/// `provideClusterInfo`, holds the cluster (fields as client-go writes them).
fn exec_info(api_version: &str, cluster: Option<&ExecAuthCluster>) -> String {
    let mut spec = Map::new();
    if let Some(c) = cluster {
        let mut m = Map::new();
        m.insert("server".into(), json!(c.server.clone().unwrap_or_default()));
        if let Some(n) = c.tls_server_name.as_deref().filter(|n| !n.is_empty()) {
            m.insert("tls-server-name".into(), json!(n));
        }
        if c.insecure_skip_tls_verify == Some(true) {
            m.insert("insecure-skip-tls-verify".into(), json!(true));
        }
        if let Some(ca) = c
            .certificate_authority_data
            .as_deref()
            .filter(|d| !d.is_empty())
        {
            let b64 = base64::engine::general_purpose::STANDARD.encode(ca);
            m.insert("certificate-authority-data".into(), json!(b64));
        }
        if let Some(p) = c.proxy_url.as_deref().filter(|p| !p.is_empty()) {
            m.insert("proxy-url".into(), json!(p));
        }
        if let Some(config) = &c.config {
            m.insert("config".into(), config.clone());
        }
        spec.insert("cluster".into(), Value::Object(m));
    }
    spec.insert("interactive".into(), json!(false));
    json!({"kind": "ExecCredential", "apiVersion": api_version, "spec": spec}).to_string()
}

/// What a plugin writes: an `ExecCredential` (unknown fields are ignored, as client-go does).
#[derive(Debug, Deserialize)]
struct Output {
    #[serde(rename = "apiVersion")]
    api_version: Option<String>,
    kind: Option<String>,
    status: Option<Status>,
}

#[derive(Debug, Deserialize)]
struct Status {
    #[serde(rename = "expirationTimestamp")]
    expiration_timestamp: Option<String>,
    token: Option<String>,
    #[serde(rename = "clientCertificateData")]
    client_certificate_data: Option<String>,
    #[serde(rename = "clientKeyData")]
    client_key_data: Option<String>,
}

fn rfc3339(t: SystemTime) -> String {
    Timestamp::try_from(t).map_or_else(|_| format!("{t:?}"), |ts| ts.to_string())
}

/// Reads a plugin's standard output `out` as an `ExecCredential` of `api_version`, valid at
/// `now`.
pub fn parse(
    out: &[u8],
    api_version: &'static str,
    now: SystemTime,
) -> Result<Credential, ExecProblem> {
    let text = std::str::from_utf8(out).map_err(|_| ExecProblem::NotText)?;
    let text = text.trim();
    if text.is_empty() {
        return Err(ExecProblem::Empty);
    }
    let o: Output = if text.starts_with('{') {
        serde_json::from_str(text).map_err(|e| ExecProblem::Malformed(Box::new(e)))?
    } else {
        serde_saphyr::from_str(text).map_err(|e| ExecProblem::Malformed(Box::new(e)))?
    };
    if o.kind.as_deref() != Some("ExecCredential") || o.api_version.as_deref() != Some(api_version)
    {
        return Err(ExecProblem::WrongType {
            want: api_version,
            got_version: o.api_version.unwrap_or_default(),
            got_kind: o.kind.unwrap_or_default(),
        });
    }
    let status = o.status.ok_or(ExecProblem::NoStatus)?;
    let nonempty = |s: Option<String>| s.filter(|s| !s.is_empty());
    let token = nonempty(status.token);
    let cert = nonempty(status.client_certificate_data);
    let key = nonempty(status.client_key_data);
    match (&token, &cert, &key) {
        (None, None, None) => return Err(ExecProblem::NoCredential),
        (_, Some(_), None) => {
            return Err(ExecProblem::HalfCertificate(
                "status.clientCertificateData",
                "status.clientKeyData",
            ));
        }
        (_, None, Some(_)) => {
            return Err(ExecProblem::HalfCertificate(
                "status.clientKeyData",
                "status.clientCertificateData",
            ));
        }
        _ => {}
    }
    let authorization = token
        .map(|t| Credentials::token(&t).map(|c| c.authorization()))
        .transpose()
        .map_err(ExecProblem::Token)?;
    let mut expires = match nonempty(status.expiration_timestamp) {
        Some(value) => match value.parse::<Timestamp>() {
            Ok(ts) => Some(SystemTime::from(ts)),
            Err(source) => return Err(ExecProblem::Expiration { value, source }),
        },
        None => None,
    };
    let certificate = match (cert, key) {
        (Some(cert), Some(key)) => {
            let identity = Identity {
                certs: certs_from_pem(cert.as_bytes()).map_err(ExecProblem::Certificate)?,
                key: key_from_pem(key.as_bytes()).map_err(ExecProblem::Key)?,
            };
            // A certificate stops working at its notAfter, whatever the plugin says.
            if let Some(end) = identity.certs.first().and_then(|leaf| not_after(leaf)) {
                expires = Some(expires.map_or(end, |e| e.min(end)));
            }
            Some(Arc::new(
                certified_key(&identity).map_err(ExecProblem::KeyPair)?,
            ))
        }
        _ => None,
    };
    if let Some(e) = expires
        && e <= now
    {
        return Err(ExecProblem::Expired(rfc3339(e)));
    }
    Ok(Credential {
        authorization,
        certificate,
        expires,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> SystemTime {
        SystemTime::from(s.parse::<Timestamp>().unwrap())
    }

    fn now() -> SystemTime {
        at("2030-01-01T00:00:00Z")
    }

    fn problem(out: &str) -> String {
        parse(out.as_bytes(), V1, now()).unwrap_err().to_string()
    }

    #[test]
    fn tokens_of_both_versions_in_json_and_yaml() {
        let c = parse(
            br#"{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"abc","expirationTimestamp":"2030-01-01T00:15:00Z","extra":1}}"#,
            V1,
            now(),
        )
        .unwrap();
        assert_eq!(c.authorization.unwrap(), "Bearer abc");
        assert_eq!(c.expires, Some(at("2030-01-01T00:15:00Z")));
        assert!(c.certificate.is_none());
        let c = parse(
            b"apiVersion: client.authentication.k8s.io/v1beta1\nkind: ExecCredential\nstatus:\n  token: yaml-token\n",
            V1BETA1,
            now(),
        )
        .unwrap();
        assert_eq!(c.authorization.unwrap(), "Bearer yaml-token");
        assert_eq!(c.expires, None);
    }

    #[test]
    fn unusable_outputs_say_why() {
        assert!(problem("").contains("wrote nothing"));
        assert!(problem("  \n").contains("wrote nothing"));
        assert!(problem("{not json").contains("not an ExecCredential"));
        assert!(problem("[1, 2]").contains("not an ExecCredential"));
        let v1beta1 = r#"{"apiVersion":"client.authentication.k8s.io/v1beta1","kind":"ExecCredential","status":{"token":"t"}}"#;
        let e = problem(v1beta1);
        assert!(
            e.contains("apiVersion \"client.authentication.k8s.io/v1beta1\"")
                && e.contains("asks for an ExecCredential of client.authentication.k8s.io/v1"),
            "{e}"
        );
        let e = problem(r#"{"apiVersion":"client.authentication.k8s.io/v1","kind":"Secret"}"#);
        assert!(e.contains("kind \"Secret\""), "{e}");
        let e =
            problem(r#"{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential"}"#);
        assert!(e.contains("has no status"), "{e}");
        let e = problem(
            r#"{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{}}"#,
        );
        assert!(e.contains("neither status.token"), "{e}");
        let e = problem(
            r#"{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"clientKeyData":"k"}}"#,
        );
        assert!(
            e.contains("status.clientKeyData without status.clientCertificateData"),
            "{e}"
        );
        let e = problem(
            r#"{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"t","expirationTimestamp":"2029-12-31T23:59:59Z"}}"#,
        );
        assert!(
            e.contains("a credential that expired at 2029-12-31T23:59:59Z"),
            "{e}"
        );
        let e = problem(
            r#"{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"t","expirationTimestamp":"soon"}}"#,
        );
        assert!(e.contains("\"soon\" is not an RFC 3339 time"), "{e}");
        let e = problem(
            r#"{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"a\nb"}}"#,
        );
        assert!(e.contains("status.token cannot be used"), "{e}");
        // The cause is the source, not part of the text.
        let p = parse(b"{oops", V1, now()).unwrap_err();
        assert!(p.source().is_some());
        assert!(!p.to_string().contains("line 1"), "{p}");
    }

    #[test]
    fn certificates_are_read_and_expire_with_their_not_after() {
        use rcgen::{CertificateParams, KeyPair, date_time_ymd};
        let key = KeyPair::generate().unwrap();
        let mut p = CertificateParams::new(vec!["me".to_string()]).unwrap();
        p.not_after = date_time_ymd(2030, 6, 1);
        let cert = p.self_signed(&key).unwrap();
        let out = json!({
            "apiVersion": V1, "kind": "ExecCredential",
            "status": {"clientCertificateData": cert.pem(), "clientKeyData": key.serialize_pem(),
                       "expirationTimestamp": "2031-01-01T00:00:00Z"}
        })
        .to_string();
        let c = parse(out.as_bytes(), V1, now()).unwrap();
        assert!(c.certificate.is_some() && c.authorization.is_none());
        assert_eq!(c.kind(), "client certificate");
        assert_eq!(c.expires, Some(at("2030-06-01T00:00:00Z")));
        // Past its notAfter: expired, whatever expirationTimestamp says.
        let e = parse(out.as_bytes(), V1, at("2030-07-01T00:00:00Z"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("expired at 2030-06-01T00:00:00Z"), "{e}");
        // Another key than the certificate's.
        let other = KeyPair::generate().unwrap();
        let out = json!({
            "apiVersion": V1, "kind": "ExecCredential",
            "status": {"clientCertificateData": cert.pem(), "clientKeyData": other.serialize_pem()}
        })
        .to_string();
        let e = parse(out.as_bytes(), V1, now()).unwrap_err().to_string();
        assert!(e.contains("do not make a usable pair"), "{e}");
        let out = json!({
            "apiVersion": V1, "kind": "ExecCredential",
            "status": {"clientCertificateData": "nope", "clientKeyData": key.serialize_pem()}
        })
        .to_string();
        let e = parse(out.as_bytes(), V1, now()).unwrap_err().to_string();
        assert!(
            e.contains("status.clientCertificateData cannot be used"),
            "{e}"
        );
    }

    fn exec(v: Value) -> ExecConfig {
        serde_json::from_value(v).unwrap()
    }

    fn config_error(v: Value) -> String {
        Plugin::new("u", "kc", &exec(v), Duration::from_secs(1))
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn configurations_client_go_refuses_are_refused() {
        let e = config_error(json!({"apiVersion": V1, "command": "sh"}));
        assert!(
            e.starts_with("user \"u\": exec: interactiveMode must be specified"),
            "{e}"
        );
        let e =
            config_error(json!({"apiVersion": V1, "command": "sh", "interactiveMode": "Always"}));
        assert!(e.contains("interactiveMode Always needs a terminal"), "{e}");
        let e = config_error(json!({"command": "sh"}));
        assert!(e.contains("apiVersion must be specified"), "{e}");
        let e = config_error(
            json!({"apiVersion": "client.authentication.k8s.io/v1alpha1", "command": "sh"}),
        );
        assert!(e.contains("invalid apiVersion"), "{e}");
        let e = config_error(json!({"apiVersion": V1BETA1}));
        assert!(e.contains("command must be specified"), "{e}");
        let e =
            config_error(json!({"apiVersion": V1BETA1, "command": "sh", "env": [{"value": "x"}]}));
        assert!(e.contains("env entry #1 has no name"), "{e}");
        let e = config_error(
            json!({"apiVersion": V1BETA1, "command": "no-such-plugin-here", "installHint": "brew install it"}),
        );
        assert!(
            e.contains("executable \"no-such-plugin-here\" not found on PATH (installHint: brew install it)"),
            "{e}"
        );
        let e = config_error(json!({"apiVersion": V1BETA1, "command": "/nonexistent/plugin"}));
        assert!(
            e.contains("executable /nonexistent/plugin not found (see https://"),
            "{e}"
        );
    }

    #[test]
    fn exec_info_is_what_client_go_sends() {
        let p = Plugin::new(
            "u",
            "kc",
            &exec(json!({"apiVersion": V1BETA1, "command": "sh"})),
            Duration::from_secs(1),
        )
        .unwrap();
        assert_eq!(
            p.exec_info(),
            r#"{"kind":"ExecCredential","apiVersion":"client.authentication.k8s.io/v1beta1","spec":{"interactive":false}}"#
        );
        let mut e = exec(
            json!({"apiVersion": V1, "command": "sh", "interactiveMode": "IfAvailable", "provideClusterInfo": true}),
        );
        e.cluster = Some(ExecAuthCluster {
            server: Some("https://k:6443".into()),
            insecure_skip_tls_verify: Some(false),
            certificate_authority_data: Some(b"PEM\n".to_vec()),
            proxy_url: Some("http://proxy:3128".into()),
            tls_server_name: Some("kube".into()),
            config: Some(json!({"audience": "x"})),
        });
        let p = Plugin::new("u", "kc", &e, Duration::from_secs(1)).unwrap();
        assert_eq!(
            p.exec_info(),
            r#"{"kind":"ExecCredential","apiVersion":"client.authentication.k8s.io/v1","spec":{"cluster":{"server":"https://k:6443","tls-server-name":"kube","certificate-authority-data":"UEVNCg==","proxy-url":"http://proxy:3128","config":{"audience":"x"}},"interactive":false}}"#
        );
        assert_eq!(p.origin(), "kc, user \"u\"");
    }
}
