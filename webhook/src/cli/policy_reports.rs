//! The options of the PolicyReport writer (`serve --source kubernetes`), one group of
//! `serve`'s flags: docs/audit.md, "PolicyReports".

use std::time::Duration;

use clap::Args;

use crate::audit::policy_report::{ReportApi, ReportResults};
use crate::kube_source::reports::lease::{
    LEASE_DURATION, LEASE_NAME, LeaseSettings, RENEW_DEADLINE, RETRY_PERIOD,
};
use crate::kube_source::reports::{
    DEFAULT_QPS, PolicyReportSettings, REDISCOVER_EVERY, ReportTarget,
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

/// Which results `--policy-reports-results` asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum PolicyReportResults {
    /// Only what is out of line: a report goes when its object conforms again.
    Findings,
    /// Also a `pass` for each Ingress rule an Ingress meets: a report for every Ingress.
    All,
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
    pub policy_reports_results: PolicyReportResults,

    /// Report writes a second, at most (0: no limit).
    #[arg(
        long,
        env = "STYRMIN_WEBHOOK_POLICY_REPORTS_QPS",
        default_value_t = DEFAULT_QPS,
        value_name = "WRITES"
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

    /// This replica's name in the Lease (default: `$HOSTNAME`, the pod's name).
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

const fn millis(duration: Duration) -> u64 {
    duration.as_secs() * 1000 + duration.subsec_millis() as u64
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
}

impl PolicyReportArgs {
    /// The writer's settings; `None` with `--policy-reports off`. An empty lease namespace
    /// means the client's.
    pub fn settings(&self) -> Result<Option<PolicyReportSettings>, PolicyReportArgsError> {
        let Self {
            policy_reports,
            policy_reports_results,
            policy_reports_qps,
            policy_reports_lease_namespace,
            policy_reports_lease_identity,
            policy_reports_lease_duration_ms,
            policy_reports_renew_deadline_ms,
            policy_reports_retry_period_ms,
        } = self;
        let target = match policy_reports {
            PolicyReportMode::Off => return Ok(None),
            PolicyReportMode::Auto => ReportTarget::Auto,
            PolicyReportMode::Openreports => ReportTarget::Api(ReportApi::OpenReports),
            PolicyReportMode::Wgpolicyk8s => ReportTarget::Api(ReportApi::WgPolicy),
        };
        if !(*policy_reports_retry_period_ms > 0
            && policy_reports_retry_period_ms < policy_reports_renew_deadline_ms
            && policy_reports_renew_deadline_ms < policy_reports_lease_duration_ms)
        {
            return Err(PolicyReportArgsError::Timing {
                duration: *policy_reports_lease_duration_ms,
                renew_deadline: *policy_reports_renew_deadline_ms,
                retry_period: *policy_reports_retry_period_ms,
            });
        }
        if !(policy_reports_qps.is_finite() && *policy_reports_qps >= 0.0) {
            return Err(PolicyReportArgsError::Qps(*policy_reports_qps));
        }
        let identity = policy_reports_lease_identity
            .clone()
            .or_else(|| std::env::var("HOSTNAME").ok().filter(|h| !h.is_empty()))
            .unwrap_or_else(|| format!("styrmin-webhook-{}", std::process::id()));
        Ok(Some(PolicyReportSettings {
            target,
            results: match policy_reports_results {
                PolicyReportResults::Findings => ReportResults::Findings,
                PolicyReportResults::All => ReportResults::All,
            },
            qps: *policy_reports_qps,
            lease: LeaseSettings {
                namespace: policy_reports_lease_namespace.clone().unwrap_or_default(),
                name: LEASE_NAME.to_owned(),
                identity,
                duration: Duration::from_millis(*policy_reports_lease_duration_ms),
                renew_deadline: Duration::from_millis(*policy_reports_renew_deadline_ms),
                retry_period: Duration::from_millis(*policy_reports_retry_period_ms),
            },
            rediscover_every: REDISCOVER_EVERY,
        }))
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
        let error = parse(&["--policy-reports", "auto", "--policy-reports-qps=-1"]).unwrap_err();
        assert!(
            error.to_string().contains("--policy-reports-qps"),
            "{error}"
        );
    }
}
