//! The `dryRun` option of a write (`?dryRun=All` on a create, update, patch or delete, or the
//! `dryRun` member of a DELETE's `DeleteOptions` body), read and checked as kube-apiserver does:
//! every value of the parameter is kept (kube decodes it into a `[]string`), any value other than
//! `All` is kube's 422 on the verb's options kind (`CreateOptions.meta.k8s.io "" is invalid:
//! dryRun: Unsupported value: ["x"]: supported values: "All"`), and any value at all makes the
//! request a dry run (`dryrun.IsDryRun`).
//!
//! It only decides whether a request is a dry run; what a dry run does is
//! [`Ops::dry_run`](crate::ops::Ops::dry_run)'s.

use serde_json::Value;

use kube_wire::status::Status;

/// kube's only allowed value.
const ALL: &str = "All";

/// The `dryRun` values of a query string, in order (each occurrence of the parameter).
pub(super) fn from_query(query: Option<&str>) -> Vec<String> {
    form_urlencoded::parse(query.unwrap_or_default().as_bytes())
        .filter(|(k, _)| k == "dryRun")
        .map(|(_, v)| v.into_owned())
        .collect()
}

/// The `dryRun` member of a decoded `DeleteOptions` body: absent or `null` is none; anything but
/// an array of strings is Go's decoding error, kube's 400.
pub(super) fn from_delete_options(v: &Value) -> Result<Vec<String>, Status> {
    // Go's `UnmarshalTypeError`, for the member (`[]string`) or one of its items (`string`).
    let bad = |found: &Value, ty: &str| {
        let what = match found {
            Value::Number(_) => "number",
            Value::Bool(_) => "bool",
            Value::String(_) => "string",
            Value::Array(_) => "array",
            Value::Object(_) | Value::Null => "object",
        };
        Status::bad_request(format!(
            "json: cannot unmarshal {what} into Go struct field DeleteOptions.dryRun of type {ty}"
        ))
    };
    match v.get("dryRun") {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|i| match i {
                Value::String(s) => Ok(s.clone()),
                // Go leaves a string it decodes `null` into as it is: empty.
                Value::Null => Ok(String::new()),
                other => Err(bad(other, "string")),
            })
            .collect(),
        Some(other) => Err(bad(other, "[]string")),
    }
}

/// The cause kube's `ValidateDryRun` reports for `values`, if any: `(reason, field, detail)`
/// as [`Status::invalid`] takes them.
pub(super) fn cause(values: &[String]) -> Option<(&'static str, &'static str, String)> {
    if values.iter().all(|v| v == ALL) {
        return None;
    }
    // Go's json.Marshal of the []string (HTML-escaped, as Go's encoder does).
    let shown = String::from_utf8_lossy(&kube_wire::gofmt::escape_html(
        serde_json::to_vec(values).unwrap_or_default(),
    ))
    .into_owned();
    Some((
        "FieldValueNotSupported",
        "dryRun",
        format!("Unsupported value: {shown}: supported values: \"{ALL}\""),
    ))
}

/// Whether a create, update or patch is a dry run; `options` names the verb's options kind
/// (`CreateOptions`, `UpdateOptions`, `PatchOptions`) for the 422.
pub(super) fn check(query: Option<&str>, options: &str) -> Result<bool, Status> {
    let values = from_query(query);
    match cause(&values) {
        Some(c) => Err(Status::invalid("meta.k8s.io", options, "", &[c])),
        None => Ok(!values.is_empty()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn all_is_a_dry_run_anything_else_is_kubes_422() {
        assert!(!check(None, "CreateOptions").unwrap());
        assert!(!check(Some("fieldManager=kubectl"), "CreateOptions").unwrap());
        assert!(check(Some("dryRun=All"), "UpdateOptions").unwrap());
        assert!(check(Some("dryRun=All&dryRun=All"), "PatchOptions").unwrap());
        let e = check(Some("dryRun=All&dryRun=Server"), "PatchOptions").unwrap_err();
        assert_eq!(e.code, 422);
        assert_eq!(e.reason, "Invalid");
        assert_eq!(
            e.message,
            r#"PatchOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: ["All","Server"]: supported values: "All""#
        );
        let e = check(Some("dryRun=%3Cx%3E"), "CreateOptions").unwrap_err();
        assert_eq!(
            e.message,
            r#"CreateOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: ["\u003cx\u003e"]: supported values: "All""#
        );
        let e = check(Some("dryRun="), "CreateOptions").unwrap_err();
        assert!(
            e.message.contains(r#"Unsupported value: [""]"#),
            "{}",
            e.message
        );
    }

    #[test]
    fn delete_options_carry_dry_run_as_a_string_array() {
        assert!(from_delete_options(&json!({})).unwrap().is_empty());
        assert!(
            from_delete_options(&json!({"dryRun": null}))
                .unwrap()
                .is_empty()
        );
        assert_eq!(
            from_delete_options(&json!({"dryRun": ["All"]})).unwrap(),
            ["All"]
        );
        let e = from_delete_options(&json!({"dryRun": "All"})).unwrap_err();
        assert_eq!(e.code, 400);
        assert_eq!(
            e.message,
            "json: cannot unmarshal string into Go struct field DeleteOptions.dryRun of type []string"
        );
    }
}
