//! `apiextensions.k8s.io/v1` `CustomResourceDefinition`s: what kube-apiserver's apiextensions
//! server does to one on create and update (defaulting, a minimal validation, the status its
//! controllers set), and the custom types a CRD serves.
//!
//! Pure rules over JSON values: registering the types with the [`Registry`](crate::kinds::Registry)
//! and the deletion of a CRD's custom resources are `ops`'s (`ops::crds`).

use serde_json::{Value, json};

use crate::kinds::{CRD_GROUP, CRD_RESOURCE, ResourceType};
use crate::util::{now_unix, rfc3339};
use kube_wire::status::Status;

/// Whether `rt` is `customresourcedefinitions.apiextensions.k8s.io`.
pub fn is_crd(rt: &ResourceType) -> bool {
    rt.builtin && rt.group == CRD_GROUP && rt.resource == CRD_RESOURCE
}

/// The group and plural a CRD object serves (`spec.group`, `spec.names.plural`).
pub fn group_resource(crd: &Value) -> (String, String) {
    let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
    (s(&crd["spec"]["group"]), s(&crd["spec"]["names"]["plural"]))
}

/// The custom types a (valid) CRD object serves: one per `served: true` version. A CRD being
/// deleted serves what it served before its deletion began; the caller decides.
pub fn served_types(crd: &Value) -> Vec<ResourceType> {
    let spec = &crd["spec"];
    let names = &spec["names"];
    let (group, resource) = group_resource(crd);
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|s| Some(s.as_str()?.to_string()))
                    .collect()
            })
            .unwrap_or_default()
    };
    let kind = names["kind"].as_str().unwrap_or_default().to_string();
    let singular = match names["singular"].as_str() {
        Some(s) if !s.is_empty() => s.to_string(),
        _ => kind.to_ascii_lowercase(),
    };
    versions(spec)
        .iter()
        .filter(|v| v["served"].as_bool() == Some(true))
        .map(|v| ResourceType {
            group: group.clone(),
            version: v["name"].as_str().unwrap_or_default().to_string(),
            resource: resource.clone(),
            singular: singular.clone(),
            kind: kind.clone(),
            namespaced: spec["scope"] == "Namespaced",
            short_names: strings(&names["shortNames"]),
            categories: strings(&names["categories"]),
            builtin: false,
            status_subresource: v["subresources"]["status"].is_object(),
            scale_subresource: false,
            approval_subresource: false,
            // `.spec.color` selects as `spec.color` (KEP-4358).
            selectable_fields: v["selectableFields"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|f| f["jsonPath"].as_str())
                        .map(|p| p.strip_prefix('.').unwrap_or(p).to_string())
                        .collect()
                })
                .unwrap_or_default(),
            aggregated: false,
            index: 0,
        })
        .collect()
}

fn versions(spec: &Value) -> &[Value] {
    spec["versions"].as_array().map_or(&[], Vec::as_slice)
}

/// A CRD about to be created: kube's defaulting, validation and the status its controllers
/// set once the names are accepted and the CRD is established.
pub fn prepare_create(rt: &ResourceType, name: &str, crd: &mut Value) -> Result<(), Status> {
    default(crd);
    validate(rt, name, crd, None)?;
    set_status(crd, None);
    Ok(())
}

/// A CRD about to be updated from `current` (main endpoint): defaulting, validation (the scope
/// is immutable) and the status after the update (accepted names, one more stored version).
pub fn prepare_update(rt: &ResourceType, current: &Value, crd: &mut Value) -> Result<(), Status> {
    default(crd);
    let name = current["metadata"]["name"].as_str().unwrap_or_default();
    validate(rt, name, crd, Some(current))?;
    set_status(crd, Some(current));
    Ok(())
}

/// kube's `SetDefaults_CustomResourceDefinition`: singular and list kind from the kind, no
/// conversion.
fn default(crd: &mut Value) {
    let Some(spec) = crd.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    if let Some(names) = spec.get_mut("names").and_then(Value::as_object_mut) {
        let kind = names
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        if !kind.is_empty() {
            if names
                .get("singular")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
            {
                names.insert("singular".into(), json!(kind.to_ascii_lowercase()));
            }
            if names
                .get("listKind")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
            {
                names.insert("listKind".into(), json!(format!("{kind}List")));
            }
        }
    }
    spec.entry("conversion")
        .or_insert_with(|| json!({"strategy": "None"}));
}

/// The part of kube's `ValidateCustomResourceDefinition` the simulator relies on, with kube's
/// messages (the `spec.versions` value is abbreviated: kube prints a Go dump of the versions).
fn validate(
    rt: &ResourceType,
    name: &str,
    crd: &Value,
    current: Option<&Value>,
) -> Result<(), Status> {
    let spec = &crd["spec"];
    let (group, plural) = group_resource(crd);
    let mut errs: Vec<(&str, &str, String)> = Vec::new();
    if name != format!("{plural}.{group}") {
        errs.push((
            "FieldValueInvalid",
            "metadata.name",
            format!("Invalid value: \"{name}\": must be spec.names.plural+\".\"+spec.group"),
        ));
    }
    if group.is_empty() {
        errs.push(("FieldValueRequired", "spec.group", "Required value".into()));
    } else if !group.contains('.') {
        errs.push((
            "FieldValueInvalid",
            "spec.group",
            format!("Invalid value: \"{group}\": should be a domain with at least one dot"),
        ));
    }
    let storage = versions(spec)
        .iter()
        .filter(|v| v["storage"].as_bool() == Some(true))
        .count();
    if storage != 1 {
        errs.push((
            "FieldValueInvalid",
            "spec.versions",
            "Invalid value: []apiextensions.CustomResourceDefinitionVersion{...}: must have exactly one version marked as storage version".into(),
        ));
    }
    let scope = spec["scope"].as_str().unwrap_or_default();
    if !matches!(scope, "Namespaced" | "Cluster") {
        errs.push((
            "FieldValueNotSupported",
            "spec.scope",
            format!(
                "Unsupported value: \"{scope}\": supported values: \"Cluster\", \"Namespaced\""
            ),
        ));
    } else if let Some(cur) = current
        && cur["spec"]["scope"] != spec["scope"]
    {
        errs.push((
            "FieldValueInvalid",
            "spec.scope",
            format!("Invalid value: \"{scope}\": field is immutable"),
        ));
    }
    if plural.is_empty() {
        errs.push((
            "FieldValueRequired",
            "spec.names.plural",
            "Required value".into(),
        ));
    }
    if spec["names"]["kind"].as_str().is_none_or(str::is_empty) {
        errs.push((
            "FieldValueRequired",
            "spec.names.kind",
            "Required value".into(),
        ));
    }
    if errs.is_empty() {
        Ok(())
    } else {
        Err(Status::invalid(&rt.group, &rt.kind, name, &errs))
    }
}

/// Sets a CRD's `status` as kube's controllers leave it once it is established: conditions
/// `NamesAccepted` and `Established` (kept from `before`, the CRD before an update), the
/// accepted names (the spec's) and the stored versions (`before`'s plus the storage version).
pub fn set_status(crd: &mut Value, before: Option<&Value>) {
    let spec = &crd["spec"];
    let mut stored: Vec<Value> = before
        .and_then(|b| b["status"]["storedVersions"].as_array())
        .cloned()
        .unwrap_or_default();
    if let Some(storage) = versions(spec)
        .iter()
        .find(|v| v["storage"].as_bool() == Some(true))
        .map(|v| v["name"].clone())
        && !stored.contains(&storage)
    {
        stored.push(storage);
    }
    let conditions = before
        .map(|b| &b["status"]["conditions"])
        .filter(|c| c.as_array().is_some_and(|a| !a.is_empty()))
        .cloned()
        .unwrap_or_else(|| {
            let condition = |ty: &str, reason: &str, message: &str| {
                json!({"type": ty, "status": "True", "lastTransitionTime": rfc3339(now_unix()),
                       "reason": reason, "message": message})
            };
            json!([
                condition("NamesAccepted", "NoConflicts", "no conflicts found"),
                condition(
                    "Established",
                    "InitialNamesAccepted",
                    "the initial names have been accepted"
                ),
            ])
        });
    crd["status"] = json!({
        "conditions": conditions,
        "acceptedNames": spec["names"].clone(),
        "storedVersions": stored,
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinds::Registry;

    fn crd() -> Value {
        json!({"metadata": {"name": "widgets.example.com"},
               "spec": {"group": "example.com", "scope": "Namespaced",
                        "names": {"plural": "widgets", "kind": "Widget", "shortNames": ["wd"]},
                        "versions": [
                            {"name": "v1", "served": true, "storage": true,
                             "selectableFields": [{"jsonPath": ".spec.color"}],
                             "subresources": {"status": {}}},
                            {"name": "v2", "served": false, "storage": false}]}})
    }

    #[test]
    fn a_crd_is_defaulted_validated_and_established() {
        let reg = Registry::new(&[]).unwrap();
        let rt = reg.get(CRD_GROUP, "v1", CRD_RESOURCE).unwrap();
        let mut c = crd();
        prepare_create(&rt, "widgets.example.com", &mut c).unwrap();
        assert_eq!(c["spec"]["names"]["singular"], "widget");
        assert_eq!(c["spec"]["names"]["listKind"], "WidgetList");
        assert_eq!(c["spec"]["conversion"]["strategy"], "None");
        assert_eq!(c["status"]["storedVersions"], json!(["v1"]));
        assert_eq!(c["status"]["acceptedNames"]["kind"], "Widget");
        assert_eq!(c["status"]["conditions"][1]["type"], "Established");
        let types = served_types(&c);
        assert_eq!(types.len(), 1, "v2 is not served");
        assert_eq!(types[0].selectable_fields, ["spec.color"]);
        assert_eq!(types[0].short_names, ["wd"]);
        assert!(types[0].namespaced && types[0].status_subresource && !types[0].builtin);

        let mut bad = crd();
        bad["spec"]["group"] = json!("example");
        bad["spec"]["versions"][1]["storage"] = json!(true);
        let s = prepare_create(&rt, "widgets.example.com", &mut bad).unwrap_err();
        assert_eq!(s.code, 422);
        assert_eq!(
            s.message,
            "CustomResourceDefinition.apiextensions.k8s.io \"widgets.example.com\" is invalid: [metadata.name: Invalid value: \"widgets.example.com\": must be spec.names.plural+\".\"+spec.group, spec.group: Invalid value: \"example\": should be a domain with at least one dot, spec.versions: Invalid value: []apiextensions.CustomResourceDefinitionVersion{...}: must have exactly one version marked as storage version]"
        );

        let mut moved = c.clone();
        moved["spec"]["scope"] = json!("Cluster");
        moved["spec"]["versions"][1]["storage"] = json!(true);
        moved["spec"]["versions"][0]["storage"] = json!(false);
        assert!(
            prepare_update(&rt, &c, &mut moved).is_err(),
            "scope is immutable"
        );
        let mut next = c.clone();
        next["spec"]["versions"][1]["storage"] = json!(true);
        next["spec"]["versions"][0]["storage"] = json!(false);
        prepare_update(&rt, &c, &mut next).unwrap();
        assert_eq!(next["status"]["storedVersions"], json!(["v1", "v2"]));
        assert_eq!(next["status"]["conditions"], c["status"]["conditions"]);
    }
}
