//! `metav1.Time`, `metav1.MicroTime` and `metav1.Duration` as Go writes and reads them: RFC 3339
//! with seconds (`2006-01-02T15:04:05Z`) or microseconds (`…05.000000Z`) in UTC, and
//! `time.Duration`'s `String()`/`ParseDuration`.
//!
//! Conversions only, on Unix seconds and nanoseconds; which field holds which is
//! [`super::encode`]'s and [`super::decode`]'s business.

/// Unix seconds of Go's zero `time.Time` (0001-01-01T00:00:00Z): `IsZero()` is true exactly
/// for this instant, and such a Time is `null` in JSON and an empty protobuf message.
pub(crate) const ZERO_UNIX: i64 = -62_135_596_800;

/// An instant: Unix seconds and non-negative nanoseconds below 1e9.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Instant {
    pub secs: i64,
    pub nanos: u32,
}

impl Instant {
    /// Go's `time.Unix(sec, nsec)`: nanoseconds outside [0, 1e9) carry into the seconds.
    #[inline]
    pub(crate) fn unix(secs: i64, nanos: i64) -> Instant {
        // Usually nothing to carry: no 128-bit division.
        if let Ok(n) = u32::try_from(nanos)
            && n < 1_000_000_000
        {
            return Instant { secs, nanos: n };
        }
        let total = i128::from(secs) * 1_000_000_000 + i128::from(nanos);
        let secs = total.div_euclid(1_000_000_000);
        let nanos = total.rem_euclid(1_000_000_000);
        Instant {
            secs: i64::try_from(secs).unwrap_or(if secs < 0 { i64::MIN } else { i64::MAX }),
            nanos: u32::try_from(nanos).unwrap_or(0),
        }
    }

    /// Go's `IsZero()`.
    pub(crate) fn is_zero(self) -> bool {
        self.secs == ZERO_UNIX && self.nanos == 0
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date.
pub(crate) fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = i64::from(m);
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The proleptic Gregorian date of a day count since 1970-01-01.
pub(crate) fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    (y, m as u32, d as u32)
}

fn is_leap(y: i64) -> bool {
    y % 4 == 0 && (y % 100 != 0 || y % 400 == 0)
}

fn days_in(m: u32, y: i64) -> u32 {
    match m {
        2 if is_leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Go's `appendInt(b, x, width)` as the time formatter uses it: a `-` sign, then at least
/// `width` digits.
fn push_padded(out: &mut Vec<u8>, x: i64, width: usize) {
    if x < 0 {
        out.push(b'-');
    }
    let mut buf = [0u8; 20];
    let digits = super::gojson::digits(&mut buf, x.unsigned_abs());
    for _ in digits.len()..width {
        out.push(b'0');
    }
    out.extend_from_slice(digits);
}

/// `"00"` to `"99"`, two bytes each: [`format`] writes two digits at a time.
static PAIRS: [u8; 200] = {
    let mut pairs = [0u8; 200];
    let mut i = 0;
    while i < 100 {
        pairs[2 * i] = b'0' + (i / 10) as u8;
        pairs[2 * i + 1] = b'0' + (i % 10) as u8;
        i += 1;
    }
    pairs
};

/// Writes `v % 100` as two digits at `b[at..at + 2]`.
#[inline(always)]
fn put2(b: &mut [u8; 27], at: usize, v: u32) {
    let i = (v % 100) as usize * 2;
    if let (Some(pair), Some(slot)) = (PAIRS.get(i..i + 2), b.get_mut(at..at + 2)) {
        slot.copy_from_slice(pair);
    }
}

thread_local! {
    /// The day [`format`] last wrote, and its `YYYY-MM-DD`: an object's times, and a list's
    /// objects', mostly fall on a few days, and the date is the costly part to compute.
    static LAST_DAY: std::cell::Cell<(i64, [u8; 10])> = const { std::cell::Cell::new((i64::MIN, [0; 10])) };
}

/// Appends an instant in UTC as `2006-01-02T15:04:05Z`, or with `micros` as
/// `2006-01-02T15:04:05.000000Z` (no quotes).
pub(crate) fn format(out: &mut Vec<u8>, t: Instant, micros: bool) {
    let days = t.secs.div_euclid(86_400);
    let rem = t.secs.rem_euclid(86_400) as u32;
    let mut b = *b"0000-00-00T00:00:00.000000Z";
    let (last_day, last_date) = LAST_DAY.get();
    if days == last_day {
        b[..10].copy_from_slice(&last_date);
    } else {
        let (y, m, d) = civil_from_days(days);
        let Some(year) = u32::try_from(y).ok().filter(|y| *y <= 9999) else {
            // Years of other than four digits (odd ones): as Go's `appendInt` pads them.
            return format_padded(out, t, micros);
        };
        put2(&mut b, 0, year / 100);
        put2(&mut b, 2, year);
        put2(&mut b, 5, m);
        put2(&mut b, 8, d);
        let mut date = [0u8; 10];
        date.copy_from_slice(&b[..10]);
        LAST_DAY.set((days, date));
    }
    // Four-digit years: fixed positions.
    put2(&mut b, 11, rem / 3600);
    put2(&mut b, 14, rem / 60 % 60);
    put2(&mut b, 17, rem % 60);
    if micros {
        let us = t.nanos / 1000;
        put2(&mut b, 20, us / 10_000);
        put2(&mut b, 22, us / 100);
        put2(&mut b, 24, us);
        out.extend_from_slice(&b);
    } else {
        b[19] = b'Z';
        out.extend_from_slice(&b[..20]);
    }
}

/// [`format`] for any year, as Go's `appendInt` pads it.
fn format_padded(out: &mut Vec<u8>, t: Instant, micros: bool) {
    let days = t.secs.div_euclid(86_400);
    let rem = t.secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    push_padded(out, y, 4);
    out.push(b'-');
    push_padded(out, i64::from(m), 2);
    out.push(b'-');
    push_padded(out, i64::from(d), 2);
    out.push(b'T');
    push_padded(out, rem / 3600, 2);
    out.push(b':');
    push_padded(out, rem / 60 % 60, 2);
    out.push(b':');
    push_padded(out, rem % 60, 2);
    if micros {
        out.push(b'.');
        push_padded(out, i64::from(t.nanos / 1000), 6);
    }
    out.push(b'Z');
}

fn digits(s: &[u8], min: u32, max: u32) -> Option<u32> {
    let mut x: u32 = 0;
    for &c in s {
        if !c.is_ascii_digit() {
            return None;
        }
        x = x * 10 + u32::from(c - b'0');
    }
    (min..=max).contains(&x).then_some(x)
}

/// Parses a time as Go's `time.Parse(time.RFC3339, s)` (`micros == false`: fractional seconds
/// optional, any number of digits) or `time.Parse(metav1.RFC3339Micro, s)` (`micros == true`:
/// exactly six fractional digits). Only the strict RFC 3339 shapes are accepted: the odd forms
/// Go's general layout parser also takes (one-digit hours) are refused.
pub(crate) fn parse(s: &str, micros: bool) -> Result<Instant, String> {
    let bad = || format!("parsing time {s:?}: not RFC 3339");
    let b = s.as_bytes();
    if b.len() < 19 {
        return Err(bad());
    }
    let sep = |i: usize, c: u8| b.get(i) == Some(&c);
    if !(sep(4, b'-') && sep(7, b'-') && sep(10, b'T') && sep(13, b':') && sep(16, b':')) {
        return Err(bad());
    }
    let year = digits(b.get(0..4).ok_or_else(bad)?, 0, 9999).ok_or_else(bad)?;
    let month = digits(b.get(5..7).ok_or_else(bad)?, 1, 12).ok_or_else(bad)?;
    let year = i64::from(year);
    let day = digits(b.get(8..10).ok_or_else(bad)?, 1, days_in(month, year)).ok_or_else(bad)?;
    let hour = digits(b.get(11..13).ok_or_else(bad)?, 0, 23).ok_or_else(bad)?;
    let min = digits(b.get(14..16).ok_or_else(bad)?, 0, 59).ok_or_else(bad)?;
    let sec = digits(b.get(17..19).ok_or_else(bad)?, 0, 59).ok_or_else(bad)?;
    let mut rest = b.get(19..).unwrap_or_default();
    let mut nanos: i64 = 0;
    if rest.first() == Some(&b'.') && rest.get(1).is_some_and(u8::is_ascii_digit) {
        let n = rest
            .iter()
            .skip(1)
            .take_while(|c| c.is_ascii_digit())
            .count();
        if micros && n != 6 {
            return Err(bad());
        }
        let frac = rest.get(1..=n).unwrap_or_default();
        for i in 0..9 {
            nanos = nanos * 10 + frac.get(i).map_or(0, |c| i64::from(c - b'0'));
        }
        rest = rest.get(n + 1..).unwrap_or_default();
    } else if micros {
        return Err(bad());
    }
    let offset: i64 = if rest == b"Z" {
        0
    } else if rest.len() == 6
        && matches!(rest.first(), Some(b'+' | b'-'))
        && rest.get(3) == Some(&b':')
    {
        let hh = digits(rest.get(1..3).unwrap_or_default(), 0, 23).ok_or_else(bad)?;
        let mm = digits(rest.get(4..6).unwrap_or_default(), 0, 59).ok_or_else(bad)?;
        let off = i64::from(hh * 3600 + mm * 60);
        if rest.first() == Some(&b'-') {
            -off
        } else {
            off
        }
    } else {
        return Err(bad());
    };
    let days = days_from_civil(year, month, day);
    let secs = days * 86_400 + i64::from(hour * 3600 + min * 60 + sec) - offset;
    Ok(Instant::unix(secs, nanos))
}

/// Go's `time.Duration.String()`.
pub(crate) fn duration_string(d: i64) -> String {
    if d == 0 {
        return "0s".into();
    }
    let neg = d < 0;
    let u = d.unsigned_abs();
    let mut s = String::new();
    if u < 1_000_000_000 {
        let (prec, unit) = match u {
            0..1_000 => (0, "ns"),
            1_000..1_000_000 => (3, "µs"),
            _ => (6, "ms"),
        };
        s.push_str(&frac(u, prec));
        s.push_str(unit);
    } else {
        let secs = u / 1_000_000_000;
        let fraction = frac(u % 1_000_000_000, 9);
        // `frac` of the sub-second part renders "0.5" style: keep the part after the dot.
        let fraction = fraction.strip_prefix('0').unwrap_or("");
        let (h, m, sec) = (secs / 3600, secs / 60 % 60, secs % 60);
        if h > 0 {
            s.push_str(&format!("{h}h{m}m"));
        } else if m > 0 {
            s.push_str(&format!("{m}m"));
        }
        s.push_str(&format!("{sec}{fraction}s"));
    }
    if neg {
        s.insert(0, '-');
    }
    s
}

/// `v / 10^prec` with its fraction, trailing zeros (and a bare dot) dropped.
fn frac(v: u64, prec: u32) -> String {
    let p = 10u64.pow(prec);
    let (int, f) = (v / p, v % p);
    if f == 0 || prec == 0 {
        return int.to_string();
    }
    let digits = format!("{f:0width$}", width = prec as usize);
    format!("{int}.{}", digits.trim_end_matches('0'))
}

/// Go's `time.ParseDuration`.
pub(crate) fn parse_duration(orig: &str) -> Result<i64, String> {
    let q = crate::gofmt::time_quote;
    let bad = || format!("time: invalid duration {}", q(orig));
    let mut s = orig.as_bytes();
    let mut neg = false;
    if let Some(&c) = s.first()
        && (c == b'-' || c == b'+')
    {
        neg = c == b'-';
        s = s.get(1..).unwrap_or_default();
    }
    if s == b"0" {
        return Ok(0);
    }
    if s.is_empty() {
        return Err(bad());
    }
    const LIMIT: u64 = 1 << 63;
    let mut d: u64 = 0;
    while !s.is_empty() {
        if !s.first().is_some_and(|c| *c == b'.' || c.is_ascii_digit()) {
            return Err(bad());
        }
        let mut v: u64 = 0;
        let int_len = s.iter().take_while(|c| c.is_ascii_digit()).count();
        for &c in s.get(..int_len).unwrap_or_default() {
            v = v
                .checked_mul(10)
                .and_then(|v| v.checked_add(u64::from(c - b'0')))
                .filter(|v| *v <= LIMIT)
                .ok_or_else(bad)?;
        }
        s = s.get(int_len..).unwrap_or_default();
        let mut f: u64 = 0;
        let mut scale: f64 = 1.0;
        let mut post = false;
        if s.first() == Some(&b'.') {
            s = s.get(1..).unwrap_or_default();
            let n = s.iter().take_while(|c| c.is_ascii_digit()).count();
            let mut overflow = false;
            for &c in s.get(..n).unwrap_or_default() {
                if overflow {
                    continue;
                }
                match f
                    .checked_mul(10)
                    .and_then(|x| x.checked_add(u64::from(c - b'0')))
                    .filter(|x| *x <= LIMIT)
                {
                    Some(x) => {
                        f = x;
                        scale *= 10.0;
                    }
                    None => overflow = true,
                }
            }
            post = n > 0;
            s = s.get(n..).unwrap_or_default();
        }
        if int_len == 0 && !post {
            return Err(bad());
        }
        let unit_len = s
            .iter()
            .take_while(|c| **c != b'.' && !c.is_ascii_digit())
            .count();
        if unit_len == 0 {
            return Err(format!("time: missing unit in duration {}", q(orig)));
        }
        let unit: u64 = match s.get(..unit_len).unwrap_or_default() {
            b"ns" => 1,
            // "µs" (U+00B5) and "μs" (U+03BC).
            b"us" | b"\xc2\xb5s" | b"\xce\xbcs" => 1_000,
            b"ms" => 1_000_000,
            b"s" => 1_000_000_000,
            b"m" => 60_000_000_000,
            b"h" => 3_600_000_000_000,
            other => {
                return Err(format!(
                    "time: unknown unit {} in duration {}",
                    q(&String::from_utf8_lossy(other)),
                    q(orig)
                ));
            }
        };
        s = s.get(unit_len..).unwrap_or_default();
        if v > LIMIT / unit {
            return Err(bad());
        }
        v *= unit;
        if f > 0 {
            // Go computes the fraction in float64 and truncates.
            v = v
                .checked_add((f as f64 * (unit as f64 / scale)) as u64)
                .ok_or_else(bad)?;
            if v > LIMIT {
                return Err(bad());
            }
        }
        d = d.checked_add(v).filter(|d| *d <= LIMIT).ok_or_else(bad)?;
    }
    if neg {
        return Ok((d as i64).wrapping_neg());
    }
    i64::try_from(d).map_err(|_| bad())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fmt(t: Instant, micros: bool) -> String {
        let mut out = Vec::new();
        format(&mut out, t, micros);
        String::from_utf8(out).unwrap()
    }

    /// One step of a xorshift generator: the tests' reproducible stream of instants.
    fn xorshift(x: &mut u64) {
        *x ^= *x << 13;
        *x ^= *x >> 7;
        *x ^= *x << 17;
    }

    /// The fixed-position writer (with its cached date) writes what the general one does,
    /// over years 0 to 9999, days in and out of order, with and without microseconds.
    #[test]
    fn fixed_positions_as_padded() {
        let padded = |t: Instant, micros: bool| {
            let mut out = Vec::new();
            format_padded(&mut out, t, micros);
            String::from_utf8(out).unwrap()
        };
        let (lo, hi) = (ZERO_UNIX, 253_402_300_799i64); // 0001-01-01 to 9999-12-31T23:59:59
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for i in 0..200_000i64 {
            xorshift(&mut x);
            let secs = match i % 4 {
                0 => lo + (x % (hi - lo) as u64) as i64,
                1 => 1_700_000_000 + (x % 200_000) as i64,
                2 => lo + (x % 1_000_000) as i64,
                _ => hi - (x % 1_000_000) as i64,
            };
            let t = Instant::unix(secs, (x >> 20) as i64 % 1_000_000_000);
            for micros in [false, true] {
                assert_eq!(fmt(t, micros), padded(t, micros), "{secs}");
            }
        }
        for secs in [
            ZERO_UNIX - 1,
            ZERO_UNIX - 86_400 * 400,
            hi + 1,
            i64::MIN / 2,
            i64::MAX / 2,
        ] {
            let t = Instant::unix(secs, 5000);
            assert_eq!(fmt(t, true), padded(t, true), "{secs}");
        }
    }

    #[test]
    fn formats_and_parses_rfc3339() {
        let t = parse("2024-02-29T13:14:15Z", false).unwrap();
        assert_eq!(t.secs, 1_709_212_455);
        assert_eq!(fmt(t, false), "2024-02-29T13:14:15Z");
        assert_eq!(parse("1970-01-01T00:00:00Z", false).unwrap().secs, 0);
        let zero = parse("0001-01-01T00:00:00Z", false).unwrap();
        assert!(zero.is_zero());
        assert_eq!(fmt(zero, false), "0001-01-01T00:00:00Z");
        let off = parse("2024-01-01T02:00:00.5+02:00", false).unwrap();
        assert_eq!(fmt(off, false), "2024-01-01T00:00:00Z");
        assert_eq!(off.nanos, 500_000_000);
        assert!(parse("2023-02-29T00:00:00Z", false).is_err());
        assert!(parse("2024-01-01 00:00:00Z", false).is_err());
        assert!(parse("2024-01-01T24:00:00Z", false).is_err());
        let m = parse("2024-01-01T00:00:00.123456Z", true).unwrap();
        assert_eq!(m.nanos, 123_456_000);
        assert_eq!(fmt(m, true), "2024-01-01T00:00:00.123456Z");
        assert!(parse("2024-01-01T00:00:00Z", true).is_err());
        assert!(parse("2024-01-01T00:00:00.1234567Z", true).is_err());
        assert_eq!(
            fmt(Instant::unix(ZERO_UNIX - 86_400 * 366, 0), false),
            "0000-01-01T00:00:00Z"
        );
        assert_eq!(
            fmt(Instant::unix(-62_198_755_200, 0), false),
            "-0001-01-01T00:00:00Z"
        );
    }

    #[test]
    fn four_digit_years_format_as_any_year() {
        let mut x = 0x1234_5678_9abc_def1u64;
        // From year -2 to 10001: around both ends of the quick path, and everything between.
        let (low, high) = (-62_230_000_000i64, 253_433_000_000i64);
        for i in 0..200_000u64 {
            xorshift(&mut x);
            let secs = match i % 3 {
                0 => low + (x % (high - low) as u64) as i64,
                1 => -62_167_219_200 + (x % 200_000) as i64 - 100_000,
                _ => 253_402_300_799 + (x % 200_000) as i64 - 100_000,
            };
            let t = Instant::unix(secs, (x >> 20) as i64 % 1_000_000_000);
            for micros in [false, true] {
                let mut slow = Vec::new();
                format_padded(&mut slow, t, micros);
                assert_eq!(fmt(t, micros).as_bytes(), slow, "{t:?}");
            }
        }
    }

    #[test]
    fn durations_as_go() {
        for (d, s) in [
            (0, "0s"),
            (1, "1ns"),
            (1_100, "1.1µs"),
            (2_200_000, "2.2ms"),
            (1_500_000_000, "1.5s"),
            (60_000_000_000, "1m0s"),
            (3_600_000_000_000, "1h0m0s"),
            (3_661_000_000_001, "1h1m1.000000001s"),
            (-90_000_000_000, "-1m30s"),
            (i64::MIN, "-2562047h47m16.854775808s"),
        ] {
            assert_eq!(duration_string(d), s);
            assert_eq!(parse_duration(s), Ok(d), "{s}");
        }
        assert_eq!(parse_duration("1.5h"), Ok(5_400_000_000_000));
        assert_eq!(parse_duration("+3us"), Ok(3_000));
        assert!(parse_duration("").is_err());
        assert!(parse_duration("1").is_err());
        assert!(parse_duration("1x").is_err());
        assert!(parse_duration(".s").is_err());
        assert!(parse_duration("9223372036854775808ns").is_err());
    }
}
