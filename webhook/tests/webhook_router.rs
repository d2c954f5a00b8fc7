//! The webhook's router in-process (`oneshot`), with the real AdmissionReview fixtures of
//! `webhook/tests/data/admission/` and the crafted ones (see that folder's README).

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::path::Path;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use base64::Engine as _;
use http_body_util::BodyExt as _;
use serde_json::{Value, json};
use styrmin_webhook::api::{AppState, router};
use styrmin_webhook::budget::MAX_BODY_BYTES;
use styrmin_webhook::policy_file::load_policy;
use styrmin_webhook::view::ViewSink;
use support::data::webhook_data;
use support::state::{state_serving, unready_state};
use tower::ServiceExt as _;

mod support;

const CLASS: &str = "kubernetes.io/ingress.class";

fn state() -> AppState {
    let (_, view) = load_policy(&webhook_data("admission/policy.yaml")).expect("policy.yaml");
    state_serving(view)
}

fn fixture(name: &str) -> Value {
    let text =
        std::fs::read_to_string(webhook_data(&format!("admission/{name}"))).expect("fixture");
    let value: Value = serde_json::from_str(&text).expect("fixture is JSON");
    if name.ends_with(".request.json") {
        // Request-only (kwctl style): wrap as the fixtures README says.
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": value})
    } else {
        value
    }
}

fn in_namespace(mut review: Value, namespace: &str) -> Value {
    review["request"]["namespace"] = json!(namespace);
    if let Some(metadata) = review["request"]["object"].get_mut("metadata") {
        metadata["namespace"] = json!(namespace);
    }
    review
}

async fn post(state: &AppState, uri: &str, body: Vec<u8>) -> (StatusCode, Vec<u8>, Option<String>) {
    let request = Request::post(uri)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body))
        .unwrap();
    let response = router(state.clone()).oneshot(request).await.unwrap();
    let status = response.status();
    let connection = response
        .headers()
        .get(header::CONNECTION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let bytes = response
        .into_body()
        .collect()
        .await
        .unwrap()
        .to_bytes()
        .to_vec();
    (status, bytes, connection)
}

/// POSTs a review and returns the AdmissionReview answer, checked for form.
async fn review(state: &AppState, body: &Value) -> Value {
    let (status, bytes, _) = post(
        state,
        "/mutate?timeout=10s",
        serde_json::to_vec(body).unwrap(),
    )
    .await;
    assert_eq!(
        status,
        StatusCode::OK,
        "{}",
        String::from_utf8_lossy(&bytes)
    );
    let answer: Value = serde_json::from_slice(&bytes).expect("answer is JSON");
    assert_eq!(answer["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(answer["kind"], "AdmissionReview");
    assert_eq!(
        answer["response"]["uid"], body["request"]["uid"],
        "uid echoed"
    );
    assert!(answer["response"]["allowed"].is_boolean());
    answer
}

/// The answer to `body` allows it and says nothing else: no patch, no warning, no status.
async fn assert_bare_allow(state: &AppState, body: &Value, what: &str) {
    let answer = review(state, body).await;
    assert_eq!(
        answer["response"],
        json!({"uid": body["request"]["uid"], "allowed": true}),
        "{what}"
    );
}

/// Applies the answer's patch (if any) to the request's object with an RFC 6902 implementation.
fn patched(body: &Value, answer: &Value) -> Value {
    let mut object = body["request"]["object"].clone();
    let Some(patch) = answer["response"].get("patch") else {
        assert!(answer["response"].get("patchType").is_none());
        return object;
    };
    assert_eq!(answer["response"]["patchType"], "JSONPatch");
    let text = patch.as_str().expect("patch is a base64 string");
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text)
        .expect("standard base64");
    let patch: json_patch::Patch = serde_json::from_slice(&bytes).expect("an RFC 6902 patch");
    json_patch::patch(&mut object, &patch).expect("the patch applies");
    object
}

fn classes(object: &Value) -> (Option<&str>, Option<&str>) {
    (
        object
            .pointer("/spec/ingressClassName")
            .and_then(Value::as_str),
        object
            .get("metadata")
            .and_then(|m| m.get("annotations"))
            .and_then(|a| a.get(CLASS))
            .and_then(Value::as_str),
    )
}

const REAL_INGRESSES: [&str; 5] = [
    "kubewarden-ingress-policy__ingress-v1-create__multi-backend-partial-tls.request.json",
    "kubewarden-ingress-policy__ingress-v1-create__single-backend-tls.request.json",
    "kubewarden-ingress-policy__ingress-v1-create__wildcard-host.request.json",
    "kubewarden-unique-ingress-policy__ingress-v1-create.request.json",
    "kubewarden-safe-annotations-policy__ingress-v1-with-annotations.request.json",
];

const REAL_OTHERS: [&str; 5] = [
    "kube-rs__pod-create-v1__gke-capture.json",
    "kubewarden-controller__deployment-v1-create.json",
    "kubewarden-load-testing__pod-v1-create__secure-images.json",
    "kubewarden-policy-server__pod-v1-create__privileged.json",
    "kubewarden-policy-server__pod-v1-create__unprivileged.json",
];

/// Everything but the two class fields, for R7.
fn without_classes(mut object: Value) -> Value {
    if let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) {
        spec.remove("ingressClassName");
    }
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        let empty = match metadata
            .get_mut("annotations")
            .and_then(Value::as_object_mut)
        {
            Some(annotations) => {
                annotations.remove(CLASS);
                annotations.is_empty()
            }
            None => false,
        };
        if empty {
            metadata.remove("annotations");
        }
    }
    object
}

#[tokio::test]
async fn w1_real_ingress_fixtures_in_a_dedicated_environment() {
    let state = state();
    for name in REAL_INGRESSES {
        let body = in_namespace(fixture(name), "styrmin-web1");
        let answer = review(&state, &body).await;
        assert_eq!(answer["response"]["allowed"], true, "{name}");
        let object = patched(&body, &answer);
        assert_eq!(classes(&object), (None, Some("traefik")), "{name}: R3");
        assert_eq!(
            without_classes(object.clone()),
            without_classes(body["request"]["object"].clone()),
            "{name}: R7"
        );
        // R8: the patched object, sent again, gets no patch.
        let mut again = body.clone();
        again["request"]["object"] = object;
        let answer = review(&state, &again).await;
        assert!(answer["response"].get("patch").is_none(), "{name}: R8");
    }
}

#[tokio::test]
async fn w1_real_ingress_fixtures_with_a_shared_class() {
    let state = state();
    for name in REAL_INGRESSES {
        let body = in_namespace(fixture(name), "styrmin-web2");
        let answer = review(&state, &body).await;
        let object = patched(&body, &answer);
        assert_eq!(
            classes(&object),
            (Some("haproxy"), Some("haproxy")),
            "{name}: R4"
        );
        assert_eq!(
            without_classes(object),
            without_classes(body["request"]["object"].clone()),
            "{name}: R7"
        );
    }
}

#[tokio::test]
async fn w1_unknown_deployment_gets_the_cluster_level() {
    let state = state();
    let body = in_namespace(fixture(REAL_INGRESSES[0]), "styrmin-unknown");
    let object = patched(&body, &review(&state, &body).await);
    assert_eq!(classes(&object), (Some("contour"), Some("contour")));
}

#[tokio::test]
async fn w1_fixtures_as_they_are_are_not_in_a_styrmin_namespace() {
    let state = state();
    for name in REAL_INGRESSES.iter().chain(REAL_OTHERS.iter()) {
        let body = fixture(name);
        assert_bare_allow(&state, &body, name).await;
    }
}

#[tokio::test]
async fn r7_pods_and_deployments_in_a_styrmin_namespace_are_untouched() {
    let state = state();
    for name in REAL_OTHERS {
        let body = in_namespace(fixture(name), "styrmin-web1");
        assert_bare_allow(&state, &body, name).await;
    }
}

#[tokio::test]
async fn crafted_update_with_old_object() {
    let state = state();
    let body = fixture("crafted__ingress-v1-update__with-old-object.json");
    let object = patched(&body, &review(&state, &body).await);
    assert_eq!(classes(&object), (Some("haproxy"), Some("haproxy")));
    assert_eq!(
        object["metadata"]["annotations"]["owner"],
        body["request"]["object"]["metadata"]["annotations"]["owner"]
    );
}

#[tokio::test]
async fn crafted_delete_is_allowed_without_patch() {
    let state = state();
    let body = fixture("crafted__ingress-v1-delete.json");
    let answer = review(&state, &body).await;
    assert_eq!(
        answer["response"],
        json!({"uid": "crafted-delete-0001", "allowed": true})
    );
}

#[tokio::test]
async fn crafted_extensions_v1beta1_ingress_is_enforced() {
    let state = state();
    let body = fixture("crafted__ingress-extensions-v1beta1-create.json");
    let object = patched(&body, &review(&state, &body).await);
    assert_eq!(object["apiVersion"], "extensions/v1beta1");
    assert_eq!(classes(&object), (None, Some("traefik")));
}

#[tokio::test]
async fn crafted_request_converted_from_v1beta1_is_enforced() {
    let state = state();
    let body = fixture("crafted__ingress-v1-create__converted-from-v1beta1.json");
    let object = patched(&body, &review(&state, &body).await);
    assert_eq!(classes(&object), (Some("haproxy"), Some("haproxy")));
}

#[tokio::test]
async fn w2_crafted_helm_release_upgrade_is_blocked() {
    let state = state();
    let body = fixture("crafted__helmrelease-v2-upgrade.json");
    let answer = review(&state, &body).await;
    let response = &answer["response"];
    assert_eq!(response["allowed"], false);
    assert_eq!(response["status"]["code"], 403);
    let message = response["status"]["message"].as_str().unwrap();
    assert!(
        message.contains("\"prod\"") && message.contains("\"ctl9\""),
        "{message}"
    );
    assert!(
        message.contains("try again after the removal completes"),
        "{message}"
    );
    assert!(response.get("patch").is_none());
}

#[tokio::test]
async fn w2_crafted_status_and_finalizers_update_is_allowed() {
    let state = state();
    let body = fixture("crafted__helmrelease-v2-status-and-finalizers-only.json");
    assert_bare_allow(&state, &body, "").await;
}

#[tokio::test]
async fn w2_crafted_styrmin_deployment_create_is_blocked_and_its_delete_is_not() {
    let state = state();
    let body = fixture("crafted__styrmindeployment-create.json");
    let answer = review(&state, &body).await;
    assert_eq!(answer["response"]["allowed"], false);
    let mut delete = body.clone();
    delete["request"]["operation"] = json!("DELETE");
    delete["request"]["oldObject"] = delete["request"]["object"].take();
    let answer = review(&state, &delete).await;
    assert_eq!(answer["response"]["allowed"], true);
}

#[tokio::test]
async fn w4_r5_warning_is_an_admission_warning() {
    let view = styrmin_webhook::policy_file::parse_policy(
        Path::new("p"),
        "cluster: {ingress_class: null}",
    )
    .unwrap();
    let state = state_serving(view);
    let body = in_namespace(fixture(REAL_INGRESSES[0]), "styrmin-x");
    let answer = review(&state, &body).await;
    let warnings = answer["response"]["warnings"].as_array().expect("warnings");
    assert_eq!(warnings.len(), 1);
    let warning = warnings[0].as_str().unwrap();
    assert!(warning.contains("default IngressClass") && !warning.contains('\n'));
    assert!(answer["response"].get("patch").is_none());
}

#[tokio::test]
async fn not_an_admission_review_is_400_with_a_reason() {
    let state = state();
    for body in [
        &b"not json"[..],
        b"{}",
        b"[1,2]",
        br#"{"apiVersion":"v1","kind":"Pod"}"#,
        b"",
    ] {
        let (status, bytes, _) = post(&state, "/mutate", body.to_vec()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        let reason = String::from_utf8_lossy(&bytes);
        assert!(reason.contains("not"), "{reason}");
    }
}

#[tokio::test]
async fn bodies_up_to_7_mib_are_read_larger_get_413() {
    let state = state();
    let mut body = in_namespace(fixture(REAL_INGRESSES[0]), "styrmin-web1");
    let base_len = serde_json::to_vec(&body).unwrap().len();
    body["request"]["object"]["metadata"]["annotations"] =
        json!({"padding": "x".repeat(MAX_BODY_BYTES - base_len - 64)});
    let bytes = serde_json::to_vec(&body).unwrap();
    assert!(bytes.len() <= MAX_BODY_BYTES && bytes.len() > MAX_BODY_BYTES - 200);
    let (status, answer, _) = post(&state, "/mutate", bytes).await;
    assert_eq!(status, StatusCode::OK);
    let answer: Value = serde_json::from_slice(&answer).unwrap();
    assert_eq!(classes(&patched(&body, &answer)), (None, Some("traefik")));
    let (status, _, _) = post(&state, "/mutate", vec![b' '; MAX_BODY_BYTES + 1]).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
}

#[tokio::test]
async fn arbitrary_inputs_never_panic() {
    let state = state();
    let base = in_namespace(fixture(REAL_INGRESSES[4]), "styrmin-web1");
    let odd_values = [
        json!(null),
        json!(1),
        json!("s"),
        json!([]),
        json!({}),
        json!(true),
        json!({"a": [null]}),
    ];
    for pointer in [
        "/request/object",
        "/request/object/metadata",
        "/request/object/metadata/annotations",
        "/request/object/spec",
        "/request/object/spec/ingressClassName",
        "/request/object/kind",
        "/request/object/apiVersion",
        "/request/oldObject",
        "/request/namespace",
        "/request/kind",
        "/request/requestKind",
        "/request/operation",
        "/request/subResource",
    ] {
        for value in &odd_values {
            let mut body = base.clone();
            if let Some(slot) = body.pointer_mut(pointer) {
                *slot = value.clone();
            } else {
                body["request"][pointer.rsplit('/').next().unwrap()] = value.clone();
            }
            let (status, bytes, _) =
                post(&state, "/mutate", serde_json::to_vec(&body).unwrap()).await;
            assert!(
                status == StatusCode::OK || status == StatusCode::BAD_REQUEST,
                "{pointer}={value}: {status}"
            );
            if status == StatusCode::OK {
                let answer: Value = serde_json::from_slice(&bytes).unwrap();
                assert_eq!(answer["response"]["uid"], base["request"]["uid"]);
                // Any patch must apply to the object as sent.
                let _ = patched(&body, &answer);
            }
        }
    }
}

#[tokio::test]
async fn health_readiness_and_metrics() {
    let unready = unready_state();
    let get = |state: &AppState, uri: &str| {
        let app = router(state.clone());
        let request = Request::get(uri).body(Body::empty()).unwrap();
        async move {
            let response = app.oneshot(request).await.unwrap();
            let status = response.status();
            let body = response.into_body().collect().await.unwrap().to_bytes();
            (status, String::from_utf8_lossy(&body).into_owned())
        }
    };
    assert_eq!(get(&unready, "/healthz").await.0, StatusCode::OK);
    assert_eq!(
        get(&unready, "/readyz").await.0,
        StatusCode::SERVICE_UNAVAILABLE
    );

    let state = state();
    assert_eq!(get(&state, "/readyz").await.0, StatusCode::OK);
    let body = in_namespace(fixture(REAL_INGRESSES[0]), "styrmin-web1");
    review(&state, &body).await;
    review(&state, &fixture("crafted__helmrelease-v2-upgrade.json")).await;
    let _ = post(&state, "/mutate", b"junk".to_vec()).await;
    let (status, text) = get(&state, "/metrics").await;
    assert_eq!(status, StatusCode::OK);
    for needle in [
        r#"styrmin_webhook_admission_requests_total{kind="Ingress",operation="CREATE",outcome="patched"} 1"#,
        r#"styrmin_webhook_admission_requests_total{kind="HelmRelease",operation="UPDATE",outcome="denied"} 1"#,
        r#"outcome="bad_request"} 1"#,
        "styrmin_webhook_admission_duration_seconds_count 2",
        "styrmin_webhook_view_age_seconds ",
        "styrmin_webhook_view_ready 1",
        "styrmin_webhook_view_source_valid 1",
        "styrmin_webhook_view_deployments 3",
        "styrmin_webhook_certificate_expiry_timestamp_seconds",
    ] {
        assert!(text.contains(needle), "{needle} missing in\n{text}");
    }

    // A failed update is counted and flips the validity gauge.
    let sink: ViewSink = state.view_sink();
    sink.report_error("policy-file");
    let (_, text) = get(&state, "/metrics").await;
    for needle in [
        r#"styrmin_webhook_view_update_failures_total{source="policy-file"} 1"#,
        "styrmin_webhook_view_source_valid 0",
    ] {
        assert!(text.contains(needle), "{needle} missing in\n{text}");
    }

    // Draining: not ready, and answers close their connection.
    state.start_draining();
    assert_eq!(
        get(&state, "/readyz").await.0,
        StatusCode::SERVICE_UNAVAILABLE
    );
    let (status, _, connection) = post(&state, "/mutate", serde_json::to_vec(&body).unwrap()).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(connection.as_deref(), Some("close"));
}

/// Builds `{"a": … }` or `[ … ]` nested `depth` deep as JSON text, around `inner`.
fn nested_json(depth: usize, inner: &str) -> String {
    let mut text = String::with_capacity(depth * 8 + inner.len());
    for i in 0..depth {
        text.push_str(if i % 2 == 0 { "[" } else { "{\"a\":" });
    }
    text.push_str(inner);
    for i in (0..depth).rev() {
        text.push(if i % 2 == 0 { ']' } else { '}' });
    }
    text
}

#[tokio::test]
async fn deep_json_is_answered_never_a_crash() {
    let state = state();
    let base = in_namespace(
        fixture("crafted__ingress-v1-create__converted-from-v1beta1.json"),
        "styrmin-web",
    );
    // Deeply nested values where the webhook reads (the object) and where it skips (an
    // unknown field of the request), at depths past serde_json's limit and far past.
    for depth in [200, 10_000, 1_000_000] {
        let deep = nested_json(depth, "1");
        for place in ["object", "unknown"] {
            let mut review = base.clone();
            let marker = "\"__deep__\"";
            match place {
                "object" => review["request"]["object"]["spec"]["extra"] = json!("__deep__"),
                _ => review["request"]["extra"] = json!("__deep__"),
            }
            let body = serde_json::to_string(&review)
                .unwrap()
                .replacen(marker, &deep, 1);
            let (status, bytes, _) = post(&state, "/mutate", body.into_bytes()).await;
            let reason = String::from_utf8_lossy(&bytes);
            assert!(
                status == StatusCode::OK || status == StatusCode::BAD_REQUEST,
                "{depth} in {place}: {status} {reason}"
            );
            if status == StatusCode::OK {
                // An answer for this request: allowed, with the patch admission gives the
                // same Ingress without the deep field.
                let answer: Value = serde_json::from_slice(&bytes).expect("an AdmissionReview");
                assert_eq!(
                    answer["response"]["uid"], base["request"]["uid"],
                    "{reason}"
                );
                assert_eq!(answer["response"]["allowed"], json!(true), "{reason}");
                assert!(
                    answer["response"]["patch"].is_string(),
                    "{depth} {place}: {reason}"
                );
            } else {
                assert!(
                    reason.contains("recursion") || reason.contains("deep"),
                    "{reason}"
                );
            }
        }
    }
}

#[tokio::test]
async fn helm_release_with_deep_values_is_answered() {
    // `spec.values` is free-form: the API server takes 10,000 levels, and so must the webhook.
    let state = state();
    let base = fixture("crafted__helmrelease-v2-upgrade.json");
    for depth in [200, 10_000, 1_000_000] {
        let mut review = base.clone();
        review["request"]["object"]["spec"]["values"] = json!({"deep": "__deep__"});
        let body = serde_json::to_string(&review).unwrap().replacen(
            "\"__deep__\"",
            &nested_json(depth, "1"),
            1,
        );
        let (status, bytes, _) = post(&state, "/mutate", body.into_bytes()).await;
        let reason = String::from_utf8_lossy(&bytes);
        assert_eq!(status, StatusCode::OK, "{depth}: {reason}");
        let answer: Value = serde_json::from_slice(&bytes).expect("an AdmissionReview");
        assert_eq!(
            answer["response"]["uid"], base["request"]["uid"],
            "{reason}"
        );
    }
}
