//! What the Table printers' tests share (test builds only), defined once: the instant the
//! domain modules' tests print at and timestamps before it, the column shapes they compare
//! (and the expected lists they compare them with), and the bare object
//! `{"metadata":{"name":"x"}}` every printer must print.

use serde_json::{Value, json};

use super::{NS_PER_SEC, column_definitions, format_rfc3339, row_cells};

/// "Now" for the domain modules' tests (2023-11-14T22:13:20Z).
pub(super) const NOW: i64 = 1_700_000_000;

/// The RFC 3339 time `secs_ago` seconds before `now` (Unix seconds).
pub(super) fn ts_before(now: i64, secs_ago: i64) -> String {
    format_rfc3339(i128::from(now - secs_ago) * NS_PER_SEC)
}

/// The RFC 3339 time `secs_ago` seconds before [`NOW`].
pub(super) fn ts(secs_ago: i64) -> String {
    ts_before(NOW, secs_ago)
}

/// (name, type, format, priority) of each column of `(group, kind)`.
pub(super) fn shape(group: &str, kind: &str) -> Vec<(String, String, String, i64)> {
    let text = |c: &Value, key: &str| c[key].as_str().unwrap().to_string();
    column_definitions(group, kind)
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                text(c, "name"),
                text(c, "type"),
                text(c, "format"),
                c["priority"].as_i64().unwrap(),
            )
        })
        .collect()
}

/// (name, type, priority) of each column of `(group, kind)`.
pub(super) fn typed(group: &str, kind: &str) -> Vec<(String, String, i64)> {
    shape(group, kind)
        .into_iter()
        .map(|(name, ty, _, priority)| (name, ty, priority))
        .collect()
}

/// (name, priority) of each column of `(group, kind)`.
pub(super) fn names(group: &str, kind: &str) -> Vec<(String, i64)> {
    shape(group, kind)
        .into_iter()
        .map(|(name, _, _, priority)| (name, priority))
        .collect()
}

/// The expected [`shape`]: (name, type, format, priority) of each column.
pub(super) fn cols(list: &[(&str, &str, &str, i64)]) -> Vec<(String, String, String, i64)> {
    list.iter()
        .map(|(n, t, f, p)| (n.to_string(), t.to_string(), f.to_string(), *p))
        .collect()
}

/// The expected [`shape`] of priority-0 string columns, each given as (name, format).
pub(super) fn strings(list: &[(&str, &str)]) -> Vec<(String, String, String, i64)> {
    let full: Vec<(&str, &str, &str, i64)> =
        list.iter().map(|(n, f)| (*n, "string", *f, 0)).collect();
    cols(&full)
}

/// The expected [`typed`]: (name, type, priority) of each column.
pub(super) fn typed_cols(list: &[(&str, &str, i64)]) -> Vec<(String, String, i64)> {
    list.iter()
        .map(|(n, t, p)| (n.to_string(), t.to_string(), *p))
        .collect()
}

/// The expected [`names`]: (name, priority) of each column.
pub(super) fn named_cols(list: &[(&str, i64)]) -> Vec<(String, i64)> {
    list.iter().map(|(n, p)| (n.to_string(), *p)).collect()
}

/// An object with a name and nothing else: every field at its zero value.
pub(super) fn bare() -> Value {
    json!({"metadata": {"name": "x"}})
}

/// The cells `(group, kind)`'s printer gives [`bare`] at [`NOW`].
pub(super) fn bare_row(group: &str, kind: &str) -> Value {
    row_cells(group, kind, &bare(), NOW)
}
