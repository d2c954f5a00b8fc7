//! The cluster-wide controllers: work that one replica does for the whole cluster while it
//! holds the Lease ([`lease`]), beside admission, which every replica serves. Today that is
//! the PolicyReport writer ([`policy_reports`]), fed by the audit's rounds
//! ([`crate::audit::round`]).
//!
//! Why not a crate for the Lease: `kube-leader-election` 0.44 needs kube 4 (the workspace
//! uses kube 5); `kube-lease-manager` matches kube 5 but takes the Lease through
//! server-side apply conflicts, its holder learns of a loss only at its next check, and the
//! renew deadline (how long a holder cut off from the API server may still write) is not
//! one of its settings; kubert's `LeaseManager` brings kubert's runtime and its own client
//! set-up. The loop on `resourceVersion` here is what kube-controller-manager runs, in a
//! pure [`lease::decide`] and a hundred lines of calls.

pub mod lease;
pub mod migration;
pub mod policy_reports;

use kube::Client;
use tokio_util::sync::CancellationToken;

use crate::kube_source::{ApiCall, KubeSource};
use crate::view::{ViewSink, ViewSource};
use lease::{Leadership, LeaseSettings};
use migration::run::MigrationSettings;
use policy_reports::PolicyReportSettings;
use policy_reports::metrics::PolicyReportMetrics;

/// The Lease that elects the one replica that runs the cluster-wide controllers, in the
/// webhook's own namespace (a Role, not the ClusterRole): read and updated by its name only
/// (with the `resourceVersion` read, [`lease`]), created by the first replica (`create`
/// cannot be limited to a name: the object does not exist yet). The chart's Role must grant
/// exactly these (a test compares them).
pub const LEASE_CALLS: [ApiCall; 2] = [
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
];

/// The kube source with the cluster-wide controllers it feeds: a [`ViewSource`] whose run
/// also runs them, and stops them when it ends (or is dropped).
#[derive(Debug)]
pub struct WithControllers {
    pub source: KubeSource,
    /// `--policy-reports` (`None`: off).
    pub policy_reports: Option<PolicyReportSettings>,
    pub metrics: PolicyReportMetrics,
    /// `--migrations`: the Lease to hold (the one the report writer holds) and where the
    /// canaries go (`None`: off).
    pub migrations: Option<(LeaseSettings, MigrationSettings)>,
    /// Cancelled at SIGTERM: the holder stops writing and gives the Lease back.
    pub shutdown: CancellationToken,
}

impl ViewSource for WithControllers {
    fn name(&self) -> &'static str {
        self.source.name()
    }

    async fn run(self, sink: ViewSink) -> anyhow::Result<()> {
        let WithControllers {
            source,
            policy_reports,
            metrics,
            migrations,
            shutdown,
        } = self;
        // The controllers end with this task.
        let mut tasks = tokio::task::JoinSet::new();
        let shared = migrations.map(|(mut lease_settings, mut settings)| {
            let client = source.client().clone();
            if lease_settings.namespace.is_empty() {
                lease_settings.namespace = client.default_namespace().to_owned();
            }
            if settings.namespace.is_empty() {
                settings.namespace.clone_from(&lease_settings.namespace);
            }
            let leadership = Leadership::default();
            tasks.spawn(lease::run(
                client.clone(),
                lease_settings,
                leadership.clone(),
                shutdown.clone(),
            ));
            tasks.spawn(migration::run::run_migrations(
                client,
                settings,
                leadership.clone(),
                shutdown.clone(),
            ));
            leadership
        });
        let source = match policy_reports {
            Some(mut settings) => {
                let client: &Client = source.client();
                if settings.lease.namespace.is_empty() {
                    settings.lease.namespace = client.default_namespace().to_owned();
                }
                let (rounds, feed) = tokio::sync::watch::channel(None);
                policy_reports::start(
                    &mut tasks, client, settings, feed, metrics, shared, shutdown,
                );
                source.with_rounds(Some(rounds))
            }
            None => source,
        };
        source.run(sink).await
    }
}
