//! `styrmin-webhook controllers`: the audit, the PolicyReport writer and the migration
//! executor, in a Deployment of their own (docs/controllers.md). Every replica watches what
//! the audit reads and keeps its audit current (warm: a new leader writes at once, with no
//! relist); the replica that holds the Lease also writes. No admission listener: only
//! `/metrics`, `/healthz`, `/readyz`, `/debug/audit` and `GET /debug/deployments/{id}` on the
//! plain-HTTP listener ([`metrics_router`]).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::Args;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::election::LeaderElectionArgs;
use super::policy_reports::PolicyReportArgs;
use super::serve::{LogArgs, MigrationArgs};
use super::shared::AuditThresholdArgs;
use crate::api::{AppState, metrics_router};
use crate::audit::AuditStore;
use crate::budget::RequestBudget;
use crate::controllers::WithControllers;
use crate::decide::DecideOptions;
use crate::kube_source::{AUDIT_INTERVAL, KubeSource};
use crate::metrics::Metrics;
use crate::server::{self, ConnectionLimits, Listener, Serving};
use crate::view::{ViewSource as _, ViewStore};

/// How long the operations listener's open requests may take once the controllers stopped.
const OPERATIONS_DRAIN: Duration = Duration::from_secs(2);

/// The options of `controllers`, in groups.
#[derive(Debug, Args)]
pub struct ControllersArgs {
    #[command(flatten)]
    pub operations: OperationsArgs,
    #[command(flatten)]
    pub thresholds: AuditThresholdArgs,
    #[command(flatten)]
    pub policy_reports: PolicyReportArgs,
    #[command(flatten)]
    pub migrations: MigrationArgs,
    #[command(flatten)]
    pub election: LeaderElectionArgs,
    #[command(flatten)]
    pub log: LogArgs,
}

/// The plain-HTTP listener and the audit's pace.
#[derive(Debug, Args)]
#[command(next_help_heading = "Operations")]
pub struct OperationsArgs {
    /// Plain-HTTP address for /metrics, /healthz, /readyz, /debug/audit and
    /// /debug/deployments/{id}.
    #[arg(
        long,
        env = "STYRMIN_WEBHOOK_METRICS_LISTEN",
        default_value = "0.0.0.0:9090",
        value_name = "ADDR:PORT"
    )]
    pub metrics_listen: SocketAddr,

    /// The most open connections on the metrics listener.
    #[arg(
        long,
        env = "STYRMIN_WEBHOOK_METRICS_MAX_CONNECTIONS",
        default_value_t = server::DEFAULT_METRICS_MAX_CONNECTIONS,
        value_name = "COUNT"
    )]
    pub metrics_max_connections: usize,

    /// How often the Ingresses, controllers and service aliases already in the cluster are
    /// audited (`/debug/audit`, `styrmin_webhook_audit_*`, the PolicyReports).
    #[arg(
        long,
        env = "STYRMIN_WEBHOOK_AUDIT_INTERVAL_SECS",
        default_value_t = AUDIT_INTERVAL.as_secs(),
        value_name = "SECONDS"
    )]
    pub audit_interval_secs: u64,
}

impl OperationsArgs {
    fn limits(&self) -> ConnectionLimits {
        ConnectionLimits {
            max_connections: self.metrics_max_connections,
            head_timeout: server::DEFAULT_HEAD_TIMEOUT,
            idle_timeout: server::DEFAULT_IDLE_TIMEOUT,
            write_timeout: server::DEFAULT_WRITE_TIMEOUT,
        }
    }
}

impl ControllersArgs {
    /// Runs the controllers until SIGTERM: then they stop, the Lease is given back, and the
    /// listener closes, in that order.
    pub async fn run(self) -> anyhow::Result<()> {
        let Self {
            operations,
            thresholds,
            policy_reports,
            migrations,
            election,
            log,
        } = self;
        crate::telemetry::init(log.log_format, &log.log_filter)?;
        let election = election.settings()?;
        let policy_reports = policy_reports.settings()?;
        let metrics = Arc::new(Metrics::new());
        let audits = Arc::new(AuditStore::default());
        let kube = KubeSource::from_environment()
            .await
            .context("cannot configure a Kubernetes client (in-cluster or kubeconfig)")?
            .with_audit(
                audits.clone(),
                Duration::from_secs(operations.audit_interval_secs.max(1)),
                thresholds.settings(),
            );
        let shutdown = CancellationToken::new();
        let source = WithControllers::new(
            kube,
            election,
            policy_reports,
            migrations.migrations,
            &metrics.controllers,
            shutdown.clone(),
        );
        let state = AppState::new(
            Arc::new(ViewStore::default()),
            audits,
            metrics.clone(),
            DecideOptions::default(),
            RequestBudget::default(),
        );
        let address = operations.metrics_listen;
        let tcp = TcpListener::bind(address)
            .await
            .with_context(|| format!("cannot listen on {address}"))?;
        tracing::info!(address = %tcp.local_addr()?, listener = "metrics", "listening");
        let serving = Serving::start(
            Listener {
                name: "metrics",
                tcp,
                tls: None,
                app: metrics_router(state.clone()),
                limits: operations.limits(),
            },
            metrics,
        );
        let mut running = tokio::spawn(source.run(state.view_sink()));
        let outcome = tokio::select! {
            () = server::shutdown_signal() => {
                state.start_draining();
                shutdown.cancel();
                running.await
            }
            ended = &mut running => ended,
        };
        serving.drain(OPERATIONS_DRAIN).await;
        tracing::info!("stopped");
        outcome.context("the controllers' task failed")?
    }
}
