//! The columns kube-apiserver prints a custom resource's Table with: its CRD version's
//! `additionalPrinterColumns` (apiextensions-apiserver `pkg/registry/customresource/
//! tableconvertor`), or, when the version declares none, the one column kube adds for it
//! (`serveDefaultColumnsIfEmpty`: `Age`, a `date` of `.metadata.creationTimestamp`).
//!
//! A Table of a custom resource has a `Name` column, then one per printer column, each cell the
//! first value the column's JSONPath ([`crate::jsonpath`]) finds, as the column's type wants it
//! (`cellForJSONValue`): `integer` and `number` cells are numbers, `boolean` cells booleans,
//! `string` cells the value printed as text (even a number or an object), `date` cells the age
//! of an RFC 3339 timestamp as `kubectl` shows it (kube humanizes on the server:
//! `ConvertToHumanReadableDateType`), and a cell is `null` when nothing is found, the path fails
//! or the value does not fit the type.
//!
//! Reading the columns is this module's; laying out the Table is [`super`]'s. Pure: no I/O; the
//! clock is an argument.

use serde_json::{Value, json};

use super::{D_CREATED, D_NAME, GO_ZERO_TIME_NS, col, since_ns};
use crate::jsonpath::{JsonPath, ParseError};

/// The printer columns of one served version of a CRD, parsed.
#[derive(Debug, Clone, PartialEq)]
pub struct PrinterColumns {
    columns: Vec<Column>,
}

#[derive(Debug, Clone, PartialEq)]
struct Column {
    /// The `TableColumnDefinition`.
    definition: Value,
    /// `integer`, `number`, `string`, `boolean` or `date`.
    ty: String,
    path: JsonPath,
}

/// A printer column whose JSONPath does not parse. kube then prints the columns before it only
/// (its convertor stops at the first such column), which [`InvalidColumn::partial`] holds.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("printer column {column:?}: {error}")]
pub struct InvalidColumn {
    /// The column's name.
    pub column: String,
    /// Why its JSONPath was not parsed: invalid for kube too, or beyond the subset implemented.
    pub error: ParseError,
    /// The columns before it.
    pub partial: PrinterColumns,
}

impl PrinterColumns {
    /// What kube serves for a version without `additionalPrinterColumns`: `Age`.
    pub fn default_columns() -> PrinterColumns {
        PrinterColumns {
            columns: vec![Column {
                definition: col("Age", "date", "", D_CREATED, 0),
                ty: "date".into(),
                path: JsonPath::parse(".metadata.creationTimestamp")
                    .unwrap_or_else(|_| unreachable!("a constant path")),
            }],
        }
    }

    /// The columns of `definitions`, a CRD version's `additionalPrinterColumns` as JSON
    /// (`name`, `type`, `format`, `description`, `priority`, `jsonPath`); the default columns
    /// when there are none.
    pub fn from_definitions(definitions: &[Value]) -> Result<PrinterColumns, InvalidColumn> {
        if definitions.is_empty() {
            return Ok(PrinterColumns::default_columns());
        }
        let mut columns = Vec::with_capacity(definitions.len());
        for d in definitions {
            let s = |k: &str| d.get(k).and_then(Value::as_str).unwrap_or("");
            let json_path = s("jsonPath");
            let path = match JsonPath::parse(json_path) {
                Ok(p) => p,
                Err(error) => {
                    return Err(InvalidColumn {
                        column: s("name").to_string(),
                        error,
                        partial: PrinterColumns { columns },
                    });
                }
            };
            let description = match s("description") {
                "" => {
                    format!("Custom resource definition column (in JSONPath format): {json_path}")
                }
                given => given.to_string(),
            };
            // `priority` is an int32.
            let priority = d
                .get("priority")
                .and_then(Value::as_i64)
                .and_then(|p| i32::try_from(p).ok())
                .unwrap_or(0);
            columns.push(Column {
                definition: col(s("name"), s("type"), s("format"), &description, priority),
                ty: s("type").to_string(),
                path,
            });
        }
        Ok(PrinterColumns { columns })
    }

    /// The columns of `version` in a `CustomResourceDefinition` object (`apiextensions.k8s.io/v1`),
    /// or `None` if the CRD has no such version.
    pub fn of_crd(crd: &Value, version: &str) -> Option<Result<PrinterColumns, InvalidColumn>> {
        let v = crd
            .pointer("/spec/versions")?
            .as_array()?
            .iter()
            .find(|v| v.get("name").and_then(Value::as_str) == Some(version))?;
        let definitions = v
            .get("additionalPrinterColumns")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        Some(PrinterColumns::from_definitions(definitions))
    }

    /// The column definitions: `Name`, then the printer columns.
    pub(super) fn definitions(&self) -> Vec<Value> {
        let mut out = Vec::with_capacity(self.columns.len() + 1);
        out.push(col("Name", "string", "name", D_NAME, 0));
        out.extend(self.columns.iter().map(|c| c.definition.clone()));
        out
    }

    /// One row's cells for `obj`: its name, then one cell per column.
    pub(super) fn cells(&self, obj: &Value, now: i64) -> Vec<Value> {
        let name = obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        let mut cells = Vec::with_capacity(self.columns.len() + 1);
        cells.push(json!(name));
        for c in &self.columns {
            let cell = match c.path.find(obj) {
                Ok(found) => match found.first() {
                    Some(v) => cell(&c.ty, v, now),
                    None => Value::Null,
                },
                Err(_) => Value::Null,
            };
            cells.push(cell);
        }
        cells
    }
}

/// kube's `cellForJSONValue` (and `PrintResults` for `string` columns).
fn cell(ty: &str, v: &Value, now: i64) -> Value {
    if ty == "string" {
        // Printed as text whatever it is (`null` prints `<no value>`).
        return Value::String(crate::jsonpath::print_text(v));
    }
    match (ty, v) {
        (_, Value::Null) => Value::Null,
        ("integer", Value::Number(n)) => match n.as_i64() {
            Some(i) => json!(i),
            // Go's int64(float64): truncation (saturating here).
            None => json!(n.as_f64().unwrap_or(0.0) as i64),
        },
        ("number", Value::Number(n)) => match n.as_i64() {
            // A float64 that Go's encoder prints without a fraction.
            Some(i) => json!(i),
            None => go_float(n.as_f64().unwrap_or(0.0)),
        },
        ("boolean", Value::Bool(b)) => json!(b),
        ("date", Value::String(s)) => json!(date_cell(s, now)),
        _ => Value::Null,
    }
}

/// A float64 as Go's encoder writes it: integral values (here: those an i64 holds exactly
/// enough) without a fraction.
fn go_float(f: f64) -> Value {
    if f.fract() == 0.0 && f.abs() < 1e18 {
        json!(f as i64)
    } else {
        json!(f)
    }
}

/// `metav1.Time.UnmarshalQueryParameter` then `ConvertToHumanReadableDateType`: `<unknown>` for
/// an empty, `null` or zero time, `<invalid>` for one that does not parse, else its age.
fn date_cell(s: &str, now: i64) -> String {
    if s.is_empty() || s == "null" {
        return "<unknown>".into();
    }
    match super::parse_rfc3339(s) {
        None => "<invalid>".into(),
        Some(t) if t == GO_ZERO_TIME_NS => "<unknown>".into(),
        Some(t) => since_ns(Some(t), now),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_767_225_600; // 2026-01-01T00:00:00Z

    fn widget() -> Value {
        json!({
            "kind": "Widget", "apiVersion": "example.com/v1",
            "metadata": {"name": "w1", "creationTimestamp": "2025-12-31T23:00:00Z"},
            "spec": {"replicas": 3, "ratio": 2.5, "size": "L", "on": true,
                     "when": "2025-12-31T23:59:00Z", "bad": "yesterday", "obj": {"b": 1, "a": 2}},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}
        })
    }

    fn column(name: &str, ty: &str, path: &str) -> Value {
        json!({"name": name, "type": ty, "jsonPath": path})
    }

    #[test]
    fn cells_by_type() {
        let defs = [
            column("Replicas", "integer", ".spec.replicas"),
            column("Ratio", "integer", ".spec.ratio"),
            column("RatioN", "number", ".spec.ratio"),
            column("ReplicasN", "number", ".spec.replicas"),
            column(
                "Ready",
                "string",
                r#".status.conditions[?(@.type=="Ready")].status"#,
            ),
            column("Replicas as text", "string", ".spec.replicas"),
            column("Obj", "string", ".spec.obj"),
            column("On", "boolean", ".spec.on"),
            column("Size as bool", "boolean", ".spec.size"),
            column("When", "date", ".spec.when"),
            column("Bad", "date", ".spec.bad"),
            column("Missing", "string", ".spec.missing"),
            column("Error", "integer", ".spec.size[0]"),
        ];
        let cols = PrinterColumns::from_definitions(&defs).unwrap();
        assert_eq!(
            Value::Array(cols.cells(&widget(), NOW)),
            json!([
                "w1",
                3,
                2,
                2.5,
                3,
                "True",
                "3",
                r#"{"a":2,"b":1}"#,
                true,
                null,
                "60s",
                "<invalid>",
                null,
                null
            ])
        );
    }

    #[test]
    fn definitions_and_defaults() {
        let defs = [
            json!({"name": "Size", "type": "string", "jsonPath": ".spec.size",
                           "priority": 1, "format": "byte"}),
        ];
        let cols = PrinterColumns::from_definitions(&defs).unwrap();
        let d = cols.definitions();
        assert_eq!(d[0]["name"], "Name");
        assert_eq!(
            d[1],
            json!({"name": "Size", "type": "string", "format": "byte", "priority": 1,
                   "description": "Custom resource definition column (in JSONPath format): .spec.size"})
        );
        let default = PrinterColumns::from_definitions(&[]).unwrap();
        assert_eq!(default, PrinterColumns::default_columns());
        assert_eq!(default.definitions()[1]["name"], "Age");
        assert_eq!(default.definitions()[1]["type"], "date");
        assert_eq!(
            Value::Array(default.cells(&widget(), NOW)),
            json!(["w1", "60m"])
        );
    }

    #[test]
    fn of_a_crd_version_and_invalid_paths() {
        let crd = json!({"spec": {"versions": [
            {"name": "v1", "additionalPrinterColumns": [column("A", "string", ".a"),
                                                         column("B", "string", ".b[")]},
            {"name": "v2"}
        ]}});
        let e = PrinterColumns::of_crd(&crd, "v1").unwrap().unwrap_err();
        assert_eq!(e.column, "B");
        assert_eq!(e.partial.definitions().len(), 2);
        assert_eq!(
            PrinterColumns::of_crd(&crd, "v2").unwrap().unwrap(),
            PrinterColumns::default_columns()
        );
        assert!(PrinterColumns::of_crd(&crd, "v3").is_none());
    }
}
