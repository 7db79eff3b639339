//! watchmux connected from kubeconfigs as client-go reads them: `KUBECONFIG` listing several
//! files merged by client-go's rules (the first file to define a name wins it, the first
//! non-empty current-context wins, relative paths resolve against the folder of the file that
//! names them).

use std::path::Path;
use std::time::Duration;

use crate::pki::{Ca, b64, kubeconfig};
use http::StatusCode;
use kube_sim::Simulator;
use kube_sim::tls::SimTls;
use serde_json::{Value, json};

/// A TLS simulator serving `server`'s certificate, requiring a client certificate from
/// `client_ca` and the bearer token `token`.
async fn tls_sim(server: &crate::pki::Leaf, client_ca: &Ca, token: &str) -> Simulator {
    let tls = SimTls {
        cert_pem: server.cert_pem.clone(),
        key_pem: server.key_pem.clone(),
        client_ca_pem: Some(client_ca.pem.clone()),
        bearer_token: Some(token.to_string()),
    };
    crate::common::sim_with(|c| c.tls = Some(tls)).await
}

fn write_json(path: &Path, v: &Value) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, serde_json::to_vec_pretty(v).unwrap()).unwrap();
}

/// Runs `watchmux serve` (caching namespaces, on a free port) with `env`, until it serves the
/// namespaces from its cache (30 s at most); stops it.
async fn serve_until_cached(dir: &Path, env: &[(&str, &std::ffi::OsStr)]) {
    let port = crate::common::dead_port();
    let config = dir.join("watchmux.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\nlisten = \"127.0.0.1:{port}\"\n[[cache.resources]]\nversion = \"v1\"\nresource = \"namespaces\"\n"
        ),
    )
    .unwrap();
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_watchmux"));
    cmd.args(["serve", "--config"])
        .arg(&config)
        .env("WATCHMUX_LOG", "warn")
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    let url = format!("http://127.0.0.1:{port}/api/v1/namespaces?resourceVersion=0");
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<http_body_util::Empty<bytes::Bytes>>();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(r) = client.get(url.parse().unwrap()).await
            && r.status() == StatusCode::OK
        {
            break;
        }
        if let Some(status) = child.try_wait().unwrap() {
            let out = child.wait_with_output().await.unwrap();
            panic!(
                "watchmux exited ({status}): {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "watchmux did not serve the cache"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    child.kill().await.unwrap();
}

/// `KUBECONFIG=one:missing:two`: the context and its user come from `one` (whose client
/// certificate paths are relative to `one`'s folder), its cluster from `two` (whose CA path is
/// relative to `two`'s folder); `two`'s own user of the same name (a wrong token) is not merged
/// in, `one`'s empty current-context gives way to `two`'s, and the missing file is skipped.
#[tokio::test]
async fn kubeconfig_files_merge_as_in_client_go() {
    let ca = Ca::new("test-ca");
    let me = ca.client("watchmux", &["system:masters"], false);
    let sim = tls_sim(&ca.server(), &ca, "right-token").await;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir_all(d.join("one/certs")).unwrap();
    std::fs::write(d.join("one/certs/me.crt"), &me.cert_pem).unwrap();
    std::fs::write(d.join("one/certs/me.key"), &me.key_pem).unwrap();
    std::fs::create_dir_all(d.join("two/pki")).unwrap();
    std::fs::write(d.join("two/pki/ca.crt"), &ca.pem).unwrap();
    let one = json!({
        "apiVersion": "v1", "kind": "Config",
        "current-context": "",
        "contexts": [{"name": "sim", "context": {"cluster": "sim", "user": "me"}}],
        "users": [{"name": "me", "user": {
            "client-certificate": "certs/me.crt",
            "client-key": "certs/me.key",
            "token": "right-token",
        }}],
    });
    let two = json!({
        "current-context": "sim",
        "clusters": [{"name": "sim", "cluster": {
            "server": sim.url(),
            "certificate-authority": "pki/ca.crt",
        }}],
        "users": [{"name": "me", "user": {"token": "wrong-token"}}],
        "contexts": [{"name": "sim", "context": {"cluster": "elsewhere", "user": "nobody"}}],
    });
    write_json(&d.join("one/config"), &one);
    write_json(&d.join("two/config"), &two);
    let list = std::env::join_paths([
        d.join("one/config"),
        d.join("missing/config"),
        d.join("two/config"),
    ])
    .unwrap();
    serve_until_cached(d, &[("KUBECONFIG", list.as_os_str())]).await;

    // The same kubeconfigs in the other order: `two`'s context (cluster "elsewhere") wins,
    // and the error names the files and entries.
    let list = std::env::join_paths([d.join("two/config"), d.join("one/config")]).unwrap();
    let config = d.join("watchmux.toml");
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_watchmux"))
        .args(["serve", "--config"])
        .arg(&config)
        .env("KUBECONFIG", &list)
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(30), out)
        .await
        .expect("watchmux must refuse to start")
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(r#"context "sim" (cluster "elsewhere", user "nobody" (not defined: no credentials)): cluster "elsewhere" is not defined (it has sim)"#),
        "{err}"
    );
}

/// A kubeconfig in another folder than watchmux's working directory, naming its CA, client
/// certificate and token file by paths relative to its own folder.
#[tokio::test]
async fn relative_paths_resolve_against_the_kubeconfig_folder() {
    let ca = Ca::new("test-ca");
    let me = ca.client("watchmux", &["system:masters"], false);
    let sim = tls_sim(&ca.server(), &ca, "file-token").await;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("deep/er");
    std::fs::create_dir_all(d.join("pki")).unwrap();
    std::fs::write(d.join("pki/ca.crt"), &ca.pem).unwrap();
    std::fs::write(d.join("pki/me.crt"), &me.cert_pem).unwrap();
    std::fs::write(d.join("pki/me.key"), &me.key_pem).unwrap();
    std::fs::write(dir.path().join("deep/token"), "file-token\n").unwrap();
    let kc = kubeconfig(
        &[(
            "sim",
            json!({"server": sim.url(), "certificate-authority": "pki/ca.crt"}),
            json!({
                "client-certificate": "pki/me.crt",
                "client-key": "./pki/me.key",
                "tokenFile": "../token",
                "token": "ignored-as-tokenFile-wins",
            }),
        )],
        Some("sim"),
    );
    write_json(&d.join("config"), &kc);
    let up = watchmux::upstream::Upstream::new(&watchmux::config::UpstreamConfig {
        kubeconfig: Some(d.join("config")),
        ..Default::default()
    })
    .expect("upstream client");
    let r = up
        .get("/api/v1/namespaces", "application/json")
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    // The same with the CA given as data: the client certificate alone still resolves.
    let kc = kubeconfig(
        &[(
            "sim",
            json!({"server": sim.url(), "certificate-authority-data": b64(&ca.pem)}),
            json!({"client-certificate": "pki/me.crt", "client-key": "pki/me.key", "token": "file-token"}),
        )],
        Some("sim"),
    );
    write_json(&d.join("config"), &kc);
    let up = watchmux::upstream::Upstream::new(&watchmux::config::UpstreamConfig {
        kubeconfig: Some(d.join("config")),
        ..Default::default()
    })
    .expect("upstream client");
    let r = up
        .get("/api/v1/namespaces", "application/json")
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
}
