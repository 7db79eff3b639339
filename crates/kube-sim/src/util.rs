//! Small helpers the simulator shares: the clock, time formatting, uids and generated names,
//! Go-compatible JSON encoding, a parallel map for bulk work.
//!
//! Stateless: nothing here knows about kinds or the store.

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
    kube_wire::table::format_rfc3339(i128::from(secs) * 1_000_000_000)
}

/// Parses an RFC 3339 timestamp into whole seconds since the UNIX epoch.
pub fn parse_rfc3339(s: &str) -> Option<i64> {
    kube_wire::table::parse_rfc3339(s).map(|ns| ns.div_euclid(1_000_000_000) as i64)
}

/// A random version-4 UUID, the form kube-apiserver gives `metadata.uid`.
pub fn new_uid() -> String {
    kube_wire::response::uuid_v4(rand::rng().random())
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

/// `f` over `items` on every core (scoped threads, each taking a contiguous share), the results
/// in the items' order.
pub fn par_map<T: Send, U: Send>(items: Vec<T>, f: impl Fn(T) -> U + Sync) -> Vec<U> {
    let threads = std::thread::available_parallelism().map_or(1, usize::from);
    if threads < 2 || items.len() < 2 {
        return items.into_iter().map(f).collect();
    }
    let share = items.len().div_ceil(threads);
    let mut chunks: Vec<Vec<T>> = Vec::with_capacity(threads);
    let mut items = items.into_iter();
    loop {
        let chunk: Vec<T> = items.by_ref().take(share).collect();
        if chunk.is_empty() {
            break;
        }
        chunks.push(chunk);
    }
    let f = &f;
    std::thread::scope(|s| {
        let handles: Vec<_> = chunks
            .into_iter()
            .map(|chunk| s.spawn(move || chunk.into_iter().map(f).collect::<Vec<U>>()))
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    })
}

/// Serialises compactly and applies Go `encoding/json`'s HTML escaping (`<`, `>`, `&`, U+2028,
/// U+2029), so that bytes look exactly like kube-apiserver's (the encoder Tables are printed
/// with, [`kube_wire::table::to_go_json`]).
pub fn to_go_json(v: &serde_json::Value) -> Vec<u8> {
    kube_wire::table::to_go_json(v)
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
    fn par_map_keeps_order() {
        let out = par_map((0..1000).collect(), |i: u32| i * 2);
        assert_eq!(out, (0..1000).map(|i| i * 2).collect::<Vec<_>>());
        assert!(par_map(Vec::<u32>::new(), |i| i).is_empty());
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
