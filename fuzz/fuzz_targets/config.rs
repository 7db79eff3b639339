//! libFuzzer entry point of the `config` target: the check is `fuzz_checks::config::check`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_checks::config::check(data));
