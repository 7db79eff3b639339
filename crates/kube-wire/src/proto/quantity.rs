//! `resource.Quantity` canonicalisation: the string Go's `Quantity.String()` returns for the
//! Quantity that `ParseQuantity(s)` makes, which is what both kube's JSON and its protobuf
//! (`{1: string}`) carry. `"1000m"` becomes `"1"`, `"0.5"` `"500m"`, `"1024Mi"` `"1Gi"`; a
//! string already in the form Go keeps verbatim (its "cached" fast path) is returned as is.
//!
//! The arithmetic is exact (big integers) and follows Go's rules, quirks included: rounding up
//! to nano precision, BinarySI values clamped to MaxInt64, and an exponent without a suffix
//! (`"1000E"` → `"1"` with the exponent dropped, as Go's suffix table has no entry for 10^21).
//! Exponents beyond ±10000 are refused rather than computed (Go would build numbers of millions
//! of digits, or wrap its 32-bit exponent).

use std::borrow::Cow;

use num_bigint::{BigInt, Sign};
use num_traits::{One, Signed, Zero};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    DecimalExponent,
    BinarySI,
    DecimalSI,
}

const FORMAT_WRONG: &str =
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";
const NUMERIC: &str = "unable to parse numeric part of quantity";
const SUFFIX: &str = "unable to parse quantity's suffix";
const MAX_EXPONENT: i64 = 10_000;

struct Parts<'a> {
    positive: bool,
    value: &'a str,
    num: &'a str,
    denom: &'a str,
    suffix: &'a str,
}

/// Go's `parseQuantityString`.
fn split(s: &str) -> Result<Parts<'_>, &'static str> {
    let b = s.as_bytes();
    let end = b.len();
    let mut positive = true;
    let mut pos = 0;
    match b.first() {
        Some(b'-') => {
            positive = false;
            pos = 1;
        }
        Some(b'+') => pos = 1,
        _ => {}
    }
    // Leading zeros.
    while b.get(pos) == Some(&b'0') {
        pos += 1;
    }
    if pos >= end {
        return Ok(Parts {
            positive,
            value: "0",
            num: "0",
            denom: "",
            suffix: "",
        });
    }
    let num_start = pos;
    while b.get(pos).is_some_and(u8::is_ascii_digit) {
        pos += 1;
    }
    let mut num = s.get(num_start..pos).unwrap_or_default();
    if pos >= end {
        return Ok(Parts {
            positive,
            value: s,
            num,
            denom: "",
            suffix: "",
        });
    }
    if num.is_empty() {
        num = "0";
    }
    let mut denom = "";
    if b.get(pos) == Some(&b'.') {
        pos += 1;
        let start = pos;
        while b.get(pos).is_some_and(u8::is_ascii_digit) {
            pos += 1;
        }
        denom = s.get(start..pos).unwrap_or_default();
        if pos >= end {
            return Ok(Parts {
                positive,
                value: s,
                num,
                denom,
                suffix: "",
            });
        }
    }
    let value = s.get(..pos).unwrap_or_default();
    let suffix_start = pos;
    while b.get(pos).is_some_and(|c| b"eEinumkKMGTP".contains(c)) {
        pos += 1;
    }
    if matches!(b.get(pos), Some(b'-' | b'+')) {
        pos += 1;
    }
    while b.get(pos).is_some_and(u8::is_ascii_digit) {
        pos += 1;
    }
    if pos < end {
        return Err(FORMAT_WRONG);
    }
    Ok(Parts {
        positive,
        value,
        num,
        denom,
        suffix: s.get(suffix_start..).unwrap_or_default(),
    })
}

/// Go's suffixer `interpret`: (base, exponent, format).
fn interpret(suffix: &str) -> Option<(u32, i64, Format)> {
    use Format::*;
    Some(match suffix {
        "" => (10, 0, DecimalSI),
        "n" => (10, -9, DecimalSI),
        "u" => (10, -6, DecimalSI),
        "m" => (10, -3, DecimalSI),
        "k" => (10, 3, DecimalSI),
        "M" => (10, 6, DecimalSI),
        "G" => (10, 9, DecimalSI),
        "T" => (10, 12, DecimalSI),
        "P" => (10, 15, DecimalSI),
        "E" => (10, 18, DecimalSI),
        "Ki" => (2, 10, BinarySI),
        "Mi" => (2, 20, BinarySI),
        "Gi" => (2, 30, BinarySI),
        "Ti" => (2, 40, BinarySI),
        "Pi" => (2, 50, BinarySI),
        "Ei" => (2, 60, BinarySI),
        s if s.len() > 1 && (s.starts_with('e') || s.starts_with('E')) => {
            let parsed: i64 = go_parse_int(s.get(1..)?)?;
            // Go keeps `int32(parsed)`.
            (10, i64::from(parsed as i32), DecimalExponent)
        }
        _ => return None,
    })
}

/// `strconv.ParseInt(s, 10, 64)`: an optional sign and decimal digits.
fn go_parse_int(s: &str) -> Option<i64> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// The canonical string of a quantity, as Go's `ParseQuantity(s).String()`.
pub(crate) fn canonical(s: &str) -> Result<Cow<'_, str>, String> {
    Ok(match canon(s)? {
        Canon::Same => Cow::Borrowed(s),
        Canon::Int(value, scale, format) => Cow::Owned(
            canonicalize_small(i128::from(value), scale, format)
                .unwrap_or_else(|| canonicalize(BigInt::from(value), scale, format)),
        ),
        Canon::Other(c) => Cow::Owned(c),
    })
}

/// Appends [`canonical`]`(s)`, without a string of its own when it can.
pub(crate) fn write_canonical(out: &mut Vec<u8>, s: &str) -> Result<(), String> {
    match canon(s)? {
        Canon::Same => out.extend_from_slice(s.as_bytes()),
        Canon::Int(value, scale, format) => {
            if !write_small(out, value, scale, format) {
                out.extend_from_slice(canonicalize(BigInt::from(value), scale, format).as_bytes());
            }
        }
        Canon::Other(c) => out.extend_from_slice(c.as_bytes()),
    }
    Ok(())
}

/// A quantity's canonical form, as [`canon`] finds it.
enum Canon {
    /// The input, as Go keeps it.
    Same,
    /// [`canonicalize`]`(value, scale, format)`: Go's int64 fast path.
    Int(i64, i64, Format),
    /// Computed.
    Other(String),
}

fn canon(s: &str) -> Result<Canon, String> {
    if s.is_empty() {
        return Err(FORMAT_WRONG.into());
    }
    if s == "0" {
        return Ok(Canon::Same);
    }
    let p = split(s)?;
    let (base, exponent, mut format) = interpret(p.suffix).ok_or(SUFFIX)?;
    if exponent.abs() > MAX_EXPONENT {
        return Err(format!(
            "quantity {s:?}: exponent out of the supported range"
        ));
    }
    let digits = i64::try_from(p.num.len() + p.denom.len()).unwrap_or(i64::MAX);

    // Go's int64 fast path: it decides whether Go keeps the input string verbatim.
    let (precision, mut scale, mantissa) = match format {
        Format::DecimalExponent | Format::DecimalSI => (18 - digits, exponent, 1i64),
        Format::BinarySI if p.denom.is_empty() => {
            // `int32(float32(exponent)*3/10)` for exponents 10..60.
            let e = exponent * 3 / 10;
            (
                15 - i64::try_from(p.num.len()).unwrap_or(i64::MAX) - e - 1,
                0,
                1i64 << exponent,
            )
        }
        Format::BinarySI => (-1, 0, 1),
    };
    if precision >= 0 {
        scale -= i64::try_from(p.denom.len()).unwrap_or(i64::MAX);
        if scale >= -9 {
            // The digits of `num` then `denom`, as one number.
            let shifted = || p.num.bytes().chain(p.denom.bytes());
            let value = parse_i64(shifted()).ok_or(NUMERIC)?;
            if let Some(mut result) = value.checked_mul(mantissa) {
                if !p.positive {
                    result = -result;
                }
                let cached = match format {
                    Format::BinarySI => exponent % 10 == 0 && value & 0x07 != 0,
                    _ => {
                        scale % 3 == 0
                            && shifted().rev().take(3).filter(|&c| c == b'0').count() < 3
                            && shifted().next() != Some(b'0')
                    }
                };
                if cached {
                    return Ok(Canon::Same);
                }
                // Exact: value × 10^scale.
                return Ok(Canon::Int(result, -scale, format));
            }
        }
    }

    // The arbitrary-precision path (inf.Dec): unscaled × 10^-dec_scale.
    let (mut unscaled, mut dec_scale) = parse_dec(p.value).ok_or(NUMERIC)?;
    if base == 10 {
        dec_scale -= exponent;
    } else {
        unscaled <<= usize::try_from(exponent).map_err(|_| SUFFIX)?;
    }
    let negative = unscaled.sign() == Sign::Minus;
    let mut abs = unscaled.abs();
    if !abs.is_zero() {
        // Round up (away from zero) to nano precision.
        (abs, dec_scale) = rescale_up(abs, dec_scale, 9);
    }
    if format == Format::BinarySI {
        let max = BigInt::from(i64::MAX);
        if compare(&abs, dec_scale, &max, 0) == std::cmp::Ordering::Greater {
            abs = max;
            dec_scale = 0;
        }
        if !abs.is_zero() && compare(&abs, dec_scale, &BigInt::one(), 0) == std::cmp::Ordering::Less
        {
            format = Format::DecimalSI;
        }
    }
    let value = if negative { -abs } else { abs };
    Ok(Canon::Other(canonicalize(value, dec_scale, format)))
}

/// Go's `strconv.ParseInt(s, 10, 64)` of ASCII digits: `None` when there are none, one is not a
/// digit, or the value overflows.
fn parse_i64(digits: impl Iterator<Item = u8>) -> Option<i64> {
    let mut value: Option<i64> = None;
    for c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        value = value
            .unwrap_or(0)
            .checked_mul(10)?
            .checked_add(i64::from(c - b'0'));
        value?;
    }
    value
}

/// [`canonicalize`] in 128-bit integers, for the values of Go's int64 fast path; `None` when
/// the arithmetic would not fit (then [`canonicalize`] computes it).
fn canonicalize_small(unscaled: i128, scale: i64, format: Format) -> Option<String> {
    let (number, suffix) = small_parts(unscaled, scale, format)?;
    Some(match suffix {
        Suffix::Binary(times) => format!("{number}{}", binary_suffix(times)),
        Suffix::Decimal(exponent) => format!("{number}{}", decimal_suffix(format, exponent)),
    })
}

/// Writes [`canonicalize_small`]'s string; false (nothing written) where it has none.
fn write_small(out: &mut Vec<u8>, value: i64, scale: i64, format: Format) -> bool {
    let Some((number, suffix)) = small_parts(i128::from(value), scale, format) else {
        return false;
    };
    let Ok(number) = i64::try_from(number) else {
        return false;
    };
    super::gojson::int(out, number);
    match suffix {
        Suffix::Binary(times) => out.extend_from_slice(binary_suffix(times).as_bytes()),
        Suffix::Decimal(exponent) => match format {
            Format::DecimalExponent if exponent != 0 => {
                out.push(b'e');
                super::gojson::int(out, exponent);
            }
            _ => out.extend_from_slice(decimal_suffix(format, exponent).as_bytes()),
        },
    }
    true
}

/// The suffix [`small_parts`] found.
enum Suffix {
    /// [`binary_suffix`] of this many 1024s.
    Binary(i64),
    /// [`decimal_suffix`] of this power of ten.
    Decimal(i64),
}

/// The number and suffix of [`canonicalize`]'s string, in 128-bit integers.
fn small_parts(unscaled: i128, scale: i64, format: Format) -> Option<(i128, Suffix)> {
    const TEN: [i128; 19] = {
        let mut t = [1i128; 19];
        let mut i = 1;
        while i < t.len() {
            t[i] = t[i - 1] * 10;
            i += 1;
        }
        t
    };
    let pow10 = |n: i64| TEN.get(usize::try_from(n).ok()?).copied();
    if unscaled == 0 {
        return Some((0, Suffix::Binary(0)));
    }
    let mut format = format;
    let mut integer = None;
    if format == Format::BinarySI {
        // |unscaled| × 10^-scale < 1024
        let abs = unscaled.checked_abs()?;
        let small = if scale >= 0 {
            abs < 1024i128.checked_mul(pow10(scale)?)?
        } else {
            abs.checked_mul(pow10(-scale)?)? < 1024
        };
        if small {
            format = Format::DecimalSI;
        } else if scale <= 0 {
            integer = Some(unscaled.checked_mul(pow10(-scale)?)?);
        } else {
            let div = pow10(scale)?;
            if unscaled % div == 0 {
                integer = Some(unscaled / div);
            } else {
                format = Format::DecimalSI;
            }
        }
    }
    if let (Format::BinarySI, Some(mut v)) = (format, integer) {
        let mut times = 0i64;
        while v != 0 && v % 1024 == 0 {
            v /= 1024;
            times += 1;
        }
        return Some((v, Suffix::Binary(times)));
    }
    let mut mantissa = unscaled;
    let mut exponent = scale.checked_neg()?;
    while mantissa % 10 == 0 {
        mantissa /= 10;
        exponent += 1;
    }
    while exponent % 3 != 0 {
        mantissa = mantissa.checked_mul(10)?;
        exponent -= 1;
    }
    Some((mantissa, Suffix::Decimal(exponent)))
}

/// The suffix of a BinarySI value divided `times` times by 1024.
fn binary_suffix(times: i64) -> &'static str {
    match times * 10 {
        10 => "Ki",
        20 => "Mi",
        30 => "Gi",
        40 => "Ti",
        50 => "Pi",
        60 => "Ei",
        _ => "",
    }
}

/// The suffix of a DecimalSI or DecimalExponent value with a power of ten `exponent`.
fn decimal_suffix(format: Format, exponent: i64) -> Cow<'static, str> {
    match format {
        Format::DecimalExponent if exponent == 0 => "".into(),
        Format::DecimalExponent => format!("e{exponent}").into(),
        _ => match exponent {
            -9 => "n",
            -6 => "u",
            -3 => "m",
            3 => "k",
            6 => "M",
            9 => "G",
            12 => "T",
            15 => "P",
            18 => "E",
            _ => "",
        }
        .into(),
    }
}

/// `inf.Dec.SetString`: an optional sign, digits with at most one dot, at least one digit.
fn parse_dec(s: &str) -> Option<(BigInt, i64)> {
    let body = s.strip_prefix(['+', '-']).unwrap_or(s);
    let (int, frac) = body.split_once('.').unwrap_or((body, ""));
    if int.len() + frac.len() == 0 || !int.bytes().chain(frac.bytes()).all(|c| c.is_ascii_digit()) {
        return None;
    }
    let digits = format!("{int}{frac}");
    let mut v: BigInt = digits.parse().ok()?;
    if s.starts_with('-') {
        v = -v;
    }
    Some((v, i64::try_from(frac.len()).ok()?))
}

/// `inf.Dec.Round(x, scale, RoundUp)` of a non-negative value: to exactly `scale`.
fn rescale_up(v: BigInt, from: i64, to: i64) -> (BigInt, i64) {
    if from > to {
        let div = pow10(from - to);
        let (q, r) = (&v / &div, &v % &div);
        (if r.is_zero() { q } else { q + 1 }, to)
    } else {
        (v * pow10(to - from), to)
    }
}

fn pow10(n: i64) -> BigInt {
    num_traits::pow(BigInt::from(10), usize::try_from(n).unwrap_or(0))
}

/// Compares a × 10^-sa with b × 10^-sb.
fn compare(a: &BigInt, sa: i64, b: &BigInt, sb: i64) -> std::cmp::Ordering {
    if sa >= sb {
        a.cmp(&(b * pow10(sa - sb)))
    } else {
        (a * pow10(sb - sa)).cmp(b)
    }
}

/// Go's `CanonicalizeBytes` + suffix of the value `unscaled × 10^-scale` in `format`.
fn canonicalize(unscaled: BigInt, scale: i64, format: Format) -> String {
    if unscaled.is_zero() {
        return "0".into();
    }
    let mut format = format;
    let mut integer = None;
    if format == Format::BinarySI {
        let small =
            compare(&unscaled.abs(), scale, &BigInt::from(1024), 0) == std::cmp::Ordering::Less;
        if small {
            format = Format::DecimalSI;
        } else if scale <= 0 {
            integer = Some(unscaled.clone() * pow10(-scale));
        } else {
            let div = pow10(scale);
            if (&unscaled % &div).is_zero() {
                integer = Some(&unscaled / &div);
            } else {
                format = Format::DecimalSI;
            }
        }
    }
    if let (Format::BinarySI, Some(mut v)) = (format, integer) {
        let k = BigInt::from(1024);
        let mut times = 0i64;
        while !v.is_zero() && (&v % &k).is_zero() {
            v /= &k;
            times += 1;
        }
        return format!("{v}{}", binary_suffix(times));
    }
    let mut mantissa = unscaled;
    let mut exponent = -scale;
    let ten = BigInt::from(10);
    while (&mantissa % &ten).is_zero() {
        mantissa /= &ten;
        exponent += 1;
    }
    while exponent % 3 != 0 {
        mantissa *= &ten;
        exponent -= 1;
    }
    format!("{mantissa}{}", decimal_suffix(format, exponent))
}

#[cfg(test)]
mod tests {
    use super::canonical;

    #[test]
    fn canonical_forms_as_go() {
        for (input, want) in [
            ("0", "0"),
            ("100m", "100m"),
            ("1000m", "1"),
            ("0.5", "500m"),
            ("1.5", "1500m"),
            ("1Gi", "1Gi"),
            ("1024Mi", "1Gi"),
            ("1536Mi", "1536Mi"),
            ("1.5Gi", "1536Mi"),
            ("0.5Ki", "512"),
            ("128974848", "128974848"),
            ("129e6", "129e6"),
            ("129M", "129M"),
            ("123Mi", "123Mi"),
            ("1e3", "1e3"),
            ("1E3", "1E3"),
            ("1000", "1k"),
            ("1k", "1k"),
            ("1000k", "1M"),
            ("-1", "-1"),
            ("-1000m", "-1"),
            ("+5", "+5"),
            ("0.1n", "1n"),
            ("1.5n", "2n"),
            ("-0.0000000001", "-1n"),
            ("1000E", "1"),
            ("12e-3", "12e-3"),
            ("0.001", "1m"),
            ("00100m", "00100m"),
            (".5", "500m"),
            ("5.", "5."),
            ("1Ki", "1Ki"),
            ("8Ki", "8Ki"),
            ("1024", "1024"),
            ("1048576", "1048576"),
            ("10Ei", "9223372036854775807"),
            ("12345678901234567890", "12345678901234567890"),
            ("123456789012345678901234", "123456789012345678901234"),
            ("000", "0"),
        ] {
            assert_eq!(canonical(input).as_deref(), Ok(want), "{input}");
        }
        // Pairs from apimachinery's TestQuantityString and TestQuantityParseEmit, and their
        // negations.
        for (input, want) in [
            ("307200Ki", "300Mi"),
            ("1025024Mi", "1001Gi"),
            ("1024Gi", "1Ti"),
            ("5000m", "5"),
            ("1000M", "1G"),
            ("0.001T", "1G"),
            ("1000u", "1m"),
            ("1.08", "1080m"),
            ("1080000000n", "1080m"),
            (".001e12", "1e9"),
            ("0.001e0", "1e-3"),
            ("1000e-12", "1e-9"),
            (".001Ki", "1024m"),
            (".000001Ki", "1024u"),
            (".000000001Ki", "1024n"),
            (".000000000001Ki", "2n"),
        ] {
            assert_eq!(canonical(input).as_deref(), Ok(want), "{input}");
            let neg = format!("-{input}");
            assert_eq!(
                canonical(&neg).as_deref(),
                Ok(format!("-{want}").as_str()),
                "{neg}"
            );
            // A canonical string is kept verbatim.
            assert_eq!(canonical(want).as_deref(), Ok(want));
        }
        for bad in ["", "abc", "1.2.3", "1Zi", "1e", "--1", "1 ", "."] {
            assert!(canonical(bad).is_err() || bad == ".", "{bad} should fail");
        }
        assert_eq!(canonical(".").as_deref(), Ok("0"));
    }

    /// The 128-bit canonicalisation agrees with the exact one wherever it answers.
    #[test]
    fn small_canonicalisation_is_exact() {
        use super::{BigInt, Format, canonicalize, canonicalize_small, write_small};
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut answered = 0;
        for i in 0..200_000 {
            // Values with runs of trailing zeros and powers of two, small and large.
            let r = next();
            let base = match i % 4 {
                0 => (r >> (r % 64)) as i64,
                1 => ((r % 1000) as i64) * 10i64.pow((r >> 32) as u32 % 16),
                2 => ((r % 64) as i64) << ((r >> 20) % 60),
                _ => (r % 100_000) as i64,
            };
            let unscaled = if r & (1 << 63) != 0 {
                base.wrapping_neg()
            } else {
                base
            };
            let scale = (next() % 40) as i64 - 20;
            let format = [Format::DecimalSI, Format::BinarySI, Format::DecimalExponent]
                [(next() % 3) as usize];
            let mut written = Vec::new();
            if write_small(&mut written, unscaled, scale, format) {
                assert_eq!(
                    String::from_utf8(written).unwrap(),
                    canonicalize(BigInt::from(unscaled), scale, format)
                );
            }
            if let Some(small) = canonicalize_small(i128::from(unscaled), scale, format) {
                answered += 1;
                assert_eq!(
                    small,
                    canonicalize(BigInt::from(unscaled), scale, format),
                    "{unscaled} e{} {format:?}",
                    -scale
                );
            }
        }
        assert!(answered > 150_000, "{answered}");
    }
}
