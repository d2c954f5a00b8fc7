//! `styrmin-webhook`: the mutating admission webhook that enforces Styrmin's ingress rules
//! (SPEC W1–W4) and blocks deploys while an environment's dedicated ingress controller is
//! being removed (W2).
//!
//! Layout: [`decide`] holds the decisions as pure functions of a [`view::View`] and one
//! request; [`view`] the in-memory view and the seam its sources plug into ([`policy_file`]
//! today); [`router`] the HTTP surface; [`server`] the TLS accept loop; [`cli`] the wiring.

pub mod admission;
pub mod audit;
pub mod cli;
pub mod crd;
pub mod decide;
pub mod flux;
pub mod kube_source;
pub mod metrics;
pub mod patch;
pub mod policy_file;
pub mod server;
pub mod telemetry;
pub mod tls;
pub mod view;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};

use crate::admission::{encode_review, parse_review};
use crate::decide::{DecideOptions, Outcome, ReviewKind, decide_with};
use crate::metrics::{Metrics, RequestLabels, SourceLabels};
use crate::view::{ViewSink, ViewStore};

/// The largest AdmissionReview read; larger bodies get 413.
pub const MAX_BODY_BYTES: usize = 7 * 1024 * 1024;

/// What the handlers share.
#[derive(Clone, Debug)]
pub struct AppState {
    inner: Arc<StateInner>,
}

#[derive(Debug)]
struct StateInner {
    view: Arc<ViewStore>,
    metrics: Arc<Metrics>,
    draining: AtomicBool,
    options: DecideOptions,
}

impl AppState {
    pub fn new(view: Arc<ViewStore>, metrics: Arc<Metrics>) -> Self {
        Self::with_options(view, metrics, DecideOptions::default())
    }

    /// With decisions that are off by default switched on (`--flux-post-renderer`).
    pub fn with_options(
        view: Arc<ViewStore>,
        metrics: Arc<Metrics>,
        options: DecideOptions,
    ) -> Self {
        AppState {
            inner: Arc::new(StateInner {
                view,
                metrics,
                draining: AtomicBool::new(false),
                options,
            }),
        }
    }

    pub fn view(&self) -> &Arc<ViewStore> {
        &self.inner.view
    }

    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.inner.metrics
    }

    /// The sink a view source publishes through; failures are counted in the metrics.
    pub fn view_sink(&self) -> ViewSink {
        let metrics = self.inner.metrics.clone();
        ViewSink::new(
            self.inner.view.clone(),
            Arc::new(move |source| {
                metrics
                    .view_update_failures
                    .get_or_create(&SourceLabels { source })
                    .inc();
            }),
        )
    }

    /// From now on: not ready, and every answer closes its connection.
    pub fn start_draining(&self) {
        self.inner.draining.store(true, Ordering::SeqCst);
    }

    pub fn is_draining(&self) -> bool {
        self.inner.draining.load(Ordering::SeqCst)
    }
}

/// The webhook's HTTP surface: `POST /mutate`, `/healthz`, `/readyz`, `/metrics`.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/mutate", post(mutate))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .merge(operations_routes())
        .layer(axum::middleware::map_response_with_state(
            state.clone(),
            close_while_draining,
        ))
        .with_state(state)
}

/// The plain-HTTP surface of `--metrics-listen`: `/metrics`, `/healthz`, `/readyz`, and
/// `GET /debug/deployments/{id}` (which settings a deployment's Ingresses get and why). The
/// debug route is never on the TLS admission port.
pub fn metrics_router(state: AppState) -> Router {
    operations_routes()
        .route("/debug/deployments/{id}", get(debug_deployment))
        .route("/debug/audit", get(audit::debug_audit))
        .with_state(state)
}

/// `GET /debug/deployments/{id}` on the metrics listener: what the view holds for deployment
/// `id` and which settings its Ingresses get, as JSON (`404` when the view does not know it;
/// its Ingresses then get the cluster level).
async fn debug_deployment(
    State(state): State<AppState>,
    axum::extract::Path(id): axum::extract::Path<String>,
) -> Response {
    let view = state.view().load();
    let body = view::debug_deployment(&view, &id);
    let status = if view.deployment(&id).is_some() {
        StatusCode::OK
    } else {
        StatusCode::NOT_FOUND
    };
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        format!("{body:#}\n"),
    )
        .into_response()
}

fn operations_routes() -> Router<AppState> {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
}

async fn close_while_draining(State(state): State<AppState>, mut response: Response) -> Response {
    if state.is_draining() {
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

async fn healthz() -> &'static str {
    "ok"
}

async fn readyz(State(state): State<AppState>) -> (StatusCode, &'static str) {
    if state.is_draining() {
        (StatusCode::SERVICE_UNAVAILABLE, "shutting down")
    } else if !state.view().is_ready() {
        (StatusCode::SERVICE_UNAVAILABLE, "no view loaded yet")
    } else {
        (StatusCode::OK, "ok")
    }
}

async fn metrics(State(state): State<AppState>) -> Response {
    let (view, metrics) = (state.view(), state.metrics());
    metrics
        .view_age_seconds
        .set(view.age().map_or(f64::NAN, |age| age.as_secs_f64()));
    metrics
        .view_changed_timestamp_seconds
        .set(view.changed_at_unix().unwrap_or(0.0));
    metrics.view_ready.set(i64::from(view.is_ready()));
    metrics.audit.export(view.audit());
    metrics
        .view_source_valid
        .set(i64::from(view.source_valid()));
    metrics
        .view_deployments
        .set(i64::try_from(view.load().deployment_count()).unwrap_or(i64::MAX));
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        metrics.encode(),
    )
        .into_response()
}

async fn mutate(State(state): State<AppState>, body: Bytes) -> Response {
    let started = Instant::now();
    let metrics = state.metrics();
    let review = match parse_review(&body) {
        Ok(review) => review,
        Err(error) => {
            metrics
                .requests
                .get_or_create(&RequestLabels {
                    kind: "invalid",
                    operation: "invalid",
                    outcome: "bad_request",
                })
                .inc();
            tracing::warn!(bytes = body.len(), %error, "bad request");
            return (StatusCode::BAD_REQUEST, format!("{error}\n")).into_response();
        }
    };
    let request = &review.request;
    let kind = ReviewKind::of(request);
    let span = tracing::info_span!(
        "admission",
        uid = %request.uid,
        kind = kind.as_str(),
        request_kind = request.request_kind.as_ref().map(|k| k.kind.as_str()),
        operation = request.operation.as_str(),
        namespace = request.namespace().unwrap_or(""),
        name = request.name().unwrap_or(""),
        decision = tracing::field::Empty,
        settings = tracing::field::Empty,
        applied = tracing::field::Empty,
    );
    let _entered = span.enter();
    let decision = decide_with(&state.view().load(), request, &state.inner.options);
    span.record("decision", decision.outcome.as_str());
    if let Some(settings) = &decision.settings {
        // W5: whether the deployment's last-deployed record or its levels decided.
        span.record("settings", settings.source.as_str());
        span.record("applied", tracing::field::display(settings.applied()));
        // Only during a transition (the record holds the deployment on its old settings), so
        // INFO: it says why an Ingress did not get the newest cluster or environment values.
        if settings.waits_for_redeploy() {
            tracing::info!(
                levels = %ingress_rules::DeployedIngress::from_resolved(&settings.levels),
                "the deployment keeps the settings it was last deployed with until Styrmin redeploys it"
            );
        }
    }
    let outcome = decision.outcome;
    match outcome {
        Outcome::Denied => tracing::info!(
            reason = %decision.reason,
            message = decision.status.as_ref().map(|s| s.message.as_str()),
            "denied"
        ),
        // Routine, and the API server's audit log records each webhook patch: DEBUG.
        Outcome::Patched if decision.warnings.is_empty() => {
            tracing::debug!(reason = %decision.reason, operations = decision.patch.len(), "patched")
        }
        Outcome::Patched | Outcome::Conforming | Outcome::Allowed => {
            if decision.warnings.is_empty() {
                tracing::debug!(reason = %decision.reason, "allowed");
            } else {
                tracing::info!(reason = %decision.reason, warnings = ?decision.warnings, "allowed with a warning");
            }
        }
    }
    let body = encode_review(review.api_version, &decision.into_response(&request.uid));
    metrics
        .requests
        .get_or_create(&RequestLabels {
            kind: kind.as_str(),
            operation: request.operation.as_str(),
            outcome: outcome.as_str(),
        })
        .inc();
    metrics
        .request_duration
        .observe(started.elapsed().as_secs_f64());
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use axum::body::Body;
    use axum::http::Request;
    use http_body_util::BodyExt as _;
    use tower::ServiceExt as _;

    use super::*;
    use crate::policy_file::parse_policy;

    async fn get(app: Router, uri: &str) -> (StatusCode, String) {
        let request = Request::get(uri).body(Body::empty()).unwrap();
        let response = app.oneshot(request).await.unwrap();
        let status = response.status();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        (status, String::from_utf8_lossy(&body).into_owned())
    }

    fn state() -> AppState {
        let state = AppState::new(Arc::new(ViewStore::default()), Arc::new(Metrics::new()));
        let view = parse_policy(
            Path::new("policy.yaml"),
            "cluster: {dedicated_ingress: {}}\n\
             deployments:\n  \
               web1: {environment: prod, last_deployed: {ingress_class: nginx}}\n  \
               ctl: {environment: prod, role: ingress-controller, phase: DEPLOYING}\n",
        )
        .unwrap();
        state.view_sink().publish(view);
        state
    }

    #[tokio::test]
    async fn debug_deployment_is_on_the_metrics_listener_only() {
        let state = state();
        let (status, body) = get(metrics_router(state.clone()), "/debug/deployments/web1").await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let json: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(json["settings"], "record");
        assert_eq!(json["applied"], "class:nginx");
        assert_eq!(json["levels_give"], "dedicated");
        assert_eq!(json["waits_for_redeploy"], true);
        assert_eq!(
            json["environment_controllers"],
            serde_json::json!([{"id": "ctl", "phase": "DEPLOYING"}])
        );
        let (status, body) = get(metrics_router(state.clone()), "/debug/deployments/nobody").await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert!(body.contains("\"settings\": \"levels\""), "{body}");
        // Never on the admission port.
        let (status, _) = get(router(state), "/debug/deployments/web1").await;
        assert_eq!(status, StatusCode::NOT_FOUND);
    }
}
