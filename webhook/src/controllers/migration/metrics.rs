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

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ErrorLabels {
    /// One of [`EXECUTOR_ERRORS`].
    pub error: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PhaseLabels {
    /// One of [`PHASES`].
    pub phase: &'static str,
}

/// The kinds of executor error, the label values of `migration_executor_errors_total`:
/// the API server answered an error, a write met a newer `resourceVersion`, a call took
/// longer than its bound, the cluster could not be read, the levels make no view, the
/// status would be too large.
pub const EXECUTOR_ERRORS: [&str; 6] = [
    "api",
    "conflict",
    "timeout",
    "cluster_read",
    "levels",
    "status_too_large",
];

/// The phases `migrations` counts by (`Pending`: not picked up yet).
pub const PHASES: [&str; 6] = [
    "Pending",
    "Running",
    "Paused",
    "Done",
    "RolledBack",
    "Failed",
];

#[derive(Clone, Debug, Default)]
pub struct MigrationMetrics {
    pub ingresses: Family<StateLabels, Gauge>,
    pub writes: Family<OutcomeLabels, Counter>,
    pub gate_failures: Family<GateLabels, Counter>,
    pub steps: Family<OutcomeLabels, Counter>,
    pub running: Gauge,
    pub executor_errors: Family<ErrorLabels, Counter>,
    pub migrations: Family<PhaseLabels, Gauge>,
    pub progress_timestamp_seconds: Gauge,
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
            "1 while this replica carries out a migration that is not paused (also while it waits after an error or on a blocking pre-flight)",
            metrics.running.clone(),
        );
        registry.register(
            "migration_executor_errors",
            "Errors that stopped a pass of the migration executor (each tried again after a backoff), by error (api, conflict, timeout, cluster_read, levels, status_too_large)",
            metrics.executor_errors.clone(),
        );
        registry.register(
            "migrations",
            "StyrminMigrations by phase (Pending: not picked up yet), as the replica that carries them out last listed them; 0 on the others",
            metrics.migrations.clone(),
        );
        registry.register(
            "migration_progress_timestamp_seconds",
            "Unix time of the executor's last progress on this replica: an Ingress moved or a status written (0: none yet)",
            metrics.progress_timestamp_seconds.clone(),
        );
        // Every label value from the start: a rate needs the zero before the first error,
        // and an alert reads the phase counts before there is a migration.
        for error in EXECUTOR_ERRORS {
            metrics
                .executor_errors
                .get_or_create(&ErrorLabels { error })
                .inc_by(0);
        }
        metrics.count_phases([]);
        metrics
    }

    /// Counts an executor error of kind `error` (one of [`EXECUTOR_ERRORS`]).
    pub fn executor_error(&self, error: &'static str) {
        self.executor_errors
            .get_or_create(&ErrorLabels { error })
            .inc();
    }

    /// Sets the migrations by phase from the phases listed (`None`: not picked up).
    pub fn count_phases<'a>(&self, phases: impl IntoIterator<Item = &'a str>) {
        let mut counts = [0i64; PHASES.len()];
        for phase in phases {
            if let Some(index) = PHASES.iter().position(|p| *p == phase) {
                counts[index] += 1;
            }
        }
        for (phase, n) in PHASES.iter().zip(counts) {
            self.migrations.get_or_create(&PhaseLabels { phase }).set(n);
        }
    }

    /// The executor got on: now is its last progress.
    pub fn progressed(&self) {
        self.progress_timestamp_seconds
            .set(crate::clock::unix_now());
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
