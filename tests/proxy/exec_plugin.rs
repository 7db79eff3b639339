//! watchmux with a kubeconfig whose user has an exec credential plugin (small shell scripts
//! written to a temporary folder, each run appending a line to `runs` there): both API versions
//! and what a plugin is given, renewal before expiry, one re-run after a 401, single-flight,
//! client certificates that change, a failing plugin (not ready, then ready), a hanging one, and
//! the configurations refused at start-up.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::common::{TestProxy, proxy_with, wait_until};
use crate::pki::{Ca, Leaf, b64, kubeconfig, write_kubeconfig};
use crate::tls_upstream::Logs;
use http::{Method, StatusCode};
use kube_sim::Simulator;
use kube_sim::tls::SimTls;
use serde_json::{Value, json};
use watchmux::config::{Config, UpstreamConfig};
use watchmux::upstream::Upstream;

const V1: &str = "client.authentication.k8s.io/v1";
const V1BETA1: &str = "client.authentication.k8s.io/v1beta1";

/// Writes `dir/plugin.sh` (executable): it appends `<unix time> <expiry or 0>` to `dir/runs`
/// (the expiry is `$EXP`, set by `body` for a credential that expires), sets `D` to its folder
/// and `N` to its run number, then runs `body`.
fn plugin(dir: &Path, body: &str) -> PathBuf {
    let path = dir.join("plugin.sh");
    let script = format!(
        "#!/bin/sh\nD=\"$(dirname \"$0\")\"\nN=$(( $(cat \"$D/runs\" 2>/dev/null | wc -l) + 1 ))\nEXP=0\n{body}\necho \"$(date +%s.%N) $EXP\" >> \"$D/runs\"\n"
    );
    // Written under another name and renamed: a script being replaced is never run half-written.
    let tmp = dir.join("plugin.sh.tmp");
    std::fs::write(&tmp, script).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    std::fs::rename(&tmp, &path).unwrap();
    path
}

/// Shell lines that print an ExecCredential of `api` with `status` (a JSON object's inside,
/// where `$EXPIRES` is the expiry, `secs` seconds from the run, when `secs` is given).
fn prints(api: &str, status: &str, secs: Option<u64>) -> String {
    let exp = match secs {
        Some(s) => format!(
            "EXP=$(( $(date +%s) + {s} ))\nEXPIRES=$(date -u -d \"@$EXP\" +%Y-%m-%dT%H:%M:%SZ)\n"
        ),
        None => String::new(),
    };
    format!(
        "{exp}cat <<EOF\n{{\"apiVersion\":\"{api}\",\"kind\":\"ExecCredential\",\"status\":{{{status}}}}}\nEOF"
    )
}

/// The lines of `dir/runs`: (when the run ended, the expiry it gave or 0).
fn runs(dir: &Path) -> Vec<(f64, f64)> {
    std::fs::read_to_string(dir.join("runs"))
        .unwrap_or_default()
        .lines()
        .map(|l| {
            let (t, e) = l.split_once(' ').unwrap();
            (t.parse().unwrap(), e.parse().unwrap())
        })
        .collect()
}

/// A kubeconfig in `dir` with one context `sim`: `cluster` and a user whose `exec` is `exec`.
fn exec_kubeconfig(dir: &Path, cluster: Value, exec: Value) -> PathBuf {
    let kc = kubeconfig(&[("sim", cluster, json!({ "exec": exec }))], Some("sim"));
    write_kubeconfig(dir, &kc)
}

/// A plugin in `dir` that runs `prelude` and then prints the token its file `token` holds, with
/// `first` written there and accepted by `sim`; the kubeconfig that runs it against `sim`.
fn token_file_plugin(dir: &Path, sim: &Simulator, first: &str, prelude: &str) -> PathBuf {
    sim.set_bearer_token(Some(first.into()));
    std::fs::write(dir.join("token"), first).unwrap();
    let script = plugin(
        dir,
        &format!(
            "{prelude}T=$(cat \"$D/token\")\ncat <<EOF\n{{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\"status\":{{\"token\":\"$T\"}}}}\nEOF"
        ),
    );
    exec_kubeconfig(
        dir,
        json!({"server": sim.url()}),
        json!({"apiVersion": V1, "command": script, "interactiveMode": "Never"}),
    )
}

/// watchmux caching the test kinds from the upstream of `kubeconfig`, with `f` applied; does
/// not wait for the sync.
pub(crate) async fn proxy_from(kubeconfig: &Path, f: impl FnOnce(&mut Config)) -> TestProxy {
    proxy_with(|c| {
        c.upstream.kubeconfig = Some(kubeconfig.to_path_buf());
        f(c)
    })
    .await
}

pub(crate) async fn wait_ready(p: &TestProxy) {
    let app = p.proxy.clone();
    wait_until("watchmux synced", 20, async || app.ready()).await;
}

/// `/readyz?verbose`: status and text.
pub(crate) async fn readyz(p: &TestProxy) -> (StatusCode, String) {
    let (s, _, b) =
        crate::common::request(Method::GET, &format!("{}/readyz?verbose", p.url), &[], "").await;
    (s, String::from_utf8_lossy(&b).into_owned())
}

/// An uncached kind: its reads pass through with watchmux's credentials.
pub(crate) fn services(p: &TestProxy) -> String {
    format!("{}/api/v1/namespaces/default/services", p.url)
}

#[tokio::test]
async fn a_v1_plugin_gets_its_args_env_and_the_cluster_and_no_stdin() {
    let (logs, _guard) = Logs::capture();
    let sim = crate::common::sim_with(|_| {}).await;
    sim.set_bearer_token(Some("tok-1".into()));
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    plugin(
        d,
        &format!(
            "printf '%s' \"$KUBERNETES_EXEC_INFO\" > \"$D/info\"\necho \"$@\" > \"$D/args\"\necho \"$GREETING\" > \"$D/env\"\nif read -r line; then echo had-input > \"$D/stdin\"; else echo no-input > \"$D/stdin\"; fi\necho \"hello from the plugin\" >&2\n{}",
            prints(V1, "\"token\":\"tok-$N\"", None)
        ),
    );
    let ca = Ca::new("ca");
    let cluster = json!({
        "server": sim.url(),
        "certificate-authority-data": b64(&ca.pem),
        "extensions": [{"name": "client.authentication.k8s.io/exec", "extension": {"audience": "sim"}}],
    });
    // A relative command is relative to the kubeconfig's folder, not to the working directory.
    let kc = exec_kubeconfig(
        d,
        cluster,
        json!({
            "apiVersion": V1, "command": "./plugin.sh", "args": ["one", "two"],
            "env": [{"name": "GREETING", "value": "hi"}],
            "interactiveMode": "IfAvailable", "provideClusterInfo": true,
        }),
    );
    let p = proxy_from(&kc, |_| {}).await;
    wait_ready(&p).await;
    let (status, body) = crate::common::get_json(&services(&p)).await;
    assert_eq!(status, StatusCode::OK, "{body}");

    let info: Value =
        serde_json::from_str(&std::fs::read_to_string(d.join("info")).unwrap()).unwrap();
    assert_eq!(info["apiVersion"], V1);
    assert_eq!(info["kind"], "ExecCredential");
    assert_eq!(info["spec"]["interactive"], false);
    let cluster = &info["spec"]["cluster"];
    assert_eq!(cluster["server"], sim.url());
    assert_eq!(cluster["certificate-authority-data"], b64(&ca.pem));
    assert_eq!(cluster["config"], json!({"audience": "sim"}));
    let read = |f: &str| std::fs::read_to_string(d.join(f)).unwrap();
    assert_eq!(read("args").trim(), "one two");
    assert_eq!(read("env").trim(), "hi");
    assert_eq!(read("stdin").trim(), "no-input");
    // Its standard error is logged, with the command.
    let line = logs.wait_for(&["hello from the plugin"]).await;
    assert!(
        line.contains(&d.join("./plugin.sh").display().to_string()),
        "{line}"
    );
    // A token without expiry is kept: one run.
    assert_eq!(runs(d).len(), 1);
    let (s, text) = readyz(&p).await;
    assert_eq!(s, StatusCode::OK, "{text}");
    assert!(text.contains("[+]upstream-credentials ok"), "{text}");
}

/// v1beta1 needs no interactiveMode (client-go defaults it to IfAvailable), and a plugin may
/// answer in YAML.
#[tokio::test]
async fn a_v1beta1_plugin_without_interactive_mode() {
    let sim = crate::common::sim_with(|_| {}).await;
    sim.set_bearer_token(Some("beta".into()));
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let script = plugin(
        d,
        &format!(
            "printf '%s' \"$KUBERNETES_EXEC_INFO\" > \"$D/info\"\nprintf 'apiVersion: {V1BETA1}\\nkind: ExecCredential\\nstatus:\\n  token: beta\\n'"
        ),
    );
    let kc = exec_kubeconfig(
        d,
        json!({"server": sim.url()}),
        json!({"apiVersion": V1BETA1, "command": script}),
    );
    let p = proxy_from(&kc, |_| {}).await;
    wait_ready(&p).await;
    let (status, body) = crate::common::get_json(&services(&p)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let info: Value =
        serde_json::from_str(&std::fs::read_to_string(d.join("info")).unwrap()).unwrap();
    assert_eq!(
        info,
        json!({"kind": "ExecCredential", "apiVersion": V1BETA1, "spec": {"interactive": false}})
    );
}

/// A token that expires is renewed before it does, and requests then carry the new one: the
/// simulator's policy lets each token's user read the cached kinds, and only `user-2` read
/// services.
#[tokio::test]
async fn a_token_is_renewed_before_it_expires() {
    use kube_sim::authz::{Policy, Rule};
    let sim = crate::common::sim_with(|_| {}).await;
    let mut policy = Policy::default();
    for n in 1..=20 {
        policy.tokens.insert(
            format!("tok-{n}"),
            (format!("user-{n}"), vec!["readers".to_string()]),
        );
    }
    policy.rules = vec![
        Rule::new(
            "readers",
            &["*"],
            "",
            &["pods", "nodes", "namespaces", "configmaps"],
            None,
        ),
        Rule::new("user-2", &["*"], "", &["services"], None),
    ];
    sim.state().set_policy(policy);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let script = plugin(
        d,
        &prints(
            V1,
            "\"token\":\"tok-$N\",\"expirationTimestamp\":\"$EXPIRES\"",
            Some(6),
        ),
    );
    let kc = exec_kubeconfig(
        d,
        json!({"server": sim.url()}),
        json!({"apiVersion": V1, "command": script, "interactiveMode": "Never"}),
    );
    let p = proxy_from(&kc, |_| {}).await;
    wait_ready(&p).await;
    // user-1 may not read services.
    let (status, _) = crate::common::get_json(&services(&p)).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    wait_until("a second run", 15, async || runs(d).len() >= 2).await;
    let r = runs(d);
    assert!(
        r[1].0 < r[0].1,
        "renewed at {} after the first token expired at {}",
        r[1].0,
        r[0].1
    );
    let (status, body) = crate::common::get_json(&services(&p)).await;
    assert_eq!(status, StatusCode::OK, "tok-2 must be sent: {body}");
    assert_eq!(runs(d).len(), 2);
    let (s, text) = readyz(&p).await;
    assert_eq!(s, StatusCode::OK, "{text}");
}

/// The upstream stops accepting the token: the next request's 401 makes the plugin run once
/// more, and the request (a write with a body, here) is sent again with the new token.
#[tokio::test]
async fn a_401_runs_the_plugin_once_and_the_request_is_sent_again() {
    let sim = crate::common::sim_with(|_| {}).await;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let kc = token_file_plugin(d, &sim, "first", "");
    let p = proxy_from(&kc, |_| {}).await;
    wait_ready(&p).await;
    assert_eq!(runs(d).len(), 1);

    std::fs::write(d.join("token"), "second").unwrap();
    sim.set_bearer_token(Some("second".into()));
    let (status, cm) = crate::common::send_json(
        Method::POST,
        &format!("{}/api/v1/namespaces/default/configmaps", p.url),
        "application/json",
        &json!({"metadata": {"name": "after-401"}, "data": {"k": "v"}}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{cm}");
    assert_eq!(runs(d).len(), 2, "exactly one more run");
    let (status, body) = crate::common::get_json(&services(&p)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(runs(d).len(), 2);
    // A client's own token is the client's: its 401 is the client's, and runs nothing.
    let (status, _, _) = crate::common::request(
        Method::GET,
        &services(&p),
        &[("authorization", "Bearer not-it")],
        "",
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(runs(d).len(), 2);
}

/// Many requests waiting for a credential share one run of the plugin, at start and after a
/// 401.
#[tokio::test]
async fn concurrent_requests_share_one_run() {
    let sim = crate::common::sim_with(|_| {}).await;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let kc = token_file_plugin(d, &sim, "a", "sleep 1\n");
    let p = proxy_from(&kc, |_| {}).await;
    let burst = async |p: &TestProxy| {
        let url = services(p);
        let all = (0..32).map(|_| crate::common::get_json(&url));
        for (status, body) in futures_util::future::join_all(all).await {
            assert_eq!(status, StatusCode::OK, "{body}");
        }
    };
    // The reflectors and 32 requests start together.
    burst(&p).await;
    assert_eq!(runs(d).len(), 1);
    wait_ready(&p).await;
    assert_eq!(runs(d).len(), 1);

    std::fs::write(d.join("token"), "b").unwrap();
    sim.set_bearer_token(Some("b".into()));
    burst(&p).await;
    assert_eq!(runs(d).len(), 2);
    assert_eq!(
        p.proxy.upstream.exec_credentials().unwrap().runs(),
        2,
        "watchmux counts the same runs"
    );
}

fn der(pem: &str) -> Vec<u8> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    CertificateDer::from_pem_slice(pem.as_bytes())
        .unwrap()
        .to_vec()
}

/// Writes the certificate credential the plugin prints (`$EXPIRES` filled in by it).
fn write_certificate(dir: &Path, leaf: &Leaf) {
    let out = json!({
        "apiVersion": V1, "kind": "ExecCredential",
        "status": {"clientCertificateData": leaf.cert_pem, "clientKeyData": leaf.key_pem,
                   "expirationTimestamp": "EXPIRES"},
    });
    let tmp = dir.join("out.json.tmp");
    std::fs::write(&tmp, out.to_string()).unwrap();
    std::fs::rename(&tmp, dir.join("out.json")).unwrap();
}

/// The plugin gives client certificates: the upstream sees the current one, and when it
/// changes every connection made with the old one is closed (the reflectors' HTTP/2 connection
/// too: it handshakes again with the new one, although no client request was made).
#[tokio::test]
async fn client_certificates_from_the_plugin_are_rotated() {
    let (logs, _guard) = Logs::capture();
    let ca = Ca::new("test-ca");
    let server = ca.server();
    let tls = SimTls {
        cert_pem: server.cert_pem,
        key_pem: server.key_pem,
        client_ca_pem: Some(ca.pem.clone()),
        bearer_token: None,
    };
    let sim: Simulator = crate::common::sim_with(|c| c.tls = Some(tls)).await;
    let a = ca.client("watchmux-a", &[], false);
    let b = ca.client("watchmux-b", &[], false);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_certificate(d, &a);
    let script = plugin(
        d,
        "EXP=$(( $(date +%s) + 5 ))\nEXPIRES=$(date -u -d \"@$EXP\" +%Y-%m-%dT%H:%M:%SZ)\nsed \"s/EXPIRES/$EXPIRES/\" \"$D/out.json\"",
    );
    let kc = exec_kubeconfig(
        d,
        json!({"server": sim.url(), "certificate-authority-data": b64(&ca.pem)}),
        json!({"apiVersion": V1, "command": script, "interactiveMode": "Never"}),
    );
    let p = proxy_from(&kc, |_| {}).await;
    wait_ready(&p).await;
    let (status, body) = crate::common::get_json(&services(&p)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (a_der, b_der) = (der(&a.cert_pem), der(&b.cert_pem));
    let seen = sim.client_certificates();
    assert!(!seen.is_empty());
    assert!(
        seen.iter().all(|c| *c == a_der),
        "only certificate A so far"
    );

    write_certificate(d, &b);
    let before = seen.len();
    wait_until("a handshake with certificate B", 20, async || {
        sim.client_certificates().contains(&b_der)
    })
    .await;
    logs.wait_for(&[
        "client certificate changed",
        "closed the upstream connections",
    ])
    .await;
    // The reflectors reconnected on their own, and watchmux stays ready.
    wait_ready(&p).await;
    let (status, body) = crate::common::get_json(&services(&p)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let seen = sim.client_certificates();
    let first_b = seen.iter().position(|c| *c == b_der).unwrap();
    assert!(first_b >= before);
    assert!(
        seen[first_b..].iter().all(|c| *c == b_der),
        "no handshake with certificate A once B is in use"
    );
}

/// A plugin that fails: watchmux stays up with what it has cached, `/readyz` fails saying why
/// (the kubeconfig, the user, the command, its exit status and standard error), and once the
/// plugin works again (retried with back-off) it is ready again.
#[tokio::test]
async fn a_failing_plugin_makes_watchmux_not_ready_until_it_works_again() {
    let (logs, _guard) = Logs::capture();
    let sim = crate::common::sim_with(|_| {}).await;
    sim.set_bearer_token(Some("tok".into()));
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let script = plugin(
        d,
        &format!(
            "if [ -e \"$D/fail\" ]; then echo \"boom: the session is gone\" >&2; exit 3; fi\n{}",
            prints(
                V1,
                "\"token\":\"tok\",\"expirationTimestamp\":\"$EXPIRES\"",
                Some(3)
            )
        ),
    );
    let kc = exec_kubeconfig(
        d,
        json!({"server": sim.url()}),
        json!({"apiVersion": V1, "command": script, "interactiveMode": "Never"}),
    );
    let p = proxy_from(&kc, |_| {}).await;
    wait_ready(&p).await;
    let pods_url = format!("{}/api/v1/pods?resourceVersion=0", p.url);
    let (_, before) = crate::common::get_json(&pods_url).await;
    let cached = before["items"].as_array().unwrap().len();

    std::fs::write(d.join("fail"), "").unwrap();
    let mut text = String::new();
    wait_until("/readyz fails on the credentials", 20, async || {
        let (s, t) = readyz(&p).await;
        text = t;
        s == StatusCode::SERVICE_UNAVAILABLE && text.contains("[-]upstream-credentials failed")
    })
    .await;
    for part in [
        kc.display().to_string().as_str(),
        "user \"sim\"",
        script.display().to_string().as_str(),
        "exit status: 3",
        "boom: the session is gone",
        "retrying in",
    ] {
        assert!(text.contains(part), "{part:?} not in {text}");
    }
    logs.wait_for(&["exec credential plugin", "boom: the session is gone"])
        .await;
    // What it has cached is still served.
    let (status, now) = crate::common::get_json(&pods_url).await;
    assert_eq!(status, StatusCode::OK, "{now}");
    assert_eq!(now["items"].as_array().unwrap().len(), cached);
    // Pass-through requests say why they cannot be made.
    let (status, body) = crate::common::get_json(&services(&p)).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert!(
        body["message"].as_str().unwrap().contains("exit status: 3"),
        "{body}"
    );

    std::fs::remove_file(d.join("fail")).unwrap();
    wait_until("ready again", 30, async || {
        readyz(&p).await.0 == StatusCode::OK
    })
    .await;
    let (status, body) = crate::common::get_json(&services(&p)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

/// A plugin that hangs is killed after `upstream.exec_timeout_secs`.
#[tokio::test]
async fn a_hanging_plugin_is_killed_after_the_timeout() {
    let sim = crate::common::sim_with(|_| {}).await;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let script = plugin(
        d,
        "echo $$ >> \"$D/pids\"\necho \"thinking\" >&2\nexec sleep 30",
    );
    let kc = exec_kubeconfig(
        d,
        json!({"server": sim.url()}),
        json!({"apiVersion": V1, "command": script, "interactiveMode": "Never"}),
    );
    let p = proxy_from(&kc, |c| c.upstream.exec_timeout = Duration::from_secs(1)).await;
    let mut text = String::new();
    wait_until("/readyz names the timeout", 20, async || {
        let (_, t) = readyz(&p).await;
        text = t;
        text.contains("did not finish within 1s: killed")
    })
    .await;
    assert!(text.contains("stderr: thinking"), "{text}");
    assert!(!p.proxy.ready());
    // The killed plugin is gone (reaped).
    let first = std::fs::read_to_string(d.join("pids")).unwrap();
    let pid = first.lines().next().unwrap().trim().to_string();
    wait_until("the plugin process gone", 10, async || {
        !Path::new(&format!("/proc/{pid}")).exists()
    })
    .await;
}

/// Refused at start-up, saying why: the command missing (with its install hint), an
/// interactive mode watchmux cannot offer, a v1 plugin without interactiveMode, an unknown
/// apiVersion.
#[tokio::test]
async fn unusable_exec_configurations_are_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let script = plugin(d, "true");
    let cluster = json!({"server": "https://127.0.0.1:1"});
    let missing_rel = d.join("./not-here");
    for (exec, want) in [
        (
            json!({"apiVersion": V1, "command": "no-such-credential-plugin", "interactiveMode": "Never",
                   "installHint": "install it with: brew install no-such"}),
            "executable \"no-such-credential-plugin\" not found on PATH (installHint: install it with: brew install no-such)".to_string(),
        ),
        (
            json!({"apiVersion": V1, "command": "./not-here", "interactiveMode": "Never"}),
            format!("executable {} not found", missing_rel.display()),
        ),
        (
            json!({"apiVersion": V1, "command": script, "interactiveMode": "Always"}),
            "interactiveMode Always needs a terminal".to_string(),
        ),
        (
            json!({"apiVersion": V1, "command": script}),
            "interactiveMode must be specified".to_string(),
        ),
        (
            json!({"apiVersion": "client.authentication.k8s.io/v1alpha1", "command": script}),
            "invalid apiVersion".to_string(),
        ),
    ] {
        let kc = exec_kubeconfig(d, cluster.clone(), exec.clone());
        let e = Upstream::new(&UpstreamConfig {
            kubeconfig: Some(kc.clone()),
            ..UpstreamConfig::default()
        })
        .unwrap_err();
        let s = e.to_string();
        assert!(e.is_config(), "{exec}: {e:?}");
        assert!(
            s.starts_with(&format!("upstream.kubeconfig ({}), context \"sim\" (cluster \"sim\", user \"sim\"): user \"sim\": exec: ", kc.display())),
            "{exec}: {s}"
        );
        assert!(s.contains(&want), "{exec}: {s}");
    }
}

/// What a plugin prints that is no credential is an error naming the kubeconfig, the user and
/// the command (and watchmux runs the plugin again later).
#[tokio::test]
async fn unusable_plugin_output_is_a_clear_error() {
    let sim = crate::common::sim_with(|_| {}).await;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for (body, want) in [
        ("true".to_string(), "wrote nothing to standard output"),
        (
            "echo '{\"token\": '".to_string(),
            "its output is not an ExecCredential",
        ),
        (
            prints(V1BETA1, "\"token\":\"t\"", None),
            "it returned apiVersion \"client.authentication.k8s.io/v1beta1\", kind \"ExecCredential\"",
        ),
        (
            prints(
                V1,
                "\"token\":\"t\",\"expirationTimestamp\":\"2001-01-01T00:00:00Z\"",
                None,
            ),
            "it returned a credential that expired at 2001-01-01T00:00:00Z",
        ),
        (
            "echo 'not today' >&2; exit 7".to_string(),
            "failed with exit status: 7; stderr: not today",
        ),
    ] {
        let script = plugin(d, &body);
        let kc = exec_kubeconfig(
            d,
            json!({"server": sim.url()}),
            json!({"apiVersion": V1, "command": script, "interactiveMode": "Never"}),
        );
        let up = Upstream::new(&UpstreamConfig {
            kubeconfig: Some(kc.clone()),
            ..UpstreamConfig::default()
        })
        .unwrap();
        let e = up.get("/version", "application/json").await.unwrap_err();
        assert!(e.is_credentials(), "{e:?}");
        let s = e.to_string();
        let head = format!(
            "upstream.kubeconfig ({}), context \"sim\" (cluster \"sim\", user \"sim\"), user \"sim\": exec credential plugin {}: ",
            kc.display(),
            script.display()
        );
        assert!(s.starts_with(&head), "{s}");
        assert!(s.contains(want), "{want:?} not in {s}");
    }
}
