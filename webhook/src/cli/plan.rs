//! `styrmin-webhook plan`: what a proposed change of the levels does to the Ingresses in a
//! cluster, read-only. Reads the cluster as `audit` does ([`Snapshot`]), applies the proposal
//! (`-f` files of Styrmin objects, or a policy file) to get the view after it, and prints
//! [`crate::plan`]'s plan. Exit status: 0 nothing moves and nothing found, 1 something moves
//! or a pre-flight finding, 2 the plan could not be made, 3 `--fail-on` found what it fails
//! on.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Args;

use super::shared::{ClusterArgs, Output, OutputArgs, warn_ignored};
use crate::annotation_catalog::Version;
use crate::kube_source::{BuiltView, Snapshot, build_view};
use crate::plan::annotations::{parse_class_target, parse_target_version};
use crate::plan::{
    ClassInfo, FailOn, PlanInput, Proposal, Targets, plan_with, render_table, write_json,
};
use crate::policy_file::parse_policy;

/// The options of `plan`.
#[derive(Debug, Args)]
pub struct PlanArgs {
    #[command(flatten)]
    pub cluster: ClusterArgs,

    #[command(flatten)]
    pub output: OutputArgs,

    /// A file of proposed StyrminCluster, StyrminEnvironment and StyrminDeployment objects,
    /// YAML or JSON, as `kubectl apply -f` takes it (repeatable).
    #[arg(
        short = 'f',
        long = "filename",
        value_name = "FILE",
        required_unless_present = "policy_file"
    )]
    pub files: Vec<PathBuf>,

    /// A policy file (the webhook's `--policy-file` format) that is the whole proposal.
    #[arg(long, value_name = "FILE", conflicts_with = "files")]
    pub policy_file: Option<PathBuf>,

    /// The annotation catalog's controller that serves IngressClass CLASS, whatever its
    /// spec.controller says, e.g. traefik=traefik-ingress-nginx (repeatable).
    #[arg(long = "target", value_name = "CLASS=ID", value_parser = parse_class_target)]
    pub targets: Vec<(String, String)>,

    /// The version of the target controllers, or of one IngressClass's with CLASS=
    /// (repeatable); without it, the newest version the annotation catalog has.
    #[arg(long = "target-version", value_name = "[CLASS=]VERSION", value_parser = parse_target_version)]
    pub target_versions: Vec<(Option<String>, Version)>,

    /// Exit 3 when a moving Ingress carries an annotation its target does not read
    /// (unsupported), or does not read or is not known to (unknown).
    #[arg(long, value_enum, value_name = "VERDICT")]
    pub fail_on: Option<FailOn>,
}

impl PlanArgs {
    /// Makes the plan; prints it on stdout, an error on stderr.
    pub async fn run(self) -> ExitCode {
        match self.plan().await {
            Ok(plan) => {
                let stdout = std::io::stdout();
                let mut out = std::io::BufWriter::new(stdout.lock());
                let written = match self.output.output {
                    Output::Table => out.write_all(render_table(&plan).as_bytes()),
                    Output::Json => write_json(&plan, &mut out),
                }
                .and_then(|()| out.flush());
                if let Err(error) = written {
                    eprintln!("styrmin-webhook plan: writing the plan to stdout: {error}");
                    return ExitCode::from(2);
                }
                if self.fail_on.is_some_and(|fail_on| plan.fails_on(fail_on)) {
                    ExitCode::from(3)
                } else if plan.is_quiet() {
                    ExitCode::SUCCESS
                } else {
                    ExitCode::from(1)
                }
            }
            Err(error) => {
                eprintln!("styrmin-webhook plan: {error:#}");
                ExitCode::from(2)
            }
        }
    }

    /// Reads the proposal first (a bad file fails before the cluster is asked), then the
    /// cluster, and plans.
    pub async fn plan(&self) -> anyhow::Result<crate::plan::Plan> {
        let mut proposal = Proposal::default();
        for path in &self.files {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read {}", path.display()))?;
            proposal.add_file(&path.display().to_string(), &text)?;
        }
        let policy = self
            .policy_file
            .as_ref()
            .map(|path| {
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("cannot read {}", path.display()))?;
                anyhow::Ok(parse_policy(path, &text)?)
            })
            .transpose()?;
        let client = self.cluster.client().await?;
        let snapshot = Snapshot::read(&client).await?;
        warn_ignored(&snapshot.ignored);
        let proposed = match policy {
            Some(view) => view,
            None => {
                let after = proposal.apply_to(
                    &snapshot.clusters,
                    &snapshot.environments,
                    &snapshot.deployments,
                );
                let BuiltView { view, .. } = build_view(
                    &after.clusters,
                    &after.environments,
                    &after.deployments,
                    snapshot.kubernetes,
                )
                .context("the proposed objects")?;
                view
            }
        };
        let classes: Vec<ClassInfo> = snapshot
            .ingress_classes
            .iter()
            .map(|class| ClassInfo::of(class))
            .collect();
        let acme_issuers = crate::acme_issuers::read(&client)
            .await
            .context("cannot read cert-manager's Issuers")?;
        let targets = Targets::of(&self.targets, &self.target_versions);
        Ok(plan_with(
            &PlanInput {
                current: &snapshot.view,
                proposed: &proposed,
                ingresses: &snapshot.ingresses,
                ingress_classes: &classes,
                acme_issuers: &acme_issuers,
            },
            &targets,
        ))
    }
}
