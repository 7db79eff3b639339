//! libFuzzer entry point of the `proxy_header` target: the check is `fuzz_checks::proxy_header::check`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_checks::proxy_header::check(data));
