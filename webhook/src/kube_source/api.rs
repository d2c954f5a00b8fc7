//! The calls the webhook makes to the API server, and the resources it watches.

/// One kind of call the webhook makes to the API server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ApiCall {
    /// Verbs on a resource of an API group, in every namespace.
    Resource {
        group: &'static str,
        version: &'static str,
        resource: &'static str,
        verbs: &'static [&'static str],
        /// Only these objects (`resourceNames`); empty: any.
        names: &'static [&'static str],
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

    /// Its API group, version and plural name (the run loop's `watch` checks that the watched type's are
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
            names: &[],
        }
    }

    /// The resource's plural name, for logs and the audit's `stale_because`.
    pub const fn plural(self) -> &'static str {
        self.group_version_plural().2
    }
}

/// What a source watches. Admission decides from the levels alone (`crate::decide` reads
/// the view, never an Ingress), so its memory does not grow with the cluster; the
/// controllers also watch what the audit reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WatchScope {
    /// The three Styrmin resources the view is built from.
    Admission,
    /// Every [`WatchedResource`]: the view and the audit.
    Everything,
}

impl WatchScope {
    /// Whether a source of this scope watches `resource`.
    pub const fn watches(self, resource: WatchedResource) -> bool {
        match self {
            WatchScope::Everything => true,
            WatchScope::Admission => matches!(
                resource,
                WatchedResource::StyrminClusters
                    | WatchedResource::StyrminEnvironments
                    | WatchedResource::StyrminDeployments
            ),
        }
    }

    /// Every call a source of this scope makes.
    pub const fn api_calls(self) -> &'static [ApiCall] {
        match self {
            WatchScope::Admission => ADMISSION_API_CALLS,
            WatchScope::Everything => API_CALLS,
        }
    }
}

/// The `/version` read (R9).
const VERSION_CALL: ApiCall = ApiCall::NonResource {
    path: "/version",
    verbs: &["get"],
};

/// Every call the controllers' source ([`WatchScope::Everything`]) makes to the API server:
/// each watched resource's, then `/version`. The controllers' ClusterRole must grant exactly
/// these and the controllers' own (a test compares them).
pub const API_CALLS: &[ApiCall] = &api_calls();

/// Every call admission's source ([`WatchScope::Admission`]) makes: the three Styrmin
/// resources' and `/version`. Admission's ClusterRole grants exactly these: no write verb,
/// and nothing that grows with the cluster.
pub const ADMISSION_API_CALLS: &[ApiCall] = &[
    WatchedResource::StyrminClusters.api_call(),
    WatchedResource::StyrminEnvironments.api_call(),
    WatchedResource::StyrminDeployments.api_call(),
    VERSION_CALL,
];

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
pub(super) struct ByResource<T>(pub(super) [T; WatchedResource::ALL.len()]);

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
