//! The invariants of watchmux's fuzz targets (`fuzz/`): one module per parser of bytes from
//! outside (a balancer's PROXY header, a client's request, an upstream's answers, an operator's
//! files, the persisted cache's files), each with a
//! `check(data: &[u8])` that feeds the bytes to the parser and panics when an invariant breaks
//! — not only "no panic": a parse that succeeds round-trips, an error is the `Status` kube
//! answers with, an accepted object's record is what `serde_json` reads from the same bytes.
//!
//! Both runners call the same functions: libFuzzer through `fuzz/fuzz_targets/<target>.rs`
//! (`fuzz/run`), and `cargo test`, which replays every seed of `fuzz/corpus/<target>/` (the
//! tests of this file), so the invariants hold on stable without libFuzzer too.
//!
//! Test code only: nothing in the product depends on this crate, and it must not hold product
//! logic (where a check needs a product function that is private, the product exposes it).

pub mod config;
pub mod continue_token;
pub mod kubeconfig;
pub mod negotiate;
pub mod persist;
pub mod proto;
pub mod proxy_header;
pub mod request;
pub mod selector;
pub mod status;
pub mod table;
pub mod upstream;
pub mod websocket;

/// A fuzz target: its name (of `fuzz/fuzz_targets/<name>.rs` and `fuzz/corpus/<name>/`) and
/// its check.
pub type Target = (&'static str, fn(&[u8]));

/// Every fuzz target.
pub const TARGETS: &[Target] = &[
    ("request", request::check),
    ("selector", selector::check),
    ("continue_token", continue_token::check),
    ("negotiate", negotiate::check),
    ("upstream", upstream::check),
    ("proto", proto::check),
    ("table", table::check),
    ("kubeconfig", kubeconfig::check),
    ("config", config::check),
    ("websocket", websocket::check),
    ("persist", persist::check),
    ("proxy_header", proxy_header::check),
];

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::path::{Path, PathBuf};

    use super::TARGETS;

    fn fuzz_dir() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz")
    }

    fn names_in(dir: &Path, strip: &str) -> BTreeSet<String> {
        std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter_map(|n| n.strip_suffix(strip).map(str::to_string))
            .collect()
    }

    /// Every target has a libFuzzer entry point and a seed corpus, and nothing else is there:
    /// a target added on one side only fails here.
    #[test]
    fn every_target_has_an_entry_point_and_a_corpus() {
        let known: BTreeSet<String> = TARGETS.iter().map(|(n, _)| n.to_string()).collect();
        assert_eq!(names_in(&fuzz_dir().join("fuzz_targets"), ".rs"), known);
        assert_eq!(names_in(&fuzz_dir().join("corpus"), ""), known);
    }

    /// Each entry point hands libFuzzer's bytes to its own check, and `fuzz/Cargo.toml` builds
    /// it under the target's name. CI does not build the fuzz crate (libFuzzer is C++ and its
    /// build alone took minutes), so this is what keeps `fuzz/run` from drifting: the checks are
    /// compiled and run here, and the entry points are one line each, checked as text.
    #[test]
    fn every_entry_point_calls_its_check_and_is_built() {
        let manifest = std::fs::read_to_string(fuzz_dir().join("Cargo.toml")).unwrap();
        for (name, _) in TARGETS {
            let path = fuzz_dir().join("fuzz_targets").join(format!("{name}.rs"));
            let src = std::fs::read_to_string(&path).unwrap();
            let call = format!(
                "libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_checks::{name}::check(data));"
            );
            assert!(
                src.lines().any(|l| l.trim() == call),
                "{} does not call `fuzz_checks::{name}::check`: want the line\n{call}",
                path.display()
            );
            let bin = format!("[[bin]]\nname = \"{name}\"\npath = \"fuzz_targets/{name}.rs\"\n");
            assert!(
                manifest.contains(&bin),
                "fuzz/Cargo.toml has no [[bin]] for {name}: want\n{bin}"
            );
        }
    }

    /// Each seed of `fuzz/corpus/<target>/` passes its target's check (crashes found by the
    /// fuzzer are added there once fixed, so they stay fixed).
    #[test]
    fn seed_corpus_passes_every_check() {
        for (name, check) in TARGETS {
            let dir = fuzz_dir().join("corpus").join(name);
            let mut seeds: Vec<PathBuf> = std::fs::read_dir(&dir)
                .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
                .map(|e| e.unwrap().path())
                .collect();
            seeds.sort();
            assert!(!seeds.is_empty(), "{name}: no seed in {}", dir.display());
            for seed in seeds {
                let data = std::fs::read(&seed).unwrap();
                let outcome = std::panic::catch_unwind(|| check(&data));
                assert!(
                    outcome.is_ok(),
                    "{name}: {} fails its check",
                    seed.display()
                );
            }
        }
    }
}
