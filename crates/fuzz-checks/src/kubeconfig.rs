//! Fuzz target `kubeconfig`: a kubeconfig file as watchmux reads it
//! ([`watchmux::upstream::kubeconfig::resolve`] with `upstream.kubeconfig` naming it: read as
//! client-go reads it, then the cluster, TLS and credential settings watchmux takes from it).
//!
//! Input: the file's bytes (YAML).
//!
//! Invariants: an error, never a panic; an error says where it comes from (the file); a file
//! that resolves has an `http(s)` server.
//!
//! The file may name other files (CA, client certificate and key, token file), which are read
//! as the loader reads them: relative names resolve in an empty directory. Inputs naming a
//! device or a kernel file system (`/dev`, `/proc`, `/sys`) are skipped: reading `/dev/zero`
//! never ends, and an operator who points watchmux there gets what they asked for.

use std::cell::RefCell;
use std::path::PathBuf;

use watchmux::config::UpstreamConfig;
use watchmux::upstream::kubeconfig::resolve;

thread_local! {
    /// One directory per thread, holding the file under test (rewritten for each input).
    static DIR: RefCell<Option<tempfile::TempDir>> = const { RefCell::new(None) };
}

fn file_with(data: &[u8]) -> PathBuf {
    DIR.with(|d| {
        let mut d = d.borrow_mut();
        let dir = d.get_or_insert_with(|| tempfile::tempdir().expect("a temporary directory"));
        let path = dir.path().join("kubeconfig");
        std::fs::write(&path, data).expect("the kubeconfig is written");
        path
    })
}

/// The check (see the module doc).
pub fn check(data: &[u8]) {
    let special = ["/dev", "/proc", "/sys"];
    if special
        .iter()
        .any(|s| data.windows(s.len()).any(|w| w == s.as_bytes()))
    {
        return;
    }
    let path = file_with(data);
    for context in [None, Some("fuzz")] {
        let config = UpstreamConfig {
            kubeconfig: Some(path.clone()),
            context: context.map(str::to_string),
            ..UpstreamConfig::default()
        };
        match resolve(&config) {
            Ok(r) => {
                assert!(
                    matches!(r.url.scheme_str(), Some("http" | "https")),
                    "{}",
                    r.url
                );
                assert!(!r.describe().is_empty());
            }
            Err(e) => {
                let m = e.to_string();
                assert!(
                    m.contains("upstream.kubeconfig"),
                    "{m:?} does not name its origin"
                );
            }
        }
    }
}
