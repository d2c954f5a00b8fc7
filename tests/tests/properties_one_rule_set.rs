//! One rule set, as a property (proptest): for generated streams of Ingresses (the
//! generators of `postrender/tests/support/ingress_gen.rs`, with class fields that the API
//! server could hold: strings or nothing) and generated configuration levels, the
//! post-renderer's output equals the webhook's patched object for every Ingress, on CREATE
//! and UPDATE, and both warn about the same Ingresses (R5, W4).
//!
//! The webhook runs in-process (its router, `oneshot`), with the same levels as a policy
//! file; its JSON patch is applied with an RFC 6902 implementation (`json-patch`), as in
//! `one_rule_set.rs`. 256 cases by default (about a second); `PROPTEST_CASES` scales it (run
//! on 2 Dec 2026: 10,000 cases passed in 51 s).

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

#[path = "../../postrender/tests/support/ingress_gen.rs"]
mod ingress_gen;

use std::path::Path;
use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use base64::Engine as _;
use http_body_util::BodyExt as _;
use ingress_rules::{INGRESS_API_VERSIONS, Level, is_ingress_container_list, resolve};
use postrender::config::StyrminConfig;
use postrender::render::{self, RenderRules};
use postrender::stream;
use proptest::prelude::*;
use serde_json::{Value, json};
use styrmin_webhook::metrics::Metrics;
use styrmin_webhook::policy_file::parse_policy;
use styrmin_webhook::view::ViewStore;
use styrmin_webhook::{AppState, router};
use tower::ServiceExt as _;

use ingress_gen::{ConfigGen, StreamGen};

fn is_ingress(v: &Value) -> bool {
    v["kind"] == "Ingress"
        && INGRESS_API_VERSIONS.contains(&v["apiVersion"].as_str().unwrap_or_default())
}

/// The Ingresses of a stream, in order, as JSON (List items included).
fn ingresses(text: &str) -> Vec<Value> {
    let mut found = Vec::new();
    for document in stream::split(text) {
        let doc: Option<Value> = serde_saphyr::from_str(&text[document.range]).unwrap();
        let Some(doc) = doc else { continue };
        if is_ingress(&doc) {
            found.push(doc);
        } else if is_ingress_container_list(
            doc["apiVersion"].as_str().unwrap_or_default(),
            doc["kind"].as_str().unwrap_or_default(),
        ) {
            found.extend(
                doc["items"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|i| is_ingress(i))
                    .cloned(),
            );
        }
    }
    found
}

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

/// The object after the webhook's answer, whether it warned, and whether it patched.
async fn admit(state: &AppState, operation: &str, object: &Value) -> (Value, bool, bool) {
    let review = json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "property",
            "kind": {"group": "networking.k8s.io", "version": "v1", "kind": "Ingress"},
            "resource": {"group": "networking.k8s.io", "version": "v1", "resource": "ingresses"},
            "name": "generated",
            "namespace": "styrmin-app",
            "operation": operation,
            "userInfo": {"username": "kubectl"},
            "object": object,
            "oldObject": if operation == "UPDATE" { object.clone() } else { Value::Null },
            "dryRun": false,
        }
    });
    let request = Request::post("/mutate?timeout=10s")
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(serde_json::to_vec(&review).unwrap()))
        .unwrap();
    let response = router(state.clone()).oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let answer: Value = serde_json::from_slice(&bytes).unwrap();
    let response = &answer["response"];
    assert_eq!(response["uid"], "property");
    assert_eq!(response["allowed"], true, "{answer}");
    let mut patched = object.clone();
    let has_patch = response.get("patch").is_some();
    if let Some(patch) = response.get("patch") {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(patch.as_str().unwrap())
            .unwrap();
        let patch: json_patch::Patch = serde_json::from_slice(&bytes).unwrap();
        json_patch::patch(&mut patched, &patch).unwrap();
    }
    let warned = response["warnings"]
        .as_array()
        .is_some_and(|w| !w.is_empty());
    (patched, warned, has_patch)
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
    let state = AppState::new(Arc::new(ViewStore::default()), Arc::new(Metrics::new()));
    state.view_sink().publish(view);

    let rendered = render::render(text.as_bytes(), &rules)
        .map_err(|e| TestCaseError::fail(format!("render: {e}\n{text}")))?;
    let mut output = Vec::new();
    render::write(text.as_bytes(), &rendered, &mut output).unwrap();
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
            let (admitted, warned, _) =
                runtime.block_on(admit(&state, operation, &as_stored(object)));
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
            let (_, _, patched_again) =
                runtime.block_on(admit(&state, operation, &as_stored(post_rendered)));
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
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        check(&runtime, &stream, &config)?;
    }
}
