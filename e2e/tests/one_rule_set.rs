//! One rule set: for every Ingress of every real rendered stream and every configuration
//! of the resolution table, the post-renderer's output equals the webhook's patched object.
//!
//! The post-renderer side is `styrmin_postrender::streaming::render_stream` (what the binary runs)
//! on the stream; the webhook side is its router, in-process, answering a real AdmissionReview (CREATE and
//! UPDATE) for the same Ingress as the API server would send it (JSON), in the namespace of
//! a deployment whose three levels are the same configuration; its JSON patch is applied
//! with an RFC 6902 implementation. Both results are compared as JSON.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::path::Path;

use styrmin_ingress_rules::{Level, resolve};
use styrmin_postrender::config::StyrminConfig;
use styrmin_postrender::render::RenderRules;
use styrmin_postrender::streaming;
use styrmin_webhook::policy_file::parse_policy;
use support::{Admitted, RESOLUTION_TABLE, Webhook, ingresses, rendered_streams};

mod support;

fn streams() -> Vec<(String, String)> {
    rendered_streams()
        .into_iter()
        .map(|(name, path)| (name, std::fs::read_to_string(&path).unwrap()))
        .collect()
}

#[tokio::test]
async fn post_renderer_output_equals_webhook_patched_object() {
    let default_cluster = Level::default();
    let mut compared = 0;
    for config in RESOLUTION_TABLE {
        let styrmin_config = StyrminConfig::from_yaml(&config.config_yaml(), "test").unwrap();
        let rules = RenderRules {
            resolved: resolve(&styrmin_config.levels(&default_cluster)),
            kubernetes: None,
            strict: false,
        };
        let webhook = Webhook::new(&config.policy_yaml());
        for (name, text) in streams() {
            let stream =
                streaming::render_stream(text.as_bytes(), &rules, streaming::BLOCK_BYTES).unwrap();
            let mut output = Vec::new();
            stream.write(&mut output).unwrap();
            let rendered = stream.into_rendered();
            let before = ingresses(&text);
            let after = ingresses(&String::from_utf8(output).unwrap());
            assert_eq!(before.len(), after.len(), "{name}");
            let warned: Vec<_> = rendered
                .ingresses
                .iter()
                .map(|o| o.warning.is_some())
                .collect();
            assert_eq!(
                warned.len(),
                before.len(),
                "{name}: every Ingress has an outcome"
            );
            for (i, (object, post_rendered)) in before.iter().zip(&after).enumerate() {
                for operation in ["CREATE", "UPDATE"] {
                    let Admitted {
                        object: admitted,
                        warnings,
                        ..
                    } = webhook
                        .admit(operation, object, &format!("uid-{compared}"))
                        .await;
                    assert_eq!(
                        &admitted, post_rendered,
                        "{name}, config {config:?}, {operation} of Ingress {}",
                        object["metadata"]["name"]
                    );
                    // W4 = R5: the same Ingresses are warned about on both paths.
                    assert_eq!(
                        !warnings.is_empty(),
                        warned[i],
                        "{name}, config {config:?}: warning for {}",
                        object["metadata"]["name"]
                    );
                    compared += 1;
                }
            }
        }
    }
    // 27 streams, most with one or more Ingresses, × the table × two operations.
    assert!(
        compared >= 20 * RESOLUTION_TABLE.len() * 2,
        "only {compared} comparisons"
    );
}

#[test]
fn policy_and_config_describe_the_same_levels() {
    // The translation itself: the webhook's view resolves each configuration as the
    // post-renderer's config does.
    let default_cluster = Level::default();
    for config in RESOLUTION_TABLE {
        let styrmin_config = StyrminConfig::from_yaml(&config.config_yaml(), "test").unwrap();
        let view = parse_policy(Path::new("p.yaml"), &config.policy_yaml()).unwrap();
        assert_eq!(
            resolve(&view.levels_for_deployment("app")),
            resolve(&styrmin_config.levels(&default_cluster)),
            "{config:?}"
        );
    }
}

/// The class fields of an Ingress object: `(spec.ingressClassName, the class annotation)`.
fn class_fields(object: &serde_json::Value) -> (serde_json::Value, serde_json::Value) {
    (
        object["spec"]["ingressClassName"].clone(),
        object["metadata"]["annotations"][styrmin_ingress_rules::CLASS_ANNOTATION].clone(),
    )
}

/// The audit judges an Ingress already in the cluster as admission judges it when it is
/// written: for every Ingress of every real stream × the resolution table, the audit reports
/// `wrong_class` exactly when admission patches it, and its FIX (a merge patch) gives the
/// Ingress the class fields admission gives it.
#[tokio::test]
async fn the_audit_agrees_with_admission() {
    use std::collections::HashSet;
    use std::sync::Arc;

    use styrmin_webhook::audit::objects::AuditedIngress;
    use styrmin_webhook::audit::{AuditInput, AuditSettings, Reason, audit};

    let (mut patched, mut conforming) = (0, 0);
    for config in RESOLUTION_TABLE {
        let webhook = Webhook::new(&config.policy_yaml());
        let view = parse_policy(Path::new("p.yaml"), &config.policy_yaml()).unwrap();
        for (name, text) in streams() {
            for (i, object) in ingresses(&text).into_iter().enumerate() {
                let admitted = webhook.admit("CREATE", &object, &format!("uid-{i}")).await;
                // As the watch stores it: in the deployment's namespace, served (an address).
                let mut stored = object.clone();
                stored["metadata"]["namespace"] = "styrmin-app".into();
                stored["status"] =
                    serde_json::json!({"loadBalancer": {"ingress": [{"ip": "192.0.2.1"}]}});
                let audited: AuditedIngress = serde_json::from_value(stored).unwrap();
                // Every class it names exists: only the class fields are compared here.
                let ingress_classes: std::collections::HashMap<String, String> = audited
                    .class_fields()
                    .ingress_class_name
                    .into_iter()
                    .map(|name| (name, String::new()))
                    .collect();
                let report = audit(
                    &AuditInput {
                        view: &view,
                        ingresses: &[Arc::new(audited)],
                        aliases: &[],
                        namespaces: &HashSet::new(),
                        ingress_classes: &ingress_classes,
                        now: 0,
                        previous: None,
                        moving: &Default::default(),
                    },
                    &AuditSettings::default(),
                );
                let what = format!(
                    "{name}, config {config:?}, Ingress {}",
                    object["metadata"]["name"]
                );
                assert_eq!(report.ingresses, 1, "{what}");
                let reasons: Vec<Reason> = report.findings.iter().map(|f| f.reason).collect();
                if !admitted.patched {
                    assert!(
                        reasons.is_empty(),
                        "{what}: admission keeps it, the audit says {reasons:?}"
                    );
                    conforming += 1;
                    continue;
                }
                assert_eq!(reasons, [Reason::WrongClass], "{what}");
                let fix = &report.findings[0].fix;
                let merge: serde_json::Value = fix
                    .split_once('\'')
                    .and_then(|(_, rest)| rest.rsplit_once('\''))
                    .map(|(patch, _)| serde_json::from_str(patch).unwrap())
                    .unwrap_or_else(|| panic!("{what}: no merge patch in {fix:?}"));
                let mut fixed = object.clone();
                json_patch::merge(&mut fixed, &merge);
                assert_eq!(
                    class_fields(&fixed),
                    class_fields(&admitted.object),
                    "{what}: {fix}"
                );
                patched += 1;
            }
        }
    }
    assert!(
        patched >= 20 && conforming >= 20,
        "{patched} patched, {conforming} conforming"
    );
}
