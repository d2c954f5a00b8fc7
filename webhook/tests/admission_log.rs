//! The webhook's log of one admission request says which settings applied and which key
//! decided them, in the words `styrmin-postrender explain` uses (rule W5).

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::io;
use std::path::Path;
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use serde_json::json;
use styrmin_webhook::api::router;
use styrmin_webhook::policy_file::parse_policy;
use tower::ServiceExt as _;

mod support;

/// A log destination the test can read back.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl io::Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn the_log_names_the_settings_and_the_key_that_decided_them() {
    let log = Captured::default();
    let writer = log.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::INFO)
        .finish();
    // The test runtime has one thread: every event of the request is logged here.
    let _guard = tracing::subscriber::set_default(subscriber);

    let view = parse_policy(
        Path::new("policy.yaml"),
        "cluster: {dedicated_ingress: {}}\n\
         deployments:\n  \
           web1: {last_deployed: {ingress_class: nginx}}\n",
    )
    .unwrap();
    let state = support::state::state_serving(view);

    // The record holds web1 on nginx while the levels give the dedicated controller: the
    // INFO line of a deployment waiting for its redeploy carries the span's fields.
    let review = json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u-1",
            "kind": {"group": "networking.k8s.io", "version": "v1", "kind": "Ingress"},
            "operation": "CREATE",
            "namespace": "styrmin-web1",
            "object": {
                "apiVersion": "networking.k8s.io/v1",
                "kind": "Ingress",
                "metadata": {"name": "web", "namespace": "styrmin-web1"},
                "spec": {}
            }
        }
    });
    let request = Request::post("/mutate")
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(review.to_string()))
        .unwrap();
    let response = router(state).oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);

    let text = String::from_utf8(log.0.lock().unwrap().clone()).unwrap();
    let line = text
        .lines()
        .find(|l| l.contains("keeps the settings it was last deployed with"))
        .unwrap_or_else(|| panic!("no transition line in:\n{text}"));
    for field in [
        "applied=class:nginx",
        "decided_by=last_deployed.ingress_class",
        "levels=dedicated",
        "levels_decided_by=cluster.dedicated_ingress",
    ] {
        assert!(line.contains(field), "{field} not in {line}");
    }
}
