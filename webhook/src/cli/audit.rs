//! `styrmin-webhook audit`: one audit of a cluster, for a person, CI or cron. Lists what the
//! webhook watches (the same calls, [`crate::kube_source::API_CALLS`]), builds the same view,
//! judges the same way, prints a table or JSON, and exits 1 when anything is out of line.

use std::fmt;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use clap::Args;
use k8s_openapi::api::networking::v1::IngressClass;
use kube::api::ListParams;
use kube::{Api, Client, Resource};

use super::shared::{AuditThresholdArgs, ClusterArgs, Output, OutputArgs};
use crate::audit::CompletedAudit;
use crate::audit::objects::{AliasService, AuditedIngress, NamespaceName, SERVICE_ALIAS_SELECTOR};
use crate::audit::render::{render_json, render_table};
use crate::crd::{StyrminCluster, StyrminDeployment, StyrminEnvironment};
use crate::kube_source::{BuiltView, audit_listed, build_view, version_of};
use crate::view::{View, namespace_owner};
use styrmin_ingress_rules::KubernetesVersion;

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
            ingresses,
            ingress_classes,
            ..
        } = Snapshot::read(&client).await?;
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
        ))
    }
}

/// What `audit` and `plan` read of a cluster: the view built from the three Styrmin
/// resources, the Ingresses of Styrmin namespaces (trimmed), and the IngressClasses.
#[derive(Debug)]
pub struct Snapshot {
    pub clusters: Vec<Arc<StyrminCluster>>,
    pub environments: Vec<Arc<StyrminEnvironment>>,
    pub deployments: Vec<Arc<StyrminDeployment>>,
    pub view: View,
    pub kubernetes: Option<KubernetesVersion>,
    pub ingresses: Vec<Arc<AuditedIngress>>,
    pub ingress_classes: Vec<Arc<IngressClass>>,
}

impl Snapshot {
    /// Lists them; the objects the view leaves out are named on stderr.
    pub async fn read(client: &Client) -> anyhow::Result<Self> {
        let info = client
            .apiserver_version()
            .await
            .context("cannot read /version")?;
        let kubernetes = version_of(&info);
        let clusters = list_all(Api::<StyrminCluster>::all(client.clone()), None).await?;
        let environments = list_all(Api::<StyrminEnvironment>::all(client.clone()), None).await?;
        let deployments = list_all(Api::<StyrminDeployment>::all(client.clone()), None).await?;
        let BuiltView { view, ignored } =
            build_view(&clusters, &environments, &deployments, kubernetes)?;
        for why in ignored {
            eprintln!("warning: {why}");
        }
        let mut ingresses = list_all(Api::<AuditedIngress>::all(client.clone()), None).await?;
        ingresses.retain(|i| namespace_owner(i.namespace()).is_some());
        for ingress in &mut ingresses {
            Arc::make_mut(ingress).trim();
        }
        let ingress_classes = list_all(Api::<IngressClass>::all(client.clone()), None).await?;
        Ok(Snapshot {
            clusters,
            environments,
            deployments,
            view,
            kubernetes,
            ingresses,
            ingress_classes,
        })
    }
}

/// Every object of a resource, a page of 500 at a time.
pub async fn list_all<K>(api: Api<K>, labels: Option<&str>) -> anyhow::Result<Vec<Arc<K>>>
where
    K: Resource<DynamicType = ()> + Clone + fmt::Debug + serde::de::DeserializeOwned,
{
    let mut params = ListParams::default().limit(500);
    if let Some(labels) = labels {
        params = params.labels(labels);
    }
    let mut objects = Vec::new();
    loop {
        let page = api
            .list(&params)
            .await
            .with_context(|| format!("cannot list {}", K::plural(&())))?;
        objects.extend(page.items.into_iter().map(Arc::new));
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => params = params.continue_token(&token),
            _ => return Ok(objects),
        }
    }
}
