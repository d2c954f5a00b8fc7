//! The option groups more than one subcommand takes, each defined once: the audit's
//! thresholds (`audit`, and the periodic audit of `controllers`, or of `serve` only with its
//! deprecated `--policy-reports`/`--migrations`; `serve`'s W2 denial also reads when a
//! controller counts as stuck), which cluster to read and the output format (`audit`, `plan`
//! and `migrate`).

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use clap::Args;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

use crate::audit::{AuditSettings, NOT_SERVED_GRACE};
use crate::decide::STUCK_DELETING_AFTER;

/// The audit's thresholds.
#[derive(Debug, Args)]
#[command(next_help_heading = "Audit thresholds")]
pub struct AuditThresholdArgs {
    /// How long an Ingress may have no address (status.loadBalancer.ingress) before the
    /// audit reports it as not served.
    #[arg(
        long = "audit-not-served-grace-secs",
        alias = "not-served-grace-secs",
        env = "STYRMIN_WEBHOOK_AUDIT_NOT_SERVED_GRACE_SECS",
        default_value_t = NOT_SERVED_GRACE.as_secs(),
        value_name = "SECONDS"
    )]
    pub not_served_grace_secs: u64,

    /// After how long a dedicated ingress controller that stays DELETING counts as stuck: the
    /// W2 denial then says since when, which finalizer holds it and what to do; the audit
    /// counts it and logs a warning.
    #[arg(
        long,
        env = "STYRMIN_WEBHOOK_STUCK_DELETING_AFTER_SECS",
        default_value_t = STUCK_DELETING_AFTER.as_secs(),
        value_name = "SECONDS"
    )]
    pub stuck_deleting_after_secs: u64,
}

impl AuditThresholdArgs {
    pub fn stuck_deleting_after(&self) -> Duration {
        Duration::from_secs(self.stuck_deleting_after_secs)
    }

    pub fn settings(&self) -> AuditSettings {
        AuditSettings {
            not_served_grace: Duration::from_secs(self.not_served_grace_secs),
            stuck_deleting_after: self.stuck_deleting_after(),
        }
    }
}

/// Which cluster to read: the kubeconfig options of `audit`, `plan` and `migrate`.
#[derive(Debug, Args)]
pub struct ClusterArgs {
    /// Kubeconfig file; default: $KUBECONFIG, ~/.kube/config, then the in-cluster service
    /// account (kube's usual order).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,

    /// Kubeconfig context; default: the current context.
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
}

impl ClusterArgs {
    /// A client for the cluster the options name.
    pub async fn client(&self) -> anyhow::Result<Client> {
        let options = KubeConfigOptions {
            context: self.context.clone(),
            ..KubeConfigOptions::default()
        };
        let config = match (&self.kubeconfig, &self.context) {
            (Some(path), _) => {
                let kubeconfig = Kubeconfig::read_from(path)
                    .with_context(|| format!("cannot read the kubeconfig {}", path.display()))?;
                Config::from_custom_kubeconfig(kubeconfig, &options)
                    .await
                    .with_context(|| format!("kubeconfig {}", path.display()))?
            }
            (None, Some(_)) => Config::from_kubeconfig(&options)
                .await
                .context("cannot load the kubeconfig")?,
            (None, None) => Config::infer()
                .await
                .context("cannot configure a Kubernetes client (kubeconfig or in-cluster)")?,
        };
        Client::try_from(config).context("cannot create a Kubernetes client")
    }
}

/// How `audit`, `plan`, `migrate plan` and `migrate status` print what they found.
#[derive(Debug, Args)]
pub struct OutputArgs {
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t = Output::Table)]
    pub output: Output,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    Table,
    Json,
}

impl fmt::Display for Output {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Output::Table => "table",
            Output::Json => "json",
        })
    }
}

/// A duration as a flag's default in milliseconds (every default is far below `u64::MAX` ms).
pub const fn millis(duration: Duration) -> u64 {
    duration.as_millis() as u64
}

/// Names on stderr the objects the view leaves out (`audit`, `plan`, `migrate plan`).
pub(super) fn warn_ignored(ignored: &[String]) {
    for why in ignored {
        eprintln!("warning: {why}");
    }
}
