//! A real client's typed decoding of what watchmux sends, in each encoding, for S8 to time:
//! JSON with serde_json into k8s-openapi's types (kube-rs's way: the event's object straight
//! into its type), protobuf with prost into k8s-pb's (client-go's way: the length-prefixed
//! `WatchEvent`, the `k8s\0` + `runtime.Unknown` envelope of its raw object or of a list, then
//! the kind's message). Also the sample event
//! S8.2 decodes: a realistic fleet pod in both forms, the protobuf one made by watchmux's own
//! transcoder ([`kube_wire::proto`]), as watchmux would send it.
//!
//! Decoding only: no timing (the scenario's) and no I/O. Errors are returned, never panicked
//! on: the bytes come from the server under test.

use k8s_openapi::api::core::v1 as openapi;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::WatchEvent as OpenapiWatchEvent;
use k8s_pb::api::core::v1 as pb;
use k8s_pb::apimachinery::pkg::apis::meta::v1::WatchEvent as PbWatchEvent;
use k8s_pb::apimachinery::pkg::runtime::Unknown;
use kube_wire::proto::{self, envelope};
use prost::Message;
use rand::SeedableRng;
use rand::rngs::StdRng;

use super::pbframe::MAGIC;

/// Why bytes did not decode.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// Not the JSON of the expected type.
    #[error("JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// Not the protobuf of the expected message.
    #[error("protobuf: {0}")]
    Protobuf(#[from] prost::DecodeError),
    /// Framing or envelope not as kube writes it.
    #[error("{0}")]
    Frame(String),
    /// The transcoder refused the sample pod.
    #[error("transcoding the sample pod: {0}")]
    Transcode(#[from] proto::ProtoError),
}

/// A JSON watch event of an object as a typed client reads it: the object is deserialized
/// straight into its type, as kube-rs's `WatchEvent` (adjacently tagged) does when `type` comes
/// first, as it does on the wire.
#[derive(serde::Deserialize)]
struct JsonEvent<T> {
    #[serde(rename = "type")]
    ty: String,
    object: T,
}

/// A JSON watch event (one line, without its newline) decoded into k8s-openapi's `Pod`.
pub fn json_event(line: &[u8]) -> Result<openapi::Pod, DecodeError> {
    let event: JsonEvent<openapi::Pod> = serde_json::from_slice(line)?;
    match event.ty.as_str() {
        "ADDED" | "MODIFIED" | "DELETED" => Ok(event.object),
        other => Err(DecodeError::Frame(format!("not an object event: {other}"))),
    }
}

/// [`json_event`] through k8s-openapi's own `WatchEvent<Pod>`, which reads the object into a
/// `serde_json::Value` first and the `Pod` from that.
pub fn json_event_via_value(line: &[u8]) -> Result<openapi::Pod, DecodeError> {
    match serde_json::from_slice::<OpenapiWatchEvent<openapi::Pod>>(line)? {
        OpenapiWatchEvent::Added(p)
        | OpenapiWatchEvent::Modified(p)
        | OpenapiWatchEvent::Deleted(p) => Ok(p),
        other => Err(DecodeError::Frame(format!(
            "not an object event: {other:?}"
        ))),
    }
}

/// The message inside kube's envelope: `k8s\0` + `runtime.Unknown`, whose `raw` it returns.
fn unwrap(bytes: &[u8]) -> Result<Unknown, DecodeError> {
    let body = bytes
        .strip_prefix(MAGIC)
        .ok_or_else(|| DecodeError::Frame("no k8s\\0 envelope".into()))?;
    Ok(Unknown::decode(body)?)
}

/// A protobuf watch frame (4-byte length + `WatchEvent`) decoded into k8s-pb's `Pod`.
pub fn protobuf_event(frame: &[u8]) -> Result<pb::Pod, DecodeError> {
    let (len, event) = frame
        .split_first_chunk::<4>()
        .ok_or_else(|| DecodeError::Frame("frame shorter than its length prefix".into()))?;
    let len = usize::try_from(u32::from_be_bytes(*len)).unwrap_or(usize::MAX);
    let event = event
        .get(..len)
        .ok_or_else(|| DecodeError::Frame("frame shorter than its length".into()))?;
    let event = PbWatchEvent::decode(event)?;
    let raw = event
        .object
        .and_then(|o| o.raw)
        .ok_or_else(|| DecodeError::Frame("event without an object".into()))?;
    let unknown = unwrap(&raw)?;
    Ok(pb::Pod::decode(unknown.raw.unwrap_or_default().as_slice())?)
}

/// A JSON `PodList` body decoded into k8s-openapi's types; returns its items.
pub fn json_pod_list(body: &[u8]) -> Result<Vec<openapi::Pod>, DecodeError> {
    Ok(serde_json::from_slice::<k8s_openapi::List<openapi::Pod>>(body)?.items)
}

/// A protobuf `PodList` body (in kube's envelope) decoded into k8s-pb's types; returns its
/// items.
pub fn protobuf_pod_list(body: &[u8]) -> Result<Vec<pb::Pod>, DecodeError> {
    let unknown = unwrap(body)?;
    Ok(pb::PodList::decode(unknown.raw.unwrap_or_default().as_slice())?.items)
}

/// One pod in every form S8.2 needs.
#[derive(Debug, Clone)]
pub struct SamplePod {
    /// Its name (what a decoded event must carry).
    pub name: String,
    /// The pod's JSON, as the upstream sends it and watchmux caches it.
    pub json: Vec<u8>,
    /// Its protobuf message body (what watchmux transcodes once per object version).
    pub protobuf: Vec<u8>,
    /// A `MODIFIED` JSON watch event of it (without its newline).
    pub json_event: Vec<u8>,
    /// The same event as a protobuf watch frame (length prefix included).
    pub protobuf_frame: Vec<u8>,
}

/// The median-sized of 201 pods of the simulator's fleet (deterministic), stamped with a write
/// time like every pod the simulator writes, in both encodings.
pub fn sample_pod() -> Result<SamplePod, DecodeError> {
    let mut rng = StdRng::seed_from_u64(8);
    let mut pods: Vec<(usize, serde_json::Value)> = (0..201)
        .map(|i| {
            let mut p = kube_sim::fleet::pod(i, "team-a", "node-00042", &mut rng);
            kube_sim::fleet::stamp_write_time(&mut p, 1_767_225_600_123_456_789);
            (p.to_string().len(), p)
        })
        .collect();
    pods.sort_by_key(|(n, _)| *n);
    let (_, pod) = pods.swap_remove(pods.len() / 2);
    let name = pod["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let json = serde_json::to_vec(&pod)?;
    let msg = proto::message_for("v1", "Pod")
        .ok_or_else(|| DecodeError::Frame("the transcoder has no v1 Pod".into()))?;
    let protobuf = proto::json_to_proto(msg, &json)?;
    let json_event = serde_json::to_vec(&serde_json::json!({"type": "MODIFIED", "object": pod}))?;
    let protobuf_frame = envelope::length_prefixed(&envelope::watch_event(
        "MODIFIED",
        &envelope::wrap("v1", "Pod", &protobuf),
    ));
    Ok(SamplePod {
        name,
        json,
        protobuf,
        json_event,
        protobuf_frame,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_encodings_of_the_sample_decode_to_the_same_pod() {
        let s = sample_pod().unwrap();
        assert!((3_000..9_000).contains(&s.json.len()), "{}", s.json.len());
        assert!(s.protobuf_frame.len() < s.json_event.len());
        let j = json_event(&s.json_event).unwrap();
        assert_eq!(json_event_via_value(&s.json_event).unwrap(), j);
        let p = protobuf_event(&s.protobuf_frame).unwrap();
        assert_eq!(j.metadata.name.as_deref(), Some(s.name.as_str()));
        let pm = p.metadata.as_ref().unwrap();
        assert_eq!(pm.name.as_deref(), Some(s.name.as_str()));
        assert_eq!(j.metadata.annotations.unwrap_or_default(), pm.annotations);
        assert_eq!(
            j.spec.unwrap().containers.len(),
            p.spec.unwrap().containers.len()
        );
        // Truncated or unwrapped input is an error, not a panic.
        assert!(protobuf_event(&s.protobuf_frame[..s.protobuf_frame.len() - 1]).is_err());
        assert!(protobuf_pod_list(b"{}").is_err());
        assert!(json_event(b"{\"type\":\"BOOKMARK\",\"object\":{}}").is_err());
        assert!(json_event_via_value(b"{\"type\":\"BOOKMARK\",\"object\":{}}").is_err());
    }
}
