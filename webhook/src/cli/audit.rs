//! `styrmin-webhook audit`: one audit of a cluster, for a person, CI or cron. Lists what the
//! webhook watches (the same calls, [`crate::kube_source::API_CALLS`]), builds the same view,
//! judges the same way, prints a table or JSON, and exits 1 when anything is out of line.

use std::process::ExitCode;

use clap::Args;
use kube::Api;

use super::shared::{AuditThresholdArgs, ClusterArgs, Output, OutputArgs, warn_ignored};
use crate::audit::CompletedAudit;
use crate::audit::objects::{AliasService, NamespaceName, SERVICE_ALIAS_SELECTOR};
use crate::audit::render::{render_json, render_table};
use crate::kube_source::{Snapshot, audit_listed, list_all};

/// The options of `audit`.
#[derive(Debug, Args)]
pub struct AuditArgs {
    #[command(flatten)]
    pub cluster: ClusterArgs,

    #[command(flatten)]
    pub output: OutputArgs,

    #[command(flatten)]
    pub thresholds: AuditThresholdArgs,
}

impl AuditArgs {
    /// Runs the audit; prints it on stdout, an error on stderr.
    pub async fn run(self) -> ExitCode {
        let output = self.output.output;
        match self.audit().await {
            Ok(report) => {
                let text = match output {
                    Output::Table => render_table(&report),
                    Output::Json => render_json(&report),
                };
                print!("{text}");
                if report.is_clean() {
                    ExitCode::SUCCESS
                } else {
                    ExitCode::from(1)
                }
            }
            Err(error) => {
                eprintln!("styrmin-webhook audit: {error:#}");
                ExitCode::from(2)
            }
        }
    }

    /// Lists everything, builds the view and judges.
    pub async fn audit(&self) -> anyhow::Result<CompletedAudit> {
        let client = self.cluster.client().await?;
        let Snapshot {
            view,
            ignored,
            ingresses,
            ingress_classes,
            ..
        } = Snapshot::read(&client).await?;
        warn_ignored(&ignored);
        let aliases = list_all(
            Api::<AliasService>::all(client.clone()),
            Some(SERVICE_ALIAS_SELECTOR),
        )
        .await?;
        let namespaces = list_all(Api::<NamespaceName>::all(client), None).await?;
        Ok(audit_listed(
            &view,
            &ingresses,
            &aliases,
            &namespaces,
            &ingress_classes,
            &self.thresholds.settings(),
            None,
            // Run from the command line, it knows of no step in flight.
            &Default::default(),
        ))
    }
}
