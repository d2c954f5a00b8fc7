//! The audit as a pure function: each reason at its threshold, the counts, what is left out.

use std::collections::HashSet;
use std::path::Path;

use serde_json::{Value, json};

use super::*;
use crate::audit::moving::MovingSet;
use crate::policy_file::parse_policy;
use crate::view::{Deployment, Removal};

const NOW: i64 = 1_796_284_800; // 2026-12-03T08:00:00Z
/// Created long before the grace period ends.
const AN_HOUR_AGO: i64 = NOW - 3600;

const POLICY: &str = "
cluster: {ingress_class: contour}
environments:
  prod: {dedicated_ingress: {}}
  blank: {ingress_class: ''}
deployments:
  web1: {environment: prod}
  web2: {environment: blank}
  web3: {environment: prod, last_deployed: {ingress_class: nginx}}
";

fn ingress(
    namespace: &str,
    name: &str,
    class: Option<&str>,
    annotation: Option<&str>,
    created: i64,
    address: bool,
) -> Arc<AuditedIngress> {
    let mut object = json!({
        "metadata": {
            "name": name, "namespace": namespace,
            "creationTimestamp": rfc3339(created),
        },
        "spec": {},
        "status": {"loadBalancer": if address { json!({"ingress": [{"hostname": "lb.example.com"}]}) } else { json!({}) }}
    });
    if let Some(class) = class {
        object["spec"]["ingressClassName"] = json!(class);
    }
    if let Some(annotation) = annotation {
        object["metadata"]["annotations"] = json!({"kubernetes.io/ingress.class": annotation});
    }
    let ingress: AuditedIngress = serde_json::from_value(object).unwrap();
    Arc::new(ingress)
}

/// An Ingress created long ago that a controller has given an address.
fn served(
    namespace: &str,
    name: &str,
    class: Option<&str>,
    annotation: Option<&str>,
) -> Arc<AuditedIngress> {
    ingress(namespace, name, class, annotation, AN_HOUR_AGO, true)
}

fn alias(namespace: &str, name: &str, external_name: &str) -> Arc<AliasService> {
    Arc::new(
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"externalName": external_name}
        }))
        .unwrap(),
    )
}

/// The audit of a cluster that has an IngressClass for every class the Ingresses name.
fn run(
    view: &View,
    ingresses: &[Arc<AuditedIngress>],
    aliases: &[Arc<AliasService>],
    namespaces: &[&str],
    now: i64,
) -> CompletedAudit {
    let classes: Vec<String> = ingresses
        .iter()
        .filter_map(|i| i.class_fields().ingress_class_name)
        .collect();
    let classes: Vec<&str> = classes.iter().map(String::as_str).collect();
    run_with_classes(view, ingresses, aliases, namespaces, &classes, now)
}

fn run_with_classes(
    view: &View,
    ingresses: &[Arc<AuditedIngress>],
    aliases: &[Arc<AliasService>],
    namespaces: &[&str],
    ingress_classes: &[&str],
    now: i64,
) -> CompletedAudit {
    let set =
        |names: &[&str]| -> HashSet<String> { names.iter().map(|n| (*n).to_owned()).collect() };
    audit(
        &AuditInput {
            view,
            ingresses,
            aliases,
            namespaces: &set(namespaces),
            ingress_classes: &classes(ingress_classes),
            now,
            previous: None,
            moving: &MovingSet::default(),
        },
        &AuditSettings::default(),
    )
}

/// IngressClasses of these names, each with its controller as the common controllers name
/// themselves (`example.com/<name>` for others).
fn classes(names: &[&str]) -> HashMap<String, String> {
    names
        .iter()
        .map(|name| {
            let controller = match *name {
                "nginx" => "k8s.io/ingress-nginx".to_owned(),
                "traefik" => "traefik.io/ingress-controller".to_owned(),
                "contour" => "projectcontour.io/ingress-controller".to_owned(),
                other => format!("example.com/{other}"),
            };
            ((*name).to_owned(), controller)
        })
        .collect()
}

fn reasons(report: &CompletedAudit) -> Vec<(Reason, String)> {
    report
        .findings
        .iter()
        .map(|f| (f.reason, format!("{}/{}", f.namespace, f.name)))
        .collect()
}

#[test]
fn wrong_class_says_has_wants_why_and_fix() {
    let view = parse_policy(Path::new("p"), POLICY).unwrap();
    let report = run(
        &view,
        &[
            served("styrmin-web1", "web", Some("nginx"), None),
            served("styrmin-web1", "ok", None, Some("traefik")),
            // W5: web3's record (nginx) decides, not prod's dedicated ingress.
            served("styrmin-web3", "web", None, Some("traefik")),
            served("styrmin-web3", "ok", Some("nginx"), Some("nginx")),
            // Not a Styrmin namespace: not judged.
            ingress("default", "web", Some("nginx"), None, AN_HOUR_AGO, false),
        ],
        &[],
        &[],
        NOW,
    );
    assert_eq!(
        reasons(&report),
        [
            (Reason::WrongClass, "styrmin-web1/web".to_owned()),
            (Reason::WrongClass, "styrmin-web3/web".to_owned()),
        ]
    );
    assert_eq!((report.ingresses, report.conforming_ingresses), (4, 2));
    assert_eq!(report.count(Reason::WrongClass), 2);
    let web1 = &report.findings[0];
    assert_eq!(web1.has, "ingressClassName \"nginx\", no annotation");
    assert_eq!(
        web1.wants,
        "dedicated (annotation traefik, no ingressClassName)"
    );
    assert_eq!(web1.why, "levels: environment.dedicated_ingress");
    let web3 = &report.findings[1];
    assert_eq!(web3.has, "annotation \"traefik\", no ingressClassName");
    assert_eq!(
        web3.wants,
        "class \"nginx\" (ingressClassName and annotation)"
    );
    assert_eq!(
        web3.why,
        "record (status.lastDeployed, W5); the levels give dedicated after a redeploy (environment.dedicated_ingress)"
    );
    assert_eq!(web3.settings, Some("record"));
    assert_eq!(
        web3.decided_by.as_deref(),
        Some("last_deployed.ingress_class")
    );
}

#[test]
fn cannot_enforce_on_a_server_that_rejects_both_fields() {
    let text = format!("kubernetes_version: '1.26'\n{POLICY}");
    let view = parse_policy(Path::new("p"), &text).unwrap();
    let report = run(
        &view,
        &[
            served("styrmin-web3", "web", Some("nginx"), None),
            // Dedicated sets the annotation only: fine on 1.26.
            served("styrmin-web1", "web", None, Some("traefik")),
        ],
        &[],
        &[],
        NOW,
    );
    assert_eq!(
        reasons(&report),
        [(Reason::CannotEnforce, "styrmin-web3/web".to_owned())]
    );
    assert!(
        report.findings[0].why.contains("Kubernetes 1.26 rejects"),
        "{}",
        report.findings[0].why
    );
}

#[test]
fn not_served_only_after_the_grace_period() {
    let view = parse_policy(Path::new("p"), POLICY).unwrap();
    let grace = i64::try_from(NOT_SERVED_GRACE.as_secs()).unwrap();
    let report = run(
        &view,
        &[
            ingress("styrmin-web2", "young", None, None, NOW - grace + 1, false),
            ingress("styrmin-web2", "old", None, None, NOW - grace, false),
            ingress("styrmin-web2", "served", None, None, NOW - 3 * grace, true),
            ingress(
                "styrmin-web1",
                "old",
                None,
                Some("traefik"),
                AN_HOUR_AGO,
                false,
            ),
        ],
        &[],
        &[],
        NOW,
    );
    assert_eq!(
        reasons(&report),
        [
            (Reason::NotServed, "styrmin-web1/old".to_owned()),
            (Reason::NotServed, "styrmin-web2/old".to_owned()),
        ]
    );
    assert_eq!(report.count(Reason::NotServed), 2);
    let classless = &report.findings[1];
    assert_eq!(
        classless.why,
        "no address (created 2026-12-03T07:55:00Z; grace 5m): no class: no controller that serves class-less Ingresses has served it"
    );
    assert!(
        classless
            .fix
            .starts_with("set ingress_class on the cluster"),
        "{}",
        classless.fix
    );
    assert!(
        report.findings[0]
            .why
            .ends_with("no controller of class \"traefik\" has served it")
    );
}

#[test]
fn one_ingress_counts_once_per_reason() {
    let view = parse_policy(Path::new("p"), POLICY).unwrap();
    let report = run(
        &view,
        &[ingress(
            "styrmin-web1",
            "web",
            Some("nginx"),
            None,
            AN_HOUR_AGO,
            false,
        )],
        &[],
        &[],
        NOW,
    );
    assert_eq!(report.count(Reason::WrongClass), 1);
    assert_eq!(report.count(Reason::NotServed), 1);
    assert_eq!((report.ingresses, report.conforming_ingresses), (1, 0));
    assert_eq!(
        report.counts.len(),
        Reason::ALL.len(),
        "every reason is listed"
    );
}

fn view_with_controller(removal: Removal) -> View {
    view_of_with_controller(POLICY, removal)
}

/// The view of `policy`, with the ingress controller `ctl9` of `prod` being removed.
fn view_of_with_controller(policy: &str, removal: Removal) -> View {
    let mut view = parse_policy(Path::new("p"), policy).unwrap();
    let mut deployments: std::collections::HashMap<String, Deployment> = view
        .deployments()
        .map(|(id, d)| (id.to_owned(), d.clone()))
        .collect();
    deployments.insert(
        "ctl9".into(),
        Deployment {
            environment: Some("prod".into()),
            role: Role::IngressController,
            phase: Phase::Deleting,
            removal: Some(removal),
            ..Deployment::default()
        },
    );
    let environments = view
        .environment_ids()
        .into_iter()
        .map(|id| {
            (
                id.to_owned(),
                view.environment(id).cloned().unwrap_or_default(),
            )
        })
        .collect();
    view = View::new(view.cluster().clone(), environments, deployments, None);
    view
}

#[test]
fn stuck_deleting_after_the_threshold_with_the_finalizer() {
    let after = i64::try_from(STUCK_DELETING_AFTER.as_secs()).unwrap();
    let view = view_with_controller(Removal {
        deletion_requested: Some(NOW - after),
        first_seen: Some(NOW - 10),
        finalizers: vec!["styrmin.io/kopf-finalizer".into()],
    });
    let young = run(&view, &[], &[], &[], NOW - 1);
    assert_eq!(young.count(Reason::StuckDeleting), 0);
    let report = run(&view, &[], &[], &[], NOW);
    assert_eq!(
        reasons(&report),
        [(
            Reason::StuckDeleting,
            "styrmin-ctl9/styrmin-ctl9".to_owned()
        )]
    );
    let stuck = &report.findings[0];
    assert_eq!(
        stuck.has,
        "DELETING since 2026-12-03T07:55:00Z, finalizer styrmin.io/kopf-finalizer"
    );
    assert_eq!(
        stuck.why,
        "environment \"prod\": deploys are denied (W2) until the removal completes"
    );
    assert!(
        stuck
            .fix
            .contains("A StyrminDeployment that keeps its finalizer")
    );
    // Since when it was first seen, when there is no deletion timestamp.
    let view = view_with_controller(Removal {
        deletion_requested: None,
        first_seen: Some(NOW - after - 60),
        finalizers: vec![],
    });
    let report = run(&view, &[], &[], &[], NOW);
    assert_eq!(
        report.findings[0].has,
        "DELETING since 2026-12-03T07:54:00Z, no deletion requested"
    );
    assert!(
        report.findings[0]
            .fix
            .starts_with("Removing a finalizer does not help here"),
        "{}",
        report.findings[0].fix
    );
    // Deletion requested and no finalizer left: the view lags.
    let view = view_with_controller(Removal {
        deletion_requested: Some(NOW - after),
        first_seen: None,
        finalizers: vec![],
    });
    let report = run(&view, &[], &[], &[], NOW);
    assert_eq!(
        report.findings[0].has,
        "DELETING since 2026-12-03T07:55:00Z, no finalizer left"
    );
    assert!(
        report.findings[0]
            .fix
            .contains("the webhook's view of it is out of date"),
        "{}",
        report.findings[0].fix
    );
    // Nobody knows since when: not reported.
    let view = view_with_controller(Removal::default());
    assert_eq!(
        run(&view, &[], &[], &[], NOW).count(Reason::StuckDeleting),
        0
    );
}

#[test]
fn stale_aliases_point_into_missing_namespaces_and_say_what_to_check() {
    let view = parse_policy(Path::new("p"), POLICY).unwrap();
    let report = run(
        &view,
        &[],
        &[
            alias("styrmin-web1", "db", "db.styrmin-web2.svc.cluster.local"),
            alias(
                "styrmin-web1",
                "cache",
                "cache.styrmin-gone.svc.cluster.local",
            ),
            alias("styrmin-web2", "api", "api.styrmin-web3.svc.cluster.local"),
            alias("styrmin-web2", "odd", "odd"),
        ],
        &["styrmin-web1", "styrmin-web2"],
        NOW,
    );
    assert_eq!(
        reasons(&report),
        [
            (Reason::StaleAlias, "styrmin-web1/cache".to_owned()),
            (Reason::StaleAlias, "styrmin-web2/api".to_owned()),
        ]
    );
    let gone = &report.findings[0];
    assert_eq!(gone.why, "namespace styrmin-gone does not exist");
    assert_eq!(
        gone.fix,
        "first check that no deployment has the id gone (styrminctl deployments get gone): a restore deletes and \
         re-creates its namespace; then kubectl delete service --namespace styrmin-web1 cache"
    );
    // web3 is in the view: its namespace may be re-created by a restore.
    assert!(
        report.findings[1]
            .why
            .contains("deployment \"web3\" is still in the view (phase RUNNING)")
    );
}

#[test]
fn levels_show_what_is_stored_and_what_it_resolves_to() {
    for (cluster, stored, resolves, note) in [
        ("{}", "absent", "class:traefik (the cluster default)", true),
        (
            "{ingress_class: null}",
            "null",
            "no-class (cluster.ingress_class)",
            false,
        ),
        (
            "{ingress_class: ''}",
            "\"\"",
            "no-class (cluster.ingress_class)",
            false,
        ),
        (
            "{ingress_class: nginx}",
            "\"nginx\"",
            "class:nginx (cluster.ingress_class)",
            false,
        ),
    ] {
        let view = parse_policy(
            Path::new("p"),
            &format!("cluster: {cluster}\nenvironments:\n  prod: {{dedicated_ingress: {{}}}}\n"),
        )
        .unwrap();
        let report = run(&view, &[], &[], &[], NOW);
        let level = &report.levels[0];
        assert_eq!(
            (level.ingress_class.as_str(), level.resolves_to.as_str()),
            (stored, resolves),
            "{cluster}"
        );
        assert_eq!(level.note.is_some(), note, "{cluster}");
        assert_eq!(report.levels[1].level, "environment prod");
        assert_eq!(
            report.levels[1].resolves_to,
            "dedicated (environment.dedicated_ingress)"
        );
    }
}

#[test]
fn the_store_keeps_the_last_audit_and_says_why_it_is_stale() {
    let store = AuditStore::default();
    assert_eq!(store.debug(NOW)["state"], "none");
    let view = parse_policy(Path::new("p"), POLICY).unwrap();
    store.publish(run(&view, &[], &[], &[], NOW));
    assert_eq!(store.debug(NOW + 5)["state"], "complete");
    assert_eq!(store.debug(NOW + 5)["age_seconds"], 5);
    store.mark_stale("the watch of ingresses failed".into());
    let debug: Value = store.debug(NOW + 65);
    assert_eq!(debug["state"], "stale");
    assert_eq!(debug["age_seconds"], 65);
    assert_eq!(debug["stale_because"], "the watch of ingresses failed");
    assert_eq!(debug["report"]["completed_at_unix"], NOW);
    store.publish(run(&view, &[], &[], &[], NOW + 70));
    assert_eq!(store.debug(NOW + 70)["state"], "complete");
}

#[test]
fn metrics_carry_every_ingress_reason_and_no_names() {
    let mut registry = Registry::with_prefix("styrmin_webhook");
    let metrics = AuditMetrics::register(&mut registry);
    let store = AuditStore::default();
    let view = view_with_controller(Removal {
        deletion_requested: Some(AN_HOUR_AGO),
        ..Removal::default()
    });
    store.publish(run(
        &view,
        &[served("styrmin-web1", "secret-name", Some("nginx"), None)],
        &[alias(
            "styrmin-web1",
            "cache",
            "cache.styrmin-gone.svc.cluster.local",
        )],
        &[],
        NOW,
    ));
    metrics.export(&store);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    for line in [
        "styrmin_webhook_audit_nonconforming_ingresses{reason=\"wrong_class\"} 1",
        "styrmin_webhook_audit_nonconforming_ingresses{reason=\"cannot_enforce\"} 0",
        "styrmin_webhook_audit_nonconforming_ingresses{reason=\"not_served\"} 0",
        "styrmin_webhook_audit_ingresses 1",
        "styrmin_webhook_audit_last_complete_timestamp_seconds 1796284800.0",
        "styrmin_webhook_controllers_stuck_deleting 1",
        "styrmin_webhook_stale_service_aliases 1",
    ] {
        assert!(text.lines().any(|l| l == line), "no {line:?} in:\n{text}");
    }
    assert!(
        !text.contains("secret-name") && !text.contains("styrmin-web1"),
        "{text}"
    );
}

#[test]
fn an_ingress_class_name_that_names_no_ingress_class_is_unknown() {
    let view = parse_policy(Path::new("p"), POLICY).unwrap();
    // web2's environment has no class (R5): its Ingresses keep the chart's fields.
    let ingresses = [
        served("styrmin-web2", "gone", Some("nginx"), Some("nginx")),
        served("styrmin-web2", "kept", Some("haproxy"), None),
        // Only the annotation: a controller that reads it needs no IngressClass.
        served("styrmin-web2", "annotated", None, Some("old-nginx")),
        // Outside Styrmin namespaces: not judged.
        served("default", "other", Some("nginx"), None),
    ];
    let report = run_with_classes(&view, &ingresses, &[], &[], &["haproxy"], NOW);
    assert_eq!(
        reasons(&report),
        [(Reason::UnknownClass, "styrmin-web2/gone".to_owned())]
    );
    assert_eq!(report.count(Reason::UnknownClass), 1);
    assert_eq!((report.ingresses, report.conforming_ingresses), (3, 2));
    let gone = &report.findings[0];
    assert_eq!(gone.has, "class \"nginx\"");
    assert_eq!(gone.wants, "an IngressClass named \"nginx\"");
    assert_eq!(
        gone.why,
        "spec.ingressClassName \"nginx\" names no IngressClass, so no controller serves it \
         (uninstalling a controller deletes its IngressClass)"
    );
    assert!(
        gone.fix.starts_with("create the IngressClass \"nginx\""),
        "{}",
        gone.fix
    );
    // With the class back, nothing is out of line.
    let report = run_with_classes(&view, &ingresses, &[], &[], &["haproxy", "nginx"], NOW);
    assert!(report.is_clean(), "{:?}", report.findings);
}

#[test]
fn an_ingress_class_keeps_its_name_the_default_annotation_and_its_controller() {
    let mut class: k8s_openapi::api::networking::v1::IngressClass = serde_json::from_value(json!({
        "metadata": {"name": "haproxy", "resourceVersion": "3", "labels": {"app": "haproxy"},
            "annotations": {
                "ingressclass.kubernetes.io/is-default-class": "true",
                "meta.helm.sh/release-name": "haproxy"
            },
            "managedFields": [{"manager": "helm"}]},
        "spec": {"controller": "haproxy.org/ingress-controller",
            "parameters": {"kind": "ConfigMap", "name": "p"}}
    }))
    .unwrap();
    objects::trim_ingress_class(&mut class);
    assert_eq!(
        serde_json::to_value(&class).unwrap(),
        json!({
            "apiVersion": "networking.k8s.io/v1", "kind": "IngressClass",
            "metadata": {"name": "haproxy",
                "annotations": {"ingressclass.kubernetes.io/is-default-class": "true"}},
            "spec": {"controller": "haproxy.org/ingress-controller"}
        })
    );
}

/// The policy of the steady-state test: an environment that enforces, one that only warns,
/// and an environment whose dedicated ingress controller is being removed.
const STEADY_POLICY: &str = "
cluster: {ingress_class: contour}
environments:
  prod: {dedicated_ingress: {}}
  blank: {ingress_class: ''}
deployments:
  web1: {environment: prod}
  web2: {environment: blank}
  web4: {environment: prod, enforcement_mode: warn}
";

/// An unserved Ingress with a uid, as the watch keeps it.
fn unserved(namespace: &str, name: &str, class: Option<&str>, created: i64) -> Arc<AuditedIngress> {
    let mut ingress = (*ingress(namespace, name, class, None, created, false)).clone();
    ingress.uid = Some(format!("uid-{namespace}-{name}").into());
    Arc::new(ingress)
}

#[test]
fn a_cluster_that_does_not_change_gives_byte_identical_reports_at_any_later_time() {
    use crate::audit::round::AuditRound;
    use crate::controllers::policy_reports::content::{ReportApi, ReportResults, policy_reports};

    let view = view_of_with_controller(
        STEADY_POLICY,
        Removal {
            deletion_requested: Some(NOW - 3600),
            first_seen: Some(NOW - 60),
            finalizers: vec!["styrmin.io/kopf-finalizer".into()],
        },
    );
    // Created ten minutes before the first audit: past the grace, never served.
    let created = NOW - 600;
    let ingresses = vec![
        unserved("styrmin-web1", "wrong", Some("nginx"), created),
        unserved("styrmin-web2", "nameless", None, created),
        unserved("styrmin-web4", "warned", Some("nginx"), created),
        unserved("styrmin-web1", "unknown", Some("gone"), created),
    ];
    let controller: Arc<crate::crd::StyrminDeployment> = Arc::new(
        serde_json::from_value(json!({
            "apiVersion": "styrmin.io/v1alpha1", "kind": "StyrminDeployment",
            "metadata": {"name": "styrmin-ctl9", "namespace": "styrmin-ctl9", "uid": "uid-ctl9",
                         "resourceVersion": "7"},
            "spec": {"environmentId": "prod", "role": "ingress-controller"},
        }))
        .unwrap(),
    );
    let reports_at = |now: i64, results: ReportResults| {
        let audit = run_with_classes(&view, &ingresses, &[], &[], &["nginx"], now);
        let round = AuditRound {
            audit: Arc::new(audit),
            ingresses: ingresses.clone(),
            aliases: Vec::new(),
            deployments: vec![controller.clone()],
            relists: 0,
        };
        policy_reports(&round, ReportApi::OpenReports, results)
            .into_iter()
            .map(|r| (r.key.name, r.body.to_string()))
            .collect::<Vec<_>>()
    };
    for results in [ReportResults::Findings, ReportResults::All] {
        let first = reports_at(NOW, results);
        let text = first.iter().map(|(_, b)| b.as_str()).collect::<String>();
        for expected in [
            "\"rule\":\"not_served\"",
            "\"rule\":\"stuck_deleting\"",
            "\"rule\":\"wrong_class\"",
            "\"rule\":\"unknown_class\"",
            "\"result\":\"warn\"",
        ] {
            assert!(text.contains(expected), "{expected} in {text}");
        }
        for later in [60, 5 * 60, 3 * 3600, 10 * 86_400, 400 * 86_400] {
            assert_eq!(
                reports_at(NOW + later, results),
                first,
                "{results:?}: the reports {later} s later"
            );
        }
    }
}

#[test]
fn an_ingress_a_step_is_moving_counts_as_moving_not_as_wrong_class() {
    let view = view_with_controller(Removal::default());
    let created = NOW - 600;
    let ingresses = vec![
        unserved("styrmin-web1", "wrong", Some("nginx"), created),
        unserved("styrmin-web1", "other", Some("nginx"), created),
    ];
    let classes = classes(&["nginx"]);
    let namespaces = HashSet::new();
    let moving = crate::audit::moving::MovingIngresses::default();
    let audit_now = || {
        audit(
            &AuditInput {
                view: &view,
                ingresses: &ingresses,
                aliases: &[],
                namespaces: &namespaces,
                ingress_classes: &classes,
                now: NOW,
                previous: None,
                moving: &moving.current(),
            },
            &AuditSettings::default(),
        )
    };
    let of = |report: &CompletedAudit, name: &str| -> Vec<Reason> {
        report
            .findings
            .iter()
            .filter(|f| &*f.name == name)
            .map(|f| f.reason)
            .collect()
    };
    let still = audit_now();
    assert_eq!(of(&still, "wrong"), [Reason::WrongClass, Reason::NotServed]);
    assert_eq!(still.moving_ingresses, 0);

    let guard = moving.hold("to-traefik/prod", [("styrmin-web1", "wrong")]);
    let during = audit_now();
    // Its class is on its way: not `wrong_class`, not conforming either; what else is
    // wrong with it (no address) is still said. The Ingress beside it is not moving.
    assert_eq!(of(&during, "wrong"), [Reason::NotServed]);
    assert_eq!(
        of(&during, "other"),
        [Reason::WrongClass, Reason::NotServed]
    );
    assert_eq!(during.moving_ingresses, 1);
    assert_eq!(during.count(Reason::WrongClass), 1);
    assert_eq!(during.conforming_ingresses, 0);

    drop(guard);
    assert_eq!(
        audit_now().findings,
        still.findings,
        "a step that stops moves nothing"
    );
}

#[test]
fn an_audit_takes_the_texts_of_the_one_before() {
    let view = view_with_controller(Removal::default());
    let created = NOW - 600;
    let ingresses = vec![
        unserved("styrmin-web1", "wrong", Some("nginx"), created),
        unserved("styrmin-web2", "nameless", None, created),
    ];
    let classes = classes(&["nginx"]);
    let namespaces = HashSet::new();
    let audit_after = |previous: Option<&CompletedAudit>| {
        audit(
            &AuditInput {
                view: &view,
                ingresses: &ingresses,
                aliases: &[],
                namespaces: &namespaces,
                ingress_classes: &classes,
                now: NOW,
                previous,
                moving: &MovingSet::default(),
            },
            &AuditSettings::default(),
        )
    };
    let first = audit_after(None);
    assert!(first.findings.len() >= 2, "{:?}", first.findings);
    let shared = |a: &CompletedAudit, b: &CompletedAudit| {
        a.findings.iter().zip(b.findings.iter()).all(|(a, b)| {
            a.texts()
                .zip(b.texts())
                .all(|(a, b)| a.shares_allocation_with(b))
        })
    };
    let second = audit_after(Some(&first));
    assert_eq!(second.findings, first.findings);
    assert!(shared(&first, &second), "every text of the audit before");
    let alone = audit_after(None);
    assert!(!shared(&first, &alone), "an audit alone makes its own");
}

#[test]
fn a_wrong_class_says_which_annotations_the_move_leaves_behind() {
    let view = view_of_with_controller(STEADY_POLICY, Removal::default());
    let with_keys = |name: &str, keys: &[&str], left_out: usize| {
        let mut ingress = (*unserved("styrmin-web1", name, Some("nginx"), NOW - 600)).clone();
        ingress.controller_annotations = keys.iter().map(|k| Box::from(*k)).collect();
        ingress.controller_annotations_left_out = left_out;
        Arc::new(ingress)
    };
    let ingresses = vec![
        with_keys(
            "rewrites",
            &[
                "nginx.ingress.kubernetes.io/rewrite-target",
                "projectcontour.io/websocket-routes",
            ],
            3,
        ),
        with_keys("plain", &[], 0),
    ];
    let why_of = |classes: &[&str]| {
        let report = run_with_classes(&view, &ingresses, &[], &[], classes, NOW);
        report
            .findings
            .iter()
            .filter(|f| f.reason == Reason::WrongClass)
            .map(|f| (f.name.to_string(), f.why.to_string()))
            .collect::<BTreeMap<_, _>>()
    };
    // web1 is in `prod`, whose dedicated ingress takes its Ingresses (annotation traefik).
    let why = why_of(&["nginx", "traefik"]);
    assert!(
        why["rewrites"].ends_with(
            "; moving it to class \"traefik\" leaves 1 annotations that ingress-nginx reads and \
             Traefik does not: nginx.ingress.kubernetes.io/rewrite-target (and 3 more controller \
             annotations, not read: only the first 32 are kept)"
        ),
        "{why:?}"
    );
    assert!(!why["plain"].contains("leaves"), "{why:?}");
    // A target controller Styrmin does not know: said so, not guessed.
    let unknown = |name: &str| -> HashMap<String, String> {
        HashMap::from([
            ("nginx".to_owned(), "k8s.io/ingress-nginx".to_owned()),
            ("traefik".to_owned(), name.to_owned()),
        ])
    };
    let report = audit(
        &AuditInput {
            view: &view,
            ingresses: &ingresses,
            aliases: &[],
            namespaces: &HashSet::new(),
            ingress_classes: &unknown("example.com/gateway"),
            now: NOW,
            previous: None,
            moving: &MovingSet::default(),
        },
        &AuditSettings::default(),
    );
    let rewrites = report
        .findings
        .iter()
        .find(|f| f.reason == Reason::WrongClass && &*f.name == "rewrites")
        .unwrap();
    assert!(
        rewrites
            .why
            .contains("served by example.com/gateway, which Styrmin does not know"),
        "{}",
        rewrites.why
    );
    // No IngressClass for the wanted class: nothing said (unknown_class and plan say it).
    let why = why_of(&["nginx"]);
    assert!(!why["rewrites"].contains("leaves"), "{why:?}");
}
