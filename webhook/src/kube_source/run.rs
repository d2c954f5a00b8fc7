//! The run loop: the watches, `/version`, rebuilding and publishing the view, the audits.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{FutureExt as _, StreamExt as _};
use k8s_openapi::api::networking::v1::IngressClass;
use kube::runtime::reflector::{self, Lookup, Store};
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use styrmin_ingress_rules::KubernetesVersion;

use super::api::{ByResource, WatchScope, WatchedResource};
use super::convert::{BuiltView, LAST_APPLIED, audit_listed, build_view, version_of};
use super::snapshot::WatchedCluster;
use crate::audit::moving::MovingIngresses;
use crate::audit::objects::{
    AliasService, AuditedIngress, IngressAsRead, NamespaceName, SERVICE_ALIAS_SELECTOR,
    trim_ingress_class,
};
use crate::audit::round::AuditRound;
use crate::audit::{AuditSettings, AuditStore, Reason};
use crate::clock::unix_now;
use crate::crd::{StyrminCluster, StyrminDeployment, StyrminEnvironment};
use crate::telemetry::ErrorChain;
use crate::view::{ViewSink, ViewSource, namespace_owner};

/// How long after its last error a watch counts as healthy again when no event has shown
/// it (longer than the watcher's largest backoff, so a watch that keeps failing never does).
pub const HEALTHY_AFTER: Duration = Duration::from_secs(60);

/// How many times `/version` is tried before the webhook goes on without it (R9 then
/// cannot be checked, and a warning says so).
const VERSION_ATTEMPTS: u32 = 5;

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
pub(super) struct Progress {
    pub(super) listed: ByResource<bool>,
    pub(super) last_error: ByResource<Option<Instant>>,
    /// The last error of each watch, for the audit's `stale_because`.
    pub(super) last_message: ByResource<Option<String>>,
}

impl Progress {
    /// Where the watches of `scope` stand before any has listed: a resource the scope does
    /// not watch counts as listed, so it never holds the gate.
    pub(super) fn for_scope(scope: WatchScope) -> Self {
        let mut progress = Progress::default();
        for resource in WatchedResource::ALL {
            progress.listed[resource] = !scope.watches(resource);
        }
        progress
    }

    pub(super) fn all_listed(&self) -> bool {
        self.listed.0.iter().all(|l| *l)
    }

    pub(super) fn all_healthy(&self, now: Instant) -> bool {
        self.all_listed()
            && self
                .last_error
                .0
                .iter()
                .all(|e| e.is_none_or(|at| now.duration_since(at) >= HEALTHY_AFTER))
    }

    /// Why the watches are not all healthy at `now` (`None` when they are).
    pub(super) fn unhealthy_because(&self, now: Instant) -> Option<String> {
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
    watch_stored_as(client, watched, config, keep, move |mut object: K| {
        trim(&mut object);
        object
    })
}

/// A watch that reads `K` and stores what `into` makes of each object kept (the Ingresses
/// are read as a resource and stored as a record, [`AuditedIngress`]).
fn watch_stored_as<K, S>(
    client: &Client,
    watched: WatchedResource,
    config: watcher::Config,
    keep: fn(&K) -> bool,
    into: impl Fn(K) -> S + Send + 'static,
) -> anyhow::Result<(Store<S>, Events)>
where
    K: Resource<DynamicType = ()> + Clone + fmt::Debug + DeserializeOwned + Send + Sync + 'static,
    S: Lookup<DynamicType = ()> + Clone + Send + Sync + 'static,
{
    let (group, version, plural) = watched.group_version_plural();
    anyhow::ensure!(
        (
            K::group(&()).as_ref(),
            K::version(&()).as_ref(),
            K::plural(&()).as_ref()
        ) == (group, version, plural)
            && (
                S::group(&()).as_ref(),
                S::version(&()).as_ref(),
                S::plural(&()).as_ref()
            ) == (group, version, plural),
        "{} is not the resource {watched:?} ({group}/{version} {plural})",
        K::kind(&())
    );
    let (reader, writer) = reflector::store::<S>();
    let read = watcher(Api::<K>::all(client.clone()), config)
        .default_backoff()
        .filter_map(move |item| {
            let kept = match item {
                Ok(
                    watcher::Event::Apply(object)
                    | watcher::Event::InitApply(object)
                    | watcher::Event::Delete(object),
                ) if !keep(&object) => None,
                Ok(event) => Some(Ok(stored_as(event, &into))),
                Err(error) => Some(Err(error)),
            };
            futures::future::ready(kept)
        });
    // `reflector`, not `.reflect()`: the stored type need not be a `kube::Resource`.
    let stream = reflector::reflector(writer, read)
        .map(move |item| (watched, step(item)))
        .boxed();
    Ok((reader, stream))
}

/// The event with its object made into what the store keeps.
fn stored_as<K, S>(event: watcher::Event<K>, into: impl Fn(K) -> S) -> watcher::Event<S> {
    match event {
        watcher::Event::Apply(object) => watcher::Event::Apply(into(object)),
        watcher::Event::Delete(object) => watcher::Event::Delete(into(object)),
        watcher::Event::InitApply(object) => watcher::Event::InitApply(into(object)),
        watcher::Event::Init => watcher::Event::Init,
        watcher::Event::InitDone => watcher::Event::InitDone,
    }
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
    rounds: Option<RoundSender>,
    watched: Option<tokio::sync::watch::Sender<Option<WatchedCluster>>>,
    moving: MovingIngresses,
    scope: WatchScope,
}

/// Where the audit's rounds go, for the cluster-wide controllers ([`crate::audit::round`]).
pub type RoundSender = tokio::sync::watch::Sender<Option<Arc<AuditRound>>>;

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
            rounds: None,
            watched: None,
            moving: MovingIngresses::default(),
            scope: WatchScope::Everything,
        }
    }

    /// Watches only what `scope` names (default: everything, the view and the audit). With
    /// [`WatchScope::Admission`] there is no audit: the audit settings go unused.
    pub fn with_scope(mut self, scope: WatchScope) -> Self {
        self.scope = scope;
        self
    }

    /// Sends each audit round there (the PolicyReport writer reads them); without it the
    /// rounds go nowhere.
    pub fn with_rounds(mut self, rounds: Option<RoundSender>) -> Self {
        self.rounds = rounds;
        self
    }

    /// Hands its stores there once the watches have started (the migration executor takes
    /// its snapshots of them); in admission's scope there are none to hand.
    pub fn with_watched_cluster(
        mut self,
        watched: tokio::sync::watch::Sender<Option<WatchedCluster>>,
    ) -> Self {
        self.watched = Some(watched);
        self
    }

    /// Where the migration executor says which Ingresses its step is moving: the audit
    /// counts them as moving, not `wrong_class`.
    pub fn with_moving(mut self, moving: MovingIngresses) -> Self {
        self.moving = moving;
        self
    }

    /// The client the source watches with (the controllers share it).
    pub fn client(&self) -> &Client {
        &self.client
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
        let KubeSource {
            client,
            confirm_interval,
            audit_interval,
            audit_settings,
            audits,
            rounds,
            watched,
            moving,
            scope,
        } = self;
        let (stores, mut events) = start_watches(&client, scope)?;
        if let (Some(watched), Some(audited)) = (watched, stores.audited.as_ref()) {
            watched.send_replace(Some(WatchedCluster {
                clusters: stores.clusters.clone(),
                environments: stores.environments.clone(),
                deployments: stores.deployments.clone(),
                ingresses: audited.ingresses.clone(),
                ingress_classes: audited.ingress_classes.clone(),
            }));
        }
        let auditor = stores.audited.map(|audited| Auditor {
            settings: audit_settings,
            store: audits,
            ingresses: audited.ingresses,
            aliases: audited.aliases,
            namespaces: audited.namespaces,
            ingress_classes: audited.ingress_classes,
            deployments: stores.deployments.clone(),
            rounds,
            moving,
            stuck: HashSet::new(),
            relists: 0,
            changed_since_round: true,
        });
        let mut source = Running {
            name: "kubernetes",
            sink,
            auditor,
            clusters: stores.clusters,
            environments: stores.environments,
            deployments: stores.deployments,
            progress: Progress::for_scope(scope),
            published: false,
            first_seen_deleting: HashMap::new(),
        };
        let mut audit_ticker = tokio::time::interval(audit_interval);
        audit_ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let version = read_version(client).fuse();
        tokio::pin!(version);
        let mut kubernetes_version = ServerVersion::NotReadYet;
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
                    dirty = source.note(batch);
                }
                _ = ticker.tick() => source.confirm(),
                _ = audit_ticker.tick() => {
                    if let (true, Some(auditor)) = (source.published, source.auditor.as_mut()) {
                        auditor.run(&source.sink, &source.progress);
                    }
                }
            }
            let version = match kubernetes_version {
                ServerVersion::NotReadYet => continue,
                ServerVersion::Unknown => None,
                ServerVersion::Known(version) => Some(version),
            };
            if dirty && source.progress.all_listed() {
                source.rebuild(version);
            }
        }
    }
}

/// The stores of the watches: the view's three, and the audit's four when the scope has them.
struct Stores {
    clusters: Store<StyrminCluster>,
    environments: Store<StyrminEnvironment>,
    deployments: Store<StyrminDeployment>,
    audited: Option<AuditedStores>,
}

/// The stores only the audit reads.
struct AuditedStores {
    ingresses: Store<AuditedIngress>,
    aliases: Store<AliasService>,
    namespaces: Store<NamespaceName>,
    ingress_classes: Store<IngressClass>,
}

/// Starts a watcher and reflector on every [`WatchedResource`] of `scope`: their stores,
/// and their events in one stream.
fn start_watches(
    client: &Client,
    scope: WatchScope,
) -> anyhow::Result<(Stores, futures::stream::SelectAll<Events>)> {
    // The StyrminCluster keeps its last-applied configuration: the `null` trap shows only
    // there, and there is one such object.
    let (clusters, cluster_events) = watch_trimmed::<StyrminCluster>(
        client,
        WatchedResource::StyrminClusters,
        watcher::Config::default(),
        |_| true,
        without_managed_fields::<StyrminCluster>,
    )?;
    let (environments, environment_events) =
        watch::<StyrminEnvironment>(client, WatchedResource::StyrminEnvironments)?;
    let (deployments, deployment_events) =
        watch::<StyrminDeployment>(client, WatchedResource::StyrminDeployments)?;
    let mut events =
        futures::stream::select_all([cluster_events, environment_events, deployment_events]);
    let audited = if scope == WatchScope::Everything {
        Some(start_audit_watches(client, &mut events)?)
    } else {
        None
    };
    let stores = Stores {
        clusters,
        environments,
        deployments,
        audited,
    };
    Ok((stores, events))
}

/// Starts the audit's watches, their events added to `events`.
fn start_audit_watches(
    client: &Client,
    events: &mut futures::stream::SelectAll<Events>,
) -> anyhow::Result<AuditedStores> {
    let (ingresses, ingress_events) = watch_stored_as::<IngressAsRead, AuditedIngress>(
        client,
        WatchedResource::Ingresses,
        watcher::Config::default(),
        |i| namespace_owner(&i.audited.namespace).is_some(),
        AuditedIngress::from,
    )?;
    let (aliases, alias_events) = watch_trimmed::<AliasService>(
        client,
        WatchedResource::Services,
        watcher::Config::default().labels(SERVICE_ALIAS_SELECTOR),
        |_| true,
        AliasService::trim,
    )?;
    let (namespaces, namespace_events) = watch_trimmed::<NamespaceName>(
        client,
        WatchedResource::Namespaces,
        watcher::Config::default(),
        |_| true,
        NamespaceName::trim,
    )?;
    let (ingress_classes, ingress_class_events) = watch_trimmed::<IngressClass>(
        client,
        WatchedResource::IngressClasses,
        watcher::Config::default(),
        |_| true,
        trim_ingress_class,
    )?;
    for stream in [
        ingress_events,
        alias_events,
        namespace_events,
        ingress_class_events,
    ] {
        events.push(stream);
    }
    Ok(AuditedStores {
        ingresses,
        aliases,
        namespaces,
        ingress_classes,
    })
}

/// The source while it runs: the stores the view is built from, the auditor, and where
/// each watch stands.
struct Running {
    name: &'static str,
    sink: ViewSink,
    /// `None` in admission's scope: no audit.
    auditor: Option<Auditor>,
    clusters: Store<StyrminCluster>,
    environments: Store<StyrminEnvironment>,
    deployments: Store<StyrminDeployment>,
    progress: Progress,
    published: bool,
    first_seen_deleting: HashMap<String, i64>,
}

impl Running {
    /// Notes a batch of watch events; `true` when a store changed.
    fn note(&mut self, batch: Vec<(WatchedResource, Step)>) -> bool {
        let mut dirty = false;
        for (resource, step) in batch {
            match step {
                Step::Changed { relisted } => {
                    if relisted && !self.progress.listed[resource] {
                        tracing::info!(resource = resource.plural(), "listed");
                    } else if let (true, Some(auditor)) = (relisted, self.auditor.as_mut()) {
                        auditor.relists += 1;
                    }
                    if let Some(auditor) = self.auditor.as_mut() {
                        auditor.changed_since_round = true;
                    }
                    self.progress.listed[resource] |= relisted;
                    self.progress.last_error[resource] = None;
                    dirty = true;
                }
                Step::Pending => {}
                Step::Failed(error) => {
                    tracing::warn!(resource = resource.plural(), %error,
                        "watch failed; keeping the last view, retrying with backoff");
                    self.progress.last_error[resource] = Some(Instant::now());
                    self.progress.last_message[resource] = Some(error);
                    self.sink.report_error(self.name);
                }
            }
        }
        dirty
    }

    /// Resets the view's age while every watch is healthy.
    fn confirm(&self) {
        if self.published && self.progress.all_healthy(Instant::now()) {
            self.sink.confirm();
        }
    }

    /// Builds the view from the three Styrmin stores and publishes it; the first one is
    /// audited right away, not an interval later.
    fn rebuild(&mut self, version: Option<KubernetesVersion>) {
        match build_view(
            &self.clusters.state(),
            &self.environments.state(),
            &self.deployments.state(),
            version,
        ) {
            Ok(BuiltView { mut view, ignored }) => {
                view.note_removals(&mut self.first_seen_deleting, unix_now());
                for why in &ignored {
                    tracing::warn!("{why}");
                }
                if self.published {
                    tracing::debug!(deployments = view.deployment_count(), "view updated");
                } else {
                    tracing::info!(
                        deployments = view.deployment_count(),
                        "first complete view: ready"
                    );
                }
                self.sink.publish(view);
                if let (false, Some(auditor)) = (self.published, self.auditor.as_mut()) {
                    auditor.run(&self.sink, &self.progress);
                }
                self.published = true;
            }
            Err(error) => {
                tracing::error!(error = %ErrorChain(&error),
                    "invalid Styrmin object; keeping the last good view");
                self.sink.report_error(self.name);
            }
        }
    }
}

/// The audit's watches, and the controllers last found stuck (to warn once per new one).
struct Auditor {
    settings: AuditSettings,
    store: Arc<AuditStore>,
    ingresses: Store<AuditedIngress>,
    aliases: Store<AliasService>,
    namespaces: Store<NamespaceName>,
    ingress_classes: Store<IngressClass>,
    deployments: Store<StyrminDeployment>,
    /// Where each round goes for the cluster-wide controllers (`--policy-reports`).
    rounds: Option<RoundSender>,
    /// The Ingresses the migration executor is moving.
    moving: MovingIngresses,
    stuck: HashSet<String>,
    /// How many times a watch has listed again after its first listing.
    relists: u64,
    /// Whether a watched object changed since the last round was sent.
    changed_since_round: bool,
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
        let ingresses = self.ingresses.state();
        let aliases = self.aliases.state();
        let previous = self.store.report();
        let report = audit_listed(
            &view,
            &ingresses,
            &aliases,
            &self.namespaces.state(),
            &self.ingress_classes.state(),
            &self.settings,
            previous.as_deref(),
            &self.moving.current(),
        );
        let mut stuck = HashSet::new();
        for finding in report
            .findings
            .iter()
            .filter(|f| f.reason == Reason::StuckDeleting)
        {
            if !self.stuck.contains(&*finding.name) {
                tracing::warn!(deployment = %finding.name, state = %finding.has, why = %finding.why,
                    fix = %finding.fix, "ingress controller stuck DELETING");
            }
            stuck.insert(finding.name.to_string());
        }
        self.stuck = stuck;
        tracing::debug!(
            ingresses = report.ingresses,
            findings = report.findings.len(),
            "audit complete"
        );
        let mut report = report;
        let same_findings = previous
            .as_ref()
            .is_some_and(|p| p.findings == report.findings);
        if let Some(previous) = previous.as_ref().filter(|_| same_findings) {
            // The last audit's findings stay; this audit's copy goes now.
            report.findings = previous.findings.clone();
        }
        let report = Arc::new(report);
        self.store.publish_shared(report.clone());
        let Some(rounds) = &self.rounds else {
            return;
        };
        // A steady cluster sends no round: same findings, no object changed, no relist.
        let same = !self.changed_since_round
            && same_findings
            && rounds
                .borrow()
                .as_ref()
                .is_some_and(|r| r.relists == self.relists);
        if same {
            return;
        }
        self.changed_since_round = false;
        rounds.send_replace(Some(Arc::new(AuditRound {
            audit: report,
            ingresses,
            aliases,
            deployments: self.deployments.state(),
            relists: self.relists,
        })));
    }
}
