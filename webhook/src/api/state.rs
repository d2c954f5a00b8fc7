//! What the handlers share: the view, the last audit, the metrics, the decision options, the request budget
//! and whether the webhook is draining.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::audit::AuditStore;
use crate::budget::RequestBudget;
use crate::decide::DecideOptions;
use crate::metrics::{Metrics, SourceLabels};
use crate::view::{ViewSink, ViewStore};

/// What the handlers share; cheap to clone (one `Arc`).
#[derive(Clone, Debug)]
pub struct AppState {
    inner: Arc<StateInner>,
}

#[derive(Debug)]
struct StateInner {
    view: Arc<ViewStore>,
    /// The last complete audit of what is already in the cluster (`--source kubernetes`).
    audits: Arc<AuditStore>,
    metrics: Arc<Metrics>,
    draining: AtomicBool,
    options: DecideOptions,
    budget: RequestBudget,
}

/// A state of its own (view store, audits, metrics) with no view yet, the default decision
/// options and request budget: not ready until a source publishes a view.
impl Default for AppState {
    fn default() -> Self {
        AppState::new(
            Arc::new(ViewStore::default()),
            Arc::default(),
            Arc::new(Metrics::new()),
            DecideOptions::default(),
            RequestBudget::default(),
        )
    }
}

impl AppState {
    /// `options`: the decisions off by default (`--flux-post-renderer`, `--stuck-deleting-after-secs`);
    /// `budget`: the request budget (`--body-budget-mib` and the like).
    /// `audits`: where the kube source puts its audits (empty with any other source).
    pub fn new(
        view: Arc<ViewStore>,
        audits: Arc<AuditStore>,
        metrics: Arc<Metrics>,
        options: DecideOptions,
        budget: RequestBudget,
    ) -> Self {
        AppState {
            inner: Arc::new(StateInner {
                view,
                audits,
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

    pub fn options(&self) -> &DecideOptions {
        &self.inner.options
    }

    pub fn view(&self) -> &Arc<ViewStore> {
        &self.inner.view
    }

    /// The last complete audit, and why it is not newer.
    pub fn audits(&self) -> &Arc<AuditStore> {
        &self.inner.audits
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
