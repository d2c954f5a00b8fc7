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
use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use base64::Engine as _;
use http_body_util::BodyExt as _;
use ingress_rules::{Level, is_ingress_container_list, resolve};
use postrender::config::StyrminConfig;
use postrender::render::{self, RenderRules};
use postrender::stream;
use serde_json::{Value, json};
use styrmin_webhook::metrics::Metrics;
use styrmin_webhook::policy_file::parse_policy;
use styrmin_webhook::view::ViewStore;
use styrmin_webhook::{AppState, router};
use support::{RESOLUTION_TABLE, is_ingress, rendered_streams};
use tower::ServiceExt as _;

mod support;

fn streams() -> Vec<(String, String)> {
    rendered_streams()
        .into_iter()
        .map(|(name, path)| (name, std::fs::read_to_string(&path).unwrap()))
        .collect()
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

struct Webhook {
    state: AppState,
}

impl Webhook {
    fn new(policy: &str) -> Self {
        let state = AppState::new(Arc::new(ViewStore::default()), Arc::new(Metrics::new()));
        let view = parse_policy(Path::new("one_rule_set.yaml"), policy).unwrap();
        state.view_sink().publish(view);
        Webhook { state }
    }

    /// The object after the webhook's answer, and its warnings.
    async fn admit(&self, operation: &str, object: &Value, uid: usize) -> (Value, Vec<String>) {
        let name = object["metadata"]["name"].clone();
        let review = json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": format!("uid-{uid}"),
                "kind": {"group": "networking.k8s.io", "version": "v1", "kind": "Ingress"},
                "resource": {"group": "networking.k8s.io", "version": "v1", "resource": "ingresses"},
                "name": name,
                "namespace": "styrmin-app",
                "operation": operation,
                "userInfo": {"username": "system:serviceaccount:flux-system:helm-controller"},
                "object": object,
                "oldObject": if operation == "UPDATE" { object.clone() } else { Value::Null },
                "dryRun": false,
            }
        });
        let request = Request::post("/mutate?timeout=10s")
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(serde_json::to_vec(&review).unwrap()))
            .unwrap();
        let response = router(self.state.clone()).oneshot(request).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        let answer: Value = serde_json::from_slice(&bytes).unwrap();
        let response = &answer["response"];
        assert_eq!(response["uid"], format!("uid-{uid}"));
        assert_eq!(response["allowed"], true, "{answer}");
        let mut patched = object.clone();
        if let Some(patch) = response.get("patch") {
            assert_eq!(response["patchType"], "JSONPatch");
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(patch.as_str().unwrap())
                .unwrap();
            let patch: json_patch::Patch = serde_json::from_slice(&bytes).unwrap();
            json_patch::patch(&mut patched, &patch).unwrap();
        }
        let warnings = response["warnings"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|w| w.as_str().unwrap().to_owned())
            .collect();
        (patched, warnings)
    }
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
                    let (admitted, warnings) = webhook.admit(operation, object, compared).await;
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
