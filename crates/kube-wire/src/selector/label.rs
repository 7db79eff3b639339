//! Label selectors: the grammar, validation, canonical form and matching of
//! `k8s.io/apimachinery/pkg/labels` (`Parse`, `NewRequirement`, `Requirement.Matches`,
//! `internalSelector.String`), as used by kube-apiserver for the `labelSelector` parameter.
//!
//! Grammar (comma = AND; spaces, tabs, CR and LF separate tokens):
//!
//! ```text
//! requirement := [!] KEY [ ("in" | "notin") "(" VALUES ")" | ("=" | "==" | "!=" | ">" | "<") VALUE ]
//! ```
//!
//! A bare `KEY` means "exists", `!KEY` "does not exist". `!=` and `notin` also match objects
//! without the key. `>`/`<` compare as 64-bit integers and never match a missing or non-integer
//! label.
//!
//! Matches against any [`Labels`] source; it does not read objects or know kinds.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::hash::BuildHasher;
use std::str::FromStr;

use super::{SelectorError, go_quote};

/// Read access to a set of labels (or to any string-to-string set, such as selectable fields).
pub trait Labels {
    /// The value of `key`, or `None` when the key is absent.
    fn label(&self, key: &str) -> Option<&str>;
}

impl<L: Labels + ?Sized> Labels for &L {
    fn label(&self, key: &str) -> Option<&str> {
        (**self).label(key)
    }
}

impl Labels for BTreeMap<String, String> {
    fn label(&self, key: &str) -> Option<&str> {
        self.get(key).map(String::as_str)
    }
}

impl<S: BuildHasher> Labels for HashMap<String, String, S> {
    fn label(&self, key: &str) -> Option<&str> {
        self.get(key).map(String::as_str)
    }
}

/// A JSON object such as `metadata.labels`; a key whose value is not a string counts as absent.
impl Labels for serde_json::Map<String, serde_json::Value> {
    fn label(&self, key: &str) -> Option<&str> {
        self.get(key).and_then(serde_json::Value::as_str)
    }
}

/// Pairs; the first pair with the key wins.
impl<K: AsRef<str>, V: AsRef<str>> Labels for [(K, V)] {
    fn label(&self, key: &str) -> Option<&str> {
        self.iter()
            .find(|(k, _)| k.as_ref() == key)
            .map(|(_, v)| v.as_ref())
    }
}

impl<K: AsRef<str>, V: AsRef<str>> Labels for Vec<(K, V)> {
    fn label(&self, key: &str) -> Option<&str> {
        self.as_slice().label(key)
    }
}

impl<K: AsRef<str>, V: AsRef<str>, const N: usize> Labels for [(K, V); N] {
    fn label(&self, key: &str) -> Option<&str> {
        self.as_slice().label(key)
    }
}

/// The operator of a [`LabelRequirement`] (apimachinery `selection.Operator`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum LabelOp {
    /// `key in (a,b)`
    In,
    /// `key notin (a,b)`; also matches when the key is absent.
    NotIn,
    /// `key=v`
    Equals,
    /// `key==v` (same meaning as `=`; kept apart only for the canonical string)
    DoubleEquals,
    /// `key!=v`; also matches when the key is absent.
    NotEquals,
    /// `key`
    Exists,
    /// `!key`
    DoesNotExist,
    /// `key>N`
    GreaterThan,
    /// `key<N`
    LessThan,
}

impl LabelOp {
    /// The operator's name as apimachinery spells it (`selection.Operator` value).
    pub fn as_str(self) -> &'static str {
        match self {
            LabelOp::In => "in",
            LabelOp::NotIn => "notin",
            LabelOp::Equals => "=",
            LabelOp::DoubleEquals => "==",
            LabelOp::NotEquals => "!=",
            LabelOp::Exists => "exists",
            LabelOp::DoesNotExist => "!",
            LabelOp::GreaterThan => "gt",
            LabelOp::LessThan => "lt",
        }
    }
}

/// One requirement of a [`LabelSelector`]: a key, an operator and a (sorted, deduplicated) set of
/// values.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LabelRequirement {
    key: String,
    op: LabelOp,
    values: Vec<String>,
}

impl LabelRequirement {
    /// Build a validated requirement, like apimachinery's `NewRequirement`: the key must be a
    /// valid label key, every value a valid label value, `in`/`notin` need at least one value,
    /// `=`/`==`/`!=`/`>`/`<` exactly one (an integer for `>`/`<`), exists/does-not-exist none.
    /// Values are stored sorted and deduplicated.
    pub fn new(
        key: impl Into<String>,
        op: LabelOp,
        values: Vec<String>,
    ) -> Result<Self, SelectorError> {
        let key = key.into();
        new_requirement(key, op, values).map_err(SelectorError::Label)
    }

    /// The label key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The operator.
    pub fn op(&self) -> LabelOp {
        self.op
    }

    /// The values, sorted and without duplicates (empty for exists / does-not-exist).
    pub fn values(&self) -> &[String] {
        &self.values
    }

    fn has_value(&self, v: &str) -> bool {
        self.values.iter().any(|x| x == v)
    }

    /// Whether `labels` satisfies this requirement.
    pub fn matches<L: Labels + ?Sized>(&self, labels: &L) -> bool {
        match self.op {
            LabelOp::In | LabelOp::Equals | LabelOp::DoubleEquals => {
                labels.label(&self.key).is_some_and(|v| self.has_value(v))
            }
            LabelOp::NotIn | LabelOp::NotEquals => {
                labels.label(&self.key).is_none_or(|v| !self.has_value(v))
            }
            LabelOp::Exists => labels.label(&self.key).is_some(),
            LabelOp::DoesNotExist => labels.label(&self.key).is_none(),
            LabelOp::GreaterThan | LabelOp::LessThan => {
                let Some(have) = labels.label(&self.key).and_then(go_parse_int) else {
                    return false;
                };
                let [want] = self.values.as_slice() else {
                    return false;
                };
                let Some(want) = go_parse_int(want) else {
                    return false;
                };
                if self.op == LabelOp::GreaterThan {
                    have > want
                } else {
                    have < want
                }
            }
        }
    }
}

impl fmt::Display for LabelRequirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.op == LabelOp::DoesNotExist {
            f.write_str("!")?;
        }
        f.write_str(&self.key)?;
        let (op, set) = match self.op {
            LabelOp::Exists | LabelOp::DoesNotExist => return Ok(()),
            LabelOp::Equals => ("=", false),
            LabelOp::DoubleEquals => ("==", false),
            LabelOp::NotEquals => ("!=", false),
            LabelOp::In => (" in ", true),
            LabelOp::NotIn => (" notin ", true),
            LabelOp::GreaterThan => (">", false),
            LabelOp::LessThan => ("<", false),
        };
        f.write_str(op)?;
        if set {
            f.write_str("(")?;
        }
        // Values are kept sorted, as apimachinery sorts them when printing.
        for (i, v) in self.values.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            f.write_str(v)?;
        }
        if set {
            f.write_str(")")?;
        }
        Ok(())
    }
}

/// A parsed label selector: the AND of its requirements, sorted by key.
///
/// The default (and [`LabelSelector::everything`], and the parse of `""`) has no requirement and
/// matches every label set.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct LabelSelector {
    reqs: Vec<LabelRequirement>,
}

impl LabelSelector {
    /// Parse a `labelSelector` exactly as kube-apiserver does; an error carries the 400 message.
    pub fn parse(s: &str) -> Result<Self, SelectorError> {
        let mut reqs = Parser::new(s).parse().map_err(SelectorError::Label)?;
        // Go sorts by key with sort.Sort, which is an insertion sort (stable) for up to 12
        // requirements; a stable sort reproduces its order there.
        reqs.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(LabelSelector { reqs })
    }

    /// The selector that matches everything.
    pub fn everything() -> Self {
        LabelSelector::default()
    }

    /// A selector from already validated requirements (sorted by key).
    pub fn from_requirements(mut reqs: Vec<LabelRequirement>) -> Self {
        reqs.sort_by(|a, b| a.key.cmp(&b.key));
        LabelSelector { reqs }
    }

    /// `key=value` for every pair (apimachinery `SelectorFromValidatedSet`, no validation).
    pub fn from_set<'a>(set: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        let reqs = set
            .into_iter()
            .map(|(k, v)| LabelRequirement {
                key: k.to_owned(),
                op: LabelOp::Equals,
                values: vec![v.to_owned()],
            })
            .collect();
        Self::from_requirements(reqs)
    }

    /// This selector with one more requirement (kept sorted by key).
    pub fn with(mut self, req: LabelRequirement) -> Self {
        let at = self.reqs.partition_point(|r| r.key <= req.key);
        self.reqs.insert(at, req);
        self
    }

    /// True when the selector has no requirement (matches everything).
    pub fn is_empty(&self) -> bool {
        self.reqs.is_empty()
    }

    /// Whether every requirement is satisfied by `labels`.
    pub fn matches<L: Labels + ?Sized>(&self, labels: &L) -> bool {
        self.reqs.iter().all(|r| r.matches(labels))
    }

    /// The requirements, sorted by key.
    pub fn requirements(&self) -> &[LabelRequirement] {
        &self.reqs
    }

    /// The single value `key` must have for a label set to match, if some requirement pins it
    /// (`key=v`, `key==v` or `key in (v)`). This is sound for index look-ups: every matching
    /// label set has `key` = the returned value. (apimachinery's `RequiresExactMatch` only looks
    /// at the first requirement on `key`; this looks at all of them.)
    pub fn exact_value(&self, key: &str) -> Option<&str> {
        self.reqs
            .iter()
            .find_map(|r| match (r.op, r.values.as_slice()) {
                (LabelOp::Equals | LabelOp::DoubleEquals | LabelOp::In, [v]) if r.key == key => {
                    Some(v.as_str())
                }
                _ => None,
            })
    }
}

impl fmt::Display for LabelSelector {
    /// The canonical form apimachinery's `String()` gives: requirements sorted by key, joined by
    /// `,`, set values sorted (`a in (x,y)`).
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

impl FromStr for LabelSelector {
    type Err = SelectorError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

// ---------------------------------------------------------------------------------------------
// Validation (apimachinery pkg/api/validate/content: IsLabelKey, IsLabelValue, IsDNS1123Subdomain)

const LABEL_KEY_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const LABEL_KEY_ERR: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const LABEL_VALUE_ERR: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_FMT: &str =
    "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1123_SUBDOMAIN_ERR: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const LABEL_MAX_LEN: usize = 63;
const DNS1123_SUBDOMAIN_MAX_LEN: usize = 253;

fn regex_error(msg: &str, re: &str, examples: &[&str]) -> String {
    let mut s = String::from(msg);
    if examples.is_empty() {
        s.push_str(" (regex used for validation is '");
    } else {
        s.push_str(" (e.g. ");
        for (i, e) in examples.iter().enumerate() {
            if i > 0 {
                s.push_str(" or ");
            }
            s.push('\'');
            s.push_str(e);
            s.push_str("', ");
        }
        s.push_str("regex used for validation is '");
    }
    s.push_str(re);
    s.push_str("')");
    s
}

fn max_len_error(n: usize) -> String {
    format!("must be no more than {n} bytes")
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]` anchored at both ends.
fn is_label_name(s: &str) -> bool {
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (Some(f), Some(l)) => {
            f.is_ascii_alphanumeric()
                && l.is_ascii_alphanumeric()
                && b.iter()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        }
        _ => false,
    }
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*` anchored at both ends.
fn is_dns1123_subdomain(s: &str) -> bool {
    s.split('.').all(|part| {
        let b = part.as_bytes();
        let edge = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
        match (b.first(), b.last()) {
            (Some(f), Some(l)) => edge(f) && edge(l) && b.iter().all(|c| edge(c) || *c == b'-'),
            _ => false,
        }
    })
}

fn dns1123_subdomain_errors(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > DNS1123_SUBDOMAIN_MAX_LEN {
        errs.push(max_len_error(DNS1123_SUBDOMAIN_MAX_LEN));
    }
    if !is_dns1123_subdomain(s) {
        errs.push(regex_error(
            DNS1123_SUBDOMAIN_ERR,
            DNS1123_SUBDOMAIN_FMT,
            &["example.com"],
        ));
    }
    errs
}

/// The messages of apimachinery's `content.IsLabelKey` (empty when the key is valid).
pub(crate) fn label_key_errors(key: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = key.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_owned());
            } else {
                errs.extend(
                    dns1123_subdomain_errors(prefix)
                        .into_iter()
                        .map(|m| format!("prefix part {m}")),
                );
            }
            *name
        }
        _ => {
            errs.push(format!(
                "a valid label key {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(LABEL_KEY_ERR, LABEL_KEY_FMT, &["MyName", "my.name", "123-abc"])
            ));
            return errs;
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_owned());
    } else if name.len() > LABEL_MAX_LEN {
        errs.push(format!("name part {}", max_len_error(LABEL_MAX_LEN)));
    }
    if !is_label_name(name) {
        errs.push(format!(
            "name part {}",
            regex_error(
                LABEL_KEY_ERR,
                LABEL_KEY_FMT,
                &["MyName", "my.name", "123-abc"]
            )
        ));
    }
    errs
}

/// The messages of apimachinery's `content.IsLabelValue` (empty when the value is valid).
pub(crate) fn label_value_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > LABEL_MAX_LEN {
        errs.push(max_len_error(LABEL_MAX_LEN));
    }
    if !value.is_empty() && !is_label_name(value) {
        errs.push(regex_error(
            LABEL_VALUE_ERR,
            LABEL_VALUE_FMT,
            &["MyValue", "my_value", "12345"],
        ));
    }
    errs
}

/// `field.Invalid(path, value, detail).Error()` for a string value.
fn invalid(path: &str, value: &str, detail: &str) -> String {
    format!("{path}: Invalid value: {}: {detail}", go_quote(value))
}

/// `field.Invalid(path, values, detail).Error()` for a `[]string` value (JSON-encoded as Go's
/// encoding/json does, which escapes `<`, `>`, `&`, U+2028 and U+2029).
fn invalid_list(path: &str, values: &[String], detail: &str) -> String {
    let json = serde_json::to_string(values).unwrap_or_else(|_| "null".to_owned());
    let json = json
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
        .replace('\u{2028}', "\\u2028")
        .replace('\u{2029}', "\\u2029");
    format!("{path}: Invalid value: {json}: {detail}")
}

/// Go's `strconv.ParseInt(s, 10, 64)`: optional sign, ASCII digits, in range. Rust's `i64`
/// parser accepts exactly the same strings.
fn go_parse_int(s: &str) -> Option<i64> {
    s.parse::<i64>().ok()
}

/// `errors.NewAggregate(errs).Error()` after `ErrorList.ToAggregate()` de-duplication.
fn aggregate(errs: Vec<String>) -> Result<(), String> {
    let mut unique: Vec<String> = Vec::with_capacity(errs.len());
    for e in errs {
        if !unique.contains(&e) {
            unique.push(e);
        }
    }
    match unique.len() {
        0 => Ok(()),
        1 => Err(unique.remove(0)),
        _ => Err(format!("[{}]", unique.join(", "))),
    }
}

/// apimachinery `NewRequirement` with an empty field path.
fn new_requirement(
    key: String,
    op: LabelOp,
    mut values: Vec<String>,
) -> Result<LabelRequirement, String> {
    let mut errs = Vec::new();
    let key_errs = label_key_errors(&key);
    if !key_errs.is_empty() {
        errs.push(invalid("key", &key, &key_errs.join("; ")));
    }
    match op {
        LabelOp::In | LabelOp::NotIn => {
            if values.is_empty() {
                errs.push(invalid_list(
                    "values",
                    &values,
                    "for 'in', 'notin' operators, values set can't be empty",
                ));
            }
        }
        LabelOp::Equals | LabelOp::DoubleEquals | LabelOp::NotEquals => {
            if values.len() != 1 {
                errs.push(invalid_list(
                    "values",
                    &values,
                    "exact-match compatibility requires one single value",
                ));
            }
        }
        LabelOp::Exists | LabelOp::DoesNotExist => {
            if !values.is_empty() {
                errs.push(invalid_list(
                    "values",
                    &values,
                    "values set must be empty for exists and does not exist",
                ));
            }
        }
        LabelOp::GreaterThan | LabelOp::LessThan => {
            if values.len() != 1 {
                errs.push(invalid_list(
                    "values",
                    &values,
                    "for 'Gt', 'Lt' operators, exactly one value is required",
                ));
            }
            for (i, v) in values.iter().enumerate() {
                if go_parse_int(v).is_none() {
                    errs.push(invalid(
                        &format!("values[{i}]"),
                        v,
                        "for 'Gt', 'Lt' operators, the value must be an integer",
                    ));
                }
            }
        }
    }
    for (i, v) in values.iter().enumerate() {
        let v_errs = label_value_errors(v);
        if !v_errs.is_empty() {
            errs.push(invalid(
                &format!("values[{i}][{key}]"),
                v,
                &v_errs.join("; "),
            ));
        }
    }
    aggregate(errs)?;
    values.sort();
    values.dedup();
    Ok(LabelRequirement { key, op, values })
}

// ---------------------------------------------------------------------------------------------
// Lexer and parser (apimachinery pkg/labels/selector.go)

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tok {
    EndOfString,
    ClosedPar,
    Comma,
    DoesNotExist,
    DoubleEquals,
    Equals,
    GreaterThan,
    Identifier,
    In,
    LessThan,
    NotEquals,
    NotIn,
    OpenPar,
}

fn keyword(s: &[u8]) -> Option<Tok> {
    Some(match s {
        b")" => Tok::ClosedPar,
        b"," => Tok::Comma,
        b"!" => Tok::DoesNotExist,
        b"==" => Tok::DoubleEquals,
        b"=" => Tok::Equals,
        b">" => Tok::GreaterThan,
        b"in" => Tok::In,
        b"<" => Tok::LessThan,
        b"!=" => Tok::NotEquals,
        b"notin" => Tok::NotIn,
        b"(" => Tok::OpenPar,
        _ => return None,
    })
}

fn is_whitespace(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\r' | b'\n')
}

fn is_special(c: u8) -> bool {
    matches!(c, b'=' | b'!' | b'(' | b')' | b',' | b'>' | b'<')
}

/// Byte lexer. As in Go, reading returns 0 both at the end of the input and for a NUL byte, so a
/// NUL ends the current token, and ends the whole input when it starts a token.
struct Lexer<'a> {
    s: &'a [u8],
    pos: usize,
}

impl Lexer<'_> {
    fn read(&mut self) -> u8 {
        match self.s.get(self.pos) {
            Some(&b) => {
                self.pos += 1;
                b
            }
            None => 0,
        }
    }

    fn unread(&mut self) {
        self.pos -= 1;
    }

    fn scan_id_or_keyword(&mut self) -> (Tok, String) {
        let mut buf = Vec::new();
        loop {
            let c = self.read();
            if c == 0 {
                break;
            }
            if is_special(c) || is_whitespace(c) {
                self.unread();
                break;
            }
            buf.push(c);
        }
        let tok = keyword(&buf).unwrap_or(Tok::Identifier);
        (tok, String::from_utf8_lossy(&buf).into_owned())
    }

    fn scan_special(&mut self) -> (Tok, String) {
        let mut buf = Vec::new();
        let mut last: Option<(Tok, usize)> = None;
        loop {
            let c = self.read();
            if c == 0 {
                break;
            }
            if !is_special(c) {
                self.unread();
                break;
            }
            buf.push(c);
            if let Some(t) = keyword(&buf) {
                last = Some((t, buf.len()));
            } else if last.is_some() {
                self.unread();
                break;
            }
        }
        // Every single special character is a token, so `last` is always set here.
        let (tok, len) = last.unwrap_or((Tok::EndOfString, 0));
        (tok, String::from_utf8_lossy(&buf[..len]).into_owned())
    }

    fn lex(&mut self) -> (Tok, String) {
        let mut c = self.read();
        while is_whitespace(c) {
            c = self.read();
        }
        if c == 0 {
            return (Tok::EndOfString, String::new());
        }
        self.unread();
        if is_special(c) {
            self.scan_special()
        } else {
            self.scan_id_or_keyword()
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Ctx {
    KeyAndOperator,
    Values,
}

const BINARY_OPERATORS: &str = "in, notin, =, ==, !=, gt, lt";

struct Parser {
    items: Vec<(Tok, String)>,
    pos: usize,
}

impl Parser {
    fn new(s: &str) -> Self {
        let mut lexer = Lexer {
            s: s.as_bytes(),
            pos: 0,
        };
        let mut items = Vec::new();
        loop {
            let item = lexer.lex();
            let end = item.0 == Tok::EndOfString;
            items.push(item);
            if end {
                break;
            }
        }
        Parser { items, pos: 0 }
    }

    fn item(&self, at: usize, ctx: Ctx) -> (Tok, String) {
        // Never past the end-of-string token (Go would index out of range instead; no grammar
        // path gets there).
        let (tok, lit) = &self.items[at.min(self.items.len() - 1)];
        let tok = match (ctx, tok) {
            (Ctx::Values, Tok::In | Tok::NotIn) => Tok::Identifier,
            _ => *tok,
        };
        (tok, lit.clone())
    }

    fn lookahead(&self, ctx: Ctx) -> (Tok, String) {
        self.item(self.pos, ctx)
    }

    fn consume(&mut self, ctx: Ctx) -> (Tok, String) {
        let it = self.item(self.pos, ctx);
        self.pos += 1;
        it
    }

    fn parse(&mut self) -> Result<Vec<LabelRequirement>, String> {
        let mut reqs = Vec::new();
        loop {
            let (tok, lit) = self.lookahead(Ctx::Values);
            match tok {
                Tok::Identifier | Tok::DoesNotExist => {
                    let r = self
                        .parse_requirement()
                        .map_err(|e| format!("unable to parse requirement: {e}"))?;
                    reqs.push(r);
                    let (t, l) = self.consume(Ctx::Values);
                    match t {
                        Tok::EndOfString => return Ok(reqs),
                        Tok::Comma => {
                            let (t2, l2) = self.lookahead(Ctx::Values);
                            if t2 != Tok::Identifier && t2 != Tok::DoesNotExist {
                                return Err(format!(
                                    "found '{l2}', expected: identifier after ','"
                                ));
                            }
                        }
                        _ => return Err(format!("found '{l}', expected: ',' or 'end of string'")),
                    }
                }
                Tok::EndOfString => return Ok(reqs),
                _ => {
                    return Err(format!(
                        "found '{lit}', expected: !, identifier, or 'end of string'"
                    ));
                }
            }
        }
    }

    fn parse_requirement(&mut self) -> Result<LabelRequirement, String> {
        let (key, op) = self.parse_key_and_infer_operator()?;
        if let Some(op @ (LabelOp::Exists | LabelOp::DoesNotExist)) = op {
            return new_requirement(key, op, Vec::new());
        }
        let op = self.parse_operator()?;
        let values = match op {
            LabelOp::In | LabelOp::NotIn => self.parse_values()?,
            _ => self.parse_exact_value()?,
        };
        new_requirement(key, op, values)
    }

    fn parse_key_and_infer_operator(&mut self) -> Result<(String, Option<LabelOp>), String> {
        let mut op = None;
        let (mut tok, mut lit) = self.consume(Ctx::Values);
        if tok == Tok::DoesNotExist {
            op = Some(LabelOp::DoesNotExist);
            (tok, lit) = self.consume(Ctx::Values);
        }
        if tok != Tok::Identifier {
            return Err(format!("found '{lit}', expected: identifier"));
        }
        let errs = label_key_errors(&lit);
        if !errs.is_empty() {
            return Err(invalid("<nil>", &lit, &errs.join("; ")));
        }
        let (next, _) = self.lookahead(Ctx::Values);
        if matches!(next, Tok::EndOfString | Tok::Comma) && op.is_none() {
            op = Some(LabelOp::Exists);
        }
        Ok((lit, op))
    }

    fn parse_operator(&mut self) -> Result<LabelOp, String> {
        let (tok, lit) = self.consume(Ctx::KeyAndOperator);
        Ok(match tok {
            Tok::In => LabelOp::In,
            Tok::Equals => LabelOp::Equals,
            Tok::DoubleEquals => LabelOp::DoubleEquals,
            Tok::GreaterThan => LabelOp::GreaterThan,
            Tok::LessThan => LabelOp::LessThan,
            Tok::NotIn => LabelOp::NotIn,
            Tok::NotEquals => LabelOp::NotEquals,
            _ => return Err(format!("found '{lit}', expected: {BINARY_OPERATORS}")),
        })
    }

    /// `( v1, v2, ... )`; returns the values sorted and de-duplicated (Go's `sets.String.List`).
    fn parse_values(&mut self) -> Result<Vec<String>, String> {
        let (tok, lit) = self.consume(Ctx::Values);
        if tok != Tok::OpenPar {
            return Err(format!("found '{lit}' expected: '('"));
        }
        let (tok, lit) = self.lookahead(Ctx::Values);
        match tok {
            Tok::Identifier | Tok::Comma => {
                let set = self.parse_identifiers_list()?;
                let (tok, _) = self.consume(Ctx::Values);
                if tok != Tok::ClosedPar {
                    return Err(format!("found '{lit}', expected: ')'"));
                }
                Ok(set_list(set))
            }
            Tok::ClosedPar => {
                self.consume(Ctx::Values);
                Ok(vec![String::new()])
            }
            _ => Err(format!("found '{lit}', expected: ',', ')' or identifier")),
        }
    }

    fn parse_identifiers_list(&mut self) -> Result<Vec<String>, String> {
        let mut set: Vec<String> = Vec::new();
        loop {
            let (tok, lit) = self.consume(Ctx::Values);
            match tok {
                Tok::Identifier => {
                    set.push(lit);
                    let (tok2, lit2) = self.lookahead(Ctx::Values);
                    match tok2 {
                        Tok::Comma => continue,
                        Tok::ClosedPar => return Ok(set),
                        _ => return Err(format!("found '{lit2}', expected: ',' or ')'")),
                    }
                }
                Tok::Comma => {
                    if set.is_empty() {
                        set.push(String::new()); // "(,"
                    }
                    let (tok2, _) = self.lookahead(Ctx::Values);
                    if tok2 == Tok::ClosedPar {
                        set.push(String::new()); // ",)"
                        return Ok(set);
                    }
                    if tok2 == Tok::Comma {
                        set.push(String::new()); // ",,"
                    }
                }
                _ => return Err(format!("found '{lit}', expected: ',', or identifier")),
            }
        }
    }

    fn parse_exact_value(&mut self) -> Result<Vec<String>, String> {
        let (tok, _) = self.lookahead(Ctx::Values);
        if matches!(tok, Tok::EndOfString | Tok::Comma) {
            return Ok(vec![String::new()]);
        }
        let (tok, lit) = self.consume(Ctx::Values);
        if tok == Tok::Identifier {
            Ok(vec![lit])
        } else {
            Err(format!("found '{lit}', expected: identifier"))
        }
    }
}

fn set_list(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v.dedup();
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const KEY_NAME_REGEX_MSG: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
    const VALUE_REGEX_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

    fn set(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn parse_ok(s: &str) -> LabelSelector {
        LabelSelector::parse(s).unwrap_or_else(|e| panic!("{s:?} should parse: {e}"))
    }

    fn parse_err(s: &str) -> String {
        match LabelSelector::parse(s) {
            Ok(sel) => panic!("{s:?} should not parse, got {sel:?}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn parse_and_canonical_string() {
        // (input, canonical String())
        let cases = [
            ("", ""),
            ("x=a,y=b,z=c", "x=a,y=b,z=c"),
            ("x!=a,y=b", "x!=a,y=b"),
            ("x=", "x="),
            ("x= ", "x="),
            ("x=,z= ", "x=,z="),
            ("x= ,z= ", "x=,z="),
            ("!x", "!x"),
            ("x>1", "x>1"),
            ("x>1,z<5", "x>1,z<5"),
            ("x=a,a=x", "a=x,x=a"),
            ("a=x,x=a", "a=x,x=a"),
            ("x==a", "x==a"),
            ("x in (b,a,b)", "x in (a,b)"),
            ("x in(a)", "x in (a)"),
            ("x notin ( b , a )", "x notin (a,b)"),
            ("x in ()", "x in ()"),
            ("x in (,)", "x in ()"),
            ("x in (,a)", "x in (,a)"),
            ("x in (a,)", "x in (,a)"),
            ("x in (a,,b)", "x in (,a,b)"),
            ("x in (a,,,b)", "x in (,a,b)"),
            ("x in (a,,)", "x in (,a)"),
            ("x in (in,notin)", "x in (in,notin)"),
            ("in=notin", "in=notin"),
            ("notin in (in)", "notin in (in)"),
            ("!in", "!in"),
            ("x,y", "x,y"),
            ("  x  ,\t!y\n,\rz=1 ", "x,!y,z=1"),
            ("example.com/key=v", "example.com/key=v"),
            ("a.b-c_d=v.1-2_3", "a.b-c_d=v.1-2_3"),
            ("x=a,x!=b", "x=a,x!=b"),
            ("x!=b,x=a", "x!=b,x=a"),
        ];
        for (input, want) in cases {
            let sel = parse_ok(input);
            assert_eq!(sel.to_string(), want, "canonical form of {input:?}");
            // The canonical form parses back to the same selector.
            assert_eq!(parse_ok(want), sel, "round trip of {input:?}");
        }
    }

    #[test]
    fn parse_errors_with_exact_messages() {
        let cases: &[(&str, &str)] = &[
            // TestSelectorParse bad strings
            (
                "x=a||y=b",
                &format!(
                    "unable to parse requirement: values[0][x]: Invalid value: \"a||y\": {VALUE_REGEX_MSG}"
                ),
            ),
            ("x==a==b", "found '==', expected: ',' or 'end of string'"),
            ("!x=a", "found '=', expected: ',' or 'end of string'"),
            (
                "x<a",
                "unable to parse requirement: values[0]: Invalid value: \"a\": for 'Gt', 'Lt' operators, the value must be an integer",
            ),
            // operator position
            (
                "x y",
                "unable to parse requirement: found 'y', expected: in, notin, =, ==, !=, gt, lt",
            ),
            (
                "x(",
                "unable to parse requirement: found '(', expected: in, notin, =, ==, !=, gt, lt",
            ),
            (
                "x!",
                "unable to parse requirement: found '!', expected: in, notin, =, ==, !=, gt, lt",
            ),
            (
                "x<=1",
                "unable to parse requirement: found '=', expected: identifier",
            ),
            (
                "x=(a)",
                "unable to parse requirement: found '(', expected: identifier",
            ),
            // set syntax
            (
                "x in a",
                "unable to parse requirement: found 'a' expected: '('",
            ),
            (
                "x in",
                "unable to parse requirement: found '' expected: '('",
            ),
            (
                "x in (",
                "unable to parse requirement: found '', expected: ',', ')' or identifier",
            ),
            (
                "x in (a",
                "unable to parse requirement: found '', expected: ',' or ')'",
            ),
            (
                "x in (a b)",
                "unable to parse requirement: found 'b', expected: ',' or ')'",
            ),
            (
                "x in (a,=)",
                "unable to parse requirement: found '=', expected: ',', or identifier",
            ),
            (
                "x in (=)",
                "unable to parse requirement: found '=', expected: ',', ')' or identifier",
            ),
            ("x in (a))", "found ')', expected: ',' or 'end of string'"),
            // separators
            (
                ",",
                "found ',', expected: !, identifier, or 'end of string'",
            ),
            ("x,", "found '', expected: identifier after ','"),
            ("x,,y", "found ',', expected: identifier after ','"),
            ("x=a,=b", "found '=', expected: identifier after ','"),
            (
                "=a",
                "found '=', expected: !, identifier, or 'end of string'",
            ),
            (
                "(x)",
                "found '(', expected: !, identifier, or 'end of string'",
            ),
            ("x=a y=b", "found 'y', expected: ',' or 'end of string'"),
            (
                "!",
                "unable to parse requirement: found '', expected: identifier",
            ),
            (
                "!!x",
                "unable to parse requirement: found '!', expected: identifier",
            ),
            (
                "!=x",
                "found '!=', expected: !, identifier, or 'end of string'",
            ),
            (
                "x>+5",
                &format!(
                    "unable to parse requirement: values[0][x]: Invalid value: \"+5\": {VALUE_REGEX_MSG}"
                ),
            ),
            ("!x y", "found 'y', expected: ',' or 'end of string'"),
            // key validation
            (
                "-x=a",
                &format!(
                    "unable to parse requirement: <nil>: Invalid value: \"-x\": {KEY_NAME_REGEX_MSG}"
                ),
            ),
            (
                "a/b/c",
                "unable to parse requirement: <nil>: Invalid value: \"a/b/c\": a valid label key must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
            ),
            (
                "/a",
                "unable to parse requirement: <nil>: Invalid value: \"/a\": prefix part must be non-empty",
            ),
            (
                "a/",
                &format!(
                    "unable to parse requirement: <nil>: Invalid value: \"a/\": name part must be non-empty; {KEY_NAME_REGEX_MSG}"
                ),
            ),
            (
                "Example.com/a",
                "unable to parse requirement: <nil>: Invalid value: \"Example.com/a\": prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
            ),
            (
                &format!("{}=v", "k".repeat(64)),
                &format!(
                    "unable to parse requirement: <nil>: Invalid value: \"{}\": name part must be no more than 63 bytes",
                    "k".repeat(64)
                ),
            ),
            (
                "kéy",
                &format!(
                    "unable to parse requirement: <nil>: Invalid value: \"kéy\": {KEY_NAME_REGEX_MSG}"
                ),
            ),
            (
                "k\"\\\u{1}",
                &format!(
                    "unable to parse requirement: <nil>: Invalid value: \"k\\\"\\\\\\x01\": {KEY_NAME_REGEX_MSG}"
                ),
            ),
            // value validation (path values[i][key], index into the sorted set)
            (
                "k in (ok,-bad)",
                &format!(
                    "unable to parse requirement: values[0][k]: Invalid value: \"-bad\": {VALUE_REGEX_MSG}"
                ),
            ),
            (
                "k in (-a,-b)",
                &format!(
                    "unable to parse requirement: [values[0][k]: Invalid value: \"-a\": {VALUE_REGEX_MSG}, values[1][k]: Invalid value: \"-b\": {VALUE_REGEX_MSG}]"
                ),
            ),
            (
                &format!("k={}", "v".repeat(64)),
                &format!(
                    "unable to parse requirement: values[0][k]: Invalid value: \"{}\": must be no more than 63 bytes",
                    "v".repeat(64)
                ),
            ),
            (
                &format!("k={}-", "v".repeat(63)),
                &format!(
                    "unable to parse requirement: values[0][k]: Invalid value: \"{}-\": must be no more than 63 bytes; {VALUE_REGEX_MSG}",
                    "v".repeat(63)
                ),
            ),
            // Gt/Lt: integer check then label value check, aggregated
            (
                "k>-1",
                &format!(
                    "unable to parse requirement: values[0][k]: Invalid value: \"-1\": {VALUE_REGEX_MSG}"
                ),
            ),
            (
                "k>a.",
                &format!(
                    "unable to parse requirement: [values[0]: Invalid value: \"a.\": for 'Gt', 'Lt' operators, the value must be an integer, values[0][k]: Invalid value: \"a.\": {VALUE_REGEX_MSG}]"
                ),
            ),
            (
                "k>",
                "unable to parse requirement: values[0]: Invalid value: \"\": for 'Gt', 'Lt' operators, the value must be an integer",
            ),
            (
                "k<99999999999999999999",
                "unable to parse requirement: values[0]: Invalid value: \"99999999999999999999\": for 'Gt', 'Lt' operators, the value must be an integer",
            ),
        ];
        for (input, want) in cases {
            assert_eq!(&parse_err(input), want, "error for {input:?}");
        }
    }

    #[test]
    fn nul_bytes_behave_like_go() {
        // A NUL starting a token ends the input; inside a token it only ends the token.
        assert!(parse_ok("\0x=garbage(").is_empty());
        assert_eq!(parse_ok("x=a \0 ,,,").to_string(), "x=a");
        assert_eq!(parse_ok("x\0=a").to_string(), "x=a");
        assert_eq!(
            parse_err("x\0y"),
            "unable to parse requirement: found 'y', expected: in, notin, =, ==, !=, gt, lt"
        );
    }

    #[test]
    fn matching() {
        let empty = set(&[]);
        let xy = set(&[("x", "y")]);
        let cases: &[(&str, &BTreeMap<String, String>, bool)] = &[
            ("", &xy, true),
            ("", &empty, true),
            ("x=y", &xy, true),
            ("x==y", &xy, true),
            ("x=z", &empty, false),
            ("x=y", &set(&[("x", "z")]), false),
            ("x=y,z=w", &set(&[("x", "y"), ("z", "w")]), true),
            ("x=y,z=w", &set(&[("x", "w"), ("z", "w")]), false),
            ("x!=y,z!=w", &set(&[("x", "z"), ("z", "a")]), true),
            ("x!=y,z!=w", &set(&[("x", "z"), ("z", "w")]), false),
            ("x!=y", &empty, true), // != matches a missing key
            ("x notin (a,b)", &empty, true),
            ("x notin (a,b)", &set(&[("x", "a")]), false),
            ("x notin (a,b)", &set(&[("x", "c")]), true),
            ("x in (a,b)", &empty, false),
            ("x in (a,b)", &set(&[("x", "b")]), true),
            ("x in (a,b)", &set(&[("x", "c")]), false),
            ("x in ()", &set(&[("x", "")]), true),
            ("x in ()", &empty, false),
            ("x=", &set(&[("x", "")]), true),
            ("x=", &empty, false),
            ("x!=", &empty, true),
            ("x!=", &set(&[("x", "")]), false),
            ("notin=in", &set(&[("notin", "in")]), true),
            ("x", &set(&[("x", "z")]), true),
            ("x", &set(&[("x", "")]), true),
            ("x", &set(&[("y", "z")]), false),
            ("!x", &set(&[("y", "z")]), true),
            ("!x", &set(&[("x", "")]), false),
            ("x>1", &set(&[("x", "2")]), true),
            ("x>1", &set(&[("x", "1")]), false),
            ("x>1", &set(&[("x", "0")]), false),
            ("x<1", &set(&[("x", "0")]), true),
            ("x<1", &set(&[("x", "-5")]), true),
            ("x<1", &set(&[("x", "2")]), false),
            ("x>1", &empty, false),
            ("x<1", &empty, false),
            ("x>1", &set(&[("x", "abc")]), false),
            ("x<1", &set(&[("x", "")]), false),
            ("x>1", &set(&[("x", "+7")]), true),
            ("x>1", &set(&[("x", "007")]), true),
            ("x<1", &set(&[("x", "-9223372036854775808")]), true),
            ("x>1", &set(&[("x", "9223372036854775808")]), false),
            ("x>1", &set(&[("x", " 5")]), false),
            (
                "foo=bar,baz=blah",
                &set(&[("foo", "bar"), ("baz", "blah")]),
                true,
            ),
            (
                "foo=bar,foobar=bar,baz=blah",
                &set(&[("foo", "bar"), ("baz", "blah")]),
                false,
            ),
        ];
        for (sel, labels, want) in cases {
            assert_eq!(
                parse_ok(sel).matches(*labels),
                *want,
                "{sel:?} vs {labels:?}"
            );
        }
    }

    #[test]
    fn labels_impls() {
        let sel = parse_ok("a=1,b notin (x),!c");
        let mut hm = HashMap::new();
        hm.insert("a".to_string(), "1".to_string());
        assert!(sel.matches(&hm));
        let json: serde_json::Value = serde_json::json!({"a": "1", "c": 5});
        // A non-string value counts as absent.
        assert!(sel.matches(json.as_object().unwrap()));
        let json: serde_json::Value = serde_json::json!({"a": "1", "c": "5"});
        assert!(!sel.matches(json.as_object().unwrap()));
        assert!(sel.matches(&[("a", "1"), ("b", "y")]));
        assert!(!sel.matches(&[("a", "1"), ("b", "x")]));
        assert!(sel.matches(&vec![("a".to_string(), "1".to_string())]));
        let pairs: &[(String, String)] = &[("a".into(), "2".into())];
        assert!(!sel.matches(pairs));
        assert!(LabelSelector::everything().matches(pairs));
    }

    #[test]
    fn requirements_and_exact_value() {
        let sel = parse_ok("z in (b,a),y==v,x=w,!q,p,o notin (k),n in (only)");
        let keys: Vec<_> = sel.requirements().iter().map(|r| r.key()).collect();
        assert_eq!(keys, ["n", "o", "p", "q", "x", "y", "z"]);
        let z = &sel.requirements()[6];
        assert_eq!(z.op(), LabelOp::In);
        assert_eq!(z.values(), ["a", "b"]);
        assert_eq!(sel.requirements()[3].op(), LabelOp::DoesNotExist);
        assert_eq!(sel.requirements()[2].op(), LabelOp::Exists);
        assert!(sel.requirements()[2].values().is_empty());
        assert_eq!(sel.exact_value("x"), Some("w"));
        assert_eq!(sel.exact_value("y"), Some("v"));
        assert_eq!(sel.exact_value("n"), Some("only"));
        assert_eq!(sel.exact_value("z"), None);
        assert_eq!(sel.exact_value("o"), None);
        assert_eq!(sel.exact_value("p"), None);
        assert_eq!(sel.exact_value("missing"), None);
        assert_eq!(parse_ok("x!=a,x=b").exact_value("x"), Some("b"));
        assert!(LabelSelector::everything().is_empty());
        assert!(parse_ok("").is_empty());
        assert!(!sel.is_empty());
        assert_eq!(LabelOp::GreaterThan.as_str(), "gt");
    }

    #[test]
    fn constructors() {
        let r = LabelRequirement::new("k", LabelOp::In, vec!["b".into(), "a".into(), "b".into()])
            .unwrap();
        assert_eq!(r.values(), ["a", "b"]);
        assert_eq!(r.to_string(), "k in (a,b)");
        let sel = LabelSelector::everything()
            .with(r)
            .with(LabelRequirement::new("a", LabelOp::Exists, vec![]).unwrap());
        assert_eq!(sel.to_string(), "a,k in (a,b)");
        assert_eq!(
            LabelSelector::from_set([("b", "2"), ("a", "1")]).to_string(),
            "a=1,b=2"
        );
        assert_eq!(
            LabelRequirement::new("k", LabelOp::In, vec![])
                .unwrap_err()
                .to_string(),
            "values: Invalid value: []: for 'in', 'notin' operators, values set can't be empty"
        );
        assert_eq!(
            LabelRequirement::new("k", LabelOp::Equals, vec!["a".into(), "<b>".into()])
                .unwrap_err()
                .to_string(),
            format!(
                "[values: Invalid value: [\"a\",\"\\u003cb\\u003e\"]: exact-match compatibility requires one single value, values[1][k]: Invalid value: \"<b>\": {VALUE_REGEX_MSG}]"
            )
        );
        assert_eq!(
            LabelRequirement::new("k", LabelOp::Exists, vec!["a".into()])
                .unwrap_err()
                .to_string(),
            "values: Invalid value: [\"a\"]: values set must be empty for exists and does not exist"
        );
        assert_eq!(
            LabelRequirement::new("k", LabelOp::LessThan, vec![])
                .unwrap_err()
                .to_string(),
            "values: Invalid value: []: for 'Gt', 'Lt' operators, exactly one value is required"
        );
        assert_eq!(
            LabelRequirement::new("", LabelOp::Exists, vec![])
                .unwrap_err()
                .to_string(),
            format!("key: Invalid value: \"\": name part must be non-empty; {KEY_NAME_REGEX_MSG}")
        );
    }

    // ---- property tests ----

    fn key_strategy() -> impl Strategy<Value = String> {
        let name = "[A-Za-z0-9]([-A-Za-z0-9_.]{0,10}[A-Za-z0-9])?";
        let prefix = "[a-z0-9]([-a-z0-9]{0,4}[a-z0-9])?(\\.[a-z0-9]{1,4}){0,2}";
        prop_oneof![
            3 => name.prop_map(String::from),
            1 => (prefix, name).prop_map(|(p, n)| format!("{p}/{n}")),
            // a small pool so that random label sets hit the selector's keys
            4 => prop::sample::select(vec!["a", "b", "c", "in", "notin", "app.kubernetes.io/name"])
                .prop_map(String::from),
        ]
    }

    fn value_strategy() -> impl Strategy<Value = String> {
        prop_oneof![
            2 => prop::sample::select(vec!["", "x", "y", "1", "42", "-3", "in"]).prop_map(String::from),
            1 => "([A-Za-z0-9]([-A-Za-z0-9_.]{0,6}[A-Za-z0-9])?)?".prop_map(String::from),
        ]
    }

    fn requirement_strategy() -> impl Strategy<Value = LabelRequirement> {
        let int = prop_oneof![
            Just("0".to_string()),
            (0i64..1000).prop_map(|n| n.to_string())
        ];
        (
            key_strategy(),
            0usize..9,
            prop::collection::vec(value_strategy(), 1..4),
            int,
        )
            .prop_filter_map("valid requirement", |(key, op, vals, n)| {
                let (op, vals) = match op {
                    0 => (LabelOp::In, vals),
                    1 => (LabelOp::NotIn, vals),
                    2 => (LabelOp::Equals, vals[..1].to_vec()),
                    3 => (LabelOp::DoubleEquals, vals[..1].to_vec()),
                    4 => (LabelOp::NotEquals, vals[..1].to_vec()),
                    5 => (LabelOp::Exists, vec![]),
                    6 => (LabelOp::DoesNotExist, vec![]),
                    7 => (LabelOp::GreaterThan, vec![n]),
                    _ => (LabelOp::LessThan, vec![n]),
                };
                LabelRequirement::new(key, op, vals).ok()
            })
    }

    fn label_set_strategy() -> impl Strategy<Value = BTreeMap<String, String>> {
        prop::collection::btree_map(key_strategy(), value_strategy(), 0..6)
    }

    /// Reference semantics written independently of the implementation.
    fn reference_match(sel: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
        sel.requirements().iter().all(|r| {
            let v = labels.get(r.key()).map(String::as_str);
            let vals = r.values();
            match r.op() {
                LabelOp::Equals | LabelOp::DoubleEquals | LabelOp::In => {
                    v.is_some_and(|v| vals.iter().any(|x| x == v))
                }
                LabelOp::NotEquals | LabelOp::NotIn => {
                    !v.is_some_and(|v| vals.iter().any(|x| x == v))
                }
                LabelOp::Exists => v.is_some(),
                LabelOp::DoesNotExist => v.is_none(),
                LabelOp::GreaterThan => match (
                    v.and_then(|v| v.parse::<i64>().ok()),
                    vals[0].parse::<i64>(),
                ) {
                    (Some(a), Ok(b)) => a > b,
                    _ => false,
                },
                LabelOp::LessThan => match (
                    v.and_then(|v| v.parse::<i64>().ok()),
                    vals[0].parse::<i64>(),
                ) {
                    (Some(a), Ok(b)) => a < b,
                    _ => false,
                },
            }
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

        #[test]
        fn random_strings_never_panic(s in "\\PC{0,40}") {
            let _ = LabelSelector::parse(&s);
        }

        #[test]
        fn random_selector_alphabet_never_panics(s in "[a-z0-9 !=<>(),./\\-_\t\n\0é]{0,40}") {
            if let Ok(sel) = LabelSelector::parse(&s) {
                // Whatever parses has a canonical form that parses to the same selector.
                let again = LabelSelector::parse(&sel.to_string()).unwrap();
                prop_assert_eq!(again, sel);
            }
        }

        #[test]
        fn display_parse_round_trip(
            reqs in prop::collection::vec(requirement_strategy(), 0..6),
            sets in prop::collection::vec(label_set_strategy(), 1..8),
        ) {
            let sel = LabelSelector::from_requirements(reqs);
            let text = sel.to_string();
            let parsed = LabelSelector::parse(&text).unwrap();
            prop_assert_eq!(&parsed, &sel, "text {}", text);
            prop_assert_eq!(parsed.to_string(), text);
            for labels in &sets {
                prop_assert_eq!(parsed.matches(labels), sel.matches(labels));
                prop_assert_eq!(sel.matches(labels), reference_match(&sel, labels));
            }
        }

        #[test]
        fn whitespace_is_insignificant_between_tokens(
            reqs in prop::collection::vec(requirement_strategy(), 1..5),
            ws in prop::sample::select(vec![" ", "\t", "\n", "\r", "  "]),
        ) {
            let sel = LabelSelector::from_requirements(reqs);
            let spaced: String = sel
                .requirements()
                .iter()
                .map(|r| {
                    let s = r.to_string();
                    let s = s.replace(" in (", &format!("{ws}in{ws}({ws}"))
                        .replace(" notin (", &format!("{ws}notin{ws}({ws}"))
                        .replace(')', &format!("{ws})"));
                    format!("{ws}{s}{ws}")
                })
                .collect::<Vec<_>>()
                .join(",");
            prop_assert_eq!(LabelSelector::parse(&spaced).unwrap(), sel);
        }
    }
}
