//! Running the real kubectl against a server from a test (kubectl must be installed).
//!
//! Never touches the user's kubeconfig or cache: `HOME`, `KUBECONFIG` and `--cache-dir` point into
//! the test's temporary directory.

use std::process::Stdio;
use std::time::Duration;

use tokio::io::BufReader;
use tokio::process::{ChildStdout, Command};

/// A kubectl command pointed at `server`, isolated from any user kubeconfig or cache.
pub fn kubectl(server: &str, home: &tempfile::TempDir) -> Command {
    let mut c = Command::new("kubectl");
    c.env("HOME", home.path())
        .env("KUBECONFIG", home.path().join("none"))
        .arg("--server")
        .arg(server)
        .arg("--cache-dir")
        .arg(home.path().join("cache"))
        .kill_on_drop(true)
        .stdin(Stdio::null());
    c
}

/// Runs a kubectl command: (success, stdout, stderr).
pub async fn run(mut c: Command) -> (bool, String, String) {
    let out = tokio::time::timeout(Duration::from_secs(60), c.output())
        .await
        .expect("kubectl finishes within 60 s")
        .expect("kubectl is installed (the CI machine has it)");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The next line a long-running kubectl (`get -w`) prints.
pub async fn next_line(lines: &mut tokio::io::Lines<BufReader<ChildStdout>>) -> String {
    tokio::time::timeout(Duration::from_secs(20), lines.next_line())
        .await
        .expect("kubectl prints within 20 s")
        .unwrap()
        .expect("a line")
}
