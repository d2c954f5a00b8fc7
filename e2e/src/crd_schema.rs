//! A small structural validator of a CRD's OpenAPI v3 schema (no `jsonschema` crate), for
//! objects of other projects' kinds the repository renders (HelmRelease, ServiceMonitor,
//! PrometheusRule, Certificate, ...): types, `enum`, `required`, `minLength`/`maxLength`,
//! `items`, `additionalProperties`, `x-kubernetes-int-or-string`, and unknown fields rejected
//! except under `x-kubernetes-preserve-unknown-fields` (the API server's pruning would drop them
//! silently). Not checked: `pattern` and `format` (no regex engine here) and the CEL rules
//! (`x-kubernetes-validations`).

use std::path::Path;

use serde_json::Value;

use crate::split_documents;

/// The `openAPIV3Schema` of version `version` of the CRD in `path` (which must be served).
pub fn crd_version_schema(path: &Path, version: &str) -> Value {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("reading the CRD {}: {e}", path.display()));
    let crd = split_documents(&text)
        .into_iter()
        .map(|d| d.value())
        .find(|v| v["kind"] == "CustomResourceDefinition")
        .unwrap_or_else(|| panic!("{}: no CRD document", path.display()));
    let found = crd["spec"]["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|v| v["name"] == version)
        .unwrap_or_else(|| panic!("{}: no version {version}", path.display()));
    assert_eq!(
        found["served"],
        true,
        "{}: {version} is not served",
        path.display()
    );
    found["schema"]["openAPIV3Schema"].clone()
}

/// Every way `value` breaks `schema`, as `path: what` (empty: valid).
pub fn schema_errors(schema: &Value, value: &Value) -> Vec<String> {
    let mut errors = Vec::new();
    validate(schema, value, "", &mut errors);
    errors
}

fn validate(schema: &Value, value: &Value, path: &str, errors: &mut Vec<String>) {
    let preserve = schema["x-kubernetes-preserve-unknown-fields"] == true;
    if schema["x-kubernetes-int-or-string"] == true {
        if !(value.is_string() || value.is_i64() || value.is_u64()) {
            errors.push(format!(
                "{path}: expected an integer or a string, got {value}"
            ));
        }
        return;
    }
    let ty = schema["type"].as_str();
    let type_ok = match ty {
        Some("object") => value.is_object(),
        Some("array") => value.is_array(),
        Some("string") => value.is_string(),
        Some("integer") => value.is_i64() || value.is_u64(),
        Some("number") => value.is_number(),
        Some("boolean") => value.is_boolean(),
        _ => true,
    };
    if !type_ok {
        errors.push(format!(
            "{path}: expected {}, got {value}",
            ty.unwrap_or("?")
        ));
        return;
    }
    if let Some(allowed) = schema["enum"].as_array()
        && !allowed.contains(value)
    {
        errors.push(format!("{path}: {value} is not one of {allowed:?}"));
    }
    if let Some(s) = value.as_str() {
        let len = s.chars().count() as u64;
        if schema["maxLength"].as_u64().is_some_and(|max| len > max) {
            errors.push(format!("{path}: longer than maxLength"));
        }
        if schema["minLength"].as_u64().is_some_and(|min| len < min) {
            errors.push(format!("{path}: shorter than minLength"));
        }
    }
    if let Some(items) = value.as_array() {
        for (i, item) in items.iter().enumerate() {
            validate(&schema["items"], item, &format!("{path}[{i}]"), errors);
        }
    }
    if let Some(object) = value.as_object() {
        for required in schema["required"].as_array().into_iter().flatten() {
            let key = required.as_str().unwrap_or_default();
            if !object.contains_key(key) {
                errors.push(format!("{path}: missing required field {key}"));
            }
        }
        // `metadata` is `type: object` only: the API server validates it itself.
        if path == ".metadata" {
            return;
        }
        for (key, field) in object {
            let child = format!("{path}.{key}");
            if let Some(property) = schema["properties"].get(key) {
                validate(property, field, &child, errors);
            } else if schema["additionalProperties"].is_object() {
                validate(&schema["additionalProperties"], field, &child, errors);
            } else if !preserve {
                errors.push(format!("{child}: unknown field"));
            }
        }
    }
}
