//! The readers and cell formats that more than one of the Table printers uses ([`super`]'s own
//! and its domain modules'), each defined once here: reading a field of an object's v1 JSON as
//! Go decodes it (a missing field is its zero value, a `null` one an unset pointer), kube's
//! conditions, annotations and default-class marks, quantities, lists, label maps, and label
//! selectors ([`label_selector_as_selector`], which the simulator's `Scale.status.selector`
//! uses too). What only one printer reads or prints stays in that printer's module; columns
//! and times are [`super`]'s. Pure: no I/O.

use serde_json::{Map, Value};

use crate::selector::{LabelOp, LabelRequirement, LabelSelector};

// ---------------------------------------------------------------------------------------------
// Fields

/// `metadata.name`, `""` without one.
pub(super) fn name_of(obj: &Value) -> &str {
    obj.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// The string at JSON pointer `path` of `v`, `""` when it is missing or not a string.
pub(super) fn str_at<'a>(v: &'a Value, path: &str) -> &'a str {
    v.pointer(path).and_then(Value::as_str).unwrap_or("")
}

/// The string at `v`, or `default` when it is missing or empty.
pub(super) fn str_or<'a>(v: Option<&'a Value>, default: &'a str) -> &'a str {
    match v.and_then(Value::as_str) {
        Some(s) if !s.is_empty() => s,
        _ => default,
    }
}

/// The array at `v`, empty when it is missing or not an array (a nil slice).
pub(super) fn arr(v: Option<&Value>) -> &[Value] {
    v.and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// How many members the object at `v` has (0 when missing: a nil map).
pub(super) fn obj_len(v: Option<&Value>) -> usize {
    v.and_then(Value::as_object).map(Map::len).unwrap_or(0)
}

/// The integer member `key` of `v`, 0 when missing (Go's zero).
pub(super) fn int_at(v: &Value, key: &str) -> i64 {
    v.get(key).and_then(Value::as_i64).unwrap_or(0)
}

/// The value at `v` if it is there and not `null` (a Go pointer that is set).
pub(super) fn present(v: Option<&Value>) -> Option<&Value> {
    v.filter(|v| !v.is_null())
}

/// A boolean field, `default` when absent (the defaulter's value, or Go's zero).
pub(super) fn flag(v: Option<&Value>, default: bool) -> bool {
    v.and_then(Value::as_bool).unwrap_or(default)
}

/// Whether the object is being deleted: its `metadata.deletionTimestamp` is set.
pub(super) fn being_deleted(obj: &Value) -> bool {
    present(obj.pointer("/metadata/deletionTimestamp")).is_some()
}

/// The value of annotation `key`, if the object has it.
pub(super) fn annotation<'a>(obj: &'a Value, key: &str) -> Option<&'a str> {
    obj.pointer("/metadata/annotations")
        .and_then(|a| a.get(key))
        .and_then(Value::as_str)
}

/// The object's name, with ` (default)` when one of the annotations `keys` is `true`: how kube
/// prints the cluster's default StorageClass, VolumeAttributesClass and IngressClass.
pub(super) fn name_marked_default(obj: &Value, keys: &[&str]) -> String {
    let name = name_of(obj);
    if keys.iter().any(|key| annotation(obj, key) == Some("true")) {
        format!("{name} (default)")
    } else {
        name.to_string()
    }
}

/// The first condition of type `ty` in `conditions` (kube's condition lookups stop at the
/// first one of a type).
pub(super) fn condition<'a>(conditions: &'a [Value], ty: &str) -> Option<&'a Value> {
    conditions.iter().find(|c| str_at(c, "/type") == ty)
}

/// Whether the first condition of type `ty` in `conditions` has status `True`.
pub(super) fn condition_is_true(conditions: &[Value], ty: &str) -> bool {
    condition(conditions, ty).is_some_and(|c| str_at(c, "/status") == "True")
}

// ---------------------------------------------------------------------------------------------
// Formats

/// A quantity as Go prints a `*Quantity`, `None` for nil (absent or not a quantity). A
/// quantity read from kube-apiserver is already in Go's canonical form, which is what
/// `Quantity.String()` prints.
pub(super) fn quantity(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// A `Quantity` value field (not a pointer): Go's zero quantity `0` when absent.
pub(super) fn quantity_or_zero(v: Option<&Value>) -> String {
    quantity(v).unwrap_or_else(|| "0".to_string())
}

/// The strings of a JSON array joined by `sep` (an element that is not a string counts as
/// `""`).
pub(super) fn join_strings(list: &[Value], sep: &str) -> String {
    list.iter()
        .map(|v| v.as_str().unwrap_or(""))
        .collect::<Vec<_>>()
        .join(sep)
}

/// `labels.FormatLabels`: sorted `k=v` pairs joined by `,`, or `<none>`.
pub(super) fn format_labels(v: Option<&Value>) -> String {
    let Some(m) = v.and_then(Value::as_object) else {
        return "<none>".to_string();
    };
    let mut pairs: Vec<String> = m
        .iter()
        .map(|(k, v)| format!("{}={}", k, v.as_str().unwrap_or("")))
        .collect();
    pairs.sort();
    let s = pairs.join(",");
    if s.is_empty() {
        "<none>".to_string()
    } else {
        s
    }
}

// ---------------------------------------------------------------------------------------------
// Label selectors

/// `metav1.FormatLabelSelector`: the selector's string, `<none>` when it selects by nothing
/// (a missing or empty selector), `<error>` when it does not convert.
pub(super) fn format_label_selector(sel: Option<&Value>) -> String {
    match label_selector_as_selector(sel) {
        Ok(Some(s)) if !s.is_empty() => s.to_string(),
        Ok(_) => "<none>".to_string(),
        Err(_) => "<error>".to_string(),
    }
}

/// `metav1.LabelSelectorAsSelector` of a `metav1.LabelSelector` in its JSON form: `None` for a
/// missing or `null` selector (kube's `labels.Nothing()`, which matches nothing), an empty
/// selector for `{}` (`labels.Everything()`), otherwise `matchLabels` as `key=value` and
/// `matchExpressions` (`In`, `NotIn`, `Exists`, `DoesNotExist`), sorted by key. Both `Nothing` and
/// `Everything` print as `""`. `Err` carries Go's message for a requirement that is not valid.
pub fn label_selector_as_selector(sel: Option<&Value>) -> Result<Option<LabelSelector>, String> {
    let sel = match sel {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Object(m)) => m,
        Some(other) => return Err(format!("a label selector must be an object, not {other}")),
    };
    let mut reqs = Vec::new();
    if let Some(labels) = present(sel.get("matchLabels")) {
        let labels = labels
            .as_object()
            .ok_or_else(|| "matchLabels must be an object".to_string())?;
        for (k, v) in labels {
            let v = v
                .as_str()
                .ok_or_else(|| format!("matchLabels[{k}] must be a string"))?;
            reqs.push(
                LabelRequirement::new(k.as_str(), LabelOp::Equals, vec![v.to_string()])
                    .map_err(|e| e.to_string())?,
            );
        }
    }
    for expr in arr(sel.get("matchExpressions")) {
        let op = match str_at(expr, "/operator") {
            "In" => LabelOp::In,
            "NotIn" => LabelOp::NotIn,
            "Exists" => LabelOp::Exists,
            "DoesNotExist" => LabelOp::DoesNotExist,
            other => {
                return Err(format!(
                    "{} is not a valid label selector operator",
                    crate::gofmt::quote(other)
                ));
            }
        };
        let values = arr(expr.get("values"))
            .iter()
            .map(|v| v.as_str().unwrap_or_default().to_string())
            .collect();
        reqs.push(
            LabelRequirement::new(str_at(expr, "/key"), op, values).map_err(|e| e.to_string())?,
        );
    }
    Ok(Some(LabelSelector::from_requirements(reqs)))
}

/// Go's `strings.ToLower`: each rune's simple lower-case mapping. Rust's `to_lowercase` uses
/// the full mapping, which differs for `İ` (one rune in Go, two in Rust) and for a final `Σ`.
pub(super) fn go_lower(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            '\u{130}' => 'i',
            c => c.to_lowercase().next().unwrap_or(c),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn go_lower_maps_each_rune_simply() {
        assert_eq!(go_lower("ServİCES.ΟΔΟΣ"), "services.οδοσ");
    }

    #[test]
    fn label_selectors_convert_as_metav1_does() {
        assert_eq!(label_selector_as_selector(None), Ok(None));
        assert_eq!(label_selector_as_selector(Some(&Value::Null)), Ok(None));
        let everything = label_selector_as_selector(Some(&json!({})))
            .unwrap()
            .unwrap();
        assert!(everything.is_empty());
        let s = label_selector_as_selector(Some(&json!({
            "matchLabels": {"b": "2", "a": "1"},
            "matchExpressions": [
                {"key": "c", "operator": "Exists"},
                {"key": "aa", "operator": "DoesNotExist"},
                {"key": "d", "operator": "NotIn", "values": ["y", "x"]}
            ]
        })))
        .unwrap()
        .unwrap();
        assert_eq!(s.to_string(), "a=1,!aa,b=2,c,d notin (x,y)");
        assert_eq!(
            label_selector_as_selector(Some(
                &json!({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]})
            )),
            Err("\"Gt\" is not a valid label selector operator".to_string())
        );
        assert!(label_selector_as_selector(Some(&json!({"matchLabels": {"a b": "1"}}))).is_err());
        assert!(
            label_selector_as_selector(Some(
                &json!({"matchExpressions": [{"key": "a", "operator": "In"}]})
            ))
            .is_err()
        );
    }
}
