//! `enforcement_mode: warn` through the webhook's router, with real AdmissionReview JSON:
//! the answer allows, carries no patch, and has one admission warning per change the patch
//! would have made, naming what decided it; the deploy block (W2) warns instead of denying;
//! the metrics count both under their own outcomes.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::path::Path;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use http_body_util::BodyExt as _;
use serde_json::{Value, json};
use styrmin_webhook::api::{AppState, metrics_router, router};
use styrmin_webhook::policy_file::parse_policy;
use support::data::webhook_data;
use support::state::state_serving;
use tower::ServiceExt as _;

mod support;

/// The webhook tests' policy (`admission/policy.yaml`) with `extra` lines added to a level.
fn state(cluster: &str, stage: &str) -> AppState {
    let text = format!(
        "cluster: {{ingress_class: contour{cluster}}}\nenvironments:\n  prod: {{ingress_class: nginx, dedicated_ingress: {{}}}}\n  \
         stage: {{ingress_class: haproxy{stage}}}\ndeployments:\n  web1: {{environment: prod}}\n  web2: {{environment: stage}}\n  \
         ctl9: {{environment: prod, role: ingress-controller, phase: DELETING}}\n"
    );
    state_serving(parse_policy(Path::new("policy.yaml"), &text).unwrap())
}

fn fixture(name: &str) -> Value {
    let text = std::fs::read_to_string(webhook_data(&format!("admission/{name}"))).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// The 3 KB Ingress of the benchmark, in namespace styrmin-web2, with `class` in
/// `spec.ingressClassName` when given.
fn ingress(class: Option<&str>) -> Value {
    let mut review = fixture("crafted__ingress-v1-create__bench-3kb.json");
    assert_eq!(review["request"]["namespace"], "styrmin-web2");
    if let Some(class) = class {
        review["request"]["object"]["spec"]["ingressClassName"] = json!(class);
    }
    review
}

async fn review(state: &AppState, body: &Value) -> Value {
    let request = Request::post("/mutate?timeout=10s")
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(serde_json::to_vec(body).unwrap()))
        .unwrap();
    let response = router(state.clone()).oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let answer: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(answer["kind"], "AdmissionReview");
    assert_eq!(answer["response"]["uid"], body["request"]["uid"]);
    answer
}

async fn metrics(state: &AppState) -> String {
    let request = Request::get("/metrics").body(Body::empty()).unwrap();
    let response = metrics_router(state.clone())
        .oneshot(request)
        .await
        .unwrap();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    String::from_utf8_lossy(&bytes).into_owned()
}

#[tokio::test]
async fn warn_allows_without_a_patch_and_names_each_change_and_what_decided_it() {
    let warn = state("", ", enforcement_mode: warn");
    let answer = review(&warn, &ingress(Some("nginx"))).await;
    let uid = ingress(None)["request"]["uid"].clone();
    assert_eq!(
        answer["response"],
        json!({
            "uid": uid,
            "allowed": true,
            "warnings": [
                "would set spec.ingressClassName \"haproxy\" (now \"nginx\"), decided by environment stage",
                "would set annotation kubernetes.io/ingress.class \"haproxy\" (now not set), decided by environment stage",
            ],
        })
    );

    // The same view in enforce patches: the warnings above are exactly its changes.
    let enforce = state("", "");
    let answer = review(&enforce, &ingress(Some("nginx"))).await;
    assert_eq!(answer["response"]["patchType"], "JSONPatch");
    assert!(answer["response"].get("warnings").is_none(), "{answer}");

    // A conforming Ingress gets nothing in warn either.
    let mut conforming = ingress(Some("haproxy"));
    conforming["request"]["object"]["metadata"]["annotations"] =
        json!({"kubernetes.io/ingress.class": "haproxy"});
    let answer = review(&warn, &conforming).await;
    assert_eq!(answer["response"], json!({"uid": uid, "allowed": true}));
}

#[tokio::test]
async fn the_most_specific_level_decides_the_mode() {
    // Warn at the cluster, enforce in the environment: patched.
    let state = state(", enforcement_mode: warn", ", enforcement_mode: enforce");
    let answer = review(&state, &ingress(None)).await;
    assert_eq!(answer["response"]["patchType"], "JSONPatch", "{answer}");
}

#[tokio::test]
async fn w2_warns_instead_of_denying_and_the_metrics_count_both() {
    let deploy = fixture("crafted__styrmindeployment-create.json");
    let enforce = state("", "");
    let answer = review(&enforce, &deploy).await;
    assert_eq!(answer["response"]["allowed"], false);
    assert_eq!(answer["response"]["status"]["code"], 403);

    let warn = state(", enforcement_mode: warn", "");
    let answer = review(&warn, &deploy).await;
    assert_eq!(answer["response"]["allowed"], true, "{answer}");
    assert!(answer["response"].get("status").is_none(), "{answer}");
    assert!(answer["response"].get("patch").is_none(), "{answer}");
    let warnings = answer["response"]["warnings"].as_array().unwrap();
    assert_eq!(warnings.len(), 1);
    let warning = warnings[0].as_str().unwrap();
    assert_eq!(
        warning,
        "would deny (enforcement_mode warn, decided by cluster.enforcement_mode): environment \"prod\": its dedicated \
         ingress controller \"ctl9\" is being removed (phase DELETING); in enforce, deploys wait until the removal completes"
    );
    assert!(warning.len() <= 256, "{}", warning.len());

    review(&warn, &ingress(None)).await;
    let text = metrics(&warn).await;
    for line in [
        r#"styrmin_webhook_admission_requests_total{kind="StyrminDeployment",operation="CREATE",outcome="would_deny"} 1"#,
        r#"styrmin_webhook_admission_requests_total{kind="Ingress",operation="CREATE",outcome="would_patch"} 1"#,
    ] {
        assert!(text.contains(line), "{line} missing in\n{text}");
    }
    assert!(!text.contains(r#"outcome="patched""#), "{text}");
    assert!(!text.contains(r#"outcome="denied""#), "{text}");
}
