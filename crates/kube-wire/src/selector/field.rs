//! Field selectors: the grammar, escaping and matching of `k8s.io/apimachinery/pkg/fields`
//! (`ParseSelector`, `EscapeValue`/`UnescapeValue`, `Selector.Transform`), as used by
//! kube-apiserver for the `fieldSelector` parameter.
//!
//! A selector is a comma-separated AND of `field=value`, `field==value` or `field!=value` terms.
//! Nothing is trimmed: `a = b` selects field `"a "` equal to `" b"`. In a value, `\` escapes `\`,
//! `,` and `=`; any other escape, a trailing `\` or an unescaped `=` is an error. Keys are not
//! checked here; the kind's field label conversion ([`super::selectable`]) checks and rewrites
//! them.
//! A field missing from an object's selectable set compares as the empty string.
//!
//! Does not read objects: the caller supplies an object's selectable field values.

use std::fmt;
use std::str::FromStr;

use super::SelectorError;
use super::label::Labels;

/// The operator of a [`FieldRequirement`]. `=` and `==` are both [`FieldOp::Equals`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FieldOp {
    /// `field=value` or `field==value`
    Equals,
    /// `field!=value`
    NotEquals,
}

impl FieldOp {
    /// The operator as printed in the canonical form.
    pub fn as_str(self) -> &'static str {
        match self {
            FieldOp::Equals => "=",
            FieldOp::NotEquals => "!=",
        }
    }
}

/// One term of a [`FieldSelector`]; `value` is unescaped.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FieldRequirement {
    /// The field label, e.g. `spec.nodeName`.
    pub field: String,
    /// `=` or `!=`.
    pub op: FieldOp,
    /// The literal (unescaped) value.
    pub value: String,
}

impl FieldRequirement {
    /// Whether a selectable field set with value `have` for this field (`""` when absent)
    /// satisfies this term.
    pub fn matches_value(&self, have: &str) -> bool {
        match self.op {
            FieldOp::Equals => have == self.value,
            FieldOp::NotEquals => have != self.value,
        }
    }
}

impl fmt::Display for FieldRequirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.field)?;
        f.write_str(self.op.as_str())?;
        f.write_str(&escape_value(&self.value))
    }
}

/// A parsed field selector: the AND of its terms, kept in a canonical order (sorted by their
/// printed form) so that equal selectors compare equal.
///
/// The default has no term and matches everything.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct FieldSelector {
    reqs: Vec<FieldRequirement>,
}

impl FieldSelector {
    /// Parse a `fieldSelector` exactly as kube-apiserver does (before the kind's field label
    /// conversion); an error carries the 400 message.
    pub fn parse(s: &str) -> Result<Self, SelectorError> {
        let mut reqs = Vec::new();
        for term in split_terms(s) {
            if term.is_empty() {
                continue;
            }
            let Some((field, op, raw)) = split_term(term) else {
                return Err(SelectorError::FieldSyntax {
                    selector: s.to_owned(),
                    term: term.to_owned(),
                });
            };
            let value = unescape_value(raw)?;
            reqs.push(FieldRequirement {
                field: field.to_owned(),
                op,
                value,
            });
        }
        // apimachinery returns terms sorted by their raw text and drops those whose field and
        // value are both empty (`=`, `==`, `!=` alone).
        Ok(Self::from_requirements(reqs))
    }

    /// A selector from terms (terms with an empty field and an empty value are dropped, as
    /// apimachinery's `Transform` drops them).
    pub fn from_requirements(mut reqs: Vec<FieldRequirement>) -> Self {
        reqs.retain(|r| !(r.field.is_empty() && r.value.is_empty()));
        reqs.sort_by_cached_key(|r| r.to_string());
        FieldSelector { reqs }
    }

    /// `field=value` (apimachinery `OneTermEqualSelector`).
    pub fn one_term_equal(field: impl Into<String>, value: impl Into<String>) -> Self {
        Self::from_requirements(vec![FieldRequirement {
            field: field.into(),
            op: FieldOp::Equals,
            value: value.into(),
        }])
    }

    /// The AND of this selector and `other`.
    pub fn and(&self, other: &FieldSelector) -> Self {
        let mut reqs = self.reqs.clone();
        reqs.extend(other.reqs.iter().cloned());
        Self::from_requirements(reqs)
    }

    /// The selector that matches everything.
    pub fn everything() -> Self {
        FieldSelector::default()
    }

    /// True when the selector has no term (matches everything).
    pub fn is_empty(&self) -> bool {
        self.reqs.is_empty()
    }

    /// The terms, in canonical order.
    pub fn requirements(&self) -> &[FieldRequirement] {
        &self.reqs
    }

    /// Whether the object whose selectable fields `get` returns satisfies every term. A field
    /// for which `get` returns `None` compares as `""`.
    pub fn matches<'v>(&self, get: impl Fn(&str) -> Option<&'v str>) -> bool {
        self.reqs
            .iter()
            .all(|r| r.matches_value(get(&r.field).unwrap_or("")))
    }

    /// [`FieldSelector::matches`] against a set of selectable fields (such as the output of
    /// [`super::selectable::selectable_fields`]).
    pub fn matches_set<L: Labels + ?Sized>(&self, fields: &L) -> bool {
        self.reqs
            .iter()
            .all(|r| r.matches_value(fields.label(&r.field).unwrap_or("")))
    }

    /// The value of the first `=` term on `field`, if any (apimachinery `RequiresExactMatch`).
    pub fn exact_value(&self, field: &str) -> Option<&str> {
        self.reqs
            .iter()
            .find(|r| r.op == FieldOp::Equals && r.field == field)
            .map(|r| r.value.as_str())
    }

    /// Apply `f(field, value) -> (field, value)` to every term (apimachinery `Transform`); a term
    /// mapped to an empty field and an empty value is dropped; the first error is returned.
    pub fn transform(
        &self,
        f: impl Fn(&str, &str) -> Result<(String, String), SelectorError>,
    ) -> Result<Self, SelectorError> {
        let mut reqs = Vec::with_capacity(self.reqs.len());
        for r in &self.reqs {
            let (field, value) = f(&r.field, &r.value)?;
            reqs.push(FieldRequirement {
                field,
                op: r.op,
                value,
            });
        }
        Ok(Self::from_requirements(reqs))
    }
}

impl fmt::Display for FieldSelector {
    /// Terms joined by `,`, values re-escaped (`\` → `\\`, `,` → `\,`, `=` → `\=`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.reqs.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            fmt::Display::fmt(r, f)?;
        }
        Ok(())
    }
}

impl FromStr for FieldSelector {
    type Err = SelectorError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

/// apimachinery `fields.EscapeValue`.
pub fn escape_value(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '\\' | ',' | '=') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// apimachinery `fields.UnescapeValue`.
pub fn unescape_value(s: &str) -> Result<String, SelectorError> {
    if !s.contains(['\\', ',', '=']) {
        return Ok(s.to_owned());
    }
    let mut out = String::with_capacity(s.len());
    let mut in_slash = false;
    for c in s.chars() {
        if in_slash {
            match c {
                '\\' | ',' | '=' => out.push(c),
                _ => return Err(SelectorError::FieldEscape(format!("\\{c}"))),
            }
            in_slash = false;
            continue;
        }
        match c {
            '\\' => in_slash = true,
            ',' | '=' => return Err(SelectorError::FieldUnescaped(c)),
            _ => out.push(c),
        }
    }
    if in_slash {
        return Err(SelectorError::FieldEscape("\\".to_owned()));
    }
    Ok(out)
}

/// Split on commas not preceded by an escaping backslash; the raw terms are returned sorted
/// (apimachinery sorts them before building the selector).
fn split_terms(s: &str) -> Vec<&str> {
    if s.is_empty() {
        return Vec::new();
    }
    let mut terms = Vec::new();
    let mut start = 0;
    let mut in_slash = false;
    for (i, c) in s.char_indices() {
        if in_slash {
            in_slash = false;
        } else if c == '\\' {
            in_slash = true;
        } else if c == ',' {
            terms.push(&s[start..i]);
            start = i + 1;
        }
    }
    terms.push(&s[start..]);
    terms.sort_unstable();
    terms
}

/// Split a term at the first position where `!=`, `==` or `=` starts (tried in that order).
fn split_term(term: &str) -> Option<(&str, FieldOp, &str)> {
    for (i, _) in term.char_indices() {
        let rest = &term[i..];
        for (op, kind) in [
            ("!=", FieldOp::NotEquals),
            ("==", FieldOp::Equals),
            ("=", FieldOp::Equals),
        ] {
            if let Some(rhs) = rest.strip_prefix(op) {
                return Some((&term[..i], kind, rhs));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    fn req(field: &str, op: FieldOp, value: &str) -> FieldRequirement {
        FieldRequirement {
            field: field.into(),
            op,
            value: value.into(),
        }
    }

    fn parse_ok(s: &str) -> FieldSelector {
        FieldSelector::parse(s).unwrap_or_else(|e| panic!("{s:?} should parse: {e}"))
    }

    #[test]
    fn parse_good() {
        use FieldOp::*;
        let cases: &[(&str, Vec<FieldRequirement>, &str)] = &[
            ("", vec![], ""),
            (",", vec![], ""),
            ("=", vec![], ""),
            ("==,!=", vec![], ""),
            ("x=a", vec![req("x", Equals, "a")], "x=a"),
            ("x==a", vec![req("x", Equals, "a")], "x=a"),
            ("x!=a", vec![req("x", NotEquals, "a")], "x!=a"),
            (
                "x=a,y=b,z=c",
                vec![
                    req("x", Equals, "a"),
                    req("y", Equals, "b"),
                    req("z", Equals, "c"),
                ],
                "x=a,y=b,z=c",
            ),
            (
                "z=c,,x!=a",
                vec![req("x", NotEquals, "a"), req("z", Equals, "c")],
                "x!=a,z=c",
            ),
            ("x=", vec![req("x", Equals, "")], "x="),
            ("=a", vec![req("", Equals, "a")], "=a"),
            ("x= a ", vec![req("x", Equals, " a ")], "x= a "),
            ("x = a", vec![req("x ", Equals, " a")], "x = a"),
            ("a!b=c", vec![req("a!b", Equals, "c")], "a!b=c"),
            // No escaping in the field: the first `=` splits.
            (r"x\=a", vec![req(r"x\", Equals, "a")], r"x\=a"),
            ("x=!a", vec![req("x", Equals, "!a")], "x=!a"),
            (r"x=a\,b", vec![req("x", Equals, "a,b")], r"x=a\,b"),
            (r"x=a\=b", vec![req("x", Equals, "a=b")], r"x=a\=b"),
            (r"x=a\\b", vec![req("x", Equals, r"a\b")], r"x=a\\b"),
            (r"x=\\", vec![req("x", Equals, r"\")], r"x=\\"),
            (r"x=a\,", vec![req("x", Equals, "a,")], r"x=a\,"),
            (
                r"x=a\,b,y!=\=",
                vec![req("x", Equals, "a,b"), req("y", NotEquals, "=")],
                r"x=a\,b,y!=\=",
            ),
            (
                "metadata.name=café",
                vec![req("metadata.name", Equals, "café")],
                "metadata.name=café",
            ),
            ("x==", vec![req("x", Equals, "")], "x="),
        ];
        for (input, want, canonical) in cases {
            let sel = parse_ok(input);
            assert_eq!(sel.requirements(), want.as_slice(), "terms of {input:?}");
            assert_eq!(&sel.to_string(), canonical, "canonical form of {input:?}");
            assert_eq!(parse_ok(canonical), sel, "round trip of {input:?}");
        }
    }

    #[test]
    fn parse_errors_with_exact_messages() {
        let cases = [
            ("x", "invalid selector: 'x'; can't understand 'x'"),
            ("a=b,c", "invalid selector: 'a=b,c'; can't understand 'c'"),
            ("x<5", "invalid selector: 'x<5'; can't understand 'x<5'"),
            ("x>5", "invalid selector: 'x>5'; can't understand 'x>5'"),
            // `x!==a`: the first operator found is `!=`, leaving `=a` as the value.
            (
                "x!==a",
                "invalid field selector: unescaped character in value: 61",
            ),
            (
                "x==a==b",
                "invalid field selector: unescaped character in value: 61",
            ),
            (
                "x=a=b",
                "invalid field selector: unescaped character in value: 61",
            ),
            (
                r"x=\a",
                r"invalid field selector: invalid escape sequence: \a",
            ),
            (
                r"x=\é",
                r"invalid field selector: invalid escape sequence: \é",
            ),
            (
                r"x=a\",
                r"invalid field selector: invalid escape sequence: \",
            ),
            (
                r"x=a\,\",
                r"invalid field selector: invalid escape sequence: \",
            ),
            // Terms are checked in sorted order: "a" sorts before "b=c=d".
            (
                "b=c=d,a",
                "invalid selector: 'b=c=d,a'; can't understand 'a'",
            ),
            (
                "a=c=d,b",
                "invalid field selector: unescaped character in value: 61",
            ),
        ];
        for (input, want) in cases {
            match FieldSelector::parse(input) {
                Ok(sel) => panic!("{input:?} should not parse, got {sel:?}"),
                Err(e) => assert_eq!(e.to_string(), want, "error for {input:?}"),
            }
        }
    }

    #[test]
    fn matching_absent_fields_compare_as_empty() {
        let fields: BTreeMap<String, String> = [("spec.nodeName", "n1"), ("status.phase", "")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let get = |k: &str| fields.get(k).map(String::as_str);
        let cases = [
            ("", true),
            ("spec.nodeName=n1", true),
            ("spec.nodeName==n1", true),
            ("spec.nodeName=n2", false),
            ("spec.nodeName!=n1", false),
            ("spec.nodeName!=n2", true),
            ("spec.nodeName=", false),
            ("spec.nodeName!=", true),
            ("status.phase=", true),
            ("status.phase!=", false),
            ("missing=", true),
            ("missing!=", false),
            ("missing=x", false),
            ("missing!=x", true),
            ("spec.nodeName=n1,missing=", true),
            ("spec.nodeName=n1,missing=x", false),
        ];
        for (sel, want) in cases {
            let sel = parse_ok(sel);
            assert_eq!(sel.matches(get), want, "{sel}");
            assert_eq!(sel.matches_set(&fields), want, "{sel}");
        }
    }

    #[test]
    fn exact_value_and_transform() {
        let sel = parse_ok("metadata.name!=a,metadata.name=b,spec.host=n");
        assert_eq!(sel.exact_value("metadata.name"), Some("b"));
        assert_eq!(sel.exact_value("spec.host"), Some("n"));
        assert_eq!(sel.exact_value("spec.nodeName"), None);
        assert_eq!(parse_ok("x!=a").exact_value("x"), None);

        let t = sel
            .transform(|f, v| {
                Ok(match f {
                    "spec.host" => ("spec.nodeName".into(), v.into()),
                    "metadata.name" if v == "a" => (String::new(), String::new()),
                    _ => (f.into(), v.into()),
                })
            })
            .unwrap();
        assert_eq!(t.to_string(), "metadata.name=b,spec.nodeName=n");
        let err = sel
            .transform(|f, _| {
                Err(SelectorError::FieldLabel(format!(
                    "field label not supported: {f}"
                )))
            })
            .unwrap_err();
        assert_eq!(err.to_string(), "field label not supported: metadata.name");

        assert!(FieldSelector::everything().is_empty());
        assert!(parse_ok("").matches(|_| None));
        let one = FieldSelector::one_term_equal("metadata.name", "a,b");
        assert_eq!(one.to_string(), r"metadata.name=a\,b");
        assert_eq!(
            one.and(&parse_ok("a!=b")).to_string(),
            r"a!=b,metadata.name=a\,b"
        );
    }

    #[test]
    fn escape_unescape() {
        assert_eq!(escape_value(r"a\b,c=d"), r"a\\b\,c\=d");
        assert_eq!(unescape_value(r"a\\b\,c\=d").unwrap(), r"a\b,c=d");
        assert_eq!(unescape_value("plain").unwrap(), "plain");
    }

    fn field_strategy() -> impl Strategy<Value = String> {
        prop_oneof![
            prop::sample::select(vec!["metadata.name", "spec.nodeName", "a", "status.phase"])
                .prop_map(String::from),
            "[a-zA-Z.!<> ]{0,8}".prop_map(String::from),
        ]
        .prop_filter("no operator or comma in a field", |f| {
            !f.contains('=') && !f.ends_with('!')
        })
    }

    fn value_strategy() -> impl Strategy<Value = String> {
        prop_oneof![
            prop::sample::select(vec!["", "n1", "n2", "a,b", "x=y", r"\"]).prop_map(String::from),
            "[a-z0-9,=\\\\! é]{0,8}".prop_map(String::from),
        ]
    }

    fn req_strategy() -> impl Strategy<Value = FieldRequirement> {
        (field_strategy(), any::<bool>(), value_strategy()).prop_map(|(field, ne, value)| {
            FieldRequirement {
                field,
                op: if ne {
                    FieldOp::NotEquals
                } else {
                    FieldOp::Equals
                },
                value,
            }
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

        #[test]
        fn random_strings_never_panic(s in "\\PC{0,40}") {
            let _ = FieldSelector::parse(&s);
        }

        #[test]
        fn random_selector_alphabet_never_panics(s in "[a-z=!,\\\\. é]{0,30}") {
            if let Ok(sel) = FieldSelector::parse(&s) {
                prop_assert_eq!(FieldSelector::parse(&sel.to_string()).unwrap(), sel);
            }
        }

        #[test]
        fn display_parse_round_trip(
            reqs in prop::collection::vec(req_strategy(), 0..6),
            objs in prop::collection::vec(
                prop::collection::btree_map(field_strategy(), value_strategy(), 0..5), 1..6),
        ) {
            let sel = FieldSelector::from_requirements(reqs);
            let text = sel.to_string();
            let parsed = FieldSelector::parse(&text).unwrap();
            prop_assert_eq!(&parsed, &sel, "text {}", text);
            for obj in &objs {
                let get = |k: &str| obj.get(k).map(String::as_str);
                let want = sel.requirements().iter().all(|r| {
                    let have = obj.get(&r.field).map(String::as_str).unwrap_or("");
                    (have == r.value) == (r.op == FieldOp::Equals)
                });
                prop_assert_eq!(parsed.matches(get), want);
                prop_assert_eq!(sel.matches_set(obj), want);
            }
        }

        #[test]
        fn escape_round_trip(v in "\\PC{0,20}") {
            prop_assert_eq!(unescape_value(&escape_value(&v)).unwrap(), v);
        }
    }
}
