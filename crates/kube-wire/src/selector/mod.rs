//! Label and field selectors with kube-apiserver's exact semantics.
//!
//! * [`label`]: the `labelSelector` grammar of `k8s.io/apimachinery/pkg/labels` (set-based and
//!   equality-based requirements, label key/value validation) and matching.
//! * [`field`]: the `fieldSelector` grammar of `k8s.io/apimachinery/pkg/fields` (`=`, `==`, `!=`,
//!   backslash escapes) and matching against a set of selectable fields.
//! * [`selectable`]: the per-kind field label conversion (which keys a kind accepts, aliases, and the
//!   exact rejection message) and the per-kind selectable field values of an object.
//!
//! Every [`SelectorError`] displays exactly the text kube-apiserver puts in the `message` of the
//! HTTP 400 `Status` it answers for that input (`errors.NewBadRequest(err.Error())` in the
//! apiserver's list/watch handler). Turning it into that `Status` is the caller's job.

pub mod field;
pub mod filter;
pub mod label;
pub mod selectable;

pub use field::{FieldOp, FieldRequirement, FieldSelector};
pub use filter::{Filter, UID_FIELD};
pub use label::{LabelOp, LabelRequirement, LabelSelector, Labels};
pub use selectable::{convert_field_label, convert_field_selector, selectable_fields};

/// A selector that kube-apiserver rejects with HTTP 400 (reason `BadRequest`).
///
/// `Display` is byte-for-byte the `message` of that 400 `Status`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    /// The `labelSelector` does not parse or names an invalid key/value. The text is the complete
    /// message (for example `unable to parse requirement: found '', expected: in, notin, =, ==,
    /// !=, gt, lt`).
    #[error("{0}")]
    Label(String),
    /// A `fieldSelector` term without an operator.
    #[error("invalid selector: '{selector}'; can't understand '{term}'")]
    FieldSyntax {
        /// The whole selector as given.
        selector: String,
        /// The offending comma-separated term.
        term: String,
    },
    /// A backslash in a `fieldSelector` value not followed by `\`, `,` or `=` (or at the end).
    #[error("invalid field selector: invalid escape sequence: {0}")]
    FieldEscape(String),
    /// An unescaped `=` (or `,`) in a `fieldSelector` value. Go prints the rune as its number.
    #[error("invalid field selector: unescaped character in value: {}", u32::from(*.0))]
    FieldUnescaped(char),
    /// The kind's field label conversion rejected a key; the text is the converter's message
    /// (for example `field label not supported: spec.foo`).
    #[error("{0}")]
    FieldLabel(String),
}

impl SelectorError {
    /// HTTP status kube-apiserver answers with for this error (always 400).
    pub fn status_code(&self) -> u16 {
        400
    }

    /// `Status.reason` kube-apiserver answers with for this error.
    pub fn reason(&self) -> &'static str {
        "BadRequest"
    }
}

pub(crate) use crate::gofmt::quote as go_quote;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_quote_matches_strconv_quote() {
        let cases = [
            ("", r#""""#),
            ("abc", r#""abc""#),
            ("a\"b\\c", r#""a\"b\\c""#),
            ("\u{7}\u{8}\u{c}\n\r\t\u{b}", r#""\a\b\f\n\r\t\v""#),
            ("\u{0}\u{1f}\u{7f}", r#""\x00\x1f\x7f""#),
            ("héllo 日本", "\"héllo 日本\""),
            ("e\u{301}", "\"e\u{301}\""),
            ("\u{301}", "\"\u{301}\""),
            ("\u{a0}", r#""\u00a0""#),
            ("\u{200b}", r#""\u200b""#),
            ("\u{2028}", r#""\u2028""#),
            ("\u{e000}", r#""\ue000""#),
            ("\u{10ffff}", r#""\U0010ffff""#),
            ("😀", "\"😀\""),
        ];
        for (input, want) in cases {
            assert_eq!(go_quote(input), want, "quote of {input:?}");
        }
    }

    #[test]
    fn error_messages() {
        assert_eq!(
            SelectorError::FieldUnescaped('=').to_string(),
            "invalid field selector: unescaped character in value: 61"
        );
        assert_eq!(
            SelectorError::FieldEscape("\\a".into()).to_string(),
            "invalid field selector: invalid escape sequence: \\a"
        );
        assert_eq!(
            SelectorError::FieldSyntax {
                selector: "a,b=c".into(),
                term: "a".into()
            }
            .to_string(),
            "invalid selector: 'a,b=c'; can't understand 'a'"
        );
        assert_eq!(SelectorError::Label("x".into()).status_code(), 400);
        assert_eq!(SelectorError::FieldLabel("x".into()).reason(), "BadRequest");
    }
}
