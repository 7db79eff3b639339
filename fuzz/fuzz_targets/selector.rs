//! libFuzzer entry point of the `selector` target: the check is `fuzz_checks::selector::check`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_checks::selector::check(data));
