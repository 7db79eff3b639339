//! The JSONPath of client-go's `util/jsonpath`, as far as a CRD's `additionalPrinterColumns`
//! use it: kube-apiserver wraps each column's `jsonPath` in `{…}`, parses it with that package
//! and evaluates it with missing keys allowed. [`JsonPath`] parses the same text and evaluates it
//! with the same results, errors included, on a `serde_json::Value` as stored (v1 JSON).
//!
//! Supported: field access (`.a.b`, escaped characters `a\.b`, `['key']`), the wildcard `.*`,
//! array indexes and slices with kube's quirks (`[0]`, `[-1]`, `[1:3]`, `[::2]`, `[*]`), and
//! filters (`[?(@.type=="Ready")]`, the six comparison operators and the existence test), nested
//! as deep as they come. Not supported, and reported as [`ParseError::Unsupported`] so that a
//! caller can leave such a column to kube: recursive descent (`..`), unions (`[a,b]`),
//! `range`/`end`, literals outside a filter, and text around the expression. A wildcard over a
//! string (Go iterates its bytes) finds nothing here.
//!
//! Evaluation follows kube's reflection walk: a missing key, or a field of something that is no
//! object, finds nothing; indexing something that is no array, an index out of bounds, and a
//! comparison of values of different kinds (a number with a string, an integer with a float) are
//! errors, which a printer column shows as an empty (`null`) cell. Numbers are Go's decoded JSON:
//! `int64` when the literal is an integer that fits, else `float64`.
//!
//! Pure: no I/O. Printing a found value as text is [`print_text`]; turning it into a Table cell
//! by the column's type is [`crate::table`]'s.

use std::borrow::Cow;
use std::cmp::Ordering;

use serde_json::{Map, Value};

/// Why a JSONPath expression was not parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// client-go's parser rejects it too.
    #[error("invalid JSONPath {expr:?}: {reason}")]
    Invalid {
        /// The expression.
        expr: String,
        /// What is wrong.
        reason: String,
    },
    /// Valid for client-go, but outside the subset implemented here (see the module doc).
    #[error("JSONPath {expr:?} uses {what}, which is not supported")]
    Unsupported {
        /// The expression.
        expr: String,
        /// The construct.
        what: String,
    },
}

/// Why evaluating a parsed expression failed (kube's `FindResults` error).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct EvalError(String);

/// A parsed expression: the steps applied in order to the values found so far.
#[derive(Debug, Clone, PartialEq)]
pub struct JsonPath {
    steps: Vec<Step>,
}

#[derive(Debug, Clone, PartialEq)]
enum Step {
    /// `.name`: the member of each object.
    Field(String),
    /// `.*`: every member value or element.
    Wildcard,
    /// `[start:end:step]` with client-go's `ParamsEntry` rules.
    Slice([Param; 3]),
    /// `[?(left op right)]`, or `[?(left)]` (exists).
    Filter {
        left: Vec<Step>,
        op: String,
        right: Vec<Step>,
    },
    /// A literal in a filter operand: replaces each value found so far.
    Literal(Literal),
    /// A quoted string in a filter operand: one value, whatever was found so far.
    Text(String),
}

#[derive(Debug, Clone, PartialEq)]
enum Literal {
    Int(i64),
    Float(f64),
    Bool(bool),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Param {
    value: i64,
    known: bool,
    derived: bool,
}

impl JsonPath {
    /// Parses a column's `jsonPath` (e.g. `.status.conditions[?(@.type=="Ready")].status`), as
    /// kube does after wrapping it in `{…}`.
    pub fn parse(expr: &str) -> Result<JsonPath, ParseError> {
        let mut p = Parser {
            expr,
            input: expr.as_bytes(),
            pos: 0,
        };
        let steps = p.action(false)?;
        if p.pos < p.input.len() {
            return Err(p.unsupported("text after the expression"));
        }
        Ok(JsonPath { steps })
    }

    /// Every value the expression finds in `data`, in kube's order (a printer column shows the
    /// first), or kube's evaluation error.
    pub fn find<'a>(&self, data: &'a Value) -> Result<Vec<Cow<'a, Value>>, EvalError> {
        eval(&self.steps, vec![Cow::Borrowed(data)])
    }
}

// ---------------------------------------------------------------------------------------------
// Parsing: client-go's `parser.go`, one action (`{…}`) whose text is the expression.

struct Parser<'e> {
    expr: &'e str,
    input: &'e [u8],
    pos: usize,
}

fn is_terminator(c: u8) -> bool {
    matches!(
        c,
        b' ' | b'\t' | b'\r' | b'\n' | b'.' | b',' | b'[' | b']' | b'$' | b'@' | b'{' | b'}'
    )
}

impl Parser<'_> {
    fn invalid(&self, reason: impl Into<String>) -> ParseError {
        ParseError::Invalid {
            expr: self.expr.to_string(),
            reason: reason.into(),
        }
    }

    fn unsupported(&self, what: impl Into<String>) -> ParseError {
        ParseError::Unsupported {
            expr: self.expr.to_string(),
            what: what.into(),
        }
    }

    fn rest(&self) -> &[u8] {
        &self.input[self.pos..]
    }

    /// `parseInsideAction` until the end of the input (the action's closing brace). Literals
    /// are allowed only in filter operands (`operand`).
    fn action(&mut self, operand: bool) -> Result<Vec<Step>, ParseError> {
        let mut steps = Vec::new();
        loop {
            let rest = self.rest();
            if rest.is_empty() {
                return Ok(steps);
            }
            if rest.starts_with(b"}") {
                return Err(self.unsupported("text after the expression"));
            }
            if rest.starts_with(b"[?(") {
                steps.push(self.filter()?);
                continue;
            }
            if rest.starts_with(b"..") {
                return Err(self.unsupported("recursive descent (..)"));
            }
            let c = rest[0];
            match c {
                b'\r' | b'\n' => return Err(self.invalid("unclosed action")),
                b' ' | b'@' | b'$' => self.pos += 1,
                b'[' => {
                    self.pos += 1;
                    self.array(&mut steps)?;
                }
                b'"' | b'\'' if operand => {
                    self.pos += 1;
                    steps.push(Step::Text(self.quoted(c)?));
                }
                b'.' => {
                    self.pos += 1;
                    steps.push(self.field());
                }
                b'+' | b'-' | b'0'..=b'9' if operand => steps.push(self.number()?),
                _ if operand && (c == b'_' || c.is_ascii_alphanumeric()) => {
                    let start = self.pos;
                    while self.pos < self.input.len() && !is_terminator(self.input[self.pos]) {
                        self.pos += 1;
                    }
                    match &self.expr[start..self.pos] {
                        "true" => steps.push(Step::Literal(Literal::Bool(true))),
                        "false" => steps.push(Step::Literal(Literal::Bool(false))),
                        other => return Err(self.unsupported(format!("identifier {other:?}"))),
                    }
                }
                b'"' | b'\'' | b'+' | b'-' | b'0'..=b'9' => {
                    return Err(self.unsupported("a literal outside a filter"));
                }
                _ if c == b'_' || c.is_ascii_alphanumeric() || c >= 0x80 => {
                    return Err(self.unsupported("an identifier (range, end)"));
                }
                _ => {
                    return Err(self.invalid(format!(
                        "unrecognized character in action: {:?}",
                        self.expr[self.pos..].chars().next().unwrap_or(' ')
                    )));
                }
            }
        }
    }

    /// `parseField`: up to the next unescaped terminator; `*` is the wildcard.
    fn field(&mut self) -> Step {
        let start = self.pos;
        while self.pos < self.input.len() {
            let c = self.input[self.pos];
            if c == b'\\' {
                self.pos = (self.pos + 2).min(self.input.len());
                // Keep `pos` on a character boundary after an escaped multi-byte character.
                while !self.expr.is_char_boundary(self.pos) {
                    self.pos += 1;
                }
                continue;
            }
            if is_terminator(c) {
                break;
            }
            self.pos += 1;
        }
        let value = &self.expr[start..self.pos];
        if value == "*" {
            Step::Wildcard
        } else {
            Step::Field(value.replace('\\', ""))
        }
    }

    /// `parseArray` (after `[`): a dict key, a union, or an index/slice.
    fn array(&mut self, steps: &mut Vec<Step>) -> Result<(), ParseError> {
        let start = self.pos;
        loop {
            match self.input.get(self.pos) {
                None | Some(b'\n') => return Err(self.invalid("unterminated array")),
                Some(b']') => break,
                Some(_) => self.pos += 1,
            }
        }
        let mut text = &self.expr[start..self.pos];
        self.pos += 1;
        if text == "*" {
            text = ":";
        }
        if text.contains(',') {
            return Err(self.unsupported("a union ([a,b])"));
        }
        if let Some(key) = text
            .strip_prefix('\'')
            .and_then(|t| t.strip_suffix('\''))
            .filter(|k| !k.contains('\''))
        {
            // kube parses `['key']` as `.key` (so dots in the key still separate fields).
            let sub = format!(".{key}");
            let mut p = Parser {
                expr: &sub,
                input: sub.as_bytes(),
                pos: 0,
            };
            let nested = p.action(false).map_err(|e| match e {
                ParseError::Invalid { reason, .. } => self.invalid(reason),
                ParseError::Unsupported { what, .. } => self.unsupported(what),
            })?;
            steps.extend(nested);
            return Ok(());
        }
        steps.push(Step::Slice(self.slice(text)?));
        Ok(())
    }

    /// `sliceOperatorRex` `^(-?[\d]*)(:-?[\d]*)?(:-?[\d]*)?$` and the `ParamsEntry` it yields.
    fn slice(&self, text: &str) -> Result<[Param; 3], ParseError> {
        let bad = || self.invalid(format!("invalid array index {text}"));
        let mut parts = text.splitn(3, ':');
        let first = parts.next().unwrap_or("");
        let groups = [Some(first), parts.next(), parts.next()];
        for g in groups.iter().flatten() {
            let digits = g.strip_prefix('-').unwrap_or(g);
            if !digits.bytes().all(|b| b.is_ascii_digit()) {
                return Err(bad());
            }
        }
        let mut params = [Param::default(); 3];
        for (i, g) in groups.iter().enumerate() {
            match g {
                // Present (for i > 0, after its colon).
                Some(v) if i == 0 && !v.is_empty() || i > 0 && g.is_some() => {
                    let v = v.to_string();
                    if i > 0 && v.is_empty() {
                        params[i].known = false;
                    } else {
                        params[i].known = true;
                        params[i].value = v.parse::<i64>().map_err(|_| {
                            self.invalid(format!("array index {v} is not a number"))
                        })?;
                    }
                }
                _ => {
                    if i == 1 {
                        params[1] = Param {
                            value: params[0].value + 1,
                            known: true,
                            derived: true,
                        };
                    } else {
                        params[i] = Param::default();
                    }
                }
            }
        }
        Ok(params)
    }

    /// `parseFilter` (at `[?(`): up to the `)` outside the first quoted string, then `]`.
    fn filter(&mut self) -> Result<Step, ParseError> {
        self.pos += 3;
        let start = self.pos;
        let (mut begin, mut end) = (false, false);
        let mut pair = 0u8;
        loop {
            let Some(&c) = self.input.get(self.pos) else {
                return Err(self.invalid("unterminated filter"));
            };
            self.pos += 1;
            match c {
                b'\n' => return Err(self.invalid("unterminated filter")),
                b'"' | b'\'' => {
                    if !begin {
                        begin = true;
                        pair = c;
                        continue;
                    }
                    if self.input[self.pos - 2] != b'\\' && c == pair {
                        end = true;
                    }
                }
                b')' if begin == end => break,
                _ => {}
            }
        }
        if self.input.get(self.pos) != Some(&b']') {
            return Err(self.invalid("unclosed array expect ]"));
        }
        self.pos += 1;
        let text = &self.expr[start..self.pos - 2];
        let sub = |t: &str| -> Result<Vec<Step>, ParseError> {
            let mut p = Parser {
                expr: t,
                input: t.as_bytes(),
                pos: 0,
            };
            p.action(true).map_err(|e| match e {
                ParseError::Invalid { reason, .. } => self.invalid(reason),
                ParseError::Unsupported { what, .. } => self.unsupported(what),
            })
        };
        // `^([^!<>=]+)([!<>=]+)(.+?)$`
        let is_op = |c: char| matches!(c, '!' | '<' | '>' | '=');
        let split = text.find(is_op).filter(|&i| i > 0).and_then(|i| {
            let op_len = text[i..].find(|c| !is_op(c))?;
            Some((i, i + op_len))
        });
        match split {
            Some((i, j)) => Ok(Step::Filter {
                left: sub(&text[..i])?,
                op: text[i..j].to_string(),
                right: sub(&text[j..])?,
            }),
            None => Ok(Step::Filter {
                left: sub(text)?,
                op: "exists".into(),
                right: Vec::new(),
            }),
        }
    }

    /// `parseQuote` (after the opening quote) and `UnquoteExtend`.
    fn quoted(&mut self, q: u8) -> Result<String, ParseError> {
        let start = self.pos - 1;
        loop {
            match self.input.get(self.pos) {
                None | Some(b'\n') => return Err(self.invalid("unterminated quoted string")),
                Some(&c) => {
                    self.pos += 1;
                    if c == q && self.input[self.pos - 2] != b'\\' {
                        break;
                    }
                }
            }
        }
        let inner = &self.expr[start + 1..self.pos - 1];
        if !inner.contains('\\') {
            return Ok(inner.to_string());
        }
        unquote(inner).ok_or_else(|| self.invalid(format!("unquote string {inner} error")))
    }

    /// `parseNumber`: an `Int` if Go's `Atoi` takes it, else a `Float`.
    fn number(&mut self) -> Result<Step, ParseError> {
        let start = self.pos;
        if matches!(self.input.get(self.pos), Some(b'+' | b'-')) {
            self.pos += 1;
        }
        while matches!(self.input.get(self.pos), Some(b'.' | b'0'..=b'9')) {
            self.pos += 1;
        }
        let text = &self.expr[start..self.pos];
        if let Ok(i) = text.parse::<i64>() {
            return Ok(Step::Literal(Literal::Int(i)));
        }
        let digits = text.trim_start_matches(['+', '-']);
        if !digits.is_empty()
            && digits != "."
            && let Ok(f) = text.parse::<f64>()
        {
            return Ok(Step::Literal(Literal::Float(f)));
        }
        Err(self.invalid(format!("cannot parse number {text}")))
    }
}

/// The common escapes of Go's `strconv.UnquoteChar` inside a quoted filter operand.
fn unquote(s: &str) -> Option<String> {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        out.push(match chars.next()? {
            'n' => '\n',
            't' => '\t',
            'r' => '\r',
            '\\' => '\\',
            '\'' => '\'',
            '"' => '"',
            'a' => '\u{7}',
            'b' => '\u{8}',
            'f' => '\u{c}',
            'v' => '\u{b}',
            'u' => {
                let hex: String = chars.by_ref().take(4).collect();
                char::from_u32(u32::from_str_radix(&hex, 16).ok()?)?
            }
            _ => return None,
        });
    }
    Some(out)
}

// ---------------------------------------------------------------------------------------------
// Evaluation: client-go's `jsonpath.go` walk over Go's decoded JSON.

fn err(msg: impl Into<String>) -> EvalError {
    EvalError(msg.into())
}

fn eval<'a>(
    steps: &[Step],
    mut cur: Vec<Cow<'a, Value>>,
) -> Result<Vec<Cow<'a, Value>>, EvalError> {
    for step in steps {
        cur = eval_step(step, cur)?;
    }
    Ok(cur)
}

/// A child of `parent`, borrowed from the data when the parent is.
fn child<'a>(
    parent: &Cow<'a, Value>,
    get: impl Fn(&Value) -> Option<&Value>,
) -> Option<Cow<'a, Value>> {
    match parent {
        Cow::Borrowed(v) => get(v).map(Cow::Borrowed),
        Cow::Owned(v) => get(v).cloned().map(Cow::Owned),
    }
}

fn children<'a>(parent: &Cow<'a, Value>) -> Vec<Cow<'a, Value>> {
    match parent {
        Cow::Borrowed(Value::Object(m)) => m.values().map(Cow::Borrowed).collect(),
        Cow::Borrowed(Value::Array(a)) => a.iter().map(Cow::Borrowed).collect(),
        Cow::Owned(Value::Object(m)) => m.values().cloned().map(Cow::Owned).collect(),
        Cow::Owned(Value::Array(a)) => a.iter().cloned().map(Cow::Owned).collect(),
        _ => Vec::new(),
    }
}

fn eval_step<'a>(
    step: &Step,
    input: Vec<Cow<'a, Value>>,
) -> Result<Vec<Cow<'a, Value>>, EvalError> {
    match step {
        Step::Field(name) => Ok(input
            .iter()
            .filter_map(|v| child(v, |v| v.as_object().and_then(|m| m.get(name))))
            .collect()),
        Step::Wildcard => Ok(input.iter().flat_map(children).collect()),
        Step::Slice(params) => slice(params, input),
        Step::Filter { left, op, right } => filter(left, op, right, input),
        Step::Literal(l) => {
            let v = match l {
                Literal::Int(i) => Value::from(*i),
                Literal::Float(f) => Value::from(*f),
                Literal::Bool(b) => Value::Bool(*b),
            };
            Ok(input.iter().map(|_| Cow::Owned(v.clone())).collect())
        }
        Step::Text(s) => Ok(vec![Cow::Owned(Value::String(s.clone()))]),
    }
}

/// `evalArray`, with its bounds errors and its early return for an empty selection.
fn slice<'a>(
    params: &[Param; 3],
    input: Vec<Cow<'a, Value>>,
) -> Result<Vec<Cow<'a, Value>>, EvalError> {
    let mut result = Vec::new();
    for value in &input {
        let len = match value.as_ref() {
            Value::Null => continue,
            Value::Array(a) => a.len() as i64,
            other => {
                return Err(err(format!(
                    "{} is not array or slice",
                    crate::gofmt::go_type(other)
                )));
            }
        };
        let mut p = *params;
        if !p[0].known {
            p[0].value = 0;
        }
        if p[0].value < 0 {
            p[0].value += len;
        }
        if !p[1].known {
            p[1].value = len;
        }
        if p[1].value < 0 || (p[1].value == 0 && p[1].derived) {
            p[1].value += len;
        }
        if p[1].value == p[0].value {
            return Ok(result);
        }
        if p[0].value >= len || p[0].value < 0 {
            return Err(err(format!(
                "array index out of bounds: index {}, length {len}",
                p[0].value
            )));
        }
        if p[1].value > len || p[1].value < 0 {
            return Err(err(format!(
                "array index out of bounds: index {}, length {len}",
                p[1].value - 1
            )));
        }
        if p[0].value > p[1].value {
            return Err(err(format!(
                "starting index {} is greater than ending index {}",
                p[0].value, p[1].value
            )));
        }
        let step = if p[2].known {
            if p[2].value <= 0 {
                return Err(err("step must be > 0"));
            }
            p[2].value as usize
        } else {
            1
        };
        let (from, to) = (p[0].value as usize, p[1].value as usize);
        for i in (from..to).step_by(step) {
            if let Some(c) = child(value, |v| v.as_array().and_then(|a| a.get(i))) {
                result.push(c);
            }
        }
    }
    Ok(result)
}

/// `evalFilter`: the elements of each array for which `left op right` holds.
fn filter<'a>(
    left: &[Step],
    op: &str,
    right: &[Step],
    input: Vec<Cow<'a, Value>>,
) -> Result<Vec<Cow<'a, Value>>, EvalError> {
    let mut results = Vec::new();
    for value in &input {
        let Value::Array(items) = value.as_ref() else {
            return Err(err(format!(
                "{} is not array or slice and cannot be filtered",
                crate::gofmt::go_type(value)
            )));
        };
        for i in 0..items.len() {
            let Some(item) = child(value, |v| v.as_array().and_then(|a| a.get(i))) else {
                continue;
            };
            let lefts = eval(left, vec![item.clone()]);
            if op == "exists" {
                if lefts.as_ref().is_ok_and(|l| !l.is_empty()) {
                    results.push(item);
                }
                continue;
            }
            let lefts = lefts?;
            let l = match lefts.len() {
                0 => continue,
                1 => &lefts[0],
                _ => return Err(err("can only compare one element at a time")),
            };
            let rights = eval(right, vec![item.clone()])?;
            let r = match rights.len() {
                0 => continue,
                1 => &rights[0],
                _ => return Err(err("can only compare one element at a time")),
            };
            let pass = match op {
                "<" => less(l, r)?,
                ">" => !less_equal(l, r)?,
                "==" => equal(l, r)?,
                "!=" => !equal(l, r)?,
                "<=" => less_equal(l, r)?,
                ">=" => !less(l, r)?,
                other => return Err(err(format!("unrecognized filter operator {other}"))),
            };
            if pass {
                results.push(item);
            }
        }
    }
    Ok(results)
}

/// A value's kind for text/template's comparisons.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Basic<'v> {
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(&'v str),
}

fn basic(v: &Value) -> Result<Basic<'_>, EvalError> {
    match v {
        Value::Bool(b) => Ok(Basic::Bool(*b)),
        Value::String(s) => Ok(Basic::Str(s)),
        Value::Number(n) => match n.as_i64() {
            Some(i) => Ok(Basic::Int(i)),
            None => Ok(Basic::Float(n.as_f64().unwrap_or(f64::NAN))),
        },
        _ => Err(err("invalid type for comparison")),
    }
}

fn incompatible() -> EvalError {
    err("incompatible types for comparison")
}

fn equal(a: &Value, b: &Value) -> Result<bool, EvalError> {
    Ok(match (basic(a)?, basic(b)?) {
        (Basic::Bool(x), Basic::Bool(y)) => x == y,
        (Basic::Int(x), Basic::Int(y)) => x == y,
        (Basic::Float(x), Basic::Float(y)) => x == y,
        (Basic::Str(x), Basic::Str(y)) => x == y,
        _ => return Err(incompatible()),
    })
}

fn less(a: &Value, b: &Value) -> Result<bool, EvalError> {
    let ord = match (basic(a)?, basic(b)?) {
        (Basic::Bool(_), Basic::Bool(_)) => return Err(err("invalid type for comparison")),
        (Basic::Int(x), Basic::Int(y)) => x.cmp(&y),
        (Basic::Float(x), Basic::Float(y)) => return Ok(x < y),
        (Basic::Str(x), Basic::Str(y)) => x.cmp(y),
        _ => return Err(incompatible()),
    };
    Ok(ord == Ordering::Less)
}

fn less_equal(a: &Value, b: &Value) -> Result<bool, EvalError> {
    if less(a, b)? {
        return Ok(true);
    }
    equal(a, b)
}

// ---------------------------------------------------------------------------------------------
// Printing: `PrintResults` of one value.

/// One found value as kube's `PrintResults` prints it (what a `string` printer column shows):
/// objects and arrays as compact JSON with sorted keys (Go's `json.Marshal` of a map), strings
/// as they are, numbers and booleans as Go's `fmt.Print` does, `null` as `<no value>`.
pub fn print_text(v: &Value) -> String {
    match v {
        Value::Null => "<no value>".to_string(),
        Value::Bool(b) => b.to_string(),
        Value::String(s) => s.clone(),
        Value::Number(n) => match n.as_i64() {
            Some(i) => i.to_string(),
            None => go_print_float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::Object(_) | Value::Array(_) => {
            String::from_utf8_lossy(&crate::table::to_go_json(&sorted(v))).into_owned()
        }
    }
}

/// A copy of `v` with every object's members in key order (Go marshals maps sorted).
fn sorted(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let mut out = Map::with_capacity(m.len());
            for k in keys {
                out.insert(k.clone(), sorted(&m[k.as_str()]));
            }
            Value::Object(out)
        }
        Value::Array(a) => Value::Array(a.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

/// Go's `%v` of a `float64` (`strconv.FormatFloat(f, 'g', -1, 64)`): the shortest digits, in
/// `%e` form when the exponent is below -4 or at least 6 (`1e+06`, `1.5e-05`).
fn go_print_float(f: f64) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "+Inf" } else { "-Inf" }.into();
    }
    // Rust's `{:e}` gives the shortest digits: `d[.ddd]e[-]x`.
    let e = format!("{f:e}");
    let (mantissa, exp) = e.split_once('e').unwrap_or((&e, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if !(-4..6).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exp.abs())
    } else {
        format!("{f}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn find(expr: &str, data: &Value) -> Result<Vec<Value>, EvalError> {
        let p = JsonPath::parse(expr).unwrap_or_else(|e| panic!("{expr}: {e}"));
        p.find(data)
            .map(|v| v.into_iter().map(Cow::into_owned).collect())
    }

    fn widget() -> Value {
        json!({
            "metadata": {"name": "w", "labels": {"app.kubernetes.io/name": "x", "tier": "web"}},
            "spec": {"replicas": 3, "ratio": 0.5, "on": true, "tags": ["a", "b", "c"], "nil": null},
            "status": {"conditions": [
                {"type": "Synced", "status": "False", "n": 1},
                {"type": "Ready", "status": "True", "n": 2},
            ]}
        })
    }

    #[test]
    fn fields_indexes_and_wildcards() {
        let w = widget();
        assert_eq!(find(".spec.replicas", &w).unwrap(), [json!(3)]);
        assert_eq!(
            find(".spec.missing.deeper", &w).unwrap(),
            Vec::<Value>::new()
        );
        // A field of something that is no object finds nothing, without an error.
        assert_eq!(find(".spec.replicas.x", &w).unwrap(), Vec::<Value>::new());
        assert_eq!(find(".spec.nil", &w).unwrap(), [Value::Null]);
        assert_eq!(find(".spec.tags[0]", &w).unwrap(), [json!("a")]);
        assert_eq!(find(".spec.tags[-1]", &w).unwrap(), [json!("c")]);
        assert_eq!(
            find(".spec.tags[1:]", &w).unwrap(),
            [json!("b"), json!("c")]
        );
        assert_eq!(
            find(".spec.tags[::2]", &w).unwrap(),
            [json!("a"), json!("c")]
        );
        assert_eq!(find(".spec.tags[*]", &w).unwrap().len(), 3);
        assert_eq!(
            find(".status.conditions[*].type", &w).unwrap(),
            [json!("Synced"), json!("Ready")]
        );
        assert_eq!(find(".metadata.labels.*", &w).unwrap().len(), 2);
        assert_eq!(
            find(".metadata.labels.app\\.kubernetes\\.io/name", &w).unwrap(),
            [json!("x")]
        );
        // kube parses ['a.b'] as .a.b: the dots still separate fields.
        assert_eq!(
            find(".metadata.labels['tier']", &w).unwrap(),
            [json!("web")]
        );
        assert!(
            find(".metadata.labels['app.kubernetes.io/name']", &w)
                .unwrap()
                .is_empty()
        );
        // Errors: out of bounds, indexing a non-array.
        assert!(find(".spec.tags[5]", &w).is_err());
        assert!(find(".spec.replicas[0]", &w).is_err());
        assert!(find(".spec.tags[0:0]", &w).unwrap().is_empty());
    }

    #[test]
    fn filters() {
        let w = widget();
        let ready = r#".status.conditions[?(@.type=="Ready")].status"#;
        assert_eq!(find(ready, &w).unwrap(), [json!("True")]);
        assert_eq!(
            find(".status.conditions[?(@.type=='Synced')].n", &w).unwrap(),
            [json!(1)]
        );
        assert_eq!(
            find(".status.conditions[?(@.n>1)].type", &w).unwrap(),
            [json!("Ready")]
        );
        assert_eq!(
            find(".status.conditions[?(@.n>=1)].type", &w)
                .unwrap()
                .len(),
            2
        );
        assert_eq!(
            find(".status.conditions[?(@.n!=1)].type", &w).unwrap(),
            [json!("Ready")]
        );
        assert_eq!(
            find(".status.conditions[?(@.status)].type", &w)
                .unwrap()
                .len(),
            2
        );
        assert!(
            find(".status.conditions[?(@.x)].type", &w)
                .unwrap()
                .is_empty()
        );
        // Different kinds: an error, as text/template's comparison.
        assert!(find(".status.conditions[?(@.n==\"1\")].type", &w).is_err());
        assert!(find(".status.conditions[?(@.n==1.0)].type", &w).is_err());
        // Filtering a missing array finds nothing; filtering a non-array is an error.
        assert!(find(".status.missing[?(@.a==1)]", &w).unwrap().is_empty());
        assert!(find(".spec[?(@.a==1)]", &w).is_err());
    }

    #[test]
    fn parse_errors_say_whether_kube_rejects_them_too() {
        for unsupported in [".spec..x", ".spec.tags[0,1]", ".a }x", "range"] {
            assert!(
                matches!(
                    JsonPath::parse(unsupported),
                    Err(ParseError::Unsupported { .. })
                ),
                "{unsupported}"
            );
        }
        for invalid in [
            "{.a}",
            ".spec.tags[0",
            ".spec.tags[x]",
            ".a[?(@.b==1)",
            ".a %",
        ] {
            assert!(
                matches!(JsonPath::parse(invalid), Err(ParseError::Invalid { .. })),
                "{invalid}"
            );
        }
    }

    #[test]
    fn printing_as_kube_prints_text() {
        assert_eq!(print_text(&json!("a<b")), "a<b");
        assert_eq!(print_text(&json!(3)), "3");
        assert_eq!(print_text(&json!(0.5)), "0.5");
        assert_eq!(print_text(&json!(1.5e21)), "1.5e+21");
        assert_eq!(print_text(&json!(1e6)), "1e+06");
        assert_eq!(print_text(&json!(123456.5)), "123456.5");
        assert_eq!(print_text(&json!(0.0001)), "0.0001");
        assert_eq!(print_text(&json!(1e-7)), "1e-07");
        assert_eq!(print_text(&json!(true)), "true");
        assert_eq!(print_text(&Value::Null), "<no value>");
        assert_eq!(
            print_text(&json!({"b": 1, "a": ["<", {"d": 1, "c": 2}]})),
            r#"{"a":["\u003c",{"c":2,"d":1}],"b":1}"#
        );
    }
}
