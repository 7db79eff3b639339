//! libFuzzer entry point of the `persist` target: the check is `fuzz_checks::persist::check`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_checks::persist::check(data));
