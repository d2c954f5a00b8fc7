//! Carrying out [`StyrminMigration`](crate::crd::StyrminMigration)s: the leader (the
//! replica that holds the Lease, as for the report writer) moves the fleet step by step,
//! gated and reversible ([`run`], deciding with [`step`], calling through [`calls`]).

use crate::kube_source::ApiCall;

/// The executor's calls in every namespace, granted by the chart's ClusterRole only with
/// `migrations.enabled` (a test compares them): it reads the migrations, writes their
/// status and pauses one whose gate says so, sets the levels of a step and puts them back
/// (deleting one the step created), updates a deployment's last-deployed record, and reads
/// the Lease of the executor that owns a migration (another release's, in its namespace).
pub const MIGRATION_CALLS: [ApiCall; 7] = [
    ApiCall::Resource {
        group: "styrmin.io",
        version: "v1alpha1",
        resource: "styrminmigrations",
        verbs: &["get", "list", "watch", "patch"],
        names: &[],
    },
    ApiCall::Resource {
        group: "styrmin.io",
        version: "v1alpha1",
        resource: "styrminmigrations/status",
        verbs: &["patch"],
        names: &[],
    },
    ApiCall::Resource {
        group: "styrmin.io",
        version: "v1alpha1",
        resource: "styrminclusters",
        verbs: &["get", "create", "patch", "delete"],
        names: &[],
    },
    ApiCall::Resource {
        group: "styrmin.io",
        version: "v1alpha1",
        resource: "styrminenvironments",
        verbs: &["get", "create", "patch", "delete"],
        names: &[],
    },
    ApiCall::Resource {
        group: "styrmin.io",
        version: "v1alpha1",
        resource: "styrmindeployments",
        verbs: &["get", "create", "patch", "delete"],
        names: &[],
    },
    ApiCall::Resource {
        group: "styrmin.io",
        version: "v1alpha1",
        resource: "styrmindeployments/status",
        verbs: &["patch"],
        names: &[],
    },
    // The Lease of the executor that owns a migration, in its release's namespace: read by
    // its name, never written (`status.executor`).
    ApiCall::Resource {
        group: "coordination.k8s.io",
        version: "v1",
        resource: "leases",
        verbs: &["get"],
        names: &[crate::controllers::lease::LEASE_NAME],
    },
];

/// Writing Ingresses back and recording events, in every namespace (also with
/// `migrations.enabled`).
pub const MOVE_CALLS: [ApiCall; 2] = [
    ApiCall::Resource {
        group: "networking.k8s.io",
        version: "v1",
        resource: "ingresses",
        verbs: &["get", "update"],
        names: &[],
    },
    ApiCall::Resource {
        group: "events.k8s.io",
        version: "v1",
        resource: "events",
        verbs: &["create", "patch"],
        names: &[],
    },
];

/// The canary's calls, in the webhook's own namespace only (a Role): the executor creates
/// its canary Ingress there, reads its address and deletes it.
pub const CANARY_CALLS: [ApiCall; 1] = [ApiCall::Resource {
    group: "networking.k8s.io",
    version: "v1",
    resource: "ingresses",
    verbs: &["get", "create", "delete"],
    names: &[],
}];

pub mod calls;
pub mod metrics;
pub mod run;
pub mod step;
