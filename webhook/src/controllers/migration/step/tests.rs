//! A step's decisions on recorded objects and policy-file views.

use std::path::Path;

use serde_json::{Value, json};

use super::*;
use crate::crd::migration::StyrminMigration;
use crate::policy_file::parse_policy;

fn ingress(namespace: &str, name: &str, class: Option<&str>) -> Arc<AuditedIngress> {
    let mut object = json!({"metadata": {"name": name, "namespace": namespace}, "spec": {}});
    if let Some(class) = class {
        object["spec"]["ingressClassName"] = json!(class);
        object["metadata"]["annotations"] = json!({"kubernetes.io/ingress.class": class});
    }
    Arc::new(serde_json::from_value(object).unwrap())
}

fn fields(class: &str) -> ClassFields {
    ClassFields {
        ingress_class_name: Some(class.to_owned()),
        class_annotation: Some(class.to_owned()),
    }
}

const BEFORE: &str = "
cluster: {ingress_class: nginx}
environments:
  staging: {}
  prod: {}
deployments:
  web1: {environment: staging}
  web2: {environment: staging, last_deployed: {ingress_class: nginx}}
  web3: {environment: prod}
  own: {environment: staging, ingress_class: contour}
  quiet: {environment: staging, enforcement_mode: warn}
";

const STAGING_MOVES: &str = "
cluster: {ingress_class: nginx}
environments:
  staging: {ingress_class: haproxy}
  prod: {}
deployments:
  web1: {environment: staging}
  web2: {environment: staging, last_deployed: {ingress_class: nginx}}
  web3: {environment: prod}
  own: {environment: staging, ingress_class: contour}
  quiet: {environment: staging, enforcement_mode: warn}
";

#[test]
fn a_step_moves_the_ingresses_whose_levels_change_and_records_the_rest() {
    let before = parse_policy(Path::new("before"), BEFORE).unwrap();
    let after = parse_policy(Path::new("after"), STAGING_MOVES).unwrap();
    let ingresses = [
        ingress("styrmin-web1", "web", Some("nginx")),
        ingress("styrmin-web1", "api", Some("haproxy")),
        ingress("styrmin-web2", "web", Some("nginx")),
        ingress("styrmin-web3", "web", Some("nginx")),
        ingress("styrmin-own", "web", Some("contour")),
        ingress("styrmin-quiet", "web", Some("nginx")),
        ingress("default", "web", Some("nginx")),
    ];
    let movers = movers(&before, &after, &ingresses);
    let names: Vec<(&str, &str, bool)> = movers
        .ingresses
        .iter()
        .map(|m| (m.namespace.as_str(), m.name.as_str(), m.is_moved()))
        .collect();
    // Prod, other namespaces and the deployment with its own class stay; api is there.
    assert_eq!(
        names,
        [
            ("styrmin-web1", "api", true),
            ("styrmin-web1", "web", false),
            ("styrmin-web2", "web", false)
        ]
    );
    for mover in &movers.ingresses {
        assert_eq!(mover.to, fields("haproxy"), "{mover:?}");
        assert_eq!(mover.target_class(), Some("haproxy"));
        assert_eq!(mover.back, fields("nginx"), "{mover:?}");
    }
    // web2's record (nginx) is what admission gives it until the record is updated.
    assert_eq!(
        movers.records.into_iter().collect::<Vec<_>>(),
        [("web2".to_owned(), IngressTarget::class("haproxy"))]
    );
    assert_eq!(
        movers.left_in_place.into_iter().collect::<Vec<_>>(),
        ["own", "quiet"]
    );
}

#[test]
fn a_step_that_changes_nothing_moves_nothing() {
    let before = parse_policy(Path::new("before"), BEFORE).unwrap();
    let movers = movers(
        &before,
        &before,
        &[ingress("styrmin-web1", "web", Some("nginx"))],
    );
    assert_eq!(movers, Movers::default());
}

#[test]
fn served_means_the_target_class_and_the_canarys_address() {
    let to = fields("haproxy");
    let canary = ["10.0.0.2".to_owned()];
    let ingress = |class: &str, addresses: &[&str]| ServedIngress {
        fields: fields(class),
        addresses: addresses.iter().map(|a| (*a).to_owned()).collect(),
        hosts: vec!["web.example".to_owned()],
    };
    let judge = |i: &ServedIngress, mode| judge_served(i, &to, &canary, mode);
    assert_eq!(
        judge(
            &ingress("haproxy", &["10.0.0.1", "10.0.0.2"]),
            AddressMatch::Canary
        ),
        Ok("10.0.0.2".to_owned())
    );
    let stale = judge(&ingress("haproxy", &["10.0.0.1"]), AddressMatch::Canary).unwrap_err();
    assert!(
        stale.contains("none of them the address of class \"haproxy\""),
        "{stale}"
    );
    assert_eq!(
        judge(&ingress("haproxy", &["10.0.0.1"]), AddressMatch::Any),
        Ok("10.0.0.1".to_owned())
    );
    let none = judge(&ingress("haproxy", &[]), AddressMatch::Any).unwrap_err();
    assert!(none.contains("no address"), "{none}");
    let wrong = judge(&ingress("nginx", &["10.0.0.2"]), AddressMatch::Canary).unwrap_err();
    assert!(wrong.contains("where the step wants haproxy"), "{wrong}");
}

#[test]
fn the_failure_share_is_a_whole_percent_bound() {
    assert!(!too_many_failed(0, 250, 0));
    assert!(too_many_failed(1, 250, 0));
    assert!(!too_many_failed(2, 250, 1), "0.8 % of 1 %");
    assert!(too_many_failed(3, 250, 1), "1.2 %");
    assert!(!too_many_failed(250, 250, 100));
    assert!(!too_many_failed(usize::MAX, usize::MAX, 100), "no overflow");
}

#[test]
fn the_failing_list_is_bounded_and_keeps_one_entry_an_ingress() {
    let mut step = StepStatus::default();
    for n in 0..100 {
        note_failing(
            &mut step,
            "styrmin-a",
            &format!("web{n}"),
            "no address".to_owned(),
        );
    }
    note_failing(&mut step, "styrmin-a", "web0", "later".to_owned());
    assert_eq!(step.failing.len(), MAX_FAILING_LISTED);
    assert_eq!(step.failing[0].reason, "later");
}

#[test]
fn a_steps_changes_are_checked_and_keyed() {
    let migration: StyrminMigration = serde_saphyr::from_str(
        "
apiVersion: styrmin.io/v1alpha1
kind: StyrminMigration
metadata: {name: m}
spec:
  steps:
  - name: one
    changes:
    - {apiVersion: styrmin.io/v1alpha1, kind: StyrminEnvironment, metadata: {name: staging}, spec: {ingressClass: null}}
    - {apiVersion: styrmin.io/v1alpha1, kind: StyrminDeployment, metadata: {name: styrmin-web1, namespace: styrmin-web1}, spec: {environmentId: staging}}
  - name: bad
    changes:
    - {apiVersion: v1, kind: ConfigMap, metadata: {name: x}}
",
    )
    .unwrap();
    let changes = step_changes(&migration.spec.steps[0]).unwrap();
    assert_eq!(changes[0].0.to_string(), "StyrminEnvironment staging");
    assert_eq!(changes[0].1, json!({"ingressClass": null}), "null is kept");
    assert_eq!(
        changes[1].0.to_string(),
        "StyrminDeployment styrmin-web1/styrmin-web1"
    );
    let error = step_changes(&migration.spec.steps[1])
        .unwrap_err()
        .to_string();
    assert!(error.contains("step \"bad\""), "{error}");
    // What a rollback keeps: the spec, or nothing when the object did not exist.
    let kept = previous_object(&changes[0].0, None, None);
    assert_eq!(level_key(&kept), Some(changes[0].0.clone()));
    assert!(kept.get("spec").is_none());
}

#[test]
fn levels_with_an_absent_object_leave_it_out() {
    let environment: StyrminEnvironment = serde_json::from_value(json!({
        "apiVersion": "styrmin.io/v1alpha1", "kind": "StyrminEnvironment",
        "metadata": {"name": "staging"}, "spec": {"ingressClass": "nginx"}
    }))
    .unwrap();
    let levels = Levels {
        environments: vec![Arc::new(environment)],
        ..Levels::default()
    };
    let key = LevelKey {
        kind: LevelKind::Environment,
        namespace: None,
        name: "staging".to_owned(),
    };
    let set = levels
        .with(&[(key.clone(), Some(json!({"ingressClass": "haproxy"})))])
        .unwrap();
    assert_eq!(
        set.environments[0].spec.settings.ingress_class,
        styrmin_ingress_rules::Setting::Value("haproxy".to_owned())
    );
    assert!(levels.with(&[(key, None)]).unwrap().environments.is_empty());
}

#[test]
fn notes_are_cut_on_a_character_and_canaries_named_by_migration_and_class() {
    let long = "é".repeat(MAX_NOTE);
    let cut = bounded_note(&long);
    assert!(cut.len() <= MAX_NOTE && cut.ends_with('…'));
    assert_eq!(bounded_note("short"), "short");
    let (name, host) = canary_names("leave-nginx", "haproxy");
    assert_eq!(
        canary_names("leave-nginx", "haproxy"),
        (name.clone(), host.clone())
    );
    assert_ne!(canary_names("leave-nginx", "traefik").0, name);
    assert!(name.starts_with("styrmin-canary-") && name.len() <= 63);
    assert!(host.ends_with(".styrmin.invalid"));
    assert_eq!(
        record_of(&IngressTarget::class("haproxy")),
        json!({"ingressClass": "haproxy"})
    );
    assert_eq!(
        record_of(&IngressTarget::Dedicated),
        json!({"dedicatedIngress": {}})
    );
    assert_eq!(
        record_of(&IngressTarget::NoClass),
        json!({"ingressClass": ""})
    );
}

#[test]
fn from_warn_to_enforce_moves_what_was_only_warned_about() {
    let before = parse_policy(
        Path::new("before"),
        "cluster: {ingress_class: haproxy, enforcement_mode: warn}\ndeployments:\n  web1: {}\n",
    )
    .unwrap();
    let after = parse_policy(
        Path::new("after"),
        "cluster: {ingress_class: haproxy, enforcement_mode: enforce}\ndeployments:\n  web1: {}\n",
    )
    .unwrap();
    let movers = movers(
        &before,
        &after,
        &[
            ingress("styrmin-web1", "web", Some("nginx")),
            ingress("styrmin-web1", "ok", Some("haproxy")),
        ],
    );
    let moved: Vec<(&str, bool)> = movers
        .ingresses
        .iter()
        .map(|m| (m.name.as_str(), m.is_moved()))
        .collect();
    assert_eq!(moved, [("ok", true), ("web", false)]);
    // In warn admission changed nothing: back is where it was.
    assert_eq!(movers.ingresses[1].back, fields("nginx"));
    assert_eq!(movers.ingresses[1].to, fields("haproxy"));
}

#[test]
fn the_levels_before_a_step_read_the_records_it_replaced() {
    let deployment = |annotation: Option<Value>| {
        let mut object = json!({
            "apiVersion": "styrmin.io/v1alpha1", "kind": "StyrminDeployment",
            "metadata": {"name": "styrmin-web2", "namespace": "styrmin-web2"},
            "spec": {"environmentId": "staging"},
            "status": {"lastDeployed": {"ingressClass": "haproxy"}},
        });
        if let Some(kept) = annotation {
            object["metadata"]["annotations"] = json!({RECORD_BEFORE_ANNOTATION: kept.to_string()});
        }
        Arc::new(serde_json::from_value::<StyrminDeployment>(object).unwrap())
    };
    let record = |d: &StyrminDeployment| {
        serde_json::to_value(&d.status.as_ref().unwrap().last_deployed).unwrap()
    };
    let kept = json!({"migration": "leave-nginx", "lastDeployed": {"ingressClass": "nginx"}});
    let restored = with_kept_records(&[deployment(Some(kept.clone()))], "leave-nginx");
    assert_eq!(record(&restored[0]), json!({"ingressClass": "nginx"}));
    // Another migration's, or none: as it is.
    let other = with_kept_records(&[deployment(Some(kept))], "other");
    assert_eq!(record(&other[0]), json!({"ingressClass": "haproxy"}));
    // No record before: none.
    let none = json!({"migration": "m", "lastDeployed": null});
    let restored = with_kept_records(&[deployment(Some(none))], "m");
    assert_eq!(record(&restored[0]), Value::Null);
}

#[test]
fn a_probe_asks_each_host_once_without_wildcards_and_at_most_eight() {
    let hosts: Vec<String> = ["a.test", "*.b.test", "a.test"]
        .into_iter()
        .map(str::to_owned)
        .chain((0..1000).map(|n| format!("h{n}.test")))
        .collect();
    let asked = hosts_to_probe(&hosts);
    assert_eq!(asked.len(), MAX_PROBED_HOSTS);
    assert_eq!(asked[..2], ["a.test".to_owned(), "h0.test".to_owned()]);
    assert!(hosts_to_probe(&["*.only.test".to_owned()]).is_empty());
}

#[test]
fn step_status_follows_the_spec_by_name_when_a_step_is_added() {
    let step = |name: &str| MigrationStep {
        name: name.to_owned(),
        changes: Vec::new(),
    };
    let moving = StepStatus {
        name: "cluster".to_owned(),
        phase: crate::crd::migration::StepPhase::Moving,
        moved: 40,
        previous: vec![json!({"kind": "StyrminCluster", "metadata": {"name": "default"}})],
        ..StepStatus::default()
    };
    let done = StepStatus {
        name: "staging".to_owned(),
        phase: crate::crd::migration::StepPhase::Done,
        ..StepStatus::default()
    };
    let kept = vec![done.clone(), moving.clone()];
    // The same steps: nothing changes.
    let same = match_steps(&[step("staging"), step("cluster")], kept.clone());
    assert_eq!(same, kept);
    // A step added before the one in flight: each keeps its own status, by name.
    let added = match_steps(
        &[step("staging"), step("canary"), step("cluster")],
        kept.clone(),
    );
    assert_eq!(added[0], done);
    assert_eq!(added[1].name, "canary");
    assert_eq!(added[1].phase, crate::crd::migration::StepPhase::Pending);
    assert_eq!(
        added[2], moving,
        "the step in flight keeps its counts and rollback data"
    );
}

#[test]
fn each_step_and_note_has_its_own_event_action() {
    let one = event_action(Some("staging"), "levels set, moving 3 Ingresses");
    assert!(one.starts_with("Migrate-") && one.len() <= 128, "{one}");
    assert_eq!(
        one,
        event_action(Some("staging"), "levels set, moving 3 Ingresses")
    );
    assert_ne!(
        one,
        event_action(Some("cluster"), "levels set, moving 3 Ingresses")
    );
    assert_ne!(
        one,
        event_action(Some("staging"), "levels set, moving 4 Ingresses")
    );
    assert_ne!(one, event_action(None, "levels set, moving 3 Ingresses"));
}

#[test]
fn progressing_says_whether_the_executor_gets_on_and_why_not() {
    use crate::crd::migration::{MigrationPhase, StepPhase, StyrminMigrationStatus};
    let mut status = StyrminMigrationStatus {
        phase: Some(MigrationPhase::Running),
        current_step: Some("cluster".to_owned()),
        steps: vec![StepStatus {
            name: "cluster".to_owned(),
            phase: StepPhase::Verifying,
            planned: 10,
            moved: 4,
            served: 3,
            ..StepStatus::default()
        }],
        ..StyrminMigrationStatus::default()
    };
    assert_eq!(
        progressing(&status),
        (
            true,
            "Verifying",
            "step \"cluster\": 4 of 10 moved, 3 served, 0 failed".to_owned()
        )
    );
    status.steps[0].phase = StepPhase::RolledBack;
    assert_eq!(progressing(&status).1, "RollingBack");
    status.steps[0].phase = StepPhase::SettingLevels;
    assert_eq!(
        progressing(&status),
        (
            true,
            "SettingLevels",
            "step \"cluster\": 4 of 10 moved, 3 served, 0 failed".to_owned()
        )
    );
    status.phase = Some(MigrationPhase::Paused);
    assert!(!progressing(&status).0);
    assert_eq!(progressing(&status).1, "Paused");
    status.phase = Some(MigrationPhase::Failed);
    assert_eq!(progressing(&status).1, "Failed");
    assert_eq!(
        progressing(&StyrminMigrationStatus::default()),
        (true, "Starting", String::new())
    );
}

#[test]
fn a_move_to_a_dedicated_controller_is_refused_and_one_to_a_class_is_not() {
    let before = parse_policy(Path::new("before"), BEFORE).unwrap();
    let ingresses = [
        ingress("styrmin-web1", "web", Some("nginx")),
        ingress("styrmin-web1", "api", Some("nginx")),
        ingress("styrmin-web3", "web", Some("nginx")),
    ];
    let dedicated = parse_policy(
        Path::new("after"),
        &STAGING_MOVES.replace(
            "staging: {ingress_class: haproxy}",
            "staging: {dedicated_ingress: {}}",
        ),
    )
    .unwrap();
    let to_dedicated = movers(&before, &dedicated, &ingresses);
    assert!(
        to_dedicated
            .ingresses
            .iter()
            .any(|m| m.target_class() == Some("traefik")),
        "{to_dedicated:?}"
    );
    let why = ungated_targets(&to_dedicated).unwrap();
    assert!(
        why.starts_with(
            "2 Ingresses would move to their environment's dedicated controller (styrmin-web1/api"
        ),
        "{why}"
    );
    let to_a_class = parse_policy(Path::new("after"), STAGING_MOVES).unwrap();
    assert_eq!(
        ungated_targets(&movers(&before, &to_a_class, &ingresses)),
        None
    );
}

#[test]
fn a_migration_is_ours_unclaimed_or_another_executors_by_its_status() {
    let ours = "styrmin-system/styrmin-webhook-controllers";
    for (executor, expected) in [
        (None, Ownership::Unclaimed),
        (Some(ours), Ownership::Ours),
        (
            Some("styrmin-canary/styrmin-webhook-controllers"),
            Ownership::Theirs {
                namespace: "styrmin-canary",
                name: "styrmin-webhook-controllers",
            },
        ),
        // What names no Lease is nobody's: the executor claims it.
        (Some(""), Ownership::Unclaimed),
        (Some("no-slash"), Ownership::Unclaimed),
        (Some("/name"), Ownership::Unclaimed),
        (Some("namespace/"), Ownership::Unclaimed),
    ] {
        assert_eq!(ownership(executor, ours), expected, "{executor:?}");
    }
}
