//! Applying PATCH request bodies the way kube-apiserver does.
//!
//! Three patch formats are supported, each reproducing the behaviour of the library kube-apiserver
//! uses for it (including its quirks, where a client could observe them):
//!
//! * JSON patch (RFC 6902, `application/json-patch+json`) as implemented by
//!   `gopkg.in/evanphx/json-patch.v4`;
//! * JSON merge patch (RFC 7386, `application/merge-patch+json`), same library;
//! * strategic merge patch (`application/strategic-merge-patch+json`) as implemented by
//!   `k8s.io/apimachinery/pkg/util/strategicpatch`, with a built-in table of the
//!   `patchStrategy`/`patchMergeKey` struct tags of the built-in kinds (see [`apply_patch`]).
//!
//! Error codes, reasons and messages follow `k8s.io/apiserver/pkg/endpoints/handlers/patch.go`;
//! see [`PatchError`].
//!
//! # How a PATCH handler uses this module
//!
//! kube-apiserver's order of checks is:
//!
//! 1. the media type (before any `;`) must be one the resource accepts, otherwise 415:
//!    [`PatchType::from_content_type`], then [`check_supported`]. When `from_content_type` returns
//!    `None`, answer [`PatchError::unsupported_media_type`]. Custom resources (CRDs) do not accept
//!    strategic merge patch ([`supports_strategic`]); server-side apply
//!    ([`PatchType::Apply`]) is not implemented by this simulator and is always answered with 415.
//! 2. the body must be valid JSON, otherwise 400 `invalid JSON patch`;
//! 3. the patch is applied to the current object ([`apply_patch`] does 2 and 3);
//! 4. the result is decoded and checked (name, namespace, uid, validation, ...): the caller's job.
//!    `apply_patch` only guarantees the result is a JSON object.
//!
//! Statuses built from a [`PatchError`] use [`PatchError::code`], [`PatchError::reason`] (an empty
//! reason is kube's `StatusReasonUnknown` and is omitted from the Status) and the error's
//! `Display` text as the message.
//!
//! # Deliberate differences from kube-apiserver
//!
//! * Key order: kube re-encodes the typed object in struct order; here existing keys keep their
//!   place and new keys are appended.
//! * Values a strategic merge patch introduces verbatim (new fields, replaced lists and maps,
//!   appended list items) lose their `null` members and directive members, as kube's decode into
//!   the typed object drops them; no other effect of that decode (pruning unknown fields,
//!   defaulting) is reproduced.
//! * Strategic merge metadata comes from a table of the built-in kinds' tagged fields; a
//!   `$setElementOrder/<list>` for a list missing from the table infers the list's merge key.
//! * When kube's strategic merge ordering depends on Go slice capacities (a list losing items to
//!   `$patch: delete` and gaining new ones under `$setElementOrder`, with items only the server
//!   has) the order here may differ.
//! * Where the Go code would panic (e.g. a `null` first item in a merged list) the answer is 500
//!   with apiserver's panic message.
//! * JSON patch results nested deeper than 127 levels are refused (422; `serde_json` could not
//!   read them back), and bodies nested deeper than that are 400 `invalid JSON patch`; kube's
//!   limit is Go's 10000 levels.

use kube_wire::gofmt::{float as go_float, quote as go_quote};
use serde_json::{Map, Value};

/// Media type of a JSON patch (RFC 6902).
pub const JSON_PATCH: &str = "application/json-patch+json";
/// Media type of a JSON merge patch (RFC 7386).
pub const MERGE_PATCH: &str = "application/merge-patch+json";
/// Media type of a Kubernetes strategic merge patch.
pub const STRATEGIC_MERGE_PATCH: &str = "application/strategic-merge-patch+json";
/// Media type of a server-side apply patch (YAML).
pub const APPLY_PATCH_YAML: &str = "application/apply-patch+yaml";
/// Media type of a server-side apply patch (CBOR).
pub const APPLY_PATCH_CBOR: &str = "application/apply-patch+cbor";

/// kube-apiserver refuses JSON patches with more operations than this (413).
pub const MAX_JSON_PATCH_OPERATIONS: usize = 10_000;
/// kube-apiserver's default `--json-patch-max-copy-bytes`: the total size of the values that
/// `copy` operations of one JSON patch may duplicate.
pub const MAX_JSON_PATCH_COPY_BYTES: usize = 3 * 1024 * 1024;
/// Deepest nesting of arrays/objects a JSON patch may produce; deeper documents could not be
/// parsed again by `serde_json` (whose limit is 127 levels).
const MAX_NESTING: usize = 127;

/// Media types accepted for PATCH of built-in kinds (server-side apply is not implemented here).
const BUILTIN_ACCEPTED: &[&str] = &[JSON_PATCH, MERGE_PATCH, STRATEGIC_MERGE_PATCH];
/// Media types accepted for PATCH of custom resources.
const CUSTOM_ACCEPTED: &[&str] = &[JSON_PATCH, MERGE_PATCH];

/// The kind of a PATCH request body, from its `Content-Type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    /// `application/json-patch+json` (RFC 6902).
    Json,
    /// `application/merge-patch+json` (RFC 7386).
    Merge,
    /// `application/strategic-merge-patch+json`.
    StrategicMerge,
    /// `application/apply-patch+yaml` (or `+cbor`): server-side apply, answered with 415.
    Apply,
}

impl PatchType {
    /// Maps a `Content-Type` header value to a patch type: the media type before any `;`,
    /// compared case-insensitively. `None` for anything else (answer 415).
    pub fn from_content_type(ct: &str) -> Option<PatchType> {
        let media = ct.split(';').next().unwrap_or("").trim();
        [
            (JSON_PATCH, PatchType::Json),
            (MERGE_PATCH, PatchType::Merge),
            (STRATEGIC_MERGE_PATCH, PatchType::StrategicMerge),
            (APPLY_PATCH_YAML, PatchType::Apply),
            (APPLY_PATCH_CBOR, PatchType::Apply),
        ]
        .into_iter()
        .find(|(name, _)| media.eq_ignore_ascii_case(name))
        .map(|(_, ty)| ty)
    }

    /// The canonical media type of this patch type.
    pub fn media_type(self) -> &'static str {
        match self {
            PatchType::Json => JSON_PATCH,
            PatchType::Merge => MERGE_PATCH,
            PatchType::StrategicMerge => STRATEGIC_MERGE_PATCH,
            PatchType::Apply => APPLY_PATCH_YAML,
        }
    }
}

/// Whether strategic merge patch may be used on a kind: kube-apiserver accepts it for built-in
/// kinds only; for custom resources it answers 415 (`apiextensions-apiserver` does not list the
/// media type).
pub fn supports_strategic(kind_is_builtin: bool) -> bool {
    kind_is_builtin
}

/// The media types a PATCH of a built-in kind / a custom resource accepts here.
pub fn accepted_media_types(kind_is_builtin: bool) -> &'static [&'static str] {
    if kind_is_builtin {
        BUILTIN_ACCEPTED
    } else {
        CUSTOM_ACCEPTED
    }
}

/// The 415 check kube-apiserver makes before reading the body: server-side apply is refused
/// (not implemented by this simulator), and strategic merge patch is refused for custom resources.
pub fn check_supported(ty: PatchType, kind_is_builtin: bool) -> Result<(), PatchError> {
    match ty {
        PatchType::Apply => Err(PatchError::unsupported_media_type(kind_is_builtin)),
        PatchType::StrategicMerge if !supports_strategic(kind_is_builtin) => {
            Err(PatchError::unsupported_media_type(kind_is_builtin))
        }
        _ => Ok(()),
    }
}

/// A PATCH that kube-apiserver would refuse. `Display` is the message of kube's Status.
#[derive(Debug, thiserror::Error)]
pub enum PatchError {
    /// 415 UnsupportedMediaType (`negotiation.NewUnsupportedMediaTypeError`).
    #[error(
        "the body of the request was in an unknown format - accepted media types include: {}",
        .accepted.join(", ")
    )]
    UnsupportedMediaType {
        /// The media types that would have been accepted.
        accepted: &'static [&'static str],
    },
    /// 400 BadRequest: a body that is not JSON, or not of the shape the patch type needs.
    #[error("{message}")]
    BadRequest {
        /// kube's message.
        message: String,
    },
    /// 413 RequestEntityTooLarge: a JSON patch with more than [`MAX_JSON_PATCH_OPERATIONS`].
    #[error(
        "Request entity too large: The allowed maximum operations in a JSON patch is {max}, got {got}"
    )]
    TooManyOperations {
        /// The limit.
        max: usize,
        /// The number of operations in the patch.
        got: usize,
    },
    /// 422 Invalid with kube's generic message: a JSON patch operation that does not apply
    /// (missing path, failed `test`, bad index, ...), or a strategic merge patch with a list of
    /// lists. kube-apiserver hides the library's explanation; it is kept in `detail` for logs.
    #[error("the server rejected our request due to an error in our request")]
    Unprocessable {
        /// The underlying reason (not shown to clients by kube).
        detail: String,
    },
    /// 422 Invalid: the patched document cannot be decoded as an object
    /// (`field.Invalid(field.NewPath("patch"), <patched JSON>, <decode error>)`).
    #[error(" \"\" is invalid: patch: Invalid value: {}: {}", go_quote(.value), .detail)]
    InvalidResult {
        /// The patched document, as Go's `json.Marshal` writes it.
        value: String,
        /// The decoding error.
        detail: String,
    },
    /// 500 with an empty reason (kube's `StatusReasonUnknown`): a strategic merge patch error
    /// that kube-apiserver passes through unconverted (e.g. a missing merge key).
    #[error("{message}")]
    Internal {
        /// kube's message.
        message: String,
    },
}

impl PatchError {
    /// The 415 error for a PATCH with a media type the resource does not accept.
    pub fn unsupported_media_type(kind_is_builtin: bool) -> PatchError {
        PatchError::UnsupportedMediaType {
            accepted: accepted_media_types(kind_is_builtin),
        }
    }

    /// The HTTP status code kube-apiserver answers with.
    pub fn code(&self) -> u16 {
        match self {
            PatchError::UnsupportedMediaType { .. } => 415,
            PatchError::BadRequest { .. } => 400,
            PatchError::TooManyOperations { .. } => 413,
            PatchError::Unprocessable { .. } | PatchError::InvalidResult { .. } => 422,
            PatchError::Internal { .. } => 500,
        }
    }

    /// The `reason` of kube's Status; empty for `StatusReasonUnknown` (omit the field).
    pub fn reason(&self) -> &'static str {
        match self {
            PatchError::UnsupportedMediaType { .. } => "UnsupportedMediaType",
            PatchError::BadRequest { .. } => "BadRequest",
            PatchError::TooManyOperations { .. } => "RequestEntityTooLarge",
            PatchError::Unprocessable { .. } | PatchError::InvalidResult { .. } => "Invalid",
            PatchError::Internal { .. } => "",
        }
    }

    fn bad_request(message: impl Into<String>) -> PatchError {
        PatchError::BadRequest {
            message: message.into(),
        }
    }
}

/// Applies `patch` (the raw request body) of type `ty` to `original` (the current object) and
/// returns the patched object, as kube-apiserver would before decoding and validating it.
///
/// `kind` (e.g. `"Pod"`) selects the strategic merge metadata (list merge keys and strategies) of
/// the built-in kinds; an unknown kind is merged with metadata for `metadata` only (maps merge,
/// lists are replaced). Whether strategic merge patch is allowed at all for the kind is the
/// caller's decision ([`check_supported`]). [`PatchType::Apply`] is refused with 415.
///
/// Never panics.
pub fn apply_patch(
    ty: PatchType,
    kind: &str,
    original: &Value,
    patch: &[u8],
) -> Result<Value, PatchError> {
    if ty == PatchType::Apply {
        return Err(PatchError::unsupported_media_type(true));
    }
    // validateAndTranscodePatch: `json.Valid` or 400.
    let patch: Value =
        serde_json::from_slice(patch).map_err(|_| PatchError::bad_request("invalid JSON patch"))?;
    let result = match ty {
        PatchType::Json => json_patch::apply(original, patch)?,
        PatchType::Merge => apply_merge_patch(original, patch)?,
        PatchType::StrategicMerge => strategic::apply(kind, original, patch)?,
        PatchType::Apply => return Err(PatchError::unsupported_media_type(true)),
    };
    if result.is_object() {
        Ok(result)
    } else {
        Err(invalid_result(&result))
    }
}

/// The error kube reports when the patched document is not an object (the JSON serializer first
/// reads `apiVersion`/`kind` into a struct).
fn invalid_result(result: &Value) -> PatchError {
    let detail = format!(
        "couldn't get version/kind; json parse error: json: cannot unmarshal {} into Go value of \
         type struct {{ APIVersion string \"json:\\\"apiVersion,omitempty\\\"\"; Kind string \
         \"json:\\\"kind,omitempty\\\"\" }}",
        go_json_kind(result)
    );
    PatchError::InvalidResult {
        value: go_json(result),
        detail,
    }
}

// ---------------------------------------------------------------------------------------------
// JSON merge patch (RFC 7386), as evanphx/json-patch v4 `MergePatch`.
// ---------------------------------------------------------------------------------------------

fn apply_merge_patch(original: &Value, patch: Value) -> Result<Value, PatchError> {
    match patch {
        // A `null` patch and a scalar patch are `ErrBadJSONPatch`, which kube maps to 400.
        Value::Object(_) | Value::Array(_) => Ok(json_merge(original.clone(), patch)),
        _ => Err(PatchError::bad_request("Invalid JSON Patch")),
    }
}

/// RFC 7386 `MergePatch(target, patch)` with json-patch v4's handling of nulls: a value that
/// replaces a non-object (or fills a missing key) has its `null` members removed, recursively
/// and also inside objects in arrays; a non-object replacing an object is taken as is.
fn json_merge(target: Value, mut patch: Value) -> Value {
    match (target, patch) {
        (Value::Object(mut doc), Value::Object(p)) => {
            merge_docs(&mut doc, p);
            Value::Object(doc)
        }
        (_, p) => {
            patch = p;
            prune_nulls(&mut patch);
            patch
        }
    }
}

fn merge_docs(doc: &mut Map<String, Value>, patch: Map<String, Value>) {
    for (k, v) in patch {
        if v.is_null() {
            doc.shift_remove(&k);
            continue;
        }
        match doc.get_mut(&k) {
            None | Some(Value::Null) => {
                let mut v = v;
                prune_nulls(&mut v);
                doc.insert(k, v);
            }
            Some(cur) => merge_value(cur, v),
        }
    }
}

fn merge_value(cur: &mut Value, patch: Value) {
    match (cur, patch) {
        (Value::Object(c), Value::Object(p)) => merge_docs(c, p),
        (cur @ Value::Object(_), p) => *cur = p,
        (cur, mut p) => {
            prune_nulls(&mut p);
            *cur = p;
        }
    }
}

fn prune_nulls(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.retain(|_, v| !v.is_null());
            m.values_mut().for_each(prune_nulls);
        }
        Value::Array(a) => a.iter_mut().for_each(prune_nulls),
        _ => {}
    }
}

// ---------------------------------------------------------------------------------------------
// JSON patch (RFC 6902), as evanphx/json-patch v4 `Patch.Apply`.
// ---------------------------------------------------------------------------------------------

mod json_patch {
    use super::{
        MAX_JSON_PATCH_COPY_BYTES, MAX_JSON_PATCH_OPERATIONS, MAX_NESTING, PatchError,
        go_json_kind, value_depth,
    };
    use serde_json::{Map, Value};

    type OpResult<T> = Result<T, String>;

    pub(super) fn apply(original: &Value, patch: Value) -> Result<Value, PatchError> {
        let ops = match patch {
            // Go decodes `null` into a nil patch: nothing to do.
            Value::Null => return Ok(original.clone()),
            Value::Array(ops) => ops,
            other => {
                return Err(PatchError::bad_request(format!(
                    "json: cannot unmarshal {} into Go value of type jsonpatch.Patch",
                    go_json_kind(&other)
                )));
            }
        };
        if let Some(bad) = ops.iter().find(|op| !(op.is_object() || op.is_null())) {
            return Err(PatchError::bad_request(format!(
                "json: cannot unmarshal {} into Go value of type jsonpatch.Operation",
                go_json_kind(bad)
            )));
        }
        if ops.len() > MAX_JSON_PATCH_OPERATIONS {
            return Err(PatchError::TooManyOperations {
                max: MAX_JSON_PATCH_OPERATIONS,
                got: ops.len(),
            });
        }
        let mut doc = original.clone();
        let mut copied = 0usize;
        for op in &ops {
            apply_operation(&mut doc, op, &mut copied)
                .map_err(|detail| PatchError::Unprocessable { detail })?;
        }
        Ok(doc)
    }

    fn apply_operation(doc: &mut Value, op: &Value, copied: &mut usize) -> OpResult<()> {
        let empty = Map::new();
        let op = op.as_object().unwrap_or(&empty);
        let kind = match op.get("op") {
            Some(Value::String(s)) => s.as_str(),
            _ => "unknown",
        };
        match kind {
            "add" => {
                let path = string_field(op, "path", kind)?;
                add(doc, path, value_of(op).unwrap_or(Value::Null))
            }
            "remove" => {
                let path = string_field(op, "path", kind)?;
                remove(doc, path).map(drop)
            }
            "replace" => {
                let path = string_field(op, "path", kind)?;
                replace(doc, path, value_of(op))
            }
            "move" => {
                let from = string_field(op, "from", kind)?;
                let val = remove(doc, from)?;
                let path = string_field(op, "path", kind)?;
                add(doc, path, val)
            }
            "copy" => {
                let from = string_field(op, "from", kind)?;
                let val = get(doc, from, kind)?.cloned();
                let path = string_field(op, "path", kind)?;
                // The destination's container must exist before anything is copied.
                let (parents, _) = split_pointer(path).ok_or_else(|| missing(kind, path))?;
                container_mut(doc, &parents).ok_or_else(|| missing(kind, path))?;
                let size = match &val {
                    None => 0,
                    Some(v) => serde_json::to_vec(v).map(|b| b.len()).unwrap_or(usize::MAX),
                };
                *copied = copied.saturating_add(size);
                if *copied > MAX_JSON_PATCH_COPY_BYTES {
                    return Err(format!(
                        "Unable to complete the copy, the accumulated size increase of copy is \
                         {copied}, exceeding the limit {MAX_JSON_PATCH_COPY_BYTES}"
                    ));
                }
                add(doc, path, val.unwrap_or(Value::Null))
            }
            "test" => {
                let path = string_field(op, "path", kind)?;
                test(doc, path, value_of(op))
            }
            other => Err(format!("Unexpected kind: {other}")),
        }
    }

    fn string_field<'a>(op: &'a Map<String, Value>, field: &str, kind: &str) -> OpResult<&'a str> {
        match op.get(field) {
            Some(Value::String(s)) => Ok(s),
            Some(Value::Null) | None => Err(format!("{kind} operation missing {field} field")),
            Some(other) => Err(format!(
                "{kind} operation failed to decode {field}: json: cannot unmarshal {} into Go \
                 value of type string",
                go_json_kind(other)
            )),
        }
    }

    /// `None` when the operation has no `value` member; `Some(Null)` for `"value": null`.
    fn value_of(op: &Map<String, Value>) -> Option<Value> {
        op.get("value").cloned()
    }

    fn missing(kind: &str, path: &str) -> String {
        format!("{kind} operation does not apply: doc is missing path: \"{path}\"")
    }

    /// Splits a JSON pointer into its parent segments and last segment, unescaped. Like
    /// json-patch v4, the part before the first `/` is ignored and the root (`""`) has no
    /// parent.
    fn split_pointer(path: &str) -> Option<(Vec<String>, String)> {
        let mut segs: Vec<String> = path
            .split('/')
            .map(|s| s.replace("~1", "/").replace("~0", "~"))
            .collect();
        if segs.len() < 2 {
            return None;
        }
        let key = segs.pop()?;
        segs.remove(0);
        Some((segs, key))
    }

    /// Go `strconv.Atoi`: optional sign, decimal digits, fits in 64 bits.
    fn atoi(s: &str) -> Option<i64> {
        s.parse::<i64>().ok()
    }

    /// The index an existing element is read/replaced/removed at; negative counts from the end.
    fn existing_index(key: &str, len: usize) -> OpResult<usize> {
        let mut idx =
            atoi(key).ok_or_else(|| format!("value was not a proper array index: '{key}'"))?;
        let len_i = i64::try_from(len).unwrap_or(i64::MAX);
        if idx < 0 {
            if idx < -len_i {
                return Err(format!("Unable to access invalid index: {idx}"));
            }
            idx += len_i;
        }
        if idx >= len_i {
            return Err(format!("Unable to access invalid index: {idx}"));
        }
        usize::try_from(idx).map_err(|_| format!("Unable to access invalid index: {idx}"))
    }

    /// Walks to the container (object or array) the last segment of a pointer is applied to.
    fn container_mut<'a>(doc: &'a mut Value, parents: &[String]) -> Option<&'a mut Value> {
        let mut cur = doc;
        for part in parents {
            let next = match cur {
                Value::Object(m) => m.get_mut(part.as_str())?,
                Value::Array(a) => {
                    let i = existing_index(part, a.len()).ok()?;
                    a.get_mut(i)?
                }
                _ => return None,
            };
            if !(next.is_object() || next.is_array()) {
                return None;
            }
            cur = next;
        }
        if cur.is_object() || cur.is_array() {
            Some(cur)
        } else {
            None
        }
    }

    fn check_depth(parents: usize, value: &Value) -> OpResult<()> {
        if parents + 1 + value_depth(value) > MAX_NESTING {
            Err(format!(
                "the patched document would nest deeper than {MAX_NESTING} levels"
            ))
        } else {
            Ok(())
        }
    }

    fn add(doc: &mut Value, path: &str, value: Value) -> OpResult<()> {
        let (parents, key) = split_pointer(path).ok_or_else(|| missing("add", path))?;
        check_depth(parents.len(), &value)?;
        match container_mut(doc, &parents).ok_or_else(|| missing("add", path))? {
            Value::Object(m) => {
                m.insert(key, value);
                Ok(())
            }
            Value::Array(a) => {
                if key == "-" {
                    a.push(value);
                    return Ok(());
                }
                let mut idx = atoi(&key).ok_or_else(|| {
                    format!("error in add for path: '{path}': value was not a proper array index")
                })?;
                let size = i64::try_from(a.len()).unwrap_or(i64::MAX - 1) + 1;
                if idx >= size || idx < -size {
                    return Err(format!(
                        "error in add for path: '{path}': invalid index {idx}"
                    ));
                }
                if idx < 0 {
                    idx += size;
                }
                let idx = usize::try_from(idx).map_err(|_| format!("invalid index {idx}"))?;
                a.insert(idx, value);
                Ok(())
            }
            _ => Err(missing("add", path)),
        }
    }

    fn remove(doc: &mut Value, path: &str) -> OpResult<Value> {
        let (parents, key) = split_pointer(path).ok_or_else(|| missing("remove", path))?;
        match container_mut(doc, &parents).ok_or_else(|| missing("remove", path))? {
            Value::Object(m) => m
                .shift_remove(key.as_str())
                .ok_or_else(|| format!("Unable to remove nonexistent key: {key}")),
            Value::Array(a) => {
                let idx = existing_index(&key, a.len())?;
                Ok(a.remove(idx))
            }
            _ => Err(missing("remove", path)),
        }
    }

    fn replace(doc: &mut Value, path: &str, value: Option<Value>) -> OpResult<()> {
        if path.is_empty() {
            return match value {
                Some(v @ (Value::Object(_) | Value::Array(_))) => {
                    check_depth(0, &v)?;
                    *doc = v;
                    Ok(())
                }
                _ => Err("replace operation value must be object or array".to_string()),
            };
        }
        let value = value.unwrap_or(Value::Null);
        let (parents, key) = split_pointer(path).ok_or_else(|| missing("replace", path))?;
        check_depth(parents.len(), &value)?;
        match container_mut(doc, &parents).ok_or_else(|| missing("replace", path))? {
            // json-patch v4 does not check that the key exists: replace acts as add.
            Value::Object(m) => {
                m.insert(key, value);
                Ok(())
            }
            Value::Array(a) => {
                let idx = existing_index(&key, a.len())?;
                a[idx] = value;
                Ok(())
            }
            _ => Err(missing("replace", path)),
        }
    }

    /// The value at `path` for `copy`/`test`: `Ok(None)` for a missing object member (json-patch
    /// v4 does not treat that as an error there), an error for a bad array index.
    fn get<'a>(doc: &'a mut Value, path: &str, kind: &str) -> OpResult<Option<&'a Value>> {
        let (parents, key) = split_pointer(path).ok_or_else(|| missing(kind, path))?;
        match container_mut(doc, &parents).ok_or_else(|| missing(kind, path))? {
            Value::Object(m) => Ok(m.get(key.as_str())),
            Value::Array(a) => {
                let idx = existing_index(&key, a.len())?;
                Ok(a.get(idx))
            }
            _ => Err(missing(kind, path)),
        }
    }

    fn test(doc: &mut Value, path: &str, value: Option<Value>) -> OpResult<()> {
        let failed = || format!("testing value {path} failed: test failed");
        if path.is_empty() {
            return match value {
                Some(v) if *doc == v => Ok(()),
                _ => Err(failed()),
            };
        }
        let found = get(doc, path, "test")?.filter(|v| !v.is_null());
        let ok = match (found, &value) {
            (None, None | Some(Value::Null)) => true,
            (Some(f), Some(v)) => f == v,
            _ => false,
        };
        if ok { Ok(()) } else { Err(failed()) }
    }
}

// ---------------------------------------------------------------------------------------------
// Strategic merge patch, as k8s.io/apimachinery/pkg/util/strategicpatch `StrategicMergeMapPatch`
// (server side: parallel lists merged, unmatched nulls ignored).
// ---------------------------------------------------------------------------------------------

/// How a field's value is combined with the patch (a `patchStrategy` struct tag; `retainKeys`
/// only matters to clients and is not recorded).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Strategy {
    /// No tag: maps merge, lists are replaced.
    Default,
    /// `patchStrategy:"merge"`: lists merge (by `merge_key` for lists of objects).
    Merge,
    /// `patchStrategy:"replace"`: the patch value replaces the field.
    Replace,
}

/// The strategic-merge metadata of a Go type: its fields with patch tags.
#[derive(Debug)]
struct Schema {
    /// `reflect.Kind` name used in kube's messages.
    go_kind: &'static str,
    fields: &'static [Field],
}

/// A field of a [`Schema`]: for lists, `ty` is the type of the elements.
#[derive(Debug, Clone, Copy)]
struct Field {
    name: &'static str,
    strategy: Strategy,
    merge_key: &'static str,
    ty: &'static Schema,
}

impl Schema {
    /// Fields not described here (unknown or without patch tags) merge maps and replace lists.
    fn lookup(&'static self, key: &str) -> Field {
        self.find(key).unwrap_or(Field {
            name: "",
            strategy: Strategy::Default,
            merge_key: "",
            ty: &ANY,
        })
    }

    fn find(&'static self, key: &str) -> Option<Field> {
        self.fields.iter().find(|f| f.name == key).copied()
    }

    /// The metadata of a list named by `$setElementOrder/<key>`. Clients only send that
    /// directive for merging lists, each entry being `{<merge key>: <value>}` (or a primitive),
    /// so for a list missing from the table (a kind or field not modelled here) the strategy
    /// and merge key are inferred from `order`.
    fn lookup_ordered_list(&'static self, key: &str, order: &[Value]) -> Field {
        if let Some(field) = self.find(key) {
            return field;
        }
        let mut inferred = Field {
            name: "",
            strategy: Strategy::Merge,
            merge_key: "",
            ty: &ANY,
        };
        let single_key = |v: &Value| match v.as_object() {
            Some(m) if m.len() == 1 => m.keys().next().cloned(),
            _ => None,
        };
        if order.is_empty() {
            return self.lookup(key);
        }
        match order.first().and_then(single_key) {
            Some(first) if order.iter().all(|v| single_key(v).as_ref() == Some(&first)) => {
                match inferred_merge_key(&first) {
                    Some(merge_key) => inferred.merge_key = merge_key,
                    None => return self.lookup(key),
                }
            }
            _ if order.iter().all(|v| !(v.is_object() || v.is_array())) => {
                inferred.ty = &PRIMITIVE;
            }
            _ => return self.lookup(key),
        }
        inferred
    }
}

/// A `&'static str` for an inferred merge key: one of the merge keys Kubernetes uses.
fn inferred_merge_key(key: &str) -> Option<&'static str> {
    const KNOWN: &[&str] = &[
        "name",
        "type",
        "uid",
        "ip",
        "port",
        "containerPort",
        "mountPath",
        "devicePath",
        "topologyKey",
        "status",
        "resourceClaimName",
        "key",
    ];
    KNOWN.iter().copied().find(|k| *k == key)
}

const fn nested(name: &'static str, ty: &'static Schema) -> Field {
    Field {
        name,
        strategy: Strategy::Default,
        merge_key: "",
        ty,
    }
}

const fn merge_by(name: &'static str, merge_key: &'static str, ty: &'static Schema) -> Field {
    Field {
        name,
        strategy: Strategy::Merge,
        merge_key,
        ty,
    }
}

const fn merge_primitives(name: &'static str) -> Field {
    Field {
        name,
        strategy: Strategy::Merge,
        merge_key: "",
        ty: &PRIMITIVE,
    }
}

const fn replaced(name: &'static str) -> Field {
    Field {
        name,
        strategy: Strategy::Replace,
        merge_key: "",
        ty: &ANY,
    }
}

const fn conditions_by_type() -> Field {
    merge_by("conditions", "type", &ANY)
}

static ANY: Schema = Schema {
    go_kind: "struct",
    fields: &[],
};
static PRIMITIVE: Schema = Schema {
    go_kind: "string",
    fields: &[],
};
static OBJECT_META: Schema = Schema {
    go_kind: "struct",
    fields: &[
        merge_primitives("finalizers"),
        merge_by("ownerReferences", "uid", &ANY),
    ],
};
static CONTAINER: Schema = Schema {
    go_kind: "struct",
    fields: &[
        merge_by("ports", "containerPort", &ANY),
        merge_by("env", "name", &ANY),
        merge_by("volumeMounts", "mountPath", &ANY),
        merge_by("volumeDevices", "devicePath", &ANY),
    ],
};
static POD_SPEC: Schema = Schema {
    go_kind: "struct",
    fields: &[
        merge_by("volumes", "name", &ANY),
        merge_by("initContainers", "name", &CONTAINER),
        merge_by("containers", "name", &CONTAINER),
        merge_by("ephemeralContainers", "name", &CONTAINER),
        merge_by("imagePullSecrets", "name", &ANY),
        merge_by("hostAliases", "ip", &ANY),
        merge_by("topologySpreadConstraints", "topologyKey", &ANY),
        merge_by("schedulingGates", "name", &ANY),
        merge_by("resourceClaims", "name", &ANY),
        merge_by("evictionResponders", "name", &ANY),
    ],
};
static POD_STATUS: Schema = Schema {
    go_kind: "struct",
    fields: &[
        conditions_by_type(),
        merge_by("hostIPs", "ip", &ANY),
        merge_by("podIPs", "ip", &ANY),
        merge_by("resourceClaimStatuses", "name", &ANY),
        merge_by(
            "nodeAllocatableResourceClaimStatuses",
            "resourceClaimName",
            &ANY,
        ),
    ],
};
static POD: Schema = Schema {
    go_kind: "struct",
    fields: &[
        nested("metadata", &OBJECT_META),
        nested("spec", &POD_SPEC),
        nested("status", &POD_STATUS),
    ],
};
static POD_TEMPLATE_SPEC: Schema = Schema {
    go_kind: "struct",
    fields: &[nested("metadata", &OBJECT_META), nested("spec", &POD_SPEC)],
};
static CONDITIONS_STATUS: Schema = Schema {
    go_kind: "struct",
    fields: &[conditions_by_type()],
};
/// Deployment, ReplicaSet, DaemonSet, StatefulSet, ReplicationController and Job specs: their
/// pod template (Deployment's `strategy` is `retainKeys`, which only clients use).
static WORKLOAD_SPEC: Schema = Schema {
    go_kind: "struct",
    fields: &[nested("template", &POD_TEMPLATE_SPEC)],
};
static WORKLOAD: Schema = Schema {
    go_kind: "struct",
    fields: &[
        nested("metadata", &OBJECT_META),
        nested("spec", &WORKLOAD_SPEC),
        nested("status", &CONDITIONS_STATUS),
    ],
};
static JOB_TEMPLATE_SPEC: Schema = Schema {
    go_kind: "struct",
    fields: &[
        nested("metadata", &OBJECT_META),
        nested("spec", &WORKLOAD_SPEC),
    ],
};
static CRON_JOB_SPEC: Schema = Schema {
    go_kind: "struct",
    fields: &[nested("jobTemplate", &JOB_TEMPLATE_SPEC)],
};
static CRON_JOB: Schema = Schema {
    go_kind: "struct",
    fields: &[
        nested("metadata", &OBJECT_META),
        nested("spec", &CRON_JOB_SPEC),
    ],
};
static POD_TEMPLATE: Schema = Schema {
    go_kind: "struct",
    fields: &[
        nested("metadata", &OBJECT_META),
        nested("template", &POD_TEMPLATE_SPEC),
    ],
};
static SERVICE_SPEC: Schema = Schema {
    go_kind: "struct",
    fields: &[merge_by("ports", "port", &ANY)],
};
static SERVICE: Schema = Schema {
    go_kind: "struct",
    fields: &[
        nested("metadata", &OBJECT_META),
        nested("spec", &SERVICE_SPEC),
        nested("status", &CONDITIONS_STATUS),
    ],
};
static NODE_SPEC: Schema = Schema {
    go_kind: "struct",
    fields: &[merge_primitives("podCIDRs")],
};
static NODE_STATUS: Schema = Schema {
    go_kind: "struct",
    fields: &[conditions_by_type(), merge_by("addresses", "type", &ANY)],
};
static NODE: Schema = Schema {
    go_kind: "struct",
    fields: &[
        nested("metadata", &OBJECT_META),
        nested("spec", &NODE_SPEC),
        nested("status", &NODE_STATUS),
    ],
};
/// Kinds whose only tagged list is `status.conditions` (by `type`).
static CONDITIONED: Schema = Schema {
    go_kind: "struct",
    fields: &[
        nested("metadata", &OBJECT_META),
        nested("status", &CONDITIONS_STATUS),
    ],
};
static PDB_SPEC: Schema = Schema {
    go_kind: "struct",
    fields: &[replaced("selector")],
};
static PDB: Schema = Schema {
    go_kind: "struct",
    fields: &[
        nested("metadata", &OBJECT_META),
        nested("spec", &PDB_SPEC),
        nested("status", &CONDITIONS_STATUS),
    ],
};
static SERVICE_ACCOUNT: Schema = Schema {
    go_kind: "struct",
    fields: &[
        nested("metadata", &OBJECT_META),
        merge_by("secrets", "name", &ANY),
    ],
};
static WEBHOOK: Schema = Schema {
    go_kind: "struct",
    fields: &[merge_by("matchConditions", "name", &ANY)],
};
static WEBHOOK_CONFIGURATION: Schema = Schema {
    go_kind: "struct",
    fields: &[
        nested("metadata", &OBJECT_META),
        merge_by("webhooks", "name", &WEBHOOK),
    ],
};
static VALIDATING_POLICY_SPEC: Schema = Schema {
    go_kind: "struct",
    fields: &[
        merge_by("matchConditions", "name", &ANY),
        merge_by("variables", "name", &ANY),
    ],
};
static VALIDATING_POLICY: Schema = Schema {
    go_kind: "struct",
    fields: &[
        nested("metadata", &OBJECT_META),
        nested("spec", &VALIDATING_POLICY_SPEC),
    ],
};
static MUTATING_POLICY: Schema = Schema {
    go_kind: "struct",
    fields: &[nested("metadata", &OBJECT_META), nested("spec", &WEBHOOK)],
};
static CSI_NODE_SPEC: Schema = Schema {
    go_kind: "struct",
    fields: &[merge_by("drivers", "name", &ANY)],
};
static CSI_NODE_STATUS: Schema = Schema {
    go_kind: "struct",
    fields: &[merge_by("storageHealth", "name", &ANY)],
};
static CSI_NODE: Schema = Schema {
    go_kind: "struct",
    fields: &[
        nested("metadata", &OBJECT_META),
        nested("spec", &CSI_NODE_SPEC),
        nested("status", &CSI_NODE_STATUS),
    ],
};
static RESOURCE_CLAIM_STATUS: Schema = Schema {
    go_kind: "struct",
    fields: &[merge_by("reservedFor", "uid", &ANY)],
};
static RESOURCE_CLAIM: Schema = Schema {
    go_kind: "struct",
    fields: &[
        nested("metadata", &OBJECT_META),
        nested("status", &RESOURCE_CLAIM_STATUS),
    ],
};
/// Any other kind: only `metadata` has tagged fields.
static OTHER: Schema = Schema {
    go_kind: "struct",
    fields: &[nested("metadata", &OBJECT_META)],
};

#[cfg(test)]
static MERGE_ITEM: Schema = Schema {
    go_kind: "struct",
    fields: &[
        merge_by("mergingList", "name", &MERGE_ITEM),
        nested("nonMergingList", &MERGE_ITEM),
        merge_primitives("mergingIntList"),
        merge_by("mergeItemPtr", "name", &MERGE_ITEM),
        replaced("replacingItem"),
        nested("retainKeysMap", &RETAIN_KEYS_ITEM),
        merge_by("retainKeysMergingList", "name", &MERGE_ITEM),
    ],
};
#[cfg(test)]
static RETAIN_KEYS_ITEM: Schema = Schema {
    go_kind: "struct",
    fields: &[
        merge_primitives("mergingIntList"),
        merge_by("mergingList", "name", &MERGE_ITEM),
        nested("nonMergingList", &MERGE_ITEM),
    ],
};

/// The strategic-merge metadata of a built-in kind (the `patchStrategy`/`patchMergeKey` tags of
/// `k8s.io/api` and `metav1.ObjectMeta`).
fn schema_for_kind(kind: &str) -> &'static Schema {
    match kind {
        "Pod" => &POD,
        "PodTemplate" => &POD_TEMPLATE,
        "Deployment"
        | "ReplicaSet"
        | "DaemonSet"
        | "StatefulSet"
        | "ReplicationController"
        | "Job" => &WORKLOAD,
        "CronJob" => &CRON_JOB,
        "Service" => &SERVICE,
        "Node" => &NODE,
        "Namespace"
        | "PersistentVolumeClaim"
        | "HorizontalPodAutoscaler"
        | "FlowSchema"
        | "PriorityLevelConfiguration"
        | "CertificateSigningRequest"
        | "ServiceCIDR"
        | "DeviceTaintRule"
        | "StorageVersionMigration" => &CONDITIONED,
        "PodDisruptionBudget" => &PDB,
        "ServiceAccount" => &SERVICE_ACCOUNT,
        "ValidatingWebhookConfiguration" | "MutatingWebhookConfiguration" => &WEBHOOK_CONFIGURATION,
        "ValidatingAdmissionPolicy" => &VALIDATING_POLICY,
        "MutatingAdmissionPolicy" => &MUTATING_POLICY,
        "CSINode" => &CSI_NODE,
        "ResourceClaim" => &RESOURCE_CLAIM,
        #[cfg(test)]
        "MergeItem" => &MERGE_ITEM,
        _ => &OTHER,
    }
}

mod strategic {
    use super::{
        Field, PatchError, Schema, Strategy, go_json_kind, go_s, go_type_name, go_v, go_v_map,
        schema_for_kind,
    };
    use serde_json::{Map, Value};

    const DIRECTIVE: &str = "$patch";
    const DELETE: &str = "delete";
    const REPLACE: &str = "replace";
    const MERGE: &str = "merge";
    const RETAIN_KEYS: &str = "$retainKeys";
    const DELETE_FROM_PRIMITIVE_LIST: &str = "$deleteFromPrimitiveList";
    const SET_ELEMENT_ORDER: &str = "$setElementOrder";

    const ERR_BAD_PRIMITIVE_LIST: &str = "invalid patch format of primitive list";
    const ERR_BAD_RETAIN_KEYS: &str = "invalid patch format of retainKeys";
    const ERR_BAD_SET_ELEMENT_ORDER: &str = "invalid patch format of setElementOrder list";
    const ERR_NO_LIST_OF_LISTS: &str = "lists of lists are not supported";
    const ERR_PANIC: &str = "This request caused apiserver to panic. Look in the logs for details.";

    const MAP_TYPE: &str = "map[string]interface {}";
    const SLICE_TYPE: &str = "[]interface {}";

    type JsonMap = Map<String, Value>;

    /// An error of the strategic merge library, classified as kube-apiserver's
    /// `interpretStrategicMergePatchError` does.
    #[derive(Debug)]
    enum SmpError {
        /// 400 BadRequest.
        BadRequest(&'static str),
        /// 422 with kube's generic message.
        Unprocessable(&'static str),
        /// Passed through: 500, empty reason.
        Internal(String),
    }

    impl From<SmpError> for PatchError {
        fn from(e: SmpError) -> PatchError {
            match e {
                SmpError::BadRequest(m) => PatchError::bad_request(m),
                SmpError::Unprocessable(m) => PatchError::Unprocessable {
                    detail: m.to_string(),
                },
                SmpError::Internal(message) => PatchError::Internal { message },
            }
        }
    }

    type SmpResult<T> = Result<T, SmpError>;

    pub(super) fn apply(kind: &str, original: &Value, patch: Value) -> Result<Value, PatchError> {
        let patch = match patch {
            Value::Object(m) => m,
            // Go decodes `null` into a nil map: the object is unchanged.
            Value::Null => return Ok(original.clone()),
            other => {
                return Err(PatchError::bad_request(format!(
                    "json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
                    go_json_kind(&other)
                )));
            }
        };
        let original = match original {
            Value::Object(m) => m.clone(),
            _ => JsonMap::new(),
        };
        Ok(Value::Object(merge_map(
            original,
            patch,
            schema_for_kind(kind),
        )?))
    }

    /// Go's dynamic type of a decoded JSON value (`int64` for integers that fit, like
    /// `UnmarshalCaseSensitivePreserveInts` and the unstructured converter).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum GoType {
        Nil,
        Bool,
        Int,
        Float,
        String,
        Map,
        Slice,
    }

    fn go_type(v: &Value) -> GoType {
        match v {
            Value::Null => GoType::Nil,
            Value::Bool(_) => GoType::Bool,
            Value::Number(n) if n.is_i64() => GoType::Int,
            Value::Number(_) => GoType::Float,
            Value::String(_) => GoType::String,
            Value::Object(_) => GoType::Map,
            Value::Array(_) => GoType::Slice,
        }
    }

    fn bad_arg_type(expected: &str, actual: &Value) -> SmpError {
        SmpError::Internal(format!(
            "expected a {expected}, but received a {}",
            go_type_name(actual)
        ))
    }

    fn no_merge_key(m: &JsonMap, key: &str) -> SmpError {
        SmpError::Internal(format!(
            "map: {} does not contain declared merge key: {key}",
            go_v_map(m)
        ))
    }

    fn bad_patch_type(t: &Value, m: &JsonMap) -> SmpError {
        SmpError::Internal(format!(
            "unknown patch type: {} in map: {}",
            go_s(t),
            go_v_map(m)
        ))
    }

    fn is_directive_key(k: &str) -> bool {
        k == DIRECTIVE
            || k == RETAIN_KEYS
            || k.starts_with(SET_ELEMENT_ORDER)
            || k.starts_with(DELETE_FROM_PRIMITIVE_LIST)
    }

    /// What decoding into the typed object does to a value taken verbatim from the patch: `null`
    /// members and (unknown) directive members disappear.
    fn finalize(v: Value) -> Value {
        match v {
            Value::Object(m) => Value::Object(finalize_map(m)),
            Value::Array(a) => Value::Array(a.into_iter().map(finalize).collect()),
            other => other,
        }
    }

    fn finalize_map(m: JsonMap) -> JsonMap {
        m.into_iter()
            .filter(|(k, v)| !v.is_null() && !is_directive_key(k))
            .map(|(k, v)| (k, finalize(v)))
            .collect()
    }

    /// kube's `removeDirectives`: maps carrying `$patch` are dropped (`None` at the top).
    fn remove_directives(v: Value) -> Option<Value> {
        match v {
            Value::Object(m) => {
                if m.contains_key(DIRECTIVE) {
                    return None;
                }
                Some(Value::Object(
                    m.into_iter()
                        .filter_map(|(k, v)| remove_directives(v).map(|v| (k, v)))
                        .collect(),
                ))
            }
            Value::Array(a) => Some(Value::Array(
                a.into_iter().filter_map(remove_directives).collect(),
            )),
            other => Some(other),
        }
    }

    /// kube's `discardNullValuesFromPatch`.
    fn discard_nulls(v: &mut Value) {
        match v {
            Value::Object(m) => {
                m.retain(|_, v| !v.is_null());
                m.values_mut().for_each(discard_nulls);
            }
            Value::Array(a) => a.iter_mut().for_each(discard_nulls),
            _ => {}
        }
    }

    /// A patch value that takes the place of a missing field or of a value of another type.
    fn new_value(mut v: Value) -> Option<Value> {
        discard_nulls(&mut v);
        remove_directives(v).map(finalize)
    }

    /// `extractKey`: `<prefix>/<key>` → `<key>`.
    fn extract_key<'a>(s: &'a str, prefix: &str) -> SmpResult<&'a str> {
        match s.split_once('/') {
            Some((p, key)) if p == prefix => Ok(key),
            _ if prefix == DELETE_FROM_PRIMITIVE_LIST => {
                Err(SmpError::BadRequest(ERR_BAD_PRIMITIVE_LIST))
            }
            _ => Err(SmpError::BadRequest(ERR_BAD_SET_ELEMENT_ORDER)),
        }
    }

    fn merge_map(
        mut original: JsonMap,
        mut patch: JsonMap,
        schema: &'static Schema,
    ) -> SmpResult<JsonMap> {
        if let Some(directive) = patch.get(DIRECTIVE) {
            return match directive.as_str() {
                Some(REPLACE) => {
                    patch.shift_remove(DIRECTIVE);
                    Ok(finalize_map(patch))
                }
                Some(DELETE) => Ok(JsonMap::new()),
                _ => Err(bad_patch_type(directive, &patch)),
            };
        }
        apply_retain_keys(&mut original, &mut patch)?;
        merge_set_element_order(&mut original, &mut patch, schema)?;

        for (k, patch_v) in patch {
            let (key, is_delete_list) = if k.starts_with(DELETE_FROM_PRIMITIVE_LIST) {
                (
                    extract_key(&k, DELETE_FROM_PRIMITIVE_LIST)?.to_string(),
                    true,
                )
            } else {
                (k, false)
            };
            if patch_v.is_null() {
                original.shift_remove(&key);
                continue;
            }
            let Some(orig_v) = original.get_mut(&key) else {
                if !is_delete_list && let Some(v) = new_value(patch_v) {
                    original.insert(key, v);
                }
                continue;
            };
            if go_type(orig_v) != go_type(&patch_v) {
                if !is_delete_list {
                    match new_value(patch_v) {
                        Some(v) => *orig_v = v,
                        None => {
                            original.shift_remove(&key);
                        }
                    }
                }
                continue;
            }
            match (orig_v, patch_v) {
                (Value::Object(o), Value::Object(p)) => {
                    let field = schema.lookup(&key);
                    *o = if field.strategy == Strategy::Replace {
                        finalize_map(p)
                    } else {
                        merge_map(std::mem::take(o), p, field.ty)?
                    };
                }
                (Value::Array(o), Value::Array(p)) => {
                    let field = schema.lookup(&key);
                    *o = merge_slice_handler(std::mem::take(o), p, field, is_delete_list)?;
                }
                (o, p) => *o = p,
            }
        }
        Ok(original)
    }

    /// `applyRetainKeysDirective`: fields of `original` not listed are cleared; every field the
    /// patch sets must be listed.
    fn apply_retain_keys(original: &mut JsonMap, patch: &mut JsonMap) -> SmpResult<()> {
        let Some(retain) = patch.shift_remove(RETAIN_KEYS) else {
            return Ok(());
        };
        let Value::Array(list) = retain else {
            return Err(SmpError::BadRequest(ERR_BAD_RETAIN_KEYS));
        };
        let listed = |k: &str| list.iter().any(|v| v.as_str() == Some(k));
        for (k, v) in patch.iter() {
            if v.is_null()
                || k.starts_with(DELETE_FROM_PRIMITIVE_LIST)
                || k.starts_with(SET_ELEMENT_ORDER)
            {
                continue;
            }
            if !listed(k) {
                return Err(SmpError::BadRequest(ERR_BAD_RETAIN_KEYS));
            }
        }
        original.retain(|k, _| listed(k));
        Ok(())
    }

    fn as_list(v: Option<&Value>) -> SmpResult<Option<&Vec<Value>>> {
        match v {
            None => Ok(None),
            Some(Value::Array(a)) => Ok(Some(a)),
            Some(other) => Err(bad_arg_type(SLICE_TYPE, other)),
        }
    }

    /// `mergePatchIntoOriginal`: each `$setElementOrder/<list>` merges `<list>` and then orders
    /// the result: `$setElementOrder` first, then the patch's order, then the live order.
    fn merge_set_element_order(
        original: &mut JsonMap,
        patch: &mut JsonMap,
        schema: &'static Schema,
    ) -> SmpResult<()> {
        let keys: Vec<String> = patch
            .keys()
            .filter(|k| k.starts_with(SET_ELEMENT_ORDER))
            .cloned()
            .collect();
        for key in keys {
            let Some(order) = patch.shift_remove(&key) else {
                continue;
            };
            let Value::Array(order) = order else {
                return Err(bad_arg_type(SLICE_TYPE, &order));
            };
            let list_key = extract_key(&key, SET_ELEMENT_ORDER)?.to_string();
            // A typed object never holds a null list (omitempty), so treat one as absent.
            let orig_list = as_list(original.get(&list_key).filter(|v| !v.is_null()))?.cloned();
            let patch_list = as_list(patch.get(&list_key))?.cloned();
            let field = schema.lookup_ordered_list(&list_key, &order);
            let merge_key = field.merge_key;
            validate_patch_with_set_order_list(
                patch_list.as_deref().unwrap_or(&[]),
                &order,
                merge_key,
            )?;
            let merged = match (&orig_list, patch_list.clone()) {
                (Some(o), None) => o.clone(),
                (None, Some(p)) => match remove_directives(Value::Array(p)) {
                    Some(Value::Array(p)) => p.into_iter().map(finalize).collect(),
                    _ => continue,
                },
                (Some(o), Some(p)) => merge_slice_handler(o.clone(), p, field, false)?,
                (None, None) => continue,
            };
            let (patch_items, server_only) = if merge_key.is_empty() {
                partition_primitives(merged, &order)
            } else {
                partition_maps(merged, &order, merge_key)?
            };
            let kind = slice_element_type(&[
                orig_list.as_deref().unwrap_or(&[]),
                patch_list.as_deref().unwrap_or(&[]),
            ])?;
            let both = normalize_element_order(
                patch_items,
                server_only,
                &order,
                orig_list.as_deref().unwrap_or(&[]),
                merge_key,
                kind,
            )?;
            original.insert(list_key.clone(), Value::Array(both));
            patch.shift_remove(&list_key);
        }
        Ok(())
    }

    /// `validatePatchWithSetOrderList`: the patch list must follow the `$setElementOrder` order.
    fn validate_patch_with_set_order_list(
        patch_list: &[Value],
        order: &[Value],
        merge_key: &str,
    ) -> SmpResult<()> {
        if order.is_empty() || patch_list.is_empty() {
            return Ok(());
        }
        let non_delete: Vec<&Value> = if merge_key.is_empty() {
            patch_list.iter().collect()
        } else {
            let (keep, _) = split_delete_items(patch_list.iter())?;
            keep
        };
        let (mut pi, mut si) = (0, 0);
        while pi < non_delete.len() && si < order.len() {
            if non_delete[pi]
                .as_object()
                .is_some_and(|m| m.contains_key(DIRECTIVE))
            {
                pi += 1;
                continue;
            }
            if merge_key_value_equal(non_delete[pi], &order[si], merge_key)? {
                pi += 1;
            }
            si += 1;
        }
        if pi < non_delete.len() && si >= order.len() {
            return Err(SmpError::Internal(format!(
                "The order in patch list:\n{}\n doesn't match {SET_ELEMENT_ORDER} list:\n{}\n",
                go_v(&Value::Array(patch_list.to_vec())),
                go_v(&Value::Array(order.to_vec()))
            )));
        }
        Ok(())
    }

    fn merge_key_value_equal(left: &Value, right: &Value, merge_key: &str) -> SmpResult<bool> {
        if merge_key.is_empty() {
            return Ok(left == right);
        }
        let l = left
            .as_object()
            .ok_or_else(|| bad_arg_type(MAP_TYPE, left))?;
        let r = right
            .as_object()
            .ok_or_else(|| bad_arg_type(MAP_TYPE, right))?;
        let lv = l.get(merge_key).ok_or_else(|| no_merge_key(l, merge_key))?;
        let rv = r.get(merge_key).ok_or_else(|| no_merge_key(r, merge_key))?;
        Ok(lv == rv)
    }

    /// `extractToDeleteItems`: splits list items into kept ones and `$patch: delete` ones.
    fn split_delete_items<T: std::borrow::Borrow<Value>>(
        items: impl Iterator<Item = T>,
    ) -> SmpResult<(Vec<T>, Vec<T>)> {
        let mut keep = Vec::new();
        let mut delete = Vec::new();
        for item in items {
            let m = item
                .borrow()
                .as_object()
                .ok_or_else(|| bad_arg_type(MAP_TYPE, item.borrow()))?;
            if m.get(DIRECTIVE).and_then(Value::as_str) == Some(DELETE) {
                delete.push(item);
            } else {
                keep.push(item);
            }
        }
        Ok((keep, delete))
    }

    fn merge_slice_handler(
        original: Vec<Value>,
        patch: Vec<Value>,
        field: Field,
        is_delete_list: bool,
    ) -> SmpResult<Vec<Value>> {
        if field.strategy == Strategy::Merge || is_delete_list {
            merge_slice(original, patch, field, is_delete_list)
        } else {
            Ok(patch.into_iter().map(finalize).collect())
        }
    }

    fn merge_slice(
        original: Vec<Value>,
        patch: Vec<Value>,
        field: Field,
        is_delete_list: bool,
    ) -> SmpResult<Vec<Value>> {
        if original.is_empty() && patch.is_empty() {
            return Ok(original);
        }
        let kind = slice_element_type(&[&original, &patch])?;
        if kind != GoType::Map {
            if is_delete_list {
                return Ok(original
                    .into_iter()
                    .filter(|v| !patch.contains(v))
                    .collect());
            }
            let mut merged: Vec<Value> = Vec::with_capacity(original.len() + patch.len());
            for v in original.iter().chain(patch.iter()) {
                if !merged.contains(v) {
                    merged.push(v.clone());
                }
            }
            let (patch_items, server_only) = partition_primitives(merged, &patch);
            return normalize_element_order(patch_items, server_only, &patch, &original, "", kind);
        }
        let merge_key = field.merge_key;
        if merge_key.is_empty() {
            return Err(SmpError::Internal(format!(
                "cannot merge lists without merge key for {}",
                field.ty.go_kind
            )));
        }
        let (original, patch) = merge_slice_with_special_elements(original, patch, merge_key)?;
        let merged =
            merge_slice_without_special_elements(original.clone(), &patch, merge_key, field.ty)?;
        let (patch_items, server_only) = partition_maps(merged, &patch, merge_key)?;
        normalize_element_order(patch_items, server_only, &patch, &original, merge_key, kind)
    }

    /// `mergeSliceWithSpecialElements`: applies `$patch: delete` items, and `$patch: replace`
    /// (the list becomes the patch's other items). Returns the new original and the patch items.
    fn merge_slice_with_special_elements(
        mut original: Vec<Value>,
        patch: Vec<Value>,
        merge_key: &str,
    ) -> SmpResult<(Vec<Value>, Vec<Value>)> {
        let mut plain = Vec::with_capacity(patch.len());
        let mut replace = false;
        for v in patch {
            let Some(m) = v.as_object() else {
                return Err(bad_arg_type(MAP_TYPE, &v));
            };
            match m.get(DIRECTIVE) {
                None => plain.push(v),
                Some(directive) => match directive.as_str() {
                    Some(DELETE) => {
                        let value = m.get(merge_key).ok_or_else(|| no_merge_key(m, merge_key))?;
                        let mut kept = Vec::with_capacity(original.len());
                        for (i, item) in original.into_iter().enumerate() {
                            let Some(im) = item.as_object() else {
                                return Err(SmpError::Internal(format!(
                                    "value for key {i} is not a map"
                                )));
                            };
                            if im.get(merge_key) != Some(value) {
                                kept.push(item);
                            }
                        }
                        original = kept;
                    }
                    Some(REPLACE) => replace = true,
                    Some(MERGE) => {
                        return Err(SmpError::Internal(
                            "merging lists cannot yet be specified in the patch".to_string(),
                        ));
                    }
                    _ => return Err(bad_patch_type(directive, m)),
                },
            }
        }
        if replace {
            Ok((plain.into_iter().map(finalize).collect(), Vec::new()))
        } else {
            Ok((original, plain))
        }
    }

    /// `findMapInSliceBasedOnKeyValue`: the first item whose merge key has `value`.
    fn find_by_key(list: &[Value], merge_key: &str, value: &Value) -> SmpResult<Option<usize>> {
        for (i, item) in list.iter().enumerate() {
            let Some(m) = item.as_object() else {
                return Err(SmpError::Internal(format!(
                    "value for key {i} is not a map"
                )));
            };
            if m.get(merge_key) == Some(value) {
                return Ok(Some(i));
            }
        }
        Ok(None)
    }

    /// `mergeSliceWithoutSpecialElements`: items with a known merge key are merged into the
    /// live item, others appended.
    fn merge_slice_without_special_elements(
        mut original: Vec<Value>,
        patch: &[Value],
        merge_key: &str,
        schema: &'static Schema,
    ) -> SmpResult<Vec<Value>> {
        for v in patch {
            let Some(m) = v.as_object() else {
                return Err(bad_arg_type(MAP_TYPE, v));
            };
            let value = m.get(merge_key).ok_or_else(|| no_merge_key(m, merge_key))?;
            match find_by_key(&original, merge_key, value)? {
                Some(i) => {
                    let live = match std::mem::take(&mut original[i]) {
                        Value::Object(live) => live,
                        _ => JsonMap::new(),
                    };
                    original[i] = Value::Object(merge_map(live, m.clone(), schema)?);
                }
                None => original.push(finalize(v.clone())),
            }
        }
        Ok(original)
    }

    fn partition_primitives(merged: Vec<Value>, by: &[Value]) -> (Vec<Value>, Vec<Value>) {
        merged.into_iter().partition(|v| by.contains(v))
    }

    fn partition_maps(
        merged: Vec<Value>,
        by: &[Value],
        merge_key: &str,
    ) -> SmpResult<(Vec<Value>, Vec<Value>)> {
        let mut in_patch = Vec::new();
        let mut server_only = Vec::new();
        for v in merged {
            let m = v.as_object().ok_or_else(|| bad_arg_type(MAP_TYPE, &v))?;
            let value = m.get(merge_key).ok_or_else(|| no_merge_key(m, merge_key))?;
            if find_by_key(by, merge_key, value)?.is_some() {
                in_patch.push(v);
            } else {
                server_only.push(v);
            }
        }
        Ok((in_patch, server_only))
    }

    /// `sliceElementType`: all items of the lists must have one Go type, not a list.
    fn slice_element_type(lists: &[&[Value]]) -> SmpResult<GoType> {
        let mut prev: Option<GoType> = None;
        for v in lists.iter().flat_map(|l| l.iter()) {
            let t = go_type(v);
            match prev {
                None => {
                    match t {
                        // Go dereferences the nil type here and panics.
                        GoType::Nil => return Err(SmpError::Internal(ERR_PANIC.to_string())),
                        GoType::Slice => return Err(SmpError::Unprocessable(ERR_NO_LIST_OF_LISTS)),
                        _ => {}
                    }
                    prev = Some(t);
                }
                Some(p) if p != t => {
                    let shown: Vec<String> = lists
                        .iter()
                        .map(|l| go_v(&Value::Array(l.to_vec())))
                        .collect();
                    return Err(SmpError::Internal(format!(
                        "list element types are not identical: [{}]",
                        shown.join(" ")
                    )));
                }
                Some(_) => {}
            }
        }
        prev.ok_or_else(|| SmpError::Internal("no elements in any of the given slices".to_string()))
    }

    /// kube's `index`: position of an item in `list`, by merge key for maps.
    fn index_of(list: &[Value], item: &Value, merge_key: &str, kind: GoType) -> Option<usize> {
        if kind == GoType::Map {
            let key = |v: &Value| v.as_object().and_then(|m| m.get(merge_key)).cloned();
            let wanted = key(item);
            list.iter().position(|v| key(v) == wanted)
        } else {
            list.iter().position(|v| v == item)
        }
    }

    /// `normalizeElementOrder`: sorts patch items by `patch_order` and server-only items by
    /// `server_order`, then interleaves them.
    fn normalize_element_order(
        patch_items: Vec<Value>,
        server_only: Vec<Value>,
        patch_order: &[Value],
        server_order: &[Value],
        merge_key: &str,
        kind: GoType,
    ) -> SmpResult<Vec<Value>> {
        let patch_items = normalize_slice_order(patch_items, patch_order, merge_key, kind)?;
        let server_only = normalize_slice_order(server_only, server_order, merge_key, kind)?;
        Ok(merge_sorted_slice(
            server_only,
            patch_items,
            server_order,
            merge_key,
            kind,
        ))
    }

    fn validate_merge_key_in_lists(merge_key: &str, lists: &[&[Value]]) -> SmpResult<()> {
        for item in lists.iter().flat_map(|l| l.iter()) {
            let m = item
                .as_object()
                .ok_or_else(|| bad_arg_type(MAP_TYPE, item))?;
            if !m.contains_key(merge_key) {
                return Err(no_merge_key(m, merge_key));
            }
        }
        Ok(())
    }

    /// `normalizeSliceOrder`: stable sort by position in `order`; `$patch: delete` items last.
    fn normalize_slice_order(
        to_sort: Vec<Value>,
        order: &[Value],
        merge_key: &str,
        kind: GoType,
    ) -> SmpResult<Vec<Value>> {
        let (mut items, deletes) = if kind == GoType::Map {
            validate_merge_key_in_lists(merge_key, &[&to_sort, order])?;
            split_delete_items(to_sort.into_iter())?
        } else {
            (to_sort, Vec::new())
        };
        items.sort_by_cached_key(|v| index_of(order, v, merge_key, kind).unwrap_or(usize::MAX));
        items.extend(deletes);
        Ok(items)
    }

    /// `mergeSortedSlice`: inserts each server-only item (`left`) before the first patch item
    /// (`right`) that comes after it in the live order; patch items not in the live order come
    /// first.
    fn merge_sorted_slice(
        left: Vec<Value>,
        right: Vec<Value>,
        server_order: &[Value],
        merge_key: &str,
        kind: GoType,
    ) -> Vec<Value> {
        let mut out = Vec::with_capacity(left.len() + right.len());
        let mut left = left.into_iter().peekable();
        let mut right = right.into_iter().peekable();
        loop {
            let take_left = match (left.peek(), right.peek()) {
                (None, None) => break,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (Some(l), Some(r)) => {
                    match (
                        index_of(server_order, l, merge_key, kind),
                        index_of(server_order, r, merge_key, kind),
                    ) {
                        (Some(li), Some(ri)) => li < ri,
                        _ => false,
                    }
                }
            };
            let next = if take_left { left.next() } else { right.next() };
            out.extend(next);
        }
        out
    }
}

// ---------------------------------------------------------------------------------------------
// Helpers: depth, Go-style formatting of values in messages.
// ---------------------------------------------------------------------------------------------

/// Nesting depth of arrays/objects (a scalar is 0, `{}` is 1).
fn value_depth(v: &Value) -> usize {
    match v {
        Value::Object(m) => 1 + m.values().map(value_depth).max().unwrap_or(0),
        Value::Array(a) => 1 + a.iter().map(value_depth).max().unwrap_or(0),
        _ => 0,
    }
}

/// The JSON type name Go's `json.UnmarshalTypeError` reports.
fn go_json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Go's `reflect.TypeOf(v)` printed with `%s` (a nil type prints as `%!s(<nil>)`).
fn go_type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "%!s(<nil>)",
        v => kube_wire::gofmt::go_type(v),
    }
}

/// Go's `%v` of a decoded JSON value (`map[k:v ...]` with sorted keys, `[a b]`, `<nil>`).
fn go_v(v: &Value) -> String {
    match v {
        Value::Null => "<nil>".to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => go_number(n),
        Value::String(s) => s.clone(),
        Value::Array(a) => format!("[{}]", a.iter().map(go_v).collect::<Vec<_>>().join(" ")),
        Value::Object(m) => go_v_map(m),
    }
}

fn go_v_map(m: &Map<String, Value>) -> String {
    let mut entries: Vec<(&String, &Value)> = m.iter().collect();
    entries.sort_by(|a, b| a.0.cmp(b.0));
    let parts: Vec<String> = entries
        .into_iter()
        .map(|(k, v)| format!("{k}:{}", go_v(v)))
        .collect();
    format!("map[{}]", parts.join(" "))
}

/// Go's `%s` of a decoded JSON value (non-strings print as `%!s(type=value)`).
fn go_s(v: &Value) -> String {
    match v {
        Value::Null => "%!s(<nil>)".to_string(),
        Value::Bool(b) => format!("%!s(bool={b})"),
        Value::Number(n) if n.is_i64() => format!("%!s(int64={n})"),
        Value::Number(n) => format!("%!s(float64={})", go_number(n)),
        Value::String(s) => s.clone(),
        Value::Array(a) => format!("[{}]", a.iter().map(go_s).collect::<Vec<_>>().join(" ")),
        Value::Object(m) => {
            let mut entries: Vec<(&String, &Value)> = m.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            let parts: Vec<String> = entries
                .into_iter()
                .map(|(k, v)| format!("{k}:{}", go_s(v)))
                .collect();
            format!("map[{}]", parts.join(" "))
        }
    }
}

fn go_number(n: &serde_json::Number) -> String {
    match n.as_i64() {
        Some(i) => i.to_string(),
        None => go_float(n.as_f64().unwrap_or(0.0)),
    }
}

/// Go's `json.Marshal`: keys sorted, `<`, `>`, `&`, U+2028 and U+2029 escaped.
fn go_json(v: &Value) -> String {
    fn sorted(v: &Value) -> Value {
        match v {
            Value::Object(m) => {
                let mut entries: Vec<(&String, &Value)> = m.iter().collect();
                entries.sort_by(|a, b| a.0.cmp(b.0));
                Value::Object(
                    entries
                        .into_iter()
                        .map(|(k, v)| (k.clone(), sorted(v)))
                        .collect(),
                )
            }
            Value::Array(a) => Value::Array(a.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    let text = serde_json::to_string(&sorted(v)).unwrap_or_default();
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn apply(ty: PatchType, kind: &str, original: &Value, body: &str) -> Result<Value, PatchError> {
        apply_patch(ty, kind, original, body.as_bytes())
    }

    fn ok(ty: PatchType, kind: &str, original: &Value, patch: &Value) -> Value {
        apply(ty, kind, original, &patch.to_string())
            .unwrap_or_else(|e| panic!("patch {patch} failed: {e} ({e:?})"))
    }

    fn err(ty: PatchType, kind: &str, original: &Value, body: &str) -> PatchError {
        match apply(ty, kind, original, body) {
            Ok(v) => panic!("patch {body} unexpectedly succeeded: {v}"),
            Err(e) => e,
        }
    }

    fn smp(kind: &str, original: &Value, patch: Value) -> Value {
        ok(PatchType::StrategicMerge, kind, original, &patch)
    }

    fn smp_err(kind: &str, original: &Value, patch: Value) -> PatchError {
        err(
            PatchType::StrategicMerge,
            kind,
            original,
            &patch.to_string(),
        )
    }

    fn json_patch(original: &Value, patch: Value) -> Result<Value, PatchError> {
        apply(PatchType::Json, "ConfigMap", original, &patch.to_string())
    }

    fn assert_error(e: &PatchError, code: u16, reason: &str, message: &str) {
        assert_eq!(
            (e.code(), e.reason(), e.to_string().as_str()),
            (code, reason, message),
            "{e:?}"
        );
    }

    const GENERIC_422: &str = "the server rejected our request due to an error in our request";

    fn pod() -> Value {
        json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "web",
                "namespace": "default",
                "labels": {"app": "web", "tier": "frontend"},
                "annotations": {"note": "x"},
                "finalizers": ["example.com/a"],
            },
            "spec": {
                "containers": [
                    {
                        "name": "app",
                        "image": "nginx:1.25",
                        "ports": [{"containerPort": 80, "protocol": "TCP"}],
                        "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                        "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                    },
                    {"name": "sidecar", "image": "busybox", "args": ["sleep", "3600"]},
                ],
                "volumes": [{"name": "data", "emptyDir": {}}],
                "tolerations": [{"key": "a", "operator": "Exists"}],
                "nodeSelector": {"disk": "ssd"},
            },
            "status": {
                "phase": "Running",
                "conditions": [
                    {"type": "Ready", "status": "False"},
                    {"type": "Initialized", "status": "True"},
                ],
            },
        })
    }

    fn deployment() -> Value {
        json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"}},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": {"app": "web"}},
                "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {
                        "containers": [
                            {"name": "app", "image": "nginx:1.25", "imagePullPolicy": "IfNotPresent"},
                            {"name": "sidecar", "image": "busybox"},
                        ],
                    },
                },
            },
        })
    }

    // ---- media types and 415 ----

    #[test]
    fn content_types() {
        assert_eq!(
            PatchType::from_content_type(JSON_PATCH),
            Some(PatchType::Json)
        );
        assert_eq!(
            PatchType::from_content_type("application/merge-patch+json; charset=utf-8"),
            Some(PatchType::Merge)
        );
        assert_eq!(
            PatchType::from_content_type("Application/Strategic-Merge-Patch+JSON"),
            Some(PatchType::StrategicMerge)
        );
        assert_eq!(
            PatchType::from_content_type("application/apply-patch+yaml"),
            Some(PatchType::Apply)
        );
        assert_eq!(PatchType::from_content_type("application/json"), None);
        assert_eq!(PatchType::from_content_type(""), None);
        for ty in [PatchType::Json, PatchType::Merge, PatchType::StrategicMerge] {
            assert_eq!(PatchType::from_content_type(ty.media_type()), Some(ty));
        }
    }

    #[test]
    fn unsupported_media_types() {
        assert!(check_supported(PatchType::StrategicMerge, true).is_ok());
        assert!(check_supported(PatchType::Json, false).is_ok());
        assert!(check_supported(PatchType::Merge, false).is_ok());
        assert!(!supports_strategic(false));
        assert_error(
            &check_supported(PatchType::StrategicMerge, false).unwrap_err(),
            415,
            "UnsupportedMediaType",
            "the body of the request was in an unknown format - accepted media types include: \
             application/json-patch+json, application/merge-patch+json",
        );
        let builtin_415 = "the body of the request was in an unknown format - accepted media types \
             include: application/json-patch+json, application/merge-patch+json, \
             application/strategic-merge-patch+json";
        assert_error(
            &check_supported(PatchType::Apply, true).unwrap_err(),
            415,
            "UnsupportedMediaType",
            builtin_415,
        );
        assert_error(
            &err(PatchType::Apply, "Pod", &pod(), "{}"),
            415,
            "UnsupportedMediaType",
            builtin_415,
        );
    }

    #[test]
    fn error_codes_and_reasons() {
        let cases = [
            (
                PatchError::unsupported_media_type(true),
                415,
                "UnsupportedMediaType",
            ),
            (PatchError::bad_request("x"), 400, "BadRequest"),
            (
                PatchError::TooManyOperations { max: 1, got: 2 },
                413,
                "RequestEntityTooLarge",
            ),
            (
                PatchError::Unprocessable { detail: "d".into() },
                422,
                "Invalid",
            ),
            (
                PatchError::InvalidResult {
                    value: "[]".into(),
                    detail: "d".into(),
                },
                422,
                "Invalid",
            ),
            (
                PatchError::Internal {
                    message: "m".into(),
                },
                500,
                "",
            ),
        ];
        for (e, code, reason) in cases {
            assert_eq!((e.code(), e.reason()), (code, reason), "{e:?}");
        }
    }

    #[test]
    fn body_that_is_not_json_is_400() {
        for ty in [PatchType::Json, PatchType::Merge, PatchType::StrategicMerge] {
            for body in ["", "  ", "{", "{\"a\":}", "[1,]", "nul", "{} {}"] {
                assert_error(
                    &err(ty, "Pod", &pod(), body),
                    400,
                    "BadRequest",
                    "invalid JSON patch",
                );
            }
        }
    }

    // ---- JSON merge patch ----

    #[test]
    fn rfc7386_appendix_a_examples() {
        let cases = [
            (json!({"a":"b"}), json!({"a":"c"}), json!({"a":"c"})),
            (json!({"a":"b"}), json!({"b":"c"}), json!({"a":"b","b":"c"})),
            (json!({"a":"b"}), json!({"a":null}), json!({})),
            (
                json!({"a":"b","b":"c"}),
                json!({"a":null}),
                json!({"b":"c"}),
            ),
            (json!({"a":["b"]}), json!({"a":"c"}), json!({"a":"c"})),
            (json!({"a":"c"}), json!({"a":["b"]}), json!({"a":["b"]})),
            (
                json!({"a":{"b":"c"}}),
                json!({"a":{"b":"d","c":null}}),
                json!({"a":{"b":"d"}}),
            ),
            (json!({"a":[{"b":"c"}]}), json!({"a":[1]}), json!({"a":[1]})),
            (json!(["a", "b"]), json!(["c", "d"]), json!(["c", "d"])),
            (json!({"a":"b"}), json!(["c"]), json!(["c"])),
            (json!({"a":"foo"}), json!(null), json!(null)),
            (json!({"a":"foo"}), json!("bar"), json!("bar")),
            (json!({"e":null}), json!({"a":1}), json!({"e":null,"a":1})),
            (json!([1, 2]), json!({"a":"b","c":null}), json!({"a":"b"})),
            (
                json!({}),
                json!({"a":{"bb":{"ccc":null}}}),
                json!({"a":{"bb":{}}}),
            ),
        ];
        for (target, patch, want) in cases {
            assert_eq!(
                json_merge(target.clone(), patch.clone()),
                want,
                "{target} + {patch}"
            );
        }
    }

    #[test]
    fn rfc7386_section_3_example() {
        let target = json!({
            "title": "Goodbye!",
            "author": {"givenName": "John", "familyName": "Doe"},
            "tags": ["example", "sample"],
            "content": "This will be unchanged",
        });
        let patch = json!({
            "title": "Hello!",
            "phoneNumber": "+01-123-456-7890",
            "author": {"familyName": null},
            "tags": ["example"],
        });
        let got = ok(PatchType::Merge, "Widget", &target, &patch);
        assert_eq!(
            got,
            json!({
                "title": "Hello!",
                "author": {"givenName": "John"},
                "tags": ["example"],
                "content": "This will be unchanged",
                "phoneNumber": "+01-123-456-7890",
            })
        );
        // Existing keys keep their place; new keys are appended.
        let keys: Vec<&str> = got
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(keys, ["title", "author", "tags", "content", "phoneNumber"]);
    }

    #[test]
    fn merge_patch_kubectl_style() {
        // kubectl scale (scale subresource) and kubectl label/annotate send merge patches.
        let d = ok(
            PatchType::Merge,
            "Deployment",
            &deployment(),
            &json!({"spec": {"replicas": 5}}),
        );
        assert_eq!(d["spec"]["replicas"], 5);
        let p = ok(
            PatchType::Merge,
            "Pod",
            &pod(),
            &json!({"metadata": {"labels": {"tier": null, "env": "prod"}, "annotations": {"note": "y"}}}),
        );
        assert_eq!(
            p["metadata"]["labels"],
            json!({"app": "web", "env": "prod"})
        );
        assert_eq!(p["metadata"]["annotations"], json!({"note": "y"}));
        // Lists are replaced wholesale by a merge patch.
        let p = ok(
            PatchType::Merge,
            "Pod",
            &pod(),
            &json!({"spec": {"containers": [{"name": "only", "image": "x"}]}}),
        );
        assert_eq!(
            p["spec"]["containers"],
            json!([{"name": "only", "image": "x"}])
        );
    }

    #[test]
    fn merge_patch_null_pruning_follows_json_patch_v4() {
        let patch = json!({"a": [{"x": null, "y": 1}, null]});
        // Filling a missing key or replacing a non-object: nulls inside are pruned.
        let got = ok(PatchType::Merge, "Widget", &json!({}), &patch);
        assert_eq!(got, json!({"a": [{"y": 1}, null]}));
        let got = ok(PatchType::Merge, "Widget", &json!({"a": [1]}), &patch);
        assert_eq!(got, json!({"a": [{"y": 1}, null]}));
        // Replacing an object with a non-object: taken as is.
        let got = ok(PatchType::Merge, "Widget", &json!({"a": {"k": 1}}), &patch);
        assert_eq!(got, json!({"a": [{"x": null, "y": 1}, null]}));
        // Removing a missing key is fine.
        let got = ok(
            PatchType::Merge,
            "Widget",
            &json!({"b": 1}),
            &json!({"zz": null}),
        );
        assert_eq!(got, json!({"b": 1}));
    }

    #[test]
    fn merge_patch_errors() {
        for body in ["null", "5", "\"x\"", "true"] {
            assert_error(
                &err(PatchType::Merge, "Pod", &pod(), body),
                400,
                "BadRequest",
                "Invalid JSON Patch",
            );
        }
        let e = err(
            PatchType::Merge,
            "Pod",
            &pod(),
            r#"[1, {"a": null, "b": "<"}]"#,
        );
        assert_error(
            &e,
            422,
            "Invalid",
            r#" "" is invalid: patch: Invalid value: "[1,{\"b\":\"\\u003c\"}]": couldn't get version/kind; json parse error: json: cannot unmarshal array into Go value of type struct { APIVersion string "json:\"apiVersion,omitempty\""; Kind string "json:\"kind,omitempty\"" }"#,
        );
    }

    // ---- JSON patch ----

    #[test]
    fn rfc6902_appendix_a_examples() {
        let cases = [
            // A.1 adding an object member
            (
                json!({"foo":"bar"}),
                json!([{"op":"add","path":"/baz","value":"qux"}]),
                json!({"baz":"qux","foo":"bar"}),
            ),
            // A.2 adding an array element
            (
                json!({"foo":["bar","baz"]}),
                json!([{"op":"add","path":"/foo/1","value":"qux"}]),
                json!({"foo":["bar","qux","baz"]}),
            ),
            // A.3 removing an object member
            (
                json!({"baz":"qux","foo":"bar"}),
                json!([{"op":"remove","path":"/baz"}]),
                json!({"foo":"bar"}),
            ),
            // A.4 removing an array element
            (
                json!({"foo":["bar","qux","baz"]}),
                json!([{"op":"remove","path":"/foo/1"}]),
                json!({"foo":["bar","baz"]}),
            ),
            // A.5 replacing a value
            (
                json!({"baz":"qux","foo":"bar"}),
                json!([{"op":"replace","path":"/baz","value":"boo"}]),
                json!({"baz":"boo","foo":"bar"}),
            ),
            // A.6 moving a value
            (
                json!({"foo":{"bar":"baz","waldo":"fred"},"qux":{"corge":"grault"}}),
                json!([{"op":"move","from":"/foo/waldo","path":"/qux/thud"}]),
                json!({"foo":{"bar":"baz"},"qux":{"corge":"grault","thud":"fred"}}),
            ),
            // A.7 moving an array element
            (
                json!({"foo":["all","grass","cows","eat"]}),
                json!([{"op":"move","from":"/foo/1","path":"/foo/3"}]),
                json!({"foo":["all","cows","eat","grass"]}),
            ),
            // A.8 testing a value: success
            (
                json!({"baz":"qux","foo":["a",2,"c"]}),
                json!([{"op":"test","path":"/baz","value":"qux"},{"op":"test","path":"/foo/1","value":2}]),
                json!({"baz":"qux","foo":["a",2,"c"]}),
            ),
            // A.10 adding a nested member object
            (
                json!({"foo":"bar"}),
                json!([{"op":"add","path":"/child","value":{"grandchild":{}}}]),
                json!({"foo":"bar","child":{"grandchild":{}}}),
            ),
            // A.11 ignoring unrecognized elements
            (
                json!({"foo":"bar"}),
                json!([{"op":"add","path":"/baz","value":"qux","xyz":123}]),
                json!({"foo":"bar","baz":"qux"}),
            ),
            // A.14 ~ escape ordering
            (
                json!({"/":9,"~1":10}),
                json!([{"op":"test","path":"/~01","value":10}]),
                json!({"/":9,"~1":10}),
            ),
            // A.16 adding an array value
            (
                json!({"foo":["bar"]}),
                json!([{"op":"add","path":"/foo/-","value":["abc","def"]}]),
                json!({"foo":["bar",["abc","def"]]}),
            ),
        ];
        for (doc, patch, want) in cases {
            assert_eq!(json_patch(&doc, patch.clone()).unwrap(), want, "{patch}");
        }
        let failing = [
            // A.9 testing a value: error
            (
                json!({"baz":"qux"}),
                r#"[{"op":"test","path":"/baz","value":"bar"}]"#,
            ),
            // A.12 adding to a nonexistent target
            (
                json!({"foo":"bar"}),
                r#"[{"op":"add","path":"/baz/bat","value":"qux"}]"#,
            ),
            // A.13 invalid JSON patch document (the last "op" wins: remove of a missing member)
            (
                json!({"foo":"bar"}),
                r#"[{"op":"add","path":"/baz","value":"qux","op":"remove"}]"#,
            ),
            // A.15 comparing strings and numbers
            (
                json!({"/":9,"~1":10}),
                r#"[{"op":"test","path":"/~01","value":"10"}]"#,
            ),
        ];
        for (doc, body) in failing {
            assert_error(
                &err(PatchType::Json, "ConfigMap", &doc, body),
                422,
                "Invalid",
                GENERIC_422,
            );
        }
    }

    #[test]
    fn json_patch_decode_errors_are_400() {
        let cases = [
            (
                "{}",
                "json: cannot unmarshal object into Go value of type jsonpatch.Patch",
            ),
            (
                "\"x\"",
                "json: cannot unmarshal string into Go value of type jsonpatch.Patch",
            ),
            (
                "3",
                "json: cannot unmarshal number into Go value of type jsonpatch.Patch",
            ),
            (
                "[{}, 1]",
                "json: cannot unmarshal number into Go value of type jsonpatch.Operation",
            ),
            (
                "[[]]",
                "json: cannot unmarshal array into Go value of type jsonpatch.Operation",
            ),
        ];
        for (body, message) in cases {
            assert_error(
                &err(PatchType::Json, "Pod", &pod(), body),
                400,
                "BadRequest",
                message,
            );
        }
        // `null` decodes to an empty patch.
        assert_eq!(
            apply(PatchType::Json, "Pod", &pod(), "null").unwrap(),
            pod()
        );
        assert_eq!(apply(PatchType::Json, "Pod", &pod(), "[]").unwrap(), pod());
    }

    #[test]
    fn json_patch_operation_limit_is_413() {
        let op = r#"{"op":"test","path":"/kind","value":"Pod"}"#;
        let body = format!("[{}]", vec![op; MAX_JSON_PATCH_OPERATIONS].join(","));
        assert!(apply(PatchType::Json, "Pod", &pod(), &body).is_ok());
        let body = format!("[{}]", vec![op; MAX_JSON_PATCH_OPERATIONS + 1].join(","));
        assert_error(
            &err(PatchType::Json, "Pod", &pod(), &body),
            413,
            "RequestEntityTooLarge",
            "Request entity too large: The allowed maximum operations in a JSON patch is 10000, got 10001",
        );
    }

    #[test]
    fn json_patch_failures_are_generic_422() {
        let bodies = [
            r#"[{"op":"remove","path":"/metadata/labels/missing"}]"#,
            r#"[{"op":"frobnicate","path":"/a"}]"#,
            r#"[{"path":"/a"}]"#,
            r#"[null]"#,
            r#"[{"op":"add","value":1}]"#,
            r#"[{"op":"add","path":5,"value":1}]"#,
            r#"[{"op":"test","path":"/metadata/name","value":"other"}]"#,
            r#"[{"op":"test","path":"/metadata/name"}]"#,
            r#"[{"op":"replace","path":"/spec/containers/5","value":{}}]"#,
            r#"[{"op":"add","path":"/spec/containers/3","value":{}}]"#,
            r#"[{"op":"add","path":"/spec/containers/x","value":{}}]"#,
            r#"[{"op":"remove","path":"/spec/containers/-"}]"#,
            r#"[{"op":"add","path":"/metadata/name/x","value":1}]"#,
            r#"[{"op":"add","path":"/nope/x","value":1}]"#,
            r#"[{"op":"move","from":"/metadata/missing","path":"/x"}]"#,
            r#"[{"op":"move","from":"/metadata","path":"/metadata/labels/m"}]"#,
            r#"[{"op":"copy","from":"/spec/containers/9","path":"/x"}]"#,
            r#"[{"op":"copy","from":"/metadata","path":"/nope/x"}]"#,
            r#"[{"op":"add","path":"","value":{}}]"#,
            r#"[{"op":"remove","path":""}]"#,
            r#"[{"op":"replace","path":"","value":5}]"#,
            r#"[{"op":"add","path":"/a","value":1},{"op":"remove","path":"/b"}]"#,
        ];
        for body in bodies {
            let e = err(PatchType::Json, "Pod", &pod(), body);
            assert_error(&e, 422, "Invalid", GENERIC_422);
            assert!(matches!(e, PatchError::Unprocessable { ref detail } if !detail.is_empty()));
        }
    }

    #[test]
    fn json_patch_kube_behaviours() {
        let doc = json!({"metadata": {"name": "a", "annotations": {}}, "list": [1, 2, 3]});
        let cases = [
            // json-patch v4: replace of a missing member adds it.
            (
                json!([{"op":"replace","path":"/metadata/labels","value":{"a":"b"}}]),
                "/metadata/labels",
                json!({"a":"b"}),
            ),
            // Negative indices count from the end.
            (
                json!([{"op":"replace","path":"/list/-1","value":9}]),
                "/list",
                json!([1, 2, 9]),
            ),
            (
                json!([{"op":"add","path":"/list/-1","value":9}]),
                "/list",
                json!([1, 2, 3, 9]),
            ),
            (
                json!([{"op":"remove","path":"/list/-3"}]),
                "/list",
                json!([2, 3]),
            ),
            (
                json!([{"op":"add","path":"/list/3","value":4}]),
                "/list",
                json!([1, 2, 3, 4]),
            ),
            // Copy from a missing member copies null.
            (
                json!([{"op":"copy","from":"/metadata/missing","path":"/c"}]),
                "/c",
                json!(null),
            ),
            (
                json!([{"op":"copy","from":"/list","path":"/list/0"}]),
                "/list",
                json!([[1, 2, 3], 1, 2, 3]),
            ),
            // A missing value means null.
            (json!([{"op":"add","path":"/n"}]), "/n", json!(null)),
            // Test of a missing member against null succeeds.
            (
                json!([{"op":"test","path":"/metadata/missing","value":null},{"op":"add","path":"/t","value":1}]),
                "/t",
                json!(1),
            ),
            // `~1` and `~0` escapes, e.g. annotation keys with slashes.
            (
                json!([{"op":"add","path":"/metadata/annotations/example.com~1owner~0x","value":"me"}]),
                "/metadata/annotations",
                json!({"example.com/owner~x":"me"}),
            ),
            // Moving to the same place is a no-op; moving out of an array and back in.
            (
                json!([{"op":"move","from":"/list/0","path":"/list/-"}]),
                "/list",
                json!([2, 3, 1]),
            ),
            (
                json!([{"op":"move","from":"/metadata/name","path":"/metadata/name"}]),
                "/metadata/name",
                json!("a"),
            ),
            // Whole-document test and replace.
            (
                json!([{"op":"test","path":"","value":doc.clone()},{"op":"replace","path":"","value":{"k":1}}]),
                "/k",
                json!(1),
            ),
        ];
        for (patch, pointer, want) in cases {
            let got = json_patch(&doc, patch.clone()).unwrap_or_else(|e| panic!("{patch}: {e:?}"));
            assert_eq!(got.pointer(pointer), Some(&want), "{patch} -> {got}");
        }
    }

    #[test]
    fn json_patch_result_must_be_an_object() {
        let e = err(
            PatchType::Json,
            "Pod",
            &pod(),
            r#"[{"op":"replace","path":"","value":[{"b":2,"a":1}]}]"#,
        );
        assert_error(
            &e,
            422,
            "Invalid",
            r#" "" is invalid: patch: Invalid value: "[{\"a\":1,\"b\":2}]": couldn't get version/kind; json parse error: json: cannot unmarshal array into Go value of type struct { APIVersion string "json:\"apiVersion,omitempty\""; Kind string "json:\"kind,omitempty\"" }"#,
        );
    }

    #[test]
    fn json_patch_copy_size_is_limited() {
        let big = "x".repeat(MAX_JSON_PATCH_COPY_BYTES / 3);
        let doc = json!({"big": big});
        let copy = |n: usize| {
            let ops: Vec<Value> = (0..n)
                .map(|i| json!({"op":"copy","from":"/big","path":format!("/c{i}")}))
                .collect();
            Value::Array(ops)
        };
        assert!(json_patch(&doc, copy(2)).is_ok());
        let e = json_patch(&doc, copy(3)).unwrap_err();
        assert_error(&e, 422, "Invalid", GENERIC_422);
    }

    #[test]
    fn json_patch_nesting_is_limited() {
        fn nested(depth: usize) -> Value {
            (0..depth).fold(json!(1), |v, _| json!({ "a": v }))
        }
        // The root is level 1; `/x` holds a value nested `depth` levels.
        // (The patch body itself nests the value 2 levels deeper and must stay readable.)
        let got = json_patch(
            &json!({}),
            json!([{"op":"add","path":"/x","value":nested(MAX_NESTING - 2)}]),
        );
        assert_eq!(value_depth(&got.unwrap()), MAX_NESTING - 1);
        // Repeatedly grafting a deep value deeper would build documents serde_json cannot read.
        let path = format!("/x{}", "/a".repeat(100));
        let ops = json!([
            {"op":"add","path":"/x","value":nested(110)},
            {"op":"add","path":path,"value":nested(110)},
        ]);
        let e = json_patch(&json!({}), ops).unwrap_err();
        assert_error(&e, 422, "Invalid", GENERIC_422);
        let ops = json!([
            {"op":"add","path":"/x","value":nested(110)},
            {"op":"copy","from":"/x","path":path},
        ]);
        assert!(json_patch(&json!({}), ops).is_err());
    }

    // ---- strategic merge patch ----

    #[test]
    fn smp_kubectl_label_and_annotate() {
        let p = smp(
            "Pod",
            &pod(),
            json!({"metadata": {"labels": {"env": "prod", "tier": null}}}),
        );
        assert_eq!(
            p["metadata"]["labels"],
            json!({"app": "web", "env": "prod"})
        );
        let p = smp(
            "Pod",
            &pod(),
            json!({"metadata": {"annotations": {"note": "y", "example.com/by": "me"}}}),
        );
        assert_eq!(
            p["metadata"]["annotations"],
            json!({"note": "y", "example.com/by": "me"})
        );
        // Everything else untouched.
        let mut expected = pod();
        expected["metadata"]["annotations"] = p["metadata"]["annotations"].clone();
        assert_eq!(p, expected);
    }

    #[test]
    fn smp_kubectl_apply_with_set_element_order() {
        // What `kubectl apply` sends after the image of one container changed in the manifest.
        let patch = json!({
            "metadata": {"annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"}},
            "spec": {"template": {"spec": {
                "$setElementOrder/containers": [{"name": "app"}, {"name": "sidecar"}],
                "containers": [{"name": "app", "image": "nginx:1.27"}],
            }}},
        });
        let d = smp("Deployment", &deployment(), patch);
        assert_eq!(
            d["spec"]["template"]["spec"]["containers"],
            json!([
                {"name": "app", "image": "nginx:1.27", "imagePullPolicy": "IfNotPresent"},
                {"name": "sidecar", "image": "busybox"},
            ])
        );
        assert_eq!(
            d["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"],
            "{}"
        );
        assert_eq!(d["spec"]["replicas"], 2);
    }

    #[test]
    fn smp_set_element_order_reorders_and_adds() {
        let patch = json!({"spec": {"template": {"spec": {
            "$setElementOrder/containers": [{"name": "sidecar"}, {"name": "new"}, {"name": "app"}],
            "containers": [{"name": "new", "image": "redis"}],
        }}}});
        let d = smp("Deployment", &deployment(), patch);
        let names: Vec<&str> = d["spec"]["template"]["spec"]["containers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["sidecar", "new", "app"]);
        // Nested directives inside list items (kubectl apply on env of one container).
        let patch = json!({"spec": {
            "$setElementOrder/containers": [{"name": "app"}, {"name": "sidecar"}],
            "containers": [{
                "name": "app",
                "$setElementOrder/env": [{"name": "B"}, {"name": "A"}],
                "env": [{"name": "B", "value": "3"}],
            }],
        }});
        let p = smp("Pod", &pod(), patch);
        assert_eq!(
            p["spec"]["containers"][0]["env"],
            json!([{"name": "B", "value": "3"}, {"name": "A", "value": "1"}])
        );
    }

    #[test]
    fn smp_set_element_order_on_unmodelled_lists() {
        // A kind whose merge lists are not in the table: `kubectl apply`'s `$setElementOrder`
        // still tells which lists merge and by which key.
        let obj = json!({"spec": {"tags": ["t1"]}});
        let patch = json!({"spec": {"$setElementOrder/tags": ["t1", "t2"], "tags": ["t2"]}});
        assert_eq!(
            smp("Gizmo", &obj, patch)["spec"]["tags"],
            json!(["t1", "t2"])
        );
        let obj = json!({"spec": {"rules": [{"name": "a", "x": 1}, {"name": "b", "x": 2}]}});
        let patch = json!({"spec": {
            "$setElementOrder/rules": [{"name": "b"}, {"name": "a"}],
            "rules": [{"name": "b", "x": 3}],
        }});
        let got = smp("Gizmo", &obj, patch);
        assert_eq!(
            got["spec"]["rules"],
            json!([{"name": "b", "x": 3}, {"name": "a", "x": 1}])
        );
    }

    #[test]
    fn smp_delete_list_item_by_merge_key() {
        let p = smp(
            "Pod",
            &pod(),
            json!({"spec": {"containers": [{"name": "sidecar", "$patch": "delete"}]}}),
        );
        assert_eq!(p["spec"]["containers"].as_array().unwrap().len(), 1);
        assert_eq!(p["spec"]["containers"][0]["name"], "app");
        // Deleting an absent item is fine.
        let p = smp(
            "Pod",
            &pod(),
            json!({"spec": {"containers": [{"name": "ghost", "$patch": "delete"}]}}),
        );
        assert_eq!(p["spec"]["containers"], pod()["spec"]["containers"]);
        // Delete and add in one list.
        let p = smp(
            "Pod",
            &pod(),
            json!({"spec": {"containers": [
                {"name": "sidecar", "$patch": "delete"},
                {"name": "logger", "image": "fluentd"},
            ]}}),
        );
        let names: Vec<&str> = p["spec"]["containers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["logger", "app"]);
    }

    #[test]
    fn smp_merges_lists_by_their_merge_keys() {
        let p = smp(
            "Pod",
            &pod(),
            json!({"spec": {
                "containers": [{
                    "name": "app",
                    "env": [{"name": "B", "value": "20"}, {"name": "C", "value": "3"}],
                    "ports": [{"containerPort": 80, "name": "http"}, {"containerPort": 443}],
                    "volumeMounts": [{"mountPath": "/data", "readOnly": true}],
                }],
                "volumes": [{"name": "cache", "emptyDir": {}}],
                "tolerations": [{"key": "b", "operator": "Exists"}],
                "imagePullSecrets": [{"name": "regcred"}],
            }}),
        );
        let app = &p["spec"]["containers"][0];
        assert_eq!(app["image"], "nginx:1.25");
        // kube's mergeSortedSlice: a live item stays before the patch items that follow it in
        // the live order; new items go before the remaining live items.
        assert_eq!(
            app["env"],
            json!([{"name": "A", "value": "1"}, {"name": "B", "value": "20"}, {"name": "C", "value": "3"}])
        );
        assert_eq!(
            app["ports"],
            json!([{"containerPort": 80, "protocol": "TCP", "name": "http"}, {"containerPort": 443}])
        );
        assert_eq!(
            app["volumeMounts"],
            json!([{"name": "data", "mountPath": "/data", "readOnly": true}])
        );
        assert_eq!(p["spec"]["containers"][1], pod()["spec"]["containers"][1]);
        assert_eq!(
            p["spec"]["volumes"],
            json!([{"name": "cache", "emptyDir": {}}, {"name": "data", "emptyDir": {}}])
        );
        // Tolerations have no patch strategy: replaced.
        assert_eq!(
            p["spec"]["tolerations"],
            json!([{"key": "b", "operator": "Exists"}])
        );
        assert_eq!(p["spec"]["imagePullSecrets"], json!([{"name": "regcred"}]));
        // Scalar lists without strategy (args) are replaced too.
        let p = smp(
            "Pod",
            &pod(),
            json!({"spec": {"containers": [{"name": "sidecar", "args": ["sleep", "10"]}]}}),
        );
        assert_eq!(p["spec"]["containers"][1]["args"], json!(["sleep", "10"]));
    }

    #[test]
    fn smp_service_ports_by_port() {
        let svc = json!({
            "kind": "Service",
            "metadata": {"name": "s"},
            "spec": {"ports": [
                {"name": "http", "port": 80, "targetPort": 8080},
                {"name": "https", "port": 443, "targetPort": 8443},
            ]},
        });
        let got = smp(
            "Service",
            &svc,
            json!({"spec": {"ports": [{"port": 443, "targetPort": 9443}, {"port": 80, "$patch": "delete"}]}}),
        );
        assert_eq!(
            got["spec"]["ports"],
            json!([{"name": "https", "port": 443, "targetPort": 9443}])
        );
    }

    #[test]
    fn smp_finalizers_and_owner_references() {
        let p = smp(
            "Pod",
            &pod(),
            json!({"metadata": {"finalizers": ["example.com/b", "example.com/a"]}}),
        );
        assert_eq!(
            p["metadata"]["finalizers"],
            json!(["example.com/b", "example.com/a"])
        );
        let p = smp(
            "Pod",
            &p,
            json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["example.com/a"]}}),
        );
        assert_eq!(p["metadata"]["finalizers"], json!(["example.com/b"]));
        // Removing the whole list.
        let p = smp("Pod", &p, json!({"metadata": {"finalizers": null}}));
        assert!(p["metadata"].get("finalizers").is_none());
        // A delete list on a missing list does not create it.
        let p = smp(
            "Pod",
            &p,
            json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["x"]}}),
        );
        assert!(p["metadata"].get("finalizers").is_none());
        // Owner references merge by uid.
        let mut owned = pod();
        owned["metadata"]["ownerReferences"] =
            json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u1"}]);
        let got = smp(
            "Pod",
            &owned,
            json!({"metadata": {"ownerReferences": [{"uid": "u1", "controller": true}, {"uid": "u2", "kind": "X", "name": "x", "apiVersion": "v1"}]}}),
        );
        assert_eq!(
            got["metadata"]["ownerReferences"],
            json!([
                {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u1", "controller": true},
                {"uid": "u2", "kind": "X", "name": "x", "apiVersion": "v1"},
            ])
        );
    }

    #[test]
    fn smp_status_conditions_by_type() {
        let p = smp(
            "Pod",
            &pod(),
            json!({"status": {"conditions": [{"type": "Ready", "status": "True"}], "podIP": "10.0.0.1"}}),
        );
        assert_eq!(
            p["status"]["conditions"],
            json!([{"type": "Ready", "status": "True"}, {"type": "Initialized", "status": "True"}])
        );
        assert_eq!(p["status"]["podIP"], "10.0.0.1");
        // Node addresses merge by type; podCIDRs merge as a set.
        let node = json!({"metadata": {"name": "n"}, "spec": {"podCIDRs": ["10.0.0.0/24"]},
            "status": {"addresses": [{"type": "InternalIP", "address": "1.2.3.4"}]}});
        let got = smp(
            "Node",
            &node,
            json!({"spec": {"podCIDRs": ["10.0.0.0/24", "fd00::/64"]},
                   "status": {"addresses": [{"type": "Hostname", "address": "n"}]}}),
        );
        assert_eq!(got["spec"]["podCIDRs"], json!(["10.0.0.0/24", "fd00::/64"]));
        assert_eq!(
            got["status"]["addresses"],
            json!([{"type": "Hostname", "address": "n"}, {"type": "InternalIP", "address": "1.2.3.4"}])
        );
    }

    #[test]
    fn smp_patch_directives() {
        // `$patch: replace` on a map.
        let p = smp(
            "Pod",
            &pod(),
            json!({"metadata": {"labels": {"$patch": "replace", "only": "this"}}}),
        );
        assert_eq!(p["metadata"]["labels"], json!({"only": "this"}));
        // `$patch: replace` in a merging list.
        let p = smp(
            "Pod",
            &pod(),
            json!({"spec": {"containers": [{"$patch": "replace"}, {"name": "x", "image": "y"}]}}),
        );
        assert_eq!(
            p["spec"]["containers"],
            json!([{"name": "x", "image": "y"}])
        );
        // `$patch: delete` on a map leaves it empty (kube does not remove the key).
        let p = smp(
            "Pod",
            &pod(),
            json!({"spec": {"nodeSelector": {"$patch": "delete"}}}),
        );
        assert_eq!(p["spec"]["nodeSelector"], json!({}));
        // ... and on a missing map adds nothing.
        let p = smp(
            "Pod",
            &pod(),
            json!({"spec": {"affinity": {"$patch": "delete"}}}),
        );
        assert!(p["spec"].get("affinity").is_none());
        // `$patch: replace` at the top replaces the whole object.
        let p = smp(
            "Pod",
            &pod(),
            json!({"$patch": "replace", "kind": "Pod", "metadata": {"name": "n"}}),
        );
        assert_eq!(p, json!({"kind": "Pod", "metadata": {"name": "n"}}));
    }

    #[test]
    fn smp_retain_keys() {
        // `kubectl apply` switching a Deployment from RollingUpdate to Recreate.
        let d = smp(
            "Deployment",
            &deployment(),
            json!({"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}}),
        );
        assert_eq!(d["spec"]["strategy"], json!({"type": "Recreate"}));
        // Switching the source of a volume.
        let p = smp(
            "Pod",
            &pod(),
            json!({"spec": {"volumes": [{"name": "data", "$retainKeys": ["name", "configMap"], "configMap": {"name": "cm"}}]}}),
        );
        assert_eq!(
            p["spec"]["volumes"],
            json!([{"name": "data", "configMap": {"name": "cm"}}])
        );
        // Every field the patch sets must be retained.
        assert_error(
            &smp_err(
                "Deployment",
                &deployment(),
                json!({"spec": {"strategy": {"$retainKeys": ["type"], "rollingUpdate": {}}}}),
            ),
            400,
            "BadRequest",
            "invalid patch format of retainKeys",
        );
        assert_error(
            &smp_err(
                "Deployment",
                &deployment(),
                json!({"spec": {"strategy": {"$retainKeys": "type"}}}),
            ),
            400,
            "BadRequest",
            "invalid patch format of retainKeys",
        );
    }

    #[test]
    fn smp_kubectl_edit_style_patch() {
        // A two-way patch like `kubectl edit` sends: change an image, add an env var, drop a
        // label and a container, reorder nothing else.
        let patch = json!({
            "metadata": {"labels": {"tier": null}},
            "spec": {
                "$setElementOrder/containers": [{"name": "app"}],
                "containers": [
                    {
                        "$setElementOrder/env": [{"name": "A"}, {"name": "B"}, {"name": "D"}],
                        "env": [{"name": "D", "value": "4"}],
                        "image": "nginx:1.26",
                        "name": "app",
                    },
                    {"$patch": "delete", "name": "sidecar"},
                ],
            },
        });
        let p = smp("Pod", &pod(), patch);
        assert_eq!(p["metadata"]["labels"], json!({"app": "web"}));
        let containers = p["spec"]["containers"].as_array().unwrap();
        assert_eq!(containers.len(), 1);
        assert_eq!(containers[0]["image"], "nginx:1.26");
        assert_eq!(
            containers[0]["env"],
            json!([{"name": "A", "value": "1"}, {"name": "B", "value": "2"}, {"name": "D", "value": "4"}])
        );
        assert!(!p.to_string().contains('$'), "directives leaked: {p}");
    }

    #[test]
    fn smp_nested_templates_and_other_kinds() {
        let cron = json!({"kind": "CronJob", "metadata": {"name": "c"}, "spec": {"jobTemplate": {"spec": {"template": {"spec": {
            "containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "y"}]}}}}}});
        let got = smp(
            "CronJob",
            &cron,
            json!({"spec": {"jobTemplate": {"spec": {"template": {"spec": {"containers": [{"name": "b", "image": "z"}]}}}}}}),
        );
        assert_eq!(
            got["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"],
            json!([{"name": "a", "image": "x"}, {"name": "b", "image": "z"}])
        );
        // Kinds without tagged lists: maps merge, lists are replaced; metadata is known.
        let cm = json!({"kind": "ConfigMap", "metadata": {"name": "c", "finalizers": ["a"]}, "data": {"k": "v", "x": "y"}, "list": [{"name": "a"}]});
        let got = smp(
            "ConfigMap",
            &cm,
            json!({"metadata": {"finalizers": ["b"]}, "data": {"x": null, "n": "m"}, "list": [{"name": "b"}]}),
        );
        assert_eq!(
            got,
            json!({"kind": "ConfigMap", "metadata": {"name": "c", "finalizers": ["b", "a"]}, "data": {"k": "v", "n": "m"}, "list": [{"name": "b"}]})
        );
        // The PodDisruptionBudget selector is replaced, not merged.
        let pdb = json!({"spec": {"selector": {"matchLabels": {"a": "b"}}, "minAvailable": 1}});
        let got = smp(
            "PodDisruptionBudget",
            &pdb,
            json!({"spec": {"selector": {"matchExpressions": []}}}),
        );
        assert_eq!(got["spec"]["selector"], json!({"matchExpressions": []}));
    }

    #[test]
    fn smp_new_values_are_cleaned() {
        // Values the patch introduces lose nulls and directives, as the typed decode would.
        let p = smp(
            "Pod",
            &pod(),
            json!({"spec": {"affinity": {"nodeAffinity": null, "podAffinity": {"x": 1, "y": null}}}}),
        );
        assert_eq!(p["spec"]["affinity"], json!({"podAffinity": {"x": 1}}));
        let p = smp(
            "Pod",
            &pod(),
            json!({"spec": {"containers": [{"name": "new", "image": "i", "command": null, "$setElementOrder/env": [], "resources": {"$patch": "delete"}}]}}),
        );
        assert_eq!(
            p["spec"]["containers"][0],
            json!({"name": "new", "image": "i", "resources": {}})
        );
        // A null patch changes nothing.
        assert_eq!(
            apply(PatchType::StrategicMerge, "Pod", &pod(), "null").unwrap(),
            pod()
        );
        assert_eq!(smp("Pod", &pod(), json!({})), pod());
    }

    #[test]
    fn smp_errors() {
        let cases: Vec<(Value, u16, &str, &str)> = vec![
            (
                json!({"spec": {"containers": [{"image": "nginx"}]}}),
                500,
                "",
                "map: map[image:nginx] does not contain declared merge key: name",
            ),
            (
                json!({"spec": {"containers": [{"$patch": "delete", "image": "nginx"}]}}),
                500,
                "",
                "map: map[$patch:delete image:nginx] does not contain declared merge key: name",
            ),
            (
                json!({"metadata": {"labels": {"$patch": "merge", "a": "b"}}}),
                500,
                "",
                "unknown patch type: merge in map: map[$patch:merge a:b]",
            ),
            (
                json!({"metadata": {"labels": {"$patch": 5}}}),
                500,
                "",
                "unknown patch type: %!s(int64=5) in map: map[$patch:5]",
            ),
            (
                json!({"spec": {"containers": [{"$patch": "merge"}]}}),
                500,
                "",
                "merging lists cannot yet be specified in the patch",
            ),
            (
                json!({"spec": {"containers": [{"name": "x", "$patch": "bogus"}]}}),
                500,
                "",
                "unknown patch type: bogus in map: map[$patch:bogus name:x]",
            ),
            (
                json!({"metadata": {"finalizers": [1]}}),
                500,
                "",
                "list element types are not identical: [[example.com/a] [1]]",
            ),
            (
                json!({"metadata": {"finalizers": [["a"]]}}),
                500,
                "",
                "list element types are not identical: [[example.com/a] [[a]]]",
            ),
            (
                json!({"spec": {"volumes": [["a"]]}}),
                500,
                "",
                "list element types are not identical: [[map[emptyDir:map[] name:data]] [[a]]]",
            ),
            (
                json!({"spec": {"$setElementOrder": []}}),
                400,
                "BadRequest",
                "invalid patch format of setElementOrder list",
            ),
            (
                json!({"spec": {"$setElementOrderX/containers": []}}),
                400,
                "BadRequest",
                "invalid patch format of setElementOrder list",
            ),
            (
                json!({"metadata": {"$deleteFromPrimitiveList": ["a"]}}),
                400,
                "BadRequest",
                "invalid patch format of primitive list",
            ),
            (
                json!({"spec": {"$setElementOrder/containers": "app"}}),
                500,
                "",
                "expected a []interface {}, but received a string",
            ),
            (
                json!({"spec": {"$setElementOrder/containers": [{"name": "sidecar"}], "containers": [{"name": "app"}]}}),
                500,
                "",
                "The order in patch list:\n[map[name:app]]\n doesn't match $setElementOrder list:\n[map[name:sidecar]]\n",
            ),
            (
                json!({"spec": {"$setElementOrder/containers": ["app"], "containers": [{"name": "app"}]}}),
                500,
                "",
                "expected a map[string]interface {}, but received a string",
            ),
        ];
        for (patch, code, reason, message) in cases {
            let e = smp_err("Pod", &pod(), patch.clone());
            assert_eq!(
                (e.code(), e.reason(), e.to_string().as_str()),
                (code, reason, message),
                "{patch}"
            );
        }
        // A list of lists is 422 with kube's generic message.
        let mut empty_list = pod();
        empty_list["metadata"]["finalizers"] = json!([]);
        let e = smp_err(
            "Pod",
            &empty_list,
            json!({"metadata": {"finalizers": [["a"]]}}),
        );
        assert_error(&e, 422, "Invalid", GENERIC_422);
        for (body, message) in [
            (
                "[]",
                "json: cannot unmarshal array into Go value of type map[string]interface {}",
            ),
            (
                "\"x\"",
                "json: cannot unmarshal string into Go value of type map[string]interface {}",
            ),
            (
                "1.5",
                "json: cannot unmarshal number into Go value of type map[string]interface {}",
            ),
        ] {
            assert_error(
                &err(PatchType::StrategicMerge, "Pod", &pod(), body),
                400,
                "BadRequest",
                message,
            );
        }
    }

    #[test]
    fn go_formatting() {
        let floats = [
            (1e6, "1e+06"),
            (123456.0, "123456"),
            (1234567.0, "1.234567e+06"),
            (1.5, "1.5"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (-2.5e-7, "-2.5e-07"),
            (100.25, "100.25"),
            (0.0, "0"),
        ];
        for (f, want) in floats {
            assert_eq!(go_float(f), want, "{f}");
        }
        assert_eq!(
            go_v(&json!({"b": [1, 2.5, null, true], "a": {"c": "d"}})),
            "map[a:map[c:d] b:[1 2.5 <nil> true]]"
        );
        assert_eq!(go_quote("a\"b\\c\n\u{1}é"), "\"a\\\"b\\\\c\\n\\x01é\"");
        assert_eq!(
            go_json(&json!({"b": "<&>", "a": [1]})),
            r#"{"a":[1],"b":"\u003c\u0026\u003e"}"#
        );
    }

    // ---- robustness ----

    mod robustness {
        use super::{
            MAX_NESTING, PatchError, PatchType, Value, apply_patch, json, json_merge, pod,
            value_depth,
        };
        use proptest::prelude::*;

        const KEYS: &[&str] = &[
            "$patch",
            "$retainKeys",
            "$setElementOrder/containers",
            "$setElementOrder/env",
            "$setElementOrder/finalizers",
            "$setElementOrder",
            "$deleteFromPrimitiveList/finalizers",
            "$deleteFromPrimitiveList",
            "metadata",
            "spec",
            "status",
            "labels",
            "finalizers",
            "containers",
            "env",
            "ports",
            "containerPort",
            "conditions",
            "type",
            "name",
            "image",
            "a",
        ];
        const STRINGS: &[&str] = &["replace", "delete", "merge", "app", "sidecar", "A", "x", ""];

        fn key() -> impl Strategy<Value = String> {
            prop_oneof![
                4 => prop::sample::select(KEYS).prop_map(str::to_string),
                1 => "[a-z$/~0-9-]{0,5}",
            ]
        }

        fn json_value() -> impl Strategy<Value = Value> {
            let leaf = prop_oneof![
                Just(Value::Null),
                any::<bool>().prop_map(Value::Bool),
                (-3i64..100).prop_map(Value::from),
                any::<f64>()
                    .prop_filter("finite", |f| f.is_finite())
                    .prop_map(Value::from),
                prop::sample::select(STRINGS).prop_map(Value::from),
                "[a-z/~]{0,4}".prop_map(Value::from),
            ];
            leaf.prop_recursive(5, 64, 6, |inner| {
                prop_oneof![
                    prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
                    prop::collection::vec((key(), inner), 0..5)
                        .prop_map(|kv| Value::Object(kv.into_iter().collect())),
                ]
            })
        }

        /// Patches shaped like pods, so that merge keys and directives meet real lists.
        fn pod_like_patch() -> impl Strategy<Value = Value> {
            let container = (
                prop::sample::select(&["app", "sidecar", "new"][..]),
                prop::option::of(json_value()),
                prop::option::of(prop::sample::select(STRINGS)),
            )
                .prop_map(|(name, env, directive)| {
                    let mut c = json!({"name": name});
                    if let Some(env) = env {
                        c["env"] = env;
                    }
                    if let Some(d) = directive {
                        c["$patch"] = json!(d);
                    }
                    c
                });
            (
                prop::collection::vec(container, 0..4),
                prop::option::of(json_value()),
                prop::option::of(json_value()),
            )
                .prop_map(|(containers, order, meta)| {
                    let mut spec = json!({"containers": containers});
                    if let Some(order) = order {
                        spec["$setElementOrder/containers"] = order;
                    }
                    json!({"metadata": meta.unwrap_or(Value::Null), "spec": spec})
                })
        }

        fn op() -> impl Strategy<Value = Value> {
            let segment = prop_oneof![
                prop::sample::select(
                    &[
                        "metadata",
                        "labels",
                        "spec",
                        "containers",
                        "0",
                        "1",
                        "-1",
                        "-",
                        "name",
                        "env",
                        "~0",
                        "~1",
                        "",
                        "x",
                        "+0",
                        "99"
                    ][..]
                )
                .prop_map(str::to_string),
                "[a-z0-9~/-]{0,3}",
            ];
            let pointer = prop::collection::vec(segment, 0..5).prop_map(|s| {
                if s.is_empty() {
                    String::new()
                } else {
                    format!("/{}", s.join("/"))
                }
            });
            (
                prop::sample::select(
                    &["add", "remove", "replace", "move", "copy", "test", "bogus"][..],
                ),
                pointer.clone(),
                prop::option::of(pointer),
                prop::option::of(json_value()),
            )
                .prop_map(|(op, path, from, value)| {
                    let mut o = json!({"op": op, "path": path});
                    if let Some(f) = from {
                        o["from"] = json!(f);
                    }
                    if let Some(v) = value {
                        o["value"] = v;
                    }
                    o
                })
        }

        fn check(result: Result<Value, PatchError>) {
            match result {
                Ok(v) => {
                    assert!(v.is_object());
                    assert!(value_depth(&v) <= MAX_NESTING);
                    // The result can be written and read back.
                    let text = serde_json::to_string(&v).unwrap();
                    let _: Value = serde_json::from_str(&text).unwrap();
                }
                Err(e) => {
                    assert!([400, 413, 415, 422, 500].contains(&e.code()));
                    let _ = (e.reason(), e.to_string());
                }
            }
        }

        const TYPES: [PatchType; 4] = [
            PatchType::Json,
            PatchType::Merge,
            PatchType::StrategicMerge,
            PatchType::Apply,
        ];

        proptest! {
            #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

            #[test]
            fn random_bytes_never_panic(body in prop::collection::vec(any::<u8>(), 0..64)) {
                for ty in TYPES {
                    check(apply_patch(ty, "Pod", &pod(), &body));
                }
            }

            #[test]
            fn random_json_bodies_never_panic(patch in json_value()) {
                let body = patch.to_string();
                for ty in TYPES {
                    for kind in ["Pod", "Deployment", "Widget"] {
                        check(apply_patch(ty, kind, &pod(), body.as_bytes()));
                    }
                }
            }

            #[test]
            fn random_strategic_patches_never_panic(patch in pod_like_patch(), original in json_value()) {
                let body = patch.to_string();
                check(apply_patch(PatchType::StrategicMerge, "Pod", &pod(), body.as_bytes()));
                check(apply_patch(PatchType::Merge, "Pod", &pod(), body.as_bytes()));
                let original = json!({"spec": original.clone(), "metadata": original});
                check(apply_patch(PatchType::StrategicMerge, "Pod", &original, body.as_bytes()));
            }

            #[test]
            fn random_json_patches_never_panic(ops in prop::collection::vec(op(), 0..8)) {
                let body = Value::Array(ops).to_string();
                check(apply_patch(PatchType::Json, "Pod", &pod(), body.as_bytes()));
            }

            #[test]
            fn merge_patch_of_objects_without_nulls_is_idempotent(target in json_value(), patch in json_value()) {
                let (Value::Object(_), Value::Object(_)) = (&target, &patch) else { return Ok(()); };
                prop_assume!(!patch.to_string().contains("null"));
                let once = json_merge(target, patch.clone());
                let twice = json_merge(once.clone(), patch);
                prop_assert_eq!(once, twice);
            }
        }
    }
}
