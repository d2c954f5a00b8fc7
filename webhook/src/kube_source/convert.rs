//! The Styrmin objects turned into the view: pure, shared with `styrmin-webhook audit`; and
//! the objects an audit judges, as the cluster lists them, turned into its input.

use std::collections::HashSet;
use std::sync::Arc;

use k8s_openapi::api::networking::v1::IngressClass;
use k8s_openapi::apimachinery::pkg::version::Info;
use kube::{Resource, ResourceExt as _};
use serde::Deserialize as _;
use styrmin_ingress_rules::{DedicatedIngress, IngressTarget, KubernetesVersion, Level, Setting};

use crate::audit::moving::MovingSet;
use crate::audit::objects::{AliasService, AuditedIngress, NamespaceName};
use crate::audit::{AuditInput, AuditSettings, CompletedAudit, audit};
use crate::clock::unix_now;
use crate::crd::{
    CLUSTER_NAME, DeploymentPhase, DeploymentRole, IngressSettings, StyrminCluster,
    StyrminDeployment, StyrminEnvironment,
};
use crate::view::{Deployment, Phase, Removal, Role, View, namespace_owner};

/// A Styrmin object that cannot be read. The API server's schema rejects these, so one
/// means the CRD in the cluster is not the one this webhook was built with; the last good
/// view stays in force until it is fixed.
#[derive(Debug, thiserror::Error)]
#[error("{kind} {name}: {field}")]
pub struct InvalidObject {
    pub kind: &'static str,
    pub name: String,
    pub field: &'static str,
    #[source]
    pub source: serde_json::Error,
}

/// A view and the objects that were left out of it, with why.
#[derive(Debug, Clone, PartialEq)]
pub struct BuiltView {
    pub view: View,
    pub ignored: Vec<String>,
}

/// The annotation in which client-side `kubectl apply` keeps the object as it was applied.
pub(super) const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Whether the object was last applied by client-side `kubectl apply` with
/// `spec.ingressClass: null`. The client drops the `null` from its patch, so the API server
/// stores the field left out, which the CRD's default then fills; only this annotation still
/// shows what was written.
fn last_applied_class_is_null(object: &StyrminCluster) -> bool {
    object
        .metadata
        .annotations
        .as_ref()
        .and_then(|annotations| annotations.get(LAST_APPLIED))
        .and_then(|text| serde_json::from_str::<serde_json::Value>(text).ok())
        .is_some_and(|applied| {
            applied.pointer("/spec/ingressClass") == Some(&serde_json::Value::Null)
        })
}

/// One level from the two CRD fields; a `dedicatedIngress` that is not an object is an error.
pub fn level(settings: &IngressSettings) -> Result<Level, serde_json::Error> {
    let dedicated_ingress = match &settings.dedicated_ingress {
        Setting::Absent => Setting::Absent,
        Setting::Null => Setting::Null,
        Setting::Value(value) => Setting::Value(DedicatedIngress::deserialize(value)?),
    };
    Ok(Level {
        ingress_class: settings.ingress_class.clone(),
        dedicated_ingress,
        ..Level::default()
    })
}

/// A spec's level: its two ingress keys and its `enforcementMode`.
fn level_with_mode(
    settings: &IngressSettings,
    mode: Option<styrmin_ingress_rules::EnforcementMode>,
) -> Result<Level, serde_json::Error> {
    let mut level = level(settings)?;
    if let Some(mode) = mode {
        level.enforcement_mode = Setting::Value(mode);
    }
    Ok(level)
}

/// A `status.lastDeployed` record (W5), written as one level read like a cluster level.
pub fn deployed(settings: &IngressSettings) -> Result<IngressTarget, serde_json::Error> {
    level(settings).map(|level| IngressTarget::from_record_level(&level))
}

/// The deployment id of a StyrminDeployment: `<id>` when it is named `styrmin-<id>` in the
/// namespace `styrmin-<id>`; otherwise why it is ignored.
pub fn deployment_id(object: &StyrminDeployment) -> Result<&str, String> {
    let name = object.metadata.name.as_deref().unwrap_or("");
    let namespace = object.metadata.namespace.as_deref().unwrap_or("");
    match namespace_owner(namespace) {
        Some(id) if name == namespace => Ok(id),
        Some(_) => Err(format!(
            "StyrminDeployment {namespace}/{name}: ignored, a deployment's object must be named like its namespace ({namespace})"
        )),
        None => Err(format!(
            "StyrminDeployment {namespace}/{name}: ignored, not in a namespace styrmin-<id>"
        )),
    }
}

/// A deployment as the view holds it. A deletion timestamp makes it `DELETING`; no phase
/// yet is `PENDING`; an empty `environmentId` is an unknown environment.
pub fn deployment(object: &StyrminDeployment) -> Result<Deployment, InvalidObject> {
    let invalid = |field: &'static str| {
        let name = format!(
            "{}/{}",
            object.metadata.namespace.as_deref().unwrap_or(""),
            object.metadata.name.as_deref().unwrap_or("")
        );
        move |source| InvalidObject {
            kind: "StyrminDeployment",
            name,
            field,
            source,
        }
    };
    let spec = &object.spec;
    let status = object.status.as_ref();
    let phase = if object.metadata.deletion_timestamp.is_some() {
        Phase::Deleting
    } else {
        match status.and_then(|s| s.phase) {
            None | Some(DeploymentPhase::Pending) => Phase::Pending,
            Some(DeploymentPhase::Deploying) => Phase::Deploying,
            Some(DeploymentPhase::Running) => Phase::Running,
            Some(DeploymentPhase::Failed) => Phase::Failed,
            Some(DeploymentPhase::Restoring) => Phase::Restoring,
            Some(DeploymentPhase::Deleting) => Phase::Deleting,
        }
    };
    let last_deployed = status
        .and_then(|s| s.last_deployed.as_ref())
        .map(deployed)
        .transpose()
        .map_err(invalid("status.lastDeployed.dedicatedIngress"))?;
    let removal = (phase == Phase::Deleting).then(|| Removal {
        deletion_requested: object
            .metadata
            .deletion_timestamp
            .as_ref()
            .map(|t| t.0.as_second()),
        first_seen: None,
        finalizers: object.metadata.finalizers.clone().unwrap_or_default(),
    });
    Ok(Deployment {
        removal,
        environment: Some(spec.environment_id.clone()).filter(|e| !e.is_empty()),
        role: match spec.role {
            DeploymentRole::Application => Role::Application,
            DeploymentRole::IngressController => Role::IngressController,
        },
        phase,
        level: level_with_mode(&spec.settings, spec.enforcement_mode)
            .map_err(invalid("spec.dedicatedIngress"))?,
        last_deployed,
    })
}

/// The whole view from the three stores' contents and the API server's version.
///
/// The cluster level is the StyrminCluster named `default` (none: every key absent, so the
/// class is `traefik`); other StyrminClusters, and StyrminDeployments not named like their
/// `styrmin-<id>` namespace, are left out and listed in `ignored`. A deployment whose
/// environment has no StyrminEnvironment gets no environment level (W1: not set).
pub fn build_view(
    clusters: &[Arc<StyrminCluster>],
    environments: &[Arc<StyrminEnvironment>],
    deployments: &[Arc<StyrminDeployment>],
    kubernetes_version: Option<KubernetesVersion>,
) -> Result<BuiltView, InvalidObject> {
    let mut ignored = Vec::new();
    let mut cluster = Level::default();
    let mut cluster_class_applied_null = false;
    for object in clusters {
        let name = object.name_any();
        if name != CLUSTER_NAME {
            ignored.push(format!(
                "StyrminCluster {name}: ignored, only the one named {CLUSTER_NAME:?} counts"
            ));
            continue;
        }
        cluster = level_with_mode(&object.spec.settings, object.spec.enforcement_mode).map_err(
            |source| InvalidObject {
                kind: "StyrminCluster",
                name,
                field: "spec.dedicatedIngress",
                source,
            },
        )?;
        cluster_class_applied_null = matches!(cluster.ingress_class, Setting::Value(_))
            && last_applied_class_is_null(object);
    }
    let environments = environments
        .iter()
        .map(|object| {
            let name = object.name_any();
            match level_with_mode(&object.spec.settings, object.spec.enforcement_mode) {
                Ok(level) => Ok((name, level)),
                Err(source) => Err(InvalidObject {
                    kind: "StyrminEnvironment",
                    name,
                    field: "spec.dedicatedIngress",
                    source,
                }),
            }
        })
        .collect::<Result<_, _>>()?;
    let mut by_id = std::collections::HashMap::new();
    for object in deployments {
        match deployment_id(object) {
            Ok(id) => {
                by_id.insert(id.to_owned(), deployment(object)?);
            }
            Err(why) => ignored.push(why),
        }
    }
    ignored.sort();
    Ok(BuiltView {
        view: View::new(cluster, environments, by_id, kubernetes_version)
            .with_cluster_class_applied_null(cluster_class_applied_null),
        ignored,
    })
}

/// The version whose rules the API server applies: the emulated one where it says so
/// (`emulationMajor`/`emulationMinor`, Kubernetes 1.31+), else `major.minor` (`"27+"` on
/// some clouds), else `gitVersion`.
pub fn version_of(info: &Info) -> Option<KubernetesVersion> {
    let emulated = match (&info.emulation_major, &info.emulation_minor) {
        (Some(major), Some(minor)) if !major.is_empty() && !minor.is_empty() => {
            format!("{major}.{minor}").parse().ok()
        }
        _ => None,
    };
    emulated
        .or_else(|| format!("{}.{}", info.major, info.minor).parse().ok())
        .or_else(|| info.git_version.parse().ok())
}

/// Audits the objects as the cluster lists them (the watches' stores, or one listing),
/// now: the Namespaces and IngressClasses count by name.
// One slice per watch store, as the run loop and the one-shot listing hold them.
#[allow(clippy::too_many_arguments)]
pub fn audit_listed(
    view: &View,
    ingresses: &[Arc<AuditedIngress>],
    aliases: &[Arc<AliasService>],
    namespaces: &[Arc<NamespaceName>],
    ingress_classes: &[Arc<IngressClass>],
    settings: &AuditSettings,
    previous: Option<&CompletedAudit>,
    moving: &MovingSet,
) -> CompletedAudit {
    let namespaces = names(namespaces);
    let ingress_classes = ingress_classes
        .iter()
        .filter_map(|class| {
            let controller = class.spec.as_ref().and_then(|s| s.controller.clone());
            Some((class.metadata.name.clone()?, controller.unwrap_or_default()))
        })
        .collect();
    let input = AuditInput {
        view,
        ingresses,
        aliases,
        namespaces: &namespaces,
        ingress_classes: &ingress_classes,
        now: unix_now(),
        previous,
        moving,
    };
    audit(&input, settings)
}

/// The names of `objects`.
pub fn names<K: Resource>(objects: &[Arc<K>]) -> HashSet<String> {
    objects
        .iter()
        .filter_map(|object| object.meta().name.clone())
        .collect()
}
