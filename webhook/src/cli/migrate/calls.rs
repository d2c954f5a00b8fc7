//! The calls `migrate` makes, on StyrminMigrations only: create one, read one, watch one, and
//! a merge patch of one of the three switches of its spec.

use futures::{Stream, StreamExt as _};
use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Api, Client};

use crate::crd::StyrminMigration;
pub use crate::crd::migration::Switch;

/// A call that failed, or its answer that says no.
#[derive(Debug, thiserror::Error)]
pub enum MigrateCallError {
    #[error(
        "a StyrminMigration named {name} already exists: choose another name, or delete it first (kubectl delete styrminmigration {name})"
    )]
    AlreadyExists { name: String },
    #[error(
        "a StyrminMigration named {name} already exists with other steps or settings: choose another name, or delete it first (kubectl delete styrminmigration {name})"
    )]
    Differs { name: String },
    #[error("no StyrminMigration named {name}")]
    NotFound { name: String },
    #[error(
        "the API server does not serve StyrminMigrations (styrmin.io/v1alpha1): install the chart's CRDs first"
    )]
    NotServed,
    #[error("StyrminMigration {name} was deleted")]
    Deleted { name: String },
    #[error("watching StyrminMigration {name}")]
    Watch {
        name: String,
        #[source]
        source: watcher::Error,
    },
    #[error("cannot {verb} StyrminMigration {name}")]
    Api {
        verb: &'static str,
        name: String,
        #[source]
        source: kube::Error,
    },
}

fn api(client: &Client) -> Api<StyrminMigration> {
    Api::all(client.clone())
}

fn status_code(error: &kube::Error) -> Option<u16> {
    match error {
        kube::Error::Api(status) => Some(status.code),
        _ => None,
    }
}

/// Creates `migration` (its status left out: the executor writes it).
pub async fn create(
    client: &Client,
    migration: &StyrminMigration,
) -> Result<StyrminMigration, MigrateCallError> {
    let name = migration.metadata.name.clone().unwrap_or_default();
    let mut object = migration.clone();
    object.status = None;
    object.metadata.resource_version = None;
    api(client)
        .create(&PostParams::default(), &object)
        .await
        .map_err(|source| match status_code(&source) {
            Some(409) => MigrateCallError::AlreadyExists { name },
            Some(404) => MigrateCallError::NotServed,
            _ => MigrateCallError::Api {
                verb: "create",
                name,
                source,
            },
        })
}

/// Reads the migration `name`.
pub async fn get(client: &Client, name: &str) -> Result<StyrminMigration, MigrateCallError> {
    api(client)
        .get(name)
        .await
        .map_err(|source| not_found_or(name, "read", source))
}

fn not_found_or(name: &str, verb: &'static str, source: kube::Error) -> MigrateCallError {
    match status_code(&source) {
        Some(404) => MigrateCallError::NotFound {
            name: name.to_owned(),
        },
        _ => MigrateCallError::Api {
            verb,
            name: name.to_owned(),
            source,
        },
    }
}

/// A merge patch of the switch on the migration `name`; the object as it is after it.
pub async fn flip(
    client: &Client,
    name: &str,
    switch: Switch,
) -> Result<StyrminMigration, MigrateCallError> {
    let patch = switch.patch();
    api(client)
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|source| not_found_or(name, switch.verb(), source))
}

/// The migration `name` each time it changes (a watch on that one object, listed again
/// after a break); an error of the watch is passed on and the watch goes on after a
/// backoff; [`MigrateCallError::Deleted`] when it is deleted.
pub fn watch(
    client: &Client,
    name: &str,
) -> impl Stream<Item = Result<StyrminMigration, MigrateCallError>> + use<> {
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let name = name.to_owned();
    watcher(api(client), config)
        .default_backoff()
        .filter_map(move |event| {
            let item = match event {
                Ok(watcher::Event::Apply(object) | watcher::Event::InitApply(object)) => {
                    Some(Ok(object))
                }
                Ok(watcher::Event::Delete(_)) => {
                    Some(Err(MigrateCallError::Deleted { name: name.clone() }))
                }
                Ok(watcher::Event::Init | watcher::Event::InitDone) => None,
                Err(source) => Some(Err(MigrateCallError::Watch {
                    name: name.clone(),
                    source,
                })),
            };
            std::future::ready(item)
        })
}
