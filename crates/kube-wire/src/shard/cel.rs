//! CEL's expression syntax, parsed into the AST cel-go builds, so that kube's shard selector walk
//! can be replayed on it: kube parses a `shardSelector` with cel-go's parser (`cel-go` v0.26:
//! the grammar `parser/gen/CEL.g4`, the visitor `parser/parser.go`), with no macros, the
//! optional syntax and escaped identifiers off, and then looks at the node kinds, the function
//! names and the literals. This module owns that much and nothing more: it never evaluates,
//! checks types or expands macros.
//!
//! What matches cel-go:
//! - the grammar (precedence, associativity, `?:`, receiver calls, messages `A.B{f: v}`, maps,
//!   lists, trailing commas, `-` folded into a numeric literal as ANTLR's first alternative does,
//!   `!!x` and `--x` cancelled), and the tokens (numbers, the string forms with their escapes,
//!   raw and triple-quoted strings, bytes, comments);
//! - the nodes: their kinds ([`Kind`], cel-go's `ExprKind` numbers), the operators' function
//!   names (`_||_`, `_[_]`, `-_`, …) and `||`/`&&` chains balanced as cel-go's logic manager does;
//! - the errors the visitor reports, word for word: `reserved identifier: as`, `invalid int
//!   literal`, `invalid unicode code point`, `unsupported syntax '.?'`, the size limit
//!   (`expression code point size exceeds limit: size: N, limit 100000`) and the recursion limits
//!   (`expression recursion limit exceeded: 250`, `max recursion depth exceeded`).
//!
//! What does not: ANTLR's syntax errors. Their text (`Syntax error: mismatched input ')'
//! expecting {…}`) comes from ANTLR's error recovery and prediction; here the first syntax error
//! is worded in ANTLR's style (`token recognition error at: '#'`, `mismatched input 'x'
//! expecting <EOF>`, `missing ')' at '<EOF>'`, `extraneous input …`), with ANTLR's expected-token
//! set where this parser knows it, but the wording and the position can differ from cel-go's for
//! the same input. Likewise the recursion limits are modelled on ANTLR's per-rule depth counts
//! (nesting, and chains of postfix or binary operators) and may trip at a slightly different
//! depth. Only the first error is reported (kube prints only the first).
//!
//! Never panics, and nesting costs no stack: the parser is a loop over explicit stacks (what is
//! open around the current point, and each open expression's pending operators), not a recursive
//! descent, because a debug build's recursive descent needs ~10 KB of stack per level and cel-go
//! allows 250. The input is limited to 100,000 code points, and the rule limits bound the AST's
//! height, so dropping or walking an AST recurses a bounded depth.

/// cel-go's `parser.NewParser` defaults, which kube keeps.
const MAX_CODE_POINTS: usize = 100_000;
/// cel-go's `maxRecursionDepth` default.
const MAX_DEPTH: u32 = 250;

/// The tokens that can start an expression, as ANTLR lists them in its errors.
const EXPR_START: &str = "{'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}";
/// The same at the first element of a list: or the list ends, or a comma, or `?`.
const LIST_START: &str = "{'[', ']', '{', '(', '.', ',', '-', '!', '?', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}";
/// The same at the first entry of a map.
const MAP_START: &str = "{'[', '{', '}', '(', '.', ',', '-', '!', '?', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}";
/// What may start a message's field initializer.
const FIELD_START: &str = "{'}', ',', '?', IDENTIFIER, ESC_IDENTIFIER}";

/// cel-go's `ast.ExprKind`: kube prints these numbers in its errors (`%v` of a type without a
/// `String` method).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `CallKind`: a function or operator call.
    Call = 1,
    /// `ComprehensionKind`: only macros make one, and kube's parser has none.
    Comprehension = 2,
    /// `IdentKind`.
    Ident = 3,
    /// `ListKind`.
    List = 4,
    /// `LiteralKind`.
    Literal = 5,
    /// `MapKind`.
    Map = 6,
    /// `SelectKind`.
    Select = 7,
    /// `StructKind`: a message `A.B{f: v}`.
    Struct = 8,
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", *self as u8)
    }
}

/// A literal's value.
#[derive(Debug, Clone, PartialEq)]
pub enum Literal {
    /// `types.Int`.
    Int(i64),
    /// `types.Uint`.
    Uint(u64),
    /// `types.Double`.
    Double(f64),
    /// `types.String`.
    String(String),
    /// `types.Bytes`.
    Bytes(Vec<u8>),
    /// `types.Bool`.
    Bool(bool),
    /// `types.Null`.
    Null,
}

impl Literal {
    /// Go's `%T` of the literal's `Value()` (what kube prints for a bound that is not a string).
    pub fn go_type(&self) -> &'static str {
        match self {
            Literal::Int(_) => "int64",
            Literal::Uint(_) => "uint64",
            Literal::Double(_) => "float64",
            Literal::String(_) => "string",
            Literal::Bytes(_) => "[]uint8",
            Literal::Bool(_) => "bool",
            Literal::Null => "structpb.NullValue",
        }
    }
}

/// An expression node, as cel-go's `ast.Expr`.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    /// A call: a global function, an operator (`_||_`, `!_`, …) or, with a target, a receiver
    /// call `target.f(args)`.
    Call {
        /// The function's name.
        function: String,
        /// The receiver of `target.f(…)`.
        target: Option<Box<Expr>>,
        /// The arguments.
        args: Vec<Expr>,
    },
    /// An identifier (with its leading dot, if any).
    Ident(String),
    /// A list literal.
    List(Vec<Expr>),
    /// A literal.
    Literal(Literal),
    /// A map literal.
    Map(Vec<(Expr, Expr)>),
    /// `operand.field`.
    Select {
        /// What is selected from.
        operand: Box<Expr>,
        /// The field.
        field: String,
    },
    /// A message literal `A.B{f: v}`.
    Struct {
        /// The message name (with its leading dot, if any).
        name: String,
        /// The fields.
        fields: Vec<(String, Expr)>,
    },
}

impl Expr {
    /// The node's kind.
    pub fn kind(&self) -> Kind {
        match self {
            Expr::Call { .. } => Kind::Call,
            Expr::Ident(_) => Kind::Ident,
            Expr::List(_) => Kind::List,
            Expr::Literal(_) => Kind::Literal,
            Expr::Map(_) => Kind::Map,
            Expr::Select { .. } => Kind::Select,
            Expr::Struct { .. } => Kind::Struct,
        }
    }

    fn call(function: &str, args: Vec<Expr>) -> Expr {
        Expr::Call {
            function: function.to_string(),
            target: None,
            args,
        }
    }
}

/// Parses `src` as cel-go's parser does; the error is the message of cel-go's first error.
pub fn parse(src: &str) -> Result<Expr, String> {
    let chars: Vec<char> = src.chars().collect();
    if chars.len() > MAX_CODE_POINTS {
        return Err(format!(
            "expression code point size exceeds limit: size: {}, limit {MAX_CODE_POINTS}",
            chars.len()
        ));
    }
    let (toks, lex_error) = lex(&chars);
    let mut p = Parser {
        toks,
        chars: &chars,
        pos: 0,
        seen: std::cell::Cell::new(0),
        depth: [0; 4],
        first_semantic: None,
        levels: Vec::new(),
    };
    let parsed = p.start();
    // ANTLR's lexer reports its error when the parser asks for the token after the characters
    // it skipped: before any syntax error found at or after that point, and before everything
    // cel-go's visitor reports.
    if let Some((before, message)) = lex_error
        && (parsed.is_ok() || before <= p.seen.get())
    {
        return Err(message);
    }
    let root = parsed?;
    if let Some(e) = p.first_semantic {
        return Err(e);
    }
    if root.height > MAX_DEPTH {
        return Err("max recursion depth exceeded".into());
    }
    Ok(root.expr)
}

// ---------------------------------------------------------------------------------------------
// Tokens

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum T {
    Eq,
    Ne,
    In,
    Lt,
    Le,
    Ge,
    Gt,
    And,
    Or,
    LBracket,
    RBracket,
    LBrace,
    RBrace,
    LParen,
    RParen,
    Dot,
    Comma,
    Minus,
    Exclam,
    Question,
    Colon,
    Plus,
    Star,
    Slash,
    Percent,
    True,
    False,
    Null,
    Float,
    Int,
    Uint,
    Str,
    Bytes,
    Ident,
    EscIdent,
    Eof,
}

impl T {
    /// Whether an expression can start with this token (ANTLR's [`EXPR_START`]).
    fn starts_expr(self) -> bool {
        matches!(
            self,
            T::LBracket
                | T::LBrace
                | T::LParen
                | T::Dot
                | T::Minus
                | T::Exclam
                | T::True
                | T::False
                | T::Null
                | T::Float
                | T::Int
                | T::Uint
                | T::Str
                | T::Bytes
                | T::Ident
        )
    }
}

#[derive(Debug, Clone, Copy)]
struct Token {
    t: T,
    /// Char offsets of the token's text.
    start: usize,
    end: usize,
}

/// Splits the input into tokens, ending with `Eof`, as ANTLR's lexer does: where no token
/// matches, it reports an error, skips the text up to and including the character that failed,
/// and goes on. Returns the tokens and the first such error (only the first error is ever
/// shown), with the index of the token that follows it.
fn lex(s: &[char]) -> (Vec<Token>, Option<(usize, String)>) {
    let mut out = Vec::new();
    let mut error = None;
    let mut i = 0;
    loop {
        // WHITESPACE and COMMENT go to ANTLR's hidden channel.
        while i < s.len() {
            match s[i] {
                '\t' | ' ' | '\r' | '\n' | '\u{c}' => i += 1,
                '/' if s.get(i + 1) == Some(&'/') => {
                    while i < s.len() && s[i] != '\n' {
                        i += 1;
                    }
                }
                _ => break,
            }
        }
        if i >= s.len() {
            out.push(Token {
                t: T::Eof,
                start: i,
                end: i,
            });
            return (out, error);
        }
        match lex_one(s, i) {
            Ok((t, end)) => {
                out.push(Token { t, start: i, end });
                i = end;
            }
            Err(fail) => {
                // ANTLR reports the text from the token's start through the character it could
                // not take, and goes on after that character.
                let end = (fail + 1).min(s.len());
                if error.is_none() {
                    let text: String = s[i..end].iter().collect();
                    let message = format!(
                        "Syntax error: token recognition error at: '{}'",
                        escape_display(&text)
                    );
                    error = Some((out.len(), message));
                }
                i = end;
            }
        }
    }
}

/// The longest token at `i`: its type and end, or the offset of the character where every rule
/// failed.
fn lex_one(s: &[char], i: usize) -> Result<(T, usize), usize> {
    let at = |k: usize| s.get(k).copied();
    let c = s[i];
    let two = |second: char, t2: T, t1: Option<T>| match (at(i + 1), t1) {
        (Some(n), _) if n == second => Ok((t2, i + 2)),
        (_, Some(t)) => Ok((t, i + 1)),
        (_, None) => Err(i + 1),
    };
    match c {
        '=' => two('=', T::Eq, None),
        '!' => two('=', T::Ne, Some(T::Exclam)),
        '<' => two('=', T::Le, Some(T::Lt)),
        '>' => two('=', T::Ge, Some(T::Gt)),
        '&' => two('&', T::And, None),
        '|' => two('|', T::Or, None),
        '[' => Ok((T::LBracket, i + 1)),
        ']' => Ok((T::RBracket, i + 1)),
        '{' => Ok((T::LBrace, i + 1)),
        '}' => Ok((T::RBrace, i + 1)),
        '(' => Ok((T::LParen, i + 1)),
        ')' => Ok((T::RParen, i + 1)),
        ',' => Ok((T::Comma, i + 1)),
        '-' => Ok((T::Minus, i + 1)),
        '?' => Ok((T::Question, i + 1)),
        ':' => Ok((T::Colon, i + 1)),
        '+' => Ok((T::Plus, i + 1)),
        '*' => Ok((T::Star, i + 1)),
        '/' => Ok((T::Slash, i + 1)),
        '%' => Ok((T::Percent, i + 1)),
        '.' => match at(i + 1) {
            Some(d) if d.is_ascii_digit() => {
                let end = digits(s, i + 1);
                Ok((T::Float, exponent(s, end).unwrap_or(end)))
            }
            _ => Ok((T::Dot, i + 1)),
        },
        '0'..='9' => Ok(number(s, i)),
        '\'' | '"' => string(s, i, false).map(|end| (T::Str, end)),
        'r' | 'R' if matches!(at(i + 1), Some('\'' | '"')) => Ok(string(s, i + 1, true)
            .map(|end| (T::Str, end))
            .unwrap_or_else(|_| (T::Ident, identifier(s, i)))),
        'b' | 'B' => Ok(bytes(s, i).unwrap_or_else(|| ident_or_keyword(s, i))),
        '`' => escaped_identifier(s, i),
        c if c.is_ascii_alphabetic() || c == '_' => Ok(ident_or_keyword(s, i)),
        _ => Err(i),
    }
}

fn digits(s: &[char], mut i: usize) -> usize {
    while i < s.len() && s[i].is_ascii_digit() {
        i += 1;
    }
    i
}

/// The end of an `EXPONENT` (`[eE][+-]?DIGIT+`) at `i`, if there is one.
fn exponent(s: &[char], i: usize) -> Option<usize> {
    if !matches!(s.get(i), Some('e' | 'E')) {
        return None;
    }
    let mut k = i + 1;
    if matches!(s.get(k), Some('+' | '-')) {
        k += 1;
    }
    let end = digits(s, k);
    (end > k).then_some(end)
}

/// `NUM_FLOAT`, `NUM_INT` or `NUM_UINT` at a digit.
fn number(s: &[char], i: usize) -> (T, usize) {
    let uint_suffix = |end: usize| match s.get(end) {
        Some('u' | 'U') => (T::Uint, end + 1),
        _ => (T::Int, end),
    };
    if s[i] == '0'
        && s.get(i + 1) == Some(&'x')
        && s.get(i + 2).is_some_and(char::is_ascii_hexdigit)
    {
        let mut end = i + 2;
        while end < s.len() && s[end].is_ascii_hexdigit() {
            end += 1;
        }
        return uint_suffix(end);
    }
    let end = digits(s, i);
    if s.get(end) == Some(&'.') && s.get(end + 1).is_some_and(char::is_ascii_digit) {
        let frac = digits(s, end + 1);
        return (T::Float, exponent(s, frac).unwrap_or(frac));
    }
    if let Some(e) = exponent(s, end) {
        return (T::Float, e);
    }
    uint_suffix(end)
}

fn identifier(s: &[char], i: usize) -> usize {
    let mut end = i + 1;
    while end < s.len() && (s[end].is_ascii_alphanumeric() || s[end] == '_') {
        end += 1;
    }
    end
}

fn ident_or_keyword(s: &[char], i: usize) -> (T, usize) {
    let end = identifier(s, i);
    let word: String = s[i..end].iter().collect();
    let t = match word.as_str() {
        "in" => T::In,
        "true" => T::True,
        "false" => T::False,
        "null" => T::Null,
        _ => T::Ident,
    };
    (t, end)
}

/// `ESC_IDENTIFIER`: a backquoted name of letters, digits, `_`, `.`, `-`, `/` and spaces.
fn escaped_identifier(s: &[char], i: usize) -> Result<(T, usize), usize> {
    let ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-' | '/' | ' ');
    let mut k = i + 1;
    while k < s.len() && ok(s[k]) {
        k += 1;
    }
    match s.get(k) {
        Some('`') if k > i + 1 => Ok((T::EscIdent, k + 1)),
        _ => Err(k),
    }
}

/// `BYTES` at a `b`/`B`: the prefix and a string (raw or not), if one follows.
fn bytes(s: &[char], i: usize) -> Option<(T, usize)> {
    let q = i + 1;
    match s.get(q) {
        Some('\'' | '"') => string(s, q, false).ok(),
        Some('r' | 'R') if matches!(s.get(q + 1), Some('\'' | '"')) => string(s, q + 1, true).ok(),
        _ => None,
    }
    .map(|end| (T::Bytes, end))
}

/// A string whose opening quote is at `q` (after its prefix, if any): its end, or the offset
/// of the character where it failed. A triple-quoted string that does not close
/// is, as ANTLR's longest match has it, the empty string of its first two quotes.
fn string(s: &[char], q: usize, raw: bool) -> Result<usize, usize> {
    let quote = s[q];
    let triple = s.get(q + 1) == Some(&quote) && s.get(q + 2) == Some(&quote);
    if triple {
        let mut k = q + 3;
        loop {
            match s.get(k) {
                None => return Ok(q + 2),
                Some(&c)
                    if c == quote
                        && s.get(k + 1) == Some(&quote)
                        && s.get(k + 2) == Some(&quote) =>
                {
                    return Ok(k + 3);
                }
                Some('\\') if !raw => match escape(s, k) {
                    Ok(next) => k = next,
                    Err(_) => return Ok(q + 2),
                },
                Some(_) => k += 1,
            }
        }
    }
    let mut k = q + 1;
    loop {
        match s.get(k) {
            None => return Err(k),
            Some(&c) if c == quote => return Ok(k + 1),
            Some('\n' | '\r') => return Err(k),
            Some('\\') if !raw => k = escape(s, k)?,
            Some(_) => k += 1,
        }
    }
}

/// An `ESC_SEQ` at the backslash `k`: its end, or the offset of the character that breaks it.
fn escape(s: &[char], k: usize) -> Result<usize, usize> {
    let hex = |from: usize, n: usize| -> Result<usize, usize> {
        for j in from..from + n {
            if !s.get(j).is_some_and(char::is_ascii_hexdigit) {
                return Err(j);
            }
        }
        Ok(from + n)
    };
    match s.get(k + 1) {
        Some('a' | 'b' | 'f' | 'n' | 'r' | 't' | 'v' | '"' | '\'' | '\\' | '?' | '`') => Ok(k + 2),
        Some('0'..='3') => {
            for j in k + 2..k + 4 {
                if !matches!(s.get(j), Some('0'..='7')) {
                    return Err(j);
                }
            }
            Ok(k + 4)
        }
        Some('x' | 'X') => hex(k + 2, 2),
        Some('u') => hex(k + 2, 4),
        Some('U') => hex(k + 2, 8),
        _ => Err(k + 1),
    }
}

// ---------------------------------------------------------------------------------------------
// Literal values (cel-go's visitor: `strconv` and `unescape`)

/// cel-go's `unescape` of a STRING token's text (`bytes`: the text after the `b`), as the
/// visitor applies it; the error is its message.
fn unescape(text: &str, bytes: bool) -> Result<Vec<u8>, &'static str> {
    let text = text.replace("\r\n", "\n").replace('\r', "\n");
    let (raw, body) = match text.strip_prefix(['r', 'R']) {
        Some(rest) => (true, rest),
        None => (false, text.as_str()),
    };
    let body = if body.len() >= 6 && (body.starts_with("'''") || body.starts_with("\"\"\"")) {
        &body[3..body.len() - 3]
    } else {
        &body[1..body.len() - 1]
    };
    if raw || !body.contains('\\') {
        return Ok(body.as_bytes().to_vec());
    }
    let mut out = Vec::with_capacity(body.len());
    let mut rest = body;
    while let Some(c) = rest.chars().next() {
        if c != '\\' {
            let mut buf = [0; 4];
            out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            rest = &rest[c.len_utf8()..];
            continue;
        }
        let (value, encode, tail) = unescape_char(rest, bytes)?;
        if encode {
            let c = char::from_u32(value).ok_or("invalid unicode code point")?;
            let mut buf = [0; 4];
            out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
        } else {
            // A byte escape of a bytes literal, or an ASCII character.
            out.push(value as u8);
        }
        rest = tail;
    }
    Ok(out)
}

/// One escape sequence at the start of `s` (a backslash): its value, whether it is a code point
/// to encode as UTF-8 (else a byte), and the rest.
fn unescape_char(s: &str, bytes: bool) -> Result<(u32, bool, &str), &'static str> {
    const BAD: &str = "unable to unescape string";
    let b = s.as_bytes();
    let Some(&c) = b.get(1) else {
        return Err("unable to unescape string, found '\\' as last character");
    };
    let simple = match c {
        b'a' => Some(7),
        b'b' => Some(8),
        b'f' => Some(12),
        b'n' => Some(10),
        b'r' => Some(13),
        b't' => Some(9),
        b'v' => Some(11),
        b'\\' | b'\'' | b'"' | b'`' | b'?' => Some(u32::from(c)),
        _ => None,
    };
    if let Some(v) = simple {
        return Ok((v, false, &s[2..]));
    }
    let rest = &s[2..];
    let (n, encode) = match c {
        b'x' | b'X' => (2, !bytes),
        b'u' if !bytes => (4, true),
        b'U' if !bytes => (8, true),
        b'0'..=b'3' => {
            let d = rest.as_bytes();
            if d.len() < 2 || !(b'0'..=b'7').contains(&d[0]) || !(b'0'..=b'7').contains(&d[1]) {
                return Err("unable to unescape octal sequence in string");
            }
            let v = u32::from(c - b'0') * 64 + u32::from(d[0] - b'0') * 8 + u32::from(d[1] - b'0');
            return Ok((v, !bytes, &rest[2..]));
        }
        _ => return Err(BAD),
    };
    let digits = rest.get(..n).ok_or(BAD)?;
    if !digits.bytes().all(|d| d.is_ascii_hexdigit()) {
        return Err(BAD);
    }
    let v = u32::from_str_radix(digits, 16).map_err(|_| BAD)?;
    if encode && char::from_u32(v).is_none() {
        return Err("invalid unicode code point");
    }
    Ok((v, encode, &rest[n..]))
}

/// Go's `strconv.ParseFloat(s, 64)` as cel-go uses it: out of range is an error (Rust's
/// parser gives an infinity instead).
fn parse_double(text: &str) -> Option<f64> {
    text.parse::<f64>().ok().filter(|f| f.is_finite())
}

// ---------------------------------------------------------------------------------------------
// Parser

/// A node and its height in the nodes cel-go's visitor counts against its recursion limit
/// (selects, member calls, indexes, `?:` and the relational and arithmetic operators).
struct Node {
    expr: Expr,
    height: u32,
}

impl Node {
    fn leaf(expr: Expr) -> Node {
        Node { expr, height: 0 }
    }

    /// A call over `args`; `counted` when cel-go's visitor counts its kind.
    fn call(function: &str, args: Vec<Node>, counted: bool) -> Node {
        let height = args.iter().map(|a| a.height).max().unwrap_or(0) + u32::from(counted);
        Node {
            expr: Expr::call(function, args.into_iter().map(|a| a.expr).collect()),
            height,
        }
    }
}

/// The grammar rules whose nesting ANTLR's depth listener (cel-go's `recursionListener`)
/// limits; the others never nest deeper than `expr`.
#[derive(Clone, Copy)]
enum Rule {
    Expr = 0,
    Relation = 1,
    Calc = 2,
    Member = 3,
}

type PResult<T> = Result<T, String>;

struct Parser<'a> {
    chars: &'a [char],
    toks: Vec<Token>,
    pos: usize,
    /// The furthest token the parser has looked at.
    seen: std::cell::Cell<usize>,
    /// ANTLR's depth per rule: entries, plus one per left-recursive step.
    depth: [u32; 4],
    /// The visitor's first error (reported only when the parse itself succeeds).
    first_semantic: Option<String>,
    /// The constructs open around the current point, innermost last.
    levels: Vec<Level>,
}

/// Binary operator levels: `||`, `&&`, the relations, `+ -`, `* / %`.
const OR: u8 = 1;
const AND: u8 = 2;
const RELATION: u8 = 3;
const CALC: u8 = 4;

fn calc_op(t: T) -> Option<(&'static str, u8)> {
    Some(match t {
        T::Star => ("_*_", CALC + 1),
        T::Slash => ("_/_", CALC + 1),
        T::Percent => ("_%_", CALC + 1),
        T::Plus => ("_+_", CALC),
        T::Minus => ("_-_", CALC),
        _ => return None,
    })
}

fn relation_op(t: T) -> Option<&'static str> {
    Some(match t {
        T::Lt => "_<_",
        T::Le => "_<=_",
        T::Ge => "_>=_",
        T::Gt => "_>_",
        T::Eq => "_==_",
        T::Ne => "_!=_",
        T::In => "@in",
        _ => return None,
    })
}

/// A construct that holds expressions, open while one of them is parsed.
enum Open {
    /// `start: expr EOF`.
    Root,
    /// `( … )`.
    Paren,
    /// `f(…)` or `target.f(…)`, with the arguments before the open one.
    Args {
        function: String,
        target: Option<Node>,
        args: Vec<Node>,
    },
    /// `target[…]`.
    Index { target: Node },
    /// `[…]`, with the elements before the open one (`optional`: it follows a `?`).
    List { elems: Vec<Node>, optional: bool },
    /// `{…}`, with the entries before the open one and its key once read.
    Map {
        entries: Vec<(Node, Node)>,
        key: Option<Node>,
    },
    /// `Name{…}`, with the fields before the open one, whose name is `field`.
    Struct {
        name: String,
        fields: Vec<(String, Node)>,
        field: String,
    },
}

/// An operator waiting for its right side, in an open expression.
enum Op {
    /// An odd run of `!` or `-` before the member being parsed.
    Prefix(&'static str),
    /// A relational or arithmetic operator; `pushes`: operators its right side's `calc` has
    /// taken (ANTLR's depth of that rule).
    Bin {
        function: &'static str,
        prec: u8,
        lhs: Node,
        pushes: u32,
    },
    /// The terms so far of a chain of `&&` (`level` AND) or `||` (OR).
    Chain { level: u8, terms: Vec<Node> },
    /// `cond ?`, waiting for its `:`.
    Then { cond: Node },
    /// `cond ? then :`, waiting for its last branch.
    Else { cond: Node, then: Node },
}

/// One open expression: what holds it, its pending operators and its rule depths.
struct Level {
    open: Open,
    ops: Vec<Op>,
    /// `member` steps of the member being parsed (1 + its postfixes so far).
    member_steps: u32,
    /// Operators the current term's `relation` has taken.
    rel_pushes: u32,
    /// Operators the current operand's outermost `calc` has taken.
    calc_pushes: u32,
}

/// What comes of an operand.
enum After {
    /// An operator or separator was taken: the next operand follows.
    Next,
    /// A postfix or a closed construct made a new operand, which may go on.
    Value(Node),
    /// The whole input.
    Done(Node),
}

fn call_node(function: String, target: Option<Node>, args: Vec<Node>) -> Node {
    let height = args
        .iter()
        .chain(target.as_ref())
        .map(|a| a.height)
        .max()
        .unwrap_or(0)
        + u32::from(target.is_some());
    Node {
        expr: Expr::Call {
            function,
            target: target.map(|t| Box::new(t.expr)),
            args: args.into_iter().map(|a| a.expr).collect(),
        },
        height,
    }
}

fn map_node(entries: Vec<(Node, Node)>) -> Node {
    let height = entries
        .iter()
        .map(|(k, v)| k.height.max(v.height))
        .max()
        .unwrap_or(0);
    Node {
        expr: Expr::Map(entries.into_iter().map(|(k, v)| (k.expr, v.expr)).collect()),
        height,
    }
}

fn struct_node(name: String, fields: Vec<(String, Node)>) -> Node {
    let height = fields.iter().map(|(_, v)| v.height).max().unwrap_or(0);
    Node {
        expr: Expr::Struct {
            name,
            fields: fields.into_iter().map(|(f, v)| (f, v.expr)).collect(),
        },
        height,
    }
}

impl Parser<'_> {
    fn peek(&self) -> T {
        self.look(self.pos)
    }

    fn peek2(&self) -> T {
        self.look(self.pos + 1)
    }

    fn look(&self, k: usize) -> T {
        let k = k.min(self.toks.len() - 1);
        self.seen.set(self.seen.get().max(k));
        self.toks[k].t
    }

    fn text(&self, k: usize) -> String {
        let t = self.toks[k];
        self.chars[t.start..t.end].iter().collect()
    }

    /// Takes the current token and returns its text.
    fn take_text(&mut self) -> String {
        let k = self.bump();
        self.text(k)
    }

    fn bump(&mut self) -> usize {
        let k = self.pos;
        if self.toks[k].t != T::Eof {
            self.pos += 1;
        }
        k
    }

    fn eat(&mut self, t: T) -> bool {
        let hit = self.peek() == t;
        if hit {
            self.bump();
        }
        hit
    }

    fn semantic(&mut self, msg: impl Into<String>) {
        self.first_semantic.get_or_insert_with(|| msg.into());
    }

    /// ANTLR's display of the current token in an error: quoted, `<EOF>` at the end.
    fn display(&self, k: usize) -> String {
        if self.toks[k].t == T::Eof {
            return "'<EOF>'".into();
        }
        format!("'{}'", escape_display(&self.text(k)))
    }

    /// The error for the current token, which cannot go here: ANTLR's mismatched (or
    /// extraneous, when the token after it would fit) input.
    fn unexpected(&self, expecting: &str, next_fits: impl Fn(T) -> bool) -> String {
        let tok = self.display(self.pos);
        if self.peek() != T::Eof && next_fits(self.peek2()) {
            format!("Syntax error: extraneous input {tok} expecting {expecting}")
        } else {
            format!("Syntax error: mismatched input {tok} expecting {expecting}")
        }
    }

    /// Takes the token `t` (written `shown` in errors), or fails as ANTLR's inline recovery
    /// reports it.
    fn expect(&mut self, t: T, shown: &str) -> PResult<()> {
        if self.eat(t) {
            return Ok(());
        }
        let closer = matches!(t, T::RParen | T::RBracket | T::RBrace);
        if self.peek() == T::Eof && closer {
            return Err(format!("Syntax error: missing '{shown}' at '<EOF>'"));
        }
        Err(self.unexpected(&format!("'{shown}'"), |n| n == t))
    }

    fn enter(&mut self, r: Rule) -> PResult<()> {
        let d = &mut self.depth[r as usize];
        *d += 1;
        if *d > MAX_DEPTH {
            return Err(format!("expression recursion limit exceeded: {MAX_DEPTH}"));
        }
        Ok(())
    }

    fn leave(&mut self, r: Rule, steps: u32) {
        self.depth[r as usize] -= steps;
    }

    /// `start: expr EOF`: the whole input, parsed by a loop over explicit stacks (what is open,
    /// and each open expression's pending operators) instead of by recursion, so that nesting
    /// costs heap, never stack.
    fn start(&mut self) -> PResult<Node> {
        self.open(Open::Root)?;
        loop {
            let mut x = match self.operand()? {
                Some(x) => x,
                None => continue,
            };
            loop {
                match self.after(x)? {
                    After::Next => break,
                    After::Value(v) => x = v,
                    After::Done(v) => return Ok(v),
                }
            }
        }
    }

    fn level(&mut self) -> &mut Level {
        self.levels.last_mut().expect("an open level")
    }

    fn top_op(&mut self) -> Option<&mut Op> {
        self.level().ops.last_mut()
    }

    /// Opens a construct whose first expression starts now (ANTLR enters `expr`).
    fn open(&mut self, open: Open) -> PResult<()> {
        self.enter(Rule::Expr)?;
        self.levels.push(Level {
            open,
            ops: Vec::new(),
            member_steps: 0,
            rel_pushes: 0,
            calc_pushes: 0,
        });
        self.start_term()
    }

    /// Closes the innermost construct (its expression is complete).
    fn close(&mut self) -> Open {
        self.leave(Rule::Expr, 1);
        self.levels.pop().expect("an open level").open
    }

    /// A `relation` starts (an expression, a term of `&&` or `||`, a branch of `?:`): ANTLR
    /// enters `relation` and, for its first operand, `calc`.
    fn start_term(&mut self) -> PResult<()> {
        self.enter(Rule::Relation)?;
        self.enter(Rule::Calc)?;
        let l = self.level();
        l.rel_pushes = 0;
        l.calc_pushes = 0;
        Ok(())
    }

    // --- operands ---------------------------------------------------------------------------

    /// `unary` and the `primary` of its `member`: the operand, or `None` when the primary opened
    /// a construct whose first expression is next.
    fn operand(&mut self) -> PResult<Option<Node>> {
        let op = self.peek();
        let mut negative = false;
        if op == T::Exclam || op == T::Minus {
            let mut count = 0usize;
            while self.peek() == op {
                self.bump();
                count += 1;
            }
            let number = |p: &Self| matches!(p.peek(), T::Int | T::Float);
            if op == T::Minus && count == 1 && number(self) {
                // ANTLR's first alternative: the sign of a number.
                negative = true;
            } else {
                if op == T::Exclam
                    && self.peek() == T::Minus
                    && matches!(self.peek2(), T::Int | T::Float)
                {
                    // `!-5`: the member after the `!`s is a negative number.
                    self.bump();
                    negative = true;
                }
                if count % 2 == 1 {
                    let function = if op == T::Exclam { "!_" } else { "-_" };
                    self.level().ops.push(Op::Prefix(function));
                }
            }
        }
        self.enter(Rule::Member)?;
        self.level().member_steps = 1;
        if negative {
            return self.literal(true).map(Some);
        }
        match self.peek() {
            T::Dot | T::Ident => self.name(),
            T::LParen => {
                self.bump();
                self.open(Open::Paren)?;
                Ok(None)
            }
            T::LBracket => self.list(),
            T::LBrace => self.map(),
            T::Int | T::Uint | T::Float | T::Str | T::Bytes | T::True | T::False | T::Null => {
                self.literal(false).map(Some)
            }
            _ => Err(self.unexpected(EXPR_START, T::starts_expr)),
        }
    }

    /// An identifier, a global call `f(…)` or a message `a.b.C{…}`, each with an optional
    /// leading dot.
    fn name(&mut self) -> PResult<Option<Node>> {
        let leading = if self.eat(T::Dot) { "." } else { "" };
        if self.peek() != T::Ident {
            return Err(self.unexpected("IDENTIFIER", |n| n == T::Ident));
        }
        // A message name is a dotted chain of identifiers followed by `{`.
        let mut k = self.pos + 1;
        while self.look(k) == T::Dot && self.look(k + 1) == T::Ident {
            k += 2;
        }
        if self.look(k) == T::LBrace {
            let mut name = leading.to_string();
            while self.pos < k {
                name.push_str(&self.take_text());
            }
            self.bump();
            return self.fields(name, Vec::new(), false);
        }
        let id = self.take_text();
        if RESERVED.contains(&id.as_str()) {
            self.semantic(format!("reserved identifier: {id}"));
        }
        let name = format!("{leading}{id}");
        if self.eat(T::LParen) {
            return self.args(name, None, Vec::new());
        }
        Ok(Some(Node::leaf(Expr::Ident(name))))
    }

    /// The arguments of a call, after its `(` or a `,`: the call when they are complete, else
    /// `None` with the next argument's expression open.
    fn args(
        &mut self,
        function: String,
        target: Option<Node>,
        args: Vec<Node>,
    ) -> PResult<Option<Node>> {
        if args.is_empty() && self.eat(T::RParen) {
            return Ok(Some(call_node(function, target, args)));
        }
        self.open(Open::Args {
            function,
            target,
            args,
        })?;
        Ok(None)
    }

    /// `'[' listInit? ','? ']'`, at the `[`.
    fn list(&mut self) -> PResult<Option<Node>> {
        self.bump();
        if self.eat(T::RBracket) {
            return Ok(Some(Node::leaf(Expr::List(Vec::new()))));
        }
        if self.eat(T::Comma) {
            self.expect(T::RBracket, "]")?;
            return Ok(Some(Node::leaf(Expr::List(Vec::new()))));
        }
        if self.peek() != T::Question && !self.peek().starts_expr() {
            return Err(self.unexpected(LIST_START, |n| {
                n.starts_expr() || matches!(n, T::RBracket | T::Comma | T::Question)
            }));
        }
        let optional = self.eat(T::Question);
        self.open(Open::List {
            elems: Vec::new(),
            optional,
        })?;
        Ok(None)
    }

    /// `'{' mapInitializerList? ','? '}'`, at the `{`.
    fn map(&mut self) -> PResult<Option<Node>> {
        self.bump();
        if self.eat(T::RBrace) {
            return Ok(Some(Node::leaf(Expr::Map(Vec::new()))));
        }
        if self.eat(T::Comma) {
            self.expect(T::RBrace, "}")?;
            return Ok(Some(Node::leaf(Expr::Map(Vec::new()))));
        }
        if self.peek() != T::Question && !self.peek().starts_expr() {
            return Err(self.unexpected(MAP_START, |n| {
                n.starts_expr() || matches!(n, T::RBrace | T::Comma | T::Question)
            }));
        }
        self.map_key(Vec::new())
    }

    /// A map entry's key starts.
    fn map_key(&mut self, entries: Vec<(Node, Node)>) -> PResult<Option<Node>> {
        if self.eat(T::Question) {
            self.semantic("unsupported syntax '?'");
        }
        self.open(Open::Map { entries, key: None })?;
        Ok(None)
    }

    /// A message's fields, after its `{` (`more`: after a `,`): the message when they are
    /// complete, else `None` with the next field's value open.
    fn fields(
        &mut self,
        name: String,
        fields: Vec<(String, Node)>,
        more: bool,
    ) -> PResult<Option<Node>> {
        if self.eat(T::RBrace)
            || (!more && fields.is_empty() && self.eat(T::Comma) && {
                self.expect(T::RBrace, "}")?;
                true
            })
        {
            return Ok(Some(struct_node(name, fields)));
        }
        if self.eat(T::Question) {
            self.semantic("unsupported syntax '?'");
        }
        let field = match self.peek() {
            T::Ident => self.take_text(),
            T::EscIdent => {
                self.bump();
                self.semantic("unsupported syntax: '`'");
                String::new()
            }
            _ => {
                return Err(self.unexpected(FIELD_START, |n| matches!(n, T::Ident | T::EscIdent)));
            }
        };
        self.expect(T::Colon, ":")?;
        self.open(Open::Struct {
            name,
            fields,
            field,
        })?;
        Ok(None)
    }

    // --- after an operand -------------------------------------------------------------------

    /// What follows operand `x`: a postfix (`.f`, `.f(…)`, `[…]`), a binary operator, `?` or
    /// `:` of a conditional, or the end of the open expression.
    fn after(&mut self, x: Node) -> PResult<After> {
        match self.peek() {
            T::Dot => {
                self.postfix_step()?;
                self.member_dot(x)
            }
            T::LBracket => {
                self.postfix_step()?;
                self.bump();
                if self.eat(T::Question) {
                    self.semantic("unsupported syntax '[?'");
                }
                self.open(Open::Index { target: x })?;
                Ok(After::Next)
            }
            _ => {
                // The member ends; a pending `!` or `-` applies to it.
                let steps = std::mem::take(&mut self.level().member_steps);
                self.leave(Rule::Member, steps);
                let x = match self.top_op() {
                    Some(Op::Prefix(f)) => {
                        let f = *f;
                        self.level().ops.pop();
                        Node::call(f, vec![x], false)
                    }
                    _ => x,
                };
                self.operator(x)
            }
        }
    }

    fn postfix_step(&mut self) -> PResult<()> {
        self.enter(Rule::Member)?;
        self.level().member_steps += 1;
        Ok(())
    }

    /// After a member, at a `.`: `.f`, `.?f`, `` .`f` ``, `.f(args)`.
    fn member_dot(&mut self, operand: Node) -> PResult<After> {
        let dot = self.bump();
        let optional = self.eat(T::Question);
        let field = match self.peek() {
            T::Ident => self.take_text(),
            T::EscIdent => {
                self.bump();
                self.semantic("unsupported syntax: '`'");
                String::new()
            }
            // cel-go rewrites ANTLR's error for a keyword after a dot.
            T::True | T::False | T::Null => {
                return Err(format!(
                    "Syntax error: mismatched input '{}' expecting IDENTIFIER",
                    self.text(self.pos)
                ));
            }
            _ => {
                let mut seen = self.text(dot);
                if optional {
                    seen.push('?');
                }
                match self.peek() {
                    T::Eof => seen.push_str("<EOF>"),
                    _ => seen.push_str(&self.text(self.pos)),
                }
                return Err(format!(
                    "Syntax error: no viable alternative at input '{}'",
                    escape_display(&seen)
                ));
            }
        };
        if !optional && self.eat(T::LParen) {
            return Ok(match self.args(field, Some(operand), Vec::new())? {
                Some(call) => After::Value(call),
                None => After::Next,
            });
        }
        if optional {
            self.semantic("unsupported syntax '.?'");
            let name = Node::leaf(Expr::Literal(Literal::String(field)));
            return Ok(After::Value(Node::call("_?._", vec![operand, name], true)));
        }
        Ok(After::Value(Node {
            height: operand.height + 1,
            expr: Expr::Select {
                operand: Box::new(operand.expr),
                field,
            },
        }))
    }

    /// After a complete unary operand `x`: an operator takes it as its left operand (the next
    /// operand follows), or the open expression ends with it.
    fn operator(&mut self, x: Node) -> PResult<After> {
        let t = self.peek();
        if let Some((function, prec)) = calc_op(t) {
            self.bump();
            let x = self.reduce_calc(x, prec);
            // The innermost `calc` still open consumes the operator; its right side enters
            // `calc` again.
            self.enter(Rule::Calc)?;
            match self.top_op() {
                Some(Op::Bin { pushes, prec, .. }) if *prec >= CALC => *pushes += 1,
                _ => self.level().calc_pushes += 1,
            }
            self.enter(Rule::Calc)?;
            self.level().ops.push(Op::Bin {
                function,
                prec,
                lhs: x,
                pushes: 0,
            });
            return Ok(After::Next);
        }
        if let Some(function) = relation_op(t) {
            self.bump();
            let x = self.end_calc(x);
            let x = self.reduce_relation(x);
            self.enter(Rule::Relation)?;
            self.level().rel_pushes += 1;
            self.enter(Rule::Relation)?;
            self.level().ops.push(Op::Bin {
                function,
                prec: RELATION,
                lhs: x,
                pushes: 0,
            });
            self.enter(Rule::Calc)?;
            self.level().calc_pushes = 0;
            return Ok(After::Next);
        }
        match t {
            T::And | T::Or => {
                self.bump();
                let mut x = self.end_term(x);
                let level = if t == T::And { AND } else { OR };
                if level == OR {
                    x = self.reduce_chain(x, AND);
                }
                match self.top_op() {
                    Some(Op::Chain { level: l, terms }) if *l == level => terms.push(x),
                    _ => self.level().ops.push(Op::Chain {
                        level,
                        terms: vec![x],
                    }),
                }
                self.start_term()?;
                Ok(After::Next)
            }
            T::Question => {
                let cond = self.end_or(x);
                if self.pending_then() {
                    return Err(self.unexpected("':'", |n| n == T::Colon));
                }
                self.bump();
                self.level().ops.push(Op::Then { cond });
                self.start_term()?;
                Ok(After::Next)
            }
            T::Colon if self.pending_then() => {
                self.bump();
                let then = self.end_or(x);
                let Some(Op::Then { cond }) = self.level().ops.pop() else {
                    unreachable!("a pending `?`");
                };
                self.level().ops.push(Op::Else { cond, then });
                // The branch after `:` is an `expr` of its own.
                self.enter(Rule::Expr)?;
                self.start_term()?;
                Ok(After::Next)
            }
            _ => {
                let x = self.end_expr(x)?;
                self.finish(x)
            }
        }
    }

    /// Whether the innermost conditional of the open expression waits for its `:`.
    fn pending_then(&mut self) -> bool {
        self.level()
            .ops
            .iter()
            .rev()
            .find(|op| matches!(op, Op::Then { .. } | Op::Else { .. }))
            .is_some_and(|op| matches!(op, Op::Then { .. }))
    }

    /// Applies the pending arithmetic operators of precedence `min` and above to `x` (their
    /// right side); each one's `calc` returns.
    fn reduce_calc(&mut self, mut x: Node, min: u8) -> Node {
        while let Some(Op::Bin { prec, .. }) = self.top_op()
            && *prec >= min.max(CALC)
        {
            let Some(Op::Bin {
                function,
                lhs,
                pushes,
                ..
            }) = self.level().ops.pop()
            else {
                unreachable!("a pending operator");
            };
            self.leave(Rule::Calc, 1 + pushes);
            x = Node::call(function, vec![lhs, x], true);
        }
        x
    }

    /// The operand of a relation is complete: every arithmetic operator applies, and its
    /// `calc` returns.
    fn end_calc(&mut self, x: Node) -> Node {
        let x = self.reduce_calc(x, CALC);
        let pushes = self.level().calc_pushes;
        self.leave(Rule::Calc, 1 + pushes);
        x
    }

    /// A pending relational operator applies to `x` (its right side).
    fn reduce_relation(&mut self, x: Node) -> Node {
        if let Some(Op::Bin { prec: RELATION, .. }) = self.top_op() {
            let Some(Op::Bin { function, lhs, .. }) = self.level().ops.pop() else {
                unreachable!("a pending operator");
            };
            self.leave(Rule::Relation, 1);
            return Node::call(function, vec![lhs, x], true);
        }
        x
    }

    /// A term of `&&` (a `relation`) is complete.
    fn end_term(&mut self, x: Node) -> Node {
        let x = self.end_calc(x);
        let x = self.reduce_relation(x);
        let pushes = self.level().rel_pushes;
        self.leave(Rule::Relation, 1 + pushes);
        x
    }

    /// A pending chain of `level` (`&&` or `||`) takes `x` as its last term, balanced.
    fn reduce_chain(&mut self, x: Node, level: u8) -> Node {
        if let Some(Op::Chain { level: l, .. }) = self.top_op()
            && *l == level
        {
            let Some(Op::Chain { mut terms, .. }) = self.level().ops.pop() else {
                unreachable!("a pending chain");
            };
            terms.push(x);
            let function = if level == AND { "_&&_" } else { "_||_" };
            return balance(function, terms);
        }
        x
    }

    /// A `conditionalOr` is complete.
    fn end_or(&mut self, x: Node) -> Node {
        let x = self.end_term(x);
        let x = self.reduce_chain(x, AND);
        self.reduce_chain(x, OR)
    }

    /// The open expression is complete: its conditionals take their last branch.
    fn end_expr(&mut self, x: Node) -> PResult<Node> {
        let mut x = self.end_or(x);
        loop {
            match self.level().ops.pop() {
                Some(Op::Else { cond, then }) => {
                    self.leave(Rule::Expr, 1);
                    x = Node::call("_?_:_", vec![cond, then, x], true);
                }
                Some(Op::Then { .. }) => return Err(self.unexpected("':'", |n| n == T::Colon)),
                Some(_) => unreachable!("only conditionals are left"),
                None => return Ok(x),
            }
        }
    }

    /// The open expression `x` is complete: what is open around it takes it.
    fn finish(&mut self, x: Node) -> PResult<After> {
        match &mut self.level().open {
            Open::Root => {
                if self.peek() == T::Eof {
                    return Ok(After::Done(x));
                }
                Err(self.unexpected("<EOF>", |n| n == T::Eof))
            }
            Open::Paren => {
                self.expect(T::RParen, ")")?;
                self.close();
                Ok(After::Value(x))
            }
            Open::Index { .. } => {
                self.expect(T::RBracket, "]")?;
                let Open::Index { target } = self.close() else {
                    unreachable!("an index");
                };
                Ok(After::Value(Node::call("_[_]", vec![target, x], true)))
            }
            Open::Args { args, .. } => {
                args.push(x);
                if self.eat(T::Comma) {
                    self.start_term()?;
                    return Ok(After::Next);
                }
                self.expect(T::RParen, ")")?;
                let Open::Args {
                    function,
                    target,
                    args,
                } = self.close()
                else {
                    unreachable!("a call");
                };
                Ok(After::Value(call_node(function, target, args)))
            }
            Open::List { elems, optional } => {
                elems.push(x);
                if std::mem::take(optional) {
                    self.semantic("unsupported syntax '?'");
                }
                if self.eat(T::Comma) && self.peek() != T::RBracket {
                    let optional = self.eat(T::Question);
                    let Open::List { optional: o, .. } = &mut self.level().open else {
                        unreachable!("a list");
                    };
                    *o = optional;
                    self.start_term()?;
                    return Ok(After::Next);
                }
                self.expect(T::RBracket, "]")?;
                let Open::List { elems, .. } = self.close() else {
                    unreachable!("a list");
                };
                Ok(After::Value(from_children(elems, Expr::List)))
            }
            Open::Map { key, .. } if key.is_none() => {
                *key = Some(x);
                self.expect(T::Colon, ":")?;
                self.start_term()?;
                Ok(After::Next)
            }
            Open::Map { entries, key } => {
                let k = key.take().expect("a key");
                entries.push((k, x));
                if self.eat(T::Comma) && self.peek() != T::RBrace {
                    let Open::Map { entries, .. } = self.close() else {
                        unreachable!("a map");
                    };
                    return Ok(match self.map_key(entries)? {
                        Some(m) => After::Value(m),
                        None => After::Next,
                    });
                }
                self.expect(T::RBrace, "}")?;
                let Open::Map { entries, .. } = self.close() else {
                    unreachable!("a map");
                };
                Ok(After::Value(map_node(entries)))
            }
            Open::Struct { fields, field, .. } => {
                fields.push((std::mem::take(field), x));
                if self.eat(T::Comma) && self.peek() != T::RBrace {
                    let Open::Struct { name, fields, .. } = self.close() else {
                        unreachable!("a message");
                    };
                    return Ok(match self.fields(name, fields, true)? {
                        Some(m) => After::Value(m),
                        None => After::Next,
                    });
                }
                self.expect(T::RBrace, "}")?;
                let Open::Struct { name, fields, .. } = self.close() else {
                    unreachable!("a message");
                };
                Ok(After::Value(struct_node(name, fields)))
            }
        }
    }

    /// A literal token (after a `-` that is its sign when `negative`).
    fn literal(&mut self, negative: bool) -> PResult<Node> {
        let k = self.bump();
        let text = self.text(k);
        let sign = if negative { "-" } else { "" };
        let lit = match self.toks[k].t {
            T::Int => {
                let (digits, radix) = match text.strip_prefix("0x") {
                    Some(h) => (h, 16),
                    None => (text.as_str(), 10),
                };
                i64::from_str_radix(&format!("{sign}{digits}"), radix)
                    .map(Literal::Int)
                    .map_err(|_| "invalid int literal")
            }
            T::Uint => {
                let body = &text[..text.len() - 1];
                let (digits, radix) = match body.strip_prefix("0x") {
                    Some(h) => (h, 16),
                    None => (body, 10),
                };
                u64::from_str_radix(digits, radix)
                    .map(Literal::Uint)
                    .map_err(|_| "invalid uint literal")
            }
            T::Float => parse_double(&format!("{sign}{text}"))
                .map(Literal::Double)
                .ok_or("invalid double literal"),
            T::Str => unescape(&text, false)
                // A string's unescaped bytes are UTF-8: escapes are encoded code points.
                .map(|b| Literal::String(String::from_utf8_lossy(&b).into_owned())),
            T::Bytes => unescape(&text[1..], true).map(Literal::Bytes),
            T::True => Ok(Literal::Bool(true)),
            T::False => Ok(Literal::Bool(false)),
            _ => Ok(Literal::Null),
        };
        let lit = lit.unwrap_or_else(|e| {
            self.semantic(e);
            // cel-go's visitor keeps the token's text when it cannot unescape it.
            Literal::String(text)
        });
        Ok(Node::leaf(Expr::Literal(lit)))
    }
}

/// cel-go's reserved identifiers (refused as identifiers and global function names, not as
/// field names).
const RESERVED: &[&str] = &[
    "as",
    "break",
    "const",
    "continue",
    "else",
    "false",
    "for",
    "function",
    "if",
    "import",
    "in",
    "let",
    "loop",
    "package",
    "namespace",
    "null",
    "return",
    "true",
    "var",
    "void",
    "while",
];

/// ANTLR's `getErrorDisplay`: newlines, carriage returns and tabs written as escapes.
fn escape_display(s: &str) -> String {
    s.replace('\n', "\\n")
        .replace('\r', "\\r")
        .replace('\t', "\\t")
}

fn from_children(children: Vec<Node>, make: fn(Vec<Expr>) -> Expr) -> Node {
    let height = children.iter().map(|c| c.height).max().unwrap_or(0);
    Node {
        expr: make(children.into_iter().map(|c| c.expr).collect()),
        height,
    }
}

/// cel-go's `balancedTree`: terms `t0 op t1 op … tn` as a balanced binary tree whose in-order
/// walk is the source order.
fn balance(function: &str, mut terms: Vec<Node>) -> Node {
    if terms.len() == 1 {
        return terms.pop().expect("one term");
    }
    let mut slots: Vec<Option<Node>> = terms.into_iter().map(Some).collect();
    let ops = slots.len() - 1;
    balanced(function, &mut slots, 0, ops - 1)
}

fn balanced(function: &str, terms: &mut [Option<Node>], lo: usize, hi: usize) -> Node {
    let mid = (lo + hi).div_ceil(2);
    let left = if mid == lo {
        terms[mid].take()
    } else {
        Some(balanced(function, terms, lo, mid - 1))
    };
    let right = if mid == hi {
        terms[mid + 1].take()
    } else {
        Some(balanced(function, terms, mid + 1, hi))
    };
    let args = [left, right].into_iter().flatten().collect();
    Node::call(function, args, false)
}
