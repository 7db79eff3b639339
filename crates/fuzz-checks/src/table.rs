//! Fuzz target `table`: server-side Tables printed from the upstream's objects — every
//! built-in kind's printer ([`TablePrinter::for_kind`]) and a custom resource's printer
//! columns read from its CRD ([`PrinterColumns::of_crd`], whose JSONPaths come from the
//! upstream: [`kube_wire::jsonpath`]) — as the cache answers `kubectl get`.
//!
//! Input: one or two JSON documents: an object, or a CustomResourceDefinition followed by an
//! object of it (each is also printed by every built-in printer).
//!
//! Invariants: printing never panics, whatever the object holds (ages from any timestamp,
//! counts from any number); a row has one cell per column; a JSONPath that parses evaluates
//! without panicking; a Table and its row serialise as JSON.

use kube_wire::jsonpath::JsonPath;
use kube_wire::table::{PrinterColumns, TablePrinter, printed_kinds};
use serde_json::Value;
use std::sync::Arc;

/// "Now" for ages: a fixed instant (2025-01-01T00:00:00Z), so a crash reproduces.
const NOW: i64 = 1_735_689_600;

/// The check (see the module doc).
pub fn check(data: &[u8]) {
    let values: Vec<Value> = serde_json::Deserializer::from_slice(data)
        .into_iter::<Value>()
        .take(2)
        .map_while(Result::ok)
        .collect();
    let Some(first) = values.first() else {
        return;
    };
    let object = values.get(1).unwrap_or(first);
    // Every built-in printer, and the default one a kind without a printer of its own gets.
    for (group, kind) in printed_kinds().iter().chain(&[("example.com", "Widget")]) {
        print(&TablePrinter::for_kind(group, kind), object);
    }
    let versions = first
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    for v in versions {
        let Some(version) = v.get("name").and_then(Value::as_str) else {
            continue;
        };
        if let Some(Ok(columns)) = PrinterColumns::of_crd(first, version) {
            print(&TablePrinter::crd(Arc::new(columns)), object);
        }
        let columns = v
            .get("additionalPrinterColumns")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        for c in columns {
            if let Some(Ok(path)) = c
                .get("jsonPath")
                .and_then(Value::as_str)
                .map(JsonPath::parse)
            {
                let _ = path.find(object);
            }
        }
    }
}

fn print(printer: &TablePrinter, object: &Value) {
    let columns = printer.column_definitions();
    let cells = printer.row_cells(object, NOW);
    let (Some(columns), Some(cells)) = (columns.as_array(), cells.as_array()) else {
        panic!("columns {columns} and cells {cells} are not arrays");
    };
    assert_eq!(
        cells.len(),
        columns.len(),
        "cells {cells:?} for columns {columns:?}"
    );
    let json = kube_wire::table::to_go_json(&Value::Array(cells.clone()));
    serde_json::from_slice::<Value>(&json).expect("a row serialises as JSON");
}
