//! What the decision tests send: AdmissionRequests as the API server builds them, around the
//! objects the decisions are about (an Ingress, a StyrminDeployment, a HelmRelease).

use serde_json::{Value, json};

use styrmin_webhook::admission::AdmissionRequest;
use styrmin_webhook::decide::{Admission, DecideOptions, DecidedAt, Decision};
use styrmin_webhook::view::View;

/// A request with an empty `kind`: the object's own `apiVersion` and `kind` say what it is.
pub fn request(
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

/// The decision on `request`, now, with the default options.
pub fn decide(view: &View, request: &AdmissionRequest) -> Decision {
    decide_with(view, request, &DecideOptions::default(), DecidedAt::now())
}

/// The decision on `request` with these options, at this time.
pub fn decide_with(
    view: &View,
    request: &AdmissionRequest,
    options: &DecideOptions,
    at: DecidedAt,
) -> Decision {
    styrmin_webhook::decide::decide(view, &Admission::new(request.clone()), options, at)
}

/// The decision, with the default options, on a CREATE of `object` in `namespace`.
pub fn create(view: &View, namespace: &str, object: Value) -> Decision {
    decide(view, &request("CREATE", namespace, object, None))
}

/// The decision, with the default options, on an UPDATE from `old` to `new` in `namespace`.
pub fn update(view: &View, namespace: &str, new: Value, old: Value) -> Decision {
    decide(view, &request("UPDATE", namespace, new, Some(old)))
}

/// An Ingress with one rule, its `spec.ingressClassName` and its class annotation (next to
/// an annotation that must be kept).
pub fn ingress(api_version: &str, class_name: Option<&str>, annotation: Option<&str>) -> Value {
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
            json!({styrmin_ingress_rules::CLASS_ANNOTATION: class, "other": "kept"});
    }
    object
}

/// A RUNNING StyrminDeployment of `environment` in this `role`, deploying `image`.
pub fn styrmin_deployment(environment: &str, role: &str, image: &str) -> Value {
    json!({
        "apiVersion": "styrmin.io/v1alpha1", "kind": "StyrminDeployment",
        "metadata": {"name": "app", "finalizers": []},
        "spec": {"environmentId": environment, "role": role, "image": image},
        "status": {"phase": "RUNNING"},
    })
}

/// A HelmRelease of API `version` for this version of its chart.
pub fn helm_release(version: &str, chart_version: &str) -> Value {
    json!({
        "apiVersion": format!("helm.toolkit.fluxcd.io/{version}"), "kind": "HelmRelease",
        "metadata": {"name": "app"},
        "spec": {"chart": {"spec": {"chart": "web", "version": chart_version}}},
    })
}
