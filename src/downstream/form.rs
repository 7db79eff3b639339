//! Content negotiation for the cache's answers: which wire form a read asks for ([`Form`]: the
//! objects themselves in JSON or protobuf, a `meta.k8s.io/v1` Table, or
//! PartialObjectMetadata(List) in JSON or protobuf), or that the cache cannot answer it, and the
//! read goes to the upstream.
//!
//! The negotiation is kube-apiserver's ([`kube_wire::negotiate::negotiate_media`], which the
//! simulator uses too): q-values, wildcards, kube's serializer order, Tables in JSON only,
//! objects of custom resources not in protobuf. Everything the cache does not produce is left to
//! the upstream, which then answers exactly as kube-apiserver does: YAML, kube's 406 in kube's
//! words, `meta.k8s.io/v1beta1` (the cache prints v1 only), a list/object mismatch of
//! PartialObjectMetadata (kube's 406 comes after the read), an invalid `includeObject` (kube's
//! 400 comes after the read too) and protobuf of a built-in kind the transcoder has no schema
//! for. So [`negotiate`] never fails: it returns the form, or `None`.
//!
//! A Table is printed like kube only for the kinds it has a printer for: the built-in kinds whose
//! printers kube-wire reproduces, and custom resources once their CRD's printer columns are
//! known ([`printer`], from [`Crds`]).
//!
//! Owns the decision only: it must not build bodies ([`super::table`] and [`super::list`] do)
//! nor decide whether a read is served from the cache at all (the router does).

use kube_wire::negotiate::{
    Encoding, Endpoint, Repr, Target, negotiate_media, route_matches_accept, route_produces,
};
use kube_wire::table::{IncludeObject, TablePrinter};

use super::protobuf;
use crate::cache::ResourceInfo;
use crate::reflector::crd::Crds;

pub use kube_wire::negotiate::Form;

/// Whether the cache prints `form` of `info`'s objects exactly as kube-apiserver does, knowing
/// no CRD's columns: [`printer`] without any. False only for a Table of a kind without a
/// per-type printer in [`kube_wire::table::has_printer`]: custom resources and the built-in
/// kinds whose printers are not reproduced.
pub fn renders(form: &Form, info: &ResourceInfo) -> bool {
    printer(form, info, &Crds::default()).is_some()
}

/// How the cache prints `form` of `info`'s objects exactly as kube-apiserver does, or `None`
/// when it cannot, and the read goes to the upstream. Only a Table can be `None`: a built-in
/// kind is printed by its per-type printer ([`kube_wire::table::has_printer`]; the kinds whose
/// printers are not reproduced go upstream), a custom resource with its CRD version's
/// `additionalPrinterColumns` once `crds` knows them (until then, or when a column's JSONPath is
/// beyond kube-wire's, it goes upstream). An aggregated API's kind is not a CRD's: never known.
pub fn printer(form: &Form, info: &ResourceInfo, crds: &Crds) -> Option<TablePrinter> {
    let for_kind = TablePrinter::for_kind(&info.group, &info.kind);
    match form {
        // A built-in kind the transcoder has no schema for (an aggregated API's, a newer one's).
        Form::Protobuf if !protobuf::encodes(info) => None,
        Form::Table { .. } if !kube_wire::table::has_printer(&info.group, &info.kind) => {
            if info.builtin {
                None
            } else {
                crds.printer(&info.group, &info.version, &info.resource)
            }
        }
        _ => Some(for_kind),
    }
}

/// The form of a read with this `Accept` header and query, answering a list
/// ([`Target::List`]) or one object or watch events ([`Target::Object`]) of a built-in kind
/// (`builtin`: served in protobuf too) or a custom resource, for a `watch` or not; `None` when
/// the cache cannot answer it (see the module doc), and the read goes to the upstream. Whether
/// the cache encodes this kind's objects in protobuf is [`printer`]'s to say, once the kind is
/// known.
pub fn negotiate(
    accept: Option<&str>,
    query: Option<&str>,
    target: Target,
    builtin: bool,
    watch: bool,
) -> Option<Form> {
    let accept = accept.map(str::trim).filter(|a| !a.is_empty());
    let endpoint = Endpoint {
        protobuf: builtin,
        watch,
    };
    // A built-in kind's endpoint is a go-restful route, which refuses a header with no clause
    // naming exactly a type it produces (`application/*` included) before kube negotiates: the
    // upstream says that 406 too.
    let collection_read = target == Target::List || watch;
    if builtin && !route_matches_accept(accept, route_produces(collection_read)) {
        return None;
    }
    // kube's negotiation: its 406 is left to the upstream to say.
    let n = negotiate_media(accept, target, "", endpoint).ok()?;
    // kube answers meta.k8s.io/v1beta1 in v1beta1; the cache prints v1 only.
    if n.v1beta1 {
        return None;
    }
    Some(match (n.repr, n.encoding) {
        (_, Encoding::Yaml) => return None,
        (Repr::Json, Encoding::Json) => Form::Json,
        (Repr::Json, Encoding::Protobuf) => Form::Protobuf,
        (Repr::Metadata, Encoding::Json) => Form::Metadata,
        (Repr::Metadata, Encoding::Protobuf) => Form::MetadataProtobuf,
        (Repr::Table, Encoding::Json) => Form::Table {
            include_object: IncludeObject::from_query(query).ok()?,
        },
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const KUBECTL: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
    const METADATA_LIST: &str = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";

    fn neg(accept: Option<&str>, query: Option<&str>, target: Target) -> Option<Form> {
        negotiate(accept, query, target, true, false)
    }

    fn list(accept: &str) -> Option<Form> {
        neg(Some(accept), None, Target::List)
    }

    #[test]
    fn plain_json() {
        assert_eq!(neg(None, None, Target::List), Some(Form::Json));
        assert_eq!(list(""), Some(Form::Json));
        assert_eq!(list("application/json"), Some(Form::Json));
        assert_eq!(list("application/json, */*"), Some(Form::Json));
        assert_eq!(list("*/*"), Some(Form::Json));
        // go-restful's route refuses a wildcard subtype before kube negotiates.
        assert_eq!(list("application/*"), None);
        assert_eq!(
            list("application/*, application/json;q=0.1"),
            Some(Form::Json)
        );
        assert_eq!(list("application/json; charset=utf-8"), Some(Form::Json));
        assert_eq!(list("text/html, application/json"), Some(Form::Json));
        // Kubelets and controllers list protobuf first: they get it.
        assert_eq!(
            list("application/vnd.kubernetes.protobuf, application/json"),
            Some(Form::Protobuf)
        );
        assert_eq!(
            neg(
                Some("application/vnd.kubernetes.protobuf, application/json"),
                None,
                Target::Object
            ),
            Some(Form::Protobuf)
        );
    }

    #[test]
    fn no_json_form_goes_upstream() {
        // YAML: the upstream serves it; anything else gets kube's own 406.
        assert_eq!(
            list("application/vnd.kubernetes.protobuf"),
            Some(Form::Protobuf)
        );
        assert_eq!(list("application/yaml"), None);
        assert_eq!(list("text/html"), None);
        assert_eq!(
            list("application/json;as=Table;v=v1;g=meta.k8s.io"),
            Some(Form::Table {
                include_object: IncludeObject::Metadata
            })
        );
    }

    #[test]
    fn tables() {
        assert_eq!(
            list(KUBECTL),
            Some(Form::Table {
                include_object: IncludeObject::Metadata
            })
        );
        assert_eq!(
            neg(Some(KUBECTL), Some("includeObject=Object"), Target::Object),
            Some(Form::Table {
                include_object: IncludeObject::Object
            })
        );
        assert_eq!(
            neg(
                Some(KUBECTL),
                Some("watch=1&includeObject=None"),
                Target::Object
            ),
            Some(Form::Table {
                include_object: IncludeObject::None
            })
        );
        assert_eq!(
            neg(Some(KUBECTL), Some("includeObject=object"), Target::List),
            None,
            "kube's 400 comes from the upstream"
        );
        // v1beta1 first: kube answers meta.k8s.io/v1beta1.
        assert_eq!(
            list("application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"),
            None
        );
        // Conversions to what neither serves are skipped.
        assert_eq!(
            list(
                "application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io,application/json"
            ),
            Some(Form::Json)
        );
        assert_eq!(
            list("application/json;as=Table;v=v1;g=example.com,application/json"),
            Some(Form::Json),
        );
        assert_eq!(
            list(
                "application/json;as=Foo;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1;g=meta.k8s.io"
            ),
            Some(Form::Table {
                include_object: IncludeObject::Metadata
            }),
        );
    }

    #[test]
    fn metadata() {
        // A metadata informer's LIST (protobuf first, then its JSON form).
        assert_eq!(list(METADATA_LIST), Some(Form::MetadataProtobuf));
        let json_only = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
        assert_eq!(list(json_only), Some(Form::Metadata));
        let object =
            "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json";
        assert_eq!(
            neg(Some(object), None, Target::Object),
            Some(Form::Metadata)
        );
        // The list/object mismatch is kube's 406, after the read: the upstream answers it.
        assert_eq!(list(object), None);
        assert_eq!(neg(Some(json_only), None, Target::Object), None);
        assert_eq!(
            list("application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1beta1"),
            None
        );
    }

    #[test]
    fn tables_only_for_kinds_printed_like_kube() {
        let table = Form::Table {
            include_object: IncludeObject::None,
        };
        let pods = ResourceInfo::new("", "v1", "pods", "Pod", true);
        let ingresses = ResourceInfo::new("networking.k8s.io", "v1", "ingresses", "Ingress", true);
        // A built-in kind kube-wire has no printer for (beta, off by default in kube 1.36).
        let bundles = ResourceInfo::new(
            "certificates.k8s.io",
            "v1beta1",
            "clustertrustbundles",
            "ClusterTrustBundle",
            false,
        );
        let widgets = ResourceInfo::new("example.com", "v1", "widgets", "Widget", true);
        assert!(renders(&table, &pods));
        assert!(renders(&table, &ingresses));
        assert!(!renders(&table, &bundles));
        assert!(!renders(&table, &widgets));
        assert!(renders(&Form::Metadata, &widgets));
        assert!(renders(&Form::Json, &bundles));
        // A custom resource's Table once its CRD's columns are known.
        let crds = Crds::new([("example.com", "widgets")]);
        assert!(printer(&table, &widgets, &crds).is_none());
        crds.replace_for_test(
            &serde_json::json!({"metadata": {"name": "widgets.example.com"},
            "spec": {"versions": [{"name": "v1"}]}}),
        );
        assert!(printer(&table, &widgets, &crds).is_some_and(|p| p.is_crd()));
        assert!(printer(&table, &bundles, &crds).is_none());
        assert!(printer(&table, &pods, &crds).is_some_and(|p| !p.is_crd()));
        assert_eq!(table.repr(), Repr::Table);
        assert_eq!(table.include_object(), IncludeObject::None);
        assert_eq!(Form::Json.include_object(), IncludeObject::Metadata);
    }
}
