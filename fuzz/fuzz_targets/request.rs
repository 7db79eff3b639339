//! libFuzzer entry point of the `request` target: the check is `fuzz_checks::request::check`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_checks::request::check(data));
