//! libFuzzer entry point of the `proto` target: the check is `fuzz_checks::proto::check`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_checks::proto::check(data));
