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
}

/// kube's query-string bool: absent → false; "false"/"0" (any case) → false; anything else,
/// including an empty value, → true.
fn parse_bool(v: &str) -> bool {
    !(v.eq_ignore_ascii_case("false") || v == "0")
}

fn parse_int(name: &str, v: &str) -> Result<i64, Status> {
    v.parse::<i64>().map_err(|_| {
        Status::bad_request(format!(
            "failed to parse {name}: strconv.ParseInt: parsing {v:?}: invalid syntax"
        ))
    })
}

impl ListOptions {
    /// Decodes a raw query string. Unknown parameters are ignored, as kube does.
    pub fn from_query(query: Option<&str>) -> Result<Self, Status> {
        let mut o = ListOptions::default();
        let Some(q) = query else { return Ok(o) };
        for (k, v) in form_urlencoded::parse(q.as_bytes()) {
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
                "timeoutSeconds" => o.timeout_seconds = Some(parse_int("timeoutSeconds", &v)?),
                "limit" => o.limit = parse_int("limit", &v)?.max(0),
                "continue" => o.continue_token = Some(v.into_owned()).filter(|s| !s.is_empty()),
                "labelSelector" => o.label_selector = v.into_owned(),
                "fieldSelector" => o.field_selector = v.into_owned(),
                _ => {}
            }
        }
        Ok(o)
    }

    /// The resourceVersion as a number: `None` when absent, `Some(0)` for "0".
    /// A non-numeric value is kube's 400.
    pub fn rv(&self) -> Result<Option<u64>, Status> {
        match &self.resource_version {
            None => Ok(None),
            Some(s) => s.parse::<u64>().map(Some).map_err(|_| {
                Status::bad_request(format!(
                    "invalid resource version: resourceVersion: Invalid value: {s:?}: strconv.ParseUint: parsing {s:?}: invalid syntax"
                ))
            }),
        }
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
    fn rv_parsing() {
        assert_eq!(opts("").rv().unwrap(), None);
        assert_eq!(opts("resourceVersion=").rv().unwrap(), None);
        assert_eq!(opts("resourceVersion=0").rv().unwrap(), Some(0));
        assert_eq!(opts("resourceVersion=12").rv().unwrap(), Some(12));
        let e = opts("resourceVersion=abc").rv().unwrap_err();
        assert_eq!(e.code, 400);
        assert!(e.message.starts_with("invalid resource version: "));
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
