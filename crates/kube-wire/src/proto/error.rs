//! What can go wrong transcoding: JSON that Go's decoder would refuse for the kind (with the JSON
//! path of the offending value), protobuf bytes gogo's unmarshaller would refuse, and values Go's
//! JSON encoder cannot write.
//!
//! Only the error type: mapping it to a kube `Status` (400 BadRequest for a client's body, 500 for
//! an upstream's) is the caller's decision.

/// A transcoding failure.
#[derive(Debug, thiserror::Error)]
pub enum ProtoError {
    /// A JSON value of the wrong type or format for its field.
    #[error("json: {path}: {message}")]
    Json {
        /// Where, e.g. `spec.containers[0].ports[1].containerPort`.
        path: String,
        /// What.
        message: String,
    },
    /// Malformed JSON.
    #[error("invalid JSON: {0}")]
    Syntax(#[source] serde_json::Error),
    /// Malformed protobuf: truncated, a bad varint or length, a wire type that does not match
    /// the field.
    #[error("protobuf: {at}: {message}")]
    Protobuf {
        /// The message (and field) being read.
        at: String,
        /// What.
        message: String,
    },
    /// A protobuf wire-level decoding failure.
    #[error("protobuf: {at}: {source}")]
    Wire {
        /// The message being read.
        at: String,
        /// prost's description.
        #[source]
        source: prost::DecodeError,
    },
    /// Messages nested deeper than the transcoder follows.
    #[error("protobuf: messages nested deeper than {0}")]
    TooDeep(usize),
    /// A decoded value Go's JSON encoder cannot write (e.g. an `IntOrString` of an unknown type,
    /// a `RawExtension` that is not JSON, a float that is NaN).
    #[error("json: cannot encode {at}: {message}")]
    Unencodable {
        /// The field.
        at: String,
        /// Why.
        message: String,
    },
    /// Bytes without kube's `k8s\0` protobuf prefix.
    #[error(
        "provided data does not appear to be a protobuf message, expected prefix [107 56 115 0]"
    )]
    NotProtobuf,
}

impl ProtoError {
    pub(crate) fn protobuf(at: &str, message: impl Into<String>) -> ProtoError {
        ProtoError::Protobuf {
            at: at.to_string(),
            message: message.into(),
        }
    }

    pub(crate) fn wire(at: &str, source: prost::DecodeError) -> ProtoError {
        ProtoError::Wire {
            at: at.to_string(),
            source,
        }
    }

    pub(crate) fn unencodable(at: &str, message: impl Into<String>) -> ProtoError {
        ProtoError::Unencodable {
            at: at.to_string(),
            message: message.into(),
        }
    }
}
