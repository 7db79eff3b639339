//! The rules every answer must keep, whatever was sent:
//!
//! * the server's bytes are HTTP (hyper's parser, strict framing), or it closed the
//!   connection; a request a real client could have sent (intact framing, a body within kube's
//!   3 MiB, HTTP/2 headers within the advertised limit) is answered, and a body ends. An answer
//!   may be cut short only where hyper closes without a lingering close (Go lingers): the
//!   request's body broke off or went past 3 MiB, or bytes after it did not parse;
//! * an error (4xx/5xx) on an API path whose body is JSON or protobuf is a kube `Status`
//!   (`kind: Status`, `apiVersion: v1`, `status: Failure`, `code` equal to the HTTP status, a
//!   message, a reason, `Retry-After` when it says to retry); kube sends some errors without a
//!   body (hyper's 431, a refused websocket handshake), which is fine;
//! * no 5xx, except kube's own: 503 and 504 with a `Status`, and the 500 (reason unknown) kube's
//!   watch cache answers a watch or a GET of one object with a resourceVersion it cannot parse
//!   (`ErrorToAPIStatus` of a storage error); any other is a finding;
//! * a watch is 200 with well-formed events (JSON lines, protobuf frames, websocket messages;
//!   an `ERROR` event carries a `Status`) or an error `Status`; a 2xx JSON or protobuf body
//!   parses; a 101 answers an upgrade request (with the right `Sec-WebSocket-Accept`); the
//!   server's websocket and HTTP/2 frames are well-formed;
//! * after the run, neither process logged a panic ([`panics`]).
//!
//! Verdicts only, on what [`super::wire`] recorded: no I/O.

use std::io::Read as _;

use serde_json::Value;

use super::case::{Case, Meta, Transport, Wire, metas};
use super::parse::{self, WsFrame};
use super::wire::{Answer, End, Exchange};
use crate::pbframe;

/// The most of a request's body watchmux reads when it answers the request itself (kube's
/// request body limit): past it the connection is closed with the client's bytes unread, a
/// reset that may cut the answer short.
pub const MAX_READ_BODY: u64 = 3 << 20;

/// watchmux's `server.max_header_bytes` in a fuzz run (also its HTTP/2 header list limit).
pub const MAX_HEADER_BYTES: usize = 64 << 10;

/// A rule broken by one case (or by the run, for the after-run checks).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// Which rule (a short stable name: findings are grouped by it).
    pub rule: &'static str,
    /// What exactly.
    pub detail: String,
}

fn finding(rule: &'static str, detail: impl Into<String>) -> Finding {
    Finding {
        rule,
        detail: detail.into(),
    }
}

/// Whether the case is a request a real client could send, which the server must answer: the
/// framing is intact and nothing asks for more answers than one per request.
pub fn must_answer(case: &Case) -> bool {
    match &case.wire {
        Wire::Http1 {
            bytes,
            half_close,
            more,
        } => {
            case.transport == Transport::Http1
                && !half_close
                && !more
                && metas(bytes).iter().all(|m| m.body <= MAX_READ_BODY)
        }
        Wire::WebSocket { .. } => true,
        Wire::H2 { requests } => !requests.iter().any(over_limits),
        Wire::RawH2 { .. } => false,
    }
}

/// An HTTP/2 request past the server's limits: a header list past the limit it advertised
/// (SETTINGS_MAX_HEADER_LIST_SIZE: hyper's h2 ends the connection when the CONTINUATION frames
/// it takes go past it, GOAWAY ENHANCE_YOUR_CALM, where Go answers 431), or a body past
/// kube's request limit (watchmux stops reading it and resets the stream).
fn over_limits(r: &super::case::Req) -> bool {
    r.header_list_size() > MAX_HEADER_BYTES || r.body.len() as u64 > MAX_READ_BODY
}

/// The findings of one exchange.
pub fn check(case: &Case, x: &Exchange) -> Vec<Finding> {
    let mut out = Vec::new();
    let must = must_answer(case);
    match &x.end {
        End::Malformed(e) => out.push(finding("malformed-http", e.clone())),
        End::Timeout(what) if must && x.answers.is_empty() => out.push(finding(
            "no-answer",
            format!("no answer: timed out waiting for the {what}"),
        )),
        End::Closed | End::Reset(_) if must && x.answers.is_empty() && x.h2_errors.is_empty() => {
            out.push(finding(
                "dropped",
                format!(
                    "connection ended without an answer ({:?}; write: {:?})",
                    x.end, x.write_error
                ),
            ))
        }
        _ => {}
    }
    for a in &x.answers {
        answer(case, x.metas.get(a.request), a, &mut out);
    }
    if let Some((frames, err)) = &x.ws {
        websocket(frames, err.as_deref(), x.answers.first(), &mut out);
    }
    if let Some(Err(e)) = &x.h2_frames {
        out.push(finding("bad-h2-frames", e.clone()));
    }
    if must {
        for (i, e) in &x.h2_errors {
            out.push(finding("h2-error", format!("request {i}: {e}")));
        }
        if let Some(e) = &x.h2_conn_error {
            out.push(finding("h2-error", format!("connection: {e}")));
        }
    }
    if case.transport == Transport::WebSocket
        && let Some(a) = x.answers.first()
        && a.head.status == 101
        && let Some(key) = ws_key(&case.bytes(""))
    {
        let want = tokio_tungstenite::tungstenite::handshake::derive_accept_key(key.as_bytes());
        let got = a.head.get("sec-websocket-accept").unwrap_or_default();
        if got != want {
            out.push(finding(
                "bad-websocket-handshake",
                format!("Sec-WebSocket-Accept {got:?}, want {want:?}"),
            ));
        }
    }
    out
}

/// The `Sec-WebSocket-Key` of a handshake.
fn ws_key(handshake: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(handshake);
    let head = text.split("\r\n\r\n").next()?;
    let mut keys = head
        .lines()
        .filter_map(|l| l.split_once(':'))
        .filter(|(n, _)| n.trim().eq_ignore_ascii_case("sec-websocket-key"))
        .map(|(_, v)| v.trim().to_string());
    let k = keys.next()?;
    keys.next().is_none().then_some(k)
}

fn content_type(a: &Answer) -> String {
    a.head
        .get("content-type")
        .unwrap_or_default()
        .to_ascii_lowercase()
}

fn is_json(ct: &str) -> bool {
    ct.starts_with("application/json")
}

fn is_protobuf(ct: &str) -> bool {
    ct.starts_with("application/vnd.kubernetes.protobuf")
}

/// The body with its `Content-Encoding` removed (gzip only; kube compresses nothing else).
fn decoded(a: &Answer) -> Result<Vec<u8>, String> {
    match a.head.get("content-encoding").as_deref() {
        None | Some("") | Some("identity") => Ok(a.body.clone()),
        Some("gzip") => {
            let mut out = Vec::new();
            flate2::read::GzDecoder::new(a.body.as_slice())
                .take(256 << 20)
                .read_to_end(&mut out)
                .map_err(|e| format!("gzip body: {e}"))?;
            Ok(out)
        }
        Some(other) => Err(format!("unexpected Content-Encoding {other:?}")),
    }
}

fn answer(case: &Case, meta: Option<&Meta>, a: &Answer, out: &mut Vec<Finding>) {
    let status = a.head.status;
    if a.stalled {
        out.push(finding(
            "body-stalled",
            format!("{status} body did not end in time"),
        ));
    }
    if a.truncated {
        // hyper closes a connection without a lingering close (Go lingers): an unread body past
        // kube's limit, or bytes after the request that do not parse (answered 400, then
        // closed), reset the connection and may cut the answer before them short. A request
        // whose own body breaks off ends its answer (watchmux aborts it: hyper reads no more).
        if meta.is_none_or(|m| m.body <= MAX_READ_BODY && !m.trailing && !m.broken_body) {
            out.push(finding(
                "truncated-body",
                format!(
                    "{status} body cut short by the end of the connection ({} bytes)",
                    a.body.len()
                ),
            ));
        }
        return;
    }
    if status == 101 {
        if !meta.is_some_and(|m| m.upgrade) {
            out.push(finding(
                "unexpected-101",
                "101 to a request without an upgrade",
            ));
        }
        return;
    }
    if !(200..600).contains(&status) {
        out.push(finding("odd-status", format!("status {status}")));
        return;
    }
    let ct = content_type(a);
    let api = meta.is_some_and(|m| m.api);
    let body = match decoded(a) {
        Ok(b) => b,
        Err(e) => {
            out.push(finding("bad-body", e));
            return;
        }
    };
    if status >= 400 {
        let seen = if body.is_empty() {
            None
        } else if is_json(&ct) {
            Some(status_json(&body))
        } else if is_protobuf(&ct) {
            Some(status_protobuf(&body))
        } else {
            if api && case.transport != Transport::RawHttp1 {
                out.push(finding(
                    "not-a-status",
                    format!("{status} body of type {ct:?}: {}", parse::lossy(&body, 120)),
                ));
            }
            None
        };
        let mut kube_500 = false;
        match &seen {
            Some(Ok(s)) => {
                let problems = status_problems(status, s, a.head.get("retry-after").as_deref());
                if !problems.is_empty() && (api || s.get("kind").is_some()) {
                    out.push(finding(
                        "not-a-status",
                        format!("{status}: {}: {}", problems.join(", "), compact(s)),
                    ));
                }
                kube_500 = is_kube_500(s);
            }
            Some(Err(e)) if api || is_json(&ct) => {
                out.push(finding("not-a-status", format!("{status}: {e}")))
            }
            _ => {}
        }
        if status >= 500 {
            let allowed = match status {
                // A HEAD answer carries no body, so no Status either.
                503 | 504 => matches!(seen, Some(Ok(_))) || meta.is_some_and(Meta::head),
                500 => kube_500 && meta.is_some_and(|m| m.watch || m.object),
                _ => false,
            };
            if !allowed {
                out.push(finding(
                    "server-error",
                    format!("{status} ({ct}): {}", parse::lossy(&body, 300)),
                ));
            }
        }
        return;
    }
    // 2xx/3xx.
    let stream = meta.is_some_and(|m| m.watch) && status == 200;
    if stream {
        if is_protobuf(&ct) {
            protobuf_stream(&body, a.cut, out);
        } else {
            json_stream(&body, a.cut, out);
        }
        return;
    }
    if a.cut || meta.is_some_and(Meta::head) {
        return;
    }
    if is_json(&ct) && !body.is_empty() {
        if let Err(e) = serde_json::from_slice::<serde::de::IgnoredAny>(&body) {
            out.push(finding("bad-body", format!("{status} JSON body: {e}")));
        }
    } else if is_protobuf(&ct)
        && !body.is_empty()
        && let Err(e) = protobuf_object(&body)
    {
        out.push(finding("bad-body", format!("{status} protobuf body: {e}")));
    }
}

fn compact(v: &Value) -> String {
    let s = v.to_string();
    s.chars().take(300).collect()
}

/// Parses a JSON error body.
fn status_json(body: &[u8]) -> Result<Value, String> {
    serde_json::from_slice(body)
        .map_err(|e| format!("error body is not JSON: {e}: {}", parse::lossy(body, 120)))
}

/// Decodes a protobuf error body (kube's envelope around a `Status`) to its JSON.
fn status_protobuf(body: &[u8]) -> Result<Value, String> {
    let u = kube_wire::proto::envelope::unwrap(body)
        .map_err(|e| format!("error body is not kube protobuf: {e}"))?;
    if (u.api_version, u.kind) != ("v1", "Status") {
        return Err(format!(
            "error body is a {}/{}, not a v1 Status",
            u.api_version, u.kind
        ));
    }
    let msg = kube_wire::proto::message_for("v1", "Status").ok_or("no Status schema")?;
    let json = kube_wire::proto::proto_to_json(msg, u.raw, Some(("v1", "Status")))
        .map_err(|e| format!("protobuf Status: {e}"))?;
    serde_json::from_slice(&json).map_err(|e| format!("protobuf Status as JSON: {e}"))
}

/// How `s` falls short of kube's `Status` for an HTTP `code` (empty: it does not).
pub fn status_problems(code: u16, s: &Value, retry_after: Option<&str>) -> Vec<String> {
    let mut p = Vec::new();
    let text = |k: &str| s.get(k).and_then(Value::as_str);
    if text("kind") != Some("Status") {
        p.push(format!("kind {:?}", s.get("kind")));
    }
    if text("apiVersion") != Some("v1") {
        p.push(format!("apiVersion {:?}", s.get("apiVersion")));
    }
    if text("status") != Some("Failure") {
        p.push(format!("status {:?}", s.get("status")));
    }
    if s.get("code").and_then(Value::as_u64) != Some(u64::from(code)) {
        p.push(format!("code {:?} (HTTP {code})", s.get("code")));
    }
    if text("message").is_none_or(str::is_empty) {
        p.push("no message".into());
    }
    // kube's reason is "" (left out) only for the 500s of plain errors (ErrorToAPIStatus).
    if text("reason").is_none_or(str::is_empty) && code != 500 {
        p.push("no reason".into());
    }
    if !s.get("metadata").is_some_and(Value::is_object) {
        p.push("no metadata".into());
    }
    let retry = s
        .pointer("/details/retryAfterSeconds")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    if retry > 0 && retry_after.map(str::trim) != Some(retry.to_string().as_str()) {
        p.push(format!(
            "retryAfterSeconds {retry} but Retry-After {retry_after:?}"
        ));
    }
    p
}

/// kube's own 500: its watch cache cannot parse the resourceVersion (a storage error passed
/// through `ErrorToAPIStatus`: no reason, the versioner's message).
fn is_kube_500(s: &Value) -> bool {
    s.get("code").and_then(Value::as_u64) == Some(500)
        && s.get("reason")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        && s.get("message")
            .and_then(Value::as_str)
            .is_some_and(|m| m.starts_with("resourceVersion: Invalid value: "))
}

/// Checks one watch event (JSON).
fn event_json(line: &[u8]) -> Result<(), String> {
    let v: Value = serde_json::from_slice(line).map_err(|e| format!("event is not JSON: {e}"))?;
    let ty = v.get("type").and_then(Value::as_str).unwrap_or_default();
    let obj = v.get("object").ok_or("event without object")?;
    if !obj.is_object() {
        return Err("event object is not an object".into());
    }
    match ty {
        "ERROR" => {
            let code = obj.get("code").and_then(Value::as_u64).unwrap_or(0);
            let code = u16::try_from(code).unwrap_or(0);
            let p = status_problems(code, obj, None);
            if !p.is_empty() || code < 400 {
                return Err(format!("ERROR event: {}: {}", p.join(", "), compact(obj)));
            }
            if code >= 500 && !matches!(code, 503 | 504) && !is_kube_500(obj) {
                return Err(format!("ERROR event with a {code}: {}", compact(obj)));
            }
            Ok(())
        }
        "ADDED" | "MODIFIED" | "DELETED" | "BOOKMARK" => {
            if !obj.get("metadata").is_some_and(Value::is_object) {
                return Err(format!(
                    "{ty} event object without metadata: {}",
                    compact(obj)
                ));
            }
            if obj
                .get("kind")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
            {
                return Err(format!("{ty} event object without kind"));
            }
            Ok(())
        }
        other => Err(format!("event type {other:?}")),
    }
}

fn json_stream(body: &[u8], cut: bool, out: &mut Vec<Finding>) {
    let mut lines: Vec<&[u8]> = body.split(|b| *b == b'\n').collect();
    // The piece after the last newline: unfinished when the reader cut the stream, else it
    // must be empty (every event ends with a newline).
    let last = lines.pop().unwrap_or_default();
    if !cut && !last.is_empty() {
        out.push(finding(
            "bad-watch-event",
            format!("stream ended inside an event: {}", parse::lossy(last, 120)),
        ));
    }
    for l in lines {
        if let Err(e) = event_json(l) {
            out.push(finding(
                "bad-watch-event",
                format!("{e}: {}", parse::lossy(l, 200)),
            ));
            return;
        }
    }
}

/// Checks an object in kube's protobuf envelope: the envelope, and the message when its kind
/// is one the transcoder knows.
fn protobuf_object(b: &[u8]) -> Result<(String, Option<Value>), String> {
    let u = kube_wire::proto::envelope::unwrap(b).map_err(|e| e.to_string())?;
    if u.kind.is_empty() {
        return Err("envelope without kind".into());
    }
    let json = match kube_wire::proto::message_for(u.api_version, u.kind) {
        Some(m) => {
            let j = kube_wire::proto::proto_to_json(m, u.raw, Some((u.api_version, u.kind)))
                .map_err(|e| format!("{}/{}: {e}", u.api_version, u.kind))?;
            Some(serde_json::from_slice(&j).map_err(|e| e.to_string())?)
        }
        None => None,
    };
    Ok((u.kind.to_string(), json))
}

/// Checks one protobuf watch event (a `WatchEvent` message, without its length prefix).
fn event_protobuf(ev: &[u8]) -> Result<(), String> {
    let ty = pbframe::field(ev, 1).ok_or("event without type")?;
    let raw = pbframe::field(ev, 2)
        .and_then(|o| pbframe::field(o, 1))
        .ok_or("event without object")?;
    let (kind, json) = protobuf_object(raw)?;
    match ty {
        b"ERROR" => {
            let s = json.ok_or("ERROR event object has no known schema")?;
            if kind != "Status" {
                return Err(format!("ERROR event object is a {kind}"));
            }
            let code = s.get("code").and_then(Value::as_u64).unwrap_or(0);
            let code = u16::try_from(code).unwrap_or(0);
            let p = status_problems(code, &s, None);
            if !p.is_empty() || code < 400 {
                return Err(format!("ERROR event: {}", p.join(", ")));
            }
            if code >= 500 && !matches!(code, 503 | 504) && !is_kube_500(&s) {
                return Err(format!("ERROR event with a {code}: {}", compact(&s)));
            }
            Ok(())
        }
        b"ADDED" | b"MODIFIED" | b"DELETED" | b"BOOKMARK" => Ok(()),
        other => Err(format!("event type {}", parse::lossy(other, 40))),
    }
}

fn protobuf_stream(body: &[u8], cut: bool, out: &mut Vec<Finding>) {
    let mut at = 0usize;
    while let Some(p) = body
        .get(at..at + 4)
        .and_then(|p| <[u8; 4]>::try_from(p).ok())
    {
        let len = u32::from_be_bytes(p) as usize;
        let Some(ev) = body.get(at + 4..at + 4 + len) else {
            break;
        };
        if let Err(e) = event_protobuf(ev) {
            out.push(finding("bad-watch-event", format!("protobuf: {e}")));
            return;
        }
        at += 4 + len;
    }
    if !cut && at != body.len() {
        out.push(finding(
            "bad-watch-event",
            "protobuf stream ended inside a frame",
        ));
    }
}

fn websocket(
    frames: &[WsFrame],
    err: Option<&str>,
    handshake: Option<&Answer>,
    out: &mut Vec<Finding>,
) {
    if let Some(e) = err {
        out.push(finding("bad-websocket-frame", e));
    }
    let binary_watch = handshake.is_some_and(|a| is_protobuf(&content_type(a)));
    let mut message: Option<(u8, Vec<u8>)> = None;
    for f in frames {
        if f.rsv != 0 || f.masked || !matches!(f.opcode, 0 | 1 | 2 | 8 | 9 | 10) {
            out.push(finding(
                "bad-websocket-frame",
                format!(
                    "frame rsv {} masked {} opcode {}",
                    f.rsv, f.masked, f.opcode
                ),
            ));
            return;
        }
        if f.opcode >= 8 {
            if !f.fin || f.payload.len() > 125 {
                out.push(finding(
                    "bad-websocket-frame",
                    "fragmented or long control frame",
                ));
                return;
            }
            if f.opcode == 8 && !close_payload_ok(&f.payload) {
                out.push(finding(
                    "bad-websocket-frame",
                    format!("close frame payload {}", parse::lossy(&f.payload, 40)),
                ));
            }
            continue;
        }
        match (&mut message, f.opcode) {
            (None, 1 | 2) => message = Some((f.opcode, f.payload.clone())),
            (Some((_, m)), 0) => m.extend_from_slice(&f.payload),
            _ => {
                out.push(finding(
                    "bad-websocket-frame",
                    format!("opcode {} out of sequence", f.opcode),
                ));
                return;
            }
        }
        if f.fin
            && let Some((op, m)) = message.take()
        {
            let r = if op == 1 {
                match std::str::from_utf8(&m) {
                    Ok(t) => event_json(t.trim_end_matches('\n').as_bytes()),
                    Err(_) => Err("text message is not UTF-8".into()),
                }
            } else if binary_watch || op == 2 {
                event_protobuf(&m)
            } else {
                Ok(())
            };
            if let Err(e) = r {
                out.push(finding("bad-watch-event", format!("websocket: {e}")));
                return;
            }
        }
    }
}

/// A close frame's payload: empty, or a valid code (RFC 6455 §7.4) and UTF-8 reason.
fn close_payload_ok(p: &[u8]) -> bool {
    match p {
        [] => true,
        [_] => false,
        [a, b, reason @ ..] => {
            let code = u16::from_be_bytes([*a, *b]);
            let code_ok = matches!(code, 1000..=1003 | 1007..=1011 | 3000..=4999);
            code_ok && std::str::from_utf8(reason).is_ok()
        }
    }
}

/// The lines of a process log that report a panic.
pub fn panics(log: &str) -> Vec<String> {
    log.lines()
        .filter(|l| l.contains("panicked"))
        .map(|l| l.chars().take(400).collect())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::httpfuzz::case::{Kind, Origin, Req};
    use crate::httpfuzz::parse::{HeadParse, parse_head};

    fn case(r: &Req) -> Case {
        Case {
            index: 0,
            transport: Transport::Http1,
            origin: Origin::Corpus,
            kind: Kind::List,
            note: String::new(),
            wire: Wire::Http1 {
                bytes: r.to_http1("h"),
                half_close: false,
                more: false,
            },
        }
    }

    /// The checker's verdict on `raw` (a whole HTTP/1 answer) to `r`.
    fn verdict(r: &Req, raw: &str) -> Vec<&'static str> {
        let HeadParse::Done(head) = parse_head(raw.as_bytes()) else {
            panic!("test answer does not parse");
        };
        let body = raw.as_bytes()[head.len..].to_vec();
        let c = case(r);
        let mut x = Exchange::new(crate::httpfuzz::case::metas(&c.bytes("h")));
        x.answers.push(Answer {
            request: 0,
            head,
            body,
            cut: false,
            stalled: false,
            truncated: false,
        });
        let mut v: Vec<&str> = check(&c, &x).iter().map(|f| f.rule).collect();
        x.answers.clear();
        x.end = End::Malformed("x".into());
        assert_eq!(check(&c, &x)[0].rule, "malformed-http");
        v.sort();
        v
    }

    const STATUS_404: &str = r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"pods \"x\" not found","reason":"NotFound","details":{"name":"x","kind":"pods"},"code":404}"#;

    fn json_answer(code: u16, body: &str) -> String {
        format!(
            "HTTP/1.1 {code} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
    }

    #[test]
    fn a_kube_status_passes_and_anything_else_fails() {
        let get = Req::get("/api/v1/namespaces/a/pods/x", &[]);
        assert!(verdict(&get, &json_answer(404, STATUS_404)).is_empty());
        // A JSON error that is not a Status.
        assert_eq!(
            verdict(&get, &json_answer(404, r#"{"error":"not found"}"#)),
            ["not-a-status"]
        );
        // A Status whose code is not the HTTP status, or without a reason.
        let wrong = STATUS_404.replace("\"code\":404", "\"code\":400");
        assert_eq!(verdict(&get, &json_answer(404, &wrong)), ["not-a-status"]);
        let no_reason = STATUS_404.replace("\"reason\":\"NotFound\",", "");
        assert_eq!(
            verdict(&get, &json_answer(404, &no_reason)),
            ["not-a-status"]
        );
        // A text error on an API path.
        assert_eq!(
            verdict(
                &get,
                "HTTP/1.1 404 X\r\nContent-Type: text/plain\r\nContent-Length: 9\r\n\r\nnot found"
            ),
            ["not-a-status"]
        );
        // kube sends some errors without a body.
        assert!(verdict(&get, "HTTP/1.1 431 X\r\nContent-Length: 0\r\n\r\n").is_empty());
        // A 429 that says to retry must carry Retry-After.
        let s429 = r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"m","reason":"TooManyRequests","details":{"retryAfterSeconds":1},"code":429}"#;
        assert_eq!(verdict(&get, &json_answer(429, s429)), ["not-a-status"]);
        let with = format!(
            "HTTP/1.1 429 X\r\nContent-Type: application/json\r\nRetry-After: 1\r\nContent-Length: {}\r\n\r\n{s429}",
            s429.len()
        );
        assert!(verdict(&get, &with).is_empty());
    }

    #[test]
    fn a_500_is_a_finding_unless_kube_sends_it() {
        let get = Req::get("/api/v1/pods", &[]);
        let s500 = r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"boom","reason":"InternalError","code":500}"#;
        assert_eq!(verdict(&get, &json_answer(500, s500)), ["server-error"]);
        assert_eq!(
            verdict(&get, "HTTP/1.1 502 X\r\nContent-Length: 0\r\n\r\n"),
            ["server-error"]
        );
        let s504 = r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Timeout: Too large resource version: 9, current: 1","reason":"Timeout","code":504}"#;
        assert!(verdict(&get, &json_answer(504, s504)).is_empty());
        assert_eq!(
            verdict(&get, "HTTP/1.1 503 X\r\nContent-Length: 0\r\n\r\n"),
            ["server-error"]
        );
        // The watch cache's 500 for a resourceVersion it cannot parse is kube's own.
        let rv = r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"resourceVersion: Invalid value: \"x\": strconv.ParseUint: parsing \"x\": invalid syntax","code":500}"#;
        let watch = Req::get("/api/v1/pods", &["watch=1", "resourceVersion=x"]);
        assert!(verdict(&watch, &json_answer(500, rv)).is_empty());
        assert_eq!(verdict(&get, &json_answer(500, rv)), ["server-error"]);
    }

    #[test]
    fn watch_streams_are_checked_event_by_event() {
        let watch = Req::get("/api/v1/pods", &["watch=1"]);
        let ok =
            "{\"type\":\"ADDED\",\"object\":{\"kind\":\"Pod\",\"metadata\":{\"name\":\"a\"}}}\n";
        let body = |b: &str| {
            format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{b}",
                b.len()
            )
        };
        assert!(verdict(&watch, &body(ok)).is_empty());
        assert_eq!(
            verdict(&watch, &body("{\"type\":\"ADDED\"}\n")),
            ["bad-watch-event"]
        );
        assert_eq!(
            verdict(&watch, &body("{\"type\":\"WHAT\",\"object\":{}}\n")),
            ["bad-watch-event"]
        );
        let err = "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":\"too old resource version: 1 (2)\",\"reason\":\"Expired\",\"code\":410}}\n";
        assert!(verdict(&watch, &body(err)).is_empty());
        let err500 = err
            .replace("410", "500")
            .replace("Expired", "InternalError");
        assert_eq!(verdict(&watch, &body(&err500)), ["bad-watch-event"]);
        // The stream ended inside an event.
        assert_eq!(verdict(&watch, &body(&ok[..20])), ["bad-watch-event"]);
    }

    #[test]
    fn bodies_websocket_frames_and_logs() {
        let get = Req::get("/api/v1/pods", &[]);
        assert_eq!(
            verdict(
                &get,
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 3\r\n\r\n{x}"
            ),
            ["bad-body"]
        );
        assert_eq!(
            verdict(&get, "HTTP/1.1 101 Switching\r\n\r\n"),
            ["unexpected-101"]
        );
        let mut out = Vec::new();
        let f = |opcode, payload: &[u8], masked| WsFrame {
            fin: true,
            rsv: 0,
            opcode,
            masked,
            payload: payload.to_vec(),
        };
        websocket(
            &[
                f(
                    1,
                    b"{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"Pod\",\"metadata\":{}}}\n",
                    false,
                ),
                f(8, &1000u16.to_be_bytes(), false),
            ],
            None,
            None,
            &mut out,
        );
        assert!(out.is_empty(), "{out:?}");
        websocket(&[f(1, b"x", true)], None, None, &mut out);
        websocket(&[f(8, &[1], false)], None, None, &mut out);
        websocket(&[f(1, b"not json", false)], None, None, &mut out);
        let rules: Vec<&str> = out.iter().map(|f| f.rule).collect();
        assert_eq!(
            rules,
            [
                "bad-websocket-frame",
                "bad-websocket-frame",
                "bad-watch-event"
            ]
        );
        let log = "INFO ok\nthread 'tokio-runtime-worker' panicked at src/x.rs:1:1:\nboom\n";
        assert_eq!(panics(log).len(), 1);
        assert!(panics("all fine\n").is_empty());
    }

    #[test]
    fn protobuf_errors_are_decoded() {
        let s = kube_wire::status::Status::new(404, "NotFound", "nope");
        let pb = kube_wire::proto::envelope::status(&s.to_json()).unwrap();
        let v = status_protobuf(&pb).unwrap();
        assert!(status_problems(404, &v, None).is_empty(), "{v}");
        assert!(status_protobuf(b"k8s\0garbage").is_err());
    }
}
