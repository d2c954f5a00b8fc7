//! The `--source kubernetes` view source (rule W3): kube-rs reflectors on the three Styrmin
//! custom resources, turned into the same [`View`] that `--policy-file` feeds, and on the
//! Ingresses, service aliases and namespaces the audit reads ([`WatchedResource`]).
//!
//! The part that talks to the API server is small: [`KubeSource::run`] starts one
//! `watcher` + `reflector` per resource (every call it may make is in [`API_CALLS`], which the
//! ClusterRole in `charts/styrmin-webhook/templates/rbac.yaml` must match), reads `/version` once, and after
//! each batch of watch events rebuilds the view from the three stores with the pure
//! [`build_view`]. Nothing here runs while a request is answered: handlers only load the
//! published view.
//!
//! - Not ready until every resource has been listed completely once (the watcher's
//!   `InitDone`) and the version has been read (or given up on after a few tries).
//! - A watch error keeps the last view in force: the watcher reconnects with kube-runtime's
//!   `default_backoff` (0.8 s doubling to 30 s), resumes from the last resource version
//!   (bookmarks included), and relists after `410 Gone`; the reflector swaps a relist in
//!   only once it is complete. Errors are logged and counted
//!   (`styrmin_webhook_view_update_failures_total{source="kubernetes"}`).
//! - `styrmin_webhook_view_age_seconds` is the time since the view was last known current:
//!   confirmed every few seconds while no watch has failed for [`HEALTHY_AFTER`].

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{FutureExt as _, StreamExt as _};
use ingress_rules::{DedicatedIngress, IngressTarget, KubernetesVersion, Level, Setting};
use k8s_openapi::api::networking::v1::IngressClass;
use k8s_openapi::apimachinery::pkg::version::Info;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Api, Client, Resource, ResourceExt as _};
use serde::Deserialize as _;
use serde::de::DeserializeOwned;

use crate::audit::objects::{
    AliasService, AuditedIngress, NamespaceName, SERVICE_ALIAS_SELECTOR, trim_ingress_class,
};
use crate::audit::{AuditInput, AuditSettings, AuditStore, Reason, audit};
use crate::clock::unix_now;
use crate::crd::{
    CLUSTER_NAME, DeploymentPhase, DeploymentRole, IngressSettings, StyrminCluster,
    StyrminDeployment, StyrminEnvironment,
};
use crate::telemetry::ErrorChain;
use crate::view::{Deployment, Phase, Removal, Role, View, ViewSink, ViewSource, namespace_owner};

/// One kind of call the webhook makes to the API server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ApiCall {
    /// Verbs on a resource of an API group, in every namespace.
    Resource {
        group: &'static str,
        version: &'static str,
        resource: &'static str,
        verbs: &'static [&'static str],
    },
    /// Verbs on a path outside the resource API.
    NonResource {
        path: &'static str,
        verbs: &'static [&'static str],
    },
}

/// What a kube-runtime watcher does: list (paginated), then watch from the list's version.
pub const WATCH_VERBS: &[&str] = &["list", "watch"];

/// A resource the webhook watches, in every namespace: the three Styrmin resources the view
/// is built from, and what the audit (`crate::audit`) reads: the Ingresses (those of Styrmin
/// namespaces are kept), the service aliases (label selector), the namespaces' names and the
/// IngressClasses.
/// Every one is in the readiness gate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WatchedResource {
    StyrminClusters,
    StyrminEnvironments,
    StyrminDeployments,
    Ingresses,
    Services,
    Namespaces,
    IngressClasses,
}

impl WatchedResource {
    /// Every watched resource, in the order of [`API_CALLS`].
    pub const ALL: [WatchedResource; 7] = [
        WatchedResource::StyrminClusters,
        WatchedResource::StyrminEnvironments,
        WatchedResource::StyrminDeployments,
        WatchedResource::Ingresses,
        WatchedResource::Services,
        WatchedResource::Namespaces,
        WatchedResource::IngressClasses,
    ];

    /// Its API group, version and plural name ([`watch`] checks that the watched type's are
    /// these).
    pub const fn group_version_plural(self) -> (&'static str, &'static str, &'static str) {
        match self {
            WatchedResource::StyrminClusters => ("styrmin.io", "v1alpha1", "styrminclusters"),
            WatchedResource::StyrminEnvironments => {
                ("styrmin.io", "v1alpha1", "styrminenvironments")
            }
            WatchedResource::StyrminDeployments => ("styrmin.io", "v1alpha1", "styrmindeployments"),
            WatchedResource::Ingresses => ("networking.k8s.io", "v1", "ingresses"),
            WatchedResource::Services => ("", "v1", "services"),
            WatchedResource::Namespaces => ("", "v1", "namespaces"),
            WatchedResource::IngressClasses => ("networking.k8s.io", "v1", "ingressclasses"),
        }
    }

    /// The calls its watcher makes: list and watch.
    pub const fn api_call(self) -> ApiCall {
        let (group, version, resource) = self.group_version_plural();
        ApiCall::Resource {
            group,
            version,
            resource,
            verbs: WATCH_VERBS,
        }
    }

    /// The resource's plural name, for logs and the audit's `stale_because`.
    pub const fn plural(self) -> &'static str {
        self.group_version_plural().2
    }
}

/// The `/version` read (R9).
const VERSION_CALL: ApiCall = ApiCall::NonResource {
    path: "/version",
    verbs: &["get"],
};

/// Every call the webhook makes to the API server: each watched resource's, then
/// `/version`. The ClusterRole must grant exactly these (a test compares them).
pub const API_CALLS: &[ApiCall] = &api_calls();

const fn api_calls() -> [ApiCall; WatchedResource::ALL.len() + 1] {
    let mut calls = [VERSION_CALL; WatchedResource::ALL.len() + 1];
    let mut i = 0;
    while i < WatchedResource::ALL.len() {
        calls[i] = WatchedResource::ALL[i].api_call();
        i += 1;
    }
    calls
}

/// One value per watched resource.
#[derive(Debug, Default, Clone, PartialEq)]
struct ByResource<T>([T; WatchedResource::ALL.len()]);

impl<T> std::ops::Index<WatchedResource> for ByResource<T> {
    type Output = T;
    fn index(&self, resource: WatchedResource) -> &T {
        // `ALL` lists the variants in declaration order (a test checks it).
        &self.0[resource as usize]
    }
}

impl<T> std::ops::IndexMut<WatchedResource> for ByResource<T> {
    fn index_mut(&mut self, resource: WatchedResource) -> &mut T {
        &mut self.0[resource as usize]
    }
}

/// How long after its last error a watch counts as healthy again when no event has shown
/// it (longer than the watcher's largest backoff, so a watch that keeps failing never does).
pub const HEALTHY_AFTER: Duration = Duration::from_secs(60);

/// How many times `/version` is tried before the webhook goes on without it (R9 then
/// cannot be checked, and a warning says so).
const VERSION_ATTEMPTS: u32 = 5;

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
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

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
    mode: Option<ingress_rules::EnforcementMode>,
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

/// What one watch stream item means for the view.
#[derive(Debug)]
enum Step {
    /// The store changed (an object was added, changed or deleted, or a relist completed).
    Changed { relisted: bool },
    /// Nothing to do yet (the start of a relist, or one object of it).
    Pending,
    /// The watch failed; the watcher retries after a backoff.
    Failed(String),
}

fn step<K>(item: Result<watcher::Event<K>, watcher::Error>) -> Step {
    match item {
        Ok(watcher::Event::Apply(_) | watcher::Event::Delete(_)) => {
            Step::Changed { relisted: false }
        }
        Ok(watcher::Event::InitDone) => Step::Changed { relisted: true },
        Ok(watcher::Event::Init | watcher::Event::InitApply(_)) => Step::Pending,
        Err(error) => Step::Failed(error.to_string()),
    }
}

/// Where each watch stands.
#[derive(Debug, Default)]
struct Progress {
    listed: ByResource<bool>,
    last_error: ByResource<Option<Instant>>,
    /// The last error of each watch, for the audit's `stale_because`.
    last_message: ByResource<Option<String>>,
}

impl Progress {
    fn all_listed(&self) -> bool {
        self.listed.0.iter().all(|l| *l)
    }

    fn all_healthy(&self, now: Instant) -> bool {
        self.all_listed()
            && self
                .last_error
                .0
                .iter()
                .all(|e| e.is_none_or(|at| now.duration_since(at) >= HEALTHY_AFTER))
    }

    /// Why the watches are not all healthy at `now` (`None` when they are).
    fn unhealthy_because(&self, now: Instant) -> Option<String> {
        let mut why = Vec::new();
        for resource in WatchedResource::ALL {
            if !self.listed[resource] {
                why.push(format!("{} not listed yet", resource.plural()));
            } else if let Some(at) = self.last_error[resource]
                && now.duration_since(at) < HEALTHY_AFTER
            {
                why.push(format!(
                    "the watch of {} failed {}s ago: {}",
                    resource.plural(),
                    now.duration_since(at).as_secs(),
                    self.last_message[resource].as_deref().unwrap_or("")
                ));
            }
        }
        (!why.is_empty()).then(|| why.join("; "))
    }
}

type Events = futures::stream::BoxStream<'static, (WatchedResource, Step)>;

/// A watcher and reflector for `resource`, in every namespace. Fails when the type's group,
/// version or plural is not the resource's.
fn watch<K>(client: &Client, resource: WatchedResource) -> anyhow::Result<(Store<K>, Events)>
where
    K: Resource<DynamicType = ()> + Clone + fmt::Debug + DeserializeOwned + Send + Sync + 'static,
{
    watch_trimmed(
        client,
        resource,
        watcher::Config::default(),
        |_| true,
        without_bookkeeping::<K>,
    )
}

/// Drops what the webhook never reads and can be large: managed fields, and the copy of the
/// whole object that client-side `kubectl apply` keeps in an annotation.
fn without_bookkeeping<K: Resource>(object: &mut K) {
    without_managed_fields(object);
    if let Some(annotations) = object.meta_mut().annotations.as_mut() {
        annotations.remove(LAST_APPLIED);
    }
}

/// Drops the managed fields only.
fn without_managed_fields<K: Resource>(object: &mut K) {
    object.meta_mut().managed_fields = None;
}

/// [`watch`] with a watcher configuration, and objects that `keep` refuses never stored,
/// the others `trim`med first (the audit's watches keep only what they read).
fn watch_trimmed<K>(
    client: &Client,
    watched: WatchedResource,
    config: watcher::Config,
    keep: fn(&K) -> bool,
    trim: fn(&mut K),
) -> anyhow::Result<(Store<K>, Events)>
where
    K: Resource<DynamicType = ()> + Clone + fmt::Debug + DeserializeOwned + Send + Sync + 'static,
{
    let (group, version, plural) = watched.group_version_plural();
    anyhow::ensure!(
        (
            K::group(&()).as_ref(),
            K::version(&()).as_ref(),
            K::plural(&()).as_ref()
        ) == (group, version, plural),
        "{} is not the resource {watched:?} ({group}/{version} {plural})",
        K::kind(&())
    );
    let (reader, writer) = reflector::store::<K>();
    let stream = watcher(Api::<K>::all(client.clone()), config)
        .default_backoff()
        .filter_map(move |item| {
            let kept = match item {
                Ok(
                    watcher::Event::Apply(object)
                    | watcher::Event::InitApply(object)
                    | watcher::Event::Delete(object),
                ) if !keep(&object) => None,
                other => Some(other),
            };
            futures::future::ready(kept)
        })
        .modify(trim)
        .reflect(writer)
        .map(move |item| (watched, step(item)))
        .boxed();
    Ok((reader, stream))
}

/// Reads `/version`, with a few tries.
async fn read_version(client: Client) -> Option<KubernetesVersion> {
    let mut delay = Duration::from_millis(500);
    for attempt in 1..=VERSION_ATTEMPTS {
        match client.apiserver_version().await {
            Ok(info) => {
                let version = version_of(&info);
                match version {
                    Some(version) => {
                        tracing::info!(%version, git_version = %info.git_version, "Kubernetes version")
                    }
                    None => {
                        tracing::warn!(major = %info.major, minor = %info.minor, git_version = %info.git_version,
                        "cannot read the Kubernetes version; R9 (1.18-1.26 reject both class fields) is not checked")
                    }
                }
                return version;
            }
            Err(error) => {
                tracing::warn!(attempt, %error, "cannot read /version");
                if attempt < VERSION_ATTEMPTS {
                    tokio::time::sleep(delay).await;
                    delay *= 2;
                }
            }
        }
    }
    tracing::error!(
        "going on without the Kubernetes version: R9 (1.18-1.26 reject both class fields) is not checked"
    );
    None
}

/// What the source knows of the API server's version. No view is built before `/version`
/// has been read (or given up on): a view without the version would skip R9.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ServerVersion {
    NotReadYet,
    /// Read, or given up on, and not a version the rules can use.
    Unknown,
    Known(KubernetesVersion),
}

impl From<Option<KubernetesVersion>> for ServerVersion {
    fn from(read: Option<KubernetesVersion>) -> Self {
        read.map_or(ServerVersion::Unknown, ServerVersion::Known)
    }
}

/// The view source for a cluster; it also audits what is already there (`crate::audit`).
pub struct KubeSource {
    client: Client,
    confirm_interval: Duration,
    audit_interval: Duration,
    audit_settings: AuditSettings,
    audits: Arc<AuditStore>,
}

/// The default of `--audit-interval`.
pub const AUDIT_INTERVAL: Duration = Duration::from_secs(30);

impl fmt::Debug for KubeSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KubeSource")
            .field("confirm_interval", &self.confirm_interval)
            .finish_non_exhaustive()
    }
}

impl KubeSource {
    /// A source on this client.
    pub fn new(client: Client) -> Self {
        KubeSource {
            client,
            confirm_interval: Duration::from_secs(5),
            audit_interval: AUDIT_INTERVAL,
            audit_settings: AuditSettings::default(),
            audits: Arc::default(),
        }
    }

    /// Where the audits go (the webhook's state serves them), how often the audit runs
    /// (default 30 s), and its thresholds. Without it the audits go nowhere anyone reads.
    pub fn with_audit(
        mut self,
        audits: Arc<AuditStore>,
        interval: Duration,
        settings: AuditSettings,
    ) -> Self {
        self.audits = audits;
        self.audit_interval = interval;
        self.audit_settings = settings;
        self
    }

    /// A source on the in-cluster configuration (the pod's service account), or the local
    /// kubeconfig outside a cluster.
    pub async fn from_environment() -> Result<Self, kube::Error> {
        Ok(Self::new(Client::try_default().await?))
    }

    /// How often the view's age is reset while every watch is healthy (default 5 s).
    pub fn with_confirm_interval(mut self, interval: Duration) -> Self {
        self.confirm_interval = interval;
        self
    }
}

impl ViewSource for KubeSource {
    fn name(&self) -> &'static str {
        "kubernetes"
    }

    async fn run(self, sink: ViewSink) -> anyhow::Result<()> {
        let name = self.name();
        let KubeSource {
            client,
            confirm_interval,
            audit_interval,
            audit_settings,
            audits,
        } = self;
        // The StyrminCluster keeps its last-applied configuration: the `null` trap shows only
        // there, and there is one such object.
        let (clusters, cluster_events) = watch_trimmed::<StyrminCluster>(
            &client,
            WatchedResource::StyrminClusters,
            watcher::Config::default(),
            |_| true,
            without_managed_fields::<StyrminCluster>,
        )?;
        let (environments, environment_events) =
            watch::<StyrminEnvironment>(&client, WatchedResource::StyrminEnvironments)?;
        let (deployments, deployment_events) =
            watch::<StyrminDeployment>(&client, WatchedResource::StyrminDeployments)?;
        let (ingresses, ingress_events) = watch_trimmed::<AuditedIngress>(
            &client,
            WatchedResource::Ingresses,
            watcher::Config::default(),
            |i| namespace_owner(i.namespace()).is_some(),
            AuditedIngress::trim,
        )?;
        let (aliases, alias_events) = watch_trimmed::<AliasService>(
            &client,
            WatchedResource::Services,
            watcher::Config::default().labels(SERVICE_ALIAS_SELECTOR),
            |_| true,
            AliasService::trim,
        )?;
        let (namespaces, namespace_events) = watch_trimmed::<NamespaceName>(
            &client,
            WatchedResource::Namespaces,
            watcher::Config::default(),
            |_| true,
            NamespaceName::trim,
        )?;
        let (ingress_classes, ingress_class_events) = watch_trimmed::<IngressClass>(
            &client,
            WatchedResource::IngressClasses,
            watcher::Config::default(),
            |_| true,
            trim_ingress_class,
        )?;
        let mut events = futures::stream::select_all([
            cluster_events,
            environment_events,
            deployment_events,
            ingress_events,
            alias_events,
            namespace_events,
            ingress_class_events,
        ]);
        let mut auditor = Auditor {
            settings: audit_settings,
            store: audits,
            ingresses,
            aliases,
            namespaces,
            ingress_classes,
            stuck: HashSet::new(),
        };
        let mut audit_ticker = tokio::time::interval(audit_interval);
        audit_ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut first_seen_deleting = HashMap::new();
        let version = read_version(client).fuse();
        tokio::pin!(version);
        let mut kubernetes_version = ServerVersion::NotReadYet;
        let mut progress = Progress::default();
        let mut published = false;
        let mut ticker = tokio::time::interval(confirm_interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);

        loop {
            let mut dirty = false;
            tokio::select! {
                read = &mut version, if kubernetes_version == ServerVersion::NotReadYet => {
                    kubernetes_version = ServerVersion::from(read);
                    dirty = true;
                }
                item = events.next() => {
                    let Some(first) = item else {
                        anyhow::bail!("the watch streams ended");
                    };
                    // Take every item that is ready, then rebuild once.
                    let mut batch = vec![first];
                    while batch.len() < 4096 {
                        match events.next().now_or_never() {
                            Some(Some(item)) => batch.push(item),
                            _ => break,
                        }
                    }
                    for (resource, step) in batch {
                        match step {
                            Step::Changed { relisted } => {
                                if relisted && !progress.listed[resource] {
                                    tracing::info!(resource = resource.plural(), "listed");
                                }
                                progress.listed[resource] |= relisted;
                                progress.last_error[resource] = None;
                                dirty = true;
                            }
                            Step::Pending => {}
                            Step::Failed(error) => {
                                tracing::warn!(resource = resource.plural(), %error,
                                    "watch failed; keeping the last view, retrying with backoff");
                                progress.last_error[resource] = Some(Instant::now());
                                progress.last_message[resource] = Some(error);
                                sink.report_error(name);
                            }
                        }
                    }
                }
                _ = ticker.tick() => {
                    if published && progress.all_healthy(Instant::now()) {
                        sink.confirm();
                    }
                }
                _ = audit_ticker.tick() => {
                    if published {
                        auditor.run(&sink, &progress);
                    }
                }
            }
            let version = match kubernetes_version {
                ServerVersion::NotReadYet => continue,
                ServerVersion::Unknown => None,
                ServerVersion::Known(version) => Some(version),
            };
            if !dirty || !progress.all_listed() {
                continue;
            }
            match build_view(
                &clusters.state(),
                &environments.state(),
                &deployments.state(),
                version,
            ) {
                Ok(BuiltView { mut view, ignored }) => {
                    view.note_removals(&mut first_seen_deleting, unix_now());
                    for why in &ignored {
                        tracing::warn!("{why}");
                    }
                    if published {
                        tracing::debug!(deployments = view.deployment_count(), "view updated");
                    } else {
                        tracing::info!(
                            deployments = view.deployment_count(),
                            "first complete view: ready"
                        );
                    }
                    sink.publish(view);
                    if !published {
                        // The first audit right away, not an interval later.
                        auditor.run(&sink, &progress);
                    }
                    published = true;
                }
                Err(error) => {
                    tracing::error!(error = %ErrorChain(&error),
                        "invalid Styrmin object; keeping the last good view");
                    sink.report_error(name);
                }
            }
        }
    }
}

/// The names of `objects`.
pub fn names<K: Resource>(objects: &[Arc<K>]) -> HashSet<String> {
    objects
        .iter()
        .filter_map(|object| object.meta().name.clone())
        .collect()
}

/// The audit's watches, and the controllers last found stuck (to warn once per new one).
struct Auditor {
    settings: AuditSettings,
    store: Arc<AuditStore>,
    ingresses: Store<AuditedIngress>,
    aliases: Store<AliasService>,
    namespaces: Store<NamespaceName>,
    ingress_classes: Store<IngressClass>,
    stuck: HashSet<String>,
}

impl Auditor {
    /// Audits the current view and stores; while a watch is not healthy, keeps the last
    /// audit and says why it is not newer.
    fn run(&mut self, sink: &ViewSink, progress: &Progress) {
        if let Some(why) = progress.unhealthy_because(Instant::now()) {
            tracing::debug!(%why, "audit not renewed");
            self.store.mark_stale(why);
            return;
        }
        let view = sink.current();
        let namespaces = names(&self.namespaces.state());
        let ingress_classes = names(&self.ingress_classes.state());
        let report = audit(
            &AuditInput {
                view: &view,
                ingresses: &self.ingresses.state(),
                aliases: &self.aliases.state(),
                namespaces: &namespaces,
                ingress_classes: &ingress_classes,
                now: unix_now(),
            },
            &self.settings,
        );
        let mut stuck = HashSet::new();
        for finding in report
            .findings
            .iter()
            .filter(|f| f.reason == Reason::StuckDeleting)
        {
            if !self.stuck.contains(&finding.name) {
                tracing::warn!(deployment = %finding.name, state = %finding.has, why = %finding.why,
                    fix = %finding.fix, "ingress controller stuck DELETING");
            }
            stuck.insert(finding.name.clone());
        }
        self.stuck = stuck;
        tracing::debug!(
            ingresses = report.ingresses,
            findings = report.findings.len(),
            "audit complete"
        );
        self.store.publish(report);
    }
}

#[cfg(test)]
mod tests;
