//! Content negotiation from the `Accept` header, as kube-apiserver does it for the
//! representations the simulator serves: plain JSON, `as=Table`, `as=PartialObjectMetadata(List)`.
//! Protobuf, YAML and CBOR are not produced: a client that lists only those gets 406, one that
//! lists JSON after them (kubelet, controllers) gets JSON. watchmux negotiates the same way
//! (`downstream::form`), so both answer in the same [`Form`].
//!
//! Chooses a representation only: building a Table or metadata body is the server's job.

use crate::status::Status;

/// What the response body should be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Repr {
    /// The objects themselves.
    Json,
    /// A `meta.k8s.io` Table.
    Table,
    /// PartialObjectMetadata / PartialObjectMetadataList.
    Metadata,
}

/// The shape of what is being answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// A single object (GET, watch events).
    Object,
    /// A list.
    List,
}

/// One media range of an Accept header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MediaRange<'a> {
    /// `type/subtype`.
    pub essence: &'a str,
    /// Parameters `k=v`.
    pub params: Vec<(&'a str, &'a str)>,
}

impl MediaRange<'_> {
    /// A parameter's value.
    pub fn param(&self, k: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(pk, _)| pk.eq_ignore_ascii_case(k))
            .map(|(_, v)| *v)
    }
}

/// Splits an Accept header into media ranges, in order (q-values are not used to reorder,
/// which matches every Kubernetes client's usage of listing preferences first).
pub fn media_ranges(accept: &str) -> Vec<MediaRange<'_>> {
    accept
        .split(',')
        .filter_map(|part| {
            let mut it = part.split(';').map(str::trim);
            let essence = it.next().filter(|e| !e.is_empty())?;
            let params = it
                .filter_map(|p| {
                    p.split_once('=')
                        .map(|(k, v)| (k.trim(), v.trim().trim_matches('"')))
                })
                .collect();
            Some(MediaRange { essence, params })
        })
        .collect()
}

/// Chooses the representation, or kube's 406.
pub fn negotiate(accept: Option<&str>, target: Target, kind: &str) -> Result<Repr, Status> {
    let accept = accept.unwrap_or("").trim();
    if accept.is_empty() {
        return Ok(Repr::Json);
    }
    for mr in media_ranges(accept) {
        let json_like = matches!(mr.essence, "application/json" | "*/*" | "application/*");
        if !json_like {
            continue;
        }
        let Some(as_) = mr.param("as") else {
            return Ok(Repr::Json);
        };
        let g = mr.param("g").unwrap_or_default();
        let v = mr.param("v").unwrap_or_default();
        if g != "meta.k8s.io" || !matches!(v, "v1" | "v1beta1") {
            continue;
        }
        match (as_, target) {
            ("Table", _) => return Ok(Repr::Table),
            ("PartialObjectMetadataList", Target::List)
            | ("PartialObjectMetadata", Target::Object) => {
                return Ok(Repr::Metadata);
            }
            ("PartialObjectMetadata", Target::List) => {
                return Err(Status::not_acceptable(format!(
                    "you requested PartialObjectMetadata, but the requested object is a list (*v1.{kind}List)"
                )));
            }
            ("PartialObjectMetadataList", Target::Object) => {
                return Err(Status::not_acceptable(format!(
                    "you requested PartialObjectMetadataList, but the requested object is not a list (*v1.{kind})"
                )));
            }
            _ => continue,
        }
    }
    Err(Status::not_acceptable(
        "only the following media types are accepted: application/json",
    ))
}

/// The wire form of a read answered from stored objects: the objects themselves, a
/// `meta.k8s.io/v1` Table (with what each row embeds), or PartialObjectMetadata(List). Each
/// watch event is encoded once per form and shared by every watcher of that form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Form {
    /// The objects themselves (a `PodList`, a `Pod`, watch events of pods).
    Json,
    /// A `meta.k8s.io/v1` Table; `include_object` is what each row's `object` carries.
    Table {
        /// The request's `includeObject`.
        include_object: crate::table::IncludeObject,
    },
    /// `PartialObjectMetadataList` for a LIST, `PartialObjectMetadata` for a GET and watch
    /// events.
    Metadata,
}

impl Form {
    /// The representation, in the vocabulary of [`crate::table`].
    pub fn repr(&self) -> Repr {
        match self {
            Form::Json => Repr::Json,
            Form::Table { .. } => Repr::Table,
            Form::Metadata => Repr::Metadata,
        }
    }

    /// What a Table row's `object` carries (`Metadata`, kube's default, for the other forms,
    /// which have no rows).
    pub fn include_object(&self) -> crate::table::IncludeObject {
        match self {
            Form::Table { include_object } => *include_object,
            _ => crate::table::IncludeObject::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubectl_table_header_gives_table() {
        let a = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
        assert_eq!(
            negotiate(Some(a), Target::List, "Pod").unwrap(),
            Repr::Table
        );
    }

    #[test]
    fn protobuf_first_falls_back_to_json() {
        let a = "application/vnd.kubernetes.protobuf,application/json";
        assert_eq!(negotiate(Some(a), Target::List, "Pod").unwrap(), Repr::Json);
        let e = negotiate(
            Some("application/vnd.kubernetes.protobuf"),
            Target::List,
            "Pod",
        )
        .unwrap_err();
        assert_eq!(e.code, 406);
    }

    #[test]
    fn metadata_forms() {
        let a = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
        assert_eq!(
            negotiate(Some(a), Target::List, "Pod").unwrap(),
            Repr::Metadata
        );
        let e = negotiate(
            Some("application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"),
            Target::List,
            "Pod",
        )
        .unwrap_err();
        assert_eq!(
            e.message,
            "you requested PartialObjectMetadata, but the requested object is a list (*v1.PodList)"
        );
        assert_eq!(negotiate(None, Target::Object, "Pod").unwrap(), Repr::Json);
        assert_eq!(
            negotiate(Some("*/*"), Target::Object, "Pod").unwrap(),
            Repr::Json
        );
    }
}
