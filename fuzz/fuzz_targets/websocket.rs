//! libFuzzer entry point of the `websocket` target: the check is `fuzz_checks::websocket::check`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_checks::websocket::check(data));
