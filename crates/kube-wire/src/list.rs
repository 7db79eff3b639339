//! Empty lists: how kube-apiserver writes each list form with no items, and reading a list
//! answer whichever way its sender wrote them.
//!
//! Go's `encoding/json` writes a slice that holds nothing as `[]` when it was made and as `null`
//! when it is nil, and kube's list types (`items`, a Table's `rows`, discovery's `groups`,
//! `versions`, `resources`, `verbs`) have no `omitempty`, so the code path that built an answer
//! decides which one a client sees. In kube 1.36 (`k8s.io/apiserver`, `k8s.io/apimachinery`):
//!
//! | form | empty | where kube builds it |
//! |---|---|---|
//! | a kind's List (`PodList`, …) in JSON | `"items":[]` | the cacher's `GetList` and etcd3's `GetList` both set `reflect.MakeSlice(…, 0, 0)` ("never return a nil Items pointer") |
//! | a custom resource's List (`UnstructuredList`) in JSON | `"items":[]` | `UnstructuredJSONScheme` writes `make([]interface{}, 0, n)` |
//! | `PartialObjectMetadataList` (`meta.k8s.io/v1` and `v1beta1`) in JSON | `"items":null` | `asPartialObjectMetadataList` (`pkg/endpoints/handlers/response.go`) appends to a nil slice |
//! | a Table from a kind's printer or a CRD's columns | `"rows":[]` | the printers' `make([]TableRow, 0, n)`; `MetaToTableRow`'s `make([]TableRow, 0, 16)` |
//! | a Table from the default convertor (a kind without a printer) | `"rows":null` | `defaultTableConvertor` (`pkg/registry/rest/table.go`) appends to a nil slice |
//! | any list in protobuf (a kind's List, `PartialObjectMetadataList`) | no field 2 | a repeated field without elements is not written: nil and empty are the same bytes |
//!
//! [`crate::table`] writes the JSON forms by this table. Readers must accept both spellings,
//! and a missing member, as client-go's decoder does: [`nullable`] is the `deserialize_with`
//! every reader of an upstream list uses.

use serde::{Deserialize, Deserializer};

/// Reads a JSON array that Go may have written as `null` (a nil slice): `null` is empty. With
/// `#[serde(default, deserialize_with = "kube_wire::list::nullable")]` a missing member is
/// empty too.
pub fn nullable<'de, D, T>(d: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Ok(Option::<Vec<T>>::deserialize(d)?.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;
    use serde_json::value::RawValue;

    #[derive(Deserialize)]
    struct Owned {
        #[serde(default, deserialize_with = "super::nullable")]
        items: Vec<u32>,
    }

    #[derive(Deserialize)]
    struct Borrowed<'a> {
        #[serde(borrow, default, deserialize_with = "super::nullable")]
        items: Vec<&'a RawValue>,
    }

    #[test]
    fn null_missing_and_empty_are_empty() {
        for body in [r#"{"items":null}"#, r#"{}"#, r#"{"items":[]}"#] {
            let o: Owned = serde_json::from_str(body).unwrap();
            assert!(o.items.is_empty(), "{body}");
            let b: Borrowed<'_> = serde_json::from_str(body).unwrap();
            assert!(b.items.is_empty(), "{body}");
        }
        let o: Owned = serde_json::from_str(r#"{"items":[1,2]}"#).unwrap();
        assert_eq!(o.items, [1, 2]);
        let b: Borrowed<'_> = serde_json::from_str(r#"{"items":[{"a":1}, 2]}"#).unwrap();
        assert_eq!(b.items[0].get(), r#"{"a":1}"#);
    }

    #[test]
    fn anything_else_is_still_an_error() {
        for body in [r#"{"items":{}}"#, r#"{"items":1}"#, r#"{"items":"x"}"#] {
            assert!(serde_json::from_str::<Owned>(body).is_err(), "{body}");
        }
    }
}
