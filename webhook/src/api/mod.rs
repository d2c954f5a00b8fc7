//! The webhook's HTTP surface: the routers of the two listeners ([`router`] for the TLS
//! admission port, [`metrics_router`] for `--metrics-listen`), the state their handlers share
//! ([`state`]), the handlers ([`handlers`]) and the answers to requests refused before a
//! decision ([`refusal`]).

pub mod handlers;
pub mod refusal;
pub mod state;

use axum::Router;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderValue, header};
use axum::response::Response;
use axum::routing::{get, post};

pub use self::state::AppState;
use crate::budget::MAX_BODY_BYTES;

/// The webhook's HTTP surface: `POST /mutate`, `/healthz`, `/readyz`, `/metrics`.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/mutate", post(handlers::mutate))
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
        .route("/debug/deployments/{id}", get(handlers::debug_deployment))
        .route("/debug/audit", get(handlers::debug_audit))
        .with_state(state)
}

fn operations_routes() -> Router<AppState> {
    Router::new()
        .route("/healthz", get(handlers::healthz))
        .route("/readyz", get(handlers::readyz))
        .route("/metrics", get(handlers::metrics))
}

async fn close_while_draining(State(state): State<AppState>, mut response: Response) -> Response {
    if state.is_draining() {
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use axum::body::Body;
    use axum::http::{Request, StatusCode};
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
        let state = AppState::default();
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
