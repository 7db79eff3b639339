//! The one invariant every refusal shares: it is the `metav1.Status` kube answers with — the
//! expected code and reason, a message, and a body that reads back as the same Status.

use kube_wire::status::Status;

/// Asserts that `s` is kube's `code`/`reason` answer, with a message, and that its JSON body
/// parses back to `s` (what a client reads is what was meant).
pub fn assert_status(s: &Status, code: u16, reason: &str, context: &str) {
    assert_eq!(
        (s.code, s.reason.as_str()),
        (code, reason),
        "{context}: unexpected Status {s:?}"
    );
    assert!(!s.message.is_empty(), "{context}: Status without a message");
    let json = s.to_json();
    let back = Status::parse(&json, 0)
        .unwrap_or_else(|e| panic!("{context}: Status body does not parse back: {e}"));
    assert_eq!(&back, s, "{context}: Status body reads back differently");
}
