//! Tests written for mutants that `cargo mutants` found alive (MUTANTS.md): each pins down
//! behaviour that no other test of this crate observed.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use ingress_rules::{
    ClassOrigin, DedicatedIngress, DeployedIngress, Level, LevelName, Levels, ResolvedIngress,
    Setting, SettingsSource, double_quoted, is_ingress_container_list, settings_for,
};

#[test]
fn r6_a_list_is_v1_list_or_an_ingress_group_ingress_list() {
    // Both halves of each condition count: `List` only in `v1`, `IngressList` only in an
    // Ingress group.
    assert!(!is_ingress_container_list("networking.k8s.io/v1", "List"));
    assert!(!is_ingress_container_list("example.com/v1", "IngressList"));
    assert!(!is_ingress_container_list("v1", "IngressList"));
    assert!(is_ingress_container_list(
        "extensions/v1beta1",
        "IngressList"
    ));
}

#[test]
fn r1_is_dedicated_only_for_a_dedicated_answer() {
    assert!(
        ResolvedIngress::Dedicated {
            decided_by: LevelName::Environment
        }
        .is_dedicated()
    );
    assert!(
        !ResolvedIngress::Class {
            class: "nginx".into(),
            decided_by: ClassOrigin::ClusterDefault
        }
        .is_dedicated()
    );
    assert!(
        !ResolvedIngress::NoClass {
            decided_by: LevelName::Cluster
        }
        .is_dedicated()
    );
}

#[test]
fn double_quoted_escapes_control_characters_and_unicode_line_breaks() {
    // Escaped so that the text stays one line of YAML, and reads back as the same string.
    for (value, expected) in [
        ("a\u{1}b", "\"a\\u0001b\""),
        ("a\nb", "\"a\\u000Ab\""),
        ("\u{7f}", "\"\\u007F\""),
        ("a\u{2028}b", "\"a\\u2028b\""),
        ("\u{2029}", "\"\\u2029\""),
        ("\u{feff}x", "\"\\uFEFFx\""),
        ("é✓", "\"é✓\""),
    ] {
        let quoted = double_quoted(value);
        assert_eq!(quoted, expected, "{value:?}");
        let back: String = serde_saphyr::from_str(&quoted).unwrap();
        assert_eq!(back, value);
    }
}

#[test]
fn level_names_as_shown_in_messages() {
    assert_eq!(LevelName::Cluster.to_string(), "cluster");
    assert_eq!(LevelName::Environment.to_string(), "environment");
    assert_eq!(LevelName::Deployment.to_string(), "deployment");
}

#[test]
fn dedicated_ingress_keys_of_every_scalar_type_are_kept() {
    let level: Level =
        serde_saphyr::from_str("dedicated_ingress: {replicas: 2, true: 1, 3: x, 1.5: y}\n")
            .unwrap();
    let dedicated: &DedicatedIngress = level.dedicated_ingress.value().unwrap();
    assert_eq!(dedicated.value_keys, ["replicas", "true", "3", "1.5"]);
}

#[test]
fn a_dedicated_ingress_key_that_is_not_a_scalar_is_reported() {
    let error = serde_saphyr::from_str::<Level>("dedicated_ingress: {[a]: 1}\n")
        .unwrap_err()
        .to_string();
    assert!(error.contains("a key"), "{error}");
}

#[test]
fn w5_a_record_with_an_empty_class_is_no_class() {
    let empty = DeployedIngress::Class(String::new());
    assert_eq!(
        empty.resolved(),
        ResolvedIngress::NoClass {
            decided_by: LevelName::LastDeployed
        }
    );
    assert_eq!(empty.enforced_class(), None);
    assert_eq!(
        DeployedIngress::Class("nginx".into()).resolved(),
        ResolvedIngress::Class {
            class: "nginx".into(),
            decided_by: ClassOrigin::Level(LevelName::LastDeployed)
        }
    );
    assert_eq!(
        DeployedIngress::Class("nginx".into()).enforced_class(),
        Some("nginx")
    );
    assert_eq!(DeployedIngress::Dedicated.enforced_class(), Some("traefik"));
    assert_eq!(DeployedIngress::NoClass.enforced_class(), None);
}

#[test]
fn w5_only_a_dedicated_record_is_dedicated() {
    assert!(DeployedIngress::Dedicated.is_dedicated());
    assert!(!DeployedIngress::Class("traefik".into()).is_dedicated());
    assert!(!DeployedIngress::NoClass.is_dedicated());
}

#[test]
fn w5_settings_source_names() {
    assert_eq!(SettingsSource::Record.as_str(), "record");
    assert_eq!(SettingsSource::Levels.as_str(), "levels");
    assert_eq!(SettingsSource::Record.to_string(), "record");
    assert_eq!(SettingsSource::Levels.to_string(), "levels");
}

#[test]
fn w5_why_says_whether_the_record_and_the_levels_agree() {
    let cluster = Level {
        ingress_class: Setting::Value("nginx".into()),
        ..Level::default()
    };
    let levels = Levels {
        cluster: &cluster,
        environment: None,
        deployment: None,
    };
    let same = settings_for(Some(&DeployedIngress::Class("nginx".into())), &levels).why();
    assert!(same.contains("also what the levels give now"), "{same}");
    let other = settings_for(Some(&DeployedIngress::Dedicated), &levels).why();
    assert!(other.contains("only when Styrmin redeploys it"), "{other}");
    assert!(!other.contains("also what the levels give now"), "{other}");
}
