//! The `--source kubernetes` view source (rule W3): kube-rs reflectors on the three Styrmin
//! custom resources, turned into the same [`View`](crate::view::View) that `--policy-file`
//! feeds. What else it watches is its [`WatchScope`]: admission's
//! ([`WatchScope::Admission`]) stops there; the controllers' ([`WatchScope::Everything`])
//! also watches what the audit reads: the Ingresses, service aliases, namespaces and
//! IngressClasses ([`WatchedResource`]).
//!
//! The part that talks to the API server is small: [`KubeSource`]'s `run` starts one
//! `watcher` + `reflector` per resource of its scope (every call it may make is in
//! [`API_CALLS`], which the ClusterRole in `charts/styrmin-webhook/templates/rbac.yaml` must
//! match), reads `/version` once, and after each batch of watch events rebuilds the view
//! from the three stores with the pure [`build_view`]. Nothing here runs while a request is
//! answered: handlers only load the published view.
//!
//! - Not ready until every resource it watches has been listed completely once (the watcher's
//!   `InitDone`) and the version has been read (or given up on after a few tries).
//! - A watch error keeps the last view in force: the watcher reconnects with kube-runtime's
//!   `default_backoff` (0.8 s doubling to 30 s), resumes from the last resource version
//!   (bookmarks included), and relists after `410 Gone`; the reflector swaps a relist in
//!   only once it is complete. Errors are logged and counted
//!   (`styrmin_webhook_view_update_failures_total{source="kubernetes"}`).
//! - `styrmin_webhook_view_age_seconds` is the time since the view was last known current:
//!   confirmed every few seconds while no watch has failed for [`HEALTHY_AFTER`].
//!
//! The command line reads the same resources once instead of watching them: [`Snapshot`]
//! (`audit`, `plan`, `migrate plan`), every page of each list ([`list_all`]). The migration
//! executor takes its [`Snapshot`] from the controllers' watch stores
//! ([`WatchedCluster::snapshot`]), and lists only when it keeps no stores.

mod api;
mod convert;
mod run;
mod snapshot;

pub use api::*;
pub use convert::*;
#[cfg(test)]
use run::Progress;
pub use run::*;
pub use snapshot::*;

#[cfg(test)]
mod tests;
