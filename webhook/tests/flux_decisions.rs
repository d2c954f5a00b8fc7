//! The decisions on HelmRelease reviews: the `--flux-post-renderer` flag, W2 first, the
//! deployment's levels.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::path::Path;

use std::time::Instant;

use serde_json::{Value, json};
use styrmin_webhook::admission::{AdmissionRequest, GroupVersionKind};
use styrmin_webhook::decide::{DecideOptions, DecidedAt, FLUX_OVER_BUDGET_REASON, RequestOutcome};
use styrmin_webhook::helm_release::OVER_BUDGET_WARNING;
use styrmin_webhook::policy_file::parse_policy;
use styrmin_webhook::view::View;
use support::patched::apply;
use support::review::{self, decide};

mod support;

/// With the flag on, now.
fn decide_on(view: &View, request: &AdmissionRequest) -> styrmin_webhook::decide::Decision {
    review::decide_with(view, request, &ON, DecidedAt::now())
}

const POLICY: &str = "
cluster: {ingress_class: contour}
environments:
  prod: {dedicated_ingress: {}}
  stage: {ingress_class: haproxy}
  blank: {ingress_class: ''}
deployments:
  web1: {environment: stage}
  web2: {environment: prod}
  web3: {environment: blank}
  ctl9: {environment: prod, role: ingress-controller, phase: DELETING}
";

const ON: DecideOptions = DecideOptions {
    flux_post_renderer: true,
    stuck_deleting_after: styrmin_webhook::decide::STUCK_DELETING_AFTER,
};

fn view() -> View {
    parse_policy(Path::new("policy.yaml"), POLICY).unwrap()
}

/// A HelmRelease review: the request's `kind` names it too.
fn request(
    operation: &str,
    namespace: &str,
    object: Value,
    old: Option<Value>,
) -> AdmissionRequest {
    let mut request = review::request(operation, namespace, object, old);
    request.kind = GroupVersionKind {
        group: "helm.toolkit.fluxcd.io".into(),
        version: "v2".into(),
        kind: "HelmRelease".into(),
    };
    request
}

fn release() -> Value {
    json!({
        "apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
        "metadata": {"name": "web"},
        "spec": {"interval": "10m", "chart": {"spec": {"chart": "podinfo", "sourceRef": {"kind": "HelmRepository", "name": "podinfo"}}}},
    })
}

fn patch_text(object: &Value) -> &str {
    object["spec"]["postRenderers"][0]["kustomize"]["patches"][0]["patch"]
        .as_str()
        .unwrap()
}

#[test]
fn off_by_default() {
    let d = decide(&view(), &request("CREATE", "styrmin-web1", release(), None));
    assert_eq!(d.outcome, RequestOutcome::Allowed);
    assert!(d.patch.is_empty());
}

#[test]
fn create_and_update_get_the_deployments_rules() {
    let v = view();
    let d = decide_on(&v, &request("CREATE", "styrmin-web1", release(), None));
    assert_eq!(d.outcome, RequestOutcome::Patched);
    let out = apply(&release(), &d.patch);
    assert!(patch_text(&out).contains("ingressClassName: \"haproxy\""));
    // R8: the result gets no patch, also on an UPDATE that changes nothing in spec.
    let again = decide_on(
        &v,
        &request("UPDATE", "styrmin-web1", out.clone(), Some(out.clone())),
    );
    assert!(again.patch.is_empty(), "{:?}", again.patch);
    // The deployment moves to a dedicated environment's rules: refreshed on UPDATE.
    let d = decide_on(
        &v,
        &request("UPDATE", "styrmin-web2", out.clone(), Some(out.clone())),
    );
    assert_eq!(d.outcome, RequestOutcome::Patched);
    let refreshed = apply(&out, &d.patch);
    assert!(patch_text(&refreshed).contains("ingressClassName: null"));
    assert_eq!(
        refreshed["spec"]["postRenderers"].as_array().unwrap().len(),
        1
    );
}

/// Warn: the HelmRelease is let through without the post-renderer, with a warning that
/// says what would be added and what decided it.
#[test]
fn warn_says_it_would_add_the_post_renderer() {
    let v = parse_policy(
        Path::new("policy.yaml"),
        &POLICY.replace(
            "web1: {environment: stage}",
            "web1: {environment: stage, enforcement_mode: warn}",
        ),
    )
    .unwrap();
    let d = decide_on(&v, &request("CREATE", "styrmin-web1", release(), None));
    assert_eq!(d.outcome, RequestOutcome::WouldPatch, "{d:?}");
    assert!(d.patch.is_empty());
    assert_eq!(d.reason, "warn: would add the flux post-renderer");
    assert!(d.settings.is_some(), "the log names the settings");
    assert_eq!(
        d.warnings,
        vec![
            "would add Styrmin's post-renderer to this HelmRelease (class:haproxy), decided by environment stage"
                .to_owned()
        ]
    );
}

#[test]
fn r5_removes_ours() {
    let v = view();
    let with_ours = apply(
        &release(),
        &decide_on(&v, &request("CREATE", "styrmin-web1", release(), None)).patch,
    );
    let d = decide_on(
        &v,
        &request(
            "UPDATE",
            "styrmin-web3",
            with_ours.clone(),
            Some(with_ours.clone()),
        ),
    );
    assert_eq!(d.outcome, RequestOutcome::Patched);
    assert_eq!(
        apply(&with_ours, &d.patch)["spec"]["postRenderers"],
        json!([])
    );
    let d = decide_on(&v, &request("CREATE", "styrmin-web3", release(), None));
    assert!(d.patch.is_empty());
}

#[test]
fn w2_denial_stays_a_denial_past_the_flux_deadline() {
    let late = DecidedAt::now_within(Instant::now());
    let d = review::decide_with(
        &view(),
        &request("CREATE", "styrmin-web2", release(), None),
        &ON,
        late,
    );
    assert_eq!(d.outcome, RequestOutcome::Denied);
    let mut with_list = release();
    with_list["spec"]["postRenderers"] =
        json!([{"kustomize": {"images": [{"name": "nginx", "newTag": "1.27"}]}}]);
    let d = review::decide_with(
        &view(),
        &request("CREATE", "styrmin-web1", with_list, None),
        &ON,
        late,
    );
    assert_eq!(d.outcome, RequestOutcome::Allowed);
    assert!(d.patch.is_empty());
    assert!(d.flux_over_budget);
    assert_eq!(d.reason, FLUX_OVER_BUDGET_REASON);
    assert_eq!(d.warnings, vec![OVER_BUDGET_WARNING.to_owned()]);
}

#[test]
fn w2_denial_stays_a_denial() {
    let d = decide_on(&view(), &request("CREATE", "styrmin-web2", release(), None));
    assert_eq!(d.outcome, RequestOutcome::Denied);
    assert!(d.patch.is_empty());
}

#[test]
fn not_in_a_styrmin_namespace_or_not_create_update() {
    let v = view();
    let d = decide_on(&v, &request("CREATE", "flux-system", release(), None));
    assert_eq!(d.outcome, RequestOutcome::Allowed);
    assert!(d.patch.is_empty());
    let d = decide_on(
        &v,
        &request("DELETE", "styrmin-web1", Value::Null, Some(release())),
    );
    assert!(d.patch.is_empty());
}
