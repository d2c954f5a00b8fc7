//! The in-memory view the webhook decides from (rule W3), and the seam its sources plug into.
//!
//! A source (the policy file, or kube-rs reflectors on the custom resources) builds a whole
//! [`View`] and publishes it through a [`ViewSink`]; request handlers read the current one
//! from the [`ViewStore`] with one atomic load and never wait for a source.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use arc_swap::ArcSwap;
use styrmin_ingress_rules::{
    AppliedSettings, IngressTarget, KubernetesVersion, Level, Levels, settings_for,
};

use crate::clock::unix_now_ms;

/// What a Styrmin deployment is (issue text: `application` or `ingress-controller`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    #[default]
    Application,
    IngressController,
}

/// The state of a deployment (docs/rules.md §3).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Phase {
    Pending,
    Deploying,
    #[default]
    Running,
    Failed,
    /// An application whose namespace a backup restore is re-creating (product page); no
    /// rule depends on it, but Styrmin writes it and the view must accept it.
    Restoring,
    Deleting,
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Phase::Pending => "PENDING",
            Phase::Deploying => "DEPLOYING",
            Phase::Running => "RUNNING",
            Phase::Failed => "FAILED",
            Phase::Restoring => "RESTORING",
            Phase::Deleting => "DELETING",
        })
    }
}

/// One Styrmin deployment, which owns the namespace `styrmin-<id>`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Deployment {
    /// Its environment; `None` when the source does not know it.
    pub environment: Option<String>,
    pub role: Role,
    pub phase: Phase,
    /// Its own configuration level.
    pub level: Level,
    /// W5: the ingress settings it was last deployed with (dedicated, a class, or no
    /// class). When set, it decides its Ingresses instead of the three levels.
    pub last_deployed: Option<IngressTarget>,
    /// While it is `DELETING`, what the source knows about the removal (W2's message says
    /// since when and what holds it once that takes too long).
    pub removal: Option<Removal>,
}

/// What is known about a deployment's removal.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Removal {
    /// Unix seconds of the object's `metadata.deletionTimestamp`, when it has one.
    pub deletion_requested: Option<i64>,
    /// Unix seconds at which the source first saw it `DELETING` (a phase set by the
    /// operator carries no time of its own).
    pub first_seen: Option<i64>,
    /// The finalizers its object still has (`styrmin.io/kopf-finalizer` holds a stuck one).
    pub finalizers: Vec<String>,
}

impl Removal {
    /// Since when it is being removed: the deletion timestamp, else when it was first seen.
    pub fn since(&self) -> Option<i64> {
        self.deletion_requested.or(self.first_seen)
    }

    /// What its object shows to be holding the removal.
    pub fn hold(&self) -> RemovalHold<'_> {
        match (self.deletion_requested, self.finalizers.as_slice()) {
            (None, _) => RemovalHold::NotRequested,
            (Some(_), []) => RemovalHold::NothingLeft,
            (Some(_), finalizers) => RemovalHold::Finalizers(finalizers),
        }
    }
}

/// What holds a removal that does not finish, as far as the controller's StyrminDeployment
/// shows. Each has its own advice: removing a finalizer helps only where a deletion was
/// requested and a finalizer is what is left.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RemovalHold<'a> {
    /// A deletion was requested and these finalizers are left: the operator has not finished
    /// (an agent of v0.1.48 or earlier can stop here).
    Finalizers(&'a [String]),
    /// A deletion was requested and no finalizer is left. Kubernetes deletes such an object at
    /// once, so a removal that stays here means the webhook's view of it lags.
    NothingLeft,
    /// The phase says `DELETING` but no deletion of the object was requested: the operator has
    /// not got as far as deleting it.
    NotRequested,
}

impl RemovalHold<'_> {
    /// What the object shows, as a clause: `StyrminDeployment … still has the finalizer …`.
    pub fn held(&self, id: &str) -> String {
        let object = format!("StyrminDeployment styrmin-{id} in namespace styrmin-{id}");
        match self {
            RemovalHold::Finalizers([one]) => format!("{object} still has the finalizer {one}"),
            RemovalHold::Finalizers(many) => {
                format!("{object} still has the finalizers {}", many.join(", "))
            }
            RemovalHold::NothingLeft => {
                format!("{object} has no finalizer left but is still seen by the webhook")
            }
            RemovalHold::NotRequested => format!(
                "{object} is DELETING by its status only: no deletion of it was requested (it has no deletion timestamp)"
            ),
        }
    }

    /// The short form the audit shows in its `HAS` column.
    pub fn short(&self) -> String {
        match self {
            RemovalHold::Finalizers(finalizers) => format!("finalizer {}", finalizers.join(", ")),
            RemovalHold::NothingLeft => "no finalizer left".to_owned(),
            RemovalHold::NotRequested => "no deletion requested".to_owned(),
        }
    }

    /// What to do, for the one cause it is.
    pub fn advice(&self, id: &str) -> String {
        match self {
            RemovalHold::Finalizers(_) => format!(
                "An agent of Styrmin v0.1.48 or earlier can stop removing a controller: read the agent's version \
                 and remove the finalizer as \"A StyrminDeployment that keeps its finalizer\" says, with styrmin-{id} \
                 as both the name and the namespace; once the finalizer is gone, submit the config again"
            ),
            RemovalHold::NothingLeft => format!(
                "Kubernetes deletes an object whose deletion was requested once no finalizer is left, so the webhook's \
                 view of it is out of date: check with kubectl get styrmindeployment styrmin-{id} -n styrmin-{id}; \
                 if it is gone, the webhook's source of the view is failing (its log, and \
                 styrmin_webhook_view_source_valid), and deploys go through once the webhook sees the removal finish"
            ),
            RemovalHold::NotRequested => format!(
                "Removing a finalizer does not help here: the Styrmin operator set the phase DELETING and has not \
                 deleted the object. Check that the operator runs and read its log for styrmin-{id}; once it deletes \
                 the object and the removal finishes, submit the config again"
            ),
        }
    }
}

/// `3d4h`, `1h2m`, `12m5s`, `40s`: a duration as a person reads it.
pub fn human_duration(seconds: u64) -> String {
    let (d, h, m, s) = (
        seconds / 86_400,
        seconds / 3600,
        seconds / 60 % 60,
        seconds % 60,
    );
    if d >= 2 {
        return format!("{d}d{}h", h % 24);
    }
    match (h, m, s) {
        (0, 0, s) => format!("{s}s"),
        (0, m, 0) => format!("{m}m"),
        (0, m, s) => format!("{m}m{s}s"),
        (h, 0, _) => format!("{h}h"),
        (h, m, _) => format!("{h}h{m}m"),
    }
}

/// Unix seconds as RFC 3339 UTC (`2026-12-03T08:00:00Z`).
pub fn rfc3339(unix_seconds: i64) -> String {
    k8s_openapi::jiff::Timestamp::from_second(unix_seconds)
        .map_or_else(|_| format!("@{unix_seconds}"), |t| t.to_string())
}

/// Everything the decisions need, as one immutable value.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct View {
    cluster: Level,
    environments: HashMap<String, Level>,
    deployments: HashMap<String, Deployment>,
    kubernetes_version: Option<KubernetesVersion>,
    /// Environment id → ids of its ingress-controller deployments, sorted.
    controllers: HashMap<String, Vec<String>>,
    /// The cluster's `ingressClass` was last applied as `null` by client-side `kubectl apply`,
    /// which dropped it, and is stored with a value (the CRD's default): the `null` trap.
    cluster_class_applied_null: bool,
}

impl View {
    pub fn new(
        cluster: Level,
        environments: HashMap<String, Level>,
        deployments: HashMap<String, Deployment>,
        kubernetes_version: Option<KubernetesVersion>,
    ) -> Self {
        let mut controllers: HashMap<String, Vec<String>> = HashMap::new();
        for (id, deployment) in &deployments {
            if let (Role::IngressController, Some(env)) = (deployment.role, &deployment.environment)
            {
                controllers.entry(env.clone()).or_default().push(id.clone());
            }
        }
        for ids in controllers.values_mut() {
            ids.sort();
        }
        View {
            cluster,
            environments,
            deployments,
            kubernetes_version,
            controllers,
            cluster_class_applied_null: false,
        }
    }

    /// The view, with whether the cluster's `ingressClass` fell into the `null` trap.
    pub fn with_cluster_class_applied_null(mut self, applied_null: bool) -> Self {
        self.cluster_class_applied_null = applied_null;
        self
    }

    pub fn cluster(&self) -> &Level {
        &self.cluster
    }

    /// Whether the cluster's `ingressClass` was written `null` with client-side `kubectl
    /// apply` and is stored with a value instead (the audit says so).
    pub fn cluster_class_applied_null(&self) -> bool {
        self.cluster_class_applied_null
    }

    pub fn environment(&self, id: &str) -> Option<&Level> {
        self.environments.get(id)
    }

    pub fn deployment(&self, id: &str) -> Option<&Deployment> {
        self.deployments.get(id)
    }

    pub fn deployment_count(&self) -> usize {
        self.deployments.len()
    }

    /// Every deployment with its id, in no particular order.
    pub fn deployments(&self) -> impl Iterator<Item = (&str, &Deployment)> {
        self.deployments.iter().map(|(id, d)| (id.as_str(), d))
    }

    /// The ids of the environments that have a level, sorted.
    pub fn environment_ids(&self) -> Vec<&str> {
        let mut ids: Vec<&str> = self.environments.keys().map(String::as_str).collect();
        ids.sort_unstable();
        ids
    }

    /// Fills in when each `DELETING` deployment was first seen so (kept in `first_seen`
    /// from one view to the next, which forgets the ones no longer `DELETING`).
    pub fn note_removals(&mut self, first_seen: &mut HashMap<String, i64>, now: i64) {
        first_seen.retain(|id, _| {
            self.deployments
                .get(id)
                .is_some_and(|d| d.phase == Phase::Deleting)
        });
        for (id, deployment) in &mut self.deployments {
            if let Some(removal) = deployment.removal.as_mut() {
                removal.first_seen = Some(*first_seen.entry(id.clone()).or_insert(now));
            }
        }
    }

    /// The API server's version, where the source knows it (R9).
    pub fn kubernetes_version(&self) -> Option<KubernetesVersion> {
        self.kubernetes_version
    }

    /// The ingress-controller deployments of an environment, with their ids.
    pub fn controllers_of<'a>(
        &'a self,
        environment: &str,
    ) -> impl Iterator<Item = (&'a str, &'a Deployment)> + 'a {
        self.controllers
            .get(environment)
            .into_iter()
            .flatten()
            .filter_map(|id| self.deployments.get(id).map(|d| (id.as_str(), d)))
    }

    /// A deployment's three levels (rule W1): cluster, environment and deployment, an
    /// unknown one counting as not set. These decide its Ingresses only when it has no
    /// last-deployed record: see [`settings_for_deployment`](Self::settings_for_deployment).
    pub fn levels_for_deployment<'a>(&'a self, deployment_id: &str) -> Levels<'a> {
        let deployment = self.deployments.get(deployment_id);
        Levels {
            cluster: &self.cluster,
            environment: deployment
                .and_then(|d| d.environment.as_deref())
                .and_then(|env| self.environments.get(env)),
            deployment: deployment.map(|d| &d.level),
        }
    }

    /// The settings that apply to a deployment's Ingresses and why (rules W1, W5): its
    /// last-deployed record when it has one, else its levels.
    pub fn settings_for_deployment(&self, deployment_id: &str) -> AppliedSettings {
        let record = self
            .deployments
            .get(deployment_id)
            .and_then(|d| d.last_deployed.as_ref());
        settings_for(record, &self.levels_for_deployment(deployment_id))
    }

    /// The levels that decide an environment's dedicated ingress (W2): cluster and environment.
    pub fn levels_for_environment<'a>(&'a self, environment: &str) -> Levels<'a> {
        Levels {
            cluster: &self.cluster,
            environment: self.environments.get(environment),
            deployment: None,
        }
    }
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Application => "application",
            Role::IngressController => "ingress-controller",
        }
    }
}

/// What `GET /debug/deployments/{id}` shows: what the view holds for deployment `id`, which
/// settings its Ingresses get and why (W5), and where its environment's controllers stand.
pub fn debug_deployment(view: &View, id: &str) -> serde_json::Value {
    let deployment = view.deployment(id);
    let settings = view.settings_for_deployment(id);
    let environment = deployment.and_then(|d| d.environment.as_deref());
    let controllers: Vec<serde_json::Value> = environment
        .into_iter()
        .flat_map(|env| view.controllers_of(env))
        .map(|(id, d)| serde_json::json!({"id": id, "phase": d.phase.to_string()}))
        .collect();
    serde_json::json!({
        "deployment": id,
        "known": deployment.is_some(),
        "namespace": format!("{NAMESPACE_PREFIX}{id}"),
        "environment": environment,
        "role": deployment.map(|d| d.role.as_str()),
        "phase": deployment.map(|d| d.phase.to_string()),
        "last_deployed": deployment.and_then(|d| d.last_deployed.as_ref()).map(ToString::to_string),
        "settings": settings.source().as_str(),
        "applied": settings.applied().to_string(),
        "levels_give": settings.levels.target.to_string(),
        "levels_decided_by": settings.levels.decided_by().to_string(),
        "waits_for_redeploy": settings.waits_for_redeploy(),
        "why": settings.why(),
        "environment_dedicated_ingress": environment
            .map(|env| styrmin_ingress_rules::resolve(&view.levels_for_environment(env)).target.is_dedicated()),
        "environment_controllers": controllers,
    })
}

/// The namespace prefix of a Styrmin deployment: deployment `X` owns `styrmin-X`.
pub const NAMESPACE_PREFIX: &str = "styrmin-";

/// The deployment that owns a namespace, when Styrmin manages it.
pub fn namespace_owner(namespace: &str) -> Option<&str> {
    namespace
        .strip_prefix(NAMESPACE_PREFIX)
        .filter(|id| !id.is_empty())
}

/// Holds the current view; cheap to read from any number of request handlers.
#[derive(Debug)]
pub struct ViewStore {
    current: ArcSwap<View>,
    ready: AtomicBool,
    /// Unix milliseconds of the last time a source said the view is current (0: never).
    confirmed_at_ms: AtomicU64,
    /// Unix milliseconds of the last published change (0: never).
    changed_at_ms: AtomicU64,
    /// Whether the source's latest version was valid (false while a last good view is kept).
    source_valid: AtomicBool,
}

impl Default for ViewStore {
    fn default() -> Self {
        ViewStore {
            current: ArcSwap::from_pointee(View::default()),
            ready: AtomicBool::new(false),
            confirmed_at_ms: AtomicU64::new(0),
            changed_at_ms: AtomicU64::new(0),
            source_valid: AtomicBool::new(true),
        }
    }
}

impl ViewStore {
    /// The current view.
    pub fn load(&self) -> Arc<View> {
        self.current.load_full()
    }

    /// Whether a source has published a first complete view.
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    /// How long ago a source last confirmed the view; `None` before the first one.
    pub fn age(&self) -> Option<Duration> {
        match self.confirmed_at_ms.load(Ordering::Relaxed) {
            0 => None,
            at => Some(Duration::from_millis(unix_now_ms().saturating_sub(at))),
        }
    }

    /// Unix seconds of the last published change; `None` before the first one.
    pub fn changed_at_unix(&self) -> Option<f64> {
        match self.changed_at_ms.load(Ordering::Relaxed) {
            0 => None,
            at => Some(at as f64 / 1000.0),
        }
    }

    fn publish(&self, view: View) {
        self.current.store(Arc::new(view));
        let now = unix_now_ms();
        self.changed_at_ms.store(now, Ordering::Relaxed);
        self.confirmed_at_ms.store(now, Ordering::Relaxed);
        self.source_valid.store(true, Ordering::Relaxed);
        self.ready.store(true, Ordering::Release);
    }

    /// Whether the source's latest version was valid; false while it keeps a last good view.
    pub fn source_valid(&self) -> bool {
        self.source_valid.load(Ordering::Relaxed)
    }

    fn confirm(&self) {
        self.confirmed_at_ms.store(unix_now_ms(), Ordering::Relaxed);
        // A source confirms only a view it knows to be current: its source is valid again.
        self.source_valid.store(true, Ordering::Relaxed);
    }
}

/// What a source may do to the store. Sources never see the decision code.
#[derive(Clone)]
pub struct ViewSink {
    store: Arc<ViewStore>,
    on_error: Arc<dyn Fn(&'static str) + Send + Sync>,
}

impl fmt::Debug for ViewSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ViewSink")
            .field("store", &self.store)
            .finish_non_exhaustive()
    }
}

impl ViewSink {
    /// `on_error` is told the source's name each time it keeps the last good view because the
    /// new one is invalid or unreachable (the webhook counts these in a metric).
    pub fn new(store: Arc<ViewStore>, on_error: Arc<dyn Fn(&'static str) + Send + Sync>) -> Self {
        ViewSink { store, on_error }
    }

    /// Replaces the view with a complete new one.
    pub fn publish(&self, view: View) {
        self.store.publish(view);
    }

    /// Says that the current view is still up to date (resets the staleness clock).
    pub fn confirm(&self) {
        self.store.confirm();
    }

    /// The view in force.
    pub fn current(&self) -> Arc<View> {
        self.store.load()
    }

    /// Says that an update failed and the last good view stays in force.
    pub fn report_error(&self, source: &'static str) {
        self.store.source_valid.store(false, Ordering::Relaxed);
        (self.on_error)(source);
    }
}

/// A source of views. It publishes a first view, then keeps the store current until the
/// process ends; it runs in its own task.
pub trait ViewSource: Send + 'static {
    /// The source's name, for logs and metrics.
    fn name(&self) -> &'static str;

    /// Keeps the view current through `sink`. Returns only on a fatal error.
    fn run(self, sink: ViewSink) -> impl Future<Output = anyhow::Result<()>> + Send;
}

#[cfg(test)]
mod tests {
    use styrmin_ingress_rules::{Setting, SettingsSource, resolve};

    use super::*;

    fn class(name: &str) -> Level {
        Level {
            ingress_class: Setting::Value(name.to_owned()),
            ..Level::default()
        }
    }

    fn view() -> View {
        let mut deployments = HashMap::new();
        deployments.insert(
            "web1".to_owned(),
            Deployment {
                environment: Some("prod".into()),
                level: class("haproxy"),
                ..Deployment::default()
            },
        );
        deployments.insert(
            "pinned".to_owned(),
            Deployment {
                environment: Some("prod".into()),
                level: class("haproxy"),
                last_deployed: Some(IngressTarget::Dedicated),
                ..Deployment::default()
            },
        );
        deployments.insert(
            "ctl9".to_owned(),
            Deployment {
                environment: Some("prod".into()),
                role: Role::IngressController,
                phase: Phase::Deleting,
                ..Deployment::default()
            },
        );
        let environments = HashMap::from([("prod".to_owned(), class("nginx"))]);
        View::new(class("contour"), environments, deployments, None)
    }

    #[test]
    fn durations_read_like_kubectl_ages() {
        for (seconds, text) in [
            (40, "40s"),
            (600, "10m"),
            (725, "12m5s"),
            (3660, "1h1m"),
            (7200, "2h"),
            (86_400 + 3600, "25h"),
            (3 * 86_400 + 4 * 3600 + 59, "3d4h"),
        ] {
            assert_eq!(human_duration(seconds), text, "{seconds}");
        }
    }

    #[test]
    fn namespace_owner_is_the_suffix() {
        assert_eq!(namespace_owner("styrmin-web1"), Some("web1"));
        assert_eq!(namespace_owner("styrmin-"), None);
        assert_eq!(namespace_owner("default"), None);
        assert_eq!(namespace_owner("kube-system"), None);
    }

    #[test]
    fn w1_levels_of_a_known_deployment() {
        let v = view();
        let got = resolve(&v.levels_for_deployment("web1"));
        assert_eq!(got.target.enforced_class(), Some("haproxy"));
    }

    #[test]
    fn w1_unknown_deployment_gets_the_cluster_level() {
        let v = view();
        assert_eq!(
            resolve(&v.levels_for_deployment("nobody"))
                .target
                .enforced_class(),
            Some("contour")
        );
    }

    #[test]
    fn w5_last_deployed_record_decides_alone() {
        let v = view();
        let applied = v.settings_for_deployment("pinned");
        assert_eq!(applied.resolved.target, IngressTarget::Dedicated);
        assert_eq!(applied.source(), SettingsSource::Record);
        assert_eq!(applied.levels.target.enforced_class(), Some("haproxy"));
        assert!(applied.waits_for_redeploy());
        // Without a record, the levels decide.
        let applied = v.settings_for_deployment("web1");
        assert_eq!(applied.source(), SettingsSource::Levels);
        assert_eq!(applied.resolved.target.enforced_class(), Some("haproxy"));
    }

    #[test]
    fn debug_deployment_says_which_settings_and_why() {
        let v = view();
        let pinned = debug_deployment(&v, "pinned");
        assert_eq!(pinned["settings"], "record");
        assert_eq!(pinned["applied"], "dedicated");
        assert_eq!(pinned["last_deployed"], "dedicated");
        assert_eq!(pinned["levels_give"], "class:haproxy");
        assert_eq!(pinned["levels_decided_by"], "deployment.ingress_class");
        assert_eq!(pinned["waits_for_redeploy"], true);
        assert_eq!(pinned["environment"], "prod");
        assert_eq!(
            pinned["environment_controllers"],
            serde_json::json!([{"id": "ctl9", "phase": "DELETING"}])
        );
        let web1 = debug_deployment(&v, "web1");
        assert_eq!(web1["settings"], "levels");
        assert_eq!(web1["last_deployed"], serde_json::Value::Null);
        assert_eq!(web1["applied"], "class:haproxy");
        let nobody = debug_deployment(&v, "nobody");
        assert_eq!(nobody["known"], false);
        assert_eq!(nobody["applied"], "class:contour");
    }

    #[test]
    fn controllers_are_indexed_by_environment() {
        let v = view();
        let ids: Vec<_> = v.controllers_of("prod").map(|(id, _)| id).collect();
        assert_eq!(ids, vec!["ctl9"]);
        assert_eq!(v.controllers_of("dev").count(), 0);
    }

    #[test]
    fn store_is_not_ready_until_a_first_publish() {
        let store = Arc::new(ViewStore::default());
        assert!(!store.is_ready());
        assert!(store.age().is_none());
        let errors = Arc::new(AtomicU64::new(0));
        let counted = errors.clone();
        let sink = ViewSink::new(
            store.clone(),
            Arc::new(move |_| {
                counted.fetch_add(1, Ordering::Relaxed);
            }),
        );
        sink.publish(view());
        assert!(store.is_ready());
        assert!(store.age().is_some_and(|age| age < Duration::from_secs(5)));
        assert_eq!(store.load().deployment_count(), 3);
        sink.report_error("test");
        assert_eq!(errors.load(Ordering::Relaxed), 1);
    }
}
