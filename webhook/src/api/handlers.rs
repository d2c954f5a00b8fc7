//! The handlers of both listeners: `POST /mutate` (admission), `/healthz`, `/readyz`,
//! `/metrics`, and `GET /debug/deployments/{id}` and `GET /debug/audit` (metrics listener only).

use std::sync::Arc;
use std::time::Instant;

use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::refusal;
use super::state::AppState;
use crate::admission::{encode_review, parse_review};
use crate::budget::Peer;
use crate::client_text::clip;
use crate::decide::{Admission, DecidedAt, Decision, RequestOutcome, ReviewKind, decide};
use crate::metrics::RequestLabels;

/// The decision; a HelmRelease whose post-renderers Styrmin edits is decided on a blocking
/// thread, one at a time, within the Flux time budget (its patch texts are YAML to parse).
async fn decide_request(
    state: &AppState,
    admission: &Arc<Admission>,
    started: Instant,
) -> Decision {
    let options = *state.options();
    let view = state.view().load();
    if !(admission.kind() == ReviewKind::HelmRelease && options.flux_post_renderer) {
        return decide(&view, admission, &options, DecidedAt::now());
    }
    let deadline = started + state.budget().flux_budget;
    let permits = state.budget().flux_decisions.clone();
    let decided = tokio::time::timeout_at(deadline.into(), async {
        let permit = permits.acquire_owned().await.ok()?;
        let (view, admission) = (view.clone(), admission.clone());
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            decide(&view, &admission, &options, DecidedAt::now_within(deadline))
        })
        .await
        .ok()
    })
    .await;
    match decided {
        Ok(Some(decision)) => decision,
        // No turn before the deadline (or the task failed): the deadline has passed, so only
        // the cheap part runs (W2) and the post-renderers are left as they are.
        _ => decide(
            &view,
            admission,
            &options,
            DecidedAt::now_within(Instant::now()),
        ),
    }
}

/// `POST /mutate`: one AdmissionReview in, its answer out.
pub async fn mutate(State(state): State<AppState>, request: axum::extract::Request) -> Response {
    let metrics = state.metrics();
    // The connection layer tells which peer sent it (the budgets are shared per peer).
    let peer = request
        .extensions()
        .get::<Peer>()
        .copied()
        .unwrap_or(Peer::LOCAL);
    let body = match state.budget().read_body(request.into_body(), peer).await {
        Ok(body) => body,
        Err(refusal) => return refusal::refuse_body(metrics, &refusal),
    };
    let started = Instant::now();
    let review = match parse_review(&body.bytes) {
        Ok(review) => review,
        Err(error) => return refusal::bad_review(metrics, body.bytes.len(), &error),
    };
    drop(body);
    let api_version = review.api_version;
    let admission = Arc::new(Admission::new(review.request));
    let body = admit(&state, &admission, api_version, started).await;
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// Decides one review and encodes the answer, in the `admission` span of the request.
#[tracing::instrument(
    name = "admission",
    skip_all,
    fields(
        uid = %clip(&admission.request().uid),
        kind = admission.kind().as_str(),
        request_kind = admission.request().request_kind.as_ref().map(|k| clip(&k.kind)).as_deref(),
        operation = admission.request().operation.as_str(),
        namespace = %clip(admission.request().namespace().unwrap_or("")),
        name = %clip(admission.request().name().unwrap_or("")),
        decision = tracing::field::Empty,
        settings = tracing::field::Empty,
        applied = tracing::field::Empty,
        decided_by = tracing::field::Empty,
    )
)]
async fn admit(
    state: &AppState,
    admission: &Arc<Admission>,
    api_version: &'static str,
    started: Instant,
) -> Vec<u8> {
    let decision = decide_request(state, admission, started).await;
    record_outcome(state, admission, &decision, started);
    let request = admission.request();
    encode_review(api_version, &decision.into_response(&request.uid))
}

/// The decision in the current span, the log and the metrics.
fn record_outcome(state: &AppState, admission: &Admission, decision: &Decision, started: Instant) {
    let span = tracing::Span::current();
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
    let metrics = state.metrics();
    if decision.flux_over_budget {
        metrics.flux_budget_exceeded.inc();
        tracing::warn!(
            budget_ms = state.budget().flux_budget.as_millis(),
            "HelmRelease allowed unchanged: its post-renderers did not fit the time budget"
        );
    }
    match decision.outcome {
        RequestOutcome::Denied => tracing::info!(
            reason = %decision.reason,
            message = decision.status.as_ref().map(|s| clip(&s.message)).as_deref(),
            "denied"
        ),
        // Routine, and the API server's audit log records each webhook patch: DEBUG.
        RequestOutcome::Patched if decision.warnings.is_empty() => {
            tracing::debug!(reason = %decision.reason, operations = decision.patch.len(), "patched")
        }
        // Warn mode: routine during a rollout, on every write, like a patch in enforce; the
        // warnings reach the client and the API server's audit log, and the metric counts
        // them: DEBUG.
        RequestOutcome::WouldPatch | RequestOutcome::WouldDeny => {
            let warnings: Vec<_> = decision.warnings.iter().map(|w| clip(w)).collect();
            tracing::debug!(reason = %decision.reason, ?warnings, "allowed in warn mode");
        }
        RequestOutcome::Patched | RequestOutcome::Conforming | RequestOutcome::Allowed => {
            if decision.warnings.is_empty() {
                tracing::debug!(reason = %decision.reason, "allowed");
            } else {
                let warnings: Vec<_> = decision.warnings.iter().map(|w| clip(w)).collect();
                tracing::info!(reason = %decision.reason, ?warnings, "allowed with a warning");
            }
        }
    }
    metrics
        .requests
        .get_or_create(&RequestLabels {
            kind: admission.kind().as_str(),
            operation: admission.request().operation.as_str(),
            outcome: decision.outcome.as_str(),
        })
        .inc();
    metrics
        .request_duration
        .observe(started.elapsed().as_secs_f64());
}

/// Alive: answers while the process serves HTTP.
pub async fn healthz() -> &'static str {
    "ok"
}

/// Ready once a view is loaded, until draining starts.
pub async fn readyz(State(state): State<AppState>) -> (StatusCode, &'static str) {
    if state.is_draining() {
        (StatusCode::SERVICE_UNAVAILABLE, "shutting down")
    } else if !state.view().is_ready() {
        (StatusCode::SERVICE_UNAVAILABLE, "no view loaded yet")
    } else {
        (StatusCode::OK, "ok")
    }
}

/// The metrics in OpenMetrics text, with the view's gauges read now.
pub async fn metrics(State(state): State<AppState>) -> Response {
    let (view, metrics) = (state.view(), state.metrics());
    metrics
        .view_age_seconds
        .set(view.age().map_or(f64::NAN, |age| age.as_secs_f64()));
    metrics
        .view_changed_timestamp_seconds
        .set(view.changed_at_unix().unwrap_or(0.0));
    metrics.view_ready.set(i64::from(view.is_ready()));
    metrics.audit.export(state.audits());
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

/// `GET /debug/deployments/{id}` on the metrics listener: what the view holds for deployment
/// `id` and which settings its Ingresses get, as JSON (`404` when the view does not know it;
/// its Ingresses then get the cluster level).
pub async fn debug_deployment(State(state): State<AppState>, Path(id): Path<String>) -> Response {
    let view = state.view().load();
    let body = crate::view::debug_deployment(&view, &id);
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

/// `GET /debug/audit` on the metrics listener: the last complete audit, its age, and why it
/// is not newer (a watch that fails keeps it). `503` before the first one.
pub async fn debug_audit(State(state): State<AppState>) -> Response {
    let store = state.audits();
    let status = if store.report().is_some() {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let body = store.debug(crate::clock::unix_now());
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        format!("{body:#}\n"),
    )
        .into_response()
}
