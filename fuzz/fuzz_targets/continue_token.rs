//! libFuzzer entry point of the `continue_token` target: the check is `fuzz_checks::continue_token::check`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_checks::continue_token::check(data));
