//! libFuzzer entry point of the `kubeconfig` target: the check is `fuzz_checks::kubeconfig::check`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_checks::kubeconfig::check(data));
