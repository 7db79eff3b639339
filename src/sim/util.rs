//! Small helpers the simulator shares: time formatting, uids, Go-compatible JSON encoding.

use rand::Rng;
use std::time::{SystemTime, UNIX_EPOCH};

/// Seconds since the UNIX epoch, now.
pub fn now_unix() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// Nanoseconds since the UNIX epoch, now.
pub fn now_unix_nanos() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

/// RFC 3339 in UTC with second precision, as Kubernetes writes `metav1.Time`.
pub fn rfc3339(secs: i64) -> String {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

/// Parses the `rfc3339` form back (and tolerates fractional seconds and offsets of `Z`).
pub fn parse_rfc3339(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || b[10] != b'T' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| s.get(r)?.parse::<i64>().ok();
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, se) = (num(11..13)?, num(14..16)?, num(17..19)?);
    Some(days_from_civil(y, mo, d) * 86_400 + h * 3600 + mi * 60 + se)
}

// Howard Hinnant's civil calendar algorithms.
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// A random version-4 UUID, the form kube-apiserver gives `metadata.uid`.
pub fn new_uid() -> String {
    let mut b: [u8; 16] = rand::rng().random();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// The 5-character suffix kube appends to `generateName` (its alphabet avoids vowels and
/// look-alike characters).
pub fn generate_name_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut rng = rand::rng();
    (0..5)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect()
}

/// Serialises compactly and applies Go `encoding/json`'s HTML escaping (`<`, `>`, `&`, U+2028,
/// U+2029), so that bytes look exactly like kube-apiserver's. Those characters can only occur
/// inside JSON strings, so a byte-level rewrite is safe.
pub fn to_go_json(v: &serde_json::Value) -> Vec<u8> {
    let raw = serde_json::to_vec(v).expect("a Value always serialises");
    go_escape(raw)
}

/// Applies Go's HTML escaping to already serialised JSON.
pub fn go_escape(raw: Vec<u8>) -> Vec<u8> {
    let needs = raw
        .iter()
        .any(|&c| c == b'<' || c == b'>' || c == b'&' || c == 0xE2);
    if !needs {
        return raw;
    }
    let mut out = Vec::with_capacity(raw.len() + 16);
    let mut i = 0;
    while i < raw.len() {
        let c = raw[i];
        match c {
            b'<' => out.extend_from_slice(b"\\u003c"),
            b'>' => out.extend_from_slice(b"\\u003e"),
            b'&' => out.extend_from_slice(b"\\u0026"),
            0xE2 if i + 2 < raw.len()
                && raw[i + 1] == 0x80
                && (raw[i + 2] == 0xA8 || raw[i + 2] == 0xA9) =>
            {
                out.extend_from_slice(if raw[i + 2] == 0xA8 {
                    b"\\u2028"
                } else {
                    b"\\u2029"
                });
                i += 2;
            }
            _ => out.push(c),
        }
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_round_trips() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(1_795_306_507), "2026-11-22T00:15:07Z");
        for t in [0, 951_782_400, 1_795_306_507, 4_102_444_800] {
            assert_eq!(parse_rfc3339(&rfc3339(t)), Some(t));
        }
        assert_eq!(
            parse_rfc3339("2026-11-22T00:15:07.123Z"),
            Some(1_795_306_507)
        );
        assert_eq!(parse_rfc3339("nonsense"), None);
    }

    #[test]
    fn uid_has_uuid_v4_shape() {
        let u = new_uid();
        assert_eq!(u.len(), 36);
        assert_eq!(&u[14..15], "4");
        assert_ne!(new_uid(), u);
    }

    #[test]
    fn go_escaping_matches_encoding_json() {
        let v = serde_json::json!({"a":"<b>&\u{2028}x"});
        assert_eq!(
            String::from_utf8(to_go_json(&v)).unwrap(),
            r#"{"a":"\u003cb\u003e\u0026\u2028x"}"#
        );
        let plain = serde_json::json!({"a":"é"});
        assert_eq!(to_go_json(&plain), serde_json::to_vec(&plain).unwrap());
    }
}
