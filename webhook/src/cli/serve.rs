//! `styrmin-webhook serve`: the options of the webhook, in groups, and the wiring they start.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::Args;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use super::shared::{AuditThresholdArgs, millis};
use crate::api::{AppState, metrics_router, router};
use crate::audit::AuditStore;
use crate::budget::{self, RequestBudget};
use crate::controllers::WithControllers;
use crate::decide::DecideOptions;
use crate::kube_source::{AUDIT_INTERVAL, KubeSource, WatchScope};
use crate::metrics::Metrics;
use crate::policy_file::PolicyFileSource;
use crate::server;
use crate::server::{ConnectionLimits, Listener, ShutdownTimes};
use crate::telemetry::LogFormat;
use crate::tls::{CertWatcher, ClientCaWatcher};
use crate::view::{ViewSource, ViewStore};
use tokio_util::sync::CancellationToken;

const MIB: usize = 1024 * 1024;

/// The options of `serve`, in groups.
#[derive(Debug, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub listeners: ListenerArgs,
    #[command(flatten)]
    pub source: SourceArgs,
    #[command(flatten)]
    pub decisions: DecisionArgs,
    #[command(flatten)]
    pub thresholds: AuditThresholdArgs,
    #[command(flatten)]
    pub policy_reports: super::policy_reports::PolicyReportArgs,
    #[command(flatten)]
    pub migrations: MigrationArgs,
    #[command(flatten)]
    pub election: super::election::LeaderElectionArgs,
    #[command(flatten)]
    pub budgets: BudgetArgs,
    #[command(flatten)]
    pub shutdown: ShutdownArgs,
    #[command(flatten)]
    pub log: LogArgs,
}

/// Where the webhook listens, and its TLS.
#[derive(Debug, Args)]
#[command(next_help_heading = "Listeners")]
pub struct ListenerArgs {
    /// HTTPS address to serve the webhook on.
    #[arg(
        long,
        env = "STYRMIN_WEBHOOK_LISTEN",
        default_value = "0.0.0.0:8443",
        value_name = "ADDR:PORT"
    )]
    pub listen: SocketAddr,

    /// Plain-HTTP address for /metrics, /healthz and /readyz (the only plaintext listener).
    #[arg(long, env = "STYRMIN_WEBHOOK_METRICS_LISTEN", value_name = "ADDR:PORT")]
    pub metrics_listen: Option<SocketAddr>,

    /// PEM certificate chain of the serving certificate (re-read when it changes).
    #[arg(long, env = "STYRMIN_WEBHOOK_TLS_CERT", value_name = "FILE")]
    pub tls_cert: PathBuf,

    /// PEM private key of the serving certificate (re-read when it changes).
    #[arg(long, env = "STYRMIN_WEBHOOK_TLS_KEY", value_name = "FILE")]
    pub tls_key: PathBuf,

    /// PEM CA bundle that client certificates must chain to (mutual TLS; re-read when it
    /// changes). With it, a client without a valid certificate (anything but the API server,
    /// when it is given one: docs/webhook-budgets.md) never gets past the TLS handshake.
    #[arg(long, env = "STYRMIN_WEBHOOK_CLIENT_CA_FILE", value_name = "FILE")]
    pub client_ca_file: Option<PathBuf>,
}

/// Where the view comes from, and the audit of the cluster.
#[derive(Debug, Args)]
#[command(next_help_heading = "View source")]
pub struct SourceArgs {
    /// Where the view comes from: a policy file, or the cluster's Styrmin resources
    /// (StyrminCluster, StyrminEnvironment, StyrminDeployment) through watches.
    #[arg(
        long,
        env = "STYRMIN_WEBHOOK_SOURCE",
        value_enum,
        default_value = "policy-file"
    )]
    pub source: SourceKind,

    /// YAML file with the cluster, environments and deployments (re-read when it changes);
    /// needed with `--source policy-file`.
    #[arg(
        long,
        env = "STYRMIN_WEBHOOK_POLICY_FILE",
        value_name = "FILE",
        required_if_eq("source", "policy-file")
    )]
    pub policy_file: Option<PathBuf>,

    /// How often the policy file and the certificate files are checked for changes.
    #[arg(
        long,
        env = "STYRMIN_WEBHOOK_RELOAD_INTERVAL_MS",
        default_value_t = 1000,
        value_name = "MS"
    )]
    pub reload_interval_ms: u64,

    /// `--source kubernetes` with `--policy-reports` or `--migrations`: how often the
    /// Ingresses, controllers and service aliases already in the cluster are audited
    /// (`/debug/audit`, `styrmin_webhook_audit_*`). Without them `serve` watches only the
    /// Styrmin resources and audits nothing: the audit runs in `controllers`.
    #[arg(
        long,
        env = "STYRMIN_WEBHOOK_AUDIT_INTERVAL_SECS",
        default_value_t = AUDIT_INTERVAL.as_secs(),
        value_name = "SECONDS"
    )]
    pub audit_interval_secs: u64,
}

/// What the decisions do beyond the rules' defaults.
#[derive(Debug, Args)]
#[command(next_help_heading = "Decisions")]
pub struct DecisionArgs {
    /// FluxCD: on CREATE/UPDATE of a HelmRelease (helm.toolkit.fluxcd.io/v2) in a Styrmin
    /// namespace, add or refresh Styrmin's kustomize post-renderer in spec.postRenderers
    /// (the user's own are kept in order). Off by default.
    #[arg(long, env = "STYRMIN_WEBHOOK_FLUX_POST_RENDERER")]
    pub flux_post_renderer: bool,
}

/// StyrminMigrations.
#[derive(Debug, Args)]
#[command(next_help_heading = "Migrations")]
pub struct MigrationArgs {
    /// `--source kubernetes`: the replica that holds the controllers' Lease carries out
    /// StyrminMigrations, step by step. Needs the calls the chart grants with
    /// `migrations.enabled`. Off by default. With `serve` (deprecated: run `controllers`),
    /// the admission process runs the controllers too.
    #[arg(long, env = "STYRMIN_WEBHOOK_MIGRATIONS")]
    pub migrations: bool,
}

/// The budgets of connections and requests (docs/webhook-budgets.md).
#[derive(Debug, Args)]
#[command(next_help_heading = "Budgets")]
pub struct BudgetArgs {
    /// The most open connections on the HTTPS listener; at the cap an idle one is closed to
    /// make room, or the new one is refused when all are busy.
    #[arg(
        long,
        env = "STYRMIN_WEBHOOK_MAX_CONNECTIONS",
        default_value_t = server::DEFAULT_MAX_CONNECTIONS,
        value_name = "COUNT"
    )]
    pub max_connections: usize,

    /// The most open connections on the metrics listener.
    #[arg(
        long,
        env = "STYRMIN_WEBHOOK_METRICS_MAX_CONNECTIONS",
        default_value_t = server::DEFAULT_METRICS_MAX_CONNECTIONS,
        value_name = "COUNT"
    )]
    pub metrics_max_connections: usize,

    /// How long a TLS handshake, and each request head from its first byte, may take.
    #[arg(
        long,
        env = "STYRMIN_WEBHOOK_HEAD_TIMEOUT_MS",
        default_value_t = millis(server::DEFAULT_HEAD_TIMEOUT),
        value_name = "MS"
    )]
    pub head_timeout_ms: u64,

    /// How long a request body may take to arrive, once its head has.
    #[arg(
        long,
        env = "STYRMIN_WEBHOOK_BODY_TIMEOUT_MS",
        default_value_t = millis(budget::DEFAULT_BODY_TIMEOUT),
        value_name = "MS"
    )]
    pub body_timeout_ms: u64,

    /// How long a keep-alive connection may stay idle between requests (longer than the API
    /// server's own 90 s, so that it closes its idle connections first).
    #[arg(
        long,
        env = "STYRMIN_WEBHOOK_IDLE_TIMEOUT_SECS",
        default_value_t = server::DEFAULT_IDLE_TIMEOUT.as_secs(),
        value_name = "SECONDS"
    )]
    pub idle_timeout_secs: u64,

    /// How long an answer may take to be written out (taken by the client's socket), from
    /// its first byte; a client that does not read its answers is closed.
    #[arg(
        long,
        env = "STYRMIN_WEBHOOK_WRITE_TIMEOUT_MS",
        default_value_t = millis(server::DEFAULT_WRITE_TIMEOUT),
        value_name = "MS"
    )]
    pub write_timeout_ms: u64,

    /// Request bodies held at once, in MiB, shared per client address; a body that would pass it is refused with 503.
    #[arg(
        long,
        env = "STYRMIN_WEBHOOK_BODY_BUDGET_MIB",
        default_value_t = budget::DEFAULT_BODY_BUDGET_BYTES / MIB,
        value_name = "MIB"
    )]
    pub body_budget_mib: usize,

    /// `--flux-post-renderer`: how long one HelmRelease's post-renderers may take to check;
    /// beyond it the HelmRelease is allowed unchanged, with a warning.
    #[arg(
        long,
        env = "STYRMIN_WEBHOOK_FLUX_BUDGET_MS",
        default_value_t = millis(budget::DEFAULT_FLUX_BUDGET),
        value_name = "MS"
    )]
    pub flux_budget_ms: u64,
}

/// What SIGTERM does.
#[derive(Debug, Args)]
#[command(next_help_heading = "Shutdown")]
pub struct ShutdownArgs {
    /// On SIGTERM, once the shutdown delay has passed and the listener is closed: how long
    /// in-flight requests may take to finish (idle connections are closed at once).
    #[arg(
        long,
        env = "STYRMIN_WEBHOOK_DRAIN_TIMEOUT_SECS",
        default_value_t = 20,
        value_name = "SECONDS"
    )]
    pub drain_timeout_secs: u64,

    /// On SIGTERM, how long `/readyz` answers 503 while the webhook still accepts and serves
    /// (the time the cluster needs to take the pod out of the Service's endpoints).
    #[arg(
        long,
        env = "STYRMIN_WEBHOOK_SHUTDOWN_DELAY_SECS",
        default_value_t = 10,
        value_name = "SECONDS"
    )]
    pub shutdown_delay_secs: u64,
}

/// The log.
#[derive(Debug, Args)]
#[command(next_help_heading = "Logging")]
pub struct LogArgs {
    /// Log line format.
    #[arg(
        long,
        env = "STYRMIN_WEBHOOK_LOG_FORMAT",
        value_enum,
        default_value = "plain"
    )]
    pub log_format: LogFormat,

    /// Log filter, in `tracing` EnvFilter syntax.
    #[arg(long, env = "STYRMIN_WEBHOOK_LOG_FILTER", default_value = "info")]
    pub log_filter: String,
}

impl SourceArgs {
    /// How often the policy file and the certificate files are checked for changes.
    pub fn reload_interval(&self) -> Duration {
        Duration::from_millis(self.reload_interval_ms.max(10))
    }
}

impl ServeArgs {
    /// What the decisions do beyond the rules' defaults.
    pub fn decide_options(&self) -> DecideOptions {
        DecideOptions {
            flux_post_renderer: self.decisions.flux_post_renderer,
            stuck_deleting_after: self.thresholds.stuck_deleting_after(),
        }
    }
}

impl BudgetArgs {
    /// The connection budgets of the HTTPS listener and of the metrics listener.
    pub fn limits(&self) -> (ConnectionLimits, ConnectionLimits) {
        let limits = |max_connections| ConnectionLimits {
            max_connections,
            head_timeout: Duration::from_millis(self.head_timeout_ms.max(1)),
            idle_timeout: Duration::from_secs(self.idle_timeout_secs.max(1)),
            write_timeout: Duration::from_millis(self.write_timeout_ms.max(1)),
        };
        (
            limits(self.max_connections),
            limits(self.metrics_max_connections),
        )
    }

    pub fn request_budget(&self) -> RequestBudget {
        RequestBudget::new(
            self.body_budget_mib.saturating_mul(MIB),
            Duration::from_millis(self.body_timeout_ms.max(1)),
            Duration::from_millis(self.flux_budget_ms),
        )
    }
}

impl ShutdownArgs {
    pub fn times(&self) -> ShutdownTimes {
        ShutdownTimes {
            delay: Duration::from_secs(self.shutdown_delay_secs),
            drain: Duration::from_secs(self.drain_timeout_secs),
        }
    }
}

impl ServeArgs {
    /// Sets up logging and serves until SIGTERM.
    pub async fn run(self) -> anyhow::Result<()> {
        crate::telemetry::init(self.log.log_format, &self.log.log_filter)?;
        let audits = Arc::new(AuditStore::default());
        let metrics = Arc::new(Metrics::new());
        let source = &self.source;
        let policy_reports = self.policy_reports.settings()?;
        if policy_reports.is_some() && source.source != SourceKind::Kubernetes {
            anyhow::bail!(
                "--policy-reports needs --source kubernetes (the audit it writes runs there)"
            );
        }
        if self.migrations.migrations && source.source != SourceKind::Kubernetes {
            anyhow::bail!(
                "--migrations needs --source kubernetes (migrations are custom resources)"
            );
        }
        let in_process = policy_reports.is_some() || self.migrations.migrations;
        match (source.source, &source.policy_file) {
            (SourceKind::Kubernetes, _) => {
                let kube = KubeSource::from_environment()
                    .await
                    .context("cannot configure a Kubernetes client (in-cluster or kubeconfig)")?;
                let shutdown = CancellationToken::new();
                if !in_process {
                    // Admission alone: the levels, nothing that grows with the cluster.
                    let kube = kube.with_scope(WatchScope::Admission);
                    return serve(&self, kube, audits, metrics, shutdown).await;
                }
                tracing::warn!(
                    "serve --policy-reports/--migrations is deprecated and goes in the next \
                     release: run the controllers apart from admission, with \
                     `styrmin-webhook controllers` (the chart does)"
                );
                let source = WithControllers::new(
                    kube.with_audit(
                        audits.clone(),
                        Duration::from_secs(source.audit_interval_secs.max(1)),
                        self.thresholds.settings(),
                    ),
                    self.election.settings()?,
                    policy_reports,
                    self.migrations.migrations,
                    &metrics.controllers,
                    shutdown.clone(),
                );
                serve(&self, source, audits, metrics, shutdown).await
            }
            (SourceKind::PolicyFile, Some(policy_file)) => {
                let policy = PolicyFileSource::open(policy_file.clone(), source.reload_interval())?;
                serve(&self, policy, audits, metrics, CancellationToken::new()).await
            }
            (SourceKind::PolicyFile, None) => {
                anyhow::bail!("--source policy-file needs --policy-file")
            }
        }
    }
}

/// The view sources `--source` can name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum SourceKind {
    /// `--policy-file`, polled.
    PolicyFile,
    /// The cluster's Styrmin custom resources, watched (kube-rs reflectors).
    Kubernetes,
}

/// Runs the webhook with any view source until SIGTERM, then drains; `shutdown` is
/// cancelled at the signal (the cluster-wide controllers stop and give their Lease back).
pub async fn serve(
    args: &ServeArgs,
    source: impl ViewSource,
    audits: Arc<AuditStore>,
    metrics: Arc<Metrics>,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let (mut limits, mut metrics_limits) = args.budgets.limits();
    let reload_interval = args.source.reload_interval();
    let listeners = &args.listeners;
    let open_files = crate::open_files::raise_limit();
    if let Some(limit) = open_files {
        metrics
            .open_files_limit
            .set(i64::try_from(limit).unwrap_or(i64::MAX));
    }
    let (https_cap, metrics_cap) = crate::open_files::fit_caps(
        open_files,
        limits.max_connections,
        metrics_limits.max_connections,
    );
    if (https_cap, metrics_cap) != (limits.max_connections, metrics_limits.max_connections) {
        tracing::warn!(
            open_files,
            https = https_cap,
            metrics = metrics_cap,
            "connection caps lowered to fit the open file limit"
        );
    }
    limits.max_connections = https_cap;
    metrics_limits.max_connections = metrics_cap;
    let state = AppState::new(
        Arc::new(ViewStore::default()),
        audits,
        metrics.clone(),
        args.decide_options(),
        args.budgets.request_budget(),
    );

    let certs = CertWatcher::open(
        listeners.tls_cert.clone(),
        listeners.tls_key.clone(),
        metrics,
    )?;
    let client_cas = listeners
        .client_ca_file
        .clone()
        .map(ClientCaWatcher::open)
        .transpose()?;
    let mutual_tls = client_cas.is_some();
    let tls = certs.server_config(client_cas.as_ref())?;
    if let Some(client_cas) = client_cas {
        tokio::spawn(client_cas.run(reload_interval));
    }
    tokio::spawn(certs.run(reload_interval));

    let sink = state.view_sink();
    let source_name = source.name();
    tokio::spawn(async move {
        if let Err(error) = source.run(sink).await {
            tracing::error!(
                source = source_name,
                error = format!("{error:#}"),
                "view source stopped"
            );
        }
    });

    let listen = listeners.listen;
    let listener = TcpListener::bind(listen)
        .await
        .with_context(|| format!("cannot listen on {listen}"))?;
    tracing::info!(address = %listener.local_addr()?, listener = "https", max_connections = limits.max_connections, client_certificates = if mutual_tls { "required" } else { "not asked" }, "listening");
    let https = Listener {
        name: "https",
        tcp: listener,
        tls: Some(TlsAcceptor::from(tls)),
        app: router(state.clone()),
        limits,
    };
    let operations = match listeners.metrics_listen {
        Some(address) => {
            let metrics_listener = TcpListener::bind(address)
                .await
                .with_context(|| format!("cannot listen on {address}"))?;
            tracing::info!(address = %metrics_listener.local_addr()?, listener = "metrics", max_connections = metrics_limits.max_connections, "listening");
            Some(Listener {
                name: "metrics",
                tcp: metrics_listener,
                tls: None,
                app: metrics_router(state.clone()),
                limits: metrics_limits,
            })
        }
        None => None,
    };

    server::serve(
        https,
        operations,
        state,
        async move {
            server::shutdown_signal().await;
            shutdown.cancel();
        },
        args.shutdown.times(),
    )
    .await;
    tracing::info!("stopped");
    Ok(())
}
