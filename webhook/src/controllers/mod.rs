//! The cluster-wide controllers: the work that one replica does for the whole cluster while it
//! holds the Lease `styrmin-webhook-controllers` ([`lease`]): the PolicyReport writer
//! ([`policy_reports`]), fed by the audit's rounds ([`crate::audit::round`]), and the
//! migration executor ([`migration`]). [`WithControllers`] puts them on the kube source with
//! every watch: every replica runs the election and keeps its audit current, the holder also
//! writes, and at shutdown the controllers stop before the Lease is given back.
//!
//! They run in their own process, `styrmin-webhook controllers` ([`crate::cli::controllers`]),
//! apart from admission (`serve`), in their own Deployment with their own service account, so
//! that their memory, their write rights and their failures never reach the fail-closed
//! admission pods. `serve --policy-reports` or `--migrations` still runs them inside admission,
//! deprecated, for one release. The Lease that version elected with,
//! `styrmin-webhook-policy-reports`, is only read ([`LEASE_CALLS`]): while a replica of that
//! version holds it, no replica takes the new one.
//!
//! Why not a crate for the Lease: `kube-leader-election` 0.44 needs kube 4 (the workspace
//! uses kube 5); `kube-lease-manager` matches kube 5 but takes the Lease through
//! server-side apply conflicts, its holder learns of a loss only at its next check, and the
//! renew deadline (how long a holder cut off from the API server may still write) is not
//! one of its settings; kubert's `LeaseManager` brings kubert's runtime and its own client
//! set-up. The loop on `resourceVersion` here is what kube-controller-manager runs, in a
//! pure [`lease::decide`] and under two hundred lines of calls.

pub mod lease;
pub mod migration;
pub mod policy_reports;

use std::time::Duration;

use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use tokio_util::sync::CancellationToken;

use crate::kube_source::{ApiCall, KubeSource};
use crate::view::{ViewSink, ViewSource};
use lease::{Leadership, LeaseSettings};
use migration::metrics::MigrationMetrics;
use migration::run::MigrationSettings;
use policy_reports::PolicyReportSettings;
use policy_reports::metrics::PolicyReportMetrics;

/// The Lease that elects the one replica that runs the cluster-wide controllers, in the
/// controllers' own namespace (a Role, not the ClusterRole): read and updated by its name
/// only (with the `resourceVersion` read, [`lease`]), created by the first replica
/// (`create` cannot be limited to a name: the object does not exist yet), and the previous
/// version's Lease read by its name, never written ([`lease::LEGACY_LEASE_NAME`]). The
/// chart's Role must grant exactly these (a test compares them).
pub const LEASE_CALLS: [ApiCall; 3] = [
    ApiCall::Resource {
        group: "coordination.k8s.io",
        version: "v1",
        resource: "leases",
        verbs: &["get", "update"],
        names: &[lease::LEASE_NAME],
    },
    ApiCall::Resource {
        group: "coordination.k8s.io",
        version: "v1",
        resource: "leases",
        verbs: &["create"],
        names: &[],
    },
    ApiCall::Resource {
        group: "coordination.k8s.io",
        version: "v1",
        resource: "leases",
        verbs: &["get"],
        names: &[lease::LEGACY_LEASE_NAME],
    },
];

/// The controllers' metrics, in the process's registry ([`crate::metrics`]).
#[derive(Clone, Debug, Default)]
pub struct ControllerMetrics {
    /// The PolicyReport writer's, handed to it at start.
    pub policy_reports: PolicyReportMetrics,
    /// The migration executor's, handed to it at start.
    pub migrations: MigrationMetrics,
    /// `controllers_lease_held`: 1 while this replica holds the controllers' Lease.
    pub lease_held: Gauge,
    /// `controllers_running`: 1 in a process that runs the controllers, so that "no
    /// replica holds the Lease" can be told apart from "no controllers scraped".
    pub running: Gauge,
}

impl ControllerMetrics {
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = ControllerMetrics {
            policy_reports: PolicyReportMetrics::register(registry),
            migrations: MigrationMetrics::register(registry),
            ..ControllerMetrics::default()
        };
        registry.register(
            "controllers_lease_held",
            "1 while this replica holds the controllers' Lease and runs the report writer and the migrations",
            metrics.lease_held.clone(),
        );
        registry.register(
            "controllers_running",
            "1 in a process that runs the cluster-wide controllers and takes part in their election",
            metrics.running.clone(),
        );
        metrics
    }
}

/// The kube source with the cluster-wide controllers it feeds: a [`ViewSource`] whose run
/// also runs the election and the controllers. At `shutdown` the controllers stop first,
/// and only once they have stopped (or [`LeaseSettings::renew_deadline`] has passed and
/// they are dropped) is the Lease given back; then the run returns.
#[derive(Debug)]
pub struct WithControllers {
    /// The source of the view and the audit (every watched resource).
    pub source: KubeSource,
    /// The election (an empty namespace means the client's).
    pub election: LeaseSettings,
    /// `--policy-reports` (`None`: off).
    pub policy_reports: Option<PolicyReportSettings>,
    pub metrics: PolicyReportMetrics,
    /// `styrmin_webhook_controllers_lease_held`.
    pub lease_held: Gauge,
    /// `--migrations`: where the canaries go (`None`: off; an empty namespace means the
    /// Lease's).
    pub migrations: Option<MigrationSettings>,
    /// Cancelled at SIGTERM.
    pub shutdown: CancellationToken,
}

impl WithControllers {
    /// The controllers of a process whose controllers' metrics are `metrics` (marked as
    /// running the controllers there), the executor on when `migrations`, its events and canaries under
    /// the election's identity and namespace.
    pub fn new(
        source: KubeSource,
        election: LeaseSettings,
        policy_reports: Option<PolicyReportSettings>,
        migrations: bool,
        metrics: &ControllerMetrics,
        shutdown: CancellationToken,
    ) -> Self {
        metrics.running.set(1);
        WithControllers {
            source,
            migrations: migrations.then(|| MigrationSettings {
                namespace: String::new(),
                identity: election.identity.clone(),
                metrics: metrics.migrations.clone(),
                watched: None,
                moving: Default::default(),
                lease: String::new(),
            }),
            election,
            policy_reports,
            metrics: metrics.policy_reports.clone(),
            lease_held: metrics.lease_held.clone(),
            shutdown,
        }
    }
}

impl ViewSource for WithControllers {
    fn name(&self) -> &'static str {
        self.source.name()
    }

    async fn run(self, sink: ViewSink) -> anyhow::Result<()> {
        let WithControllers {
            source,
            mut election,
            policy_reports,
            metrics,
            lease_held,
            migrations,
            shutdown,
        } = self;
        let client = source.client().clone();
        if election.namespace.is_empty() {
            election.namespace = client.default_namespace().to_owned();
        }
        let stop_within = election.renew_deadline;
        let leadership = Leadership::default();
        // Its own token: the Lease is given back after the controllers stop, not with them.
        // A JoinSet, as for the controllers: dropping this run (an aborted task) ends both.
        let election_stop = CancellationToken::new();
        let mut election_task = tokio::task::JoinSet::new();
        election_task.spawn(lease::run(
            client.clone(),
            election.clone(),
            leadership.clone(),
            lease_held,
            election_stop.clone(),
        ));
        let stop = shutdown.child_token();
        let mut tasks = tokio::task::JoinSet::new();
        let mut source = source;
        if let Some(mut settings) = migrations {
            if settings.namespace.is_empty() {
                settings.namespace.clone_from(&election.namespace);
            }
            // The executor reads its steps' movers from the audit's stores.
            let (watched, feed) = tokio::sync::watch::channel(None);
            source = source
                .with_watched_cluster(watched)
                .with_moving(settings.moving.clone());
            settings.watched = Some(feed);
            settings.lease = format!("{}/{}", election.namespace, election.name);
            tasks.spawn(migration::run::run_migrations(
                client.clone(),
                settings,
                leadership.clone(),
                stop.clone(),
            ));
        }
        let source = match policy_reports {
            Some(settings) => {
                let (rounds, feed) = tokio::sync::watch::channel(None);
                policy_reports::start(
                    &mut tasks,
                    &client,
                    settings,
                    feed,
                    metrics,
                    leadership,
                    stop.clone(),
                );
                source.with_rounds(Some(rounds))
            }
            None => source,
        };
        let outcome = tokio::select! {
            outcome = source.run(sink) => outcome,
            () = shutdown.cancelled() => Ok(()),
        };
        stop.cancel();
        stop_then_give_back(tasks, stop_within, election_stop, election_task).await;
        outcome
    }
}

/// Waits up to `within` for the controllers to stop (then drops them), then ends the
/// election, which gives the Lease back if this replica holds it.
async fn stop_then_give_back(
    mut tasks: tokio::task::JoinSet<()>,
    within: Duration,
    election_stop: CancellationToken,
    mut election: tokio::task::JoinSet<()>,
) {
    let stopped =
        tokio::time::timeout(within, async { while tasks.join_next().await.is_some() {} }).await;
    if stopped.is_err() {
        tracing::warn!(
            ?within,
            "shutting down: the controllers did not stop in time; dropping them"
        );
        tasks.shutdown().await;
    }
    tracing::info!("shutting down: the controllers have stopped");
    election_stop.cancel();
    if let Some(Err(error)) = election.join_next().await {
        tracing::warn!(%error, "the election task failed");
    }
}
