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
    /// The cluster-wide controllers' (`crate::controllers`), handed to them at start.
    pub controllers: crate::controllers::ControllerMetrics,
    registry: Registry,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut metrics = Metrics {
            audit: crate::audit::AuditMetrics::default(),
            controllers: Default::default(),
            requests: Family::default(),
            // 50 µs .. ~1.6 s.
            request_duration: Histogram::new(exponential_buckets(0.000_05, 2.0, 16)),
            view_age_seconds: Gauge::default(),
            view_changed_timestamp_seconds: Gauge::default(),
            view_ready: Gauge::default(),
            view_deployments: Gauge::default(),
            view_update_failures: Family::default(),
            view_source_valid: Gauge::default(),
            certificate_expiry_timestamp_seconds: Gauge::default(),
            certificate_reloads: Counter::default(),
            certificate_reload_failures: Counter::default(),
            open_connections: Family::default(),
            connections_rejected: Family::default(),
            request_body_bytes_in_flight: Gauge::default(),
            flux_budget_exceeded: Counter::default(),
            open_files_limit: Gauge::default(),
            registry: Registry::with_prefix("styrmin_webhook"),
        };
        metrics.register_admission_and_view();
        metrics.register_serving();
        metrics.audit = crate::audit::AuditMetrics::register(&mut metrics.registry);
        metrics.controllers =
            crate::controllers::ControllerMetrics::register(&mut metrics.registry);
        metrics
    }

    /// Admission answers and the view.
    fn register_admission_and_view(&mut self) {
        self.registry.register(
            "admission_requests",
            "Admission requests by object kind, operation and outcome",
            self.requests.clone(),
        );
        self.registry.register(
            "admission_duration_seconds",
            "Time to decide and encode an admission answer",
            self.request_duration.clone(),
        );
        self.registry.register(
            "view_age_seconds",
            "Seconds since the view's source last confirmed it is current (staleness)",
            self.view_age_seconds.clone(),
        );
        self.registry.register(
            "view_changed_timestamp_seconds",
            "Unix time of the last change of the view",
            self.view_changed_timestamp_seconds.clone(),
        );
        self.registry.register(
            "view_ready",
            "1 once a first complete view is loaded",
            self.view_ready.clone(),
        );
        self.registry.register(
            "view_deployments",
            "Deployments in the view",
            self.view_deployments.clone(),
        );
        self.registry.register(
            "view_update_failures",
            "Updates of the view that failed; the last good view stayed in force",
            self.view_update_failures.clone(),
        );
        self.registry.register(
                "view_source_valid",
                "1 when the source's latest version was valid, 0 when the last good view is kept instead",
            self.view_source_valid.clone(),
        );
    }

    /// The listeners, their certificate and their budgets.
    fn register_serving(&mut self) {
        self.registry.register(
            "certificate_expiry_timestamp_seconds",
            "Unix time at which the serving certificate expires",
            self.certificate_expiry_timestamp_seconds.clone(),
        );
        self.registry.register(
            "certificate_reloads",
            "Serving certificate reloads",
            self.certificate_reloads.clone(),
        );
        self.registry.register(
            "certificate_reload_failures",
            "Serving certificate files that could not be loaded; the last good one stayed in use",
            self.certificate_reload_failures.clone(),
        );
        self.registry.register(
            "open_connections",
            "Open connections per listener",
            self.open_connections.clone(),
        );
        self.registry.register(
            "connections_rejected",
            format!(
                "Connections and requests refused or closed by a budget, by reason: {}",
                RejectReason::ALL
                    .map(|r| format!("{} ({})", r.as_str(), r.meaning()))
                    .join(", ")
            ),
            self.connections_rejected.clone(),
        );
        self.registry.register(
            "request_body_bytes_in_flight",
            "Bytes of the request body budget held by bodies being read or decided",
            self.request_body_bytes_in_flight.clone(),
        );
        self.registry.register(
            "flux_budget_exceeded",
            "HelmReleases allowed unchanged, with a warning, because their post-renderers \
                 did not fit the time budget",
            self.flux_budget_exceeded.clone(),
        );
        self.registry.register(
            "open_files_limit",
            "The process's limit of open file descriptors (RLIMIT_NOFILE soft limit) in force",
            self.open_files_limit.clone(),
        );
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
