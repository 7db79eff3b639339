//! `metav1.ListOptions` from a query string, with kube-apiserver's decoding, defaulting and
//! validation rules (spec §1.2–1.3).
//!
//! Decodes and validates the options only: which of them a server can answer (from a cache or
//! only upstream) and the resourceVersion it then serves are the server's decisions.

use crate::continue_token::ContinueToken;
use crate::status::Status;

/// `resourceVersionMatch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RvMatch {
    /// `NotOlderThan`.
    NotOlderThan,
    /// `Exact`.
    Exact,
}

/// The list/watch parameters of one request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListOptions {
    /// `watch` (or the legacy `/watch/` path).
    pub watch: bool,
    /// `resourceVersion` as sent (None when absent or empty).
    pub resource_version: Option<String>,
    /// `resourceVersionMatch` as sent.
    pub resource_version_match: Option<String>,
    /// `allowWatchBookmarks`.
    pub allow_watch_bookmarks: bool,
    /// `sendInitialEvents` (absent is not false).
    pub send_initial_events: Option<bool>,
    /// `timeoutSeconds`.
    pub timeout_seconds: Option<i64>,
    /// `limit` (0 or absent = no limit).
    pub limit: i64,
    /// `continue`.
    pub continue_token: Option<String>,
    /// `labelSelector`.
    pub label_selector: String,
    /// `fieldSelector`.
    pub field_selector: String,
    /// `shardSelector` (KEP-5866, kube 1.36's `ShardedListAndWatch` gate) as sent, not parsed:
    /// kube decodes it whatever the gate and parses it in its storage layer, only with the gate
    /// on ([`crate::shard::ShardSelector::parse`], a 500 when it does not parse). `None` when
    /// absent or empty, which kube treats alike (no filtering).
    pub shard_selector: Option<String>,
}

/// kube's query-string bool: absent → false; "false"/"0" (any case) → false; anything else,
/// including an empty value, → true.
fn parse_bool(v: &str) -> bool {
    !(v.eq_ignore_ascii_case("false") || v == "0")
}

/// Go's `strconv.ParseInt(v, 10, 64)`, with its error text: kube decodes an int64 query
/// parameter with it and answers its error as it is (400 BadRequest).
pub fn parse_int(v: &str) -> Result<i64, Status> {
    v.parse::<i64>()
        .map_err(|e| Status::bad_request(strconv_error("ParseInt", v, e.kind())))
}

/// Go's `strconv.ParseUint(v, 10, 64)`: digits only (no sign, unlike Rust's `u64` parser, which
/// takes a leading `+`), the error as Go words it.
fn parse_uint(v: &str) -> Result<u64, String> {
    if v.starts_with('+') {
        return Err(strconv_error(
            "ParseUint",
            v,
            &std::num::IntErrorKind::InvalidDigit,
        ));
    }
    v.parse::<u64>()
        .map_err(|e| strconv_error("ParseUint", v, e.kind()))
}

/// A `*strconv.NumError`'s text: `strconv.<func>: parsing "<v>": <invalid syntax | value out of
/// range>`. Rust and Go stop at the same character (a digit that overflows before a later bad
/// character is a range error in both), so the kinds agree.
fn strconv_error(func: &str, v: &str, kind: &std::num::IntErrorKind) -> String {
    use std::num::IntErrorKind::{NegOverflow, PosOverflow};
    let why = match kind {
        PosOverflow | NegOverflow => "value out of range",
        _ => "invalid syntax",
    };
    format!("strconv.{func}: parsing {}: {why}", crate::gofmt::quote(v))
}

/// A resourceVersion that kube's `APIObjectVersioner.ParseResourceVersion` refuses; Display is
/// its error (`field.Invalid` on `resourceVersion` carrying Go's `strconv.ParseUint` error).
/// Which Status a server answers with depends on the verb: see [`ListOptions::rv`],
/// [`ListOptions::watch_rv`] and [`ListOptions::get_rv`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("resourceVersion: Invalid value: {}: {detail}", crate::gofmt::quote(.value))]
pub struct RvError {
    /// The resourceVersion as sent.
    pub value: String,
    /// Go's `strconv.ParseUint` error.
    pub detail: String,
}

/// kube's `APIObjectVersioner.ParseResourceVersion`: `""` and `"0"` are 0, anything else is
/// Go's `strconv.ParseUint(s, 10, 64)` (so `"00"` is 0 too, while `"+1"` and `"-1"` are refused).
pub fn parse_resource_version(s: &str) -> Result<u64, RvError> {
    if s.is_empty() || s == "0" {
        return Ok(0);
    }
    parse_uint(s).map_err(|detail| RvError {
        value: s.to_string(),
        detail,
    })
}

/// kube-apiserver's `?timeout=` of a request that is not long-running (its `WithRequestDeadline`
/// filter, which runs before authentication): the first `timeout` value, when not empty, must be
/// a Go duration (`time.ParseDuration`), else 400 `invalid timeout specified in the request URL
/// - <Go's error>`. Returns it in nanoseconds (0 or negative: the server's own deadline). Watches
/// are long-running: their `timeout` is never read.
pub fn request_timeout(query: Option<&str>) -> Result<Option<i64>, Status> {
    let Some(q) = query else { return Ok(None) };
    let Some((_, v)) = form_urlencoded::parse(q.as_bytes()).find(|(k, _)| k == "timeout") else {
        return Ok(None);
    };
    if v.is_empty() {
        return Ok(None);
    }
    crate::proto::gotime::parse_duration(&v)
        .map(Some)
        .map_err(|e| {
            Status::bad_request(format!(
                "invalid timeout specified in the request URL - {e}"
            ))
        })
}

/// Whether kube's request-info resolver takes a collection request with this query for a
/// watch (verb `watch`, a long-running request): its first `watch` value, read as kube's bool,
/// even when the other list options do not decode.
pub fn is_watch_query(query: Option<&str>) -> bool {
    query
        .and_then(|q| form_urlencoded::parse(q.as_bytes()).find(|(k, _)| k == "watch"))
        .is_some_and(|(_, v)| parse_bool(&v))
}

impl ListOptions {
    /// Decodes the query of a LIST or WATCH as kube's `DecodeParameters` does, in its order:
    /// each parameter's first value into `metav1.ListOptions` field by field (Go struct order:
    /// a malformed `timeoutSeconds` is refused before a malformed `limit`), then into the
    /// internal options, which parses `labelSelector` and then `fieldSelector`. Every failure
    /// is its 400 BadRequest, before any validation (422: [`ListOptions::validate`]) and before
    /// field labels are converted (the kind's field selector rules). Unknown parameters are
    /// ignored, as kube does.
    pub fn from_query(query: Option<&str>) -> Result<Self, Status> {
        let mut o = ListOptions::default();
        let Some(q) = query else { return Ok(o) };
        let (mut timeout, mut limit) = (None, None);
        // kube's conversion reads the first value of a repeated parameter (`values[0]`).
        let mut seen: Vec<std::borrow::Cow<'_, str>> = Vec::new();
        for (k, v) in form_urlencoded::parse(q.as_bytes()) {
            if seen.contains(&k) {
                continue;
            }
            seen.push(k.clone());
            match k.as_ref() {
                "watch" => o.watch = parse_bool(&v),
                "resourceVersion" => {
                    o.resource_version = Some(v.into_owned()).filter(|s| !s.is_empty())
                }
                "resourceVersionMatch" => {
                    o.resource_version_match = Some(v.into_owned()).filter(|s| !s.is_empty())
                }
                "allowWatchBookmarks" => o.allow_watch_bookmarks = parse_bool(&v),
                "sendInitialEvents" => o.send_initial_events = Some(parse_bool(&v)),
                "timeoutSeconds" => timeout = Some(v),
                "limit" => limit = Some(v),
                "continue" => o.continue_token = Some(v.into_owned()).filter(|s| !s.is_empty()),
                "labelSelector" => o.label_selector = v.into_owned(),
                "fieldSelector" => o.field_selector = v.into_owned(),
                "shardSelector" => {
                    o.shard_selector = Some(v.into_owned()).filter(|s| !s.is_empty())
                }
                _ => {}
            }
        }
        if let Some(v) = timeout {
            o.timeout_seconds = Some(parse_int(&v)?);
        }
        if let Some(v) = limit {
            // kube's storage pages only a limit > 0: a negative one is no limit.
            o.limit = parse_int(&v)?.max(0);
        }
        crate::selector::LabelSelector::parse(&o.label_selector)
            .map_err(|e| Status::bad_request(e.to_string()))?;
        crate::selector::FieldSelector::parse(&o.field_selector)
            .map_err(|e| Status::bad_request(e.to_string()))?;
        Ok(o)
    }

    /// Decodes the query of a GET of one object as kube decodes `metav1.GetOptions`: only its
    /// `resourceVersion` (first value) is read, and nothing in the query is refused.
    pub fn from_get_query(query: Option<&str>) -> Self {
        let resource_version = query.and_then(|q| {
            form_urlencoded::parse(q.as_bytes())
                .find(|(k, _)| k == "resourceVersion")
                .and_then(|(_, v)| Some(v.into_owned()).filter(|s| !s.is_empty()))
        });
        ListOptions {
            resource_version,
            ..ListOptions::default()
        }
    }

    /// The resourceVersion of a LIST as a number: `None` when absent, `Some(0)` for "0" (and
    /// "00"). One kube's versioner refuses is its 400 from `storage.ValidateListOptions`:
    /// `invalid resource version: <the versioner's error>`.
    pub fn rv(&self) -> Result<Option<u64>, Status> {
        self.parsed_rv()
            .map_err(|e| Status::bad_request(format!("invalid resource version: {e}")))
    }

    /// The resourceVersion of a WATCH, or of a GET of one object, as [`ListOptions::rv`]; one
    /// kube's versioner refuses comes out of its watch cache (`cacher.Watch`, `cacher.Get`) as a
    /// bare storage error, which kube's handlers answer as an unknown error: 500 with no reason,
    /// the versioner's error as the message.
    pub fn cacher_rv(&self) -> Result<Option<u64>, Status> {
        self.parsed_rv()
            .map_err(|e| Status::new(500, "", e.to_string()))
    }

    /// Whether the resourceVersion is kube's literal `"0"` ("any"): kube compares the string, so
    /// `"00"`, which parses to 0 as well, reads differently (see [`ListOptions::rv`]).
    pub fn rv_is_literal_zero(&self) -> bool {
        self.resource_version.as_deref() == Some("0")
    }

    fn parsed_rv(&self) -> Result<Option<u64>, RvError> {
        self.resource_version
            .as_deref()
            .map(parse_resource_version)
            .transpose()
    }

    /// How long a watch with these options lasts, computed as kube-apiserver computes it
    /// (`handlers/get.go`): `time.Duration(timeoutSeconds) * time.Second` in Go's wrapping
    /// 64-bit arithmetic. `None` (absent, or a product of zero) means the server's default
    /// (a random time in `[minRequestTimeout, 2 × minRequestTimeout)`); a product that is
    /// negative (a negative `timeoutSeconds`, or one so large it wraps) ends the watch at once,
    /// as Go's timer does. Never panics, whatever the number.
    pub fn watch_timeout(&self) -> Option<std::time::Duration> {
        let ns = self.timeout_seconds?.wrapping_mul(1_000_000_000);
        match ns {
            0 => None,
            n if n < 0 => Some(std::time::Duration::ZERO),
            n => Some(std::time::Duration::from_nanos(n as u64)),
        }
    }

    /// The decoded `continue` token, if any, checked as kube's `storage.ValidateListOptions`
    /// does: the token is decoded first (400 `invalid continue token: …`), then any
    /// resourceVersion other than `""`/`"0"` is refused (400) without being parsed.
    pub fn continuation(&self) -> Result<Option<ContinueToken>, Status> {
        let Some(t) = &self.continue_token else {
            return Ok(None);
        };
        let token = ContinueToken::decode(t)
            .map_err(|e| Status::bad_request(format!("invalid continue token: {e}")))?;
        if self.resource_version.as_deref().is_some_and(|r| r != "0") {
            return Err(Status::bad_request(
                "specifying resource version is not allowed when using continue",
            ));
        }
        Ok(Some(token))
    }

    /// The parsed `resourceVersionMatch` (after validation it is one of the two).
    pub fn rv_match(&self) -> Option<RvMatch> {
        match self.resource_version_match.as_deref() {
            Some("NotOlderThan") => Some(RvMatch::NotOlderThan),
            Some("Exact") => Some(RvMatch::Exact),
            _ => None,
        }
    }

    /// Folds the object name of a legacy `/watch/.../{name}` path into the field selector, as
    /// kube's `listOpts` does: a non-empty field selector must itself require
    /// `metadata.name=<name>` (400 otherwise); an empty one becomes that requirement.
    pub fn fold_name(&mut self, name: &str) -> Result<(), Status> {
        let fs = crate::selector::FieldSelector::parse(&self.field_selector)
            .map_err(|e| Status::bad_request(e.to_string()))?;
        if !fs.is_empty() {
            if fs.exact_value("metadata.name") != Some(name) {
                return Err(Status::bad_request(
                    "fieldSelector metadata.name doesn't match requested name",
                ));
            }
            return Ok(());
        }
        let escaped = name
            .replace('\\', "\\\\")
            .replace(',', "\\,")
            .replace('=', "\\=");
        self.field_selector = format!("metadata.name={escaped}");
        Ok(())
    }

    /// kube-apiserver 1.34+ defaulting with the WatchList gate on: a watch from RV ""/"0" with
    /// neither `sendInitialEvents` nor `resourceVersionMatch` becomes a watch-list.
    pub fn apply_watch_list_defaults(&mut self) {
        if !self.watch
            || self.send_initial_events.is_some()
            || self.resource_version_match.is_some()
        {
            return;
        }
        if matches!(self.resource_version.as_deref(), None | Some("0")) {
            self.send_initial_events = Some(true);
            self.resource_version_match = Some("NotOlderThan".into());
        }
    }

    /// Validation of `ListOptions` (422 Invalid), for a LIST or a WATCH.
    /// Like apimachinery's `ValidateListOptions` (WatchList gate on), every error is collected
    /// (one cause each); the field of the "requires NotOlderThan" error is `resourceVersionMatch`.
    pub fn validate(&self) -> Result<(), Status> {
        const RVM: &str = "resourceVersionMatch";
        let rvm = self.resource_version_match.as_deref();
        let mut errs: Vec<(&str, &str, String)> = Vec::new();
        let forbidden = |errs: &mut Vec<(&str, &str, String)>, field, detail: &str| {
            errs.push(("FieldValueForbidden", field, format!("Forbidden: {detail}")));
        };
        let not_supported = |errs: &mut Vec<(&str, &str, String)>, value: &str, ok: &[&str]| {
            let list: Vec<String> = ok.iter().map(|s| format!("\"{s}\"")).collect();
            errs.push((
                "FieldValueNotSupported",
                RVM,
                format!(
                    "Unsupported value: {}: supported values: {}",
                    crate::selector::go_quote(value),
                    list.join(", ")
                ),
            ));
        };
        if self.watch {
            if self.send_initial_events.is_some() && rvm != Some("NotOlderThan") {
                forbidden(
                    &mut errs,
                    RVM,
                    "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
                );
            }
            if let Some(m) = rvm {
                if self.send_initial_events.is_none() {
                    forbidden(
                        &mut errs,
                        RVM,
                        "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
                    );
                }
                if m != "NotOlderThan" {
                    not_supported(&mut errs, m, &["NotOlderThan"]);
                }
                if self.continue_token.is_some() {
                    forbidden(
                        &mut errs,
                        RVM,
                        "resourceVersionMatch is forbidden when continue is provided",
                    );
                }
            }
        } else {
            if let Some(m) = rvm {
                if self.resource_version.is_none() {
                    forbidden(
                        &mut errs,
                        RVM,
                        "resourceVersionMatch is forbidden unless resourceVersion is provided",
                    );
                }
                if self.continue_token.is_some() {
                    forbidden(
                        &mut errs,
                        RVM,
                        "resourceVersionMatch is forbidden when continue is provided",
                    );
                }
                if m != "Exact" && m != "NotOlderThan" {
                    not_supported(&mut errs, m, &["Exact", "NotOlderThan", ""]);
                }
                if m == "Exact" && self.resource_version.as_deref() == Some("0") {
                    forbidden(
                        &mut errs,
                        RVM,
                        "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
                    );
                }
            }
            if self.send_initial_events.is_some() {
                forbidden(
                    &mut errs,
                    "sendInitialEvents",
                    "sendInitialEvents is forbidden for list",
                );
            }
        }
        if errs.is_empty() {
            Ok(())
        } else {
            Err(Status::invalid("meta.k8s.io", "ListOptions", "", &errs))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(q: &str) -> ListOptions {
        ListOptions::from_query(Some(q)).unwrap()
    }

    #[test]
    fn decodes_bools_like_kube() {
        assert!(opts("watch=true").watch);
        assert!(opts("watch=1").watch);
        assert!(opts("watch=").watch);
        assert!(!opts("watch=false").watch);
        assert!(!opts("watch=0").watch);
        assert!(!opts("").watch);
        assert_eq!(
            opts("sendInitialEvents=false").send_initial_events,
            Some(false)
        );
        assert_eq!(opts("limit=5&continue=abc").limit, 5);
        assert_eq!(opts("labelSelector=a%3Db%2Cc").label_selector, "a=b,c");
        assert_eq!(
            ListOptions::from_query(Some("limit=x")).unwrap_err().code,
            400
        );
    }

    #[test]
    fn shard_selectors_decode_as_url_values() {
        let sel = |q: &str| opts(q).shard_selector;
        // Form decoding: `+` is a space, `%27` a quote; the value is kept as sent, unparsed.
        assert_eq!(
            sel("shardSelector=shardRange(object.metadata.uid,+%270x0%27,+%270x1%27)").as_deref(),
            Some("shardRange(object.metadata.uid, '0x0', '0x1')")
        );
        // The first of repeated values, as Go's conversion reads `values[0]`.
        assert_eq!(sel("shardSelector=a&shardSelector=b").as_deref(), Some("a"));
        assert_eq!(sel("shardSelector=&shardSelector=b"), None);
        // Empty is no selector; white space is one (whose parse kube refuses).
        assert_eq!(sel("shardSelector="), None);
        assert_eq!(sel(""), None);
        assert_eq!(sel("shardSelector=+").as_deref(), Some(" "));
        // Nothing about it is refused while decoding.
        assert!(ListOptions::from_query(Some("shardSelector=%28%28")).is_ok());
    }

    #[test]
    fn rv_parsing() {
        assert_eq!(opts("").rv().unwrap(), None);
        assert_eq!(opts("resourceVersion=").rv().unwrap(), None);
        assert_eq!(opts("resourceVersion=0").rv().unwrap(), Some(0));
        assert_eq!(opts("resourceVersion=12").rv().unwrap(), Some(12));
        let e = opts("resourceVersion=abc").rv().unwrap_err();
        assert_eq!(e.code, 400);
        assert!(e.message.starts_with("invalid resource version: "));
    }

    /// kube's `APIObjectVersioner.ParseResourceVersion` is Go's `strconv.ParseUint`: no sign,
    /// 64 bits, `"00"` is 0; its error is worded per verb.
    #[test]
    fn resource_versions_parse_as_kubes_versioner() {
        assert_eq!(parse_resource_version("00"), Ok(0));
        assert_eq!(parse_resource_version("18446744073709551615"), Ok(u64::MAX));
        let err = |s: &str| parse_resource_version(s).unwrap_err().to_string();
        assert_eq!(
            err("+1"),
            "resourceVersion: Invalid value: \"+1\": strconv.ParseUint: parsing \"+1\": invalid syntax"
        );
        assert_eq!(
            err("-1"),
            "resourceVersion: Invalid value: \"-1\": strconv.ParseUint: parsing \"-1\": invalid syntax"
        );
        assert_eq!(
            err("18446744073709551616"),
            "resourceVersion: Invalid value: \"18446744073709551616\": strconv.ParseUint: parsing \"18446744073709551616\": value out of range"
        );
        // A LIST's is a 400 (`storage.ValidateListOptions`); a WATCH's and a GET's come out of
        // the watch cache unconverted: 500 with no reason.
        let o = opts("resourceVersion=%E2%82%AC1");
        let list = o.rv().unwrap_err();
        assert_eq!((list.code, list.reason.as_str()), (400, "BadRequest"));
        assert_eq!(
            list.message,
            "invalid resource version: resourceVersion: Invalid value: \"€1\": strconv.ParseUint: parsing \"€1\": invalid syntax"
        );
        let watch = o.cacher_rv().unwrap_err();
        assert_eq!((watch.code, watch.reason.as_str()), (500, ""));
        assert_eq!(
            watch.message,
            "resourceVersion: Invalid value: \"€1\": strconv.ParseUint: parsing \"€1\": invalid syntax"
        );
        assert!(opts("resourceVersion=0").rv_is_literal_zero());
        assert!(!opts("resourceVersion=00").rv_is_literal_zero());
    }

    /// Go's `strconv.ParseInt` for `limit` and `timeoutSeconds`: its error is kube's whole
    /// message; the first of repeated parameters counts, as in kube's conversion.
    #[test]
    fn integers_parse_as_gos_strconv() {
        let msg = |q: &str| ListOptions::from_query(Some(q)).unwrap_err().message;
        assert_eq!(
            msg("limit=x"),
            "strconv.ParseInt: parsing \"x\": invalid syntax"
        );
        assert_eq!(
            msg("limit="),
            "strconv.ParseInt: parsing \"\": invalid syntax"
        );
        assert_eq!(
            msg("limit=9223372036854775808"),
            "strconv.ParseInt: parsing \"9223372036854775808\": value out of range"
        );
        assert_eq!(
            msg("timeoutSeconds=-99999999999999999999"),
            "strconv.ParseInt: parsing \"-99999999999999999999\": value out of range"
        );
        assert_eq!(
            msg("timeoutSeconds=1%0A"),
            "strconv.ParseInt: parsing \"1\\n\": invalid syntax"
        );
        assert_eq!(opts("limit=%2B7").limit, 7);
        assert_eq!(opts("limit=-7").limit, 0, "a negative limit is no limit");
        assert_eq!(opts("limit=9223372036854775807").limit, i64::MAX);
        assert_eq!(opts("limit=5&limit=x").limit, 5, "the first value counts");
        assert_eq!(
            opts("resourceVersion=&resourceVersion=5").resource_version,
            None
        );
        assert!(!opts("watch=0&watch=1").watch);
    }

    /// The `timeout` of a LIST or GET, as kube's `WithRequestDeadline` reads it.
    #[test]
    fn request_timeouts_parse_as_gos_durations() {
        assert_eq!(request_timeout(None), Ok(None));
        assert_eq!(request_timeout(Some("timeout=")), Ok(None));
        assert_eq!(
            request_timeout(Some("timeout=1m30s")),
            Ok(Some(90_000_000_000))
        );
        assert_eq!(
            request_timeout(Some("timeout=-5s&timeout=x")),
            Ok(Some(-5_000_000_000))
        );
        let msg = |q: &str| request_timeout(Some(q)).unwrap_err();
        let e = msg("timeout=30");
        assert_eq!((e.code, e.reason.as_str()), (400, "BadRequest"));
        assert_eq!(
            e.message,
            "invalid timeout specified in the request URL - time: missing unit in duration \"30\""
        );
        assert_eq!(
            msg("timeout=9999999999h").message,
            "invalid timeout specified in the request URL - time: invalid duration \"9999999999h\""
        );
        assert_eq!(
            msg("timeout=1%C3%A9").message,
            "invalid timeout specified in the request URL - time: unknown unit \"\\xc3\\xa9\" in duration \"1\\xc3\\xa9\""
        );
    }

    /// kube's `DecodeParameters` order: numbers in `metav1.ListOptions` field order
    /// (`timeoutSeconds` before `limit`), then the label selector, then the field selector; all
    /// before validation (422), which the caller runs after.
    #[test]
    fn decoding_errors_come_in_kubes_order() {
        let msg = |q: &str| ListOptions::from_query(Some(q)).unwrap_err();
        let e = msg("limit=x&timeoutSeconds=y&labelSelector=a%20in%20(");
        assert_eq!(
            (e.code, e.message.as_str()),
            (400, r#"strconv.ParseInt: parsing "y": invalid syntax"#)
        );
        let e = msg("fieldSelector=a&labelSelector=a%20in%20(&resourceVersionMatch=Exact");
        assert_eq!(e.code, 400);
        assert!(
            e.message.starts_with("unable to parse requirement"),
            "{e:?}"
        );
        let e = msg("fieldSelector=a&resourceVersionMatch=Exact");
        assert_eq!(e.message, "invalid selector: 'a'; can't understand 'a'");
        // A query that decodes fails validation only then.
        let o =
            ListOptions::from_query(Some("resourceVersionMatch=Exact&labelSelector=a")).unwrap();
        assert_eq!(o.validate().unwrap_err().code, 422);
        // A GET reads its resourceVersion only.
        let g = ListOptions::from_get_query(Some("limit=x&labelSelector=(&resourceVersion=5"));
        assert_eq!(g.resource_version.as_deref(), Some("5"));
    }

    #[test]
    fn list_validation_matches_kube() {
        let msg = |q: &str| opts(q).validate().unwrap_err().message;
        assert_eq!(
            msg("resourceVersionMatch=NotOlderThan"),
            "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided"
        );
        assert!(
            msg("resourceVersion=0&resourceVersionMatch=Exact")
                .contains("resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"")
        );
        assert!(
            msg("resourceVersion=1&resourceVersionMatch=Exact&continue=x")
                .contains("forbidden when continue is provided")
        );
        assert!(
            msg("resourceVersion=1&resourceVersionMatch=Bogus")
                .contains("Unsupported value: \"Bogus\"")
        );
        assert!(msg("sendInitialEvents=true").contains("sendInitialEvents is forbidden for list"));
        assert!(
            opts("resourceVersion=5&resourceVersionMatch=Exact")
                .validate()
                .is_ok()
        );
        assert_eq!(
            opts("resourceVersionMatch=NotOlderThan")
                .validate()
                .unwrap_err()
                .code,
            422
        );
    }

    #[test]
    fn watch_validation_and_defaulting() {
        let msg = |q: &str| opts(q).validate().unwrap_err().message;
        assert!(
            msg("watch=1&sendInitialEvents=true").contains(
                "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"
            )
        );
        assert!(msg("watch=1&resourceVersionMatch=NotOlderThan").contains(
            "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"
        ));
        assert!(
            opts("watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan")
                .validate()
                .is_ok()
        );
        let mut o = opts("watch=1&resourceVersion=0");
        o.apply_watch_list_defaults();
        assert_eq!(o.send_initial_events, Some(true));
        assert_eq!(o.rv_match(), Some(RvMatch::NotOlderThan));
        let mut o = opts("watch=1&resourceVersion=7");
        o.apply_watch_list_defaults();
        assert_eq!(o.send_initial_events, None);
        let mut o = opts("resourceVersion=0");
        o.apply_watch_list_defaults();
        assert_eq!(o.send_initial_events, None, "lists are never defaulted");
    }

    #[test]
    fn watch_timeouts_follow_gos_arithmetic() {
        let t = |q: &str| ListOptions::from_query(Some(q)).unwrap().watch_timeout();
        assert_eq!(t("watch=1"), None);
        assert_eq!(t("timeoutSeconds=0"), None);
        assert_eq!(
            t("timeoutSeconds=30"),
            Some(std::time::Duration::from_secs(30))
        );
        assert_eq!(t("timeoutSeconds=-5"), Some(std::time::Duration::ZERO));
        // 2^63 - 1 seconds wraps around in nanoseconds: negative, so the watch ends at once.
        assert_eq!(
            t("timeoutSeconds=9223372036854775807"),
            Some(std::time::Duration::ZERO)
        );
        // The largest that does not wrap is about 292 years.
        assert_eq!(
            t("timeoutSeconds=9223372036"),
            Some(std::time::Duration::from_secs(9_223_372_036))
        );
    }
}
