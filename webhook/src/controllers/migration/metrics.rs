//! The executor's metrics, registered with the webhook's others (prefix
//! `styrmin_webhook`); clones share their values.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StateLabels {
    /// `planned`, `moved`, `served` or `failed`.
    pub state: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabels {
    pub outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct GateLabels {
    /// `canary` or `served`.
    pub gate: &'static str,
}

#[derive(Clone, Debug, Default)]
pub struct MigrationMetrics {
    pub ingresses: Family<StateLabels, Gauge>,
    pub writes: Family<OutcomeLabels, Counter>,
    pub gate_failures: Family<GateLabels, Counter>,
    pub steps: Family<OutcomeLabels, Counter>,
    pub running: Gauge,
}

impl MigrationMetrics {
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = MigrationMetrics::default();
        registry.register(
            "migration_ingresses",
            "The Ingresses of the migration step in progress on this replica, by state (planned, moved, served, failed)",
            metrics.ingresses.clone(),
        );
        registry.register(
            "migration_writes",
            "Ingresses a migration wrote back for admission to move, by outcome (moved, not_moved: admission did not give the target class, failed: the write failed)",
            metrics.writes.clone(),
        );
        registry.register(
            "migration_gate_failures",
            "Gates that failed a migration step, by gate (canary, served)",
            metrics.gate_failures.clone(),
        );
        registry.register(
            "migration_steps",
            "Migration steps that ended, by outcome (done, rolled_back, failed, paused)",
            metrics.steps.clone(),
        );
        registry.register(
            "migration_running",
            "1 while this replica carries out a migration",
            metrics.running.clone(),
        );
        metrics
    }

    /// The counts of the step in progress.
    pub fn set_counts(&self, planned: u32, moved: u32, served: u32, failed: u32) {
        for (state, n) in [
            ("planned", planned),
            ("moved", moved),
            ("served", served),
            ("failed", failed),
        ] {
            self.ingresses
                .get_or_create(&StateLabels { state })
                .set(i64::from(n));
        }
    }

    pub fn write(&self, outcome: &'static str) {
        self.writes.get_or_create(&OutcomeLabels { outcome }).inc();
    }

    pub fn gate_failed(&self, gate: &'static str) {
        self.gate_failures.get_or_create(&GateLabels { gate }).inc();
    }

    pub fn step_ended(&self, outcome: &'static str) {
        self.steps.get_or_create(&OutcomeLabels { outcome }).inc();
    }
}
