//! Fuzz target `config`: watchmux's configuration file ([`Config::from_toml_str`]).
//!
//! Input: the file's bytes (TOML).
//!
//! Invariants: an error, never a panic; an error's line, when it names one, is a line of the
//! file; a file that is accepted also passes [`Config::validate`] (what the command line
//! re-checks after its overrides).

use watchmux::config::Config;

/// The check (see the module doc).
pub fn check(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match Config::from_toml_str(text, "fuzz.toml") {
        Ok(config) => {
            if let Err(e) = config.validate() {
                panic!("an accepted file fails validation: {e}");
            }
        }
        Err(e) => {
            assert!(!e.to_string().is_empty());
            if let Some(line) = e.line() {
                let lines = text.split('\n').count();
                assert!(
                    (1..=lines).contains(&line),
                    "error on line {line} of {lines}: {e}"
                );
            }
        }
    }
}
