//! One rule set, as a property (proptest): for generated streams of Ingresses (the
//! generators of `test-support/src/ingress_gen.rs`, with class fields that the API
//! server could hold: strings or nothing) and generated configuration levels, the
//! post-renderer's output equals the webhook's patched object for every Ingress, on CREATE
//! and UPDATE, and both warn about the same Ingresses (R5, W4).
//!
//! The webhook runs in-process (its router, `oneshot`), with the same levels as a policy
//! file; its JSON patch is applied with an RFC 6902 implementation (`json-patch`), as in
//! `one_rule_set.rs`. 256 cases by default (about a second); `PROPTEST_CASES` scales it (run
//! on 2 Dec 2026: 10,000 cases passed in 51 s).

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::path::Path;

use proptest::prelude::*;
use serde_json::Value;
use styrmin_ingress_rules::{Level, resolve};
use styrmin_postrender::config::StyrminConfig;
use styrmin_postrender::render::RenderRules;
use styrmin_postrender::streaming;
use styrmin_webhook::policy_file::parse_policy;
use support::{Webhook, ingresses};

use styrmin_test_support::ingress_gen::{self, ConfigGen, StreamGen};

mod support;

/// The object as the API server holds it, sends it to webhooks and stores it: a `null`
/// of an optional field is no field, and an empty `annotations` map is omitted.
fn as_stored(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut out = serde_json::Map::new();
            for (k, v) in map {
                let v = as_stored(v);
                let empty_annotations =
                    k == "annotations" && v.as_object().is_some_and(serde_json::Map::is_empty);
                if !v.is_null() && !empty_annotations {
                    out.insert(k.clone(), v);
                }
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(as_stored).collect()),
        other => other.clone(),
    }
}

fn check(
    runtime: &tokio::runtime::Runtime,
    stream_gen: &StreamGen,
    config: &ConfigGen,
) -> Result<usize, TestCaseError> {
    let (text, _) = stream_gen.text();
    let styrmin_config = StyrminConfig::from_yaml(&config.postrender_yaml(), "generated").unwrap();
    let default_cluster = Level::default();
    let rules = RenderRules {
        resolved: resolve(&styrmin_config.levels(&default_cluster)),
        kubernetes: None,
        strict: false,
    };
    let view = parse_policy(Path::new("generated.yaml"), &config.policy_yaml()).unwrap();
    // The translation itself: both read the same levels.
    prop_assert_eq!(
        &resolve(&view.levels_for_deployment("app")),
        &rules.resolved,
        "policy:\n{}",
        config.policy_yaml()
    );
    let webhook = Webhook::new(&config.policy_yaml());

    let stream = streaming::render_stream(text.as_bytes(), &rules, streaming::BLOCK_BYTES)
        .map_err(|e| TestCaseError::fail(format!("render: {e}\n{text}")))?;
    let mut output = Vec::new();
    stream.write(&mut output).unwrap();
    let rendered = stream.into_rendered();
    let output = String::from_utf8(output).unwrap();
    let (before, after) = (ingresses(&text), ingresses(&output));
    prop_assert_eq!(before.len(), after.len());
    prop_assert_eq!(rendered.ingresses.len(), before.len());
    let context = format!(
        "config:\n{}--- input:\n{text}\n--- output:\n{output}",
        config.postrender_yaml()
    );
    for ((object, post_rendered), outcome) in before.iter().zip(&after).zip(&rendered.ingresses) {
        for operation in ["CREATE", "UPDATE"] {
            let admitted =
                runtime.block_on(webhook.admit(operation, &as_stored(object), "property"));
            let (admitted, warned) = (admitted.object, !admitted.warnings.is_empty());
            prop_assert_eq!(
                &as_stored(&admitted),
                &as_stored(post_rendered),
                "{} of {}\n{}",
                operation,
                object,
                context
            );
            prop_assert_eq!(warned, outcome.warning.is_some(), "W4 = R5\n{}", context);
            // R8: no patch for what already conforms.
            let patched_again = runtime
                .block_on(webhook.admit(operation, &as_stored(post_rendered), "property"))
                .patched;
            prop_assert!(
                !patched_again,
                "a second patch for {}\n{}",
                post_rendered,
                context
            );
        }
    }
    Ok(before.len())
}

proptest! {
    #![proptest_config(ProptestConfig {
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn post_renderer_and_webhook_agree_on_generated_ingresses(
        stream in ingress_gen::stream(true),
        config in ingress_gen::config(),
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        check(&runtime, &stream, &config)?;
    }
}
