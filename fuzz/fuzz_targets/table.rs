//! libFuzzer entry point of the `table` target: the check is `fuzz_checks::table::check`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_checks::table::check(data));
