//! From the rule crate's field changes to an RFC 6902 JSON patch of the object as sent.

use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, PatchOperation, RemoveOperation, ReplaceOperation};
use serde_json::{Value, json};
use styrmin_ingress_rules::{CLASS_ANNOTATION, ClassFields, FieldChange};

use crate::admission::{FieldText, KubeObject};

/// `add` of `value` at the path of `tokens` (each escaped as RFC 6901 says).
pub(crate) fn add<'t>(tokens: impl IntoIterator<Item = &'t str>, value: Value) -> PatchOperation {
    PatchOperation::Add(AddOperation {
        path: PointerBuf::from_tokens(tokens),
        value,
    })
}

/// `replace` of the value at the path of `tokens` with `value`.
pub(crate) fn replace<'t>(
    tokens: impl IntoIterator<Item = &'t str>,
    value: Value,
) -> PatchOperation {
    PatchOperation::Replace(ReplaceOperation {
        path: PointerBuf::from_tokens(tokens),
        value,
    })
}

/// `remove` of the path of `tokens`.
pub(crate) fn remove<'t>(tokens: impl IntoIterator<Item = &'t str>) -> PatchOperation {
    PatchOperation::Remove(RemoveOperation {
        path: PointerBuf::from_tokens(tokens),
    })
}

fn class_value(value: &Value) -> Option<String> {
    match value {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        // The API server has type-checked the object; keep anything else visible as "set".
        other => Some(other.to_string()),
    }
}

/// The class fields of an Ingress object (`null` counts as absent).
pub fn class_fields(object: &Value) -> ClassFields {
    ClassFields {
        ingress_class_name: object
            .pointer("/spec/ingressClassName")
            .and_then(class_value),
        class_annotation: object
            .get("metadata")
            .and_then(|m| m.get("annotations"))
            .and_then(|a| a.get(CLASS_ANNOTATION))
            .and_then(class_value),
    }
}

/// The class fields of the object of a review (`null` counts as absent).
pub fn object_class_fields(object: &KubeObject) -> ClassFields {
    let metadata = object.metadata();
    ClassFields {
        ingress_class_name: object
            .spec
            .as_object()
            .and_then(|spec| spec.ingress_class_name.as_ref())
            .and_then(FieldText::as_class),
        class_annotation: metadata
            .and_then(|m| m.annotations.as_object())
            .and_then(|a| a.class.as_ref())
            .and_then(FieldText::as_class),
    }
}

/// What the patch of an Ingress's class fields depends on: which of its containers are JSON
/// objects, and which of the two fields are there (`null` included).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClassFieldsShape {
    pub spec_is_object: bool,
    pub class_name_present: bool,
    pub metadata_is_object: bool,
    pub annotations_is_object: bool,
    pub annotation_present: bool,
}

impl ClassFieldsShape {
    pub fn of_value(object: &Value) -> Self {
        let spec = object.get("spec").filter(|s| s.is_object());
        let metadata = object.get("metadata").filter(|m| m.is_object());
        let annotations = metadata
            .and_then(|m| m.get("annotations"))
            .filter(|a| a.is_object());
        ClassFieldsShape {
            spec_is_object: spec.is_some(),
            class_name_present: spec.and_then(|s| s.get("ingressClassName")).is_some(),
            metadata_is_object: metadata.is_some(),
            annotations_is_object: annotations.is_some(),
            annotation_present: annotations.and_then(|a| a.get(CLASS_ANNOTATION)).is_some(),
        }
    }

    pub fn of_object(object: &KubeObject) -> Self {
        let spec = object.spec.as_object();
        let metadata = object.metadata();
        let annotations = metadata.and_then(|m| m.annotations.as_object());
        ClassFieldsShape {
            spec_is_object: spec.is_some(),
            class_name_present: spec.is_some_and(|s| s.ingress_class_name.is_some()),
            metadata_is_object: metadata.is_some(),
            annotations_is_object: annotations.is_some(),
            annotation_present: annotations.is_some_and(|a| a.class.is_some()),
        }
    }
}

/// The JSON patch operations that make `changes` to `object`. Empty when there are none.
pub fn build_patch(object: &Value, changes: &[FieldChange]) -> Vec<PatchOperation> {
    build_class_patch(ClassFieldsShape::of_value(object), changes)
}

/// The JSON patch operations that make `changes` to an object of this shape.
pub fn build_class_patch(shape: ClassFieldsShape, changes: &[FieldChange]) -> Vec<PatchOperation> {
    let mut ops = Vec::with_capacity(changes.len());
    let annotation_path = ["metadata", "annotations", CLASS_ANNOTATION];
    for change in changes {
        match change {
            FieldChange::SetClassName(class) => {
                if shape.spec_is_object {
                    ops.push(add(["spec", "ingressClassName"], json!(class)));
                } else {
                    ops.push(add(["spec"], json!({"ingressClassName": class})));
                }
            }
            FieldChange::RemoveClassName => {
                // Only when the key is there: `remove` of a missing path fails the whole patch.
                if shape.class_name_present {
                    ops.push(remove(["spec", "ingressClassName"]));
                }
            }
            FieldChange::SetClassAnnotation(class) => {
                if !shape.metadata_is_object {
                    ops.push(add(
                        ["metadata"],
                        json!({"annotations": {CLASS_ANNOTATION: class}}),
                    ));
                } else if !shape.annotations_is_object {
                    // Absent or null: add the whole map.
                    ops.push(add(
                        ["metadata", "annotations"],
                        json!({CLASS_ANNOTATION: class}),
                    ));
                } else {
                    ops.push(add(annotation_path, json!(class)));
                }
            }
            FieldChange::RemoveClassAnnotation => {
                if shape.annotation_present {
                    ops.push(remove(annotation_path));
                }
            }
        }
    }
    ops
}

#[cfg(test)]
pub(crate) mod tests {
    use rstest::rstest;
    use styrmin_ingress_rules::example_targets::{dedicated, shared};
    use styrmin_ingress_rules::{IngressTarget, enforce};

    use super::*;

    /// `object` after the RFC 6902 operations `ops` (the flux tests read it too).
    pub(crate) fn apply(object: &Value, ops: &[PatchOperation]) -> Value {
        let mut out = object.clone();
        json_patch::patch(&mut out, ops).expect("the patch applies");
        out
    }

    /// The operations as they go on the wire.
    pub(crate) fn wire(ops: &[PatchOperation]) -> Value {
        serde_json::to_value(ops).expect("operations serialize")
    }

    fn ingress(metadata: Value, spec: Option<Value>) -> Value {
        let mut object =
            json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": metadata});
        if let Some(spec) = spec {
            object["spec"] = spec;
        }
        object
    }

    #[test]
    fn pointer_tokens_are_escaped() {
        let op = remove(["metadata", "annotations", "a~b/c"]);
        assert_eq!(
            wire(&[op]),
            json!([{"op": "remove", "path": "/metadata/annotations/a~0b~1c"}])
        );
    }

    #[rstest]
    #[case::r3_no_annotations_map(dedicated(), ingress(json!({"name": "x"}), Some(json!({"ingressClassName": "nginx", "rules": []}))))]
    #[case::r3_null_annotations(dedicated(), ingress(json!({"name": "x", "annotations": null}), Some(json!({}))))]
    #[case::r3_other_annotations_kept(dedicated(), ingress(json!({"name": "x", "annotations": {"a/b": "1", "kubernetes.io/ingress.class": "nginx"}}), Some(json!({"rules": []}))))]
    #[case::r3_null_class_name(dedicated(), ingress(json!({"name": "x"}), Some(json!({"ingressClassName": null}))))]
    #[case::r4_no_spec(shared("nginx"), ingress(json!({"name": "x"}), None))]
    #[case::r4_null_spec(shared("nginx"), ingress(json!({"name": "x"}), Some(Value::Null)))]
    #[case::r4_no_metadata(shared("nginx"), json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "spec": {}}))]
    #[case::r4_overwrites(shared("on"), ingress(json!({"annotations": {"kubernetes.io/ingress.class": "traefik"}}), Some(json!({"ingressClassName": "haproxy"}))))]
    #[case::r4_tilde_and_slash_in_other_keys(shared("nginx"), ingress(json!({"annotations": {"x~y/z": "1"}}), Some(json!({}))))]
    fn patch_applies_and_gives_the_rules_result(
        #[case] target: IngressTarget,
        #[case] object: Value,
    ) {
        let out = enforce(&target, &class_fields(&object), None).unwrap();
        let ops = build_patch(&object, &out.changes);
        assert!(!ops.is_empty());
        let patched = apply(&object, &ops);
        assert_eq!(class_fields(&patched), out.fields, "{ops:?}");
        // R7: nothing but the two class fields changed.
        let strip = |mut v: Value| {
            if let Some(spec) = v.get_mut("spec").and_then(Value::as_object_mut) {
                spec.remove("ingressClassName");
            }
            if let Some(annotations) = v
                .pointer_mut("/metadata/annotations")
                .and_then(Value::as_object_mut)
            {
                annotations.remove(CLASS_ANNOTATION);
            }
            v
        };
        let before = strip(object.clone());
        let after = strip(patched.clone());
        for key in ["apiVersion", "kind"] {
            assert_eq!(before[key], after[key]);
        }
        for (key, value) in before
            .pointer("/metadata/annotations")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            assert_eq!(after["metadata"]["annotations"][key], *value);
        }
        if let Some(rules) = before.pointer("/spec/rules") {
            assert_eq!(after.pointer("/spec/rules"), Some(rules));
        }
        // R8: a second pass has nothing to do.
        let again = enforce(&target, &class_fields(&patched), None).unwrap();
        assert!(build_patch(&patched, &again.changes).is_empty());
    }

    #[test]
    fn remove_only_when_present() {
        let object = ingress(json!({}), Some(json!({})));
        assert!(build_patch(&object, &[FieldChange::RemoveClassName]).is_empty());
        assert!(build_patch(&object, &[FieldChange::RemoveClassAnnotation]).is_empty());
        let object = ingress(
            json!({"annotations": {CLASS_ANNOTATION: "a"}}),
            Some(json!({"ingressClassName": "a"})),
        );
        let ops = build_patch(
            &object,
            &[
                FieldChange::RemoveClassName,
                FieldChange::RemoveClassAnnotation,
            ],
        );
        assert_eq!(
            wire(&ops),
            json!([
                {"op": "remove", "path": "/spec/ingressClassName"},
                {"op": "remove", "path": "/metadata/annotations/kubernetes.io~1ingress.class"},
            ])
        );
        assert_eq!(class_fields(&apply(&object, &ops)), ClassFields::default());
    }

    #[test]
    fn absent_annotations_are_added_as_a_whole_map() {
        let object = ingress(json!({"name": "x"}), Some(json!({})));
        let ops = build_patch(
            &object,
            &[FieldChange::SetClassAnnotation("traefik".into())],
        );
        assert_eq!(
            wire(&ops),
            json!([
                {"op": "add", "path": "/metadata/annotations", "value": {"kubernetes.io/ingress.class": "traefik"}}
            ])
        );
    }
}
