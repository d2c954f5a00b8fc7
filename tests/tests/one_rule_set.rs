//! One rule set: for every Ingress of every real rendered stream and every configuration
//! of the resolution table, the post-renderer's output equals the webhook's patched object.
//!
//! The post-renderer side is `postrender::render` (what the binary runs) on the stream; the
//! webhook side is its router, in-process, answering a real AdmissionReview (CREATE and
//! UPDATE) for the same Ingress as the API server would send it (JSON), in the namespace of
//! a deployment whose three levels are the same configuration; its JSON patch is applied
//! with an RFC 6902 implementation. Both results are compared as JSON.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::path::Path;

use ingress_rules::{Level, resolve};
use postrender::config::StyrminConfig;
use postrender::render::{self, RenderRules};
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
            let rendered = render::render(text.as_bytes(), &rules).unwrap();
            let mut output = Vec::new();
            render::write(text.as_bytes(), &rendered, &mut output).unwrap();
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
