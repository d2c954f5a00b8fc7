//! The command line: one subcommand per module, each with its options and its run.
//!
//! - [`serve`]: the admission webhook. A bare `styrmin-webhook --listen …` also serves, as
//!   the chart and the kustomize base start it.
//! - [`controllers`]: the audit, and on the holder of the Lease the PolicyReport writer and
//!   the migration executor, apart from admission.
//! - [`audit`]: one audit of a cluster, for a person, CI or cron.
//! - [`plan`]: what a proposed change of the levels would do, before it is made.
//! - [`migrate`]: StyrminMigrations: plan one step by step, start it, follow, pause, resume
//!   or abort it.
//!
//! A new subcommand is a module here, a variant of [`Command`] and an arm of [`Cli::run`].

pub mod audit;
pub mod controllers;
pub mod election;
pub mod migrate;
pub mod plan;
pub mod policy_reports;
pub mod serve;
pub mod shared;

use std::ffi::OsString;
use std::process::ExitCode;

use clap::{CommandFactory as _, Parser, Subcommand};

pub use self::audit::AuditArgs;
pub use self::controllers::ControllersArgs;
pub use self::migrate::MigrateArgs;
pub use self::plan::PlanArgs;
pub use self::serve::ServeArgs;

/// Styrmin's admission webhook: enforces the ingress rules on Ingresses in Styrmin namespaces
/// and blocks deploys while an environment's dedicated ingress controller is being removed.
///
/// Without a subcommand, the options are those of `serve`.
#[derive(Debug, Parser)]
#[command(name = "styrmin-webhook", version)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serves the admission webhook until SIGTERM (the default).
    ///
    /// With `--source kubernetes` it watches only the Styrmin resources (StyrminCluster,
    /// StyrminEnvironment, StyrminDeployment) and holds no write right: the audit, the
    /// PolicyReports and the migrations run in `controllers`.
    Serve(Box<ServeArgs>),
    /// Runs the cluster-wide controllers until SIGTERM: the audit on every replica, and on
    /// the one that holds the Lease the PolicyReport writer (`--policy-reports`) and the
    /// migration executor (`--migrations`).
    ///
    /// Runs apart from admission, in a Deployment of its own with its own service account:
    /// its memory grows with the cluster's Ingresses and it holds write rights, and neither
    /// may reach the fail-closed admission pods.
    Controllers(Box<ControllersArgs>),
    /// Audits a cluster once and prints what is out of line.
    ///
    /// The Ingresses of Styrmin namespaces, judged as admission would judge them; the ingress
    /// controllers stuck DELETING; the service aliases that point into a namespace that does
    /// not exist. Exit status: 0 nothing out of line, 1 something is, 2 the audit could not be made.
    Audit(AuditArgs),
    /// Shows what a proposed change of the cluster, environment or deployment levels would do.
    ///
    /// For every Ingress of a Styrmin namespace: its class now, right after the change and
    /// at its deployment's next deploy, by environment; then the pre-flight findings (a class
    /// that names no IngressClass, a dedicated controller not RUNNING, a default IngressClass
    /// that picks up class-less Ingresses, Ingresses that change controller, and what the
    /// target does with their annotations, by the annotation catalog). Read-only.
    /// Exit status: 0 nothing moves and nothing found, 1 something moves or a finding, 2 the
    /// plan could not be made, 3 `--fail-on` found what it fails on.
    Plan(PlanArgs),
    /// Plans, starts and follows a StyrminMigration: level changes in steps, carried out by
    /// the controllers (`controllers --migrations`), each gated on the target controller
    /// serving what moved.
    ///
    /// `plan -f` shows each step's plan on top of the steps before it; `start -f` creates the
    /// migration; `status NAME` shows its progress (`--watch` until it is finished); `pause`,
    /// `resume` and `abort NAME` set a switch of its spec.
    Migrate(MigrateArgs),
}

impl Cli {
    /// Parses `args` (the program name first); when the first argument names no subcommand
    /// and asks for no help or version, it is `serve`'s.
    pub fn parse_from_args(args: impl IntoIterator<Item = OsString>) -> Self {
        Cli::parse_from(with_default_subcommand(args))
    }

    /// Runs the subcommand; its errors are printed on stderr.
    pub async fn run(self) -> ExitCode {
        match self.command {
            Command::Serve(args) => match args.run().await {
                Ok(()) => ExitCode::SUCCESS,
                Err(error) => {
                    // The error and its causes on one line.
                    eprintln!("styrmin-webhook: {error:#}");
                    ExitCode::FAILURE
                }
            },
            Command::Controllers(args) => match args.run().await {
                Ok(()) => ExitCode::SUCCESS,
                Err(error) => {
                    eprintln!("styrmin-webhook: {error:#}");
                    ExitCode::FAILURE
                }
            },
            Command::Audit(args) => args.run().await,
            Command::Plan(args) => args.run().await,
            Command::Migrate(args) => args.run().await,
        }
    }
}

/// `args` with `serve` inserted after the program name, unless the first argument already
/// names a subcommand (or `help`) or asks for the top-level `--help` or `--version`.
fn with_default_subcommand(args: impl IntoIterator<Item = OsString>) -> Vec<OsString> {
    let mut args: Vec<OsString> = args.into_iter().collect();
    let command = Cli::command();
    let names_a_subcommand = |first: &str| {
        first == "help"
            || command
                .get_subcommands()
                .any(|sub| sub.get_name() == first || sub.get_all_aliases().any(|a| a == first))
    };
    let keep = match args.get(1).and_then(|first| first.to_str()) {
        Some(first) => {
            names_a_subcommand(first) || matches!(first, "-h" | "--help" | "-V" | "--version")
        }
        // No argument at all (`serve`, configured by its environment variables), or one that
        // is not UTF-8 (`serve` reports it).
        None => false,
    };
    if !keep {
        args.insert(args.len().min(1), OsString::from("serve"));
    }
    args
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &[&str]) -> Vec<OsString> {
        line.iter().map(OsString::from).collect()
    }

    /// `serve`'s options given without the subcommand.
    fn bare_serve_options() -> Box<ServeArgs> {
        let cli = Cli::parse_from_args(args(&[
            "styrmin-webhook",
            "--tls-cert=c.pem",
            "--tls-key=k.pem",
            "--source=kubernetes",
        ]));
        let Command::Serve(serve) = cli.command else {
            panic!("not serve: {cli:?}");
        };
        serve
    }

    #[test]
    fn options_without_a_subcommand_are_serves() {
        assert_eq!(
            with_default_subcommand(args(&["styrmin-webhook", "--listen", "[::1]:0"])),
            args(&["styrmin-webhook", "serve", "--listen", "[::1]:0"])
        );
        assert_eq!(
            with_default_subcommand(args(&["styrmin-webhook"])),
            args(&["styrmin-webhook", "serve"])
        );
    }

    #[test]
    fn a_subcommand_or_the_top_level_help_is_kept() {
        for line in [
            &["styrmin-webhook", "audit", "-o", "json"][..],
            &["styrmin-webhook", "serve", "--listen", "[::1]:0"],
            &["styrmin-webhook", "help", "audit"],
            &["styrmin-webhook", "--help"],
            &["styrmin-webhook", "-V"],
        ] {
            assert_eq!(with_default_subcommand(args(line)), args(line));
        }
    }

    #[test]
    fn bare_serve_options_parse_as_serve() {
        let serve = bare_serve_options();
        assert_eq!(serve.listeners.tls_cert.to_str(), Some("c.pem"));
        assert_eq!(serve.source.source, serve::SourceKind::Kubernetes);
    }

    #[test]
    fn help_lists_every_subcommand_under_its_full_name() {
        let help = Cli::command().render_help().to_string();
        for name in ["serve", "audit", "plan", "migrate"] {
            assert!(help.contains(&format!("  {name}  ")), "{help}");
        }
        let audit_help = Cli::try_parse_from(["styrmin-webhook", "audit", "--help"])
            .expect_err("--help stops parsing")
            .to_string();
        assert!(
            audit_help.contains("Usage: styrmin-webhook audit [OPTIONS]"),
            "{audit_help}"
        );
    }

    #[test]
    fn the_audit_thresholds_are_one_group_with_the_constants_as_defaults() {
        let cli = Cli::parse_from_args(args(&["styrmin-webhook", "audit"]));
        let Command::Audit(audit) = cli.command else {
            panic!("not audit: {cli:?}");
        };
        assert_eq!(
            audit.thresholds.settings(),
            crate::audit::AuditSettings::default()
        );
        // The name `audit` had before the flags were one group still parses, and means the
        // same as the name `serve` had.
        for name in ["--not-served-grace-secs", "--audit-not-served-grace-secs"] {
            for command in ["audit", "serve", "controllers"] {
                let mut line = vec!["styrmin-webhook", command, name, "60"];
                if command == "serve" {
                    line.extend(["--tls-cert=c.pem", "--tls-key=k.pem", "--source=kubernetes"]);
                }
                let cli = Cli::parse_from_args(args(&line));
                let thresholds = match cli.command {
                    Command::Audit(audit) => audit.thresholds,
                    Command::Serve(serve) => serve.thresholds,
                    Command::Controllers(controllers) => controllers.thresholds,
                    Command::Plan(_) | Command::Migrate(_) => panic!("not audit or serve"),
                };
                assert_eq!(thresholds.not_served_grace_secs, 60, "{command} {name}");
            }
        }
    }

    #[test]
    fn serves_defaults_are_the_named_constants() {
        let serve = bare_serve_options();
        let (https, metrics) = serve.budgets.limits();
        let default = crate::server::ConnectionLimits::default();
        assert_eq!(
            (https.head_timeout, https.idle_timeout, https.write_timeout),
            (
                default.head_timeout,
                default.idle_timeout,
                default.write_timeout
            )
        );
        assert_eq!(
            https.max_connections,
            crate::server::DEFAULT_MAX_CONNECTIONS
        );
        assert_eq!(
            metrics.max_connections,
            crate::server::DEFAULT_METRICS_MAX_CONNECTIONS
        );
        assert_eq!(
            serve.budgets.body_budget_mib * 1024 * 1024,
            crate::budget::DEFAULT_BODY_BUDGET_BYTES
        );
        assert_eq!(
            std::time::Duration::from_millis(serve.budgets.body_timeout_ms),
            crate::budget::DEFAULT_BODY_TIMEOUT
        );
        assert_eq!(
            std::time::Duration::from_millis(serve.budgets.flux_budget_ms),
            crate::budget::DEFAULT_FLUX_BUDGET
        );
        assert_eq!(
            std::time::Duration::from_secs(serve.source.audit_interval_secs),
            crate::kube_source::AUDIT_INTERVAL
        );
        assert_eq!(
            serve.decide_options(),
            crate::decide::DecideOptions::default()
        );
    }

    #[test]
    fn migrations_are_off_unless_asked_for() {
        assert!(!bare_serve_options().migrations.migrations);
        let cli = Cli::parse_from_args(args(&[
            "styrmin-webhook",
            "--tls-cert=c.pem",
            "--tls-key=k.pem",
            "--source=kubernetes",
            "--migrations",
        ]));
        let Command::Serve(serve) = cli.command else {
            panic!("not serve: {cli:?}");
        };
        assert!(serve.migrations.migrations);
    }

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }
}
