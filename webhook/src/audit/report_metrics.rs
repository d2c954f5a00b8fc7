//! The PolicyReport writer's metrics (`crate::kube_source::reports`), apart from the reports'
//! module so that the audit's store can hold them without naming it.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WriteLabels {
    /// `apply` or `delete`.
    pub operation: &'static str,
    /// `ok` or `failed`.
    pub outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ApiLabels {
    /// `openreports`, `wgpolicyk8s` or `none`.
    pub api: &'static str,
}

/// The PolicyReport writer's metrics (registered with the webhook's others, prefix
/// `styrmin_webhook`); clones share their values.
#[derive(Clone, Debug, Default)]
pub struct PolicyReportMetrics {
    pub writes: Family<WriteLabels, Counter>,
    pub unchanged: Counter,
    pub lease_held: Gauge,
    pub api: Family<ApiLabels, Gauge>,
}

impl PolicyReportMetrics {
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = PolicyReportMetrics::default();
        registry.register(
            "policy_report_writes",
            "PolicyReport writes by operation (apply: server-side apply of a new or changed report; delete: its object conforms again) and outcome (ok, failed: retried with backoff)",
            metrics.writes.clone(),
        );
        registry.register(
            "policy_reports_unchanged",
            "PolicyReports found current at a pass of the writer, and so not written",
            metrics.unchanged.clone(),
        );
        registry.register(
            "policy_report_lease_held",
            "1 while this replica holds the PolicyReport lease and writes the reports",
            metrics.lease_held.clone(),
        );
        registry.register(
            "policy_report_api",
            "1 for the report API the reports are written in (openreports, wgpolicyk8s, or none when the API server serves neither)",
            metrics.api.clone(),
        );
        metrics
    }

    /// Counts one write.
    pub fn write(&self, operation: &'static str, ok: bool) {
        let outcome = if ok { "ok" } else { "failed" };
        self.writes
            .get_or_create(&WriteLabels { operation, outcome })
            .inc();
    }
}
