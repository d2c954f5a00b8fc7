//! What the decision tests send: AdmissionRequests as the API server builds them, around the
//! objects the decisions are about (an Ingress, a StyrminDeployment, a HelmRelease).

use serde_json::{Value, json};

use super::{Decision, decide};
use crate::admission::AdmissionRequest;
use crate::view::View;

/// A request with an empty `kind`: the object's own `apiVersion` and `kind` say what it is.
pub(crate) fn request(
    operation: &str,
    namespace: &str,
    object: Value,
    old_object: Option<Value>,
) -> AdmissionRequest {
    serde_json::from_value(json!({
        "uid": "u-1",
        "kind": {"group": "", "version": "", "kind": ""},
        "namespace": namespace,
        "operation": operation,
        "object": object,
        "oldObject": old_object,
    }))
    .expect("request")
}

/// The decision, with the default options, on a CREATE of `object` in `namespace`.
pub(crate) fn create(view: &View, namespace: &str, object: Value) -> Decision {
    decide(view, &request("CREATE", namespace, object, None))
}

/// The decision, with the default options, on an UPDATE from `old` to `new` in `namespace`.
pub(crate) fn update(view: &View, namespace: &str, new: Value, old: Value) -> Decision {
    decide(view, &request("UPDATE", namespace, new, Some(old)))
}

/// An Ingress with one rule, its `spec.ingressClassName` and its class annotation (next to
/// an annotation that must be kept).
pub(crate) fn ingress(
    api_version: &str,
    class_name: Option<&str>,
    annotation: Option<&str>,
) -> Value {
    let mut object = json!({
        "apiVersion": api_version, "kind": "Ingress",
        "metadata": {"name": "web"},
        "spec": {"rules": [{"host": "a.example.com"}]},
    });
    if let Some(class) = class_name {
        object["spec"]["ingressClassName"] = json!(class);
    }
    if let Some(class) = annotation {
        object["metadata"]["annotations"] =
            json!({ingress_rules::CLASS_ANNOTATION: class, "other": "kept"});
    }
    object
}

/// A RUNNING StyrminDeployment of `environment` in this `role`, deploying `image`.
pub(crate) fn styrmin_deployment(environment: &str, role: &str, image: &str) -> Value {
    json!({
        "apiVersion": "styrmin.io/v1alpha1", "kind": "StyrminDeployment",
        "metadata": {"name": "app", "finalizers": []},
        "spec": {"environmentId": environment, "role": role, "image": image},
        "status": {"phase": "RUNNING"},
    })
}

/// A HelmRelease of API `version` for this version of its chart.
pub(crate) fn helm_release(version: &str, chart_version: &str) -> Value {
    json!({
        "apiVersion": format!("helm.toolkit.fluxcd.io/{version}"), "kind": "HelmRelease",
        "metadata": {"name": "app"},
        "spec": {"chart": {"spec": {"chart": "web", "version": chart_version}}},
    })
}
