//! The options of the PolicyReport writer, one group of the flags of `controllers` (and of
//! `serve` while it still runs the controllers itself): docs/audit.md, "PolicyReports".

use std::time::Duration;

use clap::Args;

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

    /// How often the writer lists its reports to repair those deleted or changed by
    /// someone else (also after the watches list again).
    #[arg(
        long,
        env = "STYRMIN_WEBHOOK_POLICY_REPORTS_RESYNC_SECS",
        default_value_t = RESYNC_EVERY.as_secs(),
        value_name = "SECONDS"
    )]
    pub policy_reports_resync_secs: u64,
}

/// A bad combination of the PolicyReport flags.
#[derive(Debug, thiserror::Error)]
pub enum PolicyReportArgsError {
    #[error("--policy-reports-qps must be 0 (no limit) or a positive number, not {0}")]
    Qps(f64),
    #[error("--policy-reports-resync-secs must be at least 1")]
    Resync,
}

impl PolicyReportArgs {
    /// The writer's settings; `None` with `--policy-reports off`.
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
    fn a_mode_gives_the_writers_defaults() {
        let settings = parse(&["--policy-reports", "auto"]).unwrap().unwrap();
        assert_eq!(settings.target, ReportTarget::Auto);
        assert_eq!(settings.results, ReportResults::Findings);
        assert_eq!(settings.qps, DEFAULT_QPS);
        assert_eq!(settings.resync_every, RESYNC_EVERY);
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
    fn a_negative_qps_or_no_resync_is_refused_naming_the_flag() {
        let error = parse(&["--policy-reports", "auto", "--policy-reports-qps=-1"]).unwrap_err();
        assert!(
            error.to_string().contains("--policy-reports-qps"),
            "{error}"
        );
        let error =
            parse(&["--policy-reports", "auto", "--policy-reports-resync-secs=0"]).unwrap_err();
        assert!(
            error.to_string().contains("--policy-reports-resync-secs"),
            "{error}"
        );
    }
}
