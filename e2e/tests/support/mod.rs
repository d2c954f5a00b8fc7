//! What several end-to-end tests share: the resolution table, written once, the real
//! rendered streams of `postrender/tests/data/rendered/`, and the webhook answering in-process.
//!
//! Each test file that uses it says `mod support;`; not every file uses every item.
#![allow(dead_code)]

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use base64::Engine as _;
use http_body_util::BodyExt as _;
use serde_json::{Value, json};
use styrmin_webhook::metrics::Metrics;
use styrmin_webhook::policy_file::parse_policy;
use styrmin_webhook::view::ViewStore;
use styrmin_webhook::{AppState, router};
use tower::ServiceExt as _;

/// One configuration: the `cluster`, `environment` and `deployment` sections as flow
/// mappings; `None` leaves a section out.
#[derive(Clone, Copy)]
pub struct TableConfig {
    pub cluster: Option<&'static str>,
    pub environment: Option<&'static str>,
    pub deployment: Option<&'static str>,
}

const fn config(
    cluster: Option<&'static str>,
    environment: Option<&'static str>,
    deployment: Option<&'static str>,
) -> TableConfig {
    TableConfig {
        cluster,
        environment,
        deployment,
    }
}

/// The resolution table (docs/rules.md §1): each level × absent / null / "" / value, and
/// dedicated at each level, with classes that YAML would misread if written plain.
pub const RESOLUTION_TABLE: &[TableConfig] = &[
    config(None, None, None),
    config(Some("{ingress_class: null}"), None, None),
    config(Some("{ingress_class: \"\"}"), None, None),
    config(Some("{ingress_class: nginx}"), None, None),
    config(
        Some("{ingress_class: nginx}"),
        Some("{ingress_class: null}"),
        None,
    ),
    config(
        Some("{ingress_class: nginx}"),
        Some("{ingress_class: \"\"}"),
        None,
    ),
    config(
        Some("{ingress_class: null}"),
        Some("{ingress_class: haproxy}"),
        None,
    ),
    config(
        Some("{ingress_class: nginx}"),
        Some("{ingress_class: haproxy}"),
        Some("{ingress_class: null}"),
    ),
    config(
        Some("{ingress_class: nginx}"),
        Some("{ingress_class: haproxy}"),
        Some("{ingress_class: \"\"}"),
    ),
    config(
        None,
        Some("{ingress_class: haproxy}"),
        Some("{ingress_class: \"on\"}"),
    ),
    config(None, None, Some("{ingress_class: \"123\"}")),
    config(Some("{dedicated_ingress: {}}"), None, None),
    config(
        Some("{ingress_class: nginx}"),
        Some("{dedicated_ingress: {replicas: 2}}"),
        None,
    ),
    config(
        None,
        Some("{ingress_class: \"\"}"),
        Some("{dedicated_ingress: {}}"),
    ),
    config(
        Some("{dedicated_ingress: {}}"),
        Some("{dedicated_ingress: null, ingress_class: nginx}"),
        Some("{ingress_class: contour}"),
    ),
];

impl TableConfig {
    /// The post-renderer's config file.
    pub fn config_yaml(&self) -> String {
        [
            ("cluster", self.cluster),
            ("environment", self.environment),
            ("deployment", self.deployment),
        ]
        .into_iter()
        .filter_map(|(name, section)| section.map(|s| format!("{name}: {s}\n")))
        .collect()
    }

    /// The same levels as the webhook's policy file: deployment `app` of environment
    /// `env`. Written as JSON (which is YAML), so `null` and `""` stay what they are.
    pub fn policy_yaml(&self) -> String {
        let section = |s: Option<&str>| -> Value {
            s.map_or(json!({}), |s| serde_saphyr::from_str(s).expect("section"))
        };
        let mut deployment = section(self.deployment);
        deployment["environment"] = json!("env");
        json!({
            "cluster": section(self.cluster),
            "environments": {"env": section(self.environment)},
            "deployments": {"app": deployment},
        })
        .to_string()
    }
}

impl fmt::Debug for TableConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.config_yaml())
    }
}

/// The real rendered streams (Helm 3 and 4 output, and what each writes to a
/// post-renderer), sorted by name.
pub fn rendered_streams() -> Vec<(String, PathBuf)> {
    let mut files: Vec<_> = std::fs::read_dir(e2e::postrender_data("rendered"))
        .expect("postrender/tests/data/rendered")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .map(|p| {
            (
                p.file_name()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .into_owned(),
                p,
            )
        })
        .collect();
    files.sort();
    assert!(
        files.len() >= 20,
        "expected the rendered fixtures, found {}",
        files.len()
    );
    files
}

/// An Ingress the rules apply to (R6), as JSON.
pub fn is_ingress(object: &Value) -> bool {
    object["kind"] == "Ingress"
        && ingress_rules::INGRESS_API_VERSIONS
            .contains(&object["apiVersion"].as_str().unwrap_or_default())
}

/// The Ingresses of a stream, in order, as JSON (List and IngressList items included).
pub fn ingresses(text: &str) -> Vec<Value> {
    let mut found = Vec::new();
    for document in postrender::stream::split(text) {
        let doc: Option<Value> = serde_saphyr::from_str(&text[document.range]).expect("YAML");
        let Some(doc) = doc else { continue };
        if is_ingress(&doc) {
            found.push(doc);
        } else if ingress_rules::is_ingress_container_list(
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

/// The webhook's router in-process (`oneshot`), with a view read from policy-file text.
pub struct Webhook {
    state: AppState,
}

/// The webhook's answer to an Ingress review, with its JSON patch applied (RFC 6902).
pub struct Admitted {
    pub object: Value,
    pub warnings: Vec<String>,
    pub patched: bool,
}

impl Webhook {
    pub fn new(policy: &str) -> Self {
        let state = AppState::new(Arc::new(ViewStore::default()), Arc::new(Metrics::new()));
        let view = parse_policy(Path::new("policy.yaml"), policy).expect("policy");
        state.view_sink().publish(view);
        Webhook { state }
    }

    /// Sends `object` as the API server would, in the namespace of deployment `app`.
    pub async fn admit(&self, operation: &str, object: &Value, uid: &str) -> Admitted {
        let review = json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": uid,
                "kind": {"group": "networking.k8s.io", "version": "v1", "kind": "Ingress"},
                "resource": {"group": "networking.k8s.io", "version": "v1", "resource": "ingresses"},
                "name": object["metadata"]["name"].clone(),
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
            .body(Body::from(serde_json::to_vec(&review).expect("JSON")))
            .expect("request");
        let response = router(self.state.clone())
            .oneshot(request)
            .await
            .expect("answer");
        assert_eq!(response.status(), StatusCode::OK);
        let bytes = response
            .into_body()
            .collect()
            .await
            .expect("body")
            .to_bytes();
        let answer: Value = serde_json::from_slice(&bytes).expect("an AdmissionReview");
        let response = &answer["response"];
        assert_eq!(response["uid"], uid);
        assert_eq!(response["allowed"], true, "{answer}");
        let mut object = object.clone();
        let patched = response.get("patch").is_some();
        if let Some(patch) = response.get("patch") {
            assert_eq!(response["patchType"], "JSONPatch");
            let text = patch.as_str().expect("the patch is a base64 string");
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(text)
                .expect("standard base64");
            let patch: json_patch::Patch =
                serde_json::from_slice(&bytes).expect("an RFC 6902 patch");
            json_patch::patch(&mut object, &patch).expect("the patch applies");
        }
        let warnings = response["warnings"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|w| w.as_str().expect("a warning is a string").to_owned())
            .collect();
        Admitted {
            object,
            warnings,
            patched,
        }
    }
}
