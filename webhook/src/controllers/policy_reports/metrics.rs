//! The PolicyReport writer's metrics, made with the webhook's others and handed to the
//! writer when it starts.

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
pub struct OutcomeLabels {
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
    pub list_pages: Family<OutcomeLabels, Counter>,
    pub unchanged: Counter,
    pub reports: Gauge,
    pub failing: Gauge,
    pub api: Family<ApiLabels, Gauge>,
}

fn outcome(ok: bool) -> &'static str {
    if ok { "ok" } else { "failed" }
}

impl PolicyReportMetrics {
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = PolicyReportMetrics::default();
        registry.register(
            "policy_report_writes",
            "PolicyReport writes by operation (apply: server-side apply of a new or changed report; delete: its object conforms again) and outcome (ok, failed: that report is retried with backoff)",
            metrics.writes.clone(),
        );
        registry.register(
            "policy_report_list_pages",
            "Pages of the writer's listings of its PolicyReports (on taking the lease, every resync, after the watches list again), by outcome",
            metrics.list_pages.clone(),
        );
        registry.register(
            "policy_reports_unchanged",
            "PolicyReports found current at a pass of the writer, and so not written",
            metrics.unchanged.clone(),
        );
        registry.register(
            "policy_reports",
            "PolicyReports the last audit asks for (on the replica that writes)",
            metrics.reports.clone(),
        );
        registry.register(
            "policy_reports_failing",
            "PolicyReports whose last write failed and that wait for their retry",
            metrics.failing.clone(),
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
        self.writes
            .get_or_create(&WriteLabels {
                operation,
                outcome: outcome(ok),
            })
            .inc();
    }

    /// Counts one page of a listing.
    pub fn list_page(&self, ok: bool) {
        self.list_pages
            .get_or_create(&OutcomeLabels {
                outcome: outcome(ok),
            })
            .inc();
    }

    /// The reports asked for, and those waiting after a failed write.
    pub fn set_counts(&self, reports: usize, failing: usize) {
        let gauge = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        self.reports.set(gauge(reports));
        self.failing.set(gauge(failing));
    }

    /// `styrmin_webhook_policy_report_api`: 1 for the API written in (or `none`), 0 for the
    /// others.
    pub fn set_chosen_api(&self, chosen: &str) {
        for label in ["openreports", "wgpolicyk8s", "none"] {
            self.api
                .get_or_create(&ApiLabels { api: label })
                .set(i64::from(label == chosen));
        }
    }
}
