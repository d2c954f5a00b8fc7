//! One listing of the cluster, read once instead of watched: what `audit`, `plan` and
//! `migrate plan` read, and what the migration executor reads at each migration step
//! ([`crate::controllers::migration::run`]), with the same calls the watches make
//! ([`API_CALLS`](super::API_CALLS)), each resource to its last page.
//!
//! The PolicyReport writer pages on its own
//! ([`list_page`](crate::controllers::policy_reports::calls::list_page)): it lists only its
//! reports' metadata, as dynamic objects, one page per call of its budget, each page fenced
//! by the Lease and given up when the Lease is lost, so a helper shared with [`list_all`]
//! would hold no more than the two lines that follow the continue token.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use k8s_openapi::api::networking::v1::IngressClass;
use kube::api::ListParams;
use kube::runtime::reflector::Store;
use kube::{Api, Client, Resource};

use super::convert::{BuiltView, InvalidObject, build_view, version_of};
use crate::audit::objects::{AuditedIngress, IngressAsRead};
use crate::crd::{StyrminCluster, StyrminDeployment, StyrminEnvironment};
use crate::view::{View, namespace_owner};
use styrmin_ingress_rules::KubernetesVersion;

/// What could not be read of the cluster.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    /// The API server's `/version`.
    #[error("cannot read /version")]
    Version(#[source] kube::Error),
    /// A page of a resource's list.
    #[error("cannot list {plural}")]
    List {
        plural: Cow<'static, str>,
        #[source]
        source: kube::Error,
    },
    /// A Styrmin object the view cannot be built from.
    #[error(transparent)]
    View(#[from] InvalidObject),
    /// The watches have not listed everything yet (or have stopped).
    #[error("the watches have not listed {0} yet")]
    NotListed(&'static str),
}

/// What `audit` and `plan` read of a cluster: the view built from the three Styrmin
/// resources, the Ingresses of Styrmin namespaces (trimmed), and the IngressClasses.
#[derive(Debug)]
pub struct Snapshot {
    pub clusters: Vec<Arc<StyrminCluster>>,
    pub environments: Vec<Arc<StyrminEnvironment>>,
    pub deployments: Vec<Arc<StyrminDeployment>>,
    pub view: View,
    /// The objects the view leaves out, with why ([`BuiltView::ignored`]).
    pub ignored: Vec<String>,
    pub kubernetes: Option<KubernetesVersion>,
    pub ingresses: Vec<Arc<AuditedIngress>>,
    pub ingress_classes: Vec<Arc<IngressClass>>,
}

impl Snapshot {
    /// Lists them.
    pub async fn read(client: &Client) -> Result<Self, SnapshotError> {
        let kubernetes = server_version(client).await?;
        let clusters = list_all(Api::<StyrminCluster>::all(client.clone()), None).await?;
        let environments = list_all(Api::<StyrminEnvironment>::all(client.clone()), None).await?;
        let deployments = list_all(Api::<StyrminDeployment>::all(client.clone()), None).await?;
        let ingresses = list_all(Api::<IngressAsRead>::all(client.clone()), None)
            .await?
            .into_iter()
            .filter(|i| namespace_owner(&i.audited.namespace).is_some())
            .map(|i| Arc::new(AuditedIngress::from(Arc::unwrap_or_clone(i))))
            .collect();
        let ingress_classes = list_all(Api::<IngressClass>::all(client.clone()), None).await?;
        Snapshot::of(
            kubernetes,
            clusters,
            environments,
            deployments,
            ingresses,
            ingress_classes,
        )
    }

    /// The view built from the levels read, with what else was read: how a listing and
    /// the watch stores ([`WatchedCluster::snapshot`]) both make one.
    fn of(
        kubernetes: Option<KubernetesVersion>,
        clusters: Vec<Arc<StyrminCluster>>,
        environments: Vec<Arc<StyrminEnvironment>>,
        deployments: Vec<Arc<StyrminDeployment>>,
        ingresses: Vec<Arc<AuditedIngress>>,
        ingress_classes: Vec<Arc<IngressClass>>,
    ) -> Result<Self, SnapshotError> {
        let BuiltView { view, ignored } =
            build_view(&clusters, &environments, &deployments, kubernetes)?;
        Ok(Snapshot {
            clusters,
            environments,
            deployments,
            view,
            ignored,
            kubernetes,
            ingresses,
            ingress_classes,
        })
    }
}

/// The API server's version as the rules read it (`None`: not one they can use).
async fn server_version(client: &Client) -> Result<Option<KubernetesVersion>, SnapshotError> {
    let info = client
        .apiserver_version()
        .await
        .map_err(SnapshotError::Version)?;
    Ok(version_of(&info))
}

/// The watch stores of the controllers' kube source, as far as a [`Snapshot`] reads them:
/// the migration executor takes its snapshot of them rather than listing the cluster again
/// at every step, resume and retry (at 10,000 Ingresses, tens of megabytes each time).
#[derive(Clone)]
pub struct WatchedCluster {
    pub(super) clusters: Store<StyrminCluster>,
    pub(super) environments: Store<StyrminEnvironment>,
    pub(super) deployments: Store<StyrminDeployment>,
    pub(super) ingresses: Store<AuditedIngress>,
    pub(super) ingress_classes: Store<IngressClass>,
}

impl fmt::Debug for WatchedCluster {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WatchedCluster").finish_non_exhaustive()
    }
}

/// Where the controllers' kube source hands its stores over (none before it has started).
pub type WatchedClusterFeed = tokio::sync::watch::Receiver<Option<WatchedCluster>>;

/// How long a snapshot waits for the watches' first listing before it gives up (the
/// executor backs off and tries again).
pub const LISTED_WITHIN: std::time::Duration = std::time::Duration::from_secs(30);

impl WatchedCluster {
    /// What the stores hold now, with `/version` read again. Waits up to [`LISTED_WITHIN`]
    /// for each watch's first complete listing; shares the stored objects, copies none.
    pub async fn snapshot(&self, client: &Client) -> Result<Snapshot, SnapshotError> {
        let listed = async {
            self.clusters
                .wait_until_ready()
                .await
                .map_err(|_| "styrminclusters")?;
            self.environments
                .wait_until_ready()
                .await
                .map_err(|_| "styrminenvironments")?;
            self.deployments
                .wait_until_ready()
                .await
                .map_err(|_| "styrmindeployments")?;
            self.ingresses
                .wait_until_ready()
                .await
                .map_err(|_| "ingresses")?;
            self.ingress_classes
                .wait_until_ready()
                .await
                .map_err(|_| "ingressclasses")
        };
        tokio::time::timeout(LISTED_WITHIN, listed)
            .await
            .map_err(|_| SnapshotError::NotListed("every watched resource"))?
            .map_err(SnapshotError::NotListed)?;
        Snapshot::of(
            server_version(client).await?,
            self.clusters.state(),
            self.environments.state(),
            self.deployments.state(),
            self.ingresses.state(),
            self.ingress_classes.state(),
        )
    }
}

/// Every object of a resource, a page of 500 at a time.
pub async fn list_all<K>(api: Api<K>, labels: Option<&str>) -> Result<Vec<Arc<K>>, SnapshotError>
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
            .map_err(|source| SnapshotError::List {
                plural: K::plural(&()),
                source,
            })?;
        objects.extend(page.items.into_iter().map(Arc::new));
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => params = params.continue_token(&token),
            _ => return Ok(objects),
        }
    }
}
