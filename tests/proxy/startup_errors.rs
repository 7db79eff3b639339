//! `watchmux serve` refusing to start: for each bad setup (config file, upstream, kubeconfig,
//! service account, serving certificate, listen address, log filter) the binary exits non-zero
//! and its error says each cause once: no line of its output repeats, and the innermost cause
//! appears once.

use std::path::Path;
use std::time::Duration;

use crate::pki::{Ca, b64, kubeconfig, write_kubeconfig};
use serde_json::json;

/// Runs `watchmux serve --config <config>` with `env` and returns its stderr; it must fail.
async fn refused(config: &Path, env: &[(&str, &str)]) -> String {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_watchmux"));
    cmd.args(["serve", "--config"])
        .arg(config)
        .env_remove("KUBECONFIG")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("KUBERNETES_SERVICE_PORT")
        // A backtrace (anyhow prints one when these ask for it) is no part of the message.
        .env_remove("RUST_BACKTRACE")
        .env_remove("RUST_LIB_BACKTRACE")
        .env("WATCHMUX_LOG", "warn")
        .kill_on_drop(true);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = tokio::time::timeout(Duration::from_secs(30), cmd.output())
        .await
        .expect("watchmux must refuse to start, not serve")
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        !out.status.success(),
        "{config:?} must be refused: {:?}\n{err}",
        out.status
    );
    err
}

/// No line repeats, and `cause` appears exactly once.
fn says_once(err: &str, cause: &str) {
    let lines: Vec<&str> = err
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    assert!(!lines.is_empty(), "no error printed");
    for (i, l) in lines.iter().enumerate() {
        assert!(!lines[..i].contains(l), "line {l:?} repeats in:\n{err}");
    }
    assert_eq!(
        err.matches(cause).count(),
        1,
        "{cause:?} must appear once in:\n{err}"
    );
}

fn write(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

#[tokio::test]
async fn startup_errors_say_each_cause_once() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let missing_os_error = "No such file or directory (os error 2)";

    // The config file cannot be read.
    let err = refused(&d.join("nope.toml"), &[]).await;
    says_once(&err, missing_os_error);
    assert!(err.contains("nope.toml: cannot read"), "{err}");

    // The config file is not TOML.
    let cfg = write(d, "syntax.toml", "[server\nlisten = 1\n");
    let err = refused(&cfg, &[]).await;
    says_once(&err, "syntax.toml: line 1");

    // The kubeconfig's client key is no key.
    let ca = Ca::new("test-ca");
    let me = ca.client("u", &[], false);
    let kc = kubeconfig(
        &[(
            "c",
            json!({"server": "https://127.0.0.1:1", "certificate-authority-data": b64(&ca.pem)}),
            json!({"client-certificate-data": b64(&me.cert_pem), "client-key-data": b64("not a key")}),
        )],
        Some("c"),
    );
    let kc = write_kubeconfig(d, &kc);
    let cfg = write(
        d,
        "kc.toml",
        &format!(
            "[server]\nlisten = \"127.0.0.1:0\"\n[upstream]\nkubeconfig = {:?}\n",
            kc.display().to_string()
        ),
    );
    let err = refused(&cfg, &[]).await;
    says_once(&err, "no PEM PRIVATE KEY block found");

    // The kubeconfig names a CA file that does not exist.
    let kc = kubeconfig(
        &[(
            "c",
            json!({"server": "https://127.0.0.1:1", "certificate-authority": "missing-ca.crt"}),
            json!({"token": "t"}),
        )],
        Some("c"),
    );
    write_kubeconfig(d, &kc);
    let err = refused(&cfg, &[]).await;
    says_once(&err, missing_os_error);
    assert!(err.contains("missing-ca.crt"), "{err}");

    // In-cluster mode outside a pod.
    let cfg = write(
        d,
        "incluster.toml",
        "[server]\nlisten = \"127.0.0.1:0\"\n[upstream]\nin_cluster = true\n",
    );
    let err = refused(&cfg, &[]).await;
    says_once(&err, "environment variable not found");

    // The serving certificate does not exist.
    let cfg = write(
        d,
        "tls.toml",
        &format!(
            "[server]\nlisten = \"127.0.0.1:0\"\ntls_cert_file = {:?}\ntls_key_file = {:?}\n[upstream]\nurl = \"http://127.0.0.1:1\"\n",
            d.join("no.crt").display().to_string(),
            d.join("no.key").display().to_string()
        ),
    );
    let err = refused(&cfg, &[]).await;
    says_once(&err, missing_os_error);
    assert!(err.contains("server.tls_cert_file"), "{err}");

    // The listen address is taken.
    let taken = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let cfg = write(
        d,
        "listen.toml",
        &format!(
            "[server]\nlisten = \"{}\"\n[upstream]\nurl = \"http://127.0.0.1:1\"\n",
            taken.local_addr().unwrap()
        ),
    );
    let err = refused(&cfg, &[]).await;
    says_once(&err, "Address already in use");
    drop(taken);

    // The log filter does not parse.
    let cfg = write(
        d,
        "log.toml",
        "[server]\nlisten = \"127.0.0.1:0\"\n[upstream]\nurl = \"http://127.0.0.1:1\"\n",
    );
    let err = refused(&cfg, &[("WATCHMUX_LOG", "watchmux=notalevel")]).await;
    says_once(&err, "invalid log filter");
}
