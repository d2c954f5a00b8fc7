//! Tests written for mutants of the decision code that `cargo mutants` found alive
//! (MUTANTS.md): each pins down behaviour that the unit tests did not observe.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::path::Path;

use ingress_rules::SettingsSource;
use serde_json::{Value, json};
use styrmin_webhook::admission::{AdmissionRequest, parse_review};
use styrmin_webhook::decide::{DecideOptions, Outcome, ReviewKind, decide, decide_with};
use styrmin_webhook::policy_file::parse_policy;
use styrmin_webhook::view::View;

const POLICY: &str = "
cluster: {ingress_class: contour}
environments:
  stage: {ingress_class: haproxy}
deployments:
  web2: {environment: stage}
  rec1: {environment: stage, last_deployed: {ingress_class: nginx}}
";

fn view(extra: &str) -> View {
    parse_policy(Path::new("policy.yaml"), &format!("{POLICY}{extra}")).unwrap()
}

fn request(namespace: &str, request_kind: Option<Value>, object: Value) -> AdmissionRequest {
    let mut request = json!({
        "uid": "u-1",
        "kind": {"group": "networking.k8s.io", "version": "v1", "kind": "Ingress"},
        "namespace": namespace,
        "operation": "CREATE",
        "object": object,
    });
    if let Some(kind) = request_kind {
        request["requestKind"] = kind;
    }
    let review =
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request});
    parse_review(&serde_json::to_vec(&review).unwrap())
        .unwrap()
        .request
}

fn ingress() -> Value {
    json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
        "metadata": {"name": "web"}, "spec": {"rules": []},
    })
}

fn helm_release() -> Value {
    json!({
        "apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
        "metadata": {"name": "web"},
        "spec": {"chart": {"spec": {"chart": "web"}}},
    })
}

#[test]
fn metric_label_names() {
    for (kind, name) in [
        (ReviewKind::Ingress, "Ingress"),
        (ReviewKind::StyrminDeployment, "StyrminDeployment"),
        (ReviewKind::HelmRelease, "HelmRelease"),
        (ReviewKind::Other, "other"),
    ] {
        assert_eq!(kind.as_str(), name);
    }
    for (outcome, name) in [
        (Outcome::Patched, "patched"),
        (Outcome::Conforming, "conforming"),
        (Outcome::Allowed, "allowed"),
        (Outcome::Denied, "denied"),
    ] {
        assert_eq!(outcome.as_str(), name);
    }
}

#[test]
fn r6_the_requested_kind_counts_only_for_an_object_of_kind_ingress() {
    let requested = json!({"group": "networking.k8s.io", "version": "v1", "kind": "Ingress"});
    // An Ingress in a version this webhook does not know, requested as an Ingress: an Ingress.
    let mut object = ingress();
    object["apiVersion"] = json!("networking.k8s.io/v2");
    let r = request("styrmin-web2", Some(requested.clone()), object);
    assert_eq!(ReviewKind::of(&r), ReviewKind::Ingress);
    // Anything else is not, whatever was requested.
    let mut object = ingress();
    object["kind"] = json!("IngressClass");
    let r = request("styrmin-web2", Some(requested), object);
    assert_eq!(ReviewKind::of(&r), ReviewKind::Other);
}

#[test]
fn a_patch_decision_answers_with_the_patch() {
    let decision = decide(&view(""), &request("styrmin-web2", None, ingress()));
    assert_eq!(decision.outcome, Outcome::Patched);
    let response = decision.into_response("u-1");
    assert!(response.allowed);
    assert_eq!(response.patch_type, Some("JSONPatch"));
    assert!(response.patch.is_some());
}

#[test]
fn decisions_name_the_settings_they_applied() {
    // W5: the record when there is one, else the levels; the log's `settings` field.
    let decision = decide(&view(""), &request("styrmin-web2", None, ingress()));
    assert_eq!(decision.settings_source(), Some(SettingsSource::Levels));
    let decision = decide(&view(""), &request("styrmin-rec1", None, ingress()));
    assert_eq!(decision.settings_source(), Some(SettingsSource::Record));
    // R9 on Kubernetes 1.24: denied, and the log still names the settings.
    let decision = decide(
        &view("kubernetes_version: \"1.24\"\n"),
        &request("styrmin-web2", None, ingress()),
    );
    assert_eq!(decision.outcome, Outcome::Denied);
    assert_eq!(decision.settings_source(), Some(SettingsSource::Levels));
    // Not Styrmin's: no settings.
    let decision = decide(&view(""), &request("default", None, ingress()));
    assert_eq!(decision.settings_source(), None);
    // --flux-post-renderer, with a patch and (on Kubernetes 1.24, R9) with a warning only.
    let flux = DecideOptions {
        flux_post_renderer: true,
        ..DecideOptions::default()
    };
    let release = request("styrmin-web2", None, helm_release());
    let decision = decide_with(&view(""), &release, &flux);
    assert_eq!(decision.outcome, Outcome::Patched);
    assert_eq!(decision.settings_source(), Some(SettingsSource::Levels));
    let decision = decide_with(&view("kubernetes_version: \"1.24\"\n"), &release, &flux);
    assert!(decision.patch.is_empty());
    assert_eq!(decision.warnings.len(), 1);
    assert_eq!(decision.settings_source(), Some(SettingsSource::Levels));
}
