//! What the tests of every decision that answers with a JSON patch read: the object after
//! the patch, and an Ingress's two class fields.

use json_patch::PatchOperation;
use serde_json::Value;

/// `object` after the RFC 6902 operations `ops`.
pub fn apply(object: &Value, ops: &[PatchOperation]) -> Value {
    let mut out = object.clone();
    json_patch::patch(&mut out, ops).expect("the patch applies");
    out
}

/// An Ingress's `spec.ingressClassName` and class annotation.
pub fn classes(object: &Value) -> (Option<&str>, Option<&str>) {
    (
        object
            .pointer("/spec/ingressClassName")
            .and_then(Value::as_str),
        object
            .pointer("/metadata/annotations/kubernetes.io~1ingress.class")
            .and_then(Value::as_str),
    )
}
