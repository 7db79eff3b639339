//! libFuzzer entry point of the `upstream` target: the check is `fuzz_checks::upstream::check`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_checks::upstream::check(data));
