//! The options of the PolicyReport writer (`serve --source kubernetes`), one group of
//! `serve`'s flags: docs/audit.md, "PolicyReports".

use std::time::Duration;

use clap::Args;

use super::shared::millis;
use crate::controllers::lease::{
    LEASE_DURATION, LEASE_NAME, LeaseSettings, RENEW_DEADLINE, RETRY_PERIOD,
};
use crate::controllers::policy_reports::content::{ReportApi, ReportResults};
use crate::controllers::policy_reports::{
    DEFAULT_QPS, PolicyReportSettings, REDISCOVER_EVERY, RESYNC_EVERY, ReportTarget,
};

/// The report APIs `--policy-reports` can name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum PolicyReportMode {
    /// No reports (no write access needed).
    Off,
    /// `openreports.io/v1alpha1` when the API server serves it, else `wgpolicyk8s.io/v1alpha2`,
    /// else none.
    Auto,
    /// `openreports.io/v1alpha1` `Report`.
    Openreports,
    /// `wgpolicyk8s.io/v1alpha2` `PolicyReport`.
    Wgpolicyk8s,
}

/// The audit as PolicyReports.
#[derive(Debug, Args)]
#[command(next_help_heading = "PolicyReports")]
pub struct PolicyReportArgs {
    /// `--source kubernetes`: write each audit as PolicyReports, one per object out of line,
    /// in the report API named (`auto`: the one the API server serves). The CRDs are not
    /// installed by Styrmin.
    #[arg(
        long,
        env = "STYRMIN_WEBHOOK_POLICY_REPORTS",
        value_enum,
        default_value = "off"
    )]
    pub policy_reports: PolicyReportMode,

    /// Only findings, or also `pass` results for conforming Ingresses.
    #[arg(
        long,
        env = "STYRMIN_WEBHOOK_POLICY_REPORTS_RESULTS",
        value_enum,
        default_value = "findings"
    )]
    pub policy_reports_results: ReportResults,

    /// Report writes and list pages a second, at most (0: no limit); bursts of one second's
    /// worth.
    #[arg(
        long,
        env = "STYRMIN_WEBHOOK_POLICY_REPORTS_QPS",
        default_value_t = DEFAULT_QPS,
        value_name = "CALLS"
    )]
    pub policy_reports_qps: f64,

    /// Namespace of the Lease that elects the one replica that writes (default: the
    /// client's, in a pod its own).
    #[arg(
        long,
        env = "STYRMIN_WEBHOOK_POLICY_REPORTS_LEASE_NAMESPACE",
        value_name = "NAMESPACE"
    )]
    pub policy_reports_lease_namespace: Option<String>,

    /// How often the writer lists its reports to repair those deleted or changed by
    /// someone else (also after the watches list again).
    #[arg(
        long,
        env = "STYRMIN_WEBHOOK_POLICY_REPORTS_RESYNC_SECS",
        default_value_t = RESYNC_EVERY.as_secs(),
        value_name = "SECONDS"
    )]
    pub policy_reports_resync_secs: u64,

    /// This replica's name in the Lease, unique among the replicas: the chart sets the
    /// Pod's name. Required with `--policy-reports`.
    #[arg(
        long,
        env = "STYRMIN_WEBHOOK_POLICY_REPORTS_LEASE_IDENTITY",
        value_name = "NAME"
    )]
    pub policy_reports_lease_identity: Option<String>,

    /// How long the Lease holds without renewal before another replica may take it.
    #[arg(
        long,
        env = "STYRMIN_WEBHOOK_POLICY_REPORTS_LEASE_DURATION_MS",
        default_value_t = millis(LEASE_DURATION),
        value_name = "MS"
    )]
    pub policy_reports_lease_duration_ms: u64,

    /// How long after its last renewal the holder keeps writing (shorter than the lease
    /// duration: a holder that cannot renew stops before anyone else may start).
    #[arg(
        long,
        env = "STYRMIN_WEBHOOK_POLICY_REPORTS_RENEW_DEADLINE_MS",
        default_value_t = millis(RENEW_DEADLINE),
        value_name = "MS"
    )]
    pub policy_reports_renew_deadline_ms: u64,

    /// How often each replica reads, takes or renews the Lease.
    #[arg(
        long,
        env = "STYRMIN_WEBHOOK_POLICY_REPORTS_RETRY_PERIOD_MS",
        default_value_t = millis(RETRY_PERIOD),
        value_name = "MS"
    )]
    pub policy_reports_retry_period_ms: u64,
}

/// A bad combination of the PolicyReport flags.
#[derive(Debug, thiserror::Error)]
pub enum PolicyReportArgsError {
    #[error(
        "--policy-reports-renew-deadline-ms ({renew_deadline}) must be shorter than \
         --policy-reports-lease-duration-ms ({duration}), and --policy-reports-retry-period-ms \
         ({retry_period}) shorter than the renew deadline"
    )]
    Timing {
        duration: u64,
        renew_deadline: u64,
        retry_period: u64,
    },
    #[error("--policy-reports-qps must be 0 (no limit) or a positive number, not {0}")]
    Qps(f64),
    #[error(
        "--policy-reports needs a name for this replica in the Lease that is unique among the \
         replicas: set --policy-reports-lease-identity (or \
         STYRMIN_WEBHOOK_POLICY_REPORTS_LEASE_IDENTITY); the chart sets it to the Pod's name"
    )]
    NoIdentity,
    #[error("--policy-reports-resync-secs must be at least 1")]
    Resync,
}

impl PolicyReportArgs {
    /// The writer's settings; `None` with `--policy-reports off`. An empty lease namespace
    /// means the client's.
    pub fn settings(&self) -> Result<Option<PolicyReportSettings>, PolicyReportArgsError> {
        let Self {
            policy_reports,
            policy_reports_results,
            policy_reports_qps,
            policy_reports_resync_secs,
            ..
        } = self;
        let target = match policy_reports {
            PolicyReportMode::Off => return Ok(None),
            PolicyReportMode::Auto => ReportTarget::Auto,
            PolicyReportMode::Openreports => ReportTarget::Api(ReportApi::OpenReports),
            PolicyReportMode::Wgpolicyk8s => ReportTarget::Api(ReportApi::WgPolicy),
        };
        let lease = self.lease()?;
        if !(policy_reports_qps.is_finite() && *policy_reports_qps >= 0.0) {
            return Err(PolicyReportArgsError::Qps(*policy_reports_qps));
        }
        if *policy_reports_resync_secs == 0 {
            return Err(PolicyReportArgsError::Resync);
        }
        Ok(Some(PolicyReportSettings {
            target,
            results: *policy_reports_results,
            qps: *policy_reports_qps,
            resync_every: Duration::from_secs(*policy_reports_resync_secs),
            lease,
            rediscover_every: REDISCOVER_EVERY,
        }))
    }

    /// The Lease of the cluster-wide controllers (the report writer and the migrations): its
    /// timing checked, and this replica's unique identity. An empty namespace means the
    /// client's.
    pub fn lease(&self) -> Result<LeaseSettings, PolicyReportArgsError> {
        let duration = self.policy_reports_lease_duration_ms;
        let renew_deadline = self.policy_reports_renew_deadline_ms;
        let retry_period = self.policy_reports_retry_period_ms;
        if !(retry_period > 0 && retry_period < renew_deadline && renew_deadline < duration) {
            return Err(PolicyReportArgsError::Timing {
                duration,
                renew_deadline,
                retry_period,
            });
        }
        // Two replicas with one name would both count themselves the holder.
        let identity = self
            .policy_reports_lease_identity
            .clone()
            .filter(|i| !i.trim().is_empty())
            .ok_or(PolicyReportArgsError::NoIdentity)?;
        Ok(LeaseSettings {
            namespace: self
                .policy_reports_lease_namespace
                .clone()
                .unwrap_or_default(),
            name: LEASE_NAME.to_owned(),
            identity,
            duration: Duration::from_millis(duration),
            renew_deadline: Duration::from_millis(renew_deadline),
            retry_period: Duration::from_millis(retry_period),
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Flags {
        #[command(flatten)]
        reports: PolicyReportArgs,
    }

    fn parse(args: &[&str]) -> Result<Option<PolicyReportSettings>, PolicyReportArgsError> {
        let mut argv = vec!["styrmin-webhook"];
        argv.extend_from_slice(args);
        Flags::try_parse_from(argv).unwrap().reports.settings()
    }

    #[test]
    fn off_by_default() {
        assert_eq!(parse(&[]).unwrap(), None);
    }

    #[test]
    fn a_mode_gives_the_defaults_of_client_go() {
        let settings = parse(&[
            "--policy-reports",
            "auto",
            "--policy-reports-lease-identity",
            "pod-a",
        ])
        .unwrap()
        .unwrap();
        assert_eq!(settings.target, ReportTarget::Auto);
        assert_eq!(settings.results, ReportResults::Findings);
        assert_eq!(settings.qps, DEFAULT_QPS);
        assert_eq!(settings.lease.identity, "pod-a");
        assert_eq!(settings.lease.namespace, "", "the client's");
        assert_eq!(
            (
                settings.lease.duration,
                settings.lease.renew_deadline,
                settings.lease.retry_period
            ),
            (LEASE_DURATION, RENEW_DEADLINE, RETRY_PERIOD)
        );
        let fixed = parse(&[
            "--policy-reports",
            "wgpolicyk8s",
            "--policy-reports-results",
            "all",
            "--policy-reports-lease-identity",
            "pod-a",
        ])
        .unwrap()
        .unwrap();
        assert_eq!(fixed.target, ReportTarget::Api(ReportApi::WgPolicy));
        assert_eq!(fixed.results, ReportResults::All);
    }

    #[test]
    fn a_renew_deadline_past_the_lease_duration_is_refused_naming_the_flags() {
        let error = parse(&[
            "--policy-reports",
            "openreports",
            "--policy-reports-lease-duration-ms",
            "1000",
            "--policy-reports-renew-deadline-ms",
            "1000",
        ])
        .unwrap_err();
        assert!(
            error
                .to_string()
                .contains("--policy-reports-renew-deadline-ms (1000)"),
            "{error}"
        );
        let error = parse(&[
            "--policy-reports",
            "auto",
            "--policy-reports-qps=-1",
            "--policy-reports-lease-identity=pod-a",
        ])
        .unwrap_err();
        assert!(
            error.to_string().contains("--policy-reports-qps"),
            "{error}"
        );
    }

    #[test]
    fn without_a_unique_identity_reports_are_refused_naming_the_flag() {
        let error = parse(&["--policy-reports", "openreports"]).unwrap_err();
        assert!(matches!(error, PolicyReportArgsError::NoIdentity));
        assert!(
            error
                .to_string()
                .contains("--policy-reports-lease-identity"),
            "{error}"
        );
        let error = parse(&[
            "--policy-reports",
            "openreports",
            "--policy-reports-lease-identity",
            " ",
        ])
        .unwrap_err();
        assert!(matches!(error, PolicyReportArgsError::NoIdentity));
        assert_eq!(
            parse(&[]).unwrap(),
            None,
            "no identity needed without reports"
        );
    }
}
