//! The decision table: W1 (with R3-R5, R8, R9), W2 and its never-deny cases, W4.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::path::Path;
use std::time::{Duration, Instant};

use rstest::rstest;
use serde_json::{Value, json};
use styrmin_ingress_rules::{AppliedSettings, ClassFields, NoClassWarning, SettingsSource};

use styrmin_webhook::decide::*;
use styrmin_webhook::policy_file::parse_policy;
use styrmin_webhook::view::View;
use support::patched::{apply, classes};
use support::review::{
    create, decide, decide_with, helm_release, ingress, request, styrmin_deployment, update,
};

mod support;

const POLICY: &str = "
cluster: {ingress_class: contour}
environments:
  prod: {ingress_class: nginx, dedicated_ingress: {}}
  stage: {ingress_class: haproxy}
  blank: {ingress_class: ''}
  winding: {dedicated_ingress: {}}
deployments:
  web1: {environment: prod}
  web2: {environment: stage}
  web3: {environment: stage, ingress_class: kong}
  web4: {environment: blank}
  web5: {environment: winding}
  ctl9: {environment: prod, role: ingress-controller, phase: DELETING}
  ctl8: {environment: stage, role: ingress-controller, phase: DELETING}
  ctl7: {environment: winding, role: ingress-controller, phase: RUNNING}
";

fn view() -> View {
    parse_policy(Path::new("policy.yaml"), POLICY).unwrap()
}

/// The view of a policy file with this text.
fn policy(text: &str) -> View {
    parse_policy(Path::new("p"), text).unwrap()
}

// W1: Ingress CREATE in each kind of namespace.
#[rstest]
#[case::r3_dedicated_env("styrmin-web1", None, None, (None, Some("traefik")))]
#[case::r3_removes_class_name("styrmin-web1", Some("nginx"), Some("nginx"), (None, Some("traefik")))]
#[case::r4_env_class("styrmin-web2", None, None, (Some("haproxy"), Some("haproxy")))]
#[case::r4_deployment_class("styrmin-web3", Some("haproxy"), None, (Some("kong"), Some("kong")))]
#[case::r4_unknown_deployment_gets_cluster("styrmin-nobody", None, Some("x"), (Some("contour"), Some("contour")))]
#[case::r5_keeps_chart_class("styrmin-web4", Some("chart"), None, (Some("chart"), None))]
#[case::r3_controller_namespace_too("styrmin-ctl9", None, None, (None, Some("traefik")))]
fn w1_ingress_gets_the_rules(
    #[case] namespace: &str,
    #[case] class_name: Option<&str>,
    #[case] annotation: Option<&str>,
    #[case] expected: (Option<&str>, Option<&str>),
) {
    let v = view();
    for api_version in [
        "networking.k8s.io/v1",
        "networking.k8s.io/v1beta1",
        "extensions/v1beta1",
    ] {
        for operation in ["CREATE", "UPDATE"] {
            let object = ingress(api_version, class_name, annotation);
            let old = (operation == "UPDATE").then(|| object.clone());
            let decision = decide(&v, &request(operation, namespace, object.clone(), old));
            assert!(decision.status.is_none(), "{decision:?}");
            let patched = apply(&object, &decision.patch);
            assert_eq!(classes(&patched), expected, "{api_version} {operation}");
            if annotation.is_some() {
                assert_eq!(patched["metadata"]["annotations"]["other"], "kept", "R7");
            }
            assert_eq!(patched["spec"]["rules"], object["spec"]["rules"], "R7");
            // R8: the patched object gets no patch.
            let again = decide(
                &v,
                &request(operation, namespace, patched.clone(), Some(patched)),
            );
            assert_eq!(again.outcome, RequestOutcome::Conforming);
            assert!(again.patch.is_empty());
        }
    }
}

#[test]
fn r8_conforming_ingress_gets_no_patch() {
    let d = create(
        &view(),
        "styrmin-web2",
        ingress("networking.k8s.io/v1", Some("haproxy"), Some("haproxy")),
    );
    assert_eq!(d.outcome, RequestOutcome::Conforming);
    let response = d.into_response("u-1");
    assert!(response.patch.is_none() && response.patch_type.is_none());
}

#[test]
fn w4_r5_no_class_is_a_warning() {
    let d = create(
        &view(),
        "styrmin-web4",
        ingress("networking.k8s.io/v1", None, None),
    );
    assert!(d.patch.is_empty());
    assert_eq!(d.warnings, vec![NoClassWarning::MESSAGE.to_owned()]);
    assert!(d.into_response("u").allowed);
}

#[test]
fn r9_old_kubernetes_denies_with_the_rule_message() {
    let v = policy("kubernetes_version: '1.26'\ncluster: {ingress_class: nginx}");
    let d = create(&v, "styrmin-a", ingress("networking.k8s.io/v1", None, None));
    assert_eq!(d.outcome, RequestOutcome::Denied);
    let status = d.status.unwrap();
    assert!(status.message.contains("1.27"), "{}", status.message);
    // R3 sets one field only: fine on 1.26.
    let v = policy("kubernetes_version: '1.26'\ncluster: {dedicated_ingress: {}}");
    let d = create(&v, "styrmin-a", ingress("networking.k8s.io/v1", None, None));
    assert_eq!(d.outcome, RequestOutcome::Patched);
}

/// R9 in warn: the Ingress is let through unchanged, with a warning that says it would be
/// denied and what decided the class; the log names the rule and the settings.
#[test]
fn r9_in_warn_allows_with_a_would_deny_warning() {
    let v = policy(
        "kubernetes_version: '1.26'\ncluster: {ingress_class: nginx, enforcement_mode: warn}",
    );
    let d = create(&v, "styrmin-a", ingress("networking.k8s.io/v1", None, None));
    assert_eq!(d.outcome, RequestOutcome::WouldDeny);
    assert!(d.patch.is_empty() && d.status.is_none(), "{d:?}");
    assert_eq!(d.warnings.len(), 1, "{:?}", d.warnings);
    let warning = &d.warnings[0];
    assert!(
        warning.starts_with("would deny (enforcement_mode warn): Kubernetes 1.26")
            && warning.contains("\"nginx\"")
            && warning.ends_with("decided by the cluster"),
        "{warning}"
    );
    assert_eq!(d.reason, "warn: would deny (R9)");
    assert_eq!(
        d.settings.as_ref().map(AppliedSettings::source),
        Some(SettingsSource::Levels)
    );
    assert!(d.into_response("u").allowed);
}

#[rstest]
#[case::not_managed("default")]
#[case::kube_system("kube-system")]
#[case::bare_prefix("styrmin-")]
#[case::similar_prefix("styrminweb1")]
fn w1_unmanaged_namespaces_are_never_touched(#[case] namespace: &str) {
    let d = create(
        &view(),
        namespace,
        ingress("networking.k8s.io/v1", Some("x"), None),
    );
    assert_eq!(d.outcome, RequestOutcome::Allowed);
    assert!(d.patch.is_empty() && d.status.is_none());
}

#[rstest]
#[case::delete("DELETE")]
#[case::connect("CONNECT")]
#[case::unknown("PATCH")]
fn other_operations_are_allowed_without_patch(#[case] operation: &str) {
    let object = ingress("networking.k8s.io/v1", Some("x"), None);
    let d = decide(
        &view(),
        &request(operation, "styrmin-web1", Value::Null, Some(object)),
    );
    assert_eq!(d.outcome, RequestOutcome::Allowed);
    assert!(d.patch.is_empty());
}

#[rstest]
#[case::ingress_route(json!({"apiVersion": "traefik.io/v1alpha1", "kind": "IngressRoute", "metadata": {}}))]
#[case::ingress_class(json!({"apiVersion": "networking.k8s.io/v1", "kind": "IngressClass", "metadata": {}}))]
#[case::foreign_ingress(json!({"apiVersion": "voyager.appscode.com/v1beta1", "kind": "Ingress", "metadata": {}}))]
#[case::http_route(json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute", "metadata": {}}))]
#[case::pod(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {}}))]
#[case::not_an_object(json!("text"))]
#[case::number(json!(42))]
fn r7_other_kinds_are_allowed_untouched(#[case] object: Value) {
    let d = create(&view(), "styrmin-web1", object);
    assert_eq!(d.outcome, RequestOutcome::Allowed);
    assert!(d.patch.is_empty());
}

#[test]
fn request_kind_and_kind_identify_an_ingress_without_type_fields() {
    let mut req = request(
        "CREATE",
        "styrmin-web1",
        json!({"metadata": {"name": "x"}, "spec": {}}),
        None,
    );
    req.kind = serde_json::from_value(
        json!({"group": "networking.k8s.io", "version": "v1", "kind": "Ingress"}),
    )
    .unwrap();
    req.request_kind = Some(
        serde_json::from_value(
            json!({"group": "extensions", "version": "v1beta1", "kind": "Ingress"}),
        )
        .unwrap(),
    );
    assert_eq!(ReviewKind::of(&req), ReviewKind::Ingress);
    assert_eq!(decide(&view(), &req).outcome, RequestOutcome::Patched);
}

#[test]
fn status_subresource_is_not_patched() {
    let mut req = request(
        "UPDATE",
        "styrmin-web1",
        ingress("networking.k8s.io/v1", Some("x"), None),
        None,
    );
    req.sub_resource = Some("status".into());
    assert_eq!(decide(&view(), &req).outcome, RequestOutcome::Allowed);
}

#[test]
fn r6_the_requested_kind_counts_only_for_an_object_of_kind_ingress() {
    let requested = json!({"group": "networking.k8s.io", "version": "v1", "kind": "Ingress"});
    let with_requested_kind = |object: Value| {
        let mut req = request("CREATE", "styrmin-web2", object, None);
        req.request_kind = Some(serde_json::from_value(requested.clone()).unwrap());
        req
    };
    // An Ingress in a version this webhook does not know, requested as an Ingress: an Ingress.
    let object = ingress("networking.k8s.io/v2", None, None);
    assert_eq!(
        ReviewKind::of(&with_requested_kind(object)),
        ReviewKind::Ingress
    );
    // Anything else is not, whatever was requested.
    let mut object = ingress("networking.k8s.io/v1", None, None);
    object["kind"] = json!("IngressClass");
    assert_eq!(
        ReviewKind::of(&with_requested_kind(object)),
        ReviewKind::Other
    );
}

#[test]
fn metric_labels_name_each_kind_and_outcome() {
    for (kind, name) in [
        (ReviewKind::Ingress, "Ingress"),
        (ReviewKind::StyrminDeployment, "StyrminDeployment"),
        (ReviewKind::HelmRelease, "HelmRelease"),
        (ReviewKind::Other, "other"),
    ] {
        assert_eq!(kind.as_str(), name);
    }
    for (outcome, name) in [
        (RequestOutcome::Patched, "patched"),
        (RequestOutcome::Conforming, "conforming"),
        (RequestOutcome::Allowed, "allowed"),
        (RequestOutcome::Denied, "denied"),
    ] {
        assert_eq!(outcome.as_str(), name);
    }
}

#[test]
fn a_patch_decision_answers_with_its_patch() {
    let decision = create(
        &view(),
        "styrmin-web2",
        ingress("networking.k8s.io/v1", None, None),
    );
    assert_eq!(decision.outcome, RequestOutcome::Patched);
    let response = decision.into_response("u-1");
    assert!(response.allowed);
    assert_eq!(response.patch_type, Some("JSONPatch"));
    assert!(response.patch.is_some());
}

// --- W2 ---

/// A CREATE of `object` in `namespace` is allowed (W2 denies nothing there).
#[track_caller]
fn assert_create_allowed(view: &View, namespace: &str, object: Value) {
    let d = create(view, namespace, object);
    assert_eq!(d.outcome, RequestOutcome::Allowed, "{namespace}: {d:?}");
}

fn assert_blocked(d: &Decision, environment: &str, controller: &str) {
    assert_eq!(d.outcome, RequestOutcome::Denied, "{d:?}");
    let status = d.status.as_ref().unwrap();
    assert_eq!(status.code, 403);
    assert!(
        status.message.contains(&format!("{environment:?}")),
        "{}",
        status.message
    );
    assert!(
        status.message.contains(&format!("{controller:?}")),
        "{}",
        status.message
    );
    assert!(
        status.message.contains("being removed"),
        "{}",
        status.message
    );
    assert!(
        status
            .message
            .contains("try again after the removal completes"),
        "{}",
        status.message
    );
    let response = d.clone().into_response("u-9");
    assert!(!response.allowed && response.patch.is_none());
}

#[test]
fn w2_blocks_create_of_a_styrmin_deployment() {
    let d = create(
        &view(),
        "styrmin-new",
        styrmin_deployment("prod", "application", "a:1"),
    );
    assert_blocked(&d, "prod", "ctl9");
}

#[test]
fn w2_blocks_spec_update_of_a_styrmin_deployment() {
    let old = styrmin_deployment("prod", "application", "a:1");
    let new = styrmin_deployment("prod", "application", "a:2");
    let d = update(&view(), "styrmin-web1", new, old);
    assert_blocked(&d, "prod", "ctl9");
}

#[rstest]
#[case::v2("v2")]
#[case::v2beta2("v2beta2")]
fn w2_blocks_helm_release_create_and_upgrade(#[case] version: &str) {
    let d = create(&view(), "styrmin-web1", helm_release(version, "1.0.0"));
    assert_blocked(&d, "prod", "ctl9");
    let d = update(
        &view(),
        "styrmin-web1",
        helm_release(version, "1.1.0"),
        helm_release(version, "1.0.0"),
    );
    assert_blocked(&d, "prod", "ctl9");
}

/// A deploy whose old and new objects both have no spec changes nothing W2 guards.
#[test]
fn w2_never_denies_an_update_without_a_spec_before_or_after() {
    let mut old = helm_release("v2", "1");
    old.as_object_mut().unwrap().remove("spec");
    let mut new = old.clone();
    new["metadata"]["labels"] = json!({"a": "b"});
    let d = update(&view(), "styrmin-web1", new, old);
    assert_eq!(d.outcome, RequestOutcome::Allowed, "{d:?}");
    assert_eq!(d.reason, "spec unchanged");
}

/// W2 in warn: the deployment's own level decides the mode, over its environment's.
#[test]
fn w2_a_deployment_in_warn_is_warned_in_an_enforcing_environment() {
    let v = policy(&POLICY.replace(
        "web1: {environment: prod}",
        "web1: {environment: prod, enforcement_mode: warn}",
    ));
    let old = styrmin_deployment("prod", "application", "a:1");
    let new = styrmin_deployment("prod", "application", "a:2");
    let d = update(&v, "styrmin-web1", new.clone(), old.clone());
    assert_eq!(d.outcome, RequestOutcome::WouldDeny, "{d:?}");
    assert!(d.status.is_none());
    assert_eq!(
        d.reason,
        "warn: would deny, dedicated ingress controller being removed (W2)"
    );
    assert!(
        d.warnings[0].starts_with(
            "would deny (enforcement_mode warn, decided by deployment.enforcement_mode)"
        ),
        "{:?}",
        d.warnings
    );
    // A deployment of the same environment without a mode of its own is still denied.
    let d = create(&v, "styrmin-new", new);
    assert_blocked(&d, "prod", "ctl9");
}

#[test]
fn w2_never_denies_delete() {
    let object = styrmin_deployment("prod", "application", "a:1");
    for (ns, obj) in [
        ("styrmin-web1", object),
        ("styrmin-web1", helm_release("v2", "1")),
    ] {
        let d = decide(&view(), &request("DELETE", ns, Value::Null, Some(obj)));
        assert_eq!(d.outcome, RequestOutcome::Allowed);
    }
}

#[test]
fn w2_never_denies_status_finalizers_or_metadata_changes() {
    let old = styrmin_deployment("prod", "application", "a:1");
    let mut new = old.clone();
    new["status"]["phase"] = json!("DEPLOYING");
    new["metadata"]["finalizers"] = json!(["styrmin.io/cleanup"]);
    new["metadata"]["labels"] = json!({"a": "b"});
    new["metadata"]["annotations"] = json!({"c": "d"});
    let d = update(&view(), "styrmin-web1", new, old);
    assert_eq!(d.outcome, RequestOutcome::Allowed, "{d:?}");
    let old = helm_release("v2", "1");
    let mut new = old.clone();
    new["status"] = json!({"conditions": []});
    let d = update(&view(), "styrmin-web1", new, old);
    assert_eq!(d.outcome, RequestOutcome::Allowed);
}

#[test]
fn w2_never_denies_the_controllers_own_objects() {
    // Its StyrminDeployment, by role, wherever it is.
    let own = styrmin_deployment("prod", "ingress-controller", "traefik:3");
    assert_create_allowed(&view(), "styrmin-ctl9", own.clone());
    let d = update(
        &view(),
        "styrmin-ctl9",
        own,
        styrmin_deployment("prod", "ingress-controller", "traefik:2"),
    );
    assert_eq!(d.outcome, RequestOutcome::Allowed);
    // Anything in its namespace.
    assert_create_allowed(&view(), "styrmin-ctl9", helm_release("v2", "1"));
    assert_create_allowed(
        &view(),
        "styrmin-ctl9",
        styrmin_deployment("prod", "application", "a"),
    );
}

#[test]
fn w2_never_denies_once_dedicated_ingress_is_off() {
    // stage: its controller is DELETING, but the environment has no dedicated ingress.
    assert_create_allowed(&view(), "styrmin-web2", helm_release("v2", "1"));
    assert_create_allowed(
        &view(),
        "styrmin-new",
        styrmin_deployment("stage", "application", "a"),
    );
    // The same policy with prod's dedicated ingress turned off.
    let off = POLICY.replace(
        "prod: {ingress_class: nginx, dedicated_ingress: {}}",
        "prod: {ingress_class: nginx}",
    );
    let v = policy(&off);
    assert_create_allowed(&v, "styrmin-web1", helm_release("v2", "1"));
}

#[test]
fn w2_cluster_dedicated_counts_for_the_environment() {
    let text = "cluster: {dedicated_ingress: {}}\ndeployments:\n  a: {environment: e}\n  c: {environment: e, role: ingress-controller, phase: DELETING}\n";
    let v = policy(text);
    let d = create(&v, "styrmin-a", helm_release("v2", "1"));
    assert_blocked(&d, "e", "c");
}

#[test]
fn w2_never_denies_in_unmanaged_namespaces() {
    for ns in ["default", "flux-system", "styrmin-"] {
        assert_create_allowed(&view(), ns, helm_release("v2", "1"));
        assert_create_allowed(&view(), ns, styrmin_deployment("prod", "application", "a"));
    }
}

#[rstest]
#[case::controller_running("styrmin-web5")]
#[case::environment_unknown("styrmin-stranger")]
fn w2_allows_when_no_controller_is_being_removed(#[case] namespace: &str) {
    assert_create_allowed(&view(), namespace, helm_release("v2", "1"));
}

#[test]
fn w2_other_groups_are_not_deployment_objects() {
    let mut object = helm_release("v2", "1");
    object["apiVersion"] = json!("example.com/v1");
    assert_create_allowed(&view(), "styrmin-web1", object);
    let mut object = styrmin_deployment("prod", "application", "a");
    object["apiVersion"] = json!("styrmin.io/v2");
    assert_create_allowed(&view(), "styrmin-web1", object);
}

#[test]
fn an_object_that_is_not_a_json_object_is_never_patched() {
    for object in [json!(1), json!("x"), json!([]), Value::Null] {
        let mut req = request("CREATE", "styrmin-web1", object, None);
        req.kind = serde_json::from_value(
            json!({"group": "networking.k8s.io", "version": "v1", "kind": "Ingress"}),
        )
        .unwrap();
        let d = decide(&view(), &req);
        assert_eq!(d.outcome, RequestOutcome::Allowed);
        assert!(d.patch.is_empty());
    }
}

/// prod (dedicated ingress on the cluster) with application web1 and its controller ctl9,
/// whose StyrminDeployment is held by kopf's finalizer since 08:00:00Z.
fn view_with_held_controller() -> View {
    use styrmin_webhook::crd::{StyrminCluster, StyrminDeployment};
    let cluster: StyrminCluster = serde_json::from_value(json!({
        "apiVersion": "styrmin.io/v1alpha1", "kind": "StyrminCluster",
        "metadata": {"name": "default"}, "spec": {"dedicatedIngress": {}}
    }))
    .unwrap();
    let deployment = |id: &str, role: &str, extra: Value| -> std::sync::Arc<StyrminDeployment> {
        let mut object = json!({
            "apiVersion": "styrmin.io/v1alpha1", "kind": "StyrminDeployment",
            "metadata": {"name": format!("styrmin-{id}"), "namespace": format!("styrmin-{id}")},
            "spec": {"environmentId": "prod", "role": role},
            "status": {"phase": "RUNNING"}
        });
        if let (Some(metadata), Some(extra)) =
            (object["metadata"].as_object_mut(), extra.as_object())
        {
            metadata.extend(extra.clone());
        }
        std::sync::Arc::new(serde_json::from_value(object).unwrap())
    };
    let deployments = [
        deployment("web1", "application", json!({})),
        deployment(
            "ctl9",
            "ingress-controller",
            json!({"deletionTimestamp": "2026-12-03T08:00:00Z", "finalizers": ["styrmin.io/kopf-finalizer"]}),
        ),
    ];
    styrmin_webhook::kube_source::build_view(
        &[std::sync::Arc::new(cluster)],
        &[],
        &deployments,
        None,
    )
    .unwrap()
    .view
}

const HELD_SINCE: i64 = 1_796_284_800; // 2026-12-03T08:00:00Z

const W2_MESSAGE: &str = "environment \"prod\": its dedicated ingress controller \"ctl9\" is being removed (phase DELETING), \
so applications in this environment cannot be deployed, updated or upgraded until the removal completes; try again \
after the removal completes, and Styrmin installs a new ingress controller";

#[test]
fn w2_denial_of_a_stuck_removal_names_the_finalizer_since_when_and_what_to_do() {
    let view = view_with_held_controller();
    let deploy = request("CREATE", "styrmin-web1", helm_release("v2", "1"), None);
    let d = decide_with(
        &view,
        &deploy,
        &DecideOptions::default(),
        DecidedAt {
            now: HELD_SINCE + 725,
            flux_deadline: None,
        },
    );
    assert_eq!(d.outcome, RequestOutcome::Denied);
    let message = d.status.map(|s| s.message).unwrap_or_default();
    assert_eq!(
        message,
        format!(
            "{W2_MESSAGE}. The removal has not finished after 12m5s (deletion requested at 2026-12-03T08:00:00Z); \
             StyrminDeployment styrmin-ctl9 in namespace styrmin-ctl9 still has the finalizer styrmin.io/kopf-finalizer. \
             An agent of Styrmin v0.1.48 or earlier can stop removing a controller: read the agent's version and remove \
             the finalizer as \"A StyrminDeployment that keeps its finalizer\" says, with styrmin-ctl9 as both the name \
             and the namespace; once the finalizer is gone, submit the config again"
        )
    );
}

#[test]
fn w2_denial_of_a_young_removal_has_no_stuck_detail() {
    let view = view_with_held_controller();
    let deploy = request("CREATE", "styrmin-web1", helm_release("v2", "1"), None);
    let options = DecideOptions {
        stuck_deleting_after: Duration::from_secs(3600),
        ..DecideOptions::default()
    };
    let d = decide_with(
        &view,
        &deploy,
        &options,
        DecidedAt {
            now: HELD_SINCE + 725,
            flux_deadline: None,
        },
    );
    assert_eq!(d.status.map(|s| s.message).as_deref(), Some(W2_MESSAGE));
}

#[test]
fn w2_a_phase_without_a_deletion_timestamp_counts_from_when_it_was_first_seen() {
    let text = "cluster: {dedicated_ingress: {}}\ndeployments:\n  a: {environment: e}\n  c: {environment: e, role: ingress-controller, phase: DELETING}\n";
    let mut v = policy(text);
    // The policy file knows no removal; the kube source gives one to every DELETING object.
    let mut with_removal = v.clone();
    let mut first_seen = std::collections::HashMap::new();
    with_removal.note_removals(&mut first_seen, HELD_SINCE);
    assert!(first_seen.is_empty(), "no removal known, nothing noted");
    v = styrmin_webhook::view::View::new(
        v.cluster().clone(),
        std::collections::HashMap::new(),
        [
            ("a".to_owned(), v.deployment("a").unwrap().clone()),
            (
                "c".to_owned(),
                styrmin_webhook::view::Deployment {
                    removal: Some(styrmin_webhook::view::Removal::default()),
                    ..v.deployment("c").unwrap().clone()
                },
            ),
        ]
        .into(),
        None,
    );
    v.note_removals(&mut first_seen, HELD_SINCE);
    // Seen again later: the first time stays.
    v.note_removals(&mut first_seen, HELD_SINCE + 60);
    let deploy = request("CREATE", "styrmin-a", helm_release("v2", "1"), None);
    let d = decide_with(
        &v,
        &deploy,
        &DecideOptions::default(),
        DecidedAt {
            now: HELD_SINCE + 3700,
            flux_deadline: None,
        },
    );
    let message = d.status.map(|s| s.message).unwrap_or_default();
    let w2 = "environment \"e\": its dedicated ingress controller \"c\" is being removed (phase DELETING), \
so applications in this environment cannot be deployed, updated or upgraded until the removal completes; try again \
after the removal completes, and Styrmin installs a new ingress controller";
    // No deletion was requested: the finalizer advice would not help, and is not given.
    assert_eq!(
        message,
        format!(
            "{w2}. The removal has not finished after 1h1m (DELETING seen first at 2026-12-03T08:00:00Z); \
             StyrminDeployment styrmin-c in namespace styrmin-c is DELETING by its status only: no deletion of it was \
             requested (it has no deletion timestamp). Removing a finalizer does not help here: the Styrmin operator \
             set the phase DELETING and has not deleted the object. Check that the operator runs and read its log for \
             styrmin-c; once it deletes the object and the removal finishes, submit the config again"
        )
    );
}

/// The W2 message for controller `c`, whose removal is `removal`, an hour and a minute after
/// [`HELD_SINCE`].
fn w2_message_of_removal(removal: styrmin_webhook::view::Removal) -> String {
    let text = "cluster: {dedicated_ingress: {}}\ndeployments:\n  a: {environment: e}\n  c: {environment: e, role: ingress-controller, phase: DELETING}\n";
    let v = policy(text);
    let v = styrmin_webhook::view::View::new(
        v.cluster().clone(),
        std::collections::HashMap::new(),
        [
            ("a".to_owned(), v.deployment("a").unwrap().clone()),
            (
                "c".to_owned(),
                styrmin_webhook::view::Deployment {
                    removal: Some(removal),
                    ..v.deployment("c").unwrap().clone()
                },
            ),
        ]
        .into(),
        None,
    );
    let deploy = request("CREATE", "styrmin-a", helm_release("v2", "1"), None);
    let d = decide_with(
        &v,
        &deploy,
        &DecideOptions::default(),
        DecidedAt {
            now: HELD_SINCE + 3660,
            flux_deadline: None,
        },
    );
    assert_eq!(d.outcome, RequestOutcome::Denied);
    d.status.map(|s| s.message).unwrap_or_default()
}

#[test]
fn w2_a_requested_deletion_with_no_finalizer_left_says_the_view_lags() {
    let message = w2_message_of_removal(styrmin_webhook::view::Removal {
        deletion_requested: Some(HELD_SINCE),
        first_seen: Some(HELD_SINCE + 30),
        finalizers: vec![],
    });
    assert_eq!(
        message,
        "environment \"e\": its dedicated ingress controller \"c\" is being removed (phase DELETING), so \
         applications in this environment cannot be deployed, updated or upgraded until the removal completes; try \
         again after the removal completes, and Styrmin installs a new ingress controller. The removal has not \
         finished after 1h1m (deletion requested at 2026-12-03T08:00:00Z); StyrminDeployment styrmin-c in namespace \
         styrmin-c has no finalizer left but is still seen by the webhook. Kubernetes deletes an object whose \
         deletion was requested once no finalizer is left, so the webhook's view of it is out of date: check with \
         kubectl get styrmindeployment styrmin-c -n styrmin-c; if it is gone, the webhook's source of the view is \
         failing (its log, and styrmin_webhook_view_source_valid), and deploys go through once the webhook sees the \
         removal finish"
    );
}

#[test]
fn w2_a_requested_deletion_held_by_two_finalizers_names_both() {
    let message = w2_message_of_removal(styrmin_webhook::view::Removal {
        deletion_requested: Some(HELD_SINCE),
        first_seen: None,
        finalizers: vec![
            "styrmin.io/kopf-finalizer".into(),
            "example.com/other".into(),
        ],
    });
    assert!(
        message.ends_with(
            "; StyrminDeployment styrmin-c in namespace styrmin-c still has the finalizers \
             styrmin.io/kopf-finalizer, example.com/other. An agent of Styrmin v0.1.48 or earlier can stop removing \
             a controller: read the agent's version and remove the finalizer as \"A StyrminDeployment that keeps its \
             finalizer\" says, with styrmin-c as both the name and the namespace; once the finalizer is gone, submit \
             the config again"
        ),
        "{message}"
    );
}

// --- W5 ---

/// The log's `settings` field: `record` or `levels` when settings applied.
fn settings_source(decision: &Decision) -> Option<SettingsSource> {
    decision.settings.as_ref().map(AppliedSettings::source)
}

#[test]
fn w5_decisions_name_the_settings_they_applied() {
    let view = |extra: &str| {
        let policy = format!(
            "cluster: {{ingress_class: contour}}\n\
             environments: {{stage: {{ingress_class: haproxy}}}}\n\
             deployments:\n  \
               web2: {{environment: stage}}\n  \
               rec1: {{environment: stage, last_deployed: {{ingress_class: nginx}}}}\n{extra}"
        );
        parse_policy(Path::new("policy.yaml"), &policy).unwrap()
    };
    let ingress = || ingress("networking.k8s.io/v1", None, None);
    // The record when there is one, else the levels.
    let decision = create(&view(""), "styrmin-web2", ingress());
    assert_eq!(settings_source(&decision), Some(SettingsSource::Levels));
    let decision = create(&view(""), "styrmin-rec1", ingress());
    assert_eq!(settings_source(&decision), Some(SettingsSource::Record));
    // R9 on Kubernetes 1.24: denied, and the log still names the settings.
    let old = view("kubernetes_version: \"1.24\"\n");
    let decision = create(&old, "styrmin-web2", ingress());
    assert_eq!(decision.outcome, RequestOutcome::Denied);
    assert_eq!(settings_source(&decision), Some(SettingsSource::Levels));
    // Not Styrmin's: no settings.
    let decision = create(&view(""), "default", ingress());
    assert_eq!(settings_source(&decision), None);
    // --flux-post-renderer, with a patch and (on Kubernetes 1.24, R9) with a warning only.
    let flux = DecideOptions {
        flux_post_renderer: true,
        ..DecideOptions::default()
    };
    let release = request("CREATE", "styrmin-web2", helm_release("v2", "1.0.0"), None);
    let decision = decide_with(&view(""), &release, &flux, DecidedAt::now());
    assert_eq!(decision.outcome, RequestOutcome::Patched);
    assert_eq!(settings_source(&decision), Some(SettingsSource::Levels));
    let decision = decide_with(&old, &release, &flux, DecidedAt::now());
    assert!(decision.patch.is_empty());
    assert_eq!(decision.warnings.len(), 1);
    assert_eq!(settings_source(&decision), Some(SettingsSource::Levels));
}

// --- The audit's judgement, the clock, the budgets ---

#[test]
fn an_ingress_conforms_only_when_admission_would_leave_it_unchanged() {
    let view = view();
    // web2 is in stage: haproxy on both fields.
    let served = ClassFields {
        ingress_class_name: Some("haproxy".to_owned()),
        class_annotation: Some("haproxy".to_owned()),
    };
    assert!(judge_ingress(&view, "web2", &served).conforms());
    let other_class = ClassFields {
        ingress_class_name: Some("nginx".to_owned()),
        ..served.clone()
    };
    assert!(!judge_ingress(&view, "web2", &other_class).conforms());
    // R9: a rule that cannot be applied never conforms.
    let old = parse_policy(
        Path::new("p"),
        "kubernetes_version: '1.26'\ncluster: {ingress_class: haproxy}",
    )
    .unwrap();
    assert!(!judge_ingress(&old, "web2", &served).conforms());
}

#[test]
fn w2_a_removal_is_stuck_from_exactly_the_configured_age() {
    let view = view_with_held_controller();
    let deploy = request("CREATE", "styrmin-web1", helm_release("v2", "1"), None);
    let options = DecideOptions {
        stuck_deleting_after: Duration::from_secs(725),
        ..DecideOptions::default()
    };
    let message = |now: i64| {
        decide_with(
            &view,
            &deploy,
            &options,
            DecidedAt {
                now,
                flux_deadline: None,
            },
        )
        .status
        .map(|s| s.message)
        .unwrap_or_default()
    };
    assert_eq!(message(HELD_SINCE + 724), W2_MESSAGE);
    assert!(
        message(HELD_SINCE + 725).starts_with(&format!(
            "{W2_MESSAGE}. The removal has not finished after 12m5s"
        )),
        "{}",
        message(HELD_SINCE + 725)
    );
}

#[test]
fn w5_a_helm_release_over_the_time_budget_still_names_its_settings() {
    let flux = DecideOptions {
        flux_post_renderer: true,
        ..DecideOptions::default()
    };
    // The deadline is checked for each post-renderer the release already has.
    let mut object = helm_release("v2", "1.0.0");
    object["spec"]["postRenderers"] = json!([{"kustomize": {"patches": []}}]);
    let release = request("CREATE", "styrmin-web2", object, None);
    let decision = decide_with(
        &view(),
        &release,
        &flux,
        DecidedAt::now_within(Instant::now()),
    );
    assert_eq!(decision.reason, FLUX_OVER_BUDGET_REASON);
    assert!(decision.patch.is_empty());
    assert_eq!(settings_source(&decision), Some(SettingsSource::Levels));
}
