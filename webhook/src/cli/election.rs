//! The options of the controllers' leader election (`controllers`, and `serve` while it
//! still runs the controllers itself): one group, with the names a controller-runtime or
//! kube-rs operator uses. The names these flags had while the election belonged to the
//! report writer (`--policy-reports-lease-*`) are kept as hidden aliases for one release.

use std::time::Duration;

use clap::Args;

use super::shared::millis;
use crate::controllers::lease::{
    LEASE_DURATION, LEASE_NAME, LEGACY_LEASE_NAME, LeaseSettings, RENEW_DEADLINE, RETRY_PERIOD,
};

/// The environment variables the previous chart set for the namespace and the identity,
/// read when the new ones are not set (one release).
const LEGACY_NAMESPACE_ENV: &str = "STYRMIN_WEBHOOK_POLICY_REPORTS_LEASE_NAMESPACE";
const LEGACY_IDENTITY_ENV: &str = "STYRMIN_WEBHOOK_POLICY_REPORTS_LEASE_IDENTITY";

/// The leader election of the cluster-wide controllers.
#[derive(Debug, Args)]
#[command(next_help_heading = "Leader election")]
pub struct LeaderElectionArgs {
    /// Namespace of the Lease that elects the one replica that runs the report writer and
    /// the migrations (default: the client's, in a pod its own).
    #[arg(
        long,
        alias = "policy-reports-lease-namespace",
        env = "STYRMIN_WEBHOOK_LEADER_ELECTION_NAMESPACE",
        value_name = "NAMESPACE"
    )]
    pub leader_election_namespace: Option<String>,

    /// This replica's name in the Lease, unique among the replicas: the chart sets the
    /// Pod's name. Default: $HOSTNAME (a Pod's name).
    #[arg(
        long,
        alias = "policy-reports-lease-identity",
        env = "STYRMIN_WEBHOOK_LEADER_ELECTION_IDENTITY",
        value_name = "NAME"
    )]
    pub leader_election_identity: Option<String>,

    /// How long the Lease holds without renewal before another replica may take it.
    #[arg(
        long,
        alias = "policy-reports-lease-duration-ms",
        env = "STYRMIN_WEBHOOK_LEADER_ELECTION_LEASE_DURATION_MS",
        default_value_t = millis(LEASE_DURATION),
        value_name = "MS"
    )]
    pub leader_election_lease_duration_ms: u64,

    /// How long after its last renewal the holder keeps writing (shorter than the lease
    /// duration: a holder that cannot renew stops before anyone else may start). Also how
    /// long the controllers may take to stop at SIGTERM before the Lease is given back.
    #[arg(
        long,
        alias = "policy-reports-renew-deadline-ms",
        env = "STYRMIN_WEBHOOK_LEADER_ELECTION_RENEW_DEADLINE_MS",
        default_value_t = millis(RENEW_DEADLINE),
        value_name = "MS"
    )]
    pub leader_election_renew_deadline_ms: u64,

    /// How often each replica reads, takes or renews the Lease.
    #[arg(
        long,
        alias = "policy-reports-retry-period-ms",
        env = "STYRMIN_WEBHOOK_LEADER_ELECTION_RETRY_PERIOD_MS",
        default_value_t = millis(RETRY_PERIOD),
        value_name = "MS"
    )]
    pub leader_election_retry_period_ms: u64,
}

/// A bad combination of the election flags.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum LeaderElectionArgsError {
    #[error(
        "--leader-election-renew-deadline-ms ({renew_deadline}) must be shorter than \
         --leader-election-lease-duration-ms ({duration}), and \
         --leader-election-retry-period-ms ({retry_period}) shorter than the renew deadline"
    )]
    Timing {
        duration: u64,
        renew_deadline: u64,
        retry_period: u64,
    },
    #[error(
        "the controllers need a name for this replica in the Lease that is unique among the \
         replicas: set --leader-election-identity (or STYRMIN_WEBHOOK_LEADER_ELECTION_IDENTITY, \
         or HOSTNAME); the chart sets it to the Pod's name"
    )]
    NoIdentity,
}

impl LeaderElectionArgs {
    /// The election's settings, with the environment's fallbacks (`env` reads a variable).
    pub fn settings(&self) -> Result<LeaseSettings, LeaderElectionArgsError> {
        self.settings_with(|name| std::env::var(name).ok())
    }

    /// [`Self::settings`] with the environment given: the previous chart's variables, then
    /// `HOSTNAME` for the identity. An empty namespace means the client's.
    pub fn settings_with(
        &self,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<LeaseSettings, LeaderElectionArgsError> {
        let duration = self.leader_election_lease_duration_ms;
        let renew_deadline = self.leader_election_renew_deadline_ms;
        let retry_period = self.leader_election_retry_period_ms;
        if !(retry_period > 0 && retry_period < renew_deadline && renew_deadline < duration) {
            return Err(LeaderElectionArgsError::Timing {
                duration,
                renew_deadline,
                retry_period,
            });
        }
        let set = |value: Option<String>| value.filter(|v| !v.trim().is_empty());
        // Two replicas with one name would both count themselves the holder.
        let identity = set(self.leader_election_identity.clone())
            .or_else(|| set(env(LEGACY_IDENTITY_ENV)))
            .or_else(|| set(env("HOSTNAME")))
            .ok_or(LeaderElectionArgsError::NoIdentity)?;
        let namespace = set(self.leader_election_namespace.clone())
            .or_else(|| set(env(LEGACY_NAMESPACE_ENV)))
            .unwrap_or_default();
        Ok(LeaseSettings {
            namespace,
            name: LEASE_NAME.to_owned(),
            identity,
            duration: Duration::from_millis(duration),
            renew_deadline: Duration::from_millis(renew_deadline),
            retry_period: Duration::from_millis(retry_period),
            legacy_name: Some(LEGACY_LEASE_NAME.to_owned()),
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
        election: LeaderElectionArgs,
    }

    fn parse(
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Result<LeaseSettings, LeaderElectionArgsError> {
        let mut argv = vec!["styrmin-webhook"];
        argv.extend_from_slice(args);
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        Flags::try_parse_from(argv)
            .unwrap()
            .election
            .settings_with(|name| env.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()))
    }

    #[test]
    fn the_defaults_are_client_gos_and_the_lease_is_the_controllers() {
        let settings = parse(&["--leader-election-identity", "pod-a"], &[]).unwrap();
        assert_eq!(settings.identity, "pod-a");
        assert_eq!(settings.namespace, "", "the client's");
        assert_eq!(settings.name, "styrmin-webhook-controllers");
        assert_eq!(
            settings.legacy_name.as_deref(),
            Some("styrmin-webhook-policy-reports")
        );
        assert_eq!(
            (
                settings.duration,
                settings.renew_deadline,
                settings.retry_period
            ),
            (LEASE_DURATION, RENEW_DEADLINE, RETRY_PERIOD)
        );
    }

    #[test]
    fn the_previous_names_still_work_for_one_release() {
        let settings = parse(
            &[
                "--policy-reports-lease-identity=pod-b",
                "--policy-reports-lease-namespace=ops",
                "--policy-reports-lease-duration-ms=30000",
                "--policy-reports-renew-deadline-ms=20000",
                "--policy-reports-retry-period-ms=4000",
            ],
            &[],
        )
        .unwrap();
        assert_eq!(
            (
                settings.identity.as_str(),
                settings.namespace.as_str(),
                settings.duration,
                settings.renew_deadline,
                settings.retry_period
            ),
            (
                "pod-b",
                "ops",
                Duration::from_secs(30),
                Duration::from_secs(20),
                Duration::from_secs(4)
            )
        );
        let from_env = parse(
            &[],
            &[
                (LEGACY_IDENTITY_ENV, "pod-c"),
                (LEGACY_NAMESPACE_ENV, "styrmin-system"),
                ("HOSTNAME", "host"),
            ],
        )
        .unwrap();
        assert_eq!(
            (from_env.identity.as_str(), from_env.namespace.as_str()),
            ("pod-c", "styrmin-system")
        );
    }

    #[test]
    fn the_identity_falls_back_to_the_hostname_and_is_required() {
        let settings = parse(&[], &[("HOSTNAME", "styrmin-controllers-7d9-x2")]).unwrap();
        assert_eq!(settings.identity, "styrmin-controllers-7d9-x2");
        assert_eq!(
            parse(&["--leader-election-identity", " "], &[]).unwrap_err(),
            LeaderElectionArgsError::NoIdentity
        );
        let error = parse(&[], &[]).unwrap_err();
        assert!(
            error.to_string().contains("--leader-election-identity"),
            "{error}"
        );
    }

    #[test]
    fn a_renew_deadline_past_the_lease_duration_is_refused_naming_the_flags() {
        let error = parse(
            &[
                "--leader-election-identity=a",
                "--leader-election-lease-duration-ms=1000",
                "--leader-election-renew-deadline-ms=1000",
            ],
            &[],
        )
        .unwrap_err();
        assert!(
            error
                .to_string()
                .contains("--leader-election-renew-deadline-ms (1000)"),
            "{error}"
        );
    }
}
