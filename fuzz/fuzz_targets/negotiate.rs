//! libFuzzer entry point of the `negotiate` target: the check is `fuzz_checks::negotiate::check`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_checks::negotiate::check(data));
