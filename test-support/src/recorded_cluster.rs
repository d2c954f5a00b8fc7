//! The webhook's `--source kubernetes` against a recorded cluster: the paths it lists and
//! watches, the recorded answers of `webhook/tests/data/apiserver/`, a `kube::Client` for
//! the fake API server, and reading the webhook's own answers: for the webhook's tests and
//! the audit's end-to-end tests (`e2e/tests/audit.rs`, `e2e/tests/alerts.rs`).

use std::path::Path;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt as _;
use styrmin_fake_apiserver::FakeApiServer;
use tower::ServiceExt as _;

pub const CLUSTERS: &str = "/apis/styrmin.io/v1alpha1/styrminclusters";
pub const ENVIRONMENTS: &str = "/apis/styrmin.io/v1alpha1/styrminenvironments";
pub const DEPLOYMENTS: &str = "/apis/styrmin.io/v1alpha1/styrmindeployments";
pub const INGRESSES: &str = "/apis/networking.k8s.io/v1/ingresses";
pub const SERVICES: &str = "/api/v1/services";
pub const NAMESPACES: &str = "/api/v1/namespaces";
pub const INGRESS_CLASSES: &str = "/apis/networking.k8s.io/v1/ingressclasses";
/// Every list the webhook makes, and the file of each recorded answer in a folder of
/// `webhook/tests/data/apiserver/`.
pub const LISTS: [(&str, &str); 7] = [
    (CLUSTERS, "styrminclusters.list.json"),
    (ENVIRONMENTS, "styrminenvironments.list.json"),
    (DEPLOYMENTS, "styrmindeployments.list.json"),
    (INGRESSES, "ingresses.list.json"),
    (SERVICES, "services.list.json"),
    (NAMESPACES, "namespaces.list.json"),
    (INGRESS_CLASSES, "ingressclasses.list.json"),
];
/// Long enough for the watcher's backoff after an error (0.8 s, then 1.6 s, with jitter).
pub const STEP: Duration = Duration::from_secs(20);

/// `webhook/tests/data/apiserver/<name>`.
pub fn recorded(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../webhook/tests/data/apiserver")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Queues one answer to every list the webhook makes, and `/version`, from the recordings
/// in `webhook/tests/data/apiserver/<folder>/`.
pub fn answer_every_list(api: &FakeApiServer, folder: &str) {
    api.answer("/version", 200, recorded(&format!("{folder}/version.json")));
    for (path, file) in LISTS {
        api.answer(path, 200, recorded(&format!("{folder}/{file}")));
    }
}

/// A real `kube::Client` for the fake API server.
pub fn client(api: &FakeApiServer) -> kube::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let url = api
        .url()
        .parse()
        .unwrap_or_else(|e| panic!("the fake API server's URL: {e}"));
    kube::Client::try_from(kube::Config::new(url))
        .unwrap_or_else(|e| panic!("a client for the fake API server: {e}"))
}

/// `GET uri` from one of the webhook's routers, in-process: its status and body.
pub async fn get(app: axum::Router, uri: &str) -> (StatusCode, String) {
    let request = Request::get(uri)
        .body(Body::empty())
        .unwrap_or_else(|e| panic!("GET {uri}: {e}"));
    let response = app
        .oneshot(request)
        .await
        .unwrap_or_else(|e| panic!("GET {uri}: {e}"));
    let status = response.status();
    let body = response
        .into_body()
        .collect()
        .await
        .unwrap_or_else(|e| panic!("the body of GET {uri}: {e}"))
        .to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

/// The value of the sample `name` (with its labels, if any) in a Prometheus exposition.
pub fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("metric {name} not in:\n{text}"))
}
