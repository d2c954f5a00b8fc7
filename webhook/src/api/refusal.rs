//! Answers to requests refused before a decision: a body the budget did not let through, a
//! body that is not an AdmissionReview. Neither is an admission response: the API server
//! applies the webhook's `failurePolicy`.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::budget::BodyRefusal;
use crate::client_text::clip;
use crate::metrics::{Metrics, RequestLabels};

/// Answers a body the budget did not let through.
pub fn refuse_body(metrics: &Metrics, refusal: &BodyRefusal) -> Response {
    if let Some(reason) = refusal.reason() {
        metrics.reject("https", reason);
    }
    tracing::warn!(%refusal, "request body refused");
    let status = match refusal {
        BodyRefusal::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
        BodyRefusal::OverBudget | BodyRefusal::TakenBack => StatusCode::SERVICE_UNAVAILABLE,
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

/// Answers a body of `bytes` bytes that is not an AdmissionReview: 400 with the parser's
/// message, clipped (it may quote the body).
pub fn bad_review(metrics: &Metrics, bytes: usize, error: &impl std::fmt::Display) -> Response {
    metrics
        .requests
        .get_or_create(&RequestLabels {
            kind: "invalid",
            operation: "invalid",
            outcome: "bad_request",
        })
        .inc();
    let error = error.to_string();
    let error = clip(&error);
    tracing::warn!(bytes, %error, "bad request");
    (StatusCode::BAD_REQUEST, format!("{error}\n")).into_response()
}
