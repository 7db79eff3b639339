//! Content negotiation from the `Accept` header, as kube-apiserver does it
//! (`k8s.io/apiserver` `pkg/endpoints/handlers/negotiation`, with `goautoneg`'s parsing and
//! ordering, and `RequestScope.AllowsMediaTypeTransform`): the media ranges sorted by q-value,
//! each tried against the serializers in kube's order (JSON, YAML, protobuf; a custom
//! resource's endpoint has no protobuf), `*/*` and `type/*` matching the first of them;
//! `as=Table` only in JSON or YAML, `as=PartialObjectMetadata(List)` in any encoding (also a
//! custom resource's: that is how metadata informers watch CRs in protobuf), in `meta.k8s.io`
//! `v1` or `v1beta1`. No acceptable range is kube's 406 in kube's words.
//!
//! Chooses a representation and an encoding only: building the body is the server's job.

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

/// The serialization of the body.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Encoding {
    /// `application/json`.
    Json,
    /// `application/yaml` (kube serves it; neither the simulator nor watchmux's cache does).
    Yaml,
    /// `application/vnd.kubernetes.protobuf`.
    Protobuf,
}

impl Encoding {
    /// The media type kube names this encoding by.
    pub fn media_type(self) -> &'static str {
        match self {
            Encoding::Json => "application/json",
            Encoding::Yaml => "application/yaml",
            Encoding::Protobuf => PROTOBUF,
        }
    }
}

/// Kubernetes' protobuf media type.
pub const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

/// The shape of what is being answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// A single object (GET, watch events).
    Object,
    /// A list.
    List,
}

/// What the endpoint can serialize: a built-in kind (JSON, YAML, protobuf) or a custom
/// resource (JSON, YAML; protobuf only for PartialObjectMetadata), and whether the request is a watch (kube's stream serializers: no
/// YAML).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Endpoint {
    /// The kind's objects have a protobuf form (built-in kinds, not custom resources).
    pub protobuf: bool,
    /// A watch: the chosen encoding must be able to stream.
    pub watch: bool,
}

impl Endpoint {
    /// A built-in kind's endpoint.
    pub const BUILTIN: Endpoint = Endpoint {
        protobuf: true,
        watch: false,
    };

    /// This endpoint, for a watch.
    pub fn watching(self, watch: bool) -> Endpoint {
        Endpoint { watch, ..self }
    }

    /// kube's 406 for this endpoint, whose serializers are `encodings`.
    fn not_acceptable(self, encodings: &[Encoding]) -> Status {
        let list: Vec<String> = encodings
            .iter()
            .filter(|e| !self.watch || **e != Encoding::Yaml)
            .map(|e| {
                if self.watch {
                    format!("{};stream=watch", e.media_type())
                } else {
                    e.media_type().to_string()
                }
            })
            .collect();
        Status::not_acceptable(format!(
            "only the following media types are accepted: {}",
            list.join(", ")
        ))
    }
}

/// The outcome of negotiation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Negotiated {
    /// What the body is.
    pub repr: Repr,
    /// How it is serialized.
    pub encoding: Encoding,
    /// For a Table or metadata: `meta.k8s.io/v1beta1` (kube answers in the version asked for).
    pub v1beta1: bool,
}

/// One clause of an Accept header, as `goautoneg.ParseAccept` parses it.
#[derive(Debug, Clone, PartialEq)]
pub struct MediaRange<'a> {
    /// The type (`application`, `*`).
    pub ty: &'a str,
    /// The subtype (`json`, `*`).
    pub subtype: &'a str,
    /// `q`, 1.0 by default, 0 when unparsable.
    pub q: f32,
    /// The other parameters `k=v`, in order (keys case-sensitive, as kube's).
    pub params: Vec<(&'a str, &'a str)>,
}

impl MediaRange<'_> {
    /// A parameter's value.
    pub fn param(&self, k: &str) -> Option<&str> {
        self.params.iter().find(|(pk, _)| *pk == k).map(|(_, v)| *v)
    }

    /// Whether this range covers `encoding`'s media type (`type/subtype`, `type/*`, `*/*`).
    pub fn matches(&self, encoding: Encoding) -> bool {
        let (ty, sub) = encoding
            .media_type()
            .split_once('/')
            .unwrap_or(("application", "json"));
        (self.ty == ty && (self.subtype == sub || self.subtype == "*"))
            || (self.ty == "*" && self.subtype == "*")
    }
}

/// Splits an Accept header into clauses and sorts them as `goautoneg` does (higher q first,
/// then concrete types before `*`, by Go's insertion sort: equal clauses keep their order).
pub fn media_ranges(accept: &str) -> Vec<MediaRange<'_>> {
    let mut out: Vec<MediaRange<'_>> = Vec::new();
    for part in accept.split(',') {
        let part = part.trim_matches(' ');
        let mut mrp = part.split(';');
        let range = mrp.next().unwrap_or_default();
        let sp: Vec<&str> = range.split('/').collect();
        let ty = sp.first().copied().unwrap_or_default().trim_matches(' ');
        let subtype = match sp.as_slice() {
            [_] if ty == "*" => "*",
            [_, sub] => sub.trim_matches(' '),
            _ => continue,
        };
        let mut r = MediaRange {
            ty,
            subtype,
            q: 1.0,
            params: Vec::new(),
        };
        for param in mrp {
            let Some((k, v)) = param.split_once('=') else {
                continue;
            };
            let k = k.trim_matches(' ');
            if k == "q" {
                r.q = v.parse::<f32>().unwrap_or(0.0);
            } else {
                r.params.push((k, v.trim_matches(' ')));
            }
        }
        out.push(r);
    }
    // goautoneg's Less.
    let less = |a: &MediaRange<'_>, b: &MediaRange<'_>| {
        a.q > b.q || (a.ty != "*" && b.ty == "*") || (a.subtype != "*" && b.subtype == "*")
    };
    for i in 1..out.len() {
        let mut j = i;
        while j > 0 && less(&out[j], &out[j - 1]) {
            out.swap(j, j - 1);
            j -= 1;
        }
    }
    out
}

/// kube-apiserver's serializers, in its order (CBOR is off by default in 1.36).
const KUBE: [Encoding; 3] = [Encoding::Json, Encoding::Yaml, Encoding::Protobuf];

/// What a built-in kind's go-restful route declares it produces (`installer.go`): kube's
/// serializers ([`KUBE`]'s media types), and for a collection's LIST and WATCH (the legacy
/// `/watch/` paths too) their stream forms after them (`MediaTypesForSerializer`).
pub fn route_produces(collection_read: bool) -> &'static [&'static str] {
    const COLLECTION: [&str; 5] = [
        "application/json",
        "application/yaml",
        PROTOBUF,
        "application/json;stream=watch",
        "application/vnd.kubernetes.protobuf;stream=watch",
    ];
    if collection_read {
        &COLLECTION
    } else {
        &COLLECTION[..3]
    }
}

/// Whether go-restful's router lets a request with this `Accept` header reach a route that
/// produces `produces` (`Route.matchesAccept`): some comma-separated clause, cut at its first
/// `;` and trimmed of spaces, is `*/*` or exactly (case and all) a produced type. No header is
/// `*/*`. Wildcards such as `application/*` match nothing here, although kube's own negotiation
/// would take them: the router runs first.
pub fn route_matches_accept(accept: Option<&str>, produces: &[&str]) -> bool {
    let accept = accept.filter(|a| !a.is_empty()).unwrap_or("*/*");
    accept.split(',').any(|clause| {
        let media = clause
            .split(';')
            .next()
            .unwrap_or_default()
            .trim_matches(' ');
        media == "*/*" || produces.iter().any(|p| *p == "*/*" || *p == media)
    })
}

/// go-restful's route choice by `Accept` for a built-in kind's endpoint, before kube's handler
/// negotiates ([`negotiate_media`]): when no clause matches ([`route_matches_accept`]), its 406,
/// or its 415 for a POST, PUT or PATCH without a body (`jsr311.go` `detectRoute`), listing the
/// representations `produces`; kube's `serviceErrorHandler` words it with
/// `NewGenericServerResponse`: go-restful's message, empty details.
pub fn route_accept(
    accept: Option<&str>,
    produces: &[&str],
    write_without_body: bool,
) -> Result<(), Status> {
    if route_matches_accept(accept, produces) {
        return Ok(());
    }
    let available = produces.join(", ");
    let status = if write_without_body {
        Status::new(
            415,
            "UnsupportedMediaType",
            format!("415: Unsupported Media Type\n\nAvailable representations: {available}"),
        )
    } else {
        Status::new(
            406,
            "NotAcceptable",
            format!("406: Not Acceptable\n\nAvailable representations: {available}"),
        )
    };
    Err(status.with_details(crate::status::StatusDetails::default()))
}

/// Chooses the representation and encoding, or kube's 406. `kind` names the object in the
/// PartialObjectMetadata list/object mismatch messages.
pub fn negotiate_media(
    accept: Option<&str>,
    target: Target,
    kind: &str,
    endpoint: Endpoint,
) -> Result<Negotiated, Status> {
    let encodings = &KUBE;
    let accept = accept.unwrap_or("");
    if accept.is_empty() {
        return Ok(Negotiated {
            repr: Repr::Json,
            encoding: Encoding::Json,
            v1beta1: false,
        });
    }
    for mr in media_ranges(accept) {
        for &encoding in encodings {
            if !mr.matches(encoding) {
                continue;
            }
            match accepts(&mr, encoding, endpoint) {
                Accepts::No => continue,
                // kube picks the serializer first and only then finds it cannot stream.
                Accepts::Yes(_) if endpoint.watch && encoding == Encoding::Yaml => {
                    return Err(endpoint.not_acceptable(encodings));
                }
                Accepts::Yes(conversion) => {
                    let (repr, v1beta1) = match conversion {
                        None => (Repr::Json, false),
                        Some((repr, v1beta1)) => (repr, v1beta1),
                    };
                    if repr == Repr::Metadata {
                        check_metadata_target(&mr, target, kind)?;
                    }
                    return Ok(Negotiated {
                        repr,
                        encoding,
                        v1beta1,
                    });
                }
            }
        }
    }
    Err(endpoint.not_acceptable(encodings))
}

/// Whether one media range is acceptable for one serializer, and the conversion it asks for.
enum Accepts {
    No,
    Yes(Option<(Repr, bool)>),
}

/// kube's `acceptMediaTypeOptions` and `AllowsMediaTypeTransform`.
fn accepts(mr: &MediaRange<'_>, encoding: Encoding, endpoint: Endpoint) -> Accepts {
    if let Some(stream) = mr.param("stream").filter(|s| !s.is_empty()) {
        // Only JSON and protobuf have stream serializers; the schema must be `watch`.
        if encoding == Encoding::Yaml || stream != "watch" {
            return Accepts::No;
        }
    }
    let converting = ["as", "g", "v"].iter().any(|k| mr.param(k).is_some());
    if !converting {
        // A custom resource's objects: only its standard serializers (JSON, YAML).
        if encoding == Encoding::Protobuf && !endpoint.protobuf {
            return Accepts::No;
        }
        return Accepts::Yes(None);
    }
    let (g, v, as_) = (
        mr.param("g").unwrap_or_default(),
        mr.param("v").unwrap_or_default(),
        mr.param("as").unwrap_or_default(),
    );
    if g != "meta.k8s.io" || !matches!(v, "v1" | "v1beta1") {
        return Accepts::No;
    }
    let v1beta1 = v == "v1beta1";
    match as_ {
        // Table has no protobuf form (`+protobuf=false` in kube's meta/v1).
        "Table" if encoding != Encoding::Protobuf => Accepts::Yes(Some((Repr::Table, v1beta1))),
        "PartialObjectMetadata" | "PartialObjectMetadataList" => {
            Accepts::Yes(Some((Repr::Metadata, v1beta1)))
        }
        _ => Accepts::No,
    }
}

/// kube's 406 when PartialObjectMetadata is asked of a list or the list form of an object.
fn check_metadata_target(mr: &MediaRange<'_>, target: Target, kind: &str) -> Result<(), Status> {
    match (mr.param("as").unwrap_or_default(), target) {
        ("PartialObjectMetadata", Target::List) => Err(Status::not_acceptable(format!(
            "you requested PartialObjectMetadata, but the requested object is a list (*v1.{kind}List)"
        ))),
        ("PartialObjectMetadataList", Target::Object) => Err(Status::not_acceptable(format!(
            "you requested PartialObjectMetadataList, but the requested object is not a list (*v1.{kind})"
        ))),
        _ => Ok(()),
    }
}

/// The encoding kube writes an error's Status in for this `Accept` header
/// (`responsewriters.ErrorNegotiated`, with `DefaultEndpointRestrictions`: kube's serializers,
/// no conversion, no server version, streams of `watch` only), or `None` when no clause is
/// acceptable: kube then writes the Status with `WriteRawJSON`, as JSON indented by
/// `json.MarshalIndent` whatever the client asked for (`text/html`, a Table, ...).
pub fn status_encoding(accept: Option<&str>) -> Option<Encoding> {
    let accept = accept.unwrap_or("");
    if accept.is_empty() {
        return Some(Encoding::Json);
    }
    for mr in media_ranges(accept) {
        if ["as", "g", "v"].iter().any(|k| mr.param(k).is_some()) {
            continue;
        }
        if mr.param("sv").is_some_and(|v| !v.is_empty()) {
            continue;
        }
        let stream = mr.param("stream").filter(|s| !s.is_empty());
        if stream.is_some_and(|s| s != "watch") {
            continue;
        }
        for encoding in KUBE {
            if mr.matches(encoding) && !(stream.is_some() && encoding == Encoding::Yaml) {
                return Some(encoding);
            }
        }
    }
    None
}

/// The wire form of a read answered from stored objects: the objects themselves (JSON or
/// protobuf), a `meta.k8s.io/v1` Table (with what each row embeds; JSON only), or
/// PartialObjectMetadata(List) (JSON or protobuf). Each
/// watch event is encoded once per form and shared by every watcher of that form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Form {
    /// The objects themselves (a `PodList`, a `Pod`, watch events of pods).
    Json,
    /// The objects themselves in protobuf.
    Protobuf,
    /// PartialObjectMetadata(List) in protobuf.
    MetadataProtobuf,
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
            Form::Json | Form::Protobuf => Repr::Json,
            Form::Table { .. } => Repr::Table,
            Form::Metadata | Form::MetadataProtobuf => Repr::Metadata,
        }
    }

    /// The encoding.
    pub fn encoding(&self) -> Encoding {
        match self {
            Form::Protobuf | Form::MetadataProtobuf => Encoding::Protobuf,
            _ => Encoding::Json,
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

    /// The representation a built-in kind's endpoint answers in.
    fn repr(accept: Option<&str>, target: Target) -> Result<Repr, Status> {
        negotiate_media(accept, target, "Pod", Endpoint::BUILTIN).map(|n| n.repr)
    }

    #[test]
    fn go_restful_routes_take_only_exact_types_or_any() {
        let list = route_produces(true);
        let get = route_produces(false);
        // kube's serializers, in its order.
        assert_eq!(get, KUBE.map(Encoding::media_type));
        for ok in [
            None,
            Some(""),
            Some("*/*"),
            Some("application/json"),
            Some("text/html, */*;q=0"),
            Some(" application/json ;q=0.5"),
            Some("application/json;as=Table;v=v1;g=meta.k8s.io"),
            Some("image/png,application/vnd.kubernetes.protobuf;stream=watch"),
            Some("application/yaml"),
        ] {
            assert!(route_matches_accept(ok, list), "{ok:?}");
            assert!(route_matches_accept(ok, get), "{ok:?}");
        }
        for refused in [
            "application/*",
            "application/*;q=1, text/*",
            "*/json",
            "*",
            "APPLICATION/JSON",
            "application/JSON",
            "application/json\t",
            "text/html",
            "application/json/x;q=1",
        ] {
            assert!(!route_matches_accept(Some(refused), list), "{refused}");
        }
        // kube's handler would have taken it; the router refuses first, in its own words.
        assert_eq!(enc("application/*"), Encoding::Json);
        let e = route_accept(Some("application/*"), list, false).unwrap_err();
        assert_eq!((e.code, e.reason.as_str()), (406, "NotAcceptable"));
        assert_eq!(
            e.message,
            "406: Not Acceptable\n\nAvailable representations: application/json, application/yaml, application/vnd.kubernetes.protobuf, application/json;stream=watch, application/vnd.kubernetes.protobuf;stream=watch"
        );
        let e = route_accept(Some("text/html"), get, true).unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (
                415,
                "415: Unsupported Media Type\n\nAvailable representations: application/json, application/yaml, application/vnd.kubernetes.protobuf"
            )
        );
    }

    #[test]
    fn kubectl_table_header_gives_table() {
        let a = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
        assert_eq!(repr(Some(a), Target::List).unwrap(), Repr::Table);
    }

    #[test]
    fn protobuf_first_falls_back_to_json_where_there_is_no_protobuf() {
        let a = "application/vnd.kubernetes.protobuf,application/json";
        let cr = |a| negotiate_media(Some(a), Target::List, "Widget", CR);
        assert_eq!(cr(a).unwrap().repr, Repr::Json);
        assert_eq!(cr(a).unwrap().encoding, Encoding::Json);
        let e = cr("application/vnd.kubernetes.protobuf").unwrap_err();
        assert_eq!(e.code, 406);
    }

    #[test]
    fn metadata_forms() {
        let a = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
        assert_eq!(repr(Some(a), Target::List).unwrap(), Repr::Metadata);
        let e = repr(
            Some("application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"),
            Target::List,
        )
        .unwrap_err();
        assert_eq!(
            e.message,
            "you requested PartialObjectMetadata, but the requested object is a list (*v1.PodList)"
        );
        assert_eq!(repr(None, Target::Object).unwrap(), Repr::Json);
        assert_eq!(repr(Some("*/*"), Target::Object).unwrap(), Repr::Json);
    }

    fn media(accept: &str, target: Target, endpoint: Endpoint) -> Result<Negotiated, Status> {
        negotiate_media(Some(accept), target, "Pod", endpoint)
    }

    fn enc(accept: &str) -> Encoding {
        media(accept, Target::List, Endpoint::BUILTIN)
            .unwrap()
            .encoding
    }

    const CR: Endpoint = Endpoint {
        protobuf: false,
        watch: false,
    };

    #[test]
    fn protobuf_for_builtin_kinds() {
        const KUBELET: &str = "application/vnd.kubernetes.protobuf,application/json";
        assert_eq!(enc(KUBELET), Encoding::Protobuf);
        assert_eq!(
            enc("application/vnd.kubernetes.protobuf"),
            Encoding::Protobuf
        );
        assert_eq!(
            enc("application/json, application/vnd.kubernetes.protobuf"),
            Encoding::Json
        );
        // A custom resource answers JSON; protobuf-only gets kube's 406 listing protobuf too.
        let cr = media(KUBELET, Target::List, CR).unwrap();
        assert_eq!(cr.encoding, Encoding::Json);
        let e = media("application/vnd.kubernetes.protobuf", Target::List, CR).unwrap_err();
        assert_eq!(e.code, 406);
        assert_eq!(
            e.message,
            "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf"
        );
        // ... except PartialObjectMetadata, which kube serves in protobuf for any kind.
        let m = media(
            "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json",
            Target::List,
            CR,
        )
        .unwrap();
        assert_eq!((m.repr, m.encoding), (Repr::Metadata, Encoding::Protobuf));
    }

    #[test]
    fn q_values_and_wildcards_as_goautoneg() {
        assert_eq!(
            enc("application/vnd.kubernetes.protobuf;q=0.5, application/json"),
            Encoding::Json
        );
        assert_eq!(
            enc("application/json;q=0.9, application/vnd.kubernetes.protobuf"),
            Encoding::Protobuf
        );
        // `*/*` and `application/*` mean kube's first serializer, JSON; a concrete type sorts
        // before a wildcard of the same q.
        assert_eq!(
            enc("*/*, application/vnd.kubernetes.protobuf"),
            Encoding::Protobuf
        );
        assert_eq!(enc("application/*"), Encoding::Json);
        assert_eq!(enc("*"), Encoding::Json);
        // An unparsable q is 0: last.
        assert_eq!(
            enc("application/json;q=x, application/vnd.kubernetes.protobuf;q=0.1"),
            Encoding::Protobuf
        );
        assert_eq!(enc("application/yaml"), Encoding::Yaml);
        let e = media("text/html", Target::List, Endpoint::BUILTIN).unwrap_err();
        assert_eq!(
            e.message,
            "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf"
        );
    }

    #[test]
    fn watches_stream_json_or_protobuf() {
        let w = Endpoint::BUILTIN.watching(true);
        assert_eq!(
            media(
                "application/vnd.kubernetes.protobuf;stream=watch",
                Target::Object,
                w
            )
            .unwrap()
            .encoding,
            Encoding::Protobuf
        );
        // YAML cannot stream: kube chooses it, then answers 406.
        let e = media("application/yaml, application/json", Target::Object, w).unwrap_err();
        assert_eq!(
            e.message,
            "only the following media types are accepted: application/json;stream=watch, application/vnd.kubernetes.protobuf;stream=watch"
        );
        // An unknown stream schema skips the range.
        assert_eq!(
            media(
                "application/json;stream=other, application/vnd.kubernetes.protobuf",
                Target::Object,
                w
            )
            .unwrap()
            .encoding,
            Encoding::Protobuf
        );
    }

    #[test]
    fn statuses_follow_the_accept_header_without_conversions() {
        assert_eq!(status_encoding(None), Some(Encoding::Json));
        assert_eq!(
            status_encoding(Some(
                "application/vnd.kubernetes.protobuf, application/json"
            )),
            Some(Encoding::Protobuf)
        );
        assert_eq!(
            status_encoding(Some(
                "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
            )),
            Some(Encoding::Json)
        );
        assert_eq!(status_encoding(Some("application/*")), Some(Encoding::Json));
        // Nothing acceptable: kube's raw, indented JSON.
        assert_eq!(status_encoding(Some("text/html")), None);
        assert_eq!(status_encoding(Some("*/json")), None);
        assert_eq!(
            status_encoding(Some("application/json;as=Table;v=v1;g=meta.k8s.io")),
            None
        );
        assert_eq!(status_encoding(Some("application/json;sv=v1")), None);
    }

    #[test]
    fn tables_only_in_json() {
        let t = media(
            "application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io, application/json",
            Target::List,
            Endpoint::BUILTIN,
        )
        .unwrap();
        assert_eq!((t.repr, t.encoding), (Repr::Json, Encoding::Json));
        let t = media(
            "application/json;as=Table;v=v1beta1;g=meta.k8s.io",
            Target::List,
            Endpoint::BUILTIN,
        )
        .unwrap();
        assert_eq!((t.repr, t.v1beta1), (Repr::Table, true));
        assert_eq!(Form::MetadataProtobuf.repr(), Repr::Metadata);
        assert_eq!(Form::Protobuf.encoding(), Encoding::Protobuf);
        assert_eq!(Form::Json.encoding(), Encoding::Json);
    }
}
