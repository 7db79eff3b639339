//! `shardSelector` (KEP-5866, "sharded list and watch", kube 1.36 behind the feature gate
//! `ShardedListAndWatch`): a LIST or WATCH that asks for only the objects whose hashed uid (or
//! namespace) falls in some ranges, so that N clients can split a collection between them.
//!
//! This module owns the selector itself, exactly as kube-apiserver 1.36 reads it and answers it:
//! - [`ShardSelector::parse`]: kube parses the parameter as a CEL expression (cel-go's parser,
//!   redone in the `cel` submodule) and walks the AST (`k8s.io/apiserver/pkg/sharding/parser.go`); only
//!   `shardRange(object.metadata.uid | object.metadata.namespace, '0x…', '0x…')` calls ORed with
//!   `||` pass, every range on the same field, each bound 16 lowercase hex digits after `0x`
//!   (or `0x10000000000000000`, 2^64, as an end), start below end. Its errors are kube's texts
//!   word for word ([`ShardSelectorError`]), except cel-go's syntax errors (see [`cel`]).
//! - [`shard_hash`]: FNV-1a, 64-bit, over the field's bytes (`k8s.io/apimachinery/pkg/sharding`);
//!   a cluster-scoped object's namespace is `""`.
//! - [`ShardSelector::matches`]: any range `[start, end)` holds the hash.
//! - `Display`: kube's canonical form (`Selector.String()`), what it echoes in a list's
//!   `metadata.shardInfo.selector`.
//!
//! Which requests honour the parameter, and what the answers carry, is the server's business
//! (the simulator's `http`/`watch`): kube parses it only when the gate is on and the value is
//! not empty, answers a parse error as a plain 500 (`invalid shard selector: …`, no reason),
//! ANDs it with the label and field selectors, and sets `shardInfo` on typed lists only.

mod cel;
#[cfg(test)]
mod tests;

pub use cel::Kind as ExprKind;
use cel::{Expr, Literal};

use crate::gofmt::quote;

/// The field a selector hashes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ShardField {
    /// `object.metadata.uid`.
    Uid,
    /// `object.metadata.namespace` (`""` for cluster-scoped objects).
    Namespace,
}

impl ShardField {
    /// The field path as written in a selector.
    pub fn path(self) -> &'static str {
        match self {
            ShardField::Uid => "object.metadata.uid",
            ShardField::Namespace => "object.metadata.namespace",
        }
    }

    fn from_path(path: &str) -> Option<ShardField> {
        match path {
            "object.metadata.uid" => Some(ShardField::Uid),
            "object.metadata.namespace" => Some(ShardField::Namespace),
            _ => None,
        }
    }
}

/// The end of the hash space, 2^64: the only 17-digit bound, and only useful as an end.
pub const HASH_SPACE_END: u128 = 1 << 64;

/// One range `[start, end)` of hashes, `start < end <= 2^64`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ShardRange {
    start: u128,
    end: u128,
}

impl ShardRange {
    /// The range `[start, end)`, if `start < end <= 2^64`.
    pub fn new(start: u128, end: u128) -> Option<ShardRange> {
        (start < end && end <= HASH_SPACE_END).then_some(ShardRange { start, end })
    }

    /// The first hash in the range.
    pub fn start(&self) -> u128 {
        self.start
    }

    /// The first hash past the range (2^64 at most).
    pub fn end(&self) -> u128 {
        self.end
    }

    /// Whether `hash` is in the range.
    pub fn contains(&self, hash: u64) -> bool {
        let h = u128::from(hash);
        self.start <= h && h < self.end
    }
}

/// A parsed `shardSelector`: one field and the ranges of its hash that match (ORed), in the
/// order written.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ShardSelector {
    field: ShardField,
    ranges: Vec<ShardRange>,
}

impl ShardSelector {
    /// A selector of `ranges` (at least one) of `field`'s hash.
    pub fn new(field: ShardField, ranges: Vec<ShardRange>) -> Option<ShardSelector> {
        (!ranges.is_empty()).then_some(ShardSelector { field, ranges })
    }

    /// Parses a `shardSelector` as kube-apiserver 1.36 does (`sharding.Parse`): the value is
    /// trimmed of white space first, and one that is then empty is an error (kube parses only
    /// a non-empty parameter: an empty one is no selector at all, the caller's check).
    ///
    /// Every error of kube's AST walk has kube's text. A CEL syntax error is `CEL parse error:
    /// ` and cel-go's first error: the errors cel-go's visitor reports (reserved identifiers,
    /// bad literals, the size and recursion limits) have cel-go's text, but ANTLR's syntax
    /// errors (`Syntax error: mismatched input …`) only its style: the expected-token sets of
    /// its error recovery are not always reproduced, nor where it first notices the error.
    pub fn parse(input: &str) -> Result<ShardSelector, ShardSelectorError> {
        parse(input).map_err(ShardSelectorError)
    }

    /// The field whose hash is matched.
    pub fn field(&self) -> ShardField {
        self.field
    }

    /// The ranges, in the order written.
    pub fn ranges(&self) -> &[ShardRange] {
        &self.ranges
    }

    /// Whether an object with this uid and namespace (`""` for a cluster-scoped object) is in
    /// the shard.
    pub fn matches(&self, uid: &str, namespace: &str) -> bool {
        let value = match self.field {
            ShardField::Uid => uid,
            ShardField::Namespace => namespace,
        };
        self.matches_hash(shard_hash(value.as_bytes()))
    }

    /// Whether a hash of the selector's field (from [`shard_hash`]) is in the shard.
    pub fn matches_hash(&self, hash: u64) -> bool {
        self.ranges.iter().any(|r| r.contains(hash))
    }
}

impl std::fmt::Display for ShardSelector {
    /// kube's `Selector.String()`: `shardRange(<field>, '0x<16 hex>', '0x<16 hex>')` per range,
    /// joined by ` || ` (2^64 is `0x10000000000000000`). It parses back to the same selector.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, r) in self.ranges.iter().enumerate() {
            if i > 0 {
                f.write_str(" || ")?;
            }
            write!(
                f,
                "shardRange({}, '0x{:016x}', '0x{:016x}')",
                self.field.path(),
                r.start,
                r.end
            )?;
        }
        Ok(())
    }
}

/// FNV-1a, 64-bit, of `value`: the hash kube's shard selectors range over
/// (`sharding.HashField`, `hash/fnv`'s `New64a` over the string's bytes).
pub fn shard_hash(value: &[u8]) -> u64 {
    const OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    value
        .iter()
        .fold(OFFSET_BASIS, |h, b| (h ^ u64::from(*b)).wrapping_mul(PRIME))
}

/// A `shardSelector` kube refuses. Displays as the message of kube's answer (a 500 without a
/// reason): `invalid shard selector: ` and [`ShardParseError`]'s text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid shard selector: {0}")]
pub struct ShardSelectorError(pub ShardParseError);

/// Why kube's `sharding.Parse` refuses a selector, with its text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShardParseError {
    /// Nothing but white space.
    #[error("empty shard selector is not allowed; omit the parameter for unfiltered lists")]
    Empty,
    /// cel-go's first error (see [`ShardSelector::parse`]).
    #[error("CEL parse error: {0}")]
    Cel(String),
    /// Ranges over different fields: the first range's field and the first that differs.
    #[error("all shard ranges must use the same field, got {} and {}", quote(.0), quote(.1))]
    MixedFields(String, String),
    /// An `||` with other than two operands (cel-go's parser always builds two: unreachable,
    /// kept as kube has it).
    #[error("|| operator requires exactly 2 arguments")]
    OrArity,
    /// A call of anything but `shardRange` and `||` (operators by cel-go's name, e.g. `_&&_`).
    #[error("unsupported function {}; only shardRange() and || are allowed", quote(.0))]
    UnsupportedFunction(String),
    /// Something other than a call where a range or an `||` belongs.
    #[error("unexpected expression kind {0}; expected shardRange() call or || operator")]
    UnexpectedKind(ExprKind),
    /// `shardRange` with other than three arguments.
    #[error("shardRange() requires exactly 3 arguments, got {0}")]
    Arity(usize),
    /// A first argument that is not a chain of identifiers (the kind of the node that is not).
    #[error(
        "shardRange() first argument: expected field path (e.g. object.metadata.uid), got expression kind {0}"
    )]
    FieldKind(ExprKind),
    /// A field path other than the two.
    #[error(
        "unsupported field path {}; supported: object.metadata.uid, object.metadata.namespace",
        quote(.0)
    )]
    UnsupportedField(String),
    /// A bound (`hexStart` or `hexEnd`) that is not a literal.
    #[error("{0} must be a string literal (e.g. '0xff'), got expression kind {1}")]
    BoundKind(&'static str, ExprKind),
    /// A bound that is a literal of another type (Go's `%T` of its value: `int64`, `uint64`,
    /// `float64`, `bool`, `[]uint8`, `structpb.NullValue`).
    #[error("{0} must be a string literal, got {1}")]
    BoundType(&'static str, &'static str),
    /// A bound without the `0x` prefix (`0X` included).
    #[error("{} must have '0x' prefix, got {}", .0, quote(.1))]
    BoundPrefix(&'static str, String),
    /// `0x` and nothing after it.
    #[error("{0}: hex value is required after '0x'")]
    BoundEmpty(&'static str),
    /// More than 17 bytes after `0x`: their count and them.
    #[error("{}: hex value too long ({} chars, max 17): {}", .0, .1, quote(.2))]
    BoundTooLong(&'static str, usize, String),
    /// A character that is not `[0-9a-f]`: it and the whole bound.
    #[error("{}: invalid hex character {} in {}", .0, quote(.1), quote(.2))]
    BoundChar(&'static str, String, String),
    /// 17 digits other than 2^64.
    #[error("{}: 17-digit hex value must be '0x10000000000000000' (2^64), got {}", .0, quote(.1))]
    Bound17(&'static str, String),
    /// Fewer than 16 digits: the bound and the padded form kube suggests.
    #[error(
        "{} must be a 0x-prefixed 16-digit hex value, got {} (did you mean {}?)",
        .0,
        quote(.1),
        quote(.2)
    )]
    BoundShort(&'static str, String, String),
    /// A start not below its end (both as written).
    #[error("shard range start {0} must be less than end {1}")]
    NotLess(String, String),
}

/// kube's `sharding.Parse`.
fn parse(input: &str) -> Result<ShardSelector, ShardParseError> {
    let expr = input.trim();
    if expr.is_empty() {
        return Err(ShardParseError::Empty);
    }
    let ast = cel::parse(expr).map_err(ShardParseError::Cel)?;
    let mut ranges = Vec::new();
    walk(&ast, &mut ranges)?;
    let (first, _) = ranges[0];
    if let Some((other, _)) = ranges.iter().find(|(f, _)| *f != first) {
        return Err(ShardParseError::MixedFields(
            first.path().into(),
            other.path().into(),
        ));
    }
    Ok(ShardSelector {
        field: first,
        ranges: ranges.into_iter().map(|(_, r)| r).collect(),
    })
}

/// kube's `walkExpr`: the root is a `shardRange(…)` call or an `||` of two such roots.
fn walk(e: &Expr, out: &mut Vec<(ShardField, ShardRange)>) -> Result<(), ShardParseError> {
    let Expr::Call { function, args, .. } = e else {
        return Err(ShardParseError::UnexpectedKind(e.kind()));
    };
    match function.as_str() {
        "_||_" => {
            let [left, right] = args.as_slice() else {
                return Err(ShardParseError::OrArity);
            };
            walk(left, out)?;
            walk(right, out)
        }
        // The target of a receiver call (`x.shardRange(…)`) is never looked at, as in kube.
        "shardRange" => {
            out.push(shard_range(args)?);
            Ok(())
        }
        _ => Err(ShardParseError::UnsupportedFunction(function.clone())),
    }
}

/// kube's `parseShardRangeCall`.
fn shard_range(args: &[Expr]) -> Result<(ShardField, ShardRange), ShardParseError> {
    let [field, start, end] = args else {
        return Err(ShardParseError::Arity(args.len()));
    };
    let path = field_path(field)?;
    let field = ShardField::from_path(&path).ok_or(ShardParseError::UnsupportedField(path))?;
    let (start_text, start) = hex_bound(start, "hexStart")?;
    let (end_text, end) = hex_bound(end, "hexEnd")?;
    let range =
        ShardRange::new(start, end).ok_or(ShardParseError::NotLess(start_text, end_text))?;
    Ok((field, range))
}

/// kube's `extractFieldPath`: an identifier and its selects, joined by dots.
fn field_path(e: &Expr) -> Result<String, ShardParseError> {
    match e {
        Expr::Ident(name) => Ok(name.clone()),
        Expr::Select { operand, field } => Ok(format!("{}.{field}", field_path(operand)?)),
        other => Err(ShardParseError::FieldKind(other.kind())),
    }
}

/// kube's `extractHexLiteral`, in its order of checks: a bound as written and its value.
fn hex_bound(e: &Expr, name: &'static str) -> Result<(String, u128), ShardParseError> {
    let Expr::Literal(lit) = e else {
        return Err(ShardParseError::BoundKind(name, e.kind()));
    };
    let Literal::String(s) = lit else {
        return Err(ShardParseError::BoundType(name, lit.go_type()));
    };
    let Some(hex) = s.strip_prefix("0x") else {
        return Err(ShardParseError::BoundPrefix(name, s.clone()));
    };
    if hex.is_empty() {
        return Err(ShardParseError::BoundEmpty(name));
    }
    // Go's `len`: bytes, not characters.
    if hex.len() > 17 {
        return Err(ShardParseError::BoundTooLong(name, hex.len(), hex.into()));
    }
    if let Some(c) = hex.chars().find(|c| !matches!(c, '0'..='9' | 'a'..='f')) {
        return Err(ShardParseError::BoundChar(name, c.into(), s.clone()));
    }
    match hex.len() {
        17 if s != "0x10000000000000000" => Err(ShardParseError::Bound17(name, s.clone())),
        16 | 17 => {
            let value = u128::from_str_radix(hex, 16).expect("16 or 17 hex digits");
            Ok((s.clone(), value))
        }
        n => Err(ShardParseError::BoundShort(
            name,
            s.clone(),
            format!("0x{}{hex}", "0".repeat(16 - n)),
        )),
    }
}
