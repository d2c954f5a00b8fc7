//! Prometheus metrics (`/metrics`), in the OpenMetrics text format.

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    pub kind: &'static str,
    pub operation: &'static str,
    pub outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SourceLabels {
    pub source: &'static str,
}

/// `listener`: `https` (admission) or `metrics`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ListenerLabels {
    pub listener: &'static str,
}

/// Why a connection or a request was refused or closed by a budget (`server.rs`, `budget.rs`):
/// the `reason` label of `styrmin_webhook_connections_rejected_total`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RejectReason {
    Cap,
    CapIdleClosed,
    CapBusyClosed,
    HandshakeTimeout,
    HeadTimeout,
    Idle,
    WriteTimeout,
    BodyTimeout,
    BodyBudget,
    BodyShare,
}

impl RejectReason {
    pub const ALL: [RejectReason; 10] = [
        RejectReason::Cap,
        RejectReason::CapIdleClosed,
        RejectReason::CapBusyClosed,
        RejectReason::HandshakeTimeout,
        RejectReason::HeadTimeout,
        RejectReason::Idle,
        RejectReason::WriteTimeout,
        RejectReason::BodyTimeout,
        RejectReason::BodyBudget,
        RejectReason::BodyShare,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RejectReason::Cap => "cap",
            RejectReason::CapIdleClosed => "cap_idle_closed",
            RejectReason::CapBusyClosed => "cap_busy_closed",
            RejectReason::HandshakeTimeout => "handshake_timeout",
            RejectReason::HeadTimeout => "head_timeout",
            RejectReason::Idle => "idle",
            RejectReason::WriteTimeout => "write_timeout",
            RejectReason::BodyTimeout => "body_timeout",
            RejectReason::BodyBudget => "body_budget",
            RejectReason::BodyShare => "body_share",
        }
    }

    /// What happened, for the metric's help.
    fn meaning(self) -> &'static str {
        match self {
            RejectReason::Cap => "a new connection refused at the connection cap",
            RejectReason::CapIdleClosed => "an idle connection closed to make room",
            RejectReason::CapBusyClosed => {
                "a busy connection of the peer holding the most closed to make room"
            }
            RejectReason::HandshakeTimeout => "a TLS handshake over the head timeout",
            RejectReason::HeadTimeout => "a request head over the head timeout",
            RejectReason::Idle => "a keep-alive connection idle past the idle timeout",
            RejectReason::WriteTimeout => "an answer not taken within the write timeout",
            RejectReason::BodyTimeout => "a request body over the body timeout",
            RejectReason::BodyBudget => "a request body over the body budget",
            RejectReason::BodyShare => {
                "a request body over its peer's share of the budget, taken back"
            }
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RejectLabels {
    pub listener: &'static str,
    pub reason: &'static str,
}

/// Every metric the webhook exposes.
#[derive(Debug)]
pub struct Metrics {
    pub requests: Family<RequestLabels, Counter>,
    pub request_duration: Histogram,
    pub view_age_seconds: Gauge<f64, AtomicU64>,
    pub view_changed_timestamp_seconds: Gauge<f64, AtomicU64>,
    pub view_ready: Gauge,
    pub view_deployments: Gauge,
    pub view_update_failures: Family<SourceLabels, Counter>,
    pub view_source_valid: Gauge,
    pub certificate_expiry_timestamp_seconds: Gauge<f64, AtomicU64>,
    pub certificate_reloads: Counter,
    pub certificate_reload_failures: Counter,
    pub open_connections: Family<ListenerLabels, Gauge>,
    pub connections_rejected: Family<RejectLabels, Counter>,
    pub request_body_bytes_in_flight: Gauge,
    pub flux_budget_exceeded: Counter,
    pub open_files_limit: Gauge,
    /// The audit of what is already in the cluster (`crate::audit`).
    pub audit: crate::audit::AuditMetrics,
    /// The PolicyReport writer's (`crate::controllers::policy_reports`), handed to it at start.
    pub policy_reports: crate::controllers::policy_reports::metrics::PolicyReportMetrics,
    registry: Registry,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let requests = Family::<RequestLabels, Counter>::default();
        // 50 µs .. ~1.6 s.
        let request_duration = Histogram::new(exponential_buckets(0.000_05, 2.0, 16));
        let view_age_seconds = Gauge::<f64, AtomicU64>::default();
        let view_changed_timestamp_seconds = Gauge::<f64, AtomicU64>::default();
        let view_ready = Gauge::default();
        let view_deployments = Gauge::default();
        let view_update_failures = Family::<SourceLabels, Counter>::default();
        let view_source_valid = Gauge::default();
        let certificate_expiry_timestamp_seconds = Gauge::<f64, AtomicU64>::default();
        let certificate_reloads = Counter::default();
        let certificate_reload_failures = Counter::default();
        let open_connections = Family::<ListenerLabels, Gauge>::default();
        let connections_rejected = Family::<RejectLabels, Counter>::default();
        let request_body_bytes_in_flight = Gauge::default();
        let flux_budget_exceeded = Counter::default();
        let open_files_limit = Gauge::default();

        let mut registry = Registry::with_prefix("styrmin_webhook");
        registry.register(
            "admission_requests",
            "Admission requests by object kind, operation and outcome",
            requests.clone(),
        );
        registry.register(
            "admission_duration_seconds",
            "Time to decide and encode an admission answer",
            request_duration.clone(),
        );
        registry.register(
            "view_age_seconds",
            "Seconds since the view's source last confirmed it is current (staleness)",
            view_age_seconds.clone(),
        );
        registry.register(
            "view_changed_timestamp_seconds",
            "Unix time of the last change of the view",
            view_changed_timestamp_seconds.clone(),
        );
        registry.register(
            "view_ready",
            "1 once a first complete view is loaded",
            view_ready.clone(),
        );
        registry.register(
            "view_deployments",
            "Deployments in the view",
            view_deployments.clone(),
        );
        registry.register(
            "view_update_failures",
            "Updates of the view that failed; the last good view stayed in force",
            view_update_failures.clone(),
        );
        registry.register(
            "view_source_valid",
            "1 when the source's latest version was valid, 0 when the last good view is kept instead",
            view_source_valid.clone(),
        );
        registry.register(
            "certificate_expiry_timestamp_seconds",
            "Unix time at which the serving certificate expires",
            certificate_expiry_timestamp_seconds.clone(),
        );
        registry.register(
            "certificate_reloads",
            "Serving certificate reloads",
            certificate_reloads.clone(),
        );
        registry.register(
            "certificate_reload_failures",
            "Serving certificate files that could not be loaded; the last good one stayed in use",
            certificate_reload_failures.clone(),
        );
        registry.register(
            "open_connections",
            "Open connections per listener",
            open_connections.clone(),
        );
        registry.register(
            "connections_rejected",
            format!(
                "Connections and requests refused or closed by a budget, by reason: {}",
                RejectReason::ALL
                    .map(|r| format!("{} ({})", r.as_str(), r.meaning()))
                    .join(", ")
            ),
            connections_rejected.clone(),
        );
        registry.register(
            "request_body_bytes_in_flight",
            "Bytes of the request body budget held by bodies being read or decided",
            request_body_bytes_in_flight.clone(),
        );
        registry.register(
            "flux_budget_exceeded",
            "HelmReleases allowed unchanged, with a warning, because their post-renderers \
             did not fit the time budget",
            flux_budget_exceeded.clone(),
        );
        registry.register(
            "open_files_limit",
            "The process's limit of open file descriptors (RLIMIT_NOFILE soft limit) in force",
            open_files_limit.clone(),
        );
        let audit = crate::audit::AuditMetrics::register(&mut registry);
        let policy_reports =
            crate::controllers::policy_reports::metrics::PolicyReportMetrics::register(
                &mut registry,
            );
        Metrics {
            audit,
            policy_reports,
            requests,
            request_duration,
            view_age_seconds,
            view_changed_timestamp_seconds,
            view_ready,
            view_deployments,
            view_update_failures,
            view_source_valid,
            certificate_expiry_timestamp_seconds,
            certificate_reloads,
            certificate_reload_failures,
            open_connections,
            connections_rejected,
            request_body_bytes_in_flight,
            flux_budget_exceeded,
            open_files_limit,
            registry,
        }
    }

    /// Counts one refusal or budget closure.
    pub fn reject(&self, listener: &'static str, reason: RejectReason) {
        self.connections_rejected
            .get_or_create(&RejectLabels {
                listener,
                reason: reason.as_str(),
            })
            .inc();
    }

    /// The OpenMetrics text.
    pub fn encode(&self) -> String {
        let mut text = String::new();
        if prometheus_client::encoding::text::encode(&mut text, &self.registry).is_err() {
            text.clear();
        }
        text
    }
}
