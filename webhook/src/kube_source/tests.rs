//! The conversion from Styrmin objects to the view, table by table. The objects are written
//! as the API server returns them (JSON), so these also check the CRD types' field names.

use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::api::networking::v1::IngressClass;
use k8s_openapi::apimachinery::pkg::version::Info;
use kube::Resource;
use rstest::rstest;
use serde_json::{Value, json};
use styrmin_ingress_rules::IngressTarget;

use super::*;
use crate::crd::{StyrminCluster, StyrminDeployment, StyrminEnvironment};
use crate::view::{Phase, Role, View};

fn cluster(name: &str, spec: Value) -> Arc<StyrminCluster> {
    Arc::new(
        serde_json::from_value(json!({
            "apiVersion": "styrmin.io/v1alpha1", "kind": "StyrminCluster",
            "metadata": {"name": name, "resourceVersion": "1"}, "spec": spec
        }))
        .unwrap(),
    )
}

fn environment(name: &str, spec: Value) -> Arc<StyrminEnvironment> {
    Arc::new(
        serde_json::from_value(json!({
            "apiVersion": "styrmin.io/v1alpha1", "kind": "StyrminEnvironment",
            "metadata": {"name": name, "resourceVersion": "1"}, "spec": spec
        }))
        .unwrap(),
    )
}

fn styrmin_deployment(id: &str, spec: Value, status: Value) -> Arc<StyrminDeployment> {
    let name = format!("styrmin-{id}");
    Arc::new(
        serde_json::from_value(json!({
            "apiVersion": "styrmin.io/v1alpha1", "kind": "StyrminDeployment",
            "metadata": {"name": name, "namespace": name, "resourceVersion": "1"},
            "spec": spec, "status": status
        }))
        .unwrap(),
    )
}

fn build(
    clusters: &[Arc<StyrminCluster>],
    environments: &[Arc<StyrminEnvironment>],
    deployments: &[Arc<StyrminDeployment>],
) -> BuiltView {
    build_view(clusters, environments, deployments, None).unwrap()
}

/// The class an Ingress of deployment `id` gets, or "dedicated", or "" for none (R1, R2).
fn outcome(view: &View, id: &str) -> String {
    match view.settings_for_deployment(id).resolved.target {
        IngressTarget::Dedicated => "dedicated".to_owned(),
        other => other.enforced_class().unwrap_or("").to_owned(),
    }
}

// docs/rules.md §1, R1, R2 through the CRDs: absent, null, "" and a value at each level.
#[rstest]
#[case::nothing_anywhere(json!({}), json!({}), json!({}), "traefik")]
#[case::cluster_null(json!({"ingressClass": null}), json!({}), json!({}), "")]
#[case::cluster_empty(json!({"ingressClass": ""}), json!({}), json!({}), "")]
#[case::cluster_value(json!({"ingressClass": "nginx"}), json!({}), json!({}), "nginx")]
#[case::environment_null_inherits(json!({"ingressClass": "nginx"}), json!({"ingressClass": null}), json!({}), "nginx")]
#[case::environment_empty_is_set(json!({"ingressClass": "nginx"}), json!({"ingressClass": ""}), json!({}), "")]
#[case::deployment_wins(json!({"ingressClass": "nginx"}), json!({"ingressClass": "haproxy"}), json!({"ingressClass": "contour"}), "contour")]
#[case::deployment_null_inherits(json!({}), json!({"ingressClass": "haproxy"}), json!({"ingressClass": null}), "haproxy")]
#[case::cluster_dedicated(json!({"dedicatedIngress": {}}), json!({"ingressClass": "nginx"}), json!({}), "dedicated")]
#[case::environment_cannot_turn_it_off(json!({"dedicatedIngress": {}}), json!({"dedicatedIngress": null}), json!({}), "dedicated")]
#[case::deployment_dedicated_with_values(json!({}), json!({}), json!({"dedicatedIngress": {"replicas": 2}}), "dedicated")]
fn levels_from_the_three_resources(
    #[case] cluster_spec: Value,
    #[case] environment_spec: Value,
    #[case] deployment_levels: Value,
    #[case] expected: &str,
) {
    let mut spec = json!({"environmentId": "prod"});
    spec.as_object_mut()
        .unwrap()
        .extend(deployment_levels.as_object().unwrap().clone());
    let built = build(
        &[cluster("default", cluster_spec)],
        &[environment("prod", environment_spec)],
        &[styrmin_deployment(
            "web1",
            spec,
            json!({"phase": "RUNNING"}),
        )],
    );
    assert_eq!(outcome(&built.view, "web1"), expected);
    assert!(built.ignored.is_empty());
}

#[test]
fn only_the_cluster_named_default_counts() {
    let built = build(
        &[
            cluster("other", json!({"ingressClass": "haproxy"})),
            cluster("default", json!({"ingressClass": "nginx"})),
        ],
        &[],
        &[],
    );
    assert_eq!(outcome(&built.view, "anyone"), "nginx");
    assert_eq!(built.ignored.len(), 1);
    assert!(
        built.ignored[0].contains("StyrminCluster other"),
        "{:?}",
        built.ignored
    );
}

/// A StyrminCluster `default` as stored with `spec`, last applied by client-side `kubectl
/// apply` with `applied` as its spec (`None`: not applied that way).
fn applied_cluster(spec: Value, applied: Option<Value>) -> Arc<StyrminCluster> {
    let mut object = json!({
        "apiVersion": "styrmin.io/v1alpha1", "kind": "StyrminCluster",
        "metadata": {"name": "default", "resourceVersion": "1"}, "spec": spec
    });
    if let Some(applied) = applied {
        let last = json!({"apiVersion": "styrmin.io/v1alpha1", "kind": "StyrminCluster",
            "metadata": {"annotations": {}, "name": "default"}, "spec": applied});
        object["metadata"]["annotations"] =
            json!({"kubectl.kubernetes.io/last-applied-configuration": format!("{last}\n")});
    }
    Arc::new(serde_json::from_value(object).unwrap())
}

#[rstest]
#[case::null_applied_default_stored(json!({"ingressClass": "traefik"}), Some(json!({"ingressClass": null})), true)]
#[case::null_applied_other_value_stored(json!({"ingressClass": "nginx"}), Some(json!({"ingressClass": null})), true)]
#[case::null_applied_null_stored(json!({"ingressClass": null}), Some(json!({"ingressClass": null})), false)]
#[case::empty_applied(json!({"ingressClass": ""}), Some(json!({"ingressClass": ""})), false)]
#[case::left_out_when_applied(json!({"ingressClass": "traefik"}), Some(json!({})), false)]
#[case::not_applied_client_side(json!({"ingressClass": "traefik"}), None, false)]
fn the_null_trap_is_read_from_the_last_applied_configuration(
    #[case] stored: Value,
    #[case] applied: Option<Value>,
    #[case] trap: bool,
) {
    let built = build(&[applied_cluster(stored, applied)], &[], &[]);
    assert_eq!(built.view.cluster_class_applied_null(), trap);
}

#[test]
fn a_last_applied_configuration_that_is_not_json_is_no_trap() {
    let mut object = (*applied_cluster(json!({"ingressClass": "traefik"}), None)).clone();
    object.metadata.annotations = Some(
        [(
            "kubectl.kubernetes.io/last-applied-configuration".to_owned(),
            "{not json".to_owned(),
        )]
        .into(),
    );
    let built = build(&[Arc::new(object)], &[], &[]);
    assert!(!built.view.cluster_class_applied_null());
    assert_eq!(outcome(&built.view, "anyone"), "traefik");
}

#[test]
fn w1_unknown_environment_and_missing_deployment_count_as_not_set() {
    let built = build(
        &[cluster("default", json!({"ingressClass": "nginx"}))],
        &[environment("prod", json!({"ingressClass": "haproxy"}))],
        &[styrmin_deployment(
            "lost",
            json!({"environmentId": "nowhere"}),
            json!(null),
        )],
    );
    assert_eq!(outcome(&built.view, "lost"), "nginx");
    assert_eq!(outcome(&built.view, "gone"), "nginx");
    let lost = built.view.deployment("lost").unwrap();
    assert_eq!(lost.environment.as_deref(), Some("nowhere"));
}

#[test]
fn phase_role_and_deletion() {
    let mut deleting = (*styrmin_deployment(
        "ctl",
        json!({"environmentId": "prod", "role": "ingress-controller"}),
        json!({"phase": "RUNNING"}),
    ))
    .clone();
    deleting.metadata.deletion_timestamp =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            "2026-01-02T03:04:05Z".parse().unwrap(),
        ));
    let built = build(
        &[],
        &[],
        &[
            Arc::new(deleting),
            styrmin_deployment("new", json!({"environmentId": "prod"}), json!(null)),
            styrmin_deployment(
                "failed",
                json!({"environmentId": "prod"}),
                json!({"phase": "FAILED"}),
            ),
            styrmin_deployment("empty-env", json!({"environmentId": ""}), json!({})),
            // The product page's RESTORING (a backup restore re-creates the namespace).
            styrmin_deployment(
                "restoring",
                json!({"environmentId": "prod"}),
                json!({"phase": "RESTORING"}),
            ),
        ],
    );
    let view = &built.view;
    assert_eq!(
        view.deployment("restoring").unwrap().phase,
        Phase::Restoring
    );
    let ctl = view.deployment("ctl").unwrap();
    assert_eq!(
        (ctl.role, ctl.phase),
        (Role::IngressController, Phase::Deleting)
    );
    let new = view.deployment("new").unwrap();
    assert_eq!((new.role, new.phase), (Role::Application, Phase::Pending));
    assert_eq!(view.deployment("failed").unwrap().phase, Phase::Failed);
    assert_eq!(view.deployment("empty-env").unwrap().environment, None);
    let controllers: Vec<_> = view.controllers_of("prod").map(|(id, _)| id).collect();
    assert_eq!(controllers, ["ctl"]);
}

#[test]
fn w5_last_deployed_decides_alone() {
    let built = build(
        &[cluster("default", json!({"dedicatedIngress": {}}))],
        &[],
        &[styrmin_deployment(
            "web1",
            json!({"environmentId": "prod"}),
            json!({"phase": "RUNNING", "lastDeployed": {"ingressClass": "nginx"}}),
        )],
    );
    assert_eq!(outcome(&built.view, "web1"), "nginx");
    assert_eq!(
        built.view.deployment("web1").unwrap().last_deployed,
        Some(styrmin_ingress_rules::IngressTarget::class("nginx"))
    );
}

#[test]
fn w5_every_record_form() {
    for (record, expected) in [
        (json!({"dedicatedIngress": {}}), "dedicated"),
        (
            json!({"dedicatedIngress": {"replicas": 2}, "ingressClass": "x"}),
            "dedicated",
        ),
        (json!({"ingressClass": "kong"}), "kong"),
        (json!({"ingressClass": ""}), ""),
        (json!({"ingressClass": null}), ""),
    ] {
        let built = build(
            &[cluster("default", json!({"ingressClass": "nginx"}))],
            &[],
            &[styrmin_deployment(
                "web1",
                json!({"environmentId": "prod"}),
                json!({"phase": "RUNNING", "lastDeployed": record}),
            )],
        );
        assert_eq!(outcome(&built.view, "web1"), expected, "{record}");
        assert_eq!(
            built.view.settings_for_deployment("web1").source(),
            styrmin_ingress_rules::SettingsSource::Record
        );
    }
}

#[test]
fn misplaced_deployments_are_ignored_and_said_so() {
    let mut wrong_name =
        (*styrmin_deployment("a", json!({"environmentId": "prod"}), json!(null))).clone();
    wrong_name.metadata.name = Some("styrmin-b".into());
    let mut wrong_namespace = wrong_name.clone();
    wrong_namespace.metadata.namespace = Some("default".into());
    let built = build(&[], &[], &[Arc::new(wrong_name), Arc::new(wrong_namespace)]);
    assert_eq!(built.view.deployment_count(), 0);
    assert_eq!(built.ignored.len(), 2, "{:?}", built.ignored);
    assert!(
        built
            .ignored
            .iter()
            .any(|w| w.contains("default/styrmin-b"))
    );
    assert!(
        built
            .ignored
            .iter()
            .any(|w| w.contains("styrmin-a/styrmin-b"))
    );
}

#[test]
fn a_non_object_dedicated_ingress_is_an_error_naming_object_and_field() {
    for bad in [json!(true), json!("x"), json!([])] {
        let err = build_view(
            &[],
            &[environment("prod", json!({"dedicatedIngress": bad}))],
            &[],
            None,
        )
        .unwrap_err();
        let text = crate::telemetry::ErrorChain(&err).to_string();
        assert!(
            text.contains("StyrminEnvironment prod: spec.dedicatedIngress"),
            "{text}"
        );
        assert!(
            text.contains("object of the dedicated controller's values"),
            "{text}"
        );
    }
    let err = build_view(
        &[],
        &[],
        &[styrmin_deployment(
            "a",
            json!({"environmentId": "prod"}),
            json!({"lastDeployed": {"dedicatedIngress": 1}}),
        )],
        None,
    )
    .unwrap_err();
    assert_eq!(err.field, "status.lastDeployed.dedicatedIngress");
}

#[test]
fn the_version_is_kept() {
    let version = "1.26".parse().ok();
    let built = build_view(&[], &[], &[], version).unwrap();
    assert_eq!(built.view.kubernetes_version(), version);
}

#[rstest]
#[case::plain(json!({"major": "1", "minor": "30", "gitVersion": "v1.30.2"}), Some((1, 30)))]
#[case::plus(json!({"major": "1", "minor": "27+", "gitVersion": "v1.27.16-eks-a18cd3a"}), Some((1, 27)))]
#[case::git_version_only(json!({"major": "", "minor": "", "gitVersion": "v1.26.3"}), Some((1, 26)))]
#[case::emulated(json!({"major": "1", "minor": "33", "emulationMajor": "1", "emulationMinor": "31", "gitVersion": "v1.33.1"}), Some((1, 31)))]
#[case::nothing(json!({"major": "", "minor": "", "gitVersion": "devel"}), None)]
fn version_from_the_version_endpoint(#[case] body: Value, #[case] expected: Option<(u32, u32)>) {
    let mut full = json!({"buildDate": "", "compiler": "gc", "gitCommit": "", "gitTreeState": "clean", "goVersion": "go1.22", "platform": "linux/amd64"});
    full.as_object_mut()
        .unwrap()
        .extend(body.as_object().unwrap().clone());
    let info: Info = serde_json::from_value(full).unwrap();
    assert_eq!(version_of(&info).map(|v| (v.major, v.minor)), expected);
}

#[test]
fn the_table_names_the_crd_types() {
    fn of<K: Resource<DynamicType = ()>>() -> (String, String, String) {
        (
            K::group(&()).into(),
            K::version(&()).into(),
            K::plural(&()).into(),
        )
    }
    let resources: Vec<_> = API_CALLS
        .iter()
        .filter_map(|call| match call {
            ApiCall::Resource {
                group,
                version,
                resource,
                verbs,
                names,
            } => {
                assert_eq!(*verbs, WATCH_VERBS);
                assert!(names.is_empty());
                Some((group.to_string(), version.to_string(), resource.to_string()))
            }
            ApiCall::NonResource { .. } => None,
        })
        .collect();
    assert_eq!(
        resources,
        [
            of::<StyrminCluster>(),
            of::<StyrminEnvironment>(),
            of::<StyrminDeployment>(),
            of::<crate::audit::objects::IngressAsRead>(),
            of::<crate::audit::objects::AliasService>(),
            of::<crate::audit::objects::NamespaceName>(),
            of::<IngressClass>(),
        ]
    );
}

#[test]
fn health_needs_every_list_and_no_recent_error() {
    let now = Instant::now();
    let mut progress = Progress::default();
    assert!(!progress.all_healthy(now));
    for resource in WatchedResource::ALL {
        progress.listed[resource] = resource != WatchedResource::Namespaces;
    }
    assert!(
        !progress.all_listed(),
        "the audit's watches are in the gate too"
    );
    assert_eq!(
        progress.unhealthy_because(now).as_deref(),
        Some("namespaces not listed yet")
    );
    progress.listed[WatchedResource::Namespaces] = true;
    assert!(progress.all_healthy(now));
    assert_eq!(progress.unhealthy_because(now), None);
    progress.last_error[WatchedResource::Ingresses] = Some(now);
    progress.last_message[WatchedResource::Ingresses] = Some("connection reset".into());
    assert!(!progress.all_healthy(now));
    assert_eq!(
        progress.unhealthy_because(now).as_deref(),
        Some("the watch of ingresses failed 0s ago: connection reset")
    );
    assert!(progress.all_healthy(now + HEALTHY_AFTER));
}

#[test]
fn every_watched_resource_is_in_the_table_once_in_declaration_order() {
    for (position, resource) in WatchedResource::ALL.into_iter().enumerate() {
        // `ByResource` indexes by the discriminant.
        assert_eq!(resource as usize, position, "{resource:?}");
        assert_eq!(API_CALLS[position], resource.api_call(), "{resource:?}");
    }
    assert_eq!(
        API_CALLS[WatchedResource::ALL.len()..],
        [ApiCall::NonResource {
            path: "/version",
            verbs: &["get"],
        }]
    );
}
