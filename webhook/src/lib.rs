//! `styrmin-webhook`: the mutating admission webhook that enforces Styrmin's ingress rules
//! (rules W1–W4) and blocks deploys while an environment's dedicated ingress controller is
//! being removed (W2).
//!
//! Layout: [`decide`] holds the decisions as pure functions of a [`view::View`] and one
//! request; [`view`] the in-memory view and the seam its sources plug into ([`policy_file`]
//! and [`kube_source`]); [`router`] the HTTP surface; [`server`] the TLS accept loop; [`cli`]
//! the wiring.

pub mod admission;
pub mod audit;
pub mod budget;
pub mod cli;
pub mod client_text;
pub mod crd;
pub mod decide;
pub mod flux;
pub mod kube_source;
pub mod metrics;
pub mod open_files;
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
use axum::body::Body;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};

use crate::admission::{AdmissionRequest, encode_review, parse_review};
use crate::budget::{BodyRefusal, RequestBudget};
use crate::client_text::clip;
use crate::decide::{
    DecideOptions, Decision, FLUX_OVER_BUDGET_REASON, Outcome, ReviewKind, decide_within,
};
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
    budget: RequestBudget,
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
        Self::with_budget(view, metrics, options, RequestBudget::default())
    }

    /// With the request budget of the command line (`--body-budget-mib` and the like).
    pub fn with_budget(
        view: Arc<ViewStore>,
        metrics: Arc<Metrics>,
        options: DecideOptions,
        budget: RequestBudget,
    ) -> Self {
        AppState {
            inner: Arc::new(StateInner {
                view,
                metrics,
                draining: AtomicBool::new(false),
                options,
                budget,
            }),
        }
    }

    pub fn budget(&self) -> &RequestBudget {
        &self.inner.budget
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
    metrics
        .request_body_bytes_in_flight
        .set(i64::try_from(state.budget().body_bytes_in_use()).unwrap_or(i64::MAX));
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        metrics.encode(),
    )
        .into_response()
}

/// Answers a body the budget did not let through.
fn refuse_body(state: &AppState, refusal: &BodyRefusal) -> Response {
    if let Some(reason) = refusal.reason() {
        state.metrics().reject("https", reason);
    }
    tracing::warn!(%refusal, "request body refused");
    let status = match refusal {
        BodyRefusal::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
        BodyRefusal::OverBudget => StatusCode::SERVICE_UNAVAILABLE,
        BodyRefusal::Timeout(_) => StatusCode::REQUEST_TIMEOUT,
        BodyRefusal::Broken => StatusCode::BAD_REQUEST,
    };
    // The rest of the body is not read: the connection cannot carry another request.
    (
        status,
        [
            (header::CONNECTION, HeaderValue::from_static("close")),
            (header::RETRY_AFTER, HeaderValue::from_static("1")),
        ],
        format!("{refusal}\n"),
    )
        .into_response()
}

/// The decision; a HelmRelease whose post-renderers Styrmin edits is decided on a blocking
/// thread, one at a time, within the Flux time budget (its patch texts are YAML to parse).
async fn decide_request(
    state: &AppState,
    request: &Arc<AdmissionRequest>,
    kind: ReviewKind,
    started: Instant,
) -> Decision {
    let options = state.inner.options;
    let view = state.view().load();
    if !(kind == ReviewKind::HelmRelease && options.flux_post_renderer) {
        return decide_within(&view, request, &options, None);
    }
    let deadline = started + state.budget().flux_budget;
    let permits = state.budget().flux_decisions.clone();
    let decided = tokio::time::timeout_at(deadline.into(), async {
        let permit = permits.acquire_owned().await.ok()?;
        let (view, request) = (view.clone(), request.clone());
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            decide_within(&view, &request, &options, Some(deadline))
        })
        .await
        .ok()
    })
    .await;
    match decided {
        Ok(Some(decision)) => decision,
        // No turn before the deadline (or the task failed): the deadline has passed, so only
        // the cheap part runs (W2) and the post-renderers are left as they are.
        _ => decide_within(&view, request, &options, Some(Instant::now())),
    }
}

async fn mutate(State(state): State<AppState>, body: Body) -> Response {
    let metrics = state.metrics();
    let body = match state.budget().read_body(body).await {
        Ok(body) => body,
        Err(refusal) => return refuse_body(&state, &refusal),
    };
    let started = Instant::now();
    let review = match parse_review(&body.bytes) {
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
            // The parser's message may quote the body: bounded.
            let error = error.to_string();
            let error = clip(&error);
            tracing::warn!(bytes = body.bytes.len(), %error, "bad request");
            return (StatusCode::BAD_REQUEST, format!("{error}\n")).into_response();
        }
    };
    drop(body);
    let api_version = review.api_version;
    let request = Arc::new(review.request);
    let kind = ReviewKind::of(&request);
    let decision = decide_request(&state, &request, kind, started).await;
    let span = tracing::info_span!(
        "admission",
        uid = %clip(&request.uid),
        kind = kind.as_str(),
        request_kind = request.request_kind.as_ref().map(|k| clip(&k.kind)).as_deref(),
        operation = request.operation.as_str(),
        namespace = %clip(request.namespace().unwrap_or("")),
        name = %clip(request.name().unwrap_or("")),
        decision = tracing::field::Empty,
        settings = tracing::field::Empty,
        applied = tracing::field::Empty,
        decided_by = tracing::field::Empty,
    );
    let _entered = span.enter();
    span.record("decision", decision.outcome.as_str());
    if let Some(settings) = &decision.settings {
        // W5: whether the deployment's last-deployed record or its levels decided.
        span.record("settings", settings.source().as_str());
        span.record(
            "applied",
            tracing::field::display(clip(&settings.applied().to_string())),
        );
        span.record(
            "decided_by",
            tracing::field::display(settings.resolved.decided_by()),
        );
        // Only during a transition (the record holds the deployment on its old settings), so
        // INFO: it says why an Ingress did not get the newest cluster or environment values.
        if settings.waits_for_redeploy() {
            tracing::info!(
                levels = %clip(&settings.levels.target.to_string()),
                levels_decided_by = %settings.levels.decided_by(),
                "the deployment keeps the settings it was last deployed with until Styrmin redeploys it"
            );
        }
    }
    if decision.reason == FLUX_OVER_BUDGET_REASON {
        metrics.flux_budget_exceeded.inc();
        tracing::warn!(
            budget_ms = state.budget().flux_budget.as_millis(),
            "HelmRelease allowed unchanged: its post-renderers did not fit the time budget"
        );
    }
    let outcome = decision.outcome;
    match outcome {
        Outcome::Denied => tracing::info!(
            reason = %decision.reason,
            message = decision.status.as_ref().map(|s| clip(&s.message)).as_deref(),
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
                let warnings: Vec<_> = decision.warnings.iter().map(|w| clip(w)).collect();
                tracing::info!(reason = %decision.reason, ?warnings, "allowed with a warning");
            }
        }
    }
    let body = encode_review(api_version, &decision.into_response(&request.uid));
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
